//! Whole-state invariant checks, run after every apply in tests (STYLE habit 5). Each check names
//! the rule it guards. A violation is a bug in the core; production code that finds one must stop
//! rather than continue on a corrupt state.

use crate::coord::floor::{self, Context};
use crate::fact::Fact;
use crate::keys;
use crate::model::*;
use crate::state::{IndexRef, Record, StateError, StateExt, StateRead};
use kungfu_types::{Labels, MemoryId, ObjectRef, Role, Version};
use std::collections::{BTreeMap, BTreeSet};

/// A broken invariant, with the rule it breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invariant {rule} broken: {detail}")]
pub struct Violation {
    pub rule: &'static str,
    pub detail: String,
}

fn fail(rule: &'static str, detail: impl Into<String>) -> Result<(), Violation> {
    Err(Violation { rule, detail: detail.into() })
}

fn io(e: StateError) -> Violation {
    Violation { rule: "readable state", detail: e.to_string() }
}

/// Checks every invariant of the protocol state.
pub fn validate(state: &dyn StateRead) -> Result<(), Violation> {
    let records = state.scan_all(&keys::records_prefix()).map_err(io)?;
    let indexes: BTreeMap<Vec<u8>, Record> = state.scan_all(&keys::indexes_prefix()).map_err(io)?.into_iter().collect();
    let has = |k: Vec<u8>| indexes.contains_key(&k);

    let mut members: BTreeMap<kungfu_types::ThreadId, (u32, u32)> = BTreeMap::new();
    let mut open_threads_of: BTreeMap<kungfu_types::AgentId, u32> = BTreeMap::new();
    let mut threads = BTreeMap::new();
    let mut tasks = BTreeMap::new();
    let mut open_asg: BTreeMap<kungfu_types::ThreadId, u32> = BTreeMap::new();
    let mut open_eng: BTreeMap<kungfu_types::TaskId, u32> = BTreeMap::new();
    let mut adopted: BTreeMap<kungfu_types::TaskId, (u32, Option<u32>)> = BTreeMap::new();
    let mut agents = BTreeMap::new();
    let mut obligations = BTreeSet::new();

    for (_, r) in &records {
        if let Record::Thread(t) = r {
            threads.insert(t.id, t.clone());
        }
        if let Record::Task(t) = r {
            tasks.insert(t.id, t.clone());
        }
        if let Record::Agent(a) = r {
            agents.insert(a.id, a.clone());
        }
    }

    for (key, r) in &records {
        match r {
            Record::Membership(m) if m.is_current() => {
                let e = members.entry(m.thread).or_default();
                e.0 += 1;
                if m.role == Role::Governor {
                    e.1 += 1;
                }
                if threads.get(&m.thread).is_some_and(|t| t.is_open()) {
                    *open_threads_of.entry(m.agent).or_default() += 1;
                }
                if !has(keys::agent_thread(m.agent, m.thread)) {
                    return fail("index: current memberships by agent", format!("{} in {}", m.agent, m.thread));
                }
            }
            Record::Obligation(o) => {
                obligations.insert(o.id);
                // §8: each open obligation is in its holder's turn exactly once.
                if !has(keys::turn(o.holder, o.arose_at, o.id))
                    || !has(keys::object_obligation(o.object, o.holder, o.id))
                {
                    return fail("§8 turn completeness", format!("{:?} missing from the turn of {}", o.id, o.holder));
                }
                check_exit(state, o)?;
            }
            Record::Assignment(a) => {
                if a.state.is_undelivered() {
                    *open_asg.entry(a.thread).or_default() += 1;
                    // §6.2: no undelivered assignment has a departed party.
                    for party in [a.creator, a.addressee] {
                        let current = state.membership(a.thread, party).map_err(io)?.is_some_and(|m| m.is_current());
                        if !current {
                            return fail(
                                "§6.2 membership end voids undelivered assignments",
                                format!("{} has departed party {party}", a.id),
                            );
                        }
                    }
                    if !threads.get(&a.thread).is_some_and(|t| t.is_open()) {
                        return fail("§6.5 close voids undelivered assignments", format!("{}", a.id));
                    }
                }
                match &a.state {
                    AssignmentState::Open => {
                        if !has(keys::opportunity(a.addressee, a.created_at, OpportunityId::Assignment(a.id))) {
                            return fail(
                                "§8 opportunities discoverable",
                                format!("{} not in opportunities of {}", a.id, a.addressee),
                            );
                        }
                    }
                    AssignmentState::Taken { delivery_due, .. } => {
                        if !obligations_has(state, ObligationId::AssignmentDelivery(a.id))? {
                            return fail(
                                "§8 delivery obligation",
                                format!("{} taken without a delivery obligation", a.id),
                            );
                        }
                        if !has(keys::due(*delivery_due, ObligationId::AssignmentDelivery(a.id))) {
                            return fail("L4 delivery deadline", format!("{} has no due entry", a.id));
                        }
                    }
                    AssignmentState::Delivered { judgment_due, .. } => {
                        let has_obligation = obligations_has(state, ObligationId::AssignmentJudgment(a.id))?;
                        if has_obligation == a.judge_forfeited {
                            return fail(
                                "§6.2 judgment forfeited on departure",
                                format!("{} obligation {has_obligation} forfeited {}", a.id, a.judge_forfeited),
                            );
                        }
                        if !has(keys::due(*judgment_due, ObligationId::AssignmentJudgment(a.id))) {
                            return fail("L4 judgment deadline", format!("{} has no due entry", a.id));
                        }
                    }
                    AssignmentState::Ended { .. } => {}
                }
            }
            Record::Engagement(e) => {
                if !e.state.is_terminal() {
                    *open_eng.entry(e.task).or_default() += 1;
                    if state.index(&keys::open_engagement(e.task, e.agent)).map_err(io)?
                        != Some(IndexRef::Engagement(e.id))
                    {
                        return fail("§7.3 one open engagement per agent", format!("{} not indexed", e.id));
                    }
                }
                if let EngagementState::Ended { outcome: EngagementOutcome::Adopted, .. } = e.state {
                    let limit = state
                        .contract_version(e.task, e.contract_version)
                        .map_err(io)?
                        .and_then(|cv| cv.contract.max_adoptions);
                    let entry = adopted.entry(e.task).or_insert((0, Some(0)));
                    entry.0 += 1;
                    // The largest limit any adopted engagement was bound by (None = unlimited).
                    entry.1 = match (entry.1, limit) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        _ => None,
                    };
                }
            }
            Record::Thread(t) => {
                // §6.2: an open thread always has at least one governor.
                if t.is_open() && t.governors == 0 {
                    return fail("§6.2 an open thread has a governor", format!("{}", t.id));
                }
                if let Some(g) = &t.grant {
                    if state.index(&keys::grant_by_hash(&g.hash)).map_err(io)? != Some(IndexRef::Thread(t.id)) {
                        return fail("§6.1 one live grant", format!("{} grant not indexed", t.id));
                    }
                    if !t.is_open() {
                        return fail("§6.5 close voids admission", format!("{}", t.id));
                    }
                }
            }
            _ => {
                let _ = key;
            }
        }
    }

    for (id, t) in &threads {
        let (m, g) = members.get(id).copied().unwrap_or_default();
        if t.members != m || t.governors != g {
            return fail(
                "counter: thread members",
                format!("{id}: stored {}/{}, actual {m}/{g}", t.members, t.governors),
            );
        }
        if t.open_assignments != open_asg.get(id).copied().unwrap_or(0) {
            return fail("counter: open assignments", format!("{id}"));
        }
    }
    for (id, t) in &tasks {
        if t.open_engagements != open_eng.get(id).copied().unwrap_or(0) {
            return fail("counter: open engagements", format!("{id}"));
        }
        let (count, limit) = adopted.get(id).copied().unwrap_or((0, None));
        if t.adopted != count {
            return fail("counter: adoptions", format!("{id}: stored {} actual {count}", t.adopted));
        }
        // §7.4: adoptions never exceed the limit.
        if let Some(limit) = limit {
            if count > limit {
                return fail("§7.4 adoption limit", format!("{id}: {count} adopted, limit {limit}"));
            }
        }
    }
    for (id, a) in &agents {
        if a.open_threads != open_threads_of.get(id).copied().unwrap_or(0) {
            return fail(
                "counter: open threads per agent",
                format!("{id}: stored {} actual {}", a.open_threads, open_threads_of.get(id).copied().unwrap_or(0)),
            );
        }
    }
    // Every index entry that names an obligation names an open one (no stale turn entries).
    for (k, r) in &indexes {
        if matches!(k.get(1), Some(1) | Some(2)) {
            if let Record::Ref(IndexRef::Obligation(id)) = r {
                if !obligations.contains(id) {
                    return fail("§8 turn has no stale entries", format!("{id:?}"));
                }
            }
        }
    }
    check_coordination(state, &records)?;
    Ok(())
}

