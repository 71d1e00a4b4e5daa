//! The protocol state in its own RocksDB instance: one column family per key family of the core
//! (`kungfu_core::keys::Family`) plus `sm_meta` (last applied log id, membership). Reads see one
//! consistent RocksDB snapshot (§9); each apply commits its changes and its metadata in one atomic
//! write batch, so a crash never leaves a half-applied action.

use crate::SHARD;
use crate::envelope;
use crate::error::Error;
use kungfu_core::keys::{Family, Key};
use kungfu_core::{Changeset, Record, StateError, StateRead};
use kungfu_types::Timestamp;
use rocksdb::{ColumnFamilyDescriptor, DB, IteratorMode, Options, ReadOptions, WriteBatch, WriteOptions};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

const CF_SM_META: &str = "sm_meta";
const STORE: &str = "state";

pub(crate) fn cf_names() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = Family::ALL.iter().map(|f| f.name()).collect();
    v.push(CF_SM_META);
    v
}

/// The block cache every column family of one state store shares, with the index and filter
/// blocks of every table file in it (issue #36): the state's memory is this, the memtables and
/// what is pinned, whatever the size of the data.
const BLOCK_CACHE_BYTES: usize = 128 << 20;

/// The most memory all the state's memtables take together (RocksDB's `db_write_buffer_size`):
/// past it the families are flushed (together, `atomic_flush`), whichever of them fills.
const MEMTABLE_BYTES: usize = 128 << 20;

/// Values at least this long go to blob files (RocksDB's integrated BlobDB) in the families that hold
/// content: the records (an entry, a memory version) and the journal (the fact that carries it).
const MIN_BLOB_BYTES: u64 = 512;

/// The size bound of the level that level 0 compacts into, per family (RocksDB's
/// `max_bytes_for_level_base`, 256 MiB by default), and the size of the table files below level 0
/// (`target_file_size_base`, 64 MiB by default). Level 0's files hold random keys (receipts,
/// journals of many objects), so each of its compactions rewrites the whole level it compacts
/// into; with dynamic level sizes that is the last level until the family outgrows the bound, and
/// a node's compaction work per write grew with its state (issue #36: 0.6 to 9.6 CPU-seconds a
/// minute in 12 minutes of writes, docs/benchmarks.md). A smaller bound starts a level above the
/// last one sooner, so a level-0 compaction rewrites at most a few tens of MiB: the same 12 minutes
/// took half the compaction work.
const LEVEL_BASE_BYTES: u64 = 64 << 20;
const TARGET_FILE_BYTES: u64 = 16 << 20;

/// How much of a memtable's size its bloom filter takes (RocksDB's
/// `memtable_prefix_bloom_size_ratio`): about 1.3 MiB for a 64 MiB memtable.
const MEMTABLE_BLOOM_RATIO: f64 = 0.02;

