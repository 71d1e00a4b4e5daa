//! One replica: its data directory, its raft, its internal raft service on a TCP listener. The
//! server crate builds the public API on top; tests build clusters of these on loopback.

use crate::network::{NetConfig, Network};
use crate::pb;
use crate::service::RaftService;
use crate::state_machine::{ApplyGate, LAST_APPLIED, Raft, StateMachine};
use crate::types::{LogId, Node, NodeId, Payload, Request, Response};
use kungfu_core::{Command, Limits};
use kungfu_storage::{DataDir, Identity, LogStore, OpenMode, SHARD, StateStore};
use openraft::async_runtime::WatchReceiver;
use openraft::error::{ClientWriteError, RaftError};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// How a node is started.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub node_id: NodeId,
    pub cluster_id: String,
    pub data_dir: PathBuf,
    /// Where the raft service listens (port 0 picks a free port).
    pub listen: SocketAddr,
    /// How other nodes reach this one; defaults to the bound address.
    pub advertise: Option<String>,
    /// Where this node serves the public API, published in the membership (empty for none).
    pub api_advertise: String,
    pub open_mode: OpenMode,
    pub raft: RaftTuning,
    pub net: NetConfig,
    /// Limits the state machine applies until the log sets others (`Request::SetLimits`). Every
    /// replica of a cluster must start with the same value, so nodes pass `Limits::default()` and
    /// replicate anything else through the log.
    pub limits: Limits,
    /// Complete snapshots kept on disk.
    pub keep_snapshots: usize,
    /// Events the fact feed keeps for slow subscribers (see [`crate::feed`]).
    pub feed_capacity: usize,
    /// The operator accepts that this node's log lost entries it acknowledged (issue #33): a
    /// damaged log's mark is rewritten to its end at start, and the node votes again at once.
    pub accept_data_loss: bool,
    /// The node's clock (the system's; a manual one in tests).
    pub clock: crate::clock::Clock,
}

/// The openraft settings we expose.
#[derive(Clone, Debug)]
pub struct RaftTuning {
    pub heartbeat_interval: Duration,
    pub election_timeout_min: Duration,
    pub election_timeout_max: Duration,
    /// Build a snapshot after this many applied entries since the last one. A snapshot is a
    /// checkpoint (a flush and hard links, no copy), but its flush and the purge behind it are
    /// still work on the log's disk: etcd's default (`--snapshot-count`) is the default here.
    pub snapshot_after_logs: u64,
    /// Entries kept in the log behind a snapshot, so a follower slightly behind is sent entries,
    /// not the whole state (etcd keeps 5,000: `SnapshotCatchUpEntries`).
    pub keep_logs_after_snapshot: u64,
    /// Largest number of entries in one AppendEntries.
    pub max_payload_entries: u64,
}

impl Default for RaftTuning {
    fn default() -> RaftTuning {
        RaftTuning {
            heartbeat_interval: Duration::from_millis(100),
            election_timeout_min: Duration::from_millis(300),
            election_timeout_max: Duration::from_millis(600),
            snapshot_after_logs: 100_000,
            keep_logs_after_snapshot: 5_000,
            max_payload_entries: 300,
        }
    }
}

impl NodeConfig {
    pub fn new(
        node_id: NodeId,
        cluster_id: impl Into<String>,
        data_dir: impl Into<PathBuf>,
        listen: SocketAddr,
    ) -> NodeConfig {
        NodeConfig {
            node_id,
            cluster_id: cluster_id.into(),
            data_dir: data_dir.into(),
            listen,
            advertise: None,
            api_advertise: String::new(),
            open_mode: OpenMode::CreateIfEmpty,
            raft: RaftTuning::default(),
            net: NetConfig::default(),
            limits: Limits::default(),
            keep_snapshots: 2,
            feed_capacity: crate::feed::DEFAULT_FEED_CAPACITY,
            accept_data_loss: false,
            clock: crate::clock::Clock::system(),
        }
    }
}

/// A command handed to raft by [`RaftNode::propose_in_order`], its outcome still to come.
pub struct Proposed {
    rx: tokio::sync::oneshot::Receiver<openraft::raft::ClientWriteResult<crate::types::TypeConfig>>,
    me: NodeId,
    /// The `raft.propose` span, from the proposal until its outcome (disabled unless traced).
    span: tracing::Span,
}

impl std::fmt::Debug for Proposed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Proposed")
    }
}

impl Proposed {
    /// Waits, at most `timeout`, until the command is committed and applied here. A command whose
    /// outcome does not arrive in time, or whose leader stepped down, may still commit: it is
    /// reported as indeterminate, never as failed.
    pub async fn outcome(self, timeout: Duration) -> Result<(Response, LogId), WriteError> {
        let span = self.span;
        match tracing::Instrument::instrument(tokio::time::timeout(timeout, self.rx), span.clone()).await {
            Ok(Ok(Ok(r))) => {
                span.record("log_index", r.log_id.index);
                Ok((r.data, r.log_id))
            }
            Ok(Ok(Err(e))) => Err(classify(self.me, RaftError::APIError(e))),
            Ok(Err(_)) => Err(WriteError::Indeterminate("raft dropped the proposal (shutting down?)".into())),
            Err(_) => Err(WriteError::Indeterminate(format!("no outcome within {timeout:?}"))),
        }
    }
}

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("data directory: {0}")]
    Storage(#[from] kungfu_storage::Error),
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: SocketAddr, source: std::io::Error },
    #[error("invalid raft configuration: {0}")]
    Config(String),
    #[error("raft failed to start: {0}")]
    Raft(String),
}

