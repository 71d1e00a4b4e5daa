//! The raft log and the vote, in their own RocksDB instance. Every write that openraft must be able
//! to rely on after a crash (appended entries, the vote, purge and truncation marks) is on disk
//! before it is acknowledged: the vote, truncation and purge are written with a synced WAL before
//! the call returns; appended entries are written unsynced (readable at once) and made durable by
//! one WAL sync for all the appends before it ([`LogStore::sync`], driven by
//! [`crate::LogWriter`]), which is when openraft is told. The committed mark is written unsynced:
//! openraft treats it as optional, and it is written after the entries it covers into the same
//! WAL, which RocksDB recovers as a prefix, so a committed mark that survives a crash never names
//! an entry that did not.
//!
//! Disk (issue #36): a purged log frees its disk. RocksDB deletes a write-ahead log file only once
//! every column family with data in it has flushed that data to a table file. `raft_meta` holds a
//! few small keys (the committed mark, rewritten every commit round, the vote, the purge mark), so
//! its memtable never fills and never flushes by itself: it kept the first WAL file alive, and
//! every one after it, until the total reached RocksDB's derived `max_total_wal_size` (four times
//! every family's write buffers, 1.5 GiB here). So `log/` grew by every byte written
//! (`tests/log_disk.rs` shows it). Now a purge flushes `raft_meta` (a few bytes), WAL files are
//! bounded by [`LogOptions::max_total_wal_bytes`] besides, and table files wholly inside a purged
//! range are deleted at once instead of waiting for a compaction.

use crate::error::Error;
use rocksdb::{ColumnFamilyDescriptor, DB, Direction, FlushOptions, IteratorMode, Options, WriteBatch, WriteOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CF_LOG: &str = "raft_log";
const CF_META: &str = "raft_meta";
const STORE: &str = "log";
/// Sync latencies kept until [`LogStore::take_sync_latencies`] drains them (the metrics do, every
/// second); past it the newest are dropped, so a reader that stops cannot grow the process.
const SYNC_LATENCIES_KEPT: usize = 8192;

/// How the log store bounds its disk and memory. Options only: nothing on disk depends on them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogOptions {
    /// Bytes of entries the `raft_log` memtable collects before it is written to a table file
    /// (RocksDB's `write_buffer_size`); at most two such memtables are held in memory.
    pub write_buffer_bytes: usize,
    /// Most bytes of write-ahead log kept (RocksDB's `max_total_wal_size`): past it RocksDB flushes
    /// the families that hold the oldest WAL file, which is then deleted. 0 leaves RocksDB's
    /// derived default (four times the write buffers of every family), which is what let `log/`
    /// grow to about 1.5 GiB (issue #36).
    pub max_total_wal_bytes: u64,
    /// Flush `raft_meta` with every purge, so its memtable never holds an old WAL file alive.
    pub flush_meta_with_purge: bool,
}

impl Default for LogOptions {
    fn default() -> LogOptions {
        LogOptions {
            write_buffer_bytes: 32 << 20,
            // Twice the write buffer: the WAL of one full memtable and of the one filling.
            max_total_wal_bytes: 64 << 20,
            flush_meta_with_purge: true,
        }
    }
}

/// What the log store holds on disk now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogDisk {
    /// Write-ahead log files, and their bytes.
    pub wal_files: usize,
    pub wal_bytes: u64,
    /// Bytes of the live table files of both families (`rocksdb.live-sst-files-size`).
    pub table_bytes: u64,
}

/// The log store. Cheap to clone; all clones share one database.
#[derive(Clone)]
pub struct LogStore {
    db: Arc<DB>,
    /// WAL syncs issued by [`LogStore::sync`] since open, so tests can see group commit coalesce.
    syncs: Arc<AtomicU64>,
    /// Fault injection for tests, in µs: every [`LogStore::sync`] takes at least this long.
    sync_delay_us: Arc<AtomicU64>,
    /// Fault injection for tests: the sync numbered this (counted from 0 since open) and every
    /// later one fail. `u64::MAX`: never.
    fail_syncs_from: Arc<AtomicU64>,
    /// Fault injection for tests: unsynced appends since open, and the one numbered this (from 0)
    /// and every later one panic. `u64::MAX`: never.
    appends: Arc<AtomicU64>,
    panic_appends_from: Arc<AtomicU64>,
    /// How long each [`LogStore::sync`] took, oldest first (bounded, see [`SYNC_LATENCIES_KEPT`]).
    sync_latencies: Arc<Mutex<Vec<Duration>>>,
    options: LogOptions,
    path: PathBuf,
}

