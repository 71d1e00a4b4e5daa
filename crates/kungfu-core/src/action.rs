//! Commands: what an agent (or the system) asks the state machine to do. A [`Command`] carries the
//! acting principal, the [`Action`], its idempotency key, the digest of the request and the time
//! `ts` stamped by the leader (DESIGN §3). Nothing else enters the core.

use crate::model::{
    Audience, Contract, Editors, Eligibility, ItemId, Judge, MissingJudgment, NoteKind, ObligationId, Pin, WakeEvent,
    WakeFailure, WakeFilter,
};
use kungfu_types::{
    AgentId, AssignmentId, Content, EngagementId, EntrySeq, ExternalRef, Fingerprint, IdempotencyKey, Labels, MemoryId,
    Micros, RecordId, RequestDigest, Role, Scope, SecretHash, TaskId, ThreadId, Timestamp, WakeSecret, WakeTargetId,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Who issues a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Principal {
    /// An authenticated agent.
    Agent(AgentId),
    /// Registration of a new agent, before it has an identity.
    Registrar,
    /// An operator (account state is set by the implementation, §4).
    Operator,
    /// The leader's deadline timer (L4). Never replayed, never keyed.
    System,
}

/// One command, as it is written to the replicated log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Command {
    pub principal: Principal,
    pub action: Action,
    /// L3: one principal, one action kind and one key identify one logical request.
    pub key: Option<IdempotencyKey>,
    pub digest: RequestDigest,
    /// Stamped by the leader; the only clock the core knows (L4).
    pub ts: Timestamp,
}

impl Command {
    /// Builds a command, computing the request digest from the action.
    pub fn new(principal: Principal, action: Action, key: Option<IdempotencyKey>, ts: Timestamp) -> Command {
        let digest = action.digest();
        Command { principal, action, key, digest, ts }
    }
}

/// A new admission grant: the role it binds and the hash of its bearer secret. The secret itself is
/// generated outside the core and never enters the log (§12).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewGrant {
    pub role: Role,
    pub hash: SecretHash,
    pub fingerprint: Fingerprint,
}

/// What an entry pins (§6.3): an existing Memory version, or new content that becomes a new private
/// Memory of the author in the same action (a combined action, L2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PostBody {
    Pin(Pin),
    Content(Content),
}

/// What a coordination write carries (design §3.3): an existing Memory version, whose labels are
/// its own (unlabeled counts as `Labels::FAIL_CLOSED`), or new content that becomes a new Memory
/// of the author with the given labels in the same action (L2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LabeledBody {
    Pin(Pin),
    Content { content: Content, labels: Labels },
}

/// Who a `Send` asks (design §3.3): nobody (a publish or broadcast), named members, or every
/// member who may speak except the author (a barrier, design §4.7).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Addressees {
    Nobody,
    Agents(BTreeSet<AgentId>),
    AllSpeakers,
}

/// One rank's goal in a `Scatter` (design §4.3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankGoal {
    pub member: AgentId,
    pub body: LabeledBody,
}

/// A record body or note body (design §5.3): an existing version (its labels are its own), new
/// content that becomes a labeled Memory of the writer in the same action, or an external ref.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BodyInput {
    Pin(Pin),
    Content { content: Content, labels: Labels },
    External(ExternalRef),
}

/// An artifact reference (design §5.4): a version or an external ref, never inline content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ArtifactInput {
    Pin(Pin),
    External(ExternalRef),
}

/// One typed op of a record patch (design §5.4). fak's `remove` is not expressible. Replaces
/// conflict on a stale base; appends with new ids commute.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PatchOp {
    ReplaceTitle(Content),
    ReplaceState(Content),
    ReplaceBody(BodyInput),
    ReplaceDecisionState { decision: ItemId, state: Content },
    AppendNote { note_id: ItemId, kind: NoteKind, body: BodyInput },
    AppendArtifact { artifact_id: ItemId, reference: ArtifactInput, media_type: String },
    AppendDecision { decision_id: ItemId, state: Content, reason: Content },
}

impl PatchOp {
    pub fn is_replace(&self) -> bool {
        matches!(
            self,
            PatchOp::ReplaceTitle(_)
                | PatchOp::ReplaceState(_)
                | PatchOp::ReplaceBody(_)
                | PatchOp::ReplaceDecisionState { .. }
        )
    }
}

/// An assignment created together with an entry (§6.4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewAssignment {
    pub addressee: AgentId,
    pub criteria: Content,
    pub output_structure: Option<Content>,
    /// None = the configured default (L4).
    pub delivery_window: Option<Micros>,
    pub judgment_window: Option<Micros>,
}

/// A contract as the author states it (§7.1); unstated windows take the configured defaults.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContractDraft {
    pub requirements: Content,
    pub output_structure: Option<Content>,
    pub inputs: Vec<Pin>,
    pub references: Option<Content>,
    pub delivery_window: Option<Micros>,
    pub judgment_window: Option<Micros>,
    pub on_missing_judgment: MissingJudgment,
    pub acceptance: Content,
    pub judge: Judge,
    pub eligibility: Eligibility,
    pub max_adoptions: Option<u32>,
}

