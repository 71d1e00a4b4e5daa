//! Watch streams on the wire (`proto/kungfu/v1/watch.proto`): the requests of `WatchService` in
//! domain terms, the turn watcher's resume token in text ([`encode_cursor`], [`parse_cursor`]), and
//! how the domain events of the watch service (`kungfu_core::watch`: turn changes, batches of
//! entries and of record events) become messages. The streaming itself (when to read, leadership,
//! bounds) is the server's; everything here is a pure function, so the exact resume semantics the
//! proto promises are tested here.

use crate::field_error::FieldError;
use crate::pb;
use crate::request::timeline_query;
use kungfu_core::read::Cursor;
use kungfu_core::watch::{RecordBatch, ThreadBatch, TurnChange, TurnCursor};
use kungfu_types::{EntrySeq, GroupId, ThreadId};

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
    parse_cursor(&req.cursor)
}

// --- Turn cursor ----------------------------------------------------------------------------------

/// A cursor of group 0: the version, the index (u64 big-endian), the digest; 41 bytes. Every cursor
/// handed out before groups existed, and every cursor of group 0 still.
const TURN_CURSOR_VERSION: u8 = 1;
/// A cursor of any other group (issue #19, deliverable 3): the version, the group (u16
/// big-endian), then as version 1; 43 bytes. Never names group 0: one form per cursor.
const TURN_CURSOR_VERSION_GROUPED: u8 = 2;

/// Most items (upserted plus removed) in one `TurnEvent` message: a larger change set is split.
pub const TURN_EVENT_ITEMS: usize = 100;

/// A cursor's opaque text form: hex of a version byte, the group unless it is group 0, the index
/// (big-endian) and the digest. Pinned in `tests::turn_cursors_keep_their_golden_bytes`.
pub fn encode_cursor(c: &TurnCursor) -> String {
    let mut b = Vec::with_capacity(43);
    if c.group == GroupId::ZERO {
        b.push(TURN_CURSOR_VERSION);
    } else {
        b.push(TURN_CURSOR_VERSION_GROUPED);
        b.extend_from_slice(&c.group.to_be_bytes());
    }
    b.extend_from_slice(&c.applied_index.to_be_bytes());
    b.extend_from_slice(&c.digest);
    Cursor(b).to_hex()
}

