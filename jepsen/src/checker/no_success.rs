//! The always-on `no_success` check: a run in which nothing succeeded is invalid.
//!
//! A checker that sees only failures and timeouts passes trivially: no acknowledged write can be
//! lost, no limit overrun acknowledged. Such a run shows nothing about the system (Restate's
//! warning about trivial passes; plan §5.7), and §10.2 asks for observable evidence: "a tool that
//! can be called, or one path that succeeds, proves nothing". So a history with zero `ok` client
//! operations is `Invalid`, and so is one in which a required `f` never succeeded.
//!
//! It also reports the counts per `f` and type (`adopt.ok=12 adopt.info=3 ...`).

use std::collections::BTreeMap;

use super::Verdict;
use crate::history::{History, Outcome};

/// Anomaly kinds this checker reports.
pub const KINDS: &[&str] = &["no_success"];

/// Options of the no-success check.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Functions that must each have at least one `ok` (e.g. `["adopt", "final-read"]`).
    pub require_ok: Vec<String>,
}

/// Checks that the run did something. See the module docs.
pub fn check(history: &History, opts: &Options) -> Verdict {
    let mut v = Verdict::new("no_success", KINDS);
    let mut per_f: BTreeMap<&str, [u64; 3]> = BTreeMap::new();
    for p in history.pairs() {
        let slot = match p.outcome() {
            Outcome::Ok => 0,
            Outcome::Fail => 1,
            Outcome::Indeterminate => 2,
        };
        per_f.entry(p.f()).or_default()[slot] += 1;
    }
    let total_ok: u64 = per_f.values().map(|c| c[0]).sum();
    if total_ok == 0 {
        v.flag("no_success", Vec::new(), "no client operation succeeded: the run shows nothing");
    }
    for f in &opts.require_ok {
        if per_f.get(f.as_str()).is_none_or(|c| c[0] == 0) {
            v.flag("no_success", Vec::new(), format!("no `{f}` operation succeeded"));
        }
    }
    for (f, [ok, fail, info]) in &per_f {
        v.count(&format!("{f}.ok"), *ok);
        v.count(&format!("{f}.fail"), *fail);
        v.count(&format!("{f}.info"), *info);
    }
    v.count("ok", total_ok);
    v.count("nemesis_ops", history.nemesis_ops().count() as u64);
    v
}
