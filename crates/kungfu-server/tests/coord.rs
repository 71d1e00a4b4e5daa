//! The coordination layer (COORDINATION §7.2) over real gRPC, against in-process replicas that
//! serve the whole public API as `kungfud` does (`grpc::ApiStack`, `grpc::serve`): one happy path of each
//! `CoordService` call, a floor refusal as a client sees it (code, `ErrorInfo` with `fak_reason`,
//! no effect), and a follower that forwards the calls to its leader.

use kungfu_api::pb;
use kungfu_raft::{NodeConfig, RaftNode};
use kungfu_server::Config;
use kungfu_server::backend::Backend;
use kungfu_types::{Code, FakReason};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// How long anything that must happen (an election, a connection) may take before the test fails.
const BOUND: Duration = Duration::from_secs(30);

/// One replica serving the public API on a loopback port of its own.
struct Replica {
    b: Arc<Backend>,
    api: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(served) = self.served.take() {
            served.abort();
        }
    }
}

/// Starts `n` replicas of one cluster, each serving the API, and waits until node 1 leads with its
/// term applied. The API listeners are bound first so each node advertises its real address (the
/// forwarding layer dials it).
async fn cluster(n: u64) -> Vec<Replica> {
    let mut nodes = Vec::new();
    for id in 1..=n {
        let dir = tempfile::tempdir().expect("tempdir");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let api = listener.local_addr().expect("addr");
        let mut nc = NodeConfig::new(id, "coord", dir.path(), "127.0.0.1:0".parse().expect("addr"));
        nc.api_advertise = api.to_string();
        let node = Arc::new(RaftNode::start(nc).await.expect("start"));
        nodes.push((node, listener, api, dir));
    }
    let members = nodes.iter().map(|(node, ..)| (node.id, node.node())).collect();
    nodes[0].0.initialize(members).await.expect("initialize");
    let start = Instant::now();
    while !nodes[0].0.leads_caught_up() {
        assert!(start.elapsed() < BOUND, "node 1 never led");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let config = Arc::new(Config::default());
    let mut replicas = Vec::new();
    for (node, listener, api, dir) in nodes {
        let b = Arc::new(Backend::new(node, config.clone()));
        let watches = kungfu_server::watch::Watches::new(b.clone());
        let stack = kungfu_server::grpc::ApiStack::new(&b, watches).expect("the API's service stack");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let shutdown = async move {
            let _ = stopped.await;
        };
        let served = tokio::spawn({
            let b = b.clone();
            async move {
                if let Err(e) = kungfu_server::grpc::serve(b, stack, listener, shutdown).await {
                    panic!("serving the API failed: {e}");
                }
            }
        });
        replicas.push(Replica { b, api, stop: Some(stop), served: Some(served), _dir: dir });
    }
    replicas
}

async fn connect(addr: SocketAddr) -> Channel {
    let start = Instant::now();
    loop {
        match tonic::transport::Endpoint::from_shared(format!("http://{addr}")).expect("endpoint").connect().await {
            Ok(c) => return c,
            Err(e) => {
                assert!(start.elapsed() < BOUND, "{addr} never accepted connections: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

static KEYS: AtomicU64 = AtomicU64::new(0);

/// A fresh idempotency key.
fn key() -> String {
    format!("k{}", KEYS.fetch_add(1, Ordering::Relaxed))
}

/// An agent as a client: its id (`ag_3`) and its bearer key, over one channel.
#[derive(Clone)]
struct Agent {
    id: String,
    key: String,
    ch: Channel,
}

impl Agent {
    async fn register(ch: &Channel) -> Agent {
        let r = pb::agent_service_client::AgentServiceClient::new(ch.clone())
            .register(pb::RegisterRequest { idempotency_key: key() })
            .await
            .expect("register")
            .into_inner();
        let Some(pb::receipt::Result::AgentRegistered(a)) = r.receipt.and_then(|r| r.result) else {
            panic!("no agent")
        };
        Agent { id: a.agent, key: r.agent_key, ch: ch.clone() }
    }

    fn req<T>(&self, msg: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(msg);
        r.metadata_mut().insert("authorization", format!("Bearer {}", self.key).parse().expect("ascii"));
        r
    }

    fn coord(&self) -> pb::coord_service_client::CoordServiceClient<Channel> {
        pb::coord_service_client::CoordServiceClient::new(self.ch.clone())
    }

    fn threads(&self) -> pb::thread_service_client::ThreadServiceClient<Channel> {
        pb::thread_service_client::ThreadServiceClient::new(self.ch.clone())
    }

    /// A thread this agent governs, with every one of `members` joined as a speaker.
    async fn thread_with(&self, members: &[&Agent]) -> String {
        let created = self
            .threads()
            .create(self.req(pb::CreateThreadRequest {
                idempotency_key: key(),
                subject: content("s"),
                grant: Some(pb::GrantSpec { role: pb::Role::Speaker as i32 }),
            }))
            .await
            .expect("create thread")
            .into_inner();
        let Some(pb::receipt::Result::ThreadCreated(t)) = created.receipt.and_then(|r| r.result) else {
            panic!("no thread")
        };
        for m in members {
            m.threads()
                .join(m.req(pb::JoinRequest { idempotency_key: key(), grant_secret: created.grant_secret.clone() }))
                .await
                .expect("join");
        }
        t.thread
    }

    async fn send(&self, thread: &str, body: Option<pb::LabeledBody>, to: Option<pb::send_to::Kind>) -> pb::Sent {
        let r = self.send_raw(thread, body, to, None).await.expect("send").into_inner();
        match r.receipt.and_then(|r| r.result) {
            Some(pb::receipt::Result::Sent(s)) => s,
            other => panic!("unexpected {other:?}"),
        }
    }

    async fn send_raw(
        &self,
        thread: &str,
        body: Option<pb::LabeledBody>,
        to: Option<pb::send_to::Kind>,
        reply_to: Option<u64>,
    ) -> Result<tonic::Response<pb::SendResponse>, tonic::Status> {
        self.coord()
            .send(self.req(pb::SendRequest {
                idempotency_key: key(),
                thread: thread.into(),
                body,
                to: to.map(|kind| pb::SendTo { kind: Some(kind) }),
                reply_to,
                reply_to_latest: false,
            }))
            .await
    }

    async fn barrier(&self, thread: &str, entry: u64) -> pb::Barrier {
        self.coord()
            .get_barrier(self.req(pb::GetBarrierRequest { thread: thread.into(), entry }))
            .await
            .expect("barrier")
            .into_inner()
    }
}

fn content(text: &str) -> Option<pb::Content> {
    Some(pb::Content { body: text.as_bytes().to_vec() })
}

fn labels(taint: pb::Taint, scope: pb::Scope) -> Option<pb::Labels> {
    Some(pb::Labels { taint: taint as i32, scope: scope as i32 })
}

fn labeled(text: &str, taint: pb::Taint, scope: pb::Scope) -> Option<pb::LabeledBody> {
    Some(pb::LabeledBody {
        kind: Some(pb::labeled_body::Kind::Content(pb::LabeledContent {
            content: content(text),
            labels: labels(taint, scope),
        })),
    })
}

fn fleet(text: &str) -> Option<pb::LabeledBody> {
    labeled(text, pb::Taint::Tainted, pb::Scope::Fleet)
}

fn agents(list: &[&Agent]) -> Option<pb::send_to::Kind> {
    Some(pb::send_to::Kind::Agents(pb::Agents { agents: list.iter().map(|a| a.id.clone()).collect() }))
}

/// The command sequence number of a replica's applied state: it grows with every recorded fact.
fn applied_seq(b: &Backend) -> u64 {
    b.node.state.read(|s| kungfu_core::StateExt::counters(s)).expect("readable").unwrap_or_default().seq
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_labeled_version_sent_to_a_member_reaches_its_mailbox_with_its_labels() {
    let nodes = cluster(1).await;
    let ch = connect(nodes[0].api).await;
    let (gov, member) = (Agent::register(&ch).await, Agent::register(&ch).await);
    let thread = gov.thread_with(&[&member]).await;

    let written = gov
        .coord()
        .write_labeled(gov.req(pb::WriteLabeledRequest {
            idempotency_key: key(),
            memory: None,
            content: content("the plan"),
            labels: labels(pb::Taint::Trusted, pb::Scope::Fleet),
        }))
        .await
        .expect("write labeled")
        .into_inner();
    let Some(pb::receipt::Result::LabeledWritten(w)) = written.receipt.and_then(|r| r.result) else {
        panic!("no labeled version")
    };
    assert_eq!(w.labels, labels(pb::Taint::Trusted, pb::Scope::Fleet));
    let pin = w.pin.expect("pin");

    let body = Some(pb::LabeledBody { kind: Some(pb::labeled_body::Kind::Pin(pin.clone())) });
    let sent = gov.send(&thread, body, agents(&[&member])).await;
    assert_eq!((sent.responders.clone(), sent.readers, sent.pin), (vec![member.id.clone()], 1, Some(pin)));

    let mailbox = member
        .coord()
        .get_mailbox(member.req(pb::GetMailboxRequest {
            thread: thread.clone(),
            after: 0,
            filter: pb::MailboxFilter::AskedMe as i32,
            page_size: 0,
        }))
        .await
        .expect("mailbox")
        .into_inner();
    assert_eq!(mailbox.items.len(), 1, "only the entry that asks the member");
    let item = &mailbox.items[0];
    assert_eq!(item.entry.as_ref().map(|e| e.seq), Some(sent.entry));
    assert_eq!(item.content, content("the plan"));
    assert_eq!(item.labels, labels(pb::Taint::Trusted, pb::Scope::Fleet));
    assert!(!item.held && !item.content_omitted);
    let owed = item.my_response.as_ref().expect("the member owes a response");
    assert_eq!((owed.responder.as_str(), owed.ending.is_none()), (member.id.as_str(), true));
    // The page examined the thread's newest entry: no cursor, the reader continues from its item.
    assert_eq!(mailbox.next_after, None, "the thread was read to its end");

    // The entry read directly carries the same labels.
    let entry = member
        .threads()
        .get_entry(member.req(pb::GetEntryRequest { thread: thread.clone(), entry: sent.entry }))
        .await
        .expect("entry")
        .into_inner();
    assert_eq!(
        (entry.labels, entry.held, entry.collective_size),
        (labels(pb::Taint::Trusted, pb::Scope::Fleet), false, None)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scatter_to_two_members_is_gathered_in_ascending_id_order() {
    let nodes = cluster(1).await;
    let ch = connect(nodes[0].api).await;
    let gov = Agent::register(&ch).await;
    let (low, high) = (Agent::register(&ch).await, Agent::register(&ch).await);
    let thread = gov.thread_with(&[&low, &high]).await;

    // The goals go out in descending id order; ranks follow ascending id whatever the request says.
    let scattered = gov
        .coord()
        .scatter(gov.req(pb::ScatterRequest {
            idempotency_key: key(),
            thread: thread.clone(),
            header: fleet("split the work"),
            goals: vec![
                pb::RankGoal { member: high.id.clone(), body: fleet("second half") },
                pb::RankGoal { member: low.id.clone(), body: fleet("first half") },
            ],
            criteria: content("tests pass"),
            ..Default::default()
        }))
        .await
        .expect("scatter")
        .into_inner();
    let Some(pb::receipt::Result::Scattered(s)) = scattered.receipt.and_then(|r| r.result) else {
        panic!("no scatter")
    };
    let ranks: Vec<(u32, &str)> = s.ranks.iter().map(|r| (r.rank, r.member.as_str())).collect();
    assert_eq!(ranks, vec![(0, low.id.as_str()), (1, high.id.as_str())]);

    // Rank 0 takes and delivers its assignment.
    let assignments = pb::assignment_service_client::AssignmentServiceClient::new(ch.clone());
    let asg = s.ranks[0].assignment.clone();
    assignments
        .clone()
        .take(low.req(pb::TakeAssignmentRequest { idempotency_key: key(), assignment: asg.clone() }))
        .await
        .expect("take");
    assignments
        .clone()
        .deliver(low.req(pb::DeliverAssignmentRequest {
            idempotency_key: key(),
            assignment: asg,
            output: content("half done"),
        }))
        .await
        .expect("deliver");

    let gathered = gov
        .coord()
        .get_collective(gov.req(pb::GetCollectiveRequest {
            thread: thread.clone(),
            header: s.header,
            include_outputs: true,
        }))
        .await
        .expect("collective")
        .into_inner();
    assert_eq!(
        (gathered.thread.as_str(), gathered.header, gathered.author.as_str()),
        (thread.as_str(), s.header, gov.id.as_str())
    );
    assert_eq!(gathered.size, 2);
    let ranks: Vec<(u32, &str, u64)> = gathered.ranks.iter().map(|r| (r.rank, r.member.as_str(), r.entry)).collect();
    assert_eq!(ranks, vec![(0, low.id.as_str(), s.ranks[0].entry), (1, high.id.as_str(), s.ranks[1].entry)]);
    match gathered.ranks[0].assignment.as_ref().and_then(|a| a.state.clone()) {
        Some(pb::assignment::State::Delivered(d)) => assert_eq!(d.output, content("half done")),
        other => panic!("rank 0 delivered: {other:?}"),
    }
    assert!(!gathered.ranks[0].output_omitted);
    assert_eq!((gathered.complete, gathered.all_delivered), (false, false), "rank 1 has not delivered");

    // The header says it heads a collective of two.
    let header = gov
        .threads()
        .get_entry(gov.req(pb::GetEntryRequest { thread, entry: s.header }))
        .await
        .expect("header")
        .into_inner();
    assert_eq!(header.collective_size, Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_to_all_speakers_is_a_barrier_released_by_their_responses() {
    let nodes = cluster(1).await;
    let ch = connect(nodes[0].api).await;
    let gov = Agent::register(&ch).await;
    let (a, b) = (Agent::register(&ch).await, Agent::register(&ch).await);
    let thread = gov.thread_with(&[&a, &b]).await;

    let all = Some(pb::send_to::Kind::AllSpeakers(pb::AllSpeakers {}));
    let sent = gov.send(&thread, fleet("ready?"), all).await;
    let mut asked = vec![a.id.clone(), b.id.clone()];
    asked.sort_by_key(|id| id.trim_start_matches("ag_").parse::<u64>().expect("an agent id"));
    assert_eq!(sent.responders, asked, "every speaker but the author");

    let waiting = a.barrier(&thread, sent.entry).await;
    assert_eq!(waiting.state, pb::BarrierState::Waiting as i32);
    assert_eq!((waiting.size, waiting.pending, waiting.absent), (3, 2, 0));
    let author_rank = waiting.ranks.iter().find(|r| r.member == gov.id).expect("the author is a rank");
    assert_eq!(author_rank.arrival, pb::BarrierArrival::Author as i32);

    // One replies (a reply ends its own pending response), the other handles.
    let reply = a.send_raw(&thread, fleet("ready"), None, Some(sent.entry)).await.expect("reply").into_inner();
    let Some(pb::receipt::Result::Sent(reply)) = reply.receipt.and_then(|r| r.result) else { panic!("no reply") };
    let half = gov.barrier(&thread, sent.entry).await;
    assert_eq!((half.state, half.pending), (pb::BarrierState::Waiting as i32, 1));
    let a_rank = half.ranks.iter().find(|r| r.member == a.id).expect("a's rank");
    assert_eq!((a_rank.arrival, a_rank.replied_by_entry), (pb::BarrierArrival::Replied as i32, Some(reply.entry)));

    b.threads()
        .handle(b.req(pb::HandleRequest {
            idempotency_key: key(),
            thread: thread.clone(),
            entry: sent.entry,
            note: None,
        }))
        .await
        .expect("handle");
    let released = b.barrier(&thread, sent.entry).await;
    assert_eq!(released.state, pb::BarrierState::Released as i32);
    assert_eq!((released.pending, released.absent), (0, 0));
    let ranks: Vec<u32> = released.ranks.iter().map(|r| r.rank).collect();
    assert_eq!(ranks, vec![0, 1, 2]);
    let b_rank = released.ranks.iter().find(|r| r.member == b.id).expect("b's rank");
    assert_eq!((b_rank.arrival, b_rank.replied_by_entry), (pb::BarrierArrival::Handled as i32, None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trust_violation_names_fak_reason_and_changes_nothing() {
    let nodes = cluster(1).await;
    let ch = connect(nodes[0].api).await;
    let (gov, member) = (Agent::register(&ch).await, Agent::register(&ch).await);
    let thread = gov.thread_with(&[&member]).await;
    let before = applied_seq(&nodes[0].b);

    let refusals = [
        (labeled("secret", pb::Taint::Quarantined, pb::Scope::Fleet), "body.content.labels"),
        (labeled("mine", pb::Taint::Tainted, pb::Scope::Agent), "body.content.labels"),
    ];
    for (body, field) in refusals {
        let status = gov.send_raw(&thread, body, agents(&[&member]), None).await.expect_err("refused");
        assert_eq!(status.code(), tonic::Code::FailedPrecondition, "{status:?}");
        let r = kungfu_api::status_rejection(&status).expect("a Kungfu rejection");
        assert_eq!((r.code, r.field.as_deref(), r.definite), (Code::TrustViolation, Some(field), true));
        assert_eq!(r.fak_reason(), Some(FakReason::TrustViolation));
        // The raw ErrorInfo, as any gRPC client reads it.
        let details = tonic_types::StatusExt::check_error_details(&status).expect("details");
        let info = details.error_info().expect("ErrorInfo");
        assert_eq!(info.reason, "TRUST_VIOLATION");
        assert_eq!(info.metadata.get("fak_reason").map(String::as_str), Some("TRUST_VIOLATION"));
        assert_eq!(info.metadata.get("next_step").map(String::as_str), Some("revise"));
    }
    assert_eq!(applied_seq(&nodes[0].b), before, "a refusal records no fact");
    let timeline = member
        .threads()
        .timeline(member.req(pb::TimelineRequest { thread: thread.clone(), after: 0, page_size: 0 }))
        .await
        .expect("timeline")
        .into_inner();
    assert!(timeline.entries.is_empty(), "nothing was posted");

    // A malformed request is refused at the door, by its wire path, before the core sees it.
    let status = gov
        .send_raw(&thread, fleet("x"), Some(pb::send_to::Kind::Agents(pb::Agents { agents: vec!["me".into()] })), None)
        .await
        .expect_err("malformed");
    let r = kungfu_api::status_rejection(&status).expect("a Kungfu rejection");
    assert_eq!((r.code, r.field.as_deref()), (Code::InvalidArgument, Some("to.agents.agents[0]")));
    assert_eq!(applied_seq(&nodes[0].b), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_forwards_coordination_calls_to_its_leader() {
    let nodes = cluster(3).await;
    let follower = nodes.iter().find(|n| !n.b.node.is_leader()).expect("a follower");
    let start = Instant::now();
    while follower.b.node.leader_elsewhere().is_none() {
        assert!(start.elapsed() < BOUND, "the follower never learned its leader");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let ch = connect(follower.api).await;
    let (gov, member) = (Agent::register(&ch).await, Agent::register(&ch).await);
    let thread = gov.thread_with(&[&member]).await;

    // A write and a linearizable read of CoordService, both sent to the follower: the follower
    // would refuse the write NOT_LEADER itself, so its success is the forward.
    let sent = gov.send(&thread, fleet("via a follower"), agents(&[&member])).await;
    let barrier = member.barrier(&thread, sent.entry).await;
    assert_eq!((barrier.state, barrier.pending), (pb::BarrierState::Waiting as i32, 1));
    assert!(!follower.b.node.is_leader(), "the follower answered nothing itself");
}
