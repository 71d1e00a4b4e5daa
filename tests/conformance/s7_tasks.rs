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
    a.c.deliver_task(
        pb::DeliverTaskRequest { task: task.into(), output: text(output), take, ..Default::default() },
        None,
    )
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

/// An action that arrives after its deadline loses (L4): refused DEADLINE_PASSED, whether the action
/// itself settled the deadline first or the server's timer already had (one code either way).
#[track_caller]
fn lost_to_the_deadline<T: std::fmt::Debug>(r: Result<T, Error>) {
    let rej = rejection(r);
    assert_eq!(rej.code, Code::DeadlinePassed, "deadline must win: {rej:?}");
    assert!(!rej.message.is_empty());
}

fn body(c: &Option<pb::Content>) -> Vec<u8> {
    c.as_ref().map(|c| c.body.clone()).unwrap_or_default()
}

fn kinds(turn: &[pb::TurnItem]) -> Vec<pb::ObligationKind> {
    turn.iter().map(|i| pb::ObligationKind::try_from(i.kind).expect("known kind")).collect()
}

// --- §7.0 and §7.1 Contract ---------------------------------------------------------------------

/// §7.1 rule: a contract states what is wanted (requirements, structure), the inputs, the delivery
/// and judgment deadlines, the result when judgment is not made, the acceptance criteria and the
/// judge; it MAY state eligibility and a maximum number of adoptions. The Task records all of it as
/// contract version 1 (§7.1.1, §7.1.4).
async fn full_contract_is_recorded_as_the_first_version(cx: Ctx) {
    let (author, judge, barred) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let input = author.memory("source notes").await;
    let cutoff = now_micros();
    let draft = pb::ContractDraft {
        requirements: text("summarise the notes"),
        output_structure: text("markdown, one section"),
        inputs: vec![input.clone()],
        references: text("the house style guide"),
        delivery_window_micros: Some(3600 * SECOND),
        judgment_window_micros: Some(7200 * SECOND),
        on_missing_judgment: pb::MissingJudgment::Adopted as i32,
        acceptance: text("covers every section"),
        judge: Some(judge.id.clone()),
        eligibility: Some(pb::Eligibility {
            registered_before_unix_micros: Some(cutoff),
            excluded: vec![barred.id.clone()],
        }),
        max_adoptions: Some(2),
    };
    let w = author
        .c
        .create_task(
            pb::CreateTaskRequest {
                audience: Some(pb::Audience { kind: Some(open()) }),
                contract: Some(draft),
                ..Default::default()
            },
            None,
        )
        .await
        .expect("create task");
    let created = outcome!(w.value.receipt, TaskCreated);
    assert_eq!(created.version, 1, "creation fixes contract version 1");
    let task = created.task;
    let view = author.c.get_task(pb::GetTaskRequest { task: task.clone(), version: None }).await.expect("read");
    let t = view.task.expect("task");
    assert_eq!((t.author.as_str(), t.current_version, t.adopted, t.open_engagements), (author.id.as_str(), 1, 0, 0));
    assert_eq!(t.audience, Some(pb::Audience { kind: Some(open()) }));
    let cv = view.contract.expect("contract version");
    assert_eq!((cv.task.as_str(), cv.version), (task.as_str(), 1));
    let c = cv.contract.expect("contract");
    assert_eq!(body(&c.requirements), b"summarise the notes");
    assert_eq!(body(&c.output_structure), b"markdown, one section");
    assert_eq!(c.inputs, vec![input]);
    assert_eq!(body(&c.references), b"the house style guide");
    assert_eq!((c.delivery_window_micros, c.judgment_window_micros), (3600 * SECOND, 7200 * SECOND));
    assert_eq!(c.on_missing_judgment, pb::MissingJudgment::Adopted as i32);
    assert_eq!(body(&c.acceptance), b"covers every section");
    assert_eq!(c.judge.as_deref(), Some(judge.id.as_str()));
    let e = c.eligibility.expect("eligibility");
    assert_eq!((e.registered_before_unix_micros, e.excluded), (Some(cutoff), vec![barred.id.clone()]));
    assert_eq!(c.max_adoptions, Some(2));
    // The designated judge reads the same contract.
    let by_judge = contract_of(&judge, &task, None).await.expect("the judge reads the contract");
    assert_eq!(by_judge.contract.and_then(|c| c.max_adoptions), Some(2));
    // §7.1.4: a stated maximum is a number of adoptions, at least one.
    let r = author
        .c
        .create_task(
            pb::CreateTaskRequest {
                audience: Some(pb::Audience { kind: Some(open()) }),
                contract: Some(pb::ContractDraft { max_adoptions: Some(0), ..contract(None, None) }),
                ..Default::default()
            },
            None,
        )
        .await;
    let rej = refused(r, Code::InvalidArgument);
    assert_eq!(rej.field.as_deref(), Some("contract.max_adoptions"));
}

/// §7 rule: the requester is the author or a judge the author designates; a designated judge MUST
/// be an agent (an unknown id or a deactivated agent is refused). §7.3: only the requester judges:
/// the author who designated a judge gets NOT_REQUESTER, the judge's verdict stands (§7.0.1, §7.3.9).
async fn a_designated_judge_must_be_an_agent_and_alone_judges(cx: Ctx) {
    let (author, judge, agent, retired) = (cx.agent().await, cx.agent().await, cx.agent().await, cx.agent().await);
    retired
        .c
        .deactivate(pb::DeactivateAgentRequest { agent: retired.id.clone(), ..Default::default() }, None)
        .await
        .expect("self-deactivate");
    for bad in ["ag_999999999".to_string(), retired.id.clone()] {
        let r = author
            .c
            .create_task(
                pb::CreateTaskRequest {
                    audience: Some(pb::Audience { kind: Some(open()) }),
                    contract: Some(pb::ContractDraft { judge: Some(bad.clone()), ..contract(None, None) }),
                    ..Default::default()
                },
                None,
            )
            .await;
        let rej = refused(r, Code::InvalidTarget);
        assert_eq!(rej.field.as_deref(), Some("contract.judge"), "judge {bad}");
    }
    let task = author.task(open(), pb::ContractDraft { judge: Some(judge.id.clone()), ..contract(None, None) }).await;
    let (d, _) = try_deliver(&agent, &task, "the work", true).await.expect("take and deliver");
    let e = agent.engagement(&d.engagement).await;
    assert_eq!(e.judge, judge.id, "the engagement binds the designated judge as requester");
    // The judgment obligation is the judge's, not the author's.
    let jt = judge.turn().await;
    assert_eq!(jt.len(), 1);
    assert_eq!(
        jt[0].obligation.as_ref().and_then(|o| o.kind.clone()),
        Some(pb::obligation_ref::Kind::EngagementJudgment(d.engagement.clone()))
    );
    assert!(author.turn().await.is_empty(), "the author owes no judgment it may not make");
    refused(adopt(&author, &d.engagement).await, Code::NotRequester);
    refused(reject(&author, &d.engagement, "no").await, Code::NotRequester);
    assert!(
        delivered(&agent.engagement(&d.engagement).await).is_some(),
        "the author's refused judgments changed nothing"
    );
    adopt(&judge, &d.engagement).await.expect("the judge adopts");
    let e = agent.engagement(&d.engagement).await;
    assert_eq!(ended(&e).map(|x| x.outcome), Some(pb::EngagementOutcome::Adopted as i32));
    assert_eq!(task_of(&author, &task).await.adopted, 1);
    assert!(judge.turn().await.is_empty());
}

