//! openraft's own storage conformance suite, run against our RocksDB log and state machine.

use kungfu_core::Limits;
use kungfu_raft::log::RaftLog;
use kungfu_raft::state_machine::StateMachine;
use kungfu_raft::types::TypeConfig;
use kungfu_storage::{DataDir, Identity, OpenMode};
use openraft::StorageError;
use openraft::testing::log::{StoreBuilder, Suite};
use openraft::type_config::TypeConfigExt;
use std::sync::Arc;
use tempfile::TempDir;

struct Builder;

impl StoreBuilder<TypeConfig, RaftLog, StateMachine, TempDir> for Builder {
    async fn build(&self) -> Result<(TempDir, RaftLog, StateMachine), StorageError<TypeConfig>> {
        let td = TempDir::new().map_err(|e| StorageError::read(TypeConfig::err_from_error(&e)))?;
        let stores = DataDir::new(td.path())
            .open(&Identity { cluster_id: "suite".into(), node_id: 1 }, OpenMode::CreateIfEmpty, 2)
            .map_err(|e| StorageError::read(TypeConfig::err_from_error(&e)))?;
        let log = RaftLog::new(stores.log).map_err(|e| StorageError::read(TypeConfig::err_from_error(&e)))?;
        let sm = StateMachine::new(Arc::new(stores.state), stores.snapshots, Limits::default()).expect("state machine");
        Ok((td, log, sm))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openraft_storage_suite_passes_against_the_rocksdb_stores() {
    Suite::test_all(Builder).await.expect("openraft storage suite");
}
