//! Wake webhooks (issue #35, docs/wake.md) against real `kungfud` processes and a real HTTP receiver
//! on loopback: an owed response reaches the agent's webhook as a signed POST; a receiver that
//! answers 500 gets the same delivery again under the same `webhook-id`; the next change is the
//! next sequence number with a new id; an outsider's webhook hears nothing of work it is not part
//! of (§12); a private destination is refused unless the operator allows it, also behind a name
//! that resolves to one, where the leader gives up and says so in the target's list; and
//! deliveries go on across a leader kill with no sequence number skipped; a receiver that is down
//! gets the delivery once it is back; opportunities arising and ending (an assignment addressed to
//! the agent, a restricted Task naming it, paused) wake it with no change to its turn; and a
//! deadline nearing wakes it before the deadline, at the moment it comes within the warning. The signature itself is
//! checked with an independent implementation in `tests/mcp/test_wake.py` (the PyPI
//! `standardwebhooks` library).

use kungfu_api::pb;
use kungfu_system_tests::*;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

const TOKEN: &str = "operator-token-for-wake-tests";

/// A cluster whose leader may deliver to loopback over http, coalescing changes for 50 ms.
fn allowing_loopback(n: u64, give_up_secs: u64) -> Cluster {
    Cluster::start(
        n,
        &format!(
            "operator_token = \"{TOKEN}\"\n[wake]\nschemes = [\"http\"]\nallow_private = true\ncoalesce_ms = 50\ngive_up_after_secs = {give_up_secs}\n"
        ),
    )
}

/// One POST the receiver got.
#[derive(Clone, Debug)]
struct Got {
    id: String,
    timestamp: String,
    signature: String,
    body: serde_json::Value,
    /// The status the receiver answered.
    status: u16,
}

/// An HTTP/1.1 receiver on loopback: records every request and answers each with the next
/// status of its script (200 once the script is spent).
#[derive(Clone)]
struct Receiver {
    port: u16,
    got: Arc<Mutex<Vec<Got>>>,
    script: Arc<Mutex<Vec<u16>>>,
}

impl Receiver {
    async fn start(script: Vec<u16>) -> Receiver {
        Receiver::start_on(0, script).await
    }

