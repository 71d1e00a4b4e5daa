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
    obligations_arise_and_end_only_through_recorded_facts ["§8.1", "§10.2.1"],
    the_obligation_catalogue_stays_closed_across_every_action ["§8.2", "§8.13", "§10.2.2"],
    a_response_is_owed_by_each_responder_until_one_of_its_exits ["§8.3", "§10.2.2"],
    a_delivery_is_owed_by_the_taker_until_deliver_drop_void_or_its_deadline ["§8.4", "§10.2.2"],
    a_judgment_is_owed_by_the_requester_until_adopt_reject_or_its_deadline ["§8.5", "§10.2.2"],
    every_obligation_has_an_exit_its_holder_takes_alone ["§10.2.2"],
    the_working_set_gives_identity_state_role_history_obligations_and_actions ["§8.11"],
    reads_are_bounded_digests_come_first_and_content_on_demand ["§8.11", "§8.12"],
    every_change_of_an_object_is_a_recorded_fact_with_its_actor ["§10.2.1"],
    replays_return_the_first_result_and_disclose_secrets_once ["§10.2.3"],
    competing_actions_end_each_obligation_once_and_never_overrun_a_limit ["§10.2.4"],
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
    // The open Task was never an opportunity, and still binds nobody.
    assert!(h.opportunities().await.is_empty() && working_set(&me.c, &open_task).await.obligations.is_empty());
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

// ---------------------------------------------------------------------------------------------
// §8.1, §8.2, §8.3–§8.5, §10.2.1, §10.2.2: the catalogue and where obligations come from.

/// The newest fact of an object's history, as (fact name, actor).
async fn newest_fact(c: &Client, object: &str) -> (String, Option<String>) {
    let set = working_set(c, object).await;
    let h = set.history.first().unwrap_or_else(|| panic!("{object} has no history"));
    (h.fact.clone(), h.actor.clone())
}

/// §8 rule (§8.1, §10.2.1): obligations are derived from facts and cannot be written directly:
/// the API has no call that writes one, attempts by the wrong party to end or create them are
/// refused and reads change nothing, so every turn stays as it was; each change of a turn follows
/// a recorded fact with its actor (a post with ask adds the response, a handle or a retraction
/// removes it).
async fn obligations_arise_and_end_only_through_recorded_facts(cx: Ctx) {
    let s = six(&cx).await;
    let all = [&s.me, &s.a, &s.b];
    let mut before = Vec::new();
    for x in all {
        before.push(x.turn().await);
    }
    assert_eq!(refs(&before[0]), s.expected());
    let handle = |t: &str, e: u64| pb::HandleRequest { thread: t.into(), entry: e, ..Default::default() };
    // The wrong parties try to end or take over me's obligations.
    refused(s.b.c.handle(handle(&s.t1, s.e1), None).await, Code::NoPendingResponse);
    refused(
        s.b.c.retract(pb::RetractRequest { thread: s.t1.clone(), entry: s.e1, ..Default::default() }, None).await,
        Code::NotAuthor,
    );
    let deliver =
        pb::DeliverAssignmentRequest { assignment: s.asg1.clone(), output: text("not mine"), ..Default::default() };
    refused(s.b.c.deliver_assignment(deliver, None).await, Code::NotTaker);
    let drop = pb::DropAssignmentRequest { assignment: s.asg1.clone(), ..Default::default() };
    refused(s.b.c.drop_assignment(drop, None).await, Code::NotTaker);
    let adopt = pb::AdoptAssignmentRequest { assignment: s.asg2.clone(), ..Default::default() };
    refused(s.b.c.adopt_assignment(adopt, None).await, Code::NotCreator);
    let adopt = pb::AdoptEngagementRequest { engagement: s.eng2.clone(), ..Default::default() };
    let r = rejection(s.a.c.adopt_engagement(adopt, None).await);
    assert!(matches!(r.code, Code::NotFound | Code::NotRequester), "{r:?}");
    let drop = pb::DropEngagementRequest { engagement: s.eng1.clone(), ..Default::default() };
    let r = rejection(s.a.c.drop_engagement(drop, None).await);
    assert!(matches!(r.code, Code::NotFound | Code::NotTaker), "{r:?}");
    refused(s.me.c.handle(handle(&s.t2, 99), None).await, Code::NoPendingResponse);
    // Reads (working sets, entries, opportunities) are not actions: no receipt of reading exists.
    for x in all {
        for o in [&s.t1, &s.t2, &s.task_a, &s.task_me] {
            let _ = x.working_set(o).await;
        }
        let _ = x.c.get_entry(pb::GetEntryRequest { thread: s.t1.clone(), entry: s.e1 }).await;
        let _ = x.opportunities().await;
    }
    for (x, was) in all.iter().zip(&before) {
        assert_eq!(&x.turn().await, was, "the turn of {} changed without a fact", x.id);
    }
    // Each change of the turn follows a recorded fact, with its actor.
    s.me.c.handle(handle(&s.t1, s.e1), None).await.expect("handle");
    assert_eq!(newest_fact(&s.me.c, &s.t1).await, ("handled".into(), Some(s.me.id.clone())));
    assert!(!refs(&s.me.turn().await).contains(&response(&s.t1, s.e1, &s.me.id)));
    s.b.c
        .retract(pb::RetractRequest { thread: s.t2.clone(), entry: s.e2, ..Default::default() }, None)
        .await
        .expect("the author retracts");
    assert_eq!(newest_fact(&s.me.c, &s.t2).await, ("retracted".into(), Some(s.b.id.clone())));
    assert!(!refs(&s.me.turn().await).contains(&response(&s.t2, s.e2, &s.me.id)));
    let posted = s.a.post(Post::text(&s.t1, "another question").ask([s.me.id.clone()])).await;
    assert_eq!(posted.responders, [s.me.id.clone()]);
    assert_eq!(newest_fact(&s.me.c, &s.t1).await, ("posted".into(), Some(s.a.id.clone())));
    let now = s.me.turn().await;
    assert_eq!(
        refs(&now),
        [
            Ref::AssignmentDelivery(s.asg1.clone()),
            Ref::AssignmentJudgment(s.asg2.clone()),
            Ref::EngagementDelivery(s.eng1.clone()),
            Ref::EngagementJudgment(s.eng2.clone()),
            response(&s.t1, posted.entry, &s.me.id),
        ]
    );
}