/// §7.1 rule: a required input MUST be a version the author is entitled to make available for the
/// life of the engagement, a pinned version of the author's own Memory: another agent's public
/// Memory is NOT_ENTITLED, another's private Memory is NOT_FOUND, a withdrawn one is refused (§7.1.2).
async fn required_inputs_must_be_the_authors_own_pinned_versions(cx: Ctx) {
    let (author, other) = (cx.agent().await, cx.agent().await);
    let public = other.memory("other's public notes").await;
    other
        .c
        .publish_memory(pb::PublishMemoryRequest { memory: public.memory.clone(), ..Default::default() }, None)
        .await
        .expect("publish");
    let private = other.memory("other's private notes").await;
    let own = author.memory("own notes").await;
    let gone = author.memory("gone").await;
    author
        .c
        .withdraw_memory(pb::WithdrawMemoryRequest { memory: gone.memory.clone(), ..Default::default() }, None)
        .await
        .expect("withdraw");
    let create = |inputs: Vec<pb::MemoryPin>| {
        let author = author.clone();
        async move {
            author
                .c
                .create_task(
                    pb::CreateTaskRequest {
                        audience: Some(pb::Audience { kind: Some(open()) }),
                        contract: Some(pb::ContractDraft { inputs, ..contract(None, None) }),
                        ..Default::default()
                    },
                    None,
                )
                .await
        }
    };
    let rej = refused(create(vec![public.clone()]).await, Code::NotEntitled);
    assert_eq!(rej.field.as_deref(), Some("contract.inputs[0]"));
    let rej = refused(create(vec![own.clone(), private.clone()]).await, Code::NotFound);
    assert_eq!(rej.field.as_deref(), Some("contract.inputs[1]"));
    let rej = refused(create(vec![own.clone(), gone.clone()]).await, Code::MemoryWithdrawn);
    assert_eq!(rej.field.as_deref(), Some("contract.inputs[1]"));
    // Nothing of the refused creations touched the other agent's Memory.
    let m = other
        .c
        .get_memory(pb::GetMemoryRequest { memory: public.memory.clone(), version: None })
        .await
        .expect("read")
        .memory
        .expect("memory");
    assert_eq!((m.current_version, m.public), (1, true));
    // A pinned version of the author's own Memory is a valid input.
    let w = create(vec![own.clone()]).await.expect("own pinned version");
    let task = outcome!(w.value.receipt, TaskCreated).task;
    let c = contract_of(&author, &task, None).await.expect("read").contract.expect("contract");
    assert_eq!(c.inputs, vec![own]);
}

/// §7.1 rule: the author makes a required input available for the life of the engagement; §7.3:
/// the engagement binds the required input versions. The engaged agent reads the bound version
/// after the author updates and even withdraws the Memory; nobody else reads it that way
/// (§7.1.2, §7.3.1).
async fn the_engaged_agent_reads_its_bound_input_after_the_author_updates_it(cx: Ctx) {
    let (author, agent, stranger) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let pin = author.memory("alpha").await;
    let task = author.task(open(), pb::ContractDraft { inputs: vec![pin.clone()], ..contract(None, None) }).await;
    let engaged = agent.take_task(&task).await;
    let e = agent.engagement(&engaged.engagement).await;
    assert_eq!(e.inputs, vec![pin.clone()], "the engagement binds the input version");
    let read = |who: &Agent, index: u32| {
        let c = who.c.clone();
        let engagement = engaged.engagement.clone();
        async move { c.get_engagement_input(pb::GetEngagementInputRequest { engagement, index }).await }
    };
    let v = read(&agent, 0).await.expect("bound input");
    assert_eq!((v.version, body(&v.content)), (1, b"alpha".to_vec()));
    let w = author
        .c
        .update_memory(
            pb::UpdateMemoryRequest { memory: pin.memory.clone(), content: text("beta"), ..Default::default() },
            None,
        )
        .await
        .expect("update");
    assert_eq!(outcome!(w.value.receipt, MemoryUpdated).version, 2);
    let v = read(&agent, 0).await.expect("bound input after the update");
    assert_eq!((v.version, body(&v.content)), (1, b"alpha".to_vec()), "the bound version, not the current one");
    author
        .c
        .withdraw_memory(pb::WithdrawMemoryRequest { memory: pin.memory.clone(), ..Default::default() }, None)
        .await
        .expect("withdraw");
    let v = read(&agent, 0).await.expect("bound input after withdrawal");
    assert_eq!((v.version, body(&v.content)), (1, b"alpha".to_vec()));
    // Only through the engagement: the private Memory itself stays unreadable, and a stranger
    // cannot read the engagement's input.
    refused(
        agent.c.get_memory(pb::GetMemoryRequest { memory: pin.memory.clone(), version: Some(1) }).await,
        Code::NotFound,
    );
    refused(read(&stranger, 0).await, Code::NotFound);
    let rej = refused(read(&agent, 1).await, Code::InvalidArgument);
    assert_eq!(rej.field.as_deref(), Some("index"));
    // Still readable after delivery.
    agent.deliver_task(&task, "done").await;
    assert_eq!(body(&read(&agent, 0).await.expect("after delivery").content), b"alpha");
}

/// §7.1 rule: the result when judgment is not made is adopted or undecided, undecided if not
/// stated; the judgment deadline runs from accepted delivery. §7.3: a judgment deadline that passes
/// ends the engagement as the contract states, a judgment after it loses (L4), and undecided is
/// never held against the engaged agent (§7.1.3, §7.1.7, §7.3.11).
async fn missing_judgment_takes_the_contracts_stated_result(cx: Ctx) {
    let (author, agent) = (cx.agent().await, cx.agent().await);
    let adopting = author
        .task(
            open(),
            pb::ContractDraft {
                on_missing_judgment: pb::MissingJudgment::Adopted as i32,
                ..contract(None, Some(SECOND))
            },
        )
        .await;
    let unstated = author.task(open(), contract(None, Some(SECOND))).await;
    let c = contract_of(&author, &unstated, None).await.expect("read").contract.expect("contract");
    assert_eq!(c.on_missing_judgment, pb::MissingJudgment::Undecided as i32, "undecided if not stated");
    let (da, at_a) = try_deliver(&agent, &adopting, "work a", true).await.expect("deliver a");
    let (du, at_u) = try_deliver(&agent, &unstated, "work u", true).await.expect("deliver u");
    // §7.1.7: the judgment deadline runs from the accepted delivery.
    assert_eq!(da.judgment_due_unix_micros, at_a + SECOND as i64);
    assert_eq!(du.judgment_due_unix_micros, at_u + SECOND as i64);
    sleep_past(da.judgment_due_unix_micros.max(du.judgment_due_unix_micros), Duration::from_millis(50)).await;
    // The deadline wins over a judgment that arrives after it.
    lost_to_the_deadline(reject(&author, &da.engagement, "too late").await);
    lost_to_the_deadline(adopt(&author, &du.engagement).await);
    let ea = settled(&agent, &da.engagement).await;
    let eu = settled(&agent, &du.engagement).await;
    assert_eq!(ended(&ea).map(|x| x.outcome), Some(pb::EngagementOutcome::Adopted as i32));
    assert_eq!(ended(&eu).map(|x| x.outcome), Some(pb::EngagementOutcome::Undecided as i32));
    assert_eq!(body(&ended(&eu).and_then(|x| x.delivered.clone())), b"work u", "the delivery is kept");
    assert_eq!(ea.on_missing_judgment, pb::MissingJudgment::Adopted as i32);
    assert_eq!(eu.on_missing_judgment, pb::MissingJudgment::Undecided as i32);
    assert_eq!(task_of(&author, &adopting).await.adopted, 1, "a missing judgment stated as adopted counts");
    assert_eq!(task_of(&author, &unstated).await.adopted, 0);
    // Nothing is owed any more, and undecided is not held against the engaged agent: its turn is
    // empty and it takes the same Task again.
    assert!(agent.turn().await.is_empty());
    assert!(author.turn().await.is_empty());
    let again = agent.take_task(&unstated).await;
    assert!(!again.existing);
    assert_ne!(again.engagement, du.engagement);
}

/// §7.1 rule: a contract MAY state eligibility; §7.2: an open Task is taken by any active agent
/// that meets it. An excluded agent, or one registered after the stated time, is NOT_ELIGIBLE
/// (alone or combined with a delivery), reads the contract all the same, and nothing is created;
/// a stricter mechanism of this kind conflicts with nothing (§7.1.4, §7.2.2, §7.6.1).
async fn eligibility_excludes_named_and_late_registered_agents(cx: Ctx) {
    let (author, barred, veteran) = (cx.agent().await, cx.agent().await, cx.agent().await);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let cutoff = now_micros();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let newcomer = cx.agent().await;
    let draft = pb::ContractDraft {
        eligibility: Some(pb::Eligibility {
            registered_before_unix_micros: Some(cutoff),
            excluded: vec![barred.id.clone()],
        }),
        ..contract(None, None)
    };
    let task = author.task(open(), draft).await;
    for outsider in [&barred, &newcomer] {
        refused(try_take(outsider, &task).await, Code::NotEligible);
        refused(try_deliver(outsider, &task, "x", true).await, Code::NotEligible);
        contract_of(outsider, &task, None).await.expect("an open Task's contract is readable by all");
        assert!(outsider.turn().await.is_empty());
    }
    let t = task_of(&author, &task).await;
    assert_eq!(t.open_engagements, 0, "a refused take creates nothing");
    let e = veteran.take_task(&task).await;
    assert!(!e.existing);
    assert_eq!(task_of(&author, &task).await.open_engagements, 1);
}

