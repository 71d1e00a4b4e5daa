//! Facts (L1): the recorded results of actions, deadlines and account-state changes. State follows
//! from facts alone: [`crate::evolve`] is the only code that changes records, and it reads nothing
//! but the current state and one fact. A combined action records the facts of its base actions in
//! order (L2).

use crate::model::{
    AppliedOp, AssignmentSpec, Audience, BodyRef, Contract, Editors, MembershipEnd, MissingJudgment, ObligationId, Pin,
    ScatterRank, WakeEvent, WakeFailure, WakeFilter,
};
use kungfu_types::{
    AgentId, AssignmentId, Content, EngagementId, EntrySeq, Fingerprint, Labels, MemoryId, ObjectRef, RecordId, Role,
    Scope, SecretHash, Taint, TaskId, ThreadId, Timestamp, Version, WakeSecret, WakeTargetId,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// A judgment verdict (§6.4, §7.3). A rejection carries a reason the other party can read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    Adopt,
    Reject { reason: Content },
}

/// How an expired obligation ended (L4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExpiryResult {
    /// The delivery deadline passed without delivery.
    TimedOut,
    /// The judgment deadline passed without judgment; never held against the taker.
    Undecided,
    /// The judgment deadline passed and the contract states adoption as the result (§7.1).
    Adopted,
}

