//! Wire contracts as a client meets them, against a real `kungfud`:
//!
//! - Every refusal that names a field names a field of the request it refuses, by its wire path
//!   (`google.rpc.ErrorInfo` metadata `field`, the `BadRequest` violation, and the message's
//!   `<field>: ` prefix). The walk is built from the API's descriptor set, not written per RPC:
//!   every unary and server-streaming method of `kungfu.v1` but the operator's, each with a request
//!   filled from a fresh fixture (ids that exist, a fresh idempotency key) and then that request
//!   with one field at a time made wrong (missing, malformed, out of range, an unknown enum value,
//!   another case of its oneof), down to three levels of nested messages. A field path that is an
//!   internal name (`at_rev` for `rev`) fails it.
//! - `RecordService.Get` and `GetBody` name `rev` when it is out of range (0, past the newest, the
//!   largest `uint32`, which is what `-1` becomes on the wire), and `note_id` for an unknown note.
//! - Every paged read keeps its documented cursor: the page that reaches the end says so
//!   (`Mailbox.next_after` and `TimelineResponse.next_after` absent, `TurnPage.next_cursor` empty),
//!   with `ASKED_ME` mailbox pages too, so a traversal costs no extra call; a record's event page
//!   names the last rev it listed, or the cursor it was given.

use kungfu_api::pb;
use kungfu_system_tests::*;
use prost_reflect::{DescriptorPool, DynamicMessage, FieldDescriptor, Kind, MessageDescriptor, ReflectMessage, Value};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tonic::codegen::http::uri::PathAndQuery;

/// Edge rates high enough that the walk's few thousand calls are never refused RATE_LIMITED, which
/// would hide the field a call is refused for.
const RATES: &str = "[rate_limits]\nwrites_per_second_per_agent = 100000\nwrite_burst = 100000\n\
reads_per_second_per_agent = 100000\nread_burst = 100000\nregistrations_per_minute_per_ip = 100000\n";

/// How long a watch is given to refuse its request before it counts as accepted (an accepted
/// watch waits for events and never ends on its own).
const WATCH_ANSWER: Duration = Duration::from_millis(300);

/// How deep the walk makes nested message fields wrong (`to.agents.agents`, `contract.inputs[0].version`).
const MAX_DEPTH: usize = 3;

static KEYS: AtomicU64 = AtomicU64::new(0);

fn fresh_key() -> String {
    format!("wire-{}", KEYS.fetch_add(1, Ordering::Relaxed))
}

const FLEET: kungfu_client::Labels =
    kungfu_client::Labels { taint: kungfu_client::Taint::Tainted, scope: kungfu_client::Scope::Fleet };

/// A one-node cluster with high edge rates, its anonymous client and a first agent.
async fn serving() -> (Cluster, Client, Client) {
    let cluster = Cluster::start(1, RATES);
    let anon = Client { channel: connect(cluster.nodes[&1].api).await, key: None };
    let (_, lead) = register_when_serving(&anon, &fresh_key(), || cluster.logs()).await;
    (cluster, anon, lead)
}

async fn register(anon: &Client) -> (String, Client) {
    let r = anon
        .agents()
        .register(anon.req(pb::RegisterRequest { idempotency_key: fresh_key() }))
        .await
        .expect("register")
        .into_inner();
    let Some(pb::receipt::Result::AgentRegistered(a)) = r.receipt.and_then(|r| r.result) else { panic!("no agent") };
    (a.agent, Client { channel: anon.channel.clone(), key: Some(r.agent_key) })
}

fn coord(c: &Client) -> pb::coord_service_client::CoordServiceClient<tonic::transport::Channel> {
    pb::coord_service_client::CoordServiceClient::new(c.channel.clone())
}

fn records(c: &Client) -> pb::record_service_client::RecordServiceClient<tonic::transport::Channel> {
    pb::record_service_client::RecordServiceClient::new(c.channel.clone())
}

/// A thread governed by `lead` that `worker` joined as a speaker.
async fn thread_with(lead: &Client, worker: &Client) -> String {
    lead.thread_with_speaker(worker, fresh_key(), fresh_key()).await
}

