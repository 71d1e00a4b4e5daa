//! Domain to wire for every read result of `kungfu_core::read`: every field lands in its wire field,
//! "absent" and "empty" stay distinct where the protocol distinguishes them, and content stays in
//! `Content` fields (L6).

use kungfu_api::pb;
use kungfu_api::response::timeline_response;
use kungfu_core::ActionKind;
use kungfu_core::coord::read::{
    BarrierArrival, BarrierRank, BarrierState, BarrierView, CollectiveView, MailItem, MailboxPage, RankView,
};
use kungfu_core::model::{
    Assignment, AssignmentOutcome, AssignmentSpec, AssignmentState, Audience, Contract, ContractVersion, Eligibility,
    Engagement, EngagementOutcome, EngagementState, Entry, Judge, Memory, MemoryState, MissingJudgment, ObligationId,
    ObligationKind, OpportunityId, Pin, Response, ResponseEnd, ResponseState, Task, Visibility,
};
use kungfu_core::read::{
    Cursor, EntryView, HistoryItem, MemoryView, ObjectSummary, Opportunity, OpportunityPage, ReferencedTask, TaskView,
    TurnItem, TurnPage, WorkingSet,
};
use kungfu_types::{
    AgentId, AssignmentId, Content, EngagementId, EntrySeq, Labels, MemoryId, Micros, NextStep, ObjectRef, RecordId,
    Role, Scope, Taint, TaskId, ThreadId, Timestamp, Version,
};
use std::collections::BTreeSet;

fn ts(us: u64) -> Timestamp {
    Timestamp::from_micros(us)
}

fn wc(text: &str) -> Option<pb::Content> {
    Some(pb::Content { body: text.as_bytes().to_vec() })
}

fn s(text: &str) -> String {
    text.to_string()
}

fn pin(memory: u64, version: u32) -> Pin {
    Pin { memory: MemoryId(memory), version: Version(version) }
}

fn wire_pin(memory: &str, version: u32) -> Option<pb::MemoryPin> {
    Some(pb::MemoryPin { memory: s(memory), version })
}

#[test]
fn a_memory_view_keeps_structure_and_content_apart() {
    let view = MemoryView {
        memory: Memory {
            id: MemoryId(5),
            author: AgentId(3),
            created_at: ts(10),
            current: Version(4),
            visibility: Visibility::Public,
            state: MemoryState::Withdrawn { at: ts(99) },
        },
        version: Version(2),
        created_at: ts(20),
        content: Content::from("the notes"),
        labels: None,
    };
    let expected = pb::MemoryView {
        memory: Some(pb::Memory {
            id: s("mem_5"),
            author: s("ag_3"),
            created_at_unix_micros: 10,
            current_version: 4,
            public: true,
            withdrawn_at_unix_micros: Some(99),
        }),
        version: 2,
        version_created_at_unix_micros: 20,
        content: wc("the notes"),
        labels: None,
    };
    assert_eq!(pb::MemoryView::from(&view), expected);
    // COORDINATION §2.6: a labeled version shows its labels; the author reads even quarantined ones.
    let labeled = MemoryView { labels: Some(Labels::new(Taint::Quarantined, Scope::Agent)), ..view.clone() };
    assert_eq!(
        pb::MemoryView::from(&labeled).labels,
        Some(pb::Labels { taint: pb::Taint::Quarantined as i32, scope: pb::Scope::Agent as i32 })
    );
    let mut valid_private = view.memory.clone();
    valid_private.visibility = Visibility::Private;
    valid_private.state = MemoryState::Valid;
    let wire = pb::Memory::from(&valid_private);
    assert!(!wire.public);
    assert_eq!(wire.withdrawn_at_unix_micros, None);
}

fn entry() -> Entry {
    Entry {
        thread: ThreadId(7),
        seq: EntrySeq(3),
        author: AgentId(1),
        posted_at: ts(30),
        pin: pin(5, 2),
        reply_to: Some(EntrySeq(2)),
        ask: Some([AgentId(4), AgentId(2)].into_iter().collect()),
        responders: [AgentId(2), AgentId(4)].into_iter().collect(),
        task_ref: Some(TaskId(9)),
        assignment: Some(AssignmentId(6)),
    }
}

