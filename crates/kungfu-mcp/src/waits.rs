//! The door's long waits, `turn_wait` and `barrier_wait` (issue #31): each is a first read that
//! may answer at once ([`Start::Answer`]: something is owed, the barrier is final, or the call was
//! refused) and otherwise a bounded [`Wait`] that a watch feed wakes and a fresh read answers. The
//! door runs a wait inline for a host that does not declare the Tasks extension, and in a task's
//! keeper for one that does ([`crate::door`], [`crate::tasks`]); the wait is the same either way.
//!
//! A feed only wakes a wait: every answer is a read (the turn, the barrier), so a feed that fails,
//! ends or says nothing costs time, never correctness (§8: "Notifications MAY speed this up;
//! correct recovery MUST NOT depend on them").
//!
//! - `turn_wait`: `GetTurn`; when nothing is owed, `WatchTurn` until an event brings an item, then
//!   `GetTurn` again.
//! - `barrier_wait`: `GetBarrier`; while it is waiting, `WatchThread` after the newest entry the
//!   barrier names, and a re-read on every batch of entries (a reply is an entry). Handling an
//!   entry, leaving, a demotion and a retraction end a response without posting one, so no feed of
//!   the public API tells of them (COORDINATION §4.7: "no notification is needed"); a re-read on a
//!   timer that backs off from [`BARRIER_RECHECK_FIRST`] to [`BARRIER_RECHECK`] sees those, at
//!   most once a second over a wait of at most [`WAIT_MAX_SECS`].

use crate::call::{self, Api, CALL_TIMEOUT, Caller};
use crate::json;
use crate::registry::{BARRIER_WAIT, TIMEOUT_SECS, TURN_WAIT, ToolKind, WAIT_DEFAULT_SECS, WAIT_MAX_SECS, registry};
use crate::result::{self, refusal};
use kungfu_api::FieldError;
use kungfu_api::pb::BarrierState;
use kungfu_types::Rejection;
use prost_reflect::{DynamicMessage, Value as Proto};
use rmcp::model::{CallToolResult, JsonObject};
use serde_json::{Value as Json, json};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How soon a waiting barrier is first read again when no entry arrives; each quiet interval
/// doubles the next, up to [`BARRIER_RECHECK`]. A handle often follows the barrier's post closely
/// (an agent that was already waiting for it), so the first re-reads come sooner.
pub const BARRIER_RECHECK_FIRST: Duration = Duration::from_millis(250);
// The longest interval between two reads of a waiting barrier is the SDK's
// (`Client::wait_barrier`), so every client of the API waits on a barrier at the same pace.
use kungfu_api::BARRIER_RECHECK;

/// The first half of a long wait: its arguments checked and what it waits on read once.
#[derive(Debug)]
pub enum Start {
    /// The call answers at once: something is owed, the barrier is final, or it was refused.
    Answer(CallToolResult),
    /// The wait to run.
    Wait(Wait),
}

/// A long wait that did not answer at once: what it waits for, and until when.
#[derive(Debug)]
pub struct Wait {
    timeout_secs: u64,
    started: Instant,
    awaited: Awaited,
}

/// What a long wait's arguments ask to wait for.
#[derive(Debug)]
enum Asked {
    Turn,
    /// `barrier_get`'s request.
    Barrier(DynamicMessage),
}

/// What a [`Wait`] waits for.
#[derive(Debug)]
enum Awaited {
    /// `turn_wait`: an obligation on the caller's turn.
    Turn,
    /// `barrier_wait`: the barrier `request` names released or broken; `first` is how it stood at
    /// the first read.
    Barrier { request: DynamicMessage, first: DynamicMessage },
}

