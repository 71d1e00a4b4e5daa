//! Collectives over a group (design §4): scatter as one atomic action, gather over the ranks'
//! assignments, and the barrier over an entry's responders, with fak's collective table (design
//! Appendix A.3) as vectors. Every step also runs the world's invariant and rebuild checks (L1,
//! design §8.3); these tests assert the specific behaviour, and that a refusal records nothing.

use kungfu_core::action::{Addressees, LabeledBody, RankGoal};
use kungfu_core::coord::read::{BarrierArrival, BarrierState, BarrierView, CollectiveView, barrier, collective};
use kungfu_core::model::{
    AssignmentOutcome, AssignmentState, Collective, ObligationId, OpportunityId, Pin, ScatterRank,
};
use kungfu_core::read::{self, ReadError, ReadResult};
use kungfu_core::state::StateExt;
use kungfu_core::testkit::World;
use kungfu_core::{Action, ActionResult, Limits, Principal, Record, keys};
use kungfu_types::{
    AgentId, AssignmentId, Code, Content, EntrySeq, FakReason, Labels, NextStep, Rejection, Role, Scope, Taint,
    ThreadId,
};
use std::collections::BTreeSet;

// --- helpers ----------------------------------------------------------------------------------------

fn labels(taint: Taint, scope: Scope) -> Labels {
    Labels::new(taint, scope)
}

fn fleet(text: &str) -> LabeledBody {
    LabeledBody::Content { content: Content::from(text), labels: labels(Taint::Tainted, Scope::Fleet) }
}

fn goal_text(member: AgentId) -> String {
    format!("goal for {member}")
}

/// One goal per member, each body naming its member, in the order given.
fn goals(members: &[AgentId]) -> Vec<(AgentId, LabeledBody)> {
    members.iter().map(|m| (*m, fleet(&goal_text(*m)))).collect()
}

fn scatter_action(thread: ThreadId, goals: Vec<(AgentId, LabeledBody)>) -> Action {
    Action::Scatter {
        thread,
        header: fleet("header"),
        goals: goals.into_iter().map(|(member, body)| RankGoal { member, body }).collect(),
        criteria: Content::from("criteria"),
        output_structure: None,
        delivery_window: None,
        judgment_window: None,
    }
}

fn pinned_text(w: &World, pin: Pin) -> Content {
    w.state.memory_version(pin.memory, pin.version).expect("state").expect("version").content
}

fn entry_pin(w: &World, thread: ThreadId, seq: EntrySeq) -> Pin {
    w.state.entry(thread, seq).expect("state").expect("entry").pin
}

fn obligation_count(w: &World) -> usize {
    w.state.map.values().filter(|r| matches!(r, Record::Obligation(_))).count()
}

fn gather(w: &World, reader: AgentId, thread: ThreadId, header: EntrySeq, outputs: bool) -> CollectiveView {
    collective(&w.state, reader, thread, header, outputs).expect("a member gathers")
}

fn barrier_of(w: &World, reader: AgentId, thread: ThreadId, entry: EntrySeq) -> BarrierView {
    barrier(&w.state, reader, thread, entry).expect("a member reads the barrier")
}

fn arrivals(v: &BarrierView) -> Vec<(AgentId, BarrierArrival)> {
    v.ranks.iter().map(|r| (r.member, r.arrival)).collect()
}

fn read_rejection<T: std::fmt::Debug>(r: ReadResult<T>) -> Rejection {
    match r {
        Err(ReadError::Rejected(r)) => r,
        other => panic!("expected a rejected read, got {other:?}"),
    }
}

fn take_and_deliver(w: &mut World, member: AgentId, assignment: AssignmentId, output: Content) {
    w.ok(member, Action::TakeAssignment { assignment });
    w.ok(member, Action::DeliverAssignment { assignment, output });
}

/// A governor `g`, speakers `a`, `b`, `c` (ids ascending in that order) and an observer `o`.
struct Group {
    w: World,
    g: AgentId,
    a: AgentId,
    b: AgentId,
    c: AgentId,
    o: AgentId,
    t: ThreadId,
}