/// One fact. The variants name what happened, in the past tense.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fact {
    // §4
    AgentRegistered {
        agent: AgentId,
        key_hash: SecretHash,
        key_fingerprint: Fingerprint,
    },
    /// §4: in one fact, the memberships end and governor-less open threads close.
    AgentDeactivated {
        agent: AgentId,
        memberships_ended: Vec<ThreadId>,
        threads_closed: Vec<ThreadId>,
    },
    // §5
    MemoryCreated {
        memory: MemoryId,
        author: AgentId,
        content: Content,
    },
    MemoryUpdated {
        memory: MemoryId,
        version: Version,
        content: Content,
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
    // §6.1, §6.2
    ThreadCreated {
        thread: ThreadId,
        creator: AgentId,
        subject: Content,
    },
    GrantIssued {
        thread: ThreadId,
        number: u32,
        role: Role,
        hash: SecretHash,
        fingerprint: Fingerprint,
    },
    GrantVoided {
        thread: ThreadId,
    },
    Joined {
        thread: ThreadId,
        agent: AgentId,
        role: Role,
        via_grant: u32,
    },
    MembershipEnded {
        thread: ThreadId,
        agent: AgentId,
        reason: MembershipEnd,
    },
    RoleChanged {
        thread: ThreadId,
        agent: AgentId,
        from: Role,
        to: Role,
        by: AgentId,
    },
    // §6.3
    Posted {
        thread: ThreadId,
        entry: EntrySeq,
        author: AgentId,
        pin: Pin,
        reply_to: Option<EntrySeq>,
        ask: Option<BTreeSet<AgentId>>,
        responders: BTreeSet<AgentId>,
        task_ref: Option<TaskId>,
    },
    Handled {
        thread: ThreadId,
        entry: EntrySeq,
        responder: AgentId,
        note: Option<Content>,
    },
    Retracted {
        thread: ThreadId,
        entry: EntrySeq,
    },
    // §6.5
    ThreadClosed {
        thread: ThreadId,
        by: Option<AgentId>,
    },
    // §6.4
    AssignmentCreated {
        assignment: AssignmentId,
        thread: ThreadId,
        entry: EntrySeq,
        creator: AgentId,
        addressee: AgentId,
        spec: AssignmentSpec,
    },
    AssignmentTaken {
        assignment: AssignmentId,
        thread: ThreadId,
    },
    AssignmentDelivered {
        assignment: AssignmentId,
        thread: ThreadId,
        output: Content,
    },
    AssignmentJudged {
        assignment: AssignmentId,
        thread: ThreadId,
        verdict: Verdict,
    },
    AssignmentDropped {
        assignment: AssignmentId,
        thread: ThreadId,
    },
    AssignmentVoided {
        assignment: AssignmentId,
        thread: ThreadId,
    },
    // §7
    TaskCreated {
        task: TaskId,
        author: AgentId,
        audience: Audience,
        contract: Contract,
    },
    ContractRevised {
        task: TaskId,
        version: Version,
        contract: Contract,
    },
    TaskPaused {
        task: TaskId,
    },
    TaskResumed {
        task: TaskId,
    },
    Engaged {
        engagement: EngagementId,
        task: TaskId,
        agent: AgentId,
        contract_version: Version,
        inputs: Vec<Pin>,
        judge: AgentId,
        on_missing_judgment: MissingJudgment,
    },
    EngagementDelivered {
        engagement: EngagementId,
        task: TaskId,
        output: Content,
    },
    EngagementJudged {
        engagement: EngagementId,
        task: TaskId,
        verdict: Verdict,
    },
    EngagementDropped {
        engagement: EngagementId,
        task: TaskId,
    },
    // L4
    /// A deadline ended an obligation: exactly one terminal fact per obligation (L5).
    DeadlinePassed {
        obligation: ObligationId,
        object: ObjectRef,
        due_at: Timestamp,
        result: ExpiryResult,
    },
    // The coordination layer (appended, design R4).
    /// Design §2.2: the labels of a version, emitted right after the fact that created the version,
    /// in the same command, and never otherwise.
    VersionLabeled {
        memory: MemoryId,
        version: Version,
        labels: Labels,
        /// The version this one widens (`WidenScope`), if any.
        widened_from: Option<Version>,
    },
    /// Design §4.4: which base facts of the same command form a collective (an index of them: it
    /// creates no obligation, grants no right and changes no protocol state).
    Scattered {
        thread: ThreadId,
        header: EntrySeq,
        ranks: Vec<ScatterRank>,
    },
    /// Design §5.3: a shared record, created by the `Posted` entry of the same command.
    RecordCreated {
        record: RecordId,
        thread: ThreadId,
        entry: EntrySeq,
        creator: AgentId,
        scope: Scope,
        editors: Editors,
        title: Content,
        state: Content,
        body: BodyRef,
    },
    /// Design §5.6: an accepted patch, carried by the `Posted` entry of the same command. `scope`
    /// and `taint` are derived from the values it carries (design §5.8).
    RecordPatched {
        record: RecordId,
        thread: ThreadId,
        entry: EntrySeq,
        base_rev: u32,
        rev: u32,
        ops: Vec<AppliedOp>,
        scope: Scope,
        taint: Taint,
    },
    // Wake targets (appended, issue #35), journaled under their agent.
    WakeTargetSet {
        target: WakeTargetId,
        agent: AgentId,
        url: String,
        secret: WakeSecret,
        filter: WakeFilter,
    },
    WakeTargetRemoved {
        target: WakeTargetId,
        agent: AgentId,
    },
    WakeQueued {
        target: WakeTargetId,
        agent: AgentId,
        event: WakeEvent,
    },
    WakeDelivered {
        target: WakeTargetId,
        agent: AgentId,
        seq: u64,
    },
    WakeGaveUp {
        target: WakeTargetId,
        agent: AgentId,
        failure: WakeFailure,
    },
}

