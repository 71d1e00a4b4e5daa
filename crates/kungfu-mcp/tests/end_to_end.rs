//! The door end to end, in process: a small tonic server implementing four services of the real
//! API (turns, agents, barriers of the coordination layer, the watch feeds) on a loopback port, a
//! [`Door`] over a channel to it, its HTTP router on another loopback port, driven by rmcp's own Streamable HTTP client in both
//! protocol revisions, plus raw HTTP for what a client library would not send (a foreign Host, an
//! oversize body).
#![allow(deprecated)] // rmcp marks logging deprecated (SEP-2577); the door still serves it.

use kungfu_api::pb;
use kungfu_api::pb::agent_service_server::{AgentService, AgentServiceServer};
use kungfu_api::pb::coord_service_server::{CoordService, CoordServiceServer};
use kungfu_api::pb::turn_service_server::{TurnService, TurnServiceServer};
use kungfu_api::pb::watch_service_server::{WatchService, WatchServiceServer};
use kungfu_mcp::registry::registry;
use kungfu_mcp::{Api, Door, HttpOptions, TaskLimits, Toolsets, http_router};
use kungfu_types::{Code, Rejection};
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    ClientConfig, ErrorCode, GetPromptRequestParams, GetTaskParams, LoggingLevel, LoggingMessageNotificationParam,
    ProtocolVersion, ReadResourceRequestParams, ResourceContents, SetLevelRequestParams, Task, TaskStatus,
    UpdateTaskParams,
};
use rmcp::service::NotificationContext;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ServiceError};
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceExt};
use serde_json::{Value as Json, json};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

const GOOD: &str = "kf_good";
const WAITER: &str = "kf_waiter";
const IDLE: &str = "kf_idle";
/// An agent whose obligation arrives on its watch feed only when the test releases it.
const GATED: &str = "kf_gated";

fn bearer<T>(r: &Request<T>) -> Option<String> {
    r.metadata().get("authorization").and_then(|v| v.to_str().ok()).map(str::to_string)
}

fn item(asg: &str) -> pb::TurnItem {
    pb::TurnItem {
        obligation: Some(pb::ObligationRef { kind: Some(pb::obligation_ref::Kind::AssignmentDelivery(asg.into())) }),
        kind: pb::ObligationKind::Delivery as i32,
        object: "th_1".into(),
        arose_at_unix_micros: 1_700_000_000_000_000,
        due_at_unix_micros: Some(1_700_000_060_000_000),
        next: pb::NextStep::Deliver as i32,
    }
}

/// What a registration carried of its client: the address an in-process door hands over
/// (`kungfu_api::ClientAddr`), and any `kungfu-client-addr` claim in its metadata.
type SeenClient = (Option<String>, Option<String>);

/// The one thread of the fake's barriers, and its entries read as barriers (COORDINATION §4.7):
/// each over the author `ag_1` and two responders, `ag_2` (replied with the next entry) and `ag_3`.
const BARRIER_THREAD: &str = "th_1";
/// Waiting on `ag_3` until the test releases its reply: an entry on the thread's watch feed.
const REPLIED_BARRIER: u64 = 3;
/// Released already.
const RELEASED_BARRIER: u64 = 4;
/// Waiting for ever.
const WAITING_BARRIER: u64 = 5;
/// Waiting on `ag_3` until the test marks it handled: the barrier is released with no entry posted,
/// so no feed tells of it and only a read does.
const HANDLED_BARRIER: u64 = 6;
/// Broken: `ag_3` left without arriving.
const BROKEN_BARRIER: u64 = 8;
/// The entry of `ag_3`'s reply to [`REPLIED_BARRIER`].
const REPLY_ENTRY: u64 = 9;

/// A barrier of the fake at `entry` standing as `state`.
fn barrier(entry: u64, state: pb::BarrierState) -> pb::Barrier {
    use pb::BarrierArrival as A;
    let rank = |rank: u32, member: &str, arrival: A, by: Option<u64>| pb::BarrierRank {
        rank,
        member: member.into(),
        arrival: arrival as i32,
        replied_by_entry: by,
    };
    let last = match state {
        pb::BarrierState::Released => rank(2, "ag_3", A::Replied, Some(REPLY_ENTRY)),
        pb::BarrierState::Broken => rank(2, "ag_3", A::MembershipEnded, None),
        _ => rank(2, "ag_3", A::Pending, None),
    };
    pb::Barrier {
        thread: BARRIER_THREAD.into(),
        entry,
        author: "ag_1".into(),
        size: 3,
        ranks: vec![rank(0, "ag_1", A::Author, None), rank(1, "ag_2", A::Replied, Some(entry + 1)), last],
        state: state as i32,
        pending: u32::from(state == pb::BarrierState::Waiting),
        absent: u32::from(state == pb::BarrierState::Broken),
    }
}

/// The fake node's state: whether the waiter and the gated agent owe something yet (set by their
/// watch feeds), what each registration carried of its client, the release of the gated agent's
/// obligation, and how many turn watches are open (a wait that stopped closed its watch).
#[derive(Clone, Default)]
struct Node {
    waiter_owes: Arc<AtomicBool>,
    gated_owes: Arc<AtomicBool>,
    release: Arc<tokio::sync::Notify>,
    open_watches: Arc<AtomicUsize>,
    registrations: Arc<std::sync::Mutex<Vec<SeenClient>>>,
    /// [`REPLIED_BARRIER`]'s last rank replied (set by the thread's watch feed when the test
    /// releases `reply`), and [`HANDLED_BARRIER`]'s handled (set by the test).
    replied: Arc<AtomicBool>,
    reply: Arc<tokio::sync::Notify>,
    handled: Arc<AtomicBool>,
    /// Every thread watch opened, `(thread, after_entry)`, and how many are open now.
    thread_watches: Arc<std::sync::Mutex<Vec<(String, u64)>>>,
    open_thread_watches: Arc<AtomicUsize>,
}

impl Node {
    /// The agent a bearer names, refused like the real node when it names none.
    fn agent<T>(&self, r: &Request<T>) -> Result<&'static str, Status> {
        match bearer(r).as_deref() {
            Some(b) if b == format!("Bearer {GOOD}") => Ok("good"),
            Some(b) if b == format!("Bearer {WAITER}") => Ok("waiter"),
            Some(b) if b == format!("Bearer {IDLE}") => Ok("idle"),
            Some(b) if b == format!("Bearer {GATED}") => Ok("gated"),
            _ => Err(kungfu_api::rejection_status(&Rejection::new(Code::Unauthenticated, "unknown agent key"))),
        }
    }
}

#[tonic::async_trait]
impl TurnService for Node {
    async fn get_turn(&self, r: Request<pb::GetTurnRequest>) -> Result<Response<pb::TurnPage>, Status> {
        let items = match self.agent(&r)? {
            "good" => vec![item("asg_1")],
            "idle" => vec![],
            "gated" if self.gated_owes.load(Ordering::SeqCst) => vec![item("asg_3")],
            "gated" => vec![],
            _ if self.waiter_owes.load(Ordering::SeqCst) => vec![item("asg_2")],
            _ => vec![],
        };
        Ok(Response::new(pb::TurnPage { items, next_cursor: String::new(), as_of_seq: 9, wake_failed: Vec::new() }))
    }

    async fn get_opportunities(
        &self,
        _r: Request<pb::GetOpportunitiesRequest>,
    ) -> Result<Response<pb::OpportunityPage>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }

    async fn get_working_set(&self, r: Request<pb::GetWorkingSetRequest>) -> Result<Response<pb::WorkingSet>, Status> {
        self.agent(&r)?;
        let object = r.into_inner().object;
        if object.is_empty() {
            // What kungfu-api answers for an empty object id.
            return Err(kungfu_api::field_error_status(&kungfu_api::FieldError::missing("object")));
        }
        Ok(Response::new(pb::WorkingSet {
            object,
            obligations: vec![item("asg_1")],
            available_actions: vec!["post".into()],
            ..Default::default()
        }))
    }
}