/// Reads every turn of `agents`, asserts each item is of the closed catalogue and records which
/// of the five references were seen.
async fn check_catalogue(agents: &[&Agent], seen: &mut HashSet<&'static str>) {
    for x in agents {
        for item in x.turn().await {
            assert_catalogue(&item, &x.id);
            seen.insert(match oref(&item) {
                Ref::Response(_) => "response",
                Ref::AssignmentDelivery(_) => "assignment_delivery",
                Ref::AssignmentJudgment(_) => "assignment_judgment",
                Ref::EngagementDelivery(_) => "engagement_delivery",
                Ref::EngagementJudgment(_) => "engagement_judgment",
            });
        }
    }
}

/// §8 rule (§8.2, §8.13, §10.2.2): across a scenario that performs every action of the protocol,
/// every turn item of every participant is a response, a delivery or a judgment, with its own next
/// step (respond, deliver, judge) and one of the five references; all five occur.
async fn the_obligation_catalogue_stays_closed_across_every_action(cx: Ctx) {
    let v = cx.agents(5).await;
    let (g, s, o, w, j) = (&v[0], &v[1], &v[2], &v[3], &v[4]);
    let all = [g, s, o, w, j];
    let mut seen = HashSet::new();
    // Memory actions.
    let pin = g.memory("m").await;
    let m = pin.memory.clone();
    g.c.update_memory(pb::UpdateMemoryRequest { memory: m.clone(), content: text("m2"), ..Default::default() }, None)
        .await
        .expect("update");
    g.c.publish_memory(pb::PublishMemoryRequest { memory: m.clone(), ..Default::default() }, None).await.expect("pub");
    g.c.unpublish_memory(pb::UnpublishMemoryRequest { memory: m.clone(), ..Default::default() }, None)
        .await
        .expect("unpublish");
    g.c.withdraw_memory(pb::WithdrawMemoryRequest { memory: m, ..Default::default() }, None).await.expect("withdraw");
    check_catalogue(&all, &mut seen).await;
    // Thread and admission actions.
    let t = g.thread(pb::Role::Speaker).await;
    s.join(&t.secret).await;
    let grant =
        |role: pb::Role| pb::IssueGrantRequest { thread: t.id.clone(), role: role as i32, ..Default::default() };
    let og = g.c.issue_grant(grant(pb::Role::Observer), None).await.expect("grant");
    o.join(&og.value.grant_secret).await;
    g.c.void_grant(pb::VoidGrantRequest { thread: t.id.clone(), ..Default::default() }, None).await.expect("void");
    let change = |who: &Agent, role: pb::Role| pb::ChangeRoleRequest {
        thread: t.id.clone(),
        member: who.id.clone(),
        role: role as i32,
        ..Default::default()
    };
    g.c.change_role(change(o, pb::Role::Speaker), None).await.expect("promote");
    check_catalogue(&all, &mut seen).await;
    // Entries and responses: ask, reply, handle, retract.
    let e1 = g.post(Post::text(&t.id, "q").ask([s.id.clone(), o.id.clone()])).await.entry;
    check_catalogue(&all, &mut seen).await;
    s.post(Post::text(&t.id, "a").reply_to(e1)).await;
    o.c.handle(pb::HandleRequest { thread: t.id.clone(), entry: e1, note: text("seen"), ..Default::default() }, None)
        .await
        .expect("handle");
    let e2 = g.post(Post::text(&t.id, "q2").ask([s.id.clone()])).await.entry;
    check_catalogue(&all, &mut seen).await;
    g.c.retract(pb::RetractRequest { thread: t.id.clone(), entry: e2, ..Default::default() }, None)
        .await
        .expect("retract");
    check_catalogue(&all, &mut seen).await;
    // Assignments: take, deliver, adopt, reject, drop, void.
    let mut asg = Vec::new();
    for _ in 0..4 {
        asg.push(g.assign(&t.id, &s.id, None, None).await.1);
    }
    for a in &asg[..3] {
        s.take(a).await;
    }
    check_catalogue(&all, &mut seen).await;
    s.deliver(&asg[0], "out").await;
    s.deliver(&asg[1], "out").await;
    check_catalogue(&all, &mut seen).await;
    g.c.adopt_assignment(pb::AdoptAssignmentRequest { assignment: asg[0].clone(), ..Default::default() }, None)
        .await
        .expect("adopt");
    let reject = pb::RejectAssignmentRequest { assignment: asg[1].clone(), reason: text("no"), ..Default::default() };
    g.c.reject_assignment(reject, None).await.expect("reject");
    s.c.drop_assignment(pb::DropAssignmentRequest { assignment: asg[2].clone(), ..Default::default() }, None)
        .await
        .expect("drop");
    g.c.void_assignment(pb::VoidAssignmentRequest { assignment: asg[3].clone(), ..Default::default() }, None)
        .await
        .expect("void");
    check_catalogue(&all, &mut seen).await;
    // Tasks: create, revise, pause, resume, take, drop, deliver, adopt, reject (by a designated judge).
    let task = g.task(open(), contract(None, None)).await;
    let revise = pb::ReviseContractRequest {
        task: task.clone(),
        contract: Some(contract(Some(3600 * SECOND), None)),
        ..Default::default()
    };
    g.c.revise_contract(revise, None).await.expect("revise");
    g.c.pause_task(pb::PauseTaskRequest { task: task.clone(), ..Default::default() }, None).await.expect("pause");
    g.c.resume_task(pb::ResumeTaskRequest { task: task.clone(), ..Default::default() }, None).await.expect("resume");
    let e = w.take_task(&task).await.engagement;
    check_catalogue(&all, &mut seen).await;
    w.c.drop_engagement(pb::DropEngagementRequest { engagement: e, ..Default::default() }, None).await.expect("drop");
    w.take_task(&task).await;
    let delivered = w.deliver_task(&task, "out").await;
    check_catalogue(&all, &mut seen).await;
    g.c.adopt_engagement(pb::AdoptEngagementRequest { engagement: delivered.engagement, ..Default::default() }, None)
        .await
        .expect("adopt");
    let judged = g.task(open(), pb::ContractDraft { judge: Some(j.id.clone()), ..contract(None, None) }).await;
    let combined =
        pb::DeliverTaskRequest { task: judged.clone(), output: text("out"), take: true, ..Default::default() };
    let d =
        outcome!(s.c.deliver_task(combined, None).await.expect("take and deliver").value.receipt, EngagementDelivered);
    check_catalogue(&all, &mut seen).await;
    let reject = pb::RejectEngagementRequest { engagement: d.engagement, reason: text("no"), ..Default::default() };
    j.c.reject_engagement(reject, None).await.expect("the judge rejects");
    // Membership endings, closing and deactivation.
    let e3 = g.post(Post::text(&t.id, "q3").ask([s.id.clone(), o.id.clone()])).await.entry;
    check_catalogue(&all, &mut seen).await;
    g.c.remove_member(
        pb::RemoveMemberRequest { thread: t.id.clone(), member: o.id.clone(), ..Default::default() },
        None,
    )
    .await
    .expect("remove");
    g.c.change_role(change(s, pb::Role::Governor), None).await.expect("second governor");
    s.c.leave(pb::LeaveRequest { thread: t.id.clone(), ..Default::default() }, None).await.expect("leave");
    g.c.close_thread(pb::CloseThreadRequest { thread: t.id.clone(), ..Default::default() }, None).await.expect("close");
    let _ = e3;
    w.c.deactivate(pb::DeactivateAgentRequest { agent: w.id.clone(), ..Default::default() }, None)
        .await
        .expect("deactivate");
    check_catalogue(&all, &mut seen).await;
    for x in all {
        assert!(x.turn().await.is_empty(), "every obligation of the scenario ended: {}", x.id);
    }
    let mut seen: Vec<&str> = seen.into_iter().collect();
    seen.sort();
    assert_eq!(
        seen,
        ["assignment_delivery", "assignment_judgment", "engagement_delivery", "engagement_judgment", "response"],
        "the scenario exercised all five references"
    );
}

