//! Workloads: what the clients do during a run, and which checker judges it.
//!
//! A workload sets up its objects through the SDK (with retries, before any fault), then its
//! processes each run one op at a time (`step`) until the time limit, and at the end, after every
//! fault is healed and the nodes converged, it reads the final state from every node
//! (`final_reads`). Its ops follow the history schema of its checker (`crate::checker::<name>`).

pub mod admission;
pub mod deadlines;
pub mod facts;
pub mod messages;
pub mod record;
pub mod replay;
pub mod scatter;
pub mod seq;
pub mod turn;

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
        other => anyhow::bail!(
            "unknown workload {other:?}; known: admission, deadlines, replay, facts, big-entries, seq, turn, scatter, messages, record-append"
        ),
    })
}

/// A stale-read client of one node (answers from that node's own state: after convergence, what
/// the node itself holds).
pub async fn node_reader(endpoint: &str, key: Option<String>) -> Result<Client> {
    Ok(client::connect(endpoint, key).await?.stale())
}

/// Reads every entry of `thread` from one node's own state, with its content (the fact's id):
/// `[(seq, content, author)]`.
pub async fn thread_entries(reader: &Client, thread: &str) -> Result<Vec<(u64, String, String)>> {
    let entries = reader.timeline_all(thread, 100_000).await?;
    let mut out = Vec::with_capacity(entries.len());
    for e in entries {
        let view =
            reader.get_entry(kungfu_client::pb::GetEntryRequest { thread: thread.to_string(), entry: e.seq }).await?;
        let body = view.content.map(|c| String::from_utf8_lossy(&c.body).into_owned()).unwrap_or_default();
        out.push((e.seq, body, e.author));
    }
    Ok(out)
}

/// The content of one mailbox item: inline, else read with `GetEntry` (omitted past the page's
/// byte budget). Empty when the reader may not read it.
pub async fn item_body(reader: &Client, thread: &str, item: &kungfu_client::pb::MailItem) -> Result<String, Error> {
    if let (Some(c), false) = (&item.content, item.content_omitted) {
        return Ok(String::from_utf8_lossy(&c.body).into_owned());
    }
    let seq = item.entry.as_ref().map(|e| e.seq).unwrap_or_default();
    let view = reader.get_entry(kungfu_client::pb::GetEntryRequest { thread: thread.to_string(), entry: seq }).await?;
    Ok(view.content.map(|c| String::from_utf8_lossy(&c.body).into_owned()).unwrap_or_default())
}

/// Creates a thread as `lead` (setup client, with retries) whose live grant admits speakers;
/// returns (thread id, grant secret).
pub async fn open_thread(env: &Env, lead: &str, subject: &str) -> Result<(String, String)> {
    let t = env
        .setup
        .with_key(lead.to_string())
        .create_thread(
            kungfu_client::pb::CreateThreadRequest {
                subject: kungfu_client::text(subject),
                grant: Some(kungfu_client::pb::GrantSpec { role: kungfu_client::pb::Role::Speaker as i32 }),
                ..Default::default()
            },
            None,
        )
        .await?;
    let secret = t.value.grant_secret.clone();
    if secret.is_empty() {
        anyhow::bail!("the thread's grant secret was lost to a retried creation; run again");
    }
    match t.value.receipt.and_then(|r| r.result) {
        Some(kungfu_client::pb::receipt::Result::ThreadCreated(c)) => Ok((c.thread, secret)),
        other => anyhow::bail!("thread creation answered {other:?}"),
    }
}

/// Registers the members of a shared-thread workload and admits them with `secret`: enough that,
/// with `processes` processes over the nodes, every agent acts through several nodes (process slot
/// `s` acts as agent `s % agents`); at least two. Returns (id, key) per member.
pub async fn join_members(env: &Env, processes: usize, secret: &str, what: &str) -> Result<Vec<(String, String)>> {
    let nodes = env.endpoints.len().max(1);
    let mut members = Vec::new();
    for _ in 0..(processes / nodes).max(2) {
        let (id, key) = register(env).await?;
        env.setup
            .with_key(key.clone())
            .join(kungfu_client::pb::JoinRequest { grant_secret: secret.to_string(), ..Default::default() }, None)
            .await
            .map_err(|e| anyhow::anyhow!("joining the {what} thread: {e}"))?;
        members.push((id, key));
    }
    Ok(members)
}

/// Registers an agent through the setup client; returns (id, key).
pub async fn register(env: &Env) -> Result<(String, String)> {
    let r = env.setup.register(None).await?;
    Ok((r.agent, r.agent_key))
}
