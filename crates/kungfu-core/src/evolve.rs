//! The only code that changes records: it folds one fact into the state (L1). The live apply and a
//! rebuild from the journals run exactly this function, so the state is a function of the facts.
//! Everything here is a consequence of the fact and the state before it; no rule is checked here
//! (that is `decide`'s job), but an impossible input is reported as corruption, never ignored.

use crate::fact::{ExpiryResult, Fact, JournaledFact, Verdict};
use crate::keys;
use crate::model::*;
use crate::state::{IndexRef, Record, StateError, StateExt, Tx};
use kungfu_types::{AgentId, ObjectRef, ThreadId, Timestamp};

/// Folds one journaled fact into the state and records it in the journal of every object it names.
pub fn evolve(tx: &mut Tx<'_>, jf: &JournaledFact) -> Result<(), StateError> {
    let at = jf.at;
    for object in jf.fact.objects() {
        tx.put(keys::journal(object, jf.seq, jf.idx), Record::Fact(jf.clone()));
    }
    let mut counters = tx.counters()?.unwrap_or_default();
    counters.seq = counters.seq.max(jf.seq);

    use Fact::*;
    match &jf.fact {
        AgentRegistered { agent, key_hash, key_fingerprint } => {
            counters.agents = counters.agents.max(agent.0);
            tx.put(
                keys::agent(*agent),
                Record::Agent(Agent {
                    id: *agent,
                    registered_at: at,
                    key_hash: *key_hash,
                    key_fingerprint: key_fingerprint.clone(),
                    state: AgentState::Active,
                    memories: 0,
                    tasks: 0,
                    open_threads: 0,
                }),
            );
            tx.put(keys::agent_by_key(key_hash), Record::Ref(IndexRef::Agent(*agent)));
        }
        AgentDeactivated { agent, memberships_ended, threads_closed } => {
            let mut a = need(tx.agent(*agent)?, "agent")?;
            a.state = AgentState::Deactivated { at };
            put_agent(tx, a);
            // §4: in one fact, memberships end with the effects of §6.2 ...
            for thread in memberships_ended {
                end_membership(tx, *thread, *agent, MembershipEnd::Deactivated, at)?;
            }
            // ... and open threads left with no governor close with the effects of §6.5.
            for thread in threads_closed {
                close_thread(tx, *thread, at)?;
            }
        }
        MemoryCreated { memory, author, content } => {
            counters.memories = counters.memories.max(memory.0);
            tx.put(
                keys::memory(*memory),
                Record::Memory(Memory {
                    id: *memory,
                    author: *author,
                    created_at: at,
                    current: kungfu_types::Version::FIRST,
                    // §5: "the Memory starts private".
                    visibility: Visibility::Private,
                    state: MemoryState::Valid,
                }),
            );
            tx.put(
                keys::memory_version(*memory, kungfu_types::Version::FIRST),
                Record::MemoryVersion(MemoryVersion {
                    memory: *memory,
                    version: kungfu_types::Version::FIRST,
                    created_at: at,
                    content: content.clone(),
                }),
            );
            let mut a = need(tx.agent(*author)?, "agent")?;
            a.memories += 1;
            put_agent(tx, a);
        }
        MemoryUpdated { memory, version, content } => {
            let mut m = need(tx.memory(*memory)?, "memory")?;
            m.current = *version;
            tx.put(
                keys::memory_version(*memory, *version),
                Record::MemoryVersion(MemoryVersion {
                    memory: *memory,
                    version: *version,
                    created_at: at,
                    content: content.clone(),
                }),
            );
            tx.put(keys::memory(*memory), Record::Memory(m));
        }
        MemoryPublished { memory } | MemoryUnpublished { memory } => {
            let mut m = need(tx.memory(*memory)?, "memory")?;
            m.visibility =
                if matches!(jf.fact, MemoryPublished { .. }) { Visibility::Public } else { Visibility::Private };
            tx.put(keys::memory(*memory), Record::Memory(m));
        }
        MemoryWithdrawn { memory } => {
            let mut m = need(tx.memory(*memory)?, "memory")?;
            m.state = MemoryState::Withdrawn { at };
            tx.put(keys::memory(*memory), Record::Memory(m));
        }
        ThreadCreated { thread, creator, subject } => {
            counters.threads = counters.threads.max(thread.0);
            tx.put(
                keys::thread(*thread),
                Record::Thread(Thread {
                    id: *thread,
                    creator: *creator,
                    created_at: at,
                    subject: subject.clone(),
                    state: ThreadState::Open,
                    grant: None,
                    grants_issued: 0,
                    last_entry: 0,
                    members: 0,
                    governors: 0,
                    open_assignments: 0,
                }),
            );
            // §6.1: the creator becomes its governor.
            add_membership(tx, *thread, *creator, kungfu_types::Role::Governor, 0, at)?;
        }
        GrantIssued { thread, number, role, hash, fingerprint } => {
            let mut t = need(tx.thread(*thread)?, "thread")?;
            // §6.1: issuing a new grant voids the old one.
            if let Some(old) = t.grant.take() {
                tx.delete(keys::grant_by_hash(&old.hash));
            }
            t.grant = Some(Grant {
                number: *number,
                role: *role,
                hash: *hash,
                fingerprint: fingerprint.clone(),
                issued_at: at,
            });
            t.grants_issued = *number;
            tx.put(keys::grant_by_hash(hash), Record::Ref(IndexRef::Thread(*thread)));
            put_thread(tx, t);
        }
        GrantVoided { thread } => {
            let mut t = need(tx.thread(*thread)?, "thread")?;
            if let Some(old) = t.grant.take() {
                tx.delete(keys::grant_by_hash(&old.hash));
            }
            put_thread(tx, t);
        }
        Joined { thread, agent, role, via_grant } => {
            add_membership(tx, *thread, *agent, *role, *via_grant, at)?;
        }
        MembershipEnded { thread, agent, reason } => {
            end_membership(tx, *thread, *agent, *reason, at)?;
        }
        RoleChanged { thread, agent, from, to, .. } => {
            let mut m = need(tx.membership(*thread, *agent)?, "membership")?;
            let mut t = need(tx.thread(*thread)?, "thread")?;
            if *from == kungfu_types::Role::Governor {
                t.governors -= 1;
            }
            if *to == kungfu_types::Role::Governor {
                t.governors += 1;
            }
            m.role = *to;
            tx.put(keys::membership(*thread, *agent), Record::Membership(m));
            put_thread(tx, t);
            // §6.2: demotion to observer ends the member's pending responses; assignments in
            // progress are not affected.
            if from.may_speak() && !to.may_speak() {
                end_responses_of(tx, *thread, *agent, ResponseEnd::Demoted, at)?;
            }
        }
        Posted { thread, entry, author, pin, reply_to, ask, responders, task_ref } => {
            let mut t = need(tx.thread(*thread)?, "thread")?;
            t.last_entry = entry.0;
            put_thread(tx, t);
            tx.put(
                keys::entry(*thread, *entry),
                Record::Entry(Entry {
                    thread: *thread,
                    seq: *entry,
                    author: *author,
                    posted_at: at,
                    pin: *pin,
                    reply_to: *reply_to,
                    ask: ask.clone(),
                    responders: responders.clone(),
                    task_ref: *task_ref,
                    assignment: None,
                }),
            );
            // §6.3: replying to p ends the replier's own pending response to p in the same action.
            if let Some(p) = reply_to {
                if let Some(r) = tx.response(*thread, *p, *author)? {
                    if r.state == ResponseState::Pending {
                        end_response(tx, r, ResponseEnd::Replied { by_entry: *entry }, at)?;
                    }
                }
            }
            // §6.3: each responder owes a response to the entry.
            for responder in responders {
                tx.put(
                    keys::response(*thread, *entry, *responder),
                    Record::Response(Response {
                        thread: *thread,
                        entry: *entry,
                        responder: *responder,
                        arose_at: at,
                        state: ResponseState::Pending,
                    }),
                );
                open_obligation(
                    tx,
                    Obligation {
                        id: ObligationId::Response { thread: *thread, entry: *entry, responder: *responder },
                        holder: *responder,
                        object: ObjectRef::Thread(*thread),
                        arose_at: at,
                        due_at: None,
                    },
                );
            }
        }
        Handled { thread, entry, responder, note } => {
            let r = need(tx.response(*thread, *entry, *responder)?, "response")?;
            end_response(tx, r, ResponseEnd::Handled { note: note.clone() }, at)?;
        }
        Retracted { thread, entry } => {
            // §6.3: retraction ends all pending responses the entry created; given ones stay.
            for (_, rec) in tx.scan_all(&keys::responses_to(*thread, *entry))? {
                if let Record::Response(r) = rec {
                    if r.state == ResponseState::Pending {
                        end_response(tx, r, ResponseEnd::Retracted, at)?;
                    }
                }
            }
        }
        ThreadClosed { thread, .. } => close_thread(tx, *thread, at)?,
        AssignmentCreated { assignment, thread, entry, creator, addressee, spec } => {
            counters.assignments = counters.assignments.max(assignment.0);
            tx.put(
                keys::assignment(*assignment),
                Record::Assignment(Assignment {
                    id: *assignment,
                    thread: *thread,
                    entry: *entry,
                    creator: *creator,
                    addressee: *addressee,
                    created_at: at,
                    spec: spec.clone(),
                    state: AssignmentState::Open,
                    judge_forfeited: false,
                }),
            );
            let mut e = need(tx.entry(*thread, *entry)?, "entry")?;
            e.assignment = Some(*assignment);
            tx.put(keys::entry(*thread, *entry), Record::Entry(e));
            let mut t = need(tx.thread(*thread)?, "thread")?;
            t.open_assignments += 1;
            put_thread(tx, t);
            tx.put(keys::thread_assignment(*thread, *assignment), Record::Ref(IndexRef::Assignment(*assignment)));
            tx.put(
                keys::live_assignment(*thread, *creator, *assignment),
                Record::Ref(IndexRef::Assignment(*assignment)),
            );
            tx.put(
                keys::live_assignment(*thread, *addressee, *assignment),
                Record::Ref(IndexRef::Assignment(*assignment)),
            );
            // §8: an untaken assignment is an opportunity of its addressee, not an obligation.
            tx.put(
                keys::opportunity(*addressee, at, OpportunityId::Assignment(*assignment)),
                Record::Ref(IndexRef::Opportunity(OpportunityId::Assignment(*assignment))),
            );
        }
        AssignmentTaken { assignment, .. } => {
            let mut a = need(tx.assignment(*assignment)?, "assignment")?;
            // §6.4: the delivery deadline runs from taking.
            let delivery_due = at.plus(a.spec.delivery_window);
            tx.delete(keys::opportunity(a.addressee, a.created_at, OpportunityId::Assignment(a.id)));
            a.state = AssignmentState::Taken { at, delivery_due };
            let id = ObligationId::AssignmentDelivery(a.id);
            open_obligation(
                tx,
                Obligation {
                    id,
                    holder: a.addressee,
                    object: ObjectRef::Thread(a.thread),
                    arose_at: at,
                    due_at: Some(delivery_due),
                },
            );
            put_due(tx, ObjectRef::Thread(a.thread), delivery_due, id);
            put_assignment(tx, a);
        }
        AssignmentDelivered { assignment, output, .. } => {
            let mut a = need(tx.assignment(*assignment)?, "assignment")?;
            let AssignmentState::Taken { at: taken_at, delivery_due } = a.state else {
                return Err(corrupt_state("assignment", a.id.0, "delivered while not taken"));
            };
            close_obligation(tx, ObligationId::AssignmentDelivery(a.id))?;
            delete_due(tx, ObjectRef::Thread(a.thread), delivery_due, ObligationId::AssignmentDelivery(a.id));
            unlink_live_assignment(tx, &a)?;
            // §6.4: the judgment deadline runs from accepted delivery.
            let judgment_due = at.plus(a.spec.judgment_window);
            a.state = AssignmentState::Delivered { taken_at, at, judgment_due, output: output.clone() };
            let id = ObligationId::AssignmentJudgment(a.id);
            open_obligation(
                tx,
                Obligation {
                    id,
                    holder: a.creator,
                    object: ObjectRef::Thread(a.thread),
                    arose_at: at,
                    due_at: Some(judgment_due),
                },
            );
            put_due(tx, ObjectRef::Thread(a.thread), judgment_due, id);
            put_assignment(tx, a);
        }
        AssignmentJudged { assignment, verdict, .. } => {
            let mut a = need(tx.assignment(*assignment)?, "assignment")?;
            let AssignmentState::Delivered { judgment_due, output, .. } = a.state.clone() else {
                return Err(corrupt_state("assignment", a.id.0, "judged while not delivered"));
            };
            close_obligation(tx, ObligationId::AssignmentJudgment(a.id))?;
            delete_due(tx, ObjectRef::Thread(a.thread), judgment_due, ObligationId::AssignmentJudgment(a.id));
            let outcome = match verdict {
                Verdict::Adopt => AssignmentOutcome::Adopted,
                Verdict::Reject { reason } => AssignmentOutcome::Rejected { reason: reason.clone() },
            };
            a.state = AssignmentState::Ended { at, outcome, delivered: Some(output) };
            put_assignment(tx, a);
        }
        AssignmentDropped { assignment, .. } => {
            let a = need(tx.assignment(*assignment)?, "assignment")?;
            end_undelivered_assignment(tx, a, AssignmentOutcome::Dropped, at)?;
        }
        AssignmentVoided { assignment, .. } => {
            let a = need(tx.assignment(*assignment)?, "assignment")?;
            end_undelivered_assignment(tx, a, AssignmentOutcome::Voided, at)?;
        }
        TaskCreated { task, author, audience, contract } => {
            counters.tasks = counters.tasks.max(task.0);
            tx.put(
                keys::task(*task),
                Record::Task(Task {
                    id: *task,
                    author: *author,
                    created_at: at,
                    audience: audience.clone(),
                    current: kungfu_types::Version::FIRST,
                    paused: false,
                    adopted: 0,
                    open_engagements: 0,
                }),
            );
            tx.put(
                keys::contract_version(*task, kungfu_types::Version::FIRST),
                Record::ContractVersion(ContractVersion {
                    task: *task,
                    version: kungfu_types::Version::FIRST,
                    created_at: at,
                    contract: contract.clone(),
                }),
            );
            let mut a = need(tx.agent(*author)?, "agent")?;
            a.tasks += 1;
            put_agent(tx, a);
            // §8: a restricted Task naming an agent is an opportunity of that agent.
            if let Audience::Restricted(named) = audience {
                for agent in named {
                    tx.put(
                        keys::opportunity(*agent, at, OpportunityId::Task(*task)),
                        Record::Ref(IndexRef::Opportunity(OpportunityId::Task(*task))),
                    );
                }
            }
        }
        ContractRevised { task, version, contract } => {
            let mut t = need(tx.task(*task)?, "task")?;
            t.current = *version;
            tx.put(
                keys::contract_version(*task, *version),
                Record::ContractVersion(ContractVersion {
                    task: *task,
                    version: *version,
                    created_at: at,
                    contract: contract.clone(),
                }),
            );
            put_task(tx, t);
        }
        TaskPaused { task } | TaskResumed { task } => {
            let mut t = need(tx.task(*task)?, "task")?;
            t.paused = matches!(jf.fact, TaskPaused { .. });
            put_task(tx, t);
        }
        Engaged { engagement, task, agent, contract_version, inputs, judge, on_missing_judgment } => {
            counters.engagements = counters.engagements.max(engagement.0);
            let cv = need(tx.contract_version(*task, *contract_version)?, "contract version")?;
            // §7.3: the delivery deadline starts with the engagement.
            let delivery_due = at.plus(cv.contract.delivery_window);
            tx.put(
                keys::engagement(*engagement),
                Record::Engagement(Engagement {
                    id: *engagement,
                    task: *task,
                    agent: *agent,
                    contract_version: *contract_version,
                    inputs: inputs.clone(),
                    judge: *judge,
                    on_missing_judgment: *on_missing_judgment,
                    judgment_window: cv.contract.judgment_window,
                    taken_at: at,
                    state: EngagementState::Open { delivery_due },
                }),
            );
            let mut t = need(tx.task(*task)?, "task")?;
            t.open_engagements += 1;
            put_task(tx, t);
            tx.put(keys::open_engagement(*task, *agent), Record::Ref(IndexRef::Engagement(*engagement)));
            tx.put(keys::task_engagement(*task, *engagement), Record::Ref(IndexRef::Engagement(*engagement)));
            tx.put(keys::agent_engagement(*agent, *engagement), Record::Ref(IndexRef::Engagement(*engagement)));
            let id = ObligationId::EngagementDelivery(*engagement);
            open_obligation(
                tx,
                Obligation {
                    id,
                    holder: *agent,
                    object: ObjectRef::Task(*task),
                    arose_at: at,
                    due_at: Some(delivery_due),
                },
            );
            put_due(tx, ObjectRef::Task(*task), delivery_due, id);
        }
        EngagementDelivered { engagement, output, .. } => {
            let mut e = need(tx.engagement(*engagement)?, "engagement")?;
            let EngagementState::Open { delivery_due } = e.state else {
                return Err(corrupt_state("engagement", e.id.0, "delivered while not open"));
            };
            close_obligation(tx, ObligationId::EngagementDelivery(e.id))?;
            delete_due(tx, ObjectRef::Task(e.task), delivery_due, ObligationId::EngagementDelivery(e.id));
            let judgment_due = at.plus(e.judgment_window);
            e.state = EngagementState::Delivered { at, judgment_due, output: output.clone() };
            let id = ObligationId::EngagementJudgment(e.id);
            open_obligation(
                tx,
                Obligation {
                    id,
                    holder: e.judge,
                    object: ObjectRef::Task(e.task),
                    arose_at: at,
                    due_at: Some(judgment_due),
                },
            );
            put_due(tx, ObjectRef::Task(e.task), judgment_due, id);
            put_engagement(tx, e);
        }
        EngagementJudged { engagement, verdict, .. } => {
            let e = need(tx.engagement(*engagement)?, "engagement")?;
            let outcome = match verdict {
                Verdict::Adopt => EngagementOutcome::Adopted,
                Verdict::Reject { reason } => EngagementOutcome::Rejected { reason: reason.clone() },
            };
            end_delivered_engagement(tx, e, outcome, at)?;
        }
        EngagementDropped { engagement, .. } => {
            let mut e = need(tx.engagement(*engagement)?, "engagement")?;
            let EngagementState::Open { delivery_due } = e.state else {
                return Err(corrupt_state("engagement", e.id.0, "dropped while not open"));
            };
            close_obligation(tx, ObligationId::EngagementDelivery(e.id))?;
            delete_due(tx, ObjectRef::Task(e.task), delivery_due, ObligationId::EngagementDelivery(e.id));
            e.state = EngagementState::Ended { at, outcome: EngagementOutcome::Dropped, delivered: None };
            finish_engagement(tx, &e)?;
            put_engagement(tx, e);
        }
        DeadlinePassed { obligation, due_at, result, .. } => match *obligation {
            ObligationId::AssignmentDelivery(id) => {
                let a = need(tx.assignment(id)?, "assignment")?;
                end_undelivered_assignment(tx, a, AssignmentOutcome::TimedOut, at)?;
            }
            ObligationId::AssignmentJudgment(id) => {
                let mut a = need(tx.assignment(id)?, "assignment")?;
                let AssignmentState::Delivered { output, .. } = a.state.clone() else {
                    return Err(corrupt_state("assignment", id.0, "judgment deadline while not delivered"));
                };
                // The obligation is already gone if the creator forfeited judgment (§6.2).
                close_obligation(tx, *obligation)?;
                delete_due(tx, ObjectRef::Thread(a.thread), *due_at, *obligation);
                a.state = AssignmentState::Ended { at, outcome: AssignmentOutcome::Undecided, delivered: Some(output) };
                put_assignment(tx, a);
            }
            ObligationId::EngagementDelivery(id) => {
                let mut e = need(tx.engagement(id)?, "engagement")?;
                close_obligation(tx, *obligation)?;
                delete_due(tx, ObjectRef::Task(e.task), *due_at, *obligation);
                e.state = EngagementState::Ended { at, outcome: EngagementOutcome::TimedOut, delivered: None };
                finish_engagement(tx, &e)?;
                put_engagement(tx, e);
            }
            ObligationId::EngagementJudgment(id) => {
                let e = need(tx.engagement(id)?, "engagement")?;
                let outcome = match result {
                    ExpiryResult::Adopted => EngagementOutcome::Adopted,
                    _ => EngagementOutcome::Undecided,
                };
                end_delivered_engagement(tx, e, outcome, at)?;
            }
            ObligationId::Response { .. } => {
                return Err(StateError::corrupt(&keys::obligation(*obligation), "a response has no deadline"));
            }
        },
    }
    tx.put(keys::counters(), Record::Counters(counters));
    Ok(())
}

