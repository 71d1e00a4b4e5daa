//! Clusters of real replicas in one process: real RocksDB directories, real tonic sockets on
//! loopback, real openraft. Every wait is a poll with a bound; nothing depends on timing luck.

use kungfu_core::{Action, Command, PostBody, Principal, Receipt, StateExt};
use kungfu_raft::{NodeConfig, NodeId, RaftNode, RaftTuning, Response, WriteError};
use kungfu_storage::OpenMode;
use kungfu_types::{AgentId, Content, IdempotencyKey, ThreadId, Timestamp};
use openraft::async_runtime::WatchReceiver;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tempfile::TempDir;

const CLUSTER: &str = "test-cluster";
/// Every poll gives up after this long: a failure, never a hang.
const BOUND: Duration = Duration::from_secs(30);

struct Cluster {
    nodes: BTreeMap<NodeId, RaftNode>,
    dirs: BTreeMap<NodeId, TempDir>,
    /// A restarted node listens where it listened before: the membership holds its address.
    addrs: BTreeMap<NodeId, std::net::SocketAddr>,
    tuning: RaftTuning,
    clock: u64,
    keys: u64,
}

fn config(id: NodeId, dir: &TempDir, listen: std::net::SocketAddr, tuning: &RaftTuning, mode: OpenMode) -> NodeConfig {
    let mut cfg = NodeConfig::new(id, CLUSTER, dir.path(), listen);
    cfg.raft = tuning.clone();
    cfg.open_mode = mode;
    cfg
}

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

impl Cluster {
    async fn new(n: u64, tuning: RaftTuning) -> Cluster {
        let mut c = Cluster {
            nodes: BTreeMap::new(),
            dirs: BTreeMap::new(),
            addrs: BTreeMap::new(),
            tuning,
            clock: 1_000_000,
            keys: 0,
        };
        for id in 1..=n {
            c.start(id, OpenMode::CreateIfEmpty).await;
        }
        let members: BTreeMap<NodeId, kungfu_raft::Node> = c.nodes.iter().map(|(id, n)| (*id, n.node())).collect();
        c.nodes[&1].initialize(members).await.expect("initialize");
        c.leader().await;
        c
    }

    async fn start(&mut self, id: NodeId, mode: OpenMode) {
        let dir = self.dirs.entry(id).or_insert_with(|| TempDir::new().expect("tempdir"));
        let listen = self.addrs.get(&id).copied().unwrap_or_else(|| "127.0.0.1:0".parse().expect("addr"));
        // A node stopped in this process releases its RocksDB locks when the last of its
        // background tasks drops the stores, which can trail `shutdown` on a loaded machine: a
        // restart waits for the lock (bounded), as a new process would wait for the old to exit.
        let started = std::time::Instant::now();
        let node = loop {
            match RaftNode::start(config(id, dir, listen, &self.tuning, mode)).await {
                Ok(node) => break node,
                Err(e) if e.to_string().contains("lock") && started.elapsed() < Duration::from_secs(30) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("start node: {e:?}"),
            }
        };
        self.addrs.insert(id, node.addr);
        self.nodes.insert(id, node);
    }

    async fn stop(&mut self, id: NodeId) {
        if let Some(n) = self.nodes.remove(&id) {
            n.shutdown().await;
        }
    }

    /// The node every running node agrees is leader.
    async fn leader(&self) -> NodeId {
        poll("a leader", || {
            let leaders: BTreeSet<Option<NodeId>> = self.nodes.values().map(|n| n.leader()).collect();
            match leaders.into_iter().collect::<Vec<_>>().as_slice() {
                [Some(l)] if self.nodes.contains_key(l) => Some(*l),
                _ => None,
            }
        })
        .await
    }

    fn cmd(&mut self, principal: Principal, action: Action) -> Command {
        self.clock += 1_000;
        self.keys += 1;
        Command::new(
            principal,
            action,
            Some(IdempotencyKey::new(format!("key-{}", self.keys)).expect("key")),
            Timestamp(self.clock),
        )
    }

