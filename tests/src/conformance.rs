//! The harness of the black-box conformance suite (`tests/conformance/`, issue #6, spec §10).
//!
//! Every case talks to a real three-node cluster of `kungfud` processes only through the public
//! gRPC API, with the Rust SDK (`kungfu-client`) pointed at all three nodes. Cases are independent:
//! each registers its own agents, so any number of them share one cluster and run concurrently.
//!
//! The suite binary lists one trial per case (`<section>::<behaviour>`), runnable alone, and two
//! trials that run every case against one fresh cluster each:
//! - `suite::every_case_on_one_cluster`;
//! - `suite::every_case_with_the_leader_killed_midway`: when half of the cases have finished, the
//!   leader is killed with SIGKILL; the rest run on the two survivors (the SDK retries in-flight
//!   writes with the same idempotency key on the new leader, L3); when three quarters have
//!   finished, the killed node is started again and must catch up: at the end every node reports
//!   the same applied index and the same state digest there.
//!
//! CI runs the two suite trials (`.config/nextest.toml` filters out the per-case trials, which
//! would start one cluster per case under nextest's process-per-test model). Run one case with
//! `cargo nextest run --workspace --ignore-default-filter -E 'test(=s6_threads::name)'` or
//! `cargo test --test conformance -- s6_threads::name`.

use crate::{BOUND, Cluster};
use futures::StreamExt;
use kungfu_client::{Client, ClientOptions, Code, Error, Rejection, pb};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub use kungfu_client::{Post, new_assignment, text};

/// The operator token of the conformance cluster (agent deactivation by the operator, status).
pub const OPERATOR_TOKEN: &str = "conformance-operator-token";

/// The node settings of the conformance cluster: registration is not rate limited (the suite
/// registers hundreds of agents from one address; the rate-limit cases start their own node), and
/// the capacities the capacity cases fill are small.
pub const CLUSTER_SETTINGS: &str = "operator_token = \"conformance-operator-token\"\n\
[rate_limits]\nregistrations_per_minute_per_ip = 0\n\
[limits]\nmax_open_assignments_per_thread = 8\nmax_members_per_thread = 64\nmax_memories_per_agent = 40\nmax_ask = 6\nmax_note_bytes = 200\n";

/// How long one case may run before it counts as failed (a hang is a failure, never a stall).
pub const CASE_BOUND: Duration = Duration::from_secs(120);

/// How many cases run at once in a suite trial.
const CONCURRENCY: usize = 8;

type CaseFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// One conformance case: a named behaviour and the statement rows (`docs/conformance.md` ids) it
/// is evidence for. A case fails by panicking (assertions).
#[derive(Clone, Copy)]
pub struct Case {
    pub name: &'static str,
    pub rows: &'static [&'static str],
    pub run: fn(Ctx) -> CaseFuture,
}

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Case").field("name", &self.name).field("rows", &self.rows).finish()
    }
}

/// Declares a section's cases: `cases! { fn_name ["§6.3.r1", "§6.3.7"], ... }` makes `CASES`.
#[macro_export]
macro_rules! cases {
    ($($f:ident [$($row:literal),* $(,)?]),* $(,)?) => {
        pub const CASES: &[$crate::conformance::Case] = &[$(
            $crate::conformance::Case {
                name: stringify!($f),
                rows: &[$($row),*],
                run: |cx| Box::pin($f(cx)),
            }
        ),*];
    };
}

/// A section of the suite: its module name (the file in `tests/conformance/`) and its cases.
pub type Section = (&'static str, &'static [Case]);

/// A running three-node cluster and an anonymous SDK client of all its nodes.
#[derive(Debug)]
pub struct World {
    pub cluster: Mutex<Cluster>,
    pub sdk: Client,
    endpoints: Vec<String>,
}

