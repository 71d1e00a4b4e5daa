//! Checkers: pure functions from a [`History`] to a [`Verdict`].
//!
//! Every checker has the same shape, `fn check(&History, &Options) -> Verdict`, reads only the
//! history (so a saved `history.jsonl` re-checks offline with the same answer), and follows the
//! rules of [`crate::history`]: an `ok` op took effect, a `fail` op did not, an indeterminate op
//! (`info` or never completed) may have taken effect at any time after its invocation, or never.
//!
//! | module | workload | what it proves |
//! |---|---|---|
//! | [`wgl`] | (engine) | a set of operations has a legal serial order that respects real time |
//! | [`admission`] | admission | adoption limits are never exceeded, first come first served (§7.4, L5) |
//! | [`deadlines`] | deadlines | every delivery/judgment obligation ends exactly once, never early (§6.4, L4, L5) |
//! | [`replay`] | replay | one key, one request, one receipt, one effect (L3) |
//! | [`facts`] | facts | every acknowledged write survives, nothing appears from nowhere (L1) |
//! | [`seq`] | seq | per-thread entry sequences are gap-free, prefix-consistent, real-time ordered (§6.3, L5) |
//! | [`turn`] | turn | each turn read equals the turn `kungfu-core` derives from the facts at that read's point; no obligation ends twice (§8, L1, L5) |
//! | [`scatter`] | scatter | a scatter is all or nothing on every node: header, one goal entry and assignment per requested member, a collective in ascending member id; acknowledged ones everywhere, refused ones (a non-member rank: `INVALID_TARGET`) nowhere; one collective per key (COORDINATION §4.3–§4.5) |
//! | [`messages`] | messages | no acknowledged send lost, none duplicated, none from nowhere; replays return the same entry; every mailbox page is exactly the entries after its cursor, with no gap and no duplicate (COORDINATION §3.3, §3.5; L1, L3) |
//! | [`record`] | record-append | no acknowledged append lost, no note id twice or from nowhere, revs dense and increasing, no read behind an earlier acknowledgment, no replace accepted on a stale base, replays answer one rev, nodes agree (COORDINATION §5.4–§5.8; L1, L3, L5) |
//! | [`wake`] | wake | webhooks of turn changes arrive signed, at least once, in order per target with no sequence gap, one event per id and per number, naming only the target's agent, and every turn's last change is delivered (issue #35, §8, §12) |
//! | [`no_success`] | every run | a run in which nothing succeeded proves nothing and is invalid |
//!
//! [`common`] holds what the checkers share besides [`Verdict`]: counting outcomes, the
//! final-read option and what a missing final read leaves undecided.

pub mod admission;
pub mod common;
pub mod deadlines;
pub mod facts;
pub mod messages;
pub mod no_success;
pub mod record;
pub mod replay;
pub mod scatter;
pub mod seq;
pub mod turn;
pub mod wake;
pub mod wgl;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::history::History;

/// The three possible answers of a checker.
///
/// Serialized as Jepsen's `:valid?`: `true`, `false` or `"unknown"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Validity {
    Valid,
    Invalid,
    /// The checker could not decide: a search bound was reached, or the history lacks what the
    /// check needs (no final read, a malformed value).
    Unknown,
}

impl Validity {
    /// Combines two answers: any `Invalid` wins, then any `Unknown`.
    pub fn and(self, other: Validity) -> Validity {
        use Validity::*;
        match (self, other) {
            (Invalid, _) | (_, Invalid) => Invalid,
            (Unknown, _) | (_, Unknown) => Unknown,
            _ => Valid,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Validity::Valid => "VALID",
            Validity::Invalid => "INVALID",
            Validity::Unknown => "UNKNOWN",
        }
    }
}

impl fmt::Display for Validity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Validity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Validity::Valid => s.serialize_bool(true),
            Validity::Invalid => s.serialize_bool(false),
            Validity::Unknown => s.serialize_str("unknown"),
        }
    }
}

impl<'de> Deserialize<'de> for Validity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Validity, D::Error> {
        match Value::deserialize(d)? {
            Value::Bool(true) => Ok(Validity::Valid),
            Value::Bool(false) => Ok(Validity::Invalid),
            Value::String(s) if s == "unknown" => Ok(Validity::Unknown),
            other => Err(serde::de::Error::custom(format!("valid must be true, false or \"unknown\", got {other}"))),
        }
    }
}

