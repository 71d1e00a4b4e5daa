//! The effects `apply` returns (`Applied::effects`): what a command changed that timers and streams
//! wake on. Each test runs real actions through the core and checks the effects against what the
//! state then holds, so a key layout change that the decoders miss fails here.

use kungfu_core::effects::{Deadline, Effects};
use kungfu_core::model::ObligationId;
use kungfu_core::read;
use kungfu_core::testkit::World;
use kungfu_core::*;
use kungfu_types::*;
use std::collections::BTreeSet;

fn exec(w: &mut World, agent: AgentId, action: Action) -> (ActionResult, Effects) {
    let key = w.fresh_key();
    let applied = w.exec(Principal::Agent(agent), action, Some(key));
    let effects = applied.effects.clone();
    match applied.outcome {
        Ok(r) => (r.result, effects),
        Err(r) => panic!("rejected: {r:?}"),
    }
}

/// The whole due index as deadlines, earliest first.
fn due(w: &World) -> Vec<Deadline> {
    read::due_items(&w.state, usize::MAX)
        .expect("due index")
        .into_iter()
        .map(|d| Deadline { due_at: d.due_at, obligation: d.obligation })
        .collect()
}

#[test]
fn taking_arms_the_delivery_deadline_and_delivering_ends_it_and_arms_judgment() {
    let mut w = World::new();
    let (alice, bob) = (w.register(), w.register());
    let thread = w.thread_with(alice, &[(bob, Role::Speaker)]);
    let a = w.assign(alice, thread, bob, Some(Micros::from_secs(60)), Some(Micros::from_secs(90)));

    let (_, took) = exec(&mut w, bob, Action::TakeAssignment { assignment: a });
    assert_eq!(took.armed, due(&w), "the one deadline in the due index is the one armed");
    assert_eq!(took.armed.len(), 1);
    assert_eq!(took.armed[0].obligation, ObligationId::AssignmentDelivery(a));
    assert!(took.ended.is_empty(), "{took:?}");
    assert!(took.turns.contains(&bob), "bob's turn gained the delivery: {took:?}");
    assert!(took.objects.contains(&ObjectRef::Thread(thread)), "the take is journaled under its thread: {took:?}");

    let (_, delivered) = exec(&mut w, bob, Action::DeliverAssignment { assignment: a, output: Content::from("out") });
    assert_eq!(delivered.ended, took.armed, "delivery ends exactly the deadline that taking armed");
    assert_eq!(delivered.armed, due(&w));
    assert_eq!(delivered.armed[0].obligation, ObligationId::AssignmentJudgment(a));
    assert_eq!(delivered.turns, BTreeSet::from([alice, bob]), "bob's delivery left, alice's judgment arose");
}

#[test]
fn an_expiry_ends_the_deadline_it_fires_for() {
    let mut w = World::new();
    let (alice, bob) = (w.register(), w.register());
    let thread = w.thread_with(alice, &[(bob, Role::Speaker)]);
    let a = w.assign(alice, thread, bob, Some(Micros::from_secs(5)), None);
    let (_, took) = exec(&mut w, bob, Action::TakeAssignment { assignment: a });
    w.advance(Micros::from_secs(6));
    let d = took.armed[0];
    let applied = w.exec(Principal::System, Action::Expire { obligation: d.obligation, due_at: d.due_at }, None);
    let effects = applied.effects.clone();
    assert_eq!(effects.ended, vec![d]);
    assert!(due(&w).is_empty());
    assert!(effects.turns.contains(&bob));
}

#[test]
fn a_post_that_asks_nobody_touches_its_thread_only() {
    let mut w = World::new();
    let (alice, bob) = (w.register(), w.register());
    let thread = w.thread_with(alice, &[(bob, Role::Speaker)]);
    let (_, posted) = exec(
        &mut w,
        alice,
        Action::Post {
            thread,
            body: PostBody::Content(Content::from("hello")),
            reply_to: None,
            ask: Some(BTreeSet::new()),
            task_ref: None,
            assignment: None,
        },
    );
    // The entry is journaled under its thread; its content became a Memory of its own (§6.3).
    assert!(posted.objects.contains(&ObjectRef::Thread(thread)), "{posted:?}");
    assert!(
        posted
            .objects
            .iter()
            .all(|o| matches!(o, ObjectRef::Thread(t) if *t == thread) || matches!(o, ObjectRef::Memory(_))),
        "a post touches its thread and the Memory of its content only: {posted:?}"
    );
    assert!(posted.turns.is_empty() && posted.armed.is_empty() && posted.ended.is_empty(), "{posted:?}");

    let (_, asked) = exec(
        &mut w,
        alice,
        Action::Post {
            thread,
            body: PostBody::Content(Content::from("bob?")),
            reply_to: None,
            ask: Some(BTreeSet::from([bob])),
            task_ref: None,
            assignment: None,
        },
    );
    assert_eq!(asked.turns, BTreeSet::from([bob]), "a response is owed by bob");
    assert!(asked.armed.is_empty(), "responses have no deadline");
}

