//! The deadline scheduler on a real single-node replica (L4, DESIGN §4): deadlines found in the due
//! index when the scheduler starts leading and deadlines armed afterwards from the fact feed both
//! end, exactly once each; deadlines that are due together end together, in a few log entries
//! rather than one raft round each.

mod common;

use common::key;
use kungfu_api::KeyedAction;
use kungfu_core::model::{AssignmentOutcome, AssignmentState};
use kungfu_core::rebuild::all_facts;
use kungfu_core::{Action, ActionResult, Fact, NewAssignment, PostBody, Principal, StateExt};
use kungfu_raft::{NodeConfig, RaftNode};
use kungfu_server::Config;
use kungfu_server::backend::Backend;
use kungfu_types::{AgentId, AssignmentId, Content, Micros, ThreadId};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BOUND: Duration = Duration::from_secs(60);

struct Fixture {
    b: Arc<Backend>,
    stop: tokio::sync::watch::Sender<bool>,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    fixture_with(kungfu_raft::feed::DEFAULT_FEED_CAPACITY).await
}

async fn fixture_with(feed_capacity: usize) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = NodeConfig::new(1, "deadlines", dir.path(), "127.0.0.1:0".parse().expect("addr"));
    config.feed_capacity = feed_capacity;
    let node = Arc::new(RaftNode::start(config).await.expect("start"));
    node.initialize([(1, node.node())].into_iter().collect()).await.expect("init");
    until("the node leads", || node.leads_caught_up()).await;
    let b = Arc::new(Backend::new(node, Arc::new(Config::default())));
    Fixture { b, stop: tokio::sync::watch::channel(false).0, _dir: dir }
}

async fn until(what: &str, done: impl Fn() -> bool) {
    common::until(what, BOUND, done).await
}

impl Fixture {
    fn start_scheduler(&self) {
        tokio::spawn(kungfu_server::deadlines::run(self.b.clone(), self.stop.subscribe()));
    }

    async fn ok(&self, p: Principal, action: Action) -> ActionResult {
        common::ok(&self.b, p, action).await.receipt.result
    }

    async fn agent(&self) -> AgentId {
        common::agent(&self.b).await
    }

    async fn thread_with(&self, gov: AgentId, member: AgentId) -> ThreadId {
        common::thread_with(&self.b, gov, member).await
    }

    /// `n` assignments from `gov` to `worker`, each taken, each due one second after its taking.
    async fn taken_assignments(&self, gov: AgentId, worker: AgentId, thread: ThreadId, n: usize) -> Vec<AssignmentId> {
        let mut out = Vec::new();
        for _ in 0..n {
            let action = Action::Post {
                thread,
                body: PostBody::Content(Content::from("do it")),
                reply_to: None,
                ask: Some(BTreeSet::new()),
                task_ref: None,
                assignment: Some(NewAssignment {
                    addressee: worker,
                    criteria: Content::from("c"),
                    output_structure: None,
                    delivery_window: Some(Micros::from_secs(1)),
                    judgment_window: None,
                }),
            };
            let ActionResult::Posted { assignment: Some(a), .. } = self.ok(Principal::Agent(gov), action).await else {
                panic!("no assignment")
            };
            self.ok(Principal::Agent(worker), Action::TakeAssignment { assignment: a }).await;
            out.push(a);
        }
        out
    }

    fn timed_out(&self, a: AssignmentId) -> bool {
        let asg = self.b.node.state.read(|s| s.assignment(a)).expect("read").expect("exists");
        matches!(asg.state, AssignmentState::Ended { outcome: AssignmentOutcome::TimedOut, .. })
    }

