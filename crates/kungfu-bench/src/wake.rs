//! `kungfu bench wake` (issue #35): what wake webhooks cost and how fast they arrive.
//!
//! One cluster, one run. `--agents` agents (1,000 by default) are members of shared threads;
//! `--writers` writers post to those threads, each post asking one of the agents to respond, so
//! every write changes some agent's turn (the worst case for wake: every write wakes someone).
//! First the writers run for `--seconds` with no wake target set; then every agent sets one,
//! pointing at a receiver this process serves on loopback (the cluster allows http to loopback for
//! the run), and the writers run again for `--seconds`. The figures: posts per second without and
//! with the targets (their ratio is wake's cost on write throughput), and for every delivery
//! received during the second window its fact-to-delivery latency: from the time the leader
//! stamped on the change's fact (`changed_at_unix_micros` of the body) to the delivery's arrival,
//! on the same machine's clock. Deliveries answer 200 at once.
//!
//! `--workload mixed` drives `bench compare`'s mixed agent cycle instead (one lead and worker pair
//! per writer: post an assignment, take it, deliver, adopt, read the turn), with every pair agent
//! and enough idle agents to make `--agents` subscribed in the second window.

use super::cluster::{Cluster, Runner};
use super::compare::KungfuSide;
use super::load::{Figures, Op, drive};
use super::stats::{Summary, ms_text};
use super::write::{create_thread, measured_connections, register};
use super::{bounded, progress};
use crate::args::BenchCluster;
use kungfu_cli::error::CliError;
use kungfu_client::{Client, ClientOptions, Post, pb};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// The mixed workload's payload (`bench compare`'s default).
const PAYLOAD_BYTES: usize = 1024;
/// Agents of one thread (with the writers, under the default 256 members).
const AGENTS_PER_THREAD: usize = 150;
/// How long the run waits for deliveries to drain after a window.
const DRAIN: Duration = Duration::from_secs(5);

/// The cluster's `[wake]` table for the run: http to loopback (the receiver), short coalescing.
pub const WAKE_CONFIG: &str = "\n[wake]\nschemes = [\"http\"]\nallow_private = true\n";

#[derive(Debug, Clone)]
pub struct Params {
    pub agents: u64,
    pub writers: u64,
    pub connections: u64,
    pub seconds: u64,
    /// `bench compare`'s mixed agent cycle instead of asks.
    pub mixed: bool,
}

#[derive(Debug)]
pub struct Report {
    params: Params,
    nodes: u16,
    without: Figures,
    with: Figures,
    deliveries: usize,
    agents_woken: usize,
    latency: Option<Summary>,
}

impl Report {
    fn ratio(&self) -> f64 {
        self.with.ops_per_sec() / self.without.ops_per_sec().max(1e-9)
    }

    pub fn to_json(&self) -> Value {
        let p = &self.params;
        json!({
            "params": {"nodes": self.nodes, "agents": p.agents, "writers": p.writers, "connections": p.connections, "seconds": p.seconds, "workload": if p.mixed { "mixed" } else { "asks" }},
            "without_targets": self.without.to_json(),
            "with_targets": self.with.to_json(),
            "throughput_ratio": (self.ratio() * 1000.0).round() / 1000.0,
            "deliveries": self.deliveries,
            "agents_woken": self.agents_woken,
            "fact_to_delivery_ms": self.latency.map(|s| s.to_json()),
        })
    }

    pub fn rows(&self) -> Vec<(&'static str, String)> {
        let lat = |f: &Figures| f.latency.map(|s| format!("p50 {} / p99 {}", ms_text(s.p50_us), ms_text(s.p99_us)));
        let (no, set) = if self.params.mixed {
            ("calls/s, no targets", "calls/s, targets set")
        } else {
            ("posts/s, no targets", "posts/s, targets set")
        };
        vec![
            (no, format!("{:.0} ({})", self.without.ops_per_sec(), lat(&self.without).unwrap_or_default())),
            (set, format!("{:.0} ({})", self.with.ops_per_sec(), lat(&self.with).unwrap_or_default())),
            ("with / without", format!("{:.3}", self.ratio())),
            ("errors", format!("{} / {}", self.without.errors_text(), self.with.errors_text())),
            ("deliveries", format!("{} to {} agents", self.deliveries, self.agents_woken)),
            (
                "fact to delivery",
                self.latency
                    .map(|s| {
                        format!(
                            "p50 {} / p90 {} / p99 {} / max {}",
                            ms_text(s.p50_us),
                            ms_text(s.p90_us),
                            ms_text(s.p99_us),
                            ms_text(s.max_us)
                        )
                    })
                    .unwrap_or_else(|| "no delivery".into()),
            ),
        ]
    }
}

