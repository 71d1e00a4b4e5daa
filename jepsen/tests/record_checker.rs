//! The `record-append` checker on hand-made histories, no cluster needed: a valid history with
//! every outcome (plain and merged appends, a stale replace refused, a replay through another
//! node, an `info` that happened and one that did not, a refused duplicate id, a read) passes, and
//! each anomaly class is INVALID with a message that names it.

use kungfu_jepsen::checker::record::{Options, check};
use kungfu_jepsen::checker::{CheckOptions, Validity, Verdict, Workload, check_workload};
use kungfu_jepsen::history::{History, HistoryBuilder};
use serde_json::{Value, json};

const R: &str = "rec_1";

fn build(b: &HistoryBuilder) -> History {
    b.build().expect("a well-formed history")
}

#[track_caller]
fn assert_valid(v: &Verdict) {
    assert_eq!(v.valid, Validity::Valid, "expected VALID:\n{}\n{:#?}", v.summary(), v.anomalies);
}

#[track_caller]
fn assert_flags(v: &Verdict, kind: &str, words: &str) {
    assert_eq!(v.valid, Validity::Invalid, "expected INVALID:\n{}", v.summary());
    assert!(v.anomalies_of(kind) > 0, "expected a `{kind}` anomaly:\n{}\n{:#?}", v.summary(), v.anomalies);
    assert!(
        v.anomalies_named(kind).any(|a| a.message.contains(words)),
        "no `{kind}` message names {words:?}:\n{:#?}",
        v.anomalies
    );
}

fn append(b: &mut HistoryBuilder, p: u64, key: &str, base: u64, ids: &[&str], node: &str, flag: Option<&str>) {
    let mut v = json!({"record": R, "base_rev": base, "ids": ids, "agent": "ag_1"});
    if let Some(f) = flag {
        v[f] = json!(true);
    }
    b.invoke(p, "append", v).idem(key).node(node);
}

fn replace(b: &mut HistoryBuilder, p: u64, key: &str, base: u64, path: &str, value: &str) {
    b.invoke(p, "replace", json!({"record": R, "base_rev": base, "path": path, "value": value})).idem(key).node("n1");
}

fn acked(b: &mut HistoryBuilder, p: u64, entry: u64, base: u64, rev: u64, merged: bool) {
    b.ok(p, json!({"record": R, "entry": entry, "base_rev": base, "rev": rev, "merged": merged}));
}

fn event(rev: u64, base: u64, paths: &[&str]) -> Value {
    json!({"rev": rev, "base_rev": base, "entry": rev, "actor": "ag_1", "paths": paths})
}

/// A record as a read shows it.
#[derive(Clone)]
struct Rec {
    rev: u64,
    title: String,
    state: String,
    notes: Vec<(String, u64)>,
    events: Vec<Value>,
}

impl Rec {
    fn json(&self, after: u64) -> Value {
        let notes: Vec<Value> = self.notes.iter().map(|(id, r)| json!({"id": id, "added_rev": r})).collect();
        let events: Vec<Value> =
            self.events.iter().filter(|e| e["rev"].as_u64().unwrap_or(0) > after).cloned().collect();
        json!({"record": R, "rev": self.rev, "current_rev": self.rev, "title": self.title, "state": self.state,
               "notes": notes, "events_after": after, "events": events})
    }

    fn upto(&self, rev: u64) -> Rec {
        Rec {
            rev,
            title: self.title.clone(),
            state: self.state.clone(),
            notes: self.notes.iter().filter(|(_, r)| *r <= rev).cloned().collect(),
            events: self.events.iter().filter(|e| e["rev"].as_u64().unwrap_or(0) <= rev).cloned().collect(),
        }
    }
}

/// The record every node holds at the end of the valid history.
fn record() -> Rec {
    Rec {
        rev: 6,
        title: "t-y".into(),
        state: "s-z".into(),
        notes: vec![("a1".into(), 2), ("b1".into(), 3), ("b2".into(), 3), ("c1".into(), 5)],
        events: vec![
            event(1, 0, &["/title", "/state", "/body_ref"]),
            event(2, 1, &["/notes"]),
            event(3, 1, &["/notes", "/notes"]),
            event(4, 3, &["/title"]),
            event(5, 4, &["/notes"]),
            event(6, 5, &["/state"]),
        ],
    }
}

fn read(b: &mut HistoryBuilder, p: u64, node: &str, value: Value) {
    b.invoke(p, "read", json!({"record": R})).node(node);
    b.ok(p, value).node(node);
}

