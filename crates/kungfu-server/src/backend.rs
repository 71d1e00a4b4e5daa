//! The service layer every door calls (gRPC today; MCP and HTTP are the same kind of adapter):
//! authentication from the call's [`Credentials`], the leader's clock, replication of a command
//! and the answer from its applied result, and reads on one snapshot. It speaks domain types and
//! answers every refusal as a [`Rejection`]; the doors convert requests and answers at their edge.

pub use crate::actors::Written;
use crate::actors::{Outcome, Proposer};
use crate::config::{ClusterView, Config};
use crate::credentials::{Caller, Consistency, Credentials, Operator};
use kungfu_api::KeyedAction;
use kungfu_core::read::ReadError;
use kungfu_core::{Command, Limits, Principal, Receipt, StateExt, StateRead};
use kungfu_raft::{Lead, RaftNode, Response, WriteError};
use kungfu_types::{AgentId, Code, Rejection, Timestamp};
use std::sync::Arc;
use std::time::Duration;

/// How many agent keys a node keeps in memory ([`Backend::identify`]).
const AGENT_KEYS_CACHED: usize = 65_536;

/// Makes each idempotency key the `skip-dedup` canary invents unique.
static CANARY_KEYS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The service layer: the state shared by every door and call.
pub struct Backend {
    pub node: Arc<RaftNode>,
    pub config: Arc<Config>,
    /// The per-agent and per-address rate limits of this node.
    pub rate: crate::ratelimit::RateLimits,
    /// Agent keys this node has seen, by hash: a key names one agent for good (no action changes or
    /// removes `agent_by_key`), so an authenticated call reads the store only for a key it has not
    /// met yet (issue #15). Bounded; account state is still checked by every action (§4).
    agent_keys: quick_cache::sync::Cache<kungfu_types::SecretHash, AgentId>,
    /// The actors of live Threads and Tasks (DESIGN §3).
    pub actors: Arc<crate::actors::Actors>,
    /// Whether a deadline scheduler runs for this node, and the term whose deadlines it has armed:
    /// a new leader serves its first write only once its timers are armed (DESIGN §4).
    pub timers: tokio::sync::watch::Sender<Timers>,
}

/// The deadline scheduler's progress, as the write path waits on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timers {
    /// A scheduler runs (nodes built without one, as in some tests, never wait for it).
    pub scheduling: bool,
    /// The last term in which it loaded the whole due index and armed its timers.
    pub armed_term: u64,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Backend(node {})", self.node.id)
    }
}

/// The result of a read, and for a stale read how far behind it may be.
#[derive(Debug)]
pub struct Read<R> {
    pub value: R,
    /// (applied index, entries known committed but not yet applied) for a stale read.
    pub stale: Option<(u64, u64)>,
}

impl<R> Read<R> {
    /// The same read with its value mapped.
    pub fn map<S>(self, f: impl FnOnce(R) -> S) -> Read<S> {
        Read { value: f(self.value), stale: self.stale }
    }
}

fn status(code: Code, message: impl Into<String>) -> Rejection {
    refuse(Rejection::new(code, message))
}

/// A refusal at the edge (authentication, rates, leadership, a node that cannot decide now): the
/// one place such refusals are counted, as they are made. Rejections decided by the core are
/// counted as actions instead (`metrics::action`).
pub(crate) fn refuse(r: Rejection) -> Rejection {
    crate::metrics::refused(r.code.as_str());
    r
}

impl Backend {
    pub fn new(node: Arc<RaftNode>, config: Arc<Config>) -> Backend {
        let rate = crate::ratelimit::RateLimits::new(&config.rate_limits);
        let actors = Arc::new(crate::actors::Actors::new(config.actors.clone()));
        let timers = tokio::sync::watch::channel(Timers::default()).0;
        let agent_keys = quick_cache::sync::Cache::new(AGENT_KEYS_CACHED);
        Backend { node, config, rate, agent_keys, actors, timers }
    }

    /// The answer to a call that reached a node that does not lead: nothing happened. It names
    /// the leader's API address (in the message and [`Rejection::leader`]) when one is known and is another
    /// node: `hint` is the leader raft named when it refused, else this node's current view. It
    /// never names itself (a client following the hint would loop, issue #11); with no leader to
    /// name, it says to retry after about one election timeout.
    fn not_leader_hinted(&self, hint: Option<(kungfu_raft::NodeId, kungfu_raft::Node)>) -> Rejection {
        self.not_leader_answer(
            hint,
            |id, api| {
                format!("node {} is not the leader; node {id} is, at {api}: send the same request there", self.node.id)
            },
            &self.no_leader_words(),
        )
    }

