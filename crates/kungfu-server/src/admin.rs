//! The operator service (`kungfu.v1.AdminService`, `proto/kungfu/v1/admin.proto`) and restore.
//!
//! Every call needs the operator token ([`Backend::authenticate_operator`]). `ClusterStatus` and
//! `Backup` are answered by any node from what it knows; the membership calls, leader transfer and
//! snapshots are leader-only, and a follower answers them `NOT_LEADER` with the leader's address
//! exactly as it answers agent writes (the leadership check is a read-index round through
//! [`Backend::read`], so a deposed leader that has not noticed yet does not act either).
//!
//! A backup is a snapshot archive ([`SnapshotStore::build_with`]: a RocksDB checkpoint of the state
//! store, tar-packed, SHA-256) in a new directory, with a `manifest.toml` written last. [`restore`]
//! turns one into a fresh data directory whose state is the backup and whose log is empty: a node
//! started on it is a one-node cluster serving the backed-up state, to which more nodes are added
//! with `AddLearner` and `ChangeMembership`.

use crate::backend::Backend;
use crate::config::Config;
use kungfu_api::{admin as rq, pb, rejection_status};
use kungfu_raft::state_machine::{LAST_APPLIED, MEMBERSHIP};
use kungfu_raft::types::{LogId, SnapshotMeta, StoredMembership};
use kungfu_raft::{Node, WriteError};
use kungfu_storage::snapshot::{file_digest, read_checkpoint_meta};
use kungfu_storage::{DataDir, Identity, OpenMode, SnapshotArchive, SnapshotStore, StateStore, envelope};
use kungfu_types::{Code, Rejection};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tonic::{Request, Response, Status};

/// The manifest file of a backup directory.
pub const MANIFEST: &str = "manifest.toml";
/// The manifest format this build writes and reads.
pub const MANIFEST_FORMAT: u32 = 1;
/// How long a call may wait for its outcome when the caller sent no deadline.
pub const DEFAULT_CALL_BUDGET: Duration = Duration::from_secs(60);

/// The operator service of one node.
#[derive(Clone, Debug)]
pub struct Admin {
    b: Arc<Backend>,
}

/// The admin service, ready to add to the node's server.
pub fn service(b: Arc<Backend>) -> pb::admin_service_server::AdminServiceServer<Admin> {
    let max = b.config.api.max_message_bytes;
    pb::admin_service_server::AdminServiceServer::new(Admin { b })
        .max_decoding_message_size(max)
        .max_encoding_message_size(max)
}

fn status(code: Code, message: impl Into<String>) -> Status {
    rejection_status(&Rejection::new(code, message))
}

fn field_status(code: Code, field: &str, message: impl Into<String>) -> Status {
    rejection_status(&Rejection::field(code, field, message))
}

/// An outcome not known within the call's budget: the operation may still complete.
fn indeterminate(message: impl Into<String>) -> Status {
    status(Code::Unavailable, message)
}

/// How long this call may wait for its outcome: a little less than the caller's `grpc-timeout`
/// (so the answer arrives before the caller gives up), or [`DEFAULT_CALL_BUDGET`].
pub fn call_budget<T>(req: &Request<T>) -> Duration {
    let parsed = req.metadata().get("grpc-timeout").and_then(|v| v.to_str().ok()).and_then(parse_grpc_timeout);
    match parsed {
        Some(d) => d.saturating_sub((d / 10).min(Duration::from_secs(2))),
        None => DEFAULT_CALL_BUDGET,
    }
}

/// The gRPC `grpc-timeout` header: at most 8 digits and a unit (`H M S m u n`).
fn parse_grpc_timeout(text: &str) -> Option<Duration> {
    let unit = text.chars().last()?;
    let digits = &text[..text.len() - unit.len_utf8()];
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        'H' => Duration::from_secs(n * 3600),
        'M' => Duration::from_secs(n * 60),
        'S' => Duration::from_secs(n),
        'm' => Duration::from_millis(n),
        'u' => Duration::from_micros(n),
        'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

fn cluster_node(id: u64, node: Option<&Node>) -> pb::ClusterNode {
    pb::ClusterNode {
        node_id: id,
        raft_addr: node.map(|n| n.raft.clone()).unwrap_or_default(),
        api_addr: node.map(|n| n.api.clone()).unwrap_or_default(),
    }
}

/// A membership on the wire; `committed` is whether its entry is known committed.
fn membership_pb(stored: &StoredMembership, committed: bool) -> pb::ClusterMembership {
    let m = stored.membership();
    let voters: Vec<u64> = m.voter_ids().collect();
    pb::ClusterMembership {
        voters: voters.iter().map(|id| cluster_node(*id, m.get_node(id))).collect(),
        learners: m.learner_ids().map(|id| cluster_node(id, m.get_node(&id))).collect(),
        configs: m
            .get_joint_config()
            .iter()
            .map(|set| pb::VoterSet { node_ids: set.iter().copied().collect() })
            .collect(),
        log_index: stored.log_id().as_ref().map(|l| l.index),
        committed,
    }
}

fn now_unix_micros() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}

