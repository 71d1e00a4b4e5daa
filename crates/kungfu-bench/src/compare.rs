//! `kungfu bench compare`: Kungfu beside etcd in one run, end to end through each system's public
//! gRPC API, with the same client shape for both.
//!
//! For each cluster size (`--nodes`) the run starts a fresh Kungfu cluster and, when an `etcd`
//! binary is found, a fresh etcd cluster of the same size, both on loopback with their data under
//! the same directory; both stay up for that size, and every point runs Kungfu then etcd, so a
//! drift of the shared machine touches both columns of a row alike. A point is one workload at
//! one writer count: `writers` workers, each with one call in flight, share `--connections`
//! connections to the leader, call for `--warmup` seconds (not counted) and then for `--seconds`
//! (see [`super::load`] for what counts). After each point, the memory of every server process of
//! that system is sampled.
//!
//! The workloads, Kungfu against etcd:
//! - `own`: a post of a `--payload-bytes` entry to the writer's own thread; a put of that many
//!   bytes to the writer's own key.
//! - `shared`: every writer posts to one thread (at most [`MAX_SHARED_WRITERS`], the members
//!   limit); every writer puts to one key.
//! - `read`: a linearizable read of an entry of the reader's own thread (the SDK's default
//!   consistency); a linearizable `Range` of the reader's own key (etcd's default).
//! - `stale`: the same read with `kungfu-consistency: stale`; a serializable `Range`.
//! - `mixed`: an agent's cycle, one operation per call: the lead posts an assignment to its
//!   worker, the worker takes and delivers it, the lead adopts it (the judgment), and the worker
//!   reads its turn. etcd has no equivalent: its cells are `n/a`.

use super::cluster::Cluster;
use super::etcd::{self, EtcdCluster, Found};
use super::load::{Figures, Op, drive, grpc_code_name};
use super::stats::ms_text;
use super::write::{self, CALL_TIMEOUT, MAX_SHARED_WRITERS, Poster};
use super::{bounded, machine, machine_text, progress, server_text, version_of};
use crate::args::{BenchAgainst, BenchCluster, BenchCompare};
use kungfu_cli::error::CliError;
use kungfu_cli::output;
use kungfu_client::{Client, ClientOptions, Post, pb};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;
use tonic::transport::Channel;

/// One workload of the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Workload {
    Own,
    Shared,
    Read,
    Stale,
    Mixed,
}

impl Workload {
    pub const ALL: [Workload; 5] = [Workload::Own, Workload::Shared, Workload::Read, Workload::Stale, Workload::Mixed];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Own => "own",
            Workload::Shared => "shared",
            Workload::Read => "read",
            Workload::Stale => "stale",
            Workload::Mixed => "mixed",
        }
    }

    /// What each system does in one operation, for the parameters line.
    fn describe(self) -> &'static str {
        match self {
            Workload::Own => "post to own thread | put to own key",
            Workload::Shared => "post to one shared thread | put to one key",
            Workload::Read => "linearizable entry read | linearizable Range",
            Workload::Stale => "stale entry read | serializable Range",
            Workload::Mixed => "post, take, deliver, adopt, read turn | n/a",
        }
    }
}

impl FromStr for Workload {
    type Err = String;

    fn from_str(s: &str) -> Result<Workload, String> {
        Workload::ALL.into_iter().find(|w| w.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Workload::ALL.iter().map(|w| w.name()).collect();
            format!("`{s}` is not a workload (one of {})", names.join(", "))
        })
    }
}

/// Parses `--FLAG a,b,c`: every item must parse and pass `check`, none may repeat, and there is
/// at least one. The error names the flag.
pub fn parse_list<T>(flag: &str, text: &str, check: impl Fn(&T) -> Result<(), String>) -> Result<Vec<T>, CliError>
where
    T: FromStr + PartialEq,
    T::Err: std::fmt::Display,
{
    let mut out: Vec<T> = Vec::new();
    for item in text.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(CliError::usage(format!("--{flag} {text:?}: an empty item; give a comma-separated list")));
        }
        let value = item.parse::<T>().map_err(|e| CliError::usage(format!("--{flag}: `{item}`: {e}")))?;
        check(&value).map_err(|e| CliError::usage(format!("--{flag}: `{item}`: {e}")))?;
        if out.contains(&value) {
            return Err(CliError::usage(format!("--{flag}: `{item}` is given twice")));
        }
        out.push(value);
    }
    Ok(out)
}

fn within(lo: u64, hi: u64) -> impl Fn(&u64) -> Result<(), String> {
    move |v| if (lo..=hi).contains(v) { Ok(()) } else { Err(format!("must be from {lo} to {hi}")) }
}

/// What one run measures.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub nodes: Vec<u16>,
    pub writers: Vec<u64>,
    pub workloads: Vec<Workload>,
    pub connections: u64,
    pub warmup: Duration,
    pub window: Duration,
    pub payload_bytes: usize,
    /// The writers of the `own` point run again at the end of each cluster size (`--repeat`).
    pub repeat: Option<u64>,
}

