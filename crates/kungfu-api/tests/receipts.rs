//! Domain to wire for receipts (L3): every `ActionResult` variant becomes its wire case with every
//! field preserved, and write responses place one-time secrets only in a first success.

use kungfu_api::WriteResponse;
use kungfu_api::pb;
use kungfu_api::pb::receipt::Result as R;
use kungfu_api::response::{create_thread_response, issue_grant_response, receipt_result, register_response};
use kungfu_core::model::{ObligationId, Pin, ScatterRank};
use kungfu_core::{ActionKind, ActionResult, GrantReceipt, Receipt};
use kungfu_types::{
    AgentId, AssignmentId, EngagementId, EntrySeq, Fingerprint, Labels, MemoryId, RecordId, Role, Scope, Taint, TaskId,
    ThreadId, Timestamp, Version, WakeTargetId,
};
use std::collections::BTreeSet;

fn s(text: &str) -> String {
    text.to_string()
}

fn grant(role: Role) -> GrantReceipt {
    GrantReceipt { role, fingerprint: Fingerprint(s("kfg_ab…wxyz")) }
}

fn wire_grant(role: pb::Role) -> pb::GrantReceipt {
    pb::GrantReceipt { role: role as i32, fingerprint: s("kfg_ab…wxyz") }
}

/// Every variant of `ActionResult` with distinct values in every field, and its exact wire form.
fn every_result() -> Vec<(ActionResult, R)> {
    let t = ThreadId(7);
    let task = TaskId(3);
    let eng = EngagementId(4);
    let asg = AssignmentId(2);
    vec![
        (
            ActionResult::AgentRegistered { agent: AgentId(3), key_fingerprint: Fingerprint(s("kfa_01…cdef")) },
            R::AgentRegistered(pb::AgentRegistered { agent: s("ag_3"), key_fingerprint: s("kfa_01…cdef") }),
        ),
        (
            ActionResult::AgentDeactivated {
                agent: AgentId(3),
                memberships_ended: vec![ThreadId(1), ThreadId(2)],
                threads_closed: vec![ThreadId(2)],
            },
            R::AgentDeactivated(pb::AgentDeactivated {
                agent: s("ag_3"),
                memberships_ended: vec![s("th_1"), s("th_2")],
                threads_closed: vec![s("th_2")],
            }),
        ),
        (
            ActionResult::MemoryCreated { memory: MemoryId(5), version: Version(1) },
            R::MemoryCreated(pb::MemoryPin { memory: s("mem_5"), version: 1 }),
        ),
        (
            ActionResult::MemoryUpdated { memory: MemoryId(5), version: Version(4) },
            R::MemoryUpdated(pb::MemoryPin { memory: s("mem_5"), version: 4 }),
        ),
        (
            ActionResult::MemoryPublished { memory: MemoryId(6) },
            R::MemoryPublished(pb::MemoryResult { memory: s("mem_6") }),
        ),
        (
            ActionResult::MemoryUnpublished { memory: MemoryId(8) },
            R::MemoryUnpublished(pb::MemoryResult { memory: s("mem_8") }),
        ),
        (
            ActionResult::MemoryWithdrawn { memory: MemoryId(9) },
            R::MemoryWithdrawn(pb::MemoryResult { memory: s("mem_9") }),
        ),
        (
            ActionResult::ThreadCreated { thread: t, grant: Some(grant(Role::Observer)) },
            R::ThreadCreated(pb::ThreadCreated { thread: s("th_7"), grant: Some(wire_grant(pb::Role::Observer)) }),
        ),
        (
            ActionResult::GrantIssued { thread: t, grant: grant(Role::Governor), voided_previous: true },
            R::GrantIssued(pb::GrantIssued {
                thread: s("th_7"),
                grant: Some(wire_grant(pb::Role::Governor)),
                voided_previous: true,
            }),
        ),
        (ActionResult::GrantVoided { thread: t }, R::GrantVoided(pb::ThreadResult { thread: s("th_7") })),
        (
            ActionResult::Joined {
                thread: t,
                agent: AgentId(4),
                role: Role::Speaker,
                joined_at: Timestamp::from_micros(1_700_000_000_123_456),
                existing: true,
            },
            R::Joined(pb::Joined {
                thread: s("th_7"),
                agent: s("ag_4"),
                role: pb::Role::Speaker as i32,
                joined_at_unix_micros: 1_700_000_000_123_456,
                existing: true,
            }),
        ),
        (ActionResult::Left { thread: ThreadId(8) }, R::Left(pb::ThreadResult { thread: s("th_8") })),
        (
            ActionResult::Removed { thread: t, member: AgentId(5) },
            R::Removed(pb::MemberRemoved { thread: s("th_7"), member: s("ag_5") }),
        ),
        (
            ActionResult::RoleChanged { thread: t, member: AgentId(5), from: Role::Speaker, to: Role::Governor },
            R::RoleChanged(pb::RoleChanged {
                thread: s("th_7"),
                member: s("ag_5"),
                from: pb::Role::Speaker as i32,
                to: pb::Role::Governor as i32,
            }),
        ),
        (
            ActionResult::Posted {
                thread: t,
                entry: EntrySeq(12),
                pin: Pin { memory: MemoryId(5), version: Version(2) },
                responders: [AgentId(9), AgentId(2)].into_iter().collect::<BTreeSet<_>>(),
                ended_own_response: true,
                assignment: Some(asg),
            },
            R::Posted(pb::Posted {
                thread: s("th_7"),
                entry: 12,
                pin: Some(pb::MemoryPin { memory: s("mem_5"), version: 2 }),
                responders: vec![s("ag_2"), s("ag_9")],
                ended_own_response: true,
                assignment: Some(s("asg_2")),
            }),
        ),
        (
            ActionResult::Handled { thread: t, entry: EntrySeq(3) },
            R::Handled(pb::EntryResult { thread: s("th_7"), entry: 3 }),
        ),
        (
            ActionResult::Retracted { thread: t, entry: EntrySeq(4), responses_ended: 2 },
            R::Retracted(pb::Retracted { thread: s("th_7"), entry: 4, responses_ended: 2 }),
        ),
        (ActionResult::ThreadClosed { thread: t }, R::ThreadClosed(pb::ThreadResult { thread: s("th_7") })),
        (
            ActionResult::AssignmentTaken { assignment: asg, delivery_due: Timestamp::from_micros(5_000_001) },
            R::AssignmentTaken(pb::AssignmentTaken { assignment: s("asg_2"), delivery_due_unix_micros: 5_000_001 }),
        ),
        (
            ActionResult::AssignmentDelivered { assignment: asg, judgment_due: Timestamp::from_micros(6_000_002) },
            R::AssignmentDelivered(pb::AssignmentDelivered {
                assignment: s("asg_2"),
                judgment_due_unix_micros: 6_000_002,
            }),
        ),
        (
            ActionResult::AssignmentAdopted { assignment: AssignmentId(10) },
            R::AssignmentAdopted(pb::AssignmentResult { assignment: s("asg_10") }),
        ),
        (
            ActionResult::AssignmentRejected { assignment: AssignmentId(11) },
            R::AssignmentRejected(pb::AssignmentResult { assignment: s("asg_11") }),
        ),
        (
            ActionResult::AssignmentDropped { assignment: AssignmentId(12) },
            R::AssignmentDropped(pb::AssignmentResult { assignment: s("asg_12") }),
        ),
        (
            ActionResult::AssignmentVoided { assignment: AssignmentId(13) },
            R::AssignmentVoided(pb::AssignmentResult { assignment: s("asg_13") }),
        ),
        (
            ActionResult::TaskCreated { task, version: Version(1) },
            R::TaskCreated(pb::ContractVersionRef { task: s("task_3"), version: 1 }),
        ),
        (
            ActionResult::ContractRevised { task, version: Version(2) },
            R::ContractRevised(pb::ContractVersionRef { task: s("task_3"), version: 2 }),
        ),
        (ActionResult::TaskPaused { task }, R::TaskPaused(pb::TaskResult { task: s("task_3") })),
        (ActionResult::TaskResumed { task: TaskId(30) }, R::TaskResumed(pb::TaskResult { task: s("task_30") })),
        (
            ActionResult::Engaged {
                task,
                engagement: eng,
                contract_version: Version(2),
                delivery_due: Timestamp::from_micros(7_000_003),
                existing: true,
            },
            R::Engaged(pb::Engaged {
                task: s("task_3"),
                engagement: s("eng_4"),
                contract_version: 2,
                delivery_due_unix_micros: 7_000_003,
                existing: true,
            }),
        ),
        (
            ActionResult::EngagementDelivered {
                task,
                engagement: eng,
                judgment_due: Timestamp::from_micros(8_000_004),
            },
            R::EngagementDelivered(pb::EngagementDelivered {
                task: s("task_3"),
                engagement: s("eng_4"),
                judgment_due_unix_micros: 8_000_004,
            }),
        ),
        (
            ActionResult::EngagementAdopted { task, engagement: EngagementId(40) },
            R::EngagementAdopted(pb::EngagementResult { task: s("task_3"), engagement: s("eng_40") }),
        ),
        (
            ActionResult::EngagementRejected { task, engagement: EngagementId(41) },
            R::EngagementRejected(pb::EngagementResult { task: s("task_3"), engagement: s("eng_41") }),
        ),
        (
            ActionResult::EngagementDropped { task, engagement: EngagementId(42) },
            R::EngagementDropped(pb::EngagementResult { task: s("task_3"), engagement: s("eng_42") }),
        ),
        (
            ActionResult::Expired {
                ended: vec![
                    ObligationId::Response { thread: t, entry: EntrySeq(3), responder: AgentId(2) },
                    ObligationId::AssignmentDelivery(asg),
                    ObligationId::AssignmentJudgment(AssignmentId(5)),
                    ObligationId::EngagementDelivery(eng),
                    ObligationId::EngagementJudgment(EngagementId(6)),
                ],
            },
            R::Expired(pb::Expired {
                ended: vec![
                    pb::ObligationRef {
                        kind: Some(pb::obligation_ref::Kind::Response(pb::ResponseObligation {
                            thread: s("th_7"),
                            entry: 3,
                            responder: s("ag_2"),
                        })),
                    },
                    pb::ObligationRef { kind: Some(pb::obligation_ref::Kind::AssignmentDelivery(s("asg_2"))) },
                    pb::ObligationRef { kind: Some(pb::obligation_ref::Kind::AssignmentJudgment(s("asg_5"))) },
                    pb::ObligationRef { kind: Some(pb::obligation_ref::Kind::EngagementDelivery(s("eng_4"))) },
                    pb::ObligationRef { kind: Some(pb::obligation_ref::Kind::EngagementJudgment(s("eng_6"))) },
                ],
            }),
        ),
        (
            ActionResult::Sent {
                thread: t,
                entry: EntrySeq(12),
                pin: Pin { memory: MemoryId(8), version: Version(1) },
                responders: [AgentId(4), AgentId(2)].into_iter().collect(),
                readers: 5,
            },
            R::Sent(pb::Sent {
                thread: s("th_7"),
                entry: 12,
                pin: Some(pb::MemoryPin { memory: s("mem_8"), version: 1 }),
                responders: vec![s("ag_2"), s("ag_4")],
                readers: 5,
            }),
        ),
        (
            ActionResult::LabeledWritten {
                pin: Pin { memory: MemoryId(9), version: Version(3) },
                labels: Labels::new(Taint::Quarantined, Scope::Agent),
            },
            R::LabeledWritten(pb::LabeledWritten {
                pin: Some(pb::MemoryPin { memory: s("mem_9"), version: 3 }),
                labels: Some(pb::Labels { taint: pb::Taint::Quarantined as i32, scope: pb::Scope::Agent as i32 }),
            }),
        ),
        (
            ActionResult::ScopeWidened {
                from: Pin { memory: MemoryId(9), version: Version(2) },
                to: Pin { memory: MemoryId(9), version: Version(4) },
                scope: Scope::Tenant,
            },
            R::ScopeWidened(pb::ScopeWidened {
                from: Some(pb::MemoryPin { memory: s("mem_9"), version: 2 }),
                to: Some(pb::MemoryPin { memory: s("mem_9"), version: 4 }),
                scope: pb::Scope::Tenant as i32,
            }),
        ),
        (
            ActionResult::Scattered {
                thread: t,
                header: EntrySeq(20),
                ranks: vec![
                    ScatterRank { member: AgentId(3), entry: EntrySeq(21), assignment: AssignmentId(7) },
                    ScatterRank { member: AgentId(11), entry: EntrySeq(22), assignment: AssignmentId(8) },
                ],
            },
            R::Scattered(pb::Scattered {
                thread: s("th_7"),
                header: 20,
                ranks: vec![
                    pb::ScatteredRank { rank: 0, member: s("ag_3"), entry: 21, assignment: s("asg_7") },
                    pb::ScatteredRank { rank: 1, member: s("ag_11"), entry: 22, assignment: s("asg_8") },
                ],
            }),
        ),
        (
            ActionResult::RecordCreated { record: RecordId(4), thread: t, entry: EntrySeq(30), rev: 1 },
            R::RecordCreated(pb::RecordCreated { record: s("rec_4"), thread: s("th_7"), entry: 30, rev: 1 }),
        ),
        (
            ActionResult::RecordPatched { record: RecordId(4), entry: EntrySeq(31), base_rev: 2, rev: 5, merged: true },
            R::RecordPatched(pb::RecordPatched { record: s("rec_4"), entry: 31, base_rev: 2, rev: 5, merged: true }),
        ),
        (
            ActionResult::WakeTargetSet { target: WakeTargetId(9) },
            R::WakeTargetSet(pb::WakeTargetResult { target: s("wt_9") }),
        ),
        (
            ActionResult::WakeTargetRemoved { target: WakeTargetId(10) },
            R::WakeTargetRemoved(pb::WakeTargetResult { target: s("wt_10") }),
        ),
        (
            ActionResult::WakeRecorded { queued: 3, delivered: 2, gave_up: 1 },
            R::WakeRecorded(pb::WakeRecorded { queued: 3, delivered: 2, gave_up: 1 }),
        ),
    ]
}

