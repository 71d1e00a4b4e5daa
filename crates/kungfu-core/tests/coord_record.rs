//! The shared record (design §5): fak's `sharedtask` tests ported (the view tests with their
//! expectations inverted, design §12 item 17), every row of design Appendix A.2 as a vector (the
//! `a2_` tests), and the fixes of design §11.1. Every step also runs the world's invariant,
//! rebuild-from-facts and pre-check checks (L1, design §8.3).

use kungfu_core::action::{ArtifactInput, BodyInput, LabeledBody, PatchOp};
use kungfu_core::coord::read::{
    BodyItem, BodyView, RecordBody, RecordEvent, RecordView, record, record_body, record_events,
};
use kungfu_core::model::{Editors, ItemId, NoteKind, Pin};
use kungfu_core::read::{ReadError, ReadResult};
use kungfu_core::state::StateExt;
use kungfu_core::testkit::World;
use kungfu_core::{Action, ActionResult, Record, actor_object, keys};
use kungfu_types::{
    AgentId, Code, ConflictValue, Content, ExternalRef, FakReason, Labels, NextStep, ObjectRef, RecordId, Rejection,
    RejectionDetail, Role, Scope, SharedReason, Taint, ThreadId,
};

// --- helpers ----------------------------------------------------------------------------------------

fn labels(taint: Taint, scope: Scope) -> Labels {
    Labels::new(taint, scope)
}

fn c(s: &str) -> Content {
    Content::from(s)
}

fn id(s: &str) -> ItemId {
    ItemId(s.into())
}

fn inline(text: &str, scope: Scope) -> BodyInput {
    BodyInput::Content { content: c(text), labels: labels(Taint::Tainted, scope) }
}

fn external(scope: Scope, certificate: bool) -> ExternalRef {
    ExternalRef {
        store: "s3".into(),
        digest: "sha256:notebodytenant001".into(),
        bytes: 42,
        labels: labels(Taint::Tainted, scope),
        deletion_certificate: certificate.then(|| "sha256:deletioncert001".into()),
    }
}

fn note(note_id: &str, scope: Scope) -> PatchOp {
    PatchOp::AppendNote { note_id: id(note_id), kind: NoteKind::Comment, body: inline("a note", scope) }
}

fn decision(decision_id: &str, state: &str) -> PatchOp {
    PatchOp::AppendDecision { decision_id: id(decision_id), state: c(state), reason: c("why") }
}

fn artifact(artifact_id: &str, reference: ArtifactInput) -> PatchOp {
    PatchOp::AppendArtifact { artifact_id: id(artifact_id), reference, media_type: "text/markdown".into() }
}

fn read_rejection<T: std::fmt::Debug>(r: ReadResult<T>) -> Rejection {
    match r {
        Err(ReadError::Rejected(r)) => r,
        other => panic!("expected a rejected read, got {other:?}"),
    }
}

#[track_caller]
fn assert_code(r: &Rejection, code: Code, shared: Option<SharedReason>) {
    assert_eq!(r.code, code, "{r}");
    assert_eq!(r.fak_shared, shared, "{r}");
}

fn facts_count(w: &World) -> usize {
    w.state.map.values().filter(|r| matches!(r, Record::Fact(_))).count()
}

fn obligation_count(w: &World) -> usize {
    w.state.map.values().filter(|r| matches!(r, Record::Obligation(_))).count()
}

/// A governor `g`, speakers `a` and `b`, an observer `o` in one thread; `x` is no member.
struct Group {
    w: World,
    g: AgentId,
    a: AgentId,
    b: AgentId,
    o: AgentId,
    x: AgentId,
    t: ThreadId,
}

fn group() -> Group {
    let mut w = World::new();
    let g = w.register();
    let a = w.register();
    let b = w.register();
    let o = w.register();
    let x = w.register();
    let t = w.thread_with(g, &[(a, Role::Speaker), (b, Role::Speaker), (o, Role::Observer)]);
    Group { w, g, a, b, o, x, t }
}

impl Group {
    fn record(&mut self, scope: Scope) -> RecordId {
        let (a, t) = (self.a, self.t);
        self.w.create_record(a, t, scope, Editors::Speakers)
    }

    fn patch(&mut self, who: AgentId, record: RecordId, base_rev: u32, ops: Vec<PatchOp>) -> ActionResult {
        match self.w.patch_record(who, record, base_rev, ops) {
            Ok(r) => r,
            Err(r) => panic!("patch by {who} was rejected: {r}"),
        }
    }

    /// A patch that must be refused with no effect at all (L2).
    fn refused(&mut self, who: AgentId, record: RecordId, base_rev: u32, ops: Vec<PatchOp>) -> Rejection {
        let before = self.w.state.clone();
        let r = self.w.patch_record(who, record, base_rev, ops).expect_err("the patch must be refused");
        assert!(self.w.state == before, "the refused patch ({r}) changed the state");
        r
    }

    fn view(&self, record_id: RecordId, at_rev: Option<u32>, audience: Scope) -> RecordView {
        record(&self.w.state, self.a, record_id, at_rev, audience).expect("a member reads the record")
    }
}

