//! The multi-agent scenario of issue #4, end to end against a real `kungfud`: a lead and three
//! workers share a thread; assignments are delivered, adopted and rejected (and the rejected one
//! redone); a Task with a maximum of two adoptions is raced by all three workers and exactly two
//! adoptions succeed; a deadline passes and ends a Task engagement by itself; and every agent can
//! resume from its turn alone.

use kungfu_api::pb;
use kungfu_system_tests::*;
use std::time::{Duration, Instant};

struct Agent {
    id: String,
    c: Client,
}

async fn register(anon: &Client, key: &str, cluster: &Cluster) -> Agent {
    let (id, c) = register_when_serving(anon, key, || cluster.logs()).await;
    Agent { id, c }
}

fn result(r: Option<pb::Receipt>) -> pb::receipt::Result {
    r.and_then(|r| r.result).expect("a receipt with a result")
}

fn text(s: &str) -> Option<pb::Content> {
    content(s)
}

async fn assign(lead: &Agent, thread: &str, to: &Agent, key: &str) -> String {
    let r = lead
        .c
        .threads()
        .post(lead.c.req(pb::PostRequest {
            idempotency_key: key.into(),
            thread: thread.into(),
            body: Some(pb::PostBody {
                kind: Some(pb::post_body::Kind::Content(pb::Content { body: b"please".to_vec() })),
            }),
            reply_to: None,
            ask: Some(pb::Ask { agents: vec![] }),
            task_ref: None,
            assignment: Some(pb::NewAssignment {
                addressee: to.id.clone(),
                criteria: text("criteria"),
                output_structure: None,
                delivery_window_micros: None,
                judgment_window_micros: None,
            }),
        }))
        .await
        .expect("assign")
        .into_inner();
    let pb::receipt::Result::Posted(p) = result(r.receipt) else { panic!() };
    p.assignment.expect("assignment")
}

