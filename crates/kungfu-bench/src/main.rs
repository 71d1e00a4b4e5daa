//! `kungfu-bench` (also run as `kungfu bench`): end-to-end benchmarks through the public gRPC API,
//! against a fresh local cluster of real `kungfud` processes that each run starts for itself and
//! removes at the end.
//!
//! - [`cluster`]: the cluster of one run (free ports, a new directory, killed and removed on drop).
//! - [`deadlines`]: many deadlines falling due within one second; lateness from the facts.
//! - [`write`]: concurrent writers posting entries; operations per second and latency.
//! - [`compare`]: Kungfu beside etcd, per workload and writer count, with ratios.
//! - [`etcd`]: the etcd cluster of a comparison and its generated client.
//! - [`instructions`]: the instructions one node executes per call, under callgrind (a regression
//!   guard compared in review, not a timed test).
//! - [`load`]: the closed loop every throughput bench drives: warm-up, window, what counts.
//! - [`memory`]: the resident memory of a server process.
//! - [`stats`]: percentiles and summaries.
//! - [`args`]: the command line.
//!
//! The harness is a program of its own, so the user's `kungfu` carries no etcd client and no
//! callgrind driver; it shares the command line's errors, exit statuses and output
//! (`kungfu_cli::error`, `kungfu_cli::output`) and its lookup of `kungfud`.
//!
//! Every run prints the machine, the server binary and the parameters with its figures: a table on
//! stdout, or with `--json` one JSON object. Progress goes to stderr. Ctrl-C or SIGTERM stops the
//! run; dropping the run's future kills the nodes and removes their directory.

mod args;
mod cluster;
mod compare;
mod deadlines;
mod etcd;
mod instructions;
mod load;
mod memory;
mod stats;
mod wake;
mod work;
mod write;

use crate::args::{Bench, BenchCmd, BenchFiles};
use kungfu_cli::error::CliError;
use kungfu_cli::output;
use serde_json::{Value, json};
use std::ffi::OsString;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn main() {
    use clap::Parser;
    let args = Bench::parse();
    let json = args.json;
    // A benchmark drives thousands of concurrent calls: it gets a worker thread per core, as a
    // user's multi-threaded client would.
    let result = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime.block_on(run(args.command, json)),
        Err(e) => Err(CliError::other(format!("cannot start the async runtime: {e}"))),
    };
    if let Err(e) = result {
        e.print(json);
        std::process::exit(e.exit);
    }
}

/// Runs a benchmark until it ends or the process is interrupted.
async fn run(cmd: BenchCmd, json: bool) -> Result<(), CliError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term =
        signal(SignalKind::terminate()).map_err(|e| CliError::other(format!("cannot watch for SIGTERM: {e}")))?;
    // The branch not taken is dropped, and with it the cluster of the run: its nodes are killed
    // and its directory removed before the error is printed.
    tokio::select! {
        r = bench(cmd, json) => r,
        _ = tokio::signal::ctrl_c() => Err(CliError::other("interrupted (Ctrl-C); the benchmark's nodes were killed")),
        _ = term.recv() => Err(CliError::other("terminated (SIGTERM); the benchmark's nodes were killed")),
    }
}