/// The invariants of the coordination layer, part I (design §8.3): labels belong to one existing
/// version and are written in the command that creates it; labeled content never sits where its
/// labels forbid (an entry, a Task input, a public Memory's current version); a collective is
/// exactly the base facts its scatter emitted.
fn check_coordination(state: &dyn StateRead, records: &[(Vec<u8>, Record)]) -> Result<(), Violation> {
    let mut labeled: BTreeMap<MemoryId, BTreeMap<Version, Labels>> = BTreeMap::new();
    for (key, r) in records {
        match r {
            Record::Labels(l) => {
                // At most one per version: the record sits under the key of the version it names.
                if *key != keys::version_labels(l.memory, l.version) {
                    return fail("design §8.3 labels keyed by their version", format!("{}/{}", l.memory, l.version));
                }
                if state.memory_version(l.memory, l.version).map_err(io)?.is_none() {
                    return fail("design §8.3 labels name an existing version", format!("{}/{}", l.memory, l.version));
                }
                if l.widened_from.is_some_and(|from| from.0 == 0 || from >= l.version) {
                    return fail(
                        "design §2.5 a widening is a later version",
                        format!("{}/{} widens {:?}", l.memory, l.version, l.widened_from),
                    );
                }
                labeled.entry(l.memory).or_default().insert(l.version, l.labels);
            }
            Record::Entry(e) => {
                // Design §2.4: a labeled pin reaches a thread only at fleet scope or wider and never
                // quarantined; unlabeled pins keep the spec's behaviour (R2).
                if let Some(labels) = state.labels(e.pin).map_err(io)? {
                    if floor::floor(labels, Context::ThreadEntry).is_err() {
                        return fail(
                            "design §8.3 no entry pins content below its floor",
                            format!(
                                "{} entry {} pins {}/{} labeled {labels}",
                                e.thread, e.seq, e.pin.memory, e.pin.version
                            ),
                        );
                    }
                }
            }
            Record::ContractVersion(cv) => {
                for pin in &cv.contract.inputs {
                    if let Some(labels) = state.labels(*pin).map_err(io)? {
                        if floor::floor(labels, Context::TaskInput).is_err() {
                            return fail(
                                "design §8.3 no Task input below its floor",
                                format!(
                                    "{} v{} input {}/{} labeled {labels}",
                                    cv.task, cv.version, pin.memory, pin.version
                                ),
                            );
                        }
                    }
                }
            }
            Record::Memory(m) if m.is_public() => {
                let pin = Pin { memory: m.id, version: m.current };
                if let Some(labels) = state.labels(pin).map_err(io)? {
                    if floor::floor(labels, Context::Published).is_err() {
                        return fail(
                            "design §8.3 a public Memory's current version is publishable",
                            format!("{} v{} labeled {labels}", m.id, m.current),
                        );
                    }
                }
            }
            Record::Collective(c) => check_collective(state, key, c)?,
            Record::SharedRecord(r) => check_shared_record(state, key, r)?,
            _ => {}
        }
    }
    check_record_indexes(state, records)?;
    // Design §2.2: each label was written by one `VersionLabeled`, right after the fact that
    // created its version, in the same command. Read from each labeled Memory's journal.
    for (memory, versions) in &labeled {
        let journal = state.scan_all(&keys::journal_of(ObjectRef::Memory(*memory))).map_err(io)?;
        let mut seen: BTreeMap<Version, Labels> = BTreeMap::new();
        let mut previous: Option<&crate::fact::JournaledFact> = None;
        for (key, r) in &journal {
            let Record::Fact(jf) = r else {
                return Err(io(StateError::corrupt(key, "journal entry is not a fact")));
            };
            if let Fact::VersionLabeled { version, labels, .. } = &jf.fact {
                let created = previous.is_some_and(|p| {
                    p.seq == jf.seq
                        && p.idx + 1 == jf.idx
                        && match &p.fact {
                            Fact::MemoryCreated { .. } => *version == Version::FIRST,
                            Fact::MemoryUpdated { version: v, .. } => v == version,
                            _ => false,
                        }
                });
                if !created {
                    return fail(
                        "design §8.3 a version is labeled in the command that creates it",
                        format!("{memory}/{version} at seq {}", jf.seq),
                    );
                }
                if seen.insert(*version, *labels).is_some() {
                    return fail("design §8.3 at most one label per version", format!("{memory}/{version}"));
                }
            }
            previous = Some(jf);
        }
        if &seen != versions {
            return fail(
                "design §8.3 the label records are the label facts",
                format!("{memory}: records {versions:?}, facts {seen:?}"),
            );
        }
    }
    Ok(())
}

