//! §6.4 Assignments: creating (with a post), taking, delivering, judging, dropping and voiding an
//! assignment.

use super::{Cx, Res, deadline_won, reject, reject_field};
use crate::action::NewAssignment;
use crate::fact::{Fact, Verdict};
use crate::keys;
use crate::model::*;
use crate::receipt::ActionResult;
use crate::state::{StateError, StateExt};
use kungfu_types::{AgentId, AssignmentId, Code, Content, EntrySeq, ThreadId};

/// §6.4: creates an assignment on the entry just posted (the second step of a post, L2).
pub(super) fn create_assignment(
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
    let assignment = AssignmentId(cx.next_id(cx.counters()?.assignments)?);
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

/// §6.4: the addressee takes an open assignment.
pub(super) fn take_assignment(
    cx: &mut Cx<'_>,
    me: AgentId,
    id: AssignmentId,
    settled: &[ObligationId],
) -> Res<ActionResult> {
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
    deadline_won(cx, settled, ObligationId::AssignmentDelivery(id))?;
    cx.emit(Fact::AssignmentTaken { assignment: id, thread: a.thread })?;
    let a = cx.tx.assignment(id)?.ok_or_else(|| StateError::corrupt(&keys::assignment(id), "missing"))?;
    let AssignmentState::Taken { delivery_due, .. } = a.state else {
        return Err(StateError::corrupt(&keys::assignment(id), "not taken after taking").into());
    };
    Ok(ActionResult::AssignmentTaken { assignment: id, delivery_due })
}

/// §6.4: the taker delivers, once.
pub(super) fn deliver_assignment(
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
    deadline_won(cx, settled, ObligationId::AssignmentDelivery(id))?;
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

/// §6.4: the creator adopts the delivery.
pub(super) fn adopt_assignment(
    cx: &mut Cx<'_>,
    me: AgentId,
    id: AssignmentId,
    settled: &[ObligationId],
) -> Res<ActionResult> {
    judge_assignment(cx, me, id, Verdict::Adopt, settled)
}

/// §6.4: the creator rejects the delivery, with a reason the taker can read.
pub(super) fn reject_assignment(
    cx: &mut Cx<'_>,
    me: AgentId,
    id: AssignmentId,
    reason: &Content,
    settled: &[ObligationId],
) -> Res<ActionResult> {
    cx.content("reason", reason, cx.limits.max_reason_bytes)?;
    if reason.is_empty() {
        return reject_field(Code::InvalidArgument, "reason", "a rejection must carry a reason the taker can read");
    }
    judge_assignment(cx, me, id, Verdict::Reject { reason: reason.clone() }, settled)
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
    deadline_won(cx, settled, ObligationId::AssignmentJudgment(id))?;
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

/// §6.4: the taker drops a taken, undelivered assignment.
pub(super) fn drop_assignment(
    cx: &mut Cx<'_>,
    me: AgentId,
    id: AssignmentId,
    settled: &[ObligationId],
) -> Res<ActionResult> {
    let (a, _t, _) = cx.assignment_in_member_thread(id, me)?;
    if a.addressee != me {
        return reject(Code::NotTaker, "only the taker may drop this assignment");
    }
    deadline_won(cx, settled, ObligationId::AssignmentDelivery(id))?;
    if !matches!(a.state, AssignmentState::Taken { .. }) {
        return reject(Code::InvalidState, "only a taken, undelivered assignment can be dropped");
    }
    cx.emit(Fact::AssignmentDropped { assignment: id, thread: a.thread })?;
    Ok(ActionResult::AssignmentDropped { assignment: id })
}

/// §6.4: the creator voids an undelivered assignment.
pub(super) fn void_assignment(
    cx: &mut Cx<'_>,
    me: AgentId,
    id: AssignmentId,
    settled: &[ObligationId],
) -> Res<ActionResult> {
    let (a, _t, _) = cx.assignment_in_member_thread(id, me)?;
    if a.creator != me {
        return reject(Code::NotCreator, "only the creator may void this assignment");
    }
    deadline_won(cx, settled, ObligationId::AssignmentDelivery(id))?;
    if !a.state.is_undelivered() {
        return reject(Code::InvalidState, "only an undelivered assignment can be voided");
    }
    cx.emit(Fact::AssignmentVoided { assignment: id, thread: a.thread })?;
    Ok(ActionResult::AssignmentVoided { assignment: id })
}
