//! Starting and stopping a node: opens the data directory, starts raft and its internal service,
//! bootstraps the cluster when told to, serves the public API with health and reflection and, when
//! `http_listen` is set, MCP on the HTTP listener (http.rs), runs the deadline scheduler, and shuts
//! everything down cleanly.
//!
//! A node whose raft core stops (a storage error, a panic in openraft: issue #36) fences itself at
//! once: it is seen on the raft metrics channel (`kungfu_raft::fatal`), logged once at ERROR, every
//! call but the operator service is refused and health says NOT_SERVING with the reason
//! (`Backend::readiness`) for [`FENCE_HOLD`], so probes see why; then the node shuts down as on
//! SIGTERM and `run` returns an error, so `kungfud` exits 1 and its supervisor (the shipped
//! systemd unit: `Restart=on-failure`) restarts it.

use crate::backend::Backend;
use crate::config::Config;
use kungfu_raft::{Node, NodeConfig, RaftNode, RaftTuning};
use kungfu_storage::OpenMode;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// How long a stopping node waits for its clients' connections to close before dropping them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// How long a node whose raft core stopped keeps answering health checks and probes (NOT_SERVING,
/// `/readyz` 503 with the reason) before it shuts down: five of gRPC health's 200 ms refreshes,
/// so a load balancer or an operator polling it sees why it goes.
pub const FENCE_HOLD: Duration = Duration::from_secs(1);
/// Test-only fault injection (issue #36), `sync-fails-after:N` or `append-panics-after:N`: after
/// N more, the raft log's syncs fail (a storage error, which openraft treats as fatal) or its
/// appends panic on the raft core's task (a dead core whose metrics still show its last role).
/// `tests/fence.rs` needs real raft core failures in a real process; nothing else sets it.
pub const FAULT_RAFT_LOG: &str = "KUNGFU_FAULT_RAFT_LOG";

/// Arms the fault `spec` (see [`FAULT_RAFT_LOG`]) on the raft log of `node`.
fn inject_fault(node: &RaftNode, spec: &str) -> anyhow::Result<()> {
    let bad = || {
        anyhow::anyhow!(
            "{FAULT_RAFT_LOG}={spec:?}: expected sync-fails-after:N or append-panics-after:N; unset it (a test-only \
             fault injection)"
        )
    };
    let (kind, n) = spec.trim().split_once(':').ok_or_else(bad)?;
    let n: u64 = n.parse().map_err(|_| bad())?;
    match kind {
        "sync-fails-after" => node.log.fail_syncs_after(n),
        "append-panics-after" => node.log.panic_appends_after(n),
        _ => return Err(bad()),
    }
    tracing::warn!("fault injection ({FAULT_RAFT_LOG}={spec}): the raft log's {kind} {n} more; for tests only");
    Ok(())
}

/// The canary `trust-damaged-log`: deletes the raft log's acknowledged mark before the log opens,
/// so a log that lost acknowledged entries is trusted as whole (issue #33's check skipped).
fn forget_acknowledged_mark(data_dir: &std::path::Path) {
    let mark = kungfu_storage::MarkFile::path_in(&data_dir.join("log"));
    if std::fs::remove_file(&mark).is_ok() {
        tracing::warn!(file = %mark.display(), "CANARY trust-damaged-log: deleted the acknowledged mark");
    }
}

