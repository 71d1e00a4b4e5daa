//! The web console (issue #18, docs/console.md): a read-only page served at `/ui/` on the HTTP
//! listener, embedded in the binary, and the two JSON endpoints behind it.
//!
//! - The page is three files in `crates/kungfu-server/console/` (plain HTML, CSS and JavaScript,
//!   no build step), compiled in with `include_str!` and served from memory, under a
//!   Content-Security-Policy that allows only this origin's own script and style, so nothing
//!   injected into the page (participant content included, L6) can run.
//! - `POST /ui/api/tools/{tool}` serves a READ tool of the MCP registry, with the JSON arguments
//!   of the body, through the MCP door's own call path ([`kungfu_mcp::Door::call_read_tool`]):
//!   not a third set of handlers. The request's `Authorization: Bearer <agent key>` travels as the
//!   MCP door forwards it; a tool that writes is refused, so the console cannot act.
//! - `GET /ui/api/cluster` is the operator's cluster view: this node's `ClusterStatus` and every
//!   other member's, asked at its API with the operator token, as `kungfu cluster status` asks
//!   them. Open to loopback clients only, or guarded by the operator token
//!   (`console.cluster_view`).
//!
//! - `GET /ui/api/watch/turn`, `GET /ui/api/watch/thread/{thread}` and
//!   `GET /ui/api/watch/record/{record}` are the live view: the node's own watch feeds
//!   (WatchTurn, WatchThread, WatchRecord), opened through the MCP door's call path
//!   ([`kungfu_mcp::Door::open_watch`]) with the request's key and relayed as Server-Sent Events:
//!   each event is the feed's message in the door's JSON mapping, its SSE `id` the resume point
//!   (the turn's cursor, a thread's last entry number, a record's last rev), which the page sends back as
//!   `Last-Event-ID` when it reconnects, so nothing is missed and nothing is sent twice. The
//!   stream ends with an `end` event: the refusal the feed ended with, or a request to reconnect.
//!
//! Every endpoint checks `Host` and `Origin` as the MCP door does (DNS rebinding) and answers
//! `Cache-Control: no-store`. The page keeps keys in `sessionStorage` and sends them only as an
//! `Authorization` header: this module sets no cookie and reads no key from a URL.

use crate::backend::Backend;
use crate::config::{ClusterView, Config};
use crate::credentials::{Credentials, Operator};
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use kungfu_api::pb;
use kungfu_mcp::{WatchEvents, WatchFeed};
use kungfu_types::{Code, Rejection};
use serde_json::{Value as Json, json};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Where the console is served.
pub const PATH: &str = "/ui/";

const INDEX_HTML: &str = include_str!("../console/index.html");
const APP_JS: &str = include_str!("../console/app.js");
const STYLE_CSS: &str = include_str!("../console/style.css");

/// The page's policy: its own script and style only (no inline script, no `eval`), images from
/// itself or `data:`, requests to itself only, and never inside a frame (clickjacking).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'";

/// How long the cluster view waits for another member's status before showing it unreachable:
/// well under the page's refresh period, so one dead member does not stall the view.
const MEMBER_TIMEOUT: Duration = Duration::from_millis(1500);

/// How long one live stream lasts before the console ends it with an `end` event asking the page
/// to reconnect from its last event id: a bound on how long one connection and one of the agent's
/// watch slots (`watch::MAX_STREAMS_PER_AGENT`) are held by a page that may have been forgotten.
const STREAM_LIFETIME: Duration = Duration::from_secs(600);
/// How much longer the node's side of a live stream may last than the console's, so the console
/// ends it first, with its own `end` event.
const STREAM_SLACK: Duration = Duration::from_secs(30);
/// A live stream that carried nothing for this long sends an SSE comment: proxies keep an idle
/// stream open, and the page can tell a quiet stream from a dead one.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Frames one live stream buffers between the feed and a slow connection; when full, the relay
/// waits (the feed's own buffer then fills, and the node waits in turn, never dropping an event).
const FRAME_BUFFER: usize = 16;

