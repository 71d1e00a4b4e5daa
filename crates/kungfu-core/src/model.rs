//! The records of the protocol state. Lifecycles are enums that carry their data, so a record in a
//! terminal state cannot also hold a running deadline. Structure and content are separate fields
//! everywhere (L6): every participant-written value is a [`Content`] and nothing else is.

use kungfu_types::{
    AgentId, AssignmentId, Content, EngagementId, EntrySeq, ExternalRef, Fingerprint, Labels, MemoryId, Micros,
    ObjectRef, RecordId, Role, Scope, SecretHash, Taint, TaskId, ThreadId, Timestamp, Version, WakeSecret,
    WakeTargetId,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Id counters and the apply sequence. Ids come from here so every replica allocates the same ones.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Number of commands that recorded at least one fact; orders facts across journals (L1).
    pub seq: u64,
    pub agents: u64,
    pub memories: u64,
    pub threads: u64,
    pub assignments: u64,
    pub tasks: u64,
    pub engagements: u64,
}

// ---------------------------------------------------------------------------------------------
// §4 Agent

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Agent {
    pub id: AgentId,
    pub registered_at: Timestamp,
    /// SHA-256 of the agent's bearer key; the key itself is never stored (§12).
    pub key_hash: SecretHash,
    pub key_fingerprint: Fingerprint,
    pub state: AgentState,
    /// Memories created, for the capacity limit.
    pub memories: u32,
    /// Tasks created, for the capacity limit.
    pub tasks: u32,
    /// Open threads the agent currently belongs to, for the capacity limit.
    pub open_threads: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AgentState {
    Active,
    Deactivated { at: Timestamp },
}

impl Agent {
    pub fn is_active(&self) -> bool {
        matches!(self.state, AgentState::Active)
    }
}

// ---------------------------------------------------------------------------------------------
// §5 Memory

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Memory {
    pub id: MemoryId,
    pub author: AgentId,
    pub created_at: Timestamp,
    pub current: Version,
    pub visibility: Visibility,
    pub state: MemoryState,
}

impl Memory {
    pub fn is_valid(&self) -> bool {
        matches!(self.state, MemoryState::Valid)
    }
    pub fn is_public(&self) -> bool {
        self.visibility == Visibility::Public
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Visibility {
    Private,
    Public,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemoryState {
    Valid,
    /// §5: terminal; no further versions, no new references.
    Withdrawn {
        at: Timestamp,
    },
}

/// One immutable version of a Memory (§5: "Versions are immutable").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryVersion {
    pub memory: MemoryId,
    pub version: Version,
    pub created_at: Timestamp,
    pub content: Content,
}

/// §5: "A reference always pins one version."
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Pin {
    pub memory: MemoryId,
    pub version: Version,
}

// ---------------------------------------------------------------------------------------------
// §6 Thread

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thread {
    pub id: ThreadId,
    pub creator: AgentId,
    pub created_at: Timestamp,
    pub subject: Content,
    pub state: ThreadState,
    /// §6.1: at most one live admission grant.
    pub grant: Option<Grant>,
    /// Grants issued so far; numbers each grant so a membership can name the one it came through.
    pub grants_issued: u32,
    /// Sequence number of the last entry.
    pub last_entry: u64,
    /// Current members (memberships that have not ended).
    pub members: u32,
    /// Current members holding the governor role (§6.2: an open thread keeps at least one).
    pub governors: u32,
    /// Assignments neither delivered nor ended, for the capacity limit.
    pub open_assignments: u32,
}

impl Thread {
    pub fn is_open(&self) -> bool {
        matches!(self.state, ThreadState::Open)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ThreadState {
    Open,
    /// §6.5: terminal and read-only.
    Closed {
        at: Timestamp,
    },
}

/// A live admission grant. Only the hash of its bearer secret is kept (§12).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub number: u32,
    pub role: Role,
    pub hash: SecretHash,
    pub fingerprint: Fingerprint,
    pub issued_at: Timestamp,
}

/// A membership. §6.2: it records which admission it came through and when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Membership {
    pub thread: ThreadId,
    pub agent: AgentId,
    pub role: Role,
    /// The number of the grant it came through (0 for the creator, who needs none).
    pub via_grant: u32,
    pub joined_at: Timestamp,
    /// How many memberships this agent has had in this thread, this one included. Rejoining is a
    /// new membership (§6.2) and revives nothing of an earlier one.
    pub generation: u32,
    pub state: MembershipState,
}

impl Membership {
    pub fn is_current(&self) -> bool {
        matches!(self.state, MembershipState::Current)
    }
    pub fn may_speak(&self) -> bool {
        self.is_current() && self.role.may_speak()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MembershipState {
    Current,
    Ended { at: Timestamp, reason: MembershipEnd },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MembershipEnd {
    Left,
    Removed { by: AgentId },
    Deactivated,
}

/// An entry of a thread (§6.3). Entries are never edited or deleted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub thread: ThreadId,
    pub seq: EntrySeq,
    pub author: AgentId,
    pub posted_at: Timestamp,
    /// §6.3: "one pinned version of one valid Memory".
    pub pin: Pin,
    pub reply_to: Option<EntrySeq>,
    /// The `ask` as stated (None = not stated; Some(empty) = nobody).
    pub ask: Option<BTreeSet<AgentId>>,
    /// The responders, fixed once at post time by the four rules of §6.3.
    pub responders: BTreeSet<AgentId>,
    /// §7.5: an entry may reference a Task.
    pub task_ref: Option<TaskId>,
    /// The assignment created together with this entry, if any (§6.4).
    pub assignment: Option<AssignmentId>,
}

/// One responder's owed response to one entry (§6.3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    pub thread: ThreadId,
    pub entry: EntrySeq,
    pub responder: AgentId,
    pub arose_at: Timestamp,
    pub state: ResponseState,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResponseState {
    Pending,
    Ended { at: Timestamp, how: ResponseEnd },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResponseEnd {
    Replied {
        by_entry: EntrySeq,
    },
    /// The note is readable only by the entry's author and the responder (§6.3).
    Handled {
        note: Option<Content>,
    },
    Retracted,
    MembershipEnded,
    Demoted,
    ThreadClosed,
}

// ---------------------------------------------------------------------------------------------
// §6.4 Assignment

/// What an assignment fixes at creation; its content never changes afterwards (§6.4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssignmentSpec {
    pub criteria: Content,
    pub output_structure: Option<Content>,
    /// Runs from taking.
    pub delivery_window: Micros,
    /// Runs from accepted delivery.
    pub judgment_window: Micros,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    pub id: AssignmentId,
    pub thread: ThreadId,
    pub entry: EntrySeq,
    pub creator: AgentId,
    pub addressee: AgentId,
    pub created_at: Timestamp,
    pub spec: AssignmentSpec,
    pub state: AssignmentState,
    /// §6.2: the creator's membership ended after delivery; the assignment settles as undecided
    /// at its judgment deadline.
    pub judge_forfeited: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AssignmentState {
    /// Not taken: no obligation, no running deadline (§6.4).
    Open,
    Taken {
        at: Timestamp,
        delivery_due: Timestamp,
    },
    Delivered {
        taken_at: Timestamp,
        at: Timestamp,
        judgment_due: Timestamp,
        output: Content,
    },
    Ended {
        at: Timestamp,
        outcome: AssignmentOutcome,
        delivered: Option<Content>,
    },
}

/// §6.4 terminal states. Irreversible.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AssignmentOutcome {
    Adopted,
    Rejected { reason: Content },
    Undecided,
    Dropped,
    TimedOut,
    Voided,
}

impl AssignmentState {
    pub fn is_terminal(&self) -> bool {
        matches!(self, AssignmentState::Ended { .. })
    }
    /// The taker, once taken: always the addressee.
    pub fn is_undelivered(&self) -> bool {
        matches!(self, AssignmentState::Open | AssignmentState::Taken { .. })
    }
}

// ---------------------------------------------------------------------------------------------
// §7 Task

/// §7.1: the result when judgment is not made by the judgment deadline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum MissingJudgment {
    Adopted,
    #[default]
    Undecided,
}

/// §7: the requester is the author or an agent the author designates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Judge {
    Author,
    Agent(AgentId),
}

/// Structural eligibility a contract may state (§7.1). It is checked at engagement; content is
/// never evaluated (L6).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Eligibility {
    /// Only agents registered at or before this time may take the Task.
    pub registered_before: Option<Timestamp>,
    /// Agents that may not take the Task.
    pub excluded: BTreeSet<AgentId>,
}

/// A contract (§7.1). Fixed when created; a revision is a new [`ContractVersion`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contract {
    pub requirements: Content,
    pub output_structure: Option<Content>,
    /// Required inputs: pinned versions of the author's own Memories (§7.1).
    pub inputs: Vec<Pin>,
    /// Informative reference material; carries no guarantee (§7.1).
    pub references: Option<Content>,
    pub delivery_window: Micros,
    pub judgment_window: Micros,
    pub on_missing_judgment: MissingJudgment,
    pub acceptance: Content,
    pub judge: Judge,
    pub eligibility: Eligibility,
    pub max_adoptions: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContractVersion {
    pub task: TaskId,
    pub version: Version,
    pub created_at: Timestamp,
    pub contract: Contract,
}

/// §7.2: the audience is fixed at creation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Audience {
    Open,
    Restricted(BTreeSet<AgentId>),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    pub id: TaskId,
    pub author: AgentId,
    pub created_at: Timestamp,
    pub audience: Audience,
    pub current: Version,
    /// §7: a paused Task accepts no new engagements; existing ones continue.
    pub paused: bool,
    /// §7.4: adopted deliveries, the only thing the adoption limit counts.
    pub adopted: u32,
    pub open_engagements: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Engagement {
    pub id: EngagementId,
    pub task: TaskId,
    pub agent: AgentId,
    /// §7.3: the engagement binds the contract version and the required input versions.
    pub contract_version: Version,
    pub inputs: Vec<Pin>,
    /// The requester bound with the contract version.
    pub judge: AgentId,
    pub on_missing_judgment: MissingJudgment,
    pub judgment_window: Micros,
    pub taken_at: Timestamp,
    pub state: EngagementState,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EngagementState {
    Open { delivery_due: Timestamp },
    Delivered { at: Timestamp, judgment_due: Timestamp, output: Content },
    Ended { at: Timestamp, outcome: EngagementOutcome, delivered: Option<Content> },
}

/// §7.3 terminal states. Irreversible.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EngagementOutcome {
    Adopted,
    Rejected { reason: Content },
    Undecided,
    Dropped,
    TimedOut,
}

impl EngagementState {
    pub fn is_terminal(&self) -> bool {
        matches!(self, EngagementState::Ended { .. })
    }
}

// ---------------------------------------------------------------------------------------------
// §8 Obligations and opportunities

/// §8: the closed obligation catalogue (DESIGN §9): response, delivery, judgment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ObligationId {
    Response { thread: ThreadId, entry: EntrySeq, responder: AgentId },
    AssignmentDelivery(AssignmentId),
    AssignmentJudgment(AssignmentId),
    EngagementDelivery(EngagementId),
    EngagementJudgment(EngagementId),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ObligationKind {
    Response,
    Delivery,
    Judgment,
}

impl ObligationId {
    pub fn kind(&self) -> ObligationKind {
        match self {
            ObligationId::Response { .. } => ObligationKind::Response,
            ObligationId::AssignmentDelivery(_) | ObligationId::EngagementDelivery(_) => ObligationKind::Delivery,
            ObligationId::AssignmentJudgment(_) | ObligationId::EngagementJudgment(_) => ObligationKind::Judgment,
        }
    }
}

/// An open obligation. It exists in state only while open; its history is in the facts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Obligation {
    pub id: ObligationId,
    pub holder: AgentId,
    /// The object whose facts created it (a thread or a Task).
    pub object: ObjectRef,
    pub arose_at: Timestamp,
    /// L4: delivery and judgment carry a deadline; a response has none.
    pub due_at: Option<Timestamp>,
}

/// §8: an untaken assignment addressed to an agent, or a restricted Task naming it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum OpportunityId {
    Assignment(AssignmentId),
    Task(TaskId),
}

