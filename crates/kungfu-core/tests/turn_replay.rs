//! The turn, working sets and recovery (§8), visibility (§9, §12), and the invariants L2 (atomicity
//! and rejections), L3 (replay), L4 (capacity limits) and L5 (competing actions).
//!
//! Every step runs through `World`, which already checks every invariant and the rebuild from facts
//! after each apply; these tests assert the specific behaviour of each rule on top of that.

use kungfu_core::limits::Limits;
use kungfu_core::model::{
    AssignmentOutcome, AssignmentState, Audience, EngagementState, ObligationId, ObligationKind, OpportunityId, Pin,
};
use kungfu_core::read::{self, Cursor, ObjectSummary, ReadError, ReadResult, TurnItem, WorkingSet};
use kungfu_core::rebuild::{all_facts, rebuild, without_receipts};
use kungfu_core::secret::{fingerprint, hash_secret};
use kungfu_core::state::MemState;
use kungfu_core::testkit::World;
use kungfu_core::*;
use kungfu_types::*;
use std::collections::{BTreeSet, HashSet};

// --- helpers ------------------------------------------------------------------------------------

fn post_action(thread: ThreadId, text: &str, reply_to: Option<EntrySeq>, ask: Option<&[AgentId]>) -> Action {
    Action::Post {
        thread,
        body: PostBody::Content(Content::from(text)),
        reply_to,
        ask: ask.map(|a| a.iter().copied().collect::<BTreeSet<_>>()),
        task_ref: None,
        assignment: None,
    }
}

fn assign_action(thread: ThreadId, text: &str, addressee: AgentId, criteria: &str, delivery: Option<Micros>) -> Action {
    Action::Post {
        thread,
        body: PostBody::Content(Content::from(text)),
        reply_to: None,
        ask: Some(BTreeSet::new()),
        task_ref: None,
        assignment: Some(NewAssignment {
            addressee,
            criteria: Content::from(criteria),
            output_structure: None,
            delivery_window: delivery,
            judgment_window: None,
        }),
    }
}

fn create_task(w: &mut World, author: AgentId, audience: Audience, draft: ContractDraft) -> TaskId {
    match w.ok(author, Action::CreateTask { audience, contract: draft }) {
        ActionResult::TaskCreated { task, .. } => task,
        other => panic!("unexpected {other:?}"),
    }
}

fn open_task(w: &mut World, author: AgentId) -> TaskId {
    create_task(w, author, Audience::Open, ContractDraft::simple("requirements", "acceptance"))
}

fn take_task(w: &mut World, agent: AgentId, task: TaskId) -> EngagementId {
    match w.ok(agent, Action::TakeTask { task }) {
        ActionResult::Engaged { engagement, existing: false, .. } => engagement,
        other => panic!("unexpected {other:?}"),
    }
}

fn take_and_deliver_task(w: &mut World, agent: AgentId, task: TaskId) -> EngagementId {
    match w.ok(agent, Action::DeliverTask { task, output: Content::from("task output"), take: true }) {
        ActionResult::EngagementDelivered { engagement, .. } => engagement,
        other => panic!("unexpected {other:?}"),
    }
}

fn create_memory(w: &mut World, author: AgentId, text: &str) -> MemoryId {
    match w.ok(author, Action::CreateMemory { content: Content::from(text) }) {
        ActionResult::MemoryCreated { memory, .. } => memory,
        other => panic!("unexpected {other:?}"),
    }
}

/// The turn read in one page (callers keep it under the page limit).
fn turn(w: &World, agent: AgentId) -> Vec<TurnItem> {
    let page = read::turn(&w.state, agent, None, 100, w.now, &w.limits).expect("turn");
    assert!(page.next_cursor.is_none(), "turn does not fit one page");
    page.items
}

fn ids(items: &[TurnItem]) -> Vec<ObligationId> {
    items.iter().map(|i| i.obligation).collect()
}

fn ws(w: &World, agent: AgentId, object: ObjectRef) -> WorkingSet {
    read::working_set(&w.state, agent, object, w.now, &w.limits).expect("working set")
}

/// The rejection of a read that must be refused.
#[track_caller]
fn read_rejection<T: std::fmt::Debug>(r: ReadResult<T>) -> Rejection {
    match r {
        Err(ReadError::Rejected(r)) => r,
        other => panic!("expected a rejected read, got {other:?}"),
    }
}

#[track_caller]
fn assert_same_state(now: &MemState, before: &MemState, what: &str) {
    if now != before {
        let changed = now.map.iter().filter(|(k, v)| before.map.get(*k) != Some(*v)).count();
        let removed = before.map.keys().filter(|k| !now.map.contains_key(*k)).count();
        panic!("{what}: the state changed ({changed} keys written, {removed} removed)");
    }
}