impl Plan {
    pub fn from_args(a: &BenchCompare) -> Result<Plan, CliError> {
        let nodes = parse_list::<u16>("nodes", &a.nodes, |n| within(1, 9)(&u64::from(*n)))?;
        let writers = parse_list::<u64>("writers", &a.writers, within(1, 10_000))?;
        let workloads = parse_list::<Workload>("workloads", &a.workloads, |_| Ok(()))?;
        let most = writers.iter().copied().max().unwrap_or(0);
        if workloads.contains(&Workload::Shared) && most > MAX_SHARED_WRITERS {
            return Err(CliError::usage(format!(
                "--workloads shared allows at most {MAX_SHARED_WRITERS} writers (a thread's member limit); \
                 --writers has {most}"
            )));
        }
        // Only a run that measures `own` has a first figure to compare the repeat with.
        let repeat = (a.repeat > 0 && workloads.contains(&Workload::Own)).then_some(a.repeat);
        Ok(Plan {
            nodes,
            writers,
            workloads,
            connections: a.connections,
            warmup: Duration::from_secs(a.warmup),
            window: Duration::from_secs(a.seconds),
            payload_bytes: usize::try_from(a.payload_bytes)
                .map_err(|_| CliError::usage("--payload-bytes is too large"))?,
            repeat,
        })
    }

    fn most_writers(&self) -> usize {
        self.writers.iter().copied().max().and_then(|w| usize::try_from(w).ok()).unwrap_or(1)
    }

    fn to_json(&self) -> Value {
        json!({
            "nodes": self.nodes,
            "writers": self.writers,
            "workloads": self.workloads.iter().map(|w| w.name()).collect::<Vec<_>>(),
            "connections": self.connections,
            "seconds": self.window.as_secs(),
            "warmup_secs": self.warmup.as_secs(),
            "payload_bytes": self.payload_bytes,
            "repeat": self.repeat,
        })
    }

    fn text(&self) -> String {
        let join = |v: &[String]| v.join(",");
        format!(
            "nodes {}, writers {}, workloads {}, connections {}, {} s per point after {} s warm-up, payload {} bytes",
            join(&self.nodes.iter().map(u16::to_string).collect::<Vec<_>>()),
            join(&self.writers.iter().map(u64::to_string).collect::<Vec<_>>()),
            join(&self.workloads.iter().map(|w| w.name().to_string()).collect::<Vec<_>>()),
            self.connections,
            self.window.as_secs(),
            self.warmup.as_secs(),
            self.payload_bytes
        )
    }
}

/// One system's figures at one point, with the memory of its processes after it.
#[derive(Debug, Clone)]
pub struct Side {
    pub figures: Figures,
    /// `[{node, pid, rss_bytes, peak_rss_bytes}]`.
    pub processes: Value,
    /// `now/peak` MiB per process.
    pub rss_text: String,
    /// Where the point's work went: CPU per call, and Kungfu's batching (issue #30).
    pub work: super::work::Work,
}

impl Side {
    fn to_json(&self) -> Value {
        let mut v = self.figures.to_json();
        if let Value::Object(map) = &mut v {
            map.insert("processes".into(), self.processes.clone());
            map.insert("work".into(), self.work.to_json());
        }
        v
    }

    fn p99_us(&self) -> Option<i64> {
        self.figures.latency.map(|s| s.p99_us)
    }
}

/// One workload at one writer count on one cluster size.
#[derive(Debug, Clone)]
pub struct Point {
    pub workload: Workload,
    /// The `--repeat` point: run again after every workload, on the same clusters.
    pub again: bool,
    pub nodes: u16,
    pub writers: u64,
    pub kungfu: Side,
    /// None when etcd did not run this point (not found, or no equivalent workload).
    pub etcd: Option<Side>,
}

/// `a / b`, when both are there and `b` is not zero.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

fn ratio_text(r: Option<f64>) -> String {
    r.map_or_else(|| "n/a".to_string(), |r| format!("{r:.2}"))
}

impl Point {
    /// The workload's name, `own again` for the `--repeat` point.
    fn label(&self) -> String {
        if self.again { format!("{} again", self.workload.name()) } else { self.workload.name().to_string() }
    }

    fn ops_ratio(&self) -> Option<f64> {
        ratio(Some(self.kungfu.figures.ops_per_sec()), self.etcd.as_ref().map(|e| e.figures.ops_per_sec()))
    }

    fn p99_ratio(&self) -> Option<f64> {
        let p99 = |s: &Side| s.p99_us().map(|us| us as f64);
        ratio(p99(&self.kungfu), self.etcd.as_ref().and_then(p99))
    }

