//! A first end-to-end walk through the core: the happy paths of §5, §6 and §7 in one world.

use kungfu_core::testkit::World;
use kungfu_core::*;
use kungfu_types::*;

#[test]
fn a_lead_and_a_worker_complete_an_assignment_and_a_task() {
    let mut w = World::new();
    let lead = w.register();
    let worker = w.register();
    let thread = w.thread_with(lead, &[(worker, Role::Speaker)]);
    let e1 = w.post(lead, thread, "hello", None, None);
    // §6.3 rule 3: two speakers, so the worker owes a response.
    let turn = w.full_turn(worker);
    assert_eq!(turn.len(), 1);
    assert_eq!(turn[0].next, NextStep::Respond);
    let e2 = w.post(worker, thread, "hi", Some(e1), None);
    assert!(w.full_turn(worker).is_empty());
    // §6.3 rule 2: the reply makes the lead, author of e1, owe a response; handling ends it.
    assert_eq!(w.full_turn(lead).len(), 1);
    w.ok(lead, Action::Handle { thread, entry: e2, note: Some(Content::from("seen")) });
    let a = w.assign(lead, thread, worker, None, None);
    w.ok(worker, Action::TakeAssignment { assignment: a });
    assert_eq!(w.full_turn(worker)[0].next, NextStep::Deliver);
    w.ok(worker, Action::DeliverAssignment { assignment: a, output: Content::from("done") });
    assert_eq!(w.full_turn(lead).iter().filter(|i| i.next == NextStep::Judge).count(), 1);
    w.ok(lead, Action::AdoptAssignment { assignment: a });

    let task = match w
        .ok(lead, Action::CreateTask { audience: model::Audience::Open, contract: ContractDraft::simple("req", "acc") })
    {
        ActionResult::TaskCreated { task, .. } => task,
        other => panic!("{other:?}"),
    };
    let eng = match w.ok(worker, Action::DeliverTask { task, output: Content::from("out"), take: true }) {
        ActionResult::EngagementDelivered { engagement, .. } => engagement,
        other => panic!("{other:?}"),
    };
    w.ok(lead, Action::AdoptEngagement { engagement: eng });
    assert!(w.full_turn(lead).is_empty());
    assert!(w.full_turn(worker).is_empty());
}