/// The responders of `entry` that still owe a response, among `agents`.
async fn owing(agents: &[&Agent], thread: &str, entry: u64) -> Vec<String> {
    let mut out = Vec::new();
    for x in agents {
        let items = x.turn().await;
        if refs(&items).contains(&response(thread, entry, &x.id)) {
            out.push(x.id.clone());
        }
    }
    out
}

/// §8 rule (§8.3, §10.2.2): a response is held by each responder of an entry, with no deadline and
/// the next step respond; it ends by the responder's reply, handle or leaving, by demotion to
/// observer, by the author's retraction and by closing, each ending only what it names.
async fn a_response_is_owed_by_each_responder_until_one_of_its_exits(cx: Ctx) {
    let v = cx.agents(7).await;
    let (g, r) = (&v[0], &v[1..]);
    let members: Vec<&Agent> = r.iter().collect();
    let t = cx.team(g, &members).await.id;
    let everyone: Vec<&Agent> = v.iter().collect();
    let first4: Vec<String> = r[..4].iter().map(|x| x.id.clone()).collect();
    let e1 = g.post(Post::text(&t, "four of you").ask(first4.clone())).await;
    let mut responders = e1.responders.clone();
    responders.sort();
    let mut want = first4.clone();
    want.sort();
    assert_eq!(responders, want, "the asked members are the responders");
    let e1 = e1.entry;
    let mut holders = owing(&everyone, &t, e1).await;
    holders.sort();
    assert_eq!(holders, want, "each responder holds it, nobody else (not the author)");
    for x in &r[..4] {
        let item = x.turn().await.into_iter().next().expect("the response");
        assert_eq!(item.kind(), pb::ObligationKind::Response);
        assert_eq!(item.next(), pb::NextStep::Respond);
        assert_eq!(item.due_at_unix_micros, None, "a response has no deadline");
        assert_eq!(item.object, t);
    }
    let still = |k: usize| first4[k..].to_vec();
    // Reply.
    r[0].post(Post::text(&t, "answer").reply_to(e1).ask(Vec::<String>::new())).await;
    assert_eq!(owing(&everyone, &t, e1).await, still(1), "a reply ends only the replier's response");
    // Handle.
    r[1].c
        .handle(pb::HandleRequest { thread: t.clone(), entry: e1, note: text("noted"), ..Default::default() }, None)
        .await
        .expect("handle");
    assert_eq!(owing(&everyone, &t, e1).await, still(2));
    // Leave.
    r[2].c.leave(pb::LeaveRequest { thread: t.clone(), ..Default::default() }, None).await.expect("leave");
    assert_eq!(owing(&everyone, &t, e1).await, still(3));
    // Demotion to observer.
    let demote = pb::ChangeRoleRequest {
        thread: t.clone(),
        member: r[3].id.clone(),
        role: pb::Role::Observer as i32,
        ..Default::default()
    };
    g.c.change_role(demote, None).await.expect("demote");
    assert!(owing(&everyone, &t, e1).await.is_empty());
    // The author's retraction ends all pending responses of its entry, no other.
    let e2 = g.post(Post::text(&t, "you two").ask([r[4].id.clone(), r[5].id.clone()])).await.entry;
    let e3 = g.post(Post::text(&t, "you").ask([r[5].id.clone()])).await.entry;
    r[4].post(Post::text(&t, "done").reply_to(e2).ask(Vec::<String>::new())).await;
    let w = g.c.retract(pb::RetractRequest { thread: t.clone(), entry: e2, ..Default::default() }, None).await;
    assert_eq!(outcome!(w.expect("retract").value.receipt, Retracted).responses_ended, 1, "a given one stays given");
    assert!(owing(&everyone, &t, e2).await.is_empty());
    assert_eq!(owing(&everyone, &t, e3).await, [r[5].id.clone()], "retraction ends only its entry's responses");
    // Closing ends every pending response.
    g.c.close_thread(pb::CloseThreadRequest { thread: t.clone(), ..Default::default() }, None).await.expect("close");
    assert!(owing(&everyone, &t, e3).await.is_empty());
    for x in &everyone {
        assert!(x.turn().await.is_empty(), "{} still owes something", x.id);
    }
}

