//! `admission` (§7.4, L5; Jepsen's bounded set): Tasks with an adoption limit, each with several
//! delivered engagements; the processes act as the Tasks' author (the requester) and race to adopt
//! them. Acknowledged adoptions never exceed the limit, a refusal for the limit needs the limit's
//! worth of earlier adoptions (first come first served), adoptions are never lost, and reads
//! (during the run and on every node after recovery) are linearizable with the adoptions
//! (`crate::checker::admission`).
//!
//! - Setup: an author agent and [`WORKERS`] worker agents; [`INITIAL_TASKS`] open Tasks with
//!   `max_adoptions` = [`LIMIT`] (each a `create` op), and for each Task every worker takes and
//!   delivers it in one action (`DeliverTaskRequest { take: true }`); the engagement ids come from
//!   the `EngagementDelivered` receipts. Windows are an hour long, so no deadline settles an
//!   engagement during the run.
//! - `adopt` (most ops): the author adopts a not-yet-tried engagement of one of the oldest
//!   [`ACTIVE`] Tasks that still have some (so processes contend on the same Tasks).
//!   `ADOPTION_LIMIT_REACHED` is a `fail` with that code.
//! - `read` ([`READ_PERCENT`]%): every engagement of one recently adopted-on Task, through the
//!   process's node (linearizable reads); the adopters are the engagements that ended adopted.
//!   The engagements are read one by one, so one pass is no snapshot: an adoption that lands
//!   between two reads could show a later adoption without an earlier one. A read therefore
//!   collects them again until two consecutive passes agree (a double collect); adoptions are
//!   irreversible, so the set both passes saw was the Task's whole set at the end of the first.
//! - `create`: when at most [`ACTIVE`] + 1 Tasks have untried engagements left, one process
//!   creates a new Task (one attempt on its node, recorded) and then has the workers take and
//!   deliver it through the setup client (SDK retries, not recorded: they are not judged).
//! - `final-read`: on every node, every Task's adopters from that node's own state.

use super::{Env, Proc, Workload, node_reader, register};
use crate::checker::Workload as Kind;
use crate::checker::admission::{ADOPT, CREATE};
use crate::client;
use crate::history::{FINAL_READ, OpType, READ};
use crate::recorder::Completion;
use anyhow::{Context, Result};
use futures::FutureExt;
use futures::future::BoxFuture;
use kungfu_client::{Client, Error, pb};
use rand::Rng;
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

/// The adoption limit of every Task (`max_adoptions`).
const LIMIT: u32 = 3;
/// Tasks created in setup.
const INITIAL_TASKS: usize = 6;
/// Worker agents; each takes and delivers every Task once, so a Task has this many engagements.
const WORKERS: usize = 6;
/// Delivery and judgment windows: long enough that no deadline fires during a run.
const WINDOW_MICROS: u64 = 3600 * 1_000_000;
/// How many Tasks (the oldest with untried engagements) the adoptions are spread over.
const ACTIVE: usize = 2;
/// How many Tasks may be being created at once.
const MAX_CREATING: usize = 2;
/// Percentage of ops that are reads.
const READ_PERCENT: u32 = 20;
/// A read is taken among this many most recent Tasks with an adoption attempt.
const READ_RECENT: usize = 4;
/// How many passes a read makes at most before it gives up (two consecutive ones must agree).
const MAX_COLLECTS: usize = 5;
/// How long populating a Task created during the run may take.
const POPULATE_TIMEOUT: Duration = Duration::from_secs(4);
/// How long after a failed creation the next one waits (ns).
const CREATE_BACKOFF_NS: u64 = 1_000_000_000;

/// A Task of the run: its engagements, and those no adopt has tried yet.
#[derive(Debug, Clone)]
struct TaskEntry {
    id: String,
    engagements: Vec<String>,
    untried: Vec<String>,
}

#[derive(Debug, Default)]
struct Pool {
    /// Every Task whose creation was acknowledged and populated, oldest first.
    tasks: Vec<TaskEntry>,
    /// Tasks being created right now.
    creating: usize,
    /// No creation before this time (history timeline, ns): set after a creation failed, so an
    /// unavailable cluster does not turn every step into a creation attempt.
    create_after: u64,
}

/// The author, the workers and the Tasks.
#[derive(Debug, Default)]
pub struct Admission {
    author_key: String,
    workers: Vec<String>,
    pool: Mutex<Pool>,
}

/// What one step does.
enum Choice {
    Create,
    Adopt { task: String, engagement: String },
    Read { task: String, engagements: Vec<String> },
    Idle,
}

fn contract() -> pb::ContractDraft {
    pb::ContractDraft {
        requirements: kungfu_client::text("a jepsen delivery"),
        acceptance: kungfu_client::text("anything"),
        delivery_window_micros: Some(WINDOW_MICROS),
        judgment_window_micros: Some(WINDOW_MICROS),
        max_adoptions: Some(LIMIT),
        ..Default::default()
    }
}

