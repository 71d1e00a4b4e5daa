//! Deciding an action: every precondition of the spec is checked here against one state, and the
//! action's facts are emitted in order, or the whole action is rejected (L2). Facts are folded into
//! the overlay as they are emitted, so later steps of a combined action see earlier ones.

use crate::action::{Action, Command, ContractDraft, NewAssignment, NewGrant, PostBody, Principal};
use crate::evolve::evolve;
use crate::fact::{ExpiryResult, Fact, JournaledFact, Verdict};
use crate::keys;
use crate::limits::Limits;
use crate::model::*;
use crate::receipt::{ActionResult, GrantReceipt};
use crate::state::{IndexRef, StateError, StateExt, StateRead, Tx};
use kungfu_types::{
    AgentId, AssignmentId, Code, Content, EngagementId, EntrySeq, MemoryId, Micros, ObjectRef, Rejection, Role, TaskId,
    ThreadId, Timestamp, Version,
};
use std::collections::BTreeSet;

/// Why deciding stopped: a protocol rejection, or a state that could not be read.
#[derive(Debug)]
pub(crate) enum Fail {
    Reject(Rejection),
    State(StateError),
}

impl From<Rejection> for Fail {
    fn from(r: Rejection) -> Fail {
        Fail::Reject(r)
    }
}

impl From<StateError> for Fail {
    fn from(e: StateError) -> Fail {
        Fail::State(e)
    }
}

pub(crate) type Res<T> = Result<T, Fail>;

fn reject<T>(code: Code, message: impl Into<String>) -> Res<T> {
    Err(Fail::Reject(Rejection::new(code, message)))
}

fn reject_field<T>(code: Code, field: &str, message: impl Into<String>) -> Res<T> {
    Err(Fail::Reject(Rejection::field(code, field, message)))
}

fn not_found<T>(what: &str) -> Res<T> {
    Err(Fail::Reject(Rejection::not_found(what)))
}

/// The context of one command being decided: the overlay, the command's time and actor, and the
/// facts emitted so far.
pub(crate) struct Cx<'s> {
    pub tx: Tx<'s>,
    pub ts: Timestamp,
    pub actor: Option<AgentId>,
    pub seq: u64,
    pub next_idx: u32,
    pub facts: Vec<JournaledFact>,
    pub limits: &'s Limits,
}

impl<'s> Cx<'s> {
    pub fn new(
        base: &'s dyn StateRead,
        ts: Timestamp,
        actor: Option<AgentId>,
        seq: u64,
        next_idx: u32,
        limits: &'s Limits,
    ) -> Cx<'s> {
        Cx { tx: Tx::new(base), ts, actor, seq, next_idx, facts: Vec::new(), limits }
    }

    /// Records a fact: folds it into the overlay and journals it.
    pub fn emit(&mut self, fact: Fact) -> Res<()> {
        let jf = JournaledFact { seq: self.seq, idx: self.next_idx, at: self.ts, actor: self.actor, fact };
        self.next_idx += 1;
        evolve(&mut self.tx, &jf)?;
        self.facts.push(jf);
        Ok(())
    }

    fn counters(&self) -> Res<Counters> {
        Ok(self.tx.counters()?.unwrap_or_default())
    }

    fn content(&self, field: &str, c: &Content, max: usize) -> Res<()> {
        if c.len() > max {
            return Err(Fail::Reject(Rejection::field(
                Code::LimitExceeded,
                field,
                format!("is {} bytes; the limit is {max}", c.len()),
            )));
        }
        Ok(())
    }

    fn window(&self, field: &str, w: Option<Micros>, default: Micros) -> Res<Micros> {
        let w = w.unwrap_or(default);
        if w < self.limits.min_window || w > self.limits.max_window {
            return reject_field(
                Code::InvalidArgument,
                field,
                format!("must be between {} and {}", self.limits.min_window, self.limits.max_window),
            );
        }
        Ok(w)
    }

    /// §4: only an active agent may act.
    fn active(&self, agent: AgentId) -> Res<Agent> {
        match self.tx.agent(agent)? {
            Some(a) if a.is_active() => Ok(a),
            Some(_) => reject(Code::AgentInactive, "the agent is deactivated; only an active agent may act"),
            None => reject(Code::Unauthenticated, "unknown agent"),
        }
    }

    /// A thread the agent may read: it holds a current membership (§9). Anything else is NOT_FOUND.
    fn member_thread(&self, thread: ThreadId, agent: AgentId) -> Res<(Thread, Membership)> {
        let Some(t) = self.tx.thread(thread)? else {
            return not_found("thread");
        };
        match self.tx.membership(thread, agent)? {
            Some(m) if m.is_current() => Ok((t, m)),
            _ => not_found("thread"),
        }
    }

    fn open_member_thread(&self, thread: ThreadId, agent: AgentId) -> Res<(Thread, Membership)> {
        let (t, m) = self.member_thread(thread, agent)?;
        if !t.is_open() {
            return reject(Code::ThreadClosed, "the thread is closed and read-only");
        }
        Ok((t, m))
    }

    fn governor_of_open(&self, thread: ThreadId, agent: AgentId) -> Res<(Thread, Membership)> {
        let (t, m) = self.open_member_thread(thread, agent)?;
        if m.role != Role::Governor {
            return reject(Code::NotGovernor, "only a governor may do this");
        }
        Ok((t, m))
    }

    /// A memory the agent may reference (§5): its own valid Memory at any existing version, or
    /// another agent's valid public Memory at its current (readable) version.
    fn referable_pin(&self, field: &str, pin: Pin, agent: AgentId) -> Res<Memory> {
        let Some(m) = self.tx.memory(pin.memory)? else {
            return not_found("memory");
        };
        let own = m.author == agent;
        if !own && !m.is_public() {
            return not_found("memory");
        }
        if !m.is_valid() {
            return reject_field(Code::MemoryWithdrawn, field, "the Memory is withdrawn; it takes no new references");
        }
        if pin.version.0 == 0 || pin.version > m.current || (!own && pin.version != m.current) {
            return reject_field(
                Code::InvalidArgument,
                field,
                "names a version that is not readable; pin the current version",
            );
        }
        Ok(m)
    }

    fn assignment_in_member_thread(&self, id: AssignmentId, agent: AgentId) -> Res<(Assignment, Thread, Membership)> {
        let Some(a) = self.tx.assignment(id)? else {
            return not_found("assignment");
        };
        match self.member_thread(a.thread, agent) {
            Ok((t, m)) => Ok((a, t, m)),
            Err(Fail::Reject(r)) if r.code == Code::NotFound => not_found("assignment"),
            Err(e) => Err(e),
        }
    }

    /// The Task, if the agent may read it: the author, the designated judge of any version, or its
    /// audience (§9 reading, DESIGN §9).
    fn visible_task(&self, task: TaskId, agent: AgentId) -> Res<(Task, ContractVersion)> {
        let Some(t) = self.tx.task(task)? else {
            return not_found("task");
        };
        let cv = self
            .tx
            .contract_version(task, t.current)?
            .ok_or_else(|| StateError::corrupt(&keys::task(task), "missing contract"))?;
        if crate::read::task_visible_to(&self.tx, &t, &cv, agent)? { Ok((t, cv)) } else { not_found("task") }
    }

    fn engagement_visible(&self, id: EngagementId, agent: AgentId) -> Res<(Engagement, Task)> {
        let Some(e) = self.tx.engagement(id)? else {
            return not_found("engagement");
        };
        let Some(t) = self.tx.task(e.task)? else {
            return not_found("engagement");
        };
        if e.agent == agent || e.judge == agent || t.author == agent { Ok((e, t)) } else { not_found("engagement") }
    }
}

