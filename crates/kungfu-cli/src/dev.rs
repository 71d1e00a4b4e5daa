//! `kungfu dev`: a local cluster of `kungfud` processes for people trying Kungfu.
//!
//! `dev up` writes one config per node in the shape of `cluster-config/three/` into a directory
//! (default `./.kungfu-dev`), starts each node in the background with its log and pid file there,
//! waits (bounded) until a leader serves, prints the endpoints and each node's MCP URL, and saves
//! the endpoints as the profile `dev`.
//! `dev down` stops the nodes with SIGTERM (then SIGKILL after a bounded wait) and removes the pid
//! files; `--purge` removes the whole directory. `dev restart N` stops node N if it runs and starts
//! it again from the same config and data, through the same [`stop`] and [`spawn`] as `down` and
//! `up`. The nodes get a generated operator token, kept in `<dir>/operator-token` (mode 0600) and
//! named in the profile `dev`, so `kungfu --profile dev cluster status` needs no `--key`.

use crate::cli::{DEFAULT_DIR, DevCmd, DevDir};
use crate::error::CliError;
use crate::profile::{self, Profile};
use kungfu_client::{Client, ClientOptions, pb};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The profile `dev up` writes.
pub const PROFILE: &str = "dev";

/// How long `dev down` waits after SIGTERM before it sends SIGKILL.
const TERM_WAIT: Duration = Duration::from_secs(15);

/// Runs a `dev` command.
pub async fn run(cmd: DevCmd) -> Result<(), CliError> {
    match cmd {
        DevCmd::Up { dir, nodes, base_port, kungfud, wait_secs } => {
            up(&dir, nodes, base_port, kungfud, Duration::from_secs(wait_secs.max(1))).await
        }
        DevCmd::Down { dir, purge } => down(&dir, purge),
        DevCmd::Status { dir } => status(&dir),
        DevCmd::Restart { dir, node, kungfud, wait_secs } => {
            restart(&dir, node, kungfud, Duration::from_secs(wait_secs.max(1))).await
        }
    }
}

/// One node of the local cluster: its id and addresses.
struct Node {
    id: u16,
    api: String,
    raft: String,
    /// The HTTP listener, where MCP is served at `/mcp`.
    http: String,
}

/// How far above the API port each node's raft and HTTP (MCP) ports are, as in `cluster-config/`.
const RAFT_OFFSET: u16 = 100;
const HTTP_OFFSET: u16 = 200;

fn io_error(what: &str, path: &Path, e: std::io::Error) -> CliError {
    CliError::other(format!("cannot {what} {}: {e}", path.display()))
}

/// The directory as an absolute path (it need not exist).
fn absolute(dir: &DevDir) -> Result<PathBuf, CliError> {
    let path = PathBuf::from(&dir.dir);
    if path.is_absolute() {
        return Ok(path);
    }
    let cwd =
        std::env::current_dir().map_err(|e| CliError::other(format!("cannot read the current directory: {e}")))?;
    // `./.kungfu-dev` becomes `<cwd>/.kungfu-dev`, without the `.` component.
    Ok(cwd.join(path).components().filter(|c| !matches!(c, std::path::Component::CurDir)).collect())
}

/// Finds `kungfud`: the flag, then `$KUNGFUD`, then next to this executable, then on `PATH`.
pub fn find_kungfud(flag: Option<String>) -> Result<PathBuf, CliError> {
    find_program(Program { name: "kungfud", what: "the server binary", env: "KUNGFUD", flag: Some("--kungfud") }, flag)
}

/// Finds `kungfu-bench`, the benchmark harness that `kungfu bench` runs: `$KUNGFU_BENCH`, then
/// next to this executable, then on `PATH`.
pub fn find_kungfu_bench() -> Result<PathBuf, CliError> {
    find_program(Program { name: "kungfu-bench", what: "the benchmark binary", env: "KUNGFU_BENCH", flag: None }, None)
}

/// One of our programs that a command runs, and how a user names where it is.
struct Program {
    name: &'static str,
    what: &'static str,
    env: &'static str,
    flag: Option<&'static str>,
}