impl Admin {
    /// Leader-only calls: a read-index round confirms this node leads now; otherwise the answer is
    /// the same `NOT_LEADER` (with the leader's address) that agent writes get.
    async fn ensure_leader(&self) -> Result<(), Status> {
        self.b.read(|_, _, _| Ok(())).await
    }

    /// The answer after raft said "not the leader" in the middle of an operation.
    async fn lost_leadership(&self) -> Status {
        match self.ensure_leader().await {
            Err(s) => s,
            Ok(()) => indeterminate("leadership changed during the call; check ClusterStatus and send it again"),
        }
    }

    async fn membership_now(&self) -> Result<pb::ClusterMembership, Status> {
        let m = self.b.node.metrics();
        let committed = m.committed_membership_config.log_id() == m.membership_config.log_id();
        Ok(membership_pb(&m.membership_config, committed))
    }
}

#[tonic::async_trait]
impl pb::admin_service_server::AdminService for Admin {
    async fn cluster_status(
        &self,
        request: Request<pb::ClusterStatusRequest>,
    ) -> Result<Response<pb::ClusterStatusResponse>, Status> {
        self.b.authenticate_operator(&request)?;
        let m = self.b.node.metrics();
        let role = if m.running_state.is_err() {
            pb::RaftRole::Shutdown
        } else if m.state.is_leader() {
            pb::RaftRole::Leader
        } else if m.state.is_follower() {
            pb::RaftRole::Follower
        } else if m.state.is_candidate() {
            pb::RaftRole::Candidate
        } else if m.state.is_learner() {
            pb::RaftRole::Learner
        } else {
            pb::RaftRole::Shutdown
        };
        let membership = m.membership_config.membership();
        // Never this node unless it leads (a restarted node remembers its old leadership).
        let leader_id = kungfu_raft::node::leader_in(&m);
        let leader_api_addr =
            leader_id.and_then(|l| membership.get_node(&l)).map(|n| n.api.clone()).unwrap_or_default();
        let last = m.last_log_index;
        let voters: Vec<u64> = membership.voter_ids().collect();
        let replication = match &m.replication {
            Some(r) => r
                .iter()
                .filter(|(id, _)| **id != m.id)
                .map(|(id, matched)| {
                    let matched_index = matched.as_ref().map(|l| l.index);
                    let behind = match (last, matched_index) {
                        (Some(last), Some(at)) => last.saturating_sub(at),
                        (Some(last), None) => last + 1,
                        (None, _) => 0,
                    };
                    pb::ReplicationProgress {
                        node_id: *id,
                        matched_index,
                        lag_entries: behind,
                        voter: voters.contains(id),
                    }
                })
                .collect(),
            None => Vec::new(),
        };
        let committed = m.committed_membership_config.log_id() == m.membership_config.log_id();
        Ok(Response::new(pb::ClusterStatusResponse {
            node_id: self.b.node.id,
            cluster_id: self.b.config.cluster_id.clone(),
            role: role as i32,
            term: m.current_term,
            leader_id,
            leader_api_addr,
            last_log_index: last,
            committed_index: m.local_committed.as_ref().map(|l| l.index),
            applied_index: m.last_applied.as_ref().map(|l| l.index),
            purged_index: m.purged.as_ref().map(|l| l.index),
            snapshot_index: m.snapshot.as_ref().map(|l| l.index),
            membership: Some(membership_pb(&m.membership_config, committed)),
            replication,
            fatal_error: m.running_state.as_ref().err().map(|e| e.to_string()).unwrap_or_default(),
        }))
    }

