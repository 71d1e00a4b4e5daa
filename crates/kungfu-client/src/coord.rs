//! The coordination loops of the SDK (COORDINATION §3.5, §4.2, §4.5, §4.7), over the typed calls of
//! `CoordService` and the thread watch:
//!
//! - **Blocking receive** ([`Client::recv`], [`Mailbox`]): `GetMailbox(after)`; when nothing is
//!   there, wait on `WatchThread(after_entry)` until an entry arrives or the timeout passes, then
//!   read again. The cursor is the client's (the `seq` of the last entry processed): the server
//!   keeps none, reading leaves no trace, and a timeout returns nothing and loses nothing.
//! - **Gather** ([`Client::gather`]): `GetCollective` with outputs, then `AssignmentService.Get` for
//!   every output the page left out, so the result holds every delivered output in rank order;
//!   [`Gathered::combine`] folds them with [`reduce::combine`] only when every rank delivered.
//! - **Barrier** ([`Client::barrier`], [`Client::wait_barrier`]): a `Send` to all speakers (or a
//!   subgroup), then `GetBarrier` re-read on every new entry of the thread until it is released
//!   (every responder replied or handled) or broken (one left without arriving).
//! - **Broadcast** ([`Client::broadcast`]): a `Send` that asks nobody.
//!
//! Watching only speeds these up (§8): every answer comes from a read, so a lost or failed stream
//! costs time, never correctness. A watch stream that ends (a leader change, a shutdown) is reopened
//! from the last entry seen, a bounded number of times.

use crate::build::{Message, to_nobody};
use crate::client::Client;
use crate::error::{Error as SdkError, Written};
use crate::reduce::{self, CombineError, Combined, Reduction, Vote};
use kungfu_api::pb;
use kungfu_types::{AgentId, Code};
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::time::Duration;
use tokio::time::Instant;

/// The most times one wait reopens a watch stream that ended with a failure (a leader change, a
/// node shutting down) before it gives up with the last failure.
pub const MAX_REOPENS: u32 = 8;

/// The most mailbox pages one receive reads while they come back empty with a next cursor (an
/// `ASKED_ME` scan examines at most eight times the page size per call), so a receive is bounded
/// even on a long thread with nothing for the caller.
pub const MAX_EMPTY_PAGES: usize = 1000;

/// How often [`Client::wait_barrier`] reads the barrier again when no entry arrives.
pub use kungfu_api::BARRIER_RECHECK;

/// Why a coordination loop did not give its answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call failed (a rejection with its code, or a transport failure): see [`SdkError`].
    #[error(transparent)]
    Call(#[from] SdkError),
    /// The collective is not fully delivered (or an output could not be read), so it cannot be
    /// folded: a fold that skips a rank would be a silent guess (fak's fail-closed `ErrArity`).
    #[error("{thread}#{header}: not every rank has a delivered output: {}", list(missing))]
    Undelivered {
        /// The thread.
        thread: String,
        /// The header entry of the collective.
        header: u64,
        /// Every rank without an output, in rank order.
        missing: Vec<Missing>,
    },
    /// A rank's member is not an agent id, so its vote cannot name it.
    #[error("rank member {0:?} is not an agent id (ag_N)")]
    Member(String),
    /// The reduction refused the outputs (an `all_reduce` over text that is not a number).
    #[error("cannot combine: {0}")]
    Combine(#[from] CombineError),
    /// The barrier is broken: at least one asked member ended without arriving. Final.
    #[error("barrier {}#{} is broken: {}", barrier.thread, barrier.entry, list(absent))]
    Broken {
        /// The barrier as last read.
        barrier: Box<pb::Barrier>,
        /// Every rank that ended without arriving, in rank order.
        absent: Vec<Absent>,
    },
    /// The wait timed out while the barrier was still waiting; nothing is lost, wait again.
    #[error("barrier {}#{} is still waiting after {waited:?}: {} of {} pending", barrier.thread, barrier.entry, barrier.pending, barrier.size)]
    Waiting {
        /// The barrier as last read.
        barrier: Box<pb::Barrier>,
        /// How long the wait lasted.
        waited: Duration,
    },
}

fn list<T: fmt::Display>(items: &[T]) -> String {
    items.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

// --- Receipts ---------------------------------------------------------------------------------------

/// The `Sent` case of a receipt (a send, a broadcast, a barrier).
pub fn sent(r: &pb::SendResponse) -> Option<&pb::Sent> {
    match r.receipt.as_ref()?.result.as_ref()? {
        pb::receipt::Result::Sent(s) => Some(s),
        _ => None,
    }
}

/// The `Scattered` case of a receipt.
pub fn scattered(r: &pb::ScatterResponse) -> Option<&pb::Scattered> {
    match r.receipt.as_ref()?.result.as_ref()? {
        pb::receipt::Result::Scattered(s) => Some(s),
        _ => None,
    }
}

/// The `LabeledWritten` case of a receipt.
pub fn labeled_written(r: &pb::WriteLabeledResponse) -> Option<&pb::LabeledWritten> {
    match r.receipt.as_ref()?.result.as_ref()? {
        pb::receipt::Result::LabeledWritten(s) => Some(s),
        _ => None,
    }
}

/// The `ScopeWidened` case of a receipt.
pub fn scope_widened(r: &pb::WidenScopeResponse) -> Option<&pb::ScopeWidened> {
    match r.receipt.as_ref()?.result.as_ref()? {
        pb::receipt::Result::ScopeWidened(s) => Some(s),
        _ => None,
    }
}

// --- Receive ----------------------------------------------------------------------------------------

/// What a receive returned: the kept entries after the cursor, in order, and the cursor to pass
/// next. With no items the cursor is the one given, or a later one past entries that were examined
/// and not kept (an `ASKED_ME` scan); it is never past an item not returned.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Received {
    /// The entries, in sequence order, each once.
    pub items: Vec<pb::MailItem>,
    /// The cursor to resume from.
    pub after: u64,
}

/// What one mailbox page means for a reader at cursor `after` (pure, so it is tested without a
/// server).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageStep {
    /// The page kept entries; resume from `after`.
    Items {
        /// The new cursor: the page's `next_after`, else its last item.
        after: u64,
    },
    /// The page kept nothing but the scan went on to `after` (a bounded `ASKED_ME` scan): read
    /// again from there at once.
    Skip {
        /// The new cursor.
        after: u64,
    },
    /// Nothing after the cursor yet: wait for a new entry.
    CaughtUp,
}

