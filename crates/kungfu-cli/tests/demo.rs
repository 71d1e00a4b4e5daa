//! `kungfu dev up`, `kungfu demo` and `kungfu dev down` with the real binaries: a local three-node
//! cluster in a temporary directory, the scripted demo against it, and every process stopped after.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The `kungfu` binary under test.
fn kungfu() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_kungfu"))
}

/// The `kungfud` built with the workspace, next to `kungfu`.
fn kungfud() -> PathBuf {
    let bin = kungfu().parent().map(|d| d.join("kungfud")).unwrap_or_default();
    assert!(bin.is_file(), "{} is missing: build the workspace first", bin.display());
    bin
}

/// A base port such that BASE..BASE+3, BASE+100..BASE+103 and BASE+200..BASE+203 are free on
/// loopback now.
fn free_base() -> u16 {
    let seed = std::process::id() as u16;
    for attempt in 0..200u16 {
        let base = 20000 + (seed.wrapping_add(attempt.wrapping_mul(211)) % 30000);
        let ports = (0..3).flat_map(|i| [base + i, base + 100 + i, base + 200 + i]);
        let held: Vec<TcpListener> = ports.filter_map(|p| TcpListener::bind(("127.0.0.1", p)).ok()).collect();
        if held.len() == 9 {
            return base;
        }
    }
    panic!("no free block of ports found");
}

/// The pids in the pid files of `dir`.
fn pids(dir: &Path) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_name().to_string_lossy().ends_with(".pid") {
            if let Some(pid) = std::fs::read_to_string(entry.path()).ok().and_then(|t| t.trim().parse().ok()) {
                found.push(pid);
            }
        }
    }
    found
}

/// Whether a process is alive (a zombie counts as gone).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !matches!(stat.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().next()), Some("Z" | "X")),
        Err(_) => false,
    }
}

/// A local cluster that is brought down when the test ends, passed or failed.
struct DevCluster {
    home: tempfile::TempDir,
    dir: PathBuf,
    pids: Vec<u32>,
}

impl DevCluster {
    fn run(&self, args: &[&str]) -> Output {
        Command::new(kungfu())
            .args(args)
            .env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path().join("xdg"))
            .env_remove("KUNGFU_KEY")
            .env_remove("KUNGFU_ENDPOINTS")
            .env_remove("KUNGFU_PROFILE")
            .env_remove("KUNGFUD")
            .output()
            .expect("run kungfu")
    }

    fn logs(&self) -> String {
        (1..=3)
            .map(|i| {
                let log = std::fs::read_to_string(self.dir.join(format!("node{i}.log"))).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(20).collect();
                format!("--- node {i} ---\n{}\n", tail.into_iter().rev().collect::<Vec<_>>().join("\n"))
            })
            .collect()
    }
}

