//! The fak envelopes (COORDINATION §5.10): conversions between our shared record and the six
//! versioned JSON envelopes of fak's `sharedtask` contract, so a fak adapter can speak to a Kungfu
//! cluster through the SDK (`kungfu-client`), whose messages ([`pb`]) it reads and builds.
//!
//! | envelope | from / to | function |
//! |---|---|---|
//! | `fak.shared-task.v1` | from a [`pb::RecordView`] | [`task`] (its rev string: [`rev_digest`]) |
//! | `fak.shared-patch.v1` | to and from a [`pb::PatchRecordRequest`] | [`patch_from_fak`], [`patch_to_fak`] |
//! | `fak.shared-patch-result.v1` | from a receipt ([`pb::RecordPatched`]) or a [`Rejection`] | [`patch_result`], [`FakError::patch_result`] |
//! | `fak.shared-event.v1` | from a [`pb::RecordEvent`] | [`event`] |
//! | `fak.shared-artifact-ref.v1` | from a [`pb::RecordArtifact`] or a [`pb::RecordBodyRef`] | [`artifact_ref`], [`body_ref`] |
//! | `fak.shared-task-journal.v1` | from the views of every rev and the events | [`journal`] |
//!
//! What maps to what:
//! - `task_id` is `task_` and the record id (`task_rec_4`); `event_id` is `evt_rec_4_3` (rev 3).
//! - A rev is a number on our side and a string `sha256:<hex>` on fak's: the digest of our canonical
//!   encoding of the record at that rev as the view shows it ([`rev_digest`]). A digest cannot be
//!   turned back into a number, so an adapter keeps the strings it handed out in a [`Revs`] index
//!   and resolves a patch's `base_rev` there.
//! - Patch ops: `replace /title`, `/state`, `/body_ref`, `/open_decisions/<id>/state` and
//!   `append /notes`, `/artifacts`, `/open_decisions` are our typed ops. `remove`, any other path,
//!   and a value of the wrong shape are refused with `UNSUPPORTED_PATCH` (code `INVALID_ARGUMENT`),
//!   the error naming the JSON pointer of the bad field. An empty `base_rev` is refused too: fak's
//!   fold reads it as "current", a lost update waiting to happen (design §12 item 7).
//! - Body refs: `external` is fak's external reference (store, digest, bytes, labels, deletion
//!   certificate). Two kinds are ours: `pin` (a Memory version, named in an extra `pin` field; its
//!   `digest` names the version, not its bytes, and its `bytes` is 0) and `inline` (new content in
//!   an extra `content` field, with its real digest and size; in patches only). fak's `cas` bodies
//!   name bytes Kungfu does not hold and are refused.
//! - fields fak has and we do not take from a request: a patch's `actor`, a note's `author` and
//!   `created_at` (the runtime uses the authenticated caller and the command's time), `durability`
//!   (every fact is durable; exports say `durable`), the patch-level `scope` (used only as the scope
//!   of the patch's message; event labels are derived, design §5.8).
//! - fields we have and fak does not ride in an extra `kungfu` object, which fak's decoders ignore:
//!   the numeric revs, the thread, a patch's idempotency key, its `ask`, its message's taint or pin.
//! - Labels of a pin in a request are its version's, which the request does not carry: the envelope
//!   shows fak's fail-closed zero value (`tainted`, `agent`) and the server applies the version's own.
//!
//! **Digests** ([`digest`]: rev strings, `record_digest`, `patch_digest`, the `prev_event` chain and
//! the journal digest) are SHA-256 over our canonical JSON ([`canonical_json`]: keys sorted, no
//! whitespace). They are stable and verifiable on our side, but not bit-compatible with the digests
//! fak's Go code computes over `encoding/json` output (struct field order), which fak's own fixtures
//! do not test either: a fak consumer must treat them as opaque strings.

use kungfu_client::pb;
use kungfu_types::{Code, ConflictValue, Rejection, RejectionDetail, SharedReason};
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};
use std::collections::HashMap;
use std::fmt;

pub const SCHEMA_TASK: &str = "fak.shared-task.v1";
pub const SCHEMA_PATCH: &str = "fak.shared-patch.v1";
pub const SCHEMA_PATCH_RESULT: &str = "fak.shared-patch-result.v1";
pub const SCHEMA_EVENT: &str = "fak.shared-event.v1";
pub const SCHEMA_ARTIFACT_REF: &str = "fak.shared-artifact-ref.v1";
pub const SCHEMA_JOURNAL: &str = "fak.shared-task-journal.v1";

/// The store named by an artifact that is a pinned Memory version.
pub const PIN_STORE: &str = "kungfu-memory";
/// The resolution of a stale scalar edit (design §5.6).
pub const RESOLUTION_REBASE: &str = "rebase_or_human_decide";
/// The decision id a `needs_approval` result names: a governor must apply the patch.
pub const APPROVAL_DECISION: &str = "dec_governor_approval";
const QUARANTINE_SUMMARY: &str = "refused and not stored: the ref stays out of the record until it is admissible";

// ---------------------------------------------------------------------------------------------
// Errors

/// A fak envelope that does not convert: the JSON pointer of the bad field (`/ops/1/op`), the
/// Kungfu code and `sharedtask` reason the refusal has, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakError {
    /// A JSON pointer into the envelope (or a field name of the message being exported).
    pub pointer: String,
    pub code: Code,
    /// `UNSUPPORTED_PATCH` for an op or value fak's fold would also refuse; none for what fak
    /// accepts and we do not (an empty `base_rev`).
    pub reason: Option<SharedReason>,
    pub message: String,
}

impl fmt::Display for FakError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let reason = self.reason.map_or(self.code.as_str(), SharedReason::as_str);
        write!(f, "{reason} at {}: {}", if self.pointer.is_empty() { "/" } else { &self.pointer }, self.message)
    }
}

impl std::error::Error for FakError {}

impl FakError {
    fn unsupported(pointer: impl Into<String>, message: impl Into<String>) -> FakError {
        FakError {
            pointer: pointer.into(),
            code: Code::InvalidArgument,
            reason: Some(SharedReason::UnsupportedPatch),
            message: message.into(),
        }
    }

    fn invalid(pointer: impl Into<String>, message: impl Into<String>) -> FakError {
        FakError { pointer: pointer.into(), code: Code::InvalidArgument, reason: None, message: message.into() }
    }

    /// The refusal as a Kungfu rejection (field = the pointer), for audit next to server refusals.
    pub fn to_rejection(&self) -> Rejection {
        let r = Rejection::field(self.code, self.pointer.clone(), self.message.clone());
        match self.reason {
            Some(reason) => r.with_fak_shared(reason),
            None => r,
        }
    }

