//! Key layout of the state. Keys are bytes whose lexical order is the logical order (big-endian
//! integers), so a range scan over a prefix walks an index in order on any ordered store (the
//! in-memory map in tests, RocksDB in production). The first byte names the family, which storage
//! maps to a column family (DESIGN §7); nothing else about keys is storage's business.

use crate::action::{ActionKind, Principal};
use crate::model::{ItemKind, ObligationId, OpportunityId, RecordField};
use kungfu_types::{
    AgentId, AssignmentId, EngagementId, EntrySeq, GroupId, IdempotencyKey, MemoryId, ObjectRef, RecordId, SecretHash,
    TaskId, ThreadId, Timestamp, Version, WakeTargetId,
};

/// A key: family byte, then the family's fields.
pub type Key = Vec<u8>;

/// The families of keys. Storage keeps one column family per family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Family {
    /// Counters and other single values.
    Meta = 0,
    /// Records: agents, memories, threads, ... (the present).
    Records = 1,
    /// Derived indexes: turn, due, opportunities, memberships by agent, ...
    Indexes = 2,
    /// The fact journal of every object (the past, append-only, L1).
    Journal = 3,
    /// Receipts by (principal, action kind, idempotency key) (L3).
    Receipts = 4,
}

impl Family {
    pub const ALL: [Family; 5] = [Family::Meta, Family::Records, Family::Indexes, Family::Journal, Family::Receipts];

    pub fn of(key: &[u8]) -> Option<Family> {
        Family::ALL.into_iter().find(|f| key.first() == Some(&(*f as u8)))
    }

    pub fn name(self) -> &'static str {
        match self {
            Family::Meta => "meta",
            Family::Records => "records",
            Family::Indexes => "indexes",
            Family::Journal => "journal",
            Family::Receipts => "receipts",
        }
    }
}

struct K(Vec<u8>);

