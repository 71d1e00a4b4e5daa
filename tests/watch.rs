//! Watch streams against a real `kungfud`: a thread watcher gets the backlog in pages and then live
//! entries in order, and resuming with the last sequence number it saw gives exactly the entries it
//! missed; access is checked on every batch (an outsider and a member who leaves get NOT_FOUND);
//! a turn watcher keeps an exact copy of the turn (an owed response appears when asked and leaves
//! after the reply) and resumes with a cursor without gap or duplicate; streams are bounded per
//! agent; an open stream neither outlives nor blocks a SIGTERM; and a stream whose node stops
//! leading ends with NOT_LEADER and resumes on the new leader without gap or duplicate.

use kungfu_api::pb;
use kungfu_system_tests::*;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tonic::Streaming;

type Watch = pb::watch_service_client::WatchServiceClient<tonic::transport::Channel>;

fn watch(c: &Client) -> Watch {
    pb::watch_service_client::WatchServiceClient::new(c.channel.clone())
}

/// The anonymous client of a fresh one-node cluster and its first agent (`lead`), registered as
/// soon as the node serves.
async fn serving(cluster: &Cluster) -> (Client, Client) {
    let anon = Client { channel: connect(cluster.nodes[&1].api).await, key: None };
    let (_, lead) = register_when_serving(&anon, "lead", || cluster.logs()).await;
    (anon, lead)
}

async fn register(anon: &Client, key: &str) -> (String, Client) {
    let r = anon
        .agents()
        .register(anon.req(pb::RegisterRequest { idempotency_key: key.into() }))
        .await
        .expect("register")
        .into_inner();
    let Some(pb::receipt::Result::AgentRegistered(a)) = r.receipt.and_then(|r| r.result) else { panic!("no agent") };
    (a.agent, Client { channel: anon.channel.clone(), key: Some(r.agent_key) })
}

/// A thread created by `lead` that `worker` joins as a speaker.
async fn shared_thread(lead: &Client, worker: &Client) -> String {
    lead.thread_with_speaker(worker, "thread".into(), "join".into()).await
}

/// Posts and returns the new entry's sequence number.
async fn post(c: &Client, key: &str, thread: &str, reply_to: Option<u64>) -> u64 {
    let r = c
        .threads()
        .post(c.req(pb::PostRequest {
            idempotency_key: key.into(),
            thread: thread.into(),
            body: Some(pb::PostBody { kind: Some(pb::post_body::Kind::Content(pb::Content { body: key.into() })) }),
            reply_to,
            ask: None,
            task_ref: None,
            assignment: None,
        }))
        .await
        .expect("post")
        .into_inner();
    let Some(pb::receipt::Result::Posted(p)) = r.receipt.and_then(|r| r.result) else { panic!("not posted") };
    p.entry
}

async fn watch_thread(
    c: &Client,
    thread: &str,
    after: u64,
    page_size: u32,
) -> Result<Streaming<pb::ThreadEvent>, tonic::Status> {
    watch(c)
        .watch_thread(c.req(pb::WatchThreadRequest { thread: thread.into(), after_entry: after, page_size }))
        .await
        .map(|r| r.into_inner())
}

/// The next message of a stream: an event, its end (None) or its final status. Bounded.
async fn next<T>(s: &mut Streaming<T>) -> Result<Option<T>, tonic::Status> {
    tokio::time::timeout(BOUND, s.message()).await.expect("the stream said nothing within the bound")
}

/// Whether the stream stays silent for `quiet` (it sends nothing when nothing changed).
async fn silent<T: std::fmt::Debug>(s: &mut Streaming<T>, quiet: Duration) {
    if let Ok(m) = tokio::time::timeout(quiet, s.message()).await {
        panic!("expected nothing, got {m:?}");
    }
}

