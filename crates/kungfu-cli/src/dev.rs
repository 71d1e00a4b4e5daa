//! `kungfu dev`: a local cluster of `kungfud` processes for people trying Kungfu.
//!
//! `dev up` writes one config per node in the shape of `cluster-config/three/` into a directory
//! (default `./.kungfu-dev`), starts each node in the background with its log and pid file there,
//! waits (bounded) until a leader serves, prints the endpoints and each node's MCP URL, and saves
//! the endpoints as the profile `dev`.
//! `dev down` stops the nodes with SIGTERM (then SIGKILL after a bounded wait) and removes the pid
//! files; `--purge` removes the whole directory. The nodes get a generated operator token, kept in
//! `<dir>/operator-token` (mode 0600), so `kungfu cluster status --key "$(cat …)"` works.

use crate::cli::{DevCmd, DevDir};
use crate::error::CliError;
use crate::profile::{self, Profile};
use kungfu_client::{Client, ClientOptions, pb};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The profile `dev up` writes.
pub const PROFILE: &str = "dev";

/// The directory `kungfu dev` uses unless `--dir` names another.
pub const DEFAULT_DIR: &str = "./.kungfu-dev";

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
    if let Some(path) = flag.filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        if path.is_file() {
            return Ok(path);
        }
        return Err(CliError::usage(format!("--kungfud {}: no such file", path.display())));
    }
    if let Some(path) = std::env::var_os("KUNGFUD").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        if path.is_file() {
            return Ok(path);
        }
        return Err(CliError::usage(format!("KUNGFUD={}: no such file", path.display())));
    }
    if let Some(dir) = std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf)) {
        let path = dir.join("kungfud");
        if path.is_file() {
            return Ok(path);
        }
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let path = dir.join("kungfud");
            if path.is_file() {
                return Ok(path);
            }
        }
    }
    Err(CliError::usage(
        "cannot find the server binary `kungfud`: build it (`cargo build --release --bin kungfud`), then pass \
         --kungfud PATH, set KUNGFUD=PATH, put it next to `kungfu`, or put it on PATH",
    ))
}

fn pid_file(dir: &Path, id: u16) -> PathBuf {
    dir.join(format!("node{id}.pid"))
}