    /// The `fak.shared-patch-result.v1` a fak writer gets for an envelope refused at conversion:
    /// `denied`, echoing its `task_id` and `base_rev` when they have fak's shape ([`no_rev`]
    /// otherwise), and the current rev is not known here, so it repeats the base.
    pub fn patch_result(&self, envelope: &Value) -> Value {
        let task_id = envelope
            .get("task_id")
            .and_then(Value::as_str)
            .filter(|t| is_task_id(t))
            .unwrap_or("task_unknown")
            .to_string();
        let base = envelope
            .get("base_rev")
            .and_then(Value::as_str)
            .filter(|r| r.len() > "sha256:".len() && r.starts_with("sha256:"))
            .map_or_else(no_rev, str::to_string);
        let reason = self
            .reason
            .map(SharedReason::as_str)
            .unwrap_or_else(|| self.code.fak_reason().map_or(self.code.as_str(), kungfu_types::FakReason::as_str));
        json!({
            "schema": SCHEMA_PATCH_RESULT,
            "task_id": task_id,
            "base_rev": base,
            "current_rev": base,
            "verdict": "denied",
            "reason": reason,
            "denial": {
                "policy": "kungfu:envelope",
                "pointer": self.pointer,
                "code": self.code.as_str(),
                "message": self.message,
            },
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Canonical JSON and digests

/// Our canonical JSON: object keys sorted by their UTF-8 bytes, no whitespace, strings escaped as
/// `serde_json` escapes them, numbers as `serde_json` prints them. Not Go's `encoding/json`.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => out.push_str(&v.to_string()),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&map[k], out);
            }
            out.push('}');
        }
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// `sha256:<hex>` of the canonical JSON of `v`.
pub fn digest(v: &Value) -> String {
    format!("sha256:{}", sha256_hex(canonical_json(v).as_bytes()))
}

/// The rev string that stands for "no rev" where fak's shape needs one and none is known: the
/// digest of nothing.
pub fn no_rev() -> String {
    format!("sha256:{}", sha256_hex(b""))
}

// ---------------------------------------------------------------------------------------------
// Small conversions

fn text(c: Option<&pb::Content>) -> String {
    c.map(|c| String::from_utf8_lossy(&c.body).into_owned()).unwrap_or_default()
}

fn scope_name(v: i32) -> Option<&'static str> {
    match pb::Scope::try_from(v).ok()? {
        pb::Scope::Unspecified => None,
        pb::Scope::Agent => Some("agent"),
        pb::Scope::Fleet => Some("fleet"),
        pb::Scope::Tenant => Some("tenant"),
        pb::Scope::Public => Some("public"),
    }
}

fn taint_name(v: i32) -> Option<&'static str> {
    match pb::Taint::try_from(v).ok()? {
        pb::Taint::Unspecified => None,
        pb::Taint::Trusted => Some("trusted"),
        pb::Taint::Tainted => Some("tainted"),
        pb::Taint::Quarantined => Some("quarantined"),
    }
}

fn parse_scope(s: &str) -> Option<pb::Scope> {
    Some(match s {
        "agent" => pb::Scope::Agent,
        "fleet" => pb::Scope::Fleet,
        "tenant" => pb::Scope::Tenant,
        "public" => pb::Scope::Public,
        _ => return None,
    })
}

fn parse_taint(s: &str) -> Option<pb::Taint> {
    Some(match s {
        "trusted" => pb::Taint::Trusted,
        "tainted" => pb::Taint::Tainted,
        "quarantined" => pb::Taint::Quarantined,
        _ => return None,
    })
}

/// (taint, scope) names of labels, fak's fail-closed zero value (`tainted`, `agent`) when absent.
fn label_names(l: Option<&pb::Labels>) -> (&'static str, &'static str) {
    let taint = l.and_then(|l| taint_name(l.taint)).unwrap_or("tainted");
    let scope = l.and_then(|l| scope_name(l.scope)).unwrap_or("agent");
    (taint, scope)
}

fn editors_name(v: i32) -> &'static str {
    match pb::RecordEditors::try_from(v) {
        Ok(pb::RecordEditors::Governors) => "governors",
        Ok(pb::RecordEditors::Speakers) => "speakers",
        _ => "unspecified",
    }
}

fn actor(id: &str) -> Value {
    json!({"kind": "agent", "id": id})
}

/// RFC 3339 in UTC from Unix microseconds (`2026-06-25T00:00:00Z`, with `.ffffff` when not whole).
pub fn rfc3339(unix_micros: i64) -> String {
    let secs = unix_micros.div_euclid(1_000_000);
    let micros = unix_micros.rem_euclid(1_000_000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s) = (sod / 3600, sod % 3600 / 60, sod % 60);
    let frac = if micros == 0 { String::new() } else { format!(".{micros:06}") };
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}{frac}Z")
}

fn is_task_id(s: &str) -> bool {
    s.strip_prefix("task_")
        .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b)))
}

/// `task_rec_4` for `rec_4`.
pub fn task_id(record: &str) -> String {
    format!("task_{record}")
}

/// `rec_4` for `task_rec_4`, when it names one of our records.
pub fn record_of(task_id: &str) -> Option<&str> {
    let record = task_id.strip_prefix("task_")?;
    let n = record.strip_prefix("rec_")?;
    (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then_some(record)
}

/// `evt_rec_4_3`: the event of rev 3 of `rec_4`.
pub fn event_id(record: &str, rev: u32) -> String {
    format!("evt_{record}_{rev}")
}

// ---------------------------------------------------------------------------------------------
// Body refs and artifact refs

fn pin_digest(p: &pb::MemoryPin) -> String {
    format!("sha256:{}", sha256_hex(format!("kungfu-pin:{}@{}", p.memory, p.version).as_bytes()))
}

fn pin_value(p: &pb::MemoryPin) -> Value {
    json!({"memory": p.memory, "version": p.version})
}

fn external_body(e: &pb::ExternalRef, labels: Option<&pb::Labels>) -> Map<String, Value> {
    let (taint, scope) = label_names(e.labels.as_ref().or(labels));
    let mut m = Map::new();
    m.insert("kind".into(), "external".into());
    m.insert("digest".into(), e.digest.clone().into());
    m.insert("bytes".into(), e.bytes.into());
    m.insert("taint".into(), taint.into());
    m.insert("scope".into(), scope.into());
    m.insert("durability".into(), "durable".into());
    m.insert("store".into(), e.store.clone().into());
    if !e.deletion_certificate.is_empty() {
        m.insert("deletion_certificate".into(), e.deletion_certificate.clone().into());
    }
    m
}

fn pin_body(p: &pb::MemoryPin, labels: Option<&pb::Labels>) -> Map<String, Value> {
    let (taint, scope) = label_names(labels);
    let mut m = Map::new();
    m.insert("kind".into(), "pin".into());
    m.insert("digest".into(), pin_digest(p).into());
    m.insert("bytes".into(), 0.into());
    m.insert("taint".into(), taint.into());
    m.insert("scope".into(), scope.into());
    m.insert("durability".into(), "durable".into());
    m.insert("pin".into(), pin_value(p));
    m
}

/// fak's `body_ref` object for a stored reference with the labels a view shows for it.
pub fn body_ref(reference: &pb::RecordBodyRef, labels: Option<&pb::Labels>) -> Value {
    Value::Object(match &reference.kind {
        Some(pb::record_body_ref::Kind::Pin(p)) => pin_body(p, labels),
        Some(pb::record_body_ref::Kind::External(e)) => external_body(e, labels),
        None => redacted_body(labels),
    })
}

fn redacted_body(labels: Option<&pb::Labels>) -> Map<String, Value> {
    let (taint, scope) = label_names(labels);
    let mut m = Map::new();
    m.insert("kind".into(), "redacted".into());
    m.insert("digest".into(), "sha256:redacted".into());
    m.insert("bytes".into(), 0.into());
    m.insert("taint".into(), taint.into());
    m.insert("scope".into(), scope.into());
    m.insert("durability".into(), "durable".into());
    m
}

fn body_view(b: Option<&pb::RecordBodyView>) -> Value {
    match b {
        Some(b) if !b.redacted => match &b.reference {
            Some(r) => body_ref(r, b.labels.as_ref()),
            None => Value::Object(redacted_body(b.labels.as_ref())),
        },
        Some(b) => Value::Object(redacted_body(b.labels.as_ref())),
        None => Value::Object(redacted_body(None)),
    }
}

/// fak's artifact fields (`artifact_id`, `ref`, `media_type`, `taint`, `scope`, `store`, maybe
/// `deletion_certificate`), plus `bytes` of an external ref and `pin` of a pinned version.
fn artifact_fields(
    id: &str,
    reference: Option<&pb::RecordBodyRef>,
    media_type: &str,
    labels: Option<&pb::Labels>,
) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("artifact_id".into(), id.into());
    let labels = match reference.and_then(|r| r.kind.as_ref()) {
        Some(pb::record_body_ref::Kind::External(e)) => {
            m.insert("ref".into(), e.digest.clone().into());
            m.insert("store".into(), e.store.clone().into());
            m.insert("bytes".into(), e.bytes.into());
            if !e.deletion_certificate.is_empty() {
                m.insert("deletion_certificate".into(), e.deletion_certificate.clone().into());
            }
            e.labels.as_ref().or(labels)
        }
        Some(pb::record_body_ref::Kind::Pin(p)) => {
            m.insert("ref".into(), pin_digest(p).into());
            m.insert("store".into(), PIN_STORE.into());
            m.insert("pin".into(), pin_value(p));
            labels
        }
        None => {
            m.insert("ref".into(), "sha256:redacted".into());
            m.insert("store".into(), "redacted".into());
            labels
        }
    };
    let (taint, scope) = label_names(labels);
    m.insert("media_type".into(), media_type.into());
    m.insert("taint".into(), taint.into());
    m.insert("scope".into(), scope.into());
    m
}

