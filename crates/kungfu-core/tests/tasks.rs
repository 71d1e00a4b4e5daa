//! §7 Task: contract (§7.1), audience (§7.2), engagement (§7.3), adoption limit (§7.4), Tasks and
//! threads (§7.5), and the Task deadlines (L4). Every step also runs `validate` and the rebuild
//! from facts (L1) through `World`; the tests here assert the specific behaviour of each rule.

use kungfu_core::model::*;
use kungfu_core::testkit::World;
use kungfu_core::*;
use kungfu_types::*;
use std::collections::BTreeSet;
use std::fmt::Debug;

// --- helpers --------------------------------------------------------------------------------------

const DELIVERY: Micros = Micros::from_secs(100);
const JUDGMENT: Micros = Micros::from_secs(200);

/// A contract with short, explicit windows, judged by the author.
fn draft() -> ContractDraft {
    ContractDraft {
        delivery_window: Some(DELIVERY),
        judgment_window: Some(JUDGMENT),
        ..ContractDraft::simple("write a summary", "covers every section")
    }
}

fn restricted(agents: &[AgentId]) -> Audience {
    Audience::Restricted(agents.iter().copied().collect())
}

#[track_caller]
fn new_task(w: &mut World, author: AgentId, audience: Audience, contract: ContractDraft) -> TaskId {
    match w.ok(author, Action::CreateTask { audience, contract }) {
        ActionResult::TaskCreated { task, version } => {
            assert_eq!(version, Version::FIRST);
            task
        }
        other => panic!("{other:?}"),
    }
}

#[track_caller]
fn open_task(w: &mut World, author: AgentId) -> TaskId {
    new_task(w, author, Audience::Open, draft())
}

#[track_caller]
fn take(w: &mut World, agent: AgentId, task: TaskId) -> EngagementId {
    match w.ok(agent, Action::TakeTask { task }) {
        ActionResult::Engaged { engagement, existing: false, task: t, .. } => {
            assert_eq!(t, task);
            engagement
        }
        other => panic!("{other:?}"),
    }
}

#[track_caller]
fn deliver(w: &mut World, agent: AgentId, task: TaskId, output: &str, take: bool) -> EngagementId {
    match w.ok(agent, Action::DeliverTask { task, output: Content::from(output), take }) {
        ActionResult::EngagementDelivered { engagement, .. } => engagement,
        other => panic!("{other:?}"),
    }
}

#[track_caller]
fn memory(w: &mut World, author: AgentId, text: &str) -> MemoryId {
    match w.ok(author, Action::CreateMemory { content: Content::from(text) }) {
        ActionResult::MemoryCreated { memory, .. } => memory,
        other => panic!("{other:?}"),
    }
}

fn pin(memory: MemoryId, version: u32) -> Pin {
    Pin { memory, version: Version(version) }
}

fn engagement(w: &World, id: EngagementId) -> Engagement {
    w.state.engagement(id).expect("state").expect("engagement exists")
}

fn task_record(w: &World, id: TaskId) -> Task {
    w.state.task(id).expect("state").expect("task exists")
}

fn outcome(w: &World, id: EngagementId) -> Option<EngagementOutcome> {
    match engagement(w, id).state {
        EngagementState::Ended { outcome, .. } => Some(outcome),
        _ => None,
    }
}

fn facts(w: &World) -> Vec<JournaledFact> {
    rebuild::all_facts(&w.state).expect("journals")
}

/// Facts recorded in a Task's journal.
fn task_facts(w: &World, task: TaskId) -> usize {
    facts(w).iter().filter(|f| f.fact.objects().contains(&ObjectRef::Task(task))).count()
}

/// Terminal facts of one engagement: a judgment, a drop, or a deadline that ended it.
fn terminal_facts(w: &World, e: EngagementId) -> usize {
    facts(w)
        .iter()
        .filter(|f| match &f.fact {
            Fact::EngagementJudged { engagement, .. } | Fact::EngagementDropped { engagement, .. } => *engagement == e,
            Fact::DeadlinePassed {
                obligation: ObligationId::EngagementDelivery(x) | ObligationId::EngagementJudgment(x),
                ..
            } => *x == e,
            _ => false,
        })
        .count()
}

fn deadline_results(w: &World) -> Vec<(ObligationId, ExpiryResult)> {
    facts(w)
        .into_iter()
        .filter_map(|f| match f.fact {
            Fact::DeadlinePassed { obligation, result, .. } => Some((obligation, result)),
            _ => None,
        })
        .collect()
}

