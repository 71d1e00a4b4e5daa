//! §6.4 Assignments (and the assignment rules of §6.2).
//!
//! The cast of most cases: `gov` governs the thread and creates assignments (or `alice`, a
//! speaker, does when the creator must be able to leave), `bob` (speaker) is addressed, `carol` is
//! another member. Entries carrying assignments ask nobody, so no response obligation blurs the
//! turns under test: every turn asserted here is the whole turn.

use kungfu_client::{Code, Error, pb};
use kungfu_system_tests::conformance::*;
use kungfu_system_tests::{cases, outcome};
use std::time::Duration;

cases! {
    a_speaker_creates_an_assignment_together_with_its_entry ["§6.4.1"],
    an_observer_cannot_create_an_assignment_and_nothing_is_posted ["§6.4.1", "§6.2.6"],
    the_addressee_is_one_member_who_may_speak_possibly_the_creator ["§6.4.2"],
    criteria_structure_and_windows_are_fixed_with_defaults_for_unstated_windows ["§6.4.3"],
    no_deadline_runs_before_taking_delivery_runs_from_taking_judgment_from_delivery ["§6.4.4"],
    an_untaken_assignment_binds_nobody_and_ends_by_being_taken_or_voided ["§6.4.5"],
    the_addressee_takes_and_delivers_and_the_creator_judges ["§6.4.6"],
    the_taker_drops_and_the_creator_voids_only_before_delivery ["§6.4.6"],
    racing_takes_of_one_assignment_have_exactly_one_winner ["§6.4.8"],
    a_delivery_cannot_be_replaced_even_by_a_racing_second_delivery ["§6.4.7", "§6.4.8"],
    redoing_work_is_a_new_assignment_replying_to_the_old_entry ["§6.4.7"],
    assignment_content_is_fixed_at_creation_and_changed_by_void_and_recreate ["§6.4.12"],
    a_taken_assignment_left_alone_times_out ["§6.4.10"],
    a_delivery_racing_its_deadline_has_exactly_one_outcome ["§6.4.10", "§6.4.8"],
    an_unjudged_delivery_settles_undecided_and_is_not_held_against_the_taker ["§6.4.9"],
    the_judgment_deadline_wins_over_a_late_or_racing_judgment ["§6.4.11", "§6.4.9"],
    every_terminal_state_is_irreversible ["§6.4.13"],
    an_addressee_demoted_to_observer_still_takes_and_delivers ["§6.2.5", "§6.2.6"],
    a_creator_demoted_to_observer_still_judges_and_voids_but_cannot_create ["§6.2.5", "§6.2.6"],
    assignment_actions_need_membership_not_the_right_to_speak ["§6.2.5"],
    when_the_taker_leaves_or_is_removed_its_undelivered_assignments_are_voided_in_the_same_fact ["§6.2.9"],
    when_the_creator_leaves_undelivered_are_voided_and_delivered_are_forfeited ["§6.2.9", "§6.2.10", "§6.2.11"],
}

use pb::AssignmentOutcome as Out;

const OUTPUT: &str = "the output";

// ---------------------------------------------------------------------------------------------
// Private helpers.

/// A new assignment to `to` with criteria, an output structure and the given windows.
fn spec(to: &Agent, criteria: &str, delivery: Option<u64>, judgment: Option<u64>) -> pb::NewAssignment {
    let mut a = new_assignment(&to.id, criteria);
    a.output_structure = text("three lines");
    a.delivery_window_micros = delivery;
    a.judgment_window_micros = judgment;
    a
}

/// The post creating `a`, asking nobody, optionally replying to `reply_to`.
fn post_of(thread: &str, a: pb::NewAssignment, reply_to: Option<u64>) -> Post {
    let p = Post::text(thread, "please do this").ask(Vec::<String>::new()).assignment(a);
    match reply_to {
        Some(r) => p.reply_to(r),
        None => p,
    }
}

/// Creates an assignment (must succeed); returns the Posted receipt.
async fn create(by: &Agent, thread: &str, a: pb::NewAssignment, reply_to: Option<u64>) -> pb::Posted {
    by.post(post_of(thread, a, reply_to)).await
}

async fn try_create(by: &Agent, thread: &str, a: pb::NewAssignment) -> Result<pb::Posted, Error> {
    let w = by.c.post(post_of(thread, a, None), None).await?;
    Ok(outcome!(w.value.receipt, Posted))
}

async fn try_take(who: &Agent, id: &str, key: Option<String>) -> Result<pb::AssignmentTaken, Error> {
    let w =
        who.c.take_assignment(pb::TakeAssignmentRequest { assignment: id.into(), ..Default::default() }, key).await?;
    Ok(outcome!(w.value.receipt, AssignmentTaken))
}

async fn try_deliver(who: &Agent, id: &str, output: &str) -> Result<pb::AssignmentDelivered, Error> {
    let w = who
        .c
        .deliver_assignment(
            pb::DeliverAssignmentRequest { assignment: id.into(), output: text(output), ..Default::default() },
            None,
        )
        .await?;
    Ok(outcome!(w.value.receipt, AssignmentDelivered))
}

async fn try_adopt(who: &Agent, id: &str) -> Result<(), Error> {
    let w = who
        .c
        .adopt_assignment(pb::AdoptAssignmentRequest { assignment: id.into(), ..Default::default() }, None)
        .await?;
    outcome!(w.value.receipt, AssignmentAdopted);
    Ok(())
}

async fn try_reject(who: &Agent, id: &str, reason: &str) -> Result<(), Error> {
    let w = who
        .c
        .reject_assignment(
            pb::RejectAssignmentRequest { assignment: id.into(), reason: text(reason), ..Default::default() },
            None,
        )
        .await?;
    outcome!(w.value.receipt, AssignmentRejected);
    Ok(())
}

async fn try_drop(who: &Agent, id: &str) -> Result<(), Error> {
    let w =
        who.c.drop_assignment(pb::DropAssignmentRequest { assignment: id.into(), ..Default::default() }, None).await?;
    outcome!(w.value.receipt, AssignmentDropped);
    Ok(())
}

async fn try_void(who: &Agent, id: &str) -> Result<(), Error> {
    let w =
        who.c.void_assignment(pb::VoidAssignmentRequest { assignment: id.into(), ..Default::default() }, None).await?;
    outcome!(w.value.receipt, AssignmentVoided);
    Ok(())
}

async fn change_role(gov: &Agent, thread: &str, member: &Agent, role: pb::Role) {
    gov.c
        .change_role(
            pb::ChangeRoleRequest {
                thread: thread.into(),
                member: member.id.clone(),
                role: role as i32,
                ..Default::default()
            },
            None,
        )
        .await
        .expect("change role");
}

/// Leaves the thread (must succeed); returns the instant the leaving took effect.
async fn leave(who: &Agent, thread: &str) -> i64 {
    let w = who.c.leave(pb::LeaveRequest { thread: thread.into(), ..Default::default() }, None).await.expect("leave");
    let at = w.value.receipt.as_ref().expect("receipt").at_unix_micros;
    outcome!(w.value.receipt, Left);
    at
}

/// Issues a new speaker grant (a governor) and joins `who` through it.
async fn rejoin(gov: &Agent, thread: &str, who: &Agent) {
    let w = gov
        .c
        .issue_grant(
            pb::IssueGrantRequest { thread: thread.into(), role: pb::Role::Speaker as i32, ..Default::default() },
            None,
        )
        .await
        .expect("issue grant");
    who.join(&w.value.grant_secret).await;
}

async fn entries(reader: &Agent, thread: &str) -> Vec<pb::Entry> {
    reader.c.timeline_all(thread, 100).await.expect("read the timeline")
}

fn delivery_of(id: &str) -> Option<pb::ObligationRef> {
    Some(pb::ObligationRef { kind: Some(pb::obligation_ref::Kind::AssignmentDelivery(id.into())) })
}

fn judgment_of(id: &str) -> Option<pb::ObligationRef> {
    Some(pb::ObligationRef { kind: Some(pb::obligation_ref::Kind::AssignmentJudgment(id.into())) })
}

