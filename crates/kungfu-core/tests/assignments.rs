//! §6.4 assignments, with the membership rules of §6.2 and §6.5 that end them, and the deadline
//! rules L4 (exits, the deadline wins) and L5 (every obligation and delivery ends at most once).
//!
//! The cast of every test: `gov` governs the thread, `alice` (speaker) creates assignments, `bob`
//! (speaker) is addressed, `carol` is an observer. Entries carrying assignments ask nobody, so no
//! response obligation blurs the turns under test.

use kungfu_core::model::{Assignment, AssignmentOutcome, AssignmentState, ObligationId, ObligationKind, OpportunityId};
use kungfu_core::read::{self, ReadError};
use kungfu_core::rebuild::all_facts;
use kungfu_core::secret::hash_secret;
use kungfu_core::testkit::World;
use kungfu_core::*;
use kungfu_types::*;
use std::collections::BTreeSet;

const DELIVERY: Micros = Micros::from_secs(60);
const JUDGMENT: Micros = Micros::from_secs(120);

struct Fx {
    w: World,
    gov: AgentId,
    alice: AgentId,
    bob: AgentId,
    carol: AgentId,
    thread: ThreadId,
}

fn fixture() -> Fx {
    fixture_with(Limits::default())
}

fn fixture_with(limits: Limits) -> Fx {
    let mut w = World::with_limits(limits);
    let gov = w.register();
    let alice = w.register();
    let bob = w.register();
    let carol = w.register();
    let thread = w.thread_with(gov, &[(alice, Role::Speaker), (bob, Role::Speaker), (carol, Role::Observer)]);
    Fx { w, gov, alice, bob, carol, thread }
}

fn new_asg(addressee: AgentId, delivery: Option<Micros>, judgment: Option<Micros>) -> NewAssignment {
    NewAssignment {
        addressee,
        criteria: Content::from("criteria: a haiku about rust"),
        output_structure: Some(Content::from("three lines")),
        delivery_window: delivery,
        judgment_window: judgment,
    }
}

/// Posts an entry that carries `na`; returns the rejection or the receipt's result.
fn post_asg(
    w: &mut World,
    author: AgentId,
    thread: ThreadId,
    na: NewAssignment,
    reply_to: Option<EntrySeq>,
) -> Result<ActionResult, Rejection> {
    w.act(
        author,
        Action::Post {
            thread,
            body: PostBody::Content(Content::from("please do this")),
            reply_to,
            ask: Some(BTreeSet::new()),
            task_ref: None,
            assignment: Some(na),
        },
    )
}

/// A standard assignment from alice to bob with the test windows.
fn assign(f: &mut Fx) -> AssignmentId {
    f.w.assign(f.alice, f.thread, f.bob, Some(DELIVERY), Some(JUDGMENT))
}

fn asg(w: &World, a: AssignmentId) -> Assignment {
    w.state.assignment(a).expect("state readable").expect("assignment exists")
}

fn outcome(w: &World, a: AssignmentId) -> Option<AssignmentOutcome> {
    match asg(w, a).state {
        AssignmentState::Ended { outcome, .. } => Some(outcome),
        _ => None,
    }
}

fn take(w: &mut World, taker: AgentId, a: AssignmentId) -> Timestamp {
    match w.ok(taker, Action::TakeAssignment { assignment: a }) {
        ActionResult::AssignmentTaken { assignment, delivery_due } if assignment == a => delivery_due,
        other => panic!("unexpected {other:?}"),
    }
}

fn deliver(w: &mut World, taker: AgentId, a: AssignmentId) -> Timestamp {
    match w.ok(taker, Action::DeliverAssignment { assignment: a, output: Content::from("the output") }) {
        ActionResult::AssignmentDelivered { assignment, judgment_due } if assignment == a => judgment_due,
        other => panic!("unexpected {other:?}"),
    }
}

fn turn_ids(w: &World, agent: AgentId) -> Vec<ObligationId> {
    w.full_turn(agent).into_iter().map(|i| i.obligation).collect()
}

/// The DeadlinePassed facts recorded for one obligation, across all journals.
fn deadline_facts(w: &World, id: ObligationId) -> Vec<ExpiryResult> {
    all_facts(&w.state)
        .expect("facts")
        .into_iter()
        .filter_map(|f| match f.fact {
            Fact::DeadlinePassed { obligation, result, .. } if obligation == id => Some(result),
            _ => None,
        })
        .collect()
}

fn last_entry(w: &World, thread: ThreadId) -> u64 {
    w.state.thread(thread).expect("state").expect("thread").last_entry
}

fn assignments_created(w: &World) -> u64 {
    w.state.counters().expect("state").unwrap_or_default().assignments
}

/// Applies an agent action stamped at exactly `ts`, then keeps the test clock at or after it.
fn act_at(w: &mut World, agent: AgentId, action: Action, ts: Timestamp) -> Result<ActionResult, Rejection> {
    let key = w.fresh_key();
    let out = w.exec_cmd(&Command::new(Principal::Agent(agent), action, Some(key), ts)).outcome.map(|r| r.result);
    if w.now < ts {
        w.now = ts;
    }
    out
}

/// A terminal assignment stays exactly as it is whatever anyone tries (§6.4: irreversible). The
/// right party is refused INVALID_STATE, except for the actions in `deadline_won`, whose
/// obligation the deadline ended: those are refused DEADLINE_PASSED, the answer they would get in
/// the command that settled the deadline first (L4: one code whether or not the expiry applied).
fn assert_frozen(w: &mut World, a: AssignmentId, creator: AgentId, taker: AgentId, deadline_won: &[ActionKind]) {
    let before = asg(w, a);
    assert!(before.state.is_terminal(), "not terminal: {:?}", before.state);
    let by_taker = [
        Action::TakeAssignment { assignment: a },
        Action::DeliverAssignment { assignment: a, output: Content::from("again") },
        Action::DropAssignment { assignment: a },
    ];
    let by_creator = [
        Action::AdoptAssignment { assignment: a },
        Action::RejectAssignment { assignment: a, reason: Content::from("no") },
        Action::VoidAssignment { assignment: a },
    ];
    for action in by_taker.iter().chain(by_creator.iter()) {
        let kind = action.kind();
        let right = if by_taker.contains(action) { taker } else { creator };
        let wrong = if right == taker { creator } else { taker };
        let r = w.err(right, action.clone());
        let expected = if deadline_won.contains(&kind) { Code::DeadlinePassed } else { Code::InvalidState };
        assert_eq!(r.code, expected, "{} by the right party on a terminal assignment", kind.as_str());
        w.err(wrong, action.clone());
        assert_eq!(asg(w, a), before, "{} changed a terminal assignment", kind.as_str());
    }
    w.advance(Micros::from_secs(400 * 24 * 3600));
    assert!(w.fire_due_timers().is_empty());
    assert_eq!(asg(w, a), before);
    assert!(turn_ids(w, creator).is_empty());
    assert!(turn_ids(w, taker).is_empty());
}

// ------------------------------------------------------------------------------------------------
// Creation

