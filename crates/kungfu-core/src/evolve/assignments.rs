//! §6.4 Assignments: the facts of creating, taking, delivering, judging, dropping and voiding an
//! assignment, and of its deadlines passing (L4).

use super::{close_obligation, corrupt_state, delete_due, need, open_obligation, put_assignment, put_due, put_thread};
use crate::fact::Verdict;
use crate::keys;
use crate::model::*;
use crate::state::{IndexRef, Record, StateError, StateExt, Tx};
use kungfu_types::{AgentId, AssignmentId, Content, EntrySeq, ObjectRef, ThreadId, Timestamp};

/// §6.4: a new open assignment on an entry, an opportunity of its addressee (§8).
#[allow(clippy::too_many_arguments)]
pub(super) fn assignment_created(
    tx: &mut Tx<'_>,
    counters: &mut Counters,
    assignment: AssignmentId,
    thread: ThreadId,
    entry: EntrySeq,
    creator: AgentId,
    addressee: AgentId,
    spec: &AssignmentSpec,
    at: Timestamp,
) -> Result<(), StateError> {
    counters.assignments = counters.assignments.max(assignment.0);
    tx.put(
        keys::assignment(assignment),
        Record::Assignment(Assignment {
            id: assignment,
            thread,
            entry,
            creator,
            addressee,
            created_at: at,
            spec: spec.clone(),
            state: AssignmentState::Open,
            judge_forfeited: false,
        }),
    );
    let mut e = need(tx.entry(thread, entry)?, "entry")?;
    e.assignment = Some(assignment);
    tx.put(keys::entry(thread, entry), Record::Entry(e));
    let mut t = need(tx.thread(thread)?, "thread")?;
    t.open_assignments += 1;
    put_thread(tx, t);
    tx.put(keys::thread_assignment(thread, assignment), Record::Ref(IndexRef::Assignment(assignment)));
    tx.put(keys::live_assignment(thread, creator, assignment), Record::Ref(IndexRef::Assignment(assignment)));
    tx.put(keys::live_assignment(thread, addressee, assignment), Record::Ref(IndexRef::Assignment(assignment)));
    // §8: an untaken assignment is an opportunity of its addressee, not an obligation.
    tx.put(
        keys::opportunity(addressee, at, OpportunityId::Assignment(assignment)),
        Record::Ref(IndexRef::Opportunity(OpportunityId::Assignment(assignment))),
    );
    Ok(())
}

/// §6.4: an assignment taken; its delivery deadline starts.
pub(super) fn assignment_taken(tx: &mut Tx<'_>, assignment: AssignmentId, at: Timestamp) -> Result<(), StateError> {
    let mut a = need(tx.assignment(assignment)?, "assignment")?;
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
    Ok(())
}

/// §6.4: an assignment delivered; its judgment deadline starts.
pub(super) fn assignment_delivered(
    tx: &mut Tx<'_>,
    assignment: AssignmentId,
    output: &Content,
    at: Timestamp,
) -> Result<(), StateError> {
    let mut a = need(tx.assignment(assignment)?, "assignment")?;
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
    Ok(())
}

/// §6.4: a delivered assignment judged.
pub(super) fn assignment_judged(
    tx: &mut Tx<'_>,
    assignment: AssignmentId,
    verdict: &Verdict,
    at: Timestamp,
) -> Result<(), StateError> {
    let mut a = need(tx.assignment(assignment)?, "assignment")?;
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
    Ok(())
}

/// §6.4: an undelivered assignment ended: dropped by its taker, voided, or timed out (L4).
pub(super) fn assignment_ended_undelivered(
    tx: &mut Tx<'_>,
    assignment: AssignmentId,
    outcome: AssignmentOutcome,
    at: Timestamp,
) -> Result<(), StateError> {
    let a = need(tx.assignment(assignment)?, "assignment")?;
    end_undelivered_assignment(tx, a, outcome, at)
}

/// L4: a delivered assignment's judgment deadline passed; it ends undecided.
pub(super) fn assignment_judgment_expired(
    tx: &mut Tx<'_>,
    id: AssignmentId,
    due_at: Timestamp,
    at: Timestamp,
) -> Result<(), StateError> {
    let obligation = ObligationId::AssignmentJudgment(id);
    let mut a = need(tx.assignment(id)?, "assignment")?;
    let AssignmentState::Delivered { output, .. } = a.state.clone() else {
        return Err(corrupt_state("assignment", id.0, "judgment deadline while not delivered"));
    };
    // The obligation is already gone if the creator forfeited judgment (§6.2).
    close_obligation(tx, obligation)?;
    delete_due(tx, ObjectRef::Thread(a.thread), due_at, obligation);
    a.state = AssignmentState::Ended { at, outcome: AssignmentOutcome::Undecided, delivered: Some(output) };
    put_assignment(tx, a);
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
pub(super) fn end_undelivered_assignment(
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
