//! `deadlines` (§6.4, §7.3, L4, L5): assignments with short delivery and judgment windows inside
//! threads; the processes take, deliver, drop, judge and void some of them before, around or
//! instead of their deadlines, and read them back. Every delivery and judgment obligation must end
//! exactly once, never before its deadline unless an action ended it, the same way on every node,
//! and an acknowledged action must be the one that ended it (`crate::checker::deadlines`).
//!
//! - Setup: a lead agent; per process slot a worker agent and a thread the lead created, which
//!   the worker joined (both may speak).
//! - `post`: the lead posts an entry with a new assignment addressed to the slot's worker, with a
//!   delivery window and a judgment window of 1–3 s each ([`WINDOW_MS`]). An untaken assignment
//!   owes nothing, so this creates no obligation.
//! - `take` (the worker): creates `<asg>:delivery`, due at the `AssignmentTaken` receipt's
//!   `delivery_due`.
//! - Then the worker `deliver`s (ends `<asg>:delivery`, creates `<asg>:judgment` due at the
//!   `AssignmentDelivered` receipt's `judgment_due`) well before the due or right around it (a race
//!   with the deadline, which must win), `drop`s it (ends the delivery obligation), the lead
//!   `void`s it (ends it too, by another fact: no `ends`), or nobody acts and it times out.
//! - For a delivered one the lead `adopt`s or `reject`s it (ends `<asg>:judgment`), before or
//!   around the due, or leaves it to settle as undecided by its deadline.
//! - An action whose outcome is unknown (`info`) is sent again under the same idempotency key
//!   (L3) while its obligation is not yet due, so a replay is never acknowledged after the due.
//! - `read` ([`READ_PERCENT`]%): `GetAssignment` through the process's node (linearizable) for
//!   the slot's most recent assignments that have not been seen ended yet, shown as obligations
//!   (see [`views`]).
//! - `final-read`: on every node, every assignment from that node's own state, after
//!   [`QUIESCE`] let every deadline pass.
//!
//! Times: the server's wall-clock stamps (µs) go to the history's timeline with the harness's own
//! clock (`Recorder::timeline`).

use super::{Env, Proc, Workload, node_reader, register};
use crate::checker::Workload as Kind;
use crate::client;
use crate::history::{FINAL_READ, OpType, READ};
use crate::recorder::{Completion, Recorder};
use anyhow::{Context, Result};
use futures::FutureExt;
use futures::future::BoxFuture;
use kungfu_client::{Client, Error, Post, pb};
use rand::Rng;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// Delivery and judgment windows, ms: uniform in this range (the server's minimum is 1 s).
const WINDOW_MS: (u64, u64) = (1000, 3000);
/// Assignments a process has in progress at once.
const MAX_LIVE: usize = 3;
/// Percentage of ops that are reads (when no action is due).
const READ_PERCENT: u32 = 30;
/// Assignments one read looks at, at most (the slot's most recent unended ones).
const READ_MAX: usize = 8;
/// How long after the final heal the final reads wait: the longest delivery window, then the
/// longest judgment window, plus the largest clock skew a leader may have stamped with, plus
/// margin.
const QUIESCE: Duration = Duration::from_secs(9);
/// How many times an action with an unknown outcome is sent (the first time included).
const MAX_TRIES: u32 = 3;
/// How long after an unknown outcome the same request is sent again.
const RETRY_AFTER_NS: u64 = 300_000_000;
/// How long after a failed post the slot's next post waits.
const POST_BACKOFF_NS: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

/// What the harness learned of an assignment's times (server µs), from acknowledged receipts
/// and from reads. An ended assignment no longer shows its deadlines or its delivery time, so the
/// reads take them from here (see [`views`]).
#[derive(Debug, Clone, Copy, Default)]
struct Known {
    delivery_due: Option<i64>,
    delivered_at: Option<i64>,
    judgment_due: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Take,
    Deliver,
    Drop,
    Void,
    Adopt,
    Reject,
}

impl Action {
    fn f(self) -> &'static str {
        match self {
            Action::Take => "take",
            Action::Deliver => "deliver",
            Action::Drop => "drop",
            Action::Void => "void",
            Action::Adopt => "adopt",
            Action::Reject => "reject",
        }
    }

    /// The obligation the action would end (`None`: it ends none, or not as an action).
    fn ends(self, asg: &str) -> Option<String> {
        match self {
            Action::Deliver | Action::Drop => Some(format!("{asg}:delivery")),
            Action::Adopt | Action::Reject => Some(format!("{asg}:judgment")),
            Action::Take | Action::Void => None,
        }
    }
}

