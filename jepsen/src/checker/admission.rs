//! The `admission` checker: adoption limits hold, first come first served (§7.4, L5).
//!
//! **Model.** Each Task is an independent object: a set `S` of adopted deliveries with a limit
//! `L` (the contract's maximum number of adoptions). Only adoptions count (§7.4), and they are
//! irreversible (§7.3), so `S` only grows:
//!
//! - `adopt(a)` → `ok`: legal iff `a ∈ S` (a replay) or `|S| < L`; then `S ∪ {a}`.
//! - `adopt(a)` → `fail ADOPTION_LIMIT_REACHED`: legal iff `a ∉ S` and `|S| ≥ L`; no change.
//! - `adopt(a)` → indeterminate: takes effect with the model's result, or never.
//! - `read` → `S`: the adopters read.
//!
//! Any other `fail` of an adopt (not delivered, not the judge, ...) had no effect and is left out.
//!
//! **What it proves.** Per Task, a [WGL](super::wgl) search finds a serial order of adoptions
//! and reads that respects real time, or reports none exists (`nonlinearizable`). Besides that
//! search, direct checks name the usual failures precisely:
//!
//! - `over_limit`: more distinct adoptions acknowledged (or read) than the limit (§7.4, L5;
//!   §10.2 item 4 "no limit overrun").
//! - `fcfs_violation`: a refusal for the limit although fewer than `L` other adoptions were
//!   acknowledged or still pending when the refusal completed. The limit is checked at the
//!   moment of adoption, first come first served (§7.4): a refusal needs `L` earlier adoptions.
//! - `phantom`: a read shows an adopter for whom no adopt was invoked before the read completed.
//! - `lost`: a read misses an adoption acknowledged before the read was invoked.
//!
//! **History schema.**
//!
//! | f | invoke value | ok value |
//! |---|---|---|
//! | `create` | `{"task", "max_adoptions"}` | same (the limit of the Task) |
//! | `adopt` | `{"task", "engagement"}` or `{"task", "agent"}` | same |
//! | `read` / `final-read` | `{"task"}` | `{"task", "adopters": [engagement or agent, ...]}` |
//!
//! The set's members are the adopted engagements. `engagement` names one; `agent` (the engaged
//! agent) is enough when no agent engages twice with one Task. Tasks start with no adoptions.
//!
//! A refusal for the limit is a `fail` with `error: "ADOPTION_LIMIT_REACHED"`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::Verdict;
use super::val::{ident_list, str_field, u64_field};
use super::wgl::{self, Entry, Model, WglOptions, WglResult};
use crate::history::{FINAL_READ, History, Pair, READ};

/// `f` of the op that creates a Task with its limit.
pub const CREATE: &str = "create";
/// `f` of an adoption attempt.
pub const ADOPT: &str = "adopt";
/// The error code of a refusal for the limit (§7.4).
pub const LIMIT_REACHED: &str = "ADOPTION_LIMIT_REACHED";

/// Anomaly kinds this checker reports.
pub const KINDS: &[&str] = &["over_limit", "fcfs_violation", "phantom", "lost", "nonlinearizable"];

/// Options of the admission checker.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Per-Task limits; override the `create` ops of the history.
    pub limits: BTreeMap<String, u32>,
    /// The limit of a Task the history does not create.
    pub default_limit: Option<u32>,
    pub wgl: WglOptions,
}

/// The WGL model: the adopters of one Task, bounded by its limit.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BoundedSet {
    pub limit: u32,
    /// Interned agent ids, sorted.
    pub members: Vec<u32>,
}

/// What an adopt returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdoptResult {
    Adopted,
    /// `ADOPTION_LIMIT_REACHED`.
    Refused,
    /// Indeterminate.
    Unknown,
}

/// An operation on a [`BoundedSet`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AdmissionOp {
    Adopt {
        agent: u32,
        result: AdoptResult,
    },
    /// A read and the (sorted, interned) adopters it returned.
    Read(Vec<u32>),
}

impl BoundedSet {
    fn full(&self) -> bool {
        self.members.len() as u64 >= u64::from(self.limit)
    }

    fn with(&self, agent: u32) -> BoundedSet {
        let mut next = self.clone();
        if let Err(pos) = next.members.binary_search(&agent) {
            next.members.insert(pos, agent);
        }
        next
    }
}

impl Model for BoundedSet {
    type Op = AdmissionOp;
    fn step(&self, op: &AdmissionOp) -> Option<BoundedSet> {
        match op {
            AdmissionOp::Read(seen) => (*seen == self.members).then(|| self.clone()),
            AdmissionOp::Adopt { agent, result } => {
                let member = self.members.binary_search(agent).is_ok();
                match result {
                    AdoptResult::Adopted if member => Some(self.clone()),
                    AdoptResult::Adopted => (!self.full()).then(|| self.with(*agent)),
                    // §7.4: refused only when the limit is reached by other adoptions.
                    AdoptResult::Refused => (!member && self.full()).then(|| self.clone()),
                    AdoptResult::Unknown if member || self.full() => Some(self.clone()),
                    AdoptResult::Unknown => Some(self.with(*agent)),
                }
            }
        }
    }
}

