//! OpenTelemetry (issue #18), black box: real `kungfud` processes export their spans over OTLP/gRPC
//! to a receiver in this test process. One write enters a follower with a `traceparent` the test
//! chose, is forwarded to the leader, replicated and applied on every node; after SIGTERM (which
//! flushes) the receiver holds one trace that shows it all, parent by parent. With telemetry off a
//! node exports nothing, even with the SDK's own endpoint variable pointing at the receiver.

use kungfu_api::pb;
use kungfu_system_tests::{BOUND, Client, Cluster, NodeProc, agreed_leader, connect, mcp_addr, register_when_serving};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TOKEN: &str = "telemetry-test-operator-token";
/// The trace the test starts, and the span of the test's own (remote) caller.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";
/// OTLP span kinds.
const SERVER: i32 = 2;
const CLIENT: i32 = 3;

/// One received span, with the node that sent it (`service.instance.id`).
#[derive(Clone, Debug)]
struct Got {
    node: String,
    name: String,
    trace: String,
    id: String,
    parent: String,
    /// OTLP `SpanKind`: 2 server, 3 client.
    kind: i32,
}

/// An in-process OTLP/gRPC trace receiver: keeps every span and counts export calls.
#[derive(Clone, Default)]
struct Receiver {
    spans: Arc<Mutex<Vec<Got>>>,
    exports: Arc<Mutex<usize>>,
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        *self.exports.lock().expect("lock") += 1;
        let mut got = Vec::new();
        for rs in request.into_inner().resource_spans {
            let node = rs
                .resource
                .iter()
                .flat_map(|r| r.attributes.iter())
                .find(|kv| kv.key == "service.instance.id")
                .and_then(|kv| kv.value.as_ref()?.value.as_ref())
                .map(|v| match v {
                    Value::StringValue(s) => s.clone(),
                    other => format!("{other:?}"),
                })
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for s in ss.spans {
                    got.push(Got {
                        node: node.clone(),
                        name: s.name,
                        trace: hex(&s.trace_id),
                        id: hex(&s.span_id),
                        parent: hex(&s.parent_span_id),
                        kind: s.kind,
                    });
                }
            }
        }
        self.spans.lock().expect("lock").extend(got);
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Starts the receiver on a free loopback port; it serves until the test's runtime ends.
async fn receiver() -> (Receiver, SocketAddr) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the receiver");
    let addr = listener.local_addr().expect("addr");
    let r = Receiver::default();
    let service = TraceServiceServer::new(r.clone());
    tokio::spawn(async move {
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        let _ = tonic::transport::Server::builder().add_service(service).serve_with_incoming(incoming).await;
    });
    (r, addr)
}

