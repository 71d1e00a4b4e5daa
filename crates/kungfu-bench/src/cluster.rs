//! The fresh local cluster one benchmark run starts for itself: `kungfud` processes on loopback,
//! in a new directory of their own, killed and removed when the [`Cluster`] is dropped — at the
//! end of the run, on an error, and when the run is interrupted (the caller drops it on Ctrl-C).
//!
//! Each node runs in its own process group, so a Ctrl-C in the terminal reaches only `kungfu`,
//! which then kills the nodes itself. Nodes are stopped with SIGKILL: their data is removed
//! anyway, and a kill cannot hang. The per-agent rate limits are off (`[rate_limits]` all 0): a
//! benchmark's agents write far faster than the defaults allow one agent, on purpose; every other
//! setting is the server's default. A [`Runner`] may put a command before `kungfud` (valgrind, for
//! `kungfu bench instructions`); every other bench runs the binary itself.

use crate::args::{BenchCluster, BenchFiles};
use kungfu_cli::error::CliError;
use kungfu_client::{Client, ClientOptions, pb};
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the cluster may take to elect a leader that every node knows.
pub const ELECT_BOUND: Duration = Duration::from_secs(30);

/// How the nodes' processes are run.
#[derive(Debug, Clone)]
pub struct Runner {
    /// A command and its arguments put before `kungfud --config …` (empty: `kungfud` runs
    /// itself). Each node runs in the run's directory, so a relative path here names a file in it.
    pub prefix: Vec<OsString>,
    /// How long the cluster may take to elect a leader that every node knows.
    pub elect_bound: Duration,
    /// TOML appended to every node's config (whole tables, such as `bench wake`'s `[wake]`).
    pub extra_config: String,
}

impl Default for Runner {
    fn default() -> Runner {
        Runner { prefix: Vec::new(), elect_bound: ELECT_BOUND, extra_config: String::new() }
    }
}

/// One node: its id, addresses, files and process (None while killed).
#[derive(Debug)]
struct Node {
    id: u16,
    api: String,
    /// Where the node serves `/metrics` (its write path's counters, issue #30).
    metrics: String,
    /// Its HTTP listener: the MCP door at `/mcp` (`bench instructions` counts an MCP post).
    http: String,
    config: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

/// A running local cluster. Dropping it kills every node and removes its directory (unless kept).
#[derive(Debug)]
pub struct Cluster {
    dir: PathBuf,
    binary: PathBuf,
    runner: Runner,
    token: String,
    nodes: Vec<Node>,
    keep: bool,
}

pub(super) fn io_error(what: &str, path: &Path, e: std::io::Error) -> CliError {
    CliError::other(format!("cannot {what} {}: {e}", path.display()))
}

/// `count` API ports and `count` raft ports: from `base` (checked free), or chosen by the system.
pub(super) fn ports(count: u16, base: Option<u16>) -> Result<Vec<(u16, u16)>, CliError> {
    if let Some(base) = base {
        if base < 1024 || u32::from(base) + 100 + u32::from(count) > 65535 {
            return Err(CliError::usage(format!(
                "--base-port {base} leaves no room for {count} API ports and {count} raft ports (BASE+100…) below 65536"
            )));
        }
        let pairs: Vec<(u16, u16)> = (0..count).map(|i| (base + i, base + 100 + i)).collect();
        for (i, (api, raft)) in pairs.iter().enumerate() {
            for port in [api, raft] {
                if let Err(e) = std::net::TcpListener::bind(("127.0.0.1", *port)) {
                    return Err(CliError::usage(format!(
                        "127.0.0.1:{port} (node {}) is not free: {e}; choose other ports with --base-port, or leave it out",
                        i + 1
                    )));
                }
            }
        }
        return Ok(pairs);
    }
    // Hold every listener until all ports are chosen, so no port is handed out twice; the nodes
    // bind them a moment later (another program could take one in between: the node then exits
    // at start and its log says so).
    let mut held = Vec::new();
    for _ in 0..2 * count {
        let l = std::net::TcpListener::bind("127.0.0.1:0")
            .map_err(|e| CliError::other(format!("cannot find a free port on 127.0.0.1: {e}")))?;
        let port = l.local_addr().map_err(|e| CliError::other(format!("cannot read a bound port: {e}")))?.port();
        held.push((l, port));
    }
    let ports: Vec<u16> = held.iter().map(|(_, p)| *p).collect();
    Ok((0..usize::from(count)).map(|i| (ports[2 * i], ports[2 * i + 1])).collect())
}

/// A free loopback address (another program could take it before the node binds it: the node
/// then exits at start and its log says so).
fn free_port() -> Result<String, CliError> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| CliError::other(format!("cannot find a free port on 127.0.0.1: {e}")))?;
    let addr = l.local_addr().map_err(|e| CliError::other(format!("cannot read a bound port: {e}")))?;
    Ok(addr.to_string())
}