#[test]
fn an_entry_keeps_every_field_and_the_ask_as_stated() {
    let expected = pb::Entry {
        thread: s("th_7"),
        seq: 3,
        author: s("ag_1"),
        posted_at_unix_micros: 30,
        pin: wire_pin("mem_5", 2),
        reply_to: Some(2),
        ask: Some(pb::Ask { agents: vec![s("ag_2"), s("ag_4")] }),
        responders: vec![s("ag_2"), s("ag_4")],
        task_ref: Some(s("task_9")),
        assignment: Some(s("asg_6")),
    };
    assert_eq!(pb::Entry::from(&entry()), expected);

    // §6.3: "not stated" and "asked nobody" are different facts and stay different on the wire.
    let mut not_stated = entry();
    not_stated.ask = None;
    not_stated.reply_to = None;
    not_stated.task_ref = None;
    not_stated.assignment = None;
    let wire = pb::Entry::from(&not_stated);
    assert_eq!((wire.ask, wire.reply_to, wire.task_ref, wire.assignment), (None, None, None, None));
    let mut nobody = entry();
    nobody.ask = Some(BTreeSet::new());
    assert_eq!(pb::Entry::from(&nobody).ask, Some(pb::Ask { agents: vec![] }));
}

fn entry_view(content: Option<Content>) -> EntryView {
    EntryView { entry: entry(), content, labels: None, held: false, collective_size: None, record: None }
}

fn wire_labels(taint: pb::Taint, scope: pb::Scope) -> Option<pb::Labels> {
    Some(pb::Labels { taint: taint as i32, scope: scope as i32 })
}

#[test]
fn an_entry_view_has_content_only_when_readable() {
    let readable = entry_view(Some(Content::from("hello")));
    let wire = pb::EntryView::from(&readable);
    assert_eq!(wire.entry, Some(pb::Entry::from(&entry())));
    assert_eq!(wire.content, wc("hello"));
    assert_eq!((wire.labels, wire.held, wire.collective_size), (None, false, None), "unlabeled, heads nothing");
    // §5: a pin of another agent's Memory that is no longer public has no content, which is not
    // the same as empty content.
    assert_eq!(pb::EntryView::from(&entry_view(None)).content, None);
    assert_eq!(pb::EntryView::from(&entry_view(Some(Content::default()))).content, Some(pb::Content { body: vec![] }));
    let page = timeline_response(&[entry(), not_first()], true);
    assert_eq!(page.entries.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![3, 4]);
    assert_eq!(page.next_after, Some(4), "a full page says where to continue");
    assert_eq!(timeline_response(&[entry()], false).next_after, None, "the last page says it is the last");
}

fn not_first() -> Entry {
    Entry { seq: EntrySeq(4), ..entry() }
}

#[test]
fn a_response_shows_how_it_ended() {
    use pb::response_ending::How;
    let response =
        |state| Response { thread: ThreadId(7), entry: EntrySeq(3), responder: AgentId(2), arose_at: ts(30), state };
    let pending = pb::OwedResponse::from(&response(ResponseState::Pending));
    assert_eq!(
        pending,
        pb::OwedResponse { thread: s("th_7"), entry: 3, responder: s("ag_2"), arose_at_unix_micros: 30, ending: None }
    );
    let cases = [
        (ResponseEnd::Replied { by_entry: EntrySeq(5) }, How::RepliedByEntry(5)),
        (
            ResponseEnd::Handled { note: Some(Content::from("done elsewhere")) },
            How::Handled(pb::HandledEnding { note: wc("done elsewhere") }),
        ),
        (ResponseEnd::Handled { note: None }, How::Handled(pb::HandledEnding { note: None })),
        (ResponseEnd::Retracted, How::Retracted(())),
        (ResponseEnd::MembershipEnded, How::MembershipEnded(())),
        (ResponseEnd::Demoted, How::Demoted(())),
        (ResponseEnd::ThreadClosed, How::ThreadClosed(())),
    ];
    for (how, wire_how) in cases {
        let wire = pb::OwedResponse::from(&response(ResponseState::Ended { at: ts(40), how: how.clone() }));
        assert_eq!(wire.ending, Some(pb::ResponseEnding { ended_at_unix_micros: 40, how: Some(wire_how) }), "{how:?}");
    }
}

