//! The history model: JSON lines, validation, pairing.

use kungfu_jepsen::history::{History, HistoryBuilder, HistoryError, Op, OpType, Outcome, Process};
use serde_json::json;

fn sample() -> History {
    let mut b = HistoryBuilder::new();
    b.on_node(Some("n1"));
    b.invoke(0, "adopt", json!({"task": "t1", "agent": "a1"})).idem("k0");
    b.invoke(1, "adopt", json!({"task": "t1", "agent": "a2"})).idem("k1");
    b.ok(0, json!({"task": "t1", "agent": "a1"})).receipt(json!({"adopted": "a1"}));
    b.nemesis("start-partition", json!({"grudge": {"n1": ["n2", "n3"]}}));
    b.info(1, "TIMEOUT").message = Some("timeout after 2000ms".to_owned());
    b.invoke(2, "adopt", json!({"task": "t1", "agent": "a3"}));
    b.fail(2, "ADOPTION_LIMIT_REACHED");
    b.invoke(3, "read", json!({"task": "t1"}));
    b.build().expect("valid history")
}

#[test]
fn jsonl_round_trip_is_lossless() {
    let h = sample();
    let text = h.to_jsonl_string();
    assert_eq!(text.lines().count(), h.len());
    let back = History::from_jsonl_str(&text).expect("parses");
    assert_eq!(back, h);
    assert_eq!(back.to_jsonl_string(), text);
}

#[test]
fn jsonl_keeps_unknown_fields_and_optional_ones() {
    let line = r#"{"index":7,"time":12,"process":"nemesis","type":"info","f":"kill","value":{"nodes":["n2"]},"as_of":41,"custom":{"x":1}}"#;
    let h = History::from_jsonl_str(line).expect("parses");
    let op = &h.ops()[0];
    assert_eq!(op.process, Process::Nemesis);
    assert_eq!(op.as_of, Some(41));
    assert_eq!(op.extra.get("custom"), Some(&json!({"x": 1})));
    let again: serde_json::Value = serde_json::from_str(h.to_jsonl_string().trim()).expect("json");
    let orig: serde_json::Value = serde_json::from_str(line).expect("json");
    assert_eq!(again, orig);
}

#[test]
fn jsonl_file_round_trip() {
    let h = sample();
    let dir = std::env::temp_dir().join(format!("kungfu-jepsen-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("history.jsonl");
    h.save(&path).expect("save");
    assert_eq!(History::load(&path).expect("load"), h);
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn parse_errors_name_the_line() {
    let text = "{\"index\":0,\"time\":0,\"process\":0,\"type\":\"invoke\",\"f\":\"x\"}\n\nnot json\n";
    match History::from_jsonl_str(text) {
        Err(HistoryError::Parse { line, .. }) => assert_eq!(line, 3),
        other => panic!("expected a parse error, got {other:?}"),
    }
    let bad_process = r#"{"index":0,"time":0,"process":"bob","type":"invoke","f":"x"}"#;
    assert!(matches!(History::from_jsonl_str(bad_process), Err(HistoryError::Parse { line: 1, .. })));
    let bad_type = r#"{"index":0,"time":0,"process":1,"type":"maybe","f":"x"}"#;
    assert!(matches!(History::from_jsonl_str(bad_type), Err(HistoryError::Parse { line: 1, .. })));
}

fn op(index: u64, process: u64, kind: OpType, f: &str) -> Op {
    let mut op = Op::new(process, kind, f, serde_json::Value::Null);
    op.index = index;
    op
}

#[test]
fn malformed_histories_are_rejected() {
    let double = vec![op(0, 1, OpType::Invoke, "a"), op(1, 1, OpType::Invoke, "a")];
    assert!(matches!(History::new(double), Err(HistoryError::DoubleInvoke { index: 1, open: 0, .. })));
    let orphan = vec![op(0, 1, OpType::Ok, "a")];
    assert!(matches!(History::new(orphan), Err(HistoryError::OrphanCompletion { index: 0, .. })));
    let mismatch = vec![op(0, 1, OpType::Invoke, "a"), op(1, 1, OpType::Ok, "b")];
    assert!(matches!(History::new(mismatch), Err(HistoryError::FunctionMismatch { index: 1, .. })));
    let order = vec![op(5, 1, OpType::Invoke, "a"), op(5, 1, OpType::Ok, "a")];
    assert!(matches!(History::new(order), Err(HistoryError::IndexOrder { index: 5, previous: 5 })));
}

#[test]
fn pairing_treats_info_and_missing_completions_as_indeterminate() {
    let h = sample();
    let pairs = h.pairs();
    assert_eq!(pairs.len(), 4);
    let outcomes: Vec<Outcome> = pairs.iter().map(|p| p.outcome()).collect();
    assert_eq!(outcomes, [Outcome::Ok, Outcome::Indeterminate, Outcome::Fail, Outcome::Indeterminate]);
    // info is never a failure: it may have happened.
    assert!(pairs[1].may_have_happened() && !pairs[1].is_fail());
    assert_eq!(pairs[1].error(), Some("TIMEOUT"));
    assert!(pairs[3].completion.is_none());
    assert!(pairs[3].may_have_happened());
    assert!(pairs[2].failed_with("ADOPTION_LIMIT_REACHED"));
    assert_eq!(pairs[0].idem(), Some("k0"));
    assert_eq!(pairs[0].node(), Some("n1"));
    assert_eq!(h.nemesis_ops().count(), 1);
    assert_eq!(h.pairs_of("read").len(), 1);
}

#[test]
fn real_time_order_uses_only_determinate_completions() {
    let h = sample();
    let pairs = h.pairs();
    let (ok, info, fail, open) = (pairs[0], pairs[1], pairs[2], pairs[3]);
    assert!(ok.precedes(&fail), "ok completed (2) before the refusal was invoked (5)");
    assert!(!info.precedes(&fail), "an info op may take effect after its completion was recorded");
    assert!(fail.precedes(&open));
    assert!(!open.precedes(&ok));
    assert_eq!(info.settled_index(), None);
    assert_eq!(ok.settled_index(), Some(2));
}

#[test]
fn builder_assigns_indexes_times_and_nodes() {
    let mut b = HistoryBuilder::new();
    b.tick(10).at(100);
    b.invoke(0, "x", json!(null));
    b.on_node(Some("n2"));
    b.ok(0, json!(1));
    b.nemesis("kill", json!(null));
    let h = b.build().expect("valid");
    let ops = h.ops();
    assert_eq!(ops.iter().map(|o| o.index).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(ops.iter().map(|o| o.time).collect::<Vec<_>>(), [100, 110, 120]);
    assert_eq!(ops[0].node, None);
    assert_eq!(ops[1].node.as_deref(), Some("n2"));
    assert_eq!(ops[1].f, "x");
    assert_eq!(ops[2].node, None, "nemesis ops get no node");
    assert_eq!(h.get(1).map(|o| o.kind), Some(OpType::Ok));
    assert_eq!(h.get(9), None);
}
