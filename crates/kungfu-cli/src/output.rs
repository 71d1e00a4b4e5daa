//! Output: JSON for scripts and aligned tables for people.
//!
//! The JSON of a response mirrors its protobuf message: field names are the proto field names, a
//! `oneof` is an object with the one case that is set (`{"posted": {...}}`), an absent optional
//! field is `null`, and an enum value is its Rust variant name (`Speaker`). The generated messages
//! derive `serde::Serialize` to that shape (`kungfu-api`'s `build.rs` and `json.rs`). Participant
//! content never appears there (it serializes as its size only, `{"bytes": N}`); the commands that
//! show content add it explicitly as text.
//!
//! Tables for people give each kind of field one rendering, whichever command prints it: a time as
//! RFC 3339 in UTC ([`instant`]), a pinned Memory version as `mem_5@2` ([`pin`], the form `--pin`
//! takes), a grant as `<fingerprint> <role>` ([`grant`]), and any other nested message as readable
//! text ([`cell`]), never as JSON.

use serde_json::Value;

/// A message as JSON, following the rules of the module comment.
pub fn to_json<T: serde::Serialize>(message: &T) -> Value {
    // Serializing generated messages into a `Value` cannot fail: they hold no maps with non-string
    // keys and no floats that JSON cannot carry.
    serde_json::to_value(message).unwrap_or_else(|e| Value::String(format!("(not representable as JSON: {e})")))
}

/// Text from bytes written by a participant, lossily when they are not UTF-8.
pub fn text(body: &[u8]) -> String {
    String::from_utf8_lossy(body).into_owned()
}

/// Text of optional content.
pub fn content_text(c: &Option<kungfu_client::pb::Content>) -> Value {
    match c {
        Some(c) => Value::String(text(&c.body)),
        None => Value::Null,
    }
}

