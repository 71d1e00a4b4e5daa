//! The openraft type configuration of Kungfu and the request/response carried by the log.

use kungfu_core::{Command, Limits, Receipt};
use kungfu_types::Rejection;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A node id. Never reused: a removed node's id is retired for good (openraft FAQ).
pub type NodeId = u64;

/// Where a member can be reached: its internal raft service, and its public API (so a follower can
/// tell a client where the leader's API is).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// `host:port` of the internal raft service.
    pub raft: String,
    /// `host:port` of the public API; empty when the member serves none (a bare replica in tests).
    pub api: String,
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "raft={} api={}", self.raft, self.api)
    }
}

/// What the replicated log carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// A protocol command, applied by `kungfu_core::apply` on every replica.
    Command(Command),
    /// Replaces the capacity limits and deadline defaults. Limits are replicated state, not local
    /// configuration, so every replica decides with the same ones.
    SetLimits(Limits),
    /// Several protocol commands in one entry, applied in order as if each had its own entry and
    /// answered one by one (the leader batches deadline expiries that fall due together, L4).
    Commands(Vec<Command>),
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::Command(c) => write!(f, "{} by {:?} at {}", c.action.kind().as_str(), c.principal, c.ts),
            Request::SetLimits(_) => f.write_str("set_limits"),
            Request::Commands(c) => write!(f, "{} commands", c.len()),
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
    /// One `Applied` per command of a `Request::Commands`, in order.
    Batch(Vec<Response>),
}

openraft::declare_raft_types!(
    /// Kungfu's raft types: u64 node ids and terms, `Node` addresses, tokio.
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
