//! `kungfu bench deadlines`: `count` delivery deadlines that all fall due within one second, and
//! nobody delivers, so the server's deadline scheduler ends every one as timed out. How late it
//! ends each is read from the recorded facts, not from the client's clock.
//!
//! How: per thread (at most [`PER_THREAD`] assignments each, under the default limit of 1,000 open
//! assignments per thread) a governor creates assignments addressed to a worker, which takes them.
//! A delivery deadline runs from the take (§6.4), and its window is fixed when the assignment is
//! created, so the run follows a [`Plan`]: T is `--window-secs` after the start; the first half of
//! the time until T − 1.2 s creates every assignment as fast as the cluster allows, each with the
//! window that puts its planned take time + window at its aimed due time in [T, T + 0.9 s); the
//! second half takes them, each sent at its planned time less the take latency measured so far
//! (paced, so the latency stays steady). The due times the takes return show how well they landed.
//! After every deadline has passed and ended, `AdminService/ExportFacts` returns the facts
//! recorded from the first take on; each `DeadlinePassed` carries its obligation's `due_at`, and the
//! fact's time is the leader's stamp on the command that ended it, so lateness = fact time −
//! `due_at`, exactly ([`ended`]).

use super::cluster::{Cluster, ELECT_BOUND};
use super::stats::{Summary, ms, ms_text};
use super::{bounded, now_us, progress, sleep_until_us};
use crate::args::BenchCluster;
use kungfu_cli::error::CliError;
use kungfu_client::{Client, ClientOptions, Post, pb};
use kungfu_core::fact::{ExpiryResult, Fact, JournaledFact};
use kungfu_core::model::ObligationId;
use kungfu_types::AssignmentId;
use serde_json::{Value, json};
use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The part of the second at T over which the aimed deadlines are spread; the rest of the second
/// absorbs the error of aiming (a take stamped later than planned).
const SPREAD_US: i64 = 900_000;
/// Every deadline is meant to fall in [T, T + one second).
const SECOND_US: i64 = 1_000_000;
/// How long before T the last take is planned: more than the server's shortest delivery window
/// (1 s, `limits.min_window`), so every stated window is above it.
const LEAD_US: i64 = 1_200_000;
/// Assignments per thread: under the default limit of 1,000 open per thread, and few enough that
/// the work spreads over many threads (each thread's actions are serialized by its actor).
const PER_THREAD: u64 = 100;
/// Client connections the client tasks share.
const CONNECTIONS: usize = 16;
/// With `--kill-leader`, how long before T the leader is killed.
const KILL_BEFORE_US: i64 = 500_000;
/// How long the scheduler may take to end them all after T + 1 s: a base plus a time per
/// obligation.
const END_BASE: Duration = Duration::from_secs(60);
const END_PER_OBLIGATION: Duration = Duration::from_millis(20);
/// Facts per `ExportFacts` page (the server's largest).
const EXPORT_PAGE: u32 = 10_000;

/// When things happen in a run, in microseconds since the epoch: T, the creates before
/// `takes_from_us`, then one take after another until T − [`LEAD_US`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub t_us: i64,
    pub takes_from_us: i64,
    takes_span_us: i64,
    count: u64,
}

impl Plan {
    /// The plan of `count` obligations starting at `start_us` with T `window_secs` later: the time
    /// until T − 1.2 s is halved between creating and taking. None when that leaves no time.
    pub fn new(start_us: i64, window_secs: u64, count: u64) -> Option<Plan> {
        let t_us = start_us.checked_add(i64::try_from(window_secs).ok()?.checked_mul(SECOND_US)?)?;
        let takes_span_us = (t_us - LEAD_US - start_us) / 2;
        (takes_span_us > 0 && count > 0).then_some(Plan {
            t_us,
            takes_from_us: t_us - LEAD_US - takes_span_us,
            takes_span_us,
            count,
        })
    }

    /// The due time aimed at for obligation `i`: spread evenly over [T, T + 0.9 s).
    pub fn target_us(&self, i: u64) -> i64 {
        self.t_us + (i128::from(i) * i128::from(SPREAD_US) / i128::from(self.count)) as i64
    }

