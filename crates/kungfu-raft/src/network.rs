//! The client side of the raft network: openraft's RPCs to other nodes over the internal tonic
//! service (`proto/kungfu/raft/v1/raft.proto`). One HTTP/2 channel per peer, reused for every RPC;
//! every call carries a deadline; snapshots are packed as they stream, in bounded chunks.
//!
//! AppendEntries and votes have a deadline of their own ([`replication_deadline`]), not the one
//! openraft derives from the heartbeat interval: a peer answers them only after an fsync, and a
//! deadline of 3/4 of a heartbeat timed out under load (issue #15).
//!
//! AppendEntries are bounded by bytes as well as by openraft's entry count: a batch larger than
//! `max_append_bytes` is sent as consecutive requests, each under the budget, and each with a
//! deadline that grows with its size. Without both, a follower that fell behind by large entries
//! never catches up: openraft resends the same batch, which either exceeds the message limit or
//! cannot cross within a heartbeat-sized deadline, forever (issue #11).

use crate::pb;
use crate::types::{Entry, Node, NodeId, TypeConfig, Vote};
use kungfu_storage::{SHARD, StoredSnapshot, envelope};
use openraft::error::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, TransferLeaderRequest, TransferLeaderResponse,
    VoteRequest, VoteResponse,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};

/// Bounds of the raft network.
#[derive(Clone, Debug)]
pub struct NetConfig {
    /// Connecting to a peer gives up after this long.
    pub connect_timeout: Duration,
    /// Largest message accepted or sent: the hard byte bound of every raft RPC.
    pub max_message_bytes: usize,
    /// Largest AppendEntries request, in encoded bytes: a batch of more is sent as several
    /// consecutive requests. One entry larger than this still goes alone (an entry is bounded by
    /// the API's message and content limits, far under `max_message_bytes`).
    pub max_append_bytes: usize,
    /// The slowest transfer rate an AppendEntries is expected to keep: its deadline is
    /// [`replication_deadline`] plus its size at this rate, so a large batch is not timed out (and
    /// resent) merely for being large.
    pub min_append_bytes_per_sec: u64,
    /// The deadline of every AppendEntries (with entries or without) and of every vote, before an
    /// append's size is counted (see [`replication_deadline`]). It must stay well above an fsync on
    /// a loaded disk: a follower answers an AppendEntries only once its log is flushed up to it
    /// (an empty one too: openraft answers it after every earlier log write is flushed), and a
    /// voter answers only once its vote is synced. openraft's own option is 3/4 of a heartbeat
    /// interval (75 ms by default), a liveness period, not a bound on a disk: with it, 37
    /// replication RPCs timed out in 75 s of load, each one resent from scratch after a backoff
    /// (issue #15). A longer deadline costs only when a packet is lost without the connection
    /// failing, and then only the wait before the resend; a dead peer is detected by the connect
    /// timeout and the HTTP/2 keep-alive, not by this. openraft bounds its heartbeats on its own.
    pub replication_timeout: Duration,
    /// Size of one snapshot chunk.
    pub snapshot_chunk_bytes: usize,
    /// Largest snapshot a node accepts.
    pub max_snapshot_bytes: u64,
    /// Deadline for a whole snapshot transfer.
    pub snapshot_timeout: Duration,
    /// Peers this node dials at another address than the one in the membership (a test proxy per
    /// directed link, or a NAT). Every other peer is dialed at its membership address.
    pub dial: HashMap<NodeId, String>,
}

impl Default for NetConfig {
    fn default() -> NetConfig {
        NetConfig {
            connect_timeout: Duration::from_secs(2),
            max_message_bytes: 64 * 1024 * 1024,
            max_append_bytes: 4 * 1024 * 1024,
            min_append_bytes_per_sec: 8 * 1024 * 1024,
            replication_timeout: Duration::from_secs(1),
            snapshot_chunk_bytes: 1024 * 1024,
            max_snapshot_bytes: 64 * 1024 * 1024 * 1024,
            snapshot_timeout: Duration::from_secs(600),
            dial: HashMap::new(),
        }
    }
}

/// HTTP/2 flow-control windows of the raft channels, on both ends (`RaftNode` sets the server's).
pub const STREAM_WINDOW_BYTES: u32 = 8 * 1024 * 1024;
pub const CONNECTION_WINDOW_BYTES: u32 = 16 * 1024 * 1024;

