//! The coordination layer (design §2, §4): the facts of labeling a version and of forming a
//! collective. Both only record what the command decided; neither touches an obligation.

use super::need;
use crate::keys;
use crate::model::*;
use crate::state::{Record, StateError, StateExt, StateRead, Tx};
use kungfu_types::{AgentId, EntrySeq, Labels, MemoryId, ThreadId, Timestamp, Version};

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
