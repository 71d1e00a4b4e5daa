//! Malformed requests are refused at the boundary with a [`FieldError`] naming the exact field, by
//! its full wire path, so a client knows what to fix. Nothing malformed reaches the core.

use kungfu_api::pb;
use kungfu_api::request;
use kungfu_api::{FieldError, KeyedAction};
use kungfu_types::{Code, NextStep, Rejection};

fn c(text: &str) -> Option<pb::Content> {
    Some(pb::Content { body: text.as_bytes().to_vec() })
}

/// The field a conversion refused, or a panic when it did not refuse.
fn refused<T: std::fmt::Debug>(converted: Result<T, FieldError>) -> FieldError {
    match converted {
        Ok(v) => panic!("expected a field error, got {v:?}"),
        Err(e) => e,
    }
}

fn field<T: std::fmt::Debug>(converted: Result<T, FieldError>) -> String {
    refused(converted).field
}

fn valid_post() -> pb::PostRequest {
    pb::PostRequest {
        idempotency_key: "k".into(),
        thread: "th_1".into(),
        body: Some(pb::PostBody {
            kind: Some(pb::post_body::Kind::Pin(pb::MemoryPin { memory: "mem_1".into(), version: 1 })),
        }),
        ..Default::default()
    }
}

fn valid_assignment() -> pb::NewAssignment {
    pb::NewAssignment { addressee: "ag_2".into(), criteria: c("x"), ..Default::default() }
}

fn valid_task() -> pb::CreateTaskRequest {
    pb::CreateTaskRequest {
        idempotency_key: "k".into(),
        audience: Some(pb::Audience { kind: Some(pb::audience::Kind::Open(pb::OpenAudience {})) }),
        contract: Some(pb::ContractDraft { requirements: c("r"), acceptance: c("a"), ..Default::default() }),
    }
}

fn post_with(edit: impl FnOnce(&mut pb::PostRequest)) -> Result<KeyedAction, FieldError> {
    let mut req = valid_post();
    edit(&mut req);
    request::post_action(req.clone())
}

fn task_with(edit: impl FnOnce(&mut pb::CreateTaskRequest)) -> Result<KeyedAction, FieldError> {
    let mut req = valid_task();
    edit(&mut req);
    request::create_task_action(req.clone())
}

fn contract_with(edit: impl FnOnce(&mut pb::ContractDraft)) -> Result<KeyedAction, FieldError> {
    task_with(|t| {
        if let Some(contract) = t.contract.as_mut() {
            edit(contract);
        }
    })
}

#[test]
fn the_fixtures_are_valid() {
    // Each malformed case below changes one field of these; they must convert as they are.
    assert!(request::post_action(valid_post()).is_ok());
    assert!(post_with(|p| p.assignment = Some(valid_assignment())).is_ok());
    assert!(request::create_task_action(valid_task()).is_ok());
}

#[test]
fn a_bad_idempotency_key_names_idempotency_key() {
    for key in ["", "has space", "ünïcode", &"x".repeat(129)] {
        let e = refused(request::leave_action(pb::LeaveRequest { idempotency_key: key.into(), thread: "th_1".into() }));
        assert_eq!(e.field, "idempotency_key", "key {key:?}");
        assert!(!e.message.is_empty());
    }
    // The key is checked before anything else, so a request that is wrong twice names its key.
    let e = refused(request::leave_action(pb::LeaveRequest { idempotency_key: "".into(), thread: "bad".into() }));
    assert_eq!(e.field, "idempotency_key");
}

