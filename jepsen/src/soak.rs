//! `kungfu-jepsen soak` (issue #36, deliverable 3): a node that runs for months, in an hour.
//!
//! A real cluster takes a steady, high write load: `writers` agents, each posting 1 KiB entries to
//! a thread of its own, one write in flight at a time, over a few shared client connections. Every
//! write carries an idempotency key and is resent under that key until its outcome is definite, so
//! "acknowledged" is exact (a write counts once, when the cluster acknowledged it) and a write's
//! latency is what its agent waited, retries included. First a calm phase with no fault, then
//! (optionally) a kill phase: every ~60 s (seeded) one node, leader or not, is SIGKILLed and
//! restarted a few seconds later.
//!
//! Every 10 s the sampler writes one row: acknowledged writes in the interval, the interval's
//! p50/p99 latency, and per node the resident memory of its `kungfud` (`VmRSS`) and the bytes its
//! data directory holds on disk (allocated: `st_blocks × 512`, walked, so a killed node is
//! measured too), with the log, state and snapshots parts apart. The rows go to `soak.csv` as
//! they are taken (a crashed run keeps what it measured) and to `soak.txt` as a table.
//!
//! The verdict judges the calm phase only ([`judge`]): the throughput and p99 of its last window
//! within 10% of its first (the window is 10 minutes, or a sixth of a shorter calm phase), each
//! node's RSS growth over the second half ≤ 10%, and each node's disk per acknowledged write ≤ 4 KiB.

use crate::cluster::{Cluster, ClusterOpts, NetMode};
use anyhow::{Context, Result, bail};
use kungfu_client::{Client, ClientOptions, Error, Post, pb};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a soak does.
#[derive(Debug, Clone)]
pub struct SoakOpts {
    pub nodes: u64,
    /// Agents writing, each with one write in flight.
    pub writers: u64,
    /// Client connections the writers share.
    pub connections: u64,
    /// A cap on acknowledged-or-not writes per second over all writers (None: as fast as answered).
    pub rate: Option<f64>,
    /// The calm phase (no faults) and the kill phase.
    pub calm: Duration,
    pub kill: Duration,
    /// Between samples (10 s).
    pub interval: Duration,
    /// Between kills in the kill phase (about; jittered ±25%, seeded).
    pub kill_every: Duration,
    /// Bytes of each post's body.
    pub body_bytes: usize,
    /// Each post's body fresh random bytes (incompressible: disk per write at its worst) instead
    /// of one repeated byte.
    pub random_body: bool,
    /// Posts a writer makes as one agent before it moves to a new one ([`POSTS_PER_AGENT`]).
    pub posts_per_agent: u64,
    pub seed: u64,
    pub net: NetMode,
    pub server: PathBuf,
    pub store: PathBuf,
    /// Keep the nodes' data directories after a passing soak.
    pub keep_data: bool,
    pub targets: Targets,
}

/// The targets of issue #36.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Targets {
    /// The longest comparison window (10 minutes); a calm phase shorter than six of them uses a sixth.
    pub window: Duration,
    /// Throughput of the last window may be at most this fraction below the first's (0.10).
    pub throughput_drop: f64,
    /// p99 of the last window may be at most this fraction above the first's (0.10).
    pub p99_rise: f64,
    /// RSS growth over the calm phase's second half, per node (0.10).
    pub rss_growth: f64,
    /// Allocated data-directory bytes per acknowledged write, per node (4096).
    pub disk_per_write: f64,
}

impl Default for Targets {
    fn default() -> Targets {
        Targets {
            window: Duration::from_secs(600),
            throughput_drop: 0.10,
            p99_rise: 0.10,
            rss_growth: 0.10,
            disk_per_write: 4096.0,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Latency histograms: log buckets 1% wide, so windows merge exactly and percentiles are within 1%.

/// The growth factor from one bucket to the next.
const BUCKET_GROWTH: f64 = 1.01;

/// Latencies in microseconds, counted in buckets 1% wide.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Hist {
    counts: Vec<u64>,
    total: u64,
}

impl Hist {
    fn bucket(us: u64) -> usize {
        if us <= 1 { 0 } else { ((us as f64).ln() / BUCKET_GROWTH.ln()).floor() as usize }
    }

    /// The smallest latency bucket `i` holds (its lower bound).
    fn lower(i: usize) -> u64 {
        BUCKET_GROWTH.powi(i as i32).ceil() as u64
    }

    pub fn record(&mut self, us: u64) {
        let i = Hist::bucket(us);
        if self.counts.len() <= i {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += 1;
        self.total += 1;
    }

    pub fn merge(&mut self, other: &Hist) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    /// The nearest-rank percentile `p` (0..=100), as its bucket's lower bound (at most 1% low);
    /// None when empty.
    pub fn percentile(&self, p: f64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((p.clamp(0.0, 100.0) / 100.0) * self.total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(Hist::lower(i));
            }
        }
        None
    }
}

// ---------------------------------------------------------------------------------------------
// Samples.

/// Which phase a sample belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Calm,
    Kill,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Calm => "calm",
            Phase::Kill => "kill",
        }
    }
}

/// The bytes a data directory holds on disk (allocated), by part, and its files' apparent size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Disk {
    pub total: u64,
    /// The sum of the files' lengths (what `ls` shows, and what `ClusterStatus` reports): below
    /// `total` by what RocksDB preallocated for its write-ahead log and not yet written.
    pub apparent: u64,
    pub log: u64,
    pub state: u64,
    pub snapshots: u64,
}

/// One node in one sample.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeSample {
    pub id: u64,
    /// Its process was running (not killed).
    pub up: bool,
    /// `VmRSS` of its `kungfud`, when running.
    pub rss: Option<u64>,
    pub disk: Disk,
}