/// §7.1 rule: a contract is fixed when created; the author MAY revise it and each revision is a new
/// contract version. Only the author: the named agent gets NOT_AUTHOR, an outsider NOT_FOUND.
/// §7.2: the audience is fixed; offering the same work to another audience is a new Task
/// (§7.1.5, §7.2.1).
async fn only_the_author_revises_and_each_revision_is_a_new_version(cx: Ctx) {
    let (author, named, outsider) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let task = author.task(restricted(&[&named]), contract(None, None)).await;
    let revise = |who: &Agent, requirements: &'static str| {
        let c = who.c.clone();
        let task = task.clone();
        async move {
            c.revise_contract(
                pb::ReviseContractRequest {
                    task,
                    contract: Some(pb::ContractDraft { requirements: text(requirements), ..contract(None, None) }),
                    ..Default::default()
                },
                None,
            )
            .await
        }
    };
    refused(revise(&named, "mine").await, Code::NotAuthor);
    refused(revise(&outsider, "mine").await, Code::NotFound);
    assert_eq!(task_of(&author, &task).await.current_version, 1, "the refused revisions changed nothing");
    for (v, req) in [(2, "second"), (3, "third")] {
        let w = revise(&author, req).await.expect("the author revises");
        let r = outcome!(w.value.receipt, ContractRevised);
        assert_eq!((r.task.as_str(), r.version), (task.as_str(), v));
    }
    let t = task_of(&author, &task).await;
    assert_eq!(t.current_version, 3);
    assert_eq!(t.audience, Some(pb::Audience { kind: Some(restricted(&[&named])) }), "the audience never changes");
    for (v, req) in [(1, "requirements"), (2, "second"), (3, "third")] {
        let cv = contract_of(&author, &task, Some(v)).await.expect("the author reads every version");
        assert_eq!(cv.version, v);
        assert_eq!(body(&cv.contract.expect("contract").requirements), req.as_bytes(), "version {v} kept as it was");
    }
    assert_eq!(contract_of(&named, &task, None).await.expect("current").version, 3);
    // The same work offered to everyone is a new Task; the first one stays restricted.
    let wider = author.task(open(), pb::ContractDraft { requirements: text("third"), ..contract(None, None) }).await;
    assert_ne!(wider, task);
    contract_of(&outsider, &wider, None).await.expect("the new open Task is readable");
    refused(contract_of(&outsider, &task, None).await, Code::NotFound);
}

/// §7.1 rule: a revision binds only engagements formed after it; existing engagements keep the
/// version they bound (its inputs and windows) and are judged against it, and judgment facts never
/// change. §7.3: revising MUST NOT silently cancel an existing engagement (§7.1.6, §7.3.1, §7.3.12).
async fn revision_binds_only_later_engagements(cx: Ctx) {
    let (author, early, late) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let m1 = author.memory("input one").await;
    let m2 = author.memory("input two").await;
    let v1 = pb::ContractDraft { inputs: vec![m1.clone()], ..contract(Some(3600 * SECOND), Some(3600 * SECOND)) };
    let task = author.task(open(), v1).await;
    let e1 = early.take_task(&task).await;
    assert_eq!(e1.contract_version, 1);
    let w = author
        .c
        .revise_contract(
            pb::ReviseContractRequest {
                task: task.clone(),
                contract: Some(pb::ContractDraft {
                    requirements: text("v2"),
                    inputs: vec![m2.clone()],
                    on_missing_judgment: pb::MissingJudgment::Adopted as i32,
                    ..contract(Some(7200 * SECOND), Some(7200 * SECOND))
                }),
                ..Default::default()
            },
            None,
        )
        .await
        .expect("revise");
    assert_eq!(outcome!(w.value.receipt, ContractRevised).version, 2);
    let e2 = late.take_task(&task).await;
    assert_eq!(e2.contract_version, 2, "a later engagement binds the revision");
    let first = early.engagement(&e1.engagement).await;
    assert_eq!(first.contract_version, 1, "the earlier engagement keeps the version it bound");
    assert_eq!(first.inputs, vec![m1.clone()]);
    assert_eq!(
        (first.judgment_window_micros, first.on_missing_judgment),
        (3600 * SECOND, pb::MissingJudgment::Undecided as i32)
    );
    match &first.state {
        Some(pb::engagement::State::Open(o)) => {
            assert_eq!(o.delivery_due_unix_micros, e1.delivery_due_unix_micros, "its delivery deadline is unchanged");
            assert_eq!(o.delivery_due_unix_micros, first.taken_at_unix_micros + 3600 * SECOND as i64);
        }
        other => panic!("the earlier engagement was not cancelled: {other:?}"),
    }
    let second = late.engagement(&e2.engagement).await;
    assert_eq!((second.contract_version, second.inputs.clone()), (2, vec![m2.clone()]));
    assert_eq!(e2.delivery_due_unix_micros, second.taken_at_unix_micros + 7200 * SECOND as i64);
    // Each reads its own bound contract version and input.
    let bound = contract_of(&early, &task, Some(1)).await.expect("the engaged agent reads its bound version");
    assert_eq!(body(&bound.contract.expect("contract").requirements), b"requirements");
    refused(contract_of(&late, &task, Some(1)).await, Code::NotFound);
    let input = early
        .c
        .get_engagement_input(pb::GetEngagementInputRequest { engagement: e1.engagement.clone(), index: 0 })
        .await
        .expect("bound input");
    assert_eq!(body(&input.content), b"input one");
    // The earlier engagement is delivered and judged as usual.
    early.deliver_task(&task, "done under v1").await;
    adopt(&author, &e1.engagement).await.expect("adopt");
    let before = history(&author, &task).await;
    assert_eq!(before.last().map(String::as_str), Some("engagement_judged"));
    // Judgment facts never change: a later revision adds a fact and rewrites none.
    author
        .c
        .revise_contract(
            pb::ReviseContractRequest {
                task: task.clone(),
                contract: Some(pb::ContractDraft { max_adoptions: Some(1), ..contract(None, None) }),
                ..Default::default()
            },
            None,
        )
        .await
        .expect("revise again");
    let after = history(&author, &task).await;
    assert_eq!(&after[..before.len()], &before[..]);
    assert_eq!(&after[before.len()..], &["contract_revised".to_string()]);
    let judged = early.engagement(&e1.engagement).await;
    assert_eq!(judged.contract_version, 1);
    assert_eq!(ended(&judged).map(|x| x.outcome), Some(pb::EngagementOutcome::Adopted as i32));
}

/// §7.3 rule: revising MUST NOT silently cancel an existing engagement, even a revision whose
/// eligibility excludes the engaged agent: it keeps its engagement and delivers; it is only not
/// eligible to take again (§7.3.12, §7.6.1).
async fn revision_excluding_an_engaged_agent_does_not_cancel_its_engagement(cx: Ctx) {
    let (author, agent) = (cx.agent().await, cx.agent().await);
    let task = author.task(open(), contract(None, None)).await;
    let e = agent.take_task(&task).await;
    author
        .c
        .revise_contract(
            pb::ReviseContractRequest {
                task: task.clone(),
                contract: Some(pb::ContractDraft {
                    eligibility: Some(pb::Eligibility {
                        registered_before_unix_micros: None,
                        excluded: vec![agent.id.clone()],
                    }),
                    ..contract(None, None)
                }),
                ..Default::default()
            },
            None,
        )
        .await
        .expect("revise");
    assert!(is_open(&agent.engagement(&e.engagement).await), "the engagement continues");
    assert_eq!(agent.turn().await.len(), 1, "its delivery is still owed");
    refused(try_take(&agent, &task).await, Code::NotEligible);
    let d = agent.deliver_task(&task, "still bound by v1").await;
    assert_eq!(d.engagement, e.engagement);
    adopt(&author, &e.engagement).await.expect("judged as usual");
}

// --- §7.2 Audience ------------------------------------------------------------------------------

