//! The `wake` checker: wake webhooks (issue #35, docs/wake.md "Webhooks") are delivered at least
//! once, in order, signed, each describing only its own agent's turn, and the last change of every
//! turn arrives.
//!
//! **Model.** Each agent has one wake target pointing at the harness's receiver (a path of its
//! own), and the leader POSTs an event whenever the agent's turn changes. Per target, events are
//! numbered 1, 2, 3, … with no gap; at most one is outstanding (sent, not yet answered with a 2xx)
//! at a time, so event n+1 is queued only after a 2xx for n was recorded; changes meanwhile are
//! coalesced into the next event, which carries the newest turn; a retry or a new leader resends an
//! outstanding event under the same id with the same body. A delivery is recorded by the receiver
//! as it arrives, with the status the receiver answered (it answers 500 or 503 during its seeded
//! outages): a receipt answered with anything but a 2xx was not delivered.
//!
//! **What it proves:**
//!
//! - `bad_signature`: a delivery whose `webhook-signature` does not verify with its target's secret
//!   (Standard Webhooks: HMAC-SHA256 over `{id}.{timestamp}.{body}`).
//! - `malformed`: a body that is not the event (not JSON, another `type`, a field missing), whose
//!   `id` is not the `webhook-id` header, or whose cursor does not end with its `applied_index`
//!   and digest (a turn cursor is hex of version, applied index, digest).
//! - `wrong_agent`: a body naming another agent or target than the one the URL belongs to, or a
//!   POST to a path no target has (§12: nothing an agent could not see reaches its webhook).
//! - `id_reused`: one `webhook-id` with two different events (target, sequence, applied index or
//!   digest differ): receivers dedupe on the id, so the second event would be dropped.
//! - `sequence_reused`: one target's sequence number carried by two different events (another id,
//!   applied index or digest): the sequence is the target's event log, one event per number.
//! - `sequence_gap`: a target's sequence number below the highest it received that never got a 2xx
//!   (never received, or only answered with errors): at-least-once delivery, no gap.
//! - `out_of_order`: the first receipt of event n+1 came before the first receipt of n (one
//!   outstanding event at a time). A resend of n after n+1 (a deposed leader's retry) is counted as
//!   `late_resends`, not flagged.
//! - `last_change_lost`: an agent whose final turn digest (read after heal and convergence) is not
//!   the digest of the highest event its target acknowledged, or whose turn holds obligations while
//!   its target acknowledged nothing: the final change was never delivered.
//!
//! A run with no delivery at all proves nothing: [`super::check_workload`] requires an `ok`
//! `deliver` through the always-on [`super::no_success`] check.
//!
//! **History schema.** `deliver` (the receiver's own process, invoke and ok at once): `{"hook"` (the
//! target the URL's path belongs to, null for an unknown path)`, "owner"` (that target's agent)`,
//! "id"` (the `webhook-id` header)`, "timestamp", "signature_ok", "status"` (what the receiver
//! answered)`, "body"` (the parsed JSON body, null when it did not parse)`}`. `final-read`, one per
//! agent: ok `{"agent", "target", "digest", "cursor", "applied_index", "items"}` (its turn read
//! after convergence; `items` the number of obligations in it). Writes (`post`, `reply`,
//! `handle`) and `turn` reads are not judged here.

use super::Verdict;
use super::common::no_final_read;
use super::val::{str_field, u64_field};
use crate::history::{FINAL_READ, History, Pair};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Anomaly kinds this checker reports.
pub const KINDS: &[&str] = &[
    "bad_signature",
    "malformed",
    "wrong_agent",
    "id_reused",
    "sequence_reused",
    "sequence_gap",
    "out_of_order",
    "last_change_lost",
];

/// The `f` of a delivery the receiver recorded.
pub const DELIVER: &str = "deliver";
/// The `type` of a turn-change event.
pub const EVENT_TYPE: &str = "kungfu.turn.changed";

/// Options of the wake checker.
pub use super::common::RequireFinalRead as Options;

/// One POST the receiver got, with the event its body describes.
struct Receipt<'h> {
    pair: Pair<'h>,
    /// The target the URL belongs to.
    hook: String,
    id: String,
    seq: u64,
    applied: u64,
    digest: String,
    acked: bool,
}

