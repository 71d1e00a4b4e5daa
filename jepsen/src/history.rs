//! The history of a test run, in Jepsen's operation model.
//!
//! A history is the ordered list of everything the harness's clients and nemesis did. Each logical
//! client *process* is single-threaded: it invokes one operation, waits, and records how it
//! completed (`jepsen-io/history`):
//!
//! - `invoke`: the request left the client.
//! - `ok`: the operation **took effect**, exactly once.
//! - `fail`: the operation certainly **had no effect** (a rejection computed by the state machine,
//!   a validation error, a connection refused before anything was sent).
//! - `info`: the outcome is **unknown**: it may have taken effect, at any moment after its
//!   invocation, even after the client gave up, or never. A timeout is `info`, never `fail`.
//!
//! An invocation with no completion at the end of the history is indeterminate too, exactly like
//! `info`. Checkers must accept both worlds for indeterminate operations: counting them as failed
//! raises false "phantom" alarms, counting them as successful hides real losses.
//!
//! Order is the order of the history (the `index`), not the `time` field: the harness appends ops
//! under one lock, so "A completed before B was invoked" is `A.completion.index < B.invoke.index`.
//! `time` (nanoseconds since the test started, monotonic) is kept for latency and deadline
//! arithmetic.
//!
//! On disk a history is JSON lines, one [`Op`] per line (plan §6.6); the fields map 1:1 onto
//! Jepsen's op maps, so a converter to EDN could feed Elle or Knossos.
//!
//! ```json
//! {"index":812,"time":3291485317,"process":7,"type":"invoke","f":"adopt","value":{"task":"t3","agent":"a19"},"node":"n2","idem":"p7-0813"}
//! {"index":815,"time":3301227101,"process":7,"type":"info","f":"adopt","value":{"task":"t3","agent":"a19"},"node":"n2","error":"TIMEOUT","definite":false}
//! {"index":816,"time":3301230044,"process":"nemesis","type":"info","f":"start-partition","value":{"grudge":{"n1":["n2","n3"]}}}
//! ```
//!
//! Value convention shared by the workloads: the invocation's `value` holds the request; an `ok`
//! completion's `value` holds the request's fields plus whatever the system returned (the `seq`
//! assigned, the set read, ...). A `fail` or `info` completion's value is informative only.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::Path;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// The `f` of a read that runs after the final heal and quiescence, once per node. Checkers apply
/// their "after recovery" rules (nothing lost, all nodes agree) to these reads.
pub const FINAL_READ: &str = "final-read";
/// The `f` of an ordinary read during the run.
pub const READ: &str = "read";

/// Who performed an operation: a logical client process, or the nemesis.
///
/// Serialized as Jepsen does: an integer for a client, the string `"nemesis"` for the nemesis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Process {
    Client(u64),
    Nemesis,
}

impl fmt::Display for Process {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Process::Client(p) => write!(f, "{p}"),
            Process::Nemesis => f.write_str("nemesis"),
        }
    }
}

impl From<u64> for Process {
    fn from(p: u64) -> Process {
        Process::Client(p)
    }
}

impl Serialize for Process {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Process::Client(p) => s.serialize_u64(*p),
            Process::Nemesis => s.serialize_str("nemesis"),
        }
    }
}

impl<'de> Deserialize<'de> for Process {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Process, D::Error> {
        match Value::deserialize(d)? {
            Value::Number(n) => n
                .as_u64()
                .map(Process::Client)
                .ok_or_else(|| D::Error::custom("process must be a non-negative integer")),
            Value::String(s) if s == "nemesis" => Ok(Process::Nemesis),
            other => Err(D::Error::custom(format!("process must be an integer or \"nemesis\", got {other}"))),
        }
    }
}

/// The type of an op: an invocation or one of the three completions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpType {
    Invoke,
    Ok,
    Fail,
    Info,
}

impl fmt::Display for OpType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpType::Invoke => "invoke",
            OpType::Ok => "ok",
            OpType::Fail => "fail",
            OpType::Info => "info",
        })
    }
}

