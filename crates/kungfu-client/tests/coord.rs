//! The SDK's coordination loops (COORDINATION §3.5, §4.5, §4.7) against one real `kungfud`: a
//! blocking receive that times out without losing anything and wakes on a send, a mailbox resumed
//! from its cursor with no gap and no duplicate, a gather in rank order that refuses to fold until
//! every rank delivered, a barrier released by replies and handles and broken by a departure, and
//! the labels floor's refusals with their fak reason.

mod common;
use common::{node, register};

use kungfu_client::coord::{self, Marks};
use kungfu_client::reduce::Reduction;
use kungfu_client::{
    Code, Error, Labels, Message, Registered, Scatter, Scope, Taint, labeled_text, pb, pinned, to_all_speakers,
};
use kungfu_system_tests::{BOUND, Cluster};
use std::time::Duration;

const FLEET: Labels = Labels { taint: Taint::Tainted, scope: Scope::Fleet };

/// A lead and `n` workers, all speakers of one new thread.
async fn group(n: usize) -> (Cluster, Registered, Vec<Registered>, String) {
    let (cluster, client) = node().await;
    let lead = register(&cluster, &client).await;
    let mut workers = Vec::new();
    for _ in 0..n {
        workers.push(register(&cluster, &client).await);
    }
    let req = pb::CreateThreadRequest {
        subject: kungfu_client::text("coord"),
        grant: Some(pb::GrantSpec { role: pb::Role::Speaker as i32 }),
        ..Default::default()
    };
    let w = lead.client.create_thread(req, None).await.expect("create a thread");
    let thread = match w.value.receipt.as_ref().and_then(|r| r.result.as_ref()) {
        Some(pb::receipt::Result::ThreadCreated(t)) => t.thread.clone(),
        other => panic!("not a thread receipt: {other:?}"),
    };
    for worker in &workers {
        let req = pb::JoinRequest { grant_secret: w.value.grant_secret.clone(), ..Default::default() };
        worker.client.join(req, None).await.expect("join");
    }
    (cluster, lead, workers, thread)
}

async fn say(who: &Registered, thread: &str, text: &str) -> u64 {
    let w = who.client.send(Message::new(thread, labeled_text(text, FLEET)), None).await.expect("send");
    coord::sent(&w.value).expect("a Sent receipt").entry
}