/// The next action planned on an assignment.
#[derive(Debug, Clone)]
struct Planned {
    /// When (history timeline, ns).
    at: u64,
    action: Action,
    /// Its idempotency key, kept for sending it again after an unknown outcome.
    key: String,
    tries: u32,
}

/// An assignment of one process slot.
#[derive(Debug, Clone)]
struct Asg {
    id: String,
    delivery_window_ns: u64,
    judgment_window_ns: u64,
    next: Option<Planned>,
    /// The due (timeline ns) of the obligation the current stage runs against, when known.
    due: Option<u64>,
    /// Reads still look at it (not seen ended yet).
    watched: bool,
}

/// What one process slot is doing.
#[derive(Debug, Clone, Default)]
struct Slot {
    /// Its assignments in progress or still watched.
    asgs: Vec<Asg>,
    /// No post before this time (timeline ns): set after a post failed, so an unavailable cluster
    /// does not turn every step into a post.
    post_after: u64,
}

/// The lead, the slots' threads and workers, and what the processes are doing.
#[derive(Debug, Default)]
pub struct Deadlines {
    lead_key: String,
    /// Per process slot: (thread, worker id, worker key).
    slots: Vec<(String, String, String)>,
    /// Per process slot: its assignments in progress or still watched.
    procs: Mutex<Vec<Slot>>,
    known: Mutex<HashMap<String, Known>>,
    /// Every assignment whose creation was acknowledged, for the final reads.
    all: Mutex<Vec<String>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn ending(kind: &str, cause: &str, stamp: i64, rec: &Recorder) -> Value {
    // `index`: the checker wants the log index of the ending fact, which no read of the API shows.
    // The leader stamps every command with a strictly increasing time (`ended_at`, or the
    // delivery's `delivered_at`) and every node applies the same stamp, so the stamp identifies the
    // command that recorded the ending just as well (two obligations ended by one command share
    // it; the checker only compares endings of one obligation).
    json!({ "kind": kind, "cause": cause, "index": stamp.max(0) as u64, "at": rec.timeline(stamp) })
}

fn view(id: String, due: i64, endings: Vec<Value>, rec: &Recorder) -> Value {
    json!({ "id": id, "due": rec.timeline(due), "endings": endings })
}

/// The obligations one read of an assignment shows, in the checker's terms, after recording what
/// it shows of the assignment's times in `known`.
///
/// - Taken: `<asg>:delivery`, open, due at `delivery_due`.
/// - Delivered: `<asg>:delivery` ended `delivered` by an action at `delivered_at` (its due is
///   `taken_at` + the delivery window, as the server computes it), and `<asg>:judgment`, open.
/// - Ended: timed out (by deadline), dropped (action) or voided (other) ends the delivery
///   obligation; adopted, rejected (action) or undecided (deadline) end the judgment obligation,
///   and the delivery obligation shows its `delivered` ending.
///
/// An ended assignment shows neither its deadlines nor when it was delivered, so those come from
/// `known` (the receipts of acknowledged actions and earlier reads). An obligation whose times the
/// harness never learned is left out: nothing acknowledged created it and no read showed it, so
/// the checker has nothing to hold it to. Only a final read (when `known` is complete and nothing
/// runs concurrently) shows a delivery whose time was never seen, with index 0 and no time.
fn views(a: &pb::Assignment, known: &mut HashMap<String, Known>, final_read: bool, rec: &Recorder) -> Vec<Value> {
    use pb::assignment::State;
    let k = known.entry(a.id.clone()).or_default();
    let delivery = format!("{}:delivery", a.id);
    let judgment = format!("{}:judgment", a.id);
    let mut out = Vec::new();
    match &a.state {
        None | Some(State::Open(())) => {}
        Some(State::Taken(t)) => {
            k.delivery_due.get_or_insert(t.delivery_due_unix_micros);
            out.push(view(delivery, t.delivery_due_unix_micros, Vec::new(), rec));
        }
        Some(State::Delivered(d)) => {
            let due = d.taken_at_unix_micros.saturating_add(a.delivery_window_micros as i64);
            k.delivery_due.get_or_insert(due);
            k.delivered_at.get_or_insert(d.delivered_at_unix_micros);
            k.judgment_due.get_or_insert(d.judgment_due_unix_micros);
            out.push(view(delivery, due, vec![ending("delivered", "action", d.delivered_at_unix_micros, rec)], rec));
            out.push(view(judgment, d.judgment_due_unix_micros, Vec::new(), rec));
        }
        Some(State::Ended(e)) => {
            use pb::AssignmentOutcome as O;
            let at = e.ended_at_unix_micros;
            let undelivered = |kind: &str, cause: &str| {
                k.delivery_due.map(|due| view(delivery.clone(), due, vec![ending(kind, cause, at, rec)], rec))
            };
            match e.outcome() {
                O::TimedOut => out.extend(undelivered("timed_out", "deadline")),
                O::Dropped => out.extend(undelivered("dropped", "action")),
                O::Voided => out.extend(undelivered("voided", "other")),
                judged @ (O::Adopted | O::Rejected | O::Undecided) => {
                    if let Some(due) = k.delivery_due {
                        match k.delivered_at {
                            Some(d) => out.push(view(delivery, due, vec![ending("delivered", "action", d, rec)], rec)),
                            None if final_read => out.push(view(
                                delivery,
                                due,
                                vec![json!({ "kind": "delivered", "cause": "action", "index": 0 })],
                                rec,
                            )),
                            None => {}
                        }
                    }
                    let (kind, cause) = match judged {
                        O::Adopted => ("adopted", "action"),
                        O::Rejected => ("rejected", "action"),
                        _ => ("undecided", "deadline"),
                    };
                    if let Some(due) = k.judgment_due {
                        out.push(view(judgment, due, vec![ending(kind, cause, at, rec)], rec));
                    }
                }
                O::Unspecified => {}
            }
        }
    }
    out
}

/// What one step does.
enum Choice {
    Create,
    Act(Asg, Planned),
    Read(Vec<String>),
    Idle,
}

impl Deadlines {
    fn remember(&self, asg: &str, f: impl FnOnce(&mut Known)) {
        f(lock(&self.known).entry(asg.to_string()).or_default());
    }