/// What the console's handlers share.
struct Console {
    backend: Arc<Backend>,
    door: kungfu_mcp::Door,
    cluster_view: ClusterView,
    allowed_hosts: Vec<String>,
    allowed_origins: Vec<String>,
    max_body_bytes: usize,
    stop: CancellationToken,
    /// One lazy channel per member API address, reused across refreshes (the page polls).
    /// Bounded by the membership: an address is added only when a member names it.
    members: Mutex<HashMap<String, tonic::transport::Channel>>,
}

/// The console's routes: the page and its assets, and the two JSON endpoints. `allowed_hosts`
/// and `allowed_origins` are the MCP door's (already resolved against the bound port).
pub fn router(
    config: &Config,
    backend: Arc<Backend>,
    door: kungfu_mcp::Door,
    allowed_hosts: Vec<String>,
    allowed_origins: Vec<String>,
    stop: CancellationToken,
) -> axum::Router {
    let console = Arc::new(Console {
        backend,
        door,
        cluster_view: config.console.cluster_view,
        allowed_hosts,
        allowed_origins,
        max_body_bytes: config.mcp.max_body_bytes,
        stop,
        members: Mutex::new(HashMap::new()),
    });
    axum::Router::new()
        .route("/ui", get(|| async { redirect_to_page() }))
        .route(PATH, get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }))
        .route("/ui/app.js", get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }))
        .route("/ui/style.css", get(|| async { asset("text/css; charset=utf-8", STYLE_CSS) }))
        .route("/ui/api/tools/{tool}", post(call_tool))
        .route("/ui/api/cluster", get(cluster))
        .route("/ui/api/watch/turn", get(watch_turn))
        .route("/ui/api/watch/thread/{thread}", get(watch_thread))
        .route("/ui/api/watch/record/{record}", get(watch_record))
        .with_state(console)
}