    fn to_json(&self) -> Value {
        json!({
            "workload": self.workload.name(),
            "again": self.again,
            "nodes": self.nodes,
            "writers": self.writers,
            "kungfu": self.kungfu.to_json(),
            "etcd": self.etcd.as_ref().map(Side::to_json),
            "ratio": {
                "ops_per_sec": self.ops_ratio().map(|r| (r * 1000.0).round() / 1000.0),
                "p99": self.p99_ratio().map(|r| (r * 1000.0).round() / 1000.0),
            },
        })
    }
}

/// p50/p90/p99/max in ms, or `-` when nothing succeeded.
fn latency_text(f: &Figures) -> String {
    f.latency.map_or_else(
        || "-".to_string(),
        |s| format!("{}/{}/{}/{}", ms_text(s.p50_us), ms_text(s.p90_us), ms_text(s.p99_us), ms_text(s.max_us)),
    )
}

/// The table's header and rows; with `with_etcd` false (no etcd in the run), Kungfu's columns
/// only.
pub fn table(points: &[Point], with_etcd: bool) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let header = if with_etcd {
        vec![
            "workload",
            "nodes",
            "writers",
            "kungfu ops/s",
            "etcd ops/s",
            "ops k/e",
            "kungfu p50/p90/p99/max ms",
            "etcd p50/p90/p99/max ms",
            "p99 k/e",
            "kungfu errors",
            "etcd errors",
            "kungfu rss/peak MiB",
            "etcd rss/peak MiB",
        ]
    } else {
        vec![
            "workload",
            "nodes",
            "writers",
            "kungfu ops/s",
            "kungfu p50/p90/p99/max ms",
            "kungfu errors",
            "kungfu rss/peak MiB",
        ]
    };
    let na = || "n/a".to_string();
    let rows = points
        .iter()
        .map(|p| {
            let k = &p.kungfu;
            let mut row = vec![p.label(), p.nodes.to_string(), p.writers.to_string()];
            row.push(format!("{:.0}", k.figures.ops_per_sec()));
            if with_etcd {
                let e = p.etcd.as_ref();
                row.push(e.map_or_else(na, |e| format!("{:.0}", e.figures.ops_per_sec())));
                row.push(ratio_text(p.ops_ratio()));
                row.push(latency_text(&k.figures));
                row.push(e.map_or_else(na, |e| latency_text(&e.figures)));
                row.push(ratio_text(p.p99_ratio()));
                row.push(k.figures.errors_text());
                row.push(e.map_or_else(na, |e| e.figures.errors_text()));
                row.push(k.rss_text.clone());
                row.push(e.map_or_else(na, |e| e.rss_text.clone()));
            } else {
                row.push(latency_text(&k.figures));
                row.push(k.figures.errors_text());
                row.push(k.rss_text.clone());
            }
            row
        })
        .collect();
    (header, rows)
}

// Kungfu.

/// A reader of entry 1 of its own thread, linearizable or stale as its client says.
#[derive(Debug)]
pub(super) struct EntryReader {
    client: Client,
    thread: String,
}

impl Op for EntryReader {
    async fn call(&mut self) -> Result<(), String> {
        let req = pb::GetEntryRequest { thread: self.thread.clone(), entry: 1 };
        self.client.get_entry(req).await.map(|_| ()).map_err(|e| CliError::from(e).code)
    }
}

/// The next call of an agent cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Assign,
    Take(String),
    Deliver(String),
    Judge(String),
    ReadTurn,
}

/// A lead and its worker on a thread of their own, going round the cycle one call at a time. A
/// failed call starts the cycle again with a new assignment (the old one stays open).
#[derive(Debug)]
pub(super) struct AgentCycle {
    lead: Client,
    worker: Client,
    worker_id: String,
    thread: String,
    body: Vec<u8>,
    step: Step,
}

impl AgentCycle {
    async fn next(&mut self) -> Result<Step, CliError> {
        Ok(match &self.step {
            Step::Assign => {
                let new = kungfu_client::new_assignment(&self.worker_id, "bench");
                let post = Post::content(&self.thread, self.body.clone()).assignment(new).ask(Vec::<String>::new());
                let w = self.lead.post(post, None).await?;
                match w.value.receipt.and_then(|r| r.result) {
                    Some(pb::receipt::Result::Posted(pb::Posted { assignment: Some(a), .. })) => Step::Take(a),
                    other => return Err(CliError::other(format!("a post with an assignment answered {other:?}"))),
                }
            }
            Step::Take(a) => {
                let req = pb::TakeAssignmentRequest { assignment: a.clone(), ..Default::default() };
                self.worker.take_assignment(req, None).await?;
                Step::Deliver(a.clone())
            }
            Step::Deliver(a) => {
                let req = pb::DeliverAssignmentRequest {
                    assignment: a.clone(),
                    output: kungfu_client::content(self.body.clone()),
                    ..Default::default()
                };
                self.worker.deliver_assignment(req, None).await?;
                Step::Judge(a.clone())
            }
            Step::Judge(a) => {
                let req = pb::AdoptAssignmentRequest { assignment: a.clone(), ..Default::default() };
                self.lead.adopt_assignment(req, None).await?;
                Step::ReadTurn
            }
            Step::ReadTurn => {
                self.worker.get_turn(pb::GetTurnRequest::default()).await?;
                Step::Assign
            }
        })
    }
}