    fn choose(&self, p: &mut Proc, slot: usize, now: u64) -> Choice {
        let mut procs = lock(&self.procs);
        let post_after = procs[slot].post_after;
        let list = &mut procs[slot].asgs;
        list.retain(|a| a.watched || a.next.is_some());
        // One that never ends (a void of an untaken assignment failed) is not read forever.
        let mut excess = list.len().saturating_sub(4 * READ_MAX);
        list.retain(|a| {
            let drop = excess > 0 && a.next.is_none();
            excess -= usize::from(drop);
            !drop
        });
        let due = list
            .iter()
            .enumerate()
            .filter_map(|(i, a)| a.next.as_ref().filter(|n| n.at <= now).map(|n| (n.at, i)))
            .min();
        if let Some((_, i)) = due {
            let mut a = list[i].clone();
            let Some(n) = a.next.take() else { return Choice::Idle };
            list[i].next = None;
            return Choice::Act(a, n);
        }
        let watched: Vec<String> =
            list.iter().rev().filter(|a| a.watched).take(READ_MAX).map(|a| a.id.clone()).collect();
        let live = list.iter().filter(|a| a.next.is_some()).count();
        if !watched.is_empty() && (p.rng.random_range(0..100) < READ_PERCENT || live >= MAX_LIVE) {
            return Choice::Read(watched);
        }
        if live < MAX_LIVE && now >= post_after {
            Choice::Create
        } else if !watched.is_empty() {
            Choice::Read(watched)
        } else {
            Choice::Idle
        }
    }

    /// Puts `a` back into its slot (replacing its earlier copy), with its next action.
    fn put(&self, slot: usize, a: Asg) {
        let mut procs = lock(&self.procs);
        let list = &mut procs[slot].asgs;
        match list.iter_mut().find(|x| x.id == a.id) {
            Some(x) => {
                x.next = a.next;
                x.due = a.due;
            }
            None => list.push(a),
        }
    }

    fn plan(p: &Proc, action: Action, at: u64) -> Option<Planned> {
        let key = format!("{}-{}-{}", action.f(), p.id, p.done);
        Some(Planned { at, action, key, tries: 0 })
    }