#[tonic::async_trait]
impl AgentService for Node {
    async fn register(&self, r: Request<pb::RegisterRequest>) -> Result<Response<pb::RegisterResponse>, Status> {
        // The key the door generated must arrive; the fake derives the agent key from it so the
        // test can see both ends agree.
        let meta = |name: &str| r.metadata().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
        let handed = r.extensions().get::<kungfu_api::ClientAddr>().map(|c| c.0.to_string());
        let seen = (handed, meta(kungfu_api::CLIENT_ADDR));
        self.registrations.lock().expect("lock").push(seen);
        let key = &r.get_ref().idempotency_key;
        if key.is_empty() {
            return Err(kungfu_api::field_error_status(&kungfu_api::FieldError::missing("idempotency_key")));
        }
        Ok(Response::new(pb::RegisterResponse {
            receipt: Some(pb::Receipt {
                kind: "register".into(),
                at_unix_micros: 1,
                seq: Some(1),
                ..Default::default()
            }),
            replayed: false,
            agent_key: format!("kf_for_{key}"),
        }))
    }

    async fn deactivate(
        &self,
        _r: Request<pb::DeactivateAgentRequest>,
    ) -> Result<Response<pb::DeactivateAgentResponse>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }

    async fn set_wake_target(
        &self,
        _r: Request<pb::SetWakeTargetRequest>,
    ) -> Result<Response<pb::SetWakeTargetResponse>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }

    async fn remove_wake_target(
        &self,
        _r: Request<pb::RemoveWakeTargetRequest>,
    ) -> Result<Response<pb::RemoveWakeTargetResponse>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }

    async fn list_wake_targets(
        &self,
        _r: Request<pb::ListWakeTargetsRequest>,
    ) -> Result<Response<pb::WakeTargetList>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }
}

#[tonic::async_trait]
impl CoordService for Node {
    async fn write_labeled(
        &self,
        _r: Request<pb::WriteLabeledRequest>,
    ) -> Result<Response<pb::WriteLabeledResponse>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }

    async fn widen_scope(
        &self,
        _r: Request<pb::WidenScopeRequest>,
    ) -> Result<Response<pb::WidenScopeResponse>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }

    async fn send(&self, _r: Request<pb::SendRequest>) -> Result<Response<pb::SendResponse>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }

    async fn scatter(&self, _r: Request<pb::ScatterRequest>) -> Result<Response<pb::ScatterResponse>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }

    async fn get_mailbox(&self, _r: Request<pb::GetMailboxRequest>) -> Result<Response<pb::Mailbox>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }

    async fn get_collective(&self, _r: Request<pb::GetCollectiveRequest>) -> Result<Response<pb::Collective>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }

    async fn get_barrier(&self, r: Request<pb::GetBarrierRequest>) -> Result<Response<pb::Barrier>, Status> {
        use pb::BarrierState as S;
        self.agent(&r)?;
        let r = r.into_inner();
        if r.thread.is_empty() {
            // What kungfu-api answers for an empty thread id.
            return Err(kungfu_api::field_error_status(&kungfu_api::FieldError::missing("thread")));
        }
        let not_found = |field: &str, what: &str| {
            kungfu_api::rejection_status(&Rejection::field(Code::NotFound, field, what.to_string()))
        };
        if r.thread != BARRIER_THREAD {
            // Not a member, or no such thread: the same answer (§9).
            return Err(not_found("thread", "no such thread among the caller's"));
        }
        let done = |flag: &AtomicBool| if flag.load(Ordering::SeqCst) { S::Released } else { S::Waiting };
        let state = match r.entry {
            REPLIED_BARRIER => done(&self.replied),
            RELEASED_BARRIER => S::Released,
            WAITING_BARRIER => S::Waiting,
            HANDLED_BARRIER => done(&self.handled),
            BROKEN_BARRIER => S::Broken,
            _ => return Err(not_found("entry", "no such entry")),
        };
        Ok(Response::new(barrier(r.entry, state)))
    }
}

#[tonic::async_trait]
impl WatchService for Node {
    type WatchTurnStream = ReceiverStream<Result<pb::TurnEvent, Status>>;
    type WatchThreadStream = ReceiverStream<Result<pb::ThreadEvent, Status>>;
    type WatchRecordStream = ReceiverStream<Result<pb::RecordEventBatch, Status>>;

    async fn watch_turn(&self, r: Request<pb::WatchTurnRequest>) -> Result<Response<Self::WatchTurnStream>, Status> {
        let agent = self.agent(&r)?;
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let node = self.clone();
        node.open_watches.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(async move {
            // The first event: the (empty) turn as it is; then an obligation: a moment later for
            // the waiter, when the test releases it for the gated agent, never for the idle one.
            let _ = tx.send(Ok(pb::TurnEvent { reset: true, cursor: "c1".into(), ..Default::default() })).await;
            let (owes, asg) = match agent {
                "idle" => (None, ""),
                "gated" => {
                    tokio::select! {
                        _ = node.release.notified() => {}
                        _ = tx.closed() => {}
                    }
                    (Some(&node.gated_owes), "asg_3")
                }
                _ => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    (Some(&node.waiter_owes), "asg_2")
                }
            };
            if let Some(owes) = owes.filter(|_| !tx.is_closed()) {
                owes.store(true, Ordering::SeqCst);
                let event = pb::TurnEvent { upserted: vec![item(asg)], cursor: "c2".into(), ..Default::default() };
                let _ = tx.send(Ok(event)).await;
            }
            // Keep the stream open as a real one would, until the door drops it.
            tx.closed().await;
            node.open_watches.fetch_sub(1, Ordering::SeqCst);
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn watch_thread(
        &self,
        r: Request<pb::WatchThreadRequest>,
    ) -> Result<Response<Self::WatchThreadStream>, Status> {
        self.agent(&r)?;
        let r = r.into_inner();
        self.thread_watches.lock().expect("lock").push((r.thread, r.after_entry));
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let node = self.clone();
        node.open_thread_watches.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(async move {
            // The reply to REPLIED_BARRIER, when the test releases it: the barrier is released and
            // the entry is on the feed, as the real node applies a reply.
            tokio::select! {
                _ = node.reply.notified() => {
                    node.replied.store(true, Ordering::SeqCst);
                    let entry = pb::Entry { seq: REPLY_ENTRY, thread: BARRIER_THREAD.into(), ..Default::default() };
                    let _ = tx.send(Ok(pb::ThreadEvent { entries: vec![entry], ..Default::default() })).await;
                }
                _ = tx.closed() => {}
            }
            tx.closed().await;
            node.open_thread_watches.fetch_sub(1, Ordering::SeqCst);
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn watch_record(
        &self,
        _r: Request<pb::WatchRecordRequest>,
    ) -> Result<Response<Self::WatchRecordStream>, Status> {
        Err(Status::unimplemented("not in this fake"))
    }
}

/// The fake node and the door in front of it; both stop when dropped.
struct Harness {
    grpc: SocketAddr,
    mcp: SocketAddr,
    node: Node,
    /// A clone of the door the router serves: its tasks are the router's.
    door: Door,
    stop: CancellationToken,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn harness(max_body_bytes: usize) -> Harness {
    harness_with(max_body_bytes, false).await
}

/// [`harness`] with a door that calls the fake node over the network, or, with `in_process`, as a
/// node's own door calls it: its service stack in this process. Served as a node serves it (with
/// each connection's address).
async fn harness_with(max_body_bytes: usize, in_process: bool) -> Harness {
    harness_full(max_body_bytes, in_process, TaskLimits::default()).await
}

/// [`harness_with`] with a door whose MCP Tasks have `limits`.
async fn harness_full(max_body_bytes: usize, in_process: bool, limits: TaskLimits) -> Harness {
    let stop = CancellationToken::new();
    let grpc_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind grpc");
    let grpc = grpc_listener.local_addr().expect("addr");
    let node = Node::default();
    let grpc_stop = stop.clone();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TurnServiceServer::new(node.clone()))
            .add_service(AgentServiceServer::new(node.clone()))
            .add_service(CoordServiceServer::new(node.clone()))
            .add_service(WatchServiceServer::new(node.clone()))
            .serve_with_incoming_shutdown(TcpListenerStream::new(grpc_listener), grpc_stop.cancelled_owned()),
    );
    let api = if in_process {
        let mut routes = tonic::service::Routes::builder();
        routes
            .add_service(TurnServiceServer::new(node.clone()))
            .add_service(AgentServiceServer::new(node.clone()))
            .add_service(CoordServiceServer::new(node.clone()))
            .add_service(WatchServiceServer::new(node.clone()));
        Api::in_process(routes.routes())
    } else {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{grpc}")).expect("uri").connect_lazy();
        Api::network(channel)
    };
    let door = Door::new(api, None).with_task_limits(limits);
    let options = HttpOptions {
        allowed_hosts: vec!["127.0.0.1".into(), "localhost".into()],
        allowed_origins: vec!["http://localhost:*".into()],
        max_body_bytes,
    };
    let router = http_router(door.clone(), options, stop.child_token());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind mcp");
    let mcp = listener.local_addr().expect("addr");
    let http_stop = stop.clone();
    tokio::spawn(async move {
        let service = router.into_make_service_with_connect_info::<SocketAddr>();
        let _ = axum::serve(listener, service).with_graceful_shutdown(http_stop.cancelled_owned()).await;
    });
    Harness { grpc, mcp, node, door, stop }
}

async fn client(
    h: &Harness,
    key: Option<&str>,
    lifecycle: ClientLifecycleMode,
) -> RunningService<RoleClient, ClientConfig> {
    client_at(h, key, lifecycle, "").await
}

/// [`client`] at `/mcp` with `query` after it (`?toolsets=coord`).
async fn client_at(
    h: &Harness,
    key: Option<&str>,
    lifecycle: ClientLifecycleMode,
    query: &str,
) -> RunningService<RoleClient, ClientConfig> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(format!("http://{}/mcp{query}", h.mcp));
    if let Some(k) = key {
        config = config.auth_header(k);
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    let mut info = ClientConfig::default();
    if matches!(lifecycle, ClientLifecycleMode::Initialize) {
        info.protocol_version = ProtocolVersion::V_2025_11_25;
    }
    info.serve_with_lifecycle(transport, lifecycle).await.expect("the client starts")
}

fn legacy() -> ClientLifecycleMode {
    ClientLifecycleMode::Initialize
}

fn stateless() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] }
}

async fn call(c: &rmcp::Peer<RoleClient>, name: &'static str, args: Json) -> CallToolResult {
    let Json::Object(args) = args else { panic!("arguments are an object") };
    c.call_tool(CallToolRequestParams::new(name).with_arguments(args)).await.expect("a tool result")
}

fn structured(r: &CallToolResult) -> Json {
    let s = r.structured_content.clone().expect("structured content");
    let text = r.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone()).expect("a text block");
    assert_eq!(serde_json::from_str::<Json>(&text).expect("the text is JSON"), s, "text and structure agree");
    s
}