fn text_of(item: &pb::MailItem) -> String {
    String::from_utf8_lossy(&item.content.as_ref().expect("inline content").body).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recv_times_out_without_losing_anything_and_wakes_on_a_send() {
    let (_cluster, lead, workers, thread) = group(1).await;
    let worker = &workers[0];
    let nothing = worker
        .client
        .recv(&thread, 0, pb::MailboxFilter::All, Duration::from_millis(300))
        .await
        .expect("an empty receive");
    assert!(nothing.items.is_empty());
    assert_eq!(nothing.after, 0, "a timeout keeps the cursor");

    let waiting = worker.client.recv(&thread, nothing.after, pb::MailboxFilter::All, BOUND);
    let sending = async { say(&lead, &thread, "wake up").await };
    let (got, entry) = tokio::join!(waiting, sending);
    let got = got.expect("a receive");
    assert_eq!(got.items.len(), 1);
    assert_eq!(text_of(&got.items[0]), "wake up");
    assert_eq!(got.after, entry, "the cursor moves to the entry received");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mailbox_resumes_from_its_cursor_with_no_gap_and_no_duplicate() {
    let (_cluster, lead, workers, thread) = group(1).await;
    for i in 1..=5 {
        say(&lead, &thread, &format!("m{i}")).await;
    }
    let mut first = workers[0].client.mailbox(&thread, 0).page_size(2);
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(text_of(&first.next(BOUND).await.expect("next").expect("an item")));
    }
    let cursor = first.cursor();
    drop(first);
    let mut second = workers[0].client.mailbox(&thread, cursor);
    seen.extend(second.drain(10).await.expect("drain").iter().map(text_of));
    assert_eq!(seen, ["m1", "m2", "m3", "m4", "m5"]);
    assert_eq!(second.next(Duration::from_millis(200)).await.expect("next"), None, "nothing more: a timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asked_me_keeps_only_what_asks_the_reader() {
    let (_cluster, lead, workers, thread) = group(2).await;
    say(&lead, &thread, "to nobody").await;
    let msg = Message::new(&thread, labeled_text("to the second", FLEET))
        .to(kungfu_client::to_agents([workers[1].agent.clone()]));
    lead.client.send(msg, None).await.expect("send");
    let mine = workers[1].client.mailbox(&thread, 0).asked_me().drain(10).await.expect("drain");
    assert_eq!(mine.iter().map(text_of).collect::<Vec<_>>(), ["to the second"]);
    let none = workers[0].client.mailbox(&thread, 0).asked_me().drain(10).await.expect("drain");
    assert!(none.is_empty(), "nothing asks the first worker");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gather_is_in_rank_order_and_refuses_to_fold_until_every_rank_delivered() {
    let (_cluster, lead, workers, thread) = group(3).await;
    // Goals in descending id order: the ranks must not follow it.
    let goals = workers.iter().rev().map(|w| (w.agent.clone(), labeled_text(&format!("goal of {}", w.agent), FLEET)));
    let req = Scatter::new(&thread, labeled_text("header", FLEET), goals, "one line");
    let w = lead.client.scatter(req, None).await.expect("scatter");
    let s = coord::scattered(&w.value).expect("a Scattered receipt").clone();
    let members: Vec<&str> = s.ranks.iter().map(|r| r.member.as_str()).collect();
    let ascending: Vec<&str> = workers.iter().map(|w| w.agent.as_str()).collect();
    assert_eq!(members, ascending, "rank order is ascending agent id");

    for (worker, rank) in workers.iter().zip(&s.ranks).take(2) {
        let take = pb::TakeAssignmentRequest { assignment: rank.assignment.clone(), ..Default::default() };
        worker.client.take_assignment(take, None).await.expect("take");
        let deliver = pb::DeliverAssignmentRequest {
            assignment: rank.assignment.clone(),
            output: kungfu_client::text(&format!("out {}", rank.rank)),
            ..Default::default()
        };
        worker.client.deliver_assignment(deliver, None).await.expect("deliver");
    }
    match lead.client.gather_and_combine(&thread, s.header, Reduction::Concat, &Marks::default()).await {
        Err(coord::Error::Undelivered { missing, .. }) => {
            assert_eq!(missing.iter().map(|m| m.rank).collect::<Vec<_>>(), [2]);
            assert_eq!(missing[0].state, "open (not taken)");
        }
        other => panic!("a partial collective was folded: {other:?}"),
    }
    let last = &s.ranks[2];
    let take = pb::TakeAssignmentRequest { assignment: last.assignment.clone(), ..Default::default() };
    workers[2].client.take_assignment(take, None).await.expect("take");
    let deliver = pb::DeliverAssignmentRequest {
        assignment: last.assignment.clone(),
        output: kungfu_client::text("out 2"),
        ..Default::default()
    };
    workers[2].client.deliver_assignment(deliver, None).await.expect("deliver");
    let (g, combined) = lead
        .client
        .gather_and_combine(&thread, s.header, Reduction::Concat, &Marks::default())
        .await
        .expect("every rank delivered");
    assert!(g.all_delivered && g.complete);
    assert_eq!(combined.output, b"out 0\nout 1\nout 2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_barrier_is_released_by_replies_and_handles_and_broken_by_a_departure() {
    let (_cluster, lead, workers, thread) = group(2).await;
    let body = labeled_text("barrier", FLEET);
    let w = lead.client.barrier(&thread, to_all_speakers(), body, None).await.expect("barrier");
    let entry = coord::sent(&w.value).expect("a Sent receipt").entry;
    let waiting = lead.client.wait_barrier(&thread, entry, BOUND);
    let arriving = async {
        let reply = Message::new(&thread, labeled_text("here", FLEET)).reply_to(entry);
        workers[0].client.send(reply, None).await.expect("reply");
        // A handle posts no entry: only the recheck sees it.
        let handle = pb::HandleRequest { thread: thread.clone(), entry, ..Default::default() };
        workers[1].client.handle(handle, None).await.expect("handle");
    };
    let (released, ()) = tokio::join!(waiting, arriving);
    let b = released.expect("released");
    assert_eq!(coord::barrier_state(&b), pb::BarrierState::Released);

    let w = lead.client.barrier(&thread, to_all_speakers(), labeled_text("again", FLEET), None).await.expect("barrier");
    let entry = coord::sent(&w.value).expect("a Sent receipt").entry;
    let leave = pb::LeaveRequest { thread: thread.clone(), ..Default::default() };
    workers[1].client.leave(leave, None).await.expect("leave");
    match lead.client.wait_barrier(&thread, entry, BOUND).await {
        Err(coord::Error::Broken { absent, .. }) => {
            assert_eq!(absent.len(), 1);
            assert_eq!(absent[0].member, workers[1].agent);
            assert_eq!(absent[0].how, pb::BarrierArrival::MembershipEnded);
        }
        other => panic!("a barrier with a departure was not broken: {other:?}"),
    }
    match lead.client.wait_barrier(&thread, entry, Duration::from_millis(100)).await {
        Err(coord::Error::Broken { .. }) => {}
        other => panic!("a broken barrier is final: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_floor_refuses_private_and_quarantined_bodies_with_their_fak_reason() {
    let (_cluster, _lead, workers, thread) = group(1).await;
    let worker = &workers[0];
    let private = kungfu_client::build::write_labeled(None, "mine", Labels::new(Taint::Tainted, Scope::Agent));
    let w = worker.client.write_labeled(private, None).await.expect("write labeled");
    let pin = coord::labeled_written(&w.value).and_then(|l| l.pin.clone()).expect("a pin");
    for body in
        [pinned(&pin.memory, pin.version), kungfu_client::labeled("q", Labels::new(Taint::Quarantined, Scope::Public))]
    {
        match worker.client.broadcast(&thread, body, None).await {
            Err(Error::Rejected(r)) => {
                assert_eq!(r.code, Code::TrustViolation);
                assert_eq!(r.fak_reason().map(|f| f.as_str()), Some("TRUST_VIOLATION"));
                assert_eq!(r.next.as_str(), "revise");
            }
            other => panic!("the floor let it through: {other:?}"),
        }
    }
    let timeline = worker.client.timeline_all(&thread, 10).await.expect("timeline");
    assert!(timeline.is_empty(), "a refusal records nothing: {timeline:?}");
    let widened = kungfu_client::build::widen_scope(&pin.memory, pin.version, Scope::Fleet);
    let w = worker.client.widen_scope(widened, None).await.expect("widen");
    let to = coord::scope_widened(&w.value).and_then(|s| s.to.clone()).expect("the new pin");
    worker.client.broadcast(&thread, pinned(&to.memory, to.version), None).await.expect("the widened version travels");
}
