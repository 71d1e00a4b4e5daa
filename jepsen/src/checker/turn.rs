//! The `turn` checker: every turn read equals the obligations that the recorded facts determine at
//! that read's point, and no obligation ends twice (§8, L1, L5).
//!
//! **Model.** Obligations are derived from facts; they cannot be written directly (§8). The turn
//! of an agent is the set of its open obligations, ordered by when each arose. So given every
//! recorded fact (the final read exports them from a node, `AdminService/ExportFacts`) and, for
//! each turn read, the sequence number of the last action in the state it was served from
//! (`TurnPage.as_of_seq`), the turn can be recomputed with `kungfu-core` itself: fold the facts
//! up to that number into an empty state (`evolve`, the same function every replica applies) and
//! read the agent's turn (`read::turn`). The server's answer must be exactly that.
//!
//! **What it proves:**
//!
//! - `turn_mismatch`: a turn read (one page holding the whole turn) differs from the recomputed
//!   turn: an obligation missing, extra, in another order, or with another arose or due time.
//!   The next step is not compared: it depends on the time of the read (`wait` after the due).
//! - `ended_twice`: folding the facts, an obligation ends, and later is open again and ends again
//!   (L5: every obligation ends at most once). `reopened` is the same without the second ending.
//! - `unreplayable`: the exported facts do not fold (a fact the state cannot take), or a read's
//!   `as_of_seq` is beyond the last exported fact.
//!
//! **History schema.** `turn`: invoke `{"agent"}`; ok `{"agent", "as_of_seq", "items": [TurnItem
//! as the API's JSON]}` (only reads whose single page held the whole turn). `final-read`: ok
//! `{"facts": [hex of kungfu_core::codec bytes of a JournaledFact, ...]}` — one node's export.

use super::Verdict;
use crate::history::{FINAL_READ, History, Pair};
use kungfu_client::pb;
use kungfu_core::state::{MemState, StateExt, Tx};
use kungfu_core::{JournaledFact, Limits, Record};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Anomaly kinds this checker reports.
pub const KINDS: &[&str] = &["turn_mismatch", "ended_twice", "reopened", "unreplayable"];

/// Options of the turn checker.
#[derive(Clone, Debug)]
pub struct Options {
    /// A history without a final read of the facts is `Unknown`.
    pub require_final_read: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options { require_final_read: true }
    }
}

struct TurnRead<'h> {
    pair: Pair<'h>,
    agent: String,
    as_of: u64,
    items: Vec<Value>,
}

/// The identity of a turn item as the API shows it, without its time-dependent next step.
fn identity(item: &Value) -> Value {
    let mut v = item.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("next");
    }
    v
}