impl Op for AgentCycle {
    async fn call(&mut self) -> Result<(), String> {
        match self.next().await {
            Ok(step) => {
                self.step = step;
                Ok(())
            }
            Err(e) => {
                self.step = Step::Assign;
                Err(e.code)
            }
        }
    }
}

/// A lead and its worker for the mixed workload.
#[derive(Debug, Clone)]
struct Pair {
    lead_key: String,
    worker_key: String,
    worker_id: String,
    thread: String,
}

/// The Kungfu cluster of one size with the agents, threads and connections its points use, made
/// once for the most writers of the plan and reused by every point. `kungfu bench instructions`
/// uses it too, for its one writer's `own` and `read` calls.
#[derive(Debug)]
pub(super) struct KungfuSide {
    cluster: Cluster,
    /// Unmeasured setup calls, with the SDK's retries.
    setup: Client,
    /// The measured connections, to the leader first.
    connections: Vec<Client>,
    /// One agent per writer, each with a thread of its own holding one entry.
    agents: Vec<(String, Client)>,
    own: Vec<String>,
    shared: Option<String>,
    pairs: Vec<Pair>,
    body: Vec<u8>,
}

impl KungfuSide {
    async fn start(opts: &BenchCluster, binary: PathBuf, plan: &Plan) -> Result<KungfuSide, CliError> {
        let (cluster, leader) = Cluster::launch(opts, binary).await?;
        KungfuSide::on(cluster, leader, plan.connections, plan.payload_bytes).await
    }

    /// The side of a running `cluster` led by `leader`: `connections` measured connections,
    /// payloads of `payload_bytes`, no agents yet.
    pub(super) async fn on(
        cluster: Cluster,
        leader: u16,
        connections: u64,
        payload_bytes: usize,
    ) -> Result<KungfuSide, CliError> {
        let endpoints = cluster.endpoints_from(leader);
        let setup = Client::connect(endpoints.clone(), None, ClientOptions::default()).await?;
        let connections = write::measured_connections(&endpoints, connections).await?;
        let body = vec![b'x'; payload_bytes];
        Ok(KungfuSide {
            cluster,
            setup,
            connections,
            agents: Vec::new(),
            own: Vec::new(),
            shared: None,
            pairs: Vec::new(),
            body,
        })
    }

    /// `n` agents, each with a thread of its own whose entry 1 is a payload.
    pub(super) async fn ensure_agents(&mut self, n: usize) -> Result<(), CliError> {
        if self.agents.len() >= n {
            return Ok(());
        }
        progress(format!("kungfu: registering {n} agent(s) with a thread each"));
        let more = (n - self.agents.len()) as u64;
        let setup = self.setup.clone();
        let added = bounded(more, 32, |_| write::register(setup.clone())).await?;
        let threads = write::own_threads(&added).await?;
        let body = self.body.clone();
        let seeds: Vec<(Client, String)> = added.iter().map(|(_, c)| c.clone()).zip(threads.iter().cloned()).collect();
        bounded(seeds.len() as u64, 32, |i| {
            let (client, thread) = seeds[i].clone();
            let body = body.clone();
            async move {
                client.post(Post::content(&thread, body).ask(Vec::<String>::new()), None).await?;
                Ok::<(), CliError>(())
            }
        })
        .await?;
        self.agents.extend(added);
        self.own.extend(threads);
        Ok(())
    }

    async fn ensure_shared(&mut self, n: usize) -> Result<String, CliError> {
        self.ensure_agents(n).await?;
        if let Some(t) = &self.shared {
            return Ok(t.clone());
        }
        progress(format!("kungfu: {n} agent(s) joining one shared thread"));
        let thread = write::shared_thread(&self.agents[..n]).await?;
        self.shared = Some(thread.clone());
        Ok(thread)
    }

    pub(super) async fn ensure_pairs(&mut self, n: usize) -> Result<(), CliError> {
        self.ensure_agents(n).await?;
        if self.pairs.len() >= n {
            return Ok(());
        }
        progress(format!("kungfu: {n} lead(s) each with a worker on a thread of their own"));
        let leads: Vec<(String, Client)> = self.agents[self.pairs.len()..n].to_vec();
        let setup = self.setup.clone();
        let added = bounded(leads.len() as u64, 32, |i| {
            let (lead_key, lead) = leads[i].clone();
            let setup = setup.clone();
            async move {
                let worker = setup.register(None).await?;
                let (thread, secret) = write::create_thread(&lead, true).await?;
                let join = pb::JoinRequest { grant_secret: secret, ..Default::default() };
                worker.client.join(join, None).await?;
                Ok::<Pair, CliError>(Pair { lead_key, worker_key: worker.agent_key, worker_id: worker.agent, thread })
            }
        })
        .await?;
        self.pairs.extend(added);
        Ok(())
    }

