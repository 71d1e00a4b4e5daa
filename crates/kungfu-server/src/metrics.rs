//! Prometheus metrics, on by default (issue #16): `/metrics` on the node's HTTP listener (and on
//! `metrics_listen` when that is set too). Every family is described here with its `# HELP`, so
//! `promtool check metrics` accepts the exposition; `docs/operations.md` lists the alerts built on
//! them. Recording is cheap (atomic counters and histograms from the `metrics` crate); what is
//! costly to read (process, disk) is read when scraped, and the raft and actor gauges once a
//! second by [`publish_gauges`].
//!
//! One recorder serves the whole process ([`handle`]): a test process running several nodes
//! shares it, as it shares the process.

use kungfu_raft::RaftNode;
use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
use metrics_exporter_prometheus::PrometheusHandle;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The package version, the commit and the compiler this binary was built from (build.rs).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const COMMIT: &str = env!("KUNGFU_COMMIT");
pub const BUILD_DATE: &str = env!("KUNGFU_BUILD_DATE");
pub const RUSTC: &str = env!("KUNGFU_RUSTC");

static RECORDER: OnceLock<(PrometheusHandle, metrics_process::Collector)> = OnceLock::new();

/// The process's recorder, installed (and every family described) on first use.
pub fn handle() -> anyhow::Result<&'static PrometheusHandle> {
    if let Some((h, _)) = RECORDER.get() {
        return Ok(h);
    }
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new()
        .set_buckets(&[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0])?
        .build_recorder();
    let handle = recorder.handle();
    // Another thread may have won the race: only the winner's recorder becomes global.
    let mut installed = false;
    let (h, _) = RECORDER.get_or_init(|| {
        installed = metrics::set_global_recorder(recorder).is_ok();
        (handle, metrics_process::Collector::default())
    });
    if installed {
        describe();
        if let Some((_, process)) = RECORDER.get() {
            process.describe();
        }
        metrics::gauge!("kungfu_build_info", "version" => VERSION, "commit" => COMMIT, "rustc" => RUSTC, "build_date" => BUILD_DATE)
            .set(1.0);
    }
    Ok(h)
}

/// The exposition for one scrape: reads the process and the data directory's disk first.
pub fn render(data_dir: &Path) -> String {
    let Some((handle, process)) = RECORDER.get() else {
        return String::new();
    };
    process.collect();
    disk(data_dir);
    handle.render()
}

