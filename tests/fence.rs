//! Issue #36, deliverable 2: a node whose raft core stops fences itself. A real `kungfud` has a
//! real fault injected into its raft log (`KUNGFU_FAULT_RAFT_LOG`, read only by the server for
//! these tests): a failed fsync, which openraft turns into a fatal storage error, or a panic on
//! the raft core's own task, which leaves the core's last metrics (a leader's) behind. Either way
//! the node must stop serving at once (`/readyz` 503 naming the stopped core, health NOT_SERVING,
//! calls refused), log it once, write a bounded log (the deadline scheduler once wrote 2 MB/s
//! spinning on a dead core's metrics), and exit 1 for its supervisor to restart it.

use kungfu_api::pb;
use kungfu_system_tests::{BOUND, Client, Cluster, NodeProc, connect, content, free_port, register_when_serving};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const TOKEN: &str = "fence-operator-token-0123";
/// Most lines the second run of the node may write, from its start to its exit: its start-up
/// lines, the fault, openraft's own error lines, the fence and the shutdown take a few dozen.
const MAX_LOG_LINES: usize = 120;
const MAX_LOG_BYTES: usize = 64 * 1024;

/// One HTTP/1.1 GET, or None when nothing answers (the node has exited).
async fn try_get(addr: SocketAddr, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(addr)).await.ok()?.ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(2), s.read_to_string(&mut out)).await.ok()?.ok()?;
    // A connection the server accepted and then closed unanswered (its graceful shutdown drops
    // connections not yet served) is no answer, as a refused connect is none.
    out.starts_with("HTTP/").then_some(out)
}

/// gRPC health of the whole server, or None when nothing answers.
async fn try_health(api: SocketAddr) -> Option<i32> {
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{api}")).ok()?;
    let channel =
        endpoint.connect_timeout(Duration::from_secs(1)).timeout(Duration::from_secs(2)).connect().await.ok()?;
    let answer = HealthClient::new(channel).check(HealthCheckRequest { service: String::new() }).await.ok()?;
    Some(answer.into_inner().status)
}

/// What the node answered between the failed write and its exit.
#[derive(Debug, Default)]
struct Seen {
    readyz: Vec<String>,
    /// gRPC health, with how long after the failed write it was asked.
    health: Vec<(Duration, i32)>,
    refusals: Vec<String>,
}

