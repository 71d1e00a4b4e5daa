//! The raft log and the vote, in their own RocksDB instance. Every write that openraft must be able
//! to rely on after a crash (appended entries, the vote, purge and truncation marks) is on disk
//! before it is acknowledged: the vote, truncation and purge are written with a synced WAL before
//! the call returns; appended entries are written unsynced (readable at once) and made durable by
//! one WAL sync for all the appends before it ([`LogStore::sync`], driven by
//! [`crate::LogWriter`]), which is when openraft is told. The committed mark is written unsynced:
//! openraft treats it as optional, and it is written after the entries it covers into the same
//! WAL, which RocksDB recovers as a prefix, so a committed mark that survives a crash never names
//! an entry that did not.

use crate::error::Error;
use rocksdb::{ColumnFamilyDescriptor, DB, Direction, IteratorMode, Options, WriteBatch, WriteOptions};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

const CF_LOG: &str = "raft_log";
const CF_META: &str = "raft_meta";
const STORE: &str = "log";

/// The log store. Cheap to clone; all clones share one database.
#[derive(Clone)]
pub struct LogStore {
    db: Arc<DB>,
    /// WAL syncs issued by [`LogStore::sync`] since open, so tests can see group commit coalesce.
    syncs: Arc<AtomicU64>,
    /// Fault injection for tests, in µs: every [`LogStore::sync`] takes at least this long.
    sync_delay_us: Arc<AtomicU64>,
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
        let mut opts = Options::default();
        opts.create_if_missing(create);
        opts.create_missing_column_families(create);
        opts.set_paranoid_checks(true);
        let cfs = [CF_LOG, CF_META].map(|n| ColumnFamilyDescriptor::new(n, Options::default()));
        let db = DB::open_cf_descriptors(&opts, path, cfs).map_err(Error::rocks(STORE))?;
        Ok(LogStore {
            db: Arc::new(db),
            syncs: Arc::new(AtomicU64::new(0)),
            sync_delay_us: Arc::new(AtomicU64::new(0)),
        })
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
        self.syncs.fetch_add(1, Ordering::Relaxed);
        let delay_us = self.sync_delay_us.load(Ordering::Relaxed);
        if delay_us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(delay_us));
        }
        self.db.flush_wal(true).map_err(Error::rocks(STORE))
    }

    /// Fault injection for tests: from now on every [`LogStore::sync`] of this store (and its
    /// clones) takes at least `delay`, as an fsync on a loaded disk does. Zero turns it off.
    pub fn set_sync_delay(&self, delay: std::time::Duration) {
        self.sync_delay_us.store(delay.as_micros() as u64, Ordering::Relaxed);
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
        self.db.write_opt(batch, &synced()).map_err(Error::rocks(STORE))
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
