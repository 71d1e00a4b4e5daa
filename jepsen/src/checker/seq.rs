//! The `seq` checker: per-thread entry sequences are gap-free, prefix-consistent and respect real
//! time (§6.3, L1, L5). It is the list-append subset of Elle for single-object appends.
//!
//! **Model.** Each thread is an append-only list. Posting appends an entry and assigns the next
//! `seq` (1, 2, 3, ...); entries are never edited or deleted (§6.3), so every read of a thread is
//! a prefix of one total order, the same on every node.
//!
//! **What it proves**, per thread:
//!
//! - `gap`, `dup_seq`, `misordered`: a read's seqs are not exactly `after+1 ..= after+n` in order.
//! - `dup_value`: one entry id appears twice in a read.
//! - `incompatible_order`: two reads (from any nodes) disagree about the entry at some seq, or put
//!   one entry at two seqs: same seq must mean same entry id, author and idempotency key.
//! - `seq_mismatch`: an acknowledged append's seq does not hold its entry in the reads, or two
//!   acknowledged appends got the same seq.
//! - `entry_mismatch`: a read shows an entry with another author or idempotency key than its
//!   append had.
//! - `realtime`: append A was acknowledged before append B was invoked, yet `seq(A) ≥ seq(B)`.
//! - `stale_read`: a read begun after an append was acknowledged does not show it; `lost` when
//!   that read is a final read.
//! - `future_read`: a read shows an entry whose append was invoked only after the read completed.
//! - `unexpected`, `failed_present`: a read shows an entry nobody appended, or whose every append
//!   definitely failed.
//!
//! Not covered yet: multi-object combos (post plus assign) and Elle's G0/G1c/G2 cycle search
//! (plan §5.5 item 5).
//!
//! **History schema.**
//!
//! | f | invoke value | ok value |
//! |---|---|---|
//! | `append` | `{"thread", "id", "author"?}`, op `idem` | adds `"seq"` |
//! | `read` / `final-read` | `{"thread", "after"?}` (entries after this seq; default 0) | `{"entries": [{"seq", "id", "author"?, "idem"?}, ...]}` |

use std::collections::{BTreeMap, HashMap};

use super::Verdict;
use super::common::{Outcomes, no_final_read};
use super::val::{ident_field, str_field, u64_field};
use crate::history::{FINAL_READ, History, Pair, READ};

/// `f` of a post.
pub const APPEND: &str = "append";

/// Anomaly kinds this checker reports.
pub const KINDS: &[&str] = &[
    "gap",
    "dup_seq",
    "misordered",
    "dup_value",
    "incompatible_order",
    "seq_mismatch",
    "entry_mismatch",
    "realtime",
    "stale_read",
    "lost",
    "future_read",
    "unexpected",
    "failed_present",
];

/// Options of the seq checker.
pub use super::common::RequireFinalRead as Options;

/// An entry as a read shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seen {
    seq: u64,
    id: String,
    author: Option<String>,
    idem: Option<String>,
}

impl std::fmt::Display for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let or_dash = |s: &Option<String>| s.clone().unwrap_or_else(|| "-".to_owned());
        write!(f, "{} (author {}, idem {})", self.id, or_dash(&self.author), or_dash(&self.idem))
    }
}

struct Append<'h> {
    pair: Pair<'h>,
    id: String,
    author: Option<String>,
    /// The seq the server acknowledged.
    acked: Option<u64>,
}

struct Read<'h> {
    pair: Pair<'h>,
    after: u64,
    entries: Vec<Seen>,
}

#[derive(Default)]
struct Thread<'h> {
    appends: Vec<Append<'h>>,
    reads: Vec<Read<'h>>,
}