    async fn add_learner(
        &self,
        request: Request<pb::AddLearnerRequest>,
    ) -> Result<Response<pb::AddLearnerResponse>, Status> {
        self.b.authenticate_operator(&request)?;
        let budget = call_budget(&request);
        let new = rq::add_learner_request(request.get_ref())?;
        self.ensure_leader().await?;
        let m = self.b.node.metrics();
        let membership = m.membership_config.membership();
        if membership.voter_ids().any(|v| v == new.node_id) {
            return Err(field_status(
                Code::InvalidState,
                "node_id",
                format!("node {} is already a voter; ChangeMembership demotes a voter to a learner", new.node_id),
            ));
        }
        if let Some(known) = membership.get_node(&new.node_id) {
            if known.raft != new.raft_addr || known.api != new.api_addr {
                return Err(field_status(
                    Code::InvalidState,
                    "node_id",
                    format!(
                        "node {} is already a learner at raft {} / api {}; node ids are never reused for another node",
                        new.node_id, known.raft, known.api
                    ),
                ));
            }
        }
        tracing::info!(node = new.node_id, raft = %new.raft_addr, api = %new.api_addr, "admin: adding a learner");
        let started = std::time::Instant::now();
        let node = Node { raft: new.raft_addr.clone(), api: new.api_addr.clone() };
        match tokio::time::timeout(budget, self.b.node.add_learner(new.node_id, node)).await {
            Ok(Ok(())) => {}
            Ok(Err(WriteError::NotLeader { .. })) => return Err(self.lost_leadership().await),
            Ok(Err(e)) => {
                return Err(indeterminate(format!("adding node {}: {e}; send AddLearner again", new.node_id)));
            }
            Err(_) => {
                return Err(indeterminate(format!(
                    "node {} had not caught up within {budget:?} (it may be added and still catching up, or \
                     unreachable at {}); watch its lag with ClusterStatus, or send AddLearner again",
                    new.node_id, new.raft_addr
                )));
            }
        }
        // openraft calls a learner caught up within `replication_lag_threshold` entries (5,000 by
        // default); here it is caught up when it holds every entry the leader has now.
        let target = self.b.node.metrics().last_log_index;
        let id = new.node_id;
        let left = budget.saturating_sub(started.elapsed());
        let caught_up = self
            .b
            .node
            .raft
            .wait(Some(left))
            .metrics(
                move |m| {
                    let matched = m.replication.as_ref().and_then(|r| r.get(&id).cloned().flatten()).map(|l| l.index);
                    m.replication.is_none() || matched >= target
                },
                "learner caught up",
            )
            .await;
        let m = match caught_up {
            Ok(m) if m.replication.is_none() => return Err(self.lost_leadership().await),
            Ok(m) => m,
            Err(_) => {
                return Err(indeterminate(format!(
                    "node {id} was added as a learner but had not caught up with entry {target:?} within {budget:?}; \
                     watch its lag with ClusterStatus"
                )));
            }
        };
        let matched_index =
            m.replication.as_ref().and_then(|r| r.get(&new.node_id).cloned().flatten()).map(|l| l.index);
        let committed = m.committed_membership_config.log_id() == m.membership_config.log_id();
        Ok(Response::new(pb::AddLearnerResponse {
            membership: Some(membership_pb(&m.membership_config, committed)),
            matched_index,
        }))
    }

    async fn change_membership(
        &self,
        request: Request<pb::ChangeMembershipRequest>,
    ) -> Result<Response<pb::ChangeMembershipResponse>, Status> {
        self.b.authenticate_operator(&request)?;
        let budget = call_budget(&request);
        let change = rq::change_membership_request(request.get_ref())?;
        self.ensure_leader().await?;
        let m = self.b.node.metrics();
        let membership = m.membership_config.membership();
        let settled = m.committed_membership_config.log_id() == m.membership_config.log_id();
        if membership.get_joint_config().len() > 1 || !settled {
            return Err(status(
                Code::InvalidState,
                "a membership change is in progress; wait until ClusterStatus shows one committed voter set",
            ));
        }
        for (i, id) in request.get_ref().voters.iter().enumerate() {
            if membership.get_node(id).is_none() {
                return Err(field_status(
                    Code::InvalidArgument,
                    &format!("voters[{i}]"),
                    format!("node {id} is not a member; add it with AddLearner first"),
                ));
            }
        }
        tracing::info!(voters = ?change.voters, retain = change.retain_learners, "admin: changing the voters");
        match tokio::time::timeout(budget, self.b.node.change_membership(change.voters.clone(), change.retain_learners))
            .await
        {
            Ok(Ok(())) => {}
            Ok(Err(WriteError::NotLeader { .. })) => return Err(self.lost_leadership().await),
            Ok(Err(e)) => {
                return Err(indeterminate(format!(
                    "changing the voters to {:?}: {e}; check ClusterStatus and send it again",
                    change.voters
                )));
            }
            Err(_) => {
                return Err(indeterminate(format!(
                    "the change to voters {:?} was not committed within {budget:?}; check ClusterStatus",
                    change.voters
                )));
            }
        }
        Ok(Response::new(pb::ChangeMembershipResponse { membership: Some(self.membership_now().await?) }))
    }

