//! The coordination layer (`docs/coordination.md`, COORDINATION §11.3), observed over the public
//! API of the three-node cluster: labels and the fail-closed floor, addressed messages, pub/sub and
//! the mailbox, scatter, gather and the barrier. Every case also holds the line of §1.1: the layer
//! refuses, but it never creates an obligation the spec does not define.

use futures::StreamExt;
use kungfu_client::{Client, ClientOptions, Code, Error, Written, pb};
use kungfu_system_tests::conformance::*;
use kungfu_system_tests::{cases, outcome};
use std::time::{Duration, Instant};

cases! {
    coordination_actions_create_no_obligation_the_spec_does_not_define ["§1.1.c1"],
    trust_violations_carry_fak_reason_and_no_effect ["§1.1.c2"],
    unlabeled_posts_keep_the_spec_behaviour ["§1.1.c2"],
    widening_is_explicit_and_leaves_earlier_pins_their_labels ["§1.1.c2"],
    errors_reveal_no_labels_of_unreadable_pins ["§1.1.c2", "§12.5"],
    send_asks_its_addressees_and_a_replay_is_posted_once ["§1.1.c3"],
    pub_sub_delivers_to_watchers_and_late_subscribers_catch_up ["§1.1.c3"],
    mailbox_cursor_reads_have_no_gap_and_no_duplicate ["§1.1.c3"],
    a_stale_correction_is_refused_as_stale_base ["§1.1.c3"],
    scatter_is_atomic_on_every_node ["§1.1.c4"],
    gather_returns_deliveries_in_rank_order ["§1.1.c4"],
    barrier_is_released_only_by_real_responses ["§1.1.c5"],
    a_departure_breaks_a_barrier ["§1.1.c5"],
}

// ---------------------------------------------------------------------------------------------
// Private helpers: requests built by hand from the wire types, so the cases pin the wire.

fn labels(taint: pb::Taint, scope: pb::Scope) -> Option<pb::Labels> {
    Some(pb::Labels { taint: taint as i32, scope: scope as i32 })
}

/// New content with labels, as a coordination body.
fn body(words: &str, taint: pb::Taint, scope: pb::Scope) -> Option<pb::LabeledBody> {
    Some(pb::LabeledBody {
        kind: Some(pb::labeled_body::Kind::Content(pb::LabeledContent {
            content: text(words),
            labels: labels(taint, scope),
        })),
    })
}

/// Fleet-scoped tainted text: what a member may send to its thread.
fn fleet(words: &str) -> Option<pb::LabeledBody> {
    body(words, pb::Taint::Tainted, pb::Scope::Fleet)
}

fn pinned(pin: &pb::MemoryPin) -> Option<pb::LabeledBody> {
    Some(pb::LabeledBody { kind: Some(pb::labeled_body::Kind::Pin(pin.clone())) })
}

fn to_agents(agents: &[&Agent]) -> Option<pb::SendTo> {
    Some(pb::SendTo {
        kind: Some(pb::send_to::Kind::Agents(pb::Agents { agents: agents.iter().map(|a| a.id.clone()).collect() })),
    })
}

fn to_all() -> Option<pb::SendTo> {
    Some(pb::SendTo { kind: Some(pb::send_to::Kind::AllSpeakers(pb::AllSpeakers {})) })
}

fn send_req(thread: &str, body: Option<pb::LabeledBody>, to: Option<pb::SendTo>) -> pb::SendRequest {
    pb::SendRequest { thread: thread.to_string(), body, to, ..Default::default() }
}

async fn send(a: &Agent, r: pb::SendRequest) -> Result<Written<pb::SendResponse>, Error> {
    a.c.send(r, None).await
}

/// A send that must succeed; its receipt.
async fn sent(a: &Agent, r: pb::SendRequest) -> pb::Sent {
    outcome!(send(a, r).await.expect("send").value.receipt, Sent)
}

async fn write_labeled(a: &Agent, words: &str, taint: pb::Taint, scope: pb::Scope) -> pb::MemoryPin {
    let w =
        a.c.write_labeled(
            pb::WriteLabeledRequest { content: text(words), labels: labels(taint, scope), ..Default::default() },
            None,
        )
        .await
        .expect("write labeled");
    outcome!(w.value.receipt, LabeledWritten).pin.expect("a pin")
}