/// The flag's path, then the environment's, then the program next to this executable (a build's
/// target directory, or an install's `bin/`), then on `PATH`.
fn find_program(p: Program, flag: Option<String>) -> Result<PathBuf, CliError> {
    if let (Some(flag_name), Some(path)) = (p.flag, flag.filter(|p| !p.is_empty())) {
        let path = PathBuf::from(path);
        if path.is_file() {
            return Ok(path);
        }
        return Err(CliError::usage(format!("{flag_name} {}: no such file", path.display())));
    }
    if let Some(path) = std::env::var_os(p.env).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        if path.is_file() {
            return Ok(path);
        }
        return Err(CliError::usage(format!("{}={}: no such file", p.env, path.display())));
    }
    if let Some(dir) = std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf)) {
        let path = dir.join(p.name);
        if path.is_file() {
            return Ok(path);
        }
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let path = dir.join(p.name);
            if path.is_file() {
                return Ok(path);
            }
        }
    }
    let flag = p.flag.map(|f| format!("pass {f} PATH, ")).unwrap_or_default();
    Err(CliError::usage(format!(
        "cannot find {} `{name}`: build it (`cargo build --release --bin {name}`), then {flag}set {}=PATH, \
         put it next to `kungfu`, or put it on PATH",
        p.what,
        p.env,
        name = p.name
    )))
}

fn pid_file(dir: &Path, id: u16) -> PathBuf {
    dir.join(format!("node{id}.pid"))
}

fn config_file(dir: &Path, id: u16) -> PathBuf {
    dir.join(format!("node{id}.toml"))
}

fn log_file(dir: &Path, id: u16) -> PathBuf {
    dir.join(format!("node{id}.log"))
}

/// Where `dev up` notes the `kungfud` it started, for `dev restart`.
fn binary_file(dir: &Path) -> PathBuf {
    dir.join("kungfud.path")
}

/// The ids of the nodes `dev up` wrote a config for, in order.
fn config_ids(dir: &Path) -> Vec<u16> {
    let mut ids: Vec<u16> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            name.strip_prefix("node").and_then(|r| r.strip_suffix(".toml")).and_then(|n| n.parse().ok())
        })
        .collect();
    ids.sort_unstable();
    ids
}

/// The pid files in `dir` with their node ids and pids, in node order.
fn pid_files(dir: &Path) -> Result<Vec<(u16, PathBuf, Option<u32>)>, CliError> {
    let mut found = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
        Err(e) => return Err(io_error("read", dir, e)),
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(id) = name.strip_prefix("node").and_then(|r| r.strip_suffix(".pid")).and_then(|n| n.parse().ok())
        else {
            continue;
        };
        let pid = std::fs::read_to_string(entry.path()).ok().and_then(|t| t.trim().parse::<u32>().ok());
        found.push((id, entry.path(), pid));
    }
    found.sort_by_key(|(id, _, _)| *id);
    Ok(found)
}

/// Whether `pid` is a live process started from `config` (a zombie, or a process that reused the
/// pid, does not count). Without `/proc`, `kill -0` decides.
fn alive(pid: u32, config: &Path) -> bool {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    if Path::new("/proc/self").exists() {
        let Ok(stat) = std::fs::read_to_string(proc_dir.join("stat")) else { return false };
        // The state follows the command name in parentheses, which may itself hold spaces.
        let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
        if matches!(state, Some("Z" | "X")) {
            return false;
        }
        let cmdline = std::fs::read(proc_dir.join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        return cmdline.contains(&*config.to_string_lossy());
    }
    Command::new("kill")
        .arg("-0")
        .arg(pid.to_string())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

pub(crate) fn signal(pid: u32, sig: &str) {
    // A process that is already gone is what we want; the status does not matter.
    let _ = Command::new("kill").arg(sig).arg(pid.to_string()).stderr(Stdio::null()).status();
}

/// Writes a file readable only by its owner.
fn write_private(path: &Path, text: &str) -> Result<(), CliError> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| io_error("write", path, e))?;
    // The mode given at creation is ignored for a file that already exists: set it.
    f.set_permissions(std::fs::Permissions::from_mode(0o600)).map_err(|e| io_error("protect", path, e))?;
    f.write_all(text.as_bytes()).map_err(|e| io_error("write", path, e))
}

/// The config of one node, in the shape of `cluster-config/three/node1.toml`.
fn config_text(node: &Node, all: &[Node], data: &Path, token: &str) -> String {
    let mut text = format!(
        "# Node {id} of a local {n}-node cluster written by `kungfu dev up`.\n\
         node_id = {id}\n\
         cluster_id = \"kungfu-dev\"\n\
         data_dir = \"{data}\"\n\
         api_listen = \"{api}\"\n\
         raft_listen = \"{raft}\"\n\
         http_listen = \"{http}\"\n\
         bootstrap = true\n\
         operator_token = \"{token}\"\n\n\
         [raft]\n\
         heartbeat_ms = 100\n\
         election_timeout_min_ms = 400\n\
         election_timeout_max_ms = 800\n",
        id = node.id,
        n = all.len(),
        data = data.display(),
        api = node.api,
        raft = node.raft,
        http = node.http,
    );
    if all.len() > 1 {
        for peer in all {
            text.push_str(&format!(
                "\n[[peers]]\nid = {}\nraft = \"{}\"\napi = \"{}\"\n",
                peer.id, peer.raft, peer.api
            ));
        }
    }
    text
}