/// L4 with L2: a refused action still ends the deadlines it found due, and apply reports that
/// ending as its effect (the deadline scheduler forgets the timer); refused again, nothing is left.
#[test]
fn a_refused_action_reports_the_deadline_it_settled_first_and_the_same_refusal_again_nothing() {
    let mut w = World::new();
    let (alice, bob) = (w.register(), w.register());
    let thread = w.thread_with(alice, &[(bob, Role::Speaker)]);
    let a = w.assign(alice, thread, bob, Some(Micros::from_secs(5)), None);
    let (_, took) = exec(&mut w, bob, Action::TakeAssignment { assignment: a });
    w.advance(Micros::from_secs(6));
    // Delivering after the due time: the deadline wins, the delivery is refused.
    let key = w.fresh_key();
    let deliver = Action::DeliverAssignment { assignment: a, output: Content::from("late") };
    let refused = w.exec(Principal::Agent(bob), deliver.clone(), Some(key.clone()));
    assert!(refused.outcome.is_err(), "{:?}", refused.outcome);
    assert_eq!(refused.effects.ended, took.armed, "the settled deadline is the refusal's effect");
    assert!(due(&w).is_empty());
    // The refusal stored no receipt (L2), so the same request is decided again: nothing to end now.
    let again = w.exec(Principal::Agent(bob), deliver, Some(key));
    assert!(again.outcome.is_err());
    assert!(again.effects.is_empty(), "{:?}", again.effects);
}

/// §8: an opportunity arising or ending names its agent, and so does the agent's own engagement
/// opening (an engaged agent is no longer offered the Task); an agent whose opportunities did not
/// change is not named.
#[test]
fn opportunities_name_the_agents_whose_opportunities_changed() {
    let mut w = World::new();
    let (alice, bob, carol) = (w.register(), w.register(), w.register());
    let thread = w.thread_with(alice, &[(bob, Role::Speaker), (carol, Role::Speaker)]);

    let before = w.opportunity_ids(bob).len();
    let (posted_result, assigned) = exec(
        &mut w,
        alice,
        Action::Post {
            thread,
            body: PostBody::Content(Content::from("please")),
            reply_to: None,
            ask: None,
            task_ref: None,
            assignment: Some(NewAssignment {
                addressee: bob,
                criteria: Content::from("criteria"),
                output_structure: None,
                delivery_window: None,
                judgment_window: None,
            }),
        },
    );
    assert_eq!(w.opportunity_ids(bob).len(), before + 1, "the assignment is an opportunity of bob");
    assert_eq!(assigned.opportunities, BTreeSet::from([bob]), "{assigned:?}");
    let ActionResult::Posted { assignment: Some(a), .. } = posted_result else { panic!("{posted_result:?}") };
    let (_, took) = exec(&mut w, bob, Action::TakeAssignment { assignment: a });
    assert!(w.opportunity_ids(bob).is_empty());
    assert_eq!(took.opportunities, BTreeSet::from([bob]), "taken, it is no longer an opportunity: {took:?}");

    let draft = ContractDraft::simple("write a summary", "covers every section");
    let (created, opened) = exec(
        &mut w,
        alice,
        Action::CreateTask {
            audience: kungfu_core::model::Audience::Restricted(BTreeSet::from([carol])),
            contract: draft,
        },
    );
    let ActionResult::TaskCreated { task, .. } = created else { panic!("{created:?}") };
    assert_eq!(opened.opportunities, BTreeSet::from([carol]), "a restricted Task is an opportunity of who it names");
    let (_, engaged) = exec(&mut w, carol, Action::TakeTask { task });
    assert!(w.opportunity_ids(carol).is_empty(), "engaged, carol is not offered it");
    assert_eq!(engaged.opportunities, BTreeSet::from([carol]), "{engaged:?}");

    let (_, posted) = exec(
        &mut w,
        alice,
        Action::Post {
            thread,
            body: PostBody::Content(Content::from("hello")),
            reply_to: None,
            ask: Some(BTreeSet::new()),
            task_ref: None,
            assignment: None,
        },
    );
    assert!(posted.opportunities.is_empty(), "{posted:?}");
}
