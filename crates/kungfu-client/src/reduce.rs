//! TEMP stub of the gather reductions (COORDINATION §4.6), with exactly the public API of the real
//! `reduce.rs` that another branch adds, so `coord.rs` and the CLI compile on this branch. Drop this
//! file at merge; the real one replaces it.

use kungfu_types::AgentId;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// How a set of outputs is folded into one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Reduction {
    /// The first vote's output.
    #[default]
    First,
    /// Every output, joined with `\n` in vote order.
    Concat,
    /// The output with the most weight.
    Vote,
    /// The output with the highest score.
    BestOf,
    /// The weighted mean of the outputs read as numbers.
    AllReduce,
}

impl Reduction {
    /// The canonical name.
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

/// One member's output.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Vote<'a> {
    pub member: AgentId,
    pub weight: f64,
    pub score: f64,
    pub output: &'a [u8],
}

/// The folded result.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Combined {
    pub output: Vec<u8>,
    pub winner: Option<AgentId>,
    pub tally: Vec<(Vec<u8>, f64)>,
}

/// Why a set of votes could not be folded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CombineError {
    #[error("no outputs to combine")]
    Empty,
    #[error("all_reduce: the output of {member} is not a decimal number")]
    NotNumeric { member: AgentId },
    #[error("all_reduce: the output of {member} is not a finite number")]
    NotFinite { member: AgentId },
    #[error("all_reduce: the weighted sum of the outputs is out of range")]
    OutOfRange,
}

fn weight_of(v: &Vote<'_>) -> f64 {
    if v.weight.is_finite() && v.weight > 0.0 { v.weight } else { 1.0 }
}

/// Folds `votes` by `reduce` (a stub: enough to run the CLI on this branch).
pub fn combine(reduce: Reduction, votes: &[Vote<'_>]) -> Result<Combined, CombineError> {
    let first = votes.first().ok_or(CombineError::Empty)?;
    match reduce {
        Reduction::First => {
            Ok(Combined { output: first.output.to_vec(), winner: Some(first.member), tally: Vec::new() })
        }
        Reduction::Concat => Ok(Combined {
            output: votes.iter().map(|v| v.output).collect::<Vec<_>>().join(&b'\n'),
            ..Default::default()
        }),
        Reduction::Vote => {
            let mut tally: BTreeMap<&[u8], f64> = BTreeMap::new();
            for v in votes {
                *tally.entry(v.output).or_default() += weight_of(v);
            }
            let mut best: Option<(&[u8], f64)> = None;
            for (&o, &w) in &tally {
                if best.is_none_or(|(_, b)| w > b) {
                    best = Some((o, w));
                }
            }
            let output = best.map(|(o, _)| o).unwrap_or_default();
            let winner = votes.iter().filter(|v| v.output == output).map(|v| v.member).min();
            Ok(Combined {
                output: output.to_vec(),
                winner,
                tally: tally.into_iter().map(|(o, w)| (o.to_vec(), w)).collect(),
            })
        }
        Reduction::BestOf => {
            let key = |s: f64| if s.is_nan() { f64::NEG_INFINITY } else { s };
            let best = votes
                .iter()
                .reduce(|b, v| {
                    if key(v.score) > key(b.score) || (key(v.score) == key(b.score) && v.member < b.member) {
                        v
                    } else {
                        b
                    }
                })
                .unwrap_or(first);
            Ok(Combined { output: best.output.to_vec(), winner: Some(best.member), tally: Vec::new() })
        }
        Reduction::AllReduce => {
            let (mut sum, mut weights) = (0.0_f64, 0.0_f64);
            for v in votes {
                let text = std::str::from_utf8(v.output).map_err(|_| CombineError::NotNumeric { member: v.member })?;
                let x: f64 = text.trim().parse().map_err(|_| CombineError::NotNumeric { member: v.member })?;
                if !x.is_finite() {
                    return Err(CombineError::NotFinite { member: v.member });
                }
                sum += x * weight_of(v);
                weights += weight_of(v);
            }
            let mean = sum / weights;
            if !mean.is_finite() {
                return Err(CombineError::OutOfRange);
            }
            Ok(Combined { output: mean.to_string().into_bytes(), ..Default::default() })
        }
    }
}
