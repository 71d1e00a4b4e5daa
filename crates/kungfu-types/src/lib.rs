//! Value types of the Kungfu protocol: identifiers, time, roles, content and the closed rejection
//! vocabulary. Everything here is plain data; the rules that use it live in `kungfu-core`.
//!
//! Table of contents:
//! - [`ids`]: one newtype per identifier, so an `AgentId` can never be passed where a `ThreadId` is meant.
//! - [`group`]: [`GroupId`], the raft group, and the id layout (group bits, then a per-group sequence).
//! - [`time`]: [`Timestamp`] (microseconds since the Unix epoch, stamped by the leader) and [`Micros`].
//! - [`role`]: thread roles and the "may speak" predicate (§6.2).
//! - [`content`]: participant content, kept apart from structure (L6).
//! - [`request`]: idempotency keys, request digests and secret hashes (L3).
//! - [`labels`]: taint and scope of a Memory version (the coordination layer's floor, design §2).
//! - [`rejection`]: the closed set of rejection codes and next steps (L2, §8), with fak's reason names.

pub mod content;
pub mod group;
pub mod ids;
pub mod labels;
pub mod record;
pub mod rejection;
pub mod request;
pub mod role;
pub mod time;

pub use content::Content;
pub use group::GroupId;
pub use ids::{
    AgentId, AssignmentId, EngagementId, EntrySeq, MemoryId, ObjectRef, RecordId, TaskId, ThreadId, Version,
};
pub use labels::{Labels, Scope, Taint};
pub use record::{ConflictValue, ExternalRef, RecordConflict};
pub use rejection::{Class, Code, FakReason, NextStep, Rejection, RejectionDetail, SharedReason};
pub use request::{Fingerprint, IdempotencyKey, RequestDigest, SecretHash};
pub use role::Role;
pub use time::{Micros, Timestamp};

/// How a node's raft port begins its answer to a call that is not raft (a client pointed at the
/// wrong port): the rest names the node and its API address. The SDK recognizes it (issue #16).
pub const RAFT_PORT_ANSWER: &str = "this is a Kungfu raft port";
