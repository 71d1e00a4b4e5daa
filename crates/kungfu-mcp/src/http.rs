//! The Streamable HTTP door at `/mcp`: rmcp's tower service on an axum router, serving both
//! protocol revisions hosts use today.
//!
//! - 2025-11-25 and older: `initialize` opens a session (`Mcp-Session-Id`); POST carries calls,
//!   GET the server's stream, DELETE ends the session. Sessions live in this process, close after
//!   [`SESSION_IDLE`] without traffic, and are at most [`MAX_SESSIONS`] at once.
//! - 2026-07-28: no session; `server/discover` and self-contained requests (each with its
//!   protocol version and capabilities in `_meta`), answered as plain JSON. rmcp picks the path
//!   per request from the request itself, so one endpoint serves both.
//!
//! Protection: the `Host` header must name an allowed host (DNS rebinding), a request with an
//! `Origin` must come from an allowed origin (none by default: hosts that are not browsers send
//! none), and a request body over the limit is refused with 413 before it is parsed.

use crate::door::Door;
use crate::sessions::{BoundedSessions, MAX_SESSIONS};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The path the door is served at.
pub const PATH: &str = "/mcp";
/// How long a 2025-11-25 session lives without a request.
pub const SESSION_IDLE: Duration = Duration::from_secs(300);
/// The hosts allowed when the options name none: loopback only, never "any".
pub const LOOPBACK_HOSTS: &[&str] = &["localhost", "127.0.0.1", "::1"];
/// The default bound of a request body.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// The HTTP door's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOptions {
    /// Hosts (`kungfu.example`, `10.0.0.5:7000`) the `Host` header may name; a bare host allows
    /// any port. Empty means [`LOOPBACK_HOSTS`].
    pub allowed_hosts: Vec<String>,
    /// Origins (`https://app.example:443`, `http://localhost:*`) a request with an `Origin`
    /// header may come from. Empty refuses every request that has one.
    pub allowed_origins: Vec<String>,
    /// The largest request body accepted; larger ones are refused with 413.
    pub max_body_bytes: usize,
}

impl Default for HttpOptions {
    fn default() -> HttpOptions {
        HttpOptions {
            allowed_hosts: LOOPBACK_HOSTS.iter().map(|h| h.to_string()).collect(),
            allowed_origins: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
        }
    }
}

/// The router serving POST, GET and DELETE at [`PATH`]. Cancelling `shutdown` ends every session
/// and stream and refuses new requests.
pub fn http_router(door: Door, options: HttpOptions, shutdown: CancellationToken) -> axum::Router {
    let allowed_hosts = if options.allowed_hosts.is_empty() {
        LOOPBACK_HOSTS.iter().map(|h| h.to_string()).collect()
    } else {
        options.allowed_hosts
    };
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(allowed_hosts)
        .with_allowed_origins(options.allowed_origins)
        // An empty list refuses every Origin (rmcp's own default lets every one through).
        .enforce_origin_validation()
        .with_max_request_body_bytes(options.max_body_bytes)
        .with_legacy_session_mode(true)
        // 2026-07-28 answers are single JSON documents rather than one-event SSE streams.
        .with_json_response(true)
        .with_cancellation_token(shutdown);
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(SESSION_IDLE);
    let sessions = BoundedSessions::new(sessions, MAX_SESSIONS);
    let service = StreamableHttpService::new(move || Ok(door.for_session()), Arc::new(sessions), config);
    axum::Router::new().route_service(PATH, service)
}
