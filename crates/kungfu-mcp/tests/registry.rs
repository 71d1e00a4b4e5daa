//! The tool registry: one tool per unary agent RPC, named by one rule, with valid schemas and
//! descriptions in one convention.

use kungfu_mcp::json::message_to_json;
use kungfu_mcp::registry::{
    IDEMPOTENCY_KEY, NOT_AGENT_SERVICES, PACKAGE, RECEIPT, RECEIPTS, ToolKind, ToolSpec, registry,
};
use kungfu_mcp::{Toolset, Toolsets};
use prost_reflect::{DynamicMessage, Kind, Value as Proto};
use serde_json::{Value as Json, json};
use std::collections::HashSet;

/// Every tool, in registry order. A new RPC changes this list on purpose, never by accident.
const NAMES: &[&str] = &[
    "agent_register",
    "agent_deactivate",
    "wake_target_set",
    "wake_target_remove",
    "wake_targets_get",
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
    "barrier_wait",
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
    assert_eq!(rpc_tools + 2, NAMES.len(), "the RPC tools, turn_wait and barrier_wait");
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
    assert!(accepts("thread_post", json!({"thread": "th_1", "body": {"content": "hello"}, "reply_to": 3})));
    assert!(
        !accepts("thread_post", json!({"thread": "th_1", "reply_to": "3"})),
        "a model is told integers are numbers (the door still reads a decimal string, proto3 JSON's form)"
    );
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
    assert!(accepts("barrier_wait", json!({"thread": "th_1", "entry": 3, "timeout_secs": 60})));
    assert!(accepts("barrier_wait", json!({"thread": "th_1", "entry": 3})), "the timeout has a default");
    assert!(!accepts("barrier_wait", json!({"thread": "th_1", "entry": 3, "timeout_secs": 61})));
    assert!(!accepts("barrier_wait", json!({"thread": "th_1", "entry": 3, "timeout_secs": 0})));
    assert!(!accepts("barrier_wait", json!({"thread": "th_1", "entrie": 3})), "unknown keys are refused");
}

#[test]
fn content_is_a_string_documented_as_participant_content() {
    let content = &input("memory_create")["properties"]["content"];
    assert_eq!(content["type"], json!("string"), "a model writes text");
    assert!(content["description"].as_str().unwrap_or("").contains("never interpreted"));
    let oneof = &input("thread_post")["properties"]["body"]["description"];
    assert!(oneof.as_str().unwrap_or("").contains("Exactly one of `pin`, `content`"), "{oneof}");
}

/// Issue #31: prose a schema already carries is not repeated on every nested field.
#[test]
fn input_schemas_say_each_thing_once() {
    for spec in registry().tools() {
        let text = input(spec.name()).to_string();
        let content_notes = text.matches("never interpreted").count();
        assert!(content_notes <= 1, "{}: the content note {content_notes} times", spec.name());
        assert!(!text.contains("One case of oneof"), "{}: a oneof is noted on its message only", spec.name());
        assert!(!text.contains(r#"["integer","string"]"#), "{}: integers are integers", spec.name());
        assert!(!text.contains("_UNSPECIFIED"), "{}: leaving a field out is how to say unspecified", spec.name());
    }
    // A record body is written in two places of a patch (replace_body, append_note.body): what a
    // body is, is said at the first.
    let patch = input("record_patch").to_string();
    let body = registry().pool().get_message_by_name("kungfu.v1.RecordBodyInput").expect("RecordBodyInput");
    let own = kungfu_mcp::schema::comment(&body.parent_file(), body.path()).expect("a comment");
    assert_eq!(patch.matches(own.as_str()).count(), 1, "{patch}");
}

#[test]
fn sixty_four_bit_integers_are_numbers_in_both_directions() {
    let receipt = &output("thread_post")["properties"]["receipt"]["properties"];
    assert_eq!(receipt["at_unix_micros"], json!({"type": "integer"}));
    assert_eq!(input("thread_post")["properties"]["reply_to"]["type"], json!("integer"));
    assert_eq!(input("thread_post")["properties"]["reply_to"]["minimum"], json!(0), "a sequence number is unsigned");
}

/// Every `description` in a schema.
fn descriptions(schema: &Json, out: &mut Vec<String>) {
    match schema {
        Json::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("description", Json::String(d)) => out.push(d.clone()),
                    _ => descriptions(v, out),
                }
            }
        }
        Json::Array(items) => items.iter().for_each(|i| descriptions(i, out)),
        _ => {}
    }
}

