//! JSON Schemas of tool inputs and outputs, generated from the descriptors with the mapping of
//! [`crate::json`], and the proto comments they are documented with. One generator for every
//! message, so a schema can never drift from the mapping it describes.
//!
//! Choices: no `required` (proto3 has none; what a request must carry is checked by `kungfu-api`
//! and refused naming the field), `additionalProperties: false` (unknown keys are refused), enums
//! as string enums of their proto names, a oneof documented as "exactly one of", and messages
//! inlined rather than `$ref`ed, because hosts and models handle flat schemas best.

use crate::json::{BASE64_KEY, CONTENT, EMPTY};
use prost_reflect::{FieldDescriptor, FileDescriptor, Kind, MessageDescriptor};
use serde_json::{Map, Value as Json, json};

/// Which side of a call a schema describes: they differ only where input is more lenient.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Tool arguments: 64-bit integers as a number or a decimal string.
    Input,
    /// Structured results: 64-bit integers as numbers.
    Output,
}

/// The description of participant content, the same everywhere (L6).
pub const CONTENT_DESCRIPTION: &str =
    "Participant content (text); never interpreted. Content that is not UTF-8 text is {\"base64\": \"...\"}.";

/// The schema of message `desc` as a tool's input or output: always an object.
pub fn message_schema(desc: &MessageDescriptor, dir: Direction) -> Map<String, Json> {
    match object_schema(desc, dir, &mut Vec::new()) {
        Json::Object(m) => m,
        _ => unreachable!("object_schema always returns an object"),
    }
}

/// The leading comment at `path` of a file, on one line: the documentation of a service, method,
/// message or field (protox keeps source info in the descriptor set).
pub fn comment(file: &FileDescriptor, path: &[i32]) -> Option<String> {
    let info = file.file_descriptor_proto().source_code_info.as_ref()?;
    let location = info.location.iter().find(|l| l.path == path)?;
    let text = location.leading_comments.as_deref()?;
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (!one_line.is_empty()).then_some(one_line)
}

fn message_comment(desc: &MessageDescriptor) -> Option<String> {
    comment(&desc.parent_file(), desc.path())
}

fn field_comment(field: &FieldDescriptor) -> Option<String> {
    comment(&field.parent_file(), field.path())
}

fn object_schema(desc: &MessageDescriptor, dir: Direction, stack: &mut Vec<String>) -> Json {
    let name = desc.full_name().to_string();
    if stack.contains(&name) {
        // A message that contains itself: describe it without recursing forever.
        return json!({"type": "object", "description": format!("A {} (recursive: the same shape as its parent).", desc.name())});
    }
    stack.push(name);
    let mut properties = Map::new();
    for field in desc.fields() {
        properties.insert(field.name().to_string(), field_schema(&field, dir, stack));
    }
    stack.pop();
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    let mut description = message_comment(desc).unwrap_or_default();
    for oneof in desc.oneofs().filter(|o| !o.is_synthetic()) {
        let cases: Vec<String> = oneof.fields().map(|f| format!("`{}`", f.name())).collect();
        if !description.is_empty() {
            description.push(' ');
        }
        description.push_str(&format!("Set exactly one of {} (oneof `{}`).", cases.join(", "), oneof.name()));
    }
    if !description.is_empty() {
        schema.insert("description".into(), json!(description));
    }
    schema.insert("properties".into(), Json::Object(properties));
    schema.insert("additionalProperties".into(), json!(false));
    Json::Object(schema)
}

fn field_schema(field: &FieldDescriptor, dir: Direction, stack: &mut Vec<String>) -> Json {
    let kind = field.kind();
    let mut schema = if field.is_map() {
        let value_kind = match &kind {
            Kind::Message(entry) => entry.map_entry_value_field().kind(),
            other => other.clone(),
        };
        json!({"type": "object", "additionalProperties": kind_schema(&value_kind, dir, stack)})
    } else if field.is_list() {
        json!({"type": "array", "items": kind_schema(&kind, dir, stack)})
    } else {
        kind_schema(&kind, dir, stack)
    };
    let mut description = field_comment(field).unwrap_or_default();
    if let Some(oneof) = field.containing_oneof().filter(|o| !o.is_synthetic()) {
        let note = format!("One case of oneof `{}`: set at most one of its fields.", oneof.name());
        description = if description.is_empty() { note } else { format!("{description} {note}") };
    }
    if let Kind::Message(m) = &kind
        && m.full_name() == CONTENT
    {
        // Whatever the field's own comment says, content is documented the one way (L6).
        description = if description.is_empty() {
            CONTENT_DESCRIPTION.to_string()
        } else {
            format!("{description} {CONTENT_DESCRIPTION}")
        };
    }
    if !description.is_empty()
        && let Json::Object(m) = &mut schema
    {
        // A message field keeps its message's own description (and oneof note) after the field's.
        let own = m.get("description").and_then(Json::as_str).map(str::to_string);
        let full = match own {
            Some(own) => format!("{description} {own}"),
            None => description,
        };
        m.insert("description".into(), json!(full));
    }
    schema
}

fn kind_schema(kind: &Kind, dir: Direction, stack: &mut Vec<String>) -> Json {
    let wide = |min: Option<i64>| {
        let mut s = match dir {
            Direction::Input => json!({"type": ["integer", "string"], "pattern": "^-?[0-9]+$"}),
            Direction::Output => json!({"type": "integer"}),
        };
        if let (Some(min), Json::Object(m)) = (min, &mut s) {
            m.insert("minimum".into(), json!(min));
        }
        s
    };
    match kind {
        Kind::Bool => json!({"type": "boolean"}),
        Kind::String => json!({"type": "string"}),
        Kind::Bytes => json!({"type": "string", "contentEncoding": "base64"}),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
            json!({"type": "integer", "minimum": i32::MIN, "maximum": i32::MAX})
        }
        Kind::Uint32 | Kind::Fixed32 => json!({"type": "integer", "minimum": 0, "maximum": u32::MAX}),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => wide(None),
        Kind::Uint64 | Kind::Fixed64 => wide(Some(0)),
        Kind::Float | Kind::Double => json!({"type": "number"}),
        Kind::Enum(e) => {
            let names: Vec<String> = e.values().map(|v| v.name().to_string()).collect();
            json!({"type": "string", "enum": names})
        }
        Kind::Message(m) if m.full_name() == CONTENT => json!({
            "anyOf": [
                {"type": "string"},
                {"type": "object", "properties": {BASE64_KEY: {"type": "string", "contentEncoding": "base64"}},
                 "required": [BASE64_KEY], "additionalProperties": false}
            ]
        }),
        Kind::Message(m) if m.full_name() == EMPTY => {
            json!({"type": "object", "properties": {}, "additionalProperties": false})
        }
        Kind::Message(m) => object_schema(m, dir, stack),
    }
}
