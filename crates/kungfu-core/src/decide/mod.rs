//! Deciding an action: every precondition of the spec is checked here against one state, and the
//! action's facts are emitted in order, or the whole action is rejected (L2). Facts are folded into
//! the overlay as they are emitted, so later steps of a combined action see earlier ones.
//!
//! This module holds what every action shares: the context [`Cx`], the reject helpers, which
//! deadlines an action settles first (L4), and [`decide`], which dispatches each action to its one
//! function in the file of its spec section: `agent` (§4), `memory` (§5), `threads` (§6.1–§6.3,
//! §6.5), `assignments` (§6.4), `tasks` (§7), `expire` (L4 deadlines and expiry) and `coord` (the
//! coordination layer: labels and the floor, messages, scatter; design §2–§4) and `record` (the
//! shared record, design §5).

mod agent;
mod assignments;
mod coord;
mod expire;
mod memory;
mod record;
mod tasks;
mod threads;
mod wake;

pub(crate) use expire::settle_due;

use crate::action::{Action, Command, Principal};
use crate::evolve::evolve;
use crate::fact::{Fact, JournaledFact};
use crate::keys;
use crate::limits::Limits;
use crate::model::*;
use crate::receipt::ActionResult;
use crate::state::{IndexRef, StateError, StateExt, StateRead, Tx, obligation_object};
use crate::visibility;
use kungfu_types::{
    AgentId, AssignmentId, Code, Content, EngagementId, Micros, ObjectRef, Rejection, Role, TaskId, ThreadId, Timestamp,
};

