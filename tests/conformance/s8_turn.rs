//! §8 Turn and recovery (and §10.2 items 1–5).

use kungfu_client::{Client, ClientOptions, Code, pb};
use kungfu_system_tests::conformance::*;
use kungfu_system_tests::{cases, outcome};
use pb::obligation_ref::Kind as Ref;
use std::collections::HashSet;
use std::time::Duration;

cases! {
    recovery_with_every_client_state_wiped_completes_all_work_from_the_turn_alone
        ["§8.14", "§8.15", "§8.16", "§10.2.5"],
    the_turn_lists_every_obligation_once_in_arising_order_with_its_next_step
        ["§8.2", "§8.8", "§8.13", "§10.2.2"],
    a_paged_turn_returns_every_obligation_once_in_the_order_of_one_page ["§8.10"],
    a_traversal_across_changes_omits_no_obligation_open_at_its_end ["§8.10"],
    untaken_assignment_and_restricted_task_are_opportunities_that_bind_nobody ["§8.6", "§8.7"],
    an_open_thread_or_task_creates_no_obligation_by_being_open ["§8.9"],
}

// ---------------------------------------------------------------------------------------------
// Helpers.

/// One agent (`me`) holding one obligation of every kind across two threads and two Tasks:
/// a response in t1 (asked) and in t2 (two speakers), the delivery of an assignment it took, the
/// judgment of an assignment delivered to it, the delivery of a Task it took and the judgment of
/// a delivery on its own Task.
struct Six {
    me: Agent,
    a: Agent,
    b: Agent,
    t1: String,
    t2: String,
    e1: u64,
    e2: u64,
    asg1: String,
    asg2: String,
    task_a: String,
    eng1: String,
    task_me: String,
    eng2: String,
}

impl Six {
    /// The obligations of `me`, in the order they arose.
    fn expected(&self) -> Vec<Ref> {
        vec![
            response(&self.t1, self.e1, &self.me.id),
            response(&self.t2, self.e2, &self.me.id),
            Ref::AssignmentDelivery(self.asg1.clone()),
            Ref::AssignmentJudgment(self.asg2.clone()),
            Ref::EngagementDelivery(self.eng1.clone()),
            Ref::EngagementJudgment(self.eng2.clone()),
        ]
    }
}

async fn six(cx: &Ctx) -> Six {
    let (me, a, b) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let t1 = cx.team(&a, &[&me, &b]).await.id;
    let t2 = cx.team(&b, &[&me]).await.id;
    // §6.3 rule 1 in t1 (three speakers, ask), rule 3 in t2 (exactly two speakers).
    let e1 = a.post(Post::text(&t1, "a question for me").ask([me.id.clone()])).await.entry;
    let e2 = b.post(Post::text(&t2, "hello")).await.entry;
    let (_, asg1) = a.assign(&t1, &me.id, None, None).await;
    me.take(&asg1).await;
    let (_, asg2) = me.assign(&t2, &b.id, None, None).await;
    b.take(&asg2).await;
    b.deliver(&asg2, "b's work").await;
    let task_a = a.task(open(), contract(None, None)).await;
    let eng1 = me.take_task(&task_a).await.engagement;
    let task_me = me.task(open(), contract(None, None)).await;
    let eng2 = b.take_task(&task_me).await.engagement;
    b.deliver_task(&task_me, "b's task work").await;
    Six { me, a, b, t1, t2, e1, e2, asg1, asg2, task_a, eng1, task_me, eng2 }
}

fn response(thread: &str, entry: u64, responder: &str) -> Ref {
    Ref::Response(pb::ResponseObligation { thread: thread.into(), entry, responder: responder.into() })
}

/// The obligation reference of a turn item (every item names one).
fn oref(item: &pb::TurnItem) -> Ref {
    item.obligation.as_ref().and_then(|o| o.kind.clone()).unwrap_or_else(|| panic!("an item without a ref: {item:?}"))
}

fn refs(items: &[pb::TurnItem]) -> Vec<Ref> {
    items.iter().map(oref).collect()
}

/// A hashable name of an obligation reference.
fn key_of(r: &Ref) -> String {
    match r {
        Ref::Response(x) => format!("response/{}/{}/{}", x.thread, x.entry, x.responder),
        Ref::AssignmentDelivery(a) => format!("assignment_delivery/{a}"),
        Ref::AssignmentJudgment(a) => format!("assignment_judgment/{a}"),
        Ref::EngagementDelivery(e) => format!("engagement_delivery/{e}"),
        Ref::EngagementJudgment(e) => format!("engagement_judgment/{e}"),
    }
}