/// §7.2 rule: an open Task may be taken by any active agent that meets the contract's eligibility,
/// each with its own engagement; a deactivated agent may not act (§7.2.2).
async fn any_active_agent_may_take_an_open_task(cx: Ctx) {
    let (author, a, b, gone) = (cx.agent().await, cx.agent().await, cx.agent().await, cx.agent().await);
    let task = author.task(open(), contract(None, None)).await;
    let ea = a.take_task(&task).await;
    let eb = b.take_task(&task).await;
    assert_ne!(ea.engagement, eb.engagement);
    assert_eq!(a.engagement(&ea.engagement).await.agent, a.id);
    assert_eq!(b.engagement(&eb.engagement).await.agent, b.id);
    assert_eq!(task_of(&author, &task).await.open_engagements, 2);
    gone.c
        .deactivate(pb::DeactivateAgentRequest { agent: gone.id.clone(), ..Default::default() }, None)
        .await
        .expect("self-deactivate");
    refused(try_take(&gone, &task).await, Code::AgentInactive);
    assert_eq!(task_of(&author, &task).await.open_engagements, 2);
}

/// §7.2 rule: a restricted Task is taken only by the agents the author names at creation. To anyone
/// else it does not exist (§12: errors must not reveal a private object): reading, taking or taking
/// with a delivery is NOT_FOUND exactly like an unknown Task, and nothing is created (§7.2.3).
async fn restricted_task_is_taken_and_read_only_by_named_agents(cx: Ctx) {
    let (author, named, outsider) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let task = author.task(restricted(&[&named]), contract(None, None)).await;
    let unknown = "task_999999999";
    let same = |a: kungfu_client::Rejection, b: kungfu_client::Rejection| {
        assert_eq!(a.code, Code::NotFound);
        assert_eq!((a.code, &a.message, &a.field, a.next), (b.code, &b.message, &b.field, b.next));
    };
    same(
        refused(contract_of(&outsider, &task, None).await, Code::NotFound),
        refused(contract_of(&outsider, unknown, None).await, Code::NotFound),
    );
    same(refused(try_take(&outsider, &task).await, Code::NotFound), rejection(try_take(&outsider, unknown).await));
    same(
        refused(try_deliver(&outsider, &task, "x", true).await, Code::NotFound),
        rejection(try_deliver(&outsider, unknown, "x", true).await),
    );
    refused(outsider.working_set(&task).await, Code::NotFound);
    assert!(
        !outsider.opportunities().await.iter().any(|o| o.object == task),
        "a restricted Task is not the outsider's opportunity"
    );
    let t = task_of(&author, &task).await;
    assert_eq!((t.open_engagements, t.current_version), (0, 1), "the refused takes created nothing");
    // The named agent reads it, finds it among its opportunities, and takes it.
    assert!(named.opportunities().await.iter().any(|o| o.kind == Some(pb::opportunity::Kind::Task(task.clone()))));
    contract_of(&named, &task, None).await.expect("the named agent reads the contract");
    let e = named.take_task(&task).await;
    assert_eq!(named.engagement(&e.engagement).await.agent, named.id);
    assert_eq!(task_of(&author, &task).await.open_engagements, 1);
}

/// §7.2 rule: the author MUST NOT take its own Task, alone or combined with a delivery (OWN_TASK,
/// nothing created), nor name itself in a restricted audience (§7.2.4).
async fn the_author_cannot_take_its_own_task(cx: Ctx) {
    let (author, other) = (cx.agent().await, cx.agent().await);
    let task = author.task(open(), contract(None, None)).await;
    let before = history(&author, &task).await;
    refused(try_take(&author, &task).await, Code::OwnTask);
    refused(try_deliver(&author, &task, "my own work", true).await, Code::OwnTask);
    assert_eq!(history(&author, &task).await, before, "no fact recorded");
    assert_eq!(task_of(&author, &task).await.open_engagements, 0);
    assert!(author.turn().await.is_empty());
    let r = author
        .c
        .create_task(
            pb::CreateTaskRequest {
                audience: Some(pb::Audience { kind: Some(restricted(&[&author, &other])) }),
                contract: contract(None, None).into(),
                ..Default::default()
            },
            None,
        )
        .await;
    refused(r, Code::InvalidTarget);
    assert!(other.opportunities().await.is_empty(), "the refused restricted Task was not created");
}

// --- §7.3 Engagement ----------------------------------------------------------------------------

/// §7.3 rule: a take request is confirmed in one atomic fact that creates an engagement binding
/// the agent, the contract version and the required input versions, and starts the delivery
/// deadline (which runs from the engagement, §7.1). Confirmation implies no further approval: the
/// author owes nothing and the agent delivers at once (§7.3.1, §7.3.3, §7.1.7).
async fn take_binds_agent_version_inputs_and_starts_the_delivery_deadline(cx: Ctx) {
    let (author, agent) = (cx.agent().await, cx.agent().await);
    let pin = author.memory("input").await;
    let task = author.task(open(), pb::ContractDraft { inputs: vec![pin.clone()], ..contract(None, None) }).await;
    let window = contract_of(&author, &task, None).await.expect("read").contract.expect("c").delivery_window_micros;
    assert!(window > 0, "an unstated delivery window takes the server's default");
    let before = history(&author, &task).await;
    let w =
        agent.c.take_task(pb::TakeTaskRequest { task: task.clone(), ..Default::default() }, None).await.expect("take");
    let receipt = w.value.receipt.clone().expect("receipt");
    assert!(receipt.seq.is_some(), "a new engagement is a recorded fact");
    let at = receipt.at_unix_micros;
    let engaged = outcome!(w.value.receipt, Engaged);
    assert_eq!((engaged.task.as_str(), engaged.contract_version, engaged.existing), (task.as_str(), 1, false));
    assert_eq!(engaged.delivery_due_unix_micros, at + window as i64, "the delivery deadline starts at the engagement");
    let mut after = history(&author, &task).await;
    assert_eq!(after.pop().as_deref(), Some("engaged"));
    assert_eq!(after, before, "exactly one fact");
    let e = agent.engagement(&engaged.engagement).await;
    assert_eq!((e.task.as_str(), e.agent.as_str(), e.contract_version), (task.as_str(), agent.id.as_str(), 1));
    assert_eq!((e.inputs.clone(), e.judge.as_str(), e.taken_at_unix_micros), (vec![pin], author.id.as_str(), at));
    assert_eq!(
        e.state,
        Some(pb::engagement::State::Open(pb::EngagementOpenState { delivery_due_unix_micros: at + window as i64 }))
    );
    let turn = agent.turn().await;
    assert_eq!(turn.len(), 1);
    assert_eq!(
        turn[0].obligation.as_ref().and_then(|o| o.kind.clone()),
        Some(pb::obligation_ref::Kind::EngagementDelivery(engaged.engagement.clone()))
    );
    assert_eq!(kinds(&turn), vec![pb::ObligationKind::Delivery]);
    assert_eq!((turn[0].object.as_str(), turn[0].arose_at_unix_micros), (task.as_str(), at));
    assert_eq!((turn[0].due_at_unix_micros, turn[0].next), (Some(at + window as i64), pb::NextStep::Deliver as i32));
    // §7.3.3: no approval step: the author owes nothing, and the agent delivers right away.
    assert!(author.turn().await.is_empty());
    let d = agent.deliver_task(&task, "work").await;
    assert_eq!(d.engagement, engaged.engagement);
}

/// §7.3 rule: a rejected take request creates nothing: no fact in the Task's history, no
/// engagement, no obligation, whatever the reason (paused, not eligible, the author) (§7.3.2).
async fn a_rejected_take_creates_nothing(cx: Ctx) {
    let (author, barred, newcomer) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let draft = pb::ContractDraft {
        eligibility: Some(pb::Eligibility { registered_before_unix_micros: None, excluded: vec![barred.id.clone()] }),
        ..contract(None, None)
    };
    let task = author.task(open(), draft).await;
    let (t0, h0) = (task_of(&author, &task).await, history(&author, &task).await);
    refused(try_take(&barred, &task).await, Code::NotEligible);
    refused(try_deliver(&barred, &task, "x", true).await, Code::NotEligible);
    refused(try_take(&author, &task).await, Code::OwnTask);
    assert_eq!((task_of(&author, &task).await, history(&author, &task).await), (t0, h0));
    author.c.pause_task(pb::PauseTaskRequest { task: task.clone(), ..Default::default() }, None).await.expect("pause");
    let (t1, h1) = (task_of(&author, &task).await, history(&author, &task).await);
    refused(try_take(&newcomer, &task).await, Code::TaskPaused);
    refused(try_deliver(&newcomer, &task, "x", true).await, Code::TaskPaused);
    assert_eq!((task_of(&author, &task).await, history(&author, &task).await), (t1.clone(), h1));
    assert_eq!(t1.open_engagements, 0);
    for a in [&author, &barred, &newcomer] {
        assert!(a.turn().await.is_empty(), "no obligation for {}", a.id);
    }
    // Nothing to deliver on: the refused takes left no engagement behind.
    refused(try_deliver(&newcomer, &task, "x", false).await, Code::InvalidState);
}