/// Runs a node until `shutdown` resolves.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    config.validate()?;
    let config = Arc::new(config);
    let mut nc =
        NodeConfig::new(config.node_id, config.cluster_id.clone(), config.data_dir.clone(), config.raft_listen);
    nc.advertise = Some(config.raft_advertise());
    nc.api_advertise = config.api_advertise();
    nc.open_mode = OpenMode::CreateIfEmpty;
    nc.accept_data_loss = config.accept_data_loss;
    // Replicas must decide with identical limits: every node starts from the built-in defaults
    // and the configured ones are replicated through the log at bootstrap (below).
    nc.limits = kungfu_core::Limits::default();
    nc.raft = RaftTuning {
        heartbeat_interval: Duration::from_millis(config.raft.heartbeat_ms),
        election_timeout_min: Duration::from_millis(config.raft.election_timeout_min_ms),
        election_timeout_max: Duration::from_millis(config.raft.election_timeout_max_ms),
        snapshot_after_logs: config.raft.snapshot_after_logs,
        keep_logs_after_snapshot: config.raft.keep_logs_after_snapshot,
        ..RaftTuning::default()
    };
    nc.net.max_append_bytes = config.raft.max_append_bytes;
    nc.net.dial = config.raft.dial.iter().filter_map(|(id, addr)| Some((id.parse().ok()?, addr.clone()))).collect();
    if crate::canary::armed("trust-damaged-log") {
        forget_acknowledged_mark(&config.data_dir);
    }
    let node = Arc::new(RaftNode::start(nc).await?);
    tracing::info!(node = config.node_id, raft = %node.addr, "raft started");
    if let Ok(spec) = std::env::var(FAULT_RAFT_LOG) {
        inject_fault(&node, &spec)?;
    }

    // Bootstrap: only a pristine node with the lowest id among the initial voters initializes.
    let voters = config.voters();
    let lowest = voters.iter().map(|p| p.id).min().unwrap_or(config.node_id);
    if config.bootstrap && lowest == config.node_id && !node.raft.is_initialized().await? {
        let members = voters.iter().map(|p| (p.id, Node { raft: p.raft.clone(), api: p.api.clone() })).collect();
        node.initialize(members).await.map_err(|e| anyhow::anyhow!("initialize: {e}"))?;
        tracing::info!(voters = voters.len(), "cluster initialized");
        if config.limits != kungfu_core::Limits::default() {
            replicate_limits(&node, &config.limits).await?;
        }
    }

    let backend = Arc::new(Backend::new(node.clone(), config.clone()));

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let scheduler = tokio::spawn(crate::deadlines::run(backend.clone(), stop_rx.clone()));
    // Metrics are on by default: the HTTP listener serves `/metrics`; `metrics_listen` adds a
    // listener of their own (issue #16).
    crate::metrics::handle()?;
    let metrics_stop = tokio_util::sync::CancellationToken::new();
    let metrics_alone = match config.metrics_listen {
        Some(addr) => {
            let served = crate::metrics::serve_alone(addr, config.data_dir.clone(), metrics_stop.clone()).await?;
            tracing::info!(metrics = %addr, "serving Prometheus metrics at http://{addr}/metrics");
            Some(served)
        }
        None => None,
    };
    let ready = {
        let b = backend.clone();
        move || b.readiness().is_ok()
    };
    let gauges = tokio::spawn(crate::metrics::publish_gauges(
        backend.node.clone(),
        backend.actors.clone(),
        ready,
        stop_rx.clone(),
    ));
    // Wake webhooks (issue #35): the leader delivers turn changes to the agents' targets.
    let deliverer = tokio::spawn(crate::wake::run(backend.clone(), stop_rx.clone()));
    let sweeper = tokio::spawn(backend.actors.clone().run_sweeper(stop_rx));

    // Open watch streams would hold the door's graceful shutdown forever; they end when it begins.
    // The HTTP listener's open MCP streams likewise end on `http_stop`, cancelled at the same time.
    let watches = crate::watch::Watches::new(backend.clone());
    let http_stop = tokio_util::sync::CancellationToken::new();
    let (began_tx, began_rx) = tokio::sync::oneshot::channel::<()>();
    // Set when the node fenced itself: why its raft core stopped.
    let (fenced_tx, mut fenced_rx) = tokio::sync::oneshot::channel::<String>();
    let shutdown = {
        let watches = watches.clone();
        let http_stop = http_stop.clone();
        let raft = node.raft.clone();
        let id = config.node_id;
        async move {
            // The core is watched only until shutdown begins: the clean stop of raft below, after
            // the doors close, is not a failure.
            let fenced = tokio::select! {
                () = shutdown => None,
                reason = kungfu_raft::fatal::core_stopped(&raft) => Some(reason),
            };
            if let Some(reason) = fenced {
                // Once: this task ends after it. Readiness, the door and the deadline scheduler read
                // the same stop from the metrics channel and say nothing more.
                tracing::error!(
                    "the raft core of node {id} stopped ({reason}): this node is fenced (health NOT_SERVING, calls \
                     refused) and exits in {FENCE_HOLD:?} for its supervisor to restart it; if it stops again, check \
                     the disk of the data directory (docs/operations.md, \"A node that stops its raft\")"
                );
                let _ = fenced_tx.send(reason);
                tokio::time::sleep(FENCE_HOLD).await;
            }
            watches.stop();
            http_stop.cancel();
            let _ = began_tx.send(());
        }
    };
    let listener = tokio::net::TcpListener::bind(config.api_listen).await?;
    let api = listener.local_addr()?;
    // One service stack for the API listener and the node's own HTTP doors (grpc::ApiStack).
    let stack = crate::grpc::ApiStack::new(&backend, watches.clone())?;
    // The MCP door on the HTTP listener, a client of this node's own API in process (http.rs). Bound before
    // the start-up line, so a port in use stops the start naming the setting.
    let http = match config.http_listen {
        Some(addr) => {
            let http_listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| anyhow::anyhow!("configuration: http_listen: cannot listen on {addr}: {e}"))?;
            let url = crate::http::mcp_url(&config, http_listener.local_addr()?);
            let http_at = http_listener.local_addr()?;
            let console = if config.console.enabled {
                format!("; console at {}{}", url.trim_end_matches(kungfu_mcp::http::PATH), crate::console::PATH)
            } else {
                String::new()
            };
            tracing::info!(
                api = %api,
                mcp = %url,
                "serving the public API at {api}; MCP at {url}; metrics at http://{http_at}/metrics, probes at /healthz and /readyz{console}"
            );
            let (config, stop, b, door_api) = (config.clone(), http_stop.clone(), backend.clone(), stack.in_process());
            Some(tokio::spawn(async move { crate::http::serve(&config, door_api, b, http_listener, stop).await }))
        }
        None => {
            tracing::info!(api = %api, "serving the public API at {api}; no MCP (http_listen is not set)");
            None
        }
    };
    let serve = crate::grpc::serve(backend.clone(), stack, listener, shutdown);
    // Graceful shutdown waits for open connections to finish, and an idle client keeps its
    // connection open: after SHUTDOWN_GRACE the remaining connections are dropped, so a node always
    // stops within a bound.
    tokio::pin!(serve);
    tokio::select! {
        served = &mut serve => served?,
        _ = async {
            if began_rx.await.is_ok() {
                tokio::time::sleep(SHUTDOWN_GRACE).await;
            } else {
                std::future::pending::<()>().await;
            }
        } => tracing::warn!(grace = ?SHUTDOWN_GRACE, "clients still connected at shutdown: closing their connections"),
    }

    tracing::info!("shutting down");
    http_stop.cancel();
    if let Some(mut http) = http {
        // Connections still open after the grace (a client holding an idle stream) are dropped.
        match tokio::time::timeout(SHUTDOWN_GRACE, &mut http).await {
            Ok(Ok(Err(e))) => tracing::error!(error = %e, "the HTTP listener (MCP) failed"),
            Ok(_) => {}
            Err(_) => {
                tracing::warn!(grace = ?SHUTDOWN_GRACE, "MCP clients still connected at shutdown: closing their connections");
                http.abort();
            }
        }
    }
    metrics_stop.cancel();
    if let Some(served) = metrics_alone {
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, served).await;
    }
    let _ = stop_tx.send(true);
    let _ = scheduler.await;
    let _ = gauges.await;
    let _ = sweeper.await;
    let _ = deliverer.await;
    drop(backend);
    match Arc::try_unwrap(node) {
        Ok(node) => node.shutdown().await,
        Err(node) => {
            let _ = node.raft.shutdown().await;
        }
    }
    match fenced_rx.try_recv() {
        Ok(reason) => Err(anyhow::anyhow!(
            "the raft core of node {} stopped ({reason}); the node fenced itself and exits for its supervisor to \
             restart it",
            config.node_id
        )),
        Err(_) => Ok(()),
    }
}

/// Replicates the configured limits once this node leads the new cluster (bounded wait).
async fn replicate_limits(node: &RaftNode, limits: &kungfu_core::Limits) -> anyhow::Result<()> {
    let start = std::time::Instant::now();
    loop {
        match node.set_limits(limits.clone()).await {
            Ok(_) => {
                tracing::info!("configured limits replicated");
                return Ok(());
            }
            Err(kungfu_raft::WriteError::NotLeader { .. }) if start.elapsed() < Duration::from_secs(30) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(anyhow::anyhow!("replicating the configured limits: {e}")),
        }
    }
}