/// `from` sends a fleet-labeled message to `thread`, asking `ask` when given; its entry.
async fn send(from: &Client, thread: &str, ask: Option<&str>) -> u64 {
    let to =
        ask.map(|a| pb::SendTo { kind: Some(pb::send_to::Kind::Agents(pb::Agents { agents: vec![a.to_string()] })) });
    let r = coord(from)
        .send(from.req(pb::SendRequest {
            idempotency_key: fresh_key(),
            thread: thread.to_string(),
            body: Some(kungfu_client::labeled_text("m", FLEET)),
            to,
            reply_to: None,
            reply_to_latest: false,
        }))
        .await
        .expect("send")
        .into_inner();
    match r.receipt.and_then(|r| r.result) {
        Some(pb::receipt::Result::Sent(s)) => s.entry,
        other => panic!("unexpected {other:?}"),
    }
}

/// A fleet-scoped record in `thread` at rev 1; its id.
async fn record(by: &Client, thread: &str) -> String {
    let body = pb::RecordBodyInput {
        kind: Some(pb::record_body_input::Kind::Content(pb::LabeledContent {
            content: content("draft"),
            labels: Some(pb::Labels { taint: pb::Taint::Tainted as i32, scope: pb::Scope::Fleet as i32 }),
        })),
    };
    let r = records(by)
        .create(by.req(pb::CreateRecordRequest {
            idempotency_key: fresh_key(),
            thread: thread.to_string(),
            title: content("Plan"),
            state: content("open"),
            body: Some(body),
            scope: pb::Scope::Fleet as i32,
            editors: pb::RecordEditors::Speakers as i32,
            message: Some(kungfu_client::labeled_text("a plan", FLEET)),
            ask: None,
        }))
        .await
        .expect("create record")
        .into_inner();
    match r.receipt.and_then(|r| r.result) {
        Some(pb::receipt::Result::RecordCreated(c)) => c.record,
        other => panic!("unexpected {other:?}"),
    }
}

/// A private Memory of `by`; its id.
async fn memory(by: &Client) -> String {
    let r = by
        .memories()
        .create(by.req(pb::CreateMemoryRequest { idempotency_key: fresh_key(), content: content("notes") }))
        .await
        .expect("create memory")
        .into_inner();
    match r.receipt.and_then(|r| r.result) {
        Some(pb::receipt::Result::MemoryCreated(m)) => m.memory,
        other => panic!("unexpected {other:?}"),
    }
}

/// The refusal a status carries: its field, when it names one, and its message.
fn refused_field(s: &tonic::Status) -> Option<(String, String)> {
    let r = kungfu_api::status_rejection(s)?;
    Some((r.field?, r.message))
}

// --- RecordService.Get / GetBody name `rev` ------------------------------------------------------

#[tokio::test]
async fn record_reads_name_the_wire_field_rev_when_it_is_out_of_range() {
    let (_cluster, anon, lead) = serving().await;
    let (_, worker) = register(&anon).await;
    let thread = thread_with(&lead, &worker).await;
    let id = record(&lead, &thread).await;
    // `-1` reaches the server as the largest uint32 (a client's or JSON's wrap-around).
    for rev in [0, 2, u32::MAX] {
        let get = pb::GetRecordRequest { record: id.clone(), rev: Some(rev), audience: 0 };
        let s = records(&lead).get(lead.req(get)).await.expect_err("an out-of-range rev is refused");
        assert_eq!(s.code(), tonic::Code::InvalidArgument, "rev {rev}: {s:?}");
        assert_eq!(
            refused_field(&s),
            Some(("rev".into(), "rev: must name a rev of the record, 1 to 1".into())),
            "Get rev {rev}"
        );
        let body = pb::GetRecordBodyRequest {
            record: id.clone(),
            item: Some(pb::get_record_body_request::Item::Body(())),
            rev: Some(rev),
        };
        let s = records(&lead).get_body(lead.req(body)).await.expect_err("an out-of-range rev is refused");
        assert_eq!(
            refused_field(&s),
            Some(("rev".into(), "rev: must name a rev of the record, 1 to 1".into())),
            "GetBody rev {rev}"
        );
    }
    // The rev the record has is read; absent is the current one.
    for rev in [Some(1), None] {
        let get = pb::GetRecordRequest { record: id.clone(), rev, audience: 0 };
        assert_eq!(records(&lead).get(lead.req(get)).await.expect("rev 1").into_inner().rev, 1);
    }
    // An unknown note is named by the field that named it, not by its oneof.
    let note = pb::GetRecordBodyRequest {
        record: id.clone(),
        item: Some(pb::get_record_body_request::Item::NoteId("n9".into())),
        rev: None,
    };
    let s = records(&lead).get_body(lead.req(note)).await.expect_err("no such note");
    assert_eq!(s.code(), tonic::Code::NotFound);
    assert_eq!(refused_field(&s).map(|(f, _)| f).as_deref(), Some("note_id"));
}

