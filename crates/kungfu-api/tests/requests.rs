//! Wire to domain: every write request converts to exactly the domain action it means, with its
//! idempotency key, and every read request to the arguments of its read. Malformed requests are
//! covered in `malformed.rs`.

use kungfu_api::pb;
use kungfu_api::request::{
    self, CollectiveQuery, EngagementInputQuery, EntryQuery, MailboxQuery, MemoryQuery, ResponseQuery, TaskQuery,
};
use kungfu_api::{FieldError, KeyedAction, SecretMaterial};
use kungfu_core::action::{Addressees, LabeledBody, RankGoal};
use kungfu_core::coord::read::MailFilter;
use kungfu_core::model::{Audience, Eligibility, Judge, MissingJudgment, Pin};
use kungfu_core::read::Cursor;
use kungfu_core::secret::{fingerprint, hash_secret};
use kungfu_core::{Action, ActionKind, ContractDraft, NewAssignment, NewGrant, PostBody};
use kungfu_types::{
    AgentId, AssignmentId, Content, EngagementId, EntrySeq, Labels, MemoryId, Micros, ObjectRef, Role, Scope, Taint,
    TaskId, ThreadId, Timestamp, Version,
};
use std::collections::BTreeSet;

const KEY: &str = "req-1.a_b~c";
const AGENT_KEY: &str = "kfa_0123456789abcdef0123456789abcdef";
const GRANT_SECRET: &str = "kfg_fedcba9876543210fedcba9876543210";

fn k() -> String {
    KEY.to_string()
}

fn c(text: &str) -> Option<pb::Content> {
    Some(pb::Content { body: text.as_bytes().to_vec() })
}

fn wire_pin(memory: &str, version: u32) -> pb::MemoryPin {
    pb::MemoryPin { memory: memory.to_string(), version }
}

fn wire_labels(taint: pb::Taint, scope: pb::Scope) -> Option<pb::Labels> {
    Some(pb::Labels { taint: taint as i32, scope: scope as i32 })
}

fn labeled(text: &str, taint: pb::Taint, scope: pb::Scope) -> Option<pb::LabeledBody> {
    Some(pb::LabeledBody {
        kind: Some(pb::labeled_body::Kind::Content(pb::LabeledContent {
            content: c(text),
            labels: wire_labels(taint, scope),
        })),
    })
}

fn labeled_pin(memory: &str, version: u32) -> Option<pb::LabeledBody> {
    Some(pb::LabeledBody { kind: Some(pb::labeled_body::Kind::Pin(wire_pin(memory, version))) })
}

fn set(agents: &[u64]) -> BTreeSet<AgentId> {
    agents.iter().map(|a| AgentId(*a)).collect()
}

fn grant(role: Role) -> NewGrant {
    NewGrant { role, hash: hash_secret(GRANT_SECRET), fingerprint: fingerprint(GRANT_SECRET) }
}

fn full_contract_wire() -> pb::ContractDraft {
    pb::ContractDraft {
        requirements: c("write a parser"),
        output_structure: c("a crate"),
        inputs: vec![wire_pin("mem_3", 2), wire_pin("mem_4", 1)],
        references: c("see the RFC"),
        delivery_window_micros: Some(3_600_000_000),
        judgment_window_micros: Some(7_200_000_000),
        on_missing_judgment: pb::MissingJudgment::Adopted as i32,
        acceptance: c("all tests pass"),
        judge: Some("ag_9".to_string()),
        eligibility: Some(pb::Eligibility {
            registered_before_unix_micros: Some(1_700_000_000_000_000),
            excluded: vec!["ag_12".to_string(), "ag_11".to_string()],
        }),
        max_adoptions: Some(3),
    }
}