/// Options of one column family. Every action reads the records, indexes and receipts it decides
/// on by key, most of them written long before (issue #15), and a point read of a key that is not
/// in the newest memtable used to search its whole skiplist first: the families read by key keep
/// a bloom filter of whole keys in each memtable and in each table file. The journal is appended
/// and scanned, and `sm_meta` is tiny: they keep no filter. The
/// options change nothing on disk that an older table file lacks; such files simply have no filter
/// and a whole index.
///
/// Index and filter blocks are partitioned and held in the block cache (issue #36). Held in each
/// table reader instead (RocksDB's default), their memory grew with the data without bound (about
/// 270 KB for 180,000 keys in three files in `stores.rs`'s test; a node's RSS rose 15-18 % in 15
/// minutes of a soak). Held there whole,
/// a node with a few hundred MB of state evicted them under load, and every point read then
/// decompressed and checksummed a whole index block again (issue #15: linearizable reads fell from
/// 14,554/s to 885/s). Partitioned, a read loads one small partition of the index and one of the
/// filter, the top level of each is pinned, and so are the blocks of level 0, the files every read
/// of recent data visits; they stay at high priority in the cache, before data blocks.
fn cf_options(name: &str, cache: &rocksdb::Cache) -> Options {
    let mut block = rocksdb::BlockBasedOptions::default();
    block.set_block_cache(cache);
    block.set_index_type(rocksdb::BlockBasedIndexType::TwoLevelIndexSearch);
    block.set_cache_index_and_filter_blocks(true);
    block.set_cache_index_and_filter_blocks_with_high_priority(true);
    block.set_pin_top_level_index_and_filter(true);
    block.set_pin_l0_filter_and_index_blocks_in_cache(true);
    let mut o = Options::default();
    let point_read =
        [Family::Records, Family::Indexes, Family::Receipts, Family::Meta].iter().any(|f| f.name() == name);
    if point_read {
        block.set_bloom_filter(10.0, false);
        block.set_whole_key_filtering(true);
        block.set_partition_filters(true);
        o.set_memtable_prefix_bloom_ratio(MEMTABLE_BLOOM_RATIO);
        o.set_memtable_whole_key_filtering(true);
    }
    // Content is written once to a blob file and never rewritten: compaction moves a small
    // reference instead of the value. Kept in the table files, each post's content went through
    // every level of compaction twice (record and journal): after 20 minutes of a soak, compaction
    // took half of a node's CPU and the write rate had fallen by a third (issue #36). Content is
    // never deleted; the few large records rewritten as their object moves on (an assignment's, an
    // engagement's) leave their old value behind in a blob file, a small garbage that is not
    // collected, as collecting it would rewrite live content again. Blob reads share the block cache.
    let content = [Family::Records, Family::Journal].iter().any(|f| f.name() == name);
    if content {
        o.set_enable_blob_files(true);
        o.set_min_blob_size(MIN_BLOB_BYTES);
        o.set_blob_compression_type(rocksdb::DBCompressionType::Lz4);
        o.set_blob_cache(cache);
    }
    o.set_block_based_table_factory(&block);
    o.set_max_bytes_for_level_base(LEVEL_BASE_BYTES);
    o.set_target_file_size_base(TARGET_FILE_BYTES);
    o
}

fn open_db(path: &Path, create: bool) -> Result<DB, Error> {
    let mut opts = Options::default();
    opts.create_if_missing(create);
    opts.create_missing_column_families(create);
    opts.set_paranoid_checks(true);
    // Issue #30, one durable log: the state's writes skip RocksDB's WAL (see `StateStore::commit`),
    // so what survives a crash is what was flushed, and every family must be flushed at the same
    // point (an atomic flush), or a crash could leave the records of an apply without its
    // `last_applied` or the other way round. A clean close flushes the memtables (RocksDB does so
    // when it has unpersisted writes and no WAL).
    opts.set_atomic_flush(true);
    opts.set_db_write_buffer_size(MEMTABLE_BYTES);
    let cache = rocksdb::Cache::new_lru_cache(BLOCK_CACHE_BYTES);
    crate::open_waiting_for_own_lock(|| {
        let cfs = cf_names().into_iter().map(|n| ColumnFamilyDescriptor::new(n, cf_options(n, &cache)));
        DB::open_cf_descriptors(&opts, path, cfs)
    })
    .map_err(Error::rocks_at(STORE, path))
}

/// The storage key of a core key: the shard, then the core key (whose first byte is its family).
fn storage_key(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 2);
    k.extend_from_slice(&SHARD.to_be_bytes());
    k.extend_from_slice(key);
    k
}

fn family_cf<'a>(db: &'a DB, key: &[u8]) -> Result<&'a rocksdb::ColumnFamily, StateError> {
    let family = Family::of(key).ok_or_else(|| StateError::corrupt(key, "key of no known family"))?;
    db.cf_handle(family.name()).ok_or_else(|| StateError::Io(format!("column family {} missing", family.name())))
}

/// The state store. Cheap to share behind an `Arc`; the database inside is replaced atomically when
/// a snapshot is installed.
pub struct StateStore {
    path: PathBuf,
    /// None only after a snapshot installation failed half way; every access then fails until the
    /// node restarts (and the next open recovers the directories).
    db: RwLock<Option<Arc<DB>>>,
    /// Decoded copies of small, often read records of the latest state (issue #15): see [`Hot`].
    hot: Hot,
}