/// One line of the history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Op {
    /// Position in the history; strictly increasing. Checkers name ops by this index.
    pub index: u64,
    /// Nanoseconds since the test started (monotonic clock of the harness).
    pub time: u64,
    pub process: Process,
    #[serde(rename = "type")]
    pub kind: OpType,
    /// The operation's function: `adopt`, `append`, `read`, `final-read`, `start-partition`, ...
    pub f: String,
    /// Request (on invoke) or request plus result (on ok); see the module docs.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub value: Value,
    /// The node the process talks to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The object the op addresses, when it addresses one (informative; workloads keep the
    /// object in `value` too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The client-generated idempotency key of a mutating op (L3). Retries reuse it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idem: Option<String>,
    /// On a `fail` or `info`: the stable error code (`ADOPTION_LIMIT_REACHED`, `TIMEOUT`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A human-readable error message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The server's `definite` flag for an error, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definite: Option<bool>,
    /// The receipt a mutating op returned (L3); compared byte for byte by the replay checker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<Value>,
    /// The commit log id the server reported for a write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_id: Option<Value>,
    /// The log index (or revision) a read was served at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<u64>,
    /// The server's wall clock in the response, converted to the history's timeline when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_time: Option<u64>,
    /// Any other field, kept so that reading and writing a history loses nothing.
    #[serde(flatten)]
    pub extra: BTreeMap<String, Value>,
}

impl Op {
    /// A bare op; `index` and `time` are 0 until a [`HistoryBuilder`] (or the harness) sets them.
    pub fn new(process: impl Into<Process>, kind: OpType, f: impl Into<String>, value: Value) -> Op {
        Op {
            index: 0,
            time: 0,
            process: process.into(),
            kind,
            f: f.into(),
            value,
            node: None,
            key: None,
            idem: None,
            error: None,
            message: None,
            definite: None,
            receipt: None,
            log_id: None,
            as_of: None,
            server_time: None,
            extra: BTreeMap::new(),
        }
    }

    /// Sets `node`.
    pub fn node(&mut self, node: impl Into<String>) -> &mut Op {
        self.node = Some(node.into());
        self
    }

    /// Sets `idem`.
    pub fn idem(&mut self, key: impl Into<String>) -> &mut Op {
        self.idem = Some(key.into());
        self
    }

    /// Sets `receipt`.
    pub fn receipt(&mut self, receipt: Value) -> &mut Op {
        self.receipt = Some(receipt);
        self
    }

    /// Sets `key`.
    pub fn key(&mut self, key: impl Into<String>) -> &mut Op {
        self.key = Some(key.into());
        self
    }

    pub fn is_client(&self) -> bool {
        matches!(self.process, Process::Client(_))
    }
}

/// Why a list of ops is not a well-formed history.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("reading the history: {0}")]
    Io(#[from] io::Error),
    #[error("line {line}: {source}")]
    Parse { line: usize, source: serde_json::Error },
    #[error("op index {index} follows index {previous}: indexes must strictly increase")]
    IndexOrder { index: u64, previous: u64 },
    #[error("op {index}: process {process} invokes while its op {open} is still open")]
    DoubleInvoke { process: Process, index: u64, open: u64 },
    #[error("op {index}: process {process} completes an op it never invoked")]
    OrphanCompletion { process: Process, index: u64 },
    #[error("op {index}: completion f `{completion}` does not match invocation {invoke_index} f `{invoke}`")]
    FunctionMismatch { index: u64, invoke_index: u64, invoke: String, completion: String },
}

/// A validated history: indexes strictly increase, and each client process alternates between
/// an invocation and its completion (the last invocation may stay open).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    ops: Vec<Op>,
    /// For each client op: the position (in `ops`) of its partner (invoke ↔ completion).
    partner: Vec<Option<usize>>,
}

