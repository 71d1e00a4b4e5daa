//! A small in-memory world for tests of the core and of the crates above it: it keeps a
//! [`MemState`], a test clock and the limits, applies commands through [`apply`], commits them
//! like storage would, and after every apply checks every invariant ([`validate`]) and, when asked,
//! that rebuilding from the facts gives the live state (L1). Not used by production code.

use crate::action::{Action, Addressees, Command, LabeledBody, NewGrant, PostBody, Principal, RankGoal};
use crate::engine::{Applied, Precheck, apply, precheck};
use crate::limits::Limits;
use crate::model::{Editors, ObligationId, Pin, ScatterRank};
use crate::read;
use crate::rebuild::{rebuild, without_receipts};
use crate::receipt::ActionResult;
use crate::secret::{fingerprint, hash_secret};
use crate::state::{MemState, StateExt};
use crate::validate::validate;
use kungfu_types::{
    AgentId, AssignmentId, Content, EntrySeq, IdempotencyKey, Labels, MemoryId, Micros, RecordId, Rejection, Role,
    Scope, ThreadId, Timestamp,
};
use std::collections::BTreeSet;

/// The test world.
#[derive(Debug)]
pub struct World {
    pub state: MemState,
    pub limits: Limits,
    pub now: Timestamp,
    /// Check L1 (rebuild from facts equals the live state) after every apply. Costly; on by default.
    pub check_rebuild: bool,
    counter: u64,
}

impl Default for World {
    fn default() -> World {
        World::new()
    }
}

impl World {
    pub fn new() -> World {
        World::with_limits(Limits::default())
    }

    pub fn with_limits(limits: Limits) -> World {
        World {
            state: MemState::new(),
            limits,
            now: Timestamp::from_micros(1_000_000_000_000),
            check_rebuild: true,
            counter: 0,
        }
    }

    /// Moves the test clock forward. Leaders stamp strictly increasing times; so does the world.
    pub fn advance(&mut self, by: Micros) {
        self.now = self.now.plus(by);
    }

    fn tick(&mut self) -> Timestamp {
        self.now = self.now.plus(Micros(1));
        self.now
    }

    /// A fresh unique idempotency key.
    pub fn fresh_key(&mut self) -> IdempotencyKey {
        self.counter += 1;
        IdempotencyKey::new(format!("k{}", self.counter)).expect("valid key")
    }

    /// A fresh secret, as the server would generate one.
    pub fn fresh_secret(&mut self) -> String {
        self.counter += 1;
        format!("kf_test_secret_{:032x}", self.counter)
    }

    /// Applies a command at the next tick, commits it, and checks every invariant.
    pub fn exec(&mut self, principal: Principal, action: Action, key: Option<IdempotencyKey>) -> Applied {
        let ts = self.tick();
        self.exec_cmd(&Command::new(principal, action, key, ts))
    }

    /// Applies an already built command (its `ts` is used as is), commits, and checks.
    pub fn exec_cmd(&mut self, cmd: &Command) -> Applied {
        let prechecked = match precheck(&self.state, cmd, &self.limits) {
            Ok(p) => p,
            Err(e) => panic!("state error while pre-checking {:?}: {e}", cmd.action.kind()),
        };
        let applied = match apply(&self.state, cmd, &self.limits) {
            Ok(a) => a,
            Err(e) => panic!("state error while applying {:?}: {e}", cmd.action.kind()),
        };
        // DESIGN §3: the leader's pre-check answers for apply only where apply answers the same on
        // the same state; every command of every core test checks it.
        match (&prechecked, &applied.outcome) {
            (Precheck::Proceed, _) => assert!(
                !applied.replayed,
                "the pre-check missed a replay of {:?} that apply answered from its receipt",
                cmd.action.kind()
            ),
            (Precheck::Refused(p), Err(a)) => {
                assert_eq!(p, a, "the pre-check refused {:?} otherwise than apply", cmd.action.kind())
            }
            (Precheck::Replayed(p), Ok(a)) if applied.replayed => {
                assert_eq!(p, a, "the pre-check replayed another receipt than apply for {:?}", cmd.action.kind())
            }
            (p, a) => panic!("the pre-check answered {p:?} where apply answered {a:?} for {:?}", cmd.action.kind()),
        }
        if applied.outcome.is_err() {
            // A rejected action leaves nothing but the deadline facts it found (L2, L4).
            assert!(
                applied.facts.iter().all(|f| matches!(f.fact, crate::fact::Fact::DeadlinePassed { .. })),
                "a rejected action recorded facts of its own: {:?}",
                applied.facts
            );
        }
        if applied.changes.is_empty() {
            // Nothing changed (a rejection with no deadline to settle, a replay): the invariants
            // checked after the last change still hold, so the costly checks are skipped.
            return applied;
        }
        self.state.commit(&applied.changes);
        if let Err(v) = validate(&self.state) {
            panic!("after {:?}: {v}", cmd.action.kind());
        }
        if self.check_rebuild {
            self.assert_rebuild();
        }
        applied
    }

