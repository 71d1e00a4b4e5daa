//! The typed async Rust SDK of Kungfu (DESIGN §2): one [`Client`] over the public gRPC API of a
//! node or a cluster, so agents and scripts never hand-write gRPC calls.
//!
//! What it does for every call:
//! - It puts a deadline on the call ([`ClientOptions::call_timeout`]), on the wire (`grpc-timeout`)
//!   and locally, so no call waits forever.
//! - It sends every write with an idempotency key (L3). When the caller gives none, it generates one
//!   (`sdk-` and 128 random bits) and returns it in [`Written::idempotency_key`], so the caller can
//!   repeat the write later with the same key.
//! - It retries safely. An indeterminate failure (a transport error, a timeout, `UNAVAILABLE` with
//!   `definite = false`) and `NOT_LEADER` are retried with the same request under the same key, on
//!   the leader the node named first and then on the other endpoints, with bounded exponential
//!   backoff; L3 makes the retry return the first outcome if the first attempt took effect.
//!   `RATE_LIMITED` waits its `retry_after` (bounded) and retries. A definite rejection is returned at
//!   once as [`Error::Rejected`]. When the retries run out on a write whose outcome is unknown, the
//!   answer is [`Error::Indeterminate`] with the key to retry with.
//! - It tells why it reached no node. An attempt that reaches no Kungfu API (connection refused,
//!   none within [`ClientOptions::connect_timeout`], a gRPC peer without the Kungfu services such
//!   as a raft port) sent nothing, so it is definite, and it has a short budget of its own
//!   ([`ClientOptions::connect_retries`] rounds over the endpoints, at an endpoint that never
//!   answered this client; a node that answered before is restarting and gets the full retries): a
//!   wrong endpoint fails at once with an
//!   [`Error::Transport`] whose [`TransportKind`] is stable and whose message names the address.
//!   Retries that run out while nodes answer `NOT_LEADER` or `UNAVAILABLE` say "no quorum or no
//!   leader" and how many endpoints answered (`docs/operations.md`, "When a client cannot reach
//!   the cluster"). [`ClientOptions::on_retry`] reports each retry to a caller that shows progress;
//!   the SDK itself prints nothing.
//!
//! Invariant: a retry never changes the request or its key, so it can never cause a second effect
//! (L3).
//!
//! Table of contents (the files, and what each holds):
//! - [`client`]: [`Client`], [`ClientOptions`], [`Backoff`], [`Consistency`], the retry loop and
//!   its progress hook ([`RetryHook`], [`Retrying`]).
//! - [`calls`]: the typed methods, one per action and read of the eight agent services (agents,
//!   memories, threads, assignments, tasks, coordination, shared records, turn), plus
//!   [`Client::register`], paging helpers and [`Registered`].
//! - [`record`]: builders for the shared record's create and patch ([`NewRecord`], [`Patch`]); a
//!   stale replace's three-way conflict is [`Error::record_conflict`].
//! - [`build`]: small builders for the requests that are tedious by hand ([`Post`], content, labels
//!   and labeled bodies, the addressees of a send, [`Message`], [`Scatter`]).
//! - [`coord`]: the coordination loops over those calls (COORDINATION §3.5, §4.5, §4.7): blocking
//!   receive ([`Client::recv`], [`coord::Mailbox`]), gather in rank order and its fold
//!   ([`Client::gather`], [`Client::gather_and_combine`]), barrier and its wait
//!   ([`Client::barrier`], [`Client::wait_barrier`]), broadcast ([`Client::broadcast`]).
//! - The fak envelopes (COORDINATION §5.10) are a room of their own, the `kungfu-fak` crate, built
//!   on this SDK's messages.
//! - [`error`]: [`Error`], the transport failures ([`Transport`], [`TransportKind`]) and [`Written`].
//! - [`reduce`]: the gather reductions ([`reduce::combine`]: first, concat, vote, best-of,
//!   all-reduce), pure folds of members' outputs. They read content, so they run here, in the
//!   caller, never in the server.
//! - [`group`]: rank, split and spawn over a group's member ids (`kungfu_core::coord::group`,
//!   re-exported: the same ascending-id order the server gives a scatter's ranks).
//! - [`topology`]: declared topologies over a group's members ([`topology::Topology`]), pure.
//! - [`watch`]: watch streams of a thread's entries, of a shared record's events and of the agent's
//!   turn.
//!
//! The generated messages are re-exported as [`pb`]; requests are the `pb` types (their
//! `idempotency_key` field is filled in by the SDK) or the builders of [`build`].

pub mod build;
pub mod calls;
pub mod client;
pub mod coord;
pub mod error;
pub mod record;
pub mod reduce;
pub mod topology;
pub mod watch;

pub use build::{
    Message, Post, Scatter, content, labeled, labeled_text, new_assignment, pinned, text, to_agents, to_all_speakers,
    to_nobody,
};
pub use calls::Registered;
pub use client::{Backoff, Client, ClientOptions, Consistency, RetryCause, RetryHook, Retrying, new_idempotency_key};
pub use error::{Error, Transport, TransportKind, Written};
pub use kungfu_api::grpc_code_name;
pub use kungfu_api::pb;
pub use kungfu_api::status_rejection;
pub use kungfu_core::coord::group;
pub use kungfu_types::{
    AgentId, Code, ConflictValue, ExternalRef, FakReason, Labels, NextStep, RecordConflict, Rejection, RejectionDetail,
    Scope, SharedReason, Taint,
};
pub use record::{NewRecord, Patch};
/// The gRPC status a watch stream can fail with mid-stream.
pub use tonic::Status as GrpcStatus;