async fn mailbox(a: &Agent, thread: &str, after: u64, filter: pb::MailboxFilter, page_size: u32) -> pb::Mailbox {
    a.c.get_mailbox(pb::GetMailboxRequest { thread: thread.to_string(), after, filter: filter as i32, page_size })
        .await
        .expect("mailbox")
}

async fn barrier(a: &Agent, thread: &str, entry: u64) -> pb::Barrier {
    a.c.get_barrier(pb::GetBarrierRequest { thread: thread.to_string(), entry }).await.expect("barrier")
}

fn goal(member: &Agent, words: &str) -> pb::RankGoal {
    pb::RankGoal { member: member.id.clone(), body: fleet(words) }
}

fn scatter_req(thread: &str, goals: Vec<pb::RankGoal>) -> pb::ScatterRequest {
    pb::ScatterRequest {
        thread: thread.to_string(),
        header: fleet("split the work"),
        goals,
        criteria: text("one line each"),
        ..Default::default()
    }
}

/// The `fak_reason` a rejection carried: re-read from the status the SDK decoded.
fn fak(rej: &kungfu_client::Rejection) -> Option<&'static str> {
    rej.fak_reason().map(|f| f.as_str())
}

async fn last_entry(a: &Agent, thread: &str) -> u64 {
    thread_summary(a, thread).await.last_entry
}

async fn reply(a: &Agent, thread: &str, to: u64) {
    a.post(Post::text(thread, "here").reply_to(to)).await;
}

