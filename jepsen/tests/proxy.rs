//! The loopback mode's per-link proxy (no privileges needed): a link forwards both ways while up,
//! a cut link closes its open connections and answers nothing to new ones, and healing restores it.

use kungfu_jepsen::proxy::Proxy;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// An echo server standing in for a node's raft port.
async fn echo() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else { return };
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// Sends `msg` and reads it back within `bound`; None when nothing came back.
async fn round_trip(s: &mut TcpStream, msg: &[u8], bound: Duration) -> Option<Vec<u8>> {
    s.write_all(msg).await.ok()?;
    let mut buf = vec![0u8; msg.len()];
    match tokio::time::timeout(bound, s.read_exact(&mut buf)).await {
        Ok(Ok(_)) => Some(buf),
        _ => None,
    }
}

#[tokio::test]
async fn a_cut_link_blackholes_and_a_healed_link_forwards_again() {
    let (n1, n2) = (echo().await, echo().await);
    let proxy = Proxy::start(&BTreeMap::from([(1, n1), (2, n2)])).await.expect("proxy");
    let link = proxy.link_addr(1, 2);
    let mut open = TcpStream::connect(link).await.expect("connect through the link");
    assert_eq!(round_trip(&mut open, b"up", Duration::from_secs(5)).await.as_deref(), Some(&b"up"[..]));

    proxy.set(1, 2, false);
    // The open connection is closed by the cut; a new one is accepted but hears nothing.
    assert_eq!(round_trip(&mut open, b"cut", Duration::from_millis(500)).await, None);
    let mut during = TcpStream::connect(link).await.expect("a blackholed link still accepts");
    assert_eq!(round_trip(&mut during, b"cut", Duration::from_millis(500)).await, None);
    // The reverse link is independent (one-way partitions).
    let mut back = TcpStream::connect(proxy.link_addr(2, 1)).await.expect("reverse link");
    assert_eq!(round_trip(&mut back, b"rev", Duration::from_secs(5)).await.as_deref(), Some(&b"rev"[..]));

    proxy.heal_all();
    let mut after = TcpStream::connect(link).await.expect("connect after heal");
    assert_eq!(round_trip(&mut after, b"healed", Duration::from_secs(5)).await.as_deref(), Some(&b"healed"[..]));
}