fn full_contract_domain() -> ContractDraft {
    ContractDraft {
        requirements: Content::from("write a parser"),
        output_structure: Some(Content::from("a crate")),
        inputs: vec![
            Pin { memory: MemoryId(3), version: Version(2) },
            Pin { memory: MemoryId(4), version: Version(1) },
        ],
        references: Some(Content::from("see the RFC")),
        delivery_window: Some(Micros::from_secs(3600)),
        judgment_window: Some(Micros::from_secs(7200)),
        on_missing_judgment: MissingJudgment::Adopted,
        acceptance: Content::from("all tests pass"),
        judge: Judge::Agent(AgentId(9)),
        eligibility: Eligibility {
            registered_before: Some(Timestamp::from_micros(1_700_000_000_000_000)),
            excluded: set(&[11, 12]),
        },
        max_adoptions: Some(3),
    }
}

/// Every write request of the API, fully populated, with the action it must become.
fn every_write() -> Vec<(Result<KeyedAction, FieldError>, Action)> {
    let agent_key = SecretMaterial::of(AGENT_KEY);
    let grant_secret = SecretMaterial::of(GRANT_SECRET);
    vec![
        (
            request::register_action(pb::RegisterRequest { idempotency_key: k() }, &agent_key),
            Action::RegisterAgent { key_hash: hash_secret(AGENT_KEY), key_fingerprint: fingerprint(AGENT_KEY) },
        ),
        (
            request::deactivate_agent_action(pb::DeactivateAgentRequest { idempotency_key: k(), agent: "ag_3".into() }),
            Action::DeactivateAgent { agent: AgentId(3) },
        ),
        (
            request::set_wake_target_action(
                pb::SetWakeTargetRequest {
                    idempotency_key: k(),
                    url: "https://hooks.example.com/a".into(),
                    kinds: vec![pb::ObligationKind::Delivery as i32],
                    objects: vec!["th_4".into()],
                },
                kungfu_types::WakeSecret([3; 32]),
            ),
            Action::SetWakeTarget {
                url: "https://hooks.example.com/a".into(),
                secret: kungfu_types::WakeSecret([3; 32]),
                filter: kungfu_core::model::WakeFilter {
                    kinds: [kungfu_core::model::ObligationKind::Delivery].into(),
                    objects: [kungfu_types::ObjectRef::Thread(ThreadId(4))].into(),
                },
            },
        ),
        (
            request::remove_wake_target_action(pb::RemoveWakeTargetRequest {
                idempotency_key: k(),
                target: "wt_2".into(),
            }),
            Action::RemoveWakeTarget { target: kungfu_types::WakeTargetId(2) },
        ),
        (
            request::create_memory_action(pb::CreateMemoryRequest { idempotency_key: k(), content: c("notes") }),
            Action::CreateMemory { content: Content::from("notes") },
        ),
        (
            request::update_memory_action(pb::UpdateMemoryRequest {
                idempotency_key: k(),
                memory: "mem_5".into(),
                content: c("v2"),
            }),
            Action::UpdateMemory { memory: MemoryId(5), content: Content::from("v2") },
        ),
        (
            request::publish_memory_action(pb::PublishMemoryRequest { idempotency_key: k(), memory: "mem_5".into() }),
            Action::PublishMemory { memory: MemoryId(5) },
        ),
        (
            request::unpublish_memory_action(pb::UnpublishMemoryRequest {
                idempotency_key: k(),
                memory: "mem_6".into(),
            }),
            Action::UnpublishMemory { memory: MemoryId(6) },
        ),
        (
            request::withdraw_memory_action(pb::WithdrawMemoryRequest { idempotency_key: k(), memory: "mem_7".into() }),
            Action::WithdrawMemory { memory: MemoryId(7) },
        ),
        (
            request::create_thread_action(
                pb::CreateThreadRequest {
                    idempotency_key: k(),
                    subject: c("release"),
                    grant: Some(pb::GrantSpec { role: pb::Role::Governor as i32 }),
                },
                &grant_secret,
            ),
            Action::CreateThread { subject: Content::from("release"), grant: Some(grant(Role::Governor)) },
        ),
        (
            request::issue_grant_action(
                pb::IssueGrantRequest { idempotency_key: k(), thread: "th_7".into(), role: pb::Role::Observer as i32 },
                &grant_secret,
            ),
            Action::IssueGrant { thread: ThreadId(7), grant: grant(Role::Observer) },
        ),
        (
            request::void_grant_action(pb::VoidGrantRequest { idempotency_key: k(), thread: "th_7".into() }),
            Action::VoidGrant { thread: ThreadId(7) },
        ),
        (
            request::join_action(pb::JoinRequest { idempotency_key: k(), grant_secret: GRANT_SECRET.into() }),
            Action::Join { grant_hash: hash_secret(GRANT_SECRET) },
        ),
        (
            request::leave_action(pb::LeaveRequest { idempotency_key: k(), thread: "th_8".into() }),
            Action::Leave { thread: ThreadId(8) },
        ),
        (
            request::remove_member_action(pb::RemoveMemberRequest {
                idempotency_key: k(),
                thread: "th_8".into(),
                member: "ag_4".into(),
            }),
            Action::Remove { thread: ThreadId(8), member: AgentId(4) },
        ),
        (
            request::change_role_action(pb::ChangeRoleRequest {
                idempotency_key: k(),
                thread: "th_8".into(),
                member: "ag_4".into(),
                role: pb::Role::Observer as i32,
            }),
            Action::ChangeRole { thread: ThreadId(8), member: AgentId(4), role: Role::Observer },
        ),
        (
            request::post_action(pb::PostRequest {
                idempotency_key: k(),
                thread: "th_7".into(),
                body: Some(pb::PostBody { kind: Some(pb::post_body::Kind::Pin(wire_pin("mem_5", 2))) }),
                reply_to: Some(3),
                ask: Some(pb::Ask { agents: vec!["ag_9".into(), "ag_2".into()] }),
                task_ref: Some("task_1".into()),
                assignment: Some(pb::NewAssignment {
                    addressee: "ag_2".into(),
                    criteria: c("green build"),
                    output_structure: c("a diff"),
                    delivery_window_micros: Some(60_000_000),
                    judgment_window_micros: Some(120_000_000),
                }),
            }),
            Action::Post {
                thread: ThreadId(7),
                body: PostBody::Pin(Pin { memory: MemoryId(5), version: Version(2) }),
                reply_to: Some(EntrySeq(3)),
                ask: Some(set(&[2, 9])),
                task_ref: Some(TaskId(1)),
                assignment: Some(NewAssignment {
                    addressee: AgentId(2),
                    criteria: Content::from("green build"),
                    output_structure: Some(Content::from("a diff")),
                    delivery_window: Some(Micros::from_secs(60)),
                    judgment_window: Some(Micros::from_secs(120)),
                }),
            },
        ),
        (
            request::handle_action(pb::HandleRequest {
                idempotency_key: k(),
                thread: "th_7".into(),
                entry: 4,
                note: c("seen, nothing to add"),
            }),
            Action::Handle {
                thread: ThreadId(7),
                entry: EntrySeq(4),
                note: Some(Content::from("seen, nothing to add")),
            },
        ),
        (
            request::retract_action(pb::RetractRequest { idempotency_key: k(), thread: "th_7".into(), entry: 5 }),
            Action::Retract { thread: ThreadId(7), entry: EntrySeq(5) },
        ),
        (
            request::close_thread_action(pb::CloseThreadRequest { idempotency_key: k(), thread: "th_7".into() }),
            Action::CloseThread { thread: ThreadId(7) },
        ),
        (
            request::take_assignment_action(pb::TakeAssignmentRequest {
                idempotency_key: k(),
                assignment: "asg_2".into(),
            }),
            Action::TakeAssignment { assignment: AssignmentId(2) },
        ),
        (
            request::deliver_assignment_action(pb::DeliverAssignmentRequest {
                idempotency_key: k(),
                assignment: "asg_2".into(),
                output: c("done"),
            }),
            Action::DeliverAssignment { assignment: AssignmentId(2), output: Content::from("done") },
        ),
        (
            request::adopt_assignment_action(pb::AdoptAssignmentRequest {
                idempotency_key: k(),
                assignment: "asg_2".into(),
            }),
            Action::AdoptAssignment { assignment: AssignmentId(2) },
        ),
        (
            request::reject_assignment_action(pb::RejectAssignmentRequest {
                idempotency_key: k(),
                assignment: "asg_2".into(),
                reason: c("tests fail"),
            }),
            Action::RejectAssignment { assignment: AssignmentId(2), reason: Content::from("tests fail") },
        ),
        (
            request::drop_assignment_action(pb::DropAssignmentRequest {
                idempotency_key: k(),
                assignment: "asg_3".into(),
            }),
            Action::DropAssignment { assignment: AssignmentId(3) },
        ),
        (
            request::void_assignment_action(pb::VoidAssignmentRequest {
                idempotency_key: k(),
                assignment: "asg_4".into(),
            }),
            Action::VoidAssignment { assignment: AssignmentId(4) },
        ),
        (
            request::create_task_action(pb::CreateTaskRequest {
                idempotency_key: k(),
                audience: Some(pb::Audience {
                    kind: Some(pb::audience::Kind::Restricted(pb::RestrictedAudience {
                        agents: vec!["ag_5".into(), "ag_2".into()],
                    })),
                }),
                contract: Some(full_contract_wire()),
            }),
            Action::CreateTask { audience: Audience::Restricted(set(&[2, 5])), contract: full_contract_domain() },
        ),
        (
            request::revise_contract_action(pb::ReviseContractRequest {
                idempotency_key: k(),
                task: "task_1".into(),
                contract: Some(full_contract_wire()),
            }),
            Action::ReviseContract { task: TaskId(1), contract: full_contract_domain() },
        ),
        (
            request::pause_task_action(pb::PauseTaskRequest { idempotency_key: k(), task: "task_1".into() }),
            Action::PauseTask { task: TaskId(1) },
        ),
        (
            request::resume_task_action(pb::ResumeTaskRequest { idempotency_key: k(), task: "task_1".into() }),
            Action::ResumeTask { task: TaskId(1) },
        ),
        (
            request::take_task_action(pb::TakeTaskRequest { idempotency_key: k(), task: "task_2".into() }),
            Action::TakeTask { task: TaskId(2) },
        ),
        (
            request::deliver_task_action(pb::DeliverTaskRequest {
                idempotency_key: k(),
                task: "task_2".into(),
                output: c("result"),
                take: true,
            }),
            Action::DeliverTask { task: TaskId(2), output: Content::from("result"), take: true },
        ),
        (
            request::drop_engagement_action(pb::DropEngagementRequest {
                idempotency_key: k(),
                engagement: "eng_4".into(),
            }),
            Action::DropEngagement { engagement: EngagementId(4) },
        ),
        (
            request::adopt_engagement_action(pb::AdoptEngagementRequest {
                idempotency_key: k(),
                engagement: "eng_4".into(),
            }),
            Action::AdoptEngagement { engagement: EngagementId(4) },
        ),
        (
            request::reject_engagement_action(pb::RejectEngagementRequest {
                idempotency_key: k(),
                engagement: "eng_4".into(),
                reason: c("wrong format"),
            }),
            Action::RejectEngagement { engagement: EngagementId(4), reason: Content::from("wrong format") },
        ),
        (
            request::write_labeled_action(pb::WriteLabeledRequest {
                idempotency_key: k(),
                memory: Some("mem_5".into()),
                content: c("reviewed"),
                labels: wire_labels(pb::Taint::Trusted, pb::Scope::Tenant),
            }),
            Action::WriteLabeled {
                memory: Some(MemoryId(5)),
                content: Content::from("reviewed"),
                labels: Labels::new(Taint::Trusted, Scope::Tenant),
            },
        ),
        (
            request::widen_scope_action(pb::WidenScopeRequest {
                idempotency_key: k(),
                pin: Some(wire_pin("mem_5", 2)),
                scope: pb::Scope::Public as i32,
            }),
            Action::WidenScope { pin: Pin { memory: MemoryId(5), version: Version(2) }, scope: Scope::Public },
        ),
        (
            request::send_action(pb::SendRequest {
                idempotency_key: k(),
                thread: "th_7".into(),
                body: labeled("status?", pb::Taint::Tainted, pb::Scope::Fleet),
                to: Some(pb::SendTo {
                    kind: Some(pb::send_to::Kind::Agents(pb::Agents { agents: vec!["ag_4".into(), "ag_2".into()] })),
                }),
                reply_to: Some(3),
                reply_to_latest: true,
            }),
            Action::Send {
                thread: ThreadId(7),
                body: LabeledBody::Content {
                    content: Content::from("status?"),
                    labels: Labels::new(Taint::Tainted, Scope::Fleet),
                },
                to: Addressees::Agents(set(&[2, 4])),
                reply_to: Some(EntrySeq(3)),
                reply_to_latest: true,
            },
        ),
        (
            request::scatter_action(pb::ScatterRequest {
                idempotency_key: k(),
                thread: "th_7".into(),
                header: labeled_pin("mem_3", 1),
                // Sent out of rank order: the converter keeps the order, the core ranks.
                goals: vec![
                    pb::RankGoal {
                        member: "ag_9".into(),
                        body: labeled("part b", pb::Taint::Tainted, pb::Scope::Fleet),
                    },
                    pb::RankGoal { member: "ag_2".into(), body: labeled_pin("mem_4", 2) },
                ],
                criteria: c("tests pass"),
                output_structure: c("a diff"),
                delivery_window_micros: Some(60_000_000),
                judgment_window_micros: Some(120_000_000),
            }),
            Action::Scatter {
                thread: ThreadId(7),
                header: LabeledBody::Pin(Pin { memory: MemoryId(3), version: Version(1) }),
                goals: vec![
                    RankGoal {
                        member: AgentId(9),
                        body: LabeledBody::Content {
                            content: Content::from("part b"),
                            labels: Labels::new(Taint::Tainted, Scope::Fleet),
                        },
                    },
                    RankGoal {
                        member: AgentId(2),
                        body: LabeledBody::Pin(Pin { memory: MemoryId(4), version: Version(2) }),
                    },
                ],
                criteria: Content::from("tests pass"),
                output_structure: Some(Content::from("a diff")),
                delivery_window: Some(Micros::from_secs(60)),
                judgment_window: Some(Micros::from_secs(120)),
            },
        ),
    ]
}

