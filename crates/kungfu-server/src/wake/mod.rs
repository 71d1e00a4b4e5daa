//! Wake webhooks (issue #35, docs/wake.md): the leader tells an idle agent's webhook that its turn
//! changed, at least once, in order per target, from the replicated facts.
//!
//! §8: "Notifications MAY speed this up; correct recovery MUST NOT depend on them." A delivery is a
//! hint: it carries the agent, a turn cursor and the turn's digest (§12: nothing the agent could
//! not read, no content, no other party's anything), and the agent reads its turn.
//!
//! How it runs (one task per node, [`run`]; it acts only while the node leads with its term
//! applied, like the deadline scheduler):
//! - **From the facts, not a poll.** Each term it subscribes to the fact feed, then loads every
//!   target from the replicated state (`kungfu_core::read::all_wake_targets`), so nothing applied
//!   in between is missed. An applied command whose effects touched an agent's turn or its
//!   opportunities (§8: an assignment addressed to it, a restricted Task naming it, its engagement,
//!   the Task paused or resumed) marks the agent dirty; so do a deadline among its turn items coming
//!   within `deadline_warning_secs` ("a deadline nears") or passing (the item's next step turns
//!   `wait`), both with no command, and the acknowledgment of its target's last event.
//! - **Coalesced.** Every `coalesce_ms` the dirty agents' turns and opportunities are read on one
//!   snapshot each (the turn as the turn watch reads it) and filtered per target; a target whose
//!   digest (`watch::wake_digest`: the filtered turn, opportunities and nearing deadlines) differs
//!   from its last queued event's gets the next event, numbered per target.
//!   A target holds at most one event not yet acknowledged: changes meanwhile are coalesced into
//!   the next event, which carries the newest turn.
//! - **The outbox is replicated.** Events are queued, acknowledged and given up by one
//!   `RecordWake` system command per round (the core checks the one-outstanding rule). The delivery
//!   id is derived from the queued event (group, target, sequence, log index), so a retry, or a new
//!   leader resending an event the old one sent but whose acknowledgment it did not record, sends
//!   the same `webhook-id` with the same body: receivers dedupe on it.
//! - **Retries.** A non-2xx answer, a timeout or a refused address is retried with full-jitter
//!   exponential backoff (1 s doubling to 5 min, [`send::backoff`]); after `give_up_after_secs`
//!   from the event's fact the leader records the target failed, which `ListWakeTargets`, the CLI
//!   and the metrics show. A failed target sends nothing until its agent sets it again. The
//!   schedule survives the deliverer's restarts on the node ([`Retries`]), and a lost or failed
//!   term pauses before the next, so a leader cut off from its quorum never resends in a loop.
//! - **Only a confirmed leader sends.** Attempts start only shortly after a quorum confirmed this
//!   node leads (a read-index round before a round's sends, or a committed `RecordWake`): a leader
//!   cut off, or restored from its vote at a restart, does not resend what a newer leader delivered.
//! - **Where a target may point** is checked at each send ([`send::Sender`]): the operator's
//!   policy, every resolved address, the connection pinned to a checked address.

pub mod policy;
pub mod send;

use crate::backend::Backend;
use crate::config::WakeSettings;
use kungfu_core::model::{ObligationId, OpportunityId, WakeEvent, WakeFailure, WakeTarget};
use kungfu_core::read::{Opportunity, TurnItem};
use kungfu_core::watch::{TurnCursor, turn_digest, wake_digest};
use kungfu_raft::feed::FeedEvent;
use kungfu_raft::node::caught_up_in;
use kungfu_types::{AgentId, Code, GroupId, Rejection, Timestamp, WakeSecret, WakeTargetId};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinSet;

/// Targets read per page when (re)loading.
const LOAD_PAGE: usize = 1024;
/// Agents whose turns one round reads; the rest wait for the next round.
const MAX_AGENTS_PER_ROUND: usize = 2048;
/// Wait before loading again after a failed read or proposal.
const RETRY_AFTER: Duration = Duration::from_millis(500);

/// The operator's address policy of every check, at the door and at each send.
pub fn policy_of(s: &WakeSettings) -> policy::WakePolicy {
    policy::WakePolicy { schemes: s.schemes.clone(), hosts: s.hosts.clone(), allow_private: s.allow_private }
}

/// A new signing secret: 32 bytes from the operating system.
pub fn new_secret() -> Result<WakeSecret, Rejection> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| Rejection::new(Code::Unavailable, format!("no randomness available: {e}; retry")))?;
    Ok(WakeSecret(bytes))
}

