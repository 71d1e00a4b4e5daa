//! Value types of the shared record (coordination design §5) that a rejection carries: the external
//! reference of a body or artifact, and the typed three-way conflict of a stale scalar edit (§5.6).
//! Structure only: the runtime never reads the bytes a reference names (design R1).

use crate::{Content, Labels, MemoryId, RecordId, Version};
use serde::{Deserialize, Serialize};

/// Design §5.2: a body or artifact kept outside the runtime, named by its store and digest, with the
/// labels its writer declares. `deletion_certificate` is required on admission (§5.5); only its
/// shape is checked, and storing it creates no deletion obligation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalRef {
    /// A token `[A-Za-z0-9!#$&^_.+/-]{1,128}`.
    pub store: String,
    /// `sha256:[A-Za-z0-9]{1,128}`.
    pub digest: String,
    pub bytes: u64,
    pub labels: Labels,
    /// A digest of the same shape, when the writer attached one.
    pub deletion_certificate: Option<String>,
}

/// One value of a record's scalar field, as a conflict shows it (design §5.6).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConflictValue {
    /// Title, state, or a decision's state.
    Text(Content),
    /// A body pinned as a Memory version.
    Pin { memory: MemoryId, version: Version },
    /// A body kept outside the runtime.
    External(ExternalRef),
}

/// Design §5.6: the typed detail of a `STALE_BASE` refusal of a record patch: the field's value at
/// the patch's base, its value now, and what the patch proposed. The caller is a current member who
/// may speak, so it may read every value here (§12 minimal disclosure).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordConflict {
    pub record: RecordId,
    /// fak's path (`/state`, `/open_decisions/<id>/state`).
    pub path: String,
    pub base_rev: u32,
    pub current_rev: u32,
    /// None when the field had no value at the base (a decision appended after it).
    pub base_value: Option<ConflictValue>,
    pub current_value: Option<ConflictValue>,
    pub proposed_value: ConflictValue,
    /// `rebase_or_human_decide`.
    pub resolution: String,
}