/// The variant's name. The match has no wildcard, so a new variant fails to compile here until the
/// test covers it.
fn variant(r: &ActionResult) -> &'static str {
    match r {
        ActionResult::AgentRegistered { .. } => "AgentRegistered",
        ActionResult::AgentDeactivated { .. } => "AgentDeactivated",
        ActionResult::MemoryCreated { .. } => "MemoryCreated",
        ActionResult::MemoryUpdated { .. } => "MemoryUpdated",
        ActionResult::MemoryPublished { .. } => "MemoryPublished",
        ActionResult::MemoryUnpublished { .. } => "MemoryUnpublished",
        ActionResult::MemoryWithdrawn { .. } => "MemoryWithdrawn",
        ActionResult::ThreadCreated { .. } => "ThreadCreated",
        ActionResult::GrantIssued { .. } => "GrantIssued",
        ActionResult::GrantVoided { .. } => "GrantVoided",
        ActionResult::Joined { .. } => "Joined",
        ActionResult::Left { .. } => "Left",
        ActionResult::Removed { .. } => "Removed",
        ActionResult::RoleChanged { .. } => "RoleChanged",
        ActionResult::Posted { .. } => "Posted",
        ActionResult::Handled { .. } => "Handled",
        ActionResult::Retracted { .. } => "Retracted",
        ActionResult::ThreadClosed { .. } => "ThreadClosed",
        ActionResult::AssignmentTaken { .. } => "AssignmentTaken",
        ActionResult::AssignmentDelivered { .. } => "AssignmentDelivered",
        ActionResult::AssignmentAdopted { .. } => "AssignmentAdopted",
        ActionResult::AssignmentRejected { .. } => "AssignmentRejected",
        ActionResult::AssignmentDropped { .. } => "AssignmentDropped",
        ActionResult::AssignmentVoided { .. } => "AssignmentVoided",
        ActionResult::TaskCreated { .. } => "TaskCreated",
        ActionResult::ContractRevised { .. } => "ContractRevised",
        ActionResult::TaskPaused { .. } => "TaskPaused",
        ActionResult::TaskResumed { .. } => "TaskResumed",
        ActionResult::Engaged { .. } => "Engaged",
        ActionResult::EngagementDelivered { .. } => "EngagementDelivered",
        ActionResult::EngagementAdopted { .. } => "EngagementAdopted",
        ActionResult::EngagementRejected { .. } => "EngagementRejected",
        ActionResult::EngagementDropped { .. } => "EngagementDropped",
        ActionResult::Expired { .. } => "Expired",
        ActionResult::Sent { .. } => "Sent",
        ActionResult::LabeledWritten { .. } => "LabeledWritten",
        ActionResult::ScopeWidened { .. } => "ScopeWidened",
        ActionResult::Scattered { .. } => "Scattered",
        ActionResult::RecordCreated { .. } => "RecordCreated",
        ActionResult::RecordPatched { .. } => "RecordPatched",
        ActionResult::WakeTargetSet { .. } => "WakeTargetSet",
        ActionResult::WakeTargetRemoved { .. } => "WakeTargetRemoved",
        ActionResult::WakeRecorded { .. } => "WakeRecorded",
    }
}