fn rev_of(r: &ActionResult) -> u32 {
    match r {
        ActionResult::RecordPatched { rev, .. } => *rev,
        other => panic!("unexpected {other:?}"),
    }
}

fn create_action(thread: ThreadId, title: Content, scope: Scope, body: BodyInput) -> Action {
    Action::CreateRecord {
        thread,
        title,
        state: c("s"),
        body,
        scope,
        editors: Editors::Speakers,
        message: LabeledBody::Content { content: c("m"), labels: labels(Taint::Tainted, Scope::Fleet) },
        ask: None,
    }
}

// --- fak's sharedtask_test.go, ported -------------------------------------------------------------

/// `TestAcceptedPatchAdvancesRecordAndEmitsEvent`.
#[test]
fn accepted_patch_advances_record_and_emits_event() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let (b, g) = (s.b, s.g);
    let out = s.patch(b, r, 1, vec![note("n1", Scope::Fleet)]);
    let ActionResult::RecordPatched { record: rid, base_rev: 1, rev: 2, merged: false, .. } = out else {
        panic!("unexpected {out:?}");
    };
    assert_eq!(rid, r);
    let v = s.view(r, None, Scope::Fleet);
    assert_eq!((v.rev, v.notes.len()), (2, 1));
    assert_eq!(v.notes[0].id, id("n1"));
    assert_eq!(v.notes[0].author, b);
    let events = record_events(&s.w.state, g, r, 1, Scope::Fleet, &s.w.limits, 0).expect("events");
    assert_eq!(events.next_after_rev, 2);
    let [RecordEvent::Shown(e)] = events.events.as_slice() else { panic!("{events:?}") };
    assert_eq!((e.rev, e.base_rev, e.actor, e.paths.clone()), (2, 1, b, vec!["/notes".to_string()]));
}

/// `TestReplaceTitleAdvancesRecordAndEmitsEvent` and A.2 `03-title-accepted.json`: accepted
/// 001→002, with an entry.
#[test]
fn a2_title_accepted_advances_the_rev_with_an_entry() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let b = s.b;
    let last = s.w.state.thread(s.t).expect("state reads").expect("state reads").last_entry;
    let out = s.patch(b, r, 1, vec![PatchOp::ReplaceTitle(c("new title"))]);
    let ActionResult::RecordPatched { entry, rev: 2, .. } = out else { panic!("{out:?}") };
    assert_eq!(entry.0, last + 1, "the patch is the thread's next entry");
    assert_eq!(s.w.state.entry(s.t, entry).expect("state reads").expect("state reads").author, b);
    let v = s.view(r, None, Scope::Fleet);
    assert_eq!(v.title, c("new title"));
    assert_eq!(s.view(r, Some(1), Scope::Fleet).title, c("title"));
}

/// `TestStaleReplaceTitleReturnsConflictValue` and A.2 `05-conflict.json`: a stale `replace
/// /state` is `STALE_BASE` with the three values (base `working`, current `input_required`,
/// proposed `completed`) and the current rev.
#[test]
fn a2_stale_replace_state_is_a_conflict_with_three_values() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let (a, b) = (s.a, s.b);
    s.patch(a, r, 1, vec![PatchOp::ReplaceState(c("input_required"))]);
    let rej = s.refused(b, r, 1, vec![PatchOp::ReplaceState(c("completed"))]);
    assert_code(&rej, Code::StaleBase, Some(SharedReason::StaleBase));
    assert_eq!(rej.next, NextStep::Retry);
    assert_eq!(rej.field.as_deref(), Some("ops[0]"));
    assert_eq!(rej.fak_reason(), Some(FakReason::Unwitnessed));
    let Some(RejectionDetail::RecordConflict(conflict)) = rej.detail.as_deref() else { panic!("{rej:?}") };
    assert_eq!(conflict.record, r);
    assert_eq!(conflict.path, "/state");
    assert_eq!((conflict.base_rev, conflict.current_rev), (1, 2));
    assert_eq!(conflict.base_value, Some(ConflictValue::Text(c("working"))));
    assert_eq!(conflict.current_value, Some(ConflictValue::Text(c("input_required"))));
    assert_eq!(conflict.proposed_value, ConflictValue::Text(c("completed")));
    assert_eq!(conflict.resolution, "rebase_or_human_decide");
}

/// `TestStaleAppendOpenDecisionAutoMerges` and A.2 "stale append /open_decisions".
#[test]
fn a2_stale_append_of_a_decision_auto_merges() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let (a, b) = (s.a, s.b);
    s.patch(a, r, 1, vec![PatchOp::ReplaceTitle(c("t2"))]);
    let out = s.patch(b, r, 1, vec![decision("d1", "input_required")]);
    let ActionResult::RecordPatched { base_rev: 1, rev: 3, merged: true, .. } = out else { panic!("{out:?}") };
    let v = s.view(r, None, Scope::Fleet);
    assert_eq!(v.title, c("t2"), "the rebase kept the other writer's title");
    assert_eq!(v.decisions.len(), 1);
    assert_eq!(v.decisions[0].state, c("input_required"));
}