/// Design §8.3: a collective's ranks are in strictly increasing member order; each rank's entry
/// replies to the header, has the header's author and carries the rank's assignment, addressed to
/// the rank's member.
fn check_collective(state: &dyn StateRead, key: &[u8], c: &Collective) -> Result<(), Violation> {
    const RULE: &str = "design §8.3 a collective is its scatter's base facts";
    if key != keys::collective(c.thread, c.header).as_slice() {
        return fail(RULE, format!("{} {} stored under another key", c.thread, c.header));
    }
    let Some(header) = state.entry(c.thread, c.header).map_err(io)? else {
        return fail(RULE, format!("{} header {} does not exist", c.thread, c.header));
    };
    if header.author != c.author {
        return fail(RULE, format!("{} header {} has another author", c.thread, c.header));
    }
    if c.ranks.is_empty() {
        return fail(RULE, format!("{} header {} has no rank", c.thread, c.header));
    }
    if c.ranks.windows(2).any(|w| w[0].member >= w[1].member) {
        return fail("design §4.1 ranks strictly increase by member", format!("{} header {}", c.thread, c.header));
    }
    for r in &c.ranks {
        let at = format!("{} header {} rank {}", c.thread, c.header, r.member);
        let Some(e) = state.entry(c.thread, r.entry).map_err(io)? else {
            return fail(RULE, format!("{at}: entry {} does not exist", r.entry));
        };
        if e.reply_to != Some(c.header) || e.author != c.author || e.assignment != Some(r.assignment) {
            return fail(RULE, format!("{at}: entry {} is not the rank's reply with its assignment", r.entry));
        }
        let Some(a) = state.assignment(r.assignment).map_err(io)? else {
            return fail(RULE, format!("{at}: assignment {} does not exist", r.assignment));
        };
        if a.addressee != r.member || a.entry != r.entry || a.thread != c.thread || a.creator != c.author {
            return fail(RULE, format!("{at}: assignment {} is not addressed to the rank", r.assignment));
        }
    }
    Ok(())
}