fn create_request() -> pb::CreateTaskRequest {
    pb::CreateTaskRequest {
        audience: Some(pb::Audience { kind: Some(pb::audience::Kind::Open(pb::OpenAudience {})) }),
        contract: Some(contract()),
        ..Default::default()
    }
}

fn created_task(r: &pb::CreateTaskResponse) -> Option<String> {
    match r.receipt.as_ref().and_then(|r| r.result.as_ref()) {
        Some(pb::receipt::Result::TaskCreated(c)) => Some(c.task.clone()),
        _ => None,
    }
}

/// The adopted engagements among `engagements`, one pass (each read on its own).
async fn collect(c: &Client, engagements: &[String]) -> Result<BTreeSet<String>, Error> {
    let mut adopted = BTreeSet::new();
    for e in engagements {
        let view = c.get_engagement(pb::GetEngagementRequest { engagement: e.clone() }).await?;
        if let Some(pb::engagement::State::Ended(end)) = &view.state
            && end.outcome() == pb::EngagementOutcome::Adopted
        {
            adopted.insert(e.clone());
        }
    }
    Ok(adopted)
}

/// The adopters as of one moment: passes until two consecutive ones agree (see the module docs).
/// `Ok(None)` when they never did within [`MAX_COLLECTS`] passes.
async fn snapshot(c: &Client, engagements: &[String]) -> Result<Option<BTreeSet<String>>, Error> {
    let mut last = collect(c, engagements).await?;
    for _ in 1..MAX_COLLECTS {
        let next = collect(c, engagements).await?;
        if next == last {
            return Ok(Some(next));
        }
        last = next;
    }
    Ok(None)
}

impl Admission {
    fn pool(&self) -> std::sync::MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every worker takes and delivers `task` in one action, through `setup` (SDK retries);
    /// returns the engagements whose receipts came back.
    async fn populate(&self, setup: &Client, task: &str) -> Vec<String> {
        let calls = self.workers.iter().map(|w| {
            let c = setup.with_key(w.clone());
            let task = task.to_string();
            async move {
                let r = c
                    .deliver_task(
                        pb::DeliverTaskRequest {
                            task,
                            output: kungfu_client::text("delivered"),
                            take: true,
                            ..Default::default()
                        },
                        None,
                    )
                    .await;
                match r.ok()?.value.receipt?.result? {
                    pb::receipt::Result::EngagementDelivered(d) => Some(d.engagement),
                    _ => None,
                }
            }
        });
        futures::future::join_all(calls).await.into_iter().flatten().collect()
    }

    fn add_task(&self, id: String, engagements: Vec<String>) {
        if engagements.is_empty() {
            return;
        }
        self.pool().tasks.push(TaskEntry { id, untried: engagements.clone(), engagements });
    }

    fn choose(&self, p: &mut Proc, now: u64) -> Choice {
        let mut pool = self.pool();
        let active: Vec<usize> = (0..pool.tasks.len()).filter(|i| !pool.tasks[*i].untried.is_empty()).collect();
        if active.len() <= ACTIVE + 1
            && now >= pool.create_after
            && pool.creating < MAX_CREATING
            && (pool.creating == 0 || active.is_empty())
        {
            pool.creating += 1;
            return Choice::Create;
        }
        let read = p.rng.random_range(0..100) < READ_PERCENT;
        if !read && active.is_empty() {
            return Choice::Idle; // waiting for a new Task
        }
        if read {
            let recent: Vec<usize> = (0..pool.tasks.len())
                .rev()
                .filter(|i| pool.tasks[*i].untried.len() < pool.tasks[*i].engagements.len())
                .take(READ_RECENT)
                .collect();
            if recent.is_empty() {
                return Choice::Idle;
            }
            let t = &pool.tasks[recent[p.rng.random_range(0..recent.len())]];
            return Choice::Read { task: t.id.clone(), engagements: t.engagements.clone() };
        }
        let pick = active[p.rng.random_range(0..active.len().min(ACTIVE))];
        let t = &mut pool.tasks[pick];
        let e = t.untried.swap_remove(p.rng.random_range(0..t.untried.len()));
        Choice::Adopt { task: t.id.clone(), engagement: e }
    }

    /// A `create` op through `c` (one attempt), then the workers' engagements.
    async fn create(&self, env: &Env, p: &mut Proc, c: &Client) {
        let value = json!({ "max_adoptions": LIMIT });
        let key = format!("create-{}-{}", p.id, p.done);
        env.rec.invoke(p.id, CREATE, value, p.node, Some(&key));
        let r = c.create_task(create_request(), Some(key.clone())).await;
        let task = r.as_ref().ok().and_then(|w| created_task(&w.value));
        let t = task.clone();
        if task.is_none() {
            self.pool().create_after = env.rec.now() + CREATE_BACKOFF_NS;
        }
        p.finish_write(env, CREATE, Some(&key), r, |_| Completion {
            value: json!({ "task": t, "max_adoptions": LIMIT }),
            ..Completion::default()
        });
        if let Some(task) = task {
            let engagements =
                tokio::time::timeout(POPULATE_TIMEOUT, self.populate(&env.setup, &task)).await.unwrap_or_default();
            self.add_task(task, engagements);
        }
        let mut pool = self.pool();
        pool.creating = pool.creating.saturating_sub(1);
    }