    /// Writes through whichever node is leader, following redirects.
    async fn write(&self, cmd: &Command) -> (Receipt, u64) {
        let start = std::time::Instant::now();
        loop {
            let leader = self.leader().await;
            match self.nodes[&leader].write(cmd.clone()).await {
                Ok((Response::Applied { outcome: Ok(r), .. }, log_id)) => return (r, log_id.index),
                Ok(other) => panic!("write was not applied: {other:?}"),
                // Every command carries an idempotency key, so asking again after a leader moved
                // (or left the outcome unknown) applies it at most once (L3).
                Err(WriteError::NotLeader { .. } | WriteError::NotCaughtUp(_) | WriteError::Indeterminate(_)) => {}
                Err(e) => panic!("write failed: {e}"),
            }
            assert!(start.elapsed() < BOUND, "no leader accepted the write");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn register(&mut self, n: u64) -> Vec<(Command, Receipt)> {
        let mut out = Vec::new();
        for i in 0..n {
            let secret = format!("kf_test_secret_{i}_{}", self.keys);
            let cmd = self.cmd(
                Principal::Registrar,
                Action::RegisterAgent {
                    key_hash: kungfu_core::secret::hash_secret(&secret),
                    key_fingerprint: kungfu_core::secret::fingerprint(&secret),
                },
            );
            let (r, _) = self.write(&cmd).await;
            out.push((cmd, r));
        }
        out
    }

    /// Agent 1 creates a thread and posts `n` entries.
    async fn traffic(&mut self, n: u64) -> Vec<(Command, Receipt)> {
        let mut out = Vec::new();
        let create =
            self.cmd(Principal::Agent(AgentId(1)), Action::CreateThread { subject: Content::from("t"), grant: None });
        let (r, _) = self.write(&create).await;
        let kungfu_core::ActionResult::ThreadCreated { thread, .. } = r.result else { panic!("{r:?}") };
        out.push((create, r));
        for i in 0..n {
            let post = self.cmd(
                Principal::Agent(AgentId(1)),
                Action::Post {
                    thread,
                    body: PostBody::Content(Content::from(format!("entry {i}"))),
                    reply_to: None,
                    ask: None,
                    task_ref: None,
                    assignment: None,
                },
            );
            let (r, _) = self.write(&post).await;
            out.push((post, r));
        }
        out
    }

    /// Waits until every running node has applied at least `index`, then returns their digests.
    async fn digests_at(&self, index: u64) -> BTreeMap<NodeId, [u8; 32]> {
        poll("every node to apply", || self.nodes.values().all(|n| n.applied_index() >= Some(index)).then_some(()))
            .await;
        // Everyone is at or past `index`; wait until they are all at the same index.
        poll("equal applied indexes", || {
            let idx: BTreeSet<Option<u64>> = self.nodes.values().map(|n| n.applied_index()).collect();
            (idx.len() == 1).then_some(())
        })
        .await;
        self.nodes.iter().map(|(id, n)| (*id, n.digest().expect("digest").0)).collect()
    }

    async fn shutdown(mut self) {
        let ids: Vec<NodeId> = self.nodes.keys().copied().collect();
        for id in ids {
            self.stop(id).await;
        }
    }
}

fn fast() -> RaftTuning {
    RaftTuning {
        heartbeat_interval: Duration::from_millis(50),
        election_timeout_min: Duration::from_millis(200),
        election_timeout_max: Duration::from_millis(400),
        ..RaftTuning::default()
    }
}

fn all_equal(d: &BTreeMap<NodeId, [u8; 32]>) -> bool {
    d.values().collect::<BTreeSet<_>>().len() == 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_apply_every_action_and_agree_on_the_state_digest() {
    let mut c = Cluster::new(3, fast()).await;
    c.register(3).await;
    let writes = c.traffic(20).await;
    let last = c.write(&writes[0].0).await.1; // a replay: the same receipt, and a fresh log index
    let d = c.digests_at(last).await;
    assert_eq!(d.len(), 3);
    assert!(all_equal(&d), "digests differ: {d:?}");
    // Every node holds every entry.
    for n in c.nodes.values() {
        let t = n.state.read(|s| s.thread(ThreadId(1))).expect("read").expect("thread");
        assert_eq!(t.last_entry, 20, "node {} has {} entries", n.id, t.last_entry);
    }
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leader_loses_no_acknowledged_action_and_writes_resume() {
    let mut c = Cluster::new(3, fast()).await;
    let mut acked = c.register(2).await;
    acked.extend(c.traffic(10).await);
    let old = c.leader().await;
    c.stop(old).await;
    let new = c.leader().await;
    assert_ne!(new, old);
    // Every acknowledged request is still there: replaying it returns its original receipt.
    // Leadership may still move right after an election (a second term on a loaded machine), so a
    // replay refused as not-leader or not caught up, or whose outcome the move left unknown, asks
    // again who leads, a bounded number of times (a replay is idempotent, L3: asking again is
    // safe, and a lost action would answer a fresh receipt, not an error).
    for (cmd, receipt) in &acked {
        let mut tries = 0;
        loop {
            let at = c.leader().await;
            match c.nodes[&at].write(cmd.clone()).await {
                Ok((Response::Applied { outcome: Ok(r), replayed: true }, _)) => {
                    assert_eq!(&r, receipt);
                    break;
                }
                Err(WriteError::NotLeader { .. } | WriteError::NotCaughtUp(_) | WriteError::Indeterminate(_))
                    if tries < 20 =>
                {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                other => panic!("acknowledged {:?} not found after failover: {other:?}", cmd.action.kind()),
            }
        }
    }
    // Writes resume on the new leader.
    let more = c.traffic(3).await;
    assert_eq!(more.len(), 4);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_catches_up_from_its_data_directory() {
    let mut c = Cluster::new(3, fast()).await;
    c.register(2).await;
    c.traffic(5).await;
    let leader = c.leader().await;
    let follower = *c.nodes.keys().find(|id| **id != leader).expect("follower");
    c.stop(follower).await;
    let writes = c.traffic(10).await;
    let last = c.write(&writes[0].0).await.1;
    // Restart from the same directory; a missing directory would be refused (MustExist).
    c.start(follower, OpenMode::MustExist).await;
    let d = c.digests_at(last).await;
    assert!(all_equal(&d), "digests differ after catch-up: {d:?}");
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_learner_receives_a_snapshot_is_promoted_and_a_node_is_removed() {
    // Snapshot every 20 entries and keep no log behind it, so a new node cannot catch up from the
    // log and must install a snapshot.
    let tuning = RaftTuning { snapshot_after_logs: 20, keep_logs_after_snapshot: 0, ..fast() };
    let mut c = Cluster::new(3, tuning).await;
    c.register(2).await;
    c.traffic(60).await;
    let leader = c.leader().await;
    // Wait until the leader has purged its early log (a snapshot exists and covers it).
    poll("the leader to purge its log", || {
        let m = c.nodes[&leader].raft.metrics().borrow_watched().clone();
        m.purged.filter(|p| p.index > 10).map(|_| ())
    })
    .await;
    c.start(4, OpenMode::CreateIfEmpty).await;
    let node4 = c.nodes[&4].node();
    c.nodes[&leader].add_learner(4, node4).await.expect("add learner");
    let snap_dir = c.dirs[&4].path().join("snapshots");
    poll("node 4 to install a snapshot", || {
        let has = std::fs::read_dir(&snap_dir)
            .ok()?
            .filter_map(|e| e.ok())
            .any(|e| e.file_name().to_string_lossy().ends_with(".meta"));
        has.then_some(())
    })
    .await;
    c.nodes[&leader].change_membership([1, 2, 3, 4].into_iter().collect(), false).await.expect("promote");
    // The installed snapshot (a checkpoint received as a packed stream) is node 4's state after a
    // restart too, and node 4 can send it on: its snapshot directory holds it unpacked.
    let leader = c.leader().await;
    if leader != 4 {
        c.stop(4).await;
        c.start(4, OpenMode::MustExist).await;
    }
    assert!(
        std::fs::read_dir(&snap_dir)
            .expect("snapshots")
            .flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with(".ckpt")),
        "the received snapshot is kept as a checkpoint directory"
    );
    let writes = c.traffic(5).await;
    let last = c.write(&writes[0].0).await.1;
    let d = c.digests_at(last).await;
    assert_eq!(d.len(), 4);
    assert!(all_equal(&d), "digests differ after snapshot install: {d:?}");
    // Remove node 3 (not the leader if we can help it) and keep writing with the other three.
    let leader = c.leader().await;
    let removed = if leader == 3 { 2 } else { 3 };
    let keep: BTreeSet<NodeId> = [1, 2, 3, 4].into_iter().filter(|id| *id != removed).collect();
    c.nodes[&leader].change_membership(keep.clone(), false).await.expect("remove");
    c.stop(removed).await;
    let voters = poll("membership without the removed node", || {
        let m = c.nodes[&c.nodes.keys().next().copied()?].raft.metrics().borrow_watched().clone();
        let voters: BTreeSet<NodeId> = m.membership_config.membership().voter_ids().collect();
        (voters == keep).then_some(voters)
    })
    .await;
    assert!(!voters.contains(&removed));
    let writes = c.traffic(3).await;
    let last = c.write(&writes[0].0).await.1;
    assert!(all_equal(&c.digests_at(last).await));
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_cut_off_by_losing_quorum_is_indeterminate_and_its_retry_has_one_effect() {
    let mut c = Cluster::new(3, fast()).await;
    c.register(1).await;
    let leader = c.leader().await;
    let followers: Vec<NodeId> = c.nodes.keys().copied().filter(|id| *id != leader).collect();
    for f in &followers {
        c.stop(*f).await;
    }
    // The leader appends the write but cannot commit it: the caller must hear "unknown", not "failed".
    let cmd = c.cmd(Principal::Agent(AgentId(1)), Action::CreateThread { subject: Content::from("once"), grant: None });
    let err = c.nodes[&leader].write_within(cmd.clone(), Duration::from_millis(1500)).await.expect_err("cannot commit");
    assert!(matches!(err, WriteError::Indeterminate(_)), "{err}");
    assert!(!err.is_definite());
    // Bring everyone back; whichever way the entry went, a retry with the same key has one effect.
    c.stop(leader).await;
    for id in [leader].into_iter().chain(followers) {
        c.start(id, OpenMode::MustExist).await;
    }
    let (first, _) = c.write(&cmd).await;
    let (again, last) = c.write(&cmd).await;
    assert_eq!(first, again, "the retry returns the original receipt");
    let d = c.digests_at(last).await;
    assert!(all_equal(&d));
    let n = c.nodes.values().next().expect("node");
    let threads = n.state.read(|s| s.scan_all(&kungfu_core::keys::records_prefix())).expect("scan");
    let count = threads.iter().filter(|(_, r)| matches!(r, kungfu_core::Record::Thread(_))).count();
    assert_eq!(count, 1, "exactly one thread was created");
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_can_be_handed_to_a_chosen_node() {
    let mut c = Cluster::new(3, fast()).await;
    c.register(1).await;
    let leader = c.leader().await;
    let target = *c.nodes.keys().find(|id| **id != leader).expect("another node");
    c.nodes[&leader].transfer_leader(target).await.expect("transfer");
    let new = poll("leadership to move", || {
        let l = c.nodes.values().map(|n| n.leader()).collect::<BTreeSet<_>>();
        (l.len() == 1 && l.contains(&Some(target))).then_some(target)
    })
    .await;
    assert_eq!(new, target);
    // The new leader takes writes.
    assert_eq!(c.traffic(2).await.len(), 3);
    c.shutdown().await;
}

/// Issue #19, deliverable 3: every raft RPC names the group it is addressed to, and a node refuses
/// one for a group it does not host with a stable answer (`FAILED_PRECONDITION`, message starting
/// `WRONG_GROUP`) before it reads the payload or stores any snapshot byte. Group 0, the default
/// that old senders leave unwritten, is served as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raft_call_for_a_group_the_node_does_not_host_is_refused_as_wrong_group() {
    use kungfu_raft::pb;
    let c = Cluster::new(1, RaftTuning::default()).await;
    let addr = c.nodes[&1].addr;
    let mut client = pb::raft_client::RaftClient::connect(format!("http://{addr}")).await.expect("connect");
    let msg = |group| pb::RaftMessage { cluster_id: CLUSTER.into(), payload: vec![0xff], group };

    for group in [5, 70_000] {
        let s = client.vote(msg(group)).await.expect_err("another group");
        assert_eq!(s.code(), tonic::Code::FailedPrecondition, "{s:?}");
        assert!(s.message().starts_with(kungfu_raft::service::WRONG_GROUP), "{s:?}");
        assert!(s.message().contains(&format!("group {group}")), "{s:?}");
        let s = client.append_entries(msg(group)).await.expect_err("another group");
        assert!(s.message().starts_with("WRONG_GROUP: a message for group"), "{s:?}");
    }
    // Group 0 passes the group check and reaches the payload (here not a valid one).
    let s = client.vote(msg(0)).await.expect_err("a payload that does not decode");
    assert_eq!(s.code(), tonic::Code::InvalidArgument, "{s:?}");

    let chunk = pb::SnapshotChunk {
        cluster_id: CLUSTER.into(),
        header: vec![1],
        name: "00000000000000000009-1-1".into(),
        total_len: 1,
        sha256: vec![0; 32],
        offset: 0,
        data: vec![1],
        done: true,
        group: 5,
    };
    let s = client.install_snapshot(tokio_stream::iter([chunk])).await.expect_err("another group's snapshot");
    assert_eq!(s.code(), tonic::Code::FailedPrecondition, "{s:?}");
    assert!(s.message().starts_with("WRONG_GROUP"), "{s:?}");
    c.shutdown().await;
}