/// How many records [`Hot`] keeps, and the largest encoding it keeps: the agents, threads,
/// memberships and counters that every action reads again, not content.
const HOT_RECORDS: usize = 16_384;
const HOT_MAX_BYTES: usize = 512;

/// A cache of decoded records of the latest committed state, for the two readers that read the
/// same few records for every action: the applying writer ([`StateStore::applier`]) and the
/// leader's pre-check ([`StateStore::read_latest`]). It always equals the database for every key
/// it holds, because
/// - [`StateStore::commit`] writes the batch and then updates (or drops) every key it changed,
///   both under `gate` held for writing, and a snapshot install empties it under the same lock;
/// - only readers that cannot race a commit fill it: the applying writer (the only committer, so
///   nothing commits while it reads) and readers holding `gate` for reading (no commit can run).
///   [`StateStore::live`] and [`StateStore::read`] neither read nor fill it.
struct Hot {
    records: quick_cache::sync::Cache<Key, Record>,
    gate: RwLock<()>,
    /// The state's due floor ([`StateRead::due_floor`]): no key of the due index is earlier.
    /// Set from the database when it opens, lowered by every due key a commit puts and read again
    /// after a commit that deletes one; changed only under `gate` held for writing, like the
    /// cache, so a reader holding the gate sees the floor of the state it reads. `u64::MAX` when
    /// the index is empty.
    due_floor: std::sync::atomic::AtomicU64,
}