    async fn transfer_leader(
        &self,
        request: Request<pb::TransferLeaderRequest>,
    ) -> Result<Response<pb::TransferLeaderResponse>, Status> {
        self.b.authenticate_operator(&request)?;
        let budget = call_budget(&request);
        let to = rq::transfer_leader_request(request.get_ref())?;
        self.ensure_leader().await?;
        let m = self.b.node.metrics();
        if !m.membership_config.membership().voter_ids().any(|v| v == to) {
            return Err(field_status(Code::InvalidArgument, "to", format!("node {to} is not a voter")));
        }
        if to != self.b.node.id {
            tracing::info!(to, "admin: transferring leadership");
            self.b
                .node
                .transfer_leader(to)
                .await
                .map_err(|e| indeterminate(format!("transferring leadership to node {to}: {e}")))?;
        }
        let seen = self
            .b
            .node
            .raft
            .wait(Some(budget))
            .metrics(move |m| kungfu_raft::node::leader_in(m) == Some(to), "leader transfer")
            .await
            .map_err(|_| {
                indeterminate(format!(
                    "node {to} was asked to take over but this node did not see it lead within {budget:?}; \
                     check ClusterStatus and send it again"
                ))
            })?;
        let api = seen.membership_config.membership().get_node(&to).map(|n| n.api.clone()).unwrap_or_default();
        Ok(Response::new(pb::TransferLeaderResponse { leader_id: to, leader_api_addr: api, term: seen.current_term }))
    }

    async fn state_digest(
        &self,
        request: Request<pb::StateDigestRequest>,
    ) -> Result<Response<pb::StateDigestResponse>, Status> {
        self.b.authenticate_operator(&request)?;
        let node = self.b.node.clone();
        let (digest, applied_index) = tokio::task::spawn_blocking(move || node.digest())
            .await
            .map_err(|e| status(Code::Unavailable, format!("computing the state digest: {e}")))?
            .map_err(|e| status(Code::Unavailable, format!("computing the state digest: {e}")))?;
        Ok(Response::new(pb::StateDigestResponse {
            node_id: self.b.node.id,
            applied_index,
            sha256: hex::encode(digest),
        }))
    }

    async fn export_facts(
        &self,
        request: Request<pb::ExportFactsRequest>,
    ) -> Result<Response<pb::ExportFactsResponse>, Status> {
        self.b.authenticate_operator(&request)?;
        let after = request.get_ref().after_seq;
        let limit = match request.get_ref().limit {
            0 => 1000,
            n => n.min(10_000),
        } as usize;
        let node = self.b.node.clone();
        let page = tokio::task::spawn_blocking(move || {
            node.state.read(|s| -> Result<pb::ExportFactsResponse, kungfu_core::StateError> {
                use kungfu_core::StateExt;
                let last_seq = s.counters()?.unwrap_or_default().seq;
                let mut facts = Vec::new();
                let mut taken: Option<u64> = None;
                let mut more = false;
                for f in kungfu_core::rebuild::all_facts(s)?.into_iter().filter(|f| f.seq > after) {
                    // A page ends between two actions, never inside one (L2: one action, all its facts).
                    if facts.len() >= limit && taken != Some(f.seq) {
                        more = true;
                        break;
                    }
                    taken = Some(f.seq);
                    facts.push(kungfu_core::codec::encode(&f));
                }
                Ok(pb::ExportFactsResponse { facts, next_after_seq: if more { taken } else { None }, last_seq })
            })
        })
        .await
        .map_err(|e| status(Code::Unavailable, format!("exporting facts: {e}")))?
        .map_err(|e| status(Code::Unavailable, format!("exporting facts: {e}")))?;
        Ok(Response::new(page))
    }