/// Parses a cursor sent back by a client; empty is none.
pub fn parse_cursor(text: &str) -> Result<Option<TurnCursor>, FieldError> {
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

// --- Events ---------------------------------------------------------------------------------------

/// The messages of one turn change: at most `max_items` items (upserted plus removed) per message,
/// at least one message, `reset` on the first only, the cursor on the last only, so that only a
/// complete change set resumes.
pub fn turn_events(change: TurnChange, max_items: usize) -> Vec<pb::TurnEvent> {
    let TurnChange { delta, cursor } = change;
    let max_items = max_items.max(1);
    let empty = || pb::TurnEvent {
        applied_index: cursor.applied_index,
        group: u32::from(cursor.group.0),
        ..Default::default()
    };
    let mut events = Vec::new();
    let mut current = pb::TurnEvent { reset: delta.reset, ..empty() };
    let mut count = 0;
    let upserted = delta.upserted.iter().map(|i| (Some(pb::TurnItem::from(i)), None));
    let removed = delta.removed.iter().map(|o| (None, Some(pb::ObligationRef::from(o))));
    for (item, gone) in upserted.chain(removed) {
        if count == max_items {
            events.push(std::mem::replace(&mut current, empty()));
            count = 0;
        }
        current.upserted.extend(item);
        current.removed.extend(gone);
        count += 1;
    }
    current.cursor = encode_cursor(&cursor);
    events.push(current);
    events
}

/// One batch of a thread's consecutive entries.
pub fn thread_event(batch: &ThreadBatch) -> pb::ThreadEvent {
    pb::ThreadEvent {
        entries: batch.entries.iter().map(pb::Entry::from).collect(),
        applied_index: batch.applied_index,
        group: u32::from(batch.group.0),
    }
}

/// One batch of a shared record's events.
pub fn record_event_batch(batch: &RecordBatch) -> pb::RecordEventBatch {
    pb::RecordEventBatch {
        events: batch.events.iter().map(pb::RecordEvent::from).collect(),
        applied_index: batch.applied_index,
        group: u32::from(batch.group.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kungfu_core::model::ObligationId;
    use kungfu_core::read::TurnItem;
    use kungfu_core::testkit::delivery_item as item;
    use kungfu_core::watch::TurnDelta;
    use kungfu_types::{AssignmentId, NextStep};

    #[test]
    fn a_cursor_round_trips_and_anything_else_is_refused_naming_the_field() {
        let c = TurnCursor { group: GroupId::ZERO, applied_index: 42, digest: [7; 32] };
        assert_eq!(parse_cursor(&encode_cursor(&c)).expect("parses"), Some(c));
        assert_eq!(parse_cursor("").expect("empty"), None);
        let text = encode_cursor(&c);
        for bad in ["zz", "00", &text[2..], &format!("02{}", &text[2..])] {
            let e = parse_cursor(bad).expect_err(bad);
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
        assert_eq!(encode_cursor(&g0), g0_text);
        assert_eq!(encode_cursor(&g5), g5_text);
        assert_eq!(parse_cursor(&g0_text).expect("parses"), Some(g0));
        assert_eq!(parse_cursor(&g5_text).expect("parses"), Some(g5));
        // One form per cursor: version 2 never names group 0.
        let e = parse_cursor(&format!("0200000000000000000102{ab}")).expect_err("group 0 as version 2");
        assert_eq!(e.field, "cursor");
        let events = turn_events(TurnChange { delta: TurnDelta::default(), cursor: g5 }, 10);
        assert_eq!((events[0].group, events[0].applied_index), (5, 0x0102));
        let batch = ThreadBatch { group: GroupId(5), applied_index: 9, entries: Vec::new() };
        assert_eq!((thread_event(&batch).group, thread_event(&batch).applied_index), (5, 9));
        let batch = RecordBatch { group: GroupId(5), applied_index: 9, events: Vec::new() };
        assert_eq!((record_event_batch(&batch).group, record_event_batch(&batch).applied_index), (5, 9));
    }

    #[test]
    fn large_change_sets_are_split_with_reset_first_and_cursor_last() {
        let items: Vec<TurnItem> = (1..=5).map(|n| item(n, n * 10, NextStep::Deliver)).collect();
        let mut delta = TurnDelta::reset(&items);
        delta.removed = vec![ObligationId::AssignmentDelivery(AssignmentId(9))];
        let cursor = TurnCursor { group: GroupId::ZERO, applied_index: 7, digest: [1; 32] };
        let events = turn_events(TurnChange { delta, cursor }, 2);
        assert_eq!(events.len(), 3);
        assert_eq!(events.iter().map(|e| e.reset).collect::<Vec<_>>(), vec![true, false, false]);
        assert_eq!(events.iter().map(|e| e.upserted.len() + e.removed.len()).collect::<Vec<_>>(), vec![2, 2, 2]);
        assert!(events[..2].iter().all(|e| e.cursor.is_empty()), "only a complete change set resumes");
        assert_eq!(events[2].cursor, encode_cursor(&cursor));
        assert_eq!(events[2].removed.len(), 1);
        assert!(events.iter().all(|e| e.applied_index == 7));
        // An empty confirmation is one event with the cursor and nothing else.
        let confirm = turn_events(TurnChange { delta: TurnDelta::default(), cursor }, 100);
        assert_eq!(confirm.len(), 1);
        assert!(!confirm[0].reset && confirm[0].upserted.is_empty() && confirm[0].removed.is_empty());
        assert_eq!(confirm[0].cursor, encode_cursor(&cursor));
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