impl Hot {
    fn new() -> Hot {
        Hot {
            records: quick_cache::sync::Cache::new(HOT_RECORDS),
            gate: RwLock::new(()),
            due_floor: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn due_floor(&self) -> Timestamp {
        Timestamp(self.due_floor.load(std::sync::atomic::Ordering::Acquire))
    }

    /// Sets the floor to the earliest key of `db`'s due index (one bounded seek).
    fn reset_due_floor(&self, db: &DB) -> Result<(), Error> {
        let first = RocksView { db, snap: None }
            .scan(&kungfu_core::keys::due_all(), None, 1)
            .map_err(|e| Error::Corrupt { what: format!("reading the due index: {e}") })?;
        let floor = match first.first() {
            Some((key, _)) => {
                kungfu_core::keys::due_time_of(key)
                    .ok_or_else(|| Error::Corrupt { what: format!("due index key {} has no time", hex::encode(key)) })?
                    .0
            }
            None => u64::MAX,
        };
        self.due_floor.store(floor, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    fn cacheable(key: &[u8], encoded_len: usize) -> bool {
        matches!(Family::of(key), Some(Family::Meta | Family::Records)) && encoded_len <= HOT_MAX_BYTES
    }
}

impl std::fmt::Debug for StateStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StateStore({})", self.path.display())
    }
}

impl StateStore {
    /// Opens the state store at `path`, finishing an interrupted snapshot installation first.
    pub fn open(path: &Path, create: bool) -> Result<StateStore, Error> {
        recover_install(path)?;
        let db = open_db(path, create)?;
        let hot = Hot::new();
        hot.reset_due_floor(&db)?;
        Ok(StateStore { path: path.to_path_buf(), db: RwLock::new(Some(Arc::new(db))), hot })
    }

    fn handle(&self) -> Option<Arc<DB>> {
        match self.db.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn current(&self) -> Result<Arc<DB>, Error> {
        self.handle().ok_or_else(closed)
    }

    /// Runs `f` over one consistent snapshot of the state (§9: permission checks and content come
    /// from one state).
    pub fn read<R>(&self, f: impl FnOnce(&dyn StateRead) -> R) -> R {
        match self.handle() {
            Some(db) => {
                let snap = db.snapshot();
                let view = RocksView { db: &db, snap: Some(&snap) };
                f(&view)
            }
            None => f(&LiveView { db: None }),
        }
    }

    /// A view of the latest state without a snapshot (each read sees the latest commit), for
    /// routing and key lookups. Neither reads nor fills the hot-record cache.
    pub fn live(&self) -> LiveView {
        LiveView { db: self.handle() }
    }

    /// The latest state for the single writer that applies commands (the only caller of
    /// [`StateStore::commit`]), with the hot-record cache: nothing commits while it reads.
    pub fn applier(&self) -> CachedView<'_> {
        CachedView { db: self.handle(), snap: None, hot: &self.hot }
    }

    /// Runs `f` over the latest committed state, held still: no commit runs until `f` returns,
    /// and reads go through the hot-record cache. For the leader's pre-check, which is short; a
    /// long read would hold the applying writer back, so reads use [`StateStore::read`].
    pub fn read_latest<R>(&self, f: impl FnOnce(&dyn StateRead) -> R) -> R {
        // The handle first, then the gate: a snapshot install holds the handle's lock while it
        // waits for the gate, so the other order could deadlock.
        let Some(db) = self.handle() else { return f(&LiveView { db: None }) };
        // No RocksDB snapshot (issue #30: taking one locks the database's mutex, which the applying
        // writer needs too): the gate already keeps the latest state still. `commit` is the only
        // writer and holds the gate for writing around its write, and flushes and compactions
        // change no value a read sees.
        let _still = self.hot.gate.read().unwrap_or_else(|p| p.into_inner());
        f(&CachedView { db: Some(db), snap: None, hot: &self.hot })
    }

    /// Commits the changes of one or more applied commands together with metadata (`Some` puts,
    /// `None` deletes), in one atomic write batch.
    pub fn commit(&self, changes: &Changeset, meta: &[(&str, Option<Vec<u8>>)]) -> Result<(), Error> {
        let db = self.current()?;
        let mut batch = WriteBatch::default();
        // Which of the changed records the hot-record cache may keep, in the changes' order.
        let mut hot = Vec::with_capacity(changes.len());
        for (key, value) in changes {
            let cf = family_cf(&db, key).map_err(|e| Error::Corrupt { what: e.to_string() })?;
            match value {
                Some(record) => {
                    let bytes = envelope::encode(record);
                    hot.push(Hot::cacheable(key, bytes.len()));
                    batch.put_cf(cf, storage_key(key), bytes)
                }
                None => {
                    hot.push(false);
                    batch.delete_cf(cf, storage_key(key))
                }
            }
        }
        let cf = db.cf_handle(CF_SM_META).ok_or_else(|| Error::Corrupt { what: "sm_meta missing".into() })?;
        for (k, v) in meta {
            match v {
                Some(v) => batch.put_cf(cf, k, v),
                None => batch.delete_cf(cf, k),
            }
        }
        // Issue #30, one durable log: an apply writes no WAL of its own. Every entry it applies is
        // committed, so a quorum holds it durably in the raft log, which is the record: after a
        // crash the state reopens at its last flush (all families at one point, an atomic flush),
        // `last_applied` says where, and openraft applies the log again from there. The log is
        // never purged past the state's durable `last_applied` (`StateStore::flush` runs before
        // every purge: `kungfu_raft::log`). Where the log lost an unsynced tail that a flushed
        // state had already applied (group commit lets a replica apply a committed entry before
        // its own copy is synced), openraft purges the log up to the applied entry at start, so
        // no hole is left between the log and the state.
        // The hot-record cache changes with the database, under its gate (see `Hot`).
        let _commit = self.hot.gate.write().unwrap_or_else(|p| p.into_inner());
        let mut no_wal = WriteOptions::default();
        no_wal.disable_wal(true);
        let written = db.write_opt(batch, &no_wal).map_err(Error::rocks(STORE));
        let floor = self.keep_due_floor(&db, changes);
        for ((key, value), keep) in changes.iter().zip(hot) {
            match value {
                Some(record) if keep && written.is_ok() => self.hot.records.insert(key.clone(), record.clone()),
                _ => {
                    self.hot.records.remove(key);
                }
            }
        }
        written.and(floor)
    }

    /// Keeps the due floor true of the state after `changes` (the caller holds the gate for
    /// writing): a put lowers it; a delete may have removed the earliest key, so the floor is
    /// read again (deadlines end far less often than actions run).
    fn keep_due_floor(&self, db: &DB, changes: &Changeset) -> Result<(), Error> {
        let prefix = kungfu_core::keys::due_all();
        let mut deleted = false;
        let mut earliest = u64::MAX;
        for (key, value) in
            changes.range::<[u8], _>((std::ops::Bound::Included(prefix.as_slice()), std::ops::Bound::Unbounded))
        {
            if !key.starts_with(&prefix) {
                break;
            }
            match value {
                Some(_) => earliest = earliest.min(kungfu_core::keys::due_time_of(key).map_or(0, |t| t.0)),
                None => deleted = true,
            }
        }
        if deleted {
            return self.hot.reset_due_floor(db);
        }
        self.hot.due_floor.fetch_min(earliest, std::sync::atomic::Ordering::AcqRel);
        Ok(())
    }

    /// Makes every commit so far durable: flushes all families' memtables together (an atomic
    /// flush) and waits for it. What the raft log may forget (a purge) must be durable here first.
    pub fn flush(&self) -> Result<(), Error> {
        let db = self.current()?;
        let mut cfs = Vec::new();
        for name in cf_names() {
            cfs.push(db.cf_handle(name).ok_or_else(|| Error::Corrupt { what: format!("{name} missing") })?);
        }
        let mut opts = rocksdb::FlushOptions::default();
        opts.set_wait(true);
        db.flush_cfs_opt(&cfs, &opts).map_err(Error::rocks(STORE))
    }

    /// The memory the state's RocksDB holds now (issue #36).
    pub fn memory(&self) -> Result<crate::StoreMemory, Error> {
        crate::StoreMemory::of(&*self.current()?, &cf_names(), STORE)
    }

    pub fn get_meta(&self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        let db = self.current()?;
        let cf = db.cf_handle(CF_SM_META).ok_or_else(|| Error::Corrupt { what: "sm_meta missing".into() })?;
        db.get_cf(cf, key).map_err(Error::rocks(STORE))
    }

    /// SHA-256 over every key and value of the protocol state families, in order, from one
    /// snapshot. Equal on all replicas at the same applied index.
    pub fn digest(&self) -> Result<[u8; 32], Error> {
        self.digest_inner(None).map(|(d, _)| d)
    }

    /// [`StateStore::digest`] and the `sm_meta` value under `meta_key`, both from one snapshot: the
    /// digest is exactly the state at that value (for example, the last applied log id).
    pub fn digest_with_meta(&self, meta_key: &str) -> Result<([u8; 32], Option<Vec<u8>>), Error> {
        self.digest_inner(Some(meta_key))
    }

    fn digest_inner(&self, meta_key: Option<&str>) -> Result<([u8; 32], Option<Vec<u8>>), Error> {
        let db = self.current()?;
        let snap = db.snapshot();
        let meta = match meta_key {
            Some(key) => {
                let cf = db.cf_handle(CF_SM_META).ok_or_else(|| Error::Corrupt { what: "sm_meta missing".into() })?;
                snap.get_cf(cf, key).map_err(Error::rocks(STORE))?
            }
            None => None,
        };
        let mut h = Sha256::new();
        for family in Family::ALL {
            let cf = db.cf_handle(family.name()).ok_or_else(|| Error::Corrupt { what: "family missing".into() })?;
            h.update([family as u8]);
            for item in snap.iterator_cf(cf, IteratorMode::Start) {
                let (k, v) = item.map_err(Error::rocks(STORE))?;
                h.update((k.len() as u64).to_be_bytes());
                h.update(&k);
                h.update((v.len() as u64).to_be_bytes());
                h.update(&v);
            }
        }
        Ok((h.finalize().into(), meta))
    }

    /// Writes a RocksDB checkpoint of the whole state (all families and `sm_meta`) to `dir`, which
    /// must not exist. Memtables are flushed first, so the checkpoint is durable.
    pub fn checkpoint_to(&self, dir: &Path) -> Result<(), Error> {
        let db = self.current()?;
        let cp = rocksdb::checkpoint::Checkpoint::new(&db).map_err(Error::rocks(STORE))?;
        cp.create_checkpoint(dir).map_err(Error::rocks(STORE))
    }

    /// Replaces the whole state with the database in `incoming` (an unpacked checkpoint), atomically:
    /// readers see either the old state or the new one, and a crash at any point leaves one of them
    /// in place at the next open.
    pub fn replace_with(&self, incoming: &Path) -> Result<(), Error> {
        // Validate before touching the live state.
        drop(open_db(incoming, false)?);
        let marker = incoming.join(COMPLETE);
        std::fs::write(&marker, b"complete").map_err(Error::io(&marker))?;
        sync_dir(incoming)?;
        let staged = sibling(&self.path, "incoming");
        if staged != incoming {
            remove_dir_if_exists(&staged)?;
            std::fs::rename(incoming, &staged).map_err(Error::io(&staged))?;
        }
        let mut guard = match self.db.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        // RocksDB locks a database by path within the process, so the old database must be closed
        // before the new one opens at the same path. Holding the write lock stops new readers;
        // wait (bounded) for the ones in flight to let go of their handles, then close it.
        let waited = std::time::Instant::now();
        while guard.as_ref().is_some_and(|db| Arc::strong_count(db) > 1) {
            if waited.elapsed() > std::time::Duration::from_secs(60) {
                return Err(Error::Corrupt {
                    what: "readers held the state store for 60 s during a snapshot install".into(),
                });
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        drop(guard.take());
        // The cache held the old state: empty it before anyone reads the new one.
        let _commit = self.hot.gate.write().unwrap_or_else(|p| p.into_inner());
        self.hot.records.clear();
        let old = sibling(&self.path, "old");
        remove_dir_if_exists(&old)?;
        std::fs::rename(&self.path, &old).map_err(Error::io(&old))?;
        std::fs::rename(&staged, &self.path).map_err(Error::io(&self.path))?;
        if let Some(parent) = self.path.parent() {
            sync_dir(parent)?;
        }
        let _ = std::fs::remove_file(self.path.join(COMPLETE));
        let db = open_db(&self.path, false)?;
        self.hot.reset_due_floor(&db)?;
        *guard = Some(Arc::new(db));
        drop(guard);
        remove_dir_if_exists(&old)?;
        Ok(())
    }
}

const COMPLETE: &str = "KUNGFU_COMPLETE";

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(format!(".{suffix}"));
    path.with_file_name(name)
}

fn remove_dir_if_exists(p: &Path) -> Result<(), Error> {
    match std::fs::remove_dir_all(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::Io { path: p.to_path_buf(), source: e }),
    }
}

pub(crate) fn sync_dir(p: &Path) -> Result<(), Error> {
    std::fs::File::open(p).and_then(|f| f.sync_all()).map_err(Error::io(p))
}

/// Finishes or discards an installation that a crash interrupted.
fn recover_install(path: &Path) -> Result<(), Error> {
    let staged = sibling(path, "incoming");
    let old = sibling(path, "old");
    if !path.exists() && staged.join(COMPLETE).exists() {
        std::fs::rename(&staged, path).map_err(Error::io(path))?;
        let _ = std::fs::remove_file(path.join(COMPLETE));
    }
    if path.exists() {
        remove_dir_if_exists(&staged)?;
        remove_dir_if_exists(&old)?;
    }
    Ok(())
}

/// Reads of the state, optionally pinned to a RocksDB snapshot.
struct RocksView<'a> {
    db: &'a DB,
    snap: Option<&'a rocksdb::SnapshotWithThreadMode<'a, DB>>,
}

/// The latest state, for the applying writer (which is the only writer, so its reads are consistent).
pub struct LiveView {
    db: Option<Arc<DB>>,
}

impl std::fmt::Debug for LiveView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LiveView")
    }
}