/// Clients of each node alone, reading that node's own state (stale reads), as `a`.
async fn per_node(cx: &Ctx, a: &Agent) -> Vec<Client> {
    let endpoints: Vec<String> = {
        let cluster = cx.world.cluster.lock().expect("cluster lock");
        cluster.nodes.values().map(|n| n.api.to_string()).collect()
    };
    let options = ClientOptions { max_retries: 0, call_timeout: Duration::from_secs(2), ..ClientOptions::default() };
    let mut out = Vec::new();
    for e in endpoints {
        if let Ok(c) = Client::connect(vec![e], Some(a.key.clone()), options.clone()).await {
            out.push(c.stale());
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Cases.

/// §1.1: after every coordination action the turns hold exactly the spec's obligations: a send to
/// nobody and a scatter create none, a send to agents one response each, a barrier one per
/// speaker, a labeled write and a widening none.
async fn coordination_actions_create_no_obligation_the_spec_does_not_define(cx: Ctx) {
    let (lead, w1, w2) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&lead, &[&w1, &w2]).await;
    let pin = write_labeled(&lead, "notes", pb::Taint::Tainted, pb::Scope::Agent).await;
    lead.c
        .widen_scope(
            pb::WidenScopeRequest { pin: Some(pin), scope: pb::Scope::Fleet as i32, ..Default::default() },
            None,
        )
        .await
        .expect("widen");
    sent(&lead, send_req(&t.id, fleet("news"), None)).await;
    for a in [&lead, &w1, &w2] {
        assert!(a.turn().await.is_empty(), "a labeled write, a widening or a publish created an obligation");
    }
    let s = outcome!(
        lead.c
            .scatter(scatter_req(&t.id, vec![goal(&w1, "a"), goal(&w2, "b")]), None)
            .await
            .expect("scatter")
            .value
            .receipt,
        Scattered
    );
    assert_eq!(s.ranks.len(), 2);
    for a in [&lead, &w1, &w2] {
        assert!(a.turn().await.is_empty(), "a scatter creates opportunities, not obligations: {:?}", a.turn().await);
    }
    let asked = sent(&lead, send_req(&t.id, fleet("ok?"), to_agents(&[&w1]))).await;
    assert_eq!(asked.responders, vec![w1.id.clone()]);
    let turn = w1.turn().await;
    assert_eq!(turn.len(), 1, "one asked, one response: {turn:?}");
    assert_eq!(turn[0].kind, pb::ObligationKind::Response as i32);
    assert!(w2.turn().await.is_empty() && lead.turn().await.is_empty());
    let b = sent(&lead, send_req(&t.id, fleet("sync"), to_all())).await;
    let mut responders = b.responders.clone();
    responders.sort();
    let mut expected = vec![w1.id.clone(), w2.id.clone()];
    expected.sort();
    assert_eq!(responders, expected, "a barrier asks every speaker but its author");
    assert_eq!(w1.turn().await.len(), 2);
    assert_eq!(w2.turn().await.len(), 1);
    assert!(lead.turn().await.is_empty(), "the author owes nothing to its own barrier");
}

/// The floor: quarantined or too-narrow content is refused on every path with TRUST_VIOLATION and
/// fak_reason, names the field, and records nothing.
async fn trust_violations_carry_fak_reason_and_no_effect(cx: Ctx) {
    let (lead, w) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&lead, &[&w]).await;
    let before = last_entry(&lead, &t.id).await;
    let cases = [
        ("quarantined", body("x", pb::Taint::Quarantined, pb::Scope::Public), "body.content"),
        ("agent-scoped", body("x", pb::Taint::Tainted, pb::Scope::Agent), "body.content"),
    ];
    for (what, b, field) in cases {
        let rej = refused(send(&lead, send_req(&t.id, b, to_agents(&[&w]))).await, Code::TrustViolation);
        assert_eq!(fak(&rej), Some("TRUST_VIOLATION"), "{what}: {rej:?}");
        assert_eq!(rej.field.as_deref(), Some(field), "{what}: {rej:?}");
        assert_eq!(rej.next, kungfu_client::NextStep::Revise);
    }
    // An unlabeled pin counts as private on the coordination path (fail closed).
    let plain = lead.memory("plain").await;
    let rej = refused(send(&lead, send_req(&t.id, pinned(&plain), None)).await, Code::TrustViolation);
    assert_eq!(rej.field.as_deref(), Some("body.pin"));
    // A base post of a labeled agent-scoped pin is refused too; a publish of a fleet version too.
    let private = write_labeled(&lead, "mine", pb::Taint::Trusted, pb::Scope::Agent).await;
    let r = lead.c.post(Post::pin(&t.id, &private.memory, private.version), None).await;
    assert_eq!(fak(&refused(r, Code::TrustViolation)), Some("TRUST_VIOLATION"));
    let r = lead
        .c
        .publish_memory(pb::PublishMemoryRequest { memory: private.memory.clone(), ..Default::default() }, None)
        .await;
    refused(r, Code::TrustViolation);
    // A scatter with one bad goal is refused whole, naming the goal.
    let mut goals = vec![goal(&w, "fine")];
    goals
        .push(pb::RankGoal { member: lead.id.clone(), body: body("secret", pb::Taint::Quarantined, pb::Scope::Fleet) });
    let rej = refused(lead.c.scatter(scatter_req(&t.id, goals), None).await, Code::TrustViolation);
    assert_eq!(rej.field.as_deref(), Some("goals[1].body.content"), "{rej:?}");
    // Nothing happened: no entry, no obligation, no opportunity.
    assert_eq!(last_entry(&lead, &t.id).await, before, "a refusal left an entry");
    assert!(w.turn().await.is_empty() && lead.turn().await.is_empty());
    assert!(w.opportunities().await.is_empty());
    // Other refusals carry their fak reason too: a non-member's send is NOT_FOUND / DEFAULT_DENY.
    let outsider = cx.agent().await;
    let rej = refused(send(&outsider, send_req(&t.id, fleet("hi"), None)).await, Code::NotFound);
    assert_eq!(fak(&rej), Some("DEFAULT_DENY"));
}

/// Design R2: an agent that never labels sees the protocol's behaviour: a post of an unlabeled
/// pin or of new content is accepted with the §6.3 responders, and its entry shows no labels.
async fn unlabeled_posts_keep_the_spec_behaviour(cx: Ctx) {
    let (a, b) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&a, &[&b]).await;
    let pin = a.memory("unlabeled").await;
    let p = a.post(Post::pin(&t.id, &pin.memory, pin.version)).await;
    // §6.3 rule 3: two speakers, so the other one responds.
    assert_eq!(p.responders, vec![b.id.clone()]);
    let e = b.c.get_entry(pb::GetEntryRequest { thread: t.id.clone(), entry: p.entry }).await.expect("entry");
    assert_eq!(e.labels, None, "an unlabeled entry shows no labels");
    assert!(!e.held);
    let p = a.post(Post::text(&t.id, "plain text")).await;
    let e = b.c.get_entry(pb::GetEntryRequest { thread: t.id.clone(), entry: p.entry }).await.expect("entry");
    assert_eq!(e.labels, None);
}

