//! The live history of a run: every op gets its index and time here, in the order the harness saw
//! it, and is streamed to `history.jsonl` as it happens (a crashed run still leaves its history).

use crate::history::{History, Op, OpType, Process, write_op};
use anyhow::Result;
use serde_json::Value;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

#[derive(Debug)]
struct Inner {
    ops: Vec<Op>,
    out: BufWriter<std::fs::File>,
}

/// Appends ops to the history; cheap to clone, shared by every process and the nemesis.
#[derive(Debug, Clone)]
pub struct Recorder {
    inner: Arc<Mutex<Inner>>,
    start: Instant,
    /// The wall clock at `start`, in µs since the Unix epoch (maps server times to the timeline).
    start_wall_micros: i64,
}

/// What a completion carries besides its type.
#[derive(Debug, Clone, Default)]
pub struct Completion {
    pub value: Value,
    pub error: Option<String>,
    pub message: Option<String>,
    pub definite: Option<bool>,
    pub receipt: Option<Value>,
}

impl Recorder {
    pub fn create(path: &Path) -> Result<Recorder> {
        let out = BufWriter::new(std::fs::File::create(path)?);
        let start_wall_micros = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0);
        Ok(Recorder {
            inner: Arc::new(Mutex::new(Inner { ops: Vec::new(), out })),
            start: Instant::now(),
            start_wall_micros,
        })
    }

    /// Nanoseconds since the run started.
    pub fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// A server wall-clock time (µs since the epoch) on the history's timeline (ns since start),
    /// by the harness's own unskewed clock; 0 for times before the run.
    pub fn timeline(&self, wall_micros: i64) -> u64 {
        (wall_micros - self.start_wall_micros).max(0) as u64 * 1000
    }

    fn push(&self, mut op: Op) -> u64 {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        op.index = g.ops.len() as u64;
        op.time = self.now();
        let _ = write_op(&mut g.out, &op);
        let index = op.index;
        g.ops.push(op);
        index
    }

    /// Records an invocation.
    pub fn invoke(&self, process: u64, f: &str, value: Value, node: u64, idem: Option<&str>) -> u64 {
        let mut op = Op::new(process, OpType::Invoke, f, value);
        op.node(format!("n{node}"));
        if let Some(k) = idem {
            op.idem(k);
        }
        self.push(op)
    }

    /// Records the completion of `process`'s open op.
    pub fn complete(&self, process: u64, kind: OpType, f: &str, node: u64, idem: Option<&str>, c: Completion) -> u64 {
        let mut op = Op::new(process, kind, f, c.value);
        op.node(format!("n{node}"));
        if let Some(k) = idem {
            op.idem(k);
        }
        op.error = c.error;
        op.message = c.message;
        op.definite = c.definite;
        op.receipt = c.receipt;
        self.push(op)
    }

    /// Records a nemesis event (`start-kill`, `stop-partition`, ...).
    pub fn nemesis(&self, f: &str, value: Value) -> u64 {
        self.push(Op::new(Process::Nemesis, OpType::Info, f, value))
    }

    /// Flushes the file and returns the history.
    pub fn finish(&self) -> Result<History> {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.out.flush()?;
        Ok(History::new(g.ops.clone())?)
    }

    /// Counts of client completions by type: (attempted, ok, fail, info).
    pub fn counts(&self) -> (u64, u64, u64, u64) {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (mut a, mut ok, mut fail, mut info) = (0, 0, 0, 0);
        for op in g.ops.iter().filter(|o| o.is_client()) {
            match op.kind {
                OpType::Invoke => a += 1,
                OpType::Ok => ok += 1,
                OpType::Fail => fail += 1,
                OpType::Info => info += 1,
            }
        }
        (a, ok, fail, info + a.saturating_sub(ok + fail + info))
    }
}