/// The delivery id of an event: the same for every attempt and every leader (docs/wake.md).
pub fn delivery_id(group: GroupId, target: WakeTargetId, e: &WakeEvent) -> String {
    let h = kungfu_core::codec::sha256(&("kungfu.wake.v1", group, target, e.seq, e.applied_index));
    format!("wk_{}", hex::encode(&h[..16]))
}

/// The body of an event (§12: the agent's own cursor and digest, nothing else). Built from the
/// replicated event alone, so any leader sends the same bytes under the same id.
pub fn body(group: GroupId, agent: AgentId, target: WakeTargetId, e: &WakeEvent) -> Vec<u8> {
    let cursor = TurnCursor { group, applied_index: e.applied_index, digest: e.digest };
    let v = serde_json::json!({
        "type": "kungfu.turn.changed",
        "id": delivery_id(group, target, e),
        "agent": agent.to_string(),
        "target": target.to_string(),
        "sequence": e.seq,
        "cursor": kungfu_api::watch::encode_cursor(&cursor),
        "applied_index": e.applied_index,
        "digest": hex::encode(e.digest),
        "changed_at_unix_micros": e.queued_at.as_micros(),
    });
    serde_json::to_vec(&v).unwrap_or_default()
}

/// Runs until `stop` changes: one [`lead`] per term this node leads.
pub async fn run(b: Arc<Backend>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let me = b.node.id;
    let sender = match send::Sender::new(Arc::new(policy_of(&b.config.wake))) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "wake deliveries are off: the HTTP client could not be built");
            return;
        }
    };
    // Retry schedules outlive a term: a deliverer that restarts (a lost write, a reload) must not
    // resend at once what it was backing off from.
    let retries = Retries::default();
    loop {
        let wait = b.node.raft.wait(None);
        let leads = wait.metrics(move |m| caught_up_in(m, me), "the wake deliverer: lead");
        tokio::select! {
            r = leads => if r.is_err() { return },
            _ = stop.changed() => return,
        }
        if kungfu_raft::fatal::core_stop(&b.node.raft).is_some() {
            return;
        }
        let ended = Deliverer::new(b.clone(), sender.clone(), retries.clone()).lead(&mut stop).await;
        if let Ended::Stopped = ended {
            return;
        }
        // Lost or failed: a pause before asking again. The metrics can still name this node leader
        // for a moment after a refused write (a leader cut off from its quorum), and restarting at
        // once would reload and resend in a tight loop until it steps down.
        tokio::select! {
            () = tokio::time::sleep(RETRY_AFTER) => {}
            _ = stop.changed() => return,
        }
    }
}

/// The retry schedule of each outstanding event, `(target, sequence)` to attempts made and the
/// earliest next attempt, kept across the deliverer's restarts on this node.
#[derive(Clone, Debug, Default)]
struct Retries(Arc<std::sync::Mutex<HashMap<(WakeTargetId, u64), (u32, Instant)>>>);

impl Retries {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(WakeTargetId, u64), (u32, Instant)>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

enum Ended {
    Lost,
    Failed,
    Stopped,
}

/// One target as the leader follows it.
#[derive(Debug)]
struct Live {
    t: WakeTarget,
    in_flight: bool,
    attempts: u32,
    retry_at: Option<Instant>,
}

/// What one finished attempt reports.
struct Attempt {
    target: WakeTargetId,
    seq: u64,
    outcome: send::Outcome,
}

struct Deliverer {
    b: Arc<Backend>,
    sender: send::Sender,
    retries: Retries,
    /// When a quorum last confirmed this node leads (a read-index round or a committed record):
    /// sends start only shortly after one, so a leader cut off from its quorum, or one restored
    /// from its vote at a restart, does not resend events a newer leader already delivered.
    confirmed: Option<Instant>,
    group: GroupId,
    targets: HashMap<WakeTargetId, Live>,
    /// Targets with an event outstanding, none in flight and no retry ahead: the next sends.
    ready: BTreeSet<WakeTargetId>,
    /// Retries ahead, earliest first, as `(when, target, sequence)`. An entry is acted on only if
    /// it still describes its target (checked when it comes due): no scan of every target per loop.
    retry_at: BinaryHeap<Reverse<(Instant, WakeTargetId, u64)>>,
    by_agent: HashMap<AgentId, BTreeSet<WakeTargetId>>,
    dirty: BTreeMap<AgentId, Timestamp>,
    /// When an item of an agent's turn turns `wait` (its deadline passes with no command).
    due: BTreeMap<Timestamp, BTreeSet<AgentId>>,
    acks: Vec<(AgentId, WakeTargetId, u64)>,
    gave_up: Vec<(AgentId, WakeTargetId, WakeFailure)>,
    sends: JoinSet<Attempt>,
}

impl Deliverer {
    fn new(b: Arc<Backend>, sender: send::Sender, retries: Retries) -> Deliverer {
        let group = b.node.group();
        Deliverer {
            b,
            sender,
            retries,
            confirmed: None,
            group,
            targets: HashMap::new(),
            ready: BTreeSet::new(),
            retry_at: BinaryHeap::new(),
            by_agent: HashMap::new(),
            dirty: BTreeMap::new(),
            due: BTreeMap::new(),
            acks: Vec::new(),
            gave_up: Vec::new(),
            sends: JoinSet::new(),
        }
    }

