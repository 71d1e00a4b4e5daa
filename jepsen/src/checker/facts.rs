//! The `facts` checker: acknowledged writes survive (Jepsen's `set-full`; L1).
//!
//! **Model.** A grow-only set of unique facts. `add(x)` inserts `x`; reads return the whole set.
//! Facts are never removed (L1: "an action changes the present; it MUST NOT rewrite the past"),
//! so once a fact is *known* to exist (its add was acknowledged, or a read showed it) every read
//! that begins afterwards must show it.
//!
//! **What it proves**, per fact:
//!
//! - `lost`: known, then absent from a read that began afterwards and never seen again (by any
//!   read begun after that one completed). An acknowledged write did not survive: the classic
//!   fsync-before-ack or failover bug.
//! - `stale`: known, absent from a later read, but present again afterwards. With linearizable
//!   reads (the default) that is an anomaly; [`Options::allow_stale`] downgrades it to a count.
//! - `unexpected`: a read shows a fact for which no add was invoked before the read completed.
//! - `failed_present`: a read shows a fact whose every add definitely failed (`fail` means no
//!   effect).
//! - `divergence`: the final reads (one per node, after heal and quiescence) differ.
//! - `reused`: an entry number was given to two writes. The receipt of an acknowledged add names
//!   its entry number (`seq`): a read that shows another fact at that number, or two acknowledged
//!   adds with one number, mean a number was handed out again (a leader that lost acknowledged
//!   entries and reused their numbers, issue #33). Reads that carry no `seqs` are not compared.
//!
//! Counted, not flagged: `recovered` (facts whose adds were all indeterminate but which are
//! present), `never_read` (known facts that no later read could confirm).
//!
//! **History schema.** `add`: invoke `{"id"}`, ok `{"id", "seq"?}` (the receipt's entry number).
//! `read` / `final-read`: ok `{"ids": [id, ...], "seqs": [seq, ...]?}` (`seqs[i]` is the entry
//! number holding `ids[i]`). Ids are strings or integers.

use std::collections::{BTreeMap, HashSet};

use super::Verdict;
use super::common::Outcomes;
use super::val::{ident_field, ident_list, u64_field};
use crate::history::{FINAL_READ, History, Pair, READ};

/// `f` of an add.
pub const ADD: &str = "add";

/// Anomaly kinds this checker reports.
pub const KINDS: &[&str] = &["lost", "stale", "unexpected", "failed_present", "divergence", "reused"];

/// Options of the facts checker.
#[derive(Clone, Debug)]
pub struct Options {
    /// Count stale reads instead of flagging them (only for runs with stale-read mode on).
    pub allow_stale: bool,
    /// A history without any `final-read` is `Unknown` (it cannot show survival).
    pub require_final_read: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options { allow_stale: false, require_final_read: true }
    }
}

struct Read<'h> {
    pair: Pair<'h>,
    ids: HashSet<String>,
    /// The fact at each entry number, when the read names them.
    at: BTreeMap<u64, String>,
}