    /// What a node that knows no leader says (issue #16): whether it reaches a quorum.
    pub(crate) fn no_leader_words(&self) -> String {
        let (reached, voters) = self.node.reachable_voters();
        format!(
            "node {} is not the leader and knows no leader ({}); retry shortly",
            self.node.id,
            kungfu_raft::node::no_quorum_words(reached, voters)
        )
    }

    /// The NOT_LEADER answer of every door (calls and watch streams): `named` words the refusal
    /// that names leader `id` at `api`, `unknown` the one that names none.
    pub(crate) fn not_leader_answer(
        &self,
        hint: Option<(kungfu_raft::NodeId, kungfu_raft::Node)>,
        named: impl FnOnce(kungfu_raft::NodeId, &str) -> String,
        unknown: &str,
    ) -> Rejection {
        let leader = hint
            .filter(|(id, node)| *id != self.node.id && !node.api.is_empty())
            .or_else(|| self.node.leader_elsewhere().filter(|(_, node)| !node.api.is_empty()));
        let Some((id, node)) = leader else {
            let r = Rejection::new(Code::NotLeader, unknown)
                .with_retry_after(kungfu_types::Micros(self.config.raft.election_timeout_min_ms * 1000));
            return refuse(r);
        };
        refuse(Rejection::new(Code::NotLeader, named(id, &node.api)).with_leader(node.api))
    }

    /// Authenticates the caller by its bearer credential, an agent key (`kf_ag_…`). Deactivated
    /// agents still authenticate: reads do not require activity (§4); the core refuses their
    /// actions. Authentication is no leadership gate (a read's gate is its read index, a write's
    /// is [`Backend::lead`]); but a key this node does not know yet is looked up again after a
    /// read-index round, so an agent registered a moment ago on another leader is never refused
    /// for this node's lag (a follower learns there that it does not lead, and says where the
    /// leader is).
    pub async fn authenticate(&self, c: &Credentials) -> Result<Caller, Rejection> {
        let agent = self.identify(c).await?;
        self.rate.read(agent.0).map_err(refuse)?;
        Ok(Caller { agent, consistency: c.consistency })
    }

    /// [`Backend::authenticate`] for a write: counted against the agent's write rate.
    pub async fn authenticate_writer(&self, c: &Credentials) -> Result<Caller, Rejection> {
        let agent = self.identify(c).await?;
        self.rate.write(agent.0).map_err(refuse)?;
        Ok(Caller { agent, consistency: c.consistency })
    }

    /// Registrations are limited per client address.
    pub fn check_registration(&self, c: &Credentials) -> Result<(), Rejection> {
        match c.remote {
            Some(ip) => self.rate.registration(ip).map_err(refuse),
            None => Ok(()),
        }
    }

    async fn identify(&self, c: &Credentials) -> Result<AgentId, Rejection> {
        let Some(key) = c.bearer.as_deref() else {
            return Err(status(
                Code::Unauthenticated,
                "missing `authorization: Bearer <agent key>`; register to get a key",
            ));
        };
        let hash = kungfu_core::secret::hash_secret(key.trim());
        let lookup = || -> Result<Option<AgentId>, Rejection> {
            if let Some(agent) = self.agent_keys.get(&hash) {
                return Ok(Some(agent));
            }
            // One point read of the latest state: no snapshot to take.
            let found =
                self.node.state.live().agent_by_key(&hash).map_err(|e| status(Code::Unavailable, e.to_string()))?;
            if let Some(agent) = found {
                self.agent_keys.insert(hash, agent);
            }
            Ok(found)
        };
        if c.consistency == Consistency::Stale {
            // A stale read is served by any node from what it has applied.
            return lookup()?
                .ok_or_else(|| status(Code::Unauthenticated, "unknown agent key (on this node, for a stale read)"));
        }
        if let Some(agent) = lookup()? {
            return Ok(agent);
        }
        match self.node.linearizable().await {
            Ok(()) => {}
            Err(WriteError::NotLeader { leader }) => return Err(self.not_leader_hinted(leader)),
            Err(e) => return Err(status(Code::Unavailable, e.to_string())),
        }
        lookup()?.ok_or_else(|| status(Code::Unauthenticated, "unknown agent key"))
    }