/// The obligations of a turn, for comparisons.
async fn turn_of(who: &Agent) -> Vec<Option<pb::ObligationRef>> {
    who.turn().await.into_iter().map(|i| i.obligation).collect()
}

/// The assignments among `who`'s opportunities.
async fn assignment_opportunities(who: &Agent) -> Vec<String> {
    who.opportunities()
        .await
        .into_iter()
        .filter_map(|o| match o.kind {
            Some(pb::opportunity::Kind::Assignment(a)) => Some(a),
            _ => None,
        })
        .collect()
}

fn is_open(a: &pb::Assignment) -> bool {
    matches!(a.state, Some(pb::assignment::State::Open(_)))
}

fn taken(a: &pb::Assignment) -> pb::AssignmentTakenState {
    match &a.state {
        Some(pb::assignment::State::Taken(t)) => t.clone(),
        other => panic!("expected a taken assignment, got {other:?}"),
    }
}

fn delivered(a: &pb::Assignment) -> pb::AssignmentDeliveredState {
    match &a.state {
        Some(pb::assignment::State::Delivered(d)) => d.clone(),
        other => panic!("expected a delivered assignment, got {other:?}"),
    }
}

fn ended(a: &pb::Assignment) -> pb::AssignmentEndedState {
    match &a.state {
        Some(pb::assignment::State::Ended(e)) => e.clone(),
        other => panic!("expected an ended assignment, got {other:?}"),
    }
}

fn body(c: &Option<pb::Content>) -> Option<&[u8]> {
    c.as_ref().map(|c| c.body.as_slice())
}

/// Waits past `due` until the assignment has ended; returns it.
async fn ended_after(reader: &Agent, id: &str, due: i64) -> pb::Assignment {
    sleep_past(due, Duration::from_millis(100)).await;
    eventually(&format!("{id} to end after its deadline"), || async move {
        let a = reader.assignment(id).await;
        assignment_outcome(&a).map(|_| a)
    })
    .await
}

/// Waits past `due` until the assignment has ended; asserts it ended as `want` and returns it.
async fn ends_as(reader: &Agent, id: &str, due: i64, want: Out) -> pb::Assignment {
    let a = ended_after(reader, id, due).await;
    assert_eq!(assignment_outcome(&a), Some(want), "{id} ended otherwise: {a:?}");
    a
}

/// `who`'s turn, when the read finished before `due`; None when it finished at or after it (a
/// stalled cluster: the obligation may have ended by then, so the read proves nothing).
async fn turn_before(who: &Agent, due: i64) -> Option<Vec<pb::TurnItem>> {
    let turn = who.turn().await;
    (now_micros() < due).then_some(turn)
}

/// What §6.4 fixes at creation: everything but the lifecycle state.
fn fixed(a: &pb::Assignment) -> pb::Assignment {
    pb::Assignment { state: None, judge_forfeited: false, ..a.clone() }
}

/// §6.4 (§6.4.13): every assignment action on the ended assignment `id`, by the party it belongs
/// to, is refused as INVALID_STATE, by the other party refused too; nothing changes.
/// The right party is refused INVALID_STATE, except for the actions named in `deadline_won`, exits
/// of an obligation the deadline ended, which are refused DEADLINE_PASSED (L4: the same code whether
/// or not the expiry was applied before them).
async fn every_action_is_refused(creator: &Agent, taker: &Agent, id: &str, deadline_won: &[&str]) {
    let before = creator.assignment(id).await;
    assert!(assignment_outcome(&before).is_some(), "not ended: {before:?}");
    let by_right_party: Vec<(&str, Result<(), Error>)> = vec![
        ("take", try_take(taker, id, None).await.map(|_| ())),
        ("deliver", try_deliver(taker, id, "again").await.map(|_| ())),
        ("drop", try_drop(taker, id).await),
        ("adopt", try_adopt(creator, id).await),
        ("reject", try_reject(creator, id, "no").await),
        ("void", try_void(creator, id).await),
    ];
    for (what, r) in by_right_party {
        let rej = rejection(r);
        let want = if deadline_won.contains(&what) { Code::DeadlinePassed } else { Code::InvalidState };
        assert_eq!(rej.code, want, "{what} on an ended assignment: {rej:?}");
        assert!(!rej.message.is_empty(), "{what}: a rejection states its reason");
    }
    let by_wrong_party: Vec<(&str, Result<(), Error>)> = vec![
        ("take", try_take(creator, id, None).await.map(|_| ())),
        ("deliver", try_deliver(creator, id, "again").await.map(|_| ())),
        ("drop", try_drop(creator, id).await),
        ("adopt", try_adopt(taker, id).await),
        ("reject", try_reject(taker, id, "no").await),
        ("void", try_void(taker, id).await),
    ];
    for (what, r) in by_wrong_party {
        let rej = rejection(r);
        assert!(!rej.message.is_empty(), "{what} by the other party: a rejection states its reason");
    }
    assert_eq!(creator.assignment(id).await, before, "an action changed an ended assignment");
    assert!(turn_of(creator).await.is_empty());
    assert!(turn_of(taker).await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Creation (§6.4.1–§6.4.3)

/// §6.4 rule: a member who may speak creates an assignment, together with an entry that names it.
async fn a_speaker_creates_an_assignment_together_with_its_entry(cx: Ctx) {
    let (gov, alice, bob) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&gov, &[&alice, &bob]).await;
    let before = entries(&bob, &t.id).await.len();
    let p = create(&alice, &t.id, spec(&bob, "a haiku about rust", None, None), None).await;
    let id = p.assignment.clone().expect("the receipt names the assignment");
    // One entry, carrying the assignment, in the same action.
    let after = entries(&bob, &t.id).await;
    assert_eq!(after.len(), before + 1);
    let entry = after.last().expect("the entry");
    assert_eq!((entry.seq, entry.author.as_str()), (p.entry, alice.id.as_str()));
    assert_eq!(entry.assignment.as_deref(), Some(id.as_str()));
    let view = bob.c.get_entry(pb::GetEntryRequest { thread: t.id.clone(), entry: p.entry }).await.expect("entry");
    assert_eq!(view.entry.expect("entry").assignment.as_deref(), Some(id.as_str()));
    let a = bob.assignment(&id).await;
    assert_eq!(
        (a.thread.as_str(), a.entry, a.creator.as_str(), a.addressee.as_str()),
        (t.id.as_str(), p.entry, alice.id.as_str(), bob.id.as_str())
    );
    assert_eq!(body(&a.criteria), Some(&b"a haiku about rust"[..]));
    assert!(is_open(&a), "a new assignment is open: {a:?}");
    assert!(!a.judge_forfeited);
}

/// §6.4 rule: only a member who may speak creates an assignment; §6.2: the speaking requirement
/// applies at creation. An observer's attempt is CANNOT_SPEAK and posts nothing (L2).
async fn an_observer_cannot_create_an_assignment_and_nothing_is_posted(cx: Ctx) {
    let (gov, bob, carol) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&gov, &[&bob, &carol]).await;
    change_role(&gov, &t.id, &carol, pb::Role::Observer).await;
    let before = entries(&gov, &t.id).await;
    refused(try_create(&carol, &t.id, spec(&bob, "observer's work", None, None)).await, Code::CannotSpeak);
    refused(try_create(&carol, &t.id, spec(&carol, "observer's own work", None, None)).await, Code::CannotSpeak);
    assert_eq!(entries(&gov, &t.id).await, before, "a refused creation posted an entry");
    assert!(assignment_opportunities(&bob).await.is_empty());
    assert!(assignment_opportunities(&carol).await.is_empty());
    // Promoted back to speaker, the same member creates.
    change_role(&gov, &t.id, &carol, pb::Role::Speaker).await;
    let p = create(&carol, &t.id, spec(&bob, "speaker's work", None, None), None).await;
    assert_eq!(assignment_opportunities(&bob).await, vec![p.assignment.expect("assignment")]);
}