    /// How many DeadlinePassed facts each obligation has, over the whole journal.
    fn deadline_facts(&self) -> BTreeMap<kungfu_core::model::ObligationId, usize> {
        let facts = self.b.node.state.read(|s| all_facts(s)).expect("facts");
        let mut n = BTreeMap::new();
        for f in facts {
            if let Fact::DeadlinePassed { obligation, .. } = f.fact {
                *n.entry(obligation).or_insert(0) += 1;
            }
        }
        n
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deadlines_due_together_end_together_in_a_few_log_entries() {
    let f = fixture().await;
    let (gov, worker) = (f.agent().await, f.agent().await);
    let thread = f.thread_with(gov, worker).await;
    const N: usize = 200;
    let assignments = f.taken_assignments(gov, worker, thread, N).await;
    // Every deadline passes before the scheduler starts: it finds all of them in the due index.
    let last_due = Instant::now() + Duration::from_millis(1100);
    tokio::time::sleep_until(last_due.into()).await;
    let before = f.b.node.applied_index().expect("applied");

    f.start_scheduler();
    until("every deadline ended", || assignments.iter().all(|a| f.timed_out(*a))).await;
    let entries = f.b.node.applied_index().expect("applied") - before;
    assert!(
        entries <= (N / kungfu_server::deadlines::MAX_BATCH + 1) as u64 + 1,
        "{N} due deadlines took {entries} log entries; they are proposed together"
    );
    let counts = f.deadline_facts();
    assert_eq!(counts.len(), N, "every obligation ended by its deadline");
    assert!(counts.values().all(|n| *n == 1), "each exactly once (L4): {counts:?}");
    let _ = f.stop.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_armed_while_leading_ends_exactly_once() {
    let f = fixture().await;
    let (gov, worker) = (f.agent().await, f.agent().await);
    let thread = f.thread_with(gov, worker).await;
    f.start_scheduler();
    // Armed from the feed: the scheduler was already leading when these deadlines arose.
    let assignments = f.taken_assignments(gov, worker, thread, 20).await;
    until("every deadline ended", || assignments.iter().all(|a| f.timed_out(*a))).await;
    let counts = f.deadline_facts();
    assert_eq!(counts.len(), 20);
    assert!(counts.values().all(|n| *n == 1), "each exactly once (L4): {counts:?}");
    let _ = f.stop.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_serves_writes_only_once_its_deadline_timers_are_armed() {
    let f = fixture().await;
    let registrar = |n: u64| {
        let s = common::secret(&format!("kf_armed_{n}"));
        Action::RegisterAgent {
            key_hash: kungfu_core::secret::hash_secret(&s),
            key_fingerprint: kungfu_core::secret::fingerprint(&s),
        }
    };
    // A scheduler that has not armed this term's timers yet (as right after an election).
    f.b.timers.send_modify(|t| t.scheduling = true);
    let b = f.b.clone();
    let mut early =
        tokio::spawn(
            async move { b.submit(Principal::Registrar, KeyedAction { key: key(), action: registrar(1) }).await },
        );
    if let Ok(answer) = tokio::time::timeout(Duration::from_millis(500), &mut early).await {
        panic!("a write was served before the deadline timers were armed: {answer:?}");
    }
    // The real scheduler arms them; the waiting write goes through.
    f.start_scheduler();
    let answer = tokio::time::timeout(BOUND, early).await.expect("answered").expect("join");
    assert!(answer.is_ok(), "{answer:?}");
    assert_eq!(f.b.timers.borrow().armed_term, f.b.node.term(), "armed for the term it leads in");
    let _ = f.stop.send(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduler_that_falls_behind_the_feed_rereads_the_due_index_and_misses_nothing() {
    // A feed that keeps one event: the scheduler lags behind it again and again while deadlines
    // arise (the feed's lag policy: re-read the due index, never skip).
    // Each assignment in a thread of its own: an expiry settles every due deadline of its own
    // object first (L4), so a deadline the scheduler failed to arm would not be ended by another.
    let f = Arc::new(fixture_with(1).await);
    let (gov, worker) = (f.agent().await, f.agent().await);
    f.start_scheduler();
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let f = f.clone();
        tasks.push(tokio::spawn(async move {
            let mut taken = Vec::new();
            for _ in 0..30 {
                let thread = f.thread_with(gov, worker).await;
                taken.extend(f.taken_assignments(gov, worker, thread, 1).await);
            }
            taken
        }));
    }
    let mut assignments = Vec::new();
    for t in tasks {
        assignments.extend(t.await.expect("join"));
    }
    until("every deadline ended", || assignments.iter().all(|a| f.timed_out(*a))).await;
    let counts = f.deadline_facts();
    assert_eq!(counts.len(), assignments.len());
    assert!(counts.values().all(|n| *n == 1), "each exactly once (L4): {counts:?}");
    let _ = f.stop.send(true);
}
