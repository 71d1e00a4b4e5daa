//! Rejections on gRPC (DESIGN §6): a [`Rejection`] becomes a `tonic::Status` whose code derives from
//! the code's class ([`grpc_code`]) and whose details carry the full rejection as `google.rpc.ErrorInfo`
//! (domain `kungfu`, reason the stable code string, metadata `next_step`, `definite`, and when set
//! `field` and `retry_after_micros`), plus a `google.rpc.BadRequest` field violation when a field
//! is at fault and a `google.rpc.RetryInfo` when a wait is asked for, for generic gRPC clients. A
//! `NOT_LEADER` that names the leader carries its API address as the `leader` metadata. Every
//! verdict also carries `fak_reason`, the name fak gives the same refusal (design §2.8).
//! A record refusal also carries `fak_shared_reason` (design §2.8), and a stale record edit the typed
//! three-way conflict: `path`, `base_rev`, `current_rev` and `resolution` in the metadata and a
//! `kungfu.v1.RecordConflict` packed as an `Any` beside the `ErrorInfo` (design §7.4; tonic-types
//! builds only the standard details, so that one is appended to the encoded `google.rpc.Status`).
//! [`status_rejection`] is the inverse, for clients.
//!
//! Field paths leave the server in wire terms: the few places where the core names a field
//! differently from the proto (`assignment.delivery_window` is `assignment.delivery_window_micros`
//! on the wire, `ask[2]` is `ask.agents[2]`) are translated here, in [`wire_field_path`]. A Task's
//! restricted audience is named by its wire path in the core (`audience.restricted.agents[1]`),
//! because a shared record's `audience` (a scope) is a field of the same name. `tests/wire.rs`
//! holds every refusal's field, and every field the sources name, to the request's descriptor.

use crate::field_error::FieldError;
use crate::pb;
use kungfu_core::read::ReadError;
use kungfu_types::ids::ParseIdError;
use kungfu_types::{
    Class, Code, ConflictValue, Content, ExternalRef, FakReason, Labels, MemoryId, Micros, NextStep, RecordConflict,
    RecordId, Rejection, RejectionDetail, Scope, SharedReason, Taint, Version,
};
use prost::Message;
use std::collections::HashMap;
use std::time::Duration;
use tonic_types::{ErrorDetails, StatusExt};

/// The `ErrorInfo.domain` of every Kungfu rejection.
pub const ERROR_DOMAIN: &str = "kungfu";

/// The response metadata that names the leader's API address on `NOT_LEADER`
/// ([`Rejection::leader`]).
pub const LEADER_METADATA: &str = "leader";

/// `ErrorInfo.metadata` keys.
pub const META_NEXT_STEP: &str = "next_step";
pub const META_DEFINITE: &str = "definite";
pub const META_FIELD: &str = "field";
pub const META_RETRY_AFTER_MICROS: &str = "retry_after_micros";
/// fak's reason name for the refusal (design §2.8); absent on `NOT_LEADER` and `UNAVAILABLE`.
pub const META_FAK_REASON: &str = "fak_reason";
/// fak's `sharedtask` reason of a record refusal (design §2.8), when it has one.
pub const META_FAK_SHARED_REASON: &str = "fak_shared_reason";
/// A stale record edit (design §5.6): the fak path of the refused op, the revs and the resolution.
pub const META_PATH: &str = "path";
pub const META_BASE_REV: &str = "base_rev";
pub const META_CURRENT_REV: &str = "current_rev";
pub const META_RESOLUTION: &str = "resolution";
/// The `Any` type URL of the conflict detail.
pub const RECORD_CONFLICT_TYPE_URL: &str = "type.googleapis.com/kungfu.v1.RecordConflict";

