//! The shared record's actions (design §5.3–§5.6): `CreateRecord` and `PatchRecord`. Each is a base
//! `Post` in the record's thread (the permission is exactly "may speak", L2) plus one record fact
//! that creates no obligation and grants no right (design §6). Every check runs before the first
//! fact, so a refusal has no effect and the leader's pre-check refuses exactly what apply would.

use super::coord::{LIMITS, Resolved, check_memory_capacity, resolve_body, speaker_in_open_thread, write_body};
use super::threads::{check_ask, emit_post};
use super::{Cx, Fail, Res, memory, reject, reject_field};
use crate::action::{ArtifactInput, BodyInput, LabeledBody, PatchOp};
use crate::coord::floor::{Context, effective};
use crate::fact::Fact;
use crate::keys;
use crate::model::*;
use crate::receipt::ActionResult;
use crate::state::{StateExt, StateRead};
use crate::visibility;
use kungfu_types::{
    AgentId, Code, ConflictValue, Content, ExternalRef, FakReason, Labels, RecordConflict, RecordId, Rejection,
    RejectionDetail, Role, Scope, SharedReason, Taint, ThreadId,
};
use std::collections::BTreeSet;

/// Which kind of reference is admitted: the fak reason of a refusal names it (design §5.5).
#[derive(Clone, Copy, PartialEq, Eq)]
enum RefKind {
    Body,
    Artifact,
}

/// A reference admitted by §5.5, not yet written.
enum Admitted {
    Pin(Pin, Labels),
    Content(Content, Labels),
    External(ExternalRef),
}

impl Admitted {
    fn labels(&self) -> Labels {
        match self {
            Admitted::Pin(_, l) | Admitted::Content(_, l) => *l,
            Admitted::External(e) => e.labels,
        }
    }
    fn inline_bytes(&self) -> Option<usize> {
        match self {
            Admitted::Content(c, _) => Some(c.len()),
            _ => None,
        }
    }
    /// The value a conflict shows as proposed (inline content is shown as its text).
    fn proposed(&self) -> ConflictValue {
        match self {
            Admitted::Pin(p, _) => ConflictValue::Pin { memory: p.memory, version: p.version },
            Admitted::Content(c, _) => ConflictValue::Text(c.clone()),
            Admitted::External(e) => ConflictValue::External(e.clone()),
        }
    }
}

fn trust(field: &str, message: impl Into<String>, shared: SharedReason) -> Fail {
    Fail::Reject(
        Rejection::field(Code::TrustViolation, field, message)
            .with_fak(FakReason::TrustViolation)
            .with_fak_shared(shared),
    )
}

/// `[A-Za-z0-9!#$&^_.+/-]{1,128}`: a store or media type (design §5.2).
fn is_token(s: &str) -> bool {
    (1..=128).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$&^_.+/-".contains(&b))
}

