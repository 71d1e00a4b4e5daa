//! §6.1–§6.3 and §6.5 Thread: creation and admission, members and roles, entries and responses, and
//! closing. Assignments (§6.4) are in `assignments`.

use super::{Cx, Fail, Res, assignments, memory, reject, reject_field};
use crate::action::{NewAssignment, NewGrant, PostBody};
use crate::coord::floor::Context;
use crate::fact::Fact;
use crate::keys;
use crate::model::*;
use crate::receipt::{ActionResult, GrantReceipt};
use crate::state::{IndexRef, Record, StateError, StateExt, StateRead};
use kungfu_types::{AgentId, Code, Content, EntrySeq, Role, TaskId, ThreadId};
use std::collections::BTreeSet;

// --- §6.1 / §6.2 Thread and membership ------------------------------------------------------------

/// The capacity limit on open threads per agent (L4).
fn check_open_thread_capacity(cx: &Cx<'_>, agent: &Agent) -> Res<()> {
    if agent.open_threads >= cx.limits.max_open_threads_per_agent {
        return reject(
            Code::LimitExceeded,
            format!(
                "an agent may belong to at most {} open threads; leave one first",
                cx.limits.max_open_threads_per_agent
            ),
        );
    }
    Ok(())
}

/// §6.1: creates a thread, its creator its governor, with an admission grant if one is given.
pub(super) fn create_thread(
    cx: &mut Cx<'_>,
    me: AgentId,
    subject: &Content,
    grant: Option<&NewGrant>,
) -> Res<ActionResult> {
    cx.content("subject", subject, cx.limits.max_subject_bytes)?;
    let a = cx.active(me)?;
    check_open_thread_capacity(cx, &a)?;
    let thread = ThreadId(cx.next_id(cx.counters()?.threads)?);
    cx.emit(Fact::ThreadCreated { thread, creator: me, subject: subject.clone() })?;
    let grant = match grant {
        Some(g) => Some(emit_grant(cx, thread, g)?),
        None => None,
    };
    Ok(ActionResult::ThreadCreated { thread, grant })
}

/// Issues an admission grant (§6.1), the step shared by creating a thread and issuing a grant.
fn emit_grant(cx: &mut Cx<'_>, thread: ThreadId, g: &NewGrant) -> Res<GrantReceipt> {
    if cx.tx.index(&keys::grant_by_hash(&g.hash))?.is_some() {
        return reject_field(
            Code::InvalidArgument,
            "grant",
            "this grant secret is already in use; generate a fresh one",
        );
    }
    let t = cx.tx.thread(thread)?.ok_or_else(|| StateError::corrupt(&keys::thread(thread), "missing"))?;
    cx.emit(Fact::GrantIssued {
        thread,
        number: t.grants_issued + 1,
        role: g.role,
        hash: g.hash,
        fingerprint: g.fingerprint.clone(),
    })?;
    Ok(GrantReceipt { role: g.role, fingerprint: g.fingerprint.clone() })
}

/// §6.1: a governor issues a new admission grant.
pub(super) fn issue_grant(cx: &mut Cx<'_>, me: AgentId, thread: ThreadId, g: &NewGrant) -> Res<ActionResult> {
    let (t, _) = cx.governor_of_open(thread, me)?;
    // §6.1: issuing a new grant voids the old one (in the same fact).
    let voided_previous = t.grant.is_some();
    let grant = emit_grant(cx, thread, g)?;
    Ok(ActionResult::GrantIssued { thread, grant, voided_previous })
}

/// §6.1: a governor voids the live admission grant.
pub(super) fn void_grant(cx: &mut Cx<'_>, me: AgentId, thread: ThreadId) -> Res<ActionResult> {
    let (t, _) = cx.governor_of_open(thread, me)?;
    if t.grant.is_none() {
        return reject(Code::NoEffect, "the thread has no live admission grant");
    }
    cx.emit(Fact::GrantVoided { thread })?;
    Ok(ActionResult::GrantVoided { thread })
}