/// The config of one node: the shape of `cluster-config/three/`, rate limits off.
fn config_text(id: u16, all: &[(u16, String, String)], data: &Path, token: &str) -> String {
    let (_, api, raft) = &all[usize::from(id) - 1];
    let mut text = format!(
        "# Node {id} of a {n}-node cluster written by `kungfu bench`; removed with its data at the end.\n\
         node_id = {id}\n\
         cluster_id = \"kungfu-bench\"\n\
         data_dir = \"{data}\"\n\
         api_listen = \"{api}\"\n\
         raft_listen = \"{raft}\"\n\
         bootstrap = true\n\
         operator_token = \"{token}\"\n\n\
         # A benchmark's agents write faster than one agent may by default.\n\
         [rate_limits]\n\
         writes_per_second_per_agent = 0\n\
         reads_per_second_per_agent = 0\n\
         registrations_per_minute_per_ip = 0\n",
        n = all.len(),
        data = data.display(),
    );
    if all.len() > 1 {
        for (peer, api, raft) in all {
            text.push_str(&format!("\n[[peers]]\nid = {peer}\nraft = \"{raft}\"\napi = \"{api}\"\n"));
        }
    }
    text
}

/// The last `n` lines of a log file.
pub(super) fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A new directory for one cluster of a run, `PREFIX-PID-TAG`, under `--data-dir` or the
/// temporary directory; returns it and the random key its tag was cut from.
pub(super) fn run_dir(files: &BenchFiles, prefix: &str) -> Result<(PathBuf, String), CliError> {
    let parent = match &files.data_dir {
        Some(d) => PathBuf::from(d),
        None => std::env::temp_dir(),
    };
    std::fs::create_dir_all(&parent).map_err(|e| io_error("create", &parent, e))?;
    let parent = parent.canonicalize().map_err(|e| io_error("resolve", &parent, e))?;
    let tag = kungfu_client::new_idempotency_key()?;
    let dir = parent.join(format!("{prefix}-{}-{}", std::process::id(), &tag[4..12]));
    std::fs::create_dir(&dir).map_err(|e| io_error("create", &dir, e))?;
    Ok((dir, tag))
}

/// Starts `command` in a process group of its own (a Ctrl-C in the terminal reaches only
/// `kungfu`, which kills its children itself), with no stdin and stdout and stderr appended to
/// `log`.
pub(super) fn spawn_logged(mut command: Command, log: &Path) -> Result<Child, CliError> {
    let out = std::fs::OpenOptions::new().create(true).append(true).open(log).map_err(|e| io_error("open", log, e))?;
    let err = out.try_clone().map_err(|e| io_error("open", log, e))?;
    command
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .process_group(0)
        .spawn()
        .map_err(|e| CliError::other(format!("cannot start {}: {e}", command.get_program().to_string_lossy())))
}

/// The command of one node: `kungfud --config CONFIG`, after the runner's prefix if it has one,
/// run in the run's directory `dir`.
fn node_command(runner: &Runner, binary: &Path, config: &Path, dir: &Path) -> Command {
    let mut command = match runner.prefix.split_first() {
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args).arg(binary);
            c
        }
        None => Command::new(binary),
    };
    command.arg("--config").arg(config).current_dir(dir);
    command
}

impl Cluster {
    /// Writes the configs into a new directory under `--data-dir` (or the temporary directory),
    /// starts every node as `runner` says and waits (at most its `elect_bound`, [`ELECT_BOUND`]
    /// by default) until a leader serves and every node knows it.
    pub async fn start(opts: &BenchCluster, binary: PathBuf, runner: Runner) -> Result<Cluster, CliError> {
        let (dir, tag) = run_dir(&opts.files, "kungfu-bench")?;
        let token = format!("bench-{}", tag.trim_start_matches("sdk-"));
        // From here on, dropping `cluster` removes the directory and kills what started.
        let mut cluster = Cluster { dir, binary, runner, token, nodes: Vec::new(), keep: opts.files.keep };
        let addrs: Vec<(u16, String, String)> = ports(opts.nodes, opts.base_port)?
            .into_iter()
            .zip(1..)
            .map(|((api, raft), id)| (id, format!("127.0.0.1:{api}"), format!("127.0.0.1:{raft}")))
            .collect();
        for (id, api, _) in &addrs {
            let config = cluster.dir.join(format!("node{id}.toml"));
            let data = cluster.dir.join(format!("node{id}"));
            let (metrics, http) = (free_port()?, free_port()?);
            // Top-level keys, so they go before the tables of `config_text`.
            let text = format!(
                "metrics_listen = \"{metrics}\"\nhttp_listen = \"{http}\"\n{}{}",
                config_text(*id, &addrs, &data, &cluster.token),
                cluster.runner.extra_config
            );
            std::fs::write(&config, text).map_err(|e| io_error("write", &config, e))?;
            let log = cluster.dir.join(format!("node{id}.log"));
            cluster.nodes.push(Node { id: *id, api: api.clone(), metrics, http, config, log, child: None });
        }
        for id in 1..=opts.nodes {
            cluster.spawn(id)?;
        }
        cluster.wait_for_leader(cluster.runner.elect_bound).await?;
        Ok(cluster)
    }

