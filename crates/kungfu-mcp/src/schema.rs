//! JSON Schemas of tool inputs and outputs, generated from the descriptors with the mapping of
//! [`crate::json`], and the proto comments they are documented with. One generator for every
//! message, so a schema can never drift from the mapping it describes.
//!
//! Choices: no `required` (proto3 has none; what a request must carry is checked by `kungfu-api`
//! and refused naming the field), `additionalProperties: false` (unknown keys are refused), enums
//! as string enums of their proto names, a oneof documented as "exactly one of", and messages
//! inlined rather than `$ref`ed, because hosts and models handle flat schemas best.
//!
//! The input schemas are what a host puts in front of the model on every turn (issue #31), so
//! they say each thing once: a field's comment stands for its message's (which appears only where
//! no field comment does, once per schema), the participant-content note appears at the first
//! content field, a oneof is noted on its message and not on each case, integers are plain
//! `integer` (the door still takes a decimal string, proto3 JSON's form, and content
//! `{"base64": …}`, but a model need not be told at every field) and an input enum omits its
//! `_UNSPECIFIED` value, which is what leaving the field out means. Output schemas are structure
//! for a client to validate results with, sent once per session: they carry no prose but the
//! content note (the tool's description says what it returns).

use crate::json::{BASE64_KEY, CONTENT, EMPTY};
use prost_reflect::{FieldDescriptor, FileDescriptor, Kind, MessageDescriptor};
use serde_json::{Map, Value as Json, json};
use std::collections::HashSet;

/// Which side of a call a schema describes: they differ only where input is more lenient.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Tool arguments.
    Input,
    /// Structured results: every enum value, `_UNSPECIFIED` included, can be shown.
    Output,
}

/// The description of participant content, the same everywhere (L6).
pub const CONTENT_DESCRIPTION: &str =
    "Participant content (text); never interpreted. Content that is not UTF-8 text is {\"base64\": \"...\"}.";

/// The schema of message `desc` as a tool's input or output: always an object.
pub fn message_schema(desc: &MessageDescriptor, dir: Direction) -> Map<String, Json> {
    message_schema_only(desc, dir, &[])
}

