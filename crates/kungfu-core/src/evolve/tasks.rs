//! §7 Task: the facts of creating a Task, revising its contract, pausing and resuming it, and of its
//! engagements: taking, delivering, judging, dropping, and their deadlines passing (L4).

use super::{
    close_obligation, corrupt_state, delete_due, need, open_obligation, put_agent, put_due, put_engagement, put_task,
};
use crate::fact::{ExpiryResult, Verdict};
use crate::keys;
use crate::model::*;
use crate::state::{IndexRef, Record, StateError, StateExt, Tx};
use kungfu_types::{AgentId, Content, EngagementId, ObjectRef, TaskId, Timestamp, Version};

/// §7: a new Task with its first contract version; a restricted audience learns of it (§8).
pub(super) fn task_created(
    tx: &mut Tx<'_>,
    counters: &mut Counters,
    task: TaskId,
    author: AgentId,
    audience: &Audience,
    contract: &Contract,
    at: Timestamp,
) -> Result<(), StateError> {
    counters.tasks = counters.tasks.max(task.0);
    tx.put(
        keys::task(task),
        Record::Task(Task {
            id: task,
            author,
            created_at: at,
            audience: audience.clone(),
            current: kungfu_types::Version::FIRST,
            paused: false,
            adopted: 0,
            open_engagements: 0,
        }),
    );
    tx.put(
        keys::contract_version(task, kungfu_types::Version::FIRST),
        Record::ContractVersion(ContractVersion {
            task,
            version: kungfu_types::Version::FIRST,
            created_at: at,
            contract: contract.clone(),
        }),
    );
    let mut a = need(tx.agent(author)?, "agent")?;
    a.tasks += 1;
    put_agent(tx, a);
    // §8: a restricted Task naming an agent is an opportunity of that agent.
    if let Audience::Restricted(named) = audience {
        for agent in named {
            tx.put(
                keys::opportunity(*agent, at, OpportunityId::Task(task)),
                Record::Ref(IndexRef::Opportunity(OpportunityId::Task(task))),
            );
        }
    }
    Ok(())
}

/// §7.1: a new contract version becomes current.
pub(super) fn contract_revised(
    tx: &mut Tx<'_>,
    task: TaskId,
    version: Version,
    contract: &Contract,
    at: Timestamp,
) -> Result<(), StateError> {
    let mut t = need(tx.task(task)?, "task")?;
    t.current = version;
    tx.put(
        keys::contract_version(task, version),
        Record::ContractVersion(ContractVersion { task, version, created_at: at, contract: contract.clone() }),
    );
    put_task(tx, t);
    Ok(())
}

/// §7: a Task paused (`paused`) or resumed.
pub(super) fn task_paused(tx: &mut Tx<'_>, task: TaskId, paused: bool) -> Result<(), StateError> {
    let mut t = need(tx.task(task)?, "task")?;
    t.paused = paused;
    put_task(tx, t);
    Ok(())
}

/// §7.3: a new engagement binding the contract version; its delivery deadline starts.
#[allow(clippy::too_many_arguments)]
pub(super) fn engaged(
    tx: &mut Tx<'_>,
    counters: &mut Counters,
    engagement: EngagementId,
    task: TaskId,
    agent: AgentId,
    contract_version: Version,
    inputs: &[Pin],
    judge: AgentId,
    on_missing_judgment: MissingJudgment,
    at: Timestamp,
) -> Result<(), StateError> {
    counters.engagements = counters.engagements.max(engagement.0);
    let cv = need(tx.contract_version(task, contract_version)?, "contract version")?;
    // §7.3: the delivery deadline starts with the engagement.
    let delivery_due = at.plus(cv.contract.delivery_window);
    tx.put(
        keys::engagement(engagement),
        Record::Engagement(Engagement {
            id: engagement,
            task,
            agent,
            contract_version,
            inputs: inputs.to_vec(),
            judge,
            on_missing_judgment,
            judgment_window: cv.contract.judgment_window,
            taken_at: at,
            state: EngagementState::Open { delivery_due },
        }),
    );
    let mut t = need(tx.task(task)?, "task")?;
    t.open_engagements += 1;
    put_task(tx, t);
    tx.put(keys::open_engagement(task, agent), Record::Ref(IndexRef::Engagement(engagement)));
    tx.put(keys::task_engagement(task, engagement), Record::Ref(IndexRef::Engagement(engagement)));
    tx.put(keys::agent_engagement(agent, engagement), Record::Ref(IndexRef::Engagement(engagement)));
    let id = ObligationId::EngagementDelivery(engagement);
    open_obligation(
        tx,
        Obligation { id, holder: agent, object: ObjectRef::Task(task), arose_at: at, due_at: Some(delivery_due) },
    );
    put_due(tx, ObjectRef::Task(task), delivery_due, id);
    Ok(())
}

