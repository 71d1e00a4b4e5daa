//! §3 invariants L1–L6 (and §1, §2): atomicity, replay, exits and limits, concurrency races, separation.

use kungfu_client::{Client, ClientOptions, Code, Error, NextStep, Written, pb};
use kungfu_system_tests::conformance::*;
use kungfu_system_tests::{cases, outcome};
use std::time::Duration;

cases! {
    runtime_mechanisms_create_no_obligation_the_spec_does_not_define ["§1.1", "L4.5", "L4.6"],
    what_the_spec_does_not_permit_is_refused ["§1.2"],
    an_entry_referencing_a_task_turns_nothing_into_a_task ["§2.1"],
    every_replica_derives_the_same_state_from_the_facts ["L1.1"],
    corrections_are_new_facts_and_never_rewrite_the_past ["L1.2"],
    every_fact_survives_a_crash_of_the_node ["L1.3", "L3.1"],
    a_post_with_an_invalid_assignment_leaves_no_entry_and_no_memory ["L2.1", "L2.2", "L2.3"],
    a_combined_take_and_deliver_is_the_two_base_actions_and_fails_whole ["L2.1", "L2.2", "L2.3"],
    rejections_state_code_message_and_next_step ["L2.4"],
    joining_again_returns_the_existing_membership ["L2.5"],
    taking_a_task_again_returns_the_existing_engagement ["L2.6"],
    other_repeated_actions_are_refused_with_no_effect ["L2.7"],
    a_replay_after_the_state_moved_on_returns_the_original_receipt ["L3.1", "L3.3"],
    a_different_request_under_a_used_key_is_refused_without_effect ["L3.1", "L3.2"],
    receipts_carry_only_protocol_facts ["L3.4"],
    secrets_appear_only_in_the_first_result ["L3.5"],
    every_obligation_has_an_exit_that_needs_no_one_else ["L4.1", "L4.4"],
    delivery_and_judgment_carry_deadlines_and_the_deadline_wins ["L4.2", "L4.3"],
    the_response_obligation_carries_no_deadline ["L4.4"],
    capacity_limits_refuse_without_effect ["L4.5", "L4.6"],
    rate_limits_refuse_with_retry_after_and_without_effect ["§1.1", "L4.5", "L4.6"],
    a_racing_void_and_delivery_end_the_assignment_once ["L5.1", "L5.2", "L5.3"],
    a_racing_handle_and_reply_end_the_response_once ["L5.1", "L5.2"],
    racing_takes_of_one_assignment_have_one_winner ["L5.1", "L5.2"],
    a_racing_adoption_and_rejection_judge_the_delivery_once ["L5.1", "L5.2", "L5.3"],
    racing_adoptions_never_overrun_the_adoption_limit ["L5.1"],
    content_that_looks_like_structure_or_instruction_changes_nothing ["L6.3"],
    content_comes_back_byte_for_byte_only_in_content_fields ["L6.1", "L6.2"],
}

// ---------------------------------------------------------------------------------------------
// Helpers of this file.

/// The code of a definite rejection, or None for a success.
fn code_of<T: std::fmt::Debug>(r: &Result<T, Error>) -> Option<Code> {
    match r {
        Ok(_) => None,
        Err(Error::Rejected(rej)) => {
            assert!(rej.definite, "a rejection must be definite: {rej:?}");
            Some(rej.code)
        }
        Err(e) => panic!("expected a success or a definite rejection, got {e}"),
    }
}

/// The thread's summary as `reader` (a member) sees it.
async fn thread_summary(reader: &Agent, thread: &str) -> pb::ThreadSummary {
    let ws = reader.working_set(thread).await.expect("read the thread's working set");
    match ws.summary {
        Some(pb::working_set::Summary::Thread(t)) => t,
        other => panic!("expected a thread summary, got {other:?}"),
    }
}

/// The Task's summary as `reader` sees it.
async fn task_summary(reader: &Agent, task: &str) -> pb::TaskSummary {
    let ws = reader.working_set(task).await.expect("read the task's working set");
    match ws.summary {
        Some(pb::working_set::Summary::Task(t)) => t,
        other => panic!("expected a task summary, got {other:?}"),
    }
}

/// Every entry of a thread, as `reader` (a member) reads it.
async fn timeline(reader: &Agent, thread: &str) -> Vec<pb::Entry> {
    reader.c.timeline_all(thread, 100).await.expect("read the timeline")
}