// --- helpers -----------------------------------------------------------------------------------

fn need<T>(v: Option<T>, what: &str) -> Result<T, StateError> {
    v.ok_or_else(|| StateError::Corrupt {
        key: String::new(),
        what: format!("a fact names a {what} that does not exist"),
    })
}

fn corrupt_state(what: &str, id: u64, msg: &str) -> StateError {
    StateError::Corrupt { key: format!("{what} {id}"), what: msg.to_string() }
}

fn put_agent(tx: &mut Tx<'_>, a: Agent) {
    tx.put(keys::agent(a.id), Record::Agent(a));
}
fn put_thread(tx: &mut Tx<'_>, t: Thread) {
    tx.put(keys::thread(t.id), Record::Thread(t));
}
fn put_assignment(tx: &mut Tx<'_>, a: Assignment) {
    tx.put(keys::assignment(a.id), Record::Assignment(a));
}
fn put_task(tx: &mut Tx<'_>, t: Task) {
    tx.put(keys::task(t.id), Record::Task(t));
}
fn put_engagement(tx: &mut Tx<'_>, e: Engagement) {
    tx.put(keys::engagement(e.id), Record::Engagement(e));
}

fn put_due(tx: &mut Tx<'_>, object: ObjectRef, due_at: Timestamp, id: ObligationId) {
    tx.put(keys::due(due_at, id), Record::Ref(IndexRef::Obligation(id)));
    tx.put(keys::object_due(object, due_at, id), Record::Ref(IndexRef::Obligation(id)));
}

