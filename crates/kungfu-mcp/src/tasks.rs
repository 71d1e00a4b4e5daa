//! [`Tasks`]: the door's long waits as MCP Tasks (issue #31), the `io.modelcontextprotocol/tasks`
//! extension of revision 2026-07-28 (SEP-2663; the text is `specification/draft/tasks.md` of
//! modelcontextprotocol/ext-tasks, cited below as "ext-tasks").
//!
//! A host that declares the extension (in a request's `_meta` client capabilities, or at its
//! 2025-11-25 session's `initialize`) and calls a long wait that would wait (`turn_wait` when
//! nothing is owed, `barrier_wait` on a barrier still waiting) gets a task handle at once
//! (`resultType: "task"`) instead of a call held open for up to a minute; it polls `tasks/get`
//! until the task is terminal, and the terminal task carries the very result the call
//! would have answered. A host that does not declare it sees no change. This module is the store;
//! the door ([`crate::door`]) runs the waits.
//!
//! What the store keeps:
//!
//! - **Ownership.** A task belongs to the caller that made it: the SHA-256 of its bearer
//!   credential and, in a 2025-11-25 session, the session ([`Owner`]). Any other caller gets the
//!   answer an id that never existed gets (ext-tasks, Security: "Auth binding"), and ids carry 128
//!   random bits ("Task ID unguessability").
//! - **Limits** ([`TaskLimits`]): the tasks one owner may have working at once (past it a new one
//!   is refused with `LIMIT_EXCEEDED`), the tasks one owner and the whole door may hold (past them
//!   the oldest finished task is forgotten to make room, and a new one is refused when every held
//!   task is still working), and the time to live from creation (`ttlMs`), after which a task is
//!   forgotten, working or not.
//! - **Lifecycles.** `working`, then one of `completed` (the tool's result, a refusal included as
//!   an `isError` result), `failed` (a JSON-RPC error), `cancelled` (`tasks/cancel`, which stops
//!   the wait at once). A terminal task never changes again.
//! - **Nothing outlives its session.** When a 2025-11-25 session ends, its tasks are stopped and
//!   forgotten ([`Tasks::end_session`]); each task's keeper ends with it.

use kungfu_types::Code;
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, DetailedTask, JsonObject, Task, TaskPayload, TaskStatus};
use serde_json::{Value as Json, json};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The prefix of every task id the door makes (`kt_` and 32 hex digits).
pub const TASK_ID_PREFIX: &str = "kt_";
/// The field of the task methods' params that names a task.
pub const TASK_ID_FIELD: &str = "taskId";
/// The field an over-the-limit refusal names: the extension whose use is over it.
pub const EXTENSION_FIELD: &str = rmcp::model::TASKS_EXTENSION_ID;
/// The longest task id echoed back in an error.
const MAX_ECHOED_ID: usize = 64;

/// The bounds of the store: every one in configuration of the door ([`crate::Door::with_task_limits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskLimits {
    /// Tasks one owner may have working at once. A host waits on one turn at a time; a few more
    /// cover a host that lost a handle and asks again.
    pub max_working_per_owner: usize,
    /// Tasks, working or finished, one owner may hold; past it its oldest finished task is
    /// forgotten first.
    pub max_held_per_owner: usize,
    /// Tasks the door holds for every owner together; past it the oldest finished task is
    /// forgotten first.
    pub max_held: usize,
    /// How long a task is kept from its creation (`ttlMs`): longer than the longest wait
    /// (`turn_wait`'s or `barrier_wait`'s 60 s and two node calls), so a task ends before it is forgotten, with time
    /// left for the host to read the result.
    pub ttl: Duration,
    /// The polling interval the door suggests (`pollIntervalMs`).
    pub poll_interval: Duration,
}

impl Default for TaskLimits {
    fn default() -> TaskLimits {
        TaskLimits {
            max_working_per_owner: 8,
            max_held_per_owner: 32,
            max_held: 4096,
            ttl: Duration::from_secs(300),
            poll_interval: Duration::from_secs(1),
        }
    }
}

/// Whose a task is: the SHA-256 of the caller's bearer credential (all zeros for none) and, in a
/// 2025-11-25 session, the session's number. Its `Debug` shows no credential.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Owner {
    session: Option<u64>,
    credential: [u8; 32],
}

