//! Reads of the coordination layer (design §3.5, §4.5, §4.7, §5.7–§5.8): the mailbox after a
//! cursor, a collective's ranks (gather), a barrier's arrivals, and a shared record at any rev for
//! an audience with its events. Like every read (§9) each is a pure
//! function of one state, for current members only (anything else is NOT_FOUND, §12), and bounded.
//! Receiving consumes nothing: "no receipt of reading exists" (§6.3), so the cursor is the
//! client's.

use crate::keys;
use crate::limits::{CoordLimits, Limits};
use crate::model::*;
use crate::read::{ReadError, ReadResult, current_membership};
use crate::state::{Record, StateError, StateExt, StateRead};
use kungfu_types::{
    AgentId, Code, Content, EntrySeq, ExternalRef, FakReason, Labels, RecordId, Rejection, Scope, ThreadId, Timestamp,
};
use serde::{Deserialize, Serialize};

// --- Design §3.5 Mailbox --------------------------------------------------------------------------

/// Which entries a mailbox read returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MailFilter {
    All,
    /// Entries whose responders include the caller.
    AskedMe,
}

/// One entry as its receiver sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MailItem {
    pub entry: Entry,
    pub labels: Option<Labels>,
    pub held: bool,
    /// Inline while the page stays within its byte budget; otherwise read with `GetEntry`.
    pub content: Option<Content>,
    pub content_omitted: bool,
    /// The caller's own response to this entry (pending, or how it ended); never another
    /// responder's handle note (§6.3).
    pub my_response: Option<Response>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MailboxPage {
    pub items: Vec<MailItem>,
    /// Where the next read starts: the last entry this read examined, whether or not it matched
    /// the filter, so a filtered reader's cursor moves past what it has seen and never re-reads it.
    /// None once the thread's newest entry was examined, or when there was no entry after the
    /// cursor: the reader is caught up, continues from its last item (or keeps its cursor) and
    /// waits (`WatchThread` from the same number) for new entries.
    pub next_after: Option<EntrySeq>,
}

/// Design §3.5: the entries after `after`, in order. `AskedMe` is a filtered scan that examines at
/// most `mailbox_scan_factor × page_size` entries per call and still returns where it stopped, so
/// every call is bounded and a traversal omits nothing.
pub fn mailbox(
    state: &dyn StateRead,
    agent: AgentId,
    thread: ThreadId,
    after: Option<EntrySeq>,
    filter: MailFilter,
    page_size: usize,
    limits: &Limits,
) -> ReadResult<MailboxPage> {
    let coord = CoordLimits::DEFAULT;
    let (t, _) = current_membership(state, thread, agent)?;
    let page_size = limits.page_size(page_size);
    let budget = match filter {
        MailFilter::All => page_size,
        MailFilter::AskedMe => page_size.saturating_mul(coord.mailbox_scan_factor),
    };
    let prefix = keys::entries_of(thread);
    let after_key = after.map(|s| keys::entry(thread, s));
    let rows = state.scan(&prefix, after_key.as_deref(), budget)?;
    let mut items = Vec::new();
    let mut bytes = 0usize;
    // Whether an item of this page carries its content yet: the first readable one always does,
    // whatever its size, so every page makes progress (an unreadable or held item carries none).
    let mut carried = false;
    let mut last_examined = None;
    for (key, r) in rows {
        let Record::Entry(entry) = r else {
            return Err(StateError::corrupt(&key, "expected an entry").into());
        };
        last_examined = Some(entry.seq);
        if filter == MailFilter::AskedMe && !entry.responders.contains(&agent) {
            continue;
        }
        let (labels, held, content) = crate::visibility::labeled_content(state, &entry)?;
        // At least one item always carries its content; later ones only within the budget.
        let size = content.as_ref().map_or(0, Content::len);
        let (content, content_omitted) = match content {
            Some(c) if !carried || bytes.saturating_add(size) <= coord.max_mailbox_page_bytes => {
                bytes = bytes.saturating_add(size);
                carried = true;
                (Some(c), false)
            }
            Some(_) => (None, true),
            None => (None, false),
        };
        let my_response = if entry.responders.contains(&agent) {
            // A state that cannot be read fails the read rather than look like "not asked".
            Some(crate::read::read_response(state, agent, thread, entry.seq, agent)?)
        } else {
            None
        };
        items.push(MailItem { entry, labels, held, content, content_omitted, my_response });
        if items.len() >= page_size {
            break;
        }
    }
    // A full page stops at its last item, which is the last entry examined; a page that ran out of
    // budget stops at the last entry it looked at. A page that examined the thread's newest entry
    // (read from the same snapshot) names no cursor, so a traversal ends without one more call
    // (`coord.proto`, `Mailbox.next_after`).
    let next_after = last_examined.filter(|s| s.0 < t.last_entry);
    Ok(MailboxPage { items, next_after })
}

