//! Tool results: the one place that shapes what a call answers.
//!
//! - Success: `structuredContent` is the response message as JSON ([`crate::json`]); a write adds
//!   `idempotency_key`, the key it was made with. The same JSON is the text content block, for
//!   hosts that show only text.
//! - Rejection: `isError: true` with `{code, message, field, next_step, definite,
//!   retry_after_micros, fak_reason}` (and `idempotency_key` on a write), the fields of
//!   [`Rejection`] that every door answers with; a shared record's refusal adds
//!   `fak_shared_reason`, and a stale edit its three-way `conflict` ([`conflict_json`]). A call the node did not answer (unreachable, timed
//!   out) is `UNAVAILABLE` with `definite: false`: the outcome is unknown, so repeat it with the
//!   same key.
//!
//! Messages come from the node or from [`kungfu_api::FieldError`], which never quote participant
//! content (L6, §12), so a result's structure and content stay apart.

use crate::registry::IDEMPOTENCY_KEY;
use kungfu_types::{Code, ConflictValue, RecordConflict, Rejection, RejectionDetail};
use rmcp::model::CallToolResult;
use serde_json::{Map, Value as Json, json};

/// A successful call: the response, with the key of a write.
pub fn success(response: Json, key: Option<&str>) -> CallToolResult {
    let mut value = response;
    if let (Some(k), Json::Object(m)) = (key, &mut value) {
        m.insert(IDEMPOTENCY_KEY.to_string(), json!(k));
    }
    CallToolResult::structured(value)
}

/// A refused call as a tool error.
pub fn rejection(r: &Rejection, key: Option<&str>) -> CallToolResult {
    CallToolResult::structured_error(rejection_json(r, key))
}

/// The structured body of a refused call.
pub fn rejection_json(r: &Rejection, key: Option<&str>) -> Json {
    let mut m = Map::new();
    m.insert("code".into(), json!(r.code.as_str()));
    m.insert("message".into(), json!(r.message));
    m.insert("field".into(), json!(r.field));
    m.insert("next_step".into(), json!(r.next.as_str()));
    m.insert("definite".into(), json!(r.definite));
    m.insert("retry_after_micros".into(), json!(r.retry_after.map(|m| m.0)));
    m.insert("fak_reason".into(), json!(r.fak_reason().map(|f| f.as_str())));
    if let Some(shared) = r.fak_shared {
        m.insert("fak_shared_reason".into(), json!(shared.as_str()));
    }
    if let Some(RejectionDetail::RecordConflict(c)) = r.detail.as_deref() {
        m.insert("conflict".into(), conflict_json(c));
    }
    if let Some(leader) = &r.leader {
        m.insert("leader".into(), json!(leader));
    }
    if let Some(k) = key {
        m.insert(IDEMPOTENCY_KEY.into(), json!(k));
    }
    Json::Object(m)
}

fn conflict_value_json(v: Option<&ConflictValue>) -> Json {
    match v {
        None => Json::Null,
        // The caller may read every value (COORDINATION §5.6); it is participant content, kept in
        // its own field as text, never merged into the message (L6).
        Some(ConflictValue::Text(c)) => json!({ "text": String::from_utf8_lossy(c.as_bytes()) }),
        Some(ConflictValue::Pin { memory, version }) => {
            json!({ "pin": { "memory": memory.to_string(), "version": version.0 } })
        }
        Some(ConflictValue::External(e)) => json!({ "external": {
            "store": e.store,
            "digest": e.digest,
            "bytes": e.bytes,
            "labels": { "taint": e.labels.taint.to_string(), "scope": e.labels.scope.to_string() },
            "deletion_certificate": e.deletion_certificate,
        } }),
    }
}

/// COORDINATION §5.6: the three-way conflict of a stale record edit as JSON (the MCP door's and the
/// command line's `--json`): the path and revs, `base`, `current` and `proposed` values, and the
/// resolution.
pub fn conflict_json(c: &RecordConflict) -> Json {
    json!({
        "record": c.record.to_string(),
        "path": c.path,
        "base_rev": c.base_rev,
        "current_rev": c.current_rev,
        "base": conflict_value_json(c.base_value.as_ref()),
        "current": conflict_value_json(c.current_value.as_ref()),
        "proposed": conflict_value_json(Some(&c.proposed_value)),
        "resolution": c.resolution,
    })
}

/// What a failed call answers: the rejection its status carries, decoded once, or, for a status
/// that is no Kungfu rejection (the node unreachable, a timeout, a proxy's answer), `UNAVAILABLE`
/// with an unknown outcome. That case is logged here, the one place it is handled, because an
/// unreachable API is something an operator looks at.
pub fn refusal(status: &tonic::Status) -> Rejection {
    if let Some(r) = kungfu_api::status_rejection(status) {
        return r;
    }
    tracing::warn!(code = ?status.code(), message = status.message(), "the MCP door's call to the API got no answer");
    let mut r = Rejection::new(
        Code::Unavailable,
        format!(
            "the node did not answer ({}): the outcome is unknown; repeat the call with the same idempotency_key",
            kungfu_api::grpc_code_name(status.code())
        ),
    );
    r.definite = false;
    r
}