// ---------------------------------------------------------------------------------------------
// The coordination layer (design §2, §4). Records of their own, never fields added to the records
// above (design R4: bincode encodes structs by position).

/// Design §2.2: the labels of one Memory version, written once by `VersionLabeled`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionLabels {
    pub memory: MemoryId,
    pub version: Version,
    pub labels: Labels,
    pub widened_from: Option<Version>,
}

/// One rank of a scatter: its member, its entry and its assignment (design §4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScatterRank {
    pub member: AgentId,
    pub entry: EntrySeq,
    pub assignment: AssignmentId,
}

/// Design §4.4: the collective a scatter formed, keyed by its header entry. Ranks in rank order
/// (ascending member id); the set never changes after the scatter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Collective {
    pub thread: ThreadId,
    pub header: EntrySeq,
    pub author: AgentId,
    pub formed_at: Timestamp,
    pub ranks: Vec<ScatterRank>,
}

// ---------------------------------------------------------------------------------------------
// The shared record (design §5). Structure only: every value that is content stays a Memory
// version (bodies) or a `Content` field (title, state, decision text); the runtime never parses it
// (design R1). Every accepted write is also a `Post` in the record's thread.

/// Design §5.2: an item id, `[A-Za-z0-9_.-]{1,64}`: structure, charset-limited so it cannot carry
/// prose. Checked once, in `decide`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ItemId(pub String);