/// One row: the interval that ended `elapsed` after the load began.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// Seconds since the load began, at the end of the interval.
    pub elapsed: f64,
    /// The interval's length in seconds.
    pub secs: f64,
    pub phase: Option<Phase>,
    /// Writes acknowledged in the interval.
    pub acked: u64,
    /// Writes acknowledged since the load began.
    pub acked_total: u64,
    /// Resends under the same key after an indeterminate outcome (an SDK error that said so).
    pub resends: u64,
    /// Writes definitely refused (never expected; counted, not acknowledged).
    pub refused: u64,
    /// The latency of the interval's acknowledged writes (µs).
    pub hist: Hist,
    pub nodes: Vec<NodeSample>,
    /// Faults during the interval (`kill n2 (leader)`, `restart n2`).
    pub events: Vec<String>,
}

impl Sample {
    pub fn rate(&self) -> f64 {
        self.acked as f64 / self.secs.max(1e-9)
    }
}

/// Files a walk has counted, by device and inode: a snapshot's checkpoint hard-links the state's
/// table and blob files, and the same blocks must not count twice.
type Seen = std::collections::HashSet<(u64, u64)>;

/// What a walk adds up.
#[derive(Clone, Copy)]
enum Measure {
    /// `st_blocks × 512` of files and of directories themselves.
    Allocated,
    /// The files' lengths.
    Apparent,
}

/// The allocated bytes under `path` (`st_blocks × 512`), each file once however many links to it
/// the walk meets; files that vanish during the walk (as compaction removes them) are skipped,
/// symbolic links are not followed.
pub fn allocated(path: &Path) -> u64 {
    walk(path, Measure::Allocated, &mut Seen::new())
}

/// The lengths of the files under `path`, each file once.
fn apparent(path: &Path) -> u64 {
    walk(path, Measure::Apparent, &mut Seen::new())
}

/// `how` under `path`, skipping files already in `seen` (and adding those it counts).
fn walk(path: &Path, how: Measure, seen: &mut Seen) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else { return 0 };
    if meta.is_dir() {
        let own = match how {
            Measure::Allocated => meta.blocks() * 512,
            Measure::Apparent => 0,
        };
        let Ok(entries) = std::fs::read_dir(path) else { return own };
        own + entries.flatten().map(|e| walk(&e.path(), how, seen)).sum::<u64>()
    } else if meta.is_file() {
        if meta.nlink() > 1 && !seen.insert((meta.dev(), meta.ino())) {
            return 0;
        }
        match how {
            Measure::Allocated => meta.blocks() * 512,
            Measure::Apparent => meta.len(),
        }
    } else {
        0
    }
}

/// A data directory's allocated bytes by part, named as the server names them (issue #36:
/// `log/`, `state/` and `state.*`, `snapshots/`; the total includes the rest).
pub fn disk_of(data: &Path) -> Disk {
    let mut d = Disk { total: allocated(data), apparent: apparent(data), ..Disk::default() };
    let Ok(entries) = std::fs::read_dir(data) else { return d };
    let mut parts: Vec<(String, PathBuf)> =
        entries.flatten().map(|e| (e.file_name().to_string_lossy().to_string(), e.path())).collect();
    // The state before the snapshots: a file both hold (a checkpoint's hard link) is the state's,
    // and the snapshots part is what they hold besides it.
    parts.sort_by_key(|(name, _)| name == "snapshots");
    let mut seen = Seen::new();
    for (name, path) in parts {
        let bytes = walk(&path, Measure::Allocated, &mut seen);
        match name.as_str() {
            "log" => d.log += bytes,
            "snapshots" => d.snapshots += bytes,
            n if n == "state" || n.starts_with("state.") => d.state += bytes,
            _ => {}
        }
    }
    d
}

/// `VmRSS` (bytes) in the text of `/proc/PID/status`.
pub fn parse_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line["VmRSS:".len()..].split_whitespace().next()?.parse::<u64>().ok().map(|kib| kib * 1024)
}

/// The host's load averages, as `/proc/loadavg` gives them.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn rss_of(pid: u32) -> Option<u64> {
    parse_rss(&std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
}

// ---------------------------------------------------------------------------------------------
// The verdict.

/// One judged figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub what: String,
    pub figure: String,
    pub target: String,
    pub pass: bool,
}

/// The verdict of a soak.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The comparison window used (seconds) and why.
    pub window_secs: f64,
    pub window_note: String,
    pub checks: Vec<Check>,
    /// Figures shown beside the verdict but not judged.
    pub notes: Vec<String>,
}

impl Verdict {
    pub fn passed(&self) -> bool {
        !self.checks.is_empty() && self.checks.iter().all(|c| c.pass)
    }

    pub fn text(&self) -> String {
        let mut s = format!("verdict over the calm phase ({})\n", self.window_note);
        let w = self.checks.iter().map(|c| c.what.len()).max().unwrap_or(0);
        let f = self.checks.iter().map(|c| c.figure.len()).max().unwrap_or(0);
        let t = self.checks.iter().map(|c| c.target.len()).max().unwrap_or(0);
        for c in &self.checks {
            s.push_str(&format!(
                "  {:<w$}  {:>f$}  target {:<t$}  {}\n",
                c.what,
                c.figure,
                c.target,
                if c.pass { "PASS" } else { "FAIL" }
            ));
        }
        for n in &self.notes {
            s.push_str(&format!("  ({n})\n"));
        }
        s.push_str(if self.passed() { "SOAK PASS\n" } else { "SOAK FAIL\n" });
        s
    }
}

/// The comparison window for a calm phase of `calm_secs`: the target's window (10 min), or a sixth
/// of a calm phase shorter than six of them; and a note saying which.
pub fn window_for(calm_secs: f64, t: &Targets) -> (f64, String) {
    let full = t.window.as_secs_f64();
    if calm_secs >= 6.0 * full {
        (full, format!("first and last {:.0} min", full / 60.0))
    } else {
        let w = calm_secs / 6.0;
        (w, format!("short calm phase: first and last sixth, {w:.0} s each, instead of {:.0} min", full / 60.0))
    }
}