/// `sha256:[A-Za-z0-9]{1,128}` (fak's placeholder digests must parse, design §5.2).
fn is_digest(s: &str) -> bool {
    s.strip_prefix("sha256:")
        .is_some_and(|d| (1..=128).contains(&d.len()) && d.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// Design §5.5, in order: the pin rule (or the size of inline content), the floor for a record
/// item of this record's scope, then the deletion certificate of an external reference.
fn admit(
    cx: &Cx<'_>,
    me: AgentId,
    field: &str,
    input: &BodyInput,
    record_scope: Scope,
    kind: RefKind,
) -> Res<Admitted> {
    let (quarantined, witness) = match kind {
        RefKind::Body => (SharedReason::BodyQuarantined, SharedReason::BodyWitnessMissing),
        RefKind::Artifact => (SharedReason::ArtifactQuarantined, SharedReason::ArtifactWitnessMissing),
    };
    let (admitted, labels_field) = match input {
        BodyInput::Pin(pin) => {
            let f = format!("{field}.pin");
            cx.referable_pin(&f, *pin, me)?;
            // Unlabeled counts as private (fail closed, design §2.2), so the floor refuses it.
            (Admitted::Pin(*pin, effective(cx.tx.labels(*pin)?)), f)
        }
        BodyInput::Content { content, labels } => {
            cx.content(&format!("{field}.content.content"), content, cx.limits.max_content_bytes)?;
            (Admitted::Content(content.clone(), *labels), format!("{field}.content.labels"))
        }
        BodyInput::External(e) => {
            let f = format!("{field}.external");
            if !is_token(&e.store) {
                return reject_field(Code::InvalidArgument, &format!("{f}.store"), "is not a store token");
            }
            if !is_digest(&e.digest) {
                return reject_field(Code::InvalidArgument, &format!("{f}.digest"), "is not a sha256: digest");
            }
            if e.deletion_certificate.as_deref().is_some_and(|c| !is_digest(c)) {
                return reject_field(
                    Code::InvalidArgument,
                    &format!("{f}.deletion_certificate"),
                    "is not a sha256: digest",
                );
            }
            (Admitted::External(e.clone()), format!("{f}.labels"))
        }
    };
    let labels = admitted.labels();
    if let Err(Fail::Reject(mut r)) = super::floor_at(&labels_field, labels, Context::RecordItem { record_scope }) {
        if labels.taint == Taint::Quarantined {
            r.fak_shared = Some(quarantined);
        }
        return Err(Fail::Reject(r));
    }
    if let Admitted::External(e) = &admitted
        && e.deletion_certificate.is_none()
    {
        return Err(trust(
            &format!("{field}.external.deletion_certificate"),
            "is missing: an external reference needs a deletion certificate (attach one)",
            witness,
        ));
    }
    Ok(admitted)
}

/// Title, state, decision state and reason: non-empty text within `max_record_field_bytes`.
fn text(cx: &Cx<'_>, field: &str, c: &Content) -> Res<()> {
    if c.is_empty() {
        return reject_field(Code::InvalidArgument, field, "must not be empty");
    }
    cx.content(field, c, LIMITS.max_record_field_bytes)
}

fn item_id(field: &str, id: &ItemId) -> Res<()> {
    if !id.is_valid() {
        return reject_field(Code::InvalidArgument, field, "must be 1 to 64 characters of [A-Za-z0-9_.-]");
    }
    Ok(())
}

/// The inline bytes of one action against the coordination budget (design §9), then the
/// Memories-per-agent cap for the new Memories they become.
fn inline_budget(cx: &Cx<'_>, me: AgentId, admitted: &[&Admitted], message: &Resolved) -> Res<()> {
    let mut bytes = 0usize;
    let mut count = 0usize;
    let message_bytes = match message {
        Resolved::Content(c, _) => Some(c.len()),
        Resolved::Pin(_) => None,
    };
    for n in admitted.iter().filter_map(|a| a.inline_bytes()).chain(message_bytes) {
        bytes = bytes.saturating_add(n);
        count += 1;
    }
    super::coord::check_inline_bytes(bytes)?;
    check_memory_capacity(cx, me, count)
}

/// Writes an admitted reference: inline content becomes a labeled Memory of the writer.
fn write_ref(cx: &mut Cx<'_>, me: AgentId, field: &str, a: Admitted) -> Res<BodyRef> {
    Ok(match a {
        Admitted::Pin(p, _) => BodyRef::Pin(p),
        Admitted::External(e) => BodyRef::External(e),
        Admitted::Content(content, labels) => {
            let (memory, version) = memory::emit_memory(cx, me, &content, &format!("{field}.content"))?;
            cx.emit(Fact::VersionLabeled { memory, version, labels, widened_from: None })?;
            BodyRef::Pin(Pin { memory, version })
        }
    })
}

// --- Design §5.3 CreateRecord ---------------------------------------------------------------------

pub(super) struct NewRecord<'a> {
    pub thread: ThreadId,
    pub title: &'a Content,
    pub state: &'a Content,
    pub body: &'a BodyInput,
    pub scope: Scope,
    pub editors: Editors,
    pub message: &'a LabeledBody,
    pub ask: Option<&'a BTreeSet<AgentId>>,
}

/// Design §5.3: a record at rev 1, created by an entry of a member who may speak.
pub(super) fn create_record(cx: &mut Cx<'_>, me: AgentId, n: &NewRecord<'_>) -> Res<ActionResult> {
    let t = speaker_in_open_thread(cx, n.thread, me)?;
    let existing = cx.tx.index_refs(&keys::thread_records(n.thread), LIMITS.max_records_per_thread + 1)?.len();
    if existing >= LIMITS.max_records_per_thread {
        return reject(
            Code::LimitExceeded,
            format!("a thread holds at most {} shared records", LIMITS.max_records_per_thread),
        );
    }
    if n.scope < Scope::Fleet {
        return reject_field(
            Code::InvalidArgument,
            "scope",
            "must be at least fleet: a record lives in a thread, which every member reads",
        );
    }
    text(cx, "title", n.title)?;
    text(cx, "state", n.state)?;
    let body = admit(cx, me, "body", n.body, n.scope, RefKind::Body)?;
    let message = resolve_body(cx, me, "message", n.message)?;
    if let Some(ask) = n.ask {
        check_ask(cx, n.thread, me, ask)?;
    }
    inline_budget(cx, me, &[&body], &message)?;
    let Some(id) = kungfu_types::group::next_id(cx.tx.group(), cx.tx.record_counter()?.unwrap_or(0)).map(RecordId)
    else {
        return reject(Code::LimitExceeded, "no record ids are left");
    };

    let body = write_ref(cx, me, "body", body)?;
    let pin = write_body(cx, me, "message", message)?;
    let (entry, _, _) = emit_post(cx, me, &t, pin, None, Some(n.ask.cloned().unwrap_or_default()), None)?;
    cx.emit(Fact::RecordCreated {
        record: id,
        thread: n.thread,
        entry,
        creator: me,
        scope: n.scope,
        editors: n.editors,
        title: n.title.clone(),
        state: n.state.clone(),
        body,
    })?;
    Ok(ActionResult::RecordCreated { record: id, thread: n.thread, entry, rev: 1 })
}

// --- Design §5.4–§5.6 PatchRecord -----------------------------------------------------------------

/// An op after admission: its references admitted, not yet written.
enum Checked {
    Title(Content),
    State(Content),
    Body(Admitted),
    DecisionState { decision: ItemId, state: Content },
    Note { note_id: ItemId, kind: NoteKind, body: Admitted },
    Artifact { artifact_id: ItemId, reference: Admitted, media_type: String },
    Decision { decision_id: ItemId, state: Content, reason: Content },
}

fn to_conflict(v: FieldValue) -> ConflictValue {
    match v {
        FieldValue::Text(c) => ConflictValue::Text(c),
        FieldValue::Body(BodyRef::Pin(p)) => ConflictValue::Pin { memory: p.memory, version: p.version },
        FieldValue::Body(BodyRef::External(e)) => ConflictValue::External(e),
    }
}

/// The labels a stored reference carries (a pin's version's, fail closed when unlabeled).
fn ref_labels(cx: &Cx<'_>, r: &BodyRef) -> Res<Labels> {
    Ok(match r {
        BodyRef::Pin(p) => effective(cx.tx.labels(*p)?),
        BodyRef::External(e) => e.labels,
    })
}

/// Design §5.6, in its exact order: who may write, the shape of the patch, admission of every
/// reference (before staleness, so a quarantine outranks a conflict), then each op on a working
/// copy (a stale replace conflicts, a used id is a duplicate, a missing decision is no target, an
/// item count is bounded). A patch is all-or-nothing (L2).
pub(super) fn patch_record(
    cx: &mut Cx<'_>,
    me: AgentId,
    id: RecordId,
    base_rev: u32,
    ops: &[PatchOp],
    message: &LabeledBody,
    ask: Option<&BTreeSet<AgentId>>,
) -> Res<ActionResult> {
    // 1. One answer for an unknown record and one in a thread the caller is not a member of (§12).
    let Some(r) = cx.tx.shared_record(id)? else {
        return Err(Fail::Reject(Rejection::not_found("record")));
    };
    let Some((t, m)) = visibility::current_member(&cx.tx, r.thread, me)? else {
        return Err(Fail::Reject(Rejection::not_found("record")));
    };
    if !t.is_open() {
        return reject(Code::ThreadClosed, "the thread is closed, and its records are read-only");
    }
    if !m.may_speak() {
        return reject(Code::CannotSpeak, "an observer may read a record but not write it");
    }
    if r.editors == Editors::Governors && m.role != Role::Governor {
        return Err(Fail::Reject(
            Rejection::new(
                Code::NotGovernor,
                "only a governor may write this record: post an entry asking a governor to apply it",
            )
            .with_fak_shared(SharedReason::ApprovalRequired),
        ));
    }
    // 2. The shape of the patch.
    if ops.is_empty() {
        return reject_field(Code::InvalidArgument, "ops", "names no op; a patch needs at least one");
    }
    if ops.len() > LIMITS.max_patch_ops {
        return reject_field(Code::LimitExceeded, "ops", format!("a patch has at most {} ops", LIMITS.max_patch_ops));
    }
    if base_rev == 0 || base_rev > r.rev {
        return reject_field(
            Code::InvalidArgument,
            "base_rev",
            format!("must name a rev of the record, 1 to {}; read the record and patch its rev", r.rev),
        );
    }
    // 3. Admission of every reference, the sizes and shapes of every value, in op order.
    let mut checked = Vec::with_capacity(ops.len());
    for (i, op) in ops.iter().enumerate() {
        let f = format!("ops[{i}]");
        checked.push(match op {
            PatchOp::ReplaceTitle(c) => {
                text(cx, &format!("{f}.replace_title"), c)?;
                Checked::Title(c.clone())
            }
            PatchOp::ReplaceState(c) => {
                text(cx, &format!("{f}.replace_state"), c)?;
                Checked::State(c.clone())
            }
            PatchOp::ReplaceBody(b) => {
                Checked::Body(admit(cx, me, &format!("{f}.replace_body"), b, r.scope, RefKind::Body)?)
            }
            PatchOp::ReplaceDecisionState { decision, state } => {
                item_id(&format!("{f}.replace_decision_state.decision_id"), decision)?;
                text(cx, &format!("{f}.replace_decision_state.state"), state)?;
                Checked::DecisionState { decision: decision.clone(), state: state.clone() }
            }
            PatchOp::AppendNote { note_id, kind, body } => {
                item_id(&format!("{f}.append_note.note_id"), note_id)?;
                let body = admit(cx, me, &format!("{f}.append_note.body"), body, r.scope, RefKind::Body)?;
                Checked::Note { note_id: note_id.clone(), kind: *kind, body }
            }
            PatchOp::AppendArtifact { artifact_id, reference, media_type } => {
                item_id(&format!("{f}.append_artifact.artifact_id"), artifact_id)?;
                if !is_token(media_type) {
                    return reject_field(
                        Code::InvalidArgument,
                        &format!("{f}.append_artifact.media_type"),
                        "is not a media type token",
                    );
                }
                let input = match reference {
                    ArtifactInput::Pin(p) => BodyInput::Pin(*p),
                    ArtifactInput::External(e) => BodyInput::External(e.clone()),
                };
                let reference =
                    admit(cx, me, &format!("{f}.append_artifact.reference"), &input, r.scope, RefKind::Artifact)?;
                Checked::Artifact { artifact_id: artifact_id.clone(), reference, media_type: media_type.clone() }
            }
            PatchOp::AppendDecision { decision_id, state, reason } => {
                item_id(&format!("{f}.append_decision.decision_id"), decision_id)?;
                text(cx, &format!("{f}.append_decision.state"), state)?;
                text(cx, &format!("{f}.append_decision.reason"), reason)?;
                Checked::Decision { decision_id: decision_id.clone(), state: state.clone(), reason: reason.clone() }
            }
        });
    }
    let message = resolve_body(cx, me, "message", message)?;
    // 4. Each op on a working copy.
    let stale = base_rev != r.rev;
    let mut counts = r.counts;
    let mut added: BTreeSet<(ItemKind, ItemId)> = BTreeSet::new();
    for (i, op) in checked.iter().enumerate() {
        let f = format!("ops[{i}]");
        let (kind, new_id) = match op {
            Checked::Title(c) => {
                if stale {
                    return stale_base(
                        cx,
                        &r,
                        base_rev,
                        i,
                        "/title",
                        Some(RecordField::Title),
                        ConflictValue::Text(c.clone()),
                    );
                }
                continue;
            }
            Checked::State(c) => {
                if stale {
                    return stale_base(
                        cx,
                        &r,
                        base_rev,
                        i,
                        "/state",
                        Some(RecordField::State),
                        ConflictValue::Text(c.clone()),
                    );
                }
                continue;
            }
            Checked::Body(a) => {
                if stale {
                    return stale_base(cx, &r, base_rev, i, "/body_ref", Some(RecordField::Body), a.proposed());
                }
                continue;
            }
            Checked::DecisionState { decision, state } => {
                let seq = cx.tx.record_item_seq(id, ItemKind::Decision, &decision.0)?;
                if stale {
                    let path = format!("/open_decisions/{decision}/state");
                    let field = seq.map(RecordField::DecisionState);
                    return stale_base(cx, &r, base_rev, i, &path, field, ConflictValue::Text(state.clone()));
                }
                if seq.is_none() && !added.contains(&(ItemKind::Decision, decision.clone())) {
                    return Err(Fail::Reject(
                        Rejection::field(
                            Code::InvalidTarget,
                            format!("{f}.replace_decision_state.decision_id"),
                            "names no decision of this record",
                        )
                        .with_fak_shared(SharedReason::MissingDecision),
                    ));
                }
                continue;
            }
            Checked::Note { note_id, .. } => (ItemKind::Note, note_id),
            Checked::Artifact { artifact_id, .. } => (ItemKind::Artifact, artifact_id),
            Checked::Decision { decision_id, .. } => (ItemKind::Decision, decision_id),
        };
        let used = cx.tx.record_item_seq(id, kind, &new_id.0)?.is_some();
        if used || !added.insert((kind, new_id.clone())) {
            let (what, shared, field) = match kind {
                ItemKind::Note => ("note", SharedReason::DuplicateNote, "append_note.note_id"),
                ItemKind::Artifact => ("artifact", SharedReason::DuplicateArtifact, "append_artifact.artifact_id"),
                ItemKind::Decision => ("decision", SharedReason::DuplicateDecision, "append_decision.decision_id"),
            };
            return Err(Fail::Reject(
                Rejection::field(
                    Code::DuplicateId,
                    format!("{f}.{field}"),
                    format!("the record already has a {what} with this id (resolution: manual); choose a new id"),
                )
                .with_fak_shared(shared),
            ));
        }
        let n = counts.get_mut(kind);
        if *n >= LIMITS.max_record_items {
            return reject_field(
                Code::LimitExceeded,
                &f,
                format!("a record holds at most {} items of each kind", LIMITS.max_record_items),
            );
        }
        *n += 1;
    }
    if let Some(ask) = ask {
        check_ask(cx, r.thread, me, ask)?;
    }
    let refs: Vec<&Admitted> = checked
        .iter()
        .filter_map(|c| match c {
            Checked::Body(a) | Checked::Note { body: a, .. } | Checked::Artifact { reference: a, .. } => Some(a),
            _ => None,
        })
        .collect();
    inline_budget(cx, me, &refs, &message)?;

    // 5. Accept: inline bodies, the message, the entry, the record fact.
    let mut applied = Vec::with_capacity(checked.len());
    // Design §5.8: the event's labels are derived from the values it carries: a reference by its
    // labels; text (title, states, reasons) at the record's scope and, being unlabeled, tainted.
    let mut scope = r.scope;
    let mut taint = Taint::Trusted;
    for (i, op) in checked.into_iter().enumerate() {
        let f = format!("ops[{i}]");
        let op = match op {
            Checked::Title(c) => AppliedOp::ReplaceTitle(c),
            Checked::State(c) => AppliedOp::ReplaceState(c),
            Checked::Body(a) => AppliedOp::ReplaceBody(write_ref(cx, me, &format!("{f}.replace_body"), a)?),
            Checked::DecisionState { decision, state } => AppliedOp::ReplaceDecisionState { decision, state },
            Checked::Note { note_id, kind, body } => AppliedOp::AppendNote {
                note_id,
                kind,
                body: write_ref(cx, me, &format!("{f}.append_note.body"), body)?,
            },
            Checked::Artifact { artifact_id, reference, media_type } => AppliedOp::AppendArtifact {
                artifact_id,
                reference: write_ref(cx, me, &format!("{f}.append_artifact.reference"), reference)?,
                media_type,
            },
            Checked::Decision { decision_id, state, reason } => {
                AppliedOp::AppendDecision { decision_id, state, reason }
            }
        };
        match &op {
            AppliedOp::ReplaceBody(b)
            | AppliedOp::AppendNote { body: b, .. }
            | AppliedOp::AppendArtifact { reference: b, .. } => {
                let l = ref_labels(cx, b)?;
                scope = scope.min(l.scope);
                taint = taint.max(l.taint);
            }
            _ => taint = taint.max(Taint::Tainted),
        }
        applied.push(op);
    }
    let pin = write_body(cx, me, "message", message)?;
    let (entry, _, _) = emit_post(cx, me, &t, pin, None, Some(ask.cloned().unwrap_or_default()), None)?;
    let rev = r.rev + 1;
    cx.emit(Fact::RecordPatched { record: id, thread: r.thread, entry, base_rev, rev, ops: applied, scope, taint })?;
    Ok(ActionResult::RecordPatched { record: id, entry, base_rev, rev, merged: base_rev < r.rev })
}

/// Design §5.6: the conflict of a replace on a stale base, with the field's value at the base, its
/// value now, and the proposed one. The caller may speak in the thread, so it may read them all.
fn stale_base<T>(
    cx: &Cx<'_>,
    r: &SharedRecord,
    base_rev: u32,
    op: usize,
    path: &str,
    field: Option<RecordField>,
    proposed: ConflictValue,
) -> Res<T> {
    let (base_value, current_value) = match field {
        Some(field) => (
            cx.tx.record_value_at(r.id, field, base_rev)?.map(to_conflict),
            cx.tx.record_value_at(r.id, field, r.rev)?.map(to_conflict),
        ),
        None => (None, None),
    };
    let conflict = RecordConflict {
        record: r.id,
        path: path.to_owned(),
        base_rev,
        current_rev: r.rev,
        base_value,
        current_value,
        proposed_value: proposed,
        resolution: "rebase_or_human_decide".into(),
    };
    Err(Fail::Reject(
        Rejection::field(
            Code::StaleBase,
            format!("ops[{op}]"),
            format!(
                "replaces {path} on rev {base_rev}, but the record is at rev {}: re-read it and rebase, or ask a person \
                 to decide",
                r.rev
            ),
        )
        .with_fak_shared(SharedReason::StaleBase)
        .with_detail(RejectionDetail::RecordConflict(conflict)),
    ))
}