/// Every page of the turn read with `page_size`; asserts each page respects it.
async fn paged_turn(c: &Client, page_size: u32) -> Vec<pb::TurnItem> {
    let mut out = Vec::new();
    let mut cursor = String::new();
    for _ in 0..1000 {
        let page = c.get_turn(pb::GetTurnRequest { cursor: cursor.clone(), page_size }).await.expect("turn page");
        assert!(
            page.items.len() <= page_size as usize,
            "a page of {} items for page_size {page_size}",
            page.items.len()
        );
        out.extend(page.items);
        if page.next_cursor.is_empty() {
            return out;
        }
        cursor = page.next_cursor;
    }
    panic!("the traversal never ended")
}

async fn working_set(c: &Client, object: &str) -> pb::WorkingSet {
    c.get_working_set(pb::GetWorkingSetRequest { object: object.into() }).await.expect("working set")
}

/// §8.2, §8.13, L4: one item is of the closed catalogue: its kind matches its reference, its next
/// step is that kind's own step, a response has no deadline while delivery and judgment have one,
/// and the object is the thread or Task the obligation lives in. `holder` is the turn's owner.
fn assert_catalogue(item: &pb::TurnItem, holder: &str) {
    use pb::{NextStep as N, ObligationKind as K};
    let (kind, next, in_task) = match oref(item) {
        Ref::Response(r) => {
            assert_eq!(r.responder, holder, "a response in the turn of another agent: {item:?}");
            assert_eq!(r.thread, item.object, "a response lives in its entry's thread: {item:?}");
            (K::Response, N::Respond, false)
        }
        Ref::AssignmentDelivery(_) => (K::Delivery, N::Deliver, false),
        Ref::AssignmentJudgment(_) => (K::Judgment, N::Judge, false),
        Ref::EngagementDelivery(_) => (K::Delivery, N::Deliver, true),
        Ref::EngagementJudgment(_) => (K::Judgment, N::Judge, true),
    };
    assert_eq!(item.kind(), kind, "kind and reference disagree: {item:?}");
    assert_eq!(item.next(), next, "the next step is not the obligation's own: {item:?}");
    assert_eq!(item.due_at_unix_micros.is_some(), kind != K::Response, "deadline of {item:?}");
    let prefix = if in_task { "task_" } else { "th_" };
    assert!(item.object.starts_with(prefix), "the object of {item:?} is not a {prefix} object");
    assert!(item.arose_at_unix_micros > 0, "no arising time: {item:?}");
}

// ---------------------------------------------------------------------------------------------
// §8.15, §8.16, §10.2.5: recovery.

/// Ends every obligation in the turn of the agent `c` acts as, using only the references the turn
/// and the working sets give (the agent kept nothing else); returns the actions taken.
async fn recover(c: &Client) -> Vec<&'static str> {
    let mut done = Vec::new();
    for _round in 0..4 {
        let items = c.turn_all(100).await.expect("read the turn");
        if items.is_empty() {
            return done;
        }
        for item in items {
            let set = working_set(c, &item.object).await;
            assert_eq!(set.object, item.object);
            let listed = set
                .obligations
                .iter()
                .find(|o| o.obligation == item.obligation)
                .unwrap_or_else(|| panic!("the working set of {} does not list {item:?}: {set:?}", item.object));
            assert_eq!(listed.next, item.next, "the working set and the turn disagree on the next step");
            let r = oref(&item);
            let needed = match &r {
                Ref::Response(_) => "post",
                Ref::AssignmentDelivery(_) => "deliver_assignment",
                Ref::AssignmentJudgment(_) => "adopt_assignment",
                Ref::EngagementDelivery(_) => "deliver_task",
                Ref::EngagementJudgment(_) => "adopt_engagement",
            };
            assert!(
                set.available_actions.iter().any(|a| a == needed),
                "{needed} is not offered for {item:?}: {:?}",
                set.available_actions
            );
            match r {
                Ref::Response(x) => {
                    // Content comes on demand: the entry it must answer.
                    let view = c
                        .get_entry(pb::GetEntryRequest { thread: x.thread.clone(), entry: x.entry })
                        .await
                        .expect("read the entry owed a response");
                    assert!(view.content.is_some_and(|b| !b.body.is_empty()), "the entry's content is readable");
                    let w = c.post(Post::text(&x.thread, "my answer").reply_to(x.entry), None).await.expect("reply");
                    assert!(outcome!(w.value.receipt, Posted).ended_own_response, "the reply ended the response");
                }
                Ref::AssignmentDelivery(a) => {
                    let req =
                        pb::DeliverAssignmentRequest { assignment: a, output: text("my work"), ..Default::default() };
                    c.deliver_assignment(req, None).await.expect("deliver the assignment");
                }
                Ref::AssignmentJudgment(a) => {
                    let req = pb::AdoptAssignmentRequest { assignment: a, ..Default::default() };
                    c.adopt_assignment(req, None).await.expect("adopt the delivery");
                }
                Ref::EngagementDelivery(_) => {
                    let req = pb::DeliverTaskRequest {
                        task: item.object.clone(),
                        output: text("my task work"),
                        ..Default::default()
                    };
                    c.deliver_task(req, None).await.expect("deliver the Task");
                }
                Ref::EngagementJudgment(e) => {
                    let req = pb::AdoptEngagementRequest { engagement: e, ..Default::default() };
                    c.adopt_engagement(req, None).await.expect("adopt the Task delivery");
                }
            }
            done.push(needed);
        }
    }
    panic!("the turn did not empty; done {done:?}")
}

