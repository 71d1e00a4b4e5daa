//! openraft's state machine over [`kungfu_storage::StateStore`]: every committed command is applied
//! with `kungfu_core::apply`, and the facts, changed records, receipts and the last applied log id
//! of a whole batch of entries are committed in one atomic write batch. Snapshots are RocksDB
//! checkpoints kept by [`kungfu_storage::SnapshotStore`] (packed only to be sent).

use crate::feed::{AppliedCommand, Feed, FeedEvent};
use crate::types::{Entry, LogId, Payload, Request, Response, SnapshotMeta, StoredMembership, TypeConfig};
use futures::{Stream, TryStreamExt};
use kungfu_core::{Limits, Tx, apply};
use kungfu_storage::{SHARD, SnapshotStore, StateStore, StoredSnapshot, envelope};
use openraft::entry::RaftEntry;
use openraft::storage::{EntryResponder, RaftStateMachine};
use openraft::{EntryPayload, RaftSnapshotBuilder};
use std::io;
use std::sync::Arc;

/// The raft of this node: openraft over this crate's types and [`StateMachine`].
pub type Raft = openraft::Raft<TypeConfig, StateMachine>;

/// Keys of the state store's `sm_meta` family.
pub const LAST_APPLIED: &str = "last_applied";
pub const MEMBERSHIP: &str = "membership";
pub const LIMITS: &str = "limits";
/// The largest command time applied so far: a new leader stamps later than this (DESIGN §3).
pub const LAST_TS: &str = "last_ts";

/// The state machine of one node.
#[derive(Clone, Debug)]
pub struct StateMachine {
    state: Arc<StateStore>,
    snapshots: SnapshotStore,
    /// Limits used until the log sets others (`Request::SetLimits`); identical on every node of a
    /// cluster because they come from the replicated state once set.
    default_limits: Limits,
    gate: ApplyGate,
    feed: Feed,
    applied_time: AppliedTime,
    applied_limits: AppliedLimits,
    /// Trace contexts of in-flight commands: each traced batch applies in a `raft.apply` span.
    traces: crate::trace::Traces,
    /// Apply batch sizes and snapshot builds (issue #30).
    stats: crate::stats::Stats,
}

/// The limits replicated through the log (None until a `SetLimits` entry applies), kept in memory
/// beside [`LIMITS`] so that neither a batch's apply nor a pre-check or read reads them from the
/// store (issue #15). Set after the batch that replicated them commits, and from the store when a
/// snapshot replaces the state.
#[derive(Clone, Debug, Default)]
pub struct AppliedLimits(Arc<std::sync::RwLock<Option<Arc<Limits>>>>);

impl AppliedLimits {
    pub fn get(&self) -> Option<Arc<Limits>> {
        match self.0.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    fn set(&self, limits: Option<Limits>) {
        let mut g = match self.0.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        *g = limits.map(Arc::new);
    }
}

/// The largest command time applied so far, kept in memory beside [`LAST_TS`] so that a leader
/// stamps without reading the store (L5, DESIGN §3). Raised after each batch commits and reset
/// from the store when a snapshot replaces the state.
#[derive(Clone, Debug, Default)]
pub struct AppliedTime(Arc<std::sync::atomic::AtomicU64>);

impl AppliedTime {
    pub fn get(&self) -> kungfu_types::Timestamp {
        kungfu_types::Timestamp(self.0.load(std::sync::atomic::Ordering::Acquire))
    }

    fn raise(&self, ts: kungfu_types::Timestamp) {
        self.0.fetch_max(ts.0, std::sync::atomic::Ordering::AcqRel);
    }