/// `TestResolveOpenDecisionAdvancesRecord`: resolving a decision is a replace of its state.
#[test]
fn resolve_open_decision_advances_record() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let (a, g) = (s.a, s.g);
    s.patch(a, r, 1, vec![decision("d1", "input_required")]);
    let out = s.patch(g, r, 2, vec![PatchOp::ReplaceDecisionState { decision: id("d1"), state: c("resolved") }]);
    assert_eq!(rev_of(&out), 3);
    assert_eq!(s.view(r, None, Scope::Fleet).decisions[0].state, c("resolved"));
    assert_eq!(s.view(r, Some(2), Scope::Fleet).decisions[0].state, c("input_required"));
    // Open decisions are data: nothing entered anyone's turn (design §5.9).
    assert_eq!(obligation_count(&s.w), 0);
}

/// `TestDisaggregatedArtifactMissingDeletionWitnessIsHeld` and A.2 `03-quarantined.json`.
#[test]
fn a2_external_artifact_without_a_deletion_certificate_is_refused() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let b = s.b;
    let rej = s.refused(b, r, 1, vec![artifact("art1", ArtifactInput::External(external(Scope::Fleet, false)))]);
    assert_code(&rej, Code::TrustViolation, Some(SharedReason::ArtifactWitnessMissing));
    assert_eq!(rej.field.as_deref(), Some("ops[0].append_artifact.reference.external.deletion_certificate"));
    assert_eq!(rej.next, NextStep::Revise);
}

/// `TestReplaceBodyRefWithDeletionWitnessIsAccepted` and A.2 `12-body-ref-patch.json`.
#[test]
fn a2_external_body_with_a_certificate_is_accepted() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let b = s.b;
    let ext = external(Scope::Fleet, true);
    s.patch(b, r, 1, vec![PatchOp::ReplaceBody(BodyInput::External(ext.clone()))]);
    let v = s.view(r, None, Scope::Fleet);
    assert_eq!(
        v.body,
        BodyView::Shown { reference: kungfu_core::model::BodyRef::External(ext.clone()), labels: ext.labels }
    );
    // A body without a certificate is refused as a body.
    let rej = s.refused(b, r, 2, vec![PatchOp::ReplaceBody(BodyInput::External(external(Scope::Fleet, false)))]);
    assert_code(&rej, Code::TrustViolation, Some(SharedReason::BodyWitnessMissing));
}

/// `TestViewFiltersNotesOutsideReaderScope`, **inverted** (design §12 item 17): a note is shown
/// iff its scope is at least the audience, so a tenant view hides a fleet note and keeps a tenant
/// one; a fleet view shows both.
#[test]
fn view_shows_only_items_at_least_as_wide_as_the_audience() {
    let mut s = group();
    let r = s.record(Scope::Tenant);
    let b = s.b;
    s.patch(b, r, 1, vec![note("fleet-note", Scope::Fleet), note("tenant-note", Scope::Tenant)]);
    let ext = external(Scope::Fleet, true);
    s.patch(b, r, 2, vec![artifact("art1", ArtifactInput::External(ext))]);
    let fleet = s.view(r, None, Scope::Fleet);
    assert_eq!(fleet.notes.iter().map(|n| n.id.0.as_str()).collect::<Vec<_>>(), ["fleet-note", "tenant-note"]);
    assert_eq!((fleet.redacted_notes, fleet.artifacts.len()), (0, 1));
    assert!(matches!(fleet.body, BodyView::Shown { .. }));
    let tenant = s.view(r, None, Scope::Tenant);
    assert_eq!(tenant.notes.iter().map(|n| n.id.0.as_str()).collect::<Vec<_>>(), ["tenant-note"]);
    assert_eq!((tenant.redacted_notes, tenant.redacted_artifacts, tenant.artifacts.len()), (1, 1, 0));
    // The body (fleet) is narrower than a tenant audience: only its labels are shown.
    assert_eq!(tenant.body, BodyView::Redacted { labels: labels(Taint::Tainted, Scope::Fleet) });
    // Scalars and decisions are carried at the record's scope, shown to every allowed audience.
    assert_eq!(tenant.title, c("title"));
}

/// `TestEventsViewFiltersEventsOutsideReaderScope`, **inverted**: an event carrying a value
/// narrower than the audience is listed as redacted, by its rev only.
#[test]
fn events_narrower_than_the_audience_are_redacted() {
    let mut s = group();
    let r = s.record(Scope::Tenant);
    let b = s.b;
    s.patch(b, r, 1, vec![note("fleet-note", Scope::Fleet)]);
    s.patch(b, r, 2, vec![note("tenant-note", Scope::Tenant)]);
    let all = record_events(&s.w.state, b, r, 0, Scope::Tenant, &s.w.limits, 0).expect("events");
    // rev 1 carries the fleet body, rev 2 a fleet note: both narrower than tenant.
    assert_eq!(
        all.events,
        vec![RecordEvent::Redacted { rev: 1 }, RecordEvent::Redacted { rev: 2 }, all.events[2].clone()]
    );
    assert!(matches!(&all.events[2], RecordEvent::Shown(e) if e.rev == 3 && e.scope == Scope::Tenant));
    assert_eq!((all.redacted, all.next_after_rev), (2, 3));
    // Pages have no gap and no duplicate.
    let first = record_events(&s.w.state, b, r, 0, Scope::Fleet, &s.w.limits, 2).expect("page 1");
    let second = record_events(&s.w.state, b, r, first.next_after_rev, Scope::Fleet, &s.w.limits, 2).expect("page 2");
    let revs: Vec<u32> = first
        .events
        .iter()
        .chain(&second.events)
        .map(|e| match e {
            RecordEvent::Shown(e) => e.rev,
            RecordEvent::Redacted { rev } => *rev,
        })
        .collect();
    assert_eq!(revs, [1, 2, 3]);
}

