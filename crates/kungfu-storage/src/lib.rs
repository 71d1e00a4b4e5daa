//! The RocksDB stores of a Kungfu node. It stores bytes under keys and knows no protocol rule: the
//! protocol core decides what to write, openraft decides when.
//!
//! Layout of a data directory (see [`DataDir`]):
//!
//! ```text
//! <root>/IDENTITY        cluster id, node id and format; checked at every start
//! <root>/log/            RocksDB: the raft log (`raft_log`) and vote/purge/commit marks (`raft_meta`),
//!                        and `ACKNOWLEDGED`, the mark of what the log acknowledged
//! <root>/state/          RocksDB: the protocol state, one column family per key family, and `sm_meta`
//! <root>/snapshots/      snapshots (RocksDB checkpoints of `state/`, kept as directories) and their metadata
//! ```
//!
//! Invariants: nothing acknowledged to openraft (entries, vote, purge) is lost by a crash (an
//! append's durability is reported only after a WAL sync covers it, in append order), and a disk
//! that loses it anyway is detected at start (the acknowledged mark is durable before the
//! acknowledgement); the log has no holes (a purge writes its mark in the same synced batch); a
//! state commit is all-or-nothing, and a crash reopens the state at one flush of all its families,
//! never ahead of what the log can apply again (the log is purged only up to the state's durable
//! `last_applied`); an installed snapshot replaces the whole state or nothing; a state store holds
//! one group's state ([`SHARD`]) and installs or restores no other group's; a data directory is
//! never silently re-initialised.
//!
//! Table of contents (the files, and what each holds):
//! - [`envelope`]: the one place persisted values are encoded (a version byte, then bincode), and
//!   the grouped form of values that name their raft group (`encode_grouped`, `decode_grouped`,
//!   `group_of`: V1 for group 0, `V2_GROUPED` with the group for any other).
//! - [`data_dir`]: opening a data directory safely: identity checks, never a silent re-initialisation.
//!   It creates a directory only when empty and allowed, and refuses another cluster's or node's
//!   directory, one missing a store, or a non-empty one without `IDENTITY`. `usage()` gives the
//!   bytes of each part (log, state, snapshots, other), for the metrics and `ClusterStatus`.
//! - [`log_store`]: entries and vote, durable (WAL synced) before any append or vote is acknowledged.
//!   The raft log (`raft_log`, key = big-endian index) and the vote, commit and purge marks
//!   (`raft_meta`) live in their own RocksDB. The vote, a truncation and a purge are synced before
//!   they return; appends are written unsynced (readable at once) and made durable by `sync()` (one
//!   WAL fsync) under the group-commit writer; the committed mark is unsynced (RocksDB replays its
//!   WAL as an unbroken prefix, and openraft treats the mark as optional). Its disk is bounded
//!   (`LogOptions`): a purge deletes the table files wholly inside the purged range and flushes
//!   `raft_meta`, whose never-full memtable would otherwise keep every WAL file alive, and the WAL is
//!   bounded at 64 MiB; `disk()` reports its WAL and table bytes, `take_sync_latencies()` each
//!   sync's time (the fsync histogram). For tests, `syncs()` counts syncs, `set_sync_delay` slows
//!   them, and `fail_syncs_after` and `panic_appends_after` inject a failed fsync or a panic on the
//!   appending (raft core's) task.
//! - [`log_mark`]: the acknowledged mark beside the log (`log/ACKNOWLEDGED`): how far the log was
//!   synced and the last vote, so a log that lost acknowledged writes is known to have. Two 4 KiB
//!   checksummed slots written alternately in place with one `fdatasync` (a torn write leaves the
//!   older, smaller claim), holding opaque bytes: the raft crate's last synced log id and vote. It
//!   costs one `fdatasync` after each WAL sync, before the appends are reported: on a 2-core VM a
//!   lone durable append took 3.3-3.4 ms without it and 6.0-6.9 ms with it, 16 concurrent appenders
//!   0.41 ms per append without and 0.39-0.65 ms with, group commit absorbing it
//!   (`log_writer::tests::the_mark_costs_one_fdatasync_per_sync`, ignored, run by hand).
//! - [`log_writer`]: group commit: appends written unsynced, one WAL sync for all queued so far,
//!   their completions in order; the vote, truncation and purge in the same order. One
//!   `raft-log-sync` thread takes every queued append, runs one sync for all of them and reports
//!   each durable (openraft's `IOFlushed`) in append order; the vote, truncation and purge queue
//!   behind earlier appends and run as synced writes; after a failed sync or write nothing more is
//!   reported durable. An append may carry a mark: after a sync, once its appends are reported, the
//!   mark of the last of them goes to an `after_sync` hook before the next sync (a failed hook fails
//!   every later sync).
//! - [`state_store`]: the protocol state: consistent reads, one atomic batch per apply, digest,
//!   checkpoint and atomic replacement. In detail:
//!   - One column family per `kungfu_core::keys::Family` plus `sm_meta`; keys are the group
//!     ([`SHARD`], `u16` big-endian, today 0; its readers report it as `StateRead::group`) then the
//!     core key.
//!   - Three ways to read. `read` runs a closure over one RocksDB snapshot: the protocol's reads,
//!     watches, digests and exports. `live()` reads the latest state with no snapshot, each get
//!     seeing the latest commit: for a single routing or key lookup. `read_latest` holds commits
//!     back while its closure runs and reads the latest state through the hot-record cache, with no
//!     RocksDB snapshot (taking one locks the mutex the applying writer needs): for the leader's
//!     short pre-check.
//!   - Options only, nothing on disk depends on them: whole-key bloom filters in the memtables and
//!     table files of the families read by key; one 128 MiB block cache shared by every family,
//!     holding the data blocks and the partitioned index and filter blocks too, the top level of
//!     each and level 0's pinned at high priority (held by the table readers instead, they grew
//!     with the data without bound; held whole in a small cache, evicting them made every point
//!     read decompress a whole index block again); memtables bounded to 128 MiB together
//!     (`kungfu_store_memory_bytes` shows each part); in the records and the journal, values of
//!     512 bytes or more (content, and the facts that carry it) in blob files (RocksDB's integrated
//!     BlobDB), written once at flush and never rewritten by compaction, read through the same
//!     cache. Older table files keep their values inline and stay readable.
//!   - One atomic write batch per apply, written without a WAL: the raft log is the one durable
//!     record. All families flush together (`atomic_flush`), so a crash reopens the state at one
//!     consistent point from which openraft applies the log again; `flush()` makes every commit
//!     durable and runs before each log purge.
//!   - A hot-record cache (decoded agents, threads, memberships and counters of at most 512 encoded
//!     bytes, 16,384 of them), read only by the applying writer (`applier()`) and by `read_latest`,
//!     updated by `commit` under the same gate and emptied by a snapshot install, so it always
//!     equals the database for every key it holds (tests in `crates/kungfu-storage/tests/stores.rs`).
//!   - Beside it the due floor (`StateRead::due_floor`): a time no key of the due index is earlier
//!     than, read from the database at open and after an install, lowered by each due key a commit
//!     puts and read again after a commit that deletes one, under the same gate, never stored.
//!     Settling (L4) skips an object's due-index scan when the floor is after the action, which
//!     changes no byte any replica writes (`the_due_floor_skips_nothing_that_is_due`).
//!   - Every scan bounded to its prefix (RocksDB's iterate bounds), so a scan that finds nothing
//!     reads no table file past its prefix; a digest over all state families; checkpoint and atomic
//!     replacement (a rename dance, recovered at the next open).
//! - [`snapshot`]: snapshot archives built from checkpoints, read in bounded chunks, installed atomically.
//!   A snapshot is a RocksDB checkpoint of the state store kept as a directory (`NAME.ckpt/`: a
//!   flush and hard links to the state's table files, no copies), named by its last log index so
//!   names sort, its meta beside it (written last, in a grouped envelope whose group becomes the
//!   snapshot's `group`). Nothing is packed or hashed when one is built: `pack` writes a checkpoint
//!   as a deterministic tar stream (names in order, fixed times and owners) and returns its length
//!   and SHA-256 computed as the bytes go out, which is how a snapshot is sent; `accept` checks a
//!   received stream's SHA-256 and unpacks it into a directory of its own; `install` links the
//!   checkpoint's table files (copies the rest) into a staging directory and replaces the state
//!   store with it, never for another group than [`SHARD`]; `write_archive` and `install_archive`
//!   are the packed form a backup keeps on disk. It keeps the newest N; packed `.snap` archives of
//!   earlier releases are unpacked once at open.
//! - [`backup`]: backup directories (a snapshot archive and a manifest) and restore from them into a
//!   new data directory. The archive is built from a checkpoint (the caller describes it from the
//!   checkpoint itself) and `manifest.toml` is written last (format, cluster, node, applied entry,
//!   archive size and SHA-256); never over an existing directory, removed on failure. `restore`
//!   checks the archive against the manifest, builds a fresh data directory beside the target
//!   (state installed from the archive, empty log), lets the caller adopt it, and renames it into
//!   place last.
//! - [`error`]: [`Error`], what a store can fail with.

