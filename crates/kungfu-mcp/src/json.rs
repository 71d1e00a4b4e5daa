//! The JSON mapping of the MCP door: tool arguments to `kungfu.v1` request messages, and response
//! messages to structured results. It is proto3's JSON mapping with four choices made for models:
//!
//! - fields by their proto names (`delivery_window_micros`), the names every rejection's `field`
//!   path uses, so an error points at the very key the caller sent;
//! - `kungfu.v1.Content` is a plain JSON string of UTF-8 text, not `{"body": "<base64>"}`. On
//!   output, content that is not UTF-8 is `{"base64": "..."}`, which input accepts too;
//! - 64-bit integers are JSON numbers on output (input takes a number or a decimal string);
//! - output shows every scalar, enum and list field, defaults included, so a result always has the
//!   same keys; a message, oneof or `optional` field appears only when it is set.
//!
//! Input is checked for form only (JSON types, unknown keys, one case per oneof), with the same
//! [`FieldError`] the gRPC boundary uses; everything else (ids, required fields, limits) is left to
//! `kungfu-api` on the node, so both doors give the same answer. Errors name the field and the
//! expected type and never echo the value sent: it may be participant content (L6).

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use kungfu_api::FieldError;
use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, ReflectMessage, Value as Proto};
use serde_json::{Map, Value as Json};
use std::collections::HashMap;

/// The one message that carries participant content (L6).
pub const CONTENT: &str = "kungfu.v1.Content";
/// `google.protobuf.Empty`, used as a oneof case that carries no data: `{}` in JSON.
pub const EMPTY: &str = "google.protobuf.Empty";
/// The key of content that is not UTF-8 text.
pub const BASE64_KEY: &str = "base64";

/// A request message of type `desc` from a tool's arguments (absent arguments are an empty
/// request).
pub fn message_from_json(
    desc: &MessageDescriptor,
    args: Option<&Map<String, Json>>,
) -> Result<DynamicMessage, FieldError> {
    let empty = Map::new();
    object_to_message(desc, args.unwrap_or(&empty), "")
}

/// A response message as JSON (see the module comment for the mapping).
pub fn message_to_json(msg: &DynamicMessage) -> Json {
    let desc = msg.descriptor();
    if desc.full_name() == CONTENT {
        return content_to_json(msg);
    }
    let mut out = Map::new();
    for field in desc.fields() {
        if field.supports_presence() && !msg.has_field(&field) {
            continue;
        }
        out.insert(field.name().to_string(), value_to_json(&field.kind(), &msg.get_field(&field)));
    }
    Json::Object(out)
}

/// Content as text when it is UTF-8, else `{"base64": ...}`.
fn content_to_json(msg: &DynamicMessage) -> Json {
    let body = msg.get_field_by_name("body");
    let bytes = body.as_deref().and_then(Proto::as_bytes).map(|b| b.to_vec()).unwrap_or_default();
    match String::from_utf8(bytes) {
        Ok(text) => Json::String(text),
        Err(e) => {
            let mut m = Map::new();
            m.insert(BASE64_KEY.to_string(), Json::String(STANDARD.encode(e.into_bytes())));
            Json::Object(m)
        }
    }
}

fn value_to_json(kind: &Kind, v: &Proto) -> Json {
    match v {
        Proto::Bool(b) => Json::Bool(*b),
        Proto::I32(n) => Json::from(*n),
        Proto::I64(n) => Json::from(*n),
        Proto::U32(n) => Json::from(*n),
        Proto::U64(n) => Json::from(*n),
        Proto::F32(n) => float_to_json(f64::from(*n)),
        Proto::F64(n) => float_to_json(*n),
        Proto::String(s) => Json::String(s.clone()),
        Proto::Bytes(b) => Json::String(STANDARD.encode(b)),
        Proto::EnumNumber(n) => match kind {
            // A number this build does not know (a newer server) stays a number.
            Kind::Enum(e) => e.get_value(*n).map_or_else(|| Json::from(*n), |ev| Json::String(ev.name().to_string())),
            _ => Json::from(*n),
        },
        Proto::Message(m) => message_to_json(m),
        Proto::List(items) => Json::Array(items.iter().map(|i| value_to_json(kind, i)).collect()),
        Proto::Map(entries) => {
            let value_kind = match kind {
                Kind::Message(entry) => entry.map_entry_value_field().kind(),
                other => other.clone(),
            };
            let mut out = Map::new();
            for (k, v) in entries {
                out.insert(map_key_text(k), value_to_json(&value_kind, v));
            }
            Json::Object(out)
        }
    }
}