/// §6.4 (§6.4.1): a speaker creates an assignment together with an entry that names it.
#[test]
fn speaker_creates_assignment_together_with_its_entry() {
    let mut f = fixture();
    let before = last_entry(&f.w, f.thread);
    let (entry, a) = match post_asg(&mut f.w, f.alice, f.thread, new_asg(f.bob, Some(DELIVERY), Some(JUDGMENT)), None) {
        Ok(ActionResult::Posted { entry, assignment: Some(a), .. }) => (entry, a),
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(entry, EntrySeq(before + 1));
    let view = read::read_entry(&f.w.state, f.bob, f.thread, entry).expect("entry readable");
    assert_eq!(view.entry.assignment, Some(a));
    assert_eq!(view.entry.author, f.alice);
    let rec = asg(&f.w, a);
    assert_eq!((rec.thread, rec.entry, rec.creator, rec.addressee), (f.thread, entry, f.alice, f.bob));
    assert_eq!(rec.state, AssignmentState::Open);
    assert_eq!(rec.spec.criteria, Content::from("criteria: a haiku about rust"));
    assert_eq!(rec.spec.output_structure, Some(Content::from("three lines")));
    assert!(!rec.judge_forfeited);
}

/// §6.4, §6.2 (§6.4.1, §6.2.1): an observer cannot create an assignment; nothing is posted (L2).
#[test]
fn observer_cannot_create_assignment() {
    let mut f = fixture();
    let before = last_entry(&f.w, f.thread);
    let r =
        post_asg(&mut f.w, f.carol, f.thread, new_asg(f.bob, None, None), None).expect_err("observer must be refused");
    assert_eq!(r.code, Code::CannotSpeak);
    assert_eq!(last_entry(&f.w, f.thread), before);
    assert_eq!(assignments_created(&f.w), 0);
    assert!(f.w.opportunity_ids(f.bob).is_empty());
}

/// §6.4 (§6.4.2, L2.3): an observer addressee is an invalid target; neither entry nor assignment exists.
#[test]
fn observer_addressee_is_invalid_target() {
    let mut f = fixture();
    let before = last_entry(&f.w, f.thread);
    let r = post_asg(&mut f.w, f.alice, f.thread, new_asg(f.carol, None, None), None).expect_err("observer addressee");
    assert_eq!(r.code, Code::InvalidTarget);
    assert_eq!(r.field.as_deref(), Some("assignment.addressee"));
    assert_eq!(last_entry(&f.w, f.thread), before);
    assert_eq!(assignments_created(&f.w), 0);
    assert!(f.w.opportunity_ids(f.carol).is_empty());
}

/// §6.4 (§6.4.2): an agent that never joined, or whose membership ended, cannot be addressed.
#[test]
fn non_member_and_former_member_addressees_are_invalid_targets() {
    let mut f = fixture();
    let outsider = f.w.register();
    let r = post_asg(&mut f.w, f.alice, f.thread, new_asg(outsider, None, None), None).expect_err("outsider addressee");
    assert_eq!(r.code, Code::InvalidTarget);
    assert_eq!(r.field.as_deref(), Some("assignment.addressee"));
    f.w.ok(f.bob, Action::Leave { thread: f.thread });
    let r =
        post_asg(&mut f.w, f.alice, f.thread, new_asg(f.bob, None, None), None).expect_err("former member addressee");
    assert_eq!(r.code, Code::InvalidTarget);
    assert_eq!(r.field.as_deref(), Some("assignment.addressee"));
    assert_eq!(assignments_created(&f.w), 0);
}

/// §6.4 (§6.4.2, §6.4.6): the creator may address itself and then takes, delivers and judges it.
#[test]
fn creator_may_address_itself_and_complete_the_cycle() {
    let mut f = fixture();
    let a = f.w.assign(f.alice, f.thread, f.alice, Some(DELIVERY), Some(JUDGMENT));
    assert_eq!(f.w.opportunity_ids(f.alice), vec![OpportunityId::Assignment(a)]);
    take(&mut f.w, f.alice, a);
    assert_eq!(turn_ids(&f.w, f.alice), vec![ObligationId::AssignmentDelivery(a)]);
    deliver(&mut f.w, f.alice, a);
    assert_eq!(turn_ids(&f.w, f.alice), vec![ObligationId::AssignmentJudgment(a)]);
    assert_eq!(
        f.w.ok(f.alice, Action::AdoptAssignment { assignment: a }),
        ActionResult::AssignmentAdopted { assignment: a }
    );
    assert_eq!(outcome(&f.w, a), Some(AssignmentOutcome::Adopted));
    assert!(turn_ids(&f.w, f.alice).is_empty());
}

/// §6.4, L4 (§6.4.3, L4.2): unstated windows take the configured defaults, and the deadlines run from them.
#[test]
fn unstated_windows_take_the_configured_defaults() {
    let limits = Limits {
        default_delivery_window: Micros::from_secs(3600),
        default_judgment_window: Micros::from_secs(7200),
        ..Limits::default()
    };
    let mut f = fixture_with(limits);
    let a = f.w.assign(f.alice, f.thread, f.bob, None, None);
    let spec = asg(&f.w, a).spec;
    assert_eq!(spec.delivery_window, Micros::from_secs(3600));
    assert_eq!(spec.judgment_window, Micros::from_secs(7200));
    let due = take(&mut f.w, f.bob, a);
    assert_eq!(due, f.w.now.plus(Micros::from_secs(3600)));
    let jdue = deliver(&mut f.w, f.bob, a);
    assert_eq!(jdue, f.w.now.plus(Micros::from_secs(7200)));
}

/// §6.4 (§6.4.3): stated windows are fixed on the assignment as stated.
#[test]
fn stated_windows_are_fixed_on_the_assignment() {
    let mut f = fixture();
    let a = f.w.assign(f.alice, f.thread, f.bob, Some(Micros::from_secs(5)), Some(Micros::from_secs(7)));
    let spec = asg(&f.w, a).spec;
    assert_eq!(spec.delivery_window, Micros::from_secs(5));
    assert_eq!(spec.judgment_window, Micros::from_secs(7));
}

/// §6.4, L4 (§6.4.3, L4.6): a window outside min_window..max_window is INVALID_ARGUMENT naming the field.
#[test]
fn windows_outside_the_limits_are_invalid_arguments() {
    let mut f = fixture();
    let min = f.w.limits.min_window;
    let max = f.w.limits.max_window;
    let below = Micros(min.0 - 1);
    let above = Micros(max.0 + 1);
    let cases = [
        (Some(below), None, "assignment.delivery_window"),
        (Some(above), None, "assignment.delivery_window"),
        (None, Some(below), "assignment.judgment_window"),
        (None, Some(above), "assignment.judgment_window"),
    ];
    let before = last_entry(&f.w, f.thread);
    for (d, j, field) in cases {
        let r = post_asg(&mut f.w, f.alice, f.thread, new_asg(f.bob, d, j), None).expect_err("window out of range");
        assert_eq!(r.code, Code::InvalidArgument, "{field}");
        assert_eq!(r.field.as_deref(), Some(field));
    }
    assert_eq!(last_entry(&f.w, f.thread), before);
    assert_eq!(assignments_created(&f.w), 0);
}

/// §6.4 (§6.4.3): windows exactly at min_window and max_window are accepted.
#[test]
fn windows_at_the_limits_are_accepted() {
    let mut f = fixture();
    let (min, max) = (f.w.limits.min_window, f.w.limits.max_window);
    let a = f.w.assign(f.alice, f.thread, f.bob, Some(min), Some(max));
    let b = f.w.assign(f.alice, f.thread, f.bob, Some(max), Some(min));
    assert_eq!(asg(&f.w, a).spec.delivery_window, min);
    assert_eq!(asg(&f.w, a).spec.judgment_window, max);
    assert_eq!(asg(&f.w, b).spec.delivery_window, max);
    assert_eq!(asg(&f.w, b).spec.judgment_window, min);
}

/// §6.4 (§6.4.12): the content fixed at creation (criteria, structure, windows, entry) never changes.
#[test]
fn assignment_content_never_changes_through_its_lifecycle() {
    let mut f = fixture();
    let a = assign(&mut f);
    let created = asg(&f.w, a);
    let entry = read::read_entry(&f.w.state, f.alice, f.thread, created.entry).expect("entry");
    take(&mut f.w, f.bob, a);
    deliver(&mut f.w, f.bob, a);
    f.w.ok(f.alice, Action::RejectAssignment { assignment: a, reason: Content::from("not a haiku") });
    let ended = asg(&f.w, a);
    assert_eq!(ended.spec, created.spec);
    assert_eq!(
        (ended.creator, ended.addressee, ended.entry, ended.created_at),
        (created.creator, created.addressee, created.entry, created.created_at)
    );
    assert_eq!(read::read_entry(&f.w.state, f.alice, f.thread, created.entry).expect("entry"), entry);
}

// ------------------------------------------------------------------------------------------------
// Untaken assignments

/// §6.4, §8 (§6.4.5, §8.6): an untaken assignment creates no obligation for anyone.
#[test]
fn untaken_assignment_creates_no_obligation() {
    let mut f = fixture();
    let a = assign(&mut f);
    for agent in [f.gov, f.alice, f.bob, f.carol] {
        assert!(turn_ids(&f.w, agent).is_empty(), "{agent} holds an obligation for untaken {a}");
    }
    let ws =
        read::working_set(&f.w.state, f.bob, ObjectRef::Thread(f.thread), f.w.now, &f.w.limits).expect("working set");
    assert!(ws.obligations.is_empty());
    assert!(ws.available.contains(&ActionKind::TakeAssignment));
}

/// §6.4 (§6.4.4, §6.4.5): before taking no deadline runs; the delivery deadline runs from taking.
#[test]
fn untaken_assignment_has_no_running_deadline() {
    let mut f = fixture();
    let a = assign(&mut f);
    f.w.advance(Micros(f.w.limits.max_window.0 * 3));
    assert!(f.w.fire_due_timers().is_empty());
    assert!(read::due_obligations(&f.w.state, None, usize::MAX).expect("due").is_empty());
    assert_eq!(asg(&f.w, a).state, AssignmentState::Open);
    let due = take(&mut f.w, f.bob, a);
    assert_eq!(due, f.w.now.plus(DELIVERY));
    assert_eq!(asg(&f.w, a).state, AssignmentState::Taken { at: f.w.now, delivery_due: due });
}

/// §8 (§8.6, §8.7): the untaken assignment is an opportunity of its addressee only, found by agent.
#[test]
fn untaken_assignment_is_an_opportunity_of_the_addressee_only() {
    let mut f = fixture();
    let a = assign(&mut f);
    let page = read::opportunities(&f.w.state, f.bob, None, 0, &f.w.limits).expect("opportunities");
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.items[0].id, OpportunityId::Assignment(a));
    assert_eq!(page.items[0].object, ObjectRef::Thread(f.thread));
    for other in [f.gov, f.alice, f.carol] {
        assert!(f.w.opportunity_ids(other).is_empty());
    }
}