/// §8.15, §8.16, §10.2.5: an agent holds an open obligation of every kind; then every client state
/// is wiped (a new client built from nothing but the agent key, every id dropped). From its turn
/// and the working sets alone it replies, delivers, judges and delivers the Task; its turn is then
/// empty, and the others hold what follows. No notification is used.
async fn recovery_with_every_client_state_wiped_completes_all_work_from_the_turn_alone(cx: Ctx) {
    // The others' view, kept for checking afterwards only: it never reaches `recover`.
    let (key, a, b, witness) = {
        let s = six(&cx).await;
        let witness = (s.t1.clone(), s.t2.clone(), s.asg1.clone(), s.asg2.clone(), s.eng1.clone(), s.eng2.clone());
        (s.me.key.clone(), s.a, s.b, witness)
        // `s.me` (its client and every id it learned) is dropped here.
    };
    // A brand-new session: new channels, no cache, only the key.
    let fresh = Client::connect(cx.anonymous().endpoints(), Some(key.clone()), ClientOptions::default())
        .await
        .expect("a new client from the key alone");
    let done = recover(&fresh).await;
    let mut sorted = done.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        ["adopt_assignment", "adopt_engagement", "deliver_assignment", "deliver_task", "post", "post"],
        "one action per obligation"
    );
    // Another new session finds nothing left.
    let again = Client::connect(cx.anonymous().endpoints(), Some(key), ClientOptions::default()).await.expect("client");
    assert!(again.turn_all(100).await.expect("turn").is_empty(), "the turn is empty after recovery");

    // The work really happened: the other parties hold what follows from it.
    let (t1, t2, asg1, asg2, eng1, eng2) = witness;
    let ta = a.turn().await;
    let mut kinds: Vec<String> =
        refs(&ta).iter().map(|r| key_of(r).split('/').next().unwrap_or("").to_string()).collect();
    kinds.sort();
    assert_eq!(kinds, ["assignment_judgment", "engagement_judgment", "response"], "a's turn: {ta:?}");
    assert!(refs(&ta).contains(&Ref::AssignmentJudgment(asg1.clone())));
    assert!(refs(&ta).contains(&Ref::EngagementJudgment(eng1.clone())));
    assert!(ta.iter().any(|i| i.kind() == pb::ObligationKind::Response && i.object == t1), "a owes a reply in t1");
    let tb = b.turn().await;
    assert_eq!(tb.len(), 1, "b's turn: {tb:?}");
    assert!(matches!(oref(&tb[0]), Ref::Response(r) if r.thread == t2));
    assert!(matches!(a.assignment(&asg1).await.state, Some(pb::assignment::State::Delivered(_))));
    assert_eq!(assignment_outcome(&b.assignment(&asg2).await), Some(pb::AssignmentOutcome::Adopted));
    assert!(matches!(a.engagement(&eng1).await.state, Some(pb::engagement::State::Delivered(_))));
    assert_eq!(engagement_outcome(&b.engagement(&eng2).await), Some(pb::EngagementOutcome::Adopted));
}

// ---------------------------------------------------------------------------------------------
// §8.8, §8.10, §8.13: the turn.