fn assignment(state: AssignmentState) -> Assignment {
    Assignment {
        id: AssignmentId(2),
        thread: ThreadId(7),
        entry: EntrySeq(3),
        creator: AgentId(1),
        addressee: AgentId(4),
        created_at: ts(30),
        spec: AssignmentSpec {
            criteria: Content::from("green"),
            output_structure: Some(Content::from("diff")),
            delivery_window: Micros(60),
            judgment_window: Micros(120),
        },
        state,
        judge_forfeited: true,
    }
}

#[test]
fn an_assignment_keeps_its_spec_and_every_state() {
    use pb::assignment::State;
    let wire = pb::Assignment::from(&assignment(AssignmentState::Open));
    let expected = pb::Assignment {
        id: s("asg_2"),
        thread: s("th_7"),
        entry: 3,
        creator: s("ag_1"),
        addressee: s("ag_4"),
        created_at_unix_micros: 30,
        criteria: wc("green"),
        output_structure: wc("diff"),
        delivery_window_micros: 60,
        judgment_window_micros: 120,
        judge_forfeited: true,
        state: Some(State::Open(())),
    };
    assert_eq!(wire, expected);
    let state_of = |st: AssignmentState| pb::Assignment::from(&assignment(st)).state;
    assert_eq!(
        state_of(AssignmentState::Taken { at: ts(40), delivery_due: ts(100) }),
        Some(State::Taken(pb::AssignmentTakenState { taken_at_unix_micros: 40, delivery_due_unix_micros: 100 }))
    );
    assert_eq!(
        state_of(AssignmentState::Delivered {
            taken_at: ts(40),
            at: ts(50),
            judgment_due: ts(170),
            output: Content::from("out")
        }),
        Some(State::Delivered(pb::AssignmentDeliveredState {
            taken_at_unix_micros: 40,
            delivered_at_unix_micros: 50,
            judgment_due_unix_micros: 170,
            output: wc("out"),
        }))
    );
    let outcomes = [
        (AssignmentOutcome::Adopted, pb::AssignmentOutcome::Adopted, None),
        (AssignmentOutcome::Rejected { reason: Content::from("no") }, pb::AssignmentOutcome::Rejected, wc("no")),
        (AssignmentOutcome::Undecided, pb::AssignmentOutcome::Undecided, None),
        (AssignmentOutcome::Dropped, pb::AssignmentOutcome::Dropped, None),
        (AssignmentOutcome::TimedOut, pb::AssignmentOutcome::TimedOut, None),
        (AssignmentOutcome::Voided, pb::AssignmentOutcome::Voided, None),
    ];
    for (outcome, wire_outcome, reason) in outcomes {
        let delivered = matches!(outcome, AssignmentOutcome::Adopted).then(|| Content::from("out"));
        let got =
            state_of(AssignmentState::Ended { at: ts(60), outcome: outcome.clone(), delivered: delivered.clone() });
        let expected = State::Ended(pb::AssignmentEndedState {
            ended_at_unix_micros: 60,
            outcome: wire_outcome as i32,
            rejection_reason: reason,
            delivered: delivered.map(|d| pb::Content { body: d.0 }),
        });
        assert_eq!(got, Some(expected), "{outcome:?}");
    }
}

fn contract() -> Contract {
    Contract {
        requirements: Content::from("req"),
        output_structure: None,
        inputs: vec![pin(3, 1)],
        references: Some(Content::from("refs")),
        delivery_window: Micros(1000),
        judgment_window: Micros(2000),
        on_missing_judgment: MissingJudgment::Adopted,
        acceptance: Content::from("acc"),
        judge: Judge::Agent(AgentId(8)),
        eligibility: Eligibility { registered_before: Some(ts(5)), excluded: [AgentId(6)].into_iter().collect() },
        max_adoptions: Some(2),
    }
}

fn wire_contract() -> pb::Contract {
    pb::Contract {
        requirements: wc("req"),
        output_structure: None,
        inputs: vec![pb::MemoryPin { memory: s("mem_3"), version: 1 }],
        references: wc("refs"),
        delivery_window_micros: 1000,
        judgment_window_micros: 2000,
        on_missing_judgment: pb::MissingJudgment::Adopted as i32,
        acceptance: wc("acc"),
        judge: Some(s("ag_8")),
        eligibility: Some(pb::Eligibility { registered_before_unix_micros: Some(5), excluded: vec![s("ag_6")] }),
        max_adoptions: Some(2),
    }
}

