//! The gRPC door: a thin adapter over the service layer ([`Backend`], [`Watches`]). It is the only
//! place of the server that knows gRPC. What it does for every call:
//!
//! - reads the transport facts of a request once ([`credentials`]): the bearer credential of
//!   `authorization: Bearer …`, the consistency asked for by `kungfu-consistency: stale`, and the
//!   client's address;
//! - converts the request with `kungfu_api::request` (a malformed field is INVALID_ARGUMENT naming
//!   it), calls the service layer, and converts its answer with `kungfu_api::response`;
//! - turns a [`Rejection`] into a `tonic::Status` in one place ([`status`], `kungfu_api`'s one table
//!   of codes with `google.rpc.ErrorInfo`), and a stale read's staleness into response metadata
//!   ([`respond`]).
//!
//! Files: [`api`] (the six protocol services and the coordination layer's `CoordService` and
//! `RecordService`), [`admin`] (the operator service), [`watch`] (the
//! watch streams), [`client_addr`] (the client's address behind the MCP door or a forwarding
//! follower), [`forward`] (followers forward calls to the leader) and [`oversize`] (tonic's
//! refusal of an oversize request as a LIMIT_EXCEEDED rejection), both tower layers over HTTP/2,
//! and [`trace`] (each call in a span that continues the caller's trace, with telemetry on);
//! [`ApiStack`] puts them together, with health and reflection, as one service stack that
//! [`serve`] serves on the API listener and the node's HTTP doors call in process.

pub mod admin;
pub mod api;
pub mod client_addr;
pub mod forward;
pub mod oversize;
pub mod trace;
pub mod watch;

use crate::backend::{Backend, Read};
use crate::credentials::{Consistency, Credentials};
use crate::watch::Watches;
use kungfu_api::pb;
use kungfu_types::Rejection;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tower::layer::util::{Identity, Stack};

/// The metadata a caller sends to ask for a stale read (`kungfu-consistency: stale`).
pub const CONSISTENCY: &str = "kungfu-consistency";
/// The metadata of a stale answer: the applied index it reflects, and the entries this node knows
/// are committed but not yet applied.
pub const APPLIED_INDEX: &str = "kungfu-applied-index";
pub const LAG_ENTRIES: &str = "kungfu-lag-entries";
/// How long an operator call may wait for its outcome when the caller sent no deadline.
pub const DEFAULT_CALL_BUDGET: Duration = Duration::from_secs(60);

/// The credential of an `authorization` value whose scheme is `Bearer`, in any case (the scheme is
/// case-insensitive: RFC 7235 §2.1, RFC 6750 §2.1), after the spaces that follow the scheme;
/// untrimmed at its end. None for another scheme or no credential.
pub(crate) fn bearer_credential(value: &str) -> Option<&str> {
    let (scheme, rest) = value.split_once(' ')?;
    let credential = rest.trim_start_matches(' ');
    (scheme.eq_ignore_ascii_case("bearer") && !credential.is_empty()).then_some(credential)
}

/// The transport facts of a request, in domain terms.
pub fn credentials<T>(req: &tonic::Request<T>) -> Credentials {
    let meta = |name: &str| req.metadata().get(name).and_then(|v| v.to_str().ok());
    let bearer = meta("authorization").and_then(bearer_credential).map(str::to_string);
    let consistency = if meta(CONSISTENCY) == Some("stale") { Consistency::Stale } else { Consistency::Linearizable };
    // The address the client-address layer settled on (the MCP door's or a forwarding follower's
    // client, when vouched for), else the connection's own.
    let remote = match req.extensions().get::<client_addr::ClientAddr>() {
        Some(c) => Some(c.0),
        None => req.remote_addr().map(|a| a.ip()),
    };
    Credentials { bearer, consistency, remote }
}

/// A rejection as the gRPC status every call answers it with: the one conversion of the door.
pub fn status(r: Rejection) -> tonic::Status {
    kungfu_api::rejection_status(&r)
}

/// The response to a read, with the staleness metadata of a stale read.
pub fn respond<R, P>(read: Read<R>, f: impl FnOnce(R) -> P) -> tonic::Response<P> {
    let mut r = tonic::Response::new(f(read.value));
    if let Some((applied, lag)) = read.stale {
        if let Ok(v) = applied.to_string().parse() {
            r.metadata_mut().insert(APPLIED_INDEX, v);
        }
        if let Ok(v) = lag.to_string().parse() {
            r.metadata_mut().insert(LAG_ENTRIES, v);
        }
    }
    r
}

/// How long an operator call may wait for its outcome: a little less than the caller's
/// `grpc-timeout` (so the answer arrives before the caller gives up), or [`DEFAULT_CALL_BUDGET`].
pub fn call_budget<T>(req: &tonic::Request<T>) -> Duration {
    let parsed = req.metadata().get("grpc-timeout").and_then(|v| v.to_str().ok()).and_then(parse_grpc_timeout);
    match parsed {
        Some(d) => d.saturating_sub((d / 10).min(Duration::from_secs(2))),
        None => DEFAULT_CALL_BUDGET,
    }
}