impl ItemId {
    pub fn is_valid(&self) -> bool {
        let n = self.0.len();
        (1..=64).contains(&n) && self.0.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
    }
}

impl std::fmt::Display for ItemId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Who may write a record (design §5.3), fixed at creation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Editors {
    /// Every member who may speak.
    Speakers,
    /// Governors only; a speaker's patch is refused `NOT_GOVERNOR` (fak's `APPROVAL_REQUIRED`).
    Governors,
}

/// Design §5.2: a stored body or artifact: a pinned Memory version (its labels are the version's),
/// or an external reference with declared labels.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BodyRef {
    Pin(Pin),
    External(ExternalRef),
}

/// A note's kind (fak's `comment` and `progress`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NoteKind {
    Comment,
    Progress,
}

/// The three item kinds of a record, append-only, each numbered from 1 in append order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ItemKind {
    Note,
    Artifact,
    Decision,
}

impl ItemKind {
    pub const ALL: [ItemKind; 3] = [ItemKind::Note, ItemKind::Artifact, ItemKind::Decision];

    /// fak's path of the item list.
    pub fn path(self) -> &'static str {
        match self {
            ItemKind::Note => "/notes",
            ItemKind::Artifact => "/artifacts",
            ItemKind::Decision => "/open_decisions",
        }
    }
}