    /// A receiver on `port` (0: any free one).
    async fn start_on(port: u16, script: Vec<u16>) -> Receiver {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let r = Receiver { port, got: Arc::default(), script: Arc::new(Mutex::new(script)) };
        let served = r.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(served.clone().connection(socket));
            }
        });
        r
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    /// Requests one after another on one connection (the sender keeps connections alive).
    async fn connection(self, socket: tokio::net::TcpStream) {
        let mut socket = BufReader::new(socket);
        loop {
            let mut headers = BTreeMap::new();
            let mut line = String::new();
            if socket.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            assert!(line.starts_with("POST /hook "), "a delivery is a POST to the target's path: {line}");
            loop {
                line.clear();
                if socket.read_line(&mut line).await.unwrap_or(0) == 0 {
                    return;
                }
                let l = line.trim_end();
                if l.is_empty() {
                    break;
                }
                if let Some((k, v)) = l.split_once(':') {
                    headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
                }
            }
            let len: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
            let mut body = vec![0; len];
            if socket.read_exact(&mut body).await.is_err() {
                return;
            }
            let status = {
                let mut script = self.script.lock().unwrap();
                if script.is_empty() { 200 } else { script.remove(0) }
            };
            assert_eq!(headers.get("content-type").map(String::as_str), Some("application/json"));
            self.got.lock().unwrap().push(Got {
                id: headers.get("webhook-id").cloned().unwrap_or_default(),
                timestamp: headers.get("webhook-timestamp").cloned().unwrap_or_default(),
                signature: headers.get("webhook-signature").cloned().unwrap_or_default(),
                body: serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
                status,
            });
            let answer = format!("HTTP/1.1 {status} X\r\ncontent-length: 0\r\n\r\n");
            if socket.get_mut().write_all(answer.as_bytes()).await.is_err() {
                return;
            }
        }
    }

    fn got(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }

    /// Waits (bounded) until a request answered 2xx carries `sequence`.
    async fn delivered(&self, sequence: u64, logs: impl Fn() -> String) -> Vec<Got> {
        let start = Instant::now();
        loop {
            let got = self.got();
            if got.iter().any(|g| g.status == 200 && g.body["sequence"] == sequence) {
                return got;
            }
            assert!(start.elapsed() < BOUND, "delivery {sequence} never arrived: {got:?}\n{}", logs());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

async fn serving(cluster: &Cluster, node: u64) -> Client {
    Client { channel: connect(cluster.nodes[&node].api).await, key: None }
}

async fn register(anon: &Client, key: &str, cluster: &Cluster) -> (String, Client) {
    register_when_serving(anon, key, || cluster.logs()).await
}

async fn set_target(c: &Client, key: &str, url: &str) -> Result<(String, String), tonic::Status> {
    let r = c
        .agents()
        .set_wake_target(c.req(pb::SetWakeTargetRequest {
            idempotency_key: key.into(),
            url: url.into(),
            ..Default::default()
        }))
        .await?
        .into_inner();
    let Some(pb::receipt::Result::WakeTargetSet(t)) = r.receipt.and_then(|r| r.result) else {
        panic!("no target in the receipt")
    };
    Ok((t.target, r.secret))
}

async fn targets(c: &Client) -> Vec<pb::WakeTarget> {
    c.agents().list_wake_targets(c.req(pb::ListWakeTargetsRequest {})).await.expect("list").into_inner().targets
}

/// `lead` posts to `thread` asking `worker`: the worker owes a response (§6.3). Returns the entry.
async fn ask(lead: &Client, key: &str, thread: &str, worker_id: &str) -> u64 {
    lead.threads()
        .post(lead.req(pb::PostRequest {
            idempotency_key: key.into(),
            thread: thread.into(),
            body: Some(pb::PostBody { kind: Some(pb::post_body::Kind::Content(pb::Content { body: key.into() })) }),
            reply_to: None,
            ask: Some(pb::Ask { agents: vec![worker_id.into()] }),
            task_ref: None,
            assignment: None,
        }))
        .await
        .expect("post")
        .into_inner()
        .receipt
        .and_then(|r| r.result)
        .map(|r| match r {
            pb::receipt::Result::Posted(p) => p.entry,
            other => panic!("not a post: {other:?}"),
        })
        .expect("receipt")
}

/// `worker` handles `entry`: its owed response ends.
async fn handle(worker: &Client, key: &str, thread: &str, entry: u64) {
    worker
        .threads()
        .handle(worker.req(pb::HandleRequest { idempotency_key: key.into(), thread: thread.into(), entry, note: None }))
        .await
        .expect("handle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owed_response_is_delivered_signed_retried_under_one_id_and_the_next_change_is_the_next_sequence() {
    let cluster = allowing_loopback(1, 3600);
    let anon = serving(&cluster, 1).await;
    let (_, lead) = register(&anon, "lead", &cluster).await;
    let (worker_id, worker) = register(&anon, "worker", &cluster).await;
    // The receiver fails the first two attempts.
    let rx = Receiver::start(vec![500, 500]).await;
    let (target, secret) = set_target(&worker, "wake-1", &rx.url()).await.expect("set");
    assert!(target.starts_with("wt_"), "{target}");
    assert!(secret.starts_with("whsec_") && secret.len() > 40, "the secret in the first response: {secret}");
    // A retry of the same request is a replay: the same target, and no secret (L3).
    let (again, no_secret) = set_target(&worker, "wake-1", &rx.url()).await.expect("replay");
    assert_eq!((again.as_str(), no_secret.as_str()), (target.as_str(), ""));
    assert!(targets(&worker).await.iter().all(|t| !format!("{t:?}").contains(&secret)), "a read never shows it");

    let thread = lead.thread_with_speaker(&worker, "thread".into(), "join".into()).await;
    let entry = ask(&lead, "ask-1", &thread, &worker_id).await;
    let got = rx.delivered(1, || cluster.logs()).await;
    assert!(got.len() >= 3, "two 500s, then the 200: {got:?}");
    let first = &got[0];
    for g in &got {
        // Every attempt of one event: the same id and body; signed, timestamped.
        assert_eq!((&g.id, &g.body), (&first.id, &first.body), "a retry is the same delivery");
        assert!(g.signature.starts_with("v1,") && g.timestamp.parse::<i64>().is_ok(), "{g:?}");
    }
    assert!(first.id.starts_with("wk_"), "{first:?}");
    assert_eq!(first.body["type"], "kungfu.turn.changed");
    assert_eq!(first.body["agent"], worker_id.as_str());
    assert_eq!(first.body["target"], target.as_str());
    assert!(!first.body.to_string().contains("ask-1"), "§12: no content in a wake body: {}", first.body);

    // The response ends: the turn changes again, delivered as sequence 2 under a new id.
    handle(&worker, "handle-1", &thread, entry).await;
    let got = rx.delivered(2, || cluster.logs()).await;
    let second = got.iter().find(|g| g.body["sequence"] == 2).expect("sequence 2");
    assert_ne!(second.id, first.id);
    assert!(second.body["applied_index"].as_u64() > first.body["applied_index"].as_u64(), "in cursor order");
    let order: Vec<u64> = got.iter().filter_map(|g| g.body["sequence"].as_u64()).collect();
    assert!(order.windows(2).all(|w| w[0] <= w[1]), "delivered in sequence order: {order:?}");

    // The list says how delivery stands (eventually both acknowledgments are recorded).
    let start = Instant::now();
    loop {
        let t = targets(&worker).await;
        if t.len() == 1 && t[0].delivered == 2 && t[0].queued == 2 && t[0].failed.is_none() {
            break;
        }
        assert!(start.elapsed() < BOUND, "the acknowledgments were never recorded: {t:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Removed, it gets nothing more; another agent cannot remove it (NOT_FOUND, §12).
    let other = lead
        .agents()
        .remove_wake_target(
            lead.req(pb::RemoveWakeTargetRequest { idempotency_key: "rm-x".into(), target: target.clone() }),
        )
        .await
        .expect_err("not the lead's");
    assert_eq!(code(&other), "NOT_FOUND");
    worker
        .agents()
        .remove_wake_target(worker.req(pb::RemoveWakeTargetRequest { idempotency_key: "rm".into(), target }))
        .await
        .expect("remove");
    assert!(targets(&worker).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outsider_s_webhook_hears_nothing_of_work_it_is_not_part_of() {
    let cluster = allowing_loopback(1, 3600);
    let anon = serving(&cluster, 1).await;
    let (_, lead) = register(&anon, "lead", &cluster).await;
    let (worker_id, worker) = register(&anon, "worker", &cluster).await;
    let (_, outsider) = register(&anon, "outsider", &cluster).await;
    let (to_worker, to_outsider) = (Receiver::start(vec![]).await, Receiver::start(vec![]).await);
    set_target(&worker, "w", &to_worker.url()).await.expect("set");
    set_target(&outsider, "o", &to_outsider.url()).await.expect("set");
    let thread = lead.thread_with_speaker(&worker, "thread".into(), "join".into()).await;
    let entry = ask(&lead, "ask", &thread, &worker_id).await;
    to_worker.delivered(1, || cluster.logs()).await;
    handle(&worker, "h", &thread, entry).await;
    // The outsider's target was in the same rounds as the worker's: it got nothing at all.
    to_worker.delivered(2, || cluster.logs()).await;
    assert!(to_outsider.got().is_empty(), "§12: {:?}", to_outsider.got());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_destination_is_refused_unless_allowed_also_behind_a_name_and_the_give_up_is_visible() {
    // http allowed, private destinations not (the default); give up after 3 s.
    let cluster = Cluster::start(
        1,
        &format!(
            "operator_token = \"{TOKEN}\"\n[wake]\nschemes = [\"http\", \"https\"]\ncoalesce_ms = 50\ngive_up_after_secs = 3\n"
        ),
    );
    let anon = serving(&cluster, 1).await;
    let (_, lead) = register(&anon, "lead", &cluster).await;
    let (worker_id, worker) = register(&anon, "worker", &cluster).await;
    let rx = Receiver::start(vec![]).await;
    for (i, url) in [
        rx.url(),
        "http://10.0.0.7/hook".to_string(),
        "http://169.254.169.254/latest/meta-data".to_string(),
        "https://[::1]/hook".to_string(),
        "http://[::ffff:127.0.0.1]/hook".to_string(),
    ]
    .iter()
    .enumerate()
    {
        let e = set_target(&worker, &format!("bad-{i}"), url).await.expect_err(url);
        assert_eq!(code(&e), "INVALID_ARGUMENT", "{url}: {e:?}");
        assert!(e.message().contains("url"), "the refusal names the field: {}", e.message());
    }
    // Refused at the door by the operator's schemes too.
    let e = set_target(&worker, "ftp", "ftp://files.example.com/x").await.expect_err("ftp");
    assert_eq!(code(&e), "INVALID_ARGUMENT");
    // A name is resolved at each send: `localhost` passes the door and is refused at the send.
    let (target, _) =
        set_target(&worker, "named", &format!("http://localhost:{}/hook", rx.port)).await.expect("a name");
    let thread = lead.thread_with_speaker(&worker, "thread".into(), "join".into()).await;
    ask(&lead, "ask", &thread, &worker_id).await;
    let start = Instant::now();
    let failed = loop {
        let t = targets(&worker).await;
        if let Some(f) = t.iter().find(|t| t.id == target).and_then(|t| t.failed.clone()) {
            break f;
        }
        assert!(start.elapsed() < BOUND, "the leader never gave up: {t:?}\n{}", cluster.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(failed.sequence, 1);
    assert!(failed.error.contains("loopback"), "the give-up says why: {}", failed.error);
    assert!(rx.got().is_empty(), "nothing reached the private address: {:?}", rx.got());
    // The turn, where the agent looks, shows the give-up too; the other agent's turn does not.
    let page = worker.turn().get_turn(worker.req(pb::GetTurnRequest::default())).await.expect("turn").into_inner();
    assert_eq!(page.items.len(), 1, "the owed response: {page:?}");
    let shown: Vec<(&str, Option<u64>)> =
        page.wake_failed.iter().map(|t| (t.id.as_str(), t.failed.as_ref().map(|f| f.sequence))).collect();
    assert_eq!(shown, vec![(target.as_str(), Some(1))], "{page:?}");
    let theirs = lead.turn().get_turn(lead.req(pb::GetTurnRequest::default())).await.expect("turn").into_inner();
    assert!(theirs.wake_failed.is_empty(), "§12: {theirs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_go_on_across_a_leader_kill_with_no_sequence_skipped() {
    let mut cluster = allowing_loopback(3, 3600);
    let old = agreed_leader(&cluster, TOKEN).await;
    let anon = serving(&cluster, old).await;
    let (_, lead) = register(&anon, "lead", &cluster).await;
    let (worker_id, worker) = register(&anon, "worker", &cluster).await;
    let rx = Receiver::start(vec![]).await;
    set_target(&worker, "w", &rx.url()).await.expect("set");
    let thread = lead.thread_with_speaker(&worker, "thread".into(), "join".into()).await;
    let entry = ask(&lead, "ask-1", &thread, &worker_id).await;
    rx.delivered(1, || cluster.logs()).await;

    cluster.nodes.get_mut(&old).expect("old").kill();
    let survivors: Vec<u64> = cluster.nodes.keys().copied().filter(|&n| n != old).collect();
    let next = Client { channel: connect(cluster.nodes[&survivors[0]].api).await, key: None };
    let (worker, lead) = (
        Client { channel: next.channel.clone(), key: worker.key.clone() },
        Client { channel: next.channel.clone(), key: lead.key.clone() },
    );
    // Retried until the new leader serves (the SDK-less client retries by hand, bounded).
    let start = Instant::now();
    loop {
        let r = worker
            .threads()
            .handle(worker.req(pb::HandleRequest {
                idempotency_key: "h1".into(),
                thread: thread.clone(),
                entry,
                note: None,
            }))
            .await;
        match r {
            Ok(_) => break,
            Err(e) => {
                assert!(start.elapsed() < BOUND, "no new leader served: {e}\n{}", cluster.logs());
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    let got = rx.delivered(2, || cluster.logs()).await;
    ask(&lead, "ask-2", &thread, &worker_id).await;
    let got = if got.iter().any(|g| g.body["sequence"] == 3) { got } else { rx.delivered(3, || cluster.logs()).await };
    // Every sequence number from 1 to 3 arrived; one id per sequence number, whoever sent it.
    let mut ids: BTreeMap<u64, String> = BTreeMap::new();
    for g in &got {
        let seq = g.body["sequence"].as_u64().expect("sequence");
        let id = ids.entry(seq).or_insert_with(|| g.id.clone());
        assert_eq!(*id, g.id, "sequence {seq} was sent under two ids");
    }
    assert_eq!(ids.keys().copied().collect::<Vec<_>>(), vec![1, 2, 3], "no sequence skipped: {got:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_is_down_gets_the_delivery_once_it_is_back() {
    let cluster = allowing_loopback(1, 3600);
    let anon = serving(&cluster, 1).await;
    let (_, lead) = register(&anon, "lead", &cluster).await;
    let (worker_id, worker) = register(&anon, "worker", &cluster).await;
    // Nothing listens on the target's port yet: every attempt is a refused connection.
    let port = free_port();
    let (target, _) = set_target(&worker, "w", &format!("http://127.0.0.1:{port}/hook")).await.expect("set");
    let thread = lead.thread_with_speaker(&worker, "thread".into(), "join".into()).await;
    ask(&lead, "ask", &thread, &worker_id).await;
    let start = Instant::now();
    loop {
        let t = targets(&worker).await;
        let t = t.iter().find(|t| t.id == target).expect("the target");
        assert_eq!(t.delivered, 0, "nothing can have been delivered: {t:?}");
        if t.queued == 1 {
            break;
        }
        assert!(start.elapsed() < BOUND, "the event was never queued: {t:?}\n{}", cluster.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Attempts fail meanwhile (and back off); then the receiver comes up on that port.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rx = Receiver::start_on(port, vec![]).await;
    let got = rx.delivered(1, || cluster.logs()).await;
    assert!(got.iter().all(|g| g.body["sequence"] == 1 && g.body["target"] == target.as_str()), "{got:?}");
    let start = Instant::now();
    while targets(&worker).await.iter().find(|t| t.id == target).is_none_or(|t| t.delivered != 1) {
        assert!(start.elapsed() < BOUND, "the acknowledgment was never recorded\n{}", cluster.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A restricted Task naming `worker_id`, created by `lead`; returns its id.
async fn restricted_task(lead: &Client, key: &str, worker_id: &str, delivery_secs: Option<u64>) -> String {
    let r = lead
        .tasks()
        .create(lead.req(pb::CreateTaskRequest {
            idempotency_key: key.into(),
            audience: Some(pb::Audience {
                kind: Some(pb::audience::Kind::Restricted(pb::RestrictedAudience { agents: vec![worker_id.into()] })),
            }),
            contract: Some(conformance::contract(delivery_secs.map(|s| s * 1_000_000), None)),
        }))
        .await
        .expect("create task")
        .into_inner();
    match r.receipt.and_then(|r| r.result) {
        Some(pb::receipt::Result::TaskCreated(t)) => t.task,
        other => panic!("no task in the receipt: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opportunities_arising_and_ending_wake_the_agent_with_no_change_to_its_turn() {
    let cluster = allowing_loopback(1, 3600);
    let anon = serving(&cluster, 1).await;
    let (_, lead) = register(&anon, "lead", &cluster).await;
    let (worker_id, worker) = register(&anon, "worker", &cluster).await;
    // The thread first: every event below is then of one action of this test.
    let thread = lead.thread_with_speaker(&worker, "thread".into(), "join".into()).await;
    let rx = Receiver::start(vec![]).await;
    set_target(&worker, "w", &rx.url()).await.expect("set");

    // §8: a restricted Task naming the worker is an opportunity: its turn stays empty.
    let task = restricted_task(&lead, "task", &worker_id, None).await;
    let got = rx.delivered(1, || cluster.logs()).await;
    let page = worker.turn().get_turn(worker.req(pb::GetTurnRequest::default())).await.expect("turn").into_inner();
    assert!(page.items.is_empty(), "an opportunity binds no one: {page:?}");
    let first = got.iter().find(|g| g.body["sequence"] == 1).expect("sequence 1").clone();
    assert_eq!(first.body["agent"], worker_id.as_str());

    // Paused, the Task is no longer offered (no index changes: the Task's fact says so).
    lead.tasks()
        .pause(lead.req(pb::PauseTaskRequest { idempotency_key: "pause".into(), task: task.clone() }))
        .await
        .expect("pause");
    let got = rx.delivered(2, || cluster.logs()).await;
    let second = got.iter().find(|g| g.body["sequence"] == 2).expect("sequence 2");
    assert_ne!(second.body["digest"], first.body["digest"], "the view changed");

    // An assignment addressed to the worker, in a thread it is a member of, is an opportunity too.
    let before = rx.got().len();
    lead.threads()
        .post(lead.req(pb::PostRequest {
            idempotency_key: "assign".into(),
            thread: thread.clone(),
            body: Some(pb::PostBody { kind: Some(pb::post_body::Kind::Content(pb::Content { body: "do".into() })) }),
            reply_to: None,
            ask: Some(pb::Ask { agents: vec![] }),
            task_ref: None,
            assignment: Some(pb::NewAssignment {
                addressee: worker_id.clone(),
                criteria: Some(pb::Content { body: "done".into() }),
                ..Default::default()
            }),
        }))
        .await
        .expect("assign");
    let got = rx.delivered(3, || cluster.logs()).await;
    assert!(got.len() > before);
    let page = worker.turn().get_turn(worker.req(pb::GetTurnRequest::default())).await.expect("turn").into_inner();
    assert!(page.items.is_empty(), "still nothing owed: {page:?}");
    // Nothing else changed for the worker: no fourth event.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(rx.got().iter().all(|g| g.body["sequence"].as_u64() <= Some(3)), "{:?}", rx.got());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_nearing_wakes_the_agent_when_it_comes_within_the_warning() {
    // Deadlines near 5 s before they pass.
    let cluster = Cluster::start(
        1,
        &format!(
            "operator_token = \"{TOKEN}\"\n[wake]\nschemes = [\"http\"]\nallow_private = true\ncoalesce_ms = 50\ndeadline_warning_secs = 5\n"
        ),
    );
    let anon = serving(&cluster, 1).await;
    let (_, lead) = register(&anon, "lead", &cluster).await;
    let (worker_id, worker) = register(&anon, "worker", &cluster).await;
    let rx = Receiver::start(vec![]).await;
    set_target(&worker, "w", &rx.url()).await.expect("set");
    // An engagement with a delivery deadline 12 s out: the worker owes a delivery.
    let task = restricted_task(&lead, "task", &worker_id, Some(12)).await;
    rx.delivered(1, || cluster.logs()).await;
    worker
        .tasks()
        .take(worker.req(pb::TakeTaskRequest { idempotency_key: "take".into(), task, ..Default::default() }))
        .await
        .expect("take");
    let page = worker.turn().get_turn(worker.req(pb::GetTurnRequest::default())).await.expect("turn").into_inner();
    let due = page.items.first().and_then(|i| i.due_at_unix_micros).expect("a delivery with a deadline");
    // Taking it is a change (the opportunity became an obligation); then the deadline nears.
    let got = rx.delivered(2, || cluster.logs()).await;
    let taken = got.iter().find(|g| g.body["sequence"] == 2).expect("sequence 2").clone();
    let got = rx.delivered(3, || cluster.logs()).await;
    let near = got.iter().find(|g| g.body["sequence"] == 3).expect("sequence 3");
    // The event is of the moment the deadline came within 5 s, before the deadline (no command
    // made this change: the leader's clock did).
    assert_eq!(near.body["changed_at_unix_micros"].as_i64(), Some(due - 5_000_000), "{near:?} after {taken:?}");
    assert_ne!(near.body["digest"], taken.body["digest"]);
}