// ------------------------------------------------------------------------------------------------
// Deadlines first (L4)

/// The objects whose deadlines must be settled before the action is judged (L4: the deadline wins).
pub(crate) fn settle_targets(state: &dyn StateRead, action: &Action) -> Result<Vec<ObjectRef>, StateError> {
    use Action::*;
    Ok(match action {
        IssueGrant { thread, .. }
        | VoidGrant { thread }
        | Leave { thread }
        | Remove { thread, .. }
        | ChangeRole { thread, .. }
        | Post { thread, .. }
        | Handle { thread, .. }
        | Retract { thread, .. }
        | CloseThread { thread } => vec![ObjectRef::Thread(*thread)],
        TakeAssignment { assignment }
        | DeliverAssignment { assignment, .. }
        | AdoptAssignment { assignment }
        | RejectAssignment { assignment, .. }
        | DropAssignment { assignment }
        | VoidAssignment { assignment } => {
            state.assignment(*assignment)?.map(|a| vec![ObjectRef::Thread(a.thread)]).unwrap_or_default()
        }
        Join { grant_hash } => match state.index(&keys::grant_by_hash(grant_hash))? {
            Some(IndexRef::Thread(t)) => vec![ObjectRef::Thread(t)],
            _ => vec![],
        },
        ReviseContract { task, .. }
        | PauseTask { task }
        | ResumeTask { task }
        | TakeTask { task }
        | DeliverTask { task, .. } => {
            vec![ObjectRef::Task(*task)]
        }
        DropEngagement { engagement } | AdoptEngagement { engagement } | RejectEngagement { engagement, .. } => {
            state.engagement(*engagement)?.map(|e| vec![ObjectRef::Task(e.task)]).unwrap_or_default()
        }
        DeactivateAgent { agent } => state
            .index_refs(&keys::agent_threads(*agent), usize::MAX)?
            .into_iter()
            .filter_map(|(_, r)| if let IndexRef::Thread(t) = r { Some(ObjectRef::Thread(t)) } else { None })
            .collect(),
        Expire { obligation, .. } => obligation_object(state, *obligation)?.into_iter().collect(),
        RegisterAgent { .. }
        | CreateMemory { .. }
        | UpdateMemory { .. }
        | PublishMemory { .. }
        | UnpublishMemory { .. }
        | WithdrawMemory { .. }
        | CreateThread { .. }
        | CreateTask { .. } => vec![],
    })
}

/// The one Thread or Task an action acts on, if it acts on exactly one: the server serializes
/// competing actions on that object through its actor (DESIGN §3). Actions on several objects
/// (deactivation) or on none (registration, Memories) return None.
pub fn actor_object(state: &dyn StateRead, action: &Action) -> Result<Option<ObjectRef>, StateError> {
    match action {
        Action::DeactivateAgent { .. } | Action::Expire { .. } => Ok(None),
        other => {
            let mut targets = settle_targets(state, other)?;
            Ok(if targets.len() == 1 { targets.pop() } else { None })
        }
    }
}

/// The object an obligation belongs to.
pub fn obligation_object(state: &dyn StateRead, id: ObligationId) -> Result<Option<ObjectRef>, StateError> {
    Ok(match id {
        ObligationId::Response { thread, .. } => Some(ObjectRef::Thread(thread)),
        ObligationId::AssignmentDelivery(a) | ObligationId::AssignmentJudgment(a) => {
            state.assignment(a)?.map(|a| ObjectRef::Thread(a.thread))
        }
        ObligationId::EngagementDelivery(e) | ObligationId::EngagementJudgment(e) => {
            state.engagement(e)?.map(|e| ObjectRef::Task(e.task))
        }
    })
}

/// Ends every obligation of `object` whose deadline is at or before the command's time, each with
/// exactly one terminal fact (L4, L5). Returns what it ended.
pub(crate) fn settle_due(cx: &mut Cx<'_>, object: ObjectRef) -> Res<Vec<ObligationId>> {
    let mut ended = Vec::new();
    loop {
        let page = cx.tx.index_refs(&keys::object_due_of(object), 64)?;
        let mut progressed = false;
        for (key, r) in page {
            let IndexRef::Obligation(id) = r else {
                return Err(StateError::corrupt(&key, "due index entry is not an obligation").into());
            };
            // The due time is encoded right after the object in the key; read it from the record.
            let due_at = due_time(&cx.tx, id)?;
            let Some(due_at) = due_at else {
                return Err(StateError::corrupt(&key, "due index names an obligation with no running deadline").into());
            };
            if due_at > cx.ts {
                return Ok(ended);
            }
            let result = match id {
                ObligationId::AssignmentDelivery(_) | ObligationId::EngagementDelivery(_) => ExpiryResult::TimedOut,
                ObligationId::AssignmentJudgment(_) => ExpiryResult::Undecided,
                ObligationId::EngagementJudgment(e) => missing_judgment_result(&cx.tx, e)?,
                ObligationId::Response { .. } => {
                    return Err(StateError::corrupt(&key, "a response has no deadline").into());
                }
            };
            cx.emit(Fact::DeadlinePassed { obligation: id, object, due_at, result })?;
            ended.push(id);
            progressed = true;
        }
        if !progressed {
            return Ok(ended);
        }
    }
}

/// The running deadline of an assignment or engagement obligation, read from the object's state.
fn due_time(state: &dyn StateRead, id: ObligationId) -> Result<Option<Timestamp>, StateError> {
    Ok(match id {
        ObligationId::AssignmentDelivery(a) => match state.assignment(a)?.map(|a| a.state) {
            Some(AssignmentState::Taken { delivery_due, .. }) => Some(delivery_due),
            _ => None,
        },
        ObligationId::AssignmentJudgment(a) => match state.assignment(a)?.map(|a| a.state) {
            Some(AssignmentState::Delivered { judgment_due, .. }) => Some(judgment_due),
            _ => None,
        },
        ObligationId::EngagementDelivery(e) => match state.engagement(e)?.map(|e| e.state) {
            Some(EngagementState::Open { delivery_due }) => Some(delivery_due),
            _ => None,
        },
        ObligationId::EngagementJudgment(e) => match state.engagement(e)?.map(|e| e.state) {
            Some(EngagementState::Delivered { judgment_due, .. }) => Some(judgment_due),
            _ => None,
        },
        ObligationId::Response { .. } => None,
    })
}

/// §7.1: the contract's result when judgment is missing; §7.4: an adoption by default still counts
/// against the limit, so past the limit the result is undecided.
fn missing_judgment_result(state: &dyn StateRead, e: EngagementId) -> Result<ExpiryResult, StateError> {
    let Some(eng) = state.engagement(e)? else {
        return Ok(ExpiryResult::Undecided);
    };
    if eng.on_missing_judgment != MissingJudgment::Adopted {
        return Ok(ExpiryResult::Undecided);
    }
    let Some(task) = state.task(eng.task)? else {
        return Ok(ExpiryResult::Undecided);
    };
    // Existing engagements are judged against the contract version they bound (§7.1).
    let limit = state.contract_version(eng.task, eng.contract_version)?.and_then(|cv| cv.contract.max_adoptions);
    Ok(match limit {
        Some(l) if task.adopted >= l => ExpiryResult::Undecided,
        _ => ExpiryResult::Adopted,
    })
}

