//! A follower whose disk syncs slower than a heartbeat interval is replicated to without a single
//! RPC timing out: replication RPCs have a deadline of their own, not 3/4 of a heartbeat
//! (issue #15). The slow disk is real RocksDB with every log sync held back
//! (`LogStore::set_sync_delay`), so the follower answers as a loaded one does: after its fsync.

use kungfu_core::{Action, Command, Principal};
use kungfu_raft::{NodeConfig, NodeId, RaftNode, Response};
use kungfu_types::{IdempotencyKey, Timestamp};
use std::collections::BTreeMap;
use std::time::Duration;
use tempfile::TempDir;

/// Every poll gives up after this long: a failure, never a hang.
const BOUND: Duration = Duration::from_secs(30);

async fn poll<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = std::time::Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < BOUND, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn register(i: u64) -> Command {
    let secret = format!("kf_slow_follower_secret_{i:08}");
    Command::new(
        Principal::Registrar,
        Action::RegisterAgent {
            key_hash: kungfu_core::secret::hash_secret(&secret),
            key_fingerprint: kungfu_core::secret::fingerprint(&secret),
        },
        Some(IdempotencyKey::new(format!("reg-{i}")).expect("key")),
        Timestamp(1_000_000 + i * 1000),
    )
}

/// The node every node agrees leads.
async fn leader(nodes: &BTreeMap<NodeId, RaftNode>) -> NodeId {
    poll("one leader all nodes agree on", || {
        let seen: Vec<Option<NodeId>> = nodes.values().map(|n| n.leader()).collect();
        match seen.first() {
            Some(Some(l)) if seen.iter().all(|s| *s == Some(*l)) => Some(*l),
            _ => None,
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_syncing_slower_than_a_heartbeat_is_replicated_to_without_a_timeout() {
    let dirs: Vec<TempDir> = (0..3).map(|_| TempDir::new().expect("tempdir")).collect();
    let mut nodes = BTreeMap::new();
    for id in 1..=3u64 {
        let dir = &dirs[(id - 1) as usize];
        let mut cfg = NodeConfig::new(id, "slow-follower", dir.path(), "127.0.0.1:0".parse().expect("addr"));
        // The default heartbeat: openraft's RPC option is then 100 ms, of which 75 ms "soft".
        cfg.raft.heartbeat_interval = Duration::from_millis(100);
        nodes.insert(id, RaftNode::start(cfg).await.expect("start"));
    }
    let members = nodes.iter().map(|(id, n)| (*id, n.node())).collect();
    nodes[&1].initialize(members).await.expect("initialize");
    let mut lead = leader(&nodes).await;
    if lead == 3 {
        nodes[&3].transfer_leader(1).await.expect("transfer");
        poll("node 1 or 2 leads", || nodes[&1].leader().filter(|l| *l != 3)).await;
        lead = leader(&nodes).await;
    }
    // Node 3's disk now takes 150 ms per sync: longer than 3/4 of a heartbeat (75 ms), well
    // within the replication deadline. It answers every AppendEntries (an empty one too, which
    // openraft answers once the earlier writes are flushed) only after such a sync.
    nodes[&3].log.set_sync_delay(Duration::from_millis(150));
    let before = nodes[&lead].rpc_timeouts();

    for i in 0..30 {
        match nodes[&lead].write(register(i)).await {
            Ok((Response::Applied { outcome: Ok(_), .. }, _)) => {}
            Ok(other) => panic!("write {i} was not applied: {other:?}"),
            // The slow follower must not cost the leader its lease either.
            Err(e) => panic!("write {i}: {e}"),
        }
    }
    let target = nodes[&lead].applied_index().expect("applied");
    poll("the slow follower applies every write", || (nodes[&3].applied_index() >= Some(target)).then_some(())).await;
    assert_eq!(
        nodes[&lead].rpc_timeouts() - before,
        0,
        "no AppendEntries to the slow follower ran out of its deadline"
    );
    nodes[&3].log.set_sync_delay(Duration::ZERO);
    for (_, n) in nodes {
        n.shutdown().await;
    }
}
