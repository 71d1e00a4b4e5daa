//! Addressed messages, pub/sub and the mailbox (design §3): fak's message verdict table as test
//! vectors, one case per row of design Appendix A.1, then the behaviour of `Send` and of the
//! mailbox read. Every step also runs the world's invariant and rebuild checks (L1, design §8.3).

use kungfu_core::action::{Addressees, LabeledBody, RankGoal};
use kungfu_core::coord::read::{MailFilter, MailboxPage, mailbox};
use kungfu_core::model::{ObligationId, ObligationKind, Pin, ResponseEnd, ResponseState, VersionLabels};
use kungfu_core::read::{self, ReadError, ReadResult};
use kungfu_core::state::StateExt;
use kungfu_core::testkit::World;
use kungfu_core::{Action, ActionResult, Limits, Principal, Record, keys};
use kungfu_types::{
    AgentId, Code, Content, EntrySeq, FakReason, Labels, MemoryId, NextStep, Rejection, Role, Scope, Taint, ThreadId,
};
use std::collections::BTreeSet;

// --- helpers ----------------------------------------------------------------------------------------

fn labels(taint: Taint, scope: Scope) -> Labels {
    Labels::new(taint, scope)
}

fn fleet(text: &str) -> LabeledBody {
    LabeledBody::Content { content: Content::from(text), labels: labels(Taint::Tainted, Scope::Fleet) }
}

fn body(text: &str, taint: Taint, scope: Scope) -> LabeledBody {
    LabeledBody::Content { content: Content::from(text), labels: labels(taint, scope) }
}

fn set(agents: &[AgentId]) -> BTreeSet<AgentId> {
    agents.iter().copied().collect()
}

fn send(thread: ThreadId, body: LabeledBody, to: Addressees) -> Action {
    Action::Send { thread, body, to, reply_to: None, reply_to_latest: false }
}

fn correction(thread: ThreadId, to: AgentId, reply_to: EntrySeq) -> Action {
    Action::Send {
        thread,
        body: fleet("please narrow the scope"),
        to: Addressees::Agents(set(&[to])),
        reply_to: Some(reply_to),
        reply_to_latest: true,
    }
}

#[track_caller]
fn assert_refusal(r: &Rejection, code: Code, fak: FakReason) {
    assert_eq!(r.code, code, "{r}");
    assert_eq!(r.fak_reason(), Some(fak), "{r}");
}

#[track_caller]
fn assert_trust_violation(r: &Rejection, field: &str) {
    assert_refusal(r, Code::TrustViolation, FakReason::TrustViolation);
    assert_eq!(r.field.as_deref(), Some(field), "{r}");
    assert_eq!(r.next, NextStep::Revise);
}

fn read_rejection<T: std::fmt::Debug>(r: ReadResult<T>) -> Rejection {
    match r {
        Err(ReadError::Rejected(r)) => r,
        other => panic!("expected a rejected read, got {other:?}"),
    }
}

fn page(
    w: &World,
    agent: AgentId,
    thread: ThreadId,
    after: Option<EntrySeq>,
    filter: MailFilter,
    size: usize,
) -> MailboxPage {
    mailbox(&w.state, agent, thread, after, filter, size, &w.limits).expect("a member reads its mailbox")
}

fn seqs(p: &MailboxPage) -> Vec<u64> {
    p.items.iter().map(|i| i.entry.seq.0).collect()
}

fn responses_owed(w: &World, agent: AgentId) -> Vec<ObligationId> {
    w.full_turn(agent).into_iter().filter(|i| i.kind == ObligationKind::Response).map(|i| i.obligation).collect()
}

fn obligation_count(w: &World) -> usize {
    w.state.map.values().filter(|r| matches!(r, Record::Obligation(_))).count()
}

/// A governor `g` and speakers `a`, `b` in one thread, plus an observer `o`.
struct Group {
    w: World,
    g: AgentId,
    a: AgentId,
    b: AgentId,
    o: AgentId,
    t: ThreadId,
}

fn group() -> Group {
    let mut w = World::new();
    let g = w.register();
    let a = w.register();
    let b = w.register();
    let o = w.register();
    let t = w.thread_with(g, &[(a, Role::Speaker), (b, Role::Speaker), (o, Role::Observer)]);
    Group { w, g, a, b, o, t }
}

// --- design Appendix A.1, one case per row ------------------------------------------------------------

#[test]
fn a1_send_by_a_non_member_is_not_found_and_records_nothing() {
    let Group { mut w, t, .. } = group();
    let stranger = w.register();
    let r = w.refused(stranger, send(t, fleet("hi"), Addressees::Nobody));
    assert_refusal(&r, Code::NotFound, FakReason::DefaultDeny);
    assert!(!r.message.contains("member"), "NOT_FOUND says nothing about the thread: {r}");
}