    /// The first `n` pairs going round the mixed workload's cycle, each from its first step;
    /// [`KungfuSide::ensure_pairs`] must have made them.
    pub(super) fn cycles(&self, n: usize) -> Vec<AgentCycle> {
        (0..n)
            .map(|i| {
                let p = &self.pairs[i];
                AgentCycle {
                    lead: self.client(i, &p.lead_key),
                    worker: self.client(i, &p.worker_key),
                    worker_id: p.worker_id.clone(),
                    thread: p.thread.clone(),
                    body: self.body.clone(),
                    step: Step::Assign,
                }
            })
            .collect()
    }

    /// Clients acting as every agent of the first `n` pairs, leads and workers.
    pub(super) fn pair_agents(&self, n: usize) -> Vec<Client> {
        self.pairs[..n]
            .iter()
            .enumerate()
            .flat_map(|(i, p)| [self.client(i, &p.lead_key), self.client(i, &p.worker_key)])
            .collect()
    }

    /// The unmeasured setup client (the SDK's retries).
    pub(super) fn setup(&self) -> &Client {
        &self.setup
    }

    /// The client of worker `i` acting as the agent whose key is `key`.
    fn client(&self, i: usize, key: &str) -> Client {
        self.connections[i % self.connections.len()].with_key(key.to_string())
    }

    /// Writer `i` posting a payload to `thread` (the `own` and `shared` workloads).
    pub(super) fn poster(&self, i: usize, thread: &str) -> Poster {
        Poster { client: self.client(i, &self.agents[i].0), thread: thread.to_string(), body: self.body.clone() }
    }

    /// Reader `i` reading entry 1 of its own thread, linearizable or `stale` (the `read` and
    /// `stale` workloads); [`KungfuSide::ensure_agents`] must have made agent `i`.
    pub(super) fn reader(&self, i: usize, stale: bool) -> EntryReader {
        let client = self.client(i, &self.agents[i].0);
        EntryReader { client: if stale { client.stale() } else { client }, thread: self.own[i].clone() }
    }

    /// Agent `i`'s key; [`KungfuSide::ensure_agents`] must have made agent `i`.
    pub(super) fn agent_key(&self, i: usize) -> &str {
        &self.agents[i].0
    }

    /// The payload every post carries.
    pub(super) fn body(&self) -> &[u8] {
        &self.body
    }

    /// The cluster the side writes to.
    pub(super) fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// Writer `i`'s own thread; [`KungfuSide::ensure_agents`] must have made agent `i`.
    pub(super) fn own_thread(&self, i: usize) -> &str {
        &self.own[i]
    }

    async fn point(&mut self, workload: Workload, writers: usize, plan: &Plan) -> Result<Side, CliError> {
        let (pids, metrics) = (self.cluster.pids(), self.cluster.metrics());
        let most = plan.most_writers();
        // Seeding (agents, threads) happens before the sampler starts, so it is not counted.
        match workload {
            Workload::Own | Workload::Read | Workload::Stale => self.ensure_agents(most).await?,
            Workload::Shared => drop(self.ensure_shared(most).await?),
            Workload::Mixed => self.ensure_pairs(most).await?,
        }
        let sampler = super::work::Sampler::start(&pids, &metrics).await;
        let figures = match workload {
            Workload::Own | Workload::Shared => {
                let threads = if workload == Workload::Own {
                    self.ensure_agents(most).await?;
                    self.own.clone()
                } else {
                    vec![self.ensure_shared(most).await?; most]
                };
                let ops: Vec<Poster> = (0..writers).map(|i| self.poster(i, &threads[i])).collect();
                drive(ops, plan.warmup, plan.window).await?
            }
            Workload::Read | Workload::Stale => {
                self.ensure_agents(most).await?;
                let ops: Vec<EntryReader> = (0..writers).map(|i| self.reader(i, workload == Workload::Stale)).collect();
                drive(ops, plan.warmup, plan.window).await?
            }
            Workload::Mixed => {
                self.ensure_pairs(most).await?;
                drive(self.cycles(writers), plan.warmup, plan.window).await?
            }
        };
        let work = sampler.finish(&pids, &metrics, figures.ops_per_sec()).await;
        let (processes, rss_text) = super::memory::sample(&self.cluster.pids());
        Ok(Side { figures, processes, rss_text, work })
    }
}

// etcd.

/// A put of `value` to `key`.
#[derive(Debug)]
struct Put {
    kv: etcd::pb::kv_client::KvClient<Channel>,
    key: Vec<u8>,
    value: Vec<u8>,
}

impl Op for Put {
    async fn call(&mut self) -> Result<(), String> {
        let req = etcd::pb::PutRequest { key: self.key.clone(), value: self.value.clone(), lease: 0 };
        self.kv.put(req).await.map(|_| ()).map_err(|s| grpc_code_name(s.code()))
    }
}

/// A `Range` of one key: linearizable, or serializable.
#[derive(Debug)]
struct Range {
    kv: etcd::pb::kv_client::KvClient<Channel>,
    key: Vec<u8>,
    serializable: bool,
}