    async fn create(&self, env: &Env, p: &mut Proc, slot: usize, lead: &Client) {
        let (thread, worker, _) = &self.slots[slot];
        let dw = p.rng.random_range(WINDOW_MS.0..=WINDOW_MS.1);
        let jw = p.rng.random_range(WINDOW_MS.0..=WINDOW_MS.1);
        let key = format!("post-{}-{}", p.id, p.done);
        let value = json!({ "thread": thread, "delivery_window_ms": dw, "judgment_window_ms": jw });
        env.rec.invoke(p.id, "post", value.clone(), p.node, Some(&key));
        let new = pb::NewAssignment {
            delivery_window_micros: Some(dw * 1000),
            judgment_window_micros: Some(jw * 1000),
            ..kungfu_client::new_assignment(worker, "a jepsen assignment")
        };
        let r = lead.post(Post::text(thread, &key).ask(Vec::<String>::new()).assignment(new), Some(key.clone())).await;
        let id = r.as_ref().ok().and_then(|w| match w.value.receipt.as_ref()?.result.as_ref()? {
            pb::receipt::Result::Posted(posted) => posted.assignment.clone(),
            _ => None,
        });
        let v = json!({ "thread": thread, "assignment": id });
        p.finish_write(env, "post", Some(&key), r, |_| Completion { value: v, ..Completion::default() });
        let Some(id) = id else {
            lock(&self.procs)[slot].post_after = env.rec.now() + POST_BACKOFF_NS;
            return;
        };
        lock(&self.all).push(id.clone());
        let now = env.rec.now();
        let r = p.rng.random_range(0..100);
        let next = if r < 85 {
            Self::plan(p, Action::Take, now)
        } else if r < 95 {
            let at = now + p.rng.random_range(0..1000) * MS;
            Self::plan(p, Action::Void, at)
        } else {
            None // left open: no obligation, nothing to watch
        };
        let watched = next.is_some();
        let a = Asg { id, delivery_window_ns: dw * MS, judgment_window_ns: jw * MS, next, due: None, watched };
        self.put(slot, a);
    }

    /// When to act on an obligation due at `due` (timeline) with window `w` (ns): well before it, or
    /// right around it (a race with the deadline).
    fn when(p: &mut Proc, now: u64, due: u64, w: u64, race: bool) -> u64 {
        if race {
            (due + p.rng.random_range(0..700) * MS).saturating_sub(400 * MS).max(now)
        } else {
            now + w * p.rng.random_range(10..80) / 100
        }
    }