/// The sequence number of a mail item (0 when the server sent no entry, which is never kept).
fn seq(item: &pb::MailItem) -> u64 {
    item.entry.as_ref().map(|e| e.seq).unwrap_or(0)
}

/// Splits a page into the items to deliver and the next step. Only items after the cursor, in
/// strictly increasing order, are kept: a page that repeats or reorders an entry cannot make the
/// reader see it twice.
pub fn page_step(after: u64, page: pb::Mailbox) -> (Vec<pb::MailItem>, PageStep) {
    let mut last = after;
    let mut items = Vec::with_capacity(page.items.len());
    for item in page.items {
        let s = seq(&item);
        if s > last {
            last = s;
            items.push(item);
        }
    }
    let next = page.next_after.filter(|&n| n > after);
    let step = match (items.is_empty(), next) {
        (false, n) => PageStep::Items { after: n.unwrap_or(last).max(last) },
        (true, Some(n)) => PageStep::Skip { after: n },
        (true, None) => PageStep::CaughtUp,
    };
    (items, step)
}

/// What waiting on a thread's watch gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Woke {
    /// An entry after the last one seen arrived (the newest sequence number in the event).
    Entries(u64),
    /// The time given passed first.
    Deadline,
    /// The stream ended cleanly: the thread is closed and every entry was sent. No more will come.
    Ended,
}

/// A watch on one thread kept open across waits, resumed from the newest entry it has seen.
#[derive(Debug)]
struct Watcher {
    client: Client,
    thread: String,
    /// The newest entry seen: a reopened stream starts after it, with no gap and no duplicate.
    from: u64,
    stream: Option<tonic::Streaming<pb::ThreadEvent>>,
    ended: bool,
    /// Reopens after a failure, over the life of the watcher (bounded by [`MAX_REOPENS`]).
    reopens: u32,
}

impl Watcher {
    fn new(client: &Client, thread: &str, from: u64) -> Watcher {
        Watcher { client: client.clone(), thread: thread.to_string(), from, stream: None, ended: false, reopens: 0 }
    }

    /// Waits until an entry after `from` arrives, the stream ends cleanly, or `until` passes.
    async fn next(&mut self, until: Instant) -> Result<Woke, Error> {
        let mut backoff = self.client.options().backoff.initial;
        loop {
            if self.ended {
                return Ok(Woke::Ended);
            }
            let stream = match self.stream.as_mut() {
                Some(s) => s,
                None => match tokio::time::timeout_at(until, self.client.watch_thread(&self.thread, self.from)).await {
                    Err(_) => return Ok(Woke::Deadline),
                    Ok(opened) => self.stream.insert(opened?),
                },
            };
            let failure = match tokio::time::timeout_at(until, stream.message()).await {
                Err(_) => return Ok(Woke::Deadline),
                Ok(Ok(Some(event))) => {
                    let newest = event.entries.iter().map(|e| e.seq).max().unwrap_or(0);
                    if newest > self.from {
                        self.from = newest;
                        return Ok(Woke::Entries(newest));
                    }
                    continue;
                }
                Ok(Ok(None)) => {
                    self.ended = true;
                    self.stream = None;
                    return Ok(Woke::Ended);
                }
                Ok(Err(status)) => status,
            };
            self.stream = None;
            match kungfu_api::status_rejection(&failure) {
                // The stream ended because this agent may no longer read the thread (its membership
                // ended), or another definite refusal: final.
                Some(r) if r.definite && !matches!(r.code, Code::NotLeader | Code::Unavailable) => {
                    return Err(SdkError::Rejected(r).into());
                }
                _ => {}
            }
            self.reopens += 1;
            if self.reopens > MAX_REOPENS {
                let last = format!("the watch of {} failed {} times; last: {failure}", self.thread, self.reopens);
                return Err(SdkError::Transport(last.into()).into());
            }
            tokio::time::sleep_until(until.min(Instant::now() + backoff)).await;
            backoff = (backoff * 2).min(self.client.options().backoff.max);
        }
    }
}

