//! How one node's write path batches (issue #30, "measure first"): appends to the log, entries
//! sent to followers, apply batches and snapshot builds, each counted with the entries it carried,
//! so entries per append, per AppendEntries and per apply batch are a division of two counters.
//! Counters only (atomics bumped where the work is done, read by the server's metrics every
//! second); nothing here decides anything.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The counters, shared by the log, the network and the state machine of one node.
#[derive(Debug, Default)]
pub struct WritePathStats {
    appends: AtomicU64,
    appended_entries: AtomicU64,
    append_rpcs: AtomicU64,
    replicated_entries: AtomicU64,
    apply_batches: AtomicU64,
    applied_entries: AtomicU64,
    applied_commands: AtomicU64,
    snapshots_built: AtomicU64,
    snapshot_build_micros: AtomicU64,
}

/// One reading of [`WritePathStats`], plus the log's WAL syncs (fsyncs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WritePathCounts {
    /// Appends to this node's log, and the entries they held.
    pub appends: u64,
    pub appended_entries: u64,
    /// AppendEntries requests this node sent with at least one entry, and the entries they held.
    pub append_rpcs: u64,
    pub replicated_entries: u64,
    /// Batches of committed entries applied to the state, the entries and commands they held.
    pub apply_batches: u64,
    pub applied_entries: u64,
    pub applied_commands: u64,
    /// Snapshots built, and the wall time they took together.
    pub snapshots_built: u64,
    pub snapshot_build_micros: u64,
    /// WAL syncs of the raft log (each one fsync).
    pub log_syncs: u64,
}

pub type Stats = Arc<WritePathStats>;

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl WritePathStats {
    pub fn appended(&self, entries: u64) {
        add(&self.appends, 1);
        add(&self.appended_entries, entries);
    }

    pub fn replicated(&self, entries: u64) {
        if entries > 0 {
            add(&self.append_rpcs, 1);
            add(&self.replicated_entries, entries);
        }
    }

    pub fn applied(&self, entries: u64, commands: u64) {
        add(&self.apply_batches, 1);
        add(&self.applied_entries, entries);
        add(&self.applied_commands, commands);
    }

    pub fn snapshot_built(&self, took: std::time::Duration) {
        add(&self.snapshots_built, 1);
        add(&self.snapshot_build_micros, took.as_micros() as u64);
    }

    /// The counters now, with the log's syncs.
    pub fn read(&self, log_syncs: u64) -> WritePathCounts {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        WritePathCounts {
            appends: get(&self.appends),
            appended_entries: get(&self.appended_entries),
            append_rpcs: get(&self.append_rpcs),
            replicated_entries: get(&self.replicated_entries),
            apply_batches: get(&self.apply_batches),
            applied_entries: get(&self.applied_entries),
            applied_commands: get(&self.applied_commands),
            snapshots_built: get(&self.snapshots_built),
            snapshot_build_micros: get(&self.snapshot_build_micros),
            log_syncs,
        }
    }
}