impl LiveView {
    fn view(&self) -> Result<RocksView<'_>, StateError> {
        match &self.db {
            Some(db) => Ok(RocksView { db, snap: None }),
            None => Err(StateError::Io(closed().to_string())),
        }
    }
}

fn closed() -> Error {
    Error::Corrupt { what: "the state store is closed after a failed snapshot installation; restart the node".into() }
}

impl StateRead for LiveView {
    /// The state of this store is [`SHARD`]'s: its keys carry that prefix.
    fn group(&self) -> kungfu_types::GroupId {
        SHARD
    }

    fn get(&self, key: &[u8]) -> Result<Option<Record>, StateError> {
        self.view()?.get(key)
    }
    fn scan(&self, prefix: &[u8], after: Option<&[u8]>, limit: usize) -> Result<Vec<(Key, Record)>, StateError> {
        self.view()?.scan(prefix, after, limit)
    }
    fn scan_rev(&self, prefix: &[u8], before: Option<&[u8]>, limit: usize) -> Result<Vec<(Key, Record)>, StateError> {
        self.view()?.scan_rev(prefix, before, limit)
    }
}

/// The latest state through the hot-record cache ([`StateStore::applier`],
/// [`StateStore::read_latest`]): a cached record, else the database, whose answer is cached when
/// small.
pub struct CachedView<'a> {
    db: Option<Arc<DB>>,
    snap: Option<&'a rocksdb::SnapshotWithThreadMode<'a, DB>>,
    hot: &'a Hot,
}