impl Owner {
    /// The owner of a request: its session (`None` for a stateless 2026-07-28 request) and the
    /// bytes of its credential as sent (`Bearer kf_ag_…`).
    pub fn new(session: Option<u64>, credential: Option<&[u8]>) -> Owner {
        let credential = credential.map_or([0; 32], |c| Sha256::digest(c).into());
        Owner { session, credential }
    }

    /// The 2025-11-25 session that owns the task, if any.
    pub fn session(&self) -> Option<u64> {
        self.session
    }
}

impl std::fmt::Debug for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Owner").field("session", &self.session).finish_non_exhaustive()
    }
}

/// A task just made: its seed state for `CreateTaskResult`, and what its keeper needs.
#[derive(Debug)]
pub struct Created {
    pub task: Task,
    /// Cancelled by `tasks/cancel`, or when the task is forgotten: the wait stops.
    pub stop: CancellationToken,
    /// Cancelled when the task is forgotten (its session ended, or it was evicted): the keeper
    /// ends.
    pub gone: CancellationToken,
    /// When the task is forgotten whatever its state (`createdAt + ttlMs`).
    pub expires: Instant,
}

/// One held task.
#[derive(Debug)]
struct Held {
    owner: Owner,
    /// The wire state; `task.status` always agrees with `payload`.
    task: Task,
    payload: TaskPayload,
    created: Instant,
    stop: CancellationToken,
    gone: CancellationToken,
}

impl Held {
    fn working(&self) -> bool {
        !self.payload.status().is_terminal()
    }

    fn set(&mut self, payload: TaskPayload, message: Option<String>) {
        self.task.status = payload.status();
        self.task.last_updated_at = rmcp::task_manager::current_timestamp();
        if message.is_some() {
            self.task.status_message = message;
        }
        self.payload = payload;
    }
}

/// The door's tasks, shared by every session and request of one door (cheap to clone).
#[derive(Debug, Clone)]
pub struct Tasks {
    held: Arc<Mutex<HashMap<String, Held>>>,
    limits: TaskLimits,
}

impl Tasks {
    pub fn new(limits: TaskLimits) -> Tasks {
        assert!(limits.max_working_per_owner >= 1 && limits.max_held_per_owner >= limits.max_working_per_owner);
        assert!(limits.max_held >= limits.max_held_per_owner, "the door holds at least one owner's tasks");
        Tasks { held: Arc::default(), limits }
    }