// --- Every refusal's field against its request's descriptor --------------------------------------

/// The objects one method's walk fills its requests with: they exist, so a request gets past the
/// lookups to the checks behind them.
struct Fixture {
    lead: Client,
    worker: String,
    thread: String,
    entry: u64,
    record: String,
    memory: String,
}

impl Fixture {
    async fn new(anon: &Client, lead: &Client) -> Fixture {
        let (worker_id, worker) = register(anon).await;
        let thread = thread_with(lead, &worker).await;
        let entry = send(lead, &thread, Some(&worker_id)).await;
        send(&worker, &thread, None).await;
        let record = record(lead, &thread).await;
        let memory = memory(lead).await;
        Fixture { lead: lead.clone(), worker: worker_id, thread, entry, record, memory }
    }

    /// The value a string field named `name` is filled with; None leaves it empty.
    fn string(&self, name: &str) -> Option<String> {
        Some(match name {
            "idempotency_key" => fresh_key(),
            "thread" | "object" => self.thread.clone(),
            "record" => self.record.clone(),
            "memory" => self.memory.clone(),
            "agent" | "member" | "responder" | "addressee" | "judge" => self.worker.clone(),
            "note_id" | "artifact_id" | "decision_id" => "n1".into(),
            _ => return None,
        })
    }

    /// The value a numeric field named `name` is filled with; None leaves it 0.
    fn number(&self, name: &str) -> Option<u64> {
        Some(match name {
            "entry" | "header" | "reply_to" => self.entry,
            "version" | "base_rev" | "rev" => 1,
            _ => return None,
        })
    }
}

/// A valid-looking value of every field of `desc` the fixture can fill, the first case of each
/// oneof, nested messages filled down to [`MAX_DEPTH`].
fn filled(desc: &MessageDescriptor, fx: &Fixture, depth: usize) -> DynamicMessage {
    let mut m = DynamicMessage::new(desc.clone());
    for f in desc.fields() {
        if f.is_list() || f.is_map() {
            continue;
        }
        if let Some(o) = f.containing_oneof().filter(|o| !o.is_synthetic()) {
            if o.fields().next().map(|first| first.number()) != Some(f.number()) {
                continue;
            }
        }
        if let Some(v) = filled_value(&f, fx, depth) {
            m.set_field(&f, v);
        }
    }
    m
}

fn filled_value(f: &FieldDescriptor, fx: &Fixture, depth: usize) -> Option<Value> {
    match f.kind() {
        Kind::String => fx.string(f.name()).map(Value::String),
        Kind::Uint64 => fx.number(f.name()).map(Value::U64),
        Kind::Uint32 => fx.number(f.name()).map(|n| Value::U32(n as u32)),
        Kind::Message(m) if m.full_name() == "kungfu.v1.Content" => {
            let mut c = DynamicMessage::new(m.clone());
            c.set_field_by_name("body", Value::Bytes(prost::bytes::Bytes::from_static(b"x")));
            Some(Value::Message(c))
        }
        Kind::Message(m) if depth < MAX_DEPTH => Some(Value::Message(filled(&m, fx, depth + 1))),
        Kind::Enum(e) => {
            // Labels that pass the floor of a thread entry; otherwise the first specified value.
            let preferred = ["SCOPE_FLEET", "TAINT_TAINTED", "ROLE_SPEAKER"];
            let v = e.values().find(|v| preferred.contains(&v.name())).or_else(|| e.values().find(|v| v.number() != 0));
            v.map(|v| Value::EnumNumber(v.number()))
        }
        _ => None,
    }
}