/// One thing a checker found wrong (or could not decide), with the ops that show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anomaly {
    /// A stable snake_case name: `over_limit`, `lost`, `double_ended`, ...
    pub kind: String,
    /// History indexes of the ops involved (the minimal witness the checker could name).
    pub ops: Vec<u64>,
    /// What is wrong, for people.
    pub message: String,
}

/// At most this many anomalies of one kind are kept in full; all are counted.
pub const MAX_ANOMALIES_PER_KIND: u64 = 50;

/// A checker's answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The checker's name (`admission`, `facts`, ...).
    pub checker: String,
    pub valid: Validity,
    /// What was looked at: `attempts`, `ok`, `info`, `reads`, `max_lateness_ns`, ...
    pub counts: BTreeMap<String, u64>,
    /// How many anomalies of each kind were found, including kinds found zero times, so a report
    /// shows what was checked.
    pub anomaly_counts: BTreeMap<String, u64>,
    /// The anomalies, at most [`MAX_ANOMALIES_PER_KIND`] per kind, in the order found.
    pub anomalies: Vec<Anomaly>,
}

impl Verdict {
    /// A valid verdict that checks the given anomaly kinds (each starts at zero).
    pub fn new(checker: &str, kinds: &[&str]) -> Verdict {
        Verdict {
            checker: checker.to_owned(),
            valid: Validity::Valid,
            counts: BTreeMap::new(),
            anomaly_counts: kinds.iter().map(|k| ((*k).to_owned(), 0)).collect(),
            anomalies: Vec::new(),
        }
    }

    fn record(&mut self, kind: &str, ops: Vec<u64>, message: String) {
        let n = self.anomaly_counts.entry(kind.to_owned()).or_insert(0);
        *n += 1;
        if *n <= MAX_ANOMALIES_PER_KIND {
            let mut ops = ops;
            ops.sort_unstable();
            ops.dedup();
            self.anomalies.push(Anomaly { kind: kind.to_owned(), ops, message });
        }
    }

    /// Records an anomaly that makes the history invalid.
    pub fn flag(&mut self, kind: &str, ops: Vec<u64>, message: impl Into<String>) {
        self.record(kind, ops, message.into());
        self.valid = Validity::Invalid;
    }

    /// Records something the checker could not decide; the verdict becomes `Unknown` unless it is
    /// already `Invalid`.
    pub fn undecided(&mut self, kind: &str, ops: Vec<u64>, message: impl Into<String>) {
        self.record(kind, ops, message.into());
        self.valid = self.valid.and(Validity::Unknown);
    }

    /// A final read that did not succeed: true when it failed, after recording that its node is not
    /// checked (a read that never completed says nothing and is skipped silently).
    pub fn final_read_failed(&mut self, p: &crate::history::Pair<'_>) -> bool {
        if p.is_ok() {
            return false;
        }
        if p.completion.is_some() {
            self.undecided(
                "missing_final_read",
                p.indexes(),
                format!("the final read on node {} failed: its node is not checked", p.node().unwrap_or("?")),
            );
        }
        true
    }

    /// Sets a count.
    pub fn count(&mut self, name: &str, n: u64) {
        self.counts.insert(name.to_owned(), n);
    }

    /// Adds to a count.
    pub fn add(&mut self, name: &str, n: u64) {
        *self.counts.entry(name.to_owned()).or_insert(0) += n;
    }

    pub fn is_valid(&self) -> bool {
        self.valid == Validity::Valid
    }

    /// How many anomalies of `kind` were found.
    pub fn anomalies_of(&self, kind: &str) -> u64 {
        self.anomaly_counts.get(kind).copied().unwrap_or(0)
    }

    /// The kept anomalies of `kind`.
    pub fn anomalies_named<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Anomaly> + 'a {
        self.anomalies.iter().filter(move |a| a.kind == kind)
    }

    /// One line for the run summary:
    /// `facts: attempts=5 ok=4 | lost=0 unexpected=0 VALID`.
    pub fn summary(&self) -> String {
        let counts: Vec<String> = self.counts.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let anomalies: Vec<String> = self.anomaly_counts.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("{}: {} | {} {}", self.checker, counts.join(" "), anomalies.join(" "), self.valid)
    }
}

/// The workloads whose checkers this crate provides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Workload {
    Admission,
    Deadlines,
    Replay,
    Facts,
    Seq,
    Turn,
    Scatter,
    Messages,
    Record,
    Wake,
}

