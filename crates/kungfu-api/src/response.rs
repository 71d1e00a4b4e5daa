//! Domain to wire: receipts, write responses and every read result of `kungfu_core::read` and
//! `kungfu_core::coord::read`, as the messages of `kungfu.v1`. Conversions here only change
//! representation (ids to their text form, times to `int64` microseconds, content to `Content`
//! messages); they never decide what a reader may see, which the core's reads already did (§9).
//!
//! Write responses carry the receipt and `replayed`. The three writes that mint a secret have their
//! own constructors ([`register_response`], [`create_thread_response`], [`issue_grant_response`])
//! so that the rule "a secret appears only in the first successful result" (L3) lives in one place.

use crate::pb;
use kungfu_core::coord::read::{
    ArtifactView, BarrierArrival, BarrierRank, BarrierState, BarrierView, BodyView, CollectiveView, DecisionView,
    MailItem, MailboxPage, NoteView, RankView, RecordBody, RecordEvent, RecordEvents, RecordView,
};
use kungfu_core::model::{
    Assignment, AssignmentOutcome, AssignmentState, Audience, Contract, ContractVersion, Eligibility, Engagement,
    EngagementOutcome, EngagementState, Entry, Judge, Memory, MemoryState, MissingJudgment, ObligationId,
    ObligationKind, OpportunityId, Pin, Response, ResponseEnd, ResponseState, Task, Visibility,
};
use kungfu_core::model::{BodyRef, Editors, NoteKind, RecordRevision};
use kungfu_core::read::{
    EntryView, HistoryItem, MemoryView, ObjectSummary, Opportunity, OpportunityPage, ReferencedTask, TaskView,
    TurnItem, TurnPage, WorkingSet,
};
use kungfu_core::{ActionResult, GrantReceipt, Receipt};
use kungfu_types::{
    AgentId, ConflictValue, Content, ExternalRef, Labels, NextStep, RecordConflict, Role, Scope, Taint, Timestamp,
};
use std::fmt::Display;

// --- Representation helpers ------------------------------------------------------------------------

/// Microseconds since the epoch as `int64`. Domain times are `u64`; a time past `i64::MAX` (year
/// 294,247) can only be a saturated "end of time", which stays the largest representable time.
fn micros(t: Timestamp) -> i64 {
    i64::try_from(t.as_micros()).unwrap_or(i64::MAX)
}

fn content(c: &Content) -> pb::Content {
    pb::Content { body: c.as_bytes().to_vec() }
}

fn pin(p: &Pin) -> pb::MemoryPin {
    pb::MemoryPin { memory: p.memory.to_string(), version: p.version.0 }
}

fn texts<T: Display>(ids: impl IntoIterator<Item = T>) -> Vec<String> {
    ids.into_iter().map(|id| id.to_string()).collect()
}

fn role(r: Role) -> i32 {
    pb::Role::from(r) as i32
}

impl From<Role> for pb::Role {
    fn from(r: Role) -> pb::Role {
        match r {
            Role::Observer => pb::Role::Observer,
            Role::Speaker => pb::Role::Speaker,
            Role::Governor => pb::Role::Governor,
        }
    }
}

impl From<NextStep> for pb::NextStep {
    fn from(n: NextStep) -> pb::NextStep {
        match n {
            NextStep::Respond => pb::NextStep::Respond,
            NextStep::Deliver => pb::NextStep::Deliver,
            NextStep::Judge => pb::NextStep::Judge,
            NextStep::Revise => pb::NextStep::Revise,
            NextStep::Retry => pb::NextStep::Retry,
            NextStep::Wait => pb::NextStep::Wait,
            NextStep::Done => pb::NextStep::Done,
            NextStep::Stop => pb::NextStep::Stop,
        }
    }
}

impl From<ObligationKind> for pb::ObligationKind {
    fn from(k: ObligationKind) -> pb::ObligationKind {
        match k {
            ObligationKind::Response => pb::ObligationKind::Response,
            ObligationKind::Delivery => pb::ObligationKind::Delivery,
            ObligationKind::Judgment => pb::ObligationKind::Judgment,
        }
    }
}

impl From<&ObligationId> for pb::ObligationRef {
    fn from(o: &ObligationId) -> pb::ObligationRef {
        use pb::obligation_ref::Kind;
        let kind = match *o {
            ObligationId::Response { thread, entry, responder } => Kind::Response(pb::ResponseObligation {
                thread: thread.to_string(),
                entry: entry.0,
                responder: responder.to_string(),
            }),
            ObligationId::AssignmentDelivery(a) => Kind::AssignmentDelivery(a.to_string()),
            ObligationId::AssignmentJudgment(a) => Kind::AssignmentJudgment(a.to_string()),
            ObligationId::EngagementDelivery(e) => Kind::EngagementDelivery(e.to_string()),
            ObligationId::EngagementJudgment(e) => Kind::EngagementJudgment(e.to_string()),
        };
        pb::ObligationRef { kind: Some(kind) }
    }
}

impl From<Taint> for pb::Taint {
    fn from(t: Taint) -> pb::Taint {
        match t {
            Taint::Trusted => pb::Taint::Trusted,
            Taint::Tainted => pb::Taint::Tainted,
            Taint::Quarantined => pb::Taint::Quarantined,
        }
    }
}

impl From<Scope> for pb::Scope {
    fn from(s: Scope) -> pb::Scope {
        match s {
            Scope::Agent => pb::Scope::Agent,
            Scope::Fleet => pb::Scope::Fleet,
            Scope::Tenant => pb::Scope::Tenant,
            Scope::Public => pb::Scope::Public,
        }
    }
}

/// COORDINATION §7.1: labels on the wire always have both fields specified; an unlabeled version
/// has no `Labels` at all.
impl From<Labels> for pb::Labels {
    fn from(l: Labels) -> pb::Labels {
        pb::Labels { taint: pb::Taint::from(l.taint) as i32, scope: pb::Scope::from(l.scope) as i32 }
    }
}

