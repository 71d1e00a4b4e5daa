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

fn log_id(term: u64, index: u64) -> kungfu_raft::types::LogId {
    let leader = <openraft::alias::LeaderIdOf<TypeConfig> as openraft::vote::RaftLeaderIdExt>::new_committed(term, 1);
    kungfu_raft::types::LogId::new(leader, index)
}

/// Issue #30, one durable log: the state store writes no WAL, so the raft log is the only record
/// of what the state applied since its last flush. A purge first flushes the state, and a purge
/// past what the state then holds is refused: after a crash there would be nothing to apply the
/// missing entries from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_is_never_purged_past_what_the_state_holds_durably() {
    use kungfu_raft::state_machine::LAST_APPLIED;
    use openraft::storage::RaftLogStorage;
    let td = TempDir::new().expect("tempdir");
    let stores = DataDir::new(td.path())
        .open(&Identity { cluster_id: "purge".into(), node_id: 1 }, OpenMode::CreateIfEmpty, 2)
        .expect("open");
    let state = Arc::new(stores.state);
    let mut log = RaftLog::new(stores.log).expect("log").applied_to(state.clone());
    let tables = |dir: &std::path::Path| {
        std::fs::read_dir(dir)
            .expect("state dir")
            .filter(|e| e.as_ref().expect("entry").path().extension().is_some_and(|x| x == "sst"))
            .count()
    };

    // Nothing applied yet: no purge at all.
    let err = log.purge(log_id(1, 3)).await.expect_err("a purge ahead of an empty state");
    assert!(err.to_string().contains("refusing to purge the raft log up to entry 3"), "{err}");

    // Entry 10 applied (in the memtable only: no WAL, no flush yet).
    let applied = kungfu_storage::envelope::encode(&log_id(1, 10));
    state.commit(&Default::default(), &[(LAST_APPLIED, Some(applied))]).expect("commit");
    let before = tables(&td.path().join("state"));
    let err = log.purge(log_id(1, 11)).await.expect_err("a purge past the applied entry");
    assert!(err.to_string().contains("holds entries up to Some(10)"), "{err}");
    log.purge(log_id(1, 10)).await.expect("a purge up to the applied entry");
    assert!(tables(&td.path().join("state")) > before, "the purge flushed the state to its table files first");
}