/// Design §8.3: a shared record's rev counts its revisions; rev 1 has a title, a state and a body;
/// every item is within `[Fleet, record.scope]` and not quarantined, numbered from 1 in append
/// order with a non-decreasing `added_rev`, and indexed by its id; counts equal the items; every
/// decision has a state at its `added_rev`; its thread indexes it and each revision's entry exists.
fn check_shared_record(state: &dyn StateRead, key: &[u8], r: &SharedRecord) -> Result<(), Violation> {
    const RULE: &str = "design §8.3 a shared record is its accepted writes";
    if key != keys::shared_record(r.id).as_slice() {
        return fail(RULE, format!("{} stored under another key", r.id));
    }
    if r.scope < kungfu_types::Scope::Fleet {
        return fail("design §5.3 a record is at least fleet-scoped", format!("{}", r.id));
    }
    if state.get(&keys::thread_record(r.thread, r.id)).map_err(io)?.is_none() {
        return fail(RULE, format!("{} is not indexed under {}", r.id, r.thread));
    }
    let revisions = state.scan_all(&keys::record_revisions_of(r.id)).map_err(io)?;
    if revisions.len() != r.rev as usize {
        return fail(RULE, format!("{} is at rev {} with {} revisions", r.id, r.rev, revisions.len()));
    }
    for (i, (_, rec)) in revisions.iter().enumerate() {
        let Record::RecordRevision(e) = rec else {
            return fail(RULE, format!("{} revision {} is not a revision", r.id, i + 1));
        };
        if e.rev as usize != i + 1 || (e.rev > 1 && (e.base_rev == 0 || e.base_rev >= e.rev)) {
            return fail(RULE, format!("{} revision {} has rev {} base {}", r.id, i + 1, e.rev, e.base_rev));
        }
        if !state.entry(r.thread, e.entry).map_err(io)?.is_some_and(|entry| entry.author == e.actor) {
            return fail("design §5.1 every record write is an entry of its writer", format!("{} rev {}", r.id, e.rev));
        }
        let indexed = state.index(&keys::entry_record(r.thread, e.entry)).map_err(io)?;
        if indexed != Some(IndexRef::RecordRev { record: r.id, rev: e.rev }) {
            return fail(RULE, format!("{} rev {}: its entry does not index it", r.id, e.rev));
        }
    }
    for field in [RecordField::Title, RecordField::State, RecordField::Body] {
        if state.get(&keys::record_value(r.id, field, 1)).map_err(io)?.is_none() {
            return fail("design §8.3 rev 1 has a title, a state and a body", format!("{} {field:?}", r.id));
        }
    }
    for kind in ItemKind::ALL {
        let items = state.scan_all(&keys::record_items_of(r.id, kind)).map_err(io)?;
        if items.len() != r.counts.get(kind) as usize {
            return fail(RULE, format!("{} counts {} {kind:?} items, has {}", r.id, r.counts.get(kind), items.len()));
        }
        let mut last_rev = 1;
        for (i, (_, rec)) in items.iter().enumerate() {
            let Record::RecordItem(item) = rec else {
                return fail(RULE, format!("{} {kind:?} {} is not an item", r.id, i + 1));
            };
            let at = format!("{} {kind:?} {}", r.id, item.id);
            if item.seq as usize != i + 1
                || item.body.kind() != kind
                || item.added_rev < last_rev
                || item.added_rev > r.rev
            {
                return fail(RULE, format!("{at}: out of order"));
            }
            last_rev = item.added_rev;
            if state.index(&keys::record_item_id(r.id, kind, &item.id.0)).map_err(io)? != Some(IndexRef::Item(item.seq))
            {
                return fail(RULE, format!("{at}: its id does not index it"));
            }
            if let Some(reference) = item.body.reference() {
                let labels = match reference {
                    BodyRef::Pin(p) => state.labels(*p).map_err(io)?.unwrap_or(Labels::FAIL_CLOSED),
                    BodyRef::External(e) => e.labels,
                };
                let within = floor::floor(labels, Context::RecordItem { record_scope: r.scope }).is_ok();
                if !within {
                    return fail("design §8.3 every item within [fleet, record scope], none quarantined", at);
                }
            }
            if kind == ItemKind::Decision
                && state
                    .get(&keys::record_value(r.id, RecordField::DecisionState(item.seq), item.added_rev))
                    .map_err(io)?
                    .is_none()
            {
                return fail("design §8.3 every decision has a state at its added rev", at);
            }
        }
    }
    Ok(())
}

