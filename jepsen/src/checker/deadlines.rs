//! The `deadlines` checker: every delivery and judgment obligation ends exactly once, never
//! early, the same way on every node (§6.4, §7.3, L4, L5).
//!
//! **Model.** An obligation that waits on another party (delivery, judgment) carries a due time
//! (L4). It ends exactly once: by an action (deliver, judge, drop), by its deadline (timed out,
//! undecided, or the contract's default), or by another fact (voided when a membership ends or a
//! thread closes, §6.2, §6.5). Endings are irreversible (§6.4 "terminal states ... are
//! irreversible"). When a deadline and an in-flight action compete, the deadline wins (L4).
//!
//! **Time.** All times are nanoseconds on the history's timeline (the harness's monotonic clock
//! since the test started). The workload converts the server's wall-clock `due` and `fired_at` to
//! that timeline with the harness's own, unskewed, clock. [`Options::allowed_skew_ns`] (ε) is the
//! injected clock skew bound plus tolerance: times within ε of the due are not judged.
//!
//! **What it proves:**
//!
//! - `double_ended`: a read shows two endings of one obligation, or two actions with different
//!   idempotency keys were both acknowledged as ending it (L5 "ends at most once").
//! - `disagreement`: two reads (any nodes) show different endings of one obligation, or final
//!   reads disagree on whether it ended.
//! - `stale_read`: an ending seen by a read is gone from a read begun after that one completed.
//! - `never_ended`: the final reads begun after `due + ε + lateness bound` all still show it
//!   open (L4: every obligation has an exit).
//! - `missing`: an obligation whose creation was acknowledged is absent from a final read.
//! - `early_fire`: a deadline ending before `due − ε`, by the reported time or because a read that
//!   completed before `due − ε` already showed it.
//! - `late_action`: an action ended the obligation after `due + ε`, or was acknowledged although
//!   invoked after `due + ε`: the deadline wins (L4).
//! - `action_not_applied`: an action was acknowledged but the obligation ended another way.
//! - `spurious_late_reject`: an action refused with `DEADLINE_PASSED` although the obligation did
//!   not end by its deadline, or before `due − ε`.
//! - `late`: a deadline ending later than `due + lateness bound` (only with a bound).
//!
//! Lateness of deadline endings (`at − due`) is reported as `max_lateness_ns` and
//! `p99_lateness_ns`.
//!
//! **History schema.**
//!
//! - Any `ok` op may create obligations: its value has `"created": [{"id", "due"}]`.
//! - An action op's invoke value names the obligation it would end: `"ends": id`.
//!   `fail` with `error: "DEADLINE_PASSED"` means the deadline won.
//! - `read` / `final-read` (one per node): ok value
//!   `{"obligations": [{"id", "due", "endings": [{"kind", "cause", "index", "at"?}]}]}` where
//!   `cause` is `deadline`, `action` or `other`, `index` is the log index of the ending fact and
//!   `at` its fired-at time.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::Value;

use super::Verdict;
use super::common::no_final_read;
use super::val::quantile;
use crate::history::{FINAL_READ, History, Pair, READ};

/// The error code of an action refused because the deadline passed first (L4).
pub const DEADLINE_PASSED: &str = "DEADLINE_PASSED";

/// Anomaly kinds this checker reports.
pub const KINDS: &[&str] = &[
    "double_ended",
    "disagreement",
    "stale_read",
    "never_ended",
    "missing",
    "early_fire",
    "late_action",
    "action_not_applied",
    "spurious_late_reject",
    "late",
];

/// Options of the deadlines checker.
#[derive(Clone, Debug)]
pub struct Options {
    /// ε: the injected clock skew bound plus tolerance, in ns.
    pub allowed_skew_ns: u64,
    /// How late a deadline ending may be (sweep interval plus recovery); `None` reports lateness
    /// without judging it.
    pub lateness_bound_ns: Option<u64>,
    /// A history without any `final-read` is `Unknown`.
    pub require_final_read: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options { allowed_skew_ns: 0, lateness_bound_ns: None, require_final_read: true }
    }
}

/// What ended an obligation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    Deadline,
    Action,
    #[serde(other)]
    Other,
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Cause::Deadline => "deadline",
            Cause::Action => "action",
            Cause::Other => "other",
        })
    }
}