/// The wrong values a field is given, one request each: the field missing, empty, malformed, out
/// of range, unknown, another oneof case, and, for a message, each of its own fields made wrong.
fn variants(base: &DynamicMessage, fx: &Fixture, depth: usize, out: &mut Vec<DynamicMessage>) {
    for f in base.descriptor().fields() {
        let with = |v: Option<Value>| {
            let mut m = base.clone();
            match v {
                Some(v) => m.set_field(&f, v),
                None => m.clear_field(&f),
            }
            m
        };
        if f.is_map() {
            continue;
        }
        if f.is_list() {
            let lists: Vec<Vec<Value>> = match f.kind() {
                Kind::String => vec![
                    vec![Value::String("x".into())],
                    vec![Value::String(fx.worker.clone()), Value::String(fx.worker.clone())],
                    vec![Value::String(fx.worker.clone()), Value::String("x".into())],
                ],
                Kind::Enum(_) => vec![vec![Value::EnumNumber(99)]],
                Kind::Uint32 => vec![vec![Value::U32(0), Value::U32(u32::MAX)]],
                Kind::Uint64 => vec![vec![Value::U64(0), Value::U64(u64::MAX)]],
                Kind::Message(m) => {
                    let good = filled(&m, fx, depth + 1);
                    let mut lists = vec![vec![Value::Message(DynamicMessage::new(m.clone()))]];
                    lists.push(vec![Value::Message(good.clone()), Value::Message(good.clone())]);
                    if depth < MAX_DEPTH {
                        let mut inner = Vec::new();
                        variants(&good, fx, depth + 1, &mut inner);
                        lists.extend(inner.into_iter().map(|v| vec![Value::Message(good.clone()), Value::Message(v)]));
                    }
                    lists
                }
                _ => vec![],
            };
            out.extend(lists.into_iter().map(|l| with(Some(Value::List(l)))));
            out.push(with(None));
            continue;
        }
        let scalars: Vec<Value> = match f.kind() {
            Kind::String => vec![Value::String(String::new()), Value::String("x".into()), Value::String("ag_0".into())],
            Kind::Uint32 => vec![Value::U32(0), Value::U32(2), Value::U32(u32::MAX)],
            Kind::Uint64 => vec![Value::U64(0), Value::U64(99), Value::U64(u64::MAX)],
            Kind::Int64 => vec![Value::I64(-1), Value::I64(0), Value::I64(i64::MAX)],
            Kind::Int32 => vec![Value::I32(-1), Value::I32(0), Value::I32(i32::MAX)],
            Kind::Bool => vec![Value::Bool(true), Value::Bool(false)],
            Kind::Bytes => vec![Value::Bytes(prost::bytes::Bytes::new())],
            Kind::Enum(e) => {
                let mut v: Vec<Value> = e.values().map(|v| Value::EnumNumber(v.number())).collect();
                v.push(Value::EnumNumber(99));
                v
            }
            Kind::Message(m) => {
                let mut v = vec![Value::Message(DynamicMessage::new(m.clone()))];
                if depth < MAX_DEPTH {
                    let sub = match base.get_field(&f).as_message() {
                        Some(s) if base.has_field(&f) => s.clone(),
                        _ => filled(&m, fx, depth + 1),
                    };
                    v.push(Value::Message(sub.clone()));
                    let mut inner = Vec::new();
                    variants(&sub, fx, depth + 1, &mut inner);
                    v.extend(inner.into_iter().map(Value::Message));
                }
                v
            }
            _ => vec![],
        };
        out.extend(scalars.into_iter().map(|v| with(Some(v))));
        if f.supports_presence() {
            out.push(with(None));
        }
    }
}