impl ContractDraft {
    /// A minimal contract: requirements and acceptance criteria, judged by the author.
    pub fn simple(requirements: impl Into<Content>, acceptance: impl Into<Content>) -> ContractDraft {
        ContractDraft {
            requirements: requirements.into(),
            output_structure: None,
            inputs: Vec::new(),
            references: None,
            delivery_window: None,
            judgment_window: None,
            on_missing_judgment: MissingJudgment::Undecided,
            acceptance: acceptance.into(),
            judge: Judge::Author,
            eligibility: Eligibility::default(),
            max_adoptions: None,
        }
    }

    pub(crate) fn into_contract(self, delivery_window: Micros, judgment_window: Micros) -> Contract {
        Contract {
            requirements: self.requirements,
            output_structure: self.output_structure,
            inputs: self.inputs,
            references: self.references,
            delivery_window,
            judgment_window,
            on_missing_judgment: self.on_missing_judgment,
            acceptance: self.acceptance,
            judge: self.judge,
            eligibility: self.eligibility,
            max_adoptions: self.max_adoptions,
        }
    }
}

/// Every action of the protocol, plus the system's expiry (L4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    // §4 Agent
    RegisterAgent {
        key_hash: SecretHash,
        key_fingerprint: Fingerprint,
    },
    DeactivateAgent {
        agent: AgentId,
    },
    // §5 Memory
    CreateMemory {
        content: Content,
    },
    UpdateMemory {
        memory: MemoryId,
        content: Content,
    },
    PublishMemory {
        memory: MemoryId,
    },
    UnpublishMemory {
        memory: MemoryId,
    },
    WithdrawMemory {
        memory: MemoryId,
    },
    // §6.1, §6.2 Thread and membership
    CreateThread {
        subject: Content,
        grant: Option<NewGrant>,
    },
    IssueGrant {
        thread: ThreadId,
        grant: NewGrant,
    },
    VoidGrant {
        thread: ThreadId,
    },
    Join {
        grant_hash: SecretHash,
    },
    Leave {
        thread: ThreadId,
    },
    Remove {
        thread: ThreadId,
        member: AgentId,
    },
    ChangeRole {
        thread: ThreadId,
        member: AgentId,
        role: Role,
    },
    // §6.3 Entries and responses
    Post {
        thread: ThreadId,
        body: PostBody,
        reply_to: Option<EntrySeq>,
        ask: Option<BTreeSet<AgentId>>,
        task_ref: Option<TaskId>,
        assignment: Option<NewAssignment>,
    },
    Handle {
        thread: ThreadId,
        entry: EntrySeq,
        note: Option<Content>,
    },
    Retract {
        thread: ThreadId,
        entry: EntrySeq,
    },
    // §6.5
    CloseThread {
        thread: ThreadId,
    },
    // §6.4 Assignments
    TakeAssignment {
        assignment: AssignmentId,
    },
    DeliverAssignment {
        assignment: AssignmentId,
        output: Content,
    },
    AdoptAssignment {
        assignment: AssignmentId,
    },
    RejectAssignment {
        assignment: AssignmentId,
        reason: Content,
    },
    DropAssignment {
        assignment: AssignmentId,
    },
    VoidAssignment {
        assignment: AssignmentId,
    },
    // §7 Task
    CreateTask {
        audience: Audience,
        contract: ContractDraft,
    },
    ReviseContract {
        task: TaskId,
        contract: ContractDraft,
    },
    PauseTask {
        task: TaskId,
    },
    ResumeTask {
        task: TaskId,
    },
    TakeTask {
        task: TaskId,
    },
    /// Deliver on the caller's open engagement; with `take`, take first in the same action (§7.3).
    DeliverTask {
        task: TaskId,
        output: Content,
        take: bool,
    },
    DropEngagement {
        engagement: EngagementId,
    },
    AdoptEngagement {
        engagement: EngagementId,
    },
    RejectEngagement {
        engagement: EngagementId,
        reason: Content,
    },
    // L4
    /// Proposed by the leader's timer: ends the obligation if it is still open and due.
    Expire {
        obligation: ObligationId,
        due_at: Timestamp,
    },
    // The coordination layer (design §2–§4). Appended, never inserted: bincode encodes a variant
    // by its index (design R4).
    /// A labeled Memory (`memory: None`) or a labeled new version of the caller's own Memory.
    WriteLabeled {
        memory: Option<MemoryId>,
        content: Content,
        labels: Labels,
    },
    /// The explicit, auditable widening: a new version with the same bytes and a wider scope.
    WidenScope {
        pin: Pin,
        scope: Scope,
    },
    /// An addressed message, a publish (to nobody) or a barrier (to all speakers).
    Send {
        thread: ThreadId,
        body: LabeledBody,
        to: Addressees,
        reply_to: Option<EntrySeq>,
        /// Design §3.6: refuse (`STALE_BASE`) unless `reply_to` is its author's latest entry.
        reply_to_latest: bool,
    },
    /// One atomic action: a header entry and one entry with an assignment per rank.
    Scatter {
        thread: ThreadId,
        header: LabeledBody,
        goals: Vec<RankGoal>,
        criteria: Content,
        output_structure: Option<Content>,
        delivery_window: Option<Micros>,
        judgment_window: Option<Micros>,
    },
    /// Design §5.3: a shared record in a thread, created with its entry (`message`).
    CreateRecord {
        thread: ThreadId,
        title: Content,
        state: Content,
        body: BodyInput,
        scope: Scope,
        editors: Editors,
        message: LabeledBody,
        ask: Option<BTreeSet<AgentId>>,
    },
    /// Design §5.4: a compare-and-set patch on `base_rev`, with its entry (`message`).
    PatchRecord {
        record: RecordId,
        base_rev: u32,
        ops: Vec<PatchOp>,
        message: LabeledBody,
        ask: Option<BTreeSet<AgentId>>,
    },
    // Wake targets (appended, issue #35; docs/wake.md). §8: notifications only speed work up.
    /// A webhook the caller's turn changes are delivered to; `secret` is made by the door and
    /// left out of the request digest, like an agent key (L3).
    SetWakeTarget {
        url: String,
        secret: WakeSecret,
        filter: WakeFilter,
    },
    RemoveWakeTarget {
        target: WakeTargetId,
    },
    /// The leader's deliverer: events queued, deliveries acknowledged, give-ups. System only.
    RecordWake {
        queued: Vec<(AgentId, WakeTargetId, WakeEvent)>,
        delivered: Vec<(AgentId, WakeTargetId, u64)>,
        gave_up: Vec<(AgentId, WakeTargetId, WakeFailure)>,
    },
}

