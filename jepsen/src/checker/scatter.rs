//! The `scatter` checker: a scatter is one atomic action, all or nothing, the same on every node
//! (COORDINATION §4.3–§4.5; `docs/coordination.md`, "Collectives").
//!
//! **Model.** A scatter by the lead to members `M` of a thread is one command that posts a header
//! entry, then one entry per rank replying to the header with an assignment addressed to that
//! rank's member, then the `Scattered` fact that makes them a collective: `GetCollective(header)`
//! lists `|M|` ranks, rank `r` being the `r`-th smallest member id (numeric: `ag_9` before
//! `ag_10`), each with its entry and assignment. A refusal of any rank (a goal naming an agent who
//! is not a member: `INVALID_TARGET`) rejects the whole scatter and nothing is recorded on any
//! node. An idempotency key produces at most one collective however often it is sent (L3).
//!
//! Every entry of the workload's threads names its scatter in its content: `<id>/h` for the header,
//! `<id>/g/<member>` for the goal of `member` ([`header_body`], [`goal_body`]).
//!
//! **What it proves**, for every scatter (one idempotency key; `ok`, `fail` or `info`) on every
//! node's final read of its thread:
//!
//! - `partial`: the node holds some of the scatter's entries but not exactly the header plus one
//!   goal entry per requested member, each replying to the header with an assignment, and a
//!   collective at the header. Any partial scatter on any node is an atomicity violation.
//! - `collective_mismatch`: the collective at the header has another size, or its ranks are not the
//!   requested members in ascending id order with the goal entries (contiguous after the header)
//!   and their assignments.
//! - `double_collective`: one key produced more than one header (two collectives) on a node.
//! - `lost`: an acknowledged scatter is absent from a node.
//! - `failed_present`: every attempt definitely failed, yet the scatter is on a node.
//! - `invalid_present`, `invalid_accepted`: a scatter naming a non-member (which must always be
//!   refused `INVALID_TARGET`) is on a node, or was acknowledged.
//! - `wrong_refusal`: a scatter naming a non-member was definitely refused with a verdict other
//!   than `INVALID_TARGET` (routing answers such as `NOT_LEADER` or `UNAVAILABLE` aside).
//! - `spurious_invalid_target`: a scatter naming members only was refused `INVALID_TARGET`.
//! - `divergence`: an unacknowledged scatter is present on some nodes and absent on others.
//! - `receipt_mismatch`: two acknowledgments of one key differ, or an acknowledgment's header,
//!   ranks, entries or assignments are not what a node holds.
//! - `unexpected`: an entry of a scatter thread names no scatter invoked into that thread.
//!
//! An indeterminate scatter may be present or absent, but the same on every node.
//!
//! **History schema.**
//!
//! | f | invoke value | ok value |
//! |---|---|---|
//! | `scatter` (op `idem`: the client's key) | `{"id", "thread", "members": [requested, valid], "outsider"?: non-member, "resend"?}` | `{"header", "ranks": [{"rank", "member", "entry", "assignment"}], "replayed"?}` |
//! | `void` | `{"thread", "assignment"}` (frees capacity; counted only) | |
//! | `final-read` | `{"thread"}` | `{"thread", "entries": [{"seq", "body", "author"?, "reply_to"?, "assignment"?}], "collectives": [{"header", "size", "ranks": [...]}]}` |
//!
//! A final read lists every entry of the thread on one node and, for every header among them,
//! the collective the node answers (absent when it answers none).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::Verdict;
use super::common::{Outcomes, no_final_read};
use super::val::{str_field, u64_field};
use crate::history::{FINAL_READ, History, Pair};

/// `f` of a scatter.
pub const SCATTER: &str = "scatter";
/// `f` of a void of a scattered assignment (keeps the thread under its open-assignment limit).
pub const VOID: &str = "void";
/// The refusal a scatter naming a non-member must get.
pub const INVALID_TARGET: &str = "INVALID_TARGET";
/// Definite refusals that only say the node could not decide now; nothing about the request.
pub const ROUTING: &[&str] = &["NOT_LEADER", "UNAVAILABLE", "RATE_LIMITED"];

/// Anomaly kinds this checker reports.
pub const KINDS: &[&str] = &[
    "partial",
    "collective_mismatch",
    "double_collective",
    "lost",
    "failed_present",
    "invalid_present",
    "invalid_accepted",
    "wrong_refusal",
    "spurious_invalid_target",
    "divergence",
    "receipt_mismatch",
    "unexpected",
];

/// Options of the scatter checker.
pub use super::common::RequireFinalRead as Options;