/// `TestJournalRoundTripRestoresCurrentRecordAndEvents`: the record and its events are rebuilt
/// from the facts alone (the world checks this after every apply; once more here, explicitly).
#[test]
fn rebuild_from_facts_restores_the_record_and_its_events() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let (a, b) = (s.a, s.b);
    s.patch(a, r, 1, vec![note("n1", Scope::Fleet), decision("d1", "open")]);
    s.patch(b, r, 1, vec![artifact("a1", ArtifactInput::External(external(Scope::Fleet, true)))]);
    s.patch(a, r, 3, vec![PatchOp::ReplaceDecisionState { decision: id("d1"), state: c("closed") }]);
    s.w.assert_rebuild();
    let rebuilt = kungfu_core::rebuild::rebuild(&s.w.state).expect("rebuild");
    let v = record(&rebuilt, a, r, None, Scope::Fleet).expect("rebuilt record");
    assert_eq!(v, s.view(r, None, Scope::Fleet));
}

// --- Appendix A.2, the other rows --------------------------------------------------------------

/// A.2 `01-needs-approval.json`: a governors-only record refuses a speaker.
#[test]
fn a2_governor_only_record_refuses_a_speaker() {
    let mut s = group();
    let (g, b, t) = (s.g, s.b, s.t);
    let r = s.w.create_record(g, t, Scope::Fleet, Editors::Governors);
    let rej = s.refused(b, r, 1, vec![PatchOp::ReplaceTitle(c("mine"))]);
    assert_code(&rej, Code::NotGovernor, Some(SharedReason::ApprovalRequired));
    assert!(rej.message.contains("asking a governor"), "{rej}");
    // The governor may.
    s.patch(g, r, 1, vec![PatchOp::ReplaceTitle(c("approved"))]);
}

/// A.2 `02-denied.json`, `02-denied-scope.json`: a tenant item in a fleet record.
#[test]
fn a2_item_scope_above_the_record_scope_is_refused() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let b = s.b;
    let rej = s.refused(b, r, 1, vec![note("n1", Scope::Tenant)]);
    assert_code(&rej, Code::TrustViolation, Some(SharedReason::ScopeWidenForbidden));
    assert_eq!(rej.field.as_deref(), Some("ops[0].append_note.body.content.labels"));
}

/// A.2 `03-quarantined-artifact.json`: a quarantined artifact.
#[test]
fn a2_quarantined_artifact_is_refused() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let b = s.b;
    let pin = s.w.write_labeled(b, None, "bad", labels(Taint::Quarantined, Scope::Fleet));
    let rej = s.refused(b, r, 1, vec![artifact("a1", ArtifactInput::Pin(pin))]);
    assert_code(&rej, Code::TrustViolation, Some(SharedReason::ArtifactQuarantined));
    let ext = ExternalRef { labels: labels(Taint::Quarantined, Scope::Fleet), ..external(Scope::Fleet, true) };
    let rej = s.refused(b, r, 1, vec![artifact("a1", ArtifactInput::External(ext))]);
    assert_code(&rej, Code::TrustViolation, Some(SharedReason::ArtifactQuarantined));
    // A quarantined body is refused as a body.
    let rej = s.refused(b, r, 1, vec![PatchOp::ReplaceBody(BodyInput::Pin(pin))]);
    assert_code(&rej, Code::TrustViolation, Some(SharedReason::BodyQuarantined));
}

/// A.2 `04-tenant-note-patch.json`: accepted on a record created with `scope = tenant`.
#[test]
fn a2_tenant_note_on_a_tenant_record_is_accepted() {
    let mut s = group();
    let r = s.record(Scope::Tenant);
    let b = s.b;
    s.patch(b, r, 1, vec![note("n1", Scope::Tenant)]);
    assert_eq!(s.view(r, None, Scope::Tenant).notes.len(), 1);
}

/// A.2 "a replayed accepted append": the first receipt, not `DUPLICATE_NOTE`.
#[test]
fn a2_replayed_patch_returns_its_first_receipt() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let b = s.b;
    let key = s.w.fresh_key();
    let message = LabeledBody::Content { content: c("m"), labels: labels(Taint::Tainted, Scope::Fleet) };
    let action =
        Action::PatchRecord { record: r, base_rev: 1, ops: vec![note("n1", Scope::Fleet)], message, ask: None };
    let first = s.w.exec(kungfu_core::Principal::Agent(b), action.clone(), Some(key.clone()));
    assert!(first.outcome.is_ok());
    let before = s.w.state.clone();
    let again = s.w.exec(kungfu_core::Principal::Agent(b), action, Some(key));
    assert!(again.replayed);
    assert_eq!(again.receipt_bytes(), first.receipt_bytes());
    assert_eq!(s.w.state, before);
    assert_eq!(s.view(r, None, Scope::Fleet).notes.len(), 1);
}

