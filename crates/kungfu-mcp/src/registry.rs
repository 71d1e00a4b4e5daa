//! The one registry of tools, built once from the descriptor set of `kungfu.v1`: one tool per
//! unary method of every agent service, plus the two long waits, `turn_wait` and `barrier_wait`.
//! Nothing here is written per RPC: a call the API gains (the coordination layer's included)
//! becomes a tool with a name, schemas, a description and annotations by the same rules, and the
//! tests pin the result.
//!
//! - Names are noun_verb: `<service noun>_<method>` (`thread_post`, `assignment_take`), and
//!   `Get<X>` reads become `<x>_get` (`turn_get`, `working_set_get`, `entry_get`; a bare `Get` is
//!   `<noun>_get`). [`NAME_OVERRIDES`] renames the few where the rule reads badly.
//! - A write is a method whose request has `idempotency_key` (the package's convention): its tool
//!   takes an optional key, generates one when absent and reports it in the result (L3).
//! - Descriptions follow one convention, "What it does. Needs: … Returns: … Next: …", from the
//!   method's proto comment; the parts a comment does not give are derived (auth from the method,
//!   the key from being a write, the result from the response message).
//! - A write's output schema is its response message with the receipt narrowed to the one case
//!   its action produces ([`RECEIPTS`]), so `tools/list` does not carry the whole receipt union
//!   once per tool (issue #31).
//! - Every tool belongs to one [`Toolset`], by its service ([`Toolset::of_service`]).

use crate::schema::{self, Direction};
use crate::toolsets::{Toolset, Toolsets};
use http::uri::PathAndQuery;
use kungfu_api::pb;
use prost_reflect::{DescriptorPool, MessageDescriptor, MethodDescriptor};
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value as Json, json};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

/// The package of the public API.
pub const PACKAGE: &str = "kungfu.v1";
/// Services of the package that are not agent calls: streams have their own tools (`turn_wait`,
/// `barrier_wait`), and the operator's service is not for agents.
pub const NOT_AGENT_SERVICES: &[&str] = &["kungfu.v1.WatchService", "kungfu.v1.AdminService"];
/// The name of the tool that waits for the turn (not an RPC).
pub const TURN_WAIT: &str = "turn_wait";
/// The name of the tool that waits for a barrier to release or break (not an RPC; issue #31).
pub const BARRIER_WAIT: &str = "barrier_wait";
/// The read whose answer `barrier_wait` gives, and whose output schema it shares.
const BARRIER_GET: &str = "barrier_get";
/// The field every write request carries (L3).
pub const IDEMPOTENCY_KEY: &str = "idempotency_key";
/// The one method callable without an agent key.
const REGISTER: &str = "kungfu.v1.AgentService.Register";

/// Where the rule reads badly, or (the coordination service) where its noun is not one a model
/// would guess: method full name to tool name.
pub const NAME_OVERRIDES: &[(&str, &str)] = &[
    ("kungfu.v1.ThreadService.Remove", "thread_remove_member"),
    ("kungfu.v1.CoordService.WriteLabeled", "memory_write_labeled"),
    ("kungfu.v1.CoordService.WidenScope", "memory_widen_scope"),
    ("kungfu.v1.CoordService.Send", "message_send"),
    ("kungfu.v1.CoordService.Scatter", "work_scatter"),
    // `GetEvents` and `GetBody` would read as the nouns alone (`events_get`, `body_get`).
    ("kungfu.v1.RecordService.GetEvents", "record_events_get"),
    ("kungfu.v1.RecordService.GetBody", "record_body_get"),
    // Wake targets (docs/wake.md): the noun is the target, not the agent.
    ("kungfu.v1.AgentService.SetWakeTarget", "wake_target_set"),
    ("kungfu.v1.AgentService.RemoveWakeTarget", "wake_target_remove"),
    ("kungfu.v1.AgentService.ListWakeTargets", "wake_targets_get"),
];

/// Writes that end something for good (a membership, a grant, a Memory's availability, an
/// obligation): `destructiveHint`. Other writes only add facts.
const DESTRUCTIVE: &[&str] = &[
    "kungfu.v1.AgentService.Deactivate",
    "kungfu.v1.AgentService.RemoveWakeTarget",
    "kungfu.v1.MemoryService.Unpublish",
    "kungfu.v1.MemoryService.Withdraw",
    "kungfu.v1.ThreadService.VoidGrant",
    "kungfu.v1.ThreadService.Leave",
    "kungfu.v1.ThreadService.Remove",
    "kungfu.v1.ThreadService.Retract",
    "kungfu.v1.ThreadService.Close",
    "kungfu.v1.AssignmentService.Drop",
    "kungfu.v1.AssignmentService.Void",
    "kungfu.v1.TaskService.DropEngagement",
];