/// A scalar field of a record, each with a history keyed by rev (design §8.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RecordField {
    Title,
    State,
    Body,
    /// The state of the decision with this item number.
    DecisionState(u32),
}

/// The value of a scalar at one rev.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FieldValue {
    Text(Content),
    Body(BodyRef),
}

/// One op of an accepted patch, as recorded (design §5.6 step 5): inline bodies already replaced by
/// the pins of their new Memory versions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AppliedOp {
    ReplaceTitle(Content),
    ReplaceState(Content),
    ReplaceBody(BodyRef),
    ReplaceDecisionState { decision: ItemId, state: Content },
    AppendNote { note_id: ItemId, kind: NoteKind, body: BodyRef },
    AppendArtifact { artifact_id: ItemId, reference: BodyRef, media_type: String },
    AppendDecision { decision_id: ItemId, state: Content, reason: Content },
}

impl AppliedOp {
    /// fak's path of the op (design §5.4 table).
    pub fn path(&self) -> String {
        match self {
            AppliedOp::ReplaceTitle(_) => "/title".into(),
            AppliedOp::ReplaceState(_) => "/state".into(),
            AppliedOp::ReplaceBody(_) => "/body_ref".into(),
            AppliedOp::ReplaceDecisionState { decision, .. } => format!("/open_decisions/{decision}/state"),
            AppliedOp::AppendNote { .. } => ItemKind::Note.path().into(),
            AppliedOp::AppendArtifact { .. } => ItemKind::Artifact.path().into(),
            AppliedOp::AppendDecision { .. } => ItemKind::Decision.path().into(),
        }
    }
}

/// Item counts of a record, per kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordCounts {
    pub notes: u32,
    pub artifacts: u32,
    pub decisions: u32,
}

impl RecordCounts {
    pub fn get(&self, kind: ItemKind) -> u32 {
        match kind {
            ItemKind::Note => self.notes,
            ItemKind::Artifact => self.artifacts,
            ItemKind::Decision => self.decisions,
        }
    }

    pub fn get_mut(&mut self, kind: ItemKind) -> &mut u32 {
        match kind {
            ItemKind::Note => &mut self.notes,
            ItemKind::Artifact => &mut self.artifacts,
            ItemKind::Decision => &mut self.decisions,
        }
    }
}

/// Design §5.2: the structure of a shared record; its values live at `record_value` and
/// `record_item` keys. `rev` counts accepted writes from 1 (the creation).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedRecord {
    pub id: RecordId,
    pub thread: ThreadId,
    pub creator: AgentId,
    pub created_at: Timestamp,
    /// The entry that created it.
    pub entry: EntrySeq,
    pub rev: u32,
    /// The widest audience its items may reach, `Fleet..=Public`, fixed at creation.
    pub scope: Scope,
    pub editors: Editors,
    pub counts: RecordCounts,
    pub updated_by: AgentId,
    pub updated_at: Timestamp,
}