impl History {
    /// Validates `ops` and pairs invocations with completions.
    pub fn new(ops: Vec<Op>) -> Result<History, HistoryError> {
        let mut partner = vec![None; ops.len()];
        let mut open: HashMap<Process, usize> = HashMap::new();
        for (pos, op) in ops.iter().enumerate() {
            if pos > 0 && op.index <= ops[pos - 1].index {
                return Err(HistoryError::IndexOrder { index: op.index, previous: ops[pos - 1].index });
            }
            if op.process == Process::Nemesis {
                continue;
            }
            match op.kind {
                OpType::Invoke => {
                    if let Some(&o) = open.get(&op.process) {
                        return Err(HistoryError::DoubleInvoke {
                            process: op.process,
                            index: op.index,
                            open: ops[o].index,
                        });
                    }
                    open.insert(op.process, pos);
                }
                OpType::Ok | OpType::Fail | OpType::Info => {
                    let Some(inv) = open.remove(&op.process) else {
                        return Err(HistoryError::OrphanCompletion { process: op.process, index: op.index });
                    };
                    if ops[inv].f != op.f {
                        return Err(HistoryError::FunctionMismatch {
                            index: op.index,
                            invoke_index: ops[inv].index,
                            invoke: ops[inv].f.clone(),
                            completion: op.f.clone(),
                        });
                    }
                    partner[inv] = Some(pos);
                    partner[pos] = Some(inv);
                }
            }
        }
        Ok(History { ops, partner })
    }

    /// Every op, in history order.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    pub fn len(&self) -> usize {
        self.ops.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The op with this index.
    pub fn get(&self, index: u64) -> Option<&Op> {
        self.ops.binary_search_by_key(&index, |op| op.index).ok().map(|pos| &self.ops[pos])
    }

    /// Every client operation, invocation paired with its completion, in invocation order.
    pub fn pairs(&self) -> Vec<Pair<'_>> {
        self.ops
            .iter()
            .enumerate()
            .filter(|(_, op)| op.is_client() && op.kind == OpType::Invoke)
            .map(|(pos, op)| Pair { invoke: op, completion: self.partner[pos].map(|c| &self.ops[c]) })
            .collect()
    }

    /// The client operations with this `f`, in invocation order.
    pub fn pairs_of<'h>(&'h self, f: &str) -> Vec<Pair<'h>> {
        self.pairs().into_iter().filter(|p| p.f() == f).collect()
    }

    /// The nemesis's ops (fault starts and stops), in order.
    pub fn nemesis_ops(&self) -> impl Iterator<Item = &Op> {
        self.ops.iter().filter(|op| op.process == Process::Nemesis)
    }

    /// Reads a JSON-lines history. Blank lines are skipped.
    pub fn read_jsonl(reader: impl BufRead) -> Result<History, HistoryError> {
        let mut ops = Vec::new();
        for (i, line) in reader.lines().enumerate() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let op = serde_json::from_str(&line).map_err(|source| HistoryError::Parse { line: i + 1, source })?;
            ops.push(op);
        }
        History::new(ops)
    }

    /// Parses a JSON-lines history from a string.
    pub fn from_jsonl_str(s: &str) -> Result<History, HistoryError> {
        History::read_jsonl(s.as_bytes())
    }

    /// Loads a `history.jsonl` file.
    pub fn load(path: impl AsRef<Path>) -> Result<History, HistoryError> {
        History::read_jsonl(BufReader::new(File::open(path)?))
    }

    /// Writes the history as JSON lines.
    pub fn write_jsonl(&self, mut writer: impl Write) -> io::Result<()> {
        for op in &self.ops {
            write_op(&mut writer, op)?;
        }
        writer.flush()
    }

    /// The history as one JSON-lines string.
    pub fn to_jsonl_string(&self) -> String {
        let mut out = Vec::new();
        // Writing to a Vec cannot fail.
        let _ = self.write_jsonl(&mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    /// Saves the history to a file.
    pub fn save(&self, path: impl AsRef<Path>) -> io::Result<()> {
        self.write_jsonl(BufWriter::new(File::create(path)?))
    }
}

/// Writes one op as one JSON line (for a harness that streams its history to disk).
pub fn write_op(mut writer: impl Write, op: &Op) -> io::Result<()> {
    serde_json::to_writer(&mut writer, op)?;
    writer.write_all(b"\n")
}

/// How a client operation ended, from a checker's point of view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Took effect, exactly once.
    Ok,
    /// Certainly took no effect.
    Fail,
    /// Unknown: an `info` completion, or no completion at all. May have taken effect at any
    /// moment after its invocation, or never.
    Indeterminate,
}

