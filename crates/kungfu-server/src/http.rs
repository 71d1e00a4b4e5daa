//! The HTTP listener (`http_listen`): where the MCP door (`kungfu-mcp`) is mounted, at `/mcp`,
//! beside the probes (`/healthz`, `/readyz`), the Prometheus metrics (`/metrics`, metrics.rs) and
//! the web console (`/ui/`, console.rs), whose JSON API calls through the same door.
//!
//! The door is a client of this node's own public API: it holds a gRPC channel to the API
//! listener over loopback, so an MCP call is authenticated, rate-limited, forwarded to the leader
//! and answered exactly as the same call made over gRPC (STYLE habit 12: a transport stays at its
//! door, and every door gives the same answer and the same code for the same request).
//!
//! The door tells the API the address each of its clients connected from, vouched for with the
//! node's door token (`grpc::client_addr`), so registrations are limited per MCP client as they
//! are per gRPC client, not once for everything behind the door's loopback connection.
//!
//! Shutdown: the node's shutdown cancels `stop`, which ends the door's open streams and stops
//! accepting; connections still open after [`SHUTDOWN_GRACE`](crate::server::SHUTDOWN_GRACE) are
//! dropped, as on the API listener. The door's channel closes when the last request using it has
//! ended, before the API listener's own graceful shutdown waits on it.

use crate::config::Config;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use tokio_util::sync::CancellationToken;

/// The address the door dials to reach this node's API: the API listener's own address, with an
/// unspecified IP (`0.0.0.0`, `[::]`) replaced by loopback of the same family.
pub fn own_api(api: SocketAddr) -> SocketAddr {
    let ip = match api.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, api.port())
}

/// The MCP URL to log and print: the advertised address if one is configured, else the address the
/// listener actually bound (which resolves a configured port 0).
pub fn mcp_url(config: &Config, bound: SocketAddr) -> String {
    match &config.http_advertise {
        Some(advertised) => format!("http://{advertised}/mcp"),
        None => format!("http://{bound}/mcp"),
    }
}

/// Serves the MCP door on `listener` until `stop` is cancelled and the open connections have
/// closed. `api` is the address the API listener bound, `door_token` the node's
/// ([`Backend::door_token`](crate::backend::Backend::door_token)).
pub async fn serve(
    config: &Config,
    api: SocketAddr,
    backend: std::sync::Arc<crate::backend::Backend>,
    listener: tokio::net::TcpListener,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let door_token = backend.door_token.clone();
    // Lazy: the API listener is bound but may not be accepting yet when this runs; the first MCP
    // request connects. The bounds are the API's own: a call answered within `write_timeout_ms`
    // (plus a margin for the reply) is never cut off here first.
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{}", own_api(api)))?
        .connect_timeout(std::time::Duration::from_secs(2))
        .tcp_nodelay(true);
    let mut door = kungfu_mcp::Door::new(endpoint.connect_lazy(), None);
    if let Some(token) = door_token {
        door = door.vouching_for_clients(token.parse()?);
    }
    let mut options = kungfu_mcp::HttpOptions {
        allowed_hosts: config.mcp_allowed_hosts(),
        allowed_origins: config.mcp_allowed_origins(),
        max_body_bytes: config.mcp.max_body_bytes,
    };
    // A configured port 0 binds some free port: admit the loopback names at the port it got.
    let bound = listener.local_addr()?;
    if config.mcp.allowed_hosts.is_empty() && config.http_listen.is_some_and(|h| h.port() == 0) {
        let bound_config = Config { http_listen: Some(bound), ..config.clone() };
        options.allowed_hosts = bound_config.mcp_allowed_hosts();
        if config.mcp.allowed_origins.is_empty() {
            options.allowed_origins = bound_config.mcp_allowed_origins();
        }
    }
    let console = config.console.enabled.then(|| {
        crate::console::router(
            config,
            backend.clone(),
            door.clone(),
            options.allowed_hosts.clone(),
            options.allowed_origins.clone(),
            stop.clone(),
        )
    });
    let mut router = kungfu_mcp::http_router(door, options, stop.clone())
        .merge(probes(backend))
        .merge(crate::metrics::route(config.data_dir.clone()));
    if let Some(console) = console {
        router = router.merge(console);
    }
    // The client's address reaches the door as `ConnectInfo` in each request's extensions. No
    // Nagle on accepted sockets: an answer's last small write must not wait for a delayed ACK.
    let service = router.into_make_service_with_connect_info::<SocketAddr>();
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp: &mut tokio::net::TcpStream| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY could not be set on an MCP connection");
        }
    });
    axum::serve(listener, service).with_graceful_shutdown(stop.cancelled_owned()).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_door_dials_loopback_when_the_api_listens_on_every_interface() {
        let addr = |s: &str| s.parse::<SocketAddr>().expect("addr");
        assert_eq!(own_api(addr("0.0.0.0:7400")), addr("127.0.0.1:7400"));
        assert_eq!(own_api(addr("[::]:7400")), addr("[::1]:7400"));
        assert_eq!(own_api(addr("10.1.2.3:7400")), addr("10.1.2.3:7400"));
    }
}

/// The probes of an orchestrator or a load balancer (issue #16): `/healthz` answers 200 while the
/// process serves at all; `/readyz` answers 200 only while the node is ready to serve writes and
/// linearizable reads (`Backend::readiness`, the rule gRPC health uses), else 503 with the reason.
fn probes(backend: std::sync::Arc<crate::backend::Backend>) -> axum::Router {
    use axum::http::StatusCode;
    use axum::routing::get;
    axum::Router::new().route("/healthz", get(|| async { (StatusCode::OK, "ok\n") })).route(
        "/readyz",
        get(move || {
            let backend = backend.clone();
            async move {
                match backend.readiness() {
                    Ok(()) => (StatusCode::OK, "ready\n".to_string()),
                    Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {why}\n")),
                }
            }
        }),
    )
}
