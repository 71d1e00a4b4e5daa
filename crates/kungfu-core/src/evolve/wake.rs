//! Wake targets (issue #35): a target's record follows its facts; removing it deletes it.

use super::need;
use crate::keys;
use crate::model::{WakeEvent, WakeFailure, WakeFilter, WakeTarget};
use crate::state::{Record, StateError, StateExt, StateRead, Tx};
use kungfu_types::{AgentId, Timestamp, WakeSecret, WakeTargetId};

/// What `WakeTargetSet` records.
pub(super) struct NewTarget<'a> {
    pub target: WakeTargetId,
    pub agent: AgentId,
    pub url: &'a str,
    pub secret: WakeSecret,
    pub filter: &'a WakeFilter,
}

pub(super) fn target_set(tx: &mut Tx<'_>, n: &NewTarget<'_>, at: Timestamp) -> Result<(), StateError> {
    tx.put(
        keys::wake_target(n.agent, n.target),
        Record::WakeTarget(WakeTarget {
            id: n.target,
            agent: n.agent,
            url: n.url.to_string(),
            secret: n.secret,
            filter: n.filter.clone(),
            created_at: at,
            queued: None,
            delivered: 0,
            failed: None,
        }),
    );
    let last = tx.wake_counter()?.unwrap_or(0);
    tx.put(keys::wake_counter(tx.group()), Record::Counter(last.max(n.target.0)));
    Ok(())
}

pub(super) fn target_removed(tx: &mut Tx<'_>, agent: AgentId, target: WakeTargetId) -> Result<(), StateError> {
    need(tx.wake_target(agent, target)?, "wake target")?;
    tx.delete(keys::wake_target(agent, target));
    Ok(())
}

pub(super) fn queued(tx: &mut Tx<'_>, agent: AgentId, target: WakeTargetId, e: WakeEvent) -> Result<(), StateError> {
    let mut t = need(tx.wake_target(agent, target)?, "wake target")?;
    t.queued = Some(e);
    tx.put(keys::wake_target(agent, target), Record::WakeTarget(t));
    Ok(())
}

pub(super) fn delivered(tx: &mut Tx<'_>, agent: AgentId, target: WakeTargetId, seq: u64) -> Result<(), StateError> {
    let mut t = need(tx.wake_target(agent, target)?, "wake target")?;
    t.delivered = t.delivered.max(seq);
    tx.put(keys::wake_target(agent, target), Record::WakeTarget(t));
    Ok(())
}

pub(super) fn gave_up(
    tx: &mut Tx<'_>,
    agent: AgentId,
    target: WakeTargetId,
    failure: &WakeFailure,
) -> Result<(), StateError> {
    let mut t = need(tx.wake_target(agent, target)?, "wake target")?;
    t.failed = Some(failure.clone());
    tx.put(keys::wake_target(agent, target), Record::WakeTarget(t));
    Ok(())
}
