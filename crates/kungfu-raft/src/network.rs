//! The client side of the raft network: openraft's RPCs to other nodes over the internal tonic
//! service (`proto/kungfu/raft/v1/raft.proto`). One HTTP/2 channel per peer, reused for every RPC;
//! every call carries a deadline; snapshots stream in bounded chunks read from the archive file.

use crate::pb;
use crate::types::{Node, NodeId, TypeConfig, Vote};
use kungfu_storage::{SnapshotArchive, envelope};
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
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};

/// Bounds of the raft network.
#[derive(Clone, Debug)]
pub struct NetConfig {
    /// Connecting to a peer gives up after this long.
    pub connect_timeout: Duration,
    /// Largest message accepted or sent (append batches are bounded by openraft's
    /// `max_payload_entries`; this is the hard byte bound).
    pub max_message_bytes: usize,
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
            snapshot_chunk_bytes: 1024 * 1024,
            max_snapshot_bytes: 64 * 1024 * 1024 * 1024,
            snapshot_timeout: Duration::from_secs(600),
            dial: HashMap::new(),
        }
    }
}

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
}

impl Network {
    pub fn new(cluster_id: String, config: NetConfig) -> Network {
        Network { cluster_id, config, channels: Arc::new(Mutex::new(HashMap::new())) }
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
        Connection { target, net: self.clone(), addr }
    }
}

/// A connection to one peer.
#[derive(Debug)]
pub struct Connection {
    target: NodeId,
    addr: String,
    net: Network,
}

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

impl RaftNetworkV2<TypeConfig> for Connection {
    type SnapshotData = SnapshotArchive;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        let req = self.message(&rpc, option.soft_ttl());
        let resp = self.client()?.append_entries(req).await.map_err(|s| status_to_rpc(self.target, s))?;
        self.reply(resp.into_inner())
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        let req = self.message(&rpc, option.soft_ttl());
        let resp = self.client()?.vote(req).await.map_err(|s| status_to_rpc(self.target, s))?;
        self.reply(resp.into_inner())
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
        snapshot: openraft::alias::SnapshotOf<TypeConfig, SnapshotArchive>,
        cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let archive = snapshot.snapshot;
        let header = envelope::encode(&(vote, snapshot.meta));
        let cluster_id = self.net.cluster_id.clone();
        let chunk = self.net.config.snapshot_chunk_bytes.max(1);
        // Chunks are read from the file on the blocking pool as the stream is consumed (at most two
        // chunks in memory), so a large snapshot never sits in memory whole.
        let (tx, rx) = tokio::sync::mpsc::channel::<pb::SnapshotChunk>(2);
        let reader = tokio::task::spawn_blocking(move || -> Result<(), String> {
            let mut offset = 0u64;
            let mut first = true;
            loop {
                let data =
                    kungfu_storage::snapshot::read_chunk(&archive.path, offset, chunk).map_err(|e| e.to_string())?;
                let done = offset + data.len() as u64 >= archive.len;
                let msg = pb::SnapshotChunk {
                    cluster_id: cluster_id.clone(),
                    header: if first { header.clone() } else { Vec::new() },
                    name: if first { archive.name.clone() } else { String::new() },
                    total_len: archive.len,
                    sha256: if first { archive.sha256.to_vec() } else { Vec::new() },
                    offset,
                    data: data.clone(),
                    done,
                };
                first = false;
                offset += data.len() as u64;
                if tx.blocking_send(msg).is_err() {
                    return Err("snapshot stream closed by the receiver".into());
                }
                if done {
                    return Ok(());
                }
                if data.is_empty() {
                    return Err("snapshot archive ended early".into());
                }
            }
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