/// Proof that this node passed the leadership gate ([`RaftNode::lead`]): it led in `term` with
/// its state caught up, every entry of earlier terms applied (L5). Only `lead` makes one; what
/// decides from the state after the gate checks that it still holds ([`RaftNode::still_leads`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lead {
    term: u64,
}

impl Lead {
    /// The term this node led in when it passed the gate.
    pub fn term(&self) -> u64 {
        self.term
    }
}

/// Why a write was not acknowledged. Only `NotLeader` and `NotCaughtUp` are definite: an
/// indeterminate write may or may not have been applied, so callers retry with the same
/// idempotency key and get the original receipt if it was (L3).
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// `leader` is the leader raft named, never this node.
    #[error("not the leader; the leader is {leader:?}")]
    NotLeader { leader: Option<(NodeId, Node)> },
    /// This node leads but its state does not yet hold the entries of earlier terms (see
    /// [`RaftNode::leads_caught_up`]); nothing was proposed.
    #[error("{0}")]
    NotCaughtUp(String),
    #[error("outcome unknown (leader changed or the node stopped while the write was in flight): {0}")]
    Indeterminate(String),
    #[error("the raft of this node stopped: {0}")]
    Fatal(String),
}

impl WriteError {
    /// Whether the write certainly had no effect.
    pub fn is_definite(&self) -> bool {
        matches!(self, WriteError::NotLeader { .. } | WriteError::NotCaughtUp(_))
    }
}

/// One running replica.
pub struct RaftNode {
    pub id: NodeId,
    pub raft: Raft,
    pub state: Arc<StateStore>,
    /// The raft log's store, for inspection and fault injection in tests
    /// ([`LogStore::set_sync_delay`]).
    pub log: LogStore,
    /// What this node's log acknowledged, and whether it still holds it (issue #33).
    pub mark: Arc<crate::mark::AckMark>,
    pub addr: SocketAddr,
    pub advertise: String,
    pub api_advertise: String,
    /// Fault injection for tests: holds back this node's apply (see [`ApplyGate`]).
    pub apply_gate: ApplyGate,
    /// What this node applies, as it applies it (see [`crate::feed`]).
    pub feed: crate::feed::Feed,
    /// The node's clock: the one place wall time becomes a `Timestamp`.
    pub clock: crate::clock::Clock,
    /// The leader's last stamp, held while a stamped command enters the log (see
    /// [`RaftNode::propose_stamped`]).
    last_stamp: tokio::sync::Mutex<kungfu_types::Timestamp>,
    applied_time: crate::state_machine::AppliedTime,
    applied_limits: crate::state_machine::AppliedLimits,
    rpc_timeouts: Arc<std::sync::atomic::AtomicU64>,
    peer_health: crate::network::PeerFailures,
    /// Trace contexts of in-flight commands, shared with the network, service and state machine.
    traces: crate::trace::Traces,
    /// How the write path batches (issue #30), shared with the log, network and state machine.
    stats: crate::stats::Stats,
    server: tokio::task::JoinHandle<()>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl std::fmt::Debug for RaftNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RaftNode({} at {})", self.id, self.addr)
    }
}

/// What a node without a leader says of its cluster: no quorum when it reaches fewer than a
/// majority of the voters, else an election under way.
pub fn no_quorum_words(reached: usize, voters: usize) -> String {
    if reached * 2 <= voters {
        format!("no quorum: {reached} of {voters} voters reachable from this node, leader unknown")
    } else {
        format!("{reached} of {voters} voters reachable from this node, leader unknown: an election is under way")
    }
}

/// How a raft port answers a call to any other service (issue #16): a client pointed at it by
/// mistake hears where the API is, instead of an empty `UNIMPLEMENTED`. The SDK recognizes the
/// prefix ([`kungfu_types::RAFT_PORT_ANSWER`]) and names the API address in its error.
fn raft_routes(
    server: pb::raft_server::RaftServer<RaftService>,
    node_id: NodeId,
    api: String,
) -> tonic::service::Routes {
    let mut routes = tonic::service::Routes::new(server);
    let message = match Some(api).filter(|a| !a.is_empty()) {
        Some(api) => format!("{} of node {node_id}; the public API is at {api}", kungfu_types::RAFT_PORT_ANSWER),
        None => format!("{} of node {node_id}; use the node's api_listen address", kungfu_types::RAFT_PORT_ANSWER),
    };
    let router = std::mem::take(routes.axum_router_mut());
    *routes.axum_router_mut() = router.fallback(move || {
        let message = message.clone();
        async move { tonic::Status::unimplemented(message).into_http::<tonic::body::Body>() }
    });
    routes
}