/// §7.3: an engagement delivered; its judgment deadline starts.
pub(super) fn engagement_delivered(
    tx: &mut Tx<'_>,
    engagement: EngagementId,
    output: &Content,
    at: Timestamp,
) -> Result<(), StateError> {
    let mut e = need(tx.engagement(engagement)?, "engagement")?;
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
        Obligation { id, holder: e.judge, object: ObjectRef::Task(e.task), arose_at: at, due_at: Some(judgment_due) },
    );
    put_due(tx, ObjectRef::Task(e.task), judgment_due, id);
    put_engagement(tx, e);
    Ok(())
}

/// §7.4: a delivered engagement judged.
pub(super) fn engagement_judged(
    tx: &mut Tx<'_>,
    engagement: EngagementId,
    verdict: &Verdict,
    at: Timestamp,
) -> Result<(), StateError> {
    let e = need(tx.engagement(engagement)?, "engagement")?;
    let outcome = match verdict {
        Verdict::Adopt => EngagementOutcome::Adopted,
        Verdict::Reject { reason } => EngagementOutcome::Rejected { reason: reason.clone() },
    };
    end_delivered_engagement(tx, e, outcome, at)?;
    Ok(())
}

/// §7.3: an undelivered engagement dropped by its agent.
pub(super) fn engagement_dropped(tx: &mut Tx<'_>, engagement: EngagementId, at: Timestamp) -> Result<(), StateError> {
    let mut e = need(tx.engagement(engagement)?, "engagement")?;
    let EngagementState::Open { delivery_due } = e.state else {
        return Err(corrupt_state("engagement", e.id.0, "dropped while not open"));
    };
    close_obligation(tx, ObligationId::EngagementDelivery(e.id))?;
    delete_due(tx, ObjectRef::Task(e.task), delivery_due, ObligationId::EngagementDelivery(e.id));
    e.state = EngagementState::Ended { at, outcome: EngagementOutcome::Dropped, delivered: None };
    finish_engagement(tx, &e)?;
    put_engagement(tx, e);
    Ok(())
}

/// L4: an engagement's delivery deadline passed; it ends timed out.
pub(super) fn engagement_delivery_expired(
    tx: &mut Tx<'_>,
    id: EngagementId,
    due_at: Timestamp,
    at: Timestamp,
) -> Result<(), StateError> {
    let obligation = ObligationId::EngagementDelivery(id);
    let mut e = need(tx.engagement(id)?, "engagement")?;
    close_obligation(tx, obligation)?;
    delete_due(tx, ObjectRef::Task(e.task), due_at, obligation);
    e.state = EngagementState::Ended { at, outcome: EngagementOutcome::TimedOut, delivered: None };
    finish_engagement(tx, &e)?;
    put_engagement(tx, e);
    Ok(())
}

/// L4, §7.1: an engagement's judgment deadline passed; it ends with the contract's result for a
/// missing judgment, decided when the deadline fact was recorded.
pub(super) fn engagement_judgment_expired(
    tx: &mut Tx<'_>,
    id: EngagementId,
    result: ExpiryResult,
    at: Timestamp,
) -> Result<(), StateError> {
    let e = need(tx.engagement(id)?, "engagement")?;
    let outcome = match result {
        ExpiryResult::Adopted => EngagementOutcome::Adopted,
        _ => EngagementOutcome::Undecided,
    };
    end_delivered_engagement(tx, e, outcome, at)
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
