//! The first tower layer of the gRPC door (issue #18): with telemetry on, every call runs in a
//! `grpc.request` span whose parent is the caller's `traceparent` (a client, the MCP door, or a
//! forwarding follower's `grpc.forward` span), so the service layer's `action` span and the raft
//! spans under it join the caller's trace (health and reflection calls excepted). With telemetry
//! off it passes the call through untouched.

use std::task::{Context, Poll};
use tower::{Layer, Service};

/// The layer; one per server.
#[derive(Clone, Copy, Debug)]
pub struct TraceLayer {
    pub node: u64,
}

impl<S> Layer<S> for TraceLayer {
    type Service = Traced<S>;
    fn layer(&self, inner: S) -> Traced<S> {
        Traced { inner, node: self.node }
    }
}

/// The service the layer wraps around the others.
#[derive(Clone, Debug)]
pub struct Traced<S> {
    inner: S,
    node: u64,
}

impl<S, B> Service<http::Request<B>> for Traced<S>
where
    S: Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures::future::Either<S::Future, tracing::instrument::Instrumented<S::Future>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        // Probes and reflection are not traced: a load balancer's health check every few seconds
        // would otherwise start a trace each.
        let path = req.uri().path();
        if !kungfu_raft::trace::enabled() || path.starts_with("/grpc.health.") || path.starts_with("/grpc.reflection.")
        {
            return futures::future::Either::Left(self.inner.call(req));
        }
        let span = tracing::debug_span!(
            "grpc.request",
            otel.kind = "server",
            rpc.method = req.uri().path(),
            node = self.node,
        );
        kungfu_raft::trace::follow(&span, req.headers());
        // Entered while the inner layers are called, so a forwarding follower's span is its child.
        let fut = span.in_scope(|| self.inner.call(req));
        futures::future::Either::Right(tracing::Instrument::instrument(fut, span))
    }
}
