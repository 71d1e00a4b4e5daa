//! The caller's turn, followed across node failures and leader changes: `WatchTurn` reopened from
//! the last cursor after a stream ends, with a capped backoff, and the client's copy of the turn
//! that the stream's events keep (proto `WatchService.WatchTurn`). `kungfu watch turn` prints the
//! events; `kungfu agent serve` acts on the copy.
//!
//! §8: the watch only makes an agent act sooner. Each reopened stream starts from the turn the
//! server holds now (a confirmation of the cursor, or a reset carrying the whole turn), so nothing
//! a failed stream missed is lost.

use crate::ctx::status_error;
use crate::error::{CliError, EXIT_UNAVAILABLE};
use kungfu_client::{Client, pb};
use std::collections::BTreeMap;
use std::time::Duration;

/// The first wait before a stream is reopened; each failure in a row doubles it.
const REOPEN_FIRST: Duration = Duration::from_millis(100);
/// The longest wait before a stream is reopened.
const REOPEN_MAX: Duration = Duration::from_secs(5);

/// A stable id of one obligation: `response:th_1:2:ag_3`, `assignment_delivery:asg_2`, …
pub(crate) fn obligation_id(o: &Option<pb::ObligationRef>) -> String {
    use pb::obligation_ref::Kind;
    match o.as_ref().and_then(|o| o.kind.as_ref()) {
        Some(Kind::Response(r)) => format!("response:{}:{}:{}", r.thread, r.entry, r.responder),
        Some(Kind::AssignmentDelivery(a)) => format!("assignment_delivery:{a}"),
        Some(Kind::AssignmentJudgment(a)) => format!("assignment_judgment:{a}"),
        Some(Kind::EngagementDelivery(e)) => format!("engagement_delivery:{e}"),
        Some(Kind::EngagementJudgment(e)) => format!("engagement_judgment:{e}"),
        None => "unknown".to_string(),
    }
}

/// The client's copy of the turn, by obligation id, as the proto says to apply events: a reset
/// clears it, `upserted` items replace theirs, `removed` ones go.
#[derive(Debug, Default, Clone)]
pub(crate) struct TurnReplica {
    items: BTreeMap<String, pb::TurnItem>,
}

impl TurnReplica {
    /// Applies one event; true when it ends a change set (its cursor is set), after which the
    /// copy is exactly the turn at the event's `applied_index`.
    pub(crate) fn apply(&mut self, event: &pb::TurnEvent) -> bool {
        if event.reset {
            self.items.clear();
        }
        for item in &event.upserted {
            self.items.insert(obligation_id(&item.obligation), item.clone());
        }
        for removed in &event.removed {
            self.items.remove(&obligation_id(&Some(removed.clone())));
        }
        !event.cursor.is_empty()
    }

    /// The items in turn order (arose_at, then obligation), as GetTurn orders them.
    pub(crate) fn items(&self) -> Vec<pb::TurnItem> {
        let mut items: Vec<pb::TurnItem> = self.items.values().cloned().collect();
        items.sort_by(|a, b| {
            (a.arose_at_unix_micros, obligation_id(&a.obligation))
                .cmp(&(b.arose_at_unix_micros, obligation_id(&b.obligation)))
        });
        items
    }
}

/// Whether a stream failure is worth reopening the stream for: the node went away or stopped
/// leading (UNAVAILABLE, NOT_LEADER, a transport failure), or too many streams are open
/// (RATE_LIMITED, gone once one closes). Anything else (a refused key, a turn too large to watch)
/// would fail the same way again.
fn transient(e: &CliError) -> bool {
    e.exit == EXIT_UNAVAILABLE || e.code == "RATE_LIMITED"
}

/// `WatchTurn`, reopened from the last cursor whenever it ends.
pub(crate) struct TurnWatch {
    client: Client,
    cursor: String,
    stream: Option<tonic::Streaming<pb::TurnEvent>>,
    /// The wait before the next reopening.
    backoff: Duration,
    /// A stream that has said nothing for this long is reopened from its cursor, so a stream that
    /// hangs (a partitioned node) is not waited on forever; a quiet turn costs one confirmation.
    idle: Option<Duration>,
    /// Where a reopening is said (stderr), prefixed; None says nothing.
    log: Option<&'static str>,
}

impl TurnWatch {
    pub(crate) fn new(client: Client, cursor: String, idle: Option<Duration>, log: Option<&'static str>) -> TurnWatch {
        TurnWatch { client, cursor, stream: None, backoff: REOPEN_FIRST, idle, log }
    }

    /// The last cursor received: the resume token of the turn the caller has seen.
    pub(crate) fn cursor(&self) -> &str {
        &self.cursor
    }

