//! §7 Tasks: contract, audience, engagement, adoption limit, tasks and threads.

use futures::future::join_all;
use kungfu_client::{Code, Error, pb};
use kungfu_system_tests::conformance::*;
use kungfu_system_tests::{cases, outcome};
use std::time::Duration;

cases! {
    full_contract_is_recorded_as_the_first_version ["§7.1.1", "§7.1.4"],
    a_designated_judge_must_be_an_agent_and_alone_judges ["§7.0.1", "§7.3.9"],
    required_inputs_must_be_the_authors_own_pinned_versions ["§7.1.2"],
    the_engaged_agent_reads_its_bound_input_after_the_author_updates_it ["§7.1.2", "§7.3.1"],
    missing_judgment_takes_the_contracts_stated_result ["§7.1.3", "§7.1.7", "§7.3.11"],
    eligibility_excludes_named_and_late_registered_agents ["§7.1.4", "§7.2.2", "§7.6.1"],
    only_the_author_revises_and_each_revision_is_a_new_version ["§7.1.5", "§7.2.1"],
    revision_binds_only_later_engagements ["§7.1.6", "§7.3.1", "§7.3.12"],
    revision_excluding_an_engaged_agent_does_not_cancel_its_engagement ["§7.3.12", "§7.6.1"],
    any_active_agent_may_take_an_open_task ["§7.2.2"],
    restricted_task_is_taken_and_read_only_by_named_agents ["§7.2.3"],
    the_author_cannot_take_its_own_task ["§7.2.4"],
    take_binds_agent_version_inputs_and_starts_the_delivery_deadline ["§7.3.1", "§7.3.3", "§7.1.7"],
    a_rejected_take_creates_nothing ["§7.3.2"],
    an_agent_holds_one_open_engagement_per_task ["§7.3.4"],
    only_the_engaged_agent_delivers_or_drops_and_the_author_cannot_cancel ["§7.3.5", "§7.3.15"],
    a_delivery_deadline_that_passes_first_times_the_engagement_out ["§7.3.6", "§7.1.7"],
    a_delivery_fixes_the_output_and_cannot_be_replaced ["§7.3.7"],
    take_and_deliver_in_one_action_confirms_the_engagement_first ["§7.3.8", "§7.3.3"],
    only_the_requester_judges ["§7.3.9"],
    a_rejection_carries_a_reason_the_engaged_agent_reads ["§7.3.10"],
    pausing_refuses_new_takes_but_existing_engagements_continue ["§7.3.13", "§7.3.4", "§7.6.1"],
    deactivating_the_author_keeps_engagements_running ["§7.3.14"],
    terminal_states_are_irreversible ["§7.3.16"],
    every_settlement_consumes_exactly_one_terminal_fact ["§7.3.17"],
    fifty_concurrent_adoptions_never_overrun_the_adoption_limit ["§7.4.1", "§7.4.2"],
    adoptions_are_first_come_first_served ["§7.4.1", "§7.4.2"],
    only_adopted_deliveries_count_toward_the_limit ["§7.4.1"],
    an_entry_referencing_a_task_shows_members_only_its_contract_layer ["§7.5.1", "§7.5.2", "§7.5.3"],
    task_mechanisms_create_no_obligation_outside_the_skeleton ["§7.6.1", "§7.6.2"],
}

// --- helpers ------------------------------------------------------------------------------------

/// A Task's structure as `reader` may read it.
async fn task_of(reader: &Agent, task: &str) -> pb::Task {
    reader
        .c
        .get_task(pb::GetTaskRequest { task: task.into(), version: None })
        .await
        .expect("read task")
        .task
        .expect("task structure")
}

/// One contract version of a Task as `reader` may read it.
async fn contract_of(reader: &Agent, task: &str, version: Option<u32>) -> Result<pb::ContractVersion, Error> {
    reader
        .c
        .get_task(pb::GetTaskRequest { task: task.into(), version })
        .await
        .map(|v| v.contract.expect("contract version"))
}

