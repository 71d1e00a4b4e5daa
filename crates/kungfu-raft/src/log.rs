//! openraft's log storage over [`kungfu_storage::LogStore`], with group commit
//! ([`kungfu_storage::LogWriter`]). Entries and the vote are enveloped. An append returns once its
//! entries are written (readable) and reports them durable through openraft's `IOFlushed`
//! callback after the one WAL sync that covers them, so the raft core replicates them while they
//! sync; the vote, truncation and purge are synced before they return, in order with the appends
//! (the `RaftLogStorage` contract). The committed mark is written unsynced (openraft treats it as
//! optional). Syncs run on the writer thread; unsynced writes and short reads (memtable work, no
//! fsync) run in place on the raft core's task; longer reads on the blocking pool (issue #15).
//!
//! A node's log also keeps its acknowledged mark ([`crate::mark::AckMark`], issue #33): raised
//! after each sync once openraft has heard of it (before the next sync), recorded with each vote,
//! lowered before a truncation.

use crate::types::{Entry, LogId, TypeConfig, Vote};
use kungfu_storage::{LogStore, LogWriter, envelope};
use openraft::entry::RaftEntry;
use openraft::storage::{IOFlushed, LogState, RaftLogReader, RaftLogStorage};
use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

const VOTE: &str = "vote";
const COMMITTED: &str = "committed";
const PURGED: &str = "last_purged";
/// Log reads of at most this many entries run on the caller's task (see `try_get_log_entries`).
const INLINE_READ_ENTRIES: u64 = 64;

/// The raft log of one node. Cheap to clone; all clones share one writer, whose thread ends when
/// the last clone is dropped (after it has synced and reported everything queued).
#[derive(Clone, Debug)]
pub struct RaftLog {
    store: LogStore,
    writer: Arc<LogWriter>,
    /// The state the log's entries are applied to, when this log is a node's: a purge first makes
    /// the state durable up to the purge (see [`RaftLog::purge`]).
    state: Option<Arc<kungfu_storage::StateStore>>,
    /// Entries per append (issue #30).
    stats: crate::stats::Stats,
    /// The newest entries, decoded: apply and replication read the log's tail from memory.
    recent: Arc<crate::recent::Recent>,
    /// What this log acknowledged, when it is a node's (issue #33).
    mark: Option<Arc<crate::mark::AckMark>>,
}

impl RaftLog {
    /// The log over `store`, with its writer thread started.
    pub fn new(store: LogStore) -> Result<RaftLog, kungfu_storage::Error> {
        let writer = Arc::new(LogWriter::start(store.clone())?);
        Ok(RaftLog { store, writer, state: None, stats: Default::default(), recent: Default::default(), mark: None })
    }

    /// The log over `store` keeping `mark` (issue #33): the writer thread raises the mark after each
    /// sync, before the entries it covered are reported durable.
    pub fn marked(store: LogStore, mark: Arc<crate::mark::AckMark>) -> Result<RaftLog, kungfu_storage::Error> {
        let on_sync = mark.clone();
        let after_sync: kungfu_storage::log_writer::AfterSync = Box::new(move |bytes: &[u8]| {
            let last: LogId = envelope::decode(bytes, "synced log id")?;
            on_sync.synced(last)
        });
        let writer = Arc::new(LogWriter::start_with(store.clone(), Some(after_sync))?);
        Ok(RaftLog {
            store,
            writer,
            state: None,
            stats: Default::default(),
            recent: Default::default(),
            mark: Some(mark),
        })
    }

    /// The log of a node whose state machine applies to `state`: every purge is held to what that
    /// state holds durably (issue #30, one durable log).
    pub fn applied_to(mut self, state: Arc<kungfu_storage::StateStore>) -> RaftLog {
        self.state = Some(state);
        self
    }

    /// Counts this log's appends into `stats`.
    pub fn with_stats(mut self, stats: crate::stats::Stats) -> RaftLog {
        self.stats = stats;
        self
    }