fn group_with(limits: Limits) -> Group {
    let mut w = World::with_limits(limits);
    let g = w.register();
    let a = w.register();
    let b = w.register();
    let c = w.register();
    let o = w.register();
    let t = w.thread_with(g, &[(a, Role::Speaker), (b, Role::Speaker), (c, Role::Speaker), (o, Role::Observer)]);
    assert!(g < a && a < b && b < c, "ids ascend in registration order");
    Group { w, g, a, b, c, o, t }
}

fn group() -> Group {
    group_with(Limits::default())
}

// --- scatter (design §4.3, §4.4) --------------------------------------------------------------------

#[test]
fn scatter_creates_one_assignment_per_rank_in_one_action() {
    let Group { mut w, g, a, b, t, .. } = group();
    let key = w.fresh_key();
    // The caller may be one of the ranks (an assignment may be addressed to its creator, §6.4).
    let applied = w.exec(Principal::Agent(g), scatter_action(t, goals(&[g, a, b])), Some(key));
    let receipt = applied.outcome.as_ref().expect("scattered");
    let ActionResult::Scattered { thread, header, ranks } = receipt.result.clone() else {
        panic!("unexpected {:?}", receipt.result);
    };
    assert_eq!((thread, header), (t, EntrySeq(1)));
    // One command: every fact shares its seq, in the order of design §4.3, the label fact last.
    assert!(applied.facts.iter().all(|f| f.seq == applied.facts[0].seq));
    let names: Vec<&str> = applied.facts.iter().map(|f| f.fact.name()).collect();
    let rank_facts = ["memory_created", "version_labeled", "posted", "assignment_created"];
    let mut expected = vec!["memory_created", "version_labeled", "posted"];
    for _ in 0..3 {
        expected.extend(rank_facts);
    }
    expected.push("scattered");
    assert_eq!(names, expected);
    // Each rank: its member, its entry replying to the header, its assignment addressed to it.
    assert_eq!(ranks.iter().map(|r| r.member).collect::<Vec<_>>(), [g, a, b]);
    for (r, rank) in ranks.iter().enumerate() {
        assert_eq!(rank.entry, EntrySeq(2 + r as u64));
        let e = w.state.entry(t, rank.entry).expect("state").expect("entry");
        assert_eq!((e.author, e.reply_to, e.assignment), (g, Some(header), Some(rank.assignment)));
        assert!(e.responders.is_empty());
        let asg = w.state.assignment(rank.assignment).expect("state").expect("assignment");
        assert_eq!(
            (asg.addressee, asg.creator, asg.entry, asg.state),
            (rank.member, g, rank.entry, AssignmentState::Open)
        );
        assert_eq!(asg.spec.criteria, Content::from("criteria"));
        assert_eq!(asg.spec.delivery_window, w.limits.default_delivery_window);
        assert_eq!(pinned_text(&w, e.pin), Content::from(goal_text(rank.member).as_str()));
        assert_eq!(w.state.labels(e.pin).expect("state"), Some(labels(Taint::Tainted, Scope::Fleet)));
    }
    // The collective record and the header's view of it (design §4.4).
    let c = w.state.collective(t, header).expect("state").expect("collective");
    assert_eq!((c.author, c.ranks.clone(), c.formed_at), (g, ranks.clone(), receipt.at));
    assert_eq!(w.state.thread(t).expect("state").expect("thread").open_assignments, 3);
    let view = read::read_entry(&w.state, a, t, header).expect("readable");
    assert_eq!(view.collective_size, Some(3));
    assert_eq!(view.content, Some(Content::from("header")));
    assert_eq!(read::read_entry(&w.state, a, t, ranks[0].entry).expect("readable").collective_size, None);
}