/// §6.4 rule: an assignment is addressed to exactly one member who may speak, possibly the
/// creator. An observer, an outsider and a former member are INVALID_TARGET naming the addressee;
/// nothing is posted.
async fn the_addressee_is_one_member_who_may_speak_possibly_the_creator(cx: Ctx) {
    let (gov, alice, bob, carol, outsider) =
        (cx.agent().await, cx.agent().await, cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&gov, &[&alice, &bob, &carol]).await;
    change_role(&gov, &t.id, &carol, pb::Role::Observer).await;
    leave(&bob, &t.id).await;
    let before = entries(&gov, &t.id).await;
    for (who, what) in [(&carol, "an observer"), (&outsider, "a non-member"), (&bob, "a former member")] {
        let rej = refused(try_create(&alice, &t.id, spec(who, "work", None, None)).await, Code::InvalidTarget);
        assert_eq!(rej.field.as_deref(), Some("assignment.addressee"), "{what}: {rej:?}");
        assert!(assignment_opportunities(who).await.is_empty(), "{what} got an opportunity");
    }
    assert_eq!(entries(&gov, &t.id).await, before, "a refused creation posted an entry");
    // The creator may address itself, and then runs the whole cycle alone.
    let id = create(&alice, &t.id, spec(&alice, "my own work", None, None), None).await.assignment.expect("id");
    assert_eq!(alice.assignment(&id).await.addressee, alice.id);
    assert_eq!(assignment_opportunities(&alice).await, vec![id.clone()]);
    alice.take(&id).await;
    assert_eq!(turn_of(&alice).await, vec![delivery_of(&id)]);
    alice.deliver(&id, OUTPUT).await;
    assert_eq!(turn_of(&alice).await, vec![judgment_of(&id)]);
    try_adopt(&alice, &id).await.expect("the creator adopts its own delivery");
    assert_eq!(assignment_outcome(&alice.assignment(&id).await), Some(Out::Adopted));
    assert!(turn_of(&alice).await.is_empty());
}

/// §6.4 rule: an assignment fixes acceptance criteria, an optional output structure, an optional
/// delivery deadline and a judgment deadline; the implementation MAY supply defaults. Windows
/// outside the server's bounds are INVALID_ARGUMENT and create nothing.
async fn criteria_structure_and_windows_are_fixed_with_defaults_for_unstated_windows(cx: Ctx) {
    let (gov, bob) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&gov, &[&bob]).await;
    let stated = create(&gov, &t.id, spec(&bob, "stated", Some(5 * SECOND), Some(7 * SECOND)), None).await;
    let a = bob.assignment(stated.assignment.as_deref().expect("id")).await;
    assert_eq!(body(&a.criteria), Some(&b"stated"[..]));
    assert_eq!(body(&a.output_structure), Some(&b"three lines"[..]));
    assert_eq!((a.delivery_window_micros, a.judgment_window_micros), (5 * SECOND, 7 * SECOND));
    // Unstated: no output structure, and the server's default windows, which are then what runs.
    let bare = create(&gov, &t.id, new_assignment(&bob.id, "bare"), None).await;
    let id = bare.assignment.expect("id");
    let a = bob.assignment(&id).await;
    assert!(body(&a.output_structure).is_none_or(|b| b.is_empty()), "no structure was stated: {a:?}");
    assert!(a.delivery_window_micros >= SECOND && a.judgment_window_micros >= SECOND, "defaults supplied: {a:?}");
    let due = bob.take(&id).await.delivery_due_unix_micros;
    let t_state = taken(&bob.assignment(&id).await);
    assert_eq!(due, t_state.taken_at_unix_micros + a.delivery_window_micros as i64);
    assert_eq!(t_state.delivery_due_unix_micros, due);
    // Out of bounds (the shortest window is 1 s): refused, naming the field; nothing posted.
    let before = entries(&gov, &t.id).await;
    for (d, j, field) in
        [(Some(SECOND - 1), None, "assignment.delivery_window"), (None, Some(SECOND - 1), "assignment.judgment_window")]
    {
        let rej = refused(try_create(&gov, &t.id, spec(&bob, "too short", d, j)).await, Code::InvalidArgument);
        assert!(rej.field.as_deref().is_some_and(|f| f.starts_with(field)), "field {field}: {rej:?}");
    }
    assert_eq!(entries(&gov, &t.id).await, before);
    assert_eq!(assignment_opportunities(&bob).await, vec![stated.assignment.expect("id")]);
}

// ---------------------------------------------------------------------------------------------
// Deadlines run from taking and delivery; untaken binds nobody (§6.4.4, §6.4.5)

/// §6.4 rule: the delivery deadline runs from taking, the judgment deadline from accepted
/// delivery; before it is taken an assignment has no running deadline.
async fn no_deadline_runs_before_taking_delivery_runs_from_taking_judgment_from_delivery(cx: Ctx) {
    let (gov, bob) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&gov, &[&bob]).await;
    let short =
        create(&gov, &t.id, spec(&bob, "short", Some(SECOND), Some(SECOND)), None).await.assignment.expect("id");
    let long = create(&gov, &t.id, spec(&bob, "long", Some(60 * SECOND), Some(60 * SECOND)), None)
        .await
        .assignment
        .expect("id");
    // Open: no due anywhere, and it stays open well past its delivery window.
    let created_at = bob.assignment(&short).await.created_at_unix_micros;
    sleep_past(created_at + 3 * SECOND as i64 / 2, Duration::ZERO).await;
    let a = bob.assignment(&short).await;
    assert!(is_open(&a), "an untaken assignment has no running deadline: {a:?}");
    assert!(turn_of(&bob).await.is_empty() && turn_of(&gov).await.is_empty());
    // Taking starts the delivery deadline: due = taken + window.
    let w = bob
        .c
        .take_assignment(pb::TakeAssignmentRequest { assignment: short.clone(), ..Default::default() }, None)
        .await
        .expect("take");
    let taken_at = w.value.receipt.as_ref().expect("receipt").at_unix_micros;
    let due = outcome!(w.value.receipt, AssignmentTaken).delivery_due_unix_micros;
    assert_eq!(due, taken_at + SECOND as i64, "the delivery deadline runs from taking");
    if let Some(turn) = turn_before(&bob, due).await {
        assert_eq!(turn.len(), 1, "{turn:?}");
        assert_eq!((turn[0].obligation.clone(), turn[0].due_at_unix_micros), (delivery_of(&short), Some(due)));
    }
    // Left alone, it ends at that deadline.
    let e = ended(&ends_as(&gov, &short, due, Out::TimedOut).await);
    assert!(e.ended_at_unix_micros >= due);
    // The long one: the taker's turn carries the delivery deadline, then delivery starts the
    // judgment deadline (due = delivered + window) on the creator's turn.
    let ldue = bob.take(&long).await.delivery_due_unix_micros;
    let st = taken(&bob.assignment(&long).await);
    assert_eq!((st.delivery_due_unix_micros, ldue), (st.taken_at_unix_micros + 60 * SECOND as i64, ldue));
    let turn = bob.turn().await;
    assert_eq!(turn.len(), 1, "{turn:?}");
    assert_eq!((turn[0].obligation.clone(), turn[0].due_at_unix_micros), (delivery_of(&long), Some(ldue)));
    assert_eq!(turn[0].kind, pb::ObligationKind::Delivery as i32);
    assert!(turn_of(&gov).await.is_empty(), "no judgment obligation before delivery");
    let jdue = bob.deliver(&long, OUTPUT).await.judgment_due_unix_micros;
    let d = delivered(&bob.assignment(&long).await);
    assert_eq!(d.judgment_due_unix_micros, jdue);
    assert_eq!(jdue, d.delivered_at_unix_micros + 60 * SECOND as i64);
    assert!(d.delivered_at_unix_micros < ldue);
    assert!(turn_of(&bob).await.is_empty(), "delivery ended the delivery obligation");
    let turn = gov.turn().await;
    assert_eq!(turn.len(), 1, "{turn:?}");
    assert_eq!((turn[0].obligation.clone(), turn[0].due_at_unix_micros), (judgment_of(&long), Some(jdue)));
    assert_eq!(turn[0].kind, pb::ObligationKind::Judgment as i32);
    try_adopt(&gov, &long).await.expect("adopt");
}