/// Starts one node, restarts it with `fault` armed, writes until a write fails after one
/// succeeded, watches it fence and exit, and checks its exit status and its log.
async fn fences_and_exits(fault: &str) {
    let http_port = free_port();
    let extra = format!("http_listen = \"127.0.0.1:{http_port}\"\noperator_token = \"{TOKEN}\"\n");
    let mut cluster = Cluster::start(1, &extra);
    let http: SocketAddr = format!("127.0.0.1:{http_port}").parse().expect("addr");
    {
        let anon = Client { channel: connect(cluster.nodes[&1].api).await, key: None };
        register_when_serving(&anon, "before-the-fault", || cluster.logs()).await;
    }
    let node: &mut NodeProc = cluster.nodes.get_mut(&1).expect("node 1");
    assert!(node.terminate(), "a clean stop before the restart:\n{}", node.log());
    node.env = vec![("KUNGFU_FAULT_RAFT_LOG".into(), fault.into())];
    node.start();
    let api = node.api;
    let anon = Client { channel: connect(api).await, key: None };
    let (_, agent) = register_when_serving(&anon, "after-the-restart", || String::new()).await;

    // Write until one write fails (the fault), bounded.
    let start = Instant::now();
    let mut written = 0;
    let failed = loop {
        let req = agent.req(pb::CreateMemoryRequest { idempotency_key: format!("m{written}"), content: content("x") });
        match agent.memories().create(req).await {
            Ok(_) => written += 1,
            Err(s) => break s,
        }
        assert!(start.elapsed() < BOUND && written < 10_000, "no write failed after {written}:\n{}", node.log());
    };
    assert!(written > 0, "the node served writes before the fault");

    // Between the failure and the exit: whatever still answers must say the node is fenced.
    let mut seen = Seen::default();
    let start = Instant::now();
    while !node.has_exited() && start.elapsed() < BOUND {
        if let Some(answer) = try_get(http, "/readyz").await {
            seen.readyz.push(
                answer.lines().next().unwrap_or_default().to_string() + " " + answer.lines().last().unwrap_or_default(),
            );
        }
        if let Some(status) = try_health(api).await {
            seen.health.push((start.elapsed(), status));
        }
        let read = agent.req(pb::GetMemoryRequest { memory: "mem_1".into(), version: None });
        // A refusal the node made (a transport error once it has closed its listener is not one).
        if let Err(s) = agent.memories().get(read).await
            && let Some(r) = kungfu_api::status_rejection(&s)
        {
            seen.refusals.push(format!("{}: {}", r.code.as_str(), r.message));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = node.wait_exit(BOUND).unwrap_or_else(|| panic!("the fenced node did not exit:\n{}", node.log()));
    let log = node.log();
    eprintln!(
        "fault {fault}: {written} writes, then {}; until the exit: {} /readyz, {} health, {} refused calls; log:\n{log}",
        failed.message(),
        seen.readyz.len(),
        seen.health.len(),
        seen.refusals.len()
    );

    assert_eq!(status.code(), Some(1), "exit status 1 for the supervisor to restart it ({status}):\n{log}");
    // Ready never again once the core stopped; /readyz names why. A panicking core's task may
    // still be unwinding when the failed write returns (the write's answer is dropped before the
    // metrics channel), so answers before the first 503 may still be 200; none after it.
    let first_fenced = seen.readyz.iter().position(|r| r.starts_with("HTTP/1.1 503"));
    let first_fenced = first_fenced.unwrap_or_else(|| panic!("/readyz never said the node is fenced: {seen:?}\n{log}"));
    for r in &seen.readyz[..first_fenced] {
        assert!(r.starts_with("HTTP/1.1 200"), "{r}\n{log}");
    }
    for r in &seen.readyz[first_fenced..] {
        assert!(r.starts_with("HTTP/1.1 503") && r.contains("raft core of node 1 stopped"), "{r}\n{log}");
    }
    // gRPC health is refreshed every 200 ms: an answer asked later than that says NOT_SERVING.
    for (after, s) in &seen.health {
        if *after >= Duration::from_millis(400) {
            let not_serving = tonic_health::pb::health_check_response::ServingStatus::NotServing as i32;
            assert_eq!(*s, not_serving, "health {after:?} after the fault: {seen:?}");
        }
    }
    // Every call it answered once fenced, it refused as fenced (before, while the core was still
    // unwinding, a call may have failed otherwise, as the write did).
    let fenced = |r: &String| r.starts_with("UNAVAILABLE: node 1 is fenced: its raft core stopped");
    if let Some(first) = seen.refusals.iter().position(fenced) {
        for r in &seen.refusals[first..] {
            assert!(fenced(r), "{r}");
        }
    }
    // Logged once at ERROR, and the exit names it last.
    let fence_lines = log.lines().filter(|l| l.contains("this node is fenced")).count();
    assert_eq!(fence_lines, 1, "the fence is logged once:\n{log}");
    assert!(log.lines().any(|l| l.contains("ERROR") && l.contains("this node is fenced")), "{log}");
    let last = log.lines().last().unwrap_or_default();
    assert!(last.starts_with("error: the raft core of node 1 stopped"), "the exit names the cause: {last}");
    // No loop spins: the whole run, start to exit, stays within a small log.
    let lines = log.lines().count();
    assert!(lines <= MAX_LOG_LINES && log.len() <= MAX_LOG_BYTES, "{lines} lines, {} bytes:\n{log}", log.len());
    let armed = log.lines().filter(|l| l.contains("deadline timers armed")).count();
    assert!(armed <= 2, "the deadline scheduler re-armed {armed} times:\n{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_fsync_of_the_raft_log_fences_the_node_and_it_exits_1_with_a_bounded_log() {
    fences_and_exits("sync-fails-after:30").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_on_the_raft_core_task_fences_the_node_and_it_exits_1_with_a_bounded_log() {
    fences_and_exits("append-panics-after:30").await;
}