#[test]
fn every_write_request_converts_to_its_exact_action_and_key() {
    for (converted, expected) in every_write() {
        let keyed = converted.unwrap_or_else(|e| panic!("{:?} did not convert: {e}", expected.kind()));
        assert_eq!(keyed.key.as_str(), KEY, "{:?}", expected.kind());
        assert_eq!(keyed.action, expected);
    }
}

#[test]
fn every_client_action_kind_has_a_write_request() {
    let covered: BTreeSet<ActionKind> = every_write().iter().map(|(_, action)| action.kind()).collect();
    // Expiry is proposed by the leader's timer (L4), never by a client. The shared record's writes
    // are core only so far (issue #17): no write request yet.
    // The wake deliverer's progress is the leader's too (issue #35).
    let not_requested = [ActionKind::Expire, ActionKind::CreateRecord, ActionKind::PatchRecord, ActionKind::RecordWake];
    let expected: BTreeSet<ActionKind> =
        ActionKind::ALL.iter().copied().filter(|k| !not_requested.contains(k)).collect();
    assert_eq!(covered, expected);
}

#[test]
fn post_distinguishes_ask_not_stated_from_ask_nobody() {
    let post = |ask: Option<pb::Ask>| pb::PostRequest {
        idempotency_key: k(),
        thread: "th_1".into(),
        body: Some(pb::PostBody { kind: Some(pb::post_body::Kind::Content(pb::Content { body: b"hi".to_vec() })) }),
        ask,
        ..Default::default()
    };
    let ask_of = |req: pb::PostRequest| match request::post_action(req.clone()).map(|k| k.action) {
        Ok(Action::Post { ask, body, reply_to, task_ref, assignment, .. }) => {
            // New content becomes a new Memory in the same action (§6.3); nothing else was stated.
            assert_eq!(body, PostBody::Content(Content::from("hi")));
            assert_eq!((reply_to, task_ref, assignment), (None, None, None));
            ask
        }
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(ask_of(post(None)), None, "absent ask is not stated (§6.3 rules 2-4 apply)");
    assert_eq!(ask_of(post(Some(pb::Ask { agents: vec![] }))), Some(BTreeSet::new()), "empty ask means nobody");
}

#[test]
fn unstated_contract_terms_take_the_domain_defaults() {
    let req = pb::CreateTaskRequest {
        idempotency_key: k(),
        audience: Some(pb::Audience { kind: Some(pb::audience::Kind::Open(pb::OpenAudience {})) }),
        contract: Some(pb::ContractDraft { requirements: c("req"), acceptance: c("acc"), ..Default::default() }),
    };
    let action = request::create_task_action(req.clone()).map(|k| k.action);
    // §7.1: undecided if not stated; the author judges; no eligibility, no limit, default windows.
    assert_eq!(
        action,
        Ok(Action::CreateTask { audience: Audience::Open, contract: ContractDraft::simple("req", "acc") })
    );
}

#[test]
fn grants_bind_speaker_unless_a_role_is_stated() {
    let secret = SecretMaterial::of(GRANT_SECRET);
    let created = request::create_thread_action(
        pb::CreateThreadRequest { idempotency_key: k(), subject: c("s"), grant: Some(pb::GrantSpec::default()) },
        &secret,
    );
    assert_eq!(
        created.map(|k| k.action),
        Ok(Action::CreateThread { subject: Content::from("s"), grant: Some(grant(Role::Speaker)) })
    );
    let issued = request::issue_grant_action(
        pb::IssueGrantRequest { idempotency_key: k(), thread: "th_1".into(), role: 0 },
        &secret,
    );
    assert_eq!(issued.map(|k| k.action), Ok(Action::IssueGrant { thread: ThreadId(1), grant: grant(Role::Speaker) }));
}

#[test]
fn a_thread_without_a_grant_ignores_the_secret_material() {
    let created = request::create_thread_action(
        pb::CreateThreadRequest { idempotency_key: k(), subject: c("s"), grant: None },
        &SecretMaterial::of(GRANT_SECRET),
    );
    assert_eq!(created.map(|k| k.action), Ok(Action::CreateThread { subject: Content::from("s"), grant: None }));
}

#[test]
fn empty_content_is_content_not_absence() {
    let req = pb::CreateMemoryRequest { idempotency_key: k(), content: Some(pb::Content { body: Vec::new() }) };
    assert_eq!(
        request::create_memory_action(req.clone()).map(|k| k.action),
        Ok(Action::CreateMemory { content: Content::default() })
    );
    // A content field is bytes, not text: anything passes through unchanged (L6).
    let bytes = vec![0u8, 0xff, b'\n', b'{'];
    let req = pb::DeliverTaskRequest {
        idempotency_key: k(),
        task: "task_1".into(),
        output: Some(pb::Content { body: bytes.clone() }),
        take: false,
    };
    assert_eq!(
        request::deliver_task_action(req.clone()).map(|k| k.action),
        Ok(Action::DeliverTask { task: TaskId(1), output: Content::new(bytes), take: false })
    );
}

#[test]
fn windows_pass_through_for_the_core_to_bound() {
    // Zero and absurdly large windows are the core's to refuse against its configured limits.
    for window in [0, u64::MAX] {
        let req = pb::PostRequest {
            idempotency_key: k(),
            thread: "th_1".into(),
            body: Some(pb::PostBody { kind: Some(pb::post_body::Kind::Pin(wire_pin("mem_1", 1))) }),
            assignment: Some(pb::NewAssignment {
                addressee: "ag_1".into(),
                criteria: c("x"),
                delivery_window_micros: Some(window),
                judgment_window_micros: Some(window),
                ..Default::default()
            }),
            ..Default::default()
        };
        match request::post_action(req.clone()).map(|k| k.action) {
            Ok(Action::Post { assignment: Some(a), .. }) => {
                assert_eq!((a.delivery_window, a.judgment_window), (Some(Micros(window)), Some(Micros(window))));
                assert_eq!(a.output_structure, None);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[test]
fn read_requests_convert_to_their_read_arguments() {
    assert_eq!(
        request::get_memory_query(&pb::GetMemoryRequest { memory: "mem_5".into(), version: Some(2) }),
        Ok(MemoryQuery { memory: MemoryId(5), version: Some(Version(2)) })
    );
    assert_eq!(
        request::get_memory_query(&pb::GetMemoryRequest { memory: "mem_5".into(), version: None }),
        Ok(MemoryQuery { memory: MemoryId(5), version: None })
    );
    let timeline = request::timeline_query(&pb::TimelineRequest { thread: "th_7".into(), after: 12, page_size: 20 });
    assert_eq!(timeline.map(|q| (q.thread, q.after, q.page_size)), Ok((ThreadId(7), Some(EntrySeq(12)), 20)));
    let from_start = request::timeline_query(&pb::TimelineRequest { thread: "th_7".into(), after: 0, page_size: 0 });
    assert_eq!(from_start.map(|q| (q.after, q.page_size)), Ok((None, 0)));
    assert_eq!(
        request::get_entry_query(&pb::GetEntryRequest { thread: "th_7".into(), entry: 3 }),
        Ok(EntryQuery { thread: ThreadId(7), entry: EntrySeq(3) })
    );
    assert_eq!(
        request::get_referenced_task_query(&pb::GetReferencedTaskRequest { thread: "th_7".into(), entry: 4 }),
        Ok(EntryQuery { thread: ThreadId(7), entry: EntrySeq(4) })
    );
    assert_eq!(
        request::get_response_query(&pb::GetResponseRequest {
            thread: "th_7".into(),
            entry: 3,
            responder: "ag_2".into()
        }),
        Ok(ResponseQuery { thread: ThreadId(7), entry: EntrySeq(3), responder: AgentId(2) })
    );
    assert_eq!(
        request::get_assignment_query(&pb::GetAssignmentRequest { assignment: "asg_9".into() }),
        Ok(AssignmentId(9))
    );
    assert_eq!(
        request::get_task_query(&pb::GetTaskRequest { task: "task_3".into(), version: Some(1) }),
        Ok(TaskQuery { task: TaskId(3), version: Some(Version(1)) })
    );
    assert_eq!(
        request::get_engagement_query(&pb::GetEngagementRequest { engagement: "eng_4".into() }),
        Ok(EngagementId(4))
    );
    assert_eq!(
        request::get_engagement_input_query(&pb::GetEngagementInputRequest { engagement: "eng_4".into(), index: 1 }),
        Ok(EngagementInputQuery { engagement: EngagementId(4), index: 1 })
    );
    let cursor = Cursor(vec![0x01, 0xab, 0xff]);
    let turn = request::turn_query(&pb::GetTurnRequest { cursor: cursor.to_hex(), page_size: 10 });
    assert_eq!(turn.map(|q| (q.cursor, q.page_size)), Ok((Some(cursor.clone()), 10)));
    let first = request::opportunities_query(&pb::GetOpportunitiesRequest { cursor: String::new(), page_size: 0 });
    assert_eq!(first.map(|q| (q.cursor, q.page_size)), Ok((None, 0)));
    for (text, object) in [
        ("ag_3", ObjectRef::Agent(AgentId(3))),
        ("mem_5", ObjectRef::Memory(MemoryId(5))),
        ("th_7", ObjectRef::Thread(ThreadId(7))),
        ("task_1", ObjectRef::Task(TaskId(1))),
    ] {
        assert_eq!(request::working_set_query(&pb::GetWorkingSetRequest { object: text.into() }), Ok(object));
    }
}

#[test]
fn a_send_asks_nobody_when_to_is_absent_or_nobody_and_every_speaker_when_asked() {
    let send = |to: Option<pb::SendTo>| {
        let req = pb::SendRequest {
            idempotency_key: k(),
            thread: "th_1".into(),
            body: labeled_pin("mem_1", 1),
            to,
            ..Default::default()
        };
        match request::send_action(req.clone()).map(|k| k.action) {
            Ok(Action::Send { to, reply_to, reply_to_latest, .. }) => {
                assert_eq!((reply_to, reply_to_latest), (None, false));
                to
            }
            other => panic!("unexpected {other:?}"),
        }
    };
    let kind = |k: pb::send_to::Kind| Some(pb::SendTo { kind: Some(k) });
    assert_eq!(send(None), Addressees::Nobody, "absent `to` asks nobody (unlike Post's ask, no rule picks)");
    assert_eq!(send(kind(pb::send_to::Kind::Nobody(pb::Nobody {}))), Addressees::Nobody);
    assert_eq!(send(kind(pb::send_to::Kind::AllSpeakers(pb::AllSpeakers {}))), Addressees::AllSpeakers);
    // An empty list is the core's to refuse (`to.agents`), so every door answers it the same way.
    assert_eq!(
        send(kind(pb::send_to::Kind::Agents(pb::Agents { agents: vec![] }))),
        Addressees::Agents(BTreeSet::new())
    );
}

#[test]
fn a_labeled_write_of_a_new_memory_and_an_unstated_scatter_spec() {
    let write = request::write_labeled_action(pb::WriteLabeledRequest {
        idempotency_key: k(),
        memory: None,
        content: Some(pb::Content { body: Vec::new() }),
        labels: wire_labels(pb::Taint::Quarantined, pb::Scope::Agent),
    });
    assert_eq!(
        write.map(|k| k.action),
        Ok(Action::WriteLabeled {
            memory: None,
            content: Content::default(),
            labels: Labels::new(Taint::Quarantined, Scope::Agent),
        })
    );
    let scatter = request::scatter_action(pb::ScatterRequest {
        idempotency_key: k(),
        thread: "th_1".into(),
        header: labeled_pin("mem_1", 1),
        goals: vec![pb::RankGoal { member: "ag_2".into(), body: labeled_pin("mem_1", 1) }],
        criteria: c("c"),
        ..Default::default()
    });
    match scatter.map(|k| k.action) {
        Ok(Action::Scatter { output_structure, delivery_window, judgment_window, .. }) => {
            assert_eq!((output_structure, delivery_window, judgment_window), (None, None, None));
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn coordination_reads_convert_to_their_read_arguments() {
    let mailbox = |after: u64, filter: pb::MailboxFilter, page_size: u32| {
        request::mailbox_query(&pb::GetMailboxRequest {
            thread: "th_7".into(),
            after,
            filter: filter as i32,
            page_size,
        })
    };
    assert_eq!(
        mailbox(12, pb::MailboxFilter::AskedMe, 20),
        Ok(MailboxQuery { thread: ThreadId(7), after: Some(EntrySeq(12)), filter: MailFilter::AskedMe, page_size: 20 })
    );
    // 0 starts at the first entry; an unspecified filter keeps every entry.
    assert_eq!(
        mailbox(0, pb::MailboxFilter::Unspecified, 0),
        Ok(MailboxQuery { thread: ThreadId(7), after: None, filter: MailFilter::All, page_size: 0 })
    );
    assert_eq!(mailbox(0, pb::MailboxFilter::All, 0).map(|q| q.filter), Ok(MailFilter::All));
    assert_eq!(
        request::collective_query(&pb::GetCollectiveRequest {
            thread: "th_7".into(),
            header: 4,
            include_outputs: true
        }),
        Ok(CollectiveQuery { thread: ThreadId(7), header: EntrySeq(4), include_outputs: true })
    );
    assert_eq!(
        request::barrier_query(&pb::GetBarrierRequest { thread: "th_7".into(), entry: 5 }),
        Ok(EntryQuery { thread: ThreadId(7), entry: EntrySeq(5) })
    );
}