/// WidenScope makes a new version with the wider scope; the old pin keeps its labels; narrowing,
/// repeating and widening quarantined content are refused.
async fn widening_is_explicit_and_leaves_earlier_pins_their_labels(cx: Ctx) {
    let a = cx.agent().await;
    let pin = write_labeled(&a, "draft", pb::Taint::Tainted, pb::Scope::Agent).await;
    let w =
        a.c.widen_scope(
            pb::WidenScopeRequest { pin: Some(pin.clone()), scope: pb::Scope::Tenant as i32, ..Default::default() },
            None,
        )
        .await
        .expect("widen");
    let widened = outcome!(w.value.receipt, ScopeWidened);
    let to = widened.to.expect("to");
    assert_eq!((to.memory.as_str(), to.version), (pin.memory.as_str(), pin.version + 1));
    let read = |v: u32| pb::GetMemoryRequest { memory: pin.memory.clone(), version: Some(v) };
    let old = a.c.get_memory(read(pin.version)).await.expect("old version");
    let new = a.c.get_memory(read(to.version)).await.expect("new version");
    assert_eq!(old.labels, labels(pb::Taint::Tainted, pb::Scope::Agent), "the old pin keeps its labels");
    assert_eq!(new.labels, labels(pb::Taint::Tainted, pb::Scope::Tenant));
    let again = |scope: pb::Scope, p: &pb::MemoryPin| pb::WidenScopeRequest {
        pin: Some(p.clone()),
        scope: scope as i32,
        ..Default::default()
    };
    refused(a.c.widen_scope(again(pb::Scope::Tenant, &to), None).await, Code::NoEffect);
    refused(a.c.widen_scope(again(pb::Scope::Agent, &to), None).await, Code::InvalidArgument);
    let q = write_labeled(&a, "bad", pb::Taint::Quarantined, pb::Scope::Agent).await;
    let rej = refused(a.c.widen_scope(again(pb::Scope::Fleet, &q), None).await, Code::TrustViolation);
    assert_eq!(fak(&rej), Some("TRUST_VIOLATION"));
    // The author still reads its own quarantined version, with its labels.
    let mine = a.c.get_memory(pb::GetMemoryRequest { memory: q.memory.clone(), version: None }).await.expect("own");
    assert_eq!(mine.labels, labels(pb::Taint::Quarantined, pb::Scope::Agent));
}

/// §12.5: a pin the caller cannot read answers NOT_FOUND before any label check, so a refusal
/// never tells a quarantined private Memory from a missing one.
async fn errors_reveal_no_labels_of_unreadable_pins(cx: Ctx) {
    let (owner, other) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&other, &[]).await;
    let q = write_labeled(&owner, "hidden", pb::Taint::Quarantined, pb::Scope::Agent).await;
    let missing = pb::MemoryPin { memory: "mem_999999999".into(), version: 1 };
    let r1 = refused(send(&other, send_req(&t.id, pinned(&q), None)).await, Code::NotFound);
    let r2 = refused(send(&other, send_req(&t.id, pinned(&missing), None)).await, Code::NotFound);
    assert_eq!(r1.message, r2.message, "an unreadable pin and a missing one answer alike");
    assert!(!r1.message.contains("quarantine"), "the refusal revealed a label: {r1:?}");
}

/// A send asks exactly its addressees; the same request under the same key is posted once and
/// returns the first receipt.
async fn send_asks_its_addressees_and_a_replay_is_posted_once(cx: Ctx) {
    let (lead, a, b) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&lead, &[&a, &b]).await;
    let key = unique("send");
    let req = send_req(&t.id, fleet("please look"), to_agents(&[&b]));
    let first = lead.c.send(req.clone(), Some(key.clone())).await.expect("send");
    let again = lead.c.send(req, Some(key.clone())).await.expect("replay");
    assert!(!first.replayed && again.replayed);
    assert_eq!(first.value.receipt, again.value.receipt, "a replay returns the first receipt");
    let s = outcome!(first.value.receipt, Sent);
    assert_eq!(s.responders, vec![b.id.clone()]);
    assert_eq!(s.readers, 2, "two other members read it now");
    assert_eq!(last_entry(&lead, &t.id).await, s.entry, "the replay posted nothing");
    let asked = mailbox(&b, &t.id, 0, pb::MailboxFilter::AskedMe, 10).await;
    assert_eq!(asked.items.len(), 1);
    let item = &asked.items[0];
    assert_eq!(item.labels, labels(pb::Taint::Tainted, pb::Scope::Fleet));
    assert_eq!(item.content.as_ref().map(|c| c.body.clone()), Some(b"please look".to_vec()));
    assert!(item.my_response.is_some(), "the asked member sees its own pending response");
    assert!(mailbox(&a, &t.id, 0, pb::MailboxFilter::AskedMe, 10).await.items.is_empty());
    // A different request under the used key is refused and posts nothing.
    let r = lead.c.send(send_req(&t.id, fleet("other"), None), Some(key)).await;
    refused(r, Code::IdempotencyKeyReused);
}

