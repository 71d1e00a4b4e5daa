//! The newest entries of the raft log, decoded, as they were appended (issue #30, "encode once").
//!
//! openraft reads back what it has just appended: the state machine's apply reads every committed
//! entry from the log, and each replication stream reads the entries it sends. From RocksDB that
//! is a seek in the memtable and a decode of every entry, on the leader once for apply and once per
//! follower, on a follower once for apply. The entries were decoded values a moment earlier, so
//! the log keeps the newest of them here and answers a read of the log's tail from memory.
//!
//! Rule kept: what this holds is exactly the log's entries `[first, last]`, where `last` is the
//! log's last entry: an append adds its entries only after the store holds them, a truncation
//! drops them before the store does, a purge drops what it purges, and anything that would leave
//! a gap empties the cache. A read it cannot answer whole goes to the store. Bounded by entries and
//! by encoded bytes; the oldest go first.

use crate::types::Entry;
use openraft::entry::RaftEntry;
use std::collections::VecDeque;
use std::sync::Mutex;

/// How many of the newest entries the log keeps decoded, at most.
pub const RECENT_ENTRIES: usize = 4096;
/// How many encoded bytes of them, at most (their decoded size is of the same order).
pub const RECENT_BYTES: usize = 16 << 20;

#[derive(Debug)]
pub(crate) struct Recent {
    inner: Mutex<Inner>,
    max_entries: usize,
    max_bytes: usize,
}

#[derive(Debug, Default)]
struct Inner {
    /// Consecutive entries, oldest first, each with its encoded size.
    entries: VecDeque<(Entry, usize)>,
    bytes: usize,
}

impl Inner {
    fn first(&self) -> Option<u64> {
        self.entries.front().map(|(e, _)| e.index())
    }

    fn last(&self) -> Option<u64> {
        self.entries.back().map(|(e, _)| e.index())
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }
}

impl Default for Recent {
    fn default() -> Recent {
        Recent::new(RECENT_ENTRIES, RECENT_BYTES)
    }
}

impl Recent {
    pub(crate) fn new(max_entries: usize, max_bytes: usize) -> Recent {
        Recent { inner: Mutex::new(Inner::default()), max_entries, max_bytes }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Every critical section leaves `Inner` whole (no call that can panic runs inside one
        // between two of its changes), so a poisoned lock's value is still the truth.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Entries the store now holds, in order, each with its encoded size. Called after the store
    /// wrote them.
    pub(crate) fn appended(&self, entries: impl IntoIterator<Item = (Entry, usize)>) {
        let mut inner = self.lock();
        for (entry, size) in entries {
            // Not the next one after the cache's last: a gap, or an overwrite openraft did not
            // truncate first. Either way the cache can no longer vouch for what precedes it.
            if inner.last().is_some_and(|last| entry.index() != last + 1) {
                inner.clear();
            }
            inner.bytes += size;
            inner.entries.push_back((entry, size));
        }
        while inner.entries.len() > self.max_entries || (inner.bytes > self.max_bytes && inner.entries.len() > 1) {
            if let Some((_, size)) = inner.entries.pop_front() {
                inner.bytes -= size;
            }
        }
    }

    /// Drops the entries from `since` on. Called before the store truncates.
    pub(crate) fn truncated_from(&self, since: u64) {
        let mut inner = self.lock();
        while inner.last().is_some_and(|last| last >= since) {
            if let Some((_, size)) = inner.entries.pop_back() {
                inner.bytes -= size;
            }
        }
    }

    /// Drops the entries up to `upto`, inclusive. Called before the store purges.
    pub(crate) fn purged_upto(&self, upto: u64) {
        let mut inner = self.lock();
        while inner.first().is_some_and(|first| first <= upto) {
            if let Some((_, size)) = inner.entries.pop_front() {
                inner.bytes -= size;
            }
        }
    }

    /// The log's entries in `[start, end)` when the cache holds every one of them the log holds:
    /// `start` is one it holds and the rest run to the log's last entry or to `end`. None otherwise
    /// (read the store).
    pub(crate) fn get(&self, start: u64, end: u64) -> Option<Vec<Entry>> {
        let inner = self.lock();
        let (first, last) = (inner.first()?, inner.last()?);
        if start < first || start > last || end <= start {
            return None;
        }
        let from = (start - first) as usize;
        let upto = (end.min(last + 1) - first) as usize;
        Some(inner.entries.range(from..upto).map(|(e, _)| e.clone()).collect())
    }

    #[cfg(test)]
    fn span(&self) -> Option<(u64, u64)> {
        let inner = self.lock();
        Some((inner.first()?, inner.last()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blank(index: u64) -> (Entry, usize) {
        let e = openraft::Entry {
            log_id: openraft::LogId::new(
                <openraft::alias::LeaderIdOf<crate::types::TypeConfig> as openraft::vote::RaftLeaderIdExt>::new_committed(1, 1),
                index,
            ),
            payload: openraft::EntryPayload::Blank,
        };
        (e, 100)
    }

    fn indexes(v: Option<Vec<Entry>>) -> Option<Vec<u64>> {
        v.map(|v| v.iter().map(|e| e.index()).collect())
    }

    #[test]
    fn a_read_is_answered_only_when_the_cache_holds_every_entry_of_it() {
        let r = Recent::new(10, 1 << 20);
        r.appended((5..=8).map(blank));
        assert_eq!(indexes(r.get(5, 9)), Some(vec![5, 6, 7, 8]));
        assert_eq!(indexes(r.get(6, 8)), Some(vec![6, 7]));
        // Past the log's last entry there is nothing to miss.
        assert_eq!(indexes(r.get(7, u64::MAX)), Some(vec![7, 8]));
        // Before the cache's first entry: the store.
        assert_eq!(indexes(r.get(4, 9)), None);
        assert_eq!(indexes(r.get(9, 12)), None);
        assert_eq!(indexes(r.get(6, 6)), None);
    }

    #[test]
    fn truncation_purge_and_gaps_keep_it_equal_to_the_log() {
        let r = Recent::new(10, 1 << 20);
        r.appended((1..=6).map(blank));
        r.truncated_from(5);
        assert_eq!(r.span(), Some((1, 4)));
        r.appended([blank(5)]);
        assert_eq!(r.span(), Some((1, 5)));
        r.purged_upto(2);
        assert_eq!(r.span(), Some((3, 5)));
        // An append that does not follow the last entry (a snapshot installed past it): the cache
        // restarts from it instead of holding a gap.
        r.appended([blank(20), blank(21)]);
        assert_eq!(r.span(), Some((20, 21)));
        assert_eq!(indexes(r.get(5, 22)), None);
        r.purged_upto(30);
        assert_eq!(r.span(), None);
        assert_eq!(indexes(r.get(20, 22)), None);
    }

    #[test]
    fn it_keeps_at_most_its_bounds_dropping_the_oldest() {
        let r = Recent::new(4, 1 << 20);
        r.appended((1..=10).map(blank));
        assert_eq!(r.span(), Some((7, 10)));
        let by_bytes = Recent::new(100, 250);
        by_bytes.appended((1..=10).map(blank));
        assert_eq!(by_bytes.span(), Some((9, 10)), "100 bytes each, at most 250");
    }
}