/// The receipt case (`kungfu.v1.Receipt`'s oneof `result`) each write answers with: the action's
/// own, and the same on a replay, which returns the stored receipt of the same action kind (L3).
/// A write's output schema shows only this case. Every write has one entry and every case but
/// `expired` (the server's timer, never a request) is some write's (the registry's tests check).
pub const RECEIPTS: &[(&str, &str)] = &[
    ("kungfu.v1.AgentService.Register", "agent_registered"),
    ("kungfu.v1.AgentService.Deactivate", "agent_deactivated"),
    ("kungfu.v1.AgentService.SetWakeTarget", "wake_target_set"),
    ("kungfu.v1.AgentService.RemoveWakeTarget", "wake_target_removed"),
    ("kungfu.v1.AssignmentService.Take", "assignment_taken"),
    ("kungfu.v1.AssignmentService.Deliver", "assignment_delivered"),
    ("kungfu.v1.AssignmentService.Adopt", "assignment_adopted"),
    ("kungfu.v1.AssignmentService.Reject", "assignment_rejected"),
    ("kungfu.v1.AssignmentService.Drop", "assignment_dropped"),
    ("kungfu.v1.AssignmentService.Void", "assignment_voided"),
    ("kungfu.v1.MemoryService.Create", "memory_created"),
    ("kungfu.v1.MemoryService.Update", "memory_updated"),
    ("kungfu.v1.MemoryService.Publish", "memory_published"),
    ("kungfu.v1.MemoryService.Unpublish", "memory_unpublished"),
    ("kungfu.v1.MemoryService.Withdraw", "memory_withdrawn"),
    ("kungfu.v1.TaskService.Create", "task_created"),
    ("kungfu.v1.TaskService.Revise", "contract_revised"),
    ("kungfu.v1.TaskService.Pause", "task_paused"),
    ("kungfu.v1.TaskService.Resume", "task_resumed"),
    ("kungfu.v1.TaskService.Take", "engaged"),
    ("kungfu.v1.TaskService.Deliver", "engagement_delivered"),
    ("kungfu.v1.TaskService.DropEngagement", "engagement_dropped"),
    ("kungfu.v1.TaskService.AdoptEngagement", "engagement_adopted"),
    ("kungfu.v1.TaskService.RejectEngagement", "engagement_rejected"),
    ("kungfu.v1.ThreadService.Create", "thread_created"),
    ("kungfu.v1.ThreadService.IssueGrant", "grant_issued"),
    ("kungfu.v1.ThreadService.VoidGrant", "grant_voided"),
    ("kungfu.v1.ThreadService.Join", "joined"),
    ("kungfu.v1.ThreadService.Leave", "left"),
    ("kungfu.v1.ThreadService.Remove", "removed"),
    ("kungfu.v1.ThreadService.ChangeRole", "role_changed"),
    ("kungfu.v1.ThreadService.Post", "posted"),
    ("kungfu.v1.ThreadService.Handle", "handled"),
    ("kungfu.v1.ThreadService.Retract", "retracted"),
    ("kungfu.v1.ThreadService.Close", "thread_closed"),
    ("kungfu.v1.CoordService.WriteLabeled", "labeled_written"),
    ("kungfu.v1.CoordService.WidenScope", "scope_widened"),
    ("kungfu.v1.CoordService.Send", "sent"),
    ("kungfu.v1.CoordService.Scatter", "scattered"),
    ("kungfu.v1.RecordService.Create", "record_created"),
    ("kungfu.v1.RecordService.Patch", "record_patched"),
];

/// The receipt message whose oneof [`RECEIPTS`] narrows.
pub const RECEIPT: &str = "kungfu.v1.Receipt";