/// One delivery as the receiver got it.
#[derive(Debug, Clone)]
struct Got {
    agent: String,
    changed_at_us: i64,
    arrived_us: i64,
}

fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// An HTTP/1.1 receiver on loopback answering every POST with 200 (connections kept alive).
async fn receiver() -> Result<(u16, Arc<Mutex<Vec<Got>>>), CliError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| CliError::other(format!("cannot listen for deliveries: {e}")))?;
    let port = listener.local_addr().map_err(|e| CliError::other(e.to_string()))?.port();
    let got: Arc<Mutex<Vec<Got>>> = Arc::default();
    let sink = got.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(connection(socket, sink.clone()));
        }
    });
    Ok((port, got))
}

async fn connection(socket: tokio::net::TcpStream, got: Arc<Mutex<Vec<Got>>>) {
    let mut socket = BufReader::new(socket);
    let mut line = String::new();
    loop {
        let mut len = 0usize;
        line.clear();
        if socket.read_line(&mut line).await.unwrap_or(0) == 0 {
            return;
        }
        loop {
            line.clear();
            if socket.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                if k.trim().eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; len];
        if socket.read_exact(&mut body).await.is_err() {
            return;
        }
        let arrived_us = now_us();
        if let Ok(v) = serde_json::from_slice::<Value>(&body) {
            let g = Got {
                agent: v["agent"].as_str().unwrap_or_default().to_string(),
                changed_at_us: v["changed_at_unix_micros"].as_i64().unwrap_or(arrived_us),
                arrived_us,
            };
            if let Ok(mut all) = got.lock() {
                all.push(g);
            }
        }
        if socket.get_mut().write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").await.is_err() {
            return;
        }
    }
}

/// One writer: posts to its threads in turn, each post asking the next agent of that thread.
#[derive(Debug)]
struct Asker {
    client: Client,
    /// (thread, its agents)
    threads: Arc<Vec<(String, Vec<String>)>>,
    next: usize,
}

impl Op for Asker {
    async fn call(&mut self) -> Result<(), String> {
        self.next = self.next.wrapping_add(1);
        let (thread, agents) = &self.threads[self.next % self.threads.len()];
        let asked = agents[(self.next / self.threads.len()) % agents.len()].clone();
        let post = Post::text(thread, "please respond").ask(vec![asked]);
        self.client.post(post, None).await.map(|_| ()).map_err(|e| CliError::from(e).code)
    }
}

pub async fn run(opts: &BenchCluster, binary: PathBuf, p: Params) -> Result<Report, CliError> {
    if p.mixed {
        return run_mixed(opts, binary, p).await;
    }
    let runner = Runner { extra_config: WAKE_CONFIG.to_string(), ..Runner::default() };
    let (cluster, leader) = Cluster::launch_with(opts, binary, runner).await?;
    let endpoints = cluster.endpoints_from(leader);
    let setup = Client::connect(endpoints.clone(), None, ClientOptions::default()).await?;
    progress(format!("registering {} agent(s) and {} writer(s)", p.agents, p.writers));
    // (agent id, client acting as it)
    let agents = bounded(p.agents, 32, |_| {
        let setup = setup.clone();
        async move {
            let r = setup.register(None).await?;
            Ok::<(String, Client), CliError>((r.agent, r.client))
        }
    })
    .await?;
    let writers = bounded(p.writers, 32, |_| register(setup.clone())).await?;
    // Threads of at most AGENTS_PER_THREAD agents, every writer a member of each.
    let per = AGENTS_PER_THREAD;
    let groups: Vec<Vec<usize>> = (0..agents.len()).collect::<Vec<_>>().chunks(per).map(<[usize]>::to_vec).collect();
    let mut threads = Vec::new();
    progress(format!("{} thread(s): agents and writers join", groups.len()));
    for members in &groups {
        let (thread, secret) = create_thread(&writers[0].1, true).await?;
        let joiners: Vec<Client> =
            members.iter().map(|&i| agents[i].1.clone()).chain(writers.iter().skip(1).map(|w| w.1.clone())).collect();
        bounded(joiners.len() as u64, 32, |i| {
            let (c, s) = (joiners[i].clone(), secret.clone());
            async move {
                c.join(pb::JoinRequest { grant_secret: s, ..Default::default() }, None).await?;
                Ok::<(), CliError>(())
            }
        })
        .await?;
        threads.push((thread, members.iter().map(|&i| agents[i].0.clone()).collect::<Vec<_>>()));
    }
    let threads = Arc::new(threads);
    let connections = measured_connections(&endpoints, p.connections).await?;
    let askers = |offset: usize| -> Vec<Asker> {
        writers
            .iter()
            .enumerate()
            .map(|(i, (key, _))| Asker {
                client: connections[i % connections.len()].with_key(key.clone()),
                threads: threads.clone(),
                next: offset + i * 7919,
            })
            .collect()
    };
    let subscribed: Vec<Client> = agents.iter().map(|(_, c)| c.clone()).collect();
    let report = measure(&p, opts.nodes, askers, subscribed).await;
    drop(cluster);
    report
}

