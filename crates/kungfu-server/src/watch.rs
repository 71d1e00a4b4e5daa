//! Watch streams (DESIGN §10): the caller's turn as a replica it keeps, a thread's entries after a
//! sequence number, and a shared record's events after a rev (COORDINATION §5.8). They only speed
//! work up (§8: correct recovery never depends on them): every event is a pure read of the core on
//! one snapshot, the same reads GetTurn and Timeline answer from. The events are domain values
//! (`kungfu_core::watch`: a turn change with its cursor, a batch of entries, a batch of record
//! events, each naming this node's raft group); each door converts them for its wire (gRPC
//! `kungfu.v1.WatchService` in `grpc/watch.rs`).
//!
//! How a stream runs:
//! - The call is authenticated like every other ([`Backend::authenticate`]), then its gate, one
//!   linearizable read round, makes the first event reflect every write acknowledged before the call.
//!   Refusals of that first read (NOT_FOUND for a non-member) are the call's answer.
//! - One task per stream feeds a bounded channel ([`STREAM_BUFFER`]) of events that the door
//!   drains ([`Events`]); a stream that ends with a refusal sends it last, as a [`Rejection`]. The task
//!   sleeps until something it watches changes: a single hub task per service follows the node's
//!   fact feed (`kungfu_raft::feed`) and wakes only the streams a command concerns, a turn watch
//!   when the command's effects touched that agent's turn, a thread watch when it journaled a fact
//!   under that thread (a post, a membership ending, the close; a record's writes are posts of its
//!   thread, so a record watch follows its thread). A turn watch also wakes when the
//!   earliest deadline among its items passes (the item's next step becomes `wait` with no
//!   command applied). When the hub falls behind the feed, or a snapshot replaces the state, it
//!   wakes every stream, which re-reads (the feed's lag policy). Before each read a stream marks its
//!   wake-up seen, so a command applied after the read always wakes it again: no change is missed.
//! - A send waits for two free slots and uses one, so the final refusal always fits in the channel.
//! - The stream ends with NOT_LEADER when this node stops leading, with UNAVAILABLE when the node
//!   shuts down (the server calls [`Watches::stop`], or raft stops), with NOT_FOUND when a thread watcher stops
//!   being a member, with OK when a watched thread is closed and drained, and silently when the
//!   client goes away. Every end releases the agent's stream slot ([`MAX_STREAMS_PER_AGENT`]).
//!
//! Shutdown: a door's graceful shutdown waits for every open response stream, so open watches must
//! end on their own: the server calls [`Watches::stop`] when its shutdown begins.
//!
//! Nothing here retries, so nothing spins on a dead raft core (issue #36): the waker sleeps on the
//! feed, the hub on the raft metrics channel, whose close (the core's task ended, a panic
//! included) marks the service stopping and ends every stream, and a turn watch's timer waits only
//! for a deadline still ahead of its last read (a passed deadline reads as `wait`, so the next
//! read no longer counts it).

use crate::backend::{Backend, refuse};
use crate::credentials::Caller;
use kungfu_api::watch::ThreadWatchQuery;
use kungfu_core::coord::read as coord;
use kungfu_core::model::{Entry, ObligationId};
use kungfu_core::read::{self, ReadError, TurnItem};
use kungfu_core::watch::{ThreadBatch, TurnChange, TurnCursor, TurnDelta, turn_digest};
use kungfu_core::{Limits, StateExt};
use kungfu_types::{AgentId, Code, EntrySeq, Micros, ObjectRef, Rejection, ThreadId, Timestamp};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// Open watch streams one agent may hold at once; one more is refused with RATE_LIMITED.
pub const MAX_STREAMS_PER_AGENT: usize = 8;
/// Events buffered per stream before the server waits for the client to read.
pub const STREAM_BUFFER: usize = 64;
/// A turn watch follows at most this many obligations; a larger turn ends the stream with
/// LIMIT_EXCEEDED (GetTurn pages through any size).
pub const MAX_WATCHED_TURN: usize = 10_000;

/// The events of one open stream, in order; a stream that ends with a refusal sends it last. The
/// stream ends when the channel closes (after a refusal, or with nothing more when a watched thread
/// is closed and drained).
pub type Events<T> = mpsc::Receiver<Result<T, Rejection>>;

