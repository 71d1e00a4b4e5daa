//! Who may read what (§5, §9): every visibility rule of the protocol, in one place. `decide` checks
//! them before an action acts on something the actor must be able to read, and `read` before it
//! returns structure or content, so an action and a read never disagree about what an agent sees.
//! Each rule is a pure function of records or of one state ([`StateRead`]); turning "not visible"
//! into NOT_FOUND (§12: unknown and unreadable are the same answer) is the caller's job.

use crate::keys;
use crate::model::*;
use crate::state::{IndexRef, StateError, StateExt, StateRead};
use kungfu_types::{AgentId, Content, Labels, TaskId, ThreadId, Version};

// --- §9 Threads -----------------------------------------------------------------------------------

/// §9: a thread's content is its current members'. The thread and the reader's current membership,
/// or None when the thread is unknown or the agent is not (or no longer) a member.
pub fn current_member(
    state: &dyn StateRead,
    thread: ThreadId,
    agent: AgentId,
) -> Result<Option<(Thread, Membership)>, StateError> {
    let Some(t) = state.thread(thread)? else {
        return Ok(None);
    };
    Ok(match state.membership(thread, agent)? {
        Some(m) if m.is_current() => Some((t, m)),
        _ => None,
    })
}

/// §6.3: a handle note is read by the entry's author and the responder who wrote it; every other
/// member sees the response with the note removed.
pub fn handle_note_visible_to(entry: &Entry, responder: AgentId, agent: AgentId) -> bool {
    agent == entry.author || agent == responder
}

// --- §5 Memories ----------------------------------------------------------------------------------

/// §5: whether the agent may see a Memory at all: its author always, anyone else while it is valid
/// and public.
pub fn memory_readable(m: &Memory, agent: AgentId) -> bool {
    m.author == agent || (m.is_valid() && m.is_public())
}

/// §5, §9: the version of a Memory the agent may read directly: its author reads any version
/// (`requested`, or the current one); any other agent reads only the current version of a valid
/// public Memory. None when the agent may not read the version asked for.
pub fn readable_version(m: &Memory, agent: AgentId, requested: Option<Version>) -> Option<Version> {
    if m.author == agent {
        Some(requested.unwrap_or(m.current))
    } else if m.is_valid() && m.is_public() && requested.is_none_or(|v| v == m.current) {
        Some(m.current)
    } else {
        None
    }
}

/// §5: a pinned reference in a context authored by `context_author` is readable (to the context's
/// readers) when it pins the context author's own Memory, even after withdrawal; a pin of another
/// agent's Memory only while that Memory is valid and public.
pub fn pin_readable(state: &dyn StateRead, context_author: AgentId, pin: Pin) -> Result<bool, StateError> {
    Ok(match state.memory(pin.memory)? {
        Some(m) if m.author == context_author => true,
        Some(m) => m.is_valid() && m.is_public(),
        None => false,
    })
}

// --- §9 Tasks and engagements ---------------------------------------------------------------------

/// Whether the agent may read a Task's contract layer: its author, its designated judge, or its
/// audience (DESIGN §9).
pub fn task_visible_to(
    state: &dyn StateRead,
    task: &Task,
    cv: &ContractVersion,
    agent: AgentId,
) -> Result<bool, StateError> {
    if task.author == agent || cv.contract.judge == Judge::Agent(agent) {
        return Ok(true);
    }
    Ok(match &task.audience {
        Audience::Open => state.agent(agent)?.is_some(),
        Audience::Restricted(named) => named.contains(&agent),
    })
}

/// Whether a reader of the Task (see [`task_visible_to`]) may also read contract version `v` when
/// it is not the current one: the author and the current judge read any version; an engaged agent
/// reads the version its engagement bound.
pub fn contract_version_readable(
    state: &dyn StateRead,
    task: &Task,
    current: &ContractVersion,
    agent: AgentId,
    v: Version,
) -> Result<bool, StateError> {
    Ok(task.author == agent
        || current.contract.judge == Judge::Agent(agent)
        || bound_version(state, task.id, agent, v)?)
}

/// Whether one of the agent's engagements with the Task bound contract version `v`.
fn bound_version(state: &dyn StateRead, task: TaskId, agent: AgentId, v: Version) -> Result<bool, StateError> {
    for (key, r) in state.index_refs(&keys::task_engagements(task), usize::MAX)? {
        let IndexRef::Engagement(e) = r else {
            return Err(StateError::corrupt(&key, "expected an engagement"));
        };
        let e = state.engagement(e)?.ok_or_else(|| StateError::corrupt(&key, "names a missing engagement"))?;
        if e.agent == agent && e.contract_version == v {
            return Ok(true);
        }
    }
    Ok(false)
}

/// §9: an engagement is read by the engaged agent, its requester (judge) and the Task's author;
/// the rest of the audience never learns who engaged (§12).
pub fn engagement_visible_to(e: &Engagement, task_author: AgentId, agent: AgentId) -> bool {
    agent == e.agent || agent == e.judge || agent == task_author
}

/// §9: a delivery (the delivered output, and a rejection's reason) is read only by the engaged agent
/// and the requester; the Task's author, if it is not the requester, sees the structure only.
pub fn delivery_visible_to(e: &Engagement, agent: AgentId) -> bool {
    agent == e.agent || agent == e.judge
}

/// A pinned version's content, when an entry by `context_author` shows it to its reader (§5 pin
/// rules: [`pin_readable`]).
pub fn pinned_content(state: &dyn StateRead, context_author: AgentId, pin: Pin) -> Result<Option<Content>, StateError> {
    if !pin_readable(state, context_author, pin)? {
        return Ok(None);
    }
    Ok(state.memory_version(pin.memory, pin.version)?.map(|v| v.content))
}

/// The labels of an entry's pinned version, whether it is held (quarantined: content withheld,
/// design §2.6), and its content when the reader may read it.
/// Labels are shown only with readable content, so an unreadable pin never reveals its labels
/// (design §2.4, §12).
pub fn labeled_content(
    state: &dyn StateRead,
    entry: &Entry,
) -> Result<(Option<Labels>, bool, Option<Content>), StateError> {
    let Some(content) = pinned_content(state, entry.author, entry.pin)? else {
        return Ok((None, false, None));
    };
    let labels = state.labels(entry.pin)?;
    if labels.is_some_and(|l| l.taint == kungfu_types::Taint::Quarantined) {
        return Ok((labels, true, None));
    }
    Ok((labels, false, Some(content)))
}