    fn now(&self) -> Timestamp {
        self.b.node.clock.now()
    }

    /// Every target of the replicated state; every agent holding one is dirty (a change made
    /// while no leader delivered is found by its digest).
    fn load(&mut self) -> Result<(), kungfu_core::StateError> {
        self.sends.abort_all();
        self.targets.clear();
        self.ready.clear();
        self.retry_at.clear();
        self.by_agent.clear();
        self.due.clear();
        self.acks.clear();
        self.gave_up.clear();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let page =
                self.b.node.state.read(|s| kungfu_core::read::all_wake_targets(s, after.as_deref(), LOAD_PAGE))?;
            let full = page.len() == LOAD_PAGE;
            for (key, t) in page {
                after = Some(key);
                self.insert(t);
            }
            if !full {
                break;
            }
        }
        let now = self.now();
        for agent in self.by_agent.keys() {
            self.dirty.entry(*agent).or_insert(now);
        }
        if crate::canary::armed("wake-drop") {
            // The deliberate bug: what the last leader had outstanding is recorded delivered, unsent.
            for l in self.targets.values_mut() {
                if let Some(e) = l.t.outstanding() {
                    l.t.delivered = e.seq;
                    self.acks.push((l.t.agent, l.t.id, e.seq));
                }
            }
            self.ready.clear();
        }
        metrics::gauge!("kungfu_wake_targets").set(self.targets.len() as f64);
        Ok(())
    }

    fn insert(&mut self, t: WakeTarget) {
        self.by_agent.entry(t.agent).or_default().insert(t.id);
        let (attempts, retry_at) = t
            .outstanding()
            .and_then(|e| self.retries.lock().get(&(t.id, e.seq)).copied())
            .map_or((0, None), |(n, at)| (n, Some(at)));
        let id = t.id;
        self.targets.insert(id, Live { t, in_flight: false, attempts, retry_at });
        self.classify(id);
        metrics::gauge!("kungfu_wake_targets").set(self.targets.len() as f64);
    }

    /// Files a target under what it waits for after any change to it: ready to send, a retry
    /// ahead, or nothing (no event outstanding, one in flight, given up, removed).
    fn classify(&mut self, id: WakeTargetId) {
        self.ready.remove(&id);
        let Some(l) = self.targets.get(&id) else { return };
        let Some(e) = l.t.outstanding().filter(|_| !l.in_flight) else { return };
        match l.retry_at {
            Some(at) if at > Instant::now() => self.retry_at.push(Reverse((at, id, e.seq))),
            _ => {
                self.ready.insert(id);
            }
        }
    }

    /// Moves the retries now due to the ready set; stale entries (the target's event was
    /// delivered, replaced or given up on, or its retry moved) are dropped.
    fn retries_due(&mut self, now: Instant) {
        while let Some(Reverse((at, id, seq))) = self.retry_at.peek().copied() {
            if at > now {
                return;
            }
            self.retry_at.pop();
            let current = self.targets.get(&id).is_some_and(|l| {
                !l.in_flight && l.retry_at == Some(at) && l.t.outstanding().is_some_and(|e| e.seq == seq)
            });
            if current {
                self.ready.insert(id);
            }
        }
    }