fn delete_due(tx: &mut Tx<'_>, object: ObjectRef, due_at: Timestamp, id: ObligationId) {
    tx.delete(keys::due(due_at, id));
    tx.delete(keys::object_due(object, due_at, id));
}

fn open_obligation(tx: &mut Tx<'_>, o: Obligation) {
    tx.put(keys::turn(o.holder, o.arose_at, o.id), Record::Ref(IndexRef::Obligation(o.id)));
    tx.put(keys::object_obligation(o.object, o.holder, o.id), Record::Ref(IndexRef::Obligation(o.id)));
    tx.put(keys::obligation(o.id), Record::Obligation(o));
}

/// Removes an open obligation from the turn of its holder. A missing one is fine: a forfeited
/// judgment has already left the turn while its deadline still runs.
fn close_obligation(tx: &mut Tx<'_>, id: ObligationId) -> Result<(), StateError> {
    if let Some(o) = tx.obligation(id)? {
        tx.delete(keys::turn(o.holder, o.arose_at, id));
        tx.delete(keys::object_obligation(o.object, o.holder, id));
        tx.delete(keys::obligation(id));
    }
    Ok(())
}

fn end_response(tx: &mut Tx<'_>, mut r: Response, how: ResponseEnd, at: Timestamp) -> Result<(), StateError> {
    close_obligation(tx, ObligationId::Response { thread: r.thread, entry: r.entry, responder: r.responder })?;
    r.state = ResponseState::Ended { at, how };
    tx.put(keys::response(r.thread, r.entry, r.responder), Record::Response(r));
    Ok(())
}