/// Design §8.3: every item-id and thread index names an existing item or record; the record
/// counter equals the largest record id.
fn check_record_indexes(state: &dyn StateRead, records: &[(Vec<u8>, Record)]) -> Result<(), Violation> {
    let mut largest = 0;
    for (_, r) in records {
        if let Record::SharedRecord(r) = r {
            largest = largest.max(r.id.0);
        }
    }
    let counter = state.record_counter().map_err(io)?.unwrap_or(0);
    if counter != largest {
        return fail("design §8.3 the record counter equals the largest record id", format!("{counter} != {largest}"));
    }
    if largest == 0 {
        return Ok(());
    }
    for (k, _) in state.scan_all(&keys::record_item_id_prefix()).map_err(io)? {
        // The index key is tag, record id, kind, id bytes: the item it names must exist.
        let (Some(id), Some(kind)) = (k.get(2..10), k.get(10)) else {
            return fail("design §8.3 every item index has its item", hex::encode(&k));
        };
        let id = kungfu_types::RecordId(u64::from_be_bytes(id.try_into().unwrap_or_default()));
        let kind = match kind {
            1 => ItemKind::Note,
            2 => ItemKind::Artifact,
            _ => ItemKind::Decision,
        };
        let seq = match state.index(&k).map_err(io)? {
            Some(IndexRef::Item(seq)) => seq,
            _ => return fail("design §8.3 every item index has its item", hex::encode(&k)),
        };
        if state.record_item(id, kind, seq).map_err(io)?.is_none() {
            return fail("design §8.3 every item index has its item", hex::encode(&k));
        }
    }
    Ok(())
}