    /// When obligation `i` is planned to be taken: spread evenly over the second half.
    pub fn take_at_us(&self, i: u64) -> i64 {
        self.takes_from_us + (i128::from(i) * i128::from(self.takes_span_us) / i128::from(self.count)) as i64
    }

    /// The delivery window obligation `i` is created with: taken as planned, it is due as aimed.
    /// Always more than [`LEAD_US`], so above the server's 1 s minimum.
    pub fn window_us(&self, i: u64) -> u64 {
        (self.target_us(i) - self.take_at_us(i)).unsigned_abs()
    }
}

/// The next estimate of the take latency after observing one: a moving average that follows the
/// load without jumping on one slow call.
pub fn next_latency(estimate_us: i64, observed_us: i64) -> i64 {
    estimate_us + (observed_us - estimate_us) / 4
}

/// What the facts say about the obligations the bench made.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Ended {
    /// Fact time − `due_at` of each obligation ended by its deadline, in microseconds.
    pub lateness_us: Vec<i64>,
    /// How many of them ended as timed out (all should: nobody delivers).
    pub timed_out: usize,
    /// Obligations of ours with more than one `DeadlinePassed` (L5 allows exactly one).
    pub duplicates: usize,
    /// Facts whose `due_at` differs from the due time the take receipt returned.
    pub due_mismatches: usize,
    /// Obligations of ours with no `DeadlinePassed` fact.
    pub missing: usize,
    /// The time of the first and the last of those facts, in microseconds since the epoch.
    pub first_at_us: Option<i64>,
    pub last_at_us: Option<i64>,
    /// How many actions (distinct `seq`) recorded them.
    pub actions: usize,
}

fn micros(t: kungfu_types::Timestamp) -> i64 {
    i64::try_from(t.0).unwrap_or(i64::MAX)
}

/// Reads the `DeadlinePassed` facts of our assignments' delivery obligations from `facts`;
/// `taken` maps each of our assignments to the delivery due time its take receipt returned.
pub fn ended(facts: &[JournaledFact], taken: &HashMap<AssignmentId, i64>) -> Ended {
    let mut out = Ended::default();
    let mut seen: HashMap<AssignmentId, usize> = HashMap::new();
    let mut seqs = BTreeSet::new();
    for f in facts {
        let Fact::DeadlinePassed { obligation: ObligationId::AssignmentDelivery(a), due_at, result, .. } = &f.fact
        else {
            continue;
        };
        let Some(due_from_take) = taken.get(a) else { continue };
        let count = seen.entry(*a).or_default();
        *count += 1;
        if *count > 1 {
            out.duplicates += 1;
            continue;
        }
        let (at, due) = (micros(f.at), micros(*due_at));
        out.lateness_us.push(at - due);
        out.timed_out += usize::from(*result == ExpiryResult::TimedOut);
        out.due_mismatches += usize::from(due != *due_from_take);
        out.first_at_us = Some(out.first_at_us.map_or(at, |t| t.min(at)));
        out.last_at_us = Some(out.last_at_us.map_or(at, |t| t.max(at)));
        seqs.insert(f.seq);
    }
    out.missing = taken.len() - seen.len();
    out.actions = seqs.len();
    out
}

/// The parameters of a run.
#[derive(Debug, Clone)]
pub struct Params {
    pub count: u64,
    pub window_secs: u64,
    pub concurrency: u64,
    pub kill_leader: bool,
}

impl Params {
    /// The default `--window-secs`: 4 s plus 1 s per 200 obligations, so creating and taking
    /// each get half of it: about 200 creates and then 200 takes a second, below what a release
    /// build does on two cores.
    pub fn default_window_secs(count: u64) -> u64 {
        4 + count.div_ceil(200)
    }
}

/// One thread of the run: its governor (who creates) and worker (who takes).
#[derive(Debug, Clone)]
struct Pair {
    thread: String,
    governor: Client,
    worker_id: String,
    worker: Client,
}

/// One obligation as made: its thread's pair, the assignment, the aimed and the actual due time,
/// the take's seq.
#[derive(Debug, Clone, Copy)]
struct Made {
    pair: usize,
    assignment: AssignmentId,
    target_us: i64,
    due_us: i64,
    seq: u64,
}

