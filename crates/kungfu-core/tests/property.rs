//! The property test of issue #2: random action sequences by several agents, deadlines passing
//! included, with every invariant checked after every step.
//!
//! After every step (besides `validate` and the rebuild from facts, which `World` runs after every
//! apply): every open obligation has a holder and an exit that needs no one else; terminal states
//! never change; no response is owed by a non-member; no undelivered assignment has a departed
//! party; adoptions never exceed the limit; rebuilding from facts gives the same state; replaying
//! an earlier request returns its original receipt byte for byte.
//!
//! The coordination layer (COORDINATION §11.2) adds labeled writes, widening, `Send` and `Scatter`
//! to the mix, and after every step: every open obligation is a response, delivery or judgment
//! caused by a posted responder set or a taking (the coordination facts add none); no entry pins
//! quarantined or below-fleet labeled content and no public Memory's current version is labeled
//! below public; every collective's ranks strictly increase by member and never change.
//!
//! The shared record (COORDINATION §5, §11.2 item 3) adds `CreateRecord` and `PatchRecord` with
//! random ops, random base revs (stale ones included) and ids drawn from a small pool (so
//! duplicates happen), and after every step, for every record: folding its accepted writes (the
//! `RecordCreated` and `RecordPatched` facts) in log order gives its current view and its view at
//! a past rev; so no accepted append is ever missing later; and no replace was accepted on a stale
//! base.
//!
//! The run prints its seed. Reproduce a failure with `KUNGFU_PROP_SEED=<seed>`; change the number
//! of sequences with `KUNGFU_PROP_CASES` (default 1000).

use kungfu_core::action::{Addressees, ArtifactInput, BodyInput, LabeledBody, PatchOp, RankGoal};
use kungfu_core::coord::read::{BodyView, record_at};
use kungfu_core::model::*;
use kungfu_core::testkit::World;
use kungfu_core::*;
use kungfu_types::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

/// Outcomes seen across all sequences: successes per action kind, rejections per code. Printed at
/// the end and checked, so a generator that stops reaching an action fails the test.
static STATS: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

fn count(label: String) {
    if let Ok(mut s) = STATS.lock() {
        *s.entry(label).or_default() += 1;
    }
}

/// One abstract step. Indices pick among the objects that exist when the step runs, so every
/// sequence is meaningful whatever came before; `who` picks the agent who is most likely allowed
/// to act (3 times in 4) or any agent, so rejections are exercised too.
#[derive(Clone, Debug)]
enum Op {
    Register,
    CreateThread { who: u8 },
    Admit { thread: u8, who: u8, role: u8 },
    Leave { thread: u8, who: u8 },
    Remove { thread: u8, who: u8 },
    ChangeRole { thread: u8, who: u8, role: u8 },
    Post { thread: u8, who: u8, reply: Option<u8>, ask: Option<Vec<u8>>, assign: Option<u8> },
    Handle { thread: u8, who: u8, entry: u8 },
    Retract { thread: u8, who: u8, entry: u8 },
    Close { thread: u8, who: u8 },
    VoidGrant { thread: u8, who: u8 },
    Assignment { asg: u8, who: u8, what: u8 },
    CreateTask { who: u8, restricted: bool, max: Option<u8>, adopt_on_missing: bool },
    TaskAdmin { task: u8, who: u8, what: u8 },
    TakeTask { task: u8, who: u8, deliver: bool, combined: bool },
    Engagement { eng: u8, who: u8, what: u8 },
    Memory { who: u8, what: u8 },
    // A labeled Memory, or a labeled version of one of the agent's own (design §2.5).
    WriteLabeled { who: u8, existing: Option<u8>, taint: u8, scope: u8 },
    // Widens a known version, mostly by its author and mostly to a wider scope.
    WidenScope { who: u8, pin: u8, scope: u8 },
    // New labeled content (`labels`) or a known version (None), to nobody, some members or all
    // speakers (`to`), sometimes as a correction of an earlier entry (`reply`).
    Send { thread: u8, who: u8, to: u8, agents: Vec<u8>, labels: Option<(u8, u8)>, reply: Option<u8> },
    // One goal per picked member, mostly distinct speakers of the thread.
    Scatter { thread: u8, who: u8, members: Vec<u8> },
    // A record in a picked thread, mostly by a speaker, mostly at a scope it may have.
    CreateRecord { thread: u8, who: u8, scope: u8, governors: bool },
    // A patch of a picked record: each op is (kind, argument); the base lags the record's rev by
    // `base_lag % 3` (stale bases), or is 0 now and then (refused).
    PatchRecord { record: u8, who: u8, base_lag: u8, ops: Vec<(u8, u8)> },
    // Wake targets (issue #35): set or remove one (an agent), or the leader's deliverer recording
    // progress on one, mostly valid (the next event, the outstanding one acknowledged or given up).
    Wake { who: u8, what: u8 },
    Deactivate { who: u8 },
    Advance { secs: u16 },
    FireTimers,
    Replay { which: u16 },
}