/// Participant content as one line of text that is safe to print on a terminal (L6: content is
/// untrusted). Control characters (C0, DEL, C1), the Unicode bidirectional and zero-width format
/// characters, and the line and paragraph separators are shown as escapes (`\n`, `\u{202e}`);
/// bytes that are not UTF-8 as `\xNN`; a backslash as `\\`, so every escape is unambiguous. At
/// most `max_chars` characters of the content are shown, then `…`.
pub fn escaped(body: &[u8], max_chars: usize) -> String {
    let mut out = String::new();
    let mut shown = 0;
    for chunk in body.utf8_chunks() {
        for c in chunk.valid().chars() {
            if shown == max_chars {
                out.push('…');
                return out;
            }
            shown += 1;
            match c {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if unsafe_on_a_terminal(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            if shown == max_chars {
                out.push('…');
                return out;
            }
            shown += 1;
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// Characters that can move the cursor, rewrite a line, reorder what is shown or hide text.
fn unsafe_on_a_terminal(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{061c}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

/// Prints a table: a header row and aligned columns, or `(none)` when there are no rows.
pub fn table(header: &[&str], rows: &[Vec<String>]) {
    if rows.is_empty() {
        println!("(none)");
        return;
    }
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let parts: Vec<String> = cells.iter().enumerate().map(|(i, c)| format!("{c:<w$}", w = widths[i])).collect();
        println!("{}", parts.join("  ").trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

/// Prints key-value pairs, one per line, aligned.
pub fn pairs(rows: &[(&str, String)]) {
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in rows {
        println!("{k:<width$}  {v}");
    }
}

/// Prints a JSON value on stdout.
pub fn print_json(v: &Value) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string()));
}

/// An instant in microseconds since the Unix epoch (how the protocol stores every time) as RFC 3339
/// in UTC to the millisecond: `2026-12-02T17:57:03.123Z`. An instant chrono cannot represent (more
/// than 262,000 years away) is shown as its number.
pub fn instant(micros: i64) -> String {
    match chrono::DateTime::from_timestamp_micros(micros) {
        Some(t) => t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        None => format!("{micros}µs since the epoch"),
    }
}

/// A pinned Memory version, `mem_5@2`: the form `--pin` takes.
pub fn pin(memory: &str, version: u64) -> String {
    format!("{memory}@{version}")
}

/// A thread's grant: its fingerprint (the secret itself is shown once, at issue) and the role it
/// binds, `3f9a…c2 speaker`.
pub fn grant(fingerprint: &str, role: &str) -> String {
    format!("{fingerprint} {}", enum_word("role", role).unwrap_or_else(|| role.to_string()))
}

/// A role as people type it on the command line: `speaker`.
pub fn role(r: i32) -> String {
    kungfu_client::pb::Role::try_from(r)
        .map(|s| s.as_str_name().trim_start_matches("ROLE_").to_ascii_lowercase())
        .unwrap_or_else(|_| r.to_string())
}

/// Whether a field of a message holds a time: the protocol names every one `…_unix_micros`.
fn is_time(field: &str) -> bool {
    field.ends_with("_unix_micros")
}

/// A role, scope or taint as people type it (`speaker`, `fleet`): the JSON names an enum value
/// by its Rust variant (`Speaker`). None for any other field or value.
fn enum_word(field: &str, s: &str) -> Option<String> {
    use kungfu_client::pb;
    let upper = s.to_ascii_uppercase();
    let known = match field {
        "role" | "from" | "to" => pb::Role::from_str_name(&format!("ROLE_{upper}")).is_some(),
        "scope" => pb::Scope::from_str_name(&format!("SCOPE_{upper}")).is_some(),
        "taint" => pb::Taint::from_str_name(&format!("TAINT_{upper}")).is_some(),
        _ => false,
    };
    known.then(|| s.to_ascii_lowercase())
}

/// The field `field` of a message's JSON ([`to_json`]) as one table cell, by the kind of field:
/// `-` for an absent value, a time as [`instant`], a list of names as `ag_1,ag_2`, a pin as [`pin`],
/// a grant as [`grant`], a member as `ag_1 speaker`, labels as `tainted/fleet`, a `oneof` case
/// without data as its name, and any other nested message as `field=value` pairs. Never JSON.
pub fn cell(field: &str, v: &Value) -> String {
    match v {
        Value::Null => "-".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) if is_time(field) => n.as_i64().map(instant).unwrap_or_else(|| n.to_string()),
        Value::Number(n) => n.to_string(),
        Value::String(s) => enum_word(field, s).unwrap_or_else(|| s.clone()),
        Value::Array(items) if items.is_empty() => "-".to_string(),
        Value::Array(items) => {
            // Names and numbers read as the command line takes them (`--ask ag_1,ag_2`); nested
            // messages, whose text has spaces, are set apart more plainly.
            let nested = items.iter().any(|i| matches!(i, Value::Object(_) | Value::Array(_)));
            let parts: Vec<String> = items.iter().map(|i| cell(field, i)).collect();
            parts.join(if nested { "; " } else { "," })
        }
        Value::Object(m) => {
            let text = |k: &str| m.get(k).and_then(Value::as_str);
            let number = |k: &str| m.get(k).and_then(Value::as_u64);
            let keys: Vec<&str> = m.keys().map(String::as_str).collect();
            let is = |shape: &[&str]| keys.len() == shape.len() && shape.iter().all(|k| m.contains_key(*k));
            match (text("memory"), number("version"), text("fingerprint"), text("role"), text("agent")) {
                (Some(memory), Some(version), ..) if is(&["memory", "version"]) => pin(memory, version),
                (_, _, Some(fp), Some(role), _) if is(&["fingerprint", "role"]) => grant(fp, role),
                (_, _, _, Some(role), Some(agent)) if is(&["agent", "role"]) => {
                    format!("{agent} {}", enum_word("role", role).unwrap_or_else(|| role.to_string()))
                }
                _ if is(&["taint", "scope"]) => {
                    let name = |k: &str| m.get(k).map(|x| cell(k, x)).unwrap_or_default();
                    format!("{}/{}", name("taint"), name("scope"))
                }
                // A `oneof` with its one case set: the case's name, then its data if it has any.
                _ if m.len() == 1 => {
                    let (case, value) = m.iter().next().map(|(k, v)| (k.as_str(), v)).unwrap_or(("", &Value::Null));
                    match value {
                        Value::Null => case.to_string(),
                        value => format!("{case} {}", cell(case, value)),
                    }
                }
                _ => m.iter().map(|(k, x)| format!("{k}={}", cell(k, x))).collect::<Vec<_>>().join(" "),
            }
        }
    }
}

/// A cluster membership as rows: each voter and learner as `1 (api 127.0.0.1:7411, raft
/// 127.0.0.1:7511)`, the voter sets of its configuration (two while a change is joint), the log
/// index it was written at and whether it is committed.
pub fn membership_rows(m: &kungfu_client::pb::ClusterMembership) -> Vec<(String, String)> {
    let nodes = |nodes: &[kungfu_client::pb::ClusterNode]| {
        if nodes.is_empty() {
            return "-".to_string();
        }
        let shown: Vec<String> =
            nodes.iter().map(|n| format!("{} (api {}, raft {})", n.node_id, n.api_addr, n.raft_addr)).collect();
        shown.join("; ")
    };
    let sets: Vec<String> =
        m.configs.iter().map(|c| c.node_ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",")).collect();
    vec![
        ("voters".to_string(), nodes(&m.voters)),
        ("learners".to_string(), nodes(&m.learners)),
        ("voter sets".to_string(), if sets.is_empty() { "-".to_string() } else { sets.join(" and ") }),
        ("log index".to_string(), m.log_index.map(|i| i.to_string()).unwrap_or_else(|| "-".into())),
        ("committed".to_string(), m.committed.to_string()),
    ]
}

/// The rows a written receipt shows: one per field of its result's one case, each a [`cell`]. A
/// case that is a pin itself (`memory_created`) is one row, `pin  mem_5@1`.
pub fn result_rows(receipt: &Value) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    if let Some(Value::Object(cases)) = receipt.get("result") {
        for (name, case) in cases {
            match case {
                Value::Object(fields)
                    if fields.len() == 2 && fields.contains_key("memory") && fields.contains_key("version") =>
                {
                    rows.push(("pin".to_string(), cell("pin", case)));
                }
                Value::Object(fields) => rows.extend(fields.iter().map(|(k, v)| (k.clone(), cell(k, v)))),
                other => rows.push((name.clone(), cell(name, other))),
            }
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use kungfu_client::pb;
    use serde_json::json;

    #[test]
    fn a_receipt_becomes_json_with_its_oneof_case() {
        let r = pb::Receipt {
            kind: "post".into(),
            at_unix_micros: -5,
            seq: Some(7),
            result: Some(pb::receipt::Result::Posted(pb::Posted {
                thread: "th_\"1\"\n\u{1b}é\\{".into(),
                entry: 2,
                pin: Some(pb::MemoryPin { memory: "mem_1".into(), version: 1 }),
                responders: vec!["ag_2".into()],
                ended_own_response: false,
                assignment: None,
            })),
        };
        let v = to_json(&r);
        assert_eq!(v["seq"], 7);
        assert_eq!(v["at_unix_micros"], -5);
        assert_eq!(v["result"]["posted"]["thread"], "th_\"1\"\n\u{1b}é\\{");
        assert_eq!(v["result"]["posted"]["responders"][0], "ag_2");
        assert_eq!(v["result"]["posted"]["assignment"], Value::Null);
    }

    #[test]
    fn content_enums_and_empty_messages_are_understood() {
        let a = pb::Assignment {
            id: "asg_1".into(),
            criteria: Some(pb::Content { body: b"secret".to_vec() }),
            state: Some(pb::assignment::State::Open(())),
            ..Default::default()
        };
        let v = to_json(&a);
        assert_eq!(v["criteria"]["bytes"], 6);
        assert!(v["state"].as_object().is_some_and(|m| m.contains_key("open")), "{v}");
        let m = pb::Member { agent: "ag_1".into(), role: pb::Role::Governor as i32 };
        assert_eq!(to_json(&m)["role"], "Governor");
    }

    #[test]
    fn escaped_content_has_no_control_or_reordering_characters() {
        let hostile = "ok\u{1b}[2J\r\nrm -rf\t\u{7}\u{9b}31m\u{202e}txt.exe\u{200b}\\n".as_bytes();
        let shown = escaped(hostile, 200);
        assert!(!shown.chars().any(unsafe_on_a_terminal), "{shown:?}");
        assert_eq!(shown, "ok\\u{1b}[2J\\r\\nrm -rf\\t\\u{7}\\u{9b}31m\\u{202e}txt.exe\\u{200b}\\\\n");
    }

    #[test]
    fn escaped_content_keeps_text_marks_bad_bytes_and_truncates_by_characters() {
        assert_eq!(escaped("héllo, 世界".as_bytes(), 100), "héllo, 世界");
        assert_eq!(escaped(b"a\xffb", 100), "a\\xffb");
        assert_eq!(escaped("ééééé".as_bytes(), 3), "ééé…");
        assert_eq!(escaped(b"abc", 3), "abc", "exactly the limit is not truncated");
        assert_eq!(escaped(b"", 3), "");
    }

    #[test]
    fn instants_are_rfc_3339_in_utc_to_the_millisecond() {
        assert_eq!(instant(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(instant(1_796_234_223_123_456), "2026-12-02T17:57:03.123Z");
        assert_eq!(instant(-1_000), "1969-12-31T23:59:59.999Z", "before the epoch");
        assert_eq!(instant(i64::MAX), format!("{}µs since the epoch", i64::MAX), "beyond chrono's range");
    }

    #[test]
    fn time_fields_are_instants_wherever_they_are_nested() {
        let at = 1_796_234_223_123_456_i64;
        assert_eq!(cell("delivery_due_unix_micros", &json!(at)), "2026-12-02T17:57:03.123Z");
        assert_eq!(cell("entry", &json!(at)), at.to_string(), "only time fields are times");
        let manifest = json!({ "node_id": 1, "created_at_unix_micros": at });
        assert_eq!(cell("manifest", &manifest), "created_at_unix_micros=2026-12-02T17:57:03.123Z node_id=1");
    }

    #[test]
    fn pins_grants_members_and_labels_have_one_form_each() {
        let p = pb::MemoryPin { memory: "mem_5".into(), version: 2 };
        assert_eq!(cell("pin", &to_json(&p)), "mem_5@2");
        assert_eq!(cell("pin", &to_json(&p)), pin(&p.memory, u64::from(p.version)));
        let widened = json!({ "from": to_json(&p), "to": { "memory": "mem_5", "version": 3 }, "scope": "Fleet" });
        assert_eq!(cell("scope_widened", &widened), "from=mem_5@2 scope=fleet to=mem_5@3");
        assert_eq!(cell("to", &json!("Governor")), "governor", "a role changed to");
        assert_eq!(cell("subject", &json!("Public")), "Public", "only enum fields are enum words");
        let g = pb::GrantReceipt { role: pb::Role::Speaker as i32, fingerprint: "3f9ac2".into() };
        assert_eq!(cell("grant", &to_json(&g)), "3f9ac2 speaker");
        assert_eq!(grant("3f9ac2", &role(pb::Role::Speaker as i32)), "3f9ac2 speaker");
        let members = to_json(&vec![
            pb::Member { agent: "ag_1".into(), role: pb::Role::Governor as i32 },
            pb::Member { agent: "ag_2".into(), role: pb::Role::Observer as i32 },
        ]);
        assert_eq!(cell("members", &members), "ag_1 governor; ag_2 observer");
        let labels = pb::Labels { taint: pb::Taint::Tainted as i32, scope: pb::Scope::Fleet as i32 };
        assert_eq!(cell("labels", &to_json(&labels)), "tainted/fleet");
    }

    #[test]
    fn written_receipts_show_pins_times_and_grants_in_their_one_form() {
        let receipt =
            |result| to_json(&pb::Receipt { kind: "x".into(), at_unix_micros: 0, seq: Some(1), result: Some(result) });
        use pb::receipt::Result as R;
        let created = receipt(R::MemoryCreated(pb::MemoryPin { memory: "mem_5".into(), version: 1 }));
        assert_eq!(result_rows(&created), vec![("pin".to_string(), "mem_5@1".to_string())]);
        let taken = receipt(R::AssignmentTaken(pb::AssignmentTaken {
            assignment: "asg_2".into(),
            delivery_due_unix_micros: 1_796_234_223_123_456,
        }));
        let rows = result_rows(&taken);
        assert!(rows.contains(&("delivery_due_unix_micros".into(), "2026-12-02T17:57:03.123Z".into())), "{rows:?}");
        let thread = receipt(R::ThreadCreated(pb::ThreadCreated {
            thread: "th_1".into(),
            grant: Some(pb::GrantReceipt { role: pb::Role::Speaker as i32, fingerprint: "3f9ac2".into() }),
        }));
        let rows = result_rows(&thread);
        assert!(rows.contains(&("grant".into(), "3f9ac2 speaker".into())), "{rows:?}");
        let posted = receipt(R::Posted(pb::Posted {
            thread: "th_1".into(),
            entry: 2,
            pin: Some(pb::MemoryPin { memory: "mem_1".into(), version: 3 }),
            responders: vec!["ag_2".into(), "ag_3".into()],
            ..Default::default()
        }));
        let rows = result_rows(&posted);
        assert!(rows.contains(&("pin".into(), "mem_1@3".into())), "{rows:?}");
        assert!(rows.contains(&("responders".into(), "ag_2,ag_3".into())), "{rows:?}");
        assert!(rows.contains(&("assignment".into(), "-".into())), "{rows:?}");
    }

    #[test]
    fn a_membership_is_rows_of_nodes_and_voter_sets() {
        let node = |id: u64| pb::ClusterNode {
            node_id: id,
            api_addr: format!("127.0.0.1:74{id:02}"),
            raft_addr: format!("127.0.0.1:75{id:02}"),
        };
        let m = pb::ClusterMembership {
            voters: vec![node(1), node(2)],
            learners: vec![],
            configs: vec![pb::VoterSet { node_ids: vec![1, 2] }, pb::VoterSet { node_ids: vec![1, 2, 3] }],
            log_index: Some(12),
            committed: true,
        };
        let rows = membership_rows(&m);
        let get = |k: &str| rows.iter().find(|(r, _)| r == k).map(|(_, v)| v.clone()).unwrap_or_default();
        assert_eq!(
            get("voters"),
            "1 (api 127.0.0.1:7401, raft 127.0.0.1:7501); 2 (api 127.0.0.1:7402, raft 127.0.0.1:7502)"
        );
        assert_eq!(get("learners"), "-");
        assert_eq!(get("voter sets"), "1,2 and 1,2,3");
        assert_eq!(get("log index"), "12");
        assert!(rows.iter().all(|(_, v)| !v.contains(['{', '"'])), "{rows:?}");
    }

    #[test]
    fn no_cell_is_json() {
        let a = pb::Assignment {
            id: "asg_1".into(),
            criteria: Some(pb::Content { body: b"c".to_vec() }),
            state: Some(pb::assignment::State::Open(())),
            ..Default::default()
        };
        let shown = cell("assignment", &to_json(&a));
        assert!(!shown.contains(['{', '}', '"']), "{shown}");
        assert!(shown.contains("state=open"), "a oneof case without data is its name: {shown}");
        assert!(shown.contains("criteria=bytes 1"), "{shown}");
        assert_eq!(cell("responders", &json!(["ag_1", "ag_2"])), "ag_1,ag_2");
        assert_eq!(cell("responders", &json!([])), "-");
        assert_eq!(cell("assignment", &Value::Null), "-");
    }
}
