//! The coordination layer's actions (design §2–§4): labeled writes and the explicit widening,
//! `Send` (messages, publish, barrier) and `Scatter`. Each is an explicit sequence of base actions
//! (a Memory version, posts, assignments) plus at most one label fact, with the preconditions each
//! base action would have alone: a combined action gains no permission (L2, design R3). None
//! creates an obligation the spec does not define (§1, §10.2.1): every ask is a §6.3 ask, every
//! assignment a §6.4 assignment.

use super::threads::{emit_post, speakers_of};
use super::{Cx, Fail, Res, assignments, memory, reject, reject_field};
use crate::action::{Addressees, LabeledBody, NewAssignment, RankGoal};
use crate::coord::floor::effective;
use crate::fact::Fact;
use crate::keys;
use crate::limits::CoordLimits;
use crate::model::*;
use crate::receipt::ActionResult;
use crate::state::{Record, StateError, StateExt, StateRead};
use kungfu_types::{AgentId, Code, Content, EntrySeq, FakReason, Labels, MemoryId, Micros, Rejection, Scope, ThreadId};
use std::collections::BTreeSet;

use super::floor_at;
use crate::coord::floor::Context;

pub(super) const LIMITS: CoordLimits = CoordLimits::DEFAULT;

// --- Design §2.5 Labeled writes -------------------------------------------------------------------

/// Design §2.5: a labeled Memory, or a labeled new version of the caller's own Memory.
pub(super) fn write_labeled(
    cx: &mut Cx<'_>,
    me: AgentId,
    memory: Option<MemoryId>,
    content: &Content,
    labels: Labels,
) -> Res<ActionResult> {
    let pin = match memory {
        None => {
            let (memory, version) = memory::emit_memory(cx, me, content, "content")?;
            Pin { memory, version }
        }
        Some(id) => {
            let m = memory::updatable_memory(cx, me, id, content)?;
            // Design §2.4: a public Memory takes no version that could not be published.
            if m.is_public() {
                floor_at("labels", labels, Context::Published)?;
            }
            let version = m.current.next();
            cx.emit(Fact::MemoryUpdated { memory: id, version, content: content.clone() })?;
            Pin { memory: id, version }
        }
    };
    cx.emit(Fact::VersionLabeled { memory: pin.memory, version: pin.version, labels, widened_from: None })?;
    Ok(ActionResult::LabeledWritten { pin, labels })
}

/// Design §2.5: the explicit, auditable widening. A new version with the same bytes and the wider
/// scope; every earlier pin keeps its earlier labels.
pub(super) fn widen_scope(cx: &mut Cx<'_>, me: AgentId, pin: Pin, scope: Scope) -> Res<ActionResult> {
    let m = memory::own_memory(cx, me, pin.memory)?;
    if !m.is_valid() {
        return reject_field(Code::MemoryWithdrawn, "pin.memory", "the Memory is withdrawn; it takes no new versions");
    }
    let Some(version) = cx.tx.memory_version(pin.memory, pin.version)?.filter(|_| pin.version.0 > 0) else {
        return reject_field(Code::InvalidArgument, "pin.version", "names a version that does not exist");
    };
    let current = effective(cx.tx.labels(pin)?);
    if current.taint == kungfu_types::Taint::Quarantined {
        return Err(Fail::Reject(
            Rejection::field(
                Code::TrustViolation,
                "pin",
                "is quarantined; quarantined content is never widened, write reviewed content as a new version",
            )
            .with_fak(FakReason::TrustViolation),
        ));
    }
    if scope == current.scope {
        // L2: no implicit success.
        return reject_field(Code::NoEffect, "scope", format!("the version is already {scope}-scoped"));
    }
    if scope < current.scope {
        return reject_field(
            Code::InvalidArgument,
            "scope",
            format!(
                "is narrower than the version's {} scope; widening only, write a new labeled version to narrow",
                current.scope
            ),
        );
    }
    let labels = Labels::new(current.taint, scope);
    if m.is_public() {
        floor_at("scope", labels, Context::Published)?;
    }
    if m.current.0 >= cx.limits.max_versions_per_memory {
        return reject(
            Code::LimitExceeded,
            format!("a Memory may have at most {} versions", cx.limits.max_versions_per_memory),
        );
    }
    let to = Pin { memory: pin.memory, version: m.current.next() };
    cx.emit(Fact::MemoryUpdated { memory: to.memory, version: to.version, content: version.content })?;
    cx.emit(Fact::VersionLabeled { memory: to.memory, version: to.version, labels, widened_from: Some(pin.version) })?;
    Ok(ActionResult::ScopeWidened { from: pin, to, scope })
}

// --- Bodies ---------------------------------------------------------------------------------------