impl Client {
    /// Blocking receive (COORDINATION §3.5): the entries of `thread` after `after` that `filter`
    /// keeps, waiting up to `timeout` for one when there is none yet. A timeout returns no items and
    /// a cursor that is never past an unread kept entry, so nothing is lost; call again with it.
    /// Returns early, with no items, when the thread is closed and has nothing more.
    ///
    /// With a stale client ([`Consistency::Stale`](crate::Consistency)) a read can trail the watch;
    /// the wait then lasts until the next entry or the timeout, and still loses nothing.
    pub async fn recv(
        &self,
        thread: &str,
        after: u64,
        filter: pb::MailboxFilter,
        timeout: Duration,
    ) -> Result<Received, Error> {
        let mut watcher = None;
        self.receive(thread, after, filter, 0, Instant::now() + timeout, &mut watcher).await
    }

    /// The receive loop of [`Client::recv`] and [`Mailbox`], with the watcher kept by the caller.
    async fn receive(
        &self,
        thread: &str,
        after: u64,
        filter: pb::MailboxFilter,
        page_size: u32,
        deadline: Instant,
        watcher: &mut Option<Watcher>,
    ) -> Result<Received, Error> {
        let mut cursor = after;
        let mut empty_pages = 0;
        let mut closed = false;
        loop {
            let request =
                pb::GetMailboxRequest { thread: thread.to_string(), after: cursor, filter: filter as i32, page_size };
            let (items, step) = page_step(cursor, self.get_mailbox(request).await?);
            match step {
                PageStep::Items { after } => return Ok(Received { items, after }),
                PageStep::Skip { after } => {
                    cursor = after;
                    empty_pages += 1;
                    if empty_pages >= MAX_EMPTY_PAGES || Instant::now() >= deadline {
                        return Ok(Received { items, after: cursor });
                    }
                    continue;
                }
                PageStep::CaughtUp => {}
            }
            if closed || Instant::now() >= deadline {
                return Ok(Received { items, after: cursor });
            }
            let watch = watcher.get_or_insert_with(|| Watcher::new(self, thread, cursor));
            match watch.next(deadline).await? {
                Woke::Entries(_) => {}
                Woke::Deadline => return Ok(Received { items, after: cursor }),
                // One more read gets the last entries; then there is nothing left to wait for.
                Woke::Ended => closed = true,
            }
        }
    }

    /// A [`Mailbox`] of `thread` from the cursor `after` (0: from the first entry).
    pub fn mailbox(&self, thread: &str, after: u64) -> Mailbox {
        Mailbox {
            client: self.clone(),
            thread: thread.to_string(),
            filter: pb::MailboxFilter::All,
            page_size: 0,
            queue: Queue::new(after),
            watcher: None,
        }
    }
}

/// The items fetched and not yet handed out, with the two cursors that make resuming exact.
#[derive(Debug, Clone, PartialEq)]
struct Queue {
    /// The sequence number of the last item handed out (or the starting cursor).
    yielded: u64,
    /// The cursor the next read starts from: past every item fetched.
    fetched: u64,
    items: VecDeque<pb::MailItem>,
}

impl Queue {
    fn new(after: u64) -> Queue {
        Queue { yielded: after, fetched: after, items: VecDeque::new() }
    }

    /// Where a reader that stops now resumes: the last item handed out while some are still queued
    /// (they would be lost otherwise), else past everything fetched.
    fn cursor(&self) -> u64 {
        if self.items.is_empty() { self.fetched } else { self.yielded }
    }

    fn push(&mut self, got: Received) {
        self.items.extend(got.items);
        self.fetched = self.fetched.max(got.after);
    }

    /// The next item after the last one handed out; anything at or before it is dropped, so no
    /// item is ever handed out twice.
    fn pop(&mut self) -> Option<pb::MailItem> {
        while let Some(item) = self.items.pop_front() {
            let s = seq(&item);
            if s > self.yielded {
                self.yielded = s;
                return Some(item);
            }
        }
        None
    }
}

/// A thread read as a mailbox (COORDINATION §3.5): each kept entry once, in order, waiting for new
/// ones; resumable from [`Mailbox::cursor`] with no gap and no duplicate (store the cursor in your
/// own Memory to survive a wiped session). Reading leaves no trace on the server.
#[derive(Debug)]
pub struct Mailbox {
    client: Client,
    thread: String,
    filter: pb::MailboxFilter,
    page_size: u32,
    queue: Queue,
    /// The watch, kept open between waits.
    watcher: Option<Watcher>,
}

impl Mailbox {
    /// Keeps only the entries that ask the caller to respond (`MAILBOX_FILTER_ASKED_ME`).
    pub fn asked_me(mut self) -> Mailbox {
        self.filter = pb::MailboxFilter::AskedMe;
        self
    }

    /// The page size of each read (0: the server's default).
    pub fn page_size(mut self, page_size: u32) -> Mailbox {
        self.page_size = page_size;
        self
    }

    /// The thread read.
    pub fn thread(&self) -> &str {
        &self.thread
    }