#[test]
fn every_action_result_becomes_its_wire_case_with_every_field() {
    for (domain, wire) in every_result() {
        assert_eq!(receipt_result(&domain), Some(wire), "{}", variant(&domain));
    }
}

#[test]
fn the_samples_cover_every_variant_once_and_land_on_distinct_wire_cases() {
    let samples = every_result();
    let names: BTreeSet<&str> = samples.iter().map(|(d, _)| variant(d)).collect();
    assert_eq!(names.len(), 43, "every ActionResult variant on the wire has a sample");
    assert_eq!(names.len(), samples.len(), "and only one");
    // Variants that share a wire message (published, unpublished, withdrawn) must still be told
    // apart by their oneof case.
    let cases: BTreeSet<_> = samples.iter().map(|(_, w)| format!("{:?}", std::mem::discriminant(w))).collect();
    assert_eq!(cases.len(), samples.len());
}

/// L3, §12: a wake target's secret is in the first response only, never in a replay or a receipt.
#[test]
fn a_wake_target_s_secret_goes_out_with_the_first_success_only() {
    let r = receipt(ActionResult::WakeTargetSet { target: WakeTargetId(2) }, ActionKind::SetWakeTarget);
    let first = kungfu_api::response::set_wake_target_response(&r, false, "whsec_abc");
    assert_eq!(first.secret, "whsec_abc");
    let replay = kungfu_api::response::set_wake_target_response(&r, true, "whsec_new");
    assert_eq!(replay.secret, "", "a replay carries no secret (the retried attempt's was never stored)");
    assert!(!format!("{:?}", first.receipt).contains("whsec"), "the receipt holds no secret");
}

