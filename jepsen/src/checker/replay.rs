//! The `replay` checker: idempotent replay returns stable receipts and never doubles an effect
//! (L3; §10.2 item 3).
//!
//! **Model.** One agent, one action and one idempotency key identify one logical request (L3).
//! The first success under a key fixes its receipt; the same request under that key afterwards
//! returns the original receipt, however the state has moved on; a different request under the
//! key is rejected with `IDEMPOTENCY_KEY_REUSED` and has no effect. A secret credential appears
//! only in the first successful result. Retries after `info` reuse the key, possibly on another
//! node after a leader change, so the dedupe table must be replicated state.
//!
//! **What it proves**, per key `(agent, f, idem)`:
//!
//! - `receipt_mismatch`: two acknowledged results of one request carry different receipts (after
//!   removing [`Options::ignore_fields`] and [`Options::secret_fields`]).
//! - `secret_replayed`: more than one acknowledged result carries a secret (L3).
//! - `conflict_applied`: two different requests under one key were both acknowledged, or a final
//!   read attributes the key's effect to a request other than the acknowledged one.
//! - `replay_rejected`: one request was both acknowledged and refused with
//!   `IDEMPOTENCY_KEY_REUSED` (the same request must replay).
//! - `spurious_key_reused`: a refusal with `IDEMPOTENCY_KEY_REUSED` although no other request
//!   under the key could have taken effect before it.
//!
//! and, per idempotency key, on every final read (the effects it finds, each tagged with the key
//! that created it):
//!
//! - `lost_effect`: acknowledged, but no effect; `double_effect`: more than one effect;
//!   `failed_applied`: every attempt definitely failed, yet there is an effect;
//!   `unexpected_effect`: an effect under a key never used.
//!
//! An all-indeterminate key may have zero or one effect.
//!
//! **History schema.** Any client op other than a read with an `idem` is a keyed request; its
//! invoke `value` is the request (compared structurally), `value.agent` names the principal when
//! the workload has several. The receipt is the ok completion's `receipt`, else its `value`.
//! `final-read`: ok `{"effects": [key, ...]}`, where an effect is an idempotency key string or
//! `{"key", "request"?}`. Idempotency keys must be unique per run across agents and actions
//! for the effect count to be meaningful.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::Verdict;
use super::common::{Outcomes, no_final_read};
use super::val::str_field;
use crate::history::{FINAL_READ, History, Pair, READ};

/// The error code of a different request under a used key (L3).
pub const KEY_REUSED: &str = "IDEMPOTENCY_KEY_REUSED";

/// Anomaly kinds this checker reports.
pub const KINDS: &[&str] = &[
    "receipt_mismatch",
    "secret_replayed",
    "conflict_applied",
    "replay_rejected",
    "spurious_key_reused",
    "lost_effect",
    "double_effect",
    "failed_applied",
    "unexpected_effect",
];

/// Options of the replay checker.
#[derive(Clone, Debug)]
pub struct Options {
    /// Top-level receipt fields that are not part of the receipt's identity (hints the reference
    /// returns only the first time).
    pub ignore_fields: Vec<String>,
    /// Top-level receipt fields holding one-time secrets: excluded from comparison, and at most
    /// one acknowledged result per key may carry one (L3).
    pub secret_fields: Vec<String>,
    /// A history without any `final-read` is `Unknown` (effects cannot be counted).
    pub require_final_read: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            ignore_fields: vec!["next".to_owned()],
            secret_fields: vec!["secret".to_owned()],
            require_final_read: true,
        }
    }
}

/// `(agent, f, idem)`: the identity of one logical request (L3).
type Key = (String, String, String);

fn receipt<'h>(p: &Pair<'h>) -> Option<&'h Value> {
    let c = p.completion.filter(|_| p.is_ok())?;
    Some(c.receipt.as_ref().unwrap_or(&c.value))
}

fn strip(receipt: &Value, opts: &Options) -> Value {
    let mut r = receipt.clone();
    if let Value::Object(map) = &mut r {
        for f in opts.ignore_fields.iter().chain(&opts.secret_fields) {
            map.remove(f);
        }
    }
    r
}