/// `fak.shared-artifact-ref.v1` of a record's artifact.
pub fn artifact_ref(a: &pb::RecordArtifact) -> Value {
    let mut m = artifact_fields(&a.id, a.reference.as_ref(), &a.media_type, a.labels.as_ref());
    m.insert("schema".into(), SCHEMA_ARTIFACT_REF.into());
    m.insert("kungfu".into(), json!({"author": a.author, "added_rev": a.added_rev}));
    Value::Object(m)
}

// ---------------------------------------------------------------------------------------------
// The task record

/// The parts of the task envelope that are the record's content at the view's rev.
fn task_content(view: &pb::RecordView) -> Map<String, Value> {
    let notes: Vec<Value> = view
        .notes
        .iter()
        .map(|n| {
            let body = match &n.body {
                Some(r) => body_ref(r, n.labels.as_ref()),
                None => Value::Object(redacted_body(n.labels.as_ref())),
            };
            let kind = match pb::NoteKind::try_from(n.kind) {
                Ok(pb::NoteKind::Progress) => "progress",
                _ => "comment",
            };
            json!({
                "note_id": n.id,
                "kind": kind,
                "body_ref": body,
                "author": actor(&n.author),
                "created_at": rfc3339(n.added_at_unix_micros),
            })
        })
        .collect();
    let artifacts: Vec<Value> = view
        .artifacts
        .iter()
        .map(|a| Value::Object(artifact_fields(&a.id, a.reference.as_ref(), &a.media_type, a.labels.as_ref())))
        .collect();
    let decisions: Vec<Value> = view
        .decisions
        .iter()
        .map(|d| json!({"decision_id": d.id, "state": text(d.state.as_ref()), "reason": text(d.reason.as_ref())}))
        .collect();
    let mut m = Map::new();
    m.insert("state".into(), text(view.state.as_ref()).into());
    m.insert("title".into(), text(view.title.as_ref()).into());
    m.insert("body_ref".into(), body_view(view.body.as_ref()));
    m.insert("artifacts".into(), artifacts.into());
    m.insert("notes".into(), notes.into());
    m.insert("open_decisions".into(), decisions.into());
    m
}

/// What a view says beyond fak's fields. Not the record's latest rev: a later rev must change
/// neither this rev's string nor a journal's digests.
fn view_extension(view: &pb::RecordView) -> Value {
    json!({
        "record": view.id,
        "thread": view.thread,
        "rev": view.rev,
        "scope": scope_name(view.scope).unwrap_or("unspecified"),
        "editors": editors_name(view.editors),
        "audience": scope_name(view.audience).unwrap_or("fleet"),
        "redacted_notes": view.redacted_notes,
        "redacted_artifacts": view.redacted_artifacts,
    })
}

/// The rev string of a view: `sha256:` over the canonical JSON of the record's content at that rev
/// (title, state, body, notes, artifacts, decisions as the task envelope shows them) together with
/// its id, thread, numeric rev, scope, editors and the view's audience. The numeric rev is included,
/// so a field set back to an earlier value still gets a new string; the audience is included, so a
/// redacted view never shares a string with a full one (both resolve to the same rev in [`Revs`]).
pub fn rev_digest(view: &pb::RecordView) -> String {
    let mut m = task_content(view);
    m.insert("encoding".into(), "kungfu.record-rev.v1".into());
    m.insert("record".into(), view_extension(view));
    digest(&Value::Object(m))
}

/// `fak.shared-task.v1` from a view. `updated` is the event of the view's rev (its actor and time
/// become `updated_by` and `updated_at`); without it (or for another rev) they are the creator's
/// and the creation time, which is right for rev 1 only.
pub fn task(view: &pb::RecordView, updated: Option<&pb::RecordEvent>) -> Value {
    let mut m = task_content(view);
    let (by, at) = match updated {
        Some(e) if e.rev == view.rev && !e.redacted => (e.actor.as_str(), e.at_unix_micros),
        _ => (view.creator.as_str(), view.created_at_unix_micros),
    };
    m.insert("schema".into(), SCHEMA_TASK.into());
    m.insert("task_id".into(), task_id(&view.id).into());
    m.insert("rev".into(), rev_digest(view).into());
    m.insert("updated_by".into(), actor(by));
    m.insert("updated_at".into(), rfc3339(at).into());
    m.insert("kungfu".into(), view_extension(view));
    Value::Object(m)
}

/// The rev strings an adapter handed out, both ways: a fak patch cites a string, our request needs
/// the number.
#[derive(Debug, Clone, Default)]
pub struct Revs {
    by_digest: HashMap<String, (String, u32)>,
    by_rev: HashMap<(String, u32), String>,
}

impl Revs {
    pub fn new() -> Revs {
        Revs::default()
    }

    /// Records the view's rev string ([`rev_digest`]) and returns it.
    pub fn learn(&mut self, view: &pb::RecordView) -> String {
        let d = rev_digest(view);
        self.insert(&view.id, view.rev, &d);
        d
    }

    /// Records a rev string computed elsewhere.
    pub fn insert(&mut self, record: &str, rev: u32, digest: &str) {
        self.by_digest.insert(digest.to_string(), (record.to_string(), rev));
        self.by_rev.insert((record.to_string(), rev), digest.to_string());
    }

    /// The record and numeric rev a string stands for.
    pub fn rev(&self, digest: &str) -> Option<(&str, u32)> {
        self.by_digest.get(digest).map(|(r, n)| (r.as_str(), *n))
    }

    /// The string last learned for a rev.
    pub fn digest(&self, record: &str, rev: u32) -> Option<&str> {
        self.by_rev.get(&(record.to_string(), rev)).map(String::as_str)
    }
}

// ---------------------------------------------------------------------------------------------
// Patches: fak to Kungfu

type Obj = Map<String, Value>;

fn obj<'a>(v: &'a Value, ptr: &str) -> Result<&'a Obj, FakError> {
    v.as_object().ok_or_else(|| FakError::unsupported(ptr, "is not an object"))
}

fn field<'a>(o: &'a Obj, ptr: &str, key: &str) -> Result<&'a Value, FakError> {
    o.get(key).ok_or_else(|| FakError::unsupported(format!("{ptr}/{key}"), "is required"))
}

fn string<'a>(o: &'a Obj, ptr: &str, key: &str) -> Result<&'a str, FakError> {
    field(o, ptr, key)?.as_str().ok_or_else(|| FakError::unsupported(format!("{ptr}/{key}"), "is not a string"))
}

