//! Wake targets (issue #35, docs/wake.md): an agent sets and removes the webhooks its turn changes
//! are delivered to, and the leader's deliverer records what it queued, what was acknowledged and
//! where it gave up. §8: "Notifications MAY speed this up; correct recovery MUST NOT depend on
//! them": nothing here touches an obligation. Where a URL may point (schemes, hosts, private
//! addresses) is the operator's policy, checked by the node at the door and again at each send;
//! the core checks only what every replica can decide alike: its form, its size, the count.

use super::{Cx, Res, not_found, reject, reject_field};
use crate::fact::Fact;
use crate::keys;
use crate::limits::WakeLimits;
use crate::model::{WakeEvent, WakeFailure, WakeFilter};
use crate::receipt::ActionResult;
use crate::state::{StateExt, StateRead};
use kungfu_types::{AgentId, Code, WakeSecret, WakeTargetId};

/// Sets a new wake target of `agent`.
pub(super) fn set_target(
    cx: &mut Cx<'_>,
    agent: AgentId,
    url: &str,
    secret: WakeSecret,
    filter: &WakeFilter,
) -> Res<ActionResult> {
    let l = WakeLimits::DEFAULT;
    if url.len() > l.max_url_bytes {
        return reject_field(
            Code::InvalidArgument,
            "url",
            format!("is {} bytes; the limit is {}; use a shorter URL", url.len(), l.max_url_bytes),
        );
    }
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    if !(lower.starts_with("https://") || lower.starts_with("http://")) || url.chars().any(char::is_whitespace) {
        return reject_field(Code::InvalidArgument, "url", "must be an absolute http(s) URL without spaces");
    }
    if filter.objects.len() > l.max_filter_objects {
        return reject_field(
            Code::LimitExceeded,
            "objects",
            format!("names {} objects; the limit is {}", filter.objects.len(), l.max_filter_objects),
        );
    }
    let held = cx.tx.scan(&keys::wake_targets_of(agent), None, l.max_targets_per_agent + 1)?.len();
    if held >= l.max_targets_per_agent {
        return reject(
            Code::LimitExceeded,
            format!("the agent already has {held} wake targets, the most it may hold; remove one first"),
        );
    }
    let target = WakeTargetId(cx.next_id(cx.tx.wake_counter()?.unwrap_or(0))?);
    cx.emit(Fact::WakeTargetSet { target, agent, url: url.to_string(), secret, filter: filter.clone() })?;
    Ok(ActionResult::WakeTargetSet { target })
}

/// Removes one of the caller's wake targets; another agent's target is NOT_FOUND (§9: an id
/// grants nothing, and says nothing of whose it is).
pub(super) fn remove_target(cx: &mut Cx<'_>, agent: AgentId, target: WakeTargetId) -> Res<ActionResult> {
    if cx.tx.wake_target(agent, target)?.is_none() {
        return not_found("wake target");
    }
    cx.emit(Fact::WakeTargetRemoved { target, agent })?;
    Ok(ActionResult::WakeTargetRemoved { target })
}

/// The leader's deliverer records its progress. Every item must follow from the state: an event
/// is queued only after the previous one was acknowledged and numbered next, an acknowledgment
/// names the outstanding event, a give-up the outstanding event. A deliverer that acted on a
/// stale view (a removed target, a leader that lost its term) is refused whole and reloads.
pub(super) fn record(
    cx: &mut Cx<'_>,
    queued: &[(AgentId, WakeTargetId, WakeEvent)],
    delivered: &[(AgentId, WakeTargetId, u64)],
    gave_up: &[(AgentId, WakeTargetId, WakeFailure)],
) -> Res<ActionResult> {
    let l = WakeLimits::DEFAULT;
    if queued.len() + delivered.len() + gave_up.len() > l.max_record_items {
        return reject(Code::LimitExceeded, "too many wake items in one record");
    }
    // Acknowledgments first: an event acknowledged and its successor queued may share a record.
    for (agent, target, seq) in delivered {
        let Some(t) = cx.tx.wake_target(*agent, *target)? else {
            return not_found("wake target");
        };
        if t.outstanding().map(|e| e.seq) != Some(*seq) {
            return reject(Code::InvalidState, format!("{target}: event {seq} is not the one outstanding"));
        }
        cx.emit(Fact::WakeDelivered { target: *target, agent: *agent, seq: *seq })?;
    }
    for (agent, target, failure) in gave_up {
        let Some(t) = cx.tx.wake_target(*agent, *target)? else {
            return not_found("wake target");
        };
        if t.outstanding().map(|e| e.seq) != Some(failure.seq) {
            return reject(Code::InvalidState, format!("{target}: event {} is not the one outstanding", failure.seq));
        }
        let mut failure = failure.clone();
        truncate(&mut failure.error, l.max_error_bytes);
        cx.emit(Fact::WakeGaveUp { target: *target, agent: *agent, failure })?;
    }
    for (agent, target, event) in queued {
        let Some(t) = cx.tx.wake_target(*agent, *target)? else {
            return not_found("wake target");
        };
        let next = t.queued.map_or(1, |e| e.seq + 1);
        if t.failed.is_some() || t.outstanding().is_some() || event.seq != next {
            return reject(Code::InvalidState, format!("{target}: event {} cannot be queued now", event.seq));
        }
        cx.emit(Fact::WakeQueued { target: *target, agent: *agent, event: *event })?;
    }
    let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
    Ok(ActionResult::WakeRecorded { queued: n(queued.len()), delivered: n(delivered.len()), gave_up: n(gave_up.len()) })
}

fn truncate(s: &mut String, max: usize) {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}
