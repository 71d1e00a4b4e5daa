//! The SDK's retry path against a real three-node cluster whose leader process is killed in the
//! middle of a stream of writes: every write is acknowledged through the SDK alone, each with one
//! effect (the thread's timeline holds exactly one entry per acknowledged write, no duplicates),
//! and sending each acknowledged request again with its key is a replay of the same receipt.

use kungfu_client::{Client, ClientOptions, Post, pb, text};
use kungfu_system_tests::{BOUND, Cluster, connect};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const WRITES: usize = 40;

/// The id of the node that leads now: the one that answers a read for itself only (bounded).
async fn leader(cluster: &Cluster, key: &str) -> u64 {
    let start = Instant::now();
    loop {
        for node in cluster.nodes.values().filter(|n| n.is_running()) {
            let c = kungfu_system_tests::Client { channel: connect(node.api).await, key: Some(key.to_string()) };
            let local = c.req_local(pb::GetTurnRequest { cursor: String::new(), page_size: 1 });
            if c.turn().get_turn(local).await.is_ok() {
                return node.id;
            }
        }
        assert!(start.elapsed() < BOUND, "no leader\n{}", cluster.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_continue_through_a_leader_kill_with_one_effect_each() {
    let mut cluster = Cluster::start(3, "");
    let endpoints: Vec<String> = cluster.nodes.values().map(|n| n.api.to_string()).collect();
    // The nodes may still be starting, refusing connections: wait for them rather than fail fast.
    let mut options = ClientOptions {
        max_retries: 40,
        connect_retries: 40,
        call_timeout: Duration::from_secs(5),
        ..ClientOptions::default()
    };
    options.backoff.max = Duration::from_millis(500);
    let client = Client::connect(endpoints, None, options).await.expect("valid endpoints");

    // The retry loop itself waits for the cluster to elect its first leader.
    let agent = client.register(None).await.unwrap_or_else(|e| panic!("register: {e}\n{}", cluster.logs()));
    let created = agent
        .client
        .create_thread(
            pb::CreateThreadRequest { idempotency_key: String::new(), subject: text("log"), grant: None },
            None,
        )
        .await
        .expect("create thread");
    let thread = match created.value.receipt.as_ref().and_then(|r| r.result.as_ref()) {
        Some(pb::receipt::Result::ThreadCreated(t)) => t.thread.clone(),
        other => panic!("not a thread receipt: {other:?}"),
    };
    let leader_before = leader(&cluster, &agent.agent_key).await;

    // One writer posts WRITES entries in sequence, each under a key the SDK generates.
    let acked = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (client, thread, acked) = (agent.client.clone(), thread.clone(), acked.clone());
        tokio::spawn(async move {
            let mut written = Vec::new();
            for i in 0..WRITES {
                let request: pb::PostRequest = Post::text(&thread, &format!("entry {i}")).into();
                let w = client.post(request.clone(), None).await.map_err(|e| format!("write {i}: {e}"))?;
                acked.fetch_add(1, Ordering::SeqCst);
                written.push((request, w));
            }
            Ok::<_, String>(written)
        })
    };

    // Kill the leader once a quarter of the writes are acknowledged, while the writer keeps going.
    let start = Instant::now();
    while acked.load(Ordering::SeqCst) < WRITES / 4 {
        assert!(start.elapsed() < BOUND, "writes never started\n{}", cluster.logs());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let retries_before_kill = agent.client.retries();
    cluster.nodes.get_mut(&leader_before).expect("leader").kill();

    let written = match tokio::time::timeout(BOUND, writer).await {
        Ok(Ok(Ok(w))) => w,
        Ok(Ok(Err(e))) => panic!("a write failed through the SDK: {e}\n{}", cluster.logs()),
        other => panic!("the writer did not finish: {other:?}"),
    };
    assert_eq!(written.len(), WRITES);
    assert!(agent.client.retries() > retries_before_kill, "the leader kill made the SDK retry");
    let replayed = written.iter().filter(|(_, w)| w.replayed).count();
    eprintln!(
        "retries after the kill: {}, writes answered by a replay: {replayed}",
        agent.client.retries() - retries_before_kill
    );
    let leader_after = leader(&cluster, &agent.agent_key).await;
    assert_ne!(leader_after, leader_before, "a new leader took over");

    // One effect per acknowledged write: the timeline holds exactly the acknowledged entries.
    let entries = agent.client.timeline_all(&thread, 100).await.expect("timeline");
    let mut acked_seqs: Vec<u64> = written
        .iter()
        .map(|(_, w)| match w.value.receipt.as_ref().and_then(|r| r.result.as_ref()) {
            Some(pb::receipt::Result::Posted(p)) => p.entry,
            other => panic!("not a post receipt: {other:?}"),
        })
        .collect();
    let mut seqs: Vec<u64> = entries.iter().map(|e| e.seq).collect();
    acked_seqs.sort_unstable();
    seqs.sort_unstable();
    assert_eq!(entries.len(), WRITES, "one entry per acknowledged write, no duplicates: {seqs:?}");
    assert_eq!(seqs, acked_seqs, "the timeline is exactly the acknowledged writes");

    // Each key names one effect: sending an acknowledged request again with its key is a replay.
    for (request, w) in &written {
        let again = agent.client.post(request.clone(), Some(w.idempotency_key.clone())).await.expect("replay");
        assert!(again.replayed, "key {} was not recorded", w.idempotency_key);
        assert_eq!(again.value.receipt, w.value.receipt);
    }
    assert_eq!(agent.client.timeline_all(&thread, 100).await.expect("timeline").len(), WRITES, "replays add nothing");
}