/// Why deciding stopped: a protocol rejection, or a state that could not be read.
#[derive(Debug)]
pub(crate) enum Fail {
    Reject(Rejection),
    State(StateError),
    /// A probe ([`crate::engine::precheck`]) reached the action's first fact: every refusal it
    /// could decide cheaply came before it. Not an outcome: apply never sees it.
    Probed,
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
    /// Stop at the first fact with [`Fail::Probed`] (the leader's pre-check, DESIGN §3).
    pub probe: bool,
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
        Cx { tx: Tx::new(base), ts, actor, seq, next_idx, facts: Vec::new(), limits, probe: false }
    }

    /// Records a fact: folds it into the overlay and journals it.
    pub fn emit(&mut self, fact: Fact) -> Res<()> {
        // DESIGN §3: the pre-check is an optimization, never the authority. A probe stops where
        // the action starts recording: the refusals before this point are exactly apply's (same
        // code, same state), and what follows (building the facts, records, indexes and the
        // receipt) apply does again in any case.
        if self.probe {
            return Err(Fail::Probed);
        }
        let jf = JournaledFact { seq: self.seq, idx: self.next_idx, at: self.ts, actor: self.actor, fact };
        self.next_idx += 1;
        evolve(&mut self.tx, &jf)?;
        self.facts.push(jf);
        Ok(())
    }

    fn counters(&self) -> Res<Counters> {
        Ok(self.tx.counters()?.unwrap_or_default())
    }

    /// The id after `last` (a counter of this group's [`Counters`]) in this group's partition
    /// (issue #19, deliverable 3: the id layout of `kungfu_types::group`). In group 0 it is
    /// `last + 1`, as it always was; a group that has spent its 2^48 - 1 ids of a kind refuses.
    fn next_id(&self, last: u64) -> Res<u64> {
        match kungfu_types::group::next_id(self.tx.group(), last) {
            Some(id) => Ok(id),
            None => reject(Code::LimitExceeded, "no ids of this kind are left in this group"),
        }
    }

    fn content(&self, field: &str, c: &Content, max: usize) -> Res<()> {
        if c.len() > max {
            return Err(Fail::Reject(
                Rejection::field(Code::LimitExceeded, field, format!("is {} bytes; the limit is {max}", c.len()))
                    // Design §2.8: a size limit is fak's OVERSIZE.
                    .with_fak(kungfu_types::FakReason::Oversize),
            ));
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
        match visibility::current_member(&self.tx, thread, agent)? {
            Some((t, m)) => Ok((t, m)),
            None => not_found("thread"),
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
        // Another agent's Memory is readable, and so referable, only at its current version.
        if pin.version.0 == 0
            || pin.version > m.current
            || visibility::readable_version(&m, agent, Some(pin.version)) != Some(pin.version)
        {
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
        if visibility::task_visible_to(&self.tx, &t, &cv, agent)? { Ok((t, cv)) } else { not_found("task") }
    }

    /// The engagement and its Task, if the agent may read the engagement (§9).
    fn engagement_visible(&self, id: EngagementId, agent: AgentId) -> Res<(Engagement, Task)> {
        let Some(e) = self.tx.engagement(id)? else {
            return not_found("engagement");
        };
        let Some(t) = self.tx.task(e.task)? else {
            return not_found("engagement");
        };
        if visibility::engagement_visible_to(&e, t.author, agent) { Ok((e, t)) } else { not_found("engagement") }
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
        | CloseThread { thread }
        // Design §10: the coordination writes on a thread are serialized by its actor (L5).
        | Send { thread, .. }
        | Scatter { thread, .. }
        | CreateRecord { thread, .. } => vec![ObjectRef::Thread(*thread)],
        // Design §5.6: a patch serializes on its record's thread (L5).
        PatchRecord { record, .. } => {
            state.shared_record(*record)?.map(|r| vec![ObjectRef::Thread(r.thread)]).unwrap_or_default()
        }
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
            .map(|(key, r)| match r {
                IndexRef::Thread(t) => Ok(ObjectRef::Thread(t)),
                _ => Err(StateError::corrupt(&key, "an agent's thread index names no thread")),
            })
            .collect::<Result<_, _>>()?,
        Expire { obligation, .. } => obligation_object(state, *obligation)?.into_iter().collect(),
        RegisterAgent { .. }
        | CreateMemory { .. }
        | UpdateMemory { .. }
        | PublishMemory { .. }
        | UnpublishMemory { .. }
        | WithdrawMemory { .. }
        | CreateThread { .. }
        | CreateTask { .. }
        | WriteLabeled { .. }
        | WidenScope { .. }
        | SetWakeTarget { .. }
        | RemoveWakeTarget { .. }
        | RecordWake { .. } => vec![],
    })
}

/// The one Thread or Task an action acts on, if it acts on exactly one: the server serializes
/// competing actions on that object through its actor (DESIGN §3). Actions on several objects
/// (deactivation) or on none (registration, Memories) return None.
pub fn actor_object(state: &dyn StateRead, action: &Action) -> Result<Option<ObjectRef>, StateError> {
    match action {
        Action::DeactivateAgent { .. } | Action::Expire { .. } | Action::RecordWake { .. } => Ok(None),
        other => {
            let mut targets = settle_targets(state, other)?;
            Ok(if targets.len() == 1 { targets.pop() } else { None })
        }
    }
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
        (Principal::System, Expire { .. } | RecordWake { .. }) => None,
        (Principal::Agent(a), DeactivateAgent { agent }) if a == *agent => None,
        (Principal::Agent(a), action)
            if !matches!(action, RegisterAgent { .. } | Expire { .. } | DeactivateAgent { .. } | RecordWake { .. }) =>
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
        RegisterAgent { key_hash, key_fingerprint } => agent::register(cx, *key_hash, key_fingerprint.clone()),
        DeactivateAgent { agent } => agent::deactivate(cx, *agent),
        CreateMemory { content } => memory::create_memory(cx, me()?, content),
        UpdateMemory { memory, content } => memory::update_memory(cx, me()?, *memory, content),
        PublishMemory { memory } => memory::set_visibility(cx, me()?, *memory, true),
        UnpublishMemory { memory } => memory::set_visibility(cx, me()?, *memory, false),
        WithdrawMemory { memory } => memory::withdraw_memory(cx, me()?, *memory),
        CreateThread { subject, grant } => threads::create_thread(cx, me()?, subject, grant.as_ref()),
        IssueGrant { thread, grant } => threads::issue_grant(cx, me()?, *thread, grant),
        VoidGrant { thread } => threads::void_grant(cx, me()?, *thread),
        Join { grant_hash } => threads::join(cx, me()?, grant_hash),
        Leave { thread } => threads::leave(cx, me()?, *thread),
        Remove { thread, member } => threads::remove(cx, me()?, *thread, *member),
        ChangeRole { thread, member, role } => threads::change_role(cx, me()?, *thread, *member, *role),
        Post { thread, body, reply_to, ask, task_ref, assignment } => {
            threads::post(cx, me()?, *thread, body, *reply_to, ask.as_ref(), *task_ref, assignment.as_ref())
        }
        Handle { thread, entry, note } => threads::handle(cx, me()?, *thread, *entry, note.as_ref()),
        Retract { thread, entry } => threads::retract(cx, me()?, *thread, *entry),
        CloseThread { thread } => threads::close(cx, me()?, *thread),
        TakeAssignment { assignment } => assignments::take_assignment(cx, me()?, *assignment, &settled),
        DeliverAssignment { assignment, output } => {
            assignments::deliver_assignment(cx, me()?, *assignment, output, &settled)
        }
        AdoptAssignment { assignment } => assignments::adopt_assignment(cx, me()?, *assignment, &settled),
        RejectAssignment { assignment, reason } => {
            assignments::reject_assignment(cx, me()?, *assignment, reason, &settled)
        }
        DropAssignment { assignment } => assignments::drop_assignment(cx, me()?, *assignment, &settled),
        VoidAssignment { assignment } => assignments::void_assignment(cx, me()?, *assignment, &settled),
        CreateTask { audience, contract } => tasks::create_task(cx, me()?, audience, contract),
        ReviseContract { task, contract } => tasks::revise_contract(cx, me()?, *task, contract),
        PauseTask { task } => tasks::pause_task(cx, me()?, *task, true),
        ResumeTask { task } => tasks::pause_task(cx, me()?, *task, false),
        TakeTask { task } => tasks::take_task(cx, me()?, *task),
        DeliverTask { task, output, take } => tasks::deliver_task(cx, me()?, *task, output, *take, &settled),
        DropEngagement { engagement } => tasks::drop_engagement(cx, me()?, *engagement, &settled),
        AdoptEngagement { engagement } => tasks::adopt_engagement(cx, me()?, *engagement, &settled),
        RejectEngagement { engagement, reason } => tasks::reject_engagement(cx, me()?, *engagement, reason, &settled),
        Expire { .. } => expire::expire(settled),
        WriteLabeled { memory, content, labels } => coord::write_labeled(cx, me()?, *memory, content, *labels),
        WidenScope { pin, scope } => coord::widen_scope(cx, me()?, *pin, *scope),
        Send { thread, body, to, reply_to, reply_to_latest } => {
            coord::send(cx, me()?, *thread, body, to, *reply_to, *reply_to_latest)
        }
        Scatter { thread, header, goals, criteria, output_structure, delivery_window, judgment_window } => {
            coord::scatter(
                cx,
                me()?,
                *thread,
                header,
                goals,
                &coord::ScatterSpec {
                    criteria,
                    output_structure: output_structure.as_ref(),
                    delivery_window: *delivery_window,
                    judgment_window: *judgment_window,
                },
            )
        }
        CreateRecord { thread, title, state, body, scope, editors, message, ask } => record::create_record(
            cx,
            me()?,
            &record::NewRecord {
                thread: *thread,
                title,
                state,
                body,
                scope: *scope,
                editors: *editors,
                message,
                ask: ask.as_ref(),
            },
        ),
        PatchRecord { record, base_rev, ops, message, ask } => {
            record::patch_record(cx, me()?, *record, *base_rev, ops, message, ask.as_ref())
        }
        SetWakeTarget { url, secret, filter } => wake::set_target(cx, me()?, url, *secret, filter),
        RemoveWakeTarget { target } => wake::remove_target(cx, me()?, *target),
        RecordWake { queued, delivered, gave_up } => wake::record(cx, queued, delivered, gave_up),
    }
}

/// When the action fails because the deadline ended the obligation first, say so (L4): whether
/// this command's own settling ended it (`settled`) or an expiry applied before it did.
fn deadline_won(cx: &Cx<'_>, settled: &[ObligationId], id: ObligationId) -> Res<()> {
    if settled.contains(&id) || expire::ended_by_deadline(cx, id)? {
        return reject(Code::DeadlinePassed, "the deadline passed before this action; the deadline wins");
    }
    Ok(())
}

/// The coordination layer's floor (design §2.3) for the content named by `field`: the base
/// protocol's actions (§5 publish, §6.1 post, §7 inputs) and the coordination layer's apply the
/// same rule, named by the wire field at fault.
fn floor_at(field: &str, labels: kungfu_types::Labels, context: crate::coord::floor::Context) -> Res<()> {
    crate::coord::floor::floor(labels, context).map_err(|r| {
        let mut named = Rejection::field(r.code, field, r.message);
        named.fak = r.fak;
        named.fak_shared = r.fak_shared;
        Fail::Reject(named)
    })
}
