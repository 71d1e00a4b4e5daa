//! The typed methods: one per action and read of the eight agent services (agents, memories,
//! threads, assignments, tasks, coordination, shared records, turn), plus [`Client::register`], helpers that page
//! through a whole turn or timeline, and the operator calls of `AdminService`. The coordination
//! loops built on these calls (blocking receive, gather, barrier) are in [`coord`](crate::coord).
//!
//! A write takes its request (a `pb` message or a builder that converts into one) and an optional
//! idempotency key. The key used is, in order: the `key` argument, the request's own
//! `idempotency_key` when it is not empty, or a new generated one; it is returned in
//! [`Written::idempotency_key`]. A read takes its request and is served with the client's
//! [`Consistency`](crate::Consistency).

use crate::client::{Call, Client, new_idempotency_key};
use crate::error::{Error, Written};
use kungfu_api::pb;
use pb::admin_service_client::AdminServiceClient;
use pb::agent_service_client::AgentServiceClient;
use pb::assignment_service_client::AssignmentServiceClient;
use pb::coord_service_client::CoordServiceClient;
use pb::memory_service_client::MemoryServiceClient;
use pb::record_service_client::RecordServiceClient;
use pb::task_service_client::TaskServiceClient;
use pb::thread_service_client::ThreadServiceClient;
use pb::turn_service_client::TurnServiceClient;

