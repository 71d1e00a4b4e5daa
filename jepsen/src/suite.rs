//! Suites: the `ci` profile (every workload once under its nemeses, plus canaries that must be
//! found INVALID; about fifteen minutes) and the `nightly` profile (five nodes, every workload under
//! every nemesis, long runs, for a soak by hand).

use crate::checker::Validity;
use crate::cluster::NetMode;
use crate::nemesis::Kind;
use crate::run::{RunSummary, TestOpts, run_test};
use std::path::PathBuf;
use std::time::Duration;

/// Where the binaries and results are, for every run of a suite.
#[derive(Debug, Clone)]
pub struct SuiteOpts {
    pub profile: String,
    pub seed: u64,
    pub net: NetMode,
    pub server: PathBuf,
    /// A `kungfud` built with `--features canary`; canary runs need it.
    pub canary_server: Option<PathBuf>,
    pub store: PathBuf,
    /// Overrides every run's time limit (a shortened soak).
    pub run_seconds: Option<u64>,
    /// Only the runs of these workloads (all when empty).
    pub only: Vec<String>,
}

fn base(s: &SuiteOpts, workload: &str, nemeses: &[Kind], secs: u64, nodes: u64, i: u64) -> TestOpts {
    TestOpts {
        workload: workload.into(),
        nemeses: nemeses.to_vec(),
        nodes,
        time_limit: Duration::from_secs(secs),
        rate: 40.0,
        concurrency: 2 * nodes as usize,
        seed: s.seed.wrapping_add(i),
        net: s.net,
        server: s.server.clone(),
        store: s.store.clone(),
        canary: None,
        expect: Validity::Valid,
        max_skew_secs: 2,
        hold_ms: 3000,
        rest_ms: 3000,
        keep_data: false,
    }
}

/// A `big-entries` run: fewer, larger writes (every entry is 250 KiB), held faults long enough
/// that a cut-off node falls behind by more than one raft message can carry.
fn big_entries(mut t: TestOpts) -> TestOpts {
    t.rate = 12.0;
    t.hold_ms = 6000;
    t
}

fn canary(s: &SuiteOpts, workload: &str, name: &str, nemeses: &[Kind], secs: u64, i: u64) -> TestOpts {
    let mut t = base(s, workload, nemeses, secs, 3, i);
    t.server = s.canary_server.clone().unwrap_or_default();
    t.canary = Some(name.into());
    t.expect = Validity::Invalid;
    t
}

/// The runs of a profile.
pub fn plan(s: &SuiteOpts) -> anyhow::Result<Vec<TestOpts>> {
    use Kind::*;
    Ok(match s.profile.as_str() {
        "ci" => vec![
            base(s, "admission", &[PartitionLeader, Kill], 30, 3, 1),
            base(s, "deadlines", &[KillLeader, Clock], 30, 3, 2),
            base(s, "replay", &[PartitionHalves, Pause], 30, 3, 3),
            base(s, "facts", &[KillAll, Kill, DiskFull], 30, 3, 4),
            base(s, "seq", &[PartitionNode, PartitionOneWay, Kill], 30, 3, 5),
            base(s, "turn", &[PartitionHalves, KillLeader, Pause], 30, 3, 8),
            big_entries(base(s, "big-entries", &[PartitionNode, Pause, Kill], 30, 3, 9)),
            base(s, "scatter", &[KillLeader, PartitionHalves], 30, 3, 10),
            base(s, "messages", &[PartitionNode, Kill, Pause], 30, 3, 11),
            base(s, "record-append", &[PartitionHalves, KillLeader], 30, 3, 12),
            canary(s, "replay", "skip-dedup", &[PartitionHalves, Pause], 20, 6),
            canary(s, "deadlines", "early-deadlines", &[], 20, 7),
            canary(s, "record-append", "record-lww", &[], 20, 13),
            // Issue #33: disk faults that lose acknowledged data; the facts checker finds a lost
            // fact or an entry number given to another fact.
            base(s, "facts", &[Amnesia, TruncateLog], 30, 3, 14),
            canary(s, "facts", "trust-damaged-log", &[Amnesia], 20, 15),
            // A flipped bit in a table file or manifest: the node refuses its data (fail-closed)
            // and the harness repairs it the operator's way (wipe and rejoin); nothing is lost.
            base(s, "facts", &[FlipTable], 30, 3, 16),
        ],
        "nightly" => {
            let mut runs = Vec::new();
            let mut i = 100;
            let groups: &[&[Kind]] = &[
                &[],
                &[PartitionNode, PartitionLeader, PartitionHalves, PartitionOneWay],
                &[Kill, KillLeader, KillAll],
                &[Pause],
                &[Clock],
                &[DiskFull, Fsync, TruncateLog, FlipByte, FlipTable, Amnesia],
                &[PartitionHalves, KillLeader, Pause, Clock],
                &[Membership, Kill],
            ];
            for w in ["admission", "deadlines", "replay", "facts", "big-entries", "seq", "turn"] {
                for g in groups {
                    let run = base(s, w, g, 300, 5, i);
                    runs.push(if w == "big-entries" { big_entries(run) } else { run });
                    i += 1;
                }
            }
            runs.push(canary(s, "replay", "skip-dedup", &[PartitionHalves, Pause], 120, i));
            runs.push(canary(s, "deadlines", "early-deadlines", &[KillLeader], 120, i + 1));
            // The coordination workloads come last, so every earlier run keeps its seed.
            i += 2;
            for w in ["scatter", "messages", "record-append"] {
                for g in groups {
                    runs.push(base(s, w, g, 300, 5, i));
                    i += 1;
                }
            }
            runs.push(canary(s, "record-append", "record-lww", &[PartitionHalves], 120, i));
            runs.push(canary(s, "facts", "trust-damaged-log", &[Amnesia], 120, i + 1));
            runs
        }
        other => anyhow::bail!("unknown profile {other:?}; known: ci, nightly"),
    })
}