/// The content of scatter `id`'s header entry.
pub fn header_body(id: &str) -> String {
    format!("{id}/h")
}

/// The content of scatter `id`'s goal entry for `member`.
pub fn goal_body(id: &str, member: &str) -> String {
    format!("{id}/g/{member}")
}

/// What an entry of a scatter thread is, from its content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    Header,
    Goal(String),
}

/// Parses `<id>/h` or `<id>/g/<member>`.
pub fn parse_body(body: &str) -> Option<(String, Part)> {
    if let Some(id) = body.strip_suffix("/h") {
        return (!id.is_empty() && !id.contains('/')).then(|| (id.to_owned(), Part::Header));
    }
    let (id, member) = body.split_once("/g/")?;
    (!id.is_empty() && !id.contains('/') && !member.is_empty()).then(|| (id.to_owned(), Part::Goal(member.to_owned())))
}

/// The order of agent ids: numeric on the part after the last `_` (`ag_9` before `ag_10`), as
/// `AgentId` orders; ids without a number after every numbered one, by text.
fn id_order(id: &str) -> (u8, u64, String) {
    match id.rsplit_once('_').and_then(|(_, n)| n.parse::<u64>().ok()) {
        Some(n) => (0, n, id.to_owned()),
        None => (1, 0, id.to_owned()),
    }
}

/// `members` in rank order (ascending agent id).
pub fn rank_order(members: &[String]) -> Vec<String> {
    let mut m = members.to_vec();
    m.sort_by_key(|id| id_order(id));
    m.dedup();
    m
}

/// One logical scatter: every attempt under one idempotency key.
struct Scatter<'h> {
    key: String,
    id: String,
    thread: String,
    /// The requested members, in rank order.
    ranks: Vec<String>,
    outsider: Option<String>,
    attempts: Vec<Pair<'h>>,
}

impl Scatter<'_> {
    fn acked(&self) -> bool {
        self.attempts.iter().any(Pair::is_ok)
    }
    fn all_failed(&self) -> bool {
        self.attempts.iter().all(Pair::is_fail)
    }
    fn witness(&self) -> Vec<u64> {
        self.attempts.iter().flat_map(Pair::indexes).collect()
    }
    fn name(&self) -> String {
        format!("scatter {} (key {})", self.id, self.key)
    }
}

#[derive(Clone, Debug, PartialEq)]
struct Rank {
    rank: u64,
    member: String,
    entry: u64,
    assignment: Option<String>,
}

fn parse_ranks(v: &Value) -> Option<Vec<Rank>> {
    v.as_array()?
        .iter()
        .map(|r| {
            Some(Rank {
                rank: u64_field(r, "rank")?,
                member: str_field(r, "member")?.to_owned(),
                entry: u64_field(r, "entry")?,
                assignment: str_field(r, "assignment").filter(|a| !a.is_empty()).map(str::to_owned),
            })
        })
        .collect()
}

struct Entry {
    seq: u64,
    body: String,
    reply_to: Option<u64>,
    assignment: Option<String>,
}

struct Collective {
    size: u64,
    ranks: Vec<Rank>,
}

/// One node's final read of one thread.
struct View<'h> {
    pair: Pair<'h>,
    node: String,
    thread: String,
    entries: Vec<Entry>,
    collectives: BTreeMap<u64, Collective>,
}

/// The entries of one scatter id on one node.
#[derive(Default)]
struct Found<'v> {
    headers: Vec<&'v Entry>,
    goals: Vec<(String, &'v Entry)>,
}