/// Ends every pending response `agent` owes in `thread`.
fn end_responses_of(
    tx: &mut Tx<'_>,
    thread: ThreadId,
    agent: AgentId,
    how: ResponseEnd,
    at: Timestamp,
) -> Result<(), StateError> {
    for (_, r) in tx.index_refs(&keys::object_obligations_of(ObjectRef::Thread(thread), agent), usize::MAX)? {
        if let IndexRef::Obligation(ObligationId::Response { thread, entry, responder }) = r {
            let resp = need(tx.response(thread, entry, responder)?, "response")?;
            end_response(tx, resp, how.clone(), at)?;
        }
    }
    Ok(())
}

fn add_membership(
    tx: &mut Tx<'_>,
    thread: ThreadId,
    agent: AgentId,
    role: kungfu_types::Role,
    via_grant: u32,
    at: Timestamp,
) -> Result<(), StateError> {
    let generation = tx.membership(thread, agent)?.map(|m| m.generation).unwrap_or(0) + 1;
    tx.put(
        keys::membership(thread, agent),
        Record::Membership(Membership {
            thread,
            agent,
            role,
            via_grant,
            joined_at: at,
            generation,
            state: MembershipState::Current,
        }),
    );
    let mut t = need(tx.thread(thread)?, "thread")?;
    t.members += 1;
    if role == kungfu_types::Role::Governor {
        t.governors += 1;
    }
    let open = t.is_open();
    put_thread(tx, t);
    tx.put(keys::agent_thread(agent, thread), Record::Ref(IndexRef::Thread(thread)));
    if open {
        let mut a = need(tx.agent(agent)?, "agent")?;
        a.open_threads += 1;
        put_agent(tx, a);
    }
    Ok(())
}