impl Op for Range {
    async fn call(&mut self) -> Result<(), String> {
        let req =
            etcd::pb::RangeRequest { key: self.key.clone(), serializable: self.serializable, ..Default::default() };
        self.kv.range(req).await.map(|_| ()).map_err(|s| grpc_code_name(s.code()))
    }
}

/// The etcd cluster of one size and the measured connections to its leader.
#[derive(Debug)]
struct EtcdSide {
    cluster: EtcdCluster,
    connections: Vec<Channel>,
    /// How many of the readers' keys hold a payload.
    seeded: usize,
    body: Vec<u8>,
}

fn own_key(i: usize) -> Vec<u8> {
    format!("bench/own/{i}").into_bytes()
}

impl EtcdSide {
    async fn start(
        binary: &std::path::Path,
        nodes: u16,
        opts: &BenchCluster,
        plan: &Plan,
    ) -> Result<EtcdSide, CliError> {
        let (cluster, leader) = EtcdCluster::start(binary, nodes, &opts.files).await?;
        let url = cluster.client_url(leader).ok_or_else(|| CliError::other("no etcd leader URL"))?.to_string();
        let mut connections = Vec::new();
        for _ in 0..plan.connections {
            connections.push(etcd::channel(&url, CALL_TIMEOUT, true).await?);
        }
        Ok(EtcdSide { cluster, connections, seeded: 0, body: vec![b'x'; plan.payload_bytes] })
    }

    fn kv(&self, i: usize) -> etcd::pb::kv_client::KvClient<Channel> {
        etcd::pb::kv_client::KvClient::new(self.connections[i % self.connections.len()].clone())
    }

    /// Puts a payload under each of the first `n` writers' own keys (unmeasured).
    async fn ensure_seeded(&mut self, n: usize) -> Result<(), CliError> {
        for i in self.seeded..n {
            let req = etcd::pb::PutRequest { key: own_key(i), value: self.body.clone(), lease: 0 };
            self.kv(i).put(req).await.map_err(|s| CliError::other(format!("etcd: seeding {i}: {s}")))?;
        }
        self.seeded = self.seeded.max(n);
        Ok(())
    }

    async fn point(&mut self, workload: Workload, writers: usize, plan: &Plan) -> Result<Option<Side>, CliError> {
        if matches!(workload, Workload::Read | Workload::Stale) {
            self.ensure_seeded(plan.most_writers()).await?;
        }
        let pids = self.cluster.pids();
        let sampler = super::work::Sampler::start(&pids, &[]).await;
        let figures = match workload {
            Workload::Own | Workload::Shared => {
                let ops: Vec<Put> = (0..writers)
                    .map(|i| Put {
                        kv: self.kv(i),
                        key: if workload == Workload::Own { own_key(i) } else { b"bench/shared".to_vec() },
                        value: self.body.clone(),
                    })
                    .collect();
                drive(ops, plan.warmup, plan.window).await?
            }
            Workload::Read | Workload::Stale => {
                let ops: Vec<Range> = (0..writers)
                    .map(|i| Range { kv: self.kv(i), key: own_key(i), serializable: workload == Workload::Stale })
                    .collect();
                drive(ops, plan.warmup, plan.window).await?
            }
            Workload::Mixed => return Ok(None),
        };
        let work = sampler.finish(&pids, &[], figures.ops_per_sec()).await;
        let (processes, rss_text) = super::memory::sample(&self.cluster.pids());
        Ok(Some(Side { figures, processes, rss_text, work }))
    }
}

/// The plan of the run and where etcd is, or the usage error of the first flag that is wrong.
pub fn check(args: &BenchCompare) -> Result<(Plan, Found), CliError> {
    let plan = Plan::from_args(args)?;
    let required = args.against == Some(BenchAgainst::Etcd);
    Ok((plan, etcd::find_etcd(args.etcd.as_deref(), required, std::env::var_os("PATH"))?))
}