/// A transport failure, as an error openraft can carry.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TransportError(pub String);

/// Creates connections to peers; shares one channel per peer address.
#[derive(Clone, Debug)]
pub struct Network {
    cluster_id: String,
    config: NetConfig,
    channels: Arc<Mutex<HashMap<String, Channel>>>,
    /// AppendEntries and votes that ran out of their deadline, over all peers.
    timeouts: Arc<AtomicU64>,
    /// Failed RPCs per peer, and when each peer's failures were last logged.
    peers: PeerFailures,
    /// Trace contexts of in-flight commands (trace.rs).
    traces: crate::trace::Traces,
    /// Entries sent per AppendEntries (issue #30).
    stats: crate::stats::Stats,
}

/// The RPC health of every peer this node has called.
pub type PeerFailures = Arc<Mutex<HashMap<NodeId, Arc<Mutex<PeerHealth>>>>>;

/// How often, at most, a peer's failing RPCs are logged (one line with their count), so one peer
/// down does not write a warning per heartbeat (issue #16).
pub const FAILURE_REPORT_INTERVAL: Duration = Duration::from_secs(10);

/// The RPC failures of one peer.
#[derive(Debug, Default)]
pub struct PeerHealth {
    /// Failed RPCs since this node started (the `kungfu_raft_rpc_failures_total` counter).
    pub failures: u64,
    /// Failed RPCs since the last success.
    streak: u64,
    /// Whether the peer ever answered.
    answered: bool,
    /// Failed RPCs not yet logged.
    unreported: u64,
    last_report: Option<std::time::Instant>,
}

impl PeerHealth {
    /// Counts one RPC's outcome; returns the line to log, if one is due: the first failure after
    /// a success at once, further ones at most once per `interval` with their count, and the
    /// recovery once.
    pub fn observe(
        &mut self,
        target: NodeId,
        addr: &str,
        error: Option<&dyn std::fmt::Display>,
        now: std::time::Instant,
        interval: Duration,
    ) -> Option<(tracing::Level, String)> {
        match error {
            Some(e) => {
                self.failures += 1;
                self.streak += 1;
                self.unreported += 1;
                let due = self.streak == 1 || self.last_report.is_none_or(|t| now.duration_since(t) >= interval);
                if !due {
                    return None;
                }
                let line = if self.streak == 1 {
                    format!("raft: node {target} at {addr} did not answer: {e}")
                } else {
                    format!(
                        "raft: node {target} at {addr} still not answering ({} failed calls in the last {}s, {} in a row): {e}",
                        self.unreported,
                        interval.as_secs(),
                        self.streak
                    )
                };
                self.unreported = 0;
                self.last_report = Some(now);
                Some((tracing::Level::WARN, line))
            }
            None if self.streak > 0 => {
                self.answered = true;
                let line = format!("raft: node {target} at {addr} answers again after {} failed calls", self.streak);
                self.streak = 0;
                self.unreported = 0;
                self.last_report = None;
                Some((tracing::Level::INFO, line))
            }
            None => {
                self.answered = true;
                None
            }
        }
    }

    /// Whether the peer answered its last call.
    pub fn answering(&self) -> bool {
        self.answered && self.streak == 0
    }
}

impl Network {
    pub fn new(cluster_id: String, config: NetConfig) -> Network {
        Network {
            cluster_id,
            config,
            channels: Arc::new(Mutex::new(HashMap::new())),
            timeouts: Arc::new(AtomicU64::new(0)),
            peers: Arc::new(Mutex::new(HashMap::new())),
            traces: crate::trace::Traces::default(),
            stats: Default::default(),
        }
    }

    /// Shares the node's trace map (issue #18).
    pub fn with_traces(mut self, traces: crate::trace::Traces) -> Network {
        self.traces = traces;
        self
    }

    /// Counts what this node's AppendEntries carry into `stats`.
    pub fn with_stats(mut self, stats: crate::stats::Stats) -> Network {
        self.stats = stats;
        self
    }

    /// Failed RPCs per peer since this node started, shared with every connection.
    pub fn peer_failures(&self) -> PeerFailures {
        self.peers.clone()
    }

    fn health_of(&self, target: NodeId) -> Arc<Mutex<PeerHealth>> {
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        peers.entry(target).or_default().clone()
    }