#[test]
fn a_bad_id_names_its_field() {
    let leave =
        |thread: &str| request::leave_action(pb::LeaveRequest { idempotency_key: "k".into(), thread: thread.into() });
    // Another kind of id, no number, no separator, a negative number, an overflowing number.
    for bad in ["ag_7", "th_x", "th7", "th_-1", "th_18446744073709551616"] {
        let e = refused(leave(bad));
        assert_eq!(e.field, "thread", "{bad}");
        assert_eq!(e.message, "expected an id of the form th_<number>", "{bad}");
    }
    assert_eq!(refused(leave("")), FieldError::new("thread", "is required"));
    // Non-canonical spellings of th_7 are refused so every id has one wire form.
    for bad in ["th_07", "th_+7"] {
        let e = refused(leave(bad));
        assert_eq!(e.field, "thread");
        assert!(e.message.contains("th_7"), "the message shows the canonical form: {}", e.message);
    }
    let remove = request::remove_member_action(pb::RemoveMemberRequest {
        idempotency_key: "k".into(),
        thread: "th_1".into(),
        member: "th_2".into(),
    });
    assert_eq!(field(remove), "member");
    let deactivate =
        request::deactivate_agent_action(pb::DeactivateAgentRequest { idempotency_key: "k".into(), agent: "".into() });
    assert_eq!(field(deactivate), "agent");
    let take = request::take_assignment_action(pb::TakeAssignmentRequest {
        idempotency_key: "k".into(),
        assignment: "task_1".into(),
    });
    assert_eq!(field(take), "assignment");
    let adopt = request::adopt_engagement_action(pb::AdoptEngagementRequest {
        idempotency_key: "k".into(),
        engagement: "asg_1".into(),
    });
    assert_eq!(field(adopt), "engagement");
    let pause = request::pause_task_action(pb::PauseTaskRequest { idempotency_key: "k".into(), task: "th_1".into() });
    assert_eq!(field(pause), "task");
    let publish =
        request::publish_memory_action(pb::PublishMemoryRequest { idempotency_key: "k".into(), memory: "m_1".into() });
    assert_eq!(field(publish), "memory");
}

#[test]
fn a_missing_body_or_content_is_named() {
    assert_eq!(refused(post_with(|p| p.body = None)).field, "body");
    assert_eq!(refused(post_with(|p| p.body = Some(pb::PostBody { kind: None }))).field, "body");
    assert_eq!(
        field(request::create_memory_action(pb::CreateMemoryRequest { idempotency_key: "k".into(), content: None })),
        "content"
    );
    assert_eq!(
        field(request::update_memory_action(pb::UpdateMemoryRequest {
            idempotency_key: "k".into(),
            memory: "mem_1".into(),
            content: None,
        })),
        "content"
    );
    assert_eq!(
        field(request::create_thread_action(
            pb::CreateThreadRequest { idempotency_key: "k".into(), subject: None, grant: None },
            &kungfu_api::SecretMaterial::of("s"),
        )),
        "subject"
    );
    assert_eq!(
        field(request::deliver_assignment_action(pb::DeliverAssignmentRequest {
            idempotency_key: "k".into(),
            assignment: "asg_1".into(),
            output: None,
        })),
        "output"
    );
    assert_eq!(
        field(request::reject_assignment_action(pb::RejectAssignmentRequest {
            idempotency_key: "k".into(),
            assignment: "asg_1".into(),
            reason: None,
        })),
        "reason"
    );
    assert_eq!(
        field(request::deliver_task_action(pb::DeliverTaskRequest {
            idempotency_key: "k".into(),
            task: "task_1".into(),
            output: None,
            take: true,
        })),
        "output"
    );
    assert_eq!(
        field(request::reject_engagement_action(pb::RejectEngagementRequest {
            idempotency_key: "k".into(),
            engagement: "eng_1".into(),
            reason: None,
        })),
        "reason"
    );
}

#[test]
fn post_fields_are_named_by_their_full_path() {
    let pin = |memory: &str, version: u32| {
        Some(pb::PostBody { kind: Some(pb::post_body::Kind::Pin(pb::MemoryPin { memory: memory.into(), version })) })
    };
    assert_eq!(field(post_with(|p| p.body = pin("mem_x", 1))), "body.pin.memory");
    assert_eq!(field(post_with(|p| p.body = pin("mem_1", 0))), "body.pin.version");
    assert_eq!(field(post_with(|p| p.reply_to = Some(0))), "reply_to");
    assert_eq!(field(post_with(|p| p.task_ref = Some(String::new()))), "task_ref");
    assert_eq!(field(post_with(|p| p.task_ref = Some("th_1".into()))), "task_ref");
    let ask = |agents: &[&str]| Some(pb::Ask { agents: agents.iter().map(|a| a.to_string()).collect() });
    assert_eq!(field(post_with(|p| p.ask = ask(&["ag_1", "ag_2", "ag-3"]))), "ask.agents[2]");
    let duplicate = refused(post_with(|p| p.ask = ask(&["ag_1", "ag_2", "ag_1"])));
    assert_eq!(duplicate.field, "ask.agents[2]", "the repeat, not the first occurrence, is at fault");
}

