//! How the core reads and writes state. The core reads through [`StateRead`], a small ordered
//! key-value interface that RocksDB implements in production and [`MemState`] implements for
//! tests; it writes into a [`Tx`], an overlay whose pending writes become the [`Changeset`] that
//! storage commits in one atomic batch.

use crate::fact::JournaledFact;
use crate::keys::{self, Key};
use crate::model::*;
use crate::receipt::StoredReceipt;
use kungfu_types::{
    AgentId, AssignmentId, EngagementId, EntrySeq, GroupId, MemoryId, ObjectRef, RecordId, SecretHash, TaskId,
    ThreadId, Timestamp, Version, WakeTargetId,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ops::Bound;

/// Every value stored under a key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Record {
    Counters(Counters),
    Agent(Agent),
    Memory(Memory),
    MemoryVersion(MemoryVersion),
    Thread(Thread),
    Membership(Membership),
    Entry(Entry),
    Response(Response),
    Assignment(Assignment),
    Task(Task),
    ContractVersion(ContractVersion),
    Engagement(Engagement),
    Obligation(Obligation),
    /// The value of an index key: what it points at.
    Ref(IndexRef),
    Fact(JournaledFact),
    Receipt(StoredReceipt),
    // The coordination layer (appended, design R4).
    Labels(VersionLabels),
    Collective(Collective),
    // The shared record (appended, design §8.1).
    SharedRecord(SharedRecord),
    RecordValue(RecordValue),
    RecordItem(RecordItem),
    RecordRevision(RecordRevision),
    /// A counter at its own meta key (the record counter).
    Counter(u64),
    // Wake targets (appended, issue #35).
    WakeTarget(WakeTarget),
}

/// The target of an index entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum IndexRef {
    Obligation(ObligationId),
    Opportunity(OpportunityId),
    Agent(AgentId),
    Thread(ThreadId),
    Assignment(AssignmentId),
    Engagement(EngagementId),
    // The shared record (appended, design §8.1).
    Record(RecordId),
    /// An item's number within its kind.
    Item(u32),
    RecordRev {
        record: RecordId,
        rev: u32,
    },
}

/// A read failed below the core (IO, corruption). Never a protocol rejection: the node must stop
/// acknowledging rather than decide on a state it cannot read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("storage read failed: {0}")]
    Io(String),
    #[error("stored state is corrupt at key {key}: {what}")]
    Corrupt { key: String, what: String },
}

impl StateError {
    pub fn corrupt(key: &[u8], what: impl Into<String>) -> StateError {
        StateError::Corrupt { key: hex::encode(key), what: what.into() }
    }
}

/// Ordered key-value reads of one consistent state (§9: every read rests on one state).
pub trait StateRead {
    fn get(&self, key: &[u8]) -> Result<Option<Record>, StateError>;

    /// Keys that start with `prefix` and are strictly greater than `after` (if given), ascending,
    /// at most `limit` of them.
    fn scan(&self, prefix: &[u8], after: Option<&[u8]>, limit: usize) -> Result<Vec<(Key, Record)>, StateError>;

    /// Keys that start with `prefix` and are strictly smaller than `before` (if given),
    /// descending, at most `limit` of them.
    fn scan_rev(&self, prefix: &[u8], before: Option<&[u8]>, limit: usize) -> Result<Vec<(Key, Record)>, StateError>;

    /// The raft group whose state this is (issue #19, deliverable 3): its counters are its own
    /// ([`keys::counters`]) and it allocates ids in its own partition ([`kungfu_types::group`]).
    /// Group 0, the one group of today, unless the store holds another.
    fn group(&self) -> GroupId {
        GroupId::ZERO
    }

    /// A time no entry of the due index ([`keys::due`]) is earlier than: when it is after an
    /// action's time, no deadline is due and settling (L4) need not scan the index of each object
    /// the action touches (issue #30: that scan was an iterator over the store for every post).
    /// Derived from the state and kept beside it in memory, never stored: it changes no byte a
    /// replica writes. [`Timestamp::ZERO`], which bounds nothing, unless the state keeps it.
    fn due_floor(&self) -> Timestamp {
        Timestamp::ZERO
    }

