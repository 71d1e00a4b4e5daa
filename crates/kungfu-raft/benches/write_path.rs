//! Benchmark of the replicated write path: committed protocol actions per second and latency
//! percentiles, on one node and on three nodes on loopback, with batches of concurrent writers.
//! Every node is a real replica: RocksDB on disk with the raft log fsynced before acknowledging,
//! tonic between nodes. Each writer is one agent posting ~1 KiB entries to its own thread, and a
//! write is timed from proposal to "committed and applied on the leader".
//!
//! Run: `cargo bench --bench write_path -- [--nodes 1,3] [--writers 1,16,64,256] [--seconds 10]
//! [--entry-bytes 1024]`
//! Figures and the machine they came from are recorded in `docs/benchmarks.md`.

use kungfu_core::{Action, Command, PostBody, Principal};
use kungfu_raft::{NodeConfig, RaftNode, Response, WriteError};
use kungfu_types::{AgentId, Content, IdempotencyKey, ThreadId, Timestamp};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned().unwrap_or_else(|| default.to_string())
}

fn list(name: &str, default: &str) -> Vec<u64> {
    arg(name, default).split(',').filter_map(|s| s.trim().parse().ok()).collect()
}

struct Cluster {
    nodes: BTreeMap<u64, Arc<RaftNode>>,
    _dirs: Vec<tempfile::TempDir>,
}

async fn cluster(n: u64, base: &std::path::Path) -> Cluster {
    let mut nodes = BTreeMap::new();
    let mut dirs = Vec::new();
    for id in 1..=n {
        let dir = tempfile::tempdir_in(base).expect("tempdir");
        let cfg = NodeConfig::new(id, "bench", dir.path(), "127.0.0.1:0".parse().expect("addr"));
        nodes.insert(id, Arc::new(RaftNode::start(cfg).await.expect("start")));
        dirs.push(dir);
    }
    let members = nodes.iter().map(|(id, n)| (*id, n.node())).collect();
    nodes[&1].initialize(members).await.expect("initialize");
    Cluster { nodes, _dirs: dirs }
}

impl Cluster {
    async fn leader(&self) -> Arc<RaftNode> {
        let start = Instant::now();
        loop {
            for n in self.nodes.values() {
                if n.leader() == Some(n.id) {
                    return n.clone();
                }
            }
            assert!(start.elapsed() < Duration::from_secs(30), "no leader");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

static KEYS: AtomicU64 = AtomicU64::new(0);
static CLOCK: AtomicU64 = AtomicU64::new(1_000_000_000);

fn cmd(principal: Principal, action: Action) -> Command {
    let k = KEYS.fetch_add(1, Ordering::Relaxed);
    let ts = CLOCK.fetch_add(1, Ordering::Relaxed);
    Command::new(principal, action, Some(IdempotencyKey::new(format!("b{k}")).expect("key")), Timestamp(ts))
}

/// A setup write; a new leader may still be establishing itself, so "not leader" is retried.
async fn must(leader: &RaftNode, c: Command) -> kungfu_core::ActionResult {
    let start = Instant::now();
    loop {
        match leader.write(c.clone()).await {
            Ok((Response::Applied { outcome: Ok(r), .. }, _)) => return r.result,
            Err(WriteError::NotLeader { .. }) if start.elapsed() < Duration::from_secs(30) => {
                tokio::time::sleep(Duration::from_millis(10)).await
            }
            other => panic!("setup write failed: {other:?}"),
        }
    }
}

struct Run {
    ops: u64,
    secs: f64,
    lat: Vec<Duration>,
}

async fn run(nodes: u64, writers: u64, seconds: u64, entry_bytes: usize, base: &std::path::Path) -> Run {
    let c = cluster(nodes, base).await;
    let leader = c.leader().await;
    // One agent and one thread per writer.
    let mut threads = Vec::new();
    for w in 0..writers {
        let secret = format!("kf_bench_secret_{w:016}_{}", KEYS.load(Ordering::Relaxed));
        let agent = match must(
            &leader,
            cmd(
                Principal::Registrar,
                Action::RegisterAgent {
                    key_hash: kungfu_core::secret::hash_secret(&secret),
                    key_fingerprint: kungfu_core::secret::fingerprint(&secret),
                },
            ),
        )
        .await
        {
            kungfu_core::ActionResult::AgentRegistered { agent, .. } => agent,
            other => panic!("{other:?}"),
        };
        let thread = match must(
            &leader,
            cmd(Principal::Agent(agent), Action::CreateThread { subject: Content::from("b"), grant: None }),
        )
        .await
        {
            kungfu_core::ActionResult::ThreadCreated { thread, .. } => thread,
            other => panic!("{other:?}"),
        };
        threads.push((agent, thread));
    }
    let body = "x".repeat(entry_bytes);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (agent, thread) in threads {
        let leader = leader.clone();
        let body = body.clone();
        tasks.push(tokio::spawn(async move { writer(leader, agent, thread, body, deadline).await }));
    }
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.expect("writer"));
    }
    let secs = started.elapsed().as_secs_f64();
    for n in c.nodes.values() {
        let _ = n.raft.shutdown().await;
    }
    Run { ops: lat.len() as u64, secs, lat }
}

async fn writer(
    leader: Arc<RaftNode>,
    agent: AgentId,
    thread: ThreadId,
    body: String,
    deadline: Instant,
) -> Vec<Duration> {
    let mut lat = Vec::new();
    while Instant::now() < deadline {
        let c = cmd(
            Principal::Agent(agent),
            Action::Post {
                thread,
                body: PostBody::Content(Content::from(body.as_str())),
                reply_to: None,
                ask: None,
                task_ref: None,
                assignment: None,
            },
        );
        let t0 = Instant::now();
        match leader.write(c).await {
            Ok((Response::Applied { outcome: Ok(_), .. }, _)) => lat.push(t0.elapsed()),
            Ok(other) => panic!("write not applied: {other:?}"),
            Err(WriteError::NotLeader { .. }) => panic!("leader changed during the benchmark"),
            Err(e) => panic!("write failed: {e}"),
        }
    }
    lat
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn main() {
    let nodes = list("--nodes", "1,3");
    let writers = list("--writers", "1,16,64,256");
    let seconds: u64 = arg("--seconds", "10").parse().unwrap_or(10);
    let entry_bytes: usize = arg("--entry-bytes", "1024").parse().unwrap_or(1024);
    let base = std::path::PathBuf::from(arg("--dir", &std::env::temp_dir().to_string_lossy()));
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    println!("| nodes | writers | actions | seconds | actions/s | p50 ms | p90 ms | p99 ms | max ms |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &n in &nodes {
        for &w in &writers {
            let mut r = rt.block_on(run(n, w, seconds, entry_bytes, &base));
            r.lat.sort();
            println!(
                "| {n} | {w} | {} | {:.1} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} |",
                r.ops,
                r.secs,
                r.ops as f64 / r.secs,
                pct(&r.lat, 0.50),
                pct(&r.lat, 0.90),
                pct(&r.lat, 0.99),
                pct(&r.lat, 1.0)
            );
        }
    }
}
