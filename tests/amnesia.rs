//! Issue #33: a node whose disk lost writes it had acknowledged must not help elect a leader that
//! lacks them. Three real `kungfud` processes: writes are acknowledged by nodes 1 and 2 while node
//! 3 is down; node 2 crashes and its raft log's live write-ahead log is cut to half its length (a
//! disk that lost acknowledged data); with node 1 still down, nodes 2 and 3 start. Without the
//! acknowledged mark, node 2 would recover its log to the cut and the two would elect a leader
//! missing the writes, reusing their entry numbers. With it, node 2 reports itself damaged (naming
//! the mark file) and neither votes nor campaigns, so no leader is elected and writes are refused;
//! once node 1 is back, it leads, node 2 catches up and reports whole, and every acknowledged write
//! reads back with its original receipt and content. A follower that loses entries while its
//! leader stays up is sent them again; the leader does not panic on the follower's shorter log.

use kungfu_api::pb;
use kungfu_system_tests::{BOUND, Client, Cluster, agreed_leader, connect, content, register_when_serving};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const TOKEN: &str = "amnesia-operator-token-0123";
/// Acknowledged writes: enough bytes that half of the write-ahead log holds only some of them.
const WRITES: usize = 40;
/// How long nodes 2 and 3 are watched for a leader: many election timeouts of the test clusters
/// (300-600 ms), in which an unprotected pair elects one at once.
const NO_LEADER_WINDOW: Duration = Duration::from_secs(5);

async fn status(api: SocketAddr) -> Option<pb::ClusterStatusResponse> {
    let mut req = tonic::Request::new(pb::ClusterStatusRequest {});
    req.metadata_mut().insert("authorization", format!("Bearer {TOKEN}").parse().expect("header"));
    let admin = pb::admin_service_client::AdminServiceClient::new(connect(api).await);
    admin.clone().cluster_status(req).await.ok().map(|s| s.into_inner())
}