// ------------------------------------------------------------------------------------------------
// Actions

/// Decides one action after its deadlines were settled. Returns the receipt's result.
pub(crate) fn decide(cx: &mut Cx<'_>, cmd: &Command, settled: Vec<ObligationId>) -> Res<ActionResult> {
    use Action::*;
    // Principals: agents act for themselves; the registrar only registers; the operator only sets
    // account state; the system only expires.
    let agent = match (cmd.principal, &cmd.action) {
        (Principal::Registrar | Principal::Operator, RegisterAgent { .. }) => None,
        (Principal::Operator, DeactivateAgent { .. }) => None,
        (Principal::System, Expire { .. }) => None,
        (Principal::Agent(a), DeactivateAgent { agent }) if a == *agent => None,
        (Principal::Agent(a), action)
            if !matches!(action, RegisterAgent { .. } | Expire { .. } | DeactivateAgent { .. }) =>
        {
            cx.active(a)?;
            Some(a)
        }
        _ => {
            return reject(
                Code::InvalidArgument,
                format!("{} cannot be requested by this principal", cmd.action.kind().as_str()),
            );
        }
    };
    let me = || agent.ok_or_else(|| Fail::State(StateError::Io("internal: agent action without agent".into())));
    match &cmd.action {
        RegisterAgent { key_hash, key_fingerprint } => register(cx, *key_hash, key_fingerprint.clone()),
        DeactivateAgent { agent } => deactivate(cx, *agent),
        CreateMemory { content } => {
            let (memory, version) = create_memory(cx, me()?, content, "content")?;
            Ok(ActionResult::MemoryCreated { memory, version })
        }
        UpdateMemory { memory, content } => update_memory(cx, me()?, *memory, content),
        PublishMemory { memory } => set_visibility(cx, me()?, *memory, true),
        UnpublishMemory { memory } => set_visibility(cx, me()?, *memory, false),
        WithdrawMemory { memory } => withdraw_memory(cx, me()?, *memory),
        CreateThread { subject, grant } => create_thread(cx, me()?, subject, grant.as_ref()),
        IssueGrant { thread, grant } => issue_grant(cx, me()?, *thread, grant),
        VoidGrant { thread } => void_grant(cx, me()?, *thread),
        Join { grant_hash } => join(cx, me()?, grant_hash),
        Leave { thread } => leave(cx, me()?, *thread),
        Remove { thread, member } => remove(cx, me()?, *thread, *member),
        ChangeRole { thread, member, role } => change_role(cx, me()?, *thread, *member, *role),
        Post { thread, body, reply_to, ask, task_ref, assignment } => {
            post(cx, me()?, *thread, body, *reply_to, ask.as_ref(), *task_ref, assignment.as_ref())
        }
        Handle { thread, entry, note } => handle(cx, me()?, *thread, *entry, note.as_ref()),
        Retract { thread, entry } => retract(cx, me()?, *thread, *entry),
        CloseThread { thread } => close(cx, me()?, *thread),
        TakeAssignment { assignment } => take_assignment(cx, me()?, *assignment, &settled),
        DeliverAssignment { assignment, output } => deliver_assignment(cx, me()?, *assignment, output, &settled),
        AdoptAssignment { assignment } => judge_assignment(cx, me()?, *assignment, Verdict::Adopt, &settled),
        RejectAssignment { assignment, reason } => {
            cx.content("reason", reason, cx.limits.max_reason_bytes)?;
            if reason.is_empty() {
                return reject_field(
                    Code::InvalidArgument,
                    "reason",
                    "a rejection must carry a reason the taker can read",
                );
            }
            judge_assignment(cx, me()?, *assignment, Verdict::Reject { reason: reason.clone() }, &settled)
        }
        DropAssignment { assignment } => drop_assignment(cx, me()?, *assignment, &settled),
        VoidAssignment { assignment } => void_assignment(cx, me()?, *assignment, &settled),
        CreateTask { audience, contract } => create_task(cx, me()?, audience, contract),
        ReviseContract { task, contract } => revise_contract(cx, me()?, *task, contract),
        PauseTask { task } => pause_task(cx, me()?, *task, true),
        ResumeTask { task } => pause_task(cx, me()?, *task, false),
        TakeTask { task } => {
            let (engagement, existing) = take_task(cx, me()?, *task)?;
            let e = cx
                .tx
                .engagement(engagement)?
                .ok_or_else(|| StateError::corrupt(&keys::engagement(engagement), "missing"))?;
            let delivery_due = match e.state {
                EngagementState::Open { delivery_due } => delivery_due,
                // Taking again while delivered returns the engagement; its delivery is behind it.
                EngagementState::Delivered { at, .. } => at,
                EngagementState::Ended { at, .. } => at,
            };
            Ok(ActionResult::Engaged {
                task: *task,
                engagement,
                contract_version: e.contract_version,
                delivery_due,
                existing,
            })
        }
        DeliverTask { task, output, take } => deliver_task(cx, me()?, *task, output, *take, &settled),
        DropEngagement { engagement } => drop_engagement(cx, me()?, *engagement, &settled),
        AdoptEngagement { engagement } => judge_engagement(cx, me()?, *engagement, Verdict::Adopt, &settled),
        RejectEngagement { engagement, reason } => {
            cx.content("reason", reason, cx.limits.max_reason_bytes)?;
            if reason.is_empty() {
                return reject_field(
                    Code::InvalidArgument,
                    "reason",
                    "a rejection must carry a reason the engaged agent can read",
                );
            }
            judge_engagement(cx, me()?, *engagement, Verdict::Reject { reason: reason.clone() }, &settled)
        }
        // A stale or early expiry ends nothing and is refused like any action without effect (L2);
        // what it did end was ended by the deadline facts recorded before it.
        Expire { .. } if settled.is_empty() => reject(Code::NoEffect, "nothing is due on that obligation at this time"),
        Expire { .. } => Ok(ActionResult::Expired { ended: settled }),
    }
}

/// When the action failed only because the deadline ended the obligation first, say so (L4).
fn deadline_won(settled: &[ObligationId], id: ObligationId) -> Res<()> {
    if settled.contains(&id) {
        return reject(Code::DeadlinePassed, "the deadline passed before this action; the deadline wins");
    }
    Ok(())
}

// --- §4 Agent -------------------------------------------------------------------------------------

fn register(
    cx: &mut Cx<'_>,
    key_hash: kungfu_types::SecretHash,
    key_fingerprint: kungfu_types::Fingerprint,
) -> Res<ActionResult> {
    if cx.tx.agent_by_key(&key_hash)?.is_some() {
        // A fresh 256-bit secret never collides; a repeat means the caller reused secret material.
        return reject_field(Code::InvalidArgument, "key", "this key is already registered; generate a fresh key");
    }
    let agent = AgentId(cx.counters()?.agents + 1);
    cx.emit(Fact::AgentRegistered { agent, key_hash, key_fingerprint: key_fingerprint.clone() })?;
    Ok(ActionResult::AgentRegistered { agent, key_fingerprint })
}