/// One ending of an obligation, as a read shows it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Ending {
    /// `delivered`, `timed_out`, `adopted`, `rejected`, `undecided`, `dropped`, `voided`, ...
    pub kind: String,
    pub cause: Cause,
    /// Log index of the ending fact.
    pub index: u64,
    /// When it fired (history timeline, ns).
    #[serde(default)]
    pub at: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct View {
    id: String,
    due: u64,
    #[serde(default)]
    endings: Vec<Ending>,
}

#[derive(Debug, Deserialize)]
struct Created {
    id: String,
    due: u64,
}

struct Read<'h> {
    pair: Pair<'h>,
    views: BTreeMap<String, View>,
}

#[derive(Default)]
struct Obligation<'h> {
    due: Option<u64>,
    created_by: Vec<Pair<'h>>,
    actions: Vec<Pair<'h>>,
    /// The first ending any read showed, and that read.
    agreed: Option<(Ending, Pair<'h>)>,
}

fn show(e: &Ending) -> String {
    format!("{} (by {}) at log index {}", e.kind, e.cause, e.index)
}

fn witness(a: &Pair<'_>, b: &Pair<'_>) -> Vec<u64> {
    let mut w = a.indexes();
    w.extend(b.indexes());
    w
}

/// Checks a deadlines history. See the module docs.
pub fn check(history: &History, opts: &Options) -> Verdict {
    let mut v = Verdict::new("deadlines", KINDS);
    let eps = opts.allowed_skew_ns;
    let mut obligations: BTreeMap<String, Obligation<'_>> = BTreeMap::new();
    let mut reads: Vec<Read<'_>> = Vec::new();

    for p in history.pairs() {
        if let Some(id) = p.request().get("ends").and_then(Value::as_str) {
            obligations.entry(id.to_owned()).or_default().actions.push(p);
        }
        if let Some(created) = p.response().and_then(|r| r.get("created")) {
            match Vec::<Created>::deserialize(created) {
                Ok(list) => {
                    for c in list {
                        let o = obligations.entry(c.id).or_default();
                        o.due.get_or_insert(c.due);
                        o.created_by.push(p);
                    }
                }
                Err(e) => v.undecided("malformed", p.indexes(), format!("bad `created` list: {e}")),
            }
        }
        if matches!(p.f(), READ | FINAL_READ) {
            let Some(resp) = p.response() else { continue };
            match resp.get("obligations").map(Vec::<View>::deserialize) {
                Some(Ok(list)) => {
                    reads.push(Read { pair: p, views: list.into_iter().map(|view| (view.id.clone(), view)).collect() })
                }
                Some(Err(e)) => v.undecided("malformed", p.indexes(), format!("bad `obligations` list: {e}")),
                None => v.undecided("malformed", p.indexes(), "a read must return its obligations"),
            }
        }
    }

    // Reads: at most one ending each (L5), the same ending everywhere, never un-ended.
    for r in &reads {
        for (id, view) in &r.views {
            let o = obligations.entry(id.clone()).or_default();
            o.due = Some(view.due);
            if view.endings.len() > 1 {
                let all: Vec<String> = view.endings.iter().map(show).collect();
                v.flag(
                    "double_ended",
                    r.pair.indexes(),
                    format!(
                        "obligation {id} ended {} times on node {}: {} (L5)",
                        all.len(),
                        node(&r.pair),
                        all.join("; ")
                    ),
                );
            }
            let Some(first) = view.endings.first() else { continue };
            match &o.agreed {
                None => o.agreed = Some((first.clone(), r.pair)),
                Some((e, by)) if e != first => v.flag(
                    "disagreement",
                    witness(by, &r.pair),
                    format!(
                        "obligation {id}: node {} shows {}, node {} shows {}",
                        node(by),
                        show(e),
                        node(&r.pair),
                        show(first)
                    ),
                ),
                Some(_) => {}
            }
        }
    }
    for id in obligations.keys() {
        let ended: Vec<&Read<'_>> =
            reads.iter().filter(|r| r.views.get(id).is_some_and(|view| !view.endings.is_empty())).collect();
        for r in &reads {
            if !r.views.get(id).is_some_and(|view| view.endings.is_empty()) {
                continue;
            }
            let both_final = |e: &&&Read<'_>| e.pair.f() == FINAL_READ && r.pair.f() == FINAL_READ;
            if let Some(e) = ended.iter().find(|e| e.pair.precedes(&r.pair)) {
                let kind = if both_final(&e) { "disagreement" } else { "stale_read" };
                v.flag(
                    kind,
                    witness(&e.pair, &r.pair),
                    format!(
                        "obligation {id} ended per a read on node {}, but a later read on node {} shows it open",
                        node(&e.pair),
                        node(&r.pair)
                    ),
                );
            } else if let Some(e) = ended.iter().find(both_final) {
                v.flag(
                    "disagreement",
                    witness(&e.pair, &r.pair),
                    format!(
                        "obligation {id}: the final read on node {} shows it ended, on node {} open",
                        node(&e.pair),
                        node(&r.pair)
                    ),
                );
            }
        }
    }

    // Final reads: everything acknowledged is there, and everything due has ended.
    let finals: Vec<&Read<'_>> = reads.iter().filter(|r| r.pair.f() == FINAL_READ).collect();
    no_final_read(&mut v, finals.len(), opts.require_final_read, "endings after recovery are not shown");
    let mut open_not_due = BTreeSet::new();
    for (id, o) in &obligations {
        let mut open_after_due: Vec<&Read<'_>> = Vec::new();
        let mut ended_somewhere = false;
        for r in &finals {
            match r.views.get(id) {
                None => {
                    let acked = o.created_by.iter().find(|p| p.is_ok()).map(|p| (p, "created by an acknowledged op"));
                    let seen = || reads.iter().find(|x| x.views.contains_key(id)).map(|x| (&x.pair, "shown by a read"));
                    if let Some((by, how)) = acked.or_else(seen) {
                        v.flag(
                            "missing",
                            witness(by, &r.pair),
                            format!(
                                "obligation {id} was {how}, but the final read on node {} lacks it (L1)",
                                node(&r.pair)
                            ),
                        );
                    }
                }
                Some(view) if view.endings.is_empty() => {
                    let grace = view.due.saturating_add(eps).saturating_add(opts.lateness_bound_ns.unwrap_or(0));
                    if r.pair.invoke_time() > grace {
                        open_after_due.push(r);
                    } else {
                        open_not_due.insert(id.clone());
                    }
                }
                Some(_) => ended_somewhere = true,
            }
        }
        // Open on some nodes only is a `disagreement` (above); open everywhere means no exit fired.
        if !ended_somewhere && let Some(first) = open_after_due.first() {
            let nodes: Vec<&str> = open_after_due.iter().map(|r| node(&r.pair)).collect();
            v.flag(
                "never_ended",
                open_after_due.iter().flat_map(|r| r.pair.indexes()).collect(),
                format!(
                    "obligation {id} (due {}) is still open in the final reads on {} from {} on (L4)",
                    o.due.unwrap_or(0),
                    nodes.join(", "),
                    first.pair.invoke_time()
                ),
            );
        }
    }

    // Timing of endings (L4), client-side agreement, lateness.
    let mut lateness = Vec::new();
    let (mut by_deadline, mut by_action, mut by_other, mut ended, mut actions) = (0, 0, 0, 0, 0);
    for (id, o) in &obligations {
        actions += o.actions.len() as u64;
        let Some(due) = o.due else { continue };
        if let Some((e, by)) = &o.agreed {
            ended += 1;
            match e.cause {
                Cause::Deadline => {
                    by_deadline += 1;
                    if let Some(at) = e.at {
                        if at.saturating_add(eps) < due {
                            v.flag(
                                "early_fire",
                                by.indexes(),
                                format!(
                                    "obligation {id} ended by its deadline at {at}, before due {due} − ε {eps} (L4)"
                                ),
                            );
                        }
                        let late = at.saturating_sub(due);
                        lateness.push(late);
                        if let Some(bound) = opts.lateness_bound_ns.filter(|b| late > *b) {
                            v.flag(
                                "late",
                                by.indexes(),
                                format!("obligation {id} ended {late} ns after its due {due}, bound {bound}"),
                            );
                        }
                    }
                    // Observed in real time: a read that completed before due − ε already saw it.
                    let seen_early = reads.iter().find(|r| {
                        r.views.get(id).is_some_and(|view| !view.endings.is_empty())
                            && r.pair.complete_time().is_some_and(|t| t.saturating_add(eps) < due)
                    });
                    if let Some(r) = seen_early {
                        v.flag(
                            "early_fire",
                            r.pair.indexes(),
                            format!(
                                "obligation {id} (due {due}) was already ended by its deadline in a read on node {} \
                                 that completed at {} (L4)",
                                node(&r.pair),
                                r.pair.complete_time().unwrap_or(0)
                            ),
                        );
                    }
                }
                Cause::Action => {
                    by_action += 1;
                    if let Some(at) = e.at.filter(|at| *at > due.saturating_add(eps)) {
                        v.flag(
                            "late_action",
                            by.indexes(),
                            format!("obligation {id} was ended by an action at {at}, after its due {due} + ε {eps}: the deadline wins (L4)"),
                        );
                    }
                }
                Cause::Other => by_other += 1,
            }
        }
        check_actions(&mut v, id, o, due, eps);
    }
    lateness.sort_unstable();

    v.count("obligations", obligations.len() as u64);
    v.count("ended", ended);
    v.count("ended_by_deadline", by_deadline);
    v.count("ended_by_action", by_action);
    v.count("ended_other", by_other);
    v.count("open_not_due", open_not_due.len() as u64);
    v.count("actions", actions);
    v.count("reads", reads.len() as u64);
    v.count("final_reads", finals.len() as u64);
    v.count("max_lateness_ns", lateness.last().copied().unwrap_or(0));
    v.count("p99_lateness_ns", quantile(&lateness, 0.99));
    v
}

