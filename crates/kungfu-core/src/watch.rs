//! What the watch streams speak, in domain terms (DESIGN §10): the change sets of a watched turn
//! with the cursor a watcher resumes from, and the batches of a watched thread's entries and of a
//! shared record's events. The node's watch service produces these from reads of one snapshot; each
//! door converts them for its wire (gRPC `WatchService`, and whatever else follows a turn), so no
//! wire type reaches the service layer. Pure functions only, like every read.

use crate::coord::read::RecordEvent;
use crate::model::{Entry, ObligationId};
use crate::read::{Cursor, TurnItem};
use kungfu_types::{AgentId, GroupId};
use std::collections::{BTreeMap, BTreeSet};

/// What a turn watcher has seen: the turn whose [`turn_digest`] is `digest`, computed at
/// `applied_index` of `group`'s log (the index counts one group's entries, so the cursor names
/// it). Only the digest and the group decide whether a resumed stream must resend the turn; the
/// index is carried for clients and logs. Its text form is the door's (`kungfu_api::watch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TurnCursor {
    pub group: GroupId,
    pub applied_index: u64,
    pub digest: [u8; 32],
}

impl TurnCursor {
    /// Whether this cursor describes exactly the turn of `group` whose digest is `digest`.
    pub fn confirms(&self, group: GroupId, digest: &[u8; 32]) -> bool {
        self.group == group && &self.digest == digest
    }
}

/// SHA-256 over the agent and its whole turn in turn order (the canonical encoding of the core),
/// so two cursors agree exactly when they describe the same items, `next` steps included, of the
/// same agent.
pub fn turn_digest(agent: AgentId, items: &[TurnItem]) -> [u8; 32] {
    let bytes = crate::codec::encode(&(agent, items));
    // `hash_secret` is SHA-256 of its text; hex keeps the input unambiguous.
    crate::secret::hash_secret(&Cursor(bytes).to_hex()).0
}

/// What a wake target (docs/wake.md) saw of its agent: the filtered turn, the filtered
/// opportunities (§8), and the obligations whose deadline nears. With no opportunity and nothing
/// nearing it is the turn's own digest ([`turn_digest`]), so the event's cursor is then exactly a
/// turn cursor; otherwise a digest of the three, which changes when any of them does.
pub fn wake_digest(
    agent: AgentId,
    items: &[TurnItem],
    opportunities: &[crate::model::OpportunityId],
    nearing: &[ObligationId],
) -> [u8; 32] {
    let turn = turn_digest(agent, items);
    if opportunities.is_empty() && nearing.is_empty() {
        return turn;
    }
    crate::codec::sha256(&("kungfu.wake.digest.v1", turn, opportunities, nearing))
}

/// What a client must apply to its copy of the turn to reach the current one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TurnDelta {
    /// Clear the copy first.
    pub reset: bool,
    /// New or changed items, in turn order.
    pub upserted: Vec<TurnItem>,
    /// Obligations no longer in the turn, in obligation order.
    pub removed: Vec<ObligationId>,
}

impl TurnDelta {
    /// A reset to `current`, which is in turn order (as `read::turn` gives it).
    pub fn reset(current: &[TurnItem]) -> TurnDelta {
        TurnDelta { reset: true, upserted: current.to_vec(), removed: Vec::new() }
    }

    /// The change from `previous` (what the client holds) to `current` (in turn order).
    pub fn between(previous: &BTreeMap<ObligationId, TurnItem>, current: &[TurnItem]) -> TurnDelta {
        let upserted: Vec<TurnItem> =
            current.iter().filter(|i| previous.get(&i.obligation) != Some(*i)).cloned().collect();
        let now: BTreeSet<ObligationId> = current.iter().map(|i| i.obligation).collect();
        let removed = previous.keys().filter(|o| !now.contains(o)).copied().collect();
        TurnDelta { reset: false, upserted, removed }
    }