    fn set(&self, ts: kungfu_types::Timestamp) {
        self.0.store(ts.0, std::sync::atomic::Ordering::Release);
    }
}

/// Holds back the application of committed entries on one node while held: fault injection for
/// tests, a node whose state lags its log as a slow disk or a long batch makes it. The log is still
/// replicated to and from this node and it still votes and can be elected, so a test can make a
/// leader whose applied state is behind what its cluster acknowledged (issue #12, L5). Open unless
/// a test holds it; nothing outside tests holds it.
#[derive(Clone, Debug)]
pub struct ApplyGate(Arc<tokio::sync::watch::Sender<bool>>);

impl Default for ApplyGate {
    fn default() -> ApplyGate {
        ApplyGate(Arc::new(tokio::sync::watch::channel(true).0))
    }
}

impl ApplyGate {
    /// Stops applying: the next batch waits until [`ApplyGate::release`].
    pub fn hold(&self) {
        self.0.send_replace(false);
    }

    /// Applies again, starting with whatever waited.
    pub fn release(&self) {
        self.0.send_replace(true);
    }

    async fn passed(&self) {
        // The sender lives in `self`, so the channel never closes while we wait.
        let _ = self.0.subscribe().wait_for(|open| *open).await;
    }
}

fn io_err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

fn read_meta<T: serde::de::DeserializeOwned>(state: &StateStore, key: &str) -> Result<Option<T>, io::Error> {
    match state.get_meta(key).map_err(io::Error::from)? {
        Some(bytes) => Ok(Some(envelope::decode(&bytes, key).map_err(io::Error::from)?)),
        None => Ok(None),
    }
}

/// A batch of at most this many commands is applied on the state machine's task (issue #15).
pub const INLINE_APPLY_COMMANDS: usize = 2;

/// How many commands a batch of entries holds (a batch of expiries counts each one).
fn commands_in(entries: &[Entry]) -> usize {
    entries
        .iter()
        .map(|e| match &e.payload {
            EntryPayload::Normal(Payload { request: Request::Commands(c), .. }) => c.len(),
            _ => 1,
        })
        .sum()
}

impl StateMachine {
    pub fn new(
        state: Arc<StateStore>,
        snapshots: SnapshotStore,
        default_limits: Limits,
    ) -> Result<StateMachine, io::Error> {
        StateMachine::with_feed(state, snapshots, default_limits, Feed::new(crate::feed::DEFAULT_FEED_CAPACITY))
    }

    /// A state machine that publishes what it applies on `feed`.
    pub fn with_feed(
        state: Arc<StateStore>,
        snapshots: SnapshotStore,
        default_limits: Limits,
        feed: Feed,
    ) -> Result<StateMachine, io::Error> {
        let applied_time = AppliedTime::default();
        applied_time.set(read_meta(&state, LAST_TS)?.unwrap_or(kungfu_types::Timestamp::ZERO));
        let applied_limits = AppliedLimits::default();
        applied_limits.set(read_meta(&state, LIMITS)?);
        Ok(StateMachine {
            state,
            snapshots,
            default_limits,
            gate: ApplyGate::default(),
            feed,
            applied_time,
            applied_limits,
            traces: crate::trace::Traces::default(),
            stats: Default::default(),
        })
    }

    /// Counts apply batches and snapshot builds into `stats`.
    pub fn set_stats(&mut self, stats: crate::stats::Stats) {
        self.stats = stats;
    }

    /// Shares the node's trace map (issue #18).
    pub fn set_traces(&mut self, traces: crate::trace::Traces) {
        self.traces = traces;
    }

    /// The limits replicated through the log, read without the store.
    pub fn applied_limits(&self) -> &AppliedLimits {
        &self.applied_limits
    }

    /// The largest command time this state machine has applied, read without the store.
    pub fn applied_time(&self) -> &AppliedTime {
        &self.applied_time
    }

    /// The gate in front of this state machine's apply (see [`ApplyGate`]).
    pub fn gate(&self) -> &ApplyGate {
        &self.gate
    }

    pub fn state(&self) -> &Arc<StateStore> {
        &self.state
    }

    /// The limits in force: the replicated ones once set, else the defaults.
    pub fn limits(&self) -> Limits {
        match self.applied_limits.get() {
            Some(l) => (*l).clone(),
            None => self.default_limits.clone(),
        }
    }

