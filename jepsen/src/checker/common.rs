//! What the checkers share besides [`Verdict`]: counting a write's outcomes, the option most of
//! them have (a final read is required), and what its absence means.

use super::Verdict;
use crate::history::Pair;

/// How the attempts of one kind of write ended: ok (took effect), fail (did not), info
/// (indeterminate: an `info` op or one that never completed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcomes {
    pub ok: u64,
    pub fail: u64,
    pub info: u64,
}

impl Outcomes {
    /// Counts `p`'s outcome.
    pub fn tally(&mut self, p: &Pair<'_>) {
        if p.is_ok() {
            self.ok += 1;
        } else if p.is_fail() {
            self.fail += 1;
        } else {
            self.info += 1;
        }
    }

    /// Every attempt counted.
    pub fn attempts(&self) -> u64 {
        self.ok + self.fail + self.info
    }

    /// Sets the verdict's `ok`, `fail` and `info` counts, and the attempts under `attempts`
    /// (`attempts`, `appends`, …) when the checker reports them.
    pub fn count(&self, v: &mut Verdict, attempts: Option<&str>) {
        if let Some(name) = attempts {
            v.count(name, self.attempts());
        }
        v.count("ok", self.ok);
        v.count("fail", self.fail);
        v.count("info", self.info);
    }
}

/// Options of a checker whose one option is whether a final read is required.
#[derive(Clone, Debug)]
pub struct RequireFinalRead {
    /// A history without any successful `final-read` is `Unknown`.
    pub require_final_read: bool,
}

impl Default for RequireFinalRead {
    fn default() -> RequireFinalRead {
        RequireFinalRead { require_final_read: true }
    }
}

/// A history without a successful final read leaves undecided what only a final read shows
/// (`unshown`: "survival and cursors are not shown", …): the verdict is `Unknown` when one is
/// `required`.
pub fn no_final_read(v: &mut Verdict, finals: usize, required: bool, unshown: &str) {
    if finals == 0 && required {
        v.undecided("no_final_read", Vec::new(), format!("no final read: {unshown}"));
    }
}