/// §6.4 (§6.4.5): the opportunity ends by being taken or voided.
#[test]
fn opportunity_ends_when_taken_or_voided() {
    let mut f = fixture();
    let a = assign(&mut f);
    let b = assign(&mut f);
    assert_eq!(f.w.opportunity_ids(f.bob), vec![OpportunityId::Assignment(a), OpportunityId::Assignment(b)]);
    take(&mut f.w, f.bob, a);
    assert_eq!(f.w.opportunity_ids(f.bob), vec![OpportunityId::Assignment(b)]);
    f.w.ok(f.alice, Action::VoidAssignment { assignment: b });
    assert!(f.w.opportunity_ids(f.bob).is_empty());
    assert_eq!(outcome(&f.w, b), Some(AssignmentOutcome::Voided));
}

// ------------------------------------------------------------------------------------------------
// Take

/// §6.4 (§6.4.5, §6.4.6): only the addressee takes; a refused take leaves it open.
#[test]
fn only_the_addressee_takes() {
    let mut f = fixture();
    let a = assign(&mut f);
    for other in [f.alice, f.gov, f.carol] {
        assert_eq!(f.w.err(other, Action::TakeAssignment { assignment: a }).code, Code::NotAddressee);
    }
    assert_eq!(asg(&f.w, a).state, AssignmentState::Open);
    assert_eq!(f.w.opportunity_ids(f.bob), vec![OpportunityId::Assignment(a)]);
}