/// A.2 "a different request reusing a note id": `DUPLICATE_ID`, `DUPLICATE_NOTE`, resolution manual.
#[test]
fn a2_a_different_request_reusing_a_note_id_is_a_duplicate() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let (a, b) = (s.a, s.b);
    s.patch(a, r, 1, vec![note("n1", Scope::Fleet)]);
    let rej = s.refused(b, r, 2, vec![note("n1", Scope::Fleet)]);
    assert_code(&rej, Code::DuplicateId, Some(SharedReason::DuplicateNote));
    assert_eq!(rej.field.as_deref(), Some("ops[0].append_note.note_id"));
    assert!(rej.message.contains("manual"), "{rej}");
    // Also within one patch, and for decisions.
    let rej = s.refused(b, r, 2, vec![note("n2", Scope::Fleet), note("n2", Scope::Fleet)]);
    assert_code(&rej, Code::DuplicateId, Some(SharedReason::DuplicateNote));
    assert_eq!(rej.field.as_deref(), Some("ops[1].append_note.note_id"));
    s.patch(a, r, 2, vec![decision("d1", "open")]);
    let rej = s.refused(b, r, 3, vec![decision("d1", "open")]);
    assert_code(&rej, Code::DuplicateId, Some(SharedReason::DuplicateDecision));
    // The same id in another kind is another item.
    s.patch(b, r, 3, vec![note("d1", Scope::Fleet)]);
}

/// A.2 "a repeated artifact id": fak accepts it (a gap); we refuse it (design §12 item 5).
#[test]
fn a2_duplicate_artifact_id_is_refused() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let b = s.b;
    let ext = || ArtifactInput::External(external(Scope::Fleet, true));
    s.patch(b, r, 1, vec![artifact("a1", ext())]);
    let rej = s.refused(b, r, 2, vec![artifact("a1", ext())]);
    assert_code(&rej, Code::DuplicateId, Some(SharedReason::DuplicateArtifact));
}

/// A.2 "empty `base_rev`": required (design §12 item 7), and never beyond the record's rev.
#[test]
fn a2_base_rev_is_required() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let b = s.b;
    for base in [0, 2] {
        let rej = s.refused(b, r, base, vec![note("n1", Scope::Fleet)]);
        assert_code(&rej, Code::InvalidArgument, None);
        assert_eq!(rej.field.as_deref(), Some("base_rev"));
    }
}

/// A.2 "`remove` op": not expressible. The typed ops have no removal; an empty patch is refused.
#[test]
fn a2_remove_is_not_expressible_and_an_empty_patch_is_refused() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let b = s.b;
    let rej = s.refused(b, r, 1, vec![]);
    assert_code(&rej, Code::InvalidArgument, None);
    assert_eq!(rej.field.as_deref(), Some("ops"));
}

// --- the fixes of design §11.1 --------------------------------------------------------------------

#[test]
fn mixed_stale_patch_is_rejected_whole() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let (a, b) = (s.a, s.b);
    s.patch(a, r, 1, vec![PatchOp::ReplaceTitle(c("t2"))]);
    let rej = s.refused(b, r, 1, vec![note("n1", Scope::Fleet), PatchOp::ReplaceState(c("done"))]);
    assert_code(&rej, Code::StaleBase, Some(SharedReason::StaleBase));
    assert_eq!(rej.field.as_deref(), Some("ops[1]"));
    assert!(s.view(r, None, Scope::Fleet).notes.is_empty(), "no part of a refused patch is stored");
}

#[test]
fn quarantine_outranks_a_conflict_on_a_stale_patch() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let (a, b) = (s.a, s.b);
    s.patch(a, r, 1, vec![PatchOp::ReplaceTitle(c("t2"))]);
    let quarantined = BodyInput::Content { content: c("q"), labels: labels(Taint::Quarantined, Scope::Fleet) };
    let rej = s.refused(b, r, 1, vec![PatchOp::ReplaceState(c("done")), PatchOp::ReplaceBody(quarantined)]);
    assert_code(&rej, Code::TrustViolation, Some(SharedReason::BodyQuarantined));
}

#[test]
fn agent_scoped_note_is_refused() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let b = s.b;
    let rej = s.refused(b, r, 1, vec![note("n1", Scope::Agent)]);
    assert_code(&rej, Code::TrustViolation, None);
    assert_eq!(rej.fak_reason(), Some(FakReason::TrustViolation));
    // An unlabeled pin counts as private (fail closed).
    let m = match s.w.ok(b, Action::CreateMemory { content: c("plain") }) {
        ActionResult::MemoryCreated { memory, version } => Pin { memory, version },
        other => panic!("{other:?}"),
    };
    let rej = s.refused(
        b,
        r,
        1,
        vec![PatchOp::AppendNote { note_id: id("n1"), kind: NoteKind::Progress, body: BodyInput::Pin(m) }],
    );
    assert_code(&rej, Code::TrustViolation, None);
}

