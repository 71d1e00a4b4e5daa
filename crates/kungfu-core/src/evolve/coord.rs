//! The coordination layer (design §2, §4, §5): the facts of labeling a version, of forming a
//! collective and of writing a shared record. Each only records what the command decided; none
//! touches an obligation.

use super::need;
use crate::keys;
use crate::model::*;
use crate::state::{IndexRef, Record, StateError, StateExt, StateRead, Tx};
use kungfu_types::{
    AgentId, Content, EntrySeq, Labels, MemoryId, RecordId, Scope, Taint, ThreadId, Timestamp, Version,
};

/// Design §2.2: the labels of a version, written once.
pub(super) fn version_labeled(
    tx: &mut Tx<'_>,
    memory: MemoryId,
    version: Version,
    labels: Labels,
    widened_from: Option<Version>,
) -> Result<(), StateError> {
    need(tx.memory_version(memory, version)?, "memory version")?;
    let key = keys::version_labels(memory, version);
    if tx.get(&key)?.is_some() {
        return Err(StateError::corrupt(&key, "a version is labeled twice"));
    }
    tx.put(key, Record::Labels(VersionLabels { memory, version, labels, widened_from }));
    Ok(())
}

/// Design §4.4: the collective headed by `header`, from the base facts emitted before it.
pub(super) fn scattered(
    tx: &mut Tx<'_>,
    thread: ThreadId,
    header: EntrySeq,
    author: AgentId,
    ranks: &[ScatterRank],
    at: Timestamp,
) -> Result<(), StateError> {
    need(tx.entry(thread, header)?, "entry")?;
    let key = keys::collective(thread, header);
    if tx.get(&key)?.is_some() {
        return Err(StateError::corrupt(&key, "a header heads two collectives"));
    }
    tx.put(key, Record::Collective(Collective { thread, header, author, formed_at: at, ranks: ranks.to_vec() }));
    Ok(())
}

/// The labels a stored reference carries: a pin's version's (fail closed when unlabeled), or an
/// external reference's declared ones.
fn ref_labels(tx: &Tx<'_>, r: &BodyRef) -> Result<Labels, StateError> {
    Ok(match r {
        BodyRef::Pin(p) => tx.labels(*p)?.unwrap_or(Labels::FAIL_CLOSED),
        BodyRef::External(e) => e.labels,
    })
}

fn put_value(tx: &mut Tx<'_>, record: RecordId, field: RecordField, rev: u32, value: FieldValue) {
    tx.put(keys::record_value(record, field, rev), Record::RecordValue(RecordValue { record, field, rev, value }));
}

/// What `RecordCreated` records.
pub(super) struct CreatedRecord<'a> {
    pub record: RecordId,
    pub thread: ThreadId,
    pub entry: EntrySeq,
    pub creator: AgentId,
    pub scope: Scope,
    pub editors: Editors,
    pub title: &'a Content,
    pub state: &'a Content,
    pub body: &'a BodyRef,
}

/// Design §5.3: a record at rev 1 with its three scalars, indexed under its thread and entry.
pub(super) fn record_created(tx: &mut Tx<'_>, c: &CreatedRecord<'_>, at: Timestamp) -> Result<(), StateError> {
    need(tx.entry(c.thread, c.entry)?, "entry")?;
    let key = keys::shared_record(c.record);
    if tx.get(&key)?.is_some() {
        return Err(StateError::corrupt(&key, "a record is created twice"));
    }
    tx.put(
        key,
        Record::SharedRecord(SharedRecord {
            id: c.record,
            thread: c.thread,
            creator: c.creator,
            created_at: at,
            entry: c.entry,
            rev: 1,
            scope: c.scope,
            editors: c.editors,
            counts: RecordCounts::default(),
            updated_by: c.creator,
            updated_at: at,
        }),
    );
    put_value(tx, c.record, RecordField::Title, 1, FieldValue::Text(c.title.clone()));
    put_value(tx, c.record, RecordField::State, 1, FieldValue::Text(c.state.clone()));
    put_value(tx, c.record, RecordField::Body, 1, FieldValue::Body(c.body.clone()));
    let body = ref_labels(tx, c.body)?;
    tx.put(
        keys::record_revision(c.record, 1),
        Record::RecordRevision(RecordRevision {
            record: c.record,
            rev: 1,
            base_rev: 0,
            entry: c.entry,
            actor: c.creator,
            at,
            paths: vec!["/title".into(), "/state".into(), "/body_ref".into()],
            scope: c.scope.min(body.scope),
            taint: Taint::Tainted.max(body.taint),
        }),
    );
    tx.put(keys::thread_record(c.thread, c.record), Record::Ref(IndexRef::Record(c.record)));
    tx.put(keys::entry_record(c.thread, c.entry), Record::Ref(IndexRef::RecordRev { record: c.record, rev: 1 }));
    let last = tx.record_counter()?.unwrap_or(0);
    tx.put(keys::record_counter(tx.group()), Record::Counter(last.max(c.record.0)));
    Ok(())
}