#[test]
fn assignment_fields_are_named_by_their_full_path() {
    let with = |edit: fn(&mut pb::NewAssignment)| {
        post_with(|p| {
            let mut a = valid_assignment();
            edit(&mut a);
            p.assignment = Some(a);
        })
    };
    assert_eq!(field(with(|a| a.addressee = String::new())), "assignment.addressee");
    assert_eq!(field(with(|a| a.addressee = "eng_2".into())), "assignment.addressee");
    assert_eq!(field(with(|a| a.criteria = None)), "assignment.criteria");
}

#[test]
fn task_and_contract_fields_are_named_by_their_full_path() {
    assert_eq!(field(task_with(|t| t.audience = None)), "audience");
    assert_eq!(field(task_with(|t| t.audience = Some(pb::Audience { kind: None }))), "audience");
    let restricted = |agents: &[&str]| {
        Some(pb::Audience {
            kind: Some(pb::audience::Kind::Restricted(pb::RestrictedAudience {
                agents: agents.iter().map(|a| a.to_string()).collect(),
            })),
        })
    };
    assert_eq!(field(task_with(|t| t.audience = restricted(&["ag_1", "x"]))), "audience.restricted.agents[1]");
    assert_eq!(field(task_with(|t| t.audience = restricted(&["ag_1", "ag_1"]))), "audience.restricted.agents[1]");
    assert_eq!(field(task_with(|t| t.contract = None)), "contract");
    assert_eq!(field(contract_with(|c| c.requirements = None)), "contract.requirements");
    assert_eq!(field(contract_with(|c| c.acceptance = None)), "contract.acceptance");
    let pins = |p: &[(&str, u32)]| {
        p.iter().map(|(m, v)| pb::MemoryPin { memory: m.to_string(), version: *v }).collect::<Vec<_>>()
    };
    assert_eq!(field(contract_with(|c| c.inputs = pins(&[("mem_1", 1), ("mem_2", 0)]))), "contract.inputs[1].version");
    assert_eq!(field(contract_with(|c| c.inputs = pins(&[("task_1", 1)]))), "contract.inputs[0].memory");
    assert_eq!(field(contract_with(|c| c.judge = Some("judge".into()))), "contract.judge");
    assert_eq!(field(contract_with(|c| c.judge = Some(String::new()))), "contract.judge");
    assert_eq!(field(contract_with(|c| c.on_missing_judgment = 7)), "contract.on_missing_judgment");
    assert_eq!(
        field(contract_with(|c| {
            c.eligibility = Some(pb::Eligibility { registered_before_unix_micros: Some(-1), excluded: vec![] })
        })),
        "contract.eligibility.registered_before_unix_micros"
    );
    assert_eq!(
        field(contract_with(|c| {
            c.eligibility = Some(pb::Eligibility {
                registered_before_unix_micros: None,
                excluded: vec!["ag_1".into(), "ag1".into()],
            })
        })),
        "contract.eligibility.excluded[1]"
    );
    let revise = request::revise_contract_action(pb::ReviseContractRequest {
        idempotency_key: "k".into(),
        task: "task_1".into(),
        contract: None,
    });
    assert_eq!(field(revise), "contract");
}

#[test]
fn roles_and_secrets_are_checked() {
    let change = |role: i32| {
        request::change_role_action(pb::ChangeRoleRequest {
            idempotency_key: "k".into(),
            thread: "th_1".into(),
            member: "ag_2".into(),
            role,
        })
    };
    // Changing a role must say which; an unknown enum value is refused, never mapped to a default.
    assert_eq!(refused(change(0)), FieldError::new("role", "is required"));
    assert_eq!(field(change(9)), "role");
    let secret = kungfu_api::SecretMaterial::of("s");
    let issue = request::issue_grant_action(
        pb::IssueGrantRequest { idempotency_key: "k".into(), thread: "th_1".into(), role: -1 },
        &secret,
    );
    assert_eq!(field(issue), "role");
    let create = request::create_thread_action(
        pb::CreateThreadRequest {
            idempotency_key: "k".into(),
            subject: c("s"),
            grant: Some(pb::GrantSpec { role: 4 }),
        },
        &secret,
    );
    assert_eq!(field(create), "grant.role");
    let join = request::join_action(pb::JoinRequest { idempotency_key: "k".into(), grant_secret: String::new() });
    assert_eq!(refused(join), FieldError::new("grant_secret", "is required"));
}