/// The headers every console answer carries.
fn secure(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

fn redirect_to_page() -> Response {
    secure((StatusCode::PERMANENT_REDIRECT, [(header::LOCATION, PATH)]).into_response())
}

/// One embedded file. `no-cache`: a browser revalidates, so a new binary's page is seen at once.
fn asset(content_type: &'static str, body: &'static str) -> Response {
    secure(([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")], body).into_response())
}

/// A JSON answer of the API: never cached (it may hold an agent's obligations or content).
fn api_answer(status: StatusCode, body: Json) -> Response {
    let text = body.to_string();
    secure(
        (status, [(header::CONTENT_TYPE, "application/json"), (header::CACHE_CONTROL, "no-store")], text)
            .into_response(),
    )
}

/// A refusal as the API answers it: `{"error": {code, message, field, next_step, …}}`, the shape
/// of an MCP tool error, with an HTTP status that says the same.
fn refused(r: &Rejection) -> Response {
    api_answer(http_status(r.code), json!({ "error": kungfu_mcp::result::rejection_json(r, None) }))
}

/// The HTTP status of a refusal. The body carries the stable code; this is for HTTP tools.
fn http_status(code: Code) -> StatusCode {
    match code {
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::AgentInactive => StatusCode::FORBIDDEN,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::InvalidArgument | Code::LimitExceeded => StatusCode::BAD_REQUEST,
        Code::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        Code::Unavailable | Code::NotLeader => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::CONFLICT,
    }
}

/// The MCP door's `Host`/`Origin` rules; a refusal is a 403 naming the header.
fn admitted(console: &Console, headers: &HeaderMap) -> Result<(), Response> {
    kungfu_mcp::http::admits(headers, &console.allowed_hosts, &console.allowed_origins).map_err(|why| {
        let r = Rejection::new(Code::Unauthenticated, why);
        api_answer(StatusCode::FORBIDDEN, json!({ "error": kungfu_mcp::result::rejection_json(&r, None) }))
    })
}

/// `POST /ui/api/tools/{tool}`: one read tool, the body its JSON arguments (empty means none).
/// Success: `{"result": <the tool's structured result>}`; refusal: `{"error": …}`.
async fn call_tool(
    State(console): State<Arc<Console>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(tool): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(refusal) = admitted(&console, &headers) {
        return refusal;
    }
    if body.len() > console.max_body_bytes {
        return refused(&Rejection::new(
            Code::LimitExceeded,
            format!("the request body is over {} bytes (mcp.max_body_bytes)", console.max_body_bytes),
        ));
    }
    let args = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        match serde_json::from_slice::<Json>(&body) {
            Ok(Json::Object(map)) => Some(map),
            Ok(_) | Err(_) => {
                return refused(&Rejection::field(
                    Code::InvalidArgument,
                    "arguments",
                    "the body must be a JSON object of the tool's arguments",
                ));
            }
        }
    };
    let answer = console.door.call_read_tool(&tool, args.as_ref(), &headers, Some(peer), &console.stop).await;
    match answer {
        Ok(result) => {
            let body = result.structured_content.unwrap_or(Json::Null);
            if result.is_error == Some(true) {
                let code = body.get("code").and_then(Json::as_str).and_then(Code::parse).unwrap_or(Code::Unavailable);
                api_answer(http_status(code), json!({ "error": body }))
            } else {
                api_answer(StatusCode::OK, json!({ "result": body }))
            }
        }
        // Only an internal fault of the door gets here (an unknown tool is a refusal above).
        Err(e) => refused(&Rejection::new(Code::Unavailable, e.message.to_string())),
    }
}

/// The resume point the page sends back when it reconnects: the standard SSE header.
fn last_event_id(headers: &HeaderMap) -> Result<Option<String>, Rejection> {
    match headers.get("last-event-id").map(HeaderValue::to_str) {
        None => Ok(None),
        Some(Ok(id)) if id.trim().is_empty() => Ok(None),
        Some(Ok(id)) => Ok(Some(id.trim().to_string())),
        Some(Err(_)) => Err(Rejection::field(Code::InvalidArgument, "Last-Event-ID", "is not visible ASCII")),
    }
}

/// `GET /ui/api/watch/turn`: the caller's turn feed (WatchTurn), resumed from the cursor in
/// `Last-Event-ID` when there is one (then the first event is an empty confirmation when nothing
/// changed, else the whole current turn).
async fn watch_turn(
    State(console): State<Arc<Console>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    let mut args = serde_json::Map::new();
    match last_event_id(&headers) {
        Ok(Some(cursor)) => {
            args.insert("cursor".into(), Json::String(cursor));
        }
        Ok(None) => {}
        Err(r) => return refused(&r),
    }
    live(console, peer, headers, WatchFeed::Turn, args).await
}

/// `GET /ui/api/watch/thread/{thread}`: a thread's entries (WatchThread) after the entry number
/// in `Last-Event-ID` (none: from the first entry).
async fn watch_thread(
    State(console): State<Arc<Console>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(thread): Path<String>,
    headers: HeaderMap,
) -> Response {
    let after = match last_event_id(&headers) {
        Ok(None) => 0,
        Ok(Some(id)) => match id.parse::<u64>() {
            Ok(n) => n,
            Err(_) => {
                return refused(&Rejection::field(
                    Code::InvalidArgument,
                    "Last-Event-ID",
                    "must be the number of the last entry received",
                ));
            }
        },
        Err(r) => return refused(&r),
    };
    let mut args = serde_json::Map::new();
    args.insert("thread".into(), Json::String(thread));
    args.insert("after_entry".into(), json!(after));
    live(console, peer, headers, WatchFeed::Thread, args).await
}

/// `GET /ui/api/watch/record/{record}`: a shared record's accepted writes (WatchRecord) after the
/// rev in `Last-Event-ID` (none: from its creation), for the default audience (fleet).
async fn watch_record(
    State(console): State<Arc<Console>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(record): Path<String>,
    headers: HeaderMap,
) -> Response {
    let after = match last_event_id(&headers) {
        Ok(None) => 0,
        Ok(Some(id)) => match id.parse::<u32>() {
            Ok(n) => n,
            Err(_) => {
                return refused(&Rejection::field(
                    Code::InvalidArgument,
                    "Last-Event-ID",
                    "must be the rev of the last event received",
                ));
            }
        },
        Err(r) => return refused(&r),
    };
    let mut args = serde_json::Map::new();
    args.insert("record".into(), Json::String(record));
    args.insert("after_rev".into(), json!(after));
    live(console, peer, headers, WatchFeed::Record, args).await
}

/// Opens the feed and answers with its events as `text/event-stream`; a refusal to open (no key,
/// a bad key, not a member, too many streams) is an ordinary JSON refusal instead.
async fn live(
    console: Arc<Console>,
    peer: SocketAddr,
    headers: HeaderMap,
    feed: WatchFeed,
    args: serde_json::Map<String, Json>,
) -> Response {
    if let Err(refusal) = admitted(&console, &headers) {
        return refusal;
    }
    let lifetime = STREAM_LIFETIME + STREAM_SLACK;
    let events = match console.door.open_watch(feed, &args, &headers, Some(peer), lifetime).await {
        Ok(events) => events,
        Err(r) => return refused(&r),
    };
    let (tx, rx) = mpsc::channel::<Bytes>(FRAME_BUFFER);
    tokio::spawn(relay(events, feed, tx, console.stop.clone()));
    let frames = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|frame| (Ok::<_, std::convert::Infallible>(frame), rx))
    });
    secure(
        (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, "text/event-stream; charset=utf-8"),
                (header::CACHE_CONTROL, "no-store"),
                // A buffering proxy (nginx) would hold events back.
                (header::HeaderName::from_static("x-accel-buffering"), "no"),
            ],
            Body::from_stream(frames),
        )
            .into_response(),
    )
}