    /// Folds one applied command's wake facts into the targets, and marks the agents whose turn
    /// it touched.
    fn follow(&mut self, c: &kungfu_raft::feed::AppliedCommand) {
        use kungfu_core::Fact::*;
        let Some(at) = c.facts.first().map(|f| f.at) else {
            return;
        };
        for f in &c.facts {
            match &f.fact {
                WakeTargetSet { target, agent, url, secret, filter } => {
                    self.insert(WakeTarget {
                        id: *target,
                        agent: *agent,
                        url: url.clone(),
                        secret: *secret,
                        filter: filter.clone(),
                        created_at: f.at,
                        queued: None,
                        delivered: 0,
                        failed: None,
                    });
                    self.dirty.entry(*agent).or_insert(at);
                }
                WakeTargetRemoved { target, agent } => {
                    self.targets.remove(target);
                    self.ready.remove(target);
                    metrics::gauge!("kungfu_wake_targets").set(self.targets.len() as f64);
                    if let Some(set) = self.by_agent.get_mut(agent) {
                        set.remove(target);
                        if set.is_empty() {
                            self.by_agent.remove(agent);
                        }
                    }
                }
                WakeQueued { target, event, .. } => {
                    if let Some(l) = self.targets.get_mut(target) {
                        l.t.queued = Some(*event);
                        l.attempts = 0;
                        l.retry_at = None;
                    }
                    self.classify(*target);
                }
                WakeDelivered { target, agent, seq } => {
                    if let Some(l) = self.targets.get_mut(target) {
                        l.t.delivered = l.t.delivered.max(*seq);
                    }
                    self.classify(*target);
                    self.retries.lock().retain(|(t, s), _| t != target || s > seq);
                    // The next change, if any, may now be queued.
                    self.dirty.entry(*agent).or_insert(at);
                }
                WakeGaveUp { target, failure, .. } => {
                    if let Some(l) = self.targets.get_mut(target) {
                        l.t.failed = Some(failure.clone());
                    }
                    self.classify(*target);
                }
                _ => {}
            }
        }
        for agent in c.effects.turns.iter().chain(&c.effects.opportunities) {
            if self.by_agent.contains_key(agent) {
                self.dirty.entry(*agent).or_insert(at);
            }
        }
        // §8: a Task paused or resumed leaves or rejoins the opportunities of the agents it names,
        // with no index written; its facts say which Task.
        for f in &c.facts {
            if let TaskPaused { task } | TaskResumed { task } = &f.fact {
                for agent in self.named_by(*task) {
                    self.dirty.entry(agent).or_insert(at);
                }
            }
        }
    }

    /// The agents with a target that a restricted Task names.
    fn named_by(&self, task: kungfu_types::TaskId) -> Vec<AgentId> {
        match self.b.node.state.read(|s| kungfu_core::StateExt::task(s, task)) {
            Ok(Some(t)) => match t.audience {
                kungfu_core::model::Audience::Restricted(named) => {
                    named.into_iter().filter(|a| self.by_agent.contains_key(a)).collect()
                }
                kungfu_core::model::Audience::Open => Vec::new(),
            },
            Ok(None) => Vec::new(),
            Err(e) => {
                tracing::warn!(%task, error = %e, "wake: cannot read a paused or resumed Task");
                Vec::new()
            }
        }
    }