/// Whether `path` (`ask.agents[2]`, `contract.inputs[1].version`, `item`) names a field of `desc`:
/// each segment a field of the message before it (the last may name a oneof, for a choice that
/// was not made), an index only on a repeated field, and only a message field followed by more.
fn names_a_field(desc: &MessageDescriptor, path: &str) -> bool {
    let segments: Vec<&str> = path.split('.').collect();
    let mut at = desc.clone();
    for (i, segment) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        let (name, indexed) = match segment.split_once('[') {
            Some((name, rest)) => {
                let ok = rest.strip_suffix(']').is_some_and(|n| n.parse::<usize>().is_ok());
                if !ok {
                    return false;
                }
                (name, true)
            }
            None => (*segment, false),
        };
        let Some(f) = at.get_field_by_name(name) else {
            return last && !indexed && at.oneofs().any(|o| !o.is_synthetic() && o.name() == name);
        };
        if indexed && !f.is_list() {
            return false;
        }
        if last {
            return true;
        }
        match f.kind() {
            Kind::Message(m) if indexed || !f.is_list() => at = m,
            _ => return false,
        }
    }
    true
}

#[test]
fn field_paths_resolve_as_the_walk_expects() {
    let pool = DescriptorPool::decode(pb::FILE_DESCRIPTOR_SET).expect("descriptors");
    let msg = |n: &str| pool.get_message_by_name(n).expect(n);
    let post = msg("kungfu.v1.PostRequest");
    assert!(names_a_field(&post, "ask.agents[2]"));
    assert!(names_a_field(&post, "assignment.delivery_window_micros"));
    assert!(!names_a_field(&post, "ask[2]"), "an index on a message that is not repeated");
    assert!(!names_a_field(&post, "assignment.delivery_window"), "a core name, not the wire's");
    let get = msg("kungfu.v1.GetRecordRequest");
    assert!(names_a_field(&get, "rev"));
    assert!(!names_a_field(&get, "at_rev"));
    let body = msg("kungfu.v1.GetRecordBodyRequest");
    assert!(names_a_field(&body, "item"), "a oneof left unset is named by its name");
    assert!(!names_a_field(&body, "item.note_id"));
}

// --- Every field the sources can name, against the requests' descriptors ---------------------

/// The calls of the core, the API boundary and the server that name a request field by their
/// first string argument (after the code, for the two rejection constructors): a refusal's field
/// is written at one of these. A new field-naming helper belongs here.
const FIELD_NAMING: &[&str] = &[
    "reject_field",
    "Rejection::field",
    "FieldError::new",
    "FieldError::missing",
    "field_status",
    "id",
    "opt_id",
    "item_id",
    "agent_set",
    "content",
    "entry_seq",
    "version",
    "pin",
    "referable_pin",
    "role",
    "grant_role",
    "timestamp",
    "object_ref",
    "window",
    "labeled_body",
    "body_input",
    "artifact_input",
    "external_ref",
    "labels",
    "scope",
    "taint",
    "trust",
    "note_kind",
    "patch_op",
    "editors",
    "audience_scope",
];

/// Field names the sources write that name no field of any request, each with why it stays.
const NOT_REQUEST_FIELDS: &[(&str, &str)] = &[
    // decide/agent.rs: the agent key a registration carries is generated by the server, so a
    // collision (refused INVALID_ARGUMENT `key`) cannot be caused, or fixed, by a client.
    ("key", "a server-generated secret, not a field a client sends"),
    // console.rs: `POST /ui/api/tools/{tool}` refuses a body that is not a JSON object of the
    // tool's arguments, as MCP's `tools/call` names them; no gRPC request is involved.
    ("arguments", "the console's own HTTP body, not a gRPC request"),
];

/// The Rust files under `dir`, recursively.
fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = e.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// Every field path written as the first string argument of a [`FIELD_NAMING`] call in `text`, a
/// `format!` template as written (`ask[{i}]`, `{f}.store`). A field held in a variable is not seen
/// here: it is written as a literal at the call that passes it in.
fn field_literals(text: &str) -> Vec<String> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = Vec::new();
    for name in FIELD_NAMING {
        let call = format!("{name}(");
        let mut from = 0;
        while let Some(at) = text[from..].find(&call) {
            let start = from + at;
            from = start + call.len();
            // A whole name, not the tail of another (`to_id(`) or a method (`.content(`).
            if text[..start].chars().next_back().is_some_and(|c| is_ident(c) || c == '.' || c == ':') {
                continue;
            }
            let mut rest = text[from..].trim_start();
            if *name == "reject_field" || *name == "Rejection::field" {
                // The code comes first.
                let Some((_, after)) = rest.split_once(',') else { continue };
                rest = after.trim_start();
            }
            rest = rest.strip_prefix('&').unwrap_or(rest);
            if let Some(r) = rest.strip_prefix("format!(") {
                rest = r.trim_start();
            }
            let Some(lit) = rest.strip_prefix('"') else { continue };
            let Some(end) = lit.find('"') else { continue };
            let path = &lit[..end];
            let fieldlike = path.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_.[]{}".contains(c));
            if !path.is_empty() && fieldlike {
                out.push(path.to_string());
            }
        }
    }
    out
}

