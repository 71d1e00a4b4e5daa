//! §6.1–§6.3 and §6.5 Thread: the facts of creation and admission, members and roles, entries and
//! responses, and closing, with the cascades of a membership ending (§6.2) and of closing (§6.5).

use super::assignments::end_undelivered_assignment;
use super::{close_obligation, need, open_obligation, put_agent, put_assignment, put_thread};
use crate::keys;
use crate::model::*;
use crate::state::{IndexRef, Record, StateError, StateExt, Tx};
use kungfu_types::{AgentId, Content, EntrySeq, Fingerprint, ObjectRef, Role, SecretHash, TaskId, ThreadId, Timestamp};
use std::collections::BTreeSet;

/// §6.1: a new open thread, its creator its governor.
pub(super) fn thread_created(
    tx: &mut Tx<'_>,
    counters: &mut Counters,
    thread: ThreadId,
    creator: AgentId,
    subject: &Content,
    at: Timestamp,
) -> Result<(), StateError> {
    counters.threads = counters.threads.max(thread.0);
    tx.put(
        keys::thread(thread),
        Record::Thread(Thread {
            id: thread,
            creator,
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
    add_membership(tx, thread, creator, kungfu_types::Role::Governor, 0, at)?;
    Ok(())
}

/// §6.1: a new admission grant, voiding the old one.
pub(super) fn grant_issued(
    tx: &mut Tx<'_>,
    thread: ThreadId,
    number: u32,
    role: Role,
    hash: &SecretHash,
    fingerprint: &Fingerprint,
    at: Timestamp,
) -> Result<(), StateError> {
    let mut t = need(tx.thread(thread)?, "thread")?;
    // §6.1: issuing a new grant voids the old one.
    if let Some(old) = t.grant.take() {
        tx.delete(keys::grant_by_hash(&old.hash));
    }
    t.grant = Some(Grant { number, role, hash: *hash, fingerprint: fingerprint.clone(), issued_at: at });
    t.grants_issued = number;
    tx.put(keys::grant_by_hash(hash), Record::Ref(IndexRef::Thread(thread)));
    put_thread(tx, t);
    Ok(())
}

/// §6.1: the live admission grant voided.
pub(super) fn grant_voided(tx: &mut Tx<'_>, thread: ThreadId) -> Result<(), StateError> {
    let mut t = need(tx.thread(thread)?, "thread")?;
    if let Some(old) = t.grant.take() {
        tx.delete(keys::grant_by_hash(&old.hash));
    }
    put_thread(tx, t);
    Ok(())
}

/// §6.2: a member's role changed.
pub(super) fn role_changed(
    tx: &mut Tx<'_>,
    thread: ThreadId,
    agent: AgentId,
    from: Role,
    to: Role,
    at: Timestamp,
) -> Result<(), StateError> {
    let mut m = need(tx.membership(thread, agent)?, "membership")?;
    let mut t = need(tx.thread(thread)?, "thread")?;
    if from == kungfu_types::Role::Governor {
        t.governors -= 1;
    }
    if to == kungfu_types::Role::Governor {
        t.governors += 1;
    }
    m.role = to;
    tx.put(keys::membership(thread, agent), Record::Membership(m));
    put_thread(tx, t);
    // §6.2: demotion to observer ends the member's pending responses; assignments in
    // progress are not affected.
    if from.may_speak() && !to.may_speak() {
        end_responses_of(tx, thread, agent, ResponseEnd::Demoted, at)?;
    }
    Ok(())
}

/// §6.3: an entry posted, and the responses it is owed.
#[allow(clippy::too_many_arguments)]
pub(super) fn posted(
    tx: &mut Tx<'_>,
    thread: ThreadId,
    entry: EntrySeq,
    author: AgentId,
    pin: Pin,
    reply_to: Option<EntrySeq>,
    ask: Option<&BTreeSet<AgentId>>,
    responders: &BTreeSet<AgentId>,
    task_ref: Option<TaskId>,
    at: Timestamp,
) -> Result<(), StateError> {
    let mut t = need(tx.thread(thread)?, "thread")?;
    t.last_entry = entry.0;
    put_thread(tx, t);
    tx.put(
        keys::entry(thread, entry),
        Record::Entry(Entry {
            thread,
            seq: entry,
            author,
            posted_at: at,
            pin,
            reply_to,
            ask: ask.cloned(),
            responders: responders.clone(),
            task_ref,
            assignment: None,
        }),
    );
    // §6.3: replying to p ends the replier's own pending response to p in the same action.
    if let Some(p) = reply_to {
        if let Some(r) = tx.response(thread, p, author)? {
            if r.state == ResponseState::Pending {
                end_response(tx, r, ResponseEnd::Replied { by_entry: entry }, at)?;
            }
        }
    }
    // §6.3: each responder owes a response to the entry.
    for responder in responders {
        tx.put(
            keys::response(thread, entry, *responder),
            Record::Response(Response {
                thread,
                entry,
                responder: *responder,
                arose_at: at,
                state: ResponseState::Pending,
            }),
        );
        open_obligation(
            tx,
            Obligation {
                id: ObligationId::Response { thread, entry, responder: *responder },
                holder: *responder,
                object: ObjectRef::Thread(thread),
                arose_at: at,
                due_at: None,
            },
        );
    }
    Ok(())
}

/// §6.3: a pending response handled, with its note.
pub(super) fn handled(
    tx: &mut Tx<'_>,
    thread: ThreadId,
    entry: EntrySeq,
    responder: AgentId,
    note: Option<&Content>,
    at: Timestamp,
) -> Result<(), StateError> {
    let r = need(tx.response(thread, entry, responder)?, "response")?;
    end_response(tx, r, ResponseEnd::Handled { note: note.cloned() }, at)?;
    Ok(())
}

/// §6.3: an entry's request retracted.
pub(super) fn retracted(tx: &mut Tx<'_>, thread: ThreadId, entry: EntrySeq, at: Timestamp) -> Result<(), StateError> {
    // §6.3: retraction ends all pending responses the entry created; given ones stay.
    for (key, rec) in tx.scan_all(&keys::responses_to(thread, entry))? {
        let Record::Response(r) = rec else {
            return Err(StateError::corrupt(&key, "expected a response"));
        };
        if r.state == ResponseState::Pending {
            end_response(tx, r, ResponseEnd::Retracted, at)?;
        }
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
    for (key, r) in tx.index_refs(&keys::object_obligations_of(ObjectRef::Thread(thread), agent), usize::MAX)? {
        match r {
            IndexRef::Obligation(ObligationId::Response { thread, entry, responder }) => {
                let resp = need(tx.response(thread, entry, responder)?, "response")?;
                end_response(tx, resp, how.clone(), at)?;
            }
            // Deliveries and judgments are not responses; they stay.
            IndexRef::Obligation(_) => {}
            _ => return Err(StateError::corrupt(&key, "expected an obligation")),
        }
    }
    Ok(())
}

pub(super) fn add_membership(
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
pub(super) fn end_membership(
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
    for (key, r) in tx.index_refs(&keys::object_obligations_of(ObjectRef::Thread(thread), agent), usize::MAX)? {
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
            IndexRef::Obligation(_) => {}
            _ => return Err(StateError::corrupt(&key, "expected an obligation")),
        }
    }
    // Assignments it took (or that are addressed to it) and has not delivered are voided;
    // assignments it created and that are not yet delivered are voided.
    for (key, r) in tx.index_refs(&keys::live_assignments_of(thread, agent), usize::MAX)? {
        let IndexRef::Assignment(a) = r else {
            return Err(StateError::corrupt(&key, "expected an assignment"));
        };
        let asg = need(tx.assignment(a)?, "assignment")?;
        end_undelivered_assignment(tx, asg, AssignmentOutcome::Voided, at)?;
    }
    Ok(())
}

/// §6.5: the effects of closing, all in the closing fact.
pub(super) fn close_thread(tx: &mut Tx<'_>, thread: ThreadId, at: Timestamp) -> Result<(), StateError> {
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
    for (key, rec) in tx.scan_all(&keys::memberships_of(thread))? {
        let Record::Membership(m) = rec else {
            return Err(StateError::corrupt(&key, "expected a membership"));
        };
        if m.is_current() {
            let mut a = need(tx.agent(m.agent)?, "agent")?;
            a.open_threads -= 1;
            put_agent(tx, a);
        }
    }
    // All pending responses end.
    for (key, r) in tx.index_refs(&keys::object_obligations(ObjectRef::Thread(thread)), usize::MAX)? {
        match r {
            IndexRef::Obligation(ObligationId::Response { thread, entry, responder }) => {
                let resp = need(tx.response(thread, entry, responder)?, "response")?;
                end_response(tx, resp, ResponseEnd::ThreadClosed, at)?;
            }
            // Deliveries end with their assignments just below; judgments keep their deadlines.
            IndexRef::Obligation(_) => {}
            _ => return Err(StateError::corrupt(&key, "expected an obligation")),
        }
    }
    // Undelivered assignments are voided; delivered ones keep their judgment deadlines.
    for (key, r) in tx.index_refs(&keys::live_assignments(thread), usize::MAX)? {
        let IndexRef::Assignment(a) = r else {
            return Err(StateError::corrupt(&key, "expected an assignment"));
        };
        let asg = need(tx.assignment(a)?, "assignment")?;
        if asg.state.is_undelivered() {
            end_undelivered_assignment(tx, asg, AssignmentOutcome::Voided, at)?;
        }
    }
    Ok(())
}