/// The same conversation in either revision: list, a read, a write with a generated key, two
/// refusals and an unknown tool.
async fn converse(c: &RunningService<RoleClient, ClientConfig>) {
    let tools = c.list_all_tools().await.expect("tools/list");
    let default = registry().tools_in(Toolsets::default()).count();
    assert_eq!(tools.len(), default, "a URL that names no toolset lists the default set");
    assert!(default < kungfu_mcp::tool_names().len(), "the opt-in sets are not listed");
    assert!(tools.iter().any(|t| t.name == "turn_get" && t.output_schema.is_some()));
    assert!(!tools.iter().any(|t| t.name == "message_send" || t.name == "record_get"));

    let turn = call(c, "turn_get", json!({})).await;
    assert_eq!(turn.is_error, Some(false));
    assert_eq!(
        structured(&turn),
        json!({
            "items": [{
                "obligation": {"assignment_delivery": "asg_1"},
                "kind": "OBLIGATION_KIND_DELIVERY",
                "object": "th_1",
                "arose_at_unix_micros": 1_700_000_000_000_000_i64,
                "due_at_unix_micros": 1_700_000_060_000_000_i64,
                "next": "NEXT_STEP_DELIVER"
            }],
            "next_cursor": "",
            "as_of_seq": 9,
            "wake_failed": []
        })
    );

    let refused = call(c, "working_set_get", json!({})).await;
    assert_eq!(refused.is_error, Some(true));
    let e = structured(&refused);
    assert_eq!(
        (e["code"].clone(), e["field"].clone(), e["definite"].clone()),
        (json!("INVALID_ARGUMENT"), json!("object"), json!(true))
    );
    assert_eq!(e["next_step"], json!("revise"));

    let malformed = call(c, "working_set_get", json!({"object": 5})).await;
    assert_eq!(malformed.is_error, Some(true), "a wrong type is a tool error, like gRPC's INVALID_ARGUMENT");
    assert_eq!(structured(&malformed)["field"], json!("object"));

    let unknown = c.call_tool(CallToolRequestParams::new("thread_teleport")).await;
    assert!(unknown.is_err(), "an unknown tool is a JSON-RPC error");
}

#[tokio::test]
async fn revision_2025_11_25_serves_tools_in_a_session() {
    let h = harness(64 * 1024).await;
    let c = client(&h, Some(GOOD), legacy()).await;
    let version = c.peer_info().map(|p| p.protocol_version.clone());
    assert_eq!(version, Some(ProtocolVersion::V_2025_11_25));
    converse(&c).await;
    c.cancel().await.expect("close");
}

#[tokio::test]
async fn revision_2026_07_28_serves_tools_statelessly() {
    let h = harness(64 * 1024).await;
    let c = client(&h, Some(GOOD), stateless()).await;
    let version = c.peer_info().map(|p| p.protocol_version.clone());
    assert_eq!(version, Some(ProtocolVersion::V_2026_07_28));
    converse(&c).await;
    c.cancel().await.expect("close");
}

#[tokio::test]
async fn register_works_without_a_key_and_reports_the_generated_idempotency_key() {
    let h = harness(64 * 1024).await;
    for lifecycle in [legacy(), stateless()] {
        let c = client(&h, None, lifecycle).await;
        assert!(!c.list_all_tools().await.expect("tools/list needs no key").is_empty());
        let r = call(&c, "agent_register", json!({})).await;
        assert_eq!(r.is_error, Some(false));
        let s = structured(&r);
        let key = s["idempotency_key"].as_str().expect("the key used").to_string();
        assert!(key.starts_with("sdk-"), "{key}");
        assert_eq!(s["agent_key"], json!(format!("kf_for_{key}")), "the node got the same key");
        let again = structured(&call(&c, "agent_register", json!({"idempotency_key": "mine-1"})).await);
        assert_eq!(again["idempotency_key"], json!("mine-1"));
        c.cancel().await.expect("close");
    }
}

#[tokio::test]
async fn a_missing_or_bad_key_is_a_tool_error_not_an_http_401() {
    let h = harness(64 * 1024).await;
    for (key, lifecycle) in [(None, legacy()), (Some("kf_wrong"), stateless())] {
        let c = client(&h, key, lifecycle).await;
        let r = call(&c, "turn_get", json!({})).await;
        assert_eq!(r.is_error, Some(true));
        assert_eq!(structured(&r)["code"], json!("UNAUTHENTICATED"));
        c.cancel().await.expect("close");
    }
}

#[tokio::test]
async fn turn_wait_answers_when_the_watch_feed_brings_an_obligation() {
    let h = harness(64 * 1024).await;
    let c = client(&h, Some(WAITER), stateless()).await;
    let r = call(&c, "turn_wait", json!({"timeout_secs": 10})).await;
    let s = structured(&r);
    assert_eq!(s["owed"][0]["obligation"], json!({"assignment_delivery": "asg_2"}), "{s}");
    assert!(s["wait_secs"].as_u64().expect("waited") < 10);
    let refused = call(&c, "turn_wait", json!({"timeout_secs": 0})).await;
    assert_eq!(structured(&refused)["field"], json!("timeout_secs"));
    c.cancel().await.expect("close");
}

#[tokio::test]
async fn turn_wait_answers_nothing_owed_when_the_wait_ends_empty() {
    let h = harness(64 * 1024).await;
    let c = client(&h, Some(IDLE), legacy()).await;
    let s = structured(&call(&c, "turn_wait", json!({"timeout_secs": 1})).await);
    assert_eq!(s["owed"], json!([]));
    assert_eq!(s["wait_secs"], json!(1));
    assert!(s["note"].as_str().unwrap_or("").starts_with("nothing owed"), "{s}");
    c.cancel().await.expect("close");
}

/// The stdio door's shape: one session over a byte stream, calls made with the default key.
#[tokio::test]
async fn a_door_over_a_byte_stream_calls_with_its_default_key() {
    let h = harness(64 * 1024).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", h.grpc)).expect("uri").connect_lazy();
    let door = Door::new(Api::network(channel), Some(GOOD.to_string()));
    let (server_end, client_end) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        if let Ok(running) = door.serve(tokio::io::split(server_end)).await {
            let _ = running.waiting().await;
        }
    });
    let c = ClientConfig::default().serve(tokio::io::split(client_end)).await.expect("the client starts");
    let s = structured(&call(&c, "turn_get", json!({})).await);
    assert_eq!(s["items"][0]["obligation"], json!({"assignment_delivery": "asg_1"}));
    c.cancel().await.expect("close");
}