impl Fact {
    /// The journals this fact is recorded in: the objects it changes. The first is its home.
    pub fn objects(&self) -> Vec<ObjectRef> {
        use Fact::*;
        match self {
            AgentRegistered { agent, .. } => vec![ObjectRef::Agent(*agent)],
            AgentDeactivated { agent, memberships_ended, .. } => {
                let mut v = vec![ObjectRef::Agent(*agent)];
                v.extend(memberships_ended.iter().map(|t| ObjectRef::Thread(*t)));
                v
            }
            MemoryCreated { memory, .. }
            | MemoryUpdated { memory, .. }
            | MemoryPublished { memory }
            | MemoryUnpublished { memory }
            | MemoryWithdrawn { memory }
            | VersionLabeled { memory, .. } => vec![ObjectRef::Memory(*memory)],
            ThreadCreated { thread, .. }
            | GrantIssued { thread, .. }
            | GrantVoided { thread }
            | Joined { thread, .. }
            | MembershipEnded { thread, .. }
            | RoleChanged { thread, .. }
            | Posted { thread, .. }
            | Handled { thread, .. }
            | Retracted { thread, .. }
            | ThreadClosed { thread, .. }
            | AssignmentCreated { thread, .. }
            | AssignmentTaken { thread, .. }
            | AssignmentDelivered { thread, .. }
            | AssignmentJudged { thread, .. }
            | AssignmentDropped { thread, .. }
            | AssignmentVoided { thread, .. }
            | Scattered { thread, .. }
            | RecordCreated { thread, .. }
            | RecordPatched { thread, .. } => vec![ObjectRef::Thread(*thread)],
            TaskCreated { task, .. }
            | ContractRevised { task, .. }
            | TaskPaused { task }
            | TaskResumed { task }
            | Engaged { task, .. }
            | EngagementDelivered { task, .. }
            | EngagementJudged { task, .. }
            | EngagementDropped { task, .. } => vec![ObjectRef::Task(*task)],
            DeadlinePassed { object, .. } => vec![*object],
            WakeTargetSet { agent, .. }
            | WakeTargetRemoved { agent, .. }
            | WakeQueued { agent, .. }
            | WakeDelivered { agent, .. }
            | WakeGaveUp { agent, .. } => vec![ObjectRef::Agent(*agent)],
        }
    }

    /// A short structural name of the fact, for history digests and logs. Never content (L6).
    pub fn name(&self) -> &'static str {
        use Fact::*;
        match self {
            AgentRegistered { .. } => "agent_registered",
            AgentDeactivated { .. } => "agent_deactivated",
            MemoryCreated { .. } => "memory_created",
            MemoryUpdated { .. } => "memory_updated",
            MemoryPublished { .. } => "memory_published",
            MemoryUnpublished { .. } => "memory_unpublished",
            MemoryWithdrawn { .. } => "memory_withdrawn",
            ThreadCreated { .. } => "thread_created",
            GrantIssued { .. } => "grant_issued",
            GrantVoided { .. } => "grant_voided",
            Joined { .. } => "joined",
            MembershipEnded { .. } => "membership_ended",
            RoleChanged { .. } => "role_changed",
            Posted { .. } => "posted",
            Handled { .. } => "handled",
            Retracted { .. } => "retracted",
            ThreadClosed { .. } => "thread_closed",
            AssignmentCreated { .. } => "assignment_created",
            AssignmentTaken { .. } => "assignment_taken",
            AssignmentDelivered { .. } => "assignment_delivered",
            AssignmentJudged { .. } => "assignment_judged",
            AssignmentDropped { .. } => "assignment_dropped",
            AssignmentVoided { .. } => "assignment_voided",
            TaskCreated { .. } => "task_created",
            ContractRevised { .. } => "contract_revised",
            TaskPaused { .. } => "task_paused",
            TaskResumed { .. } => "task_resumed",
            Engaged { .. } => "engaged",
            EngagementDelivered { .. } => "engagement_delivered",
            EngagementJudged { .. } => "engagement_judged",
            EngagementDropped { .. } => "engagement_dropped",
            DeadlinePassed { .. } => "deadline_passed",
            VersionLabeled { .. } => "version_labeled",
            Scattered { .. } => "scattered",
            RecordCreated { .. } => "record_created",
            RecordPatched { .. } => "record_patched",
            WakeTargetSet { .. } => "wake_target_set",
            WakeTargetRemoved { .. } => "wake_target_removed",
            WakeQueued { .. } => "wake_queued",
            WakeDelivered { .. } => "wake_delivered",
            WakeGaveUp { .. } => "wake_gave_up",
        }
    }
}

/// A fact as journaled: its place in the global order (`seq` of its command, `idx` within it), the
/// time of the command, and who caused it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournaledFact {
    pub seq: u64,
    pub idx: u32,
    pub at: Timestamp,
    /// The acting agent; None for system deadlines, registration and operator actions.
    pub actor: Option<AgentId>,
    pub fact: Fact,
}