fn opt_string<'a>(o: &'a Obj, ptr: &str, key: &str) -> Result<Option<&'a str>, FakError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_str().map(Some).ok_or_else(|| FakError::unsupported(format!("{ptr}/{key}"), "is not a string")),
    }
}

fn labels_at(o: &Obj, ptr: &str) -> Result<pb::Labels, FakError> {
    let t = string(o, ptr, "taint")?;
    let taint = parse_taint(t).ok_or_else(|| {
        FakError::unsupported(format!("{ptr}/taint"), format!("`{t}` is not trusted, tainted or quarantined"))
    })?;
    let s = string(o, ptr, "scope")?;
    let scope = parse_scope(s).ok_or_else(|| {
        FakError::unsupported(format!("{ptr}/scope"), format!("`{s}` is not agent, fleet, tenant or public"))
    })?;
    Ok(pb::Labels { taint: taint as i32, scope: scope as i32 })
}

fn pin_at(o: &Obj, ptr: &str) -> Result<pb::MemoryPin, FakError> {
    let p = obj(field(o, ptr, "pin")?, &format!("{ptr}/pin"))?;
    let pp = format!("{ptr}/pin");
    let memory = string(p, &pp, "memory")?.to_string();
    let version = field(p, &pp, "version")?
        .as_u64()
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| FakError::unsupported(format!("{pp}/version"), "is not a version number"))?;
    Ok(pb::MemoryPin { memory, version })
}

fn u64_at(o: &Obj, ptr: &str, key: &str, default: Option<u64>) -> Result<u64, FakError> {
    match (o.get(key), default) {
        (None, Some(d)) => Ok(d),
        (None, None) => Err(FakError::unsupported(format!("{ptr}/{key}"), "is required")),
        (Some(v), _) => v.as_u64().ok_or_else(|| FakError::unsupported(format!("{ptr}/{key}"), "is not a byte count")),
    }
}

fn external_at(o: &Obj, ptr: &str, digest_key: &str, bytes_default: Option<u64>) -> Result<pb::ExternalRef, FakError> {
    let store = string(o, ptr, "store")?;
    if store.is_empty() {
        return Err(FakError::unsupported(format!("{ptr}/store"), "is empty: an external ref names its store"));
    }
    Ok(pb::ExternalRef {
        store: store.to_string(),
        digest: string(o, ptr, digest_key)?.to_string(),
        bytes: u64_at(o, ptr, "bytes", bytes_default)?,
        labels: Some(labels_at(o, ptr)?),
        deletion_certificate: opt_string(o, ptr, "deletion_certificate")?.unwrap_or_default().to_string(),
    })
}

/// A fak `body_ref` as a body we can write: `external`, `pin` or `inline`.
fn body_input_at(v: &Value, ptr: &str) -> Result<pb::RecordBodyInput, FakError> {
    use pb::record_body_input::Kind;
    let o = obj(v, ptr)?;
    let kind = string(o, ptr, "kind")?;
    let k = match kind {
        "external" => Kind::External(external_at(o, ptr, "digest", None)?),
        "pin" => Kind::Pin(pin_at(o, ptr)?),
        "inline" => {
            let content = string(o, ptr, "content")?;
            if o.contains_key("bytes") && u64_at(o, ptr, "bytes", None)? != content.len() as u64 {
                return Err(FakError::unsupported(format!("{ptr}/bytes"), "is not the size of `content`"));
            }
            if let Some(d) = opt_string(o, ptr, "digest")? {
                let want = format!("sha256:{}", sha256_hex(content.as_bytes()));
                if d != want {
                    return Err(FakError::unsupported(
                        format!("{ptr}/digest"),
                        format!("is not the digest of `content` ({want})"),
                    ));
                }
            }
            Kind::Content(pb::LabeledContent {
                content: Some(pb::Content { body: content.as_bytes().to_vec() }),
                labels: Some(labels_at(o, ptr)?),
            })
        }
        other => {
            return Err(FakError::unsupported(
                format!("{ptr}/kind"),
                format!(
                    "a `{other}` body names bytes Kungfu does not hold: send an `external` ref with its store, a \
                     `pin` of a Memory version, or `inline` content"
                ),
            ));
        }
    };
    Ok(pb::RecordBodyInput { kind: Some(k) })
}

fn artifact_input_at(v: &Value, ptr: &str) -> Result<pb::ArtifactInput, FakError> {
    use pb::record_body_ref::Kind;
    let o = obj(v, ptr)?;
    let artifact_id = string(o, ptr, "artifact_id")?.to_string();
    let media_type = string(o, ptr, "media_type")?.to_string();
    let reference = if o.contains_key("pin") {
        Kind::Pin(pin_at(o, ptr)?)
    } else {
        Kind::External(external_at(o, ptr, "ref", Some(0))?)
    };
    Ok(pb::ArtifactInput { artifact_id, reference: Some(pb::RecordBodyRef { kind: Some(reference) }), media_type })
}

fn note_input_at(v: &Value, ptr: &str) -> Result<pb::NoteInput, FakError> {
    let o = obj(v, ptr)?;
    let note_id = string(o, ptr, "note_id")?.to_string();
    let kind = match string(o, ptr, "kind")? {
        "comment" => pb::NoteKind::Comment,
        "progress" => pb::NoteKind::Progress,
        other => {
            return Err(FakError::unsupported(format!("{ptr}/kind"), format!("`{other}` is not comment or progress")));
        }
    };
    let body = body_input_at(field(o, ptr, "body_ref")?, &format!("{ptr}/body_ref"))?;
    Ok(pb::NoteInput { note_id, kind: kind as i32, body: Some(body) })
}

fn decision_input_at(v: &Value, ptr: &str) -> Result<pb::DecisionInput, FakError> {
    let o = obj(v, ptr)?;
    Ok(pb::DecisionInput {
        decision_id: string(o, ptr, "decision_id")?.to_string(),
        state: Some(pb::Content { body: string(o, ptr, "state")?.as_bytes().to_vec() }),
        reason: Some(pb::Content { body: string(o, ptr, "reason")?.as_bytes().to_vec() }),
    })
}

/// The decision id of `/open_decisions/<id>/state` (one pointer token, `~1` and `~0` decoded).
fn decision_state_path(path: &str) -> Option<String> {
    let id = path.strip_prefix("/open_decisions/")?.strip_suffix("/state")?;
    (!id.is_empty() && !id.contains('/')).then(|| id.replace("~1", "/").replace("~0", "~"))
}

fn op_at(v: &Value, ptr: &str) -> Result<pb::PatchOp, FakError> {
    use pb::patch_op::Op;
    let o = obj(v, ptr)?;
    let op = string(o, ptr, "op")?;
    let path = string(o, ptr, "path")?;
    let vptr = format!("{ptr}/value");
    let value = || field(o, ptr, "value");
    let content = || -> Result<pb::Content, FakError> {
        let s = value()?.as_str().ok_or_else(|| FakError::unsupported(&vptr, "is not a string"))?;
        Ok(pb::Content { body: s.as_bytes().to_vec() })
    };
    let typed = match (op, path) {
        ("remove", _) => {
            return Err(FakError::unsupported(
                format!("{ptr}/op"),
                "`remove` is not supported: the record is append-only; replace a scalar or append an item",
            ));
        }
        ("replace", "/title") => Op::ReplaceTitle(content()?),
        ("replace", "/state") => Op::ReplaceState(content()?),
        ("replace", "/body_ref") => Op::ReplaceBody(body_input_at(value()?, &vptr)?),
        ("append", "/notes") => Op::AppendNote(note_input_at(value()?, &vptr)?),
        ("append", "/artifacts") => Op::AppendArtifact(artifact_input_at(value()?, &vptr)?),
        ("append", "/open_decisions") => Op::AppendDecision(decision_input_at(value()?, &vptr)?),
        ("replace", p) if decision_state_path(p).is_some() => Op::ReplaceDecisionState(pb::DecisionStateChange {
            decision_id: decision_state_path(p).unwrap_or_default(),
            state: Some(content()?),
        }),
        ("replace" | "append", p) => {
            return Err(FakError::unsupported(format!("{ptr}/path"), format!("`{op} {p}` is not a supported edit")));
        }
        (other, _) => {
            return Err(FakError::unsupported(format!("{ptr}/op"), format!("`{other}` is not append or replace")));
        }
    };
    Ok(pb::PatchOp { op: Some(typed) })
}

