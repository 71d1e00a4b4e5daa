//! `kungfu bench write`: writers posting entries as fast as the cluster answers, through the public
//! API, over a fixed number of client connections.
//!
//! Each writer is one agent with one post in flight at a time: content of `--entry-bytes` bytes
//! (a new Memory version and an entry, with their facts, indexes and receipt), asking nobody to
//! respond. With `--shared-thread` every writer posts to one thread (all its writes are serialized
//! by that thread's actor and conflict on its state); otherwise each posts to a thread of its own.
//! Only successes count towards operations and latency; each failed write is counted by its code.
//! A write's latency is from sending it to its answer, on the client: what an agent waits. The
//! measured clients do not retry (a retry would hide a failure inside a long latency).

use super::cluster::{Cluster, ELECT_BOUND};
use super::stats::{Summary, ms_text};
use super::{bounded, progress};
use crate::cli::BenchCluster;
use crate::error::CliError;
use kungfu_client::{Client, ClientOptions, Post, pb};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The most members a thread may have (`limits.max_members_per_thread`, 256 by default).
pub const MAX_SHARED_WRITERS: u64 = 256;

/// How long one measured write may take before it counts as failed.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The parameters of a run.
#[derive(Debug, Clone)]
pub struct Params {
    pub writers: u64,
    pub connections: u64,
    pub seconds: u64,
    pub shared_thread: bool,
    pub entry_bytes: u64,
}

/// The figures of a run.
#[derive(Debug)]
pub struct Report {
    params: Params,
    nodes: u16,
    leader: u16,
    ops: usize,
    elapsed_secs: f64,
    latency: Option<Summary>,
    errors: BTreeMap<String, u64>,
}

impl Report {
    fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed_secs.max(1e-9)
    }

    pub fn to_json(&self) -> Value {
        let p = &self.params;
        json!({
            "params": {
                "nodes": self.nodes,
                "writers": p.writers,
                "connections": p.connections,
                "seconds": p.seconds,
                "shared_thread": p.shared_thread,
                "entry_bytes": p.entry_bytes,
            },
            "leader": self.leader,
            "ops": self.ops,
            "elapsed_secs": (self.elapsed_secs * 1000.0).round() / 1000.0,
            "ops_per_sec": self.ops_per_sec().round(),
            "latency_ms": self.latency.map(|s| s.to_json()),
            "errors": self.errors,
            "errors_total": self.errors.values().sum::<u64>(),
        })
    }

    pub fn rows(&self) -> Vec<(&'static str, String)> {
        let mut rows = vec![
            ("ops", self.ops.to_string()),
            ("seconds", format!("{:.2}", self.elapsed_secs)),
            ("ops/s", format!("{:.0}", self.ops_per_sec())),
        ];
        if let Some(s) = &self.latency {
            rows.push(("latency p50 ms", ms_text(s.p50_us)));
            rows.push(("latency p90 ms", ms_text(s.p90_us)));
            rows.push(("latency p99 ms", ms_text(s.p99_us)));
            rows.push(("latency max ms", ms_text(s.max_us)));
        }
        let errors = if self.errors.is_empty() {
            "none".to_string()
        } else {
            self.errors.iter().map(|(code, n)| format!("{code} {n}")).collect::<Vec<_>>().join(", ")
        };
        rows.push(("errors", errors));
        rows
    }
}

/// Registers writer `i` and returns its key.
async fn register(setup: Client) -> Result<(String, Client), CliError> {
    let r = setup.register(None).await?;
    Ok((r.agent_key, r.client))
}

/// Creates a thread as `creator`; with `grant`, also a speaker grant, whose secret is returned.
async fn create_thread(creator: &Client, grant: bool) -> Result<(String, String), CliError> {
    let req = pb::CreateThreadRequest {
        subject: kungfu_client::text("bench write"),
        grant: grant.then_some(pb::GrantSpec { role: pb::Role::Speaker as i32 }),
        ..Default::default()
    };
    let w = creator.create_thread(req, None).await?;
    match w.value.receipt.as_ref().and_then(|r| r.result.as_ref()) {
        Some(pb::receipt::Result::ThreadCreated(t)) => Ok((t.thread.clone(), w.value.grant_secret.clone())),
        other => Err(CliError::other(format!("creating a thread answered {other:?}"))),
    }
}

