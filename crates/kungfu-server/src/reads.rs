//! The protocol's reads as calls of the service layer: one method per read, taking the
//! authenticated [`Caller`] and the validated query (`kungfu_api::request`), answering the core's
//! read result (`kungfu_core::read`) on one snapshot, linearizable or stale as the caller asked.

use crate::backend::{Backend, Read};
use crate::credentials::Caller;
use kungfu_api::request as rq;
use kungfu_core::coord::read::{
    self as coord, BarrierView, CollectiveView, MailboxPage, RecordBody, RecordEvents, RecordView,
};
use kungfu_core::model::{Assignment, Engagement, Entry, Response};
use kungfu_core::read::{self, EntryView, MemoryView, OpportunityPage, ReferencedTask, TaskView, TurnPage, WorkingSet};
use kungfu_types::{AssignmentId, EngagementId, ObjectRef, Rejection};

/// A page of a thread's timeline, and whether more entries follow it.
#[derive(Debug)]
pub struct TimelinePage {
    pub entries: Vec<Entry>,
    /// The page is full and ends before the thread's newest entry (`threads.proto`: the last page
    /// says it is the last, so a reader needs no extra call to learn it reached the end).
    pub full: bool,
}

/// A page of the caller's turn, and the sequence number of the snapshot it was read from.
#[derive(Debug)]
pub struct Turn {
    pub page: TurnPage,
    pub as_of_seq: u64,
    /// The caller's wake targets given up on (docs/wake.md): the turn is where an agent looks.
    pub wake_failed: Vec<read::WakeTargetView>,
}

impl Backend {
    pub async fn get_memory(&self, c: &Caller, q: rq::MemoryQuery) -> Result<Read<MemoryView>, Rejection> {
        self.read_as(c.consistency, |s, _, _| read::read_memory(s, c.agent, q.memory, q.version)).await
    }

    pub async fn timeline(&self, c: &Caller, q: rq::TimelineQuery) -> Result<Read<TimelinePage>, Rejection> {
        self.read_as(c.consistency, |s, l, _| {
            let size = l.page_size(q.page_size);
            let entries = read::timeline(s, c.agent, q.thread, q.after, q.page_size, l)?;
            // The timeline read found the caller a member, so the thread is there; its newest
            // entry comes from the same snapshot as the page.
            let newest = kungfu_core::StateExt::thread(s, q.thread)?.map_or(0, |t| t.last_entry);
            let full = entries.len() == size && entries.last().is_some_and(|e| e.seq.0 < newest);
            Ok(TimelinePage { entries, full })
        })
        .await
    }

    pub async fn get_entry(&self, c: &Caller, q: rq::EntryQuery) -> Result<Read<EntryView>, Rejection> {
        self.read_as(c.consistency, |s, _, _| read::read_entry(s, c.agent, q.thread, q.entry)).await
    }

    pub async fn get_response(&self, c: &Caller, q: rq::ResponseQuery) -> Result<Read<Response>, Rejection> {
        self.read_as(c.consistency, |s, _, _| read::read_response(s, c.agent, q.thread, q.entry, q.responder)).await
    }

    pub async fn get_referenced_task(&self, c: &Caller, q: rq::EntryQuery) -> Result<Read<ReferencedTask>, Rejection> {
        self.read_as(c.consistency, |s, _, _| read::read_referenced_task(s, c.agent, q.thread, q.entry)).await
    }

    pub async fn get_assignment(&self, c: &Caller, id: AssignmentId) -> Result<Read<Assignment>, Rejection> {
        self.read_as(c.consistency, |s, _, _| read::read_assignment(s, c.agent, id)).await
    }

    pub async fn get_task(&self, c: &Caller, q: rq::TaskQuery) -> Result<Read<TaskView>, Rejection> {
        self.read_as(c.consistency, |s, _, _| read::read_task(s, c.agent, q.task, q.version)).await
    }