impl std::fmt::Debug for CachedView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CachedView")
    }
}

impl CachedView<'_> {
    fn view(&self) -> Result<RocksView<'_>, StateError> {
        match &self.db {
            Some(db) => Ok(RocksView { db, snap: self.snap }),
            None => Err(StateError::Io(closed().to_string())),
        }
    }
}

impl StateRead for CachedView<'_> {
    /// The state of this store is [`SHARD`]'s: its keys carry that prefix.
    fn group(&self) -> kungfu_types::GroupId {
        SHARD
    }

    /// The latest state's floor; a view pinned to a snapshot keeps none.
    fn due_floor(&self) -> Timestamp {
        match self.snap {
            None if self.db.is_some() => self.hot.due_floor(),
            _ => Timestamp::ZERO,
        }
    }

    fn get(&self, key: &[u8]) -> Result<Option<Record>, StateError> {
        if let Some(record) = self.hot.records.get(key) {
            return Ok(Some(record));
        }
        let view = self.view()?;
        let cf = family_cf(view.db, key)?;
        match view.db.get_cf_opt(cf, storage_key(key), &view.opts()).map_err(rocks_err)? {
            Some(bytes) => {
                let record = decode_record(key, &bytes)?;
                if Hot::cacheable(key, bytes.len()) {
                    self.hot.records.insert(key.to_vec(), record.clone());
                }
                Ok(Some(record))
            }
            None => Ok(None),
        }
    }
    fn scan(&self, prefix: &[u8], after: Option<&[u8]>, limit: usize) -> Result<Vec<(Key, Record)>, StateError> {
        self.view()?.scan(prefix, after, limit)
    }
    fn scan_rev(&self, prefix: &[u8], before: Option<&[u8]>, limit: usize) -> Result<Vec<(Key, Record)>, StateError> {
        self.view()?.scan_rev(prefix, before, limit)
    }
}