#[derive(Default)]
struct TaskOps<'h> {
    adopts: Vec<(Pair<'h>, String)>,
    reads: Vec<(Pair<'h>, BTreeSet<String>)>,
}

/// Checks an admission history. See the module docs.
pub fn check(history: &History, opts: &Options) -> Verdict {
    let mut v = Verdict::new("admission", KINDS);
    let mut limits: BTreeMap<String, u32> = BTreeMap::new();
    let mut tasks: BTreeMap<String, TaskOps<'_>> = BTreeMap::new();
    let (mut attempts, mut ok, mut refused, mut fail_other, mut info, mut reads) = (0, 0, 0, 0, 0, 0);

    for p in history.pairs() {
        let req = p.request();
        match p.f() {
            CREATE => {
                let resp = p.response().unwrap_or(req);
                if let (true, Some(task), Some(max)) =
                    (p.is_ok(), str_field(resp, "task"), u64_field(resp, "max_adoptions"))
                {
                    limits.insert(task.to_owned(), u32::try_from(max).unwrap_or(u32::MAX));
                }
            }
            ADOPT => {
                let member = str_field(req, "engagement").or_else(|| str_field(req, "agent"));
                let (Some(task), Some(agent)) = (str_field(req, "task"), member) else {
                    v.undecided("malformed", p.indexes(), "an adopt must name its task and engagement or agent");
                    continue;
                };
                attempts += 1;
                if p.is_ok() {
                    ok += 1;
                } else if p.failed_with(LIMIT_REACHED) {
                    refused += 1;
                } else if p.is_fail() {
                    fail_other += 1;
                } else {
                    info += 1;
                }
                tasks.entry(task.to_owned()).or_default().adopts.push((p, agent.to_owned()));
            }
            READ | FINAL_READ => {
                let Some(resp) = p.response() else { continue };
                let (Some(task), Some(adopters)) =
                    (str_field(req, "task").or_else(|| str_field(resp, "task")), ident_list(resp, "adopters"))
                else {
                    v.undecided("malformed", p.indexes(), "a read must name its task and return its adopters");
                    continue;
                };
                reads += 1;
                tasks.entry(task.to_owned()).or_default().reads.push((p, adopters.into_iter().collect()));
            }
            _ => {}
        }
    }
    limits.extend(opts.limits.iter().map(|(k, l)| (k.clone(), *l)));

    let mut steps = 0;
    for (task, ops) in &tasks {
        let limit = limits.get(task).copied().or(opts.default_limit);
        check_reads(&mut v, task, ops, limit);
        let Some(limit) = limit else {
            let all: Vec<u64> = ops.adopts.iter().map(|(p, _)| p.invoke_index()).collect();
            v.undecided("unknown_limit", all, format!("task {task}: no create op states its limit"));
            continue;
        };
        check_limit(&mut v, task, ops, limit);
        steps += check_linearizable(&mut v, task, ops, limit, &opts.wgl);
    }

    v.count("objects", tasks.len() as u64);
    v.count("attempts", attempts);
    v.count("ok", ok);
    v.count("refused", refused);
    v.count("fail_other", fail_other);
    v.count("info", info);
    v.count("reads", reads);
    v.count("wgl_steps", steps);
    v
}

/// `over_limit` on acknowledgments and `fcfs_violation` on refusals.
fn check_limit(v: &mut Verdict, task: &str, ops: &TaskOps<'_>, limit: u32) {
    let limit_n = limit as usize;
    // §7.4, L5: acknowledged adoptions never exceed the limit.
    let mut acked: Vec<&(Pair<'_>, String)> = ops.adopts.iter().filter(|(p, _)| p.is_ok()).collect();
    acked.sort_by_key(|(p, _)| p.complete_index());
    let distinct: BTreeSet<&str> = acked.iter().map(|(_, a)| a.as_str()).collect();
    if distinct.len() > limit_n {
        let witness = acked.iter().flat_map(|(p, _)| p.indexes()).collect();
        v.flag(
            "over_limit",
            witness,
            format!(
                "task {task}: {} distinct adoptions acknowledged ({}), limit {limit} (§7.4)",
                distinct.len(),
                distinct.iter().copied().collect::<Vec<_>>().join(", ")
            ),
        );
    }

    // §7.4 first come first served: a refusal for the limit needs `limit` other adoptions that
    // were acknowledged or pending (invoked, maybe in effect) before the refusal completed.
    for (r, agent) in ops.adopts.iter().filter(|(p, _)| p.failed_with(LIMIT_REACHED)) {
        let Some(done) = r.complete_index() else { continue };
        let mut before: BTreeMap<&str, u64> = BTreeMap::new();
        for (p, a) in &ops.adopts {
            if a != agent && p.may_have_happened() && p.invoke_index() < done {
                before.entry(a.as_str()).or_insert(p.invoke_index());
            }
        }
        if before.len() < limit_n {
            let mut witness = r.indexes();
            witness.extend(before.values());
            v.flag(
                "fcfs_violation",
                witness,
                format!(
                    "task {task}: adopt of {agent} refused for the limit (op {done}) although at most {} of {limit} \
                     other adoptions could have taken effect by then ({}) (§7.4 first come first served)",
                    before.len(),
                    before.keys().copied().collect::<Vec<_>>().join(", ")
                ),
            );
        }
        // Adoptions are irreversible, so once a refusal proved the Task full, every later read
        // must still show at least `limit` adopters.
        for (read, seen) in &ops.reads {
            if r.precedes(read) && seen.len() < limit_n {
                let mut witness = r.indexes();
                witness.extend(read.indexes());
                v.flag(
                    "fcfs_violation",
                    witness,
                    format!(
                        "task {task}: adopt of {agent} was refused for the limit, yet a later read shows only {} of \
                         {limit} adopters: the limit was not reached (§7.4)",
                        seen.len()
                    ),
                );
            }
        }
    }
}

/// `over_limit`, `phantom` and `lost` on reads.
fn check_reads(v: &mut Verdict, task: &str, ops: &TaskOps<'_>, limit: Option<u32>) {
    for (r, seen) in &ops.reads {
        let Some(done) = r.complete_index() else { continue };
        if let Some(limit) = limit.filter(|l| seen.len() > *l as usize) {
            v.flag(
                "over_limit",
                r.indexes(),
                format!("task {task}: a read shows {} adopters, limit {limit} (§7.4)", seen.len()),
            );
        }
        for agent in seen {
            let attempted =
                ops.adopts.iter().any(|(p, a)| a == agent && p.may_have_happened() && p.invoke_index() < done);
            if !attempted {
                v.flag(
                    "phantom",
                    r.indexes(),
                    format!(
                        "task {task}: a read shows adopter {agent}, but no adopt of {agent} could have taken effect"
                    ),
                );
            }
        }
        for (p, agent) in &ops.adopts {
            if p.is_ok() && p.precedes(r) && !seen.contains(agent) {
                let mut witness = p.indexes();
                witness.extend(r.indexes());
                v.flag(
                    "lost",
                    witness,
                    format!("task {task}: adoption of {agent} was acknowledged before a read that does not show it"),
                );
            }
        }
    }
}

/// The WGL search for one Task; returns the steps it took.
fn check_linearizable(v: &mut Verdict, task: &str, ops: &TaskOps<'_>, limit: u32, opts: &WglOptions) -> u64 {
    let mut names: Vec<String> = Vec::new();
    let mut ids: HashMap<String, u32> = HashMap::new();
    let mut intern = |name: &str| -> u32 {
        *ids.entry(name.to_owned()).or_insert_with(|| {
            names.push(name.to_owned());
            (names.len() - 1) as u32
        })
    };
    let mut entries = Vec::new();
    let mut describe: HashMap<u64, String> = HashMap::new();
    for (p, agent) in &ops.adopts {
        let result = if p.is_ok() {
            AdoptResult::Adopted
        } else if p.failed_with(LIMIT_REACHED) {
            AdoptResult::Refused
        } else if p.is_indeterminate() {
            AdoptResult::Unknown
        } else {
            continue; // another definite failure: no effect, nothing observed about S
        };
        let ret = if result == AdoptResult::Unknown { None } else { p.complete_index() };
        entries.push(Entry {
            id: p.invoke_index(),
            op: AdmissionOp::Adopt { agent: intern(agent), result },
            call: p.invoke_index(),
            ret,
        });
        describe.insert(p.invoke_index(), format!("adopt {agent} → {result:?}"));
    }
    for (r, seen) in &ops.reads {
        let mut set: Vec<u32> = seen.iter().map(|a| intern(a)).collect();
        set.sort_unstable();
        entries.push(Entry {
            id: r.invoke_index(),
            op: AdmissionOp::Read(set),
            call: r.invoke_index(),
            ret: r.complete_index(),
        });
        describe
            .insert(r.invoke_index(), format!("read → {{{}}}", seen.iter().cloned().collect::<Vec<_>>().join(", ")));
    }
    entries.sort_by_key(|e| e.call);

    let report = wgl::check(&BoundedSet { limit, members: Vec::new() }, &entries, opts);
    match report.result {
        WglResult::Linearizable { .. } => {}
        WglResult::NotLinearizable { prefix, state, stuck } => {
            let members: Vec<&str> = state.members.iter().map(|i| names[*i as usize].as_str()).collect();
            let stuck_text = stuck
                .map(|s| {
                    let what = describe.get(&s).map_or("?", String::as_str);
                    format!("op {s} ({what}) cannot be placed before it completes")
                })
                .unwrap_or_else(|| "no op can be placed next".to_owned());
            let mut witness = prefix.clone();
            witness.extend(stuck);
            v.flag(
                "nonlinearizable",
                witness,
                format!(
                    "task {task} (limit {limit}): no serial order explains the history (L5); after linearizing ops \
                     {prefix:?} the adopters are {{{}}}, and {stuck_text}",
                    members.join(", ")
                ),
            );
        }
        WglResult::Unknown => {
            v.undecided(
                "wgl_bound",
                Vec::new(),
                format!("task {task}: linearizability search stopped after {} steps", report.steps),
            );
        }
    }
    report.steps
}