/// Relays one feed to one connection until the feed ends, the stream's lifetime passes, the node
/// shuts down (the HTTP server's graceful shutdown waits for open answers, so a live stream must
/// end by itself) or the page goes away (dropping the feed closes it at the node).
async fn relay(mut events: WatchEvents, feed: WatchFeed, tx: mpsc::Sender<Bytes>, stop: CancellationToken) {
    let ends_at = tokio::time::Instant::now() + STREAM_LIFETIME;
    loop {
        let (frame, last) = tokio::select! {
            event = events.next() => match event {
                Ok(Some(event)) => (event_frame(feed, &event), false),
                // A watched thread was closed and every entry sent.
                Ok(None) => (end_frame(&json!({ "reason": "closed" })), true),
                Err(r) => (end_frame(&json!({ "reason": "refused", "error": kungfu_mcp::result::rejection_json(&r, None) })), true),
            },
            () = tokio::time::sleep(KEEP_ALIVE) => (Bytes::from_static(b": keep-alive\n\n"), false),
            () = tokio::time::sleep_until(ends_at) => (end_frame(&json!({ "reason": "lifetime" })), true),
            () = stop.cancelled() => {
                let r = Rejection::new(Code::Unavailable, "the node is shutting down; reconnect with your last event id");
                (end_frame(&json!({ "reason": "refused", "error": kungfu_mcp::result::rejection_json(&r, None) })), true)
            }
            () = tx.closed() => return,
        };
        if tx.send(frame).await.is_err() || last {
            return;
        }
    }
}