pub mod backup;
pub mod data_dir;
pub mod envelope;
pub mod error;
pub mod log_mark;
pub mod log_store;
pub mod log_writer;
pub mod snapshot;
pub mod state_store;

pub use data_dir::{DataDir, Identity, OpenMode, Stores};
pub use error::Error;
pub use log_mark::MarkFile;
pub use log_store::LogStore;
pub use log_writer::LogWriter;
pub use snapshot::{SnapshotStore, StoredSnapshot};
pub use state_store::StateStore;

/// The raft group whose state this node's state store holds. Every state key starts with its
/// group's two bytes (`GroupId::to_be_bytes`, big-endian) so the state can later split across raft
/// groups and one RocksDB can hold several groups' ranges (DESIGN §7, §11; issue #19 deliverable
/// 3). This is the one source of the prefix: the state store writes it, its readers report it as
/// their group (`StateRead::group`), and the raft node hosts this group. Today there is one.
pub const SHARD: kungfu_types::GroupId = kungfu_types::GroupId::ZERO;

/// The memory a RocksDB store holds besides its files (issue #36: which part of a node's RSS grows):
/// memtables, table readers (index and filter blocks held outside the block cache), and the block
/// cache's charge and the pinned part of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreMemory {
    pub memtables: u64,
    pub table_readers: u64,
    pub block_cache: u64,
    pub block_cache_pinned: u64,
}