/// What every stream watches besides its own interest: this node's leadership, and whether the
/// node stops.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Progress {
    leading: bool,
    stopping: bool,
}

/// What one stream follows on the fact feed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Interest {
    Turn(AgentId),
    Object(ObjectRef),
}

/// The wake-up counters of every followed interest, shared by the hub and the streams. A counter
/// lives while a stream holds a receiver of it.
type Interests = Arc<Mutex<HashMap<Interest, watch::Sender<u64>>>>;

fn follow(interests: &Interests, i: Interest) -> watch::Receiver<u64> {
    lock(interests).entry(i).or_insert_with(|| watch::channel(0).0).subscribe()
}

/// The watch streams of a node. Cheap to clone; all clones share the hub and the per-agent stream
/// counts.
#[derive(Clone, Debug)]
pub struct Watches {
    b: Arc<Backend>,
    progress: watch::Receiver<Progress>,
    stop: Arc<watch::Sender<Progress>>,
    open: Arc<Mutex<HashMap<AgentId, usize>>>,
    interests: Interests,
    max_per_agent: usize,
}

impl Watches {
    /// The streams with the default per-agent cap. Spawns the hub; call inside the runtime.
    pub fn new(b: Arc<Backend>) -> Watches {
        Watches::with_max_streams(b, MAX_STREAMS_PER_AGENT)
    }

    pub fn with_max_streams(b: Arc<Backend>, max_per_agent: usize) -> Watches {
        let initial = Progress { leading: b.node.is_leader(), stopping: false };
        let (tx, progress) = watch::channel(initial);
        let tx = Arc::new(tx);
        let interests = Interests::default();
        tokio::spawn(hub(b.node.raft.clone(), b.node.id, tx.clone()));
        tokio::spawn(waker(b.node.feed.subscribe(), interests.clone(), tx.clone()));
        Watches { b, progress, stop: tx, open: Arc::new(Mutex::new(HashMap::new())), interests, max_per_agent }
    }

    /// The service layer the streams read through (and authenticate with).
    pub fn backend(&self) -> &Arc<Backend> {
        &self.b
    }

    /// Ends every open stream with UNAVAILABLE (the node is shutting down) and refuses new ones.
    pub fn stop(&self) {
        self.stop.send_modify(|p| p.stopping = true);
    }

    fn acquire(&self, agent: AgentId) -> Result<Slot, Rejection> {
        let mut open = lock(&self.open);
        let n = open.entry(agent).or_insert(0);
        if *n >= self.max_per_agent {
            return Err(refuse(
                Rejection::new(
                    Code::RateLimited,
                    format!(
                        "{agent} already has {} watch streams open, the most one agent may hold; close one or retry later",
                        self.max_per_agent
                    ),
                )
                .with_retry_after(Micros(1_000_000)),
            ));
        }
        *n += 1;
        Ok(Slot { open: self.open.clone(), agent })
    }

    /// The common start of both streams: a stream slot, the limits after one linearizable read
    /// round, and the feed whose progress is marked seen.
    async fn open<T: Send + 'static>(
        &self,
        me: AgentId,
        interest: Interest,
    ) -> Result<(Feed<T>, Limits, Events<T>), Rejection> {
        let slot = self.acquire(me)?;
        // Followed before the first read, so whatever is applied after that read wakes the stream.
        let wake = follow(&self.interests, interest);
        let limits = self.b.read(|_, l, _| Ok(l.clone())).await?;
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        let mut feed = Feed {
            b: self.b.clone(),
            tx,
            wake,
            progress: self.progress.clone(),
            stop: self.progress.clone(),
            _slot: slot,
        };
        feed.check()?;
        Ok((feed, limits, rx))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// One open stream of one agent; dropping it frees the slot.
#[derive(Debug)]
struct Slot {
    open: Arc<Mutex<HashMap<AgentId, usize>>>,
    agent: AgentId,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = lock(&self.open);
        if let Some(n) = open.get_mut(&self.agent) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.agent);
            }
        }
    }
}

// --- The hub --------------------------------------------------------------------------------------