/// §6.2: the effects of a membership ending, all in the fact that ends it.
fn end_membership(
    tx: &mut Tx<'_>,
    thread: ThreadId,
    agent: AgentId,
    reason: MembershipEnd,
    at: Timestamp,
) -> Result<(), StateError> {
    let mut m = need(tx.membership(thread, agent)?, "membership")?;
    let mut t = need(tx.thread(thread)?, "thread")?;
    t.members -= 1;
    if m.role == kungfu_types::Role::Governor {
        t.governors -= 1;
    }
    let open = t.is_open();
    put_thread(tx, t);
    m.state = MembershipState::Ended { at, reason };
    tx.put(keys::membership(thread, agent), Record::Membership(m));
    tx.delete(keys::agent_thread(agent, thread));
    if open {
        let mut a = need(tx.agent(agent)?, "agent")?;
        a.open_threads -= 1;
        put_agent(tx, a);
    }
    // The member's pending responses end, and for assignments it created that are already
    // delivered, its right to judge is forfeited: they settle as undecided at their deadline.
    for (_, r) in tx.index_refs(&keys::object_obligations_of(ObjectRef::Thread(thread), agent), usize::MAX)? {
        match r {
            IndexRef::Obligation(ObligationId::Response { thread, entry, responder }) => {
                let resp = need(tx.response(thread, entry, responder)?, "response")?;
                end_response(tx, resp, ResponseEnd::MembershipEnded, at)?;
            }
            IndexRef::Obligation(id @ ObligationId::AssignmentJudgment(a)) => {
                close_obligation(tx, id)?;
                let mut asg = need(tx.assignment(a)?, "assignment")?;
                asg.judge_forfeited = true;
                put_assignment(tx, asg);
            }
            // Delivery obligations belong to undelivered assignments, voided just below.
            _ => {}
        }
    }
    // Assignments it took (or that are addressed to it) and has not delivered are voided;
    // assignments it created and that are not yet delivered are voided.
    for (_, r) in tx.index_refs(&keys::live_assignments_of(thread, agent), usize::MAX)? {
        if let IndexRef::Assignment(a) = r {
            let asg = need(tx.assignment(a)?, "assignment")?;
            end_undelivered_assignment(tx, asg, AssignmentOutcome::Voided, at)?;
        }
    }
    Ok(())
}