/// A body resolved and checked, not yet written: its labels passed the floor for a thread entry.
pub(super) enum Resolved {
    Pin(Pin),
    Content(Content, Labels),
}

/// Design §3.3 steps 2–3: the body's labels (a pin's own, unlabeled = fail closed; new content's
/// given ones) against the floor for a thread entry. The pin rule runs first, so an unreadable pin
/// answers NOT_FOUND and never reveals its labels (design §2.4).
pub(super) fn resolve_body(cx: &Cx<'_>, me: AgentId, field: &str, body: &LabeledBody) -> Res<Resolved> {
    match body {
        LabeledBody::Pin(pin) => {
            cx.referable_pin(&format!("{field}.pin"), *pin, me)?;
            match cx.tx.labels(*pin)? {
                Some(labels) => floor_at(&format!("{field}.pin"), labels, Context::ThreadEntry)?,
                None => {
                    return Err(Fail::Reject(
                        Rejection::field(
                            Code::TrustViolation,
                            format!("{field}.pin"),
                            "is unlabeled, and unlabeled content counts as private on the coordination path: \
                             write it with WriteLabeled or widen it with WidenScope",
                        )
                        .with_fak(FakReason::TrustViolation),
                    ));
                }
            }
            Ok(Resolved::Pin(*pin))
        }
        LabeledBody::Content { content, labels } => {
            // Wire paths: `LabeledContent { content, labels }` sits at `<field>.content`.
            cx.content(&format!("{field}.content.content"), content, cx.limits.max_content_bytes)?;
            floor_at(&format!("{field}.content.labels"), *labels, Context::ThreadEntry)?;
            Ok(Resolved::Content(content.clone(), *labels))
        }
    }
}

/// Writes a resolved body: new content becomes a labeled Memory of the author (two facts).
pub(super) fn write_body(cx: &mut Cx<'_>, me: AgentId, field: &str, body: Resolved) -> Res<Pin> {
    match body {
        Resolved::Pin(pin) => Ok(pin),
        Resolved::Content(content, labels) => {
            let (memory, version) = memory::emit_memory(cx, me, &content, &format!("{field}.content"))?;
            cx.emit(Fact::VersionLabeled { memory, version, labels, widened_from: None })?;
            Ok(Pin { memory, version })
        }
    }
}

/// The inline bytes of resolved bodies, against the per-action budget (design §9).
fn check_inline_budget(bodies: &[&Resolved]) -> Res<usize> {
    let mut bytes = 0usize;
    let mut count = 0usize;
    for b in bodies {
        if let Resolved::Content(c, _) = b {
            bytes = bytes.saturating_add(c.len());
            count += 1;
        }
    }
    check_inline_bytes(bytes)?;
    Ok(count)
}

/// Design §9: the inline content one action may carry, whatever kind of action it is.
pub(super) fn check_inline_bytes(bytes: usize) -> Res<()> {
    if bytes > LIMITS.max_collective_bytes {
        return Err(Fail::Reject(
            Rejection::new(
                Code::LimitExceeded,
                format!(
                    "the inline content of one action is {bytes} bytes; the limit is {}: store large bodies as \
                     labeled Memory versions and pin them",
                    LIMITS.max_collective_bytes
                ),
            )
            .with_fak(FakReason::Oversize),
        ));
    }
    Ok(())
}

/// The memories-per-agent cap for `new` Memories created by one action (L4).
pub(super) fn check_memory_capacity(cx: &Cx<'_>, me: AgentId, new: usize) -> Res<()> {
    let a = cx.active(me)?;
    if (a.memories as usize).saturating_add(new) > cx.limits.max_memories_per_agent as usize {
        return reject(
            Code::LimitExceeded,
            format!("an agent may create at most {} Memories", cx.limits.max_memories_per_agent),
        );
    }
    Ok(())
}

/// Design §3.3 step 1 and §2.7: send = may speak, in an open thread of which the caller is a member.
pub(super) fn speaker_in_open_thread(cx: &Cx<'_>, thread: ThreadId, me: AgentId) -> Res<Thread> {
    let (t, m) = cx.open_member_thread(thread, me)?;
    if !m.may_speak() {
        return reject(Code::CannotSpeak, "an observer may receive but not send; a governor can change your role");
    }
    Ok(t)
}

// --- Design §3.3 Send -----------------------------------------------------------------------------

