//! One test run: start a cluster, set the workload up, run its processes and the nemesis until
//! the time limit, heal, wait for convergence, take the final reads, check, and write the run's
//! directory (`history.jsonl`, `results.json`, `nemesis.log`, every node's `server.log`).

use crate::checker::{CheckOptions, Report, Validity, check_workload};
use crate::cluster::{Cluster, ClusterOpts, LogWindow, NetMode};
use crate::nemesis::{self, Kind};
use crate::recorder::Recorder;
use crate::workload::{self, Env, Proc};
use anyhow::{Context, Result};
use rand::SeedableRng;
use rand::seq::IndexedRandom;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one run does.
#[derive(Debug, Clone)]
pub struct TestOpts {
    pub workload: String,
    pub nemeses: Vec<Kind>,
    pub nodes: u64,
    /// How long the clients and the nemesis run.
    pub time_limit: Duration,
    /// Ops per second, over all processes.
    pub rate: f64,
    /// Logical client processes (spread over the nodes, one node each).
    pub concurrency: usize,
    pub seed: u64,
    pub net: NetMode,
    pub server: PathBuf,
    /// Where run directories go (`<store>/runs/...`).
    pub store: PathBuf,
    /// A canary to arm in the server (`KUNGFU_CANARY`); the server must be a canary build.
    pub canary: Option<String>,
    /// The verdict this run must reach to pass (INVALID for canaries).
    pub expect: Validity,
    /// The largest clock offset the clock nemesis injects.
    pub max_skew_secs: i64,
    /// How long a fault is held, and how long the cluster rests between faults (jittered).
    pub hold_ms: u64,
    pub rest_ms: u64,
    /// Keep the nodes' data directories of a run that reached its expected verdict (a failing
    /// run always keeps them). RocksDB preallocates its logs: a node's data is hundreds of MiB.
    pub keep_data: bool,
}

/// The outcome of one run: one row of the summary table.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    pub name: String,
    pub seed: u64,
    pub attempted: u64,
    pub ok: u64,
    pub fail: u64,
    pub info: u64,
    pub faults: BTreeMap<String, u64>,
    pub anomalies: u64,
    pub valid: String,
    pub expected: String,
    pub passed: bool,
    pub dir: PathBuf,
    /// Why the run could not be judged, when it could not.
    pub error: Option<String>,
}

impl TestOpts {
    pub fn name(&self) -> String {
        let nem = if self.nemeses.is_empty() {
            "none".to_string()
        } else {
            self.nemeses.iter().map(|k| k.name()).collect::<Vec<_>>().join("+")
        };
        match &self.canary {
            Some(c) => format!("canary {}/{c}", self.workload),
            None => format!("{}/{nem}", self.workload),
        }
    }
}

