//! §4 Agent: activity and deactivation.

use kungfu_client::{Client, Code, Error, NextStep, pb};
use kungfu_system_tests::conformance::*;
use kungfu_system_tests::{cases, outcome};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

cases! {
    only_an_active_agent_acts ["§4.1"],
    an_agent_deactivates_itself_and_the_operator_deactivates_any_agent ["§4.1", "§4.4"],
    deactivation_racing_posts_by_the_operator_leaves_no_entry_after_it ["§4.1", "§4.4"],
    self_deactivation_racing_posts_leaves_no_entry_after_it ["§4.1", "§4.4"],
    a_deactivated_agent_still_reads ["§4.2"],
    deactivation_erases_no_fact_and_authors_are_kept ["§4.3", "§4.4"],
    deactivation_ends_memberships_with_their_effects ["§4.4"],
    deactivation_lets_pending_task_judgments_run_to_their_deadlines ["§4.5"],
    deactivation_closes_a_thread_left_without_governor_in_the_same_fact ["§4.4", "§4.6"],
    deactivation_keeps_a_thread_with_another_governor_open ["§4.6"],
}

// ---------------------------------------------------------------------------------------------
// Helpers of this file.

/// A client acting as the operator (the token of the conformance cluster).
fn operator(cx: &Ctx) -> Client {
    cx.anonymous().with_key(OPERATOR_TOKEN)
}

/// Deactivates `x`, by itself or by the operator; returns the receipt.
async fn deactivate(cx: &Ctx, x: &Agent, by_self: bool) -> pb::Receipt {
    let c = if by_self { x.c.clone() } else { operator(cx) };
    let w = c
        .deactivate(pb::DeactivateAgentRequest { agent: x.id.clone(), ..Default::default() }, None)
        .await
        .expect("deactivate");
    w.value.receipt.expect("receipt")
}