/// §8 rule (§8.4, §10.2.2): a delivery is held by the taker of an assignment or the engaged agent
/// of a Task, with its deadline; it ends by delivering, dropping, the creator's void (in a thread)
/// and, as timed out, by its deadline.
async fn a_delivery_is_owed_by_the_taker_until_deliver_drop_void_or_its_deadline(cx: Ctx) {
    let v = cx.agents(4).await;
    let (g, s, h, w) = (&v[0], &v[1], &v[2], &v[3]);
    let t = cx.team(g, &[s]).await.id;
    let mut asg = Vec::new();
    for i in 0..4 {
        let window = if i == 3 { Some(SECOND) } else { None };
        asg.push(g.assign(&t, &s.id, window, None).await.1);
    }
    let fast = h.task(open(), contract(Some(SECOND), None)).await;
    let dropped = h.task(open(), contract(None, None)).await;
    let delivered = h.task(open(), contract(None, None)).await;
    let mut due = Vec::new();
    for a in &asg {
        due.push(s.take(a).await.delivery_due_unix_micros);
    }
    let e_fast = w.take_task(&fast).await;
    let e_dropped = w.take_task(&dropped).await.engagement;
    let e_delivered = w.take_task(&delivered).await.engagement;
    // The holders: the taker and the engaged agent, each with the deadline its receipt stated.
    let items = s.turn().await;
    for (a, d) in asg.iter().zip(&due) {
        if let Some(item) = items.iter().find(|i| oref(i) == Ref::AssignmentDelivery(a.clone())) {
            assert_eq!(item.due_at_unix_micros, Some(*d));
            assert_eq!(item.kind(), pb::ObligationKind::Delivery);
        } else {
            assert_eq!(a, &asg[3], "only the one-second assignment may already have timed out: {items:?}");
        }
    }
    let witems = w.turn().await;
    assert!(witems.iter().all(|i| i.kind() == pb::ObligationKind::Delivery && i.due_at_unix_micros.is_some()));
    assert!(refs(&witems).contains(&Ref::EngagementDelivery(e_dropped.clone())));
    assert!(g.turn().await.is_empty() && h.turn().await.is_empty(), "nobody else holds a delivery");
    let has = |items: &[pb::TurnItem], r: Ref| refs(items).contains(&r);
    // Deliver, drop, void.
    s.deliver(&asg[0], "out").await;
    s.c.drop_assignment(pb::DropAssignmentRequest { assignment: asg[1].clone(), ..Default::default() }, None)
        .await
        .expect("drop");
    g.c.void_assignment(pb::VoidAssignmentRequest { assignment: asg[2].clone(), ..Default::default() }, None)
        .await
        .expect("void");
    let items = s.turn().await;
    for a in &asg[..3] {
        assert!(!has(&items, Ref::AssignmentDelivery(a.clone())), "{a} still owed: {items:?}");
    }
    assert!(matches!(g.assignment(&asg[0]).await.state, Some(pb::assignment::State::Delivered(_))));
    assert_eq!(assignment_outcome(&g.assignment(&asg[1]).await), Some(pb::AssignmentOutcome::Dropped));
    assert_eq!(assignment_outcome(&g.assignment(&asg[2]).await), Some(pb::AssignmentOutcome::Voided));
    w.c.drop_engagement(pb::DropEngagementRequest { engagement: e_dropped.clone(), ..Default::default() }, None)
        .await
        .expect("drop engagement");
    w.deliver_task(&delivered, "out").await;
    let witems = w.turn().await;
    assert!(!has(&witems, Ref::EngagementDelivery(e_dropped.clone())));
    assert!(!has(&witems, Ref::EngagementDelivery(e_delivered.clone())));
    assert_eq!(engagement_outcome(&w.engagement(&e_dropped).await), Some(pb::EngagementOutcome::Dropped));
    // The deadlines end the rest as timed out.
    sleep_past(due[3].max(e_fast.delivery_due_unix_micros), Duration::from_millis(200)).await;
    eventually("the delivery deadlines end the obligations", || async {
        (s.turn().await.is_empty() && w.turn().await.is_empty()).then_some(())
    })
    .await;
    assert_eq!(assignment_outcome(&g.assignment(&asg[3]).await), Some(pb::AssignmentOutcome::TimedOut));
    assert_eq!(engagement_outcome(&w.engagement(&e_fast.engagement).await), Some(pb::EngagementOutcome::TimedOut));
}

/// §8 rule (§8.5, §10.2.2): a judgment is held by the creator of a delivered assignment or the
/// requester of a Task (the author, or the judge it designates), with its deadline; it ends by
/// adopting or rejecting, and its deadline ends it as undecided (a Task: as its contract states).
async fn a_judgment_is_owed_by_the_requester_until_adopt_reject_or_its_deadline(cx: Ctx) {
    let v = cx.agents(5).await;
    let (g, s, h, w, j) = (&v[0], &v[1], &v[2], &v[3], &v[4]);
    let t = cx.team(g, &[s]).await.id;
    let mut asg = Vec::new();
    for i in 0..3 {
        let window = if i == 2 { Some(SECOND) } else { None };
        let a = g.assign(&t, &s.id, None, window).await.1;
        s.take(&a).await;
        asg.push(a);
    }
    let mut due = Vec::new();
    for a in &asg {
        due.push(s.deliver(a, "out").await.judgment_due_unix_micros);
    }
    // A Task whose missing judgment counts as adopted, and one judged by a designated judge.
    let by_default =
        pb::ContractDraft { on_missing_judgment: pb::MissingJudgment::Adopted as i32, ..contract(None, Some(SECOND)) };
    let fast = h.task(open(), by_default).await;
    let judged = h.task(open(), pb::ContractDraft { judge: Some(j.id.clone()), ..contract(None, None) }).await;
    w.take_task(&fast).await;
    let e_fast = w.deliver_task(&fast, "out").await;
    w.take_task(&judged).await;
    let e_judged = w.deliver_task(&judged, "out").await.engagement;
    assert!(s.turn().await.is_empty() && w.turn().await.is_empty(), "delivering ended the deliveries");
    let gi = g.turn().await;
    for (a, d) in asg.iter().zip(&due) {
        if let Some(item) = gi.iter().find(|i| oref(i) == Ref::AssignmentJudgment(a.clone())) {
            assert_eq!((item.kind(), item.due_at_unix_micros), (pb::ObligationKind::Judgment, Some(*d)));
            // §8.13: judge; wait once the (one-second) deadline has passed and its ending is pending.
            let next = if a == &asg[2] { [pb::NextStep::Judge, pb::NextStep::Wait] } else { [pb::NextStep::Judge; 2] };
            assert!(next.contains(&item.next()), "{item:?}");
        } else {
            assert_eq!(a, &asg[2], "only the one-second judgment may already have passed: {gi:?}");
        }
    }
    // The designated judge holds the judgment, not the author.
    let ji = j.turn().await;
    assert_eq!(refs(&ji), [Ref::EngagementJudgment(e_judged.clone())]);
    assert!(!refs(&h.turn().await).contains(&Ref::EngagementJudgment(e_judged.clone())));
    // Adopt, reject.
    g.c.adopt_assignment(pb::AdoptAssignmentRequest { assignment: asg[0].clone(), ..Default::default() }, None)
        .await
        .expect("adopt");
    let reject = pb::RejectAssignmentRequest { assignment: asg[1].clone(), reason: text("no"), ..Default::default() };
    g.c.reject_assignment(reject, None).await.expect("reject");
    let reject = pb::RejectEngagementRequest { engagement: e_judged.clone(), reason: text("no"), ..Default::default() };
    j.c.reject_engagement(reject, None).await.expect("the judge rejects");
    let gi = g.turn().await;
    assert!(!refs(&gi).contains(&Ref::AssignmentJudgment(asg[0].clone())));
    assert!(!refs(&gi).contains(&Ref::AssignmentJudgment(asg[1].clone())));
    assert!(j.turn().await.is_empty());
    assert_eq!(assignment_outcome(&g.assignment(&asg[0]).await), Some(pb::AssignmentOutcome::Adopted));
    assert_eq!(assignment_outcome(&g.assignment(&asg[1]).await), Some(pb::AssignmentOutcome::Rejected));
    assert_eq!(engagement_outcome(&w.engagement(&e_judged).await), Some(pb::EngagementOutcome::Rejected));
    // The deadlines: undecided for the assignment, the contract's default (adopted) for the Task.
    sleep_past(due[2].max(e_fast.judgment_due_unix_micros), Duration::from_millis(200)).await;
    eventually("the judgment deadlines end the obligations", || async {
        (g.turn().await.is_empty() && h.turn().await.is_empty()).then_some(())
    })
    .await;
    assert_eq!(assignment_outcome(&g.assignment(&asg[2]).await), Some(pb::AssignmentOutcome::Undecided));
    assert_eq!(engagement_outcome(&w.engagement(&e_fast.engagement).await), Some(pb::EngagementOutcome::Adopted));
}