    /// The count of AppendEntries and votes that ran out of their deadline, shared with every
    /// connection this network makes.
    pub fn timeouts(&self) -> Arc<AtomicU64> {
        self.timeouts.clone()
    }

    /// Counts a failed RPC as timed out when it failed at or after its deadline.
    fn count_timeout<T, E>(&self, result: &Result<T, E>, sent: std::time::Instant, timeout: Duration) {
        if result.is_err() && sent.elapsed() >= timeout {
            self.timeouts.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(?timeout, "a raft RPC ran out of its deadline");
        }
    }

    fn channel(&self, addr: &str) -> Result<Channel, TransportError> {
        let mut map = self.channels.lock().map_err(|_| TransportError("channel map poisoned".into()))?;
        if let Some(c) = map.get(addr) {
            return Ok(c.clone());
        }
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| TransportError(format!("bad peer address {addr:?}: {e}")))?
            .connect_timeout(self.config.connect_timeout)
            .tcp_nodelay(true)
            // Windows that let a whole append batch be in flight (the defaults stall a
            // multi-megabyte request on every window update).
            .initial_stream_window_size(STREAM_WINDOW_BYTES)
            .initial_connection_window_size(CONNECTION_WINDOW_BYTES)
            .http2_keep_alive_interval(Duration::from_secs(10))
            .keep_alive_timeout(Duration::from_secs(5));
        let channel = endpoint.connect_lazy();
        map.insert(addr.to_string(), channel.clone());
        Ok(channel)
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, node: &Node) -> Connection {
        let addr = self.config.dial.get(&target).cloned().unwrap_or_else(|| node.raft.clone());
        Connection { target, net: self.clone(), addr, slow: 0, health: self.health_of(target) }
    }
}

/// A connection to one peer.
#[derive(Debug)]
pub struct Connection {
    target: NodeId,
    addr: String,
    net: Network,
    /// AppendEntries with entries that ran out of time in a row: each doubles the next one's
    /// deadline (up to `MAX_SLOW_DOUBLINGS`), so a peer slower than the configured rate is still
    /// caught up rather than sent the same request forever; a success resets it.
    slow: u32,
    health: Arc<Mutex<PeerHealth>>,
}

/// At most 2^3 = 8 times the computed deadline.
const MAX_SLOW_DOUBLINGS: u32 = 3;

fn unreachable(e: impl std::fmt::Display) -> Unreachable<TypeConfig> {
    Unreachable::new(&TransportError(e.to_string()))
}

fn status_to_rpc(target: NodeId, s: tonic::Status) -> RPCError<TypeConfig> {
    match s.code() {
        // The peer cannot be reached or is shutting down: back off.
        tonic::Code::Unavailable | tonic::Code::Cancelled | tonic::Code::Unknown => {
            RPCError::Unreachable(unreachable(format!("node {target}: {}", s.message())))
        }
        _ => RPCError::Network(NetworkError::new(&TransportError(format!("node {target}: {s}")))),
    }
}

impl Connection {
    /// Counts an RPC's outcome for this peer and logs its failures, rate-limited (issue #16).
    fn observe<T, E: std::fmt::Display>(&self, result: &Result<T, E>) {
        let error = result.as_ref().err().map(|e| e as &dyn std::fmt::Display);
        let line = {
            let mut health = self.health.lock().unwrap_or_else(|p| p.into_inner());
            health.observe(self.target, &self.addr, error, std::time::Instant::now(), FAILURE_REPORT_INTERVAL)
        };
        match line {
            Some((tracing::Level::WARN, line)) => tracing::warn!(peer = self.target, "{line}"),
            Some((_, line)) => tracing::info!(peer = self.target, "{line}"),
            None => {}
        }
    }

    fn client(&self) -> Result<pb::raft_client::RaftClient<Channel>, RPCError<TypeConfig>> {
        let channel = self.net.channel(&self.addr).map_err(|e| RPCError::Unreachable(unreachable(e)))?;
        Ok(pb::raft_client::RaftClient::new(channel)
            .max_decoding_message_size(self.net.config.max_message_bytes)
            .max_encoding_message_size(self.net.config.max_message_bytes))
    }

    fn message<T: Serialize>(&self, body: &T, timeout: Duration) -> tonic::Request<pb::RaftMessage> {
        let mut req = tonic::Request::new(pb::RaftMessage {
            cluster_id: self.net.cluster_id.clone(),
            payload: envelope::encode(body),
            // The group of this node's raft (issue #19, deliverable 3); 0 is not written.
            group: u32::from(SHARD.0),
        });
        req.set_timeout(timeout);
        req
    }

