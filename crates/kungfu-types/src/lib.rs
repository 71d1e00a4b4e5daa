//! Value types of the Kungfu protocol: identifiers, time, roles, content and the closed rejection
//! vocabulary. Everything here is plain data; the rules that use it live in `kungfu-core`.
//!
//! Invariant: nothing here depends on anything heavy or knows a protocol rule; the set of codes and
//! their wire strings only grows; an id of group 0 is its sequence number (`ag_7` is the seventh
//! agent), and no group allocates in another's partition.
//!
//! Table of contents (the files, and what each holds):
//! - [`ids`]: one newtype per identifier, so an `AgentId` can never be passed where a `ThreadId` is meant;
//!   each with its `ag_7`-style text form.
//! - [`group`]: [`GroupId`], the raft group, and the id layout (group bits, then a per-group sequence):
//!   a `u16`, group 0 being the one group of today; the allocating group in the top 16 bits of an id
//!   and its own sequence in the low 48, with `next_id`, the one allocator, so groups need no global
//!   counter (the golden bytes are in `docs/ARCHITECTURE.md`, "Persisted formats and upgrades").
//! - [`time`]: [`Timestamp`] (microseconds since the Unix epoch, stamped by the leader) and [`Micros`].
//! - [`role`]: thread roles and the "may speak" predicate (§6.2).
//! - [`content`]: participant content, kept apart from structure (L6); opaque bytes whose `Debug`
//!   shows only the length, so content cannot leak into logs as if it were structure.
//! - [`request`]: idempotency keys, request digests and secret hashes (L3), and the fingerprint a
//!   grant or key is shown by.
//! - [`labels`]: taint and scope of a Memory version (the coordination layer's floor, design §2),
//!   declared in lattice order so `Ord` is the lattice.
//! - [`record`]: the shared record's values a rejection carries: an external reference, and the
//!   typed three-way conflict of a stale edit.
//! - [`rejection`]: the closed set of rejection codes and next steps (L2, §8), with fak's reason names:
//!   `Code` (stable wire strings); `Class`, what kind of refusal each code is, declared beside its
//!   wire string, the one classification from which both the gRPC status and the CLI's exit status
//!   derive; `NextStep` (the closed set of §8); `FakReason`, carried beside every verdict
//!   (`Code::fak_reason`, overridable at the site); and `Rejection`.
//!
//! `RAFT_PORT_ANSWER` is here because both the node's raft port and the SDK need it: the SDK
//! recognizes a raft port's answer and says which port to use instead.

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
    WakeTargetId,
};
pub use labels::{Labels, Scope, Taint};
pub use record::{ConflictValue, ExternalRef, RecordConflict};
pub use rejection::{Class, Code, FakReason, NextStep, Rejection, RejectionDetail, SharedReason};
pub use request::{Fingerprint, IdempotencyKey, RequestDigest, SecretHash, WakeSecret};
pub use role::Role;
pub use time::{Micros, Timestamp};

/// How a node's raft port begins its answer to a call that is not raft (a client pointed at the
/// wrong port): the rest names the node and its API address. The SDK recognizes it (issue #16).
pub const RAFT_PORT_ANSWER: &str = "this is a Kungfu raft port";
