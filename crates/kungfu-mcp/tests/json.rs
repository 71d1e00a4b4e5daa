//! The JSON mapping of arguments and results, and the shape of a rejection result.

use kungfu_api::pb;
use kungfu_mcp::json::{message_from_json, message_to_json};
use kungfu_mcp::registry::registry;
use kungfu_mcp::result;
use kungfu_types::{Code, Micros, Rejection};
use prost::Message;
use prost_reflect::DynamicMessage;
use serde_json::{Map, Value as Json, json};

fn args(v: Json) -> Map<String, Json> {
    match v {
        Json::Object(m) => m,
        _ => panic!("arguments are an object"),
    }
}

/// Arguments as the request a node decodes.
fn request<T: Message + Default>(name: &str, v: Json) -> Result<T, kungfu_api::FieldError> {
    let msg = message_from_json(&registry().message(name), Some(&args(v)))?;
    Ok(T::decode(msg.encode_to_vec().as_slice()).expect("the node decodes what the door encodes"))
}

/// A response as the door shows it.
fn shown<T: Message>(name: &str, m: &T) -> Json {
    let dynamic = DynamicMessage::decode(registry().message(name), m.encode_to_vec().as_slice()).expect("decodes");
    message_to_json(&dynamic)
}

#[test]
fn content_is_text_on_input_and_output() {
    let r: pb::CreateMemoryRequest = request("CreateMemoryRequest", json!({"content": "héllo, world"})).expect("valid");
    assert_eq!(r.content.expect("content").body, "héllo, world".as_bytes());
    let back = shown(
        "CreateMemoryRequest",
        &pb::CreateMemoryRequest {
            idempotency_key: "k".into(),
            content: Some(pb::Content { body: b"plain text".to_vec() }),
        },
    );
    assert_eq!(back, json!({"idempotency_key": "k", "content": "plain text"}));
}

#[test]
fn content_that_is_not_utf8_is_base64_both_ways() {
    let bytes = vec![0xff, 0x00, 0x80];
    let back = shown(
        "CreateMemoryRequest",
        &pb::CreateMemoryRequest { idempotency_key: String::new(), content: Some(pb::Content { body: bytes.clone() }) },
    );
    assert_eq!(back["content"], json!({"base64": "/wCA"}));
    let r: pb::CreateMemoryRequest =
        request("CreateMemoryRequest", json!({"content": back["content"]})).expect("valid");
    assert_eq!(r.content.expect("content").body, bytes);
}

#[test]
fn enums_travel_by_name() {
    let r: pb::ChangeRoleRequest =
        request("ChangeRoleRequest", json!({"thread": "th_1", "member": "ag_2", "role": "ROLE_GOVERNOR"}))
            .expect("valid");
    assert_eq!(r.role(), pb::Role::Governor);
    let back = shown("ChangeRoleRequest", &r);
    assert_eq!(back["role"], json!("ROLE_GOVERNOR"));
    let e = request::<pb::ChangeRoleRequest>("ChangeRoleRequest", json!({"role": "governor"})).expect_err("not a name");
    assert_eq!(e.field, "role");
    assert!(e.message.contains("ROLE_GOVERNOR"), "{}", e.message);
}

#[test]
fn sixty_four_bit_integers_are_numbers_on_output_and_numbers_or_strings_on_input() {
    let at = (1_i64 << 62) + 7;
    let back = shown(
        "Receipt",
        &pb::Receipt { kind: "post".into(), at_unix_micros: at, seq: Some(u64::MAX), ..Default::default() },
    );
    assert_eq!(back["at_unix_micros"], json!(at));
    assert_eq!(back["seq"], json!(u64::MAX));
    assert!(back["at_unix_micros"].is_number());
    let r: pb::HandleRequest =
        request("HandleRequest", json!({"entry": "18446744073709551615"})).expect("a decimal string");
    assert_eq!(r.entry, u64::MAX);
    let r: pb::HandleRequest = request("HandleRequest", json!({"entry": 42})).expect("a number");
    assert_eq!(r.entry, 42);
    let e = request::<pb::HandleRequest>("HandleRequest", json!({"entry": -1})).expect_err("unsigned");
    assert_eq!(e.field, "entry");
    let e = request::<pb::HandleRequest>("HandleRequest", json!({"entry": 1.5})).expect_err("an integer");
    assert_eq!(e.field, "entry");
}