fn op() -> impl Strategy<Value = Op> {
    let u = any::<u8>;
    prop_oneof![
        2 => Just(Op::Register),
        3 => u().prop_map(|who| Op::CreateThread { who }),
        6 => (u(), u(), u()).prop_map(|(thread, who, role)| Op::Admit { thread, who, role }),
        2 => (u(), u()).prop_map(|(thread, who)| Op::Leave { thread, who }),
        2 => (u(), u()).prop_map(|(thread, who)| Op::Remove { thread, who }),
        2 => (u(), u(), u()).prop_map(|(thread, who, role)| Op::ChangeRole { thread, who, role }),
        10 => (u(), u(), proptest::option::of(u()), proptest::option::of(proptest::collection::vec(u(), 0..3)), proptest::option::of(u()))
            .prop_map(|(thread, who, reply, ask, assign)| Op::Post { thread, who, reply, ask, assign }),
        3 => (u(), u(), u()).prop_map(|(thread, who, entry)| Op::Handle { thread, who, entry }),
        // A retract succeeds only for its author while a response is pending: at weight 3 a run of
        // 1000 sequences had 3-11 successes and, once in a few hundred runs, none (the coverage
        // check below failed on a sound build). At 8 a run has about 20.
        8 => (u(), u(), u()).prop_map(|(thread, who, entry)| Op::Retract { thread, who, entry }),
        1 => (u(), u()).prop_map(|(thread, who)| Op::Close { thread, who }),
        1 => (u(), u()).prop_map(|(thread, who)| Op::VoidGrant { thread, who }),
        16 => (u(), u(), u()).prop_map(|(asg, who, what)| Op::Assignment { asg, who, what }),
        2 => (u(), any::<bool>(), proptest::option::of(1u8..4), any::<bool>())
            .prop_map(|(who, restricted, max, adopt_on_missing)| Op::CreateTask { who, restricted, max, adopt_on_missing }),
        5 => (u(), u(), u()).prop_map(|(task, who, what)| Op::TaskAdmin { task, who, what }),
        10 => (u(), u(), any::<bool>(), any::<bool>()).prop_map(|(task, who, deliver, combined)| Op::TakeTask { task, who, deliver, combined }),
        12 => (u(), u(), u()).prop_map(|(eng, who, what)| Op::Engagement { eng, who, what }),
        4 => (u(), u()).prop_map(|(who, what)| Op::Memory { who, what }),
        2 => (u(), proptest::option::of(u()), u(), u())
            .prop_map(|(who, existing, taint, scope)| Op::WriteLabeled { who, existing, taint, scope }),
        2 => (u(), u(), u()).prop_map(|(who, pin, scope)| Op::WidenScope { who, pin, scope }),
        4 => (u(), u(), u(), proptest::collection::vec(u(), 1..3), proptest::option::of((u(), u())), proptest::option::of(u()))
            .prop_map(|(thread, who, to, agents, labels, reply)| Op::Send { thread, who, to, agents, labels, reply }),
        2 => (u(), u(), proptest::collection::vec(u(), 1..4))
            .prop_map(|(thread, who, members)| Op::Scatter { thread, who, members }),
        4 => (u(), u(), u(), any::<bool>())
            .prop_map(|(thread, who, scope, governors)| Op::CreateRecord { thread, who, scope, governors }),
        16 => (u(), u(), u(), proptest::collection::vec((u(), u()), 1..4))
            .prop_map(|(record, who, base_lag, ops)| Op::PatchRecord { record, who, base_lag, ops }),
        3 => (u(), u()).prop_map(|(who, what)| Op::Wake { who, what }),
        1 => u().prop_map(|who| Op::Deactivate { who }),
        5 => (1u16..120).prop_map(|secs| Op::Advance { secs }),
        3 => Just(Op::FireTimers),
        3 => any::<u16>().prop_map(|which| Op::Replay { which }),
    ]
}

/// What the driver remembers in order to pick objects and replay requests.
#[derive(Default)]
struct Model {
    agents: Vec<AgentId>,
    threads: Vec<ThreadId>,
    tasks: Vec<TaskId>,
    assignments: Vec<AssignmentId>,
    engagements: Vec<EngagementId>,
    memories: Vec<MemoryId>,
    /// Labeled versions written so far (design §2.5), for widening and pinning.
    labeled: Vec<Pin>,
    /// The ranks of every collective seen, by (thread, header): a collective never changes.
    collectives: BTreeMap<(ThreadId, EntrySeq), Vec<ScatterRank>>,
    /// Every record created, and each one's accepted writes folded in log order (rev 1 first).
    records: Vec<RecordId>,
    folded: BTreeMap<RecordId, Vec<Folded>>,
    /// The bearer secret of each thread's most recent grant.
    grants: BTreeMap<ThreadId, String>,
    /// Successful requests: (command, receipt bytes).
    done: Vec<(Command, Vec<u8>)>,
}

/// A record as its accepted writes make it: what the view at that rev must show.
#[derive(Clone, Debug, PartialEq)]
struct Folded {
    title: Content,
    state: Content,
    body: BodyRef,
    notes: Vec<ItemId>,
    artifacts: Vec<ItemId>,
    decisions: Vec<(ItemId, Content)>,
}

impl Folded {
    /// The same projection of a view (audience agent: every item shown).
    fn of(v: &kungfu_core::coord::read::RecordView) -> Folded {
        Folded {
            title: v.title.clone(),
            state: v.state.clone(),
            body: match &v.body {
                BodyView::Shown { reference, .. } => reference.clone(),
                BodyView::Redacted { .. } => panic!("an agent audience sees every body"),
            },
            notes: v.notes.iter().map(|n| n.id.clone()).collect(),
            artifacts: v.artifacts.iter().map(|a| a.id.clone()).collect(),
            decisions: v.decisions.iter().map(|d| (d.id.clone(), d.state.clone())).collect(),
        }
    }

    fn apply(&mut self, op: &AppliedOp) {
        match op {
            AppliedOp::ReplaceTitle(c) => self.title = c.clone(),
            AppliedOp::ReplaceState(c) => self.state = c.clone(),
            AppliedOp::ReplaceBody(b) => self.body = b.clone(),
            AppliedOp::ReplaceDecisionState { decision, state } => {
                let d = self.decisions.iter_mut().find(|(id, _)| id == decision);
                d.expect("an accepted decision replace names a decision").1 = state.clone();
            }
            AppliedOp::AppendNote { note_id, .. } => self.notes.push(note_id.clone()),
            AppliedOp::AppendArtifact { artifact_id, .. } => self.artifacts.push(artifact_id.clone()),
            AppliedOp::AppendDecision { decision_id, state, .. } => {
                self.decisions.push((decision_id.clone(), state.clone()))
            }
        }
    }
}

fn pick<T: Copy>(v: &[T], i: u8) -> Option<T> {
    if v.is_empty() { None } else { Some(v[i as usize % v.len()]) }
}

/// Terminal states, which must never change once reached.
fn terminal_snapshot(w: &World) -> BTreeMap<Vec<u8>, Record> {
    w.state
        .map
        .iter()
        .filter(|(_, r)| match r {
            Record::Assignment(a) => a.state.is_terminal(),
            Record::Engagement(e) => e.state.is_terminal(),
            Record::Thread(t) => !t.is_open(),
            Record::Memory(m) => !m.is_valid(),
            Record::Agent(a) => !a.is_active(),
            _ => false,
        })
        .map(|(k, r)| (k.clone(), strip_counters(r)))
        .collect()
}

/// Counters that legitimately move after a terminal state (a closed thread's members may leave)
/// are blanked before comparing.
fn strip_counters(r: &Record) -> Record {
    match r {
        Record::Thread(t) => {
            let mut t = t.clone();
            t.members = 0;
            t.governors = 0;
            Record::Thread(t)
        }
        Record::Agent(a) => {
            let mut a = a.clone();
            a.open_threads = 0;
            Record::Agent(a)
        }
        other => other.clone(),
    }
}

fn role(i: u8) -> Role {
    match i % 3 {
        0 => Role::Observer,
        1 => Role::Speaker,
        _ => Role::Governor,
    }
}

struct Driver {
    w: World,
    m: Model,
}