fn has_secret(receipt: &Value, opts: &Options) -> bool {
    opts.secret_fields.iter().any(|f| receipt.get(f).is_some_and(|s| !s.is_null()))
}

fn witness(a: &Pair<'_>, b: &Pair<'_>) -> Vec<u64> {
    let mut w = a.indexes();
    w.extend(b.indexes());
    w
}

/// Checks a replay history. See the module docs.
pub fn check(history: &History, opts: &Options) -> Verdict {
    let mut v = Verdict::new("replay", KINDS);
    let mut keys: BTreeMap<Key, Vec<Pair<'_>>> = BTreeMap::new();
    let mut finals: Vec<Pair<'_>> = Vec::new();
    let mut outcomes = Outcomes::default();
    let (mut conflicts, mut unkeyed) = (0, 0);

    for p in history.pairs() {
        if p.f() == FINAL_READ {
            if p.is_ok() {
                finals.push(p);
            }
            continue;
        }
        if p.f() == READ {
            continue;
        }
        let Some(idem) = p.idem() else {
            unkeyed += 1;
            continue;
        };
        outcomes.tally(&p);
        if p.is_fail() && p.error() == Some(KEY_REUSED) {
            conflicts += 1;
        }
        let agent = str_field(p.request(), "agent").unwrap_or("").to_owned();
        keys.entry((agent, p.f().to_owned(), idem.to_owned())).or_default().push(p);
    }

    // The acknowledged request of each idempotency key string, for the effect checks.
    let mut owner: BTreeMap<&str, &Value> = BTreeMap::new();
    let mut requests = 0;
    for ((agent, f, idem), ops) in &keys {
        let name = format!("key {idem} ({f} by {})", if agent.is_empty() { "-" } else { agent });
        // Group by request, in order of first invocation.
        let mut groups: Vec<(&Value, Vec<&Pair<'_>>)> = Vec::new();
        for p in ops {
            match groups.iter_mut().find(|(r, _)| *r == p.request()) {
                Some((_, g)) => g.push(p),
                None => groups.push((p.request(), vec![p])),
            }
        }
        requests += groups.len() as u64;

        let owners: Vec<&(&Value, Vec<&Pair<'_>>)> =
            groups.iter().filter(|(_, g)| g.iter().any(|p| p.is_ok())).collect();
        if owners.len() > 1 {
            let a = owners[0].1.iter().find(|p| p.is_ok());
            let b = owners[1].1.iter().find(|p| p.is_ok());
            if let (Some(a), Some(b)) = (a, b) {
                v.flag(
                    "conflict_applied",
                    witness(a, b),
                    format!("{name}: two different requests under one key were both acknowledged (L3)"),
                );
            }
        }
        if let Some((req, _)) = owners.first() {
            owner.insert(idem.as_str(), req);
        }

        // L3: the same request returns the original result, byte for byte.
        for (_, g) in &owners {
            let acked: Vec<(&Pair<'_>, &Value)> = g.iter().filter_map(|p| Some((*p, receipt(p)?))).collect();
            let Some((first, r0)) = acked.first() else { continue };
            let r0 = strip(r0, opts);
            if let Some((other, r)) = acked.iter().skip(1).find(|(_, r)| strip(r, opts) != r0) {
                v.flag(
                    "receipt_mismatch",
                    witness(first, other),
                    format!("{name}: replays returned different receipts: {r0} vs {} (L3)", strip(r, opts)),
                );
            }
        }
        let with_secret: Vec<&Pair<'_>> =
            ops.iter().filter(|p| receipt(p).is_some_and(|r| has_secret(r, opts))).collect();
        if with_secret.len() > 1 {
            v.flag(
                "secret_replayed",
                witness(with_secret[0], with_secret[1]),
                format!("{name}: a secret appeared in {} results; only the first may carry it (L3)", with_secret.len()),
            );
        }

        // IDEMPOTENCY_KEY_REUSED means another request owns the key.
        for (gi, (_, g)) in groups.iter().enumerate() {
            for r in g.iter().filter(|p| p.failed_with(KEY_REUSED)) {
                if let Some(acked) = g.iter().find(|p| p.is_ok()) {
                    v.flag(
                        "replay_rejected",
                        witness(acked, r),
                        format!("{name}: one request was both acknowledged and refused as a different request (L3)"),
                    );
                    continue;
                }
                let done = r.complete_index().unwrap_or(u64::MAX);
                let rival = groups.iter().enumerate().any(|(gj, (_, other))| {
                    gj != gi && other.iter().any(|p| p.may_have_happened() && p.invoke_index() < done)
                });
                if !rival {
                    v.flag(
                        "spurious_key_reused",
                        r.indexes(),
                        format!("{name}: refused with {KEY_REUSED}, but no other request under the key could have taken effect"),
                    );
                }
            }
        }
    }

    // Effects after recovery: exactly one per acknowledged key.
    let by_idem: BTreeMap<&str, Vec<&Pair<'_>>> = keys.iter().fold(BTreeMap::new(), |mut m, ((_, _, idem), ops)| {
        m.entry(idem.as_str()).or_default().extend(ops.iter());
        m
    });
    let mut effects_seen = 0;
    for r in &finals {
        let Some(list) = r.response().and_then(|v| v.get("effects")).and_then(Value::as_array) else {
            v.undecided("malformed", r.indexes(), "a final read must return its effects");
            continue;
        };
        let mut count: BTreeMap<&str, u64> = BTreeMap::new();
        for e in list {
            let (key, request) = match e {
                Value::String(k) => (Some(k.as_str()), None),
                other => (str_field(other, "key"), other.get("request")),
            };
            let Some(key) = key else {
                v.undecided("malformed", r.indexes(), format!("an effect without a key: {e}"));
                continue;
            };
            effects_seen += 1;
            *count.entry(key).or_insert(0) += 1;
            if let (Some(req), Some(own)) = (request, owner.get(key))
                && req != *own
            {
                v.flag(
                    "conflict_applied",
                    r.indexes(),
                    format!(
                        "key {key}: the effect on node {} is the request {req}, not the acknowledged {own} (L3)",
                        r.node().unwrap_or("?")
                    ),
                );
            }
        }
        let node = r.node().unwrap_or("?");
        let all: BTreeSet<&str> = by_idem.keys().chain(count.keys()).copied().collect();
        for key in all {
            let n = count.get(key).copied().unwrap_or(0);
            let ops = by_idem.get(key).map(Vec::as_slice).unwrap_or_default();
            let mut w: Vec<u64> = ops.iter().flat_map(|p| p.indexes()).collect();
            w.extend(r.indexes());
            if ops.is_empty() {
                v.flag(
                    "unexpected_effect",
                    w,
                    format!("key {key}: {n} effect(s) on node {node}, but the key was never used"),
                );
            } else if ops.iter().any(|p| p.is_ok()) {
                if n == 0 {
                    v.flag("lost_effect", w, format!("key {key}: acknowledged, but node {node} shows no effect"));
                } else if n > 1 {
                    v.flag(
                        "double_effect",
                        w,
                        format!("key {key}: {n} effects on node {node}; one key, one effect (L3)"),
                    );
                }
            } else if ops.iter().any(|p| p.is_indeterminate()) {
                if n > 1 {
                    v.flag(
                        "double_effect",
                        w,
                        format!("key {key}: {n} effects on node {node}; one key, one effect (L3)"),
                    );
                }
            } else if n > 0 {
                v.flag(
                    "failed_applied",
                    w,
                    format!("key {key}: every attempt failed, yet node {node} shows {n} effect(s)"),
                );
            }
        }
    }
    no_final_read(&mut v, finals.len(), opts.require_final_read, "effects per key are not counted");

    v.count("keys", keys.len() as u64);
    v.count("requests", requests);
    v.count("retried_keys", keys.values().filter(|ops| ops.len() > 1).count() as u64);
    outcomes.count(&mut v, None);
    v.count("key_reused_refusals", conflicts);
    v.count("unkeyed", unkeyed);
    v.count("final_reads", finals.len() as u64);
    v.count("effects", effects_seen);
    v
}