fn finals(b: &mut HistoryBuilder, nodes: &[Rec]) {
    for (i, r) in nodes.iter().enumerate() {
        let p = 900 + i as u64;
        let node = format!("n{}", i + 1);
        b.invoke(p, "final-read", json!({"record": R})).node(node.clone());
        b.ok(p, r.json(0)).node(node);
    }
}

/// What to change in the valid history.
#[derive(Default)]
struct Twist {
    /// The replace of rev 4 was sent on this base (3 in the valid history).
    replace_base: Option<u64>,
    /// The second append's `merged` flag (true in the valid history).
    merged: Option<bool>,
    /// The replay of `ka-1` answers this rev (2 in the valid history).
    replay_rev: Option<u64>,
    /// The duplicate id is acknowledged instead of refused.
    dup_acked: bool,
    /// The read (at rev 4 in the valid history).
    read: Option<Value>,
    /// The read is at rev 3 (after rev 4 was acknowledged).
    read_rev: Option<u64>,
}

fn history(t: &Twist) -> HistoryBuilder {
    let mut b = HistoryBuilder::new();
    // A plain append and one merged onto a newer rev.
    append(&mut b, 1, "ka-1", 1, &["a1"], "n1", None);
    acked(&mut b, 1, 2, 1, 2, false);
    append(&mut b, 2, "kb-1", 1, &["b1", "b2"], "n2", None);
    acked(&mut b, 2, 3, 1, 3, t.merged.unwrap_or(true));
    // A replace on a stale base is refused; on the current one, accepted.
    replace(&mut b, 3, "kr-1", 1, "/title", "t-x");
    b.fail(3, "STALE_BASE");
    replace(&mut b, 3, "kr-2", t.replace_base.unwrap_or(3), "/title", "t-y");
    acked(&mut b, 3, 4, 3, 4, false);
    // The replay of ka-1 through another node answers the first receipt.
    append(&mut b, 4, "ka-1", 1, &["a1"], "n3", Some("replay"));
    acked(&mut b, 4, 2, 1, t.replay_rev.unwrap_or(2), false);
    // Timed out and happened (rev 5); timed out and never happened; refused.
    append(&mut b, 5, "kc-1", 4, &["c1"], "n1", None);
    b.info(5, "INDETERMINATE");
    append(&mut b, 6, "kd-1", 4, &["d1"], "n2", None);
    b.info(6, "INDETERMINATE");
    append(&mut b, 7, "ke-1", 2, &["e1"], "n3", None);
    b.fail(7, "UNAVAILABLE");
    // A used id again under a fresh key: refused.
    append(&mut b, 8, "kx-1", 4, &["a1"], "n1", Some("dup"));
    if t.dup_acked {
        acked(&mut b, 8, 7, 4, 7, true);
    } else {
        b.fail(8, "DUPLICATE_ID");
    }
    // A read after rev 4 was acknowledged.
    let rev = t.read_rev.unwrap_or(4);
    let value = t.read.clone().unwrap_or_else(|| record().upto(rev).json(0));
    read(&mut b, 9, "n1", value);
    replace(&mut b, 10, "kr-3", 5, "/state", "s-z");
    acked(&mut b, 10, 6, 5, 6, false);
    b
}

fn valid_with(t: &Twist, nodes: &[Rec]) -> Verdict {
    let mut b = history(t);
    finals(&mut b, nodes);
    check(&build(&b), &Options::default())
}

fn same() -> Vec<Rec> {
    vec![record(), record(), record()]
}

#[test]
fn a_valid_history_with_merges_conflicts_replays_and_reads_passes() {
    let mut b = history(&Twist::default());
    finals(&mut b, &same());
    let v = check(&build(&b), &Options::default());
    assert_valid(&v);
    assert_eq!(v.counts["appends"], 7);
    assert_eq!(v.counts["replaces"], 3);
    assert_eq!(v.counts["ok"], 5);
    assert_eq!(v.counts["stale_base"], 1);
    assert_eq!(v.counts["duplicate_id"], 1);
    assert_eq!(v.counts["merged"], 1);
    assert_eq!(v.counts["replays"], 1);
    assert_eq!(v.counts["reads"], 1);
    assert_eq!(v.counts["final_reads"], 3);
    assert_eq!(v.counts["notes"], 4);
    let report = check_workload(Workload::Record, &build(&b), &CheckOptions::default());
    assert_eq!(report.valid, Validity::Valid, "{}", report.summary());
    assert_eq!("record-append".parse::<Workload>(), Ok(Workload::Record));
}

#[test]
fn a_lost_append_is_invalid() {
    let mut r = record();
    r.notes.retain(|(id, _)| id != "b2");
    let v = valid_with(&Twist::default(), &[record(), r.clone(), r]);
    assert_flags(&v, "lost", "note b2 is absent");
}