/// §6.2, §9 (§6.2.5, §9.4): an agent outside the thread gets NOT_FOUND for every assignment action.
#[test]
fn non_member_gets_not_found_for_the_assignment() {
    let mut f = fixture();
    let outsider = f.w.register();
    let a = assign(&mut f);
    for action in [
        Action::TakeAssignment { assignment: a },
        Action::DeliverAssignment { assignment: a, output: Content::from("x") },
        Action::AdoptAssignment { assignment: a },
        Action::VoidAssignment { assignment: a },
    ] {
        assert_eq!(f.w.err(outsider, action).code, Code::NotFound);
    }
    match read::read_assignment(&f.w.state, outsider, a) {
        Err(ReadError::Rejected(r)) => assert_eq!(r.code, Code::NotFound),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(asg(&f.w, a).state, AssignmentState::Open);
}

/// §6.4 (§6.4.8): an assignment has at most one taking.
#[test]
fn second_take_is_invalid_state() {
    let mut f = fixture();
    let a = assign(&mut f);
    let due = take(&mut f.w, f.bob, a);
    let taken = asg(&f.w, a);
    assert_eq!(f.w.err(f.bob, Action::TakeAssignment { assignment: a }).code, Code::InvalidState);
    assert_eq!(asg(&f.w, a), taken);
    assert!(matches!(taken.state, AssignmentState::Taken { delivery_due, .. } if delivery_due == due));
}

/// §6.4, §8 (§6.4.4, §8.4, L4.2): taking starts the delivery deadline and the taker's delivery obligation.
#[test]
fn taking_starts_the_delivery_deadline_and_obligation() {
    let mut f = fixture();
    let a = assign(&mut f);
    f.w.advance(Micros::from_secs(30));
    let due = take(&mut f.w, f.bob, a);
    let taken_at = f.w.now;
    assert_eq!(due, taken_at.plus(DELIVERY));
    assert_eq!(asg(&f.w, a).state, AssignmentState::Taken { at: taken_at, delivery_due: due });
    let turn = f.w.full_turn(f.bob);
    assert_eq!(turn.len(), 1);
    assert_eq!(turn[0].obligation, ObligationId::AssignmentDelivery(a));
    assert_eq!(turn[0].kind, ObligationKind::Delivery);
    assert_eq!(turn[0].object, ObjectRef::Thread(f.thread));
    assert_eq!(turn[0].arose_at, taken_at);
    assert_eq!(turn[0].due_at, Some(due));
    assert_eq!(turn[0].next, NextStep::Deliver);
    assert!(turn_ids(&f.w, f.alice).is_empty());
}

/// §6.2 (§6.2.5, §6.2.6): an addressee demoted to observer after creation still takes and delivers.
#[test]
fn addressee_demoted_to_observer_still_takes_and_delivers() {
    let mut f = fixture();
    let a = assign(&mut f);
    f.w.ok(f.gov, Action::ChangeRole { thread: f.thread, member: f.bob, role: Role::Observer });
    take(&mut f.w, f.bob, a);
    assert_eq!(turn_ids(&f.w, f.bob), vec![ObligationId::AssignmentDelivery(a)]);
    deliver(&mut f.w, f.bob, a);
    assert!(matches!(asg(&f.w, a).state, AssignmentState::Delivered { .. }));
}

/// §6.2 (§6.2.5, §6.2.7): a taker demoted to observer keeps its assignment in progress and may drop it.
#[test]
fn demotion_does_not_affect_a_taken_assignment() {
    let mut f = fixture();
    let a = assign(&mut f);
    let due = take(&mut f.w, f.bob, a);
    f.w.ok(f.gov, Action::ChangeRole { thread: f.thread, member: f.bob, role: Role::Observer });
    assert!(matches!(asg(&f.w, a).state, AssignmentState::Taken { delivery_due, .. } if delivery_due == due));
    assert_eq!(turn_ids(&f.w, f.bob), vec![ObligationId::AssignmentDelivery(a)]);
    assert_eq!(
        f.w.ok(f.bob, Action::DropAssignment { assignment: a }),
        ActionResult::AssignmentDropped { assignment: a }
    );
    assert_eq!(outcome(&f.w, a), Some(AssignmentOutcome::Dropped));
}

/// §6.2 (§6.2.5, §6.2.6): a creator demoted to observer still judges and voids its assignments.
#[test]
fn creator_demoted_to_observer_still_judges_and_voids() {
    let mut f = fixture();
    let a = assign(&mut f);
    let b = assign(&mut f);
    take(&mut f.w, f.bob, a);
    deliver(&mut f.w, f.bob, a);
    f.w.ok(f.gov, Action::ChangeRole { thread: f.thread, member: f.alice, role: Role::Observer });
    assert_eq!(turn_ids(&f.w, f.alice), vec![ObligationId::AssignmentJudgment(a)]);
    f.w.ok(f.alice, Action::AdoptAssignment { assignment: a });
    f.w.ok(f.alice, Action::VoidAssignment { assignment: b });
    assert_eq!(outcome(&f.w, a), Some(AssignmentOutcome::Adopted));
    assert_eq!(outcome(&f.w, b), Some(AssignmentOutcome::Voided));
    // The speaking requirement still applies at creation.
    let r = post_asg(&mut f.w, f.alice, f.thread, new_asg(f.bob, None, None), None).expect_err("observer creates");
    assert_eq!(r.code, Code::CannotSpeak);
}

// ------------------------------------------------------------------------------------------------
// Deliver

/// §6.4 (§6.4.6): delivering before taking is INVALID_STATE and starts nothing.
#[test]
fn delivering_before_taking_is_invalid_state() {
    let mut f = fixture();
    let a = assign(&mut f);
    let r = f.w.err(f.bob, Action::DeliverAssignment { assignment: a, output: Content::from("early") });
    assert_eq!(r.code, Code::InvalidState);
    assert_eq!(asg(&f.w, a).state, AssignmentState::Open);
    assert!(turn_ids(&f.w, f.alice).is_empty());
}

/// §6.4 (§6.4.6): only the taker delivers.
#[test]
fn only_the_taker_delivers() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    let taken = asg(&f.w, a);
    for other in [f.alice, f.gov, f.carol] {
        let r = f.w.err(other, Action::DeliverAssignment { assignment: a, output: Content::from("not mine") });
        assert_eq!(r.code, Code::NotTaker);
    }
    assert_eq!(asg(&f.w, a), taken);
}

/// §6.4, L5 (§6.4.7, §6.4.8, L5.3): a delivery cannot be replaced; the first output stays.
#[test]
fn delivery_cannot_be_replaced() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    deliver(&mut f.w, f.bob, a);
    let delivered = asg(&f.w, a);
    let r = f.w.err(f.bob, Action::DeliverAssignment { assignment: a, output: Content::from("better output") });
    assert_eq!(r.code, Code::InvalidState);
    assert_eq!(asg(&f.w, a), delivered);
    assert!(
        matches!(delivered.state, AssignmentState::Delivered { ref output, .. } if *output == Content::from("the output"))
    );
}

/// §6.4, §8 (§6.4.4, §8.5, L4.2): delivery starts the judgment deadline and the creator's judgment obligation.
#[test]
fn delivery_starts_the_judgment_deadline_and_obligation() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    let taken_at = f.w.now;
    f.w.advance(Micros::from_secs(10));
    let jdue = deliver(&mut f.w, f.bob, a);
    let at = f.w.now;
    assert_eq!(jdue, at.plus(JUDGMENT));
    assert_eq!(
        asg(&f.w, a).state,
        AssignmentState::Delivered { taken_at, at, judgment_due: jdue, output: Content::from("the output") }
    );
    assert!(turn_ids(&f.w, f.bob).is_empty());
    let turn = f.w.full_turn(f.alice);
    assert_eq!(turn.len(), 1);
    assert_eq!(turn[0].obligation, ObligationId::AssignmentJudgment(a));
    assert_eq!(turn[0].kind, ObligationKind::Judgment);
    assert_eq!(turn[0].due_at, Some(jdue));
    assert_eq!(turn[0].next, NextStep::Judge);
}

// ------------------------------------------------------------------------------------------------
// Judge, drop, void

/// §6.4 (§6.4.6, §6.4.13): the creator adopts; the delivery is kept and no obligation remains.
#[test]
fn creator_adopts_the_delivery() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    deliver(&mut f.w, f.bob, a);
    assert_eq!(
        f.w.ok(f.alice, Action::AdoptAssignment { assignment: a }),
        ActionResult::AssignmentAdopted { assignment: a }
    );
    assert!(matches!(
        asg(&f.w, a).state,
        AssignmentState::Ended { outcome: AssignmentOutcome::Adopted, delivered: Some(ref o), at } if *o == Content::from("the output") && at == f.w.now
    ));
    assert!(turn_ids(&f.w, f.alice).is_empty());
    assert!(turn_ids(&f.w, f.bob).is_empty());
}

/// §6.4 (§6.4.6): a rejection must carry a reason; an empty one is INVALID_ARGUMENT and judges nothing.
#[test]
fn rejection_without_a_reason_is_invalid_argument() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    deliver(&mut f.w, f.bob, a);
    let delivered = asg(&f.w, a);
    let r = f.w.err(f.alice, Action::RejectAssignment { assignment: a, reason: Content::default() });
    assert_eq!(r.code, Code::InvalidArgument);
    assert_eq!(r.field.as_deref(), Some("reason"));
    assert_eq!(asg(&f.w, a), delivered);
    assert_eq!(turn_ids(&f.w, f.alice), vec![ObligationId::AssignmentJudgment(a)]);
}