impl World {
    /// Starts three `kungfud` processes and waits until an agent can register.
    pub async fn start() -> World {
        let cluster = Cluster::start(3, CLUSTER_SETTINGS);
        let endpoints: Vec<String> = cluster.nodes.values().map(|n| n.api.to_string()).collect();
        // Enough retries to ride out a leader election (the leader-kill trial): an in-flight write is
        // retried with its key on the new leader (L3) instead of coming back indeterminate.
        let options = ClientOptions { max_retries: 40, ..ClientOptions::default() };
        let sdk = Client::connect(endpoints.clone(), None, options).await.expect("sdk connects");
        let world = World { cluster: Mutex::new(cluster), sdk, endpoints };
        let start = Instant::now();
        loop {
            match world.sdk.register(None).await {
                Ok(_) => break,
                Err(e) => {
                    assert!(start.elapsed() < BOUND, "the cluster never served a registration: {e}\n{}", world.logs());
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        world
    }

    pub fn logs(&self) -> String {
        self.cluster.lock().map(|c| c.logs()).unwrap_or_default()
    }

    /// Every node's status, from the nodes that answer.
    pub async fn statuses(&self) -> Vec<pb::ClusterStatusResponse> {
        let mut out = Vec::new();
        for e in &self.endpoints {
            let Ok(c) = Client::connect(vec![e.clone()], Some(OPERATOR_TOKEN.into()), quick()).await else { continue };
            if let Ok(s) = c.cluster_status(pb::ClusterStatusRequest {}).await {
                out.push(s);
            }
        }
        out
    }

    /// The node all answering nodes agree leads (bounded poll).
    pub async fn leader(&self) -> u64 {
        let start = Instant::now();
        loop {
            let all = self.statuses().await;
            if let Some(l) = all.first().and_then(|s| s.leader_id) {
                let agree = all.iter().all(|s| s.leader_id == Some(l));
                let leads = all.iter().any(|s| s.node_id == l && s.role == pb::RaftRole::Leader as i32);
                if agree && leads {
                    return l;
                }
            }
            assert!(start.elapsed() < BOUND, "no agreed leader: {all:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until every node runs and reports the same applied index, and checks that their state
    /// digests at that index are equal (bounded); returns the index.
    pub async fn converged(&self) -> u64 {
        let start = Instant::now();
        loop {
            let mut seen = Vec::new();
            for e in &self.endpoints {
                let Ok(c) = Client::connect(vec![e.clone()], Some(OPERATOR_TOKEN.into()), quick()).await else {
                    continue;
                };
                if let Ok(d) = c.state_digest(pb::StateDigestRequest {}).await {
                    seen.push(d);
                }
            }
            let same_index = seen.len() == self.endpoints.len()
                && seen.iter().all(|d| d.applied_index.is_some() && d.applied_index == seen[0].applied_index);
            if same_index {
                assert!(
                    seen.iter().all(|d| d.sha256 == seen[0].sha256),
                    "replicas at the same applied index disagree on the state: {seen:?}"
                );
                return seen[0].applied_index.unwrap_or(0);
            }
            let at: Vec<_> = seen.iter().map(|d| (d.node_id, d.applied_index)).collect();
            assert!(start.elapsed() < BOUND, "nodes never converged on one applied index: {at:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn quick() -> ClientOptions {
    ClientOptions { max_retries: 0, call_timeout: Duration::from_secs(2), ..ClientOptions::default() }
}

/// What a case gets: the shared world and a source of unique names.
#[derive(Clone, Debug)]
pub struct Ctx {
    pub world: Arc<World>,
}

static UNIQUE: AtomicU64 = AtomicU64::new(0);

/// A name no other call in this process returns (idempotency keys of hand-made requests).
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}-{}", std::process::id(), UNIQUE.fetch_add(1, Ordering::Relaxed))
}

/// A registered agent and an SDK client acting as it on every node.
#[derive(Clone, Debug)]
pub struct Agent {
    pub id: String,
    pub key: String,
    pub c: Client,
}

/// A thread and the live grant secret its creator received.
#[derive(Clone, Debug)]
pub struct Thread {
    pub id: String,
    pub secret: String,
}

impl Ctx {
    /// Registers a new agent.
    /// Registers a new agent. A registration whose answer was lost (the leader died with it in
    /// flight) shows its key to nobody (L3), so that agent is abandoned and another registered.
    pub async fn agent(&self) -> Agent {
        let mut attempts = 0;
        loop {
            match self.world.sdk.register(None).await {
                Ok(r) => return Agent { id: r.agent, key: r.agent_key, c: r.client },
                Err(e @ (Error::SecretLost { .. } | Error::Indeterminate { .. })) if attempts < 5 => {
                    attempts += 1;
                    eprintln!("registering again: {e}");
                }
                Err(e) => panic!("register an agent: {e}"),
            }
        }
    }

    pub async fn agents(&self, n: usize) -> Vec<Agent> {
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.agent().await);
        }
        v
    }

    /// A thread governed by `lead` whose other members are `members`, joined as speakers.
    pub async fn team(&self, lead: &Agent, members: &[&Agent]) -> Thread {
        let t = lead.thread(pb::Role::Speaker).await;
        for m in members {
            m.join(&t.secret).await;
        }
        t
    }

    /// An anonymous client (no agent key) of every node.
    pub fn anonymous(&self) -> Client {
        self.world.sdk.clone()
    }
}

/// The result of a receipt, or a panic naming what was missing.
pub fn result(receipt: Option<pb::Receipt>) -> pb::receipt::Result {
    receipt.and_then(|r| r.result).expect("a receipt with a result")
}

/// Takes a receipt's result apart: `outcome!(written.value.receipt, Posted)` is the `pb::Posted`.
#[macro_export]
macro_rules! outcome {
    ($receipt:expr, $variant:ident) => {
        match $crate::conformance::result($receipt) {
            kungfu_client::pb::receipt::Result::$variant(x) => x,
            other => panic!("expected a {} receipt, got {other:?}", stringify!($variant)),
        }
    };
}

/// The definite rejection of a failed call; panics on success or on an indeterminate failure.
pub fn rejection<T: std::fmt::Debug>(r: Result<T, Error>) -> Rejection {
    match r {
        Err(Error::Rejected(rej)) => {
            assert!(rej.definite, "a rejection must be definite: {rej:?}");
            rej
        }
        other => panic!("expected a definite rejection, got {other:?}"),
    }
}

/// Asserts that a call was rejected with `code`, with a message and a next step (L2.4); returns it.
#[track_caller]
pub fn refused<T: std::fmt::Debug>(r: Result<T, Error>, code: Code) -> Rejection {
    let rej = rejection(r);
    assert_eq!(rej.code, code, "wrong code: {rej:?}");
    assert!(!rej.message.is_empty(), "a rejection states its reason: {rej:?}");
    rej
}

/// The code of a definite rejection, or None for a success.
pub fn code_of<T: std::fmt::Debug>(r: &Result<T, Error>) -> Option<Code> {
    match r {
        Ok(_) => None,
        Err(Error::Rejected(rej)) => {
            assert!(rej.definite, "a rejection must be definite: {rej:?}");
            Some(rej.code)
        }
        Err(e) => panic!("expected a success or a definite rejection, got {e}"),
    }
}

/// The thread's summary as `reader` (a member) sees it in its working set.
pub async fn thread_summary(reader: &Agent, thread: &str) -> pb::ThreadSummary {
    match reader.working_set(thread).await.expect("a member reads the thread's working set").summary {
        Some(pb::working_set::Summary::Thread(t)) => t,
        other => panic!("expected a thread summary, got {other:?}"),
    }
}

/// The current members' ids, sorted.
pub fn member_ids(t: &pb::ThreadSummary) -> Vec<String> {
    let mut v: Vec<String> = t.members.iter().map(|m| m.agent.clone()).collect();
    v.sort();
    v
}

/// The judgment deadline of a delivered assignment.
pub fn judgment_due(a: &pb::Assignment) -> Option<i64> {
    match &a.state {
        Some(pb::assignment::State::Delivered(d)) => Some(d.judgment_due_unix_micros),
        _ => None,
    }
}

/// Microseconds since the Unix epoch on this machine's clock.
pub fn now_micros() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}

/// Sleeps until the wall clock has passed `due_micros` (a deadline a receipt stated) plus `margin`.
pub async fn sleep_past(due_micros: i64, margin: Duration) {
    let wait = due_micros.saturating_sub(now_micros()).max(0) as u64;
    tokio::time::sleep(Duration::from_micros(wait) + margin).await;
}

/// Polls `probe` until it returns `Some` (bounded by [`BOUND`]); `what` names the wait in the failure.
pub async fn eventually<T, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(start.elapsed() < BOUND, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One second, in the micros of the wire: the shortest window the default limits allow.
pub const SECOND: u64 = 1_000_000;

impl Agent {
    /// Creates a Memory with `body`; returns its pin (id and version 1).
    pub async fn memory(&self, body: &str) -> pb::MemoryPin {
        let w = self
            .c
            .create_memory(pb::CreateMemoryRequest { content: text(body), ..Default::default() }, None)
            .await
            .expect("create memory");
        outcome!(w.value.receipt, MemoryCreated)
    }

    /// Creates a thread whose live grant binds `role`. When the SDK had to resend the creation (a
    /// leader died with it in flight), the replay shows no secret (L3), so a new grant is issued.
    pub async fn thread(&self, role: pb::Role) -> Thread {
        let w = self
            .c
            .create_thread(
                pb::CreateThreadRequest {
                    subject: text("a thread"),
                    grant: Some(pb::GrantSpec { role: role as i32 }),
                    ..Default::default()
                },
                None,
            )
            .await
            .expect("create thread");
        let created = outcome!(w.value.receipt, ThreadCreated);
        let mut secret = w.value.grant_secret;
        for _ in 0..5 {
            if !secret.is_empty() {
                break;
            }
            let g = self
                .c
                .issue_grant(
                    pb::IssueGrantRequest { thread: created.thread.clone(), role: role as i32, ..Default::default() },
                    None,
                )
                .await
                .expect("issue a grant");
            secret = g.value.grant_secret;
        }
        assert!(!secret.is_empty(), "no grant secret after five issues");
        Thread { id: created.thread, secret }
    }

    /// Joins with a grant secret (must succeed).
    pub async fn join(&self, secret: &str) -> pb::Joined {
        let w = self.c.join(pb::JoinRequest { grant_secret: secret.into(), ..Default::default() }, None).await;
        outcome!(w.expect("join").value.receipt, Joined)
    }

    /// Posts (must succeed).
    pub async fn post(&self, p: Post) -> pb::Posted {
        let w = self.c.post(p, None).await.expect("post");
        outcome!(w.value.receipt, Posted)
    }

    /// Posts an entry with an assignment to `to`, asking nobody; returns (entry, assignment).
    pub async fn assign(&self, thread: &str, to: &str, delivery: Option<u64>, judgment: Option<u64>) -> (u64, String) {
        let mut a = new_assignment(to, "acceptance criteria");
        a.delivery_window_micros = delivery;
        a.judgment_window_micros = judgment;
        let p = self.post(Post::text(thread, "work").ask(Vec::<String>::new()).assignment(a)).await;
        (p.entry, p.assignment.expect("the receipt names the assignment"))
    }

    pub async fn take(&self, assignment: &str) -> pb::AssignmentTaken {
        let w = self
            .c
            .take_assignment(pb::TakeAssignmentRequest { assignment: assignment.into(), ..Default::default() }, None)
            .await
            .expect("take");
        outcome!(w.value.receipt, AssignmentTaken)
    }

    pub async fn deliver(&self, assignment: &str, output: &str) -> pb::AssignmentDelivered {
        let w = self
            .c
            .deliver_assignment(
                pb::DeliverAssignmentRequest {
                    assignment: assignment.into(),
                    output: text(output),
                    ..Default::default()
                },
                None,
            )
            .await
            .expect("deliver");
        outcome!(w.value.receipt, AssignmentDelivered)
    }

    pub async fn assignment(&self, id: &str) -> pb::Assignment {
        self.c.get_assignment(pb::GetAssignmentRequest { assignment: id.into() }).await.expect("read assignment")
    }

    /// Creates a Task from a contract draft; returns its id.
    pub async fn task(&self, audience: pb::audience::Kind, contract: pb::ContractDraft) -> String {
        let w = self
            .c
            .create_task(
                pb::CreateTaskRequest {
                    audience: Some(pb::Audience { kind: Some(audience) }),
                    contract: Some(contract),
                    ..Default::default()
                },
                None,
            )
            .await
            .expect("create task");
        outcome!(w.value.receipt, TaskCreated).task
    }

    /// Takes a Task (must succeed); returns the engagement receipt.
    pub async fn take_task(&self, task: &str) -> pb::Engaged {
        let w = self
            .c
            .take_task(pb::TakeTaskRequest { task: task.into(), ..Default::default() }, None)
            .await
            .expect("take task");
        outcome!(w.value.receipt, Engaged)
    }

    pub async fn deliver_task(&self, task: &str, output: &str) -> pb::EngagementDelivered {
        let w = self
            .c
            .deliver_task(
                pb::DeliverTaskRequest { task: task.into(), output: text(output), ..Default::default() },
                None,
            )
            .await
            .expect("deliver task");
        outcome!(w.value.receipt, EngagementDelivered)
    }

    pub async fn engagement(&self, id: &str) -> pb::Engagement {
        self.c.get_engagement(pb::GetEngagementRequest { engagement: id.into() }).await.expect("read engagement")
    }

    /// The whole turn (every page).
    pub async fn turn(&self) -> Vec<pb::TurnItem> {
        self.c.turn_all(1000).await.expect("read turn")
    }

    /// Every opportunity (every page).
    pub async fn opportunities(&self) -> Vec<pb::Opportunity> {
        let mut out = Vec::new();
        let mut cursor = String::new();
        for _ in 0..1000 {
            let page = self
                .c
                .get_opportunities(pb::GetOpportunitiesRequest { cursor: cursor.clone(), page_size: 100 })
                .await
                .expect("read opportunities");
            out.extend(page.items);
            if page.next_cursor.is_empty() {
                return out;
            }
            cursor = page.next_cursor;
        }
        panic!("opportunities never ended")
    }

    pub async fn working_set(&self, object: &str) -> Result<pb::WorkingSet, Error> {
        self.c.get_working_set(pb::GetWorkingSetRequest { object: object.into() }).await
    }
}

/// A contract draft with the given windows and everything else unstated.
pub fn contract(delivery: Option<u64>, judgment: Option<u64>) -> pb::ContractDraft {
    pb::ContractDraft {
        requirements: text("requirements"),
        acceptance: text("acceptance"),
        delivery_window_micros: delivery,
        judgment_window_micros: judgment,
        ..Default::default()
    }
}

/// The open audience.
pub fn open() -> pb::audience::Kind {
    pb::audience::Kind::Open(pb::OpenAudience {})
}

/// A restricted audience naming `agents`.
pub fn restricted(agents: &[&Agent]) -> pb::audience::Kind {
    pb::audience::Kind::Restricted(pb::RestrictedAudience { agents: agents.iter().map(|a| a.id.clone()).collect() })
}

/// The outcome of an ended assignment, if it ended.
pub fn assignment_outcome(a: &pb::Assignment) -> Option<pb::AssignmentOutcome> {
    match &a.state {
        Some(pb::assignment::State::Ended(e)) => pb::AssignmentOutcome::try_from(e.outcome).ok(),
        _ => None,
    }
}

/// The outcome of an ended engagement, if it ended.
pub fn engagement_outcome(e: &pb::Engagement) -> Option<pb::EngagementOutcome> {
    match &e.state {
        Some(pb::engagement::State::Ended(x)) => pb::EngagementOutcome::try_from(x.outcome).ok(),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// The runner.

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime"))
}

/// The world shared by the per-case trials of this process, started on first use.
static SHARED: Mutex<Option<Arc<World>>> = Mutex::new(None);

fn shared_world() -> Arc<World> {
    let mut g = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(w) = g.as_ref() {
        return w.clone();
    }
    let w = Arc::new(runtime().block_on(World::start()));
    *g = Some(w.clone());
    w
}

/// Runs one case as its own task (a panic is a failure, not a crash) with a bound.
async fn run_case(world: Arc<World>, case: Case) -> Result<(), String> {
    let cx = Ctx { world };
    let task = tokio::spawn((case.run)(cx));
    match tokio::time::timeout(CASE_BOUND, task).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) if e.is_panic() => {
            let p = e.into_panic();
            Err(p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panicked".into()))
        }
        Ok(Err(e)) => Err(format!("case task failed: {e}")),
        Err(_) => Err(format!("did not finish within {CASE_BOUND:?}")),
    }
}

/// Runs every case against a fresh world, `CONCURRENCY` at a time. With `kill_leader`, the leader
/// is killed when half of the cases have finished and restarted at three quarters.
async fn run_suite(all: Vec<(String, Case)>, kill_leader: bool) -> Result<String, String> {
    let world = Arc::new(World::start().await);
    let total = all.len();
    let done = Arc::new(AtomicUsize::new(0));
    let chaos = {
        let world = world.clone();
        let done = done.clone();
        tokio::spawn(async move {
            if !kill_leader {
                return None;
            }
            while done.load(Ordering::SeqCst) < total / 2 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let leader = world.leader().await;
            world.cluster.lock().expect("cluster").nodes.get_mut(&leader).expect("leader node").kill();
            while done.load(Ordering::SeqCst) < total * 3 / 4 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            world.cluster.lock().expect("cluster").nodes.get_mut(&leader).expect("leader node").start();
            Some(leader)
        })
    };
    let results: Vec<(String, Result<(), String>)> = futures::stream::iter(all.into_iter().map(|(name, case)| {
        let world = world.clone();
        let done = done.clone();
        async move {
            let r = run_case(world, case).await;
            done.fetch_add(1, Ordering::SeqCst);
            (name, r)
        }
    }))
    .buffer_unordered(CONCURRENCY)
    .collect()
    .await;
    let killed = chaos.await.map_err(|e| format!("chaos task: {e}"))?;
    let failures: Vec<String> =
        results.iter().filter_map(|(n, r)| r.as_ref().err().map(|e| format!("--- {n}\n{e}"))).collect();
    // After the run (and the restart), every node must reach the same applied index.
    let applied = if failures.is_empty() { Some(world.converged().await) } else { None };
    if failures.is_empty() {
        Ok(format!(
            "{total} cases passed{}; every node at applied index {} with one state digest",
            killed.map(|l| format!(", leader node {l} killed midway and restarted")).unwrap_or_default(),
            applied.unwrap_or(0)
        ))
    } else {
        // Keep the cluster's directory (configs, data, node logs) for the post-mortem.
        let dir = match world.cluster.lock() {
            Ok(mut c) => match tempfile::tempdir() {
                Ok(fresh) => std::mem::replace(&mut c.dir, fresh).keep().display().to_string(),
                Err(_) => c.dir.path().display().to_string(),
            },
            Err(_) => String::new(),
        };
        let logs = world.logs();
        let tail: String =
            logs.lines().rev().take(60).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
        Err(format!(
            "{} of {total} cases failed (configs, data and node logs kept in {dir}):\n{}\n--- last node log lines ---\n{tail}",
            failures.len(),
            failures.join("\n")
        ))
    }
}

/// The entry point of the suite binary: one trial per case plus the two suite trials.
pub fn main(sections: &[Section]) {
    let args = libtest_mimic::Arguments::from_args();
    let mut all: Vec<(String, Case)> = Vec::new();
    for (module, cases) in sections {
        for c in *cases {
            all.push((format!("{module}::{}", c.name), *c));
        }
    }
    let mut trials = Vec::new();
    for (name, case) in all.iter().cloned() {
        trials.push(libtest_mimic::Trial::test(name, move || {
            let world = shared_world();
            runtime().block_on(run_case(world, case)).map_err(libtest_mimic::Failed::from)
        }));
    }
    for (trial, kill) in
        [("suite::every_case_on_one_cluster", false), ("suite::every_case_with_the_leader_killed_midway", true)]
    {
        let all = all.clone();
        trials.push(libtest_mimic::Trial::test(trial, move || {
            let summary = runtime().block_on(run_suite(all, kill)).map_err(libtest_mimic::Failed::from)?;
            println!("{summary}");
            Ok(())
        }));
    }
    let rows = rows_of(sections);
    trials.push(libtest_mimic::Trial::test("statement::every_row_names_an_existing_case", move || {
        check_statement(&rows).map_err(libtest_mimic::Failed::from)
    }));
    let conclusion = libtest_mimic::run(&args, trials);
    // The shared cluster's processes and directory go before the process exits.
    drop(SHARED.lock().unwrap_or_else(|e| e.into_inner()).take());
    conclusion.exit();
}

/// Every case with its rows, for the statement check.
pub fn rows_of(sections: &[Section]) -> Vec<(String, &'static [&'static str])> {
    sections.iter().flat_map(|(m, cs)| cs.iter().map(move |c| (format!("{m}::{}", c.name), c.rows))).collect()
}

/// The conformance statement (`docs/conformance.md`) and the suite agree: every row whose status
/// is `pass` names at least one case of this suite as evidence, every case it names exists, and
/// every row a case cites names that case.
pub fn check_statement(cases: &[(String, &'static [&'static str])]) -> Result<(), String> {
    let root = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
    let doc = std::fs::read_to_string(root.join("../docs/conformance.md"))
        .map_err(|e| format!("docs/conformance.md: {e}"))?;
    let known: std::collections::BTreeSet<&str> = cases.iter().map(|(n, _)| n.as_str()).collect();
    let mut problems = Vec::new();
    let mut rows = std::collections::BTreeMap::new();
    for line in doc.lines() {
        let cols: Vec<&str> = line.split('|').map(str::trim).collect();
        // | id | rule | status | evidence |
        if cols.len() < 6 || !(cols[1].starts_with('§') || cols[1].starts_with('L')) {
            continue;
        }
        let (id, status, evidence) = (cols[1], cols[3], cols[4]);
        let named: Vec<String> = evidence
            .split('`')
            .filter_map(|s| s.strip_prefix("tests/conformance/"))
            .filter_map(|s| s.split_once(".rs::").map(|(m, n)| format!("{m}::{n}")))
            .collect();
        for n in &named {
            if !known.contains(n.as_str()) {
                problems.push(format!("row {id} names {n}, which is not a case of the suite"));
            }
        }
        if status.starts_with("pass") && named.is_empty() {
            problems.push(format!("row {id} is `pass` but names no case of the suite"));
        }
        rows.insert(id.to_string(), named);
    }
    for (name, cited) in cases {
        for row in *cited {
            match rows.get(*row) {
                None => problems.push(format!("{name} cites row {row}, which the statement does not have")),
                Some(named) if !named.iter().any(|n| n == name) => {
                    problems.push(format!("{name} cites row {row}, but that row does not name it"))
                }
                Some(_) => {}
            }
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(problems.join("\n")) }
}
