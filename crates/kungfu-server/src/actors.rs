//! One actor per live Thread and per Task on the leader (DESIGN §3). The actor's mailbox
//! serializes competing actions on its object and proposes them to raft in arrival order. It keeps
//! up to `max_in_flight` of them in flight at once (proposed, not yet applied), so a busy object
//! (a pub/sub topic, a hot Task) is not limited to one raft round trip per action; every replica
//! applies them in the order proposed and apply decides each one (L5).
//!
//! The pre-check (with the core, on one snapshot: a definite rejection or the replay of a stored
//! receipt is answered without a log write) runs only from a state that cannot change under it:
//! no command of this object in flight, and a leader caught up with its term
//! (`Backend::precheck`). Otherwise the command is proposed and apply decides: the actor never
//! answers from a guess about what an in-flight command will do. The pre-check is an optimization
//! and a fair queue, never the authority.
//!
//! Bounds: at most `max_live` actors exist (an action on an object beyond that goes straight to
//! raft, still correct, just unqueued); at most `max_pending` actions wait per object (more are
//! refused with `RATE_LIMITED` and `retry_after`); an actor idle for `idle` stops, so a million
//! stored threads never need a million actors. The registry is the actors' supervisor: an actor
//! that fails or stops is replaced by a fresh one on the next action.

use crate::config::ActorSettings;
use kungfu_core::Command;
use kungfu_raft::Lead;
use kungfu_types::{Code, Micros, ObjectRef, Rejection};
use ractor::{Actor, ActorProcessingErr, ActorRef, ActorStatus, RpcReplyPort, rpc::CallResult};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A successful write: the receipt and whether it was replayed (L3).
#[derive(Debug)]
pub struct Written {
    pub receipt: kungfu_core::Receipt,
    pub replayed: bool,
}

/// A command's answer still to come, once it is proposed.
pub type Outcome = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Written, Rejection>> + Send>>;

/// What an object's actor asks of the service layer (`backend::Backend` implements it): the
/// actors serialize actions, the service layer decides and proposes them. A trait, so the actors
/// depend on what they call and not on the layer that owns them.
pub trait Proposer: Send + Sync + 'static {
    /// The answer of a command that needs no log write (a refusal, a replay), or None; decided
    /// only while `lead`, the proof of the write's leadership gate, still holds.
    fn precheck(&self, lead: Lead, cmd: &Command) -> Option<Result<Written, Rejection>>;

    /// Hands `cmd` to raft, in order with this node's other proposals; an error means nothing
    /// was proposed.
    fn propose(
        self: Arc<Self>,
        cmd: Command,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Outcome, Rejection>> + Send>>;
}

/// The one message of an object actor.
pub enum ObjMsg {
    Submit { lead: Lead, cmd: Command, reply: RpcReplyPort<Answer> },
}

/// What an object's actor answers a submitted action with.
#[derive(Debug)]
pub enum Answer {
    /// The answer itself: a pre-check's (a refusal or a replay, no log write), or a refusal before
    /// anything was proposed.
    Now(Result<Written, Rejection>),
    /// The command is proposed, in order: its answer comes when it is applied, and the caller waits
    /// for it in its own task while the actor goes on to its next action (no task of its own per
    /// action, issue #30).
    Later(InFlight),
}

/// A proposed command's answer still to come. It holds one of the object's in-flight slots until
/// the command is decided, so the actor never pre-checks beside a command it proposed (the
/// pre-check runs only when nothing of its object is in flight).
pub struct InFlight {
    outcome: Option<Outcome>,
    slot: Option<Slot>,
}

/// One in-flight slot of an object, given back when dropped.
struct Slot {
    _permit: tokio::sync::OwnedSemaphorePermit,
}

/// One action counted in its object's `pending` until its caller has the answer or went away.
struct Waiting(Arc<AtomicUsize>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl std::fmt::Debug for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.outcome.is_some() { "InFlight(waiting)" } else { "InFlight(answered)" })
    }
}