/// §6.4 (§6.4.6, §6.4.13): the rejection reason is readable by the taker.
#[test]
fn rejection_reason_is_readable_by_the_taker() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    deliver(&mut f.w, f.bob, a);
    let res =
        f.w.ok(f.alice, Action::RejectAssignment { assignment: a, reason: Content::from("four lines, not three") });
    assert_eq!(res, ActionResult::AssignmentRejected { assignment: a });
    let seen = read::read_assignment(&f.w.state, f.bob, a).expect("taker reads");
    match seen.state {
        AssignmentState::Ended { outcome: AssignmentOutcome::Rejected { reason }, delivered, .. } => {
            assert_eq!(reason, Content::from("four lines, not three"));
            assert_eq!(delivered, Some(Content::from("the output")));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(turn_ids(&f.w, f.alice).is_empty());
}

/// §6.4 (§6.4.6): only the creator judges.
#[test]
fn only_the_creator_judges() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    deliver(&mut f.w, f.bob, a);
    let delivered = asg(&f.w, a);
    for other in [f.bob, f.gov, f.carol] {
        assert_eq!(f.w.err(other, Action::AdoptAssignment { assignment: a }).code, Code::NotCreator);
        let r = f.w.err(other, Action::RejectAssignment { assignment: a, reason: Content::from("no") });
        assert_eq!(r.code, Code::NotCreator);
    }
    assert_eq!(asg(&f.w, a), delivered);
}

/// §6.4 (§6.4.6): judging before delivery is INVALID_STATE, whether open or taken.
#[test]
fn judging_before_delivery_is_invalid_state() {
    let mut f = fixture();
    let a = assign(&mut f);
    assert_eq!(f.w.err(f.alice, Action::AdoptAssignment { assignment: a }).code, Code::InvalidState);
    take(&mut f.w, f.bob, a);
    assert_eq!(f.w.err(f.alice, Action::AdoptAssignment { assignment: a }).code, Code::InvalidState);
    let r = f.w.err(f.alice, Action::RejectAssignment { assignment: a, reason: Content::from("too slow") });
    assert_eq!(r.code, Code::InvalidState);
    assert!(matches!(asg(&f.w, a).state, AssignmentState::Taken { .. }));
}

/// §6.4, §8 (§6.4.6, §8.4, L4.1): the taker drops before delivery, alone; the creator cannot drop.
#[test]
fn taker_drops_before_delivery() {
    let mut f = fixture();
    let a = assign(&mut f);
    assert_eq!(f.w.err(f.bob, Action::DropAssignment { assignment: a }).code, Code::InvalidState);
    take(&mut f.w, f.bob, a);
    assert_eq!(f.w.err(f.alice, Action::DropAssignment { assignment: a }).code, Code::NotTaker);
    assert_eq!(
        f.w.ok(f.bob, Action::DropAssignment { assignment: a }),
        ActionResult::AssignmentDropped { assignment: a }
    );
    assert!(matches!(
        asg(&f.w, a).state,
        AssignmentState::Ended { outcome: AssignmentOutcome::Dropped, delivered: None, .. }
    ));
    assert!(turn_ids(&f.w, f.bob).is_empty());
    assert_eq!(f.w.state.thread(f.thread).expect("state").expect("thread").open_assignments, 0);
}

/// §6.4 (§6.4.6, §6.4.7): a delivered assignment cannot be dropped.
#[test]
fn dropping_after_delivery_is_invalid_state() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    deliver(&mut f.w, f.bob, a);
    let delivered = asg(&f.w, a);
    assert_eq!(f.w.err(f.bob, Action::DropAssignment { assignment: a }).code, Code::InvalidState);
    assert_eq!(asg(&f.w, a), delivered);
    assert_eq!(turn_ids(&f.w, f.alice), vec![ObligationId::AssignmentJudgment(a)]);
}

/// §6.4, §8 (§6.4.6, §8.4): the creator voids an open or a taken assignment; the taker's obligation ends.
#[test]
fn creator_voids_open_or_taken_assignment() {
    let mut f = fixture();
    let open = assign(&mut f);
    let taken = assign(&mut f);
    take(&mut f.w, f.bob, taken);
    assert_eq!(f.w.err(f.bob, Action::VoidAssignment { assignment: taken }).code, Code::NotCreator);
    assert_eq!(
        f.w.ok(f.alice, Action::VoidAssignment { assignment: open }),
        ActionResult::AssignmentVoided { assignment: open }
    );
    assert_eq!(
        f.w.ok(f.alice, Action::VoidAssignment { assignment: taken }),
        ActionResult::AssignmentVoided { assignment: taken }
    );
    for a in [open, taken] {
        assert!(matches!(
            asg(&f.w, a).state,
            AssignmentState::Ended { outcome: AssignmentOutcome::Voided, delivered: None, .. }
        ));
    }
    assert!(turn_ids(&f.w, f.bob).is_empty());
    assert!(read::due_obligations(&f.w.state, None, usize::MAX).expect("due").is_empty());
}

/// §6.4 (§6.4.6, §6.4.7): a delivered assignment cannot be voided; it awaits judgment.
#[test]
fn voiding_a_delivered_assignment_is_invalid_state() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    deliver(&mut f.w, f.bob, a);
    let delivered = asg(&f.w, a);
    assert_eq!(f.w.err(f.alice, Action::VoidAssignment { assignment: a }).code, Code::InvalidState);
    assert_eq!(asg(&f.w, a), delivered);
}

// ------------------------------------------------------------------------------------------------
// Terminal states are irreversible

/// §6.4 (§6.4.13): adopted is irreversible.
#[test]
fn adopted_is_irreversible() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    deliver(&mut f.w, f.bob, a);
    f.w.ok(f.alice, Action::AdoptAssignment { assignment: a });
    assert_frozen(&mut f.w, a, f.alice, f.bob, &[]);
    assert_eq!(outcome(&f.w, a), Some(AssignmentOutcome::Adopted));
}

/// §6.4 (§6.4.13): rejected is irreversible.
#[test]
fn rejected_is_irreversible() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    deliver(&mut f.w, f.bob, a);
    f.w.ok(f.alice, Action::RejectAssignment { assignment: a, reason: Content::from("wrong") });
    assert_frozen(&mut f.w, a, f.alice, f.bob, &[]);
    assert_eq!(outcome(&f.w, a), Some(AssignmentOutcome::Rejected { reason: Content::from("wrong") }));
}

/// §6.4 (§6.4.13, §6.4.9): undecided is irreversible.
#[test]
fn undecided_is_irreversible() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    deliver(&mut f.w, f.bob, a);
    f.w.advance(JUDGMENT);
    f.w.fire_due_timers();
    assert_frozen(&mut f.w, a, f.alice, f.bob, &[ActionKind::AdoptAssignment, ActionKind::RejectAssignment]);
    assert_eq!(outcome(&f.w, a), Some(AssignmentOutcome::Undecided));
}

/// §6.4 (§6.4.13): dropped is irreversible.
#[test]
fn dropped_is_irreversible() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    f.w.ok(f.bob, Action::DropAssignment { assignment: a });
    assert_frozen(&mut f.w, a, f.alice, f.bob, &[]);
    assert_eq!(outcome(&f.w, a), Some(AssignmentOutcome::Dropped));
}

/// §6.4 (§6.4.13, §6.4.10): timed out is irreversible.
#[test]
fn timed_out_is_irreversible() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    f.w.advance(DELIVERY);
    f.w.fire_due_timers();
    assert_frozen(
        &mut f.w,
        a,
        f.alice,
        f.bob,
        &[ActionKind::DeliverAssignment, ActionKind::DropAssignment, ActionKind::VoidAssignment],
    );
    assert_eq!(outcome(&f.w, a), Some(AssignmentOutcome::TimedOut));
}