fn deactivated(r: &pb::Receipt) -> pb::AgentDeactivated {
    match &r.result {
        Some(pb::receipt::Result::AgentDeactivated(d)) => d.clone(),
        other => panic!("expected an AgentDeactivated receipt, got {other:?}"),
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

async fn agent_summary(a: &Agent) -> pb::AgentSummary {
    match a.working_set(&a.id).await.expect("read own working set").summary {
        Some(pb::working_set::Summary::Agent(s)) => s,
        other => panic!("expected an agent summary, got {other:?}"),
    }
}

async fn response_how(reader: &Agent, thread: &str, entry: u64, responder: &str) -> Option<pb::response_ending::How> {
    reader
        .c
        .get_response(pb::GetResponseRequest { thread: thread.into(), entry, responder: responder.into() })
        .await
        .expect("read the response")
        .ending
        .and_then(|e| e.how)
}

/// Takes a Task and delivers on it in one action.
async fn take_and_deliver(a: &Agent, task: &str, output: &str) -> pb::EngagementDelivered {
    let w =
        a.c.deliver_task(
            pb::DeliverTaskRequest { task: task.into(), output: text(output), take: true, ..Default::default() },
            None,
        )
        .await
        .expect("take and deliver");
    outcome!(w.value.receipt, EngagementDelivered)
}

// ---------------------------------------------------------------------------------------------
// Cases.

/// §4 rule: only an active agent may act. After deactivation every action of the agent, of every
/// service, is AGENT_INACTIVE with next step `stop`, and none has an effect.
async fn only_an_active_agent_acts(cx: Ctx) {
    let (x, g, author) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&g, &[&x]).await;
    let m = x.memory("mine").await;
    let (_, asg) = g.assign(&t.id, &x.id, None, None).await;
    let own_task = x.task(open(), contract(None, None)).await;
    let other_task = author.task(open(), contract(None, None)).await;
    let grant =
        g.c.issue_grant(pb::IssueGrantRequest { thread: t.id.clone(), ..Default::default() }, None)
            .await
            .expect("grant")
            .value
            .grant_secret;
    deactivate(&cx, &x, true).await;
    let entries_before = g.c.timeline_all(&t.id, 100).await.expect("timeline");

    let attempts: Vec<(&str, Result<(), Error>)> = vec![
        (
            "create memory",
            x.c.create_memory(pb::CreateMemoryRequest { content: text("c"), ..Default::default() }, None)
                .await
                .map(drop),
        ),
        (
            "update memory",
            x.c.update_memory(
                pb::UpdateMemoryRequest { memory: m.memory.clone(), content: text("v2"), ..Default::default() },
                None,
            )
            .await
            .map(drop),
        ),
        (
            "publish memory",
            x.c.publish_memory(pb::PublishMemoryRequest { memory: m.memory.clone(), ..Default::default() }, None)
                .await
                .map(drop),
        ),
        (
            "withdraw memory",
            x.c.withdraw_memory(pb::WithdrawMemoryRequest { memory: m.memory.clone(), ..Default::default() }, None)
                .await
                .map(drop),
        ),
        (
            "create thread",
            x.c.create_thread(pb::CreateThreadRequest { subject: text("s"), ..Default::default() }, None)
                .await
                .map(drop),
        ),
        ("join", x.c.join(pb::JoinRequest { grant_secret: grant.clone(), ..Default::default() }, None).await.map(drop)),
        ("post", x.c.post(Post::text(&t.id, "still here?"), None).await.map(drop)),
        (
            "take assignment",
            x.c.take_assignment(pb::TakeAssignmentRequest { assignment: asg.clone(), ..Default::default() }, None)
                .await
                .map(drop),
        ),
        (
            "create task",
            x.c.create_task(
                pb::CreateTaskRequest {
                    audience: Some(pb::Audience { kind: Some(open()) }),
                    contract: Some(contract(None, None)),
                    ..Default::default()
                },
                None,
            )
            .await
            .map(drop),
        ),
        (
            "pause task",
            x.c.pause_task(pb::PauseTaskRequest { task: own_task.clone(), ..Default::default() }, None).await.map(drop),
        ),
        (
            "take task",
            x.c.take_task(pb::TakeTaskRequest { task: other_task.clone(), ..Default::default() }, None).await.map(drop),
        ),
        (
            "take and deliver",
            x.c.deliver_task(
                pb::DeliverTaskRequest {
                    task: other_task.clone(),
                    output: text("o"),
                    take: true,
                    ..Default::default()
                },
                None,
            )
            .await
            .map(drop),
        ),
    ];
    for (what, r) in attempts {
        let rej = rejection(r);
        assert_eq!((rej.code, rej.next), (Code::AgentInactive, NextStep::Stop), "{what}: {rej:?}");
        assert!(!rej.message.is_empty());
    }
    // None took effect.
    let view =
        x.c.get_memory(pb::GetMemoryRequest { memory: m.memory.clone(), version: None }).await.expect("own memory");
    let mem = view.memory.expect("memory");
    assert_eq!((mem.current_version, mem.public, mem.withdrawn_at_unix_micros), (1, false, None));
    assert_eq!(g.c.timeline_all(&t.id, 100).await.expect("timeline"), entries_before);
    assert!(!member_ids(&thread_summary(&g, &t.id).await).contains(&x.id));
    let task = author.working_set(&other_task).await.expect("task");
    assert!(matches!(task.summary, Some(pb::working_set::Summary::Task(s)) if s.open_engagements == 0));
    let own = x.working_set(&own_task).await.expect("own task");
    assert!(matches!(own.summary, Some(pb::working_set::Summary::Task(s)) if !s.paused));
    assert!(!agent_summary(&x).await.active);
}

/// §4: an agent may deactivate itself, and the operator (account state is the implementation's)
/// may deactivate any agent; each is one receipt naming the memberships it ended; afterwards the
/// agent cannot act, and other agents are untouched.
async fn an_agent_deactivates_itself_and_the_operator_deactivates_any_agent(cx: Ctx) {
    let (x, y, g) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&g, &[&x, &y]).await;
    let by_self = deactivate(&cx, &x, true).await;
    let d = deactivated(&by_self);
    assert_eq!(
        (d.agent.as_str(), d.memberships_ended.clone(), d.threads_closed.clone()),
        (x.id.as_str(), vec![t.id.clone()], vec![])
    );
    assert_eq!(by_self.kind, "deactivate_agent");
    let by_operator = deactivate(&cx, &y, false).await;
    let d = deactivated(&by_operator);
    assert_eq!(
        (d.agent.as_str(), d.memberships_ended.clone(), d.threads_closed.clone()),
        (y.id.as_str(), vec![t.id.clone()], vec![])
    );
    for a in [&x, &y] {
        assert!(!agent_summary(a).await.active);
        refused(
            a.c.create_memory(pb::CreateMemoryRequest { content: text("no"), ..Default::default() }, None).await,
            Code::AgentInactive,
        );
    }
    // The governor is untouched and the thread goes on without them.
    assert!(agent_summary(&g).await.active);
    let summary = thread_summary(&g, &t.id).await;
    assert!(summary.open);
    assert_eq!(member_ids(&summary), vec![g.id.clone()]);
    g.post(Post::text(&t.id, "alone now").ask(Vec::<String>::new())).await;
}