impl Driver {
    fn new() -> Driver {
        let mut limits = Limits::default();
        // Short windows so deadlines pass within a sequence.
        limits.default_delivery_window = Micros::from_secs(60);
        limits.default_judgment_window = Micros::from_secs(90);
        limits.max_members_per_thread = 5;
        let mut d = Driver { w: World::with_limits(limits), m: Model::default() };
        for _ in 0..3 {
            let a = d.w.register();
            d.m.agents.push(a);
        }
        d
    }

    /// The agent that is most plausibly allowed to act, or any agent.
    fn who(&self, who: u8, likely: Option<AgentId>) -> Option<AgentId> {
        match likely {
            Some(a) if who % 4 != 0 => Some(a),
            _ => pick(&self.m.agents, who / 4),
        }
    }

    fn member_with_role(&self, thread: ThreadId, pred: impl Fn(&Membership) -> bool, i: u8) -> Option<AgentId> {
        let ms: Vec<AgentId> = self
            .w
            .state
            .map
            .values()
            .filter_map(|r| match r {
                Record::Membership(m) if m.thread == thread && m.is_current() && pred(m) => Some(m.agent),
                _ => None,
            })
            .collect();
        pick(&ms, i)
    }

    fn run(&mut self, agent: AgentId, action: Action) {
        let key = self.w.fresh_key();
        let ts = self.w.now.plus(Micros(1));
        self.w.now = ts;
        let cmd = Command::new(Principal::Agent(agent), action, Some(key), ts);
        let applied = self.w.exec_cmd(&cmd);
        self.record(cmd, &applied);
    }

    fn record(&mut self, cmd: Command, applied: &Applied) {
        for f in &applied.facts {
            match &f.fact {
                Fact::DeadlinePassed { result, .. } => count(format!("deadline {result:?}")),
                // COORDINATION §11.2 item 3: fold every accepted write in log order.
                Fact::RecordCreated { record, title, state, body, .. } => {
                    let first = Folded {
                        title: title.clone(),
                        state: state.clone(),
                        body: body.clone(),
                        notes: vec![],
                        artifacts: vec![],
                        decisions: vec![],
                    };
                    assert!(self.m.folded.insert(*record, vec![first]).is_none(), "{record} created twice");
                }
                Fact::RecordPatched { record, base_rev, rev, ops, .. } => {
                    let revs = self.m.folded.get_mut(record).expect("a patched record was created");
                    let previous = revs.len() as u32;
                    assert_eq!(*rev, previous + 1, "{record}: a patch skipped a rev");
                    assert!(*base_rev >= 1 && *base_rev <= previous, "{record}: base {base_rev} of rev {previous}");
                    let replaces = ops.iter().any(|op| {
                        !matches!(
                            op,
                            AppliedOp::AppendNote { .. }
                                | AppliedOp::AppendArtifact { .. }
                                | AppliedOp::AppendDecision { .. }
                        )
                    });
                    assert!(
                        !replaces || *base_rev == previous,
                        "{record}: a replace was accepted on the stale base {base_rev} (rev {previous})"
                    );
                    if *base_rev < previous {
                        count("merged patch_record".to_string());
                    }
                    let mut next = revs.last().expect("rev 1").clone();
                    for op in ops {
                        next.apply(op);
                    }
                    revs.push(next);
                }
                _ => {}
            }
        }
        let receipt = match &applied.outcome {
            Ok(r) => r,
            Err(rej) => {
                count(format!("rejected {}", rej.code));
                return;
            }
        };
        count(format!("ok {}", cmd.action.kind().as_str()));
        use ActionResult::*;
        match &receipt.result {
            ThreadCreated { thread, .. } => self.m.threads.push(*thread),
            Posted { assignment: Some(a), .. } => self.m.assignments.push(*a),
            TaskCreated { task, .. } => self.m.tasks.push(*task),
            Engaged { engagement, existing: false, .. } => self.m.engagements.push(*engagement),
            EngagementDelivered { engagement, .. } if !self.m.engagements.contains(engagement) => {
                self.m.engagements.push(*engagement)
            }
            MemoryCreated { memory, .. } => self.m.memories.push(*memory),
            AgentRegistered { agent, .. } => self.m.agents.push(*agent),
            RecordCreated { record, .. } => self.m.records.push(*record),
            _ => {}
        }
        // Every Memory and labeled version an action made, so later steps can pin and widen them.
        let mut pins = Vec::new();
        match &receipt.result {
            Posted { pin, .. } | Sent { pin, .. } | LabeledWritten { pin, .. } => pins.push(*pin),
            ScopeWidened { to, .. } => pins.push(*to),
            Scattered { thread, header, ranks } => {
                for e in std::iter::once(*header).chain(ranks.iter().map(|r| r.entry)) {
                    pins.extend(self.w.state.entry(*thread, e).ok().flatten().map(|e| e.pin));
                }
                self.m.assignments.extend(ranks.iter().map(|r| r.assignment));
            }
            _ => {}
        }
        for pin in pins {
            if !self.m.memories.contains(&pin.memory) {
                self.m.memories.push(pin.memory);
            }
            if self.w.state.labels(pin).ok().flatten().is_some() && !self.m.labeled.contains(&pin) {
                self.m.labeled.push(pin);
            }
        }
        if cmd.key.is_some() {
            self.m.done.push((cmd, receipt.to_bytes()));
        }
    }