    pub fn is_empty(&self) -> bool {
        !self.reset && self.upserted.is_empty() && self.removed.is_empty()
    }

    /// The client's copy after applying this change set (what the server remembers as sent).
    pub fn apply_to(&self, copy: &mut BTreeMap<ObligationId, TurnItem>) {
        if self.reset {
            copy.clear();
        }
        for i in &self.upserted {
            copy.insert(i.obligation, i.clone());
        }
        for o in &self.removed {
            copy.remove(o);
        }
    }
}

/// One event of a turn watch: a whole change set and the cursor of the turn it reaches. A door
/// may split a large one into several messages, the cursor on the last, so that only a complete
/// change set resumes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnChange {
    pub delta: TurnDelta,
    pub cursor: TurnCursor,
}

/// One event of a thread watch: consecutive entries the watcher may read, read at
/// `applied_index` of `group`'s log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadBatch {
    pub group: GroupId,
    pub applied_index: u64,
    pub entries: Vec<Entry>,
}

/// One event of a shared record's watch (COORDINATION §5.8): consecutive revs, in rev order,
/// redacted ones included, read at `applied_index` of `group`'s log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordBatch {
    pub group: GroupId,
    pub applied_index: u64,
    pub events: Vec<RecordEvent>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::delivery_item as item;
    use kungfu_types::NextStep;

    fn map(items: &[TurnItem]) -> BTreeMap<ObligationId, TurnItem> {
        items.iter().map(|i| (i.obligation, i.clone())).collect()
    }

    #[test]
    fn the_digest_tells_turns_apart_by_items_next_steps_and_agent() {
        let a = [item(1, 10, NextStep::Deliver), item(2, 20, NextStep::Deliver)];
        let d = turn_digest(AgentId(1), &a);
        assert_eq!(d, turn_digest(AgentId(1), &a.clone()));
        assert_ne!(d, turn_digest(AgentId(2), &a), "another agent's cursor never confirms");
        assert_ne!(d, turn_digest(AgentId(1), &a[..1]), "a removed item");
        let mut waiting = a.clone();
        waiting[1].next = NextStep::Wait;
        assert_ne!(d, turn_digest(AgentId(1), &waiting), "a changed next step");
        assert_ne!(turn_digest(AgentId(1), &[]), turn_digest(AgentId(2), &[]));
    }

    #[test]
    fn a_delta_applied_to_the_previous_copy_gives_exactly_the_current_turn() {
        let before = [item(1, 10, NextStep::Deliver), item(2, 20, NextStep::Deliver), item(3, 30, NextStep::Deliver)];
        let after = [item(2, 20, NextStep::Wait), item(3, 30, NextStep::Deliver), item(4, 40, NextStep::Deliver)];
        let mut copy = map(&before);
        let delta = TurnDelta::between(&copy, &after);
        assert!(!delta.reset);
        // Only what changed travels: item 3 is unchanged and not sent again.
        assert_eq!(delta.upserted, vec![after[0].clone(), after[2].clone()]);
        assert_eq!(delta.removed, vec![before[0].obligation]);
        delta.apply_to(&mut copy);
        assert_eq!(copy, map(&after));
        assert!(TurnDelta::between(&copy, &after).is_empty(), "no change, no event");
        // A reset replaces whatever the client held.
        let mut stale = map(&before);
        TurnDelta::reset(&after).apply_to(&mut stale);
        assert_eq!(stale, map(&after));
    }

    #[test]
    fn a_cursor_confirms_only_its_own_groups_turn() {
        let digest = [0xab; 32];
        let g0 = TurnCursor { group: GroupId::ZERO, applied_index: 0x0102, digest };
        let g5 = TurnCursor { group: GroupId(5), ..g0 };
        assert!(g0.confirms(GroupId::ZERO, &digest) && !g5.confirms(GroupId::ZERO, &digest));
        assert!(!g0.confirms(GroupId::ZERO, &[0; 32]));
    }
}