/// One event of a feed as an SSE frame: `event` names the feed, `id` is where to resume after it
/// (a turn event's cursor, absent on the parts of a large change set that carry none; a thread
/// event's last entry number; a record batch's last rev), `data` the event in the door's JSON mapping (one line: JSON text
/// holds no raw newline).
fn event_frame(feed: WatchFeed, event: &Json) -> Bytes {
    let (name, id) = match feed {
        WatchFeed::Turn => ("turn", event.get("cursor").and_then(Json::as_str).map(str::to_string)),
        WatchFeed::Thread => (
            "thread",
            event
                .get("entries")
                .and_then(Json::as_array)
                .and_then(|e| e.last())
                .and_then(|e| e.get("seq"))
                .and_then(Json::as_u64)
                .map(|n| n.to_string()),
        ),
        WatchFeed::Record => (
            "record",
            event
                .get("events")
                .and_then(Json::as_array)
                .and_then(|e| e.last())
                .and_then(|e| e.get("rev"))
                .and_then(Json::as_u64)
                .map(|n| n.to_string()),
        ),
    };
    let mut frame = format!("event: {name}\n");
    // The cursor is opaque: it travels only when it cannot break the frame.
    if let Some(id) = id.filter(|id| !id.is_empty() && !id.contains(['\r', '\n'])) {
        frame.push_str(&format!("id: {id}\n"));
    }
    frame.push_str(&format!("data: {event}\n\n"));
    Bytes::from(frame)
}

/// The last frame of a stream.
fn end_frame(body: &Json) -> Bytes {
    Bytes::from(format!("event: end\ndata: {body}\n\n"))
}

/// Who may see the cluster view (`console.cluster_view`, decided by the service layer): a refusal
/// on loopback grounds is a 403 (no credential would help), a missing or wrong token a 401.
fn cluster_operator(console: &Console, peer: SocketAddr, headers: &HeaderMap) -> Result<Operator, Response> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::grpc::bearer_credential)
        .map(str::to_string);
    let credentials = Credentials { bearer, remote: Some(peer.ip()), ..Credentials::default() };
    console.backend.authenticate_cluster_viewer(&credentials).map_err(|r| match console.cluster_view {
        ClusterView::Loopback => {
            api_answer(StatusCode::FORBIDDEN, json!({ "error": kungfu_mcp::result::rejection_json(&r, None) }))
        }
        ClusterView::OperatorToken => refused(&r),
    })
}

/// `GET /ui/api/cluster`: every member's own view, as `kungfu cluster status` shows it.
async fn cluster(
    State(console): State<Arc<Console>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    if let Err(refusal) = admitted(&console, &headers) {
        return refusal;
    }
    let operator = match cluster_operator(&console, peer, &headers) {
        Ok(op) => op,
        Err(refusal) => return refusal,
    };
    let own = console.backend.cluster_status(&operator);
    let membership = own.membership.clone().unwrap_or_default();
    let mut members: Vec<(pb::ClusterNode, bool)> = membership.voters.iter().map(|n| (n.clone(), true)).collect();
    members.extend(membership.learners.iter().map(|n| (n.clone(), false)));
    if !members.iter().any(|(n, _)| n.node_id == own.node_id) {
        // Not (or no longer) a member: still show what this node knows of itself.
        members.push((pb::ClusterNode { node_id: own.node_id, ..Default::default() }, false));
    }
    let token = console.backend.config.operator_token.clone();
    let asks = members.iter().map(|(node, _)| {
        let console = console.clone();
        let own = own.clone();
        let token = token.clone();
        let node = node.clone();
        async move {
            if node.node_id == own.node_id {
                return View::Answered(own);
            }
            let Some(token) = token else { return View::NotAsked };
            if node.api_addr.is_empty() {
                return View::Unreachable("no API address in the membership".into());
            }
            member_status(&console, &node.api_addr, &token).await
        }
    });
    let views = futures::future::join_all(asks).await;
    api_answer(StatusCode::OK, cluster_json(&own, &members, &views))
}

/// What one member told the console.
enum View {
    Answered(pb::ClusterStatusResponse),
    Unreachable(String),
    /// This node has no operator token to ask other members with.
    NotAsked,
}