/// What `RecordPatched` records.
pub(super) struct PatchedRecord<'a> {
    pub record: RecordId,
    pub thread: ThreadId,
    pub entry: EntrySeq,
    pub base_rev: u32,
    pub rev: u32,
    pub ops: &'a [AppliedOp],
    pub scope: Scope,
    pub taint: Taint,
}

/// Design §5.6 step 5: the ops in order at the new rev: a replace adds a history entry, an append
/// a numbered item and its id index.
pub(super) fn record_patched(
    tx: &mut Tx<'_>,
    p: &PatchedRecord<'_>,
    actor: AgentId,
    at: Timestamp,
) -> Result<(), StateError> {
    need(tx.entry(p.thread, p.entry)?, "entry")?;
    let key = keys::shared_record(p.record);
    let mut r = need(tx.shared_record(p.record)?, "shared record")?;
    if r.thread != p.thread || p.rev != r.rev + 1 || p.base_rev == 0 || p.base_rev > r.rev {
        return Err(StateError::corrupt(&key, "a patch does not follow the record's rev"));
    }
    let rev = p.rev;
    let append = |tx: &mut Tx<'_>, r: &mut SharedRecord, id: &ItemId, body: ItemBody| -> Result<u32, StateError> {
        let kind = body.kind();
        let index = keys::record_item_id(r.id, kind, &id.0);
        if tx.get(&index)?.is_some() {
            return Err(StateError::corrupt(&index, "an item id is used twice"));
        }
        let n = r.counts.get_mut(kind);
        *n += 1;
        let seq = *n;
        tx.put(index, Record::Ref(IndexRef::Item(seq)));
        tx.put(
            keys::record_item(r.id, kind, seq),
            Record::RecordItem(RecordItem {
                record: r.id,
                seq,
                id: id.clone(),
                author: actor,
                added_rev: rev,
                added_at: at,
                body,
            }),
        );
        Ok(seq)
    };
    for op in p.ops {
        match op {
            AppliedOp::ReplaceTitle(c) => put_value(tx, r.id, RecordField::Title, rev, FieldValue::Text(c.clone())),
            AppliedOp::ReplaceState(c) => put_value(tx, r.id, RecordField::State, rev, FieldValue::Text(c.clone())),
            AppliedOp::ReplaceBody(b) => put_value(tx, r.id, RecordField::Body, rev, FieldValue::Body(b.clone())),
            AppliedOp::ReplaceDecisionState { decision, state } => {
                let index = keys::record_item_id(r.id, ItemKind::Decision, &decision.0);
                let Some(seq) = tx.record_item_seq(r.id, ItemKind::Decision, &decision.0)? else {
                    return Err(StateError::corrupt(&index, "a patch replaces the state of no decision"));
                };
                put_value(tx, r.id, RecordField::DecisionState(seq), rev, FieldValue::Text(state.clone()));
            }
            AppliedOp::AppendNote { note_id, kind, body } => {
                append(tx, &mut r, note_id, ItemBody::Note { kind: *kind, body: body.clone() })?;
            }
            AppliedOp::AppendArtifact { artifact_id, reference, media_type } => {
                let body = ItemBody::Artifact { reference: reference.clone(), media_type: media_type.clone() };
                append(tx, &mut r, artifact_id, body)?;
            }
            AppliedOp::AppendDecision { decision_id, state, reason } => {
                let seq = append(tx, &mut r, decision_id, ItemBody::Decision { reason: reason.clone() })?;
                put_value(tx, r.id, RecordField::DecisionState(seq), rev, FieldValue::Text(state.clone()));
            }
        }
    }
    r.rev = rev;
    r.updated_by = actor;
    r.updated_at = at;
    tx.put(key, Record::SharedRecord(r));
    tx.put(
        keys::record_revision(p.record, rev),
        Record::RecordRevision(RecordRevision {
            record: p.record,
            rev,
            base_rev: p.base_rev,
            entry: p.entry,
            actor,
            at,
            paths: p.ops.iter().map(AppliedOp::path).collect(),
            scope: p.scope,
            taint: p.taint,
        }),
    );
    tx.put(keys::entry_record(p.thread, p.entry), Record::Ref(IndexRef::RecordRev { record: p.record, rev }));
    Ok(())
}
