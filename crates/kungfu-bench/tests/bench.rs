//! `kungfu bench deadlines`, `write`, `compare` and `instructions` end to end, small, against the
//! debug `kungfud` built with the workspace (or `$KUNGFUD`): the JSON has its shape and sane
//! values, and each run leaves no process and no file behind. The comparison needs etcd 3.4 on
//! PATH (Debian's `etcd-server`), the instruction counts valgrind (Debian's `valgrind`); CI
//! installs both, and a test whose program is missing fails rather than skips.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The longest one benchmark run may take here before the test fails (and kills it).
const RUN_BOUND: Duration = Duration::from_secs(180);

/// The `kungfu` built with the workspace, beside the `kungfu-bench` under test: every run goes
/// through `kungfu bench …`, as a user types it, so the hand-over to the harness is tested too.
fn kungfu() -> PathBuf {
    let bench = PathBuf::from(env!("CARGO_BIN_EXE_kungfu-bench"));
    let bin = bench.parent().map(|d| d.join("kungfu")).unwrap_or_default();
    assert!(bin.is_file(), "{} is missing: build the workspace first", bin.display());
    bin
}

/// `$KUNGFUD` when set, else the `kungfud` built with the workspace, next to `kungfu`.
fn kungfud() -> PathBuf {
    if let Some(given) = std::env::var_os("KUNGFUD").filter(|v| !v.is_empty()) {
        let bin = PathBuf::from(given);
        assert!(bin.is_file(), "KUNGFUD={} is not a file", bin.display());
        return bin;
    }
    let bin = kungfu().parent().map(|d| d.join("kungfud")).unwrap_or_default();
    assert!(bin.is_file(), "{} is missing: build the workspace first (or set KUNGFUD)", bin.display());
    bin
}

/// The pids of live processes whose command line mentions `dir` (the nodes' configs are in it).
fn processes_under(dir: &Path) -> Vec<u32> {
    let needle = dir.to_string_lossy().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .ok()
            .and_then(|s| s.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().next().map(|c| c == "Z")))
            .unwrap_or(true);
        if !zombie && String::from_utf8_lossy(&cmdline).contains(&needle) {
            found.push(pid);
        }
    }
    found
}