/// The turn items of one kind.
fn of_kind(turn: &[pb::TurnItem], kind: pb::ObligationKind) -> Vec<pb::TurnItem> {
    turn.iter().filter(|i| i.kind == kind as i32).cloned().collect()
}

async fn response(reader: &Agent, thread: &str, entry: u64, responder: &str) -> pb::OwedResponse {
    reader
        .c
        .get_response(pb::GetResponseRequest { thread: thread.into(), entry, responder: responder.into() })
        .await
        .expect("read the response")
}

/// The first Memory pin of a new Memory; `body` text.
async fn post_plain(a: &Agent, thread: &str, body: &str) -> pb::Posted {
    a.post(Post::text(thread, body).ask(Vec::<String>::new())).await
}

fn delivered_output(a: &pb::Assignment) -> Option<Vec<u8>> {
    match &a.state {
        Some(pb::assignment::State::Delivered(d)) => d.output.as_ref().map(|c| c.body.clone()),
        Some(pb::assignment::State::Ended(e)) => e.delivered.as_ref().map(|c| c.body.clone()),
        _ => None,
    }
}

fn judgment_due(a: &pb::Assignment) -> Option<i64> {
    match &a.state {
        Some(pb::assignment::State::Delivered(d)) => Some(d.judgment_due_unix_micros),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// §1 Scope, §2 Model.

/// §1 rule: added mechanisms (here the runtime's capacity limit and its default windows) MUST NOT
/// create obligations the protocol does not define. The 9th open assignment of a thread is refused
/// and leaves nothing; assignments with unstated windows get the implementation's default
/// deadlines (L4) and exactly the obligations §6.4 defines.
async fn runtime_mechanisms_create_no_obligation_the_spec_does_not_define(cx: Ctx) {
    let (lead, worker) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&lead, &[&worker]).await;
    let mut assignments = Vec::new();
    for _ in 0..8 {
        assignments.push(lead.assign(&t.id, &worker.id, None, None).await.1);
    }
    let before = thread_summary(&lead, &t.id).await;
    assert_eq!(before.open_assignments, 8);
    // L4.6: past the capacity: rejected, with no entry, no assignment, no opportunity, no obligation.
    let r = lead
        .c
        .post(Post::text(&t.id, "ninth").ask(Vec::<String>::new()).assignment(new_assignment(&worker.id, "c")), None)
        .await;
    let rej = refused(r, Code::LimitExceeded);
    assert_eq!(rej.next, NextStep::Revise);
    assert!(rej.message.contains('8'), "the rejection names the limit: {rej:?}");
    let after = thread_summary(&lead, &t.id).await;
    assert_eq!((after.last_entry, after.open_assignments), (before.last_entry, 8), "the refused post left a trace");
    assert_eq!(timeline(&lead, &t.id).await.len(), 8);
    assert_eq!(worker.opportunities().await.len(), 8, "the refused assignment became an opportunity");
    assert!(worker.turn().await.is_empty(), "a refusal created an obligation");
    assert!(lead.turn().await.is_empty(), "a refusal created an obligation");
    // The default window (unstated) gives the delivery obligation a deadline, and nothing more.
    let taken = worker.take(&assignments[0]).await;
    let a = worker.assignment(&assignments[0]).await;
    assert!(a.delivery_window_micros > 0 && a.judgment_window_micros > 0, "default windows apply: {a:?}");
    let turn = worker.turn().await;
    assert_eq!(turn.len(), 1, "one take, one delivery obligation: {turn:?}");
    assert_eq!(turn[0].kind, pb::ObligationKind::Delivery as i32);
    assert_eq!(turn[0].due_at_unix_micros, Some(taken.delivery_due_unix_micros));
    assert!(lead.turn().await.is_empty(), "taking created an obligation for the creator");
    // Capacity, not a ban: ending one frees a place.
    lead.c
        .void_assignment(pb::VoidAssignmentRequest { assignment: assignments[1].clone(), ..Default::default() }, None)
        .await
        .expect("void");
    lead.assign(&t.id, &worker.id, None, None).await;
}

/// §1 rule: "What this specification does not permit is not permitted". An agent cannot deactivate
/// another agent, a caller without an agent key cannot act, the operator token is not an agent, a
/// non-member cannot post, and a member cannot take an assignment addressed to another; none of
/// the refusals has an effect.
async fn what_the_spec_does_not_permit_is_refused(cx: Ctx) {
    let (x, y, g, s) = (cx.agent().await, cx.agent().await, cx.agent().await, cx.agent().await);
    let r =
        x.c.deactivate(pb::DeactivateAgentRequest { agent: y.id.clone(), ..Default::default() }, None).await;
    let rej = rejection(r);
    assert!(
        matches!(rej.code, Code::InvalidArgument | Code::NotFound | Code::Unauthenticated),
        "an agent deactivated another, or was refused oddly: {rej:?}"
    );
    // y is still active: it acts, and its own working set says so.
    y.memory("still here").await;
    let ws = y.working_set(&y.id).await.expect("own working set");
    assert!(matches!(ws.summary, Some(pb::working_set::Summary::Agent(a)) if a.active));

    let t = cx.team(&g, &[&s]).await;
    let anon = cx.anonymous();
    refused(anon.post(Post::text(&t.id, "anonymous"), None).await, Code::Unauthenticated);
    let operator = cx.anonymous().with_key(OPERATOR_TOKEN);
    refused(operator.post(Post::text(&t.id, "operator"), None).await, Code::Unauthenticated);
    refused(x.c.post(Post::text(&t.id, "outsider"), None).await, Code::NotFound);
    let (_, asg) = g.assign(&t.id, &g.id, None, None).await;
    refused(
        s.c.take_assignment(pb::TakeAssignmentRequest { assignment: asg.clone(), ..Default::default() }, None).await,
        Code::NotAddressee,
    );
    assert!(timeline(&g, &t.id).await.len() == 1, "a refused post left an entry");
    assert!(matches!(g.assignment(&asg).await.state, Some(pb::assignment::State::Open(_))));
    assert!(s.turn().await.is_empty());
}

/// §2 rule: atoms reference one another and never turn into one another. An entry that references
/// a Task (and carries an assignment) changes nothing in the Task: no new version, no engagement,
/// no new audience member; the Task does not enter the thread's obligations, and the assignment
/// stays an assignment.
async fn an_entry_referencing_a_task_turns_nothing_into_a_task(cx: Ctx) {
    let (author, lead, member, outsider) = (cx.agent().await, cx.agent().await, cx.agent().await, cx.agent().await);
    let task = author.task(restricted(&[&outsider]), contract(None, None)).await;
    let view_before = author.c.get_task(pb::GetTaskRequest { task: task.clone(), version: None }).await.expect("task");
    let t = cx.team(&lead, &[&member]).await;
    let posted = lead
        .post(
            Post::text(&t.id, "move this work to the task")
                .ask(Vec::<String>::new())
                .task_ref(&task)
                .assignment(new_assignment(&member.id, "criteria")),
        )
        .await;
    let asg = posted.assignment.clone().expect("assignment");
    // Members read the Task's contract layer through the entry, and nothing more.
    let referenced = member
        .c
        .get_referenced_task(pb::GetReferencedTaskRequest { thread: t.id.clone(), entry: posted.entry })
        .await
        .expect("members read the referenced task");
    assert_eq!(referenced.task, task);
    // The Task is unchanged.
    let view_after = author.c.get_task(pb::GetTaskRequest { task: task.clone(), version: None }).await.expect("task");
    assert_eq!(view_after, view_before, "referencing the task changed it");
    let summary = task_summary(&author, &task).await;
    assert_eq!((summary.current_version, summary.open_engagements, summary.adopted), (1, 0, 0));
    // The reference grants nobody the Task: the members are outside its audience.
    assert!(member.opportunities().await.iter().all(|o| o.object != task));
    refused(
        member.c.take_task(pb::TakeTaskRequest { task: task.clone(), ..Default::default() }, None).await,
        Code::NotEligible,
    );
    // The assignment is an assignment, not a Task; the Task is not a thread obligation.
    assert!(matches!(member.assignment(&asg).await.state, Some(pb::assignment::State::Open(_))));
    refused(member.c.get_task(pb::GetTaskRequest { task: asg.clone(), version: None }).await, Code::InvalidArgument);
    assert!(member.turn().await.is_empty() && lead.turn().await.is_empty() && author.turn().await.is_empty());
    assert_eq!(thread_summary(&lead, &t.id).await.open_assignments, 1);
}