/// §7.3 rule: an agent holds at most one open engagement per Task; taking again while engaged (even
/// delivered and awaiting judgment) returns the existing engagement and records nothing (L2); once
/// it has ended, taking again forms a new one (§7.3.4).
async fn an_agent_holds_one_open_engagement_per_task(cx: Ctx) {
    let (author, agent) = (cx.agent().await, cx.agent().await);
    let task = author.task(open(), contract(None, None)).await;
    let first = agent.take_task(&task).await;
    let h = history(&author, &task).await;
    let w = agent
        .c
        .take_task(pb::TakeTaskRequest { task: task.clone(), ..Default::default() }, None)
        .await
        .expect("take again");
    assert_eq!(w.value.receipt.as_ref().and_then(|r| r.seq), None, "no fact, so no sequence number");
    let again = outcome!(w.value.receipt, Engaged);
    assert_eq!((again.engagement.as_str(), again.existing), (first.engagement.as_str(), true));
    assert_eq!(history(&author, &task).await, h);
    assert_eq!(task_of(&author, &task).await.open_engagements, 1);
    assert_eq!(agent.turn().await.len(), 1, "still one delivery obligation");
    agent.deliver_task(&task, "work").await;
    let again = agent.take_task(&task).await;
    assert_eq!((again.engagement.as_str(), again.existing), (first.engagement.as_str(), true));
    assert_eq!(task_of(&author, &task).await.open_engagements, 1);
    adopt(&author, &first.engagement).await.expect("adopt");
    let fresh = agent.take_task(&task).await;
    assert!(!fresh.existing);
    assert_ne!(fresh.engagement, first.engagement);
}

/// §7.3 rule: only the engaged agent delivers or drops; the author cannot cancel an engagement (there
/// is no cancel action, and dropping by the author or its judge is refused) (§7.3.5, §7.3.15).
async fn only_the_engaged_agent_delivers_or_drops_and_the_author_cannot_cancel(cx: Ctx) {
    let (author, judge, agent, other) = (cx.agent().await, cx.agent().await, cx.agent().await, cx.agent().await);
    let task = author.task(open(), pb::ContractDraft { judge: Some(judge.id.clone()), ..contract(None, None) }).await;
    let e = agent.take_task(&task).await;
    refused(try_deliver(&other, &task, "not mine", false).await, Code::InvalidState);
    refused(try_deliver(&author, &task, "not mine", false).await, Code::InvalidState);
    refused(drop_it(&author, &e.engagement).await, Code::NotTaker);
    refused(drop_it(&judge, &e.engagement).await, Code::NotTaker);
    refused(drop_it(&other, &e.engagement).await, Code::NotFound);
    assert!(is_open(&agent.engagement(&e.engagement).await), "nobody else ended the engagement");
    assert_eq!(agent.turn().await.len(), 1);
    drop_it(&agent, &e.engagement).await.expect("the engaged agent drops");
    let ended_e = agent.engagement(&e.engagement).await;
    assert_eq!(ended(&ended_e).map(|x| x.outcome), Some(pb::EngagementOutcome::Dropped as i32));
    assert!(agent.turn().await.is_empty());
    assert_eq!(task_of(&author, &task).await.open_engagements, 0);
}

/// §7.3 rule: a delivery deadline that passes first ends the engagement as timed out; a delivery or
/// drop after it loses (L4). The deadline runs from the engagement (§7.3.6, §7.1.7).
async fn a_delivery_deadline_that_passes_first_times_the_engagement_out(cx: Ctx) {
    let (author, agent) = (cx.agent().await, cx.agent().await);
    let task = author.task(open(), contract(Some(SECOND), None)).await;
    let w =
        agent.c.take_task(pb::TakeTaskRequest { task: task.clone(), ..Default::default() }, None).await.expect("take");
    let at = w.value.receipt.as_ref().map(|r| r.at_unix_micros).unwrap_or_default();
    let e = outcome!(w.value.receipt, Engaged);
    assert_eq!(e.delivery_due_unix_micros, at + SECOND as i64);
    sleep_past(e.delivery_due_unix_micros, Duration::from_millis(50)).await;
    lost_to_the_deadline(try_deliver(&agent, &task, "late", false).await);
    lost_to_the_deadline(drop_it(&agent, &e.engagement).await);
    let x = settled(&agent, &e.engagement).await;
    let end = ended(&x).expect("ended");
    assert_eq!(end.outcome, pb::EngagementOutcome::TimedOut as i32);
    assert_eq!(end.delivered, None, "the late delivery was not accepted");
    assert!(agent.turn().await.is_empty());
    assert!(author.turn().await.is_empty(), "a timeout creates no judgment");
    let h = history(&author, &task).await;
    assert_eq!(h.iter().filter(|f| *f == "deadline_passed").count(), 1);
    assert!(!h.iter().any(|f| f == "engagement_delivered" || f == "engagement_dropped"), "{h:?}");
    assert_eq!(task_of(&author, &task).await.open_engagements, 0);
}

/// §7.3 rule: delivery fixes the output and awaits judgment; it cannot be replaced, by either form
/// of deliver (§7.3.7).
async fn a_delivery_fixes_the_output_and_cannot_be_replaced(cx: Ctx) {
    let (author, agent) = (cx.agent().await, cx.agent().await);
    let task = author.task(open(), contract(None, None)).await;
    let (d, _) = try_deliver(&agent, &task, "first", true).await.expect("deliver");
    let h = history(&author, &task).await;
    refused(try_deliver(&agent, &task, "second", false).await, Code::InvalidState);
    refused(try_deliver(&agent, &task, "second", true).await, Code::InvalidState);
    assert_eq!(history(&author, &task).await, h);
    let e = agent.engagement(&d.engagement).await;
    assert_eq!(body(&delivered(&e).expect("awaits judgment").output), b"first");
    let by_author = author.engagement(&d.engagement).await;
    assert_eq!(body(&delivered(&by_author).expect("delivered").output), b"first", "the requester sees the first");
    assert_eq!(author.turn().await.len(), 1, "one judgment is owed");
}

/// §7.3 rule: taking and delivering MAY be one combined action; the engagement is still confirmed
/// before the delivery is accepted: one command records `engaged` then `engagement_delivered`; with
/// an engagement already held it only delivers (§7.3.8, §7.3.3).
async fn take_and_deliver_in_one_action_confirms_the_engagement_first(cx: Ctx) {
    let (author, agent, other) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let task = author.task(open(), contract(None, None)).await;
    let (d, at) = try_deliver(&agent, &task, "out", true).await.expect("take and deliver");
    let ws = author.working_set(&task).await.expect("working set");
    let mut facts: Vec<(u64, u32, String)> = ws.history.into_iter().map(|h| (h.seq, h.idx, h.fact)).collect();
    facts.reverse();
    assert_eq!(facts.len(), 3, "{facts:?}");
    let (engaged, delivered_f) = (&facts[1], &facts[2]);
    assert_eq!((engaged.2.as_str(), delivered_f.2.as_str()), ("engaged", "engagement_delivered"));
    assert_eq!((engaged.0, engaged.1, delivered_f.1), (delivered_f.0, 0, 1), "one command, engagement first");
    let e = agent.engagement(&d.engagement).await;
    assert_eq!((e.contract_version, e.taken_at_unix_micros), (1, at));
    let state = delivered(&e).expect("delivered");
    assert_eq!((state.delivered_at_unix_micros, body(&state.output)), (at, b"out".to_vec()));
    assert!(agent.turn().await.is_empty(), "the delivery obligation arose and ended in one action");
    // With an engagement already held, the combined action only delivers on it.
    let held = other.take_task(&task).await;
    let (d2, _) = try_deliver(&other, &task, "out", true).await.expect("deliver on the held engagement");
    assert_eq!(d2.engagement, held.engagement);
    let h = history(&author, &task).await;
    assert_eq!(h[h.len() - 2..], ["engaged".to_string(), "engagement_delivered".to_string()]);
    assert_eq!(h.len(), 5);
}