#[test]
fn entry_numbers_and_versions_start_at_one() {
    let handle = request::handle_action(pb::HandleRequest {
        idempotency_key: "k".into(),
        thread: "th_1".into(),
        entry: 0,
        note: None,
    });
    assert_eq!(field(handle), "entry");
    let retract =
        request::retract_action(pb::RetractRequest { idempotency_key: "k".into(), thread: "th_1".into(), entry: 0 });
    assert_eq!(field(retract), "entry");
    assert_eq!(field(request::get_entry_query(&pb::GetEntryRequest { thread: "th_1".into(), entry: 0 })), "entry");
    assert_eq!(
        field(request::get_memory_query(&pb::GetMemoryRequest { memory: "mem_1".into(), version: Some(0) })),
        "version"
    );
    assert_eq!(
        field(request::get_task_query(&pb::GetTaskRequest { task: "task_1".into(), version: Some(0) })),
        "version"
    );
}

#[test]
fn malformed_reads_name_their_field() {
    assert_eq!(
        field(request::get_response_query(&pb::GetResponseRequest {
            thread: "th_1".into(),
            entry: 1,
            responder: "x".into()
        })),
        "responder"
    );
    assert_eq!(
        field(request::timeline_query(&pb::TimelineRequest { thread: "".into(), after: 0, page_size: 0 })),
        "thread"
    );
    assert_eq!(field(request::turn_query(&pb::GetTurnRequest { cursor: "zz".into(), page_size: 0 })), "cursor");
    assert_eq!(
        field(request::opportunities_query(&pb::GetOpportunitiesRequest { cursor: "abc".into(), page_size: 0 })),
        "cursor"
    );
    for bad in ["", "x_1", "asg_1", "eng_1", "th_07"] {
        assert_eq!(field(request::working_set_query(&pb::GetWorkingSetRequest { object: bad.into() })), "object");
    }
    assert_eq!(
        field(request::get_engagement_input_query(&pb::GetEngagementInputRequest {
            engagement: "eng".into(),
            index: 0
        })),
        "engagement"
    );
}

#[test]
fn a_field_error_is_an_invalid_argument_rejection_about_that_field() {
    let r = Rejection::from(FieldError::new("ask.agents[2]", "expected an id of the form ag_<number>"));
    assert_eq!(r.code, Code::InvalidArgument);
    assert_eq!(r.field.as_deref(), Some("ask.agents[2]"));
    assert_eq!(r.message, "ask.agents[2]: expected an id of the form ag_<number>");
    assert_eq!(r.next, NextStep::Revise);
    assert!(r.definite, "a refused malformed request certainly had no effect");
}

// --- Coordination (COORDINATION §7.2) ----------------------------------------------------------------

fn wire_labels(taint: i32, scope: i32) -> Option<pb::Labels> {
    Some(pb::Labels { taint, scope })
}

const TAINTED: i32 = pb::Taint::Tainted as i32;
const FLEET: i32 = pb::Scope::Fleet as i32;

fn labeled_content(content: Option<pb::Content>, labels: Option<pb::Labels>) -> Option<pb::LabeledBody> {
    Some(pb::LabeledBody { kind: Some(pb::labeled_body::Kind::Content(pb::LabeledContent { content, labels })) })
}

fn labeled_pin(memory: &str, version: u32) -> Option<pb::LabeledBody> {
    Some(pb::LabeledBody { kind: Some(pb::labeled_body::Kind::Pin(pb::MemoryPin { memory: memory.into(), version })) })
}

fn valid_write_labeled() -> pb::WriteLabeledRequest {
    pb::WriteLabeledRequest {
        idempotency_key: "k".into(),
        memory: None,
        content: c("x"),
        labels: wire_labels(TAINTED, FLEET),
    }
}

fn valid_widen() -> pb::WidenScopeRequest {
    pb::WidenScopeRequest {
        idempotency_key: "k".into(),
        pin: Some(pb::MemoryPin { memory: "mem_1".into(), version: 1 }),
        scope: pb::Scope::Public as i32,
    }
}

fn valid_send() -> pb::SendRequest {
    pb::SendRequest {
        idempotency_key: "k".into(),
        thread: "th_1".into(),
        body: labeled_content(c("x"), wire_labels(TAINTED, FLEET)),
        ..Default::default()
    }
}

