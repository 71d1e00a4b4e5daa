//! The long waits as MCP Tasks (issue #31, the `io.modelcontextprotocol/tasks` extension) against
//! a real `kungfud`: one node of the black-box harness, rmcp's Streamable HTTP client declaring the
//! extension in both protocol revisions. `turn_wait` becomes a task when nothing is owed; a post
//! that makes the waiter owe a response ends it, and the task's result is the answer `turn_wait`
//! would have given. `barrier_wait` becomes a task while a barrier waits; the last reply ends it
//! with the barrier as `barrier_get` reads it. (`tests/end_to_end.rs` covers cancel, limits, ownership and the
//! session's end against a fake node, where the feed is under the test's control.)

use kungfu_system_tests::{Client, Cluster, connect, mcp_addr, register_when_serving};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, GetTaskParams, ProtocolVersion,
};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient};
use serde_json::{Value as Json, json};
use std::time::Duration;

async fn client(
    mcp: std::net::SocketAddr,
    key: &str,
    lifecycle: ClientLifecycleMode,
) -> RunningService<RoleClient, ClientConfig> {
    client_at(mcp, key, lifecycle, "").await
}

/// [`client`] at `/mcp` with `query` after it (`?toolsets=coord`).
async fn client_at(
    mcp: std::net::SocketAddr,
    key: &str,
    lifecycle: ClientLifecycleMode,
    query: &str,
) -> RunningService<RoleClient, ClientConfig> {
    let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{mcp}/mcp{query}")).auth_header(key);
    let mut info = ClientConfig::default();
    info.capabilities = ClientCapabilities::builder().enable_tasks().build();
    if matches!(lifecycle, ClientLifecycleMode::Initialize) {
        info.protocol_version = ProtocolVersion::V_2025_11_25;
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    info.serve_with_lifecycle(transport, lifecycle).await.expect("the client starts")
}

async fn call(c: &rmcp::Peer<RoleClient>, name: &'static str, args: Json) -> CallToolResponse {
    let Json::Object(args) = args else { panic!("arguments are an object") };
    c.call_tool_once(CallToolRequestParams::new(name).with_arguments(args)).await.expect("an answer")
}

fn structured(answer: CallToolResponse) -> Json {
    match answer {
        CallToolResponse::Complete(r) if r.is_error == Some(false) => r.structured_content.expect("structure"),
        other => panic!("a successful inline result, not {other:?}"),
    }
}

/// The two ways a host starts: the 2025-11-25 handshake and the 2026-07-28 discovery.
fn both_revisions() -> [ClientLifecycleMode; 2] {
    [
        ClientLifecycleMode::Initialize,
        ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] },
    ]
}

