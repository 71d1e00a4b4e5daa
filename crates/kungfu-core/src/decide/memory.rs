//! §5 Memory: creating, updating, publishing, unpublishing and withdrawing a Memory.

use super::{Cx, Res, not_found, reject};
use crate::coord::floor::Context;
use crate::fact::Fact;
use crate::model::*;
use crate::receipt::ActionResult;
use crate::state::StateExt;
use crate::visibility;
use kungfu_types::{AgentId, Code, Content, MemoryId, Version};

/// §5: creates a Memory.
pub(super) fn create_memory(cx: &mut Cx<'_>, me: AgentId, content: &Content) -> Res<ActionResult> {
    let (memory, version) = emit_memory(cx, me, content, "content")?;
    Ok(ActionResult::MemoryCreated { memory, version })
}

/// Creates a Memory from `content` (named `field` in a rejection): on its own, or as the first step
/// of a post with new content (L2 combined action).
pub(super) fn emit_memory(cx: &mut Cx<'_>, me: AgentId, content: &Content, field: &str) -> Res<(MemoryId, Version)> {
    cx.content(field, content, cx.limits.max_content_bytes)?;
    let a = cx.active(me)?;
    if a.memories >= cx.limits.max_memories_per_agent {
        return reject(
            Code::LimitExceeded,
            format!("an agent may create at most {} Memories", cx.limits.max_memories_per_agent),
        );
    }
    let memory = MemoryId(cx.next_id(cx.counters()?.memories)?);
    cx.emit(Fact::MemoryCreated { memory, author: me, content: content.clone() })?;
    Ok((memory, Version::FIRST))
}

/// The caller's own Memory; another agent's Memory it may read is NOT_AUTHOR, any other NOT_FOUND.
pub(super) fn own_memory(cx: &Cx<'_>, me: AgentId, memory: MemoryId) -> Res<Memory> {
    match cx.tx.memory(memory)? {
        Some(m) if m.author == me => Ok(m),
        // Another agent's Memory: the caller may read a public one, but only the author acts on it.
        Some(m) if visibility::memory_readable(&m, me) => {
            reject(Code::NotAuthor, "only the author may change a Memory")
        }
        _ => not_found("memory"),
    }
}

/// §5: adds a version to the caller's valid Memory.
pub(super) fn update_memory(cx: &mut Cx<'_>, me: AgentId, memory: MemoryId, content: &Content) -> Res<ActionResult> {
    let m = updatable_memory(cx, me, memory, content)?;
    let version = m.current.next();
    cx.emit(Fact::MemoryUpdated { memory, version, content: content.clone() })?;
    Ok(ActionResult::MemoryUpdated { memory, version })
}

/// The caller's own valid Memory, when it may take a new version with `content` (§5, L4).
pub(super) fn updatable_memory(cx: &Cx<'_>, me: AgentId, memory: MemoryId, content: &Content) -> Res<Memory> {
    cx.content("content", content, cx.limits.max_content_bytes)?;
    let m = own_memory(cx, me, memory)?;
    if !m.is_valid() {
        // §5: a withdrawn Memory receives no further versions.
        return reject(Code::MemoryWithdrawn, "the Memory is withdrawn; it receives no further versions");
    }
    if m.current.0 >= cx.limits.max_versions_per_memory {
        return reject(
            Code::LimitExceeded,
            format!("a Memory may have at most {} versions", cx.limits.max_versions_per_memory),
        );
    }
    Ok(m)
}

/// §5: publishes (`public`) or unpublishes the caller's valid Memory.
pub(super) fn set_visibility(cx: &mut Cx<'_>, me: AgentId, memory: MemoryId, public: bool) -> Res<ActionResult> {
    let m = own_memory(cx, me, memory)?;
    if !m.is_valid() {
        return reject(Code::MemoryWithdrawn, "the Memory is withdrawn");
    }
    if m.is_public() == public {
        // L2: no implicit successes beyond the two the spec names.
        return reject(
            Code::NoEffect,
            if public { "the Memory is already public" } else { "the Memory is already private" },
        );
    }
    if public {
        // Design §2.4: a labeled current version must be public and not quarantined to publish.
        if let Some(labels) = cx.tx.labels(Pin { memory, version: m.current })? {
            super::floor_at("memory", labels, Context::Published)?;
        }
        cx.emit(Fact::MemoryPublished { memory })?;
        Ok(ActionResult::MemoryPublished { memory })
    } else {
        cx.emit(Fact::MemoryUnpublished { memory })?;
        Ok(ActionResult::MemoryUnpublished { memory })
    }
}

/// §5: withdraws the caller's Memory, terminally.
pub(super) fn withdraw_memory(cx: &mut Cx<'_>, me: AgentId, memory: MemoryId) -> Res<ActionResult> {
    let m = own_memory(cx, me, memory)?;
    if !m.is_valid() {
        // §5: withdrawal is terminal.
        return reject(Code::MemoryWithdrawn, "the Memory is already withdrawn; withdrawal is terminal");
    }
    cx.emit(Fact::MemoryWithdrawn { memory })?;
    Ok(ActionResult::MemoryWithdrawn { memory })
}