// --- Design §4.5 Gather ---------------------------------------------------------------------------

/// One rank of a collective as gathered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankView {
    pub rank: u32,
    pub member: AgentId,
    pub entry: EntrySeq,
    /// The assignment; its delivered output is removed when `output_omitted`.
    pub assignment: Assignment,
    pub output_omitted: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectiveView {
    pub thread: ThreadId,
    pub header: EntrySeq,
    pub author: AgentId,
    pub formed_at: Timestamp,
    pub ranks: Vec<RankView>,
    /// Every assignment is delivered or terminal: the gather will not change but by judgment.
    pub complete: bool,
    /// Every rank has a delivery (delivered, adopted, rejected or undecided after delivery).
    pub all_delivered: bool,
}

/// The delivered output of an assignment, wherever its state keeps it.
fn delivered_output(a: &Assignment) -> Option<&Content> {
    match &a.state {
        AssignmentState::Delivered { output, .. } => Some(output),
        AssignmentState::Ended { delivered, .. } => delivered.as_ref(),
        AssignmentState::Open | AssignmentState::Taken { .. } => None,
    }
}

fn omit_output(a: &mut Assignment) {
    match &mut a.state {
        AssignmentState::Delivered { output, .. } => *output = Content::default(),
        AssignmentState::Ended { delivered, .. } => {
            if let Some(d) = delivered {
                *d = Content::default();
            }
        }
        AssignmentState::Open | AssignmentState::Taken { .. } => {}
    }
}

/// Design §4.5: the ranks of the collective headed by `header`, in rank order. A rank that ended
/// without delivery keeps `complete` true and `all_delivered` false: a fold must not skip it.
pub fn collective(
    state: &dyn StateRead,
    agent: AgentId,
    thread: ThreadId,
    header: EntrySeq,
    include_outputs: bool,
) -> ReadResult<CollectiveView> {
    current_membership(state, thread, agent)?;
    let Some(c) = state.collective(thread, header)? else {
        return Err(ReadError::Rejected(Rejection::not_found("collective")));
    };
    let budget = CoordLimits::DEFAULT.max_gather_output_bytes;
    let mut bytes = 0usize;
    let mut ranks = Vec::with_capacity(c.ranks.len());
    let (mut complete, mut all_delivered) = (true, true);
    for (rank, r) in c.ranks.iter().enumerate() {
        let key = keys::assignment(r.assignment);
        let mut a = state
            .assignment(r.assignment)?
            .ok_or_else(|| StateError::corrupt(&key, "a rank's assignment is missing"))?;
        // Open or taken: still running. Delivered or ended (voided, dropped, timed out) counts as
        // complete: its rank will not change but by judgment.
        if a.state.is_undelivered() {
            complete = false;
        }
        let output = delivered_output(&a).map(Content::len);
        if output.is_none() {
            all_delivered = false;
        }
        let output_omitted = match output {
            Some(n) if !include_outputs || bytes.saturating_add(n) > budget => {
                omit_output(&mut a);
                true
            }
            Some(n) => {
                bytes = bytes.saturating_add(n);
                false
            }
            None => false,
        };
        ranks.push(RankView { rank: rank as u32, member: r.member, entry: r.entry, assignment: a, output_omitted });
    }
    Ok(CollectiveView { thread, header, author: c.author, formed_at: c.formed_at, ranks, complete, all_delivered })
}