#[test]
fn a1_send_by_an_observer_cannot_speak() {
    let Group { mut w, o, t, .. } = group();
    let r = w.refused(o, send(t, fleet("hi"), Addressees::Nobody));
    assert_refusal(&r, Code::CannotSpeak, FakReason::DefaultDeny);
}

#[test]
fn a1_send_of_a_quarantined_body_is_a_trust_violation() {
    let Group { mut w, g, a, t, .. } = group();
    for scope in [Scope::Agent, Scope::Fleet, Scope::Public] {
        let r = w.refused(g, send(t, body("q", Taint::Quarantined, scope), Addressees::Agents(set(&[a]))));
        assert_trust_violation(&r, "body.content.labels");
        assert!(r.message.contains("quarantined"), "{r}");
    }
    // A pinned quarantined version too.
    let pin = w.write_labeled(g, None, "q", labels(Taint::Quarantined, Scope::Public));
    let r = w.refused(g, send(t, LabeledBody::Pin(pin), Addressees::Agents(set(&[a]))));
    assert_trust_violation(&r, "body.pin");
}

#[test]
fn a1_send_of_an_agent_scoped_body_to_another_is_a_trust_violation() {
    let Group { mut w, g, a, t, .. } = group();
    let r = w.refused(g, send(t, body("private", Taint::Trusted, Scope::Agent), Addressees::Agents(set(&[a]))));
    assert_trust_violation(&r, "body.content.labels");
    assert!(r.message.contains("WidenScope"), "the refusal names the way out: {r}");
}

#[test]
fn a1_send_of_an_agent_scoped_body_to_ones_own_channel_is_a_trust_violation() {
    // A thread of one: fak's self-channel. No thread is guaranteed to stay private (§9).
    let mut w = World::new();
    let x = w.register();
    let t = w.thread_with(x, &[]);
    let r = w.refused(x, send(t, body("note to self", Taint::Trusted, Scope::Agent), Addressees::Nobody));
    assert_trust_violation(&r, "body.content.labels");
    // The self-handoff is an agent-scoped labeled version, read back by its author.
    let pin = w.write_labeled(x, None, "note to self", labels(Taint::Trusted, Scope::Agent));
    let view = read::read_memory(&w.state, x, pin.memory, Some(pin.version)).expect("the author reads it");
    assert_eq!(
        (view.content, view.labels),
        (Content::from("note to self"), Some(labels(Taint::Trusted, Scope::Agent)))
    );
}

#[test]
fn a1_send_of_an_unlabeled_pin_is_a_trust_violation() {
    let Group { mut w, g, a, t, .. } = group();
    let pin = match w.ok(g, Action::CreateMemory { content: Content::from("plain") }) {
        ActionResult::MemoryCreated { memory, version } => Pin { memory, version },
        other => panic!("unexpected {other:?}"),
    };
    let r = w.refused(g, send(t, LabeledBody::Pin(pin), Addressees::Agents(set(&[a]))));
    assert_trust_violation(&r, "body.pin");
    assert!(r.message.contains("unlabeled"), "{r}");
}

#[test]
fn a1_send_of_fleet_tenant_or_public_bodies_by_a_speaker_is_sent() {
    let Group { mut w, g, a, b, t, .. } = group();
    let mut expected_entry = 0;
    for scope in [Scope::Fleet, Scope::Tenant, Scope::Public] {
        for taint in [Taint::Trusted, Taint::Tainted] {
            // New content: a labeled Memory of the author, then the entry (design §3.3).
            expected_entry += 1;
            let r = w.ok(a, send(t, body("m", taint, scope), Addressees::Agents(set(&[b]))));
            let ActionResult::Sent { thread, entry, pin, responders, readers } = r else {
                panic!("unexpected {r:?}");
            };
            assert_eq!((thread, entry), (t, EntrySeq(expected_entry)));
            assert_eq!(responders, set(&[b]));
            // Every current member but the author: the governor, b and the observer.
            assert_eq!(readers, 3);
            assert_eq!(w.state.labels(pin).expect("state"), Some(labels(taint, scope)));
            let author = w.state.memory(pin.memory).expect("state").expect("memory").author;
            assert_eq!(author, a);
            // A pinned labeled version is sent as it is.
            expected_entry += 1;
            let own = w.write_labeled(g, None, "pinned", labels(taint, scope));
            let (entry, sent_pin, _) = w.send(g, t, LabeledBody::Pin(own), Addressees::Nobody);
            assert_eq!((entry, sent_pin), (EntrySeq(expected_entry), own));
        }
    }
}