/// Runs the comparison and prints it.
pub async fn run(args: BenchCompare, binary: PathBuf, server: Value, json: bool) -> Result<(), CliError> {
    let (plan, found) = check(&args)?;
    let etcd_info = match &found {
        Found::At(path) => json!({
            "path": path.display().to_string(),
            "version": version_of(path, Duration::from_secs(5)),
        }),
        Found::Missing(why) => {
            progress(format!("etcd will not run: {why}"));
            json!({ "missing": why })
        }
    };
    let mut points = Vec::new();
    for &nodes in &plan.nodes {
        let opts = BenchCluster { nodes, files: args.files.clone(), base_port: None };
        let mut kungfu = KungfuSide::start(&opts, binary.clone(), &plan).await?;
        let mut etcd = match &found {
            Found::At(path) => Some(EtcdSide::start(path, nodes, &opts, &plan).await?),
            Found::Missing(_) => None,
        };
        for &workload in &plan.workloads {
            for &writers in &plan.writers {
                let n = usize::try_from(writers).map_err(|_| CliError::usage("--writers: too many"))?;
                progress(format!("{} node(s), {}, {writers} writer(s): kungfu", nodes, workload.name()));
                let k = kungfu.point(workload, n, &plan).await?;
                let e = match etcd.as_mut() {
                    Some(side) if workload != Workload::Mixed => {
                        progress(format!("{} node(s), {}, {writers} writer(s): etcd", nodes, workload.name()));
                        side.point(workload, n, &plan).await?
                    }
                    _ => None,
                };
                points.push(Point { workload, again: false, nodes, writers, kungfu: k, etcd: e });
            }
        }
        if let Some(writers) = plan.repeat {
            let n = usize::try_from(writers).map_err(|_| CliError::usage("--repeat: too many"))?;
            progress(format!("{nodes} node(s), own again, {writers} writer(s): kungfu"));
            let k = kungfu.point(Workload::Own, n, &plan).await?;
            let e = match etcd.as_mut() {
                Some(side) => {
                    progress(format!("{nodes} node(s), own again, {writers} writer(s): etcd"));
                    side.point(Workload::Own, n, &plan).await?
                }
                None => None,
            };
            points.push(Point { workload: Workload::Own, again: true, nodes, writers, kungfu: k, etcd: e });
        }
        // Both clusters of this size are dropped here: killed and removed.
    }
    let machine = machine();
    if json {
        output::print_json(&json!({
            "bench": "compare",
            "machine": machine,
            "kungfud": server,
            "etcd": etcd_info,
            "params": plan.to_json(),
            "points": points.iter().map(Point::to_json).collect::<Vec<_>>(),
        }));
        return Ok(());
    }
    let with_etcd = matches!(found, Found::At(_));
    println!("kungfu bench compare: Kungfu{} through the public gRPC API", if with_etcd { " beside etcd" } else { "" });
    let etcd_text = match &found {
        Found::At(path) => {
            format!("{} {}", etcd_info["version"].as_str().unwrap_or("version unknown"), path.display())
        }
        Found::Missing(why) => format!("not run: {why}"),
    };
    let mut pairs: Vec<(&str, String)> = vec![
        ("machine", machine_text(&machine)),
        ("kungfud", server_text(&server)),
        ("etcd", etcd_text),
        ("parameters", plan.text()),
    ];
    for w in &plan.workloads {
        pairs.push((w.name(), w.describe().to_string()));
    }
    output::pairs(&pairs);
    println!();
    let (header, rows) = table(&points, with_etcd);
    output::table(&header, &rows);
    println!();
    println!(
        "Where the work went: CPU µs per call (server processes together / this bench client), and Kungfu's\n\
         write path: entries per log append / per AppendEntries / commands per apply batch, all nodes."
    );
    let (header, rows) = work_table(&points);
    output::table(&header, &rows);
    Ok(())
}