/// Design §3.3: an entry pinning a labeled body, asking the addressees (nobody, named members, or
/// every member who may speak but the author).
pub(super) fn send(
    cx: &mut Cx<'_>,
    me: AgentId,
    thread: ThreadId,
    body: &LabeledBody,
    to: &Addressees,
    reply_to: Option<EntrySeq>,
    reply_to_latest: bool,
) -> Res<ActionResult> {
    let t = speaker_in_open_thread(cx, thread, me)?;
    let body = resolve_body(cx, me, "body", body)?;
    match reply_to {
        Some(seq) => {
            let Some(replied) = cx.tx.entry(thread, seq)? else {
                return reject_field(Code::InvalidArgument, "reply_to", "names no entry of this thread");
            };
            // Design §3.6: a correction must answer the worker's latest status.
            if reply_to_latest && later_entry_by(cx, &t, replied.author, seq)?.is_some() {
                return Err(Fail::Reject(
                    Rejection::field(
                        Code::StaleBase,
                        "reply_to",
                        "is no longer its author's latest entry in this thread; read the newer one and reply to it",
                    )
                    .with_fak(FakReason::Unwitnessed),
                ));
            }
        }
        None if reply_to_latest => {
            return reject_field(Code::InvalidArgument, "reply_to_latest", "needs reply_to");
        }
        None => {}
    }
    let ask = addressees(cx, thread, me, to)?;
    check_inline_budget(&[&body])?;
    let pin = write_body(cx, me, "body", body)?;
    let (entry, responders, _) = emit_post(cx, me, &t, pin, reply_to, Some(ask), None)?;
    // fak's fan-out count: the members who read it now (0 = accepted, read by nobody yet).
    let readers = t.members.saturating_sub(1);
    Ok(ActionResult::Sent { thread, entry, pin, responders, readers })
}

/// Design §3.3 step 5: the stated ask of a `Send`.
fn addressees(cx: &Cx<'_>, thread: ThreadId, me: AgentId, to: &Addressees) -> Res<BTreeSet<AgentId>> {
    Ok(match to {
        Addressees::Nobody => BTreeSet::new(),
        Addressees::Agents(agents) => {
            // The §6.3 ask rules, with the wire's field names.
            if agents.is_empty() {
                return reject_field(Code::InvalidArgument, "to.agents", "names nobody; send to nobody instead");
            }
            if agents.len() > cx.limits.max_ask {
                return reject_field(
                    Code::LimitExceeded,
                    "to.agents",
                    format!("may name at most {} members; use all_speakers for a whole group", cx.limits.max_ask),
                );
            }
            for (i, a) in agents.iter().enumerate() {
                if *a == me {
                    return reject_field(
                        Code::InvalidTarget,
                        &format!("to.agents[{i}]"),
                        "a message never asks its own author",
                    );
                }
                match cx.tx.membership(thread, *a)? {
                    Some(m) if m.may_speak() => {}
                    _ => {
                        return reject_field(
                            Code::InvalidTarget,
                            &format!("to.agents[{i}]"),
                            "is not a member who may speak",
                        );
                    }
                }
            }
            agents.clone()
        }
        Addressees::AllSpeakers => {
            let mut all = speakers_of(cx, thread)?;
            all.remove(&me);
            // A combined action gains no permission (L2, design R3): its base `Post` could ask at
            // most `max_ask`, so a group send asks at most that many too.
            let bound = LIMITS.max_collective_members.min(cx.limits.max_ask);
            if all.len() > bound {
                return reject_field(
                    Code::LimitExceeded,
                    "to.all_speakers",
                    format!("the thread has {} other speakers; a group send asks at most {bound}: split it", all.len()),
                );
            }
            all
        }
    })
}

/// The first entry after `after` by `author` in this thread, if any (design §3.6). Walks only the
/// entries posted since, in pages.
fn later_entry_by(cx: &Cx<'_>, t: &Thread, author: AgentId, after: EntrySeq) -> Res<Option<EntrySeq>> {
    let prefix = keys::entries_of(t.id);
    let mut cursor = keys::entry(t.id, after);
    loop {
        let page = cx.tx.scan(&prefix, Some(&cursor), 256)?;
        let done = page.len() < 256;
        for (key, r) in page {
            let Record::Entry(e) = r else {
                return Err(StateError::corrupt(&key, "expected an entry").into());
            };
            if e.author == author {
                return Ok(Some(e.seq));
            }
            cursor = key;
        }
        if done {
            return Ok(None);
        }
    }
}

// --- Design §4.3 Scatter --------------------------------------------------------------------------

/// What every rank's assignment shares.
pub(super) struct ScatterSpec<'a> {
    pub criteria: &'a Content,
    pub output_structure: Option<&'a Content>,
    pub delivery_window: Option<Micros>,
    pub judgment_window: Option<Micros>,
}

