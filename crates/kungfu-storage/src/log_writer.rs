//! Group commit of the raft log: the one ordered path by which log writes become durable.
//!
//! An append is written unsynced by its caller (readable at once) and queued here; one thread
//! takes everything queued so far, issues ONE WAL sync for all of it, and then reports each append
//! durable, in the order they were made. While it syncs, new appends queue up and share the next
//! sync, so under load a sync covers many appends; openraft's contract allows exactly this:
//! `RaftLogStorage::append` returns once the entries are readable and reports them durable later
//! through its `IOFlushed` callback (the raft core meanwhile replicates them, as etcd's raft loop
//! sends to followers while the leader's own append syncs). A naive "one sync per append on the
//! blocking pool" lost throughput at 64 writers (issue #15): coalescing is the point.
//!
//! Writes that must be durable before they return (the vote, truncation, purge) go through the
//! same thread, in order: everything appended before one is synced and reported first, then it runs
//! as a synced write. So the log's writes are serialized as openraft requires ("all write-IO must be
//! serialized", `RaftLogStorage`), and no report of an append overtakes a later truncation.
//!
//! Rules kept here: a completion fires only after its entries are durable; completions fire in
//! append order; after a failed sync or synced write nothing more is reported durable (every later
//! completion gets the error: after a failed fsync the state of the WAL is unknown).
//!
//! An append may carry a mark (the raft crate's encoded last log id of its entries). After a sync
//! has been reported, and before the next sync, the writer hands the mark of the last append the
//! sync covered to its `after_sync` hook, which records it durably apart from the WAL (issue #33,
//! `log_mark.rs`): so the record never claims more than was synced, and costs no write its
//! latency (a lone writer's next request arrives while it runs; under load the next batch
//! queues meanwhile). What it gives up: entries reported in the one hook's time before a crash are
//! not yet in the record, so a loss of exactly those is not detected; a loss reaching any earlier
//! entry is. A failed hook fails every later sync (nothing more is reported durable).

use crate::error::Error;
use crate::log_store::LogStore;
use std::sync::{Mutex, mpsc};
use std::thread::JoinHandle;

/// What is called once with the outcome of a queued write.
pub type Done = Box<dyn FnOnce(Result<(), Error>) + Send + 'static>;

/// A write that must be durable when it returns, run on the writer thread in order.
pub type SyncedOp = Box<dyn FnOnce(&LogStore) -> Result<(), Error> + Send + 'static>;

/// Called on the writer thread after a sync's appends were reported durable, with the mark of the
/// last of them, before the next sync. An error fails every later sync.
pub type AfterSync = Box<dyn FnMut(&[u8]) -> Result<(), Error> + Send + 'static>;

enum Job {
    /// Entries already written unsynced: report them durable after the next sync (and after the
    /// `after_sync` hook recorded the mark, when there is one).
    Flush(Done, Option<Vec<u8>>),
    /// A synced write, run after every earlier append is durable and reported.
    Synced(SyncedOp, Done),
}

impl Job {
    /// Reports `e` to the job's completion without running it.
    fn fail(self, e: Error) {
        match self {
            Job::Flush(done, _) | Job::Synced(_, done) => done(Err(e)),
        }
    }
}

/// The group-commit writer of one log store. Dropping it lets its thread finish what is queued
/// (every queued completion is called) and waits for it.
pub struct LogWriter {
    store: LogStore,
    /// Held across an append's write and its queueing, so completions fire in the order the
    /// appends took effect even when several threads append at once.
    order: Mutex<Option<mpsc::Sender<Job>>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for LogWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LogWriter")
    }
}

impl LogWriter {
    /// Starts the writer thread of `store`.
    pub fn start(store: LogStore) -> Result<LogWriter, Error> {
        LogWriter::start_with(store, None)
    }

