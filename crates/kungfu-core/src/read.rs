//! Reads (§8, §9): the turn, opportunities, working sets and content on demand. Every read is a
//! pure function of one consistent state, so a permission check and the content it returns can
//! never come from two different moments (§9). An unknown object and one the caller may not read
//! give the same answer (§12). Every read is bounded by a page size from [`Limits`].

use crate::action::ActionKind;
use crate::keys::{self, Key};
use crate::limits::Limits;
use crate::model::*;
use crate::state::{IndexRef, Record, StateError, StateExt, StateRead, obligation_object};
use crate::visibility;
use kungfu_types::{
    AgentId, AssignmentId, Code, Content, EngagementId, EntrySeq, MemoryId, NextStep, ObjectRef, RecordId, Rejection,
    Role, TaskId, ThreadId, Timestamp, Version,
};
use serde::{Deserialize, Serialize};

/// A read was refused (NOT_FOUND or a malformed argument) or the state could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{0}")]
    Rejected(Rejection),
    #[error(transparent)]
    State(#[from] StateError),
}

impl From<Rejection> for ReadError {
    fn from(r: Rejection) -> ReadError {
        ReadError::Rejected(r)
    }
}

pub type ReadResult<T> = Result<T, ReadError>;

fn not_found<T>(what: &str) -> ReadResult<T> {
    Err(ReadError::Rejected(Rejection::not_found(what)))
}

/// An opaque position in a paginated read: the last key returned. Only valid for the same read
/// by the same agent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor(pub Vec<u8>);

impl Cursor {
    pub fn to_hex(&self) -> String {
        hex::encode(&self.0)
    }
    pub fn from_hex(s: &str) -> Result<Cursor, Rejection> {
        hex::decode(s)
            .map(Cursor)
            .map_err(|_| Rejection::field(Code::InvalidArgument, "cursor", "is not a cursor returned by this read"))
    }
}

fn check_cursor(cursor: Option<&Cursor>, prefix: &[u8]) -> ReadResult<Option<Key>> {
    match cursor {
        None => Ok(None),
        Some(c) if c.0.starts_with(prefix) => Ok(Some(c.0.clone())),
        Some(_) => {
            Err(Rejection::field(Code::InvalidArgument, "cursor", "belongs to another read; start without a cursor")
                .into())
        }
    }
}

// --- §8 Turn --------------------------------------------------------------------------------------

/// One open obligation in a turn, with its next step (§8).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnItem {
    pub obligation: ObligationId,
    pub kind: ObligationKind,
    pub object: ObjectRef,
    pub arose_at: Timestamp,
    pub due_at: Option<Timestamp>,
    /// respond, deliver or judge; `wait` once the deadline has passed and its expiry is pending.
    pub next: NextStep,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnPage {
    pub items: Vec<TurnItem>,
    /// Present when more items may follow; pass it back to continue.
    pub next_cursor: Option<Cursor>,
}

fn turn_item(o: &Obligation, now: Timestamp) -> TurnItem {
    let next = match (o.id.kind(), o.due_at) {
        (_, Some(due)) if due <= now => NextStep::Wait,
        (ObligationKind::Response, _) => NextStep::Respond,
        (ObligationKind::Delivery, _) => NextStep::Deliver,
        (ObligationKind::Judgment, _) => NextStep::Judge,
    };
    TurnItem { obligation: o.id, kind: o.id.kind(), object: o.object, arose_at: o.arose_at, due_at: o.due_at, next }
}

/// §8: the agent's open obligations across all its memberships and engagements, ordered by when
/// each arose, without duplicates, paginated so that a full traversal omits nothing. `now` only
/// decides whether a passed deadline turns the next step into `wait`.
pub fn turn(
    state: &dyn StateRead,
    agent: AgentId,
    cursor: Option<&Cursor>,
    page_size: usize,
    now: Timestamp,
    limits: &Limits,
) -> ReadResult<TurnPage> {
    let prefix = keys::turn_of(agent);
    let after = check_cursor(cursor, &prefix)?;
    let limit = limits.page_size(page_size);
    let (rows, more) = page_rows(state, &prefix, after.as_deref(), limit)?;
    let mut items = Vec::with_capacity(rows.len());
    for (key, r) in &rows {
        let Record::Ref(IndexRef::Obligation(id)) = r else {
            return Err(StateError::corrupt(key, "turn entry is not an obligation").into());
        };
        let o = state.obligation(*id)?.ok_or_else(|| StateError::corrupt(key, "turn names a missing obligation"))?;
        items.push(turn_item(&o, now));
    }
    let next_cursor = if more { rows.last().map(|(k, _)| Cursor(k.clone())) } else { None };
    Ok(TurnPage { items, next_cursor })
}