#[test]
fn every_field_the_sources_name_is_a_field_of_a_request() {
    let pool = DescriptorPool::decode(pb::FILE_DESCRIPTOR_SET).expect("descriptors");
    let requests: Vec<MessageDescriptor> = pool
        .services()
        .filter(|s| s.package_name() == "kungfu.v1")
        .flat_map(|s| s.methods().map(|m| m.input()).collect::<Vec<_>>())
        .collect();
    let messages: Vec<MessageDescriptor> = pool.all_messages().filter(|m| m.package_name() == "kungfu.v1").collect();
    let root =
        std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in ["crates/kungfu-core/src", "crates/kungfu-api/src", "crates/kungfu-server/src"] {
        rust_files(&root.join(dir), &mut files);
    }
    let mut found = BTreeSet::new();
    let mut wrong = BTreeSet::new();
    for file in files.iter().filter(|f| !f.ends_with("testkit.rs")) {
        let text = std::fs::read_to_string(file).expect("a source file");
        // A file's unit tests name fields to test them; only what the code itself names counts.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for path in field_literals(code) {
            found.insert(path.clone());
            let ok = match path.strip_prefix('{') {
                // `{f}.store`: a field under a path held in a variable; the rest must be a field
                // path of some message.
                Some(rest) => match rest.split_once("}.") {
                    Some((_, tail)) if !tail.contains('{') => messages.iter().any(|m| names_a_field(m, tail)),
                    _ => true,
                },
                None => {
                    let concrete = path.replace("{i}", "0").replace("{op}", "0").replace("{}", "0");
                    if concrete.contains('{') {
                        true
                    } else {
                        let wire = kungfu_api::status::wire_field_path(&concrete);
                        requests.iter().any(|m| names_a_field(m, &wire))
                    }
                }
            };
            if !ok {
                wrong.insert(format!("{path} ({})", file.display()));
            }
        }
    }
    let known: BTreeSet<&str> = NOT_REQUEST_FIELDS.iter().map(|(f, _)| *f).collect();
    let unexplained: Vec<&String> =
        wrong.iter().filter(|w| !known.contains(w.split(' ').next().unwrap_or_default())).collect();
    println!("{} field paths named in the sources:\n{found:?}", found.len());
    assert!(unexplained.is_empty(), "fields named that no request has: {unexplained:#?}");
    assert!(found.contains("rev") && !found.contains("at_rev"), "{found:?}");
    assert!(found.len() >= 80, "the scan found only {} field paths: {found:?}", found.len());
    for (field, _) in NOT_REQUEST_FIELDS {
        assert!(wrong.iter().any(|w| w.starts_with(&format!("{field} "))), "{field} is a request field now: drop it");
    }
}

/// One call of `path` with `request` encoded from its descriptor, as `caller`; the refusal's
/// status, or None when the call was answered (or, for a stream, still open after [`WATCH_ANSWER`]).
async fn call(caller: &Client, path: &str, streaming: bool, request: DynamicMessage) -> Option<tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(caller.channel.clone());
    grpc.ready().await.expect("the node serves");
    let path: PathAndQuery = path.parse().expect("a method path");
    let codec = tonic_prost::ProstCodec::<DynamicMessage, ()>::default();
    if !streaming {
        return grpc.unary(caller.req(request), path, codec).await.err();
    }
    let mut stream = match grpc.server_streaming(caller.req(request), path, codec).await {
        Ok(s) => s.into_inner(),
        Err(s) => return Some(s),
    };
    match tokio::time::timeout(WATCH_ANSWER, stream.message()).await {
        Ok(Err(s)) => Some(s),
        _ => None,
    }
}