    async fn act(&self, env: &Env, p: &mut Proc, slot: usize, worker: &Client, lead: &Client, mut a: Asg, n: Planned) {
        let asg = a.id.clone();
        let ends = n.action.ends(&asg);
        // A request sent again may be answered with the first attempt's success (L3) whenever it
        // arrives; only before the due is that success in time, so a late one is not sent.
        if n.tries > 0 && ends.is_some() && !a.due.is_some_and(|due| env.rec.now() < due) {
            self.put(slot, a);
            return;
        }
        let mut value = json!({ "assignment": asg });
        if let Some(e) = &ends {
            value["ends"] = json!(e);
        }
        let f = n.action.f();
        let key = Some(n.key.clone());
        env.rec.invoke(p.id, f, value.clone(), p.node, key.as_deref());
        let idem = n.key.clone();
        // The receipt's times (server µs), for the obligations an acknowledged action creates.
        let kind = match n.action {
            Action::Take => {
                let r = worker
                    .take_assignment(pb::TakeAssignmentRequest { assignment: asg.clone(), ..Default::default() }, key)
                    .await;
                let due = r.as_ref().ok().and_then(|w| match w.value.receipt.as_ref()?.result.as_ref()? {
                    pb::receipt::Result::AssignmentTaken(t) => Some(t.delivery_due_unix_micros),
                    _ => None,
                });
                if let Some(due) = due {
                    self.remember(&asg, |k| {
                        k.delivery_due.get_or_insert(due);
                    });
                    a.due = Some(env.rec.timeline(due));
                }
                let created = due.map(|d| vec![json!({ "id": format!("{asg}:delivery"), "due": env.rec.timeline(d) })]);
                p.finish_write(env, f, Some(&idem), r, |_| Completion {
                    value: json!({ "assignment": asg, "created": created.unwrap_or_default() }),
                    ..Completion::default()
                })
            }
            Action::Deliver => {
                let req = pb::DeliverAssignmentRequest {
                    assignment: asg.clone(),
                    output: kungfu_client::text("delivered"),
                    ..Default::default()
                };
                let r = worker.deliver_assignment(req, key).await;
                let due = r.as_ref().ok().and_then(|w| match w.value.receipt.as_ref()?.result.as_ref()? {
                    pb::receipt::Result::AssignmentDelivered(d) => Some(d.judgment_due_unix_micros),
                    _ => None,
                });
                let jw_us = (a.judgment_window_ns / 1000) as i64;
                if let Some(due) = due {
                    // The server computes the judgment due as the delivery's stamp + the window.
                    self.remember(&asg, |k| {
                        k.judgment_due.get_or_insert(due);
                        k.delivered_at.get_or_insert(due - jw_us);
                    });
                    a.due = Some(env.rec.timeline(due));
                }
                let created = due.map(|d| vec![json!({ "id": format!("{asg}:judgment"), "due": env.rec.timeline(d) })]);
                let mut v = value.clone();
                v["created"] = json!(created.unwrap_or_default());
                p.finish_write(env, f, Some(&idem), r, |_| Completion { value: v, ..Completion::default() })
            }
            Action::Drop => {
                let r = worker
                    .drop_assignment(pb::DropAssignmentRequest { assignment: asg.clone(), ..Default::default() }, key)
                    .await;
                p.finish_write(env, f, Some(&idem), r, |_| Completion { value: value.clone(), ..Completion::default() })
            }
            Action::Void => {
                let r = lead
                    .void_assignment(pb::VoidAssignmentRequest { assignment: asg.clone(), ..Default::default() }, key)
                    .await;
                p.finish_write(env, f, Some(&idem), r, |_| Completion { value: value.clone(), ..Completion::default() })
            }
            Action::Adopt => {
                let r = lead
                    .adopt_assignment(pb::AdoptAssignmentRequest { assignment: asg.clone(), ..Default::default() }, key)
                    .await;
                p.finish_write(env, f, Some(&idem), r, |_| Completion { value: value.clone(), ..Completion::default() })
            }
            Action::Reject => {
                let req = pb::RejectAssignmentRequest {
                    assignment: asg.clone(),
                    reason: kungfu_client::text("not what was asked"),
                    ..Default::default()
                };
                let r = lead.reject_assignment(req, key).await;
                p.finish_write(env, f, Some(&idem), r, |_| Completion { value: value.clone(), ..Completion::default() })
            }
        };
        let now = env.rec.now();
        a.next = match kind {
            OpType::Ok => self.after_ok(p, &a, n.action, now),
            // Sent again under the same key while it can still be acknowledged in time: an action
            // ending an obligation only before that obligation's due.
            OpType::Info if n.tries + 1 < MAX_TRIES => {
                let at = now + RETRY_AFTER_NS;
                let in_time = ends.is_none() || a.due.is_some_and(|due| at < due);
                in_time.then(|| Planned { at, tries: n.tries + 1, ..n })
            }
            _ => None,
        };
        self.put(slot, a);
    }

    /// The next action after `done` was acknowledged.
    fn after_ok(&self, p: &mut Proc, a: &Asg, done: Action, now: u64) -> Option<Planned> {
        let due = a.due?;
        let r = p.rng.random_range(0..100);
        let (action, race) = match done {
            Action::Take if r < 55 => (Action::Deliver, false),
            Action::Take if r < 75 => (Action::Deliver, true),
            Action::Take if r < 80 => (Action::Drop, false),
            Action::Take if r < 83 => (Action::Void, false),
            Action::Take => return None, // it times out
            Action::Deliver if r < 75 => {
                let verdict = if p.rng.random_bool(0.5) { Action::Adopt } else { Action::Reject };
                (verdict, r >= 55)
            }
            Action::Deliver => return None, // it settles as undecided
            _ => return None,
        };
        let w = if done == Action::Take { a.delivery_window_ns } else { a.judgment_window_ns };
        let at = Self::when(p, now, due, w, race);
        Self::plan(p, action, at)
    }