    pub async fn get_engagement(&self, c: &Caller, id: EngagementId) -> Result<Read<Engagement>, Rejection> {
        self.read_as(c.consistency, |s, _, _| read::read_engagement(s, c.agent, id)).await
    }

    pub async fn get_engagement_input(
        &self,
        c: &Caller,
        q: rq::EngagementInputQuery,
    ) -> Result<Read<MemoryView>, Rejection> {
        self.read_as(c.consistency, |s, _, _| read::read_engagement_input(s, c.agent, q.engagement, q.index)).await
    }

    /// The page and the sequence number it is exact at come from one snapshot.
    pub async fn turn(&self, c: &Caller, q: rq::PageQuery) -> Result<Read<Turn>, Rejection> {
        self.read_as(c.consistency, |s, l, now| {
            let page = read::turn(s, c.agent, q.cursor.as_ref(), q.page_size, now, l)?;
            let as_of_seq = kungfu_core::StateExt::counters(s)?.unwrap_or_default().seq;
            let mut wake_failed = read::wake_targets(s, c.agent)?;
            wake_failed.retain(|t| t.failed.is_some());
            Ok(Turn { page, as_of_seq, wake_failed })
        })
        .await
    }

    pub async fn opportunities(&self, c: &Caller, q: rq::PageQuery) -> Result<Read<OpportunityPage>, Rejection> {
        self.read_as(c.consistency, |s, l, _| read::opportunities(s, c.agent, q.cursor.as_ref(), q.page_size, l)).await
    }

    pub async fn working_set(&self, c: &Caller, object: ObjectRef) -> Result<Read<WorkingSet>, Rejection> {
        self.read_as(c.consistency, |s, l, now| read::working_set(s, c.agent, object, now, l)).await
    }

    /// COORDINATION §3.5: a page of the caller's mailbox after its own cursor.
    pub async fn mailbox(&self, c: &Caller, q: rq::MailboxQuery) -> Result<Read<MailboxPage>, Rejection> {
        self.read_as(c.consistency, |s, l, _| coord::mailbox(s, c.agent, q.thread, q.after, q.filter, q.page_size, l))
            .await
    }

    /// COORDINATION §4.5: a collective gathered, rank by rank.
    pub async fn collective(&self, c: &Caller, q: rq::CollectiveQuery) -> Result<Read<CollectiveView>, Rejection> {
        self.read_as(c.consistency, |s, _, _| coord::collective(s, c.agent, q.thread, q.header, q.include_outputs))
            .await
    }

    /// COORDINATION §4.7: an entry read as a barrier.
    pub async fn barrier(&self, c: &Caller, q: rq::EntryQuery) -> Result<Read<BarrierView>, Rejection> {
        self.read_as(c.consistency, |s, _, _| coord::barrier(s, c.agent, q.thread, q.entry)).await
    }

    /// COORDINATION §5.7: a shared record at a rev, for an audience.
    pub async fn record(&self, c: &Caller, q: rq::RecordQuery) -> Result<Read<RecordView>, Rejection> {
        self.read_as(c.consistency, |s, _, _| coord::record(s, c.agent, q.record, q.rev, q.audience)).await
    }

    /// COORDINATION §5.8: a page of a record's events after a rev.
    pub async fn record_events(&self, c: &Caller, q: rq::RecordEventsQuery) -> Result<Read<RecordEvents>, Rejection> {
        self.read_as(c.consistency, |s, l, _| {
            coord::record_events(s, c.agent, q.record, q.after_rev, q.audience, l, q.page_size)
        })
        .await
    }

    /// COORDINATION §5.7: a record's body, or a note's or an artifact's, on demand.
    pub async fn record_body(&self, c: &Caller, q: rq::RecordBodyQuery) -> Result<Read<RecordBody>, Rejection> {
        self.read_as(c.consistency, |s, _, _| coord::record_body(s, c.agent, q.record, &q.item, q.rev)).await
    }
}