    /// [`LogWriter::start`] with a hook that records each sync's last mark before its appends are
    /// reported durable.
    pub fn start_with(store: LogStore, after_sync: Option<AfterSync>) -> Result<LogWriter, Error> {
        // The queue is unbounded in messages but not in work: openraft awaits every append before
        // it makes the next, and an append's entries are bounded by its own batch limits.
        let (tx, rx) = mpsc::channel::<Job>();
        let thread_store = store.clone();
        let thread = std::thread::Builder::new()
            .name("raft-log-sync".into())
            .spawn(move || run(&thread_store, &rx, after_sync))
            .map_err(|e| Error::NotDurable(format!("cannot start the log writer thread: {e}")))?;
        Ok(LogWriter { store, order: Mutex::new(Some(tx)), thread: Some(thread) })
    }

    /// The store this writer writes to.
    pub fn store(&self) -> &LogStore {
        &self.store
    }

    /// Writes entries `(index, bytes)` now, unsynced, and queues `flushed`, which is called once
    /// they are durable (or with the error that stopped them). When this returns `Ok`, the entries
    /// are readable. On `Err`, `flushed` has been called with an error too.
    pub fn append(&self, entries: &[(u64, Vec<u8>)], flushed: Done) -> Result<(), Error> {
        self.append_marked(entries, None, flushed)
    }

    /// [`LogWriter::append`] with `mark`, handed to the `after_sync` hook when a sync covers this
    /// append last.
    pub fn append_marked(&self, entries: &[(u64, Vec<u8>)], mark: Option<Vec<u8>>, flushed: Done) -> Result<(), Error> {
        let mut guard = self.order.lock().unwrap_or_else(|p| p.into_inner());
        let Some(tx) = guard.clone() else {
            flushed(Err(gone()));
            return Err(gone());
        };
        if let Err(e) = self.store.append_unsynced(entries) {
            // A log that failed a write takes no more: a later append would leave a hole. The
            // appends queued before this one are still synced and reported by the thread.
            tracing::error!(error = %e, "writing to the raft log failed; it takes no more writes");
            guard.take();
            flushed(Err(Error::NotDurable(format!("the append was not written: {e}"))));
            return Err(e);
        }
        if let Err(mpsc::SendError(job)) = tx.send(Job::Flush(flushed, mark)) {
            job.fail(gone());
            return Err(gone());
        }
        Ok(())
    }

    /// Queues `op`, a write that must be durable when it completes (it writes with a synced WAL);
    /// it runs after every append queued before it is durable and reported. `done` gets its outcome.
    pub fn synced(&self, op: SyncedOp, done: Done) {
        let guard = self.order.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(tx) => {
                if let Err(mpsc::SendError(job)) = tx.send(Job::Synced(op, done)) {
                    job.fail(gone());
                }
            }
            None => done(Err(gone())),
        }
    }

    /// [`LogWriter::synced`], waiting for the outcome on this thread.
    pub fn synced_blocking(&self, op: SyncedOp) -> Result<(), Error> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.synced(
            op,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        );
        rx.recv().unwrap_or_else(|_| Err(gone()))
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        // Closing the queue ends the thread once it has drained it.
        drop(self.order.lock().unwrap_or_else(|p| p.into_inner()).take());
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!("the raft log writer thread panicked");
        }
    }
}

fn gone() -> Error {
    Error::NotDurable("the log writer has stopped".into())
}

/// The writer thread: block for a job, take every job queued behind it, sync once for the appends
/// among them, report them in order; a synced write first syncs and reports the appends before it.
fn run(store: &LogStore, jobs: &mpsc::Receiver<Job>, mut after_sync: Option<AfterSync>) {
    let mut failed: Option<String> = None;
    let mut pending = Pending::default();
    while let Ok(first) = jobs.recv() {
        let mut next = Some(first);
        while let Some(job) = next.take() {
            match job {
                Job::Flush(done, mark) => {
                    pending.done.push(done);
                    if mark.is_some() {
                        pending.mark = mark;
                    }
                }
                Job::Synced(op, done) => {
                    flush(store, &mut pending, &mut failed, &mut after_sync);
                    let result = match &failed {
                        Some(why) => Err(Error::NotDurable(why.clone())),
                        None => op(store),
                    };
                    if let Err(e) = &result {
                        failed.get_or_insert_with(|| e.to_string());
                    }
                    done(result);
                }
            }
            next = jobs.try_recv().ok();
        }
        flush(store, &mut pending, &mut failed, &mut after_sync);
    }
}