/// The gRPC `grpc-timeout` header: at most 8 digits and a unit (`H M S m u n`).
fn parse_grpc_timeout(text: &str) -> Option<Duration> {
    let unit = text.chars().last()?;
    let digits = &text[..text.len() - unit.len_utf8()];
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        'H' => Duration::from_secs(n * 3600),
        'M' => Duration::from_secs(n * 60),
        'S' => Duration::from_secs(n),
        'm' => Duration::from_millis(n),
        'u' => Duration::from_micros(n),
        'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The layers every call of the API passes, outermost first: its span ([`trace`]), its client's
/// address ([`client_addr`]), forwarding to the leader ([`forward`]), the oversize refusal
/// ([`oversize`]).
type Layers = tower::ServiceBuilder<
    Stack<
        oversize::OversizeLayer,
        Stack<forward::ForwardLayer, Stack<client_addr::ClientAddrLayer, Stack<trace::TraceLayer, Identity>>>,
    >,
>;

/// The node's public API as one service stack: every service (the protocol's, the operator's,
/// the watches, health and reflection) behind [`Layers`]. The API listener serves it over HTTP/2
/// ([`serve`]); the node's own HTTP doors (the MCP door, the console) call it in this process
/// ([`ApiStack::in_process`]): a tool call is one gRPC call through the same layers and services,
/// with no socket between.
#[derive(Clone)]
pub struct ApiStack {
    layers: Layers,
    routes: tonic::service::Routes,
    health: tonic_health::server::HealthReporter,
}

impl std::fmt::Debug for ApiStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiStack").field("layers", &self.layers).finish_non_exhaustive()
    }
}

impl ApiStack {
    /// The stack of node `b`, its watches served by `watches`. Spawns the client-address layer's
    /// resolver; call inside the runtime.
    pub fn new(b: &Arc<Backend>, watches: Watches) -> anyhow::Result<ApiStack> {
        let max = b.config.api.max_message_bytes;
        let api = api::Api::new(b.clone());
        let (health, health_service) = tonic_health::server::health_reporter();
        // Reflection in both revisions: grpcurl and grpcui speak v1, Python's grpcio-reflection and
        // older grpcurl builds only v1alpha (issue #16).
        let reflection = || {
            tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        };
        let reflection_v1alpha = reflection().build_v1alpha()?;
        let reflection = reflection().build_v1()?;
        let mut routes = tonic::service::Routes::builder();
        routes
            .add_service(health_service)
            .add_service(reflection)
            .add_service(reflection_v1alpha)
            .add_service(
                pb::agent_service_server::AgentServiceServer::new(api.clone())
                    .max_decoding_message_size(max)
                    .max_encoding_message_size(max),
            )
            .add_service(
                pb::memory_service_server::MemoryServiceServer::new(api.clone())
                    .max_decoding_message_size(max)
                    .max_encoding_message_size(max),
            )
            .add_service(
                pb::thread_service_server::ThreadServiceServer::new(api.clone())
                    .max_decoding_message_size(max)
                    .max_encoding_message_size(max),
            )
            .add_service(
                pb::assignment_service_server::AssignmentServiceServer::new(api.clone())
                    .max_decoding_message_size(max)
                    .max_encoding_message_size(max),
            )
            .add_service(
                pb::task_service_server::TaskServiceServer::new(api.clone())
                    .max_decoding_message_size(max)
                    .max_encoding_message_size(max),
            )
            .add_service(
                pb::turn_service_server::TurnServiceServer::new(api.clone())
                    .max_decoding_message_size(max)
                    .max_encoding_message_size(max),
            )
            .add_service(
                pb::coord_service_server::CoordServiceServer::new(api.clone())
                    .max_decoding_message_size(max)
                    .max_encoding_message_size(max),
            )
            .add_service(
                pb::record_service_server::RecordServiceServer::new(api)
                    .max_decoding_message_size(max)
                    .max_encoding_message_size(max),
            )
            .add_service(admin::service(b.clone()))
            .add_service(watch::service(watches, max));
        let layers = tower::ServiceBuilder::new()
            .layer(trace::TraceLayer { node: b.node.id })
            .layer(client_addr::ClientAddrLayer::new(b.clone()))
            .layer(forward::ForwardLayer::new(b.clone()))
            .layer(oversize::OversizeLayer { max_message_bytes: max });
        Ok(ApiStack { layers, routes: routes.routes().prepare(), health })
    }

    /// The stack as the node's own doors call it, in this process.
    pub fn in_process(&self) -> kungfu_mcp::Api {
        kungfu_mcp::Api::in_process(self.layers.service(self.routes.clone()))
    }
}

