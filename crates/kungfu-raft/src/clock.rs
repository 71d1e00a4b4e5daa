//! The one place wall time becomes a [`Timestamp`] (issue #32): the leader's stamps (L5), the time
//! a read or a pre-check decides at, the deadline scheduler's timers and the turn times of the
//! watch feeds all read [`Clock::now`] of their node. The core never reads a clock: time reaches
//! it only as `Command::ts`, stamped here.
//!
//! A manual clock ([`Clock::manual`]) is the seam for tests that need time to stand still or to
//! jump: it reads what its [`ManualTime`] was set to.

use kungfu_types::{Micros, Timestamp};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A node's clock: the system's wall clock, or a manual one for tests.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    manual: Option<Arc<AtomicU64>>,
}

impl Clock {
    /// The system's wall clock, in microseconds since the Unix epoch.
    pub fn system() -> Clock {
        Clock { manual: None }
    }

    /// A clock that reads only what the returned [`ManualTime`] sets, starting at `start`.
    pub fn manual(start: Timestamp) -> (Clock, ManualTime) {
        let t = Arc::new(AtomicU64::new(start.0));
        (Clock { manual: Some(t.clone()) }, ManualTime(t))
    }

    /// The time now. A wall clock before the epoch reads as zero (the leader's stamps still
    /// rise: [`crate::node::RaftNode`] stamps after its last stamp and the last applied time).
    pub fn now(&self) -> Timestamp {
        match &self.manual {
            Some(t) => Timestamp(t.load(Ordering::Acquire)),
            None => Timestamp(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_micros() as u64)
                    .unwrap_or(0),
            ),
        }
    }
}

/// The hand that moves a manual [`Clock`].
#[derive(Clone, Debug)]
pub struct ManualTime(Arc<AtomicU64>);

impl ManualTime {
    /// Sets the time (it may go back: a test of a clock that jumps).
    pub fn set(&self, t: Timestamp) {
        self.0.store(t.0, Ordering::Release);
    }

    /// Moves the time forward by `by`.
    pub fn advance(&self, by: Micros) {
        self.0.fetch_add(by.0, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_clock_reads_the_wall_clock_and_a_manual_one_only_its_hand() {
        let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970");
        let now = Clock::system().now();
        assert!(now.0 >= before.as_micros() as u64 && now.0 < before.as_micros() as u64 + 60_000_000, "{now:?}");
        let (clock, hand) = Clock::manual(Timestamp(1_000));
        assert_eq!(clock.now(), Timestamp(1_000));
        hand.advance(Micros(250));
        assert_eq!(clock.clone().now(), Timestamp(1_250), "a clone reads the same hand");
        hand.set(Timestamp(7));
        assert_eq!(clock.now(), Timestamp(7), "it may be set back");
    }
}
