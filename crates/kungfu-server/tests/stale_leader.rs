//! A new leader never decides from a stale state (L5, §9; issue #12). Raft elects a node for its
//! log, not for what it has applied: right after an election the new leader may not yet have
//! applied entries that the old leader acknowledged. Three in-process replicas; node 2's apply is
//! held back (its log still receives every entry) while node 1 acknowledges a join, then node 2 is
//! made leader. A post by the member that joined must not be refused `NOT_MEMBER` from node 2's
//! stale state: it waits until node 2 has applied its own term, then succeeds, stamped after the
//! acknowledged join.

mod common;

use common::{key, secret};
use kungfu_api::KeyedAction;
use kungfu_core::{Action, ActionResult, Command, NewGrant, Principal};
use kungfu_raft::{NodeConfig, RaftNode};
use kungfu_server::Config;
use kungfu_server::backend::{Backend, Written};
use kungfu_types::{AgentId, Content, Role, ThreadId};
use std::sync::Arc;
use std::time::Duration;

/// How long the test waits for anything that must happen (elections, applies) before failing.
const BOUND: Duration = Duration::from_secs(30);

struct Cluster {
    nodes: Vec<Arc<RaftNode>>,
    backends: Vec<Arc<Backend>>,
    _dirs: Vec<tempfile::TempDir>,
}

async fn cluster() -> Cluster {
    let mut nodes = Vec::new();
    let mut dirs = Vec::new();
    for id in 1..=3u64 {
        let dir = tempfile::tempdir().expect("tempdir");
        let node =
            RaftNode::start(NodeConfig::new(id, "stale-leader", dir.path(), "127.0.0.1:0".parse().expect("addr")))
                .await
                .expect("start");
        nodes.push(Arc::new(node));
        dirs.push(dir);
    }
    let members = nodes.iter().map(|n| (n.id, n.node())).collect();
    nodes[0].initialize(members).await.expect("initialize");
    let mut config = Config::default();
    // Long enough that the held-back post below is still waiting, not timed out, when released.
    config.api.write_timeout_ms = BOUND.as_millis() as u64;
    let config = Arc::new(config);
    let backends = nodes.iter().map(|n| Arc::new(Backend::new(n.clone(), config.clone()))).collect();
    let c = Cluster { nodes, backends, _dirs: dirs };
    c.until("node 1 leads and has applied its term", |c| c.nodes[0].leads_caught_up()).await;
    c
}

impl Cluster {
    async fn until(&self, what: &str, done: impl Fn(&Cluster) -> bool) {
        common::until(what, BOUND, || done(self)).await
    }

    async fn ok(&self, node: usize, p: Principal, action: Action) -> Written {
        common::ok(&self.backends[node], p, action).await
    }

    async fn agent(&self) -> AgentId {
        common::agent(&self.backends[0]).await
    }