    async fn trigger_snapshot(
        &self,
        request: Request<pb::TriggerSnapshotRequest>,
    ) -> Result<Response<pb::TriggerSnapshotResponse>, Status> {
        self.b.authenticate_operator(&request)?;
        let budget = call_budget(&request);
        self.ensure_leader().await?;
        let target = self.b.node.applied_index();
        tracing::info!(applied = ?target, "admin: building a snapshot");
        let start = std::time::Instant::now();
        let m = loop {
            self.b.node.trigger_snapshot().await.map_err(|e| indeterminate(format!("building a snapshot: {e}")))?;
            // A snapshot already being built may end before `target`: ask again until one covers it.
            let left = budget.saturating_sub(start.elapsed());
            let wait = left.min(Duration::from_secs(2));
            let r = self
                .b
                .node
                .raft
                .wait(Some(wait))
                .metrics(move |m| m.snapshot.as_ref().map(|s| s.index) >= target, "snapshot")
                .await;
            match r {
                Ok(m) => break m,
                Err(_) if start.elapsed() < budget => continue,
                Err(_) => {
                    return Err(indeterminate(format!(
                        "no snapshot covered entry {target:?} within {budget:?}; check ClusterStatus"
                    )));
                }
            }
        };
        Ok(Response::new(pb::TriggerSnapshotResponse {
            snapshot_index: m.snapshot.as_ref().map(|l| l.index),
            purged_index: m.purged.as_ref().map(|l| l.index),
        }))
    }

    async fn backup(&self, request: Request<pb::BackupRequest>) -> Result<Response<pb::BackupResponse>, Status> {
        self.b.authenticate_operator(&request)?;
        let target = rq::backup_request(request.get_ref())?;
        if self.b.node.applied_index().is_none() {
            return Err(status(Code::InvalidState, "this node has applied nothing yet: there is no state to back up"));
        }
        let state = self.b.node.state.clone();
        let cluster_id = self.b.config.cluster_id.clone();
        let node_id = self.b.node.id;
        tracing::info!(target = %target.display(), "admin: writing a backup");
        let dir = target.clone();
        let written = tokio::task::spawn_blocking(move || write_backup(&state, &cluster_id, node_id, &dir))
            .await
            .map_err(|e| status(Code::Unavailable, format!("the backup task failed: {e}")))?;
        match written {
            Ok(manifest) => {
                tracing::info!(target = %target.display(), applied = manifest.last_applied_index, sha256 = %manifest.sha256, "admin: backup written");
                Ok(Response::new(pb::BackupResponse {
                    manifest: Some(manifest.to_pb()),
                    target_dir: target.display().to_string(),
                }))
            }
            Err(BackupError::Exists) => Err(field_status(
                Code::InvalidArgument,
                "target_dir",
                format!(
                    "{} already exists; a backup never overwrites anything: name a new directory",
                    target.display()
                ),
            )),
            Err(BackupError::NoParent) => Err(field_status(
                Code::InvalidArgument,
                "target_dir",
                format!("the parent directory of {} does not exist on this node", target.display()),
            )),
            Err(BackupError::Failed(e)) => {
                tracing::error!(target = %target.display(), error = %e, "admin: backup failed");
                Err(status(Code::Unavailable, format!("the backup failed and was removed: {e}")))
            }
        }
    }
}

/// What `manifest.toml` of a backup directory holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackupManifest {
    pub format: u32,
    pub cluster_id: String,
    pub node_id: u64,
    pub last_applied_index: u64,
    pub last_applied_term: u64,
    /// The archive's file name inside the backup directory.
    pub archive: String,
    pub archive_bytes: u64,
    /// SHA-256 of the archive, hex.
    pub sha256: String,
    pub created_at_unix_micros: i64,
}

impl BackupManifest {
    pub fn to_pb(&self) -> pb::BackupManifest {
        pb::BackupManifest {
            format: self.format,
            cluster_id: self.cluster_id.clone(),
            node_id: self.node_id,
            last_applied_index: self.last_applied_index,
            last_applied_term: self.last_applied_term,
            archive: self.archive.clone(),
            archive_bytes: self.archive_bytes,
            sha256: self.sha256.clone(),
            created_at_unix_micros: self.created_at_unix_micros,
        }
    }