/// §6.5: the effects of closing, all in the closing fact.
fn close_thread(tx: &mut Tx<'_>, thread: ThreadId, at: Timestamp) -> Result<(), StateError> {
    let mut t = need(tx.thread(thread)?, "thread")?;
    if !t.is_open() {
        return Ok(());
    }
    t.state = ThreadState::Closed { at };
    // Admission is voided.
    if let Some(old) = t.grant.take() {
        tx.delete(keys::grant_by_hash(&old.hash));
    }
    put_thread(tx, t);
    // Memberships remain; they no longer count as open threads of their holders.
    for (_, rec) in tx.scan_all(&keys::memberships_of(thread))? {
        if let Record::Membership(m) = rec {
            if m.is_current() {
                let mut a = need(tx.agent(m.agent)?, "agent")?;
                a.open_threads -= 1;
                put_agent(tx, a);
            }
        }
    }
    // All pending responses end.
    for (_, r) in tx.index_refs(&keys::object_obligations(ObjectRef::Thread(thread)), usize::MAX)? {
        if let IndexRef::Obligation(ObligationId::Response { thread, entry, responder }) = r {
            let resp = need(tx.response(thread, entry, responder)?, "response")?;
            end_response(tx, resp, ResponseEnd::ThreadClosed, at)?;
        }
    }
    // Undelivered assignments are voided; delivered ones keep their judgment deadlines.
    for (_, r) in tx.index_refs(&keys::live_assignments(thread), usize::MAX)? {
        if let IndexRef::Assignment(a) = r {
            let asg = need(tx.assignment(a)?, "assignment")?;
            if asg.state.is_undelivered() {
                end_undelivered_assignment(tx, asg, AssignmentOutcome::Voided, at)?;
            }
        }
    }
    Ok(())
}