    /// [`Cluster::start`] with the default [`Runner`], telling on stderr how long it took and
    /// which node leads; returns the cluster and its leader.
    pub async fn launch(opts: &BenchCluster, binary: PathBuf) -> Result<(Cluster, u16), CliError> {
        Cluster::launch_with(opts, binary, Runner::default()).await
    }

    /// [`Cluster::launch`], each node run as `runner` says.
    pub async fn launch_with(opts: &BenchCluster, binary: PathBuf, runner: Runner) -> Result<(Cluster, u16), CliError> {
        super::progress(format!("starting {} kungfud node(s)", opts.nodes));
        let started = Instant::now();
        let mut cluster = Cluster::start(opts, binary, runner).await?;
        let leader = cluster.wait_for_leader(cluster.runner.elect_bound).await?;
        super::progress(format!(
            "{} node(s) up in {:.1} s, node {leader} leads; files in {}",
            opts.nodes,
            started.elapsed().as_secs_f64(),
            cluster.dir().display()
        ));
        Ok((cluster, leader))
    }

    /// The run's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every node's API address, in node order.
    pub fn endpoints(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.api.clone()).collect()
    }

    /// The endpoints with the given node's first: clients start there, so a call goes to the
    /// leader directly rather than through a follower's forwarding.
    pub fn endpoints_from(&self, first: u16) -> Vec<String> {
        let mut all = self.endpoints();
        if let Some(i) = self.nodes.iter().position(|n| n.id == first) {
            let e = all.remove(i);
            all.insert(0, e);
        }
        all
    }

    fn node(&mut self, id: u16) -> Result<&mut Node, CliError> {
        self.nodes.iter_mut().find(|n| n.id == id).ok_or_else(|| CliError::other(format!("no node {id}")))
    }

    /// Starts node `id`'s process, appending to its log.
    fn spawn(&mut self, id: u16) -> Result<(), CliError> {
        let command = {
            let node =
                self.nodes.iter().find(|n| n.id == id).ok_or_else(|| CliError::other(format!("no node {id}")))?;
            node_command(&self.runner, &self.binary, &node.config, &self.dir)
        };
        let node = self.node(id)?;
        node.child = Some(spawn_logged(command, &node.log)?);
        Ok(())
    }

    /// The process id of every running node, in node order.
    /// Every node's `/metrics` address, in node order.
    /// Node `id`'s HTTP listener (the MCP door at `/mcp`), `host:port`.
    pub fn http(&self, id: u16) -> Result<String, CliError> {
        let node = self.nodes.iter().find(|n| n.id == id).ok_or_else(|| CliError::other(format!("no node {id}")))?;
        Ok(node.http.clone())
    }

    pub fn metrics(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.metrics.clone()).collect()
    }

    pub fn pids(&self) -> Vec<(u16, u32)> {
        self.nodes.iter().filter_map(|n| n.child.as_ref().map(|c| (n.id, c.id()))).collect()
    }

    /// SIGKILL node `id` (a crash: no clean shutdown) and reap it.
    pub fn kill(&mut self, id: u16) -> Result<(), CliError> {
        if let Some(mut child) = self.node(id)?.child.take() {
            // A process that already exited is what we want; reaping it is all that is left.
            let _ = child.kill();
            let _ = child.wait();
        }
        Ok(())
    }

    /// Starts node `id` again on its data (after [`Cluster::kill`]).
    pub fn restart(&mut self, id: u16) -> Result<(), CliError> {
        self.spawn(id)
    }

    /// A client of node `id` alone, with the operator token: admin calls are never forwarded,
    /// so this is how one node's own view is read.
    pub async fn admin(&self, id: u16, timeout: Duration) -> Result<Client, CliError> {
        let api = self.nodes.iter().find(|n| n.id == id).map(|n| n.api.clone());
        let api = api.ok_or_else(|| CliError::other(format!("no node {id}")))?;
        let options = ClientOptions { max_retries: 0, call_timeout: timeout, ..ClientOptions::default() };
        Ok(Client::connect(vec![api], Some(self.token.clone()), options).await?)
    }

    /// One node's `ClusterStatus`, or None when it does not answer within a second.
    pub async fn status(&self, id: u16) -> Option<pb::ClusterStatusResponse> {
        let client = self.admin(id, Duration::from_secs(1)).await.ok()?;
        client.cluster_status(pb::ClusterStatusRequest {}).await.ok()
    }

    /// The node that answers as leader now, with its status; None when none does.
    pub async fn leader(&self) -> Option<(u16, pb::ClusterStatusResponse)> {
        for node in self.nodes.iter().filter(|n| n.child.is_some()) {
            if let Some(s) = self.status(node.id).await {
                if s.role == pb::RaftRole::Leader as i32 {
                    return Some((node.id, s));
                }
            }
        }
        None
    }

    /// An error when a node that should run has exited, naming it and showing the end of its log.
    fn check_running(&mut self) -> Result<(), CliError> {
        for node in &mut self.nodes {
            let Some(child) = node.child.as_mut() else { continue };
            if let Ok(Some(status)) = child.try_wait() {
                node.child = None;
                return Err(CliError::other(format!(
                    "node {} exited ({status}); its log ({}) ends:\n{}",
                    node.id,
                    node.log.display(),
                    tail(&node.log, 15)
                )));
            }
        }
        Ok(())
    }

    /// Waits until one node leads and every running node names it as leader; returns its id.
    pub async fn wait_for_leader(&mut self, bound: Duration) -> Result<u16, CliError> {
        let start = Instant::now();
        loop {
            self.check_running()?;
            if let Some((id, _)) = self.leader().await {
                let mut all_know = true;
                for node in self.nodes.iter().filter(|n| n.child.is_some()) {
                    let known = self.status(node.id).await.and_then(|s| s.leader_id);
                    all_know &= known == Some(u64::from(id));
                }
                if all_know {
                    return Ok(id);
                }
            }
            if start.elapsed() > bound {
                let logs: Vec<String> = self.nodes.iter().map(|n| n.log.display().to_string()).collect();
                return Err(CliError::other(format!(
                    "the cluster did not elect a leader that every node knows within {}s; see the logs ({}){}",
                    bound.as_secs(),
                    logs.join(", "),
                    if self.keep { "" } else { " (pass --keep to keep them)" }
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                // Gone already is fine: all that matters is that nothing is left running.
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if self.keep {
            eprintln!("bench: kept configs, data and logs in {}", self.dir.display());
        } else if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!("bench: could not remove {}: {e}", self.dir.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chosen_ports_are_distinct() {
        let pairs = ports(3, None).expect("ports");
        let mut all: Vec<u16> = pairs.iter().flat_map(|(a, r)| [*a, *r]).collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 6);
    }

    #[test]
    fn a_base_port_that_is_taken_is_refused_naming_it() {
        let held = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = held.local_addr().expect("addr").port();
        let err = ports(1, Some(port)).expect_err("the port is held");
        assert!(err.message.contains(&format!("127.0.0.1:{port}")), "{}", err.message);
        assert!(err.message.contains("not free"), "{}", err.message);
    }

    #[test]
    fn a_runner_prefix_goes_before_kungfud_and_none_runs_kungfud_itself() {
        let (bin, config, dir) = (Path::new("/b/kungfud"), Path::new("/d/node1.toml"), Path::new("/d"));
        let plain = node_command(&Runner::default(), bin, config, dir);
        assert_eq!(plain.get_program(), "/b/kungfud");
        assert_eq!(plain.get_args().collect::<Vec<_>>(), ["--config", "/d/node1.toml"]);
        assert_eq!(plain.get_current_dir(), Some(dir));
        let runner = Runner { prefix: vec!["valgrind".into(), "--tool=callgrind".into()], ..Runner::default() };
        let wrapped = node_command(&runner, bin, config, dir);
        assert_eq!(wrapped.get_program(), "valgrind");
        assert_eq!(
            wrapped.get_args().collect::<Vec<_>>(),
            ["--tool=callgrind", "/b/kungfud", "--config", "/d/node1.toml"]
        );
        assert_eq!(wrapped.get_current_dir(), Some(dir));
    }

    #[test]
    fn configs_turn_rate_limits_off_and_name_peers_only_in_a_cluster() {
        let all = vec![(1, "127.0.0.1:1".to_string(), "127.0.0.1:2".to_string())];
        let one = config_text(1, &all, Path::new("/d/node1"), "bench-token-0123456789");
        assert!(one.contains("writes_per_second_per_agent = 0"));
        assert!(one.contains("registrations_per_minute_per_ip = 0"));
        assert!(!one.contains("[[peers]]"));
        let three: Vec<(u16, String, String)> =
            (1..=3).map(|i| (i, format!("127.0.0.1:{i}"), format!("127.0.0.1:{}", 100 + i))).collect();
        let second = config_text(2, &three, Path::new("/d/node2"), "bench-token-0123456789");
        assert!(second.contains("node_id = 2\n") && second.contains("api_listen = \"127.0.0.1:2\""));
        assert_eq!(second.matches("[[peers]]").count(), 3);
    }
}