/// Receives thread events until `n` entries arrived; returns their sequence numbers and the size
/// of each event.
async fn entries(s: &mut Streaming<pb::ThreadEvent>, n: usize, thread: &str) -> (Vec<u64>, Vec<usize>) {
    let mut seqs = Vec::new();
    let mut sizes = Vec::new();
    while seqs.len() < n {
        let ev = next(s).await.expect("no error").expect("the stream goes on");
        assert!(!ev.entries.is_empty(), "an event is never empty");
        assert!(ev.applied_index > 0);
        sizes.push(ev.entries.len());
        for e in ev.entries {
            assert_eq!(e.thread, thread);
            seqs.push(e.seq);
        }
    }
    (seqs, sizes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_watcher_gets_backlog_then_live_entries_and_resumes_without_gap_or_duplicate() {
    let cluster = Cluster::start(1, "");
    let (anon, lead) = serving(&cluster).await;
    let (_, worker) = register(&anon, "worker").await;
    let (_, outsider) = register(&anon, "outsider").await;
    let thread = shared_thread(&lead, &worker).await;

    // Unauthenticated and unknown keys are refused by the call.
    for c in [&anon, &Client { channel: anon.channel.clone(), key: Some("kf_ag_nobody".into()) }] {
        let e = watch_thread(c, &thread, 0, 0).await.expect_err("no valid key");
        assert_eq!(code(&e), "UNAUTHENTICATED");
    }

    // A backlog of three entries, watched in pages of two.
    for k in ["b1", "b2", "b3"] {
        post(&lead, k, &thread, None).await;
    }
    let mut s = watch_thread(&worker, &thread, 0, 2).await.expect("a member watches");
    let (seqs, sizes) = entries(&mut s, 3, &thread).await;
    assert_eq!(seqs, vec![1, 2, 3], "the backlog, in order");
    assert!(sizes.iter().all(|n| *n <= 2), "pages of at most two: {sizes:?}");

    // Live entries posted by another agent arrive as they are applied, in order.
    let mut live = Vec::new();
    for k in ["l4", "l5"] {
        live.push(post(&lead, k, &thread, None).await);
    }
    let (seqs, _) = entries(&mut s, 2, &thread).await;
    assert_eq!(seqs, live);
    assert_eq!(seqs, vec![4, 5]);
    silent(&mut s, Duration::from_millis(1500)).await;
    drop(s);

    // Missed while away, then resumed from the last sequence number seen: exactly the missed
    // entries, then the live ones, nothing twice.
    for k in ["m6", "m7", "m8"] {
        post(&lead, k, &thread, None).await;
    }
    let mut s = watch_thread(&worker, &thread, 5, 0).await.expect("resume");
    let (seqs, _) = entries(&mut s, 3, &thread).await;
    assert_eq!(seqs, vec![6, 7, 8]);
    post(&lead, "l9", &thread, None).await;
    let (seqs, _) = entries(&mut s, 1, &thread).await;
    assert_eq!(seqs, vec![9]);
    silent(&mut s, Duration::from_millis(1500)).await;

    // A non-member gets exactly what an unknown thread gets (§12), from the call itself.
    let e = watch_thread(&outsider, &thread, 0, 0).await.expect_err("not a member");
    assert_eq!(code(&e), "NOT_FOUND");
    let unknown = watch_thread(&outsider, "th_999", 0, 0).await.expect_err("unknown");
    assert_eq!(code(&unknown), "NOT_FOUND");
    assert_eq!(e.message(), unknown.message(), "a private thread is indistinguishable from none");
    let e = watch_thread(&worker, "not-a-thread", 0, 0).await.expect_err("malformed");
    assert_eq!(code(&e), "INVALID_ARGUMENT");

    // Access is checked on every batch: a watcher who leaves gets NOT_FOUND, and nothing after.
    worker
        .threads()
        .leave(worker.req(pb::LeaveRequest { idempotency_key: "leave".into(), thread: thread.clone() }))
        .await
        .expect("leave");
    post(&lead, "after-leave", &thread, None).await;
    let e = next(&mut s).await.expect_err("the membership ended");
    assert_eq!(code(&e), "NOT_FOUND");

    // Closing a thread ends its watches with OK once every entry has been sent: none can follow.
    let mut s = watch_thread(&lead, &thread, 9, 0).await.expect("the governor watches");
    let (seqs, _) = entries(&mut s, 1, &thread).await;
    assert_eq!(seqs, vec![10], "the entry posted after the leave");
    lead.threads()
        .close(lead.req(pb::CloseThreadRequest { idempotency_key: "close".into(), thread: thread.clone() }))
        .await
        .expect("close");
    assert!(next(&mut s).await.expect("a clean end").is_none(), "the stream ends with OK after the close");
    // A watch of the closed thread sends what it holds and ends at once.
    let mut s = watch_thread(&lead, &thread, 8, 0).await.expect("still readable by its members");
    let (seqs, _) = entries(&mut s, 2, &thread).await;
    assert_eq!(seqs, vec![9, 10]);
    assert!(next(&mut s).await.expect("a clean end").is_none());
}

/// The client side of WatchTurn: a copy of the turn kept from events.
#[derive(Default, Debug)]
struct TurnCopy {
    items: BTreeMap<String, pb::TurnItem>,
    cursor: String,
}

fn key(o: &Option<pb::ObligationRef>) -> String {
    format!("{:?}", o.as_ref().and_then(|o| o.kind.clone()))
}

impl TurnCopy {
    fn apply(&mut self, ev: pb::TurnEvent) {
        if ev.reset {
            self.items.clear();
        }
        for i in ev.upserted {
            self.items.insert(key(&i.obligation), i);
        }
        for o in ev.removed {
            assert!(self.items.remove(&key(&Some(o))).is_some(), "only held obligations are removed");
        }
        if !ev.cursor.is_empty() {
            self.cursor = ev.cursor;
        }
    }

    /// Applies events until a complete change set (one with a cursor); returns them.
    async fn change(&mut self, s: &mut Streaming<pb::TurnEvent>) -> Vec<pb::TurnEvent> {
        let mut events = Vec::new();
        loop {
            let ev = next(s).await.expect("no error").expect("the stream goes on");
            let done = !ev.cursor.is_empty();
            events.push(ev.clone());
            self.apply(ev);
            if done {
                return events;
            }
        }
    }
}

/// The caller's turn as GetTurn pages it, keyed like the copy.
async fn turn_of(c: &Client) -> BTreeMap<String, pb::TurnItem> {
    let mut out = BTreeMap::new();
    let mut cursor = String::new();
    loop {
        let page =
            c.turn().get_turn(c.req(pb::GetTurnRequest { cursor, page_size: 0 })).await.expect("turn").into_inner();
        for i in page.items {
            out.insert(key(&i.obligation), i);
        }
        if page.next_cursor.is_empty() {
            return out;
        }
        cursor = page.next_cursor;
    }
}

fn response_to(thread: &str, entry: u64, responder: &str) -> String {
    key(&Some(pb::ObligationRef {
        kind: Some(pb::obligation_ref::Kind::Response(pb::ResponseObligation {
            thread: thread.into(),
            entry,
            responder: responder.into(),
        })),
    }))
}

async fn watch_turn(c: &Client, cursor: &str) -> Streaming<pb::TurnEvent> {
    watch(c).watch_turn(c.req(pb::WatchTurnRequest { cursor: cursor.into() })).await.expect("watch turn").into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_watcher_keeps_an_exact_copy_of_the_turn_and_resumes_by_cursor() {
    let cluster = Cluster::start(1, "");
    let (anon, lead) = serving(&cluster).await;
    let (worker_id, worker) = register(&anon, "worker").await;
    let thread = shared_thread(&lead, &worker).await;

    let e = watch(&anon).watch_turn(anon.req(pb::WatchTurnRequest::default())).await.expect_err("no key");
    assert_eq!(code(&e), "UNAUTHENTICATED");
    let e = watch(&worker)
        .watch_turn(worker.req(pb::WatchTurnRequest { cursor: "not a cursor".into() }))
        .await
        .expect_err("bad cursor");
    assert_eq!(code(&e), "INVALID_ARGUMENT");

    // A fresh watch starts with a reset to the current turn: empty.
    let mut copy = TurnCopy::default();
    let mut s = watch_turn(&worker, "").await;
    let first = copy.change(&mut s).await;
    assert!(first[0].reset, "a fresh watch starts with a reset");
    assert!(copy.items.is_empty());
    assert!(!copy.cursor.is_empty());

    // Asked (two speakers: the other one owes a response), the obligation appears.
    let asked = post(&lead, "ask", &thread, None).await;
    let events = copy.change(&mut s).await;
    assert!(events.iter().all(|e| !e.reset), "a change is a delta, not a reset");
    let owed = response_to(&thread, asked, &worker_id);
    let item = copy.items.get(&owed).unwrap_or_else(|| panic!("the owed response appears: {copy:?}"));
    assert_eq!(item.next, pb::NextStep::Respond as i32);
    assert_eq!(item.object, thread);
    assert_eq!(copy.items, turn_of(&worker).await, "the copy is the turn");
    silent(&mut s, Duration::from_millis(1500)).await;

    // Replying discharges it: the obligation leaves the copy.
    post(&worker, "reply", &thread, Some(asked)).await;
    let events = copy.change(&mut s).await;
    assert!(events.iter().any(|e| e.removed.iter().any(|o| key(&Some(o.clone())) == owed)), "{events:?}");
    assert!(!copy.items.contains_key(&owed));
    assert_eq!(copy.items, turn_of(&worker).await);
    drop(s);

    // Resumed with the last cursor while nothing changed: an empty confirmation, nothing resent.
    let mut s = watch_turn(&worker, &copy.cursor).await;
    let before = copy.cursor.clone();
    let events = copy.change(&mut s).await;
    assert_eq!(events.len(), 1);
    assert!(!events[0].reset && events[0].upserted.is_empty() && events[0].removed.is_empty(), "{events:?}");
    assert_ne!(copy.cursor, "");
    drop(s);

    // Changed while away: the resumed stream brings the copy to the current turn in one go.
    let a2 = post(&lead, "ask-2", &thread, None).await;
    let a3 = post(&lead, "ask-3", &thread, None).await;
    let mut s = watch_turn(&worker, &copy.cursor).await;
    copy.change(&mut s).await;
    let expected = turn_of(&worker).await;
    assert_eq!(copy.items, expected, "no gap after resuming");
    assert!(copy.items.contains_key(&response_to(&thread, a2, &worker_id)));
    assert!(copy.items.contains_key(&response_to(&thread, a3, &worker_id)));
    assert_ne!(copy.cursor, before);
    silent(&mut s, Duration::from_millis(1500)).await;

    // Another agent's cursor never confirms this agent's turn.
    let mut other = TurnCopy::default();
    let mut s2 = watch_turn(&lead, &copy.cursor).await;
    let events = other.change(&mut s2).await;
    assert!(events[0].reset, "a cursor of another agent starts with a reset");
    assert_eq!(other.items, turn_of(&lead).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_streams_are_bounded_per_agent_and_end_cleanly_on_sigterm() {
    let mut cluster = Cluster::start(1, "");
    let (anon, lead) = serving(&cluster).await;
    let (_, worker) = register(&anon, "worker").await;
    let thread = shared_thread(&lead, &worker).await;

    // Eight streams per agent; the ninth is refused until one closes.
    let mut open = Vec::new();
    for _ in 0..8 {
        open.push(watch_turn(&worker, "").await);
    }
    let e = watch_thread(&worker, &thread, 0, 0).await.expect_err("one too many");
    assert_eq!(code(&e), "RATE_LIMITED");
    let r = kungfu_api::status_rejection(&e).expect("a rejection");
    assert!(r.retry_after.is_some(), "says when to retry");
    // Another agent is not affected.
    let mut lead_stream = watch_thread(&lead, &thread, 0, 0).await.expect("another agent's slot");
    drop(open.pop());
    let start = Instant::now();
    let mut s = loop {
        match watch_thread(&worker, &thread, 0, 0).await {
            Ok(s) => break s,
            Err(e) => {
                assert_eq!(code(&e), "RATE_LIMITED");
                assert!(start.elapsed() < BOUND, "a closed stream never freed its slot");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    let seq = post(&lead, "p1", &thread, None).await;
    let (seqs, _) = entries(&mut s, 1, &thread).await;
    assert_eq!(seqs, vec![seq]);
    let (seqs, _) = entries(&mut lead_stream, 1, &thread).await;
    assert_eq!(seqs, vec![seq]);

    // SIGTERM with open streams: each ends with UNAVAILABLE and the node exits cleanly.
    let mut node = cluster.nodes.remove(&1).expect("node");
    let terminated = tokio::task::spawn_blocking(move || (node.terminate(), node.log()));
    let e = next(&mut s).await.expect_err("the stream ends with a status");
    assert_eq!(code(&e), "UNAVAILABLE", "{e:?}");
    let e = next(&mut lead_stream).await.expect_err("the stream ends with a status");
    assert_eq!(code(&e), "UNAVAILABLE", "{e:?}");
    let (clean, log) = terminated.await.expect("join");
    assert!(clean, "kungfud did not exit cleanly on SIGTERM with open watch streams\n{log}");
}

const WATCH_TOKEN: &str = "operator-token-for-watch-tests";

/// The node that all three nodes agree leads. Bounded.
async fn leader(cluster: &Cluster) -> u64 {
    agreed_leader(cluster, WATCH_TOKEN).await
}

/// A stream whose serving node stops leading ends with NOT_LEADER (never silently, never with
/// entries the new leader does not have), and the watcher reopens it with the last sequence number
/// it saw: across the leader change there is no gap and no duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_watch_ends_when_its_node_stops_leading_and_resumes_on_the_new_leader() {
    let cluster = Cluster::start(3, &format!("operator_token = \"{WATCH_TOKEN}\"\n"));
    let (anon, lead) = serving(&cluster).await;
    let (_, worker) = register(&anon, "worker").await;
    let thread = shared_thread(&lead, &worker).await;
    let first = post(&lead, "e1", &thread, None).await;
    let second = post(&lead, "e2", &thread, None).await;

    // Watch on the leader itself, not forwarded (`req_local`): leadership can move between asking
    // who leads and opening the stream (elections settle under load), and a forwarded stream
    // would be served by whichever node leads then, which the transfer below may not move.
    let start = Instant::now();
    let (old, at_old, mut s) = loop {
        let old = leader(&cluster).await;
        let at_old = Client { channel: connect(cluster.nodes[&old].api).await, key: worker.key.clone() };
        let req = at_old.req_local(pb::WatchThreadRequest { thread: thread.clone(), after_entry: 0, page_size: 100 });
        match watch(&at_old).watch_thread(req).await {
            Ok(s) => break (old, at_old, s.into_inner()),
            Err(e) if code(&e) == "NOT_LEADER" && start.elapsed() < BOUND => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("open a stream on the leader {old}: {e}\n{}", cluster.logs()),
        }
    };
    assert_eq!(entries(&mut s, 2, &thread).await.0, vec![first, second]);

    // Leadership moves away from the node serving the stream. If it already moved by itself, the
    // transfer is refused and the stream ends all the same.
    let to = cluster.nodes.keys().copied().find(|&n| n != old).expect("another node");
    let mut req = tonic::Request::new(pb::TransferLeaderRequest { to });
    req.metadata_mut().insert("authorization", format!("Bearer {WATCH_TOKEN}").parse().expect("header"));
    req.set_timeout(Duration::from_secs(30));
    let transfer = pb::admin_service_client::AdminServiceClient::new(connect(cluster.nodes[&old].api).await)
        .transfer_leader(req)
        .await;
    let end = match next(&mut s).await {
        Err(e) => e,
        other => panic!(
            "the stream must end with a status when its node stops leading, got {other:?} (transfer: {transfer:?})\n{}",
            cluster.logs()
        ),
    };
    assert_eq!(code(&end), "NOT_LEADER", "{end:?}");
    assert_ne!(leader(&cluster).await, old, "leadership moved");

    // A new entry under the new leader (same key on retry: one effect), then the watcher resumes
    // from the last entry it saw, through any node: exactly the new entry follows.
    let start = Instant::now();
    let third = loop {
        let r = lead
            .threads()
            .post(lead.req(pb::PostRequest {
                idempotency_key: "e3".into(),
                thread: thread.clone(),
                body: Some(pb::PostBody {
                    kind: Some(pb::post_body::Kind::Content(pb::Content { body: b"e3".to_vec() })),
                }),
                reply_to: None,
                ask: None,
                task_ref: None,
                assignment: None,
            }))
            .await;
        match r.map(|r| r.into_inner().receipt.and_then(|r| r.result)) {
            Ok(Some(pb::receipt::Result::Posted(p))) => break p.entry,
            Ok(other) => panic!("not posted: {other:?}"),
            Err(e) => {
                assert!(start.elapsed() < BOUND, "no post after the leader change: {e}\n{}", cluster.logs());
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    assert_eq!(third, second + 1);
    let start = Instant::now();
    let mut resumed = loop {
        match watch_thread(&at_old, &thread, second, 100).await {
            Ok(s) => break s,
            Err(e) => {
                assert!(start.elapsed() < BOUND, "the stream never reopened: {e}\n{}", cluster.logs());
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    assert_eq!(entries(&mut resumed, 1, &thread).await.0, vec![third], "no gap, no duplicate");
    silent(&mut resumed, Duration::from_millis(300)).await;
}
