//! The raft log's disk is reclaimed as the log is purged (issue #36). Each case writes the log as
//! a node does (entries appended unsynced, one sync per round, the committed mark rewritten every
//! round in `raft_meta`, a purge keeping the newest entries every so often) far past several
//! purges, and bounds the bytes of the log's directory: a bound on disk, not on time.
//!
//! The first case is the cause, kept as evidence: with RocksDB's defaults (no WAL bound) and no
//! flush of `raft_meta`, the first write-ahead log file is never deleted and the directory holds
//! nearly every byte ever written. Either part of the fix alone bounds it, which names the cause:
//! `raft_meta`'s memtable, never full, held the oldest WAL file alive.

use kungfu_storage::data_dir::bytes_under;
use kungfu_storage::log_store::{LogOptions, LogStore};
use std::path::Path;

/// The size of each entry (about a 1 KiB post with its envelope).
const ENTRY_BYTES: usize = 1024;
/// Entries appended per round, then one sync and the committed mark.
const ROUND: u64 = 64;
/// A purge every this many entries, keeping the newest [`KEEP`] (a node: a snapshot every
/// `snapshot_after_logs`, keeping `keep_logs_after_snapshot`).
const PURGE_EVERY: u64 = 2_000;
const KEEP: u64 = 1_000;
/// Entries written per case: 24 MiB, twelve purges, many times the small bounds below.
const ENTRIES: u64 = 24_000;
const MIB: u64 = 1 << 20;

/// Small bounds, so a test reaches them with a few MiB of writes.
fn small(max_total_wal_bytes: u64, flush_meta_with_purge: bool) -> LogOptions {
    LogOptions { write_buffer_bytes: MIB as usize, max_total_wal_bytes, flush_meta_with_purge }
}

/// What one case saw: the directory's bytes after each purge, and the WAL files at the end.
#[derive(Debug)]
struct Run {
    after_purges: Vec<u64>,
    wal_files: usize,
    wal_bytes: u64,
    table_bytes: u64,
}

/// Writes [`ENTRIES`] entries into a new log store at `dir` as a node does, and checks after every
/// purge that the entries kept are all there.
fn write_like_a_node(dir: &Path, options: LogOptions) -> Run {
    let store = LogStore::open_with(dir, true, options).expect("open the log store");
    let body = vec![0xAB_u8; ENTRY_BYTES];
    let mut after_purges = Vec::new();
    let mut next = 1u64;
    while next <= ENTRIES {
        let round: Vec<(u64, Vec<u8>)> = (next..next + ROUND).map(|i| (i, body.clone())).collect();
        store.append_unsynced(&round).expect("append");
        store.sync().expect("sync");
        next += ROUND;
        let last = next - 1;
        store.put_meta_unsynced("committed", last.to_be_bytes().to_vec()).expect("committed mark");
        if last % PURGE_EVERY < ROUND && last > KEEP {
            let upto = last - KEEP;
            store.purge_upto(upto, "last_purged", upto.to_be_bytes().to_vec()).expect("purge");
            let kept = store.entries(0, u64::MAX).expect("read the log");
            assert_eq!(kept.first().map(|e| e.0), Some(upto + 1), "the log starts right after the purge");
            assert_eq!(kept.len() as u64, KEEP, "every entry after the purge is kept");
            after_purges.push(bytes_under(dir));
        }
    }
    let disk = store.disk().expect("disk");
    drop(store);
    // The files left are a whole store: reopened, it holds every kept entry.
    let reopened = LogStore::open_with(dir, false, options).expect("reopen");
    let kept = reopened.entries(0, u64::MAX).expect("read the log");
    assert_eq!(kept.len() as u64, KEEP, "the kept entries survive a reopen");
    assert!(kept.iter().all(|(_, v)| v == &body));
    Run { after_purges, wal_files: disk.wal_files, wal_bytes: disk.wal_bytes, table_bytes: disk.table_bytes }
}

fn written() -> u64 {
    ENTRIES * ENTRY_BYTES as u64
}

/// The bound every fixed case keeps, once past the first purges: the WAL of two write buffers
/// (or the WAL bound), the memtables' worth of table files not yet compacted away, and the kept
/// entries, with room for a flush or compaction running behind (measured: 2.2-2.5 MiB). The
/// unbounded case passes 20 MiB.
const BOUND: u64 = 6 * MIB;