    /// The cursor to resume from: a new [`Client::mailbox`] with it hands out exactly the items
    /// this one has not.
    pub fn cursor(&self) -> u64 {
        self.queue.cursor()
    }

    /// True once the thread's watch ended cleanly: the thread is closed and every entry was read,
    /// so [`Mailbox::next`] has nothing more to wait for.
    pub fn closed(&self) -> bool {
        self.watcher.as_ref().is_some_and(|w| w.ended) && self.queue.items.is_empty()
    }

    /// Every kept item available now, in order, without waiting: reads pages until the mailbox is
    /// caught up or `max_pages` pages were read (then the rest follows from [`Mailbox::cursor`]).
    pub async fn drain(&mut self, max_pages: usize) -> Result<Vec<pb::MailItem>, Error> {
        let mut out: Vec<pb::MailItem> = std::iter::from_fn(|| self.queue.pop()).collect();
        for _ in 0..max_pages {
            let request = pb::GetMailboxRequest {
                thread: self.thread.clone(),
                after: self.queue.fetched,
                filter: self.filter as i32,
                page_size: self.page_size,
            };
            let (items, step) = page_step(self.queue.fetched, self.client.get_mailbox(request).await?);
            match step {
                PageStep::Items { after } | PageStep::Skip { after } => {
                    self.queue.push(Received { items, after });
                    out.extend(std::iter::from_fn(|| self.queue.pop()));
                }
                PageStep::CaughtUp => break,
            }
        }
        Ok(out)
    }

    /// The next item, waiting up to `timeout` for one; None when the timeout passed (or the thread
    /// is closed and has nothing more). Nothing is lost on None: call again.
    pub async fn next(&mut self, timeout: Duration) -> Result<Option<pb::MailItem>, Error> {
        if let Some(item) = self.queue.pop() {
            return Ok(Some(item));
        }
        let deadline = Instant::now() + timeout;
        let got = self
            .client
            .receive(&self.thread, self.queue.fetched, self.filter, self.page_size, deadline, &mut self.watcher)
            .await?;
        self.queue.push(got);
        Ok(self.queue.pop())
    }
}

// --- Gather -----------------------------------------------------------------------------------------

/// A collective gathered (COORDINATION §4.5): every rank in rank order, with its delivered output
/// when it has one.
#[derive(Debug, Clone, PartialEq)]
pub struct Gathered {
    /// The thread.
    pub thread: String,
    /// The header entry.
    pub header: u64,
    /// Who scattered: the creator of every rank's assignment.
    pub author: String,
    /// Every rank's assignment is delivered or has ended.
    pub complete: bool,
    /// Every rank has a delivery (a rank that ended without one keeps this false for good).
    pub all_delivered: bool,
    /// The ranks, in rank order.
    pub ranks: Vec<GatheredRank>,
}

/// One rank of a gathered collective.
#[derive(Debug, Clone, PartialEq)]
pub struct GatheredRank {
    /// The rank, from 0 (ascending agent id).
    pub rank: u32,
    /// The member (`ag_3`).
    pub member: String,
    /// The rank's entry, a reply to the header.
    pub entry: u64,
    /// The rank's assignment as the reader sees it.
    pub assignment: pb::Assignment,
    /// The delivered output; None when the rank has no delivery, or its output could not be read.
    pub output: Option<Vec<u8>>,
}

/// A rank a fold cannot use, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The rank.
    pub rank: u32,
    /// Its member.
    pub member: String,
    /// Where its assignment stands (`open`, `taken`, `ended: timed out`, ...).
    pub state: String,
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rank {} ({}): {}", self.rank, self.member, self.state)
    }
}

/// Whether an assignment has a delivery: delivered, or ended adopted, rejected or undecided.
pub fn has_delivery(a: &pb::Assignment) -> bool {
    use pb::AssignmentOutcome as O;
    match &a.state {
        Some(pb::assignment::State::Delivered(_)) => true,
        Some(pb::assignment::State::Ended(e)) => {
            e.delivered.is_some() || matches!(O::try_from(e.outcome), Ok(O::Adopted | O::Rejected | O::Undecided))
        }
        _ => false,
    }
}

/// The delivered output of an assignment, when the reader was given it.
pub fn delivered_output(a: &pb::Assignment) -> Option<&[u8]> {
    match &a.state {
        Some(pb::assignment::State::Delivered(d)) => d.output.as_ref().map(|c| c.body.as_slice()),
        Some(pb::assignment::State::Ended(e)) => e.delivered.as_ref().map(|c| c.body.as_slice()),
        _ => None,
    }
}

/// An assignment's state in a few words.
pub fn assignment_state(a: &pb::Assignment) -> String {
    use pb::assignment::State;
    match &a.state {
        Some(State::Open(())) => "open (not taken)".into(),
        Some(State::Taken(_)) => "taken, not delivered".into(),
        Some(State::Delivered(_)) => "delivered".into(),
        Some(State::Ended(e)) => match pb::AssignmentOutcome::try_from(e.outcome) {
            Ok(o) => format!(
                "ended: {}",
                o.as_str_name().trim_start_matches("ASSIGNMENT_OUTCOME_").to_ascii_lowercase().replace('_', " ")
            ),
            Err(_) => format!("ended ({})", e.outcome),
        },
        None => "unknown".into(),
    }
}