/// The acknowledged writes per second and the merged latency of the samples in (from, to].
fn window(calm: &[&Sample], from: f64, to: f64) -> (f64, Hist) {
    let mut hist = Hist::default();
    let (mut acked, mut secs) = (0u64, 0f64);
    for s in calm.iter().filter(|s| s.elapsed > from + 1e-6 && s.elapsed <= to + 1e-6) {
        acked += s.acked;
        secs += s.secs;
        hist.merge(&s.hist);
    }
    (if secs > 0.0 { acked as f64 / secs } else { 0.0 }, hist)
}

fn ms(us: u64) -> String {
    format!("{:.2} ms", us as f64 / 1000.0)
}

fn pct(x: f64) -> String {
    format!("{:+.1}%", x * 100.0)
}

/// Judges the calm phase: `samples` are every row of the soak (the kill phase's are ignored but
/// for a note), `start` each node's data-directory bytes just before the load began.
pub fn judge(samples: &[Sample], start: &BTreeMap<u64, Disk>, t: &Targets) -> Verdict {
    let calm: Vec<&Sample> = samples.iter().filter(|s| s.phase == Some(Phase::Calm)).collect();
    let mut checks = Vec::new();
    let mut notes = Vec::new();
    let Some(last) = calm.last() else {
        return Verdict {
            window_secs: 0.0,
            window_note: "no calm sample".into(),
            checks: vec![Check { what: "calm samples".into(), figure: "0".into(), target: "> 0".into(), pass: false }],
            notes,
        };
    };
    let end = last.elapsed;
    let (w, note) = window_for(end, t);

    // Throughput and p99: first window against last.
    let (first_rate, first_hist) = window(&calm, 0.0, w);
    let (last_rate, last_hist) = window(&calm, end - w, end);
    let change = if first_rate > 0.0 { last_rate / first_rate - 1.0 } else { f64::NEG_INFINITY };
    checks.push(Check {
        what: "throughput, last vs first".into(),
        figure: format!("{first_rate:.1} -> {last_rate:.1} writes/s ({})", pct(change)),
        target: format!(">= -{:.0}%", t.throughput_drop * 100.0),
        pass: first_rate > 0.0 && change >= -t.throughput_drop - 1e-9,
    });
    match (first_hist.percentile(99.0), last_hist.percentile(99.0)) {
        (Some(a), Some(b)) => {
            let rise = b as f64 / a.max(1) as f64 - 1.0;
            checks.push(Check {
                what: "p99 latency, last vs first".into(),
                figure: format!("{} -> {} ({})", ms(a), ms(b), pct(rise)),
                target: format!("<= +{:.0}%", t.p99_rise * 100.0),
                pass: rise <= t.p99_rise + 1e-9,
            });
        }
        _ => checks.push(Check {
            what: "p99 latency, last vs first".into(),
            figure: "no acknowledged write in a window".into(),
            target: format!("<= +{:.0}%", t.p99_rise * 100.0),
            pass: false,
        }),
    }

    // RSS over the second half: the peak of the window that starts at the middle against the peak
    // of the last window. Peaks, not single samples: RSS saws up and down as memtables fill and
    // flush, and a single sample lands anywhere on a tooth; a leak raises the peaks.
    let peak = |id: u64, from: f64, to: f64| {
        calm.iter()
            .filter(|s| s.elapsed > from + 1e-6 && s.elapsed <= to + 1e-6)
            .filter_map(|s| s.nodes.iter().find(|m| m.id == id)?.rss)
            .max()
    };
    for n in &last.nodes {
        let what = format!("n{} RSS growth, 2nd half (peaks)", n.id);
        let target = format!("<= +{:.0}%", t.rss_growth * 100.0);
        match (peak(n.id, end / 2.0, end / 2.0 + w), peak(n.id, end - w, end)) {
            (Some(a), Some(b)) if a > 0 => {
                let g = b as f64 / a as f64 - 1.0;
                checks.push(Check {
                    what,
                    figure: format!("{:.1} -> {:.1} MiB ({})", mib(a), mib(b), pct(g)),
                    target,
                    pass: g <= t.rss_growth + 1e-9,
                });
            }
            _ => checks.push(Check { what, figure: "not measured".into(), target, pass: false }),
        }
    }

    // Disk per acknowledged write: what the data directory gained over the calm phase.
    for n in &last.nodes {
        let what = format!("n{} disk per acked write", n.id);
        let target = format!("<= {:.0} B", t.disk_per_write);
        match (start.get(&n.id), last.acked_total) {
            (Some(s), acked) if acked > 0 => {
                let per = disk_per_write(s.total, n.disk.total, acked);
                checks.push(Check {
                    what,
                    figure: format!("{per:.0} B ({:.1} -> {:.1} MiB / {acked})", mib(s.total), mib(n.disk.total)),
                    target,
                    pass: per <= t.disk_per_write,
                });
                notes.push(format!(
                    "n{} apparent bytes (file lengths, without preallocation) per acked write: {:.0} B",
                    n.id,
                    disk_per_write(s.apparent, n.disk.apparent, acked)
                ));
            }
            _ => checks.push(Check { what, figure: "no acknowledged write".into(), target, pass: false }),
        }
    }

    // The kill phase, and the whole run, for the record.
    let kill: Vec<&Sample> = samples.iter().filter(|s| s.phase == Some(Phase::Kill)).collect();
    if let (Some(first_kill), Some(k_last)) = (kill.first(), kill.last()) {
        let (rate, hist) = window(&kill, first_kill.elapsed - first_kill.secs, k_last.elapsed);
        let kills = kill.iter().flat_map(|s| &s.events).filter(|e| e.starts_with("kill")).count();
        notes.push(format!(
            "kill phase, not judged: {kills} kill(s), {rate:.1} writes/s, p99 {}, {} resend(s)",
            hist.percentile(99.0).map(ms).unwrap_or_else(|| "-".into()),
            kill.iter().map(|s| s.resends).sum::<u64>()
        ));
        for n in &k_last.nodes {
            if let Some(s) = start.get(&n.id) {
                notes.push(format!(
                    "n{} disk per acked write over the whole run: {:.0} B",
                    n.id,
                    disk_per_write(s.total, n.disk.total, k_last.acked_total)
                ));
            }
        }
    }
    let refused: u64 = samples.iter().map(|s| s.refused).sum();
    if refused > 0 {
        notes.push(format!("{refused} write(s) definitely refused (not acknowledged; see soak.log)"));
    }
    Verdict { window_secs: w, window_note: note, checks, notes }
}