fn assert_bounded(name: &str, run: &Run) {
    assert!(run.after_purges.len() >= 10, "{name}: wrote past {} purges", run.after_purges.len());
    let largest = run.after_purges.iter().skip(2).max().copied().unwrap_or(0);
    assert!(
        largest <= BOUND,
        "{name}: the log directory reached {largest} bytes after {} of writes (bound {BOUND}): {run:?}",
        written()
    );
    // Old WAL files are deleted (without the fix there is one per MiB written, 26 here), and the
    // purged entries leave no table files behind.
    assert!(run.wal_files <= 8, "{name}: {run:?}");
    assert!(run.table_bytes <= 4 * MIB, "{name}: {run:?}");
}

#[test]
fn without_the_fix_the_first_wal_file_is_never_freed_and_the_log_directory_keeps_every_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = write_like_a_node(dir.path(), small(0, false));
    eprintln!("rocksdb defaults: {run:?} for {} bytes written", written());
    // Nearly everything written is still on disk, in WAL files, although the log holds 1,000
    // entries (1 MiB): the directory grows by every write.
    assert!(run.wal_bytes >= written() * 8 / 10, "{run:?}");
    // And it grows with the writes between the first purge and the last.
    let (first, last) = (run.after_purges[0], run.after_purges[run.after_purges.len() - 1]);
    let between = (run.after_purges.len() as u64 - 1) * PURGE_EVERY * ENTRY_BYTES as u64;
    assert!(last.saturating_sub(first) >= between * 8 / 10, "{run:?}");
}

#[test]
fn flushing_raft_meta_with_each_purge_alone_frees_the_wal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = write_like_a_node(dir.path(), small(0, true));
    eprintln!("flush raft_meta with the purge: {run:?}");
    assert_bounded("flush raft_meta", &run);
}

#[test]
fn a_wal_bound_alone_frees_the_wal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = write_like_a_node(dir.path(), small(2 * MIB, false));
    eprintln!("max_total_wal_size 2 MiB: {run:?}");
    assert_bounded("max_total_wal_size", &run);
}

#[test]
fn the_log_directory_stops_growing_across_purges() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The shipped combination (LogOptions::default()), with small buffers.
    let defaults = LogOptions::default();
    assert!(defaults.flush_meta_with_purge && defaults.max_total_wal_bytes > 0, "{defaults:?}");
    let options = small(2 * MIB, true);
    let run = write_like_a_node(dir.path(), options);
    eprintln!("both: {run:?}");
    assert_bounded("both", &run);
    // What stays is of the order of the bounds, not of what was written.
    assert!(run.wal_bytes <= 4 * MIB, "{run:?}");
}

/// The shipped options at a node's scale (issue #36's figures): 1 KiB entries, a purge every
/// 10,000 keeping 1,000 (the `[raft]` defaults before issue #30). Slow (a few hundred MB written):
/// a measurement, not a check of CI's (the bound itself is asserted by the tests above); run by
/// hand with `--run-ignored only`. Prints the log directory's bytes after each purge.
#[test]
#[ignore = "a measurement of a few hundred MB, run by hand: --run-ignored only"]
fn measure_the_shipped_options_at_a_nodes_scale() {
    for (name, options) in [
        (
            "rocksdb defaults",
            LogOptions { write_buffer_bytes: 64 << 20, max_total_wal_bytes: 0, flush_meta_with_purge: false },
        ),
        ("shipped", LogOptions::default()),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = LogStore::open_with(dir.path(), true, options).expect("open");
        let body = vec![0xAB_u8; ENTRY_BYTES];
        let entries = 300_000u64;
        let mut line = Vec::new();
        for start in (1..=entries).step_by(ROUND as usize) {
            let round: Vec<(u64, Vec<u8>)> = (start..start + ROUND).map(|i| (i, body.clone())).collect();
            store.append_unsynced(&round).expect("append");
            store.sync().expect("sync");
            let last = start + ROUND - 1;
            store.put_meta_unsynced("committed", last.to_be_bytes().to_vec()).expect("mark");
            if last % 10_000 < ROUND && last > 1_000 {
                store.purge_upto(last - 1_000, "last_purged", vec![0]).expect("purge");
                line.push(bytes_under(dir.path()) / 1024);
            }
        }
        let size = bytes_under(dir.path());
        eprintln!(
            "{name}: after {entries} entries of {ENTRY_BYTES} B: log/ {size} bytes ({:.0} bytes per write); KiB after each purge: {line:?}; {:?}",
            size as f64 / entries as f64,
            store.disk().expect("disk")
        );
    }
}
