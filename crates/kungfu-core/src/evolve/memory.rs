//! §5 Memory: the facts of creating, updating, publishing, unpublishing and withdrawing a Memory.

use super::{need, put_agent};
use crate::keys;
use crate::model::*;
use crate::state::{Record, StateError, StateExt, Tx};
use kungfu_types::{AgentId, Content, MemoryId, Timestamp, Version};

/// §5: a new Memory with its first version.
pub(super) fn memory_created(
    tx: &mut Tx<'_>,
    counters: &mut Counters,
    memory: MemoryId,
    author: AgentId,
    content: &Content,
    at: Timestamp,
) -> Result<(), StateError> {
    counters.memories = counters.memories.max(memory.0);
    tx.put(
        keys::memory(memory),
        Record::Memory(Memory {
            id: memory,
            author,
            created_at: at,
            current: kungfu_types::Version::FIRST,
            // §5: "the Memory starts private".
            visibility: Visibility::Private,
            state: MemoryState::Valid,
        }),
    );
    tx.put(
        keys::memory_version(memory, kungfu_types::Version::FIRST),
        Record::MemoryVersion(MemoryVersion {
            memory,
            version: kungfu_types::Version::FIRST,
            created_at: at,
            content: content.clone(),
        }),
    );
    let mut a = need(tx.agent(author)?, "agent")?;
    a.memories += 1;
    put_agent(tx, a);
    Ok(())
}

/// §5: a new version of a Memory becomes current.
pub(super) fn memory_updated(
    tx: &mut Tx<'_>,
    memory: MemoryId,
    version: Version,
    content: &Content,
    at: Timestamp,
) -> Result<(), StateError> {
    let mut m = need(tx.memory(memory)?, "memory")?;
    m.current = version;
    tx.put(
        keys::memory_version(memory, version),
        Record::MemoryVersion(MemoryVersion { memory, version, created_at: at, content: content.clone() }),
    );
    tx.put(keys::memory(memory), Record::Memory(m));
    Ok(())
}

/// §5: a Memory published or unpublished.
pub(super) fn memory_visibility_set(
    tx: &mut Tx<'_>,
    memory: MemoryId,
    visibility: Visibility,
) -> Result<(), StateError> {
    let mut m = need(tx.memory(memory)?, "memory")?;
    m.visibility = visibility;
    tx.put(keys::memory(memory), Record::Memory(m));
    Ok(())
}

/// §5: a Memory withdrawn, terminally.
pub(super) fn memory_withdrawn(tx: &mut Tx<'_>, memory: MemoryId, at: Timestamp) -> Result<(), StateError> {
    let mut m = need(tx.memory(memory)?, "memory")?;
    m.state = MemoryState::Withdrawn { at };
    tx.put(keys::memory(memory), Record::Memory(m));
    Ok(())
}