/// (bytes at the end − bytes at the start) / acknowledged writes; a shrunk directory gives ≤ 0.
pub fn disk_per_write(start: u64, end: u64, acked: u64) -> f64 {
    (end as f64 - start as f64) / acked.max(1) as f64
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

// ---------------------------------------------------------------------------------------------
// Output.

/// The CSV header for `ids`.
pub fn csv_header(ids: &[u64]) -> String {
    let mut h = String::from("elapsed_s,phase,interval_s,acked,acked_per_s,p50_ms,p99_ms,resends,refused,acked_total");
    for id in ids {
        for col in ["up", "rss_bytes", "disk_bytes", "log_bytes", "state_bytes", "snapshots_bytes", "apparent_bytes"] {
            h.push_str(&format!(",n{id}_{col}"));
        }
    }
    h.push_str(",events");
    h
}

/// One CSV row (in the header's node order; a figure not measured is empty).
pub fn csv_row(s: &Sample) -> String {
    let p = |q| s.hist.percentile(q).map(|us| format!("{:.3}", us as f64 / 1000.0)).unwrap_or_default();
    let mut r = format!(
        "{:.1},{},{:.1},{},{:.1},{},{},{},{},{}",
        s.elapsed,
        s.phase.map(Phase::as_str).unwrap_or("-"),
        s.secs,
        s.acked,
        s.rate(),
        p(50.0),
        p(99.0),
        s.resends,
        s.refused,
        s.acked_total
    );
    for n in &s.nodes {
        r.push_str(&format!(
            ",{},{},{},{},{},{},{}",
            u8::from(n.up),
            n.rss.map(|b| b.to_string()).unwrap_or_default(),
            n.disk.total,
            n.disk.log,
            n.disk.state,
            n.disk.snapshots,
            n.disk.apparent
        ));
    }
    r.push_str(&format!(",\"{}\"", s.events.join("; ")));
    r
}

/// The width of a node's cell in the table.
const NODE_CELL: usize = 34;

/// The table header for `ids`.
pub fn table_header(ids: &[u64]) -> String {
    let mut h = format!(
        "{:>7} {:>5} {:>8} {:>8} {:>8} {:>7} {:>9}",
        "t(s)", "phase", "acked/s", "p50ms", "p99ms", "resend", "total"
    );
    for id in ids {
        h.push_str(&format!(" | {:<NODE_CELL$}", format!("n{id} rss / disk (log,state,snap) MiB")));
    }
    h.trim_end().to_string()
}

/// One table line.
pub fn table_row(s: &Sample) -> String {
    let p = |q| s.hist.percentile(q).map(|us| format!("{:.1}", us as f64 / 1000.0)).unwrap_or_else(|| "-".into());
    let mut r = format!(
        "{:>7.0} {:>5} {:>8.1} {:>8} {:>8} {:>7} {:>9}",
        s.elapsed,
        s.phase.map(Phase::as_str).unwrap_or("-"),
        s.rate(),
        p(50.0),
        p(99.0),
        s.resends,
        s.acked_total
    );
    for n in &s.nodes {
        let rss = n.rss.map(|b| format!("{:.0}", mib(b))).unwrap_or_else(|| "down".into());
        let cell = format!(
            "{rss:>4} / {:>6.1} ({:.1},{:.1},{:.1})",
            mib(n.disk.total),
            mib(n.disk.log),
            mib(n.disk.state),
            mib(n.disk.snapshots)
        );
        r.push_str(&format!(" | {cell:<NODE_CELL$}"));
    }
    if !s.events.is_empty() {
        r.push_str(&format!("  [{}]", s.events.join("; ")));
    }
    r.trim_end().to_string()
}

// ---------------------------------------------------------------------------------------------
// The run.

/// What the writers count between two samples.
#[derive(Debug, Default)]
struct Interval {
    acked: u64,
    resends: u64,
    refused: u64,
    hist: Hist,
}

/// The outcome of a soak.
#[derive(Debug)]
pub struct SoakReport {
    pub dir: PathBuf,
    pub samples: Vec<Sample>,
    pub verdict: Verdict,
}

fn log_line(path: &Path, line: &str) {
    eprintln!("{line}");
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = writeln!(f, "{line}");
    }
}

/// Takes one sample of every node (its process's RSS and its data directory).
fn node_samples(c: &Cluster) -> Vec<NodeSample> {
    c.nodes
        .values()
        .map(|n| NodeSample { id: n.id, up: n.running(), rss: n.pid().and_then(rss_of), disk: disk_of(&n.data) })
        .collect()
}

/// Posts a writer makes as one agent, by default, before it moves to a freshly registered one. Each content post
/// creates a Memory and an agent may create at most `max_memories_per_agent` (100,000 by default):
/// at ~60 writes/s a writer reaches it in under half an hour, and an hour's soak needs more.
pub const POSTS_PER_AGENT: u64 = 50_000;