/// §6.4 rule: an untaken assignment creates no obligation and binds nobody; it is an opportunity
/// of its addressee only, and ends by being taken or voided.
async fn an_untaken_assignment_binds_nobody_and_ends_by_being_taken_or_voided(cx: Ctx) {
    let (gov, alice, bob, carol) = (cx.agent().await, cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&gov, &[&alice, &bob, &carol]).await;
    let a1 = create(&alice, &t.id, spec(&bob, "one", None, None), None).await.assignment.expect("id");
    let a2 = create(&alice, &t.id, spec(&bob, "two", None, None), None).await.assignment.expect("id");
    for who in [&gov, &alice, &bob, &carol] {
        assert!(turn_of(who).await.is_empty(), "{} holds an obligation for an untaken assignment", who.id);
    }
    let mut opps = assignment_opportunities(&bob).await;
    opps.sort();
    let mut want = vec![a1.clone(), a2.clone()];
    want.sort();
    assert_eq!(opps, want);
    let o = bob.opportunities().await;
    assert!(o.iter().all(|o| o.object == t.id), "the opportunity is in the thread: {o:?}");
    for who in [&gov, &alice, &carol] {
        assert!(assignment_opportunities(who).await.is_empty(), "{} is not the addressee", who.id);
    }
    // Ends by being taken: the opportunity goes, the obligation arises.
    bob.take(&a1).await;
    assert_eq!(assignment_opportunities(&bob).await, vec![a2.clone()]);
    assert_eq!(turn_of(&bob).await, vec![delivery_of(&a1)]);
    // Ends by being voided: the opportunity goes, and nothing arises.
    try_void(&alice, &a2).await.expect("void");
    assert!(assignment_opportunities(&bob).await.is_empty());
    assert_eq!(assignment_outcome(&bob.assignment(&a2).await), Some(Out::Voided));
    assert_eq!(turn_of(&bob).await, vec![delivery_of(&a1)]);
    refused(try_take(&bob, &a2, None).await, Code::InvalidState);
}

// ---------------------------------------------------------------------------------------------
// Who does what (§6.4.6)

/// §6.4 rule: the addressee takes, then delivers; the creator judges. Everyone else is refused by
/// name (NOT_ADDRESSEE, NOT_TAKER, NOT_CREATOR) and nothing changes; judging before delivery is
/// INVALID_STATE; a rejection carries a reason the taker reads.
async fn the_addressee_takes_and_delivers_and_the_creator_judges(cx: Ctx) {
    let (gov, alice, bob, carol) = (cx.agent().await, cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&gov, &[&alice, &bob, &carol]).await;
    let a1 = create(&alice, &t.id, spec(&bob, "one", None, None), None).await.assignment.expect("id");
    let a2 = create(&alice, &t.id, spec(&bob, "two", None, None), None).await.assignment.expect("id");
    let open = bob.assignment(&a1).await;
    for who in [&alice, &carol, &gov] {
        refused(try_take(who, &a1, None).await, Code::NotAddressee);
    }
    refused(try_deliver(&bob, &a1, "early").await, Code::InvalidState);
    refused(try_adopt(&alice, &a1).await, Code::InvalidState);
    assert_eq!(bob.assignment(&a1).await, open, "refused calls changed the open assignment");
    bob.take(&a1).await;
    let taken_a1 = bob.assignment(&a1).await;
    for who in [&alice, &carol, &gov] {
        refused(try_deliver(who, &a1, "not mine").await, Code::NotTaker);
    }
    refused(try_adopt(&alice, &a1).await, Code::InvalidState);
    refused(try_reject(&alice, &a1, "too slow").await, Code::InvalidState);
    assert_eq!(bob.assignment(&a1).await, taken_a1, "refused calls changed the taken assignment");
    bob.deliver(&a1, OUTPUT).await;
    let delivered_a1 = bob.assignment(&a1).await;
    for who in [&bob, &carol, &gov] {
        refused(try_adopt(who, &a1).await, Code::NotCreator);
        refused(try_reject(who, &a1, "no").await, Code::NotCreator);
    }
    let rej = refused(try_reject(&alice, &a1, "").await, Code::InvalidArgument);
    assert_eq!(rej.field.as_deref(), Some("reason"));
    assert_eq!(bob.assignment(&a1).await, delivered_a1, "refused judgments changed the delivery");
    assert_eq!(turn_of(&alice).await, vec![judgment_of(&a1)]);
    try_adopt(&alice, &a1).await.expect("the creator adopts");
    let e = ended(&bob.assignment(&a1).await);
    assert_eq!((e.outcome, body(&e.delivered)), (Out::Adopted as i32, Some(OUTPUT.as_bytes())));
    // Rejected, with a reason the taker reads.
    bob.take(&a2).await;
    bob.deliver(&a2, OUTPUT).await;
    try_reject(&alice, &a2, "four lines, not three").await.expect("the creator rejects");
    let e = ended(&bob.assignment(&a2).await);
    assert_eq!(e.outcome, Out::Rejected as i32);
    assert_eq!(body(&e.rejection_reason), Some(&b"four lines, not three"[..]));
    assert_eq!(body(&e.delivered), Some(OUTPUT.as_bytes()));
    for who in [&gov, &alice, &bob, &carol] {
        assert!(turn_of(who).await.is_empty());
    }
}

/// §6.4 rule: the addressee drops (after taking, before delivery) and the creator may void (before
/// delivery); nobody else, and neither after delivery.
async fn the_taker_drops_and_the_creator_voids_only_before_delivery(cx: Ctx) {
    let (gov, alice, bob) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&gov, &[&alice, &bob]).await;
    let mut ids = Vec::new();
    for n in 0..4 {
        ids.push(
            create(&alice, &t.id, spec(&bob, &format!("work {n}"), None, None), None).await.assignment.expect("id"),
        );
    }
    let (dropped, void_open, void_taken, done) = (&ids[0], &ids[1], &ids[2], &ids[3]);
    // Drop: only by the taker, only once taken.
    refused(try_drop(&bob, dropped).await, Code::InvalidState);
    bob.take(dropped).await;
    refused(try_drop(&alice, dropped).await, Code::NotTaker);
    refused(try_void(&bob, dropped).await, Code::NotCreator);
    assert_eq!(turn_of(&bob).await, vec![delivery_of(dropped)]);
    try_drop(&bob, dropped).await.expect("the taker drops");
    let e = ended(&bob.assignment(dropped).await);
    assert_eq!((e.outcome, e.delivered), (Out::Dropped as i32, None));
    assert!(turn_of(&bob).await.is_empty());
    // Void: by the creator, open or taken.
    try_void(&alice, void_open).await.expect("void open");
    bob.take(void_taken).await;
    try_void(&alice, void_taken).await.expect("void taken");
    for id in [void_open, void_taken] {
        assert_eq!(assignment_outcome(&bob.assignment(id).await), Some(Out::Voided));
    }
    assert!(turn_of(&bob).await.is_empty(), "voiding ended the taker's delivery obligation");
    // After delivery neither drop nor void applies; it awaits judgment.
    bob.take(done).await;
    bob.deliver(done, OUTPUT).await;
    let before = bob.assignment(done).await;
    refused(try_drop(&bob, done).await, Code::InvalidState);
    refused(try_void(&alice, done).await, Code::InvalidState);
    assert_eq!(bob.assignment(done).await, before);
    assert_eq!(turn_of(&alice).await, vec![judgment_of(done)]);
}

// ---------------------------------------------------------------------------------------------
// At most one taking, one delivery; no replacement (§6.4.7, §6.4.8)