/// The client's view of actions on one obligation against its agreed ending.
fn check_actions(v: &mut Verdict, id: &str, o: &Obligation<'_>, due: u64, eps: u64) {
    let ending = o.agreed.as_ref().map(|(e, _)| e);
    let mut acked: Vec<&Pair<'_>> = Vec::new();
    for a in &o.actions {
        if a.is_ok() {
            if a.invoke_time() > due.saturating_add(eps) {
                v.flag(
                    "late_action",
                    a.indexes(),
                    format!(
                        "an action on obligation {id} invoked at {} was acknowledged after its due {due} + ε {eps}: \
                         the deadline wins (L4)",
                        a.invoke_time()
                    ),
                );
            }
            if let Some(e) = ending.filter(|e| e.cause != Cause::Action) {
                v.flag(
                    "action_not_applied",
                    a.indexes(),
                    format!("an action on obligation {id} was acknowledged, but it ended as {}", show(e)),
                );
            }
            acked.push(a);
        } else if a.failed_with(DEADLINE_PASSED) {
            let wrong_cause = ending.filter(|e| e.cause != Cause::Deadline);
            let too_soon = a.complete_time().filter(|t| t.saturating_add(eps) < due);
            if let Some(e) = wrong_cause {
                v.flag(
                    "spurious_late_reject",
                    a.indexes(),
                    format!(
                        "an action on obligation {id} was refused with DEADLINE_PASSED, but it ended as {}",
                        show(e)
                    ),
                );
            } else if let Some(t) = too_soon {
                v.flag(
                    "spurious_late_reject",
                    a.indexes(),
                    format!("an action on obligation {id} was refused with DEADLINE_PASSED at {t}, before due {due} − ε {eps}"),
                );
            }
        }
    }
    // Replays under one idempotency key return the same result; two different requests may not
    // both end it (L5). An action without a key counts as its own request.
    if let Some((first, rest)) = acked.split_first() {
        let differs = |b: &&&Pair<'_>| b.idem().is_none() || b.idem() != first.idem();
        if let Some(other) = rest.iter().find(differs) {
            v.flag(
                "double_ended",
                witness(first, other),
                format!("two different actions were both acknowledged as ending obligation {id} (L5)"),
            );
        }
    }
}

fn node<'a>(p: &Pair<'a>) -> &'a str {
    p.node().unwrap_or("?")
}