impl RaftNode {
    /// Opens the data directory and starts raft and the raft service.
    pub async fn start(cfg: NodeConfig) -> Result<RaftNode, StartError> {
        let identity = Identity { cluster_id: cfg.cluster_id.clone(), node_id: cfg.node_id };
        let dir = DataDir::new(&cfg.data_dir);
        let (mode, keep) = (cfg.open_mode, cfg.keep_snapshots);
        let stores = tokio::task::spawn_blocking(move || dir.open(&identity, mode, keep))
            .await
            .map_err(|e| StartError::Raft(e.to_string()))??;
        let state = Arc::new(stores.state);
        let mark = Arc::new(open_mark(&stores.log, cfg.accept_data_loss)?);
        // Issue #33: a damaged node neither campaigns nor takes back a leadership it held before
        // the damage; it votes for no one (`RaftService`) until its log reaches its mark.
        let damaged = mark.damage().is_some();
        let listener =
            TcpListener::bind(cfg.listen).await.map_err(|source| StartError::Listen { addr: cfg.listen, source })?;
        let addr = listener.local_addr().map_err(|source| StartError::Listen { addr: cfg.listen, source })?;
        let advertise = cfg.advertise.clone().unwrap_or_else(|| addr.to_string());

        let config = openraft::Config {
            cluster_name: cfg.cluster_id.clone(),
            heartbeat_interval: cfg.raft.heartbeat_interval.as_millis() as u64,
            election_timeout_min: cfg.raft.election_timeout_min.as_millis() as u64,
            election_timeout_max: cfg.raft.election_timeout_max.as_millis() as u64,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(cfg.raft.snapshot_after_logs),
            max_in_snapshot_log_to_keep: cfg.raft.keep_logs_after_snapshot,
            max_payload_entries: cfg.raft.max_payload_entries,
            snapshot_max_chunk_size: cfg.net.snapshot_chunk_bytes as u64,
            enable_elect: !damaged,
            enable_leader_restore: damaged.then_some(false),
            // Issue #33: a follower whose disk lost the end of its log answers the leader that
            // replicated to it with a conflict below what that leader knew it held. openraft
            // refuses such a reversion unless allowed (a debug build's leader panics in its
            // replication stream, update.rs:104; a release build's keeps the stale matching index
            // and the follower never catches up). Allowed, the leader starts its replication to
            // that follower over and keeps its commit index (a value a quorum accepted is never
            // withdrawn). Safe here because of the acknowledged mark: the reverted node is damaged
            // and votes for nobody until its log holds its mark again.
            allow_log_reversion: Some(true),
            ..Default::default()
        }
        .validate()
        .map_err(|e| StartError::Config(e.to_string()))?;

        let log_store = stores.log.clone();
        let stats = crate::stats::Stats::default();
        let log =
            crate::log::RaftLog::marked(stores.log, mark.clone())?.applied_to(state.clone()).with_stats(stats.clone());
        let feed = crate::feed::Feed::new(cfg.feed_capacity);
        let mut sm = StateMachine::with_feed(state.clone(), stores.snapshots.clone(), cfg.limits.clone(), feed.clone())
            .map_err(|e| StartError::Raft(format!("cannot read the applied state: {e}")))?;
        let traces = crate::trace::Traces::default();
        sm.set_traces(traces.clone());
        sm.set_stats(stats.clone());
        let apply_gate = sm.gate().clone();
        let applied_time = sm.applied_time().clone();
        let applied_limits = sm.applied_limits().clone();
        let network =
            Network::new(cfg.cluster_id.clone(), cfg.net.clone()).with_traces(traces.clone()).with_stats(stats.clone());
        let rpc_timeouts = network.timeouts();
        let peer_health = network.peer_failures();
        let raft = Raft::new(cfg.node_id, Arc::new(config), network, log, sm)
            .await
            .map_err(|e| StartError::Raft(e.to_string()))?;

        let service =
            RaftService::new(raft.clone(), cfg.cluster_id.clone(), stores.snapshots, cfg.net.max_snapshot_bytes)
                .with_traces(traces.clone())
                .with_mark(mark.clone());
        if damaged {
            tokio::spawn(campaign_once_whole(raft.clone(), mark.subscribe()));
        }
        let server = pb::raft_server::RaftServer::new(service)
            .max_decoding_message_size(cfg.net.max_message_bytes)
            .max_encoding_message_size(cfg.net.max_message_bytes);
        let (cfg_node_id, api_advertise_for_fallback) = (cfg.node_id, cfg.api_advertise.clone());
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        // TCP_NODELAY on every accepted socket: tonic ignores its own setting on this path (see
        // `crate::incoming`).
        let incoming = crate::incoming::guarded_incoming(listener, crate::incoming::ConnectionBounds::default());
        let handle = tokio::spawn(async move {
            let result = tonic::transport::Server::builder()
                .initial_stream_window_size(crate::network::STREAM_WINDOW_BYTES)
                .initial_connection_window_size(crate::network::CONNECTION_WINDOW_BYTES)
                // Peers cancel every request whose deadline passes; after a pause (a stopped
                // process, a long GC-like stall) hundreds of cancelled heartbeats arrive at once,
                // and h2's default (20) would close the connection for it.
                .http2_max_pending_accept_reset_streams(Some(4096))
                .add_routes(raft_routes(server, cfg_node_id, api_advertise_for_fallback))
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stop_rx.await;
                })
                .await;
            if let Err(e) = result {
                tracing::error!(error = %e, "raft service stopped with an error");
            }
        });
        Ok(RaftNode {
            id: cfg.node_id,
            raft,
            state,
            log: log_store,
            mark,
            rpc_timeouts,
            peer_health,
            traces,
            stats,
            addr,
            advertise,
            api_advertise: cfg.api_advertise.clone(),
            apply_gate,
            feed,
            clock: cfg.clock.clone(),
            last_stamp: tokio::sync::Mutex::new(kungfu_types::Timestamp::ZERO),
            applied_time,
            applied_limits,
            server: handle,
            stop: Some(stop_tx),
        })
    }

    /// This node as a member description.
    pub fn node(&self) -> Node {
        Node { raft: self.advertise.clone(), api: self.api_advertise.clone() }
    }

    /// Initializes a new cluster with these voters. Call on exactly one pristine node.
    pub async fn initialize(&self, members: BTreeMap<NodeId, Node>) -> Result<(), String> {
        self.raft.initialize(members).await.map_err(|e| e.to_string())
    }

    /// Proposes a command and waits until it is committed and applied here.
    pub async fn write(&self, cmd: Command) -> Result<(Response, LogId), WriteError> {
        self.propose(Request::Command(cmd)).await
    }

    /// Like [`RaftNode::write`], but gives up waiting after `timeout`. A write that times out may
    /// still commit: it is reported as indeterminate, never as failed.
    pub async fn write_within(&self, cmd: Command, timeout: Duration) -> Result<(Response, LogId), WriteError> {
        self.propose_in_order(cmd).await?.outcome(timeout).await
    }

    /// Hands a command to raft now and returns without waiting for it to commit: proposals made
    /// one after another by one caller enter the log in that order (they travel one queue to the
    /// raft core), so a caller can keep several in flight and still know their order. Await
    /// [`Proposed::outcome`] for the answer.
    pub async fn propose_in_order(&self, cmd: Command) -> Result<Proposed, WriteError> {
        self.enqueue(Request::Command(cmd)).await
    }

    /// Puts one request into raft's queue and returns the wait for its outcome.
    async fn enqueue(&self, req: Request) -> Result<Proposed, WriteError> {
        let (responder, rx) = openraft::impls::ProgressResponder::complete_only();
        self.raft
            .client_write_ff(Payload { group: self.group(), request: req }, Some(responder))
            .await
            .map_err(|f| WriteError::Fatal(f.to_string()))?;
        Ok(Proposed { rx, me: self.id, span: tracing::Span::none() })
    }

    /// Stamps `cmd` with the leader's clock and hands it to raft like
    /// [`RaftNode::propose_in_order`]. The stamp is taken and the command enters raft's queue under
    /// one lock, so command times rise in log order across every caller of this node: a command
    /// stamped before it waited behind another object's proposal would otherwise record a later
    /// fact with an earlier time (L5: a legal serial order has one clock).
    pub async fn propose_stamped(&self, mut cmd: Command) -> Result<Proposed, WriteError> {
        // The proposal's span, a child of the caller's (the `action` span); traced, it is
        // remembered by the command's stamp so replication and apply join its trace (trace.rs).
        let span = tracing::debug_span!(
            "raft.propose",
            node = self.id,
            kind = cmd.action.kind().as_str(),
            log_index = tracing::field::Empty,
        );
        let mut clock = self.last_stamp.lock().await;
        cmd.ts = self.next_stamp(&clock);
        *clock = cmd.ts;
        if let Some(cx) = crate::trace::span_context(&span) {
            self.traces.record(cmd.ts.0, cx);
        }
        let mut proposed = self.propose_in_order(cmd).await?;
        proposed.span = span;
        Ok(proposed)
    }

    /// Stamps several commands with one time of the leader's clock (see
    /// [`RaftNode::propose_stamped`]), shifted by `shift` (fault injection only; the identity
    /// otherwise), and proposes them as one log entry. Await [`Proposed::outcome`] for a
    /// [`Response::Batch`] of one answer per command, in order.
    pub async fn propose_many_stamped(
        &self,
        mut cmds: Vec<Command>,
        shift: impl FnOnce(kungfu_types::Timestamp) -> kungfu_types::Timestamp,
    ) -> Result<Proposed, WriteError> {
        let mut clock = self.last_stamp.lock().await;
        let ts = self.next_stamp(&clock);
        *clock = ts;
        let shifted = shift(ts);
        for cmd in &mut cmds {
            cmd.ts = shifted;
        }
        self.enqueue(Request::Commands(cmds)).await
    }

    /// The time the next stamp would have now: wall time, but always after the last stamp of this
    /// node and the last command applied here (which, on a leader that has caught up, includes
    /// every command an earlier leader stamped). Advances nothing: a pre-check decides at this
    /// time, the proposal is stamped again.
    pub fn provisional_stamp(&self) -> kungfu_types::Timestamp {
        let last = self.last_stamp.try_lock().map(|c| *c).unwrap_or(kungfu_types::Timestamp::ZERO);
        self.next_stamp(&last)
    }

    fn next_stamp(&self, last: &kungfu_types::Timestamp) -> kungfu_types::Timestamp {
        let wall = self.clock.now();
        kungfu_types::Timestamp(wall.0.max(last.0.max(self.applied_time.get().0) + 1))
    }

    /// Replicates new limits.
    pub async fn set_limits(&self, limits: Limits) -> Result<LogId, WriteError> {
        self.propose(Request::SetLimits(limits)).await.map(|(_, l)| l)
    }

    async fn propose(&self, req: Request) -> Result<(Response, LogId), WriteError> {
        match self.raft.client_write(Payload { group: self.group(), request: req }).await {
            Ok(r) => Ok((r.data, r.log_id)),
            Err(e) => Err(classify(self.id, e)),
        }
    }

    /// Adds a learner and waits until it has caught up.
    pub async fn add_learner(&self, id: NodeId, node: Node) -> Result<(), WriteError> {
        self.raft.add_learner(id, node, true).await.map(|_| ()).map_err(|e| classify(self.id, e))
    }

    /// Sets the voters (joint consensus under the hood); nodes not named stay as learners only if
    /// `retain`.
    pub async fn change_membership(&self, voters: BTreeSet<NodeId>, retain: bool) -> Result<(), WriteError> {
        self.raft.change_membership(voters, retain).await.map(|_| ()).map_err(|e| classify(self.id, e))
    }

    /// Asks the cluster to hand leadership to `to` (for rolling restarts). Returns once the request
    /// is sent; watch [`RaftNode::leader`] for the outcome.
    pub async fn transfer_leader(&self, to: NodeId) -> Result<(), WriteError> {
        self.raft.trigger().transfer_leader(to).await.map_err(|e| WriteError::Fatal(e.to_string()))
    }

    /// Forces a snapshot now (it also runs by the `snapshot_after_logs` policy).
    pub async fn trigger_snapshot(&self) -> Result<(), WriteError> {
        self.raft.trigger().snapshot().await.map_err(|e| WriteError::Fatal(e.to_string()))
    }

    /// Waits until this node's state reflects every write committed before the call (a read index
    /// round with a quorum), so a read after it is linearizable (DESIGN §8).
    pub async fn linearizable(&self) -> Result<(), WriteError> {
        match self.raft.ensure_linearizable(openraft::ReadPolicy::ReadIndex).await {
            Ok(_) => Ok(()),
            Err(RaftError::APIError(openraft::error::LinearizableReadError::ForwardToLeader(f))) => {
                Err(WriteError::NotLeader { leader: elsewhere(self.id, f.leader_id.zip(f.leader_node)) })
            }
            Err(RaftError::APIError(other)) => Err(WriteError::Indeterminate(other.to_string())),
            Err(RaftError::Fatal(f)) => Err(WriteError::Fatal(f.to_string())),
        }
    }

    /// The leader when it is another node, and where to reach it: the hint a node that refuses
    /// as not-leader gives, and where a follower forwards calls. Never this node, even in the
    /// instant it becomes leader between a caller's check and this reading: a node that sent a
    /// client to itself would make it loop (issue #11).
    pub fn leader_elsewhere(&self) -> Option<(NodeId, Node)> {
        // Read under the watch guard and copy out only the node: the guard is held for no longer
        // than this expression (openraft FAQ: a held guard can stall the raft core).
        let metrics = self.raft.metrics();
        let m = metrics.borrow_watched();
        let leader = leader_in(&m).filter(|l| *l != self.id)?;
        let node = m.membership_config.membership().get_node(&leader).cloned()?;
        Some((leader, node))
    }

    /// A copy of openraft's current metrics of this node (role, term, log, membership, replication).
    pub fn metrics(&self) -> openraft::RaftMetrics<crate::types::TypeConfig> {
        self.raft.metrics().borrow_watched().clone()
    }

    /// Whether this node can serve writes and linearizable reads now (issue #16), or why not: a
    /// leader is known; when it is this node and it has peers, a quorum acknowledged it within
    /// `quorum_window` (a leader cut off from its quorum keeps its role until it hears of a newer
    /// term); and this node has applied within `max_lag` entries of what it knows is committed.
    pub fn readiness(&self, max_lag: u64, quorum_window: Duration) -> Result<(), String> {
        use openraft::Instant as _;
        // Issue #33: a node whose log lost what it acknowledged serves nothing from it until whole.
        if let Some(damage) = self.mark.damage() {
            return Err(format!("node {} is {damage}", self.id));
        }
        // One reading, no copy of the metrics (this runs every 200 ms).
        let metrics = self.raft.metrics();
        let m = metrics.borrow_watched();
        let Some(leader) = m.current_leader else {
            let term = m.current_term;
            drop(m);
            let (reached, voters) = self.reachable_voters();
            return Err(format!("no leader known in term {term}: {}", no_quorum_words(reached, voters)));
        };
        let voters = m.membership_config.membership().voter_ids().count();
        if leader == self.id && voters > 1 {
            let unacked = match &m.last_quorum_acked {
                Some(at) if at.elapsed() <= quorum_window => None,
                Some(at) => Some(format!("for {} ms", at.elapsed().as_millis())),
                None => Some("yet".to_string()),
            };
            if let Some(since) = unacked {
                let term = m.current_term;
                drop(m);
                let (reached, _) = self.reachable_voters();
                return Err(format!(
                    "this node leads term {term} but no quorum of its {voters} voters has acknowledged it {since} \
                     ({reached} of {voters} voters reachable from this node)"
                ));
            }
        }
        let applied = m.last_applied.as_ref().map(|l| l.index).unwrap_or(0);
        let committed = m.cluster_committed.as_ref().map(|l| l.index).unwrap_or(applied);
        let lag = committed.saturating_sub(applied);
        if lag > max_lag {
            return Err(format!(
                "this node has applied entry {applied}, {lag} behind the committed {committed} (more than {max_lag})"
            ));
        }
        Ok(())
    }

    /// Why this node's log is damaged (it lost entries it acknowledged, issue #33), while it is.
    pub fn damage(&self) -> Option<crate::mark::Damage> {
        self.mark.damage()
    }

    /// The term this node is in now.
    pub fn term(&self) -> u64 {
        self.raft.metrics().borrow_watched().current_term
    }

    /// The raft group this node's log orders: what its watch cursors and batches name. One
    /// group per node today (`docs/scaling.md`).
    pub fn group(&self) -> kungfu_types::GroupId {
        SHARD
    }

    /// Whether this node is the leader now: its raft state is Leader of the vote it reports.
    pub fn is_leader(&self) -> bool {
        // On every call's path: no copy of the metrics, the guard is dropped at once.
        leader_in(&self.raft.metrics().borrow_watched()) == Some(self.id)
    }

    /// Whether this node leads and its state already holds everything the cluster acknowledged
    /// before: it has applied an entry of its own term, so every entry of earlier terms (all an
    /// earlier leader may have acknowledged) is applied too. Raft elects a node for its log, not
    /// for its state: until then its state may lack acknowledged writes, and a decision taken from
    /// it (a definite rejection, a time stamp) could contradict them (L5, §9; issue #12).
    pub fn leads_caught_up(&self) -> bool {
        self.leading().is_some()
    }

    /// The proof of [`RaftNode::leads_caught_up`] now, naming the term it holds for.
    fn leading(&self) -> Option<Lead> {
        let m = self.raft.metrics();
        let m = m.borrow_watched();
        caught_up_in(&m, self.id).then_some(Lead { term: m.current_term })
    }

    /// The leadership gate of a write (L5): waits, at most `timeout`, until this node leads with
    /// its state caught up, and returns the proof, which names the term. A node that does not lead
    /// is answered `NotLeader` at once (with the leader it knows); one still applying when the
    /// time is up is answered `NotCaughtUp`. Nothing was proposed either way. Right after an
    /// election this waits for the new term's first entry to apply; afterwards it is one metrics
    /// reading.
    pub async fn lead(&self, timeout: Duration) -> Result<Lead, WriteError> {
        if let Some(lead) = self.leading() {
            return Ok(lead);
        }
        let me = self.id;
        let waited = self
            .raft
            .wait(Some(timeout))
            .metrics(|m| leader_in(m) != Some(me) || caught_up_in(m, me), "leader applies its own term")
            .await;
        match waited {
            Ok(_) => self.leading().ok_or_else(|| WriteError::NotLeader { leader: self.leader_elsewhere() }),
            Err(e) => Err(WriteError::NotCaughtUp(format!(
                "node {me} was elected but has not yet applied the entries before its term ({e}); retry shortly"
            ))),
        }
    }

    /// Whether the proof of an earlier [`RaftNode::lead`] still holds: this node leads, caught
    /// up, in the same term. A leader that lost the lead and won it again in a later term may lack
    /// that term's entries, so it must pass the gate again before it decides from its state.
    pub fn still_leads(&self, lead: Lead) -> bool {
        self.leading() == Some(lead)
    }

    /// [`RaftNode::lead`], for callers that need no proof.
    pub async fn until_caught_up(&self, timeout: Duration) -> Result<(), WriteError> {
        self.lead(timeout).await.map(|_| ())
    }

    /// The largest command time applied so far (a leader stamps later ones).
    pub fn last_ts(&self) -> kungfu_types::Timestamp {
        self.applied_time.get()
    }

    /// The limits replicated through the log, if any were (until then every replica applies the
    /// built-in defaults).
    pub fn replicated_limits(&self) -> Option<Arc<Limits>> {
        self.applied_limits.get()
    }

    /// AppendEntries and votes this node sent that ran out of their deadline since it started
    /// (see [`crate::network::replication_deadline`]).
    pub fn rpc_timeouts(&self) -> u64 {
        self.rpc_timeouts.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many of the cluster's voters this node reaches (itself included: a peer counts when it
    /// answered this node's last raft call to it), and how many voters there are: what a node
    /// without a leader says to a client (issue #16).
    pub fn reachable_voters(&self) -> (usize, usize) {
        let metrics = self.raft.metrics();
        let voters: Vec<NodeId> = metrics.borrow_watched().membership_config.membership().voter_ids().collect();
        let peers = self.peer_health.lock().unwrap_or_else(|p| p.into_inner());
        let reached = voters
            .iter()
            .filter(|id| {
                **id == self.id
                    || peers.get(id).is_some_and(|h| h.lock().unwrap_or_else(|p| p.into_inner()).answering())
            })
            .count();
        (reached, voters.len())
    }

    /// Failed raft RPCs this node sent, per peer, since it started.
    pub fn rpc_failures(&self) -> Vec<(NodeId, u64)> {
        let peers = self.peer_health.lock().unwrap_or_else(|p| p.into_inner());
        peers.iter().map(|(id, h)| (*id, h.lock().unwrap_or_else(|p| p.into_inner()).failures)).collect()
    }

    /// How this node's write path has batched since it started: appends, AppendEntries, apply
    /// batches, snapshot builds and the log's fsyncs (issue #30).
    pub fn write_path(&self) -> crate::stats::WritePathCounts {
        self.stats.read(self.log.syncs())
    }

    /// The last log index applied to the state machine.
    pub fn applied_index(&self) -> Option<u64> {
        self.raft.metrics().borrow_watched().last_applied.map(|l| l.index)
    }

    /// The current leader as this node knows it (see [`leader_in`]).
    pub fn leader(&self) -> Option<NodeId> {
        leader_in(&self.raft.metrics().borrow_watched())
    }

    /// SHA-256 over the whole protocol state, and the applied index it was taken at.
    /// Both come from one storage snapshot, so replicas that report the same index must report the
    /// same digest.
    pub fn digest(&self) -> Result<([u8; 32], Option<u64>), kungfu_storage::Error> {
        let (digest, meta) = self.state.digest_with_meta(LAST_APPLIED)?;
        let applied: Option<LogId> = match meta {
            Some(b) => Some(kungfu_storage::envelope::decode(&b, LAST_APPLIED)?),
            None => None,
        };
        Ok((digest, applied.map(|l| l.index)))
    }

    /// Stops raft and the service, and waits for both.
    pub async fn shutdown(mut self) {
        let _ = self.raft.shutdown().await;
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.server).await;
    }
}

