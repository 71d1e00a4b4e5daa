//! The web console (issue #18) against real `kungfud` processes, over raw HTTP: the embedded page
//! and its security headers, the JSON tool endpoint (read tools only, keys as the MCP door takes
//! them, Host/Origin checks), and the cluster view's two guards. The page itself is tested in a
//! real browser by `tests/console/run.sh`.

use kungfu_system_tests::*;
use serde_json::{Value as Json, json};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const TOKEN: &str = "operator-token-for-console-tests";

/// One HTTP answer: status, headers (lower-case names) and body.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Json {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }
}

/// One HTTP/1.1 request to `addr` with `Host: <addr>` unless `headers` names another.
async fn request(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\nConnection: close\r\n\r\n", body.len()));
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect to the HTTP listener");
    s.write_all(head.as_bytes()).await.expect("write");
    s.write_all(body.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    tokio::time::timeout(BOUND, s.read_to_end(&mut out)).await.expect("the node answers").expect("read");
    let text = String::from_utf8_lossy(&out).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|c| c.parse().ok()).unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Answer { status, headers, body: body.to_string() }
}

/// `POST /ui/api/tools/{tool}` with `args`, as the agent `key` (None: no Authorization header).
async fn console_tool(http: SocketAddr, tool: &str, args: Json, key: Option<&str>) -> Answer {
    let auth = key.map(|k| format!("Bearer {k}"));
    let mut headers = vec![("Content-Type", "application/json")];
    if let Some(a) = &auth {
        headers.push(("Authorization", a.as_str()));
    }
    request(http, "POST", &format!("/ui/api/tools/{tool}"), &headers, &args.to_string()).await
}

/// The same tool called through the MCP door (revision 2026-07-28, no session): the tool result's
/// structured content.
async fn mcp_tool(http: SocketAddr, tool: &str, args: Json, key: Option<&str>) -> Json {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": tool, "arguments": args,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}
            }
        }
    })
    .to_string();
    let auth = key.map(|k| format!("Bearer {k}"));
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", tool),
    ];
    if let Some(a) = &auth {
        headers.push(("Authorization", a.as_str()));
    }
    // Every toolset (issue #31): the record tests write shared records, an opt-in set.
    let answer = request(http, "POST", "/mcp?toolsets=all", &headers, &body).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.json()["result"]["structuredContent"].clone()
}

/// One node with an HTTP listener, `extra` settings, and a registered agent (its id and client).
async fn one_node(extra: &str) -> (Cluster, SocketAddr, String, Client) {
    let cluster = Cluster::start(1, &format!("operator_token = \"{TOKEN}\"\nhttp_listen = \"127.0.0.1:0\"\n{extra}"));
    let http = mcp_addr(&cluster.nodes[&1]).await;
    let anon = Client { channel: connect(cluster.nodes[&1].api).await, key: None };
    let (id, agent) = register_when_serving(&anon, "console", || cluster.logs()).await;
    (cluster, http, id, agent)
}

/// `/ui/` is the page compiled into the binary, under a policy that forbids inline script, so
/// nothing injected into it can run; its script is served from this origin and sets no HTML.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_page_is_embedded_and_served_under_a_policy_that_forbids_inline_script() {
    let (_cluster, http, _, _) = one_node("").await;
    let page = request(http, "GET", "/ui/", &[], "").await;
    assert_eq!(page.status, 200, "{page:?}");
    assert!(page.header("content-type").is_some_and(|t| t.starts_with("text/html")), "{page:?}");
    let csp = page.header("content-security-policy").expect("a CSP header");
    for directive in ["script-src 'self'", "default-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"] {
        assert!(csp.contains(directive), "CSP {csp:?} lacks {directive}");
    }
    assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"), "{csp}");
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    assert!(page.body.contains("<script src=\"app.js\""), "the page loads its script from this origin");
    // No inline script: the one script element has a src, and there is no event-handler attribute.
    assert_eq!(page.body.matches("<script").count(), 1, "{}", page.body);
    assert!(!page.body.contains(" onload=") && !page.body.contains(" onclick="), "{}", page.body);
    assert!(page.header("set-cookie").is_none(), "the console sets no cookie");

    let script = request(http, "GET", "/ui/app.js", &[], "").await;
    assert_eq!(script.status, 200);
    assert!(script.header("content-type").is_some_and(|t| t.starts_with("text/javascript")), "{script:?}");
    assert!(script.body.contains("textContent"), "content is set as text");
    for html_sink in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("] {
        assert!(!script.body.contains(html_sink), "app.js must not use {html_sink}");
    }
    assert!(!script.body.contains("document.cookie") && script.body.contains("sessionStorage"));
    let style = request(http, "GET", "/ui/style.css", &[], "").await;
    assert!(style.status == 200 && style.header("content-type").is_some_and(|t| t.starts_with("text/css")));
    let bare = request(http, "GET", "/ui", &[], "").await;
    assert_eq!((bare.status, bare.header("location")), (308, Some("/ui/")), "{bare:?}");
}