/// An agent action that must be rejected and leave the whole state (receipts included) unchanged.
#[track_caller]
fn refused(w: &mut World, agent: AgentId, action: Action) -> Rejection {
    let before = w.state.clone();
    let kind = action.kind();
    let r = w.err(agent, action);
    assert_same_state(&w.state, &before, kind.as_str());
    r
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

fn exec_key(w: &mut World, agent: AgentId, action: Action, key: &IdempotencyKey) -> Applied {
    w.exec(Principal::Agent(agent), action, Some(key.clone()))
}

fn key(s: &str) -> IdempotencyKey {
    IdempotencyKey::new(s).expect("valid key")
}

/// One agent (`me`) holding one obligation of every kind, across two threads and two Tasks.
struct Six {
    me: AgentId,
    a: AgentId,
    b: AgentId,
    t1: ThreadId,
    t2: ThreadId,
    e1: EntrySeq,
    e2: EntrySeq,
    asg1: AssignmentId,
    asg2: AssignmentId,
    task_a: TaskId,
    eng1: EngagementId,
    task_me: TaskId,
    eng2: EngagementId,
}

impl Six {
    fn expected(&self) -> Vec<ObligationId> {
        vec![
            ObligationId::Response { thread: self.t1, entry: self.e1, responder: self.me },
            ObligationId::Response { thread: self.t2, entry: self.e2, responder: self.me },
            ObligationId::AssignmentDelivery(self.asg1),
            ObligationId::AssignmentJudgment(self.asg2),
            ObligationId::EngagementDelivery(self.eng1),
            ObligationId::EngagementJudgment(self.eng2),
        ]
    }
}

fn six(w: &mut World) -> Six {
    let me = w.register();
    let a = w.register();
    let b = w.register();
    let t1 = w.thread_with(a, &[(me, Role::Speaker), (b, Role::Speaker)]);
    let t2 = w.thread_with(b, &[(me, Role::Speaker)]);
    // §6.3 rule 1 in t1 (three speakers), rule 3 in t2 (two speakers).
    let e1 = w.post(a, t1, "a question for me", None, Some(&[me][..]));
    let e2 = w.post(b, t2, "hello", None, None);
    let asg1 = w.assign(a, t1, me, None, None);
    w.ok(me, Action::TakeAssignment { assignment: asg1 });
    let asg2 = w.assign(me, t2, b, None, None);
    w.ok(b, Action::TakeAssignment { assignment: asg2 });
    w.ok(b, Action::DeliverAssignment { assignment: asg2, output: Content::from("b's work") });
    let task_a = open_task(w, a);
    let eng1 = take_task(w, me, task_a);
    let task_me = open_task(w, me);
    let eng2 = take_and_deliver_task(w, b, task_me);
    Six { me, a, b, t1, t2, e1, e2, asg1, asg2, task_a, eng1, task_me, eng2 }
}

// --- §8 Turn -------------------------------------------------------------------------------------

/// §8 (§8.8, §8.2, §8.13): the turn holds every open obligation across memberships and engagements, ordered by when each arose, each once, with its next step.
#[test]
fn turn_lists_every_obligation_across_threads_and_tasks_in_arising_order() {
    let mut w = World::new();
    let s = six(&mut w);
    let items = turn(&w, s.me);
    assert_eq!(ids(&items), s.expected());
    assert_eq!(
        items.iter().map(|i| i.kind).collect::<Vec<_>>(),
        [
            ObligationKind::Response,
            ObligationKind::Response,
            ObligationKind::Delivery,
            ObligationKind::Judgment,
            ObligationKind::Delivery,
            ObligationKind::Judgment
        ]
    );
    assert_eq!(
        items.iter().map(|i| i.next).collect::<Vec<_>>(),
        [NextStep::Respond, NextStep::Respond, NextStep::Deliver, NextStep::Judge, NextStep::Deliver, NextStep::Judge]
    );
    assert_eq!(
        items.iter().map(|i| i.object).collect::<Vec<_>>(),
        [
            ObjectRef::Thread(s.t1),
            ObjectRef::Thread(s.t2),
            ObjectRef::Thread(s.t1),
            ObjectRef::Thread(s.t2),
            ObjectRef::Task(s.task_a),
            ObjectRef::Task(s.task_me)
        ]
    );
    // Ordered by when each arose (strictly: each arose in a different command), without duplicates.
    assert!(items.windows(2).all(|p| p[0].arose_at < p[1].arose_at), "not ordered by arose_at: {items:?}");
    assert_eq!(items.iter().map(|i| i.obligation).collect::<HashSet<_>>().len(), items.len());
    // Responses carry no deadline; delivery and judgment do (L4).
    assert_eq!(items.iter().map(|i| i.due_at.is_some()).collect::<Vec<_>>(), [false, false, true, true, true, true]);
    // The paginated traversal agrees with the one-page read.
    assert_eq!(w.full_turn(s.me), items);
    // Nothing of `me` leaks into the other agents' turns.
    for other in [s.a, s.b] {
        assert!(turn(&w, other).iter().all(|i| !s.expected().contains(&i.obligation)));
    }
}

/// §8 (§8.13, L4.3): an obligation whose deadline has passed but whose expiry is not yet recorded shows `wait`; the expiry then removes it.
#[test]
fn turn_next_step_becomes_wait_after_deadline_until_expiry() {
    let mut w = World::new();
    let me = w.register();
    let g = w.register();
    let b = w.register();
    let t = w.thread_with(g, &[(me, Role::Speaker)]);
    let e = w.post(g, t, "please answer", None, None);
    let asg = w.assign(g, t, me, Some(Micros::from_secs(10)), None);
    w.ok(me, Action::TakeAssignment { assignment: asg });
    let mut draft = ContractDraft::simple("req", "acc");
    draft.judgment_window = Some(Micros::from_secs(10));
    let task = create_task(&mut w, me, Audience::Open, draft);
    let eng = take_and_deliver_task(&mut w, b, task);
    let before: Vec<NextStep> = turn(&w, me).iter().map(|i| i.next).collect();
    assert_eq!(before, [NextStep::Respond, NextStep::Deliver, NextStep::Judge]);

    w.advance(Micros::from_secs(11));
    let items = turn(&w, me);
    assert_eq!(
        ids(&items),
        [
            ObligationId::Response { thread: t, entry: e, responder: me },
            ObligationId::AssignmentDelivery(asg),
            ObligationId::EngagementJudgment(eng)
        ]
    );
    assert_eq!(items.iter().map(|i| i.next).collect::<Vec<_>>(), [NextStep::Respond, NextStep::Wait, NextStep::Wait]);
    assert!(items[1..].iter().all(|i| i.due_at.is_some_and(|d| d <= w.now)));

    let ended: BTreeSet<ObligationId> = w.fire_due_timers().into_iter().collect();
    assert_eq!(ended, BTreeSet::from([ObligationId::AssignmentDelivery(asg), ObligationId::EngagementJudgment(eng)]));
    assert_eq!(ids(&turn(&w, me)), [ObligationId::Response { thread: t, entry: e, responder: me }]);
}

/// §8 (§8.3, L4.4): a response carries no deadline: however long it waits it stays `respond` and no timer ends it.
#[test]
fn response_obligation_has_no_deadline_and_never_turns_to_wait() {
    let mut w = World::new();
    let me = w.register();
    let g = w.register();
    let t = w.thread_with(g, &[(me, Role::Speaker)]);
    let e = w.post(g, t, "ping", None, None);
    w.advance(Micros::from_secs(365 * 24 * 3600));
    assert!(w.fire_due_timers().is_empty());
    let items = turn(&w, me);
    assert_eq!(ids(&items), [ObligationId::Response { thread: t, entry: e, responder: me }]);
    assert_eq!(items[0].next, NextStep::Respond);
    assert_eq!(items[0].due_at, None);
}

/// §8 (§8.8): an agent that is both creator and addressee of an assignment holds one obligation at a time, never a duplicate.
#[test]
fn self_assignment_shows_one_obligation_at_a_time_without_duplicates() {
    let mut w = World::new();
    let me = w.register();
    let t = w.thread_with(me, &[]);
    let asg = w.assign(me, t, me, None, None);
    assert!(turn(&w, me).is_empty());
    assert_eq!(w.opportunity_ids(me), [OpportunityId::Assignment(asg)]);
    w.ok(me, Action::TakeAssignment { assignment: asg });
    assert_eq!(ids(&turn(&w, me)), [ObligationId::AssignmentDelivery(asg)]);
    assert!(w.opportunity_ids(me).is_empty());
    w.ok(me, Action::DeliverAssignment { assignment: asg, output: Content::from("done") });
    assert_eq!(ids(&turn(&w, me)), [ObligationId::AssignmentJudgment(asg)]);
    w.ok(me, Action::AdoptAssignment { assignment: asg });
    assert!(turn(&w, me).is_empty());
}

/// §8 (§8.10): with 13 obligations and page size 3, a complete traversal returns every obligation exactly once, in order.
#[test]
fn paginated_turn_traversal_returns_every_obligation_once_in_order() {
    let mut w = World::new();
    let me = w.register();
    let g = w.register();
    let h = w.register();
    let t1 = w.thread_with(g, &[(me, Role::Speaker)]);
    let t2 = w.thread_with(h, &[(me, Role::Speaker)]);
    for i in 0..6 {
        w.post(g, t1, &format!("g{i}"), None, None);
        w.post(h, t2, &format!("h{i}"), None, None);
    }
    let asg = w.assign(g, t1, me, None, None);
    w.ok(me, Action::TakeAssignment { assignment: asg });
    let all = turn(&w, me);
    assert_eq!(all.len(), 13);

    let mut collected = Vec::new();
    let mut cursor: Option<Cursor> = None;
    let mut pages = 0;
    loop {
        let page = read::turn(&w.state, me, cursor.as_ref(), 3, w.now, &w.limits).expect("turn page");
        assert!(page.items.len() <= 3);
        pages += 1;
        collected.extend(page.items);
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
        assert!(pages < 20, "traversal does not end");
    }
    assert_eq!(pages, 5, "four full pages and one last page");
    assert_eq!(collected, all);
    assert_eq!(collected.iter().map(|i| i.obligation).collect::<HashSet<_>>().len(), 13);
    assert!(collected.windows(2).all(|p| p[0].arose_at <= p[1].arose_at));
    assert_eq!(collected.last().map(|i| i.obligation), Some(ObligationId::AssignmentDelivery(asg)));
}

/// §8 (§8.10): obligations ending or arising during a traversal never make it omit one that is still open.
#[test]
fn traversal_across_changes_omits_no_obligation_open_at_its_end() {
    let mut w = World::new();
    let me = w.register();
    let g = w.register();
    let t = w.thread_with(g, &[(me, Role::Speaker)]);
    let entries: Vec<EntrySeq> = (0..9).map(|i| w.post(g, t, &format!("p{i}"), None, None)).collect();
    let p1 = read::turn(&w.state, me, None, 3, w.now, &w.limits).expect("page 1");
    let p2 = read::turn(&w.state, me, p1.next_cursor.as_ref(), 3, w.now, &w.limits).expect("page 2");
    let mut collected: Vec<ObligationId> = ids(&p1.items).into_iter().chain(ids(&p2.items)).collect();
    // Between pages: two seen obligations and one unseen end, and a new one arises.
    for e in [entries[1], entries[4], entries[7]] {
        w.ok(me, Action::Handle { thread: t, entry: e, note: None });
    }
    let e10 = w.post(g, t, "late", None, None);
    let mut cursor = p2.next_cursor;
    while let Some(c) = cursor {
        let page = read::turn(&w.state, me, Some(&c), 3, w.now, &w.limits).expect("page");
        collected.extend(ids(&page.items));
        cursor = page.next_cursor;
    }
    let unique: HashSet<_> = collected.iter().copied().collect();
    assert_eq!(unique.len(), collected.len(), "an obligation was returned twice: {collected:?}");
    for item in turn(&w, me) {
        assert!(unique.contains(&item.obligation), "the traversal omitted {:?}", item.obligation);
    }
    assert!(unique.contains(&ObligationId::Response { thread: t, entry: e10, responder: me }));
    assert!(!unique.contains(&ObligationId::Response { thread: t, entry: entries[7], responder: me }));
}

/// §8 (§8.10, §9.4): a cursor is valid only for the turn of the agent it came from; another agent's cursor, another read's cursor or garbage is INVALID_ARGUMENT.
#[test]
fn turn_cursor_of_another_agent_or_read_is_invalid_argument() {
    let mut w = World::new();
    let me = w.register();
    let b = w.register();
    let g = w.register();
    let t = w.thread_with(g, &[(me, Role::Speaker), (b, Role::Speaker)]);
    for i in 0..4 {
        w.post(g, t, &format!("q{i}"), None, Some(&[me, b][..]));
        w.assign(g, t, b, None, None);
    }
    let theirs = read::turn(&w.state, b, None, 3, w.now, &w.limits).expect("b's turn");
    let their_cursor = theirs.next_cursor.expect("b has more than one page");
    let r = read_rejection(read::turn(&w.state, me, Some(&their_cursor), 3, w.now, &w.limits));
    assert_eq!(r.code, Code::InvalidArgument);
    assert_eq!(r.field.as_deref(), Some("cursor"));
    assert_eq!(r.next, NextStep::Revise);
    let opp = read::opportunities(&w.state, b, None, 3, &w.limits).expect("b's opportunities");
    let opp_cursor = opp.next_cursor.expect("b has more than one page of opportunities");
    assert_eq!(
        read_rejection(read::turn(&w.state, b, Some(&opp_cursor), 3, w.now, &w.limits)).code,
        Code::InvalidArgument
    );
    let garbage = Cursor(vec![0xde, 0xad]);
    assert_eq!(
        read_rejection(read::turn(&w.state, me, Some(&garbage), 3, w.now, &w.limits)).code,
        Code::InvalidArgument
    );
    assert_eq!(Cursor::from_hex("not hex").map(|_| ()).map_err(|r| r.code), Err(Code::InvalidArgument));
    // The agent's own cursor keeps working.
    let mine = read::turn(&w.state, me, None, 3, w.now, &w.limits).expect("my turn");
    let next = read::turn(&w.state, me, mine.next_cursor.as_ref(), 3, w.now, &w.limits).expect("my next page");
    assert_eq!(next.items.len(), 1);
}

/// §8 (§8.9): an open thread with members and a broadcast entry, and an open Task, create no obligation (and no opportunity) by being open.
#[test]
fn open_thread_or_task_creates_no_obligation_by_being_open() {
    let mut w = World::new();
    let g = w.register();
    let s1 = w.register();
    let s2 = w.register();
    let o = w.register();
    let t = w.thread_with(g, &[(s1, Role::Speaker), (s2, Role::Speaker), (o, Role::Observer)]);
    w.post(g, t, "broadcast to three speakers", None, None);
    let task = open_task(&mut w, g);
    for agent in [g, s1, s2, o] {
        assert!(turn(&w, agent).is_empty(), "{agent} has obligations");
        assert!(ws(&w, agent, ObjectRef::Thread(t)).obligations.is_empty());
        assert!(ws(&w, agent, ObjectRef::Task(task)).obligations.is_empty());
        assert!(w.opportunity_ids(agent).is_empty(), "an open Task is not an opportunity of {agent}");
    }
}

/// §8 (§8.6, §8.7): an untaken assignment and a restricted Task naming an agent are its opportunities, found without knowing where they are, and not in its turn.
#[test]
fn untaken_assignment_and_restricted_task_are_opportunities_not_obligations() {
    let mut w = World::new();
    let me = w.register();
    let g = w.register();
    let h = w.register();
    let other = w.register();
    let t = w.thread_with(g, &[(me, Role::Speaker), (other, Role::Speaker)]);
    let asg = w.assign(g, t, me, None, None);
    let task = create_task(&mut w, h, Audience::Restricted(BTreeSet::from([me])), ContractDraft::simple("r", "a"));
    assert!(turn(&w, me).is_empty());
    let page = read::opportunities(&w.state, me, None, 0, &w.limits).expect("opportunities");
    assert_eq!(
        page.items.iter().map(|o| o.id).collect::<Vec<_>>(),
        [OpportunityId::Assignment(asg), OpportunityId::Task(task)]
    );
    assert_eq!(page.items.iter().map(|o| o.object).collect::<Vec<_>>(), [ObjectRef::Thread(t), ObjectRef::Task(task)]);
    assert!(page.items[0].arose_at < page.items[1].arose_at);
    // They bind no one: other agents see nothing, and nobody's turn holds them.
    assert!(w.opportunity_ids(other).is_empty());
    assert!(turn(&w, g).is_empty() && turn(&w, h).is_empty() && turn(&w, other).is_empty());
}

/// §8 (§8.6, §6.4.5): taking an opportunity moves it out of the opportunities and creates the delivery obligation.
#[test]
fn taking_an_opportunity_moves_it_into_the_turn() {
    let mut w = World::new();
    let me = w.register();
    let g = w.register();
    let h = w.register();
    let t = w.thread_with(g, &[(me, Role::Speaker)]);
    let asg = w.assign(g, t, me, None, None);
    let task = create_task(&mut w, h, Audience::Restricted(BTreeSet::from([me])), ContractDraft::simple("r", "a"));
    // Only the ids the opportunities give are used.
    for opp in read::opportunities(&w.state, me, None, 0, &w.limits).expect("opportunities").items {
        match opp.id {
            OpportunityId::Assignment(a) => w.ok(me, Action::TakeAssignment { assignment: a }),
            OpportunityId::Task(tk) => w.ok(me, Action::TakeTask { task: tk }),
        };
    }
    assert!(w.opportunity_ids(me).is_empty());
    let items = turn(&w, me);
    assert_eq!(items.len(), 2);
    assert_eq!(items[0].obligation, ObligationId::AssignmentDelivery(asg));
    assert!(matches!(items[1].obligation, ObligationId::EngagementDelivery(_)));
    assert_eq!(items[1].object, ObjectRef::Task(task));
    assert!(items.iter().all(|i| i.next == NextStep::Deliver));
}

/// §8 (§8.1, L1.1): obligations are derived from facts: the turn and opportunities read from a state rebuilt from the journals alone equal the live ones.
#[test]
fn turn_is_derived_from_facts_alone() {
    let mut w = World::new();
    let s = six(&mut w);
    let t3 = w.thread_with(s.a, &[(s.me, Role::Speaker)]);
    w.assign(s.a, t3, s.me, None, None);
    let rebuilt = rebuild(&w.state).expect("rebuild");
    for agent in [s.me, s.a, s.b] {
        let live = read::turn(&w.state, agent, None, 100, w.now, &w.limits).expect("live turn");
        let from_facts = read::turn(&rebuilt, agent, None, 100, w.now, &w.limits).expect("rebuilt turn");
        assert_eq!(live, from_facts);
        let live_o = read::opportunities(&w.state, agent, None, 100, &w.limits).expect("live");
        let facts_o = read::opportunities(&rebuilt, agent, None, 100, &w.limits).expect("rebuilt");
        assert_eq!(live_o, facts_o);
    }
    assert_eq!(ids(&turn(&w, s.me)), s.expected());
}

/// §8 (§8.1, L2.3): obligations cannot be written directly: attempts by the wrong party to end or create them are rejected, and reads change nothing, so every turn stays as it was.
#[test]
fn turn_changes_only_through_valid_actions() {
    let mut w = World::new();
    let s = six(&mut w);
    let turns = |w: &World| [s.me, s.a, s.b].map(|x| turn(w, x));
    let before = turns(&w);
    let state_before = w.state.clone();
    let attempts = [
        (s.b, Action::Handle { thread: s.t1, entry: s.e1, note: None }, Code::NoPendingResponse),
        (s.b, Action::Retract { thread: s.t1, entry: s.e1 }, Code::NotAuthor),
        (s.b, Action::DeliverAssignment { assignment: s.asg1, output: Content::from("not mine") }, Code::NotTaker),
        (s.b, Action::DropAssignment { assignment: s.asg1 }, Code::NotTaker),
        (s.b, Action::AdoptAssignment { assignment: s.asg2 }, Code::NotCreator),
        (s.a, Action::AdoptEngagement { engagement: s.eng2 }, Code::NotFound),
        (s.a, Action::DropEngagement { engagement: s.eng1 }, Code::NotTaker),
        (s.me, Action::Handle { thread: s.t2, entry: EntrySeq(99), note: None }, Code::NoPendingResponse),
    ];
    for (agent, action, code) in attempts {
        assert_eq!(refused(&mut w, agent, action).code, code);
    }
    for agent in [s.me, s.a, s.b] {
        let _ = read::opportunities(&w.state, agent, None, 0, &w.limits);
        for object in
            [ObjectRef::Thread(s.t1), ObjectRef::Thread(s.t2), ObjectRef::Task(s.task_a), ObjectRef::Task(s.task_me)]
        {
            let _ = read::working_set(&w.state, agent, object, w.now, &w.limits);
        }
    }
    assert_same_state(&w.state, &state_before, "rejections and reads");
    assert_eq!(turns(&w), before);
}

/// Ends every obligation in the turn using only the turn and the working sets: the agent kept nothing but its id.
fn recover(w: &mut World, me: AgentId) -> usize {
    let mut actions = 0;
    for _round in 0..5 {
        let items = w.full_turn(me);
        if items.is_empty() {
            return actions;
        }
        for item in items {
            let set =
                read::working_set(&w.state, me, item.object, w.now, &w.limits).expect("working set of a turn object");
            let listed = set
                .obligations
                .iter()
                .find(|o| o.obligation == item.obligation)
                .expect("the working set lists the obligation");
            assert_eq!(listed.next, item.next);
            let (needed, action) = match (item.obligation, item.object) {
                (ObligationId::Response { thread, entry, .. }, _) => (
                    ActionKind::Post,
                    Action::Post {
                        thread,
                        body: PostBody::Content(Content::from("my answer")),
                        reply_to: Some(entry),
                        ask: None,
                        task_ref: None,
                        assignment: None,
                    },
                ),
                (ObligationId::AssignmentDelivery(a), _) => (
                    ActionKind::DeliverAssignment,
                    Action::DeliverAssignment { assignment: a, output: Content::from("my work") },
                ),
                (ObligationId::AssignmentJudgment(a), _) => {
                    (ActionKind::AdoptAssignment, Action::AdoptAssignment { assignment: a })
                }
                (ObligationId::EngagementDelivery(_), ObjectRef::Task(task)) => (
                    ActionKind::DeliverTask,
                    Action::DeliverTask { task, output: Content::from("my task work"), take: false },
                ),
                (ObligationId::EngagementJudgment(e), _) => {
                    (ActionKind::AdoptEngagement, Action::AdoptEngagement { engagement: e })
                }
                other => panic!("unexpected obligation {other:?}"),
            };
            assert!(set.available.contains(&needed), "{needed:?} not offered in {:?}", set.available);
            w.ok(me, action);
            actions += 1;
        }
    }
    panic!("the turn did not empty");
}

/// §8 (§8.15, §8.16, §10.2.5): an agent that kept nothing but its id reads its turn, then each object's working set, and completes all its work from the ids they give, ending with an empty turn.
#[test]
fn recovery_from_turn_and_working_sets_alone_ends_with_empty_turn() {
    let mut w = World::new();
    let (me, a, b) = {
        let s = six(&mut w);
        (s.me, s.a, s.b)
    };
    let done = recover(&mut w, me);
    assert_eq!(done, 6);
    assert!(w.full_turn(me).is_empty());
    // The work really happened: the other parties now hold what follows from it.
    let kinds = |w: &World, x: AgentId| {
        let mut k: Vec<(ObligationKind, bool)> =
            turn(w, x).iter().map(|i| (i.kind, matches!(i.object, ObjectRef::Task(_)))).collect();
        k.sort();
        k
    };
    // a: the reply to its question, the judgment of the delivered assignment and of the Task delivery.
    assert_eq!(
        kinds(&w, a),
        [(ObligationKind::Response, false), (ObligationKind::Judgment, false), (ObligationKind::Judgment, true)]
    );
    // b: the reply to its greeting.
    assert_eq!(kinds(&w, b), [(ObligationKind::Response, false)]);
}

// --- §8 Working set ------------------------------------------------------------------------------

/// §8 (§8.11): a thread's working set gives its identity and state, the members, and the reader's role; the grant only to governors.
#[test]
fn working_set_of_thread_gives_identity_state_and_role() {
    let mut w = World::new();
    let g = w.register();
    let s = w.register();
    let o = w.register();
    let t = w.thread_with(g, &[(s, Role::Speaker), (o, Role::Observer)]);
    w.post(g, t, "one", None, None);
    for (agent, role) in [(g, Role::Governor), (s, Role::Speaker), (o, Role::Observer)] {
        let set = ws(&w, agent, ObjectRef::Thread(t));
        assert_eq!(set.object, ObjectRef::Thread(t));
        assert_eq!(set.role, Some(role));
        let ObjectSummary::Thread { id, open, members, last_entry, open_assignments, grant, .. } = set.summary else {
            panic!("not a thread summary")
        };
        assert_eq!(id, t);
        assert!(open);
        assert_eq!(
            members.into_iter().collect::<BTreeSet<_>>(),
            BTreeSet::from([(g, Role::Governor), (s, Role::Speaker), (o, Role::Observer)])
        );
        assert_eq!(last_entry, 1);
        assert_eq!(open_assignments, 0);
        assert_eq!(grant.is_some(), role == Role::Governor, "the live grant is shown to governors only");
    }
    w.ok(g, Action::CloseThread { thread: t });
    let ObjectSummary::Thread { open, .. } = ws(&w, s, ObjectRef::Thread(t)).summary else { panic!("not a thread") };
    assert!(!open);
}

/// §8 (§8.11, §8.12, L6.2): the history digest is bounded by `history_digest_len`, newest first, and structural: fact names, never content.
#[test]
fn working_set_history_is_bounded_newest_first_and_structural() {
    let limits = Limits { history_digest_len: 4, ..Limits::default() };
    let mut w = World::with_limits(limits);
    let me = w.register();
    let g = w.register();
    let t = w.thread_with(g, &[(me, Role::Speaker)]);
    let mut last = EntrySeq(0);
    for i in 0..6 {
        last = w.post(g, t, &format!("HISTORY-CONTENT-{i}"), None, None);
    }
    w.ok(me, Action::Handle { thread: t, entry: last, note: Some(Content::from("HISTORY-NOTE")) });
    let set = ws(&w, me, ObjectRef::Thread(t));
    assert_eq!(set.history.len(), 4);
    assert_eq!(
        set.history.iter().map(|h| h.fact.as_str()).collect::<Vec<_>>(),
        ["handled", "posted", "posted", "posted"]
    );
    assert_eq!(set.history[0].actor, Some(me));
    assert!(set.history[1..].iter().all(|h| h.actor == Some(g)));
    assert!(set.history.windows(2).all(|p| (p[0].seq, p[0].idx) > (p[1].seq, p[1].idx) && p[0].at >= p[1].at));
    let bytes = codec::encode(&set);
    assert!(!contains(&bytes, b"HISTORY-"), "the working set carries content");
    // Content comes on demand.
    let entry = read::read_entry(&w.state, me, t, last).expect("entry");
    assert_eq!(entry.content, Some(Content::from("HISTORY-CONTENT-5")));
    // With the default limit the digest holds the whole (short) history.
    let mut w2 = World::new();
    let g2 = w2.register();
    let t2 = w2.thread_with(g2, &[]);
    assert_eq!(
        ws(&w2, g2, ObjectRef::Thread(t2)).history.iter().map(|h| h.fact.as_str()).collect::<Vec<_>>(),
        ["thread_created"]
    );
}

/// §8 (§8.11): a working set lists the reader's obligations on that object only.
#[test]
fn working_set_lists_only_the_obligations_on_that_object() {
    let mut w = World::new();
    let s = six(&mut w);
    let on = |w: &World, o: ObjectRef| ids(&ws(w, s.me, o).obligations);
    assert_eq!(
        on(&w, ObjectRef::Thread(s.t1)),
        [
            ObligationId::Response { thread: s.t1, entry: s.e1, responder: s.me },
            ObligationId::AssignmentDelivery(s.asg1)
        ]
    );
    assert_eq!(
        on(&w, ObjectRef::Thread(s.t2)),
        [
            ObligationId::Response { thread: s.t2, entry: s.e2, responder: s.me },
            ObligationId::AssignmentJudgment(s.asg2)
        ]
    );
    assert_eq!(on(&w, ObjectRef::Task(s.task_a)), [ObligationId::EngagementDelivery(s.eng1)]);
    assert_eq!(on(&w, ObjectRef::Task(s.task_me)), [ObligationId::EngagementJudgment(s.eng2)]);
    // The same items as the turn, with the same next steps.
    let all: Vec<TurnItem> =
        [ObjectRef::Thread(s.t1), ObjectRef::Thread(s.t2), ObjectRef::Task(s.task_a), ObjectRef::Task(s.task_me)]
            .into_iter()
            .flat_map(|o| ws(&w, s.me, o).obligations)
            .collect();
    let mut sorted = all.clone();
    sorted.sort_by_key(|i| i.arose_at);
    assert_eq!(sorted, turn(&w, s.me));
    // b's working set of t1 holds none of me's obligations.
    assert!(ws(&w, s.b, ObjectRef::Thread(s.t1)).obligations.is_empty());
}

/// §8 (§8.11, §6.2.1): a speaker is offered Post, an observer is not; neither is offered governor actions.
#[test]
fn working_set_offers_post_to_speaker_not_observer() {
    let mut w = World::new();
    let g = w.register();
    let s = w.register();
    let o = w.register();
    let t = w.thread_with(g, &[(s, Role::Speaker), (o, Role::Observer)]);
    let sp = ws(&w, s, ObjectRef::Thread(t)).available;
    let ob = ws(&w, o, ObjectRef::Thread(t)).available;
    assert!(sp.contains(&ActionKind::Post) && sp.contains(&ActionKind::Leave));
    assert!(!ob.contains(&ActionKind::Post) && ob.contains(&ActionKind::Leave));
    // The coordination layer's posts need the same right.
    for k in [ActionKind::Send, ActionKind::Scatter] {
        assert!(sp.contains(&k) && !ob.contains(&k), "{k:?}: {sp:?} / {ob:?}");
    }
    for governor_only in [ActionKind::IssueGrant, ActionKind::ChangeRole, ActionKind::Remove, ActionKind::CloseThread] {
        assert!(!sp.contains(&governor_only) && !ob.contains(&governor_only));
    }
    // What is offered matches what is allowed.
    assert_eq!(refused(&mut w, o, post_action(t, "x", None, None)).code, Code::CannotSpeak);
    w.ok(s, post_action(t, "x", None, None));
}

/// §8 (§8.11, §6.2.4): a sole governor is offered no Leave (but Close); once a second governor exists, Leave appears.
#[test]
fn working_set_offers_no_leave_to_sole_governor() {
    let mut w = World::new();
    let g = w.register();
    let s = w.register();
    let t = w.thread_with(g, &[(s, Role::Speaker)]);
    let gov = ws(&w, g, ObjectRef::Thread(t)).available;
    assert!(!gov.contains(&ActionKind::Leave));
    for k in [
        ActionKind::Post,
        ActionKind::CloseThread,
        ActionKind::IssueGrant,
        ActionKind::ChangeRole,
        ActionKind::Remove,
        ActionKind::VoidGrant,
    ] {
        assert!(gov.contains(&k), "{k:?} missing from {gov:?}");
    }
    assert_eq!(refused(&mut w, g, Action::Leave { thread: t }).code, Code::SoleGovernor);
    w.ok(g, Action::ChangeRole { thread: t, member: s, role: Role::Governor });
    assert!(ws(&w, g, ObjectRef::Thread(t)).available.contains(&ActionKind::Leave));
    // After closing, the sole governor may leave a read-only thread and may no longer post.
    let t2 = w.thread_with(g, &[]);
    w.ok(g, Action::CloseThread { thread: t2 });
    let closed = ws(&w, g, ObjectRef::Thread(t2)).available;
    assert!(
        closed.contains(&ActionKind::Leave)
            && !closed.contains(&ActionKind::Post)
            && !closed.contains(&ActionKind::CloseThread)
    );
}

/// §8 (§8.11): the addressee is offered Take; after taking, DeliverAssignment and DropAssignment appear; after delivery the creator is offered Adopt and Reject.
#[test]
fn working_set_actions_follow_the_assignment() {
    let mut w = World::new();
    let g = w.register();
    let s = w.register();
    let t = w.thread_with(g, &[(s, Role::Speaker)]);
    let asg = w.assign(g, t, s, None, None);
    let avail = |w: &World, x: AgentId| ws(w, x, ObjectRef::Thread(t)).available;
    let before = avail(&w, s);
    assert!(before.contains(&ActionKind::TakeAssignment));
    assert!(!before.contains(&ActionKind::DeliverAssignment) && !before.contains(&ActionKind::DropAssignment));
    assert!(avail(&w, g).contains(&ActionKind::VoidAssignment));
    assert!(!avail(&w, g).contains(&ActionKind::TakeAssignment));
    w.ok(s, Action::TakeAssignment { assignment: asg });
    let taken = avail(&w, s);
    assert!(taken.contains(&ActionKind::DeliverAssignment) && taken.contains(&ActionKind::DropAssignment));
    assert!(!taken.contains(&ActionKind::TakeAssignment));
    assert!(!avail(&w, g).contains(&ActionKind::AdoptAssignment));
    w.ok(s, Action::DeliverAssignment { assignment: asg, output: Content::from("out") });
    let delivered = avail(&w, s);
    assert!(!delivered.contains(&ActionKind::DeliverAssignment) && !delivered.contains(&ActionKind::DropAssignment));
    let judge = avail(&w, g);
    assert!(judge.contains(&ActionKind::AdoptAssignment) && judge.contains(&ActionKind::RejectAssignment));
    assert!(!judge.contains(&ActionKind::VoidAssignment));
}

/// §8 (§8.11): a Task's working set offers the engaged agent delivery or drop, and the requester adopt or reject once delivered.
#[test]
fn working_set_of_task_offers_the_obligation_actions() {
    let mut w = World::new();
    let author = w.register();
    let worker = w.register();
    let task = open_task(&mut w, author);
    let eng = take_task(&mut w, worker, task);
    let set = ws(&w, worker, ObjectRef::Task(task));
    assert_eq!(ids(&set.obligations), [ObligationId::EngagementDelivery(eng)]);
    assert!(set.available.contains(&ActionKind::DeliverTask) && set.available.contains(&ActionKind::DropEngagement));
    assert!(!set.available.contains(&ActionKind::ReviseContract));
    let a = ws(&w, author, ObjectRef::Task(task));
    assert!(a.obligations.is_empty());
    assert!(!a.available.contains(&ActionKind::AdoptEngagement) && !a.available.contains(&ActionKind::TakeTask));
    assert!(a.available.contains(&ActionKind::ReviseContract) && a.available.contains(&ActionKind::PauseTask));
    w.ok(worker, Action::DeliverTask { task, output: Content::from("out"), take: false });
    let a = ws(&w, author, ObjectRef::Task(task));
    assert_eq!(ids(&a.obligations), [ObligationId::EngagementJudgment(eng)]);
    assert!(a.available.contains(&ActionKind::AdoptEngagement) && a.available.contains(&ActionKind::RejectEngagement));
    assert!(ws(&w, worker, ObjectRef::Task(task)).obligations.is_empty());
}

/// §8 (§8.11, L4.3): once the delivery deadline passed, the working set shows `wait` and no longer offers delivery, and a late delivery loses to the deadline.
#[test]
fn working_set_past_deadline_shows_wait_and_offers_no_delivery() {
    let mut w = World::new();
    let g = w.register();
    let s = w.register();
    let t = w.thread_with(g, &[(s, Role::Speaker)]);
    let asg = w.assign(g, t, s, Some(Micros::from_secs(5)), None);
    w.ok(s, Action::TakeAssignment { assignment: asg });
    w.advance(Micros::from_secs(6));
    let set = ws(&w, s, ObjectRef::Thread(t));
    assert_eq!(set.obligations.len(), 1);
    assert_eq!(set.obligations[0].next, NextStep::Wait);
    assert!(
        !set.available.contains(&ActionKind::DeliverAssignment) && !set.available.contains(&ActionKind::DropAssignment)
    );
    let r = w.err(s, Action::DeliverAssignment { assignment: asg, output: Content::from("late") });
    assert_eq!(r.code, Code::DeadlinePassed);
    assert!(ws(&w, s, ObjectRef::Thread(t)).obligations.is_empty());
}

// --- §9 / §12 Visibility -------------------------------------------------------------------------

/// Two threads seen by `x`: one it has left (t1) and one it never joined (t2), plus an id that names no thread.
fn left_never_ghost(w: &mut World) -> (AgentId, AgentId, [ThreadId; 3]) {
    let g = w.register();
    let x = w.register();
    let t1 = w.thread_with(g, &[(x, Role::Speaker)]);
    let t2 = w.thread_with(g, &[]);
    w.post(g, t1, "SECRET-IN-T1", None, None);
    w.post(g, t2, "SECRET-IN-T2", None, None);
    assert!(read::read_entry(&w.state, x, t1, EntrySeq(1)).is_ok(), "a current member reads the thread");
    w.ok(x, Action::Leave { thread: t1 });
    (g, x, [t1, t2, ThreadId(999)])
}

#[track_caller]
fn all_same(rs: &[Rejection]) -> Rejection {
    for r in rs {
        assert_eq!(r, &rs[0], "rejections differ: {rs:?}");
        assert!(!r.message.contains("SECRET"), "a rejection reveals content: {r}");
    }
    assert_eq!(rs[0].code, Code::NotFound);
    rs[0].clone()
}

/// §9, §12 (§9.2, §9.4, §12.5): a thread one left, a thread one never joined and no thread at all give identical NOT_FOUND rejections to every read.
#[test]
fn left_never_joined_and_nonexistent_threads_are_indistinguishable_to_reads() {
    let mut w = World::new();
    let (_g, x, threads) = left_never_ghost(&mut w);
    let by_read: [Vec<Rejection>; 4] = [
        threads
            .iter()
            .map(|t| read_rejection(read::working_set(&w.state, x, ObjectRef::Thread(*t), w.now, &w.limits)))
            .collect(),
        threads.iter().map(|t| read_rejection(read::timeline(&w.state, x, *t, None, 10, &w.limits))).collect(),
        threads.iter().map(|t| read_rejection(read::read_entry(&w.state, x, *t, EntrySeq(1)))).collect(),
        threads.iter().map(|t| read_rejection(read::read_response(&w.state, x, *t, EntrySeq(1), x))).collect(),
    ];
    for rs in &by_read {
        let r = all_same(rs);
        assert_eq!(r.next, NextStep::Stop);
    }
}

/// §9, §12 (§9.2, §12.5): the same three give identical NOT_FOUND rejections to actions, with no effect.
#[test]
fn left_never_joined_and_nonexistent_threads_are_indistinguishable_to_actions() {
    let mut w = World::new();
    let (_g, x, threads) = left_never_ghost(&mut w);
    type Make = fn(ThreadId) -> Action;
    let makers: [Make; 6] = [
        |t| post_action(t, "hello?", None, None),
        |t| Action::Leave { thread: t },
        |t| Action::Handle { thread: t, entry: EntrySeq(1), note: None },
        |t| Action::Retract { thread: t, entry: EntrySeq(1) },
        |t| Action::CloseThread { thread: t },
        |t| Action::VoidGrant { thread: t },
    ];
    for make in makers {
        let rs: Vec<Rejection> = threads.iter().map(|t| refused(&mut w, x, make(*t))).collect();
        all_same(&rs);
    }
    let rs: Vec<Rejection> = threads
        .iter()
        .map(|t| {
            let (grant, _) = w.new_grant(Role::Speaker);
            refused(&mut w, x, Action::IssueGrant { thread: *t, grant })
        })
        .collect();
    all_same(&rs);
}

/// §9, §12 (§9.4, §12.5): an assignment in a thread one left or never joined is indistinguishable from an assignment that does not exist.
#[test]
fn assignments_in_unreadable_threads_are_indistinguishable_from_none() {
    let mut w = World::new();
    let (g, x, [t1, t2, _]) = left_never_ghost(&mut w);
    let a1 = w.assign(g, t1, g, None, None);
    let a2 = w.assign(g, t2, g, None, None);
    let asgs = [a1, a2, AssignmentId(999)];
    all_same(&asgs.iter().map(|a| read_rejection(read::read_assignment(&w.state, x, *a))).collect::<Vec<_>>());
    all_same(&asgs.iter().map(|a| refused(&mut w, x, Action::TakeAssignment { assignment: *a })).collect::<Vec<_>>());
    all_same(&asgs.iter().map(|a| refused(&mut w, x, Action::VoidAssignment { assignment: *a })).collect::<Vec<_>>());
    all_same(&asgs.iter().map(|a| refused(&mut w, x, Action::AdoptAssignment { assignment: *a })).collect::<Vec<_>>());
}

/// §9, §12 (§9.7, §12.5): another agent's private Memory is indistinguishable from a Memory that does not exist, to reads and to actions.
#[test]
fn private_memory_is_indistinguishable_from_nonexistent_memory() {
    let mut w = World::new();
    let owner = w.register();
    let x = w.register();
    let m = create_memory(&mut w, owner, "SECRET-PRIVATE-NOTES");
    let xt = w.thread_with(x, &[]);
    let mems = [m, MemoryId(999)];
    all_same(&mems.iter().map(|m| read_rejection(read::read_memory(&w.state, x, *m, None))).collect::<Vec<_>>());
    all_same(
        &mems
            .iter()
            .map(|m| read_rejection(read::read_memory(&w.state, x, *m, Some(Version::FIRST))))
            .collect::<Vec<_>>(),
    );
    all_same(
        &mems
            .iter()
            .map(|m| read_rejection(read::working_set(&w.state, x, ObjectRef::Memory(*m), w.now, &w.limits)))
            .collect::<Vec<_>>(),
    );
    type Make = fn(MemoryId) -> Action;
    let makers: [Make; 4] = [
        |m| Action::UpdateMemory { memory: m, content: Content::from("overwrite") },
        |m| Action::PublishMemory { memory: m },
        |m| Action::UnpublishMemory { memory: m },
        |m| Action::WithdrawMemory { memory: m },
    ];
    for make in makers {
        all_same(&mems.iter().map(|m| refused(&mut w, x, make(*m))).collect::<Vec<_>>());
    }
    let pins: Vec<Rejection> = mems
        .iter()
        .map(|m| {
            let body = PostBody::Pin(Pin { memory: *m, version: Version::FIRST });
            refused(
                &mut w,
                x,
                Action::Post { thread: xt, body, reply_to: None, ask: None, task_ref: None, assignment: None },
            )
        })
        .collect();
    all_same(&pins);
    // The owner reads it, so the difference is the reader's right, not the object.
    assert_eq!(
        read::read_memory(&w.state, owner, m, None).expect("own memory").content,
        Content::from("SECRET-PRIVATE-NOTES")
    );
}

/// §12 (§12.5): rejections never echo content, neither the caller's own oversized or malformed content nor content it cannot read.
#[test]
fn rejections_never_echo_content() {
    let limits = Limits { max_content_bytes: 64, max_note_bytes: 40, ..Limits::default() };
    let mut w = World::with_limits(limits);
    let g = w.register();
    let s = w.register();
    let t = w.thread_with(g, &[(s, Role::Speaker)]);
    let e = w.post(g, t, "SECRET-QUESTION", None, None);
    let asg = match w.ok(g, assign_action(t, "SECRET-ASSIGN-POST", g, "SECRET-CRITERIA", None)) {
        ActionResult::Posted { assignment: Some(a), .. } => a,
        other => panic!("{other:?}"),
    };
    let mut rejections = vec![
        refused(&mut w, s, post_action(t, &format!("SECRET-TOO-LONG-{}", "x".repeat(100)), None, None)),
        refused(
            &mut w,
            s,
            Action::Handle { thread: t, entry: e, note: Some(Content::from("SECRET-NOTE\nsecond line")) },
        ),
        refused(
            &mut w,
            s,
            Action::Handle {
                thread: t,
                entry: e,
                note: Some(Content::from(format!("SECRET-NOTE-{}", "y".repeat(50)))),
            },
        ),
        refused(&mut w, s, Action::TakeAssignment { assignment: asg }),
        refused(&mut w, s, Action::DeliverAssignment { assignment: asg, output: Content::from("SECRET-OUTPUT") }),
        refused(&mut w, s, Action::RejectAssignment { assignment: asg, reason: Content::from("SECRET-REASON") }),
    ];
    w.ok(s, Action::Leave { thread: t });
    rejections.push(refused(&mut w, s, post_action(t, "SECRET-AFTER-LEAVING", Some(e), None)));
    let codes: Vec<Code> = rejections.iter().map(|r| r.code).collect();
    assert_eq!(
        codes,
        [
            Code::LimitExceeded,
            Code::InvalidArgument,
            Code::LimitExceeded,
            Code::NotAddressee,
            Code::NotTaker,
            Code::NotCreator,
            Code::NotFound
        ]
    );
    for r in &rejections {
        assert!(
            !r.message.contains("SECRET") && !r.field.as_deref().unwrap_or("").contains("SECRET"),
            "content echoed: {r}"
        );
    }
}

/// §9 (§9.3, §9.2): a former member loses the thread but still reads its own Memories, including the one its post created.
#[test]
fn former_member_still_reads_its_own_memories() {
    let mut w = World::new();
    let g = w.register();
    let x = w.register();
    let t = w.thread_with(g, &[(x, Role::Speaker)]);
    let (entry, pin) = match w.ok(x, post_action(t, "MY-OWN-NOTES", None, None)) {
        ActionResult::Posted { entry, pin, .. } => (entry, pin),
        other => panic!("{other:?}"),
    };
    let other = create_memory(&mut w, x, "MY-OTHER-MEMORY");
    w.ok(x, Action::Leave { thread: t });
    assert_eq!(read_rejection(read::read_entry(&w.state, x, t, entry)).code, Code::NotFound);
    let view = read::read_memory(&w.state, x, pin.memory, Some(pin.version)).expect("own memory after leaving");
    assert_eq!(view.content, Content::from("MY-OWN-NOTES"));
    assert_eq!(view.memory.author, x);
    assert_eq!(
        read::read_memory(&w.state, x, other, None).expect("own memory").content,
        Content::from("MY-OTHER-MEMORY")
    );
    let set = ws(&w, x, ObjectRef::Memory(pin.memory));
    assert!(
        matches!(set.summary, ObjectSummary::Memory { author, public: false, withdrawn: false, .. } if author == x)
    );
    assert!(set.available.contains(&ActionKind::UpdateMemory));
    // The remaining member still reads the entry (a pin of its author's own Memory, §5).
    assert_eq!(read::read_entry(&w.state, g, t, entry).expect("entry").content, Some(Content::from("MY-OWN-NOTES")));
}

// --- L2 Atomicity and rejections -----------------------------------------------------------------

/// L2 (L2.4): every rejection states a code, a message and the code's actionable next step, and is definite (it certainly had no effect).
#[test]
fn every_rejection_has_code_message_and_next_step() {
    let limits = Limits { max_subject_bytes: 8, ..Limits::default() };
    let mut w = World::with_limits(limits);
    let g = w.register();
    let s = w.register();
    let o = w.register();
    let t = w.thread_with(g, &[(s, Role::Speaker), (o, Role::Observer)]);
    let asg = w.assign(g, t, g, None, None);
    let m = create_memory(&mut w, g, "m");
    w.ok(g, Action::PublishMemory { memory: m });
    let task = open_task(&mut w, g);
    w.ok(g, Action::PauseTask { task });
    let k = w.fresh_key();
    assert!(exec_key(&mut w, g, Action::CreateMemory { content: Content::from("one") }, &k).outcome.is_ok());
    let before = w.state.clone();
    let reused = exec_key(&mut w, g, Action::CreateMemory { content: Content::from("two") }, &k)
        .outcome
        .expect_err("key reused");
    assert_same_state(&w.state, &before, "key reuse");
    let cases = vec![
        (refused(&mut w, o, post_action(t, "x", None, None)), Code::CannotSpeak, NextStep::Stop),
        (refused(&mut w, s, Action::CloseThread { thread: t }), Code::NotGovernor, NextStep::Stop),
        (refused(&mut w, g, Action::Leave { thread: t }), Code::SoleGovernor, NextStep::Retry),
        (refused(&mut w, s, Action::TakeAssignment { assignment: asg }), Code::NotAddressee, NextStep::Stop),
        (refused(&mut w, s, Action::Leave { thread: ThreadId(77) }), Code::NotFound, NextStep::Stop),
        (refused(&mut w, g, Action::PublishMemory { memory: m }), Code::NoEffect, NextStep::Done),
        (refused(&mut w, s, Action::TakeTask { task }), Code::TaskPaused, NextStep::Wait),
        (
            refused(&mut w, s, Action::CreateThread { subject: Content::from("far too long"), grant: None }),
            Code::LimitExceeded,
            NextStep::Revise,
        ),
        (refused(&mut w, s, post_action(t, "x", Some(EntrySeq(42)), None)), Code::InvalidArgument, NextStep::Revise),
        (
            refused(&mut w, s, Action::Handle { thread: t, entry: EntrySeq(1), note: None }),
            Code::NoPendingResponse,
            NextStep::Done,
        ),
        (reused, Code::IdempotencyKeyReused, NextStep::Revise),
    ];
    for (r, code, next) in cases {
        assert_eq!(r.code, code, "{r}");
        assert_eq!(r.next, next, "{r}");
        assert_eq!(r.next, r.code.next_step(), "{r}");
        assert!(r.definite, "{r}");
        assert!(!r.message.trim().is_empty(), "{r}");
        assert!(NextStep::ALL.contains(&r.next));
    }
}

/// L2 (L2.1, L2.2, L2.3): a post with new content and an invalid assignment is rejected as a whole: no Memory, no entry, no counter moves.
#[test]
fn rejected_post_with_invalid_assignment_leaves_no_trace() {
    let mut w = World::new();
    let g = w.register();
    let s = w.register();
    let o = w.register();
    let t = w.thread_with(g, &[(s, Role::Speaker), (o, Role::Observer)]);
    let counters_before = w.state.map.get(&keys::counters(GroupId::ZERO)).cloned();
    // The assignment step fails after the Memory and the entry were decided: addressed to an observer.
    let r = refused(&mut w, g, assign_action(t, "draft that must not survive", o, "criteria", None));
    assert_eq!(r.code, Code::InvalidTarget);
    assert_eq!(r.field.as_deref(), Some("assignment.addressee"));
    // ... and with a delivery window below the minimum.
    let r = refused(&mut w, g, assign_action(t, "draft that must not survive", s, "criteria", Some(Micros(1))));
    assert_eq!(r.code, Code::InvalidArgument);
    assert_eq!(r.field.as_deref(), Some("assignment.delivery_window"));
    assert_eq!(w.state.map.get(&keys::counters(GroupId::ZERO)).cloned(), counters_before);
    assert!(read::timeline(&w.state, g, t, None, 10, &w.limits).expect("timeline").is_empty());
    assert!(turn(&w, s).is_empty() && w.opportunity_ids(s).is_empty() && w.opportunity_ids(o).is_empty());
    // The same post with a valid addressee succeeds with entry 1 and Memory 1: nothing was consumed.
    match w.ok(g, assign_action(t, "draft", s, "criteria", None)) {
        ActionResult::Posted { entry, pin, assignment: Some(_), .. } => {
            assert_eq!(entry, EntrySeq(1));
            assert_eq!(pin.memory, MemoryId(1));
        }
        other => panic!("{other:?}"),
    }
}

/// L2 (L2.1, §7.3.2): a combined take-and-deliver whose delivery is invalid creates no engagement.
#[test]
fn rejected_take_and_deliver_creates_no_engagement() {
    let limits = Limits { max_content_bytes: 16, ..Limits::default() };
    let mut w = World::with_limits(limits);
    let author = w.register();
    let worker = w.register();
    let task = open_task(&mut w, author);
    let r = refused(&mut w, worker, Action::DeliverTask { task, output: Content::from("x".repeat(17)), take: true });
    assert_eq!(r.code, Code::LimitExceeded);
    assert!(turn(&w, worker).is_empty());
    match ws(&w, author, ObjectRef::Task(task)).summary {
        ObjectSummary::Task { open_engagements, .. } => assert_eq!(open_engagements, 0),
        other => panic!("{other:?}"),
    }
    // The combined action with a valid output engages and delivers, as engagement 1.
    assert_eq!(take_and_deliver_task(&mut w, worker, task), EngagementId(1));
}

/// L2 (L2.5, L2.6): joining again and taking a Task again are the only no-effect successes: they return the existing membership or engagement and record no fact.
#[test]
fn join_again_and_take_again_succeed_without_effect() {
    let mut w = World::new();
    let g = w.register();
    let x = w.register();
    let t = w.thread_with(g, &[]);
    let (grant, secret) = w.new_grant(Role::Speaker);
    w.ok(g, Action::IssueGrant { thread: t, grant });
    let joined_at = match w.ok(x, Action::Join { grant_hash: hash_secret(&secret) }) {
        ActionResult::Joined { joined_at, existing: false, .. } => joined_at,
        other => panic!("{other:?}"),
    };
    let before = without_receipts(&w.state);
    let k = w.fresh_key();
    let again = exec_key(&mut w, x, Action::Join { grant_hash: hash_secret(&secret) }, &k);
    let receipt = again.outcome.as_ref().expect("join again succeeds");
    assert_eq!(
        receipt.result,
        ActionResult::Joined { thread: t, agent: x, role: Role::Speaker, joined_at, existing: true }
    );
    assert_eq!(receipt.seq, None, "no fact recorded");
    assert!(again.facts.is_empty());
    assert_same_state(&without_receipts(&w.state), &before, "join again");

    let task = open_task(&mut w, g);
    let eng = take_task(&mut w, x, task);
    let before = without_receipts(&w.state);
    let again = w.exec(Principal::Agent(x), Action::TakeTask { task }, Some(key("take-again")));
    let receipt = again.outcome.as_ref().expect("take again succeeds");
    assert!(matches!(receipt.result, ActionResult::Engaged { engagement, existing: true, .. } if engagement == eng));
    assert_eq!(receipt.seq, None);
    assert!(again.facts.is_empty());
    assert_same_state(&without_receipts(&w.state), &before, "take again");
    assert_eq!(ids(&turn(&w, x)), [ObligationId::EngagementDelivery(eng)]);
}

/// L2 (L2.7): every other action that would change nothing is rejected with NO_EFFECT (next step `done`), not accepted silently.
#[test]
fn other_repeated_actions_are_rejected_with_no_effect() {
    let mut w = World::new();
    let g = w.register();
    let s = w.register();
    let s2 = w.register();
    let t = w.thread_with(g, &[(s, Role::Speaker), (s2, Role::Speaker)]);
    let m = create_memory(&mut w, g, "m");
    let m2 = create_memory(&mut w, g, "m2");
    w.ok(g, Action::PublishMemory { memory: m });
    w.ok(g, Action::VoidGrant { thread: t });
    let e = w.post(g, t, "broadcast", None, None);
    let task = open_task(&mut w, g);
    w.ok(g, Action::PauseTask { task });
    let task2 = open_task(&mut w, g);
    let attempts = [
        (g, Action::PublishMemory { memory: m }),
        (g, Action::UnpublishMemory { memory: m2 }),
        (g, Action::ChangeRole { thread: t, member: s, role: Role::Speaker }),
        (g, Action::VoidGrant { thread: t }),
        (g, Action::Retract { thread: t, entry: e }),
        (g, Action::PauseTask { task }),
        (g, Action::ResumeTask { task: task2 }),
    ];
    for (agent, action) in attempts {
        let kind = action.kind();
        let r = refused(&mut w, agent, action);
        assert_eq!(r.code, Code::NoEffect, "{}", kind.as_str());
        assert_eq!(r.next, NextStep::Done);
    }
    let k = w.fresh_key();
    assert!(w.exec(Principal::Operator, Action::DeactivateAgent { agent: s2 }, Some(k)).outcome.is_ok());
    let before = w.state.clone();
    let k = w.fresh_key();
    let again = w.exec(Principal::Operator, Action::DeactivateAgent { agent: s2 }, Some(k));
    assert_eq!(again.outcome.map(|_| ()).map_err(|r| r.code), Err(Code::NoEffect));
    assert_same_state(&w.state, &before, "deactivate again");
}

// --- L3 Replay -----------------------------------------------------------------------------------

/// L3 (L3.1, §10.2.3): the same request under the same key returns the original receipt byte for byte, marked replayed, with no facts and no changes.
#[test]
fn replayed_post_returns_original_receipt_byte_for_byte() {
    let mut w = World::new();
    let g = w.register();
    let s = w.register();
    let t = w.thread_with(g, &[(s, Role::Speaker)]);
    let k = key("post-1");
    let action = post_action(t, "hello", None, None);
    let first = exec_key(&mut w, g, action.clone(), &k);
    assert!(!first.replayed);
    let before = w.state.clone();
    let second = exec_key(&mut w, g, action, &k);
    assert!(second.replayed);
    assert_eq!(second.receipt_bytes(), first.receipt_bytes());
    assert!(second.receipt_bytes().is_some());
    assert!(second.facts.is_empty() && second.changes.is_empty());
    assert_same_state(&w.state, &before, "replay");
    // One entry, one response owed: the retry did not post twice.
    assert_eq!(read::timeline(&w.state, s, t, None, 10, &w.limits).expect("timeline").len(), 1);
    assert_eq!(turn(&w, s).len(), 1);
}

/// L3 (L3.3): a receipt does not drift: replaying the take after the assignment was delivered and adopted returns the original Taken receipt.
#[test]
fn replayed_take_after_delivery_returns_original_taken_receipt() {
    let mut w = World::new();
    let g = w.register();
    let s = w.register();
    let t = w.thread_with(g, &[(s, Role::Speaker)]);
    let asg = w.assign(g, t, s, None, None);
    let k = key("take-1");
    let first = exec_key(&mut w, s, Action::TakeAssignment { assignment: asg }, &k);
    let delivery_due = match first.outcome.as_ref().map(|r| &r.result) {
        Ok(ActionResult::AssignmentTaken { delivery_due, .. }) => *delivery_due,
        other => panic!("{other:?}"),
    };
    w.ok(s, Action::DeliverAssignment { assignment: asg, output: Content::from("out") });
    w.ok(g, Action::AdoptAssignment { assignment: asg });
    let replay = exec_key(&mut w, s, Action::TakeAssignment { assignment: asg }, &k);
    assert!(replay.replayed);
    assert_eq!(replay.receipt_bytes(), first.receipt_bytes());
    assert_eq!(
        replay.outcome.as_ref().map(|r| r.result.clone()).ok(),
        Some(ActionResult::AssignmentTaken { assignment: asg, delivery_due })
    );
    // What is true now is a different thing, read from the working set and records.
    let now = read::read_assignment(&w.state, s, asg).expect("assignment");
    assert!(matches!(now.state, AssignmentState::Ended { outcome: AssignmentOutcome::Adopted, .. }));
    // A new request (a new key) is judged against the present.
    assert_eq!(refused(&mut w, s, Action::TakeAssignment { assignment: asg }).code, Code::InvalidState);
}

/// L3 (L3.2): a different request under a used key is rejected with IDEMPOTENCY_KEY_REUSED and has no effect.
#[test]
fn different_request_under_same_key_is_rejected_without_effect() {
    let mut w = World::new();
    let g = w.register();
    let t = w.thread_with(g, &[]);
    let k = key("same-key");
    assert!(exec_key(&mut w, g, post_action(t, "one", None, None), &k).outcome.is_ok());
    let before = w.state.clone();
    let other = exec_key(&mut w, g, post_action(t, "two", None, None), &k);
    let r = other.outcome.expect_err("a different request under the same key");
    assert_eq!(r.code, Code::IdempotencyKeyReused);
    assert_eq!(r.field.as_deref(), Some("idempotency_key"));
    assert_eq!(r.next, NextStep::Revise);
    assert!(!other.replayed && other.facts.is_empty() && other.changes.is_empty());
    assert_same_state(&w.state, &before, "key reuse");
    assert_eq!(read::timeline(&w.state, g, t, None, 10, &w.limits).expect("timeline").len(), 1);
}

/// L3 (L3.1): keys are scoped per (agent, action kind): the same key by another agent, or for another action kind, is a new request.
#[test]
fn idempotency_keys_are_scoped_per_agent_and_action_kind() {
    let mut w = World::new();
    let g = w.register();
    let s = w.register();
    let t = w.thread_with(g, &[(s, Role::Speaker)]);
    let k = key("shared");
    let first = exec_key(&mut w, g, post_action(t, "by g", None, None), &k);
    assert!(first.outcome.is_ok());
    let by_other = exec_key(&mut w, s, post_action(t, "by s", None, None), &k);
    assert!(!by_other.replayed);
    assert!(matches!(
        by_other.outcome.as_ref().map(|r| &r.result),
        Ok(ActionResult::Posted { entry: EntrySeq(2), .. })
    ));
    let other_kind = exec_key(&mut w, g, Action::CreateMemory { content: Content::from("note") }, &k);
    assert!(!other_kind.replayed);
    assert!(matches!(other_kind.outcome.as_ref().map(|r| &r.result), Ok(ActionResult::MemoryCreated { .. })));
    // The key is still bound for g's posts: the original replays, a new post is refused.
    let replay = exec_key(&mut w, g, post_action(t, "by g", None, None), &k);
    assert!(replay.replayed);
    assert_eq!(replay.receipt_bytes(), first.receipt_bytes());
    let reused = exec_key(&mut w, g, post_action(t, "by g, again", None, None), &k);
    assert_eq!(reused.outcome.map(|_| ()).map_err(|r| r.code), Err(Code::IdempotencyKeyReused));
}

/// L3 (L3.5, §6.1.6, §12.2): replaying an IssueGrant returns the first receipt (the first fingerprint) and mints nothing; the receipt never holds the secret or its hash.
#[test]
fn replayed_grant_returns_first_fingerprint_and_mints_nothing() {
    let mut w = World::new();
    let g = w.register();
    let x = w.register();
    let t = w.thread_with(g, &[]);
    let (grant1, secret1) = w.new_grant(Role::Speaker);
    let fp1 = grant1.fingerprint.clone();
    let k = key("grant-1");
    let first = exec_key(&mut w, g, Action::IssueGrant { thread: t, grant: grant1 }, &k);
    match first.outcome.as_ref().map(|r| &r.result) {
        Ok(ActionResult::GrantIssued { grant, .. }) => assert_eq!(grant.fingerprint, fp1),
        other => panic!("{other:?}"),
    }
    // A retry generates a fresh secret but is the same logical request.
    let (grant2, secret2) = w.new_grant(Role::Speaker);
    assert_ne!(grant2.fingerprint, fp1);
    let before = w.state.clone();
    let replay = exec_key(&mut w, g, Action::IssueGrant { thread: t, grant: grant2 }, &k);
    assert!(replay.replayed);
    assert_eq!(replay.receipt_bytes(), first.receipt_bytes());
    assert_same_state(&w.state, &before, "grant replay");
    // A different role under the key is a different request.
    let (grant3, _) = w.new_grant(Role::Observer);
    let r = exec_key(&mut w, g, Action::IssueGrant { thread: t, grant: grant3 }, &k).outcome.expect_err("role differs");
    assert_eq!(r.code, Code::IdempotencyKeyReused);
    let bytes = first.receipt_bytes().expect("receipt");
    for s in [&secret1, &secret2] {
        assert!(!contains(&bytes, s.as_bytes()), "the receipt holds a secret");
        assert!(!contains(&bytes, &hash_secret(s).0), "the receipt holds a secret's hash");
    }
    // Only the first secret admits.
    assert_eq!(refused(&mut w, x, Action::Join { grant_hash: hash_secret(&secret2) }).code, Code::GrantInvalid);
    assert!(matches!(
        w.ok(x, Action::Join { grant_hash: hash_secret(&secret1) }),
        ActionResult::Joined { existing: false, .. }
    ));
}

/// L3 (L3.5, §12.3): registration and thread creation with a grant replay to the first agent or thread, and their receipts never hold a key, a grant secret or a hash of either.
#[test]
fn replayed_registration_and_thread_creation_disclose_no_secret() {
    let mut w = World::new();
    let k = key("register-1");
    let (sec1, sec2) = (w.fresh_secret(), w.fresh_secret());
    let reg = |s: &str| Action::RegisterAgent { key_hash: hash_secret(s), key_fingerprint: fingerprint(s) };
    let first = w.exec(Principal::Registrar, reg(&sec1), Some(k.clone()));
    let agent = match first.outcome.as_ref().map(|r| &r.result) {
        Ok(ActionResult::AgentRegistered { agent, key_fingerprint }) => {
            assert_eq!(*key_fingerprint, fingerprint(&sec1));
            *agent
        }
        other => panic!("{other:?}"),
    };
    let before = w.state.clone();
    let replay = w.exec(Principal::Registrar, reg(&sec2), Some(k));
    assert!(replay.replayed);
    assert_eq!(replay.receipt_bytes(), first.receipt_bytes());
    assert_same_state(&w.state, &before, "registration replay");
    assert_eq!(w.state.agent_by_key(&hash_secret(&sec2)).expect("read"), None);
    assert_eq!(w.state.agent_by_key(&hash_secret(&sec1)).expect("read"), Some(agent));

    let tk = key("thread-1");
    let (g1, gs1) = w.new_grant(Role::Observer);
    let (g2, gs2) = w.new_grant(Role::Observer);
    let created = exec_key(&mut w, agent, Action::CreateThread { subject: Content::from("s"), grant: Some(g1) }, &tk);
    let before = w.state.clone();
    let again = exec_key(&mut w, agent, Action::CreateThread { subject: Content::from("s"), grant: Some(g2) }, &tk);
    assert!(again.replayed);
    assert_eq!(again.receipt_bytes(), created.receipt_bytes());
    assert_same_state(&w.state, &before, "create thread replay");
    for (bytes, secrets) in [(first.receipt_bytes(), [&sec1, &sec2]), (created.receipt_bytes(), [&gs1, &gs2])] {
        let bytes = bytes.expect("receipt");
        for s in secrets {
            assert!(!contains(&bytes, s.as_bytes()) && !contains(&bytes, &hash_secret(s).0));
        }
    }
}

/// L3 (L3.1, L2.3): a rejected request stores nothing, so after fixing the precondition the same request under the same key takes effect.
#[test]
fn rejected_request_stores_nothing_so_its_key_works_after_fixing() {
    let mut w = World::new();
    let g = w.register();
    let o = w.register();
    let t = w.thread_with(g, &[(o, Role::Observer)]);
    let k = key("post-when-allowed");
    let action = post_action(t, "finally", None, None);
    let before = w.state.clone();
    let refused_once = exec_key(&mut w, o, action.clone(), &k);
    assert_eq!(refused_once.outcome.as_ref().map(|_| ()).map_err(|r| r.code), Err(Code::CannotSpeak));
    assert!(refused_once.changes.is_empty());
    assert_same_state(&w.state, &before, "rejected request");
    w.ok(g, Action::ChangeRole { thread: t, member: o, role: Role::Speaker });
    let accepted = exec_key(&mut w, o, action.clone(), &k);
    assert!(!accepted.replayed);
    assert!(matches!(
        accepted.outcome.as_ref().map(|r| &r.result),
        Ok(ActionResult::Posted { entry: EntrySeq(1), .. })
    ));
    let replay = exec_key(&mut w, o, action, &k);
    assert!(replay.replayed);
    assert_eq!(replay.receipt_bytes(), accepted.receipt_bytes());
}

/// L3, §12 (L3.4, §12.7): receipts hold only protocol facts: no posted text, criteria, output, note, reason or contract text appears in their bytes, as returned or as stored.
#[test]
fn receipts_contain_no_content() {
    let mut w = World::new();
    let g = w.register();
    let s = w.register();
    let mut receipts = Vec::new();
    let mut run = |w: &mut World, agent: AgentId, action: Action| -> ActionResult {
        let k = w.fresh_key();
        let applied = w.exec(Principal::Agent(agent), action, Some(k));
        receipts.push(applied.receipt_bytes().expect("success"));
        applied.outcome.expect("success").result
    };
    let m = match run(&mut w, g, Action::CreateMemory { content: Content::from("RCPT-MEMORY") }) {
        ActionResult::MemoryCreated { memory, .. } => memory,
        other => panic!("{other:?}"),
    };
    run(&mut w, g, Action::UpdateMemory { memory: m, content: Content::from("RCPT-UPDATE") });
    let t = match run(&mut w, g, Action::CreateThread { subject: Content::from("RCPT-SUBJECT"), grant: None }) {
        ActionResult::ThreadCreated { thread, .. } => thread,
        other => panic!("{other:?}"),
    };
    let (grant, secret) = w.new_grant(Role::Speaker);
    run(&mut w, g, Action::IssueGrant { thread: t, grant });
    run(&mut w, s, Action::Join { grant_hash: hash_secret(&secret) });
    let mut asg_action = assign_action(t, "RCPT-POST", s, "RCPT-CRITERIA", None);
    if let Action::Post { assignment: Some(a), .. } = &mut asg_action {
        a.output_structure = Some(Content::from("RCPT-STRUCTURE"));
    }
    let (asg, entry) = match run(&mut w, g, asg_action) {
        ActionResult::Posted { assignment: Some(a), entry, .. } => (a, entry),
        other => panic!("{other:?}"),
    };
    let reply = match run(&mut w, s, post_action(t, "RCPT-REPLY", Some(entry), None)) {
        ActionResult::Posted { entry, .. } => entry,
        other => panic!("{other:?}"),
    };
    run(&mut w, g, Action::Handle { thread: t, entry: reply, note: Some(Content::from("RCPT-NOTE")) });
    run(&mut w, s, Action::TakeAssignment { assignment: asg });
    run(&mut w, s, Action::DeliverAssignment { assignment: asg, output: Content::from("RCPT-OUTPUT") });
    run(&mut w, g, Action::RejectAssignment { assignment: asg, reason: Content::from("RCPT-REASON") });
    let mut draft = ContractDraft::simple("RCPT-REQUIREMENTS", "RCPT-ACCEPTANCE");
    draft.references = Some(Content::from("RCPT-REFERENCES"));
    let task = match run(&mut w, g, Action::CreateTask { audience: Audience::Open, contract: draft }) {
        ActionResult::TaskCreated { task, .. } => task,
        other => panic!("{other:?}"),
    };
    let eng = match run(&mut w, s, Action::DeliverTask { task, output: Content::from("RCPT-TASK-OUTPUT"), take: true })
    {
        ActionResult::EngagementDelivered { engagement, .. } => engagement,
        other => panic!("{other:?}"),
    };
    run(&mut w, g, Action::RejectEngagement { engagement: eng, reason: Content::from("RCPT-TASK-REASON") });
    assert_eq!(receipts.len(), 14);
    for bytes in &receipts {
        assert!(!contains(bytes, b"RCPT-"), "a receipt carries content");
    }
    let stored: Vec<Vec<u8>> = w
        .state
        .map
        .values()
        .filter_map(|r| if let state::Record::Receipt(sr) = r { Some(codec::encode(sr)) } else { None })
        .collect();
    assert!(stored.len() >= 14);
    assert!(stored.iter().all(|b| !contains(b, b"RCPT-")), "a stored receipt carries content");
}

// --- L4 Limits -----------------------------------------------------------------------------------

/// L4 (L4.5, §8.12): every paginated read clamps its page size to `max_page_size`; a size of 0 takes the default.
#[test]
fn page_sizes_are_clamped_to_max_page_size() {
    let limits = Limits { max_page_size: 4, default_page_size: 2, ..Limits::default() };
    let mut w = World::with_limits(limits);
    let me = w.register();
    let g = w.register();
    let t = w.thread_with(g, &[(me, Role::Speaker)]);
    for i in 0..7 {
        w.post(g, t, &format!("p{i}"), None, None);
        w.assign(g, t, me, None, None);
    }
    let page = read::turn(&w.state, me, None, 1000, w.now, &w.limits).expect("turn");
    assert_eq!(page.items.len(), 4);
    assert!(page.next_cursor.is_some());
    assert_eq!(read::turn(&w.state, me, None, 0, w.now, &w.limits).expect("turn").items.len(), 2);
    assert_eq!(read::turn(&w.state, me, None, 3, w.now, &w.limits).expect("turn").items.len(), 3);
    let opp = read::opportunities(&w.state, me, None, usize::MAX, &w.limits).expect("opportunities");
    assert_eq!(opp.items.len(), 4);
    assert!(opp.next_cursor.is_some());
    assert_eq!(read::opportunities(&w.state, me, None, 0, &w.limits).expect("opportunities").items.len(), 2);
    assert_eq!(read::timeline(&w.state, me, t, None, 1000, &w.limits).expect("timeline").len(), 4);
    assert_eq!(read::timeline(&w.state, me, t, None, 0, &w.limits).expect("timeline").len(), 2);
    // Clamping bounds each page, not what a traversal finds.
    assert_eq!(w.full_turn(me).len(), 7);
}

/// L4 (L4.6): past the open-assignment capacity of a thread, a post with an assignment is LIMIT_EXCEEDED and creates no entry, assignment, obligation or opportunity.
#[test]
fn exceeding_open_assignment_capacity_is_rejected_without_effect() {
    let limits = Limits { max_open_assignments_per_thread: 2, ..Limits::default() };
    let mut w = World::with_limits(limits);
    let g = w.register();
    let s = w.register();
    let t = w.thread_with(g, &[(s, Role::Speaker)]);
    let a1 = w.assign(g, t, s, None, None);
    w.assign(g, t, s, None, None);
    let r = refused(&mut w, g, assign_action(t, "third", s, "criteria", None));
    assert_eq!(r.code, Code::LimitExceeded);
    assert_eq!(r.next, NextStep::Revise);
    assert_eq!(w.opportunity_ids(s).len(), 2);
    assert!(turn(&w, s).is_empty());
    // Capacity, not a rate: ending one frees a place.
    w.ok(g, Action::VoidAssignment { assignment: a1 });
    w.ok(g, assign_action(t, "third", s, "criteria", None));
    assert_eq!(w.opportunity_ids(s).len(), 2);
}

/// L4 (L4.6): past the Memory capacity, a post with new content is LIMIT_EXCEEDED and creates neither the Memory nor the entry; posting an existing pin still works.
#[test]
fn exceeding_memory_capacity_rejects_post_with_content_without_effect() {
    let limits = Limits { max_memories_per_agent: 2, ..Limits::default() };
    let mut w = World::with_limits(limits);
    let g = w.register();
    let s = w.register();
    let t = w.thread_with(g, &[(s, Role::Speaker)]);
    let pin = match w.ok(g, post_action(t, "one", None, None)) {
        ActionResult::Posted { pin, .. } => pin,
        other => panic!("{other:?}"),
    };
    w.post(g, t, "two", None, None);
    let r = refused(&mut w, g, post_action(t, "three", None, None));
    assert_eq!(r.code, Code::LimitExceeded);
    assert_eq!(refused(&mut w, g, Action::CreateMemory { content: Content::from("four") }).code, Code::LimitExceeded);
    assert_eq!(read::timeline(&w.state, g, t, None, 10, &w.limits).expect("timeline").len(), 2);
    assert_eq!(turn(&w, s).len(), 2);
    let body = PostBody::Pin(pin);
    match w.ok(g, Action::Post { thread: t, body, reply_to: None, ask: None, task_ref: None, assignment: None }) {
        ActionResult::Posted { entry, pin: p, .. } => {
            assert_eq!(entry, EntrySeq(3));
            assert_eq!(p, pin);
        }
        other => panic!("{other:?}"),
    }
}

/// L4 (L4.6): past the member capacity, a join is LIMIT_EXCEEDED and creates no membership; the grant stays usable once a place is free.
#[test]
fn exceeding_member_capacity_rejects_join_without_effect() {
    let limits = Limits { max_members_per_thread: 2, ..Limits::default() };
    let mut w = World::with_limits(limits);
    let g = w.register();
    let x = w.register();
    let y = w.register();
    let t = w.thread_with(g, &[(x, Role::Speaker)]);
    let (grant, secret) = w.new_grant(Role::Speaker);
    w.ok(g, Action::IssueGrant { thread: t, grant });
    let r = refused(&mut w, y, Action::Join { grant_hash: hash_secret(&secret) });
    assert_eq!(r.code, Code::LimitExceeded);
    assert_eq!(
        read_rejection(read::working_set(&w.state, y, ObjectRef::Thread(t), w.now, &w.limits)).code,
        Code::NotFound
    );
    w.ok(x, Action::Leave { thread: t });
    assert!(matches!(
        w.ok(y, Action::Join { grant_hash: hash_secret(&secret) }),
        ActionResult::Joined { existing: false, .. }
    ));
}

// --- L5 Concurrency ------------------------------------------------------------------------------

/// Two commands decided against the same pre-state: each alone would succeed (or fail) as given.
fn both_against(w: &World, c1: &Command, c2: &Command) -> (bool, bool) {
    let a1 = apply(&w.state, c1, &w.limits).expect("apply");
    let a2 = apply(&w.state, c2, &w.limits).expect("apply");
    (a1.outcome.is_ok(), a2.outcome.is_ok())
}

fn count_facts(w: &World, pred: impl Fn(&Fact) -> bool) -> usize {
    all_facts(&w.state).expect("facts").iter().filter(|f| pred(&f.fact)).count()
}

/// L5 (L5.1, L5.2, §6.4.8): two takes of one assignment racing from the same pre-state: the first committed wins, the second gets INVALID_STATE; a non-addressee loses either way.
#[test]
fn racing_takes_of_one_assignment_first_wins_second_is_invalid_state() {
    let mut w = World::new();
    let g = w.register();
    let s = w.register();
    let other = w.register();
    let t = w.thread_with(g, &[(s, Role::Speaker), (other, Role::Speaker)]);
    let asg = w.assign(g, t, s, None, None);
    let take = Action::TakeAssignment { assignment: asg };
    // The addressee's two sessions (different keys) and another member, all from one pre-state.
    let c1 = Command::new(Principal::Agent(s), take.clone(), Some(key("session-a")), w.now.plus(Micros(1)));
    let c2 = Command::new(Principal::Agent(s), take.clone(), Some(key("session-b")), w.now.plus(Micros(2)));
    let c3 = Command::new(Principal::Agent(other), take, Some(key("intruder")), w.now.plus(Micros(3)));
    assert_eq!(both_against(&w, &c1, &c2), (true, true), "each take alone is legal");
    assert_eq!(
        apply(&w.state, &c3, &w.limits).expect("apply").outcome.map(|_| ()).map_err(|r| r.code),
        Err(Code::NotAddressee)
    );
    let first = w.exec_cmd(&c1);
    assert!(matches!(first.outcome.as_ref().map(|r| &r.result), Ok(ActionResult::AssignmentTaken { .. })));
    let second = w.exec_cmd(&c2);
    assert_eq!(second.outcome.map(|_| ()).map_err(|r| r.code), Err(Code::InvalidState));
    let third = w.exec_cmd(&c3);
    assert_eq!(third.outcome.map(|_| ()).map_err(|r| r.code), Err(Code::NotAddressee));
    w.now = c3.ts;
    assert_eq!(count_facts(&w, |f| matches!(f, Fact::AssignmentTaken { assignment, .. } if *assignment == asg)), 1);
    assert_eq!(ids(&turn(&w, s)), [ObligationId::AssignmentDelivery(asg)]);
    assert!(turn(&w, other).is_empty());
}

/// L5 (L5.1, L5.3): a delivery racing a void ends the assignment once, in either order: the loser gets INVALID_STATE.
#[test]
fn racing_delivery_and_void_end_the_assignment_once_in_either_order() {
    let mut w = World::new();
    let g = w.register();
    let s = w.register();
    let t = w.thread_with(g, &[(s, Role::Speaker)]);
    let x = w.assign(g, t, s, None, None);
    let y = w.assign(g, t, s, None, None);
    w.ok(s, Action::TakeAssignment { assignment: x });
    w.ok(s, Action::TakeAssignment { assignment: y });
    for (asg, deliver_first) in [(x, true), (y, false)] {
        let deliver = Command::new(
            Principal::Agent(s),
            Action::DeliverAssignment { assignment: asg, output: Content::from("out") },
            Some(key(&format!("deliver-{}", asg.0))),
            w.now.plus(Micros(1)),
        );
        let void = Command::new(
            Principal::Agent(g),
            Action::VoidAssignment { assignment: asg },
            Some(key(&format!("void-{}", asg.0))),
            w.now.plus(Micros(2)),
        );
        assert_eq!(both_against(&w, &deliver, &void), (true, true));
        let (winner, loser) = if deliver_first { (&deliver, &void) } else { (&void, &deliver) };
        let winner = Command { ts: w.now.plus(Micros(1)), ..winner.clone() };
        let loser = Command { ts: w.now.plus(Micros(2)), ..loser.clone() };
        assert!(w.exec_cmd(&winner).outcome.is_ok());
        assert_eq!(w.exec_cmd(&loser).outcome.map(|_| ()).map_err(|r| r.code), Err(Code::InvalidState));
        w.now = loser.ts;
        let ends = count_facts(&w, |f| match f {
            Fact::AssignmentDelivered { assignment, .. } | Fact::AssignmentVoided { assignment, .. } => {
                *assignment == asg
            }
            _ => false,
        });
        assert_eq!(ends, 1, "the delivery obligation of {asg} ended more than once");
    }
    let x_state = read::read_assignment(&w.state, g, x).expect("x").state;
    let y_state = read::read_assignment(&w.state, g, y).expect("y").state;
    assert!(matches!(x_state, AssignmentState::Delivered { .. }));
    assert!(matches!(y_state, AssignmentState::Ended { outcome: AssignmentOutcome::Voided, .. }));
    assert_eq!(ids(&turn(&w, g)), [ObligationId::AssignmentJudgment(x)]);
    assert!(turn(&w, s).is_empty());
}

/// L5, L4 (L5.2, L4.3): a due obligation ends exactly once however often expiry is proposed or a late action arrives.
#[test]
fn repeated_expiry_and_late_actions_end_an_obligation_once() {
    let mut w = World::new();
    let g = w.register();
    let s = w.register();
    let t = w.thread_with(g, &[(s, Role::Speaker)]);
    let a = w.assign(g, t, s, Some(Micros::from_secs(5)), None);
    let b = w.assign(g, t, s, Some(Micros::from_secs(5)), None);
    w.ok(s, Action::TakeAssignment { assignment: a });
    w.ok(s, Action::TakeAssignment { assignment: b });
    w.advance(Micros::from_secs(6));
    // A late delivery of `a` first: the deadline wins and is recorded (ending `b` too, same thread).
    let late = w.exec(
        Principal::Agent(s),
        Action::DeliverAssignment { assignment: a, output: Content::from("late") },
        Some(key("late")),
    );
    assert_eq!(late.outcome.as_ref().map(|_| ()).map_err(|r| r.code), Err(Code::DeadlinePassed));
    assert_eq!(late.facts.len(), 2);
    assert!(w.fire_due_timers().is_empty(), "the timers find nothing left to end");
    let before = w.state.clone();
    for id in [ObligationId::AssignmentDelivery(a), ObligationId::AssignmentDelivery(b)] {
        let expire = w.exec(Principal::System, Action::Expire { obligation: id, due_at: w.now }, None);
        assert!(expire.facts.is_empty());
        if let Ok(r) = &expire.outcome {
            assert_eq!(r.result, ActionResult::Expired { ended: vec![] });
        }
    }
    assert_same_state(&w.state, &before, "repeated expiry");
    // Later still: the same answer as the first late delivery, though the deadline is long settled.
    let again = w.err(s, Action::DeliverAssignment { assignment: a, output: Content::from("later") });
    assert_eq!(again.code, Code::DeadlinePassed);
    for asg in [a, b] {
        let n = count_facts(
            &w,
            |f| matches!(f, Fact::DeadlinePassed { obligation: ObligationId::AssignmentDelivery(x), .. } if *x == asg),
        );
        assert_eq!(n, 1, "{asg} expired {n} times");
    }
    assert!(turn(&w, s).is_empty());
}

/// L5, §7.4 (L5.1, §7.4.2, §10.2.4): two adoptions racing against a limit of one: the first committed counts, the second is refused and leaves its judgment open.
#[test]
fn racing_adoptions_never_overrun_the_adoption_limit() {
    let mut w = World::new();
    let author = w.register();
    let b = w.register();
    let c = w.register();
    let mut draft = ContractDraft::simple("r", "a");
    draft.max_adoptions = Some(1);
    let task = create_task(&mut w, author, Audience::Open, draft);
    let eb = take_and_deliver_task(&mut w, b, task);
    let ec = take_and_deliver_task(&mut w, c, task);
    let c1 = Command::new(
        Principal::Agent(author),
        Action::AdoptEngagement { engagement: eb },
        Some(key("adopt-b")),
        w.now.plus(Micros(1)),
    );
    let c2 = Command::new(
        Principal::Agent(author),
        Action::AdoptEngagement { engagement: ec },
        Some(key("adopt-c")),
        w.now.plus(Micros(2)),
    );
    assert_eq!(both_against(&w, &c1, &c2), (true, true));
    assert!(w.exec_cmd(&c1).outcome.is_ok());
    assert_eq!(w.exec_cmd(&c2).outcome.map(|_| ()).map_err(|r| r.code), Err(Code::AdoptionLimitReached));
    w.now = c2.ts;
    match ws(&w, author, ObjectRef::Task(task)).summary {
        ObjectSummary::Task { adopted, .. } => assert_eq!(adopted, 1),
        other => panic!("{other:?}"),
    }
    assert_eq!(ids(&turn(&w, author)), [ObligationId::EngagementJudgment(ec)]);
    let e = read::read_engagement(&w.state, c, ec).expect("engagement");
    assert!(matches!(e.state, EngagementState::Delivered { .. }));
    w.ok(author, Action::RejectEngagement { engagement: ec, reason: Content::from("limit reached") });
    assert!(turn(&w, author).is_empty());
}

/// §8.10 (turn.proto: the cursor is empty when the traversal is complete): the page that reaches
/// the end of the turn or of the opportunities names no cursor, full or not, so a traversal costs
/// no extra call; a page short of the end names where to continue.
#[test]
fn a_full_page_that_ends_the_traversal_names_no_cursor() {
    let mut w = World::new();
    let me = w.register();
    let g = w.register();
    let t = w.thread_with(g, &[(me, Role::Speaker)]);
    for i in 0..4 {
        w.post(g, t, &format!("q{i}"), None, Some(&[me][..]));
        w.assign(g, t, me, None, None);
    }
    let whole = read::turn(&w.state, me, None, 4, w.now, &w.limits).expect("turn");
    assert_eq!((whole.items.len(), whole.next_cursor), (4, None));
    let first = read::turn(&w.state, me, None, 2, w.now, &w.limits).expect("turn");
    assert_eq!(first.items.len(), 2);
    let rest = read::turn(&w.state, me, first.next_cursor.as_ref(), 2, w.now, &w.limits).expect("turn");
    assert_eq!((rest.items.len(), rest.next_cursor), (2, None));
    let whole = read::opportunities(&w.state, me, None, 4, &w.limits).expect("opportunities");
    assert_eq!((whole.items.len(), whole.next_cursor), (4, None));
    let first = read::opportunities(&w.state, me, None, 3, &w.limits).expect("opportunities");
    assert_eq!(first.items.len(), 3);
    let rest = read::opportunities(&w.state, me, first.next_cursor.as_ref(), 3, &w.limits).expect("opportunities");
    assert_eq!((rest.items.len(), rest.next_cursor), (1, None));
}