#[test]
fn output_shows_scalars_with_defaults_and_messages_only_when_set() {
    let back = shown("PostResponse", &pb::PostResponse { receipt: None, replayed: false });
    assert_eq!(back, json!({"replayed": false}));
    let back = shown("TurnPage", &pb::TurnPage::default());
    assert_eq!(back, json!({"items": [], "next_cursor": "", "as_of_seq": 0, "wake_failed": []}));
}

#[test]
fn oneofs_take_one_case_and_empty_cases_are_objects() {
    let r: pb::PostRequest =
        request("PostRequest", json!({"thread": "th_1", "body": {"pin": {"memory": "mem_1", "version": 2}}}))
            .expect("valid");
    assert!(matches!(r.body.and_then(|b| b.kind), Some(pb::post_body::Kind::Pin(p)) if p.version == 2));
    let e = request::<pb::PostRequest>("PostRequest", json!({"body": {"pin": {"memory": "mem_1"}, "content": "x"}}))
        .expect_err("two cases");
    assert!(e.field.starts_with("body."), "{}", e.field);
    let open = pb::Assignment { state: Some(pb::assignment::State::Open(())), ..Default::default() };
    let back = shown("Assignment", &open);
    assert_eq!(back["open"], json!({}));
    assert!(back.get("taken").is_none(), "only the case that is set");
}

#[test]
fn a_malformed_argument_names_its_field_and_never_echoes_the_value() {
    let secret = "do-not-echo-this-participant-text";
    let e =
        request::<pb::PostRequest>("PostRequest", json!({"thread": 7, "body": {"content": secret}})).expect_err("type");
    assert_eq!(e.field, "thread");
    let e = request::<pb::PostRequest>("PostRequest", json!({"thread": "th_1", "body": {"contnt": secret}}))
        .expect_err("unknown field");
    assert_eq!(e.field, "body.contnt");
    assert!(!e.message.contains(secret));
    let e = request::<pb::PostRequest>("PostRequest", json!({"ask": {"agents": ["ag_1", 2]}})).expect_err("list item");
    assert_eq!(e.field, "ask.agents[1]");
    // The rejection is the one the gRPC boundary gives for a malformed field.
    let r = e.to_rejection();
    assert_eq!((r.code, r.field.as_deref(), r.definite), (Code::InvalidArgument, Some("ask.agents[1]"), true));
}

#[test]
fn a_rejection_status_becomes_an_error_result_with_every_field() {
    let r = Rejection::field(Code::RateLimited, "thread", "too many writes").with_retry_after(Micros(1500));
    let status = kungfu_api::rejection_status(&r);
    let back = result::refusal(&status);
    let res = result::rejection(&back, Some("sdk-key"));
    assert_eq!(res.is_error, Some(true));
    let s = res.structured_content.clone().expect("structured");
    assert_eq!(s["code"], json!("RATE_LIMITED"));
    assert_eq!(s["message"], json!("thread: too many writes"));
    assert_eq!(s["field"], json!("thread"));
    assert_eq!(s["next_step"], json!(back.next.as_str()));
    assert_eq!(s["definite"], json!(true));
    assert_eq!(s["retry_after_micros"], json!(1500));
    assert_eq!(s["fak_reason"], json!("RATE_LIMITED"));
    assert_eq!(s["idempotency_key"], json!("sdk-key"));
    let text = res.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone()).expect("text");
    assert_eq!(serde_json::from_str::<Json>(&text).expect("json text"), s, "the text block is the same JSON");
}

#[test]
fn a_call_the_node_did_not_answer_is_unavailable_and_indefinite() {
    let back = result::refusal(&tonic::Status::unavailable("tcp connect error: refused"));
    assert_eq!((back.code, back.definite), (Code::Unavailable, false));
    let s = result::rejection_json(&back, Some("sdk-key"));
    assert_eq!(s["idempotency_key"], json!("sdk-key"));
    assert!(s["message"].as_str().unwrap_or("").contains("same idempotency_key"));
}
