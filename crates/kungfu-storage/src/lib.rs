//! The RocksDB stores of a Kungfu node. It stores bytes under keys and knows no protocol rule: the
//! protocol core decides what to write, openraft decides when.
//!
//! Layout of a data directory (see [`DataDir`]):
//!
//! ```text
//! <root>/IDENTITY        cluster id, node id and format; checked at every start
//! <root>/log/            RocksDB: the raft log (`raft_log`) and vote/purge/commit marks (`raft_meta`),
//!                        and `ACKNOWLEDGED`, the mark of what the log acknowledged (issue #33)
//! <root>/state/          RocksDB: the protocol state, one column family per key family, and `sm_meta`
//! <root>/snapshots/      snapshot archives (a RocksDB checkpoint of `state/`, packed) and their metadata
//! ```
//!
//! Table of contents:
//! - [`envelope`]: the one place persisted values are encoded (a version byte, then bincode), and
//!   the grouped form of values that name their raft group.
//! - [`data_dir`]: opening a data directory safely: identity checks, never a silent re-initialisation.
//! - [`log_store`]: entries and vote, durable (WAL synced) before any append or vote is acknowledged.
//! - [`log_mark`]: the acknowledged mark beside the log (`log/ACKNOWLEDGED`): how far the log was
//!   synced and the last vote, so a log that lost acknowledged writes is known to have (issue #33).
//! - [`log_writer`]: group commit: appends written unsynced, one WAL sync for all queued so far,
//!   their completions in order; the vote, truncation and purge in the same order.
//! - [`state_store`]: the protocol state: consistent reads, one atomic batch per apply, digest,
//!   checkpoint and atomic replacement.
//! - [`snapshot`]: snapshot archives built from checkpoints, read in bounded chunks, installed atomically.
//! - [`backup`]: backup directories (a snapshot archive and a manifest) and restore from them into a
//!   new data directory.

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