/// Weights (for `vote` and `all_reduce`) and scores (for `best_of`) by member. A member without a
/// weight weighs 1; without a score it scores 0.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Marks {
    /// Weights by member.
    pub weights: BTreeMap<AgentId, f64>,
    /// Scores by member.
    pub scores: BTreeMap<AgentId, f64>,
}

impl Gathered {
    /// The gathered form of a collective as read, ranks sorted by rank, each with its inline
    /// output (pure: [`Client::gather`] then fills in the omitted outputs).
    pub fn from_collective(c: pb::Collective) -> Gathered {
        let mut ranks: Vec<GatheredRank> = c
            .ranks
            .into_iter()
            .map(|r| {
                let assignment = r.assignment.unwrap_or_default();
                let output = delivered_output(&assignment).map(<[u8]>::to_vec);
                GatheredRank { rank: r.rank, member: r.member, entry: r.entry, assignment, output }
            })
            .collect();
        ranks.sort_by_key(|r| r.rank);
        Gathered {
            thread: c.thread,
            header: c.header,
            author: c.author,
            complete: c.complete,
            all_delivered: c.all_delivered,
            ranks,
        }
    }

    /// The ranks a fold cannot use: no delivery, or a delivery whose output is not in hand.
    pub fn missing(&self) -> Vec<Missing> {
        self.ranks
            .iter()
            .filter(|r| r.output.is_none())
            .map(|r| {
                let state = if has_delivery(&r.assignment) {
                    "delivered, but its output could not be read".to_string()
                } else {
                    assignment_state(&r.assignment)
                };
                Missing { rank: r.rank, member: r.member.clone(), state }
            })
            .collect()
    }

    /// The votes in rank order, refused (listing the missing ranks) unless every rank delivered.
    pub fn votes<'a>(&'a self, marks: &Marks) -> Result<Vec<Vote<'a>>, Error> {
        let missing = self.missing();
        if !self.all_delivered || !missing.is_empty() || self.ranks.is_empty() {
            return Err(Error::Undelivered { thread: self.thread.clone(), header: self.header, missing });
        }
        self.ranks
            .iter()
            .map(|r| {
                let member: AgentId = r.member.parse().map_err(|_| Error::Member(r.member.clone()))?;
                Ok(Vote {
                    member,
                    weight: marks.weights.get(&member).copied().unwrap_or(1.0),
                    score: marks.scores.get(&member).copied().unwrap_or(0.0),
                    output: r.output.as_deref().unwrap_or_default(),
                })
            })
            .collect()
    }

    /// Folds the outputs by `reduction` in rank order (COORDINATION §4.6), only when every rank
    /// delivered; otherwise [`Error::Undelivered`] names the missing ranks.
    pub fn combine(&self, reduction: Reduction, marks: &Marks) -> Result<Combined, Error> {
        Ok(reduce::combine(reduction, &self.votes(marks)?)?)
    }
}

impl Client {
    /// Gathers the collective headed by entry `header` of `thread` (COORDINATION §4.5): its ranks
    /// in rank order with every delivered output, reading with `AssignmentService.Get` the ones the
    /// page left out. Deliveries never change once made, so the later reads fold the same way.
    pub async fn gather(&self, thread: &str, header: u64) -> Result<Gathered, Error> {
        let request = pb::GetCollectiveRequest { thread: thread.to_string(), header, include_outputs: true };
        let mut gathered = Gathered::from_collective(self.get_collective(request).await?);
        for rank in gathered.ranks.iter_mut().filter(|r| r.output.is_none() && has_delivery(&r.assignment)) {
            let request = pb::GetAssignmentRequest { assignment: rank.assignment.id.clone() };
            let assignment = self.get_assignment(request).await?;
            rank.output = delivered_output(&assignment).map(<[u8]>::to_vec);
            rank.assignment = assignment;
        }
        Ok(gathered)
    }

    /// Gathers and folds (COORDINATION §4.6): refused with [`Error::Undelivered`] unless every rank
    /// delivered, then [`reduce::combine`] over the votes in rank order.
    pub async fn gather_and_combine(
        &self,
        thread: &str,
        header: u64,
        reduction: Reduction,
        marks: &Marks,
    ) -> Result<(Gathered, Combined), Error> {
        let gathered = self.gather(thread, header).await?;
        let combined = gathered.combine(reduction, marks)?;
        Ok((gathered, combined))
    }
}

// --- Barrier and broadcast -----------------------------------------------------------------------------

/// A rank of a barrier that ended without arriving, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Absent {
    /// The rank.
    pub rank: u32,
    /// The member.
    pub member: String,
    /// How it ended.
    pub how: pb::BarrierArrival,
}

impl fmt::Display for Absent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.member, arrival_text(self.how))
    }
}

/// How a barrier rank stands, in words.
pub fn arrival_text(a: pb::BarrierArrival) -> &'static str {
    use pb::BarrierArrival as A;
    match a {
        A::Author => "is the author",
        A::Pending => "has not arrived yet",
        A::Replied => "replied",
        A::Handled => "handled it",
        A::Retracted => "was released by the author's retraction",
        A::MembershipEnded => "left the thread (or was removed or deactivated)",
        A::Demoted => "was demoted to observer",
        A::ThreadClosed => "was cut off by the thread's closing",
        A::Unspecified => "stands in a way this SDK does not know",
    }
}

