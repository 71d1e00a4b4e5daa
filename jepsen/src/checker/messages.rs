//! The `messages` checker: sent messages survive exactly once, and mailbox cursors read every entry
//! once, in order (COORDINATION §3.3, §3.5; `docs/coordination.md`, "Messages, publish and
//! subscribe"; L1, L3).
//!
//! **Model.** A `Send` posts one entry into a thread (to nobody, or asking named members, who are
//! then its responders); a thread's entries are numbered 1, 2, 3, ... and never change. The same
//! request under the same idempotency key posts nothing new and returns the first receipt (L3).
//! `GetMailbox(after)` returns the entries after the cursor `after`, in order, and `next_after` to
//! continue from; with `asked_me` only the entries that ask the reader, from a bounded scan whose
//! `next_after` is where the scan stopped. A traversal from any cursor omits nothing and repeats
//! nothing.
//!
//! Every message's content is the unique id of the op that sent it.
//!
//! **What it proves.** On every node's final read (the whole thread, paged through `GetMailbox`):
//!
//! - `lost`: an acknowledged send is absent.
//! - `duplicate`: one op id (or one idempotency key) has more than one entry.
//! - `unexpected`: an entry names no send; `failed_present`: every attempt of its send definitely
//!   failed.
//! - `entry_mismatch`: an acknowledged send's entry does not hold its message;
//!   `replay_mismatch`: acknowledgments of one key (the first send and its replays) name different
//!   entries.
//! - `ask_mismatch`: an entry's responders (or an acknowledgment's) are not the members the send
//!   asked.
//! - `divergence`: two nodes' final reads differ.
//!
//! On every recorded mailbox read (each page: its cursor `after`, the seqs and message ids it
//! returned, its `next_after`), compared with the final read of the same node (entries never
//! change, so the final read holds everything an earlier read could see):
//!
//! - `mailbox_gap`: an entry after the cursor that the page should have returned is missing: the
//!   page is not exactly the thread's (filtered) entries after its cursor, up to `next_after` or as
//!   far as it read. A later read that starts from an earlier read's `next_after` is checked the
//!   same way, so a cursor that skips entries shows here. Also a final read whose seqs are not
//!   `1..=n`.
//! - `mailbox_duplicate`: a read returns one seq or message twice, or an entry at or before its
//!   cursor.
//! - `mailbox_mismatch`: a page shows an entry the final read does not hold there (another message,
//!   a seq past the end, an entry that does not ask the reader under `asked_me`).
//! - `mailbox_cursor`: `next_after` does not move past the cursor, or is behind the page's last
//!   entry.
//!
//! **History schema.**
//!
//! | f | invoke value | ok value |
//! |---|---|---|
//! | `send` (op `idem`: the client's key) | `{"id", "thread", "agent", "to": [asked members; empty: nobody], "replay"?}` | `{"entry", "responders", "replayed"?}` |
//! | `mailbox` | `{"thread", "agent", "filter": "all" \| "asked_me", "after"}` | `{"pages": [{"after", "seqs": [..], "ids": [..], "next_after": n \| null}]}` |
//! | `final-read` | `{"thread"}` | `{"thread", "entries": [{"seq", "id", "author"?, "responders"?}]}` |

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::Verdict;
use super::common::{Outcomes, no_final_read};
use super::val::{str_field, u64_field};
use crate::history::{FINAL_READ, History, Pair};

/// `f` of a send.
pub const SEND: &str = "send";
/// `f` of a mailbox read.
pub const MAILBOX: &str = "mailbox";
/// The `filter` of a mailbox read that keeps the entries asking the reader.
pub const ASKED_ME: &str = "asked_me";

/// Anomaly kinds this checker reports.
pub const KINDS: &[&str] = &[
    "lost",
    "duplicate",
    "unexpected",
    "failed_present",
    "entry_mismatch",
    "replay_mismatch",
    "ask_mismatch",
    "divergence",
    "mailbox_gap",
    "mailbox_duplicate",
    "mailbox_mismatch",
    "mailbox_cursor",
];

