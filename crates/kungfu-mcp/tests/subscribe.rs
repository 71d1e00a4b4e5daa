//! `resources/subscribe` of `kungfu://turn` (issue #35) against a real `kungfud`: a subscribed
//! 2025-11-25 session receives `notifications/resources/updated` for the turn, with the URI only,
//! when an obligation arises for its caller and when one ends; none after `resources/unsubscribe`;
//! and a subscription to any other resource is refused.
#![allow(deprecated)] // rmcp marks resources/subscribe legacy-only; it is the 2025-11-25 revision's.

use kungfu_system_tests::{BOUND, Client, Cluster, connect, mcp_addr, register_when_serving};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientConfig, ErrorCode, ProtocolVersion,
    ResourceUpdatedNotificationParam, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient, ServiceError};
use serde_json::{Value as Json, json};
use std::time::Duration;
use tokio::sync::mpsc;

/// A host that records each `notifications/resources/updated` it receives.
struct Host {
    updated: mpsc::UnboundedSender<ResourceUpdatedNotificationParam>,
}

impl ClientHandler for Host {
    async fn on_resource_updated(&self, params: ResourceUpdatedNotificationParam, _: NotificationContext<RoleClient>) {
        let _ = self.updated.send(params);
    }

    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        info
    }
}

async fn host(
    mcp: std::net::SocketAddr,
    key: &str,
) -> (RunningService<RoleClient, Host>, mpsc::UnboundedReceiver<ResourceUpdatedNotificationParam>) {
    let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{mcp}/mcp")).auth_header(key);
    let (tx, rx) = mpsc::unbounded_channel();
    let transport = StreamableHttpClientTransport::from_config(config);
    let running =
        Host { updated: tx }.serve_with_lifecycle(transport, ClientLifecycleMode::Initialize).await.expect("starts");
    (running, rx)
}

async fn plain(mcp: std::net::SocketAddr, key: &str) -> RunningService<RoleClient, ClientConfig> {
    let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{mcp}/mcp")).auth_header(key);
    let mut info = ClientConfig::default();
    info.protocol_version = ProtocolVersion::V_2025_11_25;
    info.serve_with_lifecycle(StreamableHttpClientTransport::from_config(config), ClientLifecycleMode::Initialize)
        .await
        .expect("starts")
}

async fn call(c: &rmcp::Peer<RoleClient>, name: &'static str, args: Json) -> Json {
    let Json::Object(args) = args else { panic!("arguments are an object") };
    match c.call_tool_once(CallToolRequestParams::new(name).with_arguments(args)).await.expect("an answer") {
        CallToolResponse::Complete(r) if r.is_error == Some(false) => r.structured_content.expect("structure"),
        other => panic!("{name}: a successful result, not {other:?}"),
    }
}

/// The next notification, within the bound.
async fn next(rx: &mut mpsc::UnboundedReceiver<ResourceUpdatedNotificationParam>, logs: &str) -> Json {
    let n = tokio::time::timeout(BOUND, rx.recv()).await.unwrap_or_else(|_| panic!("no notification\n{logs}"));
    serde_json::to_value(n.expect("the host is running")).expect("json")
}

#[tokio::test]
async fn a_subscribed_session_is_told_its_turn_changed_with_the_uri_only_until_it_unsubscribes() {
    let cluster = Cluster::start(1, "http_listen = \"127.0.0.1:0\"\n");
    let node = &cluster.nodes[&1];
    let mcp = mcp_addr(node).await;
    let anon = Client { channel: connect(node.api).await, key: None };
    let (_, lead) = register_when_serving(&anon, "lead", || cluster.logs()).await;
    let (_, worker) = register_when_serving(&anon, "worker", || cluster.logs()).await;
    let lead = plain(mcp, lead.key.as_deref().expect("key")).await;
    let worker_key = worker.key.expect("key");
    let (worker, mut updates) = host(mcp, &worker_key).await;
    // A second session of the same agent that stays subscribed: it shows when a change was sent.
    let (witness, mut witnessed) = host(mcp, &worker_key).await;

    let subscribe = worker.peer_info().and_then(|i| i.capabilities.resources.as_ref().and_then(|r| r.subscribe));
    assert_eq!(subscribe, Some(true), "the resources capability advertises subscribe");

    let created = call(&lead, "thread_create", json!({"subject": "wake", "grant": {"role": "ROLE_SPEAKER"}})).await;
    let thread = created["receipt"]["thread_created"]["thread"].clone();
    call(&worker, "thread_join", json!({"grant_secret": created["grant_secret"]})).await;

    worker.subscribe(SubscribeRequestParams::new("kungfu://turn")).await.expect("subscribed");
    witness.subscribe(SubscribeRequestParams::new("kungfu://turn")).await.expect("subscribed");

    // An obligation arises: the session is told, with the URI and nothing else (§12).
    let posted = call(&lead, "thread_post", json!({"thread": thread, "body": {"content": "secret plan"}})).await;
    let entry = posted["receipt"]["posted"]["entry"].clone();
    let told = next(&mut updates, &cluster.logs()).await;
    assert_eq!(told, json!({"uri": "kungfu://turn"}), "the URI only");
    next(&mut witnessed, &cluster.logs()).await;

    // The obligation ends: the turn changed again.
    call(&worker, "thread_handle", json!({"thread": thread, "entry": entry})).await;
    assert_eq!(next(&mut updates, &cluster.logs()).await, json!({"uri": "kungfu://turn"}));
    next(&mut witnessed, &cluster.logs()).await;

    // Unsubscribed: a new obligation reaches the witness, and not the session.
    worker.unsubscribe(UnsubscribeRequestParams::new("kungfu://turn")).await.expect("unsubscribed");
    call(&lead, "thread_post", json!({"thread": thread, "body": {"content": "again"}})).await;
    next(&mut witnessed, &cluster.logs()).await;
    // The witness's watch saw the change, so the session's would have too by now; a little
    // more for its notification to cross the same connection.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(updates.try_recv().is_err(), "no notification after unsubscribe");

    // Only the turn can be subscribed to; an unknown URI is not found.
    let refused = worker.subscribe(SubscribeRequestParams::new("kungfu://tools")).await.expect_err("refused");
    let ServiceError::McpError(e) = refused else { panic!("a JSON-RPC error, not {refused:?}") };
    assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{e:?}");
    assert!(e.message.contains("only kungfu://turn"), "{e:?}");
    let refused = worker.subscribe(SubscribeRequestParams::new("kungfu://nope")).await.expect_err("refused");
    let ServiceError::McpError(e) = refused else { panic!("a JSON-RPC error, not {refused:?}") };
    assert_eq!(e.code, ErrorCode::RESOURCE_NOT_FOUND, "{e:?}");
}