/// At most `limit` rows of `prefix` after `after`, and whether more follow. One row past the page
/// is read so that the page that reaches the end says so (`turn.proto`: the cursor is empty when
/// the traversal is complete), rather than a full last page costing one more, empty, call.
fn page_rows(
    state: &dyn StateRead,
    prefix: &[u8],
    after: Option<&[u8]>,
    limit: usize,
) -> Result<(Vec<(Key, Record)>, bool), StateError> {
    let mut rows = state.scan(prefix, after, limit.saturating_add(1))?;
    let more = rows.len() > limit;
    rows.truncate(limit);
    Ok((rows, more))
}

// --- §8 Opportunities -----------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Opportunity {
    pub id: OpportunityId,
    pub object: ObjectRef,
    pub arose_at: Timestamp,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpportunityPage {
    pub items: Vec<Opportunity>,
    pub next_cursor: Option<Cursor>,
}

/// §8: untaken assignments addressed to the agent and restricted Tasks naming it that it could
/// take now, discoverable without knowing where they are. They bind no one.
pub fn opportunities(
    state: &dyn StateRead,
    agent: AgentId,
    cursor: Option<&Cursor>,
    page_size: usize,
    limits: &Limits,
) -> ReadResult<OpportunityPage> {
    let prefix = keys::opportunities_of(agent);
    let after = check_cursor(cursor, &prefix)?;
    let limit = limits.page_size(page_size);
    let (rows, more) = page_rows(state, &prefix, after.as_deref(), limit)?;
    let mut items = Vec::new();
    for (key, r) in &rows {
        let Record::Ref(IndexRef::Opportunity(id)) = r else {
            return Err(StateError::corrupt(key, "opportunity entry is not an opportunity").into());
        };
        match *id {
            OpportunityId::Assignment(a) => {
                let asg = state.assignment(a)?.ok_or_else(|| StateError::corrupt(key, "missing assignment"))?;
                items.push(Opportunity { id: *id, object: ObjectRef::Thread(asg.thread), arose_at: asg.created_at });
            }
            OpportunityId::Task(t) => {
                let task = state.task(t)?.ok_or_else(|| StateError::corrupt(key, "missing task"))?;
                // Shown while the agent could take it: not paused, no open engagement of its own.
                let engaged = state.index(&keys::open_engagement(t, agent))?.is_some();
                if !task.paused && !engaged {
                    items.push(Opportunity { id: *id, object: ObjectRef::Task(t), arose_at: task.created_at });
                }
            }
        }
    }
    let next_cursor = if more { rows.last().map(|(k, _)| Cursor(k.clone())) } else { None };
    Ok(OpportunityPage { items, next_cursor })
}

// --- §9 Visibility --------------------------------------------------------------------------------

/// The thread and the reader's membership, for a current member (§9); NOT_FOUND otherwise.
pub(crate) fn current_membership(
    state: &dyn StateRead,
    thread: ThreadId,
    agent: AgentId,
) -> ReadResult<(Thread, Membership)> {
    match visibility::current_member(state, thread, agent)? {
        Some((t, m)) => Ok((t, m)),
        None => not_found("thread"),
    }
}

// --- Content on demand ----------------------------------------------------------------------------

/// A Memory version as its reader may see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryView {
    pub memory: Memory,
    pub version: Version,
    pub created_at: Timestamp,
    pub content: Content,
    /// Design §2.6: the version's labels, None when unlabeled. The author also reads its own
    /// quarantined versions (nobody else can reach them); an SDK keeps those out of a model's
    /// context.
    pub labels: Option<kungfu_types::Labels>,
}

/// Reads a Memory directly: its author reads every version; any other agent reads the current
/// version of a valid public Memory (§5, §9). Pinned reads go through their context instead.
pub fn read_memory(
    state: &dyn StateRead,
    agent: AgentId,
    memory: MemoryId,
    version: Option<Version>,
) -> ReadResult<MemoryView> {
    let Some(m) = state.memory(memory)? else {
        return not_found("memory");
    };
    let Some(version) = visibility::readable_version(&m, agent, version) else {
        return not_found("memory");
    };
    let Some(v) = state.memory_version(memory, version)? else {
        return not_found("memory");
    };
    let labels = state.labels(Pin { memory, version })?;
    Ok(MemoryView { memory: m, version, created_at: v.created_at, content: v.content, labels })
}

