//! One real `kungfud` process, driven over gRPC: a lead and a worker go through a thread, an
//! assignment and its deadline; bad input is answered with the field named; the node survives a
//! crash (SIGKILL) with every acknowledged action intact, and stops cleanly on SIGTERM.

use kungfu_api::pb;
use kungfu_system_tests::*;
use std::time::{Duration, Instant};

async fn register(c: &Client, key: &str) -> (String, Client) {
    let r = c
        .agents()
        .register(c.req(pb::RegisterRequest { idempotency_key: key.into() }))
        .await
        .expect("register")
        .into_inner();
    let Some(pb::receipt::Result::AgentRegistered(a)) = r.receipt.and_then(|r| r.result) else { panic!("no agent") };
    assert!(r.agent_key.starts_with("kf_ag_"), "the key is returned once");
    (a.agent, Client { channel: c.channel.clone(), key: Some(r.agent_key) })
}

fn post(
    key: &str,
    thread: &str,
    text: &str,
    reply_to: Option<u64>,
    assignment: Option<pb::NewAssignment>,
) -> pb::PostRequest {
    pb::PostRequest {
        idempotency_key: key.into(),
        thread: thread.into(),
        body: Some(pb::PostBody {
            kind: Some(pb::post_body::Kind::Content(pb::Content { body: text.as_bytes().to_vec() })),
        }),
        reply_to,
        ask: None,
        task_ref: None,
        assignment,
    }
}

async fn turn(c: &Client) -> Vec<pb::TurnItem> {
    c.turn()
        .get_turn(c.req(pb::GetTurnRequest { cursor: String::new(), page_size: 100 }))
        .await
        .expect("turn")
        .into_inner()
        .items
}

