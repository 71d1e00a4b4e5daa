//! `kungfu agent serve` (issue #35), the standby runner, against real `kungfud` processes: the
//! command runs once per new obligation with the turn on its stdin, changes during a run become
//! exactly one next run, a failing command is retried with a capped backoff and logged, a signal
//! stops it cleanly, and under `kungfu dev up` it keeps working through a leader kill.
//!
//! The command is a small shell script that keeps, per run, its stdin, its `KUNGFU_*` environment
//! and its start time in a directory, then waits for the test to release it. Every wait is a poll
//! with a bound; no assertion depends on how fast anything is.

use kungfu_system_tests::{BOUND, Cluster};
use serde_json::Value;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The stand-in agent. Run N writes `env-N`, `start-N` (nanoseconds) and `stdin-N.json` (renamed
/// into place once complete), exits 3 while a file `fail` exists, else waits for `release-N` or
/// `release-all` (at most a minute) and exits 0.
const SCRIPT: &str = r#"#!/bin/sh
d="$WAKE_DIR"
n="$KUNGFU_RUN"
date +%s%N > "$d/start-$n"
env | grep '^KUNGFU_' | sort > "$d/env-$n"
cat > "$d/stdin-$n.tmp"
mv "$d/stdin-$n.tmp" "$d/stdin-$n.json"
if [ -e "$d/fail" ]; then exit 3; fi
i=0
while [ ! -e "$d/release-$n" ] && [ ! -e "$d/release-all" ] && [ $i -lt 1200 ]; do
  sleep 0.05
  i=$((i+1))
done
exit 0
"#;

fn kungfu() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_kungfu"))
}

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
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