/// One member's `ClusterStatus`, asked at its API with the operator token, within
/// [`MEMBER_TIMEOUT`].
async fn member_status(console: &Console, api_addr: &str, token: &str) -> View {
    let channel = {
        let mut members = console.members.lock().unwrap_or_else(|e| e.into_inner());
        match members.get(api_addr) {
            Some(c) => c.clone(),
            None => {
                let endpoint = match tonic::transport::Endpoint::from_shared(format!("http://{api_addr}")) {
                    Ok(e) => e.connect_timeout(MEMBER_TIMEOUT).tcp_nodelay(true),
                    Err(e) => return View::Unreachable(format!("{api_addr} is not an address: {e}")),
                };
                let channel = endpoint.connect_lazy();
                members.insert(api_addr.to_string(), channel.clone());
                channel
            }
        }
    };
    let mut request = tonic::Request::new(pb::ClusterStatusRequest {});
    request.set_timeout(MEMBER_TIMEOUT);
    match format!("Bearer {token}").parse() {
        Ok(value) => {
            request.metadata_mut().insert("authorization", value);
        }
        Err(_) => return View::NotAsked,
    }
    let mut client = pb::admin_service_client::AdminServiceClient::new(channel);
    match tokio::time::timeout(MEMBER_TIMEOUT, client.cluster_status(request)).await {
        Ok(Ok(answer)) => View::Answered(answer.into_inner()),
        Ok(Err(status)) => {
            View::Unreachable(format!("{}: {}", kungfu_api::grpc_code_name(status.code()), status.message()))
        }
        Err(_) => View::Unreachable(format!("no answer within {} ms", MEMBER_TIMEOUT.as_millis())),
    }
}

fn raft_role(role: i32) -> String {
    pb::RaftRole::try_from(role)
        .map(|r| r.as_str_name().trim_start_matches("RAFT_ROLE_").to_ascii_lowercase())
        .unwrap_or_else(|_| role.to_string())
}

