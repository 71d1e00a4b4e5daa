//! The operator calls of the service layer (on gRPC `kungfu.v1.AdminService`,
//! `proto/kungfu/v1/admin.proto`), and restore.
//!
//! Every call needs the operator token: a door authenticates it first
//! ([`Backend::authenticate_operator`], which hands out the [`Operator`] these calls take).
//! `ClusterStatus` and `Backup` are answered by any node from what it knows; the membership calls,
//! leader transfer and snapshots are leader-only, and a follower answers them `NOT_LEADER` with the
//! leader's address exactly as it answers agent writes (the leadership check is a read-index round
//! through [`Backend::read`], so a deposed leader that has not noticed yet does not act either).
//! Calls that wait for an outcome take a `budget`: how long they may wait before answering that
//! the outcome is not known yet.
//!
//! A backup is written by `kungfu_raft::backup` into a backup directory of `kungfu_storage::backup`
//! (a snapshot archive and a `manifest.toml`, written last). [`restore`] turns one into a fresh
//! data directory whose state is the backup and whose log is empty: a node started on it is a
//! one-node cluster serving the backed-up state, to which more nodes are added with `AddLearner`
//! and `ChangeMembership`.

use crate::backend::Backend;
use crate::config::Config;
use crate::credentials::Operator;
use kungfu_api::admin::{NewLearner, NewVoters};
use kungfu_api::pb;
use kungfu_raft::types::StoredMembership;
use kungfu_raft::{Node, WriteError};
use kungfu_storage::Identity;
use kungfu_storage::backup::{BackupError, BackupManifest};
use kungfu_types::{Code, Rejection};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn status(code: Code, message: impl Into<String>) -> Rejection {
    Rejection::new(code, message)
}

fn field_status(code: Code, field: &str, message: impl Into<String>) -> Rejection {
    Rejection::field(code, field, message)
}

/// An outcome not known within the call's budget: the operation may still complete.
fn indeterminate(message: impl Into<String>) -> Rejection {
    status(Code::Unavailable, message)
}

fn cluster_node(id: u64, node: Option<&Node>) -> pb::ClusterNode {
    pb::ClusterNode {
        node_id: id,
        raft_addr: node.map(|n| n.raft.clone()).unwrap_or_default(),
        api_addr: node.map(|n| n.api.clone()).unwrap_or_default(),
    }
}

/// A membership as the operator sees it; `committed` is whether its entry is known committed.
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

/// A written backup: its manifest and the directory it is in.
#[derive(Clone, Debug)]
pub struct Backup {
    pub manifest: BackupManifest,
    pub target_dir: PathBuf,
}

impl Backend {
    /// Leader-only calls: a read-index round confirms this node leads now; otherwise the answer is
    /// the same `NOT_LEADER` (with the leader's address) that agent writes get.
    async fn ensure_leader(&self) -> Result<(), Rejection> {
        self.read(|_, _, _| Ok(())).await
    }

    /// The answer after raft said "not the leader" in the middle of an operation.
    async fn lost_leadership(&self) -> Rejection {
        match self.ensure_leader().await {
            Err(s) => s,
            Ok(()) => indeterminate("leadership changed during the call; check ClusterStatus and send it again"),
        }
    }

    async fn membership_now(&self) -> Result<pb::ClusterMembership, Rejection> {
        let m = self.node.metrics();
        let committed = m.committed_membership_config.log_id() == m.membership_config.log_id();
        Ok(membership_pb(&m.membership_config, committed))
    }