/// Opens the acknowledged mark of `log` and compares it with the log (issue #33, see
/// [`crate::mark`]): restores a vote the log store lost, and with `accept_data_loss` rewrites a
/// damaged mark to the log's end.
fn open_mark(log: &LogStore, accept_data_loss: bool) -> Result<crate::mark::AckMark, kungfu_storage::Error> {
    let end = crate::log::RaftLog::end(log)?;
    let vote = crate::log::RaftLog::stored_vote(log)?;
    let (mark, restore) = crate::mark::AckMark::open(log.path(), end.clone(), vote)?;
    if let Some(vote) = restore {
        crate::log::RaftLog::restore_vote(log, &vote)?;
    }
    if accept_data_loss {
        if mark.damage().is_some() {
            mark.accept_data_loss(end)?;
        } else {
            tracing::info!("--accept-data-loss: the raft log holds everything it acknowledged; nothing to accept");
        }
    }
    Ok(mark)
}

/// Turns elections back on once a damaged node's log is whole again (issue #33). A node never
/// becomes damaged while it runs, so this waits for one change and ends.
async fn campaign_once_whole(raft: Raft, mut damage: tokio::sync::watch::Receiver<Option<crate::mark::Damage>>) {
    if damage.wait_for(Option::is_none).await.is_ok() {
        raft.runtime_config().elect(true);
    }
}