fn obligations_has(state: &dyn StateRead, id: ObligationId) -> Result<bool, Violation> {
    Ok(state.obligation(id).map_err(io)?.is_some())
}

/// L4: every open obligation has at least one exit that needs no one else.
fn check_exit(state: &dyn StateRead, o: &Obligation) -> Result<(), Violation> {
    match o.id {
        ObligationId::Response { thread, .. } => {
            // Exits: reply, handle, leave — all the holder's own acts — while it is a member of an
            // open thread that may still speak (§6.3); anything else must have ended the response.
            let m = state.membership(thread, o.holder).map_err(io)?;
            if !m.as_ref().is_some_and(|m| m.may_speak()) {
                return fail("§6.3 no response owed by a non-member", format!("{:?} held by {}", o.id, o.holder));
            }
            let t = state.thread(thread).map_err(io)?;
            if !t.is_some_and(|t| t.is_open()) {
                return fail("§6.5 close ends responses", format!("{:?}", o.id));
            }
            if o.due_at.is_some() {
                return fail("L4 a response needs no deadline", format!("{:?}", o.id));
            }
        }
        _ => {
            // Delivery and judgment wait on another party, so they carry a deadline (L4), whose
            // passing ends them with no one's help.
            let Some(due) = o.due_at else {
                return fail("L4 waiting obligations carry a deadline", format!("{:?}", o.id));
            };
            if state.get(&keys::due(due, o.id)).map_err(io)?.is_none() {
                return fail("L4 deadline armed", format!("{:?}", o.id));
            }
            let object = o.object;
            if state.get(&keys::object_due(object, due, o.id)).map_err(io)?.is_none() {
                return fail("L4 deadline armed on object", format!("{:?}", o.id));
            }
            if let ObjectRef::Agent(_) | ObjectRef::Memory(_) = object {
                return fail("§8 obligations belong to threads and tasks", format!("{:?}", o.id));
            }
        }
    }
    Ok(())
}
