//! Prometheus metrics. Every metric a person would alert on is named here, with what it means;
//! `docs/operations.md` lists the alerts. Recording is cheap (atomic counters and histograms from
//! the `metrics` crate); the exporter serves `/metrics` on its own listener.

use kungfu_raft::RaftNode;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Starts the Prometheus exporter on `listen`. Call once per process, inside the runtime.
pub fn install(listen: SocketAddr) -> anyhow::Result<()> {
    metrics_exporter_prometheus::PrometheusBuilder::new()
        .with_http_listener(listen)
        .set_buckets(&[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0])?
        .install()?;
    Ok(())
}

/// One replicated action: `kungfu_actions_total{kind, outcome}` (outcome `ok`, `replayed`, a
/// rejection code, or `indeterminate`) and `kungfu_action_seconds{kind}`.
pub fn action(kind: &'static str, outcome: &str, latency: Duration) {
    metrics::counter!("kungfu_actions_total", "kind" => kind, "outcome" => outcome.to_string()).increment(1);
    metrics::histogram!("kungfu_action_seconds", "kind" => kind).record(latency.as_secs_f64());
}

/// A refusal at the edge, before replication (authentication, rate limits, malformed input).
pub fn refused(code: &str) {
    metrics::counter!("kungfu_edge_refusals_total", "code" => code.to_string()).increment(1);
}

/// How late a deadline ended an obligation (ended minus due).
pub fn deadline_lateness(late: Duration) {
    metrics::histogram!("kungfu_deadline_lateness_seconds").record(late.as_secs_f64());
    metrics::counter!("kungfu_deadlines_ended_total").increment(1);
}

/// Publishes this node's raft state every second until `stop` changes.
pub async fn raft_gauges(node: Arc<RaftNode>, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        let m = node.metrics();
        metrics::gauge!("kungfu_raft_term").set(m.current_term as f64);
        metrics::gauge!("kungfu_raft_is_leader").set(if kungfu_raft::node::leader_in(&m) == Some(node.id) {
            1.0
        } else {
            0.0
        });
        metrics::gauge!("kungfu_raft_last_log_index").set(m.last_log_index.unwrap_or(0) as f64);
        metrics::gauge!("kungfu_raft_applied_index").set(m.last_applied.map(|l| l.index).unwrap_or(0) as f64);
        metrics::gauge!("kungfu_raft_voters").set(m.membership_config.membership().voter_ids().count() as f64);
        if let Some(repl) = &m.replication {
            let last = m.last_log_index.unwrap_or(0);
            for (id, matched) in repl.iter() {
                let lag = last.saturating_sub(matched.as_ref().map(|l| l.index).unwrap_or(0));
                metrics::gauge!("kungfu_raft_follower_lag_entries", "node" => id.to_string()).set(lag as f64);
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stop.changed() => return,
        }
    }
}