/// §7.3 rule: the judge adopts or rejects; only the requester: the engaged agent cannot judge its
/// own delivery (NOT_REQUESTER) and an unrelated agent cannot even see it (NOT_FOUND) (§7.3.9).
async fn only_the_requester_judges(cx: Ctx) {
    let (author, agent, stranger) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let task = author.task(open(), contract(None, None)).await;
    let (d, _) = try_deliver(&agent, &task, "work", true).await.expect("deliver");
    refused(adopt(&agent, &d.engagement).await, Code::NotRequester);
    refused(reject(&agent, &d.engagement, "bad").await, Code::NotRequester);
    refused(adopt(&stranger, &d.engagement).await, Code::NotFound);
    refused(
        stranger.c.get_engagement(pb::GetEngagementRequest { engagement: d.engagement.clone() }).await,
        Code::NotFound,
    );
    assert!(delivered(&agent.engagement(&d.engagement).await).is_some(), "still awaiting judgment");
    assert_eq!(task_of(&author, &task).await.adopted, 0);
    let turn = author.turn().await;
    assert_eq!(kinds(&turn), vec![pb::ObligationKind::Judgment]);
    assert_eq!(turn[0].next, pb::NextStep::Judge as i32);
    adopt(&author, &d.engagement).await.expect("the requester adopts");
    assert_eq!(task_of(&author, &task).await.adopted, 1);
    assert!(author.turn().await.is_empty());
}

/// §7.3 rule: a rejection MUST carry a reason the engaged agent can read: an empty reason is
/// refused with no effect; the engaged agent reads the reason in its ended engagement (§7.3.10).
async fn a_rejection_carries_a_reason_the_engaged_agent_reads(cx: Ctx) {
    let (author, agent) = (cx.agent().await, cx.agent().await);
    let task = author.task(open(), contract(None, None)).await;
    let (d, _) = try_deliver(&agent, &task, "work", true).await.expect("deliver");
    let rej = refused(reject(&author, &d.engagement, "").await, Code::InvalidArgument);
    assert_eq!(rej.field.as_deref(), Some("reason"));
    assert!(delivered(&agent.engagement(&d.engagement).await).is_some());
    assert_eq!(author.turn().await.len(), 1, "the judgment is still owed");
    reject(&author, &d.engagement, "section 2 is missing").await.expect("reject with a reason");
    let e = agent.engagement(&d.engagement).await;
    let end = ended(&e).expect("ended");
    assert_eq!(end.outcome, pb::EngagementOutcome::Rejected as i32);
    assert_eq!(body(&end.rejection_reason), b"section 2 is missing", "the engaged agent reads the reason");
    assert_eq!(body(&end.delivered), b"work");
    assert_eq!(task_of(&author, &task).await.adopted, 0);
}

/// §7.3 rule: pausing new engagements MUST NOT silently cancel an existing one: a paused Task refuses
/// new takes (TASK_PAUSED, alone or combined), the engaged agent keeps its engagement, takes again
/// (the existing one), delivers and is judged; resuming reopens it. Pause and resume are the
/// author's and never silent successes (§7.3.13, §7.3.4, §7.6.1).
async fn pausing_refuses_new_takes_but_existing_engagements_continue(cx: Ctx) {
    let (author, engaged, newcomer) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let task = author.task(open(), contract(None, None)).await;
    let e = engaged.take_task(&task).await;
    let pause = |who: &Agent| {
        let c = who.c.clone();
        let task = task.clone();
        async move { c.pause_task(pb::PauseTaskRequest { task, ..Default::default() }, None).await }
    };
    let resume = |who: &Agent| {
        let c = who.c.clone();
        let task = task.clone();
        async move { c.resume_task(pb::ResumeTaskRequest { task, ..Default::default() }, None).await }
    };
    refused(pause(&engaged).await, Code::NotAuthor);
    refused(resume(&author).await, Code::NoEffect);
    assert!(!task_of(&author, &task).await.paused);
    let w = pause(&author).await.expect("pause");
    assert_eq!(outcome!(w.value.receipt, TaskPaused).task, task);
    refused(pause(&author).await, Code::NoEffect);
    assert!(task_of(&author, &task).await.paused);
    refused(try_take(&newcomer, &task).await, Code::TaskPaused);
    refused(try_deliver(&newcomer, &task, "x", true).await, Code::TaskPaused);
    assert_eq!(task_of(&author, &task).await.open_engagements, 1);
    assert!(is_open(&engaged.engagement(&e.engagement).await), "the existing engagement continues");
    assert_eq!(engaged.turn().await.len(), 1);
    let again = engaged.take_task(&task).await;
    assert_eq!((again.engagement.as_str(), again.existing), (e.engagement.as_str(), true));
    let d = engaged.deliver_task(&task, "done while paused").await;
    assert_eq!(d.engagement, e.engagement);
    adopt(&author, &e.engagement).await.expect("judged while paused");
    refused(resume(&engaged).await, Code::NotAuthor);
    resume(&author).await.expect("resume");
    assert!(!newcomer.take_task(&task).await.existing);
}

/// §7.3 rule: deactivating the author MUST NOT silently cancel an existing engagement (§4: its
/// pending Task judgments run to their contract deadlines). The engagement stays open, the agent
/// delivers, the deactivated author cannot judge, and the judgment deadline settles it (§7.3.14).
async fn deactivating_the_author_keeps_engagements_running(cx: Ctx) {
    let (author, agent) = (cx.agent().await, cx.agent().await);
    let task = author.task(open(), contract(None, Some(3 * SECOND))).await;
    let e = agent.take_task(&task).await;
    author
        .c
        .deactivate(pb::DeactivateAgentRequest { agent: author.id.clone(), ..Default::default() }, None)
        .await
        .expect("the author deactivates itself");
    assert!(is_open(&agent.engagement(&e.engagement).await), "the engagement is not cancelled");
    assert_eq!(agent.turn().await.len(), 1, "its delivery is still owed");
    let (d, _) = try_deliver(&agent, &task, "work", false).await.expect("deliver after the author left");
    refused(adopt(&author, &d.engagement).await, Code::AgentInactive);
    assert!(delivered(&agent.engagement(&d.engagement).await).is_some(), "the refused adoption changed nothing");
    let turn = author.turn().await;
    if now_micros() < d.judgment_due_unix_micros {
        // Read before the deadline (always, unless the cluster stalled for seconds): still owed.
        assert_eq!(kinds(&turn), vec![pb::ObligationKind::Judgment], "the judgment runs to its deadline");
    }
    sleep_past(d.judgment_due_unix_micros, Duration::from_millis(50)).await;
    let x = settled(&agent, &d.engagement).await;
    assert_eq!(ended(&x).map(|x| x.outcome), Some(pb::EngagementOutcome::Undecided as i32));
    assert!(agent.turn().await.is_empty());
}

/// §7.3 rule: terminal states are adopted, rejected, undecided, dropped and timed out; they are
/// irreversible: no judgment, drop or delivery moves an ended engagement (§7.3.16).
async fn terminal_states_are_irreversible(cx: Ctx) {
    let author = cx.agent().await;
    let ag = cx.agents(5).await;
    let main = author.task(open(), contract(None, None)).await;
    let quick_delivery = author.task(open(), contract(Some(SECOND), None)).await;
    let quick_judgment = author.task(open(), contract(None, Some(SECOND))).await;
    let timed_out = ag[3].take_task(&quick_delivery).await;
    let (undecided, _) = try_deliver(&ag[4], &quick_judgment, "e", true).await.expect("deliver");
    let (adopted, _) = try_deliver(&ag[0], &main, "a", true).await.expect("deliver");
    adopt(&author, &adopted.engagement).await.expect("adopt");
    let (rejected, _) = try_deliver(&ag[1], &main, "b", true).await.expect("deliver");
    reject(&author, &rejected.engagement, "no").await.expect("reject");
    let dropped = ag[2].take_task(&main).await;
    drop_it(&ag[2], &dropped.engagement).await.expect("drop");
    sleep_past(timed_out.delivery_due_unix_micros.max(undecided.judgment_due_unix_micros), Duration::from_millis(50))
        .await;
    settled(&ag[3], &timed_out.engagement).await;
    settled(&ag[4], &undecided.engagement).await;
    let ends = [
        (&ag[0], adopted.engagement.clone(), pb::EngagementOutcome::Adopted),
        (&ag[1], rejected.engagement.clone(), pb::EngagementOutcome::Rejected),
        (&ag[2], dropped.engagement.clone(), pb::EngagementOutcome::Dropped),
        (&ag[3], timed_out.engagement.clone(), pb::EngagementOutcome::TimedOut),
        (&ag[4], undecided.engagement.clone(), pb::EngagementOutcome::Undecided),
    ];
    let histories = [history(&author, &main).await, history(&author, &quick_delivery).await];
    // An exit of an obligation its deadline ended is told so (DEADLINE_PASSED, L4); everything else
    // on an ended engagement is INVALID_STATE.
    for (agent, e, outcome) in &ends {
        let judgment_timed_out = *outcome == pb::EngagementOutcome::Undecided;
        let delivery_timed_out = *outcome == pb::EngagementOutcome::TimedOut;
        let judge = if judgment_timed_out { Code::DeadlinePassed } else { Code::InvalidState };
        refused(adopt(&author, e).await, judge);
        refused(reject(&author, e, "again").await, judge);
        refused(drop_it(agent, e).await, if delivery_timed_out { Code::DeadlinePassed } else { Code::InvalidState });
    }
    refused(try_deliver(&ag[2], &main, "late", false).await, Code::InvalidState);
    refused(try_deliver(&ag[3], &quick_delivery, "late", false).await, Code::DeadlinePassed);
    assert_eq!([history(&author, &main).await, history(&author, &quick_delivery).await], histories);
    for (agent, e, expected) in &ends {
        let x = agent.engagement(e).await;
        assert_eq!(ended(&x).map(|x| x.outcome), Some(*expected as i32), "{e} stays {expected:?}");
    }
    assert_eq!(task_of(&author, &main).await.adopted, 1);
    assert_eq!(task_of(&author, &quick_judgment).await.adopted, 0);
}