    /// One term: load, then follow the feed, queue, send and record until the term ends.
    async fn lead(mut self, stop: &mut tokio::sync::watch::Receiver<bool>) -> Ended {
        let me = self.b.node.id;
        let term = self.b.node.metrics().current_term;
        let mut feed = self.b.node.feed.subscribe();
        if let Err(e) = self.load() {
            tracing::error!(error = %e, "cannot read the wake targets; trying again after a pause");
            return Ended::Failed;
        }
        if self.targets.is_empty() {
            tracing::debug!(term, "wake deliverer leading; no targets");
        } else {
            tracing::info!(targets = self.targets.len(), term, "wake deliveries resumed from the replicated outbox");
        }
        let b = self.b.clone();
        let lost = kungfu_raft::node::wait_server_metrics(&b.node.raft, move |m| {
            kungfu_raft::node::server_leader(m) != Some(me) || kungfu_raft::node::server_term(m) != term
        });
        tokio::pin!(lost);
        let window = Duration::from_millis(self.b.config.wake.coalesce_ms.max(1));
        let mut round = tokio::time::interval(window);
        round.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            self.start_sends();
            let retry = self.next_retry();
            tokio::select! {
                // The feed first: a round never queues from a view older than what was applied.
                biased;
                _ = stop.changed() => return Ended::Stopped,
                r = &mut lost => {
                    if r.is_err() {
                        return Ended::Stopped;
                    }
                    tracing::info!(term, "wake deliveries paused: this node no longer leads");
                    return Ended::Lost;
                }
                event = feed.recv() => match event {
                    Ok(FeedEvent::Applied { commands, .. }) => commands.iter().for_each(|c| self.follow(c)),
                    Ok(FeedEvent::Replaced { .. }) | Err(RecvError::Lagged(_)) => {
                        if let Err(e) = self.load() {
                            tracing::error!(error = %e, "cannot read the wake targets; trying again after a pause");
                            return Ended::Failed;
                        }
                    }
                    Err(RecvError::Closed) => return Ended::Stopped,
                },
                Some(done) = self.sends.join_next(), if !self.sends.is_empty() => {
                    if let Ok(a) = done {
                        self.finished(a);
                    }
                }
                () = sleep_until(retry), if retry.is_some() => {}
                _ = round.tick() => {
                    match self.round().await {
                        Ok(()) => {}
                        Err(Ended::Lost) => return Ended::Lost,
                        Err(other) => return other,
                    }
                }
            }
        }
    }

    /// The earliest retry still ahead (one already due waits for `start_sends`, which a round's
    /// confirmation unblocks: never a spin on a past time). A stale entry may wake the loop once.
    fn next_retry(&self) -> Option<Instant> {
        let now = Instant::now();
        self.retry_at.peek().map(|Reverse((at, _, _))| *at).filter(|at| *at > now)
    }

    /// Starts an attempt for every ready target, up to `max_in_flight`, while a quorum recently
    /// confirmed this node leads.
    fn start_sends(&mut self) {
        let max = self.b.config.wake.max_in_flight;
        let now = Instant::now();
        self.retries_due(now);
        let fresh = Duration::from_millis(2 * self.b.config.wake.coalesce_ms.max(1) + 200);
        if !self.confirmed.is_some_and(|at| now.saturating_duration_since(at) <= fresh) {
            return;
        }
        while self.sends.len() < max {
            let Some(id) = self.ready.pop_first() else { return };
            let Some(l) = self.targets.get_mut(&id) else { continue };
            let Some(e) = l.t.outstanding().filter(|_| !l.in_flight) else { continue };
            l.in_flight = true;
            let (group, agent, url, secret, sender) =
                (self.group, l.t.agent, l.t.url.clone(), l.t.secret, self.sender.clone());
            self.sends.spawn(async move {
                let id_text = delivery_id(group, id, &e);
                let body = body(group, agent, id, &e);
                let timestamp = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
                let outcome = sender
                    .send(&send::Delivery { url: &url, id: &id_text, timestamp, body: &body, secret: &secret.0 })
                    .await;
                Attempt { target: id, seq: e.seq, outcome }
            });
        }
    }

    /// An attempt ended: acknowledge it, or schedule its retry, or give up.
    fn finished(&mut self, a: Attempt) {
        let now = self.now();
        let give_up_after = self.b.config.wake.give_up_after_secs;
        let Some(l) = self.targets.get_mut(&a.target) else { return };
        l.in_flight = false;
        let Some(e) = l.t.outstanding().filter(|e| e.seq == a.seq) else {
            // Replaced or given up on meanwhile: whatever is outstanding now is filed afresh.
            self.classify(a.target);
            return;
        };
        match a.outcome {
            send::Outcome::Delivered { .. } => {
                metrics::counter!("kungfu_wake_deliveries_total", "outcome" => "delivered").increment(1);
                let latency = now.0.saturating_sub(e.queued_at.0) as f64 / 1e6;
                metrics::histogram!("kungfu_wake_delivery_seconds").record(latency);
                // Held here until recorded: no second send of this event from this leader.
                l.t.delivered = e.seq;
                self.acks.push((l.t.agent, l.t.id, e.seq));
            }
            send::Outcome::Failed { error } => {
                metrics::counter!("kungfu_wake_deliveries_total", "outcome" => "failed").increment(1);
                l.attempts += 1;
                let age = Duration::from_micros(now.0.saturating_sub(e.queued_at.0));
                if age >= Duration::from_secs(give_up_after) {
                    tracing::warn!(target = %l.t.id, agent = %l.t.agent, seq = e.seq, %error, "wake delivery given up");
                    l.t.failed = Some(WakeFailure { seq: e.seq, at: now, error: error.clone() });
                    self.gave_up.push((l.t.agent, l.t.id, WakeFailure { seq: e.seq, at: now, error }));
                } else {
                    let wait = send::backoff(l.attempts, unit());
                    tracing::debug!(target = %l.t.id, seq = e.seq, %error, ?wait, "wake delivery failed; retrying");
                    let at = Instant::now() + wait;
                    l.retry_at = Some(at);
                    self.retries.lock().insert((l.t.id, e.seq), (l.attempts, at));
                }
            }
        }
        self.classify(a.target);
    }

    /// One coalescing round: the dirty agents' turns read, new events queued, and the round's
    /// events, acknowledgments and give-ups recorded in one command.
    async fn round(&mut self) -> Result<(), Ended> {
        // Events wait to be sent: confirm with a quorum that this node still leads first.
        if !self.ready.is_empty() || self.retry_at.peek().is_some_and(|Reverse((at, _, _))| *at <= Instant::now()) {
            match self.b.node.linearizable().await {
                Ok(()) => self.confirmed = Some(Instant::now()),
                Err(kungfu_raft::WriteError::NotLeader { .. }) => return Err(Ended::Lost),
                Err(e) => {
                    tracing::debug!(error = %e, "wake: leadership not confirmed; no sends this round");
                    self.confirmed = None;
                }
            }
        }
        let now = self.now();
        // Deadlines that passed turn their items to `wait`, and deadlines that near join the
        // digest: changes with no command.
        let passed: Vec<Timestamp> = self.due.range(..=now).map(|(t, _)| *t).collect();
        for t in passed {
            for agent in self.due.remove(&t).unwrap_or_default() {
                self.dirty.entry(agent).or_insert(t);
            }
        }
        let mut queued = Vec::new();
        let limits = self.b.limits();
        let warning = kungfu_types::Micros::from_secs(self.b.config.wake.deadline_warning_secs);
        let agents: Vec<(AgentId, Timestamp)> = self.dirty.iter().map(|(a, t)| (*a, *t)).collect();
        let mut read = 0;
        for (agent, since) in agents {
            let ids = self.by_agent.get(&agent).cloned().unwrap_or_default();
            let live: Vec<&Live> =
                ids.iter().filter_map(|id| self.targets.get(id)).filter(|l| l.t.failed.is_none()).collect();
            let ready: Vec<WakeTargetId> =
                live.iter().filter(|l| l.t.outstanding().is_none()).map(|l| l.t.id).collect();
            if ready.is_empty() {
                // A change while an event is outstanding stays pending, with the time it was first
                // seen, so the round that records the acknowledgment queues the next event at once
                // (no round lost waiting for the acknowledgment's fact). An agent with no live
                // target has nothing pending.
                if live.is_empty() {
                    self.dirty.remove(&agent);
                }
                continue;
            }
            if read >= MAX_AGENTS_PER_ROUND {
                continue;
            }
            read += 1;
            self.dirty.remove(&agent);
            let (applied, items, opportunities) = match read_view(&self.b, agent, now, &limits) {
                Ok(r) => r,
                Err(r) => {
                    tracing::warn!(%agent, error = %r, "wake: cannot read the agent's turn; skipped this round");
                    continue;
                }
            };
            if let Some(next) = next_change(&items, now, warning) {
                self.due.entry(next).or_default().insert(agent);
            }
            for id in ready {
                let Some(l) = self.targets.get(&id) else { continue };
                let mine: Vec<TurnItem> =
                    items.iter().filter(|i| l.t.filter.admits(i.kind, i.object)).cloned().collect();
                let offered: Vec<OpportunityId> =
                    opportunities.iter().filter(|o| l.t.filter.admits_opportunity(o.object)).map(|o| o.id).collect();
                let digest = wake_digest(agent, &mine, &offered, &nearing(&mine, now, warning));
                let last = l.t.queued.map_or_else(|| turn_digest(agent, &[]), |e| e.digest);
                if digest != last {
                    let seq = l.t.queued.map_or(1, |e| e.seq + 1);
                    queued.push((agent, id, WakeEvent { seq, applied_index: applied, digest, queued_at: since }));
                }
            }
        }
        if queued.is_empty() && self.acks.is_empty() && self.gave_up.is_empty() {
            return Ok(());
        }
        let (nq, nd, ng) = (queued.len(), self.acks.len(), self.gave_up.len());
        let action = kungfu_core::Action::RecordWake {
            queued,
            delivered: std::mem::take(&mut self.acks),
            gave_up: std::mem::take(&mut self.gave_up),
        };
        match self.b.submit_system_many(vec![action]).await {
            Ok(mut answers) => match answers.pop() {
                Some(Ok(_)) => {
                    // Committed in this term: a quorum holds this node as leader now.
                    self.confirmed = Some(Instant::now());
                    tracing::debug!(queued = nq, delivered = nd, gave_up = ng, "wake progress recorded");
                    metrics::counter!("kungfu_wake_give_ups_total").increment(ng as u64);
                    Ok(())
                }
                other => {
                    // The replicated outbox disagrees with this view: start again from it.
                    tracing::warn!(answer = ?other, "wake progress refused; reloading the targets");
                    self.load().map_err(|_| Ended::Failed)
                }
            },
            Err(kungfu_raft::WriteError::NotLeader { .. }) => Err(Ended::Lost),
            Err(e) => {
                // Unknown outcome: what was recorded arrives on the feed; what was not is found
                // again (an acknowledged event not recorded is resent under the same id).
                tracing::warn!(error = %e, "wake progress not recorded; reloading the targets");
                self.load().map_err(|_| Ended::Failed)
            }
        }
    }
}