#[tokio::test]
async fn every_refusal_names_a_field_of_its_request() {
    let (cluster, anon, lead) = serving().await;
    let pool = DescriptorPool::decode(pb::FILE_DESCRIPTOR_SET).expect("descriptors");
    let mut checked: BTreeSet<(String, String)> = BTreeSet::new();
    let mut wrong: Vec<String> = Vec::new();
    let mut calls = 0usize;
    for service in pool.services().filter(|s| s.package_name() == "kungfu.v1") {
        // The operator's calls change the cluster itself (membership, leadership, backups written
        // to a path) and are held to their fields by tests/admin.rs.
        if service.name() == "AdminService" {
            continue;
        }
        for method in service.methods() {
            if method.is_client_streaming() {
                continue;
            }
            // A fresh fixture per method, so one method's accepted call (a close, a leave) cannot
            // leave the next without objects to be refused about.
            let fx = Fixture::new(&anon, &lead).await;
            let path = format!("/{}/{}", service.full_name(), method.name());
            let input = method.input();
            let base = filled(&input, &fx, 0);
            let mut requests = vec![DynamicMessage::new(input.clone()), base.clone()];
            variants(&base, &fx, 0, &mut requests);
            for request in requests {
                calls += 1;
                let Some(status) = call(&fx.lead, &path, method.is_server_streaming(), request).await else {
                    continue;
                };
                let Some((field, message)) = refused_field(&status) else { continue };
                if !names_a_field(&input, &field) {
                    wrong.push(format!("{path}: field `{field}` is not a field of {}: {message}", input.full_name()));
                } else if !message.starts_with(&format!("{field}: ")) {
                    wrong.push(format!("{path}: field `{field}` but the message names another: {message}"));
                }
                checked.insert((path.clone(), field));
            }
        }
    }
    let seen: Vec<String> = checked.iter().map(|(p, f)| format!("{p} {f}")).collect();
    println!("{calls} calls; {} (method, field) refusals checked:\n{}", checked.len(), seen.join("\n"));
    assert!(wrong.is_empty(), "refusals naming what is not a field of the request:\n{}", wrong.join("\n"));
    // The walk reaches the boundary's checks and the core's behind them, on every service.
    for (path, field) in [
        ("/kungfu.v1.RecordService/Get", "rev"),
        ("/kungfu.v1.RecordService/GetBody", "rev"),
        ("/kungfu.v1.ThreadService/Post", "thread"),
        ("/kungfu.v1.CoordService/GetMailbox", "thread"),
        ("/kungfu.v1.TurnService/GetTurn", "cursor"),
        ("/kungfu.v1.WatchService/WatchThread", "thread"),
    ] {
        assert!(checked.contains(&(path.to_string(), field.to_string())), "{path} was never refused about {field}");
    }
    assert!(checked.len() >= 100, "only {} refusals with a field were met:\n{}", checked.len(), cluster.logs());
}

// --- Paged reads end on the page that reaches the end --------------------------------------------

async fn mailbox(
    c: &Client,
    thread: &str,
    after: u64,
    filter: pb::MailboxFilter,
    page_size: u32,
) -> (Vec<u64>, Option<u64>) {
    let page = coord(c)
        .get_mailbox(c.req(pb::GetMailboxRequest { thread: thread.into(), after, filter: filter as i32, page_size }))
        .await
        .expect("mailbox")
        .into_inner();
    (page.items.iter().map(|i| i.entry.as_ref().map_or(0, |e| e.seq)).collect(), page.next_after)
}

async fn timeline(c: &Client, thread: &str, after: u64, page_size: u32) -> (Vec<u64>, Option<u64>) {
    let page = c
        .threads()
        .timeline(c.req(pb::TimelineRequest { thread: thread.into(), after, page_size }))
        .await
        .expect("timeline")
        .into_inner();
    (page.entries.iter().map(|e| e.seq).collect(), page.next_after)
}