/// The ranks of a barrier that ended without arriving, in rank order.
pub fn absent(b: &pb::Barrier) -> Vec<Absent> {
    use pb::BarrierArrival as A;
    b.ranks
        .iter()
        .filter_map(|r| {
            let how = A::try_from(r.arrival).unwrap_or(A::Unspecified);
            matches!(how, A::Retracted | A::MembershipEnded | A::Demoted | A::ThreadClosed).then(|| Absent {
                rank: r.rank,
                member: r.member.clone(),
                how,
            })
        })
        .collect()
}

/// A barrier's state; an unknown value reads as waiting (a later read decides).
pub fn barrier_state(b: &pb::Barrier) -> pb::BarrierState {
    pb::BarrierState::try_from(b.state).unwrap_or(pb::BarrierState::Waiting)
}

impl Client {
    /// Broadcast (COORDINATION §4.2): one entry that every member reads and that asks nobody.
    pub async fn broadcast(
        &self,
        thread: &str,
        body: pb::LabeledBody,
        key: Option<String>,
    ) -> Result<Written<pb::SendResponse>, SdkError> {
        self.send(Message::new(thread, body).to(to_nobody()), key).await
    }

    /// Posts a barrier (COORDINATION §4.7): one entry asking `to` (all speakers, or a subgroup),
    /// each of whom then owes a response. Its entry is in the receipt ([`sent`]); wait on it with
    /// [`Client::wait_barrier`].
    pub async fn barrier(
        &self,
        thread: &str,
        to: pb::SendTo,
        body: pb::LabeledBody,
        key: Option<String>,
    ) -> Result<Written<pb::SendResponse>, SdkError> {
        self.send(Message::new(thread, body).to(to), key).await
    }