/// One agent posting as fast as it can, from two sessions, while it is deactivated (by itself or
/// by the operator): every post either succeeded before the deactivation or was refused
/// AGENT_INACTIVE; no entry of it follows the deactivation; its membership ended.
async fn race_posts_against_deactivation(cx: &Ctx, by_self: bool) {
    let (g, x) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&g, &[&x]).await;
    let posted = AtomicUsize::new(0);
    let poster = || async {
        let mut results = Vec::new();
        for i in 0..400 {
            let r = x.c.post(Post::text(&t.id, &format!("post {i}")).ask(Vec::<String>::new()), None).await;
            let refused_now = r.is_err();
            if r.is_ok() {
                posted.fetch_add(1, Ordering::SeqCst);
            }
            results.push(r);
            if refused_now {
                break;
            }
        }
        results
    };
    let deactivator = async {
        while posted.load(Ordering::SeqCst) < 4 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        deactivate(cx, &x, by_self).await
    };
    let (a, b, receipt) = tokio::join!(poster(), poster(), deactivator);
    let d = deactivated(&receipt);
    assert_eq!(d.memberships_ended, vec![t.id.clone()]);
    assert!(d.threads_closed.is_empty());
    let (seq, at) = (receipt.seq.expect("a deactivation records a fact"), receipt.at_unix_micros);

    let mut entries = Vec::new();
    for results in [a, b] {
        let last = results.last().map(code_of);
        assert_eq!(last, Some(Some(Code::AgentInactive)), "each session ends refused AGENT_INACTIVE");
        for r in results {
            match r {
                Ok(w) => {
                    let r = w.value.receipt.clone().expect("receipt");
                    assert!(
                        r.seq.is_some_and(|s| s < seq) && r.at_unix_micros < at,
                        "a post took effect after the deactivation: {r:?}"
                    );
                    entries.push(outcome!(w.value.receipt, Posted).entry);
                }
                Err(e) => assert_eq!(code_of::<()>(&Err(e)), Some(Code::AgentInactive)),
            }
        }
    }
    assert!(entries.len() >= 4);
    // The timeline holds exactly the successful posts, all before the deactivation.
    let timeline = g.c.timeline_all(&t.id, 100).await.expect("timeline");
    let mut by_x: Vec<u64> = timeline.iter().filter(|e| e.author == x.id).map(|e| e.seq).collect();
    for e in timeline.iter().filter(|e| e.author == x.id) {
        assert!(e.posted_at_unix_micros < at, "an entry of x follows its deactivation: {e:?}");
    }
    by_x.sort();
    entries.sort();
    assert_eq!(by_x, entries, "the timeline and the successful posts disagree");
    // In the thread's history (newest first) nothing of x follows its deactivation.
    let history = g.working_set(&t.id).await.expect("thread").history;
    let pos = history.iter().position(|h| h.fact == "agent_deactivated").expect("the deactivation is in the history");
    assert!(history[..pos].iter().all(|h| h.actor.as_deref() != Some(x.id.as_str())), "{history:?}");
    assert!(!member_ids(&thread_summary(&g, &t.id).await).contains(&x.id), "x is still a member");
    refused(x.c.post(Post::text(&t.id, "after"), None).await, Code::AgentInactive);
}

