//! [`TurnSubscription`]: `resources/subscribe` of [`TURN_URI`] for one session (issue #35), and
//! [`listen`], the same for a 2026-07-28 `subscriptions/listen` that asks for it. The
//! door holds the node's `WatchTurn` for the caller's key and sends
//! `notifications/resources/updated` (the URI only) each time the turn changes; the host then
//! reads the resource, with its own key, if it wants the turn.
//!
//! - §8: a notification only lets a host act sooner. A host that misses one loses nothing: the
//!   turn is read, never carried, and `turn_wait` still works.
//! - §12: the notification names the URI and nothing else, so it reveals no content, not even to
//!   the caller; the read that follows is the node's, with the node's visibility rules.
//! - The watch follows its cursor: a stream the node ends (a leader change, a shutdown, its
//!   lifetime) is reopened from the last cursor after a capped backoff, and a turn that changed
//!   meanwhile is one notification. A definite refusal (a key no longer valid) ends the
//!   subscription.
//! - One subscription per session; dropping it (unsubscribe, the session's end) stops the watch.

use crate::call::{self, Api, Caller};
use crate::features::TURN_URI;
use crate::registry::registry;
use crate::result::refusal;
use kungfu_types::{Code, Rejection};
use prost_reflect::{DynamicMessage, Value as Proto};
use rmcp::Peer;
use rmcp::model::{ResourceUpdatedNotification, ResourceUpdatedNotificationParam, ServerNotification};
use rmcp::service::{RoleServer, SubscriptionSink};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long one watch stream lives on the node before the door reopens it from its cursor, so no
/// stream of a forgotten session outlives it by much.
const STREAM_LIFETIME: Duration = Duration::from_secs(600);
/// The first wait before a stream is reopened; doubled per failure in a row.
const REOPEN_FIRST: Duration = Duration::from_millis(100);
/// The longest wait before a stream is reopened.
const REOPEN_MAX: Duration = Duration::from_secs(5);

/// A session's subscription to its turn; dropping it stops the watch.
#[derive(Debug)]
pub struct TurnSubscription {
    stop: CancellationToken,
}

impl Drop for TurnSubscription {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl TurnSubscription {
    /// Opens the caller's turn watch and follows it, notifying `peer` of each change. A refusal to
    /// open (a bad key, too many streams) is the answer, so the host learns it at once.
    pub async fn start(api: &Api, caller: Caller, peer: Peer<RoleServer>) -> Result<TurnSubscription, Rejection> {
        let stream = open(api, &caller, "").await?;
        let stop = CancellationToken::new();
        tokio::spawn(follow(api.clone(), caller, Notifier::Peer(peer), stream, stop.clone()));
        Ok(TurnSubscription { stop })
    }

    /// Whether the watch still runs (false once a definite refusal or a gone session ended it).
    pub fn is_live(&self) -> bool {
        !self.stop.is_cancelled()
    }
}

/// A 2026-07-28 `subscriptions/listen` that accepted [`TURN_URI`]: follows the turn until `stop`
/// (the listen request's end), sending each notification through the subscription's sink, which
/// tags it with the subscription's id. A refusal to open the watch is the answer.
pub async fn listen(
    api: &Api,
    caller: Caller,
    sink: SubscriptionSink,
    stop: CancellationToken,
) -> Result<(), Rejection> {
    let stream = open(api, &caller, "").await?;
    follow(api.clone(), caller, Notifier::Sink(sink), stream, stop).await;
    Ok(())
}

/// Where the notifications of a subscription go: the session (`resources/subscribe`) or a
/// `subscriptions/listen` stream.
enum Notifier {
    Peer(Peer<RoleServer>),
    Sink(SubscriptionSink),
}

impl Notifier {
    /// Sends one `notifications/resources/updated` of the turn; false when nobody takes it any more.
    async fn turn_updated(&self) -> bool {
        // §12: the URI only.
        let param = ResourceUpdatedNotificationParam::new(TURN_URI);
        match self {
            Notifier::Peer(peer) => peer.notify_resource_updated(param).await.is_ok(),
            Notifier::Sink(sink) => sink
                .send(ServerNotification::ResourceUpdatedNotification(ResourceUpdatedNotification::new(param)))
                .await
                .is_ok(),
        }
    }
}

async fn open(api: &Api, caller: &Caller, cursor: &str) -> Result<tonic::Streaming<DynamicMessage>, Rejection> {
    let reg = registry();
    let mut request = DynamicMessage::new(reg.message("WatchTurnRequest"));
    request.set_field_by_name("cursor", Proto::String(cursor.to_string()));
    let path = http::uri::PathAndQuery::from_static("/kungfu.v1.WatchService/WatchTurn");
    call::server_streaming(api, path, reg.message("TurnEvent"), request, caller, STREAM_LIFETIME)
        .await
        .map_err(|s| refusal(&s))
}

/// Whether reopening may help: the node went away or stopped leading, the stream's lifetime
/// passed, or too many streams were open. A definite refusal of anything else would repeat.
fn worth_reopening(r: &Rejection) -> bool {
    !r.definite || matches!(r.code, Code::NotLeader | Code::Unavailable | Code::RateLimited)
}

fn list_len(msg: &DynamicMessage, field: &str) -> usize {
    msg.get_field_by_name(field).and_then(|v| v.as_list().map(<[Proto]>::len)).unwrap_or(0)
}

/// Follows the watch until `stop`, a definite refusal or a session that no longer takes
/// notifications.
async fn follow(
    api: Api,
    caller: Caller,
    notify: Notifier,
    mut stream: tonic::Streaming<DynamicMessage>,
    stop: CancellationToken,
) {
    // The cursor of the last complete change set; empty until the first one, which is the turn
    // as the host found it (it reads the resource), not a change.
    let mut cursor = String::new();
    // Whether the change set in progress changes the turn (a reset, an item added or removed);
    // a resumed stream's empty confirmation does not.
    let mut changed = false;
    let mut backoff = REOPEN_FIRST;
    loop {
        let message = tokio::select! {
            _ = stop.cancelled() => return,
            m = stream.message() => m,
        };
        match message {
            Ok(Some(event)) => {
                let reset = event.get_field_by_name("reset").and_then(|v| v.as_bool()).unwrap_or(false);
                changed |= reset || list_len(&event, "upserted") > 0 || list_len(&event, "removed") > 0;
                let Some(next) = event.get_field_by_name("cursor").and_then(|v| v.as_str().map(str::to_string)) else {
                    continue;
                };
                if next.is_empty() {
                    continue;
                }
                let first = cursor.is_empty();
                cursor = next;
                backoff = REOPEN_FIRST;
                if changed && !first {
                    if !notify.turn_updated().await {
                        stop.cancel();
                        return;
                    }
                }
                changed = false;
            }
            // Ended (a leader change, a shutdown, its lifetime): reopen from the cursor.
            Ok(None) | Err(_) => loop {
                changed = false;
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(REOPEN_MAX);
                match open(&api, &caller, &cursor).await {
                    Ok(s) => {
                        stream = s;
                        break;
                    }
                    Err(r) if worth_reopening(&r) => continue,
                    Err(r) => {
                        tracing::debug!(
                            code = r.code.as_str(),
                            "a turn subscription ended: the node refused its watch"
                        );
                        stop.cancel();
                        return;
                    }
                }
            },
        }
    }
}