/// The tool endpoint serves READ tools of the MCP registry, as the agent whose key the request
/// carries; a write tool is refused by name with a stable code and a next step, and nothing is
/// written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_tool_endpoint_serves_read_tools_and_refuses_a_write_tool_by_name() {
    let (_cluster, http, id, agent) = one_node("").await;
    let key = agent.key.clone().expect("a key");

    let turn = console_tool(http, "turn_get", json!({}), Some(&key)).await;
    assert_eq!(turn.status, 200, "{turn:?}");
    assert_eq!(turn.header("cache-control"), Some("no-store"));
    assert!(turn.json()["result"]["items"].is_array(), "{turn:?}");

    let write = console_tool(http, "thread_create", json!({"subject": {"text": "x"}}), Some(&key)).await;
    assert_eq!(write.status, 400, "{write:?}");
    let e = &write.json()["error"];
    assert_eq!(e["code"], "INVALID_ARGUMENT", "{e}");
    assert_eq!(e["field"], "tool", "{e}");
    assert_eq!(e["next_step"], "revise", "{e}");
    let message = e["message"].as_str().expect("message");
    assert!(message.contains("thread_create") && message.contains("read-only"), "{message}");
    // Nothing was written: the agent's working set of itself, read through the console, lists no
    // open thread.
    let me = console_tool(http, "working_set_get", json!({ "object": id }), Some(&key)).await;
    assert_eq!(me.status, 200, "{me:?}");
    assert_eq!(me.json()["result"]["agent"]["open_threads"], 0, "the refused thread_create wrote nothing: {me:?}");
    let unknown = console_tool(http, "no_such_tool", json!({}), Some(&key)).await;
    assert_eq!((unknown.status, unknown.json()["error"]["code"].as_str()), (404, Some("NOT_FOUND")));
    let not_object =
        request(http, "POST", "/ui/api/tools/turn_get", &[("Authorization", &format!("Bearer {key}"))], "[1, 2]").await;
    assert_eq!(not_object.json()["error"]["field"], "arguments", "{not_object:?}");
}

/// A missing or unknown key is refused as the MCP door refuses it: the same code, the same
/// message, for the same read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_tool_endpoint_refuses_a_missing_or_invalid_key_as_the_mcp_door_does() {
    let (_cluster, http, _, _) = one_node("").await;
    for key in [None, Some("kf_ag_not-a-real-key")] {
        let console = console_tool(http, "turn_get", json!({}), key).await;
        assert_eq!(console.status, 401, "{key:?}: {console:?}");
        let refused = &console.json()["error"];
        assert_eq!(refused["code"], "UNAUTHENTICATED", "{key:?}: {refused}");
        let door = mcp_tool(http, "turn_get", json!({}), key).await;
        assert_eq!(refused["code"], door["code"], "{key:?}");
        assert_eq!(refused["message"], door["message"], "{key:?}");
    }
}

/// DNS rebinding and cross-site requests: a Host that is not the node's, or an Origin that is not
/// the page's, is refused before any tool runs; the page's own origin is admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_api_refuses_a_foreign_host_or_origin_like_the_mcp_door() {
    let (_cluster, http, _, agent) = one_node("").await;
    let auth = format!("Bearer {}", agent.key.clone().expect("key"));
    let rebinding =
        request(http, "POST", "/ui/api/tools/turn_get", &[("Host", "evil.example"), ("Authorization", &auth)], "{}")
            .await;
    assert_eq!(rebinding.status, 403, "{rebinding:?}");
    assert!(rebinding.body.contains("Host"), "{rebinding:?}");
    let origin = "http://evil.example";
    let foreign =
        request(http, "POST", "/ui/api/tools/turn_get", &[("Origin", origin), ("Authorization", &auth)], "{}").await;
    assert_eq!(foreign.status, 403, "{foreign:?}");
    let own = format!("http://{http}");
    let same =
        request(http, "POST", "/ui/api/tools/turn_get", &[("Origin", &own), ("Authorization", &auth)], "{}").await;
    assert_eq!(same.status, 200, "{same:?}");
    let cluster = request(http, "GET", "/ui/api/cluster", &[("Host", "evil.example")], "").await;
    assert_eq!(cluster.status, 403, "{cluster:?}");
}