    /// The next event, reopening the stream as often as needed; an error only when reopening
    /// cannot help. The first event after a reopening is a confirmation of the cursor or a reset.
    pub(crate) async fn next(&mut self) -> Result<pb::TurnEvent, CliError> {
        loop {
            let stream = match &mut self.stream {
                Some(s) => s,
                None => match self.client.watch_turn(&self.cursor).await {
                    Ok(s) => self.stream.insert(s),
                    Err(e) => {
                        self.failed(CliError::from(e)).await?;
                        continue;
                    }
                },
            };
            let message = match self.idle {
                Some(idle) => match tokio::time::timeout(idle, stream.message()).await {
                    Ok(m) => m,
                    Err(_) => {
                        self.stream = None;
                        continue;
                    }
                },
                None => stream.message().await,
            };
            match message {
                Ok(Some(event)) => {
                    if !event.cursor.is_empty() {
                        self.cursor = event.cursor.clone();
                        self.backoff = REOPEN_FIRST;
                    }
                    return Ok(event);
                }
                // The server ends a turn stream only with a status; an OK end is reopened too.
                Ok(None) => self.failed(CliError::other("the stream ended")).await?,
                Err(status) => self.failed(status_error(status)).await?,
            }
        }
    }

    /// After a failure: waits and lets the loop reopen, or gives the error back when reopening
    /// cannot help.
    async fn failed(&mut self, e: CliError) -> Result<(), CliError> {
        self.stream = None;
        if !transient(&e) && e.code != "LOCAL" {
            return Err(e);
        }
        if let Some(prefix) = self.log {
            eprintln!(
                "{prefix}: turn watch: {}: {}; reopening in {} ms from cursor {:?}",
                e.code,
                e.message,
                self.backoff.as_millis(),
                self.cursor
            );
        }
        tokio::time::sleep(self.backoff).await;
        self.backoff = (self.backoff * 2).min(REOPEN_MAX);
        Ok(())
    }
}

/// An obligation as one short line (the `kungfu turn` table, the runner's log).
pub(crate) fn obligation(o: &Option<pb::ObligationRef>) -> String {
    use pb::obligation_ref::Kind;
    match o.as_ref().and_then(|o| o.kind.as_ref()) {
        Some(Kind::Response(r)) => format!("response {}#{} by {}", r.thread, r.entry, r.responder),
        Some(Kind::AssignmentDelivery(a)) => format!("delivery {a}"),
        Some(Kind::AssignmentJudgment(a)) => format!("judgment {a}"),
        Some(Kind::EngagementDelivery(e)) => format!("delivery {e}"),
        Some(Kind::EngagementJudgment(e)) => format!("judgment {e}"),
        None => "-".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(thread: &str, entry: u64, at: i64) -> pb::TurnItem {
        pb::TurnItem {
            obligation: Some(pb::ObligationRef {
                kind: Some(pb::obligation_ref::Kind::Response(pb::ResponseObligation {
                    thread: thread.into(),
                    entry,
                    responder: "ag_1".into(),
                })),
            }),
            arose_at_unix_micros: at,
            ..Default::default()
        }
    }

    #[test]
    fn a_replica_applies_resets_upserts_and_removals_and_ends_on_a_cursor() {
        let mut r = TurnReplica::default();
        let first =
            pb::TurnEvent { reset: true, upserted: vec![item("th_1", 2, 5), item("th_1", 1, 3)], ..Default::default() };
        assert!(!r.apply(&first), "no cursor: a part of a change set");
        let ids: Vec<String> = r.items().iter().map(|i| obligation_id(&i.obligation)).collect();
        assert_eq!(ids, ["response:th_1:1:ag_1", "response:th_1:2:ag_1"], "turn order");
        let gone = pb::TurnEvent {
            removed: vec![item("th_1", 1, 3).obligation.unwrap()],
            cursor: "c2".into(),
            ..Default::default()
        };
        assert!(r.apply(&gone));
        assert_eq!(r.items().len(), 1);
        let reset = pb::TurnEvent {
            reset: true,
            upserted: vec![item("th_2", 1, 9)],
            cursor: "c3".into(),
            ..Default::default()
        };
        assert!(r.apply(&reset));
        assert_eq!(obligation_id(&r.items()[0].obligation), "response:th_2:1:ag_1", "a reset forgets the rest");
    }

    #[test]
    fn only_failures_that_may_pass_reopen_the_stream() {
        let unavailable = CliError::from(kungfu_client::Error::Rejected(kungfu_types::Rejection::new(
            kungfu_client::Code::NotLeader,
            "x",
        )));
        assert!(transient(&unavailable));
        let refused = CliError::from(kungfu_client::Error::Rejected(kungfu_types::Rejection::new(
            kungfu_client::Code::Unauthenticated,
            "x",
        )));
        assert!(!transient(&refused));
    }
}