#[track_caller]
fn read_rejection<T: Debug>(r: read::ReadResult<T>) -> Rejection {
    match r {
        Err(read::ReadError::Rejected(r)) => r,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

fn deactivate(w: &mut World, agent: AgentId) {
    let key = w.fresh_key();
    let applied = w.exec(Principal::Operator, Action::DeactivateAgent { agent }, Some(key));
    assert!(applied.outcome.is_ok(), "{:?}", applied.outcome);
}

/// Asserts two rejections cannot be told apart (§12: unknown and unreadable look the same).
#[track_caller]
fn assert_indistinguishable(a: &Rejection, b: &Rejection) {
    assert_eq!(a.code, Code::NotFound);
    assert_eq!((a.code, &a.message, &a.field, a.next), (b.code, &b.message, &b.field, b.next));
}

// --- §7.1 Contract --------------------------------------------------------------------------------

/// §7.1 (§7.1.1, §7.1.4, §7.0.1): a contract states every part, and the Task records it as version 1.
#[test]
fn full_contract_is_recorded_as_the_first_version() {
    let mut w = World::new();
    let author = w.register();
    let judge = w.register();
    let barred = w.register();
    let m = memory(&mut w, author, "source notes");
    let contract = ContractDraft {
        requirements: Content::from("summarise the notes"),
        output_structure: Some(Content::from("markdown, one section")),
        inputs: vec![pin(m, 1)],
        references: Some(Content::from("the house style guide")),
        delivery_window: Some(Micros::from_secs(3600)),
        judgment_window: Some(Micros::from_secs(7200)),
        on_missing_judgment: MissingJudgment::Adopted,
        acceptance: Content::from("covers every section"),
        judge: Judge::Agent(judge),
        eligibility: Eligibility { registered_before: Some(w.now), excluded: BTreeSet::from([barred]) },
        max_adoptions: Some(2),
    };
    let task = new_task(&mut w, author, Audience::Open, contract.clone());
    let view = read::read_task(&w.state, author, task, None).expect("author reads");
    assert_eq!(view.task.author, author);
    assert_eq!(view.task.current, Version::FIRST);
    assert_eq!(view.contract.version, Version::FIRST);
    let c = view.contract.contract;
    assert_eq!(c.requirements, contract.requirements);
    assert_eq!(c.output_structure, contract.output_structure);
    assert_eq!(c.inputs, vec![pin(m, 1)]);
    assert_eq!(c.references, contract.references);
    assert_eq!(c.delivery_window, Micros::from_secs(3600));
    assert_eq!(c.judgment_window, Micros::from_secs(7200));
    assert_eq!(c.on_missing_judgment, MissingJudgment::Adopted);
    assert_eq!(c.acceptance, contract.acceptance);
    assert_eq!(c.judge, Judge::Agent(judge));
    assert_eq!(c.eligibility, contract.eligibility);
    assert_eq!(c.max_adoptions, Some(2));
}

/// §7.1 (§7.1.3, L4.2): unstated windows take the configured defaults; the missing-judgment result is undecided unless stated.
#[test]
fn unstated_windows_take_defaults_and_missing_judgment_defaults_to_undecided() {
    let mut w = World::new();
    let author = w.register();
    let task = new_task(&mut w, author, Audience::Open, ContractDraft::simple("req", "acc"));
    let c = read::read_task(&w.state, author, task, None).expect("read").contract.contract;
    assert_eq!(c.delivery_window, w.limits.default_delivery_window);
    assert_eq!(c.judgment_window, w.limits.default_judgment_window);
    assert_eq!(c.on_missing_judgment, MissingJudgment::Undecided);
    assert_eq!(MissingJudgment::default(), MissingJudgment::Undecided);
    assert_eq!(c.judge, Judge::Author);
}

/// §7.1 (§7.1.2): a required input of another agent's public Memory is not the author's to make available.
#[test]
fn required_input_of_another_agents_public_memory_is_not_entitled() {
    let mut w = World::new();
    let author = w.register();
    let other = w.register();
    let m = memory(&mut w, other, "public notes");
    w.ok(other, Action::PublishMemory { memory: m });
    let before = facts(&w).len();
    let r = w.err(
        author,
        Action::CreateTask { audience: Audience::Open, contract: ContractDraft { inputs: vec![pin(m, 1)], ..draft() } },
    );
    assert_eq!(r.code, Code::NotEntitled);
    assert_eq!(r.field.as_deref(), Some("contract.inputs[0]"));
    assert_eq!(facts(&w).len(), before, "a rejected creation records nothing");
    assert!(w.state.task(TaskId(1)).expect("state").is_none());
}

/// §7.1 (§7.1.2, §5.6): a withdrawn Memory takes no new references, so it cannot be a required input.
#[test]
fn required_input_of_a_withdrawn_memory_is_rejected() {
    let mut w = World::new();
    let author = w.register();
    let keep = memory(&mut w, author, "kept");
    let gone = memory(&mut w, author, "gone");
    w.ok(author, Action::WithdrawMemory { memory: gone });
    let r = w.err(
        author,
        Action::CreateTask {
            audience: Audience::Open,
            contract: ContractDraft { inputs: vec![pin(keep, 1), pin(gone, 1)], ..draft() },
        },
    );
    assert_eq!(r.code, Code::MemoryWithdrawn);
    assert_eq!(r.field.as_deref(), Some("contract.inputs[1]"));
}

/// §7.1 (§7.1.2, §5.4): a required input pins an existing version of the author's Memory; version 0 or a future one is invalid.
#[test]
fn required_input_naming_a_nonexistent_version_is_invalid() {
    let mut w = World::new();
    let author = w.register();
    let m = memory(&mut w, author, "v1");
    for v in [0, 2] {
        let r = w.err(
            author,
            Action::CreateTask {
                audience: Audience::Open,
                contract: ContractDraft { inputs: vec![pin(m, v)], ..draft() },
            },
        );
        assert_eq!(r.code, Code::InvalidArgument, "version {v}");
        assert_eq!(r.field.as_deref(), Some("contract.inputs[0]"));
    }
    // An older version of the author's own Memory is a valid pin.
    w.ok(author, Action::UpdateMemory { memory: m, content: Content::from("v2") });
    let task = new_task(&mut w, author, Audience::Open, ContractDraft { inputs: vec![pin(m, 1)], ..draft() });
    assert_eq!(read::read_task(&w.state, author, task, None).expect("read").contract.contract.inputs, vec![pin(m, 1)]);
}

/// §7.1 (§7.1.2, §12.5): another agent's private Memory as input is NOT_FOUND, exactly like an unknown Memory.
#[test]
fn required_input_of_another_agents_private_memory_is_not_found() {
    let mut w = World::new();
    let author = w.register();
    let other = w.register();
    let private = memory(&mut w, other, "secret");
    let r = w.err(
        author,
        Action::CreateTask {
            audience: Audience::Open,
            contract: ContractDraft { inputs: vec![pin(private, 1)], ..draft() },
        },
    );
    assert_eq!(r.field.as_deref(), Some("contract.inputs[0]"));
    let unknown = w.err(
        author,
        Action::CreateTask {
            audience: Audience::Open,
            contract: ContractDraft { inputs: vec![pin(MemoryId(999), 1)], ..draft() },
        },
    );
    assert_indistinguishable(&r, &unknown);
}

/// §7 (§7.0.1): a designated judge must be an agent: an unknown or deactivated agent is an invalid target.
#[test]
fn designated_judge_must_be_an_existing_active_agent() {
    let mut w = World::new();
    let author = w.register();
    let retired = w.register();
    deactivate(&mut w, retired);
    for judge in [AgentId(999), retired] {
        let r = w.err(
            author,
            Action::CreateTask {
                audience: Audience::Open,
                contract: ContractDraft { judge: Judge::Agent(judge), ..draft() },
            },
        );
        assert_eq!(r.code, Code::InvalidTarget, "judge {judge}");
        assert_eq!(r.field.as_deref(), Some("contract.judge"));
    }
    let live = w.register();
    let task = new_task(&mut w, author, Audience::Open, ContractDraft { judge: Judge::Agent(live), ..draft() });
    assert_eq!(
        read::read_task(&w.state, live, task, None).expect("the judge reads").contract.contract.judge,
        Judge::Agent(live)
    );
}

/// §7.1 (§7.1.4): a stated maximum number of adoptions is at least one.
#[test]
fn max_adoptions_of_zero_is_invalid() {
    let mut w = World::new();
    let author = w.register();
    let r = w.err(
        author,
        Action::CreateTask { audience: Audience::Open, contract: ContractDraft { max_adoptions: Some(0), ..draft() } },
    );
    assert_eq!(r.code, Code::InvalidArgument);
    assert_eq!(r.field.as_deref(), Some("contract.max_adoptions"));
    let task = open_task(&mut w, author);
    let r =
        w.err(author, Action::ReviseContract { task, contract: ContractDraft { max_adoptions: Some(0), ..draft() } });
    assert_eq!(r.code, Code::InvalidArgument);
    assert_eq!(task_record(&w, task).current, Version::FIRST);
}

/// §7.1 (§7.1.5, §7.2.1): only the author revises; each revision is a new contract version and leaves the audience as it was.
#[test]
fn only_the_author_revises_and_each_revision_is_a_new_version() {
    let mut w = World::new();
    let author = w.register();
    let named = w.register();
    let outsider = w.register();
    let task = new_task(&mut w, author, restricted(&[named]), draft());
    let revised = ContractDraft { requirements: Content::from("revised"), ..draft() };
    assert_eq!(w.err(named, Action::ReviseContract { task, contract: revised.clone() }).code, Code::NotAuthor);
    assert_eq!(w.err(outsider, Action::ReviseContract { task, contract: revised.clone() }).code, Code::NotFound);
    assert_eq!(task_record(&w, task).current, Version::FIRST);
    for expected in [2, 3] {
        match w.ok(author, Action::ReviseContract { task, contract: revised.clone() }) {
            ActionResult::ContractRevised { task: t, version } => assert_eq!((t, version), (task, Version(expected))),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(task_record(&w, task).current, Version(3));
    // §7.2.1: a revision never changes the audience.
    assert_eq!(task_record(&w, task).audience, restricted(&[named]));
    // Version 1 is kept as it was.
    let v1 = read::read_task(&w.state, author, task, Some(Version(1))).expect("author reads v1").contract;
    assert_eq!(v1.contract.requirements, Content::from("write a summary"));
}

/// §7.1 (§7.1.6, §7.3.1, §7.3.12): a revision binds only later engagements; an earlier one keeps its version, inputs and deadline.
#[test]
fn revision_binds_only_later_engagements() {
    let mut w = World::new();
    let author = w.register();
    let early = w.register();
    let late = w.register();
    let m1 = memory(&mut w, author, "input one");
    let m2 = memory(&mut w, author, "input two");
    let task = new_task(&mut w, author, Audience::Open, ContractDraft { inputs: vec![pin(m1, 1)], ..draft() });
    let e1 = take(&mut w, early, task);
    let v2_window = Micros::from_secs(500);
    w.ok(
        author,
        Action::ReviseContract {
            task,
            contract: ContractDraft { inputs: vec![pin(m2, 1)], delivery_window: Some(v2_window), ..draft() },
        },
    );
    let receipt = w.ok(late, Action::TakeTask { task });
    let ActionResult::Engaged { engagement: e2, contract_version, existing: false, .. } = receipt else {
        panic!("{receipt:?}")
    };
    assert_eq!(contract_version, Version(2));

    let first = engagement(&w, e1);
    assert_eq!(first.contract_version, Version(1));
    assert_eq!(first.inputs, vec![pin(m1, 1)]);
    assert_eq!(first.state, EngagementState::Open { delivery_due: first.taken_at.plus(DELIVERY) });
    let second = engagement(&w, e2);
    assert_eq!(second.contract_version, Version(2));
    assert_eq!(second.inputs, vec![pin(m2, 1)]);
    assert_eq!(second.state, EngagementState::Open { delivery_due: second.taken_at.plus(v2_window) });
    // The earlier engagement was not cancelled: it is delivered and judged as usual.
    deliver(&mut w, early, task, "done", false);
    w.ok(author, Action::AdoptEngagement { engagement: e1 });
    assert_eq!(outcome(&w, e1), Some(EngagementOutcome::Adopted));
}

/// §7.1 (§7.1.6, §7.0.1): the requester is the one of the bound version; the author gets NOT_REQUESTER where it designated a judge.
#[test]
fn engagement_is_judged_by_the_requester_of_its_bound_version() {
    let mut w = World::new();
    let author = w.register();
    let judge = w.register();
    let a = w.register();
    let b = w.register();
    let task = open_task(&mut w, author);
    let e1 = take(&mut w, a, task);
    w.ok(author, Action::ReviseContract { task, contract: ContractDraft { judge: Judge::Agent(judge), ..draft() } });
    let e2 = take(&mut w, b, task);
    deliver(&mut w, a, task, "a's work", false);
    deliver(&mut w, b, task, "b's work", false);
    assert_eq!(engagement(&w, e1).judge, author);
    assert_eq!(engagement(&w, e2).judge, judge);
    // The designated judge of version 2 has no say over, and no view of, the version 1 engagement.
    assert_eq!(w.err(judge, Action::AdoptEngagement { engagement: e1 }).code, Code::NotFound);
    assert_eq!(w.err(author, Action::AdoptEngagement { engagement: e2 }).code, Code::NotRequester);
    w.ok(author, Action::AdoptEngagement { engagement: e1 });
    w.ok(judge, Action::RejectEngagement { engagement: e2, reason: Content::from("incomplete") });
    assert_eq!(outcome(&w, e1), Some(EngagementOutcome::Adopted));
    assert_eq!(outcome(&w, e2), Some(EngagementOutcome::Rejected { reason: Content::from("incomplete") }));
}

/// §7.1 (§7.1.6, §7.1.3): a missing judgment settles as the bound version states, not as the current one.
#[test]
fn missing_judgment_result_follows_the_bound_contract_version() {
    let mut w = World::new();
    let author = w.register();
    let a = w.register();
    let b = w.register();
    let task = open_task(&mut w, author);
    let e1 = take(&mut w, a, task);
    w.ok(
        author,
        Action::ReviseContract {
            task,
            contract: ContractDraft { on_missing_judgment: MissingJudgment::Adopted, ..draft() },
        },
    );
    let e2 = take(&mut w, b, task);
    deliver(&mut w, a, task, "a", false);
    deliver(&mut w, b, task, "b", false);
    w.advance(JUDGMENT);
    let ended = w.fire_due_timers();
    assert_eq!(ended, vec![ObligationId::EngagementJudgment(e1), ObligationId::EngagementJudgment(e2)]);
    assert_eq!(outcome(&w, e1), Some(EngagementOutcome::Undecided));
    assert_eq!(outcome(&w, e2), Some(EngagementOutcome::Adopted));
    assert_eq!(task_record(&w, task).adopted, 1);
}

/// §7.1 (§7.1.6, L1.2): judgment facts never change: a later revision leaves every earlier fact and the outcome as they were.
#[test]
fn judgment_facts_never_change_after_revision() {
    let mut w = World::new();
    let author = w.register();
    let a = w.register();
    let task = open_task(&mut w, author);
    let e = deliver(&mut w, a, task, "work", true);
    w.ok(author, Action::AdoptEngagement { engagement: e });
    let before = facts(&w);
    assert!(matches!(before.last().map(|f| &f.fact), Some(Fact::EngagementJudged { verdict: Verdict::Adopt, .. })));
    w.ok(
        author,
        Action::ReviseContract {
            task,
            contract: ContractDraft { max_adoptions: Some(1), acceptance: Content::from("stricter"), ..draft() },
        },
    );
    w.ok(author, Action::PauseTask { task });
    let after = facts(&w);
    assert_eq!(after.len(), before.len() + 2);
    assert_eq!(&after[..before.len()], &before[..]);
    let ended = engagement(&w, e);
    assert_eq!(ended.contract_version, Version(1));
    assert!(
        matches!(ended.state, EngagementState::Ended { outcome: EngagementOutcome::Adopted, delivered: Some(ref d), .. } if *d == Content::from("work"))
    );
}

/// §7.1 (§7.1.5, §9.8): read_task gives the current version by default; the author, the judge and an engaged agent's bound version only otherwise.
#[test]
fn read_task_returns_the_versions_each_reader_may_see() {
    let mut w = World::new();
    let author = w.register();
    let judge = w.register();
    let engaged = w.register();
    let bystander = w.register();
    let task = open_task(&mut w, author);
    take(&mut w, engaged, task);
    w.ok(
        author,
        Action::ReviseContract {
            task,
            contract: ContractDraft { requirements: Content::from("v2"), judge: Judge::Agent(judge), ..draft() },
        },
    );
    let version = |w: &World, agent, v| read::read_task(&w.state, agent, task, v).map(|view| view.contract.version);
    for reader in [author, judge, engaged, bystander] {
        assert_eq!(version(&w, reader, None).expect("current"), Version(2), "{reader}");
        assert_eq!(version(&w, reader, Some(Version(2))).expect("current by number"), Version(2), "{reader}");
    }
    for reader in [author, judge, engaged] {
        let v1 = read::read_task(&w.state, reader, task, Some(Version(1))).expect("v1");
        assert_eq!(v1.contract.version, Version(1));
        assert_eq!(v1.contract.contract.requirements, Content::from("write a summary"));
    }
    assert_eq!(read_rejection(version(&w, bystander, Some(Version(1)))).code, Code::NotFound);
    assert_eq!(read_rejection(version(&w, author, Some(Version(3)))).code, Code::NotFound);
}

// --- §7.2 Audience --------------------------------------------------------------------------------

/// §7.2 (§7.2.2): any active agent may take an open Task, each with its own engagement.
#[test]
fn any_active_agent_may_take_an_open_task() {
    let mut w = World::new();
    let author = w.register();
    let a = w.register();
    let b = w.register();
    let task = open_task(&mut w, author);
    let ea = take(&mut w, a, task);
    let eb = take(&mut w, b, task);
    assert_ne!(ea, eb);
    assert_eq!((engagement(&w, ea).agent, engagement(&w, eb).agent), (a, b));
    assert_eq!(task_record(&w, task).open_engagements, 2);
}

/// §7.2 (§7.2.3, §12.5, §9.4): a restricted Task is taken only by named agents; to anyone else it is NOT_FOUND like an unknown Task.
#[test]
fn restricted_task_is_not_found_for_outsiders_like_an_unknown_task() {
    let mut w = World::new();
    let author = w.register();
    let named = w.register();
    let outsider = w.register();
    let task = new_task(&mut w, author, restricted(&[named]), draft());
    let unknown = TaskId(999);

    let read_hidden = read_rejection(read::read_task(&w.state, outsider, task, None));
    let read_unknown = read_rejection(read::read_task(&w.state, outsider, unknown, None));
    assert_indistinguishable(&read_hidden, &read_unknown);

    let before = task_facts(&w, task);
    let take_hidden = w.err(outsider, Action::TakeTask { task });
    let take_unknown = w.err(outsider, Action::TakeTask { task: unknown });
    assert_indistinguishable(&take_hidden, &take_unknown);
    let combined_hidden = w.err(outsider, Action::DeliverTask { task, output: Content::from("x"), take: true });
    let combined_unknown =
        w.err(outsider, Action::DeliverTask { task: unknown, output: Content::from("x"), take: true });
    assert_indistinguishable(&combined_hidden, &combined_unknown);
    assert_eq!(task_facts(&w, task), before, "a rejected take creates nothing");

    read::read_task(&w.state, named, task, None).expect("the named agent reads");
    take(&mut w, named, task);
}

/// §7.2 (§7.2.4): the author must not take its own Task, alone or combined with a delivery.
#[test]
fn author_must_not_take_its_own_task() {
    let mut w = World::new();
    let author = w.register();
    let task = open_task(&mut w, author);
    let before = facts(&w).len();
    assert_eq!(w.err(author, Action::TakeTask { task }).code, Code::OwnTask);
    assert_eq!(w.err(author, Action::DeliverTask { task, output: Content::from("x"), take: true }).code, Code::OwnTask);
    assert_eq!(facts(&w).len(), before);
    assert_eq!(task_record(&w, task).open_engagements, 0);
}

/// §7.2 (§7.2.4): the author cannot name itself in a restricted audience.
#[test]
fn author_cannot_be_named_in_a_restricted_audience() {
    let mut w = World::new();
    let author = w.register();
    let other = w.register();
    let r = w.err(author, Action::CreateTask { audience: restricted(&[author, other]), contract: draft() });
    assert_eq!(r.code, Code::InvalidTarget);
    assert_eq!(r.field.as_deref(), Some("audience.restricted.agents[0]"));
    assert!(w.state.task(TaskId(1)).expect("state").is_none());
}

/// §7.2 (§7.2.2, §7.1.4): an agent the contract excludes is not eligible; others are.
#[test]
fn excluded_agent_is_not_eligible() {
    let mut w = World::new();
    let author = w.register();
    let barred = w.register();
    let welcome = w.register();
    let contract = ContractDraft {
        eligibility: Eligibility { registered_before: None, excluded: BTreeSet::from([barred]) },
        ..draft()
    };
    let task = new_task(&mut w, author, Audience::Open, contract);
    assert_eq!(w.err(barred, Action::TakeTask { task }).code, Code::NotEligible);
    assert_eq!(
        w.err(barred, Action::DeliverTask { task, output: Content::from("x"), take: true }).code,
        Code::NotEligible
    );
    assert_eq!(task_record(&w, task).open_engagements, 0);
    take(&mut w, welcome, task);
}

/// §7.2 (§7.2.2, §7.1.4): an agent registered after the contract's `registered_before` is not eligible.
#[test]
fn agent_registered_after_the_cutoff_is_not_eligible() {
    let mut w = World::new();
    let author = w.register();
    let veteran = w.register();
    let cutoff = w.now;
    let newcomer = w.register();
    let contract = ContractDraft {
        eligibility: Eligibility { registered_before: Some(cutoff), excluded: BTreeSet::new() },
        ..draft()
    };
    let task = new_task(&mut w, author, Audience::Open, contract);
    assert_eq!(w.err(newcomer, Action::TakeTask { task }).code, Code::NotEligible);
    take(&mut w, veteran, task);
}

/// §7.2 (§7.2.2, §4.1): only an active agent may take a Task.
#[test]
fn deactivated_agent_cannot_take_a_task() {
    let mut w = World::new();
    let author = w.register();
    let gone = w.register();
    let task = open_task(&mut w, author);
    deactivate(&mut w, gone);
    assert_eq!(w.err(gone, Action::TakeTask { task }).code, Code::AgentInactive);
    assert_eq!(task_record(&w, task).open_engagements, 0);
}

/// §8 (§8.6, §8.7, §8.9): a restricted Task naming an agent is that agent's opportunity only, and binds no one.
#[test]
fn restricted_task_is_an_opportunity_of_the_named_agents_only() {
    let mut w = World::new();
    let author = w.register();
    let named = w.register();
    let outsider = w.register();
    let task = new_task(&mut w, author, restricted(&[named]), draft());
    let open = open_task(&mut w, author);
    let page = read::opportunities(&w.state, named, None, 100, &w.limits).expect("opportunities");
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.items[0].id, OpportunityId::Task(task));
    assert_eq!(page.items[0].object, ObjectRef::Task(task));
    assert!(w.opportunity_ids(outsider).is_empty());
    assert!(w.opportunity_ids(author).is_empty());
    assert!(!w.opportunity_ids(named).contains(&OpportunityId::Task(open)), "an open Task is no one's opportunity");
    // Opportunities and open Tasks bind no one.
    for agent in [author, named, outsider] {
        assert!(w.full_turn(agent).is_empty(), "{agent}");
    }
}

/// §8 (§8.6): the opportunity disappears while the Task is paused and while the agent holds an open engagement.
#[test]
fn restricted_task_opportunity_hides_while_paused_or_engaged() {
    let mut w = World::new();
    let author = w.register();
    let named = w.register();
    let task = new_task(&mut w, author, restricted(&[named]), draft());
    let shown = vec![OpportunityId::Task(task)];
    w.ok(author, Action::PauseTask { task });
    assert!(w.opportunity_ids(named).is_empty());
    w.ok(author, Action::ResumeTask { task });
    assert_eq!(w.opportunity_ids(named), shown);
    let e = take(&mut w, named, task);
    assert!(w.opportunity_ids(named).is_empty());
    w.ok(named, Action::DropEngagement { engagement: e });
    assert_eq!(w.opportunity_ids(named), shown);
}

// --- §7.3 Engagement ------------------------------------------------------------------------------

/// §7.3 (§7.3.1, §7.1.7, §8.4): taking binds agent, contract version and inputs in one fact and starts the delivery deadline.
#[test]
fn take_binds_agent_version_inputs_and_starts_the_delivery_deadline() {
    let mut w = World::new();
    let author = w.register();
    let agent = w.register();
    let m = memory(&mut w, author, "input");
    let task = new_task(&mut w, author, Audience::Open, ContractDraft { inputs: vec![pin(m, 1)], ..draft() });
    let key = w.fresh_key();
    let applied = w.exec(Principal::Agent(agent), Action::TakeTask { task }, Some(key));
    let taken_at = w.now;
    let Ok(receipt) = applied.outcome else { panic!("{:?}", applied.outcome) };
    let ActionResult::Engaged { engagement: e, contract_version, delivery_due, existing, .. } = receipt.result else {
        panic!()
    };
    assert_eq!((contract_version, delivery_due, existing), (Version(1), taken_at.plus(DELIVERY), false));
    assert_eq!(applied.facts.len(), 1, "one atomic fact");
    assert!(matches!(
        &applied.facts[0].fact,
        Fact::Engaged { engagement, agent: a, contract_version: Version(1), inputs, judge, .. }
            if *engagement == e && *a == agent && *inputs == vec![pin(m, 1)] && *judge == author
    ));
    let rec = engagement(&w, e);
    assert_eq!((rec.task, rec.agent, rec.contract_version, rec.taken_at), (task, agent, Version(1), taken_at));
    assert_eq!(rec.state, EngagementState::Open { delivery_due: taken_at.plus(DELIVERY) });
    let turn = w.full_turn(agent);
    assert_eq!(turn.len(), 1);
    assert_eq!(turn[0].obligation, ObligationId::EngagementDelivery(e));
    assert_eq!(turn[0].kind, ObligationKind::Delivery);
    assert_eq!(turn[0].object, ObjectRef::Task(task));
    assert_eq!(
        (turn[0].arose_at, turn[0].due_at, turn[0].next),
        (taken_at, Some(taken_at.plus(DELIVERY)), NextStep::Deliver)
    );
    assert!(w.full_turn(author).is_empty(), "taking creates no obligation for the author");
}

/// §7.3 (§7.3.4, L2.6): taking again returns the existing open engagement and records no fact.
#[test]
fn taking_again_returns_the_existing_engagement_without_a_new_fact() {
    let mut w = World::new();
    let author = w.register();
    let agent = w.register();
    let task = open_task(&mut w, author);
    let e = take(&mut w, agent, task);
    let before = facts(&w).len();
    let key = w.fresh_key();
    let applied = w.exec(Principal::Agent(agent), Action::TakeTask { task }, Some(key));
    let Ok(receipt) = applied.outcome else { panic!("{:?}", applied.outcome) };
    assert!(
        matches!(receipt.result, ActionResult::Engaged { engagement, existing: true, contract_version: Version(1), .. } if engagement == e)
    );
    assert_eq!(receipt.seq, None, "no fact, so no sequence number");
    assert!(applied.facts.is_empty());
    assert_eq!(facts(&w).len(), before);
    assert_eq!(task_record(&w, task).open_engagements, 1);
    assert_eq!(w.full_turn(agent).len(), 1, "still one delivery obligation");
}

/// §7.3 (§7.3.4, L2.6): a delivered but unjudged engagement is still the agent's one open engagement, so
/// taking again returns it (no second engagement) until it is judged.
#[test]
fn taking_again_after_delivery_returns_the_delivered_engagement() {
    let mut w = World::new();
    let author = w.register();
    let agent = w.register();
    let task = open_task(&mut w, author);
    let e = deliver(&mut w, agent, task, "work", true);
    let before = facts(&w).len();
    let again = w.ok(agent, Action::TakeTask { task });
    assert!(matches!(again, ActionResult::Engaged { engagement, existing: true, .. } if engagement == e), "{again:?}");
    assert_eq!(facts(&w).len(), before);
    assert_eq!(task_record(&w, task).open_engagements, 1);
    w.ok(author, Action::AdoptEngagement { engagement: e });
    let fresh = w.ok(agent, Action::TakeTask { task });
    assert!(matches!(fresh, ActionResult::Engaged { engagement, existing: false, .. } if engagement != e), "{fresh:?}");
}

/// §7.3 (§7.3.4): once an engagement has ended, taking again forms a new engagement.
#[test]
fn after_an_engagement_ends_taking_again_forms_a_new_one() {
    let mut w = World::new();
    let author = w.register();
    let agent = w.register();
    let task = open_task(&mut w, author);
    let first = take(&mut w, agent, task);
    w.ok(agent, Action::DropEngagement { engagement: first });
    let second = take(&mut w, agent, task);
    assert_ne!(first, second);
    assert_eq!(outcome(&w, first), Some(EngagementOutcome::Dropped));
    assert!(matches!(engagement(&w, second).state, EngagementState::Open { .. }));
}

/// §7.3 (§7.3.13, §7.3.4): a paused Task refuses new engagements; existing ones continue and can deliver; resuming reopens it.
#[test]
fn paused_task_refuses_new_engagements_but_existing_ones_continue() {
    let mut w = World::new();
    let author = w.register();
    let engaged = w.register();
    let newcomer = w.register();
    let task = open_task(&mut w, author);
    let e = take(&mut w, engaged, task);
    w.ok(author, Action::PauseTask { task });
    assert!(task_record(&w, task).paused);
    assert_eq!(w.err(newcomer, Action::TakeTask { task }).code, Code::TaskPaused);
    assert_eq!(
        w.err(newcomer, Action::DeliverTask { task, output: Content::from("x"), take: true }).code,
        Code::TaskPaused
    );
    assert!(
        matches!(w.ok(engaged, Action::TakeTask { task }), ActionResult::Engaged { engagement, existing: true, .. } if engagement == e)
    );
    assert_eq!(deliver(&mut w, engaged, task, "done while paused", false), e);
    w.ok(author, Action::AdoptEngagement { engagement: e });
    assert_eq!(outcome(&w, e), Some(EngagementOutcome::Adopted));
    w.ok(author, Action::ResumeTask { task });
    take(&mut w, newcomer, task);
}

/// §7.3 (§7.3.13, L2.7): pause and resume are the author's, and repeating one is NO_EFFECT, not a success.
#[test]
fn pause_and_resume_are_author_only_and_never_silent_successes() {
    let mut w = World::new();
    let author = w.register();
    let other = w.register();
    let task = open_task(&mut w, author);
    assert_eq!(w.err(other, Action::PauseTask { task }).code, Code::NotAuthor);
    assert_eq!(w.err(author, Action::ResumeTask { task }).code, Code::NoEffect);
    w.ok(author, Action::PauseTask { task });
    assert_eq!(w.err(author, Action::PauseTask { task }).code, Code::NoEffect);
    assert_eq!(w.err(other, Action::ResumeTask { task }).code, Code::NotAuthor);
    assert!(task_record(&w, task).paused);
}

/// §7.3 (§7.3.5): only the engaged agent delivers: without an engagement of one's own there is nothing to deliver on.
#[test]
fn only_the_engaged_agent_delivers() {
    let mut w = World::new();
    let author = w.register();
    let engaged = w.register();
    let other = w.register();
    let task = open_task(&mut w, author);
    let e = take(&mut w, engaged, task);
    assert_eq!(
        w.err(other, Action::DeliverTask { task, output: Content::from("x"), take: false }).code,
        Code::InvalidState
    );
    assert_eq!(
        w.err(author, Action::DeliverTask { task, output: Content::from("x"), take: false }).code,
        Code::InvalidState
    );
    assert!(matches!(engagement(&w, e).state, EngagementState::Open { .. }));
    assert_eq!(deliver(&mut w, engaged, task, "mine", false), e);
}

/// §7.3 (§7.3.7, L5.3): a delivery fixes the output and cannot be replaced, by either form of deliver.
#[test]
fn delivery_cannot_be_replaced() {
    let mut w = World::new();
    let author = w.register();
    let agent = w.register();
    let task = open_task(&mut w, author);
    let e = deliver(&mut w, agent, task, "first", true);
    let before = facts(&w).len();
    for take in [false, true] {
        let r = w.err(agent, Action::DeliverTask { task, output: Content::from("second"), take });
        assert_eq!(r.code, Code::InvalidState, "take: {take}");
    }
    assert_eq!(facts(&w).len(), before);
    assert!(
        matches!(engagement(&w, e).state, EngagementState::Delivered { output, .. } if output == Content::from("first"))
    );
}

/// §7.3 (§7.3.8, L2.2): take and deliver in one action records the Engaged fact before the delivery, like the explicit sequence.
#[test]
fn take_and_deliver_in_one_action_confirms_the_engagement_first() {
    let mut w = World::new();
    let author = w.register();
    let agent = w.register();
    let other = w.register();
    let task = open_task(&mut w, author);
    let key = w.fresh_key();
    let applied = w.exec(
        Principal::Agent(agent),
        Action::DeliverTask { task, output: Content::from("out"), take: true },
        Some(key),
    );
    let Ok(receipt) = applied.outcome else { panic!("{:?}", applied.outcome) };
    let ActionResult::EngagementDelivered { engagement: e, judgment_due, .. } = receipt.result else { panic!() };
    let names: Vec<&str> = applied.facts.iter().map(|f| f.fact.name()).collect();
    assert_eq!(names, ["engaged", "engagement_delivered"]);
    assert_eq!((applied.facts[0].seq, applied.facts[0].idx), (applied.facts[1].seq, 0));
    assert_eq!(applied.facts[1].idx, 1);
    assert!(matches!(applied.facts[0].fact, Fact::Engaged { engagement, .. } if engagement == e));
    assert!(matches!(applied.facts[1].fact, Fact::EngagementDelivered { engagement, .. } if engagement == e));
    assert_eq!(judgment_due, w.now.plus(JUDGMENT));
    assert!(w.full_turn(agent).is_empty());
    // With an engagement already held, the combined action only delivers.
    take(&mut w, other, task);
    let key = w.fresh_key();
    let applied = w.exec(
        Principal::Agent(other),
        Action::DeliverTask { task, output: Content::from("out"), take: true },
        Some(key),
    );
    assert!(applied.outcome.is_ok());
    let names: Vec<&str> = applied.facts.iter().map(|f| f.fact.name()).collect();
    assert_eq!(names, ["engagement_delivered"]);
}

/// §7.3 (§7.3.9, §7.1.7, §8.5): the author adopts a delivery; the judgment deadline runs from delivery.
#[test]
fn author_adopts_a_delivery() {
    let mut w = World::new();
    let author = w.register();
    let agent = w.register();
    let task = open_task(&mut w, author);
    let e = deliver(&mut w, agent, task, "work", true);
    let delivered_at = w.now;
    let turn = w.full_turn(author);
    assert_eq!(turn.len(), 1);
    assert_eq!(turn[0].obligation, ObligationId::EngagementJudgment(e));
    assert_eq!((turn[0].due_at, turn[0].next), (Some(delivered_at.plus(JUDGMENT)), NextStep::Judge));
    assert!(
        matches!(w.ok(author, Action::AdoptEngagement { engagement: e }), ActionResult::EngagementAdopted { engagement, .. } if engagement == e)
    );
    assert_eq!(outcome(&w, e), Some(EngagementOutcome::Adopted));
    assert_eq!(task_record(&w, task).adopted, 1);
    assert_eq!(task_record(&w, task).open_engagements, 0);
    assert!(w.full_turn(author).is_empty());
}

/// §7.3 (§7.3.10, §9.9): a rejection carries a reason that the engaged agent reads.
#[test]
fn rejection_carries_a_reason_the_engaged_agent_reads() {
    let mut w = World::new();
    let author = w.register();
    let agent = w.register();
    let task = open_task(&mut w, author);
    let e = deliver(&mut w, agent, task, "work", true);
    w.ok(author, Action::RejectEngagement { engagement: e, reason: Content::from("section 2 is missing") });
    let seen = read::read_engagement(&w.state, agent, e).expect("the engaged agent reads its engagement");
    assert!(matches!(
        seen.state,
        EngagementState::Ended { outcome: EngagementOutcome::Rejected { ref reason }, delivered: Some(ref d), .. }
            if *reason == Content::from("section 2 is missing") && *d == Content::from("work")
    ));
    assert_eq!(task_record(&w, task).adopted, 0);
}

/// §7.3 (§7.3.10): a rejection without a reason is refused and the delivery stays awaiting judgment.
#[test]
fn rejection_with_an_empty_reason_is_invalid() {
    let mut w = World::new();
    let author = w.register();
    let agent = w.register();
    let task = open_task(&mut w, author);
    let e = deliver(&mut w, agent, task, "work", true);
    let r = w.err(author, Action::RejectEngagement { engagement: e, reason: Content::from("") });
    assert_eq!(r.code, Code::InvalidArgument);
    assert_eq!(r.field.as_deref(), Some("reason"));
    assert!(matches!(engagement(&w, e).state, EngagementState::Delivered { .. }));
    assert_eq!(w.full_turn(author).len(), 1, "the judgment is still owed");
}

/// §7 (§7.0.1, §7.3.9, §9.9): a designated judge judges; the author gets NOT_REQUESTER and does not see the output or the reason.
#[test]
fn designated_judge_judges_and_the_author_does_not() {
    let mut w = World::new();
    let author = w.register();
    let judge = w.register();
    let agent = w.register();
    let task = new_task(&mut w, author, Audience::Open, ContractDraft { judge: Judge::Agent(judge), ..draft() });
    let e = deliver(&mut w, agent, task, "secret output", true);
    assert!(w.full_turn(author).is_empty());
    let turn = w.full_turn(judge);
    assert_eq!(turn.len(), 1);
    assert_eq!(turn[0].obligation, ObligationId::EngagementJudgment(e));
    assert_eq!(w.err(author, Action::AdoptEngagement { engagement: e }).code, Code::NotRequester);
    assert_eq!(
        w.err(author, Action::RejectEngagement { engagement: e, reason: Content::from("no") }).code,
        Code::NotRequester
    );
    w.ok(judge, Action::RejectEngagement { engagement: e, reason: Content::from("off topic") });
    let by_author = read::read_engagement(&w.state, author, e).expect("the author sees the engagement");
    assert!(matches!(
        by_author.state,
        EngagementState::Ended { outcome: EngagementOutcome::Rejected { ref reason }, delivered: None, .. } if reason.is_empty()
    ));
    let by_agent = read::read_engagement(&w.state, agent, e).expect("the engaged agent reads");
    assert!(
        matches!(by_agent.state, EngagementState::Ended { outcome: EngagementOutcome::Rejected { ref reason }, .. } if *reason == Content::from("off topic"))
    );
}

/// §7.3 (§7.3.9, §9.9): the engaged agent cannot judge its own delivery, and an unrelated agent cannot see it.
#[test]
fn only_the_requester_judges() {
    let mut w = World::new();
    let author = w.register();
    let agent = w.register();
    let stranger = w.register();
    let task = open_task(&mut w, author);
    let e = deliver(&mut w, agent, task, "work", true);
    assert_eq!(w.err(agent, Action::AdoptEngagement { engagement: e }).code, Code::NotRequester);
    assert_eq!(w.err(stranger, Action::AdoptEngagement { engagement: e }).code, Code::NotFound);
    assert_eq!(read_rejection(read::read_engagement(&w.state, stranger, e)).code, Code::NotFound);
    assert!(matches!(engagement(&w, e).state, EngagementState::Delivered { .. }));
}

/// §7.3 (§7.3.5, §7.3.15): the engaged agent drops; the author (or a judge) cannot cancel an engagement.
#[test]
fn engaged_agent_drops_and_the_author_cannot_cancel() {
    let mut w = World::new();
    let author = w.register();
    let judge = w.register();
    let agent = w.register();
    let stranger = w.register();
    let task = new_task(&mut w, author, Audience::Open, ContractDraft { judge: Judge::Agent(judge), ..draft() });
    let e = take(&mut w, agent, task);
    assert_eq!(w.err(author, Action::DropEngagement { engagement: e }).code, Code::NotTaker);
    assert_eq!(w.err(judge, Action::DropEngagement { engagement: e }).code, Code::NotTaker);
    assert_eq!(w.err(stranger, Action::DropEngagement { engagement: e }).code, Code::NotFound);
    assert!(matches!(engagement(&w, e).state, EngagementState::Open { .. }));
    assert!(
        matches!(w.ok(agent, Action::DropEngagement { engagement: e }), ActionResult::EngagementDropped { engagement, .. } if engagement == e)
    );
    assert_eq!(outcome(&w, e), Some(EngagementOutcome::Dropped));
    assert!(w.full_turn(agent).is_empty());
}

/// §7.3 (§7.3.12): an engaged agent that a later revision excludes keeps its engagement; taking again is no longer eligible.
#[test]
fn revision_excluding_an_engaged_agent_does_not_cancel_its_engagement() {
    let mut w = World::new();
    let author = w.register();
    let agent = w.register();
    let task = open_task(&mut w, author);
    let e = take(&mut w, agent, task);
    let contract = ContractDraft {
        eligibility: Eligibility { registered_before: None, excluded: BTreeSet::from([agent]) },
        ..draft()
    };
    w.ok(author, Action::ReviseContract { task, contract });
    assert!(matches!(engagement(&w, e).state, EngagementState::Open { .. }));
    assert_eq!(w.err(agent, Action::TakeTask { task }).code, Code::NotEligible);
    assert_eq!(deliver(&mut w, agent, task, "still bound by v1", false), e);
}

/// §7.3 (§7.3.14, §4.5): deactivating the author cancels no engagement; its judgment runs to the contract deadline.
#[test]
fn deactivating_the_author_keeps_engagements_running() {
    let mut w = World::new();
    let author = w.register();
    let agent = w.register();
    let task = open_task(&mut w, author);
    let e = take(&mut w, agent, task);
    deactivate(&mut w, author);
    assert!(matches!(engagement(&w, e).state, EngagementState::Open { .. }));
    assert_eq!(w.full_turn(agent).len(), 1);
    deliver(&mut w, agent, task, "work", false);
    assert_eq!(w.err(author, Action::AdoptEngagement { engagement: e }).code, Code::AgentInactive);
    assert_eq!(w.full_turn(author).len(), 1, "the judgment is pending, not ended");
    w.advance(JUDGMENT);
    assert_eq!(w.fire_due_timers(), vec![ObligationId::EngagementJudgment(e)]);
    assert_eq!(outcome(&w, e), Some(EngagementOutcome::Undecided));
}

/// §7.3 (§7.3.6, L4.3): the delivery deadline ends an undelivered engagement as timed out.
#[test]
fn delivery_deadline_times_the_engagement_out() {
    let mut w = World::new();
    let author = w.register();
    let agent = w.register();
    let task = open_task(&mut w, author);
    let e = take(&mut w, agent, task);
    w.advance(Micros(DELIVERY.0 - 1));
    assert!(w.fire_due_timers().is_empty(), "not yet due");
    w.advance(Micros(1));
    assert_eq!(w.fire_due_timers(), vec![ObligationId::EngagementDelivery(e)]);
    assert_eq!(outcome(&w, e), Some(EngagementOutcome::TimedOut));
    assert_eq!(deadline_results(&w), vec![(ObligationId::EngagementDelivery(e), ExpiryResult::TimedOut)]);
    assert!(w.full_turn(agent).is_empty());
    assert!(w.full_turn(author).is_empty(), "a timeout creates no judgment");
}

/// §7.3 (§7.3.6, L4.3): a delivery after the deadline loses: DEADLINE_PASSED, and the timeout is recorded.
#[test]
fn late_delivery_loses_to_the_deadline() {
    let mut w = World::new();
    let author = w.register();
    let agent = w.register();
    let task = open_task(&mut w, author);
    let e = take(&mut w, agent, task);
    w.advance(DELIVERY);
    assert_eq!(
        w.err(agent, Action::DeliverTask { task, output: Content::from("late"), take: false }).code,
        Code::DeadlinePassed
    );
    assert_eq!(outcome(&w, e), Some(EngagementOutcome::TimedOut));
    assert_eq!(terminal_facts(&w, e), 1);
}

/// §7.3 (§7.3.6, L4.3): a drop after the deadline loses too: the engagement is timed out, not dropped.
#[test]
fn late_drop_loses_to_the_deadline() {
    let mut w = World::new();
    let author = w.register();
    let agent = w.register();
    let task = open_task(&mut w, author);
    let e = take(&mut w, agent, task);
    w.advance(DELIVERY);
    assert_eq!(w.err(agent, Action::DropEngagement { engagement: e }).code, Code::DeadlinePassed);
    assert_eq!(outcome(&w, e), Some(EngagementOutcome::TimedOut));
}

/// §7.3 (§7.3.11, §7.1.3): a missing judgment settles as undecided by default, never held against the agent, who may take again.
#[test]
fn missing_judgment_settles_undecided_by_default() {
    let mut w = World::new();
    let author = w.register();
    let agent = w.register();
    let task = open_task(&mut w, author);
    let e = deliver(&mut w, agent, task, "work", true);
    w.advance(JUDGMENT);
    assert_eq!(w.fire_due_timers(), vec![ObligationId::EngagementJudgment(e)]);
    assert!(matches!(
        engagement(&w, e).state,
        EngagementState::Ended { outcome: EngagementOutcome::Undecided, delivered: Some(ref d), .. } if *d == Content::from("work")
    ));
    assert_eq!(deadline_results(&w), vec![(ObligationId::EngagementJudgment(e), ExpiryResult::Undecided)]);
    assert_eq!(task_record(&w, task).adopted, 0);
    assert!(w.full_turn(author).is_empty());
    // Nothing holds the undecided engagement against the agent: it remains eligible.
    let again = take(&mut w, agent, task);
    assert_ne!(again, e);
}

/// §7.3 (§7.3.11, §7.1.3): a missing judgment settles as adopted when the contract says so, and counts as an adoption.
#[test]
fn missing_judgment_settles_adopted_when_the_contract_says_so() {
    let mut w = World::new();
    let author = w.register();
    let agent = w.register();
    let task = new_task(
        &mut w,
        author,
        Audience::Open,
        ContractDraft { on_missing_judgment: MissingJudgment::Adopted, ..draft() },
    );
    let e = deliver(&mut w, agent, task, "work", true);
    w.advance(JUDGMENT);
    assert_eq!(w.fire_due_timers(), vec![ObligationId::EngagementJudgment(e)]);
    assert_eq!(outcome(&w, e), Some(EngagementOutcome::Adopted));
    assert_eq!(deadline_results(&w), vec![(ObligationId::EngagementJudgment(e), ExpiryResult::Adopted)]);
    assert_eq!(task_record(&w, task).adopted, 1);
}

/// §7.3 (§7.3.11, L4.3): a judgment after the deadline loses; the contract's result stands.
#[test]
fn late_judgment_loses_to_the_deadline() {
    let mut w = World::new();
    let author = w.register();
    let agent = w.register();
    let task = open_task(&mut w, author);
    let e = deliver(&mut w, agent, task, "work", true);
    w.advance(JUDGMENT);
    assert_eq!(
        w.err(author, Action::RejectEngagement { engagement: e, reason: Content::from("too late") }).code,
        Code::DeadlinePassed
    );
    assert_eq!(outcome(&w, e), Some(EngagementOutcome::Undecided));
    assert_eq!(terminal_facts(&w, e), 1);
}

/// L4: a judgment that arrives after the timer already settled the deadline gets the same
/// DEADLINE_PASSED as one that finds the deadline due, also when the contract's default adopted
/// it; a judgment repeated after the requester's own adoption is still INVALID_STATE.
#[test]
fn a_judgment_after_the_expiry_applied_is_told_the_deadline_passed() {
    let mut w = World::new();
    let author = w.register();
    let (late, judged) = (w.register(), w.register());
    let task = new_task(
        &mut w,
        author,
        Audience::Open,
        ContractDraft { on_missing_judgment: MissingJudgment::Adopted, ..draft() },
    );
    let by_author = deliver(&mut w, judged, task, "work", true);
    w.ok(author, Action::AdoptEngagement { engagement: by_author });
    let by_default = deliver(&mut w, late, task, "work", true);
    w.advance(JUDGMENT);
    assert_eq!(w.fire_due_timers(), vec![ObligationId::EngagementJudgment(by_default)]);
    assert_eq!(outcome(&w, by_default), Some(EngagementOutcome::Adopted));
    for action in [
        Action::AdoptEngagement { engagement: by_default },
        Action::RejectEngagement { engagement: by_default, reason: Content::from("too late") },
    ] {
        assert_eq!(w.err(author, action).code, Code::DeadlinePassed);
    }
    assert_eq!(w.err(author, Action::AdoptEngagement { engagement: by_author }).code, Code::InvalidState);
    assert_eq!(terminal_facts(&w, by_default), 1);
}

/// §7.3 (§7.3.16): terminal states are irreversible: no judgment, drop or delivery moves an ended engagement.
#[test]
fn terminal_states_are_irreversible() {
    let mut w = World::new();
    let author = w.register();
    let agents: Vec<AgentId> = (0..4).map(|_| w.register()).collect();
    let task = open_task(&mut w, author);
    let adopted = deliver(&mut w, agents[0], task, "a", true);
    w.ok(author, Action::AdoptEngagement { engagement: adopted });
    let rejected = deliver(&mut w, agents[1], task, "b", true);
    w.ok(author, Action::RejectEngagement { engagement: rejected, reason: Content::from("no") });
    let dropped = take(&mut w, agents[2], task);
    w.ok(agents[2], Action::DropEngagement { engagement: dropped });
    let timed_out = take(&mut w, agents[3], task);
    w.advance(DELIVERY);
    w.fire_due_timers();
    let before = facts(&w).len();

    for e in [adopted, rejected] {
        assert_eq!(w.err(author, Action::AdoptEngagement { engagement: e }).code, Code::InvalidState);
        assert_eq!(
            w.err(author, Action::RejectEngagement { engagement: e, reason: Content::from("again") }).code,
            Code::InvalidState
        );
    }
    assert_eq!(w.err(agents[2], Action::DropEngagement { engagement: dropped }).code, Code::InvalidState);
    // The delivery deadline ended it: an exit of that obligation is told so (L4), as it would be
    // in the command that settled the deadline first; judging it never arose.
    assert_eq!(w.err(agents[3], Action::DropEngagement { engagement: timed_out }).code, Code::DeadlinePassed);
    assert_eq!(w.err(author, Action::AdoptEngagement { engagement: timed_out }).code, Code::InvalidState);
    assert_eq!(
        w.err(agents[3], Action::DeliverTask { task, output: Content::from("late"), take: false }).code,
        Code::DeadlinePassed
    );

    assert_eq!(facts(&w).len(), before);
    assert_eq!(outcome(&w, adopted), Some(EngagementOutcome::Adopted));
    assert_eq!(outcome(&w, rejected), Some(EngagementOutcome::Rejected { reason: Content::from("no") }));
    assert_eq!(outcome(&w, dropped), Some(EngagementOutcome::Dropped));
    assert_eq!(outcome(&w, timed_out), Some(EngagementOutcome::TimedOut));
    assert_eq!(task_record(&w, task).adopted, 1);
}

/// §7.3 (§7.3.17, L5.2, L5.3): every settlement consumes exactly one terminal fact, however often expiry is proposed.
#[test]
fn every_terminal_fact_is_recorded_exactly_once() {
    let mut w = World::new();
    let author = w.register();
    let agents: Vec<AgentId> = (0..5).map(|_| w.register()).collect();
    let task = open_task(&mut w, author);
    let adopted = deliver(&mut w, agents[0], task, "a", true);
    w.ok(author, Action::AdoptEngagement { engagement: adopted });
    let rejected = deliver(&mut w, agents[1], task, "b", true);
    w.ok(author, Action::RejectEngagement { engagement: rejected, reason: Content::from("no") });
    let dropped = take(&mut w, agents[2], task);
    w.ok(agents[2], Action::DropEngagement { engagement: dropped });
    let timed_out = take(&mut w, agents[3], task);
    let undecided = deliver(&mut w, agents[4], task, "e", true);
    let delivery_due = match engagement(&w, timed_out).state {
        EngagementState::Open { delivery_due } => delivery_due,
        other => panic!("{other:?}"),
    };
    let judgment_due = match engagement(&w, undecided).state {
        EngagementState::Delivered { judgment_due, .. } => judgment_due,
        other => panic!("{other:?}"),
    };
    w.advance(JUDGMENT);
    let ended = w.fire_due_timers();
    assert_eq!(ended, vec![ObligationId::EngagementDelivery(timed_out), ObligationId::EngagementJudgment(undecided)]);
    // The leader may propose expiry again (a retry, a new leader): nothing more ends.
    assert!(w.fire_due_timers().is_empty());
    for (obligation, due_at) in [
        (ObligationId::EngagementDelivery(timed_out), delivery_due),
        (ObligationId::EngagementJudgment(undecided), judgment_due),
    ] {
        let applied = w.exec(Principal::System, Action::Expire { obligation, due_at }, None);
        assert!(applied.facts.is_empty(), "{obligation:?} ended twice");
        // A stale expiry ends nothing and is refused like any action without effect (L2.7).
        assert!(matches!(applied.outcome, Err(ref r) if r.code == Code::NoEffect), "{:?}", applied.outcome);
    }
    assert_eq!(w.err(agents[3], Action::DropEngagement { engagement: timed_out }).code, Code::DeadlinePassed);
    assert_eq!(w.err(author, Action::AdoptEngagement { engagement: undecided }).code, Code::DeadlinePassed);
    for e in [adopted, rejected, dropped, timed_out, undecided] {
        assert_eq!(terminal_facts(&w, e), 1, "{e}");
    }
    assert_eq!(outcome(&w, undecided), Some(EngagementOutcome::Undecided));
    assert_eq!(task_record(&w, task).open_engagements, 0);
}

// --- §7.4 Adoption limit --------------------------------------------------------------------------

/// §7.4 (§7.4.1, §7.4.2, L5.1): six agents take and deliver under a limit of three; the first three adoptions succeed, the fourth is refused.
#[test]
fn adoption_limit_is_checked_at_adoption_first_come_first_served() {
    let mut w = World::new();
    let author = w.register();
    let agents: Vec<AgentId> = (0..6).map(|_| w.register()).collect();
    let task = new_task(&mut w, author, Audience::Open, ContractDraft { max_adoptions: Some(3), ..draft() });
    // Engagements and deliveries do not consume the limit: all six take and deliver.
    let engagements: Vec<EngagementId> = agents.iter().map(|a| take(&mut w, *a, task)).collect();
    assert_eq!(task_record(&w, task).open_engagements, 6);
    for a in &agents {
        deliver(&mut w, *a, task, "work", false);
    }
    assert_eq!(task_record(&w, task).adopted, 0);
    for e in &engagements[..3] {
        w.ok(author, Action::AdoptEngagement { engagement: *e });
    }
    let before = facts(&w).len();
    let r = w.err(author, Action::AdoptEngagement { engagement: engagements[3] });
    assert_eq!(r.code, Code::AdoptionLimitReached);
    assert_eq!(facts(&w).len(), before);
    assert!(matches!(engagement(&w, engagements[3]).state, EngagementState::Delivered { .. }));
    assert_eq!(task_record(&w, task).adopted, 3);
    // The remaining deliveries can still be rejected, never adopted.
    for e in &engagements[3..] {
        assert_eq!(w.err(author, Action::AdoptEngagement { engagement: *e }).code, Code::AdoptionLimitReached);
        w.ok(author, Action::RejectEngagement { engagement: *e, reason: Content::from("the limit is reached") });
    }
    let adopted = engagements.iter().filter(|e| outcome(&w, **e) == Some(EngagementOutcome::Adopted)).count();
    assert_eq!(adopted, 3);
    assert_eq!(
        &engagements[..3],
        &engagements
            .iter()
            .copied()
            .filter(|e| outcome(&w, *e) == Some(EngagementOutcome::Adopted))
            .collect::<Vec<_>>()[..]
    );
}

/// §7.4 (§7.4.1): only adopted deliveries count: rejected and undecided ones leave room under the limit.
#[test]
fn only_adopted_deliveries_count_toward_the_limit() {
    let mut w = World::new();
    let author = w.register();
    let a = w.register();
    let b = w.register();
    let c = w.register();
    let task = new_task(&mut w, author, Audience::Open, ContractDraft { max_adoptions: Some(1), ..draft() });
    let ea = deliver(&mut w, a, task, "a", true);
    w.ok(author, Action::RejectEngagement { engagement: ea, reason: Content::from("no") });
    let eb = deliver(&mut w, b, task, "b", true);
    w.advance(JUDGMENT);
    w.fire_due_timers();
    assert_eq!(outcome(&w, eb), Some(EngagementOutcome::Undecided));
    assert_eq!(task_record(&w, task).adopted, 0);
    let ec = deliver(&mut w, c, task, "c", true);
    w.ok(author, Action::AdoptEngagement { engagement: ec });
    assert_eq!(task_record(&w, task).adopted, 1);
}

/// §7.4 (§7.4.2, §7.1.3): a missing judgment whose contract says adopted settles as undecided once the limit is reached.
#[test]
fn missing_judgment_adopted_settles_undecided_once_the_limit_is_reached() {
    let mut w = World::new();
    let author = w.register();
    let agents: Vec<AgentId> = (0..3).map(|_| w.register()).collect();
    let contract = ContractDraft { max_adoptions: Some(1), on_missing_judgment: MissingJudgment::Adopted, ..draft() };
    let task = new_task(&mut w, author, Audience::Open, contract);
    let first = deliver(&mut w, agents[0], task, "a", true);
    let second = deliver(&mut w, agents[1], task, "b", true);
    w.advance(JUDGMENT);
    assert_eq!(
        w.fire_due_timers(),
        vec![ObligationId::EngagementJudgment(first), ObligationId::EngagementJudgment(second)]
    );
    assert_eq!(outcome(&w, first), Some(EngagementOutcome::Adopted));
    assert_eq!(outcome(&w, second), Some(EngagementOutcome::Undecided));
    assert_eq!(
        deadline_results(&w),
        vec![
            (ObligationId::EngagementJudgment(first), ExpiryResult::Adopted),
            (ObligationId::EngagementJudgment(second), ExpiryResult::Undecided)
        ]
    );
    // The same after an explicit adoption reached the limit.
    let third = deliver(&mut w, agents[2], task, "c", true);
    w.advance(JUDGMENT);
    w.fire_due_timers();
    assert_eq!(outcome(&w, third), Some(EngagementOutcome::Undecided));
    assert_eq!(task_record(&w, task).adopted, 1);
}

// --- §7.5 Tasks and threads -----------------------------------------------------------------------

/// §7.5 (§7.5.2, §7.5.3, §10.2.7): an entry may reference a Task; nothing changes in the Task and members outside its audience gain nothing.
#[test]
fn entry_referencing_a_task_changes_nothing_in_the_task() {
    let mut w = World::new();
    let author = w.register();
    let named = w.register();
    let member = w.register();
    let task = new_task(&mut w, author, restricted(&[named]), draft());
    let e = deliver(&mut w, named, task, "delivered work", true);
    let thread = w.thread_with(author, &[(member, Role::Speaker)]);
    let task_before = task_record(&w, task);
    let task_facts_before = task_facts(&w, task);
    let posted = w.ok(
        author,
        Action::Post {
            thread,
            body: PostBody::Content(Content::from("see this task")),
            reply_to: None,
            ask: Some(BTreeSet::new()),
            task_ref: Some(task),
            assignment: None,
        },
    );
    let ActionResult::Posted { entry, .. } = posted else { panic!("{posted:?}") };
    assert_eq!(
        read::read_entry(&w.state, member, thread, entry).expect("member reads the entry").entry.task_ref,
        Some(task)
    );
    assert_eq!(task_record(&w, task), task_before);
    assert_eq!(task_facts(&w, task), task_facts_before);
    // §7.5: members can read its contract layer inside the thread, through the entry...
    let seen = read::read_referenced_task(&w.state, member, thread, entry).expect("member reads the contract layer");
    assert_eq!((seen.task, seen.author, seen.contract.version), (task, author, Version::FIRST));
    assert_eq!(seen.contract.contract.requirements, draft().requirements);
    // ... but not through an entry without a reference, and not once it is no longer a member.
    let plain = w.post(author, thread, "no reference", None, Some(&[]));
    assert_eq!(read_rejection(read::read_referenced_task(&w.state, member, thread, plain)).code, Code::NotFound);
    w.ok(member, Action::Leave { thread });
    assert_eq!(read_rejection(read::read_referenced_task(&w.state, member, thread, entry)).code, Code::NotFound);
    // The Task's visibility never changes: the member can neither read it directly, take it, nor see its deliveries.
    assert_eq!(read_rejection(read::read_task(&w.state, member, task, None)).code, Code::NotFound);
    assert_eq!(w.err(member, Action::TakeTask { task }).code, Code::NotFound);
    assert_eq!(read_rejection(read::read_engagement(&w.state, member, e)).code, Code::NotFound);
    assert!(w.opportunity_ids(member).is_empty());
    // The Task does not enter the thread's obligations.
    assert!(w.full_turn(member).is_empty());
    assert_eq!(w.full_turn(author).len(), 1, "only the author's judgment of the delivery");
    assert_eq!(w.full_turn(author)[0].object, ObjectRef::Task(task));
}

/// §7.5 (§12.5, L2.3): a task_ref the author cannot see is NOT_FOUND on `task_ref`, like an unknown Task, and nothing is posted.
#[test]
fn task_ref_to_an_invisible_task_is_not_found() {
    let mut w = World::new();
    let author = w.register();
    let named = w.register();
    let member = w.register();
    let task = new_task(&mut w, author, restricted(&[named]), draft());
    let thread = w.thread_with(author, &[(member, Role::Speaker)]);
    let post = |task_ref| Action::Post {
        thread,
        body: PostBody::Content(Content::from("look")),
        reply_to: None,
        ask: None,
        task_ref: Some(task_ref),
        assignment: None,
    };
    let before = facts(&w).len();
    let hidden = w.err(member, post(task));
    let unknown = w.err(member, post(TaskId(999)));
    assert_eq!(hidden.field.as_deref(), Some("task_ref"));
    assert_indistinguishable(&hidden, &unknown);
    assert_eq!(facts(&w).len(), before, "neither the entry nor its Memory was created");
    assert_eq!(w.state.thread(thread).expect("state").expect("thread").last_entry, 0);
}

// --- Required inputs for the life of the engagement ---------------------------------------------

/// §7.1 (§7.1.2, §5.7, §5.9): the engaged agent reads its bound input version after the author updates and withdraws the Memory.
#[test]
fn engaged_agent_reads_its_bound_input_after_update_and_withdrawal() {
    let mut w = World::new();
    let author = w.register();
    let agent = w.register();
    let stranger = w.register();
    let m = memory(&mut w, author, "alpha");
    let task = new_task(&mut w, author, Audience::Open, ContractDraft { inputs: vec![pin(m, 1)], ..draft() });
    let e = take(&mut w, agent, task);
    let read_input = |w: &World| read::read_engagement_input(&w.state, agent, e, 0);
    let v = read_input(&w).expect("bound input");
    assert_eq!((v.memory.id, v.version, v.content), (m, Version(1), Content::from("alpha")));

    w.ok(author, Action::UpdateMemory { memory: m, content: Content::from("beta") });
    let v = read_input(&w).expect("after update");
    assert_eq!((v.version, v.content), (Version(1), Content::from("alpha")));

    w.ok(author, Action::WithdrawMemory { memory: m });
    let v = read_input(&w).expect("after withdrawal");
    assert_eq!((v.version, v.content), (Version(1), Content::from("alpha")));
    // The private Memory itself stays unreadable to the agent; only the engagement's pin is.
    assert_eq!(read_rejection(read::read_memory(&w.state, agent, m, Some(Version(1)))).code, Code::NotFound);
    assert_eq!(read_rejection(read::read_engagement_input(&w.state, stranger, e, 0)).code, Code::NotFound);
    let out_of_range = read_rejection(read::read_engagement_input(&w.state, agent, e, 1));
    assert_eq!((out_of_range.code, out_of_range.field.as_deref()), (Code::InvalidArgument, Some("index")));
    // Reading after delivery and judgment still works for the life of the engagement record.
    deliver(&mut w, agent, task, "done", false);
    assert_eq!(read_input(&w).expect("after delivery").content, Content::from("alpha"));
}
