//! Three real `kungfud` processes started from `cluster-config/`-style files: writes go to the
//! leader (a follower forwards them, or answers NOT_LEADER with the leader's address when asked for
//! itself only), the leader is killed in the
//! middle of traffic, writes resume on the new leader, and no acknowledged action is lost.

use kungfu_api::pb;
use kungfu_system_tests::*;
use std::time::{Duration, Instant};

/// Sends a request to whichever node is leader, following NOT_LEADER answers.
async fn on_leader<T, F, Fut>(cluster: &Cluster, key: Option<String>, mut call: F) -> T
where
    F: FnMut(Client) -> Fut,
    Fut: std::future::Future<Output = Result<T, tonic::Status>>,
{
    let start = Instant::now();
    let mut last = String::new();
    loop {
        for node in cluster.nodes.values().filter(|n| n.is_running()) {
            let Ok(Ok(channel)) = tokio::time::timeout(
                Duration::from_secs(2),
                tonic::transport::Endpoint::from_shared(format!("http://{}", node.api)).expect("endpoint").connect(),
            )
            .await
            else {
                continue;
            };
            match call(Client { channel, key: key.clone() }).await {
                Ok(v) => return v,
                Err(s) if code(&s) == "NOT_LEADER" || code(&s) == "UNAVAILABLE" => last = s.to_string(),
                Err(s) => panic!("call failed: {s}"),
            }
        }
        assert!(start.elapsed() < BOUND, "no leader took the call: {last}\n{}", cluster.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_node_cluster_survives_the_leader_being_killed() {
    let mut cluster = Cluster::start(3, "");
    let reg = on_leader(&cluster, None, |c| async move {
        c.agents().register(c.req(pb::RegisterRequest { idempotency_key: "r1".into() })).await.map(|r| r.into_inner())
    })
    .await;
    let key = Some(reg.agent_key.clone());
    let created = on_leader(&cluster, key.clone(), |c| async move {
        c.threads()
            .create(c.req(pb::CreateThreadRequest { idempotency_key: "t".into(), subject: content("s"), grant: None }))
            .await
            .map(|r| r.into_inner())
    })
    .await;
    let Some(pb::receipt::Result::ThreadCreated(t)) = created.receipt.and_then(|r| r.result) else { panic!() };

    // Asked for itself only, a follower refuses a write and names the leader; asked normally, it
    // forwards the write to the leader, and every node then returns the same receipt for it.
    let mut followers = 0;
    let mut receipts = Vec::new();
    for node in cluster.nodes.values() {
        let c = Client { channel: connect(node.api).await, key: key.clone() };
        let local = c
            .memories()
            .create(c.req_local(pb::CreateMemoryRequest { idempotency_key: "probe".into(), content: content("m") }))
            .await;
        if let Err(s) = &local {
            assert_eq!(code(s), "NOT_LEADER");
            assert!(s.metadata().get("leader").is_some(), "NOT_LEADER carries the leader's address");
            followers += 1;
        }
        let forwarded = c
            .memories()
            .create(c.req(pb::CreateMemoryRequest { idempotency_key: "probe".into(), content: content("m") }))
            .await
            .unwrap_or_else(|e| panic!("any node accepts a write: followers forward it: {e}\n{}", cluster.logs()))
            .into_inner();
        receipts.push(forwarded.receipt);
    }
    assert_eq!(followers, 2, "two of three nodes are followers");
    assert!(receipts.windows(2).all(|w| w[0] == w[1]), "one logical request, one receipt, whichever node took it");

    let post = |i: u32| {
        let thread = t.thread.clone();
        move |c: Client| {
            let thread = thread.clone();
            async move {
                c.threads()
                    .post(c.req(pb::PostRequest {
                        idempotency_key: format!("post-{i}"),
                        thread,
                        body: Some(pb::PostBody {
                            kind: Some(pb::post_body::Kind::Content(pb::Content {
                                body: format!("entry {i}").into_bytes(),
                            })),
                        }),
                        reply_to: None,
                        ask: None,
                        task_ref: None,
                        assignment: None,
                    }))
                    .await
                    .map(|r| r.into_inner())
            }
        }
    };
    let mut acked = Vec::new();
    for i in 0..10 {
        acked.push((i, on_leader(&cluster, key.clone(), post(i)).await));
    }
    // Kill the leader (the node whose write succeeds without a redirect).
    let mut leader = None;
    for node in cluster.nodes.values() {
        let c = Client { channel: connect(node.api).await, key: key.clone() };
        if c.turn().get_turn(c.req_local(pb::GetTurnRequest { cursor: String::new(), page_size: 1 })).await.is_ok() {
            leader = Some(node.id);
        }
    }
    let leader = leader.expect("a leader");
    cluster.nodes.get_mut(&leader).expect("leader").kill();

    // Writes resume on the new leader, and every acknowledged write is still there: replaying it
    // returns its original receipt.
    for i in 10..15 {
        acked.push((i, on_leader(&cluster, key.clone(), post(i)).await));
    }
    for (i, original) in &acked {
        let again = on_leader(&cluster, key.clone(), post(*i)).await;
        assert!(again.replayed, "post {i} was not found after failover");
        assert_eq!(again.receipt, original.receipt);
    }
    // The killed node comes back from its data directory and rejoins.
    cluster.nodes.get_mut(&leader).expect("node").start();
    let c = Client { channel: connect(cluster.nodes[&leader].api).await, key: key.clone() };
    let start = Instant::now();
    loop {
        let r = c
            .memories()
            .create(c.req(pb::CreateMemoryRequest { idempotency_key: "after".into(), content: content("m") }))
            .await;
        match r {
            Ok(_) => break,
            Err(s) if code(&s) == "NOT_LEADER" && s.metadata().get("leader").is_some() => break,
            Err(s) => assert!(start.elapsed() < BOUND, "restarted node never rejoined: {s}\n{}", cluster.logs()),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn now_micros() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}

/// L4, L5: the leader dies just before a deadline is due; the new leader ends the obligation, and
/// it ends exactly once, also after the old leader comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_whose_leader_dies_just_before_it_is_due_ends_exactly_once() {
    let mut cluster = Cluster::start(3, "");
    let lead = on_leader(&cluster, None, |c| async move {
        c.agents().register(c.req(pb::RegisterRequest { idempotency_key: "lead".into() })).await.map(|r| r.into_inner())
    })
    .await;
    let worker = on_leader(&cluster, None, |c| async move {
        c.agents()
            .register(c.req(pb::RegisterRequest { idempotency_key: "worker".into() }))
            .await
            .map(|r| r.into_inner())
    })
    .await;
    let Some(pb::receipt::Result::AgentRegistered(w)) = worker.receipt.clone().and_then(|r| r.result) else { panic!() };
    let (lk, wk) = (Some(lead.agent_key.clone()), Some(worker.agent_key.clone()));
    let created = on_leader(&cluster, lk.clone(), |c| async move {
        c.threads()
            .create(c.req(pb::CreateThreadRequest {
                idempotency_key: "t".into(),
                subject: content("s"),
                grant: Some(pb::GrantSpec { role: pb::Role::Speaker as i32 }),
            }))
            .await
            .map(|r| r.into_inner())
    })
    .await;
    let Some(pb::receipt::Result::ThreadCreated(t)) = created.receipt.clone().and_then(|r| r.result) else { panic!() };
    let secret = created.grant_secret.clone();
    on_leader(&cluster, wk.clone(), |c| {
        let secret = secret.clone();
        async move { c.threads().join(c.req(pb::JoinRequest { idempotency_key: "j".into(), grant_secret: secret })).await }
    })
    .await;
    let thread = t.thread.clone();
    let worker_id = w.agent.clone();
    let posted = on_leader(&cluster, lk.clone(), |c| {
        let (thread, worker_id) = (thread.clone(), worker_id.clone());
        async move {
            c.threads()
                .post(c.req(pb::PostRequest {
                    idempotency_key: "a".into(),
                    thread,
                    body: Some(pb::PostBody {
                        kind: Some(pb::post_body::Kind::Content(pb::Content { body: b"do".to_vec() })),
                    }),
                    reply_to: None,
                    ask: Some(pb::Ask { agents: vec![] }),
                    task_ref: None,
                    assignment: Some(pb::NewAssignment {
                        addressee: worker_id,
                        criteria: content("c"),
                        output_structure: None,
                        delivery_window_micros: Some(3_000_000),
                        judgment_window_micros: None,
                    }),
                }))
                .await
                .map(|r| r.into_inner())
        }
    })
    .await;
    let Some(pb::receipt::Result::Posted(p)) = posted.receipt.and_then(|r| r.result) else { panic!() };
    let asg = p.assignment.expect("assignment");
    let taken = on_leader(&cluster, wk.clone(), |c| {
        let asg = asg.clone();
        async move {
            c.assignments()
                .take(c.req(pb::TakeAssignmentRequest { idempotency_key: "take".into(), assignment: asg }))
                .await
                .map(|r| r.into_inner())
        }
    })
    .await;
    let Some(pb::receipt::Result::AssignmentTaken(tk)) = taken.receipt.and_then(|r| r.result) else { panic!() };

    // Find the leader and kill it shortly before the deadline.
    let mut leader = None;
    for node in cluster.nodes.values() {
        let c = Client { channel: connect(node.api).await, key: lk.clone() };
        if c.turn().get_turn(c.req_local(pb::GetTurnRequest { cursor: String::new(), page_size: 1 })).await.is_ok() {
            leader = Some(node.id);
        }
    }
    let leader = leader.expect("a leader");
    let wait = tk.delivery_due_unix_micros - now_micros() - 500_000;
    if wait > 0 {
        tokio::time::sleep(Duration::from_micros(wait as u64)).await;
    }
    cluster.nodes.get_mut(&leader).expect("leader").kill();

    // The new leader ends it: timed out.
    let start = Instant::now();
    loop {
        let a = on_leader(&cluster, lk.clone(), |c| {
            let asg = asg.clone();
            async move {
                c.assignments().get(c.req(pb::GetAssignmentRequest { assignment: asg })).await.map(|r| r.into_inner())
            }
        })
        .await;
        if let Some(pb::assignment::State::Ended(e)) = a.state {
            assert_eq!(e.outcome, pb::AssignmentOutcome::TimedOut as i32);
            break;
        }
        assert!(start.elapsed() < BOUND, "the new leader never ended the obligation\n{}", cluster.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The old leader returns; still exactly one deadline fact for the thread.
    cluster.nodes.get_mut(&leader).expect("node").start();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let ws = on_leader(&cluster, lk.clone(), |c| {
        let thread = t.thread.clone();
        async move {
            c.turn().get_working_set(c.req(pb::GetWorkingSetRequest { object: thread })).await.map(|r| r.into_inner())
        }
    })
    .await;
    assert_eq!(ws.history.iter().filter(|h| h.fact == "deadline_passed").count(), 1, "{:?}", ws.history);
}

/// DESIGN §8: reads are linearizable on the leader by default; with `kungfu-consistency: stale`
/// any node answers from its own state and says how far behind it may be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_serves_stale_reads_that_say_how_far_behind_they_are() {
    let cluster = Cluster::start(3, "");
    let reg = on_leader(&cluster, None, |c| async move {
        c.agents().register(c.req(pb::RegisterRequest { idempotency_key: "r".into() })).await.map(|r| r.into_inner())
    })
    .await;
    let key = Some(reg.agent_key.clone());
    let created = on_leader(&cluster, key.clone(), |c| async move {
        c.memories()
            .create(c.req(pb::CreateMemoryRequest { idempotency_key: "m".into(), content: content("hello") }))
            .await
            .map(|r| r.into_inner())
    })
    .await;
    let Some(pb::receipt::Result::MemoryCreated(m)) = created.receipt.and_then(|r| r.result) else { panic!() };
    let mut served_by_follower = false;
    for node in cluster.nodes.values() {
        let c = Client { channel: connect(node.api).await, key: key.clone() };
        let linear =
            c.memories().get(c.req_local(pb::GetMemoryRequest { memory: m.memory.clone(), version: None })).await;
        if linear.is_ok() {
            continue; // the leader
        }
        assert_eq!(code(&linear.expect_err("follower")), "NOT_LEADER");
        // A follower may not have applied the write yet: poll (bounded) until its stale read sees it.
        let start = Instant::now();
        loop {
            let mut req = c.req(pb::GetMemoryRequest { memory: m.memory.clone(), version: None });
            req.metadata_mut().insert("kungfu-consistency", "stale".parse().expect("header"));
            match c.memories().get(req).await {
                Ok(r) => {
                    assert!(
                        r.metadata().get("kungfu-applied-index").is_some(),
                        "a stale answer names its applied index"
                    );
                    assert!(r.metadata().get("kungfu-lag-entries").is_some());
                    let view = r.into_inner();
                    assert_eq!(view.content, content("hello"));
                    served_by_follower = true;
                    break;
                }
                Err(s) => {
                    assert!(matches!(code(&s).as_str(), "UNAUTHENTICATED" | "NOT_FOUND"), "{s}");
                    assert!(start.elapsed() < BOUND, "the follower never caught up: {s}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
    assert!(served_by_follower, "two followers answered stale reads");
}

const DOOR_TEST_TOKEN: &str = "operator-token-for-client-address-tests";

/// One MCP `agent_register` call (protocol revision 2026-07-28, no session) sent as raw HTTP from
/// `source` (any of 127.0.0.0/8) to the door at `mcp`; the whole answer as text.
async fn mcp_register_from(source: &str, mcp: std::net::SocketAddr, key: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"agent_register","arguments":{{"idempotency_key":"{key}"}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    );
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {mcp}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: agent_register\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.bind(format!("{source}:0").parse().expect("source")).expect("bind the source address");
    let mut s = socket.connect(mcp).await.expect("connect to the MCP door");
    s.write_all(head.as_bytes()).await.expect("write");
    s.write_all(body.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    tokio::time::timeout(BOUND, s.read_to_end(&mut out)).await.expect("the door answers").expect("read");
    String::from_utf8_lossy(&out).to_string()
}

/// L4: registrations are limited per client address. Behind the MCP door every client reaches the
/// API through the door, in the node's own process, and behind a follower over the follower's
/// forwarding connection; the limit must still see each client (the door hands its client's
/// address over with the call, the follower vouches for it),
/// while a client's own claim of another address, even dressed as a forwarded call, counts for
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registrations_are_limited_per_client_behind_the_mcp_door_and_a_forwarding_follower() {
    let settings = format!(
        "operator_token = \"{DOOR_TEST_TOKEN}\"\nhttp_listen = \"127.0.0.1:0\"\n[rate_limits]\nregistrations_per_minute_per_ip = 2\n"
    );
    let cluster = Cluster::start(3, &settings);
    let leader = agreed_leader(&cluster, DOOR_TEST_TOKEN).await;
    let follower = cluster.nodes.values().find(|n| n.id != leader).expect("a follower");
    let door = mcp_addr(follower).await;

    // One MCP client, through a follower's door: two registrations, then over its limit.
    for key in ["a0", "a1"] {
        let answer = mcp_register_from("127.0.0.2", door, key).await;
        assert!(answer.contains("kf_ag_"), "registration {key} through the follower's door: {answer}");
    }
    let over = mcp_register_from("127.0.0.2", door, "a2").await;
    assert!(over.contains("RATE_LIMITED"), "the client's third registration in a minute: {over}");
    // Another client of the same door has a budget of its own.
    let other = mcp_register_from("127.0.0.3", door, "b0").await;
    assert!(other.contains("kf_ag_"), "a second MCP client is not the first one: {other}\n{}", cluster.logs());

    // A gRPC client that claims other addresses (as a "forwarded" call from an address that is no
    // member's, with the header an older node's door sent beside its claims) is counted at its own
    // address.
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", cluster.nodes[&leader].api))
        .expect("endpoint")
        .local_address(Some("127.0.0.4".parse().expect("ip")))
        .connect()
        .await
        .expect("connect from 127.0.0.4");
    let agents = pb::agent_service_client::AgentServiceClient::new(channel);
    for (i, claim) in ["198.51.100.1", "198.51.100.2", "198.51.100.3"].into_iter().enumerate() {
        let mut req = tonic::Request::new(pb::RegisterRequest { idempotency_key: format!("c{i}") });
        req.metadata_mut().insert(kungfu_api::CLIENT_ADDR, claim.parse().expect("header"));
        req.metadata_mut().insert("kungfu-door-token", "kf_dt_guessed".parse().expect("header"));
        req.metadata_mut().insert("kungfu-forwarded", "1".parse().expect("header"));
        let r = agents.clone().register(req).await;
        if i < 2 {
            assert!(r.is_ok(), "registration {i} from 127.0.0.4: {r:?}");
        } else {
            assert_eq!(code(&r.expect_err("over the limit")), "RATE_LIMITED", "claims are not believed");
        }
    }
}

/// A cluster whose membership names its nodes by host name (`localhost:PORT`, as compose or
/// Kubernetes deployments do) still credits a forwarded call to its client: the leader resolves
/// the members' names to know the forwarding follower is one of them. Two gRPC clients behind a
/// follower, each with its own budget of two registrations a minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_named_by_host_name_forwards_registrations_counted_per_client() {
    let settings =
        format!("operator_token = \"{DOOR_TEST_TOKEN}\"\n[rate_limits]\nregistrations_per_minute_per_ip = 2\n");
    let cluster = Cluster::start_named(3, &settings, TEST_RAFT, "localhost");
    let leader = agreed_leader(&cluster, DOOR_TEST_TOKEN).await;
    let follower = cluster.nodes.values().find(|n| n.id != leader).expect("a follower");
    let from = |ip: &'static str| async move {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", follower.api))
            .expect("endpoint")
            .local_address(Some(ip.parse().expect("ip")))
            .connect()
            .await
            .expect("connect");
        pb::agent_service_client::AgentServiceClient::new(channel)
    };
    let register = |mut agents: pb::agent_service_client::AgentServiceClient<tonic::transport::Channel>,
                    key: String| async move {
        agents.register(tonic::Request::new(pb::RegisterRequest { idempotency_key: key })).await
    };
    let first = from("127.0.0.2").await;
    for i in 0..2 {
        let r = register(first.clone(), format!("a{i}")).await;
        assert!(r.is_ok(), "registration {i} of the first client: {r:?}\n{}", cluster.logs());
    }
    let over = register(first.clone(), "a2".into()).await;
    assert_eq!(code(&over.expect_err("over the limit")), "RATE_LIMITED", "the first client's third");
    // The second client is not the first (nor the follower): its budget is whole.
    let second = from("127.0.0.3").await;
    for i in 0..2 {
        let r = register(second.clone(), format!("b{i}")).await;
        assert!(r.is_ok(), "registration {i} of the second client behind the follower: {r:?}");
    }
}

/// gRPC health's status of the whole server (`""`) at `api`; None when the call fails.
async fn health_of(api: std::net::SocketAddr) -> Option<i32> {
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    let mut client = HealthClient::new(connect(api).await);
    client.check(HealthCheckRequest { service: String::new() }).await.ok().map(|r| r.into_inner().status)
}

/// Issue #16, deliverable 1: health tells the truth. A node is SERVING (gRPC health) and ready
/// (`/readyz` 200) only while a leader is known and reachable through a quorum. The two followers
/// of a three-node cluster are killed: the leader that is left, which keeps its role without a
/// quorum, turns NOT_SERVING and `/readyz` answers 503 with the reason, while `/healthz` still
/// answers (the process is alive); with the followers back, it serves again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_turns_not_serving_when_the_quorum_is_lost_and_back_when_it_returns() {
    use tonic_health::pb::health_check_response::ServingStatus;
    let settings = format!("operator_token = \"{DOOR_TEST_TOKEN}\"\nhttp_listen = \"127.0.0.1:0\"\n");
    let mut cluster = Cluster::start(3, &settings);
    let leader = agreed_leader(&cluster, DOOR_TEST_TOKEN).await;
    let (api, http) = (cluster.nodes[&leader].api, mcp_addr(&cluster.nodes[&leader]).await);
    let serving = Some(ServingStatus::Serving as i32);
    let not_serving = Some(ServingStatus::NotServing as i32);
    poll("the leader serving", || async { health_of(api).await == serving }).await;
    assert!(http_get(http, "/readyz").await.starts_with("HTTP/1.1 200"), "ready with its quorum");

    let followers: Vec<u64> = cluster.nodes.keys().copied().filter(|id| *id != leader).collect();
    for id in &followers {
        cluster.nodes.get_mut(id).expect("node").kill();
    }
    poll("the leader without a quorum not serving", || async { health_of(api).await == not_serving }).await;
    let ready = http_get(http, "/readyz").await;
    assert!(ready.starts_with("HTTP/1.1 503") && ready.contains("quorum"), "{ready}");
    // The reason counts what this node reaches (issue #16, deliverable 6).
    poll("the reason to count one of three voters reachable", || async {
        http_get(http, "/readyz").await.contains("(1 of 3 voters reachable from this node)")
    })
    .await;
    assert!(http_get(http, "/healthz").await.starts_with("HTTP/1.1 200"), "the process is alive");

    for id in &followers {
        cluster.nodes.get_mut(id).expect("node").start();
    }
    poll("the leader serving again", || async { health_of(api).await == serving }).await;
    poll("ready again", || async { http_get(http, "/readyz").await.starts_with("HTTP/1.1 200") }).await;
}

/// Polls `done` every 100 ms until it holds, failing after [`BOUND`].
async fn poll<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !done().await {
        assert!(start.elapsed() < BOUND, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Issue #30, one durable log: the state store writes no WAL of its own. A node killed with
/// SIGKILL in the middle of traffic reopens its state at its last flush and applies its log again
/// from there; the log behind that flush was purged (a snapshot every 40 entries), so the entries
/// after it are all the node has. Every acknowledged post is still there with its receipt, and the
/// next post takes the next entry number: a state that forgot posts without applying them again
/// would hand a used number to another post, and a log purged past the state's durable point would
/// leave nothing to apply them from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_mid_traffic_applies_its_log_again_and_keeps_every_acknowledged_post() {
    let raft = format!("{TEST_RAFT}\nsnapshot_after_logs = 40\nkeep_logs_after_snapshot = 0");
    let mut cluster = Cluster::start_with_raft(1, "", &raft);
    let api = cluster.nodes[&1].api;
    let anon = Client { channel: connect(api).await, key: None };
    let (_, c) = register_when_serving(&anon, "r", || cluster.logs()).await;
    let created = c
        .threads()
        .create(c.req(pb::CreateThreadRequest { idempotency_key: "t".into(), subject: content("s"), grant: None }))
        .await
        .expect("create thread")
        .into_inner();
    let Some(pb::receipt::Result::ThreadCreated(t)) = created.receipt.and_then(|r| r.result) else { panic!() };
    let post = |i: u32| pb::PostRequest {
        idempotency_key: format!("post-{i}"),
        thread: t.thread.clone(),
        body: Some(pb::PostBody {
            kind: Some(pb::post_body::Kind::Content(pb::Content { body: format!("entry {i}").into_bytes() })),
        }),
        reply_to: None,
        ask: None,
        task_ref: None,
        assignment: None,
    };
    let entry_of = |r: &pb::PostResponse| match r.receipt.as_ref().and_then(|r| r.result.as_ref()) {
        Some(pb::receipt::Result::Posted(p)) => p.entry,
        other => panic!("not a post receipt: {other:?}"),
    };
    let mut acked = Vec::new();
    for i in 0..130 {
        let r = c.threads().post(c.req(post(i))).await.expect("post").into_inner();
        acked.push((i, r));
    }
    let last = entry_of(&acked.last().expect("posts").1);

    cluster.nodes.get_mut(&1).expect("node").kill();
    cluster.nodes.get_mut(&1).expect("node").start();
    let c = Client { channel: connect(api).await, key: c.key.clone() };
    let start = Instant::now();
    let first_again = loop {
        match c.threads().post(c.req(post(0))).await {
            Ok(r) => break r.into_inner(),
            Err(s) => {
                assert!(start.elapsed() < BOUND, "the node never served again: {s}\n{}", cluster.logs());
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    assert!(first_again.replayed && first_again.receipt == acked[0].1.receipt, "post 0 lost by the kill");
    for (i, original) in &acked[1..] {
        let again = c.threads().post(c.req(post(*i))).await.expect("replay").into_inner();
        assert!(again.replayed, "post {i} was lost by the kill\n{}", cluster.logs());
        assert_eq!(again.receipt, original.receipt, "post {i} answers another receipt after the kill");
    }
    let next = c.threads().post(c.req(post(1000))).await.expect("a new post").into_inner();
    assert!(!next.replayed);
    assert_eq!(entry_of(&next), last + 1, "a new post after the kill takes the next entry number");
}