async fn assignment_state(c: &Client, id: &str) -> pb::assignment::State {
    c.assignments()
        .get(c.req(pb::GetAssignmentRequest { assignment: id.into() }))
        .await
        .expect("get assignment")
        .into_inner()
        .state
        .expect("state")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lead_and_a_worker_work_through_a_real_node_and_it_survives_a_crash() {
    let mut cluster = Cluster::start(1, "");
    let api = cluster.nodes[&1].api;
    let anon = Client { channel: connect(api).await, key: None };
    // Wait until the node has elected itself and serves.
    let (lead_id, lead) = register_when_serving(&anon, "reg-lead", || cluster.logs()).await;
    let (worker_id, worker) = register(&anon, "reg-worker").await;

    // Unauthenticated and malformed calls are refused with stable codes naming what is wrong.
    let e = anon
        .turn()
        .get_turn(anon.req(pb::GetTurnRequest { cursor: String::new(), page_size: 0 }))
        .await
        .expect_err("no key");
    assert_eq!(code(&e), "UNAUTHENTICATED");
    let e = lead.threads().post(lead.req(post("p0", "not-an-id", "x", None, None))).await.expect_err("bad id");
    assert_eq!(code(&e), "INVALID_ARGUMENT");
    assert!(e.message().contains("thread"), "{}", e.message());
    let e = lead.threads().post(lead.req(post("p0", "th_999", "x", None, None))).await.expect_err("unknown thread");
    assert_eq!(code(&e), "NOT_FOUND");

    // A thread with a first grant; the worker joins with the secret, shown once.
    let created = lead
        .threads()
        .create(lead.req(pb::CreateThreadRequest {
            idempotency_key: "t1".into(),
            subject: content("work"),
            grant: Some(pb::GrantSpec { role: pb::Role::Speaker as i32 }),
        }))
        .await
        .expect("create thread")
        .into_inner();
    let Some(pb::receipt::Result::ThreadCreated(t)) = created.receipt.clone().and_then(|r| r.result) else { panic!() };
    assert!(created.grant_secret.starts_with("kf_gr_"));
    let replay = lead
        .threads()
        .create(lead.req(pb::CreateThreadRequest {
            idempotency_key: "t1".into(),
            subject: content("work"),
            grant: Some(pb::GrantSpec { role: pb::Role::Speaker as i32 }),
        }))
        .await
        .expect("replay")
        .into_inner();
    assert!(replay.replayed && replay.grant_secret.is_empty(), "L3: the secret is shown only once");
    assert_eq!(replay.receipt, created.receipt, "L3: the replay returns the original receipt");
    worker
        .threads()
        .join(worker.req(pb::JoinRequest { idempotency_key: "j1".into(), grant_secret: created.grant_secret }))
        .await
        .expect("join");

    // §6.3 rule 3: two speakers, so the worker owes a response.
    lead.threads().post(lead.req(post("p1", &t.thread, "hello", None, None))).await.expect("post");
    let items = turn(&worker).await;
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].next, pb::NextStep::Respond as i32);

    // An assignment with a one-second delivery window: taken, then left to time out on the node's
    // own deadline scheduler (L4), with no action by anyone.
    let posted = lead
        .threads()
        .post(lead.req(post(
            "p2",
            &t.thread,
            "please",
            None,
            Some(pb::NewAssignment {
                addressee: worker_id.clone(),
                criteria: content("criteria"),
                output_structure: None,
                delivery_window_micros: Some(1_000_000),
                judgment_window_micros: None,
            }),
        )))
        .await
        .expect("assign")
        .into_inner();
    let Some(pb::receipt::Result::Posted(p)) = posted.receipt.and_then(|r| r.result) else { panic!() };
    let asg = p.assignment.expect("assignment id");
    worker
        .assignments()
        .take(worker.req(pb::TakeAssignmentRequest { idempotency_key: "take".into(), assignment: asg.clone() }))
        .await
        .expect("take");
    assert!(turn(&worker).await.iter().any(|i| i.next == pb::NextStep::Deliver as i32));
    let start = Instant::now();
    loop {
        if let pb::assignment::State::Ended(e) = assignment_state(&lead, &asg).await {
            assert_eq!(e.outcome, pb::AssignmentOutcome::TimedOut as i32);
            break;
        }
        assert!(start.elapsed() < BOUND, "the deadline never ended the assignment\n{}", cluster.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Exactly once: one deadline fact in the thread's history.
    let ws = lead
        .turn()
        .get_working_set(lead.req(pb::GetWorkingSetRequest { object: t.thread.clone() }))
        .await
        .expect("ws")
        .into_inner();
    assert_eq!(ws.history.iter().filter(|h| h.fact == "deadline_passed").count(), 1);
    // The late delivery is refused: the deadline won.
    let e = worker
        .assignments()
        .deliver(worker.req(pb::DeliverAssignmentRequest {
            idempotency_key: "late".into(),
            assignment: asg.clone(),
            output: content("late"),
        }))
        .await
        .expect_err("late");
    // The timer already ended it; the answer is the same as if this delivery had found it due.
    assert_eq!(code(&e), "DEADLINE_PASSED");

    // Crash: SIGKILL, restart from the same data directory, every acknowledged action is there.
    let node = cluster.nodes.get_mut(&1).expect("node");
    node.kill();
    node.start();
    let lead = Client { channel: connect(api).await, key: lead.key.clone() };
    let start = Instant::now();
    let ws = loop {
        match lead.turn().get_working_set(lead.req(pb::GetWorkingSetRequest { object: t.thread.clone() })).await {
            Ok(ws) => break ws.into_inner(),
            Err(s) => {
                assert!(start.elapsed() < BOUND, "node did not come back: {s}\n{}", cluster.logs());
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    assert!(ws.history.iter().any(|h| h.fact == "posted"));
    let again = lead.agents().register(lead.req(pb::RegisterRequest { idempotency_key: "reg-lead".into() })).await;
    // The registration key was used by the anonymous registrar; a replay returns the original
    // receipt and no key.
    let again = again.expect("replay after restart").into_inner();
    assert!(again.replayed && again.agent_key.is_empty());
    let Some(pb::receipt::Result::AgentRegistered(a)) = again.receipt.and_then(|r| r.result) else { panic!() };
    assert_eq!(a.agent, lead_id);

    // SIGTERM: a clean exit.
    let node = cluster.nodes.get_mut(&1).expect("node");
    assert!(node.terminate(), "kungfud did not exit cleanly on SIGTERM\n{}", node.log());
}

/// L4: the configured limits are replicated at bootstrap and enforced, with the field named; a
/// message over `api.max_message_bytes` gets the same error shape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_limits_are_replicated_and_enforced() {
    let cluster = Cluster::start(1, "[api]\nmax_message_bytes = 65536\n[limits]\nmax_content_bytes = 16\n");
    let anon = Client { channel: connect(cluster.nodes[&1].api).await, key: None };
    let (_, agent) = register_when_serving(&anon, "r", || cluster.logs()).await;
    let big = agent
        .memories()
        .create(agent.req(pb::CreateMemoryRequest { idempotency_key: "m1".into(), content: content(&"x".repeat(32)) }))
        .await
        .expect_err("over the configured limit");
    assert_eq!(code(&big), "LIMIT_EXCEEDED");
    assert!(big.message().contains("content"), "{}", big.message());
    let huge = agent
        .memories()
        .create(
            agent.req(pb::CreateMemoryRequest { idempotency_key: "m0".into(), content: content(&"x".repeat(70_000)) }),
        )
        .await
        .expect_err("over the message limit");
    let r = kungfu_api::status_rejection(&huge).unwrap_or_else(|| panic!("no error details: {huge:?}"));
    assert_eq!((r.code.as_str(), r.field.as_deref()), ("LIMIT_EXCEEDED", Some("request")), "{r:?}");
    assert!(r.message.contains("api.max_message_bytes of 65536"), "{}", r.message);
    agent
        .memories()
        .create(agent.req(pb::CreateMemoryRequest { idempotency_key: "m2".into(), content: content("small") }))
        .await
        .expect("within the limit");
}

/// L4 at the edge: a burst past the agent's write rate is refused with RATE_LIMITED and a
/// `retry_after`, with no effect; metrics count actions by kind and outcome, refusals by code, and
/// publish the raft state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_refuse_with_retry_after_and_metrics_count_what_happened() {
    let metrics_port = free_port();
    let cluster = Cluster::start(
        1,
        &format!(
            "metrics_listen = \"127.0.0.1:{metrics_port}\"\n[rate_limits]\nwrites_per_second_per_agent = 1\nwrite_burst = 2\n"
        ),
    );
    let anon = Client { channel: connect(cluster.nodes[&1].api).await, key: None };
    let (_, agent) = register_when_serving(&anon, "r", || cluster.logs()).await;
    let mut limited = None;
    for i in 0..5 {
        let r = agent
            .memories()
            .create(agent.req(pb::CreateMemoryRequest { idempotency_key: format!("m{i}"), content: content("x") }))
            .await;
        if let Err(s) = r {
            limited = Some((i, s));
            break;
        }
    }
    let (i, s) = limited.expect("a burst of five writes at one per second is limited");
    assert!(i >= 2, "the burst of two is allowed");
    assert_eq!(code(&s), "RATE_LIMITED");
    let r = kungfu_api::status_rejection(&s).expect("rejection details");
    assert!(r.retry_after.is_some_and(|m| m.0 > 0), "{r:?}");
    // Reads have their own budget.
    agent
        .turn()
        .get_turn(agent.req(pb::GetTurnRequest { cursor: String::new(), page_size: 10 }))
        .await
        .expect("reads are not limited by writes");

    let addr: std::net::SocketAddr = format!("127.0.0.1:{metrics_port}").parse().expect("addr");
    let start = Instant::now();
    let body = loop {
        let body = http_get(addr, "/metrics").await;
        if body.lines().any(|l| l == "kungfu_raft_is_leader 1") {
            break body;
        }
        assert!(start.elapsed() < BOUND, "metrics never showed this node as leader:\n{body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(body.contains("kungfu_actions_total{kind=\"register_agent\",outcome=\"ok\"} 1"), "{body}");
    assert!(body.contains("kungfu_actions_total{kind=\"create_memory\",outcome=\"ok\"}"), "{body}");
    assert!(body.contains("kungfu_edge_refusals_total{code=\"RATE_LIMITED\"}"), "{body}");
    assert!(body.contains("kungfu_action_seconds_bucket"), "{body}");
    assert!(body.contains("kungfu_raft_applied_index"), "{body}");
}

/// Issue #16, deliverable 2: with nothing configured but the HTTP listener (on in every shipped
/// configuration and in `kungfu dev up`), `/metrics` is served, every family has `# HELP` and
/// `# TYPE`, `promtool check metrics` accepts the exposition, and the process, build, disk, raft
/// and actor families are there with live values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_on_by_default_described_for_promtool_and_cover_process_build_disk_raft_and_actors() {
    let http_port = free_port();
    let cluster = Cluster::start(1, &format!("http_listen = \"127.0.0.1:{http_port}\"\n"));
    let anon = Client { channel: connect(cluster.nodes[&1].api).await, key: None };
    let (_, agent) = register_when_serving(&anon, "metrics", || cluster.logs()).await;
    agent
        .memories()
        .create(agent.req(pb::CreateMemoryRequest { idempotency_key: "m".into(), content: content("x") }))
        .await
        .expect("create");
    let addr: std::net::SocketAddr = format!("127.0.0.1:{http_port}").parse().expect("addr");
    let start = Instant::now();
    let body = loop {
        let answer = http_get(addr, "/metrics").await;
        let body = answer.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
        // The raft gauges are sampled every second: wait for a sample taken after the writes
        // above applied, not only one that shows a ready leader.
        let applied = body
            .lines()
            .find_map(|l| l.strip_prefix("kungfu_raft_applied_index "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0);
        if answer.starts_with("HTTP/1.1 200")
            && body.lines().any(|l| l == "kungfu_ready 1")
            && body.lines().any(|l| l == "kungfu_raft_is_leader 1")
            && applied >= 2.0
        {
            break body;
        }
        assert!(start.elapsed() < BOUND, "metrics never showed a ready leader with the writes applied:\n{answer}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // Every sample's family is described and typed.
    let families: std::collections::BTreeSet<&str> = body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap_or(""))
        .map(|n| n.trim_end_matches("_bucket").trim_end_matches("_sum").trim_end_matches("_count"))
        .collect();
    for family in &families {
        assert!(body.contains(&format!("# HELP {family} ")), "no HELP for {family}:\n{body}");
        assert!(body.contains(&format!("# TYPE {family} ")), "no TYPE for {family}:\n{body}");
    }
    let value = |name: &str| -> f64 {
        let line = body
            .lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
            .unwrap_or_else(|| panic!("no sample of {name}:\n{body}"));
        line.rsplit(' ').next().and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("value of {line}"))
    };
    // Process.
    assert!(value("process_resident_memory_bytes") > 1e6, "RSS");
    assert!(value("process_open_fds") >= 3.0, "fds");
    // Whole seconds (a counter of the `metrics` crate is an integer): a node just started may
    // not have used one yet, so the family and its type are what can be asserted here.
    assert!(value("process_cpu_seconds_total") >= 0.0, "CPU");
    assert!(body.contains("# TYPE process_cpu_seconds_total counter"), "{body}");
    // Build: the commit `kungfud --version` names, and the compiler.
    let version = std::process::Command::new(kungfud()).arg("--version").output().expect("kungfud --version");
    let version = String::from_utf8_lossy(&version.stdout).to_string();
    let build = body.lines().find(|l| l.starts_with("kungfu_build_info{")).expect("build info");
    let commit = build.split("commit=\"").nth(1).and_then(|c| c.split('"').next()).expect("commit label");
    assert!(!commit.is_empty() && version.contains(&format!("commit {commit}")), "{build} vs {version}");
    assert!(build.contains("rustc=\"rustc 1."), "{build}");
    assert!(build.ends_with(" 1"), "{build}");
    // Disk: the data directory holds the log and the state; its filesystem has room.
    assert!(value("kungfu_data_dir_bytes") > 0.0, "data dir bytes");
    assert!(value("kungfu_data_dir_free_bytes") > 0.0, "free bytes");
    assert!(value("kungfu_data_dir_size_bytes") >= value("kungfu_data_dir_free_bytes"), "size >= free");
    // Raft: a term, an applied index that covers the actions, no lag on a lone node.
    assert!(value("kungfu_raft_term") >= 1.0, "{body}");
    assert!(value("kungfu_raft_applied_index") >= 2.0);
    assert!(value("kungfu_raft_committed_index") >= value("kungfu_raft_applied_index"));
    assert_eq!(value("kungfu_raft_commit_lag_entries") + value("kungfu_raft_apply_lag_entries"), 0.0, "idle lone node");
    assert_eq!(value("kungfu_raft_rpc_timeouts_total"), 0.0);
    // Actors: the gauges exist (the create went through an actor only for threads and Tasks).
    assert!(value("kungfu_live_actors") >= 0.0 && value("kungfu_actor_queued_actions") == 0.0);
    assert!(body.contains("kungfu_actions_total{kind=\"create_memory\",outcome=\"ok\"} 1"), "{body}");

    // promtool, Prometheus' own checker (Debian's `prometheus` package; `.ci/run` installs it).
    let mut promtool = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool is installed (apt-get install prometheus)");
    use std::io::Write;
    promtool.stdin.take().expect("stdin").write_all(body.as_bytes()).expect("feed promtool");
    let checked = promtool.wait_with_output().expect("promtool ran");
    assert!(
        checked.status.success() && checked.stdout.is_empty() && checked.stderr.is_empty(),
        "promtool check metrics: {}{}\n{body}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
}

/// A node asked to stop (SIGTERM) while clients still hold connections, one of them a bare TCP
/// connection that never sends a byte, stops anyway, cleanly, after its shutdown grace (graceful
/// shutdown alone waits for such a connection forever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_a_node_even_while_a_client_keeps_its_connection_open() {
    let mut cluster = Cluster::start(1, "");
    let anon = Client { channel: connect(cluster.nodes[&1].api).await, key: None };
    let (_, agent) = register_when_serving(&anon, "idle-client", || cluster.logs()).await;
    agent
        .memories()
        .create(agent.req(pb::CreateMemoryRequest { idempotency_key: "m".into(), content: content("x") }))
        .await
        .expect("a call on the connection");
    // An SDK client too (its channel keeps HTTP/2 keepalives going).
    let sdk = kungfu_client::Client::connect(
        vec![cluster.nodes[&1].api.to_string()],
        None,
        kungfu_client::ClientOptions::default(),
    )
    .await
    .expect("sdk");
    let registered = sdk.register(None).await.expect("register through the sdk");
    // And a bare TCP connection that never speaks (a port probe, a stuck peer): graceful shutdown
    // would wait for it forever.
    let probe = std::net::TcpStream::connect(cluster.nodes[&1].api).expect("tcp connect");
    // `agent`, `sdk`, `probe` and their connections stay alive across the stop.
    let node = cluster.nodes.get_mut(&1).expect("node");
    let started = Instant::now();
    assert!(node.terminate(), "the node did not exit cleanly within the bound:\n{}", node.log());
    println!("stopped in {:?}", started.elapsed());
    drop((agent, sdk, registered, probe));
}

/// Reflection answers in both revisions (issue #16): `grpc.reflection.v1` (grpcurl, grpcui) and
/// `grpc.reflection.v1alpha` (Python's grpcio-reflection, older grpcurl), each listing the API's
/// services and health.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_lists_the_services_in_both_revisions() {
    use tonic_reflection::pb::{v1, v1alpha};
    let cluster = Cluster::start(1, "");
    let anon = Client { channel: connect(cluster.nodes[&1].api).await, key: None };
    register_when_serving(&anon, "reflect", || cluster.logs()).await;
    let expected = ["kungfu.v1.ThreadService", "kungfu.v1.TurnService", "grpc.health.v1.Health"];

    let request = v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(v1::server_reflection_request::MessageRequest::ListServices(String::new())),
    };
    let mut client = v1::server_reflection_client::ServerReflectionClient::new(anon.channel.clone());
    let mut answers =
        client.server_reflection_info(tokio_stream::iter([request])).await.expect("v1 reflection").into_inner();
    let answer = answers.message().await.expect("a v1 answer").expect("one answer");
    let Some(v1::server_reflection_response::MessageResponse::ListServicesResponse(list)) = answer.message_response
    else {
        panic!("v1 answered something else: {answer:?}");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for name in expected {
        assert!(names.iter().any(|n| n == name), "v1 does not list {name}: {names:?}");
    }

    let request = v1alpha::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(v1alpha::server_reflection_request::MessageRequest::ListServices(String::new())),
    };
    let mut client = v1alpha::server_reflection_client::ServerReflectionClient::new(anon.channel.clone());
    let mut answers =
        client.server_reflection_info(tokio_stream::iter([request])).await.expect("v1alpha reflection").into_inner();
    let answer = answers.message().await.expect("a v1alpha answer").expect("one answer");
    let Some(v1alpha::server_reflection_response::MessageResponse::ListServicesResponse(list)) =
        answer.message_response
    else {
        panic!("v1alpha answered something else: {answer:?}");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for name in expected {
        assert!(names.iter().any(|n| n == name), "v1alpha does not list {name}: {names:?}");
    }
}

/// A body that is not the method's message (field 1 a number where `PostRequest` has the
/// idempotency key, a string) is the caller's fault: INVALID_ARGUMENT naming `request` and the
/// method, with our error details; tonic alone answers INTERNAL (issue #16).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_request_body_is_invalid_argument_naming_the_method() {
    #[derive(Clone, PartialEq, prost::Message)]
    struct WrongShape {
        #[prost(uint64, tag = "1")]
        n: u64,
    }
    let cluster = Cluster::start(1, "");
    let anon = Client { channel: connect(cluster.nodes[&1].api).await, key: None };
    register_when_serving(&anon, "undecodable", || cluster.logs()).await;
    let mut grpc = tonic::client::Grpc::new(anon.channel.clone());
    grpc.ready().await.expect("ready");
    let codec = tonic_prost::ProstCodec::<WrongShape, pb::PostResponse>::default();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/kungfu.v1.ThreadService/Post");
    let status =
        grpc.unary(tonic::Request::new(WrongShape { n: 7 }), path, codec).await.expect_err("not a PostRequest");
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    let r = kungfu_api::status_rejection(&status).expect("our error details");
    assert_eq!(r.field.as_deref(), Some("request"));
    assert!(r.message.contains("kungfu.v1.ThreadService/Post"), "{r:?}");
}

/// Issue #16, deliverable 7: a node logging to a file (not a terminal) writes no ANSI escape codes,
/// and `--log-format json` writes one JSON object a line with the level, the message and the
/// fields, which a log shipper can parse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_carry_no_colour_codes_in_a_file_and_json_on_request() {
    let mut cluster = Cluster::start(1, "");
    let anon = Client { channel: connect(cluster.nodes[&1].api).await, key: None };
    let _ = register_when_serving(&anon, "logs", || cluster.logs()).await;
    let text = cluster.nodes[&1].log();
    assert!(text.contains("INFO") && text.contains("serving the public API"), "{text}");
    assert!(!text.contains('\u{1b}'), "escape codes in a log file:\n{text:?}");
    drop(anon);

    let node = cluster.nodes.get_mut(&1).expect("node");
    assert!(node.terminate(), "clean stop:\n{}", node.log());
    let log_path = node.config.with_extension("json.log");
    let log = std::fs::File::create(&log_path).expect("log file");
    let mut child = std::process::Command::new(kungfud())
        .arg("--config")
        .arg(&node.config)
        .args(["--log-format", "json"])
        .env("KUNGFU_LOG", "info")
        .stdout(std::process::Stdio::from(log.try_clone().expect("log")))
        .stderr(std::process::Stdio::from(log))
        .spawn()
        .expect("spawn kungfud --log-format json");
    let start = Instant::now();
    let text = loop {
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        if text.contains("serving the public API") {
            break text;
        }
        if start.elapsed() > BOUND {
            let _ = child.kill();
            panic!("the node never said it serves:\n{text}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let _ = child.kill();
    let _ = child.wait();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() >= 2, "{text}");
    for line in &lines {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not one JSON object a line ({e}): {line}"));
        assert!(v["level"].is_string() && v["timestamp"].is_string(), "{line}");
        assert!(v["fields"]["message"].is_string(), "{line}");
    }
    let serving = lines.iter().find(|l| l.contains("serving the public API")).expect("serving line");
    let v: serde_json::Value = serde_json::from_str(serving).expect("json");
    assert_eq!(v["level"], "INFO", "{serving}");
    assert_eq!(v["fields"]["api"], node.api.to_string(), "the field is a JSON value of its own: {serving}");
}

/// Issue #16, deliverable 4: one peer cannot hold more than `api.max_connections_per_peer`
/// connections to the API port (the ones past it are closed on accept), and a connection that
/// never completes the HTTP/2 handshake is closed after `api.handshake_timeout_ms`; a real client
/// is served meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_port_bounds_connections_per_peer_and_closes_silent_ones() {
    use tokio::io::AsyncReadExt;
    // Whether the node closed `s` (EOF or reset) within `wait`; false if it is still open.
    async fn closed_within(s: &mut tokio::net::TcpStream, wait: Duration) -> bool {
        // The server's own HTTP/2 preface (a SETTINGS frame) may arrive first; read past it.
        let deadline = tokio::time::Instant::now() + wait;
        let mut buf = [0u8; 256];
        loop {
            match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return true,
                Ok(Ok(_)) => continue,
                Err(_) => return false,
            }
        }
    }
    let cluster = Cluster::start(1, "[api]\nhandshake_timeout_ms = 8000\nmax_connections_per_peer = 4\n");
    let anon = Client { channel: connect(cluster.nodes[&1].api).await, key: None };
    let _ = register_when_serving(&anon, "bounds", || cluster.logs()).await;
    let api = cluster.nodes[&1].api;
    // The client holds one connection; of 8 silent ones, 3 fit under the bound of 4 and 5 are
    // closed on accept (well before the 8 s handshake timeout closes the others).
    let mut silent = Vec::new();
    for _ in 0..8 {
        silent.push(tokio::net::TcpStream::connect(api).await.expect("connect"));
    }
    let mut open = Vec::new();
    for mut s in silent {
        if !closed_within(&mut s, Duration::from_millis(1500)).await {
            open.push(s);
        }
    }
    assert_eq!(open.len(), 3, "connections past the per-peer bound must be closed on accept");
    // The client's own connection is unaffected.
    let (_, still) = register_when_serving(&anon, "bounds-after", || cluster.logs()).await;
    drop(still);
    // The silent ones that were let in are closed by the handshake timeout, not held forever.
    let start = Instant::now();
    for mut s in open {
        assert!(closed_within(&mut s, BOUND).await, "a silent connection was held open past {BOUND:?}");
    }
    println!("silent connections closed {:?} after the check", start.elapsed());
    // Their places are free again: a new client connects and is served.
    let fresh = Client { channel: connect(api).await, key: None };
    let _ = register_when_serving(&fresh, "bounds-fresh", || cluster.logs()).await;
}