/// COORDINATION §5.3, §5.6: the record's write responses carry the receipt and `replayed` like
/// every other write.
#[test]
fn record_write_responses_carry_the_receipt_and_replayed() {
    let created = ActionResult::RecordCreated { record: RecordId(1), thread: ThreadId(2), entry: EntrySeq(3), rev: 1 };
    let r = receipt(created, ActionKind::CreateRecord);
    let wire = pb::CreateRecordResponse::from_receipt(&r, true);
    assert_eq!((wire.receipt.as_ref().map(|w| w.kind.as_str()), wire.replayed), (Some("create_record"), true));
    let patched =
        ActionResult::RecordPatched { record: RecordId(1), entry: EntrySeq(4), base_rev: 1, rev: 2, merged: false };
    let r = receipt(patched, ActionKind::PatchRecord);
    let wire = pb::PatchRecordResponse::from_receipt(&r, false);
    assert_eq!(wire.receipt, Some(pb::Receipt::from(&r)));
    assert_eq!(wire.receipt.map(|w| w.kind), Some("patch_record".to_string()));
}

#[test]
fn a_receipt_keeps_kind_time_and_seq() {
    let result = ActionResult::Left { thread: ThreadId(8) };
    let first = Receipt { kind: ActionKind::Leave, at: Timestamp::from_micros(1_234_567), seq: Some(42), result };
    let wire = pb::Receipt::from(&first);
    assert_eq!(wire.kind, "leave");
    assert_eq!(wire.at_unix_micros, 1_234_567);
    assert_eq!(wire.seq, Some(42));
    assert_eq!(wire.result, Some(R::Left(pb::ThreadResult { thread: s("th_8") })));
    // L2: the two no-effect successes record no fact and so name no seq; absent, not zero.
    let rejoin = Receipt {
        kind: ActionKind::Join,
        at: Timestamp::from_micros(9),
        seq: None,
        result: ActionResult::Joined {
            thread: ThreadId(1),
            agent: AgentId(2),
            role: Role::Observer,
            joined_at: Timestamp::from_micros(3),
            existing: true,
        },
    };
    assert_eq!(pb::Receipt::from(&rejoin).seq, None);
    assert_eq!(pb::Receipt::from(&rejoin).kind, ActionKind::Join.as_str());
}