/// `console.cluster_view = "operator_token"`: the cluster view is refused without the token (and
/// with another), and shown with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_cluster_view_guarded_by_the_operator_token_refuses_without_it() {
    let (_cluster, http, _, _) = one_node("[console]\ncluster_view = \"operator_token\"\n").await;
    let none = request(http, "GET", "/ui/api/cluster", &[], "").await;
    assert_eq!(none.status, 401, "{none:?}");
    assert_eq!(none.json()["error"]["code"], "UNAUTHENTICATED");
    assert!(none.json()["error"]["message"].as_str().is_some_and(|m| m.contains("operator token")), "{none:?}");
    let wrong =
        request(http, "GET", "/ui/api/cluster", &[("Authorization", "Bearer not-the-operator-token")], "").await;
    assert_eq!(wrong.status, 401, "{wrong:?}");
    let auth = format!("Bearer {TOKEN}");
    let view = request(http, "GET", "/ui/api/cluster", &[("Authorization", &auth)], "").await;
    assert_eq!(view.status, 200, "{view:?}");
    assert_eq!(view.header("cache-control"), Some("no-store"));
    let view = view.json();
    assert_eq!(view["nodes"].as_array().map(Vec::len), Some(1), "{view}");
    assert_eq!(view["leader"], 1, "{view}");
}

