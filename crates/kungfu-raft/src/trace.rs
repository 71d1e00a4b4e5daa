//! Trace context across the doors, the forwarding hop and the raft RPCs (issue #18): the W3C
//! `traceparent` header read from and written to HTTP/2 headers (gRPC metadata is HTTP/2
//! headers), and [`Traces`], the in-memory map that ties a replicated command to the trace of the
//! action that proposed it.
//!
//! The log entry format does not change: a command carries no trace context on disk or on the
//! wire inside the entry. Instead the leader remembers, for each command it proposed while
//! traced, the span context of its proposal, keyed by the command's time stamp (unique per
//! command: the leader stamps strictly increasing times, `RaftNode::propose_stamped`). An
//! AppendEntries request that carries such a command sends the context of the newest one as its
//! `traceparent`; the follower remembers it for the commands of that request, and each node's
//! apply of a batch becomes a child of the context its first traced command has (and links the
//! others). Entries stay until the map is full ([`Traces::CAPACITY`]), when the oldest is dropped:
//! not at apply, because a leader may apply a command (a quorum has it) before it has sent it to
//! a slower follower, whose append and apply should still join the trace.
//!
//! All of it is off unless [`enable`] was called (the node's `[telemetry] otlp_endpoint` is set):
//! then nothing is recorded or looked up and no header is written, so the write path pays one
//! relaxed atomic load per call.

use crate::types::{Entry, Request};
use opentelemetry::Context;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{SpanContext, TraceContextExt};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The W3C trace context header.
pub const TRACEPARENT: &str = "traceparent";

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Turns trace propagation on for this process (once its OpenTelemetry layer is installed).
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether trace propagation is on.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

struct Headers<'a>(&'a mut http::HeaderMap);

impl Injector for Headers<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(k), Ok(v)) = (http::HeaderName::from_bytes(key.as_bytes()), http::HeaderValue::from_str(&value)) {
            self.0.insert(k, v);
        }
    }
}

struct ReadHeaders<'a>(&'a http::HeaderMap);

impl Extractor for ReadHeaders<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// Writes `cx` as `traceparent` (and `tracestate`) into `headers`, replacing any there. Nothing
/// when propagation is off or `cx` has no valid span.
pub fn inject(cx: &Context, headers: &mut http::HeaderMap) {
    if enabled() && cx.span().span_context().is_valid() {
        TraceContextPropagator::new().inject_context(cx, &mut Headers(headers));
    }
}

/// Writes the context of `span` into `headers` (see [`inject`]).
pub fn inject_span(span: &tracing::Span, headers: &mut http::HeaderMap) {
    if enabled() {
        inject(&span.context(), headers);
    }
}

/// The remote span context `headers` carry, if a valid one.
pub fn extract(headers: &http::HeaderMap) -> Option<SpanContext> {
    if !enabled() || !headers.contains_key(TRACEPARENT) {
        return None;
    }
    let cx = TraceContextPropagator::new().extract(&ReadHeaders(headers));
    let sc = cx.span().span_context().clone();
    sc.is_valid().then_some(sc)
}

/// Makes the remote context `headers` carry the parent of `span` (which must not have been
/// entered yet). Nothing when they carry none.
pub fn follow(span: &tracing::Span, headers: &http::HeaderMap) {
    if let Some(sc) = extract(headers) {
        set_parent(span, sc);
    }
}

/// Makes `parent` the parent of `span` (which must not have been entered yet).
pub fn set_parent(span: &tracing::Span, parent: SpanContext) {
    // Fails only without an OpenTelemetry layer, and then there is nothing to parent.
    let _ = span.set_parent(Context::new().with_remote_span_context(parent));
}

/// The span context of `span`, if it is recorded by an OpenTelemetry layer.
pub fn span_context(span: &tracing::Span) -> Option<SpanContext> {
    if !enabled() {
        return None;
    }
    let sc = span.context().span().span_context().clone();
    sc.is_valid().then_some(sc)
}

/// The time stamps of the commands of `entries` (the keys of [`Traces`]).
fn stamps(entries: &[Entry]) -> impl Iterator<Item = u64> + '_ {
    entries.iter().filter_map(|e| match &e.payload {
        openraft::EntryPayload::Normal(crate::types::Payload { request: Request::Command(c), .. }) => Some(c.ts.0),
        _ => None,
    })
}

/// The span contexts of in-flight commands on one node, by command time stamp (see the module
/// documentation). Cheap to clone: one map shared by the node's proposals, network, raft service
/// and state machine.
#[derive(Clone, Default)]
pub struct Traces(Arc<Mutex<TraceMap>>);