/// Checks a seq history. See the module docs.
pub fn check(history: &History, opts: &Options) -> Verdict {
    let mut v = Verdict::new("seq", KINDS);
    let mut threads: BTreeMap<String, Thread<'_>> = BTreeMap::new();
    let mut outcomes = Outcomes::default();
    let (mut reads, mut finals) = (0u64, 0u64);

    for p in history.pairs() {
        let req = p.request();
        match p.f() {
            APPEND => {
                let (Some(thread), Some(id)) = (str_field(req, "thread"), ident_field(req, "id")) else {
                    v.undecided("malformed", p.indexes(), "an append must name its thread and entry id");
                    continue;
                };
                outcomes.tally(&p);
                let acked = p.response().and_then(|r| u64_field(r, "seq"));
                if p.is_ok() && acked.is_none() {
                    v.undecided("malformed", p.indexes(), "an acknowledged append must return its seq");
                }
                let author = str_field(req, "author").map(str::to_owned);
                threads.entry(thread.to_owned()).or_default().appends.push(Append { pair: p, id, author, acked });
            }
            READ | FINAL_READ => {
                let Some(resp) = p.response() else { continue };
                let thread = str_field(req, "thread").or_else(|| str_field(resp, "thread"));
                let entries = resp.get("entries").and_then(|e| e.as_array()).and_then(|list| {
                    list.iter()
                        .map(|e| {
                            Some(Seen {
                                seq: u64_field(e, "seq")?,
                                id: ident_field(e, "id")?,
                                author: str_field(e, "author").map(str::to_owned),
                                idem: str_field(e, "idem").map(str::to_owned),
                            })
                        })
                        .collect::<Option<Vec<_>>>()
                });
                let (Some(thread), Some(entries)) = (thread, entries) else {
                    v.undecided(
                        "malformed",
                        p.indexes(),
                        "a read must name its thread and return entries with seq and id",
                    );
                    continue;
                };
                reads += 1;
                if p.f() == FINAL_READ {
                    finals += 1;
                }
                let after = u64_field(req, "after").unwrap_or(0);
                threads.entry(thread.to_owned()).or_default().reads.push(Read { pair: p, after, entries });
            }
            _ => {}
        }
    }

    let mut max_seq = 0;
    for (name, t) in &threads {
        max_seq = max_seq.max(check_thread(&mut v, name, t));
    }
    no_final_read(
        &mut v,
        finals as usize,
        opts.require_final_read,
        "the survival of acknowledged entries is not shown",
    );

    v.count("threads", threads.len() as u64);
    outcomes.count(&mut v, Some("appends"));
    v.count("reads", reads);
    v.count("final_reads", finals);
    v.count("max_seq", max_seq);
    v
}

fn pair_witness(a: &Pair<'_>, b: &Pair<'_>) -> Vec<u64> {
    let mut w = a.indexes();
    w.extend(b.indexes());
    w
}