    /// Runs `op`, a write synced before it completes, on the writer thread after every earlier
    /// append is durable and reported (openraft: "all write-IO must be serialized").
    async fn synced(
        &self,
        op: impl FnOnce(&LogStore) -> Result<(), kungfu_storage::Error> + Send + 'static,
    ) -> Result<(), io::Error> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.writer.synced(
            Box::new(op),
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        match rx.await {
            Ok(r) => r.map_err(io::Error::from),
            Err(_) => Err(io::Error::other("the raft log writer stopped")),
        }
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(LogStore) -> Result<T, kungfu_storage::Error> + Send + 'static,
    ) -> Result<T, io::Error> {
        let store = self.store.clone();
        match tokio::task::spawn_blocking(move || f(store)).await {
            Ok(r) => r.map_err(io::Error::from),
            Err(e) => Err(io::Error::other(format!("log store task failed: {e}"))),
        }
    }

    fn meta<T: serde::de::DeserializeOwned>(store: &LogStore, key: &str) -> Result<Option<T>, kungfu_storage::Error> {
        match store.get_meta(key)? {
            Some(bytes) => Ok(Some(envelope::decode(&bytes, key)?)),
            None => Ok(None),
        }
    }

    /// Where the log in `store` ends (its last entry, or its purge mark when it holds none).
    pub fn end(store: &LogStore) -> Result<Option<LogId>, kungfu_storage::Error> {
        match store.last()? {
            Some((_, bytes)) => Ok(Some(envelope::decode::<Entry>(&bytes, "log entry")?.log_id())),
            None => RaftLog::meta(store, PURGED),
        }
    }

    /// The vote saved in `store`.
    pub fn stored_vote(store: &LogStore) -> Result<Option<Vote>, kungfu_storage::Error> {
        RaftLog::meta(store, VOTE)
    }

    /// Writes `vote` into `store`, synced: the vote restored from the acknowledged mark at start,
    /// before raft reads it (issue #33).
    pub fn restore_vote(store: &LogStore, vote: &Vote) -> Result<(), kungfu_storage::Error> {
        store.put_meta(VOTE, envelope::encode(vote))
    }
}