/// The next step of a tool where the generic one (by read or write) says too little. Every tool
/// named here exists (a test checks).
const NEXT_STEPS: &[(&str, &str)] = &[
    (
        "agent_register",
        "keep agent_key (shown once) and send it as `Authorization: Bearer <agent_key>` on every other call; then turn_get.",
    ),
    (
        "turn_get",
        "act on each item as its `next` says (respond: thread_post or thread_handle; deliver: assignment_deliver or task_deliver; judge: assignment_adopt or assignment_reject, task_adopt_engagement or task_reject_engagement); page on with next_cursor; turn_wait when nothing is owed.",
    ),
    (TURN_WAIT, "act on each owed item as its `next` says, or call turn_wait again."),
    (BARRIER_GET, "barrier_wait to wait until it is released or broken."),
    (
        BARRIER_WAIT,
        "on BARRIER_STATE_WAITING call barrier_wait again; on BARRIER_STATE_BROKEN the ranks say who did not arrive and how.",
    ),
    ("opportunities_get", "assignment_take or task_take on one you can do."),
    (
        "record_get",
        "record_patch with base_rev = this view's rev; record_events_get for what changed; record_body_get for a body.",
    ),
    (
        "record_patch",
        "on STALE_BASE read `conflict` (base, current, proposed), record_get, then patch the current rev or ask a person; appends with new ids never conflict.",
    ),
    ("working_set_get", "one of available_actions."),
    ("thread_create", "share the grant secret so others can thread_join; thread_post to start."),
    ("thread_timeline", "entry_get for an entry's content; page on with the cursor."),
    ("thread_post", "turn_wait for the responses and deliveries it asks for."),
    ("assignment_take", "do the work, then assignment_deliver before the delivery deadline."),
    ("assignment_deliver", "turn_wait for the creator's judgment."),
    ("task_take", "do the work, then task_deliver before the delivery deadline."),
    ("task_deliver", "turn_wait for the requester's judgment."),
    ("work_scatter", "collective_get to follow the ranks; turn_wait for their deliveries."),
    ("message_send", "turn_wait for replies; mailbox_get to read the thread."),
    ("mailbox_get", "page on with the cursor; message_send or thread_handle to answer."),
];

/// How a tool is served.
#[derive(Debug, Clone)]
pub enum ToolKind {
    /// One unary gRPC call.
    Rpc(Rpc),
    /// `turn_wait`: GetTurn, then a bounded wait on WatchTurn.
    TurnWait,
    /// `barrier_wait`: GetBarrier, then a bounded wait on WatchThread and re-reads.
    BarrierWait,
}

impl ToolKind {
    /// A long wait: a tool a host that declares the Tasks extension may get as a task.
    pub fn waits(&self) -> bool {
        matches!(self, ToolKind::TurnWait | ToolKind::BarrierWait)
    }
}

/// A unary method of the public API.
#[derive(Debug, Clone)]
pub struct Rpc {
    /// `/kungfu.v1.ThreadService/Post`.
    pub path: PathAndQuery,
    pub method: MethodDescriptor,
    /// The request has `idempotency_key`.
    pub write: bool,
}

/// One tool: how it is served, the set it is offered in, and what `tools/list` shows.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub kind: ToolKind,
    pub toolset: Toolset,
    pub tool: Tool,
}

impl ToolSpec {
    pub fn name(&self) -> &str {
        &self.tool.name
    }

    /// The tool only reads (`readOnlyHint`): the tools a read-only door (the console) may serve.
    pub fn read_only(&self) -> bool {
        self.tool.annotations.as_ref().and_then(|a| a.read_only_hint) == Some(true)
    }
}

/// Every tool, in a stable order (services and methods as declared, then `turn_wait` and
/// `barrier_wait`).
#[derive(Debug)]
pub struct Registry {
    pool: DescriptorPool,
    tools: Vec<ToolSpec>,
    index: HashMap<String, usize>,
}

static REGISTRY: LazyLock<Registry> = LazyLock::new(Registry::build);

/// The registry, built on first use.
pub fn registry() -> &'static Registry {
    &REGISTRY
}