/// An entry with its pinned content when the reader may read it (§5 pin rules), for a current
/// member (§9).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryView {
    pub entry: Entry,
    /// None when the pin is another agent's Memory that is no longer valid and public (§5), or
    /// when the entry is `held`.
    pub content: Option<Content>,
    /// Design §2.6: the labels of the pinned version, None when unlabeled.
    pub labels: Option<kungfu_types::Labels>,
    /// Design §2.6: the pinned version is labeled quarantined, so its content is withheld. The
    /// floor makes this impossible; it is fak's ingress hold kept as defence in depth.
    pub held: bool,
    /// Design §4.4: the number of ranks when this entry heads a collective.
    pub collective_size: Option<u32>,
    /// Design §5.8: the shared record and rev this entry wrote, when it is a record's write.
    pub record: Option<(RecordId, u32)>,
}

pub fn read_entry(state: &dyn StateRead, agent: AgentId, thread: ThreadId, seq: EntrySeq) -> ReadResult<EntryView> {
    current_membership(state, thread, agent)?;
    let Some(entry) = state.entry(thread, seq)? else {
        return not_found("entry");
    };
    let (labels, held, content) = visibility::labeled_content(state, &entry)?;
    let collective_size = state.collective(thread, seq)?.map(|c| c.ranks.len() as u32);
    let record = match state.index(&keys::entry_record(thread, seq))? {
        Some(IndexRef::RecordRev { record, rev }) => Some((record, rev)),
        _ => None,
    };
    Ok(EntryView { entry, content, labels, held, collective_size, record })
}

/// A page of a thread's entries (structure only; content on demand through [`read_entry`]).
pub fn timeline(
    state: &dyn StateRead,
    agent: AgentId,
    thread: ThreadId,
    after: Option<EntrySeq>,
    page_size: usize,
    limits: &Limits,
) -> ReadResult<Vec<Entry>> {
    current_membership(state, thread, agent)?;
    let after_key = after.map(|s| keys::entry(thread, s));
    let rows = state.scan(&keys::entries_of(thread), after_key.as_deref(), limits.page_size(page_size))?;
    rows.into_iter()
        .map(|(key, r)| match r {
            Record::Entry(e) => Ok(e),
            _ => Err(StateError::corrupt(&key, "expected an entry").into()),
        })
        .collect()
}

/// One response as a member sees it: the handle note only for the entry's author and the
/// responder (§6.3); everyone else gets the structure with the note removed.
pub fn read_response(
    state: &dyn StateRead,
    agent: AgentId,
    thread: ThreadId,
    seq: EntrySeq,
    responder: AgentId,
) -> ReadResult<Response> {
    current_membership(state, thread, agent)?;
    let Some(entry) = state.entry(thread, seq)? else {
        return not_found("response");
    };
    let Some(mut r) = state.response(thread, seq, responder)? else {
        return not_found("response");
    };
    if !visibility::handle_note_visible_to(&entry, responder, agent) {
        if let ResponseState::Ended { how: ResponseEnd::Handled { note }, .. } = &mut r.state {
            *note = None;
        }
    }
    Ok(r)
}

/// An assignment, for a current member of its thread (a thread's content is its members', §9).
pub fn read_assignment(state: &dyn StateRead, agent: AgentId, id: AssignmentId) -> ReadResult<Assignment> {
    let Some(a) = state.assignment(id)? else {
        return not_found("assignment");
    };
    match current_membership(state, a.thread, agent) {
        Ok(_) => Ok(a),
        Err(ReadError::Rejected(_)) => not_found("assignment"),
        Err(e) => Err(e),
    }
}

/// A Task's contract layer as its reader may see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskView {
    pub task: Task,
    pub contract: ContractVersion,
}