fn deactivate(cx: &mut Cx<'_>, agent: AgentId) -> Res<ActionResult> {
    let Some(a) = cx.tx.agent(agent)? else {
        return not_found("agent");
    };
    if !a.is_active() {
        return reject(Code::NoEffect, "the agent is already deactivated");
    }
    // §4: its memberships end with the effects of §6.2, and an open thread left with no governor
    // closes with the effects of §6.5, all in one fact.
    let mut memberships_ended = Vec::new();
    let mut threads_closed = Vec::new();
    for (_, r) in cx.tx.index_refs(&keys::agent_threads(agent), usize::MAX)? {
        let IndexRef::Thread(thread) = r else {
            continue;
        };
        memberships_ended.push(thread);
        let t = cx.tx.thread(thread)?.ok_or_else(|| StateError::corrupt(&keys::thread(thread), "missing"))?;
        let m = cx
            .tx
            .membership(thread, agent)?
            .ok_or_else(|| StateError::corrupt(&keys::membership(thread, agent), "missing"))?;
        if t.is_open() && m.role == Role::Governor && t.governors == 1 {
            threads_closed.push(thread);
        }
    }
    cx.emit(Fact::AgentDeactivated {
        agent,
        memberships_ended: memberships_ended.clone(),
        threads_closed: threads_closed.clone(),
    })?;
    Ok(ActionResult::AgentDeactivated { agent, memberships_ended, threads_closed })
}

// --- §5 Memory ------------------------------------------------------------------------------------

fn create_memory(cx: &mut Cx<'_>, me: AgentId, content: &Content, field: &str) -> Res<(MemoryId, Version)> {
    cx.content(field, content, cx.limits.max_content_bytes)?;
    let a = cx.active(me)?;
    if a.memories >= cx.limits.max_memories_per_agent {
        return reject(
            Code::LimitExceeded,
            format!("an agent may create at most {} Memories", cx.limits.max_memories_per_agent),
        );
    }
    let memory = MemoryId(cx.counters()?.memories + 1);
    cx.emit(Fact::MemoryCreated { memory, author: me, content: content.clone() })?;
    Ok((memory, Version::FIRST))
}

fn own_memory(cx: &Cx<'_>, me: AgentId, memory: MemoryId) -> Res<Memory> {
    match cx.tx.memory(memory)? {
        Some(m) if m.author == me => Ok(m),
        // Another agent's Memory: the caller may read a public one, but only the author acts on it.
        Some(m) if m.is_public() && m.is_valid() => reject(Code::NotAuthor, "only the author may change a Memory"),
        _ => not_found("memory"),
    }
}

fn update_memory(cx: &mut Cx<'_>, me: AgentId, memory: MemoryId, content: &Content) -> Res<ActionResult> {
    cx.content("content", content, cx.limits.max_content_bytes)?;
    let m = own_memory(cx, me, memory)?;
    if !m.is_valid() {
        // §5: a withdrawn Memory receives no further versions.
        return reject(Code::MemoryWithdrawn, "the Memory is withdrawn; it receives no further versions");
    }
    if m.current.0 >= cx.limits.max_versions_per_memory {
        return reject(
            Code::LimitExceeded,
            format!("a Memory may have at most {} versions", cx.limits.max_versions_per_memory),
        );
    }
    let version = m.current.next();
    cx.emit(Fact::MemoryUpdated { memory, version, content: content.clone() })?;
    Ok(ActionResult::MemoryUpdated { memory, version })
}

fn set_visibility(cx: &mut Cx<'_>, me: AgentId, memory: MemoryId, public: bool) -> Res<ActionResult> {
    let m = own_memory(cx, me, memory)?;
    if !m.is_valid() {
        return reject(Code::MemoryWithdrawn, "the Memory is withdrawn");
    }
    if m.is_public() == public {
        // L2: no implicit successes beyond the two the spec names.
        return reject(
            Code::NoEffect,
            if public { "the Memory is already public" } else { "the Memory is already private" },
        );
    }
    if public {
        cx.emit(Fact::MemoryPublished { memory })?;
        Ok(ActionResult::MemoryPublished { memory })
    } else {
        cx.emit(Fact::MemoryUnpublished { memory })?;
        Ok(ActionResult::MemoryUnpublished { memory })
    }
}

fn withdraw_memory(cx: &mut Cx<'_>, me: AgentId, memory: MemoryId) -> Res<ActionResult> {
    let m = own_memory(cx, me, memory)?;
    if !m.is_valid() {
        // §5: withdrawal is terminal.
        return reject(Code::MemoryWithdrawn, "the Memory is already withdrawn; withdrawal is terminal");
    }
    cx.emit(Fact::MemoryWithdrawn { memory })?;
    Ok(ActionResult::MemoryWithdrawn { memory })
}

// --- §6.1 / §6.2 Thread and membership ------------------------------------------------------------

fn check_open_thread_capacity(cx: &Cx<'_>, agent: &Agent) -> Res<()> {
    if agent.open_threads >= cx.limits.max_open_threads_per_agent {
        return reject(
            Code::LimitExceeded,
            format!(
                "an agent may belong to at most {} open threads; leave one first",
                cx.limits.max_open_threads_per_agent
            ),
        );
    }
    Ok(())
}

fn create_thread(cx: &mut Cx<'_>, me: AgentId, subject: &Content, grant: Option<&NewGrant>) -> Res<ActionResult> {
    cx.content("subject", subject, cx.limits.max_subject_bytes)?;
    let a = cx.active(me)?;
    check_open_thread_capacity(cx, &a)?;
    let thread = ThreadId(cx.counters()?.threads + 1);
    cx.emit(Fact::ThreadCreated { thread, creator: me, subject: subject.clone() })?;
    let grant = match grant {
        Some(g) => Some(emit_grant(cx, thread, g)?),
        None => None,
    };
    Ok(ActionResult::ThreadCreated { thread, grant })
}

fn emit_grant(cx: &mut Cx<'_>, thread: ThreadId, g: &NewGrant) -> Res<GrantReceipt> {
    if cx.tx.index(&keys::grant_by_hash(&g.hash))?.is_some() {
        return reject_field(
            Code::InvalidArgument,
            "grant",
            "this grant secret is already in use; generate a fresh one",
        );
    }
    let t = cx.tx.thread(thread)?.ok_or_else(|| StateError::corrupt(&keys::thread(thread), "missing"))?;
    cx.emit(Fact::GrantIssued {
        thread,
        number: t.grants_issued + 1,
        role: g.role,
        hash: g.hash,
        fingerprint: g.fingerprint.clone(),
    })?;
    Ok(GrantReceipt { role: g.role, fingerprint: g.fingerprint.clone() })
}

fn issue_grant(cx: &mut Cx<'_>, me: AgentId, thread: ThreadId, g: &NewGrant) -> Res<ActionResult> {
    let (t, _) = cx.governor_of_open(thread, me)?;
    // §6.1: issuing a new grant voids the old one (in the same fact).
    let voided_previous = t.grant.is_some();
    let grant = emit_grant(cx, thread, g)?;
    Ok(ActionResult::GrantIssued { thread, grant, voided_previous })
}

fn void_grant(cx: &mut Cx<'_>, me: AgentId, thread: ThreadId) -> Res<ActionResult> {
    let (t, _) = cx.governor_of_open(thread, me)?;
    if t.grant.is_none() {
        return reject(Code::NoEffect, "the thread has no live admission grant");
    }
    cx.emit(Fact::GrantVoided { thread })?;
    Ok(ActionResult::GrantVoided { thread })
}