impl Registry {
    pub fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }

    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.index.get(name).map(|&i| &self.tools[i])
    }

    /// The tools of the selected sets, in registry order.
    pub fn tools_in(&self, sets: Toolsets) -> impl Iterator<Item = &ToolSpec> {
        self.tools.iter().filter(move |t| sets.contains(t.toolset))
    }

    pub fn pool(&self) -> &DescriptorPool {
        &self.pool
    }

    /// A message of the package by its short name (`TurnPage`).
    pub fn message(&self, name: &str) -> MessageDescriptor {
        self.pool
            .get_message_by_name(&format!("{PACKAGE}.{name}"))
            .unwrap_or_else(|| panic!("kungfu.v1.{name} is in the descriptor set"))
    }

    fn build() -> Registry {
        // The descriptor set is compiled into the binary from the same protos as the generated
        // code: failing to decode it is a build defect, not an input error.
        let pool = DescriptorPool::decode(pb::FILE_DESCRIPTOR_SET).expect("kungfu.v1's descriptor set decodes");
        let mut tools = Vec::new();
        for service in pool.services().filter(|s| s.package_name() == PACKAGE) {
            if NOT_AGENT_SERVICES.contains(&service.full_name()) {
                continue;
            }
            for method in service.methods() {
                if method.is_client_streaming() || method.is_server_streaming() {
                    continue;
                }
                tools.push(rpc_tool(&method));
            }
        }
        tools.push(turn_wait_tool(&pool));
        let barrier_get = tools.iter().find(|t| t.name() == BARRIER_GET).expect("CoordService.GetBarrier is a tool");
        tools.push(barrier_wait_tool(&pool, barrier_get));
        let mut index = HashMap::new();
        for (i, t) in tools.iter().enumerate() {
            let previous = index.insert(t.name().to_string(), i);
            assert!(previous.is_none(), "two tools are named {}", t.name());
        }
        Registry { pool, tools, index }
    }
}

/// `TurnService` as `turn`, `ThreadService` as `thread`.
fn service_noun(service: &str) -> String {
    snake(service.strip_suffix("Service").unwrap_or(service))
}

/// `GetWorkingSet` as `get_working_set`.
pub fn snake(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The tool name of a method (see the module comment).
pub fn tool_name(method: &MethodDescriptor) -> String {
    if let Some((_, name)) = NAME_OVERRIDES.iter().find(|(full, _)| *full == method.full_name()) {
        return (*name).to_string();
    }
    let noun = service_noun(method.parent_service().name());
    match method.name().strip_prefix("Get") {
        Some("") => format!("{noun}_get"),
        Some(rest) if rest.starts_with(|c: char| c.is_ascii_uppercase()) => format!("{}_get", snake(rest)),
        _ => format!("{noun}_{}", snake(method.name())),
    }
}

fn is_write(method: &MethodDescriptor) -> bool {
    method.input().get_field_by_name(IDEMPOTENCY_KEY).is_some()
}

/// What every call but `agent_register` needs. The host sends the key (an `Authorization: Bearer`
/// header, or the stdio door's profile); the model only has to have registered once.
const NEEDS_KEY: &str = "an agent key (from agent_register)";
/// What `agent_register` needs.
const NEEDS_NOTHING: &str = "no agent key (a cluster with closed registration wants the operator token as the bearer)";
/// The description of a write's `idempotency_key` argument: said once per tool, here, and not in
/// the tool's description too.
const IDEMPOTENCY_KEY_INPUT: &str = "Optional (generated and returned when absent). Resend a call whose answer was lost with the same key: it acts once.";

fn rpc_tool(method: &MethodDescriptor) -> ToolSpec {
    let name = tool_name(method);
    let write = is_write(method);
    let output = method.output();
    let receipt_case = receipt_case(method);
    let only: Vec<String> = receipt_case.iter().map(|c| format!("{RECEIPT}.{c}")).collect();
    let mut input_schema = schema::message_schema(&method.input(), Direction::Input);
    let mut output_schema = schema::message_schema_only(&output, Direction::Output, &only);
    if write {
        assert!(receipt_case.is_some(), "{} writes, so RECEIPTS names its receipt case", method.full_name());
        set_property_description(&mut input_schema, IDEMPOTENCY_KEY, IDEMPOTENCY_KEY_INPUT);
        assert!(
            output.get_field_by_name(IDEMPOTENCY_KEY).is_none(),
            "{} has its own idempotency_key; the result cannot add one",
            output.full_name()
        );
        add_property(
            &mut output_schema,
            IDEMPOTENCY_KEY,
            json!({"type": "string", "description": "The idempotency key this call was made with: send it again to repeat the call safely."}),
        );
    }
    let what = schema::comment(&method.parent_file(), method.path())
        .unwrap_or_else(|| format!("Calls {}.", method.full_name()));
    let needs = if method.full_name() == REGISTER { NEEDS_NOTHING } else { NEEDS_KEY };
    let returns = returns_text(&output, receipt_case, write);
    let next = next_step(&name, write);
    let description = format!("{} Needs: {needs}. Returns: {returns}. Next: {next}", sentence(&what));
    let annotations = if write {
        ToolAnnotations::new()
            .read_only(false)
            .destructive(DESTRUCTIVE.contains(&method.full_name()))
            .idempotent(true)
            .open_world(false)
    } else {
        ToolAnnotations::new().read_only(true).destructive(false).idempotent(true).open_world(false)
    };
    let title = format!("{}.{}", method.parent_service().name(), method.name());
    let tool = Tool::new(name, description, Arc::new(input_schema))
        .with_raw_output_schema(Arc::new(output_schema))
        .with_title(title)
        .annotate(annotations);
    let path = format!("/{}/{}", method.parent_service().full_name(), method.name());
    let path = PathAndQuery::try_from(path).expect("a method path is a valid URI path");
    let toolset = Toolset::of_service(method.parent_service().full_name());
    ToolSpec { kind: ToolKind::Rpc(Rpc { path, method: method.clone(), write }), toolset, tool }
}

/// The receipt case a write's response carries ([`RECEIPTS`]); `None` for a read.
fn receipt_case(method: &MethodDescriptor) -> Option<&'static str> {
    RECEIPTS.iter().find(|(m, _)| *m == method.full_name()).map(|(_, case)| *case)
}