/// §4 rules 1 and 4: posts racing the operator's deactivation of their author.
async fn deactivation_racing_posts_by_the_operator_leaves_no_entry_after_it(cx: Ctx) {
    race_posts_against_deactivation(&cx, false).await;
}

/// §4 rules 1 and 4: posts racing their author's own deactivation.
async fn self_deactivation_racing_posts_leaves_no_entry_after_it(cx: Ctx) {
    race_posts_against_deactivation(&cx, true).await;
}

/// §4 rule: reads follow §9 and do not require activity. A deactivated agent still reads its own
/// Memory at every version, its own working set, its turn (its pending Task judgment), its Task and
/// the engagement it judges; a thread whose membership ended is no longer its to read (§9).
async fn a_deactivated_agent_still_reads(cx: Ctx) {
    let (x, g, y) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&g, &[&x]).await;
    let e = x.post(Post::text(&t.id, "entry").ask(Vec::<String>::new())).await.entry;
    let m = x.memory("first").await;
    x.c.update_memory(
        pb::UpdateMemoryRequest { memory: m.memory.clone(), content: text("second"), ..Default::default() },
        None,
    )
    .await
    .expect("update");
    let task = x.task(open(), contract(None, None)).await;
    let eng = take_and_deliver(&y, &task, "out").await.engagement;
    deactivate(&cx, &x, false).await;

    let current =
        x.c.get_memory(pb::GetMemoryRequest { memory: m.memory.clone(), version: None }).await.expect("current");
    assert_eq!((current.version, current.content.expect("content").body), (2, b"second".to_vec()));
    let old = x.c.get_memory(pb::GetMemoryRequest { memory: m.memory.clone(), version: Some(1) }).await.expect("v1");
    assert_eq!(old.content.expect("content").body, b"first");
    let me = agent_summary(&x).await;
    assert_eq!((me.active, me.open_threads), (false, 0));
    let turn = x.turn().await;
    assert_eq!(turn.len(), 1, "{turn:?}");
    assert_eq!(turn[0].kind, pb::ObligationKind::Judgment as i32);
    assert_eq!(x.engagement(&eng).await.agent, y.id);
    let view = x.c.get_task(pb::GetTaskRequest { task: task.clone(), version: None }).await.expect("own task");
    assert_eq!(view.task.expect("task").author, x.id);
    x.opportunities().await;
    refused(x.c.get_entry(pb::GetEntryRequest { thread: t.id.clone(), entry: e }).await, Code::NotFound);
    refused(x.working_set(&t.id).await, Code::NotFound);
}