/// Republishes leadership from the raft server metrics (which change with leadership only) and marks
/// the service stopping when raft shuts down.
async fn hub(raft: kungfu_raft::Raft, id: u64, tx: Arc<watch::Sender<Progress>>) {
    loop {
        let seen = *tx.borrow();
        if seen.stopping {
            return;
        }
        // On the server metrics, which change with leadership only, not with every commit.
        let changed = kungfu_raft::node::wait_server_metrics(&raft, move |m| {
            (kungfu_raft::node::server_leader(m) == Some(id)) != seen.leading
        });
        tokio::select! {
            r = changed => match r {
                Ok(m) => {
                    let leading = kungfu_raft::node::server_leader(&m) == Some(id);
                    tx.send_modify(|p| p.leading = leading);
                }
                // Raft is shutting down.
                Err(_) => break,
            },
            // The service and every stream are gone.
            () = tx.closed() => return,
        }
    }
    tx.send_modify(|p| p.stopping = true);
}

/// Follows the fact feed and wakes the streams each applied command concerns; every stream when
/// it fell behind the feed or a snapshot replaced the state (they re-read, nothing is skipped).
async fn waker(
    mut feed: tokio::sync::broadcast::Receiver<kungfu_raft::feed::FeedEvent>,
    interests: Interests,
    progress: Arc<watch::Sender<Progress>>,
) {
    use kungfu_raft::feed::FeedEvent;
    use tokio::sync::broadcast::error::RecvError;
    let bump = |w: &watch::Sender<u64>| w.send_modify(|n| *n = n.wrapping_add(1));
    loop {
        let event = tokio::select! {
            e = feed.recv() => e,
            () = progress.closed() => return,
        };
        let mut interests = lock(&interests);
        // Counters no stream holds any more are dropped as the hub passes by.
        interests.retain(|_, w| w.receiver_count() > 0);
        match event {
            Ok(FeedEvent::Applied { commands, .. }) => {
                for c in commands.iter() {
                    let turns = c.effects.turns.iter().map(|a| Interest::Turn(*a));
                    let objects = c.effects.objects.iter().map(|o| Interest::Object(*o));
                    for i in turns.chain(objects) {
                        if let Some(w) = interests.get(&i) {
                            bump(w);
                        }
                    }
                }
            }
            Ok(FeedEvent::Replaced { .. }) | Err(RecvError::Lagged(_)) => interests.values().for_each(bump),
            Err(RecvError::Closed) => return,
        }
    }
}

// --- One stream -----------------------------------------------------------------------------------

/// Why a stream ends.
#[derive(Debug)]
enum End {
    /// The client went away: nothing to send.
    Gone,
    /// The watched thread is closed and drained: end with OK.
    Closed,
    /// End with this refusal.
    Refused(Rejection),
}

/// The sending side of one stream.
#[derive(Debug)]
struct Feed<T> {
    b: Arc<Backend>,
    tx: mpsc::Sender<Result<T, Rejection>>,
    /// Wakes the read loop when a command concerned what the stream watches; its seen mark is
    /// the wake-up the last read acted on.
    wake: watch::Receiver<u64>,
    /// Leadership and stopping.
    progress: watch::Receiver<Progress>,
    /// Watched while a send waits for the client, so a stop is never stuck behind a slow reader.
    stop: watch::Receiver<Progress>,
    _slot: Slot,
}

impl<T: Send + 'static> Feed<T> {
    /// Marks the current progress seen (the next read sees at least it) and checks that the
    /// stream may go on.
    fn check(&mut self) -> Result<(), Rejection> {
        self.wake.borrow_and_update();
        let p = *self.progress.borrow_and_update();
        verdict(&self.b, p)
    }

    /// Sends one event, waiting for the client while keeping one slot free for a final status.
    async fn send(&mut self, event: T) -> Result<(), End> {
        let (tx, stop, b) = (&self.tx, &mut self.stop, &self.b);
        let stopped = async {
            loop {
                if let Err(r) = verdict(b, *stop.borrow_and_update()) {
                    return End::Refused(r);
                }
                if stop.changed().await.is_err() {
                    return End::Refused(stopping(b));
                }
            }
        };
        tokio::select! {
            permits = tx.reserve_many(2) => match permits {
                Ok(mut permits) => {
                    if let Some(p) = permits.next() {
                        p.send(Ok(event));
                    }
                    Ok(())
                }
                Err(_) => Err(End::Gone),
            },
            end = stopped => Err(end),
        }
    }

    /// Sleeps until a command concerns what this stream watches, leadership changes, or `until`
    /// (a time the stream's answer changes by itself) passes.
    async fn wait(&mut self, until: Option<Duration>) -> Result<(), End> {
        let timer = tokio::time::sleep(until.unwrap_or(Duration::from_secs(86_400)));
        tokio::select! {
            r = self.wake.changed() => {
                if r.is_err() {
                    // The hub is gone: the node is stopping.
                    return Err(End::Refused(stopping(&self.b)));
                }
            }
            r = self.progress.changed() => {
                if r.is_err() {
                    return Err(End::Refused(stopping(&self.b)));
                }
            }
            () = timer, if until.is_some() => {}
            () = self.tx.closed() => return Err(End::Gone),
        }
        Ok(())
    }

    /// Ends the stream: a refusal goes after every event already queued.
    fn finish(self, end: End) {
        if let End::Refused(r) = end {
            let _ = self.tx.try_send(Err(r));
        }
    }
}

