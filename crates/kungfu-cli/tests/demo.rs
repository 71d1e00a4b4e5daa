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