/// §4 rule: deactivation erases no fact; entries, deliveries and judgments keep their authors.
/// Everything read before the deactivation reads the same after it, and the thread's history only
/// gained the deactivation.
async fn deactivation_erases_no_fact_and_authors_are_kept(cx: Ctx) {
    let (lead, x) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&lead, &[&x]).await;
    let e1 = x.post(Post::text(&t.id, "x says").ask(Vec::<String>::new())).await.entry;
    // x delivers an assignment the lead adopts.
    let (_, a1) = lead.assign(&t.id, &x.id, None, None).await;
    x.take(&a1).await;
    x.deliver(&a1, "x output").await;
    lead.c
        .adopt_assignment(pb::AdoptAssignmentRequest { assignment: a1.clone(), ..Default::default() }, None)
        .await
        .expect("adopt");
    // x judges an assignment it created.
    let (_, a2) = x.assign(&t.id, &lead.id, None, None).await;
    lead.take(&a2).await;
    lead.deliver(&a2, "lead output").await;
    x.c.reject_assignment(
        pb::RejectAssignmentRequest { assignment: a2.clone(), reason: text("x reason"), ..Default::default() },
        None,
    )
    .await
    .expect("reject");
    // x delivers on a Task the lead adopts.
    let task = lead.task(open(), contract(None, None)).await;
    let eng = take_and_deliver(&x, &task, "x task output").await.engagement;
    lead.c
        .adopt_engagement(pb::AdoptEngagementRequest { engagement: eng.clone(), ..Default::default() }, None)
        .await
        .expect("adopt engagement");

    let read = || async {
        (
            lead.c.get_entry(pb::GetEntryRequest { thread: t.id.clone(), entry: e1 }).await.expect("entry"),
            lead.assignment(&a1).await,
            lead.assignment(&a2).await,
            lead.engagement(&eng).await,
            lead.working_set(&task).await.expect("task"),
        )
    };
    let before = read().await;
    let history_before = lead.working_set(&t.id).await.expect("thread").history;
    let receipt = deactivate(&cx, &x, false).await;
    let after = read().await;
    assert_eq!(after, before, "deactivation changed a recorded fact");
    let (entry, a1v, a2v, engv, _) = after;
    assert_eq!(entry.entry.expect("entry").author, x.id);
    assert_eq!(entry.content.expect("content").body, b"x says");
    assert_eq!(
        (a1v.addressee.as_str(), assignment_outcome(&a1v)),
        (x.id.as_str(), Some(pb::AssignmentOutcome::Adopted))
    );
    assert_eq!(
        (a2v.creator.as_str(), assignment_outcome(&a2v)),
        (x.id.as_str(), Some(pb::AssignmentOutcome::Rejected))
    );
    assert_eq!((engv.agent.as_str(), engagement_outcome(&engv)), (x.id.as_str(), Some(pb::EngagementOutcome::Adopted)));
    // The history only grew, by the one deactivation fact; the facts of x keep x as their actor.
    let history = lead.working_set(&t.id).await.expect("thread").history;
    let new = history.len() - history_before.len();
    assert_eq!(&history[new..], &history_before[..], "deactivation rewrote the history");
    assert_eq!(new, 1, "{history:?}");
    assert_eq!((history[0].fact.as_str(), history[0].seq), ("agent_deactivated", receipt.seq.expect("seq")));
    for fact in ["posted", "assignment_delivered", "assignment_judged"] {
        assert!(
            history.iter().any(|h| h.fact == fact && h.actor.as_deref() == Some(x.id.as_str())),
            "no {fact} by x in {history:?}"
        );
    }
}

