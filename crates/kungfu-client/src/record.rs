//! Builders for the shared record's requests (COORDINATION §5.3, §5.4): a new record
//! ([`NewRecord`]) and a patch of typed ops against the rev the caller read ([`Patch`]), and the
//! bodies they carry ([`body_text`], [`body_pin`], [`body_external`]).
//!
//! A patch of appends with new ids commutes: on a stale base the server merges it onto the newer
//! rev (`RecordPatched.merged`). A replace on a stale base is refused `STALE_BASE` with the
//! three-way conflict, which [`Error::record_conflict`](crate::Error::record_conflict) reads; re-read
//! the record ([`Client::get_record`](crate::Client::get_record)) and patch the current rev, or ask
//! a person to decide.

use crate::build::{content, labels};
use kungfu_api::pb;
use kungfu_types::Labels;

/// New content for a body or a note, labeled: it becomes a labeled private Memory of the writer in
/// the same action. A record needs at least fleet scope and at most the record's.
pub fn body_text(body: impl Into<Vec<u8>>, with: Labels) -> pb::RecordBodyInput {
    pb::RecordBodyInput {
        kind: Some(pb::record_body_input::Kind::Content(pb::LabeledContent {
            content: content(body),
            labels: Some(labels(with.taint, with.scope)),
        })),
    }
}

/// An existing version as a body: its own labels apply.
pub fn body_pin(memory: &str, version: u32) -> pb::RecordBodyInput {
    pb::RecordBodyInput {
        kind: Some(pb::record_body_input::Kind::Pin(pb::MemoryPin { memory: memory.to_string(), version })),
    }
}

/// A reference to bytes kept outside the runtime, with their declared labels. Admission needs a
/// `deletion_certificate` (a `sha256:` digest); without one the patch is refused TRUST_VIOLATION.
pub fn external(
    store: &str,
    digest: &str,
    bytes: u64,
    with: Labels,
    deletion_certificate: Option<&str>,
) -> pb::ExternalRef {
    pb::ExternalRef {
        store: store.to_string(),
        digest: digest.to_string(),
        bytes,
        labels: Some(labels(with.taint, with.scope)),
        deletion_certificate: deletion_certificate.unwrap_or_default().to_string(),
    }
}

/// An external reference as a body.
pub fn body_external(e: pb::ExternalRef) -> pb::RecordBodyInput {
    pb::RecordBodyInput { kind: Some(pb::record_body_input::Kind::External(e)) }
}

/// A `CreateRecord` request: a record in `thread` with a title, a state, a body, its scope (the
/// widest audience it may reach, at least fleet) and who may edit it, announced by `message`.
#[derive(Debug, Clone)]
pub struct NewRecord(pb::CreateRecordRequest);

impl NewRecord {
    /// A record editable by every member who may speak, fleet-scoped.
    pub fn new(
        thread: &str,
        title: impl Into<Vec<u8>>,
        state: impl Into<Vec<u8>>,
        body: pb::RecordBodyInput,
        message: pb::LabeledBody,
    ) -> NewRecord {
        NewRecord(pb::CreateRecordRequest {
            idempotency_key: String::new(),
            thread: thread.to_string(),
            title: content(title),
            state: content(state),
            body: Some(body),
            scope: pb::Scope::Fleet as i32,
            editors: pb::RecordEditors::Speakers as i32,
            message: Some(message),
            ask: None,
        })
    }

    /// The widest audience the record may reach (fleet, tenant or public).
    pub fn scope(mut self, scope: pb::Scope) -> NewRecord {
        self.0.scope = scope as i32;
        self
    }

    /// Only governors may patch it; a speaker's patch is refused NOT_GOVERNOR.
    pub fn governors_only(mut self) -> NewRecord {
        self.0.editors = pb::RecordEditors::Governors as i32;
        self
    }

    /// The announcing entry asks these members to respond.
    pub fn ask(mut self, agents: impl IntoIterator<Item = String>) -> NewRecord {
        self.0.ask = Some(pb::Ask { agents: agents.into_iter().collect() });
        self
    }
}

impl From<NewRecord> for pb::CreateRecordRequest {
    fn from(r: NewRecord) -> pb::CreateRecordRequest {
        r.0
    }
}

/// A `PatchRecord` request: typed ops, applied in order, all or none, against `base_rev`.
#[derive(Debug, Clone)]
pub struct Patch(pb::PatchRecordRequest);

impl Patch {
    /// A patch of `record` against the rev the caller read, announced by `message`. Add ops with
    /// the methods below; a patch needs at least one.
    pub fn new(record: &str, base_rev: u32, message: pb::LabeledBody) -> Patch {
        Patch(pb::PatchRecordRequest {
            idempotency_key: String::new(),
            record: record.to_string(),
            base_rev,
            ops: Vec::new(),
            message: Some(message),
            ask: None,
        })
    }

    fn op(mut self, op: pb::patch_op::Op) -> Patch {
        self.0.ops.push(pb::PatchOp { op: Some(op) });
        self
    }

    /// Replaces the title (conflicts on a stale base).
    pub fn replace_title(self, title: impl Into<Vec<u8>>) -> Patch {
        self.op(pb::patch_op::Op::ReplaceTitle(pb::Content { body: title.into() }))
    }

