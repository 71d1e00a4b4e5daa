//! The `record-append` checker: a shared record's appends survive exactly once, its revs are dense
//! and only grow, and a replace is accepted only on the rev before it (COORDINATION §5.4–§5.8;
//! L1, L3, L5).
//!
//! **Model.** A record starts at rev 1 (its creation). Every accepted patch makes exactly one new
//! rev, the record's rev plus one, and one event listing its paths and its `base_rev`. A patch of
//! appends with new note ids is accepted on any base from 1 to the current rev: on the rev before
//! the new one it is a plain write (`merged = false`), on an older one it is merged (`merged =
//! true`). A replace (of the title or the state) is accepted only when its base is the current rev,
//! so its new rev is `base_rev + 1`; on a stale base it is refused `STALE_BASE` with no effect. A
//! note id already in the record is refused `DUPLICATE_ID`. One idempotency key is one request and
//! one receipt (L3). Reads are linearizable (L5); final reads are each node's own state after
//! convergence.
//!
//! Every note id is unique to the op that first appended it; a `dup` op appends an acknowledged id
//! again under a fresh key, which must be refused. Every replace value is unique.
//!
//! **What it proves.** On every node's final read of every record (the view and all its events):
//!
//! - `lost`: an acknowledged append's note is absent, or an acknowledged patch's rev is not in the
//!   event list.
//! - `duplicate`: a note id is held twice (in a final read or a read), or was acknowledged under
//!   two keys (a `DUPLICATE_ID` that was not refused).
//! - `unexpected`: a note no op appended, or a title or state no replace wrote.
//!   `failed_present`: a note whose every attempt definitely failed.
//! - `rev_order`: revs not dense `1..=rev` and strictly increasing (in an event list, a read's
//!   page or a receipt), an event whose `base_rev` is not below its rev, a note added at a rev that
//!   is not a `/notes` event at or below the record's rev.
//! - `stale_replace`: an acknowledged replace whose sent `base_rev` is not its rev minus one (or
//!   merged), or an event writing `/title` or `/state` whose `base_rev` is not its rev minus one:
//!   a replace accepted on a stale base.
//! - `receipt_mismatch`: an acknowledgment's `base_rev` is not the one sent, or its `merged` flag
//!   disagrees with its base and rev (`merged` exactly when `base_rev < rev - 1`).
//! - `ack_mismatch`: an acknowledged patch's event (at its rev) has another `base_rev` or entry,
//!   does not list its path, or an acknowledged append's notes were added at another rev; the
//!   final title or state is not the value of the replace of the last event writing it.
//! - `replay_mismatch`: acknowledgments of one key name different revs or entries.
//! - `divergence`: two nodes' final reads of one record differ.
//!
//! On every recorded read (`GetRecord`, then the events after `rev - 20`):
//!
//! - `stale_read`: its rev is lower than the rev of a patch acknowledged before the read began
//!   (real-time order, L5).
//! - `read_mismatch`: its notes are not exactly the final read's notes (same node) added at or
//!   before its rev, or one of its events differs from the final read's event of that rev.
//!
//! **History schema.**
//!
//! | f | invoke value (op `idem`: the key) | ok value |
//! |---|---|---|
//! | `append` | `{"record", "base_rev", "ids": [..], "replay"?, "dup"?}` | `{"entry", "base_rev", "rev", "merged", "replayed"?}` |
//! | `replace` | `{"record", "base_rev", "path": "/title" \| "/state", "value"}` | as `append` |
//! | `read` | `{"record"}` | `{"rev", "title", "state", "notes": [{"id", "added_rev"}], "events_after", "events": [{"rev", "base_rev", "entry", "actor", "paths"}]}` |
//! | `final-read` | `{"record"}` | as `read`, with every event from rev 1 |

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::Verdict;
use super::common::{Outcomes, no_final_read};
use super::val::{str_field, u64_field};
use crate::history::{FINAL_READ, History, Pair};

