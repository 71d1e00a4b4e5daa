//! The fact feed: what every applied log entry recorded, published on this node once its batch is
//! committed to the state store. The deadline scheduler arms and disarms timers from it and watch
//! streams wake from it (DESIGN §4, STYLE habit 11: effects follow facts), instead of polling state.
//!
//! Bounded, with a stated lag policy: the feed keeps the last `capacity` events; a subscriber that
//! falls further behind receives `RecvError::Lagged` on its next `recv`. It must then re-read what
//! it follows from the state store (which already holds everything the skipped events said, since
//! an event is published only after its batch is committed) and go on receiving; nothing is ever
//! skipped silently. A snapshot install replaces the whole state: subscribers get
//! [`FeedEvent::Replaced`] and re-read likewise. Subscribe *before* the first read of state, so no
//! entry applied between the read and the subscription is missed.

use kungfu_core::JournaledFact;
use kungfu_core::effects::Effects;
use std::sync::Arc;
use tokio::sync::broadcast;

/// Events kept for slow subscribers when the configuration says nothing else.
pub const DEFAULT_FEED_CAPACITY: usize = 1024;

/// What one applied command recorded.
#[derive(Clone, Debug)]
pub struct AppliedCommand {
    /// The log index of the entry that carried it.
    pub index: u64,
    /// Its facts, in order (the deadline facts it settled first included).
    pub facts: Vec<JournaledFact>,
    /// Deadlines armed and ended, turns and objects touched.
    pub effects: Effects,
}

/// One event of the feed.
#[derive(Clone, Debug)]
pub enum FeedEvent {
    /// The commands of one committed batch that changed anything, in log order; `applied` is the
    /// batch's last log index (blank and membership entries included).
    Applied { applied: u64, commands: Arc<[AppliedCommand]> },
    /// The state was replaced by a snapshot up to this index: re-read everything.
    Replaced { applied: Option<u64> },
}

/// The publishing side, held by the state machine; cheap to clone.
#[derive(Clone, Debug)]
pub struct Feed(broadcast::Sender<FeedEvent>);

impl Feed {
    pub fn new(capacity: usize) -> Feed {
        Feed(broadcast::channel(capacity.max(1)).0)
    }

    /// A new subscriber; it receives every event published from now on (see the lag policy).
    pub fn subscribe(&self) -> broadcast::Receiver<FeedEvent> {
        self.0.subscribe()
    }

    pub(crate) fn publish(&self, event: FeedEvent) {
        // No subscriber is not an error: nobody follows this node's effects (a follower's
        // scheduler sleeps, no stream is open).
        let _ = self.0.send(event);
    }
}