/// The default (`cluster_view = "loopback"`): a loopback client sees every member of a
/// three-node cluster without a token, each from its own view, with exactly one leader, and a
/// killed member shown unreachable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_cluster_view_is_open_on_loopback_and_shows_every_member_and_one_leader() {
    let mut cluster = Cluster::start(3, &format!("operator_token = \"{TOKEN}\"\nhttp_listen = \"127.0.0.1:0\"\n"));
    let leader = agreed_leader(&cluster, TOKEN).await;
    let follower = *cluster.nodes.keys().find(|id| **id != leader).expect("a follower");
    let http = mcp_addr(&cluster.nodes[&follower]).await;
    let view = request(http, "GET", "/ui/api/cluster", &[], "").await;
    assert_eq!(view.status, 200, "{view:?}");
    let view = view.json();
    let nodes = view["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 3, "{view}");
    assert_eq!(view["leader"], leader, "{view}");
    assert_eq!(view["answered_by"], follower, "{view}");
    let leaders: Vec<&Json> = nodes.iter().filter(|n| n["role"] == "leader").collect();
    assert_eq!(leaders.len(), 1, "{view}");
    assert!(nodes.iter().all(|n| n["reachable"] == true && n["term"].as_u64() >= Some(1)), "{view}");
    assert_eq!(view["membership"]["voters"].as_array().map(Vec::len), Some(3), "{view}");

    // Another follower dies: the view still answers, showing it unreachable.
    let other = *cluster.nodes.keys().find(|id| **id != leader && **id != follower).expect("another follower");
    cluster.nodes.get_mut(&other).expect("node").kill();
    let start = Instant::now();
    loop {
        let view = request(http, "GET", "/ui/api/cluster", &[], "").await.json();
        let row = view["nodes"].as_array().and_then(|n| n.iter().find(|r| r["node_id"] == other).cloned());
        if row.as_ref().is_some_and(|r| r["reachable"] == false && r["role"] == "unreachable") {
            assert_eq!(view["leader"], leader, "{view}");
            break;
        }
        assert!(start.elapsed() < BOUND, "the killed node never showed unreachable: {view}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// This machine's address on its default route, when it has one that is not loopback: a client
/// connecting to it is not a loopback client. None on a machine with loopback only.
fn outside_address() -> Option<std::net::IpAddr> {
    // Connecting a UDP socket sends nothing; it only picks the route and its source address.
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// `cluster_view = "loopback"` (the default) refuses a client that is not on loopback, with a 403
/// that says how to open the view, even when it brings the operator token; the same node answers
/// a loopback client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_cluster_view_on_loopback_refuses_a_client_from_another_address() {
    let Some(outside) = outside_address() else {
        println!("SKIPPED: this machine has no address but loopback; the refusal is not exercised");
        return;
    };
    let cluster = Cluster::start(1, &format!("operator_token = \"{TOKEN}\"\nhttp_listen = \"0.0.0.0:0\"\n"));
    let bound = mcp_addr(&cluster.nodes[&1]).await;
    let port = bound.port();
    let host = format!("localhost:{port}");
    let local = SocketAddr::from(([127, 0, 0, 1], port));
    let auth = format!("Bearer {TOKEN}");
    let start = Instant::now();
    loop {
        let view = request(local, "GET", "/ui/api/cluster", &[("Host", &host)], "").await;
        if view.status == 200 && view.json()["leader"] == 1 {
            break;
        }
        assert!(start.elapsed() < BOUND, "the loopback view never showed a leader: {view:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let remote = request(
        SocketAddr::new(outside, port),
        "GET",
        "/ui/api/cluster",
        &[("Host", &host), ("Authorization", &auth)],
        "",
    )
    .await;
    assert_eq!(remote.status, 403, "{remote:?}");
    let e = &remote.json()["error"];
    assert_eq!(e["code"], "UNAUTHENTICATED", "{e}");
    assert!(e["message"].as_str().is_some_and(|m| m.contains("loopback") && m.contains("operator_token")), "{e}");
    // The agent view is not the cluster view: it is open from anywhere to a key.
    let page = request(SocketAddr::new(outside, port), "GET", "/ui/", &[("Host", &host)], "").await;
    assert_eq!(page.status, 200, "{page:?}");
}

/// `console.enabled = false`: nothing is served under `/ui/`, while the MCP door on the same
/// listener still answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_disabled_serves_no_page_and_no_api() {
    let (_cluster, http, _, agent) = one_node("[console]\nenabled = false\n").await;
    let key = agent.key.clone().expect("key");
    assert_eq!(request(http, "GET", "/ui/", &[], "").await.status, 404);
    assert_eq!(console_tool(http, "turn_get", json!({}), Some(&key)).await.status, 404);
    assert_eq!(request(http, "GET", "/ui/api/cluster", &[], "").await.status, 404);
    let door = mcp_tool(http, "turn_get", json!({}), Some(&key)).await;
    assert!(door["items"].is_array(), "the MCP door still serves: {door}");
}

// --- The live view: the watch feeds as Server-Sent Events ----------------------------------------

/// One event of a live stream.
#[derive(Debug)]
struct Event {
    event: String,
    id: Option<String>,
    data: Json,
}

/// An open live stream (`text/event-stream`, chunked): its events one at a time.
struct Live {
    socket: tokio::net::TcpStream,
    /// Bytes read and not yet decoded from the chunked framing.
    raw: Vec<u8>,
    /// Decoded body text not yet parsed into events.
    text: String,
}

/// Opens `path` as the agent `key` (None: no Authorization header), resuming from `last_event_id`.
/// A stream is `Ok`; any other answer (a refusal) is `Err` with its body.
async fn open_live(
    http: SocketAddr,
    path: &str,
    key: Option<&str>,
    last_event_id: Option<&str>,
) -> Result<Live, Answer> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut head = format!("GET {path} HTTP/1.1\r\nHost: {http}\r\nAccept: text/event-stream\r\n");
    if let Some(k) = key {
        head.push_str(&format!("Authorization: Bearer {k}\r\n"));
    }
    if let Some(id) = last_event_id {
        head.push_str(&format!("Last-Event-ID: {id}\r\n"));
    }
    head.push_str("\r\n");
    let mut socket = tokio::net::TcpStream::connect(http).await.expect("connect to the HTTP listener");
    socket.write_all(head.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    let end_of_head = loop {
        if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let mut buf = [0u8; 4096];
        let n = tokio::time::timeout(BOUND, socket.read(&mut buf)).await.expect("the node answers").expect("read");
        assert!(n > 0, "the connection closed before the answer's head: {:?}", String::from_utf8_lossy(&raw));
        raw.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&raw[..end_of_head]).to_string();
    let rest = raw[end_of_head + 4..].to_vec();
    let mut lines = head.lines();
    let status: u16 = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|c| c.parse().ok()).unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    if status != 200 {
        let length = headers.iter().find(|(n, _)| n == "content-length").and_then(|(_, v)| v.parse().ok());
        let mut body = rest;
        while length.is_some_and(|l| body.len() < l) {
            let mut buf = [0u8; 4096];
            let n = tokio::time::timeout(BOUND, socket.read(&mut buf)).await.expect("answers").expect("read");
            if n == 0 {
                break;
            }
            body.extend_from_slice(&buf[..n]);
        }
        return Err(Answer { status, headers, body: String::from_utf8_lossy(&body).to_string() });
    }
    let answer = Answer { status, headers, body: String::new() };
    assert!(answer.header("content-type").is_some_and(|t| t.starts_with("text/event-stream")), "{answer:?}");
    assert_eq!(answer.header("cache-control"), Some("no-store"), "{answer:?}");
    assert!(answer.header("content-security-policy").is_some(), "{answer:?}");
    Ok(Live { socket, raw: rest, text: String::new() })
}

impl Live {
    /// Moves every complete chunk from `raw` into `text`.
    fn decode(&mut self) {
        loop {
            let Some(eol) = self.raw.windows(2).position(|w| w == b"\r\n") else { return };
            let size_text = String::from_utf8_lossy(&self.raw[..eol]).to_string();
            let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
                .unwrap_or_else(|e| panic!("a chunk size, not {size_text:?}: {e}"));
            if self.raw.len() < eol + 2 + size + 2 {
                return;
            }
            self.text.push_str(&String::from_utf8_lossy(&self.raw[eol + 2..eol + 2 + size]));
            self.raw.drain(..eol + 2 + size + 2);
        }
    }

    /// The next event (keep-alive comments skipped), or None when nothing came within `within`.
    async fn next_within(&mut self, within: Duration) -> Option<Event> {
        use tokio::io::AsyncReadExt;
        let deadline = tokio::time::Instant::now() + within;
        loop {
            self.decode();
            while let Some(end) = self.text.find("\n\n") {
                let frame: String = self.text.drain(..end + 2).collect();
                let (mut event, mut id, mut data) = (String::from("message"), None, None);
                for line in frame.lines() {
                    if let Some(v) = line.strip_prefix("event: ") {
                        event = v.to_string();
                    } else if let Some(v) = line.strip_prefix("id: ") {
                        id = Some(v.to_string());
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data = Some(serde_json::from_str(v).unwrap_or_else(|e| panic!("data is JSON ({e}): {v}")));
                    }
                }
                if let Some(data) = data {
                    return Some(Event { event, id, data });
                }
            }
            let mut buf = [0u8; 8192];
            match tokio::time::timeout_at(deadline, self.socket.read(&mut buf)).await {
                Err(_) => return None,
                Ok(Ok(0)) => return None,
                Ok(Ok(n)) => self.raw.extend_from_slice(&buf[..n]),
                Ok(Err(e)) => panic!("reading the stream: {e}"),
            }
        }
    }

    async fn next(&mut self) -> Event {
        self.next_within(BOUND).await.expect("an event within the bound")
    }
}

/// A write through the MCP door, as `key`: its result, which must not be an error.
async fn act(http: SocketAddr, tool: &str, args: Json, key: &str) -> Json {
    let r = mcp_tool(http, tool, args, Some(key)).await;
    assert!(r.get("code").is_none(), "{tool} refused: {r}");
    r
}

/// A second agent (B) on the node, and a thread of A's that B joined as a speaker.
async fn a_thread_with(http: SocketAddr, a: &str) -> (String, String, String) {
    let registered = mcp_tool(http, "agent_register", json!({}), None).await;
    let b_key = registered["agent_key"].as_str().expect("agent_key").to_string();
    let b = registered["receipt"]["agent_registered"]["agent"].as_str().expect("agent id").to_string();
    let created = act(http, "thread_create", json!({"subject": "live", "grant": {"role": "ROLE_SPEAKER"}}), a).await;
    let thread = created["receipt"]["thread_created"]["thread"].as_str().expect("thread").to_string();
    let secret = created["grant_secret"].as_str().expect("grant_secret");
    act(http, "thread_join", json!({ "grant_secret": secret }), &b_key).await;
    (b, b_key, thread)
}

/// Posts to `thread` as `key`, asking `ask` (none: nobody); the new entry's number.
async fn post_asking(
    http: SocketAddr,
    key: &str,
    thread: &str,
    text: &str,
    ask: &[&str],
    reply_to: Option<u64>,
) -> u64 {
    let mut args = json!({ "thread": thread, "body": { "content": text }, "ask": { "agents": ask } });
    if let Some(r) = reply_to {
        args["reply_to"] = json!(r);
    }
    let posted = act(http, "thread_post", args, key).await;
    posted["receipt"]["posted"]["entry"].as_u64().expect("entry")
}

/// The entry numbers of a thread event.
fn seqs(e: &Event) -> Vec<u64> {
    e.data["entries"].as_array().expect("entries").iter().map(|x| x["seq"].as_u64().expect("seq")).collect()
}

/// Whether a turn event upserts the response `responder` owes to `thread`'s `entry`.
fn upserts_response(e: &Event, thread: &str, entry: u64) -> bool {
    e.data["upserted"].as_array().is_some_and(|items| {
        items
            .iter()
            .any(|i| i["obligation"]["response"]["thread"] == thread && i["obligation"]["response"]["entry"] == entry)
    })
}

/// The live streams are the watch feeds of the key's agent: without a key, or with a key the node
/// does not know, each is refused before anything streams, with the MCP door's code and a 401; a
/// foreign Host is refused too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_live_stream_refuses_a_missing_or_wrong_key_with_a_stable_code() {
    let (_cluster, http, _, agent) = one_node("").await;
    let key = agent.key.clone().expect("key");
    let (_, _, thread) = a_thread_with(http, &key).await;
    for path in ["/ui/api/watch/turn".to_string(), format!("/ui/api/watch/thread/{thread}")] {
        for wrong in [None, Some("kf_ag_not-a-real-key")] {
            let Err(refused) = open_live(http, &path, wrong, None).await else {
                panic!("{path} streamed for the key {wrong:?}")
            };
            assert_eq!(refused.status, 401, "{path} {wrong:?}: {refused:?}");
            assert_eq!(refused.json()["error"]["code"], "UNAUTHENTICATED", "{path} {wrong:?}: {refused:?}");
            assert_eq!(refused.header("cache-control"), Some("no-store"));
        }
    }
    let Err(bad_resume) = open_live(http, &format!("/ui/api/watch/thread/{thread}"), Some(&key), Some("x")).await
    else {
        panic!("a thread stream opened from a resume point that is no entry number")
    };
    assert_eq!((bad_resume.status, bad_resume.json()["error"]["field"].as_str()), (400, Some("Last-Event-ID")));
    let auth = format!("Bearer {key}");
    let rebinding =
        request(http, "GET", "/ui/api/watch/turn", &[("Host", "evil.example"), ("Authorization", &auth)], "").await;
    assert_eq!(rebinding.status, 403, "{rebinding:?}");
}

/// The turn stream sends the whole turn first, then an event as soon as a write changes it: a
/// response owed to a post that asks the agent, then that response gone after the reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_live_turn_stream_sends_an_event_after_a_write() {
    let (_cluster, http, _, agent) = one_node("").await;
    let a_key = agent.key.clone().expect("key");
    let (b, b_key, thread) = a_thread_with(http, &a_key).await;
    let mut live = open_live(http, "/ui/api/watch/turn", Some(&b_key), None).await.expect("B's turn streams");
    let first = live.next().await;
    assert_eq!(first.event, "turn", "{first:?}");
    assert_eq!(first.data["reset"], true, "the first event is the whole turn: {first:?}");
    assert!(first.id.as_deref().is_some_and(|c| !c.is_empty()), "a resume cursor: {first:?}");

    let entry = post_asking(http, &a_key, &thread, "please answer", &[&b], None).await;
    let owed = live.next().await;
    assert!(upserts_response(&owed, &thread, entry), "the owed response arrives: {owed:?}");
    assert_eq!(owed.id.as_deref(), owed.data["cursor"].as_str(), "the SSE id is the event's cursor: {owed:?}");

    post_asking(http, &b_key, &thread, "done", &[], Some(entry)).await;
    let gone = live.next().await;
    let removed = gone.data["removed"].as_array().expect("removed");
    assert!(
        removed.iter().any(|r| r["response"]["entry"] == entry && r["response"]["responder"] == b),
        "the reply removes it: {gone:?}"
    );
}