impl Workload {
    pub const ALL: [Workload; 10] = [
        Workload::Admission,
        Workload::Deadlines,
        Workload::Replay,
        Workload::Facts,
        Workload::Seq,
        Workload::Turn,
        Workload::Scatter,
        Workload::Messages,
        Workload::Record,
        Workload::Wake,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Admission => "admission",
            Workload::Deadlines => "deadlines",
            Workload::Replay => "replay",
            Workload::Facts => "facts",
            Workload::Seq => "seq",
            Workload::Turn => "turn",
            Workload::Scatter => "scatter",
            Workload::Messages => "messages",
            Workload::Record => "record-append",
            Workload::Wake => "wake",
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Workload {
    type Err = String;
    fn from_str(s: &str) -> Result<Workload, String> {
        Workload::ALL.into_iter().find(|w| w.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Workload::ALL.iter().map(|w| w.name()).collect();
            format!("unknown workload `{s}` (one of: {})", names.join(", "))
        })
    }
}

/// Options for every checker, for [`check_workload`].
#[derive(Clone, Debug, Default)]
pub struct CheckOptions {
    pub admission: admission::Options,
    pub deadlines: deadlines::Options,
    pub replay: replay::Options,
    pub facts: facts::Options,
    pub seq: seq::Options,
    pub turn: turn::Options,
    pub scatter: scatter::Options,
    pub messages: messages::Options,
    pub record: record::Options,
    pub wake: wake::Options,
    pub no_success: no_success::Options,
}

/// All verdicts for one run, the workload's checker plus the always-on ones.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub workload: String,
    pub valid: Validity,
    pub verdicts: Vec<Verdict>,
}

impl Report {
    pub fn from_verdicts(workload: &str, verdicts: Vec<Verdict>) -> Report {
        let valid = verdicts.iter().fold(Validity::Valid, |v, x| v.and(x.valid));
        Report { workload: workload.to_owned(), valid, verdicts }
    }

    /// One summary line per verdict.
    pub fn summary(&self) -> String {
        self.verdicts.iter().map(|v| v.summary()).collect::<Vec<_>>().join("\n")
    }
}

/// Runs the workload's checker and the always-on [`no_success`] check over a history.
pub fn check_workload(workload: Workload, history: &History, opts: &CheckOptions) -> Report {
    let main = match workload {
        Workload::Admission => admission::check(history, &opts.admission),
        Workload::Deadlines => deadlines::check(history, &opts.deadlines),
        Workload::Replay => replay::check(history, &opts.replay),
        Workload::Facts => facts::check(history, &opts.facts),
        Workload::Seq => seq::check(history, &opts.seq),
        Workload::Turn => turn::check(history, &opts.turn),
        Workload::Scatter => scatter::check(history, &opts.scatter),
        Workload::Messages => messages::check(history, &opts.messages),
        Workload::Record => record::check(history, &opts.record),
        Workload::Wake => wake::check(history, &opts.wake),
    };
    let mut no_success = opts.no_success.clone();
    if workload == Workload::Wake {
        // Writes that succeed prove nothing about webhooks: at least one delivery must arrive.
        no_success.require_ok.push(wake::DELIVER.to_string());
    }
    let always = no_success::check(history, &no_success);
    Report::from_verdicts(workload.name(), vec![main, always])
}

/// Helpers for reading the JSON values workloads put in ops.
pub(crate) mod val {
    use serde_json::Value;

    /// A string field.
    pub(crate) fn str_field<'v>(v: &'v Value, name: &str) -> Option<&'v str> {
        v.get(name).and_then(Value::as_str)
    }

    /// An unsigned integer field.
    pub(crate) fn u64_field(v: &Value, name: &str) -> Option<u64> {
        v.get(name).and_then(Value::as_u64)
    }

    /// A scalar used as an identity: a string as is, a number in decimal.
    pub(crate) fn ident(v: &Value) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }

    /// An identity field (string or number).
    pub(crate) fn ident_field(v: &Value, name: &str) -> Option<String> {
        v.get(name).and_then(ident)
    }

    /// A list of identities.
    pub(crate) fn ident_list(v: &Value, name: &str) -> Option<Vec<String>> {
        v.get(name)?.as_array()?.iter().map(ident).collect()
    }

    /// p-quantile (0..=1) of sorted values, nearest rank.
    pub(crate) fn quantile(sorted: &[u64], p: f64) -> u64 {
        if sorted.is_empty() {
            return 0;
        }
        let rank = (p * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1]
    }
}