/// §6.4 rule: an assignment has at most one taking. The addressee taking twice at once (two
/// idempotency keys) and another member taking at the same moment: exactly one take wins, the
/// other addressee attempt is INVALID_STATE and the other member's NOT_ADDRESSEE; one taking
/// exists (read back), with one delivery obligation.
async fn racing_takes_of_one_assignment_have_exactly_one_winner(cx: Ctx) {
    let (gov, bob, carol) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&gov, &[&bob, &carol]).await;
    let mut taken_ids = Vec::new();
    for round in 0..4 {
        let id =
            create(&gov, &t.id, spec(&bob, &format!("round {round}"), None, None), None).await.assignment.expect("id");
        let (k1, k2) = (unique("take-a"), unique("take-b"));
        let (r1, r2, r3) = tokio::join!(
            try_take(&bob, &id, Some(k1.clone())),
            try_take(&bob, &id, Some(k2.clone())),
            try_take(&carol, &id, None)
        );
        refused(r3, Code::NotAddressee);
        let (won, lost, won_key) = match (r1, r2) {
            (Ok(w), Err(l)) => (w, Err::<(), _>(l), k1),
            (Err(l), Ok(w)) => (w, Err(l), k2),
            (r1, r2) => panic!("round {round}: exactly one take must win: {r1:?} / {r2:?}"),
        };
        let rej = refused(lost, Code::InvalidState);
        assert!(rej.message.contains("tak"), "the refusal names why: {rej:?}");
        let a = bob.assignment(&id).await;
        let st = taken(&a);
        assert_eq!(st.delivery_due_unix_micros, won.delivery_due_unix_micros, "the read shows the winning taking");
        // The winner's request sent again replays the one taking.
        let again = bob
            .c
            .take_assignment(pb::TakeAssignmentRequest { assignment: id.clone(), ..Default::default() }, Some(won_key));
        let again = again.await.expect("resend the winning take");
        assert!(again.replayed);
        assert_eq!(outcome!(again.value.receipt, AssignmentTaken), won);
        // A later take with a new key is refused; still the same single taking.
        refused(try_take(&bob, &id, None).await, Code::InvalidState);
        assert_eq!(bob.assignment(&id).await, a);
        taken_ids.push(id);
    }
    let mut turn = turn_of(&bob).await;
    turn.sort_by_key(|o| format!("{o:?}"));
    let mut want: Vec<_> = taken_ids.iter().map(|id| delivery_of(id)).collect();
    want.sort_by_key(|o| format!("{o:?}"));
    assert_eq!(turn, want, "one delivery obligation per assignment");
    assert!(turn_of(&carol).await.is_empty());
}

/// §6.4 rule: a delivery cannot be replaced; an assignment has at most one delivery. Two
/// deliveries racing: exactly one is accepted, the other is INVALID_STATE, and the accepted output
/// stays through every later attempt and the judgment.
async fn a_delivery_cannot_be_replaced_even_by_a_racing_second_delivery(cx: Ctx) {
    let (gov, bob) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&gov, &[&bob]).await;
    let id = create(&gov, &t.id, spec(&bob, "work", None, None), None).await.assignment.expect("id");
    bob.take(&id).await;
    let (r1, r2) = tokio::join!(try_deliver(&bob, &id, "first output"), try_deliver(&bob, &id, "second output"));
    let (won, winner, lost) = match (r1, r2) {
        (Ok(w), Err(l)) => (w, "first output", l),
        (Err(l), Ok(w)) => (w, "second output", l),
        (r1, r2) => panic!("exactly one delivery must be accepted: {r1:?} / {r2:?}"),
    };
    refused(Err::<(), _>(lost), Code::InvalidState);
    let a = bob.assignment(&id).await;
    let d = delivered(&a);
    assert_eq!(body(&d.output), Some(winner.as_bytes()));
    assert_eq!(d.judgment_due_unix_micros, won.judgment_due_unix_micros);
    assert_eq!(turn_of(&gov).await, vec![judgment_of(&id)], "one delivery, one judgment obligation");
    // A later replacement attempt is refused and changes nothing.
    refused(try_deliver(&bob, &id, "better output").await, Code::InvalidState);
    assert_eq!(bob.assignment(&id).await, a);
    try_adopt(&gov, &id).await.expect("adopt");
    refused(try_deliver(&bob, &id, "after adoption").await, Code::InvalidState);
    let e = ended(&bob.assignment(&id).await);
    assert_eq!(body(&e.delivered), Some(winner.as_bytes()), "the one delivery is what was adopted");
}

/// §6.4 rule: redoing work means a new assignment that references the old one (an entry replying
/// to the old assignment's entry); the old assignment stays as it ended.
async fn redoing_work_is_a_new_assignment_replying_to_the_old_entry(cx: Ctx) {
    let (gov, bob) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&gov, &[&bob]).await;
    let old = create(&gov, &t.id, spec(&bob, "a haiku", None, None), None).await;
    let old_id = old.assignment.expect("id");
    bob.take(&old_id).await;
    bob.deliver(&old_id, "four lines").await;
    try_reject(&gov, &old_id, "three lines, please").await.expect("reject");
    let rejected = bob.assignment(&old_id).await;
    let redo = create(&gov, &t.id, spec(&bob, "a haiku, three lines", None, None), Some(old.entry)).await;
    let new_id = redo.assignment.expect("id");
    assert_ne!(new_id, old_id);
    let view = bob.c.get_entry(pb::GetEntryRequest { thread: t.id.clone(), entry: redo.entry }).await.expect("entry");
    let entry = view.entry.expect("entry");
    assert_eq!((entry.reply_to, entry.assignment.as_deref()), (Some(old.entry), Some(new_id.as_str())));
    assert!(is_open(&bob.assignment(&new_id).await));
    bob.take(&new_id).await;
    bob.deliver(&new_id, "three lines").await;
    try_adopt(&gov, &new_id).await.expect("adopt the redo");
    assert_eq!(assignment_outcome(&bob.assignment(&new_id).await), Some(Out::Adopted));
    assert_eq!(bob.assignment(&old_id).await, rejected, "the old assignment is untouched by the redo");
}

/// §6.4 rule: the content of an assignment is fixed at creation. There is no call that updates an
/// assignment; through take, deliver and judgment the criteria, structure, windows, parties and
/// entry read back unchanged. To change it, void it and create another that references it.
async fn assignment_content_is_fixed_at_creation_and_changed_by_void_and_recreate(cx: Ctx) {
    let (gov, bob) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&gov, &[&bob]).await;
    let p = create(&gov, &t.id, spec(&bob, "criteria v1", Some(30 * SECOND), Some(40 * SECOND)), None).await;
    let id = p.assignment.expect("id");
    let created = fixed(&bob.assignment(&id).await);
    assert_eq!(body(&created.criteria), Some(&b"criteria v1"[..]));
    let entry = bob.c.get_entry(pb::GetEntryRequest { thread: t.id.clone(), entry: p.entry }).await.expect("entry");
    bob.take(&id).await;
    assert_eq!(fixed(&bob.assignment(&id).await), created, "taking changed what creation fixed");
    bob.deliver(&id, OUTPUT).await;
    assert_eq!(fixed(&bob.assignment(&id).await), created, "delivering changed what creation fixed");
    try_reject(&gov, &id, "not it").await.expect("reject");
    assert_eq!(fixed(&gov.assignment(&id).await), created, "judging changed what creation fixed");
    let entry_after =
        bob.c.get_entry(pb::GetEntryRequest { thread: t.id.clone(), entry: p.entry }).await.expect("entry");
    assert_eq!(entry_after, entry, "the creating entry is unchanged");
    // Changing the criteria of an untaken one: void it and create another replying to it.
    let p1 = create(&gov, &t.id, spec(&bob, "criteria v1", None, None), None).await;
    let first = p1.assignment.expect("id");
    let first_fixed = fixed(&bob.assignment(&first).await);
    try_void(&gov, &first).await.expect("void");
    let p2 = create(&gov, &t.id, spec(&bob, "criteria v2", None, None), Some(p1.entry)).await;
    let second = p2.assignment.expect("id");
    let s = bob.assignment(&second).await;
    assert_eq!(body(&s.criteria), Some(&b"criteria v2"[..]));
    assert!(is_open(&s));
    let e = bob.c.get_entry(pb::GetEntryRequest { thread: t.id.clone(), entry: p2.entry }).await.expect("entry");
    assert_eq!(e.entry.expect("entry").reply_to, Some(p1.entry));
    let f = bob.assignment(&first).await;
    assert_eq!((fixed(&f), assignment_outcome(&f)), (first_fixed, Some(Out::Voided)));
    assert_eq!(assignment_opportunities(&bob).await, vec![second]);
}

