//! The client's address, as per-address limits must see it (L4: registrations are limited per
//! client address). A call can reach the API from someone other than its client:
//!
//! - the node's own HTTP doors (the MCP door at `/mcp`, [`crate::http`], and the console) call the
//!   API's service stack in this process, with no connection at all;
//! - a follower forwards calls to the leader ([`super::forward`]), so every client of a follower
//!   would look like that follower.
//!
//! The first put the client's address in the request's extensions ([`ClientAddr`]), which only
//! code in this process can do: it is believed as it is. The second says who the client is in
//! [`kungfu_api::CLIENT_ADDR`]; this layer, the outermost of the API but for the tracing one
//! ([`super::trace`]), believes that header only on a forwarded call (`kungfu-forwarded`) whose
//! connection comes from the address of a current member of the cluster (an IP in the membership,
//! or one its host names resolve to, re-resolved every 5 s). Anyone else's header is ignored and
//! the connection's own address counts, so a client cannot escape its limit by claiming another
//! address. (On a cluster whose members all share one host, every client on that host connects
//! from a member's address; that host is trusted.)
//!
//! The layer then states the address it settled on in the header (so a forwarded call carries it
//! to the leader) and in the request's extensions ([`ClientAddr`]), where [`super::credentials`]
//! reads it.

use crate::backend::Backend;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::body::Body;
use tonic::transport::server::TcpConnectInfo;
use tower::{Layer, Service};

pub use kungfu_api::ClientAddr;

/// Who vouches for an address claimed in [`kungfu_api::CLIENT_ADDR`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Voucher {
    /// A call forwarded (`kungfu-forwarded`) over a connection from a member's address.
    Member,
    /// Nobody: the claim is ignored.
    Nobody,
}

/// The client's address: the one an in-process door handed over, else the claim when a member
/// vouches for it, else the connection's.
pub fn settle(
    in_process: Option<IpAddr>,
    peer: Option<IpAddr>,
    claimed: Option<IpAddr>,
    voucher: Voucher,
) -> Option<IpAddr> {
    match (in_process, claimed, voucher) {
        (Some(ip), _, _) => Some(ip),
        (None, Some(ip), Voucher::Member) => Some(ip),
        _ => peer,
    }
}

/// How often the host names in the membership are resolved again (a replaced container keeps its
/// name and may come back with another address).
const RESOLVE_EVERY: std::time::Duration = std::time::Duration::from_secs(5);
/// How often the membership is looked at for a change, which is resolved at once: a node that
/// starts knows no membership until it bootstraps or hears from a leader, and waiting a whole
/// [`RESOLVE_EVERY`] after that left a fresh cluster's forwarding followers unrecognised.
const MEMBERSHIP_CHECK_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// The addresses that the host names of the membership (`kungfu-2:7400`, as in a compose or
/// Kubernetes deployment) resolve to, refreshed in the background: the request path never waits
/// on DNS. Addresses written as IPs need no resolving and are read from the membership directly.
type NamedMembers = Arc<std::sync::RwLock<std::collections::HashSet<IpAddr>>>;

/// The layer; one per API listener.
#[derive(Clone, Debug)]
pub struct ClientAddrLayer {
    b: Arc<Backend>,
    named: NamedMembers,
}

impl ClientAddrLayer {
    /// The layer, and a task that resolves the membership's host names every [`RESOLVE_EVERY`]
    /// until the last copy of the layer and its services is dropped.
    pub fn new(b: Arc<Backend>) -> ClientAddrLayer {
        let named = NamedMembers::default();
        let weak = Arc::downgrade(&named);
        let node = b.node.clone();
        tokio::spawn(async move {
            // The membership entry last resolved, and when.
            let mut resolved_at: Option<(Option<kungfu_raft::types::LogId>, tokio::time::Instant)> = None;
            loop {
                let (names, membership): (Vec<String>, _) = {
                    let m = node.metrics();
                    let names = m
                        .membership_config
                        .membership()
                        .nodes()
                        .flat_map(|(_, n)| [n.api.clone(), n.raft.clone()])
                        .filter(|a| a.parse::<SocketAddr>().is_err())
                        .collect();
                    (names, m.membership_config.log_id().clone())
                };
                let due = match &resolved_at {
                    Some((at, when)) => *at != membership || when.elapsed() >= RESOLVE_EVERY,
                    None => true,
                };
                if !due {
                    if weak.strong_count() == 0 {
                        return;
                    }
                    tokio::time::sleep(MEMBERSHIP_CHECK_EVERY).await;
                    continue;
                }
                resolved_at = Some((membership, tokio::time::Instant::now()));
                let mut resolved = std::collections::HashSet::new();
                for name in &names {
                    match tokio::net::lookup_host(name.as_str()).await {
                        Ok(addrs) => resolved.extend(addrs.map(|a| a.ip())),
                        Err(e) => tracing::debug!(member = %name, "cannot resolve a member's address: {e}"),
                    }
                }
                let Some(named) = weak.upgrade() else { return };
                *named.write().unwrap_or_else(|p| p.into_inner()) = resolved;
                drop(named);
                tokio::time::sleep(MEMBERSHIP_CHECK_EVERY).await;
            }
        });
        ClientAddrLayer { b, named }
    }
}

