//! L4 Exits: deadlines settled before an action (the deadline wins), and the system's `Expire`
//! action, which ends what is due on one obligation's object.

use super::{Cx, Res, reject};
use crate::fact::{ExpiryResult, Fact};
use crate::keys;
use crate::model::*;
use crate::receipt::ActionResult;
use crate::state::{IndexRef, Record, StateError, StateExt, StateRead};
use kungfu_types::{Code, EngagementId, ObjectRef, TaskId, Timestamp};

/// L4: the system's expiry. The deadlines of the obligation's object were settled before it; a stale
/// or early expiry ends nothing and is refused like any action without effect (L2); what it did end
/// was ended by the deadline facts recorded before it.
pub(super) fn expire(settled: Vec<ObligationId>) -> Res<ActionResult> {
    if settled.is_empty() {
        return reject(Code::NoEffect, "nothing is due on that obligation at this time");
    }
    Ok(ActionResult::Expired { ended: settled })
}

/// Ends every obligation of `object` whose deadline is at or before the command's time, each with
/// exactly one terminal fact (L4, L5). Returns what it ended.
pub(crate) fn settle_due(cx: &mut Cx<'_>, object: ObjectRef) -> Res<Vec<ObligationId>> {
    let mut ended = Vec::new();
    // L4: nothing anywhere is due before the floor, so nothing of this object is due now.
    if cx.tx.due_floor() > cx.ts {
        return Ok(ended);
    }
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
    // The due index named this engagement, so it, its Task and its bound contract version exist; a
    // missing one is corruption, never a default result.
    let eng = state.engagement(e)?.ok_or_else(|| StateError::corrupt(&keys::engagement(e), "missing"))?;
    if eng.on_missing_judgment != MissingJudgment::Adopted {
        return Ok(ExpiryResult::Undecided);
    }
    let task = state.task(eng.task)?.ok_or_else(|| StateError::corrupt(&keys::task(eng.task), "missing"))?;
    // Existing engagements are judged against the contract version they bound (§7.1).
    let limit = state
        .contract_version(eng.task, eng.contract_version)?
        .ok_or_else(|| StateError::corrupt(&keys::contract_version(eng.task, eng.contract_version), "missing"))?
        .contract
        .max_adoptions;
    Ok(match limit {
        Some(l) if task.adopted >= l => ExpiryResult::Undecided,
        _ => ExpiryResult::Adopted,
    })
}

/// Facts of a Task's journal looked at, newest first, to tell a judgment ended by its deadline
/// (adopted by the contract's default) from one adopted by the requester.
const JOURNAL_LOOKBACK: usize = 256;

/// L4: whether obligation `id` already ended by its deadline, as its record shows. An action that
/// comes after the expiry was applied gets the same answer as one that finds the deadline due and
/// settles it first (`DEADLINE_PASSED`): the code must not depend on how fast the timer was.
pub(super) fn ended_by_deadline(cx: &Cx<'_>, id: ObligationId) -> Res<bool> {
    Ok(match id {
        ObligationId::Response { .. } => false,
        // Only the delivery deadline ends an assignment TimedOut, only the judgment deadline
        // ends one Undecided (§6.4).
        ObligationId::AssignmentDelivery(a) => cx
            .tx
            .assignment(a)?
            .is_some_and(|a| matches!(a.state, AssignmentState::Ended { outcome: AssignmentOutcome::TimedOut, .. })),
        ObligationId::AssignmentJudgment(a) => cx
            .tx
            .assignment(a)?
            .is_some_and(|a| matches!(a.state, AssignmentState::Ended { outcome: AssignmentOutcome::Undecided, .. })),
        ObligationId::EngagementDelivery(e) => cx
            .tx
            .engagement(e)?
            .is_some_and(|e| matches!(e.state, EngagementState::Ended { outcome: EngagementOutcome::TimedOut, .. })),
        ObligationId::EngagementJudgment(e) => match cx.tx.engagement(e)? {
            Some(Engagement {
                state: EngagementState::Ended { outcome: EngagementOutcome::Undecided, .. }, ..
            }) => true,
            // §7.1: a missing judgment may end the engagement adopted, like a judge would; the
            // Task's journal says which it was.
            Some(Engagement {
                task,
                state: EngagementState::Ended { outcome: EngagementOutcome::Adopted, at, .. },
                ..
            }) => judged_by_deadline(cx, task, id, at)?,
            _ => false,
        },
    })
}

/// Whether the Task's journal records the deadline ending `id` at `at`: read newest first, down to
/// facts older than `at`, at most [`JOURNAL_LOOKBACK`].
fn judged_by_deadline(cx: &Cx<'_>, task: TaskId, id: ObligationId, at: Timestamp) -> Res<bool> {
    let facts = cx.tx.scan_rev(&keys::journal_of(ObjectRef::Task(task)), None, JOURNAL_LOOKBACK)?;
    for (key, record) in facts {
        let Record::Fact(f) = record else {
            return Err(StateError::corrupt(&key, "a journal entry is not a fact").into());
        };
        if f.at < at {
            break;
        }
        if matches!(f.fact, Fact::DeadlinePassed { obligation, .. } if obligation == id) {
            return Ok(true);
        }
    }
    Ok(false)
}