impl From<&Audience> for pb::Audience {
    fn from(a: &Audience) -> pb::Audience {
        let kind = match a {
            Audience::Open => pb::audience::Kind::Open(pb::OpenAudience {}),
            Audience::Restricted(named) => {
                pb::audience::Kind::Restricted(pb::RestrictedAudience { agents: texts(named.iter()) })
            }
        };
        pb::Audience { kind: Some(kind) }
    }
}

// --- Receipts (L3) ---------------------------------------------------------------------------------

impl From<&GrantReceipt> for pb::GrantReceipt {
    fn from(g: &GrantReceipt) -> pb::GrantReceipt {
        pb::GrantReceipt { role: role(g.role), fingerprint: g.fingerprint.0.clone() }
    }
}

impl From<&Receipt> for pb::Receipt {
    fn from(r: &Receipt) -> pb::Receipt {
        pb::Receipt {
            kind: r.kind.as_str().to_string(),
            at_unix_micros: micros(r.at),
            seq: r.seq,
            result: receipt_result(&r.result),
        }
    }
}

/// The wire case of a receipt's result. None for the results that have no wire case yet: the
/// shared record's (`create_record`, `patch_record`, issue #17) exist in the core only, and no
/// request of the API produces them, so no receipt of theirs reaches this conversion today.
pub fn receipt_result(r: &ActionResult) -> Option<pb::receipt::Result> {
    use pb::receipt::Result as R;
    let memory = |m: &kungfu_types::MemoryId| pb::MemoryResult { memory: m.to_string() };
    let thread = |t: &kungfu_types::ThreadId| pb::ThreadResult { thread: t.to_string() };
    let assignment = |a: &kungfu_types::AssignmentId| pb::AssignmentResult { assignment: a.to_string() };
    let task = |t: &kungfu_types::TaskId| pb::TaskResult { task: t.to_string() };
    let engagement = |t: &kungfu_types::TaskId, e: &kungfu_types::EngagementId| pb::EngagementResult {
        task: t.to_string(),
        engagement: e.to_string(),
    };
    let contract_version = |t: &kungfu_types::TaskId, v: &kungfu_types::Version| pb::ContractVersionRef {
        task: t.to_string(),
        version: v.0,
    };
    let memory_pin =
        |m: &kungfu_types::MemoryId, v: &kungfu_types::Version| pb::MemoryPin { memory: m.to_string(), version: v.0 };
    Some(match r {
        ActionResult::AgentRegistered { agent, key_fingerprint } => R::AgentRegistered(pb::AgentRegistered {
            agent: agent.to_string(),
            key_fingerprint: key_fingerprint.0.clone(),
        }),
        ActionResult::AgentDeactivated { agent, memberships_ended, threads_closed } => {
            R::AgentDeactivated(pb::AgentDeactivated {
                agent: agent.to_string(),
                memberships_ended: texts(memberships_ended),
                threads_closed: texts(threads_closed),
            })
        }
        ActionResult::MemoryCreated { memory, version } => R::MemoryCreated(memory_pin(memory, version)),
        ActionResult::MemoryUpdated { memory, version } => R::MemoryUpdated(memory_pin(memory, version)),
        ActionResult::MemoryPublished { memory: m } => R::MemoryPublished(memory(m)),
        ActionResult::MemoryUnpublished { memory: m } => R::MemoryUnpublished(memory(m)),
        ActionResult::MemoryWithdrawn { memory: m } => R::MemoryWithdrawn(memory(m)),
        ActionResult::ThreadCreated { thread, grant } => R::ThreadCreated(pb::ThreadCreated {
            thread: thread.to_string(),
            grant: grant.as_ref().map(pb::GrantReceipt::from),
        }),
        ActionResult::GrantIssued { thread, grant, voided_previous } => R::GrantIssued(pb::GrantIssued {
            thread: thread.to_string(),
            grant: Some(pb::GrantReceipt::from(grant)),
            voided_previous: *voided_previous,
        }),
        ActionResult::GrantVoided { thread: t } => R::GrantVoided(thread(t)),
        ActionResult::Joined { thread, agent, role: r, joined_at, existing } => R::Joined(pb::Joined {
            thread: thread.to_string(),
            agent: agent.to_string(),
            role: role(*r),
            joined_at_unix_micros: micros(*joined_at),
            existing: *existing,
        }),
        ActionResult::Left { thread: t } => R::Left(thread(t)),
        ActionResult::Removed { thread, member } => {
            R::Removed(pb::MemberRemoved { thread: thread.to_string(), member: member.to_string() })
        }
        ActionResult::RoleChanged { thread, member, from, to } => R::RoleChanged(pb::RoleChanged {
            thread: thread.to_string(),
            member: member.to_string(),
            from: role(*from),
            to: role(*to),
        }),
        ActionResult::Posted { thread, entry, pin: p, responders, ended_own_response, assignment } => {
            R::Posted(pb::Posted {
                thread: thread.to_string(),
                entry: entry.0,
                pin: Some(pin(p)),
                responders: texts(responders),
                ended_own_response: *ended_own_response,
                assignment: assignment.map(|a| a.to_string()),
            })
        }
        ActionResult::Handled { thread, entry } => {
            R::Handled(pb::EntryResult { thread: thread.to_string(), entry: entry.0 })
        }
        ActionResult::Retracted { thread, entry, responses_ended } => R::Retracted(pb::Retracted {
            thread: thread.to_string(),
            entry: entry.0,
            responses_ended: *responses_ended,
        }),
        ActionResult::ThreadClosed { thread: t } => R::ThreadClosed(thread(t)),
        ActionResult::AssignmentTaken { assignment, delivery_due } => R::AssignmentTaken(pb::AssignmentTaken {
            assignment: assignment.to_string(),
            delivery_due_unix_micros: micros(*delivery_due),
        }),
        ActionResult::AssignmentDelivered { assignment, judgment_due } => {
            R::AssignmentDelivered(pb::AssignmentDelivered {
                assignment: assignment.to_string(),
                judgment_due_unix_micros: micros(*judgment_due),
            })
        }
        ActionResult::AssignmentAdopted { assignment: a } => R::AssignmentAdopted(assignment(a)),
        ActionResult::AssignmentRejected { assignment: a } => R::AssignmentRejected(assignment(a)),
        ActionResult::AssignmentDropped { assignment: a } => R::AssignmentDropped(assignment(a)),
        ActionResult::AssignmentVoided { assignment: a } => R::AssignmentVoided(assignment(a)),
        ActionResult::TaskCreated { task, version } => R::TaskCreated(contract_version(task, version)),
        ActionResult::ContractRevised { task, version } => R::ContractRevised(contract_version(task, version)),
        ActionResult::TaskPaused { task: t } => R::TaskPaused(task(t)),
        ActionResult::TaskResumed { task: t } => R::TaskResumed(task(t)),
        ActionResult::Engaged { task, engagement, contract_version, delivery_due, existing } => {
            R::Engaged(pb::Engaged {
                task: task.to_string(),
                engagement: engagement.to_string(),
                contract_version: contract_version.0,
                delivery_due_unix_micros: micros(*delivery_due),
                existing: *existing,
            })
        }
        ActionResult::EngagementDelivered { task, engagement, judgment_due } => {
            R::EngagementDelivered(pb::EngagementDelivered {
                task: task.to_string(),
                engagement: engagement.to_string(),
                judgment_due_unix_micros: micros(*judgment_due),
            })
        }
        ActionResult::EngagementAdopted { task: t, engagement: e } => R::EngagementAdopted(engagement(t, e)),
        ActionResult::EngagementRejected { task: t, engagement: e } => R::EngagementRejected(engagement(t, e)),
        ActionResult::EngagementDropped { task: t, engagement: e } => R::EngagementDropped(engagement(t, e)),
        ActionResult::Expired { ended } => {
            R::Expired(pb::Expired { ended: ended.iter().map(pb::ObligationRef::from).collect() })
        }
        ActionResult::Sent { thread, entry, pin: p, responders, readers } => R::Sent(pb::Sent {
            thread: thread.to_string(),
            entry: entry.0,
            pin: Some(pin(p)),
            responders: texts(responders),
            readers: *readers,
        }),
        ActionResult::LabeledWritten { pin: p, labels } => {
            R::LabeledWritten(pb::LabeledWritten { pin: Some(pin(p)), labels: Some(pb::Labels::from(*labels)) })
        }
        ActionResult::ScopeWidened { from, to, scope } => R::ScopeWidened(pb::ScopeWidened {
            from: Some(pin(from)),
            to: Some(pin(to)),
            scope: pb::Scope::from(*scope) as i32,
        }),
        // The core keeps the ranks in rank order, so a rank is its position.
        ActionResult::Scattered { thread, header, ranks } => R::Scattered(pb::Scattered {
            thread: thread.to_string(),
            header: header.0,
            ranks: ranks
                .iter()
                .enumerate()
                .map(|(rank, r)| pb::ScatteredRank {
                    rank: u32::try_from(rank).unwrap_or(u32::MAX),
                    member: r.member.to_string(),
                    entry: r.entry.0,
                    assignment: r.assignment.to_string(),
                })
                .collect(),
        }),
        ActionResult::RecordCreated { record, thread, entry, rev } => R::RecordCreated(pb::RecordCreated {
            record: record.to_string(),
            thread: thread.to_string(),
            entry: entry.0,
            rev: *rev,
        }),
        ActionResult::RecordPatched { record, entry, base_rev, rev, merged } => R::RecordPatched(pb::RecordPatched {
            record: record.to_string(),
            entry: entry.0,
            base_rev: *base_rev,
            rev: *rev,
            merged: *merged,
        }),
        ActionResult::WakeTargetSet { target } => R::WakeTargetSet(pb::WakeTargetResult { target: target.to_string() }),
        ActionResult::WakeTargetRemoved { target } => {
            R::WakeTargetRemoved(pb::WakeTargetResult { target: target.to_string() })
        }
        ActionResult::WakeRecorded { queued, delivered, gave_up } => {
            R::WakeRecorded(pb::WakeRecorded { queued: *queued, delivered: *delivered, gave_up: *gave_up })
        }
    })
}

