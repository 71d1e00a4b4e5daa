//! The harness of the black-box tests: starts real `kungfud` processes from `cluster-config/`-style
//! TOML files on free loopback ports, talks to them only over the public gRPC API, kills and
//! restarts them, and cleans up every process and directory it made. Every wait is a bounded poll.

use kungfu_api::pb;
use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// Every wait gives up after this long: a failure, never a hang.
pub const BOUND: Duration = Duration::from_secs(60);

/// The `kungfud` binary built with the workspace (next to the test's own `deps/` directory).
pub fn kungfud() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target directory");
    let bin = dir.join("kungfud");
    assert!(bin.exists(), "{} is missing: build the workspace first (cargo nextest run --workspace)", bin.display());
    bin
}

/// Ports [`free_port`] hands out: below the kernel's ephemeral range (32768–60999 on Linux), so
/// the outgoing connections of every test running beside this one, which take their local ports
/// from that range, cannot take a port between its release here and the node's bind (that race
/// once failed a cluster start with "Address already in use").
const TEST_PORTS: std::ops::Range<u16> = 20_000..32_000;

/// A free TCP port on loopback for a node to bind: checked free here, then released.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let span = u64::from(TEST_PORTS.end - TEST_PORTS.start);
    // Each test process starts at its own place in the range (its pid and the time), so parallel
    // test processes rarely try the same ports.
    let seed = u64::from(std::process::id()).wrapping_mul(7919)
        ^ std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0)
            as u64;
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = TEST_PORTS.start + (seed.wrapping_add(n.wrapping_mul(97)) % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {TEST_PORTS:?} on 127.0.0.1");
}

/// One node process and everything needed to restart it.
#[derive(Debug)]
pub struct NodeProc {
    pub id: u64,
    pub api: SocketAddr,
    pub raft: SocketAddr,
    pub config: PathBuf,
    /// Environment variables the process starts with, besides `KUNGFU_LOG`.
    pub env: Vec<(String, String)>,
    child: Option<Child>,
}

impl NodeProc {
    /// A node process for a config file the caller wrote (a node outside the harness's cluster,
    /// e.g. one joining it later or a restored one). Not started yet.
    pub fn for_config(id: u64, api: SocketAddr, raft: SocketAddr, config: PathBuf) -> NodeProc {
        NodeProc { id, api, raft, config, env: Vec::new(), child: None }
    }

    /// Starts the process (again, after a kill or terminate).
    pub fn spawn(&mut self) {
        self.start();
    }