#[test]
fn a_task_view_keeps_the_task_and_the_contract_version() {
    let view = TaskView {
        task: Task {
            id: TaskId(3),
            author: AgentId(1),
            created_at: ts(10),
            audience: Audience::Restricted([AgentId(4), AgentId(2)].into_iter().collect()),
            current: Version(2),
            paused: true,
            adopted: 1,
            open_engagements: 5,
        },
        contract: ContractVersion { task: TaskId(3), version: Version(1), created_at: ts(11), contract: contract() },
    };
    let expected = pb::TaskView {
        task: Some(pb::Task {
            id: s("task_3"),
            author: s("ag_1"),
            created_at_unix_micros: 10,
            audience: Some(pb::Audience {
                kind: Some(pb::audience::Kind::Restricted(pb::RestrictedAudience {
                    agents: vec![s("ag_2"), s("ag_4")],
                })),
            }),
            current_version: 2,
            paused: true,
            adopted: 1,
            open_engagements: 5,
        }),
        contract: Some(pb::ContractVersion {
            task: s("task_3"),
            version: 1,
            created_at_unix_micros: 11,
            contract: Some(wire_contract()),
        }),
    };
    assert_eq!(pb::TaskView::from(&view), expected);
    // The author judges: no judge id on the wire; an open audience is explicit.
    let mut by_author = contract();
    by_author.judge = Judge::Author;
    by_author.on_missing_judgment = MissingJudgment::Undecided;
    let wire = pb::Contract::from(&by_author);
    assert_eq!(wire.judge, None);
    assert_eq!(wire.on_missing_judgment, pb::MissingJudgment::Undecided as i32);
    assert_eq!(
        pb::Audience::from(&Audience::Open),
        pb::Audience { kind: Some(pb::audience::Kind::Open(pb::OpenAudience {})) }
    );

    let referenced = ReferencedTask { task: TaskId(3), author: AgentId(1), paused: false, contract: view.contract };
    assert_eq!(
        pb::ReferencedTask::from(&referenced),
        pb::ReferencedTask { task: s("task_3"), author: s("ag_1"), paused: false, contract: expected.contract.clone() }
    );
}

#[test]
fn an_engagement_keeps_what_it_bound_and_every_state() {
    use pb::engagement::State;
    let engagement = |state| Engagement {
        id: EngagementId(4),
        task: TaskId(3),
        agent: AgentId(2),
        contract_version: Version(2),
        inputs: vec![pin(3, 1), pin(7, 5)],
        judge: AgentId(1),
        on_missing_judgment: MissingJudgment::Undecided,
        judgment_window: Micros(500),
        taken_at: ts(40),
        state,
    };
    let wire = pb::Engagement::from(&engagement(EngagementState::Open { delivery_due: ts(90) }));
    assert_eq!(
        wire,
        pb::Engagement {
            id: s("eng_4"),
            task: s("task_3"),
            agent: s("ag_2"),
            contract_version: 2,
            inputs: vec![
                pb::MemoryPin { memory: s("mem_3"), version: 1 },
                pb::MemoryPin { memory: s("mem_7"), version: 5 }
            ],
            judge: s("ag_1"),
            on_missing_judgment: pb::MissingJudgment::Undecided as i32,
            judgment_window_micros: 500,
            taken_at_unix_micros: 40,
            state: Some(State::Open(pb::EngagementOpenState { delivery_due_unix_micros: 90 })),
        }
    );
    let state_of = |st| pb::Engagement::from(&engagement(st)).state;
    assert_eq!(
        state_of(EngagementState::Delivered { at: ts(50), judgment_due: ts(550), output: Content::from("out") }),
        Some(State::Delivered(pb::EngagementDeliveredState {
            delivered_at_unix_micros: 50,
            judgment_due_unix_micros: 550,
            output: wc("out"),
        }))
    );
    let outcomes = [
        (EngagementOutcome::Adopted, pb::EngagementOutcome::Adopted, None),
        (EngagementOutcome::Rejected { reason: Content::from("why") }, pb::EngagementOutcome::Rejected, wc("why")),
        (EngagementOutcome::Undecided, pb::EngagementOutcome::Undecided, None),
        (EngagementOutcome::Dropped, pb::EngagementOutcome::Dropped, None),
        (EngagementOutcome::TimedOut, pb::EngagementOutcome::TimedOut, None),
    ];
    for (outcome, wire_outcome, reason) in outcomes {
        let got = state_of(EngagementState::Ended {
            at: ts(60),
            outcome: outcome.clone(),
            delivered: Some(Content::from("out")),
        });
        let expected = State::Ended(pb::EngagementEndedState {
            ended_at_unix_micros: 60,
            outcome: wire_outcome as i32,
            rejection_reason: reason,
            delivered: wc("out"),
        });
        assert_eq!(got, Some(expected), "{outcome:?}");
    }
}