/// The limits of a long wait (`turn_wait`, `barrier_wait`): a blocking call a host holds open is
/// bounded well under the minutes hosts wait for a tool, and a task's wait under its time to live.
pub const WAIT_DEFAULT_SECS: u64 = 30;
pub const WAIT_MAX_SECS: u64 = 60;
/// The argument of a long wait that bounds it, in seconds.
pub const TIMEOUT_SECS: &str = "timeout_secs";

/// The `timeout_secs` property of a long wait's input schema.
fn timeout_property(what: &str) -> Json {
    json!({
        "type": "integer", "minimum": 1, "maximum": WAIT_MAX_SECS,
        "description": format!("How long to wait {what}, in seconds (default {WAIT_DEFAULT_SECS}).")
    })
}

fn turn_wait_tool(pool: &DescriptorPool) -> ToolSpec {
    let item = pool.get_message_by_name("kungfu.v1.TurnItem").expect("kungfu.v1.TurnItem is in the descriptor set");
    let item_schema = Json::Object(schema::message_schema(&item, Direction::Output));
    let input = json!({
        "type": "object",
        "properties": {
            TIMEOUT_SECS: timeout_property("when nothing is owed")
        },
        "additionalProperties": false
    });
    let output = json!({
        "type": "object",
        "properties": {
            "owed": {"type": "array", "items": item_schema, "description": "The caller's open obligations (the first page of its turn); empty when nothing is owed."},
            "next_cursor": {"type": "string", "description": "Set when the turn has more items: pass it to turn_get as cursor."},
            "as_of_seq": {"type": "integer", "description": "The sequence number of the last action the turn reflects."},
            "wait_secs": {"type": "integer", "description": "How long this call waited, in seconds."},
            "note": {"type": "string", "description": "What the answer means, in one line."}
        },
        "additionalProperties": false
    });
    let description = format!(
        "Answers at once with the caller's open obligations when something is owed; otherwise waits on the turn's watch feed until something is, up to timeout_secs (default {WAIT_DEFAULT_SECS}, at most {WAIT_MAX_SECS}), and answers \"nothing owed\" when the wait ends empty. Use it instead of calling turn_get in a loop. Needs: {NEEDS_KEY}. Returns: owed (TurnItem list), next_cursor, as_of_seq, wait_secs, note. Next: {}",
        next_step(TURN_WAIT, false)
    );
    let tool = Tool::new(TURN_WAIT, description, Arc::new(object(input)))
        .with_raw_output_schema(Arc::new(object(output)))
        .with_title("TurnService.GetTurn + WatchService.WatchTurn")
        .annotate(ToolAnnotations::new().read_only(true).destructive(false).idempotent(true).open_world(false));
    ToolSpec { kind: ToolKind::TurnWait, toolset: Toolset::Default, tool }
}