/// A `fak.shared-patch.v1` as our `PatchRecordRequest`. `base_rev` is resolved in `revs`; the
/// message becomes new labeled content (taint `tainted` unless the `kungfu` extension says
/// otherwise, scope the patch's `scope`). The idempotency key is empty (the SDK fills it in)
/// unless the extension carries one; [`idempotency_key`] gives a replay-safe one.
pub fn patch_from_fak(envelope: &Value, revs: &Revs) -> Result<pb::PatchRecordRequest, FakError> {
    let o = obj(envelope, "")?;
    let schema = string(o, "", "schema")?;
    if schema != SCHEMA_PATCH {
        return Err(FakError::unsupported("/schema", format!("is `{schema}`, not `{SCHEMA_PATCH}`")));
    }
    let t = string(o, "", "task_id")?;
    let record = record_of(t)
        .ok_or_else(|| FakError::unsupported("/task_id", format!("`{t}` names no Kungfu record (task_rec_<n>)")))?;
    let base = opt_string(o, "", "base_rev")?.unwrap_or_default();
    if base.is_empty() {
        return Err(FakError::invalid(
            "/base_rev",
            "is empty: cite the rev you read (fak's fold would read an empty base as the current rev, a lost update)",
        ));
    }
    let base_rev = match revs.rev(base) {
        Some((r, n)) if r == record => n,
        Some((r, _)) => return Err(FakError::invalid("/base_rev", format!("is a rev of {r}, not of {record}"))),
        None => return Err(FakError::invalid("/base_rev", format!("`{base}` is not a rev handed out for {record}"))),
    };
    let ops_v = field(o, "", "ops")?.as_array().ok_or_else(|| FakError::unsupported("/ops", "is not an array"))?;
    if ops_v.is_empty() {
        return Err(FakError::unsupported("/ops", "is empty: a patch needs at least one op"));
    }
    let ops = ops_v.iter().enumerate().map(|(i, op)| op_at(op, &format!("/ops/{i}"))).collect::<Result<Vec<_>, _>>()?;

    let empty = Map::new();
    let ext = match o.get("kungfu") {
        None => &empty,
        Some(v) => obj(v, "/kungfu")?,
    };
    let message = if ext.contains_key("message_pin") {
        let p = obj(&ext["message_pin"], "/kungfu/message_pin")?;
        let memory = string(p, "/kungfu/message_pin", "memory")?.to_string();
        let version = field(p, "/kungfu/message_pin", "version")?
            .as_u64()
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| FakError::unsupported("/kungfu/message_pin/version", "is not a version number"))?;
        pb::labeled_body::Kind::Pin(pb::MemoryPin { memory, version })
    } else {
        let text = string(o, "", "message")?;
        let s = string(o, "", "scope")?;
        let scope = parse_scope(s)
            .ok_or_else(|| FakError::unsupported("/scope", format!("`{s}` is not agent, fleet, tenant or public")))?;
        let taint = match opt_string(ext, "/kungfu", "message_taint")? {
            None => pb::Taint::Tainted,
            Some(t) => parse_taint(t).ok_or_else(|| {
                FakError::unsupported("/kungfu/message_taint", format!("`{t}` is not trusted, tainted or quarantined"))
            })?,
        };
        pb::labeled_body::Kind::Content(pb::LabeledContent {
            content: Some(pb::Content { body: text.as_bytes().to_vec() }),
            labels: Some(pb::Labels { taint: taint as i32, scope: scope as i32 }),
        })
    };
    let ask = match ext.get("ask") {
        None | Some(Value::Null) => None,
        Some(v) => {
            let a = v.as_array().ok_or_else(|| FakError::unsupported("/kungfu/ask", "is not an array"))?;
            let agents = a
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    x.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| FakError::unsupported(format!("/kungfu/ask/{i}"), "is not an agent id"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Some(pb::Ask { agents })
        }
    };
    Ok(pb::PatchRecordRequest {
        idempotency_key: opt_string(ext, "/kungfu", "idempotency_key")?.unwrap_or_default().to_string(),
        record: record.to_string(),
        base_rev,
        ops,
        message: Some(pb::LabeledBody { kind: Some(message) }),
        ask,
    })
}

/// An idempotency key for a fak patch envelope: `fak-` and the hex SHA-256 of its canonical JSON.
/// fak's patches carry no key, and its fold re-applies a replayed patch (design §12 item 16); an
/// adapter that sends a fak patch with this key (when the envelope's `kungfu` extension names
/// none) gets the first receipt back when the same envelope arrives again (L3), whatever its key
/// order or whitespace.
pub fn idempotency_key(envelope: &Value) -> String {
    format!("fak-{}", sha256_hex(canonical_json(envelope).as_bytes()))
}

// ---------------------------------------------------------------------------------------------
// Patches: Kungfu to fak

fn utf8(bytes: &[u8], ptr: &str) -> Result<String, FakError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| FakError::invalid(ptr, "is not UTF-8: fak's values are JSON strings"))
}

fn label_names_strict(l: Option<&pb::Labels>, ptr: &str) -> Result<(&'static str, &'static str), FakError> {
    let l = l.ok_or_else(|| FakError::invalid(format!("{ptr}.labels"), "is required"))?;
    let taint =
        taint_name(l.taint).ok_or_else(|| FakError::invalid(format!("{ptr}.labels.taint"), "is unspecified"))?;
    let scope =
        scope_name(l.scope).ok_or_else(|| FakError::invalid(format!("{ptr}.labels.scope"), "is unspecified"))?;
    Ok((taint, scope))
}

fn body_input_value(b: Option<&pb::RecordBodyInput>, ptr: &str) -> Result<Value, FakError> {
    use pb::record_body_input::Kind;
    match b.and_then(|b| b.kind.as_ref()) {
        None => Err(FakError::invalid(ptr, "is required")),
        Some(Kind::Pin(p)) => Ok(Value::Object(pin_body(p, None))),
        Some(Kind::External(e)) => {
            label_names_strict(e.labels.as_ref(), &format!("{ptr}.external"))?;
            Ok(Value::Object(external_body(e, None)))
        }
        Some(Kind::Content(c)) => {
            let (taint, scope) = label_names_strict(c.labels.as_ref(), &format!("{ptr}.content"))?;
            let bytes = c.content.as_ref().map(|c| c.body.as_slice()).unwrap_or_default();
            Ok(json!({
                "kind": "inline",
                "digest": format!("sha256:{}", sha256_hex(bytes)),
                "bytes": bytes.len(),
                "taint": taint,
                "scope": scope,
                "durability": "durable",
                "content": utf8(bytes, &format!("{ptr}.content.content"))?,
            }))
        }
    }
}