/// Reconnecting with the last event id continues exactly where the stream stopped: a thread
/// stream gives the entries posted in between and none twice; a turn stream resumed on an
/// unchanged turn resends nothing, and after a change sends the turn as it now is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_live_streams_resume_from_the_last_event_id_without_gap_or_duplicate() {
    let (_cluster, http, _, agent) = one_node("").await;
    let a_key = agent.key.clone().expect("key");
    let (b, b_key, thread) = a_thread_with(http, &a_key).await;
    let path = format!("/ui/api/watch/thread/{thread}");

    // The backlog, then a live entry.
    let mut first = vec![post_asking(http, &a_key, &thread, "one", &[], None).await];
    let mut live = open_live(http, &path, Some(&b_key), None).await.expect("B's thread streams");
    let mut seen = Vec::new();
    while !seen.contains(&first[0]) {
        seen.extend(seqs(&live.next().await));
    }
    first.push(post_asking(http, &a_key, &thread, "two", &[], None).await);
    let event = live.next().await;
    assert_eq!(seqs(&event), vec![first[1]], "{event:?}");
    let last = event.id.clone().expect("a thread event's id");
    assert_eq!(last, first[1].to_string());
    drop(live);

    // Missed while disconnected: exactly these come back, in order, after `last`.
    let missed = [
        post_asking(http, &a_key, &thread, "three", &[], None).await,
        post_asking(http, &a_key, &thread, "four", &[], None).await,
    ];
    let mut resumed = open_live(http, &path, Some(&b_key), Some(&last)).await.expect("resumed");
    let mut got = Vec::new();
    while got.len() < missed.len() {
        got.extend(seqs(&resumed.next().await));
    }
    assert_eq!(got, missed.to_vec(), "no gap, no duplicate");
    assert!(resumed.next_within(Duration::from_millis(500)).await.is_none(), "nothing more");

    // The turn: resumed on the same turn, an empty confirmation with a new cursor.
    let entry = post_asking(http, &a_key, &thread, "answer me", &[&b], None).await;
    let mut turn = open_live(http, "/ui/api/watch/turn", Some(&b_key), None).await.expect("turn");
    let mut whole = turn.next().await;
    while !upserts_response(&whole, &thread, entry) {
        whole = turn.next().await;
    }
    let cursor = whole.id.clone().expect("cursor");
    drop(turn);
    let mut again = open_live(http, "/ui/api/watch/turn", Some(&b_key), Some(&cursor)).await.expect("resumed turn");
    let confirm = again.next().await;
    assert_eq!(confirm.data["reset"], false, "{confirm:?}");
    assert_eq!(confirm.data["upserted"], json!([]), "nothing resent: {confirm:?}");
    assert_eq!(confirm.data["removed"], json!([]), "{confirm:?}");
    let cursor = confirm.id.clone().expect("a new cursor");
    drop(again);
    // Changed while disconnected: the resumed stream brings the turn as it is now.
    post_asking(http, &b_key, &thread, "done", &[], Some(entry)).await;
    let mut after = open_live(http, "/ui/api/watch/turn", Some(&b_key), Some(&cursor)).await.expect("resumed turn");
    let now = after.next().await;
    assert_eq!(now.data["reset"], true, "{now:?}");
    assert!(!upserts_response(&now, &thread, entry), "the answered response is gone: {now:?}");
}