#[test]
fn a_time_past_the_int64_range_saturates_instead_of_wrapping() {
    let r = ActionResult::AssignmentTaken { assignment: AssignmentId(1), delivery_due: Timestamp(u64::MAX) };
    match receipt_result(&r) {
        Some(R::AssignmentTaken(t)) => assert_eq!(t.delivery_due_unix_micros, i64::MAX),
        other => panic!("unexpected {other:?}"),
    }
}

fn receipt(result: ActionResult, kind: ActionKind) -> Receipt {
    Receipt { kind, at: Timestamp::from_micros(100), seq: Some(1), result }
}

#[test]
fn write_responses_carry_the_receipt_and_replayed() {
    let r = receipt(ActionResult::Handled { thread: ThreadId(1), entry: EntrySeq(2) }, ActionKind::Handle);
    let first = pb::HandleResponse::from_receipt(&r, false);
    assert_eq!(first.receipt, Some(pb::Receipt::from(&r)));
    assert!(!first.replayed);
    let again = pb::HandleResponse::from_receipt(&r, true);
    assert!(again.replayed);
    assert_eq!(again.receipt, first.receipt, "a replay returns the same receipt (L3)");
}

#[test]
fn secrets_appear_only_in_the_first_success() {
    let registered = receipt(
        ActionResult::AgentRegistered { agent: AgentId(1), key_fingerprint: Fingerprint(s("kfa_01…cdef")) },
        ActionKind::RegisterAgent,
    );
    let first = register_response(&registered, false, "kfa_secret");
    assert_eq!(first.agent_key, "kfa_secret");
    assert!(!first.replayed);
    let replay = register_response(&registered, true, "kfa_other");
    assert_eq!(replay.agent_key, "", "L3: a replay never carries a key");
    assert_eq!(replay.receipt, first.receipt);

    let with_grant = receipt(
        ActionResult::ThreadCreated { thread: ThreadId(1), grant: Some(grant(Role::Speaker)) },
        ActionKind::CreateThread,
    );
    assert_eq!(create_thread_response(&with_grant, false, "kfg_secret").grant_secret, "kfg_secret");
    assert_eq!(create_thread_response(&with_grant, true, "kfg_secret").grant_secret, "");
    let without_grant =
        receipt(ActionResult::ThreadCreated { thread: ThreadId(1), grant: None }, ActionKind::CreateThread);
    assert_eq!(create_thread_response(&without_grant, false, "kfg_unused").grant_secret, "", "no grant, no secret");

    let issued = receipt(
        ActionResult::GrantIssued { thread: ThreadId(1), grant: grant(Role::Observer), voided_previous: false },
        ActionKind::IssueGrant,
    );
    assert_eq!(issue_grant_response(&issued, false, "kfg_secret").grant_secret, "kfg_secret");
    assert_eq!(issue_grant_response(&issued, true, "kfg_secret").grant_secret, "");
}