/// The gRPC code of each rejection code, derived from its class ([`Code::class`], the one
/// classification; the command line's exit status derives from the same one). The exhaustive match
/// makes a new class a compile error here until it is placed.
///
/// The rule of thumb follows gRPC's own guidance: `InvalidArgument` for requests wrong whatever
/// the state; `PermissionDenied` when the caller lacks the standing for the action;
/// `FailedPrecondition` when the state of the object (or of a named target) does not allow it (do
/// not retry until it changes); `ResourceExhausted` for capacity and rate limits; `Unavailable`
/// only for routing answers and the one indefinite outcome, which are safe to retry with the same
/// idempotency key. `DEADLINE_PASSED` is a protocol deadline that won (L4), not an RPC timeout, so
/// it is a `State` refusal, `FailedPrecondition`, and never `DeadlineExceeded` (which would tell
/// clients the outcome is unknown).
pub fn grpc_code(code: Code) -> tonic::Code {
    use tonic::Code as G;
    match code.class() {
        Class::Malformed => G::InvalidArgument,
        Class::Unauthenticated => G::Unauthenticated,
        Class::NotFound => G::NotFound,
        Class::Forbidden => G::PermissionDenied,
        // The target named is wrong for the state it is in, not malformed.
        Class::Misdirected | Class::State => G::FailedPrecondition,
        // Design §2.8: a compare-and-set lost a race; re-read and retry.
        Class::Stale => G::Aborted,
        Class::KeyReused | Class::Duplicate => G::AlreadyExists,
        Class::Limit => G::ResourceExhausted,
        Class::Unavailable => G::Unavailable,
    }
}

/// The wire path of a field the core names. Core paths that already are wire paths pass through.
pub fn wire_field_path(field: &str) -> String {
    const RENAMED: &[(&str, &str)] = &[
        ("assignment.delivery_window", "assignment.delivery_window_micros"),
        ("assignment.judgment_window", "assignment.judgment_window_micros"),
        ("contract.delivery_window", "contract.delivery_window_micros"),
        ("contract.judgment_window", "contract.judgment_window_micros"),
        ("ask", "ask.agents"),
        // COORDINATION §3.3: `SendTo.agents` is an `Agents` message whose list is `agents`.
        ("to.agents", "to.agents.agents"),
    ];
    for (core, wire) in RENAMED {
        if let Some(rest) = field.strip_prefix(core) {
            // Only the whole field or one of its elements: `ask` and `ask[2]` are renamed, while
            // `ask.agents[2]` (already a wire path) and `asked` are not.
            if rest.is_empty() || rest.starts_with('[') {
                return format!("{wire}{rest}");
            }
        }
    }
    field.to_string()
}

/// A rejection as a gRPC status, with field paths in wire terms.
pub fn rejection_status(r: &Rejection) -> tonic::Status {
    let Some(core_field) = r.field.as_deref() else {
        return status(r, None, &r.message);
    };
    let field = wire_field_path(core_field);
    // `Rejection::field` writes messages as "<field>: <why>"; keep the message naming the wire field.
    let message = match r.message.strip_prefix(core_field).and_then(|m| m.strip_prefix(": ")) {
        Some(why) => format!("{field}: {why}"),
        None => r.message.clone(),
    };
    status(r, Some(&field), &message)
}

/// A malformed request field as a gRPC status: `INVALID_ARGUMENT` naming the field. Its path is
/// already a wire path, so no translation applies.
pub fn field_error_status(e: &FieldError) -> tonic::Status {
    let r = e.to_rejection();
    status(&r, Some(&e.field), &r.message)
}

impl From<FieldError> for tonic::Status {
    fn from(e: FieldError) -> tonic::Status {
        field_error_status(&e)
    }
}

/// A refused or failed read as a gRPC status. A refusal is a rejection like any other. A state the
/// node cannot read is `UNAVAILABLE` with a fixed message: storage details (keys, corruption) never
/// reach a client, and the server logs them where it handles the error. Reads have no effect, so
/// retrying, possibly on another node, is always safe.
pub fn read_error_status(e: &ReadError) -> tonic::Status {
    rejection_status(&read_error_rejection(e))
}

/// A refused or failed read as the rejection every door answers (see [`read_error_status`]).
pub fn read_error_rejection(e: &ReadError) -> Rejection {
    match e {
        ReadError::Rejected(r) => r.clone(),
        ReadError::State(_) => {
            Rejection::new(Code::Unavailable, "this node cannot read its state now; retry, possibly on another node")
        }
    }
}

