//! Watch streams on the wire (`proto/kungfu/v1/watch.proto`): the requests of `WatchService` in
//! domain terms, the turn watcher's resume token ([`TurnCursor`]), the change set between two turns
//! ([`TurnDelta`]) and how change sets and entry batches become events. The streaming itself (when
//! to read, leadership, bounds) is the server's; everything here is a pure function, so the exact
//! resume semantics the proto promises are tested here.

use crate::field_error::FieldError;
use crate::pb;
use crate::request::timeline_query;
use kungfu_core::model::{Entry, ObligationId};
use kungfu_core::read::{Cursor, TurnItem};
use kungfu_types::{AgentId, EntrySeq, GroupId, ThreadId};
use std::collections::BTreeMap;

/// The arguments of `WatchThread`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadWatchQuery {
    pub thread: ThreadId,
    /// None: from the first entry.
    pub after: Option<EntrySeq>,
    /// 0: the configured default (`Limits::page_size` caps and defaults it).
    pub page_size: usize,
}

pub fn watch_thread_query(req: &pb::WatchThreadRequest) -> Result<ThreadWatchQuery, FieldError> {
    // The same form as a Timeline request; only the name of `after` differs.
    let q = timeline_query(&pb::TimelineRequest {
        thread: req.thread.clone(),
        after: req.after_entry,
        page_size: req.page_size,
    })
    .map_err(|e| if e.field == "after" { FieldError::new("after_entry", e.message) } else { e })?;
    Ok(ThreadWatchQuery { thread: q.thread, after: q.after, page_size: q.page_size })
}

/// The arguments of `WatchTurn`: the cursor to resume from, if any.
pub fn watch_turn_query(req: &pb::WatchTurnRequest) -> Result<Option<TurnCursor>, FieldError> {
    TurnCursor::parse(&req.cursor)
}

// --- Turn cursor ----------------------------------------------------------------------------------

/// A cursor of group 0: the version, the index (u64 big-endian), the digest; 41 bytes. Every cursor
/// handed out before groups existed, and every cursor of group 0 still.
const TURN_CURSOR_VERSION: u8 = 1;
/// A cursor of any other group (issue #19, deliverable 3): the version, the group (u16
/// big-endian), then as version 1; 43 bytes. Never names group 0: one form per cursor.
const TURN_CURSOR_VERSION_GROUPED: u8 = 2;

/// What a turn watcher has seen: the turn whose [`turn_digest`] is `digest`, computed at
/// `applied_index` of `group`'s log (the index counts one group's entries, so the cursor names
/// it). Only the digest and the group decide whether a resumed stream must resend the turn; the
/// index is carried for clients and logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TurnCursor {
    pub group: GroupId,
    pub applied_index: u64,
    pub digest: [u8; 32],
}

impl TurnCursor {
    /// The opaque text form: hex of a version byte, the group unless it is group 0, the index
    /// (big-endian) and the digest. Pinned in `tests::turn_cursors_keep_their_golden_bytes`.
    pub fn encode(&self) -> String {
        let mut b = Vec::with_capacity(43);
        if self.group == GroupId::ZERO {
            b.push(TURN_CURSOR_VERSION);
        } else {
            b.push(TURN_CURSOR_VERSION_GROUPED);
            b.extend_from_slice(&self.group.to_be_bytes());
        }
        b.extend_from_slice(&self.applied_index.to_be_bytes());
        b.extend_from_slice(&self.digest);
        Cursor(b).to_hex()
    }

    /// Whether this cursor describes exactly the turn of `group` whose digest is `digest`.
    pub fn confirms(&self, group: GroupId, digest: &[u8; 32]) -> bool {
        self.group == group && &self.digest == digest
    }