/// The view the page draws. `leader` is the one node to highlight: among the members that answer
/// and say they lead, the one of the highest term (a deposed leader cut off from the others may
/// still say it leads, in an older term).
fn cluster_json(own: &pb::ClusterStatusResponse, members: &[(pb::ClusterNode, bool)], views: &[View]) -> Json {
    let leader = views
        .iter()
        .filter_map(|v| match v {
            View::Answered(s) if s.role == pb::RaftRole::Leader as i32 => Some(s),
            _ => None,
        })
        .max_by_key(|s| s.term);
    // A follower's lag, as the leader counts it.
    let lag = |id: u64| -> Option<u64> {
        let l = leader?;
        if l.node_id == id {
            return Some(0);
        }
        l.replication.iter().find(|p| p.node_id == id).map(|p| p.lag_entries)
    };
    let nodes: Vec<Json> = members
        .iter()
        .zip(views)
        .map(|((node, voter), view)| {
            let base = json!({
                "node_id": node.node_id,
                "api_addr": node.api_addr,
                "raft_addr": node.raft_addr,
                "voter": voter,
                "lag_entries": lag(node.node_id),
            });
            let Json::Object(mut row) = base else { unreachable!("a literal object") };
            match view {
                View::Answered(s) => {
                    row.insert("reachable".into(), json!(true));
                    row.insert("role".into(), json!(raft_role(s.role)));
                    row.insert("term".into(), json!(s.term));
                    row.insert("leader_id".into(), json!(s.leader_id));
                    row.insert("last_log_index".into(), json!(s.last_log_index));
                    row.insert("committed_index".into(), json!(s.committed_index));
                    row.insert("applied_index".into(), json!(s.applied_index));
                    row.insert("snapshot_index".into(), json!(s.snapshot_index));
                    row.insert("purged_index".into(), json!(s.purged_index));
                    let fatal = (!s.fatal_error.is_empty()).then(|| s.fatal_error.clone());
                    row.insert("fatal_error".into(), json!(fatal));
                }
                View::Unreachable(why) => {
                    row.insert("reachable".into(), json!(false));
                    row.insert("role".into(), json!("unreachable"));
                    row.insert("error".into(), json!(why));
                }
                View::NotAsked => {
                    row.insert("reachable".into(), Json::Null);
                    row.insert("role".into(), json!("unknown"));
                    row.insert(
                        "error".into(),
                        json!("not asked: this node has no operator_token to ask other members with"),
                    );
                }
            }
            Json::Object(row)
        })
        .collect();
    let membership = own.membership.clone().unwrap_or_default();
    json!({
        "cluster_id": own.cluster_id,
        "answered_by": own.node_id,
        "leader": leader.map(|l| l.node_id),
        "leader_term": leader.map(|l| l.term),
        "membership": {
            "voters": membership.voters.iter().map(|n| n.node_id).collect::<Vec<_>>(),
            "learners": membership.learners.iter().map(|n| n.node_id).collect::<Vec<_>>(),
            "joint": membership.configs.len() > 1,
            "committed": membership.committed,
        },
        "nodes": nodes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(id: u64, role: pb::RaftRole, term: u64) -> pb::ClusterStatusResponse {
        pb::ClusterStatusResponse { node_id: id, role: role as i32, term, ..Default::default() }
    }

    fn member(id: u64) -> (pb::ClusterNode, bool) {
        (pb::ClusterNode { node_id: id, api_addr: format!("127.0.0.1:{}", 7400 + id), ..Default::default() }, true)
    }

    /// A live event's SSE id is where to resume after it: a turn event's cursor (dropped when it
    /// could break the frame, or absent on a part without one), a thread event's last entry.
    #[test]
    fn a_live_event_carries_its_resume_point_as_its_id() {
        let turn = event_frame(WatchFeed::Turn, &json!({ "cursor": "01ab", "reset": true, "upserted": [] }));
        assert_eq!(
            turn,
            Bytes::from(format!(
                "event: turn\nid: 01ab\ndata: {}\n\n",
                json!({ "cursor": "01ab", "reset": true, "upserted": [] })
            ))
        );
        let part = event_frame(WatchFeed::Turn, &json!({ "cursor": "", "upserted": [] }));
        assert!(!String::from_utf8_lossy(&part).contains("\nid:"), "a part without a cursor has no id");
        let forged = event_frame(WatchFeed::Turn, &json!({ "cursor": "x\nevent: end" }));
        let text = String::from_utf8_lossy(&forged);
        assert!(!text.contains("\nid:") && text.matches('\n').count() == 3, "{text:?}");
        let thread = event_frame(WatchFeed::Thread, &json!({ "entries": [{ "seq": 4 }, { "seq": 5 }] }));
        assert!(String::from_utf8_lossy(&thread).starts_with("event: thread\nid: 5\ndata: "), "{thread:?}");
        let record = event_frame(WatchFeed::Record, &json!({ "events": [{ "rev": 2 }, { "rev": 3 }] }));
        assert!(String::from_utf8_lossy(&record).starts_with("event: record\nid: 3\ndata: "), "{record:?}");
    }

    /// A deposed leader cut off from the others still says it leads, in an older term: the view
    /// highlights one leader, the one of the highest term, and shows an unreachable member so.
    #[test]
    fn the_view_highlights_one_leader_the_one_of_the_highest_term() {
        let own = status(1, pb::RaftRole::Leader, 2);
        let mut new_leader = status(2, pb::RaftRole::Leader, 3);
        new_leader.replication = vec![pb::ReplicationProgress { node_id: 1, lag_entries: 7, ..Default::default() }];
        let views = vec![
            View::Answered(own.clone()),
            View::Answered(new_leader),
            View::Unreachable("tcp connect error".into()),
        ];
        let view = cluster_json(&own, &[member(1), member(2), member(3)], &views);
        assert_eq!(view["leader"], 2, "{view}");
        assert_eq!(view["leader_term"], 3, "{view}");
        let rows = view["nodes"].as_array().expect("nodes");
        assert_eq!(rows[0]["lag_entries"], 7, "the stale leader's lag as the new leader counts it");
        assert_eq!(rows[1]["lag_entries"], 0);
        assert_eq!((rows[2]["reachable"].clone(), rows[2]["role"].clone()), (json!(false), json!("unreachable")));
        assert_eq!(rows[2]["error"], "tcp connect error");
        let none = cluster_json(&own, &[member(1)], &[View::Answered(status(1, pb::RaftRole::Follower, 4))]);
        assert_eq!(none["leader"], Json::Null, "no leader known: none highlighted");
    }
}