    /// This node's view of the cluster: its raft role and term, the leader, log and snapshot
    /// positions, the membership, (on the leader) each follower's replication progress, and the
    /// bytes of each part of its data directory.
    pub fn cluster_status(&self, _: &Operator) -> pb::ClusterStatusResponse {
        let m = self.node.metrics();
        // A core that panicked reports no error in its metrics (issue #36).
        let fatal = kungfu_raft::fatal::core_stop(&self.node.raft);
        // A walk of the data directory (metadata only, a few hundred files): cheap enough for an
        // operator call, and it shows which part grows (issue #36).
        let usage = kungfu_storage::DataDir::new(&self.config.data_dir).usage();
        let role = if fatal.is_some() {
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
        pb::ClusterStatusResponse {
            node_id: self.node.id,
            cluster_id: self.config.cluster_id.clone(),
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
            fatal_error: fatal.unwrap_or_default(),
            log_bytes: Some(usage.log),
            state_bytes: Some(usage.state),
            snapshots_bytes: Some(usage.snapshots),
            damaged: self.node.damage().map(|d| d.to_string()).unwrap_or_default(),
        }
    }

    /// Adds a learner (leader only) and waits, within `budget`, until it holds every entry the
    /// leader had when it was added.
    pub async fn add_learner(
        &self,
        _: &Operator,
        new: NewLearner,
        budget: Duration,
    ) -> Result<pb::AddLearnerResponse, Rejection> {
        self.ensure_leader().await?;
        let m = self.node.metrics();
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
        match tokio::time::timeout(budget, self.node.add_learner(new.node_id, node)).await {
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
        let target = self.node.metrics().last_log_index;
        let id = new.node_id;
        let left = budget.saturating_sub(started.elapsed());
        let caught_up = self
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
        Ok(pb::AddLearnerResponse { membership: Some(membership_pb(&m.membership_config, committed)), matched_index })
    }

    /// Changes the voters (leader only; members only; one change at a time) and waits, within
    /// `budget`, until the change is committed.
    pub async fn change_membership(
        &self,
        _: &Operator,
        change: NewVoters,
        budget: Duration,
    ) -> Result<pb::ChangeMembershipResponse, Rejection> {
        self.ensure_leader().await?;
        let m = self.node.metrics();
        let membership = m.membership_config.membership();
        let settled = m.committed_membership_config.log_id() == m.membership_config.log_id();
        if membership.get_joint_config().len() > 1 || !settled {
            return Err(status(
                Code::InvalidState,
                "a membership change is in progress; wait until ClusterStatus shows one committed voter set",
            ));
        }
        for (i, id) in change.listed.iter().enumerate() {
            if membership.get_node(id).is_none() {
                return Err(field_status(
                    Code::InvalidArgument,
                    &format!("voters[{i}]"),
                    format!("node {id} is not a member; add it with AddLearner first"),
                ));
            }
        }
        tracing::info!(voters = ?change.voters, retain = change.retain_learners, "admin: changing the voters");
        match tokio::time::timeout(budget, self.node.change_membership(change.voters.clone(), change.retain_learners))
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
        Ok(pb::ChangeMembershipResponse { membership: Some(self.membership_now().await?) })
    }

    /// Hands leadership to voter `to` (leader only) and waits, within `budget`, until this node
    /// sees it lead.
    pub async fn transfer_leader(
        &self,
        _: &Operator,
        to: u64,
        budget: Duration,
    ) -> Result<pb::TransferLeaderResponse, Rejection> {
        self.ensure_leader().await?;
        let m = self.node.metrics();
        if !m.membership_config.membership().voter_ids().any(|v| v == to) {
            return Err(field_status(Code::InvalidArgument, "to", format!("node {to} is not a voter")));
        }
        if to != self.node.id {
            tracing::info!(to, "admin: transferring leadership");
            self.node
                .transfer_leader(to)
                .await
                .map_err(|e| indeterminate(format!("transferring leadership to node {to}: {e}")))?;
        }
        let seen = self
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
        Ok(pb::TransferLeaderResponse { leader_id: to, leader_api_addr: api, term: seen.current_term })
    }

    /// SHA-256 of this node's state and the applied index it is exact at, from one snapshot.
    pub async fn state_digest(&self, _: &Operator) -> Result<pb::StateDigestResponse, Rejection> {
        let node = self.node.clone();
        let (digest, applied_index) = tokio::task::spawn_blocking(move || node.digest())
            .await
            .map_err(|e| status(Code::Unavailable, format!("computing the state digest: {e}")))?
            .map_err(|e| status(Code::Unavailable, format!("computing the state digest: {e}")))?;
        Ok(pb::StateDigestResponse { node_id: self.node.id, applied_index, sha256: hex::encode(digest) })
    }

    /// The recorded facts after sequence number `after`, in global order, at most `limit` (0: a
    /// default of 1,000; at most 10,000), a page never ending inside one action.
    pub async fn export_facts(
        &self,
        _: &Operator,
        after: u64,
        limit: u32,
    ) -> Result<pb::ExportFactsResponse, Rejection> {
        let limit = match limit {
            0 => 1000,
            n => n.min(10_000),
        } as usize;
        let node = self.node.clone();
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
        Ok(page)
    }

    /// Builds a snapshot (leader only) and waits, within `budget`, until one covers every entry
    /// applied when the call arrived.
    pub async fn trigger_snapshot(
        &self,
        _: &Operator,
        budget: Duration,
    ) -> Result<pb::TriggerSnapshotResponse, Rejection> {
        self.ensure_leader().await?;
        let target = self.node.applied_index();
        tracing::info!(applied = ?target, "admin: building a snapshot");
        let start = std::time::Instant::now();
        let m = loop {
            self.node.trigger_snapshot().await.map_err(|e| indeterminate(format!("building a snapshot: {e}")))?;
            // A snapshot already being built may end before `target`: ask again until one covers it.
            let left = budget.saturating_sub(start.elapsed());
            let wait = left.min(Duration::from_secs(2));
            let r = self
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
        Ok(pb::TriggerSnapshotResponse {
            snapshot_index: m.snapshot.as_ref().map(|l| l.index),
            purged_index: m.purged.as_ref().map(|l| l.index),
        })
    }

    /// Writes a backup of this node's state into the new directory `target` on its machine.
    pub async fn backup(&self, _: &Operator, target: PathBuf) -> Result<Backup, Rejection> {
        if self.node.applied_index().is_none() {
            return Err(status(Code::InvalidState, "this node has applied nothing yet: there is no state to back up"));
        }
        let state = self.node.state.clone();
        let cluster_id = self.config.cluster_id.clone();
        let node_id = self.node.id;
        tracing::info!(target = %target.display(), "admin: writing a backup");
        let dir = target.clone();
        let written =
            tokio::task::spawn_blocking(move || kungfu_raft::backup::write(&state, &cluster_id, node_id, &dir))
                .await
                .map_err(|e| status(Code::Unavailable, format!("the backup task failed: {e}")))?;
        match written {
            Ok(manifest) => {
                tracing::info!(target = %target.display(), applied = manifest.last_applied_index, sha256 = %manifest.sha256, "admin: backup written");
                Ok(Backup { manifest, target_dir: target })
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

/// What a restore produced.
#[derive(Clone, Debug)]
pub struct Restored {
    pub manifest: BackupManifest,
    pub data_dir: PathBuf,
}

/// Creates the data directory `data_dir` (absent or empty) for the node `identity`, reachable at
/// `node`, from the backup in `backup_dir` (see `kungfu_raft::backup::restore`): a node started on
/// it is a one-node cluster that serves the backed-up state.
pub async fn restore(backup_dir: &Path, data_dir: &Path, identity: &Identity, node: Node) -> anyhow::Result<Restored> {
    let manifest = kungfu_raft::backup::restore(backup_dir, data_dir, identity, node).await?;
    tracing::info!(data_dir = %data_dir.display(), applied = manifest.last_applied_index, "restored from a backup");
    Ok(Restored { manifest, data_dir: data_dir.to_path_buf() })
}

/// [`restore`] for the node a configuration describes: its data directory, identity, and the
/// raft and API addresses it advertises (so the restored membership names where it runs).
pub async fn restore_for(backup_dir: &Path, config: &Config) -> anyhow::Result<Restored> {
    config.validate()?;
    let identity = Identity { cluster_id: config.cluster_id.clone(), node_id: config.node_id };
    let node = Node { raft: config.raft_advertise(), api: config.api_advertise() };
    restore(backup_dir, &config.data_dir, &identity, node).await
}