/// §4 rule (with §6.2): in the deactivation fact the agent's memberships end with the effects of
/// §6.2: its pending responses end, the assignments it took, was addressed or created and that are
/// undelivered are voided, and its right to judge a delivered one is forfeited; responses owed to
/// its entries stay.
async fn deactivation_ends_memberships_with_their_effects(cx: Ctx) {
    let (g, x) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&g, &[&x]).await;
    let to_x = g.post(Post::text(&t.id, "for x").ask([x.id.clone()])).await.entry;
    let to_g = x.post(Post::text(&t.id, "for g").ask([g.id.clone()])).await.entry;
    let (_, taken_by_x) = g.assign(&t.id, &x.id, None, None).await;
    x.take(&taken_by_x).await;
    let (_, untaken_to_x) = g.assign(&t.id, &x.id, None, None).await;
    let (_, created_open) = x.assign(&t.id, &g.id, None, None).await;
    let (_, created_taken) = x.assign(&t.id, &g.id, None, None).await;
    g.take(&created_taken).await;
    let (_, created_delivered) = x.assign(&t.id, &g.id, None, Some(60 * SECOND)).await;
    g.take(&created_delivered).await;
    let due = g.deliver(&created_delivered, "done").await.judgment_due_unix_micros;
    assert_eq!(x.turn().await.len(), 3, "response, delivery, judgment");

    let receipt = deactivate(&cx, &x, false).await;
    assert_eq!(deactivated(&receipt).memberships_ended, vec![t.id.clone()]);

    assert_eq!(response_how(&g, &t.id, to_x, &x.id).await, Some(pb::response_ending::How::MembershipEnded(())));
    assert_eq!(response_how(&g, &t.id, to_g, &g.id).await, None, "the response owed to x's entry ended");
    for a in [&taken_by_x, &untaken_to_x, &created_open, &created_taken] {
        assert_eq!(assignment_outcome(&g.assignment(a).await), Some(pb::AssignmentOutcome::Voided), "{a}");
    }
    let forfeited = g.assignment(&created_delivered).await;
    assert!(forfeited.judge_forfeited, "{forfeited:?}");
    assert_eq!(judgment_due(&forfeited), Some(due), "the forfeited assignment does not keep its deadline");
    assert!(x.turn().await.is_empty());
    let g_turn = g.turn().await;
    assert_eq!(g_turn.len(), 1, "only g's response to x's entry remains: {g_turn:?}");
    assert_eq!(g_turn[0].kind, pb::ObligationKind::Response as i32);
    let summary = thread_summary(&g, &t.id).await;
    assert!(summary.open);
    assert_eq!(summary.open_assignments, 0);
}

/// §4 rule: on deactivation the agent's pending Task judgments are not ended; they run to their
/// contract deadlines and settle as the contracts say. Nobody else may judge them meanwhile.
async fn deactivation_lets_pending_task_judgments_run_to_their_deadlines(cx: Ctx) {
    let (x, y, w1, w2) = (cx.agent().await, cx.agent().await, cx.agent().await, cx.agent().await);
    // Windows long enough for the deactivation to come first even on a loaded machine; the checks
    // below hold whatever the timing (an ending, if any, is the deadline's, never earlier).
    let window = Some(6 * SECOND);
    let mut adopts = contract(None, window);
    adopts.on_missing_judgment = pb::MissingJudgment::Adopted as i32;
    let mut undecided = contract(None, window);
    undecided.on_missing_judgment = pb::MissingJudgment::Undecided as i32;
    let mut judged_by_x = contract(None, window);
    judged_by_x.on_missing_judgment = pb::MissingJudgment::Adopted as i32;
    judged_by_x.judge = Some(x.id.clone());
    let t_adopts = x.task(open(), adopts).await;
    let t_undecided = x.task(open(), undecided).await;
    let t_judged = y.task(open(), judged_by_x).await;
    let e1 = take_and_deliver(&w1, &t_adopts, "one").await;
    let e2 = take_and_deliver(&w1, &t_undecided, "two").await;
    let e3 = take_and_deliver(&w2, &t_judged, "three").await;
    let engagements = [e1.engagement.clone(), e2.engagement.clone(), e3.engagement.clone()];
    let dues = [e1.judgment_due_unix_micros, e2.judgment_due_unix_micros, e3.judgment_due_unix_micros];
    let missing = [pb::EngagementOutcome::Adopted, pb::EngagementOutcome::Undecided, pb::EngagementOutcome::Adopted];
    let mut before = Vec::new();
    for e in &engagements {
        before.push(x.engagement(e).await);
    }

    let receipt = deactivate(&cx, &x, false).await;
    let d = deactivated(&receipt);
    assert!(d.memberships_ended.is_empty() && d.threads_closed.is_empty());
    // Nobody else may judge them, and the deactivated requester cannot act.
    let r = rejection(
        y.c.adopt_engagement(
            pb::AdoptEngagementRequest { engagement: e3.engagement.clone(), ..Default::default() },
            None,
        )
        .await,
    );
    assert!(
        r.code == Code::NotRequester || (r.code == Code::InvalidState && now_micros() >= dues[2]),
        "another agent judged for the deactivated requester: {r:?}"
    );
    refused(
        x.c.adopt_engagement(
            pb::AdoptEngagementRequest { engagement: e1.engagement.clone(), ..Default::default() },
            None,
        )
        .await,
        Code::AgentInactive,
    );
    // Not ended by the deactivation: still delivered with the same deadline and still the
    // requester's obligation, or (only once its deadline passed) settled as the contract says.
    let turn = x.turn().await;
    for (i, e) in engagements.iter().enumerate() {
        let now = x.engagement(e).await;
        match &now.state {
            Some(pb::engagement::State::Delivered(_)) => {
                assert_eq!(now, before[i], "deactivation changed engagement {e}");
                assert!(
                    turn.iter().any(|t| t.obligation
                        == Some(pb::ObligationRef {
                            kind: Some(pb::obligation_ref::Kind::EngagementJudgment(e.clone()))
                        })),
                    "the judgment of {e} left the requester's turn: {turn:?}"
                );
            }
            Some(pb::engagement::State::Ended(end)) => {
                assert!(end.ended_at_unix_micros >= dues[i], "deactivation ended {e} before its deadline: {now:?}");
                assert_eq!(engagement_outcome(&now), Some(missing[i]));
            }
            other => panic!("{e}: {other:?}"),
        }
    }
    let last_due = [&e1, &e2, &e3].iter().map(|e| e.judgment_due_unix_micros).max().expect("dues");
    sleep_past(last_due, Duration::from_millis(300)).await;
    let outcomes = eventually("the judgment deadlines to settle the engagements", || async {
        let mut out = Vec::new();
        for e in &engagements {
            out.push(engagement_outcome(&x.engagement(e).await)?);
        }
        Some(out)
    })
    .await;
    assert_eq!(outcomes, missing.to_vec());
    for (e, due) in engagements.iter().zip(dues) {
        match x.engagement(e).await.state {
            Some(pb::engagement::State::Ended(end)) => assert!(end.ended_at_unix_micros >= due, "{e} ended early"),
            other => panic!("{other:?}"),
        }
    }
    let adopted = match x.working_set(&t_adopts).await.expect("task").summary {
        Some(pb::working_set::Summary::Task(s)) => s.adopted,
        other => panic!("{other:?}"),
    };
    assert_eq!(adopted, 1);
    assert!(x.turn().await.is_empty());
}