macro_rules! kinds {
    ($($variant:ident => $text:literal,)*) => {
        /// The kind of an action: part of the replay key (L3) and of metrics labels.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum ActionKind { $($variant,)* }

        impl ActionKind {
            pub const ALL: &'static [ActionKind] = &[$(ActionKind::$variant,)*];
            pub fn as_str(self) -> &'static str {
                match self { $(ActionKind::$variant => $text,)* }
            }
        }

        impl Action {
            pub fn kind(&self) -> ActionKind {
                match self { $(Action::$variant { .. } => ActionKind::$variant,)* }
            }
        }
    };
}

kinds! {
    RegisterAgent => "register_agent",
    DeactivateAgent => "deactivate_agent",
    CreateMemory => "create_memory",
    UpdateMemory => "update_memory",
    PublishMemory => "publish_memory",
    UnpublishMemory => "unpublish_memory",
    WithdrawMemory => "withdraw_memory",
    CreateThread => "create_thread",
    IssueGrant => "issue_grant",
    VoidGrant => "void_grant",
    Join => "join",
    Leave => "leave",
    Remove => "remove",
    ChangeRole => "change_role",
    Post => "post",
    Handle => "handle",
    Retract => "retract",
    CloseThread => "close_thread",
    TakeAssignment => "take_assignment",
    DeliverAssignment => "deliver_assignment",
    AdoptAssignment => "adopt_assignment",
    RejectAssignment => "reject_assignment",
    DropAssignment => "drop_assignment",
    VoidAssignment => "void_assignment",
    CreateTask => "create_task",
    ReviseContract => "revise_contract",
    PauseTask => "pause_task",
    ResumeTask => "resume_task",
    TakeTask => "take_task",
    DeliverTask => "deliver_task",
    DropEngagement => "drop_engagement",
    AdoptEngagement => "adopt_engagement",
    RejectEngagement => "reject_engagement",
    Expire => "expire",
    WriteLabeled => "write_labeled",
    WidenScope => "widen_scope",
    Send => "send",
    Scatter => "scatter",
    CreateRecord => "create_record",
    PatchRecord => "patch_record",
    SetWakeTarget => "set_wake_target",
    RemoveWakeTarget => "remove_wake_target",
    RecordWake => "record_wake",
}

impl Action {
    /// L3: the digest of the request's semantic inputs. Fresh secret material is left out: a retry
    /// of a grant or a registration mints a new secret but is the same logical request.
    pub fn digest(&self) -> RequestDigest {
        // Every other action is hashed as it is, as it is encoded: no copy of its content.
        let fresh_secret = matches!(
            self,
            Action::RegisterAgent { .. }
                | Action::CreateThread { grant: Some(_), .. }
                | Action::IssueGrant { .. }
                | Action::SetWakeTarget { .. }
        );
        if !fresh_secret {
            return RequestDigest(crate::codec::sha256(self));
        }
        let mut view = self.clone();
        let blank = |g: &mut NewGrant| {
            g.hash = SecretHash([0; 32]);
            g.fingerprint = Fingerprint(String::new());
        };
        match &mut view {
            Action::RegisterAgent { key_hash, key_fingerprint } => {
                *key_hash = SecretHash([0; 32]);
                *key_fingerprint = Fingerprint(String::new());
            }
            Action::CreateThread { grant: Some(g), .. } | Action::IssueGrant { grant: g, .. } => blank(g),
            Action::SetWakeTarget { secret, .. } => *secret = WakeSecret([0; 32]),
            _ => {}
        }
        RequestDigest(crate::codec::sha256(&view))
    }
}