/// One entry of a scalar's history: its value from `rev` on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordValue {
    pub record: RecordId,
    pub field: RecordField,
    pub rev: u32,
    pub value: FieldValue,
}

/// What an item holds, by kind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ItemBody {
    Note {
        kind: NoteKind,
        body: BodyRef,
    },
    Artifact {
        reference: BodyRef,
        media_type: String,
    },
    /// A decision's state is the scalar `RecordField::DecisionState(seq)`.
    Decision {
        reason: Content,
    },
}

impl ItemBody {
    pub fn kind(&self) -> ItemKind {
        match self {
            ItemBody::Note { .. } => ItemKind::Note,
            ItemBody::Artifact { .. } => ItemKind::Artifact,
            ItemBody::Decision { .. } => ItemKind::Decision,
        }
    }

    /// The reference whose labels decide who may see the item (decisions are carried at the
    /// record's scope).
    pub fn reference(&self) -> Option<&BodyRef> {
        match self {
            ItemBody::Note { body, .. } => Some(body),
            ItemBody::Artifact { reference, .. } => Some(reference),
            ItemBody::Decision { .. } => None,
        }
    }
}

/// Design §5.2: one appended item, numbered `seq` (from 1) within its kind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordItem {
    pub record: RecordId,
    pub seq: u32,
    pub id: ItemId,
    pub author: AgentId,
    pub added_rev: u32,
    pub added_at: Timestamp,
    pub body: ItemBody,
}

/// Design §5.8: the summary of one accepted write (derived, rebuilt from facts). `scope` and
/// `taint` are derived from the values the write carries, never declared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordRevision {
    pub record: RecordId,
    pub rev: u32,
    pub base_rev: u32,
    pub entry: EntrySeq,
    pub actor: AgentId,
    pub at: Timestamp,
    pub paths: Vec<String>,
    pub scope: Scope,
    pub taint: Taint,
}

// ---------------------------------------------------------------------------------------------
// Wake targets (issue #35, docs/wake.md): where an agent's turn changes are delivered. §8:
// "Notifications MAY speed this up; correct recovery MUST NOT depend on them" — a target is a
// hint channel; the turn stays the truth.

/// Which turn items a target is told about: empty sets mean every kind, every object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakeFilter {
    pub kinds: BTreeSet<ObligationKind>,
    pub objects: BTreeSet<ObjectRef>,
}

impl WakeFilter {
    /// Whether a turn item of `kind` on `object` counts for this target.
    pub fn admits(&self, kind: ObligationKind, object: ObjectRef) -> bool {
        (self.kinds.is_empty() || self.kinds.contains(&kind))
            && (self.objects.is_empty() || self.objects.contains(&object))
    }

    /// Whether an opportunity (§8) on `object` counts for this target: taking it makes a delivery
    /// obligation, so a filter by kind admits it when it admits deliveries.
    pub fn admits_opportunity(&self, object: ObjectRef) -> bool {
        self.admits(ObligationKind::Delivery, object)
    }
}

/// One turn change queued for a target, numbered from 1 per target. Everything a delivery's body
/// and id are made of is here, so any leader sends the same body under the same id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakeEvent {
    pub seq: u64,
    /// The log index at which the leader read the changed turn (the turn cursor's index).
    pub applied_index: u64,
    /// What the target saw at that index (`watch::wake_digest`): the filtered turn's digest, so
    /// the turn cursor's, while the target sees no opportunity and no nearing deadline.
    pub digest: [u8; 32],
    pub queued_at: Timestamp,
}

/// Why delivery to a target stopped: the leader gave up on event `seq` after the operator's
/// give-up time. The target sends nothing more until the agent sets it again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakeFailure {
    pub seq: u64,
    pub at: Timestamp,
    pub error: String,
}

/// A wake target of one agent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakeTarget {
    pub id: WakeTargetId,
    pub agent: AgentId,
    pub url: String,
    /// Replicated whole: whichever node leads signs with it. Never returned by a read (§12).
    pub secret: WakeSecret,
    pub filter: WakeFilter,
    pub created_at: Timestamp,
    /// The newest event queued, if any.
    pub queued: Option<WakeEvent>,
    /// Every event up to this sequence number was acknowledged by the receiver (2xx).
    pub delivered: u64,
    pub failed: Option<WakeFailure>,
}

impl WakeTarget {
    /// The queued event not yet acknowledged, while the target has not given up.
    pub fn outstanding(&self) -> Option<WakeEvent> {
        match (self.queued, &self.failed) {
            (Some(e), None) if e.seq > self.delivered => Some(e),
            _ => None,
        }
    }
}