    async fn read(&self, env: &Env, p: &mut Proc, slot: usize, c: &Client, ids: Vec<String>) {
        env.rec.invoke(p.id, READ, json!({ "assignments": ids }), p.node, None);
        let mut got = Vec::with_capacity(ids.len());
        let mut failed = None;
        for id in &ids {
            match c.get_assignment(pb::GetAssignmentRequest { assignment: id.clone() }).await {
                Ok(a) => got.push(a),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = failed {
            p.finish_read(env, READ, Err::<(), Error>(e), |_| json!({}));
            return;
        }
        let obligations: Vec<Value> = {
            let mut known = lock(&self.known);
            got.iter().flat_map(|a| views(a, &mut known, false, &env.rec)).collect()
        };
        p.finish_read(env, READ, Ok::<_, Error>(()), |_| json!({ "obligations": obligations }));
        let ended: Vec<&str> = got
            .iter()
            .filter(|a| matches!(a.state, Some(pb::assignment::State::Ended(_))))
            .map(|a| a.id.as_str())
            .collect();
        let mut procs = lock(&self.procs);
        for a in procs[slot].asgs.iter_mut().filter(|a| ended.contains(&a.id.as_str())) {
            a.watched = false;
        }
    }
}

impl Workload for Deadlines {
    fn kind(&self) -> Kind {
        Kind::Deadlines
    }

    fn setup<'a>(&'a mut self, env: &'a Env, processes: usize) -> BoxFuture<'a, Result<()>> {
        async move {
            let (_, lead) = register(env).await?;
            for i in 0..processes.max(1) {
                let (thread_id, secret) = super::open_thread(env, &lead, &format!("deadlines {i}")).await?;
                let thread = thread_id;
                let (worker, key) = register(env).await?;
                env.setup
                    .with_key(key.clone())
                    .join(pb::JoinRequest { grant_secret: secret, ..Default::default() }, None)
                    .await
                    .context("joining a deadlines thread")?;
                self.slots.push((thread, worker, key));
            }
            self.lead_key = lead;
            *lock(&self.procs) = vec![Slot::default(); self.slots.len()];
            Ok(())
        }
        .boxed()
    }

    fn step<'a>(&'a self, env: &'a Env, p: &'a mut Proc) -> BoxFuture<'a, ()> {
        async move {
            let slot = (p.id % p.stride) as usize % self.slots.len().max(1);
            if p.client.is_none() {
                let key = self.slots[slot].2.clone();
                match client::connect(p.endpoint(env), Some(key)).await {
                    Ok(c) => p.client = Some(c),
                    Err(_) => return,
                }
            }
            let Some(worker) = p.client.clone() else { return };
            let lead = worker.with_key(self.lead_key.clone());
            match self.choose(p, slot, env.rec.now()) {
                Choice::Create => self.create(env, p, slot, &lead).await,
                Choice::Act(a, n) => self.act(env, p, slot, &worker, &lead, a, n).await,
                Choice::Read(ids) => self.read(env, p, slot, &lead, ids).await,
                Choice::Idle => {}
            }
        }
        .boxed()
    }

    fn quiesce(&self) -> Duration {
        QUIESCE
    }

    fn final_reads<'a>(&'a self, env: &'a Env, next_process: u64) -> BoxFuture<'a, Result<()>> {
        async move {
            let all = lock(&self.all).clone();
            for (i, (node, endpoint)) in env.endpoints.iter().enumerate() {
                let process = next_process + i as u64;
                env.rec.invoke(process, FINAL_READ, json!({ "assignments": all.len() }), *node, None);
                let reader = node_reader(endpoint, Some(self.lead_key.clone())).await?;
                let mut got = Vec::with_capacity(all.len());
                let mut failed = None;
                for id in &all {
                    match reader.get_assignment(pb::GetAssignmentRequest { assignment: id.clone() }).await {
                        Ok(a) => got.push(a),
                        Err(e) => {
                            failed = Some(e);
                            break;
                        }
                    }
                }
                let (kind, c) = match failed {
                    Some(e) => client::read_failure(&e),
                    None => {
                        let mut known = lock(&self.known);
                        let obligations: Vec<Value> =
                            got.iter().flat_map(|a| views(a, &mut known, true, &env.rec)).collect();
                        (
                            OpType::Ok,
                            Completion { value: json!({ "obligations": obligations }), ..Completion::default() },
                        )
                    }
                };
                env.rec.complete(process, kind, FINAL_READ, *node, None, c);
            }
            Ok(())
        }
        .boxed()
    }
}