impl K {
    fn new(family: Family, tag: u8) -> K {
        K(vec![family as u8, tag])
    }
    fn u64(mut self, v: u64) -> K {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn u32(mut self, v: u32) -> K {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn u8(mut self, v: u8) -> K {
        self.0.push(v);
        self
    }
    fn bytes(mut self, v: &[u8]) -> K {
        self.0.extend_from_slice(v);
        self
    }
    fn object(self, o: ObjectRef) -> K {
        match o {
            ObjectRef::Agent(id) => self.u8(1).u64(id.0),
            ObjectRef::Memory(id) => self.u8(2).u64(id.0),
            ObjectRef::Thread(id) => self.u8(3).u64(id.0),
            ObjectRef::Task(id) => self.u8(4).u64(id.0),
        }
    }
    fn obligation(self, o: ObligationId) -> K {
        match o {
            ObligationId::Response { thread, entry, responder } => {
                self.u8(1).u64(thread.0).u64(entry.0).u64(responder.0)
            }
            ObligationId::AssignmentDelivery(a) => self.u8(2).u64(a.0),
            ObligationId::AssignmentJudgment(a) => self.u8(3).u64(a.0),
            ObligationId::EngagementDelivery(e) => self.u8(4).u64(e.0),
            ObligationId::EngagementJudgment(e) => self.u8(5).u64(e.0),
        }
    }
    fn item_kind(self, kind: ItemKind) -> K {
        self.u8(match kind {
            ItemKind::Note => 1,
            ItemKind::Artifact => 2,
            ItemKind::Decision => 3,
        })
    }
    fn field(self, field: RecordField) -> K {
        match field {
            RecordField::Title => self.u8(1),
            RecordField::State => self.u8(2),
            RecordField::Body => self.u8(3),
            RecordField::DecisionState(seq) => self.u8(4).u32(seq),
        }
    }
    fn done(self) -> Key {
        self.0
    }
}

/// The last allocated id of each kind and the fact sequence of one group (issue #19, deliverable
/// 3: no global counter). Group 0's key is `[Meta, 1]`, the key of the one counter before groups
/// existed; any other group's key appends its id (u16, big-endian). A group's own state holds only
/// its own counter (storage already prefixes every key with the group); the group in the key keeps
/// two groups' counters apart wherever their states meet (a merge, a range moved between groups),
/// so no id and no fact position is ever issued twice.
pub fn counters(group: GroupId) -> Key {
    grouped(K::new(Family::Meta, 1), group)
}
/// Design §8.1: the last allocated record id (its own key: `Counters` never gains a field, R4),
/// per group like [`counters`].
pub fn record_counter(group: GroupId) -> Key {
    grouped(K::new(Family::Meta, 2), group)
}

/// Issue #35: the last allocated wake target id (its own key, like the record counter).
pub fn wake_counter(group: GroupId) -> Key {
    grouped(K::new(Family::Meta, 3), group)
}

/// Group 0's key as it always was; another group's with its id appended.
fn grouped(k: K, group: GroupId) -> Key {
    if group == GroupId::ZERO { k.done() } else { k.bytes(&group.to_be_bytes()).done() }
}

// Records -------------------------------------------------------------------------------------

pub fn agent(id: AgentId) -> Key {
    K::new(Family::Records, 1).u64(id.0).done()
}
pub fn memory(id: MemoryId) -> Key {
    K::new(Family::Records, 2).u64(id.0).done()
}
pub fn memory_version(id: MemoryId, v: Version) -> Key {
    K::new(Family::Records, 3).u64(id.0).u32(v.0).done()
}
pub fn thread(id: ThreadId) -> Key {
    K::new(Family::Records, 4).u64(id.0).done()
}
pub fn membership(thread: ThreadId, agent: AgentId) -> Key {
    K::new(Family::Records, 5).u64(thread.0).u64(agent.0).done()
}
/// All memberships (current and ended) of a thread, in agent order.
pub fn memberships_of(thread: ThreadId) -> Key {
    K::new(Family::Records, 5).u64(thread.0).done()
}
pub fn entry(thread: ThreadId, seq: EntrySeq) -> Key {
    K::new(Family::Records, 6).u64(thread.0).u64(seq.0).done()
}
pub fn entries_of(thread: ThreadId) -> Key {
    K::new(Family::Records, 6).u64(thread.0).done()
}
pub fn response(thread: ThreadId, seq: EntrySeq, responder: AgentId) -> Key {
    K::new(Family::Records, 7).u64(thread.0).u64(seq.0).u64(responder.0).done()
}
pub fn responses_to(thread: ThreadId, seq: EntrySeq) -> Key {
    K::new(Family::Records, 7).u64(thread.0).u64(seq.0).done()
}
pub fn assignment(id: AssignmentId) -> Key {
    K::new(Family::Records, 8).u64(id.0).done()
}
pub fn task(id: TaskId) -> Key {
    K::new(Family::Records, 9).u64(id.0).done()
}
pub fn contract_version(task: TaskId, v: Version) -> Key {
    K::new(Family::Records, 10).u64(task.0).u32(v.0).done()
}
pub fn engagement(id: EngagementId) -> Key {
    K::new(Family::Records, 11).u64(id.0).done()
}
pub fn obligation(id: ObligationId) -> Key {
    K::new(Family::Records, 12).obligation(id).done()
}
/// Every open obligation, in id order (for invariant checks).
pub fn all_obligations() -> Key {
    K::new(Family::Records, 12).done()
}
/// Design §8.1: the labels of one Memory version.
pub fn version_labels(id: MemoryId, v: Version) -> Key {
    K::new(Family::Records, 13).u64(id.0).u32(v.0).done()
}
/// Every labeled version, in (memory, version) order, for checks.
pub fn all_version_labels() -> Key {
    K::new(Family::Records, 13).done()
}
/// Design §8.1: the collective headed by `header` (tags 14–17 are kept for the shared record).
pub fn collective(thread: ThreadId, header: EntrySeq) -> Key {
    K::new(Family::Records, 18).u64(thread.0).u64(header.0).done()
}
/// Every collective, for checks.
pub fn all_collectives() -> Key {
    K::new(Family::Records, 18).done()
}
/// Issue #35: one wake target, under its agent, so an agent's targets are one prefix.
pub fn wake_target(agent: AgentId, id: WakeTargetId) -> Key {
    K::new(Family::Records, 19).u64(agent.0).u64(id.0).done()
}
/// The wake targets of one agent, in id order.
pub fn wake_targets_of(agent: AgentId) -> Key {
    K::new(Family::Records, 19).u64(agent.0).done()
}
/// Every wake target (the leader's deliverer loads them when it starts leading).
pub fn all_wake_targets() -> Key {
    K::new(Family::Records, 19).done()
}
/// Design §8.1: a shared record's structure.
pub fn shared_record(id: RecordId) -> Key {
    K::new(Family::Records, 14).u64(id.0).done()
}
/// Every shared record, for checks.
pub fn all_shared_records() -> Key {
    K::new(Family::Records, 14).done()
}
/// Design §8.1: a scalar's value from `rev` on; the value at rev R is the last key `<= R`.
pub fn record_value(id: RecordId, field: RecordField, rev: u32) -> Key {
    K::new(Family::Records, 15).u64(id.0).field(field).u32(rev).done()
}
/// The whole history of one scalar.
pub fn record_values_of(id: RecordId, field: RecordField) -> Key {
    K::new(Family::Records, 15).u64(id.0).field(field).done()
}
/// Every scalar value of every record, for checks.
pub fn all_record_values() -> Key {
    K::new(Family::Records, 15).done()
}
/// Design §8.1: an item of a record, in append order within its kind.
pub fn record_item(id: RecordId, kind: ItemKind, seq: u32) -> Key {
    K::new(Family::Records, 16).u64(id.0).item_kind(kind).u32(seq).done()
}
pub fn record_items_of(id: RecordId, kind: ItemKind) -> Key {
    K::new(Family::Records, 16).u64(id.0).item_kind(kind).done()
}
/// Every item of every record, for checks.
pub fn all_record_items() -> Key {
    K::new(Family::Records, 16).done()
}
/// Design §8.1: the summary of one accepted write.
pub fn record_revision(id: RecordId, rev: u32) -> Key {
    K::new(Family::Records, 17).u64(id.0).u32(rev).done()
}
pub fn record_revisions_of(id: RecordId) -> Key {
    K::new(Family::Records, 17).u64(id.0).done()
}
/// A whole record kind (tag) for full scans in checks and rebuilds.
pub fn records_prefix() -> Key {
    vec![Family::Records as u8]
}

// Indexes -------------------------------------------------------------------------------------

/// §8: the turn of an agent, ordered by when each obligation arose.
pub fn turn(agent: AgentId, arose_at: Timestamp, id: ObligationId) -> Key {
    K::new(Family::Indexes, 1).u64(agent.0).u64(arose_at.0).obligation(id).done()
}
pub fn turn_of(agent: AgentId) -> Key {
    K::new(Family::Indexes, 1).u64(agent.0).done()
}
/// Every agent's turn index.
pub fn turn_prefix() -> Key {
    K::new(Family::Indexes, 1).done()
}
/// An agent's open obligations within one object.
pub fn object_obligation(object: ObjectRef, agent: AgentId, id: ObligationId) -> Key {
    K::new(Family::Indexes, 2).object(object).u64(agent.0).obligation(id).done()
}
pub fn object_obligations_of(object: ObjectRef, agent: AgentId) -> Key {
    K::new(Family::Indexes, 2).object(object).u64(agent.0).done()
}
pub fn object_obligations(object: ObjectRef) -> Key {
    K::new(Family::Indexes, 2).object(object).done()
}
/// DESIGN §4: the due index `(due_at, obligation)`.
pub fn due(due_at: Timestamp, id: ObligationId) -> Key {
    K::new(Family::Indexes, 3).u64(due_at.0).obligation(id).done()
}
pub fn due_all() -> Key {
    K::new(Family::Indexes, 3).done()
}
/// The due time encoded in a key of [`due`].
pub fn due_time_of(key: &[u8]) -> Option<Timestamp> {
    let bytes: [u8; 8] = key.get(2..10)?.try_into().ok()?;
    Some(Timestamp(u64::from_be_bytes(bytes)))
}
/// The due index of one object, so an action settles its own object's deadlines first (L4).
pub fn object_due(object: ObjectRef, due_at: Timestamp, id: ObligationId) -> Key {
    K::new(Family::Indexes, 4).object(object).u64(due_at.0).obligation(id).done()
}
pub fn object_due_of(object: ObjectRef) -> Key {
    K::new(Family::Indexes, 4).object(object).done()
}
/// §8: opportunities of an agent, ordered by when they arose.
pub fn opportunity(agent: AgentId, arose_at: Timestamp, id: OpportunityId) -> Key {
    let k = K::new(Family::Indexes, 5).u64(agent.0).u64(arose_at.0);
    match id {
        OpportunityId::Assignment(a) => k.u8(1).u64(a.0).done(),
        OpportunityId::Task(t) => k.u8(2).u64(t.0).done(),
    }
}
pub fn opportunities_of(agent: AgentId) -> Key {
    K::new(Family::Indexes, 5).u64(agent.0).done()
}
pub fn opportunities_prefix() -> Key {
    K::new(Family::Indexes, 5).done()
}
/// Current memberships of an agent.
pub fn agent_thread(agent: AgentId, thread: ThreadId) -> Key {
    K::new(Family::Indexes, 6).u64(agent.0).u64(thread.0).done()
}
pub fn agent_threads(agent: AgentId) -> Key {
    K::new(Family::Indexes, 6).u64(agent.0).done()
}
/// Undelivered assignments of a thread in which the agent is creator or addressee (§6.2 effects).
pub fn live_assignment(thread: ThreadId, agent: AgentId, a: AssignmentId) -> Key {
    K::new(Family::Indexes, 7).u64(thread.0).u64(agent.0).u64(a.0).done()
}
pub fn live_assignments_of(thread: ThreadId, agent: AgentId) -> Key {
    K::new(Family::Indexes, 7).u64(thread.0).u64(agent.0).done()
}
pub fn live_assignments(thread: ThreadId) -> Key {
    K::new(Family::Indexes, 7).u64(thread.0).done()
}
/// All assignments of a thread, in id order.
pub fn thread_assignment(thread: ThreadId, a: AssignmentId) -> Key {
    K::new(Family::Indexes, 8).u64(thread.0).u64(a.0).done()
}
pub fn thread_assignments(thread: ThreadId) -> Key {
    K::new(Family::Indexes, 8).u64(thread.0).done()
}
/// All engagements of a Task, in id order.
pub fn task_engagement(task: TaskId, e: EngagementId) -> Key {
    K::new(Family::Indexes, 9).u64(task.0).u64(e.0).done()
}
pub fn task_engagements(task: TaskId) -> Key {
    K::new(Family::Indexes, 9).u64(task.0).done()
}
/// §7.3: the one open engagement of an agent with a Task.
pub fn open_engagement(task: TaskId, agent: AgentId) -> Key {
    K::new(Family::Indexes, 10).u64(task.0).u64(agent.0).done()
}
pub fn open_engagements_prefix() -> Key {
    K::new(Family::Indexes, 10).done()
}
/// The thread whose live admission grant has this hash (§6.1).
pub fn grant_by_hash(hash: &SecretHash) -> Key {
    K::new(Family::Indexes, 11).bytes(&hash.0).done()
}
/// The agent whose bearer key has this hash (authentication at the server edge).
pub fn agent_by_key(hash: &SecretHash) -> Key {
    K::new(Family::Indexes, 12).bytes(&hash.0).done()
}
/// Engagements of an agent, for its own reads.
pub fn agent_engagement(agent: AgentId, e: EngagementId) -> Key {
    K::new(Family::Indexes, 13).u64(agent.0).u64(e.0).done()
}
pub fn agent_engagements(agent: AgentId) -> Key {
    K::new(Family::Indexes, 13).u64(agent.0).done()
}
/// Design §8.1: the records of a thread, in id order.
pub fn thread_record(thread: ThreadId, id: RecordId) -> Key {
    K::new(Family::Indexes, 14).u64(thread.0).u64(id.0).done()
}
pub fn thread_records(thread: ThreadId) -> Key {
    K::new(Family::Indexes, 14).u64(thread.0).done()
}
/// Design §8.1: an item id already used in a record (the duplicate check), pointing at its number.
pub fn record_item_id(id: RecordId, kind: ItemKind, item: &str) -> Key {
    K::new(Family::Indexes, 15).u64(id.0).item_kind(kind).bytes(item.as_bytes()).done()
}
/// Every item-id index, for checks.
pub fn record_item_id_prefix() -> Key {
    K::new(Family::Indexes, 15).done()
}
/// Design §8.1: the record write an entry carries.
pub fn entry_record(thread: ThreadId, entry: EntrySeq) -> Key {
    K::new(Family::Indexes, 16).u64(thread.0).u64(entry.0).done()
}
pub fn indexes_prefix() -> Key {
    vec![Family::Indexes as u8]
}

// Journal and receipts ------------------------------------------------------------------------

pub fn journal(object: ObjectRef, seq: u64, idx: u32) -> Key {
    K::new(Family::Journal, 1).object(object).u64(seq).u32(idx).done()
}
pub fn journal_of(object: ObjectRef) -> Key {
    K::new(Family::Journal, 1).object(object).done()
}
pub fn journal_prefix() -> Key {
    vec![Family::Journal as u8]
}

pub fn receipt(principal: Principal, kind: ActionKind, key: &IdempotencyKey) -> Key {
    let k = K::new(Family::Receipts, 1);
    let k = match principal {
        Principal::Agent(a) => k.u8(1).u64(a.0),
        Principal::Registrar => k.u8(2).u64(0),
        Principal::Operator => k.u8(3).u64(0),
        Principal::System => k.u8(4).u64(0),
    };
    // The kind's stable wire name, then a zero byte (absent from names and keys) as separator.
    k.bytes(kind.as_str().as_bytes()).u8(0).bytes(key.as_str().as_bytes()).done()
}

/// The smallest key strictly greater than every key with this prefix, for bounded scans.
pub fn prefix_end(prefix: &[u8]) -> Option<Key> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// Reads the fields of a key back, in the order [`K`] wrote them.
struct Fields<'k>(&'k [u8]);

impl Fields<'_> {
    fn u8(&mut self) -> Option<u8> {
        let (&v, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(v)
    }
    fn u64(&mut self) -> Option<u64> {
        let (head, rest) = self.0.split_first_chunk::<8>()?;
        self.0 = rest;
        Some(u64::from_be_bytes(*head))
    }
    fn object(&mut self) -> Option<ObjectRef> {
        Some(match (self.u8()?, self.u64()?) {
            (1, id) => ObjectRef::Agent(AgentId(id)),
            (2, id) => ObjectRef::Memory(MemoryId(id)),
            (3, id) => ObjectRef::Thread(ThreadId(id)),
            (4, id) => ObjectRef::Task(TaskId(id)),
            _ => return None,
        })
    }
    fn obligation(&mut self) -> Option<ObligationId> {
        Some(match self.u8()? {
            1 => ObligationId::Response {
                thread: ThreadId(self.u64()?),
                entry: EntrySeq(self.u64()?),
                responder: AgentId(self.u64()?),
            },
            2 => ObligationId::AssignmentDelivery(AssignmentId(self.u64()?)),
            3 => ObligationId::AssignmentJudgment(AssignmentId(self.u64()?)),
            4 => ObligationId::EngagementDelivery(EngagementId(self.u64()?)),
            5 => ObligationId::EngagementJudgment(EngagementId(self.u64()?)),
            _ => return None,
        })
    }
}

/// The `(due_at, obligation)` of a key of [`due`]; None for any other key.
pub fn due_entry_of(key: &[u8]) -> Option<(Timestamp, ObligationId)> {
    let mut f = Fields(key.strip_prefix(due_all().as_slice())?);
    let due_at = Timestamp(f.u64()?);
    let id = f.obligation()?;
    f.0.is_empty().then_some((due_at, id))
}

/// The agent of a key of [`turn`]; None for any other key.
pub fn turn_agent_of(key: &[u8]) -> Option<AgentId> {
    let mut f = Fields(key.strip_prefix(turn_prefix().as_slice())?);
    f.u64().map(AgentId)
}

/// The agent of a key of [`opportunity`]; None for any other key.
pub fn opportunity_agent_of(key: &[u8]) -> Option<AgentId> {
    Fields(key.strip_prefix(opportunities_prefix().as_slice())?).u64().map(AgentId)
}

/// The agent of a key of [`open_engagement`]; None for any other key.
pub fn open_engagement_agent_of(key: &[u8]) -> Option<AgentId> {
    let mut f = Fields(key.strip_prefix(open_engagements_prefix().as_slice())?);
    f.u64()?;
    f.u64().map(AgentId)
}

/// The object of a key of [`journal`]; None for any other key.
pub fn journal_object_of(key: &[u8]) -> Option<ObjectRef> {
    Fields(key.strip_prefix(K::new(Family::Journal, 1).done().as_slice())?).object()
}
