//! The boundary composed with the real core, as the server will use it: wire requests become
//! commands, the core's in-memory test world applies them, and receipts, rejections and reads go
//! back out on the wire. These tests catch disagreements between the two sides that tests of
//! either side alone cannot (field names, secrets on replay, absent versus empty).

use kungfu_api::request::{self, KeyedAction};
use kungfu_api::response::{create_thread_response, register_response};
use kungfu_api::{FieldError, SecretMaterial, WriteResponse, pb, rejection_status, status_rejection};
use kungfu_core::engine::Applied;
use kungfu_core::read;
use kungfu_core::testkit::World;
use kungfu_core::{Principal, Receipt};
use kungfu_types::{AgentId, Code, Rejection};

fn c(text: &str) -> Option<pb::Content> {
    Some(pb::Content { body: text.as_bytes().to_vec() })
}

fn exec(w: &mut World, principal: Principal, converted: Result<KeyedAction, FieldError>) -> Applied {
    let keyed = converted.unwrap_or_else(|e| panic!("the request did not convert: {e}"));
    w.exec(principal, keyed.action, Some(keyed.key))
}

fn receipt(applied: &Applied) -> Receipt {
    match &applied.outcome {
        Ok(r) => r.clone(),
        Err(r) => panic!("rejected: {r}"),
    }
}

fn rejection(applied: &Applied) -> Rejection {
    match &applied.outcome {
        Ok(r) => panic!("expected a rejection, got {r:?}"),
        Err(r) => r.clone(),
    }
}