    /// Who registers a new agent: anyone under open registration (limited per client address),
    /// only the operator (by its token) under closed registration.
    pub fn registrar(&self, c: &Credentials) -> Result<Principal, Rejection> {
        self.check_registration(c)?;
        if self.config.registration.open {
            Ok(Principal::Registrar)
        } else {
            self.authenticate_operator(c)?;
            Ok(Principal::Operator)
        }
    }

    /// Who deactivates an agent: the agent itself (§4), or the operator, who may deactivate
    /// anyone (account state is set by the implementation). Refused as the agent would be.
    pub async fn agent_or_operator(&self, c: &Credentials) -> Result<Principal, Rejection> {
        match self.authenticate_writer(c).await {
            Ok(me) => Ok(Principal::Agent(me.agent)),
            Err(agent_err) => match self.authenticate_operator(c) {
                Ok(_) => Ok(Principal::Operator),
                Err(_) => Err(agent_err),
            },
        }
    }

    /// Whether this node is ready to serve writes and linearizable reads, or why not (issue #16):
    /// what gRPC health and `/readyz` report. A leader counts as cut off from its quorum once no
    /// quorum has acknowledged it for two election timeouts; a node whose raft core stopped is
    /// never ready (issue #36).
    pub fn readiness(&self) -> Result<(), String> {
        // Issue #36: a node whose raft core stopped keeps the metrics of its last moment (a
        // leader's role, a quorum's last acknowledgement), so the rule below would still pass.
        if let Some(reason) = kungfu_raft::fatal::core_stop(&self.node.raft) {
            return Err(format!(
                "the raft core of node {} stopped ({reason}): the node is fenced and exits for its supervisor to restart it",
                self.node.id
            ));
        }
        let window = Duration::from_millis(2 * self.config.raft.election_timeout_max_ms);
        self.node.readiness(self.config.api.ready_max_lag_entries, window)
    }

    /// Checks the operator token (the bearer credential of an operator call).
    pub fn authenticate_operator(&self, c: &Credentials) -> Result<Operator, Rejection> {
        let Some(expected) = &self.config.operator_token else {
            return Err(status(
                Code::Unauthenticated,
                "operator calls are disabled on this node (no operator_token configured)",
            ));
        };
        match c.bearer.as_deref() {
            Some(t) if constant_time_eq(t.trim().as_bytes(), expected.as_bytes()) => Ok(Operator::authenticated()),
            _ => Err(status(Code::Unauthenticated, "operator token required")),
        }
    }

    /// Who may read the cluster's status through the web console (`console.cluster_view`): with
    /// `"loopback"` a client connected from a loopback address (`c.remote`), no token needed, and
    /// no one else; with `"operator_token"` the operator token, as for every operator call.
    pub fn authenticate_cluster_viewer(&self, c: &Credentials) -> Result<Operator, Rejection> {
        match self.config.console.cluster_view {
            ClusterView::Loopback if c.remote.is_some_and(|ip| ip.is_loopback()) => Ok(Operator::authenticated()),
            ClusterView::Loopback => Err(status(
                Code::Unauthenticated,
                "the cluster view is open to loopback clients only (console.cluster_view = \"loopback\"): open the \
                 console on the node's own machine, or set console.cluster_view = \"operator_token\"",
            )),
            ClusterView::OperatorToken => self.authenticate_operator(c).map_err(|mut r| {
                r.message = format!(
                    "{} (console.cluster_view = \"operator_token\": enter the operator token in the page)",
                    r.message
                );
                r
            }),
        }
    }

    /// The leadership gate of a write, passed once per write (L5, DESIGN §4): this node leads,
    /// its state holds every entry of earlier terms, and its deadline scheduler has armed this
    /// term's timers. Nothing it decides or stamps can then contradict what an earlier leader
    /// acknowledged: a pre-check of a new leader that had not yet applied an acknowledged join
    /// would refuse the member `NOT_MEMBER` for good, and a stamp taken from its applied time could
    /// fall behind a committed one (§9). Right after an election this waits for the new term's
    /// first entry to apply; afterwards it is one metrics reading. What decides from the state
    /// after the gate (the pre-check) checks that the proof still holds
    /// (`RaftNode::still_leads`) instead of asking again. Authentication checks no leadership of
    /// its own: a read's gate is its read index, a write's is this.
    pub async fn lead(&self) -> Result<Lead, Rejection> {
        let timeout = Duration::from_millis(self.config.api.write_timeout_ms);
        let started = std::time::Instant::now();
        match self.node.lead(timeout).await {
            Ok(lead) => {
                self.timers_armed(lead, timeout.saturating_sub(started.elapsed())).await?;
                Ok(lead)
            }
            Err(WriteError::NotLeader { leader }) => Err(self.not_leader_hinted(leader)),
            Err(e) => {
                let mut r = Rejection::new(Code::Unavailable, format!("{e}; nothing was done"))
                    .with_retry_after(kungfu_types::Micros(self.config.raft.heartbeat_ms * 1000));
                r.definite = true;
                Err(refuse(r))
            }
        }
    }