/// `# HELP` of every family this crate records (the process families describe themselves).
fn describe() {
    describe_gauge!(
        "kungfu_build_info",
        "Always 1; the labels name the version, commit, compiler and build date of this binary."
    );
    describe_counter!(
        "kungfu_actions_total",
        "Replicated actions by kind and outcome (ok, replayed, a rejection code, NOT_LEADER or indeterminate)."
    );
    describe_histogram!(
        "kungfu_action_seconds",
        Unit::Seconds,
        "Time from an action's proposal to its applied answer."
    );
    describe_counter!("kungfu_edge_refusals_total", "Requests refused before replication, by code.");
    describe_histogram!(
        "kungfu_deadline_lateness_seconds",
        Unit::Seconds,
        "How late the leader ended each passed deadline (ended minus due)."
    );
    describe_counter!("kungfu_deadlines_ended_total", "Obligations ended by their deadline on this node as leader.");
    describe_counter!("kungfu_forwarded_calls_total", "Calls this node forwarded to the leader.");
    describe_gauge!("kungfu_live_actors", "Object actors alive on this node.");
    describe_gauge!("kungfu_actor_queued_actions", "Actions waiting in or handled by object actors' mailboxes now.");
    describe_gauge!(
        "kungfu_ready",
        "1 while this node serves writes and linearizable reads (the /readyz rule), else 0."
    );
    describe_gauge!(
        "kungfu_runtime_worker_threads",
        "Worker threads of the node's async runtime (the worker_threads setting, or one per CPU)."
    );
    describe_gauge!("kungfu_raft_term", "This node's current raft term.");
    describe_gauge!("kungfu_raft_is_leader", "1 while this node is the raft leader, else 0.");
    describe_gauge!("kungfu_raft_leader_known", "1 while this node knows a leader, else 0.");
    describe_gauge!(
        "kungfu_raft_damaged",
        "1 while this node's raft log lacks entries it acknowledged (it is repairing: no vote, no election), else 0."
    );
    describe_gauge!("kungfu_raft_voters", "Voters in the cluster's membership as this node knows it.");
    describe_gauge!("kungfu_raft_last_log_index", "Index of the last entry in this node's log.");
    describe_gauge!("kungfu_raft_committed_index", "Index of the last entry this node knows committed.");
    describe_gauge!("kungfu_raft_applied_index", "Index of the last entry this node applied to its state.");
    describe_gauge!("kungfu_raft_snapshot_index", "Index of the last entry in this node's latest snapshot.");
    describe_gauge!(
        "kungfu_raft_commit_lag_entries",
        "Entries in this node's log not yet known committed (last log index minus committed index)."
    );
    describe_gauge!("kungfu_raft_apply_lag_entries", "Committed entries not yet applied on this node.");
    describe_gauge!(
        "kungfu_raft_follower_lag_entries",
        "On the leader: entries a follower is behind the leader's log."
    );
    describe_counter!(
        "kungfu_raft_rpc_timeouts_total",
        "Raft AppendEntries and votes this node sent that ran out of their deadline."
    );
    describe_counter!("kungfu_raft_rpc_failures_total", "Raft RPCs this node sent to a peer that failed, by peer.");
    write_path_describe();
    describe_gauge!("kungfu_data_dir_bytes", Unit::Bytes, "Bytes of the files in this node's data directory.");
    describe_gauge!(
        "kungfu_data_dir_part_bytes",
        Unit::Bytes,
        "Bytes of each part of the data directory: part log (the raft log), state, snapshots, other."
    );
    describe_histogram!(
        "kungfu_raft_log_sync_seconds",
        Unit::Seconds,
        "Time of each fsync of the raft log's write-ahead log (one per group commit)."
    );
    describe_gauge!(
        "kungfu_data_dir_free_bytes",
        Unit::Bytes,
        "Bytes free to this process on the data directory's filesystem."
    );
    describe_counter!(
        "kungfu_wake_deliveries_total",
        "Wake webhook attempts by this node as leader, by outcome (delivered: a 2xx; failed: anything else)."
    );
    describe_counter!(
        "kungfu_wake_give_ups_total",
        "Wake targets this node as leader recorded failed (give-up time passed)."
    );
    describe_histogram!(
        "kungfu_wake_delivery_seconds",
        Unit::Seconds,
        "From the fact that changed an agent's turn to its webhook's 2xx (fact-to-delivery latency)."
    );
    describe_gauge!(
        "kungfu_wake_targets",
        "Wake targets the leader's deliverer follows (0 on a follower until it leads)."
    );
    describe_gauge!("kungfu_data_dir_size_bytes", Unit::Bytes, "Size of the data directory's filesystem.");
    describe_gauge!(
        "kungfu_store_memory_bytes",
        Unit::Bytes,
        "Memory of each RocksDB store (store log or state) by part: memtables, table_readers (index and filter \
         blocks outside the cache), block_cache (its whole charge) and block_cache_pinned (the pinned part of it)."
    );
}

/// Serves `/metrics` alone on `listen` (the optional `metrics_listen`; the HTTP listener serves it
/// too) until `stop` is cancelled.
pub async fn serve_alone(
    listen: SocketAddr,
    data_dir: PathBuf,
    stop: tokio_util::sync::CancellationToken,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| anyhow::anyhow!("configuration: metrics_listen: cannot listen on {listen}: {e}"))?;
    let app = axum::Router::new().merge(route(data_dir));
    Ok(tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(stop.cancelled_owned()).await {
            tracing::error!(error = %e, "the metrics listener failed");
        }
    }))
}