/// The labels of the record tests' inline text: tainted, shared with the thread's members.
fn fleet_text(text: &str) -> Json {
    json!({ "content": { "content": text, "labels": { "taint": "TAINT_TAINTED", "scope": "SCOPE_FLEET" } } })
}

/// A shared record in `thread`, created by `key` (rev 1): its id.
async fn a_record(http: SocketAddr, key: &str, thread: &str) -> String {
    let args = json!({
        "thread": thread, "title": "Plan", "state": "open", "body": fleet_text("draft 1"),
        "scope": "SCOPE_FLEET", "editors": "RECORD_EDITORS_SPEAKERS", "message": fleet_text("record: Plan"),
    });
    let created = act(http, "record_create", args, key).await;
    created["receipt"]["result"]["record_created"]["record"]
        .as_str()
        .or_else(|| created["receipt"]["record_created"]["record"].as_str())
        .unwrap_or_else(|| panic!("a record id: {created}"))
        .to_string()
}

/// Appends a note to `record` on `base_rev` as `key`.
async fn a_note(http: SocketAddr, key: &str, record: &str, base_rev: u32, id: &str) {
    let args = json!({
        "record": record, "base_rev": base_rev,
        "ops": [{ "append_note": { "note_id": id, "kind": "NOTE_KIND_COMMENT", "body": fleet_text(id) } }],
        "message": fleet_text(&format!("patch {record}")),
    });
    act(http, "record_patch", args, key).await;
}