    fn reply<T: DeserializeOwned>(&self, msg: pb::RaftMessage) -> Result<T, RPCError<TypeConfig>> {
        let r: Result<T, String> = envelope::decode(&msg.payload, "raft reply")
            .map_err(|e| RPCError::Network(NetworkError::new(&TransportError(e.to_string()))))?;
        // The peer's raft has stopped (a fatal error there): treat it as unreachable.
        r.map_err(|e| RPCError::Unreachable(unreachable(format!("node {}: {e}", self.target))))
    }
}

impl Connection {
    async fn send_append(
        &self,
        part: &AppendEntriesRequest<TypeConfig>,
        timeout: Duration,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        let mut req = self.message(part, timeout);
        // A part that carries a traced command is sent in a `raft.append_entries` span, child of
        // the newest such command's proposal, with that span as its `traceparent` (trace.rs).
        let span = match self.net.traces.newest(&part.entries) {
            Some(parent) => {
                let span = tracing::debug_span!(
                    "raft.append_entries",
                    otel.kind = "client",
                    peer = self.target,
                    entries = part.entries.len(),
                    last_index = part.entries.last().map(|e| e.log_id.index).unwrap_or(0),
                );
                crate::trace::set_parent(&span, parent);
                crate::trace::inject_span(&span, req.metadata_mut().as_mut());
                span
            }
            None => tracing::Span::none(),
        };
        let sent = tracing::Instrument::instrument(self.client()?.append_entries(req), span).await;
        let resp = sent.map_err(|s| status_to_rpc(self.target, s))?;
        self.reply(resp.into_inner())
    }
}

/// Splits entries, in order, into parts of at most `budget` encoded bytes each (an entry larger
/// than the budget makes a part of its own), with each part's size. An empty list makes one empty
/// part, so a heartbeat is still sent.
pub fn split_by_bytes(entries: Vec<Entry>, budget: usize) -> Vec<(Vec<Entry>, usize)> {
    let mut parts = Vec::new();
    let (mut current, mut bytes) = (Vec::new(), 0);
    for entry in entries {
        let len = kungfu_core::codec::encoded_len(&entry);
        if !current.is_empty() && bytes + len > budget {
            parts.push((std::mem::take(&mut current), bytes));
            bytes = 0;
        }
        current.push(entry);
        bytes += len;
    }
    parts.push((current, bytes));
    parts
}

/// The deadline of an AppendEntries or a vote before an append's size is counted: the
/// configured `replication_timeout`, or openraft's soft deadline when that is longer (a cluster
/// configured with very long heartbeats). Never shorter than `replication_timeout`, whatever the
/// heartbeat: openraft's option is derived from it, and a heartbeat is no bound on an fsync.
pub fn replication_deadline(option: &RPCOption, config: &NetConfig) -> Duration {
    config.replication_timeout.max(option.soft_ttl())
}

/// The deadline of an AppendEntries of `bytes`: `base` (see [`replication_deadline`]) plus the
/// time to move the bytes at `min_bytes_per_sec`.
pub fn append_deadline(base: Duration, bytes: usize, min_bytes_per_sec: u64) -> Duration {
    let transfer = Duration::from_secs_f64(bytes as f64 / min_bytes_per_sec.max(1) as f64);
    base + transfer
}

impl RaftNetworkV2<TypeConfig> for Connection {
    type SnapshotData = StoredSnapshot;