async fn try_take(a: &Agent, task: &str) -> Result<pb::Engaged, Error> {
    a.c.take_task(pb::TakeTaskRequest { task: task.into(), ..Default::default() }, None)
        .await
        .map(|w| outcome!(w.value.receipt, Engaged))
}

/// Delivers (with `take`, takes first in the same action); returns the receipt's result and time.
async fn try_deliver(a: &Agent, task: &str, output: &str, take: bool) -> Result<(pb::EngagementDelivered, i64), Error> {
    a.c.deliver_task(pb::DeliverTaskRequest { task: task.into(), output: text(output), take, ..Default::default() }, None)
        .await
        .map(|w| {
            let at = w.value.receipt.as_ref().map(|r| r.at_unix_micros).unwrap_or_default();
            (outcome!(w.value.receipt, EngagementDelivered), at)
        })
}

async fn adopt(judge: &Agent, engagement: &str) -> Result<(), Error> {
    judge
        .c
        .adopt_engagement(pb::AdoptEngagementRequest { engagement: engagement.into(), ..Default::default() }, None)
        .await
        .map(|w| {
            let r = outcome!(w.value.receipt, EngagementAdopted);
            assert_eq!(r.engagement, engagement);
        })
}

async fn reject(judge: &Agent, engagement: &str, reason: &str) -> Result<(), Error> {
    judge
        .c
        .reject_engagement(
            pb::RejectEngagementRequest { engagement: engagement.into(), reason: text(reason), ..Default::default() },
            None,
        )
        .await
        .map(|w| {
            let r = outcome!(w.value.receipt, EngagementRejected);
            assert_eq!(r.engagement, engagement);
        })
}

async fn drop_it(a: &Agent, engagement: &str) -> Result<(), Error> {
    a.c.drop_engagement(pb::DropEngagementRequest { engagement: engagement.into(), ..Default::default() }, None)
        .await
        .map(|w| {
            let r = outcome!(w.value.receipt, EngagementDropped);
            assert_eq!(r.engagement, engagement);
        })
}

fn is_open(e: &pb::Engagement) -> bool {
    matches!(e.state, Some(pb::engagement::State::Open(_)))
}

fn delivered(e: &pb::Engagement) -> Option<&pb::EngagementDeliveredState> {
    match &e.state {
        Some(pb::engagement::State::Delivered(d)) => Some(d),
        _ => None,
    }
}

fn ended(e: &pb::Engagement) -> Option<&pb::EngagementEndedState> {
    match &e.state {
        Some(pb::engagement::State::Ended(d)) => Some(d),
        _ => None,
    }
}

/// Waits until the engagement has ended (a deadline the server settles); returns it.
async fn settled(reader: &Agent, engagement: &str) -> pb::Engagement {
    eventually(&format!("engagement {engagement} ends"), move || async move {
        let e = reader.engagement(engagement).await;
        ended(&e).is_some().then_some(e)
    })
    .await
}

/// The fact names of a Task's history digest (its author reads it), oldest first.
async fn history(reader: &Agent, task: &str) -> Vec<String> {
    let ws = reader.working_set(task).await.expect("working set of the task");
    ws.history.into_iter().rev().map(|h| h.fact).collect()
}

/// An action that arrives after its deadline loses (L4): refused, either because the action itself
/// settled the deadline first (DEADLINE_PASSED) or because the server's timer already had.
#[track_caller]
fn lost_to_the_deadline<T: std::fmt::Debug>(r: Result<T, Error>) {
    let rej = rejection(r);
    assert!(matches!(rej.code, Code::DeadlinePassed | Code::InvalidState), "deadline must win: {rej:?}");
    assert!(!rej.message.is_empty());
}

fn body(c: &Option<pb::Content>) -> Vec<u8> {
    c.as_ref().map(|c| c.body.clone()).unwrap_or_default()
}

fn kinds(turn: &[pb::TurnItem]) -> Vec<pb::ObligationKind> {
    turn.iter().map(|i| pb::ObligationKind::try_from(i.kind).expect("known kind")).collect()
}
