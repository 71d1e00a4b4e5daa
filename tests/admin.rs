//! The operator service over real `kungfud` processes: cluster status agrees on every node and
//! needs the operator token; leader-only calls on a follower answer NOT_LEADER with the leader's
//! address; a fourth node joins as a learner and is promoted to voter; leadership moves on request;
//! a snapshot is built on request; a backup is verified by its manifest and SHA-256, restored with
//! `kungfud restore` into a new one-node cluster that serves exactly the backed-up state.

use kungfu_api::pb;
use kungfu_api::pb::admin_service_client::AdminServiceClient;
use kungfu_system_tests::*;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use tonic::transport::Channel;

const TOKEN: &str = "operator-token-for-admin-tests";

fn token_setting() -> String {
    format!("operator_token = \"{TOKEN}\"\n")
}

fn admin(channel: &Channel) -> AdminServiceClient<Channel> {
    AdminServiceClient::new(channel.clone())
}

/// A request carrying the operator token and a deadline.
fn op<T>(msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.metadata_mut().insert("authorization", format!("Bearer {TOKEN}").parse().expect("header"));
    r.set_timeout(Duration::from_secs(30));
    r
}

/// A request with this bearer (or none), without the operator token.
fn with_bearer<T>(bearer: &Option<String>, msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    if let Some(b) = bearer {
        r.metadata_mut().insert("authorization", format!("Bearer {b}").parse().expect("header"));
    }
    r
}

fn field(s: &tonic::Status) -> Option<String> {
    kungfu_api::status_rejection(s).and_then(|r| r.field)
}

async fn status(addr: SocketAddr) -> Result<pb::ClusterStatusResponse, tonic::Status> {
    let ch = connect(addr).await;
    admin(&ch).cluster_status(op(pb::ClusterStatusRequest {})).await.map(|r| r.into_inner())
}

fn ids(nodes: &[pb::ClusterNode]) -> Vec<u64> {
    nodes.iter().map(|n| n.node_id).collect()
}