/// §6.1: joins a thread through its live admission grant.
pub(super) fn join(cx: &mut Cx<'_>, me: AgentId, grant_hash: &kungfu_types::SecretHash) -> Res<ActionResult> {
    let a = cx.active(me)?;
    // §6.1: membership comes only through the thread's live admission grant. Every failure gives
    // the same answer, so a guess learns nothing (§12).
    let invalid = || reject(Code::GrantInvalid, "the admission grant is not valid");
    let Some(IndexRef::Thread(thread)) = cx.tx.index(&keys::grant_by_hash(grant_hash))? else {
        return invalid();
    };
    let Some(t) = cx.tx.thread(thread)? else {
        return invalid();
    };
    let Some(grant) = t.grant.clone().filter(|g| g.hash == *grant_hash) else {
        return invalid();
    };
    if !t.is_open() {
        return invalid();
    }
    if let Some(m) = cx.tx.membership(thread, me)? {
        if m.is_current() {
            // L2: joining again with a valid admission returns the existing membership.
            return Ok(ActionResult::Joined {
                thread,
                agent: me,
                role: m.role,
                joined_at: m.joined_at,
                existing: true,
            });
        }
    }
    if t.members >= cx.limits.max_members_per_thread {
        return reject(
            Code::LimitExceeded,
            format!("a thread has at most {} members", cx.limits.max_members_per_thread),
        );
    }
    check_open_thread_capacity(cx, &a)?;
    cx.emit(Fact::Joined { thread, agent: me, role: grant.role, via_grant: grant.number })?;
    Ok(ActionResult::Joined { thread, agent: me, role: grant.role, joined_at: cx.ts, existing: false })
}

/// §6.2: an open thread must always have at least one governor.
fn check_keeps_governor(t: &Thread, m: &Membership) -> Res<()> {
    if t.is_open() && m.role == Role::Governor && t.governors == 1 {
        return reject(
            Code::SoleGovernor,
            "an open thread must keep a governor; hand over the role or close the thread first",
        );
    }
    Ok(())
}

/// §6.2: a member leaves.
pub(super) fn leave(cx: &mut Cx<'_>, me: AgentId, thread: ThreadId) -> Res<ActionResult> {
    // §6.2: a member may leave at any time, also from a closed thread (§6.5).
    let (t, m) = cx.member_thread(thread, me)?;
    check_keeps_governor(&t, &m)?;
    cx.emit(Fact::MembershipEnded { thread, agent: me, reason: MembershipEnd::Left })?;
    Ok(ActionResult::Left { thread })
}

/// The current member an action names as its target.
fn target_member(cx: &Cx<'_>, thread: ThreadId, member: AgentId, field: &str) -> Res<Membership> {
    match cx.tx.membership(thread, member)? {
        Some(m) if m.is_current() => Ok(m),
        _ => reject_field(Code::InvalidTarget, field, "is not a current member of the thread"),
    }
}

/// §6.2: a governor removes another member.
pub(super) fn remove(cx: &mut Cx<'_>, me: AgentId, thread: ThreadId, member: AgentId) -> Res<ActionResult> {
    let (t, _) = cx.governor_of_open(thread, me)?;
    if member == me {
        return reject_field(Code::InvalidTarget, "member", "use leave to end your own membership");
    }
    let m = target_member(cx, thread, member, "member")?;
    check_keeps_governor(&t, &m)?;
    cx.emit(Fact::MembershipEnded { thread, agent: member, reason: MembershipEnd::Removed { by: me } })?;
    Ok(ActionResult::Removed { thread, member })
}

/// §6.2: a governor changes a member's role.
pub(super) fn change_role(
    cx: &mut Cx<'_>,
    me: AgentId,
    thread: ThreadId,
    member: AgentId,
    role: Role,
) -> Res<ActionResult> {
    let (t, _) = cx.governor_of_open(thread, me)?;
    let m = target_member(cx, thread, member, "member")?;
    if m.role == role {
        return reject(Code::NoEffect, format!("the member already holds the {role} role"));
    }
    if role != Role::Governor {
        check_keeps_governor(&t, &m)?;
    }
    cx.emit(Fact::RoleChanged { thread, agent: member, from: m.role, to: role, by: me })?;
    Ok(ActionResult::RoleChanged { thread, member, from: m.role, to: role })
}

// --- §6.3 Entries and responses -------------------------------------------------------------------

