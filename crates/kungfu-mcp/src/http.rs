//! The Streamable HTTP door at `/mcp`: rmcp's tower service on an axum router, serving both
//! protocol revisions hosts use today.
//!
//! - 2025-11-25 and older: `initialize` opens a session (`Mcp-Session-Id`); POST carries calls,
//!   GET the server's stream, DELETE ends the session (answered 204 No Content: rmcp answers 202,
//!   which the Python SDK reports as "Session termination failed: 202"; it and the TypeScript SDK
//!   take 200 and 204 as success). Sessions live in this process, close after [`SESSION_IDLE`]
//!   without traffic, and are at most [`MAX_SESSIONS`] at once.
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
    axum::Router::new().route_service(PATH, service).layer(axum::middleware::from_fn(session_ended_is_no_content))
}

/// A DELETE that ended a session is answered 204 No Content rather than rmcp's 202 Accepted: the
/// session is gone when the answer is sent, nothing was merely accepted, and the SDKs count only
/// 200 and 204 as a successful termination.
async fn session_ended_is_no_content(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let delete = request.method() == http::Method::DELETE;
    let mut response = next.run(request).await;
    if delete && response.status() == http::StatusCode::ACCEPTED {
        *response.status_mut() = http::StatusCode::NO_CONTENT;
        *response.body_mut() = axum::body::Body::empty();
        response.headers_mut().remove(http::header::CONTENT_TYPE);
        response.headers_mut().remove(http::header::CONTENT_LENGTH);
    }
    response
}

/// The MCP door's protection for another door on the same listener (the console's JSON API): the
/// `Host` header must name an allowed host (DNS rebinding) and an `Origin`, when there is one,
/// must be an allowed origin, by the rules the MCP door applies (rmcp's): a host entry without a
/// port admits any port, an origin entry ending in `:*` admits any port. `allowed_hosts` empty
/// means [`LOOPBACK_HOSTS`]; `allowed_origins` empty refuses every request with an `Origin`.
/// The refusal says which header is at fault, for a 403.
pub fn admits(headers: &http::HeaderMap, allowed_hosts: &[String], allowed_origins: &[String]) -> Result<(), String> {
    let host = headers.get(http::header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    let Some((host_name, host_port)) = authority(host) else {
        return Err("the request has no valid Host header".to_string());
    };
    let loopback: Vec<String>;
    let hosts = if allowed_hosts.is_empty() {
        loopback = LOOPBACK_HOSTS.iter().map(|h| h.to_string()).collect();
        &loopback
    } else {
        allowed_hosts
    };
    let host_ok = hosts.iter().filter_map(|a| authority(a.trim())).any(|(name, port)| {
        name == host_name
            && match port {
                Some(p) => host_port == Some(p),
                None => true,
            }
    });
    if !host_ok {
        return Err(format!("Host {host:?} is not an allowed host of this node (mcp.allowed_hosts)"));
    }
    let Some(origin) = headers.get(http::header::ORIGIN) else { return Ok(()) };
    let origin = origin.to_str().unwrap_or("");
    let admitted = origin_parts(origin).is_some_and(|(scheme, name, port)| {
        allowed_origins.iter().any(|allowed| {
            let allowed = allowed.trim();
            let (base, any_port) = match allowed.strip_suffix(":*") {
                Some(base) => (base, true),
                None => (allowed, false),
            };
            let Some((a_scheme, a_name, a_port)) = origin_parts(base) else { return false };
            let default = |s: &str| match s {
                "http" => Some(80),
                "https" => Some(443),
                _ => None,
            };
            a_scheme == scheme
                && a_name == name
                && (any_port || a_port.is_none() || a_port == port.or_else(|| default(&scheme)))
        })
    });
    if admitted { Ok(()) } else { Err(format!("Origin {origin:?} is not an allowed origin (mcp.allowed_origins)")) }
}

/// `host[:port]` as a lower-case host without brackets and its port.
fn authority(text: &str) -> Option<(String, Option<u16>)> {
    let a = http::uri::Authority::try_from(text).ok()?;
    Some((a.host().trim_matches(['[', ']']).to_ascii_lowercase(), a.port_u16()))
}

/// `scheme://host[:port]` as its lower-case scheme, host and port.
fn origin_parts(text: &str) -> Option<(String, String, Option<u16>)> {
    let uri = http::Uri::try_from(text).ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let (host, port) = authority(uri.authority()?.as_str())?;
    Some((scheme, host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(host: &str, origin: Option<&str>) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        h.insert(http::header::HOST, host.parse().expect("host"));
        if let Some(o) = origin {
            h.insert(http::header::ORIGIN, o.parse().expect("origin"));
        }
        h
    }

    #[test]
    fn a_rebinding_host_or_a_foreign_origin_is_refused_and_the_page_s_own_is_admitted() {
        let hosts = vec!["127.0.0.1:7600".to_string(), "kungfu.example".to_string()];
        let origins = vec!["http://127.0.0.1:7600".to_string(), "https://app.example:*".to_string()];
        assert!(admits(&headers("127.0.0.1:7600", None), &hosts, &origins).is_ok());
        assert!(admits(&headers("127.0.0.1:7600", Some("http://127.0.0.1:7600")), &hosts, &origins).is_ok());
        assert!(admits(&headers("kungfu.example:9000", None), &hosts, &origins).is_ok(), "a bare host, any port");
        assert!(admits(&headers("127.0.0.1:7601", None), &hosts, &origins).is_err(), "another port");
        assert!(admits(&headers("evil.example:7600", None), &hosts, &origins).is_err(), "DNS rebinding");
        let foreign = admits(&headers("127.0.0.1:7600", Some("http://evil.example")), &hosts, &origins);
        assert!(foreign.is_err_and(|e| e.contains("Origin")), "a foreign origin");
        assert!(admits(&headers("127.0.0.1:7600", Some("https://app.example:8443")), &hosts, &origins).is_ok());
        assert!(admits(&headers("127.0.0.1:7600", Some("null")), &hosts, &origins).is_err());
        // No list: loopback names only.
        assert!(admits(&headers("localhost:1234", None), &[], &[]).is_ok());
        assert!(admits(&headers("10.0.0.1:1234", None), &[], &[]).is_err());
    }
}