/// Waits until every node has applied at least `index` (bounded).
async fn all_applied(cluster: &Cluster, index: u64) {
    let start = Instant::now();
    loop {
        let mut behind = Vec::new();
        for node in cluster.nodes.values() {
            let mut req = tonic::Request::new(pb::ClusterStatusRequest {});
            req.metadata_mut().insert("authorization", format!("Bearer {TOKEN}").parse().expect("header"));
            let admin = pb::admin_service_client::AdminServiceClient::new(connect(node.api).await);
            let applied = admin.clone().cluster_status(req).await.ok().and_then(|s| s.into_inner().applied_index);
            if applied.unwrap_or(0) < index {
                behind.push((node.id, applied));
            }
        }
        if behind.is_empty() {
            return;
        }
        assert!(start.elapsed() < BOUND, "nodes behind entry {index}: {behind:?}\n{}", cluster.logs());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The leader's applied index (after a write answered there, it covers that write).
async fn applied_on(node: &NodeProc) -> u64 {
    let mut req = tonic::Request::new(pb::ClusterStatusRequest {});
    req.metadata_mut().insert("authorization", format!("Bearer {TOKEN}").parse().expect("header"));
    let admin = pb::admin_service_client::AdminServiceClient::new(connect(node.api).await);
    admin.clone().cluster_status(req).await.expect("status").into_inner().applied_index.unwrap_or(0)
}

/// Registers an agent through `client` with the test's `traceparent`, once.
async fn traced_register(client: &Client, key: &str) {
    let mut req = client.req(pb::RegisterRequest { idempotency_key: key.into() });
    let traceparent = format!("00-{TRACE_ID}-{CALLER_SPAN}-01");
    req.metadata_mut().insert("traceparent", traceparent.parse().expect("header"));
    client.agents().register(req).await.expect("the traced registration succeeds");
}

/// Whether `span` descends from the span `ancestor` (by id) within `spans`.
fn descends(spans: &HashMap<String, Got>, span: &Got, ancestor: &str) -> bool {
    let mut at = span.parent.clone();
    for _ in 0..64 {
        if at == ancestor {
            return true;
        }
        match spans.get(&at) {
            Some(p) => at = p.parent.clone(),
            None => return false,
        }
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_of_a_forwarded_write_runs_from_the_follower_to_apply_on_every_node() {
    let (rx, at) = receiver().await;
    let extra = format!("operator_token = \"{TOKEN}\"\n\n[telemetry]\notlp_endpoint = \"http://{at}\"\n");
    let mut cluster = Cluster::start(3, &extra);
    let leader = agreed_leader(&cluster, TOKEN).await;
    let follower = *cluster.nodes.keys().find(|id| **id != leader).expect("a follower");
    let anon = Client { channel: connect(cluster.nodes[&follower].api).await, key: None };
    // A first write through the follower, untraced by the test, until the cluster serves writes
    // (the new leader arms its timers first); then the one traced write, once.
    let logs = || cluster.logs();
    register_when_serving(&anon, "telemetry-warm-up", logs).await;
    traced_register(&anon, "telemetry-traced").await;
    let index = applied_on(&cluster.nodes[&leader]).await;
    all_applied(&cluster, index).await;
    // SIGTERM flushes each node's batched spans before it exits.
    for node in cluster.nodes.values_mut() {
        assert!(node.terminate(), "node {} stops cleanly on SIGTERM", node.id);
    }

    let (leader_s, follower_s) = (leader.to_string(), follower.to_string());
    let start = Instant::now();
    let spans: HashMap<String, Got> = loop {
        let ours: Vec<Got> = rx.spans.lock().expect("lock").iter().filter(|s| s.trace == TRACE_ID).cloned().collect();
        let applied_on: Vec<&str> = ours.iter().filter(|s| s.name == "raft.apply").map(|s| s.node.as_str()).collect();
        if cluster.nodes.keys().all(|id| applied_on.contains(&id.to_string().as_str())) {
            break ours.into_iter().map(|s| (s.id.clone(), s)).collect();
        }
        let names: Vec<(String, String)> = ours.iter().map(|s| (s.node.clone(), s.name.clone())).collect();
        assert!(start.elapsed() < BOUND, "the trace never showed apply on every node: {names:?}\n{}", cluster.logs());
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let one = |node: &str, name: &str| -> Got {
        let found: Vec<&Got> = spans.values().filter(|s| s.node == node && s.name == name).collect();
        assert_eq!(found.len(), 1, "one {name} on node {node}: {spans:#?}");
        found[0].clone()
    };

    // The follower: its request span continues the caller's trace, and forwards.
    let f_request = one(&follower_s, "grpc.request");
    assert_eq!(f_request.parent, CALLER_SPAN, "the follower's request is the caller's child");
    let f_forward = one(&follower_s, "grpc.forward");
    assert_eq!(f_forward.parent, f_request.id);
    // The leader: its request continues from the forwarding hop; the action under it.
    let l_request = one(&leader_s, "grpc.request");
    assert_eq!(l_request.parent, f_forward.id, "the leader's request is the forward's child");
    assert_eq!((f_request.kind, f_forward.kind, l_request.kind), (SERVER, CLIENT, SERVER), "span kinds");
    let action = one(&leader_s, "action");
    assert!(descends(&spans, &action, &f_forward.id), "the action descends from the follower's forward");
    let propose = one(&leader_s, "raft.propose");
    assert_eq!(propose.parent, action.id, "the proposal is the action's child");
    let l_apply = one(&leader_s, "raft.apply");
    assert_eq!(l_apply.parent, propose.id, "the leader applies under the proposal");
    // Every follower: the entry arrives in an AppendEntries the leader sent under the proposal,
    // and is applied under that append.
    for id in cluster.nodes.keys().filter(|id| **id != leader) {
        let node = id.to_string();
        let apply = one(&node, "raft.apply");
        let append = spans.get(&apply.parent).unwrap_or_else(|| panic!("the parent of node {node}'s apply"));
        assert_eq!((append.node.as_str(), append.name.as_str()), (node.as_str(), "raft.append"));
        let sent = spans.get(&append.parent).unwrap_or_else(|| panic!("the parent of node {node}'s append"));
        assert_eq!((sent.node.as_str(), sent.name.as_str()), (leader_s.as_str(), "raft.append_entries"));
        assert_eq!(sent.parent, propose.id, "replication to node {node} is the proposal's child");
        assert_eq!((sent.kind, append.kind), (CLIENT, SERVER), "span kinds of the raft RPC");
        assert!(descends(&spans, &apply, CALLER_SPAN), "node {node}'s apply is in the caller's trace");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_export_is_off_without_an_otlp_endpoint() {
    let (rx, at) = receiver().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (api, raft) = (kungfu_system_tests::free_port(), kungfu_system_tests::free_port());
    let config = dir.path().join("node.toml");
    let text = format!(
        "node_id = 1\ncluster_id = \"test\"\ndata_dir = \"{}\"\napi_listen = \"127.0.0.1:{api}\"\nraft_listen = \"127.0.0.1:{raft}\"\nbootstrap = true\noperator_token = \"{TOKEN}\"\n\n[raft]\n{}\n",
        dir.path().join("data").display(),
        kungfu_system_tests::TEST_RAFT
    );
    std::fs::write(&config, text).expect("write config");
    let mut node = NodeProc::for_config(
        1,
        format!("127.0.0.1:{api}").parse().expect("addr"),
        format!("127.0.0.1:{raft}").parse().expect("addr"),
        config,
    );
    // The SDK's own variables name the receiver: a node that built an exporter would use them.
    node.env.push(("OTEL_EXPORTER_OTLP_ENDPOINT".into(), format!("http://{at}")));
    node.env.push(("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT".into(), format!("http://{at}")));
    node.start();
    let anon = Client { channel: connect(node.api).await, key: None };
    let log = || node.log();
    register_when_serving(&anon, "telemetry-off-warm-up", log).await;
    traced_register(&anon, "telemetry-off-traced").await;
    assert!(node.terminate(), "the node stops cleanly on SIGTERM");
    // A node flushes before it exits: whatever it would have sent has arrived by now.
    assert_eq!(*rx.exports.lock().expect("lock"), 0, "no export call with telemetry off");
    assert!(rx.spans.lock().expect("lock").is_empty());
}

/// One MCP `tools/call` (revision 2026-07-28, no session) over raw HTTP/1.1, as the agent `key`,
/// with `traceparent`; returns the HTTP status.
async fn mcp_call(http: SocketAddr, tool: &str, key: &str, traceparent: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": tool, "arguments": {},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}
            }
        }
    })
    .to_string();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {http}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: {tool}\r\nAuthorization: Bearer {key}\r\ntraceparent: {traceparent}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut s = tokio::net::TcpStream::connect(http).await.expect("connect to the HTTP listener");
    s.write_all(head.as_bytes()).await.expect("write");
    s.write_all(body.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    tokio::time::timeout(BOUND, s.read_to_end(&mut out)).await.expect("the node answers").expect("read");
    let text = String::from_utf8_lossy(&out);
    text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

/// The MCP door passes an MCP request's `traceparent` on to its gRPC call: the node's request
/// span is the MCP client's child, in the client's trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_of_an_mcp_tool_call_continues_the_client_s_traceparent() {
    const MCP_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
    const MCP_CALLER: &str = "b7ad6b7169203331";
    let (rx, at) = receiver().await;
    let extra = format!(
        "operator_token = \"{TOKEN}\"\nhttp_listen = \"127.0.0.1:0\"\n\n[telemetry]\notlp_endpoint = \"http://{at}\"\n"
    );
    let mut cluster = Cluster::start(1, &extra);
    let http = mcp_addr(&cluster.nodes[&1]).await;
    let anon = Client { channel: connect(cluster.nodes[&1].api).await, key: None };
    let (_, agent) = register_when_serving(&anon, "telemetry-mcp", || cluster.logs()).await;
    let key = agent.key.clone().expect("the agent's key");
    let status = mcp_call(http, "turn_get", &key, &format!("00-{MCP_TRACE}-{MCP_CALLER}-01")).await;
    assert_eq!(status, 200, "the MCP tool call is answered");
    let node = cluster.nodes.get_mut(&1).expect("node 1");
    assert!(node.terminate(), "the node stops cleanly on SIGTERM");
    let start = Instant::now();
    loop {
        let found = rx
            .spans
            .lock()
            .expect("lock")
            .iter()
            .any(|s| s.trace == MCP_TRACE && s.name == "grpc.request" && s.parent == MCP_CALLER && s.node == "1");
        if found {
            return;
        }
        let ours: Vec<Got> = rx.spans.lock().expect("lock").iter().filter(|s| s.trace == MCP_TRACE).cloned().collect();
        assert!(start.elapsed() < BOUND, "no request span under the MCP client's: {ours:?}\n{}", cluster.logs());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An action on one Thread goes through that thread's actor (another task; ractor hands the
/// sender's span to the handler): its proposal and apply are still children of its `action`
/// span, in the caller's trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_of_an_action_on_a_thread_runs_through_its_actor() {
    const POST_TRACE: &str = "5c0f8d3a9e1b4c2d8f7a6b5c4d3e2f10";
    const POST_CALLER: &str = "1122334455667788";
    let (rx, at) = receiver().await;
    let extra = format!("operator_token = \"{TOKEN}\"\n\n[telemetry]\notlp_endpoint = \"http://{at}\"\n");
    let mut cluster = Cluster::start(1, &extra);
    let anon = Client { channel: connect(cluster.nodes[&1].api).await, key: None };
    let (_, agent) = register_when_serving(&anon, "telemetry-actor", || cluster.logs()).await;
    let created = agent
        .threads()
        .create(agent.req(pb::CreateThreadRequest {
            idempotency_key: "telemetry-thread".into(),
            subject: Some(pb::Content { body: b"traced".to_vec() }),
            grant: None,
        }))
        .await
        .expect("create a thread")
        .into_inner();
    let Some(pb::receipt::Result::ThreadCreated(t)) = created.receipt.and_then(|r| r.result) else {
        panic!("no thread in the receipt")
    };
    let mut req = agent.req(pb::PostRequest {
        idempotency_key: "telemetry-post".into(),
        thread: t.thread,
        body: Some(pb::PostBody { kind: Some(pb::post_body::Kind::Content(pb::Content { body: b"hello".to_vec() })) }),
        reply_to: None,
        ask: None,
        task_ref: None,
        assignment: None,
    });
    req.metadata_mut().insert("traceparent", format!("00-{POST_TRACE}-{POST_CALLER}-01").parse().expect("header"));
    agent.threads().post(req).await.expect("the traced post succeeds");
    let node = cluster.nodes.get_mut(&1).expect("node 1");
    assert!(node.terminate(), "the node stops cleanly on SIGTERM");

    let start = Instant::now();
    let spans: HashMap<String, Got> = loop {
        let ours: HashMap<String, Got> = rx
            .spans
            .lock()
            .expect("lock")
            .iter()
            .filter(|s| s.trace == POST_TRACE)
            .map(|s| (s.id.clone(), s.clone()))
            .collect();
        if ours.values().any(|s| s.name == "raft.apply") {
            break ours;
        }
        assert!(start.elapsed() < BOUND, "no apply in the post's trace: {ours:?}\n{}", cluster.logs());
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let named =
        |name: &str| spans.values().find(|s| s.name == name).unwrap_or_else(|| panic!("{name}: {spans:#?}")).clone();
    let request = named("grpc.request");
    assert_eq!(request.parent, POST_CALLER);
    let action = named("action");
    assert_eq!(action.parent, request.id, "the action serves the request");
    let propose = named("raft.propose");
    assert_eq!(propose.parent, action.id, "the actor proposes under the action's span");
    assert_eq!(named("raft.apply").parent, propose.id, "applied under the proposal");
}

/// `kungfud check-config` names the telemetry setting it would run with, and refuses a bad one
/// naming it (exit 2).
#[test]
fn trace_settings_are_shown_and_checked_by_check_config() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("node.toml");
    let check = |text: &str| {
        std::fs::write(&file, text).expect("write config");
        let out = std::process::Command::new(kungfu_system_tests::kungfud())
            .arg("check-config")
            .arg(&file)
            .output()
            .expect("run kungfud");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, stdout, _) = check("node_id = 1\n");
    assert_eq!(code, Some(0));
    assert!(stdout.contains("telemetry: off"), "{stdout}");
    let (code, stdout, _) =
        check("node_id = 1\n[telemetry]\notlp_endpoint = \"http://127.0.0.1:4317\"\nsample_ratio = 0.5\n");
    assert_eq!(code, Some(0));
    assert!(
        stdout.contains("telemetry: spans to http://127.0.0.1:4317 over OTLP/gRPC as service \"kungfud\", 0.5"),
        "{stdout}"
    );
    let (code, _, stderr) = check("node_id = 1\n[telemetry]\notlp_endpoint = \"127.0.0.1:4317\"\n");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("telemetry.otlp_endpoint"), "the error names the setting: {stderr}");
}