/// `barrier_wait`: `barrier_get`'s arguments and `timeout_secs`, and `barrier_get`'s very output
/// schema, so a host validates either answer alike (the Barrier as read).
fn barrier_wait_tool(pool: &DescriptorPool, barrier_get: &ToolSpec) -> ToolSpec {
    let ToolKind::Rpc(read) = &barrier_get.kind else { unreachable!("barrier_get is an RPC tool") };
    let request = pool.get_message_by_name("kungfu.v1.GetBarrierRequest").expect("GetBarrierRequest is in the set");
    assert_eq!(read.method.input().full_name(), request.full_name(), "barrier_wait takes barrier_get's request");
    assert!(request.get_field_by_name(TIMEOUT_SECS).is_none(), "GetBarrierRequest has no field of barrier_wait's own");
    let mut input = schema::message_schema(&request, Direction::Input);
    add_property(&mut input, TIMEOUT_SECS, timeout_property("while the barrier is waiting"));
    let output = barrier_get.tool.output_schema.clone().expect("barrier_get has an output schema");
    let description = format!(
        "Answers at once with the barrier when it is released or broken; otherwise waits until it is, up to timeout_secs (default {WAIT_DEFAULT_SECS}, at most {WAIT_MAX_SECS}), and answers it as it then stands (BARRIER_STATE_WAITING when the time ran out). A reply on the thread wakes the wait at once; a handle or a departure, which posts no entry, within a second. Use it instead of calling barrier_get in a loop. Needs: {NEEDS_KEY}. Returns: {}. Next: {}",
        returns_text(&read.method.output(), None, false),
        next_step(BARRIER_WAIT, false)
    );
    let tool = Tool::new(BARRIER_WAIT, description, Arc::new(input))
        .with_raw_output_schema(output)
        .with_title("CoordService.GetBarrier + WatchService.WatchThread")
        .annotate(ToolAnnotations::new().read_only(true).destructive(false).idempotent(true).open_world(false));
    ToolSpec { kind: ToolKind::BarrierWait, toolset: barrier_get.toolset, tool }
}

fn object(v: Json) -> JsonObject {
    match v {
        Json::Object(m) => m,
        _ => unreachable!("a literal object"),
    }
}

/// A read: `TurnPage (items, next_cursor, as_of_seq)`. A write: its receipt case and the
/// fields that case carries, `receipt.posted (thread, entry, …), replayed, idempotency_key`, the
/// ids a model goes on with.
fn returns_text(output: &MessageDescriptor, receipt_case: Option<&str>, write: bool) -> String {
    let receipt_field = output.get_field_by_name("receipt");
    let case_fields = receipt_case.and_then(|case| {
        let prost_reflect::Kind::Message(receipt) = receipt_field.as_ref()?.kind() else { return None };
        let prost_reflect::Kind::Message(facts) = receipt.get_field_by_name(case)?.kind() else { return None };
        Some((case, facts.fields().map(|f| f.name().to_string()).collect::<Vec<_>>()))
    });
    let mut fields: Vec<String> = Vec::new();
    for f in output.fields() {
        match (&case_fields, f.name()) {
            (Some((case, inner)), "receipt") => fields.push(format!("receipt.{case} ({})", inner.join(", "))),
            _ => fields.push(f.name().to_string()),
        }
    }
    if write {
        fields.push(IDEMPOTENCY_KEY.to_string());
    }
    if case_fields.is_some() { fields.join(", ") } else { format!("{} ({})", output.name(), fields.join(", ")) }
}

fn next_step(name: &str, write: bool) -> String {
    if let Some((_, next)) = NEXT_STEPS.iter().find(|(n, _)| *n == name) {
        return (*next).to_string();
    }
    if write {
        "turn_get to see what is owed now.".to_string()
    } else {
        "working_set_get on an id lists the actions available there.".to_string()
    }
}

/// A comment as a sentence: ends with a period.
fn sentence(text: &str) -> String {
    let t = text.trim();
    if t.ends_with('.') { t.to_string() } else { format!("{t}.") }
}

fn set_property_description(schema: &mut JsonObject, property: &str, description: &str) {
    if let Some(Json::Object(p)) = schema.get_mut("properties").and_then(|p| p.get_mut(property)) {
        p.insert("description".into(), json!(description));
    }
}

fn add_property(schema: &mut JsonObject, property: &str, value: Json) {
    if let Some(Json::Object(p)) = schema.get_mut("properties") {
        p.insert(property.to_string(), value);
    }
}