    fn step(&mut self, op: &Op) {
        let m = &self.m;
        match op.clone() {
            Op::Register => {
                let secret = self.w.fresh_secret();
                let key = self.w.fresh_key();
                self.w.now = self.w.now.plus(Micros(1));
                let cmd = Command::new(
                    Principal::Registrar,
                    Action::RegisterAgent {
                        key_hash: secret::hash_secret(&secret),
                        key_fingerprint: secret::fingerprint(&secret),
                    },
                    Some(key),
                    self.w.now,
                );
                let applied = self.w.exec_cmd(&cmd);
                self.record(cmd, &applied);
            }
            Op::CreateThread { who } => {
                let Some(a) = pick(&m.agents, who) else {
                    return;
                };
                self.run(a, Action::CreateThread { subject: Content::from("s"), grant: None });
            }
            Op::Admit { thread, who, role: r } => {
                let Some(t) = pick(&m.threads, thread) else {
                    return;
                };
                let Some(joiner) = pick(&m.agents, who) else {
                    return;
                };
                let gov = self.member_with_role(t, |m| m.role == Role::Governor, who).or(Some(joiner));
                let Some(gov) = gov else { return };
                let (grant, secret) = self.w.new_grant(role(r));
                self.m.grants.insert(t, secret);
                self.run(gov, Action::IssueGrant { thread: t, grant });
                let secret = self.m.grants[&t].clone();
                self.run(joiner, Action::Join { grant_hash: secret::hash_secret(&secret) });
            }
            Op::Leave { thread, who } => {
                let Some(t) = pick(&m.threads, thread) else {
                    return;
                };
                let likely = self.member_with_role(t, |_| true, who);
                let Some(a) = self.who(who, likely) else {
                    return;
                };
                self.run(a, Action::Leave { thread: t });
            }
            Op::Remove { thread, who } => {
                let Some(t) = pick(&m.threads, thread) else {
                    return;
                };
                let gov = self.member_with_role(t, |m| m.role == Role::Governor, who);
                let Some(a) = self.who(who, gov) else { return };
                let Some(target) = self.member_with_role(t, |_| true, who / 2) else {
                    return;
                };
                self.run(a, Action::Remove { thread: t, member: target });
            }
            Op::ChangeRole { thread, who, role: r } => {
                let Some(t) = pick(&m.threads, thread) else {
                    return;
                };
                let gov = self.member_with_role(t, |m| m.role == Role::Governor, who);
                let Some(a) = self.who(who, gov) else { return };
                let Some(target) = self.member_with_role(t, |_| true, r) else {
                    return;
                };
                self.run(a, Action::ChangeRole { thread: t, member: target, role: role(r / 3) });
            }
            Op::Post { thread, who, reply, ask, assign } => {
                let Some(t) = pick(&m.threads, thread) else {
                    return;
                };
                let speaker = self.member_with_role(t, |m| m.role.may_speak(), who);
                let Some(a) = self.who(who, speaker) else {
                    return;
                };
                let last = self.w.state.thread(t).ok().flatten().map(|t| t.last_entry).unwrap_or(0);
                let reply_to = reply.filter(|_| last > 0).map(|r| EntrySeq(1 + r as u64 % last));
                // Asked members: mostly speakers of the thread (valid), sometimes any agent.
                let ask = ask.map(|v| {
                    v.into_iter()
                        .filter_map(|i| {
                            if i % 5 == 0 {
                                pick(&self.m.agents, i)
                            } else {
                                self.member_with_role(t, |m| m.role.may_speak(), i)
                            }
                        })
                        .filter(|x| *x != a)
                        .collect::<BTreeSet<_>>()
                });
                let assignment =
                    assign.and_then(|i| self.member_with_role(t, |m| m.role.may_speak(), i)).map(|addressee| {
                        NewAssignment {
                            addressee,
                            criteria: Content::from("c"),
                            output_structure: None,
                            delivery_window: None,
                            judgment_window: None,
                        }
                    });
                let body = match pick(&self.m.memories, who) {
                    Some(mem) if who % 3 == 0 => {
                        let current =
                            self.w.state.memory(mem).ok().flatten().map(|m| m.current).unwrap_or(Version::FIRST);
                        PostBody::Pin(Pin { memory: mem, version: current })
                    }
                    _ => PostBody::Content(Content::from("text")),
                };
                self.run(a, Action::Post { thread: t, body, reply_to, ask, task_ref: None, assignment });
            }
            Op::Handle { thread, who, entry } | Op::Retract { thread, who, entry } => {
                let Some(t) = pick(&m.threads, thread) else {
                    return;
                };
                let last = self.w.state.thread(t).ok().flatten().map(|t| t.last_entry).unwrap_or(0);
                if last == 0 {
                    return;
                }
                // Mostly an entry that still has pending responses, so the exits are exercised.
                let pending: Vec<(EntrySeq, AgentId)> = self
                    .w
                    .state
                    .map
                    .values()
                    .filter_map(|r| match r {
                        Record::Response(r) if r.thread == t && r.state == ResponseState::Pending => {
                            Some((r.entry, r.responder))
                        }
                        _ => None,
                    })
                    .collect();
                let (e, responder) = match pick(&pending, entry) {
                    Some((e, r)) if entry % 4 != 0 => (e, Some(r)),
                    _ => {
                        let e = EntrySeq(1 + entry as u64 % last);
                        (e, self.w.state.entry(t, e).ok().flatten().and_then(|e| e.responders.iter().next().copied()))
                    }
                };
                let author = self.w.state.entry(t, e).ok().flatten().map(|e| e.author);
                if matches!(op, Op::Handle { .. }) {
                    let Some(a) = self.who(who, responder) else {
                        return;
                    };
                    self.run(
                        a,
                        Action::Handle { thread: t, entry: e, note: (who % 2 == 0).then(|| Content::from("note")) },
                    );
                } else {
                    let Some(a) = self.who(who, author) else {
                        return;
                    };
                    self.run(a, Action::Retract { thread: t, entry: e });
                }
            }
            Op::Close { thread, who } => {
                let Some(t) = pick(&m.threads, thread) else {
                    return;
                };
                let gov = self.member_with_role(t, |m| m.role == Role::Governor, who);
                let Some(a) = self.who(who, gov) else { return };
                self.run(a, Action::CloseThread { thread: t });
            }
            Op::Assignment { asg, who, what } => {
                let Some(id) = pick(&m.assignments, asg) else {
                    return;
                };
                let Some(a) = self.w.state.assignment(id).ok().flatten() else {
                    return;
                };
                // Mostly the step that moves the assignment forward from where it is, sometimes
                // any step (which the core must reject or accept by the rules).
                let step = if what % 5 == 0 {
                    what / 5
                } else {
                    match a.state {
                        AssignmentState::Open => {
                            if what % 7 == 1 {
                                5
                            } else {
                                0
                            }
                        }
                        AssignmentState::Taken { .. } => match what % 9 {
                            1 | 3 => 4,
                            2 => 5,
                            _ => 1,
                        },
                        AssignmentState::Delivered { .. } => {
                            if what % 2 == 0 {
                                3
                            } else {
                                2
                            }
                        }
                        AssignmentState::Ended { .. } => what,
                    }
                };
                let (actor, action) = match step % 6 {
                    0 => (a.addressee, Action::TakeAssignment { assignment: id }),
                    1 => (a.addressee, Action::DeliverAssignment { assignment: id, output: Content::from("out") }),
                    2 => (a.creator, Action::AdoptAssignment { assignment: id }),
                    3 => (a.creator, Action::RejectAssignment { assignment: id, reason: Content::from("no") }),
                    4 => (a.addressee, Action::DropAssignment { assignment: id }),
                    _ => (a.creator, Action::VoidAssignment { assignment: id }),
                };
                let Some(actor) = self.who(who, Some(actor)) else {
                    return;
                };
                self.run(actor, action);
            }
            Op::VoidGrant { thread, who } => {
                let Some(t) = pick(&m.threads, thread) else {
                    return;
                };
                let gov = self.member_with_role(t, |m| m.role == Role::Governor, who);
                let Some(a) = self.who(who, gov) else { return };
                self.run(a, Action::VoidGrant { thread: t });
            }
            Op::CreateTask { who, restricted, max, adopt_on_missing } => {
                let Some(a) = pick(&m.agents, who) else {
                    return;
                };
                let audience = if restricted {
                    let named: BTreeSet<AgentId> = m.agents.iter().copied().filter(|x| *x != a).take(2).collect();
                    if named.is_empty() {
                        return;
                    }
                    Audience::Restricted(named)
                } else {
                    Audience::Open
                };
                let mut contract = ContractDraft::simple("r", "a");
                contract.max_adoptions = max.map(u32::from);
                contract.on_missing_judgment =
                    if adopt_on_missing { MissingJudgment::Adopted } else { MissingJudgment::Undecided };
                contract.delivery_window = Some(Micros::from_secs(50));
                contract.judgment_window = Some(Micros::from_secs(40));
                self.run(a, Action::CreateTask { audience, contract });
            }
            Op::TaskAdmin { task, who, what } => {
                let Some(id) = pick(&m.tasks, task) else {
                    return;
                };
                let author = self.w.state.task(id).ok().flatten().map(|t| t.author);
                let Some(a) = self.who(who, author) else {
                    return;
                };
                let paused = self.w.state.task(id).ok().flatten().is_some_and(|t| t.paused);
                let action = match what % 3 {
                    0 | 1 if paused => Action::ResumeTask { task: id },
                    0 => Action::PauseTask { task: id },
                    1 => Action::ResumeTask { task: id },
                    _ => {
                        let mut c = ContractDraft::simple("r2", "a2");
                        c.max_adoptions = Some(1 + (what as u32 % 3));
                        Action::ReviseContract { task: id, contract: c }
                    }
                };
                self.run(a, action);
            }
            Op::TakeTask { task, who, deliver, combined } => {
                let Some(id) = pick(&m.tasks, task) else {
                    return;
                };
                let author = self.w.state.task(id).ok().flatten().map(|t| t.author);
                let others: Vec<AgentId> = m.agents.iter().copied().filter(|a| Some(*a) != author).collect();
                let Some(a) = self.who(who, pick(&others, who / 3)) else {
                    return;
                };
                let action = if deliver {
                    Action::DeliverTask { task: id, output: Content::from("o"), take: combined }
                } else {
                    Action::TakeTask { task: id }
                };
                self.run(a, action);
            }
            Op::Engagement { eng, who, what } => {
                let Some(id) = pick(&m.engagements, eng) else {
                    return;
                };
                let Some(e) = self.w.state.engagement(id).ok().flatten() else {
                    return;
                };
                let (actor, action) = match (&e.state, what % 4) {
                    (EngagementState::Open { .. }, 0) => (e.agent, Action::DropEngagement { engagement: id }),
                    (EngagementState::Open { .. }, _) => {
                        (e.agent, Action::DeliverTask { task: e.task, output: Content::from("o"), take: false })
                    }
                    (_, 1) => (e.judge, Action::RejectEngagement { engagement: id, reason: Content::from("why") }),
                    (_, 0) => (e.agent, Action::DropEngagement { engagement: id }),
                    _ => (e.judge, Action::AdoptEngagement { engagement: id }),
                };
                let Some(actor) = self.who(who, Some(actor)) else {
                    return;
                };
                self.run(actor, action);
            }
            Op::Memory { who, what } => {
                let Some(a) = pick(&m.agents, who) else {
                    return;
                };
                let own: Vec<MemoryId> = m
                    .memories
                    .iter()
                    .copied()
                    .filter(|id| self.w.state.memory(*id).ok().flatten().is_some_and(|x| x.author == a))
                    .collect();
                let public = |id: MemoryId| self.w.state.memory(id).ok().flatten().is_some_and(|x| x.is_public());
                let action = match (what % 6, pick(&own, what / 6)) {
                    (1, Some(mem)) => Action::UpdateMemory { memory: mem, content: Content::from("v") },
                    (2 | 3 | 4, Some(mem)) if public(mem) => Action::UnpublishMemory { memory: mem },
                    (2 | 3 | 4, Some(mem)) => Action::PublishMemory { memory: mem },
                    (5, Some(mem)) => Action::WithdrawMemory { memory: mem },
                    _ => Action::CreateMemory { content: Content::from("m") },
                };
                self.run(a, action);
            }
            Op::WriteLabeled { who, existing, taint, scope } => {
                let Some(a) = pick(&m.agents, who) else {
                    return;
                };
                let own: Vec<MemoryId> = m
                    .memories
                    .iter()
                    .copied()
                    .filter(|id| self.w.state.memory(*id).ok().flatten().is_some_and(|x| x.author == a))
                    .collect();
                let memory = existing.and_then(|i| pick(&own, i));
                let labels = Labels::new(Taint::ALL[taint as usize % 3], Scope::ALL[scope as usize % 4]);
                self.run(a, Action::WriteLabeled { memory, content: Content::from("labeled"), labels });
            }
            Op::WidenScope { who, pin, scope } => {
                let Some(pin) = pick(&m.labeled, pin) else {
                    return;
                };
                let author = self.w.state.memory(pin.memory).ok().flatten().map(|x| x.author);
                let Some(a) = self.who(who, author) else {
                    return;
                };
                // Mostly a scope wider than the version's (the others are refusals).
                let current = self.w.state.labels(pin).ok().flatten().map_or(Scope::Agent, |l| l.scope);
                let wider: Vec<Scope> = Scope::ALL.into_iter().filter(|s| *s > current).collect();
                let scope = match pick(&wider, scope) {
                    Some(s) if scope % 5 != 0 => s,
                    _ => Scope::ALL[scope as usize % 4],
                };
                self.run(a, Action::WidenScope { pin, scope });
            }
            Op::Send { thread, who, to, agents, labels, reply } => {
                let Some(t) = pick(&m.threads, thread) else {
                    return;
                };
                let speaker = self.member_with_role(t, |m| m.role.may_speak(), who);
                let Some(a) = self.who(who, speaker) else {
                    return;
                };
                let body = match (labels, pick(&m.labeled, who)) {
                    (None, Some(pin)) => LabeledBody::Pin(pin),
                    (labels, _) => {
                        let (taint, scope) = labels.unwrap_or((1, 1));
                        // Mostly labels that pass the floor for a thread entry.
                        let taint = if taint % 4 == 0 {
                            Taint::ALL[(taint / 4) as usize % 3]
                        } else {
                            Taint::ALL[taint as usize % 2]
                        };
                        let scope = if scope % 4 == 0 {
                            Scope::ALL[(scope / 4) as usize % 4]
                        } else {
                            Scope::ALL[1 + scope as usize % 3]
                        };
                        LabeledBody::Content { content: Content::from("message"), labels: Labels::new(taint, scope) }
                    }
                };
                let to = match to % 3 {
                    0 => Addressees::Nobody,
                    1 => {
                        let named: BTreeSet<AgentId> = agents
                            .iter()
                            .filter_map(|i| {
                                if i % 5 == 0 {
                                    pick(&self.m.agents, *i)
                                } else {
                                    self.member_with_role(t, |m| m.role.may_speak(), *i)
                                }
                            })
                            .filter(|x| *x != a)
                            .collect();
                        if named.is_empty() { Addressees::Nobody } else { Addressees::Agents(named) }
                    }
                    _ => Addressees::AllSpeakers,
                };
                let last = self.w.state.thread(t).ok().flatten().map(|t| t.last_entry).unwrap_or(0);
                let reply_to = reply.filter(|_| last > 0).map(|r| EntrySeq(1 + r as u64 % last));
                let reply_to_latest = reply.is_some_and(|r| r % 2 == 0) && reply_to.is_some();
                self.run(a, Action::Send { thread: t, body, to, reply_to, reply_to_latest });
            }
            Op::Scatter { thread, who, members } => {
                let Some(t) = pick(&m.threads, thread) else {
                    return;
                };
                let speaker = self.member_with_role(t, |m| m.role.may_speak(), who);
                let Some(a) = self.who(who, speaker) else {
                    return;
                };
                // Mostly distinct speakers; sometimes any agent or a repeat (both refused).
                let mut picked: Vec<AgentId> = Vec::new();
                for i in &members {
                    let member = if i % 7 == 0 {
                        pick(&self.m.agents, *i)
                    } else {
                        self.member_with_role(t, |m| m.role.may_speak(), *i)
                    };
                    if let Some(member) = member {
                        if who % 11 == 0 || !picked.contains(&member) {
                            picked.push(member);
                        }
                    }
                }
                let goals = picked
                    .into_iter()
                    .zip(&members)
                    .map(|(member, i)| {
                        let scope = if i % 13 == 0 { Scope::Agent } else { Scope::Fleet };
                        let labels = Labels::new(Taint::Tainted, scope);
                        RankGoal { member, body: LabeledBody::Content { content: Content::from("goal"), labels } }
                    })
                    .collect();
                let header = LabeledBody::Content {
                    content: Content::from("header"),
                    labels: Labels::new(Taint::Trusted, Scope::Fleet),
                };
                let action = Action::Scatter {
                    thread: t,
                    header,
                    goals,
                    criteria: Content::from("c"),
                    output_structure: None,
                    delivery_window: None,
                    judgment_window: None,
                };
                self.run(a, action);
            }
            Op::CreateRecord { thread, who, scope, governors } => {
                let Some(t) = pick(&m.threads, thread) else {
                    return;
                };
                let speaker = self.member_with_role(t, |m| m.role.may_speak(), who);
                let Some(a) = self.who(who, speaker) else {
                    return;
                };
                // Mostly a scope a record may have (agent is refused).
                let scope = if scope % 10 == 0 { Scope::Agent } else { Scope::ALL[1 + scope as usize % 3] };
                let fleet = Labels::new(Taint::Tainted, Scope::Fleet);
                let action = Action::CreateRecord {
                    thread: t,
                    title: Content::from("title"),
                    state: Content::from("working"),
                    body: BodyInput::Content { content: Content::from("body"), labels: fleet },
                    scope,
                    editors: if governors && who % 3 == 0 { Editors::Governors } else { Editors::Speakers },
                    message: LabeledBody::Content { content: Content::from("record"), labels: fleet },
                    ask: None,
                };
                self.run(a, action);
            }
            Op::PatchRecord { record, who, base_lag, ops } => {
                let Some(rid) = pick(&m.records, record) else {
                    return;
                };
                let Some(r) = self.w.state.shared_record(rid).ok().flatten() else {
                    return;
                };
                let speaker = self.member_with_role(r.thread, |m| m.role.may_speak(), who);
                let Some(a) = self.who(who, speaker) else {
                    return;
                };
                let base_rev = if base_lag % 17 == 0 { 0 } else { r.rev - (base_lag as u32 % 3).min(r.rev - 1) };
                let fleet = Labels::new(Taint::Tainted, Scope::Fleet);
                let ops: Vec<PatchOp> = ops
                    .iter()
                    .map(|(kind, arg)| {
                        let text = Content::from(format!("v{arg}"));
                        // Mostly fleet items; now and then agent-scoped, tenant or quarantined ones.
                        let labels = match arg % 29 {
                            0 => Labels::new(Taint::Tainted, Scope::Agent),
                            1 => Labels::new(Taint::Tainted, Scope::Tenant),
                            2 => Labels::new(Taint::Quarantined, Scope::Fleet),
                            _ => fleet,
                        };
                        let inline = BodyInput::Content { content: Content::from("item"), labels };
                        let external = ExternalRef {
                            store: "s3".into(),
                            digest: "sha256:abc".into(),
                            bytes: 3,
                            labels,
                            deletion_certificate: (arg % 7 != 0).then(|| "sha256:cert".into()),
                        };
                        // Now and then appends only: on a stale base they merge.
                        let kind = if base_lag % 4 == 1 { 4 + kind % 4 } else { kind % 8 };
                        match kind {
                            0 => PatchOp::ReplaceTitle(text),
                            1 => PatchOp::ReplaceState(text),
                            2 => {
                                PatchOp::ReplaceBody(if arg % 2 == 0 { inline } else { BodyInput::External(external) })
                            }
                            3 => {
                                PatchOp::ReplaceDecisionState { decision: ItemId(format!("d{}", arg % 4)), state: text }
                            }
                            4 | 5 => PatchOp::AppendNote {
                                note_id: ItemId(format!("n{}", arg % 4)),
                                kind: NoteKind::Comment,
                                body: inline,
                            },
                            6 => PatchOp::AppendArtifact {
                                artifact_id: ItemId(format!("a{}", arg % 4)),
                                reference: ArtifactInput::External(external),
                                media_type: "text/plain".into(),
                            },
                            _ => PatchOp::AppendDecision {
                                decision_id: ItemId(format!("d{}", arg % 4)),
                                state: text,
                                reason: Content::from("why"),
                            },
                        }
                    })
                    .collect();
                // Now and then an empty patch (refused).
                let ops = if base_lag % 19 == 1 { Vec::new() } else { ops };
                let message = LabeledBody::Content { content: Content::from("patch"), labels: fleet };
                self.run(a, Action::PatchRecord { record: rid, base_rev, ops, message, ask: None });
            }
            Op::Wake { who, what } => {
                let Some(a) = pick(&m.agents, who) else {
                    return;
                };
                let held = kungfu_core::read::wake_targets(&self.w.state, a).unwrap_or_default();
                match (what % 5, held.get(what as usize / 5 % held.len().max(1))) {
                    (0 | 1, _) | (_, None) => {
                        let secret = WakeSecret([what; 32]);
                        let url = format!("https://h{}.example.com/{what}", what % 3);
                        self.run(a, Action::SetWakeTarget { url, secret, filter: WakeFilter::default() });
                    }
                    (2, Some(t)) => self.run(a, Action::RemoveWakeTarget { target: t.id }),
                    (k, Some(t)) => {
                        let now = self.w.now;
                        let next = t.queued.map_or(1, |e| e.seq + 1);
                        // Now and then out of sequence (refused whole).
                        let seq = if what % 11 == 0 { next + 1 } else { next };
                        let event =
                            WakeEvent { seq, applied_index: u64::from(what), digest: [what; 32], queued_at: now };
                        let outstanding = t.queued.filter(|e| e.seq > t.delivered).map(|e| e.seq);
                        let action = match (k, outstanding) {
                            (3, Some(o)) => Action::RecordWake {
                                queued: vec![],
                                delivered: vec![(a, t.id, o)],
                                gave_up: if what % 7 == 0 {
                                    vec![(a, t.id, WakeFailure { seq: o, at: now, error: "HTTP 500".into() })]
                                } else {
                                    vec![]
                                },
                            },
                            (_, Some(o)) if what % 3 == 0 => Action::RecordWake {
                                queued: vec![],
                                delivered: vec![],
                                gave_up: vec![(a, t.id, WakeFailure { seq: o, at: now, error: "timed out".into() })],
                            },
                            _ => Action::RecordWake {
                                queued: vec![(a, t.id, event)],
                                delivered: vec![],
                                gave_up: vec![],
                            },
                        };
                        let ts = now.plus(Micros(1));
                        self.w.now = ts;
                        let cmd = Command::new(Principal::System, action, None, ts);
                        let applied = self.w.exec_cmd(&cmd);
                        self.record(cmd, &applied);
                    }
                }
            }
            Op::Deactivate { who } => {
                // Rare, and never the last active agents, so sequences keep going.
                let active = m
                    .agents
                    .iter()
                    .filter(|a| self.w.state.agent(**a).ok().flatten().is_some_and(|x| x.is_active()))
                    .count();
                if active <= 3 {
                    return;
                }
                let Some(a) = pick(&m.agents, who) else {
                    return;
                };
                let key = self.w.fresh_key();
                self.w.now = self.w.now.plus(Micros(1));
                let cmd =
                    Command::new(Principal::Operator, Action::DeactivateAgent { agent: a }, Some(key), self.w.now);
                let applied = self.w.exec_cmd(&cmd);
                self.record(cmd, &applied);
            }
            Op::Advance { secs } => self.w.advance(Micros::from_secs(secs as u64)),
            Op::FireTimers => {
                for _ in self.w.fire_due_timers() {
                    count("ok expire".to_string());
                }
            }
            Op::Replay { which } => self.replay(which as usize),
        }
    }