    pub fn start(&mut self) {
        assert!(self.child.is_none(), "node {} already running", self.id);
        let log = std::fs::File::create(self.config.with_extension("log")).expect("log file");
        let child = Command::new(kungfud())
            .arg("--config")
            .arg(&self.config)
            .env("KUNGFU_LOG", "info")
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(Stdio::from(log.try_clone().expect("log")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawn kungfud");
        self.child = Some(child);
    }

    /// SIGKILL: no clean shutdown, as a crash.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait for a clean exit; returns whether it exited successfully.
    pub fn terminate(&mut self) -> bool {
        let Some(mut c) = self.child.take() else { return false };
        let _ = Command::new("kill").arg("-TERM").arg(c.id().to_string()).status();
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = c.try_wait() {
                return status.success();
            }
            if start.elapsed() > BOUND {
                let _ = c.kill();
                let _ = c.wait();
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGSTOP: the process keeps its sockets and state but does nothing (a stalled or partitioned
    /// node). A paused node is still killed on drop.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// SIGCONT after [`NodeProc::pause`].
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, sig: &str) {
        let child = self.child.as_ref().unwrap_or_else(|| panic!("node {} is not running", self.id));
        let ok = Command::new("kill").arg(sig).arg(child.id().to_string()).status().is_ok_and(|s| s.success());
        assert!(ok, "kill {sig} node {}", self.id);
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Waits, at most `bound`, for the process to exit by itself, and returns how it exited; None
    /// when it still runs then (it is left running, and killed on drop).
    pub fn wait_exit(&mut self, bound: Duration) -> Option<std::process::ExitStatus> {
        let start = Instant::now();
        loop {
            let child = self.child.as_mut()?;
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Some(status);
            }
            if start.elapsed() > bound {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the process has exited by itself (without waiting for it).
    pub fn has_exited(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(Some(_))))
    }

    /// The node's log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.config.with_extension("log")).unwrap_or_default()
    }
}

impl Drop for NodeProc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The `[raft]` settings of test clusters: fast heartbeats and elections.
pub const TEST_RAFT: &str = "heartbeat_ms = 50\nelection_timeout_min_ms = 300\nelection_timeout_max_ms = 600";

/// A cluster of node processes in a temporary directory.
#[derive(Debug)]
pub struct Cluster {
    pub nodes: BTreeMap<u64, NodeProc>,
    pub dir: tempfile::TempDir,
}

impl Cluster {
    /// Writes one config file per node (the shape of `cluster-config/three/`) and starts them all.
    pub fn start(n: u64, extra: &str) -> Cluster {
        Cluster::start_with_raft(n, extra, TEST_RAFT)
    }

    /// [`Cluster::start`] with another `[raft]` table body (timing, log retention).
    pub fn start_with_raft(n: u64, extra: &str, raft_settings: &str) -> Cluster {
        Cluster::start_named(n, extra, raft_settings, "127.0.0.1")
    }

    /// [`Cluster::start_with_raft`] with the members' addresses in the membership written with
    /// `host` (e.g. `localhost`, as a deployment names its nodes by DNS) instead of an IP; the
    /// nodes still listen on 127.0.0.1.
    pub fn start_named(n: u64, extra: &str, raft_settings: &str, host: &str) -> Cluster {
        let dir = tempfile::tempdir().expect("tempdir");
        let ports: Vec<(u64, u16, u16)> = (1..=n).map(|id| (id, free_port(), free_port())).collect();
        let mut peers = String::new();
        if n > 1 {
            for (id, api, raft) in &ports {
                peers.push_str(&format!("\n[[peers]]\nid = {id}\nraft = \"{host}:{raft}\"\napi = \"{host}:{api}\"\n"));
            }
        }
        let mut nodes = BTreeMap::new();
        for (id, api, raft) in &ports {
            let config = dir.path().join(format!("node{id}.toml"));
            let data = dir.path().join(format!("data{id}"));
            let text = format!(
                "node_id = {id}\ncluster_id = \"test\"\ndata_dir = \"{}\"\napi_listen = \"127.0.0.1:{api}\"\nraft_listen = \"127.0.0.1:{raft}\"\nbootstrap = true\n{extra}\n\n[raft]\n{raft_settings}\n{peers}",
                data.display()
            );
            std::fs::write(&config, text).expect("write config");
            let mut node = NodeProc {
                id: *id,
                api: format!("127.0.0.1:{api}").parse().expect("addr"),
                raft: format!("127.0.0.1:{raft}").parse().expect("addr"),
                config,
                env: Vec::new(),
                child: None,
            };
            node.start();
            nodes.insert(*id, node);
        }
        Cluster { nodes, dir }
    }

    pub fn logs(&self) -> String {
        self.nodes.values().map(|n| format!("--- node {} ---\n{}", n.id, n.log())).collect()
    }
}

/// A client of one node's public API, optionally as an agent.
#[derive(Clone, Debug)]
pub struct Client {
    pub channel: Channel,
    pub key: Option<String>,
}

/// Connects to `addr`, retrying until the node listens (bounded).
pub async fn connect(addr: SocketAddr) -> Channel {
    let start = Instant::now();
    loop {
        match tonic::transport::Endpoint::from_shared(format!("http://{addr}")).expect("endpoint").connect().await {
            Ok(c) => return c,
            Err(e) => {
                assert!(start.elapsed() < BOUND, "node at {addr} never accepted connections: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// The node that every node of `cluster` agrees leads, asked with `operator_token` (each node's
/// `ClusterStatus`). Bounded by [`BOUND`], after which it fails with the cluster's logs.
pub async fn agreed_leader(cluster: &Cluster, operator_token: &str) -> u64 {
    let start = Instant::now();
    loop {
        let mut seen = Vec::new();
        for node in cluster.nodes.values() {
            let mut req = tonic::Request::new(pb::ClusterStatusRequest {});
            req.metadata_mut().insert("authorization", format!("Bearer {operator_token}").parse().expect("header"));
            let admin = pb::admin_service_client::AdminServiceClient::new(connect(node.api).await);
            if let Ok(s) = admin.clone().cluster_status(req).await {
                let s = s.into_inner();
                seen.push((s.leader_id, s.node_id, s.role == pb::RaftRole::Leader as i32));
            }
        }
        if let Some((Some(l), _, _)) = seen.first().copied() {
            if seen.len() == cluster.nodes.len()
                && seen.iter().all(|(x, _, _)| *x == Some(l))
                && seen.iter().any(|(_, id, leads)| *id == l && *leads)
            {
                return l;
            }
        }
        assert!(start.elapsed() < BOUND, "no agreed leader: {seen:?}\n{}", cluster.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Registers an agent through `anon` (a client without a key), retrying until the node serves;
/// bounded by [`BOUND`], after which it fails with `logs()`. Returns the agent's id and a client
/// acting as it on the same channel.
pub async fn register_when_serving(anon: &Client, key: &str, logs: impl Fn() -> String) -> (String, Client) {
    let start = Instant::now();
    loop {
        match anon.agents().register(anon.req(pb::RegisterRequest { idempotency_key: key.into() })).await {
            Ok(r) => {
                let r = r.into_inner();
                let Some(pb::receipt::Result::AgentRegistered(a)) = r.receipt.and_then(|r| r.result) else {
                    panic!("no agent in the receipt of registration {key}")
                };
                return (a.agent, Client { channel: anon.channel.clone(), key: Some(r.agent_key) });
            }
            Err(s) => {
                assert!(start.elapsed() < BOUND, "registration {key} never succeeded: {s}\n{}", logs());
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

impl Client {
    /// Adds the agent's bearer key to a request.
    pub fn req<T>(&self, msg: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(msg);
        if let Some(k) = &self.key {
            r.metadata_mut().insert("authorization", format!("Bearer {k}").parse().expect("header"));
        }
        r
    }

    /// Like [`Client::req`], but asks this node only: a follower answers NOT_LEADER instead of
    /// forwarding the call to the leader.
    pub fn req_local<T>(&self, msg: T) -> tonic::Request<T> {
        let mut r = self.req(msg);
        r.metadata_mut().insert("kungfu-forwarded", "1".parse().expect("header"));
        r
    }

    pub fn agents(&self) -> pb::agent_service_client::AgentServiceClient<Channel> {
        pb::agent_service_client::AgentServiceClient::new(self.channel.clone())
    }
    pub fn memories(&self) -> pb::memory_service_client::MemoryServiceClient<Channel> {
        pb::memory_service_client::MemoryServiceClient::new(self.channel.clone())
    }
    pub fn threads(&self) -> pb::thread_service_client::ThreadServiceClient<Channel> {
        pb::thread_service_client::ThreadServiceClient::new(self.channel.clone())
    }
    pub fn assignments(&self) -> pb::assignment_service_client::AssignmentServiceClient<Channel> {
        pb::assignment_service_client::AssignmentServiceClient::new(self.channel.clone())
    }
    pub fn tasks(&self) -> pb::task_service_client::TaskServiceClient<Channel> {
        pb::task_service_client::TaskServiceClient::new(self.channel.clone())
    }
    /// A thread this agent governs that `worker` joined as a speaker, created and joined with
    /// these idempotency keys; its id.
    pub async fn thread_with_speaker(&self, worker: &Client, create_key: String, join_key: String) -> String {
        let created = self
            .threads()
            .create(self.req(pb::CreateThreadRequest {
                idempotency_key: create_key,
                subject: content("work"),
                grant: Some(pb::GrantSpec { role: pb::Role::Speaker as i32 }),
            }))
            .await
            .expect("create thread")
            .into_inner();
        let Some(pb::receipt::Result::ThreadCreated(t)) = created.receipt.and_then(|r| r.result) else {
            panic!("a thread's creation answered no ThreadCreated receipt")
        };
        worker
            .threads()
            .join(worker.req(pb::JoinRequest { idempotency_key: join_key, grant_secret: created.grant_secret }))
            .await
            .expect("join");
        t.thread
    }

    pub fn turn(&self) -> pb::turn_service_client::TurnServiceClient<Channel> {
        pb::turn_service_client::TurnServiceClient::new(self.channel.clone())
    }
}

/// The stable code of a failed call (`NOT_FOUND`, `NOT_LEADER`, ...).
pub fn code(s: &tonic::Status) -> String {
    kungfu_api::status_rejection(s).map(|r| r.code.as_str().to_string()).unwrap_or_else(|| format!("{:?}", s.code()))
}

/// Content as the wire carries it.
pub fn content(text: &str) -> Option<pb::Content> {
    Some(pb::Content { body: text.as_bytes().to_vec() })
}

pub mod conformance;

/// The `http://HOST:PORT/mcp` address a node's start-up line names (its HTTP listener may have
/// bound port 0). Bounded.
pub async fn mcp_addr(node: &NodeProc) -> std::net::SocketAddr {
    let start = Instant::now();
    loop {
        let log = node.log();
        if let Some(at) = log.find("MCP at http://") {
            let rest = &log[at + "MCP at http://".len()..];
            let addr = rest.split("/mcp").next().expect("a URL").to_string();
            return addr.parse().unwrap_or_else(|e| panic!("the start-up line names {addr:?}: {e}"));
        }
        assert!(start.elapsed() < BOUND, "node {} never named its MCP URL:\n{log}", node.id);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One HTTP/1.1 GET of `path` at `addr` (the metrics listener, the probes); the whole answer,
/// status line and headers included.
pub async fn http_get(addr: SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect over HTTP");
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .expect("send");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("read");
    out
}