#[derive(Default)]
struct TraceMap {
    by_ts: HashMap<u64, SpanContext>,
    /// Insertion order, for dropping the oldest past [`Traces::CAPACITY`].
    order: VecDeque<u64>,
}

impl std::fmt::Debug for Traces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Traces")
    }
}

impl Traces {
    /// Most commands remembered at once; the oldest is forgotten first.
    pub const CAPACITY: usize = 4096;

    fn map(&self) -> std::sync::MutexGuard<'_, TraceMap> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers `cx` as the context of the command stamped `ts`.
    pub fn record(&self, ts: u64, cx: SpanContext) {
        let mut m = self.map();
        if m.by_ts.insert(ts, cx).is_none() {
            m.order.push_back(ts);
        }
        while m.order.len() > Traces::CAPACITY {
            if let Some(old) = m.order.pop_front() {
                m.by_ts.remove(&old);
            }
        }
    }

    /// Remembers `cx` for every command of `entries` that has no context here yet (a follower,
    /// for the commands of an AppendEntries that carried `cx`).
    pub fn record_entries(&self, entries: &[Entry], cx: &SpanContext) {
        if !enabled() {
            return;
        }
        let fresh: Vec<u64> = {
            let m = self.map();
            stamps(entries).filter(|ts| !m.by_ts.contains_key(ts)).collect()
        };
        for ts in fresh {
            self.record(ts, cx.clone());
        }
    }

    /// The context of the newest traced command of `entries` (what an AppendEntries carries).
    pub fn newest(&self, entries: &[Entry]) -> Option<SpanContext> {
        if !enabled() {
            return None;
        }
        self.of(entries).pop()
    }

    /// The contexts of the traced commands of `entries`, in log order.
    pub fn of(&self, entries: &[Entry]) -> Vec<SpanContext> {
        if !enabled() {
            return Vec::new();
        }
        let m = self.map();
        stamps(entries).filter_map(|ts| m.by_ts.get(&ts).cloned()).collect()
    }

    /// A `raft.apply` span for a batch of `entries` applied on this node, child of the first
    /// traced command's context and linked to the others'; a disabled span when none is traced.
    pub fn apply_span(&self, entries: &[Entry]) -> tracing::Span {
        let mut traced = self.of(entries).into_iter();
        let Some(parent) = traced.next() else { return tracing::Span::none() };
        let span = tracing::debug_span!(
            "raft.apply",
            entries = entries.len(),
            first_index = entries.first().map(|e| e.log_id.index).unwrap_or(0),
            last_index = entries.last().map(|e| e.log_id.index).unwrap_or(0),
        );
        // Commands that came in one AppendEntries share a context: each other context is linked once.
        let mut linked = vec![parent.span_id()];
        set_parent(&span, parent);
        for other in traced {
            if !linked.contains(&other.span_id()) {
                linked.push(other.span_id());
                span.add_link(other);
            }
        }
        span
    }

    /// How many commands are remembered (tests).
    pub fn len(&self) -> usize {
        self.map().by_ts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{SpanId, TraceFlags, TraceId, TraceState};

    fn cx(n: u8) -> SpanContext {
        SpanContext::new(
            TraceId::from_bytes([n; 16]),
            SpanId::from_bytes([n; 8]),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        )
    }

    #[test]
    fn trace_map_is_bounded_and_forgets_the_oldest_first() {
        enable();
        let t = Traces::default();
        for ts in 0..(Traces::CAPACITY as u64 + 10) {
            t.record(ts, cx(1));
        }
        assert_eq!(t.len(), Traces::CAPACITY);
        let m = t.map();
        assert!(!m.by_ts.contains_key(&9), "the oldest were dropped");
        assert!(m.by_ts.contains_key(&10));
        assert_eq!(m.order.len(), Traces::CAPACITY);
    }

    #[test]
    fn trace_context_round_trips_through_headers() {
        enable();
        let mut headers = http::HeaderMap::new();
        inject(&Context::new().with_remote_span_context(cx(7)), &mut headers);
        let value = headers.get(TRACEPARENT).and_then(|v| v.to_str().ok()).map(str::to_string);
        assert_eq!(value.as_deref(), Some("00-07070707070707070707070707070707-0707070707070707-01"));
        let back = extract(&headers).expect("a valid context");
        assert_eq!(back.trace_id(), cx(7).trace_id());
        assert_eq!(back.span_id(), cx(7).span_id());
        headers.insert(TRACEPARENT, http::HeaderValue::from_static("00-zz-01"));
        assert!(extract(&headers).is_none(), "a malformed header is ignored");
    }
}