fn turn_item() -> TurnItem {
    TurnItem {
        obligation: ObligationId::AssignmentJudgment(AssignmentId(2)),
        kind: ObligationKind::Judgment,
        object: ObjectRef::Thread(ThreadId(7)),
        arose_at: ts(30),
        due_at: Some(ts(90)),
        next: NextStep::Judge,
    }
}

fn wire_turn_item() -> pb::TurnItem {
    pb::TurnItem {
        obligation: Some(pb::ObligationRef { kind: Some(pb::obligation_ref::Kind::AssignmentJudgment(s("asg_2"))) }),
        kind: pb::ObligationKind::Judgment as i32,
        object: s("th_7"),
        arose_at_unix_micros: 30,
        due_at_unix_micros: Some(90),
        next: pb::NextStep::Judge as i32,
    }
}

#[test]
fn a_turn_page_keeps_items_in_order_and_an_opaque_cursor() {
    let response = TurnItem {
        obligation: ObligationId::Response { thread: ThreadId(7), entry: EntrySeq(3), responder: AgentId(2) },
        kind: ObligationKind::Response,
        object: ObjectRef::Thread(ThreadId(7)),
        arose_at: ts(20),
        due_at: None,
        next: NextStep::Respond,
    };
    let page = TurnPage { items: vec![response, turn_item()], next_cursor: Some(Cursor(vec![0x0a, 0xff])) };
    let wire = pb::TurnPage::from(&page);
    assert_eq!(wire.next_cursor, "0aff");
    assert_eq!(wire.items.len(), 2);
    assert_eq!(wire.items[0].due_at_unix_micros, None, "a response has no deadline");
    assert_eq!(wire.items[0].kind, pb::ObligationKind::Response as i32);
    assert_eq!(wire.items[0].next, pb::NextStep::Respond as i32);
    assert_eq!(wire.items[1], wire_turn_item());
    // The cursor goes back in as it came out.
    let back = kungfu_api::request::turn_query(&pb::GetTurnRequest { cursor: wire.next_cursor, page_size: 0 });
    assert_eq!(back.map(|q| q.cursor), Ok(page.next_cursor));
    let last = pb::TurnPage::from(&TurnPage { items: vec![], next_cursor: None });
    assert_eq!(last.next_cursor, "", "an empty cursor ends the traversal");
}

#[test]
fn next_steps_and_kinds_map_one_to_one() {
    let mut seen = BTreeSet::new();
    for step in NextStep::ALL {
        let wire = pb::NextStep::from(step);
        assert_ne!(wire, pb::NextStep::Unspecified);
        assert_eq!(wire.as_str_name(), format!("NEXT_STEP_{}", step.as_str().to_uppercase()));
        assert!(seen.insert(wire as i32));
    }
    for role in [Role::Observer, Role::Speaker, Role::Governor] {
        assert_eq!(pb::Role::from(role).as_str_name(), format!("ROLE_{}", role.as_str().to_uppercase()));
    }
}