/// The second table: where each point's work went (issue #30).
pub fn work_table(points: &[Point]) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let header =
        vec!["workload", "nodes", "writers", "kungfu cpu µs srv/cli", "etcd cpu µs srv/cli", "kungfu batching"];
    let rows = points
        .iter()
        .map(|p| {
            vec![
                p.label(),
                p.nodes.to_string(),
                p.writers.to_string(),
                p.kungfu.work.cpu_text(),
                p.etcd.as_ref().map_or_else(|| "n/a".to_string(), |e| e.work.cpu_text()),
                p.kungfu.work.batch_text(),
            ]
        })
        .collect();
    (header, rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Summary;

    #[test]
    fn lists_parse_in_order_and_errors_name_the_flag() {
        assert_eq!(parse_list::<u64>("writers", "1, 16,64,256", within(1, 10_000)).expect("ok"), vec![1, 16, 64, 256]);
        let e = parse_list::<u64>("writers", "1,x", within(1, 10_000)).expect_err("not a number");
        assert!(e.message.starts_with("--writers: `x`:"), "{}", e.message);
        let e = parse_list::<u64>("writers", "0", within(1, 10_000)).expect_err("too few");
        assert_eq!(e.message, "--writers: `0`: must be from 1 to 10000");
        let e = parse_list::<u64>("writers", "4,4", within(1, 10_000)).expect_err("twice");
        assert_eq!(e.message, "--writers: `4` is given twice");
        let e = parse_list::<u64>("nodes", "1,,3", within(1, 9)).expect_err("empty item");
        assert!(e.message.starts_with("--nodes \"1,,3\": an empty item"), "{}", e.message);
        assert!(parse_list::<u64>("nodes", "", within(1, 9)).is_err());
        let w = parse_list::<Workload>("workloads", "read,own", |_| Ok(())).expect("names");
        assert_eq!(w, vec![Workload::Read, Workload::Own]);
        let e = parse_list::<Workload>("workloads", "own,puts", |_| Ok(())).expect_err("unknown");
        assert!(
            e.message.contains("--workloads: `puts`: `puts` is not a workload (one of own, shared"),
            "{}",
            e.message
        );
    }

    fn args(extra: &[&str]) -> BenchCompare {
        use clap::Parser;
        let mut argv = vec!["kungfu-bench", "compare"];
        argv.extend_from_slice(extra);
        match crate::args::Bench::try_parse_from(argv).expect("parses").command {
            crate::args::BenchCmd::Compare(a) => a,
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn the_default_plan_is_the_issues_table_and_flags_override_it() {
        let p = Plan::from_args(&args(&[])).expect("defaults");
        assert_eq!((p.nodes.clone(), p.writers.clone()), (vec![1, 3], vec![1, 16, 64, 256]));
        assert_eq!(p.workloads, Workload::ALL.to_vec());
        assert_eq!(
            (p.connections, p.window, p.warmup, p.payload_bytes),
            (16, Duration::from_secs(10), Duration::from_secs(2), 1024)
        );
        let a = args(&[
            "--nodes",
            "1",
            "--writers",
            "1",
            "--seconds",
            "1",
            "--warmup",
            "0",
            "--workloads",
            "own,read",
            "--against",
            "etcd",
        ]);
        assert_eq!(a.against, Some(BenchAgainst::Etcd));
        let p = Plan::from_args(&a).expect("small");
        assert_eq!((p.nodes, p.writers, p.workloads), (vec![1], vec![1], vec![Workload::Own, Workload::Read]));
        assert_eq!((p.window, p.warmup), (Duration::from_secs(1), Duration::ZERO));
    }

    #[test]
    fn a_shared_thread_refuses_more_writers_than_its_member_limit() {
        let e = Plan::from_args(&args(&["--writers", "16,512"])).expect_err("shared is in the default workloads");
        assert!(e.message.starts_with("--workloads shared allows at most 256 writers"), "{}", e.message);
        assert!(Plan::from_args(&args(&["--writers", "512", "--workloads", "own"])).is_ok());
    }

    fn side(ops: usize, p99_us: i64, errors: &[(&str, u64)]) -> Side {
        let mut latencies: Vec<i64> = (0..99).map(|_| 1_000).chain([p99_us]).collect();
        let mut s = Summary::of(&mut latencies).expect("values");
        s.p99_us = p99_us;
        Side {
            figures: Figures {
                ops,
                elapsed_secs: 10.0,
                latency: Some(s),
                errors: errors.iter().map(|(c, n)| (c.to_string(), *n)).collect(),
            },
            processes: json!([]),
            rss_text: "40/52".to_string(),
            work: Default::default(),
        }
    }

    #[test]
    fn the_table_shows_kungfu_over_etcd_and_n_a_where_etcd_has_no_figure() {
        let points = vec![
            Point {
                workload: Workload::Own,
                again: false,
                nodes: 3,
                writers: 64,
                kungfu: side(21_380, 77_300, &[]),
                etcd: Some(side(45_840, 34_000, &[("UNAVAILABLE", 2)])),
            },
            Point {
                workload: Workload::Mixed,
                again: false,
                nodes: 3,
                writers: 64,
                kungfu: side(5_000, 9_000, &[]),
                etcd: None,
            },
        ];
        let (header, rows) = table(&points, true);
        assert_eq!(header.len(), rows[0].len());
        let col = |name: &str| header.iter().position(|h| *h == name).expect(name);
        assert_eq!(rows[0][col("kungfu ops/s")], "2138");
        assert_eq!(rows[0][col("etcd ops/s")], "4584");
        assert_eq!(rows[0][col("ops k/e")], "0.47");
        assert_eq!(rows[0][col("p99 k/e")], "2.27");
        assert_eq!(rows[0][col("kungfu p50/p90/p99/max ms")], "1.00/1.00/77.30/77.30");
        assert_eq!(rows[0][col("etcd errors")], "UNAVAILABLE 2");
        assert_eq!(rows[0][col("kungfu errors")], "none");
        for c in ["etcd ops/s", "ops k/e", "etcd p50/p90/p99/max ms", "p99 k/e", "etcd errors", "etcd rss/peak MiB"] {
            assert_eq!(rows[1][col(c)], "n/a", "{c}");
        }
        let (header, rows) = table(&points, false);
        assert!(header.iter().all(|h| !h.contains("etcd") && !h.contains("k/e")), "{header:?}");
        assert_eq!(rows[1].len(), header.len());
        let j = points[0].to_json();
        assert_eq!(j["ratio"]["ops_per_sec"], 0.466);
        assert_eq!(j["etcd"]["errors_total"], 2);
        assert!(points[1].to_json()["etcd"].is_null());
    }

    #[test]
    fn a_ratio_needs_both_figures_and_a_nonzero_divisor() {
        assert_eq!(ratio(Some(1.0), Some(4.0)), Some(0.25));
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(1.0)), None);
        assert_eq!(ratio_text(None), "n/a");
        assert_eq!(ratio_text(Some(2.0 / 3.0)), "0.67");
    }
}