    /// L1: the state rebuilt from the journals equals the live state (receipts aside).
    pub fn assert_rebuild(&self) {
        let rebuilt = match rebuild(&self.state) {
            Ok(r) => r,
            Err(e) => panic!("rebuild failed: {e}"),
        };
        let live = without_receipts(&self.state);
        if rebuilt != live {
            let diff: Vec<String> = live
                .map
                .iter()
                .filter(|(k, v)| rebuilt.map.get(*k) != Some(*v))
                .map(|(k, v)| format!("live {}: {v:?} / rebuilt {:?}", hex::encode(k), rebuilt.map.get(k)))
                .chain(
                    rebuilt
                        .map
                        .keys()
                        .filter(|k| !live.map.contains_key(*k))
                        .map(|k| format!("extra rebuilt key {}", hex::encode(k))),
                )
                .take(5)
                .collect();
            panic!("L1 broken: rebuilding from facts differs from the live state:\n{}", diff.join("\n"));
        }
    }

    /// An agent action with a fresh idempotency key.
    pub fn act(&mut self, agent: AgentId, action: Action) -> Result<ActionResult, Rejection> {
        let key = self.fresh_key();
        self.exec(Principal::Agent(agent), action, Some(key)).outcome.map(|r| r.result)
    }

    /// An agent action that must succeed.
    #[track_caller]
    pub fn ok(&mut self, agent: AgentId, action: Action) -> ActionResult {
        let kind = action.kind();
        match self.act(agent, action) {
            Ok(r) => r,
            Err(r) => panic!("{} by {agent} was rejected: {r}", kind.as_str()),
        }
    }

    /// An agent action that must be rejected; returns the rejection.
    #[track_caller]
    pub fn err(&mut self, agent: AgentId, action: Action) -> Rejection {
        let kind = action.kind();
        match self.act(agent, action) {
            Ok(r) => panic!("{} by {agent} succeeded but should be rejected: {r:?}", kind.as_str()),
            Err(r) => r,
        }
    }

    /// An agent action that must be rejected with no effect at all: the state is exactly as it was
    /// (L2; the caller makes sure no deadline falls due, whose passing would be recorded).
    #[track_caller]
    pub fn refused(&mut self, agent: AgentId, action: Action) -> Rejection {
        let before = self.state.clone();
        let r = self.err(agent, action);
        assert!(self.state == before, "the rejected action ({r}) changed the state");
        r
    }

    /// Registers an agent; returns its id.
    pub fn register(&mut self) -> AgentId {
        let secret = self.fresh_secret();
        let key = self.fresh_key();
        let action = Action::RegisterAgent { key_hash: hash_secret(&secret), key_fingerprint: fingerprint(&secret) };
        match self.exec(Principal::Registrar, action, Some(key)).outcome.map(|r| r.result) {
            Ok(ActionResult::AgentRegistered { agent, .. }) => agent,
            other => panic!("registration failed: {other:?}"),
        }
    }

    /// A new grant with a fresh secret; returns (the grant, the secret).
    pub fn new_grant(&mut self, role: Role) -> (NewGrant, String) {
        let secret = self.fresh_secret();
        (NewGrant { role, hash: hash_secret(&secret), fingerprint: fingerprint(&secret) }, secret)
    }

    /// Creates a thread governed by `governor` and admits each member with its role.
    pub fn thread_with(&mut self, governor: AgentId, members: &[(AgentId, Role)]) -> ThreadId {
        let thread = match self.ok(governor, Action::CreateThread { subject: Content::from("subject"), grant: None }) {
            ActionResult::ThreadCreated { thread, .. } => thread,
            other => panic!("unexpected {other:?}"),
        };
        for (agent, role) in members {
            let (grant, secret) = self.new_grant(*role);
            self.ok(governor, Action::IssueGrant { thread, grant });
            self.ok(*agent, Action::Join { grant_hash: hash_secret(&secret) });
        }
        thread
    }