    /// Whether this state keeps what it read, so that an overlay over it need not keep a copy of
    /// its own ([`Tx`]: a command's two phases are overlays over the batch's, issue #30).
    fn caches_reads(&self) -> bool {
        false
    }
}

impl<T: StateRead + ?Sized> StateRead for &T {
    fn get(&self, key: &[u8]) -> Result<Option<Record>, StateError> {
        (**self).get(key)
    }
    fn scan(&self, prefix: &[u8], after: Option<&[u8]>, limit: usize) -> Result<Vec<(Key, Record)>, StateError> {
        (**self).scan(prefix, after, limit)
    }
    fn scan_rev(&self, prefix: &[u8], before: Option<&[u8]>, limit: usize) -> Result<Vec<(Key, Record)>, StateError> {
        (**self).scan_rev(prefix, before, limit)
    }
    fn due_floor(&self) -> Timestamp {
        (**self).due_floor()
    }
    fn caches_reads(&self) -> bool {
        (**self).caches_reads()
    }
    fn group(&self) -> GroupId {
        (**self).group()
    }
}

/// A state read as the state of `group`: for tests and tools that run the core as a group other
/// than group 0 over an in-memory state.
#[derive(Clone, Debug)]
pub struct InGroup<S> {
    pub group: GroupId,
    pub state: S,
}

impl<S: StateRead> StateRead for InGroup<S> {
    fn get(&self, key: &[u8]) -> Result<Option<Record>, StateError> {
        self.state.get(key)
    }
    fn scan(&self, prefix: &[u8], after: Option<&[u8]>, limit: usize) -> Result<Vec<(Key, Record)>, StateError> {
        self.state.scan(prefix, after, limit)
    }
    fn scan_rev(&self, prefix: &[u8], before: Option<&[u8]>, limit: usize) -> Result<Vec<(Key, Record)>, StateError> {
        self.state.scan_rev(prefix, before, limit)
    }
    fn group(&self) -> GroupId {
        self.group
    }
}

/// Pending writes of one command: `Some(record)` puts, `None` deletes. Applied atomically.
pub type Changeset = BTreeMap<Key, Option<Record>>;

/// The state held in memory, for tests and tools. Same ordering as the RocksDB store.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemState {
    pub map: BTreeMap<Key, Record>,
}

impl MemState {
    pub fn new() -> MemState {
        MemState::default()
    }

    /// Commits a changeset, as storage does in one write batch.
    pub fn commit(&mut self, changes: &Changeset) {
        for (k, v) in changes {
            match v {
                Some(r) => {
                    self.map.insert(k.clone(), r.clone());
                }
                None => {
                    self.map.remove(k);
                }
            }
        }
    }
}

fn range_end(prefix: &[u8], before: Option<&[u8]>) -> Bound<Vec<u8>> {
    match (before, keys::prefix_end(prefix)) {
        (Some(b), Some(end)) if b < end.as_slice() => Bound::Excluded(b.to_vec()),
        (Some(b), None) => Bound::Excluded(b.to_vec()),
        (_, Some(end)) => Bound::Excluded(end),
        (None, None) => Bound::Unbounded,
    }
}

fn range_start(prefix: &[u8], after: Option<&[u8]>) -> Bound<Vec<u8>> {
    match after {
        Some(a) if a >= prefix => Bound::Excluded(a.to_vec()),
        _ => Bound::Included(prefix.to_vec()),
    }
}

impl StateRead for MemState {
    fn get(&self, key: &[u8]) -> Result<Option<Record>, StateError> {
        Ok(self.map.get(key).cloned())
    }