/// Runs `kungfu bench <args> --json` with its files under `dir`; returns the parsed JSON.
fn bench(dir: &Path, args: &[&str]) -> Value {
    let mut child = Command::new(kungfu())
        .arg("bench")
        .args(args)
        .arg("--json")
        .arg("--kungfud")
        .arg(kungfud())
        .arg("--data-dir")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kungfu bench");
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > RUN_BOUND {
            let _ = child.kill();
            let _ = child.wait();
            panic!("kungfu bench {args:?} ran longer than {RUN_BOUND:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().expect("output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kungfu bench {args:?} failed ({}):\n{stderr}", out.status);
    let json: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not one JSON object ({e}):\n{}", String::from_utf8_lossy(&out.stdout)));
    // The run killed its nodes and removed its own directory.
    assert!(processes_under(dir).is_empty(), "processes left running: {:?}", processes_under(dir));
    let left: Vec<_> = std::fs::read_dir(dir).expect("dir").flatten().map(|e| e.path()).collect();
    assert!(left.is_empty(), "files left behind: {left:?}");
    json
}

fn f(v: &Value, path: &str) -> f64 {
    let mut at = v;
    for key in path.split('.') {
        at = &at[key];
    }
    at.as_f64().unwrap_or_else(|| panic!("{path} is not a number in {v:#}"))
}

fn assert_machine_and_server(v: &Value) {
    assert!(f(v, "machine.nproc") >= 1.0, "{v:#}");
    assert!(f(v, "machine.memory_bytes") > 0.0, "{v:#}");
    assert!(v["kungfud"]["version"].as_str().is_some_and(|s| s.starts_with("kungfud")), "{v:#}");
    assert_eq!(v["kungfud"]["build"], "debug", "{v:#}");
}

#[test]
fn bench_deadlines_and_write_report_from_real_nodes_and_leave_nothing_behind() {
    let dir = tempfile::tempdir().expect("tempdir");

    let d = bench(dir.path(), &["deadlines", "--nodes", "1", "--count", "20"]);
    assert_eq!(d["bench"], "deadlines");
    assert_machine_and_server(&d);
    assert_eq!(d["params"]["count"], 20);
    assert_eq!(d["params"]["nodes"], 1);
    assert_eq!(d["count"], 20);
    assert_eq!(d["ended"], 20, "every deadline ended: {d:#}");
    assert_eq!(d["timed_out"], 20, "{d:#}");
    assert_eq!((d["missing"].as_u64(), d["duplicates"].as_u64()), (Some(0), Some(0)), "{d:#}");
    assert_eq!(d["due_mismatches"], 0, "the facts' due times are the takes' due times: {d:#}");
    assert_eq!(d["due"]["outside_second"], 0, "every deadline fell within [T, T+1 s): {d:#}");
    assert_eq!(f(&d, "lateness_ms.count"), 20.0);
    let (min, p50, p99, max) =
        (f(&d, "lateness_ms.min"), f(&d, "lateness_ms.p50"), f(&d, "lateness_ms.p99"), f(&d, "lateness_ms.max"));
    assert!(min >= 0.0, "no deadline ended early: {d:#}");
    assert!(min <= p50 && p50 <= p99 && p99 <= max, "{d:#}");
    assert!(max < 60_000.0, "ended within a minute: {d:#}");
    assert!(f(&d, "expiry.actions") >= 1.0, "{d:#}");
    assert!(f(&d, "expiry.log_entries") >= f(&d, "expiry.actions"), "each expiry action is a log entry: {d:#}");
    assert!(f(&d, "expiry.first_to_last_ms") >= 0.0, "{d:#}");
    assert!(d["leader"]["killed"].is_null(), "{d:#}");

    let w = bench(dir.path(), &["write", "--nodes", "1", "--writers", "4", "--connections", "2", "--seconds", "2"]);
    assert_eq!(w["bench"], "write");
    assert_machine_and_server(&w);
    assert_eq!(w["params"]["writers"], 4);
    assert_eq!(w["params"]["shared_thread"], false);
    assert!(f(&w, "ops") > 0.0, "{w:#}");
    assert!(f(&w, "ops_per_sec") > 0.0, "{w:#}");
    assert!(f(&w, "elapsed_secs") >= 2.0, "{w:#}");
    assert_eq!(f(&w, "latency_ms.count"), f(&w, "ops"), "{w:#}");
    let (p50, p90, p99, max) =
        (f(&w, "latency_ms.p50"), f(&w, "latency_ms.p90"), f(&w, "latency_ms.p99"), f(&w, "latency_ms.max"));
    assert!(0.0 < p50 && p50 <= p90 && p90 <= p99 && p99 <= max, "{w:#}");
    assert_eq!(w["errors_total"], 0, "{w:#}");
}

/// `name` on PATH, or a failure that says how to get it (`install`): these tests do not skip.
fn on_path(name: &str, install: &str) -> PathBuf {
    let found =
        std::env::var_os("PATH").iter().flat_map(std::env::split_paths).map(|d| d.join(name)).find(|p| p.is_file());
    found.unwrap_or_else(|| panic!("no `{name}` on PATH: {install}"))
}

#[test]
fn bench_compare_measures_kungfu_and_etcd_in_one_run_and_leaves_nothing_behind() {
    on_path("etcd", "install etcd 3.4 (Debian: apt-get install etcd-server)");
    let dir = tempfile::tempdir().expect("tempdir");
    let args = [
        "compare",
        "--against",
        "etcd",
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
        "--repeat",
        "1",
    ];
    let c = bench(dir.path(), &args);
    assert_eq!(c["bench"], "compare");
    assert_machine_and_server(&c);
    assert!(c["etcd"]["version"].as_str().is_some_and(|v| v.contains("etcd")), "{c:#}");
    assert_eq!(c["params"]["workloads"], serde_json::json!(["own", "read"]), "{c:#}");
    let points = c["points"].as_array().unwrap_or_else(|| panic!("no points in {c:#}"));
    assert_eq!(points.len(), 3, "one point per workload, and `own` again: {c:#}");
    let again: Vec<bool> = points.iter().map(|p| p["again"].as_bool().unwrap_or_else(|| panic!("{c:#}"))).collect();
    assert_eq!(again, [false, false, true], "{c:#}");
    for (point, workload) in points.iter().zip(["own", "read", "own"]) {
        assert_eq!(point["workload"], workload, "{c:#}");
        // Where the work went (issue #30): CPU per call on both sides, and Kungfu's batching.
        for system in ["kungfu", "etcd"] {
            assert!(f(&point[system], "work.client_cpu_us_per_op") > 0.0, "{system} {workload}: {c:#}");
            assert!(point[system]["work"]["server_cpu_us_per_op"].is_number(), "{system} {workload}: {c:#}");
        }
        if workload == "own" {
            assert!(f(&point["kungfu"], "work.write_path.entries_per_append") >= 1.0, "{c:#}");
            assert!(f(&point["kungfu"], "work.write_path.commands_per_apply_batch") >= 1.0, "{c:#}");
            assert!(f(&point["kungfu"], "work.write_path.log_syncs_per_sec") > 0.0, "{c:#}");
        }
        assert_eq!((point["nodes"].as_u64(), point["writers"].as_u64()), (Some(1), Some(1)), "{c:#}");
        for system in ["kungfu", "etcd"] {
            let s = &point[system];
            assert!(f(s, "ops") > 0.0, "{system} {workload}: {c:#}");
            assert_eq!(f(s, "latency_ms.count"), f(s, "ops"), "{system} {workload}: {c:#}");
            assert!(f(s, "elapsed_secs") >= 1.0, "{system} {workload}: {c:#}");
            let processes = s["processes"].as_array().unwrap_or_else(|| panic!("{system}: no processes in {c:#}"));
            assert_eq!(processes.len(), 1, "one server process: {c:#}");
            let (rss, peak) = (f(&processes[0], "rss_bytes"), f(&processes[0], "peak_rss_bytes"));
            assert!(rss > 0.0 && peak >= rss, "{system}: {c:#}");
        }
        assert!(f(point, "ratio.ops_per_sec") > 0.0, "{c:#}");
        assert!(f(point, "ratio.p99") > 0.0, "{c:#}");
    }
}

#[test]
fn bench_instructions_counts_each_phase_under_callgrind_and_leaves_nothing_behind() {
    for name in ["valgrind", "callgrind_control"] {
        on_path(name, "install valgrind (Debian: apt-get install valgrind)");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    // Five calls per phase: valgrind runs a debug `kungfud` many times slower.
    let v = bench(dir.path(), &["instructions", "--ops", "5"]);
    assert_eq!(v["bench"], "instructions");
    assert_machine_and_server(&v);
    assert!(v["valgrind"]["version"].as_str().is_some_and(|s| s.starts_with("valgrind")), "{v:#}");
    assert_eq!(v["params"], serde_json::json!({"nodes": 1, "ops": 5, "warmup_ops": 10, "payload_bytes": 1024}));
    let phases = v["phases"].as_array().unwrap_or_else(|| panic!("no phases in {v:#}"));
    let names: Vec<&str> = phases.iter().filter_map(|p| p["phase"].as_str()).collect();
    assert_eq!(names, ["own", "read", "mcp"], "{v:#}");
    for p in phases {
        assert_eq!(p["ops"], 5, "{v:#}");
        assert!(p["call"].as_str().is_some_and(|c| !c.is_empty()), "{v:#}");
        let (ir, per_op) = (f(p, "ir"), f(p, "ir_per_op"));
        assert!(ir > 0.0 && per_op > 0.0, "each phase counted instructions: {v:#}");
        assert!((per_op * 5.0 - ir).abs() <= 5.0, "Ir per op is the total over the ops: {v:#}");
        assert!(f(p, "seconds") > 0.0, "{v:#}");
    }
}

/// `kungfu bench wake` under both loads: writes go through without and with targets, and
/// deliveries arrive with a fact-to-delivery latency for changes of the second window.
#[test]
fn bench_wake_delivers_under_both_workloads_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    for workload in ["asks", "mixed"] {
        let v = bench(
            dir.path(),
            &[
                "wake",
                "--nodes",
                "1",
                "--agents",
                "6",
                "--writers",
                "2",
                "--connections",
                "2",
                "--seconds",
                "1",
                "--workload",
                workload,
            ],
        );
        assert_eq!(v["bench"], "wake");
        assert_machine_and_server(&v);
        assert_eq!(v["params"]["workload"], workload, "{v:#}");
        assert!(f(&v, "without_targets.ops") > 0.0 && f(&v, "with_targets.ops") > 0.0, "{v:#}");
        assert!(f(&v, "deliveries") >= 1.0, "{v:#}");
        let (n, p50, max) =
            (f(&v, "fact_to_delivery_ms.count"), f(&v, "fact_to_delivery_ms.p50"), f(&v, "fact_to_delivery_ms.max"));
        assert!(n >= 1.0 && 0.0 <= p50 && p50 <= max, "a latency for changes of the second window: {v:#}");
    }
}