/// §8 rule (§8.8, §8.2, §8.13, §10.2.2): the turn holds every open obligation across memberships
/// and engagements, ordered by when each arose, each once, each with its next step; the catalogue
/// is closed and nothing of it leaks into another agent's turn.
async fn the_turn_lists_every_obligation_once_in_arising_order_with_its_next_step(cx: Ctx) {
    let s = six(&cx).await;
    let items = s.me.turn().await;
    assert_eq!(refs(&items), s.expected(), "the turn: {items:?}");
    for item in &items {
        assert_catalogue(item, &s.me.id);
    }
    assert_eq!(
        items.iter().map(|i| i.object.as_str()).collect::<Vec<_>>(),
        [&s.t1, &s.t2, &s.t1, &s.t2, &s.task_a, &s.task_me].map(|x| x.as_str())
    );
    // Ordered by when each arose; no duplicates.
    assert!(items.windows(2).all(|p| p[0].arose_at_unix_micros <= p[1].arose_at_unix_micros), "{items:?}");
    assert_eq!(refs(&items).iter().map(key_of).collect::<HashSet<_>>().len(), items.len(), "a duplicate");
    // Nothing of `me` is in the others' turns (every obligation has one holder).
    let mine: HashSet<String> = s.expected().iter().map(key_of).collect();
    for other in [&s.a, &s.b] {
        let theirs = other.turn().await;
        for item in &theirs {
            assert_catalogue(item, &other.id);
            assert!(!mine.contains(&key_of(&oref(item))), "{} holds {item:?}", other.id);
        }
    }
}

/// §8 rule (§8.10): the turn may be paginated; with page sizes 1 and 2 over six obligations, a
/// complete traversal returns each exactly once in the order of one big page.
async fn a_paged_turn_returns_every_obligation_once_in_the_order_of_one_page(cx: Ctx) {
    let s = six(&cx).await;
    let one_page = s.me.c.get_turn(pb::GetTurnRequest { cursor: String::new(), page_size: 100 }).await.expect("turn");
    assert!(one_page.next_cursor.is_empty(), "six obligations fit one page of 100");
    assert_eq!(refs(&one_page.items), s.expected());
    for size in [1, 2] {
        let paged = paged_turn(&s.me.c, size).await;
        assert_eq!(paged, one_page.items, "page size {size}");
    }
    // A cursor belongs to the traversal of the agent it came from (§9: it grants nothing).
    let p1 = s.me.c.get_turn(pb::GetTurnRequest { cursor: String::new(), page_size: 1 }).await.expect("page 1");
    assert!(!p1.next_cursor.is_empty());
    let r = refused(
        s.b.c.get_turn(pb::GetTurnRequest { cursor: p1.next_cursor.clone(), page_size: 1 }).await,
        Code::InvalidArgument,
    );
    assert_eq!(r.field.as_deref(), Some("cursor"));
}

/// §8 rule (§8.10): obligations ending or arising between the pages of a traversal never make it
/// omit one that is still open at its end, nor return one twice.
async fn a_traversal_across_changes_omits_no_obligation_open_at_its_end(cx: Ctx) {
    let (g, me) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&g, &[&me]).await.id;
    let mut entries = Vec::new();
    for i in 0..9 {
        entries.push(g.post(Post::text(&t, &format!("p{i}"))).await.entry);
    }
    let page = |cursor: String| {
        let c = me.c.clone();
        async move { c.get_turn(pb::GetTurnRequest { cursor, page_size: 2 }).await.expect("turn page") }
    };
    let p1 = page(String::new()).await;
    let p2 = page(p1.next_cursor.clone()).await;
    let mut seen: Vec<Ref> = refs(&p1.items).into_iter().chain(refs(&p2.items)).collect();
    // Between pages: two seen obligations and one unseen end, and a new one arises.
    for e in [entries[1], entries[3], entries[7]] {
        me.c.handle(pb::HandleRequest { thread: t.clone(), entry: e, ..Default::default() }, None)
            .await
            .expect("handle");
    }
    let late = g.post(Post::text(&t, "late")).await.entry;
    let mut cursor = p2.next_cursor;
    let mut pages = 0;
    while !cursor.is_empty() {
        let p = page(cursor).await;
        seen.extend(refs(&p.items));
        cursor = p.next_cursor;
        pages += 1;
        assert!(pages < 50, "the traversal never ended");
    }
    let keys: Vec<String> = seen.iter().map(key_of).collect();
    let unique: HashSet<&String> = keys.iter().collect();
    assert_eq!(unique.len(), keys.len(), "an obligation was returned twice: {keys:?}");
    let now = me.turn().await;
    assert_eq!(now.len(), 9 - 3 + 1);
    for item in &now {
        assert!(unique.contains(&key_of(&oref(item))), "the traversal omitted {item:?}");
    }
    assert!(unique.contains(&key_of(&response(&t, late, &me.id))));
    assert!(!unique.contains(&key_of(&response(&t, entries[7], &me.id))), "an obligation ended before it was reached");
}