/// A Task and a contract version: the current one by default. The author and the judge read any
/// version; an engaged agent reads the version it bound; the audience reads the current one.
pub fn read_task(
    state: &dyn StateRead,
    agent: AgentId,
    task: TaskId,
    version: Option<Version>,
) -> ReadResult<TaskView> {
    let Some(t) = state.task(task)? else {
        return not_found("task");
    };
    let Some(current) = state.contract_version(task, t.current)? else {
        return not_found("task");
    };
    if !visibility::task_visible_to(state, &t, &current, agent)? {
        return not_found("task");
    }
    let contract = match version {
        None => current,
        Some(v) if v == t.current => current,
        Some(v) => {
            let privileged = visibility::contract_version_readable(state, &t, &current, agent, v)?;
            match (privileged, state.contract_version(task, v)?) {
                (true, Some(cv)) => cv,
                _ => return not_found("contract version"),
            }
        }
    };
    Ok(TaskView { task: t, contract })
}

/// The contract layer of a Task as seen through a thread entry that references it (§7.5).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReferencedTask {
    pub task: TaskId,
    pub author: AgentId,
    pub paused: bool,
    pub contract: ContractVersion,
}

/// §7.5: an entry may reference a Task; the thread's current members can then read its contract
/// layer inside the thread (the current contract version), and nothing else: not its engagements,
/// not its deliveries, and no right to take it (the audience is unchanged, §7.2).
pub fn read_referenced_task(
    state: &dyn StateRead,
    agent: AgentId,
    thread: ThreadId,
    seq: EntrySeq,
) -> ReadResult<ReferencedTask> {
    current_membership(state, thread, agent)?;
    let Some(entry) = state.entry(thread, seq)? else { return not_found("entry") };
    let Some(task) = entry.task_ref else { return not_found("task reference") };
    let Some(t) = state.task(task)? else { return not_found("task") };
    let Some(contract) = state.contract_version(task, t.current)? else { return not_found("task") };
    Ok(ReferencedTask { task, author: t.author, paused: t.paused, contract })
}

/// An engagement: visible to the engaged agent, its requester (judge) and the Task's author. The
/// delivered output and a rejection reason only to the engaged agent and the requester (§9).
pub fn read_engagement(state: &dyn StateRead, agent: AgentId, id: EngagementId) -> ReadResult<Engagement> {
    let Some(mut e) = state.engagement(id)? else {
        return not_found("engagement");
    };
    let Some(t) = state.task(e.task)? else {
        return not_found("engagement");
    };
    if !visibility::engagement_visible_to(&e, t.author, agent) {
        return not_found("engagement");
    }
    if !visibility::delivery_visible_to(&e, agent) {
        match &mut e.state {
            EngagementState::Delivered { output, .. } => *output = Content::default(),
            EngagementState::Ended { delivered, outcome, .. } => {
                *delivered = None;
                if let EngagementOutcome::Rejected { reason } = outcome {
                    *reason = Content::default();
                }
            }
            EngagementState::Open { .. } => {}
        }
    }
    Ok(e)
}

/// A required input of an engagement, readable by the engaged agent for the life of the
/// engagement even if the author withdrew the Memory since (§7.1, §5).
pub fn read_engagement_input(
    state: &dyn StateRead,
    agent: AgentId,
    id: EngagementId,
    index: usize,
) -> ReadResult<MemoryView> {
    let e = read_engagement(state, agent, id)?;
    let Some(t) = state.task(e.task)? else {
        return not_found("engagement");
    };
    let Some(pin) = e.inputs.get(index).copied() else {
        return Err(Rejection::field(
            Code::InvalidArgument,
            "index",
            format!("the engagement has {} inputs", e.inputs.len()),
        )
        .into());
    };
    let Some(content) = visibility::pinned_content(state, t.author, pin)? else {
        return not_found("memory");
    };
    let Some(m) = state.memory(pin.memory)? else {
        return not_found("memory");
    };
    let Some(v) = state.memory_version(pin.memory, pin.version)? else {
        return not_found("memory");
    };
    let labels = state.labels(pin)?;
    Ok(MemoryView { memory: m, version: pin.version, created_at: v.created_at, content, labels })
}

// --- §8 Working set -------------------------------------------------------------------------------

/// One fact of an object's history, structure only (L6).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryItem {
    pub seq: u64,
    pub idx: u32,
    pub at: Timestamp,
    pub actor: Option<AgentId>,
    pub fact: String,
}