/// Polls every address until `ok` holds for all of their statuses at once (bounded).
async fn statuses_until(
    addrs: &[SocketAddr],
    what: &str,
    ok: impl Fn(&[pb::ClusterStatusResponse]) -> bool,
    logs: impl Fn() -> String,
) -> Vec<pb::ClusterStatusResponse> {
    let start = Instant::now();
    loop {
        let mut all = Vec::new();
        for a in addrs {
            if let Ok(s) = status(*a).await {
                all.push(s);
            }
        }
        if all.len() == addrs.len() && ok(&all) {
            return all;
        }
        assert!(start.elapsed() < BOUND, "never: {what}; last statuses: {all:#?}\n{}", logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every node agrees on one leader that says it leads.
fn agreed_leader(all: &[pb::ClusterStatusResponse]) -> Option<u64> {
    let leader = all.first()?.leader_id?;
    let agree = all.iter().all(|s| s.leader_id == Some(leader));
    let leads = all.iter().any(|s| s.node_id == leader && s.role == pb::RaftRole::Leader as i32);
    (agree && leads).then_some(leader)
}

/// Starts a `kungfud` process from a config file written by `write_config`.
fn launch(id: u64, config: &Path, api: u16, raft: u16) -> NodeProc {
    let addr = |p: u16| format!("127.0.0.1:{p}").parse().expect("addr");
    let mut node = NodeProc::for_config(id, addr(api), addr(raft), config.to_path_buf());
    node.start();
    node
}

fn write_config(path: &Path, node_id: u64, cluster: &str, data: &Path, api: u16, raft: u16, bootstrap: bool) {
    let text = format!(
        "node_id = {node_id}\ncluster_id = \"{cluster}\"\ndata_dir = \"{}\"\napi_listen = \"127.0.0.1:{api}\"\nraft_listen = \"127.0.0.1:{raft}\"\nbootstrap = {bootstrap}\n{}\n[raft]\nheartbeat_ms = 50\nelection_timeout_min_ms = 300\nelection_timeout_max_ms = 600\n",
        data.display(),
        token_setting()
    );
    std::fs::write(path, text).expect("write config");
}

async fn register(api: SocketAddr, key: &str) -> (String, Client) {
    let anon = Client { channel: connect(api).await, key: None };
    register_when_serving(&anon, key, || format!("(the node at {api})")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_needs_the_token_agrees_everywhere_and_leader_calls_move_leadership_and_snapshot() {
    let cluster = Cluster::start(3, &token_setting());
    let addrs: Vec<SocketAddr> = cluster.nodes.values().map(|n| n.api).collect();
    let api_of: BTreeMap<u64, SocketAddr> = cluster.nodes.iter().map(|(id, n)| (*id, n.api)).collect();
    let logs = || cluster.logs();
    // Settled: one leader everyone agrees on, the membership committed, and every node has applied
    // at least the entries that established them (a follower may learn of the leader a moment
    // before it applies anything).
    let settled = |a: &[pb::ClusterStatusResponse]| {
        agreed_leader(a).is_some()
            && a.iter().all(|s| s.membership.as_ref().is_some_and(|m| m.committed) && s.applied_index.is_some())
    };
    let all =
        statuses_until(&addrs, "one leader everyone agrees on, membership committed, applied", settled, logs).await;
    let leader = agreed_leader(&all).expect("leader");

    // Every node: same leader and API address, same voters with the addresses they were started
    // with, one committed voter set, no learners; replication progress only on the leader.
    for s in &all {
        assert_eq!(s.cluster_id, "test");
        assert_eq!(s.leader_api_addr, api_of[&leader].to_string(), "node {}", s.node_id);
        let m = s.membership.as_ref().expect("membership");
        assert_eq!(ids(&m.voters), vec![1, 2, 3], "node {}", s.node_id);
        for v in &m.voters {
            let n = &cluster.nodes[&v.node_id];
            assert_eq!((v.raft_addr.as_str(), v.api_addr.as_str()), (&*n.raft.to_string(), &*n.api.to_string()));
        }
        assert!(m.learners.is_empty());
        assert_eq!(m.configs.len(), 1);
        assert!(m.committed && m.log_index.is_some());
        assert!(s.applied_index.is_some() && s.last_log_index >= s.applied_index);
        assert!(s.fatal_error.is_empty());
        if s.node_id == leader {
            assert_eq!(s.role, pb::RaftRole::Leader as i32);
            let mut followers: Vec<u64> = s.replication.iter().map(|r| r.node_id).collect();
            followers.sort_unstable();
            assert_eq!(followers, [1, 2, 3].into_iter().filter(|i| *i != leader).collect::<Vec<_>>());
            assert!(s.replication.iter().all(|r| r.voter));
        } else {
            assert_eq!(s.role, pb::RaftRole::Follower as i32, "node {}", s.node_id);
            assert!(s.replication.is_empty(), "only the leader reports replication");
        }
    }
    assert_eq!(all.iter().map(|s| s.term).min(), all.iter().map(|s| s.term).max(), "one term");

    // Without the operator token (none, wrong, or an agent's key), nothing is answered or done.
    let (_, agent) = register(api_of[&leader], "reg-a").await;
    let ch = connect(api_of[&leader]).await;
    let untouched = cluster.dir.path().join("backup-without-token");
    let bearers: [Option<String>; 3] = [None, Some("wrong-token-0123456789".into()), agent.key.clone()];
    for bearer in bearers {
        let b = &bearer;
        let c = admin(&ch);
        let errs = [
            c.clone().cluster_status(with_bearer(b, pb::ClusterStatusRequest {})).await.map(|_| ()),
            c.clone()
                .add_learner(with_bearer(
                    b,
                    pb::AddLearnerRequest {
                        node_id: 9,
                        raft_addr: "127.0.0.1:1".into(),
                        api_addr: "127.0.0.1:2".into(),
                    },
                ))
                .await
                .map(|_| ()),
            c.clone()
                .change_membership(with_bearer(
                    b,
                    pb::ChangeMembershipRequest { voters: vec![leader], retain_learners: false },
                ))
                .await
                .map(|_| ()),
            c.clone()
                .transfer_leader(with_bearer(b, pb::TransferLeaderRequest { to: leader % 3 + 1 }))
                .await
                .map(|_| ()),
            c.clone().trigger_snapshot(with_bearer(b, pb::TriggerSnapshotRequest {})).await.map(|_| ()),
            c.clone()
                .backup(with_bearer(b, pb::BackupRequest { target_dir: untouched.display().to_string() }))
                .await
                .map(|_| ()),
        ];
        for (i, e) in errs.into_iter().enumerate() {
            let e = e.expect_err("refused without the operator token");
            assert_eq!(code(&e), "UNAUTHENTICATED", "call {i} with {bearer:?}");
            assert_eq!(e.code(), tonic::Code::Unauthenticated);
        }
    }
    assert!(!untouched.exists(), "a refused backup wrote nothing");
    let after = status(api_of[&leader]).await.expect("status");
    assert_eq!(
        ids(&after.membership.expect("membership").voters),
        vec![1, 2, 3],
        "refused calls changed no membership"
    );
    assert_eq!(after.leader_id, Some(leader), "refused calls moved no leadership");

    // A follower answers every leader-only call NOT_LEADER, naming the leader's API address.
    let follower = [1, 2, 3].into_iter().find(|i| *i != leader).expect("a follower");
    let fc = admin(&connect(api_of[&follower]).await);
    let errs = [
        fc.clone()
            .add_learner(op(pb::AddLearnerRequest {
                node_id: 9,
                raft_addr: "127.0.0.1:1".into(),
                api_addr: "127.0.0.1:2".into(),
            }))
            .await
            .map(|_| ()),
        fc.clone()
            .change_membership(op(pb::ChangeMembershipRequest { voters: vec![1, 2, 3], retain_learners: false }))
            .await
            .map(|_| ()),
        fc.clone().transfer_leader(op(pb::TransferLeaderRequest { to: follower })).await.map(|_| ()),
        fc.clone().trigger_snapshot(op(pb::TriggerSnapshotRequest {})).await.map(|_| ()),
    ];
    for (i, e) in errs.into_iter().enumerate() {
        let e = e.expect_err("a follower refuses leader-only calls");
        assert_eq!(code(&e), "NOT_LEADER", "call {i}: {e}");
        let named = e.metadata().get("leader").and_then(|v| v.to_str().ok()).map(str::to_string);
        assert_eq!(named, Some(api_of[&leader].to_string()), "call {i}");
        assert!(e.message().contains(&api_of[&leader].to_string()), "{}", e.message());
    }

    // Bad requests on the leader name the field at fault, and change nothing.
    let lc = admin(&ch);
    let e = lc
        .clone()
        .change_membership(op(pb::ChangeMembershipRequest { voters: vec![1, 9], retain_learners: true }))
        .await
        .expect_err("node 9 is no member");
    assert_eq!((code(&e), field(&e)), ("INVALID_ARGUMENT".into(), Some("voters[1]".into())), "{e}");
    let e = lc.clone().transfer_leader(op(pb::TransferLeaderRequest { to: 9 })).await.expect_err("not a voter");
    assert_eq!((code(&e), field(&e)), ("INVALID_ARGUMENT".into(), Some("to".into())), "{e}");
    let e = lc
        .clone()
        .add_learner(op(pb::AddLearnerRequest { node_id: follower, raft_addr: "h:1".into(), api_addr: "h:2".into() }))
        .await
        .expect_err("already a voter");
    assert_eq!((code(&e), field(&e)), ("INVALID_STATE".into(), Some("node_id".into())), "{e}");
    assert_eq!(e.code(), tonic::Code::FailedPrecondition);
    let e = lc
        .clone()
        .add_learner(op(pb::AddLearnerRequest { node_id: 9, raft_addr: "no-port".into(), api_addr: "h:2".into() }))
        .await
        .expect_err("malformed address");
    assert_eq!((code(&e), field(&e)), ("INVALID_ARGUMENT".into(), Some("raft_addr".into())), "{e}");

    // TriggerSnapshot: no snapshot yet (the policy is every 10,000 entries); after the call, the
    // leader's snapshot covers at least what was applied when it was asked.
    for i in 0..5 {
        agent
            .memories()
            .create(agent.req(pb::CreateMemoryRequest { idempotency_key: format!("m{i}"), content: content("x") }))
            .await
            .expect("write");
    }
    let before = status(api_of[&leader]).await.expect("status");
    assert_eq!(before.snapshot_index, None, "no snapshot before the call");
    let applied = before.applied_index.expect("applied");
    let snap = lc.clone().trigger_snapshot(op(pb::TriggerSnapshotRequest {})).await.expect("snapshot").into_inner();
    let at = snap.snapshot_index.expect("a snapshot index");
    assert!(at >= applied, "snapshot at {at} covers applied {applied}");
    let after = status(api_of[&leader]).await.expect("status");
    assert!(after.snapshot_index >= Some(at), "status shows the snapshot: {after:?}");

    // TransferLeader: every node comes to see the chosen follower as leader, in a later term.
    let to = follower;
    // An indeterminate answer (UNAVAILABLE, definite = false: "send it again") is retried, as the
    // API asks; the transfer must succeed within the bound.
    let moved = match lc.clone().transfer_leader(op(pb::TransferLeaderRequest { to })).await {
        Ok(m) => m.into_inner(),
        Err(s) if code(&s) == "UNAVAILABLE" => {
            // Not confirmed within the call: the transfer may still complete. It must, within the
            // bound; then the new leader's own status says what the answer would have said.
            statuses_until(&addrs, "the transfer completes", |a| agreed_leader(a) == Some(to), logs).await;
            let s = status(api_of[&to]).await.expect("status of the new leader");
            pb::TransferLeaderResponse { leader_id: to, leader_api_addr: s.leader_api_addr, term: s.term }
        }
        Err(s) => panic!("transfer: {s:?}\n{}", logs()),
    };
    assert_eq!(moved.leader_id, to);
    assert_eq!(moved.leader_api_addr, api_of[&to].to_string());
    assert!(moved.term > all[0].term, "a new term: {} after {}", moved.term, all[0].term);
    let all = statuses_until(&addrs, "everyone sees the new leader", |a| agreed_leader(a) == Some(to), logs).await;
    for s in &all {
        assert_eq!(s.leader_api_addr, api_of[&to].to_string());
        let role = if s.node_id == to { pb::RaftRole::Leader } else { pb::RaftRole::Follower };
        assert_eq!(s.role, role as i32, "node {}", s.node_id);
    }
    // The old leader now refuses leader-only calls and points at the new one.
    let e = lc.clone().trigger_snapshot(op(pb::TriggerSnapshotRequest {})).await.expect_err("no longer leader");
    assert_eq!(code(&e), "NOT_LEADER");
    assert_eq!(e.metadata().get("leader").and_then(|v| v.to_str().ok()), Some(&*api_of[&to].to_string()));
    // Transferring to the node that already leads is answered at once.
    let nc = admin(&connect(api_of[&to]).await);
    let same = nc.clone().transfer_leader(op(pb::TransferLeaderRequest { to })).await.expect("no-op").into_inner();
    assert_eq!(same.leader_id, to);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fourth_node_joins_as_a_learner_and_is_promoted_to_voter() {
    let cluster = Cluster::start(3, &token_setting());
    let addrs: Vec<SocketAddr> = cluster.nodes.values().map(|n| n.api).collect();
    let logs = || cluster.logs();
    let all = statuses_until(&addrs, "a leader", |a| agreed_leader(a).is_some(), logs).await;
    let leader = agreed_leader(&all).expect("leader");
    let leader_api = cluster.nodes[&leader].api;
    // Some state for the new node to catch up on.
    let (_, agent) = register(leader_api, "reg-4").await;
    for i in 0..20 {
        agent
            .memories()
            .create(agent.req(pb::CreateMemoryRequest { idempotency_key: format!("m{i}"), content: content("x") }))
            .await
            .expect("write");
    }

    // Node 4: same cluster id, its own empty data directory, no bootstrap.
    let (api4, raft4) = (free_port(), free_port());
    let cfg4 = cluster.dir.path().join("node4.toml");
    write_config(&cfg4, 4, "test", &cluster.dir.path().join("data4"), api4, raft4, false);
    let node4 = launch(4, &cfg4, api4, raft4);
    let addr4: SocketAddr = format!("127.0.0.1:{api4}").parse().expect("addr");
    let logs4 = || format!("{}\n--- node 4 ---\n{}", cluster.logs(), node4.log());
    let alone = statuses_until(&[addr4], "node 4 serves, in no cluster yet", |_| true, logs4).await;
    assert_eq!(alone[0].role, pb::RaftRole::Learner as i32);
    assert_eq!(alone[0].leader_id, None);
    assert!(alone[0].membership.as_ref().is_none_or(|m| m.voters.is_empty()), "{alone:?}");

    let lc = admin(&connect(leader_api).await);
    let target = status(leader_api).await.expect("status").last_log_index.expect("log");
    let added = lc
        .clone()
        .add_learner(op(pb::AddLearnerRequest {
            node_id: 4,
            raft_addr: format!("127.0.0.1:{raft4}"),
            api_addr: addr4.to_string(),
        }))
        .await
        .unwrap_or_else(|e| panic!("add learner: {e}\n{}", logs4()))
        .into_inner();
    let m = added.membership.expect("membership");
    assert_eq!(ids(&m.voters), vec![1, 2, 3]);
    assert_eq!(
        m.learners,
        vec![pb::ClusterNode { node_id: 4, raft_addr: format!("127.0.0.1:{raft4}"), api_addr: addr4.to_string() }]
    );
    assert!(added.matched_index >= Some(target), "caught up: {:?} vs {target}", added.matched_index);
    // The leader tracks it as a non-voting replica; node 4 knows the leader and has the state.
    let s = status(leader_api).await.expect("status");
    let r4 = s.replication.iter().find(|r| r.node_id == 4).expect("node 4 in replication");
    assert!(!r4.voter);
    let applied = s.applied_index;
    let s4 = statuses_until(
        &[addr4],
        "node 4 applies the leader's state",
        |a| a[0].leader_id == Some(leader) && a[0].applied_index >= applied,
        logs4,
    )
    .await;
    assert_eq!(s4[0].role, pb::RaftRole::Learner as i32);
    // Adding it again with other addresses is refused: ids are never reused for another node.
    let e = lc
        .clone()
        .add_learner(op(pb::AddLearnerRequest { node_id: 4, raft_addr: "10.9.9.9:1".into(), api_addr: "h:2".into() }))
        .await
        .expect_err("conflicting address");
    assert_eq!((code(&e), field(&e)), ("INVALID_STATE".into(), Some("node_id".into())));

    // Promotion: four voters, as every node sees it.
    let changed = lc
        .clone()
        .change_membership(op(pb::ChangeMembershipRequest { voters: vec![1, 2, 3, 4], retain_learners: false }))
        .await
        .unwrap_or_else(|e| panic!("change membership: {e}\n{}", logs4()))
        .into_inner()
        .membership
        .expect("membership");
    assert_eq!(ids(&changed.voters), vec![1, 2, 3, 4]);
    assert!(changed.learners.is_empty());
    assert_eq!(changed.configs, vec![pb::VoterSet { node_ids: vec![1, 2, 3, 4] }]);
    let mut every = addrs.clone();
    every.push(addr4);
    let all = statuses_until(
        &every,
        "four voters everywhere, one leader",
        |a| {
            agreed_leader(a).is_some()
                && a.iter().all(|s| {
                    s.membership.as_ref().is_some_and(|m| {
                        ids(&m.voters) == vec![1, 2, 3, 4]
                            && m.learners.is_empty()
                            && m.configs.len() == 1
                            && m.committed
                    })
                })
        },
        logs4,
    )
    .await;
    let s4 = all.iter().find(|s| s.node_id == 4).expect("node 4");
    assert!(s4.role == pb::RaftRole::Follower as i32 || s4.role == pb::RaftRole::Leader as i32, "{s4:?}");
    let leader_now = agreed_leader(&all).expect("leader");
    let ls = all.iter().find(|s| s.node_id == leader_now).expect("leader status");
    assert_eq!(ls.replication.len(), 3, "the leader replicates to three voters: {ls:?}");
    assert!(ls.replication.iter().all(|r| r.voter));
    // Node 4's voters list carries its own addresses as it was added.
    let me = s4.membership.as_ref().and_then(|m| m.voters.iter().find(|v| v.node_id == 4).cloned()).expect("self");
    assert_eq!(me.api_addr, addr4.to_string());
}

fn sha256_of(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().expect("sha256sum");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().expect("digest").to_string()
}

fn restore_cmd(from: &Path, config: &Path) -> std::process::Output {
    Command::new(kungfud()).arg("restore").arg("--from").arg(from).arg("--config").arg(config).output().expect("run")
}

async fn read_memory(c: &Client, id: &str) -> Result<String, tonic::Status> {
    c.memories()
        .get(c.req(pb::GetMemoryRequest { memory: id.into(), version: None }))
        .await
        .map(|r| String::from_utf8_lossy(&r.into_inner().content.map(|c| c.body).unwrap_or_default()).to_string())
}

async fn create_memory(c: &Client, key: &str, text: &str) -> String {
    let r = c
        .memories()
        .create(c.req(pb::CreateMemoryRequest { idempotency_key: key.into(), content: content(text) }))
        .await
        .expect("create memory")
        .into_inner();
    let Some(pb::receipt::Result::MemoryCreated(pin)) = r.receipt.and_then(|r| r.result) else { panic!("no pin") };
    pin.memory
}

async fn turn(c: &Client) -> Vec<pb::TurnItem> {
    c.turn()
        .get_turn(c.req(pb::GetTurnRequest { cursor: String::new(), page_size: 100 }))
        .await
        .expect("turn")
        .into_inner()
        .items
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_is_verified_and_restores_into_a_new_cluster_serving_the_same_state() {
    let cluster = Cluster::start(1, &token_setting());
    let api = cluster.nodes[&1].api;
    let logs = || cluster.logs();
    // State worth restoring: a memory, and a worker who owes a response in a thread.
    let (_, lead) = register(api, "reg-lead").await;
    let (_, worker) = register(api, "reg-worker").await;
    let created = lead
        .threads()
        .create(lead.req(pb::CreateThreadRequest {
            idempotency_key: "t1".into(),
            subject: content("work"),
            grant: Some(pb::GrantSpec { role: pb::Role::Speaker as i32 }),
        }))
        .await
        .expect("thread")
        .into_inner();
    let Some(pb::receipt::Result::ThreadCreated(t)) = created.receipt.and_then(|r| r.result) else { panic!() };
    worker
        .threads()
        .join(worker.req(pb::JoinRequest { idempotency_key: "j".into(), grant_secret: created.grant_secret }))
        .await
        .expect("join");
    lead.threads()
        .post(lead.req(pb::PostRequest {
            idempotency_key: "p".into(),
            thread: t.thread.clone(),
            body: Some(pb::PostBody { kind: Some(pb::post_body::Kind::Content(pb::Content { body: b"hi".to_vec() })) }),
            reply_to: None,
            ask: None,
            task_ref: None,
            assignment: None,
        }))
        .await
        .expect("post");
    let before = create_memory(&lead, "m1", "written before the backup").await;
    let owed = turn(&worker).await;
    assert_eq!(owed.len(), 1, "the worker owes a response");

    // The backup: a new directory, its manifest naming the applied entry and the archive's hash.
    let applied = status(api).await.expect("status").applied_index.expect("applied");
    let backup_dir = cluster.dir.path().join("backup-1");
    let c = admin(&connect(api).await);
    let resp = c
        .clone()
        .backup(op(pb::BackupRequest { target_dir: backup_dir.display().to_string() }))
        .await
        .unwrap_or_else(|e| panic!("backup: {e}\n{}", logs()))
        .into_inner();
    let m = resp.manifest.expect("manifest");
    assert_eq!(resp.target_dir, backup_dir.display().to_string());
    assert_eq!((m.format, m.cluster_id.as_str(), m.node_id), (1, "test", 1));
    assert_eq!(m.last_applied_index, applied, "the backup holds exactly the applied state");
    assert!(m.last_applied_term >= 1);
    let archive = backup_dir.join(&m.archive);
    assert_eq!(sha256_of(&archive), m.sha256, "the manifest's SHA-256 is the archive's");
    assert_eq!(std::fs::metadata(&archive).expect("archive").len(), m.archive_bytes);
    let text = std::fs::read_to_string(backup_dir.join("manifest.toml")).expect("manifest.toml");
    assert!(text.contains(&format!("last_applied_index = {applied}")), "{text}");
    assert!(text.contains(&format!("sha256 = \"{}\"", m.sha256)), "{text}");
    assert!(text.contains(&format!("archive = \"{}\"", m.archive)), "{text}");

    // A backup never overwrites, and its target must be an absolute path under an existing directory.
    for (target, why) in [
        (backup_dir.display().to_string(), "exists"),
        ("relative/dir".to_string(), "relative"),
        (cluster.dir.path().join("no/such/parent").display().to_string(), "no parent"),
    ] {
        let e = c.clone().backup(op(pb::BackupRequest { target_dir: target })).await.expect_err(why);
        assert_eq!((code(&e), field(&e)), ("INVALID_ARGUMENT".into(), Some("target_dir".into())), "{why}: {e}");
    }
    assert_eq!(sha256_of(&archive), m.sha256, "the refused backup left the first one untouched");

    // Written after the backup: must not be in the restored state.
    let after = create_memory(&lead, "m2", "written after the backup").await;

    // Restore: the new node is node 5 of cluster "restored" on new ports.
    let (api5, raft5) = (free_port(), free_port());
    let data5 = cluster.dir.path().join("data5");
    let cfg5 = cluster.dir.path().join("node5.toml");
    write_config(&cfg5, 5, "restored", &data5, api5, raft5, true);
    // A damaged archive is refused, and leaves no data directory behind.
    let damaged = cluster.dir.path().join("backup-damaged");
    std::fs::create_dir(&damaged).expect("dir");
    for f in ["manifest.toml", m.archive.as_str()] {
        std::fs::copy(backup_dir.join(f), damaged.join(f)).expect("copy");
    }
    let mut bytes = std::fs::read(damaged.join(&m.archive)).expect("read");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x5a;
    std::fs::write(damaged.join(&m.archive), bytes).expect("write");
    let out = restore_cmd(&damaged, &cfg5);
    assert!(!out.status.success(), "a damaged backup is refused");
    assert!(String::from_utf8_lossy(&out.stderr).contains("SHA-256"), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!data5.exists(), "a refused restore leaves no data directory");
    let out = restore_cmd(&backup_dir, &cfg5);
    assert!(out.status.success(), "restore: {}", String::from_utf8_lossy(&out.stderr));
    assert!(data5.join("IDENTITY").exists());
    let out = restore_cmd(&backup_dir, &cfg5);
    assert!(!out.status.success(), "restore never overwrites a data directory");

    // The flag-only form (no config file) builds the same kind of directory from the settings given
    // on the command line, and names the new identity in what it prints.
    let data7 = cluster.dir.path().join("data7");
    let out = Command::new(kungfud())
        .arg("restore")
        .arg("--from")
        .arg(&backup_dir)
        .arg("--data-dir")
        .arg(&data7)
        .args(["--cluster-id", "restored-by-flags", "--node-id", "7"])
        .args(["--api-listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--raft-listen", &format!("127.0.0.1:{}", free_port())])
        .env_remove("KUNGFU_DATA_DIR")
        .output()
        .expect("run");
    assert!(out.status.success(), "flag-only restore: {}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("as node 7 of cluster restored-by-flags"), "{said}");
    let identity = std::fs::read_to_string(data7.join("IDENTITY")).expect("IDENTITY");
    assert!(identity.contains("cluster_id = \"restored-by-flags\"") && identity.contains("node_id = 7"), "{identity}");

    // The restored node: a one-node cluster at its own addresses, leading, with the backup's state.
    let mut node5 = launch(5, &cfg5, api5, raft5);
    let addr5: SocketAddr = format!("127.0.0.1:{api5}").parse().expect("addr");
    let log5 = cfg5.with_extension("log");
    let logs5 =
        || format!("{}\n--- node 5 ---\n{}", cluster.logs(), std::fs::read_to_string(&log5).unwrap_or_default());
    let s5 = statuses_until(&[addr5], "the restored node leads", |a| agreed_leader(a) == Some(5), logs5).await;
    let s5 = &s5[0];
    assert_eq!(s5.cluster_id, "restored");
    let mem = s5.membership.as_ref().expect("membership");
    assert_eq!(
        mem.voters,
        vec![pb::ClusterNode { node_id: 5, raft_addr: format!("127.0.0.1:{raft5}"), api_addr: addr5.to_string() }]
    );
    assert!(mem.learners.is_empty());
    assert!(s5.applied_index >= Some(applied), "{s5:?}");
    assert!(s5.term > m.last_applied_term, "elections continue after the backup's term: {s5:?}");
    // openraft took the restored state as applied and snapshotted: the log starts after it.
    assert_eq!(s5.purged_index, Some(m.last_applied_index), "{s5:?}");
    assert!(s5.snapshot_index >= Some(m.last_applied_index), "{s5:?}");
    assert!(node5.terminate(), "the restored node stops cleanly");

    // Restart it once, so the restored directory also survives a restart; then read through it.
    node5.spawn();
    let lead5 = Client { channel: connect(addr5).await, key: lead.key.clone() };
    let worker5 = Client { channel: connect(addr5).await, key: worker.key.clone() };
    let start = Instant::now();
    let text = loop {
        match read_memory(&lead5, &before).await {
            Ok(t) => break t,
            Err(e) => {
                assert!(start.elapsed() < BOUND, "the restored node never served: {e}\n{}", logs5());
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert_eq!(text, "written before the backup");
    let e = read_memory(&lead5, &after).await.expect_err("written after the backup");
    assert_eq!(code(&e), "NOT_FOUND");
    let owed5 = turn(&worker5).await;
    assert_eq!(owed5, owed, "the worker's turn is the one it had at the backup");
    // The restored cluster takes writes, continuing from the backup's counters.
    let next = create_memory(&lead5, "m3", "written on the restored cluster").await;
    assert_eq!(next, after, "ids continue from the backed-up state");
    assert_eq!(read_memory(&lead5, &next).await.expect("read"), "written on the restored cluster");

    // Grown back: node 6 joins the restored cluster (it can only get the state from the snapshot,
    // the log before it is gone), becomes a voter, takes over, and serves the same state.
    let (api6, raft6) = (free_port(), free_port());
    let cfg6 = cluster.dir.path().join("node6.toml");
    write_config(&cfg6, 6, "restored", &cluster.dir.path().join("data6"), api6, raft6, false);
    let node6 = launch(6, &cfg6, api6, raft6);
    let addr6: SocketAddr = format!("127.0.0.1:{api6}").parse().expect("addr");
    let logs56 = || format!("{}\n--- node 6 ---\n{}", logs5(), node6.log());
    statuses_until(&[addr6], "node 6 serves", |_| true, logs56).await;
    let c5 = admin(&connect(addr5).await);
    c5.clone()
        .add_learner(op(pb::AddLearnerRequest {
            node_id: 6,
            raft_addr: format!("127.0.0.1:{raft6}"),
            api_addr: addr6.to_string(),
        }))
        .await
        .unwrap_or_else(|e| panic!("add learner 6: {e}\n{}", logs56()));
    c5.clone()
        .change_membership(op(pb::ChangeMembershipRequest { voters: vec![5, 6], retain_learners: false }))
        .await
        .unwrap_or_else(|e| panic!("promote 6: {e}\n{}", logs56()));
    c5.clone()
        .transfer_leader(op(pb::TransferLeaderRequest { to: 6 }))
        .await
        .unwrap_or_else(|e| panic!("transfer to 6: {e}\n{}", logs56()));
    let both = statuses_until(&[addr5, addr6], "node 6 leads both", |a| agreed_leader(a) == Some(6), logs56).await;
    for s in &both {
        assert_eq!(ids(&s.membership.as_ref().expect("membership").voters), vec![5, 6]);
    }
    let lead6 = Client { channel: connect(addr6).await, key: lead.key.clone() };
    let worker6 = Client { channel: connect(addr6).await, key: worker.key.clone() };
    assert_eq!(read_memory(&lead6, &before).await.expect("read on 6"), "written before the backup");
    assert_eq!(read_memory(&lead6, &next).await.expect("read on 6"), "written on the restored cluster");
    assert_eq!(turn(&worker6).await, owed);
}

/// StateDigest needs the operator token; after writes stop, every node reports the same applied
/// index with the same digest, and a write moves both the index and the digest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_digests_need_the_token_and_agree_at_one_applied_index() {
    let cluster = Cluster::start(3, &token_setting());
    let addrs: Vec<SocketAddr> = cluster.nodes.values().map(|n| n.api).collect();
    let (_, agent) = register(addrs[0], "digest-writer").await;
    let anon = admin(&connect(addrs[0]).await);
    let denied = anon.clone().state_digest(tonic::Request::new(pb::StateDigestRequest {})).await;
    assert_eq!(code(&denied.expect_err("no token, no digest")), "UNAUTHENTICATED");

    async fn agreed(addrs: &[SocketAddr]) -> pb::StateDigestResponse {
        let start = Instant::now();
        loop {
            let mut all = Vec::new();
            for a in addrs {
                if let Ok(d) = admin(&connect(*a).await).state_digest(op(pb::StateDigestRequest {})).await {
                    all.push(d.into_inner());
                }
            }
            if all.len() == addrs.len() && all.iter().all(|d| d.applied_index == all[0].applied_index) {
                assert!(all.iter().all(|d| d.sha256 == all[0].sha256), "same index, different state: {all:?}");
                assert_eq!(all[0].sha256.len(), 64, "hex SHA-256");
                return all.swap_remove(0);
            }
            assert!(start.elapsed() < BOUND, "nodes never reached one applied index: {all:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let before = agreed(&addrs).await;
    agent
        .memories()
        .create(agent.req(pb::CreateMemoryRequest { idempotency_key: "m".into(), content: content("x") }))
        .await
        .expect("write");
    let after = agreed(&addrs).await;
    assert!(after.applied_index > before.applied_index, "{before:?} -> {after:?}");
    assert_ne!(after.sha256, before.sha256, "a write changes the state digest");
}