/// `f` of an append patch.
pub const APPEND: &str = "append";
/// `f` of a replace patch.
pub const REPLACE: &str = "replace";
/// `f` of a read.
pub const READ: &str = "read";

/// Paths a replace writes.
const REPLACED: &[&str] = &["/title", "/state"];

/// Anomaly kinds this checker reports.
pub const KINDS: &[&str] = &[
    "lost",
    "duplicate",
    "unexpected",
    "failed_present",
    "rev_order",
    "stale_replace",
    "receipt_mismatch",
    "ack_mismatch",
    "replay_mismatch",
    "divergence",
    "stale_read",
    "read_mismatch",
];

/// Options of the record checker.
pub use super::common::RequireFinalRead as Options;

/// One logical patch: every attempt under one idempotency key.
struct Key<'h> {
    key: String,
    f: &'h str,
    record: String,
    base_rev: u64,
    /// Appended note ids (append).
    ids: Vec<String>,
    /// Replaced path and value (replace).
    path: String,
    value: String,
    attempts: Vec<Pair<'h>>,
}

impl Key<'_> {
    fn name(&self) -> String {
        if self.f == APPEND {
            format!("append {:?} on {} (key {})", self.ids, self.record, self.key)
        } else {
            format!("replace {} = {:?} on {} (key {})", self.path, self.value, self.record, self.key)
        }
    }
    fn witness(&self) -> Vec<u64> {
        self.attempts.iter().flat_map(Pair::indexes).collect()
    }
    fn acks(&self) -> Vec<(&Pair<'_>, Ack)> {
        self.attempts.iter().filter_map(|p| Some((p, Ack::parse(p.response()?)?))).collect()
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Ack {
    entry: u64,
    base_rev: u64,
    rev: u64,
    merged: bool,
}

impl Ack {
    fn parse(v: &Value) -> Option<Ack> {
        Some(Ack {
            entry: u64_field(v, "entry")?,
            base_rev: u64_field(v, "base_rev")?,
            rev: u64_field(v, "rev")?,
            merged: v.get("merged").and_then(Value::as_bool).unwrap_or(false),
        })
    }
}

#[derive(Clone, PartialEq, Eq, Debug)]
struct Event {
    rev: u64,
    base_rev: u64,
    entry: u64,
    actor: String,
    paths: Vec<String>,
}

/// A record as one read saw it.
#[derive(Clone, PartialEq, Eq, Debug)]
struct View {
    rev: u64,
    title: Option<String>,
    state: Option<String>,
    notes: Vec<(String, u64)>,
    events_after: u64,
    events: Vec<Event>,
}

struct Read<'h> {
    pair: Pair<'h>,
    node: String,
    record: String,
    view: View,
}

