//! The openraft type configuration of Kungfu and the request/response carried by the log, each
//! request addressed to its raft group.

use kungfu_core::{Command, Limits, Receipt};
use kungfu_types::{GroupId, Rejection};
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

/// What the replicated log carries, inside a [`Payload`] that names its group.
///
/// A new variant is appended here and, for group 0's bare encoding, to `PayloadRef` and
/// `PayloadOwned` after `InGroup`, whose index 3 is taken: there the new variant's index is one
/// more than here (the `match` in `Payload::serialize` does not compile until it is mapped).
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

/// The application payload of a log entry (openraft's `D`): a [`Request`] addressed to the raft
/// group whose log carries it (issue #19, deliverable 3). A replica applies only its own group's
/// payloads and refuses any other as a broken log.
///
/// Encoding (R4: appended, never inserted). A payload of group 0 is encoded as its bare
/// [`Request`], byte for byte what every entry was before groups existed (variants 0 to 2), so
/// group 0's log, and a rolling upgrade that writes it, is unchanged. A payload of any other group
/// is the appended variant 3, `InGroup(group, request)`: its group (u16 varint), then the request.
/// Decoding reads variants 0 to 2 as group 0 and refuses variant 3 naming group 0, so every
/// payload has exactly one encoding. Pinned in `tests/golden.rs`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Payload {
    pub group: GroupId,
    pub request: Request,
}

impl Payload {
    /// A request for the one group of today.
    pub fn group_zero(request: Request) -> Payload {
        Payload { group: GroupId::ZERO, request }
    }
}

impl fmt::Display for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} in {}", self.request, self.group)
    }
}

/// The encoded shape of a [`Payload`]: [`Request`]'s variants, then `InGroup`. Only ever built
/// from a payload, so `InGroup` never names group 0.
#[derive(Serialize)]
#[serde(rename = "Request")]
enum PayloadRef<'a> {
    Command(&'a Command),
    SetLimits(&'a Limits),
    Commands(&'a Vec<Command>),
    InGroup(GroupId, &'a Request),
}

#[derive(Deserialize)]
#[serde(rename = "Request")]
enum PayloadOwned {
    Command(Command),
    SetLimits(Limits),
    Commands(Vec<Command>),
    InGroup(GroupId, Request),
}

impl Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let wire = match (&self.request, self.group) {
            (r, g) if g != GroupId::ZERO => PayloadRef::InGroup(g, r),
            (Request::Command(c), _) => PayloadRef::Command(c),
            (Request::SetLimits(l), _) => PayloadRef::SetLimits(l),
            (Request::Commands(c), _) => PayloadRef::Commands(c),
        };
        wire.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Payload, D::Error> {
        Ok(match PayloadOwned::deserialize(d)? {
            PayloadOwned::Command(c) => Payload::group_zero(Request::Command(c)),
            PayloadOwned::SetLimits(l) => Payload::group_zero(Request::SetLimits(l)),
            PayloadOwned::Commands(c) => Payload::group_zero(Request::Commands(c)),
            PayloadOwned::InGroup(GroupId::ZERO, _) => {
                return Err(serde::de::Error::custom("a payload of group 0 must be encoded as its bare request"));
            }
            PayloadOwned::InGroup(group, request) => Payload { group, request },
        })
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
        D = Payload,
        R = Response,
        NodeId = NodeId,
        Node = Node,
);

pub type LogId = openraft::alias::LogIdOf<TypeConfig>;
pub type Vote = openraft::alias::VoteOf<TypeConfig>;
pub type Entry = openraft::alias::EntryOf<TypeConfig>;
pub type StoredMembership = openraft::alias::StoredMembershipOf<TypeConfig>;
pub type SnapshotMeta = openraft::alias::SnapshotMetaOf<TypeConfig>;