/// Defines a write method: fills in the idempotency key, sends it through the retry loop and
/// returns the response with its key.
macro_rules! write {
    ($(#[$doc:meta])* $name:ident, $svc:ident, $rpc:ident, $req:ty, $resp:ty) => {
        $(#[$doc])*
        pub async fn $name(&self, request: impl Into<$req>, key: Option<String>) -> Result<Written<$resp>, Error> {
            let mut request: $req = request.into();
            let key = match key {
                Some(k) => k,
                None if !request.idempotency_key.is_empty() => request.idempotency_key.clone(),
                None => new_idempotency_key()?,
            };
            request.idempotency_key = key.clone();
            let value: $resp = self
                .invoke(Call::Write(&key), request, |channel, r| async move { $svc::new(channel).$rpc(r).await })
                .await?;
            Ok(Written { replayed: value.replayed, value, idempotency_key: key })
        }
    };
}

/// Defines a read method.
macro_rules! read {
    ($(#[$doc:meta])* $name:ident, $svc:ident, $rpc:ident, $req:ty, $resp:ty) => {
        $(#[$doc])*
        pub async fn $name(&self, request: impl Into<$req>) -> Result<$resp, Error> {
            let request: $req = request.into();
            self.invoke(Call::Read, request, |channel, r| async move { $svc::new(channel).$rpc(r).await }).await
        }
    };
}

/// A newly registered agent: its id, its key (shown once), a client acting as it, and the write.
#[derive(Debug, Clone)]
pub struct Registered {
    /// The agent's id (`ag_3`).
    pub agent: String,
    /// The agent's bearer key (`kf_ag_…`). Keep it: it cannot be shown again.
    pub agent_key: String,
    /// A client with the same channels acting as the new agent.
    pub client: Client,
    /// The registration's response and idempotency key.
    pub written: Written<pb::RegisterResponse>,
}

impl Client {
    // Agents.

    /// Registers a new agent (no key needed) and returns a client acting as it. When the answer
    /// carrying the key was lost and only a replay came back, the key is gone (L3) and the answer
    /// is [`Error::SecretLost`].
    pub async fn register(&self, key: Option<String>) -> Result<Registered, Error> {
        let written = self.anonymous().register_raw(pb::RegisterRequest::default(), key).await?;
        let agent = match written.value.receipt.as_ref().and_then(|r| r.result.as_ref()) {
            Some(pb::receipt::Result::AgentRegistered(a)) => a.agent.clone(),
            _ => String::new(),
        };
        if written.value.agent_key.is_empty() {
            return Err(Error::SecretLost { key: written.idempotency_key, what: format!("agent {agent}") });
        }
        let agent_key = written.value.agent_key.clone();
        Ok(Registered { agent, client: self.with_key(agent_key.clone()), agent_key, written })
    }

    write!(
        /// `AgentService.Register` as it is: the response, whose `agent_key` is empty on a replay.
        register_raw, AgentServiceClient, register, pb::RegisterRequest, pb::RegisterResponse
    );
    write!(
        /// Deactivates the calling agent.
        deactivate, AgentServiceClient, deactivate, pb::DeactivateAgentRequest, pb::DeactivateAgentResponse
    );
    write!(
        /// Sets a wake target: a webhook the caller's turn changes are delivered to (docs/wake.md).
        /// The signing secret is in the first response only.
        set_wake_target, AgentServiceClient, set_wake_target, pb::SetWakeTargetRequest, pb::SetWakeTargetResponse
    );
    write!(
        /// Removes one of the caller's wake targets.
        remove_wake_target, AgentServiceClient, remove_wake_target, pb::RemoveWakeTargetRequest,
        pb::RemoveWakeTargetResponse
    );
    read!(
        /// The caller's wake targets and how delivery to each stands (never their secrets).
        list_wake_targets, AgentServiceClient, list_wake_targets, pb::ListWakeTargetsRequest, pb::WakeTargetList
    );

    // Memories.

    write!(
        /// Creates a private Memory with its first version.
        create_memory, MemoryServiceClient, create, pb::CreateMemoryRequest, pb::CreateMemoryResponse
    );
    write!(
        /// Adds a version to a Memory.
        update_memory, MemoryServiceClient, update, pb::UpdateMemoryRequest, pb::UpdateMemoryResponse
    );
    write!(
        /// Makes a Memory public.
        publish_memory, MemoryServiceClient, publish, pb::PublishMemoryRequest, pb::PublishMemoryResponse
    );
    write!(
        /// Makes a Memory private again.
        unpublish_memory, MemoryServiceClient, unpublish, pb::UnpublishMemoryRequest, pb::UnpublishMemoryResponse
    );
    write!(
        /// Withdraws a Memory (terminal).
        withdraw_memory, MemoryServiceClient, withdraw, pb::WithdrawMemoryRequest, pb::WithdrawMemoryResponse
    );
    read!(
        /// Reads a version of a Memory.
        get_memory, MemoryServiceClient, get, pb::GetMemoryRequest, pb::MemoryView
    );

    // Threads.

    write!(
        /// Creates a thread, optionally with a first grant (its secret is in the first answer only).
        create_thread, ThreadServiceClient, create, pb::CreateThreadRequest, pb::CreateThreadResponse
    );
    write!(
        /// Issues a grant to a thread (a governor); the secret is in the first answer only.
        issue_grant, ThreadServiceClient, issue_grant, pb::IssueGrantRequest, pb::IssueGrantResponse
    );
    write!(
        /// Voids the thread's live grant.
        void_grant, ThreadServiceClient, void_grant, pb::VoidGrantRequest, pb::VoidGrantResponse
    );
    write!(
        /// Joins a thread with a grant secret.
        join, ThreadServiceClient, join, pb::JoinRequest, pb::JoinResponse
    );
    write!(
        /// Leaves a thread.
        leave, ThreadServiceClient, leave, pb::LeaveRequest, pb::LeaveResponse
    );
    write!(
        /// Removes a member from a thread (a governor).
        remove_member, ThreadServiceClient, remove, pb::RemoveMemberRequest, pb::RemoveMemberResponse
    );
    write!(
        /// Changes a member's role (a governor).
        change_role, ThreadServiceClient, change_role, pb::ChangeRoleRequest, pb::ChangeRoleResponse
    );
    write!(
        /// Posts an entry: content or a pinned Memory, optionally a reply, an ask, a Task reference
        /// or a new assignment. See [`Post`](crate::Post) for a builder.
        post, ThreadServiceClient, post, pb::PostRequest, pb::PostResponse
    );
    write!(
        /// Handles an entry without replying, ending the caller's owed response.
        handle, ThreadServiceClient, handle, pb::HandleRequest, pb::HandleResponse
    );
    write!(
        /// Retracts the caller's own entry, ending the responses it asked for.
        retract, ThreadServiceClient, retract, pb::RetractRequest, pb::RetractResponse
    );
    write!(
        /// Closes a thread (a governor).
        close_thread, ThreadServiceClient, close, pb::CloseThreadRequest, pb::CloseThreadResponse
    );
    read!(
        /// One page of a thread's entries after a sequence number.
        timeline, ThreadServiceClient, timeline, pb::TimelineRequest, pb::TimelineResponse
    );
    read!(
        /// One entry with its content.
        get_entry, ThreadServiceClient, get_entry, pb::GetEntryRequest, pb::EntryView
    );
    read!(
        /// One responder's owed response to an entry.
        get_response, ThreadServiceClient, get_response, pb::GetResponseRequest, pb::OwedResponse
    );
    read!(
        /// The Task an entry references, as its members may read it.
        get_referenced_task, ThreadServiceClient, get_referenced_task, pb::GetReferencedTaskRequest, pb::ReferencedTask
    );

    // Assignments.

    write!(
        /// Takes an assignment addressed to the caller.
        take_assignment, AssignmentServiceClient, take, pb::TakeAssignmentRequest, pb::TakeAssignmentResponse
    );
    write!(
        /// Delivers a taken assignment.
        deliver_assignment, AssignmentServiceClient, deliver, pb::DeliverAssignmentRequest, pb::DeliverAssignmentResponse
    );
    write!(
        /// Adopts a delivered assignment (its creator).
        adopt_assignment, AssignmentServiceClient, adopt, pb::AdoptAssignmentRequest, pb::AdoptAssignmentResponse
    );
    write!(
        /// Rejects a delivered assignment with a reason (its creator).
        reject_assignment, AssignmentServiceClient, reject, pb::RejectAssignmentRequest, pb::RejectAssignmentResponse
    );
    write!(
        /// Drops an assignment the caller took.
        drop_assignment, AssignmentServiceClient, drop, pb::DropAssignmentRequest, pb::DropAssignmentResponse
    );
    write!(
        /// Voids an assignment (its creator).
        void_assignment, AssignmentServiceClient, void, pb::VoidAssignmentRequest, pb::VoidAssignmentResponse
    );
    read!(
        /// One assignment and its state.
        get_assignment, AssignmentServiceClient, get, pb::GetAssignmentRequest, pb::Assignment
    );

    // Tasks.

    write!(
        /// Creates a Task with its audience and first contract version.
        create_task, TaskServiceClient, create, pb::CreateTaskRequest, pb::CreateTaskResponse
    );
    write!(
        /// Adds a contract version to a Task (its author).
        revise_contract, TaskServiceClient, revise, pb::ReviseContractRequest, pb::ReviseContractResponse
    );
    write!(
        /// Pauses a Task: no new engagements.
        pause_task, TaskServiceClient, pause, pb::PauseTaskRequest, pb::PauseTaskResponse
    );
    write!(
        /// Resumes a paused Task.
        resume_task, TaskServiceClient, resume, pb::ResumeTaskRequest, pb::ResumeTaskResponse
    );
    write!(
        /// Takes a Task: a new engagement of the caller.
        take_task, TaskServiceClient, take, pb::TakeTaskRequest, pb::TakeTaskResponse
    );
    write!(
        /// Delivers on the caller's engagement of a Task (optionally taking it in the same action).
        deliver_task, TaskServiceClient, deliver, pb::DeliverTaskRequest, pb::DeliverTaskResponse
    );
    write!(
        /// Drops the caller's engagement.
        drop_engagement, TaskServiceClient, drop_engagement, pb::DropEngagementRequest, pb::DropEngagementResponse
    );
    write!(
        /// Adopts a delivered engagement (the judge).
        adopt_engagement, TaskServiceClient, adopt_engagement, pb::AdoptEngagementRequest, pb::AdoptEngagementResponse
    );
    write!(
        /// Rejects a delivered engagement with a reason (the judge).
        reject_engagement, TaskServiceClient, reject_engagement, pb::RejectEngagementRequest, pb::RejectEngagementResponse
    );
    read!(
        /// A Task and one version of its contract.
        get_task, TaskServiceClient, get, pb::GetTaskRequest, pb::TaskView
    );
    read!(
        /// One engagement and its state.
        get_engagement, TaskServiceClient, get_engagement, pb::GetEngagementRequest, pb::Engagement
    );
    read!(
        /// One pinned input of an engagement, with its content.
        get_engagement_input, TaskServiceClient, get_engagement_input, pb::GetEngagementInputRequest, pb::MemoryView
    );

    // Coordination (docs/coordination.md).

    write!(
        /// Writes a labeled Memory, or a labeled new version of the caller's own Memory.
        write_labeled, CoordServiceClient, write_labeled, pb::WriteLabeledRequest, pb::WriteLabeledResponse
    );
    write!(
        /// Widens a version's scope: a new version with the same bytes and the wider scope.
        widen_scope, CoordServiceClient, widen_scope, pb::WidenScopeRequest, pb::WidenScopeResponse
    );
    write!(
        /// Sends a labeled message to a thread: to nobody (publish), to members, or to all speakers.
        send, CoordServiceClient, send, pb::SendRequest, pb::SendResponse
    );
    write!(
        /// Scatters work: one atomic action, a header entry and one assignment per rank.
        scatter, CoordServiceClient, scatter, pb::ScatterRequest, pb::ScatterResponse
    );
    read!(
        /// One page of a thread's entries after a cursor, with labels and content.
        get_mailbox, CoordServiceClient, get_mailbox, pb::GetMailboxRequest, pb::Mailbox
    );
    read!(
        /// A collective's ranks in rank order with their assignments (gather).
        get_collective, CoordServiceClient, get_collective, pb::GetCollectiveRequest, pb::Collective
    );
    read!(
        /// An entry read as a barrier over its author and responders.
        get_barrier, CoordServiceClient, get_barrier, pb::GetBarrierRequest, pb::Barrier
    );

    // Shared records (docs/coordination.md). A stale replace is refused `STALE_BASE` with the
    // three-way conflict: [`Error::record_conflict`] reads it.

    write!(
        /// Creates a shared record in a thread, with the entry that announces it.
        create_record, RecordServiceClient, create, pb::CreateRecordRequest, pb::CreateRecordResponse
    );
    write!(
        /// Patches a record against the rev the caller read: appends commute, a stale replace conflicts.
        patch_record, RecordServiceClient, patch, pb::PatchRecordRequest, pb::PatchRecordResponse
    );
    read!(
        /// A record at a rev (default: now), as shown to an audience (default: fleet, everything).
        get_record, RecordServiceClient, get, pb::GetRecordRequest, pb::RecordView
    );
    read!(
        /// A page of a record's accepted writes after a rev.
        get_record_events, RecordServiceClient, get_events, pb::GetRecordEventsRequest, pb::RecordEventPage
    );
    read!(
        /// A record's body, or a note's or an artifact's, with its content while readable.
        get_record_body, RecordServiceClient, get_body, pb::GetRecordBodyRequest, pb::RecordBodyContent
    );

    // Turn.

    read!(
        /// One page of the caller's turn: its open obligations.
        get_turn, TurnServiceClient, get_turn, pb::GetTurnRequest, pb::TurnPage
    );
    read!(
        /// One page of the caller's opportunities: Tasks it may take.
        get_opportunities, TurnServiceClient, get_opportunities, pb::GetOpportunitiesRequest, pb::OpportunityPage
    );
    read!(
        /// The working set of one object as the caller may see it.
        get_working_set, TurnServiceClient, get_working_set, pb::GetWorkingSetRequest, pb::WorkingSet
    );

    // Operators. These take the operator token as the client's key ([`Client::with_key`]) and no
    // idempotency key: each is safe to send again (docs/operations.md), so they retry like reads.
    // `cluster_status` and `backup` are answered by whichever endpoint answers first; use a client
    // of one endpoint to address one node.

    read!(
        /// One node's view of the cluster: role, term, leader, indexes, membership, replication.
        cluster_status, AdminServiceClient, cluster_status, pb::ClusterStatusRequest, pb::ClusterStatusResponse
    );
    read!(
        /// Adds a learner and waits until it has caught up (leader only; give it a long deadline).
        add_learner, AdminServiceClient, add_learner, pb::AddLearnerRequest, pb::AddLearnerResponse
    );
    read!(
        /// Sets the voters through joint consensus (leader only).
        change_membership, AdminServiceClient, change_membership, pb::ChangeMembershipRequest,
        pb::ChangeMembershipResponse
    );
    read!(
        /// Hands leadership to another voter (leader only).
        transfer_leader, AdminServiceClient, transfer_leader, pb::TransferLeaderRequest, pb::TransferLeaderResponse
    );
    read!(
        /// Builds a snapshot on the leader now.
        trigger_snapshot, AdminServiceClient, trigger_snapshot, pb::TriggerSnapshotRequest, pb::TriggerSnapshotResponse
    );
    read!(
        /// Writes a backup of the answering node's state into a new directory on its machine.
        backup, AdminServiceClient, backup, pb::BackupRequest, pb::BackupResponse
    );
    read!(
        /// The SHA-256 of the answering node's protocol state and the applied index it is exact at
        /// (use a client of one endpoint to address one node).
        state_digest, AdminServiceClient, state_digest, pb::StateDigestRequest, pb::StateDigestResponse
    );
    read!(
        /// One page of the recorded facts of the answering node (operator only): the core's
        /// canonical encoding of each `JournaledFact`, in global order.
        export_facts, AdminServiceClient, export_facts, pb::ExportFactsRequest, pb::ExportFactsResponse
    );

    /// The caller's whole turn, page after page, up to `max_pages` pages. Stops early when the
    /// server returns no next cursor (or repeats one).
    pub async fn turn_all(&self, max_pages: usize) -> Result<Vec<pb::TurnItem>, Error> {
        Ok(self.turn_full(max_pages).await?.items)
    }

    /// [`Self::turn_all`] as one page: every item, and the last page's `as_of_seq` and
    /// `wake_failed` (the caller's wake targets given up on).
    pub async fn turn_full(&self, max_pages: usize) -> Result<pb::TurnPage, Error> {
        let mut whole = pb::TurnPage::default();
        let mut cursor = String::new();
        for _ in 0..max_pages {
            let page = self.get_turn(pb::GetTurnRequest { cursor: cursor.clone(), page_size: 0 }).await?;
            whole.items.extend(page.items);
            whole.as_of_seq = page.as_of_seq;
            whole.wake_failed = page.wake_failed;
            if page.next_cursor.is_empty() || page.next_cursor == cursor {
                break;
            }
            cursor = page.next_cursor;
        }
        Ok(whole)
    }

    /// A thread's entries from the first, page after page, up to `max_pages` pages.
    pub async fn timeline_all(&self, thread: &str, max_pages: usize) -> Result<Vec<pb::Entry>, Error> {
        let mut entries: Vec<pb::Entry> = Vec::new();
        let mut after = 0;
        for _ in 0..max_pages {
            let page = self.timeline(pb::TimelineRequest { thread: thread.to_string(), after, page_size: 0 }).await?;
            let Some(last) = page.entries.last().map(|e| e.seq) else { break };
            entries.extend(page.entries);
            if last <= after {
                break;
            }
            after = last;
        }
        Ok(entries)
    }
}