/// Checks a turn history. See the module docs.
pub fn check(history: &History, opts: &Options) -> Verdict {
    let mut v = Verdict::new("turn", KINDS);
    let mut reads = Vec::new();
    let mut facts_hex: Option<(Pair<'_>, Vec<String>)> = None;
    for p in history.pairs() {
        if !p.is_ok() {
            continue;
        }
        let Some(resp) = p.response() else { continue };
        match p.f() {
            "turn" => {
                let agent = resp.get("agent").and_then(Value::as_str).unwrap_or_default().to_string();
                let as_of = resp.get("as_of_seq").and_then(Value::as_u64).unwrap_or(0);
                let items = resp.get("items").and_then(Value::as_array).cloned().unwrap_or_default();
                reads.push(TurnRead { pair: p, agent, as_of, items });
            }
            f if f == FINAL_READ => {
                if let Some(list) = resp.get("facts").and_then(Value::as_array) {
                    let hex: Vec<String> = list.iter().filter_map(|x| x.as_str().map(String::from)).collect();
                    if facts_hex.as_ref().is_none_or(|(_, h)| hex.len() > h.len()) {
                        facts_hex = Some((p, hex));
                    }
                }
            }
            _ => {}
        }
    }
    v.count("turn_reads", reads.len() as u64);
    let Some((final_pair, hex)) = facts_hex else {
        if opts.require_final_read {
            v.undecided("unreplayable", vec![], "no final read exported the facts");
        }
        return v;
    };
    let mut facts: Vec<JournaledFact> = Vec::with_capacity(hex.len());
    for (i, h) in hex.iter().enumerate() {
        match hex::decode(h).map_err(|e| e.to_string()).and_then(|b| kungfu_core::codec::decode(&b)) {
            Ok(f) => facts.push(f),
            Err(e) => {
                v.flag("unreplayable", final_pair.indexes(), format!("fact {i} does not decode: {e}"));
                return v;
            }
        }
    }
    facts.sort_by_key(|f| (f.seq, f.idx));
    v.count("facts", facts.len() as u64);
    let last_seq = facts.last().map(|f| f.seq).unwrap_or(0);

    // Fold the facts action by action; after each, compare the reads served at that point and
    // follow every obligation's life.
    reads.sort_by_key(|r| r.as_of);
    let mut next_read = 0;
    let mut state = MemState::new();
    let limits = Limits { max_page_size: usize::MAX, ..Limits::default() };
    let mut open: BTreeSet<Vec<u8>> = BTreeSet::new();
    let mut ended: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
    let mut i = 0;
    let compare = |state: &MemState, upto: u64, next_read: &mut usize, v: &mut Verdict| {
        while *next_read < reads.len() && reads[*next_read].as_of <= upto {
            let r = &reads[*next_read];
            *next_read += 1;
            let Some(agent) = parse_agent(&r.agent) else {
                v.flag("turn_mismatch", r.pair.indexes(), format!("unknown agent id {:?}", r.agent));
                continue;
            };
            let now = kungfu_types::Timestamp(0);
            let expected: Vec<Value> = match kungfu_core::read::turn(state, agent, None, usize::MAX, now, &limits) {
                Ok(page) => page
                    .items
                    .iter()
                    .map(|it| identity(&serde_json::to_value(pb::TurnItem::from(it)).unwrap_or(Value::Null)))
                    .collect(),
                Err(e) => {
                    v.flag("unreplayable", r.pair.indexes(), format!("recomputing the turn failed: {e}"));
                    continue;
                }
            };
            let got: Vec<Value> = r.items.iter().map(identity).collect();
            v.add("compared", 1);
            if got != expected {
                v.flag(
                    "turn_mismatch",
                    r.pair.indexes(),
                    format!(
                        "turn of {} at seq {}: read {} item(s), the facts give {}: read {:?}, facts {:?}",
                        r.agent,
                        r.as_of,
                        got.len(),
                        expected.len(),
                        got,
                        expected
                    ),
                );
            }
        }
    };
    compare(&state, 0, &mut next_read, &mut v);
    while i < facts.len() {
        let seq = facts[i].seq;
        let mut tx = Tx::new(&state);
        while i < facts.len() && facts[i].seq == seq {
            if let Err(e) = kungfu_core::evolve::evolve(&mut tx, &facts[i]) {
                v.flag(
                    "unreplayable",
                    final_pair.indexes(),
                    format!("fact ({seq}, {}) does not fold: {e}", facts[i].idx),
                );
                return v;
            }
            i += 1;
        }
        let changes = tx.into_changes();
        state.commit(&changes);
        // Obligation lives: open now vs before.
        let now_open: BTreeSet<Vec<u8>> = match state.scan_all(&kungfu_core::keys::all_obligations()) {
            Ok(all) => all.into_iter().filter(|(_, r)| matches!(r, Record::Obligation(_))).map(|(k, _)| k).collect(),
            Err(e) => {
                v.flag("unreplayable", final_pair.indexes(), format!("scanning obligations: {e}"));
                return v;
            }
        };
        for k in now_open.difference(&open) {
            if ended.contains_key(k) {
                v.flag(
                    "reopened",
                    final_pair.indexes(),
                    format!("an obligation ended earlier is open again at seq {seq}"),
                );
            }
        }
        for k in open.difference(&now_open) {
            let n = ended.entry(k.clone()).or_insert(0);
            *n += 1;
            if *n > 1 {
                v.flag("ended_twice", final_pair.indexes(), format!("an obligation ended a second time at seq {seq}"));
            }
        }
        open = now_open;
        compare(&state, seq, &mut next_read, &mut v);
    }
    for r in &reads[next_read..] {
        v.flag(
            "unreplayable",
            r.pair.indexes(),
            format!("a turn read at seq {} is beyond the last exported fact ({last_seq})", r.as_of),
        );
    }
    v.count("obligations_ended", ended.len() as u64);
    v
}

fn parse_agent(s: &str) -> Option<kungfu_types::AgentId> {
    s.parse::<kungfu_types::AgentId>().ok()
}