fn rocks_err(e: rocksdb::Error) -> StateError {
    if e.kind() == rocksdb::ErrorKind::Corruption {
        // The read's caller stops the node; its error says what to do.
        return StateError::Io(format!("the {STORE} store is damaged: {e}; {}", crate::error::DAMAGED_NEXT_STEP));
    }
    StateError::Io(e.to_string())
}

fn decode_record(key: &[u8], bytes: &[u8]) -> Result<Record, StateError> {
    envelope::decode(bytes, "state record").map_err(|e| StateError::corrupt(key, e.to_string()))
}

impl RocksView<'_> {
    fn opts(&self) -> ReadOptions {
        let mut o = ReadOptions::default();
        if let Some(s) = self.snap {
            o.set_snapshot(s);
        }
        o
    }

    /// Read options for an iterator over the keys that start with `sprefix`, and no others: with
    /// its bounds, RocksDB skips table files and data blocks outside the prefix instead of reading
    /// the first key past it to learn that the scan is over (issue #30: most scans of an action
    /// find one key or none, like an object's due index, and a state of a few hundred MB served
    /// them from table files).
    fn bounded(&self, sprefix: &[u8]) -> ReadOptions {
        let mut o = self.opts();
        o.set_iterate_lower_bound(sprefix.to_vec());
        if let Some(end) = kungfu_core::keys::prefix_end(sprefix) {
            o.set_iterate_upper_bound(end);
        }
        o
    }
}