/// §10.2 item 2: for each obligation of the catalogue the cause and the holder can be read back
/// (the entry's responders, the assignment's taker and creator, the engagement's agent and judge),
/// and the holder ends every one of them alone: handle, drop, reject.
async fn every_obligation_has_an_exit_its_holder_takes_alone(cx: Ctx) {
    let s = six(&cx).await;
    let me = &s.me;
    let others_before = (s.a.turn().await, s.b.turn().await);
    for item in me.turn().await {
        match oref(&item) {
            Ref::Response(r) => {
                let e = me.c.get_entry(pb::GetEntryRequest { thread: r.thread.clone(), entry: r.entry }).await;
                let entry = e.expect("the entry").entry.expect("entry");
                assert!(entry.responders.contains(&me.id), "the cause names the holder");
                let req = pb::HandleRequest { thread: r.thread, entry: r.entry, ..Default::default() };
                me.c.handle(req, None).await.expect("handle alone");
            }
            Ref::AssignmentDelivery(a) => {
                let x = me.assignment(&a).await;
                assert!(matches!(x.state, Some(pb::assignment::State::Taken(_))) && x.addressee == me.id);
                let req = pb::DropAssignmentRequest { assignment: a, ..Default::default() };
                me.c.drop_assignment(req, None).await.expect("drop alone");
            }
            Ref::AssignmentJudgment(a) => {
                let x = me.assignment(&a).await;
                assert!(matches!(x.state, Some(pb::assignment::State::Delivered(_))) && x.creator == me.id);
                let req = pb::RejectAssignmentRequest { assignment: a, reason: text("no"), ..Default::default() };
                me.c.reject_assignment(req, None).await.expect("reject alone");
            }
            Ref::EngagementDelivery(e) => {
                let x = me.engagement(&e).await;
                assert!(matches!(x.state, Some(pb::engagement::State::Open(_))) && x.agent == me.id);
                let req = pb::DropEngagementRequest { engagement: e, ..Default::default() };
                me.c.drop_engagement(req, None).await.expect("drop alone");
            }
            Ref::EngagementJudgment(e) => {
                let x = me.engagement(&e).await;
                assert!(matches!(x.state, Some(pb::engagement::State::Delivered(_))) && x.judge == me.id);
                let req = pb::RejectEngagementRequest { engagement: e, reason: text("no"), ..Default::default() };
                me.c.reject_engagement(req, None).await.expect("reject alone");
            }
        }
    }
    assert!(me.turn().await.is_empty(), "every exit was taken alone");
    // Handling, dropping and rejecting put nothing on the others' turns.
    assert_eq!((s.a.turn().await, s.b.turn().await), others_before);
}

// ---------------------------------------------------------------------------------------------
// §8.11, §8.12: working sets and bounded reads.

fn has(actions: &[String], a: &str) -> bool {
    actions.iter().any(|x| x == a)
}