/// One raw HTTP/1.1 request; the status code of its answer.
async fn raw_status(addr: SocketAddr, head: &str, body: &[u8]) -> u16 {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(head.as_bytes()).await.expect("write head");
    // The server may answer and close before reading a large body: ignore a broken pipe.
    let _ = s.write_all(body).await;
    let mut buf = vec![0; 64];
    let n = s.read(&mut buf).await.expect("read");
    let line = String::from_utf8_lossy(&buf[..n]).to_string();
    line.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("no status in {line:?}"))
}

fn post_head(host: &str, extra: &str, len: usize) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{extra}Content-Length: {len}\r\nConnection: close\r\n\r\n"
    )
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

#[tokio::test]
async fn a_foreign_host_or_origin_is_refused_against_dns_rebinding() {
    let h = harness(64 * 1024).await;
    let ok = raw_status(h.mcp, &post_head(&h.mcp.to_string(), "", INITIALIZE.len()), INITIALIZE.as_bytes()).await;
    assert_eq!(ok, 200);
    let rebound = raw_status(h.mcp, &post_head("evil.example", "", INITIALIZE.len()), INITIALIZE.as_bytes()).await;
    assert_eq!(rebound, 403);
    let origin = "Origin: http://evil.example\r\n";
    let foreign =
        raw_status(h.mcp, &post_head(&h.mcp.to_string(), origin, INITIALIZE.len()), INITIALIZE.as_bytes()).await;
    assert_eq!(foreign, 403);
    let local = "Origin: http://localhost:5173\r\n";
    let allowed =
        raw_status(h.mcp, &post_head(&h.mcp.to_string(), local, INITIALIZE.len()), INITIALIZE.as_bytes()).await;
    assert_eq!(allowed, 200);
}

#[tokio::test]
async fn an_oversize_body_is_refused_with_413() {
    let h = harness(1024).await;
    let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"pad":"{}"}}}}"#, "x".repeat(4096));
    let status = raw_status(h.mcp, &post_head(&h.mcp.to_string(), "", body.len()), body.as_bytes()).await;
    assert_eq!(status, 413);
}

/// The text of a one-block resource read.
fn resource_text(contents: &[ResourceContents]) -> (String, Option<String>) {
    match contents {
        [ResourceContents::TextResourceContents { text, mime_type, .. }] => (text.clone(), mime_type.clone()),
        other => panic!("one text block, got {other:?}"),
    }
}

fn mcp_error(e: ServiceError) -> rmcp::ErrorData {
    match e {
        ServiceError::McpError(e) => e,
        other => panic!("a JSON-RPC error, got {other}"),
    }
}

#[tokio::test]
async fn resources_serve_the_tool_table_the_turn_and_a_working_set_in_both_revisions() {
    let h = harness(64 * 1024).await;
    for (lifecycle, not_found) in [(legacy(), ErrorCode::RESOURCE_NOT_FOUND), (stateless(), ErrorCode::INVALID_PARAMS)]
    {
        let c = client(&h, Some(GOOD), lifecycle).await;
        let caps = c.peer_info().map(|p| p.capabilities.clone()).expect("server info");
        assert!(caps.resources.is_some() && caps.prompts.is_some() && caps.logging.is_some(), "{caps:?}");

        let list = c.list_resources(None).await.expect("resources/list");
        let uris: Vec<_> = list.resources.iter().map(|r| r.uri.as_str()).collect();
        assert_eq!(uris, ["kungfu://tools", "kungfu://turn"]);
        let templates = c.list_all_resource_templates().await.expect("resources/templates/list");
        assert_eq!(templates.len(), 1);
        assert_eq!(templates[0].uri_template, "kungfu://working-set/{object}");

        let tools = c.read_resource(ReadResourceRequestParams::new("kungfu://tools")).await.expect("read tools");
        let (text, mime) = resource_text(&tools.contents);
        assert_eq!(text, kungfu_mcp::tools_markdown());
        assert_eq!(mime.as_deref(), Some("text/markdown"));

        let turn = c.read_resource(ReadResourceRequestParams::new("kungfu://turn")).await.expect("read turn");
        let (text, mime) = resource_text(&turn.contents);
        assert_eq!(mime.as_deref(), Some("application/json"));
        let turn: Json = serde_json::from_str(&text).expect("JSON");
        assert_eq!(turn["items"][0]["obligation"], json!({"assignment_delivery": "asg_1"}), "{turn}");

        let ws = c.read_resource(ReadResourceRequestParams::new("kungfu://working-set/th_1")).await.expect("read ws");
        let ws: Json = serde_json::from_str(&resource_text(&ws.contents).0).expect("JSON");
        assert_eq!((ws["object"].clone(), ws["available_actions"].clone()), (json!("th_1"), json!(["post"])));

        let missing = mcp_error(
            c.read_resource(ReadResourceRequestParams::new("kungfu://nowhere")).await.expect_err("not found"),
        );
        assert_eq!(missing.code, not_found);
        assert_eq!(missing.data, Some(json!({"uri": "kungfu://nowhere"})));
        c.cancel().await.expect("close");
    }
}

#[tokio::test]
async fn resource_reads_carry_caching_hints_by_scope_in_2026_07_28() {
    let h = harness(64 * 1024).await;
    let c = client(&h, Some(GOOD), stateless()).await;
    let list = c.list_resources(None).await.expect("resources/list");
    assert_eq!((list.cache_scope, list.ttl_ms.is_some()), (Some(CacheScope::Public), true));
    let templates = c.list_resource_templates(None).await.expect("templates");
    assert_eq!(templates.cache_scope, Some(CacheScope::Public));
    let prompts = c.list_prompts(None).await.expect("prompts/list");
    assert_eq!(prompts.cache_scope, Some(CacheScope::Public));
    let tools = c.read_resource(ReadResourceRequestParams::new("kungfu://tools")).await.expect("tools");
    assert_eq!(tools.cache_scope, Some(CacheScope::Public));
    let turn = c.read_resource(ReadResourceRequestParams::new("kungfu://turn")).await.expect("turn");
    assert_eq!((turn.cache_scope, turn.ttl_ms), (Some(CacheScope::Private), Some(0)), "a turn is the caller's own");
    c.cancel().await.expect("close");
}

#[tokio::test]
async fn a_refused_resource_read_is_an_error_with_the_rejection() {
    let h = harness(64 * 1024).await;
    let c = client(&h, Some("kf_wrong"), stateless()).await;
    let e = mcp_error(c.read_resource(ReadResourceRequestParams::new("kungfu://turn")).await.expect_err("refused"));
    let data = e.data.expect("data");
    assert_eq!((data["code"].clone(), data["uri"].clone()), (json!("UNAUTHENTICATED"), json!("kungfu://turn")));
    c.cancel().await.expect("close");
}

#[tokio::test]
async fn the_resume_prompt_points_at_the_turn() {
    let h = harness(64 * 1024).await;
    for lifecycle in [legacy(), stateless()] {
        let c = client(&h, None, lifecycle).await;
        let prompts = c.list_all_prompts().await.expect("prompts/list");
        assert_eq!(prompts.len(), 1);
        assert_eq!(prompts[0].name, "kungfu_resume");
        let args = prompts[0].arguments.clone().expect("arguments");
        assert_eq!((args[0].name.as_str(), args[0].required), ("agent_name", Some(false)));
        let mut with_name = serde_json::Map::new();
        with_name.insert("agent_name".into(), json!("ada"));
        for p in [
            GetPromptRequestParams::new("kungfu_resume"),
            GetPromptRequestParams::new("kungfu_resume").with_arguments(with_name.clone()),
        ] {
            let r = c.get_prompt(p).await.expect("prompts/get");
            let text = serde_json::to_string(&r.messages).expect("json");
            for needle in ["turn_get", "turn_wait", "next", "assignment_deliver"] {
                assert!(text.contains(needle), "{needle} in {text}");
            }
        }
        let unknown = c.get_prompt(GetPromptRequestParams::new("test_simple_prompt")).await;
        assert_eq!(mcp_error(unknown.expect_err("unknown")).code, ErrorCode::INVALID_PARAMS);
        c.cancel().await.expect("close");
    }
}

/// A client that keeps the log messages it gets.
#[derive(Clone)]
struct Listener(tokio::sync::mpsc::UnboundedSender<LoggingMessageNotificationParam>);