#[test]
fn a1_receive_by_a_non_member_is_not_found() {
    let Group { mut w, g, t, .. } = group();
    w.send(g, t, fleet("hello"), Addressees::Nobody);
    let stranger = w.register();
    let r = read_rejection(mailbox(&w.state, stranger, t, None, MailFilter::All, 10, &w.limits));
    assert_refusal(&r, Code::NotFound, FakReason::DefaultDeny);
    // A member who left no longer receives.
    let Group { mut w, g, a, t, .. } = group();
    w.send(g, t, fleet("hello"), Addressees::Nobody);
    w.ok(a, Action::Leave { thread: t });
    let r = read_rejection(mailbox(&w.state, a, t, None, MailFilter::All, 10, &w.limits));
    assert_eq!(r.code, Code::NotFound);
}

/// Design Appendix A.1, "receive of a quarantined message (injected)": held, content withheld,
/// nothing consumed. The floor makes the state impossible, so the test writes the label record
/// into the state directly, as fak's test injects into the queue; it only reads afterwards (the
/// world's `validate` would rightly refuse this state).
#[test]
fn mailbox_holds_a_quarantined_pin_injected_into_state() {
    let Group { mut w, g, a, t, .. } = group();
    w.send(g, t, fleet("first"), Addressees::Nobody);
    let (entry, pin, _) = w.send(g, t, fleet("poisoned"), Addressees::Agents(set(&[a])));
    w.send(g, t, fleet("third"), Addressees::Nobody);
    let quarantined = labels(Taint::Quarantined, Scope::Fleet);
    w.state.map.insert(
        keys::version_labels(pin.memory, pin.version),
        Record::Labels(VersionLabels {
            memory: pin.memory,
            version: pin.version,
            labels: quarantined,
            widened_from: None,
        }),
    );
    let before = w.state.clone();

    let p = page(&w, a, t, None, MailFilter::All, 10);
    assert_eq!(seqs(&p), [1, 2, 3]);
    let held = &p.items[1];
    assert_eq!(held.entry.seq, entry);
    assert!(held.held);
    assert_eq!(held.content, None);
    assert!(!held.content_omitted, "held content is withheld, not omitted for the budget");
    assert_eq!(held.labels, Some(quarantined));
    // The asked member still owes its response: receiving consumed nothing.
    assert_eq!(held.my_response.as_ref().map(|r| &r.state), Some(&ResponseState::Pending));
    assert!(!p.items[0].held && !p.items[2].held);
    assert_eq!(p.items[2].content, Some(Content::from("third")));
    // The entry read holds it too, and reading again gives the same page: nothing was consumed.
    let view = read::read_entry(&w.state, a, t, entry).expect("readable");
    assert!(view.held);
    assert_eq!(view.content, None);
    assert_eq!(page(&w, a, t, None, MailFilter::All, 10), p);
    assert_eq!(w.state, before, "a read changed the state");
    // And validate refuses the state the floor prevents (design §2.6).
    let v = kungfu_core::validate::validate(&w.state).expect_err("a held entry breaks an invariant");
    assert!(v.rule.contains("no entry pins content below its floor"), "{v}");
}

#[test]
fn a1_publish_of_an_agent_scoped_body_is_a_trust_violation() {
    let Group { mut w, g, t, .. } = group();
    let r = w.refused(g, send(t, body("private", Taint::Tainted, Scope::Agent), Addressees::Nobody));
    assert_trust_violation(&r, "body.content.labels");
}

#[test]
fn a1_broadcast_of_a_quarantined_body_is_a_trust_violation() {
    let Group { mut w, g, t, .. } = group();
    let r = w.refused(g, send(t, body("q", Taint::Quarantined, Scope::Public), Addressees::Nobody));
    assert_trust_violation(&r, "body.content.labels");
    assert!(r.message.contains("quarantined"), "{r}");
}

#[test]
fn replayed_send_returns_its_first_receipt() {
    let Group { mut w, a, b, t, .. } = group();
    let key = w.fresh_key();
    let action = send(t, fleet("once"), Addressees::Agents(set(&[b])));
    let first = w.exec(Principal::Agent(a), action.clone(), Some(key.clone()));
    let bytes = first.receipt_bytes().expect("sent");
    let after_first = w.state.clone();
    // Even after the thread moved on, the same request returns the same receipt and posts nothing.
    w.post(b, t, "later", None, None);
    let moved = w.state.clone();
    let again = w.exec(Principal::Agent(a), action, Some(key.clone()));
    assert!(again.replayed);
    assert_eq!(again.receipt_bytes(), Some(bytes));
    assert!(again.facts.is_empty() && again.changes.is_empty());
    assert_eq!(w.state, moved);
    assert_eq!(w.state.thread(t).expect("state").expect("thread").last_entry, 2);
    assert_ne!(after_first, moved);
    // The same key with a different request is refused.
    let other = w.exec(Principal::Agent(a), send(t, fleet("twice"), Addressees::Nobody), Some(key));
    let r = other.outcome.expect_err("a different request under the same key");
    assert_refusal(&r, Code::IdempotencyKeyReused, FakReason::Malformed);
}