/// Whether a stream may go on: the node is not stopping and still leads.
fn verdict(b: &Backend, p: Progress) -> Result<(), Rejection> {
    if p.stopping {
        return Err(stopping(b));
    }
    // The hub may lag the metrics by a moment; the node's own view decides.
    if !b.node.is_leader() {
        return Err(not_leader(b));
    }
    Ok(())
}

fn stopping(b: &Backend) -> Rejection {
    refuse(Rejection::new(
        Code::Unavailable,
        format!("node {} is shutting down; reconnect to the leader with your last resume token", b.node.id),
    ))
}

/// NOT_LEADER with the leader's API address when known, as every call answers on a follower; never
/// this node itself (see `RaftNode::leader_elsewhere`).
fn not_leader(b: &Backend) -> Rejection {
    b.not_leader_answer(
        None,
        |id, api| {
            format!(
                "node {} is no longer the leader; node {id} is, at {api}: watch there with your last resume token",
                b.node.id
            )
        },
        &format!("node {} is no longer the leader; reconnect shortly with your last resume token", b.node.id),
    )
}

pub(crate) fn read_rejection(e: &ReadError) -> Rejection {
    if let ReadError::State(s) = e {
        tracing::warn!(error = %s, "a watch stream could not read the state");
    }
    kungfu_api::read_error_rejection(e)
}

// --- The turn -------------------------------------------------------------------------------------

/// The whole turn of `me` on one snapshot, and an applied index that snapshot reflects (read
/// before the snapshot is taken: the metrics report an index only once its commit is in storage).
pub(crate) fn read_turn(b: &Backend, me: AgentId, limits: &Limits) -> Result<(u64, Vec<TurnItem>), Rejection> {
    let applied = b.node.applied_index().unwrap_or(0);
    let now = b.node.clock.now();
    let items = b.node.state.read(|s| turn_items(s, me, now, limits));
    items.map(|items| (applied, items)).map_err(|e| read_rejection(&e))
}

/// The whole turn of `me` in `s`, page by page; more than a watch follows is refused.
pub(crate) fn turn_items(
    s: &dyn kungfu_core::StateRead,
    me: AgentId,
    now: Timestamp,
    limits: &Limits,
) -> Result<Vec<TurnItem>, ReadError> {
    let mut items = Vec::new();
    let mut cursor = None;
    loop {
        let page = read::turn(s, me, cursor.as_ref(), limits.max_page_size, now, limits)?;
        items.extend(page.items);
        if items.len() > MAX_WATCHED_TURN {
            return Err(ReadError::Rejected(Rejection::new(
                Code::LimitExceeded,
                format!(
                    "your turn holds more than {MAX_WATCHED_TURN} obligations, more than a watch follows; page through GetTurn"
                ),
            )));
        }
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => return Ok(items),
        }
    }
}