/// Output schemas are structure for validating results: no prose but the participant-content note
/// (L6) and what the door adds itself, so `tools/list` stays within its budget.
#[test]
fn output_schemas_carry_structure_and_the_content_note_only() {
    for spec in registry().tools().iter().filter(|t| t.name() != "turn_wait") {
        let mut found = Vec::new();
        descriptions(&output(spec.name()), &mut found);
        for d in found {
            assert!(
                d == kungfu_mcp::schema::CONTENT_DESCRIPTION || d.contains("idempotency key"),
                "{}: output prose {d:?}",
                spec.name()
            );
        }
    }
    let mut entry = Vec::new();
    descriptions(&output("entry_get"), &mut entry);
    assert_eq!(entry, vec![kungfu_mcp::schema::CONTENT_DESCRIPTION.to_string()], "content is documented once");
}

fn write_methods() -> Vec<(String, String)> {
    registry()
        .tools()
        .iter()
        .filter_map(|t| match &t.kind {
            ToolKind::Rpc(r) if r.write => Some((t.name().to_string(), r.method.full_name().to_string())),
            _ => None,
        })
        .collect()
}

#[test]
fn every_write_names_one_receipt_case_and_every_case_is_some_write_s() {
    let receipt = registry().pool().get_message_by_name(RECEIPT).expect("Receipt");
    let oneof = receipt.oneofs().find(|o| o.name() == "result").expect("oneof result");
    let cases: HashSet<String> = oneof.fields().map(|f| f.name().to_string()).collect();
    let mut named = HashSet::new();
    for (tool, method) in write_methods() {
        let entries: Vec<_> = RECEIPTS.iter().filter(|(m, _)| *m == method).collect();
        assert_eq!(entries.len(), 1, "{tool} ({method}) has one RECEIPTS entry");
        assert!(cases.contains(entries[0].1), "{} is a case of Receipt.result", entries[0].1);
        assert!(named.insert(entries[0].1), "{} is the receipt of two writes", entries[0].1);
    }
    assert_eq!(RECEIPTS.len(), named.len(), "RECEIPTS names only writes");
    let unnamed: Vec<&String> = cases.iter().filter(|c| !named.contains(c.as_str())).collect();
    let mut unnamed: Vec<&str> = unnamed.into_iter().map(String::as_str).collect();
    unnamed.sort_unstable();
    assert_eq!(unnamed, vec!["expired", "wake_recorded"], "only the server's own receipts are no write's");
}

#[test]
fn a_write_s_output_schema_shows_only_its_own_receipt_case() {
    for (tool, method) in write_methods() {
        let case = RECEIPTS.iter().find(|(m, _)| *m == method).map(|(_, c)| *c).expect("a case");
        let receipt = &output(&tool)["properties"]["receipt"];
        let mut keys: Vec<&str> =
            receipt["properties"].as_object().expect("properties").keys().map(String::as_str).collect();
        keys.sort_unstable();
        let mut want = vec!["at_unix_micros", "kind", "seq", case];
        want.sort_unstable();
        assert_eq!(keys, want, "{tool}");
        assert!(!receipt.to_string().contains("Exactly one of"), "{tool}: no choice left to describe");
    }
}

/// A result as the door maps it, with every message field set (recursively, to a depth), so a
/// schema that leaves a field out, or describes one wrongly, fails.
fn filled(desc: &prost_reflect::MessageDescriptor, depth: usize, case: Option<&str>) -> DynamicMessage {
    let mut m = DynamicMessage::new(desc.clone());
    if depth == 0 {
        return m;
    }
    for field in desc.fields() {
        if let Some(o) = field.containing_oneof().filter(|o| !o.is_synthetic()) {
            let wanted = match case {
                Some(c) if desc.full_name() == RECEIPT => field.name() == c,
                _ => o.fields().next().is_some_and(|f| f.name() == field.name()),
            };
            if !wanted {
                continue;
            }
        }
        if let Kind::Message(inner) = field.kind()
            && !field.is_map()
        {
            let v = Proto::Message(filled(&inner, depth - 1, case));
            m.set_field(&field, if field.is_list() { Proto::List(vec![v]) } else { v });
        } else if field.supports_presence() && !field.is_list() {
            m.set_field(&field, Proto::default_value_for_field(&field));
        }
    }
    m
}

