//! Followers forward calls to the leader (DESIGN §3): a tower layer in front of every public
//! service that, on a node that is not the leader, sends the call unchanged (same metadata, so the
//! same bearer key and idempotency key) over one reused HTTP/2 channel to the leader's API and
//! relays the answer, streams included. A call is forwarded at most once (`kungfu-forwarded`), so a
//! leader change in flight cannot bounce it around; then the node answers itself (`NOT_LEADER`
//! with the leader's address, or a definite refusal). Not forwarded: stale reads (any node answers
//! them), the operator service (its status is per node), health and reflection.
//!
//! Whether this node leads is a routing decision here, not a gate: a call served here on a node
//! that has just lost the lead meets its path's one gate (`Backend::lead` for a write, the read
//! index for a read), which answers `NOT_LEADER`.
//!
//! Each call is forwarded once and never retried here (the client retries, with its own backoff);
//! a failed forward is logged at most once per [`FAILURE_LOG_EVERY`] per leader address, with the
//! count, so a leader that stops answering under load cannot flood the log (issue #36).
//!
//! The layer is also the fence of a node whose raft core stopped (issue #36): every public call,
//! stale reads and calls it would forward included, is refused UNAVAILABLE naming the reason, while
//! the node waits to exit (the operator service still answers: its status shows `fatal_error`).

use crate::backend::Backend;
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tonic::body::Body;
use tonic::transport::{Channel, Endpoint};
use tower::{Layer, Service};

/// Marks a call that a follower already forwarded once.
pub const FORWARDED: &str = "kungfu-forwarded";
/// At most one line per leader address per this long about failed forwards.
pub const FAILURE_LOG_EVERY: Duration = Duration::from_secs(10);

/// Failed forwards per leader address: when the last line was written, and how many failed since.
type Failures = Arc<Mutex<HashMap<String, (Option<std::time::Instant>, u64)>>>;

/// The layer; one per server.
#[derive(Clone)]
pub struct ForwardLayer {
    b: Arc<Backend>,
    channels: Arc<Mutex<HashMap<String, Channel>>>,
    failures: Failures,
}

impl std::fmt::Debug for ForwardLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ForwardLayer")
    }
}

impl ForwardLayer {
    pub fn new(b: Arc<Backend>) -> ForwardLayer {
        ForwardLayer { b, channels: Arc::new(Mutex::new(HashMap::new())), failures: Arc::default() }
    }
}

impl<S> Layer<S> for ForwardLayer {
    type Service = Forward<S>;
    fn layer(&self, inner: S) -> Forward<S> {
        Forward { inner, b: self.b.clone(), channels: self.channels.clone(), failures: self.failures.clone() }
    }
}

/// The service the layer wraps around the routes.
#[derive(Clone)]
pub struct Forward<S> {
    inner: S,
    b: Arc<Backend>,
    channels: Arc<Mutex<HashMap<String, Channel>>>,
    failures: Failures,
}

impl<S> std::fmt::Debug for Forward<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Forward")
    }
}

/// Logs one failed forward to `addr`, unless a line about that address was written less than
/// [`FAILURE_LOG_EVERY`] ago; the next line counts the ones left out.
fn log_failure(failures: &Failures, addr: &str, why: &str) {
    let now = std::time::Instant::now();
    let mut map = failures.lock().unwrap_or_else(|p| p.into_inner());
    let (last, left_out) = map.entry(addr.to_string()).or_insert((None, 0));
    if last.is_some_and(|at| now.duration_since(at) < FAILURE_LOG_EVERY) {
        *left_out += 1;
        return;
    }
    let earlier = std::mem::take(left_out);
    *last = Some(now);
    tracing::warn!(leader = %addr, error = %why, "forwarding a call to the leader failed ({earlier} more since the last such line)");
}