/// The figures of a run.
#[derive(Debug)]
pub struct Report {
    params: Params,
    nodes: u16,
    threads: u64,
    agents: u64,
    /// How long creating every assignment took, and taking them from the first planned take.
    create_secs: f64,
    take_secs: f64,
    /// The largest distance between a due time the take returned and the one aimed at.
    aim_error_us: i64,
    t_us: i64,
    first_due_us: i64,
    last_due_us: i64,
    outside_second: usize,
    ended: Ended,
    lateness: Option<Summary>,
    applied_before: Option<u64>,
    applied_after: Option<u64>,
    leader_before: u16,
    leader_after: u16,
    /// With `--kill-leader`: the node killed, and when it was killed and restarted relative to T.
    killed: Option<(u16, i64, i64)>,
}

impl Report {
    /// The log entries between the applied index after the last take and after the last expiry.
    fn log_entries(&self) -> Option<u64> {
        Some(self.applied_after?.saturating_sub(self.applied_before?))
    }

    fn first_to_last_us(&self) -> Option<i64> {
        Some(self.ended.last_at_us? - self.ended.first_at_us?)
    }

    pub fn to_json(&self) -> Value {
        let count = self.params.count;
        json!({
            "params": {
                "nodes": self.nodes,
                "count": count,
                "window_secs": self.params.window_secs,
                "concurrency": self.params.concurrency,
                "threads": self.threads,
                "per_thread": PER_THREAD,
                "kill_leader": self.params.kill_leader,
            },
            "setup": {
                "agents": self.agents,
                "threads": self.threads,
                "create_secs": (self.create_secs * 100.0).round() / 100.0,
                "creates_per_sec": (count as f64 / self.create_secs.max(1e-9)).round(),
                "take_secs": (self.take_secs * 100.0).round() / 100.0,
            },
            "due": {
                "t_unix_micros": self.t_us,
                "first_ms_after_t": ms(self.first_due_us - self.t_us),
                "last_ms_after_t": ms(self.last_due_us - self.t_us),
                "outside_second": self.outside_second,
                "aim_error_max_ms": ms(self.aim_error_us),
            },
            "count": count,
            "ended": self.ended.lateness_us.len(),
            "timed_out": self.ended.timed_out,
            "missing": self.ended.missing,
            "duplicates": self.ended.duplicates,
            "due_mismatches": self.ended.due_mismatches,
            "lateness_ms": self.lateness.map(|s| s.to_json()),
            "expiry": {
                "first_to_last_ms": self.first_to_last_us().map(ms),
                "actions": self.ended.actions,
                "log_entries": self.log_entries(),
                "applied_index_before": self.applied_before,
                "applied_index_after": self.applied_after,
            },
            "leader": {
                "before": self.leader_before,
                "after": self.leader_after,
                "killed": self.killed.map(|(node, before, after)| json!({
                    "node": node,
                    "killed_ms_before_t": ms(before),
                    "restarted_ms_after_t": ms(after),
                })),
            },
        })
    }

    pub fn rows(&self) -> Vec<(&'static str, String)> {
        let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
        let mut rows = vec![
            (
                "setup",
                format!(
                    "{} agents, {} threads; {} assignments created in {:.2} s, taken in {:.2} s",
                    self.agents, self.threads, self.params.count, self.create_secs, self.take_secs
                ),
            ),
            (
                "due",
                format!(
                    "from T+{} ms to T+{} ms ({} outside [T, T+1 s); at most {} ms from the aimed time)",
                    ms_text(self.first_due_us - self.t_us),
                    ms_text(self.last_due_us - self.t_us),
                    self.outside_second,
                    ms_text(self.aim_error_us)
                ),
            ),
            (
                "ended",
                format!(
                    "{} of {} ({} timed out, {} missing, {} twice)",
                    self.ended.lateness_us.len(),
                    self.params.count,
                    self.ended.timed_out,
                    self.ended.missing,
                    self.ended.duplicates
                ),
            ),
        ];
        if let Some(s) = &self.lateness {
            rows.push(("lateness p50 ms", ms_text(s.p50_us)));
            rows.push(("lateness p90 ms", ms_text(s.p90_us)));
            rows.push(("lateness p99 ms", ms_text(s.p99_us)));
            rows.push(("lateness max ms", ms_text(s.max_us)));
            rows.push(("lateness min ms", ms_text(s.min_us)));
        }
        rows.push(("first to last expiry ms", opt(self.first_to_last_us().map(ms_text))));
        rows.push(("expiry actions", self.ended.actions.to_string()));
        rows.push((
            "log entries",
            format!(
                "{} (applied index {} -> {})",
                opt(self.log_entries().map(|n| n.to_string())),
                opt(self.applied_before.map(|n| n.to_string())),
                opt(self.applied_after.map(|n| n.to_string()))
            ),
        ));
        let leader = match self.killed {
            Some((node, before, after)) => format!(
                "node {} before; node {node} killed {} ms before T, restarted {} ms after T; node {} after",
                self.leader_before,
                ms_text(before),
                ms_text(after),
                self.leader_after
            ),
            None => format!("node {} before, node {} after", self.leader_before, self.leader_after),
        };
        rows.push(("leader", leader));
        if self.ended.due_mismatches > 0 {
            rows.push(("due mismatches", self.ended.due_mismatches.to_string()));
        }
        rows
    }
}