/// A write response built from the receipt of the first success (or its replay). For the three
/// secret-bearing writes prefer [`register_response`], [`create_thread_response`] and
/// [`issue_grant_response`], which also place the one-time secret.
pub trait WriteResponse: Sized {
    fn from_receipt(receipt: &Receipt, replayed: bool) -> Self;
}

macro_rules! write_responses {
    ($($response:ident),* $(,)?) => {
        $(
            impl WriteResponse for pb::$response {
                fn from_receipt(receipt: &Receipt, replayed: bool) -> Self {
                    pb::$response { receipt: Some(pb::Receipt::from(receipt)), replayed, ..Default::default() }
                }
            }
        )*
    };
}

write_responses!(
    RegisterResponse,
    DeactivateAgentResponse,
    CreateMemoryResponse,
    UpdateMemoryResponse,
    PublishMemoryResponse,
    UnpublishMemoryResponse,
    WithdrawMemoryResponse,
    CreateThreadResponse,
    IssueGrantResponse,
    VoidGrantResponse,
    JoinResponse,
    LeaveResponse,
    RemoveMemberResponse,
    ChangeRoleResponse,
    PostResponse,
    HandleResponse,
    RetractResponse,
    CloseThreadResponse,
    TakeAssignmentResponse,
    DeliverAssignmentResponse,
    AdoptAssignmentResponse,
    RejectAssignmentResponse,
    DropAssignmentResponse,
    VoidAssignmentResponse,
    CreateTaskResponse,
    ReviseContractResponse,
    PauseTaskResponse,
    ResumeTaskResponse,
    TakeTaskResponse,
    DeliverTaskResponse,
    DropEngagementResponse,
    AdoptEngagementResponse,
    RejectEngagementResponse,
    WriteLabeledResponse,
    WidenScopeResponse,
    SendResponse,
    ScatterResponse,
    CreateRecordResponse,
    PatchRecordResponse,
    SetWakeTargetResponse,
    RemoveWakeTargetResponse,
);