impl Receipt<'_> {
    fn index(&self) -> u64 {
        self.pair.invoke_index()
    }
}

/// An agent's final turn.
struct Final<'h> {
    pair: Pair<'h>,
    agent: String,
    target: String,
    digest: String,
    items: u64,
}

/// What one target received under one sequence number.
struct Seen {
    /// History indexes of every receipt, whatever its answer, in order.
    receipts: Vec<u64>,
    /// History index of the first receipt answered with a 2xx.
    first_ack: Option<u64>,
    digest: String,
}

impl Seen {
    /// History index of the first receipt.
    fn first(&self) -> u64 {
        self.receipts.first().copied().unwrap_or(0)
    }
}

/// Reads one delivery: flags what is wrong with it on its own, and returns the event it carries
/// when its body is whole.
fn receipt<'h>(p: Pair<'h>, v: &mut Verdict) -> Option<Receipt<'h>> {
    let r = p.response()?;
    let hook = str_field(r, "hook");
    let owner = str_field(r, "owner").unwrap_or_default();
    let id = str_field(r, "id").unwrap_or_default();
    let status = u64_field(r, "status").unwrap_or(0);
    let Some(hook) = hook else {
        v.flag("wrong_agent", p.indexes(), format!("delivery {id} went to a path no target has"));
        return None;
    };
    if r.get("signature_ok").and_then(Value::as_bool) != Some(true) {
        v.flag(
            "bad_signature",
            p.indexes(),
            format!("delivery {id} to {hook}: the signature does not verify with the target's secret"),
        );
    }
    let body = r.get("body").filter(|b| b.is_object());
    let Some(body) = body else {
        v.flag("malformed", p.indexes(), format!("delivery {id} to {hook}: the body is not a JSON object"));
        return None;
    };
    let (kind, body_id, agent, target) =
        (str_field(body, "type"), str_field(body, "id"), str_field(body, "agent"), str_field(body, "target"));
    let (seq, applied, digest, cursor) = (
        u64_field(body, "sequence"),
        u64_field(body, "applied_index"),
        str_field(body, "digest"),
        str_field(body, "cursor"),
    );
    let (Some(kind), Some(body_id), Some(agent), Some(target), Some(seq), Some(applied), Some(digest), Some(cursor)) =
        (kind, body_id, agent, target, seq, applied, digest, cursor)
    else {
        v.flag("malformed", p.indexes(), format!("delivery {id} to {hook}: a field of the event is missing: {body}"));
        return None;
    };
    if kind != EVENT_TYPE {
        v.flag("malformed", p.indexes(), format!("delivery {id} to {hook}: type {kind:?}, not {EVENT_TYPE:?}"));
    }
    if body_id != id {
        v.flag("malformed", p.indexes(), format!("delivery to {hook}: webhook-id {id} but the body's id is {body_id}"));
    }
    // A turn cursor is hex of [version (and group), applied index u64 BE, digest 32 bytes].
    let tail = format!("{applied:016x}{digest}");
    if digest.len() != 64 || !cursor.ends_with(&tail) {
        v.flag(
            "malformed",
            p.indexes(),
            format!(
                "delivery {id} to {hook}: cursor {cursor} does not end with applied index {applied} and digest {digest}"
            ),
        );
    }
    if agent != owner || target != hook {
        v.flag(
            "wrong_agent",
            p.indexes(),
            format!("delivery {id} to the webhook of {owner} ({hook}) names agent {agent}, target {target}"),
        );
    }
    Some(Receipt {
        pair: p,
        hook: hook.to_string(),
        id: id.to_string(),
        seq,
        applied,
        digest: digest.to_string(),
        acked: (200..300).contains(&status),
    })
}