/// Registers a governor and a worker, opens a thread with a speaker grant and has the worker join.
async fn pair(anon: Client) -> Result<Pair, CliError> {
    let governor = anon.register(None).await?;
    let worker = anon.register(None).await?;
    let req = pb::CreateThreadRequest {
        subject: kungfu_client::text("bench deadlines"),
        grant: Some(pb::GrantSpec { role: pb::Role::Speaker as i32 }),
        ..Default::default()
    };
    let w = governor.client.create_thread(req, None).await?;
    let thread = match w.value.receipt.as_ref().and_then(|r| r.result.as_ref()) {
        Some(pb::receipt::Result::ThreadCreated(t)) => t.thread.clone(),
        other => return Err(CliError::other(format!("creating a thread answered {other:?}"))),
    };
    let join = pb::JoinRequest { grant_secret: w.value.grant_secret.clone(), ..Default::default() };
    worker.client.join(join, None).await?;
    Ok(Pair { thread, governor: governor.client, worker_id: worker.agent, worker: worker.client })
}

/// Creates an assignment in `pair`'s thread, addressed to its worker, with a delivery window of
/// `window_us`; returns its id.
async fn create(pair: &Pair, window_us: u64) -> Result<String, CliError> {
    let mut new = kungfu_client::new_assignment(&pair.worker_id, "deliver nothing: the deadline passes");
    new.delivery_window_micros = Some(window_us);
    let post = Post::text(&pair.thread, "bench deadlines").assignment(new).ask(Vec::<String>::new());
    let w = pair.governor.post(post, None).await?;
    match w.value.receipt.as_ref().and_then(|r| r.result.as_ref()) {
        Some(pb::receipt::Result::Posted(p)) => p.assignment.clone(),
        _ => None,
    }
    .ok_or_else(|| CliError::other("a post with an assignment created none"))
}

/// Takes an assignment; returns its due time and the take's seq.
async fn take(pair: &Pair, assignment: &str) -> Result<(i64, u64), CliError> {
    let req = pb::TakeAssignmentRequest { assignment: assignment.to_string(), ..Default::default() };
    let w = pair.worker.take_assignment(req, None).await?;
    let receipt = w.value.receipt.as_ref();
    match (receipt.and_then(|r| r.result.as_ref()), receipt.and_then(|r| r.seq)) {
        (Some(pb::receipt::Result::AssignmentTaken(t)), Some(seq)) => Ok((t.delivery_due_unix_micros, seq)),
        other => Err(CliError::other(format!("taking {assignment} answered {other:?}"))),
    }
}

/// The pair whose thread holds obligation `i`.
fn pair_of(i: u64, pairs: usize) -> usize {
    usize::try_from(i / PER_THREAD).unwrap_or(usize::MAX).min(pairs.saturating_sub(1))
}

/// Creates every assignment with `concurrency` client tasks; returns their ids by obligation.
async fn create_all(pairs: Arc<Vec<Pair>>, plan: Plan, concurrency: u64) -> Result<Vec<String>, CliError> {
    let step = concurrency.clamp(1, plan.count);
    let mut tasks = tokio::task::JoinSet::new();
    for j in 0..step {
        let pairs = pairs.clone();
        tasks.spawn(async move {
            let mut made = Vec::new();
            let mut i = j;
            while i < plan.count {
                made.push((i, create(&pairs[pair_of(i, pairs.len())], plan.window_us(i)).await?));
                i += step;
            }
            Ok::<_, CliError>(made)
        });
    }
    let mut all = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        match joined.map_err(|e| CliError::other(format!("a client task failed: {e}")))? {
            Ok(made) => all.extend(made),
            Err(e) => {
                tasks.abort_all();
                return Err(e);
            }
        }
    }
    all.sort_by_key(|(i, _)| *i);
    Ok(all.into_iter().map(|(_, a)| a).collect())
}