// --- Design §4.7 Barrier --------------------------------------------------------------------------

/// How one member stands at a barrier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BarrierArrival {
    /// The member who posted the barrier.
    Author,
    Pending,
    Replied(EntrySeq),
    Handled,
    Retracted,
    MembershipEnded,
    Demoted,
    ThreadClosed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BarrierState {
    Waiting,
    /// Every asked member replied or handled.
    Released,
    /// At least one asked member's response ended another way: a departure is not an arrival.
    Broken,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BarrierRank {
    pub rank: u32,
    pub member: AgentId,
    pub arrival: BarrierArrival,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BarrierView {
    pub thread: ThreadId,
    pub entry: EntrySeq,
    pub author: AgentId,
    /// The author and the responders, in rank order.
    pub ranks: Vec<BarrierRank>,
    pub state: BarrierState,
    /// Responders still owing a response.
    pub pending: u32,
    /// Responders whose response ended without an arrival.
    pub absent: u32,
}

/// Design §4.7: any entry read as a barrier over its author and its responders (fixed at posting,
/// never widened). Released only by real responses; broken by any departure.
pub fn barrier(state: &dyn StateRead, agent: AgentId, thread: ThreadId, seq: EntrySeq) -> ReadResult<BarrierView> {
    current_membership(state, thread, agent)?;
    let Some(entry) = state.entry(thread, seq)? else {
        return Err(ReadError::Rejected(Rejection::not_found("entry")));
    };
    let mut members: Vec<AgentId> = entry.responders.iter().copied().collect();
    members.push(entry.author);
    members.sort();
    members.dedup();
    let (mut pending, mut absent) = (0u32, 0u32);
    let mut ranks = Vec::with_capacity(members.len());
    for (rank, member) in members.into_iter().enumerate() {
        let arrival = if member == entry.author && !entry.responders.contains(&member) {
            BarrierArrival::Author
        } else {
            let key = keys::response(thread, seq, member);
            let r = state
                .response(thread, seq, member)?
                .ok_or_else(|| StateError::corrupt(&key, "a responder has no response"))?;
            match r.state {
                ResponseState::Pending => BarrierArrival::Pending,
                ResponseState::Ended { how, .. } => match how {
                    ResponseEnd::Replied { by_entry } => BarrierArrival::Replied(by_entry),
                    ResponseEnd::Handled { .. } => BarrierArrival::Handled,
                    ResponseEnd::Retracted => BarrierArrival::Retracted,
                    ResponseEnd::MembershipEnded => BarrierArrival::MembershipEnded,
                    ResponseEnd::Demoted => BarrierArrival::Demoted,
                    ResponseEnd::ThreadClosed => BarrierArrival::ThreadClosed,
                },
            }
        };
        match arrival {
            BarrierArrival::Pending => pending += 1,
            BarrierArrival::Author | BarrierArrival::Replied(_) | BarrierArrival::Handled => {}
            _ => absent += 1,
        }
        ranks.push(BarrierRank { rank: rank as u32, member, arrival });
    }
    let state = if absent > 0 {
        BarrierState::Broken
    } else if pending > 0 {
        BarrierState::Waiting
    } else {
        BarrierState::Released
    };
    Ok(BarrierView { thread, entry: seq, author: entry.author, ranks, state, pending, absent })
}

// --- Design §5.7 The shared record, by audience ---------------------------------------------------

/// A record's body as a view shows it: the reference and its labels, or only its labels when the
/// body is narrower than the view's audience.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BodyView {
    Shown { reference: BodyRef, labels: Labels },
    Redacted { labels: Labels },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoteView {
    pub id: ItemId,
    pub seq: u32,
    pub kind: NoteKind,
    pub body: BodyRef,
    pub labels: Labels,
    pub author: AgentId,
    pub added_rev: u32,
    pub added_at: Timestamp,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactView {
    pub id: ItemId,
    pub seq: u32,
    pub reference: BodyRef,
    pub media_type: String,
    pub labels: Labels,
    pub author: AgentId,
    pub added_rev: u32,
    pub added_at: Timestamp,
}

/// A decision with its state at the view's rev. Decisions are carried at the record's scope.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionView {
    pub id: ItemId,
    pub seq: u32,
    pub state: Content,
    pub reason: Content,
    pub author: AgentId,
    pub added_rev: u32,
    pub added_at: Timestamp,
}

/// Design §5.7: a record as it was at `rev`, for `audience`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordView {
    pub id: RecordId,
    pub thread: ThreadId,
    pub creator: AgentId,
    pub created_at: Timestamp,
    pub entry: EntrySeq,
    pub scope: Scope,
    pub editors: Editors,
    /// The rev this view shows.
    pub rev: u32,
    /// The record's latest rev.
    pub current_rev: u32,
    pub audience: Scope,
    pub title: Content,
    pub state: Content,
    pub body: BodyView,
    pub notes: Vec<NoteView>,
    pub artifacts: Vec<ArtifactView>,
    pub decisions: Vec<DecisionView>,
    /// Notes and artifacts narrower than the audience, removed and counted.
    pub redacted_notes: u32,
    pub redacted_artifacts: u32,
}

/// The labels a stored reference carries (fail closed for an unlabeled pin, which the floor never
/// admits).
fn ref_labels(state: &dyn StateRead, r: &BodyRef) -> Result<Labels, StateError> {
    Ok(match r {
        BodyRef::Pin(p) => state.labels(*p)?.unwrap_or(Labels::FAIL_CLOSED),
        BodyRef::External(e) => e.labels,
    })
}

/// The record, for a current member of its thread (NOT_FOUND otherwise, one answer for both, §12).
fn readable_record(state: &dyn StateRead, agent: AgentId, id: RecordId) -> ReadResult<SharedRecord> {
    let not_found = || ReadError::Rejected(Rejection::not_found("record"));
    let r = state.shared_record(id)?.ok_or_else(not_found)?;
    current_membership(state, r.thread, agent).map_err(|_| not_found())?;
    Ok(r)
}

/// Design §5.7: the audience is whom the view is for, not an access control; it may not be wider
/// than the record may reach.
fn check_audience(r: &SharedRecord, audience: Scope) -> ReadResult<()> {
    if audience > r.scope {
        return Err(ReadError::Rejected(
            Rejection::field(
                Code::TrustViolation,
                "audience",
                format!("this {}-scoped record may not reach a {audience} audience", r.scope),
            )
            .with_fak(FakReason::TrustViolation),
        ));
    }
    Ok(())
}

/// Design §5.7 (`RecordService.Get`): the record at `at_rev` (None = now) as shown to `audience`.
/// The body, each note and each artifact are shown iff their scope is at least the audience (the
/// RFC's rule, the opposite of fak's code, design §12 item 17).
pub fn record(
    state: &dyn StateRead,
    agent: AgentId,
    id: RecordId,
    at_rev: Option<u32>,
    audience: Scope,
) -> ReadResult<RecordView> {
    let r = readable_record(state, agent, id)?;
    check_audience(&r, audience)?;
    let rev = match at_rev {
        None => r.rev,
        Some(rev) if (1..=r.rev).contains(&rev) => rev,
        Some(_) => {
            // Field paths leave the server in wire terms: the request's field is `rev`.
            return Err(ReadError::Rejected(Rejection::field(
                Code::InvalidArgument,
                "rev",
                format!("must name a rev of the record, 1 to {}", r.rev),
            )));
        }
    };
    Ok(record_at(state, &r, rev, audience)?)
}

/// The view of a record at `rev` for `audience`, with **no access check**: for [`record`] and for
/// invariant checks (validate, property tests). One `scan_rev` per scalar and one bounded scan per
/// item kind (design §8.2).
pub fn record_at(state: &dyn StateRead, r: &SharedRecord, rev: u32, audience: Scope) -> Result<RecordView, StateError> {
    let key = keys::shared_record(r.id);
    let text = |field: RecordField| -> Result<Content, StateError> {
        match state.record_value_at(r.id, field, rev)? {
            Some(FieldValue::Text(c)) => Ok(c),
            _ => Err(StateError::corrupt(&key, format!("no text value of {field:?} at rev {rev}"))),
        }
    };
    let title = text(RecordField::Title)?;
    let record_state = text(RecordField::State)?;
    let body = match state.record_value_at(r.id, RecordField::Body, rev)? {
        Some(FieldValue::Body(b)) => {
            let labels = ref_labels(state, &b)?;
            if labels.scope >= audience {
                BodyView::Shown { reference: b, labels }
            } else {
                BodyView::Redacted { labels }
            }
        }
        _ => return Err(StateError::corrupt(&key, format!("no body at rev {rev}"))),
    };
    let mut view = RecordView {
        id: r.id,
        thread: r.thread,
        creator: r.creator,
        created_at: r.created_at,
        entry: r.entry,
        scope: r.scope,
        editors: r.editors,
        rev,
        current_rev: r.rev,
        audience,
        title,
        state: record_state,
        body,
        notes: Vec::new(),
        artifacts: Vec::new(),
        decisions: Vec::new(),
        redacted_notes: 0,
        redacted_artifacts: 0,
    };
    let bound = CoordLimits::DEFAULT.max_record_items as usize;
    for kind in ItemKind::ALL {
        for (k, rec) in state.scan(&keys::record_items_of(r.id, kind), None, bound)? {
            let Record::RecordItem(item) = rec else {
                return Err(StateError::corrupt(&k, "expected a record item"));
            };
            // Items are in append order, so their revs never decrease.
            if item.added_rev > rev {
                break;
            }
            match item.body {
                ItemBody::Note { kind, body } => {
                    let labels = ref_labels(state, &body)?;
                    if labels.scope >= audience {
                        view.notes.push(NoteView {
                            id: item.id,
                            seq: item.seq,
                            kind,
                            body,
                            labels,
                            author: item.author,
                            added_rev: item.added_rev,
                            added_at: item.added_at,
                        });
                    } else {
                        view.redacted_notes += 1;
                    }
                }
                ItemBody::Artifact { reference, media_type } => {
                    let labels = ref_labels(state, &reference)?;
                    if labels.scope >= audience {
                        view.artifacts.push(ArtifactView {
                            id: item.id,
                            seq: item.seq,
                            reference,
                            media_type,
                            labels,
                            author: item.author,
                            added_rev: item.added_rev,
                            added_at: item.added_at,
                        });
                    } else {
                        view.redacted_artifacts += 1;
                    }
                }
                ItemBody::Decision { reason } => {
                    let state = text(RecordField::DecisionState(item.seq))?;
                    view.decisions.push(DecisionView {
                        id: item.id,
                        seq: item.seq,
                        state,
                        reason,
                        author: item.author,
                        added_rev: item.added_rev,
                        added_at: item.added_at,
                    });
                }
            }
        }
    }
    Ok(view)
}

// --- Design §5.8 Events ---------------------------------------------------------------------------

/// One accepted write as an audience sees it: its summary, or only its rev when the event carries
/// a value narrower than the audience.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecordEvent {
    Shown(RecordRevision),
    Redacted { rev: u32 },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordEvents {
    pub events: Vec<RecordEvent>,
    /// Where the next read starts (the last rev listed, or `after_rev` when none was).
    pub next_after_rev: u32,
    pub redacted: u32,
}

/// Design §5.8 (`RecordService.GetEvents`): the accepted writes after `after_rev`, in rev order, at
/// most a page. A plain read of history: catch-up never depends on live notifications.
pub fn record_events(
    state: &dyn StateRead,
    agent: AgentId,
    id: RecordId,
    after_rev: u32,
    audience: Scope,
    limits: &Limits,
    page_size: usize,
) -> ReadResult<RecordEvents> {
    let r = readable_record(state, agent, id)?;
    check_audience(&r, audience)?;
    let page = limits.page_size(page_size);
    let after = keys::record_revision(id, after_rev);
    let mut out = RecordEvents { events: Vec::new(), next_after_rev: after_rev, redacted: 0 };
    for (k, rec) in state.scan(&keys::record_revisions_of(id), Some(&after), page)? {
        let Record::RecordRevision(e) = rec else {
            return Err(StateError::corrupt(&k, "expected a record revision").into());
        };
        out.next_after_rev = e.rev;
        if e.scope >= audience {
            out.events.push(RecordEvent::Shown(e));
        } else {
            out.redacted += 1;
            out.events.push(RecordEvent::Redacted { rev: e.rev });
        }
    }
    Ok(out)
}

// --- Design §5.7 Bodies on demand -----------------------------------------------------------------

/// Which body of a record `record_body` reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BodyItem {
    Body,
    Note(ItemId),
    Artifact(ItemId),
}