#[test]
fn an_opportunity_page_names_what_may_be_taken_and_where() {
    let page = OpportunityPage {
        items: vec![
            Opportunity {
                id: OpportunityId::Assignment(AssignmentId(2)),
                object: ObjectRef::Thread(ThreadId(7)),
                arose_at: ts(30),
            },
            Opportunity { id: OpportunityId::Task(TaskId(3)), object: ObjectRef::Task(TaskId(3)), arose_at: ts(10) },
        ],
        next_cursor: None,
    };
    let expected = pb::OpportunityPage {
        items: vec![
            pb::Opportunity {
                kind: Some(pb::opportunity::Kind::Assignment(s("asg_2"))),
                object: s("th_7"),
                arose_at_unix_micros: 30,
            },
            pb::Opportunity {
                kind: Some(pb::opportunity::Kind::Task(s("task_3"))),
                object: s("task_3"),
                arose_at_unix_micros: 10,
            },
        ],
        next_cursor: String::new(),
    };
    assert_eq!(pb::OpportunityPage::from(&page), expected);
}

#[test]
fn a_working_set_keeps_summary_role_history_obligations_and_actions() {
    let set = WorkingSet {
        object: ObjectRef::Thread(ThreadId(7)),
        summary: ObjectSummary::Thread {
            id: ThreadId(7),
            open: true,
            members: vec![(AgentId(1), Role::Governor), (AgentId(2), Role::Observer)],
            last_entry: 12,
            open_assignments: 1,
            grant: Some((Role::Speaker, s("kfg_ab…wxyz"))),
            records: vec![RecordId(3), RecordId(9)],
        },
        role: Some(Role::Governor),
        history: vec![
            HistoryItem { seq: 9, idx: 1, at: ts(50), actor: Some(AgentId(1)), fact: s("posted") },
            HistoryItem { seq: 8, idx: 0, at: ts(40), actor: None, fact: s("deadline_passed") },
        ],
        obligations: vec![turn_item()],
        available: vec![ActionKind::Post, ActionKind::CloseThread, ActionKind::AdoptAssignment],
    };
    let expected = pb::WorkingSet {
        object: s("th_7"),
        summary: Some(pb::working_set::Summary::Thread(pb::ThreadSummary {
            id: s("th_7"),
            open: true,
            members: vec![
                pb::Member { agent: s("ag_1"), role: pb::Role::Governor as i32 },
                pb::Member { agent: s("ag_2"), role: pb::Role::Observer as i32 },
            ],
            last_entry: 12,
            open_assignments: 1,
            grant: Some(pb::LiveGrant { role: pb::Role::Speaker as i32, fingerprint: s("kfg_ab…wxyz") }),
            records: vec![s("rec_3"), s("rec_9")],
        })),
        role: pb::Role::Governor as i32,
        history: vec![
            pb::HistoryItem { seq: 9, idx: 1, at_unix_micros: 50, actor: Some(s("ag_1")), fact: s("posted") },
            pb::HistoryItem { seq: 8, idx: 0, at_unix_micros: 40, actor: None, fact: s("deadline_passed") },
        ],
        obligations: vec![wire_turn_item()],
        available_actions: vec![s("post"), s("close_thread"), s("adopt_assignment")],
    };
    assert_eq!(pb::WorkingSet::from(&set), expected);
}

#[test]
fn every_summary_kind_has_its_case() {
    use pb::working_set::Summary;
    let summary = |s: ObjectSummary| Summary::from(&s);
    assert_eq!(
        summary(ObjectSummary::Agent { id: AgentId(3), active: false, open_threads: 4 }),
        Summary::Agent(pb::AgentSummary { id: s("ag_3"), active: false, open_threads: 4 })
    );
    assert_eq!(
        summary(ObjectSummary::Memory {
            id: MemoryId(5),
            author: AgentId(3),
            current: Version(2),
            public: true,
            withdrawn: true
        }),
        Summary::Memory(pb::MemorySummary {
            id: s("mem_5"),
            author: s("ag_3"),
            current_version: 2,
            public: true,
            withdrawn: true
        })
    );
    assert_eq!(
        summary(ObjectSummary::Task {
            id: TaskId(3),
            author: AgentId(1),
            restricted: true,
            current: Version(2),
            paused: true,
            adopted: 1,
            open_engagements: 2,
            max_adoptions: Some(5),
        }),
        Summary::Task(pb::TaskSummary {
            id: s("task_3"),
            author: s("ag_1"),
            restricted: true,
            current_version: 2,
            paused: true,
            adopted: 1,
            open_engagements: 2,
            max_adoptions: Some(5),
        })
    );
    // No role outside a thread: unspecified on the wire.
    let set = WorkingSet {
        object: ObjectRef::Memory(MemoryId(5)),
        summary: ObjectSummary::Memory {
            id: MemoryId(5),
            author: AgentId(3),
            current: Version(1),
            public: false,
            withdrawn: false,
        },
        role: None,
        history: vec![],
        obligations: vec![],
        available: vec![],
    };
    assert_eq!(pb::WorkingSet::from(&set).role, pb::Role::Unspecified as i32);
}