// ---------------------------------------------------------------------------------------------
// Deadlines (§6.4.9–§6.4.11)

/// §6.4 rule: a delivery deadline that passes without delivery ends the assignment as timed out;
/// the taker's delivery obligation leaves its turn, and a late delivery is refused.
async fn a_taken_assignment_left_alone_times_out(cx: Ctx) {
    let (gov, bob) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&gov, &[&bob]).await;
    let id = create(&gov, &t.id, spec(&bob, "work", Some(SECOND), Some(SECOND)), None).await.assignment.expect("id");
    let due = bob.take(&id).await.delivery_due_unix_micros;
    if let Some(turn) = turn_before(&bob, due).await {
        assert_eq!(turn.len(), 1, "{turn:?}");
        assert_eq!((turn[0].obligation.clone(), turn[0].due_at_unix_micros), (delivery_of(&id), Some(due)));
        assert_eq!(turn[0].next, pb::NextStep::Deliver as i32);
    }
    let a = ends_as(&gov, &id, due, Out::TimedOut).await;
    let e = ended(&a);
    assert!(e.delivered.is_none(), "nothing was delivered: {e:?}");
    assert!(e.ended_at_unix_micros >= due, "it ended at or after its deadline: {e:?}");
    assert!(turn_of(&bob).await.is_empty(), "the delivery obligation left the taker's turn");
    assert!(turn_of(&gov).await.is_empty(), "no judgment arises from a timeout");
    let rej = rejection(try_deliver(&bob, &id, "late").await);
    assert!(matches!(rej.code, Code::DeadlinePassed | Code::InvalidState), "a late delivery: {rej:?}");
    assert!(!rej.message.is_empty());
    assert_eq!(gov.assignment(&id).await, a, "the refused late delivery changed nothing");
}

/// §6.4 rule: a delivery deadline that passes without delivery ends the assignment as timed out;
/// L4: the deadline wins over an in-flight action; L5: one ending. Five deliveries sent around
/// their due times (-50 ms .. +50 ms): each assignment ends exactly one way. An acknowledged
/// delivery was made before the due time and is never timed out later (it settles undecided); a
/// refused one is DEADLINE_PASSED (whether or not the timer had settled it) and the assignment ends
/// timed out. A delivery
/// sent at or after the due time (this host's clock is the nodes' clock) is always refused.
async fn a_delivery_racing_its_deadline_has_exactly_one_outcome(cx: Ctx) {
    let (gov, bob) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&gov, &[&bob]).await;
    let offsets: [i64; 5] = [-50_000, -10_000, 0, 10_000, 50_000];
    let mut ids = Vec::new();
    for off in offsets {
        let a = spec(&bob, &format!("race at {off}"), Some(SECOND), Some(SECOND));
        ids.push(create(&gov, &t.id, a, None).await.assignment.expect("id"));
    }
    let mut racers = Vec::new();
    for (id, off) in ids.iter().zip(offsets) {
        let due = bob.take(id).await.delivery_due_unix_micros;
        let (b, id) = (bob.clone(), id.clone());
        racers.push(tokio::spawn(async move {
            let wait = (due + off - now_micros()).max(0) as u64;
            tokio::time::sleep(Duration::from_micros(wait)).await;
            let sent_at = now_micros();
            let r = try_deliver(&b, &id, &format!("delivered at {off}")).await;
            (id, due, off, sent_at, r)
        }));
    }
    let mut results = Vec::new();
    for r in racers {
        results.push(r.await.expect("racer"));
    }
    let last_judgment_due = results
        .iter()
        .filter_map(|(_, due, _, _, r)| r.as_ref().ok().map(|d| d.judgment_due_unix_micros).or(Some(*due)))
        .max()
        .unwrap_or(0);
    sleep_past(last_judgment_due, Duration::from_millis(100)).await;
    for (id, due, off, sent_at, r) in results {
        let a = eventually("the raced assignment to end", || {
            let gov = &gov;
            let id = &id;
            async move {
                let a = gov.assignment(id).await;
                assignment_outcome(&a).map(|_| a)
            }
        })
        .await;
        let e = ended(&a);
        let delivered_output = format!("delivered at {off}");
        match r {
            Ok(d) => {
                let delivered_at = d.judgment_due_unix_micros - SECOND as i64;
                assert!(delivered_at < due, "{id} (offset {off}): delivery accepted at/after its due time: {d:?}");
                assert!(sent_at < due, "{id} (offset {off}): a delivery sent at/after the due time was accepted");
                assert_eq!(e.outcome, Out::Undecided as i32, "{id} (offset {off}): acknowledged delivery: {a:?}");
                assert_eq!(body(&e.delivered), Some(delivered_output.as_bytes()));
            }
            Err(Error::Rejected(rej)) if rej.definite => {
                assert_eq!(rej.code, Code::DeadlinePassed, "{id} (offset {off}): refused with {rej:?}");
                assert!(!rej.message.is_empty());
                assert_eq!(e.outcome, Out::TimedOut as i32, "{id} (offset {off}): refused delivery: {a:?}");
                assert!(e.delivered.is_none(), "{id}: a refused delivery left an output: {a:?}");
            }
            Err(other) => {
                // Outcome unknown to the caller (a leader change): still exactly one ending.
                match Out::try_from(e.outcome) {
                    Ok(Out::Undecided) => assert_eq!(body(&e.delivered), Some(delivered_output.as_bytes())),
                    Ok(Out::TimedOut) => assert!(e.delivered.is_none()),
                    x => panic!("{id} (offset {off}): after {other:?} it ended {x:?}"),
                }
            }
        }
    }
    assert!(turn_of(&bob).await.is_empty());
    assert!(turn_of(&gov).await.is_empty());
}

/// §6.4 rule: a judgment deadline that passes without judgment ends the assignment as undecided,
/// which is never held against the taker: the outcome is undecided (not rejected, no reason), the
/// delivery is kept, the taker's turn holds nothing, and its next assignment proceeds as usual.
async fn an_unjudged_delivery_settles_undecided_and_is_not_held_against_the_taker(cx: Ctx) {
    let (gov, bob) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&gov, &[&bob]).await;
    let id = create(&gov, &t.id, spec(&bob, "work", None, Some(SECOND)), None).await.assignment.expect("id");
    bob.take(&id).await;
    let jdue = bob.deliver(&id, OUTPUT).await.judgment_due_unix_micros;
    if let Some(turn) = turn_before(&gov, jdue).await {
        assert_eq!(turn.into_iter().map(|i| i.obligation).collect::<Vec<_>>(), vec![judgment_of(&id)]);
    }
    assert!(turn_of(&bob).await.is_empty());
    let a = ends_as(&bob, &id, jdue, Out::Undecided).await;
    let e = ended(&a);
    assert!(e.rejection_reason.is_none(), "undecided carries no rejection: {e:?}");
    assert_eq!(body(&e.delivered), Some(OUTPUT.as_bytes()), "the delivery is kept");
    assert!(e.ended_at_unix_micros >= jdue);
    assert!(turn_of(&bob).await.is_empty(), "nothing lands on the taker");
    assert!(turn_of(&gov).await.is_empty(), "the judgment obligation ended");
    // The taker's next assignment proceeds as any other.
    let next = create(&gov, &t.id, spec(&bob, "next", None, None), None).await.assignment.expect("id");
    assert_eq!(assignment_opportunities(&bob).await, vec![next.clone()]);
    bob.take(&next).await;
    assert_eq!(turn_of(&bob).await, vec![delivery_of(&next)]);
    assert_eq!(bob.assignment(&id).await, a, "the undecided outcome stands");
}