impl std::future::Future for InFlight {
    type Output = Result<Written, Rejection>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        let Some(outcome) = self.outcome.as_mut() else {
            return std::task::Poll::Ready(Err(Rejection::new(Code::Unavailable, "the answer was already taken")));
        };
        let result = std::task::ready!(outcome.as_mut().poll(cx));
        self.outcome = None;
        // The slot is freed before the caller hears back, so its next action finds this one no
        // longer in flight (and may be pre-checked).
        self.slot = None;
        std::task::Poll::Ready(result)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // The caller went away with its command still in flight (a cancelled call): the slot
        // stays taken until the command is decided, as if the caller had waited.
        if let (Some(outcome), Some(slot)) = (self.outcome.take(), self.slot.take()) {
            tokio::spawn(async move {
                let _ = outcome.await;
                drop(slot);
            });
        }
    }
}

impl std::fmt::Debug for ObjMsg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ObjMsg::Submit { cmd, .. } => write!(f, "Submit({})", cmd.action.kind().as_str()),
        }
    }
}

struct ObjectActor;

struct ObjState {
    backend: Arc<dyn Proposer>,
    /// One permit per action in flight; a proposal holds one until its answer is ready.
    in_flight: Arc<tokio::sync::Semaphore>,
    max_in_flight: usize,
}

impl Actor for ObjectActor {
    type Msg = ObjMsg;
    type State = ObjState;
    type Arguments = (Arc<dyn Proposer>, usize);

    async fn pre_start(
        &self,
        _myself: ActorRef<ObjMsg>,
        (backend, max_in_flight): (Arc<dyn Proposer>, usize),
    ) -> Result<ObjState, ActorProcessingErr> {
        let max_in_flight = max_in_flight.max(1);
        let in_flight = Arc::new(tokio::sync::Semaphore::new(max_in_flight));
        Ok(ObjState { backend, in_flight, max_in_flight })
    }

    async fn handle(
        &self,
        _myself: ActorRef<ObjMsg>,
        msg: ObjMsg,
        state: &mut ObjState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            ObjMsg::Submit { lead, cmd, reply } => {
                // Waits while `max_in_flight` actions of this object are in flight: the mailbox
                // holds the rest (bounded by `max_pending`).
                let permit = state.in_flight.clone().acquire_owned().await?;
                let alone = state.in_flight.available_permits() + 1 == state.max_in_flight;
                let slot = Slot { _permit: permit };
                let prechecked = if alone { state.backend.precheck(lead, &cmd) } else { None };
                let answer = match prechecked {
                    Some(result) => {
                        drop(slot);
                        Answer::Now(result)
                    }
                    // Proposed, in order: the next action may be proposed while this one commits.
                    // `Proposer::propose` answers with a boxed future: ractor moves the handler's
                    // future, and a box moves as a pointer.
                    None => match state.backend.clone().propose(cmd).await {
                        Ok(outcome) => Answer::Later(InFlight { outcome: Some(outcome), slot: Some(slot) }),
                        Err(rejection) => {
                            drop(slot);
                            Answer::Now(Err(rejection))
                        }
                    },
                };
                // The caller may have gone away; dropping an `InFlight` keeps its slot until the
                // command is decided.
                let _ = reply.send(answer);
            }
        }
        Ok(())
    }
}

struct Entry {
    actor: ActorRef<ObjMsg>,
    pending: Arc<AtomicUsize>,
    last_used: Instant,
}

/// The registry (and supervisor) of object actors.
pub struct Actors {
    settings: ActorSettings,
    live: std::sync::Mutex<HashMap<ObjectRef, Entry>>,
}

impl std::fmt::Debug for Actors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Actors(max {})", self.settings.max_live)
    }
}

fn alive(a: &ActorRef<ObjMsg>) -> bool {
    matches!(a.get_status(), ActorStatus::Running | ActorStatus::Starting | ActorStatus::Upgrading)
}

impl Actors {
    pub fn new(settings: ActorSettings) -> Actors {
        Actors { settings, live: std::sync::Mutex::new(HashMap::new()) }
    }

    /// How many actors are alive now.
    pub fn live(&self) -> usize {
        self.registry().values().filter(|e| alive(&e.actor)).count()
    }

    /// How many actions are waiting in, or being handled by, the actors' mailboxes now.
    pub fn queued(&self) -> usize {
        self.registry().values().map(|e| e.pending.load(Ordering::Acquire)).sum()
    }

