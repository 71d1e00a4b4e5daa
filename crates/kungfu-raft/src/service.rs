//! The server side of the raft network: receives openraft's RPCs from peers and hands them to the
//! local raft. Messages from another cluster, and messages addressed to a raft group this node does
//! not host ([`WRONG_GROUP`]), are refused; snapshot transfers are bounded in size, checked chunk
//! by chunk for continuity, and verified against their SHA-256 before installation. A node whose
//! log lost entries it acknowledged grants no vote and takes no leadership until it is whole again
//! (issue #33, [`crate::mark`]).

use crate::pb;
use crate::state_machine::Raft;
use crate::types::{SnapshotMeta, Vote};
use kungfu_storage::{SHARD, SnapshotStore, envelope};
use kungfu_types::GroupId;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::io::Write;
use tonic::{Request, Response, Status, Streaming};

/// How a node's raft service begins its refusal of a message addressed to a raft group it does not
/// host (issue #19, deliverable 3; `docs/scaling.md` §3.2 names the answer): a stable prefix of the
/// message of a `FAILED_PRECONDITION` status, followed by the group asked for and the one hosted.
pub const WRONG_GROUP: &str = "WRONG_GROUP";

type VoteRequest = openraft::raft::VoteRequest<crate::types::TypeConfig>;

/// The internal raft service of one node.
#[derive(Clone)]
pub struct RaftService {
    raft: Raft,
    cluster_id: String,
    snapshots: SnapshotStore,
    max_snapshot_bytes: u64,
    traces: crate::trace::Traces,
    /// The node's acknowledged mark: while it reports damage, votes are refused.
    mark: Option<std::sync::Arc<crate::mark::AckMark>>,
}

impl std::fmt::Debug for RaftService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RaftService({})", self.cluster_id)
    }
}

impl RaftService {
    pub fn new(raft: Raft, cluster_id: String, snapshots: SnapshotStore, max_snapshot_bytes: u64) -> RaftService {
        RaftService {
            raft,
            cluster_id,
            snapshots,
            max_snapshot_bytes,
            traces: crate::trace::Traces::default(),
            mark: None,
        }
    }

    /// Shares the node's trace map: an AppendEntries that carries a `traceparent` is handled in a
    /// `raft.append` span, its child, and its commands remember that span for their apply here.
    pub fn with_traces(mut self, traces: crate::trace::Traces) -> RaftService {
        self.traces = traces;
        self
    }

    /// Refuses votes while `mark` reports damage (issue #33).
    pub fn with_mark(mut self, mark: std::sync::Arc<crate::mark::AckMark>) -> RaftService {
        self.mark = Some(mark);
        self
    }

    /// Raft's voter durability (issue #33): a node that lost entries it acknowledged may have
    /// counted towards their commit, so a vote from it could elect a leader without them. It
    /// answers a plain refusal (granted false, no log), which a candidate takes as one voter fewer.
    fn refuse_vote(&self, req: &VoteRequest) -> Option<Response<pb::RaftMessage>> {
        self.mark.as_ref()?.damage()?;
        tracing::debug!(candidate = %req.vote, "vote refused: this node's raft log is damaged (repairing)");
        let refusal = openraft::raft::VoteResponse::<crate::types::TypeConfig>::new(&req.vote, None, false);
        Some(self.reply::<_, String>(Ok(refusal)))
    }

    fn check_cluster(&self, cluster_id: &str) -> Result<(), Status> {
        if cluster_id != self.cluster_id {
            return Err(Status::failed_precondition(format!(
                "message for cluster {cluster_id:?} reached a node of cluster {:?}",
                self.cluster_id
            )));
        }
        Ok(())
    }

    /// This node hosts one raft group, [`SHARD`] (the group of its state store); a message for any
    /// other is refused before its payload is read.
    fn check_group(&self, group: u32) -> Result<GroupId, Status> {
        match GroupId::from_wire(group) {
            Some(g) if g == SHARD => Ok(g),
            _ => Err(Status::failed_precondition(format!(
                "{WRONG_GROUP}: a message for group {group} reached a node that hosts {SHARD} only"
            ))),
        }
    }

    fn decode<T: DeserializeOwned>(&self, msg: &pb::RaftMessage) -> Result<T, Status> {
        self.check_cluster(&msg.cluster_id)?;
        self.check_group(msg.group)?;
        envelope::decode(&msg.payload, "raft request").map_err(|e| Status::invalid_argument(e.to_string()))
    }

    fn reply<T: Serialize, E: std::fmt::Display>(&self, r: Result<T, E>) -> Response<pb::RaftMessage> {
        let r: Result<T, String> = r.map_err(|e| e.to_string());
        Response::new(pb::RaftMessage {
            cluster_id: self.cluster_id.clone(),
            payload: envelope::encode(&r),
            group: u32::from(SHARD.0),
        })
    }
}