async fn run_turn(
    feed: &mut Feed<TurnChange>,
    me: AgentId,
    limits: Limits,
    first: TurnDelta,
    cursor: TurnCursor,
    mut sent: BTreeMap<ObligationId, TurnItem>,
) -> Result<(), End> {
    let group = cursor.group;
    let mut digest = cursor.digest;
    feed.send(TurnChange { delta: first, cursor }).await?;
    loop {
        feed.wait(until_next_wait(&sent, feed.b.node.clock.now())).await?;
        feed.check().map_err(End::Refused)?;
        let (applied, items) = read_turn(&feed.b, me, &limits).map_err(End::Refused)?;
        let now = turn_digest(me, &items);
        if now == digest {
            continue;
        }
        let delta = TurnDelta::between(&sent, &items);
        delta.apply_to(&mut sent);
        digest = now;
        feed.send(TurnChange { delta, cursor: TurnCursor { group, applied_index: applied, digest } }).await?;
    }
}

/// How long until the earliest item whose next step turns to `wait` when its deadline passes.
fn until_next_wait(items: &BTreeMap<ObligationId, TurnItem>, now: Timestamp) -> Option<Duration> {
    items
        .values()
        .filter(|i| i.next != kungfu_types::NextStep::Wait)
        .filter_map(|i| i.due_at)
        .min()
        .map(|due| Duration::from_micros(due.0.saturating_sub(now.0)))
}

// --- A thread -------------------------------------------------------------------------------------

/// One batch of a thread watch, read on one snapshot with the membership check (§9).
#[derive(Debug)]
struct Batch {
    applied: u64,
    entries: Vec<Entry>,
    /// The thread is closed in the same snapshot: no entry can follow these.
    closed: bool,
}

fn read_batch(
    b: &Backend,
    me: AgentId,
    thread: ThreadId,
    after: Option<EntrySeq>,
    page_size: usize,
    limits: &Limits,
) -> Result<Batch, Rejection> {
    let applied = b.node.applied_index().unwrap_or(0);
    b.node
        .state
        .read(|s| {
            let entries = read::timeline(s, me, thread, after, page_size, limits)?;
            let closed = s.thread(thread)?.is_none_or(|t| !t.is_open());
            Ok::<_, ReadError>(Batch { applied, entries, closed })
        })
        .map_err(|e| read_rejection(&e))
}

async fn run_thread(
    feed: &mut Feed<ThreadBatch>,
    me: AgentId,
    thread: ThreadId,
    mut after: Option<EntrySeq>,
    page_size: usize,
    limits: Limits,
    mut batch: Batch,
) -> Result<(), End> {
    let page = limits.page_size(page_size);
    let group = feed.b.node.group();
    loop {
        let n = batch.entries.len();
        if let Some(last) = batch.entries.last() {
            after = Some(last.seq);
            feed.send(ThreadBatch { group, applied_index: batch.applied, entries: batch.entries }).await?;
        }
        if n < page {
            if batch.closed {
                return Err(End::Closed);
            }
            feed.wait(None).await?;
        }
        // A full page: more backlog may follow at once; still re-check leadership between pages.
        feed.check().map_err(End::Refused)?;
        batch = read_batch(&feed.b, me, thread, after, page_size, &limits).map_err(End::Refused)?;
    }
}

// --- A shared record (COORDINATION §5.8) ---------------------------------------------------------

/// What a record watch follows: the record, from whose rev, for which audience, in pages of what size.
pub type RecordWatchQuery = kungfu_api::request::RecordEventsQuery;

/// One batch of a record watch, read on one snapshot with the membership check (§9).
#[derive(Debug)]
struct RecordBatch {
    applied: u64,
    events: coord::RecordEvents,
    thread: ThreadId,
    /// The record's thread is closed in the same snapshot: no rev can follow these.
    closed: bool,
}

fn read_record_batch(
    b: &Backend,
    me: AgentId,
    q: &RecordWatchQuery,
    after_rev: u32,
    limits: &Limits,
) -> Result<RecordBatch, Rejection> {
    let applied = b.node.applied_index().unwrap_or(0);
    b.node
        .state
        .read(|s| {
            // The read checks membership first, so a record the caller may not read answers
            // NOT_FOUND before anything about it (its thread) is looked at.
            let events = coord::record_events(s, me, q.record, after_rev, q.audience, limits, q.page_size)?;
            let thread = s
                .shared_record(q.record)?
                .map(|r| r.thread)
                .ok_or_else(|| ReadError::Rejected(Rejection::not_found("record")))?;
            let closed = s.thread(thread)?.is_none_or(|t| !t.is_open());
            Ok::<_, ReadError>(RecordBatch { applied, events, thread, closed })
        })
        .map_err(|e| read_rejection(&e))
}