impl<S> Forward<S> {
    /// The refusal of every public call while this node's raft core is stopped (issue #36), or None.
    fn fenced(&self, req: &http::Request<Body>) -> Option<kungfu_types::Rejection> {
        let path = req.uri().path();
        if !path.starts_with("/kungfu.v1.") || path.starts_with("/kungfu.v1.AdminService/") {
            return None;
        }
        let reason = kungfu_raft::fatal::core_stop(&self.b.node.raft)?;
        let mut r = kungfu_types::Rejection::new(
            kungfu_types::Code::Unavailable,
            format!(
                "node {} is fenced: its raft core stopped ({reason}); nothing was done: send the request to another node",
                self.b.node.id
            ),
        );
        r.definite = true;
        Some(crate::backend::refuse(r))
    }

    /// The leader's API address, if this call should be forwarded there.
    fn target(&self, req: &http::Request<Body>) -> Option<String> {
        let path = req.uri().path();
        if !path.starts_with("/kungfu.v1.") || path.starts_with("/kungfu.v1.AdminService/") {
            return None;
        }
        let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok());
        if header(FORWARDED).is_some() || header("kungfu-consistency") == Some("stale") {
            return None;
        }
        if self.b.node.is_leader() {
            return None;
        }
        let (_, leader) = self.b.node.leader_elsewhere()?;
        (!leader.api.is_empty()).then_some(leader.api)
    }

    fn channel(&self, addr: &str) -> Result<Channel, String> {
        let mut map = self.channels.lock().map_err(|_| "channel map poisoned".to_string())?;
        if let Some(c) = map.get(addr) {
            return Ok(c.clone());
        }
        let c = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| format!("bad leader address {addr:?}: {e}"))?
            .connect_timeout(Duration::from_secs(2))
            .tcp_nodelay(true)
            .connect_lazy();
        map.insert(addr.to_string(), c.clone());
        Ok(c)
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S> Service<http::Request<Body>> for Forward<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<Body>) -> Self::Future {
        if let Some(refusal) = self.fenced(&req) {
            return Box::pin(async move { Ok(kungfu_api::rejection_status(&refusal).into_http()) });
        }
        let Some(addr) = self.target(&req) else {
            let fut = self.inner.call(req);
            return Box::pin(fut);
        };
        let channel = match self.channel(&addr) {
            Ok(c) => c,
            Err(e) => return Box::pin(async move { Ok(tonic::Status::unavailable(e).into_http()) }),
        };
        req.headers_mut().insert(FORWARDED, http::HeaderValue::from_static("1"));
        metrics::counter!("kungfu_forwarded_calls_total").increment(1);
        // With telemetry on, the hop is a `grpc.forward` span (a child of this call's
        // `grpc.request`), and the leader continues the trace from it, not from the caller's
        // `traceparent`, which the request would otherwise carry unchanged.
        let span = if kungfu_raft::trace::enabled() {
            let span = tracing::debug_span!("grpc.forward", otel.kind = "client", leader = %addr);
            kungfu_raft::trace::inject_span(&span, req.headers_mut());
            span
        } else {
            tracing::Span::none()
        };
        let failures = self.failures.clone();
        let forwarded = async move {
            let mut channel = channel;
            // The channel is a buffered service: it must be ready before it is called.
            let sent = match tower::ServiceExt::ready(&mut channel).await {
                Ok(ready) => ready.call(req).await,
                Err(e) => Err(e),
            };
            match sent {
                Ok(resp) => Ok(resp),
                // Whether the leader received it is unknown: retry with the same idempotency key.
                Err(e) => {
                    let mut why = e.to_string();
                    let mut source = std::error::Error::source(&e);
                    while let Some(s) = source {
                        why.push_str(&format!(": {s}"));
                        source = s.source();
                    }
                    log_failure(&failures, &addr, &why);
                    let r = kungfu_types::Rejection::new(
                        kungfu_types::Code::Unavailable,
                        format!(
                            "forwarding to the leader at {addr} failed ({why}); retry the same request with the same idempotency key"
                        ),
                    );
                    Ok(kungfu_api::rejection_status(&r).into_http())
                }
            }
        };
        Box::pin(tracing::Instrument::instrument(forwarded, span))
    }
}