/// The state of the object, as structure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ObjectSummary {
    Agent {
        id: AgentId,
        active: bool,
        open_threads: u32,
    },
    Memory {
        id: MemoryId,
        author: AgentId,
        current: Version,
        public: bool,
        withdrawn: bool,
    },
    Thread {
        id: ThreadId,
        open: bool,
        members: Vec<(AgentId, Role)>,
        last_entry: u64,
        open_assignments: u32,
        /// The live grant's role and fingerprint, shown to governors only.
        grant: Option<(Role, String)>,
        /// Design §5.9 (R5): the thread's shared records, in id order, at most
        /// `max_records_per_thread`, so a member finds them from the working set alone.
        records: Vec<RecordId>,
    },
    Task {
        id: TaskId,
        author: AgentId,
        restricted: bool,
        current: Version,
        paused: bool,
        adopted: u32,
        open_engagements: u32,
        max_adoptions: Option<u32>,
    },
}

/// §8: the minimum needed to act on an object: identity and state, the agent's role, a digest of
/// the history, the agent's obligations there, and the actions available.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkingSet {
    pub object: ObjectRef,
    pub summary: ObjectSummary,
    pub role: Option<Role>,
    /// The most recent facts, newest first, at most `Limits::history_digest_len`.
    pub history: Vec<HistoryItem>,
    pub obligations: Vec<TurnItem>,
    pub available: Vec<ActionKind>,
}

/// The records of a thread, in id order (design §5.9), bounded by the per-thread limit.
fn thread_records(state: &dyn StateRead, thread: ThreadId) -> ReadResult<Vec<RecordId>> {
    let bound = crate::limits::CoordLimits::DEFAULT.max_records_per_thread;
    state
        .index_refs(&keys::thread_records(thread), bound)?
        .into_iter()
        .map(|(key, r)| match r {
            IndexRef::Record(id) => Ok(id),
            _ => Err(StateError::corrupt(&key, "a thread's record index names no record").into()),
        })
        .collect()
}