/// Prepares a data directory whose state store was just replaced by a restored backup, and whose
/// log is still empty, to start as a one-node cluster of `node_id` reachable at `node` (used by
/// the server's restore). The membership kept with the state is replaced by this node alone, and
/// the vote is set to the term of the last applied entry, so the node's first election is in a
/// later term than every entry its state has seen. At start, openraft then takes the restored state
/// as applied, purges the empty log up to it, builds a snapshot of it and elects this node.
/// Returns the last applied log id of the restored state.
pub async fn adopt_restored_state(
    stores: &kungfu_storage::Stores,
    node_id: NodeId,
    node: Node,
) -> Result<LogId, kungfu_storage::Error> {
    use crate::state_machine::MEMBERSHIP;
    use kungfu_storage::envelope;
    use openraft::storage::{RaftLogReader, RaftLogStorage};
    let corrupt = |what: String| kungfu_storage::Error::Corrupt { what };
    let applied: LogId = match stores.state.get_meta(LAST_APPLIED)? {
        Some(b) => envelope::decode(&b, LAST_APPLIED)?,
        None => return Err(corrupt("the restored state holds no applied entry".into())),
    };
    let mut log = crate::log::RaftLog::new(stores.log.clone())?;
    let vote = log.read_vote().await.map_err(|e| corrupt(e.to_string()))?;
    if stores.log.last()?.is_some() || vote.is_some() {
        return Err(corrupt("a restored node must start with an empty log".into()));
    }
    let previous: crate::types::StoredMembership = match stores.state.get_meta(MEMBERSHIP)? {
        Some(b) => envelope::decode(&b, MEMBERSHIP)?,
        None => Default::default(),
    };
    let at = previous.log_id().clone().or_else(|| Some(applied.clone()));
    let alone = openraft::Membership::new(vec![BTreeSet::from([node_id])], BTreeMap::from([(node_id, node)]))
        .map_err(|e| corrupt(e.to_string()))?;
    let membership = crate::types::StoredMembership::new(at, alone);
    stores.state.commit(&Default::default(), &[(MEMBERSHIP, Some(envelope::encode(&membership)))])?;
    // The state writes no WAL (issue #30) and no log entry holds this membership: it is durable
    // only once flushed.
    stores.state.flush()?;
    let vote = crate::types::Vote::new(applied.leader_id.term, node_id);
    log.save_vote(&vote).await.map_err(|e| corrupt(e.to_string()))?;
    Ok(applied)
}