/// A topic: the governor publishes; a watcher sees each publish live; a subscriber admitted later
/// reads every earlier message from the facts.
async fn pub_sub_delivers_to_watchers_and_late_subscribers_catch_up(cx: Ctx) {
    let (publisher, early, late) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let t = publisher.thread(pb::Role::Observer).await;
    early.join(&t.secret).await;
    let mut stream = early.c.watch_thread(&t.id, 0).await.expect("watch");
    let mut published = Vec::new();
    for i in 0..3 {
        published.push(sent(&publisher, send_req(&t.id, fleet(&format!("update {i}")), None)).await.entry);
    }
    let mut seen = Vec::new();
    let start = Instant::now();
    while seen.len() < published.len() {
        assert!(start.elapsed() < CASE_BOUND, "the watcher missed a publish: {seen:?}");
        match tokio::time::timeout(Duration::from_secs(20), stream.next()).await {
            Ok(Some(Ok(ev))) => seen.extend(ev.entries.iter().map(|e| e.seq)),
            other => panic!("the watch ended early: {other:?}"),
        }
    }
    assert_eq!(seen, published, "live delivery in order, no gap, no duplicate");
    // An observer receives but cannot send (a2a.recv only).
    let rej = refused(send(&early, send_req(&t.id, fleet("me too"), None)).await, Code::CannotSpeak);
    assert_eq!(fak(&rej), Some("DEFAULT_DENY"));
    late.join(&t.secret).await;
    let m = mailbox(&late, &t.id, 0, pb::MailboxFilter::All, 50).await;
    let seqs: Vec<u64> = m.items.iter().map(|i| i.entry.as_ref().map_or(0, |e| e.seq)).collect();
    assert_eq!(seqs, published, "the late subscriber catches up from entry 1");
    assert!(m.items.iter().all(|i| i.content.is_some()), "every earlier message is readable");
    assert!(late.turn().await.is_empty(), "publishing asks nobody");
}

/// Receiving is a read after a cursor: paging through the mailbox from any cursor gives every
/// entry once, in order, and a resumed read continues exactly where the last left off.
async fn mailbox_cursor_reads_have_no_gap_and_no_duplicate(cx: Ctx) {
    let (lead, w) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&lead, &[&w]).await;
    let mut all = Vec::new();
    for i in 0..7 {
        let to = if i % 2 == 0 { to_agents(&[&w]) } else { None };
        all.push((sent(&lead, send_req(&t.id, fleet(&format!("m{i}")), to)).await.entry, i % 2 == 0));
    }
    for (filter, expected) in [
        (pb::MailboxFilter::All, all.iter().map(|(e, _)| *e).collect::<Vec<_>>()),
        (pb::MailboxFilter::AskedMe, all.iter().filter(|(_, asked)| *asked).map(|(e, _)| *e).collect()),
    ] {
        let (mut cursor, mut got) = (0u64, Vec::new());
        for _ in 0..20 {
            let page = mailbox(&w, &t.id, cursor, filter, 2).await;
            got.extend(page.items.iter().map(|i| i.entry.as_ref().map_or(0, |e| e.seq)));
            match page.next_after {
                Some(next) => {
                    assert!(next > cursor, "the cursor moves forward");
                    cursor = next;
                }
                None => break,
            }
        }
        assert_eq!(got, expected, "{filter:?}: every entry once, in order");
    }
}