/// The `/metrics` route, in Prometheus' text format.
pub fn route(data_dir: PathBuf) -> axum::Router {
    axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let data_dir = data_dir.clone();
            async move {
                // Walking the data directory touches the filesystem: off the async workers.
                let body = tokio::task::spawn_blocking(move || render(&data_dir)).await.unwrap_or_default();
                ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], body)
            }
        }),
    )
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

/// The data directory's size, each of its parts (issue #36: which part grows) and its
/// filesystem's free space.
fn disk(data_dir: &Path) {
    let usage = kungfu_storage::DataDir::new(data_dir).usage();
    metrics::gauge!("kungfu_data_dir_bytes").set(usage.total() as f64);
    for (part, bytes) in
        [("log", usage.log), ("state", usage.state), ("snapshots", usage.snapshots), ("other", usage.other)]
    {
        metrics::gauge!("kungfu_data_dir_part_bytes", "part" => part).set(bytes as f64);
    }
    if let Ok(fs) = rustix::fs::statvfs(data_dir) {
        let block = fs.f_frsize.max(1);
        metrics::gauge!("kungfu_data_dir_free_bytes").set((fs.f_bavail.saturating_mul(block)) as f64);
        metrics::gauge!("kungfu_data_dir_size_bytes").set((fs.f_blocks.saturating_mul(block)) as f64);
    }
}

/// Publishes this node's raft, readiness and actor gauges every second until `stop` changes, and
/// the raft log's fsync times measured since the last second.
pub async fn publish_gauges(
    node: Arc<RaftNode>,
    actors: Arc<crate::actors::Actors>,
    ready: impl Fn() -> bool + Send,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        let m = node.metrics();
        let index = |l: &Option<kungfu_raft::types::LogId>| l.as_ref().map(|l| l.index).unwrap_or(0);
        let last = m.last_log_index.unwrap_or(0);
        let (committed, applied) = (index(&m.local_committed), index(&m.last_applied));
        metrics::gauge!("kungfu_runtime_worker_threads")
            .set(tokio::runtime::Handle::current().metrics().num_workers() as f64);
        metrics::gauge!("kungfu_raft_term").set(m.current_term as f64);
        let leader = kungfu_raft::node::leader_in(&m);
        metrics::gauge!("kungfu_raft_is_leader").set(if leader == Some(node.id) { 1.0 } else { 0.0 });
        metrics::gauge!("kungfu_raft_leader_known").set(if leader.is_some() { 1.0 } else { 0.0 });
        metrics::gauge!("kungfu_raft_last_log_index").set(last as f64);
        metrics::gauge!("kungfu_raft_committed_index").set(committed as f64);
        metrics::gauge!("kungfu_raft_applied_index").set(applied as f64);
        metrics::gauge!("kungfu_raft_snapshot_index").set(index(&m.snapshot) as f64);
        metrics::gauge!("kungfu_raft_commit_lag_entries").set(last.saturating_sub(committed) as f64);
        metrics::gauge!("kungfu_raft_apply_lag_entries").set(committed.saturating_sub(applied) as f64);
        metrics::gauge!("kungfu_raft_damaged").set(if node.damage().is_some() { 1.0 } else { 0.0 });
        metrics::gauge!("kungfu_raft_voters").set(m.membership_config.membership().voter_ids().count() as f64);
        if let Some(repl) = &m.replication {
            for (id, matched) in repl.iter() {
                let lag = last.saturating_sub(index(matched));
                metrics::gauge!("kungfu_raft_follower_lag_entries", "node" => id.to_string()).set(lag as f64);
            }
        }
        metrics::counter!("kungfu_raft_rpc_timeouts_total").absolute(node.rpc_timeouts());
        for (peer, failures) in node.rpc_failures() {
            metrics::counter!("kungfu_raft_rpc_failures_total", "peer" => peer.to_string()).absolute(failures);
        }
        write_path(node.write_path());
        store_memory(&node);
        for took in node.log.take_sync_latencies() {
            metrics::histogram!("kungfu_raft_log_sync_seconds").record(took.as_secs_f64());
        }
        metrics::gauge!("kungfu_ready").set(if ready() { 1.0 } else { 0.0 });
        metrics::gauge!("kungfu_live_actors").set(actors.live() as f64);
        metrics::gauge!("kungfu_actor_queued_actions").set(actors.queued() as f64);
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stop.changed() => return,
        }
    }
}