/// §8 rule (§8.11): the working set of a thread gives its identity and state, the members and
/// the reader's role (the grant to governors only), a history digest, the reader's obligations
/// there and no others, and the actions the reader may take; likewise for a Task, a Memory and
/// the agent itself.
async fn the_working_set_gives_identity_state_role_history_obligations_and_actions(cx: Ctx) {
    let v = cx.agents(4).await;
    let (g, s, o, h) = (&v[0], &v[1], &v[2], &v[3]);
    let t = cx.team(g, &[s]).await.id;
    let og =
        g.c.issue_grant(
            pb::IssueGrantRequest { thread: t.clone(), role: pb::Role::Observer as i32, ..Default::default() },
            None,
        )
        .await
        .expect("observer grant");
    o.join(&og.value.grant_secret).await;
    let e = g.post(Post::text(&t, "question").ask([s.id.clone()])).await.entry;
    let (_, asg) = g.assign(&t, &s.id, None, None).await;
    s.take(&asg).await;
    // s also owes a response elsewhere: it must not appear in t's working set.
    let t2 = cx.team(g, &[s]).await.id;
    let e2 = g.post(Post::text(&t2, "elsewhere")).await.entry;
    let mut members = vec![
        (g.id.clone(), pb::Role::Governor as i32),
        (s.id.clone(), pb::Role::Speaker as i32),
        (o.id.clone(), pb::Role::Observer as i32),
    ];
    members.sort();
    for (x, role) in [(g, pb::Role::Governor), (s, pb::Role::Speaker), (o, pb::Role::Observer)] {
        let set = working_set(&x.c, &t).await;
        assert_eq!(set.object, t);
        assert_eq!(set.role(), role, "the reader's role");
        let Some(pb::working_set::Summary::Thread(th)) = &set.summary else { panic!("not a thread summary: {set:?}") };
        assert_eq!((th.id.as_str(), th.open, th.last_entry, th.open_assignments), (t.as_str(), true, 2, 1));
        let mut got: Vec<(String, i32)> = th.members.iter().map(|m| (m.agent.clone(), m.role)).collect();
        got.sort();
        assert_eq!(got, members);
        assert_eq!(th.grant.is_some(), role == pb::Role::Governor, "the live grant is shown to governors only");
        assert!(!set.history.is_empty(), "a history digest");
        assert!(set.history.windows(2).all(|p| (p[0].seq, p[0].idx) > (p[1].seq, p[1].idx)), "newest first");
        let a = &set.available_actions;
        assert_eq!(has(a, "post"), role != pb::Role::Observer, "post offered to those who may speak: {a:?}");
        assert_eq!(has(a, "close_thread"), role == pb::Role::Governor);
        assert_eq!(has(a, "leave"), role != pb::Role::Governor, "a sole governor is offered no leave: {a:?}");
    }
    let set = working_set(&s.c, &t).await;
    assert_eq!(refs(&set.obligations), [response(&t, e, &s.id), Ref::AssignmentDelivery(asg.clone())]);
    for a in ["deliver_assignment", "drop_assignment", "handle"] {
        assert!(has(&set.available_actions, a), "{a} missing: {:?}", set.available_actions);
    }
    assert_eq!(refs(&working_set(&s.c, &t2).await.obligations), [response(&t2, e2, &s.id)]);
    assert!(working_set(&g.c, &t).await.obligations.is_empty() && working_set(&o.c, &t).await.obligations.is_empty());
    // The working set's obligations are the turn's items, with the same next steps.
    let turn = s.turn().await;
    let mut from_sets: Vec<pb::TurnItem> = set.obligations.clone();
    from_sets.extend(working_set(&s.c, &t2).await.obligations);
    from_sets.sort_by_key(|i| i.arose_at_unix_micros);
    assert_eq!(from_sets, turn);
    // A Task.
    let task = h.task(open(), contract(None, None)).await;
    let eng = s.take_task(&task).await.engagement;
    let ts = working_set(&s.c, &task).await;
    let Some(pb::working_set::Summary::Task(sum)) = &ts.summary else { panic!("not a task summary: {ts:?}") };
    assert_eq!(
        (sum.id.as_str(), sum.author.as_str(), sum.restricted, sum.open_engagements),
        (task.as_str(), h.id.as_str(), false, 1)
    );
    assert_eq!(ts.role(), pb::Role::Unspecified);
    assert_eq!(refs(&ts.obligations), [Ref::EngagementDelivery(eng)]);
    assert!(has(&ts.available_actions, "deliver_task") && has(&ts.available_actions, "drop_engagement"));
    assert!(!has(&ts.available_actions, "revise_contract"));
    let hs = working_set(&h.c, &task).await;
    assert!(hs.obligations.is_empty());
    assert!(has(&hs.available_actions, "revise_contract") && has(&hs.available_actions, "pause_task"));
    assert_eq!(hs.history.first().map(|x| x.fact.as_str()), Some("engaged"));
    // A Memory and the agent itself.
    let pin = h.memory("notes").await;
    let ms = working_set(&h.c, &pin.memory).await;
    let Some(pb::working_set::Summary::Memory(m)) = &ms.summary else { panic!("not a memory summary: {ms:?}") };
    assert_eq!((m.author.as_str(), m.current_version, m.public, m.withdrawn), (h.id.as_str(), 1, false, false));
    assert!(has(&ms.available_actions, "update_memory") && has(&ms.available_actions, "publish_memory"));
    let me = working_set(&h.c, &h.id).await;
    let Some(pb::working_set::Summary::Agent(ag)) = &me.summary else { panic!("not an agent summary: {me:?}") };
    assert_eq!((ag.id.as_str(), ag.active), (h.id.as_str(), true));
}

/// The history digest bound of the cluster (the server's default `history_digest_len`, which
/// `CLUSTER_SETTINGS` leaves as it is) and its largest page (`max_page_size`).
const HISTORY_BOUND: usize = 50;
const MAX_PAGE: usize = 100;

/// §8 rule (§8.12, §8.11): every read is bounded: after 105 entries the turn, the timeline and the
/// working set's history each return at most their bound however much is asked for, and the
/// history stays a digest (fact names, no content) whose entries' content comes on demand.
async fn reads_are_bounded_digests_come_first_and_content_on_demand(cx: Ctx) {
    let (g, me) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&g, &[&me]).await.id;
    let marker = unique("BOUNDED-CONTENT");
    let pin = g.memory(&marker).await;
    const N: usize = 105;
    for batch in 0..N.div_ceil(8) {
        let posts = (batch * 8..((batch + 1) * 8).min(N)).map(|_| g.post(Post::pin(&t, &pin.memory, pin.version)));
        futures::future::join_all(posts).await;
    }
    // The turn: one response per entry (two speakers, §6.3 rule 3).
    for asked in [0, 1000, u32::MAX] {
        let page = me.c.get_turn(pb::GetTurnRequest { cursor: String::new(), page_size: asked }).await.expect("turn");
        assert!(!page.items.is_empty() && page.items.len() <= MAX_PAGE, "{} items for {asked}", page.items.len());
        assert!(!page.next_cursor.is_empty(), "more follows");
    }
    assert_eq!(paged_turn(&me.c, 1000).await.len(), N, "a traversal omits nothing");
    // The timeline.
    let tl =
        me.c.timeline(pb::TimelineRequest { thread: t.clone(), after: 0, page_size: 1000 }).await.expect("timeline");
    assert!(!tl.entries.is_empty() && tl.entries.len() <= MAX_PAGE, "{} entries", tl.entries.len());
    assert!(tl.next_after.is_some());
    // The working set: a bounded, newest-first digest of structure only.
    let set = working_set(&me.c, &t).await;
    assert!(set.history.len() <= HISTORY_BOUND, "a history of {} facts", set.history.len());
    assert!(set.history.len() < N, "the digest is bounded, not the whole history of {N}+ facts");
    assert!(set.history.iter().all(|h| h.fact == "posted" && h.actor.as_deref() == Some(g.id.as_str())));
    assert!(set.history.windows(2).all(|p| (p[0].seq, p[0].idx) > (p[1].seq, p[1].idx)), "newest first");
    // Its obligations there are bounded too (the turn is where the complete list is paged).
    assert!(!set.obligations.is_empty() && set.obligations.len() <= MAX_PAGE, "{}", set.obligations.len());
    assert!(!format!("{set:?}").contains("BOUNDED-CONTENT"), "the working set carries content");
    // Content on demand: the newest entry the digest names.
    let Some(pb::working_set::Summary::Thread(th)) = &set.summary else { panic!("not a thread summary") };
    assert_eq!(th.last_entry, N as u64);
    let view = me.c.get_entry(pb::GetEntryRequest { thread: t.clone(), entry: th.last_entry }).await.expect("entry");
    assert_eq!(view.content.expect("content").body, marker.as_bytes());
}