#[test]
fn a_note_held_twice_is_invalid() {
    let mut r = record();
    r.notes.push(("a1".into(), 5));
    let v = valid_with(&Twist::default(), &[r.clone(), r.clone(), r]);
    assert_flags(&v, "duplicate", "note a1 is held twice");
}

#[test]
fn a_duplicate_id_accepted_is_invalid() {
    let v = valid_with(&Twist { dup_acked: true, ..Twist::default() }, &same());
    assert_flags(&v, "duplicate", "acknowledged under 2 keys");
}

#[test]
fn a_note_from_nowhere_is_invalid() {
    let mut r = record();
    r.notes.push(("zz".into(), 5));
    let v = valid_with(&Twist::default(), &[r.clone(), r.clone(), r]);
    assert_flags(&v, "unexpected", "note zz was appended by no op");
}

#[test]
fn a_note_of_a_failed_append_is_invalid() {
    let mut r = record();
    r.notes.push(("e1".into(), 5));
    let v = valid_with(&Twist::default(), &[r.clone(), r.clone(), r]);
    assert_flags(&v, "failed_present", "note e1 is held");
}

#[test]
fn a_gap_in_the_revs_is_invalid() {
    let mut r = record();
    r.events.retain(|e| e["rev"] != 3);
    let v = valid_with(&Twist::default(), &[r.clone(), r.clone(), r]);
    assert_flags(&v, "rev_order", "not 1..=6 in order");
}

#[test]
fn a_read_whose_events_go_backwards_is_invalid() {
    let mut r = record().upto(4).json(0);
    let events = r["events"].as_array_mut().expect("events");
    events.swap(1, 2);
    let v = valid_with(&Twist { read: Some(r), ..Twist::default() }, &same());
    assert_flags(&v, "rev_order", "the events after 0 are [1, 3, 2, 4]");
}

#[test]
fn a_replace_accepted_on_a_stale_base_is_invalid() {
    // The last-writer-wins canary: sent on base 1, the server decided it on its current rev 3.
    let v = valid_with(&Twist { replace_base: Some(1), ..Twist::default() }, &same());
    assert_flags(&v, "stale_replace", "accepted as rev 4 (merged false) on base 1");
}

#[test]
fn an_event_replacing_on_a_stale_base_is_invalid() {
    let mut r = record();
    r.events[5] = event(6, 4, &["/state"]);
    let v = valid_with(&Twist::default(), &[r.clone(), r.clone(), r]);
    assert_flags(&v, "stale_replace", "event 6 writes [\"/state\"] on base 4");
}

#[test]
fn a_wrong_merged_flag_is_invalid() {
    let v = valid_with(&Twist { merged: Some(false), ..Twist::default() }, &same());
    assert_flags(&v, "receipt_mismatch", "acknowledged as rev 3 on base 1 with merged = false");
}

#[test]
fn an_append_added_at_another_rev_than_acknowledged_is_invalid() {
    let mut r = record();
    r.notes[0].1 = 3;
    let v = valid_with(&Twist::default(), &[r.clone(), r.clone(), r]);
    assert_flags(&v, "ack_mismatch", "note a1 was added at rev 3");
}

#[test]
fn a_replay_with_another_rev_is_invalid() {
    let v = valid_with(&Twist { replay_rev: Some(3), ..Twist::default() }, &same());
    assert_flags(&v, "replay_mismatch", "acknowledged with rev 2 (entry 2) and again with rev 3");
}

#[test]
fn nodes_that_disagree_are_invalid() {
    let mut r = record();
    r.events[5]["actor"] = json!("ag_9");
    let v = valid_with(&Twist::default(), &[record(), record(), r]);
    assert_flags(&v, "divergence", "node n1 holds rev 6");
}

#[test]
fn a_read_behind_an_earlier_acknowledgment_is_invalid() {
    let v = valid_with(&Twist { read_rev: Some(3), ..Twist::default() }, &same());
    assert_flags(&v, "stale_read", "read rev 3 after a patch was acknowledged as rev 4");
}

#[test]
fn a_read_missing_a_note_is_invalid() {
    let mut r = record().upto(4);
    r.notes.retain(|(id, _)| id != "b2");
    let v = valid_with(&Twist { read: Some(r.json(0)), ..Twist::default() }, &same());
    assert_flags(&v, "read_mismatch", "missing [(\"b2\", 3)]");
}

#[test]
fn a_title_no_replace_wrote_is_invalid() {
    let mut r = record();
    r.title = "t-x".into();
    let v = valid_with(&Twist::default(), &[r.clone(), r.clone(), r]);
    // t-x's replace was refused STALE_BASE: it must not be the title.
    assert_flags(&v, "failed_present", "/title is \"t-x\"");
}