impl Drop for DevCluster {
    fn drop(&mut self) {
        let dir = self.dir.to_string_lossy().to_string();
        let _ = self.run(&["dev", "down", "--dir", &dir, "--purge"]);
        // Whatever `dev down` missed is killed here, so no process outlives the test.
        for pid in &self.pids {
            if alive(*pid) {
                let _ = Command::new("kill").arg("-KILL").arg(pid.to_string()).status();
            }
        }
    }
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn dev_up_demo_and_dev_down() {
    let home = tempfile::tempdir().expect("tempdir");
    let dir = home.path().join("cluster");
    let mut cluster = DevCluster { dir: dir.clone(), home, pids: Vec::new() };
    let dir_arg = dir.to_string_lossy().to_string();
    let base = free_base();
    let kungfud = kungfud().to_string_lossy().to_string();
    let up = cluster.run(&[
        "dev",
        "up",
        "--dir",
        &dir_arg,
        "--base-port",
        &base.to_string(),
        "--kungfud",
        &kungfud,
        "--wait-secs",
        "60",
    ]);
    cluster.pids = pids(&dir);
    assert!(up.status.success(), "dev up failed: {}\n{}", text(&up), cluster.logs());
    assert_eq!(cluster.pids.len(), 3, "three pid files: {}", text(&up));
    assert!(cluster.pids.iter().all(|p| alive(*p)), "every node runs");
    let up_out = String::from_utf8_lossy(&up.stdout).to_string();
    let first = format!("127.0.0.1:{base}");
    assert!(up_out.contains(&first), "dev up prints the endpoints: {up_out}");
    let mcp = format!("http://127.0.0.1:{}/mcp", base + 200);
    assert!(up_out.contains(&mcp), "dev up prints each node's MCP URL: {up_out}");
    let console = format!("http://127.0.0.1:{}/ui/", base + 200);
    assert!(up_out.contains(&console), "dev up prints each node's console URL: {up_out}");

    // A second `dev up` on the same directory is refused while the nodes run.
    let again = cluster.run(&["dev", "up", "--dir", &dir_arg, "--base-port", &base.to_string(), "--kungfud", &kungfud]);
    assert!(!again.status.success(), "a second dev up must be refused: {}", text(&again));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already runs"), "{}", text(&again));

    let started = Instant::now();
    let demo = cluster.run(&["demo", "--endpoint", &first]);
    assert!(demo.status.success(), "demo failed: {}\n{}", text(&demo), cluster.logs());
    assert!(started.elapsed() < Duration::from_secs(120), "the demo is bounded");
    let out = String::from_utf8_lossy(&demo.stdout).to_string();
    for milestone in [
        "joined",
        "Turns before the answers",
        "Turns after the answers",
        "rejected",
        "the redo",
        "adopted 2 of 3",
        "ADOPTION_LIMIT_REACHED",
        "timed out",
        "Demo complete",
    ] {
        assert!(out.contains(milestone), "the demo output lacks `{milestone}`:\n{out}");
    }
    assert_eq!(out.matches("recovered turn of").count(), 4, "each agent recovers its turn:\n{out}");

    let down = cluster.run(&["dev", "down", "--dir", &dir_arg, "--purge"]);
    assert!(down.status.success(), "dev down failed: {}", text(&down));
    let deadline = Instant::now() + Duration::from_secs(30);
    while cluster.pids.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(cluster.pids.iter().all(|p| !alive(*p)), "every node stopped: {}", text(&down));
    assert!(!dir.exists(), "--purge removes the directory");
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The pid in node `id`'s pid file.
fn pid_of(dir: &Path, id: u16) -> Option<u32> {
    std::fs::read_to_string(dir.join(format!("node{id}.pid"))).ok().and_then(|t| t.trim().parse().ok())
}

/// The JSON of a successful `kungfu --json …` run.
fn json_of(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", text(out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no JSON ({e}): {}", text(out)))
}