/// Checks a wake history. See the module docs.
pub fn check(history: &History, opts: &Options) -> Verdict {
    let mut v = Verdict::new("wake", KINDS);
    let mut receipts = Vec::new();
    let mut finals: Vec<Final<'_>> = Vec::new();
    // Targets whose agent's final read failed (already undecided).
    let mut unread: Vec<&str> = Vec::new();
    let mut deliveries = 0u64;
    let mut refused = 0u64;
    for p in history.pairs() {
        match p.f() {
            DELIVER if p.is_ok() => {
                deliveries += 1;
                if let Some(r) = receipt(p, &mut v) {
                    refused += u64::from(!r.acked);
                    receipts.push(r);
                }
            }
            f if f == FINAL_READ => {
                let Some(r) = p.response() else {
                    if p.completion.is_some() {
                        let target = str_field(p.request(), "target").unwrap_or_default();
                        unread.push(target);
                        v.undecided(
                            "missing_final_read",
                            p.indexes(),
                            format!(
                                "the final turn of {target}'s agent could not be read: its last change is not judged"
                            ),
                        );
                    }
                    continue;
                };
                finals.push(Final {
                    pair: p,
                    agent: str_field(r, "agent").unwrap_or_default().to_string(),
                    target: str_field(r, "target").unwrap_or_default().to_string(),
                    digest: str_field(r, "digest").unwrap_or_default().to_string(),
                    items: u64_field(r, "items").unwrap_or(0),
                });
            }
            _ => {}
        }
    }
    v.count("deliveries", deliveries);
    v.count("acknowledged", deliveries - refused);
    v.count("refused", refused);
    v.count("final_reads", finals.len() as u64);

    // One id, one event; one target's sequence number, one event.
    let mut by_id: BTreeMap<&str, &Receipt<'_>> = BTreeMap::new();
    let mut by_seq: BTreeMap<(&str, u64), &Receipt<'_>> = BTreeMap::new();
    for r in &receipts {
        let first = *by_id.entry(&r.id).or_insert(r);
        if (&first.hook, first.seq, first.applied, &first.digest) != (&r.hook, r.seq, r.applied, &r.digest) {
            v.flag(
                "id_reused",
                vec![first.index(), r.index()],
                format!(
                    "id {} names two events: {} #{} at {} ({}) and {} #{} at {} ({})",
                    r.id, first.hook, first.seq, first.applied, first.digest, r.hook, r.seq, r.applied, r.digest
                ),
            );
        }
        let first = *by_seq.entry((&r.hook, r.seq)).or_insert(r);
        if (&first.id, first.applied, &first.digest) != (&r.id, r.applied, &r.digest) {
            v.flag(
                "sequence_reused",
                vec![first.index(), r.index()],
                format!(
                    "{} #{} is two events: {} at {} ({}) and {} at {} ({})",
                    r.hook, r.seq, first.id, first.applied, first.digest, r.id, r.applied, r.digest
                ),
            );
        }
    }

    // Per target: every number below the highest delivered, and in order.
    let mut targets: BTreeMap<&str, BTreeMap<u64, Seen>> = BTreeMap::new();
    for r in &receipts {
        let seen = targets.entry(&r.hook).or_default().entry(r.seq).or_insert_with(|| Seen {
            receipts: Vec::new(),
            first_ack: None,
            digest: r.digest.clone(),
        });
        seen.receipts.push(r.index());
        if r.acked && seen.first_ack.is_none() {
            seen.first_ack = Some(r.index());
        }
    }
    let (mut events, mut duplicates, mut late, mut max_seq, mut most) = (0u64, 0u64, 0u64, 0u64, 0u64);
    for (hook, seqs) in &targets {
        let Some(&max) = seqs.keys().next_back() else { continue };
        max_seq = max_seq.max(max);
        events += seqs.len() as u64;
        duplicates += seqs.values().map(|s| s.receipts.len() as u64 - 1).sum::<u64>();
        most = most.max(seqs.values().map(|s| s.receipts.len() as u64).max().unwrap_or(0));
        for n in 1..max {
            // The witness: the first receipt of the next number that arrived.
            let Some((m, next)) = seqs.range(n + 1..).next() else { continue };
            match seqs.get(&n) {
                None => v.flag(
                    "sequence_gap",
                    vec![next.first()],
                    format!("{hook}: event #{n} never arrived, yet #{m} did"),
                ),
                Some(s) if s.first_ack.is_none() => v.flag(
                    "sequence_gap",
                    vec![s.first(), next.first()],
                    format!(
                        "{hook}: event #{n} arrived {} time(s), never answered with a 2xx, yet #{m} was sent",
                        s.receipts.len()
                    ),
                ),
                Some(_) => {}
            }
            if let (Some(a), Some(b)) = (seqs.get(&n), seqs.get(&(n + 1))) {
                if b.first() < a.first() {
                    v.flag(
                        "out_of_order",
                        vec![b.first(), a.first()],
                        format!("{hook}: event #{} arrived before event #{n}", n + 1),
                    );
                }
            }
        }
        // A resend of an event after the next one arrived (a deposed leader's retry): harmless
        // to a receiver that dedupes, but worth seeing.
        let mut later_first: Option<u64> = None;
        for s in seqs.values().rev() {
            if let Some(after) = later_first {
                late += s.receipts.iter().filter(|i| **i > after).count() as u64;
            }
            later_first = Some(later_first.map_or(s.first(), |f| f.min(s.first())));
        }
    }
    v.count("targets", targets.len() as u64);
    v.count("events", events);
    v.count("duplicates", duplicates);
    v.count("late_resends", late);
    v.count("max_sequence", max_seq);
    // The most POSTs of one event (retries, resends after a leader change): a storm shows here.
    v.count("max_receipts_per_event", most);

    // The final change of every turn arrived.
    let mut judged: BTreeSet<&str> = unread.into_iter().collect();
    for f in &finals {
        judged.insert(&f.target);
        let last = targets
            .get(f.target.as_str())
            .and_then(|seqs| seqs.iter().rev().find(|(_, s)| s.first_ack.is_some()).map(|(n, s)| (*n, s)));
        match last {
            None if f.items == 0 => {}
            None => v.flag(
                "last_change_lost",
                f.pair.indexes(),
                format!(
                    "{} ({}): its final turn holds {} obligation(s) (digest {}), and no event was acknowledged",
                    f.agent, f.target, f.items, f.digest
                ),
            ),
            Some((n, s)) if s.digest != f.digest => {
                let mut ops = f.pair.indexes();
                ops.extend(s.first_ack);
                v.flag(
                    "last_change_lost",
                    ops,
                    format!(
                        "{} ({}): its final turn's digest is {}, but the last event acknowledged, #{n}, carries {}",
                        f.agent, f.target, f.digest, s.digest
                    ),
                );
            }
            Some(_) => {}
        }
    }
    for (hook, seqs) in &targets {
        if !judged.contains(hook) && !finals.is_empty() {
            let ops = seqs.values().next().map(|s| vec![s.first()]).unwrap_or_default();
            v.undecided("missing_final_read", ops, format!("{hook}: no final read of its agent's turn"));
        }
    }
    no_final_read(&mut v, finals.len(), opts.require_final_read, "whether the last changes arrived is not shown");
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::Validity;
    use crate::history::HistoryBuilder;
    use serde_json::json;

    const RECEIVER: u64 = 1_000;
    const DIGEST_A: &str = "aa00000000000000000000000000000000000000000000000000000000000000";
    const DIGEST_B: &str = "bb00000000000000000000000000000000000000000000000000000000000000";
    const DIGEST_C: &str = "cc00000000000000000000000000000000000000000000000000000000000000";

    /// A well-formed event of `target` (agent `ag_<target number>`).
    fn event(target: &str, seq: u64, applied: u64, digest: &str) -> Value {
        let agent = target.replace("wt_", "ag_");
        json!({
            "type": EVENT_TYPE,
            "id": format!("wk_{target}_{seq}_{applied}"),
            "agent": agent,
            "target": target,
            "sequence": seq,
            "cursor": format!("01{applied:016x}{digest}"),
            "applied_index": applied,
            "digest": digest,
            "changed_at_unix_micros": 1,
        })
    }

    /// The receiver got `body` at `hook`'s path and answered `status`.
    fn deliver(b: &mut HistoryBuilder, hook: &str, body: Value, status: u16) {
        deliver_signed(b, hook, body, status, true);
    }

    fn deliver_signed(b: &mut HistoryBuilder, hook: &str, body: Value, status: u16, signature_ok: bool) {
        let v = json!({
            "hook": hook,
            "owner": hook.replace("wt_", "ag_"),
            "id": body["id"].clone(),
            "timestamp": 1,
            "signature_ok": signature_ok,
            "status": status,
            "body": body,
        });
        b.invoke(RECEIVER, DELIVER, v.clone());
        b.ok(RECEIVER, v);
    }

    fn final_read(b: &mut HistoryBuilder, p: u64, target: &str, digest: &str, items: u64) {
        let agent = target.replace("wt_", "ag_");
        b.invoke(p, FINAL_READ, json!({ "agent": agent }));
        b.ok(
            p,
            json!({"agent": agent, "target": target, "digest": digest, "cursor": format!("01{:016x}{digest}", 99), "applied_index": 99, "items": items}),
        );
    }

    fn run(b: &HistoryBuilder) -> Verdict {
        check(&b.build().expect("a well-formed history"), &Options::default())
    }

    #[track_caller]
    fn assert_flags(v: &Verdict, kind: &str) {
        assert_eq!(v.valid, Validity::Invalid, "expected INVALID:\n{}", v.summary());
        assert!(v.anomalies_of(kind) > 0, "expected `{kind}`:\n{}\n{:#?}", v.summary(), v.anomalies);
        assert!(v.anomalies_named(kind).all(|a| !a.message.is_empty() && !a.ops.is_empty()));
    }

    /// Two targets: wt_1 gets #1 refused then retried (same id, same body), #2 and a duplicate of
    /// #2 (a new leader resending what the old one did not record); wt_2 has an empty turn.
    fn valid() -> HistoryBuilder {
        let mut b = HistoryBuilder::new();
        deliver(&mut b, "wt_1", event("wt_1", 1, 10, DIGEST_A), 503);
        deliver(&mut b, "wt_1", event("wt_1", 1, 10, DIGEST_A), 200);
        deliver(&mut b, "wt_1", event("wt_1", 2, 17, DIGEST_B), 200);
        deliver(&mut b, "wt_1", event("wt_1", 2, 17, DIGEST_B), 200);
        final_read(&mut b, 1, "wt_1", DIGEST_B, 2);
        final_read(&mut b, 2, "wt_2", DIGEST_C, 0);
        b
    }

    #[test]
    fn retries_and_duplicates_under_one_id_in_order_with_the_last_change_delivered_are_valid() {
        let v = run(&valid());
        assert_eq!(v.valid, Validity::Valid, "{}\n{:#?}", v.summary(), v.anomalies);
        assert_eq!((v.counts["deliveries"], v.counts["acknowledged"], v.counts["refused"]), (4, 3, 1));
        assert_eq!((v.counts["events"], v.counts["duplicates"], v.counts["max_sequence"]), (2, 2, 2));
        assert_eq!((v.counts["late_resends"], v.counts["max_receipts_per_event"]), (0, 2));
    }

    #[test]
    fn a_signature_that_does_not_verify_is_flagged() {
        let mut b = valid();
        deliver_signed(&mut b, "wt_1", event("wt_1", 2, 17, DIGEST_B), 200, false);
        assert_flags(&run(&b), "bad_signature");
    }

    #[test]
    fn a_body_naming_another_agent_or_an_unknown_path_is_flagged() {
        let mut b = valid();
        let mut body = event("wt_1", 2, 17, DIGEST_B);
        body["agent"] = json!("ag_2");
        deliver(&mut b, "wt_1", body, 200);
        assert_flags(&run(&b), "wrong_agent");
        let mut b = valid();
        let v = json!({"hook": null, "owner": null, "id": "wk_x", "signature_ok": false, "status": 404, "body": null});
        b.invoke(RECEIVER, DELIVER, v.clone());
        b.ok(RECEIVER, v);
        assert_flags(&run(&b), "wrong_agent");
    }

    #[test]
    fn a_body_that_is_not_the_event_is_flagged() {
        let mut b = valid();
        let mut body = event("wt_1", 2, 17, DIGEST_B);
        body["cursor"] = json!(format!("01{:016x}{DIGEST_A}", 17));
        deliver(&mut b, "wt_1", body, 200);
        assert_flags(&run(&b), "malformed");
    }

    #[test]
    fn one_id_for_two_events_is_flagged() {
        let mut b = valid();
        let mut body = event("wt_1", 3, 30, DIGEST_C);
        body["id"] = event("wt_1", 2, 17, DIGEST_B)["id"].clone();
        deliver(&mut b, "wt_1", body, 200);
        let v = run(&b);
        assert_flags(&v, "id_reused");
    }

    #[test]
    fn one_sequence_number_for_two_events_is_flagged() {
        let mut b = valid();
        deliver(&mut b, "wt_1", event("wt_1", 2, 18, DIGEST_C), 200);
        assert_flags(&run(&b), "sequence_reused");
    }

    #[test]
    fn a_number_never_received_or_never_acknowledged_below_the_highest_is_a_gap() {
        // wake-drop: #2 was outstanding when the leader died; the next leader recorded it
        // delivered without sending it, and #3 arrived.
        let mut b = HistoryBuilder::new();
        deliver(&mut b, "wt_1", event("wt_1", 1, 10, DIGEST_A), 200);
        deliver(&mut b, "wt_1", event("wt_1", 3, 40, DIGEST_C), 200);
        final_read(&mut b, 1, "wt_1", DIGEST_C, 1);
        let v = run(&b);
        assert_flags(&v, "sequence_gap");
        assert_eq!(v.anomalies_of("sequence_gap"), 1);
        // #2 arrived during a receiver outage only.
        let mut b = HistoryBuilder::new();
        deliver(&mut b, "wt_1", event("wt_1", 1, 10, DIGEST_A), 200);
        deliver(&mut b, "wt_1", event("wt_1", 2, 20, DIGEST_B), 500);
        deliver(&mut b, "wt_1", event("wt_1", 3, 40, DIGEST_C), 200);
        final_read(&mut b, 1, "wt_1", DIGEST_C, 1);
        assert_flags(&run(&b), "sequence_gap");
    }

    #[test]
    fn the_next_event_before_the_previous_one_is_out_of_order_and_a_late_resend_is_counted() {
        let mut b = HistoryBuilder::new();
        deliver(&mut b, "wt_1", event("wt_1", 2, 20, DIGEST_B), 200);
        deliver(&mut b, "wt_1", event("wt_1", 1, 10, DIGEST_A), 200);
        final_read(&mut b, 1, "wt_1", DIGEST_B, 1);
        assert_flags(&run(&b), "out_of_order");
        // A deposed leader's retry of #1 after #2: valid, counted.
        let mut b = valid();
        deliver(&mut b, "wt_1", event("wt_1", 1, 10, DIGEST_A), 200);
        let v = run(&b);
        assert_eq!(v.valid, Validity::Valid, "{}", v.summary());
        assert_eq!(v.counts["late_resends"], 1);
    }

    #[test]
    fn a_final_turn_never_delivered_is_a_lost_last_change() {
        // The last event acknowledged carries an older digest.
        let mut b = valid();
        final_read(&mut b, 3, "wt_3", DIGEST_A, 1);
        deliver(&mut b, "wt_3", event("wt_3", 1, 10, DIGEST_B), 200);
        assert_flags(&run(&b), "last_change_lost");
        // The newest event arrived only during an outage.
        let mut b = valid();
        deliver(&mut b, "wt_1", event("wt_1", 3, 30, DIGEST_C), 503);
        let mut h = HistoryBuilder::new();
        for op in b.ops().iter().filter(|o| o.f != FINAL_READ) {
            h.push(op.clone());
        }
        final_read(&mut h, 1, "wt_1", DIGEST_C, 1);
        final_read(&mut h, 2, "wt_2", DIGEST_C, 0);
        assert_flags(&run(&h), "last_change_lost");
        // A turn with work and nothing ever acknowledged.
        let mut b = valid();
        final_read(&mut b, 3, "wt_3", DIGEST_A, 2);
        assert_flags(&run(&b), "last_change_lost");
    }

    #[test]
    fn without_final_reads_the_last_change_is_undecided() {
        let mut b = HistoryBuilder::new();
        deliver(&mut b, "wt_1", event("wt_1", 1, 10, DIGEST_A), 200);
        let v = run(&b);
        assert_eq!(v.valid, Validity::Unknown, "{}", v.summary());
        let mut b = valid();
        b.invoke(7, FINAL_READ, json!({"agent": "ag_9"}));
        b.fail(7, "UNAVAILABLE");
        assert_eq!(run(&b).valid, Validity::Unknown);
    }

    #[test]
    fn no_delivery_at_all_fails_the_always_on_check() {
        let mut b = HistoryBuilder::new();
        final_read(&mut b, 1, "wt_1", DIGEST_A, 0);
        let report = crate::checker::check_workload(
            crate::checker::Workload::Wake,
            &b.build().expect("a well-formed history"),
            &crate::checker::CheckOptions::default(),
        );
        assert_eq!(report.valid, Validity::Invalid, "{}", report.summary());
    }
}
