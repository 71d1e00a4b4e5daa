//! A replica's state backed up, and restored into a new one-node cluster, in raft's terms over the
//! backup directories of `kungfu_storage::backup`: the archive's meta is openraft's snapshot meta
//! read from the checkpoint itself (as for every snapshot, [`checkpoint_snapshot_meta`]), and a
//! restored data directory is adopted by [`adopt_restored_state`] (its membership is this node
//! alone, its vote at the backup's term).

use crate::node::adopt_restored_state;
use crate::state_machine::checkpoint_snapshot_meta;
use crate::types::{Node, NodeId};
use kungfu_storage::backup::{self, BackupError, BackupManifest, Described};
use kungfu_storage::{Identity, StateStore, Stores, envelope};
use std::path::Path;

/// Writes a backup of `state` into the new directory `target` (see `kungfu_storage::backup::write`).
pub fn write(
    state: &StateStore,
    cluster_id: &str,
    node_id: NodeId,
    target: &Path,
) -> Result<BackupManifest, BackupError> {
    backup::write(state, cluster_id, node_id, target, |checkpoint| {
        let meta = checkpoint_snapshot_meta(checkpoint)?;
        let applied = meta
            .last_log_id
            .ok_or_else(|| kungfu_storage::Error::Corrupt { what: "the state has no applied entry".into() })?;
        Ok(Described {
            name: format!("state-{:020}-{}-{}", applied.index, applied.leader_id.term, applied.leader_id.node_id),
            meta: envelope::encode_grouped(kungfu_storage::SHARD, &meta),
            applied_index: applied.index,
            applied_term: applied.leader_id.term,
        })
    })
}

/// Creates the data directory `data_dir` (absent or empty) for the node `identity`, reachable at
/// `node`, from the backup in `backup_dir`: the archive is checked against the manifest, its state
/// becomes the node's state store, and the log is empty. The membership kept with the state is
/// replaced by this node alone, so a node started on the directory is a one-node cluster that
/// serves the backed-up state (it does not initialize a new cluster: its state already has applied
/// entries).
pub async fn restore(
    backup_dir: &Path,
    data_dir: &Path,
    identity: &Identity,
    node: Node,
) -> Result<BackupManifest, kungfu_storage::Error> {
    let node_id = identity.node_id;
    backup::restore(backup_dir, data_dir, identity, async |stores: &Stores| {
        let applied = adopt_restored_state(stores, node_id, node).await?;
        Ok((applied.index, applied.leader_id.term))
    })
    .await
}
