//! §7 Task: creating a Task, revising its contract, pausing and resuming it, and the engagements:
//! taking, delivering, dropping and judging (§7.1–§7.4).

use super::{Cx, Res, deadline_won, expire, reject, reject_field};
use crate::action::ContractDraft;
use crate::coord::floor::Context;
use crate::fact::{Fact, Verdict};
use crate::keys;
use crate::model::*;
use crate::receipt::ActionResult;
use crate::state::{IndexRef, Record, StateError, StateExt, StateRead};
use crate::visibility;
use kungfu_types::{AgentId, Code, Content, EngagementId, TaskId, Version};

/// §7.1: checks a contract draft and fixes its windows (defaults filled in).
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
                // Design §2.4: a labeled input must be shareable with a contractual audience.
                if let Some(labels) = cx.tx.labels(*pin)? {
                    super::floor_at(&field, labels, Context::TaskInput)?;
                }
            }
            Some(m) if visibility::memory_readable(&m, me) => {
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

/// §7: creates a Task with its first contract version.
pub(super) fn create_task(
    cx: &mut Cx<'_>,
    me: AgentId,
    audience: &Audience,
    draft: &ContractDraft,
) -> Res<ActionResult> {
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
                "audience.restricted.agents",
                "a restricted audience must name at least one agent",
            );
        }
        if named.len() > cx.limits.max_audience {
            return reject_field(
                Code::LimitExceeded,
                "audience.restricted.agents",
                format!("may name at most {} agents", cx.limits.max_audience),
            );
        }
        for (i, agent) in named.iter().enumerate() {
            if *agent == me {
                return reject_field(
                    Code::InvalidTarget,
                    &format!("audience.restricted.agents[{i}]"),
                    "the author must not take its own Task",
                );
            }
            if cx.tx.agent(*agent)?.is_none() {
                return reject_field(
                    Code::InvalidTarget,
                    &format!("audience.restricted.agents[{i}]"),
                    "names no agent",
                );
            }
        }
    }
    let contract = check_contract(cx, me, draft)?;
    let task = TaskId(cx.next_id(cx.counters()?.tasks)?);
    cx.emit(Fact::TaskCreated { task, author: me, audience: audience.clone(), contract })?;
    Ok(ActionResult::TaskCreated { task, version: Version::FIRST })
}

/// The Task, if the caller may read it and is its author.
fn authored_task(cx: &Cx<'_>, me: AgentId, task: TaskId) -> Res<Task> {
    let (t, _) = cx.visible_task(task, me)?;
    if t.author != me {
        return reject(Code::NotAuthor, "only the Task's author may do this");
    }
    Ok(t)
}

/// §7.1: the author revises the contract.
pub(super) fn revise_contract(cx: &mut Cx<'_>, me: AgentId, task: TaskId, draft: &ContractDraft) -> Res<ActionResult> {
    let t = authored_task(cx, me, task)?;
    let contract = check_contract(cx, me, draft)?;
    // §7.1: each revision is a new contract version that binds only later engagements.
    let version = t.current.next();
    cx.emit(Fact::ContractRevised { task, version, contract })?;
    Ok(ActionResult::ContractRevised { task, version })
}