async fn turn(a: &Agent) -> Vec<pb::TurnItem> {
    a.c.turn()
        .get_turn(a.c.req(pb::GetTurnRequest { cursor: String::new(), page_size: 100 }))
        .await
        .expect("turn")
        .into_inner()
        .items
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lead_and_three_workers_share_threads_assignments_and_a_task() {
    let cluster = Cluster::start(1, "");
    let anon = Client { channel: connect(cluster.nodes[&1].api).await, key: None };
    let lead = register(&anon, "lead", &cluster).await;
    let mut workers = Vec::new();
    for i in 0..3 {
        workers.push(register(&anon, &format!("w{i}"), &cluster).await);
    }

    // The lead opens a thread and hands its grant to the workers.
    let created = lead
        .c
        .threads()
        .create(lead.c.req(pb::CreateThreadRequest {
            idempotency_key: "t".into(),
            subject: text("sprint"),
            grant: Some(pb::GrantSpec { role: pb::Role::Speaker as i32 }),
        }))
        .await
        .expect("thread")
        .into_inner();
    let pb::receipt::Result::ThreadCreated(t) = result(created.receipt) else { panic!() };
    for w in &workers {
        w.c.threads()
            .join(
                w.c.req(pb::JoinRequest { idempotency_key: "join".into(), grant_secret: created.grant_secret.clone() }),
            )
            .await
            .expect("join");
    }

    // One assignment each; all delivered; two adopted, one rejected with a reason and redone.
    let mut asgs = Vec::new();
    for (i, w) in workers.iter().enumerate() {
        asgs.push(assign(&lead, &t.thread, w, &format!("a{i}")).await);
    }
    for (w, a) in workers.iter().zip(&asgs) {
        assert!(turn(w).await.is_empty(), "an untaken assignment is an opportunity, not an obligation");
        w.c.assignments()
            .take(w.c.req(pb::TakeAssignmentRequest { idempotency_key: "take".into(), assignment: a.clone() }))
            .await
            .expect("take");
        w.c.assignments()
            .deliver(w.c.req(pb::DeliverAssignmentRequest {
                idempotency_key: "deliver".into(),
                assignment: a.clone(),
                output: text("done"),
            }))
            .await
            .expect("deliver");
    }
    assert_eq!(turn(&lead).await.iter().filter(|i| i.next == pb::NextStep::Judge as i32).count(), 3);
    for a in &asgs[..2] {
        lead.c
            .assignments()
            .adopt(
                lead.c.req(pb::AdoptAssignmentRequest { idempotency_key: format!("adopt-{a}"), assignment: a.clone() }),
            )
            .await
            .expect("adopt");
    }
    lead.c
        .assignments()
        .reject(lead.c.req(pb::RejectAssignmentRequest {
            idempotency_key: "reject".into(),
            assignment: asgs[2].clone(),
            reason: text("missing tests"),
        }))
        .await
        .expect("reject");
    let rejected = workers[2]
        .c
        .assignments()
        .get(workers[2].c.req(pb::GetAssignmentRequest { assignment: asgs[2].clone() }))
        .await
        .expect("get")
        .into_inner();
    let Some(pb::assignment::State::Ended(e)) = rejected.state else { panic!("{rejected:?}") };
    assert_eq!(e.outcome, pb::AssignmentOutcome::Rejected as i32);
    assert_eq!(e.rejection_reason, text("missing tests"), "the taker reads the reason");
    let redo = assign(&lead, &t.thread, &workers[2], "redo").await;
    assert_ne!(redo, asgs[2], "a redo is a new assignment");
    assert!(turn(&lead).await.iter().all(|i| i.next != pb::NextStep::Judge as i32));

    // A Task with at most two adoptions, raced by all three workers: exactly two are adopted.
    let task = lead
        .c
        .tasks()
        .create(lead.c.req(pb::CreateTaskRequest {
            idempotency_key: "task".into(),
            audience: Some(pb::Audience { kind: Some(pb::audience::Kind::Open(pb::OpenAudience {})) }),
            contract: Some(pb::ContractDraft {
                requirements: text("write a haiku"),
                acceptance: text("5-7-5"),
                max_adoptions: Some(2),
                ..Default::default()
            }),
        }))
        .await
        .expect("task")
        .into_inner();
    let pb::receipt::Result::TaskCreated(tc) = result(task.receipt) else { panic!() };
    let mut engagements = Vec::new();
    for w in &workers {
        let r =
            w.c.tasks()
                .deliver(w.c.req(pb::DeliverTaskRequest {
                    idempotency_key: "haiku".into(),
                    task: tc.task.clone(),
                    output: text("..."),
                    take: true,
                }))
                .await
                .expect("take and deliver")
                .into_inner();
        let pb::receipt::Result::EngagementDelivered(d) = result(r.receipt) else { panic!() };
        engagements.push(d.engagement);
    }
    let lead_c = lead.c.clone();
    let mut races = Vec::new();
    for e in engagements.clone() {
        let c = lead_c.clone();
        races.push(tokio::spawn(async move {
            c.tasks()
                .adopt_engagement(
                    c.req(pb::AdoptEngagementRequest { idempotency_key: format!("adopt-{e}"), engagement: e }),
                )
                .await
        }));
    }
    let mut adopted = 0;
    let mut refused = Vec::new();
    for r in races {
        match r.await.expect("join") {
            Ok(_) => adopted += 1,
            Err(s) => refused.push(code(&s)),
        }
    }
    assert_eq!(adopted, 2, "§7.4: exactly the maximum is adopted");
    assert_eq!(refused, vec!["ADOPTION_LIMIT_REACHED".to_string()]);
    let view = lead
        .c
        .tasks()
        .get(lead.c.req(pb::GetTaskRequest { task: tc.task.clone(), version: None }))
        .await
        .expect("task")
        .into_inner();
    assert_eq!(view.task.expect("task").adopted, 2);

    // A deadline ends an engagement by itself: a second Task with a one-second delivery window.
    let quick = lead
        .c
        .tasks()
        .create(lead.c.req(pb::CreateTaskRequest {
            idempotency_key: "quick".into(),
            audience: Some(pb::Audience { kind: Some(pb::audience::Kind::Open(pb::OpenAudience {})) }),
            contract: Some(pb::ContractDraft {
                requirements: text("fast"),
                acceptance: text("any"),
                delivery_window_micros: Some(1_000_000),
                ..Default::default()
            }),
        }))
        .await
        .expect("task")
        .into_inner();
    let pb::receipt::Result::TaskCreated(q) = result(quick.receipt) else { panic!() };
    let taken = workers[0]
        .c
        .tasks()
        .take(workers[0].c.req(pb::TakeTaskRequest { idempotency_key: "q".into(), task: q.task.clone() }))
        .await
        .expect("take")
        .into_inner();
    let pb::receipt::Result::Engaged(eng) = result(taken.receipt) else { panic!() };
    let start = Instant::now();
    loop {
        let e = workers[0]
            .c
            .tasks()
            .get_engagement(workers[0].c.req(pb::GetEngagementRequest { engagement: eng.engagement.clone() }))
            .await
            .expect("get")
            .into_inner();
        if let Some(pb::engagement::State::Ended(end)) = e.state {
            assert_eq!(end.outcome, pb::EngagementOutcome::TimedOut as i32);
            break;
        }
        assert!(start.elapsed() < BOUND, "the delivery deadline never ended the engagement\n{}", cluster.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Recovery from the turn alone: the redone assignment is the one thing worker 2 has to start,
    // found through its opportunities; everyone else's turn is empty.
    let opps = workers[2]
        .c
        .turn()
        .get_opportunities(workers[2].c.req(pb::GetOpportunitiesRequest { cursor: String::new(), page_size: 10 }))
        .await
        .expect("opps")
        .into_inner();
    assert_eq!(opps.items.len(), 1, "{opps:?}");
    for w in &workers[..2] {
        assert!(turn(w).await.is_empty());
    }
}