impl StateRead for RocksView<'_> {
    /// The state of this store is [`SHARD`]'s: its keys carry that prefix.
    fn group(&self) -> kungfu_types::GroupId {
        SHARD
    }

    fn get(&self, key: &[u8]) -> Result<Option<Record>, StateError> {
        let cf = family_cf(self.db, key)?;
        match self.db.get_cf_opt(cf, storage_key(key), &self.opts()).map_err(rocks_err)? {
            Some(bytes) => Ok(Some(decode_record(key, &bytes)?)),
            None => Ok(None),
        }
    }

    fn scan(&self, prefix: &[u8], after: Option<&[u8]>, limit: usize) -> Result<Vec<(Key, Record)>, StateError> {
        let cf = family_cf(self.db, prefix)?;
        let sprefix = storage_key(prefix);
        let start = match after {
            Some(a) if a >= prefix => storage_key(a),
            _ => sprefix.clone(),
        };
        let mut out = Vec::new();
        let mut it = self.db.raw_iterator_cf_opt(cf, self.bounded(&sprefix));
        it.seek(&start);
        while it.valid() && out.len() < limit {
            let (Some(k), Some(v)) = (it.key(), it.value()) else { break };
            if !k.starts_with(&sprefix) {
                break;
            }
            if after.is_none() || k != start.as_slice() {
                let core_key = k[2..].to_vec();
                let record = decode_record(&core_key, v)?;
                out.push((core_key, record));
            }
            it.next();
        }
        it.status().map_err(rocks_err)?;
        Ok(out)
    }

    fn scan_rev(&self, prefix: &[u8], before: Option<&[u8]>, limit: usize) -> Result<Vec<(Key, Record)>, StateError> {
        let cf = family_cf(self.db, prefix)?;
        let sprefix = storage_key(prefix);
        let mut it = self.db.raw_iterator_cf_opt(cf, self.bounded(&sprefix));
        let bound = before.map(storage_key);
        match (&bound, kungfu_core::keys::prefix_end(&sprefix)) {
            (Some(b), _) if b.starts_with(&sprefix) => it.seek_for_prev(b),
            (_, Some(end)) => {
                it.seek_for_prev(&end);
            }
            (_, None) => it.seek_to_last(),
        }
        let mut out = Vec::new();
        while it.valid() && out.len() < limit {
            let (Some(k), Some(v)) = (it.key(), it.value()) else { break };
            let skip = bound.as_deref() == Some(k) || kungfu_core::keys::prefix_end(&sprefix).as_deref() == Some(k);
            if !skip {
                if !k.starts_with(&sprefix) {
                    break;
                }
                let core_key = k[2..].to_vec();
                let record = decode_record(&core_key, v)?;
                out.push((core_key, record));
            }
            it.prev();
        }
        it.status().map_err(rocks_err)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Golden bytes of the storage key (issue #19, deliverable 3): the group's two bytes
    /// (`SHARD`, group 0: `0000`, as every key ever written), then the core key.
    #[test]
    fn a_storage_key_is_the_group_then_the_core_key() {
        assert_eq!(SHARD, kungfu_types::GroupId::ZERO);
        let counters = kungfu_core::keys::counters(SHARD);
        assert_eq!(hex::encode(storage_key(&counters)), "00000001");
        assert_eq!(hex::encode(kungfu_types::GroupId(5).to_be_bytes()), "0005", "group 5's prefix");
    }
}
