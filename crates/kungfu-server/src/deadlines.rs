//! The deadline scheduler (L4, DESIGN §4), driven by the fact feed (STYLE habit 11: effects follow
//! facts, never a poll loop).
//!
//! While this node leads with its state caught up (`RaftNode::leads_caught_up`: it has applied
//! its own term, so the due index holds every deadline an earlier leader armed), the scheduler
//! keeps every pending deadline in memory, ordered by due time. The new leader serves its first
//! write only once they are armed (`Backend::timers`). It subscribes to the feed first,
//! then reads the whole due index (replicated state), so nothing applied in between is missed;
//! afterwards each applied command's effects arm the deadlines that arose and disarm the ones
//! that ended. A lagging subscription or a snapshot install re-reads the due index (the feed's lag
//! policy). One timer sleeps until the earliest due time; when it fires, every deadline then due,
//! up to [`MAX_BATCH`], is proposed as ONE log entry of `Expire` commands, so a storm of
//! deadlines due in the same second costs a few raft rounds, not one each. While a proposal is in
//! flight, newly due deadlines wait and go together in the next.
//!
//! Exactly once: apply ends an obligation only if it is still open and due at the command's time,
//! so a proposal repeated (after an indeterminate write, or by two leaders across a failover) ends
//! it at most once, and the expiry of one already ended is answered NO_EFFECT. A deadline taken
//! out of the pending set for a proposal that failed is put back.
//!
//! No loop here spins (issue #36: with its raft core dead, the scheduler once re-armed and
//! disarmed its timers without pause, 2 MB/s of log lines). A raft that stopped (its metrics
//! channel closed, or `kungfu_raft::fatal::core_stop`) ends the scheduler; a proposal that failed
//! and a due index that could not be read are tried again after a bounded exponential backoff
//! ([`RETRY_AFTER`] doubling up to [`RETRY_MAX`]), so a fault costs at most a line per
//! [`RETRY_MAX`].

use crate::backend::Backend;
use kungfu_core::Action;
use kungfu_core::effects::Deadline;
use kungfu_core::read::due_obligations;
use kungfu_raft::feed::FeedEvent;
use kungfu_raft::node::caught_up_in;
use kungfu_types::{Code, Timestamp};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

/// Most expiries proposed in one log entry.
pub const MAX_BATCH: usize = 1024;
/// Due-index entries read per page when (re)loading.
const LOAD_PAGE: usize = 4096;
/// How long to wait before proposing again after a proposal whose outcome is unknown, or before
/// reading the due index again after a failed read; doubled after each failure in a row.
const RETRY_AFTER: Duration = Duration::from_millis(100);
/// The longest wait between two tries.
const RETRY_MAX: Duration = Duration::from_secs(5);

/// Bounded exponential backoff: [`RETRY_AFTER`], doubled after each failure up to [`RETRY_MAX`],
/// back to [`RETRY_AFTER`] after a success.
#[derive(Debug)]
struct Backoff(Duration);

impl Backoff {
    fn new() -> Backoff {
        Backoff(RETRY_AFTER)
    }

    /// The wait before the next try.
    fn next(&mut self) -> Duration {
        let wait = self.0;
        self.0 = (self.0 * 2).min(RETRY_MAX);
        wait
    }

    fn reset(&mut self) {
        self.0 = RETRY_AFTER;
    }
}

/// The time now, by the node's clock (the one place wall time becomes a `Timestamp`).
fn now(b: &Backend) -> Timestamp {
    b.node.clock.now()
}