// --- Send -----------------------------------------------------------------------------------------------

#[test]
fn send_to_nobody_creates_no_obligation() {
    // Exactly two speakers: a plain post would ask the other one (§6.3 rule 3); a Send to nobody
    // asks nobody (rule 1, the stated empty ask).
    let mut w = World::new();
    let x = w.register();
    let y = w.register();
    let t = w.thread_with(x, &[(y, Role::Speaker)]);
    let (entry, _, responders) = w.send(x, t, fleet("news"), Addressees::Nobody);
    assert!(responders.is_empty());
    assert_eq!(w.state.entry(t, entry).expect("state").expect("entry").ask, Some(BTreeSet::new()));
    assert_eq!(obligation_count(&w), 0);
    assert!(responses_owed(&w, y).is_empty());
    // A plain reply to it asks its author (§6.3 rule 2), as the spec defines.
    w.post(y, t, "thanks", Some(entry), None);
    assert_eq!(responses_owed(&w, x).len(), 1);
}

#[test]
fn send_to_agents_gives_each_a_response() {
    let Group { mut w, g, a, b, o, t } = group();
    let (entry, _, responders) = w.send(g, t, fleet("please confirm"), Addressees::Agents(set(&[a, b])));
    assert_eq!(responders, set(&[a, b]));
    for m in [a, b] {
        assert_eq!(responses_owed(&w, m), [ObligationId::Response { thread: t, entry, responder: m }]);
    }
    assert!(responses_owed(&w, g).is_empty() && responses_owed(&w, o).is_empty());
    // The spec's exits: a reply ends one, a handle the other.
    w.post(a, t, "done", Some(entry), None);
    w.ok(b, Action::Handle { thread: t, entry, note: None });
    assert!(responses_owed(&w, a).is_empty() && responses_owed(&w, b).is_empty());
    // The ask rules, with the wire's field names: never the author, never an observer or a
    // stranger, at most max_ask.
    // (The set is in id order, so the author, registered first, is index 0.)
    let r = w.refused(g, send(t, fleet("x"), Addressees::Agents(set(&[a, g]))));
    assert_refusal(&r, Code::InvalidTarget, FakReason::Misroute);
    assert_eq!(r.field.as_deref(), Some("to.agents[0]"));
    let r = w.refused(g, send(t, fleet("x"), Addressees::Agents(set(&[o]))));
    assert_refusal(&r, Code::InvalidTarget, FakReason::Misroute);
    assert_eq!(r.field.as_deref(), Some("to.agents[0]"));
    let stranger = w.register();
    let r = w.refused(g, send(t, fleet("x"), Addressees::Agents(set(&[a, stranger]))));
    assert_eq!(r.field.as_deref(), Some("to.agents[1]"));
    let r = w.refused(g, send(t, fleet("x"), Addressees::Agents(BTreeSet::new())));
    assert_refusal(&r, Code::InvalidArgument, FakReason::Malformed);
    let mut limits = Limits::default();
    limits.max_ask = 1;
    w.limits = limits;
    let r = w.refused(g, send(t, fleet("x"), Addressees::Agents(set(&[a, b]))));
    assert_refusal(&r, Code::LimitExceeded, FakReason::RateLimited);
    assert_eq!(r.field.as_deref(), Some("to.agents"));
}

#[test]
fn send_to_all_speakers_excludes_the_author_and_observers() {
    let Group { mut w, g, a, b, o, t } = group();
    let (entry, _, responders) = w.send(a, t, fleet("barrier"), Addressees::AllSpeakers);
    assert_eq!(responders, set(&[g, b]));
    assert!(!responders.contains(&o) && !responders.contains(&a));
    assert_eq!(w.state.entry(t, entry).expect("state").expect("entry").ask, Some(set(&[g, b])));
    for m in [g, b] {
        assert_eq!(responses_owed(&w, m), [ObligationId::Response { thread: t, entry, responder: m }]);
    }
    // A demoted speaker is no longer one; a promoted observer is.
    w.ok(g, Action::ChangeRole { thread: t, member: b, role: Role::Observer });
    w.ok(g, Action::ChangeRole { thread: t, member: o, role: Role::Speaker });
    let (_, _, responders) = w.send(a, t, fleet("again"), Addressees::AllSpeakers);
    assert_eq!(responders, set(&[g, o]));
}