fn op_value(op: &pb::PatchOp, i: usize, actor_id: &str) -> Result<Value, FakError> {
    use pb::patch_op::Op;
    let f = format!("ops[{i}]");
    let body = |c: Option<&pb::Content>, p: &str| utf8(c.map(|c| c.body.as_slice()).unwrap_or_default(), p);
    let (op, path, value) = match &op.op {
        None => return Err(FakError::invalid(f, "names no op")),
        Some(Op::ReplaceTitle(c)) => {
            ("replace", "/title".to_string(), body(Some(c), &format!("{f}.replace_title"))?.into())
        }
        Some(Op::ReplaceState(c)) => {
            ("replace", "/state".to_string(), body(Some(c), &format!("{f}.replace_state"))?.into())
        }
        Some(Op::ReplaceBody(b)) => {
            ("replace", "/body_ref".to_string(), body_input_value(Some(b), &format!("{f}.replace_body"))?)
        }
        Some(Op::ReplaceDecisionState(d)) => {
            let id = d.decision_id.replace('~', "~0").replace('/', "~1");
            let state = body(d.state.as_ref(), &format!("{f}.replace_decision_state.state"))?;
            ("replace", format!("/open_decisions/{id}/state"), state.into())
        }
        Some(Op::AppendNote(n)) => {
            let kind = match pb::NoteKind::try_from(n.kind) {
                Ok(pb::NoteKind::Comment) => "comment",
                Ok(pb::NoteKind::Progress) => "progress",
                _ => return Err(FakError::invalid(format!("{f}.append_note.kind"), "is unspecified")),
            };
            let b = body_input_value(n.body.as_ref(), &format!("{f}.append_note.body"))?;
            (
                "append",
                "/notes".to_string(),
                json!({"note_id": n.note_id, "kind": kind, "body_ref": b, "author": actor(actor_id)}),
            )
        }
        Some(Op::AppendArtifact(a)) => {
            let r = a
                .reference
                .as_ref()
                .filter(|r| r.kind.is_some())
                .ok_or_else(|| FakError::invalid(format!("{f}.append_artifact.reference"), "is required"))?;
            if let Some(pb::record_body_ref::Kind::External(e)) = &r.kind {
                label_names_strict(e.labels.as_ref(), &format!("{f}.append_artifact.reference.external"))?;
            }
            (
                "append",
                "/artifacts".to_string(),
                Value::Object(artifact_fields(&a.artifact_id, Some(r), &a.media_type, None)),
            )
        }
        Some(Op::AppendDecision(d)) => {
            let state = body(d.state.as_ref(), &format!("{f}.append_decision.state"))?;
            let reason = body(d.reason.as_ref(), &format!("{f}.append_decision.reason"))?;
            (
                "append",
                "/open_decisions".to_string(),
                json!({"decision_id": d.decision_id, "state": state, "reason": reason}),
            )
        }
    };
    Ok(json!({"op": op, "path": path, "value": value}))
}

/// Our `PatchRecordRequest` as a `fak.shared-patch.v1` against the rev string `base_rev`, written
/// by `actor_id`. Refused ([`FakError`] naming the request field) when fak cannot carry it: non-UTF-8
/// text, unspecified labels or kinds, a missing message. [`patch_from_fak`] of the result (with the
/// same rev string learned) gives the request back.
pub fn patch_to_fak(req: &pb::PatchRecordRequest, base_rev: &str, actor_id: &str) -> Result<Value, FakError> {
    let ops = req.ops.iter().enumerate().map(|(i, op)| op_value(op, i, actor_id)).collect::<Result<Vec<_>, _>>()?;
    let mut ext = Map::new();
    if !req.idempotency_key.is_empty() {
        ext.insert("idempotency_key".into(), req.idempotency_key.clone().into());
    }
    if let Some(ask) = &req.ask {
        ext.insert("ask".into(), ask.agents.clone().into());
    }
    let (message, scope) = match req.message.as_ref().and_then(|m| m.kind.as_ref()) {
        None => return Err(FakError::invalid("message", "is required")),
        Some(pb::labeled_body::Kind::Pin(p)) => {
            ext.insert("message_pin".into(), pin_value(p));
            (String::new(), "fleet")
        }
        Some(pb::labeled_body::Kind::Content(c)) => {
            let (taint, scope) = label_names_strict(c.labels.as_ref(), "message.content")?;
            if taint != "tainted" {
                ext.insert("message_taint".into(), taint.into());
            }
            let bytes = c.content.as_ref().map(|c| c.body.as_slice()).unwrap_or_default();
            (utf8(bytes, "message.content.content")?, scope)
        }
    };
    let mut m = Map::new();
    m.insert("schema".into(), SCHEMA_PATCH.into());
    m.insert("task_id".into(), task_id(&req.record).into());
    m.insert("base_rev".into(), base_rev.into());
    m.insert("actor".into(), actor(actor_id));
    m.insert("scope".into(), scope.into());
    m.insert("durability".into(), "durable".into());
    m.insert("ops".into(), ops.into());
    m.insert("message".into(), message.into());
    if !ext.is_empty() {
        m.insert("kungfu".into(), Value::Object(ext));
    }
    Ok(Value::Object(m))
}

// ---------------------------------------------------------------------------------------------
// Patch results

/// What became of a patch: its receipt or its refusal.
#[derive(Debug, Clone, Copy)]
pub enum Outcome<'a> {
    Accepted(&'a pb::RecordPatched),
    Rejected(&'a Rejection),
}

/// What a patch result is about: the request as sent, who sent it, and the rev strings around it.
/// `current_rev` is the record's rev string after an accepted patch, the conflict's `current_rev`
/// for a `STALE_BASE` refusal, and may repeat `base_rev` otherwise (nothing changed), as fak does.
#[derive(Debug, Clone, Copy)]
pub struct ResultContext<'a> {
    pub request: &'a pb::PatchRecordRequest,
    pub actor: &'a str,
    pub base_rev: &'a str,
    pub current_rev: &'a str,
}

fn conflict_value(v: Option<&ConflictValue>) -> Value {
    match v {
        None => Value::Null,
        Some(ConflictValue::Text(c)) => String::from_utf8_lossy(&c.0).into_owned().into(),
        Some(ConflictValue::Pin { memory, version }) => {
            let p = pb::MemoryPin { memory: memory.to_string(), version: version.0 };
            // A conflict carries no labels of a pinned version: only its name.
            json!({"kind": "pin", "digest": pin_digest(&p), "pin": pin_value(&p)})
        }
        Some(ConflictValue::External(e)) => {
            let labels = pb::Labels {
                taint: match e.labels.taint {
                    kungfu_types::Taint::Trusted => pb::Taint::Trusted,
                    kungfu_types::Taint::Tainted => pb::Taint::Tainted,
                    kungfu_types::Taint::Quarantined => pb::Taint::Quarantined,
                } as i32,
                scope: match e.labels.scope {
                    kungfu_types::Scope::Agent => pb::Scope::Agent,
                    kungfu_types::Scope::Fleet => pb::Scope::Fleet,
                    kungfu_types::Scope::Tenant => pb::Scope::Tenant,
                    kungfu_types::Scope::Public => pb::Scope::Public,
                } as i32,
            };
            let r = pb::ExternalRef {
                store: e.store.clone(),
                digest: e.digest.clone(),
                bytes: e.bytes,
                labels: Some(labels),
                deletion_certificate: e.deletion_certificate.clone().unwrap_or_default(),
            };
            Value::Object(external_body(&r, None))
        }
    }
}

/// The op index a rejection's field names (`ops[2].append_note.note_id` → 2).
fn op_index(field: Option<&str>) -> Option<usize> {
    field?.strip_prefix("ops[")?.split(']').next()?.parse().ok()
}