#[test]
fn an_entry_view_carries_its_labels_the_hold_and_the_collective_it_heads() {
    let header = EntryView {
        labels: Some(Labels::new(Taint::Trusted, Scope::Fleet)),
        collective_size: Some(3),
        ..entry_view(Some(Content::from("split the work")))
    };
    let wire = pb::EntryView::from(&header);
    assert_eq!(wire.labels, wire_labels(pb::Taint::Trusted, pb::Scope::Fleet));
    assert_eq!((wire.held, wire.collective_size), (false, Some(3)));
    // COORDINATION §2.6: a held entry shows its labels and no content.
    let held =
        EntryView { labels: Some(Labels::new(Taint::Quarantined, Scope::Fleet)), held: true, ..entry_view(None) };
    let wire = pb::EntryView::from(&held);
    assert_eq!((wire.held, wire.content), (true, None));
    assert_eq!(wire.labels, wire_labels(pb::Taint::Quarantined, pb::Scope::Fleet));
    // COORDINATION §5.8: a record's write names the record and rev; any other entry none.
    assert_eq!(pb::EntryView::from(&header).record, None);
    let write = EntryView { record: Some((RecordId(4), 7)), ..entry_view(None) };
    assert_eq!(pb::EntryView::from(&write).record, Some(pb::RecordRevisionRef { record: s("rec_4"), rev: 7 }));
}

#[test]
fn a_mailbox_page_keeps_items_labels_omissions_my_response_and_the_cursor() {
    let asked = Response {
        thread: ThreadId(7),
        entry: EntrySeq(4),
        responder: AgentId(2),
        arose_at: ts(30),
        state: ResponseState::Pending,
    };
    let page = MailboxPage {
        items: vec![
            MailItem {
                entry: entry(),
                labels: Some(Labels::new(Taint::Tainted, Scope::Fleet)),
                held: false,
                content: Some(Content::from("hello")),
                content_omitted: false,
                my_response: None,
            },
            MailItem {
                entry: not_first(),
                labels: None,
                held: false,
                content: None,
                content_omitted: true,
                my_response: Some(asked.clone()),
            },
        ],
        next_after: Some(EntrySeq(9)),
    };
    let expected = pb::Mailbox {
        items: vec![
            pb::MailItem {
                entry: Some(pb::Entry::from(&entry())),
                labels: wire_labels(pb::Taint::Tainted, pb::Scope::Fleet),
                held: false,
                content: wc("hello"),
                content_omitted: false,
                my_response: None,
            },
            pb::MailItem {
                entry: Some(pb::Entry::from(&not_first())),
                labels: None,
                held: false,
                content: None,
                content_omitted: true,
                my_response: Some(pb::OwedResponse::from(&asked)),
            },
        ],
        next_after: Some(9),
    };
    assert_eq!(pb::Mailbox::from(&page), expected);
    // The end of the thread: no cursor, and the client keeps its own.
    assert_eq!(pb::Mailbox::from(&MailboxPage { items: vec![], next_after: None }), pb::Mailbox::default());
}