#[test]
fn send_to_all_speakers_is_bounded_by_the_group_limit() {
    let mut w = World::new();
    let g = w.register();
    // The group bound, and never more than its base post could ask (L2, design R3: `max_ask`).
    let limit = kungfu_core::CoordLimits::DEFAULT.max_collective_members.min(kungfu_core::Limits::default().max_ask);
    assert!(limit < kungfu_core::CoordLimits::DEFAULT.max_collective_members, "the default max_ask binds first");
    let members: Vec<(AgentId, Role)> = (0..limit).map(|_| (w.register(), Role::Speaker)).collect();
    w.check_rebuild = false;
    let t = w.thread_with(g, &members);
    w.check_rebuild = true;
    // The governor's group is `limit` others: allowed. One more speaker makes it too large.
    let (_, _, responders) = w.send(g, t, fleet("all"), Addressees::AllSpeakers);
    assert_eq!(responders.len(), limit);
    let late = w.register();
    let (grant, secret) = w.new_grant(Role::Speaker);
    w.ok(g, Action::IssueGrant { thread: t, grant });
    w.ok(late, Action::Join { grant_hash: kungfu_core::secret::hash_secret(&secret) });
    let r = w.refused(g, send(t, fleet("all"), Addressees::AllSpeakers));
    assert_refusal(&r, Code::LimitExceeded, FakReason::RateLimited);
    assert_eq!(r.field.as_deref(), Some("to.all_speakers"));
}

#[test]
fn late_member_reads_every_earlier_message() {
    let Group { mut w, g, a, t, .. } = group();
    w.send(g, t, fleet("one"), Addressees::Nobody);
    w.send(a, t, body("two", Taint::Trusted, Scope::Tenant), Addressees::Nobody);
    w.send(g, t, body("three", Taint::Tainted, Scope::Public), Addressees::Agents(set(&[a])));
    let late = w.register();
    let (grant, secret) = w.new_grant(Role::Observer);
    w.ok(g, Action::IssueGrant { thread: t, grant });
    w.ok(late, Action::Join { grant_hash: kungfu_core::secret::hash_secret(&secret) });
    // From the start of the thread (design §3.4: catch-up from facts), with content and labels.
    let p = page(&w, late, t, None, MailFilter::All, 0);
    assert_eq!(seqs(&p), [1, 2, 3]);
    let contents: Vec<Option<Content>> = p.items.iter().map(|i| i.content.clone()).collect();
    assert_eq!(contents, [Some("one".into()), Some("two".into()), Some("three".into())]);
    assert_eq!(p.items[1].labels, Some(labels(Taint::Trusted, Scope::Tenant)));
    assert!(p.items.iter().all(|i| i.my_response.is_none() && !i.held && !i.content_omitted));
    // The page examined the thread's newest entry, so it names no cursor (`Mailbox.next_after`):
    // the reader continues from its last item, and from there it is caught up.
    assert_eq!(p.next_after, None);
    assert_eq!(page(&w, late, t, Some(EntrySeq(3)), MailFilter::All, 0).next_after, None);
    // It owes nothing for what was asked before it joined.
    assert!(responses_owed(&w, late).is_empty());
}

#[test]
fn reply_to_latest_refuses_a_stale_status() {
    let Group { mut w, g, a, t, .. } = group();
    let status = w.post(a, t, "status 1", None, None);
    // The orchestrator's own later entries do not make the worker's status stale.
    w.send(g, t, fleet("unrelated"), Addressees::Nobody);
    let r = w.ok(g, correction(t, a, status));
    let ActionResult::Sent { entry: first, .. } = r else { panic!("unexpected {r:?}") };
    assert_eq!(w.state.entry(t, first).expect("state").expect("entry").reply_to, Some(status));
    // The worker posts a newer status: a correction of the old one is stale, and records nothing.
    let newer = w.post(a, t, "status 2", None, None);
    let r = w.refused(g, correction(t, a, status));
    assert_refusal(&r, Code::StaleBase, FakReason::Unwitnessed);
    assert_eq!(r.field.as_deref(), Some("reply_to"));
    assert_eq!(r.next, NextStep::Retry);
    w.ok(g, correction(t, a, newer));
    // Without reply_to_latest the old entry may still be answered; reply_to must exist.
    let plain = Action::Send {
        thread: t,
        body: fleet("about your first status"),
        to: Addressees::Agents(set(&[a])),
        reply_to: Some(status),
        reply_to_latest: false,
    };
    w.ok(g, plain);
    let r = w.refused(g, correction(t, a, EntrySeq(99)));
    assert_refusal(&r, Code::InvalidArgument, FakReason::Malformed);
    assert_eq!(r.field.as_deref(), Some("reply_to"));
    let unanchored =
        Action::Send { thread: t, body: fleet("x"), to: Addressees::Nobody, reply_to: None, reply_to_latest: true };
    let r = w.refused(g, unanchored);
    assert_eq!(r.code, Code::InvalidArgument);
    assert_eq!(r.field.as_deref(), Some("reply_to_latest"));
}