fn unlink_live_assignment(tx: &mut Tx<'_>, a: &Assignment) -> Result<(), StateError> {
    tx.delete(keys::live_assignment(a.thread, a.creator, a.id));
    tx.delete(keys::live_assignment(a.thread, a.addressee, a.id));
    let mut t = need(tx.thread(a.thread)?, "thread")?;
    t.open_assignments -= 1;
    put_thread(tx, t);
    Ok(())
}

/// Ends an open or taken assignment (dropped, voided or timed out).
fn end_undelivered_assignment(
    tx: &mut Tx<'_>,
    mut a: Assignment,
    outcome: AssignmentOutcome,
    at: Timestamp,
) -> Result<(), StateError> {
    match a.state {
        AssignmentState::Open => {
            tx.delete(keys::opportunity(a.addressee, a.created_at, OpportunityId::Assignment(a.id)));
        }
        AssignmentState::Taken { delivery_due, .. } => {
            let id = ObligationId::AssignmentDelivery(a.id);
            close_obligation(tx, id)?;
            delete_due(tx, ObjectRef::Thread(a.thread), delivery_due, id);
        }
        _ => {
            return Err(corrupt_state("assignment", a.id.0, "ended as undelivered after delivery"));
        }
    }
    unlink_live_assignment(tx, &a)?;
    a.state = AssignmentState::Ended { at, outcome, delivered: None };
    put_assignment(tx, a);
    Ok(())
}