    pub fn limits(&self) -> TaskLimits {
        self.limits
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
        // The map is consistent after every statement under the lock, so a panic elsewhere while
        // it was held leaves nothing half-done.
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes a working task for `owner`, held before this returns, so a `tasks/get` right after
    /// the `CreateTaskResult` finds it (ext-tasks, Task Creation: "MUST NOT return
    /// CreateTaskResult until the task is durably created"). Refused past the working limit, or
    /// when the door is full of working tasks.
    pub fn create(&self, owner: Owner, status_message: String) -> Result<Created, ErrorData> {
        let id = new_task_id()?;
        let now = Instant::now();
        let mut held = self.lock();
        let working = held.values().filter(|h| h.owner == owner && h.working()).count();
        if working >= self.limits.max_working_per_owner {
            return Err(over_limit(format!(
                "{working} tasks of this caller are working, the most it may have: cancel one (tasks/cancel), wait for one to end, or call without declaring {EXTENSION_FIELD} to wait inline"
            )));
        }
        let owned = held.values().filter(|h| h.owner == owner).count();
        if owned >= self.limits.max_held_per_owner {
            evict_oldest_finished(&mut held, Some(owner));
        }
        if held.len() >= self.limits.max_held && !evict_oldest_finished(&mut held, None) {
            return Err(over_limit(format!(
                "this node holds {} working tasks, the most it keeps: wait for some to end, or call without declaring {EXTENSION_FIELD} to wait inline",
                held.len()
            )));
        }
        let stamp = rmcp::task_manager::current_timestamp();
        let task = Task::new(id.clone(), TaskStatus::Working, stamp.clone(), stamp)
            .with_status_message(status_message)
            .with_ttl_ms(millis(self.limits.ttl))
            .with_poll_interval_ms(millis(self.limits.poll_interval));
        let gone = CancellationToken::new();
        let stop = gone.child_token();
        let entry = Held {
            owner,
            task: task.clone(),
            payload: TaskPayload::Working,
            created: now,
            stop: stop.clone(),
            gone: gone.clone(),
        };
        let previous = held.insert(id, entry);
        assert!(previous.is_none(), "a task id of 128 random bits came twice");
        Ok(Created { task, stop, gone, expires: now + self.limits.ttl })
    }

    /// Records how a working task ended: its tool result (`completed`, `isError` ones too) or
    /// the JSON-RPC error it met (`failed`) (ext-tasks, Task Execution Errors), with `message`, a
    /// line on the result for the status (`None` keeps the working one). A task already terminal
    /// (cancelled meanwhile) or forgotten is left as it is.
    pub fn settle(&self, id: &str, answer: Result<CallToolResult, ErrorData>, message: Option<String>) {
        let mut held = self.lock();
        let Some(h) = held.get_mut(id).filter(|h| h.working()) else { return };
        match answer {
            Ok(result) => {
                h.set(TaskPayload::Completed { result: object(serde_json::to_value(&result)) }, message);
            }
            Err(error) => {
                let message = message.or_else(|| Some(error.message.to_string()));
                h.set(TaskPayload::Failed { error: object(serde_json::to_value(&error)) }, message);
            }
        }
    }

    /// `tasks/get`: the task with its payload inlined.
    pub fn get(&self, owner: &Owner, id: &str) -> Result<DetailedTask, ErrorData> {
        let held = self.lock();
        let h = held.get(id).filter(|h| h.owner == *owner).ok_or_else(|| no_such_task(id))?;
        Ok(DetailedTask::new(h.task.clone(), h.payload.clone()))
    }

    /// `tasks/cancel`: a working task becomes `cancelled` and its wait stops now; a terminal one
    /// is left as it is, and acknowledged the same (the cancel is idempotent; only an unknown id
    /// is an error, ext-tasks Protocol Errors).
    pub fn cancel(&self, owner: &Owner, id: &str) -> Result<(), ErrorData> {
        let mut held = self.lock();
        let h = held.get_mut(id).filter(|h| h.owner == *owner).ok_or_else(|| no_such_task(id))?;
        if h.working() {
            h.set(TaskPayload::Cancelled, Some("cancelled by the client (tasks/cancel)".to_string()));
            h.stop.cancel();
        }
        Ok(())
    }

    /// `tasks/update`: the door's tasks never ask for input, so every response is for a key that
    /// is not outstanding and is ignored (ext-tasks, Task Update Requests: "SHOULD ignore"); the
    /// task must still be the caller's.
    pub fn update(&self, owner: &Owner, id: &str) -> Result<(), ErrorData> {
        let held = self.lock();
        held.get(id).filter(|h| h.owner == *owner).map(|_| ()).ok_or_else(|| no_such_task(id))
    }

    /// Forgets a task (its TTL passed): a later `tasks/get` answers "no such task".
    pub fn forget(&self, id: &str) {
        if let Some(h) = self.lock().remove(id) {
            h.gone.cancel();
        }
    }

    /// Stops and forgets every task of a 2025-11-25 session: the session ended.
    pub fn end_session(&self, session: u64) {
        let mut held = self.lock();
        held.retain(|_, h| {
            let keep = h.owner.session != Some(session);
            if !keep {
                h.gone.cancel();
            }
            keep
        });
    }

    /// How many tasks the door holds, working or finished.
    pub fn held(&self) -> usize {
        self.lock().len()
    }

    /// How many of them are working.
    pub fn working(&self) -> usize {
        self.lock().values().filter(|h| h.working()).count()
    }
}

/// Forgets the oldest finished task (of `owner`, or of anyone); false when there is none.
fn evict_oldest_finished(held: &mut HashMap<String, Held>, owner: Option<Owner>) -> bool {
    let oldest = held
        .iter()
        .filter(|(_, h)| !h.working() && owner.is_none_or(|o| h.owner == o))
        .min_by_key(|(_, h)| h.created)
        .map(|(id, _)| id.clone());
    match oldest.and_then(|id| held.remove(&id)) {
        Some(h) => {
            h.gone.cancel();
            true
        }
        None => false,
    }
}

/// `kt_` and 128 random bits in hex.
fn new_task_id() -> Result<String, ErrorData> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| {
        tracing::error!(error = %e, "the MCP door could not generate a task id");
        ErrorData::internal_error(format!("no task id could be generated: {e}"), None)
    })?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("{TASK_ID_PREFIX}{hex}"))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A result or an error as the JSON object a task inlines.
