//! The public gRPC API of Kungfu (`proto/kungfu/v1`, package `kungfu.v1`) and its one conversion
//! boundary to the domain types of `kungfu-core` (DESIGN §2: wire types are converted once, and
//! validation of their form happens here; the protocol's own rules stay in the core).
//!
//! The protos (`proto/kungfu/v1/*.proto`: six protocol services with 45 RPCs, the coordination
//! layer's `CoordService` with 7 more and its shared record's `RecordService` with 5, the watch
//! streams, and the operator `AdminService`) are compiled by protox in `build.rs`, which also adds
//! `serde::Serialize` to the generated messages from the descriptors: that is the CLI's `--json`.
//!
//! Invariant: structure and content stay in separate fields on the wire (L6); wire `Content` prints
//! and serializes as its size, never its bytes.
//!
//! Table of contents (the files, and what each holds):
//! - [`admin`]: the operator service's request checks (cluster status, membership, snapshots, backup).
//! - [`watch`]: watch stream requests, turn cursors and turn change events.
//! - [`pb`]: the generated messages, clients and servers, and the descriptor set for reflection.
//! - [`field_error`]: [`FieldError`], the one error of wire-to-domain conversion, naming the
//!   request field at fault by its full path (`assignment.delivery_window_micros`, `ask.agents[2]`).
//! - [`request`]: wire to domain. One `*_action` function per write request, returning the
//!   validated [`IdempotencyKey`](kungfu_types::IdempotencyKey) with the [`Action`](kungfu_core::Action)
//!   ([`KeyedAction`]), and one `*_query` function per read request. Secret-bearing writes take the
//!   server-generated secret as an argument ([`SecretMaterial`]).
//! - [`response`]: domain to wire. Receipts and every `ActionResult`, the write responses (with the
//!   one-time secrets of L3 handled in one place: on first success only), and every read result of
//!   `kungfu_core::read`.
//! - [`status`]: rejections, malformed fields and failed reads as gRPC statuses with
//!   `google.rpc.ErrorInfo`, and back, the gRPC code derived from each code's class. A stale record
//!   edit's `kungfu.v1.RecordConflict` is appended as an `Any` to the `google.rpc.Status` details,
//!   which tonic-types does not build.
//! - [`json`]: the `--json` helpers: enum fields written by variant name, content by its size.
//! - [`keys`]: what a client makes for itself and a door needs too: a new idempotency key, the
//!   barrier wait's re-read period. Here, not in the SDK, so that the MCP door, and so `kungfud`,
//!   link no client library (`tests/layering.rs` checks it).

pub mod admin;
pub mod field_error;
pub mod json;
pub mod keys;
pub mod request;
pub mod response;
pub mod status;
pub mod watch;

pub use field_error::FieldError;
pub use keys::{BARRIER_RECHECK, new_idempotency_key};
pub use request::{KeyedAction, SecretMaterial};
pub use response::WriteResponse;
pub use status::{
    field_error_status, grpc_code, grpc_code_name, read_error_rejection, read_error_status, rejection_status,
    status_rejection,
};

/// Metadata by which a follower that forwards a call to the leader tells it the address the call's
/// client connected from, so per-address limits (registrations, L4) see the real client rather
/// than the follower. The API believes it only on a call forwarded by another member of the
/// cluster (`kungfu-forwarded`, from a member's address); otherwise it is ignored.
pub const CLIENT_ADDR: &str = "kungfu-client-addr";

/// The address a call's client connected from, as a request extension: put there by a door inside
/// the node (the MCP door, the console), which calls the node's own service stack in process (no
/// network client can set an extension), and by the API's client-address layer once it has settled
/// whom to believe, for the service layer to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientAddr(pub std::net::IpAddr);

/// The generated code of `kungfu.v1`: messages, `*_service_client` and `*_service_server`.
#[allow(missing_docs, clippy::all, unreachable_pub, missing_debug_implementations)]
pub mod pb {
    tonic::include_proto!("kungfu.v1");

    /// The encoded `FileDescriptorSet` of every `kungfu.v1` file (and the well-known types they
    /// import), for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("kungfu_descriptor");
}

/// Content prints its size only, never its bytes, so participant content cannot leak into logs as
/// if it were structure (L6).
impl std::fmt::Debug for pb::Content {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Content({} bytes)", self.body.len())
    }
}