fn parse_view<'h>(p: Pair<'h>) -> Option<View<'h>> {
    let resp = p.response()?;
    let thread = str_field(p.request(), "thread").or_else(|| str_field(resp, "thread"))?.to_owned();
    let entries = resp
        .get("entries")?
        .as_array()?
        .iter()
        .map(|e| {
            Some(Entry {
                seq: u64_field(e, "seq")?,
                body: str_field(e, "body")?.to_owned(),
                reply_to: u64_field(e, "reply_to"),
                assignment: str_field(e, "assignment").filter(|a| !a.is_empty()).map(str::to_owned),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let mut collectives = BTreeMap::new();
    for c in resp.get("collectives").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
        let header = u64_field(c, "header")?;
        let ranks = parse_ranks(c.get("ranks")?)?;
        collectives.insert(header, Collective { size: u64_field(c, "size")?, ranks });
    }
    Some(View { pair: p, node: p.node().unwrap_or("?").to_owned(), thread, entries, collectives })
}

fn both(a: &Pair<'_>, b: &Pair<'_>) -> Vec<u64> {
    let mut w = a.indexes();
    w.extend(b.indexes());
    w
}

/// Checks a scatter history. See the module docs.
pub fn check(history: &History, opts: &Options) -> Verdict {
    let mut v = Verdict::new("scatter", KINDS);
    let mut scatters: BTreeMap<String, Scatter<'_>> = BTreeMap::new();
    let mut views: Vec<View<'_>> = Vec::new();
    let mut failed_finals: Vec<Pair<'_>> = Vec::new();
    let mut outcomes = Outcomes::default();
    let (mut resends, mut voids) = (0, 0);

    for p in history.pairs() {
        match p.f() {
            SCATTER => {
                let req = p.request();
                let (Some(id), Some(thread), Some(members)) = (
                    str_field(req, "id"),
                    str_field(req, "thread"),
                    req.get("members")
                        .and_then(Value::as_array)
                        .and_then(|m| m.iter().map(|x| x.as_str().map(str::to_owned)).collect::<Option<Vec<String>>>()),
                ) else {
                    v.undecided("malformed", p.indexes(), "a scatter must name its id, thread and members");
                    continue;
                };
                let Some(key) = p.idem() else {
                    v.undecided("malformed", p.indexes(), format!("scatter {id} carries no idempotency key"));
                    continue;
                };
                outcomes.tally(&p);
                if req.get("resend").and_then(Value::as_bool) == Some(true) {
                    resends += 1;
                }
                let outsider = str_field(req, "outsider").map(str::to_owned);
                let s = scatters.entry(key.to_owned()).or_insert_with(|| Scatter {
                    key: key.to_owned(),
                    id: id.to_owned(),
                    thread: thread.to_owned(),
                    ranks: rank_order(&members),
                    outsider: outsider.clone(),
                    attempts: Vec::new(),
                });
                if s.id != id || s.thread != thread || s.ranks != rank_order(&members) || s.outsider != outsider {
                    v.undecided(
                        "malformed",
                        p.indexes(),
                        format!("key {key} is used for two different scatters ({} and {id})", s.id),
                    );
                    continue;
                }
                s.attempts.push(p);
            }
            VOID => voids += 1,
            FINAL_READ => {
                if !p.is_ok() {
                    if p.completion.is_some() {
                        failed_finals.push(p);
                    }
                    continue;
                }
                match parse_view(p) {
                    Some(view) => views.push(view),
                    None => v.undecided(
                        "malformed",
                        p.indexes(),
                        "a final read must name its thread and list entries (seq, body) and collectives",
                    ),
                }
            }
            _ => {}
        }
    }

    for p in &failed_finals {
        v.undecided(
            "missing_final_read",
            p.indexes(),
            format!(
                "the final read of thread {} on node {} failed: its scatters are not checked there",
                str_field(p.request(), "thread").unwrap_or("?"),
                p.node().unwrap_or("?")
            ),
        );
    }
    no_final_read(&mut v, views.len(), opts.require_final_read, "atomicity and survival are not shown");

    // The outcome of each attempt on its own.
    let by_id: BTreeMap<&str, &Scatter<'_>> = scatters.values().map(|s| (s.id.as_str(), s)).collect();
    let mut invalid_refused = 0;
    for s in scatters.values() {
        for p in &s.attempts {
            match (&s.outsider, p.is_ok(), p.is_fail(), p.error()) {
                (Some(o), true, _, _) => v.flag(
                    "invalid_accepted",
                    p.indexes(),
                    format!("{}: acknowledged although it names {o}, who is not a member", s.name()),
                ),
                (Some(_), _, true, Some(INVALID_TARGET)) => invalid_refused += 1,
                (Some(o), _, true, code) if !code.is_some_and(|c| ROUTING.contains(&c)) => v.flag(
                    "wrong_refusal",
                    p.indexes(),
                    format!(
                        "{}: names the non-member {o}, refused {} instead of {INVALID_TARGET}",
                        s.name(),
                        code.unwrap_or("without a code")
                    ),
                ),
                (None, _, true, Some(INVALID_TARGET)) => v.flag(
                    "spurious_invalid_target",
                    p.indexes(),
                    format!("{}: refused {INVALID_TARGET} although every goal names a member {:?}", s.name(), s.ranks),
                ),
                _ => {}
            }
        }
        let acks: Vec<&Pair<'_>> = s.attempts.iter().filter(|p| p.is_ok()).collect();
        for other in acks.iter().skip(1) {
            let (a, b) = (acks[0].response(), other.response());
            let key = |r: Option<&Value>| r.map(|r| (r.get("header").cloned(), r.get("ranks").cloned()));
            if key(a) != key(b) {
                v.flag(
                    "receipt_mismatch",
                    both(acks[0], other),
                    format!("{}: two acknowledgments of one key differ: {:?} vs {:?}", s.name(), key(a), key(b)),
                );
            }
        }
    }

    // Each node's entries: which scatter each names.
    let mut found: Vec<BTreeMap<String, Found<'_>>> = Vec::with_capacity(views.len());
    for view in &views {
        let mut ids: BTreeMap<String, Found<'_>> = BTreeMap::new();
        for e in &view.entries {
            let parsed = parse_body(&e.body);
            let known = parsed.as_ref().and_then(|(id, _)| by_id.get(id.as_str())).filter(|s| s.thread == view.thread);
            match (parsed, known) {
                (Some((id, part)), Some(_)) => {
                    let f = ids.entry(id).or_default();
                    match part {
                        Part::Header => f.headers.push(e),
                        Part::Goal(member) => f.goals.push((member, e)),
                    }
                }
                _ => v.flag(
                    "unexpected",
                    view.pair.indexes(),
                    format!(
                        "thread {} on node {}: entry {} holds {:?}, which names no scatter invoked into this thread",
                        view.thread, view.node, e.seq, e.body
                    ),
                ),
            }
        }
        found.push(ids);
    }

    let (mut present_ops, mut collectives_seen) = (0, 0);
    for s in scatters.values() {
        let mut presence: Vec<(&View<'_>, bool)> = Vec::new();
        for (view, ids) in views.iter().zip(&found).filter(|(view, _)| view.thread == s.thread) {
            let f = ids.get(&s.id);
            let present = f.is_some();
            presence.push((view, present));
            let mut w = s.witness();
            w.extend(view.pair.indexes());
            if let Some(f) = f {
                collectives_seen += f.headers.len() as u64;
                if let Some(o) = &s.outsider {
                    v.flag(
                        "invalid_present",
                        w.clone(),
                        format!("{}: names the non-member {o}, yet node {} holds its entries", s.name(), view.node),
                    );
                } else {
                    check_structure(&mut v, s, view, f, &w);
                    if s.all_failed() {
                        v.flag(
                            "failed_present",
                            w.clone(),
                            format!(
                                "{}: every attempt definitely failed, yet node {} holds it (fail means no effect)",
                                s.name(),
                                view.node
                            ),
                        );
                    }
                }
            } else if s.acked() && s.outsider.is_none() {
                v.flag(
                    "lost",
                    w,
                    format!("{}: acknowledged, but node {} holds none of its entries", s.name(), view.node),
                );
            }
        }
        if presence.iter().any(|(_, p)| *p) {
            present_ops += 1;
        }
        if !s.acked()
            && s.outsider.is_none()
            && let (Some(yes), Some(no)) = (presence.iter().find(|(_, p)| *p), presence.iter().find(|(_, p)| !*p))
        {
            let mut w = s.witness();
            w.extend(yes.0.pair.indexes());
            w.extend(no.0.pair.indexes());
            v.flag(
                "divergence",
                w,
                format!(
                    "{} (outcome unknown): node {} holds it, node {} does not; it must be the same on every node",
                    s.name(),
                    yes.0.node,
                    no.0.node
                ),
            );
        }
    }

    v.count("scatters", scatters.len() as u64);
    outcomes.count(&mut v, Some("attempts"));
    v.count("resends", resends);
    v.count("invalid_rank_ops", scatters.values().filter(|s| s.outsider.is_some()).count() as u64);
    v.count("invalid_target_refusals", invalid_refused);
    v.count("present", present_ops);
    v.count("collectives_seen", collectives_seen);
    v.count("voids", voids);
    v.count("final_reads", views.len() as u64);
    v
}

/// The shape of one present scatter on one node: header, goals, collective, receipts.
fn check_structure(v: &mut Verdict, s: &Scatter<'_>, view: &View<'_>, f: &Found<'_>, w: &[u64]) {
    let at = format!("{} on node {}", s.name(), view.node);
    if f.headers.len() > 1 {
        let seqs: Vec<u64> = f.headers.iter().map(|e| e.seq).collect();
        v.flag(
            "double_collective",
            w.to_vec(),
            format!(
                "{at}: one key produced {} headers (entries {seqs:?}); a key never makes two collectives",
                seqs.len()
            ),
        );
    }
    let goals: Vec<(&str, u64)> = f.goals.iter().map(|(m, e)| (m.as_str(), e.seq)).collect();
    let Some(header) = f.headers.first() else {
        v.flag("partial", w.to_vec(), format!("{at}: goal entries {goals:?} without a header"));
        return;
    };
    let mut problems: Vec<String> = Vec::new();
    let mut by_member: BTreeMap<&str, Vec<&Entry>> = BTreeMap::new();
    for (m, e) in &f.goals {
        by_member.entry(m.as_str()).or_default().push(e);
    }
    let requested: BTreeSet<&str> = s.ranks.iter().map(String::as_str).collect();
    let missing: Vec<&str> = requested.iter().filter(|m| !by_member.contains_key(*m)).copied().collect();
    let extra: Vec<&str> = by_member.keys().filter(|m| !requested.contains(*m)).copied().collect();
    let doubled: Vec<&str> = by_member.iter().filter(|(_, es)| es.len() > 1).map(|(m, _)| *m).collect();
    if !missing.is_empty() {
        problems.push(format!("no goal entry for {missing:?}"));
    }
    if !extra.is_empty() {
        problems.push(format!("goal entries for {extra:?}, who were not requested"));
    }
    if !doubled.is_empty() {
        problems.push(format!("several goal entries for {doubled:?}"));
    }
    for (m, e) in &f.goals {
        if e.reply_to != Some(header.seq) {
            problems.push(format!("the goal entry {} of {m} does not reply to the header {}", e.seq, header.seq));
        }
        if e.assignment.is_none() {
            problems.push(format!("the goal entry {} of {m} has no assignment", e.seq));
        }
    }
    let collective = view.collectives.get(&header.seq);
    if collective.is_none() {
        problems.push(format!("no collective at the header {}", header.seq));
    }
    if !problems.is_empty() {
        v.flag(
            "partial",
            w.to_vec(),
            format!(
                "{at}: header {} with goals {goals:?} for requested {:?}: {} — a scatter is all or nothing",
                header.seq,
                s.ranks,
                problems.join("; ")
            ),
        );
        return;
    }
    let Some(c) = collective else { return };

    // The collective: its size, and its ranks in ascending member id, contiguous after the header.
    let mut wrong: Vec<String> = Vec::new();
    let n = s.ranks.len() as u64;
    if c.size != n || c.ranks.len() as u64 != n {
        wrong.push(format!("size {} with {} ranks, but {n} members were requested", c.size, c.ranks.len()));
    }
    for (r, member) in s.ranks.iter().enumerate() {
        let Some(rank) = c.ranks.get(r) else { break };
        let goal = by_member.get(member.as_str()).and_then(|es| es.first());
        if rank.rank != r as u64 || rank.member != *member {
            wrong.push(format!("rank {r} is {} (rank {}), expected {member}", rank.member, rank.rank));
        }
        if let Some(g) = goal {
            if rank.entry != g.seq {
                wrong.push(format!("rank {r} points at entry {}, the goal of {member} is entry {}", rank.entry, g.seq));
            }
            if rank.assignment.is_some() && rank.assignment != g.assignment {
                wrong
                    .push(format!("rank {r}'s assignment {:?} is not its entry's {:?}", rank.assignment, g.assignment));
            }
        }
        if rank.entry != header.seq + 1 + r as u64 {
            wrong.push(format!(
                "rank {r}'s entry {} does not follow the header {} contiguously",
                rank.entry, header.seq
            ));
        }
    }
    if !wrong.is_empty() {
        v.flag("collective_mismatch", w.to_vec(), format!("{at}: {}", wrong.join("; ")));
    }

    // Every acknowledgment names what the node holds.
    for p in s.attempts.iter().filter(|p| p.is_ok()) {
        let Some(resp) = p.response() else { continue };
        let acked_header = u64_field(resp, "header");
        let acked_ranks = resp.get("ranks").and_then(parse_ranks);
        let same_ranks = acked_ranks.as_ref().is_some_and(|rs| {
            rs.len() == c.ranks.len()
                && rs.iter().zip(&c.ranks).all(|(a, b)| {
                    a.rank == b.rank
                        && a.member == b.member
                        && a.entry == b.entry
                        && (a.assignment.is_none() || b.assignment.is_none() || a.assignment == b.assignment)
                })
        });
        if acked_header != Some(header.seq) || !same_ranks {
            let mut w2 = p.indexes();
            w2.extend(view.pair.indexes());
            v.flag(
                "receipt_mismatch",
                w2,
                format!(
                    "{at}: acknowledged with header {acked_header:?} and ranks {:?}, but the node holds header {} and ranks {:?}",
                    acked_ranks.unwrap_or_default().iter().map(|r| (&r.member, r.entry)).collect::<Vec<_>>(),
                    header.seq,
                    c.ranks.iter().map(|r| (&r.member, r.entry)).collect::<Vec<_>>()
                ),
            );
        }
    }
}