/// Who leads, from one reading of a node's raft metrics. openraft reports the leader of the last
/// committed vote a node knows, and that can be the node itself while it does not lead: restarted
/// with its own committed vote from before a crash, stepping down, or between winning an election
/// and taking the Leader state. So a node names itself only while its state is Leader.
pub fn leader_in(m: &openraft::RaftMetrics<crate::types::TypeConfig>) -> Option<NodeId> {
    leader_named(m.id, m.current_leader, m.state)
}

/// The leader a node names, read as [`leader_in`] explains, from either kind of metrics.
fn leader_named(me: NodeId, named: Option<NodeId>, state: openraft::ServerState) -> Option<NodeId> {
    let leader = named?;
    (leader != me || state.is_leader()).then_some(leader)
}

/// The leader this node's server metrics name, read as [`leader_in`] reads the full metrics.
pub fn server_leader(m: &openraft::metrics::RaftServerMetrics<crate::types::TypeConfig>) -> Option<NodeId> {
    leader_named(m.id, m.current_leader, m.state)
}

/// The term of this node's vote, from its server metrics (the full metrics' `current_term`).
pub fn server_term(m: &openraft::metrics::RaftServerMetrics<crate::types::TypeConfig>) -> u64 {
    m.vote.leader_id.term
}

/// Waits until `pred` holds of this node's server metrics (its role, the leader it knows, its vote,
/// its membership), and returns them. openraft publishes these only when one of them changes,
/// where it publishes the full metrics on every commit and apply: a task waiting for a change of
/// leadership on the full metrics woke, and copied them, on every commit round (issue #30). Err
/// when the raft core is gone.
pub async fn wait_server_metrics(
    raft: &Raft,
    pred: impl Fn(&openraft::metrics::RaftServerMetrics<crate::types::TypeConfig>) -> bool,
) -> Result<openraft::metrics::RaftServerMetrics<crate::types::TypeConfig>, String> {
    let mut rx = raft.server_metrics();
    loop {
        // Read in a statement of its own: the watch guard must not live across the await.
        let held = {
            let m = rx.borrow_watched();
            pred(&m).then(|| m.clone())
        };
        if let Some(m) = held {
            return Ok(m);
        }
        if rx.changed().await.is_err() {
            return Err("the raft core stopped".into());
        }
    }
}