fn float_to_json(n: f64) -> Json {
    serde_json::Number::from_f64(n).map_or_else(|| Json::String(n.to_string()), Json::Number)
}

fn map_key_text(k: &MapKey) -> String {
    match k {
        MapKey::Bool(b) => b.to_string(),
        MapKey::I32(n) => n.to_string(),
        MapKey::I64(n) => n.to_string(),
        MapKey::U32(n) => n.to_string(),
        MapKey::U64(n) => n.to_string(),
        MapKey::String(s) => s.clone(),
    }
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() { name.to_string() } else { format!("{prefix}.{name}") }
}

fn object_to_message(
    desc: &MessageDescriptor,
    obj: &Map<String, Json>,
    prefix: &str,
) -> Result<DynamicMessage, FieldError> {
    let mut msg = DynamicMessage::new(desc.clone());
    // The case already set in each real oneof, to refuse a second one.
    let mut oneof_cases: HashMap<String, String> = HashMap::new();
    for (key, value) in obj {
        let path = join(prefix, key);
        let field = desc
            .get_field_by_name(key)
            .ok_or_else(|| FieldError::new(path.clone(), format!("is not a field of {}", desc.name())))?;
        if value.is_null() {
            // proto3 JSON: null is the field's default, i.e. absent.
            continue;
        }
        if let Some(oneof) = field.containing_oneof().filter(|o| !o.is_synthetic())
            && let Some(other) = oneof_cases.insert(oneof.name().to_string(), field.name().to_string())
        {
            return Err(FieldError::new(
                path,
                format!(
                    "cannot be set together with `{}`: set exactly one case of `{}`",
                    join(prefix, &other),
                    oneof.name()
                ),
            ));
        }
        let v = field_to_proto(&field, value, &path)?;
        msg.set_field(&field, v);
    }
    Ok(msg)
}