/// A client operation: its invocation and, if one was recorded, its completion.
#[derive(Clone, Copy, Debug)]
pub struct Pair<'h> {
    pub invoke: &'h Op,
    pub completion: Option<&'h Op>,
}

impl<'h> Pair<'h> {
    pub fn outcome(&self) -> Outcome {
        match self.completion.map(|c| c.kind) {
            Some(OpType::Ok) => Outcome::Ok,
            Some(OpType::Fail) => Outcome::Fail,
            _ => Outcome::Indeterminate,
        }
    }

    pub fn is_ok(&self) -> bool {
        self.outcome() == Outcome::Ok
    }

    pub fn is_fail(&self) -> bool {
        self.outcome() == Outcome::Fail
    }

    /// An `info` completion or no completion: never to be treated as a failure.
    pub fn is_indeterminate(&self) -> bool {
        self.outcome() == Outcome::Indeterminate
    }

    /// Ok or indeterminate: the op may have taken effect.
    pub fn may_have_happened(&self) -> bool {
        !self.is_fail()
    }

    pub fn f(&self) -> &'h str {
        &self.invoke.f
    }

    pub fn process(&self) -> Process {
        self.invoke.process
    }

    /// History index of the invocation.
    pub fn invoke_index(&self) -> u64 {
        self.invoke.index
    }

    /// History index of the completion, whatever its type.
    pub fn complete_index(&self) -> Option<u64> {
        self.completion.map(|c| c.index)
    }

    /// History index before which the op's effect (or non-effect) was settled: the completion
    /// of an `ok` or `fail`. `None` for an indeterminate op, whose effect may come at any time.
    pub fn settled_index(&self) -> Option<u64> {
        match self.outcome() {
            Outcome::Indeterminate => None,
            _ => self.complete_index(),
        }
    }

    /// Real-time order: this op is determinate and completed before `other` was invoked.
    pub fn precedes(&self, other: &Pair<'_>) -> bool {
        self.settled_index().is_some_and(|c| c < other.invoke_index())
    }

    /// The invocation's value: the request.
    pub fn request(&self) -> &'h Value {
        &self.invoke.value
    }

    /// The value of an `ok` completion: the request plus the result.
    pub fn response(&self) -> Option<&'h Value> {
        self.completion.filter(|c| c.kind == OpType::Ok).map(|c| &c.value)
    }

    /// The completion's error code, if any.
    pub fn error(&self) -> Option<&'h str> {
        self.completion.and_then(|c| c.error.as_deref())
    }

    /// True for a `fail` completion carrying this error code.
    pub fn failed_with(&self, code: &str) -> bool {
        self.is_fail() && self.error() == Some(code)
    }

    /// The node the op went to (the invocation's, else the completion's).
    pub fn node(&self) -> Option<&'h str> {
        self.invoke.node.as_deref().or_else(|| self.completion.and_then(|c| c.node.as_deref()))
    }

    /// The idempotency key (the invocation's, else the completion's).
    pub fn idem(&self) -> Option<&'h str> {
        self.invoke.idem.as_deref().or_else(|| self.completion.and_then(|c| c.idem.as_deref()))
    }

    /// Invocation time, ns since the test started.
    pub fn invoke_time(&self) -> u64 {
        self.invoke.time
    }

    /// Completion time, ns since the test started.
    pub fn complete_time(&self) -> Option<u64> {
        self.completion.map(|c| c.time)
    }

    /// The history indexes of both halves, for anomaly reports.
    pub fn indexes(&self) -> Vec<u64> {
        let mut v = vec![self.invoke.index];
        v.extend(self.complete_index());
        v
    }
}