// ---------------------------------------------------------------------------------------------
// §10.2 items 1, 3 and 4.

fn facts(set: &pb::WorkingSet) -> Vec<(String, Option<String>)> {
    set.history.iter().map(|h| (h.fact.clone(), h.actor.clone())).collect()
}

/// §10.2 item 1: every state change traces to an action, a deadline or an account-state fact: the
/// history of a thread lists each change as a named fact with the agent that acted, and the
/// deadline and the operator's deactivation as facts with no agent.
async fn every_change_of_an_object_is_a_recorded_fact_with_its_actor(cx: Ctx) {
    let v = cx.agents(3).await;
    let (g, s, x) = (&v[0], &v[1], &v[2]);
    let t = cx.team(g, &[s, x]).await.id;
    let (_, asg) = g.assign(&t, &s.id, Some(SECOND), None).await;
    let due = s.take(&asg).await.delivery_due_unix_micros;
    sleep_past(due, Duration::from_millis(200)).await;
    eventually("the delivery deadline", || async {
        (assignment_outcome(&g.assignment(&asg).await) == Some(pb::AssignmentOutcome::TimedOut)).then_some(())
    })
    .await;
    let operator = cx.anonymous().with_key(OPERATOR_TOKEN);
    operator
        .deactivate(pb::DeactivateAgentRequest { agent: x.id.clone(), ..Default::default() }, None)
        .await
        .expect("the operator deactivates x");
    let set = working_set(&g.c, &t).await;
    let got = facts(&set);
    let (g_, s_, x_) = (Some(g.id.clone()), Some(s.id.clone()), Some(x.id.clone()));
    let f = |n: &str, a: &Option<String>| (n.to_string(), a.clone());
    // Newest first: each change of the thread, with who made it (the entry and its assignment are
    // one action: two facts of one command). Every fact of the thread is here (9 < the bound).
    assert_eq!(got.len(), 9, "{got:?}");
    assert_eq!(got[0], f("agent_deactivated", &None), "the account-state fact has no agent actor: {got:?}");
    assert_eq!(got[1], f("deadline_passed", &None), "the deadline has no actor: {got:?}");
    assert_eq!(got[2], f("assignment_taken", &s_), "{got:?}");
    let mut post = got[3..5].to_vec();
    post.sort();
    assert_eq!(post, [f("assignment_created", &g_), f("posted", &g_)], "{got:?}");
    assert_eq!(set.history[3].seq, set.history[4].seq, "one command");
    assert_eq!(got[5..7], [f("joined", &x_), f("joined", &s_)], "{got:?}");
    // Creating the thread with its first grant: one action, two facts.
    let mut created = got[7..].to_vec();
    created.sort();
    assert_eq!(created, [f("grant_issued", &g_), f("thread_created", &g_)], "{got:?}");
    assert_eq!(set.history[7].seq, set.history[8].seq, "one command");
    // The state read back is what those facts say.
    let Some(pb::working_set::Summary::Thread(th)) = &set.summary else { panic!("not a thread summary") };
    assert!(!th.members.iter().any(|m| m.agent == x.id), "deactivation ended x's membership");
    assert_eq!(th.open_assignments, 0);
}

/// §10.2 item 3: a replay returns the first result (and adds no obligation); a receipt does not
/// drift with its object; a secret is disclosed in the first result only.
async fn replays_return_the_first_result_and_disclose_secrets_once(cx: Ctx) {
    let (g, s) = (cx.agent().await, cx.agent().await);
    let k = unique("create-thread");
    let req = pb::CreateThreadRequest {
        subject: text("replayed"),
        grant: Some(pb::GrantSpec { role: pb::Role::Speaker as i32 }),
        ..Default::default()
    };
    // (A first answer the SDK itself had to resend across a failover is already a replay: its
    // secret is gone by design; such a thread is abandoned and another one created.)
    let mut first = g.c.create_thread(req.clone(), Some(k.clone())).await.expect("create");
    let mut k = k;
    for _ in 0..3 {
        if !first.replayed {
            break;
        }
        k = unique("create-thread");
        first = g.c.create_thread(req.clone(), Some(k.clone())).await.expect("create");
    }
    assert!(!first.value.grant_secret.is_empty(), "the first result discloses the secret");
    let again = g.c.create_thread(req, Some(k)).await.expect("replay");
    assert!(again.replayed);
    assert_eq!(again.value.receipt, first.value.receipt);
    assert!(again.value.grant_secret.is_empty(), "the secret appears in the first result only");
    let t = outcome!(first.value.receipt, ThreadCreated).thread;
    s.join(&first.value.grant_secret).await;
    // A replayed post: the same receipt, one entry, one owed response.
    let k = unique("post");
    let p1 = g.c.post(Post::text(&t, "once").ask([s.id.clone()]), Some(k.clone())).await.expect("post");
    let p2 = g.c.post(Post::text(&t, "once").ask([s.id.clone()]), Some(k.clone())).await.expect("replay");
    assert!(p2.replayed);
    assert_eq!(p2.value.receipt, p1.value.receipt);
    assert_eq!(s.turn().await.len(), 1, "the replay added no obligation");
    // A different request under the same key: refused, nothing happens.
    refused(g.c.post(Post::text(&t, "other").ask([s.id.clone()]), Some(k)).await, Code::IdempotencyKeyReused);
    assert_eq!(me_timeline_len(&s, &t).await, 1);
    // A receipt does not drift: the take replayed after delivery and adoption is the first one.
    let (_, asg) = g.assign(&t, &s.id, None, None).await;
    let k = unique("take");
    let take = pb::TakeAssignmentRequest { assignment: asg.clone(), ..Default::default() };
    let t1 = s.c.take_assignment(take.clone(), Some(k.clone())).await.expect("take");
    s.deliver(&asg, "out").await;
    g.c.adopt_assignment(pb::AdoptAssignmentRequest { assignment: asg.clone(), ..Default::default() }, None)
        .await
        .expect("adopt");
    let t2 = s.c.take_assignment(take.clone(), Some(k)).await.expect("replayed take");
    assert!(t2.replayed);
    assert_eq!(t2.value.receipt, t1.value.receipt, "the receipt says what happened then");
    assert_eq!(assignment_outcome(&s.assignment(&asg).await), Some(pb::AssignmentOutcome::Adopted), "what is true now");
    refused(s.c.take_assignment(take, None).await, Code::InvalidState);
    assert!(s.turn().await.iter().all(|i| i.kind() == pb::ObligationKind::Response), "no delivery came back");
}