#[test]
fn a_collective_keeps_ranks_in_order_and_sends_no_omitted_output() {
    use pb::assignment::State;
    let delivered = |output: &str| AssignmentState::Delivered {
        taken_at: ts(40),
        at: ts(50),
        judgment_due: ts(170),
        output: Content::from(output),
    };
    let rank = |rank: u32, member: u64, state: AssignmentState, output_omitted: bool| RankView {
        rank,
        member: AgentId(member),
        entry: EntrySeq(10 + u64::from(rank)),
        assignment: Assignment { addressee: AgentId(member), ..assignment(state) },
        output_omitted,
    };
    let view = CollectiveView {
        thread: ThreadId(7),
        header: EntrySeq(9),
        author: AgentId(1),
        formed_at: ts(35),
        ranks: vec![
            rank(0, 2, delivered("inline"), false),
            // The core blanked an omitted output; the wire leaves it out rather than send empty bytes.
            rank(1, 4, delivered(""), true),
            rank(
                2,
                6,
                AssignmentState::Ended {
                    at: ts(60),
                    outcome: AssignmentOutcome::Adopted,
                    delivered: Some(Content::default()),
                },
                true,
            ),
            rank(3, 8, AssignmentState::Open, false),
        ],
        complete: false,
        all_delivered: false,
    };
    let wire = pb::Collective::from(&view);
    assert_eq!(
        (wire.thread.as_str(), wire.header, wire.author.as_str(), wire.size, wire.formed_at_unix_micros),
        ("th_7", 9, "ag_1", 4, 35)
    );
    assert_eq!((wire.complete, wire.all_delivered), (false, false));
    let ranks: Vec<(u32, &str, u64, bool)> =
        wire.ranks.iter().map(|r| (r.rank, r.member.as_str(), r.entry, r.output_omitted)).collect();
    assert_eq!(
        ranks,
        vec![(0, "ag_2", 10, false), (1, "ag_4", 11, true), (2, "ag_6", 12, true), (3, "ag_8", 13, false)]
    );
    let state = |i: usize| wire.ranks[i].assignment.as_ref().and_then(|a| a.state.clone());
    match state(0) {
        Some(State::Delivered(d)) => assert_eq!(d.output, wc("inline")),
        other => panic!("{other:?}"),
    }
    match state(1) {
        Some(State::Delivered(d)) => assert_eq!(d.output, None, "omitted, not empty"),
        other => panic!("{other:?}"),
    }
    match state(2) {
        Some(State::Ended(e)) => assert_eq!(e.delivered, None, "omitted, not empty"),
        other => panic!("{other:?}"),
    }
    assert_eq!(state(3), Some(State::Open(())));
    assert_eq!(wire.ranks[1].assignment.as_ref().map(|a| a.addressee.as_str()), Some("ag_4"));
}

#[test]
fn a_barrier_shows_every_rank_its_arrival_and_the_state() {
    let arrivals = [
        (BarrierArrival::Author, pb::BarrierArrival::Author, None),
        (BarrierArrival::Pending, pb::BarrierArrival::Pending, None),
        (BarrierArrival::Replied(EntrySeq(12)), pb::BarrierArrival::Replied, Some(12)),
        (BarrierArrival::Handled, pb::BarrierArrival::Handled, None),
        (BarrierArrival::Retracted, pb::BarrierArrival::Retracted, None),
        (BarrierArrival::MembershipEnded, pb::BarrierArrival::MembershipEnded, None),
        (BarrierArrival::Demoted, pb::BarrierArrival::Demoted, None),
        (BarrierArrival::ThreadClosed, pb::BarrierArrival::ThreadClosed, None),
    ];
    let view = BarrierView {
        thread: ThreadId(7),
        entry: EntrySeq(5),
        author: AgentId(1),
        ranks: arrivals
            .iter()
            .enumerate()
            .map(|(i, (a, _, _))| BarrierRank { rank: i as u32, member: AgentId(i as u64 + 1), arrival: *a })
            .collect(),
        state: BarrierState::Broken,
        pending: 1,
        absent: 4,
    };
    let expected = pb::Barrier {
        thread: s("th_7"),
        entry: 5,
        author: s("ag_1"),
        size: 8,
        ranks: arrivals
            .iter()
            .enumerate()
            .map(|(i, (_, wire, by))| pb::BarrierRank {
                rank: i as u32,
                member: format!("ag_{}", i + 1),
                arrival: *wire as i32,
                replied_by_entry: *by,
            })
            .collect(),
        state: pb::BarrierState::Broken as i32,
        pending: 1,
        absent: 4,
    };
    assert_eq!(pb::Barrier::from(&view), expected);
    for (state, wire) in [
        (BarrierState::Waiting, pb::BarrierState::Waiting),
        (BarrierState::Released, pb::BarrierState::Released),
        (BarrierState::Broken, pb::BarrierState::Broken),
    ] {
        assert_eq!(pb::BarrierState::from(state), wire);
    }
}