    /// Reads and checks the manifest of a backup directory.
    pub fn read(backup_dir: &Path) -> anyhow::Result<BackupManifest> {
        let path = backup_dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            anyhow::anyhow!("{}: {e} (a backup directory without {MANIFEST} is incomplete)", path.display())
        })?;
        let m: BackupManifest = toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        if m.format != MANIFEST_FORMAT {
            anyhow::bail!(
                "{}: backup format {} is not supported (this build reads {MANIFEST_FORMAT})",
                path.display(),
                m.format
            );
        }
        let plain = !m.archive.is_empty()
            && !m.archive.starts_with('.')
            && m.archive.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
        if !plain {
            anyhow::bail!("{}: archive {:?} is not a file name in the backup directory", path.display(), m.archive);
        }
        Ok(m)
    }
}

/// Why a backup was not written.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("the target directory already exists")]
    Exists,
    #[error("the parent of the target directory does not exist")]
    NoParent,
    #[error("{0}")]
    Failed(String),
}

/// Writes a backup of `state` into the new directory `target` (which must not exist): the
/// snapshot archive, then `manifest.toml`. On failure nothing is left behind.
pub fn write_backup(
    state: &StateStore,
    cluster_id: &str,
    node_id: u64,
    target: &Path,
) -> Result<BackupManifest, BackupError> {
    match std::fs::create_dir(target) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Err(BackupError::Exists),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(BackupError::NoParent),
        Err(e) => return Err(BackupError::Failed(format!("{}: {e}", target.display()))),
    }
    let written = fill_backup(state, cluster_id, node_id, target);
    if written.is_err() {
        let _ = std::fs::remove_dir_all(target);
    }
    written.map_err(|e| BackupError::Failed(e.to_string()))
}

fn decode_meta<T: serde::de::DeserializeOwned>(dir: &Path, key: &str) -> Result<Option<T>, kungfu_storage::Error> {
    match read_checkpoint_meta(dir, key)? {
        Some(b) => Ok(Some(envelope::decode(&b, key)?)),
        None => Ok(None),
    }
}

fn fill_backup(state: &StateStore, cluster_id: &str, node_id: u64, target: &Path) -> anyhow::Result<BackupManifest> {
    let store = SnapshotStore::open(target, 1)?;
    // The meta is read from the checkpoint itself, so it describes exactly what the archive holds.
    let (archive, applied) = store.build_with(state, |checkpoint| {
        let applied: LogId = decode_meta(checkpoint, LAST_APPLIED)?
            .ok_or_else(|| kungfu_storage::Error::Corrupt { what: "the state has no applied entry".into() })?;
        let membership: StoredMembership = decode_meta(checkpoint, MEMBERSHIP)?.unwrap_or_default();
        let name = format!("state-{:020}-{}-{}", applied.index, applied.leader_id.term, applied.leader_id.node_id);
        let meta = SnapshotMeta { last_log_id: Some(applied.clone()), last_membership: membership };
        Ok((name, envelope::encode(&meta), applied))
    })?;
    let file = archive.path.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default();
    let manifest = BackupManifest {
        format: MANIFEST_FORMAT,
        cluster_id: cluster_id.to_string(),
        node_id,
        last_applied_index: applied.index,
        last_applied_term: applied.leader_id.term,
        archive: file,
        archive_bytes: archive.len,
        sha256: hex::encode(archive.sha256),
        created_at_unix_micros: now_unix_micros(),
    };
    write_synced(&target.join(MANIFEST), toml::to_string(&manifest)?.as_bytes())?;
    sync_dir(target)?;
    Ok(manifest)
}

fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Syncs every file and directory under `dir` to disk.
fn sync_tree(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            sync_tree(&path)?;
        } else {
            std::fs::File::open(&path)?.sync_all()?;
        }
    }
    sync_dir(dir)
}

/// What a restore produced.
#[derive(Clone, Debug)]
pub struct Restored {
    pub manifest: BackupManifest,
    pub data_dir: PathBuf,
}