/// Builds histories by hand (checker tests) or from a harness that keeps its own clock.
///
/// Indexes are assigned in order from 0. Each op's time is the builder's clock, which then
/// advances by `tick` (1 ms by default); [`HistoryBuilder::at`] sets the clock explicitly.
/// Completions take their `f` from the process's open invocation.
#[derive(Debug)]
pub struct HistoryBuilder {
    ops: Vec<Op>,
    clock: u64,
    tick: u64,
    open: HashMap<Process, String>,
    node: Option<String>,
}

impl Default for HistoryBuilder {
    fn default() -> Self {
        HistoryBuilder::new()
    }
}

impl HistoryBuilder {
    pub fn new() -> HistoryBuilder {
        HistoryBuilder { ops: Vec::new(), clock: 0, tick: 1_000_000, open: HashMap::new(), node: None }
    }

    /// Sets the clock (ns) for the next op.
    pub fn at(&mut self, time_ns: u64) -> &mut HistoryBuilder {
        self.clock = time_ns;
        self
    }

    /// Sets how far the clock advances after each op.
    pub fn tick(&mut self, tick_ns: u64) -> &mut HistoryBuilder {
        self.tick = tick_ns;
        self
    }

    /// The node stamped on every following op (until changed).
    pub fn on_node(&mut self, node: Option<&str>) -> &mut HistoryBuilder {
        self.node = node.map(str::to_owned);
        self
    }

    /// The clock value the next op will get.
    pub fn now(&self) -> u64 {
        self.clock
    }

    /// Appends a prepared op, assigning its index and time.
    pub fn push(&mut self, mut op: Op) -> &mut Op {
        op.index = self.ops.len() as u64;
        op.time = self.clock;
        if op.node.is_none() && op.is_client() {
            op.node.clone_from(&self.node);
        }
        self.clock += self.tick;
        self.ops.push(op);
        let last = self.ops.len() - 1;
        &mut self.ops[last]
    }

    /// Process `p` invokes `f` with `value`.
    pub fn invoke(&mut self, p: u64, f: &str, value: Value) -> &mut Op {
        self.open.insert(Process::Client(p), f.to_owned());
        self.push(Op::new(p, OpType::Invoke, f, value))
    }

    fn complete(&mut self, p: u64, kind: OpType, value: Value) -> &mut Op {
        let f = self.open.remove(&Process::Client(p)).unwrap_or_else(|| "?".to_owned());
        self.push(Op::new(p, kind, f, value))
    }

    /// Process `p`'s open op completes `ok` with `value` (request plus result).
    pub fn ok(&mut self, p: u64, value: Value) -> &mut Op {
        self.complete(p, OpType::Ok, value)
    }

    /// Process `p`'s open op fails with error `code`.
    pub fn fail(&mut self, p: u64, code: &str) -> &mut Op {
        let op = self.complete(p, OpType::Fail, Value::Null);
        op.error = Some(code.to_owned());
        op.definite = Some(true);
        op
    }

    /// Process `p`'s open op ends indeterminate (`info`), e.g. after a timeout.
    pub fn info(&mut self, p: u64, code: &str) -> &mut Op {
        let op = self.complete(p, OpType::Info, Value::Null);
        op.error = Some(code.to_owned());
        op.definite = Some(false);
        op
    }

    /// A nemesis op (`info`, as Jepsen records them).
    pub fn nemesis(&mut self, f: &str, value: Value) -> &mut Op {
        self.push(Op::new(Process::Nemesis, OpType::Info, f, value))
    }

    /// The ops so far.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// Validates and returns the history.
    pub fn build(&self) -> Result<History, HistoryError> {
        History::new(self.ops.clone())
    }
}