#[tonic::async_trait]
impl pb::raft_server::Raft for RaftService {
    async fn append_entries(&self, request: Request<pb::RaftMessage>) -> Result<Response<pb::RaftMessage>, Status> {
        let req: openraft::raft::AppendEntriesRequest<crate::types::TypeConfig> = self.decode(request.get_ref())?;
        let span = match crate::trace::extract(request.metadata().as_ref()) {
            Some(parent) => {
                let span = tracing::debug_span!(
                    "raft.append",
                    otel.kind = "server",
                    entries = req.entries.len(),
                    last_index = req.entries.last().map(|e| e.log_id.index).unwrap_or(0),
                );
                crate::trace::set_parent(&span, parent);
                if let Some(cx) = crate::trace::span_context(&span) {
                    self.traces.record_entries(&req.entries, &cx);
                }
                span
            }
            None => tracing::Span::none(),
        };
        Ok(self.reply(tracing::Instrument::instrument(self.raft.append_entries(req), span).await))
    }

    async fn vote(&self, request: Request<pb::RaftMessage>) -> Result<Response<pb::RaftMessage>, Status> {
        let req: VoteRequest = self.decode(request.get_ref())?;
        if let Some(refusal) = self.refuse_vote(&req) {
            return Ok(refusal);
        }
        Ok(self.reply(self.raft.vote(req).await))
    }

    async fn pre_vote(&self, request: Request<pb::RaftMessage>) -> Result<Response<pb::RaftMessage>, Status> {
        let req: VoteRequest = self.decode(request.get_ref())?;
        if let Some(refusal) = self.refuse_vote(&req) {
            return Ok(refusal);
        }
        Ok(self.reply(self.raft.pre_vote(req).await))
    }

    async fn transfer_leader(&self, request: Request<pb::RaftMessage>) -> Result<Response<pb::RaftMessage>, Status> {
        // A damaged node must not lead (issue #33): a leadership handed to it is refused, and the
        // cluster elects another after its election timeout.
        if let Some(damage) = self.mark.as_ref().and_then(|m| m.damage()) {
            return Err(Status::failed_precondition(format!("leadership refused: {damage}")));
        }
        let req = self.decode(request.get_ref())?;
        Ok(self.reply(self.raft.handle_transfer_leader(req).await))
    }

    async fn install_snapshot(
        &self,
        request: Request<Streaming<pb::SnapshotChunk>>,
    ) -> Result<Response<pb::RaftMessage>, Status> {
        let mut stream = request.into_inner();
        let Some(first) = stream.message().await? else {
            return Err(Status::invalid_argument("empty snapshot stream"));
        };
        self.check_cluster(&first.cluster_id)?;
        let group = self.check_group(first.group)?;
        if first.total_len > self.max_snapshot_bytes {
            return Err(Status::resource_exhausted(format!(
                "snapshot of {} bytes exceeds the limit of {}",
                first.total_len, self.max_snapshot_bytes
            )));
        }
        let (vote, meta): (Vote, SnapshotMeta) =
            envelope::decode(&first.header, "snapshot header").map_err(|e| Status::invalid_argument(e.to_string()))?;
        // The SHA-256 and the whole length come with the last chunk (issue #30: the sender packs
        // as it sends); a sender of an earlier release announced both in the first.
        let mut announced = (first.total_len, first.sha256.clone());
        let name = first.name.clone();
        let (path, mut file) = self.snapshots.incoming(&name).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let mut offset = 0u64;
        let mut chunk = Some(first);
        // Chunks must arrive in order, within the size limit.
        while let Some(c) = chunk.take() {
            if c.offset != offset || offset + c.data.len() as u64 > self.max_snapshot_bytes {
                let _ = std::fs::remove_file(&path);
                return Err(Status::invalid_argument(format!(
                    "snapshot chunk at {} where {offset} was expected (or past the limit of {} bytes)",
                    c.offset, self.max_snapshot_bytes
                )));
            }
            file.write_all(&c.data).map_err(|e| Status::internal(e.to_string()))?;
            offset += c.data.len() as u64;
            if c.done {
                if !c.sha256.is_empty() {
                    announced = (c.total_len, c.sha256);
                }
                break;
            }
            chunk = stream.message().await?;
            if chunk.is_none() {
                let _ = std::fs::remove_file(&path);
                return Err(Status::aborted("snapshot stream ended before its last chunk"));
            }
        }
        let (total_len, sha256) = announced;
        let sha256: [u8; 32] = match sha256.as_slice().try_into() {
            Ok(d) if total_len == offset => d,
            _ => {
                let _ = std::fs::remove_file(&path);
                return Err(Status::invalid_argument(format!(
                    "snapshot of {offset} bytes announced {total_len} bytes and a SHA-256 of {} bytes (32 expected)",
                    sha256.len()
                )));
            }
        };
        file.sync_all().map_err(|e| Status::internal(e.to_string()))?;
        drop(file);
        let snapshots = self.snapshots.clone();
        let meta_bytes = envelope::encode_grouped(group, &meta);
        let accepted = tokio::task::spawn_blocking(move || snapshots.accept(&path, &name, &sha256, &meta_bytes))
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(|e| Status::data_loss(e.to_string()))?;
        let snapshot = openraft::Snapshot { meta, snapshot: accepted };
        Ok(self.reply(self.raft.install_full_snapshot(vote, snapshot).await))
    }
}