/// `worker_threads` sizes the node's runtime (issue #30): a node given one thread still serves
/// writes and linearizable reads (apply, raft and the door share it), and its metrics say how
/// many worker threads it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_one_runtime_thread_serves_writes_and_reads() {
    let http_port = free_port();
    let cluster = Cluster::start(1, &format!("worker_threads = 1\nhttp_listen = \"127.0.0.1:{http_port}\"\n"));
    let anon = Client { channel: connect(cluster.nodes[&1].api).await, key: None };
    let (_, agent) = register_when_serving(&anon, "one-thread", || cluster.logs()).await;
    for i in 0..20 {
        let req =
            agent.req(pb::CreateMemoryRequest { idempotency_key: format!("m{i}"), content: content(&format!("v{i}")) });
        agent.memories().create(req).await.unwrap_or_else(|s| panic!("write {i}: {s}\n{}", cluster.logs()));
    }
    let read = agent.req(pb::GetMemoryRequest { memory: "mem_20".into(), version: None });
    let got = agent.memories().get(read).await.unwrap_or_else(|s| panic!("read: {s}\n{}", cluster.logs()));
    let body = got.into_inner().content.map(|c| c.body).unwrap_or_default();
    assert_eq!(body, b"v19", "the last write reads back");
    // The gauges are sampled every second.
    let addr: std::net::SocketAddr = format!("127.0.0.1:{http_port}").parse().expect("addr");
    let start = Instant::now();
    loop {
        let answer = http_get(addr, "/metrics").await;
        if let Some(v) = answer.lines().find_map(|l| l.strip_prefix("kungfu_runtime_worker_threads ")) {
            assert_eq!(v.trim(), "1", "the runtime's worker threads");
            break;
        }
        assert!(start.elapsed() < BOUND, "no kungfu_runtime_worker_threads sample:\n{answer}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