fn config_file(dir: &Path, id: u16) -> PathBuf {
    dir.join(format!("node{id}.toml"))
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

fn signal(pid: u32, sig: &str) {
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
    let token = match std::fs::read_to_string(&token_path) {
        Ok(t) if t.trim().len() >= 16 => t.trim().to_string(),
        _ => {
            let t = format!("dev-{}", kungfu_client::new_idempotency_key()?.trim_start_matches("sdk-"));
            write_private(&token_path, &t)?;
            t
        }
    };
    let mut children = Vec::new();
    for node in &nodes {
        let config = config_file(&dir, node.id);
        let data = dir.join(format!("node{}", node.id));
        write_private(&config, &config_text(node, &nodes, &data, &token))?;
        let log_path = dir.join(format!("node{}.log", node.id));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| io_error("open", &log_path, e))?;
        let log_err = log.try_clone().map_err(|e| io_error("open", &log_path, e))?;
        // Its own process group, so a Ctrl-C in the terminal that ran `dev up` does not reach it.
        let child = Command::new(&binary)
            .arg("--config")
            .arg(&config)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err))
            .process_group(0)
            .spawn()
            .map_err(|e| CliError::other(format!("cannot start {}: {e}", binary.display())))?;
        std::fs::write(pid_file(&dir, node.id), format!("{}\n", child.id()))
            .map_err(|e| io_error("write the pid file in", &dir, e))?;
        children.push((node.id, child, log_path));
    }
    let endpoints: Vec<String> = nodes.iter().map(|n| n.api.clone()).collect();
    let start = Instant::now();
    let leader = loop {
        for (id, child, log) in children.iter_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                let tail = tail(log, 15);
                stop_all(&dir);
                return Err(CliError::other(format!(
                    "node {id} exited at start ({status}); the other nodes were stopped. Its log ({}) ends:\n{tail}",
                    log.display()
                )));
            }
        }
        if let Some(leader) = leader_of(&endpoints, &token).await {
            break leader;
        }
        if start.elapsed() > wait {
            stop_all(&dir);
            return Err(CliError::other(format!(
                "no leader after {}s; the nodes were stopped. See the logs in {}",
                wait.as_secs(),
                dir.display()
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let saved = profile::save(PROFILE, Profile { endpoints: endpoints.clone(), agent_key: None, agent_id: None })?;
    println!("started {count} kungfud node(s) from {}; node {leader} leads", dir.display());
    for (node, (_, child, _)) in nodes.iter().zip(children.iter()) {
        println!(
            "  node {}  api {}  raft {}  mcp http://{}/mcp  pid {}",
            node.id,
            node.api,
            node.raft,
            node.http,
            child.id()
        );
    }
    println!("endpoints: {}", endpoints.join(","));
    // Any node's MCP URL serves the whole cluster (a follower forwards to the leader).
    let mcp: Vec<String> = nodes.iter().map(|n| format!("http://{}/mcp", n.http)).collect();
    println!("mcp: {} (any node; connect an LLM agent: docs/mcp.md)", mcp.join(" "));
    println!("profile `{PROFILE}` saved in {} (endpoints only, no key)", saved.display());
    println!("logs and pids: {}/node*.log, node*.pid", dir.display());
    println!("operator token: {}", token_path.display());
    // The commands to go on with name the directory only when it is not the default one.
    let dir_flag = if given == DEFAULT_DIR { String::new() } else { format!(" --dir {given}") };
    println!("try:  kungfu demo   (it reads the endpoints of profile `{PROFILE}`)");
    println!("stop: kungfu dev down{dir_flag}");
    Ok(())
}

/// The id of the leader, once one node answers that it leads; None while no node does.
async fn leader_of(endpoints: &[String], token: &str) -> Option<u64> {
    let options = ClientOptions { max_retries: 0, call_timeout: Duration::from_secs(1), ..ClientOptions::default() };
    for endpoint in endpoints {
        let Ok(client) = Client::connect(vec![endpoint.clone()], Some(token.to_string()), options.clone()).await else {
            continue;
        };
        if let Ok(status) = client.cluster_status(pb::ClusterStatusRequest {}).await {
            if status.role == pb::RaftRole::Leader as i32 {
                return Some(status.node_id);
            }
        }
    }
    None
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

/// Stops every node of `dir`; returns the ids that needed SIGKILL.
fn stop_all(dir: &Path) -> Vec<u16> {
    let mut live: Vec<(u16, u32)> = Vec::new();
    for (id, path, pid) in pid_files(dir).unwrap_or_default() {
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
    let mut killed = Vec::new();
    for (id, pid) in &live {
        if alive(*pid, &config_file(dir, *id)) {
            signal(*pid, "-KILL");
            killed.push(*id);
        }
    }
    let start = Instant::now();
    while live.iter().any(|(id, pid)| alive(*pid, &config_file(dir, *id))) && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    for (id, _, _) in pid_files(dir).unwrap_or_default() {
        let _ = std::fs::remove_file(pid_file(dir, id));
    }
    killed
}

fn down(dir: &DevDir, purge: bool) -> Result<(), CliError> {
    let dir = absolute(dir)?;
    let files = pid_files(&dir)?;
    let running: Vec<(u16, u32)> = files
        .iter()
        .filter_map(|(id, _, pid)| pid.filter(|p| alive(*p, &config_file(&dir, *id))).map(|p| (*id, p)))
        .collect();
    let killed = stop_all(&dir);
    let still: Vec<u32> =
        running.iter().filter(|(id, pid)| alive(*pid, &config_file(&dir, *id))).map(|(_, p)| *p).collect();
    if !still.is_empty() {
        return Err(CliError::other(format!("processes {still:?} are still running after SIGKILL")));
    }
    if running.is_empty() {
        println!("no node of {} was running", dir.display());
    } else {
        for (id, pid) in &running {
            let how = if killed.contains(id) { "killed (SIGKILL after SIGTERM)" } else { "stopped" };
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