/// Runs one test; an infrastructure failure (the cluster never started) is an `Err`.
pub async fn run_test(opts: &TestOpts) -> Result<RunSummary> {
    let stamp = utc_stamp();
    let slug = opts.name().replace(['/', ' ', '+'], "-");
    let dir = opts.store.join("runs").join(format!("{stamp}-{slug}-s{}", opts.seed));
    std::fs::create_dir_all(&dir)?;
    let mut env_vars = Vec::new();
    if let Some(c) = &opts.canary {
        env_vars.push(("KUNGFU_CANARY".to_string(), c.clone()));
    }
    // The workload first: its node settings go into every node's config (`wake` enables webhooks
    // to the harness's receiver).
    let mut wl = workload::by_name(&opts.workload)?;
    let cluster_opts = ClusterOpts {
        nodes: opts.nodes,
        server: opts.server.clone(),
        dir: dir.clone(),
        net: opts.net,
        faketime: opts.nemeses.iter().any(|k| k.needs_faketime()),
        fiu: opts.nemeses.iter().any(|k| k.needs_fiu()),
        disk_mib: opts.nemeses.iter().any(|k| k.needs_disk()).then_some(512),
        settings: wl.node_settings(),
        env: env_vars,
    };
    let cluster = Cluster::start(cluster_opts).await.context("starting the cluster")?;
    let endpoints: BTreeMap<u64, String> = cluster.ids().into_iter().map(|id| (id, cluster.endpoint(id))).collect();
    let harness_ip = cluster.harness_ip();
    let cluster = Arc::new(tokio::sync::Mutex::new(cluster));
    let rec = Recorder::create(&dir.join("history.jsonl"))?;
    let setup = crate::client::connect_all(endpoints.values().cloned().collect(), None).await?;
    let env = Env {
        rec: rec.clone(),
        endpoints: endpoints.clone(),
        setup,
        seed: opts.seed,
        time_limit: opts.time_limit,
        harness_ip,
    };
    wl.setup(&env, opts.concurrency).await.context("workload setup")?;
    let wl: Arc<dyn workload::Workload> = Arc::from(wl);

    // The processes.
    let deadline = Instant::now() + opts.time_limit;
    let ids: Vec<u64> = endpoints.keys().copied().collect();
    let interval = Duration::from_secs_f64(opts.concurrency as f64 / opts.rate.max(0.1));
    let mut tasks = Vec::new();
    for i in 0..opts.concurrency {
        let env = env.clone();
        let wl = wl.clone();
        let mut p = Proc {
            id: i as u64,
            stride: opts.concurrency as u64,
            node: ids[i % ids.len()],
            rng: ChaCha8Rng::seed_from_u64(opts.seed.wrapping_add(i as u64 * 0x9E37_79B9)),
            done: 0,
            client: None,
        };
        tasks.push(tokio::spawn(async move {
            let mut next = Instant::now();
            while Instant::now() < deadline {
                wl.step(&env, &mut p).await;
                next += interval;
                let now = Instant::now();
                if next > now {
                    tokio::time::sleep(next - now).await;
                } else {
                    next = now;
                }
            }
            p.id
        }));
    }

    // The nemesis.
    let faults = Arc::new(std::sync::Mutex::new(BTreeMap::<String, u64>::new()));
    let nemesis_task = {
        let cluster = cluster.clone();
        let rec = rec.clone();
        let kinds = opts.nemeses.clone();
        let faults = faults.clone();
        let (hold, rest, skew, seed) = (opts.hold_ms, opts.rest_ms, opts.max_skew_secs, opts.seed);
        tokio::spawn(async move {
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6e65_6d65_7369_73);
            let mut log = String::new();
            if kinds.is_empty() {
                return log;
            }
            // Let the workload warm up before the first fault.
            tokio::time::sleep(Duration::from_millis(rest.min(2000))).await;
            loop {
                let (h, r) = nemesis::cycle(&mut rng, hold, rest);
                if Instant::now() + Duration::from_millis(h) >= deadline {
                    break;
                }
                let Some(kind) = kinds.choose(&mut rng).copied() else { break };
                let started = {
                    let mut c = cluster.lock().await;
                    nemesis::start(&mut c, kind, &mut rng, skew, Some(&rec)).await
                };
                match started {
                    Ok((active, value)) => {
                        rec.nemesis(&format!("start-{}", kind.name()), value.clone());
                        log.push_str(&format!("{:>8.3}s start {} {value}\n", rec.now() as f64 / 1e9, kind.name()));
                        *faults
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .entry(kind.name().to_string())
                            .or_default() += 1;
                        tokio::time::sleep(Duration::from_millis(h)).await;
                        let healed = {
                            let mut c = cluster.lock().await;
                            nemesis::heal(&mut c, &active, Some(&rec)).await
                        };
                        let v = healed.unwrap_or_else(|e| json!({ "error": e.to_string() }));
                        rec.nemesis(&format!("stop-{}", kind.name()), v.clone());
                        log.push_str(&format!("{:>8.3}s stop  {} {v}\n", rec.now() as f64 / 1e9, kind.name()));
                    }
                    Err(e) => log.push_str(&format!(
                        "{:>8.3}s could not start {}: {e}\n",
                        rec.now() as f64 / 1e9,
                        kind.name()
                    )),
                }
                if Instant::now() + Duration::from_millis(r) >= deadline {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(r)).await;
            }
            log
        })
    };
    let mut last_process = 0;
    for t in tasks {
        last_process = last_process.max(t.await.unwrap_or(0));
    }
    let mut nemesis_log = nemesis_task.await.unwrap_or_default();

    // Heal, recover, converge.
    {
        let mut c = cluster.lock().await;
        nemesis::heal_all(&mut c).await?;
    }
    rec.nemesis("heal-all", json!({}));
    nemesis_log.push_str(&format!("{:>8.3}s heal all\n", rec.now() as f64 / 1e9));
    std::fs::write(dir.join("nemesis.log"), &nemesis_log)?;
    let healthy = cluster.lock().await.wait_healthy(Duration::from_secs(60)).await;
    tokio::time::sleep(wl.quiesce()).await;
    let mut always: Vec<(String, String)> = Vec::new();
    let digests = cluster.lock().await.digests(Duration::from_secs(30)).await.unwrap_or_default();
    if let Err(e) = &healthy {
        always.push(("unhealthy".into(), format!("the cluster did not recover after the final heal: {e}")));
    }
    let first = digests.values().next().cloned();
    let same_index = digests.values().all(|(i, _)| Some(*i) == first.as_ref().map(|f| f.0));
    if digests.len() as u64 != opts.nodes || !same_index {
        always.push(("no_convergence".into(), format!("nodes did not reach one applied index: {digests:?}")));
    } else if digests.values().any(|(_, d)| Some(d) != first.as_ref().map(|f| &f.1)) {
        always.push(("divergence".into(), format!("state digests differ at one applied index: {digests:?}")));
    }
    wl.final_reads(&env, last_process + opts.concurrency as u64 + 1).await?;
    let history = rec.finish()?;
    // The run's own path is left out of the match: a store named `.../corrupt-runs` is no crash.
    let run_path = dir.display().to_string();
    let (logs, excused) = {
        let c = cluster.lock().await;
        (c.logs(), c.excused.clone())
    };
    always.extend(crash_lines(&logs, &excused, &run_path));
    cluster.lock().await.stop();

    // Check.
    let mut check = CheckOptions::default();
    let skew_ns = if opts.nemeses.contains(&Kind::Clock) { opts.max_skew_secs as u64 * 1_000_000_000 } else { 0 };
    check.deadlines.allowed_skew_ns = skew_ns + 500_000_000;
    check.deadlines.lateness_bound_ns = None;
    let report: Report = check_workload(wl.kind(), &history, &check);
    let mut valid = report.valid;
    if !always.is_empty() {
        valid = Validity::Invalid;
    }
    let anomalies: u64 =
        report.verdicts.iter().map(|v| v.anomaly_counts.values().sum::<u64>()).sum::<u64>() + always.len() as u64;
    let (attempted, ok, fail, info) = rec.counts();
    let faults = faults.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let results = json!({
        "name": opts.name(),
        "seed": opts.seed,
        "valid": valid.as_str(),
        "expected": opts.expect.as_str(),
        "report": report,
        "always_on": always.iter().map(|(k, m)| json!({"kind": k, "message": m})).collect::<Vec<_>>(),
        "digests": digests,
        "excused_log_windows": excused,
        "counts": {"attempted": attempted, "ok": ok, "fail": fail, "info": info},
        "faults": faults,
    });
    std::fs::write(dir.join("results.json"), serde_json::to_string_pretty(&results)?)?;
    if valid == opts.expect && !opts.keep_data {
        // Logs, configs, the history and the results stay; the bulky node data goes.
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for node in entries.flatten().filter(|e| e.path().is_dir()) {
                for bulky in ["data", "disk", "disk.img"] {
                    let p = node.path().join(bulky);
                    let _ = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
                }
                // Data directories a `flip-table` repair moved away.
                for moved in std::fs::read_dir(node.path()).into_iter().flatten().flatten() {
                    if moved.file_name().to_string_lossy().starts_with("data.damaged-") {
                        let _ = std::fs::remove_dir_all(moved.path());
                    }
                }
            }
        }
    }
    Ok(RunSummary {
        name: opts.name(),
        seed: opts.seed,
        attempted,
        ok,
        fail,
        info,
        faults,
        anomalies,
        valid: valid.as_str().to_string(),
        expected: opts.expect.as_str().to_string(),
        passed: valid == opts.expect,
        dir,
        error: None,
    })
}

