//! The openraft type configuration of Kungfu and the request/response carried by the log.

use kungfu_core::{Command, Limits, Receipt};
use kungfu_types::Rejection;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A node id. Never reused: a removed node's id is retired for good (openraft FAQ).
pub type NodeId = u64;

/// A node's address, as other nodes reach its raft service (`host:port`).
pub type Node = openraft::BasicNode;

/// What the replicated log carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// A protocol command, applied by `kungfu_core::apply` on every replica.
    Command(Command),
    /// Replaces the capacity limits and deadline defaults. Limits are replicated state, not local
    /// configuration, so every replica decides with the same ones.
    SetLimits(Limits),
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::Command(c) => write!(f, "{} by {:?} at {}", c.action.kind().as_str(), c.principal, c.ts),
            Request::SetLimits(_) => f.write_str("set_limits"),
        }
    }
}

/// What applying one log entry produced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// The result of a protocol command: its receipt or its rejection (a rejection is a decided,
    /// definite outcome, not an error of the log).
    Applied { outcome: Result<Receipt, Rejection>, replayed: bool },
    /// Blank and membership entries, and limit changes.
    Done,
}

openraft::declare_raft_types!(
    /// Kungfu's raft types: u64 node ids and terms, addresses as `BasicNode`, tokio.
    pub TypeConfig:
        D = Request,
        R = Response,
        NodeId = NodeId,
        Node = Node,
);

pub type Raft = openraft::Raft<TypeConfig, crate::state_machine::StateMachine>;
pub type LogId = openraft::alias::LogIdOf<TypeConfig>;
pub type Vote = openraft::alias::VoteOf<TypeConfig>;
pub type Entry = openraft::alias::EntryOf<TypeConfig>;
pub type StoredMembership = openraft::alias::StoredMembershipOf<TypeConfig>;
pub type SnapshotMeta = openraft::alias::SnapshotMetaOf<TypeConfig>;
