//! The tool registry: one tool per unary agent RPC, named by one rule, with valid schemas and
//! descriptions in one convention.

use kungfu_mcp::registry::{IDEMPOTENCY_KEY, NOT_AGENT_SERVICES, PACKAGE, ToolKind, ToolSpec, registry};
use serde_json::{Value as Json, json};
use std::collections::HashSet;

/// Every tool, in registry order. A new RPC changes this list on purpose, never by accident.
const NAMES: &[&str] = &[
    "agent_register",
    "agent_deactivate",
    "assignment_take",
    "assignment_deliver",
    "assignment_adopt",
    "assignment_reject",
    "assignment_drop",
    "assignment_void",
    "assignment_get",
    "memory_create",
    "memory_update",
    "memory_publish",
    "memory_unpublish",
    "memory_withdraw",
    "memory_get",
    "task_create",
    "task_revise",
    "task_pause",
    "task_resume",
    "task_take",
    "task_deliver",
    "task_drop_engagement",
    "task_adopt_engagement",
    "task_reject_engagement",
    "task_get",
    "engagement_get",
    "engagement_input_get",
    "thread_create",
    "thread_issue_grant",
    "thread_void_grant",
    "thread_join",
    "thread_leave",
    "thread_remove_member",
    "thread_change_role",
    "thread_post",
    "thread_handle",
    "thread_retract",
    "thread_close",
    "thread_timeline",
    "entry_get",
    "response_get",
    "referenced_task_get",
    "memory_write_labeled",
    "memory_widen_scope",
    "message_send",
    "work_scatter",
    "mailbox_get",
    "collective_get",
    "barrier_get",
    "record_create",
    "record_patch",
    "record_get",
    "record_events_get",
    "record_body_get",
    "turn_get",
    "opportunities_get",
    "working_set_get",
    "turn_wait",
];

fn tool(name: &str) -> &'static ToolSpec {
    registry().get(name).unwrap_or_else(|| panic!("no tool {name}"))
}

fn input(name: &str) -> Json {
    Json::Object(tool(name).tool.input_schema.as_ref().clone())
}

fn output(name: &str) -> Json {
    Json::Object(tool(name).tool.output_schema.as_ref().expect("every tool has an output schema").as_ref().clone())
}

fn is_noun_verb(name: &str) -> bool {
    let parts: Vec<&str> = name.split('_').collect();
    parts.len() >= 2 && parts.iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase()))
}

#[test]
fn tool_names_are_the_snapshot() {
    assert_eq!(kungfu_mcp::tool_names(), NAMES);
}

#[test]
fn tool_names_are_unique_and_noun_verb() {
    let names = kungfu_mcp::tool_names();
    let unique: HashSet<&str> = names.iter().copied().collect();
    assert_eq!(unique.len(), names.len(), "duplicate tool names");
    for n in names {
        assert!(is_noun_verb(n), "{n} is not ^[a-z]+(_[a-z]+)+$");
    }
}

#[test]
fn every_unary_agent_rpc_has_exactly_one_tool() {
    let reg = registry();
    let mut services: Vec<String> = reg
        .pool()
        .services()
        .filter(|s| s.package_name() == PACKAGE && !NOT_AGENT_SERVICES.contains(&s.full_name()))
        .map(|s| s.name().to_string())
        .collect();
    services.sort_unstable();
    assert_eq!(
        services,
        [
            "AgentService",
            "AssignmentService",
            "CoordService",
            "MemoryService",
            "RecordService",
            "TaskService",
            "ThreadService",
            "TurnService"
        ]
    );
    let mut unary = 0;
    for service in reg.pool().services().filter(|s| s.package_name() == PACKAGE) {
        let agent = !NOT_AGENT_SERVICES.contains(&service.full_name());
        for method in service.methods() {
            let tools = reg
                .tools()
                .iter()
                .filter(|t| matches!(&t.kind, ToolKind::Rpc(r) if r.method.full_name() == method.full_name()))
                .count();
            let served = agent && !method.is_client_streaming() && !method.is_server_streaming();
            assert_eq!(tools, usize::from(served), "{}", method.full_name());
            unary += usize::from(served);
        }
    }
    let rpc_tools = reg.tools().iter().filter(|t| matches!(t.kind, ToolKind::Rpc(_))).count();
    assert_eq!(rpc_tools, unary);
    assert_eq!(rpc_tools + 1, NAMES.len(), "the RPC tools and turn_wait");
}

#[test]
fn writes_take_an_optional_idempotency_key_and_report_it() {
    let mut writes = 0;
    for spec in registry().tools() {
        let ToolKind::Rpc(rpc) = &spec.kind else { continue };
        let name = spec.name();
        let annotations = spec.tool.annotations.clone().expect("annotated");
        assert!(input(name).get("required").is_none(), "{name}: no input field is required by the schema");
        assert_eq!(input(name)["additionalProperties"], json!(false), "{name}");
        let has_key = rpc.method.input().get_field_by_name(IDEMPOTENCY_KEY).is_some();
        assert_eq!(rpc.write, has_key, "{name}");
        if rpc.write {
            writes += 1;
            assert!(
                input(name)["properties"][IDEMPOTENCY_KEY]["description"].as_str().unwrap_or("").contains("Optional")
            );
            assert_eq!(output(name)["properties"][IDEMPOTENCY_KEY]["type"], json!("string"), "{name}");
            assert_eq!(annotations.read_only_hint, Some(false), "{name}");
            assert_eq!(annotations.idempotent_hint, Some(true), "{name}");
        } else {
            assert!(output(name)["properties"].get(IDEMPOTENCY_KEY).is_none(), "{name}");
            assert_eq!(annotations.read_only_hint, Some(true), "{name}");
        }
    }
    assert!(writes > 20, "the API has many writes: {writes}");
}