/// Appends waiting for a sync: their completions, in order, and the newest mark among them.
#[derive(Default)]
struct Pending {
    done: Vec<Done>,
    mark: Option<Vec<u8>>,
}

/// One sync for every pending append, the mark of the last, then their completions in order.
fn flush(store: &LogStore, pending: &mut Pending, failed: &mut Option<String>, after_sync: &mut Option<AfterSync>) {
    if pending.done.is_empty() {
        return;
    }
    let mark = pending.mark.take();
    if failed.is_none()
        && let Err(e) = store.sync()
    {
        tracing::error!(error = %e, "syncing the raft log failed; nothing more is acknowledged");
        *failed = Some(e.to_string());
    }
    for done in pending.done.drain(..) {
        done(match failed {
            Some(why) => Err(Error::NotDurable(why.clone())),
            None => Ok(()),
        });
    }
    // Issue #33: the mark is recorded after the sync (it never claims more than was synced) and
    // after the completions (its fdatasync is off the acknowledged write's latency, measured in
    // docs/benchmarks.md: recorded before them, it took a fifth off a lone writer's rate).
    if failed.is_none()
        && let (Some(hook), Some(mark)) = (after_sync.as_mut(), mark)
        && let Err(e) = hook(&mark)
    {
        tracing::error!(error = %e, "recording the raft log's acknowledged mark failed; nothing more is acknowledged");
        *failed = Some(e.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn open(dir: &std::path::Path) -> LogStore {
        LogStore::open(dir, true).expect("open log store")
    }

    /// A completion that records `index` into `fired` when it reports success.
    fn record(fired: &Arc<Mutex<Vec<u64>>>, index: u64) -> Done {
        let fired = fired.clone();
        Box::new(move |r| {
            r.expect("durable");
            fired.lock().expect("lock").push(index);
        })
    }

    #[test]
    fn queued_appends_are_all_reported_durable_in_order_with_fewer_syncs_than_appends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = open(dir.path());
        let writer = LogWriter::start(store.clone()).expect("start");
        let fired = Arc::new(Mutex::new(Vec::new()));
        // Hold the writer thread inside a synced write while 1,000 appends queue behind it, as
        // appends queue while a sync runs: the thread must then cover them with one sync, not one
        // each.
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let (held_tx, held_rx) = mpsc::channel::<()>();
        writer.synced(
            Box::new(move |_| {
                held_tx.send(()).expect("held");
                release_rx.recv().expect("release");
                Ok(())
            }),
            Box::new(|r| r.expect("hold")),
        );
        held_rx.recv().expect("the writer thread holds");
        let syncs_before = store.syncs();
        for i in 1..=1000u64 {
            writer.append(&[(i, i.to_be_bytes().to_vec())], record(&fired, i)).expect("append");
            // Readable as soon as append returns, before any sync.
            assert_eq!(store.last().expect("last").map(|e| e.0), Some(i));
        }
        assert!(fired.lock().expect("lock").is_empty(), "nothing is reported before its sync");
        release_tx.send(()).expect("release");
        // A synced write after them waits for them: when it returns, all were reported.
        writer.synced_blocking(Box::new(|_| Ok(()))).expect("barrier");
        assert_eq!(*fired.lock().expect("lock"), (1..=1000).collect::<Vec<_>>(), "every append, in order");
        let syncs = store.syncs() - syncs_before;
        assert!((1..=2).contains(&syncs), "1,000 queued appends took {syncs} syncs");
    }

    #[test]
    fn concurrent_appends_from_many_threads_are_reported_in_the_order_they_took_effect() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = open(dir.path());
        let writer = Arc::new(LogWriter::start(store.clone()).expect("start"));
        let fired = Arc::new(Mutex::new(Vec::new()));
        // Each append takes the next index under one lock, so the order of indexes is the order in
        // which the appends took effect.
        let next = Arc::new(Mutex::new(0u64));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (writer, fired, next) = (writer.clone(), fired.clone(), next.clone());
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let mut n = next.lock().expect("lock");
                        *n += 1;
                        writer.append(&[(*n, vec![1])], record(&fired, *n)).expect("append");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("appender");
        }
        writer.synced_blocking(Box::new(|_| Ok(()))).expect("barrier");
        assert_eq!(*fired.lock().expect("lock"), (1..=1600).collect::<Vec<_>>());
        assert!(store.syncs() < 1600, "{} syncs for 1,600 appends", store.syncs());
    }

    #[test]
    fn every_append_reported_durable_is_in_the_store_after_a_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fired = Arc::new(Mutex::new(Vec::new()));
        {
            let writer = LogWriter::start(open(dir.path())).expect("start");
            for i in 1..=500u64 {
                writer.append(&[(i, format!("entry {i}").into_bytes())], record(&fired, i)).expect("append");
                if i == 300 {
                    // A truncation between appends: 251..=300 go, after the appends before it
                    // are reported; the appends after it land on the truncated log.
                    writer.synced_blocking(Box::new(|s| s.truncate_after(Some(250)))).expect("truncate");
                    assert_eq!(fired.lock().expect("lock").len(), 300, "reported before the truncation");
                }
            }
            // Dropping the writer drains its queue: every queued append is reported.
        }
        let reported = fired.lock().expect("lock").clone();
        assert_eq!(reported, (1..=500).collect::<Vec<_>>());
        let store = open(dir.path());
        let kept: Vec<u64> = store.entries(0, u64::MAX).expect("read").into_iter().map(|e| e.0).collect();
        let expected: Vec<u64> = (1..=250).chain(301..=500).collect();
        assert_eq!(kept, expected, "every entry reported durable and not truncated is there");
        for (i, bytes) in store.entries(0, u64::MAX).expect("read") {
            assert_eq!(bytes, format!("entry {i}").into_bytes());
        }
    }

    #[test]
    fn after_a_failed_synced_write_nothing_more_is_reported_durable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let writer = LogWriter::start(open(dir.path())).expect("start");
        let failure = writer.synced_blocking(Box::new(|_| Err(Error::NotDurable("injected".into()))));
        assert!(failure.is_err());
        let (tx, rx) = mpsc::channel();
        writer
            .append(
                &[(1, vec![1])],
                Box::new(move |r| {
                    tx.send(r.is_ok()).expect("send");
                }),
            )
            .expect("the write itself works");
        drop(writer);
        assert!(!rx.recv().expect("reported"), "reported as not durable");
    }

    #[test]
    fn the_mark_of_a_syncs_last_append_is_recorded_after_its_completions_and_before_the_next_sync() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = open(dir.path());
        // What happened, in order: the hook's marks (with the syncs made by then) and completions.
        let events = Arc::new(Mutex::new(Vec::<String>::new()));
        let (hook_events, hook_store) = (events.clone(), store.clone());
        let hook: AfterSync = Box::new(move |mark: &[u8]| {
            hook_events.lock().expect("lock").push(format!("mark {} after sync {}", mark[0], hook_store.syncs()));
            Ok(())
        });
        let writer = LogWriter::start_with(store.clone(), Some(hook)).expect("start");
        // Hold the thread so three appends share one sync.
        let (release_tx, release_rx) = mpsc::channel::<()>();
        writer.synced(Box::new(move |_| release_rx.recv().map_err(|_| gone())), Box::new(|r| r.expect("hold")));
        for i in 1..=3u8 {
            let done_events = events.clone();
            let done: Done = Box::new(move |r| {
                r.expect("durable");
                done_events.lock().expect("lock").push(format!("done {i}"));
            });
            writer.append_marked(&[(u64::from(i), vec![i])], Some(vec![i]), done).expect("append");
        }
        release_tx.send(()).expect("release");
        writer.synced_blocking(Box::new(|_| Ok(()))).expect("barrier");
        let done_4 = events.clone();
        let done: Done = Box::new(move |r| {
            r.expect("durable");
            done_4.lock().expect("lock").push("done 4".into());
        });
        writer.append_marked(&[(4, vec![4])], Some(vec![4]), done).expect("append");
        writer.synced_blocking(Box::new(|_| Ok(()))).expect("barrier");
        assert_eq!(
            *events.lock().expect("lock"),
            ["done 1", "done 2", "done 3", "mark 3 after sync 1", "done 4", "mark 4 after sync 2"]
        );

        // A mark that cannot be recorded fails what follows: nothing later is reported durable.
        let failing: AfterSync = Box::new(|_| Err(Error::NotDurable("the mark failed".into())));
        let dir = tempfile::tempdir().expect("tempdir");
        let writer = LogWriter::start_with(open(dir.path()), Some(failing)).expect("start");
        let (tx, rx) = mpsc::channel();
        let (tx1, tx2) = (tx.clone(), tx);
        let first: Done = Box::new(move |r| tx1.send(r.is_ok()).expect("send"));
        writer.append_marked(&[(1, vec![1])], Some(vec![1]), first).expect("written");
        assert!(rx.recv().expect("reported"), "the sync itself succeeded");
        let second: Done = Box::new(move |r| tx2.send(r.is_ok()).expect("send"));
        writer.append_marked(&[(2, vec![2])], Some(vec![2]), second).expect("written");
        drop(writer);
        assert!(!rx.recv().expect("reported"), "after a failed mark, reported as not durable");
    }

    /// What the acknowledged mark (issue #33) costs the write path: one more `fdatasync` per sync.
    /// Prints the time per durable append with one appender waiting for each (the latency of a
    /// lone write) and with 16 appenders (group commit), without and with a mark file. A
    /// measurement, run by hand:
    /// `cargo nextest run --workspace --locked -E 'test(the_mark_costs)' --run-ignored only --no-capture`.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn the_mark_costs_one_fdatasync_per_sync() {
        fn run(marked: bool, appenders: u64, per_appender: u64) -> (std::time::Duration, u64) {
            let dir = tempfile::tempdir().expect("tempdir");
            let store = open(&dir.path().join("log"));
            let hook: Option<AfterSync> = marked.then(|| {
                let (mut file, _) = crate::log_mark::MarkFile::open(&dir.path().join("log")).expect("mark");
                let hook: AfterSync = Box::new(move |mark: &[u8]| {
                    file.write(&crate::log_mark::Marks { synced: Some(mark.to_vec()), vote: None })
                });
                hook
            });
            let writer = Arc::new(LogWriter::start_with(store.clone(), hook).expect("start"));
            let next = Arc::new(Mutex::new(0u64));
            let started = std::time::Instant::now();
            let threads: Vec<_> = (0..appenders)
                .map(|_| {
                    let (writer, next) = (writer.clone(), next.clone());
                    std::thread::spawn(move || {
                        for _ in 0..per_appender {
                            let (tx, rx) = mpsc::channel();
                            {
                                let mut n = next.lock().expect("lock");
                                *n += 1;
                                let done: Done = Box::new(move |r| tx.send(r).expect("send"));
                                writer
                                    .append_marked(&[(*n, vec![7; 200])], Some(n.to_be_bytes().to_vec()), done)
                                    .expect("append");
                            }
                            rx.recv().expect("reported").expect("durable");
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().expect("appender");
            }
            (started.elapsed() / (appenders * per_appender) as u32, store.syncs())
        }
        for (appenders, each) in [(1, 300), (16, 100)] {
            for marked in [false, true] {
                let (per_append, syncs) = run(marked, appenders, each);
                eprintln!(
                    "{appenders:>2} appenders, mark {marked:>5}: {per_append:>10.1?} per durable append, {syncs} syncs for {} appends",
                    appenders * each
                );
            }
        }
    }
}