/// [`message_schema`] where a real oneof that has a case named in `only` (full field names,
/// `kungfu.v1.Receipt.posted`) shows only the named cases: a write's result holds the receipt of
/// its own action, never any of the fifty others, so its schema says so (issue #31).
pub fn message_schema_only(desc: &MessageDescriptor, dir: Direction, only: &[String]) -> Map<String, Json> {
    let mut generator = Generator { dir, only, stack: Vec::new(), described: HashSet::new() };
    match generator.object_schema(desc, None) {
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

/// One schema being generated.
struct Generator<'a> {
    dir: Direction,
    only: &'a [String],
    /// The messages being expanded, outermost first, to stop at a message that contains itself.
    stack: Vec<String>,
    /// The messages (and [`CONTENT`]) whose own description this schema already carries: the
    /// next field of the same type gets only its field comment.
    described: HashSet<String>,
}

impl Generator<'_> {
    /// Whether this schema carries prose: an input schema is read by the model and documents every
    /// field; an output schema is structure for validation (the tool's description says what it
    /// returns), with the participant-content note alone kept (L6).
    fn documented(&self) -> bool {
        self.dir == Direction::Input
    }

    /// The schema of a message. `lead` is the comment of the field that holds it: it says what the
    /// message is for there, and replaces the message's own comment, which appears only where no
    /// field comment does, once per schema.
    fn object_schema(&mut self, desc: &MessageDescriptor, lead: Option<String>) -> Json {
        let name = desc.full_name().to_string();
        if self.stack.contains(&name) {
            // A message that contains itself: describe it without recursing forever.
            return json!({"type": "object", "description": format!("A {} (recursive: the same shape as its parent).", desc.name())});
        }
        self.stack.push(name.clone());
        let mut properties = Map::new();
        let fields: Vec<FieldDescriptor> = desc.fields().filter(|f| self.shown(f)).collect();
        for field in fields {
            let schema = self.field_schema(&field);
            properties.insert(field.name().to_string(), schema);
        }
        self.stack.pop();
        let mut schema = Map::new();
        schema.insert("type".into(), json!("object"));
        let mut description = String::new();
        if self.documented() {
            description = match lead {
                Some(lead) => lead,
                // Counted as said only where it is said: a field comment in its place leaves it
                // for the next field of the type.
                None if self.described.insert(name.clone()) => message_comment(desc).unwrap_or_default(),
                None => String::new(),
            };
            for oneof in desc.oneofs().filter(|o| !o.is_synthetic()) {
                let cases: Vec<String> =
                    oneof.fields().filter(|f| self.shown(f)).map(|f| format!("`{}`", f.name())).collect();
                if !description.is_empty() {
                    description.push(' ');
                }
                description.push_str(&format!("Exactly one of {}.", cases.join(", ")));
            }
        }
        if !description.is_empty() {
            schema.insert("description".into(), json!(description));
        }
        schema.insert("properties".into(), Json::Object(properties));
        schema.insert("additionalProperties".into(), json!(false));
        Json::Object(schema)
    }

    /// Whether a field is in the schema: every field but the cases a narrowed oneof leaves out.
    fn shown(&self, field: &FieldDescriptor) -> bool {
        let Some(oneof) = field.containing_oneof().filter(|o| !o.is_synthetic()) else { return true };
        let named = |f: &FieldDescriptor| self.only.iter().any(|o| o == f.full_name());
        !oneof.fields().any(|f| named(&f)) || named(field)
    }

    fn field_schema(&mut self, field: &FieldDescriptor) -> Json {
        let kind = field.kind();
        let comment = if self.documented() { field_comment(field) } else { None };
        if let Kind::Message(m) = &kind
            && !field.is_list()
            && !field.is_map()
            && m.full_name() != CONTENT
            && m.full_name() != EMPTY
        {
            return self.object_schema(m, comment);
        }
        let mut schema = if field.is_map() {
            let value_kind = match &kind {
                Kind::Message(entry) => entry.map_entry_value_field().kind(),
                other => other.clone(),
            };
            json!({"type": "object", "additionalProperties": self.kind_schema(&value_kind)})
        } else if field.is_list() {
            json!({"type": "array", "items": self.kind_schema(&kind)})
        } else {
            self.kind_schema(&kind)
        };
        let mut description = comment.unwrap_or_default();
        if let Kind::Message(m) = &kind
            && m.full_name() == CONTENT
            && self.described.insert(CONTENT.to_string())
        {
            // Whatever the field's own comment says, content is documented the one way (L6), once
            // per schema, in output schemas too.
            description = if description.is_empty() {
                CONTENT_DESCRIPTION.to_string()
            } else {
                format!("{description} {CONTENT_DESCRIPTION}")
            };
        }
        if !description.is_empty()
            && let Json::Object(m) = &mut schema
        {
            m.insert("description".into(), json!(description));
        }
        schema
    }

    fn kind_schema(&mut self, kind: &Kind) -> Json {
        match kind {
            Kind::Bool => json!({"type": "boolean"}),
            Kind::String => json!({"type": "string"}),
            Kind::Bytes => json!({"type": "string", "contentEncoding": "base64"}),
            // 64-bit integers are JSON numbers both ways (json.rs); the bounds of a signed integer
            // say nothing a model needs, an unsigned one's floor does.
            Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 | Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => {
                json!({"type": "integer"})
            }
            Kind::Uint32 | Kind::Fixed32 | Kind::Uint64 | Kind::Fixed64 => json!({"type": "integer", "minimum": 0}),
            Kind::Float | Kind::Double => json!({"type": "number"}),
            Kind::Enum(e) => {
                let names: Vec<String> = e
                    .values()
                    .filter(|v| self.dir == Direction::Output || v.number() != 0 || !v.name().ends_with("_UNSPECIFIED"))
                    .map(|v| v.name().to_string())
                    .collect();
                json!({"type": "string", "enum": names})
            }
            // A model writes text; the door also takes `{"base64": …}` for bytes that are not
            // UTF-8, as the content note says, but the schema need not spell that form out at
            // every content field of a request.
            Kind::Message(m) if m.full_name() == CONTENT && self.dir == Direction::Input => json!({"type": "string"}),
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
            Kind::Message(m) => self.object_schema(m, None),
        }
    }
}