    /// L3: an earlier successful request, sent again with its key, returns its original receipt
    /// byte for byte and changes nothing.
    fn replay(&mut self, which: usize) {
        if self.m.done.is_empty() {
            return;
        }
        let (cmd, bytes) = self.m.done[which % self.m.done.len()].clone();
        self.w.now = self.w.now.plus(Micros(1));
        let again = Command { ts: self.w.now, ..cmd };
        let before = self.w.state.clone();
        let applied = self.w.exec_cmd(&again);
        assert!(applied.replayed, "replay of {:?} was not recognised", again.action.kind());
        assert_eq!(
            applied.receipt_bytes(),
            Some(bytes),
            "replay of {:?} returned a different receipt",
            again.action.kind()
        );
        assert!(applied.changes.is_empty(), "a replay changed state");
        assert_eq!(self.w.state, before);
    }
}

/// The records under one key prefix, without copying them (the checks run after every step).
fn records_under(state: &MemState, prefix: Vec<u8>) -> impl Iterator<Item = &Record> {
    state.map.range(prefix.clone()..).take_while(move |(k, _)| k.starts_with(&prefix)).map(|(_, r)| r)
}

/// The coordination checks of COORDINATION §11.2 (items 1, 2 and 4; item 5 is the rebuild).
fn check_coordination(d: &mut Driver, step: usize, op: &Op) {
    let state = &d.w.state;
    // Only the record kinds these checks read: a full scan after every step would cost more than
    // the steps themselves. A key's first two bytes are its family and its kind's tag.
    let prefixes = [
        keys::all_obligations(),
        keys::entry(ThreadId(0), EntrySeq(0))[..2].to_vec(),
        keys::memory(MemoryId(0))[..2].to_vec(),
        keys::all_collectives(),
    ];
    for r in prefixes.into_iter().flat_map(|p| records_under(state, p)) {
        match r {
            // 1. Every open obligation is the spec's: a response caused by a posted responder set,
            //    or a delivery or judgment caused by a taking (and then a delivery).
            Record::Obligation(o) => {
                let caused =
                    match o.id {
                        ObligationId::Response { thread, entry, responder } => {
                            o.holder == responder
                                && state
                                    .entry(thread, entry)
                                    .ok()
                                    .flatten()
                                    .is_some_and(|e| e.responders.contains(&responder))
                        }
                        ObligationId::AssignmentDelivery(a) => state.assignment(a).ok().flatten().is_some_and(|a| {
                            a.addressee == o.holder && matches!(a.state, AssignmentState::Taken { .. })
                        }),
                        ObligationId::AssignmentJudgment(a) => state.assignment(a).ok().flatten().is_some_and(|a| {
                            a.creator == o.holder && matches!(a.state, AssignmentState::Delivered { .. })
                        }),
                        ObligationId::EngagementDelivery(e) => state
                            .engagement(e)
                            .ok()
                            .flatten()
                            .is_some_and(|e| e.agent == o.holder && matches!(e.state, EngagementState::Open { .. })),
                        ObligationId::EngagementJudgment(e) => state.engagement(e).ok().flatten().is_some_and(|e| {
                            e.judge == o.holder && matches!(e.state, EngagementState::Delivered { .. })
                        }),
                    };
                assert!(caused, "obligation {:?} of {} has no spec cause at step {step} ({op:?})", o.id, o.holder);
            }
            // 2. Labeled content never sits below its floor.
            Record::Entry(e) => {
                if let Some(l) = state.labels(e.pin).ok().flatten() {
                    assert!(
                        l.taint != Taint::Quarantined && l.scope >= Scope::Fleet,
                        "entry {} of {} pins {l} at step {step} ({op:?})",
                        e.seq,
                        e.thread
                    );
                }
            }
            Record::Memory(m) if m.is_public() => {
                if let Some(l) = state.labels(Pin { memory: m.id, version: m.current }).ok().flatten() {
                    assert!(
                        l.taint != Taint::Quarantined && l.scope == Scope::Public,
                        "public {} is current at a version labeled {l} at step {step} ({op:?})",
                        m.id
                    );
                }
            }
            // 4. A collective's ranks strictly increase by member.
            Record::Collective(c) => {
                assert!(
                    c.ranks.windows(2).all(|w| w[0].member < w[1].member),
                    "collective {} {} ranks out of order at step {step}",
                    c.thread,
                    c.header
                );
            }
            _ => {}
        }
    }
    // 4. ...and a collective never changes (nor disappears) once formed.
    let now: BTreeMap<(ThreadId, EntrySeq), Vec<ScatterRank>> = records_under(state, keys::all_collectives())
        .filter_map(|r| match r {
            Record::Collective(c) => Some(((c.thread, c.header), c.ranks.clone())),
            _ => None,
        })
        .collect();
    for (k, ranks) in &d.m.collectives {
        assert_eq!(now.get(k), Some(ranks), "collective {k:?} changed at step {step} ({op:?})");
    }
    d.m.collectives = now;
    // 3. Every record is the fold of its accepted writes, now and at a past rev.
    for (rid, revs) in &d.m.folded {
        let r = state.shared_record(*rid).ok().flatten().expect("a created record exists");
        assert_eq!(
            r.rev as usize,
            revs.len(),
            "{rid}: rev {} after {} accepted writes at step {step}",
            r.rev,
            revs.len()
        );
        for rev in [r.rev, 1 + step as u32 % r.rev] {
            let view = record_at(state, &r, rev, Scope::Agent).expect("the record reads");
            assert_eq!(
                Folded::of(&view),
                revs[rev as usize - 1],
                "{rid} at rev {rev} is not the fold of its writes at step {step} ({op:?})"
            );
        }
    }
}