fn parse_view(v: &Value) -> Option<View> {
    let notes = v
        .get("notes")?
        .as_array()?
        .iter()
        .map(|n| Some((str_field(n, "id")?.to_owned(), u64_field(n, "added_rev")?)))
        .collect::<Option<Vec<_>>>()?;
    let events = v
        .get("events")?
        .as_array()?
        .iter()
        .map(|e| {
            Some(Event {
                rev: u64_field(e, "rev")?,
                base_rev: u64_field(e, "base_rev").unwrap_or(0),
                entry: u64_field(e, "entry").unwrap_or(0),
                actor: str_field(e, "actor").unwrap_or_default().to_owned(),
                paths: e
                    .get("paths")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                    .unwrap_or_default(),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(View {
        rev: u64_field(v, "rev")?,
        title: str_field(v, "title").map(str::to_owned),
        state: str_field(v, "state").map(str::to_owned),
        notes,
        events_after: u64_field(v, "events_after").unwrap_or(0),
        events,
    })
}

fn parse_read<'h>(p: Pair<'h>) -> Option<Read<'h>> {
    let record = str_field(p.request(), "record")?.to_owned();
    Some(Read { pair: p, node: p.node().unwrap_or("?").to_owned(), record, view: parse_view(p.response()?)? })
}

fn strings(v: Option<&Value>) -> Option<Vec<String>> {
    v?.as_array()?.iter().map(|x| x.as_str().map(str::to_owned)).collect()
}

fn both(a: &Pair<'_>, b: &Pair<'_>) -> Vec<u64> {
    let mut w = a.indexes();
    w.extend(b.indexes());
    w
}

/// Note ids held more than once.
fn repeated(notes: &[(String, u64)]) -> Vec<&str> {
    let mut seen = BTreeSet::new();
    let mut twice = BTreeSet::new();
    for (id, _) in notes {
        if !seen.insert(id.as_str()) {
            twice.insert(id.as_str());
        }
    }
    twice.into_iter().collect()
}

/// Checks a record-append history. See the module docs. In phases: the history parsed into patches
/// by key and reads, then each patch's acknowledgments, duplicates across keys, each node's final
/// read, and the reads during the run.
pub fn check(history: &History, opts: &Options) -> Verdict {
    let mut v = Verdict::new("record", KINDS);
    let x = parse(history, &mut v);
    no_final_read(&mut v, x.finals.len(), opts.require_final_read, "survival and revs are not shown");
    let index = Index::of(&x.keys);
    check_acks(&mut v, &x.keys);
    check_duplicates(&mut v, &index);
    let notes = check_finals(&mut v, &x, &index);
    check_reads(&mut v, &x);

    v.count("appends", x.appends);
    v.count("replaces", x.replaces);
    x.outcomes.count(&mut v, None);
    v.count("replays", x.replays);
    v.count("dups", x.dups);
    v.count("stale_base", x.stale_base);
    v.count("duplicate_id", x.dup_refused);
    v.count("merged", x.merged);
    v.count("reads", x.reads.len() as u64);
    v.count("failed_reads", x.failed_reads);
    v.count("final_reads", x.finals.len() as u64);
    v.count("notes", notes);
    v
}

/// A history parsed: every patch by its key, the reads and final reads, and what was counted.
#[derive(Default)]
struct Parsed<'h> {
    keys: BTreeMap<String, Key<'h>>,
    reads: Vec<Read<'h>>,
    finals: Vec<Read<'h>>,
    outcomes: Outcomes,
    appends: u64,
    replaces: u64,
    replays: u64,
    dups: u64,
    stale_base: u64,
    dup_refused: u64,
    merged: u64,
    failed_reads: u64,
}

fn parse<'h>(history: &'h History, v: &mut Verdict) -> Parsed<'h> {
    let mut x = Parsed::default();
    for p in history.pairs() {
        match p.f() {
            f @ (APPEND | REPLACE) => {
                let req = p.request();
                let (Some(record), Some(base_rev)) = (str_field(req, "record"), u64_field(req, "base_rev")) else {
                    v.undecided("malformed", p.indexes(), "a patch must name its record and base_rev");
                    continue;
                };
                let Some(key) = p.idem() else {
                    v.undecided("malformed", p.indexes(), "a patch carries no idempotency key");
                    continue;
                };
                let ids = strings(req.get("ids")).unwrap_or_default();
                let path = str_field(req, "path").unwrap_or_default().to_owned();
                let value = str_field(req, "value").unwrap_or_default().to_owned();
                if f == APPEND {
                    x.appends += 1;
                } else {
                    x.replaces += 1;
                }
                x.outcomes.tally(&p);
                if p.is_ok() {
                    if p.response().and_then(|r| r.get("merged")).and_then(Value::as_bool) == Some(true) {
                        x.merged += 1;
                    }
                } else if p.is_fail() {
                    if p.failed_with("STALE_BASE") {
                        x.stale_base += 1;
                    }
                    if p.failed_with("DUPLICATE_ID") {
                        x.dup_refused += 1;
                    }
                }
                if req.get("replay").and_then(Value::as_bool) == Some(true) {
                    x.replays += 1;
                }
                if req.get("dup").and_then(Value::as_bool) == Some(true) {
                    x.dups += 1;
                }
                let k = x.keys.entry(key.to_owned()).or_insert_with(|| Key {
                    key: key.to_owned(),
                    f,
                    record: record.to_owned(),
                    base_rev,
                    ids: ids.clone(),
                    path: path.clone(),
                    value: value.clone(),
                    attempts: Vec::new(),
                });
                if k.f != f
                    || k.record != record
                    || k.base_rev != base_rev
                    || k.ids != ids
                    || k.path != path
                    || k.value != value
                {
                    v.undecided("malformed", p.indexes(), format!("key {key} is used for two different patches"));
                    continue;
                }
                k.attempts.push(p);
            }
            READ => {
                if !p.is_ok() {
                    x.failed_reads += 1;
                    continue;
                }
                match parse_read(p) {
                    Some(r) => x.reads.push(r),
                    None => v.undecided("malformed", p.indexes(), "a read must name its record, rev, notes and events"),
                }
            }
            FINAL_READ => {
                if v.final_read_failed(&p) {
                    continue;
                }
                match parse_read(p) {
                    Some(r) => x.finals.push(r),
                    None => v.undecided(
                        "malformed",
                        p.indexes(),
                        "a final read must name its record, rev, notes and events",
                    ),
                }
            }
            _ => {}
        }
    }
    x
}