    fn scan(&self, prefix: &[u8], after: Option<&[u8]>, limit: usize) -> Result<Vec<(Key, Record)>, StateError> {
        Ok(self
            .map
            .range((range_start(prefix, after), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn scan_rev(&self, prefix: &[u8], before: Option<&[u8]>, limit: usize) -> Result<Vec<(Key, Record)>, StateError> {
        Ok(self
            .map
            .range((Bound::Included(prefix.to_vec()), range_end(prefix, before)))
            .rev()
            .take_while(|(k, _)| k.starts_with(prefix))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }
}

/// An overlay of pending writes over a base state. Reads see the pending writes, so later steps of
/// one command observe its earlier steps.
///
/// The base must not change while the overlay lives (a snapshot, or the live state of the single
/// writer that commits the overlay afterwards): point reads of the base are kept, so a record that
/// several steps read (the agent, the thread, the counters) costs one read of the store per
/// overlay, and one per batch of commands when a batch shares one overlay (issue #15).
pub struct Tx<'a> {
    base: &'a dyn StateRead,
    writes: Changeset,
    read: std::cell::RefCell<std::collections::HashMap<Key, Option<Record>>>,
}

impl std::fmt::Debug for Tx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tx({} pending writes)", self.writes.len())
    }
}

impl<'a> Tx<'a> {
    pub fn new(base: &'a dyn StateRead) -> Tx<'a> {
        Tx { base, writes: BTreeMap::new(), read: Default::default() }
    }

    pub fn put(&mut self, key: Key, record: Record) {
        self.writes.insert(key, Some(record));
    }

    pub fn delete(&mut self, key: Key) {
        self.writes.insert(key, None);
    }

    pub fn into_changes(self) -> Changeset {
        self.writes
    }

    pub fn changes(&self) -> &Changeset {
        &self.writes
    }
}

impl StateRead for Tx<'_> {
    fn group(&self) -> GroupId {
        self.base.group()
    }

    /// The base's floor, lowered by the earliest due entry this transaction puts (deletes only
    /// ever leave the floor lower than it could be, which is still a floor).
    fn due_floor(&self) -> Timestamp {
        let prefix = keys::due_all();
        let pending = self
            .writes
            .range::<[u8], _>((Bound::Included(prefix.as_slice()), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(&prefix))
            .find(|(_, v)| v.is_some())
            .map(|(k, _)| keys::due_time_of(k).unwrap_or(Timestamp::ZERO));
        let base = self.base.due_floor();
        pending.map_or(base, |t| t.min(base))
    }

    fn caches_reads(&self) -> bool {
        true
    }

    fn get(&self, key: &[u8]) -> Result<Option<Record>, StateError> {
        if let Some(v) = self.writes.get(key) {
            return Ok(v.clone());
        }
        if self.base.caches_reads() {
            return self.base.get(key);
        }
        if let Some(v) = self.read.borrow().get(key) {
            return Ok(v.clone());
        }
        let v = self.base.get(key)?;
        self.read.borrow_mut().insert(key.to_vec(), v.clone());
        Ok(v)
    }

    fn scan(&self, prefix: &[u8], after: Option<&[u8]>, limit: usize) -> Result<Vec<(Key, Record)>, StateError> {
        // Pending writes under the prefix, past `after`.
        let pending: Vec<(&Key, &Option<Record>)> = self
            .writes
            .range((range_start(prefix, after), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .collect();
        let deletes = pending.iter().filter(|(_, v)| v.is_none()).count();
        // At most `deletes` base rows can be hidden, so this many base rows always suffice.
        let base = self.base.scan(prefix, after, limit.saturating_add(deletes))?;
        let mut merged: BTreeMap<Key, Record> = base.into_iter().collect();
        for (k, v) in pending {
            match v {
                Some(r) => {
                    merged.insert(k.clone(), r.clone());
                }
                None => {
                    merged.remove(k);
                }
            }
        }
        Ok(merged.into_iter().take(limit).collect())
    }

    fn scan_rev(&self, prefix: &[u8], before: Option<&[u8]>, limit: usize) -> Result<Vec<(Key, Record)>, StateError> {
        let pending: Vec<(&Key, &Option<Record>)> = self
            .writes
            .range((Bound::Included(prefix.to_vec()), range_end(prefix, before)))
            .rev()
            .take_while(|(k, _)| k.starts_with(prefix))
            .collect();
        let deletes = pending.iter().filter(|(_, v)| v.is_none()).count();
        let base = self.base.scan_rev(prefix, before, limit.saturating_add(deletes))?;
        let mut merged: BTreeMap<Key, Record> = base.into_iter().collect();
        for (k, v) in pending {
            match v {
                Some(r) => {
                    merged.insert(k.clone(), r.clone());
                }
                None => {
                    merged.remove(k);
                }
            }
        }
        Ok(merged.into_iter().rev().take(limit).collect())
    }
}

macro_rules! typed_get {
    ($(#[$doc:meta])* $name:ident($($arg:ident: $ty:ty),*) -> $out:ty = $variant:ident, $key:expr;) => {
        $(#[$doc])*
        fn $name(&self, $($arg: $ty),*) -> Result<Option<$out>, StateError> {
            let key = $key;
            match self.get(&key)? {
                None => Ok(None),
                Some(Record::$variant(v)) => Ok(Some(v)),
                Some(other) => Err(StateError::corrupt(&key, format!("expected {}, found {:?}", stringify!($variant), std::mem::discriminant(&other)))),
            }
        }
    };
}

/// Typed reads over any [`StateRead`].
pub trait StateExt: StateRead {
    typed_get!(
        /// The counters of the group this state belongs to.
        counters_of(group: GroupId) -> Counters = Counters, keys::counters(group););

    /// This state's group's counters.
    fn counters(&self) -> Result<Option<Counters>, StateError> {
        self.counters_of(self.group())
    }
    typed_get!(agent(id: AgentId) -> Agent = Agent, keys::agent(id););
    typed_get!(memory(id: MemoryId) -> Memory = Memory, keys::memory(id););
    typed_get!(memory_version(id: MemoryId, v: Version) -> MemoryVersion = MemoryVersion, keys::memory_version(id, v););
    typed_get!(thread(id: ThreadId) -> Thread = Thread, keys::thread(id););
    typed_get!(membership(thread: ThreadId, agent: AgentId) -> Membership = Membership, keys::membership(thread, agent););
    typed_get!(entry(thread: ThreadId, seq: EntrySeq) -> Entry = Entry, keys::entry(thread, seq););
    typed_get!(response(thread: ThreadId, seq: EntrySeq, responder: AgentId) -> Response = Response, keys::response(thread, seq, responder););
    typed_get!(assignment(id: AssignmentId) -> Assignment = Assignment, keys::assignment(id););
    typed_get!(task(id: TaskId) -> Task = Task, keys::task(id););
    typed_get!(contract_version(task: TaskId, v: Version) -> ContractVersion = ContractVersion, keys::contract_version(task, v););
    typed_get!(engagement(id: EngagementId) -> Engagement = Engagement, keys::engagement(id););
    typed_get!(obligation(id: ObligationId) -> Obligation = Obligation, keys::obligation(id););
    typed_get!(version_labels(id: MemoryId, v: Version) -> VersionLabels = Labels, keys::version_labels(id, v););
    typed_get!(collective(thread: ThreadId, header: EntrySeq) -> Collective = Collective, keys::collective(thread, header););
    typed_get!(shared_record(id: RecordId) -> SharedRecord = SharedRecord, keys::shared_record(id););
    typed_get!(record_revision(id: RecordId, rev: u32) -> RecordRevision = RecordRevision, keys::record_revision(id, rev););
    typed_get!(record_item(id: RecordId, kind: ItemKind, seq: u32) -> RecordItem = RecordItem, keys::record_item(id, kind, seq););
    typed_get!(record_counter_of(group: GroupId) -> u64 = Counter, keys::record_counter(group););
    typed_get!(wake_counter_of(group: GroupId) -> u64 = Counter, keys::wake_counter(group););
    typed_get!(wake_target(agent: AgentId, id: WakeTargetId) -> WakeTarget = WakeTarget, keys::wake_target(agent, id););

    /// This state's group's last allocated wake target id.
    fn wake_counter(&self) -> Result<Option<u64>, StateError> {
        self.wake_counter_of(self.group())
    }

    /// This state's group's last allocated record id.
    fn record_counter(&self) -> Result<Option<u64>, StateError> {
        self.record_counter_of(self.group())
    }

    /// Design §5.7: a scalar's value at `rev` (its latest history entry `<= rev`), one `scan_rev`.
    fn record_value_at(&self, id: RecordId, field: RecordField, rev: u32) -> Result<Option<FieldValue>, StateError> {
        let prefix = keys::record_values_of(id, field);
        let before = keys::record_value(id, field, rev.saturating_add(1));
        let before = if rev == u32::MAX { None } else { Some(before.as_slice()) };
        match self.scan_rev(&prefix, before, 1)?.pop() {
            None => Ok(None),
            Some((_, Record::RecordValue(v))) => Ok(Some(v.value)),
            Some((key, _)) => Err(StateError::corrupt(&key, "expected a record value")),
        }
    }

    /// The number of the item with this id, if the record has one.
    fn record_item_seq(&self, id: RecordId, kind: ItemKind, item: &str) -> Result<Option<u32>, StateError> {
        let key = keys::record_item_id(id, kind, item);
        match self.index(&key)? {
            None => Ok(None),
            Some(IndexRef::Item(seq)) => Ok(Some(seq)),
            Some(_) => Err(StateError::corrupt(&key, "expected an item number")),
        }
    }

    /// Design §2.2: the labels of a pinned version; None when the version is unlabeled.
    fn labels(&self, pin: Pin) -> Result<Option<kungfu_types::Labels>, StateError> {
        Ok(self.version_labels(pin.memory, pin.version)?.map(|l| l.labels))
    }

    /// The value of an index key.
    fn index(&self, key: &[u8]) -> Result<Option<IndexRef>, StateError> {
        match self.get(key)? {
            None => Ok(None),
            Some(Record::Ref(r)) => Ok(Some(r)),
            Some(_) => Err(StateError::corrupt(key, "expected an index reference")),
        }
    }

    /// Every index reference under a prefix (bounded by `limit`).
    fn index_refs(&self, prefix: &[u8], limit: usize) -> Result<Vec<(Key, IndexRef)>, StateError> {
        self.scan(prefix, None, limit)?
            .into_iter()
            .map(|(k, r)| match r {
                Record::Ref(r) => Ok((k, r)),
                _ => Err(StateError::corrupt(&k, "expected an index reference")),
            })
            .collect()
    }

    /// The agent whose bearer key hashes to `hash` (server authentication).
    fn agent_by_key(&self, hash: &SecretHash) -> Result<Option<AgentId>, StateError> {
        match self.index(&keys::agent_by_key(hash))? {
            Some(IndexRef::Agent(a)) => Ok(Some(a)),
            None => Ok(None),
            Some(_) => Err(StateError::corrupt(&keys::agent_by_key(hash), "expected an agent reference")),
        }
    }

    /// Every record under a prefix, in key order, read in pages (for checks and rebuilds).
    fn scan_all(&self, prefix: &[u8]) -> Result<Vec<(Key, Record)>, StateError> {
        let mut out: Vec<(Key, Record)> = Vec::new();
        loop {
            let after = out.last().map(|(k, _)| k.clone());
            let page = self.scan(prefix, after.as_deref(), 1024)?;
            let done = page.len() < 1024;
            out.extend(page);
            if done {
                return Ok(out);
            }
        }
    }
}

impl<T: StateRead + ?Sized> StateExt for T {}

/// The object an obligation belongs to, read from the state: its thread or Task. None when the
/// assignment or engagement is unknown. `decide` settles that object's deadlines first (L4) and
/// `read` lists it beside each due obligation.
pub fn obligation_object(state: &dyn StateRead, id: ObligationId) -> Result<Option<ObjectRef>, StateError> {
    Ok(match id {
        ObligationId::Response { thread, .. } => Some(ObjectRef::Thread(thread)),
        ObligationId::AssignmentDelivery(a) | ObligationId::AssignmentJudgment(a) => {
            state.assignment(a)?.map(|a| ObjectRef::Thread(a.thread))
        }
        ObligationId::EngagementDelivery(e) | ObligationId::EngagementJudgment(e) => {
            state.engagement(e)?.map(|e| ObjectRef::Task(e.task))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A base that counts its point reads.
    struct Counted<'a> {
        inner: &'a MemState,
        gets: Cell<usize>,
    }

    impl StateRead for Counted<'_> {
        fn get(&self, key: &[u8]) -> Result<Option<Record>, StateError> {
            self.gets.set(self.gets.get() + 1);
            self.inner.get(key)
        }
        fn scan(&self, prefix: &[u8], after: Option<&[u8]>, limit: usize) -> Result<Vec<(Key, Record)>, StateError> {
            self.inner.scan(prefix, after, limit)
        }
        fn scan_rev(
            &self,
            prefix: &[u8],
            before: Option<&[u8]>,
            limit: usize,
        ) -> Result<Vec<(Key, Record)>, StateError> {
            self.inner.scan_rev(prefix, before, limit)
        }
    }

    fn record(n: u64) -> Record {
        Record::Ref(IndexRef::Agent(AgentId(n)))
    }

    #[test]
    fn an_overlay_reads_each_base_key_once_and_its_own_writes_win() {
        let mut base = MemState::new();
        base.commit(&Changeset::from([(b"a".to_vec(), Some(record(1)))]));
        let counted = Counted { inner: &base, gets: Cell::new(0) };
        let mut tx = Tx::new(&counted);
        for _ in 0..3 {
            assert_eq!(tx.get(b"a").expect("read"), Some(record(1)));
            assert_eq!(tx.get(b"missing").expect("read"), None);
        }
        assert_eq!(counted.gets.get(), 2, "one base read per key, hits and misses alike");
        // A write after a read is what later reads see, and a delete hides the base.
        tx.put(b"a".to_vec(), record(2));
        tx.put(b"missing".to_vec(), record(3));
        assert_eq!(tx.get(b"a").expect("read"), Some(record(2)));
        assert_eq!(tx.get(b"missing").expect("read"), Some(record(3)));
        tx.delete(b"a".to_vec());
        assert_eq!(tx.get(b"a").expect("read"), None);
        assert_eq!(counted.gets.get(), 2);
        // An overlay over an overlay (a command inside a batch) reads through the outer one's writes.
        let inner = Tx::new(&tx);
        assert_eq!(inner.get(b"missing").expect("read"), Some(record(3)));
        assert_eq!(inner.get(b"a").expect("read"), None);
    }

    #[test]
    fn an_overlay_over_an_overlay_reads_through_the_outer_cache_and_still_sees_every_write() {
        let mut base = MemState::new();
        base.commit(&Changeset::from([(b"a".to_vec(), Some(record(1))), (b"b".to_vec(), Some(record(2)))]));
        let counted = Counted { inner: &base, gets: Cell::new(0) };
        let mut outer = Tx::new(&counted);
        outer.put(b"b".to_vec(), record(20));
        let mut inner = Tx::new(&outer);
        for _ in 0..3 {
            assert_eq!(inner.get(b"a").expect("read"), Some(record(1)));
            assert_eq!(inner.get(b"b").expect("read"), Some(record(20)), "the outer overlay's write");
            assert_eq!(inner.get(b"missing").expect("read"), None);
        }
        assert_eq!(counted.gets.get(), 2, "the outer overlay read each base key once (b is its own write)");
        inner.put(b"a".to_vec(), record(10));
        assert_eq!(inner.get(b"a").expect("read"), Some(record(10)), "the inner overlay's own write wins");
        let changes = inner.into_changes();
        assert_eq!(changes.len(), 1, "the inner overlay's changes are its writes only: {changes:?}");
        assert_eq!(outer.get(b"a").expect("read"), Some(record(1)), "the outer overlay is untouched");
    }
}