/// Creates the data directory `data_dir` (absent or empty) for the node `identity`, reachable at
/// `node`, from the backup in `backup_dir`: the archive is checked against the manifest's SHA-256
/// and size, its state becomes the node's state store, and the log is empty. The membership kept
/// with the state is replaced by this node alone, so a node started on the directory is a
/// one-node cluster that serves the backed-up state (it does not initialize a new cluster: its
/// state already has applied entries). The directory is built beside `data_dir` and renamed into
/// place last, so an interrupted restore leaves no directory a node would start on.
pub async fn restore(backup_dir: &Path, data_dir: &Path, identity: &Identity, node: Node) -> anyhow::Result<Restored> {
    let manifest = BackupManifest::read(backup_dir)?;
    let archive_path = backup_dir.join(&manifest.archive);
    let (len, sha) = file_digest(&archive_path)?;
    if hex::encode(sha) != manifest.sha256 || len != manifest.archive_bytes {
        anyhow::bail!(
            "{}: SHA-256 {} and size {len} do not match the manifest ({} and {}): the backup is damaged",
            archive_path.display(),
            hex::encode(sha),
            manifest.sha256,
            manifest.archive_bytes
        );
    }
    match std::fs::read_dir(data_dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                anyhow::bail!("{} is not empty: restore only into a new or empty directory", data_dir.display());
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => anyhow::bail!("{}: {e}", data_dir.display()),
    }
    let name = data_dir
        .file_name()
        .ok_or_else(|| anyhow::anyhow!("{} does not name a directory", data_dir.display()))?
        .to_string_lossy()
        .to_string();
    let parent = data_dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    // The scratch directory of restores into `data_dir`; a leftover is an interrupted restore.
    let staging = parent.join(format!(".{name}.restoring"));
    if staging.exists() {
        std::fs::remove_dir_all(&staging)?;
    }
    let built = build_restored(&staging, &archive_path, &manifest, identity, node).await;
    let applied = match built {
        Ok(a) => a,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e);
        }
    };
    sync_tree(&staging)?;
    if data_dir.exists() {
        std::fs::remove_dir(data_dir)?;
    }
    std::fs::rename(&staging, data_dir)?;
    sync_dir(parent)?;
    tracing::info!(data_dir = %data_dir.display(), applied = applied.index, "restored from a backup");
    Ok(Restored { manifest, data_dir: data_dir.to_path_buf() })
}

async fn build_restored(
    staging: &Path,
    archive_path: &Path,
    manifest: &BackupManifest,
    identity: &Identity,
    node: Node,
) -> anyhow::Result<LogId> {
    let stores = DataDir::new(staging).open(identity, OpenMode::CreateIfEmpty, 2)?;
    let mut sha256 = [0u8; 32];
    hex::decode_to_slice(&manifest.sha256, &mut sha256)?;
    let stem = manifest.archive.trim_end_matches(".snap").replace('.', "_");
    let archive = SnapshotArchive { name: stem, path: archive_path.to_path_buf(), len: manifest.archive_bytes, sha256 };
    // Verifies the SHA-256 again as it unpacks, then swaps the state store for the backup's.
    stores.snapshots.install(&archive, &stores.state)?;
    let applied = kungfu_raft::node::adopt_restored_state(&stores, identity.node_id, node).await?;
    if applied.index != manifest.last_applied_index || applied.leader_id.term != manifest.last_applied_term {
        anyhow::bail!(
            "the archive holds entry {} of term {}, the manifest says {} of term {}",
            applied.index,
            applied.leader_id.term,
            manifest.last_applied_index,
            manifest.last_applied_term
        );
    }
    drop(stores);
    Ok(applied)
}

/// [`restore`] for the node a configuration describes: its data directory, identity, and the
/// raft and API addresses it advertises (so the restored membership names where it runs).
pub async fn restore_for(backup_dir: &Path, config: &Config) -> anyhow::Result<Restored> {
    config.validate()?;
    let identity = Identity { cluster_id: config.cluster_id.clone(), node_id: config.node_id };
    let node = Node { raft: config.raft_advertise(), api: config.api_advertise() };
    restore(backup_dir, &config.data_dir, &identity, node).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_parse_and_leave_a_margin() {
        assert_eq!(parse_grpc_timeout("5S"), Some(Duration::from_secs(5)));
        assert_eq!(parse_grpc_timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse_grpc_timeout("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_grpc_timeout("7u"), Some(Duration::from_micros(7)));
        for bad in ["", "S", "5", "5x", "123456789S", "-1S"] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad}");
        }
        let mut req = Request::new(());
        assert_eq!(call_budget(&req), DEFAULT_CALL_BUDGET);
        req.set_timeout(Duration::from_secs(10));
        assert_eq!(call_budget(&req), Duration::from_secs(9));
    }
}