/// A body read on demand: a pinned version (its content while the pin rules let the reader read
/// it, the item's author being the context author as for an entry's pin, §5), or the external
/// reference itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecordBody {
    Pin { pin: Pin, labels: Option<Labels>, content: Option<Content> },
    External(ExternalRef),
}

/// Design §5.7 (`RecordService.GetBody`): the record's body, or a note's or an artifact's, at
/// `at_rev` (None = now), for a current member of the record's thread.
pub fn record_body(
    state: &dyn StateRead,
    agent: AgentId,
    id: RecordId,
    item: &BodyItem,
    at_rev: Option<u32>,
) -> ReadResult<RecordBody> {
    let r = readable_record(state, agent, id)?;
    let rev = at_rev.unwrap_or(r.rev);
    if !(1..=r.rev).contains(&rev) {
        // Named by the request's field, `rev`, as `record` names it.
        return Err(ReadError::Rejected(Rejection::field(
            Code::InvalidArgument,
            "rev",
            format!("must name a rev of the record, 1 to {}", r.rev),
        )));
    }
    // Named by the request's field that named the item (`note_id`, `artifact_id`), not its oneof.
    let item_field = match item {
        BodyItem::Body => "body",
        BodyItem::Note(_) => "note_id",
        BodyItem::Artifact(_) => "artifact_id",
    };
    let no_item =
        || ReadError::Rejected(Rejection::field(Code::NotFound, item_field, "the record has no such item at that rev"));
    let (reference, author) = match item {
        BodyItem::Body => {
            // The body's writer: the actor of the rev that set the value in force at `rev`.
            let prefix = keys::record_values_of(id, RecordField::Body);
            let before = keys::record_value(id, RecordField::Body, rev.saturating_add(1));
            let Some((key, Record::RecordValue(v))) = state.scan_rev(&prefix, Some(&before), 1)?.pop() else {
                return Err(StateError::corrupt(&keys::shared_record(id), "a record without a body").into());
            };
            let FieldValue::Body(b) = v.value else {
                return Err(StateError::corrupt(&key, "a body that is not a reference").into());
            };
            let writer = state
                .record_revision(id, v.rev)?
                .ok_or_else(|| StateError::corrupt(&key, "a body value without its revision"))?;
            (b, writer.actor)
        }
        BodyItem::Note(item_id) | BodyItem::Artifact(item_id) => {
            let kind = if matches!(item, BodyItem::Note(_)) { ItemKind::Note } else { ItemKind::Artifact };
            let seq = state.record_item_seq(id, kind, &item_id.0)?.ok_or_else(no_item)?;
            let it = state.record_item(id, kind, seq)?.ok_or_else(no_item)?;
            if it.added_rev > rev {
                return Err(no_item());
            }
            let reference = it.body.reference().cloned().ok_or_else(no_item)?;
            (reference, it.author)
        }
    };
    Ok(match reference {
        BodyRef::External(e) => RecordBody::External(e),
        BodyRef::Pin(pin) => {
            let content = crate::visibility::pinned_content(state, author, pin)?;
            // Labels only with readable content, so an unreadable pin never reveals them (§12).
            let labels = if content.is_some() { state.labels(pin)? } else { None };
            RecordBody::Pin { pin, labels, content }
        }
    })
}