#[tokio::test]
async fn a_subscription_with_a_bad_key_is_refused_with_the_node_s_code() {
    let cluster = Cluster::start(1, "http_listen = \"127.0.0.1:0\"\n");
    let node = &cluster.nodes[&1];
    let mcp = mcp_addr(node).await;
    let anon = Client { channel: connect(node.api).await, key: None };
    register_when_serving(&anon, "someone", || cluster.logs()).await;
    let (bad, _) = host(mcp, "kf_not_a_real_key").await;
    let refused = bad.subscribe(SubscribeRequestParams::new("kungfu://turn")).await.expect_err("refused");
    let ServiceError::McpError(e) = refused else { panic!("a JSON-RPC error, not {refused:?}") };
    assert_eq!(e.data.as_ref().and_then(|d| d.get("code")), Some(&json!("UNAUTHENTICATED")), "{e:?}");
}

#[tokio::test]
async fn a_2026_listen_for_the_turn_is_told_when_an_obligation_arises_and_other_uris_are_left_out() {
    use rmcp::model::{ServerNotification, SubscriptionFilter};
    let cluster = Cluster::start(1, "http_listen = \"127.0.0.1:0\"\n");
    let node = &cluster.nodes[&1];
    let mcp = mcp_addr(node).await;
    let anon = Client { channel: connect(node.api).await, key: None };
    let (_, lead) = register_when_serving(&anon, "lead", || cluster.logs()).await;
    let (_, worker) = register_when_serving(&anon, "worker", || cluster.logs()).await;
    let lead = plain(mcp, lead.key.as_deref().expect("key")).await;
    let config = StreamableHttpClientTransportConfig::with_uri(format!("http://{mcp}/mcp"))
        .auth_header(worker.key.as_deref().expect("key"));
    let lifecycle = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
    let worker = ClientConfig::default()
        .serve_with_lifecycle(StreamableHttpClientTransport::from_config(config), lifecycle)
        .await
        .expect("starts");

    let created = call(&lead, "thread_create", json!({"subject": "wake", "grant": {"role": "ROLE_SPEAKER"}})).await;
    let thread = created["receipt"]["thread_created"]["thread"].clone();
    call(&worker, "thread_join", json!({"grant_secret": created["grant_secret"]})).await;

    let filter = SubscriptionFilter::builder()
        .resource_subscription("kungfu://turn")
        .resource_subscription("kungfu://tools")
        .tools_list_changed()
        .build();
    let mut listening = worker.listen(filter).await.expect("listening");
    let accepted = listening.acknowledged().clone();
    assert_eq!(accepted.resource_subscriptions, Some(vec!["kungfu://turn".to_string()]), "{accepted:?}");
    assert_eq!(accepted.tools_list_changed, None, "{accepted:?}");

    call(&lead, "thread_post", json!({"thread": thread, "body": {"content": "secret plan"}})).await;
    let told = tokio::time::timeout(BOUND, listening.next())
        .await
        .unwrap_or_else(|_| panic!("no notification\n{}", cluster.logs()))
        .expect("a notification")
        .expect("still listening");
    let ServerNotification::ResourceUpdatedNotification(n) = told else { panic!("a resource update, not {told:?}") };
    assert_eq!(n.params.uri, "kungfu://turn");
    assert!(!serde_json::to_string(&n.params).expect("json").contains("secret"), "the URI only");
}
