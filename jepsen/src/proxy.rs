//! The loopback mode's network: a TCP proxy with one listener per directed raft link.
//!
//! Node `i` dials peer `j` at `link_addr(i, j)` (the server's `[raft.dial]` override), and the
//! proxy forwards to `j`'s raft port. Each link is `Up` or `Down`; cutting a link closes its open
//! connections and holds new ones without answering (a blackhole: the dialer times out, as across
//! a real partition). No privileges needed.

use anyhow::Result;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The state of every directed link `(from, to)`.
#[derive(Debug, Clone)]
pub struct Proxy {
    links: Arc<BTreeMap<(u64, u64), Link>>,
}

#[derive(Debug)]
struct Link {
    addr: SocketAddr,
    up: watch::Sender<bool>,
}

impl Proxy {
    /// Starts one listener per ordered pair of distinct nodes; `raft` maps node id to its raft
    /// listen address.
    pub async fn start(raft: &BTreeMap<u64, SocketAddr>) -> Result<Proxy> {
        let mut links = BTreeMap::new();
        for from in raft.keys() {
            for (to, target) in raft {
                if from == to {
                    continue;
                }
                let listener = TcpListener::bind("127.0.0.1:0").await?;
                let addr = listener.local_addr()?;
                let (up, rx) = watch::channel(true);
                tokio::spawn(serve(listener, *target, rx));
                links.insert((*from, *to), Link { addr, up });
            }
        }
        Ok(Proxy { links: Arc::new(links) })
    }

    /// Where node `from` dials node `to`.
    pub fn link_addr(&self, from: u64, to: u64) -> SocketAddr {
        self.links.get(&(from, to)).map(|l| l.addr).unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)))
    }

    /// Cuts (`up = false`) or heals the directed link `from → to`.
    pub fn set(&self, from: u64, to: u64, up: bool) {
        if let Some(l) = self.links.get(&(from, to)) {
            let _ = l.up.send(up);
        }
    }

    /// Heals every link.
    pub fn heal_all(&self) {
        for l in self.links.values() {
            let _ = l.up.send(true);
        }
    }
}

async fn serve(listener: TcpListener, target: SocketAddr, up: watch::Receiver<bool>) {
    loop {
        let Ok((inbound, _)) = listener.accept().await else { continue };
        let mut state = up.clone();
        tokio::spawn(async move {
            if !*state.borrow() {
                // Blackhole: hold the connection silently until the link heals, then drop it.
                let _ = state.wait_for(|u| *u).await;
                return;
            }
            let Ok(outbound) = TcpStream::connect(target).await else { return };
            let _ = inbound.set_nodelay(true);
            let _ = outbound.set_nodelay(true);
            let (mut ri, mut wi) = inbound.into_split();
            let (mut ro, mut wo) = outbound.into_split();
            let pump = async {
                tokio::select! {
                    _ = tokio::io::copy(&mut ri, &mut wo) => {},
                    _ = tokio::io::copy(&mut ro, &mut wi) => {},
                }
            };
            tokio::select! {
                _ = pump => {},
                _ = state.wait_for(|u| !*u) => {},
            }
            let _ = wi.shutdown().await;
            let _ = wo.shutdown().await;
        });
    }
}
