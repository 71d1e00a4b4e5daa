//! The gather reductions (design §4.6, fak `modelroute.Combine`): folding the outputs of a
//! collective's members into one answer. They compare and parse content, so they run in the client,
//! never in the core (design §12 item 22).
//!
//! Every rule is deterministic: the same votes in the same order always fold the same way, and
//! every tie is broken by a stable key (the output bytes, then the member id).

use kungfu_types::AgentId;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// How a set of outputs is folded into one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Reduction {
    /// The first vote's output (rank 0 of a gather).
    #[default]
    First,
    /// Every output, joined with `\n` in vote order.
    Concat,
    /// The output with the most weight; ties go to the bytewise-smaller output.
    Vote,
    /// The output with the highest score; ties go to the smallest member id.
    BestOf,
    /// The weighted mean of the outputs read as decimal numbers.
    AllReduce,
}

impl Reduction {
    /// The canonical name of the reduction (fak's names), which [`FromStr`] reads back.
    pub fn as_str(self) -> &'static str {
        match self {
            Reduction::First => "first",
            Reduction::Concat => "concat",
            Reduction::Vote => "vote",
            Reduction::BestOf => "best_of",
            Reduction::AllReduce => "all_reduce",
        }
    }
}

impl fmt::Display for Reduction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A reduction name that is not one of the five.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown reduction {0:?} (expected first, concat, vote, best_of or all_reduce)")]
pub struct UnknownReduction(pub String);

impl FromStr for Reduction {
    type Err = UnknownReduction;

    /// Reads fak's names, and the hyphenated spellings a command line invites. The empty string is
    /// refused like any other unknown name: "no choice" is [`Reduction::default`], not a name.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "first" => Ok(Reduction::First),
            "concat" => Ok(Reduction::Concat),
            "vote" => Ok(Reduction::Vote),
            "best_of" | "best-of" => Ok(Reduction::BestOf),
            "all_reduce" | "all-reduce" => Ok(Reduction::AllReduce),
            other => Err(UnknownReduction(other.to_owned())),
        }
    }
}

/// One member's output, as a reduction reads it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Vote<'a> {
    /// The member who produced the output.
    pub member: AgentId,
    /// The member's weight in `vote` and `all_reduce`; a weight that is not a positive finite
    /// number counts as 1.
    pub weight: f64,
    /// The member's score in `best_of` (a judge's or verifier's mark); NaN counts as the lowest
    /// score, −∞.
    pub score: f64,
    /// The output itself.
    pub output: &'a [u8],
}

/// The folded result.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Combined {
    /// The folded output.
    pub output: Vec<u8>,
    /// The member the output is credited to: the first vote's member for `first`, the best-scored
    /// member for `best_of`, the smallest member id that voted for the winning output for `vote`;
    /// `None` for `concat` and `all_reduce`, whose output is nobody's.
    pub winner: Option<AgentId>,
    /// For `vote` only: every distinct output with its total weight, in ascending bytewise order of
    /// the outputs. Empty for the other reductions.
    pub tally: Vec<(Vec<u8>, f64)>,
}

/// Why a set of votes could not be folded. The fold never guesses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CombineError {
    /// There is nothing to fold.
    #[error("no outputs to combine")]
    Empty,
    /// An `all_reduce` output is not a decimal number.
    #[error("all_reduce: the output of {member} is not a decimal number")]
    NotNumeric {
        /// The member whose output it is.
        member: AgentId,
    },
    /// An `all_reduce` output is a number that is not finite (NaN, infinite, or out of `f64` range).
    #[error("all_reduce: the output of {member} is not a finite number")]
    NotFinite {
        /// The member whose output it is.
        member: AgentId,
    },
    /// The weighted sum of an `all_reduce` left the `f64` range, so the mean cannot be computed.
    #[error("all_reduce: the weighted sum of the outputs is out of range")]
    OutOfRange,
}