/// Whether node `me` leads with its state caught up (see [`RaftNode::leads_caught_up`]), from one
/// reading of its metrics.
pub fn caught_up_in(m: &openraft::RaftMetrics<crate::types::TypeConfig>, me: NodeId) -> bool {
    leader_in(m) == Some(me) && m.last_applied.as_ref().is_some_and(|l| l.leader_id.term == m.current_term)
}

/// A leader hint from openraft, unless it names this node (see [`RaftNode::leader_elsewhere`]).
fn elsewhere(me: NodeId, leader: Option<(NodeId, Node)>) -> Option<(NodeId, Node)> {
    leader.filter(|(id, _)| *id != me)
}

fn classify(
    me: NodeId,
    e: RaftError<crate::types::TypeConfig, ClientWriteError<crate::types::TypeConfig>>,
) -> WriteError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => {
            WriteError::NotLeader { leader: elsewhere(me, f.leader_id.zip(f.leader_node)) }
        }
        // The entry was proposed and then lost its leader: it may still commit. Never "failed".
        RaftError::APIError(ClientWriteError::LogEntryDiscarded(f)) => {
            WriteError::Indeterminate(format!("log entry discarded on leader change (new leader {:?})", f.leader_id))
        }
        RaftError::APIError(other) => WriteError::Indeterminate(other.to_string()),
        RaftError::Fatal(f) => WriteError::Fatal(f.to_string()),
    }
}