/// §7: the author pauses (`pause`) or resumes the Task.
pub(super) fn pause_task(cx: &mut Cx<'_>, me: AgentId, task: TaskId, pause: bool) -> Res<ActionResult> {
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

/// §7.2, §7.3: takes a Task, or returns the open engagement (L2).
pub(super) fn take_task(cx: &mut Cx<'_>, me: AgentId, task: TaskId) -> Res<ActionResult> {
    let (engagement, existing) = engage(cx, me, task)?;
    let e =
        cx.tx.engagement(engagement)?.ok_or_else(|| StateError::corrupt(&keys::engagement(engagement), "missing"))?;
    let delivery_due = match e.state {
        EngagementState::Open { delivery_due } => delivery_due,
        // Taking again while delivered returns the engagement; its delivery is behind it.
        EngagementState::Delivered { at, .. } => at,
        EngagementState::Ended { at, .. } => at,
    };
    Ok(ActionResult::Engaged { task, engagement, contract_version: e.contract_version, delivery_due, existing })
}

/// Takes a Task, or returns the open engagement (L2). Returns (engagement, existing).
fn engage(cx: &mut Cx<'_>, me: AgentId, task: TaskId) -> Res<(EngagementId, bool)> {
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
    let engagement = EngagementId(cx.next_id(cx.counters()?.engagements)?);
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

/// §7.3: the engaged agent delivers, once; taking first when `take` (a combined action, L2).
pub(super) fn deliver_task(
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
        engage(cx, me, task)?.0
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
                // L4: the same answer when the timer's expiry was applied before this action.
                if let Some(e) = latest_engagement(cx, me, task)? {
                    if expire::ended_by_deadline(cx, ObligationId::EngagementDelivery(e))? {
                        return reject(Code::DeadlinePassed, "the delivery deadline passed first; the deadline wins");
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

/// §7.3: the engaged agent drops its undelivered engagement.
pub(super) fn drop_engagement(
    cx: &mut Cx<'_>,
    me: AgentId,
    id: EngagementId,
    settled: &[ObligationId],
) -> Res<ActionResult> {
    let (e, _t) = cx.engagement_visible(id, me)?;
    if e.agent != me {
        // §7.3: the author cannot cancel an engagement.
        return reject(Code::NotTaker, "only the engaged agent may drop an engagement; the author cannot cancel it");
    }
    deadline_won(cx, settled, ObligationId::EngagementDelivery(id))?;
    if !matches!(e.state, EngagementState::Open { .. }) {
        return reject(Code::InvalidState, "only an undelivered engagement can be dropped");
    }
    cx.emit(Fact::EngagementDropped { engagement: id, task: e.task })?;
    Ok(ActionResult::EngagementDropped { task: e.task, engagement: id })
}

/// §7.4: the requester adopts the delivery, within the adoption limit.
pub(super) fn adopt_engagement(
    cx: &mut Cx<'_>,
    me: AgentId,
    id: EngagementId,
    settled: &[ObligationId],
) -> Res<ActionResult> {
    judge_engagement(cx, me, id, Verdict::Adopt, settled)
}

/// §7.4: the requester rejects the delivery, with a reason the engaged agent can read.
pub(super) fn reject_engagement(
    cx: &mut Cx<'_>,
    me: AgentId,
    id: EngagementId,
    reason: &Content,
    settled: &[ObligationId],
) -> Res<ActionResult> {
    cx.content("reason", reason, cx.limits.max_reason_bytes)?;
    if reason.is_empty() {
        return reject_field(
            Code::InvalidArgument,
            "reason",
            "a rejection must carry a reason the engaged agent can read",
        );
    }
    judge_engagement(cx, me, id, Verdict::Reject { reason: reason.clone() }, settled)
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
    deadline_won(cx, settled, ObligationId::EngagementJudgment(id))?;
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

/// Engagements of one agent looked at, newest first, to find its latest with a Task.
const ENGAGEMENT_LOOKBACK: usize = 64;

/// The agent's most recent engagement with `task`, among its latest [`ENGAGEMENT_LOOKBACK`].
fn latest_engagement(cx: &Cx<'_>, me: AgentId, task: TaskId) -> Res<Option<EngagementId>> {
    for (key, r) in cx.tx.scan_rev(&keys::agent_engagements(me), None, ENGAGEMENT_LOOKBACK)? {
        let Record::Ref(IndexRef::Engagement(e)) = r else {
            return Err(StateError::corrupt(&key, "an agent's engagement index names no engagement").into());
        };
        let found =
            cx.tx.engagement(e)?.ok_or_else(|| StateError::corrupt(&key, "index names a missing engagement"))?;
        if found.task == task {
            return Ok(Some(e));
        }
    }
    Ok(None)
}