    /// The registry, locked for a lookup or an update: a short critical section, never held across
    /// an await (issue #30: every action takes it, so it must cost a map lookup, not a task switch).
    fn registry(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectRef, Entry>> {
        // Every critical section leaves the map whole, so a poisoned lock's map is still right.
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The live actor of `object`, if any, marked used.
    fn lookup(&self, object: &ObjectRef) -> Option<(ActorRef<ObjMsg>, Arc<AtomicUsize>)> {
        let mut live = self.registry();
        let e = live.get_mut(object)?;
        if !alive(&e.actor) {
            live.remove(object);
            return None;
        }
        e.last_used = Instant::now();
        Some((e.actor.clone(), e.pending.clone()))
    }

    /// Runs `cmd` through the actor of `object`, spawning it if needed.
    pub async fn dispatch(
        &self,
        b: Arc<dyn Proposer>,
        object: ObjectRef,
        lead: Lead,
        cmd: Command,
    ) -> Result<Written, Rejection> {
        let (actor, pending) = match self.lookup(&object) {
            Some(found) => found,
            None => {
                if self.registry().len() >= self.settings.max_live {
                    // Over the bound: still correct without an actor (apply decides), just unqueued.
                    return b.propose(cmd).await?.await;
                }
                // Spawned outside the lock. Two callers may race to start the object's actor:
                // the first one registered is the object's, the other stops before it handles
                // anything, so one object never has two mailboxes (L5).
                let pending = Arc::new(AtomicUsize::new(0));
                let (spawned, _) =
                    Actor::spawn(None, ObjectActor, (b, self.settings.max_in_flight)).await.map_err(|e| {
                        Rejection::new(Code::Unavailable, format!("cannot start the actor of {object}: {e}"))
                    })?;
                let mut live = self.registry();
                match live.get_mut(&object) {
                    Some(e) if alive(&e.actor) => {
                        spawned.stop(Some("lost the race to start".into()));
                        e.last_used = Instant::now();
                        (e.actor.clone(), e.pending.clone())
                    }
                    _ => {
                        live.insert(
                            object,
                            Entry { actor: spawned.clone(), pending: pending.clone(), last_used: Instant::now() },
                        );
                        (spawned, pending)
                    }
                }
            }
        };
        // Admission control: ractor mailboxes are unbounded, so the bound is ours.
        let waiting = Waiting(pending.clone());
        if pending.fetch_add(1, Ordering::AcqRel) >= self.settings.max_pending {
            drop(waiting);
            let r =
                Rejection::new(Code::RateLimited, format!("too many actions are waiting on {object}; retry shortly"))
                    .with_retry_after(Micros::from_millis(100));
            return Err(r);
        }
        let answer = match actor.call(|reply| ObjMsg::Submit { lead, cmd, reply }, None).await {
            Ok(CallResult::Success(Answer::Now(r))) => r,
            Ok(CallResult::Success(Answer::Later(in_flight))) => in_flight.await,
            // The actor stopped or failed with the action queued or in flight: it may or may not
            // have been proposed, so the outcome is unknown (retry with the same key, L3).
            _ => {
                let r = Rejection::new(
                    Code::Unavailable,
                    format!(
                        "the actor of {object} stopped while handling the action; retry with the same idempotency key"
                    ),
                );
                Err(r)
            }
        };
        // The answer is the caller's now: the action no longer waits on its object.
        drop(waiting);
        answer
    }

    /// Stops actors idle longer than the setting, and forgets stopped ones. Run periodically.
    pub fn sweep(&self) {
        let idle = Duration::from_millis(self.settings.idle_ms);
        let mut live = self.registry();
        live.retain(|_, e| {
            let quiet = e.pending.load(Ordering::Acquire) == 0 && e.last_used.elapsed() >= idle;
            if quiet {
                e.actor.stop(Some("idle".into()));
            }
            !quiet && alive(&e.actor)
        });
    }

    /// Sweeps until `stop` changes.
    pub async fn run_sweeper(self: Arc<Actors>, mut stop: tokio::sync::watch::Receiver<bool>) {
        let period = Duration::from_millis((self.settings.idle_ms / 2).clamp(10, 5_000));
        loop {
            tokio::select! {
                _ = tokio::time::sleep(period) => self.sweep(),
                _ = stop.changed() => {
                    let mut live = self.registry();
                    for e in live.values() {
                        e.actor.stop(Some("shutdown".into()));
                    }
                    live.clear();
                    return;
                }
            }
        }
    }
}