/// Options of the messages checker.
pub use super::common::RequireFinalRead as Options;

/// One logical send: every attempt under one idempotency key.
struct Send<'h> {
    key: String,
    id: String,
    thread: String,
    to: BTreeSet<String>,
    attempts: Vec<Pair<'h>>,
}

impl Send<'_> {
    fn name(&self) -> String {
        format!("send {} (key {})", self.id, self.key)
    }
    fn witness(&self) -> Vec<u64> {
        self.attempts.iter().flat_map(Pair::indexes).collect()
    }
}

struct Entry {
    seq: u64,
    id: String,
    responders: Option<BTreeSet<String>>,
}

/// One node's final read of one thread.
struct Final<'h> {
    pair: Pair<'h>,
    node: String,
    thread: String,
    entries: Vec<Entry>,
    /// seq → position in `entries` (the first, when a seq repeats).
    by_seq: BTreeMap<u64, usize>,
}

struct Page {
    after: u64,
    items: Vec<(u64, String)>,
    next_after: Option<u64>,
}

struct Read<'h> {
    pair: Pair<'h>,
    node: String,
    thread: String,
    agent: String,
    asked_me: bool,
    pages: Vec<Page>,
}

fn strings(v: Option<&Value>) -> Option<Vec<String>> {
    v?.as_array()?.iter().map(|x| x.as_str().map(str::to_owned)).collect()
}

