//! openraft glue for Kungfu: the type configuration, the log and state-machine adaptors over
//! `kungfu-storage`, and the raft network over an internal tonic service. It knows no protocol
//! rule: the state machine hands every committed command to `kungfu_core::apply`.
//!
//! Table of contents:
//! - [`types`]: `TypeConfig`, the log's `Payload` (a `Request`, a protocol command or new limits,
//!   addressed to its raft group) and `Response`.
//! - [`log`]: `RaftLogStorage` over the RocksDB log store (durable before acknowledged).
//! - [`mark`]: what the log acknowledged, kept apart from its WAL; a node whose log lost it does not
//!   vote or lead until whole again (issue #33).
//! - [`state_machine`]: `RaftStateMachine` applying batches atomically; snapshots from checkpoints.
//! - [`fatal`]: whether the raft core still runs, read from its metrics channel (issue #36).
//! - [`feed`]: the fact feed: what each committed batch recorded, for timers and streams.
//! - [`network`], [`service`]: the two sides of the raft RPCs (`proto/kungfu/raft/v1/raft.proto`).
//! - [`incoming`]: a listener's accepted connections with `TCP_NODELAY`, for both tonic servers.
//! - `recent`: the log's newest entries, decoded, so apply and replication read its tail from memory.
//! - [`node`]: one replica: data directory, raft, service; writes, membership, digest, shutdown.
//! - [`trace`]: trace context across the raft RPCs and into apply (issue #18).
//! - [`stats`]: counters of how the write path batches (appends, AppendEntries, apply batches).
//! - [`backup`]: a replica's state backed up, and restored into a new one-node cluster.

pub mod backup;
pub mod clock;
pub mod fatal;
pub mod feed;
pub mod incoming;
pub mod log;
pub mod mark;
pub mod network;
pub mod node;
mod recent;
pub mod service;
pub mod state_machine;
pub mod stats;
pub mod trace;
pub mod types;

/// Generated code of the internal raft service.
#[allow(missing_debug_implementations, clippy::all, unreachable_pub)]
pub mod pb {
    tonic::include_proto!("kungfu.raft.v1");
}

pub use network::NetConfig;
pub use node::{NodeConfig, Proposed, RaftNode, RaftTuning, StartError, WriteError};
pub use state_machine::ApplyGate;
pub use state_machine::Raft;
pub use types::{Node, NodeId, Request, Response, TypeConfig};