impl ClientHandler for Listener {
    async fn on_logging_message(&self, params: LoggingMessageNotificationParam, _c: NotificationContext<RoleClient>) {
        let _ = self.0.send(params);
    }

    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        info
    }
}

async fn next_log(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<LoggingMessageNotificationParam>,
    wait: Duration,
) -> Option<LoggingMessageNotificationParam> {
    tokio::time::timeout(wait, rx.recv()).await.ok().flatten()
}

#[tokio::test]
async fn a_session_gets_log_messages_only_at_or_above_the_level_it_set() {
    let h = harness(64 * 1024).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{}/mcp", h.mcp)).auth_header(GOOD);
    let transport = StreamableHttpClientTransport::from_config(config);
    let c = Listener(tx).serve_with_lifecycle(transport, legacy()).await.expect("the client starts");

    // No level set: nothing.
    assert_eq!(call(&c, "working_set_get", json!({})).await.is_error, Some(true));
    assert!(next_log(&mut rx, Duration::from_millis(300)).await.is_none(), "no level, no message");

    c.set_level(SetLevelRequestParams::new(LoggingLevel::Notice)).await.expect("logging/setLevel");
    assert_eq!(call(&c, "working_set_get", json!({})).await.is_error, Some(true));
    let m = next_log(&mut rx, Duration::from_secs(5)).await.expect("a notice");
    assert_eq!((m.level, m.logger.as_deref()), (LoggingLevel::Notice, Some("kungfu")));
    assert_eq!(
        m.data,
        json!({"event": "tool_refused", "tool": "working_set_get", "code": "INVALID_ARGUMENT", "next_step": "revise"})
    );
    // A success logs nothing.
    assert_eq!(call(&c, "turn_get", json!({})).await.is_error, Some(false));
    assert!(next_log(&mut rx, Duration::from_millis(300)).await.is_none());

    // Another session has its own level (none).
    let (tx2, mut rx2) = tokio::sync::mpsc::unbounded_channel();
    let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{}/mcp", h.mcp)).auth_header(GOOD);
    let other = Listener(tx2)
        .serve_with_lifecycle(StreamableHttpClientTransport::from_config(config), legacy())
        .await
        .expect("a second session");
    assert_eq!(call(&other, "working_set_get", json!({})).await.is_error, Some(true));
    assert!(next_log(&mut rx2, Duration::from_millis(300)).await.is_none(), "the level is per session");

    c.set_level(SetLevelRequestParams::new(LoggingLevel::Error)).await.expect("raise");
    assert_eq!(call(&c, "working_set_get", json!({})).await.is_error, Some(true));
    assert!(next_log(&mut rx, Duration::from_millis(300)).await.is_none(), "a notice is below error");
    other.cancel().await.expect("close");
    c.cancel().await.expect("close");
}

#[tokio::test]
async fn an_unreachable_node_is_logged_as_an_error() {
    // A port nothing listens on: bind one, then drop it.
    let addr = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind").local_addr().expect("addr");
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}")).expect("uri").connect_lazy();
    let door = Door::new(Api::network(channel), Some(GOOD.to_string()));
    let (server_end, client_end) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        if let Ok(running) = door.serve(tokio::io::split(server_end)).await {
            let _ = running.waiting().await;
        }
    });
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let c = Listener(tx).serve(tokio::io::split(client_end)).await.expect("the client starts");
    c.set_level(SetLevelRequestParams::new(LoggingLevel::Warning)).await.expect("logging/setLevel");
    let r = call(&c, "turn_get", json!({})).await;
    assert_eq!(structured(&r)["code"], json!("UNAVAILABLE"));
    let m = next_log(&mut rx, Duration::from_secs(5)).await.expect("an error");
    assert_eq!(m.level, LoggingLevel::Error);
    assert_eq!(m.data["event"], json!("node_unreachable"));
    assert_eq!(m.data["tool"], json!("turn_get"));
    c.cancel().await.expect("close");
}

#[tokio::test]
async fn logging_set_level_is_not_a_2026_07_28_method() {
    let h = harness(64 * 1024).await;
    let c = client(&h, Some(GOOD), stateless()).await;
    let e = c.set_level(SetLevelRequestParams::new(LoggingLevel::Info)).await.expect_err("removed");
    assert_eq!(mcp_error(e).code, ErrorCode::METHOD_NOT_FOUND);
    c.cancel().await.expect("close");
}

/// One raw HTTP/1.1 request; the whole answer (head and body) as text.
async fn raw_answer(addr: SocketAddr, head: &str, body: &[u8]) -> String {
    raw_answer_from("127.0.0.1", addr, head, body).await
}

/// [`raw_answer`] over a connection from `source` (any of 127.0.0.0/8 works on loopback).
async fn raw_answer_from(source: &str, addr: SocketAddr, head: &str, body: &[u8]) -> String {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.bind(format!("{source}:0").parse().expect("source")).expect("bind the source address");
    let mut s = socket.connect(addr).await.expect("connect");
    s.write_all(head.as_bytes()).await.expect("write head");
    s.write_all(body).await.expect("write body");
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).to_string()
}

fn stateless_refused_call(log_level: Option<&str>) -> String {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    if let Some(l) = log_level {
        meta["io.modelcontextprotocol/logLevel"] = json!(l);
    }
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
           "params": {"name": "working_set_get", "arguments": {}, "_meta": meta}})
    .to_string()
}

#[tokio::test]
async fn a_2026_07_28_request_gets_log_messages_only_with_its_own_log_level() {
    let h = harness(64 * 1024).await;
    let extra = format!(
        "Authorization: Bearer {GOOD}\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: working_set_get\r\n"
    );
    let quiet = stateless_refused_call(None);
    let answer = raw_answer(h.mcp, &post_head(&h.mcp.to_string(), &extra, quiet.len()), quiet.as_bytes()).await;
    assert!(answer.contains("INVALID_ARGUMENT"), "{answer}");
    assert!(!answer.contains("notifications/message"), "no logLevel, no message: {answer}");
    let loud = stateless_refused_call(Some("notice"));
    let answer = raw_answer(h.mcp, &post_head(&h.mcp.to_string(), &extra, loud.len()), loud.as_bytes()).await;
    assert!(answer.contains("INVALID_ARGUMENT"), "{answer}");
    assert!(answer.contains("notifications/message") && answer.contains("tool_refused"), "{answer}");
}

/// A 2026-07-28 `agent_register` call with `key`, as raw HTTP.
fn stateless_register(key: &str) -> (String, String) {
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "agent_register", "arguments": {"idempotency_key": key},
                   "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                             "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    let extra = "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: agent_register\r\n";
    (extra.to_string(), body)
}

#[tokio::test]
async fn a_door_inside_a_node_tells_it_the_address_each_client_connected_from() {
    let h = harness_with(64 * 1024, true).await;
    for (source, key) in [("127.0.0.2", "from-2"), ("127.0.0.3", "from-3")] {
        let (extra, body) = stateless_register(key);
        let head = post_head(&h.mcp.to_string(), &extra, body.len());
        let answer = raw_answer_from(source, h.mcp, &head, body.as_bytes()).await;
        assert!(answer.contains(&format!("kf_for_{key}")), "{answer}");
    }
    let seen = h.node.registrations.lock().expect("lock").clone();
    let handed = |ip: &str| (Some(ip.to_string()), None);
    assert_eq!(seen, vec![handed("127.0.0.2"), handed("127.0.0.3")], "each call names its own client");

    // A door that calls over the network (the stdio door, a door outside a node) claims nothing:
    // the address stays in the door's process.
    let plain = harness(64 * 1024).await;
    let (extra, body) = stateless_register("plain");
    let head = post_head(&plain.mcp.to_string(), &extra, body.len());
    let answer = raw_answer_from("127.0.0.2", plain.mcp, &head, body.as_bytes()).await;
    assert!(answer.contains("kf_for_plain"), "{answer}");
    assert_eq!(plain.node.registrations.lock().expect("lock").clone(), vec![(None, None)]);
}

/// The names `tools/list` answers a client at `/mcp{query}`.
async fn listed_at(h: &Harness, lifecycle: ClientLifecycleMode, query: &str) -> Vec<String> {
    let c = client_at(h, Some(GOOD), lifecycle, query).await;
    let names = c.list_all_tools().await.expect("tools/list").into_iter().map(|t| t.name.to_string()).collect();
    c.cancel().await.expect("close");
    names
}