#[tokio::test]
async fn a_page_that_reaches_the_newest_entry_names_no_cursor() {
    use pb::MailboxFilter::{All, AskedMe};
    let (_cluster, anon, lead) = serving().await;
    let (worker_id, worker) = register(&anon).await;
    let thread = thread_with(&lead, &worker).await;
    // Ten entries; the third and the seventh ask the worker.
    let mut seqs = Vec::new();
    for i in 1..=10 {
        seqs.push(send(&lead, &thread, [3, 7].contains(&i).then_some(worker_id.as_str())).await);
    }
    assert_eq!(seqs, (1..=10).collect::<Vec<u64>>(), "the thread's entries are numbered from 1");
    let range = |a: u64, b: u64| (a..=b).collect::<Vec<u64>>();

    // coord.proto, Mailbox.next_after: present when more entries may follow, absent once the
    // thread's newest entry was examined.
    assert_eq!(mailbox(&worker, &thread, 5, All, 5).await, (range(6, 10), None), "the issue's case");
    assert_eq!(mailbox(&worker, &thread, 0, All, 5).await, (range(1, 5), Some(5)));
    assert_eq!(mailbox(&worker, &thread, 0, All, 10).await, (range(1, 10), None));
    assert_eq!(mailbox(&worker, &thread, 0, All, 0).await, (range(1, 10), None), "the default page");
    assert_eq!(mailbox(&worker, &thread, 10, All, 5).await, (vec![], None), "caught up");
    // ASKED_ME: a full page stops at its item; a window that ends short of the newest entry moves
    // the cursor past what it examined; the window that examines the newest entry names none.
    assert_eq!(mailbox(&worker, &thread, 0, AskedMe, 5).await, (vec![3, 7], None));
    assert_eq!(mailbox(&worker, &thread, 0, AskedMe, 1).await, (vec![3], Some(3)));
    assert_eq!(mailbox(&worker, &thread, 3, AskedMe, 1).await, (vec![7], Some(7)));
    assert_eq!(mailbox(&worker, &thread, 7, AskedMe, 1).await, (vec![], None));
    // The lead is asked nothing: one page examines at most 8 × page_size entries.
    assert_eq!(mailbox(&lead, &thread, 0, AskedMe, 1).await, (vec![], Some(8)));
    assert_eq!(mailbox(&lead, &thread, 8, AskedMe, 1).await, (vec![], None));

    // threads.proto, TimelineResponse.next_after: absent on the last page.
    assert_eq!(timeline(&worker, &thread, 5, 5).await, (range(6, 10), None));
    assert_eq!(timeline(&worker, &thread, 0, 5).await, (range(1, 5), Some(5)));
    assert_eq!(timeline(&worker, &thread, 0, 10).await, (range(1, 10), None));
    assert_eq!(timeline(&worker, &thread, 0, 4).await, (range(1, 4), Some(4)));
    assert_eq!(timeline(&worker, &thread, 8, 4).await, (range(9, 10), None));

    // turn.proto, TurnPage.next_cursor: empty when the traversal is complete. The worker owes two
    // responses.
    let turn = |cursor: String, page_size: u32| {
        let worker = worker.clone();
        async move {
            let p = worker.turn().get_turn(worker.req(pb::GetTurnRequest { cursor, page_size })).await.expect("turn");
            let p = p.into_inner();
            (p.items.len(), p.next_cursor)
        }
    };
    assert_eq!(turn(String::new(), 2).await, (2, String::new()), "a full page that ends the turn");
    let (n, cursor) = turn(String::new(), 1).await;
    assert_eq!(n, 1);
    assert!(!cursor.is_empty(), "a page short of the end names where to continue");
    assert_eq!(turn(cursor, 1).await, (1, String::new()));

    // records.proto, RecordEventPage.next_after_rev: the last rev listed, or the request's
    // `after_rev` when none was (a record at rev 1: its creation).
    let id = record(&lead, &thread).await;
    let events = |after_rev: u32| {
        let lead = lead.clone();
        let id = id.clone();
        async move {
            let req = pb::GetRecordEventsRequest { record: id, after_rev, audience: 0, page_size: 0 };
            let p = records(&lead).get_events(lead.req(req)).await.expect("events").into_inner();
            (p.events.iter().map(|e| e.rev).collect::<Vec<u32>>(), p.next_after_rev)
        }
    };
    assert_eq!(events(0).await, (vec![1], 1));
    assert_eq!(events(1).await, (vec![], 1));
}