/// The most opportunities read for one agent; past it the digest covers the oldest.
const MAX_OPPORTUNITIES: usize = 65_536;

/// An agent's whole turn and its opportunities (§8), on one snapshot, and an applied index that
/// snapshot reflects (read before the snapshot, as the turn watch does).
fn read_view(
    b: &Backend,
    agent: AgentId,
    now: Timestamp,
    limits: &kungfu_core::Limits,
) -> Result<(u64, Vec<TurnItem>, Vec<Opportunity>), Rejection> {
    let applied = b.node.applied_index().unwrap_or(0);
    b.node
        .state
        .read(|s| {
            let items = crate::watch::turn_items(s, agent, now, limits)?;
            let mut offered = Vec::new();
            let mut cursor = None;
            loop {
                let page = kungfu_core::read::opportunities(s, agent, cursor.as_ref(), limits.max_page_size, limits)?;
                offered.extend(page.items);
                match page.next_cursor {
                    Some(c) if offered.len() < MAX_OPPORTUNITIES => cursor = Some(c),
                    Some(_) => {
                        tracing::warn!(%agent, "wake: more than {MAX_OPPORTUNITIES} opportunities; the digest covers the oldest");
                        break;
                    }
                    None => break,
                }
            }
            Ok((applied, items, offered))
        })
        .map_err(|e| crate::watch::read_rejection(&e))
}