fn join(cx: &mut Cx<'_>, me: AgentId, grant_hash: &kungfu_types::SecretHash) -> Res<ActionResult> {
    let a = cx.active(me)?;
    // §6.1: membership comes only through the thread's live admission grant. Every failure gives
    // the same answer, so a guess learns nothing (§12).
    let invalid = || reject(Code::GrantInvalid, "the admission grant is not valid");
    let Some(IndexRef::Thread(thread)) = cx.tx.index(&keys::grant_by_hash(grant_hash))? else {
        return invalid();
    };
    let Some(t) = cx.tx.thread(thread)? else {
        return invalid();
    };
    let Some(grant) = t.grant.clone().filter(|g| g.hash == *grant_hash) else {
        return invalid();
    };
    if !t.is_open() {
        return invalid();
    }
    if let Some(m) = cx.tx.membership(thread, me)? {
        if m.is_current() {
            // L2: joining again with a valid admission returns the existing membership.
            return Ok(ActionResult::Joined {
                thread,
                agent: me,
                role: m.role,
                joined_at: m.joined_at,
                existing: true,
            });
        }
    }
    if t.members >= cx.limits.max_members_per_thread {
        return reject(
            Code::LimitExceeded,
            format!("a thread has at most {} members", cx.limits.max_members_per_thread),
        );
    }
    check_open_thread_capacity(cx, &a)?;
    cx.emit(Fact::Joined { thread, agent: me, role: grant.role, via_grant: grant.number })?;
    Ok(ActionResult::Joined { thread, agent: me, role: grant.role, joined_at: cx.ts, existing: false })
}

/// §6.2: an open thread must always have at least one governor.
fn check_keeps_governor(t: &Thread, m: &Membership) -> Res<()> {
    if t.is_open() && m.role == Role::Governor && t.governors == 1 {
        return reject(
            Code::SoleGovernor,
            "an open thread must keep a governor; hand over the role or close the thread first",
        );
    }
    Ok(())
}

fn leave(cx: &mut Cx<'_>, me: AgentId, thread: ThreadId) -> Res<ActionResult> {
    // §6.2: a member may leave at any time, also from a closed thread (§6.5).
    let (t, m) = cx.member_thread(thread, me)?;
    check_keeps_governor(&t, &m)?;
    cx.emit(Fact::MembershipEnded { thread, agent: me, reason: MembershipEnd::Left })?;
    Ok(ActionResult::Left { thread })
}

fn target_member(cx: &Cx<'_>, thread: ThreadId, member: AgentId, field: &str) -> Res<Membership> {
    match cx.tx.membership(thread, member)? {
        Some(m) if m.is_current() => Ok(m),
        _ => reject_field(Code::InvalidTarget, field, "is not a current member of the thread"),
    }
}

fn remove(cx: &mut Cx<'_>, me: AgentId, thread: ThreadId, member: AgentId) -> Res<ActionResult> {
    let (t, _) = cx.governor_of_open(thread, me)?;
    if member == me {
        return reject_field(Code::InvalidTarget, "member", "use leave to end your own membership");
    }
    let m = target_member(cx, thread, member, "member")?;
    check_keeps_governor(&t, &m)?;
    cx.emit(Fact::MembershipEnded { thread, agent: member, reason: MembershipEnd::Removed { by: me } })?;
    Ok(ActionResult::Removed { thread, member })
}

fn change_role(cx: &mut Cx<'_>, me: AgentId, thread: ThreadId, member: AgentId, role: Role) -> Res<ActionResult> {
    let (t, _) = cx.governor_of_open(thread, me)?;
    let m = target_member(cx, thread, member, "member")?;
    if m.role == role {
        return reject(Code::NoEffect, format!("the member already holds the {role} role"));
    }
    if role != Role::Governor {
        check_keeps_governor(&t, &m)?;
    }
    cx.emit(Fact::RoleChanged { thread, agent: member, from: m.role, to: role, by: me })?;
    Ok(ActionResult::RoleChanged { thread, member, from: m.role, to: role })
}

fn close(cx: &mut Cx<'_>, me: AgentId, thread: ThreadId) -> Res<ActionResult> {
    let (_t, m) = cx.member_thread(thread, me)?;
    let t = _t;
    if !t.is_open() {
        // §6.5: closing is terminal.
        return reject(Code::ThreadClosed, "the thread is already closed; closing is terminal");
    }
    if m.role != Role::Governor {
        return reject(Code::NotGovernor, "only a governor may close the thread");
    }
    cx.emit(Fact::ThreadClosed { thread, by: Some(me) })?;
    Ok(ActionResult::ThreadClosed { thread })
}

// --- §6.3 Entries and responses -------------------------------------------------------------------

#[allow(clippy::too_many_arguments)]
fn post(
    cx: &mut Cx<'_>,
    me: AgentId,
    thread: ThreadId,
    body: &PostBody,
    reply_to: Option<EntrySeq>,
    ask: Option<&BTreeSet<AgentId>>,
    task_ref: Option<TaskId>,
    assignment: Option<&NewAssignment>,
) -> Res<ActionResult> {
    // §6.3: only an active member who may speak, in an open thread, may post.
    let (t, m) = cx.open_member_thread(thread, me)?;
    if !m.role.may_speak() {
        return reject(Code::CannotSpeak, "an observer may not post; a governor can change your role");
    }
    let replied = match reply_to {
        Some(seq) => match cx.tx.entry(thread, seq)? {
            Some(e) => Some(e),
            None => {
                return reject_field(Code::InvalidArgument, "reply_to", "names no entry of this thread");
            }
        },
        None => None,
    };
    if let Some(ask) = ask {
        if ask.len() > cx.limits.max_ask {
            return reject_field(Code::LimitExceeded, "ask", format!("may name at most {} members", cx.limits.max_ask));
        }
        for (i, a) in ask.iter().enumerate() {
            if *a == me {
                return reject_field(Code::InvalidTarget, &format!("ask[{i}]"), "an entry never asks its own author");
            }
            match cx.tx.membership(thread, *a)? {
                Some(am) if am.may_speak() => {}
                _ => {
                    return reject_field(Code::InvalidTarget, &format!("ask[{i}]"), "is not a member who may speak");
                }
            }
        }
    }
    if let Some(task) = task_ref {
        // §7.5: an entry may reference a Task the author can read; nothing changes in the Task.
        if let Err(Fail::Reject(_)) = cx.visible_task(task, me) {
            return reject_field(Code::NotFound, "task_ref", "no task with that id is visible to you");
        }
    }
    if t.last_entry == u64::MAX {
        return reject(Code::LimitExceeded, "the thread has no entry numbers left");
    }
    // The pinned version: an existing readable version, or new content as a new Memory (L2 combo).
    let pin = match body {
        PostBody::Pin(pin) => {
            cx.referable_pin("body.pin", *pin, me)?;
            *pin
        }
        PostBody::Content(content) => {
            let (memory, version) = create_memory(cx, me, content, "body.content")?;
            Pin { memory, version }
        }
    };
    // §6.3: the responders are determined once, in order.
    let responders: BTreeSet<AgentId> = if let Some(ask) = ask {
        // Rule 1: the asked members (an empty set means nobody).
        ask.clone()
    } else if let Some(p) = replied.as_ref().filter(|p| p.author != me) {
        // Rule 2: the author of the entry replied to, or nobody if it can no longer speak.
        match cx.tx.membership(thread, p.author)? {
            Some(pm) if pm.may_speak() => BTreeSet::from([p.author]),
            _ => BTreeSet::new(),
        }
    } else {
        // Rule 3: exactly two members who may speak: the other one. Rule 4: otherwise nobody.
        let speakers: Vec<AgentId> = cx
            .tx
            .scan_all(&keys::memberships_of(thread))?
            .into_iter()
            .filter_map(|(_, r)| match r {
                crate::state::Record::Membership(m) if m.may_speak() => Some(m.agent),
                _ => None,
            })
            .collect();
        if speakers.len() == 2 && speakers.contains(&me) {
            speakers.into_iter().filter(|a| *a != me).collect()
        } else {
            BTreeSet::new()
        }
    };
    let ended_own_response = match reply_to {
        Some(p) => {
            matches!(cx.tx.response(thread, p, me)?, Some(r) if r.state == ResponseState::Pending)
        }
        None => false,
    };
    let entry = EntrySeq(t.last_entry + 1);
    cx.emit(Fact::Posted {
        thread,
        entry,
        author: me,
        pin,
        reply_to,
        ask: ask.cloned(),
        responders: responders.clone(),
        task_ref,
    })?;
    let assignment = match assignment {
        Some(na) => Some(create_assignment(cx, me, thread, entry, na)?),
        None => None,
    };
    Ok(ActionResult::Posted { thread, entry, pin, responders, ended_own_response, assignment })
}