/// The patches by what they write: each note id to the keys that appended it (the first, and
/// `dup` ones), each replaced value to its key.
struct Index<'a, 'h> {
    by_id: BTreeMap<(&'a str, &'a str), Vec<&'a Key<'h>>>,
    by_value: BTreeMap<(&'a str, &'a str, &'a str), &'a Key<'h>>,
}

impl<'a, 'h> Index<'a, 'h> {
    fn of(keys: &'a BTreeMap<String, Key<'h>>) -> Index<'a, 'h> {
        let mut by_id: BTreeMap<(&str, &str), Vec<&Key<'_>>> = BTreeMap::new();
        let mut by_value: BTreeMap<(&str, &str, &str), &Key<'_>> = BTreeMap::new();
        for k in keys.values() {
            for id in &k.ids {
                by_id.entry((k.record.as_str(), id.as_str())).or_default().push(k);
            }
            if k.f == REPLACE {
                by_value.insert((k.record.as_str(), k.path.as_str(), k.value.as_str()), k);
            }
        }
        Index { by_id, by_value }
    }
}

/// Acknowledgments: one answer per key, consistent with what was sent.
fn check_acks(v: &mut Verdict, keys: &BTreeMap<String, Key<'_>>) {
    for k in keys.values() {
        let acks = k.acks();
        if let Some((first, a0)) = acks.first()
            && let Some((other, a)) = acks.iter().skip(1).find(|(_, a)| a.rev != a0.rev || a.entry != a0.entry)
        {
            v.flag(
                "replay_mismatch",
                both(first, other),
                format!(
                    "{}: acknowledged with rev {} (entry {}) and again with rev {} (entry {}); one key, one receipt (L3)",
                    k.name(),
                    a0.rev,
                    a0.entry,
                    a.rev,
                    a.entry
                ),
            );
        }
        for (p, a) in &acks {
            if a.base_rev != k.base_rev {
                v.flag(
                    "receipt_mismatch",
                    p.indexes(),
                    format!("{}: sent on base {} but acknowledged on base {}", k.name(), k.base_rev, a.base_rev),
                );
            }
            if a.base_rev >= a.rev || a.rev < 2 {
                v.flag(
                    "rev_order",
                    p.indexes(),
                    format!("{}: acknowledged rev {} is not above its base {}", k.name(), a.rev, a.base_rev),
                );
            }
            if k.f == REPLACE {
                if k.base_rev + 1 != a.rev || a.merged {
                    v.flag(
                        "stale_replace",
                        p.indexes(),
                        format!(
                            "{}: accepted as rev {} (merged {}) on base {}: a replace is accepted only on the rev before it",
                            k.name(),
                            a.rev,
                            a.merged,
                            k.base_rev
                        ),
                    );
                }
            } else if a.merged != (k.base_rev + 1 < a.rev) {
                v.flag(
                    "receipt_mismatch",
                    p.indexes(),
                    format!(
                        "{}: acknowledged as rev {} on base {} with merged = {}",
                        k.name(),
                        a.rev,
                        k.base_rev,
                        a.merged
                    ),
                );
            }
        }
    }
}

/// A note id acknowledged under two keys: a duplicate that was not refused.
fn check_duplicates(v: &mut Verdict, index: &Index<'_, '_>) {
    let by_id = &index.by_id;
    for ((record, id), ks) in by_id.iter() {
        let acked: Vec<&&Key<'_>> = ks.iter().filter(|k| k.attempts.iter().any(Pair::is_ok)).collect();
        if acked.len() > 1 {
            let w: Vec<u64> = acked.iter().flat_map(|k| k.witness()).collect();
            v.flag(
                "duplicate",
                w,
                format!(
                    "note {id} on {record} was acknowledged under {} keys; the second must be refused DUPLICATE_ID",
                    acked.len()
                ),
            );
        }
    }
}

/// Each node's final read of each record: revs dense, every acknowledged patch there as
/// acknowledged, nothing from nowhere, nodes agree. Returns the notes the first final read of
/// each record holds.
fn check_finals(v: &mut Verdict, x: &Parsed<'_>, index: &Index<'_, '_>) -> u64 {
    let (keys, finals, by_id, by_value) = (&x.keys, &x.finals, &index.by_id, &index.by_value);
    let mut first_final: BTreeMap<&str, &Read<'_>> = BTreeMap::new();
    for f in finals.iter() {
        let at = format!("record {} on node {}", f.record, f.node);
        let view = &f.view;
        let revs: Vec<u64> = view.events.iter().map(|e| e.rev).collect();
        let expected: Vec<u64> = (1..=view.rev).collect();
        if revs != expected {
            v.flag(
                "rev_order",
                f.pair.indexes(),
                format!("{at}: the events' revs are {revs:?}, not 1..={} in order", view.rev),
            );
        }
        let events: BTreeMap<u64, &Event> = view.events.iter().map(|e| (e.rev, e)).collect();
        for e in &view.events {
            if e.rev > 1 && e.base_rev >= e.rev {
                v.flag("rev_order", f.pair.indexes(), format!("{at}: event {} has base_rev {}", e.rev, e.base_rev));
            }
            if e.rev > 1 && e.paths.iter().any(|p| REPLACED.contains(&p.as_str())) && e.base_rev + 1 != e.rev {
                v.flag(
                    "stale_replace",
                    f.pair.indexes(),
                    format!(
                        "{at}: event {} writes {:?} on base {}: a replace accepted on a stale base",
                        e.rev, e.paths, e.base_rev
                    ),
                );
            }
        }
        for id in repeated(&view.notes) {
            v.flag("duplicate", f.pair.indexes(), format!("{at}: note {id} is held twice"));
        }
        let held: BTreeMap<&str, u64> = view.notes.iter().map(|(id, r)| (id.as_str(), *r)).collect();
        for (id, added) in &view.notes {
            if *added > view.rev || !events.get(added).is_some_and(|e| e.paths.iter().any(|p| p == "/notes")) {
                v.flag(
                    "rev_order",
                    f.pair.indexes(),
                    format!(
                        "{at}: note {id} was added at rev {added}, which is no /notes event up to rev {}",
                        view.rev
                    ),
                );
            }
            match by_id.get(&(f.record.as_str(), id.as_str())) {
                None => v.flag("unexpected", f.pair.indexes(), format!("{at}: note {id} was appended by no op")),
                Some(ks) => {
                    if ks.iter().all(|k| k.attempts.iter().all(Pair::is_fail)) {
                        let mut w: Vec<u64> = ks.iter().flat_map(|k| k.witness()).collect();
                        w.extend(f.pair.indexes());
                        v.flag(
                            "failed_present",
                            w,
                            format!("{at}: note {id} is held, but every attempt to append it definitely failed"),
                        );
                    }
                }
            }
        }
        for k in keys.values().filter(|k| k.record == f.record) {
            for (p, a) in k.acks() {
                let mut w = p.indexes();
                w.extend(f.pair.indexes());
                for id in &k.ids {
                    match held.get(id.as_str()) {
                        None => v.flag(
                            "lost",
                            w.clone(),
                            format!("{at}: {} was acknowledged but note {id} is absent", k.name()),
                        ),
                        Some(r) if *r != a.rev => v.flag(
                            "ack_mismatch",
                            w.clone(),
                            format!(
                                "{at}: {} was acknowledged as rev {} but note {id} was added at rev {r}",
                                k.name(),
                                a.rev
                            ),
                        ),
                        Some(_) => {}
                    }
                }
                match events.get(&a.rev) {
                    None => v.flag(
                        "lost",
                        w,
                        format!("{at}: {} was acknowledged as rev {}, which is not in the event list", k.name(), a.rev),
                    ),
                    Some(e) => {
                        let path = if k.f == APPEND { "/notes" } else { k.path.as_str() };
                        if e.base_rev != a.base_rev || e.entry != a.entry || !e.paths.iter().any(|p| p == path) {
                            v.flag(
                                "ack_mismatch",
                                w,
                                format!(
                                    "{at}: {} was acknowledged as rev {} (base {}, entry {}) but that event is {e:?}",
                                    k.name(),
                                    a.rev,
                                    a.base_rev,
                                    a.entry
                                ),
                            );
                        }
                    }
                }
            }
        }
        // The title and the state are the values of the last event writing them.
        for (path, value, initial) in [("/title", &view.title, "title-"), ("/state", &view.state, "state-")] {
            let Some(value) = value else { continue };
            let last = view.events.iter().rev().find(|e| e.rev > 1 && e.paths.iter().any(|p| p == path)).map(|e| e.rev);
            match (last, by_value.get(&(f.record.as_str(), path, value.as_str()))) {
                (None, _) if value.starts_with(initial) => {}
                (Some(_), None) | (None, _) => v.flag(
                    "unexpected",
                    f.pair.indexes(),
                    format!("{at}: {path} is {value:?}, which no replace wrote (last written at rev {last:?})"),
                ),
                (Some(rev), Some(k)) => {
                    let mut w = k.witness();
                    w.extend(f.pair.indexes());
                    if k.attempts.iter().all(Pair::is_fail) {
                        v.flag(
                            "failed_present",
                            w,
                            format!("{at}: {path} is {value:?}, whose replace definitely failed"),
                        );
                    } else if let Some((_, a)) = k.acks().first()
                        && a.rev != rev
                    {
                        v.flag(
                            "ack_mismatch",
                            w,
                            format!("{at}: {path} is {value:?}, acknowledged as rev {}, but it was last written at rev {rev}", a.rev),
                        );
                    }
                }
            }
        }
        // Nodes agree.
        match first_final.get(f.record.as_str()) {
            None => {
                first_final.insert(f.record.as_str(), f);
            }
            Some(g) if g.view != f.view => v.flag(
                "divergence",
                both(&g.pair, &f.pair),
                format!(
                    "record {}: node {} holds rev {} with {} notes, node {} rev {} with {} notes (or other values)",
                    f.record,
                    g.node,
                    g.view.rev,
                    g.view.notes.len(),
                    f.node,
                    f.view.rev,
                    f.view.notes.len()
                ),
            ),
            Some(_) => {}
        }
    }

    first_final.values().map(|f| f.view.notes.len() as u64).sum()
}

/// Reads during the run: dense events, none behind an earlier acknowledgment (L5), each agreeing
/// with its node's final read.
fn check_reads(v: &mut Verdict, x: &Parsed<'_>) {
    let (keys, reads, finals) = (&x.keys, &x.reads, &x.finals);
    let final_of: BTreeMap<(&str, &str), &Read<'_>> =
        finals.iter().map(|f| ((f.node.as_str(), f.record.as_str()), f)).collect();
    // Acknowledged patches by record, as (completion index, rev).
    let mut acked_revs: BTreeMap<&str, Vec<(u64, u64, &Pair<'_>)>> = BTreeMap::new();
    for k in keys.values() {
        for p in &k.attempts {
            if let (Some(a), Some(c)) = (p.response().and_then(Ack::parse), p.complete_index()) {
                acked_revs.entry(k.record.as_str()).or_default().push((c, a.rev, p));
            }
        }
    }
    for list in acked_revs.values_mut() {
        list.sort_by_key(|(c, _, _)| *c);
    }
    for r in reads.iter() {
        let at = format!("read of {} on node {}", r.record, r.node);
        let view = &r.view;
        for id in repeated(&view.notes) {
            v.flag("duplicate", r.pair.indexes(), format!("{at}: note {id} is held twice"));
        }
        // Its events: consecutive from `events_after + 1`, through its rev.
        let revs: Vec<u64> = view.events.iter().map(|e| e.rev).collect();
        let consecutive = revs.iter().enumerate().all(|(i, rev)| *rev == view.events_after + 1 + i as u64);
        let through = revs.last().copied().unwrap_or(view.events_after) >= view.rev;
        if !consecutive || !through || view.events_after > view.rev {
            v.flag(
                "rev_order",
                r.pair.indexes(),
                format!("{at}: at rev {} the events after {} are {revs:?}", view.rev, view.events_after),
            );
        }
        // Real time: no read is behind a patch acknowledged before it began.
        if let Some(list) = acked_revs.get(r.record.as_str()) {
            let before = list.iter().take_while(|(c, _, _)| *c < r.pair.invoke_index());
            if let Some((_, rev, p)) = before.max_by_key(|(_, rev, _)| *rev)
                && *rev > view.rev
            {
                v.flag(
                    "stale_read",
                    both(p, &r.pair),
                    format!("{at}: read rev {} after a patch was acknowledged as rev {rev} (L5)", view.rev),
                );
            }
        }
        // The same node's final read holds everything this read saw, the same way.
        let Some(f) = final_of.get(&(r.node.as_str(), r.record.as_str())) else { continue };
        let expected: BTreeSet<(&str, u64)> =
            f.view.notes.iter().filter(|(_, a)| *a <= view.rev).map(|(id, a)| (id.as_str(), *a)).collect();
        let got: BTreeSet<(&str, u64)> = view.notes.iter().map(|(id, a)| (id.as_str(), *a)).collect();
        if got != expected {
            let missing: Vec<_> = expected.difference(&got).collect();
            let extra: Vec<_> = got.difference(&expected).collect();
            v.flag(
                "read_mismatch",
                both(&r.pair, &f.pair),
                format!(
                    "{at}: at rev {} its notes differ from the final read's up to that rev: missing {missing:?}, extra {extra:?}",
                    view.rev
                ),
            );
        }
        let finals_events: BTreeMap<u64, &Event> = f.view.events.iter().map(|e| (e.rev, e)).collect();
        if let Some(e) = view.events.iter().find(|e| finals_events.get(&e.rev).is_none_or(|g| *g != *e)) {
            v.flag(
                "read_mismatch",
                both(&r.pair, &f.pair),
                format!("{at}: event {e:?} differs from the final read's {:?}", finals_events.get(&e.rev)),
            );
        }
    }
}