/// Reads what a long wait of `kind` waits on, with its arguments; `kind` is a long wait
/// ([`ToolKind::waits`]).
pub async fn start(kind: &ToolKind, api: &Api, args: Option<&JsonObject>, caller: &Caller) -> Start {
    let (timeout_secs, asked) = match checked(kind, args) {
        Ok(checked) => checked,
        Err(e) => return Start::Answer(result::rejection(&e.to_rejection(), None)),
    };
    let started = Instant::now();
    match asked {
        Asked::Turn => match get_turn(api, caller).await {
            Err(r) => Start::Answer(result::rejection(&r, None)),
            Ok(turn) if owed_count(&turn) > 0 => Start::Answer(result::success(turn_wait_answer(&turn, 0), None)),
            Ok(_) => Start::Wait(Wait { timeout_secs, started, awaited: Awaited::Turn }),
        },
        Asked::Barrier(request) => match get_barrier(api, caller, &request).await {
            Err(r) => Start::Answer(result::rejection(&r, None)),
            Ok(b) if barrier_final(&b) => Start::Answer(result::success(json::message_to_json(&b), None)),
            Ok(first) => Start::Wait(Wait { timeout_secs, started, awaited: Awaited::Barrier { request, first } }),
        },
    }
}

/// The arguments of a long wait, checked: its timeout and, for `barrier_wait`, its request.
fn checked(kind: &ToolKind, args: Option<&JsonObject>) -> Result<(u64, Asked), FieldError> {
    let timeout_secs = wait_timeout(args)?;
    match kind {
        ToolKind::TurnWait => {
            if let Some(other) = args.and_then(|a| a.keys().find(|k| *k != TIMEOUT_SECS)) {
                return Err(FieldError::new(other.clone(), format!("is not a field of {TURN_WAIT}")));
            }
            Ok((timeout_secs, Asked::Turn))
        }
        ToolKind::BarrierWait => {
            // barrier_get's request, read by the door's one mapping (so an unknown key or a wrong
            // type is refused naming its field, as barrier_get refuses it); the node checks the
            // rest (a missing thread, an unknown entry) exactly as for barrier_get.
            let mut fields = args.cloned().unwrap_or_default();
            fields.remove(TIMEOUT_SECS);
            let request = json::message_from_json(&barrier_get().method.input(), Some(&fields))?;
            Ok((timeout_secs, Asked::Barrier(request)))
        }
        ToolKind::Rpc(_) => unreachable!("only a long wait is started here"),
    }
}

/// `timeout_secs` of a long wait: 1 to the maximum, the default when absent.
fn wait_timeout(args: Option<&JsonObject>) -> Result<u64, FieldError> {
    match args.and_then(|a| a.get(TIMEOUT_SECS)) {
        None | Some(Json::Null) => Ok(WAIT_DEFAULT_SECS),
        Some(v) => v
            .as_u64()
            .filter(|n| (1..=WAIT_MAX_SECS).contains(n))
            .ok_or_else(|| FieldError::new(TIMEOUT_SECS, format!("must be an integer from 1 to {WAIT_MAX_SECS}"))),
    }
}

impl Wait {
    /// How long the wait may last, in seconds.
    pub fn timeout_secs(&self) -> u64 {
        self.timeout_secs
    }

    /// What a task running this wait says while it works (`statusMessage`).
    pub fn working_message(&self) -> String {
        match &self.awaited {
            Awaited::Turn => format!(
                "waiting up to {} s for an obligation on the turn's watch feed; tasks/get until the status is completed",
                self.timeout_secs
            ),
            Awaited::Barrier { first, .. } => format!(
                "waiting up to {} s for barrier {} to be released or broken ({} of {} ranks pending); tasks/get until the status is completed",
                self.timeout_secs,
                barrier_name(first),
                uint(first, "pending"),
                uint(first, "size"),
            ),
        }
    }

    /// Waits (until what it waits for happens, the time passes, or `cancel`) and answers with a
    /// fresh read.
    pub async fn finish(&self, api: &Api, caller: &Caller, cancel: &CancellationToken) -> CallToolResult {
        let deadline = self.started + Duration::from_secs(self.timeout_secs);
        match &self.awaited {
            Awaited::Turn => {
                if let Err(r) = wait_for_turn_change(api, caller, deadline, cancel).await {
                    return result::rejection(&r, None);
                }
                let turn = match get_turn(api, caller).await {
                    Ok(t) => t,
                    Err(r) => return result::rejection(&r, None),
                };
                let waited = self.started.elapsed().as_secs().min(self.timeout_secs);
                result::success(turn_wait_answer(&turn, waited), None)
            }
            Awaited::Barrier { request, first } => {
                match wait_for_barrier(api, caller, request, first.clone(), deadline, cancel).await {
                    Ok(b) => result::success(json::message_to_json(&b), None),
                    Err(r) => result::rejection(&r, None),
                }
            }
        }
    }