async fn run_record(
    feed: &mut Feed<kungfu_core::watch::RecordBatch>,
    me: AgentId,
    q: RecordWatchQuery,
    limits: Limits,
    mut batch: RecordBatch,
) -> Result<(), End> {
    let page = limits.page_size(q.page_size);
    let group = feed.b.node.group();
    let mut after = q.after_rev;
    loop {
        let n = batch.events.events.len();
        if n > 0 {
            // Revs are dense and listed in order, redacted ones included: resuming after the last
            // one sent is exact.
            after = batch.events.next_after_rev;
            let events = batch.events.events;
            feed.send(kungfu_core::watch::RecordBatch { group, applied_index: batch.applied, events }).await?;
        }
        if n < page {
            if batch.closed {
                return Err(End::Closed);
            }
            feed.wait(None).await?;
        }
        feed.check().map_err(End::Refused)?;
        batch = read_record_batch(&feed.b, me, &q, after, &limits).map_err(End::Refused)?;
    }
}

// --- The calls ------------------------------------------------------------------------------------

impl Watches {
    /// Watches the caller's turn: the whole turn first (or, when `resume` holds exactly it, a new
    /// cursor and nothing else), then its changes.
    pub async fn watch_turn(
        &self,
        caller: &Caller,
        resume: Option<TurnCursor>,
    ) -> Result<Events<TurnChange>, Rejection> {
        let me = caller.agent;
        let (mut feed, limits, rx) = self.open(me, Interest::Turn(me)).await?;
        let (applied, items) = read_turn(&self.b, me, &limits)?;
        let digest = turn_digest(me, &items);
        let group = self.b.node.group();
        let first = match resume {
            // The client holds exactly this turn: confirm it with a new cursor, resend nothing.
            // A cursor of another group (issue #19) never describes this group's turn.
            Some(c) if c.confirms(group, &digest) => TurnDelta::default(),
            _ => TurnDelta::reset(&items),
        };
        let sent = items.into_iter().map(|i| (i.obligation, i)).collect();
        let cursor = TurnCursor { group, applied_index: applied, digest };
        tokio::spawn(async move {
            let end = run_turn(&mut feed, me, limits, first, cursor, sent).await.err().unwrap_or(End::Gone);
            feed.finish(end);
        });
        Ok(rx)
    }

    /// Watches a thread's entries after `q.after`: the backlog, then new entries as they are posted.
    pub async fn watch_thread(&self, caller: &Caller, q: ThreadWatchQuery) -> Result<Events<ThreadBatch>, Rejection> {
        let me = caller.agent;
        let (mut feed, limits, rx) = self.open(me, Interest::Object(ObjectRef::Thread(q.thread))).await?;
        // The first batch is read before answering, so a non-member is refused by the call itself.
        let first = read_batch(&self.b, me, q.thread, q.after, q.page_size, &limits)?;
        tokio::spawn(async move {
            let end = run_thread(&mut feed, me, q.thread, q.after, q.page_size, limits, first)
                .await
                .err()
                .unwrap_or(End::Gone);
            feed.finish(end);
        });
        Ok(rx)
    }

    /// Watches a shared record's events after `q.after_rev` (COORDINATION §5.8): the backlog, then
    /// each new rev as it is applied, for `q.audience` in every batch.
    pub async fn watch_record(
        &self,
        caller: &Caller,
        q: RecordWatchQuery,
    ) -> Result<Events<kungfu_core::watch::RecordBatch>, Rejection> {
        let me = caller.agent;
        // A record never changes thread: find it (refusing a non-member) to know what to follow.
        let limits = self.b.read(|_, l, _| Ok(l.clone())).await?;
        let thread = read_record_batch(&self.b, me, &q, q.after_rev, &limits)?.thread;
        let (mut feed, limits, rx) = self.open(me, Interest::Object(ObjectRef::Thread(thread))).await?;
        // Read again once followed, so nothing applied in between is missed.
        let first = read_record_batch(&self.b, me, &q, q.after_rev, &limits)?;
        tokio::spawn(async move {
            let end = run_record(&mut feed, me, q, limits, first).await.err().unwrap_or(End::Gone);
            feed.finish(end);
        });
        Ok(rx)
    }
}