/// The memory of both stores by part (issue #36: which part of a node's RSS grows with the data).
fn store_memory(node: &RaftNode) {
    for (store, memory) in [("state", node.state.memory()), ("log", node.log.memory())] {
        let Ok(m) = memory else { continue };
        for (part, bytes) in [
            ("memtables", m.memtables),
            ("table_readers", m.table_readers),
            ("block_cache", m.block_cache),
            ("block_cache_pinned", m.block_cache_pinned),
        ] {
            metrics::gauge!("kungfu_store_memory_bytes", "store" => store, "part" => part).set(bytes as f64);
        }
    }
}

/// The write path's batching counters (issue #30): entries per append, per AppendEntries and per
/// apply batch are the ratio of two of them; fsyncs per second is the rate of the syncs.
const WRITE_PATH: [(&str, &str); 9] = [
    ("kungfu_raft_log_appends_total", "Appends to this node's raft log."),
    ("kungfu_raft_log_appended_entries_total", "Entries appended to this node's raft log."),
    ("kungfu_raft_append_rpcs_total", "AppendEntries requests with entries that this node sent."),
    ("kungfu_raft_replicated_entries_total", "Entries this node sent in AppendEntries requests."),
    ("kungfu_raft_apply_batches_total", "Batches of committed entries applied to this node's state."),
    ("kungfu_raft_applied_entries_total", "Committed entries applied to this node's state."),
    ("kungfu_raft_applied_commands_total", "Protocol commands applied to this node's state."),
    ("kungfu_raft_snapshots_built_total", "Snapshots this node built."),
    ("kungfu_raft_log_syncs_total", "WAL syncs (fsyncs) of this node's raft log."),
];

fn write_path_describe() {
    for (name, help) in WRITE_PATH {
        describe_counter!(name, help);
    }
    // A gauge: the `metrics` counters count in integers, and Prometheus wants seconds.
    describe_gauge!(
        "kungfu_raft_snapshot_build_seconds",
        Unit::Seconds,
        "Wall time this node spent building snapshots since it started, all builds together."
    );
}

fn write_path(c: kungfu_raft::stats::WritePathCounts) {
    let values = [
        c.appends,
        c.appended_entries,
        c.append_rpcs,
        c.replicated_entries,
        c.apply_batches,
        c.applied_entries,
        c.applied_commands,
        c.snapshots_built,
        c.log_syncs,
    ];
    for ((name, _), value) in WRITE_PATH.iter().zip(values) {
        metrics::counter!(*name).absolute(value);
    }
    metrics::gauge!("kungfu_raft_snapshot_build_seconds").set(c.snapshot_build_micros as f64 / 1e6);
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_data_directory_size_counts_every_file_below_it_by_part() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("IDENTITY"), vec![0u8; 1000]).expect("write");
        for (part, bytes) in [("log", 10), ("state", 20), ("state.incoming", 5), ("snapshots", 40)] {
            std::fs::create_dir_all(dir.path().join(part).join("sub")).expect("mkdir");
            std::fs::write(dir.path().join(part).join("sub/f"), vec![0u8; bytes]).expect("write");
        }
        let usage = kungfu_storage::DataDir::new(dir.path()).usage();
        assert_eq!((usage.log, usage.state, usage.snapshots, usage.other), (10, 25, 40, 1000));
        assert_eq!(usage.total(), 1075);
        assert_eq!(kungfu_storage::DataDir::new(dir.path().join("missing")).usage().total(), 0);
    }
}