#[tokio::test]
async fn the_url_chooses_the_toolsets_in_both_revisions() {
    let h = harness(64 * 1024).await;
    for modern in [false, true] {
        let mode = || if modern { stateless() } else { legacy() };
        let all = listed_at(&h, mode(), "?toolsets=all").await;
        assert_eq!(all, kungfu_mcp::tool_names(), "all: every tool, in registry order");
        let coord = listed_at(&h, mode(), "?toolsets=coord").await;
        assert!(coord.iter().any(|n| n == "message_send") && coord.iter().any(|n| n == "turn_get"), "{coord:?}");
        assert!(!coord.iter().any(|n| n.starts_with("record_")), "records was not asked for: {coord:?}");
        let both = listed_at(&h, mode(), "?toolsets=coord%2Crecords").await;
        assert_eq!(both, all, "the two opt-in sets and the default one are all of them");
    }
}

#[tokio::test]
async fn an_unknown_toolset_is_an_error_naming_the_known_ones() {
    let h = harness(64 * 1024).await;
    for modern in [false, true] {
        let c = client_at(&h, Some(GOOD), if modern { stateless() } else { legacy() }, "?toolsets=coord,admin").await;
        let e = mcp_error(c.list_all_tools().await.expect_err("admin is no toolset"));
        assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
        assert!(e.message.contains("\"admin\"") && e.message.contains("default, coord, records"), "{}", e.message);
        let data = e.data.expect("structured data");
        assert_eq!((data["field"].clone(), data["next_step"].clone()), (json!("toolsets"), json!("revise")));
        assert_eq!(data["known"], json!(["default", "coord", "records", "all"]));
        // A call is refused the same way: the selection is wrong whatever the tool.
        let call = c.call_tool(CallToolRequestParams::new("turn_get")).await;
        assert_eq!(mcp_error(call.expect_err("refused")).code, ErrorCode::INVALID_PARAMS);
        c.cancel().await.expect("close");
    }
}

#[tokio::test]
async fn a_tool_outside_the_connection_s_toolsets_is_refused_naming_its_set() {
    let h = harness(64 * 1024).await;
    let c = client(&h, Some(GOOD), stateless()).await;
    let e = mcp_error(c.call_tool(CallToolRequestParams::new("record_get")).await.expect_err("not served"));
    assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
    assert!(e.message.contains("toolset `records`") && e.message.contains("?toolsets=records"), "{}", e.message);
    assert_eq!(e.data.expect("data")["toolset"], json!("records"));
    c.cancel().await.expect("close");
    // The same tool through a URL that asks for its set reaches the node (which answers
    // UNIMPLEMENTED here: the test node serves no RecordService).
    let c = client_at(&h, Some(GOOD), stateless(), "?toolsets=records").await;
    let answered = c.call_tool(CallToolRequestParams::new("record_get")).await.expect("a tool result");
    assert_eq!(answered.is_error, Some(true));
    c.cancel().await.expect("close");
}

#[tokio::test]
async fn the_toolsets_header_chooses_when_the_url_does_not() {
    let h = harness(64 * 1024).await;
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                             "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    let extra = "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\nX-MCP-Toolsets: records\r\n";
    let answer = raw_answer(h.mcp, &post_head(&h.mcp.to_string(), extra, body.len()), body.as_bytes()).await;
    assert!(answer.contains("\"record_patch\"") && answer.contains("\"turn_get\""), "{answer}");
    assert!(!answer.contains("\"message_send\""), "coord was not asked for");
    let extra = "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\nX-MCP-Toolsets: everything\r\n";
    let answer = raw_answer(h.mcp, &post_head(&h.mcp.to_string(), extra, body.len()), body.as_bytes()).await;
    assert!(answer.contains("-32602") && answer.contains("unknown toolset"), "{answer}");
}

#[tokio::test]
async fn deleting_a_session_answers_204_and_ends_it() {
    let h = harness(64 * 1024).await;
    let answer = raw_answer(h.mcp, &post_head(&h.mcp.to_string(), "", INITIALIZE.len()), INITIALIZE.as_bytes()).await;
    let session = answer
        .lines()
        .find_map(|l| {
            l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("mcp-session-id")).map(|(_, v)| v.trim())
        })
        .unwrap_or_else(|| panic!("initialize names a session: {answer}"))
        .to_string();
    let delete = |id: &str| {
        format!(
            "DELETE /mcp HTTP/1.1\r\nHost: {}\r\nMcp-Session-Id: {id}\r\nMCP-Protocol-Version: 2025-11-25\r\nConnection: close\r\n\r\n",
            h.mcp
        )
    };
    // 200 and 204 are what the SDKs count as success (the Python SDK logs "Session termination
    // failed: 202" for rmcp's own answer).
    assert_eq!(raw_status(h.mcp, &delete(&session), b"").await, 204);
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let extra = format!("Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n");
    let after = raw_status(h.mcp, &post_head(&h.mcp.to_string(), &extra, list.len()), list.as_bytes()).await;
    assert_eq!(after, 404, "the session is gone");
}

// --- Long waits as MCP Tasks (issue #31, the `io.modelcontextprotocol/tasks` extension) ---

/// A client as [`client`] that declares the Tasks extension: at `initialize` (2025-11-25) or in
/// every request's `_meta` (2026-07-28).
async fn tasks_client(
    h: &Harness,
    key: &str,
    lifecycle: ClientLifecycleMode,
) -> RunningService<RoleClient, ClientConfig> {
    tasks_client_at(h, key, lifecycle, "").await
}

/// [`tasks_client`] at `/mcp` with `query` after it (`?toolsets=coord`).
async fn tasks_client_at(
    h: &Harness,
    key: &str,
    lifecycle: ClientLifecycleMode,
    query: &str,
) -> RunningService<RoleClient, ClientConfig> {
    let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{}/mcp{query}", h.mcp)).auth_header(key);
    let transport = StreamableHttpClientTransport::from_config(config);
    let mut info = ClientConfig::default();
    info.capabilities = ClientCapabilities::builder().enable_tasks().build();
    if matches!(lifecycle, ClientLifecycleMode::Initialize) {
        info.protocol_version = ProtocolVersion::V_2025_11_25;
    }
    info.serve_with_lifecycle(transport, lifecycle).await.expect("the client starts")
}

async fn call_once(
    c: &rmcp::Peer<RoleClient>,
    name: &'static str,
    args: Json,
) -> Result<CallToolResponse, ServiceError> {
    let Json::Object(args) = args else { panic!("arguments are an object") };
    c.call_tool_once(CallToolRequestParams::new(name).with_arguments(args)).await
}

/// `turn_wait` called as a task: the task's seed state.
async fn wait_task(c: &rmcp::Peer<RoleClient>) -> Task {
    match call_once(c, "turn_wait", json!({"timeout_secs": 60})).await.expect("an answer") {
        CallToolResponse::Task(t) => t.task,
        other => panic!("a task handle, not {other:?}"),
    }
}

async fn task_json(c: &rmcp::Peer<RoleClient>, id: &str) -> Json {
    serde_json::to_value(c.get_task(GetTaskParams::new(id)).await.expect("tasks/get")).expect("json")
}

/// Polls `check` until it holds, bounded: what the door does in the background (a keeper
/// settling a task, a session's tasks forgotten) is seen from outside only by asking again.
async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    for _ in 0..500 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never: {what}");
}