/// §6.4 (§6.4.13): voided is irreversible.
#[test]
fn voided_is_irreversible() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    f.w.ok(f.alice, Action::VoidAssignment { assignment: a });
    assert_frozen(&mut f.w, a, f.alice, f.bob, &[]);
    assert_eq!(outcome(&f.w, a), Some(AssignmentOutcome::Voided));
}

// ------------------------------------------------------------------------------------------------
// Deadlines (L4, L5)

/// §6.4, L4 (§6.4.10, L4.1, §8.4): the delivery deadline ends the obligation as timed out when the timer fires.
#[test]
fn delivery_deadline_times_out_when_the_timer_fires() {
    let mut f = fixture();
    let a = assign(&mut f);
    let due = take(&mut f.w, f.bob, a);
    let id = ObligationId::AssignmentDelivery(a);
    f.w.advance(DELIVERY);
    assert_eq!(f.w.now, due);
    // Due but not yet expired: the turn says wait, not deliver.
    let turn = f.w.full_turn(f.bob);
    assert_eq!((turn.len(), turn[0].next), (1, NextStep::Wait));
    assert_eq!(f.w.fire_due_timers(), vec![id]);
    assert!(matches!(
        asg(&f.w, a).state,
        AssignmentState::Ended { outcome: AssignmentOutcome::TimedOut, delivered: None, .. }
    ));
    assert!(turn_ids(&f.w, f.bob).is_empty());
    assert_eq!(deadline_facts(&f.w, id), vec![ExpiryResult::TimedOut]);
    assert_eq!(f.w.state.thread(f.thread).expect("state").expect("thread").open_assignments, 0);
}

/// L4, §6.4 (L4.3, §6.4.10): a late delivery is DEADLINE_PASSED and the timeout is still recorded.
#[test]
fn late_delivery_is_rejected_and_the_timeout_recorded() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    f.w.advance(Micros::from_secs(3600));
    let r = f.w.err(f.bob, Action::DeliverAssignment { assignment: a, output: Content::from("late") });
    assert_eq!(r.code, Code::DeadlinePassed);
    assert_eq!(outcome(&f.w, a), Some(AssignmentOutcome::TimedOut));
    assert_eq!(deadline_facts(&f.w, ObligationId::AssignmentDelivery(a)), vec![ExpiryResult::TimedOut]);
    assert!(f.w.fire_due_timers().is_empty());
    assert!(turn_ids(&f.w, f.bob).is_empty());
    assert_eq!(deadline_facts(&f.w, ObligationId::AssignmentDelivery(a)).len(), 1);
}

/// L4 (L4.3): at exactly the delivery due time the deadline wins over the delivery.
#[test]
fn deadline_wins_over_delivery_at_exactly_the_due_time() {
    let mut f = fixture();
    let a = assign(&mut f);
    let due = take(&mut f.w, f.bob, a);
    let r = act_at(
        &mut f.w,
        f.bob,
        Action::DeliverAssignment { assignment: a, output: Content::from("just in time?") },
        due,
    )
    .expect_err("the deadline wins at the due time");
    assert_eq!(r.code, Code::DeadlinePassed);
    assert_eq!(outcome(&f.w, a), Some(AssignmentOutcome::TimedOut));
    assert_eq!(deadline_facts(&f.w, ObligationId::AssignmentDelivery(a)), vec![ExpiryResult::TimedOut]);
}

/// L4 (L4.3, §6.4.4): one microsecond before the due time a delivery is still accepted.
#[test]
fn delivery_one_microsecond_before_the_due_time_is_accepted() {
    let mut f = fixture();
    let a = assign(&mut f);
    let due = take(&mut f.w, f.bob, a);
    let res = act_at(
        &mut f.w,
        f.bob,
        Action::DeliverAssignment { assignment: a, output: Content::from("in time") },
        Timestamp(due.0 - 1),
    );
    assert!(
        matches!(res, Ok(ActionResult::AssignmentDelivered { judgment_due, .. }) if judgment_due == Timestamp(due.0 - 1).plus(JUDGMENT))
    );
    assert!(deadline_facts(&f.w, ObligationId::AssignmentDelivery(a)).is_empty());
}

/// L4 (L4.3, §6.4.10): drop and void at exactly the delivery due time lose to the deadline.
#[test]
fn drop_and_void_at_the_delivery_due_time_lose_to_the_deadline() {
    let mut f = fixture();
    let a = assign(&mut f);
    let b = assign(&mut f);
    let due_a = take(&mut f.w, f.bob, a);
    let r = act_at(&mut f.w, f.bob, Action::DropAssignment { assignment: a }, due_a).expect_err("drop at due");
    assert_eq!(r.code, Code::DeadlinePassed);
    assert_eq!(outcome(&f.w, a), Some(AssignmentOutcome::TimedOut));
    let due_b = take(&mut f.w, f.bob, b);
    let r = act_at(&mut f.w, f.alice, Action::VoidAssignment { assignment: b }, due_b).expect_err("void at due");
    assert_eq!(r.code, Code::DeadlinePassed);
    assert_eq!(outcome(&f.w, b), Some(AssignmentOutcome::TimedOut));
    assert_eq!(deadline_facts(&f.w, ObligationId::AssignmentDelivery(a)).len(), 1);
    assert_eq!(deadline_facts(&f.w, ObligationId::AssignmentDelivery(b)).len(), 1);
}

/// §6.4, L4 (§6.4.9, L4.1, §8.5): a missed judgment settles undecided, kept apart from the taker.
#[test]
fn missed_judgment_settles_undecided_and_is_not_held_against_the_taker() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    let jdue = deliver(&mut f.w, f.bob, a);
    f.w.advance(JUDGMENT);
    assert_eq!(f.w.now, jdue);
    assert_eq!(f.w.fire_due_timers(), vec![ObligationId::AssignmentJudgment(a)]);
    let ended = asg(&f.w, a);
    assert!(matches!(
        ended.state,
        AssignmentState::Ended { outcome: AssignmentOutcome::Undecided, delivered: Some(ref o), .. } if *o == Content::from("the output")
    ));
    assert_eq!(deadline_facts(&f.w, ObligationId::AssignmentJudgment(a)), vec![ExpiryResult::Undecided]);
    // Nothing lands on the taker: no obligation, and the next assignment proceeds as usual.
    assert!(turn_ids(&f.w, f.bob).is_empty());
    assert!(turn_ids(&f.w, f.alice).is_empty());
    let next = assign(&mut f);
    take(&mut f.w, f.bob, next);
    assert_eq!(turn_ids(&f.w, f.bob), vec![ObligationId::AssignmentDelivery(next)]);
}

/// §6.4, L4 (§6.4.11, L4.3): at exactly the judgment due time the deadline wins over adoption.
#[test]
fn deadline_wins_over_judgment_at_exactly_the_due_time() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    let jdue = deliver(&mut f.w, f.bob, a);
    let r = act_at(&mut f.w, f.alice, Action::AdoptAssignment { assignment: a }, jdue).expect_err("deadline wins");
    assert_eq!(r.code, Code::DeadlinePassed);
    assert_eq!(outcome(&f.w, a), Some(AssignmentOutcome::Undecided));
    assert_eq!(deadline_facts(&f.w, ObligationId::AssignmentJudgment(a)), vec![ExpiryResult::Undecided]);
}