/// Registers one writer agent with a thread of its own; returns (key, thread).
async fn new_writer(client: &Client, label: &str) -> Result<(String, String)> {
    let agent = client.register(None).await.with_context(|| format!("registering {label}"))?;
    let t = client
        .with_key(agent.agent_key.clone())
        .create_thread(
            pb::CreateThreadRequest { subject: kungfu_client::text(&format!("soak {label}")), ..Default::default() },
            None,
        )
        .await
        .with_context(|| format!("creating {label}'s thread"))?;
    match t.value.receipt.and_then(|r| r.result) {
        Some(pb::receipt::Result::ThreadCreated(c)) => Ok((agent.agent_key, c.thread)),
        other => bail!("{label}'s thread creation answered {other:?}"),
    }
}

/// Registers `writers` agents, each with a thread of its own; returns (key, thread) per writer.
async fn setup_writers(setup: &Client, writers: u64) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for i in 0..writers {
        out.push(new_writer(setup, &format!("writer {i}")).await?);
    }
    Ok(out)
}

/// A writer's next agent, registered during the load: retried (a kill may be under way) until it
/// succeeds or the run is over. Registering twice after an unanswered attempt leaves an idle agent
/// behind, which a soak does not mind.
async fn rotate_writer(client: &Client, label: &str, end: Instant, log: &Path) -> Option<(String, String)> {
    while Instant::now() < end {
        match new_writer(client, label).await {
            Ok(w) => {
                log_line(log, &format!("soak: {label} registered (thread {})", w.1));
                return Some(w);
            }
            Err(e) => {
                log_line(log, &format!("soak: {label}: {e:#}; retrying"));
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
    None
}

/// One write, resent under its key until its outcome is definite: Some(latency µs) when
/// acknowledged, None when definitely refused (or the run is over before it was definite).
async fn write_until_definite(
    client: &Client,
    thread: &str,
    body: &[u8],
    key: &str,
    stats: &Mutex<Interval>,
    give_up: &AtomicBool,
    log: &Path,
) -> Option<u64> {
    let sent = Instant::now();
    loop {
        let post = Post::content(thread, body.to_vec()).ask(Vec::<String>::new());
        match client.post(post, Some(key.to_string())).await {
            Ok(_) => return Some(u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX)),
            Err(Error::Rejected(r)) if r.definite => {
                static LOGGED: AtomicU64 = AtomicU64::new(0);
                stats.lock().unwrap_or_else(|p| p.into_inner()).refused += 1;
                // The first few, for the reader of soak.log: a soak expects none.
                if LOGGED.fetch_add(1, Ordering::Relaxed) < 10 {
                    log_line(log, &format!("write {key} definitely refused: {} {}", r.code.as_str(), r.message));
                }
                return None;
            }
            Err(_) => {
                stats.lock().unwrap_or_else(|p| p.into_inner()).resends += 1;
                if give_up.load(Ordering::Relaxed) {
                    return None;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Runs a soak: the cluster, the load, the samples, the kills, the verdict.
pub async fn run_soak(o: &SoakOpts) -> Result<SoakReport> {
    let dir = o.store.join("runs").join(format!("{}-soak-s{}", crate::run::utc_stamp(), o.seed));
    std::fs::create_dir_all(&dir)?;
    let events_log = dir.join("soak.log");
    let cluster = Cluster::start(ClusterOpts {
        nodes: o.nodes,
        server: o.server.clone(),
        dir: dir.clone(),
        net: o.net,
        faketime: false,
        fiu: false,
        disk_mib: None,
        settings: String::new(),
        env: Vec::new(),
    })
    .await
    .context("starting the cluster")?;
    let ids = cluster.ids();
    let endpoints: Vec<String> = ids.iter().map(|id| cluster.endpoint(*id)).collect();
    log_line(&events_log, &format!("soak: {} node(s) ({:?}), run directory {}", o.nodes, o.net, dir.display()));
    let cluster = Arc::new(tokio::sync::Mutex::new(cluster));

    let setup = crate::client::connect_all(endpoints.clone(), None).await?;
    log_line(&events_log, &format!("soak: registering {} writer(s), a thread each", o.writers));
    let writers = setup_writers(&setup, o.writers).await?;
    let mut connections = Vec::new();
    for i in 0..o.connections.max(1) as usize {
        // Each connection starts at another node (followers forward to the leader); the SDK keeps a
        // write's key across its own retries and moves on to the next node when one fails.
        let mut eps = endpoints.clone();
        let n = eps.len().max(1);
        eps.rotate_left(i % n);
        connections.push(Client::connect(eps, None, ClientOptions::default()).await?);
    }

    // The data directories just before the load.
    let start_disk: BTreeMap<u64, Disk> =
        node_samples(&*cluster.lock().await).into_iter().map(|n| (n.id, n.disk)).collect();
    let total = o.calm + o.kill;
    let load_start = loadavg();
    let t0 = Instant::now();
    let end = t0 + total;
    let calm_end = t0 + o.calm;
    log_line(
        &events_log,
        &format!(
            "soak: {} writer(s) over {} connection(s), {}-byte posts ({}), rate {}, calm {:.0} s then kills {:.0} s; a sample every {:.0} s",
            o.writers,
            connections.len(),
            o.body_bytes,
            if o.random_body { "random bytes" } else { "one repeated byte" },
            o.rate.map(|r| format!("<= {r}/s")).unwrap_or_else(|| "uncapped".into()),
            o.calm.as_secs_f64(),
            o.kill.as_secs_f64(),
            o.interval.as_secs_f64()
        ),
    );

    let stats = Arc::new(Mutex::new(Interval::default()));
    let acked_total = Arc::new(AtomicU64::new(0));
    let give_up = Arc::new(AtomicBool::new(false));
    let events = Arc::new(Mutex::new(Vec::<String>::new()));
    let body: Arc<[u8]> = vec![b'x'; o.body_bytes].into();
    let random_body = o.random_body;
    let pace = o.rate.map(|r| Duration::from_secs_f64(o.writers as f64 / r.max(0.001)));
    let mut tasks = Vec::new();
    for (w, (key, thread)) in writers.into_iter().enumerate() {
        let conn = connections[w % connections.len()].clone();
        let mut client = conn.with_key(key);
        let mut thread = thread;
        let (stats, acked_total, give_up, body) = (stats.clone(), acked_total.clone(), give_up.clone(), body.clone());
        let log = events_log.clone();
        let (seed, per_agent) = (o.seed, o.posts_per_agent);
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            let mut next = Instant::now();
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (w as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let mut fresh = vec![0u8; body.len()];
            while Instant::now() < end {
                if n > 0 && n % per_agent == 0 {
                    let label = format!("writer {w}.{}", n / per_agent);
                    let Some((key, th)) = rotate_writer(&conn, &label, end, &log).await else { break };
                    client = conn.with_key(key);
                    thread = th;
                }
                let key = format!("soak-{seed}-{w}-{n}");
                n += 1;
                // A resend carries the same body (its key is the same write).
                let this: &[u8] = if random_body {
                    rng.fill(fresh.as_mut_slice());
                    &fresh
                } else {
                    &body
                };
                if let Some(us) = write_until_definite(&client, &thread, this, &key, &stats, &give_up, &log).await {
                    let mut s = stats.lock().unwrap_or_else(|p| p.into_inner());
                    s.acked += 1;
                    s.hist.record(us);
                    acked_total.fetch_add(1, Ordering::Relaxed);
                }
                if let Some(p) = pace {
                    next += p;
                    let now = Instant::now();
                    if next > now {
                        tokio::time::sleep(next - now).await;
                    } else {
                        next = now;
                    }
                }
            }
        }));
    }

    // The killer: in the kill phase, every ~kill_every one node (seeded), down for 3–8 s.
    let killer = {
        let (cluster, events, events_log) = (cluster.clone(), events.clone(), events_log.clone());
        let (kill_every, seed) = (o.kill_every, o.seed);
        tokio::spawn(async move {
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x736f_616b);
            if end <= calm_end {
                return 0u64;
            }
            tokio::time::sleep_until(calm_end.into()).await;
            let mut kills = 0;
            loop {
                let every = kill_every.as_secs_f64();
                let wait = Duration::from_secs_f64(rng.random_range(every * 0.75..=every * 1.25).max(0.0));
                let down = Duration::from_millis(rng.random_range(3000..=8000));
                // The first kill comes a few seconds into the phase; the others every ~kill_every.
                let before = if kills == 0 { Duration::from_secs(5) } else { wait.saturating_sub(down) };
                if Instant::now() + before + down >= end {
                    break;
                }
                tokio::time::sleep(before).await;
                let mut c = cluster.lock().await;
                let leader = c.leader().await;
                let ids = c.ids();
                let victim = ids[rng.random_range(0..ids.len())];
                let role = if Some(victim) == leader { "leader" } else { "follower" };
                let _ = c.kill(victim);
                drop(c);
                kills += 1;
                let e = format!("kill n{victim} ({role})");
                log_line(&events_log, &format!("{:>8.1}s {e}", t0.elapsed().as_secs_f64()));
                events.lock().unwrap_or_else(|p| p.into_inner()).push(e);
                tokio::time::sleep(down).await;
                let restarted = cluster.lock().await.start_node(victim);
                let e = match restarted {
                    Ok(()) => format!("restart n{victim}"),
                    Err(err) => format!("restart n{victim} failed: {err}"),
                };
                log_line(&events_log, &format!("{:>8.1}s {e}", t0.elapsed().as_secs_f64()));
                events.lock().unwrap_or_else(|p| p.into_inner()).push(e);
            }
            kills
        })
    };

    // The sampler.
    let csv_path = dir.join("soak.csv");
    let mut csv = std::fs::File::create(&csv_path)?;
    writeln!(csv, "{}", csv_header(&ids))?;
    eprintln!("{}", table_header(&ids));
    let mut samples = Vec::new();
    let mut last = t0;
    let mut tick = t0;
    while tick < end {
        tick = (tick + o.interval).min(end);
        tokio::time::sleep_until(tick.into()).await;
        let now = Instant::now();
        let interval = std::mem::take(&mut *stats.lock().unwrap_or_else(|p| p.into_inner()));
        let nodes = node_samples(&*cluster.lock().await);
        let elapsed = now.duration_since(t0).as_secs_f64();
        let s = Sample {
            elapsed,
            secs: now.duration_since(last).as_secs_f64(),
            // An interval that ends at the phase change (within a second) is calm.
            phase: Some(if tick <= calm_end + Duration::from_secs(1) { Phase::Calm } else { Phase::Kill }),
            acked: interval.acked,
            acked_total: acked_total.load(Ordering::Relaxed),
            resends: interval.resends,
            refused: interval.refused,
            hist: interval.hist,
            nodes,
            events: std::mem::take(&mut *events.lock().unwrap_or_else(|p| p.into_inner())),
        };
        last = now;
        writeln!(csv, "{}", csv_row(&s))?;
        csv.flush()?;
        eprintln!("{}", table_row(&s));
        samples.push(s);
    }

    // Wind down: writers finish (a write still indeterminate after the end is given up), the
    // killed node comes back, the cluster must converge, the logs must be clean.
    give_up.store(true, Ordering::Relaxed);
    let _ = tokio::time::timeout(Duration::from_secs(60), futures::future::join_all(tasks)).await;
    let kills = killer.await.unwrap_or(0);
    let load_end = loadavg();
    let mut verdict = judge(&samples, &start_disk, &o.targets);
    {
        let mut c = cluster.lock().await;
        for id in c.ids() {
            let _ = c.start_node(id);
        }
        let healthy = c.wait_healthy(Duration::from_secs(60)).await;
        let digests = c.digests(Duration::from_secs(180)).await.unwrap_or_default();
        let agree = digests.len() == ids.len() && digests.values().all(|d| Some(d) == digests.values().next());
        verdict.checks.push(Check {
            what: "nodes converge after the load".into(),
            figure: match (&healthy, agree) {
                (Ok(()), true) => format!("one applied index and digest on {} node(s)", digests.len()),
                (Err(e), _) => format!("unhealthy: {e}"),
                (Ok(()), false) => format!(
                    "{} of {} node(s) gave a digest, not all at one index and digest: {digests:?}",
                    digests.len(),
                    ids.len()
                ),
            },
            target: "converged".into(),
            pass: healthy.is_ok() && agree,
        });
        let mut bad = Vec::new();
        for (id, text) in c.logs() {
            if let Some(line) =
                text.lines().find(|l| l.contains("panicked at") || l.contains("Corruption") || l.contains("corrupt"))
            {
                bad.push(format!("n{id}: {line}"));
            }
        }
        verdict.checks.push(Check {
            what: "node logs".into(),
            figure: if bad.is_empty() { "no panic or corruption".into() } else { bad.join(" | ") },
            target: "clean".into(),
            pass: bad.is_empty(),
        });
        c.stop();
    }
    verdict.notes.push(format!("{kills} kill(s) in the kill phase; events in soak.log"));
    verdict.notes.push(format!(
        "host load average (1, 5, 15 min) when the load began: {load_start}; when it ended: {load_end} \
         (a busy host moves throughput and p99: run the hour on a quiet one)"
    ));

    let mut text = format!(
        "== kungfu-jepsen soak  seed={}  nodes={}  writers={}  connections={}  calm={:.0}s  kill={:.0}s  dir={}\n",
        o.seed,
        o.nodes,
        o.writers,
        o.connections,
        o.calm.as_secs_f64(),
        o.kill.as_secs_f64(),
        dir.display()
    );
    text.push_str(&table_header(&ids));
    text.push('\n');
    for s in &samples {
        text.push_str(&table_row(s));
        text.push('\n');
    }
    text.push('\n');
    text.push_str(&verdict.text());
    std::fs::write(dir.join("soak.txt"), &text)?;
    if verdict.passed() && !o.keep_data {
        for id in &ids {
            let _ = std::fs::remove_dir_all(dir.join(format!("n{id}")).join("data"));
        }
    }
    println!("{text}");
    Ok(SoakReport { dir, samples, verdict })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A calm phase of `n` 10 s samples, one node, where sample `i` acknowledges `rate(i)` writes/s
    /// at latency `lat(i)` µs, RSS `rss(i)` and disk `1 MiB + i × 100 KiB`.
    fn series(
        n: usize,
        rate: impl Fn(usize) -> u64,
        lat: impl Fn(usize) -> u64,
        rss: impl Fn(usize) -> u64,
    ) -> Vec<Sample> {
        let mut total = 0;
        (0..n)
            .map(|i| {
                let acked = rate(i) * 10;
                total += acked;
                let mut hist = Hist::default();
                for _ in 0..acked {
                    hist.record(lat(i));
                }
                Sample {
                    elapsed: (i + 1) as f64 * 10.0,
                    secs: 10.0,
                    phase: Some(Phase::Calm),
                    acked,
                    acked_total: total,
                    hist,
                    nodes: vec![NodeSample {
                        id: 1,
                        up: true,
                        rss: Some(rss(i)),
                        disk: Disk { total: (1 << 20) + i as u64 * 100 * 1024, ..Disk::default() },
                    }],
                    ..Sample::default()
                }
            })
            .collect()
    }

    fn start() -> BTreeMap<u64, Disk> {
        BTreeMap::from([(1, Disk { total: 1 << 20, ..Disk::default() })])
    }

    fn check<'a>(v: &'a Verdict, what: &str) -> &'a Check {
        v.checks.iter().find(|c| c.what.contains(what)).unwrap_or_else(|| panic!("no {what} in {v:?}"))
    }

    #[test]
    fn histogram_percentiles_are_within_one_percent() {
        let mut h = Hist::default();
        for us in 1..=10_000u64 {
            h.record(us);
        }
        for (p, exact) in [(50.0, 5_000.0), (99.0, 9_900.0), (100.0, 10_000.0)] {
            let got = h.percentile(p).expect("values") as f64;
            assert!((got / exact - 1.0).abs() <= 0.011, "p{p}: {got} vs {exact}");
        }
        let mut a = Hist::default();
        a.record(1_000);
        let mut b = Hist::default();
        b.record(100_000);
        a.merge(&b);
        assert_eq!(a.count(), 2);
        assert!(a.percentile(99.0).expect("two") > 99_000);
        assert_eq!(Hist::default().percentile(50.0), None);
    }

    #[test]
    fn a_flat_series_passes() {
        let s = series(36, |_| 1000, |_| 5_000, |_| 100 << 20);
        let v = judge(&s, &start(), &Targets::default());
        assert!(v.passed(), "{}", v.text());
        assert!(v.window_note.contains("short"), "360 s is shorter than an hour: a sixth is used");
        assert!((v.window_secs - 60.0).abs() < 1e-9);
    }

    #[test]
    fn throughput_that_degrades_twenty_percent_fails() {
        // 1000/s falling linearly to 800/s by the end.
        let s = series(36, |i| 1000 - (200 * i as u64) / 35, |_| 5_000, |_| 100 << 20);
        let v = judge(&s, &start(), &Targets::default());
        assert!(!check(&v, "throughput").pass, "{}", v.text());
        assert!(check(&v, "p99").pass);
        assert!(!v.passed());
    }

    #[test]
    fn p99_that_degrades_twenty_percent_fails() {
        let s = series(36, |_| 1000, |i| 5_000 + (1_000 * i as u64) / 35, |_| 100 << 20);
        let v = judge(&s, &start(), &Targets::default());
        assert!(!check(&v, "p99").pass, "{}", v.text());
        assert!(check(&v, "throughput").pass);
    }

    #[test]
    fn a_five_percent_wobble_passes() {
        let s = series(36, |i| if i % 2 == 0 { 1000 } else { 960 }, |i| 5_000 + (i as u64 % 3) * 100, |_| 100 << 20);
        assert!(judge(&s, &start(), &Targets::default()).passed());
    }

    #[test]
    fn rss_growth_over_the_second_half_is_detected() {
        // Flat for the first half, then +20% by the end: fails.
        let grows = series(
            36,
            |_| 1000,
            |_| 5_000,
            |i| if i < 18 { 100 << 20 } else { (100 << 20) + ((20 << 20) * (i as u64 - 17)) / 18 },
        );
        let v = judge(&grows, &start(), &Targets::default());
        assert!(!check(&v, "RSS").pass, "{}", v.text());
        // Growth in the first half only (warming caches), flat afterwards: passes.
        let warms =
            series(36, |_| 1000, |_| 5_000, |i| if i < 18 { (50 << 20) + ((i as u64) << 20) * 3 } else { 104 << 20 });
        assert!(check(&judge(&warms, &start(), &Targets::default()), "RSS").pass);
        // A sawtooth (memtables filling and flushing) with level peaks passes, though the sample at
        // the middle is a trough and the last is near a peak (+20% sample to sample).
        let saw = series(36, |_| 1000, |_| 5_000, |i| (100 << 20) + ((i as u64 + 4) % 7) * (5 << 20));
        assert!(check(&judge(&saw, &start(), &Targets::default()), "RSS").pass);
        // A node not measured in the last window fails rather than passes.
        let mut gone = series(36, |_| 1000, |_| 5_000, |_| 100 << 20);
        for s in gone.iter_mut().skip(30) {
            s.nodes[0].rss = None;
        }
        assert!(!check(&judge(&gone, &start(), &Targets::default()), "RSS").pass);
    }

    #[test]
    fn disk_per_write_is_the_growth_over_the_acknowledged_writes() {
        assert_eq!(disk_per_write(1 << 20, (1 << 20) + 4096 * 1000, 1000), 4096.0);
        assert_eq!(disk_per_write(10_000, 6_000, 1000), -4.0, "compaction shrank it");
        // series(): 35 × 100 KiB over 36 × 10 × 1000 writes = 9.96 B per write.
        let s = series(36, |_| 1000, |_| 5_000, |_| 100 << 20);
        let v = judge(&s, &start(), &Targets::default());
        let c = check(&v, "disk");
        assert!(c.pass && c.figure.starts_with("10 B"), "{c:?}");
        // 5000 B per write fails.
        let mut fat = s.clone();
        fat.last_mut().expect("samples").nodes[0].disk.total = (1 << 20) + 5000 * 360_000;
        assert!(!check(&judge(&fat, &start(), &Targets::default()), "disk").pass);
    }

    #[test]
    fn an_hour_uses_ten_minute_windows_and_the_kill_phase_is_not_judged() {
        let t = Targets::default();
        assert_eq!(window_for(3600.0, &t).0, 600.0);
        assert_eq!(window_for(360.0, &t).0, 60.0);
        let mut s = series(48, |_| 1000, |_| 5_000, |_| 100 << 20);
        for x in s.iter_mut().skip(36) {
            x.phase = Some(Phase::Kill);
            x.acked = 10;
            x.events = vec!["kill n1 (leader)".into()];
        }
        let v = judge(&s, &start(), &t);
        assert!(v.passed(), "{}", v.text());
        assert!(v.notes.iter().any(|n| n.contains("12 kill(s)")), "{:?}", v.notes);
    }

    #[test]
    fn no_calm_sample_fails() {
        assert!(!judge(&[], &start(), &Targets::default()).passed());
    }

    #[test]
    fn rss_is_read_in_kib_and_csv_rows_match_the_header() {
        assert_eq!(parse_rss("Name:\tkungfud\nVmHWM:\t 9 kB\nVmRSS:\t   40960 kB\n"), Some(40 << 20));
        assert_eq!(parse_rss("Name:\tx\n"), None);
        assert!(rss_of(std::process::id()).is_some_and(|b| b > 0));
        let s = &series(2, |_| 1000, |_| 5_000, |_| 100 << 20)[1];
        assert_eq!(csv_header(&[1]).split(',').count(), csv_row(s).split(',').count());
        assert!(csv_row(s).starts_with("20.0,calm,10.0,10000,1000.0,"), "{}", csv_row(s));
    }

    #[test]
    fn allocated_bytes_count_blocks_by_part() {
        let dir = std::env::temp_dir().join(format!("kfj-soak-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for part in ["log", "state", "snapshots"] {
            std::fs::create_dir_all(dir.join(part)).expect("mkdir");
            std::fs::write(dir.join(part).join("f"), vec![1u8; 10_000]).expect("write");
        }
        let d = disk_of(&dir);
        assert!(d.log >= 10_000 && d.state >= 10_000 && d.snapshots >= 10_000, "{d:?}");
        assert!(d.total >= d.log + d.state + d.snapshots, "{d:?}");
        assert_eq!(d.apparent, 30_000, "{d:?}");
        // A checkpoint's hard link to a state file is the same blocks: counted once, in the state.
        std::fs::write(dir.join("state").join("table"), vec![2u8; 100_000]).expect("write");
        std::fs::hard_link(dir.join("state").join("table"), dir.join("snapshots").join("table")).expect("link");
        let linked = disk_of(&dir);
        assert!(linked.state >= d.state + 100_000, "{linked:?}");
        assert_eq!(linked.snapshots, d.snapshots, "the link adds nothing to the snapshots: {linked:?}");
        assert_eq!(linked.apparent, 130_000, "{linked:?}");
        assert!(linked.total < d.total + 2 * 100_000, "counted once in the total: {linked:?}");
        assert_eq!(disk_of(&dir.join("absent")), Disk::default());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