async fn bench(cmd: BenchCmd, json: bool) -> Result<(), CliError> {
    let files: &BenchFiles = match &cmd {
        BenchCmd::Deadlines { cluster, .. } | BenchCmd::Write { cluster, .. } | BenchCmd::Wake { cluster, .. } => {
            &cluster.files
        }
        BenchCmd::Compare(args) => &args.files,
        BenchCmd::Instructions(args) => &args.files,
    };
    if let BenchCmd::Write { shared_thread: true, writers, .. } = &cmd {
        if *writers > write::MAX_SHARED_WRITERS {
            return Err(CliError::usage(format!(
                "--shared-thread allows at most {} writers (a thread's member limit); got {writers}",
                write::MAX_SHARED_WRITERS
            )));
        }
    }
    if let BenchCmd::Compare(args) = &cmd {
        // The flags are checked before anything starts, so a typo costs no cluster.
        compare::check(args)?;
    }
    if let BenchCmd::Instructions(_) = &cmd {
        // Without valgrind there is nothing to count: say so before a node starts.
        instructions::tools(std::env::var_os("PATH"))?;
    }
    let binary = kungfu_cli::dev::find_kungfud(files.kungfud.clone())?;
    let server = server_info(&binary);
    if server["build"] == "debug" {
        progress(format!(
            "warning: {} is a debug build; figures from it say little. Build release binaries: \
             cargo build --release --bin kungfu-bench --bin kungfud",
            binary.display()
        ));
    }
    let (name, title, params, mut body, rows) = match cmd {
        BenchCmd::Compare(args) => return compare::run(args, binary, server, json).await,
        BenchCmd::Instructions(args) => return instructions::run(args, binary, server, json).await,
        BenchCmd::Deadlines { cluster, count, window_secs, concurrency, kill_leader } => {
            let window_secs = window_secs.unwrap_or_else(|| deadlines::Params::default_window_secs(count));
            let p = deadlines::Params { count, window_secs, concurrency, kill_leader };
            let params = format!(
                "nodes {}, count {count}, window {window_secs} s, concurrency {concurrency}, kill-leader {}",
                cluster.nodes,
                if kill_leader { "yes" } else { "no" }
            );
            let title = format!(
                "kungfu bench deadlines: {count} undelivered assignments due within one second, {} node(s){}",
                cluster.nodes,
                if kill_leader { ", leader killed 0.5 s before" } else { "" }
            );
            let report = deadlines::run(&cluster, binary.clone(), p).await?;
            ("deadlines", title, params, report.to_json(), report.rows())
        }
        BenchCmd::Write { cluster, writers, connections, seconds, shared_thread, entry_bytes } => {
            let p = write::Params { writers, connections, seconds, shared_thread, entry_bytes };
            let params = format!(
                "nodes {}, writers {writers}, connections {connections}, seconds {seconds}, {}, entry {entry_bytes} bytes",
                cluster.nodes,
                if shared_thread { "one shared thread" } else { "a thread per writer" }
            );
            let title = format!("kungfu bench write: {writers} writer(s), {} node(s)", cluster.nodes);
            let report = write::run(&cluster, binary.clone(), p).await?;
            ("write", title, params, report.to_json(), report.rows())
        }
        BenchCmd::Wake { cluster, agents, writers, connections, seconds, workload } => {
            let mixed = workload == "mixed";
            let p = wake::Params { agents, writers, connections, seconds, mixed };
            let params = format!(
                "nodes {}, agents {agents}, writers {writers}, connections {connections}, {seconds} s per window, workload {workload}",
                cluster.nodes
            );
            let title = if mixed {
                format!(
                    "kungfu bench wake: the mixed workload, {writers} pair(s) of {agents} subscribed agent(s), {} node(s)",
                    cluster.nodes
                )
            } else {
                format!("kungfu bench wake: {agents} agent(s) asked by {writers} writer(s), {} node(s)", cluster.nodes)
            };
            let report = wake::run(&cluster, binary.clone(), p).await?;
            ("wake", title, params, report.to_json(), report.rows())
        }
    };
    let machine = machine();
    if json {
        if let Value::Object(map) = &mut body {
            map.insert("bench".into(), json!(name));
            map.insert("machine".into(), machine);
            map.insert("kungfud".into(), server);
        }
        output::print_json(&body);
        return Ok(());
    }
    println!("{title}");
    let mut all: Vec<(&str, String)> =
        vec![("machine", machine_text(&machine)), ("kungfud", server_text(&server)), ("parameters", params)];
    all.extend(rows);
    output::pairs(&all);
    Ok(())
}

/// A progress line on stderr (stdout holds only the result).
pub fn progress(message: impl AsRef<str>) {
    eprintln!("bench: {}", message.as_ref());
}

/// Now, in microseconds since the Unix epoch: the clock the server stamps commands with, on the
/// same machine.
pub fn now_us() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_micros()).unwrap_or(i64::MAX)
}

/// Sleeps until `at_us` (microseconds since the epoch); returns at once if it has passed.
pub async fn sleep_until_us(at_us: i64) {
    let left = at_us - now_us();
    if left > 0 {
        tokio::time::sleep(Duration::from_micros(left.unsigned_abs())).await;
    }
}

/// Runs `f(0)`, …, `f(n - 1)` with at most `limit` running at once; returns their results in
/// order, or the first error (the others are then aborted).
pub async fn bounded<T, F, Fut>(n: u64, limit: usize, mut f: F) -> Result<Vec<T>, CliError>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Result<T, CliError>> + Send + 'static,
    T: Send + 'static,
{
    let n = usize::try_from(n).map_err(|_| CliError::usage("too many"))?;
    let mut tasks = tokio::task::JoinSet::new();
    let mut done: Vec<(usize, T)> = Vec::with_capacity(n);
    let mut next = 0;
    while next < n || !tasks.is_empty() {
        if next < n && tasks.len() < limit.max(1) {
            let fut = f(next);
            tasks.spawn(async move { (next, fut.await) });
            next += 1;
            continue;
        }
        let Some(joined) = tasks.join_next().await else { break };
        let (i, result) = joined.map_err(|e| CliError::other(format!("a setup task failed: {e}")))?;
        match result {
            Ok(v) => done.push((i, v)),
            Err(e) => {
                tasks.abort_all();
                return Err(e);
            }
        }
    }
    done.sort_by_key(|(i, _)| *i);
    Ok(done.into_iter().map(|(_, v)| v).collect())
}

