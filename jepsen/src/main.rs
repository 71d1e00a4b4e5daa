//! `kungfu-jepsen`: run chaos tests against real `kungfud` clusters, re-check histories offline,
//! run the `ci` or `nightly` suite, run a soak (issue #36), and clean up after a crashed run. See
//! `jepsen/README.md`.

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use kungfu_jepsen::checker::{CheckOptions, Validity, Workload, check_workload};
use kungfu_jepsen::cluster::{NetMode, cleanup, netns_available};
use kungfu_jepsen::history::History;
use kungfu_jepsen::nemesis::Kind;
use kungfu_jepsen::run::{TestOpts, run_test};
use kungfu_jepsen::soak::{SoakOpts, Targets, run_soak};
use kungfu_jepsen::suite::{SuiteOpts, run_suite, table};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(name = "kungfu-jepsen", version, about = "Chaos tests for the Kungfu runtime, in Jepsen's model")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// One run: a workload under some nemeses.
    Test {
        /// admission, deadlines, replay, facts, big-entries, seq, turn, scatter, messages,
        /// record-append or wake.
        #[arg(long)]
        workload: String,
        /// Comma-separated nemeses (partition-node, partition-leader, partition-halves,
        /// partition-one-way, kill, kill-leader, kill-all, pause, clock, disk-full, fsync, membership,
        /// truncate-log, flip-byte, amnesia); empty for none.
        #[arg(long, default_value = "")]
        nemesis: String,
        #[arg(long, default_value_t = 3)]
        nodes: u64,
        /// Seconds of client load and faults.
        #[arg(long, default_value_t = 60)]
        time_limit: u64,
        /// Ops per second over all processes.
        #[arg(long, default_value_t = 40.0)]
        rate: f64,
        /// Client processes (default: two per node).
        #[arg(long)]
        concurrency: Option<usize>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[command(flatten)]
        common: Common,
        /// Arm a canary (the server must be built with `--features canary`); the run must be INVALID.
        #[arg(long)]
        canary: Option<String>,
        #[arg(long, default_value_t = 2)]
        max_skew_secs: i64,
        /// Keep the nodes' data directories even when the run passes.
        #[arg(long)]
        keep_data: bool,
    },
    /// Re-check a saved history offline.
    Check {
        history: PathBuf,
        /// The run's workload: admission, deadlines, replay, facts, big-entries (checked as facts),
        /// seq, turn, scatter, messages, record-append or wake.
        #[arg(long)]
        workload: String,
        /// The clock skew the run injected (deadlines).
        #[arg(long, default_value_t = 0)]
        skew_secs: u64,
    },
    /// Run a profile: `ci` (about seventeen minutes) or `nightly` (hours).
    Suite {
        #[arg(long, default_value = "ci")]
        profile: String,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[command(flatten)]
        common: Common,
        /// A kungfud built with `--features canary` (canary runs need it).
        #[arg(long)]
        canary_server: Option<PathBuf>,
        /// Run every run of the profile for this many seconds instead (a shortened soak).
        #[arg(long)]
        run_seconds: Option<u64>,
        /// Only the runs of these workloads (comma-separated; `soak` is the nightly profile's
        /// soak).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
    },
    /// A soak (issue #36): steady high write load, calm then with kills, sampled every 10 s
    /// (throughput, p50/p99, RSS and disk per node) and judged for drift. See jepsen/README.md.
    Soak {
        #[arg(long, default_value_t = 3)]
        nodes: u64,
        /// Agents writing, each one 1 KiB post in flight at a time, to a thread of its own.
        #[arg(long, default_value_t = 32)]
        writers: u64,
        /// Client connections the writers share.
        #[arg(long, default_value_t = 8)]
        connections: u64,
        /// A cap on writes per second over all writers (default: as fast as the cluster answers).
        #[arg(long)]
        rate: Option<f64>,
        /// Minutes of load with no fault (judged).
        #[arg(long, default_value_t = 60.0)]
        calm_minutes: f64,
        /// Minutes of load after it, with a node SIGKILLed and restarted about every minute.
        #[arg(long, default_value_t = 0.0)]
        kill_minutes: f64,
        /// Seconds between samples.
        #[arg(long, default_value_t = 10.0)]
        interval_secs: f64,
        /// Seconds between kills in the kill phase (jittered ±25%).
        #[arg(long, default_value_t = 60.0)]
        kill_every_secs: f64,
        /// Bytes of each post's body.
        #[arg(long, default_value_t = 1024)]
        body_bytes: usize,
        /// Fresh random bytes in each post's body (incompressible: disk per write at its worst)
        /// instead of one repeated byte.
        #[arg(long)]
        random_body: bool,
        /// Posts a writer makes as one agent before it moves to a newly registered one (an agent
        /// may create at most 100,000 Memories).
        #[arg(long, default_value_t = kungfu_jepsen::soak::POSTS_PER_AGENT)]
        posts_per_agent: u64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[command(flatten)]
        common: Common,
        /// Keep the nodes' data directories even when the soak passes.
        #[arg(long)]
        keep_data: bool,
    },
    /// Remove every namespace, bridge, mount and process that runs left behind (also after a
    /// crash). Runs still in progress keep theirs unless `--all`.
    Cleanup {
        #[arg(long, default_value = "jepsen/store")]
        store: PathBuf,
        /// Also stop and remove the runs still in progress.
        #[arg(long)]
        all: bool,
    },
}

#[derive(clap::Args, Debug)]
struct Common {
    /// The kungfud binary (default: next to this binary).
    #[arg(long)]
    server: Option<PathBuf>,
    /// Where runs are written.
    #[arg(long, default_value = "jepsen/store")]
    store: PathBuf,
    /// netns (root), loopback (no privileges), or auto (netns when it can be made).
    #[arg(long, default_value = "auto")]
    net: String,
}