/// Folds `votes` by `reduce` (design §4.6, rule for rule).
///
/// `votes` are in the order the fold reads them: rank order for a gather (design §4.5), declaration
/// order for a topology's in-neighbors. `first` and `concat` depend on that order; `vote`,
/// `best_of` and `all_reduce` do not.
pub fn combine(reduce: Reduction, votes: &[Vote<'_>]) -> Result<Combined, CombineError> {
    let first = votes.first().ok_or(CombineError::Empty)?;
    match reduce {
        Reduction::First => {
            Ok(Combined { output: first.output.to_vec(), winner: Some(first.member), tally: Vec::new() })
        }
        Reduction::Concat => {
            let output = votes.iter().map(|v| v.output).collect::<Vec<_>>().join(&b'\n');
            Ok(Combined { output, winner: None, tally: Vec::new() })
        }
        Reduction::Vote => Ok(vote(votes)),
        Reduction::BestOf => {
            let best = votes.iter().reduce(|best, v| if beats(v, best) { v } else { best }).unwrap_or(first);
            Ok(Combined { output: best.output.to_vec(), winner: Some(best.member), tally: Vec::new() })
        }
        Reduction::AllReduce => all_reduce(votes),
    }
}

/// A member's effective weight: a weight that is not a positive finite number counts as 1, so a
/// missing (zero) or corrupt weight neither silences a member nor poisons the tally.
fn weight_of(v: &Vote<'_>) -> f64 {
    if v.weight.is_finite() && v.weight > 0.0 { v.weight } else { 1.0 }
}

/// The weighted tally: highest total weight wins, ties go to the bytewise-smaller output, and the
/// winner is the smallest member id that voted for it.
fn vote(votes: &[Vote<'_>]) -> Combined {
    let mut tally: BTreeMap<&[u8], f64> = BTreeMap::new();
    for v in votes {
        *tally.entry(v.output).or_default() += weight_of(v);
    }
    // Ascending output order, and only a strictly greater weight replaces the best: a tie keeps the
    // smaller output.
    let mut best: Option<(&[u8], f64)> = None;
    for (&output, &weight) in &tally {
        if best.is_none_or(|(_, w)| weight > w) {
            best = Some((output, weight));
        }
    }
    let output = best.map(|(o, _)| o).unwrap_or_default();
    let winner = votes.iter().filter(|v| v.output == output).map(|v| v.member).min();
    Combined { output: output.to_vec(), winner, tally: tally.into_iter().map(|(o, w)| (o.to_vec(), w)).collect() }
}

/// Whether `v` beats `best` in `best_of`: a higher score, or the same score and a smaller member id.
/// NaN counts as −∞, so a corrupt score never wins over a real one.
fn beats(v: &Vote<'_>, best: &Vote<'_>) -> bool {
    let key = |s: f64| if s.is_nan() { f64::NEG_INFINITY } else { s };
    let (s, b) = (key(v.score), key(best.score));
    s > b || (s == b && v.member < best.member)
}

/// The weighted mean of the outputs read as trimmed UTF-8 decimal numbers, printed with Rust's
/// shortest round-trip formatting (design §4.6: not Go's `'g'` format, which writes large and
/// small exponents differently).
fn all_reduce(votes: &[Vote<'_>]) -> Result<Combined, CombineError> {
    let (mut sum, mut weights) = (0.0_f64, 0.0_f64);
    for v in votes {
        let text = std::str::from_utf8(v.output).map_err(|_| CombineError::NotNumeric { member: v.member })?;
        let x: f64 = text.trim().parse().map_err(|_| CombineError::NotNumeric { member: v.member })?;
        // Rust reads "inf" and "NaN" as numbers, and a decimal past the f64 range as infinity;
        // none of them is a value a mean can use.
        if !x.is_finite() {
            return Err(CombineError::NotFinite { member: v.member });
        }
        let w = weight_of(v);
        sum += x * w;
        weights += w;
    }
    let mean = sum / weights;
    if !mean.is_finite() {
        return Err(CombineError::OutOfRange);
    }
    Ok(Combined { output: mean.to_string().into_bytes(), winner: None, tally: Vec::new() })
}