/// Design §3.6: a correction replying to a status that is no longer its author's latest entry is
/// refused STALE_BASE (fak_reason UNWITNESSED) and posts nothing.
async fn a_stale_correction_is_refused_as_stale_base(cx: Ctx) {
    let (lead, w) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&lead, &[&w]).await;
    let status = sent(&w, send_req(&t.id, fleet("status 1"), None)).await.entry;
    let correction = |to: u64| pb::SendRequest {
        reply_to: Some(to),
        reply_to_latest: true,
        ..send_req(&t.id, fleet("do it differently"), to_agents(&[&w]))
    };
    sent(&lead, correction(status)).await;
    let newer = sent(&w, send_req(&t.id, fleet("status 2"), None)).await.entry;
    let before = last_entry(&lead, &t.id).await;
    let rej = refused(send(&lead, correction(status)).await, Code::StaleBase);
    assert_eq!(fak(&rej), Some("UNWITNESSED"));
    assert_eq!(last_entry(&lead, &t.id).await, before);
    sent(&lead, correction(newer)).await;
}

/// A scatter is one action: refused whole when one rank is invalid (nothing on any node), and
/// when accepted every node holds all its ranks — never part of them.
async fn scatter_is_atomic_on_every_node(cx: Ctx) {
    let (lead, w1, w2, w3, outsider) =
        (cx.agent().await, cx.agent().await, cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&lead, &[&w1, &w2, &w3]).await;
    let before = last_entry(&lead, &t.id).await;
    let bad = vec![goal(&w1, "a"), goal(&w2, "b"), goal(&outsider, "c")];
    let rej = refused(lead.c.scatter(scatter_req(&t.id, bad), None).await, Code::InvalidTarget);
    assert_eq!(rej.field.as_deref(), Some("goals[2].member"));
    assert_eq!(last_entry(&lead, &t.id).await, before, "a refused scatter posted something");
    assert!(w1.opportunities().await.is_empty() && w2.opportunities().await.is_empty());
    // Accepted: ranks in ascending member id whatever the request order.
    let goals = vec![goal(&w3, "c"), goal(&w1, "a"), goal(&w2, "b")];
    let s = outcome!(lead.c.scatter(scatter_req(&t.id, goals), None).await.expect("scatter").value.receipt, Scattered);
    let mut ids = vec![w1.id.clone(), w2.id.clone(), w3.id.clone()];
    ids.sort_by_key(|id| id.trim_start_matches("ag_").parse::<u64>().unwrap_or(0));
    assert_eq!(s.ranks.iter().map(|r| r.member.clone()).collect::<Vec<_>>(), ids);
    assert_eq!(s.header, before + 1);
    for node in per_node(&cx, &lead).await {
        let view = eventually("the node applied the scatter", || {
            let node = node.clone();
            let thread = t.id.clone();
            async move {
                match node
                    .get_collective(pb::GetCollectiveRequest { thread, header: s.header, include_outputs: false })
                    .await
                {
                    Ok(v) => Some(v),
                    Err(_) => None,
                }
            }
        })
        .await;
        assert_eq!(view.size, 3);
        assert_eq!(view.ranks.len(), 3, "a node holds part of a scatter: {view:?}");
        for (r, rank) in view.ranks.iter().enumerate() {
            assert_eq!(rank.rank as usize, r);
            assert_eq!(rank.entry, s.header + 1 + r as u64, "the ranks' entries follow the header");
            assert_eq!(rank.assignment.as_ref().map(|a| a.addressee.clone()), Some(ids[r].clone()));
        }
    }
}