    async fn adopt(&self, env: &Env, p: &mut Proc, c: &Client, task: String, engagement: String) {
        let value = json!({ "task": task, "engagement": engagement });
        let key = format!("adopt-{}-{}", p.id, p.done);
        env.rec.invoke(p.id, ADOPT, value.clone(), p.node, Some(&key));
        let r = c
            .adopt_engagement(pb::AdoptEngagementRequest { engagement, ..Default::default() }, Some(key.clone()))
            .await;
        p.finish_write(env, ADOPT, Some(&key), r, |_| Completion { value, ..Completion::default() });
    }

    async fn read(&self, env: &Env, p: &mut Proc, c: &Client, task: String, engagements: Vec<String>) {
        env.rec.invoke(p.id, READ, json!({ "task": task }), p.node, None);
        match snapshot(c, &engagements).await {
            Ok(Some(adopters)) => {
                p.finish_read(env, READ, Ok::<_, Error>(()), |_| json!({ "task": task, "adopters": adopters }));
            }
            Ok(None) => {
                env.rec.complete(
                    p.id,
                    OpType::Fail,
                    READ,
                    p.node,
                    None,
                    Completion {
                        error: Some("NO_STABLE_SNAPSHOT".into()),
                        message: Some(format!("{MAX_COLLECTS} passes never agreed twice in a row")),
                        ..Completion::default()
                    },
                );
                p.done += 1;
            }
            Err(e) => {
                p.finish_read(env, READ, Err::<(), _>(e), |_| json!({}));
            }
        }
    }
}

impl Workload for Admission {
    fn kind(&self) -> Kind {
        Kind::Admission
    }

    fn setup<'a>(&'a mut self, env: &'a Env, _processes: usize) -> BoxFuture<'a, Result<()>> {
        async move {
            let (_, author) = register(env).await?;
            self.author_key = author.clone();
            for _ in 0..WORKERS {
                let (_, key) = register(env).await?;
                self.workers.push(key);
            }
            let c = env.setup.with_key(author);
            for i in 0..INITIAL_TASKS {
                // Setup ops are process 0's, before any step runs.
                let key = format!("setup-create-{i}");
                env.rec.invoke(0, CREATE, json!({ "max_adoptions": LIMIT }), 1, Some(&key));
                let w = c.create_task(create_request(), Some(key.clone())).await.context("creating a Task")?;
                let task = created_task(&w.value).context("a Task creation without its receipt")?;
                env.rec.complete(
                    0,
                    OpType::Ok,
                    CREATE,
                    1,
                    Some(&key),
                    Completion { value: json!({ "task": task, "max_adoptions": LIMIT }), ..Completion::default() },
                );
                let engagements = self.populate(&env.setup, &task).await;
                anyhow::ensure!(engagements.len() == WORKERS, "only {} engagements of {task}", engagements.len());
                self.add_task(task, engagements);
            }
            Ok(())
        }
        .boxed()
    }

    fn step<'a>(&'a self, env: &'a Env, p: &'a mut Proc) -> BoxFuture<'a, ()> {
        async move {
            if p.client.is_none() {
                match client::connect(p.endpoint(env), Some(self.author_key.clone())).await {
                    Ok(c) => p.client = Some(c),
                    Err(_) => return,
                }
            }
            let Some(c) = p.client.clone() else { return };
            match self.choose(p, env.rec.now()) {
                Choice::Create => self.create(env, p, &c).await,
                Choice::Adopt { task, engagement } => self.adopt(env, p, &c, task, engagement).await,
                Choice::Read { task, engagements } => self.read(env, p, &c, task, engagements).await,
                Choice::Idle => {}
            }
        }
        .boxed()
    }

    fn final_reads<'a>(&'a self, env: &'a Env, next_process: u64) -> BoxFuture<'a, Result<()>> {
        async move {
            let tasks = self.pool().tasks.clone();
            for (i, (node, endpoint)) in env.endpoints.iter().enumerate() {
                let process = next_process + i as u64;
                let reader = node_reader(endpoint, Some(self.author_key.clone())).await?;
                for t in &tasks {
                    env.rec.invoke(process, FINAL_READ, json!({ "task": t.id }), *node, None);
                    // The node's own state no longer changes: one pass is a snapshot.
                    let (kind, c) = match collect(&reader, &t.engagements).await {
                        Ok(adopters) => (
                            OpType::Ok,
                            Completion {
                                value: json!({ "task": t.id, "adopters": adopters }),
                                ..Completion::default()
                            },
                        ),
                        Err(e) => client::read_failure(&e),
                    };
                    env.rec.complete(process, kind, FINAL_READ, *node, None, c);
                }
            }
            Ok(())
        }
        .boxed()
    }
}