/// The declared scope of the value an op writes, when the request carries it (external refs and
/// inline content; a pin's labels are its version's).
fn declared_scope(op: &pb::PatchOp) -> Option<&'static str> {
    use pb::patch_op::Op;
    let input_scope = |b: Option<&pb::RecordBodyInput>| match b.and_then(|b| b.kind.as_ref())? {
        pb::record_body_input::Kind::Content(c) => scope_name(c.labels.as_ref()?.scope),
        pb::record_body_input::Kind::External(e) => scope_name(e.labels.as_ref()?.scope),
        pb::record_body_input::Kind::Pin(_) => None,
    };
    match op.op.as_ref()? {
        Op::ReplaceBody(b) => input_scope(Some(b)),
        Op::AppendNote(n) => input_scope(n.body.as_ref()),
        Op::AppendArtifact(a) => match a.reference.as_ref()?.kind.as_ref()? {
            pb::record_body_ref::Kind::External(e) => scope_name(e.labels.as_ref()?.scope),
            pb::record_body_ref::Kind::Pin(_) => None,
        },
        _ => None,
    }
}

/// `fak.shared-patch-result.v1` of a patch's outcome:
/// - a receipt → `accepted`, with `event_id` (as [`event`] names it) and `record_ref` = `current_rev`;
/// - `NOT_GOVERNOR` (`APPROVAL_REQUIRED`) → `needs_approval`: a governor must apply it;
/// - `STALE_BASE` → `conflict` with the path and the three values of the typed detail, resolution
///   `rebase_or_human_decide`; `DUPLICATE_ID` (`DUPLICATE_*`) and `MISSING_DECISION` → `conflict`
///   with resolution `manual` and the op's value as proposed;
/// - `BODY_QUARANTINED`, `ARTIFACT_QUARANTINED`, `*_WITNESS_MISSING` → `quarantined`, naming the
///   body, note or artifact (nothing was stored);
/// - everything else → `denied` (`SCOPE_WIDEN_FORBIDDEN`, `UNSUPPORTED_PATCH`, or the rejection's
///   fak reason), with the Kungfu code, next step, field and message in `denial`.
///
/// `reason` is the `sharedtask` string when the refusal has one, else its fak core reason.
pub fn patch_result(cx: &ResultContext<'_>, outcome: Outcome<'_>) -> Value {
    let req = cx.request;
    let mut m = Map::new();
    m.insert("schema".into(), SCHEMA_PATCH_RESULT.into());
    m.insert("task_id".into(), task_id(&req.record).into());
    m.insert("base_rev".into(), cx.base_rev.into());
    m.insert("current_rev".into(), cx.current_rev.into());
    let r = match outcome {
        Outcome::Accepted(p) => {
            m.insert("verdict".into(), "accepted".into());
            m.insert("reason".into(), "".into());
            m.insert("event_id".into(), event_id(&p.record, p.rev).into());
            m.insert("record_ref".into(), cx.current_rev.into());
            m.insert(
                "kungfu".into(),
                json!({"record": p.record, "base_rev": p.base_rev, "rev": p.rev, "merged": p.merged, "entry": p.entry}),
            );
            return Value::Object(m);
        }
        Outcome::Rejected(r) => r,
    };
    let reason = r
        .fak_shared
        .map(SharedReason::as_str)
        .unwrap_or_else(|| r.fak_reason().map_or(r.code.as_str(), kungfu_types::FakReason::as_str));
    m.insert("reason".into(), reason.into());
    let index = op_index(r.field.as_deref());
    let op = index.and_then(|i| req.ops.get(i));
    let verdict = match (r.code, r.fak_shared) {
        (Code::NotGovernor, _) | (_, Some(SharedReason::ApprovalRequired)) => {
            m.insert(
                "approval".into(),
                json!({"decision_id": APPROVAL_DECISION, "state": "input_required", "reason": r.message}),
            );
            "needs_approval"
        }
        (Code::StaleBase, _) => {
            let c = match r.detail.as_deref() {
                Some(RejectionDetail::RecordConflict(c)) => json!({
                    "path": c.path,
                    "base_value": conflict_value(c.base_value.as_ref()),
                    "current_value": conflict_value(c.current_value.as_ref()),
                    "proposed_value": conflict_value(Some(&c.proposed_value)),
                    "resolution": c.resolution,
                }),
                None => json!({
                    "path": op.map(kungfu_client::record::op_path).unwrap_or_default(),
                    "base_value": null,
                    "current_value": null,
                    "proposed_value": null,
                    "resolution": RESOLUTION_REBASE,
                }),
            };
            m.insert("conflict".into(), c);
            "conflict"
        }
        (Code::DuplicateId, _) | (_, Some(SharedReason::MissingDecision)) => {
            let proposed = match (op, index) {
                (Some(op), Some(i)) => op_value(op, i, cx.actor).ok().and_then(|v| v.get("value").cloned()),
                _ => None,
            };
            m.insert(
                "conflict".into(),
                json!({
                    "path": op.map(kungfu_client::record::op_path).unwrap_or_default(),
                    "base_value": null,
                    "current_value": null,
                    "proposed_value": proposed.unwrap_or(Value::Null),
                    "resolution": "manual",
                }),
            );
            "conflict"
        }
        (
            _,
            Some(
                SharedReason::BodyQuarantined
                | SharedReason::ArtifactQuarantined
                | SharedReason::BodyWitnessMissing
                | SharedReason::ArtifactWitnessMissing,
            ),
        ) => {
            use pb::patch_op::Op;
            let (kind, id) = match op.and_then(|o| o.op.as_ref()) {
                Some(Op::AppendArtifact(a)) => ("artifact", a.artifact_id.clone()),
                Some(Op::AppendNote(n)) => ("note", n.note_id.clone()),
                Some(_) => ("body", "body_ref".to_string()),
                None => ("message", "message".to_string()),
            };
            let mut q = Map::new();
            q.insert("quarantine_id".into(), format!("q_{id}").into());
            if kind == "artifact" {
                q.insert("artifact_id".into(), id.clone().into());
            }
            q.insert("subject_kind".into(), kind.into());
            q.insert("subject_id".into(), id.into());
            q.insert("safe_summary".into(), QUARANTINE_SUMMARY.into());
            m.insert("quarantine".into(), Value::Object(q));
            "quarantined"
        }
        _ => {
            let mut d = Map::new();
            d.insert("policy".into(), format!("kungfu:{}", r.code.as_str()).into());
            d.insert("actor".into(), actor(cx.actor));
            if let Some(scope) = op.and_then(declared_scope) {
                d.insert("required_scope".into(), scope.into());
            }
            m.insert("denial".into(), Value::Object(d));
            "denied"
        }
    };
    m.insert("verdict".into(), verdict.into());
    let mut ext = Map::new();
    ext.insert("code".into(), r.code.as_str().into());
    ext.insert("next".into(), r.next.as_str().into());
    if let Some(f) = &r.field {
        ext.insert("field".into(), f.clone().into());
    }
    ext.insert("message".into(), r.message.clone().into());
    m.insert("kungfu".into(), Value::Object(ext));
    Value::Object(m)
}

// ---------------------------------------------------------------------------------------------
// Events and the journal

fn redacted_event(ev: &pb::RecordEvent) -> FakError {
    FakError::invalid(
        format!("events[rev {}]", ev.rev),
        "is redacted for this audience: it has nothing to export; read with a wider audience",
    )
}

/// `sha256:` over what the event records of its patch (record, revs, entry, actor, time, paths):
/// the patch's own bytes are not in the history.
pub fn patch_digest(record: &str, ev: &pb::RecordEvent) -> String {
    digest(&json!({
        "record": record,
        "rev": ev.rev,
        "base_rev": ev.base_rev,
        "entry": ev.entry,
        "actor": ev.actor,
        "at_unix_micros": ev.at_unix_micros,
        "paths": ev.paths,
    }))
}

