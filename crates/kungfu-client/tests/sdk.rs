//! The SDK against one real `kungfud` process: a full small flow through typed calls, generated
//! and explicit idempotency keys with their replays, definite rejections returned at once with
//! their codes, a lost one-time key reported as such, and a dead endpoint giving up as
//! indeterminate with the key to retry with.

mod common;
use common::{node, register};

use kungfu_client::{Client, ClientOptions, Code, Error, Post, pb, text};
use kungfu_system_tests::{Cluster, free_port};
use std::time::{Duration, Instant};

fn thread_of(r: &pb::CreateThreadResponse) -> String {
    match r.receipt.as_ref().and_then(|r| r.result.as_ref()) {
        Some(pb::receipt::Result::ThreadCreated(t)) => t.thread.clone(),
        other => panic!("not a thread receipt: {other:?}"),
    }
}

fn posted(r: &pb::PostResponse) -> u64 {
    match r.receipt.as_ref().and_then(|r| r.result.as_ref()) {
        Some(pb::receipt::Result::Posted(p)) => p.entry,
        other => panic!("not a post receipt: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_ask_and_answer_through_the_sdk() {
    let (cluster, client) = node().await;
    let lead = register(&cluster, &client).await;
    let worker = register(&cluster, &client).await;
    assert_ne!(lead.agent, worker.agent, "two registrations are two agents");
    assert!(lead.agent_key.starts_with("kf_ag_") && lead.client.key() == Some(lead.agent_key.as_str()));
    assert!(lead.written.idempotency_key.starts_with("sdk-"), "a key was generated: {}", lead.written.idempotency_key);
    assert_ne!(lead.written.idempotency_key, worker.written.idempotency_key, "each generated key is new");

    let created = lead
        .client
        .create_thread(
            pb::CreateThreadRequest {
                idempotency_key: String::new(),
                subject: text("work"),
                grant: Some(pb::GrantSpec { role: pb::Role::Speaker as i32 }),
            },
            None,
        )
        .await
        .expect("create thread");
    assert!(created.value.grant_secret.starts_with("kf_gr_"), "the grant secret is in the first answer");
    let thread = thread_of(&created.value);
    let joined = worker
        .client
        .join(
            pb::JoinRequest { idempotency_key: String::new(), grant_secret: created.value.grant_secret.clone() },
            None,
        )
        .await
        .expect("join");
    assert!(!joined.replayed);

    let asked = lead.client.post(Post::text(&thread, "what is 6 x 7?").ask([worker.agent.clone()]), None).await;
    let question = posted(&asked.expect("post with ask").value);

    // The worker's turn shows the response it owes, with the next step `respond`.
    let turn = worker.client.turn_all(10).await.expect("turn");
    assert_eq!(turn.len(), 1, "one owed response: {turn:?}");
    assert_eq!(turn[0].kind, pb::ObligationKind::Response as i32);
    assert_eq!(turn[0].next, pb::NextStep::Respond as i32);
    match turn[0].obligation.as_ref().and_then(|o| o.kind.as_ref()) {
        Some(pb::obligation_ref::Kind::Response(r)) => {
            assert_eq!((r.thread.as_str(), r.entry, r.responder.as_str()), (thread.as_str(), question, &*worker.agent));
        }
        other => panic!("not a response obligation: {other:?}"),
    }
    // A stale read of the same turn is served too (one node: nothing lags).
    let stale = worker.client.stale().get_turn(pb::GetTurnRequest { cursor: String::new(), page_size: 10 }).await;
    assert_eq!(stale.expect("stale turn").items.len(), 1);

    let reply = worker.client.post(Post::text(&thread, "42").reply_to(question), None).await.expect("reply");
    let answer = posted(&reply.value);
    assert!(answer > question);
    assert!(worker.client.turn_all(10).await.expect("turn").is_empty(), "the reply ended the owed response");

    // Both entries are in the thread, and the answer's content reads back.
    let entries = lead.client.timeline_all(&thread, 10).await.expect("timeline");
    let seqs: Vec<u64> = entries.iter().map(|e| e.seq).collect();
    assert!(seqs.contains(&question) && seqs.contains(&answer), "{seqs:?}");
    let view =
        lead.client.get_entry(pb::GetEntryRequest { thread: thread.clone(), entry: answer }).await.expect("entry");
    assert_eq!(view.content.map(|c| c.body), Some(b"42".to_vec()));
    assert_eq!(view.entry.and_then(|e| e.reply_to), Some(question));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_generated_exposed_and_replayed() {
    let (cluster, client) = node().await;
    let agent = register(&cluster, &client).await.client;
    let memory = |body: &str| pb::CreateMemoryRequest { idempotency_key: String::new(), content: text(body) };

    // A generated key is exposed, and sending the same request with it again is a replay.
    let first = agent.create_memory(memory("m"), None).await.expect("create");
    assert!(!first.replayed);
    let key = first.idempotency_key.clone();
    assert!(key.starts_with("sdk-") && key.len() == 40, "{key}");
    let again = agent.create_memory(memory("m"), Some(key.clone())).await.expect("replay");
    assert!(again.replayed, "the same key is a replay");
    assert_eq!(again.value.receipt, first.value.receipt, "L3: the same receipt");
    assert_eq!(again.idempotency_key, key);

    // An explicit key is used as given; a key in the request itself is used when none is passed.
    let explicit = agent.create_memory(memory("n"), Some("mem-explicit".into())).await.expect("create");
    assert_eq!((explicit.idempotency_key.as_str(), explicit.replayed), ("mem-explicit", false));
    let from_request = pb::CreateMemoryRequest { idempotency_key: "mem-explicit".into(), content: text("n") };
    let replay = agent.create_memory(from_request, None).await.expect("replay");
    assert!(replay.replayed);
    assert_eq!(replay.value.receipt, explicit.value.receipt);
    assert_ne!(replay.value.receipt, first.value.receipt, "two keys, two memories");

    // The same key with a different request is refused, definitely, and nothing is created.
    match agent.create_memory(memory("other"), Some("mem-explicit".into())).await {
        Err(Error::Rejected(r)) => assert_eq!((r.code, r.definite), (Code::IdempotencyKeyReused, true)),
        other => panic!("expected IDEMPOTENCY_KEY_REUSED: {other:?}"),
    }

    // A registration whose key was shown only to an earlier answer is reported as lost.
    let raw = client.register_raw(pb::RegisterRequest::default(), Some("reg-once".into())).await.expect("register");
    assert!(raw.value.agent_key.starts_with("kf_ag_"));
    match client.register(Some("reg-once".into())).await {
        Err(Error::SecretLost { key, .. }) => assert_eq!(key, "reg-once"),
        other => panic!("expected SecretLost: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn definite_rejections_come_back_at_once_with_their_codes() {
    let (cluster, client) = node().await;
    let agent = register(&cluster, &client).await.client;
    let before = agent.retries();

    let start = Instant::now();
    match agent.post(Post::text("th_999", "x"), None).await {
        Err(Error::Rejected(r)) => assert_eq!((r.code, r.definite), (Code::NotFound, true)),
        other => panic!("expected NOT_FOUND: {other:?}"),
    }
    match agent.post(Post::text("not-an-id", "x"), None).await {
        Err(Error::Rejected(r)) => {
            assert_eq!(r.code, Code::InvalidArgument);
            assert_eq!(r.field.as_deref(), Some("thread"), "the field at fault is named");
        }
        other => panic!("expected INVALID_ARGUMENT: {other:?}"),
    }
    match client.get_turn(pb::GetTurnRequest::default()).await {
        Err(Error::Rejected(r)) => assert_eq!(r.code, Code::Unauthenticated),
        other => panic!("expected UNAUTHENTICATED without a key: {other:?}"),
    }
    assert_eq!(agent.retries(), before, "a definite rejection is never retried");
    assert!(start.elapsed() < Duration::from_secs(5), "definite rejections return at once: {:?}", start.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_endpoint_gives_up_at_once_and_a_write_there_had_no_effect() {
    assert!(matches!(
        Client::connect(vec!["http://[bad".into()], None, ClientOptions::default()).await,
        Err(Error::InvalidEndpoint { .. })
    ));
    assert!(matches!(
        Client::connect(Vec::new(), None, ClientOptions::default()).await,
        Err(Error::InvalidEndpoint { .. })
    ));

    // Nobody listens on this port: every attempt is refused before anything is sent, so a write
    // there had no effect, and the SDK gives up after its short budget of refused connections
    // rather than its 12 retries. (A write that may have arrived is indeterminate: tests/transport.rs.)
    let mut options = ClientOptions { max_retries: 12, connect_retries: 2, ..ClientOptions::default() };
    options.backoff.initial = Duration::from_millis(10);
    options.call_timeout = Duration::from_secs(2);
    let dead = Client::connect(vec![format!("127.0.0.1:{}", free_port())], Some("kf_ag_x".into()), options)
        .await
        .expect("lazy channels connect later");
    let start = Instant::now();
    match dead.create_memory(pb::CreateMemoryRequest { idempotency_key: String::new(), content: text("m") }, None).await
    {
        Err(Error::Transport(t)) => assert_eq!(t.kind, kungfu_client::TransportKind::NothingListening, "{t}"),
        other => panic!("expected a refused connection: {other:?}"),
    }
    assert_eq!(dead.retries(), 2, "the write was retried connect_retries times");
    match dead.get_turn(pb::GetTurnRequest::default()).await {
        Err(Error::Transport(_)) => {}
        other => panic!("a read that reached no node is a transport error: {other:?}"),
    }
    assert!(start.elapsed() < Duration::from_secs(20), "retries are bounded: {:?}", start.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_read_cluster_status_with_their_token() {
    let token = "operator-token-for-sdk-tests";
    let cluster = Cluster::start(1, &format!("operator_token = \"{token}\""));
    let client = Client::connect(vec![cluster.nodes[&1].api.to_string()], None, ClientOptions::default())
        .await
        .expect("valid endpoint");
    // Registering waits until the node leads and serves; then its status names it leader.
    register(&cluster, &client).await;
    let status = client.with_key(token).cluster_status(pb::ClusterStatusRequest {}).await.expect("cluster status");
    assert_eq!((status.node_id, status.role), (1, pb::RaftRole::Leader as i32));
    match client.with_key("not-the-operator-token").cluster_status(pb::ClusterStatusRequest {}).await {
        Err(Error::Rejected(r)) => assert_eq!(r.code, Code::Unauthenticated),
        other => panic!("expected UNAUTHENTICATED with a wrong token: {other:?}"),
    }
}

/// A TCP proxy to `upstream` that passes every byte from the client to the node and throws away
/// every byte of the answer: the node acts on a request, and the client never learns it did.
async fn answer_swallowing_proxy(upstream: std::net::SocketAddr) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
    let addr = listener.local_addr().expect("proxy address");
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(outbound) = tokio::net::TcpStream::connect(upstream).await else { return };
                let (mut from_node, mut to_node) = outbound.into_split();
                let (mut from_client, _to_client) = inbound.split();
                let mut sink = tokio::io::sink();
                let swallow = tokio::io::copy(&mut from_node, &mut sink);
                let _ = tokio::join!(tokio::io::copy(&mut from_client, &mut to_node), swallow);
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_answer_is_lost_is_retried_with_the_same_key_and_happens_once() {
    let (cluster, client) = node().await;
    let agent = register(&cluster, &client).await;
    let created = agent
        .client
        .create_thread(
            pb::CreateThreadRequest { idempotency_key: String::new(), subject: text("s"), grant: None },
            None,
        )
        .await
        .expect("create thread");
    let thread = thread_of(&created.value);

    // The first endpoint delivers the write to the node but loses its answer; the attempt times out,
    // and the SDK retries on the second endpoint, the node itself. Only the same key makes that
    // retry a replay of the first attempt instead of a second entry.
    let proxy = answer_swallowing_proxy(cluster.nodes[&1].api).await;
    let options = ClientOptions { call_timeout: Duration::from_secs(2), ..ClientOptions::default() };
    let lossy = Client::connect(vec![proxy.to_string(), cluster.nodes[&1].api.to_string()], None, options)
        .await
        .expect("valid endpoints")
        .with_key(agent.agent_key.clone());
    let w = lossy.post(Post::text(&thread, "once"), None).await.expect("post through a lossy endpoint");
    assert!(lossy.retries() >= 1, "the lost answer made the SDK retry");
    assert!(w.replayed, "the retry was answered with the first attempt's receipt: the same key was sent");
    let entries = agent.client.timeline_all(&thread, 10).await.expect("timeline");
    assert_eq!(entries.len(), 1, "one logical write, one entry: {entries:?}");
    assert_eq!(Some(entries[0].seq), Some(posted(&w.value)));
}