// --- the mailbox (design §3.5) --------------------------------------------------------------------------

#[test]
fn mailbox_pages_have_no_gap_and_no_duplicate() {
    let Group { mut w, g, a, b, t, .. } = group();
    for i in 0..7 {
        let from = [g, a, b][i % 3];
        w.send(from, t, fleet(&format!("m{i}")), Addressees::Nobody);
    }
    for size in [1, 2, 3, 7, 8] {
        let mut seen = Vec::new();
        let mut after = None;
        let mut calls = 0;
        loop {
            calls += 1;
            assert!(calls <= 10, "the traversal does not end");
            let p = page(&w, a, t, after, MailFilter::All, size);
            assert!(p.items.len() <= size);
            seen.extend(seqs(&p));
            match p.next_after {
                Some(n) => {
                    assert!(after.is_none_or(|a| n > a), "the cursor moves forward");
                    after = Some(n);
                }
                None => break,
            }
        }
        assert_eq!(seen, (1..=7).collect::<Vec<u64>>(), "page size {size}");
    }
    // A cursor at the end reads nothing and keeps no cursor: the client waits (WatchThread).
    let p = page(&w, a, t, Some(EntrySeq(7)), MailFilter::All, 3);
    assert!(p.items.is_empty() && p.next_after.is_none());
    // New entries continue from the same cursor with no gap.
    w.send(g, t, fleet("m7"), Addressees::Nobody);
    assert_eq!(seqs(&page(&w, a, t, Some(EntrySeq(7)), MailFilter::All, 3)), [8]);
}

#[test]
fn mailbox_asked_me_filters_and_stays_bounded() {
    let Group { mut w, g, a, b, t, .. } = group();
    let scan = kungfu_core::CoordLimits::DEFAULT.mailbox_scan_factor as u64;
    // 20 entries; only 5 and 17 ask b.
    for i in 1..=20u64 {
        let to = if i == 5 || i == 17 { Addressees::Agents(set(&[b])) } else { Addressees::Nobody };
        w.send(if i % 2 == 0 { g } else { a }, t, fleet("m"), to);
    }
    let mut found = Vec::new();
    let mut after: Option<EntrySeq> = None;
    let mut cursors = Vec::new();
    loop {
        let p = page(&w, b, t, after, MailFilter::AskedMe, 1);
        // Every call examines at most scan × page_size entries.
        if let Some(n) = p.next_after {
            assert!(n.0 - after.map_or(0, |a| a.0) <= scan, "examined past its bound: {after:?} -> {n:?}");
        }
        assert!(p.items.iter().all(|i| i.entry.responders.contains(&b)));
        assert!(p.items.iter().all(|i| i.my_response.as_ref().is_some_and(|r| r.responder == b)));
        found.extend(seqs(&p));
        cursors.push(p.next_after.map(|s| s.0));
        match p.next_after {
            Some(n) => after = Some(n),
            None => break,
        }
        assert!(cursors.len() < 10, "the traversal does not end");
    }
    assert_eq!(found, [5, 17]);
    // The second call found nothing in its window but still moved the cursor by a full window, so
    // the cursor never re-reads what it has seen; the fourth looked at the rest (18-20), the
    // newest entry among them, so it names no cursor: the traversal ends without a fifth call.
    assert_eq!(cursors, [Some(5), Some(5 + scan), Some(17), None]);
    // A member who was asked nothing gets empty pages that still end.
    let p = page(&w, g, t, Some(EntrySeq(2)), MailFilter::AskedMe, 1);
    assert!(p.items.is_empty());
    assert_eq!(p.next_after, Some(EntrySeq(2 + scan)), "a window short of the newest entry moves the cursor");
    let p = page(&w, g, t, Some(EntrySeq(12)), MailFilter::AskedMe, 1);
    assert!(p.items.is_empty());
    assert_eq!(p.next_after, None, "the window reached the newest entry");
}

#[test]
fn mailbox_shows_the_callers_own_response_only() {
    let Group { mut w, g, a, b, t, .. } = group();
    let (entry, _, _) = w.send(g, t, fleet("ack?"), Addressees::Agents(set(&[a, b])));
    w.ok(b, Action::Handle { thread: t, entry, note: Some(Content::from("b's private note")) });
    let for_a = page(&w, a, t, None, MailFilter::All, 5);
    assert_eq!(
        for_a.items[0].my_response.as_ref().map(|r| (r.responder, &r.state)),
        Some((a, &ResponseState::Pending))
    );
    let for_b = page(&w, b, t, None, MailFilter::All, 5);
    let mine = for_b.items[0].my_response.as_ref().expect("b was asked");
    assert!(matches!(&mine.state, ResponseState::Ended { how: ResponseEnd::Handled { note: Some(_) }, .. }));
    // The author was asked nothing: no response of its own.
    assert!(page(&w, g, t, None, MailFilter::All, 5).items[0].my_response.is_none());
}