/// The JSON error on the last line of stderr of a failed `kungfu --json …` run.
fn error_of(out: &Output, exit: i32) -> serde_json::Value {
    assert_eq!(out.status.code(), Some(exit), "{}", text(out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let v: serde_json::Value = serde_json::from_str(stderr.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("no JSON error ({e}): {}", text(out)));
    v["error"].clone()
}

/// Issue #16, deliverable 9: the profile `dev` keeps the operator token (a 0600 file in the
/// cluster's directory), so operator commands need no `--key`; `dev restart N` brings back a killed
/// node and restarts a running one, and refuses a node the cluster does not have.
#[test]
fn dev_keeps_the_operator_token_and_restarts_one_node() {
    let home = tempfile::tempdir().expect("tempdir");
    let dir = home.path().join("cluster");
    let mut cluster = DevCluster { dir: dir.clone(), home, pids: Vec::new() };
    let dir_arg = dir.to_string_lossy().to_string();
    let base = free_base();
    let kungfud = kungfud().to_string_lossy().to_string();
    let up = cluster.run(&["dev", "up", "--dir", &dir_arg, "--base-port", &base.to_string(), "--kungfud", &kungfud]);
    cluster.pids = pids(&dir);
    assert!(up.status.success(), "dev up failed: {}\n{}", text(&up), cluster.logs());

    // The token file is private, and the profile `dev` names it.
    let token_file = dir.join("operator-token");
    assert_eq!(mode(&token_file), 0o600);
    let profiles = std::fs::read_to_string(cluster.home.path().join("xdg/kungfu/profiles.toml")).expect("profiles");
    assert!(profiles.contains(&format!("operator_token_file = \"{}\"", token_file.display())), "{profiles}");

    // An operator command without --key: every node answers (polled with a bound).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = json_of(&cluster.run(&["--json", "--profile", "dev", "cluster", "status"]));
        let reachable = status["nodes"].as_array().map(|n| n.iter().filter(|x| x["reachable"] == true).count());
        if reachable == Some(3) {
            break;
        }
        assert!(Instant::now() < deadline, "not every node answered: {status}\n{}", cluster.logs());
        std::thread::sleep(Duration::from_millis(200));
    }
    // A wrong explicit key still fails, as an authentication failure that says so.
    let wrong =
        cluster.run(&["--json", "--profile", "dev", "cluster", "status", "--key", "not-the-token", "--retries", "0"]);
    let e = error_of(&wrong, 4);
    assert_eq!(e["code"], "UNAUTHENTICATED", "{e}");
    assert!(
        e["message"].as_str().is_some_and(|m| m.starts_with("the operator token was refused (wrong token?)")),
        "{e}"
    );

    // Node 2 is killed; `dev status` says so; `dev restart 2` brings it back with a new process.
    let killed = pid_of(&dir, 2).expect("node 2's pid");
    let _ = Command::new("kill").arg("-KILL").arg(killed.to_string()).status();
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(killed) {
        assert!(Instant::now() < deadline, "node 2 (pid {killed}) did not die");
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = cluster.run(&["dev", "status", "--dir", &dir_arg]);
    assert!(String::from_utf8_lossy(&status.stdout).contains("node 2: not running"), "{}", text(&status));
    let restarted = cluster.run(&["dev", "restart", "2", "--dir", &dir_arg]);
    assert!(restarted.status.success(), "dev restart 2 failed: {}\n{}", text(&restarted), cluster.logs());
    assert!(
        String::from_utf8_lossy(&restarted.stdout).contains("node 2 was not running; restarted"),
        "{}",
        text(&restarted)
    );
    let pid2 = pid_of(&dir, 2).expect("node 2's new pid");
    cluster.pids.push(pid2);
    assert!(pid2 != killed && alive(pid2), "a new node 2 process runs");
    let status = cluster.run(&["dev", "status", "--dir", &dir_arg]);
    assert!(
        String::from_utf8_lossy(&status.stdout).contains(&format!("node 2: running (pid {pid2})")),
        "{}",
        text(&status)
    );

    // Writes through node 2 work: an agent registers there and creates a thread.
    let node2 = format!("127.0.0.1:{}", base + 1);
    let registered = json_of(&cluster.run(&["--json", "--profile", "w2", "register", "--endpoint", &node2]));
    assert!(registered["agent"].as_str().is_some_and(|a| a.starts_with("ag_")), "{registered}");
    let created = json_of(&cluster.run(&["--json", "--profile", "w2", "thread", "create", "--text", "after restart"]));
    assert!(created["receipt"]["result"]["thread_created"]["thread"].as_str().is_some(), "{created}");

    // A running node is stopped first, then started again.
    let before = pid_of(&dir, 3).expect("node 3's pid");
    let restarted = cluster.run(&["dev", "restart", "3", "--dir", &dir_arg]);
    assert!(restarted.status.success(), "dev restart 3 failed: {}\n{}", text(&restarted), cluster.logs());
    assert!(
        String::from_utf8_lossy(&restarted.stdout).contains("node 3 was stopped; restarted"),
        "{}",
        text(&restarted)
    );
    let pid3 = pid_of(&dir, 3).expect("node 3's new pid");
    cluster.pids.push(pid3);
    assert!(pid3 != before && alive(pid3) && !alive(before), "node 3 runs as a new process");

    // A node the cluster does not have: the field and the valid range.
    let e = error_of(&cluster.run(&["--json", "dev", "restart", "7", "--dir", &dir_arg]), 2);
    assert_eq!((e["code"].as_str(), e["field"].as_str()), (Some("USAGE"), Some("node")), "{e}");
    assert!(e["message"].as_str().is_some_and(|m| m.contains("its nodes are 1 to 3")), "{e}");

    // Registering an agent in the profile `dev` keeps its token file: operator commands still work.
    json_of(&cluster.run(&["--json", "--profile", "dev", "register"]));
    json_of(&cluster.run(&["--json", "--profile", "dev", "cluster", "status"]));

    // Once the directory is purged, the profile's token file is gone, and the error says what to do.
    let down = cluster.run(&["dev", "down", "--dir", &dir_arg, "--purge"]);
    assert!(down.status.success(), "dev down failed: {}", text(&down));
    let e = error_of(&cluster.run(&["--json", "--profile", "dev", "cluster", "status"]), 2);
    assert_eq!(e["field"], "operator_token_file", "{e}");
    assert!(e["message"].as_str().is_some_and(|m| m.contains("kungfu dev up")), "{e}");
}
