//! Output: JSON for scripts and aligned tables for people.
//!
//! The JSON of a response mirrors its protobuf message: field names are the proto field names, a
//! `oneof` is an object with the one case that is set (`{"posted": {...}}`), an absent optional
//! field is `null`, and an enum value is its Rust variant name (`Speaker`). The generated messages
//! derive `serde::Serialize` to that shape (`kungfu-api`'s `build.rs` and `json.rs`). Participant
//! content never appears there (it serializes as its size only, `{"bytes": N}`); the commands that
//! show content add it explicitly as text.

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

/// An instant in microseconds since the Unix epoch, as a UTC date and time of day.
pub fn instant(micros: i64) -> String {
    match chrono::DateTime::from_timestamp_micros(micros) {
        Some(t) => t.format("%Y-%m-%d %H:%M:%SZ").to_string(),
        None => format!("{micros}µs"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kungfu_client::pb;

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
    fn instants_are_shown_as_utc() {
        assert_eq!(instant(0), "1970-01-01 00:00:00Z");
        assert_eq!(instant(1_700_000_000_000_000), "2023-11-14 22:13:20Z");
    }
}