#[test]
fn scatter_ranks_are_sorted_member_ids_whatever_the_request_order() {
    let Group { mut w, g, a, b, c, t, .. } = group();
    let mut headers = Vec::new();
    for order in [[c, a, b], [b, c, a], [a, b, c]] {
        let (header, ranks) = w.scatter(g, t, fleet("header"), goals(&order));
        assert_eq!(ranks.iter().map(|r| r.member).collect::<Vec<_>>(), [a, b, c], "request order {order:?}");
        // Rank r's entry comes r-th after the header, and carries the goal given for its member.
        for (r, rank) in ranks.iter().enumerate() {
            assert_eq!(rank.entry.0, header.0 + 1 + r as u64);
            assert_eq!(pinned_text(&w, entry_pin(&w, t, rank.entry)), Content::from(goal_text(rank.member).as_str()));
        }
        headers.push(header);
    }
    // The gather lists the same ranks for every permutation.
    let members: Vec<Vec<AgentId>> =
        headers.iter().map(|h| gather(&w, g, t, *h, false).ranks.iter().map(|r| r.member).collect()).collect();
    assert!(members.iter().all(|m| m == &[a, b, c]));
}

#[test]
fn one_invalid_member_rejects_the_whole_scatter_and_records_nothing() {
    let Group { mut w, g, a, b, c, o, t } = group();
    let stranger = w.register();
    let gone = c;
    w.ok(gone, Action::Leave { thread: t });
    // Refused whole, naming the field of the request's goal; `refused` checks nothing changed.
    for (bad, index) in [(o, 2), (stranger, 1), (gone, 0)] {
        let order: Vec<AgentId> = match index {
            0 => vec![bad, a, b],
            1 => vec![a, bad, b],
            _ => vec![a, b, bad],
        };
        let r = w.refused(g, scatter_action(t, goals(&order)));
        assert_eq!((r.code, r.fak_reason()), (Code::InvalidTarget, Some(FakReason::Misroute)), "{r}");
        assert_eq!(r.field, Some(format!("goals[{index}].member")));
    }
    // Duplicates and an empty scatter are malformed (design Appendix A.3).
    let r = w.refused(g, scatter_action(t, goals(&[a, b, a])));
    assert_eq!((r.code, r.field.as_deref()), (Code::InvalidArgument, Some("goals[2].member")));
    let r = w.refused(g, scatter_action(t, Vec::new()));
    assert_eq!((r.code, r.field.as_deref()), (Code::InvalidArgument, Some("goals")));
    // Nothing of any attempt was recorded: no entry, no assignment, no Memory, no collective.
    let t_rec = w.state.thread(t).expect("state").expect("thread");
    assert_eq!((t_rec.last_entry, t_rec.open_assignments), (0, 0));
    assert!(!w.state.map.values().any(|r| matches!(r, Record::Collective(_) | Record::Memory(_))));
    // An observer and a non-member may not scatter at all.
    let r = w.refused(o, scatter_action(t, goals(&[a])));
    assert_eq!(r.code, Code::CannotSpeak);
    let r = w.refused(stranger, scatter_action(t, goals(&[a])));
    assert_eq!(r.code, Code::NotFound);
}

#[test]
fn scatter_refuses_an_agent_scoped_goal() {
    let Group { mut w, g, a, b, t, .. } = group();
    let private = LabeledBody::Content { content: Content::from("mine"), labels: labels(Taint::Trusted, Scope::Agent) };
    let r = w.refused(g, scatter_action(t, vec![(a, fleet("ok")), (b, private.clone())]));
    assert_eq!((r.code, r.fak_reason()), (Code::TrustViolation, Some(FakReason::TrustViolation)), "{r}");
    assert_eq!(r.field.as_deref(), Some("goals[1].body.content"));
    assert_eq!(r.next, NextStep::Revise);
    // An unlabeled pin counts as agent-scoped on the coordination path.
    let plain = match w.ok(g, Action::CreateMemory { content: Content::from("plain") }) {
        ActionResult::MemoryCreated { memory, version } => Pin { memory, version },
        other => panic!("unexpected {other:?}"),
    };
    let r = w.refused(g, scatter_action(t, vec![(b, LabeledBody::Pin(plain)), (a, fleet("ok"))]));
    assert_eq!((r.code, r.field.as_deref()), (Code::TrustViolation, Some("goals[0].body.pin")));
    // The header is held to the floor too.
    let mut action = scatter_action(t, goals(&[a]));
    if let Action::Scatter { header, .. } = &mut action {
        *header = private;
    }
    let r = w.refused(g, action);
    assert_eq!((r.code, r.field.as_deref()), (Code::TrustViolation, Some("header.content")));
    let quarantined = w.write_labeled(g, None, "q", labels(Taint::Quarantined, Scope::Public));
    let mut action = scatter_action(t, goals(&[a]));
    if let Action::Scatter { header, .. } = &mut action {
        *header = LabeledBody::Pin(quarantined);
    }
    let r = w.refused(g, action);
    assert_eq!((r.code, r.field.as_deref()), (Code::TrustViolation, Some("header.pin")));
    assert!(r.message.contains("quarantined"), "{r}");
}