/// §4 rule: an open thread left with no governor closes, with the effects of §6.5, in the same
/// fact as the deactivation: admission voided, pending responses and undelivered assignments ended,
/// a delivered assignment keeps its judgment deadline and its creator still judges, members stay
/// and may leave; the history holds one new fact.
async fn deactivation_closes_a_thread_left_without_governor_in_the_same_fact(cx: Ctx) {
    let (x, y, z, newcomer) = (cx.agent().await, cx.agent().await, cx.agent().await, cx.agent().await);
    let t = x.thread(pb::Role::Speaker).await;
    y.join(&t.secret).await;
    z.join(&t.secret).await;
    let asked = y.post(Post::text(&t.id, "z, please answer").ask([z.id.clone()])).await.entry;
    let (_, taken) = y.assign(&t.id, &z.id, None, None).await;
    z.take(&taken).await;
    let (_, untaken) = y.assign(&t.id, &z.id, None, None).await;
    let (_, delivered) = y.assign(&t.id, &z.id, None, Some(60 * SECOND)).await;
    z.take(&delivered).await;
    let due = z.deliver(&delivered, "out").await.judgment_due_unix_micros;
    let history_before = y.working_set(&t.id).await.expect("thread").history;

    let receipt = deactivate(&cx, &x, false).await;
    let d = deactivated(&receipt);
    assert_eq!((d.memberships_ended, d.threads_closed), (vec![t.id.clone()], vec![t.id.clone()]));

    let ws = y.working_set(&t.id).await.expect("members still read a closed thread");
    let history = ws.history.clone();
    let summary = match ws.summary {
        Some(pb::working_set::Summary::Thread(s)) => s,
        other => panic!("{other:?}"),
    };
    assert!(!summary.open, "the thread without governor stayed open");
    assert_eq!(summary.grant, None, "admission was not voided");
    assert_eq!(member_ids(&summary), sorted(vec![y.id.clone(), z.id.clone()]));
    // One fact: the history gained only the deactivation, which closed the thread.
    let new = history.len() - history_before.len();
    assert_eq!(&history[new..], &history_before[..]);
    assert_eq!(history[..new].iter().map(|h| h.fact.as_str()).collect::<Vec<_>>(), vec!["agent_deactivated"]);
    assert_eq!(history[0].seq, receipt.seq.expect("seq"));

    refused(
        newcomer.c.join(pb::JoinRequest { grant_secret: t.secret.clone(), ..Default::default() }, None).await,
        Code::GrantInvalid,
    );
    assert_eq!(response_how(&z, &t.id, asked, &z.id).await, Some(pb::response_ending::How::ThreadClosed(())));
    for a in [&taken, &untaken] {
        assert_eq!(assignment_outcome(&y.assignment(a).await), Some(pb::AssignmentOutcome::Voided), "{a}");
    }
    assert_eq!(judgment_due(&y.assignment(&delivered).await), Some(due), "the delivered assignment lost its deadline");
    assert!(z.turn().await.is_empty());
    // Read-only, but the creator still judges and members may leave.
    refused(y.c.post(Post::text(&t.id, "more"), None).await, Code::ThreadClosed);
    let entry = z.c.get_entry(pb::GetEntryRequest { thread: t.id.clone(), entry: asked }).await.expect("entry");
    assert_eq!(entry.content.expect("content").body, b"z, please answer");
    y.c.adopt_assignment(pb::AdoptAssignmentRequest { assignment: delivered.clone(), ..Default::default() }, None)
        .await
        .expect("the creator judges in a closed thread");
    z.c.leave(pb::LeaveRequest { thread: t.id.clone(), ..Default::default() }, None).await.expect("leave");
}

