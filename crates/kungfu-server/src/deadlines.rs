//! The deadline scheduler (L4, DESIGN §4). On the leader it watches the due index and, when a
//! deadline passes, proposes `Expire { obligation, due_at }`. Apply ends the obligation only if it
//! is still open and due at the command's time, so proposing twice, or from two leaders across a
//! failover, still ends it exactly once. A new leader finds every pending deadline in the due index
//! (which is replicated state) before it serves its first tick, so none is lost with the old leader.

use crate::backend::Backend;
use kungfu_core::Action;
use kungfu_core::read::{DueItem, due_items};
use kungfu_types::{Code, Timestamp};
use std::sync::Arc;
use std::time::Duration;

/// How many due entries one tick looks at. Later ones are found by the next tick.
const BATCH: usize = 256;
/// The longest the scheduler sleeps: new obligations may have arisen with earlier deadlines.
const MAX_SLEEP: Duration = Duration::from_millis(200);

fn now() -> Timestamp {
    Timestamp(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0),
    )
}

/// Runs until `stop` resolves.
pub async fn run(b: Arc<Backend>, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        let sleep = if b.node.is_leader() { tick(&b).await } else { MAX_SLEEP };
        tokio::select! {
            _ = tokio::time::sleep(sleep) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Proposes the expiry of every due deadline; returns how long to sleep before the next tick.
async fn tick(b: &Backend) -> Duration {
    let due: Vec<DueItem> = match b.node.state.read(|s| due_items(s, BATCH)) {
        Ok(d) => d,
        Err(e) => {
            tracing::error!(error = %e, "cannot read the due index");
            return MAX_SLEEP;
        }
    };
    let mut t = now();
    if crate::canary::armed("early-deadlines") {
        t = Timestamp(t.0 + crate::canary::EARLY_BY_MICROS);
    }
    for item in &due {
        if item.due_at > t {
            let wait = Duration::from_micros(item.due_at.0 - t.0);
            return wait.min(MAX_SLEEP);
        }
        match b.submit_system(Action::Expire { obligation: item.obligation, due_at: item.due_at }).await {
            Ok(_) => {
                let late = now().since(item.due_at);
                crate::metrics::deadline_lateness(std::time::Duration::from_micros(late.0));
                tracing::info!(obligation = ?item.obligation, lateness_us = late.0, "deadline ended an obligation");
            }
            // Already ended by an earlier proposal or by an action that settled it first.
            Err(s) if kungfu_api::status_rejection(&s).is_some_and(|r| r.code == Code::NoEffect) => {}
            Err(s) => {
                tracing::warn!(obligation = ?item.obligation, status = %s, "expiry not applied; will retry");
                return MAX_SLEEP;
            }
        }
    }
    if due.len() == BATCH { Duration::ZERO } else { MAX_SLEEP }
}
