//! openraft's log storage over [`kungfu_storage::LogStore`]. Entries and the vote are enveloped and
//! written with a synced WAL before openraft is told they are durable; RocksDB IO runs on the
//! blocking pool so the raft core never waits on a disk inside an async task.

use crate::types::{Entry, LogId, TypeConfig, Vote};
use kungfu_storage::{LogStore, envelope};
use openraft::entry::RaftEntry;
use openraft::storage::{IOFlushed, LogState, RaftLogReader, RaftLogStorage};
use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};

const VOTE: &str = "vote";
const COMMITTED: &str = "committed";
const PURGED: &str = "last_purged";

/// The raft log of one node. Cheap to clone.
#[derive(Clone, Debug)]
pub struct RaftLog {
    store: LogStore,
}

impl RaftLog {
    pub fn new(store: LogStore) -> RaftLog {
        RaftLog { store }
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
        self.blocking(move |s| {
            s.entries(start, end)?
                .into_iter()
                .map(|(_, bytes)| envelope::decode::<Entry>(&bytes, "log entry"))
                .collect()
        })
        .await
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

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), io::Error> {
        let bytes = envelope::encode(vote);
        self.blocking(move |s| s.put_meta(VOTE, bytes)).await
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), io::Error> {
        let bytes = envelope::encode(&committed);
        self.blocking(move |s| s.put_meta(COMMITTED, bytes)).await
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, io::Error> {
        self.blocking(|s| Ok(RaftLog::meta::<Option<LogId>>(&s, COMMITTED)?.flatten())).await
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed<TypeConfig>) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let batch: Vec<(u64, Vec<u8>)> =
            entries.into_iter().map(|e| (e.log_id().index(), envelope::encode(&e))).collect();
        // The write is synced: once it returns, the entries are both readable and durable.
        let result = self.blocking(move |s| s.append(&batch)).await;
        match result {
            Ok(()) => {
                callback.io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                callback.io_completed(Err(io::Error::new(e.kind(), e.to_string())));
                Err(e)
            }
        }
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> Result<(), io::Error> {
        let after = last_log_id.map(|l| l.index());
        self.blocking(move |s| s.truncate_after(after)).await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), io::Error> {
        let mark = envelope::encode(&log_id);
        let upto = log_id.index();
        self.blocking(move |s| s.purge_upto(upto, PURGED, mark)).await
    }
}