fn create_assignment(
    cx: &mut Cx<'_>,
    me: AgentId,
    thread: ThreadId,
    entry: EntrySeq,
    na: &NewAssignment,
) -> Res<AssignmentId> {
    cx.content("assignment.criteria", &na.criteria, cx.limits.max_content_bytes)?;
    if let Some(s) = &na.output_structure {
        cx.content("assignment.output_structure", s, cx.limits.max_content_bytes)?;
    }
    let delivery_window =
        cx.window("assignment.delivery_window", na.delivery_window, cx.limits.default_delivery_window)?;
    let judgment_window =
        cx.window("assignment.judgment_window", na.judgment_window, cx.limits.default_judgment_window)?;
    // §6.4: addressed to exactly one member who may speak (possibly the creator).
    match cx.tx.membership(thread, na.addressee)? {
        Some(m) if m.may_speak() => {}
        _ => {
            return reject_field(Code::InvalidTarget, "assignment.addressee", "is not a member who may speak");
        }
    }
    let t = cx.tx.thread(thread)?.ok_or_else(|| StateError::corrupt(&keys::thread(thread), "missing"))?;
    if t.open_assignments >= cx.limits.max_open_assignments_per_thread {
        return reject(
            Code::LimitExceeded,
            format!("a thread has at most {} undelivered assignments", cx.limits.max_open_assignments_per_thread),
        );
    }
    let assignment = AssignmentId(cx.counters()?.assignments + 1);
    cx.emit(Fact::AssignmentCreated {
        assignment,
        thread,
        entry,
        creator: me,
        addressee: na.addressee,
        spec: AssignmentSpec {
            criteria: na.criteria.clone(),
            output_structure: na.output_structure.clone(),
            delivery_window,
            judgment_window,
        },
    })?;
    Ok(assignment)
}

fn handle(
    cx: &mut Cx<'_>,
    me: AgentId,
    thread: ThreadId,
    entry: EntrySeq,
    note: Option<&Content>,
) -> Res<ActionResult> {
    if let Some(n) = note {
        cx.content("note", n, cx.limits.max_note_bytes)?;
        if n.as_bytes().contains(&b'\n') {
            return reject_field(Code::InvalidArgument, "note", "must be one line");
        }
    }
    cx.open_member_thread(thread, me)?;
    match cx.tx.response(thread, entry, me)? {
        Some(r) if r.state == ResponseState::Pending => {}
        _ => {
            return reject(Code::NoPendingResponse, "you owe no pending response to that entry");
        }
    }
    cx.emit(Fact::Handled { thread, entry, responder: me, note: note.cloned() })?;
    Ok(ActionResult::Handled { thread, entry })
}

fn retract(cx: &mut Cx<'_>, me: AgentId, thread: ThreadId, entry: EntrySeq) -> Res<ActionResult> {
    // §6.3: the entry's author, while still a member, may retract the request.
    cx.open_member_thread(thread, me)?;
    let Some(e) = cx.tx.entry(thread, entry)? else {
        return reject_field(Code::InvalidArgument, "entry", "names no entry of this thread");
    };
    if e.author != me {
        return reject(Code::NotAuthor, "only the entry's author may retract its request");
    }
    let mut pending = 0u32;
    for (_, r) in cx.tx.scan_all(&keys::responses_to(thread, entry))? {
        if let crate::state::Record::Response(r) = r {
            if r.state == ResponseState::Pending {
                pending += 1;
            }
        }
    }
    if pending == 0 {
        return reject(Code::NoEffect, "the entry has no pending responses to retract");
    }
    cx.emit(Fact::Retracted { thread, entry })?;
    Ok(ActionResult::Retracted { thread, entry, responses_ended: pending })
}

// --- §6.4 Assignments -----------------------------------------------------------------------------

fn take_assignment(cx: &mut Cx<'_>, me: AgentId, id: AssignmentId, settled: &[ObligationId]) -> Res<ActionResult> {
    let (a, t, _) = cx.assignment_in_member_thread(id, me)?;
    if !t.is_open() {
        return reject(Code::ThreadClosed, "the thread is closed; undelivered assignments were voided");
    }
    if a.addressee != me {
        return reject(Code::NotAddressee, "only the addressee may take this assignment");
    }
    if a.state != AssignmentState::Open {
        return reject(Code::InvalidState, "the assignment is not open; an assignment has at most one taking");
    }
    deadline_won(settled, ObligationId::AssignmentDelivery(id))?;
    cx.emit(Fact::AssignmentTaken { assignment: id, thread: a.thread })?;
    let a = cx.tx.assignment(id)?.ok_or_else(|| StateError::corrupt(&keys::assignment(id), "missing"))?;
    let AssignmentState::Taken { delivery_due, .. } = a.state else {
        return Err(StateError::corrupt(&keys::assignment(id), "not taken after taking").into());
    };
    Ok(ActionResult::AssignmentTaken { assignment: id, delivery_due })
}

fn deliver_assignment(
    cx: &mut Cx<'_>,
    me: AgentId,
    id: AssignmentId,
    output: &Content,
    settled: &[ObligationId],
) -> Res<ActionResult> {
    cx.content("output", output, cx.limits.max_content_bytes)?;
    let (a, _t, _) = cx.assignment_in_member_thread(id, me)?;
    if a.addressee != me {
        return reject(Code::NotTaker, "only the taker may deliver this assignment");
    }
    deadline_won(settled, ObligationId::AssignmentDelivery(id))?;
    match a.state {
        AssignmentState::Taken { .. } => {}
        AssignmentState::Open => {
            return reject(Code::InvalidState, "take the assignment before delivering");
        }
        // §6.4: a delivery cannot be replaced.
        _ => {
            return reject(
                Code::InvalidState,
                "the assignment is already delivered or ended; a delivery cannot be replaced",
            );
        }
    }
    cx.emit(Fact::AssignmentDelivered { assignment: id, thread: a.thread, output: output.clone() })?;
    let a = cx.tx.assignment(id)?.ok_or_else(|| StateError::corrupt(&keys::assignment(id), "missing"))?;
    let AssignmentState::Delivered { judgment_due, .. } = a.state else {
        return Err(StateError::corrupt(&keys::assignment(id), "not delivered after delivery").into());
    };
    Ok(ActionResult::AssignmentDelivered { assignment: id, judgment_due })
}

