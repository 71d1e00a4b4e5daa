//! Replication under stress, against real `kungfud` processes (issue #11):
//!
//! - a follower that fell behind by entries near the content limit catches up: after the load
//!   stops, every node reaches the leader's applied index with the same state digest, within a
//!   bound. The lag is made on purpose (the follower is paused while ~80 MB of entries are
//!   committed), so a catch-up larger than one raft message is certain, not a matter of luck;
//! - a node that refuses a call as NOT_LEADER never names itself as the leader, through repeated
//!   leader kills and restarts under load; without a leader to name it says "retry" with a
//!   `retry_after`.

use kungfu_api::pb;
/// The operator token of these clusters.
const OPERATOR_TOKEN: &str = "replication-operator-token";
use kungfu_system_tests::*;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Near the content limit (256 KiB), the size of the report.
const LARGE: usize = 250 * 1024;
/// Entries committed while one follower is paused: about 80 MB, more than one raft message may
/// carry (64 MiB) and more than openraft's 300-entry batch holds, so catching up needs byte-bounded
/// batches.
const BEHIND: usize = 320;
/// Concurrent writers, each posting to a thread of its own.
const WRITERS: usize = 4;

/// The nodes' settings: operator calls (status, digests) need the token.
fn settings() -> String {
    format!("operator_token = \"{OPERATOR_TOKEN}\"\n")
}

/// An SDK client of every node of `cluster`, acting as `key`.
async fn sdk(cluster: &Cluster, key: Option<String>) -> kungfu_client::Client {
    let endpoints = cluster.nodes.values().map(|n| n.api.to_string()).collect();
    let options = kungfu_client::ClientOptions { max_retries: 40, ..Default::default() };
    kungfu_client::Client::connect(endpoints, key, options).await.expect("sdk connects")
}

/// Each writer posts `per_writer` entries of [`LARGE`] bytes to its own thread, all at once.
async fn post_large(writers: &[(kungfu_client::Client, String)], per_writer: usize) {
    let mut tasks = Vec::new();
    for (w, (c, thread)) in writers.iter().enumerate() {
        let (c, thread) = (c.clone(), thread.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..per_writer {
                let body = vec![b'a' + (w as u8), (i % 251) as u8].repeat(LARGE / 2);
                c.post(kungfu_client::Post::content(&thread, body), None)
                    .await
                    .unwrap_or_else(|e| panic!("writer {w} post {i}: {e}"));
            }
        }));
    }
    for t in tasks {
        t.await.expect("writer task");
    }
}