fn field_to_proto(field: &FieldDescriptor, value: &Json, path: &str) -> Result<Proto, FieldError> {
    let kind = field.kind();
    if field.is_map() {
        let Kind::Message(entry) = &kind else {
            return Err(FieldError::new(path, "has an unsupported map type"));
        };
        let obj = value.as_object().ok_or_else(|| FieldError::new(path, "must be an object"))?;
        let (key_field, value_field) = (entry.map_entry_key_field(), entry.map_entry_value_field());
        let mut out = HashMap::new();
        for (k, v) in obj {
            let item_path = format!("{path}[{k:?}]");
            let key = map_key(&key_field.kind(), k)
                .ok_or_else(|| FieldError::new(&item_path, "has a key of the wrong type"))?;
            out.insert(key, scalar_or_message(&value_field.kind(), v, &item_path)?);
        }
        return Ok(Proto::Map(out));
    }
    if field.is_list() {
        let items = value.as_array().ok_or_else(|| FieldError::new(path, "must be an array"))?;
        let converted = items
            .iter()
            .enumerate()
            .map(|(i, item)| scalar_or_message(&kind, item, &format!("{path}[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(Proto::List(converted));
    }
    scalar_or_message(&kind, value, path)
}

fn map_key(kind: &Kind, text: &str) -> Option<MapKey> {
    Some(match kind {
        Kind::String => MapKey::String(text.to_string()),
        Kind::Bool => MapKey::Bool(text.parse().ok()?),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => MapKey::I32(text.parse().ok()?),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => MapKey::I64(text.parse().ok()?),
        Kind::Uint32 | Kind::Fixed32 => MapKey::U32(text.parse().ok()?),
        Kind::Uint64 | Kind::Fixed64 => MapKey::U64(text.parse().ok()?),
        _ => return None,
    })
}

fn scalar_or_message(kind: &Kind, value: &Json, path: &str) -> Result<Proto, FieldError> {
    let wrong = |what: &str| FieldError::new(path, format!("must be {what}"));
    Ok(match kind {
        Kind::Bool => Proto::Bool(value.as_bool().ok_or_else(|| wrong("true or false"))?),
        Kind::String => Proto::String(value.as_str().ok_or_else(|| wrong("a string"))?.to_string()),
        Kind::Bytes => Proto::Bytes(
            decode_base64(value.as_str().ok_or_else(|| wrong("a base64 string"))?)
                .ok_or_else(|| wrong("valid base64"))?
                .into(),
        ),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
            Proto::I32(integer(value).and_then(|n| i32::try_from(n).ok()).ok_or_else(|| wrong("a 32-bit integer"))?)
        }
        Kind::Uint32 | Kind::Fixed32 => Proto::U32(
            integer(value).and_then(|n| u32::try_from(n).ok()).ok_or_else(|| wrong("an unsigned 32-bit integer"))?,
        ),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => {
            Proto::I64(integer(value).and_then(|n| i64::try_from(n).ok()).ok_or_else(|| wrong("a 64-bit integer"))?)
        }
        Kind::Uint64 | Kind::Fixed64 => Proto::U64(
            integer(value).and_then(|n| u64::try_from(n).ok()).ok_or_else(|| wrong("an unsigned 64-bit integer"))?,
        ),
        Kind::Float => Proto::F32(value.as_f64().ok_or_else(|| wrong("a number"))? as f32),
        Kind::Double => Proto::F64(value.as_f64().ok_or_else(|| wrong("a number"))?),
        Kind::Enum(e) => {
            let number = match value {
                Json::String(name) => e.get_value_by_name(name).map(|v| v.number()),
                Json::Number(_) => {
                    integer(value).and_then(|n| i32::try_from(n).ok()).filter(|n| e.get_value(*n).is_some())
                }
                _ => None,
            };
            let names: Vec<String> = e.values().map(|v| v.name().to_string()).collect();
            Proto::EnumNumber(number.ok_or_else(|| wrong(&format!("one of {}", names.join(", "))))?)
        }
        Kind::Message(m) if m.full_name() == CONTENT => Proto::Message(content_from_json(m, value, path)?),
        Kind::Message(m) => {
            let obj = value.as_object().ok_or_else(|| wrong("an object"))?;
            Proto::Message(object_to_message(m, obj, path)?)
        }
    })
}

/// Content from text (its UTF-8 bytes) or from `{"base64": ...}`.
fn content_from_json(desc: &MessageDescriptor, value: &Json, path: &str) -> Result<DynamicMessage, FieldError> {
    let bytes = match value {
        Json::String(text) => text.as_bytes().to_vec(),
        Json::Object(obj) if obj.len() == 1 => {
            let b64 = obj.get(BASE64_KEY).and_then(Json::as_str).ok_or_else(|| content_shape_error(path))?;
            decode_base64(b64).ok_or_else(|| FieldError::new(format!("{path}.{BASE64_KEY}"), "must be valid base64"))?
        }
        _ => return Err(content_shape_error(path)),
    };
    let mut msg = DynamicMessage::new(desc.clone());
    msg.set_field_by_name("body", Proto::Bytes(bytes.into()));
    Ok(msg)
}

fn content_shape_error(path: &str) -> FieldError {
    FieldError::new(path, format!("must be a string of text or {{\"{BASE64_KEY}\": \"...\"}}"))
}

fn decode_base64(s: &str) -> Option<Vec<u8>> {
    STANDARD.decode(s).or_else(|_| URL_SAFE.decode(s)).ok()
}

/// An integer from a JSON number without a fraction or from a decimal string (proto3 JSON allows
/// both; a string keeps 64-bit values exact for callers whose numbers are doubles).
fn integer(value: &Json) -> Option<i128> {
    match value {
        Json::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15).map(|f| f as i128)),
        Json::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}