#[test]
fn destructive_hints_mark_the_writes_that_end_something() {
    let destructive = |n: &str| tool(n).tool.annotations.as_ref().and_then(|a| a.destructive_hint);
    for n in ["agent_deactivate", "memory_withdraw", "thread_close", "thread_leave", "thread_remove_member"] {
        assert_eq!(destructive(n), Some(true), "{n}");
    }
    for n in ["thread_post", "assignment_take", "agent_register", "turn_get"] {
        assert_eq!(destructive(n), Some(false), "{n}");
    }
}

#[test]
fn descriptions_follow_the_convention_and_name_only_real_tools() {
    // Words that look like tool names but are fields (`agent_key`, `next_cursor`).
    let mut fields: HashSet<String> = registry()
        .pool()
        .all_messages()
        .flat_map(|m| m.fields().map(|f| f.name().to_string()).collect::<Vec<_>>())
        .collect();
    // And the fields of a rejection result.
    fields.extend(["next_step".to_string(), "retry_after_micros".to_string()]);
    for spec in registry().tools() {
        let name = spec.name();
        let d = spec.tool.description.as_deref().unwrap_or("");
        let (needs, returns, next) = (d.find(" Needs: "), d.find(" Returns: "), d.find(" Next: "));
        assert!(needs.is_some() && needs < returns && returns < next, "{name}: {d}");
        assert!(needs > Some(10), "{name} says what it does first");
        for word in d[next.unwrap_or(0)..].split(|c: char| !(c.is_ascii_lowercase() || c == '_')) {
            if is_noun_verb(word) && !fields.contains(word) {
                assert!(registry().get(word).is_some(), "{name}'s next step names {word}, which is no tool");
            }
        }
    }
    assert!(tool("turn_get").tool.description.as_deref().unwrap_or("").starts_with("The caller's open obligations"));
    assert!(tool("agent_register").tool.description.as_deref().unwrap_or("").contains("Needs: no agent key"));
}

#[test]
fn every_schema_is_valid_json_schema() {
    for spec in registry().tools() {
        for (side, schema) in [("input", input(spec.name())), ("output", output(spec.name()))] {
            assert_eq!(schema["type"], json!("object"), "{} {side}", spec.name());
            if let Err(e) = jsonschema::validator_for(&schema) {
                panic!("{} {side} schema is invalid: {e}", spec.name());
            }
        }
    }
}

fn accepts(name: &str, args: Json) -> bool {
    jsonschema::validator_for(&input(name)).expect("valid schema").is_valid(&args)
}

#[test]
fn input_schemas_accept_valid_calls_and_refuse_wrong_types() {
    assert!(accepts("thread_post", json!({"thread": "th_1", "body": {"content": "hello"}, "reply_to": 3})));
    assert!(accepts(
        "thread_post",
        json!({"thread": "th_1", "body": {"content": {"base64": "AAE="}}, "reply_to": "3"})
    ));
    assert!(accepts(
        "thread_post",
        json!({"idempotency_key": "k1", "thread": "th_1", "body": {"pin": {"memory": "mem_1", "version": 1}}})
    ));
    assert!(!accepts("thread_post", json!({"thread": 7})), "an id is a string");
    assert!(!accepts("thread_post", json!({"thread": "th_1", "threed": "x"})), "unknown keys are refused");
    assert!(!accepts("thread_post", json!({"thread": "th_1", "reply_to": -1})), "sequence numbers are unsigned");
    assert!(accepts("turn_get", json!({})));
    assert!(accepts("turn_get", json!({"page_size": 10})));
    assert!(!accepts("turn_get", json!({"page_size": "ten"})));
    assert!(accepts("thread_change_role", json!({"thread": "th_1", "member": "ag_2", "role": "ROLE_OBSERVER"})));
    assert!(!accepts("thread_change_role", json!({"role": "observer"})), "enums by their proto names");
    assert!(accepts("turn_wait", json!({"timeout_secs": 5})));
    assert!(!accepts("turn_wait", json!({"timeout_secs": 600})));
}

#[test]
fn content_is_a_string_documented_as_participant_content() {
    let content = &input("memory_create")["properties"]["content"];
    assert_eq!(content["anyOf"][0], json!({"type": "string"}));
    assert!(content["description"].as_str().unwrap_or("").contains("never interpreted"));
    let oneof = &input("thread_post")["properties"]["body"]["description"];
    assert!(oneof.as_str().unwrap_or("").contains("exactly one of `pin`, `content`"), "{oneof}");
}

#[test]
fn sixty_four_bit_integers_are_numbers_in_output_schemas() {
    let receipt = &output("thread_post")["properties"]["receipt"]["properties"];
    assert_eq!(
        receipt["at_unix_micros"],
        json!({"type": "integer", "description": receipt["at_unix_micros"]["description"]})
    );
    assert_eq!(input("thread_post")["properties"]["reply_to"]["type"], json!(["integer", "string"]));
}