/// §6.3: posts an entry, with new content as a new Memory and an assignment if given (L2).
#[allow(clippy::too_many_arguments)]
pub(super) fn post(
    cx: &mut Cx<'_>,
    me: AgentId,
    thread: ThreadId,
    body: &PostBody,
    reply_to: Option<EntrySeq>,
    ask: Option<&BTreeSet<AgentId>>,
    task_ref: Option<TaskId>,
    assignment: Option<&NewAssignment>,
) -> Res<ActionResult> {
    // §6.3: only an active member who may speak, in an open thread, may post.
    let (t, m) = cx.open_member_thread(thread, me)?;
    if !m.role.may_speak() {
        return reject(Code::CannotSpeak, "an observer may not post; a governor can change your role");
    }
    if let Some(seq) = reply_to {
        if cx.tx.entry(thread, seq)?.is_none() {
            return reject_field(Code::InvalidArgument, "reply_to", "names no entry of this thread");
        }
    }
    if let Some(ask) = ask {
        check_ask(cx, thread, me, ask)?;
    }
    if let Some(task) = task_ref {
        // §7.5: an entry may reference a Task the author can read; nothing changes in the Task.
        match cx.visible_task(task, me) {
            Ok(_) => {}
            Err(Fail::Reject(_)) => {
                return reject_field(Code::NotFound, "task_ref", "no task with that id is visible to you");
            }
            // A state that cannot be read is never taken for a visible Task.
            Err(e @ (Fail::State(_) | Fail::Probed)) => return Err(e),
        }
    }
    // The pinned version: an existing readable version, or new content as a new Memory (L2 combo).
    let pin = match body {
        PostBody::Pin(pin) => {
            cx.referable_pin("body.pin", *pin, me)?;
            // Design §2.4: labeled content is held to its labels on this path too; unlabeled pins
            // keep the spec's behaviour (design R2). After the pin check, so an unreadable pin
            // answers NOT_FOUND and never reveals labels.
            if let Some(labels) = cx.tx.labels(*pin)? {
                super::floor_at("body.pin", labels, Context::ThreadEntry)?;
            }
            *pin
        }
        PostBody::Content(content) => {
            let (memory, version) = memory::emit_memory(cx, me, content, "body.content")?;
            Pin { memory, version }
        }
    };
    let (entry, responders, ended_own_response) = emit_post(cx, me, &t, pin, reply_to, ask.cloned(), task_ref)?;
    let assignment = match assignment {
        Some(na) => Some(assignments::create_assignment(cx, me, thread, entry, na)?),
        None => None,
    };
    Ok(ActionResult::Posted { thread, entry, pin, responders, ended_own_response, assignment })
}

/// §6.3: records an entry whose preconditions the caller checked: determines its responders
/// once, by the four rules in order, and emits `Posted`. Shared by `Post` and the coordination
/// actions (`Send`, `Scatter`), which are sequences of posts (L2).
/// §6.3: the stated ask of an entry: at most `max_ask` members who may speak, never the author.
pub(super) fn check_ask(cx: &Cx<'_>, thread: ThreadId, me: AgentId, ask: &BTreeSet<AgentId>) -> Res<()> {
    if ask.len() > cx.limits.max_ask {
        return reject_field(Code::LimitExceeded, "ask", format!("may name at most {} members", cx.limits.max_ask));
    }
    for (i, a) in ask.iter().enumerate() {
        if *a == me {
            return reject_field(Code::InvalidTarget, &format!("ask[{i}]"), "an entry never asks its own author");
        }
        match cx.tx.membership(thread, *a)? {
            Some(am) if am.may_speak() => {}
            _ => {
                return reject_field(Code::InvalidTarget, &format!("ask[{i}]"), "is not a member who may speak");
            }
        }
    }
    Ok(())
}

pub(super) fn emit_post(
    cx: &mut Cx<'_>,
    me: AgentId,
    t: &Thread,
    pin: Pin,
    reply_to: Option<EntrySeq>,
    ask: Option<BTreeSet<AgentId>>,
    task_ref: Option<TaskId>,
) -> Res<(EntrySeq, BTreeSet<AgentId>, bool)> {
    let thread = t.id;
    let replied = match reply_to {
        Some(seq) => cx.tx.entry(thread, seq)?,
        None => None,
    };
    // §6.3: the responders are determined once, in order.
    let responders: BTreeSet<AgentId> = if let Some(ask) = &ask {
        // Rule 1: the asked members (an empty set means nobody).
        ask.clone()
    } else if let Some(p) = replied.as_ref().filter(|p| p.author != me) {
        // Rule 2: the author of the entry replied to, or nobody if it can no longer speak.
        match cx.tx.membership(thread, p.author)? {
            Some(pm) if pm.may_speak() => BTreeSet::from([p.author]),
            _ => BTreeSet::new(),
        }
    } else {
        // Rule 3: exactly two members who may speak: the other one. Rule 4: otherwise nobody.
        // Reading stops at a third speaker, so a post to a large thread does not read every
        // membership (issue #15).
        let speakers = speakers_up_to(cx, thread, 3)?;
        if speakers.len() == 2 && speakers.contains(&me) {
            speakers.into_iter().filter(|a| *a != me).collect()
        } else {
            BTreeSet::new()
        }
    };
    let ended_own_response = match reply_to {
        Some(p) => {
            matches!(cx.tx.response(thread, p, me)?, Some(r) if r.state == ResponseState::Pending)
        }
        None => false,
    };
    // Numbered from `t` as the caller holds it: a caller that posts several entries in one command
    // (a scatter) advances its copy, so the common single post reads the thread only once.
    let last = t.last_entry;
    if last == u64::MAX {
        return reject(Code::LimitExceeded, "the thread has no entry numbers left");
    }
    let entry = EntrySeq(last + 1);
    cx.emit(Fact::Posted { thread, entry, author: me, pin, reply_to, ask, responders: responders.clone(), task_ref })?;
    Ok((entry, responders, ended_own_response))
}