pub fn working_set(
    state: &dyn StateRead,
    agent: AgentId,
    object: ObjectRef,
    now: Timestamp,
    limits: &Limits,
) -> ReadResult<WorkingSet> {
    let mut role = None;
    let mut available = Vec::new();
    let summary = match object {
        ObjectRef::Agent(id) => {
            if id != agent {
                return not_found("agent");
            }
            let Some(a) = state.agent(id)? else {
                return not_found("agent");
            };
            ObjectSummary::Agent { id, active: a.is_active(), open_threads: a.open_threads }
        }
        ObjectRef::Memory(id) => {
            let view = read_memory(state, agent, id, None)?;
            let m = view.memory;
            if m.author == agent && m.is_valid() {
                available.extend([ActionKind::UpdateMemory, ActionKind::WithdrawMemory]);
                available.push(if m.is_public() { ActionKind::UnpublishMemory } else { ActionKind::PublishMemory });
                // The coordination layer (design §1.1): a labeled version, an explicit widening.
                available.extend([ActionKind::WriteLabeled, ActionKind::WidenScope]);
            }
            ObjectSummary::Memory {
                id,
                author: m.author,
                current: m.current,
                public: m.is_public(),
                withdrawn: !m.is_valid(),
            }
        }
        ObjectRef::Thread(id) => {
            let (t, me) = current_membership(state, id, agent)?;
            role = Some(me.role);
            let mut members: Vec<(AgentId, Role)> = Vec::new();
            for (key, r) in state.scan_all(&keys::memberships_of(id))? {
                let Record::Membership(m) = r else {
                    return Err(StateError::corrupt(&key, "expected a membership").into());
                };
                if m.is_current() {
                    members.push((m.agent, m.role));
                }
            }
            let sole_governor = me.role == Role::Governor && t.governors == 1;
            if t.is_open() {
                if me.role.may_speak() {
                    // Send, Scatter and the record writes are posts of the coordination layer: the
                    // same right (§6.3; a governors-only record refuses a speaker's patch itself).
                    available.extend([
                        ActionKind::Post,
                        ActionKind::Send,
                        ActionKind::Scatter,
                        ActionKind::CreateRecord,
                        ActionKind::PatchRecord,
                    ]);
                }
                if me.role == Role::Governor {
                    available.extend([
                        ActionKind::IssueGrant,
                        ActionKind::ChangeRole,
                        ActionKind::Remove,
                        ActionKind::CloseThread,
                    ]);
                    if t.grant.is_some() {
                        available.push(ActionKind::VoidGrant);
                    }
                }
            }
            if !(t.is_open() && sole_governor) {
                available.push(ActionKind::Leave);
            }
            // Assignments open to this agent here: take what is addressed to it, void what it created.
            for (key, r) in state.index_refs(&keys::live_assignments_of(id, agent), limits.max_page_size)? {
                let IndexRef::Assignment(a) = r else {
                    return Err(StateError::corrupt(&key, "expected an assignment").into());
                };
                let a = state.assignment(a)?.ok_or_else(|| StateError::corrupt(&key, "names a missing assignment"))?;
                if a.addressee == agent && a.state == AssignmentState::Open && t.is_open() {
                    push_once(&mut available, ActionKind::TakeAssignment);
                }
                if a.creator == agent {
                    push_once(&mut available, ActionKind::VoidAssignment);
                }
            }
            let grant = if me.role == Role::Governor {
                t.grant.as_ref().map(|g| (g.role, g.fingerprint.0.clone()))
            } else {
                None
            };
            ObjectSummary::Thread {
                id,
                open: t.is_open(),
                members,
                last_entry: t.last_entry,
                open_assignments: t.open_assignments,
                grant,
                records: thread_records(state, id)?,
            }
        }
        ObjectRef::Task(id) => {
            let view = read_task(state, agent, id, None)?;
            let t = view.task;
            if t.author == agent {
                available.extend([
                    ActionKind::ReviseContract,
                    if t.paused { ActionKind::ResumeTask } else { ActionKind::PauseTask },
                ]);
            } else if !t.paused || state.index(&keys::open_engagement(id, agent))?.is_some() {
                available.extend([ActionKind::TakeTask, ActionKind::DeliverTask]);
            }
            ObjectSummary::Task {
                id,
                author: t.author,
                restricted: matches!(t.audience, Audience::Restricted(_)),
                current: t.current,
                paused: t.paused,
                adopted: t.adopted,
                open_engagements: t.open_engagements,
                max_adoptions: view.contract.contract.max_adoptions,
            }
        }
    };
    // The agent's obligations on this object, with the actions that discharge them.
    let mut obligations = Vec::new();
    if matches!(object, ObjectRef::Thread(_) | ObjectRef::Task(_)) {
        for (key, r) in state.index_refs(&keys::object_obligations_of(object, agent), limits.max_page_size)? {
            let IndexRef::Obligation(id) = r else {
                return Err(StateError::corrupt(&key, "expected an obligation").into());
            };
            let o = state.obligation(id)?.ok_or_else(|| StateError::corrupt(&key, "names a missing obligation"))?;
            let item = turn_item(&o, now);
            let kinds: &[ActionKind] = match id {
                ObligationId::Response { .. } => &[ActionKind::Post, ActionKind::Handle],
                ObligationId::AssignmentDelivery(_) => &[ActionKind::DeliverAssignment, ActionKind::DropAssignment],
                ObligationId::AssignmentJudgment(_) => &[ActionKind::AdoptAssignment, ActionKind::RejectAssignment],
                ObligationId::EngagementDelivery(_) => &[ActionKind::DeliverTask, ActionKind::DropEngagement],
                ObligationId::EngagementJudgment(_) => &[ActionKind::AdoptEngagement, ActionKind::RejectEngagement],
            };
            if item.next != NextStep::Wait {
                for k in kinds {
                    push_once(&mut available, *k);
                }
            }
            obligations.push(item);
        }
        obligations.sort_by_key(|o| (o.arose_at, o.obligation));
    }
    // §9.9, §12.6: a Task's journal also holds its engagements' facts; each is shown only to who
    // may read that engagement (its agent, its judge, the Task's author). A member of the audience
    // never learns from the digest who engaged or that a delivery exists. The scan reads further
    // back than the digest's length so that hidden facts do not shorten it.
    let task_author = match object {
        ObjectRef::Task(id) => state.task(id)?.map(|t| t.author),
        _ => None,
    };
    let mut history = Vec::new();
    let scan = limits.history_digest_len.saturating_mul(if task_author.is_some() { 8 } else { 1 });
    for (key, r) in state.scan_rev(&keys::journal_of(object), None, scan)? {
        if history.len() >= limits.history_digest_len {
            break;
        }
        let Record::Fact(f) = r else {
            return Err(StateError::corrupt(&key, "expected a fact").into());
        };
        if let (Some(author), Some(e)) = (task_author, engagement_of(&f.fact)) {
            let e = state.engagement(e)?.ok_or_else(|| StateError::corrupt(&key, "names a missing engagement"))?;
            let may_read = visibility::engagement_visible_to(&e, author, agent);
            if !may_read {
                continue;
            }
        }
        history.push(HistoryItem { seq: f.seq, idx: f.idx, at: f.at, actor: f.actor, fact: f.fact.name().to_string() });
    }
    Ok(WorkingSet { object, summary, role, history, obligations, available })
}