#[test]
fn scatter_creates_opportunities_not_obligations() {
    let Group { mut w, g, a, b, t, .. } = group();
    let (_, ranks) = w.scatter(g, t, fleet("header"), goals(&[a, b]));
    // No response is owed by anyone (every ask is empty), and no delivery until a rank takes.
    assert_eq!(obligation_count(&w), 0);
    for rank in &ranks {
        assert!(w.opportunity_ids(rank.member).contains(&OpportunityId::Assignment(rank.assignment)));
        assert!(w.full_turn(rank.member).is_empty());
    }
    assert!(w.full_turn(g).is_empty());
    // Taking one makes the spec's delivery obligation, with its deadline (L4).
    w.ok(a, Action::TakeAssignment { assignment: ranks[0].assignment });
    let turn: Vec<ObligationId> = w.full_turn(a).into_iter().map(|i| i.obligation).collect();
    assert_eq!(turn, [ObligationId::AssignmentDelivery(ranks[0].assignment)]);
    assert!(!w.opportunity_ids(a).contains(&OpportunityId::Assignment(ranks[0].assignment)));
}

#[test]
fn scatter_respects_the_open_assignment_limit() {
    let limits = Limits { max_open_assignments_per_thread: 3, ..Limits::default() };
    let Group { mut w, g, a, b, c, t, .. } = group_with(limits);
    w.assign(g, t, a, None, None);
    let r = w.refused(g, scatter_action(t, goals(&[a, b, c])));
    assert_eq!((r.code, r.fak_reason()), (Code::LimitExceeded, Some(FakReason::RateLimited)), "{r}");
    assert_eq!(r.field.as_deref(), Some("goals"));
    // Exactly up to the limit is fine; then one more is refused.
    let (_, ranks) = w.scatter(g, t, fleet("header"), goals(&[b, c]));
    assert_eq!(ranks.len(), 2);
    assert_eq!(w.state.thread(t).expect("state").expect("thread").open_assignments, 3);
    let r = w.refused(g, scatter_action(t, goals(&[a])));
    assert_eq!(r.code, Code::LimitExceeded);
    // A delivery frees a place.
    take_and_deliver(&mut w, b, ranks[0].assignment, Content::from("out"));
    w.scatter(g, t, fleet("header"), goals(&[a]));
}

#[test]
fn scatter_replayed_returns_its_first_receipt_and_scatters_once() {
    let Group { mut w, g, a, b, t, .. } = group();
    let key = w.fresh_key();
    let action = scatter_action(t, goals(&[b, a]));
    let first = w.exec(Principal::Agent(g), action.clone(), Some(key.clone()));
    let bytes = first.receipt_bytes().expect("scattered");
    let before = w.state.clone();
    let again = w.exec(Principal::Agent(g), action, Some(key));
    assert!(again.replayed);
    assert_eq!(again.receipt_bytes(), Some(bytes));
    assert_eq!(w.state, before);
}

// --- gather (design §4.5) ---------------------------------------------------------------------------