    /// Parses a cursor sent back by a client; empty is none.
    pub fn parse(text: &str) -> Result<Option<TurnCursor>, FieldError> {
        if text.is_empty() {
            return Ok(None);
        }
        let bad = || FieldError::new("cursor", "is not a cursor returned by WatchTurn");
        let bytes = Cursor::from_hex(text).map_err(|_| bad())?.0;
        let (group, rest) = match (bytes.first(), bytes.len()) {
            (Some(&TURN_CURSOR_VERSION), 41) => (GroupId::ZERO, &bytes[1..]),
            (Some(&TURN_CURSOR_VERSION_GROUPED), 43) => match GroupId(u16::from_be_bytes([bytes[1], bytes[2]])) {
                GroupId::ZERO => return Err(bad()),
                g => (g, &bytes[3..]),
            },
            _ => return Err(bad()),
        };
        let mut index = [0u8; 8];
        index.copy_from_slice(&rest[..8]);
        let mut digest = [0u8; 32];
        digest.copy_from_slice(&rest[8..]);
        Ok(Some(TurnCursor { group, applied_index: u64::from_be_bytes(index), digest }))
    }
}

/// SHA-256 over the agent and its whole turn in turn order (the canonical encoding of the core),
/// so two cursors agree exactly when they describe the same items, `next` steps included, of the
/// same agent.
pub fn turn_digest(agent: AgentId, items: &[TurnItem]) -> [u8; 32] {
    let bytes = kungfu_core::codec::encode(&(agent, items));
    // `hash_secret` is SHA-256 of its text; hex keeps the input unambiguous.
    kungfu_core::secret::hash_secret(&Cursor(bytes).to_hex()).0
}

// --- Turn change sets -----------------------------------------------------------------------------

/// What a client must apply to its copy of the turn to reach the current one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TurnDelta {
    /// Clear the copy first.
    pub reset: bool,
    /// New or changed items, in turn order.
    pub upserted: Vec<TurnItem>,
    /// Obligations no longer in the turn, in obligation order.
    pub removed: Vec<ObligationId>,
}

impl TurnDelta {
    /// A reset to `current`, which is in turn order (as `read::turn` gives it).
    pub fn reset(current: &[TurnItem]) -> TurnDelta {
        TurnDelta { reset: true, upserted: current.to_vec(), removed: Vec::new() }
    }

    /// The change from `previous` (what the client holds) to `current` (in turn order).
    pub fn between(previous: &BTreeMap<ObligationId, TurnItem>, current: &[TurnItem]) -> TurnDelta {
        let upserted: Vec<TurnItem> =
            current.iter().filter(|i| previous.get(&i.obligation) != Some(*i)).cloned().collect();
        let now: std::collections::BTreeSet<ObligationId> = current.iter().map(|i| i.obligation).collect();
        let removed = previous.keys().filter(|o| !now.contains(o)).copied().collect();
        TurnDelta { reset: false, upserted, removed }
    }

    pub fn is_empty(&self) -> bool {
        !self.reset && self.upserted.is_empty() && self.removed.is_empty()
    }

    /// The events of this change set: at most `max_items` items (upserted plus removed) per event,
    /// at least one event, `reset` on the first only, `cursor` on the last only.
    pub fn into_events(self, cursor: &TurnCursor, max_items: usize) -> Vec<pb::TurnEvent> {
        let max_items = max_items.max(1);
        let mut events = Vec::new();
        let mut current = pb::TurnEvent {
            reset: self.reset,
            applied_index: cursor.applied_index,
            group: u32::from(cursor.group.0),
            ..Default::default()
        };
        let mut count = 0;
        let flush = |current: &mut pb::TurnEvent, events: &mut Vec<pb::TurnEvent>, count: &mut usize| {
            let next = pb::TurnEvent {
                applied_index: cursor.applied_index,
                group: u32::from(cursor.group.0),
                ..Default::default()
            };
            events.push(std::mem::replace(current, next));
            *count = 0;
        };
        for item in &self.upserted {
            if count == max_items {
                flush(&mut current, &mut events, &mut count);
            }
            current.upserted.push(pb::TurnItem::from(item));
            count += 1;
        }
        for o in &self.removed {
            if count == max_items {
                flush(&mut current, &mut events, &mut count);
            }
            current.removed.push(pb::ObligationRef::from(o));
            count += 1;
        }
        current.cursor = cursor.encode();
        events.push(current);
        events
    }
}