fn run_sequence(ops: &[Op]) {
    let mut d = Driver::new();
    // The rebuild check runs in `check_sequence_end` and every 8 steps, to keep 1000 sequences fast.
    d.w.check_rebuild = false;
    for (i, op) in ops.iter().enumerate() {
        let before = terminal_snapshot(&d.w);
        d.step(op);
        let after = terminal_snapshot(&d.w);
        for (k, r) in &before {
            assert_eq!(after.get(k), Some(r), "terminal state changed at step {i} ({op:?})");
        }
        check_coordination(&mut d, i, op);
        if i % 8 == 7 {
            d.w.assert_rebuild();
        }
    }
    // At the end: the deadlines of everything still running pass, and every earlier request
    // replays to its original receipt.
    d.w.advance(Micros::from_secs(1_000));
    d.w.fire_due_timers();
    d.w.assert_rebuild();
    for i in 0..d.m.done.len() {
        d.replay(i);
    }
    let turn_total: usize = d.m.agents.clone().into_iter().map(|a| d.w.full_turn(a).len()).sum();
    let open_obligations = d.w.state.map.values().filter(|r| matches!(r, Record::Obligation(_))).count();
    // §8: the turns of all agents together hold every open obligation exactly once.
    assert_eq!(turn_total, open_obligations);
}