/// §6.4 rule: deadlines win over in-flight judgment (L4). Adoptions sent around the judgment due
/// time (-50 ms .. +50 ms) and well after it: an acknowledged adoption was made before the due
/// time and stays adopted; a refused one is DEADLINE_PASSED (whether or not the timer had settled
/// it) and the assignment settles undecided. A judgment sent at or after the due time is always refused.
async fn the_judgment_deadline_wins_over_a_late_or_racing_judgment(cx: Ctx) {
    let (gov, bob) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&gov, &[&bob]).await;
    let offsets: [i64; 6] = [-50_000, -10_000, 0, 10_000, 50_000, 300_000];
    let mut ids = Vec::new();
    for off in offsets {
        let a = spec(&bob, &format!("judged at {off}"), None, Some(SECOND));
        let id = create(&gov, &t.id, a, None).await.assignment.expect("id");
        bob.take(&id).await;
        ids.push(id);
    }
    let mut racers = Vec::new();
    for (n, (id, off)) in ids.iter().zip(offsets).enumerate() {
        let jdue = bob.deliver(id, OUTPUT).await.judgment_due_unix_micros;
        let (g, id) = (gov.clone(), id.clone());
        racers.push(tokio::spawn(async move {
            let wait = (jdue + off - now_micros()).max(0) as u64;
            tokio::time::sleep(Duration::from_micros(wait)).await;
            let sent_at = now_micros();
            // Alternating verdicts: adoption and rejection both lose to the deadline.
            let r = if n % 2 == 0 { try_adopt(&g, &id).await } else { try_reject(&g, &id, "too late?").await };
            (id, jdue, off, sent_at, n % 2 == 0, r)
        }));
    }
    let mut results = Vec::new();
    for r in racers {
        results.push(r.await.expect("racer"));
    }
    for (id, jdue, off, sent_at, adopt, r) in results {
        let a = ended_after(&gov, &id, jdue).await;
        let e = ended(&a);
        match r {
            Ok(()) => {
                assert!(sent_at < jdue, "{id} (offset {off}): a judgment sent at/after the due time was accepted");
                assert!(e.ended_at_unix_micros < jdue, "{id} (offset {off}): judged at/after its due time: {a:?}");
                let want = if adopt { Out::Adopted } else { Out::Rejected };
                assert_eq!(e.outcome, want as i32, "{id} (offset {off}): acknowledged judgment: {a:?}");
            }
            Err(Error::Rejected(rej)) if rej.definite => {
                assert_eq!(rej.code, Code::DeadlinePassed, "{id} (offset {off}): refused with {rej:?}");
                assert_eq!(e.outcome, Out::Undecided as i32, "{id} (offset {off}): refused judgment: {a:?}");
                assert!(e.rejection_reason.is_none());
                // Judging again afterwards changes nothing either, and is told the same.
                refused(try_adopt(&gov, &id).await, Code::DeadlinePassed);
                assert_eq!(gov.assignment(&id).await, a);
            }
            Err(other) => match Out::try_from(e.outcome) {
                Ok(Out::Undecided | Out::Adopted | Out::Rejected) => {}
                x => panic!("{id} (offset {off}): after {other:?} it ended {x:?}"),
            },
        }
        assert_eq!(body(&e.delivered), Some(OUTPUT.as_bytes()));
    }
    assert!(turn_of(&gov).await.is_empty());
    assert!(turn_of(&bob).await.is_empty());
}

/// §6.4 rule: terminal states are adopted, rejected, undecided, dropped, timed out and voided;
/// they are irreversible: every action on each, by either party, is refused and it reads back the
/// same.
async fn every_terminal_state_is_irreversible(cx: Ctx) {
    let (gov, bob) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&gov, &[&bob]).await;
    let new = |n: &str, d: Option<u64>, j: Option<u64>| spec(&bob, n, d, j);
    let adopted = create(&gov, &t.id, new("adopted", None, None), None).await.assignment.expect("id");
    let rejected = create(&gov, &t.id, new("rejected", None, None), None).await.assignment.expect("id");
    let undecided = create(&gov, &t.id, new("undecided", None, Some(SECOND)), None).await.assignment.expect("id");
    let dropped = create(&gov, &t.id, new("dropped", None, None), None).await.assignment.expect("id");
    let timed_out = create(&gov, &t.id, new("timed out", Some(SECOND), None), None).await.assignment.expect("id");
    let voided = create(&gov, &t.id, new("voided", None, None), None).await.assignment.expect("id");
    let tdue = bob.take(&timed_out).await.delivery_due_unix_micros;
    for id in [&adopted, &rejected, &undecided, &dropped, &voided] {
        bob.take(id).await;
    }
    let mut jdue = 0;
    for id in [&adopted, &rejected, &undecided] {
        jdue = bob.deliver(id, OUTPUT).await.judgment_due_unix_micros;
    }
    try_adopt(&gov, &adopted).await.expect("adopt");
    try_reject(&gov, &rejected, "no").await.expect("reject");
    try_drop(&bob, &dropped).await.expect("drop");
    try_void(&gov, &voided).await.expect("void");
    ends_as(&gov, &timed_out, tdue, Out::TimedOut).await;
    ends_as(&gov, &undecided, jdue, Out::Undecided).await;
    for (id, want) in [
        (&adopted, Out::Adopted),
        (&rejected, Out::Rejected),
        (&undecided, Out::Undecided),
        (&dropped, Out::Dropped),
        (&timed_out, Out::TimedOut),
        (&voided, Out::Voided),
    ] {
        assert_eq!(assignment_outcome(&gov.assignment(id).await), Some(want));
        let deadline_won: &[&str] = match want {
            Out::TimedOut => &["deliver", "drop", "void"],
            Out::Undecided => &["adopt", "reject"],
            _ => &[],
        };
        every_action_is_refused(&gov, &bob, id, deadline_won).await;
        assert_eq!(assignment_outcome(&bob.assignment(id).await), Some(want), "{want:?} is irreversible");
    }
}

// ---------------------------------------------------------------------------------------------
// Membership, not speaking (§6.2.5, §6.2.6)

/// §6.2 rule: taking and delivering require membership, not the right to speak; the speaking
/// requirement applies only at creation. An addressee demoted to observer after creation takes
/// and delivers, but cannot create an assignment itself.
async fn an_addressee_demoted_to_observer_still_takes_and_delivers(cx: Ctx) {
    let (gov, bob) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&gov, &[&bob]).await;
    let id = create(&gov, &t.id, spec(&bob, "work", None, None), None).await.assignment.expect("id");
    let kept = create(&gov, &t.id, spec(&bob, "taken before", None, None), None).await.assignment.expect("id");
    let due = bob.take(&kept).await.delivery_due_unix_micros;
    change_role(&gov, &t.id, &bob, pb::Role::Observer).await;
    // Demotion does not affect the assignment in progress.
    assert_eq!(taken(&bob.assignment(&kept).await).delivery_due_unix_micros, due);
    assert_eq!(turn_of(&bob).await, vec![delivery_of(&kept)]);
    bob.take(&id).await;
    let mut turn = turn_of(&bob).await;
    turn.sort_by_key(|o| format!("{o:?}"));
    let mut want = vec![delivery_of(&kept), delivery_of(&id)];
    want.sort_by_key(|o| format!("{o:?}"));
    assert_eq!(turn, want);
    bob.deliver(&id, OUTPUT).await;
    bob.deliver(&kept, OUTPUT).await;
    assert!(matches!(bob.assignment(&id).await.state, Some(pb::assignment::State::Delivered(_))));
    try_adopt(&gov, &id).await.expect("adopt the observer's delivery");
    // The speaking requirement still applies at creation.
    refused(try_create(&bob, &t.id, spec(&gov, "observer assigns", None, None)).await, Code::CannotSpeak);
}