impl std::fmt::Debug for LogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LogStore")
    }
}

fn synced() -> WriteOptions {
    let mut w = WriteOptions::default();
    w.set_sync(true);
    w
}

impl LogStore {
    /// Opens the log store at `path`. With `create`, a missing database is created; without it, a
    /// missing one is an error (never a silent re-initialisation).
    pub fn open(path: &Path, create: bool) -> Result<LogStore, Error> {
        LogStore::open_with(path, create, LogOptions::default())
    }

    /// [`LogStore::open`] with other bounds (tests use small ones to reach them quickly).
    pub fn open_with(path: &Path, create: bool, options: LogOptions) -> Result<LogStore, Error> {
        let mut opts = Options::default();
        opts.create_if_missing(create);
        opts.create_missing_column_families(create);
        opts.set_paranoid_checks(true);
        opts.set_max_total_wal_size(options.max_total_wal_bytes);
        // RocksDB's own info log (`LOG`, `LOG.old.*`) is kept whole by default, a line per flush
        // and compaction for ever: a few files of a bounded size instead.
        opts.set_max_log_file_size(4 << 20);
        opts.set_keep_log_file_num(3);
        let mut log_opts = Options::default();
        log_opts.set_write_buffer_size(options.write_buffer_bytes);
        // Issue #33: a log RocksDB finds corrupt may have lost entries this node acknowledged; it
        // is not opened (no repair), and the error names it and the repair (wipe and rejoin).
        let db = crate::open_waiting_for_own_lock(|| {
            let cfs = [
                ColumnFamilyDescriptor::new(CF_LOG, log_opts.clone()),
                ColumnFamilyDescriptor::new(CF_META, Options::default()),
            ];
            DB::open_cf_descriptors(&opts, path, cfs)
        })
        .map_err(Error::rocks_at(STORE, path))?;
        Ok(LogStore {
            db: Arc::new(db),
            syncs: Arc::new(AtomicU64::new(0)),
            sync_delay_us: Arc::new(AtomicU64::new(0)),
            fail_syncs_from: Arc::new(AtomicU64::new(u64::MAX)),
            appends: Arc::new(AtomicU64::new(0)),
            panic_appends_from: Arc::new(AtomicU64::new(u64::MAX)),
            sync_latencies: Arc::new(Mutex::new(Vec::new())),
            options,
            path: path.to_path_buf(),
        })
    }