fn valid_scatter() -> pb::ScatterRequest {
    pb::ScatterRequest {
        idempotency_key: "k".into(),
        thread: "th_1".into(),
        header: labeled_pin("mem_1", 1),
        goals: (2..5)
            .map(|a| pb::RankGoal {
                member: format!("ag_{a}"),
                body: labeled_content(c("part"), wire_labels(TAINTED, FLEET)),
            })
            .collect(),
        criteria: c("c"),
        ..Default::default()
    }
}

fn write_labeled_with(edit: impl FnOnce(&mut pb::WriteLabeledRequest)) -> Result<KeyedAction, FieldError> {
    let mut req = valid_write_labeled();
    edit(&mut req);
    request::write_labeled_action(req.clone())
}

fn widen_with(edit: impl FnOnce(&mut pb::WidenScopeRequest)) -> Result<KeyedAction, FieldError> {
    let mut req = valid_widen();
    edit(&mut req);
    request::widen_scope_action(req.clone())
}

fn send_with(edit: impl FnOnce(&mut pb::SendRequest)) -> Result<KeyedAction, FieldError> {
    let mut req = valid_send();
    edit(&mut req);
    request::send_action(req.clone())
}

fn scatter_with(edit: impl FnOnce(&mut pb::ScatterRequest)) -> Result<KeyedAction, FieldError> {
    let mut req = valid_scatter();
    edit(&mut req);
    request::scatter_action(req.clone())
}

#[test]
fn the_coordination_fixtures_are_valid() {
    assert!(request::write_labeled_action(valid_write_labeled()).is_ok());
    assert!(request::widen_scope_action(valid_widen()).is_ok());
    assert!(request::send_action(valid_send()).is_ok());
    assert!(request::scatter_action(valid_scatter()).is_ok());
}

#[test]
fn unspecified_or_unknown_labels_are_refused_where_labels_are_required() {
    assert_eq!(refused(write_labeled_with(|r| r.labels = None)), FieldError::missing("labels"));
    // Unspecified is not a default: the author states the labels or the write is refused.
    assert_eq!(field(write_labeled_with(|r| r.labels = wire_labels(0, FLEET))), "labels.taint");
    assert_eq!(field(write_labeled_with(|r| r.labels = wire_labels(TAINTED, 0))), "labels.scope");
    assert_eq!(field(write_labeled_with(|r| r.labels = wire_labels(9, FLEET))), "labels.taint");
    assert_eq!(field(write_labeled_with(|r| r.labels = wire_labels(TAINTED, -1))), "labels.scope");
    assert_eq!(field(widen_with(|r| r.scope = 0)), "scope");
    assert_eq!(field(widen_with(|r| r.scope = 5)), "scope");
    let body = |labels| labeled_content(c("x"), labels);
    assert_eq!(field(send_with(|r| r.body = body(None))), "body.content.labels");
    assert_eq!(field(send_with(|r| r.body = body(wire_labels(0, FLEET)))), "body.content.labels.taint");
    assert_eq!(field(send_with(|r| r.body = body(wire_labels(TAINTED, 0)))), "body.content.labels.scope");
    assert_eq!(field(scatter_with(|r| r.header = body(wire_labels(TAINTED, 0)))), "header.content.labels.scope");
    assert_eq!(
        field(scatter_with(|r| r.goals[1].body = body(wire_labels(0, FLEET)))),
        "goals[1].body.content.labels.taint"
    );
}

#[test]
fn labeled_write_and_widening_fields_are_named() {
    assert_eq!(field(write_labeled_with(|r| r.memory = Some(String::new()))), "memory");
    assert_eq!(field(write_labeled_with(|r| r.memory = Some("th_1".into()))), "memory");
    assert_eq!(field(write_labeled_with(|r| r.content = None)), "content");
    assert_eq!(field(write_labeled_with(|r| r.idempotency_key = String::new())), "idempotency_key");
    assert_eq!(refused(widen_with(|r| r.pin = None)), FieldError::missing("pin"));
    assert_eq!(field(widen_with(|r| r.pin = Some(pb::MemoryPin { memory: "mem".into(), version: 1 }))), "pin.memory");
    assert_eq!(
        field(widen_with(|r| r.pin = Some(pb::MemoryPin { memory: "mem_1".into(), version: 0 }))),
        "pin.version"
    );
}