#[tokio::test]
async fn a_turn_wait_task_completes_when_a_post_makes_the_waiter_owe_a_response() {
    let cluster = Cluster::start(1, "http_listen = \"127.0.0.1:0\"\n");
    let node = &cluster.nodes[&1];
    let mcp = mcp_addr(node).await;
    let anon = Client { channel: connect(node.api).await, key: None };
    for (round, lifecycle) in both_revisions().into_iter().enumerate() {
        let (_, lead) = register_when_serving(&anon, &format!("lead-{round}"), || cluster.logs()).await;
        let (_, worker) = register_when_serving(&anon, &format!("worker-{round}"), || cluster.logs()).await;
        let lead = client(mcp, lead.key.as_deref().expect("key"), lifecycle.clone()).await;
        let worker = client(mcp, worker.key.as_deref().expect("key"), lifecycle).await;

        let created = structured(
            call(&lead, "thread_create", json!({"subject": "tasks", "grant": {"role": "ROLE_SPEAKER"}})).await,
        );
        let thread = created["receipt"]["thread_created"]["thread"].clone();
        structured(call(&worker, "thread_join", json!({"grant_secret": created["grant_secret"]})).await);

        // Nothing owed: the wait is a task, working.
        let task = match call(&worker, "turn_wait", json!({"timeout_secs": 60})).await {
            CallToolResponse::Task(t) => t.task,
            other => panic!("a task handle, not {other:?}"),
        };
        let id = task.task_id.clone();
        let get = async |id: &str| {
            serde_json::to_value(worker.get_task(GetTaskParams::new(id)).await.expect("tasks/get")).expect("json")
        };
        assert_eq!(get(&id).await["status"], json!("working"));

        // The lead posts: the worker, the other speaker, owes a response (§6.3 rule 3), which the
        // turn's watch feed brings, and the task completes with the turn.
        let posted =
            structured(call(&lead, "thread_post", json!({"thread": thread, "body": {"content": "ready?"}})).await);
        let entry = posted["receipt"]["posted"]["entry"].clone();
        let mut done = Json::Null;
        for _ in 0..600 {
            done = get(&id).await;
            if done["status"] != json!("working") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(done["status"], json!("completed"), "{done}\n{}", cluster.logs());
        let owed = &done["result"]["structuredContent"]["owed"];
        assert_eq!(owed.as_array().map(Vec::len), Some(1), "{done}");
        assert_eq!(owed[0]["next"], json!("NEXT_STEP_RESPOND"), "{done}");
        assert_eq!(owed[0]["object"], thread, "{done}");
        assert_eq!(done["result"]["isError"], json!(false));

        // Owed now, so a further turn_wait answers inline, not as a task.
        let inline = structured(call(&worker, "turn_wait", json!({})).await);
        assert_eq!(inline["owed"][0]["next"], json!("NEXT_STEP_RESPOND"));
        structured(call(&worker, "thread_handle", json!({"thread": thread, "entry": entry})).await);
    }
}

#[tokio::test]
async fn a_barrier_wait_task_works_until_the_last_rank_replies_then_completes_with_the_barrier() {
    let cluster = Cluster::start(1, "http_listen = \"127.0.0.1:0\"\n");
    let node = &cluster.nodes[&1];
    let mcp = mcp_addr(node).await;
    let anon = Client { channel: connect(node.api).await, key: None };
    for (round, lifecycle) in both_revisions().into_iter().enumerate() {
        let (mut ids, mut keys) = (Vec::new(), Vec::new());
        for who in ["lead", "first", "last"] {
            let (id, agent) = register_when_serving(&anon, &format!("{who}-{round}"), || cluster.logs()).await;
            ids.push(id);
            keys.push(agent.key.expect("key"));
        }
        let lead = client_at(mcp, &keys[0], lifecycle.clone(), "?toolsets=coord").await;
        let first = client(mcp, &keys[1], lifecycle.clone()).await;
        let last = client(mcp, &keys[2], lifecycle).await;

        let created = structured(
            call(&lead, "thread_create", json!({"subject": "barrier", "grant": {"role": "ROLE_SPEAKER"}})).await,
        );
        let thread = created["receipt"]["thread_created"]["thread"].clone();
        for member in [&first, &last] {
            structured(call(member, "thread_join", json!({"grant_secret": created["grant_secret"]})).await);
        }
        // The lead's post asks both other members (§6.3): read as a barrier (COORDINATION §4.7),
        // it waits on both.
        let posted = structured(
            call(
                &lead,
                "thread_post",
                json!({"thread": thread, "body": {"content": "ready?"}, "ask": {"agents": [ids[1], ids[2]]}}),
            )
            .await,
        );
        let entry = posted["receipt"]["posted"]["entry"].clone();
        let args = json!({"thread": thread, "entry": entry, "timeout_secs": 60});
        let task = match call(&lead, "barrier_wait", args.clone()).await {
            CallToolResponse::Task(t) => t.task,
            other => panic!("a task handle, not {other:?}"),
        };
        let get = async |id: &str| {
            serde_json::to_value(lead.get_task(GetTaskParams::new(id)).await.expect("tasks/get")).expect("json")
        };

        // One rank replies: one is still pending, so the task is working, whatever the timing.
        let reply = json!({"thread": thread, "body": {"content": "ready"}, "reply_to": entry});
        structured(call(&first, "thread_post", reply.clone()).await);
        let read = structured(call(&lead, "barrier_get", json!({"thread": thread, "entry": entry})).await);
        assert_eq!(
            (read["state"].clone(), read["pending"].clone()),
            (json!("BARRIER_STATE_WAITING"), json!(1)),
            "{read}"
        );
        assert_eq!(get(&task.task_id).await["status"], json!("working"));

        // The last rank replies: the task completes with the barrier, released.
        structured(call(&last, "thread_post", reply).await);
        let mut done = Json::Null;
        for _ in 0..600 {
            done = get(&task.task_id).await;
            if done["status"] != json!("working") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(done["status"], json!("completed"), "{done}\n{}", cluster.logs());
        let result = &done["result"];
        assert_eq!(result["isError"], json!(false), "{done}");
        let barrier = &result["structuredContent"];
        assert_eq!((barrier["state"].clone(), barrier["pending"].clone()), (json!("BARRIER_STATE_RELEASED"), json!(0)));
        assert_eq!(barrier["size"], json!(3), "the author and both responders");
        // barrier_get's very answer, and a further wait answers it inline.
        let read = structured(call(&lead, "barrier_get", json!({"thread": thread, "entry": entry})).await);
        assert_eq!(*barrier, read);
        assert_eq!(structured(call(&lead, "barrier_wait", args).await), read);
    }
}