/// §6.4, L4 (§6.4.11, L4.3): a rejection after the judgment deadline is DEADLINE_PASSED; undecided stands.
#[test]
fn late_rejection_is_rejected_and_undecided_recorded() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    deliver(&mut f.w, f.bob, a);
    f.w.advance(Micros::from_secs(3600));
    let r = f.w.err(f.alice, Action::RejectAssignment { assignment: a, reason: Content::from("too late") });
    assert_eq!(r.code, Code::DeadlinePassed);
    assert_eq!(outcome(&f.w, a), Some(AssignmentOutcome::Undecided));
    assert_eq!(deadline_facts(&f.w, ObligationId::AssignmentJudgment(a)).len(), 1);
    assert!(turn_ids(&f.w, f.alice).is_empty());
}

/// L5 (L5.2): firing the timers twice ends the obligation exactly once.
#[test]
fn timers_fired_twice_end_the_obligation_once() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    f.w.advance(Micros::from_secs(61));
    assert_eq!(f.w.fire_due_timers(), vec![ObligationId::AssignmentDelivery(a)]);
    let after_first = asg(&f.w, a);
    assert!(f.w.fire_due_timers().is_empty());
    assert_eq!(asg(&f.w, a), after_first);
    assert_eq!(deadline_facts(&f.w, ObligationId::AssignmentDelivery(a)).len(), 1);
}

/// L5, L4 (L5.2): an Expire command repeated for the same obligation records no second ending.
#[test]
fn repeated_expire_command_ends_the_obligation_once() {
    let mut f = fixture();
    let a = assign(&mut f);
    let due = take(&mut f.w, f.bob, a);
    let id = ObligationId::AssignmentDelivery(a);
    f.w.advance(Micros::from_secs(61));
    let first = f.w.exec(Principal::System, Action::Expire { obligation: id, due_at: due }, None);
    match first.outcome {
        Ok(r) => assert_eq!(r.result, ActionResult::Expired { ended: vec![id] }),
        Err(r) => panic!("first expiry rejected: {r}"),
    }
    let after_first = asg(&f.w, a);
    let second = f.w.exec(Principal::System, Action::Expire { obligation: id, due_at: due }, None);
    assert!(second.facts.is_empty(), "a repeated expiry recorded facts: {:?}", second.facts);
    // L2: a repeated expiry is not a silent success; it is refused as having no effect.
    assert_eq!(second.outcome.map_err(|r| r.code), Err(Code::NoEffect));
    assert_eq!(asg(&f.w, a), after_first);
    assert_eq!(deadline_facts(&f.w, id), vec![ExpiryResult::TimedOut]);
}

/// L4 (L4.3): an Expire proposed before the due time ends nothing.
#[test]
fn expire_before_the_due_time_ends_nothing() {
    let mut f = fixture();
    let a = assign(&mut f);
    let due = take(&mut f.w, f.bob, a);
    let id = ObligationId::AssignmentDelivery(a);
    let early = f.w.exec(Principal::System, Action::Expire { obligation: id, due_at: due }, None);
    assert!(early.facts.is_empty());
    assert_eq!(early.outcome.map_err(|r| r.code), Err(Code::NoEffect));
    assert!(matches!(asg(&f.w, a).state, AssignmentState::Taken { delivery_due, .. } if delivery_due == due));
    assert_eq!(turn_ids(&f.w, f.bob), vec![id]);
    deliver(&mut f.w, f.bob, a);
}

/// L5 (L5.2, L5.3): a stale expiry of the delivery obligation after delivery ends nothing.
#[test]
fn stale_delivery_expiry_after_delivery_ends_nothing() {
    let mut f = fixture();
    let a = assign(&mut f);
    let due = take(&mut f.w, f.bob, a);
    let jdue = deliver(&mut f.w, f.bob, a);
    f.w.advance(DELIVERY);
    assert!(f.w.now < jdue);
    let stale = f.w.exec(
        Principal::System,
        Action::Expire { obligation: ObligationId::AssignmentDelivery(a), due_at: due },
        None,
    );
    assert!(stale.facts.is_empty());
    assert!(matches!(asg(&f.w, a).state, AssignmentState::Delivered { judgment_due, .. } if judgment_due == jdue));
    assert!(deadline_facts(&f.w, ObligationId::AssignmentDelivery(a)).is_empty());
    assert_eq!(turn_ids(&f.w, f.alice), vec![ObligationId::AssignmentJudgment(a)]);
}

// ------------------------------------------------------------------------------------------------
// Membership end and closing (§6.2, §6.5)

/// §6.2 (§6.2.9): when the addressee leaves, its taken and untaken assignments are voided in the same fact.
#[test]
fn addressee_leaving_voids_its_taken_and_untaken_assignments() {
    let mut f = fixture();
    let taken = assign(&mut f);
    let untaken = assign(&mut f);
    take(&mut f.w, f.bob, taken);
    let key = f.w.fresh_key();
    let applied = f.w.exec(Principal::Agent(f.bob), Action::Leave { thread: f.thread }, Some(key));
    assert!(applied.outcome.is_ok());
    assert_eq!(applied.facts.len(), 1, "leaving and its effects are one fact: {:?}", applied.facts);
    assert_eq!(outcome(&f.w, taken), Some(AssignmentOutcome::Voided));
    assert_eq!(outcome(&f.w, untaken), Some(AssignmentOutcome::Voided));
    assert!(turn_ids(&f.w, f.bob).is_empty());
    assert!(f.w.opportunity_ids(f.bob).is_empty());
    assert!(read::due_obligations(&f.w.state, None, usize::MAX).expect("due").is_empty());
}

/// §6.2 (§6.2.9): a taker removed by a governor has its undelivered assignment voided.
#[test]
fn removed_taker_has_its_assignment_voided() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    f.w.ok(f.gov, Action::Remove { thread: f.thread, member: f.bob });
    assert_eq!(outcome(&f.w, a), Some(AssignmentOutcome::Voided));
    assert!(turn_ids(&f.w, f.bob).is_empty());
}

/// §6.2 (§6.2.9): when the creator leaves before delivery, its open and taken assignments are voided.
#[test]
fn creator_leaving_before_delivery_voids_its_assignments() {
    let mut f = fixture();
    let open = assign(&mut f);
    let taken = assign(&mut f);
    take(&mut f.w, f.bob, taken);
    f.w.ok(f.alice, Action::Leave { thread: f.thread });
    assert_eq!(outcome(&f.w, open), Some(AssignmentOutcome::Voided));
    assert_eq!(outcome(&f.w, taken), Some(AssignmentOutcome::Voided));
    assert!(turn_ids(&f.w, f.bob).is_empty());
    assert!(f.w.opportunity_ids(f.bob).is_empty());
    let r = f.w.err(f.bob, Action::DeliverAssignment { assignment: taken, output: Content::from("orphan") });
    assert_eq!(r.code, Code::InvalidState);
}