    /// Waits, at most `timeout`, until the deadline scheduler has armed the timers of `lead`'s
    /// term (DESIGN §4: a new leader arms its timers before it serves its first write), so no
    /// deadline of the due index waits for a timer while this leader already answers writes. One
    /// reading once armed.
    async fn timers_armed(&self, lead: Lead, timeout: Duration) -> Result<(), Rejection> {
        let term = lead.term();
        let armed = |t: &Timers| !t.scheduling || t.armed_term >= term;
        if armed(&self.timers.borrow()) {
            return Ok(());
        }
        let mut rx = self.timers.subscribe();
        match tokio::time::timeout(timeout, rx.wait_for(armed)).await {
            Ok(_) => Ok(()),
            Err(_) => {
                let mut r = Rejection::new(
                    Code::Unavailable,
                    format!("node {} leads but has not armed its deadline timers yet; nothing was done", self.node.id),
                )
                .with_retry_after(kungfu_types::Micros(self.config.raft.heartbeat_ms * 1000));
                r.definite = true;
                Err(refuse(r))
            }
        }
    }

    /// Replicates a command and answers from its applied result. An action on one Thread or Task
    /// goes through that object's actor, which serializes and pre-checks it.
    pub async fn submit(self: &Arc<Self>, principal: Principal, keyed: KeyedAction) -> Result<Written, Rejection> {
        // L5: stamp and pre-check only from a state that holds everything acknowledged.
        let lead = self.lead().await?;
        let mut key = keyed.key;
        // The pre-check decides at the time the stamp would have now; the proposal is stamped
        // again, in log order (`RaftNode::propose_stamped`, L5).
        let provisional = self.node.provisional_stamp();
        if crate::canary::armed("skip-dedup") {
            let fresh =
                format!("canary-{}-{}", provisional.0, CANARY_KEYS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
            key = kungfu_types::IdempotencyKey::new(fresh).unwrap_or(key);
        }
        let mut action = keyed.action;
        if crate::canary::armed("record-lww")
            && let kungfu_core::Action::PatchRecord { record, base_rev, .. } = &mut action
            && let Ok(Some(r)) = self.node.state.read_latest(|s| s.shared_record(*record))
        {
            // Last writer wins: the patch is decided as if its writer had read the current rev.
            *base_rev = r.rev;
        }
        let cmd = Command::new(principal, action, Some(key), provisional);
        // A routing decision (apply decides again): the latest state, with no snapshot to take.
        let object = kungfu_core::actor_object(&self.node.state.live(), &cmd.action)
            .map_err(|e| status(Code::Unavailable, e.to_string()))?;
        // One span per action, with the agent, the action, its object and (once committed) its
        // log index as fields; at DEBUG, so a node at its default level pays nothing for it.
        let span = tracing::debug_span!(
            "action",
            principal = ?cmd.principal,
            kind = cmd.action.kind().as_str(),
            object = object.map(|o| o.to_string()).unwrap_or_default(),
            log_index = tracing::field::Empty,
            outcome = tracing::field::Empty,
        );
        let run = async {
            match object {
                Some(object) => self.actors.dispatch(self.clone(), object, lead, cmd).await,
                // An action on no one object (a new Memory or thread, a join whose grant names no
                // thread, a registration) is pre-checked here, as an actor pre-checks its own: a
                // definite refusal or a replay costs no log write (DESIGN §3, issue #16). Its
                // state is what every acknowledged action left (the leader has caught up), so a
                // refusal decided from it is a legal serial order (L5).
                None => match self.precheck(lead, &cmd) {
                    Some(answer) => answer,
                    None => self.submit_command(cmd).await,
                },
            }
        };
        tracing::Instrument::instrument(run, span).await
    }

    /// An authenticated agent's action: replicated, answered from its receipt.
    pub async fn write(self: &Arc<Self>, caller: &Caller, keyed: KeyedAction) -> Result<Written, Rejection> {
        self.submit(Principal::Agent(caller.agent), keyed).await
    }

    /// Decides `cmd` against one snapshot without writing anything. Returns the answer when no log
    /// write is needed: a definite rejection, or the stored receipt of a replayed request (L3).
    /// Otherwise None: the command must go through raft, where apply decides again.
    pub fn precheck(&self, lead: Lead, cmd: &Command) -> Option<Result<Written, Rejection>> {
        // L5: a leader whose state may lack entries of earlier terms (it lost the lead since it
        // passed the gate, and perhaps won it again) decides nothing from it; apply will.
        if !self.node.still_leads(lead) {
            return None;
        }
        let limits = self.limits();
        let started = std::time::Instant::now();
        // Issue #15: decides as far as the action's first fact, not the whole apply again.
        let decided = self.node.state.read_latest(|s| kungfu_core::precheck(s, cmd, &limits)).ok()?;
        let kind = cmd.action.kind().as_str();
        match decided {
            kungfu_core::Precheck::Refused(r) => {
                crate::metrics::action(kind, r.code.as_str(), started.elapsed());
                Some(Err(r))
            }
            kungfu_core::Precheck::Replayed(receipt) => {
                crate::metrics::action(kind, "replayed", started.elapsed());
                Some(Ok(Written { receipt, replayed: true }))
            }
            kungfu_core::Precheck::Proceed => None,
        }
    }

    /// Replicates several system commands (deadline expiries) as one log entry, all stamped with
    /// one time; one outcome per action, in order. An error means the entry's outcome is unknown
    /// or it was never proposed: propose again (each expiry ends its obligation at most once).
    pub async fn submit_system_many(
        &self,
        actions: Vec<kungfu_core::Action>,
    ) -> Result<Vec<Result<Receipt, Rejection>>, WriteError> {
        let timeout = Duration::from_millis(self.config.api.write_timeout_ms);
        // The gate of the scheduler's writes: the scheduler arms the timers, so it waits for none.
        self.node.lead(timeout).await?;
        let early = crate::canary::armed("early-deadlines");
        let n = actions.len();
        // The metrics label: `expire` for the scheduler's batches, `record_wake` for the deliverer's.
        let kind = actions.first().map_or("expire", |a| a.kind().as_str());
        let cmds: Vec<Command> =
            actions.into_iter().map(|a| Command::new(Principal::System, a, None, Timestamp::ZERO)).collect();
        let started = std::time::Instant::now();
        let proposed = self
            .node
            .propose_many_stamped(cmds, |ts| if early { Timestamp(ts.0 + crate::canary::EARLY_BY_MICROS) } else { ts })
            .await?;
        let answers = match proposed.outcome(timeout).await? {
            (Response::Batch(each), _) if each.len() == n => each,
            (other, _) => {
                return Err(WriteError::Fatal(format!("a batch of {n} expiries was answered with {other:?}")));
            }
        };
        let mut outcomes = Vec::with_capacity(answers.len());
        for answer in answers {
            let outcome = match answer {
                Response::Applied { outcome, .. } => outcome,
                other => return Err(WriteError::Fatal(format!("an expiry was answered with {other:?}"))),
            };
            let code = outcome.as_ref().err().map_or("ok", |r| r.code.as_str());
            crate::metrics::action(kind, code, started.elapsed());
            outcomes.push(outcome);
        }
        Ok(outcomes)
    }

    /// Proposes a command through raft and answers from its applied result.
    pub(crate) async fn submit_command(self: &Arc<Self>, cmd: Command) -> Result<Written, Rejection> {
        self.propose(cmd).await?.await
    }

    /// Hands a command to raft now, in order with this node's other proposals, and returns the
    /// wait for its answer (which an object's actor runs apart, so it can propose its next command
    /// while this one commits). An error means nothing was proposed.
    pub(crate) async fn propose(
        self: &Arc<Self>,
        cmd: Command,
    ) -> Result<impl std::future::Future<Output = Result<Written, Rejection>> + Send + 'static, Rejection> {
        let timeout = Duration::from_millis(self.config.api.write_timeout_ms);
        let kind = cmd.action.kind().as_str();
        let started = std::time::Instant::now();
        let proposed = match self.node.propose_stamped(cmd).await {
            Ok(p) => p,
            Err(e) => return Err(self.write_failed(kind, started, e)),
        };
        let b = self.clone();
        let span = tracing::Span::current();
        Ok(tracing::Instrument::instrument(
            async move {
                let written = proposed.outcome(timeout).await;
                let (outcome, result) = match written {
                    Ok((Response::Applied { outcome: Ok(receipt), replayed }, log_id)) => {
                        tracing::Span::current().record("log_index", log_id.index);
                        (if replayed { "replayed" } else { "ok" }, Ok(Written { receipt, replayed }))
                    }
                    Ok((Response::Applied { outcome: Err(rejection), .. }, log_id)) => {
                        tracing::Span::current().record("log_index", log_id.index);
                        (rejection.code.as_str(), Err(rejection))
                    }
                    Ok((Response::Done | Response::Batch(_), _)) => {
                        ("indeterminate", Err(status(Code::Unavailable, "the log answered a command with no result")))
                    }
                    Err(e) => return Err(b.write_failed(kind, started, e)),
                };
                b.answered(kind, outcome, started);
                result
            },
            span,
        ))
    }