    /// Applies a batch of committed entries and commits them atomically. Returns one response per
    /// entry. Runs on the blocking pool, or in place for a batch of at most
    /// [`INLINE_APPLY_COMMANDS`].
    fn apply_batch(
        state: &StateStore,
        limits: &mut Limits,
        applied_time: &AppliedTime,
        entries: &[Entry],
    ) -> Result<Applied, io::Error> {
        let live = state.applier();
        let mut tx = Tx::new(&live);
        let mut responses = Vec::with_capacity(entries.len());
        let mut commands = Vec::new();
        let mut last_applied: Option<LogId> = None;
        let mut membership: Option<StoredMembership> = None;
        let mut new_limits = None;
        let mut last_ts: Option<kungfu_types::Timestamp> = None;
        for entry in entries {
            last_applied = Some(entry.log_id());
            let response = match &entry.payload {
                EntryPayload::Blank => Response::Done,
                EntryPayload::Membership(m) => {
                    membership = Some(StoredMembership::new(Some(entry.log_id()), m.clone()));
                    Response::Done
                }
                // Issue #19, deliverable 3: a replica applies only its own group's entries. Another
                // group's entry in this log is a broken log (misrouted or corrupt), never a command
                // to decide on: the node stops rather than apply it.
                EntryPayload::Normal(p) if p.group != SHARD => {
                    return Err(io::Error::other(format!(
                        "log entry {} is addressed to {}; this replica applies {SHARD} only",
                        entry.log_id(),
                        p.group
                    )));
                }
                EntryPayload::Normal(Payload { request: Request::SetLimits(l), .. }) => {
                    *limits = l.clone();
                    new_limits = Some(l.clone());
                    Response::Done
                }
                EntryPayload::Normal(Payload { request: Request::Command(cmd), .. }) => {
                    last_ts = last_ts.max(Some(cmd.ts));
                    apply_command(&mut tx, cmd, limits, entry.log_id().index, &mut commands)?
                }
                EntryPayload::Normal(Payload { request: Request::Commands(cmds), .. }) => {
                    // Each command of the entry is applied in order, exactly as if each had an entry
                    // of its own, and answered on its own.
                    let mut each = Vec::with_capacity(cmds.len());
                    for cmd in cmds {
                        last_ts = last_ts.max(Some(cmd.ts));
                        each.push(apply_command(&mut tx, cmd, limits, entry.log_id().index, &mut commands)?);
                    }
                    Response::Batch(each)
                }
            };
            responses.push(response);
        }
        let mut meta: Vec<(&str, Option<Vec<u8>>)> = Vec::new();
        if let Some(l) = &last_applied {
            meta.push((LAST_APPLIED, Some(envelope::encode(l))));
        }
        if let Some(m) = &membership {
            meta.push((MEMBERSHIP, Some(envelope::encode(m))));
        }
        if let Some(l) = &new_limits {
            meta.push((LIMITS, Some(envelope::encode(l))));
        }
        let raised = last_ts.filter(|ts| *ts > applied_time.get());
        if let Some(ts) = raised {
            meta.push((LAST_TS, Some(envelope::encode(&ts))));
        }
        let changes = tx.into_changes();
        state.commit(&changes, &meta).map_err(io::Error::from)?;
        if let Some(ts) = raised {
            applied_time.raise(ts);
        }
        Ok(Applied { responses, commands, last: last_applied.map(|l| l.index), limits: new_limits })
    }
}

/// What one batch of entries produced: an answer per entry, and for the feed what each command
/// recorded.
struct Applied {
    responses: Vec<Response>,
    commands: Vec<AppliedCommand>,
    last: Option<u64>,
    /// Limits a `SetLimits` entry of the batch replicated (the last one).
    limits: Option<Limits>,
}

/// Applies one command into the batch's overlay and notes what it recorded for the feed.
fn apply_command(
    tx: &mut Tx<'_>,
    cmd: &kungfu_core::Command,
    limits: &Limits,
    index: u64,
    commands: &mut Vec<AppliedCommand>,
) -> Result<Response, io::Error> {
    // A state that cannot be read is fatal: the node must stop rather than decide on a state it
    // does not know.
    let applied = apply(&*tx, cmd, limits).map_err(io_err)?;
    if !applied.facts.is_empty() || !applied.effects.is_empty() {
        commands.push(AppliedCommand { index, facts: applied.facts, effects: applied.effects });
    }
    for (k, v) in applied.changes {
        match v {
            Some(r) => tx.put(k, r),
            None => tx.delete(k),
        }
    }
    Ok(Response::Applied { outcome: applied.outcome, replayed: applied.replayed })
}

/// The name of a snapshot: its last log index (zero-padded, so names sort by it), then its term and
/// leader node, so two snapshots of the same entry have the same name.
fn snapshot_name(meta: &SnapshotMeta) -> String {
    match &meta.last_log_id {
        Some(l) => format!("{:020}-{}-{}", l.index, l.leader_id.term, l.leader_id.node_id),
        None => "00000000000000000000-0-0".to_string(),
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    type SnapshotData = StoredSnapshot;

    async fn build_snapshot(&mut self) -> Result<openraft::alias::SnapshotOf<TypeConfig, StoredSnapshot>, io::Error> {
        let state = self.state.clone();
        let snapshots = self.snapshots.clone();
        let started = std::time::Instant::now();
        let built = tokio::task::spawn_blocking(move || -> Result<(SnapshotMeta, StoredSnapshot), io::Error> {
            // The checkpoint is taken first; the meta describes exactly what it holds.
            snapshots
                .build_with(&state, |checkpoint| {
                    let meta = checkpoint_snapshot_meta(checkpoint)?;
                    Ok((snapshot_name(&meta), envelope::encode_grouped(SHARD, &meta), meta))
                })
                .map_err(io::Error::from)
                .map(|(archive, meta)| (meta, archive))
        })
        .await
        .map_err(io_err)??;
        self.stats.snapshot_built(started.elapsed());
        Ok(openraft::Snapshot { meta: built.0, snapshot: built.1 })
    }
}

/// The snapshot meta of a checkpoint of the state store, read from the checkpoint itself, so it
/// describes exactly the state the checkpoint holds.
pub fn checkpoint_snapshot_meta(checkpoint: &std::path::Path) -> Result<SnapshotMeta, kungfu_storage::Error> {
    let applied: Option<LogId> = checkpoint_meta(checkpoint, LAST_APPLIED)?;
    let membership: StoredMembership = checkpoint_meta(checkpoint, MEMBERSHIP)?.unwrap_or_default();
    Ok(SnapshotMeta { last_log_id: applied, last_membership: membership })
}

fn checkpoint_meta<T: serde::de::DeserializeOwned>(
    dir: &std::path::Path,
    key: &str,
) -> Result<Option<T>, kungfu_storage::Error> {
    match kungfu_storage::snapshot::read_checkpoint_meta(dir, key)? {
        Some(bytes) => Ok(Some(envelope::decode(&bytes, key)?)),
        None => Ok(None),
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotData = StoredSnapshot;
    type SnapshotBuilder = StateMachine;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), io::Error> {
        let applied: Option<LogId> = read_meta(&self.state, LAST_APPLIED)?;
        let membership: StoredMembership = read_meta(&self.state, MEMBERSHIP)?.unwrap_or_default();
        Ok((applied, membership))
    }

    async fn apply<Strm>(&mut self, entries: Strm) -> Result<(), io::Error>
    where
        Strm: Stream<Item = Result<EntryResponder<TypeConfig>, io::Error>> + Unpin + Send,
    {
        self.gate.passed().await;
        let batch: Vec<EntryResponder<TypeConfig>> = entries.try_collect().await?;
        if batch.is_empty() {
            return Ok(());
        }
        let (entries, responders): (Vec<Entry>, Vec<_>) = batch.into_iter().unzip();
        let state = self.state.clone();
        let mut limits = self.limits();
        let applied_time = self.applied_time.clone();
        // Open from here until the batch is answered (it is never entered: nothing runs under it).
        let _apply_span = self.traces.apply_span(&entries);
        let commands = commands_in(&entries);
        self.stats.applied(entries.len() as u64, commands as u64);
        let applied = if commands <= INLINE_APPLY_COMMANDS {
            // Issue #15: a batch this small (one writer, light load) costs less to apply in place
            // on the state machine's task than the two thread wake-ups of a hop to the blocking
            // pool and back, which sat on every write's latency; the store write is unsynced.
            StateMachine::apply_batch(&state, &mut limits, &applied_time, &entries)?
        } else {
            tokio::task::spawn_blocking(move || StateMachine::apply_batch(&state, &mut limits, &applied_time, &entries))
                .await
                .map_err(io_err)??
        };
        if let Some(l) = applied.limits {
            self.applied_limits.set(Some(l));
        }
        // The feed and the responses go out only after the batch is committed.
        if let Some(last) = applied.last {
            self.feed.publish(FeedEvent::Applied { applied: last, commands: applied.commands.into() });
        }
        for (responder, response) in responders.into_iter().zip(applied.responses) {
            if let Some(r) = responder {
                r.send(response);
            }
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn install_snapshot(&mut self, meta: &SnapshotMeta, snapshot: StoredSnapshot) -> Result<(), io::Error> {
        // Issue #19, deliverable 3: only a snapshot of this replica's group replaces its state.
        if snapshot.group != SHARD {
            return Err(io::Error::other(format!(
                "snapshot {} holds the state of {}; this replica holds {SHARD}",
                snapshot.name, snapshot.group
            )));
        }
        let state = self.state.clone();
        let snapshots = self.snapshots.clone();
        let meta = meta.clone();
        let meta_index = meta.last_log_id.as_ref().map(|l| l.index);
        let applied_time = self.applied_time.clone();
        let applied_limits = self.applied_limits.clone();
        type Installed = (kungfu_types::Timestamp, Option<Limits>);
        let (installed_time, installed_limits) =
            tokio::task::spawn_blocking(move || -> Result<Installed, io::Error> {
                let name = snapshot_name(&meta);
                // A snapshot received from another node is kept as this node's current snapshot.
                let local = if snapshot.path.parent() == Some(snapshots.dir()) && snapshot.name == name {
                    snapshot
                } else {
                    snapshots
                        .adopt(&snapshot, &name, &envelope::encode_grouped(SHARD, &meta))
                        .map_err(io::Error::from)?
                };
                snapshots.install(&local, &state).map_err(io::Error::from)?;
                // The installed state must be the one the meta describes.
                let applied: Option<LogId> = read_meta(&state, LAST_APPLIED)?;
                if applied != meta.last_log_id {
                    return Err(io::Error::other(format!(
                        "installed snapshot holds last applied {applied:?}, its meta says {:?}",
                        meta.last_log_id
                    )));
                }
                let time =
                    read_meta::<kungfu_types::Timestamp>(&state, LAST_TS)?.unwrap_or(kungfu_types::Timestamp::ZERO);
                Ok((time, read_meta(&state, LIMITS)?))
            })
            .await
            .map_err(io_err)??;
        applied_time.set(installed_time);
        applied_limits.set(installed_limits);
        self.feed.publish(FeedEvent::Replaced { applied: meta_index });
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<openraft::alias::SnapshotOf<TypeConfig, StoredSnapshot>>, io::Error> {
        let snapshots = self.snapshots.clone();
        tokio::task::spawn_blocking(move || -> Result<_, io::Error> {
            match snapshots.latest().map_err(io::Error::from)? {
                Some((archive, meta)) => {
                    let (group, meta): (_, SnapshotMeta) =
                        envelope::decode_grouped(&meta, "snapshot meta").map_err(io::Error::from)?;
                    if group != SHARD {
                        return Err(io::Error::other(format!(
                            "the current snapshot holds the state of {group}; this replica holds {SHARD}"
                        )));
                    }
                    Ok(Some(openraft::Snapshot { meta, snapshot: archive }))
                }
                None => Ok(None),
            }
        })
        .await
        .map_err(io_err)?
    }
}