/// What one writer measured: the latency of each success (µs) and the code of each failure.
type Measured = (Vec<i64>, BTreeMap<String, u64>);

/// Posts to `thread` until `until`, one write at a time.
async fn writer(client: Client, thread: String, body: Vec<u8>, until: Instant) -> Measured {
    let mut latencies = Vec::new();
    let mut errors = BTreeMap::new();
    while Instant::now() < until {
        let post = Post::content(&thread, body.clone()).ask(Vec::<String>::new());
        let sent = Instant::now();
        match client.post(post, None).await {
            Ok(_) => latencies.push(i64::try_from(sent.elapsed().as_micros()).unwrap_or(i64::MAX)),
            Err(e) => {
                *errors.entry(CliError::from(e).code).or_insert(0) += 1;
                // A refusing cluster answers at once: do not spin on it.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    (latencies, errors)
}

/// Runs the benchmark on a fresh cluster.
pub async fn run(opts: &BenchCluster, binary: PathBuf, p: Params) -> Result<Report, CliError> {
    progress(format!("starting {} kungfud node(s)", opts.nodes));
    let started = Instant::now();
    let mut cluster = Cluster::start(opts, binary).await?;
    let leader = cluster.wait_for_leader(ELECT_BOUND).await?;
    progress(format!(
        "{} node(s) up in {:.1} s, node {leader} leads; files in {}",
        opts.nodes,
        started.elapsed().as_secs_f64(),
        cluster.dir().display()
    ));
    let endpoints = cluster.endpoints_from(leader);

    // Setup goes over its own connection, with the SDK's retries; it is not measured.
    let setup = Client::connect(endpoints.clone(), None, ClientOptions::default()).await?;
    progress(format!("registering {} writer(s)", p.writers));
    let writers = bounded(p.writers, 32, |_| register(setup.clone())).await?;
    let threads: Vec<String> = if p.shared_thread {
        let (thread, secret) = create_thread(&writers[0].1, true).await?;
        let join = |i: usize| {
            let client = writers[i].1.clone();
            let secret = secret.clone();
            async move {
                if i > 0 {
                    client.join(pb::JoinRequest { grant_secret: secret, ..Default::default() }, None).await?;
                }
                Ok::<(), CliError>(())
            }
        };
        bounded(p.writers, 32, join).await?;
        vec![thread; writers.len()]
    } else {
        let create = |i: usize| {
            let client = writers[i].1.clone();
            async move { Ok::<String, CliError>(create_thread(&client, false).await?.0) }
        };
        bounded(p.writers, 32, create).await?
    };

    // The measured writers share `connections` connections and never retry.
    let options = ClientOptions { call_timeout: CALL_TIMEOUT, max_retries: 0, ..ClientOptions::default() };
    let mut connections = Vec::new();
    for _ in 0..p.connections {
        connections.push(Client::connect(endpoints.clone(), None, options.clone()).await?);
    }
    let body = vec![b'x'; usize::try_from(p.entry_bytes).unwrap_or(1024)];
    progress(format!(
        "{} writer(s) posting {}-byte entries to {} for {} s over {} connection(s)",
        p.writers,
        p.entry_bytes,
        if p.shared_thread { "one shared thread" } else { "their own threads" },
        p.seconds,
        p.connections
    ));
    let start = Instant::now();
    let until = start + Duration::from_secs(p.seconds);
    let mut tasks = tokio::task::JoinSet::new();
    for (i, ((key, _), thread)) in writers.iter().zip(threads).enumerate() {
        let client = connections[i % connections.len()].with_key(key.clone());
        tasks.spawn(writer(client, thread, body.clone(), until));
    }
    let mut latencies = Vec::new();
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    while let Some(joined) = tasks.join_next().await {
        let (l, e) = joined.map_err(|e| CliError::other(format!("a writer task failed: {e}")))?;
        latencies.extend(l);
        for (code, n) in e {
            *errors.entry(code).or_insert(0) += n;
        }
    }
    let elapsed_secs = start.elapsed().as_secs_f64();
    let ops = latencies.len();
    let latency = Summary::of(&mut latencies);
    // The cluster is dropped here: killed and removed.
    drop(cluster);
    Ok(Report { params: p, nodes: opts.nodes, leader, ops, elapsed_secs, latency, errors })
}