/// Design §4.3: one atomic action, a header entry and one entry with an assignment per rank, in
/// rank order (ascending member id), then the label fact `Scattered`. Every check runs before the
/// first fact, and any failure rejects the whole action (L2): a scatter is never partial.
pub(super) fn scatter(
    cx: &mut Cx<'_>,
    me: AgentId,
    thread: ThreadId,
    header: &LabeledBody,
    goals: &[RankGoal],
    spec: &ScatterSpec<'_>,
) -> Res<ActionResult> {
    // 1. As Send: a member who may speak, in an open thread.
    let t = speaker_in_open_thread(cx, thread, me)?;
    // 2. Arity and uniqueness; rank = position in ascending member id, whatever the request order.
    if goals.is_empty() {
        return reject_field(Code::InvalidArgument, "goals", "names no rank; a scatter needs at least one goal");
    }
    if goals.len() > LIMITS.max_collective_members {
        return reject_field(
            Code::LimitExceeded,
            "goals",
            format!("a scatter has at most {} ranks", LIMITS.max_collective_members),
        );
    }
    let mut order: Vec<usize> = (0..goals.len()).collect();
    order.sort_by_key(|i| goals[*i].member);
    for w in order.windows(2) {
        if goals[w[0]].member == goals[w[1]].member {
            return reject_field(
                Code::InvalidArgument,
                &format!("goals[{}].member", w[1].max(w[0])),
                "names a member twice; one goal per member",
            );
        }
    }
    // 3. Every member a current member who may speak (the caller may be one, §6.4).
    for (i, g) in goals.iter().enumerate() {
        match cx.tx.membership(thread, g.member)? {
            Some(m) if m.may_speak() => {}
            _ => {
                return reject_field(
                    Code::InvalidTarget,
                    &format!("goals[{i}].member"),
                    "is not a member who may speak",
                );
            }
        }
    }
    // 4. The shared assignment spec.
    cx.content("criteria", spec.criteria, cx.limits.max_content_bytes)?;
    if let Some(s) = spec.output_structure {
        cx.content("output_structure", s, cx.limits.max_content_bytes)?;
    }
    let delivery_window =
        cx.window("delivery_window_micros", spec.delivery_window, cx.limits.default_delivery_window)?;
    let judgment_window =
        cx.window("judgment_window_micros", spec.judgment_window, cx.limits.default_judgment_window)?;
    // 5. Every body through the floor; the inline budget.
    let header = resolve_body(cx, me, "header", header)?;
    let mut bodies = Vec::with_capacity(goals.len());
    for (i, g) in goals.iter().enumerate() {
        bodies.push(resolve_body(cx, me, &format!("goals[{i}].body"), &g.body)?);
    }
    let mut all: Vec<&Resolved> = vec![&header];
    all.extend(bodies.iter());
    let inline = check_inline_budget(&all)?;
    // 6. Capacity: open assignments of the thread, Memories of the author, entry numbers.
    if (t.open_assignments as usize).saturating_add(goals.len()) > cx.limits.max_open_assignments_per_thread as usize {
        return reject_field(
            Code::LimitExceeded,
            "goals",
            format!(
                "the thread has {} undelivered assignments and takes at most {}",
                t.open_assignments, cx.limits.max_open_assignments_per_thread
            ),
        );
    }
    check_memory_capacity(cx, me, inline)?;
    if t.last_entry > u64::MAX - (goals.len() as u64 + 1) {
        return reject(Code::LimitExceeded, "the thread has no entry numbers left");
    }

    // Facts, in order: the header asks nobody; each rank replies to it, asks nobody and carries
    // its assignment, so the scatter creates opportunities, not obligations (§6.4, §8).
    let header_pin = write_body(cx, me, "header", header)?;
    let mut t = t;
    let (header_seq, _, _) = emit_post(cx, me, &t, header_pin, None, Some(BTreeSet::new()), None)?;
    t.last_entry = header_seq.0;
    let mut bodies: Vec<Option<Resolved>> = bodies.into_iter().map(Some).collect();
    let mut ranks = Vec::with_capacity(goals.len());
    for i in order {
        let g = &goals[i];
        let field = format!("goals[{i}].body");
        let body = bodies[i].take().ok_or_else(|| StateError::Io("internal: a rank's body used twice".into()))?;
        let pin = write_body(cx, me, &field, body)?;
        let (entry, _, _) = emit_post(cx, me, &t, pin, Some(header_seq), Some(BTreeSet::new()), None)?;
        t.last_entry = entry.0;
        let assignment = assignments::create_assignment(
            cx,
            me,
            thread,
            entry,
            &NewAssignment {
                addressee: g.member,
                criteria: spec.criteria.clone(),
                output_structure: spec.output_structure.cloned(),
                delivery_window: Some(delivery_window),
                judgment_window: Some(judgment_window),
            },
        )?;
        ranks.push(ScatterRank { member: g.member, entry, assignment });
    }
    cx.emit(Fact::Scattered { thread, header: header_seq, ranks: ranks.clone() })?;
    Ok(ActionResult::Scattered { thread, header: header_seq, ranks })
}