/// §4 rule (with §6.2): a thread where another governor remains stays open: only the deactivated
/// membership ends; the live grant still admits, responses and assignments of others go on.
async fn deactivation_keeps_a_thread_with_another_governor_open(cx: Ctx) {
    let (x, g, y, newcomer) = (cx.agent().await, cx.agent().await, cx.agent().await, cx.agent().await);
    let t = x.thread(pb::Role::Governor).await;
    g.join(&t.secret).await;
    let speaker =
        x.c.issue_grant(
            pb::IssueGrantRequest { thread: t.id.clone(), role: pb::Role::Speaker as i32, ..Default::default() },
            None,
        )
        .await
        .expect("grant")
        .value
        .grant_secret;
    y.join(&speaker).await;
    let asked = g.post(Post::text(&t.id, "y, please answer").ask([y.id.clone()])).await.entry;
    let (_, asg) = g.assign(&t.id, &y.id, None, None).await;
    let before = thread_summary(&g, &t.id).await;

    let d = deactivated(&deactivate(&cx, &x, true).await);
    assert_eq!((d.memberships_ended, d.threads_closed), (vec![t.id.clone()], vec![]));
    let after = thread_summary(&g, &t.id).await;
    assert!(after.open, "a thread with another governor closed");
    assert_eq!(member_ids(&after), sorted(vec![g.id.clone(), y.id.clone()]));
    assert!(after.members.iter().any(|m| m.agent == g.id && m.role == pb::Role::Governor as i32));
    assert_eq!(after.grant, before.grant, "the admission grant changed");
    assert_eq!(response_how(&g, &t.id, asked, &y.id).await, None);
    assert!(matches!(g.assignment(&asg).await.state, Some(pb::assignment::State::Open(_))));
    assert!(!newcomer.join(&speaker).await.existing);
    g.post(Post::text(&t.id, "still working").ask(Vec::<String>::new())).await;
}