#[tokio::test]
async fn turn_wait_as_a_task_works_until_an_obligation_arrives_then_completes_with_the_result() {
    for lifecycle in [legacy(), stateless()] {
        let h = harness(1 << 20).await;
        let c = tasks_client(&h, GATED, lifecycle.clone()).await;
        let task = wait_task(&c).await;
        assert!(task.task_id.starts_with("kt_"), "{task:?}");
        assert_eq!(
            (task.status, task.ttl_ms, task.poll_interval_ms),
            (TaskStatus::Working, Some(300_000), Some(1_000))
        );
        // Nothing is owed until the test releases the obligation: the task is working.
        let working = task_json(&c, &task.task_id).await;
        assert_eq!((working["status"].clone(), working["resultType"].clone()), (json!("working"), json!("complete")));
        assert!(working.get("result").is_none() && working.get("error").is_none(), "{working}");
        assert!(h.door.tasks().working() == 1, "held while the wait runs");

        // Another caller cannot read or cancel it: it is as unknown as an id that never was.
        let stranger = tasks_client(&h, IDLE, lifecycle.clone()).await;
        let e = mcp_error(stranger.get_task(GetTaskParams::new(task.task_id.clone())).await.expect_err("not theirs"));
        assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
        assert!(stranger.cancel_task(CancelTaskParams::new(task.task_id.clone())).await.is_err());

        // The obligation arrives on the watch feed: the task completes with turn_wait's answer.
        h.node.release.notify_one();
        let mut done = Json::Null;
        eventually("the task completes", async || {
            done = task_json(&c, &task.task_id).await;
            done["status"] == json!("completed")
        })
        .await;
        let result = &done["result"];
        assert_eq!(result["isError"], json!(false), "{done}");
        assert_eq!(result["structuredContent"]["owed"][0]["obligation"], json!({"assignment_delivery": "asg_3"}));
        assert!(result["content"][0]["text"].as_str().is_some_and(|t| t.contains("asg_3")), "the text too");
        assert_eq!(done["statusMessage"], json!("1 obligation(s) owed; act on each as its `next` says"));
        assert_eq!(h.node.open_watches.load(Ordering::SeqCst), 0, "the wait closed its watch");
        // Finished tasks stay readable (for their time to live), and cancelling one changes nothing.
        c.cancel_task(CancelTaskParams::new(task.task_id.clone())).await.expect("an idempotent ack");
        assert_eq!(task_json(&c, &task.task_id).await["status"], json!("completed"));
    }
}

#[tokio::test]
async fn cancelling_a_task_stops_its_wait_and_the_task_reads_cancelled() {
    for lifecycle in [legacy(), stateless()] {
        let h = harness(1 << 20).await;
        let c = tasks_client(&h, IDLE, lifecycle).await;
        let task = wait_task(&c).await;
        let node = h.node.clone();
        eventually("the wait watches the turn", async || node.open_watches.load(Ordering::SeqCst) == 1).await;
        c.cancel_task(CancelTaskParams::new(task.task_id.clone())).await.expect("ack");
        let cancelled = task_json(&c, &task.task_id).await;
        assert_eq!(cancelled["status"], json!("cancelled"), "{cancelled}");
        assert!(cancelled.get("result").is_none());
        eventually("the cancelled wait closes its watch", async || node.open_watches.load(Ordering::SeqCst) == 0).await;
        assert_eq!(h.door.tasks().working(), 0);
        assert_eq!(h.door.tasks().held(), 1, "a cancelled task is still readable");
    }
}

#[tokio::test]
async fn a_host_that_does_not_declare_tasks_is_answered_inline_and_refused_the_task_methods() {
    for lifecycle in [legacy(), stateless()] {
        let h = harness(1 << 20).await;
        let c = client(&h, Some(WAITER), lifecycle).await;
        let answer = call_once(&c, "turn_wait", json!({"timeout_secs": 5})).await.expect("an answer");
        let CallToolResponse::Complete(r) = answer else { panic!("an inline result, not {answer:?}") };
        assert_eq!(structured(&r)["owed"][0]["obligation"], json!({"assignment_delivery": "asg_2"}));
        assert_eq!(h.door.tasks().held(), 0, "no task was made");
        // ext-tasks: the task methods need the extension declared (-32021, naming it).
        let e = mcp_error(c.get_task(GetTaskParams::new("kt_any")).await.expect_err("refused"));
        assert_eq!(e.code, ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY);
        assert!(e.data.is_some_and(|d| d.to_string().contains("io.modelcontextprotocol/tasks")));
        // The server still declares the extension, for hosts that do.
        let caps = c.peer_info().map(|p| p.capabilities.clone()).expect("server info");
        assert!(caps.supports_tasks());
    }
}

#[tokio::test]
async fn a_turn_wait_that_answers_at_once_is_answered_inline_even_for_a_tasks_host() {
    for lifecycle in [legacy(), stateless()] {
        let h = harness(1 << 20).await;
        let c = tasks_client(&h, GOOD, lifecycle.clone()).await;
        let owed = call_once(&c, "turn_wait", json!({})).await.expect("an answer");
        assert!(matches!(owed, CallToolResponse::Complete(ref r) if r.is_error == Some(false)), "{owed:?}");
        let bad = call_once(&c, "turn_wait", json!({"timeout_secs": 0})).await.expect("an answer");
        let CallToolResponse::Complete(r) = bad else { panic!("an inline refusal, not {bad:?}") };
        assert_eq!(structured(&r)["field"], json!("timeout_secs"));
        // Other tools never become tasks.
        assert!(matches!(call_once(&c, "turn_get", json!({})).await, Ok(CallToolResponse::Complete(_))));
        assert_eq!(h.door.tasks().held(), 0);
    }
}

#[tokio::test]
async fn past_the_working_limit_a_turn_wait_task_is_refused_with_limit_exceeded() {
    let limits = TaskLimits { max_working_per_owner: 1, ..TaskLimits::default() };
    let h = harness_full(1 << 20, false, limits).await;
    let c = tasks_client(&h, IDLE, stateless()).await;
    let first = wait_task(&c).await;
    let e = mcp_error(call_once(&c, "turn_wait", json!({})).await.expect_err("over the limit"));
    assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
    let data = e.data.expect("data");
    assert_eq!(
        (data["code"].clone(), data["field"].clone(), data["next_step"].clone()),
        (json!("LIMIT_EXCEEDED"), json!("io.modelcontextprotocol/tasks"), json!("revise"))
    );
    assert!(e.message.contains("tasks/cancel"), "{}", e.message);
    c.cancel_task(CancelTaskParams::new(first.task_id)).await.expect("ack");
    wait_task(&c).await;
}

#[tokio::test]
async fn an_unknown_task_id_is_invalid_params_naming_the_field() {
    for lifecycle in [legacy(), stateless()] {
        let h = harness(1 << 20).await;
        let c = tasks_client(&h, IDLE, lifecycle).await;
        for e in [
            c.get_task(GetTaskParams::new("kt_0000")).await.map(|_| ()),
            c.cancel_task(CancelTaskParams::new("kt_0000")).await,
            c.update_task(UpdateTaskParams::new("kt_0000", Default::default())).await,
        ] {
            let e = mcp_error(e.expect_err("unknown"));
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
            let data = e.data.expect("data");
            assert_eq!(
                (data["code"].clone(), data["field"].clone(), data["next_step"].clone(), data["taskId"].clone()),
                (json!("NOT_FOUND"), json!("taskId"), json!("stop"), json!("kt_0000"))
            );
        }
    }
}

#[tokio::test]
async fn a_session_s_tasks_end_with_the_session() {
    let h = harness(1 << 20).await;
    let c = tasks_client(&h, IDLE, legacy()).await;
    wait_task(&c).await;
    let node = h.node.clone();
    eventually("the wait watches the turn", async || node.open_watches.load(Ordering::SeqCst) == 1).await;
    assert_eq!(h.door.tasks().held(), 1);
    // Closing the client ends the session (DELETE): its tasks are stopped and forgotten.
    c.cancel().await.expect("the session closes");
    let tasks = h.door.tasks().clone();
    eventually("the session's tasks are forgotten", async || tasks.held() == 0).await;
    eventually("and their waits closed", async || node.open_watches.load(Ordering::SeqCst) == 0).await;
}

// --- barrier_wait (issue #31): a barrier's wait, as a Task for a host that declares the extension ---

const COORD: &str = "?toolsets=coord";

fn barrier_args(entry: u64, timeout_secs: u64) -> Json {
    json!({"thread": BARRIER_THREAD, "entry": entry, "timeout_secs": timeout_secs})
}

/// The barrier as the door maps it (`barrier_get`'s answer).
fn barrier_json(entry: u64, state: pb::BarrierState) -> Json {
    let bytes = prost::Message::encode_to_vec(&barrier(entry, state));
    let b = prost_reflect::DynamicMessage::decode(registry().message("Barrier"), bytes.as_slice()).expect("decodes");
    kungfu_mcp::json::message_to_json(&b)
}