/// The mixed workload's run: one pair per writer going round `bench compare`'s agent cycle, every
/// pair agent and `--agents` minus them idle agents subscribed in the second window.
async fn run_mixed(opts: &BenchCluster, binary: PathBuf, p: Params) -> Result<Report, CliError> {
    let runner = Runner { extra_config: WAKE_CONFIG.to_string(), ..Runner::default() };
    let (cluster, leader) = Cluster::launch_with(opts, binary, runner).await?;
    let mut side = KungfuSide::on(cluster, leader, p.connections, PAYLOAD_BYTES).await?;
    let writers = p.writers as usize;
    side.ensure_pairs(writers).await?;
    let idle = (p.agents as usize).saturating_sub(2 * writers);
    progress(format!("registering {idle} idle agent(s)"));
    let setup = side.setup().clone();
    let mut subscribed = side.pair_agents(writers);
    subscribed.extend(
        bounded(idle as u64, 32, |_| {
            let setup = setup.clone();
            async move { Ok::<Client, CliError>(setup.register(None).await?.client) }
        })
        .await?,
    );
    measure(&p, opts.nodes, |_| side.cycles(writers), subscribed).await
}

/// Both windows: the load with no target, then with one target per `subscribed` agent, and the
/// fact-to-delivery latency of every delivery whose change fell in the second.
async fn measure<O: Op>(
    p: &Params,
    nodes: u16,
    ops: impl Fn(usize) -> Vec<O>,
    subscribed: Vec<Client>,
) -> Result<Report, CliError> {
    let window = Duration::from_secs(p.seconds);
    progress(format!("{} writer(s), no wake targets, {} s", p.writers, p.seconds));
    let without = drive(ops(0), Duration::from_secs(2), window).await?;

    let (port, got) = receiver().await?;
    let url = format!("http://127.0.0.1:{port}/wake");
    progress(format!("setting {} wake target(s)", subscribed.len()));
    bounded(subscribed.len() as u64, 32, |i| {
        let (c, url) = (subscribed[i].clone(), url.clone());
        async move {
            c.set_wake_target(pb::SetWakeTargetRequest { url, ..Default::default() }, None).await?;
            Ok::<(), CliError>(())
        }
    })
    .await?;
    // An agent whose turn already holds work gets a first event reporting it. Let those drain.
    tokio::time::sleep(DRAIN).await;
    progress(format!("{} writer(s), {} agent(s) subscribed, {} s", p.writers, subscribed.len(), p.seconds));
    let from_us = now_us();
    let with = drive(ops(1_000_003), Duration::ZERO, window).await?;
    let until_us = now_us();
    tokio::time::sleep(DRAIN).await;
    let got: Vec<Got> = got.lock().map(|g| g.clone()).unwrap_or_default();
    let mut latencies: Vec<i64> = got
        .iter()
        .filter(|g| g.changed_at_us >= from_us && g.changed_at_us <= until_us)
        .map(|g| g.arrived_us - g.changed_at_us)
        .collect();
    let agents_woken = got.iter().map(|g| g.agent.as_str()).collect::<std::collections::BTreeSet<_>>().len();
    Ok(Report {
        params: p.clone(),
        nodes,
        without,
        with,
        deliveries: got.len(),
        agents_woken,
        latency: Summary::of(&mut latencies),
    })
}