fn object(value: serde_json::Result<Json>) -> JsonObject {
    match value {
        Ok(Json::Object(o)) => o,
        // Both types serialize as objects; anything else is a defect of rmcp's model.
        other => unreachable!("a tool result or a JSON-RPC error serializes as an object: {other:?}"),
    }
}

/// An unknown task id, or another caller's, or a forgotten one: the same answer for each, so no
/// caller learns of another's tasks. `-32602`, which ext-tasks (Protocol Errors) requires for
/// `tasks/get` and recommends for `tasks/update` and `tasks/cancel`.
fn no_such_task(id: &str) -> ErrorData {
    let shown: String = id.chars().take(MAX_ECHOED_ID).collect();
    let code = Code::NotFound;
    ErrorData::invalid_params(
        format!(
            "no task {shown} of this caller: a task is its maker's (its key, and on 2025-11-25 its session) and is forgotten ttlMs after it was made; call the tool again for a new one"
        ),
        Some(json!({
            "code": code.as_str(),
            "field": TASK_ID_FIELD,
            "next_step": code.next_step().as_str(),
            "taskId": shown,
        })),
    )
}

/// A task the limits do not allow: invalid params, as the door's other refusals of a request it
/// cannot serve (an unknown toolset), with the stable code and what to do.
fn over_limit(message: String) -> ErrorData {
    let code = Code::LimitExceeded;
    ErrorData::invalid_params(
        message,
        Some(json!({"code": code.as_str(), "field": EXTENSION_FIELD, "next_step": code.next_step().as_str()})),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ErrorCode;

    fn owner(session: Option<u64>, key: &str) -> Owner {
        Owner::new(session, Some(format!("Bearer {key}").as_bytes()))
    }

    fn small() -> Tasks {
        Tasks::new(TaskLimits {
            max_working_per_owner: 2,
            max_held_per_owner: 3,
            max_held: 4,
            ttl: Duration::from_secs(300),
            poll_interval: Duration::from_secs(1),
        })
    }

    fn done() -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::structured(json!({"owed": [], "note": "nothing owed"})))
    }

    #[tokio::test]
    async fn a_task_is_working_then_completed_with_the_result_inlined() {
        let tasks = small();
        let me = owner(None, "a");
        let c = tasks.create(me, "waiting".into()).expect("created");
        assert!(c.task.task_id.starts_with(TASK_ID_PREFIX) && c.task.task_id.len() == 35);
        assert_eq!((c.task.ttl_ms, c.task.poll_interval_ms), (Some(300_000), Some(1_000)));
        assert_eq!(tasks.get(&me, &c.task.task_id).expect("get").status(), TaskStatus::Working);
        tasks.settle(&c.task.task_id, done(), Some("nothing owed".into()));
        let got = serde_json::to_value(tasks.get(&me, &c.task.task_id).expect("get")).expect("json");
        assert_eq!(got["status"], "completed");
        assert_eq!(got["result"]["structuredContent"]["note"], "nothing owed");
        assert_eq!(got["statusMessage"], "nothing owed");
        // Terminal is final: neither a late settle nor a cancel changes it.
        tasks.settle(&c.task.task_id, Err(ErrorData::internal_error("late", None)), None);
        tasks.cancel(&me, &c.task.task_id).expect("an idempotent ack");
        assert_eq!(tasks.get(&me, &c.task.task_id).expect("get").status(), TaskStatus::Completed);
    }

    #[tokio::test]
    async fn a_json_rpc_error_fails_the_task_with_the_error_inlined() {
        let tasks = small();
        let me = owner(None, "a");
        let c = tasks.create(me, "waiting".into()).expect("created");
        tasks.settle(&c.task.task_id, Err(ErrorData::internal_error("the node vanished", None)), None);
        let got = serde_json::to_value(tasks.get(&me, &c.task.task_id).expect("get")).expect("json");
        assert_eq!((got["status"].clone(), got["error"]["code"].clone()), (json!("failed"), json!(-32603)));
        assert!(got.get("result").is_none());
    }

    #[tokio::test]
    async fn cancel_stops_the_wait_and_the_task_stays_cancelled() {
        let tasks = small();
        let me = owner(Some(1), "a");
        let c = tasks.create(me, "waiting".into()).expect("created");
        tasks.cancel(&me, &c.task.task_id).expect("ack");
        assert!(c.stop.is_cancelled(), "the wait is told to stop");
        assert!(!c.gone.is_cancelled(), "the cancelled task is still held");
        tasks.settle(&c.task.task_id, done(), Some("nothing owed".into()));
        assert_eq!(tasks.get(&me, &c.task.task_id).expect("get").status(), TaskStatus::Cancelled);
    }

    #[tokio::test]
    async fn another_caller_s_task_is_as_unknown_as_one_that_never_was() {
        let tasks = small();
        let me = owner(Some(1), "a");
        let c = tasks.create(me, "waiting".into()).expect("created");
        let id = c.task.task_id.as_str();
        for stranger in [owner(Some(1), "b"), owner(Some(2), "a"), owner(None, "a"), Owner::new(Some(1), None)] {
            let e = tasks.get(&stranger, id).expect_err("not theirs");
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
            let data = e.data.expect("data");
            assert_eq!((data["code"].clone(), data["field"].clone()), (json!("NOT_FOUND"), json!("taskId")));
            assert!(tasks.cancel(&stranger, id).is_err() && tasks.update(&stranger, id).is_err());
        }
        assert_eq!(tasks.get(&me, id).expect("still mine").status(), TaskStatus::Working, "untouched");
        let never = tasks.get(&me, "kt_nope").expect_err("unknown");
        assert_eq!(never.data.expect("data")["code"], json!("NOT_FOUND"));
    }

    #[tokio::test]
    async fn past_the_working_limit_a_task_is_refused_with_limit_exceeded() {
        let tasks = small();
        let me = owner(None, "a");
        let first = tasks.create(me, "w".into()).expect("1");
        tasks.create(me, "w".into()).expect("2");
        let e = tasks.create(me, "w".into()).expect_err("the third working one");
        assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
        let data = e.data.expect("data");
        assert_eq!(
            (data["code"].clone(), data["field"].clone(), data["next_step"].clone()),
            (json!("LIMIT_EXCEEDED"), json!("io.modelcontextprotocol/tasks"), json!("revise"))
        );
        tasks.create(owner(None, "b"), "w".into()).expect("another caller has its own limit");
        tasks.settle(&first.task.task_id, done(), None);
        tasks.create(me, "w".into()).expect("room again once one ended");
    }

    #[tokio::test]
    async fn past_the_held_limits_the_oldest_finished_task_is_forgotten_first() {
        let tasks = small();
        let me = owner(None, "a");
        let mut ids = Vec::new();
        for _ in 0..3 {
            let c = tasks.create(me, "w".into()).expect("created");
            tasks.settle(&c.task.task_id, done(), Some("nothing owed".into()));
            ids.push(c);
        }
        tasks.create(me, "w".into()).expect("the oldest finished one makes room");
        assert!(tasks.get(&me, &ids[0].task.task_id).is_err() && ids[0].gone.is_cancelled());
        assert!(tasks.get(&me, &ids[1].task.task_id).is_ok());
        // The door's bound, 4: full, another caller's new task forgets the oldest finished one.
        let other = owner(None, "b");
        tasks.create(other, "w".into()).expect("room left");
        tasks.create(other, "w".into()).expect("room made");
        assert!(tasks.get(&me, &ids[1].task.task_id).is_err() && ids[1].gone.is_cancelled());
        tasks.create(owner(None, "c"), "w".into()).expect("room made again");
        assert_eq!((tasks.held(), tasks.working()), (4, 4));
        // Every held task working: refused, though the caller is under its own limit.
        let e = tasks.create(owner(None, "c"), "w".into()).expect_err("the door is full");
        assert_eq!(e.data.expect("data")["code"], json!("LIMIT_EXCEEDED"));
    }

    #[tokio::test]
    async fn a_session_s_end_forgets_its_tasks_and_only_them() {
        let tasks = small();
        let mine = tasks.create(owner(Some(7), "a"), "w".into()).expect("created");
        let other = tasks.create(owner(Some(8), "a"), "w".into()).expect("created");
        tasks.end_session(7);
        assert!(mine.gone.is_cancelled() && mine.stop.is_cancelled(), "its wait and keeper end");
        assert!(!other.gone.is_cancelled());
        assert_eq!(tasks.held(), 1);
    }

    #[test]
    fn an_owner_s_debug_shows_no_credential() {
        let shown = format!("{:?}", owner(Some(3), "kf_ag_secret"));
        assert!(!shown.contains("secret") && shown.contains('3'), "{shown}");
    }
}