#[tokio::test]
async fn barrier_wait_as_a_task_works_until_the_last_rank_replies_then_completes_with_the_barrier() {
    for lifecycle in [legacy(), stateless()] {
        let h = harness(1 << 20).await;
        let c = tasks_client_at(&h, GOOD, lifecycle.clone(), COORD).await;
        let answer = call_once(&c, "barrier_wait", barrier_args(REPLIED_BARRIER, 60)).await.expect("an answer");
        let CallToolResponse::Task(task) = answer else { panic!("a task handle, not {answer:?}") };
        let task = task.task;
        assert_eq!((task.status, task.ttl_ms), (TaskStatus::Working, Some(300_000)));
        let message = task.status_message.clone().unwrap_or_default();
        assert!(message.contains("th_1#3") && message.contains("1 of 3 ranks pending"), "{message}");
        // The wait watches the thread after the newest entry the barrier names (ag_2's reply), so
        // the replies already read do not wake it again.
        let node = h.node.clone();
        eventually("the wait watches the thread", async || node.open_thread_watches.load(Ordering::SeqCst) == 1).await;
        assert_eq!(node.thread_watches.lock().expect("lock").clone(), vec![(BARRIER_THREAD.to_string(), 4)]);
        // ag_3 has not replied, so the barrier waits, whatever the timing.
        assert_eq!(task_json(&c, &task.task_id).await["status"], json!("working"));
        assert_eq!(h.door.tasks().working(), 1);

        // The last rank replies: the entry on the thread's feed wakes the wait, which reads the
        // barrier released and completes with barrier_get's answer.
        node.reply.notify_one();
        let mut done = Json::Null;
        eventually("the task completes", async || {
            done = task_json(&c, &task.task_id).await;
            done["status"] == json!("completed")
        })
        .await;
        let result = &done["result"];
        assert_eq!(result["isError"], json!(false), "{done}");
        assert_eq!(result["structuredContent"], barrier_json(REPLIED_BARRIER, pb::BarrierState::Released));
        assert_eq!(done["statusMessage"], json!("barrier th_1#3 released: every responder arrived"));
        eventually("the wait closed its watch", async || node.open_thread_watches.load(Ordering::SeqCst) == 0).await;
    }
}

#[tokio::test]
async fn a_final_barrier_or_a_refusal_is_answered_inline_even_for_a_tasks_host() {
    for lifecycle in [legacy(), stateless()] {
        let h = harness(1 << 20).await;
        let c = tasks_client_at(&h, GOOD, lifecycle.clone(), COORD).await;
        for (entry, state) in
            [(RELEASED_BARRIER, pb::BarrierState::Released), (BROKEN_BARRIER, pb::BarrierState::Broken)]
        {
            let answer = call_once(&c, "barrier_wait", barrier_args(entry, 60)).await.expect("an answer");
            let CallToolResponse::Complete(r) = answer else { panic!("an inline result, not {answer:?}") };
            assert_eq!(r.is_error, Some(false));
            assert_eq!(structured(&r), barrier_json(entry, state), "barrier_get's very answer");
        }
        // Input errors: the door's usual rejection, a stable code naming the field, inline.
        let refusals = [
            (
                json!({"thread": BARRIER_THREAD, "entry": WAITING_BARRIER, "timeout_secs": 0}),
                "INVALID_ARGUMENT",
                "timeout_secs",
            ),
            (
                json!({"thread": BARRIER_THREAD, "entry": WAITING_BARRIER, "timeout_secs": 61}),
                "INVALID_ARGUMENT",
                "timeout_secs",
            ),
            (json!({"thread": BARRIER_THREAD, "entrie": WAITING_BARRIER}), "INVALID_ARGUMENT", "entrie"),
            (json!({"thread": BARRIER_THREAD, "entry": "five"}), "INVALID_ARGUMENT", "entry"),
            (json!({"entry": WAITING_BARRIER}), "INVALID_ARGUMENT", "thread"),
            (json!({"thread": "th_404", "entry": WAITING_BARRIER}), "NOT_FOUND", "thread"),
            (json!({"thread": BARRIER_THREAD, "entry": 77}), "NOT_FOUND", "entry"),
        ];
        for (args, code, field) in refusals {
            let answer = call_once(&c, "barrier_wait", args.clone()).await.expect("an answer");
            let CallToolResponse::Complete(r) = answer else { panic!("{args}: an inline refusal, not {answer:?}") };
            assert_eq!(r.is_error, Some(true), "{args}");
            let e = structured(&r);
            assert_eq!((e["code"].clone(), e["field"].clone()), (json!(code), json!(field)), "{args}: {e}");
            let next = if code == "NOT_FOUND" { "stop" } else { "revise" };
            assert_eq!(e["next_step"], json!(next), "{args}: {e}");
        }
        assert_eq!(h.door.tasks().held(), 0, "no task was made");
        assert_eq!(h.node.thread_watches.lock().expect("lock").len(), 0, "nor any watch opened");
    }
}

#[tokio::test]
async fn barrier_wait_answers_the_barrier_still_waiting_when_the_time_runs_out() {
    let h = harness(1 << 20).await;
    let c = client_at(&h, Some(GOOD), stateless(), COORD).await;
    let r = call(&c, "barrier_wait", barrier_args(WAITING_BARRIER, 1)).await;
    assert_eq!(r.is_error, Some(false));
    assert_eq!(structured(&r), barrier_json(WAITING_BARRIER, pb::BarrierState::Waiting), "as it stands, not an error");
    let node = h.node.clone();
    eventually("the wait closed its watch", async || node.open_thread_watches.load(Ordering::SeqCst) == 0).await;
    c.cancel().await.expect("close");
}

/// A host without the Tasks extension holds the call; a handle posts no entry, so the wait sees it
/// by re-reading the barrier, never through the feed.
#[tokio::test]
async fn a_host_that_does_not_declare_tasks_gets_barrier_wait_as_a_blocking_call() {
    for lifecycle in [legacy(), stateless()] {
        let h = harness(1 << 20).await;
        let c = client_at(&h, Some(GOOD), lifecycle, COORD).await;
        let peer = c.peer().clone();
        let waiting =
            tokio::spawn(async move { call_once(&peer, "barrier_wait", barrier_args(HANDLED_BARRIER, 60)).await });
        let node = h.node.clone();
        eventually("the wait watches the thread", async || node.open_thread_watches.load(Ordering::SeqCst) == 1).await;
        assert!(!waiting.is_finished(), "ag_3 has not arrived: the call is held");
        node.handled.store(true, Ordering::SeqCst);
        let answer = tokio::time::timeout(Duration::from_secs(30), waiting).await.expect("answered").expect("joined");
        let CallToolResponse::Complete(r) = answer.expect("an answer") else { panic!("a blocking answer, no task") };
        assert_eq!(structured(&r), barrier_json(HANDLED_BARRIER, pb::BarrierState::Released));
        assert_eq!(h.door.tasks().held(), 0, "no task was made");
        eventually("the wait closed its watch", async || node.open_thread_watches.load(Ordering::SeqCst) == 0).await;
    }
}

#[tokio::test]
async fn cancelling_a_barrier_task_stops_its_wait_and_closes_the_thread_watch() {
    let h = harness(1 << 20).await;
    let c = tasks_client_at(&h, GOOD, stateless(), COORD).await;
    let answer = call_once(&c, "barrier_wait", barrier_args(WAITING_BARRIER, 60)).await.expect("an answer");
    let CallToolResponse::Task(task) = answer else { panic!("a task handle, not {answer:?}") };
    let node = h.node.clone();
    eventually("the wait watches the thread", async || node.open_thread_watches.load(Ordering::SeqCst) == 1).await;
    c.cancel_task(CancelTaskParams::new(task.task.task_id.clone())).await.expect("ack");
    assert_eq!(task_json(&c, &task.task.task_id).await["status"], json!("cancelled"));
    eventually("the cancelled wait closes its watch", async || node.open_thread_watches.load(Ordering::SeqCst) == 0)
        .await;
}

#[tokio::test]
async fn barrier_wait_is_served_only_in_the_coord_toolset() {
    let h = harness(64 * 1024).await;
    for modern in [false, true] {
        let mode = || if modern { stateless() } else { legacy() };
        assert!(!listed_at(&h, mode(), "").await.iter().any(|n| n == "barrier_wait"), "not in the default set");
        assert!(listed_at(&h, mode(), COORD).await.iter().any(|n| n == "barrier_wait"));
        // Called without the set, it is refused naming it, for a Tasks host as for any other, and
        // no task is made.
        let plain = client(&h, Some(GOOD), mode()).await;
        let tasks = tasks_client(&h, GOOD, mode()).await;
        for c in [&plain, &tasks] {
            let e =
                mcp_error(call_once(c, "barrier_wait", barrier_args(WAITING_BARRIER, 5)).await.expect_err("refused"));
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
            assert!(e.message.contains("toolset `coord`") && e.message.contains("?toolsets=coord"), "{}", e.message);
            assert_eq!(e.data.expect("data")["toolset"], json!("coord"));
        }
        assert_eq!(h.door.tasks().held(), 0);
    }
}