    /// The answer to a write that raft did not apply (or whose outcome is unknown).
    fn write_failed(&self, kind: &'static str, started: std::time::Instant, e: WriteError) -> Rejection {
        let (outcome, rejection) = match e {
            WriteError::NotLeader { leader } => ("NOT_LEADER", self.not_leader_hinted(leader)),
            e @ WriteError::NotCaughtUp(_) => ("UNAVAILABLE", status(Code::Unavailable, e.to_string())),
            // L3: an indeterminate write may have been applied; the same key returns its receipt.
            e @ (WriteError::Indeterminate(_) | WriteError::Fatal(_)) => (
                "indeterminate",
                status(Code::Unavailable, format!("{e}; retry the same request with the same idempotency key")),
            ),
        };
        self.answered(kind, outcome, started);
        rejection
    }

    fn answered(&self, kind: &'static str, outcome: &str, started: std::time::Instant) {
        crate::metrics::action(kind, outcome, started.elapsed());
        tracing::Span::current().record("outcome", outcome);
        tracing::debug!(latency_us = started.elapsed().as_micros() as u64, "action answered");
    }

    /// A linearizable read on one consistent snapshot (§9, DESIGN §8).
    pub async fn read<R>(
        &self,
        f: impl FnOnce(&dyn StateRead, &Limits, Timestamp) -> Result<R, ReadError>,
    ) -> Result<R, Rejection> {
        match self.node.linearizable().await {
            Ok(()) => {}
            Err(WriteError::NotLeader { leader }) => return Err(self.not_leader_hinted(leader)),
            Err(e) => return Err(status(Code::Unavailable, e.to_string())),
        }
        let limits = self.limits();
        let now = self.node.clock.now();
        self.node.state.read(|s| f(s, &limits, now)).map_err(|e| kungfu_api::read_error_rejection(&e))
    }