/// §7.3 rule: any settlement MUST consume exactly one terminal fact: a deadline the server's timer
/// settles is recorded once however long it keeps running, and two judgments racing for one
/// delivery end it once (L5) (§7.3.17).
async fn every_settlement_consumes_exactly_one_terminal_fact(cx: Ctx) {
    let (author, a, b, c) = (cx.agent().await, cx.agent().await, cx.agent().await, cx.agent().await);
    let quick_delivery = author.task(open(), contract(Some(SECOND), None)).await;
    let quick_judgment = author.task(open(), contract(None, Some(SECOND))).await;
    let raced = author.task(open(), contract(None, None)).await;
    let ea = a.take_task(&quick_delivery).await;
    let (eb, _) = try_deliver(&b, &quick_judgment, "b", true).await.expect("deliver");
    let (ec, _) = try_deliver(&c, &raced, "c", true).await.expect("deliver");
    let (adopted, rejected) = futures::join!(adopt(&author, &ec.engagement), reject(&author, &ec.engagement, "no"));
    let winner = match (adopted, rejected) {
        (Ok(()), r) => {
            refused(r, Code::InvalidState);
            pb::EngagementOutcome::Adopted
        }
        (r, Ok(())) => {
            refused(r, Code::InvalidState);
            pb::EngagementOutcome::Rejected
        }
        (x, y) => panic!("exactly one judgment must win: {x:?} {y:?}"),
    };
    let x = c.engagement(&ec.engagement).await;
    assert_eq!(ended(&x).map(|x| x.outcome), Some(winner as i32));
    let h = history(&author, &raced).await;
    assert_eq!(h.iter().filter(|f| *f == "engagement_judged").count(), 1, "{h:?}");
    sleep_past(ea.delivery_due_unix_micros.max(eb.judgment_due_unix_micros), Duration::from_millis(50)).await;
    settled(&a, &ea.engagement).await;
    settled(&b, &eb.engagement).await;
    // Give the timers time to fire again if they would.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for (task, e, expected) in [
        (&quick_delivery, &ea.engagement, pb::EngagementOutcome::TimedOut),
        (&quick_judgment, &eb.engagement, pb::EngagementOutcome::Undecided),
    ] {
        let h = history(&author, task).await;
        assert_eq!(h.iter().filter(|f| *f == "deadline_passed").count(), 1, "{h:?}");
        assert!(!h.iter().any(|f| f == "engagement_judged" || f == "engagement_dropped"), "{h:?}");
        let x = author.engagement(e).await;
        assert_eq!(ended(&x).map(|x| x.outcome), Some(expected as i32));
    }
    assert_eq!(task_of(&author, &raced).await.open_engagements, 0);
}

// --- §7.4 Adoption limit ------------------------------------------------------------------------

/// §7.4 rule: only adopted deliveries count toward a stated maximum, checked at the moment of
/// adoption, first come first served (L5). Fifty agents each take and deliver in one action under a
/// limit of three (engagements and deliveries consume nothing); the requester then adopts all fifty
/// at once: exactly three succeed, 47 are refused ADOPTION_LIMIT_REACHED with no effect (§7.4.1,
/// §7.4.2).
async fn fifty_concurrent_adoptions_never_overrun_the_adoption_limit(cx: Ctx) {
    let author = cx.agent().await;
    let agents = cx.agents(50).await;
    let task = author.task(open(), pb::ContractDraft { max_adoptions: Some(3), ..contract(None, None) }).await;
    let deliveries = join_all(agents.iter().map(|a| try_deliver(a, &task, "work", true))).await;
    let engagements: Vec<String> =
        deliveries.into_iter().map(|d| d.expect("take and deliver under the limit").0.engagement).collect();
    let t = task_of(&author, &task).await;
    assert_eq!((t.open_engagements, t.adopted), (50, 0), "engagements and deliveries do not consume the limit");
    let results = join_all(engagements.iter().map(|e| adopt(&author, e))).await;
    let mut won = Vec::new();
    for (e, r) in engagements.iter().zip(results) {
        match r {
            Ok(()) => won.push(e.clone()),
            Err(err) => {
                refused(Err::<(), _>(err), Code::AdoptionLimitReached);
            }
        }
    }
    assert_eq!(won.len(), 3, "exactly three adoptions succeed");
    let t = task_of(&author, &task).await;
    assert_eq!((t.adopted, t.open_engagements), (3, 47));
    for (agent, e) in agents.iter().zip(&engagements) {
        let x = agent.engagement(e).await;
        if won.contains(e) {
            assert_eq!(ended(&x).map(|x| x.outcome), Some(pb::EngagementOutcome::Adopted as i32));
        } else {
            assert!(delivered(&x).is_some(), "a refused adoption had no effect on {e}");
        }
    }
    assert_eq!(author.turn().await.len(), 47, "the other judgments are still owed");
    assert_eq!(history(&author, &task).await.iter().filter(|f| *f == "engagement_judged").count(), 3);
}

/// §7.4 rule: the limit is checked at the moment of adoption, first come first served: adoptions
/// one to three succeed, the fourth is refused ADOPTION_LIMIT_REACHED with no effect; the refused
/// delivery can still be rejected, never adopted (§7.4.1, §7.4.2).
async fn adoptions_are_first_come_first_served(cx: Ctx) {
    let author = cx.agent().await;
    let agents = cx.agents(5).await;
    let task = author.task(open(), pb::ContractDraft { max_adoptions: Some(3), ..contract(None, None) }).await;
    let mut engagements = Vec::new();
    for a in &agents {
        engagements.push(try_deliver(a, &task, "work", true).await.expect("deliver").0.engagement);
    }
    for (i, e) in engagements[..3].iter().enumerate() {
        adopt(&author, e).await.expect("within the limit");
        assert_eq!(task_of(&author, &task).await.adopted, i as u32 + 1);
    }
    let h = history(&author, &task).await;
    for e in &engagements[3..] {
        refused(adopt(&author, e).await, Code::AdoptionLimitReached);
    }
    assert_eq!(history(&author, &task).await, h, "the refused adoptions recorded nothing");
    assert_eq!(task_of(&author, &task).await.adopted, 3);
    assert!(delivered(&agents[3].engagement(&engagements[3]).await).is_some());
    assert_eq!(author.turn().await.len(), 2);
    reject(&author, &engagements[3], "the limit is reached").await.expect("reject instead");
    let x = agents[3].engagement(&engagements[3]).await;
    assert_eq!(ended(&x).map(|x| x.outcome), Some(pb::EngagementOutcome::Rejected as i32));
}