/// The always-on crash check of the node logs: a line with `panicked at` is a crash wherever it
/// is; a line naming corruption (`Corruption`, `corrupt`) is one too, except inside a
/// [`LogWindow`] of its node (a `flip-table` fault: the damaged node refusing its data is the
/// fail-closed answer). A window in which the node reported corruption must also name the repair
/// (its error says to wipe the data directory and rejoin): else `unexplained_corruption`.
/// `run_path` (the run directory) is left out of the match.
pub fn crash_lines(logs: &BTreeMap<u64, String>, excused: &[LogWindow], run_path: &str) -> Vec<(String, String)> {
    let corrupt = |l: &str| l.contains("Corruption") || l.contains("corrupt");
    let mut found = Vec::new();
    for (id, text) in logs {
        let mut at = 0u64;
        for raw in text.split_inclusive('\n') {
            let start = at;
            at += raw.len() as u64;
            let line = raw.trim_end().replace(run_path, "<run>");
            let panicked = line.contains("panicked at");
            if !panicked && !corrupt(&line) {
                continue;
            }
            if !panicked && excused.iter().any(|w| w.node == *id && w.from <= start && start < w.to) {
                continue;
            }
            found.push(("crash".to_string(), format!("node {id}: {line}")));
            break;
        }
    }
    for w in excused {
        let Some(text) = logs.get(&w.node) else { continue };
        let window =
            text.get(w.from as usize..(w.to as usize).min(text.len())).unwrap_or("").replace(run_path, "<run>");
        if window.lines().any(corrupt) && !window.contains("rejoin") {
            found.push((
                "unexplained_corruption".to_string(),
                format!(
                    "node {}: reported corruption (log bytes {}..{}) without naming the repair (wipe the data directory and rejoin)",
                    w.node, w.from, w.to
                ),
            ));
        }
    }
    found
}

/// `YYYYMMDDTHHMMSSZ` for run directory names.
pub(crate) fn utc_stamp() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    chrono::DateTime::from_timestamp(secs as i64, 0).map(|t| t.format("%Y%m%dT%H%M%SZ").to_string()).unwrap_or_default()
}