/// The newest write-ahead log file of a node's raft log (RocksDB names them with rising numbers).
fn live_wal(log_dir: &std::path::Path) -> std::path::PathBuf {
    let mut wals: Vec<_> = std::fs::read_dir(log_dir)
        .expect("log dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    wals.sort();
    wals.pop().expect("a write-ahead log file")
}

fn memory_content(i: usize) -> String {
    format!("acknowledged write {i}: {}", "x".repeat(2000))
}

/// The acknowledged writes: each one's idempotency key and receipt.
type Acknowledged = Vec<(String, pb::Receipt)>;

/// A three-node cluster in which nodes 1 and 2 acknowledged [`WRITES`] writes while node 3 was
/// down, then node 2 crashed and lost the second half of its live write-ahead log, and node 1
/// (which holds every write) crashed too. Every node is down when this returns.
async fn node_2_loses_acknowledged_writes() -> (Cluster, Client, Acknowledged) {
    let extra = format!("operator_token = \"{TOKEN}\"\n");
    let mut cluster = Cluster::start(3, &extra);
    agreed_leader(&cluster, TOKEN).await;

    // Writes acknowledged by nodes 1 and 2 alone.
    assert!(cluster.nodes.get_mut(&3).expect("node 3").terminate(), "node 3 stops cleanly");
    let api1 = cluster.nodes[&1].api;
    let anon = Client { channel: connect(api1).await, key: None };
    let (_, agent) = register_when_serving(&anon, "amnesia", || cluster.logs()).await;
    let mut acknowledged = Vec::new();
    for i in 0..WRITES {
        let key = format!("m{i}");
        let req =
            agent.req(pb::CreateMemoryRequest { idempotency_key: key.clone(), content: content(&memory_content(i)) });
        let answer =
            agent.memories().create(req).await.unwrap_or_else(|s| panic!("write {i}: {s}\n{}", cluster.logs()));
        acknowledged.push((key, answer.into_inner().receipt.expect("receipt")));
    }

    // SIGKILL, as a crash: the state store (which writes no WAL) is not flushed at exit, so it
    // cannot stand in for the entries the log loses.
    cluster.nodes.get_mut(&2).expect("node 2").kill();
    cluster.nodes.get_mut(&1).expect("node 1").kill();
    let wal = live_wal(&cluster.dir.path().join("data2").join("log"));
    let len = std::fs::metadata(&wal).expect("wal").len();
    assert!(len > 64 * 1024, "{} holds the writes: {len} bytes", wal.display());
    std::fs::OpenOptions::new().write(true).open(&wal).expect("open wal").set_len(len / 2).expect("cut");
    (cluster, agent, acknowledged)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_lost_acknowledged_entries_elects_no_leader_without_them_and_heals_from_one_with_them() {
    let (mut cluster, agent, acknowledged) = node_2_loses_acknowledged_writes().await;
    let api1 = cluster.nodes[&1].api;
    cluster.nodes.get_mut(&2).expect("node 2").start();
    cluster.nodes.get_mut(&3).expect("node 3").start();
    let (api2, api3) = (cluster.nodes[&2].api, cluster.nodes[&3].api);
    let logs = |c: &Cluster| format!("{}\n--- node 2 ---\n{}", c.nodes[&3].log(), c.nodes[&2].log());

    // Node 2 says it is damaged, naming its mark file, before any leader could have been elected.
    let start = Instant::now();
    let damaged = loop {
        if let Some(s) = status(api2).await {
            break s.damaged;
        }
        assert!(start.elapsed() < BOUND, "node 2 never answered:\n{}", logs(&cluster));
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        damaged.starts_with("repairing: ")
            && damaged.contains("ACKNOWLEDGED")
            && damaged.contains("--accept-data-loss"),
        "node 2 reports the damage, the mark file and the override: {damaged:?}\n{}",
        logs(&cluster)
    );
    let log2 = cluster.nodes[&2].log();
    assert!(log2.lines().any(|l| l.contains("ERROR") && l.contains("the raft log is damaged")), "{log2}");

    // No leader among nodes 2 and 3, for many election timeouts; writes are refused meanwhile.
    let client3 = Client { channel: connect(api3).await, key: agent.key.clone() };
    let start = Instant::now();
    let mut refused = 0;
    while start.elapsed() < NO_LEADER_WINDOW {
        for api in [api2, api3] {
            if let Some(s) = status(api).await {
                assert_ne!(
                    s.role,
                    pb::RaftRole::Leader as i32,
                    "node {} leads without the acknowledged writes:\n{}",
                    s.node_id,
                    logs(&cluster)
                );
                // The leader of their last committed vote, node 1 (down), is all either may still name.
                assert!(
                    !matches!(s.leader_id, Some(2 | 3)),
                    "node {} names leader {:?}:\n{}",
                    s.node_id,
                    s.leader_id,
                    logs(&cluster)
                );
            }
        }
        let req = client3
            .req(pb::CreateMemoryRequest { idempotency_key: format!("refused{refused}"), content: content("no") });
        let write = tokio::time::timeout(Duration::from_secs(2), client3.memories().create(req)).await;
        assert!(!matches!(write, Ok(Ok(_))), "a write was acknowledged without a leader:\n{}", logs(&cluster));
        refused += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(status(api2).await.is_some_and(|s| !s.damaged.is_empty()), "still repairing without a leader");

    // Node 1 is back: it leads, node 2 catches up from it and is whole again.
    cluster.nodes.get_mut(&1).expect("node 1").start();
    let leader = agreed_leader(&cluster, TOKEN).await;
    assert_ne!(leader, 2, "the damaged node does not lead");
    let start = Instant::now();
    loop {
        let s = status(api2).await;
        if s.as_ref().is_some_and(|s| s.damaged.is_empty()) {
            break;
        }
        assert!(start.elapsed() < BOUND, "node 2 never became whole: {s:?}\n{}", cluster.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log2 = cluster.nodes[&2].log();
    assert_eq!(log2.lines().filter(|l| l.contains("the raft log is whole again")).count(), 1, "said once:\n{log2}");
    // A crash (node 1, SIGKILL) and a clean stop (node 3) are no damage.
    for id in [1, 3] {
        let s = status(cluster.nodes[&id].api).await.expect("status");
        assert_eq!(s.damaged, "", "node {id} after its restart");
    }

    // Every acknowledged write: the same receipt (same memory, same entry), the same content.
    let agent1 = Client { channel: connect(api1).await, key: agent.key.clone() };
    let mut ids = Vec::new();
    for (i, (key, receipt)) in acknowledged.iter().enumerate() {
        let req =
            agent1.req(pb::CreateMemoryRequest { idempotency_key: key.clone(), content: content(&memory_content(i)) });
        let replay = agent1.memories().create(req).await.unwrap_or_else(|s| panic!("replay {key}: {s}")).into_inner();
        assert!(replay.replayed, "write {key} is remembered");
        assert_eq!(replay.receipt.as_ref(), Some(receipt), "write {key} keeps its receipt");
        let Some(pb::receipt::Result::MemoryCreated(m)) = receipt.result.clone() else { panic!("receipt {receipt:?}") };
        let read = agent1.req(pb::GetMemoryRequest { memory: m.memory.clone(), version: None });
        let view = agent1.memories().get(read).await.unwrap_or_else(|s| panic!("read {}: {s}", m.memory)).into_inner();
        assert_eq!(view.content, content(&memory_content(i)), "{} keeps its content", m.memory);
        ids.push(m.memory);
    }
    // A new write takes a new number: none of the acknowledged ones is reused.
    let req = agent1.req(pb::CreateMemoryRequest { idempotency_key: "after".into(), content: content("after") });
    let fresh = agent1.memories().create(req).await.expect("a write after the repair").into_inner();
    let Some(pb::receipt::Result::MemoryCreated(m)) = fresh.receipt.and_then(|r| r.result) else { panic!("no memory") };
    assert!(!ids.contains(&m.memory), "{} was already acknowledged", m.memory);
}

/// The same loss, accepted by the operator on node 2 (`--accept-data-loss`) while node 1, the only
/// other node that held the writes, is down: exactly what the mark otherwise prevents. Nodes 2 and
/// 3 elect a leader without the lost writes, and a retried write is taken as new: the override is
/// as dangerous as `docs/operations.md` says, and this sequence is the loss of issue #33.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_the_loss_while_the_majority_lacks_the_writes_elects_a_leader_that_forgot_them() {
    let (mut cluster, agent, acknowledged) = node_2_loses_acknowledged_writes().await;
    let node2 = cluster.nodes.get_mut(&2).expect("node 2");
    node2.env = vec![("KUNGFU_ACCEPT_DATA_LOSS".into(), "true".into())];
    node2.start();
    cluster.nodes.get_mut(&3).expect("node 3").start();
    let (api2, api3) = (cluster.nodes[&2].api, cluster.nodes[&3].api);
    let start = Instant::now();
    loop {
        let mut leads = false;
        for api in [api2, api3] {
            leads |= status(api).await.is_some_and(|s| s.role == pb::RaftRole::Leader as i32);
        }
        if leads {
            break;
        }
        assert!(start.elapsed() < BOUND, "no leader after the override:\n{}", cluster.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log2 = cluster.nodes[&2].log();
    assert!(log2.lines().any(|l| l.contains("WARN") && l.contains("accepted the loss")), "{log2}");
    assert_eq!(status(api2).await.expect("status").damaged, "", "accepted: not repairing");
    // The last acknowledged write is gone: retried, it is done again instead of replayed.
    let (key, receipt) = acknowledged.last().expect("writes");
    let client = Client { channel: connect(api2).await, key: agent.key.clone() };
    let start = Instant::now();
    let retried = loop {
        let req = client.req(pb::CreateMemoryRequest {
            idempotency_key: key.clone(),
            content: content(&memory_content(WRITES - 1)),
        });
        match client.memories().create(req).await {
            Ok(r) => break r.into_inner(),
            Err(s) => assert!(start.elapsed() < BOUND, "the retry never succeeded: {s}\n{}", cluster.logs()),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(!retried.replayed, "write {key} was lost, not replayed");
    assert_ne!(retried.receipt.as_ref(), Some(receipt), "a new receipt for a write acknowledged before");
}

/// A follower that lost acknowledged entries while the leader stayed up: the leader's replication
/// progress says the follower holds entries it no longer has. The leader sends them again (openraft
/// `allow_log_reversion`) instead of panicking ("follower log reversion is not allowed", found by
/// the chaos harness's `flip-byte` nemesis), and the follower, damaged, is whole again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_stayed_up_sends_a_follower_its_lost_entries_again_without_panicking() {
    let extra = format!("operator_token = \"{TOKEN}\"\n");
    let mut cluster = Cluster::start(3, &extra);
    let leader = agreed_leader(&cluster, TOKEN).await;
    let follower = if leader == 1 { 2 } else { 1 };
    let api = cluster.nodes[&leader].api;
    let anon = Client { channel: connect(api).await, key: None };
    let (_, agent) = register_when_serving(&anon, "reverted", || cluster.logs()).await;
    for i in 0..WRITES {
        let req = agent
            .req(pb::CreateMemoryRequest { idempotency_key: format!("r{i}"), content: content(&memory_content(i)) });
        agent.memories().create(req).await.unwrap_or_else(|s| panic!("write {i}: {s}\n{}", cluster.logs()));
    }

    // The follower crashes and loses the second half of its live write-ahead log.
    cluster.nodes.get_mut(&follower).expect("follower").kill();
    let wal = live_wal(&cluster.dir.path().join(format!("data{follower}")).join("log"));
    let len = std::fs::metadata(&wal).expect("wal").len();
    std::fs::OpenOptions::new().write(true).open(&wal).expect("open wal").set_len(len / 2).expect("cut");
    cluster.nodes.get_mut(&follower).expect("follower").start();

    let api_f = cluster.nodes[&follower].api;
    let start = Instant::now();
    loop {
        let s = status(api_f).await;
        let whole_again = cluster.nodes[&follower].log().contains("the raft log is whole again");
        if whole_again && s.as_ref().is_some_and(|s| s.damaged.is_empty()) {
            break;
        }
        assert!(start.elapsed() < BOUND, "the follower never became whole: {s:?}\n{}", cluster.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log_f = cluster.nodes[&follower].log();
    assert!(log_f.lines().any(|l| l.contains("ERROR") && l.contains("the raft log is damaged")), "{log_f}");
    let logs = cluster.logs();
    assert!(!logs.contains("panicked at"), "no node panicked:\n{logs}");
    let leader_log = cluster.nodes[&leader].log();
    assert!(leader_log.contains("follower log is reverted"), "the leader saw the reverted log:\n{leader_log}");
    assert_eq!(agreed_leader(&cluster, TOKEN).await, leader, "the leader kept leading");
    let s = status(api).await.expect("leader status");
    assert_eq!(s.role, pb::RaftRole::Leader as i32, "{s:?}");
}