/// Gather: deliveries come back in rank order; `complete` and `all_delivered` tell a rank that
/// left from one that delivered.
async fn gather_returns_deliveries_in_rank_order(cx: Ctx) {
    let (lead, w1, w2, w3) = (cx.agent().await, cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&lead, &[&w1, &w2, &w3]).await;
    let goals = vec![goal(&w1, "a"), goal(&w2, "b"), goal(&w3, "c")];
    let s = outcome!(lead.c.scatter(scatter_req(&t.id, goals), None).await.expect("scatter").value.receipt, Scattered);
    let by_member = |m: &str| [&w1, &w2, &w3].into_iter().find(|a| a.id == m).expect("a worker").clone();
    // Deliver in reverse rank order; the gather still lists rank order.
    for r in s.ranks.iter().rev().skip(1) {
        let w = by_member(&r.member);
        w.take(&r.assignment).await;
        w.deliver(&r.assignment, &format!("out of {}", w.id)).await;
    }
    let last = by_member(&s.ranks[0].member);
    let gather = |include_outputs| pb::GetCollectiveRequest { thread: t.id.clone(), header: s.header, include_outputs };
    let partial = lead.c.get_collective(gather(true)).await.expect("gather");
    assert!(!partial.complete && !partial.all_delivered, "rank 0 has not delivered: {partial:?}");
    // Rank 0 leaves: its assignment is voided; the gather is complete but not all delivered.
    last.c.leave(pb::LeaveRequest { thread: t.id.clone(), ..Default::default() }, None).await.expect("leave");
    let view = lead.c.get_collective(gather(true)).await.expect("gather");
    assert!(view.complete && !view.all_delivered, "{view:?}");
    let outputs: Vec<Option<String>> = view
        .ranks
        .iter()
        .map(|r| match r.assignment.as_ref().and_then(|a| a.state.clone()) {
            Some(pb::assignment::State::Delivered(d)) => {
                d.output.map(|c| String::from_utf8_lossy(&c.body).into_owned())
            }
            _ => None,
        })
        .collect();
    let expected: Vec<Option<String>> = s
        .ranks
        .iter()
        .enumerate()
        .map(|(i, r)| if i == 0 { None } else { Some(format!("out of {}", r.member)) })
        .collect();
    assert_eq!(outputs, expected, "outputs in rank order, the departed rank without one");
    let bare = lead.c.get_collective(gather(false)).await.expect("gather");
    assert!(bare.ranks.iter().skip(1).all(|r| r.output_omitted), "without outputs every delivery is omitted");
    // A member reads the collective; a non-member gets NOT_FOUND.
    let outsider = cx.agent().await;
    refused(outsider.c.get_collective(gather(false)).await, Code::NotFound);
}

/// A barrier is released only when every asked member replied or handled — not by the author,
/// not by time.
async fn barrier_is_released_only_by_real_responses(cx: Ctx) {
    let (lead, w1, w2, obs) = (cx.agent().await, cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&lead, &[&w1, &w2]).await;
    let observer = lead
        .c
        .issue_grant(
            pb::IssueGrantRequest { thread: t.id.clone(), role: pb::Role::Observer as i32, ..Default::default() },
            None,
        )
        .await
        .expect("grant");
    obs.join(&observer.value.grant_secret).await;
    let b = sent(&lead, send_req(&t.id, fleet("ready?"), to_all())).await;
    assert!(!b.responders.contains(&obs.id), "an observer is not asked");
    let v = barrier(&lead, &t.id, b.entry).await;
    assert_eq!(v.state, pb::BarrierState::Waiting as i32);
    assert_eq!((v.size, v.pending), (3, 2));
    reply(&w1, &t.id, b.entry).await;
    assert_eq!(barrier(&w2, &t.id, b.entry).await.state, pb::BarrierState::Waiting as i32);
    w2.c.handle(pb::HandleRequest { thread: t.id.clone(), entry: b.entry, note: None, ..Default::default() }, None)
        .await
        .expect("handle");
    let v = barrier(&obs, &t.id, b.entry).await;
    assert_eq!(v.state, pb::BarrierState::Released as i32, "{v:?}");
    assert_eq!((v.pending, v.absent), (0, 0));
    let arrivals: Vec<i32> = v.ranks.iter().map(|r| r.arrival).collect();
    assert!(arrivals.contains(&(pb::BarrierArrival::Author as i32)));
    assert!(arrivals.contains(&(pb::BarrierArrival::Replied as i32)));
    assert!(arrivals.contains(&(pb::BarrierArrival::Handled as i32)));
}

/// A departure is not an arrival: a member who leaves breaks the barrier for good.
async fn a_departure_breaks_a_barrier(cx: Ctx) {
    let (lead, w1, w2) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&lead, &[&w1, &w2]).await;
    let b = sent(&lead, send_req(&t.id, fleet("sync"), to_all())).await;
    reply(&w1, &t.id, b.entry).await;
    w2.c.leave(pb::LeaveRequest { thread: t.id.clone(), ..Default::default() }, None).await.expect("leave");
    let v = barrier(&lead, &t.id, b.entry).await;
    assert_eq!(v.state, pb::BarrierState::Broken as i32, "{v:?}");
    assert_eq!(v.absent, 1);
    let gone = v.ranks.iter().find(|r| r.member == w2.id).expect("w2's rank");
    assert_eq!(gone.arrival, pb::BarrierArrival::MembershipEnded as i32);
}