/// L3, §12: a wake target's signing secret goes out with the first success only (its text form,
/// `whsec_…`, made by the door).
pub fn set_wake_target_response(receipt: &Receipt, replayed: bool, secret: &str) -> pb::SetWakeTargetResponse {
    let mut response = pb::SetWakeTargetResponse::from_receipt(receipt, replayed);
    if !replayed {
        response.secret = secret.to_string();
    }
    response
}

/// The caller's wake targets; never their secrets (the view has none).
pub fn wake_target_list(targets: &[kungfu_core::read::WakeTargetView]) -> pb::WakeTargetList {
    pb::WakeTargetList { targets: targets.iter().map(wake_target).collect() }
}

/// One wake target as the caller sees it; never its secret (the view has none).
pub fn wake_target(t: &kungfu_core::read::WakeTargetView) -> pb::WakeTarget {
    pb::WakeTarget {
        id: t.id.to_string(),
        url: t.url.clone(),
        kinds: t.filter.kinds.iter().map(|k| pb::ObligationKind::from(*k) as i32).collect(),
        objects: t.filter.objects.iter().map(|o| o.to_string()).collect(),
        created_at_unix_micros: micros(t.created_at),
        queued: t.queued.map_or(0, |e| e.seq),
        queued_applied_index: t.queued.map_or(0, |e| e.applied_index),
        delivered: t.delivered,
        failed: t.failed.as_ref().map(|f| pb::WakeFailure {
            sequence: f.seq,
            at_unix_micros: micros(f.at),
            error: f.error.clone(),
        }),
    }
}

/// L3, §12: the new agent's key goes out with the first success only. A replay returns the stored
/// receipt without it; the key generated for the replayed attempt was never stored and is dropped.
pub fn register_response(receipt: &Receipt, replayed: bool, agent_key: &str) -> pb::RegisterResponse {
    let mut response = pb::RegisterResponse::from_receipt(receipt, replayed);
    if !replayed {
        response.agent_key = agent_key.to_string();
    }
    response
}

/// L3, §6.1: the grant's secret goes out with the first success only, and only when the thread was
/// created with a grant.
pub fn create_thread_response(receipt: &Receipt, replayed: bool, grant_secret: &str) -> pb::CreateThreadResponse {
    let mut response = pb::CreateThreadResponse::from_receipt(receipt, replayed);
    if !replayed && matches!(receipt.result, ActionResult::ThreadCreated { grant: Some(_), .. }) {
        response.grant_secret = grant_secret.to_string();
    }
    response
}

/// L3, §6.1: the grant's secret goes out with the first success only.
pub fn issue_grant_response(receipt: &Receipt, replayed: bool, grant_secret: &str) -> pb::IssueGrantResponse {
    let mut response = pb::IssueGrantResponse::from_receipt(receipt, replayed);
    if !replayed && matches!(receipt.result, ActionResult::GrantIssued { .. }) {
        response.grant_secret = grant_secret.to_string();
    }
    response
}

// --- §5 Memory -------------------------------------------------------------------------------------

impl From<&Memory> for pb::Memory {
    fn from(m: &Memory) -> pb::Memory {
        pb::Memory {
            id: m.id.to_string(),
            author: m.author.to_string(),
            created_at_unix_micros: micros(m.created_at),
            current_version: m.current.0,
            public: m.visibility == Visibility::Public,
            withdrawn_at_unix_micros: match m.state {
                MemoryState::Valid => None,
                MemoryState::Withdrawn { at } => Some(micros(at)),
            },
        }
    }
}

impl From<&MemoryView> for pb::MemoryView {
    fn from(v: &MemoryView) -> pb::MemoryView {
        pb::MemoryView {
            memory: Some(pb::Memory::from(&v.memory)),
            version: v.version.0,
            version_created_at_unix_micros: micros(v.created_at),
            content: Some(content(&v.content)),
            labels: v.labels.map(pb::Labels::from),
        }
    }
}

// --- §6.3 Entries and responses --------------------------------------------------------------------

impl From<&Entry> for pb::Entry {
    fn from(e: &Entry) -> pb::Entry {
        pb::Entry {
            thread: e.thread.to_string(),
            seq: e.seq.0,
            author: e.author.to_string(),
            posted_at_unix_micros: micros(e.posted_at),
            pin: Some(pin(&e.pin)),
            reply_to: e.reply_to.map(|s| s.0),
            ask: e.ask.as_ref().map(|ask| pb::Ask { agents: texts(ask) }),
            responders: texts(&e.responders),
            task_ref: e.task_ref.map(|t| t.to_string()),
            assignment: e.assignment.map(|a| a.to_string()),
        }
    }
}

impl From<&EntryView> for pb::EntryView {
    fn from(v: &EntryView) -> pb::EntryView {
        pb::EntryView {
            entry: Some(pb::Entry::from(&v.entry)),
            content: v.content.as_ref().map(content),
            labels: v.labels.map(pb::Labels::from),
            held: v.held,
            collective_size: v.collective_size,
            record: v.record.map(|(record, rev)| pb::RecordRevisionRef { record: record.to_string(), rev }),
        }
    }
}

/// A page of `read::timeline`; `full` says the page used its whole size, so more may follow.
pub fn timeline_response(entries: &[Entry], full: bool) -> pb::TimelineResponse {
    let next_after = if full { entries.last().map(|e| e.seq.0) } else { None };
    pb::TimelineResponse { entries: entries.iter().map(pb::Entry::from).collect(), next_after }
}

impl From<&Response> for pb::OwedResponse {
    fn from(r: &Response) -> pb::OwedResponse {
        use pb::response_ending::How;
        let ending = match &r.state {
            ResponseState::Pending => None,
            ResponseState::Ended { at, how } => Some(pb::ResponseEnding {
                ended_at_unix_micros: micros(*at),
                how: Some(match how {
                    ResponseEnd::Replied { by_entry } => How::RepliedByEntry(by_entry.0),
                    ResponseEnd::Handled { note } => {
                        How::Handled(pb::HandledEnding { note: note.as_ref().map(content) })
                    }
                    ResponseEnd::Retracted => How::Retracted(()),
                    ResponseEnd::MembershipEnded => How::MembershipEnded(()),
                    ResponseEnd::Demoted => How::Demoted(()),
                    ResponseEnd::ThreadClosed => How::ThreadClosed(()),
                }),
            }),
        };
        pb::OwedResponse {
            thread: r.thread.to_string(),
            entry: r.entry.0,
            responder: r.responder.to_string(),
            arose_at_unix_micros: micros(r.arose_at),
            ending,
        }
    }
}