impl StoreMemory {
    /// Reads the memory of `db`'s column families `cfs`. Memtables and table readers are summed
    /// over the families; the cache figures are the largest any family reports (families that
    /// share one cache all report it whole).
    pub(crate) fn of(db: &rocksdb::DB, cfs: &[&str], store: &'static str) -> Result<StoreMemory, Error> {
        use rocksdb::properties as p;
        let mut m = StoreMemory::default();
        for name in cfs {
            let cf = db.cf_handle(name).ok_or_else(|| Error::Corrupt { what: format!("{store}: {name} missing") })?;
            let int = |prop: &rocksdb::properties::PropName| -> Result<u64, Error> {
                Ok(db.property_int_value_cf(cf, prop).map_err(Error::rocks(store))?.unwrap_or(0))
            };
            m.memtables += int(p::CUR_SIZE_ALL_MEM_TABLES)?;
            m.table_readers += int(p::ESTIMATE_TABLE_READERS_MEM)?;
            m.block_cache = m.block_cache.max(int(p::BLOCK_CACHE_USAGE)?);
            m.block_cache_pinned = m.block_cache_pinned.max(int(p::BLOCK_CACHE_PINNED_USAGE)?);
        }
        Ok(m)
    }

    pub fn total(&self) -> u64 {
        self.memtables + self.table_readers + self.block_cache
    }
}

/// Runs RocksDB's compactions (its low-priority pool, shared by every database of the process) at
/// the lowest CPU priority, once per process. Compaction is deferrable work that grows with the
/// state (issue #36): at the same priority its bursts take CPU from the threads answering requests
/// and show as latency spikes; niced, it runs in the time requests leave idle. Flushes stay in the
/// high-priority pool at normal priority, so memtables never wait on it and writes do not stall.
fn compactions_yield_to_requests() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| match rocksdb::Env::new() {
        Ok(mut env) => env.lower_thread_pool_cpu_priority(),
        Err(e) => tracing::warn!("could not lower the CPU priority of RocksDB compactions: {e}"),
    });
}

/// Opens a RocksDB with `open`, waiting (at most ten seconds) while an earlier instance in this
/// process still holds the directory's lock: a node restarted in the same process (a test, a
/// restore) opens its stores while tasks of the node it replaced may still be dropping their
/// handles. A lock held by another process (another `kungfud` on the same directory) is refused
/// at once, as RocksDB words that error differently.
pub(crate) fn open_waiting_for_own_lock(
    open: impl Fn() -> Result<rocksdb::DB, rocksdb::Error>,
) -> Result<rocksdb::DB, rocksdb::Error> {
    compactions_yield_to_requests();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match open() {
            Err(e)
                if e.to_string().contains("lock hold by current process") && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            other => return other,
        }
    }
}