    /// Posts text with an optional reply and ask; returns the entry's sequence number.
    pub fn post(
        &mut self,
        author: AgentId,
        thread: ThreadId,
        text: &str,
        reply_to: Option<EntrySeq>,
        ask: Option<&[AgentId]>,
    ) -> EntrySeq {
        let action = Action::Post {
            thread,
            body: PostBody::Content(Content::from(text)),
            reply_to,
            ask: ask.map(|a| a.iter().copied().collect::<BTreeSet<_>>()),
            task_ref: None,
            assignment: None,
        };
        match self.ok(author, action) {
            ActionResult::Posted { entry, .. } => entry,
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Creates an assignment addressed to `addressee` with the given windows; returns its id.
    pub fn assign(
        &mut self,
        creator: AgentId,
        thread: ThreadId,
        addressee: AgentId,
        delivery: Option<Micros>,
        judgment: Option<Micros>,
    ) -> AssignmentId {
        let action = Action::Post {
            thread,
            body: PostBody::Content(Content::from("please do this")),
            reply_to: None,
            ask: Some(BTreeSet::new()),
            task_ref: None,
            assignment: Some(crate::action::NewAssignment {
                addressee,
                criteria: Content::from("criteria"),
                output_structure: None,
                delivery_window: delivery,
                judgment_window: judgment,
            }),
        };
        match self.ok(creator, action) {
            ActionResult::Posted { assignment: Some(a), .. } => a,
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Design §2.5: writes a labeled Memory (`memory: None`) or a labeled new version of the
    /// author's own Memory; returns the new version's pin.
    pub fn write_labeled(&mut self, author: AgentId, memory: Option<MemoryId>, text: &str, labels: Labels) -> Pin {
        match self.ok(author, Action::WriteLabeled { memory, content: Content::from(text), labels }) {
            ActionResult::LabeledWritten { pin, .. } => pin,
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Design §2.5: widens a version's scope; returns the new version's pin.
    pub fn widen(&mut self, author: AgentId, pin: Pin, scope: Scope) -> Pin {
        match self.ok(author, Action::WidenScope { pin, scope }) {
            ActionResult::ScopeWidened { to, .. } => to,
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Design §3.3: sends a body to the addressees with no reply; returns (entry, pin, responders).
    pub fn send(
        &mut self,
        author: AgentId,
        thread: ThreadId,
        body: LabeledBody,
        to: Addressees,
    ) -> (EntrySeq, Pin, BTreeSet<AgentId>) {
        let action = Action::Send { thread, body, to, reply_to: None, reply_to_latest: false };
        match self.ok(author, action) {
            ActionResult::Sent { entry, pin, responders, .. } => (entry, pin, responders),
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Design §4.3: scatters one goal per member with default windows; returns (header, ranks in
    /// rank order).
    pub fn scatter(
        &mut self,
        author: AgentId,
        thread: ThreadId,
        header: LabeledBody,
        goals: Vec<(AgentId, LabeledBody)>,
    ) -> (EntrySeq, Vec<ScatterRank>) {
        let action = Action::Scatter {
            thread,
            header,
            goals: goals.into_iter().map(|(member, body)| RankGoal { member, body }).collect(),
            criteria: Content::from("criteria"),
            output_structure: None,
            delivery_window: None,
            judgment_window: None,
        };
        match self.ok(author, action) {
            ActionResult::Scattered { header, ranks, .. } => (header, ranks),
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Design §5.3: creates a record with an inline fleet body and message; returns its id.
    pub fn create_record(&mut self, author: AgentId, thread: ThreadId, scope: Scope, editors: Editors) -> RecordId {
        let fleet = Labels::new(kungfu_types::Taint::Tainted, Scope::Fleet);
        let action = Action::CreateRecord {
            thread,
            title: Content::from("title"),
            state: Content::from("working"),
            body: crate::action::BodyInput::Content { content: Content::from("body"), labels: fleet },
            scope,
            editors,
            message: LabeledBody::Content { content: Content::from("created a record"), labels: fleet },
            ask: None,
        };
        match self.ok(author, action) {
            ActionResult::RecordCreated { record, .. } => record,
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Design §5.4: patches a record with a fleet message; the outcome.
    pub fn patch_record(
        &mut self,
        author: AgentId,
        record: RecordId,
        base_rev: u32,
        ops: Vec<crate::action::PatchOp>,
    ) -> Result<ActionResult, Rejection> {
        let fleet = Labels::new(kungfu_types::Taint::Tainted, Scope::Fleet);
        let message = LabeledBody::Content { content: Content::from("patched the record"), labels: fleet };
        self.act(author, Action::PatchRecord { record, base_rev, ops, message, ask: None })
    }

    /// Plays the leader's deadline timers: proposes `Expire` for every due item at `now`, as a
    /// timer would, and returns what ended.
    pub fn fire_due_timers(&mut self) -> Vec<ObligationId> {
        let due = match read::due_obligations(&self.state, None, usize::MAX) {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        };
        let mut ended = Vec::new();
        for (_, id, _) in due {
            let due_at = self.due_at(id);
            if due_at.is_some_and(|d| d <= self.now) {
                let out = self.exec(
                    Principal::System,
                    Action::Expire { obligation: id, due_at: due_at.unwrap_or_default() },
                    None,
                );
                if let Ok(r) = out.outcome {
                    if let ActionResult::Expired { ended: e } = r.result {
                        ended.extend(e);
                    }
                }
            }
        }
        ended
    }

    fn due_at(&self, id: ObligationId) -> Option<Timestamp> {
        use crate::model::{AssignmentState, EngagementState};
        // A state that cannot be read fails the test; it is never taken for "nothing due".
        let assignment = |a| match self.state.assignment(a) {
            Ok(found) => found,
            Err(e) => panic!("reading {a}: {e}"),
        };
        let engagement = |e| match self.state.engagement(e) {
            Ok(found) => found,
            Err(err) => panic!("reading {e}: {err}"),
        };
        match id {
            ObligationId::AssignmentDelivery(a) => match assignment(a)?.state {
                AssignmentState::Taken { delivery_due, .. } => Some(delivery_due),
                _ => None,
            },
            ObligationId::AssignmentJudgment(a) => match assignment(a)?.state {
                AssignmentState::Delivered { judgment_due, .. } => Some(judgment_due),
                _ => None,
            },
            ObligationId::EngagementDelivery(e) => match engagement(e)?.state {
                EngagementState::Open { delivery_due } => Some(delivery_due),
                _ => None,
            },
            ObligationId::EngagementJudgment(e) => match engagement(e)?.state {
                EngagementState::Delivered { judgment_due, .. } => Some(judgment_due),
                _ => None,
            },
            ObligationId::Response { .. } => None,
        }
    }

    /// Every opportunity of an agent (§8), read page by page with a small page size.
    pub fn opportunity_ids(&self, agent: AgentId) -> Vec<crate::model::OpportunityId> {
        let mut ids = Vec::new();
        let mut cursor = None;
        loop {
            let page = match read::opportunities(&self.state, agent, cursor.as_ref(), 3, &self.limits) {
                Ok(p) => p,
                Err(e) => panic!("opportunities: {e}"),
            };
            ids.extend(page.items.into_iter().map(|o| o.id));
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => return ids,
            }
        }
    }

    /// The full turn of an agent, read page by page with a small page size.
    pub fn full_turn(&self, agent: AgentId) -> Vec<read::TurnItem> {
        let mut items = Vec::new();
        let mut cursor = None;
        loop {
            let page = match read::turn(&self.state, agent, cursor.as_ref(), 3, self.now, &self.limits) {
                Ok(p) => p,
                Err(e) => panic!("turn: {e}"),
            };
            items.extend(page.items);
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => return items,
            }
        }
    }
}

/// A turn item of a delivery owed on assignment `asg` in thread 1, arisen at `at` and due at
/// 1,000 µs: what the watch tests build turns from.
pub fn delivery_item(asg: u64, at: u64, next: kungfu_types::NextStep) -> read::TurnItem {
    read::TurnItem {
        obligation: ObligationId::AssignmentDelivery(AssignmentId(asg)),
        kind: crate::model::ObligationKind::Delivery,
        object: kungfu_types::ObjectRef::Thread(ThreadId(1)),
        arose_at: Timestamp(at),
        due_at: Some(Timestamp(1_000)),
        next,
    }
}