#[test]
fn an_unreadable_pin_answers_not_found_before_its_labels() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let (a, b) = (s.a, s.b);
    let private = s.w.write_labeled(a, None, "a's", labels(Taint::Quarantined, Scope::Fleet));
    let rej = s.refused(b, r, 1, vec![PatchOp::ReplaceBody(BodyInput::Pin(private))]);
    assert_code(&rej, Code::NotFound, None);
}

#[test]
fn replace_of_a_missing_decision_is_an_invalid_target() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let b = s.b;
    let rej = s.refused(b, r, 1, vec![PatchOp::ReplaceDecisionState { decision: id("nope"), state: c("x") }]);
    assert_code(&rej, Code::InvalidTarget, Some(SharedReason::MissingDecision));
    // A decision appended earlier in the same patch is a target.
    s.patch(b, r, 1, vec![decision("d1", "open"), PatchOp::ReplaceDecisionState { decision: id("d1"), state: c("x") }]);
    assert_eq!(s.view(r, None, Scope::Fleet).decisions[0].state, c("x"));
}

#[test]
fn stale_replace_of_a_decision_carries_its_values() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let (a, b) = (s.a, s.b);
    s.patch(a, r, 1, vec![decision("d1", "open")]);
    s.patch(a, r, 2, vec![PatchOp::ReplaceDecisionState { decision: id("d1"), state: c("waiting") }]);
    let rej = s.refused(b, r, 2, vec![PatchOp::ReplaceDecisionState { decision: id("d1"), state: c("closed") }]);
    let Some(RejectionDetail::RecordConflict(conflict)) = rej.detail.as_deref() else { panic!("{rej:?}") };
    assert_eq!(conflict.path, "/open_decisions/d1/state");
    assert_eq!(conflict.base_value, Some(ConflictValue::Text(c("open"))));
    assert_eq!(conflict.current_value, Some(ConflictValue::Text(c("waiting"))));
}

#[test]
fn closed_thread_record_is_read_only() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let (g, b, t) = (s.g, s.b, s.t);
    s.w.ok(g, Action::CloseThread { thread: t });
    let rej = s.refused(b, r, 1, vec![note("n1", Scope::Fleet)]);
    assert_code(&rej, Code::ThreadClosed, None);
    // Still readable by its members.
    assert_eq!(s.view(r, None, Scope::Fleet).rev, 1);
    let rej = s.w.refused(
        b,
        Action::CreateRecord {
            thread: t,
            title: c("t"),
            state: c("s"),
            body: inline("b", Scope::Fleet),
            scope: Scope::Fleet,
            editors: Editors::Speakers,
            message: LabeledBody::Content { content: c("m"), labels: labels(Taint::Tainted, Scope::Fleet) },
            ask: None,
        },
    );
    assert_code(&rej, Code::ThreadClosed, None);
}

#[test]
fn non_members_get_not_found_and_observers_cannot_write() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let (x, o) = (s.x, s.o);
    let rej = s.refused(x, r, 1, vec![note("n1", Scope::Fleet)]);
    assert_code(&rej, Code::NotFound, None);
    let unknown = s.refused(x, RecordId(99), 1, vec![note("n1", Scope::Fleet)]);
    assert_eq!(unknown.message, rej.message, "one answer for unknown and unreadable (§12)");
    let rej = s.refused(o, r, 1, vec![note("n1", Scope::Fleet)]);
    assert_code(&rej, Code::CannotSpeak, None);
    // Reads: members only, observers included.
    assert_eq!(read_rejection(record(&s.w.state, x, r, None, Scope::Fleet)).code, Code::NotFound);
    assert!(record(&s.w.state, o, r, None, Scope::Fleet).is_ok());
    let events = record_events(&s.w.state, x, r, 0, Scope::Fleet, &s.w.limits, 0);
    assert_eq!(read_rejection(events).code, Code::NotFound);
}

#[test]
fn a_record_lives_in_a_thread_so_its_scope_is_at_least_fleet() {
    let mut s = group();
    let (a, t) = (s.a, s.t);
    let action = |scope, body| create_action(t, c("t"), scope, body);
    let rej = s.w.refused(a, action(Scope::Agent, inline("b", Scope::Fleet)));
    assert_code(&rej, Code::InvalidArgument, None);
    assert_eq!(rej.field.as_deref(), Some("scope"));
    // Its body obeys the floor for the record's scope.
    let rej = s.w.refused(a, action(Scope::Fleet, inline("b", Scope::Public)));
    assert_code(&rej, Code::TrustViolation, Some(SharedReason::ScopeWidenForbidden));
    // An empty title is refused.
    let rej = s.w.refused(a, create_action(t, c(""), Scope::Fleet, inline("b", Scope::Fleet)));
    assert_code(&rej, Code::InvalidArgument, None);
    assert_eq!(rej.field.as_deref(), Some("title"));
}

#[test]
fn view_for_an_audience_wider_than_the_record_is_refused() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let rej = read_rejection(record(&s.w.state, s.a, r, None, Scope::Tenant));
    assert_eq!(rej.code, Code::TrustViolation);
    assert_eq!(rej.field.as_deref(), Some("audience"));
    let rej = read_rejection(record_events(&s.w.state, s.a, r, 0, Scope::Public, &s.w.limits, 0));
    assert_eq!(rej.code, Code::TrustViolation);
    // A past rev must exist.
    let rej = read_rejection(record(&s.w.state, s.a, r, Some(2), Scope::Fleet));
    assert_eq!(rej.code, Code::InvalidArgument);
}

