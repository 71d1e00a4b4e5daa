//! Canaries: deliberate bugs that the chaos harness (`jepsen/`) must catch, compiled in only with
//! the cargo feature `canary` and armed at run time by `KUNGFU_CANARY=<name>[,<name>...]`.
//!
//! A build without the feature has none of this code: [`armed`] is a constant `false` and every
//! branch on it is removed. Never ship a `canary` build.
//!
//! - `skip-dedup`: every write gets a fresh idempotency key at the edge, so a retry takes effect
//!   again (breaks L3; the `replay` workload must report it).
//! - `early-deadlines`: the deadline scheduler treats deadlines as due three seconds early and
//!   stamps its expiries three seconds ahead (breaks L4; the `deadlines` workload must report
//!   obligations ended before their due time).
//! - `record-lww`: the leader rewrites a `PatchRecord`'s `base_rev` to the record's current rev
//!   before deciding it (last writer wins), so a replace on a stale base is accepted instead of
//!   refused `STALE_BASE` (breaks COORDINATION §5.6; the `record-append` workload must report an
//!   acknowledged replace whose base was not the rev before it).
//! - `trust-damaged-log`: at start, before the raft log opens, the node deletes its acknowledged
//!   mark (`<data_dir>/log/ACKNOWLEDGED`), so a log that lost entries it acknowledged is trusted as
//!   whole: it votes and leads (breaks issue #33; the `amnesia` nemesis must make the `facts`
//!   workload report acknowledged facts lost or their entry numbers reused).
//! - `wake-drop`: a wake deliverer that starts leading records every outstanding event as
//!   delivered without sending it, so the deliveries a leader change interrupted are lost (breaks
//!   issue #35's at-least-once; the `wake` workload must report a sequence number never received).

/// How far ahead `early-deadlines` fires.
pub const EARLY_BY_MICROS: u64 = 3_000_000;

/// Whether the canary `name` is armed in this process.
#[cfg(feature = "canary")]
pub fn armed(name: &str) -> bool {
    use std::sync::OnceLock;
    static ARMED: OnceLock<Vec<String>> = OnceLock::new();
    let armed = ARMED.get_or_init(|| {
        let list: Vec<String> = std::env::var("KUNGFU_CANARY")
            .unwrap_or_default()
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        if !list.is_empty() {
            tracing::warn!(canaries = ?list, "CANARY BUILD: deliberate bugs are armed; never use this node for real data");
        }
        list
    });
    armed.iter().any(|a| a == name)
}

/// Whether the canary `name` is armed: never, in a build without the `canary` feature.
#[cfg(not(feature = "canary"))]
pub const fn armed(_name: &str) -> bool {
    false
}