/// The file `name` in the first directory of `path_var` (the value of `PATH`) that has one.
fn on_path(name: &str, path_var: Option<OsString>) -> Option<PathBuf> {
    path_var.iter().flat_map(std::env::split_paths).map(|d| d.join(name)).find(|p| p.is_file())
}

/// The total memory in `/proc/meminfo`'s text, in bytes.
fn mem_total_bytes(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The machine the run measured on: cores, memory, operating system.
fn machine() -> Value {
    let nproc = std::thread::available_parallelism().map(|n| n.get()).ok();
    let memory = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| mem_total_bytes(&t));
    let os = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|t| t.lines().find_map(|l| l.strip_prefix("PRETTY_NAME=").map(|v| v.trim_matches('"').to_string())));
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok().map(|k| k.trim().to_string());
    json!({ "nproc": nproc, "memory_bytes": memory, "os": os, "kernel": kernel })
}

fn machine_text(m: &Value) -> String {
    let gib = m["memory_bytes"].as_u64().map(|b| format!("{:.1} GiB", b as f64 / f64::from(1u32 << 30)));
    format!(
        "{} cpu(s), {} memory, {}, kernel {}",
        m["nproc"].as_u64().map_or("?".into(), |n| n.to_string()),
        gib.unwrap_or_else(|| "?".into()),
        m["os"].as_str().unwrap_or("?"),
        m["kernel"].as_str().unwrap_or("?")
    )
}

/// Which cargo profile built the binary at `path`, from the directory it is in
/// (`target/release/kungfud`): `release`, `debug`, or `unknown`.
fn build_kind(path: &Path) -> &'static str {
    match path.parent().and_then(|d| d.file_name()).and_then(|n| n.to_str()) {
        Some("release") => "release",
        Some("debug") => "debug",
        _ => "unknown",
    }
}

/// The server binary: its path, what `kungfud --version` says, the profile that built it and when
/// the file was written. `kungfud` reports no commit, so none is shown.
fn server_info(path: &Path) -> Value {
    let version = version_of(path, Duration::from_secs(5));
    let modified = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|d| i64::try_from(d.as_micros()).ok())
        .map(output::instant);
    json!({
        "path": path.display().to_string(),
        "version": version,
        "build": build_kind(path),
        "modified": modified,
        "commit": version.as_deref().and_then(commit_of),
    })
}

/// The commit a `--version` line names (`kungfud 0.1.0 (commit 0123456789ab, built …)`); None
/// for a binary built before versions named one, or outside a git checkout.
fn commit_of(version: &str) -> Option<String> {
    let rest = version.split("(commit ").nth(1)?;
    let commit = rest.split([',', ')']).next()?.trim();
    (commit != "unknown" && !commit.is_empty()).then(|| commit.to_string())
}

fn server_text(s: &Value) -> String {
    format!(
        "{} ({} build, written {}) {}",
        s["version"].as_str().unwrap_or("version unknown"),
        s["build"].as_str().unwrap_or("unknown"),
        s["modified"].as_str().unwrap_or("?"),
        s["path"].as_str().unwrap_or("?")
    )
}

/// The first line `path --version` prints, waiting at most `bound`.
fn version_of(path: &Path, bound: Duration) -> Option<String> {
    use std::process::{Command, Stdio};
    let mut child = Command::new(path)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() < bound => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                // It did not answer in time: it is no use as a version, and must not linger.
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut out).ok()?;
    out.lines().next().map(|l| l.trim().to_string()).filter(|l| !l.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_read_from_meminfo_in_kib() {
        let text = "MemTotal:       24684084 kB\nMemFree:        19444400 kB\n";
        assert_eq!(mem_total_bytes(text), Some(24_684_084 * 1024));
        assert_eq!(mem_total_bytes("MemFree: 1 kB\n"), None);
    }

    #[test]
    fn the_build_profile_is_the_directory_of_the_binary() {
        assert_eq!(build_kind(Path::new("/t/target/release/kungfud")), "release");
        assert_eq!(build_kind(Path::new("/t/target/debug/kungfud")), "debug");
        assert_eq!(build_kind(Path::new("/usr/local/bin/kungfud")), "unknown");
    }

    #[tokio::test]
    async fn bounded_keeps_the_order_and_stops_at_the_first_error() {
        let squares = bounded(50, 4, |i| async move { Ok::<usize, CliError>(i * i) }).await.expect("all succeed");
        assert_eq!(squares, (0..50).map(|i| i * i).collect::<Vec<_>>());
        let failed =
            bounded(
                10,
                3,
                |i| async move { if i == 7 { Err(CliError::other("seven")) } else { Ok::<usize, CliError>(i) } },
            )
            .await
            .expect_err("one fails");
        assert_eq!(failed.message, "seven");
        assert!(bounded(0, 3, |i| async move { Ok::<usize, CliError>(i) }).await.expect("none").is_empty());
    }
}
