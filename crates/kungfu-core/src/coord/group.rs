//! Groups and ranks over thread members (design §4.1, fak `internal/comm`): pure functions, no
//! state, no IO. A group is a set of agent ids; a member's rank is its position in ascending id
//! order, so a rank is a function of the set alone, whatever order the ids arrived in.
//!
//! The order is the numeric order of [`AgentId`] (the order of every `BTreeSet<AgentId>` in the
//! core), not fak's bytewise order of string ids: `ag_9` ranks before `ag_10` here and after it in
//! fak (design §12 item 20). Using the core's own order means a scatter's goals, a gather's ranks
//! and these helpers can never disagree about who is rank r.

use kungfu_types::{AgentId, EntrySeq, ThreadId};
use std::collections::{BTreeMap, BTreeSet};

/// Why a list of ids is not a group (fak `ErrEmptyGroup`, `ErrDupMember`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    /// A group needs at least one member: a collective over nobody has no rank 0.
    #[error("a group needs at least one member")]
    Empty,
    /// The same agent is listed twice; a rank must be a function of the member set, so a list
    /// that names a member twice is refused rather than silently deduplicated.
    #[error("{0} is listed more than once")]
    Duplicate(AgentId),
}

/// Builds a group from a list of ids in any order, refusing an empty list and a repeated id.
// design §4.1; §4.3 step 2 answers both refusals with INVALID_ARGUMENT.
pub fn group(ids: &[AgentId]) -> Result<BTreeSet<AgentId>, GroupError> {
    if ids.is_empty() {
        return Err(GroupError::Empty);
    }
    let mut members = BTreeSet::new();
    for &id in ids {
        if !members.insert(id) {
            return Err(GroupError::Duplicate(id));
        }
    }
    Ok(members)
}

/// The members in rank order: `ranks(m)[r]` is the member of rank `r` (ascending numeric id,
/// design §4.1, §12 item 20).
pub fn ranks(members: &BTreeSet<AgentId>) -> Vec<AgentId> {
    members.iter().copied().collect()
}

/// The rank of `id` in `members`, or `None` when `id` is not a member.
pub fn rank_of(members: &BTreeSet<AgentId>, id: AgentId) -> Option<usize> {
    // The rank is the number of members with a smaller id.
    members.contains(&id).then(|| members.range(..id).count())
}

/// Partitions `members` by color (fak `Split`, MPI's `Comm_split`): every member whose color is
/// `Some(c)` joins sub-group `c`; a member whose color is `None` joins none. Each sub-group lists
/// its members in rank order, re-ranked from 0 (its index in the vector).
///
/// A sub-group shares its thread's visibility: it is a naming of members, not an isolated channel
/// (design §4.1).
pub fn split(members: &BTreeSet<AgentId>, color: impl Fn(AgentId) -> Option<String>) -> BTreeMap<String, Vec<AgentId>> {
    let mut out: BTreeMap<String, Vec<AgentId>> = BTreeMap::new();
    // Members are visited in ascending order, so each sub-group comes out in its own rank order.
    for &id in members {
        if let Some(c) = color(id) {
            out.entry(c).or_default().push(id);
        }
    }
    out
}

/// Names one collective: the thread it lives in and the entry that heads it (the scatter header,
/// design §4.3, §4.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CollectiveRef {
    /// The thread of the collective.
    pub thread: ThreadId,
    /// The header entry of the collective.
    pub header: EntrySeq,
}

/// One member's identity in a collective (fak `Membership`): where it belongs, its rank and the
/// size of the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Spawned {
    /// The collective this identity belongs to.
    pub wave: CollectiveRef,
    /// The member.
    pub member: AgentId,
    /// The member's rank, from 0.
    pub rank: u32,
    /// The number of members of the group.
    pub size: u32,
}

/// Mints one identity per member, in rank order (fak `Spawn`). It starts nothing and moves no
/// bytes (design §4.1): what a member does with its identity is up to the member.
///
/// # Panics
///
/// If the group has more than `u32::MAX` members, which no thread can hold (the core bounds a
/// collective by `max_collective_members`, design §4.3).
pub fn spawn(wave: CollectiveRef, members: &BTreeSet<AgentId>) -> Vec<Spawned> {
    let size = u32::try_from(members.len()).expect("a group has fewer than 2^32 members");
    (0..size).zip(members).map(|(rank, &member)| Spawned { wave, member, rank, size }).collect()
}
