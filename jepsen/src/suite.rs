//! Suites: the `ci` profile (every workload once under its nemeses, plus canaries that must be
//! found INVALID; about seventeen minutes) and the `nightly` profile (five nodes, every workload under
//! every nemesis, long runs, for a soak by hand), which ends with the hour's soak (issue #36).
//!
//! The `ci` profile has no soak: what a soak judges is drift over an hour (throughput, p99, RSS),
//! and minutes of it judge only the warm-up (the caches filling); what a short one could still
//! check (no acknowledged write lost across kills, convergence, clean logs) the `ci` workloads
//! check already.

use crate::checker::Validity;
use crate::cluster::NetMode;
use crate::nemesis::Kind;
use crate::run::{RunSummary, TestOpts, run_test};
use crate::soak::{SoakOpts, SoakReport, Targets, run_soak};
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
            // Issue #35: wake webhooks across leader kills and a cut-off leader, the receiver down
            // now and then; the canary's new leaders record outstanding events delivered unsent,
            // which the checker finds as a sequence number never delivered.
            base(s, "wake", &[KillLeader, PartitionLeader], 30, 3, 17),
            canary(s, "wake", "wake-drop", &[KillLeader], 20, 18),
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
            // Wake webhooks (issue #35) after them, for the same reason.
            i += 2;
            for g in groups {
                runs.push(base(s, "wake", g, 300, 5, i));
                i += 1;
            }
            runs.push(canary(s, "wake", "wake-drop", &[KillLeader], 120, i));
            runs
        }
        other => anyhow::bail!("unknown profile {other:?}; known: ci, nightly"),
    })
}

/// The name of the nightly profile's soak, which `--only soak` selects.
pub const SOAK: &str = "soak";

/// The nightly profile's soak: the hour of `docs/benchmarks.md` ("Soak: how it is measured"), or
/// with `--run-seconds` a calm phase that long and a sixth of it with kills.
pub fn nightly_soak(s: &SuiteOpts) -> Option<SoakOpts> {
    if s.profile != "nightly" || !(s.only.is_empty() || s.only.iter().any(|o| o == SOAK)) {
        return None;
    }
    let (calm, kill) = match s.run_seconds {
        Some(secs) => (Duration::from_secs(secs.max(60)), Duration::from_secs(secs.max(60) / 6)),
        None => (Duration::from_secs(3600), Duration::from_secs(600)),
    };
    Some(SoakOpts {
        nodes: 3,
        writers: 64,
        connections: 8,
        rate: Some(2000.0),
        calm,
        kill,
        interval: Duration::from_secs(10),
        kill_every: Duration::from_secs(60),
        body_bytes: 1024,
        random_body: false,
        posts_per_agent: crate::soak::POSTS_PER_AGENT,
        seed: s.seed,
        net: s.net,
        server: s.server.clone(),
        store: s.store.clone(),
        keep_data: false,
        targets: Targets::default(),
    })
}

/// A soak's line in the suite's table: its writes, its kills, and its verdict (every check, as
/// `soak.txt` shows them, counted as anomalies when failed).
pub fn soak_summary(o: &SoakOpts, r: &SoakReport) -> RunSummary {
    let acked = r.samples.last().map(|x| x.acked_total).unwrap_or(0);
    let refused: u64 = r.samples.iter().map(|x| x.refused).sum();
    let resends: u64 = r.samples.iter().map(|x| x.resends).sum();
    let kills = r.samples.iter().flat_map(|x| &x.events).filter(|e| e.starts_with("kill ")).count() as u64;
    let passed = r.verdict.passed();
    RunSummary {
        name: format!("{SOAK} {}n {}w {}/s", o.nodes, o.writers, o.rate.unwrap_or(0.0)),
        seed: o.seed,
        attempted: acked + refused,
        ok: acked,
        fail: refused,
        info: resends,
        faults: if kills > 0 { [("kill".to_string(), kills)].into() } else { Default::default() },
        anomalies: r.verdict.checks.iter().filter(|c| !c.pass).count() as u64,
        valid: if passed { "PASS" } else { "FAIL" }.into(),
        expected: "PASS".into(),
        passed,
        dir: r.dir.clone(),
        error: None,
    }
}

/// The line of a run the harness could not carry out to a verdict (an infrastructure error).
fn unjudged(name: String, seed: u64, expected: &str, dir: &std::path::Path, e: &anyhow::Error) -> RunSummary {
    RunSummary {
        name,
        seed,
        attempted: 0,
        ok: 0,
        fail: 0,
        info: 0,
        faults: Default::default(),
        anomalies: 0,
        valid: "ERROR".into(),
        expected: expected.into(),
        passed: false,
        dir: dir.to_path_buf(),
        error: Some(format!("{e:#}")),
    }
}