// ---------------------------------------------------------------------------------------------
// §8.6, §8.7, §8.9: opportunities and open objects.

/// §8 rule (§8.6, §8.7): an untaken assignment addressed to an agent and a restricted Task naming
/// it are its opportunities, found without knowing the thread or Task; they are in nobody's turn.
/// Taking them through the ids the opportunities give creates the delivery obligations.
async fn untaken_assignment_and_restricted_task_are_opportunities_that_bind_nobody(cx: Ctx) {
    let (me, g, h, other) = (cx.agent().await, cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&g, &[&me, &other]).await.id;
    let (_, asg) = g.assign(&t, &me.id, None, None).await;
    let task = h.task(restricted(&[&me]), contract(None, None)).await;
    let open_task = h.task(open(), contract(None, None)).await;
    let opps = me.opportunities().await;
    let found: Vec<(Option<pb::opportunity::Kind>, String)> =
        opps.iter().map(|o| (o.kind.clone(), o.object.clone())).collect();
    assert_eq!(
        found,
        [
            (Some(pb::opportunity::Kind::Assignment(asg.clone())), t.clone()),
            (Some(pb::opportunity::Kind::Task(task.clone())), task.clone())
        ],
        "the opportunities of the addressee (an open Task is none): {opps:?}"
    );
    assert!(opps[0].arose_at_unix_micros <= opps[1].arose_at_unix_micros);
    // They bind no one: no turn holds them, the assignment has no running deadline, and agents
    // that are not named see none of them.
    for x in [&me, &g, &h, &other] {
        assert!(x.turn().await.is_empty(), "{} has an obligation: an opportunity binds nobody", x.id);
    }
    assert!(matches!(g.assignment(&asg).await.state, Some(pb::assignment::State::Open(_))));
    assert!(other.opportunities().await.is_empty() && g.opportunities().await.is_empty());
    // The addressee takes them using only what the opportunities gave.
    for o in opps {
        match o.kind.expect("a kind") {
            pb::opportunity::Kind::Assignment(a) => {
                me.take(&a).await;
            }
            pb::opportunity::Kind::Task(k) => {
                me.take_task(&k).await;
            }
        }
    }
    assert!(me.opportunities().await.is_empty(), "a taken opportunity is no longer one");
    let items = me.turn().await;
    assert_eq!(items.len(), 2, "{items:?}");
    assert_eq!(oref(&items[0]), Ref::AssignmentDelivery(asg));
    assert!(matches!(oref(&items[1]), Ref::EngagementDelivery(_)) && items[1].object == task);
    assert!(items.iter().all(|i| i.next() == pb::NextStep::Deliver));
    assert!(h.turn().await.is_empty() && g.turn().await.is_empty());
    let _ = open_task;
}

/// §8 rule (§8.9): an open thread with members and a broadcast entry, and an open Task, create no
/// obligation (and no opportunity) by being open.
async fn an_open_thread_or_task_creates_no_obligation_by_being_open(cx: Ctx) {
    let agents = cx.agents(4).await;
    let (g, s1, s2, o) = (&agents[0], &agents[1], &agents[2], &agents[3]);
    let t = cx.team(g, &[s1, s2]).await;
    let grant =
        g.c.issue_grant(
            pb::IssueGrantRequest { thread: t.id.clone(), role: pb::Role::Observer as i32, ..Default::default() },
            None,
        )
        .await
        .expect("observer grant");
    o.join(&grant.value.grant_secret).await;
    // Three may speak: a post with no ask and no reply is a broadcast (§6.3 rule 4).
    let posted = g.post(Post::text(&t.id, "broadcast to three speakers")).await;
    assert!(posted.responders.is_empty());
    let task = g.task(open(), contract(None, None)).await;
    for x in [g, s1, s2, o] {
        assert!(x.turn().await.is_empty(), "{} has obligations", x.id);
        assert!(working_set(&x.c, &t.id).await.obligations.is_empty());
        assert!(working_set(&x.c, &task).await.obligations.is_empty());
        assert!(x.opportunities().await.is_empty(), "an open Task is not an opportunity of {}", x.id);
    }
}