#[test]
fn random_action_sequences_keep_every_invariant() {
    let seed: u64 = std::env::var("KUNGFU_PROP_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(7)
    });
    let cases: u32 = std::env::var("KUNGFU_PROP_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(1000);
    println!("property seed: {seed} (reproduce with KUNGFU_PROP_SEED={seed}), sequences: {cases}");
    eprintln!("property seed: {seed} (reproduce with KUNGFU_PROP_SEED={seed}), sequences: {cases}");
    // The generator must keep reaching every action of the protocol, the deadlines and the
    // coordination layer's own refusals (the floor and a stale correction). The rarest of them
    // succeed a handful of times in 1000 sequences, so one batch now and then reaches none of one
    // of them on a sound build: a batch that misses some is followed by another (a new seed) and
    // the coverage is judged over all of them, at most `ROUNDS`. A generator that cannot reach an
    // action still fails every round.
    const ROUNDS: u64 = 4;
    let expected: Vec<String> = ActionKind::ALL
        .iter()
        .map(|k| format!("ok {}", k.as_str()))
        .chain(["deadline TimedOut", "deadline Undecided", "deadline Adopted"].map(String::from))
        .chain(
            ["rejected TRUST_VIOLATION", "rejected STALE_BASE", "rejected DUPLICATE_ID", "merged patch_record"]
                .map(String::from),
        )
        .collect();
    let mut missing: Vec<String> = Vec::new();
    for round in 0..ROUNDS {
        let round_seed = seed.wrapping_add(round);
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&round_seed.to_le_bytes());
        let rng = TestRng::from_seed(RngAlgorithm::XorShift, &bytes);
        let config = Config { cases, failure_persistence: None, max_shrink_iters: 2_000, ..Config::default() };
        let mut runner = TestRunner::new_with_rng(config, rng);
        let result = runner.run(&proptest::collection::vec(op(), 10..60), |ops| {
            run_sequence(&ops);
            Ok(())
        });
        if let Err(e) = result {
            panic!("seed {round_seed}: {e}");
        }
        let stats = STATS.lock().map(|s| s.clone()).unwrap_or_default();
        missing = expected.iter().filter(|k| !stats.contains_key(k.as_str())).cloned().collect();
        if cases < 500 || missing.is_empty() {
            for (k, v) in &stats {
                println!("{v:>8}  {k}");
            }
            break;
        }
        println!("round {round} (seed {round_seed}) reached none of {missing:?}; another batch");
    }
    assert!(cases < 500 || missing.is_empty(), "none of {missing:?} in {ROUNDS} batches of {cases} sequences");
}
