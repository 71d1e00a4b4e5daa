//! §4 Agent: registering and deactivating an agent.

use super::{Cx, Res, not_found, reject, reject_field};
use crate::fact::Fact;
use crate::keys;
use crate::receipt::ActionResult;
use crate::state::{IndexRef, StateError, StateExt};
use kungfu_types::{AgentId, Code, Role};

/// §4: registers an agent under the hash of its bearer key.
pub(super) fn register(
    cx: &mut Cx<'_>,
    key_hash: kungfu_types::SecretHash,
    key_fingerprint: kungfu_types::Fingerprint,
) -> Res<ActionResult> {
    if cx.tx.agent_by_key(&key_hash)?.is_some() {
        // A fresh 256-bit secret never collides; a repeat means the caller reused secret material.
        return reject_field(Code::InvalidArgument, "key", "this key is already registered; generate a fresh key");
    }
    let agent = AgentId(cx.next_id(cx.counters()?.agents)?);
    cx.emit(Fact::AgentRegistered { agent, key_hash, key_fingerprint: key_fingerprint.clone() })?;
    Ok(ActionResult::AgentRegistered { agent, key_fingerprint })
}

/// §4: deactivates an agent, ending its memberships and closing the threads it leaves ungoverned.
pub(super) fn deactivate(cx: &mut Cx<'_>, agent: AgentId) -> Res<ActionResult> {
    let Some(a) = cx.tx.agent(agent)? else {
        return not_found("agent");
    };
    if !a.is_active() {
        return reject(Code::NoEffect, "the agent is already deactivated");
    }
    // §4: its memberships end with the effects of §6.2, and an open thread left with no governor
    // closes with the effects of §6.5, all in one fact.
    let mut memberships_ended = Vec::new();
    let mut threads_closed = Vec::new();
    for (key, r) in cx.tx.index_refs(&keys::agent_threads(agent), usize::MAX)? {
        let IndexRef::Thread(thread) = r else {
            return Err(StateError::corrupt(&key, "an agent's thread index names no thread").into());
        };
        memberships_ended.push(thread);
        let t = cx.tx.thread(thread)?.ok_or_else(|| StateError::corrupt(&keys::thread(thread), "missing"))?;
        let m = cx
            .tx
            .membership(thread, agent)?
            .ok_or_else(|| StateError::corrupt(&keys::membership(thread, agent), "missing"))?;
        if t.is_open() && m.role == Role::Governor && t.governors == 1 {
            threads_closed.push(thread);
        }
    }
    cx.emit(Fact::AgentDeactivated {
        agent,
        memberships_ended: memberships_ended.clone(),
        threads_closed: threads_closed.clone(),
    })?;
    Ok(ActionResult::AgentDeactivated { agent, memberships_ended, threads_closed })
}