/// §6.2 (§6.2.10, §6.4.9): a creator leaving after delivery forfeits judgment; it settles undecided at the deadline.
#[test]
fn creator_leaving_after_delivery_forfeits_judgment() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    let jdue = deliver(&mut f.w, f.bob, a);
    f.w.ok(f.alice, Action::Leave { thread: f.thread });
    let rec = asg(&f.w, a);
    assert!(rec.judge_forfeited);
    assert!(matches!(rec.state, AssignmentState::Delivered { judgment_due, .. } if judgment_due == jdue));
    assert!(turn_ids(&f.w, f.alice).is_empty());
    assert!(turn_ids(&f.w, f.bob).is_empty());
    // Not yet due: nothing ends early.
    f.w.advance(Micros(JUDGMENT.0 / 2));
    assert!(f.w.fire_due_timers().is_empty());
    f.w.advance(JUDGMENT);
    assert_eq!(f.w.fire_due_timers(), vec![ObligationId::AssignmentJudgment(a)]);
    assert_eq!(outcome(&f.w, a), Some(AssignmentOutcome::Undecided));
    assert_eq!(deadline_facts(&f.w, ObligationId::AssignmentJudgment(a)), vec![ExpiryResult::Undecided]);
}

/// §6.2 (§6.2.11): a creator who rejoins does not regain the forfeited right to judge.
#[test]
fn rejoined_creator_cannot_judge_a_forfeited_assignment() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    deliver(&mut f.w, f.bob, a);
    f.w.ok(f.alice, Action::Leave { thread: f.thread });
    let (grant, secret) = f.w.new_grant(Role::Speaker);
    f.w.ok(f.gov, Action::IssueGrant { thread: f.thread, grant });
    f.w.ok(f.alice, Action::Join { grant_hash: hash_secret(&secret) });
    assert_eq!(f.w.err(f.alice, Action::AdoptAssignment { assignment: a }).code, Code::JudgmentForfeited);
    let r = f.w.err(f.alice, Action::RejectAssignment { assignment: a, reason: Content::from("no") });
    assert_eq!(r.code, Code::JudgmentForfeited);
    assert!(turn_ids(&f.w, f.alice).is_empty());
    assert!(matches!(asg(&f.w, a).state, AssignmentState::Delivered { .. }));
    f.w.advance(JUDGMENT);
    f.w.fire_due_timers();
    assert_eq!(outcome(&f.w, a), Some(AssignmentOutcome::Undecided));
}

/// §4, §6.2 (§4.4, §6.2.9): deactivating the taker voids its undelivered assignment.
#[test]
fn deactivated_taker_has_its_assignment_voided() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    let key = f.w.fresh_key();
    assert!(f.w.exec(Principal::Operator, Action::DeactivateAgent { agent: f.bob }, Some(key)).outcome.is_ok());
    assert_eq!(outcome(&f.w, a), Some(AssignmentOutcome::Voided));
    assert!(turn_ids(&f.w, f.bob).is_empty());
}

/// §6.5 (§6.5.4, §6.5.5): closing voids undelivered assignments; delivered ones remain judgeable.
#[test]
fn closing_voids_undelivered_and_keeps_delivered_judgeable() {
    let mut f = fixture();
    let open = assign(&mut f);
    let taken = assign(&mut f);
    let delivered = assign(&mut f);
    take(&mut f.w, f.bob, taken);
    take(&mut f.w, f.bob, delivered);
    let jdue = deliver(&mut f.w, f.bob, delivered);
    f.w.ok(f.gov, Action::CloseThread { thread: f.thread });
    assert_eq!(outcome(&f.w, open), Some(AssignmentOutcome::Voided));
    assert_eq!(outcome(&f.w, taken), Some(AssignmentOutcome::Voided));
    assert!(
        matches!(asg(&f.w, delivered).state, AssignmentState::Delivered { judgment_due, .. } if judgment_due == jdue)
    );
    assert!(turn_ids(&f.w, f.bob).is_empty());
    assert_eq!(turn_ids(&f.w, f.alice), vec![ObligationId::AssignmentJudgment(delivered)]);
    f.w.ok(f.alice, Action::AdoptAssignment { assignment: delivered });
    assert_eq!(outcome(&f.w, delivered), Some(AssignmentOutcome::Adopted));
}

/// §6.5 (§6.5.5, §6.4.9): in a closed thread the delivered assignment still settles undecided at its deadline.
#[test]
fn closed_thread_delivered_assignment_settles_undecided_at_its_deadline() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    deliver(&mut f.w, f.bob, a);
    f.w.ok(f.gov, Action::CloseThread { thread: f.thread });
    f.w.advance(JUDGMENT);
    assert_eq!(f.w.fire_due_timers(), vec![ObligationId::AssignmentJudgment(a)]);
    assert_eq!(outcome(&f.w, a), Some(AssignmentOutcome::Undecided));
    assert!(turn_ids(&f.w, f.alice).is_empty());
}

// ------------------------------------------------------------------------------------------------
// Redo and capacity

/// §6.4 (§6.4.7, §6.4.12): redoing work is a new assignment replying to the old entry; the old one stays ended.
#[test]
fn redo_is_a_new_assignment_replying_to_the_old_entry() {
    let mut f = fixture();
    let a = assign(&mut f);
    take(&mut f.w, f.bob, a);
    deliver(&mut f.w, f.bob, a);
    f.w.ok(f.alice, Action::RejectAssignment { assignment: a, reason: Content::from("redo with three lines") });
    let rejected = asg(&f.w, a);
    let (entry, b) = match post_asg(
        &mut f.w,
        f.alice,
        f.thread,
        new_asg(f.bob, Some(DELIVERY), Some(JUDGMENT)),
        Some(rejected.entry),
    ) {
        Ok(ActionResult::Posted { entry, assignment: Some(b), .. }) => (entry, b),
        other => panic!("unexpected {other:?}"),
    };
    assert_ne!(a, b);
    let view = read::read_entry(&f.w.state, f.bob, f.thread, entry).expect("entry");
    assert_eq!(view.entry.reply_to, Some(rejected.entry));
    assert_eq!(view.entry.assignment, Some(b));
    assert_eq!(asg(&f.w, b).state, AssignmentState::Open);
    assert_eq!(asg(&f.w, a), rejected);
    take(&mut f.w, f.bob, b);
    deliver(&mut f.w, f.bob, b);
    f.w.ok(f.alice, Action::AdoptAssignment { assignment: b });
    assert_eq!(outcome(&f.w, b), Some(AssignmentOutcome::Adopted));
}

/// L4 (L4.5, L4.6): past max_open_assignments_per_thread creation is LIMIT_EXCEEDED with no effect.
#[test]
fn open_assignment_capacity_is_enforced() {
    let mut f = fixture_with(Limits { max_open_assignments_per_thread: 2, ..Limits::default() });
    let a = assign(&mut f);
    let _b = assign(&mut f);
    let before = last_entry(&f.w, f.thread);
    let r = post_asg(&mut f.w, f.alice, f.thread, new_asg(f.bob, None, None), None).expect_err("over capacity");
    assert_eq!(r.code, Code::LimitExceeded);
    assert_eq!(last_entry(&f.w, f.thread), before);
    assert_eq!(assignments_created(&f.w), 2);
    assert_eq!(f.w.opportunity_ids(f.bob).len(), 2);
    // A delivered assignment no longer counts as open: capacity returns.
    take(&mut f.w, f.bob, a);
    deliver(&mut f.w, f.bob, a);
    let c = assign(&mut f);
    assert_eq!(asg(&f.w, c).state, AssignmentState::Open);
}