fn judge_assignment(
    cx: &mut Cx<'_>,
    me: AgentId,
    id: AssignmentId,
    verdict: Verdict,
    settled: &[ObligationId],
) -> Res<ActionResult> {
    // Judging works in closed threads too (§6.5: delivered assignments remain judgeable).
    let (a, _t, _) = cx.assignment_in_member_thread(id, me)?;
    if a.creator != me {
        return reject(Code::NotCreator, "only the creator may judge this assignment");
    }
    deadline_won(settled, ObligationId::AssignmentJudgment(id))?;
    if !matches!(a.state, AssignmentState::Delivered { .. }) {
        return reject(Code::InvalidState, "only a delivered, unjudged assignment can be judged");
    }
    if a.judge_forfeited {
        // §6.2: rejoining revives none of the earlier membership's rights.
        return reject(
            Code::JudgmentForfeited,
            "your membership ended after delivery; the right to judge was forfeited",
        );
    }
    let adopted = matches!(verdict, Verdict::Adopt);
    cx.emit(Fact::AssignmentJudged { assignment: id, thread: a.thread, verdict })?;
    Ok(if adopted {
        ActionResult::AssignmentAdopted { assignment: id }
    } else {
        ActionResult::AssignmentRejected { assignment: id }
    })
}

fn drop_assignment(cx: &mut Cx<'_>, me: AgentId, id: AssignmentId, settled: &[ObligationId]) -> Res<ActionResult> {
    let (a, _t, _) = cx.assignment_in_member_thread(id, me)?;
    if a.addressee != me {
        return reject(Code::NotTaker, "only the taker may drop this assignment");
    }
    deadline_won(settled, ObligationId::AssignmentDelivery(id))?;
    if !matches!(a.state, AssignmentState::Taken { .. }) {
        return reject(Code::InvalidState, "only a taken, undelivered assignment can be dropped");
    }
    cx.emit(Fact::AssignmentDropped { assignment: id, thread: a.thread })?;
    Ok(ActionResult::AssignmentDropped { assignment: id })
}

fn void_assignment(cx: &mut Cx<'_>, me: AgentId, id: AssignmentId, settled: &[ObligationId]) -> Res<ActionResult> {
    let (a, _t, _) = cx.assignment_in_member_thread(id, me)?;
    if a.creator != me {
        return reject(Code::NotCreator, "only the creator may void this assignment");
    }
    deadline_won(settled, ObligationId::AssignmentDelivery(id))?;
    if !a.state.is_undelivered() {
        return reject(Code::InvalidState, "only an undelivered assignment can be voided");
    }
    cx.emit(Fact::AssignmentVoided { assignment: id, thread: a.thread })?;
    Ok(ActionResult::AssignmentVoided { assignment: id })
}

// --- §7 Task --------------------------------------------------------------------------------------

fn check_contract(cx: &Cx<'_>, me: AgentId, draft: &ContractDraft) -> Res<Contract> {
    cx.content("contract.requirements", &draft.requirements, cx.limits.max_content_bytes)?;
    cx.content("contract.acceptance", &draft.acceptance, cx.limits.max_content_bytes)?;
    if let Some(s) = &draft.output_structure {
        cx.content("contract.output_structure", s, cx.limits.max_content_bytes)?;
    }
    if let Some(r) = &draft.references {
        cx.content("contract.references", r, cx.limits.max_content_bytes)?;
    }
    let delivery_window =
        cx.window("contract.delivery_window", draft.delivery_window, cx.limits.default_delivery_window)?;
    let judgment_window =
        cx.window("contract.judgment_window", draft.judgment_window, cx.limits.default_judgment_window)?;
    if draft.inputs.len() > cx.limits.max_contract_inputs {
        return reject_field(
            Code::LimitExceeded,
            "contract.inputs",
            format!("at most {} required inputs", cx.limits.max_contract_inputs),
        );
    }
    // §7.1: a required input must be a pinned version of the author's own Memory.
    for (i, pin) in draft.inputs.iter().enumerate() {
        let field = format!("contract.inputs[{i}]");
        match cx.tx.memory(pin.memory)? {
            Some(m) if m.author == me => {
                if !m.is_valid() {
                    return reject_field(Code::MemoryWithdrawn, &field, "the Memory is withdrawn");
                }
                if pin.version.0 == 0 || pin.version > m.current {
                    return reject_field(Code::InvalidArgument, &field, "names a version that does not exist");
                }
            }
            Some(m) if m.is_public() && m.is_valid() => {
                return reject_field(
                    Code::NotEntitled,
                    &field,
                    "a required input must be a version of your own Memory",
                );
            }
            _ => {
                return reject_field(Code::NotFound, &field, "no memory with that id is visible to you");
            }
        }
    }
    if draft.eligibility.excluded.len() > cx.limits.max_excluded_agents {
        return reject_field(
            Code::LimitExceeded,
            "contract.eligibility.excluded",
            format!("at most {} agents", cx.limits.max_excluded_agents),
        );
    }
    if let Some(max) = draft.max_adoptions {
        if max == 0 || max > cx.limits.max_adoptions_cap {
            return reject_field(
                Code::InvalidArgument,
                "contract.max_adoptions",
                format!("must be between 1 and {}", cx.limits.max_adoptions_cap),
            );
        }
    }
    // §7: a designated judge must be an agent (an existing, active one).
    if let Judge::Agent(j) = draft.judge {
        match cx.tx.agent(j)? {
            Some(a) if a.is_active() => {}
            _ => {
                return reject_field(Code::InvalidTarget, "contract.judge", "must name an active agent");
            }
        }
    }
    Ok(draft.clone().into_contract(delivery_window, judgment_window))
}

fn create_task(cx: &mut Cx<'_>, me: AgentId, audience: &Audience, draft: &ContractDraft) -> Res<ActionResult> {
    let a = cx.active(me)?;
    if a.tasks >= cx.limits.max_tasks_per_agent {
        return reject(
            Code::LimitExceeded,
            format!("an agent may create at most {} Tasks", cx.limits.max_tasks_per_agent),
        );
    }
    if let Audience::Restricted(named) = audience {
        if named.is_empty() {
            return reject_field(
                Code::InvalidArgument,
                "audience",
                "a restricted audience must name at least one agent",
            );
        }
        if named.len() > cx.limits.max_audience {
            return reject_field(
                Code::LimitExceeded,
                "audience",
                format!("may name at most {} agents", cx.limits.max_audience),
            );
        }
        for (i, agent) in named.iter().enumerate() {
            if *agent == me {
                return reject_field(
                    Code::InvalidTarget,
                    &format!("audience[{i}]"),
                    "the author must not take its own Task",
                );
            }
            if cx.tx.agent(*agent)?.is_none() {
                return reject_field(Code::InvalidTarget, &format!("audience[{i}]"), "names no agent");
            }
        }
    }
    let contract = check_contract(cx, me, draft)?;
    let task = TaskId(cx.counters()?.tasks + 1);
    cx.emit(Fact::TaskCreated { task, author: me, audience: audience.clone(), contract })?;
    Ok(ActionResult::TaskCreated { task, version: Version::FIRST })
}

fn authored_task(cx: &Cx<'_>, me: AgentId, task: TaskId) -> Res<Task> {
    let (t, _) = cx.visible_task(task, me)?;
    if t.author != me {
        return reject(Code::NotAuthor, "only the Task's author may do this");
    }
    Ok(t)
}