/// Serves the API's stack on `listener` until `shutdown` resolves. Health reports serving while
/// this node is ready and it runs, and not serving once it returns.
pub async fn serve(
    b: Arc<Backend>,
    stack: ApiStack,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let ApiStack { layers, routes, health } = stack;
    // Health tells the truth (issue #16): SERVING only while this node is ready
    // (`Backend::readiness`: a leader known and reachable through a quorum, applied within the
    // configured lag), read every 200 ms. The whole server (""), TurnService, CoordService and
    // RecordService — named apart so a client can ask a node whether it speaks the coordination
    // layer (and its shared record) before it sends one of its actions (COORDINATION R4: use them
    // only once every node is upgraded).
    let watcher = tokio::spawn(watch_readiness(b.clone(), health.clone()));
    let served = tonic::transport::Server::builder()
        // Pings keep a live client's connection from looking silent to the idle timeout, and find
        // a dead one (no answer within the timeout closes it).
        .http2_keepalive_interval(Some(b.config.api.keepalive_interval()))
        .http2_keepalive_timeout(Some(std::time::Duration::from_secs(20)))
        .layer(layers)
        .add_routes(routes)
        // TCP_NODELAY on every accepted socket (tonic ignores its own setting on this path), a
        // handshake and an idle timeout, and a bound per peer (issue #16).
        .serve_with_incoming_shutdown(
            kungfu_raft::incoming::guarded_incoming(listener, b.config.api.connection_bounds()),
            shutdown,
        )
        .await;
    watcher.abort();
    for name in HEALTH_NAMES {
        health.set_service_status(name, tonic_health::ServingStatus::NotServing).await;
    }
    Ok(served?)
}

/// The names gRPC health reports on: the whole server, and three services by name.
const HEALTH_NAMES: [&str; 4] = [
    "",
    <pb::turn_service_server::TurnServiceServer<api::Api> as tonic::server::NamedService>::NAME,
    <pb::coord_service_server::CoordServiceServer<api::Api> as tonic::server::NamedService>::NAME,
    <pb::record_service_server::RecordServiceServer<api::Api> as tonic::server::NamedService>::NAME,
];

/// Sets gRPC health from this node's readiness every 200 ms, and logs each change with its reason.
async fn watch_readiness(b: Arc<Backend>, health: tonic_health::server::HealthReporter) {
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last: Option<bool> = None;
    loop {
        tick.tick().await;
        let ready = b.readiness();
        if last == Some(ready.is_ok()) {
            continue;
        }
        let status = match &ready {
            Ok(()) => {
                tracing::info!("ready: health SERVING");
                tonic_health::ServingStatus::Serving
            }
            Err(why) => {
                tracing::warn!(reason = %why, "not ready: health NOT_SERVING");
                tonic_health::ServingStatus::NotServing
            }
        };
        for name in HEALTH_NAMES {
            health.set_service_status(name, status).await;
        }
        last = Some(ready.is_ok());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_parse_and_leave_a_margin() {
        assert_eq!(parse_grpc_timeout("5S"), Some(Duration::from_secs(5)));
        assert_eq!(parse_grpc_timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse_grpc_timeout("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_grpc_timeout("7u"), Some(Duration::from_micros(7)));
        for bad in ["", "S", "5", "5x", "123456789S", "-1S"] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad}");
        }
        let mut req = tonic::Request::new(());
        assert_eq!(call_budget(&req), DEFAULT_CALL_BUDGET);
        req.set_timeout(Duration::from_secs(10));
        assert_eq!(call_budget(&req), Duration::from_secs(9));
    }

    #[test]
    fn the_transport_facts_of_a_request_are_read_once() {
        let mut req = tonic::Request::new(());
        assert_eq!(credentials(&req), Credentials::default());
        req.metadata_mut().insert("authorization", "Bearer kf_ag_x ".parse().expect("ascii"));
        req.metadata_mut().insert(CONSISTENCY, "stale".parse().expect("ascii"));
        let c = credentials(&req);
        assert_eq!(c.bearer.as_deref(), Some("kf_ag_x "));
        assert_eq!(c.consistency, Consistency::Stale);
        req.metadata_mut().insert("authorization", "Basic x".parse().expect("ascii"));
        assert_eq!(credentials(&req).bearer, None, "only a bearer credential");
        // The scheme in any case (issue #16: `bearer <key>` in lower case was refused).
        for value in ["bearer kf_ag_y", "BEARER kf_ag_y", "Bearer  kf_ag_y"] {
            req.metadata_mut().insert("authorization", value.parse().expect("ascii"));
            assert_eq!(credentials(&req).bearer.as_deref(), Some("kf_ag_y"), "{value}");
        }
        for value in ["Bearer", "Bearer ", "Bearerkf_ag_y"] {
            req.metadata_mut().insert("authorization", value.parse().expect("ascii"));
            assert_eq!(credentials(&req).bearer, None, "{value}");
        }
    }
}