    /// A read as the caller asks for it: linearizable on the leader by default (DESIGN §8), or,
    /// with [`Consistency::Stale`], served by any node from its own state at once. A stale answer
    /// says how far behind it may be: its applied index and the entries this node knows are
    /// committed but not yet applied ([`Read::stale`]).
    pub async fn read_as<R>(
        &self,
        consistency: Consistency,
        f: impl FnOnce(&dyn StateRead, &Limits, Timestamp) -> Result<R, ReadError>,
    ) -> Result<Read<R>, Rejection> {
        if consistency != Consistency::Stale {
            return Ok(Read { value: self.read(f).await?, stale: None });
        }
        let m = self.node.metrics();
        let applied = m.last_applied.as_ref().map(|l| l.index).unwrap_or(0);
        let committed = m.cluster_committed.as_ref().map(|l| l.index).unwrap_or(applied);
        let limits = self.limits();
        let now = self.node.clock.now();
        let value = self.node.state.read(|s| f(s, &limits, now)).map_err(|e| kungfu_api::read_error_rejection(&e))?;
        Ok(Read { value, stale: Some((applied, committed.saturating_sub(applied))) })
    }

    pub(crate) fn limits(&self) -> Arc<Limits> {
        // Until limits are replicated, every replica applies the built-in defaults.
        self.node.replicated_limits().unwrap_or_default()
    }
}

/// Compares secrets without leaking where they differ through timing.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Proposer for Backend {
    fn precheck(&self, lead: Lead, cmd: &Command) -> Option<Result<Written, Rejection>> {
        Backend::precheck(self, lead, cmd)
    }

    // Boxed: the proposal's future (the stamp lock, the send into raft's queue) is large.
    fn propose(
        self: Arc<Self>,
        cmd: Command,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Outcome, Rejection>> + Send>> {
        Box::pin(async move {
            let outcome = Backend::propose(&self, cmd).await?;
            Ok(Box::pin(outcome) as Outcome)
        })
    }
}