    /// Replaces the state (conflicts on a stale base).
    pub fn replace_state(self, state: impl Into<Vec<u8>>) -> Patch {
        self.op(pb::patch_op::Op::ReplaceState(pb::Content { body: state.into() }))
    }

    /// Replaces the body (conflicts on a stale base).
    pub fn replace_body(self, body: pb::RecordBodyInput) -> Patch {
        self.op(pb::patch_op::Op::ReplaceBody(body))
    }

    /// Sets an open decision's state (conflicts on a stale base).
    pub fn replace_decision_state(self, decision_id: &str, state: impl Into<Vec<u8>>) -> Patch {
        self.op(pb::patch_op::Op::ReplaceDecisionState(pb::DecisionStateChange {
            decision_id: decision_id.to_string(),
            state: content(state),
        }))
    }

    /// Appends a note with a new id (commutes).
    pub fn append_note(self, note_id: &str, kind: pb::NoteKind, body: pb::RecordBodyInput) -> Patch {
        self.op(pb::patch_op::Op::AppendNote(pb::NoteInput {
            note_id: note_id.to_string(),
            kind: kind as i32,
            body: Some(body),
        }))
    }

    /// Appends an artifact reference with a new id (commutes): a pin or an external reference.
    pub fn append_artifact(self, artifact_id: &str, reference: pb::RecordBodyRef, media_type: &str) -> Patch {
        self.op(pb::patch_op::Op::AppendArtifact(pb::ArtifactInput {
            artifact_id: artifact_id.to_string(),
            reference: Some(reference),
            media_type: media_type.to_string(),
        }))
    }

    /// Appends an open decision with a new id, its first state and its reason (commutes).
    pub fn append_decision(self, decision_id: &str, state: impl Into<Vec<u8>>, reason: impl Into<Vec<u8>>) -> Patch {
        self.op(pb::patch_op::Op::AppendDecision(pb::DecisionInput {
            decision_id: decision_id.to_string(),
            state: content(state),
            reason: content(reason),
        }))
    }

    /// The patch's entry asks these members to respond.
    pub fn ask(mut self, agents: impl IntoIterator<Item = String>) -> Patch {
        self.0.ask = Some(pb::Ask { agents: agents.into_iter().collect() });
        self
    }

    /// The ops so far.
    pub fn ops(&self) -> &[pb::PatchOp] {
        &self.0.ops
    }
}

impl From<Patch> for pb::PatchRecordRequest {
    fn from(p: Patch) -> pb::PatchRecordRequest {
        p.0
    }
}

/// The fak path an op writes (`/title`, `/notes`, `/open_decisions/d1/state`), as events and
/// conflicts name it.
pub fn op_path(op: &pb::PatchOp) -> String {
    use pb::patch_op::Op;
    match &op.op {
        None => String::new(),
        Some(Op::ReplaceTitle(_)) => "/title".into(),
        Some(Op::ReplaceState(_)) => "/state".into(),
        Some(Op::ReplaceBody(_)) => "/body_ref".into(),
        Some(Op::ReplaceDecisionState(d)) => format!("/open_decisions/{}/state", d.decision_id),
        Some(Op::AppendNote(_)) => "/notes".into(),
        Some(Op::AppendArtifact(_)) => "/artifacts".into(),
        Some(Op::AppendDecision(_)) => "/open_decisions".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kungfu_types::{Scope, Taint};

    #[test]
    fn a_patch_keeps_its_ops_in_order_with_their_paths() {
        let msg = crate::labeled_text("why", Labels::new(Taint::Tainted, Scope::Fleet));
        let p = Patch::new("rec_1", 3, msg)
            .append_note("n1", pb::NoteKind::Comment, body_text("hi", Labels::new(Taint::Tainted, Scope::Fleet)))
            .replace_state("done")
            .append_decision("d1", "open", "who decides?")
            .replace_decision_state("d1", "closed");
        let paths: Vec<String> = p.ops().iter().map(op_path).collect();
        assert_eq!(paths, ["/notes", "/state", "/open_decisions", "/open_decisions/d1/state"]);
        let req = pb::PatchRecordRequest::from(p);
        assert_eq!((req.record.as_str(), req.base_rev, req.ops.len()), ("rec_1", 3, 4));
        assert!(req.idempotency_key.is_empty(), "the SDK fills the key in");
    }

    #[test]
    fn a_new_record_defaults_to_fleet_scope_and_speakers() {
        let body = body_external(external("s3", "sha256:abc", 5, Labels::new(Taint::Tainted, Scope::Tenant), None));
        let r = pb::CreateRecordRequest::from(
            NewRecord::new("th_2", "t", "s", body, crate::pinned("mem_1", 1)).scope(pb::Scope::Tenant).governors_only(),
        );
        assert_eq!(r.scope, pb::Scope::Tenant as i32);
        assert_eq!(r.editors, pb::RecordEditors::Governors as i32);
        let Some(pb::record_body_input::Kind::External(e)) = r.body.and_then(|b| b.kind) else { panic!("external") };
        assert!(e.deletion_certificate.is_empty(), "no certificate unless given");
    }
}