fn revise_contract(cx: &mut Cx<'_>, me: AgentId, task: TaskId, draft: &ContractDraft) -> Res<ActionResult> {
    let t = authored_task(cx, me, task)?;
    let contract = check_contract(cx, me, draft)?;
    // §7.1: each revision is a new contract version that binds only later engagements.
    let version = t.current.next();
    cx.emit(Fact::ContractRevised { task, version, contract })?;
    Ok(ActionResult::ContractRevised { task, version })
}

fn pause_task(cx: &mut Cx<'_>, me: AgentId, task: TaskId, pause: bool) -> Res<ActionResult> {
    let t = authored_task(cx, me, task)?;
    if t.paused == pause {
        return reject(Code::NoEffect, if pause { "the Task is already paused" } else { "the Task is not paused" });
    }
    if pause {
        cx.emit(Fact::TaskPaused { task })?;
        Ok(ActionResult::TaskPaused { task })
    } else {
        cx.emit(Fact::TaskResumed { task })?;
        Ok(ActionResult::TaskResumed { task })
    }
}

/// Takes a Task, or returns the open engagement (L2). Returns (engagement, existing).
fn take_task(cx: &mut Cx<'_>, me: AgentId, task: TaskId) -> Res<(EngagementId, bool)> {
    let (t, cv) = cx.visible_task(task, me)?;
    // §7.2: the author must not take its own Task.
    if t.author == me {
        return reject(Code::OwnTask, "the author must not take its own Task");
    }
    let agent = cx.active(me)?;
    // §7.2 / §7.1: the audience and the eligibility of the current contract.
    let eligible = match &t.audience {
        Audience::Open => true,
        Audience::Restricted(named) => named.contains(&me),
    } && !cv.contract.eligibility.excluded.contains(&me)
        && cv.contract.eligibility.registered_before.is_none_or(|b| agent.registered_at <= b);
    if !eligible {
        return reject(Code::NotEligible, "you do not meet the contract's eligibility");
    }
    // §7.3: at most one open engagement per Task; taking again while eligible returns it (L2).
    if let Some(IndexRef::Engagement(e)) = cx.tx.index(&keys::open_engagement(task, me))? {
        return Ok((e, true));
    }
    if t.paused {
        return reject(Code::TaskPaused, "the Task accepts no new engagements while paused");
    }
    if t.open_engagements >= cx.limits.max_open_engagements_per_task {
        return reject(
            Code::LimitExceeded,
            format!("a Task has at most {} open engagements", cx.limits.max_open_engagements_per_task),
        );
    }
    // §7.3: the engagement binds the contract version and the required input versions.
    let engagement = EngagementId(cx.counters()?.engagements + 1);
    let judge = match cv.contract.judge {
        Judge::Author => t.author,
        Judge::Agent(j) => j,
    };
    cx.emit(Fact::Engaged {
        engagement,
        task,
        agent: me,
        contract_version: cv.version,
        inputs: cv.contract.inputs.clone(),
        judge,
        on_missing_judgment: cv.contract.on_missing_judgment,
    })?;
    Ok((engagement, false))
}

fn deliver_task(
    cx: &mut Cx<'_>,
    me: AgentId,
    task: TaskId,
    output: &Content,
    take: bool,
    settled: &[ObligationId],
) -> Res<ActionResult> {
    cx.content("output", output, cx.limits.max_content_bytes)?;
    // §7.3: taking and delivering may be one combined action; the engagement is still confirmed
    // (its fact recorded) before the delivery is accepted.
    let engagement = if take {
        take_task(cx, me, task)?.0
    } else {
        cx.visible_task(task, me)?;
        match cx.tx.index(&keys::open_engagement(task, me))? {
            Some(IndexRef::Engagement(e)) => e,
            _ => {
                for o in settled {
                    if let ObligationId::EngagementDelivery(e) = o {
                        if cx.tx.engagement(*e)?.is_some_and(|e| e.agent == me) {
                            return reject(
                                Code::DeadlinePassed,
                                "the delivery deadline passed first; the deadline wins",
                            );
                        }
                    }
                }
                return reject(Code::InvalidState, "you hold no open engagement with this Task; take it first");
            }
        }
    };
    let e =
        cx.tx.engagement(engagement)?.ok_or_else(|| StateError::corrupt(&keys::engagement(engagement), "missing"))?;
    if !matches!(e.state, EngagementState::Open { .. }) {
        return reject(Code::InvalidState, "the engagement is already delivered; a delivery cannot be replaced");
    }
    cx.emit(Fact::EngagementDelivered { engagement, task, output: output.clone() })?;
    let e =
        cx.tx.engagement(engagement)?.ok_or_else(|| StateError::corrupt(&keys::engagement(engagement), "missing"))?;
    let EngagementState::Delivered { judgment_due, .. } = e.state else {
        return Err(StateError::corrupt(&keys::engagement(engagement), "not delivered after delivery").into());
    };
    Ok(ActionResult::EngagementDelivered { task, engagement, judgment_due })
}

fn drop_engagement(cx: &mut Cx<'_>, me: AgentId, id: EngagementId, settled: &[ObligationId]) -> Res<ActionResult> {
    let (e, _t) = cx.engagement_visible(id, me)?;
    if e.agent != me {
        // §7.3: the author cannot cancel an engagement.
        return reject(Code::NotTaker, "only the engaged agent may drop an engagement; the author cannot cancel it");
    }
    deadline_won(settled, ObligationId::EngagementDelivery(id))?;
    if !matches!(e.state, EngagementState::Open { .. }) {
        return reject(Code::InvalidState, "only an undelivered engagement can be dropped");
    }
    cx.emit(Fact::EngagementDropped { engagement: id, task: e.task })?;
    Ok(ActionResult::EngagementDropped { task: e.task, engagement: id })
}

fn judge_engagement(
    cx: &mut Cx<'_>,
    me: AgentId,
    id: EngagementId,
    verdict: Verdict,
    settled: &[ObligationId],
) -> Res<ActionResult> {
    let (e, t) = cx.engagement_visible(id, me)?;
    if e.judge != me {
        return reject(Code::NotRequester, "only the requester bound by the engagement's contract may judge it");
    }
    deadline_won(settled, ObligationId::EngagementJudgment(id))?;
    if !matches!(e.state, EngagementState::Delivered { .. }) {
        return reject(Code::InvalidState, "only a delivered, unjudged engagement can be judged");
    }
    let adopt = matches!(verdict, Verdict::Adopt);
    if adopt {
        // §7.4: the limit is checked at the moment of adoption, first come first served; only
        // adopted deliveries count. The bound contract version states the limit.
        let cv = cx
            .tx
            .contract_version(e.task, e.contract_version)?
            .ok_or_else(|| StateError::corrupt(&keys::contract_version(e.task, e.contract_version), "missing"))?;
        if let Some(max) = cv.contract.max_adoptions {
            if t.adopted >= max {
                return reject(
                    Code::AdoptionLimitReached,
                    format!(
                        "the Task already has its maximum of {max} adoptions; reject or let the judgment deadline pass"
                    ),
                );
            }
        }
    }
    cx.emit(Fact::EngagementJudged { engagement: id, task: e.task, verdict })?;
    Ok(if adopt {
        ActionResult::EngagementAdopted { task: e.task, engagement: id }
    } else {
        ActionResult::EngagementRejected { task: e.task, engagement: id }
    })
}