impl<S> Layer<S> for ClientAddrLayer {
    type Service = ClientAddrService<S>;
    fn layer(&self, inner: S) -> ClientAddrService<S> {
        ClientAddrService { inner, b: self.b.clone(), named: self.named.clone() }
    }
}

/// The service the layer wraps around the forwarding layer and the routes.
#[derive(Clone, Debug)]
pub struct ClientAddrService<S> {
    inner: S,
    b: Arc<Backend>,
    named: NamedMembers,
}

impl<S> ClientAddrService<S> {
    /// Whether `peer` is the address of a current member of the cluster (its API or raft address,
    /// written as an IP or as a host name that resolves to it).
    fn is_member(&self, peer: IpAddr) -> bool {
        let metrics = self.b.node.metrics();
        let by_ip = metrics.membership_config.membership().nodes().any(|(_, node)| {
            [&node.api, &node.raft].iter().any(|a| a.parse::<SocketAddr>().is_ok_and(|a| a.ip() == peer))
        });
        by_ip || self.named.read().unwrap_or_else(|p| p.into_inner()).contains(&peer)
    }

    fn voucher(&self, req: &http::Request<Body>, peer: Option<IpAddr>) -> Voucher {
        let forwarded = req.headers().contains_key(super::forward::FORWARDED);
        if forwarded && peer.is_some_and(|p| self.is_member(p)) {
            return Voucher::Member;
        }
        Voucher::Nobody
    }
}

impl<S> Service<http::Request<Body>> for ClientAddrService<S>
where
    S: Service<http::Request<Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<Body>) -> S::Future {
        let in_process = req.extensions().get::<ClientAddr>().map(|c| c.0);
        let peer = req.extensions().get::<TcpConnectInfo>().and_then(|c| c.remote_addr()).map(|a| a.ip());
        let claimed = req
            .headers()
            .get(kungfu_api::CLIENT_ADDR)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<IpAddr>().ok());
        // Only worth a look at the membership when there is a claim to vouch for.
        let voucher =
            if in_process.is_none() && claimed.is_some() { self.voucher(&req, peer) } else { Voucher::Nobody };
        let client = settle(in_process, peer, claimed, voucher);
        let headers = req.headers_mut();
        headers.remove(kungfu_api::CLIENT_ADDR);
        if let Some(ip) = client {
            if let Ok(v) = http::HeaderValue::from_str(&ip.to_string()) {
                headers.insert(kungfu_api::CLIENT_ADDR, v);
            }
            req.extensions_mut().insert(ClientAddr(ip));
        }
        self.inner.call(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn a_claim_counts_only_from_an_in_process_door_or_a_vouching_member() {
        let peer = Some(ip("127.0.0.1"));
        let claim = Some(ip("203.0.113.7"));
        let door = Some(ip("198.51.100.9"));
        assert_eq!(settle(door, None, None, Voucher::Nobody), door, "an in-process door's address, no connection");
        assert_eq!(settle(door, peer, claim, Voucher::Member), door);
        assert_eq!(settle(None, peer, claim, Voucher::Member), claim);
        assert_eq!(settle(None, peer, claim, Voucher::Nobody), peer, "an unvouched claim is ignored");
        assert_eq!(settle(None, peer, None, Voucher::Member), peer, "no claim: the connection's address");
        assert_eq!(settle(None, None, None, Voucher::Nobody), None);
    }
}