    /// Waits until the barrier at entry `entry` of `thread` is released (every responder replied
    /// or handled: the barrier is returned) or broken ([`Error::Broken`], naming each absent member
    /// and how it left), or `timeout` passes ([`Error::Waiting`]; nothing is lost, wait again).
    /// Each new entry of the thread (a reply) triggers a read; so does [`BARRIER_RECHECK`], because
    /// a handle or a departure posts no entry.
    pub async fn wait_barrier(&self, thread: &str, entry: u64, timeout: Duration) -> Result<pb::Barrier, Error> {
        let start = Instant::now();
        let deadline = start + timeout;
        let mut watcher = Watcher::new(self, thread, entry);
        loop {
            let b = self.get_barrier(pb::GetBarrierRequest { thread: thread.to_string(), entry }).await?;
            match barrier_state(&b) {
                pb::BarrierState::Released => return Ok(b),
                pb::BarrierState::Broken => return Err(Error::Broken { absent: absent(&b), barrier: Box::new(b) }),
                pb::BarrierState::Waiting | pb::BarrierState::Unspecified => {}
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::Waiting { barrier: Box::new(b), waited: now - start });
            }
            let wake = deadline.min(now + BARRIER_RECHECK);
            if watcher.next(wake).await? == Woke::Ended {
                // The thread closed: the next read is final. Should it still say waiting, the
                // recheck interval bounds how often it is read.
                tokio::time::sleep_until(wake).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(seq: u64) -> pb::MailItem {
        pb::MailItem {
            entry: Some(pb::Entry { seq, thread: "th_1".into(), ..Default::default() }),
            ..Default::default()
        }
    }

    fn page(seqs: &[u64], next_after: Option<u64>) -> pb::Mailbox {
        pb::Mailbox { items: seqs.iter().map(|&s| item(s)).collect(), next_after }
    }

    fn seqs(items: &[pb::MailItem]) -> Vec<u64> {
        items.iter().map(seq).collect()
    }

    #[test]
    fn a_page_with_items_moves_the_cursor_to_its_last_item_or_next_after() {
        let (items, step) = page_step(3, page(&[4, 5], None));
        assert_eq!(seqs(&items), [4, 5]);
        assert_eq!(step, PageStep::Items { after: 5 });
        // ASKED_ME: the scan examined past the last kept item.
        let (_, step) = page_step(3, page(&[4, 5], Some(40)));
        assert_eq!(step, PageStep::Items { after: 40 });
        // A next_after behind the last item never moves the cursor back.
        let (_, step) = page_step(3, page(&[4, 9], Some(6)));
        assert_eq!(step, PageStep::Items { after: 9 });
    }

    #[test]
    fn an_empty_page_skips_ahead_or_is_caught_up() {
        assert_eq!(page_step(3, page(&[], Some(24))).1, PageStep::Skip { after: 24 });
        assert_eq!(page_step(3, page(&[], None)).1, PageStep::CaughtUp);
        // A next_after that does not move forward would loop forever: it counts as caught up.
        assert_eq!(page_step(3, page(&[], Some(3))).1, PageStep::CaughtUp);
        assert_eq!(page_step(3, page(&[], Some(1))).1, PageStep::CaughtUp);
    }

    #[test]
    fn a_page_never_yields_an_entry_at_or_before_the_cursor_or_out_of_order() {
        let (items, step) = page_step(5, page(&[4, 5, 6, 6, 8, 7, 9], None));
        assert_eq!(seqs(&items), [6, 8, 9], "repeats, reorders and old entries are dropped");
        assert_eq!(step, PageStep::Items { after: 9 });
        let mut missing_entry = page(&[], None);
        missing_entry.items.push(pb::MailItem::default());
        assert_eq!(page_step(0, missing_entry).1, PageStep::CaughtUp, "an item without an entry is never kept");
    }

    #[test]
    fn the_queue_resumes_from_the_last_item_handed_out_while_items_wait() {
        let mut q = Queue::new(2);
        assert_eq!(q.cursor(), 2);
        q.push(Received { items: vec![item(3), item(4), item(5)], after: 7 });
        assert_eq!(q.cursor(), 2, "nothing handed out yet: resuming must see 3, 4, 5 again");
        assert_eq!(q.pop().map(|i| seq(&i)), Some(3));
        assert_eq!(q.cursor(), 3);
        assert_eq!(q.pop().map(|i| seq(&i)), Some(4));
        assert_eq!(q.pop().map(|i| seq(&i)), Some(5));
        assert_eq!(q.cursor(), 7, "all handed out: resume past everything examined");
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn the_queue_never_hands_out_an_item_twice() {
        let mut q = Queue::new(0);
        q.push(Received { items: vec![item(1), item(2)], after: 2 });
        assert_eq!(q.pop().map(|i| seq(&i)), Some(1));
        // A later fetch that overlaps what is queued or handed out.
        q.push(Received { items: vec![item(1), item(2), item(3)], after: 3 });
        let rest: Vec<u64> = std::iter::from_fn(|| q.pop()).map(|i| seq(&i)).collect();
        assert_eq!(rest, [2, 3]);
        // A stale fetch never moves the cursor back.
        q.push(Received { items: vec![], after: 1 });
        assert_eq!(q.cursor(), 3);
    }

    fn delivered(output: Option<&str>) -> pb::Assignment {
        pb::Assignment {
            id: "asg_1".into(),
            state: Some(pb::assignment::State::Delivered(pb::AssignmentDeliveredState {
                output: output.map(|o| pb::Content { body: o.as_bytes().to_vec() }),
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    fn ended(outcome: pb::AssignmentOutcome, output: Option<&str>) -> pb::Assignment {
        pb::Assignment {
            id: "asg_2".into(),
            state: Some(pb::assignment::State::Ended(pb::AssignmentEndedState {
                outcome: outcome as i32,
                delivered: output.map(|o| pb::Content { body: o.as_bytes().to_vec() }),
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    fn rank(rank: u32, member: &str, assignment: pb::Assignment, omitted: bool) -> pb::CollectiveRank {
        pb::CollectiveRank {
            rank,
            member: member.into(),
            entry: 10 + u64::from(rank),
            assignment: Some(assignment),
            output_omitted: omitted,
        }
    }

    fn collective(ranks: Vec<pb::CollectiveRank>, all_delivered: bool) -> pb::Collective {
        pb::Collective {
            thread: "th_1".into(),
            header: 9,
            author: "ag_1".into(),
            size: u32::try_from(ranks.len()).unwrap_or(u32::MAX),
            complete: true,
            all_delivered,
            ranks,
            formed_at_unix_micros: 0,
        }
    }

    #[test]
    fn gathered_ranks_are_in_rank_order_and_combine_in_that_order() {
        // Sent out of order on purpose: the fold must follow the rank, not the page.
        let c = collective(
            vec![
                rank(2, "ag_10", ended(pb::AssignmentOutcome::Adopted, Some("c")), false),
                rank(0, "ag_2", delivered(Some("a")), false),
                rank(1, "ag_9", ended(pb::AssignmentOutcome::Undecided, Some("b")), false),
            ],
            true,
        );
        let g = Gathered::from_collective(c);
        assert_eq!(g.ranks.iter().map(|r| r.rank).collect::<Vec<_>>(), [0, 1, 2]);
        let combined = g.combine(Reduction::Concat, &Marks::default()).expect("all delivered");
        assert_eq!(combined.output, b"a\nb\nc");
        let first = g.combine(Reduction::First, &Marks::default()).expect("all delivered");
        assert_eq!(first.winner, Some(AgentId(2)), "rank 0 is ag_2");
    }

    #[test]
    fn combine_refuses_and_lists_every_rank_without_an_output() {
        let c = collective(
            vec![
                rank(0, "ag_2", delivered(Some("a")), false),
                rank(1, "ag_3", ended(pb::AssignmentOutcome::TimedOut, None), false),
                rank(
                    2,
                    "ag_4",
                    pb::Assignment { state: Some(pb::assignment::State::Open(())), ..Default::default() },
                    false,
                ),
                rank(3, "ag_5", delivered(None), true),
            ],
            false,
        );
        let g = Gathered::from_collective(c);
        let missing = g.missing();
        assert_eq!(missing.iter().map(|m| m.rank).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(missing[0].state, "ended: timed out");
        assert_eq!(missing[1].state, "open (not taken)");
        assert!(missing[2].state.contains("could not be read"), "{}", missing[2].state);
        match g.combine(Reduction::Concat, &Marks::default()) {
            Err(e @ Error::Undelivered { .. }) => {
                let text = e.to_string();
                assert!(text.contains("rank 1 (ag_3): ended: timed out"), "{text}");
                assert!(text.contains("rank 2 (ag_4)"), "{text}");
            }
            other => panic!("a partial collective was folded: {other:?}"),
        }
    }

    #[test]
    fn combine_trusts_all_delivered_over_the_outputs_in_hand() {
        // Every rank in hand has an output, but the server says a rank never delivered: refuse.
        let g = Gathered::from_collective(collective(vec![rank(0, "ag_2", delivered(Some("a")), false)], false));
        assert!(matches!(g.combine(Reduction::First, &Marks::default()), Err(Error::Undelivered { .. })));
        let empty = Gathered::from_collective(collective(vec![], true));
        assert!(matches!(empty.combine(Reduction::First, &Marks::default()), Err(Error::Undelivered { .. })));
    }

    #[test]
    fn marks_reach_the_votes_by_member() {
        let c = collective(
            vec![rank(0, "ag_2", delivered(Some("x")), false), rank(1, "ag_3", delivered(Some("y")), false)],
            true,
        );
        let g = Gathered::from_collective(c);
        let mut marks = Marks::default();
        marks.weights.insert(AgentId(3), 5.0);
        marks.scores.insert(AgentId(2), 0.9);
        let votes = g.votes(&marks).expect("all delivered");
        assert_eq!((votes[0].member, votes[0].weight, votes[0].score), (AgentId(2), 1.0, 0.9));
        assert_eq!((votes[1].member, votes[1].weight, votes[1].score), (AgentId(3), 5.0, 0.0));
        let bad = Gathered::from_collective(collective(vec![rank(0, "bob", delivered(Some("x")), false)], true));
        assert!(matches!(bad.votes(&marks), Err(Error::Member(m)) if m == "bob"));
    }

    #[test]
    fn deliveries_are_recognised_in_every_state_that_has_one() {
        use pb::AssignmentOutcome as O;
        assert!(has_delivery(&delivered(None)));
        for o in [O::Adopted, O::Rejected, O::Undecided] {
            assert!(has_delivery(&ended(o, None)), "{o:?} follows a delivery");
        }
        for o in [O::Dropped, O::TimedOut, O::Voided] {
            assert!(!has_delivery(&ended(o, None)), "{o:?} without output has no delivery");
        }
        assert_eq!(delivered_output(&ended(O::Rejected, Some("r"))), Some(&b"r"[..]));
    }

    fn barrier(ranks: &[(&str, pb::BarrierArrival)], state: pb::BarrierState) -> pb::Barrier {
        pb::Barrier {
            thread: "th_1".into(),
            entry: 4,
            author: "ag_1".into(),
            size: u32::try_from(ranks.len()).unwrap_or(u32::MAX),
            ranks: ranks
                .iter()
                .enumerate()
                .map(|(i, (m, a))| pb::BarrierRank {
                    rank: u32::try_from(i).unwrap_or(u32::MAX),
                    member: (*m).into(),
                    arrival: *a as i32,
                    replied_by_entry: None,
                })
                .collect(),
            state: state as i32,
            pending: 0,
            absent: 0,
        }
    }

    #[test]
    fn a_broken_barrier_names_each_absent_member_and_how_it_left() {
        use pb::BarrierArrival as A;
        let b = barrier(
            &[
                ("ag_1", A::Author),
                ("ag_2", A::Replied),
                ("ag_3", A::MembershipEnded),
                ("ag_4", A::Demoted),
                ("ag_5", A::Pending),
            ],
            pb::BarrierState::Broken,
        );
        let gone = absent(&b);
        assert_eq!(gone.iter().map(|a| a.member.as_str()).collect::<Vec<_>>(), ["ag_3", "ag_4"]);
        let e = Error::Broken { absent: gone, barrier: Box::new(b) };
        let text = e.to_string();
        assert!(text.contains("th_1#4 is broken"), "{text}");
        assert!(text.contains("ag_3 left the thread"), "{text}");
        assert!(text.contains("ag_4 was demoted to observer"), "{text}");
        assert!(!text.contains("ag_5"), "a pending member is not absent: {text}");
    }

    #[test]
    fn an_unknown_barrier_state_reads_as_waiting() {
        let mut b = barrier(&[], pb::BarrierState::Released);
        assert_eq!(barrier_state(&b), pb::BarrierState::Released);
        b.state = 42;
        assert_eq!(barrier_state(&b), pb::BarrierState::Waiting);
    }

    #[test]
    fn receipts_are_read_by_their_case() {
        let sent_receipt = pb::SendResponse {
            receipt: Some(pb::Receipt {
                result: Some(pb::receipt::Result::Sent(pb::Sent { entry: 7, ..Default::default() })),
                ..Default::default()
            }),
            replayed: false,
        };
        assert_eq!(sent(&sent_receipt).map(|s| s.entry), Some(7));
        assert_eq!(sent(&pb::SendResponse::default()), None);
    }
}