#[test]
fn past_rev_view_matches_the_record_as_it_was() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let (a, b) = (s.a, s.b);
    let mut views = vec![s.view(r, None, Scope::Fleet)];
    s.patch(a, r, 1, vec![note("n1", Scope::Fleet), PatchOp::ReplaceState(c("s2"))]);
    views.push(s.view(r, None, Scope::Fleet));
    s.patch(b, r, 2, vec![decision("d1", "open"), PatchOp::ReplaceTitle(c("t3"))]);
    views.push(s.view(r, None, Scope::Fleet));
    s.patch(a, r, 3, vec![PatchOp::ReplaceBody(inline("b4", Scope::Fleet)), note("n2", Scope::Fleet)]);
    views.push(s.view(r, None, Scope::Fleet));
    for (i, then) in views.iter().enumerate() {
        let rev = i as u32 + 1;
        let now = s.view(r, Some(rev), Scope::Fleet);
        assert_eq!(now, RecordView { current_rev: 4, ..then.clone() }, "rev {rev}");
    }
}

#[test]
fn event_labels_are_derived_from_the_values() {
    let mut s = group();
    let r = s.record(Scope::Public);
    let b = s.b;
    let trusted_public = BodyInput::Content { content: c("p"), labels: labels(Taint::Trusted, Scope::Public) };
    s.patch(b, r, 1, vec![PatchOp::ReplaceTitle(c("t"))]);
    s.patch(b, r, 2, vec![PatchOp::AppendNote { note_id: id("p"), kind: NoteKind::Comment, body: trusted_public }]);
    s.patch(b, r, 3, vec![note("f", Scope::Tenant), note("g", Scope::Fleet)]);
    let events = record_events(&s.w.state, b, r, 0, Scope::Fleet, &s.w.limits, 0).expect("events");
    let labels_of: Vec<(Scope, Taint)> = events
        .events
        .iter()
        .map(|e| match e {
            RecordEvent::Shown(e) => (e.scope, e.taint),
            RecordEvent::Redacted { .. } => panic!("a fleet audience sees every event"),
        })
        .collect();
    assert_eq!(
        labels_of,
        [
            // rev 1: title and state (text: the record's scope, tainted) and the fleet body.
            (Scope::Fleet, Taint::Tainted),
            // rev 2: a title only.
            (Scope::Public, Taint::Tainted),
            // rev 3: only a public note its author marked trusted (a label, which grants nothing).
            (Scope::Public, Taint::Trusted),
            // rev 4: the narrowest of a tenant and a fleet note.
            (Scope::Fleet, Taint::Tainted),
        ]
    );
}

#[test]
fn every_write_is_also_an_entry() {
    let mut s = group();
    let (a, b, t) = (s.a, s.b, s.t);
    let before = s.w.state.thread(t).expect("state reads").expect("state reads").last_entry;
    let r = s.record(Scope::Fleet);
    s.patch(b, r, 1, vec![note("n1", Scope::Fleet)]);
    s.patch(a, r, 2, vec![PatchOp::ReplaceTitle(c("t2"))]);
    let after = s.w.state.thread(t).expect("state reads").expect("state reads").last_entry;
    assert_eq!(after - before, 3, "one entry per accepted write");
    for rev in 1..=3 {
        let e = s.w.state.record_revision(r, rev).expect("state reads").expect("revision");
        let indexed = s.w.state.index(&keys::entry_record(t, e.entry)).expect("state reads");
        assert_eq!(indexed, Some(kungfu_core::state::IndexRef::RecordRev { record: r, rev }));
        assert_eq!(s.w.state.entry(t, e.entry).expect("state reads").expect("state reads").author, e.actor);
    }
    // A refused write posts nothing.
    let facts = facts_count(&s.w);
    s.refused(b, r, 1, vec![PatchOp::ReplaceTitle(c("late"))]);
    assert_eq!(facts_count(&s.w), facts);
}

#[test]
fn record_writes_create_no_obligation_unless_they_ask() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let (a, b) = (s.a, s.b);
    s.patch(a, r, 1, vec![note("n1", Scope::Fleet)]);
    assert_eq!(obligation_count(&s.w), 0, "a record write asks nobody by default (not rule 3)");
    // An explicit ask is a §6.3 ask: the asked member owes a response.
    let message = LabeledBody::Content { content: c("please review"), labels: labels(Taint::Tainted, Scope::Fleet) };
    let ask = Some([b].into_iter().collect());
    s.w.ok(a, Action::PatchRecord { record: r, base_rev: 2, ops: vec![note("n2", Scope::Fleet)], message, ask });
    assert_eq!(obligation_count(&s.w), 1);
}

