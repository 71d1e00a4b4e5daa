//! §4 Agent: the facts of registering and deactivating an agent, with the deactivation's cascade
//! (memberships end as in §6.2, ungoverned open threads close as in §6.5).

use super::threads::{close_thread, end_membership};
use super::{need, put_agent};
use crate::keys;
use crate::model::*;
use crate::state::{IndexRef, Record, StateError, StateExt, Tx};
use kungfu_types::{AgentId, Fingerprint, SecretHash, ThreadId, Timestamp};

/// §4: a registered agent starts active, findable by the hash of its key.
pub(super) fn agent_registered(
    tx: &mut Tx<'_>,
    counters: &mut Counters,
    agent: AgentId,
    key_hash: &SecretHash,
    key_fingerprint: &Fingerprint,
    at: Timestamp,
) -> Result<(), StateError> {
    counters.agents = counters.agents.max(agent.0);
    tx.put(
        keys::agent(agent),
        Record::Agent(Agent {
            id: agent,
            registered_at: at,
            key_hash: *key_hash,
            key_fingerprint: key_fingerprint.clone(),
            state: AgentState::Active,
            memories: 0,
            tasks: 0,
            open_threads: 0,
        }),
    );
    tx.put(keys::agent_by_key(key_hash), Record::Ref(IndexRef::Agent(agent)));
    Ok(())
}

/// §4: a deactivated agent, with the cascade of §6.2 and §6.5 in the same fact.
pub(super) fn agent_deactivated(
    tx: &mut Tx<'_>,
    agent: AgentId,
    memberships_ended: &[ThreadId],
    threads_closed: &[ThreadId],
    at: Timestamp,
) -> Result<(), StateError> {
    let mut a = need(tx.agent(agent)?, "agent")?;
    a.state = AgentState::Deactivated { at };
    put_agent(tx, a);
    // §4: in one fact, memberships end with the effects of §6.2 ...
    for thread in memberships_ended {
        end_membership(tx, *thread, agent, MembershipEnd::Deactivated, at)?;
    }
    // ... and open threads left with no governor close with the effects of §6.5.
    for thread in threads_closed {
        close_thread(tx, *thread, at)?;
    }
    Ok(())
}