#[test]
fn send_fields_are_named_by_their_full_path() {
    assert_eq!(field(send_with(|r| r.thread = String::new())), "thread");
    assert_eq!(field(send_with(|r| r.thread = "ag_1".into())), "thread");
    assert_eq!(field(send_with(|r| r.body = None)), "body");
    assert_eq!(field(send_with(|r| r.body = Some(pb::LabeledBody { kind: None }))), "body");
    assert_eq!(field(send_with(|r| r.body = labeled_pin("mem_x", 1))), "body.pin.memory");
    assert_eq!(field(send_with(|r| r.body = labeled_pin("mem_1", 0))), "body.pin.version");
    assert_eq!(
        field(send_with(|r| r.body = labeled_content(None, wire_labels(TAINTED, FLEET)))),
        "body.content.content"
    );
    // A `SendTo` that chose nothing is refused, never read as "nobody".
    assert_eq!(field(send_with(|r| r.to = Some(pb::SendTo { kind: None }))), "to");
    let agents = |list: &[&str]| {
        Some(pb::SendTo {
            kind: Some(pb::send_to::Kind::Agents(pb::Agents { agents: list.iter().map(|a| a.to_string()).collect() })),
        })
    };
    assert_eq!(field(send_with(|r| r.to = agents(&["ag_1", "agent"]))), "to.agents.agents[1]");
    let duplicate = refused(send_with(|r| r.to = agents(&["ag_1", "ag_2", "ag_1"])));
    assert_eq!(duplicate.field, "to.agents.agents[2]", "the repeat, not the first occurrence, is at fault");
    assert_eq!(field(send_with(|r| r.reply_to = Some(0))), "reply_to");
}

#[test]
fn scatter_fields_are_named_by_their_full_path_and_position_as_sent() {
    assert_eq!(field(scatter_with(|r| r.thread = "th_x".into())), "thread");
    assert_eq!(field(scatter_with(|r| r.header = None)), "header");
    assert_eq!(field(scatter_with(|r| r.header = labeled_pin("mem_1", 0))), "header.pin.version");
    assert_eq!(field(scatter_with(|r| r.goals[2].member = "ag_02".into())), "goals[2].member");
    assert_eq!(field(scatter_with(|r| r.goals[0].member = String::new())), "goals[0].member");
    assert_eq!(field(scatter_with(|r| r.goals[1].body = None)), "goals[1].body");
    assert_eq!(field(scatter_with(|r| r.goals[2].body = labeled_pin("task_1", 1))), "goals[2].body.pin.memory");
    assert_eq!(
        field(scatter_with(|r| r.goals[1].body = labeled_content(None, wire_labels(TAINTED, FLEET)))),
        "goals[1].body.content.content"
    );
    assert_eq!(field(scatter_with(|r| r.criteria = None)), "criteria");
}

#[test]
fn malformed_coordination_reads_name_their_field() {
    let mailbox = |thread: &str, filter: i32| {
        request::mailbox_query(&pb::GetMailboxRequest { thread: thread.into(), after: 0, filter, page_size: 0 })
    };
    assert_eq!(field(mailbox("", 0)), "thread");
    assert_eq!(field(mailbox("th_1", 3)), "filter");
    let collective = |thread: &str, header: u64| {
        request::collective_query(&pb::GetCollectiveRequest { thread: thread.into(), header, include_outputs: false })
    };
    assert_eq!(field(collective("mem_1", 1)), "thread");
    assert_eq!(field(collective("th_1", 0)), "header");
    let barrier =
        |thread: &str, entry: u64| request::barrier_query(&pb::GetBarrierRequest { thread: thread.into(), entry });
    assert_eq!(field(barrier("th_", 1)), "thread");
    assert_eq!(field(barrier("th_1", 0)), "entry");
}

#[test]
fn the_cores_addressee_paths_leave_the_server_as_wire_paths() {
    // The core names `Send`'s list `to.agents`; on the wire it is the `agents` field of `Agents`.
    use kungfu_api::status::wire_field_path;
    assert_eq!(wire_field_path("to.agents"), "to.agents.agents");
    assert_eq!(wire_field_path("to.agents[3]"), "to.agents.agents[3]");
    assert_eq!(wire_field_path("to.agents.agents[3]"), "to.agents.agents[3]", "already a wire path");
    assert_eq!(wire_field_path("to.all_speakers"), "to.all_speakers");
    assert_eq!(wire_field_path("goals[2].member"), "goals[2].member");
    assert_eq!(wire_field_path("delivery_window_micros"), "delivery_window_micros");
}