#[test]
fn record_actions_serialize_on_their_threads_actor() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let message = LabeledBody::Content { content: c("m"), labels: labels(Taint::Tainted, Scope::Fleet) };
    let patch = Action::PatchRecord { record: r, base_rev: 1, ops: vec![], message: message.clone(), ask: None };
    assert_eq!(actor_object(&s.w.state, &patch).expect("state reads"), Some(ObjectRef::Thread(s.t)));
    let create = Action::CreateRecord {
        thread: s.t,
        title: c("t"),
        state: c("s"),
        body: inline("b", Scope::Fleet),
        scope: Scope::Fleet,
        editors: Editors::Speakers,
        message,
        ask: None,
    };
    assert_eq!(actor_object(&s.w.state, &create).expect("state reads"), Some(ObjectRef::Thread(s.t)));
    let Action::PatchRecord { base_rev, ops, message, ask, .. } = patch else { unreachable!() };
    let unknown = Action::PatchRecord { record: RecordId(99), base_rev, ops, message, ask };
    assert_eq!(actor_object(&s.w.state, &unknown).expect("state reads"), None);
}

#[test]
fn tokens_are_structure_and_cannot_carry_prose() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let b = s.b;
    let rej = s.refused(b, r, 1, vec![note("has space", Scope::Fleet)]);
    assert_code(&rej, Code::InvalidArgument, None);
    assert_eq!(rej.field.as_deref(), Some("ops[0].append_note.note_id"));
    let bad_digest = ExternalRef { digest: "md5:x".into(), ..external(Scope::Fleet, true) };
    let rej = s.refused(b, r, 1, vec![artifact("a1", ArtifactInput::External(bad_digest))]);
    assert_eq!(rej.field.as_deref(), Some("ops[0].append_artifact.reference.external.digest"));
    let rej = s.refused(
        b,
        r,
        1,
        vec![PatchOp::AppendArtifact {
            artifact_id: id("a1"),
            reference: ArtifactInput::External(external(Scope::Fleet, true)),
            media_type: "text plain".into(),
        }],
    );
    assert_eq!(rej.field.as_deref(), Some("ops[0].append_artifact.media_type"));
}

#[test]
fn bodies_are_read_on_demand_at_any_rev() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let (a, b, x) = (s.a, s.b, s.x);
    s.patch(b, r, 1, vec![note("n1", Scope::Fleet), PatchOp::ReplaceBody(inline("second body", Scope::Fleet))]);
    let ext = external(Scope::Fleet, true);
    s.patch(a, r, 2, vec![artifact("a1", ArtifactInput::External(ext.clone()))]);
    let content = |body: RecordBody| match body {
        RecordBody::Pin { content, labels, .. } => {
            assert_eq!(labels, Some(Labels::new(Taint::Tainted, Scope::Fleet)));
            content
        }
        other => panic!("{other:?}"),
    };
    let read = |item: BodyItem, at: Option<u32>| record_body(&s.w.state, a, r, &item, at).expect("a member reads");
    assert_eq!(content(read(BodyItem::Body, Some(1))), Some(c("body")));
    assert_eq!(content(read(BodyItem::Body, None)), Some(c("second body")));
    assert_eq!(content(read(BodyItem::Note(id("n1")), None)), Some(c("a note")));
    assert_eq!(read(BodyItem::Artifact(id("a1")), None), RecordBody::External(ext));
    // An item added after the rev read, and an unknown one, are not found.
    let missing = record_body(&s.w.state, a, r, &BodyItem::Note(id("n1")), Some(1));
    assert_eq!(read_rejection(missing).code, Code::NotFound);
    // Non-members are not told the record exists.
    assert_eq!(read_rejection(record_body(&s.w.state, x, r, &BodyItem::Body, None)).code, Code::NotFound);
}

#[test]
fn the_working_set_lists_the_threads_records() {
    let mut s = group();
    let (o, t) = (s.o, s.t);
    let first = s.record(Scope::Fleet);
    let second = s.record(Scope::Tenant);
    let set = kungfu_core::read::working_set(&s.w.state, o, ObjectRef::Thread(t), s.w.now, &s.w.limits)
        .expect("a member reads its working set");
    let kungfu_core::read::ObjectSummary::Thread { records, .. } = set.summary else { panic!("not a thread") };
    assert_eq!(records, [first, second]);
    // An observer may read but not write them.
    assert!(!set.available.contains(&kungfu_core::ActionKind::PatchRecord));
}

#[test]
fn patches_and_values_are_bounded() {
    let mut s = group();
    let r = s.record(Scope::Fleet);
    let b = s.b;
    let ops: Vec<PatchOp> = (0..33).map(|i| note(&format!("n{i}"), Scope::Fleet)).collect();
    let rej = s.refused(b, r, 1, ops);
    assert_code(&rej, Code::LimitExceeded, None);
    assert_eq!(rej.field.as_deref(), Some("ops"));
    let long = Content::from("x".repeat(4097));
    let rej = s.refused(b, r, 1, vec![PatchOp::ReplaceTitle(long)]);
    assert_code(&rej, Code::LimitExceeded, None);
    assert_eq!(rej.fak_reason(), Some(FakReason::Oversize));
    assert_eq!(rej.field.as_deref(), Some("ops[0].replace_title"));
    // 32 ops are fine.
    let ops: Vec<PatchOp> = (0..32).map(|i| note(&format!("n{i}"), Scope::Fleet)).collect();
    assert_eq!(rev_of(&s.patch(b, r, 1, ops)), 2);
    assert_eq!(s.view(r, None, Scope::Fleet).notes.len(), 32);
}