fn status(r: &Rejection, field: Option<&str>, message: &str) -> tonic::Status {
    let mut metadata = HashMap::new();
    metadata.insert(META_NEXT_STEP.to_string(), r.next.as_str().to_string());
    metadata.insert(META_DEFINITE.to_string(), r.definite.to_string());
    if let Some(f) = field {
        metadata.insert(META_FIELD.to_string(), f.to_string());
    }
    if let Some(after) = r.retry_after {
        metadata.insert(META_RETRY_AFTER_MICROS.to_string(), after.0.to_string());
    }
    if let Some(fak) = r.fak_reason() {
        metadata.insert(META_FAK_REASON.to_string(), fak.as_str().to_string());
    }
    if let Some(shared) = r.fak_shared {
        metadata.insert(META_FAK_SHARED_REASON.to_string(), shared.as_str().to_string());
    }
    let conflict = r.detail.as_deref().map(|d| match d {
        RejectionDetail::RecordConflict(c) => c,
    });
    if let Some(c) = conflict {
        metadata.insert(META_PATH.to_string(), c.path.clone());
        metadata.insert(META_BASE_REV.to_string(), c.base_rev.to_string());
        metadata.insert(META_CURRENT_REV.to_string(), c.current_rev.to_string());
        metadata.insert(META_RESOLUTION.to_string(), c.resolution.clone());
    }
    let mut details = ErrorDetails::with_error_info(r.code.as_str(), ERROR_DOMAIN, metadata);
    if let Some(f) = field {
        details.add_bad_request_violation(f, message);
    }
    if let Some(after) = r.retry_after {
        details.set_retry_info(Some(Duration::from_micros(after.0)));
    }
    let mut s = tonic::Status::with_error_details(grpc_code(r.code), message, details);
    if let Some(c) = conflict {
        s = with_conflict(s, c);
    }
    if let Some(leader) = &r.leader {
        // An address that is not a valid header value is left out; the message still names it.
        if let Ok(v) = leader.parse() {
            s.metadata_mut().insert(LEADER_METADATA, v);
        }
    }
    s
}

/// The rejection a status carries, for clients. None when the status is not a Kungfu rejection (a
/// transport error, a proxy's status, a malformed detail): the caller then has only the gRPC code,
/// and for an action the outcome is unknown, so it retries with the same idempotency key.
///
/// Metadata a server omitted falls back to the code's defaults (its next step; definite unless
/// `UNAVAILABLE`).
pub fn status_rejection(s: &tonic::Status) -> Option<Rejection> {
    let details = s.check_error_details().ok()?;
    let info = details.error_info()?;
    if info.domain != ERROR_DOMAIN {
        return None;
    }
    let code = Code::parse(&info.reason)?;
    let meta = |key: &str| info.metadata.get(key).map(String::as_str);
    let next = meta(META_NEXT_STEP).and_then(parse_next_step).unwrap_or_else(|| code.next_step());
    let definite = match meta(META_DEFINITE) {
        Some("true") => true,
        Some("false") => false,
        _ => code != Code::Unavailable,
    };
    Some(Rejection {
        code,
        message: s.message().to_string(),
        field: meta(META_FIELD).map(str::to_string),
        next,
        retry_after: meta(META_RETRY_AFTER_MICROS).and_then(|v| v.parse().ok()).map(Micros),
        definite,
        leader: s.metadata().get(LEADER_METADATA).and_then(|v| v.to_str().ok()).map(str::to_string),
        // Kept only when it differs from the code's own, so a round trip gives back the same value.
        fak: meta(META_FAK_REASON).and_then(FakReason::parse).filter(|f| Some(*f) != code.fak_reason()),
        fak_shared: meta(META_FAK_SHARED_REASON).and_then(SharedReason::parse),
        detail: record_conflict(s).map(|c| Box::new(RejectionDetail::RecordConflict(c))),
    })
}

