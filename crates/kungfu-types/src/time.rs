//! Time as the protocol sees it. Only the leader reads a clock: it stamps each command with a
//! [`Timestamp`], and every deadline decision is made from that stamp (L4, DESIGN §4).

use serde::{Deserialize, Serialize};
use std::fmt;

/// Microseconds since the Unix epoch, as stamped by the leader on a command.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Timestamp(pub u64);

impl Timestamp {
    pub const ZERO: Timestamp = Timestamp(0);

    pub fn from_micros(us: u64) -> Timestamp {
        Timestamp(us)
    }

    pub fn as_micros(self) -> u64 {
        self.0
    }

    /// This time plus a span, saturating at the end of time rather than wrapping.
    pub fn plus(self, span: Micros) -> Timestamp {
        Timestamp(self.0.saturating_add(span.0))
    }

    /// The span from `earlier` to this time, or zero if `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> Micros {
        Micros(self.0.saturating_sub(earlier.0))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:06}s", self.0 / 1_000_000, self.0 % 1_000_000)
    }
}

/// A span of time in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Micros(pub u64);

impl Micros {
    pub const fn from_secs(s: u64) -> Micros {
        Micros(s * 1_000_000)
    }

    pub const fn from_millis(ms: u64) -> Micros {
        Micros(ms * 1_000)
    }

    pub fn as_secs(self) -> u64 {
        self.0 / 1_000_000
    }
}

impl fmt::Display for Micros {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 % 1_000_000 == 0 { write!(f, "{}s", self.0 / 1_000_000) } else { write!(f, "{}µs", self.0) }
    }
}