/// All checks for one thread; returns the highest seq seen.
fn check_thread(v: &mut Verdict, thread: &str, t: &Thread<'_>) -> u64 {
    // 1. Each read on its own: exactly after+1 ..= after+n, in order, each id once.
    for r in &t.reads {
        let seqs: Vec<u64> = r.entries.iter().map(|e| e.seq).collect();
        let expected: Vec<u64> = (r.after + 1..=r.after + seqs.len() as u64).collect();
        if seqs != expected {
            let mut sorted = seqs.clone();
            sorted.sort_unstable();
            let dups: Vec<u64> = sorted.windows(2).filter(|w| w[0] == w[1]).map(|w| w[0]).collect();
            let (kind, what) = if !dups.is_empty() {
                ("dup_seq", format!("seqs {dups:?} appear more than once"))
            } else if sorted != expected {
                let missing: Vec<u64> = (r.after + 1..=sorted.last().copied().unwrap_or(0))
                    .filter(|s| sorted.binary_search(s).is_err())
                    .collect();
                ("gap", format!("seqs {missing:?} are missing (entries must be gap-free from {})", r.after + 1))
            } else {
                ("misordered", "entries are not in seq order".to_owned())
            };
            v.flag(kind, r.pair.indexes(), format!("thread {thread}: read {}: {what} (§6.3)", r.pair.invoke_index()));
        }
        let mut ids: HashMap<&str, u64> = HashMap::new();
        for e in &r.entries {
            if let Some(first) = ids.insert(e.id.as_str(), e.seq) {
                v.flag(
                    "dup_value",
                    r.pair.indexes(),
                    format!("thread {thread}: entry {} appears at seqs {first} and {} of one read", e.id, e.seq),
                );
            }
        }
    }

    // 2. Prefix consistency across reads and nodes: one entry per seq, one seq per entry.
    let mut canon: BTreeMap<u64, (&Seen, &Read<'_>)> = BTreeMap::new();
    let mut position: HashMap<&str, (u64, &Read<'_>)> = HashMap::new();
    for r in &t.reads {
        for e in &r.entries {
            let diverged = match canon.get(&e.seq) {
                Some((known, by)) if *known != e => Some((
                    format!(
                        "seq {} is {known} in read {} (node {}) but {e} in read {} (node {})",
                        e.seq,
                        by.pair.invoke_index(),
                        by.pair.node().unwrap_or("?"),
                        r.pair.invoke_index(),
                        r.pair.node().unwrap_or("?")
                    ),
                    by.pair,
                )),
                Some(_) => None,
                None => {
                    canon.insert(e.seq, (e, r));
                    None
                }
            };
            let moved = match position.get(e.id.as_str()) {
                Some((seq, by)) if *seq != e.seq => Some((
                    format!(
                        "entry {} is at seq {seq} in read {} but at seq {} in read {}",
                        e.id,
                        by.pair.invoke_index(),
                        e.seq,
                        r.pair.invoke_index()
                    ),
                    by.pair,
                )),
                Some(_) => None,
                None => {
                    position.insert(e.id.as_str(), (e.seq, r));
                    None
                }
            };
            if let Some((message, other)) = diverged.or(moved) {
                v.flag(
                    "incompatible_order",
                    pair_witness(&other, &r.pair),
                    format!("thread {thread}: {message}; reads must be prefixes of one order"),
                );
                break; // one report per divergent read
            }
        }
    }

    // 3. Acknowledged positions.
    let mut by_seq: HashMap<u64, &Append<'_>> = HashMap::new();
    for a in t.appends.iter().filter(|a| a.pair.is_ok()) {
        let Some(s) = a.acked else { continue };
        if let Some(other) = by_seq.insert(s, a) {
            v.flag(
                "seq_mismatch",
                pair_witness(&other.pair, &a.pair),
                format!("thread {thread}: appends of {} and {} were both acknowledged with seq {s}", other.id, a.id),
            );
        }
        if let Some((seen_at, r)) = position.get(a.id.as_str()).filter(|(seen_at, _)| *seen_at != s) {
            v.flag(
                "seq_mismatch",
                pair_witness(&a.pair, &r.pair),
                format!(
                    "thread {thread}: append of {} was acknowledged with seq {s}, but reads show it at seq {seen_at}",
                    a.id
                ),
            );
        } else if let Some((seen, r)) = canon.get(&s).filter(|(seen, _)| seen.id != a.id) {
            v.flag(
                "seq_mismatch",
                pair_witness(&a.pair, &r.pair),
                format!(
                    "thread {thread}: append of {} was acknowledged with seq {s}, but reads hold {} there",
                    a.id, seen.id
                ),
            );
        }
    }
    let by_id: HashMap<&str, Vec<&Append<'_>>> = t.appends.iter().fold(HashMap::new(), |mut m, a| {
        m.entry(a.id.as_str()).or_default().push(a);
        m
    });
    for r in &t.reads {
        for e in &r.entries {
            let Some(appends) = by_id.get(e.id.as_str()) else {
                v.flag(
                    "unexpected",
                    r.pair.indexes(),
                    format!("thread {thread}: seq {} holds entry {}, which was never appended", e.seq, e.id),
                );
                continue;
            };
            let done = r.pair.complete_index().unwrap_or(u64::MAX);
            if appends.iter().all(|a| a.pair.is_fail()) {
                v.flag(
                    "failed_present",
                    pair_witness(&appends[0].pair, &r.pair),
                    format!("thread {thread}: entry {} is present although its append failed (no effect)", e.id),
                );
            } else if appends.iter().all(|a| a.pair.invoke_index() > done) {
                v.flag(
                    "future_read",
                    pair_witness(&appends[0].pair, &r.pair),
                    format!("thread {thread}: a read shows entry {} before its append was invoked", e.id),
                );
            }
            let a = appends[0];
            let idem = a.pair.idem();
            if (e.author.is_some() && a.author.is_some() && e.author != a.author)
                || (e.idem.is_some() && idem.is_some() && e.idem.as_deref() != idem)
            {
                v.flag(
                    "entry_mismatch",
                    pair_witness(&a.pair, &r.pair),
                    format!(
                        "thread {thread}: entry {e} does not match its append (author {}, idem {})",
                        a.author.as_deref().unwrap_or("-"),
                        idem.unwrap_or("-")
                    ),
                );
            }
        }
    }

    // The seq each append took effect at: acknowledged, else where reads put it.
    let effective = |a: &Append<'_>| a.acked.or_else(|| position.get(a.id.as_str()).map(|(s, _)| *s));

    // 4. Real time between appends: acknowledged before invoked means a lower seq (L5).
    let mut done: Vec<(&Append<'_>, u64, u64)> = t
        .appends
        .iter()
        .filter(|a| a.pair.is_ok())
        .filter_map(|a| Some((a, a.pair.settled_index()?, effective(a)?)))
        .collect();
    done.sort_by_key(|(_, at, _)| *at);
    let mut started: Vec<(&Append<'_>, u64)> =
        t.appends.iter().filter(|a| a.pair.may_have_happened()).filter_map(|a| Some((a, effective(a)?))).collect();
    started.sort_by_key(|(a, _)| a.pair.invoke_index());
    let mut highest: Option<(&Append<'_>, u64)> = None;
    let mut next = 0;
    for (b, sb) in started {
        while next < done.len() && done[next].1 < b.pair.invoke_index() {
            let (a, _, sa) = done[next];
            if highest.is_none_or(|(_, h)| sa > h) {
                highest = Some((a, sa));
            }
            next += 1;
        }
        if let Some((a, sa)) = highest.filter(|(_, sa)| *sa >= sb) {
            v.flag(
                "realtime",
                pair_witness(&a.pair, &b.pair),
                format!(
                    "thread {thread}: append of {} (seq {sa}) was acknowledged before append of {} was invoked, \
                     which got seq {sb} (L5)",
                    a.id, b.id
                ),
            );
        }
    }

    // 5. Real time between appends and reads.
    let shows = |r: &Read<'_>, id: &str, s: u64| {
        // Where a consistent read must hold it; scan only when it is not there.
        let at = usize::try_from(s - r.after - 1).ok().and_then(|i| r.entries.get(i));
        at.is_some_and(|e| e.id == id) || r.entries.iter().any(|e| e.id == id)
    };
    for r in &t.reads {
        for a in t.appends.iter().filter(|a| a.pair.is_ok() && a.pair.precedes(&r.pair)) {
            let Some(s) = effective(a) else { continue };
            if s > r.after && !shows(r, &a.id, s) {
                let kind = if r.pair.f() == FINAL_READ { "lost" } else { "stale_read" };
                v.flag(
                    kind,
                    pair_witness(&a.pair, &r.pair),
                    format!(
                        "thread {thread}: append of {} (seq {s}) was acknowledged before read {} (node {}) began, \
                         which does not show it",
                        a.id,
                        r.pair.invoke_index(),
                        r.pair.node().unwrap_or("?")
                    ),
                );
            }
        }
    }

    canon.keys().next_back().copied().unwrap_or(0)
}