#[test]
fn mailbox_page_respects_its_byte_budget() {
    let budget = kungfu_core::CoordLimits::DEFAULT.max_mailbox_page_bytes;
    let mut limits = Limits::default();
    limits.max_content_bytes = budget * 3 / 2;
    let mut w = World::with_limits(limits);
    let g = w.register();
    let a = w.register();
    let t = w.thread_with(g, &[(a, Role::Speaker)]);
    let piece = budget * 2 / 5;
    for _ in 0..3 {
        let content = Content::new(vec![b'x'; piece]);
        w.send(
            g,
            t,
            LabeledBody::Content { content, labels: labels(Taint::Tainted, Scope::Fleet) },
            Addressees::Nobody,
        );
    }
    // Two pieces fit the budget; the third is omitted, to be read with GetEntry.
    let p = page(&w, a, t, None, MailFilter::All, 10);
    assert_eq!(seqs(&p), [1, 2, 3]);
    let inline: Vec<bool> = p.items.iter().map(|i| i.content.is_some()).collect();
    assert_eq!(inline, [true, true, false]);
    assert!(p.items[2].content_omitted && !p.items[0].content_omitted);
    let total: usize = p.items.iter().filter_map(|i| i.content.as_ref()).map(Content::len).sum();
    assert!(total <= budget);
    assert_eq!(read::read_entry(&w.state, a, t, EntrySeq(3)).expect("readable").content.map(|c| c.len()), Some(piece));
    // The next page starts with it inline.
    let p = page(&w, a, t, Some(EntrySeq(2)), MailFilter::All, 10);
    assert_eq!(p.items[0].content.as_ref().map(Content::len), Some(piece));

    // At least one item always carries its content, even one larger than the budget, and even
    // when an earlier item of the page has no readable content.
    let big = w.write_labeled(g, None, &"y".repeat(budget + 1), labels(Taint::Tainted, Scope::Fleet));
    let other = w.register();
    let public = w.write_labeled(other, None, "soon private", labels(Taint::Tainted, Scope::Public));
    w.ok(other, Action::PublishMemory { memory: public.memory });
    w.send(g, t, LabeledBody::Pin(public), Addressees::Nobody);
    w.ok(other, Action::UnpublishMemory { memory: public.memory });
    w.send(g, t, LabeledBody::Pin(big), Addressees::Nobody);
    let p = page(&w, a, t, Some(EntrySeq(3)), MailFilter::All, 10);
    assert_eq!(seqs(&p), [4, 5]);
    assert_eq!(p.items[0].content, None, "another agent's unpublished Memory is unreadable (§5)");
    assert!(!p.items[0].content_omitted);
    assert_eq!(p.items[1].content.as_ref().map(Content::len), Some(budget + 1));
}

// --- the fak reasons of the coordination refusals (design §2.8) ------------------------------------------