/// §6.2 rule: judging and voiding require membership, not the right to speak; the speaking
/// requirement applies only at creation. A creator demoted to observer judges and voids its
/// assignments but creates no new one.
async fn a_creator_demoted_to_observer_still_judges_and_voids_but_cannot_create(cx: Ctx) {
    let (gov, alice, bob) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&gov, &[&alice, &bob]).await;
    let judged = create(&alice, &t.id, spec(&bob, "judged", None, None), None).await.assignment.expect("id");
    let voided = create(&alice, &t.id, spec(&bob, "voided", None, None), None).await.assignment.expect("id");
    bob.take(&judged).await;
    bob.deliver(&judged, OUTPUT).await;
    change_role(&gov, &t.id, &alice, pb::Role::Observer).await;
    assert_eq!(turn_of(&alice).await, vec![judgment_of(&judged)], "demotion keeps the judgment obligation");
    try_adopt(&alice, &judged).await.expect("an observer creator adopts");
    try_void(&alice, &voided).await.expect("an observer creator voids");
    assert_eq!(assignment_outcome(&bob.assignment(&judged).await), Some(Out::Adopted));
    assert_eq!(assignment_outcome(&bob.assignment(&voided).await), Some(Out::Voided));
    let before = entries(&gov, &t.id).await;
    refused(try_create(&alice, &t.id, spec(&bob, "again", None, None)).await, Code::CannotSpeak);
    assert_eq!(entries(&gov, &t.id).await, before);
    assert!(assignment_opportunities(&bob).await.is_empty());
}

/// §6.2 rule: assignment actions require membership: an agent that never joined, or whose
/// membership ended, gets NOT_FOUND for every assignment action and read, and nothing changes.
async fn assignment_actions_need_membership_not_the_right_to_speak(cx: Ctx) {
    let (gov, bob, carol, outsider) = (cx.agent().await, cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&gov, &[&bob, &carol]).await;
    let open = create(&gov, &t.id, spec(&bob, "open", None, None), None).await.assignment.expect("id");
    let done = create(&gov, &t.id, spec(&bob, "delivered", None, None), None).await.assignment.expect("id");
    bob.take(&done).await;
    bob.deliver(&done, OUTPUT).await;
    leave(&carol, &t.id).await;
    for who in [&outsider, &carol] {
        for id in [&open, &done] {
            let before = gov.assignment(id).await;
            refused(who.c.get_assignment(pb::GetAssignmentRequest { assignment: id.clone() }).await, Code::NotFound);
            refused(try_take(who, id, None).await, Code::NotFound);
            refused(try_deliver(who, id, "x").await, Code::NotFound);
            refused(try_drop(who, id).await, Code::NotFound);
            refused(try_adopt(who, id).await, Code::NotFound);
            refused(try_reject(who, id, "no").await, Code::NotFound);
            refused(try_void(who, id).await, Code::NotFound);
            assert_eq!(gov.assignment(id).await, before);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Membership ends (§6.2.9, §6.2.10)

/// §6.2 rule: when a membership ends, assignments it took and has not delivered are voided in the
/// same fact (their ending is stamped with the leaving); its untaken ones go with it; a delivered
/// one stays for its creator to judge. Removal by a governor does the same.
async fn when_the_taker_leaves_or_is_removed_its_undelivered_assignments_are_voided_in_the_same_fact(cx: Ctx) {
    let (gov, bob, dave) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&gov, &[&bob, &dave]).await;
    let taken_id = create(&gov, &t.id, spec(&bob, "taken", None, None), None).await.assignment.expect("id");
    let untaken = create(&gov, &t.id, spec(&bob, "untaken", None, None), None).await.assignment.expect("id");
    let done = create(&gov, &t.id, spec(&bob, "delivered", None, None), None).await.assignment.expect("id");
    bob.take(&taken_id).await;
    bob.take(&done).await;
    let jdue = bob.deliver(&done, OUTPUT).await.judgment_due_unix_micros;
    let at = leave(&bob, &t.id).await;
    for id in [&taken_id, &untaken] {
        let a = gov.assignment(id).await;
        let e = ended(&a);
        assert_eq!(e.outcome, Out::Voided as i32, "{id}: {a:?}");
        assert_eq!(e.ended_at_unix_micros, at, "{id} was voided in the leaving's own fact");
    }
    let d = delivered(&gov.assignment(&done).await);
    assert_eq!(d.judgment_due_unix_micros, jdue, "a delivered assignment is not the taker's to lose");
    assert!(turn_of(&bob).await.is_empty());
    assert!(assignment_opportunities(&bob).await.is_empty());
    assert_eq!(turn_of(&gov).await, vec![judgment_of(&done)]);
    try_adopt(&gov, &done).await.expect("the creator still judges");
    // Removal by a governor voids the removed taker's undelivered assignment the same way.
    let dave_id = create(&gov, &t.id, spec(&dave, "dave's", None, None), None).await.assignment.expect("id");
    dave.take(&dave_id).await;
    let w = gov
        .c
        .remove_member(
            pb::RemoveMemberRequest { thread: t.id.clone(), member: dave.id.clone(), ..Default::default() },
            None,
        )
        .await
        .expect("remove");
    let removed_at = w.value.receipt.as_ref().expect("receipt").at_unix_micros;
    let e = ended(&gov.assignment(&dave_id).await);
    assert_eq!((e.outcome, e.ended_at_unix_micros), (Out::Voided as i32, removed_at));
    assert!(turn_of(&dave).await.is_empty());
}

/// §6.2 rule: when the creator's membership ends, its not-yet-delivered assignments are voided in
/// the same fact, and for its delivered ones the right to judge is forfeited: they settle as
/// undecided at their judgment deadline. Rejoining revives no right to judge.
async fn when_the_creator_leaves_undelivered_are_voided_and_delivered_are_forfeited(cx: Ctx) {
    let (gov, alice, bob) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&gov, &[&alice, &bob]).await;
    let open = create(&alice, &t.id, spec(&bob, "open", None, None), None).await.assignment.expect("id");
    let taken_id = create(&alice, &t.id, spec(&bob, "taken", None, None), None).await.assignment.expect("id");
    let done =
        create(&alice, &t.id, spec(&bob, "delivered", None, Some(5 * SECOND)), None).await.assignment.expect("id");
    bob.take(&taken_id).await;
    bob.take(&done).await;
    let jdue = bob.deliver(&done, OUTPUT).await.judgment_due_unix_micros;
    assert_eq!(turn_of(&alice).await, vec![judgment_of(&done)]);
    let at = leave(&alice, &t.id).await;
    for id in [&open, &taken_id] {
        let a = gov.assignment(id).await;
        let e = ended(&a);
        assert_eq!((e.outcome, e.ended_at_unix_micros), (Out::Voided as i32, at), "{id}: {a:?}");
    }
    let forfeited = gov.assignment(&done).await;
    assert!(forfeited.judge_forfeited, "the right to judge is forfeited: {forfeited:?}");
    assert_eq!(delivered(&forfeited).judgment_due_unix_micros, jdue, "it keeps its judgment deadline");
    assert!(turn_of(&alice).await.is_empty(), "the judgment obligation left with the membership");
    assert!(turn_of(&bob).await.is_empty(), "the voided taking's delivery obligation ended");
    assert!(assignment_opportunities(&bob).await.is_empty());
    refused(try_deliver(&bob, &taken_id, "orphan").await, Code::InvalidState);
    // Outside the thread the former creator cannot judge; rejoined, the right stays forfeited.
    refused(try_adopt(&alice, &done).await, Code::NotFound);
    rejoin(&gov, &t.id, &alice).await;
    refused(try_adopt(&alice, &done).await, Code::JudgmentForfeited);
    refused(try_reject(&alice, &done, "no").await, Code::JudgmentForfeited);
    assert_eq!(gov.assignment(&done).await, forfeited, "refused judgments changed nothing");
    assert!(turn_of(&alice).await.is_empty());
    let a = ends_as(&gov, &done, jdue, Out::Undecided).await;
    assert_eq!(body(&ended(&a).delivered), Some(OUTPUT.as_bytes()));
    assert!(turn_of(&bob).await.is_empty());
}