/// Runs every run of the plan, one after another; an infrastructure error fails that run.
pub async fn run_suite(s: &SuiteOpts) -> anyhow::Result<Vec<RunSummary>> {
    let mut out = Vec::new();
    for mut t in plan(s)?.into_iter().filter(|t| s.only.is_empty() || s.only.contains(&t.workload)) {
        if let Some(secs) = s.run_seconds {
            t.time_limit = std::time::Duration::from_secs(secs);
        }
        eprintln!("== run {} (seed {})", t.name(), t.seed);
        let summary = match run_test(&t).await {
            Ok(r) => r,
            Err(e) => RunSummary {
                name: t.name(),
                seed: t.seed,
                attempted: 0,
                ok: 0,
                fail: 0,
                info: 0,
                faults: Default::default(),
                anomalies: 0,
                valid: "ERROR".into(),
                expected: t.expect.as_str().into(),
                passed: false,
                dir: t.store.clone(),
                error: Some(format!("{e:#}")),
            },
        };
        eprintln!(
            "   {} ({} expected){}",
            summary.valid,
            summary.expected,
            summary.error.as_ref().map(|e| format!(": {e}")).unwrap_or_default()
        );
        out.push(summary);
    }
    Ok(out)
}

/// The closing table and the `N passed, N failed` line.
pub fn table(runs: &[RunSummary], header: &str) -> String {
    let mut s = format!("{header}\n");
    s.push_str(&format!(
        "{:<40} {:>9} {:>7} {:>6} {:>6} {:<44} {:>9}  {}\n",
        "run", "attempted", "ok", "fail", "info", "faults injected", "anomalies", "verdict"
    ));
    for r in runs {
        let faults = if r.faults.is_empty() {
            "-".to_string()
        } else {
            r.faults.iter().map(|(k, n)| format!("{k}×{n}")).collect::<Vec<_>>().join(" ")
        };
        let verdict = if r.expected == "INVALID" {
            format!("{} (expected INVALID){}", r.valid, if r.passed { "" } else { " UNEXPECTED" })
        } else if r.passed {
            r.valid.clone()
        } else {
            format!("{} UNEXPECTED", r.valid)
        };
        s.push_str(&format!(
            "{:<40} {:>9} {:>7} {:>6} {:>6} {:<44} {:>9}  {}\n",
            r.name, r.attempted, r.ok, r.fail, r.info, faults, r.anomalies, verdict
        ));
    }
    let (tot, ok, fail, info) =
        runs.iter().fold((0, 0, 0, 0), |(a, b, c, d), r| (a + r.attempted, b + r.ok, c + r.fail, d + r.info));
    s.push_str(&format!("totals: {tot} ops attempted (ok {ok} / fail {fail} / info {info})\n"));
    let passed = runs.iter().filter(|r| r.passed).count();
    s.push_str(&format!("{passed} passed, {} failed\n", runs.len() - passed));
    s
}