fn bounds(range: &impl RangeBounds<u64>) -> (u64, u64) {
    let start = match range.start_bound() {
        Bound::Included(s) => *s,
        Bound::Excluded(s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(e) => e.saturating_add(1),
        Bound::Excluded(e) => *e,
        Bound::Unbounded => u64::MAX,
    };
    (start, end)
}

impl RaftLogReader<TypeConfig> for RaftLog {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, io::Error> {
        let (start, end) = bounds(&range);
        if let Some(entries) = self.recent.get(start, end) {
            return Ok(entries);
        }
        let read = move |s: LogStore| -> Result<Vec<Entry>, kungfu_storage::Error> {
            s.entries(start, end)?
                .into_iter()
                .map(|(_, bytes)| envelope::decode::<Entry>(&bytes, "log entry"))
                .collect()
        };
        // Issue #15: replication reads the entries it just appended, from the memtable; a short
        // range is read in place instead of paying two thread hops per replication round. A long
        // one (a lagging follower catching up) may read table files, on the blocking pool.
        if end.saturating_sub(start) <= INLINE_READ_ENTRIES {
            return read(self.store.clone()).map_err(io::Error::from);
        }
        self.blocking(read).await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, io::Error> {
        self.blocking(|s| RaftLog::meta(&s, VOTE)).await
    }
}

impl RaftLogStorage<TypeConfig> for RaftLog {
    type LogReader = RaftLog;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, io::Error> {
        self.blocking(|s| {
            let last_purged_log_id: Option<LogId> = RaftLog::meta(&s, PURGED)?;
            let last = match s.last()? {
                Some((_, bytes)) => Some(envelope::decode::<Entry>(&bytes, "log entry")?.log_id()),
                None => last_purged_log_id,
            };
            Ok(LogState { last_purged_log_id, last_log_id: last })
        })
        .await
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    /// Durable before it returns (openraft's contract), after every earlier append.
    async fn save_vote(&mut self, vote: &Vote) -> Result<(), io::Error> {
        let bytes = envelope::encode(vote);
        let (mark, vote) = (self.mark.clone(), vote.clone());
        // Raft's voter durability (issue #33): the vote is recorded in the mark too, after the
        // store holds it (a mark never names a vote the store could lack but for damage).
        self.synced(move |s| {
            s.put_meta(VOTE, bytes)?;
            mark.map_or(Ok(()), |m| m.vote_saved(&vote))
        })
        .await
    }

    /// Unsynced: openraft treats the committed mark as optional (`save_committed` docs), and
    /// syncing it was a second fsync per commit round, awaited before apply (issue #15). openraft
    /// saves it only for entries whose append has returned, so it lands in the WAL after them, and
    /// RocksDB recovers the WAL as a prefix: a mark that survives a crash names only entries that
    /// survived too. One lost in a crash makes the restart re-apply less, never wrongly.
    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), io::Error> {
        let bytes = envelope::encode(&committed);
        // Unsynced, so written in place like an append (issue #15).
        self.store.put_meta_unsynced(COMMITTED, bytes).map_err(io::Error::from)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, io::Error> {
        self.blocking(|s| Ok(RaftLog::meta::<Option<LogId>>(&s, COMMITTED)?.flatten())).await
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed<TypeConfig>) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let batch: Vec<(u64, Vec<u8>)> = entries.iter().map(|e| (e.log_id().index(), envelope::encode(e))).collect();
        self.stats.appended(batch.len() as u64);
        let sizes: Vec<usize> = batch.iter().map(|(_, b)| b.len()).collect();
        // Returns once the entries are written (readable, openraft's condition for returning);
        // the writer thread calls `callback` once a WAL sync covers them (its condition for the
        // callback). On an error the callback gets it too.
        let flushed: kungfu_storage::log_writer::Done =
            Box::new(move |r| callback.io_completed(r.map_err(io::Error::from)));
        // Issue #15: written here, on the raft core's task, not on the blocking pool: an unsynced
        // RocksDB write is a memtable insert and a buffered WAL write (no fsync: the writer
        // thread syncs), and the hop to the pool and back cost each commit round
        // two thread wake-ups on the core's critical path.
        // The mark of this append, for the writer's after-sync hook (issue #33).
        let mark = self.mark.as_ref().and_then(|_| entries.last().map(|e| envelope::encode(&e.log_id())));
        self.writer.append_marked(&batch, mark, flushed).map_err(io::Error::from)?;
        // Readable in the store now: from here the cache may answer for them.
        self.recent.appended(entries.into_iter().zip(sizes));
        Ok(())
    }

    /// Synced before it returns, after every earlier append is durable and reported.
    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> Result<(), io::Error> {
        let after = last_log_id.map(|l| l.index());
        // Dropped from the cache first: a read racing the truncation finds them in neither or in
        // the store still, never in the cache alone.
        self.recent.truncated_from(after.map_or(0, |a| a + 1));
        let mark = self.mark.clone();
        self.synced(move |s| {
            // Issue #33: the mark is lowered durably before the entries go, so a crash between the
            // two never leaves a mark past the log's legitimate end.
            if let Some(m) = &mark {
                m.before_truncate(&last_log_id)?;
            }
            s.truncate_after(after)
        })
        .await
    }

    /// Synced before it returns (the purge mark and the deletion in one batch), in order with the
    /// appends.
    async fn purge(&mut self, log_id: LogId) -> Result<(), io::Error> {
        let mark = envelope::encode(&log_id);
        let upto = log_id.index();
        // Dropped from the cache first, whether or not the purge below goes ahead: the cache may
        // always hold fewer of the log's newest entries.
        self.recent.purged_upto(upto);
        // Issue #30, one durable log: the state writes no WAL, so the raft log is the only record
        // of what the state applied since its last flush, and after a crash openraft applies the
        // log again from the state's durable `last_applied`. Entries up to `upto` may be forgotten
        // only once the state holds them durably: flush it, and refuse a purge past what it then
        // holds (openraft purges only behind a snapshot, which is never ahead of the state).
        if let Some(state) = self.state.clone() {
            let durable = tokio::task::spawn_blocking(move || -> Result<Option<LogId>, kungfu_storage::Error> {
                state.flush()?;
                match state.get_meta(crate::state_machine::LAST_APPLIED)? {
                    Some(b) => Ok(Some(envelope::decode(&b, crate::state_machine::LAST_APPLIED)?)),
                    None => Ok(None),
                }
            })
            .await
            .map_err(|e| io::Error::other(e.to_string()))??;
            let held = durable.map(|l| l.index());
            if held.is_none_or(|h| h < upto) {
                return Err(io::Error::other(format!(
                    "refusing to purge the raft log up to entry {upto}: the state holds entries up to {held:?} durably"
                )));
            }
        }
        let ack = self.mark.clone();
        self.synced(move |s| {
            s.purge_upto(upto, PURGED, mark)?;
            // A purge past the log's last entry (a snapshot installed ahead of it) moves its end:
            // a damaged node whose state now holds what it acknowledged is whole (issue #33).
            if let Some(ack) = ack.filter(|a| a.damage().is_some()) {
                let end = RaftLog::end(s)?.max(Some(log_id));
                ack.reached(&end);
            }
            Ok(())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::type_config::TypeConfigExt;

    fn blank(index: u64) -> Entry {
        openraft::Entry {
            log_id: openraft::LogId::new(
                <openraft::alias::LeaderIdOf<TypeConfig> as openraft::vote::RaftLeaderIdExt>::new_committed(1, 1),
                index,
            ),
            payload: openraft::EntryPayload::Blank,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_append_is_readable_on_return_and_a_vote_returns_after_every_earlier_append_is_durable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = LogStore::open(dir.path(), true).expect("open");
        let mut log = RaftLog::new(store.clone()).expect("log");
        let mut flushed = Vec::new();
        for i in 1..=200 {
            let (tx, rx) = TypeConfig::oneshot();
            log.append([blank(i)], IOFlushed::signal(tx)).await.expect("append");
            // Readable at once, whether or not a sync has covered it yet.
            let read = log.try_get_log_entries(i..=i).await.expect("read");
            assert_eq!(read.iter().map(|e| e.log_id.index).collect::<Vec<_>>(), vec![i]);
            flushed.push(rx);
        }
        // The vote is ordered after the appends: when it returns, every one of them was reported.
        log.save_vote(&Vote::new(2, 1)).await.expect("vote");
        for (i, mut rx) in flushed.into_iter().enumerate() {
            assert!(matches!(rx.try_recv(), Ok(Ok(()))), "append {} reported durable before the vote returned", i + 1);
        }
        assert!(store.syncs() <= 201, "at most one sync per append and one for the vote");
        drop(log);
        // Reopened, the store holds every entry reported durable, and the vote.
        drop(store);
        let store = LogStore::open(dir.path(), false).expect("reopen");
        let mut log = RaftLog::new(store).expect("log");
        assert_eq!(log.try_get_log_entries(0..).await.expect("read").len(), 200);
        assert_eq!(log.read_vote().await.expect("vote"), Some(Vote::new(2, 1)));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_mark_covers_every_entry_reported_flushed_before_the_next_sync_and_is_lowered_before_a_truncation() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = LogStore::open(dir.path(), true).expect("open");
        let (mark, _) = crate::mark::AckMark::open(dir.path(), None, None).expect("mark");
        let mark = Arc::new(mark);
        let mut log = RaftLog::marked(store.clone(), mark.clone()).expect("log");
        for i in 1..=10 {
            let (tx, rx) = TypeConfig::oneshot();
            log.append([blank(i)], IOFlushed::signal(tx)).await.expect("append");
            rx.await.expect("reported").expect("flushed");
            // Issue #33: the mark names an entry once it is reported durable, before the next
            // sync: when openraft hears of entry i, the mark names at least entry i - 1.
            assert!(mark.marked().0.map_or(0, |l| l.index) + 1 >= i, "{:?} at {i}", mark.marked());
        }
        log.save_vote(&Vote::new(3, 1)).await.expect("vote");
        assert_eq!(mark.marked().0.map(|l| l.index), Some(10), "every reported entry, before the next synced write");
        assert_eq!(mark.marked().1, Some(Vote::new(3, 1)), "the vote is marked before save_vote returns");
        log.truncate_after(Some(blank(6).log_id)).await.expect("truncate");
        assert_eq!(mark.marked().0.map(|l| l.index), Some(6), "lowered with the truncation");
        drop((log, mark));
        // Reopened at the truncated end: whole, not damaged.
        let (mark, restore) =
            crate::mark::AckMark::open(dir.path(), RaftLog::end(&store).expect("end"), Some(Vote::new(3, 1)))
                .expect("reopen");
        assert!(mark.damage().is_none() && restore.is_none(), "{:?}", mark.damage());
    }
}