/// §7.4 rule: only adopted deliveries count: engagements, drops, rejections and undecided
/// deliveries leave the limit free (§7.4.1).
async fn only_adopted_deliveries_count_toward_the_limit(cx: Ctx) {
    let author = cx.agent().await;
    let ag = cx.agents(5).await;
    let task = author.task(open(), pb::ContractDraft { max_adoptions: Some(1), ..contract(None, Some(SECOND)) }).await;
    let (undecided, _) = try_deliver(&ag[0], &task, "a", true).await.expect("deliver");
    let (rejected, _) = try_deliver(&ag[1], &task, "b", true).await.expect("deliver");
    lost_or_rejected(reject(&author, &rejected.engagement, "no").await);
    let dropped = ag[2].take_task(&task).await;
    drop_it(&ag[2], &dropped.engagement).await.expect("drop");
    sleep_past(undecided.judgment_due_unix_micros.max(rejected.judgment_due_unix_micros), Duration::from_millis(50))
        .await;
    let x = settled(&ag[0], &undecided.engagement).await;
    assert_eq!(ended(&x).map(|x| x.outcome), Some(pb::EngagementOutcome::Undecided as i32));
    settled(&ag[1], &rejected.engagement).await;
    assert_eq!(task_of(&author, &task).await.adopted, 0);
    // A revision with a longer judgment window keeps the limit of one; nothing has consumed it.
    author
        .c
        .revise_contract(
            pb::ReviseContractRequest {
                task: task.clone(),
                contract: Some(pb::ContractDraft { max_adoptions: Some(1), ..contract(None, None) }),
                ..Default::default()
            },
            None,
        )
        .await
        .expect("revise");
    let (first, _) = try_deliver(&ag[3], &task, "d", true).await.expect("deliver");
    let (second, _) = try_deliver(&ag[4], &task, "e", true).await.expect("deliver");
    adopt(&author, &first.engagement).await.expect("the limit was still free");
    refused(adopt(&author, &second.engagement).await, Code::AdoptionLimitReached);
    assert_eq!(task_of(&author, &task).await.adopted, 1);
}

/// A rejection racing a 1 s judgment window: either it lands, or the deadline won.
#[track_caller]
fn lost_or_rejected(r: Result<(), Error>) {
    if r.is_err() {
        lost_to_the_deadline(r);
    }
}

// --- §7.5 Tasks and threads ---------------------------------------------------------------------

/// §7.5 rule: an entry MAY reference a Task; members then read its contract layer inside the
/// thread. The reference changes nothing in the Task: the Task does not enter the thread's
/// obligations, the members gain no access to its engagements or deliveries, and its visibility
/// (a restricted audience) never changes (§7.5.1, §7.5.2, §7.5.3).
async fn an_entry_referencing_a_task_shows_members_only_its_contract_layer(cx: Ctx) {
    let (author, named, member) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let task = author.task(restricted(&[&named]), contract(None, None)).await;
    let (d, _) = try_deliver(&named, &task, "delivered work", true).await.expect("deliver");
    let thread = cx.team(&author, &[&member]).await;
    let (t0, h0) = (task_of(&author, &task).await, history(&author, &task).await);
    let posted = author.post(Post::text(&thread.id, "see this task").ask(Vec::<String>::new()).task_ref(&task)).await;
    let entry = member
        .c
        .get_entry(pb::GetEntryRequest { thread: thread.id.clone(), entry: posted.entry })
        .await
        .expect("member reads the entry");
    assert_eq!(entry.entry.and_then(|e| e.task_ref), Some(task.clone()));
    let seen = member
        .c
        .get_referenced_task(pb::GetReferencedTaskRequest { thread: thread.id.clone(), entry: posted.entry })
        .await
        .expect("a member reads the contract layer through the entry");
    assert_eq!((seen.task.as_str(), seen.author.as_str(), seen.paused), (task.as_str(), author.id.as_str(), false));
    let cv = seen.contract.expect("contract version");
    assert_eq!(cv.version, 1);
    let c = cv.contract.expect("contract");
    assert_eq!((body(&c.requirements), body(&c.acceptance)), (b"requirements".to_vec(), b"acceptance".to_vec()));
    // The Task is as it was: no fact, no change of audience, of counts or of version.
    assert_eq!((task_of(&author, &task).await, history(&author, &task).await), (t0.clone(), h0));
    assert_eq!(t0.audience, Some(pb::Audience { kind: Some(restricted(&[&named])) }));
    // The member gains nothing else: not the Task, not its engagement or delivery, no right to take.
    refused(contract_of(&member, &task, None).await, Code::NotFound);
    refused(
        member.c.get_engagement(pb::GetEngagementRequest { engagement: d.engagement.clone() }).await,
        Code::NotFound,
    );
    refused(try_take(&member, &task).await, Code::NotFound);
    assert!(!member.opportunities().await.iter().any(|o| o.object == task));
    // The Task enters no thread obligation: the member owes nothing; the author owes only the
    // judgment it owed before, on the Task.
    assert!(member.turn().await.is_empty());
    let turn = author.turn().await;
    assert_eq!(kinds(&turn), vec![pb::ObligationKind::Judgment]);
    assert_eq!(turn[0].object, task);
    let ws = member.working_set(&thread.id).await.expect("thread working set");
    assert!(ws.obligations.is_empty());
    // The read goes through the reference only, and only while a member.
    let plain = author.post(Post::text(&thread.id, "no reference").ask(Vec::<String>::new())).await;
    refused(
        member
            .c
            .get_referenced_task(pb::GetReferencedTaskRequest { thread: thread.id.clone(), entry: plain.entry })
            .await,
        Code::NotFound,
    );
    member.c.leave(pb::LeaveRequest { thread: thread.id.clone(), ..Default::default() }, None).await.expect("leave");
    refused(
        member
            .c
            .get_referenced_task(pb::GetReferencedTaskRequest { thread: thread.id.clone(), entry: posted.entry })
            .await,
        Code::NotFound,
    );
}

// --- §7.6 Application mechanisms ----------------------------------------------------------------

/// §7.6 rule: the runtime's own Task mechanisms (pausing, eligibility, revision, restricted
/// opportunities) MAY be stricter but add no obligation outside the skeleton: creating, revising,
/// pausing and resuming Tasks leaves every turn empty, a restricted Task is an opportunity and
/// binds no one, and the only obligations a Task ever gives are the engaged agent's delivery and
/// the requester's judgment (§7.6.1, §7.6.2).
async fn task_mechanisms_create_no_obligation_outside_the_skeleton(cx: Ctx) {
    let (author, named, excluded) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let open_task = author.task(open(), contract(None, None)).await;
    let private = author.task(restricted(&[&named]), contract(None, None)).await;
    author
        .c
        .revise_contract(
            pb::ReviseContractRequest {
                task: open_task.clone(),
                contract: Some(pb::ContractDraft {
                    eligibility: Some(pb::Eligibility {
                        registered_before_unix_micros: None,
                        excluded: vec![excluded.id.clone()],
                    }),
                    ..contract(None, None)
                }),
                ..Default::default()
            },
            None,
        )
        .await
        .expect("revise");
    for t in [&open_task, &private] {
        author.c.pause_task(pb::PauseTaskRequest { task: t.clone(), ..Default::default() }, None).await.expect("pause");
        author
            .c
            .resume_task(pb::ResumeTaskRequest { task: t.clone(), ..Default::default() }, None)
            .await
            .expect("resume");
    }
    for a in [&author, &named, &excluded] {
        assert!(a.turn().await.is_empty(), "an open or restricted Task obliges nobody ({})", a.id);
    }
    let opportunities = named.opportunities().await;
    assert_eq!(opportunities.len(), 1, "{opportunities:?}");
    assert_eq!(opportunities[0].kind, Some(pb::opportunity::Kind::Task(private.clone())));
    assert!(excluded.opportunities().await.is_empty());
    let e = named.take_task(&private).await;
    let turn = named.turn().await;
    assert_eq!(kinds(&turn), vec![pb::ObligationKind::Delivery]);
    assert_eq!(
        turn[0].obligation.as_ref().and_then(|o| o.kind.clone()),
        Some(pb::obligation_ref::Kind::EngagementDelivery(e.engagement.clone()))
    );
    assert!(author.turn().await.is_empty());
    named.deliver_task(&private, "work").await;
    assert!(named.turn().await.is_empty());
    let turn = author.turn().await;
    assert_eq!(kinds(&turn), vec![pb::ObligationKind::Judgment]);
    assert_eq!(
        turn[0].obligation.as_ref().and_then(|o| o.kind.clone()),
        Some(pb::obligation_ref::Kind::EngagementJudgment(e.engagement.clone()))
    );
    // Pausing with a judgment pending adds nothing and removes nothing.
    author
        .c
        .pause_task(pb::PauseTaskRequest { task: private.clone(), ..Default::default() }, None)
        .await
        .expect("pause");
    assert_eq!(author.turn().await, turn);
    assert!(named.turn().await.is_empty() && excluded.turn().await.is_empty());
}
