//! Raft groups, and the partition bits every id carries (issue #19, deliverable 3;
//! `docs/scaling.md` §3.3 and §11).
//!
//! Today a cluster runs one raft group, [`GroupId::ZERO`], and every format below writes exactly
//! the bytes it wrote before groups existed. The formats that name a group are ready so that a
//! second group needs no migration of what group 0 has stored.
//!
//! **Why `u16`.** The id is the shard prefix `kungfu-storage` has written before every state key
//! from the start (two bytes, big-endian, today 0), so group 0 keeps every key it has; it is also
//! the partition in the high bits of every id (below), where a wider group would take sequence
//! bits. 65,535 groups is a thousand times the 64 the scale model measures (`docs/scaling.md` §8);
//! group ids are never reused (a split takes a new one), which that headroom allows for decades of
//! splits. A wider group id would be a new key layout and a new id layout, both versioned.
//!
//! **Ids.** Every id of an object (`AgentId`, `MemoryId`, `ThreadId`, `AssignmentId`, `TaskId`,
//! `EngagementId`, `RecordId`) is a `u64` laid out as
//!
//! ```text
//!  63            48 47                                             0
//! +----------------+------------------------------------------------+
//! | group (16 bits)|  sequence in that group, 1 ..= 2^48 - 1 (48 bits)|
//! +----------------+------------------------------------------------+
//! ```
//!
//! The group is the one that allocated the id, from a counter in its own state (no global counter:
//! replicas of one group agree because the counter is replicated state, and two groups never
//! allocate the same id because their high bits differ). In group 0 the id is the sequence itself,
//! so every id allocated so far, and its text (`th_7`), keeps its meaning. The top bits say which
//! partition allocated the id, not where its object lives now; today a group's partition is its
//! own id. When a group holds several partitions, the allocator is called with the anchor's
//! partition instead, and a partition's counter moves with it, so ids stay unique and can route
//! by their partition; partition 0, holding every id allocated before groups, is placed by the
//! hash of the whole id (`docs/scaling.md` §3.1, §3.3, §11). A split or a move renames nothing.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A raft group: one replicated log and the state it orders. See the module documentation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct GroupId(pub u16);

impl GroupId {
    /// The one group of every cluster today.
    pub const ZERO: GroupId = GroupId(0);

    /// The group's two bytes as they prefix every state key of the group (big-endian, so the keys
    /// of one group are one contiguous range).
    pub const fn to_be_bytes(self) -> [u8; 2] {
        self.0.to_be_bytes()
    }

    /// The group of a wire field wider than the id (a proto `uint32`), if it is one.
    pub fn from_wire(v: u32) -> Option<GroupId> {
        u16::try_from(v).ok().map(GroupId)
    }
}

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "group {}", self.0)
    }
}

/// Bits of an id below its group: the sequence within the group.
pub const ID_SEQ_BITS: u32 = 48;

/// The largest sequence number a group allocates of one kind of id.
pub const ID_MAX_SEQ: u64 = (1 << ID_SEQ_BITS) - 1;

/// The id numbered `seq` in `group`'s partition, or None when `seq` does not fit its 48 bits.
pub fn compose_id(group: GroupId, seq: u64) -> Option<u64> {
    (seq <= ID_MAX_SEQ).then(|| (u64::from(group.0) << ID_SEQ_BITS) | seq)
}

/// The group that allocated `id`.
pub fn id_group(id: u64) -> GroupId {
    GroupId((id >> ID_SEQ_BITS) as u16)
}

/// The sequence number of `id` within the group that allocated it.
pub fn id_seq(id: u64) -> u64 {
    id & ID_MAX_SEQ
}

/// The allocator of every kind of id: the id after `last` in `group`'s partition, where `last` is
/// the group's counter for that kind (the last id it allocated, 0 for none). None when the group
/// has spent its 2^48 - 1 ids of that kind, or when `last` belongs to another group's partition
/// (a counter that cannot be this group's). In group 0 this is `last + 1`, as before groups.
pub fn next_id(group: GroupId, last: u64) -> Option<u64> {
    if last != 0 && id_group(last) != group {
        return None;
    }
    compose_id(group, id_seq(last).checked_add(1)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_zero_ids_are_the_sequence_itself() {
        assert_eq!(next_id(GroupId::ZERO, 0), Some(1));
        assert_eq!(next_id(GroupId::ZERO, 6), Some(7));
        assert_eq!(compose_id(GroupId::ZERO, 7), Some(7));
        assert_eq!(next_id(GroupId::ZERO, ID_MAX_SEQ), None, "group 0 never spills into group 1");
    }

    #[test]
    fn other_groups_allocate_in_their_own_partition() {
        let g = GroupId(5);
        let first = next_id(g, 0).expect("an id");
        assert_eq!(first, 0x0005_0000_0000_0001);
        assert_eq!((id_group(first), id_seq(first)), (g, 1));
        assert_eq!(next_id(g, first), Some(0x0005_0000_0000_0002));
        assert_eq!(next_id(g, 7), None, "a counter of group 0 is not group 5's");
        assert_eq!(next_id(GroupId(u16::MAX), compose_id(GroupId(u16::MAX), ID_MAX_SEQ).expect("fits")), None);
        assert_eq!(GroupId::from_wire(70_000), None);
        assert_eq!(GroupId::from_wire(5), Some(g));
    }
}