#[test]
fn every_result_the_door_can_answer_validates_against_its_tool_s_output_schema() {
    for spec in registry().tools() {
        let ToolKind::Rpc(rpc) = &spec.kind else { continue };
        let case = RECEIPTS.iter().find(|(m, _)| *m == rpc.method.full_name()).map(|(_, c)| *c);
        let validator = jsonschema::validator_for(&output(spec.name())).expect("valid schema");
        let mut answer = message_to_json(&filled(&rpc.method.output(), 6, case));
        if rpc.write {
            answer[IDEMPOTENCY_KEY] = json!("k1");
        }
        if let Err(e) = validator.validate(&answer) {
            panic!("{}: {answer} does not validate: {e}", spec.name());
        }
        if rpc.write {
            // Another action's receipt is not this tool's result.
            let other = if case == Some("posted") { "joined" } else { "posted" };
            let mut wrong = message_to_json(&filled(&rpc.method.output(), 6, Some(other)));
            wrong[IDEMPOTENCY_KEY] = json!("k1");
            assert!(!validator.is_valid(&wrong), "{}: the schema admits the `{other}` receipt", spec.name());
        }
    }
}

/// Issue #31: `barrier_wait` answers what `barrier_get` answers, so a host validates both alike;
/// only its input adds the bound of the wait.
#[test]
fn barrier_wait_answers_barrier_get_s_schema_and_takes_its_arguments() {
    assert_eq!(output("barrier_wait"), output("barrier_get"));
    let mut wait = input("barrier_wait");
    let timeout = wait["properties"].as_object_mut().expect("properties").remove("timeout_secs").expect("timeout");
    assert_eq!((timeout["minimum"].clone(), timeout["maximum"].clone()), (json!(1), json!(60)));
    assert_eq!(timeout["maximum"], input("turn_wait")["properties"]["timeout_secs"]["maximum"], "one limit");
    assert_eq!(wait, input("barrier_get"));
    let read_only = tool("barrier_wait").tool.annotations.as_ref().and_then(|a| a.read_only_hint);
    assert_eq!(read_only, Some(true), "a wait only reads");
}

#[test]
fn every_tool_is_in_one_toolset_by_its_service() {
    for spec in registry().tools() {
        let want = match &spec.kind {
            ToolKind::Rpc(r) => match r.method.parent_service().name() {
                "CoordService" => Toolset::Coord,
                "RecordService" => Toolset::Records,
                _ => Toolset::Default,
            },
            ToolKind::TurnWait => Toolset::Default,
            // Issue #31: a barrier is the coordination layer's, so is the wait on one.
            ToolKind::BarrierWait => Toolset::Coord,
        };
        assert_eq!(spec.toolset, want, "{}", spec.name());
    }
    let default: Vec<&str> = registry().tools_in(Toolsets::default()).map(|t| t.name()).collect();
    for everyday in [
        "agent_register",
        "turn_get",
        "turn_wait",
        "working_set_get",
        "thread_post",
        "thread_join",
        "assignment_take",
        "task_take",
        "memory_create",
    ] {
        assert!(default.contains(&everyday), "{everyday} is everyday work");
    }
    assert_eq!(registry().tools_in(Toolsets::all()).count(), NAMES.len());
}

/// A description names only tools a connection that lists it also lists: its own set's or the
/// default set's, so an agent that sees a tool can follow what it says.
#[test]
fn descriptions_name_only_tools_served_beside_them() {
    for spec in registry().tools() {
        let d = spec.tool.description.as_deref().unwrap_or("");
        let sets = Toolsets::default().with(spec.toolset);
        for word in d.split(|c: char| !(c.is_ascii_lowercase() || c == '_')) {
            if let Some(named) = registry().get(word) {
                assert!(sets.contains(named.toolset), "{} names {word}, of toolset {}", spec.name(), named.toolset);
            }
        }
    }
}