// --- §6.4 Assignments ------------------------------------------------------------------------------

impl From<&Assignment> for pb::Assignment {
    fn from(a: &Assignment) -> pb::Assignment {
        use pb::assignment::State;
        let state = match &a.state {
            AssignmentState::Open => State::Open(()),
            AssignmentState::Taken { at, delivery_due } => State::Taken(pb::AssignmentTakenState {
                taken_at_unix_micros: micros(*at),
                delivery_due_unix_micros: micros(*delivery_due),
            }),
            AssignmentState::Delivered { taken_at, at, judgment_due, output } => {
                State::Delivered(pb::AssignmentDeliveredState {
                    taken_at_unix_micros: micros(*taken_at),
                    delivered_at_unix_micros: micros(*at),
                    judgment_due_unix_micros: micros(*judgment_due),
                    output: Some(content(output)),
                })
            }
            AssignmentState::Ended { at, outcome, delivered } => {
                let (outcome, reason) = match outcome {
                    AssignmentOutcome::Adopted => (pb::AssignmentOutcome::Adopted, None),
                    AssignmentOutcome::Rejected { reason } => (pb::AssignmentOutcome::Rejected, Some(content(reason))),
                    AssignmentOutcome::Undecided => (pb::AssignmentOutcome::Undecided, None),
                    AssignmentOutcome::Dropped => (pb::AssignmentOutcome::Dropped, None),
                    AssignmentOutcome::TimedOut => (pb::AssignmentOutcome::TimedOut, None),
                    AssignmentOutcome::Voided => (pb::AssignmentOutcome::Voided, None),
                };
                State::Ended(pb::AssignmentEndedState {
                    ended_at_unix_micros: micros(*at),
                    outcome: outcome as i32,
                    rejection_reason: reason,
                    delivered: delivered.as_ref().map(content),
                })
            }
        };
        pb::Assignment {
            id: a.id.to_string(),
            thread: a.thread.to_string(),
            entry: a.entry.0,
            creator: a.creator.to_string(),
            addressee: a.addressee.to_string(),
            created_at_unix_micros: micros(a.created_at),
            criteria: Some(content(&a.spec.criteria)),
            output_structure: a.spec.output_structure.as_ref().map(content),
            delivery_window_micros: a.spec.delivery_window.0,
            judgment_window_micros: a.spec.judgment_window.0,
            judge_forfeited: a.judge_forfeited,
            state: Some(state),
        }
    }
}

// --- Coordination reads (COORDINATION §3.5, §4.5, §4.7) --------------------------------------------

impl From<&MailItem> for pb::MailItem {
    fn from(m: &MailItem) -> pb::MailItem {
        pb::MailItem {
            entry: Some(pb::Entry::from(&m.entry)),
            labels: m.labels.map(pb::Labels::from),
            held: m.held,
            content: m.content.as_ref().map(content),
            content_omitted: m.content_omitted,
            my_response: m.my_response.as_ref().map(pb::OwedResponse::from),
        }
    }
}

impl From<&MailboxPage> for pb::Mailbox {
    fn from(p: &MailboxPage) -> pb::Mailbox {
        pb::Mailbox { items: p.items.iter().map(pb::MailItem::from).collect(), next_after: p.next_after.map(|s| s.0) }
    }
}

/// An omitted output is not sent at all (`CollectiveRank.assignment` says so): the core blanked
/// it, and an empty `Content` on the wire would read as "delivered empty bytes".
fn without_output(a: &mut pb::Assignment) {
    use pb::assignment::State;
    match &mut a.state {
        Some(State::Delivered(d)) => d.output = None,
        Some(State::Ended(e)) => e.delivered = None,
        Some(State::Open(())) | Some(State::Taken(_)) | None => {}
    }
}

impl From<&RankView> for pb::CollectiveRank {
    fn from(r: &RankView) -> pb::CollectiveRank {
        let mut assignment = pb::Assignment::from(&r.assignment);
        if r.output_omitted {
            without_output(&mut assignment);
        }
        pb::CollectiveRank {
            rank: r.rank,
            member: r.member.to_string(),
            entry: r.entry.0,
            assignment: Some(assignment),
            output_omitted: r.output_omitted,
        }
    }
}

impl From<&CollectiveView> for pb::Collective {
    fn from(c: &CollectiveView) -> pb::Collective {
        pb::Collective {
            thread: c.thread.to_string(),
            header: c.header.0,
            author: c.author.to_string(),
            size: u32::try_from(c.ranks.len()).unwrap_or(u32::MAX),
            ranks: c.ranks.iter().map(pb::CollectiveRank::from).collect(),
            complete: c.complete,
            all_delivered: c.all_delivered,
            formed_at_unix_micros: micros(c.formed_at),
        }
    }
}

impl From<BarrierState> for pb::BarrierState {
    fn from(s: BarrierState) -> pb::BarrierState {
        match s {
            BarrierState::Waiting => pb::BarrierState::Waiting,
            BarrierState::Released => pb::BarrierState::Released,
            BarrierState::Broken => pb::BarrierState::Broken,
        }
    }
}

impl From<&BarrierRank> for pb::BarrierRank {
    fn from(r: &BarrierRank) -> pb::BarrierRank {
        let (arrival, replied_by_entry) = match r.arrival {
            BarrierArrival::Author => (pb::BarrierArrival::Author, None),
            BarrierArrival::Pending => (pb::BarrierArrival::Pending, None),
            BarrierArrival::Replied(by) => (pb::BarrierArrival::Replied, Some(by.0)),
            BarrierArrival::Handled => (pb::BarrierArrival::Handled, None),
            BarrierArrival::Retracted => (pb::BarrierArrival::Retracted, None),
            BarrierArrival::MembershipEnded => (pb::BarrierArrival::MembershipEnded, None),
            BarrierArrival::Demoted => (pb::BarrierArrival::Demoted, None),
            BarrierArrival::ThreadClosed => (pb::BarrierArrival::ThreadClosed, None),
        };
        pb::BarrierRank { rank: r.rank, member: r.member.to_string(), arrival: arrival as i32, replied_by_entry }
    }
}