/// Takes every assignment, each sent at its planned time less the take latency measured so far,
/// with at most `concurrency` takes in flight.
async fn take_all(
    pairs: Arc<Vec<Pair>>,
    plan: Plan,
    ids: Vec<String>,
    concurrency: u64,
) -> Result<Vec<Made>, CliError> {
    use std::sync::atomic::{AtomicI64, Ordering};
    // The take latency measured so far (µs), shared by every take in flight: each answer moves it.
    let latency = Arc::new(AtomicI64::new(0));
    // At most `concurrency` takes in flight. A take that waits for a slot is sent late, and its
    // deadline lands late: the aim error shows it.
    let slots = Arc::new(tokio::sync::Semaphore::new(usize::try_from(concurrency).unwrap_or(4096).max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    let mut made = Vec::with_capacity(ids.len());
    let mut reap = |joined: Result<Result<Made, CliError>, tokio::task::JoinError>| -> Result<(), CliError> {
        made.push(joined.map_err(|e| CliError::other(format!("a client task failed: {e}")))??);
        Ok(())
    };
    for (i, id) in (0..plan.count).zip(ids) {
        sleep_until_us(plan.take_at_us(i) - latency.load(Ordering::Relaxed)).await;
        let slot = slots.clone().acquire_owned().await.map_err(|e| CliError::other(format!("{e}")))?;
        let (pairs, latency) = (pairs.clone(), latency.clone());
        tasks.spawn(async move {
            let _slot = slot;
            let sent = now_us();
            let (due_us, seq) = take(&pairs[pair_of(i, pairs.len())], &id).await?;
            // The leader stamped the take at due − window.
            let observed = due_us - plan.window_us(i) as i64 - sent;
            let _ = latency.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |e| Some(next_latency(e, observed)));
            let assignment = id
                .parse::<AssignmentId>()
                .map_err(|_| CliError::other(format!("the server named an assignment `{id}`")))?;
            Ok(Made { pair: pair_of(i, pairs.len()), assignment, target_us: plan.target_us(i), due_us, seq })
        });
        while let Some(joined) = tasks.try_join_next() {
            reap(joined)?;
        }
    }
    while let Some(joined) = tasks.join_next().await {
        reap(joined)?;
    }
    Ok(made)
}

/// Waits until the assignment with the latest deadline has ended (the scheduler ends them in due
/// order), at most `bound`. Read errors (no leader for a moment) are waited out.
async fn wait_last_ended(reader: &Client, assignment: AssignmentId, bound: Duration) -> Result<(), CliError> {
    let start = Instant::now();
    loop {
        let req = pb::GetAssignmentRequest { assignment: assignment.to_string() };
        if let Ok(a) = reader.get_assignment(req).await {
            if matches!(a.state, Some(pb::assignment::State::Ended(_))) {
                return Ok(());
            }
        }
        if start.elapsed() > bound {
            return Err(CliError::other(format!(
                "{assignment}, the last deadline, had not ended {}s after it passed",
                bound.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Every fact recorded after `after_seq`, page by page, decoded, from node `node`'s own state.
async fn export_after(cluster: &Cluster, node: u16, after_seq: u64) -> Result<Vec<JournaledFact>, CliError> {
    // Each page scans every journal on the node: give it time.
    let admin = cluster.admin(node, Duration::from_secs(120)).await?;
    let mut facts = Vec::new();
    let mut after = after_seq;
    // Every page holds at least one action, so this many pages is more than there can be.
    for _ in 0..1_000_000 {
        let page = admin.export_facts(pb::ExportFactsRequest { after_seq: after, limit: EXPORT_PAGE }).await?;
        for bytes in &page.facts {
            let f = kungfu_core::codec::decode::<JournaledFact>(bytes)
                .map_err(|e| CliError::other(format!("cannot decode an exported fact: {e}")))?;
            facts.push(f);
        }
        match page.next_after_seq {
            Some(next) if next > after => after = next,
            _ => return Ok(facts),
        }
    }
    Err(CliError::other("ExportFacts did not end"))
}

/// Runs the benchmark on a fresh cluster.
pub async fn run(opts: &BenchCluster, binary: PathBuf, p: Params) -> Result<Report, CliError> {
    let (mut cluster, leader_before) = Cluster::launch(opts, binary).await?;

    let endpoints = cluster.endpoints_from(leader_before);
    let mut connections = Vec::new();
    for _ in 0..CONNECTIONS {
        connections.push(Client::connect(endpoints.clone(), None, ClientOptions::default()).await?);
    }
    let threads = p.count.div_ceil(PER_THREAD);
    progress(format!("registering {} agents and opening {threads} thread(s)", 2 * threads));
    let pairs = bounded(threads, 32, |k| pair(connections[k % CONNECTIONS].clone())).await?;
    let pairs = Arc::new(pairs);

    let plan = Plan::new(now_us(), p.window_secs, p.count)
        .ok_or_else(|| CliError::usage(format!("--window-secs {} leaves no time to create and take", p.window_secs)))?;
    let t_us = plan.t_us;
    let half = (plan.takes_from_us - now_us()) as f64 / 1e6;
    progress(format!(
        "creating {} assignments with {} client task(s) (allowed: {half:.1} s), then taking them at a steady pace \
         for {half:.1} s; their deadlines fall due {} s from now",
        p.count,
        p.concurrency.min(p.count),
        p.window_secs
    ));
    let start = Instant::now();
    let ids = create_all(pairs.clone(), plan, p.concurrency).await?;
    let create_secs = start.elapsed().as_secs_f64();
    if now_us() > plan.takes_from_us {
        return Err(CliError::usage(format!(
            "too slow for --window-secs {}: creating {} assignments took {create_secs:.1} s, more than the {half:.1} s \
             allowed (half of the time until 1.2 s before T); pass --window-secs {} or more",
            p.window_secs,
            p.count,
            (2.0 * create_secs + 2.2).ceil() as u64 + 1
        )));
    }
    progress(format!("created in {create_secs:.2} s; taking"));
    sleep_until_us(plan.takes_from_us).await;
    let start = Instant::now();
    let made = take_all(pairs.clone(), plan, ids, p.concurrency).await?;
    let take_secs = start.elapsed().as_secs_f64();
    // A take that comes after deadlines of its thread have passed ends them itself (every action
    // settles its objects' passed deadlines first, L4): the facts are read from the first take on.
    let before_takes_seq = made.iter().map(|m| m.seq).min().unwrap_or(1).saturating_sub(1);
    let first_due_us = made.iter().map(|m| m.due_us).min().unwrap_or(t_us);
    let last_due_us = made.iter().map(|m| m.due_us).max().unwrap_or(t_us);
    let outside_second = made.iter().filter(|m| m.due_us < t_us || m.due_us >= t_us + SECOND_US).count();
    let aim_error_us = made.iter().map(|m| (m.due_us - m.target_us).abs()).max().unwrap_or(0);
    progress(format!(
        "taken in {take_secs:.2} s; deadlines from T+{} ms to T+{} ms, at most {} ms from the aimed time",
        ms_text(first_due_us - t_us),
        ms_text(last_due_us - t_us),
        ms_text(aim_error_us),
    ));
    if outside_second > 0 {
        progress(format!(
            "warning: {outside_second} deadline(s) fell outside [T, T+1 s): the takes did not keep their pace; \
             a larger --window-secs spreads them over more time"
        ));
    }
    let applied_before = cluster.status(leader_before).await.and_then(|s| s.applied_index);

    let mut killed = None;
    if p.kill_leader {
        sleep_until_us(t_us - KILL_BEFORE_US).await;
        let (victim, _) = cluster.leader().await.ok_or_else(|| CliError::other("no leader to kill before T"))?;
        cluster.kill(victim)?;
        let killed_at = now_us();
        progress(format!("killed the leader, node {victim} (SIGKILL), {} ms before T", ms_text(t_us - killed_at)));
        // Every deadline has passed at T + 1 s; the node comes back after that.
        sleep_until_us(t_us + SECOND_US).await;
        cluster.restart(victim)?;
        let restarted_at = now_us();
        progress(format!("restarted node {victim} {} ms after T", ms_text(restarted_at - t_us)));
        killed = Some((victim, t_us - killed_at, restarted_at - t_us));
    }

    sleep_until_us(t_us + SECOND_US).await;
    progress("waiting for the server to end every deadline");
    let bound = END_BASE + END_PER_OBLIGATION * u32::try_from(p.count).unwrap_or(u32::MAX);
    if let Some(last) = made.iter().max_by_key(|m| m.due_us) {
        // The governor of its thread reads it: a member sees the thread's assignments.
        wait_last_ended(&pairs[last.pair].governor, last.assignment, bound).await?;
    }
    let taken: HashMap<AssignmentId, i64> = made.iter().map(|m| (m.assignment, m.due_us)).collect();
    let start = Instant::now();
    let (leader_after, ended) = loop {
        let leader = cluster.wait_for_leader(ELECT_BOUND).await?;
        let facts = export_after(&cluster, leader, before_takes_seq).await?;
        let ended = ended(&facts, &taken);
        if ended.missing == 0 {
            break (leader, ended);
        }
        if start.elapsed() > bound {
            return Err(CliError::other(format!(
                "only {} of {} deadlines had ended {}s after the last one was seen ended",
                ended.lateness_us.len(),
                p.count,
                bound.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let applied_after = cluster.status(leader_after).await.and_then(|s| s.applied_index);
    let mut lateness = ended.lateness_us.clone();
    let lateness = Summary::of(&mut lateness);
    Ok(Report {
        nodes: opts.nodes,
        threads,
        agents: 2 * threads,
        create_secs,
        take_secs,
        aim_error_us,
        t_us,
        first_due_us,
        last_due_us,
        outside_second,
        ended,
        lateness,
        applied_before,
        applied_after,
        leader_before,
        leader_after,
        killed,
        params: p,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kungfu_types::{ThreadId, Timestamp};

    const T: i64 = 1_800_000_000_000_000;

    #[test]
    fn targets_spread_evenly_over_the_first_nine_tenths_of_the_second_at_t() {
        let plan = Plan::new(T - 30 * SECOND_US, 30, 10_000).expect("time enough");
        assert_eq!(plan.t_us, T);
        assert_eq!(plan.target_us(0), T);
        assert_eq!(plan.target_us(5_000), T + 450_000);
        assert_eq!(plan.target_us(9_999), T + 899_910);
        let small = Plan::new(T - 5 * SECOND_US, 5, 20).expect("time enough");
        let all: Vec<i64> = (0..20).map(|i| small.target_us(i)).collect();
        assert!(all.windows(2).all(|w| w[0] < w[1]));
        assert!(all.iter().all(|t| (T..T + SECOND_US).contains(t)));
    }

    #[test]
    fn creating_and_taking_share_the_time_until_lead_before_t() {
        let start = T - 10 * SECOND_US;
        let plan = Plan::new(start, 10, 100).expect("time enough");
        // 8.8 s until T − 1.2 s: 4.4 s for creating, then 4.4 s of takes.
        assert_eq!(plan.takes_from_us, start + 4_400_000);
        assert_eq!(plan.take_at_us(0), plan.takes_from_us);
        assert_eq!(plan.take_at_us(50), start + 4_400_000 + 2_200_000);
        assert!(plan.take_at_us(99) < T - LEAD_US);
        assert!((0..100).map(|i| plan.take_at_us(i)).collect::<Vec<_>>().windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn each_window_puts_the_planned_take_time_plus_window_at_the_target() {
        for (secs, count) in [(2, 1), (5, 20), (29, 10_000), (3600, 1_000_000)] {
            let plan = Plan::new(T - secs * SECOND_US, secs as u64, count).expect("time enough");
            for i in [0, count / 2, count - 1] {
                let w = plan.window_us(i);
                assert_eq!(plan.take_at_us(i) + w as i64, plan.target_us(i), "{secs} s, {count}, #{i}");
                // Above the server's shortest delivery window of 1 s.
                assert!(w > 1_000_000, "{secs} s, {count}, #{i}: {w}");
            }
        }
    }

    #[test]
    fn no_plan_without_time_to_create_and_take() {
        assert!(Plan::new(T, 1, 10).is_none(), "1 s is less than the 1.2 s lead");
        assert!(Plan::new(T, 2, 0).is_none(), "nothing to plan");
        assert!(Plan::new(i64::MAX - 5, 2, 10).is_none(), "overflow is refused");
    }

    #[test]
    fn the_latency_estimate_moves_a_quarter_of_the_way() {
        assert_eq!(next_latency(0, 40_000), 10_000);
        assert_eq!(next_latency(10_000, 10_000), 10_000);
        assert_eq!(next_latency(20_000, 0), 15_000);
    }

    fn passed(seq: u64, at: u64, asg: u64, due: u64, result: ExpiryResult) -> JournaledFact {
        JournaledFact {
            seq,
            idx: 0,
            at: Timestamp(at),
            actor: None,
            fact: Fact::DeadlinePassed {
                obligation: ObligationId::AssignmentDelivery(AssignmentId(asg)),
                object: kungfu_types::ObjectRef::Thread(ThreadId(1)),
                due_at: Timestamp(due),
                result,
            },
        }
    }

    #[test]
    fn lateness_is_fact_time_minus_due_time_for_our_obligations_only() {
        let taken: HashMap<AssignmentId, i64> =
            [(AssignmentId(1), 1_000_000), (AssignmentId(2), 1_500_000), (AssignmentId(3), 1_900_000)].into();
        let facts = vec![
            passed(10, 1_004_000, 1, 1_000_000, ExpiryResult::TimedOut),
            // Another obligation's deadline (not ours) is left out.
            passed(11, 1_200_000, 99, 1_100_000, ExpiryResult::TimedOut),
            passed(12, 1_530_000, 2, 1_500_000, ExpiryResult::TimedOut),
            passed(13, 1_950_000, 3, 1_900_000, ExpiryResult::TimedOut),
        ];
        let e = ended(&facts, &taken);
        assert_eq!(e.lateness_us, vec![4_000, 30_000, 50_000]);
        assert_eq!((e.timed_out, e.missing, e.duplicates, e.due_mismatches), (3, 0, 0, 0));
        assert_eq!((e.first_at_us, e.last_at_us), (Some(1_004_000), Some(1_950_000)));
        assert_eq!(e.actions, 3);
    }

    #[test]
    fn missing_duplicate_and_mismatched_deadlines_are_counted() {
        let taken: HashMap<AssignmentId, i64> =
            [(AssignmentId(1), 1_000_000), (AssignmentId(2), 2_000_000), (AssignmentId(3), 3_000_000)].into();
        let mut other = passed(5, 2_000_500, 2, 2_000_000, ExpiryResult::TimedOut);
        other.idx = 1;
        let facts = vec![
            passed(5, 2_000_500, 1, 999_000, ExpiryResult::TimedOut),
            other,
            passed(6, 2_000_900, 2, 2_000_000, ExpiryResult::Undecided),
        ];
        let e = ended(&facts, &taken);
        // Obligation 1's fact names another due time than its take returned; lateness uses the fact's.
        assert_eq!(e.lateness_us, vec![1_001_500, 500]);
        assert_eq!(e.due_mismatches, 1);
        assert_eq!(e.duplicates, 1, "obligation 2 ended twice");
        assert_eq!(e.missing, 1, "obligation 3 never ended");
        assert_eq!(e.timed_out, 2);
        assert_eq!(e.actions, 1, "both first facts were recorded by action 5");
    }

    #[test]
    fn facts_of_other_kinds_are_ignored() {
        let taken: HashMap<AssignmentId, i64> = [(AssignmentId(1), 1_000_000)].into();
        let other = JournaledFact {
            seq: 1,
            idx: 0,
            at: Timestamp(5),
            actor: None,
            fact: Fact::DeadlinePassed {
                obligation: ObligationId::AssignmentJudgment(AssignmentId(1)),
                object: kungfu_types::ObjectRef::Thread(ThreadId(1)),
                due_at: Timestamp(1),
                result: ExpiryResult::Undecided,
            },
        };
        let e = ended(&[other], &taken);
        assert!(e.lateness_us.is_empty());
        assert_eq!(e.missing, 1);
    }
}