fn parse_final<'h>(p: Pair<'h>) -> Option<Final<'h>> {
    let resp = p.response()?;
    let thread = str_field(p.request(), "thread").or_else(|| str_field(resp, "thread"))?.to_owned();
    let entries = resp
        .get("entries")?
        .as_array()?
        .iter()
        .map(|e| {
            Some(Entry {
                seq: u64_field(e, "seq")?,
                id: str_field(e, "id")?.to_owned(),
                responders: strings(e.get("responders")).map(|r| r.into_iter().collect()),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let mut by_seq = BTreeMap::new();
    for (i, e) in entries.iter().enumerate() {
        by_seq.entry(e.seq).or_insert(i);
    }
    Some(Final { pair: p, node: p.node().unwrap_or("?").to_owned(), thread, entries, by_seq })
}

fn parse_read<'h>(p: Pair<'h>) -> Option<Read<'h>> {
    let req = p.request();
    let resp = p.response()?;
    let pages = resp
        .get("pages")?
        .as_array()?
        .iter()
        .map(|pg| {
            let seqs: Vec<u64> = pg.get("seqs")?.as_array()?.iter().map(Value::as_u64).collect::<Option<_>>()?;
            let ids = strings(pg.get("ids"))?;
            (seqs.len() == ids.len()).then_some(())?;
            Some(Page {
                after: u64_field(pg, "after")?,
                items: seqs.into_iter().zip(ids).collect(),
                next_after: u64_field(pg, "next_after"),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Read {
        pair: p,
        node: p.node().unwrap_or("?").to_owned(),
        thread: str_field(req, "thread")?.to_owned(),
        agent: str_field(req, "agent").unwrap_or_default().to_owned(),
        asked_me: str_field(req, "filter") == Some(ASKED_ME),
        pages,
    })
}

fn both(a: &Pair<'_>, b: &Pair<'_>) -> Vec<u64> {
    let mut w = a.indexes();
    w.extend(b.indexes());
    w
}

/// Checks a messages history. See the module docs.
pub fn check(history: &History, opts: &Options) -> Verdict {
    let mut v = Verdict::new("messages", KINDS);
    let mut sends: BTreeMap<String, Send<'_>> = BTreeMap::new();
    let mut finals: Vec<Final<'_>> = Vec::new();
    let mut reads: Vec<Read<'_>> = Vec::new();
    let mut outcomes = Outcomes::default();
    let (mut replays, mut asked) = (0, 0);

    for p in history.pairs() {
        match p.f() {
            SEND => {
                let req = p.request();
                let (Some(id), Some(thread)) = (str_field(req, "id"), str_field(req, "thread")) else {
                    v.undecided("malformed", p.indexes(), "a send must name its id and thread");
                    continue;
                };
                let Some(key) = p.idem() else {
                    v.undecided("malformed", p.indexes(), format!("send {id} carries no idempotency key"));
                    continue;
                };
                let to: BTreeSet<String> = strings(req.get("to")).unwrap_or_default().into_iter().collect();
                outcomes.tally(&p);
                if req.get("replay").and_then(Value::as_bool) == Some(true) {
                    replays += 1;
                }
                let s = sends.entry(key.to_owned()).or_insert_with(|| Send {
                    key: key.to_owned(),
                    id: id.to_owned(),
                    thread: thread.to_owned(),
                    to: to.clone(),
                    attempts: Vec::new(),
                });
                if s.id != id || s.thread != thread || s.to != to {
                    v.undecided(
                        "malformed",
                        p.indexes(),
                        format!("key {key} is used for two sends ({} and {id})", s.id),
                    );
                    continue;
                }
                if s.attempts.is_empty() && !to.is_empty() {
                    asked += 1;
                }
                s.attempts.push(p);
            }
            MAILBOX => {
                if !p.is_ok() {
                    continue;
                }
                match parse_read(p) {
                    Some(r) => reads.push(r),
                    None => v.undecided(
                        "malformed",
                        p.indexes(),
                        "a mailbox read must name its thread and list pages (after, seqs, ids, next_after)",
                    ),
                }
            }
            FINAL_READ => {
                if v.final_read_failed(&p) {
                    continue;
                }
                match parse_final(p) {
                    Some(f) => finals.push(f),
                    None => v.undecided(
                        "malformed",
                        p.indexes(),
                        "a final read must name its thread and list entries (seq, id)",
                    ),
                }
            }
            _ => {}
        }
    }
    no_final_read(&mut v, finals.len(), opts.require_final_read, "survival and cursors are not shown");

    let key_of: BTreeMap<&str, &Send<'_>> = sends.values().map(|s| (s.id.as_str(), s)).collect();

    // Acknowledgments of one key name one entry, and ask whom the send asked.
    for s in sends.values() {
        let acks: Vec<(&Pair<'_>, Option<u64>)> = s
            .attempts
            .iter()
            .filter(|p| p.is_ok())
            .map(|p| (p, p.response().and_then(|r| u64_field(r, "entry"))))
            .collect();
        if let Some((first, e0)) = acks.first()
            && let Some((other, e)) = acks.iter().skip(1).find(|(_, e)| e != e0)
        {
            v.flag(
                "replay_mismatch",
                both(first, other),
                format!("{}: acknowledged with entry {e0:?} and, replayed, with entry {e:?}; a replay returns the first receipt", s.name()),
            );
        }
        for (p, _) in &acks {
            let Some(r) = p.response().and_then(|r| strings(r.get("responders"))) else { continue };
            let r: BTreeSet<String> = r.into_iter().collect();
            if r != s.to {
                v.flag(
                    "ask_mismatch",
                    p.indexes(),
                    format!("{}: acknowledged with responders {r:?}, but it asked {:?}", s.name(), s.to),
                );
            }
        }
    }

    // Each node's final read.
    for f in &finals {
        let at = format!("thread {} on node {}", f.thread, f.node);
        let seqs: Vec<u64> = f.entries.iter().map(|e| e.seq).collect();
        let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
        if seqs != expected {
            let set: BTreeSet<u64> = seqs.iter().copied().collect();
            if set.len() < seqs.len() {
                v.flag("mailbox_duplicate", f.pair.indexes(), format!("{at}: the final read repeats seqs: {seqs:?}"));
            } else {
                let top = seqs.iter().copied().max().unwrap_or(0);
                let missing: Vec<u64> = (1..=top).filter(|s| !set.contains(s)).collect();
                v.flag(
                    "mailbox_gap",
                    f.pair.indexes(),
                    format!("{at}: the final read is not the entries 1..={} in order; missing {missing:?}", seqs.len()),
                );
            }
        }
        let mut by_key: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
        for e in &f.entries {
            match key_of.get(e.id.as_str()).filter(|s| s.thread == f.thread) {
                None => v.flag(
                    "unexpected",
                    f.pair.indexes(),
                    format!("{at}: entry {} holds {:?}, which no send named", e.seq, e.id),
                ),
                Some(s) => {
                    by_key.entry(s.key.as_str()).or_default().push(e.seq);
                    let mut w = s.witness();
                    w.extend(f.pair.indexes());
                    if s.attempts.iter().all(Pair::is_fail) {
                        v.flag(
                            "failed_present",
                            w.clone(),
                            format!("{at}: entry {} holds {}, whose every attempt definitely failed", e.seq, s.name()),
                        );
                    }
                    if let Some(r) = &e.responders
                        && *r != s.to
                    {
                        v.flag(
                            "ask_mismatch",
                            w,
                            format!("{at}: entry {} ({}) asks {r:?}, but the send asked {:?}", e.seq, s.name(), s.to),
                        );
                    }
                }
            }
        }
        for s in sends.values().filter(|s| s.thread == f.thread) {
            let mut w = s.witness();
            w.extend(f.pair.indexes());
            let held = by_key.get(s.key.as_str()).map(Vec::as_slice).unwrap_or_default();
            if held.len() > 1 {
                v.flag(
                    "duplicate",
                    w.clone(),
                    format!("{at}: {} has {} entries {held:?}; one key, one entry (L3)", s.name(), held.len()),
                );
            }
            let acked: Vec<(&Pair<'_>, u64)> = s
                .attempts
                .iter()
                .filter(|p| p.is_ok())
                .filter_map(|p| Some((p, p.response().and_then(|r| u64_field(r, "entry"))?)))
                .collect();
            if held.is_empty() && s.attempts.iter().any(Pair::is_ok) {
                v.flag("lost", w, format!("{at}: {} was acknowledged but is not in the thread", s.name()));
                continue;
            }
            for (p, entry) in acked {
                let holds = f.by_seq.get(&entry).map(|i| f.entries[*i].id.as_str());
                if holds != Some(s.id.as_str()) {
                    let mut w = p.indexes();
                    w.extend(f.pair.indexes());
                    v.flag(
                        "entry_mismatch",
                        w,
                        format!("{at}: {} was acknowledged as entry {entry}, which holds {holds:?}", s.name()),
                    );
                }
            }
        }
    }
    for (i, a) in finals.iter().enumerate() {
        for b in finals[i + 1..].iter().filter(|b| b.thread == a.thread) {
            let la: Vec<(u64, &str)> = a.entries.iter().map(|e| (e.seq, e.id.as_str())).collect();
            let lb: Vec<(u64, &str)> = b.entries.iter().map(|e| (e.seq, e.id.as_str())).collect();
            if la != lb {
                let first = la.iter().zip(&lb).find(|(x, y)| x != y);
                v.flag(
                    "divergence",
                    both(&a.pair, &b.pair),
                    format!(
                        "thread {}: node {} holds {} entries and node {} {}; first difference {first:?}",
                        a.thread,
                        a.node,
                        la.len(),
                        b.node,
                        lb.len()
                    ),
                );
            }
        }
    }

    // Every mailbox read against the final read of its node.
    let (mut pages_checked, mut items_checked) = (0, 0);
    for r in &reads {
        let Some(f) = finals
            .iter()
            .find(|f| f.thread == r.thread && f.node == r.node)
            .or_else(|| finals.iter().find(|f| f.thread == r.thread))
        else {
            continue;
        };
        check_read(&mut v, r, f);
        pages_checked += r.pages.len() as u64;
        items_checked += r.pages.iter().map(|p| p.items.len() as u64).sum::<u64>();
    }

    v.count("sends", sends.len() as u64);
    outcomes.count(&mut v, Some("attempts"));
    v.count("replays", replays);
    v.count("asked", asked);
    v.count("mailbox_reads", reads.len() as u64);
    v.count("mailbox_pages", pages_checked);
    v.count("mailbox_items", items_checked);
    v.count("final_reads", finals.len() as u64);
    v
}

/// One mailbox read: no duplicate anywhere in it; each page exactly the final read's (filtered)
/// entries after its cursor.
fn check_read(v: &mut Verdict, r: &Read<'_>, f: &Final<'_>) {
    let at = format!(
        "mailbox read {} by {} on node {} ({})",
        r.pair.invoke_index(),
        if r.agent.is_empty() { "?" } else { &r.agent },
        r.node,
        if r.asked_me { "asked_me" } else { "all" }
    );
    let mut w = r.pair.indexes();
    w.extend(f.pair.indexes());

    let mut seen_seqs: BTreeMap<u64, u64> = BTreeMap::new();
    let mut seen_ids: BTreeMap<&str, u64> = BTreeMap::new();
    let mut dups: Vec<String> = Vec::new();
    for p in &r.pages {
        for (seq, id) in &p.items {
            if let Some(prev) = seen_seqs.insert(*seq, p.after) {
                dups.push(format!("seq {seq} twice (pages after {prev} and {})", p.after));
            } else if let Some(prev) = seen_ids.insert(id.as_str(), *seq) {
                dups.push(format!("message {id} at seqs {prev} and {seq}"));
            }
            if *seq <= p.after {
                dups.push(format!("seq {seq} at or before the page's cursor {}", p.after));
            }
        }
    }
    if !dups.is_empty() {
        v.flag("mailbox_duplicate", w.clone(), format!("{at}: {}", dups.join("; ")));
    }

    let wanted = |e: &Entry| !r.asked_me || e.responders.as_ref().is_some_and(|rs| rs.contains(&r.agent));
    for p in &r.pages {
        let here = format!("{at}, page after {}", p.after);
        let last = p.items.iter().map(|(s, _)| *s).max();
        if let Some(n) = p.next_after {
            if n <= p.after {
                v.flag("mailbox_cursor", w.clone(), format!("{here}: next_after {n} does not move past the cursor"));
            } else if last.is_some_and(|l| n < l) {
                v.flag(
                    "mailbox_cursor",
                    w.clone(),
                    format!("{here}: next_after {n} is behind the page's last entry {}", last.unwrap_or(0)),
                );
            }
        }
        // How far the page answers for: up to next_after, else as far as it read.
        let end = p.next_after.or(last).unwrap_or(p.after);
        let expected: Vec<u64> =
            f.entries.iter().filter(|e| e.seq > p.after && e.seq <= end && wanted(e)).map(|e| e.seq).collect();
        let got: BTreeSet<u64> = p.items.iter().map(|(s, _)| *s).filter(|s| *s > p.after).collect();
        let missing: Vec<u64> = expected.iter().copied().filter(|s| !got.contains(s)).collect();
        if !missing.is_empty() {
            v.flag(
                "mailbox_gap",
                w.clone(),
                format!(
                    "{here}: returned {:?} (next_after {:?}) but the thread holds {missing:?} there too: a gap",
                    p.items.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
                    p.next_after
                ),
            );
        }
        let mut wrong: Vec<String> = Vec::new();
        let mut prev = p.after;
        for (seq, id) in p.items.iter().filter(|(s, _)| *s > p.after) {
            if *seq < prev {
                wrong.push(format!("seq {seq} after seq {prev}: out of order"));
            }
            prev = prev.max(*seq);
            match f.by_seq.get(seq).map(|i| &f.entries[*i]) {
                None => wrong.push(format!("seq {seq} ({id}) is not in node {}'s final read", f.node)),
                Some(e) if e.id != *id => wrong.push(format!("seq {seq} shows {id} but holds {}", e.id)),
                Some(e) if !wanted(e) => wrong.push(format!("seq {seq} ({id}) does not ask {}", r.agent)),
                Some(_) => {}
            }
        }
        if !wrong.is_empty() {
            v.flag("mailbox_mismatch", w.clone(), format!("{here}: {}", wrong.join("; ")));
        }
    }
}
