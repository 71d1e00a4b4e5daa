//! `wake` (issue #35, docs/wake.md "Webhooks"): agents in shared threads ask each other to respond,
//! and reply or handle what they owe, so their turns keep changing; each agent has a wake target
//! pointing at a webhook receiver the harness runs, and the cluster's leader POSTs a signed event
//! to it whenever the agent's turn changes. The receiver records every POST as a `deliver` op (the
//! checker, `crate::checker::wake`, reads the history schema there) and answers 500 or 503 during
//! short seeded outages, so deliveries are retried, also across the nemesis's leader changes. No
//! obligation has a deadline (no assignment windows): after the load the turns stop changing, and
//! the final read compares each agent's final turn digest with the last event its target got.

use super::common::record_final_read;
use super::{Env, Proc, Workload, register};
use crate::checker::Workload as Kind;
use crate::checker::wake::DELIVER;
use crate::client;
use crate::history::{FINAL_READ, OpType};
use crate::recorder::{Completion, Recorder};
use anyhow::{Context, Result, anyhow, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use futures::FutureExt;
use futures::future::BoxFuture;
use hmac::{Hmac, Mac};
use kungfu_client::{Client, Post, pb};
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use sha2::Sha256;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// What every node needs for the test: plain http to the harness's private address (docs/wake.md,
/// "Where a target may point": `http` and private destinations are for tests and private
/// networks), and a short coalescing window so a 30 s run has many events.
pub const NODE_SETTINGS: &str = "[wake]\nschemes = [\"http\"]\nallow_private = true\ncoalesce_ms = 50\n";

/// The history process of the receiver: far above any client process (a client's id grows by the
/// concurrency at each `info`), so it never shares one.
pub const RECEIVER_PROCESS: u64 = 1_000_000_000;

const THREADS: usize = 2;
/// Standard Webhooks' secret prefix (`whsec_` + base64 of the key bytes).
const SECRET_PREFIX: &str = "whsec_";
/// After the final heal, the leader resends what was outstanding and queues what changed; the
/// run's digests (taken after `quiesce`) must not race a stream of `RecordWake` writes. A retry
/// after a few failures in a row may wait up to 2^k s (full jitter), and outages end before the
/// load does, so 10 s leaves most runs drained.
const QUIESCE: Duration = Duration::from_secs(10);
/// How long the final reads wait, at most, for every target's last event to carry its agent's
/// final turn. A run that loses the last change (the `wake-drop` canary) waits all of it.
const DRAIN: Duration = Duration::from_secs(30);
/// The largest request body the receiver reads (an event is a few hundred bytes).
const MAX_BODY: usize = 1 << 20;

/// Agents, their targets, and the receiver.
#[derive(Debug, Default)]
pub struct Wake {
    threads: Vec<String>,
    /// (agent id, key), one per process slot.
    agents: Vec<(String, String)>,
    /// Each agent's wake target, in the order of `agents`.
    targets: Vec<String>,
    /// Each agent's last turn read (what it chooses its next action from).
    last_turn: Mutex<BTreeMap<String, Vec<pb::TurnItem>>>,
    receiver: Option<Arc<Receiver>>,
    /// The receiver's accept loop (aborting it closes every connection).
    server: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Wake {
    /// A run that ends early (an error before its final reads) leaves no receiver listening.
    fn drop(&mut self) {
        if let Some(server) = lock(&self.server).take() {
            server.abort();
        }
    }
}

impl Wake {
    fn agent_of(&self, p: &Proc) -> usize {
        (p.id % p.stride) as usize % self.agents.len()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Workload for Wake {
    fn kind(&self) -> Kind {
        Kind::Wake
    }

    fn node_settings(&self) -> String {
        NODE_SETTINGS.to_string()
    }

    fn setup<'a>(&'a mut self, env: &'a Env, processes: usize) -> BoxFuture<'a, Result<()>> {
        async move {
            let (_, lead) = register(env).await?;
            for _ in 0..processes.max(2) {
                self.agents.push(register(env).await?);
            }
            for _ in 0..THREADS {
                let (thread, secret) = super::open_thread(env, &lead, "wake").await?;
                for (_, key) in &self.agents {
                    env.setup
                        .with_key(key.clone())
                        .join(pb::JoinRequest { grant_secret: secret.clone(), ..Default::default() }, None)
                        .await
                        .context("joining a wake thread")?;
                }
                self.threads.push(thread);
            }
            // The receiver listens where the nodes reach the harness (the bridge's address in
            // netns mode), on a port of its own.
            let listener = TcpListener::bind(SocketAddr::new(env.harness_ip, 0))
                .await
                .with_context(|| format!("binding the webhook receiver on {}", env.harness_ip))?;
            let addr = listener.local_addr()?;
            let outages = outages(env.seed, env.time_limit);
            let receiver = Arc::new(Receiver::new(env.rec.clone(), outages.clone()));
            *lock(&self.server) = Some(tokio::spawn(receiver.clone().accept(listener)));
            for (i, (agent, key)) in self.agents.iter().enumerate() {
                let path = format!("/hook/{i}");
                let (target, secret) = set_target(env, key, &format!("http://{addr}{path}")).await?;
                lock(&receiver.hooks).insert(path, Hook { target: target.clone(), agent: agent.clone(), secret });
                self.targets.push(target);
            }
            env.rec.nemesis(
                "receiver-outages",
                json!({
                    "receiver": addr.to_string(),
                    "windows": outages
                        .iter()
                        .map(|o| json!({"from_ms": o.from.as_millis() as u64, "to_ms": o.to.as_millis() as u64, "status": o.status}))
                        .collect::<Vec<_>>(),
                }),
            );
            // The processes start when setup returns: the outage schedule counts from here.
            *lock(&receiver.load_start) = Some(Instant::now());
            self.receiver = Some(receiver);
            Ok(())
        }
        .boxed()
    }

    fn step<'a>(&'a self, env: &'a Env, p: &'a mut Proc) -> BoxFuture<'a, ()> {
        async move {
            let slot = self.agent_of(p);
            let (me, key) = self.agents[slot].clone();
            if p.client.is_none() {
                match client::connect(p.endpoint(env), Some(key)).await {
                    Ok(c) => p.client = Some(c),
                    Err(_) => return,
                }
            }
            let Some(c) = p.client.clone() else { return };
            // Read the turn first, as an agent woken by its webhook would.
            if p.rng.random_bool(0.3) {
                return read_turn(env, p, &c, &me, &self.last_turn).await;
            }
            let owed = lock(&self.last_turn).get(&me).cloned().unwrap_or_default();
            let others: Vec<String> = self.agents.iter().map(|(a, _)| a.clone()).filter(|a| *a != me).collect();
            // Discharge something owed more often than not, and nearly always once the turn is
            // long, so turns stay within one read's page (100) in a 300 s run and keep moving both
            // ways (an obligation arising or ending is a change either way).
            let discharge_p = if owed.len() > 10 { 0.9 } else { 0.6 };
            if let (true, Some(item)) = (p.rng.random_bool(discharge_p), owed.choose(&mut p.rng).cloned()) {
                // Not chosen again from this read: a second attempt would only be refused.
                if let Some(items) = lock(&self.last_turn).get_mut(&me) {
                    items.retain(|i| *i != item);
                }
                discharge(env, p, &c, &others, item).await;
            } else {
                let thread = self.threads.choose(&mut p.rng).cloned().unwrap_or_default();
                let n = p.rng.random_range(1..=2).min(others.len());
                let ask: Vec<String> = others.choose_multiple(&mut p.rng, n).cloned().collect();
                let post = Post::text(&thread, "please respond").ask(ask.clone());
                write(env, p, "post", json!({"thread": thread, "ask": ask}), c.post(post, None).await);
            }
        }
        .boxed()
    }

    fn quiesce(&self) -> Duration {
        QUIESCE
    }

    fn final_reads<'a>(&'a self, env: &'a Env, next_process: u64) -> BoxFuture<'a, Result<()>> {
        async move {
            let Some(receiver) = &self.receiver else { return Ok(()) };
            let endpoints: Vec<(u64, String)> = env.endpoints.iter().map(|(id, e)| (*id, e.clone())).collect();
            let first_node = endpoints.first().map(|(id, _)| *id).unwrap_or(0);
            for (i, (agent, _)) in self.agents.iter().enumerate() {
                let target = self.targets.get(i).cloned().unwrap_or_default();
                env.rec.invoke(
                    next_process + i as u64,
                    FINAL_READ,
                    json!({"agent": agent, "target": target}),
                    first_node,
                    None,
                );
            }
            // Each agent's final turn, read until every target's last acknowledged event carries
            // it or the bound passes (the checker judges what arrived); read again each time, so
            // a turn that still moved is not waited on in its old state.
            let start = Instant::now();
            let turns = loop {
                let mut turns = Vec::with_capacity(self.agents.len());
                for (_, key) in &self.agents {
                    turns.push(watched_turn(&endpoints, key).await);
                }
                let acked = lock(&receiver.acked).clone();
                let drained = turns.iter().zip(&self.targets).all(|(t, target)| match t {
                    Ok(t) => match acked.get(target) {
                        Some((_, digest)) => *digest == t.digest(),
                        None => t.items == 0,
                    },
                    Err(_) => true,
                });
                if drained || start.elapsed() > DRAIN {
                    break turns;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            };
            let waited_ms = start.elapsed().as_millis() as u64;
            if let Some(server) = lock(&self.server).take() {
                server.abort();
            }
            for (i, ((agent, _), turn)) in self.agents.iter().zip(turns).enumerate() {
                let target = self.targets.get(i).cloned().unwrap_or_default();
                let node = turn.as_ref().map_or(first_node, |t| t.node);
                let read = turn.map(|t| {
                    json!({
                        "agent": agent,
                        "target": target,
                        "digest": t.digest(),
                        "cursor": t.cursor,
                        "applied_index": t.applied_index,
                        "items": t.items,
                        "waited_ms": waited_ms,
                    })
                });
                record_final_read(env, next_process + i as u64, node, read);
            }
            Ok(())
        }
        .boxed()
    }
}

/// Sets a wake target at `url` for the agent of `key`; returns the target and its secret's bytes.
async fn set_target(env: &Env, key: &str, url: &str) -> Result<(String, Vec<u8>)> {
    let c = env.setup.with_key(key.to_string());
    for _ in 0..3 {
        let w = c
            .set_wake_target(pb::SetWakeTargetRequest { url: url.to_string(), ..Default::default() }, None)
            .await
            .context("setting a wake target")?;
        let target = match w.value.receipt.and_then(|r| r.result) {
            Some(pb::receipt::Result::WakeTargetSet(t)) => t.target,
            other => bail!("setting a wake target answered {other:?}"),
        };
        if let Some(text) = w.value.secret.strip_prefix(SECRET_PREFIX) {
            return Ok((target, BASE64.decode(text).context("the target's secret is not base64")?));
        }
        // The answer carrying the secret was lost to a retry (a replay has none, L3): the receiver
        // could not verify that target's signatures. Remove it and set another.
        c.remove_wake_target(pb::RemoveWakeTargetRequest { target, ..Default::default() }, None)
            .await
            .context("removing a wake target whose secret was lost")?;
    }
    bail!("the wake target's secret was lost to retried answers three times; run again")
}

/// Records a write's outcome (the checker judges deliveries; the writes show what changed turns).
fn write<T>(env: &Env, p: &mut Proc, f: &str, value: Value, r: Result<T, kungfu_client::Error>) {
    env.rec.invoke(p.id, f, value.clone(), p.node, None);
    p.finish_write(env, f, None, r, |_| Completion { value, ..Completion::default() });
}

/// Reads the whole turn in one page; a turn longer than a page is not kept.
async fn read_turn(env: &Env, p: &mut Proc, c: &Client, me: &str, last: &Mutex<BTreeMap<String, Vec<pb::TurnItem>>>) {
    env.rec.invoke(p.id, "turn", json!({ "agent": me }), p.node, None);
    let r = c.get_turn(pb::GetTurnRequest { cursor: String::new(), page_size: 100 }).await;
    let r = match r {
        Ok(page) if !page.next_cursor.is_empty() => {
            Err(kungfu_client::Error::Transport("TRUNCATED: more than one page".into()))
        }
        other => other,
    };
    p.finish_read(env, "turn", r, |page| {
        lock(last).insert(me.to_string(), page.items.clone());
        json!({ "agent": me, "as_of_seq": page.as_of_seq, "items": page.items.len() })
    });
}

/// Acts on one owed response of the last turn read: a reply (sometimes asking someone else in
/// turn), or a handle.
async fn discharge(env: &Env, p: &mut Proc, c: &Client, others: &[String], item: pb::TurnItem) {
    use pb::obligation_ref::Kind as O;
    let Some(O::Response(r)) = item.obligation.and_then(|o| o.kind) else { return };
    if p.rng.random_bool(0.5) {
        let ask: Vec<String> =
            if p.rng.random_bool(0.3) { others.choose(&mut p.rng).cloned().into_iter().collect() } else { Vec::new() };
        let post = Post::text(&r.thread, "reply").reply_to(r.entry).ask(ask.clone());
        write(env, p, "reply", json!({"thread": r.thread, "entry": r.entry, "ask": ask}), c.post(post, None).await);
    } else {
        let h = pb::HandleRequest {
            thread: r.thread.clone(),
            entry: r.entry,
            note: kungfu_client::text("handled"),
            ..Default::default()
        };
        write(env, p, "handle", json!({"thread": r.thread, "entry": r.entry}), c.handle(h, None).await);
    }
}

/// An agent's turn as its watch describes it: the first change set of a `WatchTurn` opened with no
/// cursor (the whole turn).
#[derive(Debug)]
struct WatchedTurn {
    node: u64,
    /// Hex of [version (and group), applied index u64 BE, digest 32 bytes].
    cursor: String,
    applied_index: u64,
    items: usize,
}

impl WatchedTurn {
    /// The turn's digest: the cursor's last 32 bytes, what every event of the turn carries.
    fn digest(&self) -> String {
        self.cursor.get(self.cursor.len().saturating_sub(64)..).unwrap_or_default().to_string()
    }
}

/// Reads an agent's turn through any node (followers forward the watch to the leader), trying each
/// in turn for a bounded time.
async fn watched_turn(endpoints: &[(u64, String)], key: &str) -> Result<WatchedTurn> {
    let start = Instant::now();
    let mut last = anyhow!("no node to read from");
    while start.elapsed() < Duration::from_secs(20) {
        for (node, endpoint) in endpoints {
            match tokio::time::timeout(Duration::from_secs(5), first_change_set(endpoint, key)).await {
                Ok(Ok((cursor, applied_index, items))) => {
                    return Ok(WatchedTurn { node: *node, cursor, applied_index, items });
                }
                Ok(Err(e)) => last = e.context(format!("watching the turn on node {node}")),
                Err(_) => last = anyhow!("node {node}: no change set within 5 s"),
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err(last)
}

/// The cursor, applied index and item count of the first change set of a fresh turn watch.
async fn first_change_set(endpoint: &str, key: &str) -> Result<(String, u64, usize)> {
    let c = client::connect(endpoint, Some(key.to_string())).await?;
    let mut stream = c.watch_turn("").await?;
    let mut items = 0;
    while let Some(e) = stream.message().await? {
        if e.reset {
            items = 0;
        }
        items += e.upserted.len();
        if !e.cursor.is_empty() {
            return Ok((e.cursor, e.applied_index, items));
        }
    }
    bail!("the watch ended before its first change set")
}

/// One window in which the receiver is down: every POST is answered `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outage {
    /// From and to, after the load began.
    pub from: Duration,
    pub to: Duration,
    pub status: u16,
}

/// The receiver's outages, seeded by the run's seed: 0.3–1.5 s down every 1.5–5 s, about a fifth
/// of the time, so deliveries are retried (full-jitter backoff from 1 s) and some events are still
/// outstanding when the nemesis kills the leader. The last one ends before the load does, so the
/// drain after the heal meets a receiver that answers.
pub fn outages(seed: u64, time_limit: Duration) -> Vec<Outage> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x7761_6b65_646f_776e);
    let mut out = Vec::new();
    let mut t = Duration::from_millis(rng.random_range(1000..3000));
    loop {
        let to = t + Duration::from_millis(rng.random_range(300..1500));
        if to >= time_limit {
            return out;
        }
        let status = if rng.random_bool(0.5) { 500 } else { 503 };
        out.push(Outage { from: t, to, status });
        t = to + Duration::from_millis(rng.random_range(1500..5000));
    }
}

/// The Standard Webhooks signature of a delivery: `v1,` + base64(HMAC-SHA256(secret,
/// "{id}.{timestamp}.{body}")).
pub fn sign(secret: &[u8], id: &str, timestamp: &str, body: &[u8]) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret) else { return String::new() };
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", BASE64.encode(mac.finalize().into_bytes()))
}

/// Whether a `webhook-signature` header (space-separated `v1,<sig>` entries) holds the signature.
pub fn verify(secret: &[u8], id: &str, timestamp: &str, body: &[u8], header: &str) -> bool {
    let want = sign(secret, id, timestamp, body);
    !want.is_empty() && header.split(' ').any(|s| s == want)
}

/// One target as the receiver knows it; its URL's path names it.
#[derive(Debug, Clone)]
struct Hook {
    target: String,
    agent: String,
    secret: Vec<u8>,
}

/// The webhook receiver: HTTP/1.1 with keep-alive (the leader's sender pools its connections),
/// every POST recorded in the history as it arrives.
#[derive(Debug)]
struct Receiver {
    rec: Recorder,
    /// By URL path.
    hooks: Mutex<BTreeMap<String, Hook>>,
    outages: Vec<Outage>,
    /// When the load began (the outages count from it); none during setup.
    load_start: Mutex<Option<Instant>>,
    /// Per target: the highest sequence number answered with a 2xx, and its digest.
    acked: Mutex<BTreeMap<String, (u64, String)>>,
    /// Holds one delivery's invoke and ok together: the receiver's process has one op at a time,
    /// whichever connection the POST came on.
    record: Mutex<()>,
}

impl Receiver {
    fn new(rec: Recorder, outages: Vec<Outage>) -> Receiver {
        Receiver {
            rec,
            hooks: Mutex::default(),
            outages,
            load_start: Mutex::default(),
            acked: Mutex::default(),
            record: Mutex::default(),
        }
    }

    /// Accepts connections until aborted (which drops, and so closes, every connection).
    async fn accept(self: Arc<Self>, listener: TcpListener) {
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((socket, peer)) => {
                        connections.spawn(self.clone().serve(socket, peer));
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
    }

    /// Requests one after another on one connection.
    async fn serve(self: Arc<Self>, socket: TcpStream, peer: SocketAddr) {
        let node = node_of(peer.ip());
        let mut conn = BufReader::new(socket);
        while let Some(request) = read_request(&mut conn).await {
            let status = if request.method == "POST" { self.answer(&request, node) } else { 405 };
            let close = request.headers.get("connection").is_some_and(|c| c.eq_ignore_ascii_case("close"));
            let reply = format!(
                "HTTP/1.1 {status} {}\r\ncontent-length: 0\r\n{}\r\n",
                reason(status),
                if close { "connection: close\r\n" } else { "" }
            );
            if conn.get_mut().write_all(reply.as_bytes()).await.is_err() || close {
                return;
            }
        }
    }

    /// The status of a POST now: an outage's, else 200.
    fn status_now(&self) -> u16 {
        let Some(start) = *lock(&self.load_start) else { return 200 };
        let t = start.elapsed();
        self.outages.iter().find(|o| o.from <= t && t < o.to).map_or(200, |o| o.status)
    }

    /// Records one delivery and decides its answer.
    fn answer(&self, r: &Request, node: u64) -> u16 {
        let hook = lock(&self.hooks).get(&r.path).cloned();
        let header = |name: &str| r.headers.get(name).cloned().unwrap_or_default();
        let (id, timestamp) = (header("webhook-id"), header("webhook-timestamp"));
        let signature_ok =
            hook.as_ref().is_some_and(|h| verify(&h.secret, &id, &timestamp, &r.body, &header("webhook-signature")));
        let body: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        let status = if hook.is_some() { self.status_now() } else { 404 };
        let mut value = json!({
            "hook": hook.as_ref().map(|h| h.target.clone()),
            "owner": hook.as_ref().map(|h| h.agent.clone()),
            "id": id,
            "timestamp": timestamp,
            "signature_ok": signature_ok,
            "status": status,
            "body": body,
        });
        if body.is_null() {
            value["raw"] = json!(String::from_utf8_lossy(&r.body).chars().take(1000).collect::<String>());
        }
        {
            let _one = lock(&self.record);
            self.rec.invoke(RECEIVER_PROCESS, DELIVER, json!({"hook": value["hook"], "id": id}), node, None);
            self.rec.complete(
                RECEIVER_PROCESS,
                OpType::Ok,
                DELIVER,
                node,
                None,
                Completion { value, ..Completion::default() },
            );
        }
        if let (Some(h), true) = (hook, (200..300).contains(&status)) {
            let seq = body.get("sequence").and_then(Value::as_u64).unwrap_or(0);
            let digest = body.get("digest").and_then(Value::as_str).unwrap_or_default().to_string();
            let mut acked = lock(&self.acked);
            let last = acked.entry(h.target).or_insert((0, String::new()));
            if seq >= last.0 {
                *last = (seq, digest);
            }
        }
        status
    }
}

/// The node a connection came from: 10.88.<slot>.<id> in netns mode; 0 (unknown) on loopback.
fn node_of(ip: IpAddr) -> u64 {
    match ip {
        IpAddr::V4(v4) if v4.octets()[..2] == [10, 88] => u64::from(v4.octets()[3]),
        _ => 0,
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// One HTTP/1.1 request.
#[derive(Debug)]
struct Request {
    method: String,
    path: String,
    /// Lowercase names.
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

/// Reads the next request of a connection; none when it closed or spoke something else.
async fn read_request<R: AsyncBufRead + Unpin>(conn: &mut R) -> Option<Request> {
    let mut line = String::new();
    if conn.read_line(&mut line).await.ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_string(), parts.next()?.to_string());
    let mut headers = BTreeMap::new();
    loop {
        line.clear();
        if conn.read_line(&mut line).await.ok()? == 0 || headers.len() > 100 {
            return None;
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':')?;
        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
    }
    let chunked = headers.get("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        read_chunked(conn).await?
    } else {
        let len: usize = headers.get("content-length").map_or(Some(0), |v| v.parse().ok())?;
        if len > MAX_BODY {
            return None;
        }
        let mut body = vec![0; len];
        conn.read_exact(&mut body).await.ok()?;
        body
    };
    Some(Request { method, path, headers, body })
}

/// A chunked body (hyper sends a known length, so this is only for completeness).
async fn read_chunked<R: AsyncBufRead + Unpin>(conn: &mut R) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        conn.read_line(&mut line).await.ok()?;
        let size = usize::from_str_radix(line.trim().split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            // Trailers, up to the empty line.
            loop {
                line.clear();
                if conn.read_line(&mut line).await.ok()? == 0 || line.trim_end().is_empty() {
                    return Some(body);
                }
            }
        }
        if body.len() + size > MAX_BODY {
            return None;
        }
        let start = body.len();
        body.resize(start + size, 0);
        conn.read_exact(&mut body[start..]).await.ok()?;
        line.clear();
        conn.read_line(&mut line).await.ok()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(text: &str) -> Vec<u8> {
        BASE64.decode(text.strip_prefix(SECRET_PREFIX).expect("the whsec_ prefix")).expect("base64")
    }

    #[test]
    fn signatures_match_the_published_standard_webhooks_vectors() {
        // The vectors the server's own signing is tested against (kungfu-server src/wake/send.rs).
        let s = secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
        let body = br#"{"test": 2432232314}"#;
        let sig = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
        assert_eq!(sign(&s, "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", body), sig);
        assert!(verify(&s, "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", body, &format!("v1,bm90IGl0 {sig}")));
        assert!(!verify(&s, "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265331", body, sig), "the timestamp is signed");
        assert!(!verify(
            &secret("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"),
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            "1614265330",
            body,
            sig
        ));
    }

    #[test]
    fn outages_are_seeded_short_and_end_before_the_load() {
        let limit = Duration::from_secs(30);
        let o = outages(7, limit);
        assert_eq!(o, outages(7, limit), "the schedule is the seed's");
        assert_ne!(o, outages(8, limit));
        assert!(o.len() >= 4, "{o:?}");
        assert!(o.iter().all(|w| w.from < w.to && w.to < limit && w.to - w.from <= Duration::from_millis(1500)));
        assert!(o.windows(2).all(|w| w[0].to < w[1].from));
        assert!(o.iter().all(|w| w.status == 500 || w.status == 503));
    }

    #[tokio::test]
    async fn requests_are_read_one_after_another_with_either_body_framing() {
        let text = b"POST /hook/1 HTTP/1.1\r\nwebhook-id: wk_1\r\ncontent-length: 2\r\n\r\n{}POST /hook/2 HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n1\r\nd\r\n0\r\n\r\n";
        let mut conn = BufReader::new(&text[..]);
        let a = read_request(&mut conn).await.expect("the first request");
        assert_eq!((a.method.as_str(), a.path.as_str(), a.body.as_slice()), ("POST", "/hook/1", &b"{}"[..]));
        assert_eq!(a.headers.get("webhook-id").map(String::as_str), Some("wk_1"));
        let b = read_request(&mut conn).await.expect("the second request");
        assert_eq!((b.path.as_str(), b.body.as_slice()), ("/hook/2", &b"abcd"[..]));
        assert!(read_request(&mut conn).await.is_none(), "then the connection is closed");
    }

    #[test]
    fn nodes_are_named_by_their_bridge_address() {
        assert_eq!(node_of("10.88.3.2".parse().expect("an address")), 2);
        assert_eq!(node_of("127.0.0.1".parse().expect("an address")), 0);
    }
}