/// The engagement a fact is about, if any.
fn engagement_of(f: &crate::fact::Fact) -> Option<EngagementId> {
    use crate::fact::Fact::*;
    match f {
        Engaged { engagement, .. }
        | EngagementDelivered { engagement, .. }
        | EngagementJudged { engagement, .. }
        | EngagementDropped { engagement, .. } => Some(*engagement),
        DeadlinePassed {
            obligation: ObligationId::EngagementDelivery(e) | ObligationId::EngagementJudgment(e),
            ..
        } => Some(*e),
        _ => None,
    }
}

fn push_once(v: &mut Vec<ActionKind>, k: ActionKind) {
    if !v.contains(&k) {
        v.push(k);
    }
}

/// One entry of the due index: an obligation and the time its deadline passes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DueItem {
    pub due_at: Timestamp,
    pub obligation: ObligationId,
}

/// The first `limit` entries of the due index, earliest first: what the leader arms its deadline
/// timers from (DESIGN §4).
pub fn due_items(state: &dyn StateRead, limit: usize) -> Result<Vec<DueItem>, StateError> {
    let mut out = Vec::new();
    for (k, r) in state.scan(&keys::due_all(), None, limit)? {
        let Record::Ref(IndexRef::Obligation(obligation)) = r else {
            return Err(StateError::corrupt(&k, "due index entry is not an obligation"));
        };
        let due_at = keys::due_time_of(&k).ok_or_else(|| StateError::corrupt(&k, "due index key too short"))?;
        out.push(DueItem { due_at, obligation });
    }
    Ok(out)
}

/// Every obligation in the due index, in due order, with its object.
/// Bounded by `limit`; continue after the last key returned.
pub fn due_obligations(
    state: &dyn StateRead,
    after: Option<&[u8]>,
    limit: usize,
) -> Result<Vec<(Key, ObligationId, Option<ObjectRef>)>, StateError> {
    let mut out = Vec::new();
    for (k, r) in state.scan(&keys::due_all(), after, limit)? {
        let Record::Ref(IndexRef::Obligation(id)) = r else {
            return Err(StateError::corrupt(&k, "due index entry is not an obligation"));
        };
        let object = obligation_object(state, id)?;
        out.push((k, id, object));
    }
    Ok(out)
}

/// A wake target as its agent reads it: everything but the secret (§12: a secret is in the first
/// response only).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakeTargetView {
    pub id: kungfu_types::WakeTargetId,
    pub url: String,
    pub filter: WakeFilter,
    pub created_at: Timestamp,
    pub queued: Option<WakeEvent>,
    pub delivered: u64,
    pub failed: Option<WakeFailure>,
}

impl From<WakeTarget> for WakeTargetView {
    fn from(t: WakeTarget) -> WakeTargetView {
        WakeTargetView {
            id: t.id,
            url: t.url,
            filter: t.filter,
            created_at: t.created_at,
            queued: t.queued,
            delivered: t.delivered,
            failed: t.failed,
        }
    }
}

/// Issue #35: the caller's own wake targets, in id order (an agent holds a few; no paging).
pub fn wake_targets(state: &dyn StateRead, agent: AgentId) -> ReadResult<Vec<WakeTargetView>> {
    let rows =
        state.scan(&keys::wake_targets_of(agent), None, crate::limits::WakeLimits::DEFAULT.max_targets_per_agent)?;
    rows.into_iter()
        .map(|(key, r)| match r {
            Record::WakeTarget(t) => Ok(t.into()),
            _ => Err(StateError::corrupt(&key, "expected a wake target").into()),
        })
        .collect()
}

/// Every wake target, secrets included: for the leader's deliverer only, never for a caller.
/// At most `limit` after the key `after` (pass the last key back to continue).
pub fn all_wake_targets(
    state: &dyn StateRead,
    after: Option<&[u8]>,
    limit: usize,
) -> Result<Vec<(Key, WakeTarget)>, StateError> {
    state
        .scan(&keys::all_wake_targets(), after, limit)?
        .into_iter()
        .map(|(key, r)| match r {
            Record::WakeTarget(t) => Ok((key, t)),
            _ => Err(StateError::corrupt(&key, "expected a wake target")),
        })
        .collect()
}
