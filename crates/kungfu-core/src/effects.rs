//! What one applied command changed, in the terms the runtime acts on (DESIGN §4, STYLE habit 11:
//! effects follow facts). Read from the command's changeset, the exact writes that `evolve` made
//! for its facts, so nothing is re-derived by polling state: the deadlines it armed and ended (the
//! due index, L4), the agents whose turn changed (the turn index, §8), the
//! agents whose opportunities changed (the opportunities and engagement indexes, §8), and the objects whose
//! journals recorded a fact (L1), which is every object a fact concerns.

use crate::keys;
use crate::model::ObligationId;
use crate::state::Changeset;
use kungfu_types::{AgentId, ObjectRef, Timestamp};
use std::collections::BTreeSet;

/// One deadline of the due index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Deadline {
    pub due_at: Timestamp,
    pub obligation: ObligationId,
}

/// What one command changed that timers and streams wake on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Effects {
    /// Deadlines that now exist: an obligation with a deadline arose.
    pub armed: Vec<Deadline>,
    /// Deadlines that no longer exist: their obligation ended, by an action or by the deadline.
    pub ended: Vec<Deadline>,
    /// Agents whose turn gained or lost an obligation.
    pub turns: BTreeSet<AgentId>,
    /// Agents whose opportunities (§8) may have changed: one arose or ended, or the agent's own
    /// engagement in a Task opened or closed (an engaged agent is not offered it). A Task paused
    /// or resumed changes its named agents' opportunities with no index write: the Task's facts say
    /// so (`TaskPaused`, `TaskResumed`).
    pub opportunities: BTreeSet<AgentId>,
    /// Objects whose journal recorded a fact of this command.
    pub objects: BTreeSet<ObjectRef>,
}

impl Effects {
    /// The effects of one command's changeset (`Applied::changes`).
    pub fn of(changes: &Changeset) -> Effects {
        let mut e = Effects::default();
        for (key, value) in range(changes, &keys::due_all()) {
            if let Some((due_at, obligation)) = keys::due_entry_of(key) {
                let d = Deadline { due_at, obligation };
                if value.is_some() { e.armed.push(d) } else { e.ended.push(d) }
            }
        }
        for (key, _) in range(changes, &keys::turn_prefix()) {
            e.turns.extend(keys::turn_agent_of(key));
        }
        for (key, _) in range(changes, &keys::opportunities_prefix()) {
            e.opportunities.extend(keys::opportunity_agent_of(key));
        }
        for (key, _) in range(changes, &keys::open_engagements_prefix()) {
            e.opportunities.extend(keys::open_engagement_agent_of(key));
        }
        for (key, _) in range(changes, &keys::journal_prefix()) {
            e.objects.extend(keys::journal_object_of(key));
        }
        e
    }

    /// Whether the command changed nothing any timer or stream follows.
    pub fn is_empty(&self) -> bool {
        self.armed.is_empty()
            && self.ended.is_empty()
            && self.turns.is_empty()
            && self.opportunities.is_empty()
            && self.objects.is_empty()
    }
}

/// The writes of `changes` under `prefix`, in key order.
fn range<'c>(
    changes: &'c Changeset,
    prefix: &[u8],
) -> impl Iterator<Item = (&'c keys::Key, &'c Option<crate::state::Record>)> + 'c {
    let prefix = prefix.to_vec();
    changes.range(prefix.clone()..).take_while(move |(k, _)| k.starts_with(&prefix))
}