    /// Sends the entries in byte-bounded parts, in order, each after the previous one matched.
    /// When a later part fails, the parts before it did match: that is a partial success, and
    /// openraft sends the rest again from there.
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        let AppendEntriesRequest { vote, prev_log_id, leader_commit, entries } = rpc;
        let parts = split_by_bytes(entries, self.net.config.max_append_bytes);
        let count = parts.len();
        let mut matched = prev_log_id;
        for (i, (entries, bytes)) in parts.into_iter().enumerate() {
            let last = entries.last().map(|e| e.log_id.clone()).or_else(|| matched.clone());
            let part = AppendEntriesRequest {
                vote: vote.clone(),
                prev_log_id: matched.clone(),
                leader_commit: leader_commit.clone(),
                entries,
            };
            // Empty parts too: a follower answers a heartbeat only after its earlier log writes are
            // flushed, so it waits on the same fsync as an append.
            let base = replication_deadline(&option, &self.net.config);
            let timeout = append_deadline(base, bytes, self.net.config.min_append_bytes_per_sec) * (1 << self.slow);
            let sent = std::time::Instant::now();
            self.net.stats.replicated(part.entries.len() as u64);
            let answer = self.send_append(&part, timeout).await;
            self.net.count_timeout(&answer, sent, timeout);
            self.observe(&answer);
            if !part.entries.is_empty() {
                self.slow = match &answer {
                    Err(_) if sent.elapsed() >= timeout => (self.slow + 1).min(MAX_SLOW_DOUBLINGS),
                    Err(_) => self.slow,
                    Ok(_) => 0,
                };
            }
            let first = i == 0;
            match answer {
                Ok(AppendEntriesResponse::Success) if i + 1 == count => return Ok(AppendEntriesResponse::Success),
                Ok(AppendEntriesResponse::Success) => matched = last,
                // The first part answers for the whole request, as one request would.
                Ok(other) if first => return Ok(other),
                Err(e) if first => return Err(e),
                Ok(AppendEntriesResponse::HigherVote(v)) => return Ok(AppendEntriesResponse::HigherVote(v)),
                Ok(AppendEntriesResponse::PartialSuccess(m)) => return Ok(AppendEntriesResponse::PartialSuccess(m)),
                // Everything up to `matched` was acknowledged by a reply; openraft resumes there (a
                // conflict after it is found again by the next request).
                Ok(AppendEntriesResponse::Conflict) | Err(_) => {
                    return Ok(AppendEntriesResponse::PartialSuccess(matched));
                }
            }
        }
        // No parts: only an empty request (a heartbeat) yields none, and `split_by_bytes` keeps it.
        Ok(AppendEntriesResponse::Success)
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        // The voter syncs its vote before it answers (openraft's `save_vote` contract): the same
        // deadline as an append, not openraft's (3/4 of the minimum election timeout). A grant
        // that arrives after the candidate moved on to a later term is ignored by openraft.
        let timeout = replication_deadline(&option, &self.net.config);
        let req = self.message(&rpc, timeout);
        let sent = std::time::Instant::now();
        let resp = self.client()?.vote(req).await.map_err(|s| status_to_rpc(self.target, s));
        self.net.count_timeout(&resp, sent, timeout);
        self.observe(&resp);
        self.reply(resp?.into_inner())
    }

    async fn pre_vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        let req = self.message(&rpc, option.soft_ttl());
        let resp = self.client()?.pre_vote(req).await.map_err(|s| status_to_rpc(self.target, s))?;
        self.reply(resp.into_inner())
    }

    async fn transfer_leader(
        &mut self,
        rpc: TransferLeaderRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<TransferLeaderResponse<TypeConfig>, RPCError<TypeConfig>> {
        let req = self.message(&rpc, option.soft_ttl());
        let resp = self.client()?.transfer_leader(req).await.map_err(|s| status_to_rpc(self.target, s))?;
        self.reply(resp.into_inner())
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: openraft::alias::SnapshotOf<TypeConfig, StoredSnapshot>,
        cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let stored = snapshot.snapshot;
        let header = envelope::encode(&(vote, snapshot.meta));
        let cluster_id = self.net.cluster_id.clone();
        let group = stored.group;
        let chunk = self.net.config.snapshot_chunk_bytes.max(1);
        // Issue #30: the snapshot is a checkpoint directory; it is packed and hashed only here,
        // as it is sent, on the blocking pool as the stream is consumed (at most two chunks in
        // memory), so neither building a snapshot nor sending one writes a copy of the state. Its
        // length and SHA-256 are known only at the end: the last chunk (`done`) carries them.
        let (tx, rx) = tokio::sync::mpsc::channel::<pb::SnapshotChunk>(2);
        let reader = tokio::task::spawn_blocking(move || -> Result<(), String> {
            let mut out = ChunkSender {
                tx,
                first: Some(pb::SnapshotChunk {
                    cluster_id: cluster_id.clone(),
                    header,
                    name: stored.name.clone(),
                    group: u32::from(group.0),
                    ..Default::default()
                }),
                cluster_id,
                buf: Vec::with_capacity(chunk),
                chunk,
                offset: 0,
            };
            let packed = kungfu_storage::snapshot::pack(&stored.path, &mut out).map_err(|e| e.to_string())?;
            out.send(true, Some(packed)).map_err(|e| e.to_string())
        });
        let mut client = self.client().map_err(StreamingError::from)?;
        let mut req = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(rx));
        req.set_timeout(self.net.config.snapshot_timeout);
        let target = self.target;
        let send = async move { client.install_snapshot(req).await };
        let resp = tokio::select! {
            closed = cancel => {
                reader.abort();
                return Err(StreamingError::Closed(closed));
            }
            r = send => r,
        };
        let resp = resp.map_err(|s| StreamingError::from(status_to_rpc(target, s)))?;
        let r: Result<SnapshotResponse<TypeConfig>, String> =
            envelope::decode(&resp.into_inner().payload, "snapshot reply")
                .map_err(|e| StreamingError::Network(NetworkError::new(&TransportError(e.to_string()))))?;
        r.map_err(|e| StreamingError::Unreachable(unreachable(format!("node {target}: {e}"))))
    }
}