impl Common {
    fn server(&self) -> Result<PathBuf> {
        let p = match &self.server {
            Some(p) => p.clone(),
            None => std::env::current_exe()?.parent().context("binary directory")?.join("kungfud"),
        };
        if !p.exists() {
            bail!("{} does not exist: build it (cargo build --bin kungfud) or pass --server", p.display());
        }
        Ok(std::fs::canonicalize(p)?)
    }
    fn net(&self) -> Result<NetMode> {
        Ok(match self.net.as_str() {
            "auto" => {
                if netns_available() {
                    NetMode::Netns
                } else {
                    NetMode::Loopback
                }
            }
            other => other.parse()?,
        })
    }
    fn store(&self) -> Result<PathBuf> {
        std::fs::create_dir_all(&self.store)?;
        Ok(std::fs::canonicalize(&self.store)?)
    }
}

fn main() -> ExitCode {
    match real_main() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(3)
        }
    }
}

fn real_main() -> Result<ExitCode> {
    let cli = Cli::parse();
    let rt = tokio::runtime::Runtime::new()?;
    match cli.command {
        Command::Test {
            workload,
            nemesis,
            nodes,
            time_limit,
            rate,
            concurrency,
            seed,
            common,
            canary,
            max_skew_secs,
            keep_data,
        } => {
            let nemeses = nemesis.split(',').filter(|s| !s.is_empty()).map(Kind::parse).collect::<Result<Vec<_>>>()?;
            let store = common.store()?;
            cleanup(&store, false);
            let opts = TestOpts {
                workload,
                nemeses,
                nodes,
                time_limit: Duration::from_secs(time_limit),
                rate,
                concurrency: concurrency.unwrap_or(2 * nodes as usize),
                seed,
                net: common.net()?,
                server: common.server()?,
                store,
                expect: if canary.is_some() { Validity::Invalid } else { Validity::Valid },
                canary,
                max_skew_secs,
                hold_ms: 3000,
                rest_ms: 3000,
                keep_data,
            };
            let r = rt.block_on(run_test(&opts))?;
            println!(
                "{}",
                table(&[r.clone()], &format!("== kungfu-jepsen test  seed={seed}  dir={}", r.dir.display()))
            );
            Ok(if r.passed { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        Command::Check { history, workload, skew_secs } => {
            let h = History::load(&history).with_context(|| format!("reading {}", history.display()))?;
            // `big-entries` runs are judged by the facts checker (its run directory names the workload).
            let checker = if workload == "big-entries" { "facts" } else { workload.as_str() };
            let w: Workload = checker.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
            let mut opts = CheckOptions::default();
            opts.deadlines.allowed_skew_ns = skew_secs * 1_000_000_000 + 500_000_000;
            let report = check_workload(w, &h, &opts);
            println!("{}", report.summary());
            println!("{}", report.valid);
            Ok(match report.valid {
                Validity::Valid => ExitCode::SUCCESS,
                Validity::Invalid => ExitCode::from(1),
                Validity::Unknown => ExitCode::from(2),
            })
        }
        Command::Suite { profile, seed, common, canary_server, run_seconds, only } => {
            let store = common.store()?;
            cleanup(&store, false);
            let s = SuiteOpts {
                profile: profile.clone(),
                seed,
                net: common.net()?,
                server: common.server()?,
                canary_server: canary_server.map(std::fs::canonicalize).transpose()?,
                store,
                run_seconds,
                only,
            };
            let runs = rt.block_on(run_suite(&s))?;
            let header =
                format!("== kungfu-jepsen {profile}  seed={seed}  net={:?}  server={}", s.net, s.server.display());
            let text = table(&runs, &header);
            println!("{text}");
            let stamp = runs
                .first()
                .and_then(|r| r.dir.file_name())
                .map(|n| n.to_string_lossy().chars().take(16).collect::<String>())
                .unwrap_or_default();
            let summary = s.store.join("suites").join(format!("{stamp}-{profile}-s{seed}.txt"));
            std::fs::create_dir_all(s.store.join("suites"))?;
            std::fs::write(&summary, &text)?;
            eprintln!("summary written to {}", summary.display());
            Ok(if runs.iter().all(|r| r.passed) { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        Command::Soak {
            nodes,
            writers,
            connections,
            rate,
            calm_minutes,
            kill_minutes,
            interval_secs,
            kill_every_secs,
            body_bytes,
            random_body,
            posts_per_agent,
            seed,
            common,
            keep_data,
        } => {
            let minutes = |m: f64| Duration::from_secs_f64((m * 60.0).max(0.0));
            if calm_minutes <= 0.0 || interval_secs <= 0.0 || writers == 0 || posts_per_agent == 0 {
                bail!("--calm-minutes, --interval-secs, --writers and --posts-per-agent must be positive");
            }
            let store = common.store()?;
            cleanup(&store, false);
            let opts = SoakOpts {
                nodes,
                writers,
                connections,
                rate,
                calm: minutes(calm_minutes),
                kill: minutes(kill_minutes),
                interval: Duration::from_secs_f64(interval_secs),
                kill_every: Duration::from_secs_f64(kill_every_secs.max(1.0)),
                body_bytes,
                random_body,
                posts_per_agent,
                seed,
                net: common.net()?,
                server: common.server()?,
                store,
                keep_data,
                targets: Targets::default(),
            };
            let r = rt.block_on(run_soak(&opts))?;
            eprintln!("soak written to {}", r.dir.display());
            Ok(if r.verdict.passed() { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        Command::Cleanup { store, all } => {
            for line in cleanup(&store, all) {
                println!("{line}");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
