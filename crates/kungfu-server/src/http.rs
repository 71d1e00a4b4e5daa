//! The HTTP listener (`http_listen`): where the MCP door (`kungfu-mcp`) is mounted, at `/mcp`,
//! beside the probes (`/healthz`, `/readyz`), the Prometheus metrics (`/metrics`, metrics.rs) and
//! the web console (`/ui/`, console.rs), whose JSON API calls through the same door.
//!
//! The door is a client of this node's own public API: each MCP call is one gRPC call into the
//! node's API service stack (`grpc::ApiStack`), in this process with no socket between, so it is
//! authenticated, rate-limited, forwarded to the leader and answered exactly as the same call made
//! over gRPC (STYLE habit 12: a transport stays at its door, and every door gives the same answer
//! and the same code for the same request).
//!
//! The door hands the API the address each of its clients connected from, as a request extension
//! that only this process can set (`grpc::client_addr`), so registrations are limited per MCP
//! client as they are per gRPC client, not once for everything behind the door.
//!
//! Shutdown: the node's shutdown cancels `stop`, which ends the door's open streams and stops
//! accepting; connections still open after [`SHUTDOWN_GRACE`](crate::server::SHUTDOWN_GRACE) are
//! dropped, as on the API listener.

use crate::config::Config;
use std::net::SocketAddr;
use tokio_util::sync::CancellationToken;

/// The MCP URL to log and print: the advertised address if one is configured, else the address the
/// listener actually bound (which resolves a configured port 0).
pub fn mcp_url(config: &Config, bound: SocketAddr) -> String {
    match &config.http_advertise {
        Some(advertised) => format!("http://{advertised}/mcp"),
        None => format!("http://{bound}/mcp"),
    }
}

/// Serves the MCP door on `listener` until `stop` is cancelled and the open connections have
/// closed. `api` is the node's API service stack, called in process.
pub async fn serve(
    config: &Config,
    api: kungfu_mcp::Api,
    backend: std::sync::Arc<crate::backend::Backend>,
    listener: tokio::net::TcpListener,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let door = kungfu_mcp::Door::new(api, None);
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