async fn up(dir: &DevDir, count: u16, base_port: u16, kungfud: Option<String>, wait: Duration) -> Result<(), CliError> {
    let given = dir.dir.clone();
    let dir = absolute(dir)?;
    // Refuse when a node of this directory still runs.
    let running: Vec<u32> = pid_files(&dir)?
        .into_iter()
        .filter_map(|(id, _, pid)| pid.filter(|p| alive(*p, &config_file(&dir, id))))
        .collect();
    if !running.is_empty() {
        return Err(CliError::usage(format!(
            "a local cluster already runs from {} (pids {running:?}): use it, or stop it with `kungfu dev down --dir {}`",
            dir.display(),
            dir.display()
        )));
    }
    let binary = find_kungfud(kungfud)?;
    let top = u32::from(base_port) + u32::from(HTTP_OFFSET) + u32::from(count);
    if base_port < 1024 || top > 65535 {
        return Err(CliError::usage(format!(
            "--base-port {base_port} leaves no room for {count} API, raft (BASE+100…) and MCP (BASE+200…) ports below 65536"
        )));
    }
    let nodes: Vec<Node> = (1..=count)
        .map(|id| Node {
            id,
            api: format!("127.0.0.1:{}", base_port + id - 1),
            raft: format!("127.0.0.1:{}", base_port + RAFT_OFFSET + id - 1),
            http: format!("127.0.0.1:{}", base_port + HTTP_OFFSET + id - 1),
        })
        .collect();
    // A port another program holds would stop a node at start: say which one before starting any.
    for node in &nodes {
        for addr in [&node.api, &node.raft, &node.http] {
            if let Err(e) = std::net::TcpListener::bind(addr.as_str()) {
                return Err(CliError::usage(format!(
                    "{addr} (node {}) is not free: {e}; choose other ports with --base-port",
                    node.id
                )));
            }
        }
    }
    std::fs::create_dir_all(&dir).map_err(|e| io_error("create", &dir, e))?;
    // The token stays the same across restarts of the same directory.
    let token_path = dir.join("operator-token");
    // The token stays the same across restarts of the same directory; it is rewritten so that its
    // mode is 0600 even if someone widened it.
    let token = match std::fs::read_to_string(&token_path) {
        Ok(t) if t.trim().len() >= 16 => t.trim().to_string(),
        _ => format!("dev-{}", kungfu_client::new_idempotency_key()?.trim_start_matches("sdk-")),
    };
    write_private(&token_path, &token)?;
    write_private(&binary_file(&dir), &binary.display().to_string())?;
    let mut children = Vec::new();
    for node in &nodes {
        let data = dir.join(format!("node{}", node.id));
        write_private(&config_file(&dir, node.id), &config_text(node, &nodes, &data, &token))?;
        children.push((node.id, spawn(&binary, &dir, node.id)?));
    }
    let endpoints: Vec<String> = nodes.iter().map(|n| n.api.clone()).collect();
    let leader = match wait_for(&dir, &mut children, wait, async || leader_of(&endpoints, &token).await).await {
        Ok(leader) => leader,
        Err(e) => {
            stop(&dir, None);
            return Err(CliError::other(match e {
                Waited::Exited(exit) => format!("{exit}; the other nodes were stopped"),
                Waited::Timeout => format!(
                    "no leader after {}s; the nodes were stopped. See the logs in {}",
                    wait.as_secs(),
                    dir.display()
                ),
            }));
        }
    };
    let profile = Profile {
        endpoints: endpoints.clone(),
        agent_key: None,
        agent_id: None,
        operator_token_file: Some(token_path.display().to_string()),
    };
    let saved = profile::save(PROFILE, profile)?;
    println!("started {count} kungfud node(s) from {}; node {leader} leads", dir.display());
    for (node, (_, started)) in nodes.iter().zip(children.iter()) {
        println!(
            "  node {}  api {}  raft {}  mcp http://{}/mcp  pid {}",
            node.id,
            node.api,
            node.raft,
            node.http,
            started.child.id()
        );
    }
    println!("endpoints: {}", endpoints.join(","));
    // Any node's MCP URL serves the whole cluster (a follower forwards to the leader).
    let mcp: Vec<String> = nodes.iter().map(|n| format!("http://{}/mcp", n.http)).collect();
    println!("mcp: {} (any node; connect an LLM agent: docs/mcp.md)", mcp.join(" "));
    // The web console (issue #18): any node's page shows the whole cluster and an agent's turn.
    let console: Vec<String> = nodes.iter().map(|n| format!("http://{}/ui/", n.http)).collect();
    println!("console: {} (any node; open it in a browser: docs/console.md)", console.join(" "));
    println!("profile `{PROFILE}` saved in {} (endpoints and the operator token file, no agent key)", saved.display());
    println!("logs and pids: {}/node*.log, node*.pid", dir.display());
    println!("operator token: {} (used by `kungfu --profile {PROFILE} cluster …`)", token_path.display());
    // The commands to go on with name the directory only when it is not the default one.
    let dir_flag = if given == DEFAULT_DIR { String::new() } else { format!(" --dir {given}") };
    println!("try:  kungfu demo   (it reads the endpoints of profile `{PROFILE}`)");
    println!("stop: kungfu dev down{dir_flag}   restart one node: kungfu dev restart N{dir_flag}");
    Ok(())
}