/// Runs until `stop` changes.
pub async fn run(b: Arc<Backend>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let me = b.node.id;
    // While this runs, a new leader's writes wait until its timers are armed (Backend::caught_up).
    b.timers.send_modify(|t| t.scheduling = true);
    let _stopped = Stopped(b.clone());
    let mut backoff = Backoff::new();
    loop {
        let wait = b.node.raft.wait(None);
        let leads = wait.metrics(move |m| caught_up_in(m, me), "the deadline scheduler: lead");
        tokio::select! {
            r = leads => if r.is_err() { return },  // raft stopped
            _ = stop.changed() => return,
        }
        // A core that panicked leaves its last metrics behind, a leader's among them: they would
        // satisfy `leads` again at once, for ever (issue #36).
        if kungfu_raft::fatal::core_stop(&b.node.raft).is_some() {
            return;
        }
        match lead(&b, &mut stop).await {
            Led::Stopped => return,
            Led::Lost => backoff.reset(),
            // Still leading: wait before reading the due index again.
            Led::Failed => {
                tokio::select! {
                    () = tokio::time::sleep(backoff.next()) => {}
                    _ = stop.changed() => return,
                }
            }
        }
    }
}

/// Marks the scheduler gone when `run` ends, so writes stop waiting for it.
struct Stopped(Arc<Backend>);

impl Drop for Stopped {
    fn drop(&mut self) {
        self.0.timers.send_modify(|t| t.scheduling = false);
    }
}

/// How a term of leadership ended for the scheduler.
enum Led {
    /// This node no longer leads in that term.
    Lost,
    /// The due index could not be read: try again after a pause.
    Failed,
    /// The node is stopping, or its raft stopped.
    Stopped,
}

/// The pending deadlines while this node leads.
#[derive(Debug, Default)]
struct Pending(BTreeSet<Deadline>);

impl Pending {
    /// Every deadline of the due index, read page by page.
    fn load(b: &Backend) -> Result<Pending, kungfu_core::StateError> {
        let mut all = BTreeSet::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let page = b.node.state.read(|s| due_obligations(s, after.as_deref(), LOAD_PAGE))?;
            let full = page.len() == LOAD_PAGE;
            for (key, obligation, _) in page {
                if let Some((due_at, _)) = kungfu_core::keys::due_entry_of(&key) {
                    all.insert(Deadline { due_at, obligation });
                }
                after = Some(key);
            }
            if !full {
                return Ok(Pending(all));
            }
        }
    }

    fn follow(&mut self, event: &FeedEvent) -> bool {
        match event {
            FeedEvent::Applied { commands, .. } => {
                for c in commands.iter() {
                    for d in &c.effects.ended {
                        self.0.remove(d);
                    }
                    self.0.extend(c.effects.armed.iter().copied());
                }
                true
            }
            FeedEvent::Replaced { .. } => false,
        }
    }

    /// Takes out every deadline due at `t`, at most [`MAX_BATCH`].
    fn take_due(&mut self, t: Timestamp) -> Vec<Deadline> {
        let due: Vec<Deadline> = self.0.iter().take_while(|d| d.due_at <= t).take(MAX_BATCH).copied().collect();
        for d in &due {
            self.0.remove(d);
        }
        due
    }
}

/// One term of leadership: load, then follow the feed and fire timers until the term ends.
async fn lead(b: &Arc<Backend>, stop: &mut tokio::sync::watch::Receiver<bool>) -> Led {
    let me = b.node.id;
    let term = b.node.metrics().current_term;
    // Subscribe before reading the due index: what is applied after the read arrives on the feed.
    let mut feed = b.node.feed.subscribe();
    let mut pending = match Pending::load(b) {
        Ok(p) => p,
        Err(e) => {
            tracing::error!(error = %e, "cannot read the due index; trying again after a pause");
            return Led::Failed;
        }
    };
    tracing::info!(pending = pending.0.len(), term, "deadline timers armed from the due index");
    b.timers.send_modify(|t| t.armed_term = t.armed_term.max(term));
    // On the server metrics, which change with leadership only, not with every commit.
    let lost = kungfu_raft::node::wait_server_metrics(&b.node.raft, move |m| {
        kungfu_raft::node::server_leader(m) != Some(me) || kungfu_raft::node::server_term(m) != term
    });
    tokio::pin!(lost);
    let mut retry_at: Option<tokio::time::Instant> = None;
    let mut backoff = Backoff::new();
    loop {
        let wake = next_wake(now(&b), &pending, retry_at);
        tokio::select! {
            _ = stop.changed() => return Led::Stopped,
            r = &mut lost => {
                // An error: the metrics channel closed, the raft core is gone (issue #36).
                if r.is_err() {
                    return Led::Stopped;
                }
                tracing::info!(term, "deadline timers disarmed: this node no longer leads");
                return Led::Lost;
            }
            event = feed.recv() => {
                let reload = match event {
                    Ok(e) => !pending.follow(&e),
                    Err(RecvError::Lagged(n)) => {
                        tracing::warn!(skipped = n, "the deadline scheduler fell behind the fact feed; re-reading the due index");
                        true
                    }
                    Err(RecvError::Closed) => return Led::Stopped,
                };
                if reload {
                    match Pending::load(b) {
                        Ok(p) => pending = p,
                        Err(e) => {
                            tracing::error!(error = %e, "cannot read the due index; trying again after a pause");
                            return Led::Failed;
                        }
                    }
                }
            }
            () = tokio::time::sleep_until(wake.unwrap_or_else(far_future)), if wake.is_some() => {
                retry_at = None;
                if fire(b, &mut pending).await {
                    backoff.reset();
                } else {
                    retry_at = Some(tokio::time::Instant::now() + backoff.next());
                }
            }
        }
    }
}