async fn me_timeline_len(x: &Agent, t: &str) -> usize {
    x.c.timeline_all(t, 100).await.expect("timeline").len()
}

/// §10.2 item 4: competing actions produce no double ending, no excess permission, no limit
/// overrun and no partial effect: a delivery racing a void ends the assignment once; two takes
/// of one assignment make one delivery obligation; two adoptions against a limit of one adopt
/// one; a post whose assignment is invalid leaves no entry.
async fn competing_actions_end_each_obligation_once_and_never_overrun_a_limit(cx: Ctx) {
    let v = cx.agents(5).await;
    let (g, s, h) = (&v[0], &v[1], &v[2]);
    let t = cx.team(g, &[s]).await.id;
    // Delivery against void, a few times.
    for _ in 0..3 {
        let (_, asg) = g.assign(&t, &s.id, None, None).await;
        s.take(&asg).await;
        let deliver =
            pb::DeliverAssignmentRequest { assignment: asg.clone(), output: text("out"), ..Default::default() };
        let void = pb::VoidAssignmentRequest { assignment: asg.clone(), ..Default::default() };
        let (d, vd) = tokio::join!(s.c.deliver_assignment(deliver, None), g.c.void_assignment(void, None));
        assert!(d.is_ok() != vd.is_ok(), "exactly one wins: {d:?} {vd:?}");
        let state = g.assignment(&asg).await.state;
        if d.is_ok() {
            assert_eq!(rejection(vd).code, Code::InvalidState);
            assert!(matches!(state, Some(pb::assignment::State::Delivered(_))), "{state:?}");
            assert!(refs(&g.turn().await).contains(&Ref::AssignmentJudgment(asg.clone())));
            g.c.adopt_assignment(pb::AdoptAssignmentRequest { assignment: asg.clone(), ..Default::default() }, None)
                .await
                .expect("adopt");
        } else {
            assert_eq!(rejection(d).code, Code::InvalidState);
            assert!(
                matches!(&state, Some(pb::assignment::State::Ended(e)) if e.outcome == pb::AssignmentOutcome::Voided as i32)
            );
        }
        assert!(s.turn().await.is_empty() && g.turn().await.is_empty(), "the obligation ended once");
    }
    // Two takes of one assignment.
    let (_, asg) = g.assign(&t, &s.id, None, None).await;
    let take = || pb::TakeAssignmentRequest { assignment: asg.clone(), ..Default::default() };
    let (a, b) = tokio::join!(s.c.take_assignment(take(), None), s.c.take_assignment(take(), None));
    assert!(a.is_ok() != b.is_ok(), "one take wins: {a:?} {b:?}");
    assert_eq!(rejection(if a.is_ok() { b } else { a }).code, Code::InvalidState);
    assert_eq!(refs(&s.turn().await), [Ref::AssignmentDelivery(asg.clone())], "one delivery obligation");
    // Adoptions against a limit of one.
    let task = h.task(open(), pb::ContractDraft { max_adoptions: Some(1), ..contract(None, None) }).await;
    let mut engagements = Vec::new();
    for w in &v[3..] {
        engagements.push(w.take_task(&task).await.engagement);
        w.deliver_task(&task, "out").await;
    }
    let adopt = |e: &String| {
        let c = h.c.clone();
        let req = pb::AdoptEngagementRequest { engagement: e.clone(), ..Default::default() };
        async move { c.adopt_engagement(req, None).await }
    };
    let (r1, r2) = tokio::join!(adopt(&engagements[0]), adopt(&engagements[1]));
    assert!(r1.is_ok() != r2.is_ok(), "one adoption within the limit: {r1:?} {r2:?}");
    let (winner, loser) = if r1.is_ok() { (0, 1) } else { (1, 0) };
    assert_eq!(rejection(if r1.is_ok() { r2 } else { r1 }).code, Code::AdoptionLimitReached);
    let view = h.c.get_task(pb::GetTaskRequest { task: task.clone(), version: None }).await.expect("task");
    assert_eq!(view.task.expect("task").adopted, 1);
    assert_eq!(engagement_outcome(&h.engagement(&engagements[winner]).await), Some(pb::EngagementOutcome::Adopted));
    assert!(matches!(h.engagement(&engagements[loser]).await.state, Some(pb::engagement::State::Delivered(_))));
    assert_eq!(
        refs(&h.turn().await),
        [Ref::EngagementJudgment(engagements[loser].clone())],
        "the loser's judgment stays open"
    );
    // A post whose assignment is invalid (addressed to a non-member) leaves no trace.
    let before = working_set(&g.c, &t).await;
    let bad = Post::text(&t, "must not survive").ask(Vec::<String>::new()).assignment(new_assignment(&h.id, "x"));
    let r = rejection(g.c.post(bad, None).await);
    assert_eq!(r.field.as_deref(), Some("assignment.addressee"), "{r:?}");
    let after = working_set(&g.c, &t).await;
    assert_eq!(after.summary, before.summary, "no entry, no assignment");
    assert_eq!(after.history, before.history, "no fact");
    assert!(h.opportunities().await.is_empty());
}