/// The client's copy after applying a change set (what the server remembers as sent).
pub fn apply_delta(copy: &mut BTreeMap<ObligationId, TurnItem>, delta: &TurnDelta) {
    if delta.reset {
        copy.clear();
    }
    for i in &delta.upserted {
        copy.insert(i.obligation, i.clone());
    }
    for o in &delta.removed {
        copy.remove(o);
    }
}

// --- Thread events --------------------------------------------------------------------------------

/// One batch of consecutive entries.
pub fn thread_event(entries: &[Entry], group: GroupId, applied_index: u64) -> pb::ThreadEvent {
    pb::ThreadEvent { entries: entries.iter().map(pb::Entry::from).collect(), applied_index, group: u32::from(group.0) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kungfu_core::model::ObligationKind;
    use kungfu_types::{AssignmentId, NextStep, ObjectRef, Timestamp};

    fn item(asg: u64, at: u64, next: NextStep) -> TurnItem {
        TurnItem {
            obligation: ObligationId::AssignmentDelivery(AssignmentId(asg)),
            kind: ObligationKind::Delivery,
            object: ObjectRef::Thread(ThreadId(1)),
            arose_at: Timestamp(at),
            due_at: Some(Timestamp(1_000)),
            next,
        }
    }

    fn map(items: &[TurnItem]) -> BTreeMap<ObligationId, TurnItem> {
        items.iter().map(|i| (i.obligation, i.clone())).collect()
    }

    #[test]
    fn a_cursor_round_trips_and_anything_else_is_refused_naming_the_field() {
        let c = TurnCursor { group: GroupId::ZERO, applied_index: 42, digest: [7; 32] };
        assert_eq!(TurnCursor::parse(&c.encode()).expect("parses"), Some(c));
        assert_eq!(TurnCursor::parse("").expect("empty"), None);
        for bad in ["zz", "00", &c.encode()[2..], &format!("02{}", &c.encode()[2..])] {
            let e = TurnCursor::parse(bad).expect_err(bad);
            assert_eq!(e.field, "cursor");
        }
        let e = watch_turn_query(&pb::WatchTurnRequest { cursor: "x".into() }).expect_err("bad");
        assert_eq!(e.field, "cursor");
    }

    /// Issue #19, deliverable 3: a cursor names the group whose log its index counts. Group 0's
    /// cursor is the version-1 form every client may hold (byte for byte as before groups);
    /// another group's is version 2 with the group after the version byte.
    #[test]
    fn turn_cursors_keep_their_golden_bytes() {
        let digest = [0xab; 32];
        let g0 = TurnCursor { group: GroupId::ZERO, applied_index: 0x0102, digest };
        let g5 = TurnCursor { group: GroupId(5), ..g0 };
        let ab = "ab".repeat(32);
        let g0_text = format!("010000000000000102{ab}");
        let g5_text = format!("0200050000000000000102{ab}");
        assert_eq!(g0.encode(), g0_text);
        assert_eq!(g5.encode(), g5_text);
        assert_eq!(TurnCursor::parse(&g0_text).expect("parses"), Some(g0));
        assert_eq!(TurnCursor::parse(&g5_text).expect("parses"), Some(g5));
        // One form per cursor: version 2 never names group 0.
        let e = TurnCursor::parse(&format!("0200000000000000000102{ab}")).expect_err("group 0 as version 2");
        assert_eq!(e.field, "cursor");
        // A cursor confirms only its own group's turn.
        assert!(g0.confirms(GroupId::ZERO, &digest) && !g5.confirms(GroupId::ZERO, &digest));
        let events = TurnDelta::default().into_events(&g5, 10);
        assert_eq!((events[0].group, events[0].applied_index), (5, 0x0102));
        assert_eq!(thread_event(&[], GroupId(5), 9).group, 5);
    }

    #[test]
    fn the_digest_tells_turns_apart_by_items_next_steps_and_agent() {
        let a = [item(1, 10, NextStep::Deliver), item(2, 20, NextStep::Deliver)];
        let d = turn_digest(AgentId(1), &a);
        assert_eq!(d, turn_digest(AgentId(1), &a.clone()));
        assert_ne!(d, turn_digest(AgentId(2), &a), "another agent's cursor never confirms");
        assert_ne!(d, turn_digest(AgentId(1), &a[..1]), "a removed item");
        let mut waiting = a.clone();
        waiting[1].next = NextStep::Wait;
        assert_ne!(d, turn_digest(AgentId(1), &waiting), "a changed next step");
        assert_ne!(turn_digest(AgentId(1), &[]), turn_digest(AgentId(2), &[]));
    }

    #[test]
    fn a_delta_applied_to_the_previous_copy_gives_exactly_the_current_turn() {
        let before = [item(1, 10, NextStep::Deliver), item(2, 20, NextStep::Deliver), item(3, 30, NextStep::Deliver)];
        let after = [item(2, 20, NextStep::Wait), item(3, 30, NextStep::Deliver), item(4, 40, NextStep::Deliver)];
        let mut copy = map(&before);
        let delta = TurnDelta::between(&copy, &after);
        assert!(!delta.reset);
        // Only what changed travels: item 3 is unchanged and not sent again.
        assert_eq!(delta.upserted, vec![after[0].clone(), after[2].clone()]);
        assert_eq!(delta.removed, vec![before[0].obligation]);
        apply_delta(&mut copy, &delta);
        assert_eq!(copy, map(&after));
        assert!(TurnDelta::between(&copy, &after).is_empty(), "no change, no event");
        // A reset replaces whatever the client held.
        let mut stale = map(&before);
        apply_delta(&mut stale, &TurnDelta::reset(&after));
        assert_eq!(stale, map(&after));
    }

    #[test]
    fn large_change_sets_are_split_with_reset_first_and_cursor_last() {
        let items: Vec<TurnItem> = (1..=5).map(|n| item(n, n * 10, NextStep::Deliver)).collect();
        let mut delta = TurnDelta::reset(&items);
        delta.removed = vec![ObligationId::AssignmentDelivery(AssignmentId(9))];
        let cursor = TurnCursor { group: GroupId::ZERO, applied_index: 7, digest: [1; 32] };
        let events = delta.into_events(&cursor, 2);
        assert_eq!(events.len(), 3);
        assert_eq!(events.iter().map(|e| e.reset).collect::<Vec<_>>(), vec![true, false, false]);
        assert_eq!(events.iter().map(|e| e.upserted.len() + e.removed.len()).collect::<Vec<_>>(), vec![2, 2, 2]);
        assert!(events[..2].iter().all(|e| e.cursor.is_empty()), "only a complete change set resumes");
        assert_eq!(events[2].cursor, cursor.encode());
        assert_eq!(events[2].removed.len(), 1);
        assert!(events.iter().all(|e| e.applied_index == 7));
        // An empty confirmation is one event with the cursor and nothing else.
        let confirm = TurnDelta::default().into_events(&cursor, 100);
        assert_eq!(confirm.len(), 1);
        assert!(!confirm[0].reset && confirm[0].upserted.is_empty() && confirm[0].removed.is_empty());
        assert_eq!(confirm[0].cursor, cursor.encode());
    }

    #[test]
    fn a_thread_watch_request_is_checked_like_a_timeline_request() {
        let q = watch_thread_query(&pb::WatchThreadRequest { thread: "th_3".into(), after_entry: 5, page_size: 7 })
            .expect("valid");
        assert_eq!(q, ThreadWatchQuery { thread: ThreadId(3), after: Some(EntrySeq(5)), page_size: 7 });
        let q = watch_thread_query(&pb::WatchThreadRequest { thread: "th_3".into(), after_entry: 0, page_size: 0 })
            .expect("valid");
        assert_eq!(q.after, None);
        let e = watch_thread_query(&pb::WatchThreadRequest { thread: "mem_3".into(), ..Default::default() })
            .expect_err("not a thread id");
        assert_eq!(e.field, "thread");
        let e = watch_thread_query(&pb::WatchThreadRequest::default()).expect_err("missing");
        assert_eq!(e.field, "thread");
    }
}