/// The writer a snapshot is packed into as it is sent: it cuts the stream into chunks of at most
/// `chunk` bytes and sends each as it fills. The first chunk carries the header, the name and the
/// group; the last (`done`) carries the whole length and the SHA-256.
struct ChunkSender {
    tx: tokio::sync::mpsc::Sender<pb::SnapshotChunk>,
    first: Option<pb::SnapshotChunk>,
    cluster_id: String,
    buf: Vec<u8>,
    chunk: usize,
    offset: u64,
}

impl ChunkSender {
    fn send(&mut self, done: bool, packed: Option<kungfu_storage::snapshot::Packed>) -> std::io::Result<()> {
        let data = std::mem::replace(&mut self.buf, Vec::with_capacity(self.chunk));
        let mut msg = self
            .first
            .take()
            .unwrap_or_else(|| pb::SnapshotChunk { cluster_id: self.cluster_id.clone(), ..Default::default() });
        msg.offset = self.offset;
        self.offset += data.len() as u64;
        msg.data = data;
        msg.done = done;
        if let Some(p) = packed {
            msg.total_len = p.len;
            msg.sha256 = p.sha256.to_vec();
        }
        self.tx
            .blocking_send(msg)
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "snapshot stream closed by the receiver"))
    }
}

impl std::io::Write for ChunkSender {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.chunk - self.buf.len());
        self.buf.extend_from_slice(&buf[..n]);
        if self.buf.len() == self.chunk {
            self.send(false, None)?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Request;

    /// Issue #16: a peer down makes one line per interval with the count, not one per heartbeat;
    /// the first failure and the recovery are said at once.
    #[test]
    fn a_failing_peer_is_reported_once_per_interval_with_its_count() {
        let mut h = PeerHealth::default();
        let t0 = std::time::Instant::now();
        let every = Duration::from_secs(10);
        let err = "connection refused";
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let first = h.observe(2, "a:1", Some(&err), at(0), every).expect("the first failure is said");
        assert_eq!(first.0, tracing::Level::WARN);
        assert!(first.1.contains("node 2 at a:1") && first.1.contains("connection refused"), "{}", first.1);
        // Fifty heartbeats in the next ten seconds: silent.
        for i in 1..=50 {
            assert_eq!(h.observe(2, "a:1", Some(&err), at(i * 190), every), None, "heartbeat {i}");
        }
        let again = h.observe(2, "a:1", Some(&err), at(10_001), every).expect("one line after the interval");
        assert!(again.1.contains("51 failed calls") && again.1.contains("52 in a row"), "{}", again.1);
        assert_eq!(h.failures, 52);
        let back = h.observe(2, "a:1", None, at(10_100), every).expect("the recovery is said");
        assert_eq!(back.0, tracing::Level::INFO);
        assert!(back.1.contains("answers again after 52 failed calls"), "{}", back.1);
        assert_eq!(h.observe(2, "a:1", None, at(10_200), every), None, "successes are silent");
        assert!(h.observe(2, "a:1", Some(&err), at(10_300), every).is_some(), "a new failure is said at once");
        assert_eq!(h.failures, 53, "the counter never resets");
    }
    use kungfu_core::{Action, Command, Principal};
    use kungfu_types::{AgentId, Content, Timestamp};

    /// An entry at `index` whose command carries `bytes` of content.
    fn entry(index: u64, bytes: usize) -> Entry {
        let action = Action::CreateMemory { content: Content::new(vec![7u8; bytes]) };
        let cmd = Command::new(Principal::Agent(AgentId(1)), action, None, Timestamp(1));
        openraft::Entry {
            log_id: openraft::LogId::new(
                <openraft::alias::LeaderIdOf<TypeConfig> as openraft::vote::RaftLeaderIdExt>::new_committed(1, 1),
                index,
            ),
            payload: openraft::EntryPayload::Normal(crate::types::Payload::group_zero(Request::Command(cmd))),
        }
    }

    #[test]
    fn batches_are_split_by_bytes_in_order_without_losing_an_entry() {
        // 300 entries of 250 KiB, as openraft batches a catch-up: about 75 MB in one request.
        let entries: Vec<Entry> = (1..=300).map(|i| entry(i, 250 * 1024)).collect();
        let total: usize = entries.iter().map(kungfu_core::codec::encoded_len).sum();
        assert!(total > 64 * 1024 * 1024, "the batch is over the message limit: {total}");
        let budget = 4 * 1024 * 1024;
        let parts = split_by_bytes(entries, budget);
        assert!(parts.len() > 1);
        assert!(parts.iter().all(|(p, bytes)| !p.is_empty() && *bytes <= budget), "every part fits the budget");
        let indexes: Vec<u64> = parts.iter().flat_map(|(p, _)| p.iter().map(|e| e.log_id.index)).collect();
        assert_eq!(indexes, (1..=300).collect::<Vec<_>>(), "every entry once, in order");
        for (p, bytes) in &parts {
            assert_eq!(*bytes, p.iter().map(kungfu_core::codec::encoded_len).sum::<usize>(), "sizes are exact");
        }
        // A part's encoded request is its entries plus a small header: under the message limit.
        let (first, _) = &parts[0];
        let req = AppendEntriesRequest::<TypeConfig> {
            vote: Vote::new_committed(1, 1),
            prev_log_id: None,
            leader_commit: None,
            entries: first.clone(),
        };
        assert!(envelope::encode(&req).len() < budget + 1024);
    }

    #[test]
    fn an_entry_larger_than_the_budget_goes_alone_and_a_heartbeat_is_one_empty_part() {
        let parts = split_by_bytes(vec![entry(1, 10), entry(2, 5000), entry(3, 10)], 1000);
        let sizes: Vec<usize> = parts.iter().map(|(p, _)| p.len()).collect();
        assert_eq!(sizes, vec![1, 1, 1]);
        let parts = split_by_bytes(Vec::new(), 1000);
        assert_eq!(parts.len(), 1);
        assert!(parts[0].0.is_empty());
    }

    #[test]
    fn replication_rpcs_have_their_own_deadline_not_the_heartbeats() {
        let config = NetConfig::default();
        // What openraft passes for a 100 ms heartbeat (soft: 75 ms), for a 50 ms one, and for a
        // 300 ms minimum election timeout (votes).
        for heartbeat_ms in [50, 100, 300] {
            let option = RPCOption::new(Duration::from_millis(heartbeat_ms));
            assert_eq!(
                replication_deadline(&option, &config),
                config.replication_timeout,
                "heartbeat {heartbeat_ms} ms"
            );
        }
        // Well above a loaded fsync (tens to hundreds of ms), not 3/4 of a heartbeat.
        assert!(config.replication_timeout >= Duration::from_millis(500));
        // A cluster configured with heartbeats longer than that keeps openraft's longer deadline.
        let slow = RPCOption::new(Duration::from_secs(4));
        assert_eq!(replication_deadline(&slow, &config), Duration::from_secs(3));
        // An AppendEntries' deadline starts from it and grows with its size.
        let base = replication_deadline(&RPCOption::new(Duration::from_millis(100)), &config);
        assert_eq!(append_deadline(base, 0, config.min_append_bytes_per_sec), config.replication_timeout);
    }

    #[test]
    fn the_append_deadline_grows_with_the_payload() {
        let base = Duration::from_millis(75);
        assert_eq!(append_deadline(base, 0, 8 << 20), base);
        assert_eq!(append_deadline(base, 8 << 20, 8 << 20), base + Duration::from_secs(1));
        assert!(append_deadline(base, 4 << 20, 8 << 20) > Duration::from_millis(500));
    }
}