#[test]
fn gather_lists_ranks_in_rank_order() {
    let Group { mut w, g, a, b, c, o, t } = group();
    let (header, ranks) = w.scatter(g, t, fleet("header"), goals(&[c, b, a]));
    let v = gather(&w, o, t, header, true);
    assert_eq!((v.author, v.ranks.len(), v.complete, v.all_delivered), (g, 3, false, false));
    // Delivered in reverse rank order; the gather still lists rank 0 first.
    for (i, m) in [c, b, a].into_iter().enumerate() {
        let rank = ranks.iter().find(|r| r.member == m).expect("a rank per member");
        take_and_deliver(&mut w, m, rank.assignment, Content::from(format!("out of {m}")));
        let v = gather(&w, g, t, header, true);
        assert_eq!((v.complete, v.all_delivered), (i == 2, i == 2), "after {} deliveries", i + 1);
    }
    let v = gather(&w, a, t, header, true);
    let listed: Vec<(u32, AgentId, EntrySeq)> = v.ranks.iter().map(|r| (r.rank, r.member, r.entry)).collect();
    assert_eq!(listed, [(0, a, ranks[0].entry), (1, b, ranks[1].entry), (2, c, ranks[2].entry)]);
    for r in &v.ranks {
        let AssignmentState::Delivered { output, .. } = &r.assignment.state else {
            panic!("rank {} is {:?}", r.rank, r.assignment.state);
        };
        assert_eq!(output, &Content::from(format!("out of {}", r.member)));
        assert!(!r.output_omitted);
    }
    // Judged, the gather stays complete; a non-member and a header without a collective are
    // NOT_FOUND.
    w.ok(g, Action::AdoptAssignment { assignment: ranks[0].assignment });
    assert!(gather(&w, g, t, header, true).complete);
    let stranger = w.register();
    let r = read_rejection(collective(&w.state, stranger, t, header, true));
    assert_eq!((r.code, r.fak_reason()), (Code::NotFound, Some(FakReason::DefaultDeny)));
    let r = read_rejection(collective(&w.state, g, t, ranks[0].entry, true));
    assert_eq!(r.code, Code::NotFound);
    assert!(r.message.contains("collective"), "{r}");
}

#[test]
fn gather_is_complete_but_not_all_delivered_when_a_member_left() {
    let Group { mut w, g, a, b, t, .. } = group();
    let (header, ranks) = w.scatter(g, t, fleet("header"), goals(&[a, b]));
    take_and_deliver(&mut w, a, ranks[0].assignment, Content::from("done"));
    w.ok(b, Action::Leave { thread: t });
    let v = gather(&w, g, t, header, true);
    // The departed rank ended without delivery: the gather will not change, but it must not be
    // folded as if every rank delivered (fak's fail-closed ErrArity).
    assert!(v.complete);
    assert!(!v.all_delivered);
    assert_eq!(v.ranks.len(), 2, "the rank that left is still listed");
    let AssignmentState::Ended { outcome, delivered, .. } = &v.ranks[1].assignment.state else {
        panic!("unexpected {:?}", v.ranks[1].assignment.state);
    };
    assert_eq!((outcome, delivered), (&AssignmentOutcome::Voided, &None));
    assert!(!v.ranks[1].output_omitted);
}

#[test]
fn gather_outputs_respect_their_budget() {
    let budget = kungfu_core::CoordLimits::DEFAULT.max_gather_output_bytes;
    let piece = budget * 2 / 5;
    let limits = Limits { max_content_bytes: piece, ..Limits::default() };
    let Group { mut w, g, a, b, c, t, .. } = group_with(limits);
    let (header, ranks) = w.scatter(g, t, fleet("header"), goals(&[a, b, c]));
    for (rank, byte) in ranks.iter().zip([b'a', b'b', b'c']) {
        take_and_deliver(&mut w, rank.member, rank.assignment, Content::new(vec![byte; piece]));
    }
    let v = gather(&w, g, t, header, true);
    let omitted: Vec<bool> = v.ranks.iter().map(|r| r.output_omitted).collect();
    assert_eq!(omitted, [false, false, true]);
    let inline: usize = v
        .ranks
        .iter()
        .filter_map(|r| match &r.assignment.state {
            AssignmentState::Delivered { output, .. } => Some(output.len()),
            _ => None,
        })
        .sum();
    assert_eq!(inline, 2 * piece);
    assert!(inline <= budget);
    // The omitted output is read on its own, unchanged.
    let full = read::read_assignment(&w.state, g, ranks[2].assignment).expect("readable");
    let AssignmentState::Delivered { output, .. } = full.state else { panic!("not delivered") };
    assert_eq!(output, Content::new(vec![b'c'; piece]));
    // Without outputs, every delivered rank says so; the state is the same.
    let v = gather(&w, g, t, header, false);
    assert!(v.ranks.iter().all(|r| r.output_omitted));
    assert!(v.complete && v.all_delivered);
}