#[test]
fn coordination_refusals_carry_the_fak_reason_of_design_2_8() {
    let mut limits = Limits::default();
    limits.max_content_bytes = 700 * 1024;
    limits.max_open_assignments_per_thread = 2;
    let mut w = World::with_limits(limits);
    let g = w.register();
    let a = w.register();
    let o = w.register();
    let stranger = w.register();
    let t = w.thread_with(g, &[(a, Role::Speaker), (o, Role::Observer)]);
    let closed = w.thread_with(g, &[(a, Role::Speaker)]);
    w.ok(g, Action::CloseThread { thread: closed });
    let status = w.post(a, t, "status", None, None);
    w.post(a, t, "newer status", None, None);
    let mine = w.write_labeled(g, None, "m", labels(Taint::Tainted, Scope::Fleet));
    let withdrawn = w.write_labeled(g, None, "w", labels(Taint::Tainted, Scope::Fleet));
    w.ok(g, Action::WithdrawMemory { memory: withdrawn.memory });
    let public = w.write_labeled(g, None, "p", labels(Taint::Tainted, Scope::Public));
    w.ok(g, Action::PublishMemory { memory: public.memory });
    let big = |n: usize| LabeledBody::Content {
        content: Content::new(vec![b'z'; n]),
        labels: labels(Taint::Tainted, Scope::Fleet),
    };
    let scatter = |goals: Vec<RankGoal>| Action::Scatter {
        thread: t,
        header: fleet("h"),
        goals,
        criteria: Content::from("c"),
        output_structure: None,
        delivery_window: None,
        judgment_window: None,
    };
    let deactivated = w.register();
    let key = w.fresh_key();
    w.exec(Principal::Operator, Action::DeactivateAgent { agent: deactivated }, Some(key));

    let cases: Vec<(&str, AgentId, Action, Code, FakReason)> = vec![
        ("non-member send", stranger, send(t, fleet("x"), Addressees::Nobody), Code::NotFound, FakReason::DefaultDeny),
        ("observer send", o, send(t, fleet("x"), Addressees::Nobody), Code::CannotSpeak, FakReason::DefaultDeny),
        (
            "inactive agent",
            deactivated,
            send(t, fleet("x"), Addressees::Nobody),
            Code::AgentInactive,
            FakReason::DefaultDeny,
        ),
        ("closed thread", g, send(closed, fleet("x"), Addressees::Nobody), Code::ThreadClosed, FakReason::PolicyBlock),
        (
            "quarantined body",
            g,
            send(t, body("q", Taint::Quarantined, Scope::Public), Addressees::Nobody),
            Code::TrustViolation,
            FakReason::TrustViolation,
        ),
        (
            "agent-scoped body",
            g,
            send(t, body("p", Taint::Trusted, Scope::Agent), Addressees::Nobody),
            Code::TrustViolation,
            FakReason::TrustViolation,
        ),
        ("stale status", g, correction(t, a, status), Code::StaleBase, FakReason::Unwitnessed),
        ("missing reply_to", g, correction(t, a, EntrySeq(50)), Code::InvalidArgument, FakReason::Malformed),
        (
            "observer addressed",
            g,
            send(t, fleet("x"), Addressees::Agents(set(&[o]))),
            Code::InvalidTarget,
            FakReason::Misroute,
        ),
        (
            "oversize body",
            g,
            send(t, big(700 * 1024 + 1), Addressees::Nobody),
            Code::LimitExceeded,
            FakReason::Oversize,
        ),
        (
            "inline budget",
            g,
            scatter(vec![RankGoal { member: g, body: big(600 * 1024) }, RankGoal { member: a, body: big(600 * 1024) }]),
            Code::LimitExceeded,
            FakReason::Oversize,
        ),
        (
            "stranger as a rank",
            g,
            scatter(vec![RankGoal { member: g, body: fleet("1") }, RankGoal { member: stranger, body: fleet("3") }]),
            Code::InvalidTarget,
            FakReason::Misroute,
        ),
        (
            "duplicate member",
            g,
            scatter(vec![RankGoal { member: a, body: fleet("1") }, RankGoal { member: a, body: fleet("2") }]),
            Code::InvalidArgument,
            FakReason::Malformed,
        ),
        (
            "widen to the same scope",
            g,
            Action::WidenScope { pin: mine, scope: Scope::Fleet },
            Code::NoEffect,
            FakReason::PolicyBlock,
        ),
        (
            "widen a withdrawn Memory",
            g,
            Action::WidenScope { pin: withdrawn, scope: Scope::Tenant },
            Code::MemoryWithdrawn,
            FakReason::PolicyBlock,
        ),
        (
            "widen another's Memory",
            a,
            Action::WidenScope { pin: public, scope: Scope::Public },
            Code::NotAuthor,
            FakReason::DefaultDeny,
        ),
        (
            "widen an unknown Memory",
            a,
            Action::WidenScope { pin: Pin { memory: MemoryId(999), version: mine.version }, scope: Scope::Public },
            Code::NotFound,
            FakReason::DefaultDeny,
        ),
        (
            "public Memory below public",
            g,
            Action::WriteLabeled {
                memory: Some(public.memory),
                content: Content::from("x"),
                labels: labels(Taint::Tainted, Scope::Fleet),
            },
            Code::TrustViolation,
            FakReason::TrustViolation,
        ),
    ];
    for (name, who, action, code, fak) in cases {
        let r = w.refused(who, action);
        assert_eq!((r.code, r.fak_reason()), (code, Some(fak)), "{name}: {r}");
        assert_eq!(r.next, code.next_step(), "{name}");
    }
    // A count limit is fak's RATE_LIMITED (not OVERSIZE).
    w.assign(g, t, a, None, None);
    let r =
        w.refused(g, scatter(vec![RankGoal { member: g, body: fleet("1") }, RankGoal { member: a, body: fleet("2") }]));
    assert_eq!((r.code, r.fak_reason()), (Code::LimitExceeded, Some(FakReason::RateLimited)), "{r}");
    // A read refusal carries its reason too.
    let r = read_rejection(mailbox(&w.state, stranger, t, None, MailFilter::All, 1, &w.limits));
    assert_eq!((r.code, r.fak_reason()), (Code::NotFound, Some(FakReason::DefaultDeny)));
}