#[test]
fn every_labels_value_has_its_own_wire_value_and_none_is_unspecified() {
    let mut seen = BTreeSet::new();
    for taint in Taint::ALL {
        for scope in Scope::ALL {
            let wire = pb::Labels::from(Labels::new(taint, scope));
            assert_ne!(wire.taint, pb::Taint::Unspecified as i32, "{taint}");
            assert_ne!(wire.scope, pb::Scope::Unspecified as i32, "{scope}");
            seen.insert((wire.taint, wire.scope));
        }
    }
    assert_eq!(seen.len(), Taint::ALL.len() * Scope::ALL.len());
    // The lattice orders carry over to the wire numbers (kungfu's own, not fak's codes).
    assert_eq!(pb::Taint::from(Taint::Trusted), pb::Taint::Trusted);
    assert_eq!(pb::Taint::from(Taint::Quarantined), pb::Taint::Quarantined);
    assert_eq!(pb::Scope::from(Scope::Fleet), pb::Scope::Fleet);
    assert_eq!(pb::Scope::from(Scope::Public), pb::Scope::Public);
}

#[test]
fn coordination_write_responses_carry_the_receipt_and_replayed() {
    let r = receipt(
        ActionResult::LabeledWritten {
            pin: Pin { memory: MemoryId(1), version: Version(1) },
            labels: Labels::new(Taint::Tainted, Scope::Fleet),
        },
        ActionKind::WriteLabeled,
    );
    let written = pb::WriteLabeledResponse::from_receipt(&r, true);
    assert_eq!((written.receipt, written.replayed), (Some(pb::Receipt::from(&r)), true));
    assert_eq!(pb::Receipt::from(&r).kind, "write_labeled");
    let r = receipt(
        ActionResult::ScopeWidened {
            from: Pin { memory: MemoryId(1), version: Version(1) },
            to: Pin { memory: MemoryId(1), version: Version(2) },
            scope: Scope::Public,
        },
        ActionKind::WidenScope,
    );
    let widened = pb::WidenScopeResponse::from_receipt(&r, false);
    assert_eq!((widened.receipt, widened.replayed), (Some(pb::Receipt::from(&r)), false));
    let r = receipt(
        ActionResult::Sent {
            thread: ThreadId(1),
            entry: EntrySeq(2),
            pin: Pin { memory: MemoryId(1), version: Version(1) },
            responders: BTreeSet::new(),
            readers: 0,
        },
        ActionKind::Send,
    );
    let sent = pb::SendResponse::from_receipt(&r, false);
    assert_eq!(sent.receipt, Some(pb::Receipt::from(&r)));
    let r = receipt(
        ActionResult::Scattered { thread: ThreadId(1), header: EntrySeq(2), ranks: Vec::new() },
        ActionKind::Scatter,
    );
    let scattered = pb::ScatterResponse::from_receipt(&r, true);
    assert_eq!((scattered.receipt, scattered.replayed), (Some(pb::Receipt::from(&r)), true));
}