impl From<&BarrierView> for pb::Barrier {
    fn from(b: &BarrierView) -> pb::Barrier {
        pb::Barrier {
            thread: b.thread.to_string(),
            entry: b.entry.0,
            author: b.author.to_string(),
            size: u32::try_from(b.ranks.len()).unwrap_or(u32::MAX),
            ranks: b.ranks.iter().map(pb::BarrierRank::from).collect(),
            state: pb::BarrierState::from(b.state) as i32,
            pending: b.pending,
            absent: b.absent,
        }
    }
}

// --- §7 Task ---------------------------------------------------------------------------------------

impl From<MissingJudgment> for pb::MissingJudgment {
    fn from(m: MissingJudgment) -> pb::MissingJudgment {
        match m {
            MissingJudgment::Adopted => pb::MissingJudgment::Adopted,
            MissingJudgment::Undecided => pb::MissingJudgment::Undecided,
        }
    }
}

impl From<&Eligibility> for pb::Eligibility {
    fn from(e: &Eligibility) -> pb::Eligibility {
        pb::Eligibility { registered_before_unix_micros: e.registered_before.map(micros), excluded: texts(&e.excluded) }
    }
}

fn judge(j: Judge) -> Option<String> {
    match j {
        Judge::Author => None,
        Judge::Agent(a) => Some(a.to_string()),
    }
}

impl From<&Contract> for pb::Contract {
    fn from(c: &Contract) -> pb::Contract {
        pb::Contract {
            requirements: Some(content(&c.requirements)),
            output_structure: c.output_structure.as_ref().map(content),
            inputs: c.inputs.iter().map(pin).collect(),
            references: c.references.as_ref().map(content),
            delivery_window_micros: c.delivery_window.0,
            judgment_window_micros: c.judgment_window.0,
            on_missing_judgment: pb::MissingJudgment::from(c.on_missing_judgment) as i32,
            acceptance: Some(content(&c.acceptance)),
            judge: judge(c.judge),
            eligibility: Some(pb::Eligibility::from(&c.eligibility)),
            max_adoptions: c.max_adoptions,
        }
    }
}

impl From<&ContractVersion> for pb::ContractVersion {
    fn from(cv: &ContractVersion) -> pb::ContractVersion {
        pb::ContractVersion {
            task: cv.task.to_string(),
            version: cv.version.0,
            created_at_unix_micros: micros(cv.created_at),
            contract: Some(pb::Contract::from(&cv.contract)),
        }
    }
}

impl From<&Task> for pb::Task {
    fn from(t: &Task) -> pb::Task {
        pb::Task {
            id: t.id.to_string(),
            author: t.author.to_string(),
            created_at_unix_micros: micros(t.created_at),
            audience: Some(pb::Audience::from(&t.audience)),
            current_version: t.current.0,
            paused: t.paused,
            adopted: t.adopted,
            open_engagements: t.open_engagements,
        }
    }
}

impl From<&TaskView> for pb::TaskView {
    fn from(v: &TaskView) -> pb::TaskView {
        pb::TaskView { task: Some(pb::Task::from(&v.task)), contract: Some(pb::ContractVersion::from(&v.contract)) }
    }
}

impl From<&ReferencedTask> for pb::ReferencedTask {
    fn from(r: &ReferencedTask) -> pb::ReferencedTask {
        pb::ReferencedTask {
            task: r.task.to_string(),
            author: r.author.to_string(),
            paused: r.paused,
            contract: Some(pb::ContractVersion::from(&r.contract)),
        }
    }
}

impl From<&Engagement> for pb::Engagement {
    fn from(e: &Engagement) -> pb::Engagement {
        use pb::engagement::State;
        let state = match &e.state {
            EngagementState::Open { delivery_due } => {
                State::Open(pb::EngagementOpenState { delivery_due_unix_micros: micros(*delivery_due) })
            }
            EngagementState::Delivered { at, judgment_due, output } => State::Delivered(pb::EngagementDeliveredState {
                delivered_at_unix_micros: micros(*at),
                judgment_due_unix_micros: micros(*judgment_due),
                output: Some(content(output)),
            }),
            EngagementState::Ended { at, outcome, delivered } => {
                let (outcome, reason) = match outcome {
                    EngagementOutcome::Adopted => (pb::EngagementOutcome::Adopted, None),
                    EngagementOutcome::Rejected { reason } => (pb::EngagementOutcome::Rejected, Some(content(reason))),
                    EngagementOutcome::Undecided => (pb::EngagementOutcome::Undecided, None),
                    EngagementOutcome::Dropped => (pb::EngagementOutcome::Dropped, None),
                    EngagementOutcome::TimedOut => (pb::EngagementOutcome::TimedOut, None),
                };
                State::Ended(pb::EngagementEndedState {
                    ended_at_unix_micros: micros(*at),
                    outcome: outcome as i32,
                    rejection_reason: reason,
                    delivered: delivered.as_ref().map(content),
                })
            }
        };
        pb::Engagement {
            id: e.id.to_string(),
            task: e.task.to_string(),
            agent: e.agent.to_string(),
            contract_version: e.contract_version.0,
            inputs: e.inputs.iter().map(pin).collect(),
            judge: e.judge.to_string(),
            on_missing_judgment: pb::MissingJudgment::from(e.on_missing_judgment) as i32,
            judgment_window_micros: e.judgment_window.0,
            taken_at_unix_micros: micros(e.taken_at),
            state: Some(state),
        }
    }
}

// --- §8 Turn, opportunities, working sets ----------------------------------------------------------