/// The current members of a thread who may speak, in id order.
pub(super) fn speakers_of(cx: &Cx<'_>, thread: ThreadId) -> Res<BTreeSet<AgentId>> {
    speakers_up_to(cx, thread, usize::MAX)
}

/// The first `bound` current members of a thread who may speak, in id order: all of them when
/// there are at most `bound`.
fn speakers_up_to(cx: &Cx<'_>, thread: ThreadId, bound: usize) -> Res<BTreeSet<AgentId>> {
    // Pages small enough that a bounded read decodes few records, large enough for a full one.
    const PAGE: usize = 16;
    let prefix = keys::memberships_of(thread);
    let mut speakers = BTreeSet::new();
    let mut after: Option<keys::Key> = None;
    loop {
        let page = StateRead::scan(&cx.tx, &prefix, after.as_deref(), PAGE)?;
        let last_page = page.len() < PAGE;
        for (key, r) in page {
            let Record::Membership(m) = &r else {
                return Err(StateError::corrupt(&key, "expected a membership").into());
            };
            if m.may_speak() {
                speakers.insert(m.agent);
                if speakers.len() >= bound {
                    return Ok(speakers);
                }
            }
            after = Some(key);
        }
        if last_page {
            return Ok(speakers);
        }
    }
}

/// §6.3: a responder handles its pending response, with an optional one-line note.
pub(super) fn handle(
    cx: &mut Cx<'_>,
    me: AgentId,
    thread: ThreadId,
    entry: EntrySeq,
    note: Option<&Content>,
) -> Res<ActionResult> {
    if let Some(n) = note {
        cx.content("note", n, cx.limits.max_note_bytes)?;
        if n.as_bytes().contains(&b'\n') {
            return reject_field(Code::InvalidArgument, "note", "must be one line");
        }
    }
    cx.open_member_thread(thread, me)?;
    match cx.tx.response(thread, entry, me)? {
        Some(r) if r.state == ResponseState::Pending => {}
        _ => {
            return reject(Code::NoPendingResponse, "you owe no pending response to that entry");
        }
    }
    cx.emit(Fact::Handled { thread, entry, responder: me, note: note.cloned() })?;
    Ok(ActionResult::Handled { thread, entry })
}

/// §6.3: the entry's author retracts its request, ending the pending responses.
pub(super) fn retract(cx: &mut Cx<'_>, me: AgentId, thread: ThreadId, entry: EntrySeq) -> Res<ActionResult> {
    // §6.3: the entry's author, while still a member, may retract the request.
    cx.open_member_thread(thread, me)?;
    let Some(e) = cx.tx.entry(thread, entry)? else {
        return reject_field(Code::InvalidArgument, "entry", "names no entry of this thread");
    };
    if e.author != me {
        return reject(Code::NotAuthor, "only the entry's author may retract its request");
    }
    let mut pending = 0u32;
    for (key, r) in cx.tx.scan_all(&keys::responses_to(thread, entry))? {
        let Record::Response(r) = r else {
            return Err(StateError::corrupt(&key, "expected a response").into());
        };
        if r.state == ResponseState::Pending {
            pending += 1;
        }
    }
    if pending == 0 {
        return reject(Code::NoEffect, "the entry has no pending responses to retract");
    }
    cx.emit(Fact::Retracted { thread, entry })?;
    Ok(ActionResult::Retracted { thread, entry, responses_ended: pending })
}

// --- §6.5 Closing ---------------------------------------------------------------------------------

/// §6.5: a governor closes the thread.
pub(super) fn close(cx: &mut Cx<'_>, me: AgentId, thread: ThreadId) -> Res<ActionResult> {
    let (t, m) = cx.member_thread(thread, me)?;
    if !t.is_open() {
        // §6.5: closing is terminal.
        return reject(Code::ThreadClosed, "the thread is already closed; closing is terminal");
    }
    if m.role != Role::Governor {
        return reject(Code::NotGovernor, "only a governor may close the thread");
    }
    cx.emit(Fact::ThreadClosed { thread, by: Some(me) })?;
    Ok(ActionResult::ThreadClosed { thread })
}