// --- barrier (design §4.7) --------------------------------------------------------------------------

#[test]
fn barrier_releases_only_when_every_responder_replied_or_handled() {
    let Group { mut w, g, a, b, c, o, t } = group();
    let (entry, _, responders) = w.send(a, t, fleet("arrive"), Addressees::AllSpeakers);
    assert_eq!(responders, [g, b, c].into_iter().collect::<BTreeSet<_>>());
    let v = barrier_of(&w, o, t, entry);
    use BarrierArrival::*;
    assert_eq!(arrivals(&v), [(g, Pending), (a, Author), (b, Pending), (c, Pending)]);
    assert_eq!((v.state, v.pending, v.absent, v.author), (BarrierState::Waiting, 3, 0, a));
    assert_eq!(v.ranks.iter().map(|r| r.rank).collect::<Vec<_>>(), [0, 1, 2, 3]);
    let reply = w.post(b, t, "here", Some(entry), None);
    w.ok(c, Action::Handle { thread: t, entry, note: Some(Content::from("here too")) });
    let v = barrier_of(&w, g, t, entry);
    assert_eq!(arrivals(&v), [(g, Pending), (a, Author), (b, Replied(reply)), (c, Handled)]);
    assert_eq!((v.state, v.pending), (BarrierState::Waiting, 1));
    // A post that does not reply to the barrier is no arrival.
    w.post(g, t, "unrelated", None, None);
    assert_eq!(barrier_of(&w, g, t, entry).state, BarrierState::Waiting);
    w.post(g, t, "here", Some(entry), None);
    let v = barrier_of(&w, c, t, entry);
    assert_eq!((v.state, v.pending, v.absent), (BarrierState::Released, 0, 0));
    let stranger = w.register();
    assert_eq!(read_rejection(barrier(&w.state, stranger, t, entry)).code, Code::NotFound);
}

#[test]
fn barrier_breaks_on_retract() {
    let Group { mut w, g, a, b, c, t, .. } = group();
    let (entry, _, _) = w.send(a, t, fleet("arrive"), Addressees::AllSpeakers);
    w.post(b, t, "here", Some(entry), None);
    w.ok(a, Action::Retract { thread: t, entry });
    let v = barrier_of(&w, g, t, entry);
    use BarrierArrival::*;
    assert_eq!(arrivals(&v), [(g, Retracted), (a, Author), (b, Replied(EntrySeq(2))), (c, Retracted)]);
    assert_eq!((v.state, v.pending, v.absent), (BarrierState::Broken, 0, 2));
}