/// The revs of a record event.
fn revs(e: &Event) -> Vec<u64> {
    e.data["events"].as_array().expect("events").iter().map(|x| x["rev"].as_u64().expect("rev")).collect()
}

/// A shared record's stream (WatchRecord): refused without a key, with a wrong key, and for an
/// agent who is no member of the record's thread, each with its stable code; for a member, the
/// backlog from the creation, then each accepted patch as it is applied, its SSE id its rev; and
/// reconnecting with that id brings exactly the revs missed meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_live_record_stream_follows_patches_and_resumes_from_the_last_rev() {
    let (_cluster, http, _, agent) = one_node("").await;
    let a_key = agent.key.clone().expect("key");
    let (_, b_key, thread) = a_thread_with(http, &a_key).await;
    let record = a_record(http, &a_key, &thread).await;
    let path = format!("/ui/api/watch/record/{record}");

    for wrong in [None, Some("kf_ag_not-a-real-key")] {
        let Err(refused) = open_live(http, &path, wrong, None).await else { panic!("streamed for the key {wrong:?}") };
        assert_eq!(refused.status, 401, "{wrong:?}: {refused:?}");
        assert_eq!(refused.json()["error"]["code"], "UNAUTHENTICATED", "{wrong:?}: {refused:?}");
    }
    let outsider = mcp_tool(http, "agent_register", json!({}), None).await;
    let c_key = outsider["agent_key"].as_str().expect("agent_key");
    // A non-member is refused before anything streams, as the thread's feed refuses one.
    let Err(refused) = open_live(http, &path, Some(c_key), None).await else {
        panic!("a record's stream opened for an agent who is no member of its thread")
    };
    assert_eq!((refused.status, refused.json()["error"]["code"].as_str()), (404, Some("NOT_FOUND")), "{refused:?}");
    let Err(bad_resume) = open_live(http, &path, Some(&b_key), Some("x")).await else {
        panic!("a record stream opened from a resume point that is no rev")
    };
    assert_eq!((bad_resume.status, bad_resume.json()["error"]["field"].as_str()), (400, Some("Last-Event-ID")));

    // The backlog (the creation), then a patch as it is applied.
    let mut live = open_live(http, &path, Some(&b_key), None).await.expect("B's record streams");
    let backlog = live.next().await;
    assert_eq!((backlog.event.as_str(), revs(&backlog)), ("record", vec![1]), "{backlog:?}");
    assert_eq!(backlog.id.as_deref(), Some("1"), "{backlog:?}");
    a_note(http, &a_key, &record, 1, "n1").await;
    let patched = live.next().await;
    assert_eq!(revs(&patched), vec![2], "{patched:?}");
    assert_eq!(patched.id.as_deref(), Some("2"), "the SSE id is the last rev: {patched:?}");
    assert_eq!(patched.data["events"][0]["base_rev"], 1, "{patched:?}");
    drop(live);

    // Missed while disconnected: exactly these come back, in order, after rev 2.
    a_note(http, &a_key, &record, 2, "n2").await;
    a_note(http, &a_key, &record, 3, "n3").await;
    let mut resumed = open_live(http, &path, Some(&b_key), Some("2")).await.expect("resumed");
    let mut got = Vec::new();
    while got.len() < 2 {
        got.extend(revs(&resumed.next().await));
    }
    assert_eq!(got, vec![3, 4], "no gap, no duplicate");
    assert!(resumed.next_within(Duration::from_millis(500)).await.is_none(), "nothing more");
}