/// Registers an agent through the wire request; returns its id as the wire names it.
fn register(w: &mut World, key: &str) -> (AgentId, String) {
    let secret = w.fresh_secret();
    let req = pb::RegisterRequest { idempotency_key: key.into() };
    let applied = exec(w, Principal::Registrar, request::register_action(req.clone(), &SecretMaterial::of(&secret)));
    let response = register_response(&receipt(&applied), applied.replayed, &secret);
    assert_eq!(response.agent_key, secret);
    match response.receipt.and_then(|r| r.result) {
        Some(pb::receipt::Result::AgentRegistered(a)) => (a.agent.parse().expect("an agent id"), a.agent),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn a_replayed_registration_returns_the_same_receipt_without_a_key() {
    let mut w = World::new();
    let req = pb::RegisterRequest { idempotency_key: "reg-1".into() };
    let first_secret = w.fresh_secret();
    let first =
        exec(&mut w, Principal::Registrar, request::register_action(req.clone(), &SecretMaterial::of(&first_secret)));
    let first = register_response(&receipt(&first), first.replayed, &first_secret);
    assert_eq!(first.agent_key, first_secret);
    assert!(!first.replayed);

    // The retry mints a new secret, yet is the same logical request (L3): same receipt, no key.
    let retry_secret = w.fresh_secret();
    let again =
        exec(&mut w, Principal::Registrar, request::register_action(req.clone(), &SecretMaterial::of(&retry_secret)));
    let again = register_response(&receipt(&again), again.replayed, &retry_secret);
    assert!(again.replayed);
    assert_eq!(again.agent_key, "");
    assert_eq!(again.receipt, first.receipt);
}

#[test]
fn a_thread_round_trip_over_the_wire() {
    let mut w = World::new();
    let (governor, governor_text) = register(&mut w, "reg-g");
    let (speaker, speaker_text) = register(&mut w, "reg-s");

    // Create with a first grant; its secret goes out once.
    let grant_secret = w.fresh_secret();
    let create = pb::CreateThreadRequest {
        idempotency_key: "create-1".into(),
        subject: c("release 1.0"),
        grant: Some(pb::GrantSpec { role: pb::Role::Speaker as i32 }),
    };
    let applied = exec(
        &mut w,
        Principal::Agent(governor),
        request::create_thread_action(create.clone(), &SecretMaterial::of(&grant_secret)),
    );
    let created = create_thread_response(&receipt(&applied), applied.replayed, &grant_secret);
    assert_eq!(created.grant_secret, grant_secret);
    let thread = match created.receipt.and_then(|r| r.result) {
        Some(pb::receipt::Result::ThreadCreated(t)) => {
            assert_eq!(t.grant.map(|g| g.role), Some(pb::Role::Speaker as i32));
            t.thread
        }
        other => panic!("unexpected {other:?}"),
    };

    // Join with the secret as handed over.
    let join = pb::JoinRequest { idempotency_key: "join-1".into(), grant_secret: grant_secret.clone() };
    let joined = exec(&mut w, Principal::Agent(speaker), request::join_action(join.clone()));
    match pb::JoinResponse::from_receipt(&receipt(&joined), joined.replayed).receipt.and_then(|r| r.result) {
        Some(pb::receipt::Result::Joined(j)) => {
            assert_eq!(
                (j.thread.as_str(), j.agent.as_str(), j.existing),
                (thread.as_str(), speaker_text.as_str(), false)
            );
        }
        other => panic!("unexpected {other:?}"),
    }

    // A post that asks nobody, although rule 3 (two speakers) would otherwise name the speaker.
    let post = pb::PostRequest {
        idempotency_key: "post-1".into(),
        thread: thread.clone(),
        body: Some(pb::PostBody { kind: Some(pb::post_body::Kind::Content(pb::Content { body: b"FYI".to_vec() })) }),
        ask: Some(pb::Ask { agents: vec![] }),
        ..Default::default()
    };
    let posted = exec(&mut w, Principal::Agent(governor), request::post_action(post.clone()));
    let posted = pb::PostResponse::from_receipt(&receipt(&posted), posted.replayed);
    let entry = match posted.receipt.and_then(|r| r.result) {
        Some(pb::receipt::Result::Posted(p)) => {
            assert!(p.responders.is_empty(), "an empty ask means nobody (§6.3 rule 1)");
            p.entry
        }
        other => panic!("unexpected {other:?}"),
    };
    // A post without ask: rule 3 makes the other of the two speakers the responder.
    let plain = pb::PostRequest { idempotency_key: "post-2".into(), ask: None, ..post.clone() };
    let plain = exec(&mut w, Principal::Agent(governor), request::post_action(plain.clone()));
    match pb::Receipt::from(&receipt(&plain)).result {
        Some(pb::receipt::Result::Posted(p)) => assert_eq!(p.responders, vec![speaker_text.clone()]),
        other => panic!("unexpected {other:?}"),
    }

    // Reading the first entry back: the ask is present and empty, the content is there.
    let query = request::get_entry_query(&pb::GetEntryRequest { thread: thread.clone(), entry }).expect("query");
    let view = read::read_entry(&w.state, speaker, query.thread, query.entry).expect("readable by a member");
    let wire = pb::EntryView::from(&view);
    assert_eq!(wire.content, c("FYI"));
    let wire_entry = wire.entry.expect("entry");
    assert_eq!(wire_entry.ask, Some(pb::Ask { agents: vec![] }));
    assert_eq!(wire_entry.author, governor_text);

    // The speaker's turn holds the response owed to the second entry, and nothing for the first.
    let page_query = request::turn_query(&pb::GetTurnRequest::default()).expect("query");
    let page = read::turn(&w.state, speaker, page_query.cursor.as_ref(), page_query.page_size, w.now, &w.limits)
        .expect("turn");
    let turn = pb::TurnPage::from(&page);
    assert_eq!(turn.items.len(), 1);
    assert_eq!(turn.items[0].next, pb::NextStep::Respond as i32);
    match turn.items[0].obligation.as_ref().and_then(|o| o.kind.as_ref()) {
        Some(pb::obligation_ref::Kind::Response(r)) => {
            assert_eq!(
                (r.thread.as_str(), r.entry, r.responder.as_str()),
                (thread.as_str(), entry + 1, speaker_text.as_str())
            );
        }
        other => panic!("unexpected {other:?}"),
    }

    // The core's field names leave as wire paths: a zero delivery window is the core's to refuse.
    let assign = pb::PostRequest {
        idempotency_key: "post-3".into(),
        thread: thread.clone(),
        body: Some(pb::PostBody { kind: Some(pb::post_body::Kind::Content(pb::Content { body: b"do".to_vec() })) }),
        assignment: Some(pb::NewAssignment {
            addressee: speaker_text.clone(),
            criteria: c("done"),
            delivery_window_micros: Some(0),
            ..Default::default()
        }),
        ..Default::default()
    };
    let refused = rejection(&exec(&mut w, Principal::Agent(governor), request::post_action(assign.clone())));
    assert_eq!(refused.code, Code::InvalidArgument);
    let client_sees = status_rejection(&rejection_status(&refused)).expect("a rejection");
    assert_eq!(client_sees.field.as_deref(), Some("assignment.delivery_window_micros"));
    assert!(client_sees.message.starts_with("assignment.delivery_window_micros: "), "{}", client_sees.message);

    // A member the core refuses in `ask` is named by its wire path too.
    let outsider = register(&mut w, "reg-o").1;
    let ask_outsider = pb::PostRequest {
        idempotency_key: "post-4".into(),
        ask: Some(pb::Ask { agents: vec![outsider] }),
        ..post.clone()
    };
    let refused = rejection(&exec(&mut w, Principal::Agent(governor), request::post_action(ask_outsider.clone())));
    assert_eq!(refused.code, Code::InvalidTarget);
    let status = rejection_status(&refused);
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    assert_eq!(status_rejection(&status).and_then(|r| r.field), Some("ask.agents[0]".to_string()));

    // Reusing a key for a different request is refused, and says so in terms of the wire field.
    let reused = pb::PostRequest { idempotency_key: "post-1".into(), body: c_body("something else"), ..post };
    let refused = rejection(&exec(&mut w, Principal::Agent(governor), request::post_action(reused.clone())));
    let status = rejection_status(&refused);
    assert_eq!(status.code(), tonic::Code::AlreadyExists);
    let back = status_rejection(&status).expect("a rejection");
    assert_eq!((back.code, back.field.as_deref()), (Code::IdempotencyKeyReused, Some("idempotency_key")));
}

fn c_body(text: &str) -> Option<pb::PostBody> {
    Some(pb::PostBody { kind: Some(pb::post_body::Kind::Content(pb::Content { body: text.as_bytes().to_vec() })) })
}

#[test]
fn a_task_round_trip_over_the_wire() {
    let mut w = World::new();
    let (author, _) = register(&mut w, "reg-a");
    let (worker, worker_text) = register(&mut w, "reg-w");
    let create = pb::CreateTaskRequest {
        idempotency_key: "task-1".into(),
        audience: Some(pb::Audience {
            kind: Some(pb::audience::Kind::Restricted(pb::RestrictedAudience { agents: vec![worker_text.clone()] })),
        }),
        contract: Some(pb::ContractDraft {
            requirements: c("translate"),
            acceptance: c("fluent"),
            max_adoptions: Some(1),
            ..Default::default()
        }),
    };
    let created = exec(&mut w, Principal::Agent(author), request::create_task_action(create.clone()));
    let task = match pb::Receipt::from(&receipt(&created)).result {
        Some(pb::receipt::Result::TaskCreated(t)) => {
            assert_eq!(t.version, 1);
            t.task
        }
        other => panic!("unexpected {other:?}"),
    };

    // Take and deliver in one action.
    let deliver =
        pb::DeliverTaskRequest { idempotency_key: "d-1".into(), task: task.clone(), output: c("done"), take: true };
    let delivered = exec(&mut w, Principal::Agent(worker), request::deliver_task_action(deliver.clone()));
    let engagement = match pb::Receipt::from(&receipt(&delivered)).result {
        Some(pb::receipt::Result::EngagementDelivered(d)) => {
            assert_eq!(d.task, task);
            d.engagement
        }
        other => panic!("unexpected {other:?}"),
    };

    // The requester reads the engagement with its delivered output.
    let id = request::get_engagement_query(&pb::GetEngagementRequest { engagement: engagement.clone() }).expect("id");
    let wire = pb::Engagement::from(&read::read_engagement(&w.state, author, id).expect("readable by the requester"));
    assert_eq!(wire.agent, worker_text);
    match wire.state {
        Some(pb::engagement::State::Delivered(d)) => assert_eq!(d.output, c("done")),
        other => panic!("unexpected {other:?}"),
    }

    // The task's contract view carries the defaults the core resolved.
    let q = request::get_task_query(&pb::GetTaskRequest { task: task.clone(), version: None }).expect("query");
    let view = pb::TaskView::from(&read::read_task(&w.state, worker, q.task, q.version).expect("readable"));
    let contract = view.contract.and_then(|cv| cv.contract).expect("contract");
    assert_eq!(contract.delivery_window_micros, w.limits.default_delivery_window.0);
    assert_eq!(contract.on_missing_judgment, pb::MissingJudgment::Undecided as i32);
    assert_eq!(contract.judge, None);

    // Rejecting needs a reason; the core's empty-reason refusal names the wire field `reason`.
    let reject = pb::RejectEngagementRequest {
        idempotency_key: "r-1".into(),
        engagement,
        reason: Some(pb::Content { body: vec![] }),
    };
    let refused = rejection(&exec(&mut w, Principal::Agent(author), request::reject_engagement_action(reject.clone())));
    assert_eq!(status_rejection(&rejection_status(&refused)).and_then(|r| r.field), Some("reason".to_string()));
}

fn send_request(
    key: &str,
    thread: &str,
    body: Option<pb::LabeledBody>,
    to: Option<pb::send_to::Kind>,
) -> pb::SendRequest {
    pb::SendRequest {
        idempotency_key: key.into(),
        thread: thread.into(),
        body,
        to: to.map(|kind| pb::SendTo { kind: Some(kind) }),
        ..Default::default()
    }
}

fn fleet_content(text: &str) -> Option<pb::LabeledBody> {
    Some(pb::LabeledBody {
        kind: Some(pb::labeled_body::Kind::Content(pb::LabeledContent {
            content: c(text),
            labels: Some(pb::Labels { taint: pb::Taint::Tainted as i32, scope: pb::Scope::Fleet as i32 }),
        })),
    })
}

#[test]
fn a_coordination_round_trip_over_the_wire() {
    use kungfu_types::Role;
    let mut w = World::new();
    let (governor, _) = register(&mut w, "reg-g");
    let (speaker, speaker_text) = register(&mut w, "reg-s");
    let thread = w.thread_with(governor, &[(speaker, Role::Speaker)]).to_string();

    // A labeled message to the speaker: the receipt names it as the one responder.
    let to_speaker = pb::send_to::Kind::Agents(pb::Agents { agents: vec![speaker_text.clone()] });
    let sent = exec(
        &mut w,
        Principal::Agent(governor),
        request::send_action(send_request("send-1", &thread, fleet_content("ping"), Some(to_speaker))),
    );
    let entry = match pb::SendResponse::from_receipt(&receipt(&sent), sent.replayed).receipt.and_then(|r| r.result) {
        Some(pb::receipt::Result::Sent(s)) => {
            assert_eq!((s.responders, s.readers), (vec![speaker_text.clone()], 1));
            s.entry
        }
        other => panic!("unexpected {other:?}"),
    };

    // The speaker's mailbox, asked-me only, holds it with its labels and the pending response.
    let q = request::mailbox_query(&pb::GetMailboxRequest {
        thread: thread.clone(),
        after: 0,
        filter: pb::MailboxFilter::AskedMe as i32,
        page_size: 10,
    })
    .expect("query");
    let page =
        kungfu_core::coord::read::mailbox(&w.state, speaker, q.thread, q.after, q.filter, q.page_size, &w.limits)
            .expect("a member reads its mailbox");
    let mailbox = pb::Mailbox::from(&page);
    assert_eq!(mailbox.items.len(), 1);
    let item = &mailbox.items[0];
    assert_eq!(item.entry.as_ref().map(|e| e.seq), Some(entry));
    assert_eq!(item.content, c("ping"));
    assert_eq!(item.labels, Some(pb::Labels { taint: pb::Taint::Tainted as i32, scope: pb::Scope::Fleet as i32 }));
    assert!(item.my_response.as_ref().is_some_and(|r| r.ending.is_none()), "the response is owed");

    // The core refuses an empty agents list; the client reads the wire path of that list.
    let nobody_named = pb::send_to::Kind::Agents(pb::Agents { agents: vec![] });
    let refused = rejection(&exec(
        &mut w,
        Principal::Agent(governor),
        request::send_action(send_request("send-2", &thread, fleet_content("x"), Some(nobody_named))),
    ));
    let back = status_rejection(&rejection_status(&refused)).expect("a rejection");
    assert_eq!((back.code, back.field.as_deref()), (Code::InvalidArgument, Some("to.agents.agents")));

    // A named addressee the core refuses is `to.agents.agents[i]` on the wire.
    let outsider = register(&mut w, "reg-o").1;
    let to_outsider = pb::send_to::Kind::Agents(pb::Agents { agents: vec![outsider] });
    let refused = rejection(&exec(
        &mut w,
        Principal::Agent(governor),
        request::send_action(send_request("send-3", &thread, fleet_content("x"), Some(to_outsider))),
    ));
    let back = status_rejection(&rejection_status(&refused)).expect("a rejection");
    assert_eq!((back.code, back.field.as_deref()), (Code::InvalidTarget, Some("to.agents.agents[0]")));

    // Agent-scoped content may not enter a thread: TRUST_VIOLATION, with fak's reason name.
    let private = Some(pb::LabeledBody {
        kind: Some(pb::labeled_body::Kind::Content(pb::LabeledContent {
            content: c("mine"),
            labels: Some(pb::Labels { taint: pb::Taint::Tainted as i32, scope: pb::Scope::Agent as i32 }),
        })),
    });
    let refused = rejection(&exec(
        &mut w,
        Principal::Agent(governor),
        request::send_action(send_request("send-4", &thread, private, None)),
    ));
    let status = rejection_status(&refused);
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    let back = status_rejection(&status).expect("a rejection");
    assert_eq!((back.code, back.field.as_deref()), (Code::TrustViolation, Some("body.content.labels")));
}