/// Runs every run of the plan, one after another, then the profile's soak if it has one; an
/// infrastructure error fails that run.
pub async fn run_suite(s: &SuiteOpts) -> anyhow::Result<Vec<RunSummary>> {
    let mut out = Vec::new();
    for mut t in plan(s)?.into_iter().filter(|t| s.only.is_empty() || s.only.contains(&t.workload)) {
        if let Some(secs) = s.run_seconds {
            t.time_limit = std::time::Duration::from_secs(secs);
        }
        eprintln!("== run {} (seed {})", t.name(), t.seed);
        let summary = match run_test(&t).await {
            Ok(r) => r,
            Err(e) => unjudged(t.name(), t.seed, t.expect.as_str(), &t.store, &e),
        };
        eprintln!(
            "   {} ({} expected){}",
            summary.valid,
            summary.expected,
            summary.error.as_ref().map(|e| format!(": {e}")).unwrap_or_default()
        );
        out.push(summary);
    }
    if let Some(o) = nightly_soak(s) {
        eprintln!(
            "== {SOAK} (seed {}): {:.0} calm minutes, then {:.0} with kills",
            o.seed,
            o.calm.as_secs_f64() / 60.0,
            o.kill.as_secs_f64() / 60.0
        );
        let summary = match run_soak(&o).await {
            Ok(r) => {
                eprintln!("{}", r.verdict.text());
                soak_summary(&o, &r)
            }
            Err(e) => unjudged(SOAK.into(), o.seed, "PASS", &o.store, &e),
        };
        eprintln!("   {}{}", summary.valid, summary.error.as_ref().map(|e| format!(": {e}")).unwrap_or_default());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::soak::{Check, Hist, Phase, Sample, Verdict};

    fn opts(profile: &str, only: &[&str], run_seconds: Option<u64>) -> SuiteOpts {
        SuiteOpts {
            profile: profile.into(),
            seed: 7,
            net: NetMode::Loopback,
            server: PathBuf::from("kungfud"),
            canary_server: None,
            store: PathBuf::from("store"),
            run_seconds,
            only: only.iter().map(|o| o.to_string()).collect(),
        }
    }

    #[test]
    fn every_run_of_a_profile_has_its_own_seed_and_wake_runs_with_its_canary() {
        for profile in ["ci", "nightly"] {
            let runs = plan(&opts(profile, &[], None)).expect("a known profile");
            let seeds: std::collections::BTreeSet<u64> = runs.iter().map(|t| t.seed).collect();
            assert_eq!(seeds.len(), runs.len(), "{profile}: two runs share a seed");
            let wake: Vec<&TestOpts> = runs.iter().filter(|t| t.workload == "wake").collect();
            assert!(wake.iter().any(|t| t.canary.is_none() && t.expect == Validity::Valid), "{profile}");
            let canary = wake.iter().find(|t| t.canary.as_deref() == Some("wake-drop")).expect("the wake canary");
            assert_eq!(canary.expect, Validity::Invalid);
            assert!(canary.nemeses.contains(&Kind::KillLeader), "the canary loses deliveries at leader changes");
        }
    }

    #[test]
    fn the_nightly_profile_ends_with_the_hour_and_ci_has_no_soak() {
        let o = nightly_soak(&opts("nightly", &[], None)).expect("nightly soaks");
        assert_eq!((o.calm.as_secs(), o.kill.as_secs(), o.writers, o.rate), (3600, 600, 64, Some(2000.0)));
        assert_eq!(o.seed, 7);
        assert!(nightly_soak(&opts("ci", &[], None)).is_none());
        assert!(nightly_soak(&opts("nightly", &["facts"], None)).is_none(), "--only without soak leaves it out");
        assert!(nightly_soak(&opts("nightly", &["facts", SOAK], None)).is_some());
        let short = nightly_soak(&opts("nightly", &[], Some(600))).expect("shortened");
        assert_eq!((short.calm.as_secs(), short.kill.as_secs()), (600, 100));
    }

    #[test]
    fn a_soak_that_fails_a_check_fails_its_line_of_the_suite() {
        let o = nightly_soak(&opts("nightly", &[], Some(600))).expect("nightly soaks");
        let sample = |acked_total, refused, events: Vec<String>| Sample {
            elapsed: 10.0,
            secs: 10.0,
            phase: Some(Phase::Calm),
            acked: 100,
            acked_total,
            resends: 1,
            refused,
            hist: Hist::default(),
            nodes: Vec::new(),
            events,
        };
        let check = |pass| Check { what: "x".into(), figure: "y".into(), target: "z".into(), pass };
        let mut r = SoakReport {
            dir: PathBuf::from("run"),
            samples: vec![
                sample(100, 0, Vec::new()),
                sample(200, 2, vec!["kill n1 (leader)".into(), "restart n1".into()]),
            ],
            verdict: Verdict {
                window_secs: 100.0,
                window_note: String::new(),
                checks: vec![check(true), check(true)],
                notes: Vec::new(),
            },
        };
        let line = soak_summary(&o, &r);
        assert!(line.passed);
        assert_eq!((line.attempted, line.ok, line.fail, line.info), (202, 200, 2, 2));
        assert_eq!(line.faults.get("kill"), Some(&1));
        r.verdict.checks[1].pass = false;
        let line = soak_summary(&o, &r);
        assert!(!line.passed);
        assert_eq!((line.valid.as_str(), line.anomalies), ("FAIL", 1));
        assert!(table(&[line], "suite").contains("FAIL UNEXPECTED"));
    }
}