    /// The store's directory (the acknowledged mark lives in it, `log_mark.rs`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn cf(&self, name: &str) -> Result<&rocksdb::ColumnFamily, Error> {
        self.db.cf_handle(name).ok_or_else(|| Error::Corrupt { what: format!("column family {name} missing") })
    }

    /// Appends entries `(index, bytes)` in one batch, durable when this returns.
    pub fn append(&self, entries: &[(u64, Vec<u8>)]) -> Result<(), Error> {
        let cf = self.cf(CF_LOG)?;
        let mut batch = WriteBatch::default();
        for (index, bytes) in entries {
            batch.put_cf(cf, index.to_be_bytes(), bytes);
        }
        self.db.write_opt(batch, &synced()).map_err(Error::rocks(STORE))
    }

    /// Appends entries `(index, bytes)` in one batch without syncing: readable when this returns,
    /// durable only after a later [`LogStore::sync`] (or any synced write) returns.
    pub fn append_unsynced(&self, entries: &[(u64, Vec<u8>)]) -> Result<(), Error> {
        let nth = self.appends.fetch_add(1, Ordering::Relaxed);
        if nth >= self.panic_appends_from.load(Ordering::Relaxed) {
            panic!("append {nth} to the raft log panics by fault injection (LogStore::panic_appends_after)");
        }
        let cf = self.cf(CF_LOG)?;
        let mut batch = WriteBatch::default();
        for (index, bytes) in entries {
            batch.put_cf(cf, index.to_be_bytes(), bytes);
        }
        self.db.write_opt(batch, &WriteOptions::default()).map_err(Error::rocks(STORE))
    }

    /// Makes every write that returned before this call durable: one fsync of the WAL, however
    /// many unsynced writes it covers.
    pub fn sync(&self) -> Result<(), Error> {
        let nth = self.syncs.fetch_add(1, Ordering::Relaxed);
        if nth >= self.fail_syncs_from.load(Ordering::Relaxed) {
            return Err(Error::NotDurable(format!(
                "sync {nth} of the raft log failed by fault injection (LogStore::fail_syncs_after)"
            )));
        }
        let started = Instant::now();
        let delay_us = self.sync_delay_us.load(Ordering::Relaxed);
        if delay_us > 0 {
            std::thread::sleep(Duration::from_micros(delay_us));
        }
        let synced = self.db.flush_wal(true).map_err(Error::rocks(STORE));
        let mut latencies = self.sync_latencies.lock().unwrap_or_else(|p| p.into_inner());
        if latencies.len() < SYNC_LATENCIES_KEPT {
            latencies.push(started.elapsed());
        }
        synced
    }

    /// How long each [`LogStore::sync`] since the last call took (at most [`SYNC_LATENCIES_KEPT`]
    /// of them): the fsync latency the metrics export.
    pub fn take_sync_latencies(&self) -> Vec<Duration> {
        std::mem::take(&mut *self.sync_latencies.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Fault injection for tests: after `n` more syncs succeed, every [`LogStore::sync`] of this
    /// store (and its clones) fails, as on a disk that stopped accepting writes. openraft treats a
    /// failed sync as fatal: the node's raft stops (issue #36).
    pub fn fail_syncs_after(&self, n: u64) {
        let from = self.syncs.load(Ordering::Relaxed).saturating_add(n);
        self.fail_syncs_from.store(from, Ordering::Relaxed);
    }

    /// Fault injection for tests: from now on every [`LogStore::sync`] of this store (and its
    /// clones) takes at least `delay`, as an fsync on a loaded disk does. Zero turns it off.
    pub fn set_sync_delay(&self, delay: std::time::Duration) {
        self.sync_delay_us.store(delay.as_micros() as u64, Ordering::Relaxed);
    }

    /// Fault injection for tests: after `n` more unsynced appends, every
    /// [`LogStore::append_unsynced`] panics, on the caller's thread: openraft's core task, which
    /// appends in place (issue #15), so its core dies as from a bug in it (issue #36).
    pub fn panic_appends_after(&self, n: u64) {
        let from = self.appends.load(Ordering::Relaxed).saturating_add(n);
        self.panic_appends_from.store(from, Ordering::Relaxed);
    }

    /// How many times [`LogStore::sync`] was called on this store since it was opened.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// Entries with `start <= index < end`, in order.
    pub fn entries(&self, start: u64, end: u64) -> Result<Vec<(u64, Vec<u8>)>, Error> {
        let cf = self.cf(CF_LOG)?;
        let mut out = Vec::new();
        let start_key = start.to_be_bytes();
        for item in self.db.iterator_cf(cf, IteratorMode::From(&start_key, Direction::Forward)) {
            let (k, v) = item.map_err(Error::rocks(STORE))?;
            let index = decode_index(&k)?;
            if index >= end {
                break;
            }
            out.push((index, v.to_vec()));
        }
        Ok(out)
    }

    /// The last entry, if any.
    pub fn last(&self) -> Result<Option<(u64, Vec<u8>)>, Error> {
        let cf = self.cf(CF_LOG)?;
        match self.db.iterator_cf(cf, IteratorMode::End).next() {
            Some(item) => {
                let (k, v) = item.map_err(Error::rocks(STORE))?;
                Ok(Some((decode_index(&k)?, v.to_vec())))
            }
            None => Ok(None),
        }
    }

    /// Deletes every entry after `after` (all of them with None), durable when this returns.
    pub fn truncate_after(&self, after: Option<u64>) -> Result<(), Error> {
        let cf = self.cf(CF_LOG)?;
        let from = after.map(|a| a.saturating_add(1)).unwrap_or(0);
        let mut batch = WriteBatch::default();
        batch.delete_range_cf(cf, from.to_be_bytes(), u64::MAX.to_be_bytes());
        batch.delete_cf(cf, u64::MAX.to_be_bytes());
        self.db.write_opt(batch, &synced()).map_err(Error::rocks(STORE))
    }

    /// Deletes every entry up to and including `upto`, recording `mark` (the last purged log id)
    /// under `mark_key` in the same synced batch, so the log never has a hole without its mark.
    pub fn purge_upto(&self, upto: u64, mark_key: &str, mark: Vec<u8>) -> Result<(), Error> {
        let log = self.cf(CF_LOG)?;
        let meta = self.cf(CF_META)?;
        let mut batch = WriteBatch::default();
        batch.put_cf(meta, mark_key, mark);
        batch.delete_range_cf(log, 0u64.to_be_bytes(), upto.saturating_add(1).to_be_bytes());
        self.db.write_opt(batch, &synced()).map_err(Error::rocks(STORE))?;
        self.reclaim(upto)
    }

    /// Frees the disk of a purge (issue #36; see the module's comment). Table files holding only
    /// purged entries are deleted now (their keys are already deleted by the synced range
    /// deletion; RocksDB skips level-0 files, which the next compaction drops); then `raft_meta`
    /// is flushed without waiting, so its memtable no longer holds the oldest WAL file.
    fn reclaim(&self, upto: u64) -> Result<(), Error> {
        let log = self.cf(CF_LOG)?;
        self.db.delete_file_in_range_cf(log, 0u64.to_be_bytes(), upto.to_be_bytes()).map_err(Error::rocks(STORE))?;
        if self.options.flush_meta_with_purge {
            let mut no_wait = FlushOptions::default();
            no_wait.set_wait(false);
            self.db.flush_cf_opt(self.cf(CF_META)?, &no_wait).map_err(Error::rocks(STORE))?;
        }
        Ok(())
    }

    /// The store's files now: its write-ahead log and its live table files. Reads the directory
    /// and two RocksDB properties, no data.
    pub fn disk(&self) -> Result<LogDisk, Error> {
        let mut disk = LogDisk::default();
        let entries = std::fs::read_dir(&self.path).map_err(Error::io(&self.path))?;
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().ends_with(".log") {
                disk.wal_files += 1;
                disk.wal_bytes += entry.metadata().map(|m| m.len()).unwrap_or(0);
            }
        }
        for name in [CF_LOG, CF_META] {
            let bytes = self
                .db
                .property_int_value_cf(self.cf(name)?, rocksdb::properties::LIVE_SST_FILES_SIZE)
                .map_err(Error::rocks(STORE))?;
            disk.table_bytes += bytes.unwrap_or(0);
        }
        Ok(disk)
    }

    /// The memory the log's RocksDB holds now (issue #36).
    pub fn memory(&self) -> Result<crate::StoreMemory, Error> {
        crate::StoreMemory::of(&self.db, &[CF_LOG, CF_META], STORE)
    }

    /// Writes a metadata value (the vote, the committed log id), durable when this returns.
    pub fn put_meta(&self, key: &str, value: Vec<u8>) -> Result<(), Error> {
        let cf = self.cf(CF_META)?;
        let mut batch = WriteBatch::default();
        batch.put_cf(cf, key, value);
        self.db.write_opt(batch, &synced()).map_err(Error::rocks(STORE))
    }

    /// Writes a metadata value without syncing (the committed mark, which openraft treats as
    /// optional: losing the latest one in a crash only means re-applying less on restart).
    pub fn put_meta_unsynced(&self, key: &str, value: Vec<u8>) -> Result<(), Error> {
        let cf = self.cf(CF_META)?;
        self.db.put_cf_opt(cf, key, value, &WriteOptions::default()).map_err(Error::rocks(STORE))
    }

    pub fn get_meta(&self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        let cf = self.cf(CF_META)?;
        self.db.get_cf(cf, key).map_err(Error::rocks(STORE))
    }
}

fn decode_index(k: &[u8]) -> Result<u64, Error> {
    let arr: [u8; 8] = k.try_into().map_err(|_| Error::Corrupt { what: format!("log key of {} bytes", k.len()) })?;
    Ok(u64::from_be_bytes(arr))
}