    /// What a task that ran this wait says once it answered (`statusMessage`): one line on the
    /// answer, for a host that shows the status and not the result.
    pub fn finished_message(&self, answer: &CallToolResult) -> Option<String> {
        let s = answer.structured_content.as_ref()?;
        if answer.is_error == Some(true) {
            let code = s.get("code").and_then(Json::as_str).unwrap_or("refused");
            return Some(format!("refused with {code}; the result says why and what to do next"));
        }
        match &self.awaited {
            Awaited::Turn => s.get("note").and_then(Json::as_str).map(str::to_string),
            Awaited::Barrier { first, .. } => {
                let name = barrier_name(first);
                let n = |k: &str| s.get(k).and_then(Json::as_u64).unwrap_or(0);
                let state = s.get("state").and_then(Json::as_str).unwrap_or("");
                Some(if state == BarrierState::Released.as_str_name() {
                    format!("barrier {name} released: every responder arrived")
                } else if state == BarrierState::Broken.as_str_name() {
                    format!("barrier {name} broken: {} rank(s) ended without arriving", n("absent"))
                } else {
                    format!(
                        "barrier {name} still waiting after {} s: {} of {} ranks pending; call {BARRIER_WAIT} again to keep waiting",
                        self.timeout_secs,
                        n("pending"),
                        n("size")
                    )
                })
            }
        }
    }
}

// --- turn_wait ---

/// The first page of the turn, through the same registry entry as `turn_get`.
async fn get_turn(api: &Api, caller: &Caller) -> Result<DynamicMessage, Rejection> {
    let Some(ToolKind::Rpc(rpc)) = registry().get("turn_get").map(|t| &t.kind) else {
        unreachable!("turn_get is an RPC tool (the registry's tests pin it)")
    };
    let request = DynamicMessage::new(rpc.method.input());
    call::unary(api, rpc.path.clone(), rpc.method.output(), request, caller, CALL_TIMEOUT)
        .await
        .map_err(|s| refusal(&s))
}

/// Waits until a turn event brings an item, the stream ends, `deadline` passes or the host
/// cancels. A stream refused at the start (too many open watches, a bad key) is the answer.
/// Returning drops the stream, which ends the watch on the node.
async fn wait_for_turn_change(
    api: &Api,
    caller: &Caller,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<(), Rejection> {
    let reg = registry();
    let request = DynamicMessage::new(reg.message("WatchTurnRequest"));
    let path = http::uri::PathAndQuery::from_static("/kungfu.v1.WatchService/WatchTurn");
    let budget = deadline.saturating_duration_since(Instant::now()) + Duration::from_secs(1);
    let open = call::server_streaming(api, path, reg.message("TurnEvent"), request, caller, budget);
    let mut stream = tokio::select! {
        s = open => s.map_err(|s| refusal(&s))?,
        _ = tokio::time::sleep_until(deadline) => return Ok(()),
        _ = cancel.cancelled() => return Ok(()),
    };
    loop {
        tokio::select! {
            event = stream.message() => match event {
                Ok(Some(e)) if upserted_count(&e) > 0 => return Ok(()),
                Ok(Some(_)) => continue,
                // Ended by the node (leader change, shutdown): read the turn again now.
                Ok(None) | Err(_) => return Ok(()),
            },
            _ = tokio::time::sleep_until(deadline) => return Ok(()),
            _ = cancel.cancelled() => return Ok(()),
        }
    }
}

fn list_len(msg: &DynamicMessage, field: &str) -> usize {
    msg.get_field_by_name(field).and_then(|v| v.as_list().map(<[Proto]>::len)).unwrap_or(0)
}

fn owed_count(turn: &DynamicMessage) -> usize {
    list_len(turn, "items")
}

fn upserted_count(event: &DynamicMessage) -> usize {
    list_len(event, "upserted")
}

/// `turn_wait`'s answer from a turn page.
fn turn_wait_answer(turn: &DynamicMessage, waited_secs: u64) -> Json {
    let page = json::message_to_json(turn);
    let owed = page.get("items").cloned().unwrap_or_else(|| json!([]));
    let n = owed.as_array().map_or(0, Vec::len);
    let note = if n == 0 {
        format!("nothing owed; waited {waited_secs} s; call turn_wait again to keep waiting")
    } else {
        format!("{n} obligation(s) owed; act on each as its `next` says")
    };
    json!({
        "owed": owed,
        "next_cursor": page.get("next_cursor").cloned().unwrap_or_else(|| json!("")),
        "as_of_seq": page.get("as_of_seq").cloned().unwrap_or_else(|| json!(0)),
        "wait_secs": waited_secs,
        "note": note,
    })
}

// --- barrier_wait ---

/// `barrier_get`'s RPC, which `barrier_wait` reads through.
fn barrier_get() -> &'static crate::registry::Rpc {
    let Some(ToolKind::Rpc(rpc)) = registry().get("barrier_get").map(|t| &t.kind) else {
        unreachable!("barrier_get is an RPC tool (the registry's tests pin it)")
    };
    rpc
}