/// Waits until every node reports one applied index (the leader's, once writes stopped), then
/// checks that their state digests there are equal; each wait bounded by [`BOUND`]. Returns the
/// index. A digest hashes the whole state (about 100 MB here), so it is asked for only once the
/// indexes agree, with a deadline to match.
async fn converged(apis: &BTreeMap<u64, SocketAddr>, logs: impl Fn() -> String) -> u64 {
    let start = Instant::now();
    let mut last_report = Instant::now();
    loop {
        let all = statuses(apis).await;
        let at: Vec<_> = all.iter().map(|s| (s.node_id, s.applied_index)).collect();
        if all.len() == apis.len()
            && all.iter().all(|s| s.applied_index.is_some() && s.applied_index == all[0].applied_index)
        {
            eprintln!("one applied index {at:?} {:?} after the load stopped", start.elapsed());
            break;
        }
        if last_report.elapsed() > Duration::from_secs(5) {
            eprintln!("{:?} after the load stopped: applied {at:?}", start.elapsed());
            last_report = Instant::now();
        }
        assert!(start.elapsed() < BOUND, "nodes never reached one applied index: {at:?}\n{}", logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let start = Instant::now();
    loop {
        let mut seen = Vec::new();
        for api in apis.values() {
            let channel = connect(*api).await;
            let mut r = tonic::Request::new(pb::StateDigestRequest {});
            r.metadata_mut().insert("authorization", format!("Bearer {OPERATOR_TOKEN}").parse().expect("header"));
            r.set_timeout(BOUND);
            if let Ok(d) = pb::admin_service_client::AdminServiceClient::new(channel).state_digest(r).await {
                seen.push(d.into_inner());
            }
        }
        if seen.len() == apis.len()
            && seen.iter().all(|d| d.applied_index.is_some() && d.applied_index == seen[0].applied_index)
        {
            assert!(seen.iter().all(|d| d.sha256 == seen[0].sha256), "one applied index, different states: {seen:?}");
            eprintln!("digests agree, taken in {:?}", start.elapsed());
            return seen[0].applied_index.unwrap_or(0);
        }
        let at: Vec<_> = seen.iter().map(|d| (d.node_id, d.applied_index)).collect();
        assert!(start.elapsed() < BOUND, "digests never taken at one applied index: {at:?}\n{}", logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_behind_by_large_entries_catches_up_to_the_leaders_state() {
    let cluster = Cluster::start(3, &settings());
    let apis: BTreeMap<u64, SocketAddr> = cluster.nodes.values().map(|n| (n.id, n.api)).collect();
    let logs = || {
        cluster
            .logs()
            .lines()
            .filter(|l| l.contains("WARN") || l.contains("ERROR"))
            .take(40)
            .collect::<Vec<_>>()
            .join("\n")
    };
    let anon = sdk(&cluster, None).await;
    let mut writers = Vec::new();
    for _ in 0..WRITERS {
        let agent = register_sdk(&anon, &logs).await;
        let created = agent
            .create_thread(pb::CreateThreadRequest { subject: content("large entries"), ..Default::default() }, None)
            .await
            .expect("create thread");
        let Some(pb::receipt::Result::ThreadCreated(t)) = created.value.receipt.and_then(|r| r.result) else {
            panic!("no thread in the receipt")
        };
        writers.push((agent, t.thread));
    }
    let leader = agreed_leader(&apis, &logs).await;
    let follower = *apis.keys().find(|id| **id != leader).expect("a follower");
    cluster.nodes[&follower].pause();
    let started = Instant::now();
    post_large(&writers, BEHIND / WRITERS).await;
    eprintln!("{BEHIND} entries of {LARGE} bytes committed without node {follower} in {:?}", started.elapsed());
    cluster.nodes[&follower].resume();
    // The load goes on while the follower catches up.
    post_large(&writers, 10).await;
    let stopped = Instant::now();
    // No write is in flight any more: one applied index on every node is the leader's.
    let index = converged(&apis, &logs).await;
    eprintln!("converged at applied index {index}, {:?} after the load stopped", stopped.elapsed());
    assert!(index as usize >= BEHIND, "the converged index {index} covers every write");
}

/// Registers an agent through the SDK, riding out the first election (bounded).
async fn register_sdk(anon: &kungfu_client::Client, logs: impl Fn() -> String) -> kungfu_client::Client {
    let start = Instant::now();
    loop {
        match anon.register(None).await {
            Ok(r) => return r.client,
            Err(e) => {
                assert!(start.elapsed() < BOUND, "no registration: {e}\n{}", logs());
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// One NOT_LEADER answer as a client saw it.
#[derive(Debug, Clone)]
struct NotLeader {
    node: u64,
    api: SocketAddr,
    message: String,
    leader: Option<String>,
    retry_after: Option<u64>,
    after_restart: bool,
}

/// Statuses of the nodes that answer, with the operator token.
async fn statuses(apis: &BTreeMap<u64, SocketAddr>) -> Vec<pb::ClusterStatusResponse> {
    let mut out = Vec::new();
    for api in apis.values() {
        let Ok(channel) = tonic::transport::Endpoint::from_shared(format!("http://{api}"))
            .expect("endpoint")
            .connect_timeout(Duration::from_millis(500))
            .connect()
            .await
        else {
            continue;
        };
        let mut r = tonic::Request::new(pb::ClusterStatusRequest {});
        r.metadata_mut().insert("authorization", format!("Bearer {OPERATOR_TOKEN}").parse().expect("header"));
        r.set_timeout(Duration::from_secs(2));
        if let Ok(s) = pb::admin_service_client::AdminServiceClient::new(channel).cluster_status(r).await {
            out.push(s.into_inner());
        }
    }
    out
}

/// Waits until every node in `among` agrees on one leader that says it leads (bounded).
async fn agreed_leader(apis: &BTreeMap<u64, SocketAddr>, logs: impl Fn() -> String) -> u64 {
    let start = Instant::now();
    loop {
        let all = statuses(apis).await;
        if all.len() == apis.len() {
            if let Some(l) = all[0].leader_id {
                let agree = all.iter().all(|s| s.leader_id == Some(l));
                let leads = all.iter().any(|s| s.node_id == l && s.role == pb::RaftRole::Leader as i32);
                if agree && leads {
                    return l;
                }
            }
        }
        assert!(start.elapsed() < BOUND, "no agreed leader among {:?}: {all:?}\n{}", apis.keys(), logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_leader_answers_never_name_the_answering_node() {
    const ROUNDS: usize = 5;
    let mut cluster = Cluster::start(3, &settings());
    let apis: BTreeMap<u64, SocketAddr> = cluster.nodes.values().map(|n| (n.id, n.api)).collect();
    let first = cluster.nodes.values().next().expect("node").api;
    let anon = Client { channel: connect(first).await, key: None };
    let logs = || String::from("(see the node logs in the test's temporary directory)");
    // One agent and thread per prober, so no prober meets the per-agent write rate.
    let mut probers = Vec::new();
    for node in cluster.nodes.values() {
        let (_, agent) = register_when_serving(&anon, &format!("prober-{}", node.id), &logs).await;
        let created = agent
            .threads()
            .create(agent.req(pb::CreateThreadRequest {
                idempotency_key: "t".into(),
                subject: content("s"),
                grant: None,
            }))
            .await
            .expect("create thread")
            .into_inner();
        let Some(pb::receipt::Result::ThreadCreated(t)) = created.receipt.and_then(|r| r.result) else {
            panic!("no thread in the receipt")
        };
        probers.push((node.id, node.api, agent.key.clone(), t.thread));
    }

    // Every node is asked for itself only (no forwarding), continuously, through everything below.
    let answers: Arc<Mutex<Vec<NotLeader>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let restarted = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for (node, api, key, thread) in probers {
        let (answers, stop, restarted) = (answers.clone(), stop.clone(), restarted.clone());
        tasks.push(tokio::spawn(async move {
            let channel = tonic::transport::Endpoint::from_shared(format!("http://{api}"))
                .expect("endpoint")
                .connect_timeout(Duration::from_millis(200))
                .connect_lazy();
            let c = Client { channel, key };
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let mut r = c.req_local(pb::PostRequest {
                    idempotency_key: format!("probe-{i}"),
                    thread: thread.clone(),
                    body: Some(pb::PostBody {
                        kind: Some(pb::post_body::Kind::Content(pb::Content { body: vec![1] })),
                    }),
                    reply_to: None,
                    ask: None,
                    task_ref: None,
                    assignment: None,
                });
                r.set_timeout(Duration::from_secs(2));
                match c.threads().post(r).await {
                    Err(s) if code(&s) == "NOT_LEADER" => {
                        let rejection = kungfu_api::status_rejection(&s);
                        answers.lock().expect("answers").push(NotLeader {
                            node,
                            api,
                            message: s.message().to_string(),
                            leader: s.metadata().get("leader").and_then(|v| v.to_str().ok()).map(String::from),
                            retry_after: rejection.and_then(|r| r.retry_after).map(|m| m.0),
                            after_restart: restarted.load(Ordering::Relaxed) == node,
                        });
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                    Ok(_) => {}
                }
            }
        }));
    }

    for round in 0..ROUNDS {
        let leader = agreed_leader(&apis, &logs).await;
        cluster.nodes.get_mut(&leader).expect("leader").kill();
        let others: BTreeMap<u64, SocketAddr> =
            apis.iter().filter(|(id, _)| **id != leader).map(|(k, v)| (*k, *v)).collect();
        let next = agreed_leader(&others, &logs).await;
        assert_ne!(next, leader, "round {round}: a new leader while {leader} is down");
        // The old leader comes back remembering its own leadership of an older term.
        restarted.store(leader, Ordering::Relaxed);
        cluster.nodes.get_mut(&leader).expect("leader").start();
        agreed_leader(&apis, &logs).await;
        restarted.store(0, Ordering::Relaxed);
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("prober");
    }

    let answers = answers.lock().expect("answers").clone();
    eprintln!(
        "{} NOT_LEADER answers, {} from a restarted node, {} without a leader hint",
        answers.len(),
        answers.iter().filter(|a| a.after_restart).count(),
        answers.iter().filter(|a| a.leader.is_none()).count()
    );
    assert!(!answers.is_empty(), "the followers were asked and answered NOT_LEADER");
    let self_named: Vec<&NotLeader> = answers
        .iter()
        .filter(|a| {
            let own = a.api.to_string();
            a.leader.as_deref() == Some(own.as_str())
                || a.message.contains(&format!("node {} is,", a.node))
                || a.message.contains(&own)
        })
        .collect();
    let no_retry: Vec<&NotLeader> = answers.iter().filter(|a| a.leader.is_none() && a.retry_after.is_none()).collect();
    eprintln!(
        "{} answers named the answering node, {} named nobody and gave no retry_after",
        self_named.len(),
        no_retry.len()
    );
    assert!(
        self_named.is_empty(),
        "nodes named themselves as the leader: {:?}",
        &self_named[..self_named.len().min(5)]
    );
    assert!(
        no_retry.is_empty(),
        "a NOT_LEADER naming no leader says when to retry: {:?}",
        &no_retry[..no_retry.len().min(5)]
    );
}
