//! Receipts (L3): what happened when a request first succeeded. A receipt holds only protocol
//! facts of that result (ids, versions, states, times); never content and never a secret. Later
//! changes never alter it: it is stored once and returned byte for byte on replay.

use crate::action::ActionKind;
use crate::model::{ObligationId, Pin, ScatterRank};
use kungfu_types::{
    AgentId, AssignmentId, EngagementId, EntrySeq, Fingerprint, Labels, MemoryId, RecordId, RequestDigest, Role, Scope,
    TaskId, ThreadId, Timestamp, Version, WakeTargetId,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    pub kind: ActionKind,
    pub at: Timestamp,
    /// The command sequence number whose facts this receipt reports; None for the two no-effect
    /// successes of L2, which record no fact.
    pub seq: Option<u64>,
    pub result: ActionResult,
}

impl Receipt {
    /// The canonical bytes of this receipt; a replay returns exactly these.
    pub fn to_bytes(&self) -> Vec<u8> {
        crate::codec::encode(self)
    }
}

/// A stored receipt with the digest of the request that produced it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredReceipt {
    pub digest: RequestDigest,
    pub receipt: Receipt,
}

/// The protocol facts of one successful action.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ActionResult {
    AgentRegistered {
        agent: AgentId,
        key_fingerprint: Fingerprint,
    },
    AgentDeactivated {
        agent: AgentId,
        memberships_ended: Vec<ThreadId>,
        threads_closed: Vec<ThreadId>,
    },
    MemoryCreated {
        memory: MemoryId,
        version: Version,
    },
    MemoryUpdated {
        memory: MemoryId,
        version: Version,
    },
    MemoryPublished {
        memory: MemoryId,
    },
    MemoryUnpublished {
        memory: MemoryId,
    },
    MemoryWithdrawn {
        memory: MemoryId,
    },
    ThreadCreated {
        thread: ThreadId,
        grant: Option<GrantReceipt>,
    },
    GrantIssued {
        thread: ThreadId,
        grant: GrantReceipt,
        voided_previous: bool,
    },
    GrantVoided {
        thread: ThreadId,
    },
    /// `existing`: L2's first no-effect success, joining again returns the existing membership.
    Joined {
        thread: ThreadId,
        agent: AgentId,
        role: Role,
        joined_at: Timestamp,
        existing: bool,
    },
    Left {
        thread: ThreadId,
    },
    Removed {
        thread: ThreadId,
        member: AgentId,
    },
    RoleChanged {
        thread: ThreadId,
        member: AgentId,
        from: Role,
        to: Role,
    },
    Posted {
        thread: ThreadId,
        entry: EntrySeq,
        pin: Pin,
        responders: BTreeSet<AgentId>,
        /// Whether the post ended the author's own pending response to `reply_to` (§6.3).
        ended_own_response: bool,
        assignment: Option<AssignmentId>,
    },
    Handled {
        thread: ThreadId,
        entry: EntrySeq,
    },
    Retracted {
        thread: ThreadId,
        entry: EntrySeq,
        responses_ended: u32,
    },
    ThreadClosed {
        thread: ThreadId,
    },
    AssignmentTaken {
        assignment: AssignmentId,
        delivery_due: Timestamp,
    },
    AssignmentDelivered {
        assignment: AssignmentId,
        judgment_due: Timestamp,
    },
    AssignmentAdopted {
        assignment: AssignmentId,
    },
    AssignmentRejected {
        assignment: AssignmentId,
    },
    AssignmentDropped {
        assignment: AssignmentId,
    },
    AssignmentVoided {
        assignment: AssignmentId,
    },
    TaskCreated {
        task: TaskId,
        version: Version,
    },
    ContractRevised {
        task: TaskId,
        version: Version,
    },
    TaskPaused {
        task: TaskId,
    },
    TaskResumed {
        task: TaskId,
    },
    /// `existing`: L2's second no-effect success, taking again returns the open engagement.
    Engaged {
        task: TaskId,
        engagement: EngagementId,
        contract_version: Version,
        delivery_due: Timestamp,
        existing: bool,
    },
    EngagementDelivered {
        task: TaskId,
        engagement: EngagementId,
        judgment_due: Timestamp,
    },
    EngagementAdopted {
        task: TaskId,
        engagement: EngagementId,
    },
    EngagementRejected {
        task: TaskId,
        engagement: EngagementId,
    },
    EngagementDropped {
        task: TaskId,
        engagement: EngagementId,
    },
    Expired {
        ended: Vec<ObligationId>,
    },
    // The coordination layer (appended, design R4).
    /// Design §3.3: `readers` = the current members other than the author when it was posted.
    Sent {
        thread: ThreadId,
        entry: EntrySeq,
        pin: Pin,
        responders: BTreeSet<AgentId>,
        readers: u32,
    },
    LabeledWritten {
        pin: Pin,
        labels: Labels,
    },
    ScopeWidened {
        from: Pin,
        to: Pin,
        scope: Scope,
    },
    /// Design §4.3: the ranks in rank order.
    Scattered {
        thread: ThreadId,
        header: EntrySeq,
        ranks: Vec<ScatterRank>,
    },
    /// Design §5.3: a new shared record at rev 1, and the entry that carries it.
    RecordCreated {
        record: RecordId,
        thread: ThreadId,
        entry: EntrySeq,
        rev: u32,
    },
    /// Design §5.6: the new rev; `merged` when the patch's appends were rebased onto a newer rev.
    RecordPatched {
        record: RecordId,
        entry: EntrySeq,
        base_rev: u32,
        rev: u32,
        merged: bool,
    },
    // Wake targets (appended, issue #35). The secret is never in a receipt (L3, §12).
    WakeTargetSet {
        target: WakeTargetId,
    },
    WakeTargetRemoved {
        target: WakeTargetId,
    },
    WakeRecorded {
        queued: u32,
        delivered: u32,
        gave_up: u32,
    },
}

/// The non-secret facts of an admission grant. The bearer secret appears only in the first
/// response, outside the receipt (§6.1, L3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantReceipt {
    pub role: Role,
    pub fingerprint: Fingerprint,
}