fn far_future() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs(3600)
}

/// When the timer must wake: at the earliest due time (or the retry time after a failed
/// proposal, whichever is later), None with nothing pending.
fn next_wake(
    mut wall: Timestamp,
    pending: &Pending,
    retry_at: Option<tokio::time::Instant>,
) -> Option<tokio::time::Instant> {
    let first = pending.0.first()?;
    if crate::canary::armed("early-deadlines") {
        wall = Timestamp(wall.0 + crate::canary::EARLY_BY_MICROS);
    }
    let at = tokio::time::Instant::now() + Duration::from_micros(first.due_at.0.saturating_sub(wall.0));
    Some(retry_at.map_or(at, |r| r.max(at)))
}

/// Proposes every deadline due now as one entry. Returns false if the outcome is unknown (the
/// deadlines are back in `pending`, to be proposed again after the backoff's pause).
async fn fire(b: &Arc<Backend>, pending: &mut Pending) -> bool {
    let mut t = now(b);
    if crate::canary::armed("early-deadlines") {
        t = Timestamp(t.0 + crate::canary::EARLY_BY_MICROS);
    }
    let due = pending.take_due(t);
    if due.is_empty() {
        return true;
    }
    let actions = due.iter().map(|d| Action::Expire { obligation: d.obligation, due_at: d.due_at }).collect();
    match b.submit_system_many(actions).await {
        Ok(outcomes) => {
            let at = now(b);
            for (d, outcome) in due.iter().zip(outcomes) {
                match outcome {
                    Ok(_) => {
                        let late = at.since(d.due_at);
                        crate::metrics::deadline_lateness(Duration::from_micros(late.0));
                        tracing::debug!(obligation = ?d.obligation, lateness_us = late.0, "deadline ended an obligation");
                    }
                    // Already ended, by an action that settled it first or an earlier proposal.
                    Err(r) if r.code == Code::NoEffect => {}
                    Err(r) => tracing::warn!(obligation = ?d.obligation, rejection = ?r, "expiry refused"),
                }
            }
            tracing::info!(expired = due.len(), "deadlines proposed together");
            true
        }
        Err(e) => {
            tracing::warn!(error = %e, count = due.len(), "expiries not applied; will propose again");
            pending.0.extend(due);
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_retry_backoff_doubles_up_to_its_bound_and_starts_again_after_a_success() {
        let mut b = Backoff::new();
        let waits: Vec<Duration> = (0..10).map(|_| b.next()).collect();
        assert_eq!(waits[0], RETRY_AFTER);
        assert_eq!(waits[1], RETRY_AFTER * 2);
        assert!(waits.windows(2).all(|w| w[1] >= w[0]), "never shorter: {waits:?}");
        assert!(waits.iter().all(|w| *w <= RETRY_MAX), "bounded: {waits:?}");
        assert_eq!(waits[9], RETRY_MAX, "reaches its bound: {waits:?}");
        b.reset();
        assert_eq!(b.next(), RETRY_AFTER);
    }
}
