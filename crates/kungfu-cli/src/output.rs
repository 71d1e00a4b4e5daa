//! Output: JSON for scripts and aligned tables for people.
//!
//! The JSON of a response mirrors its protobuf message: field names are the proto field names, a
//! `oneof` is an object with the one case that is set (`{"posted": {...}}`), an absent optional
//! field is `null`, and an enum value is its Rust variant name (`Speaker`). It is derived from the
//! generated messages' `Debug` form, which names every field, by [`to_json`]. Participant content
//! never appears there (its `Debug` shows only its size, as `{"bytes": N}`); the commands that show
//! content add it explicitly as text.

use serde_json::{Map, Value};

/// A message as JSON, following the rules of the module comment.
pub fn to_json<T: std::fmt::Debug>(message: &T) -> Value {
    let text = format!("{message:?}");
    let mut parser = Parser { s: text.as_bytes(), i: 0 };
    match parser.value() {
        Some(v) => v,
        // A form the parser does not know is still shown, as text.
        None => Value::String(text),
    }
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

/// A recursive-descent parser of the `Debug` form of generated messages.
struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.skip_ws();
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn ident(&mut self) -> Option<String> {
        self.skip_ws();
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_') {
            self.i += 1;
        }
        (self.i > start).then(|| String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }

    fn value(&mut self) -> Option<Value> {
        self.skip_ws();
        match self.peek()? {
            b'"' => self.string().map(Value::String),
            b'[' => {
                self.i += 1;
                let mut items = Vec::new();
                while !self.eat(b']') {
                    items.push(self.value()?);
                    self.eat(b',');
                }
                Some(Value::Array(items))
            }
            b'(' => {
                // The unit value `()`, as `google.protobuf.Empty` is generated.
                self.i += 1;
                self.eat(b')').then_some(Value::Null)
            }
            b'{' => self.fields(),
            c if c == b'-' || c.is_ascii_digit() => self.number(),
            _ => {
                let name = self.ident()?;
                match name.as_str() {
                    "true" => return Some(Value::Bool(true)),
                    "false" => return Some(Value::Bool(false)),
                    "None" => return Some(Value::Null),
                    _ => {}
                }
                self.skip_ws();
                match self.peek() {
                    Some(b'{') => self.fields(),
                    Some(b'(') if name == "Content" => self.content(),
                    Some(b'(') => {
                        self.i += 1;
                        let inner = self.value()?;
                        if !self.eat(b')') {
                            return None;
                        }
                        if name == "Some" {
                            Some(inner)
                        } else {
                            let mut m = Map::new();
                            m.insert(snake(&name), inner);
                            Some(Value::Object(m))
                        }
                    }
                    // A bare name is an enum value.
                    _ => Some(Value::String(name)),
                }
            }
        }
    }

    /// `Content(N bytes)`, the hand-written `Debug` of participant content.
    fn content(&mut self) -> Option<Value> {
        self.i += 1;
        let n = self.number()?;
        self.ident()?;
        self.eat(b')').then(|| serde_json::json!({ "bytes": n }))
    }

    fn fields(&mut self) -> Option<Value> {
        if !self.eat(b'{') {
            return None;
        }
        let mut m = Map::new();
        while !self.eat(b'}') {
            let key = self.ident()?;
            if !self.eat(b':') {
                return None;
            }
            let v = self.value()?;
            m.insert(key, v);
            self.eat(b',');
        }
        Some(Value::Object(m))
    }

    fn number(&mut self) -> Option<Value> {
        self.skip_ws();
        let start = self.i;
        while self.peek().is_some_and(|c| c == b'-' || c == b'.' || c == b'e' || c.is_ascii_digit()) {
            self.i += 1;
        }
        let t = std::str::from_utf8(&self.s[start..self.i]).ok()?;
        if let Ok(n) = t.parse::<i64>() {
            return Some(Value::from(n));
        }
        if let Ok(n) = t.parse::<u64>() {
            return Some(Value::from(n));
        }
        t.parse::<f64>().ok().map(Value::from)
    }

    fn string(&mut self) -> Option<String> {
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let c = self.peek()?;
            self.i += 1;
            match c {
                b'"' => return String::from_utf8(out).ok(),
                b'\\' => {
                    let e = self.peek()?;
                    self.i += 1;
                    match e {
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        b'0' => out.push(0),
                        b'u' => {
                            // `\u{1b}`.
                            if self.peek() != Some(b'{') {
                                return None;
                            }
                            let start = self.i + 1;
                            while self.peek()? != b'}' {
                                self.i += 1;
                            }
                            let hex = std::str::from_utf8(&self.s[start..self.i]).ok()?;
                            self.i += 1;
                            let ch = char::from_u32(u32::from_str_radix(hex, 16).ok()?)?;
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        other => out.push(other),
                    }
                }
                other => out.push(other),
            }
        }
    }
}

/// `AssignmentTaken` as `assignment_taken`.
fn snake(name: &str) -> String {
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
    fn instants_are_shown_as_utc() {
        assert_eq!(instant(0), "1970-01-01 00:00:00Z");
        assert_eq!(instant(1_700_000_000_000_000), "2023-11-14 22:13:20Z");
    }
}