impl From<&TurnItem> for pb::TurnItem {
    fn from(t: &TurnItem) -> pb::TurnItem {
        pb::TurnItem {
            obligation: Some(pb::ObligationRef::from(&t.obligation)),
            kind: pb::ObligationKind::from(t.kind) as i32,
            object: t.object.to_string(),
            arose_at_unix_micros: micros(t.arose_at),
            due_at_unix_micros: t.due_at.map(micros),
            next: pb::NextStep::from(t.next) as i32,
        }
    }
}

impl From<&TurnPage> for pb::TurnPage {
    fn from(p: &TurnPage) -> pb::TurnPage {
        pb::TurnPage {
            items: p.items.iter().map(pb::TurnItem::from).collect(),
            next_cursor: p.next_cursor.as_ref().map(|c| c.to_hex()).unwrap_or_default(),
            as_of_seq: 0,
            wake_failed: Vec::new(),
        }
    }
}

impl From<&Opportunity> for pb::Opportunity {
    fn from(o: &Opportunity) -> pb::Opportunity {
        use pb::opportunity::Kind;
        pb::Opportunity {
            kind: Some(match o.id {
                OpportunityId::Assignment(a) => Kind::Assignment(a.to_string()),
                OpportunityId::Task(t) => Kind::Task(t.to_string()),
            }),
            object: o.object.to_string(),
            arose_at_unix_micros: micros(o.arose_at),
        }
    }
}

impl From<&OpportunityPage> for pb::OpportunityPage {
    fn from(p: &OpportunityPage) -> pb::OpportunityPage {
        pb::OpportunityPage {
            items: p.items.iter().map(pb::Opportunity::from).collect(),
            next_cursor: p.next_cursor.as_ref().map(|c| c.to_hex()).unwrap_or_default(),
        }
    }
}

impl From<&HistoryItem> for pb::HistoryItem {
    fn from(h: &HistoryItem) -> pb::HistoryItem {
        pb::HistoryItem {
            seq: h.seq,
            idx: h.idx,
            at_unix_micros: micros(h.at),
            actor: h.actor.map(|a: AgentId| a.to_string()),
            fact: h.fact.clone(),
        }
    }
}

impl From<&ObjectSummary> for pb::working_set::Summary {
    fn from(s: &ObjectSummary) -> pb::working_set::Summary {
        use pb::working_set::Summary;
        match s {
            ObjectSummary::Agent { id, active, open_threads } => {
                Summary::Agent(pb::AgentSummary { id: id.to_string(), active: *active, open_threads: *open_threads })
            }
            ObjectSummary::Memory { id, author, current, public, withdrawn } => Summary::Memory(pb::MemorySummary {
                id: id.to_string(),
                author: author.to_string(),
                current_version: current.0,
                public: *public,
                withdrawn: *withdrawn,
            }),
            // `records` is core only so far (issue #17): the wire summary has no field for it yet.
            ObjectSummary::Thread { id, open, members, last_entry, open_assignments, grant, records } => {
                Summary::Thread(pb::ThreadSummary {
                    id: id.to_string(),
                    open: *open,
                    members: members.iter().map(|(a, r)| pb::Member { agent: a.to_string(), role: role(*r) }).collect(),
                    last_entry: *last_entry,
                    open_assignments: *open_assignments,
                    grant: grant
                        .as_ref()
                        .map(|(r, fingerprint)| pb::LiveGrant { role: role(*r), fingerprint: fingerprint.clone() }),
                    records: texts(records),
                })
            }
            ObjectSummary::Task {
                id,
                author,
                restricted,
                current,
                paused,
                adopted,
                open_engagements,
                max_adoptions,
            } => Summary::Task(pb::TaskSummary {
                id: id.to_string(),
                author: author.to_string(),
                restricted: *restricted,
                current_version: current.0,
                paused: *paused,
                adopted: *adopted,
                open_engagements: *open_engagements,
                max_adoptions: *max_adoptions,
            }),
        }
    }
}

impl From<&WorkingSet> for pb::WorkingSet {
    fn from(w: &WorkingSet) -> pb::WorkingSet {
        pb::WorkingSet {
            object: w.object.to_string(),
            summary: Some(pb::working_set::Summary::from(&w.summary)),
            role: w.role.map_or(pb::Role::Unspecified as i32, role),
            history: w.history.iter().map(pb::HistoryItem::from).collect(),
            obligations: w.obligations.iter().map(pb::TurnItem::from).collect(),
            available_actions: w.available.iter().map(|k| k.as_str().to_string()).collect(),
        }
    }
}

// --- The shared record (COORDINATION §5.7, §5.8) ---------------------------------------------------

impl From<Editors> for pb::RecordEditors {
    fn from(e: Editors) -> pb::RecordEditors {
        match e {
            Editors::Speakers => pb::RecordEditors::Speakers,
            Editors::Governors => pb::RecordEditors::Governors,
        }
    }
}

impl From<NoteKind> for pb::NoteKind {
    fn from(k: NoteKind) -> pb::NoteKind {
        match k {
            NoteKind::Comment => pb::NoteKind::Comment,
            NoteKind::Progress => pb::NoteKind::Progress,
        }
    }
}

impl From<&ExternalRef> for pb::ExternalRef {
    fn from(e: &ExternalRef) -> pb::ExternalRef {
        pb::ExternalRef {
            store: e.store.clone(),
            digest: e.digest.clone(),
            bytes: e.bytes,
            labels: Some(pb::Labels::from(e.labels)),
            deletion_certificate: e.deletion_certificate.clone().unwrap_or_default(),
        }
    }
}

impl From<&BodyRef> for pb::RecordBodyRef {
    fn from(r: &BodyRef) -> pb::RecordBodyRef {
        use pb::record_body_ref::Kind;
        pb::RecordBodyRef {
            kind: Some(match r {
                BodyRef::Pin(p) => Kind::Pin(pin(p)),
                BodyRef::External(e) => Kind::External(pb::ExternalRef::from(e)),
            }),
        }
    }
}