/// Starts node `id` of `dir` in the background from its config, appending to its log, and writes
/// its pid file. The one place a dev node is spawned (`up` and `restart`).
fn spawn(binary: &Path, dir: &Path, id: u16) -> Result<Started, CliError> {
    let log_path = log_file(dir, id);
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| io_error("open", &log_path, e))?;
    let log_err = log.try_clone().map_err(|e| io_error("open", &log_path, e))?;
    // Its own process group, so a Ctrl-C in the terminal that ran `dev up` does not reach it.
    let child = Command::new(binary)
        .arg("--config")
        .arg(config_file(dir, id))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log_err))
        .process_group(0)
        .spawn()
        .map_err(|e| CliError::other(format!("cannot start {}: {e}", binary.display())))?;
    std::fs::write(pid_file(dir, id), format!("{}\n", child.id()))
        .map_err(|e| io_error("write the pid file in", dir, e))?;
    Ok(Started { child, log: log_path })
}

/// A node process this command started.
struct Started {
    child: std::process::Child,
    log: PathBuf,
}

/// Why [`wait_for`] gave up.
enum Waited {
    /// A node exited: which, how, and the end of its log.
    Exited(String),
    /// The bound passed first.
    Timeout,
}

/// Polls `ready` every 200 ms until it answers, a started node exits, or `wait` passes.
async fn wait_for<T>(
    dir: &Path,
    children: &mut [(u16, Started)],
    wait: Duration,
    mut ready: impl AsyncFnMut() -> Option<T>,
) -> Result<T, Waited> {
    let start = Instant::now();
    loop {
        for (id, started) in children.iter_mut() {
            if let Ok(Some(status)) = started.child.try_wait() {
                let _ = std::fs::remove_file(pid_file(dir, *id));
                return Err(Waited::Exited(format!(
                    "node {id} exited at start ({status}). Its log ({}) ends:\n{}",
                    started.log.display(),
                    tail(&started.log, 15)
                )));
            }
        }
        if let Some(answer) = ready().await {
            return Ok(answer);
        }
        if start.elapsed() > wait {
            return Err(Waited::Timeout);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The `api_listen` address of a node's config.
fn api_of(config: &Path) -> Result<String, CliError> {
    let text = std::fs::read_to_string(config).map_err(|e| io_error("read", config, e))?;
    let table: toml::Table =
        toml::from_str(&text).map_err(|e| CliError::other(format!("{} is not valid TOML: {e}", config.display())))?;
    table
        .get("api_listen")
        .and_then(toml::Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| CliError::other(format!("{} has no api_listen", config.display())))
}

/// The node number of `dev restart`, checked against the nodes `dev up` wrote configs for.
fn known_node(dir: &Path, node: u16) -> Result<(), CliError> {
    let ids = config_ids(dir);
    let (Some(first), Some(last)) = (ids.first(), ids.last()) else {
        return Err(CliError::usage(format!(
            "no local cluster in {}: start one with `kungfu dev up` (or name its directory with --dir)",
            dir.display()
        ))
        .with_field("--dir"));
    };
    if ids.contains(&node) {
        return Ok(());
    }
    Err(CliError::usage(format!(
        "node {node} is not a node of the local cluster in {}: its nodes are {first} to {last}",
        dir.display()
    ))
    .with_field("node"))
}

/// `dev restart N`: stops node N if it runs, starts it again from its config and data, and waits
/// (bounded) until it answers and knows the leader.
async fn restart(dir: &DevDir, node: u16, kungfud: Option<String>, wait: Duration) -> Result<(), CliError> {
    let dir = absolute(dir)?;
    known_node(&dir, node)?;
    let binary = match kungfud {
        Some(flag) => find_kungfud(Some(flag))?,
        None => match std::fs::read_to_string(binary_file(&dir)).map(|p| PathBuf::from(p.trim())) {
            Ok(noted) if noted.is_file() => noted,
            _ => find_kungfud(None)?,
        },
    };
    let api = api_of(&config_file(&dir, node))?;
    let token_path = dir.join("operator-token");
    let token = profile::read_operator_token(&token_path.display().to_string())?;
    let stopped = stop(&dir, Some(node));
    let mut children = vec![(node, spawn(&binary, &dir, node)?)];
    let pid = children[0].1.child.id();
    let endpoints = [api.clone()];
    let answered = wait_for(&dir, &mut children, wait, async || {
        node_view(&endpoints, &token).await.filter(|v| v.leader_id.is_some())
    })
    .await;
    match answered {
        Ok(view) => {
            let how = if stopped.is_empty() { "was not running" } else { "was stopped" };
            let leader = view.leader_id.map(|l| l.to_string()).unwrap_or_default();
            println!("node {node} {how}; restarted (pid {pid}, api {api}); it follows node {leader}'s lead");
            if view.leader_id == Some(view.node_id) {
                println!("node {node} leads");
            }
            Ok(())
        }
        Err(Waited::Exited(exit)) => Err(CliError::other(exit)),
        Err(Waited::Timeout) => Err(CliError::other(format!(
            "node {node} (pid {pid}) started but did not answer with a leader within {}s; it is left running. See {}",
            wait.as_secs(),
            log_file(&dir, node).display()
        ))),
    }
}

/// The id of the leader, once one node answers that it leads; None while no node does.
async fn leader_of(endpoints: &[String], token: &str) -> Option<u64> {
    for endpoint in endpoints {
        let view = node_view(std::slice::from_ref(endpoint), token).await;
        if let Some(leader) = view.filter(|v| v.role == pb::RaftRole::Leader as i32) {
            return Some(leader.node_id);
        }
    }
    None
}

/// One node's own view of the cluster, asked once with a one-second bound; None when it does not
/// answer.
async fn node_view(endpoint: &[String], token: &str) -> Option<pb::ClusterStatusResponse> {
    let options = ClientOptions { max_retries: 0, call_timeout: Duration::from_secs(1), ..ClientOptions::default() };
    let client = Client::connect(endpoint.to_vec(), Some(token.to_string()), options).await.ok()?;
    client.cluster_status(pb::ClusterStatusRequest {}).await.ok()
}

/// The last `n` lines of a log file, leaving out the frames of a backtrace.
fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let frame = |l: &str| {
        let t = l.trim_start();
        t.starts_with("at ") || t.split_once(": ").is_some_and(|(num, _)| num.chars().all(|c| c.is_ascii_digit()))
    };
    let lines: Vec<&str> = text.lines().filter(|l| !frame(l)).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Stops the nodes of `dir` (every one, or only `only`): SIGTERM, then SIGKILL after a bounded
/// wait, and removes their pid files. Returns the ids of the nodes that were running, with whether
/// each needed SIGKILL. The one place dev nodes are stopped (`up` on failure, `down`, `restart`).
fn stop(dir: &Path, only: Option<u16>) -> Vec<(u16, bool)> {
    let mut live: Vec<(u16, u32)> = Vec::new();
    let files: Vec<_> =
        pid_files(dir).unwrap_or_default().into_iter().filter(|(id, _, _)| only.is_none_or(|o| o == *id)).collect();
    for (id, path, pid) in &files {
        let (id, pid) = (*id, *pid);
        if let Some(pid) = pid.filter(|p| alive(*p, &config_file(dir, id))) {
            signal(pid, "-TERM");
            live.push((id, pid));
        }
        // A pid file is removed only once its process is gone (below), or now when it had none.
        if pid.is_none() {
            let _ = std::fs::remove_file(path);
        }
    }
    let start = Instant::now();
    while live.iter().any(|(id, pid)| alive(*pid, &config_file(dir, *id))) && start.elapsed() < TERM_WAIT {
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut stopped = Vec::new();
    for (id, pid) in &live {
        let kill = alive(*pid, &config_file(dir, *id));
        if kill {
            signal(*pid, "-KILL");
        }
        stopped.push((*id, kill));
    }
    let start = Instant::now();
    while live.iter().any(|(id, pid)| alive(*pid, &config_file(dir, *id))) && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    for (id, _, _) in &files {
        let _ = std::fs::remove_file(pid_file(dir, *id));
    }
    stopped
}

fn down(dir: &DevDir, purge: bool) -> Result<(), CliError> {
    let dir = absolute(dir)?;
    let files = pid_files(&dir)?;
    let running: Vec<(u16, u32)> = files
        .iter()
        .filter_map(|(id, _, pid)| pid.filter(|p| alive(*p, &config_file(&dir, *id))).map(|p| (*id, p)))
        .collect();
    let stopped = stop(&dir, None);
    let still: Vec<u32> =
        running.iter().filter(|(id, pid)| alive(*pid, &config_file(&dir, *id))).map(|(_, p)| *p).collect();
    if !still.is_empty() {
        return Err(CliError::other(format!("processes {still:?} are still running after SIGKILL")));
    }
    if running.is_empty() {
        println!("no node of {} was running", dir.display());
    } else {
        for (id, pid) in &running {
            let killed = stopped.iter().any(|(s, kill)| s == id && *kill);
            let how = if killed { "killed (SIGKILL after SIGTERM)" } else { "stopped" };
            println!("node {id} (pid {pid}) {how}");
        }
    }
    if purge && dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| io_error("remove", &dir, e))?;
        println!("removed {} (data, configs, logs)", dir.display());
    }
    Ok(())
}

fn status(dir: &DevDir) -> Result<(), CliError> {
    let dir = absolute(dir)?;
    let files = pid_files(&dir)?;
    if files.is_empty() {
        println!("no local cluster in {}", dir.display());
        return Ok(());
    }
    for (id, _, pid) in files {
        let state = match pid {
            Some(p) if alive(p, &config_file(&dir, id)) => format!("running (pid {p})"),
            Some(p) => format!("not running (stale pid {p})"),
            None => "not running (unreadable pid file)".to_string(),
        };
        println!("node {id}: {state}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: u16) -> Node {
        Node {
            id,
            api: format!("127.0.0.1:{}", 7410 + id),
            raft: format!("127.0.0.1:{}", 7510 + id),
            http: format!("127.0.0.1:{}", 7610 + id),
        }
    }

    #[test]
    fn restart_knows_the_nodes_up_wrote_and_names_the_field_and_range_of_others() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = known_node(dir.path(), 1).expect_err("no cluster yet");
        assert_eq!((e.code.as_str(), e.field.as_deref()), ("USAGE", Some("--dir")));
        assert!(e.message.contains("kungfu dev up"), "{}", e.message);
        let nodes: Vec<Node> = (1..=3).map(node).collect();
        for n in &nodes {
            let text = config_text(n, &nodes, &dir.path().join(format!("node{}", n.id)), "dev-token-0123456789");
            std::fs::write(config_file(dir.path(), n.id), text).expect("write config");
        }
        std::fs::write(dir.path().join("node1.log"), "not a config").expect("write log");
        assert_eq!(config_ids(dir.path()), vec![1, 2, 3]);
        assert!(known_node(dir.path(), 2).is_ok());
        let e = known_node(dir.path(), 7).expect_err("node 7");
        assert_eq!((e.code.as_str(), e.field.as_deref(), e.next.as_str()), ("USAGE", Some("node"), "revise"));
        assert!(e.message.contains("node 7") && e.message.contains("its nodes are 1 to 3"), "{}", e.message);
        assert!(known_node(dir.path(), 0).is_err());
    }

    #[test]
    fn restart_finds_a_nodes_api_address_in_the_config_up_wrote() {
        let dir = tempfile::tempdir().expect("tempdir");
        let nodes: Vec<Node> = (1..=2).map(node).collect();
        let path = config_file(dir.path(), 2);
        std::fs::write(&path, config_text(&nodes[1], &nodes, &dir.path().join("node2"), "dev-token-0123456789"))
            .expect("write config");
        assert_eq!(api_of(&path).expect("api_listen"), "127.0.0.1:7412");
    }
}