#[test]
fn barrier_breaks_when_a_member_leaves() {
    let Group { mut w, g, a, b, c, t, .. } = group();
    let (entry, _, _) = w.send(a, t, fleet("arrive"), Addressees::AllSpeakers);
    w.ok(c, Action::Leave { thread: t });
    // Everyone else arrives: a departure is not an arrival, so it never releases.
    w.post(g, t, "here", Some(entry), None);
    w.post(b, t, "here", Some(entry), None);
    let v = barrier_of(&w, a, t, entry);
    assert_eq!(v.ranks.last().map(|r| (r.member, r.arrival)), Some((c, BarrierArrival::MembershipEnded)));
    assert_eq!((v.state, v.pending, v.absent), (BarrierState::Broken, 0, 1));
    // A demoted member breaks it too.
    let (entry, _, _) = w.send(a, t, fleet("again"), Addressees::AllSpeakers);
    w.ok(g, Action::ChangeRole { thread: t, member: b, role: Role::Observer });
    w.post(g, t, "here", Some(entry), None);
    let v = barrier_of(&w, a, t, entry);
    assert_eq!(
        arrivals(&v),
        [(g, BarrierArrival::Replied(EntrySeq(5))), (a, BarrierArrival::Author), (b, BarrierArrival::Demoted)]
    );
    assert_eq!(v.state, BarrierState::Broken);
}

#[test]
fn barrier_over_no_responders_is_released() {
    // fak: a one-member group. Here: the author and an observer, so nobody else may speak.
    let mut w = World::new();
    let g = w.register();
    let o = w.register();
    let t = w.thread_with(g, &[(o, Role::Observer)]);
    let (entry, _, responders) = w.send(g, t, fleet("alone"), Addressees::AllSpeakers);
    assert!(responders.is_empty());
    let v = barrier_of(&w, o, t, entry);
    assert_eq!(arrivals(&v), [(g, BarrierArrival::Author)]);
    assert_eq!((v.state, v.pending, v.absent), (BarrierState::Released, 0, 0));
    assert_eq!(obligation_count(&w), 0);
}

#[test]
fn barrier_never_widens_to_later_members() {
    let Group { mut w, g, a, b, c, t, .. } = group();
    let (entry, _, _) = w.send(a, t, fleet("arrive"), Addressees::AllSpeakers);
    let late = w.register();
    let (grant, secret) = w.new_grant(Role::Speaker);
    w.ok(g, Action::IssueGrant { thread: t, grant });
    w.ok(late, Action::Join { grant_hash: kungfu_core::secret::hash_secret(&secret) });
    let v = barrier_of(&w, late, t, entry);
    assert_eq!(v.ranks.iter().map(|r| r.member).collect::<Vec<_>>(), [g, a, b, c]);
    assert!(w.full_turn(late).is_empty(), "a later member owes nothing");
    for m in [g, b, c] {
        w.post(m, t, "here", Some(entry), None);
    }
    assert_eq!(barrier_of(&w, late, t, entry).state, BarrierState::Released);
}

// --- the collective invariant (design §8.3) ---------------------------------------------------------

#[test]
fn validate_refuses_a_collective_that_is_not_its_scatter() {
    let Group { mut w, g, a, b, t, .. } = group();
    let (header, ranks) = w.scatter(g, t, fleet("header"), goals(&[a, b]));
    let other = w.post(a, t, "not a rank", None, None);
    let stored = w.state.collective(t, header).expect("state").expect("collective");
    let check = |c: Collective, rule: &str| {
        let mut state = w.state.clone();
        state.map.insert(keys::collective(t, header), Record::Collective(c));
        match kungfu_core::validate::validate(&state) {
            Err(v) => assert!(v.rule.contains(rule), "expected {rule}, got {v}"),
            Ok(()) => panic!("validate accepted a collective that breaks {rule}"),
        }
    };
    // Ranks out of member order.
    check(Collective { ranks: vec![ranks[1], ranks[0]], ..stored.clone() }, "ranks strictly increase");
    // A rank whose assignment is addressed to someone else.
    let swapped = vec![
        ScatterRank { assignment: ranks[1].assignment, ..ranks[0] },
        ScatterRank { assignment: ranks[0].assignment, ..ranks[1] },
    ];
    check(Collective { ranks: swapped, ..stored.clone() }, "a collective is its scatter's base facts");
    // Another author.
    check(Collective { author: a, ..stored.clone() }, "a collective is its scatter's base facts");
    // An entry that does not reply to the header.
    let mut state_ranks = stored.ranks.clone();
    state_ranks[0].entry = other;
    check(Collective { ranks: state_ranks, ..stored }, "a collective is its scatter's base facts");
}