/// An MCP call is one gRPC call into the node's own API service stack, in the node's process, with
/// no TCP connection to the API port (issue #32). The node lets one connection in per peer address
/// and the test's own gRPC client holds it, so a door that dialled the API over loopback would have
/// its connection closed on accept; through the in-process door an agent registers, creates a
/// thread and posts, and the API port still refuses a second connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_post_makes_no_tcp_connection_inside_the_node() {
    use tokio::io::AsyncReadExt;
    let (cluster, http, _, _grpc_client_holding_the_one_connection) =
        one_node("[api]\nmax_connections_per_peer = 1\n").await;
    let registered = mcp_tool(http, "agent_register", json!({}), None).await;
    let key =
        registered["agent_key"].as_str().unwrap_or_else(|| panic!("{registered}\n{}", cluster.logs())).to_string();
    let created = act(http, "thread_create", json!({"subject": "in process"}), &key).await;
    let thread = created["receipt"]["thread_created"]["thread"].as_str().expect("thread").to_string();
    let entry = post_asking(http, &key, &thread, "no socket between", &[], None).await;
    assert_eq!(entry, 1, "the post went through the door");

    // The bound is in force: a second connection to the API port is closed on accept.
    let mut second = tokio::net::TcpStream::connect(cluster.nodes[&1].api).await.expect("connect");
    let mut buf = [0u8; 256];
    let closed = loop {
        match tokio::time::timeout(Duration::from_secs(5), second.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break true,
            // The server's HTTP/2 preface, were it let in; read on.
            Ok(Ok(_)) => continue,
            Err(_) => break false,
        }
    };
    assert!(closed, "a second connection from the test's address was let in: the bound is not what this test needs");
}