    /// A new thread governed by `governor`, created through node 1.
    async fn thread_of(&self, governor: AgentId) -> ThreadId {
        let created = Action::CreateThread { subject: Content::from("s"), grant: None };
        let ActionResult::ThreadCreated { thread, .. } =
            self.ok(0, Principal::Agent(governor), created).await.receipt.result
        else {
            panic!("no thread")
        };
        thread
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_behind_on_apply_never_refuses_an_acknowledged_member() {
    let c = cluster().await;
    let (governor, member) = (c.agent().await, c.agent().await);
    let thread = c.thread_of(governor).await;
    let grant = secret("kf_gr");
    let new_grant = NewGrant {
        role: Role::Speaker,
        hash: kungfu_core::secret::hash_secret(&grant),
        fingerprint: kungfu_core::secret::fingerprint(&grant),
    };
    c.ok(0, Principal::Agent(governor), Action::IssueGrant { thread, grant: new_grant }).await;
    let synced = c.nodes[0].applied_index();
    c.until("node 2 applied the grant", |c| c.nodes[1].applied_index() >= synced).await;

    // Node 2 stops applying; its log still takes every entry, so it stays electable.
    c.nodes[1].apply_gate.hold();
    let joined =
        c.ok(0, Principal::Agent(member), Action::Join { grant_hash: kungfu_core::secret::hash_secret(&grant) }).await;
    // Node 1's applied index as its state store holds it (its metrics may trail the answer).
    let join_index = c.nodes[0].digest().expect("digest").1;
    assert!(c.nodes[1].applied_index() < join_index, "node 2 must not have applied the acknowledged join");

    c.nodes[0].transfer_leader(2).await.expect("transfer");
    c.until("node 2 leads", |c| c.nodes[1].is_leader()).await;
    assert!(!c.nodes[1].leads_caught_up(), "node 2 leads with its apply held: it is not caught up");

    // The member's post reaches the new leader, whose applied state has no join yet. Before the
    // fix its pre-check answered NOT_MEMBER from that state at once, a definite refusal of an
    // acknowledged member. Now it waits for the state to catch up: while apply is held it stays
    // undecided.
    let b2 = c.backends[1].clone();
    let mut pending = tokio::spawn(async move {
        b2.submit(Principal::Agent(member), KeyedAction { key: key(), action: common::post(thread, None) }).await
    });
    if let Ok(early) = tokio::time::timeout(Duration::from_millis(500), &mut pending).await {
        let answer = early.expect("join");
        panic!("node 2 decided from a state without the acknowledged join: {answer:?}");
    }

    c.nodes[1].apply_gate.release();
    let posted = tokio::time::timeout(BOUND, pending).await.expect("the post is answered").expect("join");
    let posted = match posted {
        Ok(w) => w,
        Err(s) => panic!("the acknowledged member was refused by the new leader: {s}"),
    };
    assert!(matches!(posted.receipt.result, ActionResult::Posted { .. }), "{:?}", posted.receipt.result);
    assert!(
        posted.receipt.at > joined.receipt.at,
        "the new leader stamped {:?}, not after the acknowledged join at {:?}",
        posted.receipt.at,
        joined.receipt.at
    );
    for n in &c.nodes {
        n.apply_gate.release();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_catch_up_in_time_answers_a_definite_retry() {
    let mut c = cluster().await;
    let mut config = Config::default();
    config.api.write_timeout_ms = 300;
    c.backends[1] = Arc::new(Backend::new(c.nodes[1].clone(), Arc::new(config)));
    let agent = c.agent().await;
    c.nodes[1].apply_gate.hold();
    c.ok(0, Principal::Agent(agent), Action::CreateThread { subject: Content::from("s"), grant: None }).await;
    c.nodes[0].transfer_leader(2).await.expect("transfer");
    c.until("node 2 leads", |c| c.nodes[1].is_leader()).await;

    let refused = c.backends[1]
        .submit(
            Principal::Agent(agent),
            KeyedAction { key: key(), action: Action::CreateThread { subject: Content::from("t"), grant: None } },
        )
        .await
        .expect_err("node 2 cannot have applied its term with its apply held");
    let r = &refused;
    assert_eq!(r.code.as_str(), "UNAVAILABLE", "{refused}");
    assert!(r.definite, "nothing was proposed, so the refusal is definite: {r:?}");
    assert!(r.retry_after.is_some(), "it says when to retry: {r:?}");
    c.nodes[1].apply_gate.release();
}

/// The write's one leadership gate (`Backend::lead`) returns a proof that names its term, and the
/// pre-check decides only while that proof holds: once the node has lost the lead, and even after
/// it wins it again in a later term, the old proof decides nothing from the state (the command is
/// left to apply); a new pass of the gate does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proof_of_the_gate_from_an_earlier_term_decides_nothing() {
    let c = cluster().await;
    let (governor, outsider) = (c.agent().await, c.agent().await);
    let thread = c.thread_of(governor).await;
    // An outsider's post: the pre-check refuses it from the state (NOT_FOUND: to an outsider a
    // thread it cannot read does not exist, §9), with no log write.
    let post = Command::new(
        Principal::Agent(outsider),
        common::post(thread, None),
        Some(key()),
        c.nodes[0].provisional_stamp(),
    );
    // What the pre-check answered: the refusal's code, or why it is not one.
    let answered = |answer: Option<Result<Written, kungfu_types::Rejection>>| match answer {
        Some(Err(r)) => r.code.as_str().to_string(),
        Some(Ok(w)) => format!("a receipt: {w:?}"),
        None => "left to apply".to_string(),
    };
    let first = c.backends[0].lead().await.expect("node 1 passes the gate");
    assert_eq!(
        answered(c.backends[0].precheck(first, &post)),
        "NOT_FOUND",
        "the pre-check decides under a proof that holds"
    );

    c.nodes[0].transfer_leader(2).await.expect("transfer");
    c.until("node 2 leads", |c| c.nodes[1].is_leader()).await;
    assert!(!c.nodes[0].still_leads(first));
    assert!(c.backends[0].precheck(first, &post).is_none(), "a node that lost the lead decided from its state");
    let lost = c.backends[0].lead().await.expect_err("node 1 no longer passes the gate");
    assert_eq!(lost.code.as_str(), "NOT_LEADER", "{lost:?}");

    c.until("node 2 has applied its term", |c| c.nodes[1].leads_caught_up()).await;
    c.nodes[1].transfer_leader(1).await.expect("transfer back");
    c.until("node 1 leads again, caught up", |c| c.nodes[0].leads_caught_up()).await;
    assert!(
        c.backends[0].precheck(first, &post).is_none(),
        "a proof of an earlier term decided, though that term's leadership was lost in between"
    );
    let again = c.backends[0].lead().await.expect("node 1 passes the gate again");
    assert!(again.term() > first.term(), "{again:?} after {first:?}");
    assert_eq!(answered(c.backends[0].precheck(again, &post)), "NOT_FOUND", "the new proof decides");
}