/// Checks a facts history. See the module docs.
pub fn check(history: &History, opts: &Options) -> Verdict {
    let mut v = Verdict::new("facts", KINDS);
    let mut adds: BTreeMap<String, Vec<Pair<'_>>> = BTreeMap::new();
    let mut reads: Vec<Read<'_>> = Vec::new();
    let mut outcomes = Outcomes::default();

    for p in history.pairs() {
        match p.f() {
            ADD => {
                let Some(id) = ident_field(p.request(), "id") else {
                    v.undecided("malformed", p.indexes(), "an add must carry an id");
                    continue;
                };
                outcomes.tally(&p);
                adds.entry(id).or_default().push(p);
            }
            READ | FINAL_READ => {
                let Some(resp) = p.response() else { continue };
                let Some(ids) = ident_list(resp, "ids") else {
                    v.undecided("malformed", p.indexes(), "a read must return its ids");
                    continue;
                };
                let mut at = BTreeMap::new();
                if let Some(seqs) = resp.get("seqs").and_then(|s| s.as_array()) {
                    for (id, seq) in ids.iter().zip(seqs) {
                        if let Some(seq) = seq.as_u64() {
                            at.insert(seq, id.clone());
                        }
                    }
                }
                reads.push(Read { pair: p, ids: ids.into_iter().collect(), at });
            }
            _ => {}
        }
    }

    // Reads showing facts nobody (possibly) added.
    for r in &reads {
        let Some(done) = r.pair.complete_index() else { continue };
        let mut ids: Vec<&String> = r.ids.iter().collect();
        ids.sort();
        for id in ids {
            let tried = adds.get(id).map(|ps| ps.iter().filter(|p| p.invoke_index() < done).collect::<Vec<_>>());
            match tried {
                Some(ps) if ps.iter().any(|p| p.may_have_happened()) => {}
                Some(ps) if !ps.is_empty() => {
                    let mut witness = r.pair.indexes();
                    witness.extend(ps.iter().flat_map(|p| p.indexes()));
                    v.flag(
                        "failed_present",
                        witness,
                        format!("fact {id} is present although every add of it failed (fail means no effect)"),
                    );
                }
                _ => v.flag("unexpected", r.pair.indexes(), format!("fact {id} is present but was never added")),
            }
        }
    }

    let (mut stale, mut recovered, mut never_read) = (0, 0, 0);
    for (id, ps) in &adds {
        let present: Vec<&Read<'_>> = reads.iter().filter(|r| r.ids.contains(id)).collect();
        if !present.is_empty() && !ps.iter().any(Pair::is_ok) && ps.iter().any(Pair::is_indeterminate) {
            recovered += 1;
        }
        // Known from: the first acknowledgment, or the first read that showed it.
        let known = ps
            .iter()
            .filter(|p| p.is_ok())
            .filter_map(Pair::complete_index)
            .chain(present.iter().filter_map(|r| r.pair.complete_index()))
            .min();
        let Some(known) = known else { continue };
        let last_present = present.iter().map(|r| r.pair.invoke_index()).max();
        let later: Vec<&Read<'_>> = reads.iter().filter(|r| r.pair.invoke_index() > known).collect();
        if later.is_empty() {
            never_read += 1;
            continue;
        }
        let witness_add = ps.iter().find(|p| p.is_ok()).map(Pair::indexes).unwrap_or_default();
        let absent: Vec<&&Read<'_>> = later.iter().filter(|r| !r.ids.contains(id)).collect();
        // The earliest absent read after which the fact never shows again proves the loss.
        let lost_at = absent.iter().find(|r| {
            let done = r.pair.complete_index().unwrap_or(u64::MAX);
            last_present.is_none_or(|lp| lp < done)
        });
        if let Some(r) = lost_at {
            let mut witness = witness_add.clone();
            witness.extend(r.pair.indexes());
            v.flag(
                "lost",
                witness,
                format!(
                    "fact {id} was known at op {known} but read {} (node {}) does not show it, nor does any later read",
                    r.pair.invoke_index(),
                    r.pair.node().unwrap_or("?")
                ),
            );
        } else if let Some(r) = absent.first() {
            stale += 1;
            if !opts.allow_stale {
                let mut witness = witness_add;
                witness.extend(r.pair.indexes());
                v.flag(
                    "stale",
                    witness,
                    format!(
                        "fact {id} was known at op {known}, missing from read {} (node {}), and present again later",
                        r.pair.invoke_index(),
                        r.pair.node().unwrap_or("?")
                    ),
                );
            }
        }
    }

    // Entry numbers: each acknowledged add's number holds its fact, and no other add's (issue #33).
    let mut numbered: BTreeMap<u64, (&String, &Pair<'_>)> = BTreeMap::new();
    let mut reused = 0;
    for (id, ps) in &adds {
        for p in ps.iter().filter(|p| p.is_ok()) {
            let Some(seq) = p.response().and_then(|r| u64_field(r, "seq")) else { continue };
            if let Some((other, q)) = numbered.get(&seq) {
                if *other != id {
                    reused += 1;
                    let mut witness = q.indexes();
                    witness.extend(p.indexes());
                    v.flag("reused", witness, format!("facts {other} and {id} were both acknowledged as entry {seq}"));
                }
                continue;
            }
            numbered.insert(seq, (id, p));
            // The first read that shows another fact at this number is the witness.
            if let Some((r, shown)) =
                reads.iter().find_map(|r| r.at.get(&seq).filter(|shown| *shown != id).map(|shown| (r, shown)))
            {
                reused += 1;
                let mut witness = p.indexes();
                witness.extend(r.pair.indexes());
                v.flag(
                    "reused",
                    witness,
                    format!(
                        "fact {id} was acknowledged as entry {seq}, but read {} (node {}) shows fact {shown} there",
                        r.pair.invoke_index(),
                        r.pair.node().unwrap_or("?")
                    ),
                );
            }
        }
    }

    // After heal and quiescence every node must answer the same (plan §5, final phase).
    let finals: Vec<&Read<'_>> = reads.iter().filter(|r| r.pair.f() == FINAL_READ).collect();
    if let Some(first) = finals.first() {
        for other in &finals[1..] {
            if other.ids != first.ids {
                let mut only_first: Vec<&String> = first.ids.difference(&other.ids).collect();
                let mut only_other: Vec<&String> = other.ids.difference(&first.ids).collect();
                only_first.sort();
                only_other.sort();
                let mut witness = first.pair.indexes();
                witness.extend(other.pair.indexes());
                v.flag(
                    "divergence",
                    witness,
                    format!(
                        "final reads disagree: node {} alone has {only_first:?}, node {} alone has {only_other:?}",
                        first.pair.node().unwrap_or("?"),
                        other.pair.node().unwrap_or("?")
                    ),
                );
            }
        }
    } else if opts.require_final_read {
        v.undecided("no_final_read", Vec::new(), "no final read: survival of acknowledged facts is not shown");
    }

    outcomes.count(&mut v, Some("attempts"));
    v.count("reads", reads.len() as u64);
    v.count("final_reads", finals.len() as u64);
    v.count("stale_facts", stale);
    v.count("recovered", recovered);
    v.count("never_read", never_read);
    v.count("reused", reused);
    v
}
