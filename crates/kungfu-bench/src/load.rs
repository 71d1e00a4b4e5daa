//! The closed-loop load of a benchmark: workers, each with one call in flight at a time, calling
//! as fast as the server answers for a fixed window, after an optional warm-up that is not
//! counted. Shared by `bench write` and `bench compare`, for Kungfu and etcd alike, so both
//! systems are measured by the same loop.
//!
//! Only acknowledged successes count towards operations and latency; each failure is counted by
//! its code, apart. A call counts when it was sent inside the window, whenever its answer came; a
//! call's latency is from sending it to its answer, on the client: what a caller waits. The loop
//! never retries (a retry would hide a failure inside a long latency).

use super::stats::{Summary, ms_text};
use kungfu_cli::error::CliError;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

/// How long a worker pauses after a failed call: a refusing server answers at once, and the loop
/// must not spin on it.
const PAUSE_AFTER_ERROR: Duration = Duration::from_millis(10);

/// One worker's call, repeated by the loop. Each worker owns its own `Op`: the state a sequence
/// of calls needs (an agent's key, the assignment of a cycle) lives in it.
pub trait Op: Send + 'static {
    /// Makes one call; an error is the failure's code (`UNAVAILABLE`, `DEADLINE_EXCEEDED`, …).
    fn call(&mut self) -> impl Future<Output = Result<(), String>> + Send;
}

/// The figures of one load: acknowledged operations, their latency and the failures by code.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    /// Successful calls sent inside the window.
    pub ops: usize,
    /// From the start of the window until the last worker stopped, in seconds.
    pub elapsed_secs: f64,
    /// The latency of each success.
    pub latency: Option<Summary>,
    /// Failed calls sent inside the window, by code.
    pub errors: BTreeMap<String, u64>,
}

impl Figures {
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed_secs.max(1e-9)
    }

    pub fn errors_total(&self) -> u64 {
        self.errors.values().sum()
    }

    /// `{ops, elapsed_secs, ops_per_sec, latency_ms, errors, errors_total}`.
    pub fn to_json(&self) -> Value {
        json!({
            "ops": self.ops,
            "elapsed_secs": (self.elapsed_secs * 1000.0).round() / 1000.0,
            "ops_per_sec": self.ops_per_sec().round(),
            "latency_ms": self.latency.map(|s| s.to_json()),
            "errors": self.errors,
            "errors_total": self.errors_total(),
        })
    }

    /// The failures as `CODE n, CODE n`, or `none`.
    pub fn errors_text(&self) -> String {
        if self.errors.is_empty() {
            return "none".to_string();
        }
        self.errors.iter().map(|(code, n)| format!("{code} {n}")).collect::<Vec<_>>().join(", ")
    }

    /// The figures as key-value rows, for `output::pairs`.
    pub fn rows(&self) -> Vec<(&'static str, String)> {
        let mut rows = vec![
            ("ops", self.ops.to_string()),
            ("seconds", format!("{:.2}", self.elapsed_secs)),
            ("ops/s", format!("{:.0}", self.ops_per_sec())),
        ];
        if let Some(s) = &self.latency {
            rows.push(("latency p50 ms", ms_text(s.p50_us)));
            rows.push(("latency p90 ms", ms_text(s.p90_us)));
            rows.push(("latency p99 ms", ms_text(s.p99_us)));
            rows.push(("latency max ms", ms_text(s.max_us)));
        }
        rows.push(("errors", self.errors_text()));
        rows
    }
}

/// What one worker measured inside the window: the latency of each success (µs) and the code of
/// each failure.
type Measured = (Vec<i64>, BTreeMap<String, u64>);

/// Calls `op` until `until`, counting the calls sent from `from` on.
async fn worker<O: Op>(mut op: O, from: Instant, until: Instant) -> Measured {
    let mut latencies = Vec::new();
    let mut errors = BTreeMap::new();
    loop {
        let sent = Instant::now();
        if sent >= until {
            break;
        }
        let result = op.call().await;
        let counted = sent >= from;
        match result {
            Ok(()) if counted => latencies.push(i64::try_from(sent.elapsed().as_micros()).unwrap_or(i64::MAX)),
            Ok(()) => {}
            Err(code) => {
                if counted {
                    *errors.entry(code).or_insert(0) += 1;
                }
                tokio::time::sleep(PAUSE_AFTER_ERROR).await;
            }
        }
    }
    (latencies, errors)
}

/// Runs every op as its own worker for `warmup` (not counted), then for `window`; returns the
/// figures of the window.
pub async fn drive<O: Op>(ops: Vec<O>, warmup: Duration, window: Duration) -> Result<Figures, CliError> {
    let from = Instant::now() + warmup;
    let until = from + window;
    let mut tasks = tokio::task::JoinSet::new();
    for op in ops {
        tasks.spawn(worker(op, from, until));
    }
    let mut latencies = Vec::new();
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    while let Some(joined) = tasks.join_next().await {
        let (l, e) = joined.map_err(|e| CliError::other(format!("a load task failed: {e}")))?;
        latencies.extend(l);
        for (code, n) in e {
            *errors.entry(code).or_insert(0) += n;
        }
    }
    let elapsed_secs = Instant::now().saturating_duration_since(from).as_secs_f64();
    let ops = latencies.len();
    Ok(Figures { ops, elapsed_secs, latency: Summary::of(&mut latencies), errors })
}

pub use kungfu_client::grpc_code_name;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Succeeds on even calls, fails on odd ones, counting every call.
    struct Alternating(Arc<AtomicU64>);

    impl Op for Alternating {
        async fn call(&mut self) -> Result<(), String> {
            let n = self.0.fetch_add(1, Ordering::Relaxed);
            tokio::task::yield_now().await;
            if n.is_multiple_of(2) { Ok(()) } else { Err("ODD".to_string()) }
        }
    }

    #[tokio::test]
    async fn only_calls_sent_after_the_warmup_count_and_failures_count_apart() {
        let calls = Arc::new(AtomicU64::new(0));
        let ops = vec![Alternating(calls.clone()), Alternating(calls.clone())];
        let f = drive(ops, Duration::from_millis(100), Duration::from_millis(100)).await.expect("drive");
        let total = calls.load(Ordering::Relaxed);
        let counted = f.ops as u64 + f.errors_total();
        assert!(counted < total, "the warm-up's calls are not counted: {counted} of {total}");
        assert!(f.ops > 0 && f.errors["ODD"] > 0, "{f:?}");
        assert_eq!(f.latency.map(|s| s.count), Some(f.ops));
        assert!(f.elapsed_secs >= 0.1, "{f:?}");
        assert_eq!(f.to_json()["errors_total"], f.errors_total());
    }

    #[test]
    fn grpc_codes_are_named_as_in_the_grpc_spec() {
        assert_eq!(grpc_code_name(tonic::Code::DeadlineExceeded), "DEADLINE_EXCEEDED");
        assert_eq!(grpc_code_name(tonic::Code::Unavailable), "UNAVAILABLE");
        assert_eq!(grpc_code_name(tonic::Code::Ok), "OK");
    }

    #[test]
    fn errors_read_as_codes_with_counts() {
        let mut f = Figures::default();
        assert_eq!(f.errors_text(), "none");
        f.errors.insert("UNAVAILABLE".into(), 3);
        f.errors.insert("DEADLINE_EXCEEDED".into(), 1);
        assert_eq!(f.errors_text(), "DEADLINE_EXCEEDED 1, UNAVAILABLE 3");
    }
}