/// The barrier as `barrier_get` reads it, with the same request.
async fn get_barrier(api: &Api, caller: &Caller, request: &DynamicMessage) -> Result<DynamicMessage, Rejection> {
    let rpc = barrier_get();
    call::unary(api, rpc.path.clone(), rpc.method.output(), request.clone(), caller, CALL_TIMEOUT)
        .await
        .map_err(|s| refusal(&s))
}

/// COORDINATION §4.7: released and broken are final ("Final." in `BarrierState`), so a wait ends
/// on either; waiting (or a state this door does not know, which a later read decides) goes on.
fn barrier_final(b: &DynamicMessage) -> bool {
    let state = b.get_field_by_name("state").and_then(|v| v.as_enum_number()).unwrap_or(0);
    state == BarrierState::Released as i32 || state == BarrierState::Broken as i32
}

fn uint(b: &DynamicMessage, field: &str) -> u64 {
    match b.get_field_by_name(field).as_deref() {
        Some(Proto::U32(n)) => u64::from(*n),
        Some(Proto::U64(n)) => *n,
        _ => 0,
    }
}

fn text(b: &DynamicMessage, field: &str) -> String {
    b.get_field_by_name(field).and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

/// `th_7#3`, as the SDK and the command line name a barrier.
fn barrier_name(b: &DynamicMessage) -> String {
    format!("{}#{}", text(b, "thread"), uint(b, "entry"))
}

/// The newest entry a barrier names: its own and its replies. The thread's watch starts after it,
/// so the replies already read do not wake the wait again.
fn newest_entry(b: &DynamicMessage) -> u64 {
    let replies = b.get_field_by_name("ranks").and_then(|ranks| {
        ranks.as_list().map(|ranks| {
            ranks
                .iter()
                .filter_map(|r| r.as_message()?.get_field_by_name("replied_by_entry")?.as_u64())
                .max()
                .unwrap_or(0)
        })
    });
    uint(b, "entry").max(replies.unwrap_or(0))
}

/// What woke a barrier wait.
#[derive(Debug)]
enum Woke {
    /// Entries arrived on the thread's watch: one may be a reply.
    Entries,
    /// The watch ended (the thread closed and drained, a leader change, a failure): the rest of
    /// the wait re-reads on the timer alone.
    WatchEnded,
    /// The re-read timer fired.
    Timer,
    /// The deadline passed: the barrier is read once more, so a timeout answers it as it stands
    /// then, not as it stood at the last wake.
    Deadline,
    /// The host cancelled (or the task was cancelled): nobody reads the answer, so no more reads.
    Cancelled,
}

/// Waits until the barrier is released or broken, `deadline` passes or the host cancels, and
/// answers it as last read (waiting, when the time ran out). A refused read is the answer; a watch
/// that cannot be opened or fails only leaves the timer to wake the wait (see the module comment).
/// Returning drops the stream, which ends the watch on the node.
async fn wait_for_barrier(
    api: &Api,
    caller: &Caller,
    request: &DynamicMessage,
    mut barrier: DynamicMessage,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Result<DynamicMessage, Rejection> {
    let mut watch = open_thread_watch(api, caller, &barrier, deadline, cancel).await;
    let mut recheck = BARRIER_RECHECK_FIRST;
    loop {
        if barrier_final(&barrier) || cancel.is_cancelled() {
            return Ok(barrier);
        }
        let now = Instant::now();
        let wake = deadline.min(now + recheck);
        let woke = if now >= deadline {
            // Opening the watch took the time that was left.
            Woke::Deadline
        } else {
            tokio::select! {
                event = next_entries(&mut watch) => if event { Woke::Entries } else { Woke::WatchEnded },
                _ = tokio::time::sleep_until(wake) => if wake >= deadline { Woke::Deadline } else { Woke::Timer },
                _ = cancel.cancelled() => Woke::Cancelled,
            }
        };
        match woke {
            Woke::Entries | Woke::Deadline => {}
            Woke::WatchEnded => watch = None,
            Woke::Timer => recheck = (recheck * 2).min(BARRIER_RECHECK),
            Woke::Cancelled => return Ok(barrier),
        }
        barrier = get_barrier(api, caller, request).await?;
        if matches!(woke, Woke::Deadline) {
            return Ok(barrier);
        }
    }
}

/// The thread's watch after the newest entry `barrier` names, or `None` when it cannot be opened
/// before `deadline` (too many open watches, a follower that serves no watch, a node that does not
/// answer): the wait then re-reads on its timer alone, so the refusal is logged, not answered.
async fn open_thread_watch(
    api: &Api,
    caller: &Caller,
    barrier: &DynamicMessage,
    deadline: Instant,
    cancel: &CancellationToken,
) -> Option<tonic::Streaming<DynamicMessage>> {
    let reg = registry();
    let mut request = DynamicMessage::new(reg.message("WatchThreadRequest"));
    request.set_field_by_name("thread", Proto::String(text(barrier, "thread")));
    request.set_field_by_name("after_entry", Proto::U64(newest_entry(barrier)));
    let path = http::uri::PathAndQuery::from_static("/kungfu.v1.WatchService/WatchThread");
    let budget = deadline.saturating_duration_since(Instant::now()) + Duration::from_secs(1);
    let open = call::server_streaming(api, path, reg.message("ThreadEvent"), request, caller, budget);
    tokio::select! {
        s = open => s.inspect_err(|s| {
            tracing::debug!(code = ?s.code(), "barrier_wait waits without the thread's watch: it could not be opened");
        }).ok(),
        _ = tokio::time::sleep_until(deadline) => None,
        _ = cancel.cancelled() => None,
    }
}

/// True when the next batch of entries arrives; false when the watch ends or fails (or there is
/// none), which never resolves for a watch already gone, so the timer decides.
async fn next_entries(watch: &mut Option<tonic::Streaming<DynamicMessage>>) -> bool {
    let Some(stream) = watch.as_mut() else { return std::future::pending().await };
    matches!(stream.message().await, Ok(Some(_)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kungfu_api::pb;
    use prost::Message;

    fn dynamic(b: &pb::Barrier) -> DynamicMessage {
        DynamicMessage::decode(registry().message("Barrier"), b.encode_to_vec().as_slice()).expect("decodes")
    }

    fn barrier(state: BarrierState, replies: &[Option<u64>]) -> pb::Barrier {
        let ranks = replies
            .iter()
            .enumerate()
            .map(|(i, by)| pb::BarrierRank {
                rank: u32::try_from(i).expect("few ranks"),
                member: format!("ag_{i}"),
                arrival: if by.is_some() {
                    pb::BarrierArrival::Replied as i32
                } else {
                    pb::BarrierArrival::Pending as i32
                },
                replied_by_entry: *by,
            })
            .collect();
        pb::Barrier {
            thread: "th_7".into(),
            entry: 3,
            size: 3,
            state: state as i32,
            pending: 1,
            ranks,
            ..Default::default()
        }
    }

    fn args(v: Json) -> JsonObject {
        match v {
            Json::Object(o) => o,
            _ => unreachable!("an object"),
        }
    }

    #[test]
    fn only_released_and_broken_end_a_barrier_wait() {
        assert!(barrier_final(&dynamic(&barrier(BarrierState::Released, &[]))));
        assert!(barrier_final(&dynamic(&barrier(BarrierState::Broken, &[]))));
        assert!(!barrier_final(&dynamic(&barrier(BarrierState::Waiting, &[]))));
        // A state this door does not know is not final: a later read decides.
        assert!(!barrier_final(&dynamic(&barrier(BarrierState::Unspecified, &[]))));
    }

    #[test]
    fn the_thread_s_watch_starts_after_the_newest_reply_the_barrier_names() {
        assert_eq!(newest_entry(&dynamic(&barrier(BarrierState::Waiting, &[None, None]))), 3, "its own entry");
        assert_eq!(newest_entry(&dynamic(&barrier(BarrierState::Waiting, &[Some(9), None, Some(5)]))), 9);
    }

    #[test]
    fn a_wait_s_arguments_are_checked_with_the_door_s_field_errors() {
        let field = |kind: &ToolKind, v: Json| checked(kind, Some(&args(v))).err().map(|e| e.field);
        let barrier_wait = ToolKind::BarrierWait;
        assert_eq!(field(&barrier_wait, json!({"thread": "th_7", "entry": 3, "timeout_secs": 60})), None);
        assert_eq!(
            field(&barrier_wait, json!({"thread": "th_7", "entry": 3, "timeout_secs": 61})),
            Some("timeout_secs".into())
        );
        assert_eq!(
            field(&barrier_wait, json!({"thread": "th_7", "entry": 3, "timeout_secs": -1})),
            Some("timeout_secs".into())
        );
        assert_eq!(field(&barrier_wait, json!({"thread": "th_7", "entrie": 3})), Some("entrie".into()));
        assert_eq!(field(&ToolKind::TurnWait, json!({"thread": "th_7"})), Some("thread".into()), "not turn_wait's");
        let Ok((secs, Asked::Barrier(request))) =
            checked(&barrier_wait, Some(&args(json!({"thread": "th_7", "entry": 3}))))
        else {
            panic!("a barrier request")
        };
        assert_eq!(secs, WAIT_DEFAULT_SECS);
        assert_eq!(json::message_to_json(&request), json!({"thread": "th_7", "entry": 3}), "no timeout_secs in it");
    }

    #[test]
    fn a_finished_barrier_task_says_how_the_wait_ended() {
        let first = dynamic(&barrier(BarrierState::Waiting, &[None, Some(4), None]));
        let wait = Wait {
            timeout_secs: 60,
            started: Instant::now(),
            awaited: Awaited::Barrier { request: first.clone(), first: first.clone() },
        };
        assert!(wait.working_message().contains("th_7#3") && wait.working_message().contains("1 of 3 ranks pending"));
        let answer = |b: &pb::Barrier| result::success(json::message_to_json(&dynamic(b)), None);
        let released = answer(&barrier(BarrierState::Released, &[]));
        assert_eq!(
            wait.finished_message(&released).as_deref(),
            Some("barrier th_7#3 released: every responder arrived")
        );
        let still = wait.finished_message(&answer(&barrier(BarrierState::Waiting, &[]))).expect("a message");
        assert!(
            still.starts_with("barrier th_7#3 still waiting after 60 s") && still.contains("barrier_wait"),
            "{still}"
        );
        let refused = result::rejection(&Rejection::new(kungfu_types::Code::NotFound, "no such thread"), None);
        assert_eq!(
            wait.finished_message(&refused).as_deref(),
            Some("refused with NOT_FOUND; the result says why and what to do next")
        );
    }
}
