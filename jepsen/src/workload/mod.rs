//! Workloads: what the clients do during a run, and which checker judges it.
//!
//! A workload sets up its objects through the SDK (with retries, before any fault), then its
//! processes each run one op at a time (`step`) until the time limit, and at the end, after every
//! fault is healed and the nodes converged, it reads the final state from every node
//! (`final_reads`). Its ops follow the history schema of its checker (`crate::checker::<name>`).
//!
//! [`common`] holds what the workloads share: setup helpers (agents, threads, readers), the
//! content every member may read, and how a final read is recorded.

pub mod admission;
pub mod common;
pub mod deadlines;
pub mod facts;
pub mod messages;
pub mod record;
pub mod replay;
pub mod scatter;
pub mod seq;
pub mod turn;
pub mod wake;

pub use common::{item_body, join_members, node_reader, open_thread, register, thread_entries};

use crate::checker::Workload as Kind;
use crate::client;
use crate::history::OpType;
use crate::recorder::{Completion, Recorder};
use anyhow::Result;
use futures::future::BoxFuture;
use kungfu_client::{Client, Error};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;
use std::collections::BTreeMap;

/// What every workload step sees.
#[derive(Debug, Clone)]
pub struct Env {
    pub rec: Recorder,
    /// API endpoint of each node.
    pub endpoints: BTreeMap<u64, String>,
    /// A client of every node with SDK retries (setup only).
    pub setup: Client,
    /// The run's seed.
    pub seed: u64,
    /// How long the processes run (from the end of setup).
    pub time_limit: std::time::Duration,
    /// The harness's own address as the nodes see it (netns: 10.88.<slot>.254 on the bridge;
    /// loopback: 127.0.0.1), for a workload that serves something the nodes call (`wake`).
    pub harness_ip: std::net::IpAddr,
}

/// One logical process: bound to one node, one op at a time.
#[derive(Debug)]
pub struct Proc {
    /// The history's process id. After an `info` the harness moves the process to a fresh id
    /// (Jepsen's convention: the old one may still have an op in flight).
    pub id: u64,
    /// How much to add to `id` when it is retired.
    pub stride: u64,
    pub node: u64,
    pub rng: ChaCha8Rng,
    /// Ops this process completed.
    pub done: u64,
    /// The process's client (its node, its agent), made by the workload on first use.
    pub client: Option<Client>,
}

impl Proc {
    pub fn endpoint<'a>(&self, env: &'a Env) -> &'a str {
        env.endpoints.get(&self.node).map(String::as_str).unwrap_or("")
    }

    /// Records the outcome of a write invoked as `f`: ok with `ok_value`, or the failure table of
    /// [`client`]. Retires the process id after an `info`.
    pub fn finish_write<T>(
        &mut self,
        env: &Env,
        f: &str,
        idem: Option<&str>,
        result: Result<T, Error>,
        ok: impl FnOnce(T) -> Completion,
    ) -> OpType {
        let (kind, c) = match result {
            Ok(v) => (OpType::Ok, ok(v)),
            Err(e) => client::write_failure(&e),
        };
        env.rec.complete(self.id, kind, f, self.node, idem, c);
        self.after(kind);
        kind
    }

    /// Records the outcome of a read invoked as `f`.
    pub fn finish_read<T>(
        &mut self,
        env: &Env,
        f: &str,
        result: Result<T, Error>,
        ok: impl FnOnce(T) -> Value,
    ) -> OpType {
        let (kind, c) = match result {
            Ok(v) => (OpType::Ok, Completion { value: ok(v), ..Completion::default() }),
            Err(e) => client::read_failure(&e),
        };
        env.rec.complete(self.id, kind, f, self.node, None, c);
        self.after(kind);
        kind
    }

    fn after(&mut self, kind: OpType) {
        self.done += 1;
        if kind == OpType::Info {
            self.id += self.stride;
        }
    }
}

/// A workload.
pub trait Workload: Send + Sync + std::fmt::Debug {
    /// Its checker.
    fn kind(&self) -> Kind;
    /// Settings appended to every node's config (TOML), for a workload whose feature the nodes
    /// must enable; none by default.
    fn node_settings(&self) -> String {
        String::new()
    }
    /// Creates its agents and objects (before any fault).
    fn setup<'a>(&'a mut self, env: &'a Env, processes: usize) -> BoxFuture<'a, Result<()>>;
    /// One op of process `p`.
    fn step<'a>(&'a self, env: &'a Env, p: &'a mut Proc) -> BoxFuture<'a, ()>;
    /// How long to wait after the final heal before the final reads (deadlines still running).
    fn quiesce(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
    /// The final reads, one per node, after heal and convergence; `next_process` is a fresh id.
    fn final_reads<'a>(&'a self, env: &'a Env, next_process: u64) -> BoxFuture<'a, Result<()>>;
}

/// The workload named `name`.
pub fn by_name(name: &str) -> Result<Box<dyn Workload>> {
    Ok(match name {
        "facts" => Box::new(facts::Facts::default()),
        "big-entries" => Box::new(facts::Facts::big_entries()),
        "seq" => Box::new(seq::Seq::default()),
        "replay" => Box::new(replay::Replay::default()),
        "admission" => Box::new(admission::Admission::default()),
        "deadlines" => Box::new(deadlines::Deadlines::default()),
        "turn" => Box::new(turn::Turn::default()),
        "scatter" => Box::new(scatter::Scatter::default()),
        "messages" => Box::new(messages::Messages::default()),
        "record-append" => Box::new(record::RecordAppend::default()),
        "wake" => Box::new(wake::Wake::default()),
        other => anyhow::bail!(
            "unknown workload {other:?}; known: admission, deadlines, replay, facts, big-entries, seq, turn, scatter, messages, record-append, wake"
        ),
    })
}
