//! Whether this node's raft core still runs (issue #36). openraft stops its core for good on a
//! storage error (a failed fsync, a full disk, a value it cannot decode) and reports why in
//! `RaftMetrics::running_state`; a core that panics (an assertion inside openraft) reports
//! nothing there, but its task ends and drops the sending half of the metrics channel. Both are
//! read from that channel, so a stop is seen the moment it happens, without a poll loop.
//!
//! A node whose core stopped must not go on serving from a state nothing advances (its metrics
//! still name the role and the leader of its last moment): the server fences it on
//! [`core_stopped`] and exits non-zero for its supervisor to restart it.

use crate::state_machine::Raft;
use futures::FutureExt;
use openraft::async_runtime::WatchReceiver;

/// What a core that ended without a reason in its metrics (a panic in its task) is reported as.
pub const CORE_TASK_ENDED: &str =
    "the raft core's task ended without reporting an error (a panic in openraft or in a storage adaptor)";

/// Why this node's raft core has stopped, or None while it runs. One reading of the metrics
/// channel, no wait: cheap enough for every readiness check and every call.
pub fn core_stop(raft: &Raft) -> Option<String> {
    let mut rx = raft.metrics();
    {
        // Marks the current value seen, so `changed` below is ready at once only when the sender
        // is gone (or, harmlessly, when a newer value raced in: then the core runs).
        let m = rx.borrow_and_update();
        if let Err(fatal) = &m.running_state {
            return Some(fatal.to_string());
        }
    }
    match rx.changed().now_or_never() {
        Some(Err(_)) => Some(CORE_TASK_ENDED.to_string()),
        _ => None,
    }
}

/// Resolves, with the reason, as soon as this node's raft core stops (see [`core_stop`]),
/// including a stop asked for by `Raft::shutdown` (`Fatal::Stopped`): callers stop waiting before
/// they shut raft down themselves. Never polls: it waits on the server metrics, whose sender the
/// core drops when its task ends (a fatal error, a shutdown and a panic alike), then reads the
/// reason from the full metrics' last value. Not on the full metrics themselves: they change on
/// every commit round, and a waiter there was woken for each (issue #30).
pub async fn core_stopped(raft: &Raft) -> String {
    let mut rx = raft.server_metrics();
    loop {
        if let Some(reason) = core_stop(raft) {
            return reason;
        }
        if rx.changed().await.is_err() {
            // The sender is gone: the core's task ended. Its last value may still say why.
            let last = raft.metrics().borrow_watched().running_state.as_ref().err().map(|f| f.to_string());
            return last.unwrap_or_else(|| CORE_TASK_ENDED.to_string());
        }
    }
}