/// A home for profiles, the script and its run directory.
struct Home {
    home: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        let home = Home { home: tempfile::tempdir().expect("tempdir") };
        std::fs::create_dir_all(home.runs()).expect("runs dir");
        let script = home.script();
        std::fs::write(&script, SCRIPT).expect("script");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        home
    }

    fn runs(&self) -> PathBuf {
        self.home.path().join("runs")
    }

    fn script(&self) -> PathBuf {
        self.home.path().join("agent.sh")
    }

    fn command(&self) -> Command {
        let mut c = Command::new(kungfu());
        c.env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path().join("xdg"))
            .env("WAKE_DIR", self.runs())
            .env_remove("KUNGFU_KEY")
            .env_remove("KUNGFU_ENDPOINTS")
            .env_remove("KUNGFU_PROFILE")
            .env_remove("KUNGFUD");
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command().args(args).output().expect("run kungfu")
    }

    /// `kungfu --json --profile P ARGS`, which must succeed; its JSON.
    fn ok(&self, profile: &str, args: &[&str]) -> Value {
        let mut all = vec!["--json", "--profile", profile];
        all.extend_from_slice(args);
        let out = self.run(&all);
        assert!(out.status.success(), "kungfu {all:?}: {}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no JSON ({e}): {}", text(&out)))
    }

    /// Starts `kungfu agent serve --profile P EXTRA -- agent.sh`, its stderr in `serve.log`.
    fn serve(&self, profile: &str, extra: &[&str]) -> Runner {
        let log = self.home.path().join(format!("serve-{profile}.log"));
        let file = std::fs::File::create(&log).expect("log file");
        let script = self.script().display().to_string();
        let child = self
            .command()
            .args(["agent", "serve", "--profile", profile])
            .args(extra)
            .args(["--", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("spawn kungfu agent serve");
        Runner { child, log }
    }

    fn release(&self, name: &str) {
        std::fs::File::create(self.runs().join(name)).expect("release").flush().expect("flush");
    }

    /// The stdin of run `n`, once it is complete (bounded wait).
    fn stdin_of(&self, n: u64, runner: &Runner, logs: &dyn Fn() -> String) -> Value {
        let path = self.runs().join(format!("stdin-{n}.json"));
        let start = Instant::now();
        while !path.exists() {
            assert!(start.elapsed() < BOUND, "run {n} never started\nrunner:\n{}\n{}", runner.log(), logs());
            std::thread::sleep(Duration::from_millis(25));
        }
        let bytes = std::fs::read(&path).expect("stdin file");
        serde_json::from_slice(&bytes).expect("the turn as JSON")
    }

    fn started_ns(&self, n: u64) -> u128 {
        std::fs::read_to_string(self.runs().join(format!("start-{n}"))).expect("start").trim().parse().expect("ns")
    }

    fn env_of(&self, n: u64) -> String {
        std::fs::read_to_string(self.runs().join(format!("env-{n}"))).expect("env")
    }

    fn exists(&self, name: &str) -> bool {
        self.runs().join(name).exists()
    }

    /// Registers the agent of `profile` at `endpoints`; its id.
    fn register(&self, profile: &str, endpoints: &str) -> String {
        let v = self.ok(profile, &["register", "--endpoint", endpoints]);
        s(&v["agent"])
    }
}

/// The runner process; killed if the test ends without stopping it.
struct Runner {
    child: Child,
    log: PathBuf,
}

impl Runner {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits (bounded) until the log has a line containing `needle`.
    fn wait_log(&self, needle: &str, logs: &dyn Fn() -> String) {
        let start = Instant::now();
        while !self.log().contains(needle) {
            assert!(start.elapsed() < BOUND, "no log line with {needle:?}:\n{}\n{}", self.log(), logs());
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// SIGTERM, then the exit status within a bound.
    fn terminate(&mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(start.elapsed() < BOUND, "the runner did not stop on SIGTERM:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A thread of `lead` that `agent` joined as a speaker.
fn shared_thread(home: &Home, lead: &str, agent: &str) -> String {
    let created = home.ok(lead, &["thread", "create", "--text", "work", "--grant", "speaker"]);
    let th = s(&created["receipt"]["result"]["thread_created"]["thread"]);
    home.ok(agent, &["thread", "join", &s(&created["grant_secret"])]);
    th
}

/// `lead` asks `agent` in `th`: the id of the response obligation that arises, as the runner's
/// stdin names it (`{"kind":{"response":{…}}}`), and the entry.
fn ask(home: &Home, lead: &str, th: &str, agent: &str) -> u64 {
    let posted = home.ok(lead, &["thread", "post", th, "--text", "please look", "--ask", agent]);
    s(&posted["receipt"]["result"]["posted"]["entry"]).parse().expect("entry number")
}

/// The entries of the response obligations in a run's `new`.
fn new_entries(stdin: &Value) -> Vec<u64> {
    let mut e: Vec<u64> = stdin["new"]
        .as_array()
        .expect("new")
        .iter()
        .map(|o| s(&o["kind"]["response"]["entry"]).parse().expect("entry"))
        .collect();
    e.sort();
    e
}

/// One node with a leader, and two agents in the profiles `lead` and `alice`.
fn one_node(home: &Home) -> (Cluster, String) {
    let cluster = Cluster::start(1, "");
    let endpoint = cluster.nodes.values().map(|n| n.api.to_string()).next().expect("one node");
    let start = Instant::now();
    loop {
        let out = home.run(&["--json", "--profile", "lead", "register", "--endpoint", &endpoint]);
        if out.status.success() {
            break;
        }
        assert!(start.elapsed() < BOUND, "no leader: {}\n{}", text(&out), cluster.logs());
        std::thread::sleep(Duration::from_millis(100));
    }
    (cluster, endpoint)
}

#[test]
fn an_obligation_runs_the_command_once_and_changes_during_a_run_make_exactly_one_more() {
    let home = Home::new();
    let (cluster, endpoint) = one_node(&home);
    let logs = || cluster.logs();
    let alice = home.register("alice", &endpoint);
    let th = shared_thread(&home, "lead", "alice");
    let runner = home.serve("alice", &[]);
    runner.wait_log("watching the turn", &logs);

    // An obligation arises: run 1, with the turn on stdin and the cursor, endpoints, profile and
    // agent in the environment.
    let e1 = ask(&home, "lead", &th, &alice);
    let first = home.stdin_of(1, &runner, &logs);
    assert_eq!(new_entries(&first), [e1], "{first}");
    assert_eq!(first["agent"], alice.as_str(), "{first}");
    assert_eq!(first["profile"], "alice", "{first}");
    let items = first["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{first}");
    assert_eq!(s(&items[0]["obligation"]["kind"]["response"]["thread"]), th, "{first}");
    let cursor = s(&first["cursor"]);
    assert!(!cursor.is_empty(), "{first}");
    let env = home.env_of(1);
    for line in [
        format!("KUNGFU_TURN_CURSOR={cursor}"),
        format!("KUNGFU_ENDPOINTS={endpoint}"),
        "KUNGFU_PROFILE=alice".to_string(),
        format!("KUNGFU_AGENT={alice}"),
        "KUNGFU_RUN=1".to_string(),
    ] {
        assert!(env.lines().any(|l| l == line), "{line} in:\n{env}");
    }
    assert!(!env.contains("KUNGFU_KEY="), "the profile's key is not copied into the environment:\n{env}");

    // Two more arise while run 1 is in progress: they wait, and become one run 2 after it.
    let e2 = ask(&home, "lead", &th, &alice);
    let e3 = ask(&home, "lead", &th, &alice);
    runner.wait_log("run 1 in progress: 2 obligation(s) wait for the next run", &logs);
    assert!(!home.exists("stdin-2.json"), "one run at a time");
    home.release("release-1");
    let second = home.stdin_of(2, &runner, &logs);
    assert_eq!(new_entries(&second), [e2, e3], "{second}");
    assert_eq!(second["items"].as_array().map(Vec::len), Some(3), "the whole turn: {second}");
    home.release("release-2");
    runner.wait_log("run 2: exited with status 0", &logs);

    // The next run is for the next obligation only: nothing was run twice, no run was empty.
    let e4 = ask(&home, "lead", &th, &alice);
    let third = home.stdin_of(3, &runner, &logs);
    assert_eq!(new_entries(&third), [e4], "{third}");
    let log = runner.log();
    assert!(log.contains("run 1: started") && log.contains("run 1: exited with status 0 after"), "{log}");

    // SIGTERM during run 3: the run is stopped, the runner exits 0 and says so.
    let mut runner = runner;
    let status = runner.terminate();
    assert!(status.success(), "{status:?}\n{}", runner.log());
    let log = runner.log();
    assert!(log.contains("stopping on a signal") && log.contains("run 3: stopping (SIGTERM"), "{log}");
    assert!(!home.exists("stdin-4.json"), "{log}");
}

#[test]
fn a_failing_command_is_retried_with_a_capped_backoff_and_logged() {
    let home = Home::new();
    let (cluster, endpoint) = one_node(&home);
    let logs = || cluster.logs();
    let alice = home.register("alice", &endpoint);
    let th = shared_thread(&home, "lead", "alice");
    home.release("fail");
    let runner = home.serve("alice", &["--retry-backoff", "0.3", "--max-retry-backoff", "0.6"]);
    runner.wait_log("watching the turn", &logs);

    let e1 = ask(&home, "lead", &th, &alice);
    for n in 1..=4 {
        assert_eq!(new_entries(&home.stdin_of(n, &runner, &logs)), [e1], "run {n} retries the same obligation");
    }
    // Each retry waited at least its backoff: 0.3 s, then 0.6 s (doubled), then 0.6 s (the cap).
    let gaps: Vec<u128> = (1..4).map(|n| home.started_ns(n + 1) - home.started_ns(n)).collect();
    for (gap, least) in gaps.iter().zip([300_000_000u128, 600_000_000, 600_000_000]) {
        assert!(*gap >= least, "gaps {gaps:?} ns\n{}", runner.log());
    }
    runner.wait_log("run 3: exited with status 3 after", &logs);
    let log = runner.log();
    assert!(log.contains("failure 1 in a row, next run no sooner than in 0.3 s"), "{log}");
    assert!(log.contains("failure 2 in a row, next run no sooner than in 0.6 s"), "{log}");
    assert!(log.contains("failure 3 in a row, next run no sooner than in 0.6 s"), "capped:\n{log}");

    // Once the command works, the obligation's run succeeds and the backoff is over.
    std::fs::remove_file(home.runs().join("fail")).expect("remove fail");
    home.release("release-all");
    let start = Instant::now();
    let succeeded = loop {
        let log = runner.log();
        if let Some(line) = log.lines().find(|l| l.contains("exited with status 0")) {
            break line.to_string();
        }
        assert!(start.elapsed() < BOUND, "no run succeeded:\n{log}");
        std::thread::sleep(Duration::from_millis(25));
    };
    let n: u64 =
        succeeded.split("run ").nth(1).and_then(|r| r.split(':').next()).and_then(|n| n.parse().ok()).expect("run n");
    assert_eq!(new_entries(&home.stdin_of(n, &runner, &logs)), [e1], "{succeeded}");
}

#[test]
fn a_missing_command_is_refused_with_a_usage_error() {
    let home = Home::new();
    let out = home.run(&["--json", "agent", "serve", "--key", "kf_any", "--", "no-such-program-for-kungfu"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let e: Value = serde_json::from_str(stderr.lines().last().unwrap_or_default()).expect("JSON error");
    assert_eq!((e["error"]["code"].as_str(), e["error"]["field"].as_str()), (Some("USAGE"), Some("command")), "{e}");
    assert!(s(&e["error"]["message"]).contains("PATH"), "{e}");
}

#[test]
fn a_refused_key_ends_the_runner_with_the_node_s_code() {
    let home = Home::new();
    let (cluster, endpoint) = one_node(&home);
    let script = home.script().display().to_string();
    let out = home
        .command()
        .args(["--json", "agent", "serve", "--key", "kf_ag_not_a_real_key", "--endpoint", &endpoint, "--", &script])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(4), "{}\n{}", text(&out), cluster.logs());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let e: Value = serde_json::from_str(stderr.lines().last().unwrap_or_default()).expect("JSON error");
    assert_eq!(e["error"]["code"], "UNAUTHENTICATED", "{e}");
    assert!(!home.exists("stdin-1.json"), "nothing ran");
}

// ---- `kungfu dev up`: a leader kill in the middle ----

/// A base port such that BASE..BASE+3, BASE+100..BASE+103 and BASE+200..BASE+203 are free on
/// loopback now (as in tests/demo.rs).
fn free_base() -> u16 {
    let seed = std::process::id() as u16;
    for attempt in 0..200u16 {
        let base = 20000 + (seed.wrapping_add(attempt.wrapping_mul(211)) % 30000);
        let ports = (0..3).flat_map(|i| [base + i, base + 100 + i, base + 200 + i]);
        let held: Vec<std::net::TcpListener> =
            ports.filter_map(|p| std::net::TcpListener::bind(("127.0.0.1", p)).ok()).collect();
        if held.len() == 9 {
            return base;
        }
    }
    panic!("no free block of ports found");
}

fn pid_of(dir: &Path, id: u64) -> Option<u32> {
    std::fs::read_to_string(dir.join(format!("node{id}.pid"))).ok()?.trim().parse().ok()
}

/// The local cluster, brought down (and every node killed) when the test ends.
struct DevCluster<'a> {
    home: &'a Home,
    dir: PathBuf,
}

impl DevCluster<'_> {
    fn logs(&self) -> String {
        (1..=3)
            .map(|i| {
                let log = std::fs::read_to_string(self.dir.join(format!("node{i}.log"))).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(20).collect();
                format!("--- node {i} ---\n{}\n", tail.into_iter().rev().collect::<Vec<_>>().join("\n"))
            })
            .collect()
    }

    /// The node every reachable node names as leader, once there is one (bounded wait).
    fn leader(&self, not: Option<u64>) -> u64 {
        let start = Instant::now();
        loop {
            let out = self.home.run(&["--json", "--profile", "dev", "cluster", "status"]);
            if out.status.success() {
                let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
                let leaders: Vec<u64> = v["nodes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|n| n["role"] == "leader")
                    .filter_map(|n| n["node_id"].as_u64())
                    .collect();
                if let [one] = leaders[..]
                    && Some(one) != not
                {
                    return one;
                }
            }
            assert!(start.elapsed() < BOUND, "no leader: {}\n{}", text(&out), self.logs());
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for DevCluster<'_> {
    fn drop(&mut self) {
        let dir = self.dir.display().to_string();
        let _ = self.home.run(&["dev", "down", "--dir", &dir, "--purge"]);
        for id in 1..=3 {
            if let Some(pid) = pid_of(&self.dir, id) {
                let _ = Command::new("kill").arg("-KILL").arg(pid.to_string()).stderr(Stdio::null()).status();
            }
        }
    }
}

#[test]
fn the_runner_keeps_waking_the_agent_through_a_leader_kill_under_dev_up() {
    let home = Home::new();
    let dir = home.home.path().join("cluster");
    let kungfud = kungfu().parent().map(|d| d.join("kungfud")).expect("kungfud next to kungfu");
    assert!(kungfud.is_file(), "{} is missing: build the workspace first", kungfud.display());
    let base = free_base();
    let dir_arg = dir.display().to_string();
    let cluster = DevCluster { home: &home, dir: dir.clone() };
    let up = home.run(&[
        "dev",
        "up",
        "--dir",
        &dir_arg,
        "--base-port",
        &base.to_string(),
        "--kungfud",
        &kungfud.display().to_string(),
    ]);
    assert!(up.status.success(), "dev up: {}\n{}", text(&up), cluster.logs());
    let logs = || cluster.logs();
    let endpoints = (0..3).map(|i| format!("127.0.0.1:{}", base + i)).collect::<Vec<_>>().join(",");
    let _ = cluster.leader(None);
    home.register("lead", &endpoints);
    let alice = home.register("alice", &endpoints);
    let th = shared_thread(&home, "lead", "alice");
    home.release("release-all");
    let runner = home.serve("alice", &[]);
    runner.wait_log("watching the turn", &logs);

    let e1 = ask(&home, "lead", &th, &alice);
    assert_eq!(new_entries(&home.stdin_of(1, &runner, &logs)), [e1]);
    runner.wait_log("run 1: exited with status 0", &logs);

    // The leader is killed; the runner's stream ends and is reopened from its cursor.
    let leader = cluster.leader(None);
    let pid = pid_of(&dir, leader).expect("the leader's pid");
    let _ = Command::new("kill").arg("-KILL").arg(pid.to_string()).status();
    let _ = cluster.leader(Some(leader));
    runner.wait_log("turn watch:", &logs);

    // An obligation that arises after the kill still runs the command, once.
    let e2 = ask(&home, "lead", &th, &alice);
    let second = home.stdin_of(2, &runner, &logs);
    assert_eq!(new_entries(&second), [e2], "{second}\n{}", runner.log());
    assert_eq!(second["items"].as_array().map(Vec::len), Some(2), "{second}");
}