/// `s` with the conflict appended to its `google.rpc.Status` details, after the standard ones.
fn with_conflict(s: tonic::Status, c: &RecordConflict) -> tonic::Status {
    let Ok(mut rpc) = tonic_types::pb::Status::decode(s.details()) else {
        return s;
    };
    rpc.details.push(prost_types::Any {
        type_url: RECORD_CONFLICT_TYPE_URL.to_string(),
        value: pb::RecordConflict::from(c).encode_to_vec(),
    });
    let mut out = tonic::Status::with_details(s.code(), s.message(), rpc.encode_to_vec().into());
    *out.metadata_mut() = s.metadata().clone();
    out
}

/// The conflict a status carries, for clients (design §5.6). None when there is none or it does
/// not decode: the rejection's code, message and metadata still say what happened.
pub fn record_conflict(s: &tonic::Status) -> Option<RecordConflict> {
    let rpc = tonic_types::pb::Status::decode(s.details()).ok()?;
    let any = rpc.details.iter().find(|a| a.type_url == RECORD_CONFLICT_TYPE_URL)?;
    let c = pb::RecordConflict::decode(any.value.as_slice()).ok()?;
    conflict_from_wire(&c).ok()
}

fn conflict_from_wire(c: &pb::RecordConflict) -> Result<RecordConflict, ParseIdError> {
    let value = |v: &Option<pb::RecordValue>| -> Result<Option<ConflictValue>, ParseIdError> {
        use pb::record_body_ref::Kind as Ref;
        use pb::record_value::Kind;
        Ok(match v.as_ref().and_then(|v| v.kind.as_ref()) {
            None => None,
            Some(Kind::Text(t)) => Some(ConflictValue::Text(Content::new(t.body.clone()))),
            Some(Kind::Body(b)) => match b.kind.as_ref() {
                None => None,
                Some(Ref::Pin(p)) => {
                    Some(ConflictValue::Pin { memory: p.memory.parse::<MemoryId>()?, version: Version(p.version) })
                }
                Some(Ref::External(e)) => Some(ConflictValue::External(ExternalRef {
                    store: e.store.clone(),
                    digest: e.digest.clone(),
                    bytes: e.bytes,
                    labels: e.labels.map(labels_from_wire).unwrap_or(Labels::FAIL_CLOSED),
                    deletion_certificate: (!e.deletion_certificate.is_empty()).then(|| e.deletion_certificate.clone()),
                })),
            },
        })
    };
    Ok(RecordConflict {
        record: c.record.parse::<RecordId>()?,
        path: c.path.clone(),
        base_rev: c.base_rev,
        current_rev: c.current_rev,
        base_value: value(&c.base_value)?,
        current_value: value(&c.current_value)?,
        // A proposed value is always sent; an absent one decodes as empty text rather than failing.
        proposed_value: value(&c.proposed_value)?.unwrap_or(ConflictValue::Text(Content::new(Vec::new()))),
        resolution: c.resolution.clone(),
    })
}

/// Labels as sent; an unknown or unspecified value reads as its fail-closed one (design §2.2).
fn labels_from_wire(l: pb::Labels) -> Labels {
    let taint = match pb::Taint::try_from(l.taint) {
        Ok(pb::Taint::Trusted) => Taint::Trusted,
        Ok(pb::Taint::Quarantined) => Taint::Quarantined,
        _ => Labels::FAIL_CLOSED.taint,
    };
    let scope = match pb::Scope::try_from(l.scope) {
        Ok(pb::Scope::Fleet) => Scope::Fleet,
        Ok(pb::Scope::Tenant) => Scope::Tenant,
        Ok(pb::Scope::Public) => Scope::Public,
        _ => Labels::FAIL_CLOSED.scope,
    };
    Labels { taint, scope }
}

fn parse_next_step(s: &str) -> Option<NextStep> {
    NextStep::ALL.into_iter().find(|n| n.as_str() == s)
}

/// A gRPC status code by its canonical name (`DeadlineExceeded` as `DEADLINE_EXCEEDED`): how a
/// status that carries no Kungfu rejection is named to users (the MCP door, the benchmarks).
pub fn grpc_code_name(code: tonic::Code) -> String {
    let mut out = String::new();
    for (i, c) in format!("{code:?}").chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}