/// `fak.shared-event.v1` of an accepted write of `record`. `base_rev` and `next_rev` are the rev
/// strings of the event's base and new rev (for the creation, rev 1, both are rev 1's); `prev_event`
/// is the digest of the previous event's envelope, empty for the first (fak's chain). The kind is
/// `record_created` for rev 1 and `patch_accepted` after; durability is `durable`; scope and taint
/// are the event's derived labels. A redacted event is refused.
pub fn event(
    record: &str,
    ev: &pb::RecordEvent,
    base_rev: &str,
    next_rev: &str,
    prev_event: &str,
) -> Result<Value, FakError> {
    if ev.redacted {
        return Err(redacted_event(ev));
    }
    let scope = scope_name(ev.scope)
        .ok_or_else(|| FakError::invalid(format!("events[rev {}].scope", ev.rev), "is unspecified"))?;
    let taint = taint_name(ev.taint)
        .ok_or_else(|| FakError::invalid(format!("events[rev {}].taint", ev.rev), "is unspecified"))?;
    Ok(json!({
        "schema": SCHEMA_EVENT,
        "event_id": event_id(record, ev.rev),
        "task_id": task_id(record),
        "prev_event": prev_event,
        "event_kind": if ev.rev <= 1 { "record_created" } else { "patch_accepted" },
        "actor": actor(&ev.actor),
        "base_rev": base_rev,
        "next_rev": next_rev,
        "scope": scope,
        "durability": "durable",
        "taint": taint,
        "patch_digest": patch_digest(record, ev),
        "verdict": "accepted",
        "reason": "",
        "ts": rfc3339(ev.at_unix_micros),
        "kungfu": {"rev": ev.rev, "base_rev": ev.base_rev, "entry": ev.entry, "paths": ev.paths},
    }))
}

/// `fak.shared-task-journal.v1` of one record: `views` are its views at consecutive revs (the
/// same audience), the first being `initial`; `events` holds at least the event of every later
/// view's rev (others are ignored). Each entry is the event and the task at its rev, with
/// `record_digest` = [`digest`] of that task; events chain by `prev_event` = the digest of the
/// previous entry's event (empty for the first); `digest` is the digest of the journal without its
/// `digest` field. A merged patch's base must be one of the views.
pub fn journal(views: &[pb::RecordView], events: &[pb::RecordEvent]) -> Result<Value, FakError> {
    let first = views.first().ok_or_else(|| FakError::invalid("views", "is empty: a journal starts at a rev"))?;
    let record = first.id.as_str();
    let mut revs: HashMap<u32, String> = HashMap::new();
    for (i, v) in views.iter().enumerate() {
        if v.id != record {
            return Err(FakError::invalid(format!("views[{i}].id"), format!("is {}, not {record}", v.id)));
        }
        if v.rev != first.rev + i as u32 {
            return Err(FakError::invalid(format!("views[{i}].rev"), "views must be at consecutive revs"));
        }
        revs.insert(v.rev, rev_digest(v));
    }
    let event_of = |rev: u32| events.iter().find(|e| e.rev == rev);
    let initial = task(first, event_of(first.rev));
    let mut entries = Vec::new();
    let mut prev = String::new();
    for v in &views[1..] {
        let ev =
            event_of(v.rev).ok_or_else(|| FakError::invalid("events", format!("has no event of rev {}", v.rev)))?;
        let base = revs.get(&ev.base_rev).ok_or_else(|| {
            FakError::invalid(
                format!("events[rev {}].base_rev", v.rev),
                format!("rev {} is before the journal's first view", ev.base_rev),
            )
        })?;
        let e = event(record, ev, base, &revs[&v.rev], &prev)?;
        let t = task(v, Some(ev));
        prev = digest(&e);
        entries.push(json!({"event": e, "record_digest": digest(&t), "record": t}));
    }
    let mut j = Map::new();
    j.insert("schema".into(), SCHEMA_JOURNAL.into());
    j.insert("task_id".into(), task_id(record).into());
    j.insert("initial".into(), initial);
    j.insert("entries".into(), entries.into());
    let d = digest(&Value::Object(j.clone()));
    j.insert("digest".into(), d.into());
    Ok(Value::Object(j))
}

/// Checks a journal's chains as [`journal`] builds them: every `record_digest`, the `prev_event`
/// chain, every event's `next_rev` = its record's `rev` and `base_rev` a rev seen before, and the
/// journal digest. The error names the JSON pointer of the first mismatch.
pub fn verify_journal(j: &Value) -> Result<(), FakError> {
    let o = obj(j, "")?;
    let initial = obj(field(o, "", "initial")?, "/initial")?;
    let mut seen = vec![string(initial, "/initial", "rev")?.to_string()];
    let entries =
        field(o, "", "entries")?.as_array().ok_or_else(|| FakError::invalid("/entries", "is not an array"))?;
    let mut prev = String::new();
    for (i, entry) in entries.iter().enumerate() {
        let p = format!("/entries/{i}");
        let e = obj(entry, &p)?;
        let ev = field(e, &p, "event")?;
        let rec = field(e, &p, "record")?;
        if string(e, &p, "record_digest")? != digest(rec) {
            return Err(FakError::invalid(format!("{p}/record_digest"), "is not the digest of the record"));
        }
        let evo = obj(ev, &format!("{p}/event"))?;
        if string(evo, &format!("{p}/event"), "prev_event")? != prev {
            return Err(FakError::invalid(format!("{p}/event/prev_event"), "breaks the event chain"));
        }
        let base = string(evo, &format!("{p}/event"), "base_rev")?;
        if !seen.iter().any(|r| r.as_str() == base) {
            return Err(FakError::invalid(format!("{p}/event/base_rev"), "is no rev seen before"));
        }
        let next = string(evo, &format!("{p}/event"), "next_rev")?;
        if Some(next) != rec.get("rev").and_then(Value::as_str) {
            return Err(FakError::invalid(format!("{p}/event/next_rev"), "is not the record's rev"));
        }
        seen.push(next.to_string());
        prev = digest(ev);
    }
    let mut without = o.clone();
    let claimed = without.remove("digest");
    if claimed.as_ref().and_then(Value::as_str) != Some(digest(&Value::Object(without)).as_str()) {
        return Err(FakError::invalid("/digest", "is not the digest of the journal"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_json_sorts_keys_and_drops_whitespace() {
        let v = json!({"b": [1, {"z": "é\n", "a": null}], "a": true});
        assert_eq!(canonical_json(&v), r#"{"a":true,"b":[1,{"a":null,"z":"é\n"}]}"#);
    }

    #[test]
    fn rfc3339_of_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_782_345_600_000_000), "2026-06-25T00:00:00Z");
        assert_eq!(rfc3339(951_782_400_000_001), "2000-02-29T00:00:00.000001Z");
        assert_eq!(rfc3339(-1_000_000), "1969-12-31T23:59:59Z");
    }

    #[test]
    fn task_ids_and_records() {
        assert_eq!(task_id("rec_4"), "task_rec_4");
        assert_eq!(record_of("task_rec_4"), Some("rec_4"));
        assert_eq!(record_of("task_shared_demo"), None);
        assert_eq!(record_of("task_rec_"), None);
        assert_eq!(op_index(Some("ops[12].append_note.note_id")), Some(12));
        assert_eq!(op_index(Some("message")), None);
    }

    #[test]
    fn decision_paths_decode_one_token() {
        assert_eq!(decision_state_path("/open_decisions/d1/state").as_deref(), Some("d1"));
        assert_eq!(decision_state_path("/open_decisions/a/b/state"), None);
        assert_eq!(decision_state_path("/open_decisions//state"), None);
    }
}
