//! The only code that changes records: it folds one fact into the state (L1). The live apply and a
//! rebuild from the journals run exactly this function, so the state is a function of the facts.
//! Everything here is a consequence of the fact and the state before it; no rule is checked here
//! (that is `decide`'s job), but an impossible input is reported as corruption, never ignored.
//!
//! [`evolve`] dispatches each fact to its one function in the file of its spec section, as `decide`
//! is laid out: `agent` (§4), `memory` (§5), `threads` (§6.1–§6.3, §6.5), `assignments` (§6.4) and
//! `tasks` (§7), and `coord` for the coordination layer (labels, collectives; design §2, §4);
//! deadlines passing (L4) go to the section of the obligation's object. This module
//! keeps the record and index helpers every section shares.

mod agent;
mod assignments;
mod coord;
mod memory;
mod tasks;
mod threads;
mod wake;

use crate::fact::{ExpiryResult, Fact, JournaledFact};
use crate::keys;
use crate::model::*;
use crate::state::{IndexRef, Record, StateError, StateExt, StateRead, Tx};
use kungfu_types::{ObjectRef, Timestamp};

/// Folds one journaled fact into the state and records it in the journal of every object it names.
pub fn evolve(tx: &mut Tx<'_>, jf: &JournaledFact) -> Result<(), StateError> {
    let at = jf.at;
    for object in jf.fact.objects() {
        tx.put(keys::journal(object, jf.seq, jf.idx), Record::Fact(jf.clone()));
    }
    let mut counters = tx.counters()?.unwrap_or_default();
    counters.seq = counters.seq.max(jf.seq);
    let c = &mut counters;

    use Fact::*;
    match &jf.fact {
        AgentRegistered { agent, key_hash, key_fingerprint } => {
            agent::agent_registered(tx, c, *agent, key_hash, key_fingerprint, at)?
        }
        AgentDeactivated { agent, memberships_ended, threads_closed } => {
            agent::agent_deactivated(tx, *agent, memberships_ended, threads_closed, at)?
        }
        MemoryCreated { memory, author, content } => memory::memory_created(tx, c, *memory, *author, content, at)?,
        MemoryUpdated { memory, version, content } => memory::memory_updated(tx, *memory, *version, content, at)?,
        MemoryPublished { memory } => memory::memory_visibility_set(tx, *memory, Visibility::Public)?,
        MemoryUnpublished { memory } => memory::memory_visibility_set(tx, *memory, Visibility::Private)?,
        MemoryWithdrawn { memory } => memory::memory_withdrawn(tx, *memory, at)?,
        ThreadCreated { thread, creator, subject } => threads::thread_created(tx, c, *thread, *creator, subject, at)?,
        GrantIssued { thread, number, role, hash, fingerprint } => {
            threads::grant_issued(tx, *thread, *number, *role, hash, fingerprint, at)?
        }
        GrantVoided { thread } => threads::grant_voided(tx, *thread)?,
        Joined { thread, agent, role, via_grant } => {
            threads::add_membership(tx, *thread, *agent, *role, *via_grant, at)?
        }
        MembershipEnded { thread, agent, reason } => threads::end_membership(tx, *thread, *agent, *reason, at)?,
        RoleChanged { thread, agent, from, to, .. } => threads::role_changed(tx, *thread, *agent, *from, *to, at)?,
        Posted { thread, entry, author, pin, reply_to, ask, responders, task_ref } => {
            threads::posted(tx, *thread, *entry, *author, *pin, *reply_to, ask.as_ref(), responders, *task_ref, at)?
        }
        Handled { thread, entry, responder, note } => {
            threads::handled(tx, *thread, *entry, *responder, note.as_ref(), at)?
        }
        Retracted { thread, entry } => threads::retracted(tx, *thread, *entry, at)?,
        ThreadClosed { thread, .. } => threads::close_thread(tx, *thread, at)?,
        AssignmentCreated { assignment, thread, entry, creator, addressee, spec } => {
            assignments::assignment_created(tx, c, *assignment, *thread, *entry, *creator, *addressee, spec, at)?
        }
        AssignmentTaken { assignment, .. } => assignments::assignment_taken(tx, *assignment, at)?,
        AssignmentDelivered { assignment, output, .. } => {
            assignments::assignment_delivered(tx, *assignment, output, at)?
        }
        AssignmentJudged { assignment, verdict, .. } => assignments::assignment_judged(tx, *assignment, verdict, at)?,
        AssignmentDropped { assignment, .. } => {
            assignments::assignment_ended_undelivered(tx, *assignment, AssignmentOutcome::Dropped, at)?
        }
        AssignmentVoided { assignment, .. } => {
            assignments::assignment_ended_undelivered(tx, *assignment, AssignmentOutcome::Voided, at)?
        }
        TaskCreated { task, author, audience, contract } => {
            tasks::task_created(tx, c, *task, *author, audience, contract, at)?
        }
        ContractRevised { task, version, contract } => tasks::contract_revised(tx, *task, *version, contract, at)?,
        TaskPaused { task } => tasks::task_paused(tx, *task, true)?,
        TaskResumed { task } => tasks::task_paused(tx, *task, false)?,
        Engaged { engagement, task, agent, contract_version, inputs, judge, on_missing_judgment } => tasks::engaged(
            tx,
            c,
            *engagement,
            *task,
            *agent,
            *contract_version,
            inputs,
            *judge,
            *on_missing_judgment,
            at,
        )?,
        EngagementDelivered { engagement, output, .. } => tasks::engagement_delivered(tx, *engagement, output, at)?,
        EngagementJudged { engagement, verdict, .. } => tasks::engagement_judged(tx, *engagement, verdict, at)?,
        EngagementDropped { engagement, .. } => tasks::engagement_dropped(tx, *engagement, at)?,
        DeadlinePassed { obligation, due_at, result, .. } => deadline_passed(tx, *obligation, *due_at, *result, at)?,
        VersionLabeled { memory, version, labels, widened_from } => {
            coord::version_labeled(tx, *memory, *version, *labels, *widened_from)?
        }
        Scattered { thread, header, ranks } => {
            let author = need(jf.actor, "scatter author")?;
            coord::scattered(tx, *thread, *header, author, ranks, at)?
        }
        RecordCreated { record, thread, entry, creator, scope, editors, title, state, body } => coord::record_created(
            tx,
            &coord::CreatedRecord {
                record: *record,
                thread: *thread,
                entry: *entry,
                creator: *creator,
                scope: *scope,
                editors: *editors,
                title,
                state,
                body,
            },
            at,
        )?,
        RecordPatched { record, thread, entry, base_rev, rev, ops, scope, taint } => {
            let actor = need(jf.actor, "patch author")?;
            coord::record_patched(
                tx,
                &coord::PatchedRecord {
                    record: *record,
                    thread: *thread,
                    entry: *entry,
                    base_rev: *base_rev,
                    rev: *rev,
                    ops,
                    scope: *scope,
                    taint: *taint,
                },
                actor,
                at,
            )?
        }
        WakeTargetSet { target, agent, url, secret, filter } => {
            wake::target_set(tx, &wake::NewTarget { target: *target, agent: *agent, url, secret: *secret, filter }, at)?
        }
        WakeTargetRemoved { target, agent } => wake::target_removed(tx, *agent, *target)?,
        WakeQueued { target, agent, event } => wake::queued(tx, *agent, *target, *event)?,
        WakeDelivered { target, agent, seq } => wake::delivered(tx, *agent, *target, *seq)?,
        WakeGaveUp { target, agent, failure } => wake::gave_up(tx, *agent, *target, failure)?,
    }
    tx.put(keys::counters(tx.group()), Record::Counters(counters));
    Ok(())
}

/// L4: a deadline ended an obligation, with the effects of its section.
fn deadline_passed(
    tx: &mut Tx<'_>,
    obligation: ObligationId,
    due_at: Timestamp,
    result: ExpiryResult,
    at: Timestamp,
) -> Result<(), StateError> {
    match obligation {
        ObligationId::AssignmentDelivery(id) => {
            assignments::assignment_ended_undelivered(tx, id, AssignmentOutcome::TimedOut, at)
        }
        ObligationId::AssignmentJudgment(id) => assignments::assignment_judgment_expired(tx, id, due_at, at),
        ObligationId::EngagementDelivery(id) => tasks::engagement_delivery_expired(tx, id, due_at, at),
        ObligationId::EngagementJudgment(id) => tasks::engagement_judgment_expired(tx, id, result, at),
        ObligationId::Response { .. } => {
            Err(StateError::corrupt(&keys::obligation(obligation), "a response has no deadline"))
        }
    }
}

// --- helpers shared by the sections -------------------------------------------------------------

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