impl From<&BodyView> for pb::RecordBodyView {
    fn from(b: &BodyView) -> pb::RecordBodyView {
        match b {
            BodyView::Shown { reference, labels } => pb::RecordBodyView {
                reference: Some(pb::RecordBodyRef::from(reference)),
                labels: Some(pb::Labels::from(*labels)),
                redacted: false,
            },
            BodyView::Redacted { labels } => {
                pb::RecordBodyView { reference: None, labels: Some(pb::Labels::from(*labels)), redacted: true }
            }
        }
    }
}

impl From<&NoteView> for pb::RecordNote {
    fn from(n: &NoteView) -> pb::RecordNote {
        pb::RecordNote {
            id: n.id.to_string(),
            kind: pb::NoteKind::from(n.kind) as i32,
            body: Some(pb::RecordBodyRef::from(&n.body)),
            labels: Some(pb::Labels::from(n.labels)),
            author: n.author.to_string(),
            added_rev: n.added_rev,
            added_at_unix_micros: micros(n.added_at),
        }
    }
}

impl From<&ArtifactView> for pb::RecordArtifact {
    fn from(a: &ArtifactView) -> pb::RecordArtifact {
        pb::RecordArtifact {
            id: a.id.to_string(),
            reference: Some(pb::RecordBodyRef::from(&a.reference)),
            media_type: a.media_type.clone(),
            labels: Some(pb::Labels::from(a.labels)),
            author: a.author.to_string(),
            added_rev: a.added_rev,
            added_at_unix_micros: micros(a.added_at),
        }
    }
}

impl From<&DecisionView> for pb::RecordDecision {
    fn from(d: &DecisionView) -> pb::RecordDecision {
        pb::RecordDecision {
            id: d.id.to_string(),
            state: Some(content(&d.state)),
            reason: Some(content(&d.reason)),
            author: d.author.to_string(),
            added_rev: d.added_rev,
            added_at_unix_micros: micros(d.added_at),
        }
    }
}

impl From<&RecordView> for pb::RecordView {
    fn from(v: &RecordView) -> pb::RecordView {
        pb::RecordView {
            id: v.id.to_string(),
            thread: v.thread.to_string(),
            creator: v.creator.to_string(),
            created_at_unix_micros: micros(v.created_at),
            entry: v.entry.0,
            rev: v.rev,
            current_rev: v.current_rev,
            scope: pb::Scope::from(v.scope) as i32,
            editors: pb::RecordEditors::from(v.editors) as i32,
            audience: pb::Scope::from(v.audience) as i32,
            title: Some(content(&v.title)),
            state: Some(content(&v.state)),
            body: Some(pb::RecordBodyView::from(&v.body)),
            notes: v.notes.iter().map(pb::RecordNote::from).collect(),
            artifacts: v.artifacts.iter().map(pb::RecordArtifact::from).collect(),
            decisions: v.decisions.iter().map(pb::RecordDecision::from).collect(),
            redacted_notes: v.redacted_notes,
            redacted_artifacts: v.redacted_artifacts,
        }
    }
}

impl From<&RecordRevision> for pb::RecordEvent {
    fn from(e: &RecordRevision) -> pb::RecordEvent {
        pb::RecordEvent {
            rev: e.rev,
            base_rev: e.base_rev,
            entry: e.entry.0,
            actor: e.actor.to_string(),
            at_unix_micros: micros(e.at),
            paths: e.paths.clone(),
            scope: pb::Scope::from(e.scope) as i32,
            taint: pb::Taint::from(e.taint) as i32,
            redacted: false,
        }
    }
}

impl From<&RecordEvent> for pb::RecordEvent {
    fn from(e: &RecordEvent) -> pb::RecordEvent {
        match e {
            RecordEvent::Shown(r) => pb::RecordEvent::from(r),
            // Only the rev: every other field is left at its zero value (COORDINATION §5.8).
            RecordEvent::Redacted { rev } => pb::RecordEvent { rev: *rev, redacted: true, ..Default::default() },
        }
    }
}

impl From<&RecordEvents> for pb::RecordEventPage {
    fn from(p: &RecordEvents) -> pb::RecordEventPage {
        pb::RecordEventPage {
            events: p.events.iter().map(pb::RecordEvent::from).collect(),
            next_after_rev: p.next_after_rev,
            redacted: p.redacted,
        }
    }
}

impl From<&RecordBody> for pb::RecordBodyContent {
    fn from(b: &RecordBody) -> pb::RecordBodyContent {
        use pb::record_body_content::Kind;
        pb::RecordBodyContent {
            kind: Some(match b {
                RecordBody::Pin { pin: p, labels, content: c } => Kind::Pin(pb::PinnedBody {
                    pin: Some(pin(p)),
                    labels: labels.map(pb::Labels::from),
                    content: c.as_ref().map(content),
                }),
                RecordBody::External(e) => Kind::External(pb::ExternalRef::from(e)),
            }),
        }
    }
}

impl From<&ConflictValue> for pb::RecordValue {
    fn from(v: &ConflictValue) -> pb::RecordValue {
        use pb::record_body_ref::Kind as Ref;
        use pb::record_value::Kind;
        pb::RecordValue {
            kind: Some(match v {
                ConflictValue::Text(c) => Kind::Text(content(c)),
                ConflictValue::Pin { memory, version } => Kind::Body(pb::RecordBodyRef {
                    kind: Some(Ref::Pin(pb::MemoryPin { memory: memory.to_string(), version: version.0 })),
                }),
                ConflictValue::External(e) => {
                    Kind::Body(pb::RecordBodyRef { kind: Some(Ref::External(pb::ExternalRef::from(e))) })
                }
            }),
        }
    }
}

impl From<&RecordConflict> for pb::RecordConflict {
    fn from(c: &RecordConflict) -> pb::RecordConflict {
        pb::RecordConflict {
            record: c.record.to_string(),
            path: c.path.clone(),
            base_rev: c.base_rev,
            current_rev: c.current_rev,
            base_value: c.base_value.as_ref().map(pb::RecordValue::from),
            current_value: c.current_value.as_ref().map(pb::RecordValue::from),
            proposed_value: Some(pb::RecordValue::from(&c.proposed_value)),
            resolution: c.resolution.clone(),
        }
    }
}