/// The items not yet `wait` whose deadline is ahead but within `warning` ("a deadline nears").
fn nearing(items: &[TurnItem], now: Timestamp, warning: kungfu_types::Micros) -> Vec<ObligationId> {
    if warning.0 == 0 {
        return Vec::new();
    }
    items
        .iter()
        .filter(|i| i.next != kungfu_types::NextStep::Wait)
        .filter(|i| i.due_at.is_some_and(|d| d > now && d.0 - now.0 <= warning.0))
        .map(|i| i.obligation)
        .collect()
}

/// When the agent's view next changes with no command: the earliest future moment an item's
/// deadline comes within `warning`, or passes (the item turns `wait`).
fn next_change(items: &[TurnItem], now: Timestamp, warning: kungfu_types::Micros) -> Option<Timestamp> {
    items
        .iter()
        .filter(|i| i.next != kungfu_types::NextStep::Wait)
        .filter_map(|i| i.due_at)
        .filter(|d| *d > now)
        .map(|d| {
            let near = Timestamp(d.0.saturating_sub(warning.0));
            if warning.0 > 0 && near > now { near } else { d }
        })
        .min()
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// A draw in [0, 1) for the backoff's jitter.
fn unit() -> f64 {
    let mut b = [0u8; 4];
    if getrandom::fill(&mut b).is_err() {
        return 0.5;
    }
    f64::from(u32::from_le_bytes(b)) / (f64::from(u32::MAX) + 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: u64, index: u64) -> WakeEvent {
        WakeEvent { seq, applied_index: index, digest: [9; 32], queued_at: Timestamp(1_000) }
    }

    fn due_at(asg: u64, due: u64, next: kungfu_types::NextStep) -> TurnItem {
        TurnItem { due_at: Some(Timestamp(due)), ..kungfu_core::testkit::delivery_item(asg, 1, next) }
    }

    #[test]
    fn a_deadline_nears_once_within_the_warning_and_the_next_change_is_scheduled_for_it() {
        use kungfu_types::{Micros, NextStep};
        let warning = Micros(100);
        let items = [
            due_at(1, 1_050, NextStep::Deliver), // within the warning: nearing
            due_at(2, 1_500, NextStep::Deliver), // nears at 1,400
            due_at(3, 900, NextStep::Wait),      // passed: not nearing, nothing ahead
            due_at(4, 1_020, NextStep::Wait),    // `wait` already (its expiry pending)
        ];
        let now = Timestamp(1_000);
        assert_eq!(
            nearing(&items, now, warning),
            vec![ObligationId::AssignmentDelivery(kungfu_types::AssignmentId(1))]
        );
        // Item 1 is already nearing, so its next change is its deadline passing (1,050), before
        // item 2 nears (1,400).
        assert_eq!(next_change(&items, now, warning), Some(Timestamp(1_050)));
        assert_eq!(next_change(&items[1..], now, warning), Some(Timestamp(1_400)));
        assert_eq!(next_change(&items[1..], Timestamp(1_400), warning), Some(Timestamp(1_500)));
        // No warning: only deadlines passing, and nothing nears.
        assert!(nearing(&items, now, Micros(0)).is_empty());
        assert_eq!(next_change(&items[1..], now, Micros(0)), Some(Timestamp(1_500)));
        // Nothing ahead.
        assert_eq!(next_change(&items[2..], now, warning), None);
    }

    #[test]
    fn a_wake_digest_is_the_turn_digest_until_an_opportunity_or_a_nearing_deadline_joins_it() {
        use kungfu_core::model::OpportunityId;
        use kungfu_types::AssignmentId;
        let agent = AgentId(7);
        let items = [due_at(1, 1_050, kungfu_types::NextStep::Deliver)];
        let turn = turn_digest(agent, &items);
        assert_eq!(wake_digest(agent, &items, &[], &[]), turn, "the event's cursor is a turn cursor");
        let offered = [OpportunityId::Assignment(AssignmentId(9))];
        let near = [items[0].obligation];
        let with_offer = wake_digest(agent, &items, &offered, &[]);
        let with_near = wake_digest(agent, &items, &[], &near);
        assert_ne!(with_offer, turn);
        assert_ne!(with_near, turn);
        assert_ne!(with_offer, with_near);
        assert_ne!(wake_digest(agent, &items, &offered, &near), with_offer);
        assert_ne!(wake_digest(AgentId(8), &items, &offered, &[]), with_offer, "the agent is in the digest");
    }

    #[test]
    fn a_delivery_id_is_stable_per_event_and_differs_between_events() {
        let (g, t) = (GroupId::ZERO, WakeTargetId(3));
        assert_eq!(delivery_id(g, t, &event(1, 10)), delivery_id(g, t, &event(1, 10)));
        assert_ne!(delivery_id(g, t, &event(1, 10)), delivery_id(g, t, &event(2, 10)));
        assert_ne!(delivery_id(g, t, &event(1, 10)), delivery_id(g, WakeTargetId(4), &event(1, 10)));
        assert_ne!(delivery_id(g, t, &event(1, 10)), delivery_id(GroupId(5), t, &event(1, 10)));
        assert!(delivery_id(g, t, &event(1, 10)).starts_with("wk_"));
    }

    #[test]
    fn the_body_names_only_the_agent_its_target_and_the_cursor() {
        let b = body(GroupId::ZERO, AgentId(7), WakeTargetId(3), &event(2, 40));
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["type"], "kungfu.turn.changed");
        assert_eq!(v["agent"], "ag_7");
        assert_eq!(v["target"], "wt_3");
        assert_eq!(v["sequence"], 2);
        assert_eq!(v["applied_index"], 40);
        assert_eq!(v["id"], delivery_id(GroupId::ZERO, WakeTargetId(3), &event(2, 40)));
        let keys: BTreeSet<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let allowed: BTreeSet<&str> = [
            "type",
            "id",
            "agent",
            "target",
            "sequence",
            "cursor",
            "applied_index",
            "digest",
            "changed_at_unix_micros",
        ]
        .into();
        assert_eq!(keys, allowed, "§12: a body grows only by review");
        // The same event gives the same bytes: a new leader resends exactly what the old one sent.
        assert_eq!(b, body(GroupId::ZERO, AgentId(7), WakeTargetId(3), &event(2, 40)));
    }
}