fn end_delivered_engagement(
    tx: &mut Tx<'_>,
    mut e: Engagement,
    outcome: EngagementOutcome,
    at: Timestamp,
) -> Result<(), StateError> {
    let EngagementState::Delivered { judgment_due, output, .. } = e.state.clone() else {
        return Err(corrupt_state("engagement", e.id.0, "judged while not delivered"));
    };
    let id = ObligationId::EngagementJudgment(e.id);
    close_obligation(tx, id)?;
    delete_due(tx, ObjectRef::Task(e.task), judgment_due, id);
    if outcome == EngagementOutcome::Adopted {
        let mut t = need(tx.task(e.task)?, "task")?;
        t.adopted += 1;
        put_task(tx, t);
    }
    e.state = EngagementState::Ended { at, outcome, delivered: Some(output) };
    finish_engagement(tx, &e)?;
    put_engagement(tx, e);
    Ok(())
}

/// An engagement reached a terminal state: the agent no longer holds an open engagement.
fn finish_engagement(tx: &mut Tx<'_>, e: &Engagement) -> Result<(), StateError> {
    tx.delete(keys::open_engagement(e.task, e.agent));
    let mut t = need(tx.task(e.task)?, "task")?;
    t.open_engagements -= 1;
    put_task(tx, t);
    Ok(())
}
