//! Where each object lives under a candidate placement, and how a key finds its group.
//!
//! Every object has a *partition key*: a 64-bit hash of the object that owns its placement (its
//! root). Groups own contiguous ranges of the hash space, as TiKV regions and CockroachDB ranges
//! own ranges of keys; with `n` equal ranges the group of hash `h` is `h * n / 2^64`. Splitting a
//! range in two keeps every other key where it was, so the model's `n` groups are what `n/2` groups
//! become after every range splits once.

use crate::rng::mix;

/// An object an action touches, with the attributes placements may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Obj {
    Agent { id: u32 },
    Thread { id: u32, creator: u32 },
    Task { id: u32, author: u32 },
    Memory { id: u32, author: u32, born_in: Option<u32> },
}

/// The candidate placements of `docs/scaling.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Placement {
    /// Every object by the hash of its own id (agents, threads, Tasks, Memories independently).
    Hash,
    /// Everything an agent creates (its threads, Tasks, Memories) in its home group.
    AgentHome,
    /// Threads and Tasks by their own id; a Memory born in an entry lives with that entry's thread,
    /// a standalone Memory in its author's home. Receipts, presence and the agent record at home.
    ObjectLocal,
}

impl Placement {
    pub const ALL: [Placement; 3] = [Placement::Hash, Placement::AgentHome, Placement::ObjectLocal];

    pub fn name(self) -> &'static str {
        match self {
            Placement::Hash => "hash",
            Placement::AgentHome => "agent-home",
            Placement::ObjectLocal => "object-local",
        }
    }

    /// The group of an object among `n` groups.
    pub fn group(self, obj: Obj, n: u32) -> u32 {
        let home = |a: u32| bucket(key(TAG_AGENT, a), n);
        match (self, obj) {
            (_, Obj::Agent { id }) => home(id),
            (Placement::Hash | Placement::ObjectLocal, Obj::Thread { id, .. }) => bucket(key(TAG_THREAD, id), n),
            (Placement::Hash | Placement::ObjectLocal, Obj::Task { id, .. }) => bucket(key(TAG_TASK, id), n),
            (Placement::Hash, Obj::Memory { id, .. }) => bucket(key(TAG_MEMORY, id), n),
            (Placement::AgentHome, Obj::Thread { creator, .. }) => home(creator),
            (Placement::AgentHome, Obj::Task { author, .. }) => home(author),
            (Placement::AgentHome, Obj::Memory { author, .. }) => home(author),
            (Placement::ObjectLocal, Obj::Memory { author, born_in, .. }) => match born_in {
                Some(t) => bucket(key(TAG_THREAD, t), n),
                None => home(author),
            },
        }
    }
}

const TAG_AGENT: u64 = 1;
const TAG_THREAD: u64 = 2;
const TAG_TASK: u64 = 3;
const TAG_MEMORY: u64 = 4;

/// The partition key of an object: a stable hash of its kind and number.
pub fn key(tag: u64, id: u32) -> u64 {
    mix((tag << 56) ^ id as u64)
}

/// The group owning hash `h` when `n` groups split the hash space into equal ranges.
pub fn bucket(h: u64, n: u32) -> u32 {
    ((h as u128 * n as u128) >> 64) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_group_holds_everything() {
        for p in Placement::ALL {
            assert_eq!(p.group(Obj::Thread { id: 9, creator: 3 }, 1), 0);
            assert_eq!(p.group(Obj::Agent { id: 3 }, 1), 0);
        }
    }

    #[test]
    fn splitting_every_range_keeps_keys_in_the_halves_of_their_range() {
        for id in 0..1000 {
            let h = key(TAG_THREAD, id);
            assert_eq!(bucket(h, 8) / 2, bucket(h, 4));
        }
    }

    #[test]
    fn placements_colocate_what_they_promise() {
        let n = 64;
        let t = Obj::Thread { id: 17, creator: 5 };
        let born = Obj::Memory { id: 900, author: 6, born_in: Some(17) };
        assert_eq!(Placement::ObjectLocal.group(born, n), Placement::ObjectLocal.group(t, n));
        assert_eq!(Placement::AgentHome.group(t, n), Placement::AgentHome.group(Obj::Agent { id: 5 }, n));
        let standalone = Obj::Memory { id: 901, author: 6, born_in: None };
        assert_eq!(Placement::ObjectLocal.group(standalone, n), Placement::Hash.group(Obj::Agent { id: 6 }, n));
    }
}
