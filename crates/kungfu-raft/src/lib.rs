//! openraft glue for Kungfu: the type configuration, the log and state-machine adaptors over
//! `kungfu-storage`, and the raft network over an internal tonic service. It knows no protocol
//! rule: the state machine hands every committed command to `kungfu_core::apply`.
//!
//! The log carries a `Payload { group, request }`: the raft group it is addressed to, and
//! `Request::Command(kungfu_core::Command)`, `Request::Commands` (a batch, used for expiries) or
//! `Request::SetLimits(Limits)` (limits are replicated state, so every replica decides with the same
//! ones). openraft is pinned to one exact version (`=0.10.0-alpha.37` in the workspace manifest):
//! its log id, vote, membership and snapshot meta shapes are part of the persisted format.
//!
//! Invariants: a response is sent only after its batch is committed; a storage error stops the raft
//! (the node stops acknowledging rather than continue on a state it cannot trust); a replica applies
//! only entries of its own group and installs only snapshots of its own group (anything else is a
//! broken log: a storage error); no raft request exceeds the message limit and every replication
//! request can cross within its deadline, so a follower that can be reached always catches up; a
//! node never names itself as the leader it is not.
//!
//! Table of contents (the files, and what each holds):
//! - [`types`]: `TypeConfig`, the log's `Payload` (a `Request`, a protocol command or new limits,
//!   addressed to its raft group) and `Response`. `TypeConfig` has u64 ids and terms, `BasicNode`
//!   addresses and tokio; a `Payload` is encoded as the bare request for group 0 and as the appended
//!   variant `InGroup` for any other.
//! - [`log`]: `RaftLogStorage` over the RocksDB log store (durable before acknowledged). `append`
//!   returns once the entries are readable and reports them durable through `IOFlushed` from the
//!   group-commit writer (`kungfu_storage::LogWriter`), so the raft core replicates while the
//!   leader's own sync runs. Unsynced writes (entries, the committed mark) and reads of at most 64
//!   entries run in place on the calling task (memtable work, no fsync: a hop to the blocking pool
//!   and back cost each round two wake-ups); syncs run on the writer thread, longer reads on the
//!   blocking pool. A node's log is `applied_to` its state store: the state writes no WAL, so before
//!   a purge the log flushes the state and refuses to purge past the state's durable `last_applied`.
//! - `recent` (private): the log's newest entries (4,096, at most 16 MiB encoded), decoded, so apply
//!   and replication read its tail from memory instead of RocksDB and a decode. An append adds its
//!   entries after the store holds them, a truncation or purge drops them first, a gap empties the
//!   cache, and a read it cannot answer whole goes to the store.
//! - [`mark`]: what the log acknowledged, kept apart from its WAL; a node whose log lost it does not
//!   vote or lead until whole again. `AckMark` is raised after each sync once `IOFlushed` was reported
//!   and before the next sync (off the write's latency; a loss of only what was acknowledged in that
//!   time goes unseen), with each vote, and lowered before a truncation while whole. At start a log
//!   that ends before it is damaged: no vote or pre-vote granted (`service` answers a refusal), no
//!   election (`enable_elect`, no leader restore), leadership transfers refused, readiness false,
//!   `ClusterStatus.damaged` and `kungfu_raft_damaged`; whole again (logged once, elections back on)
//!   when the log reaches the mark. A lost vote is restored from it; `--accept-data-loss` rewrites it
//!   to the log's end. This is Raft's voter durability, checked instead of assumed.
//! - [`state_machine`]: `RaftStateMachine` applying batches atomically; snapshots from checkpoints.
//!   Each batch of committed entries goes through `kungfu_core::apply` in one overlay (a
//!   `Request::Commands` entry command by command); records, facts, receipts, last applied,
//!   membership, limits and the last command time are committed in one batch (the limits and the
//!   time kept in memory too, `AppliedLimits` and `AppliedTime`, so no pre-check, read or stamp reads
//!   them from the store), then the batch is published on the fact feed and answered. A batch of at
//!   most `INLINE_APPLY_COMMANDS` (2) commands is applied in place on the state machine's task, a
//!   larger one on the blocking pool. `ApplyGate` lets tests hold apply back on one node; a
//!   snapshot's meta is read from the checkpoint itself (`checkpoint_snapshot_meta`).
//! - [`fatal`]: whether the raft core still runs, read from its metrics channel: `core_stop` (one
//!   reading: `running_state` is an error, or its sender is gone because the core's task ended, a
//!   panic included) and `core_stopped` (waits on the channel, no polling), read by readiness, the
//!   door's fence, the deadline scheduler and the server's exit.
//! - [`feed`]: the fact feed: what each committed batch recorded, for timers and streams: facts and
//!   `Effects`, a bounded broadcast with a lag policy (`docs/ARCHITECTURE.md`, "The fact feed").
//! - [`network`], [`service`]: the two sides of the raft RPCs (`proto/kungfu/raft/v1/raft.proto`), the
//!   internal `kungfu.raft.v1.Raft` tonic service: openraft messages enveloped in `bytes`; one
//!   channel per peer; a deadline on every call (AppendEntries and votes get `replication_timeout`,
//!   1 s by default, not openraft's heartbeat-derived 75 ms, since an empty append waits on the
//!   follower's fsync too; an AppendEntries' deadline grows with its size), and `rpc_timeouts`
//!   counts the calls that ran out; append batches split into parts of at most `max_append_bytes`
//!   (a part that fails after earlier ones matched is a partial success, so a lagging follower
//!   always progresses). Messages from another cluster are refused, and so are messages for a group
//!   this node does not host (`RaftMessage.group`, `SnapshotChunk.group`: `FAILED_PRECONDITION`
//!   starting `WRONG_GROUP`, before the payload is read). Snapshots are packed as they stream
//!   (`snapshot::pack` into bounded chunks), the length and SHA-256 in the last chunk (a sender of
//!   an earlier release put them in the first; the receiver reads either), bounded in size, checked
//!   for continuity and SHA-256. `network`'s `PeerHealth` keeps each peer's failures and writes one
//!   line per peer per 10 s with the count (and one when it answers again), not a line per failed
//!   call.
//! - [`incoming`]: a listener's accepted connections with `TCP_NODELAY`, for both tonic servers
//!   (tonic ignores `tcp_nodelay` on this path; without it a follower's answer waited ~40 ms for a
//!   delayed ACK), and `ConnectionBounds`: a connection that has not sent the 24-byte HTTP/2 preface
//!   within the handshake timeout, or stays silent past the idle timeout, is closed, and one peer
//!   address holds at most `max_per_peer` open connections (the ones past it are closed on accept).
//!   Used by the raft service (default bounds) and the public API (`api` settings).
//! - [`node`]: one replica: data directory, raft, service; writes, membership, digest, shutdown.
//!   Writes end `NotLeader`, `Indeterminate` or `Fatal` (a write that lost its leader is never
//!   reported as failed). `propose_in_order` enters raft's queue now and awaits the outcome apart.
//!   `propose_stamped` and `propose_many_stamped` are the leader's clock: a stamp and the entering of
//!   raft's queue under one lock, each stamp after the wall clock's reading, the last stamp and the
//!   last applied time (read from memory, `AppliedTime`), so command times rise in log order (L5;
//!   the commands of one `Request::Commands` entry share one time). `leader_in` and
//!   `leader_elsewhere` say who leads from one metrics reading, never this node unless its state is
//!   Leader; `leads_caught_up`: leads and has applied its own term; `wait_server_metrics` and
//!   `server_leader` wait for a change of leadership on openraft's server metrics, which change with
//!   the role, leader, vote or membership only (a waiter on the full metrics woke on every commit
//!   round). `readiness` is the health rule with the reason in words (no leader, or a leader without
//!   a quorum, naming how many voters this node reaches). `raft_routes` is the raft port's service
//!   with a fallback that answers any other gRPC call UNIMPLEMENTED naming the API port
//!   (`kungfu_types::RAFT_PORT_ANSWER`). The field `log` (the log store, for tests), `rpc_timeouts()` and
//!   `rpc_failures()` (per peer).
//! - [`clock`]: `Clock`, the one place wall time becomes a `Timestamp`: the leader's stamps (L5), the
//!   time a read or pre-check decides at, the deadline scheduler's timers and the turn watch's times
//!   all read `RaftNode::clock` (`NodeConfig::clock`: the system's, or `Clock::manual` in tests).
//! - [`trace`]: trace context across the raft RPCs and into apply: `traceparent` read from and
//!   written to HTTP/2 headers (W3C), and `Traces`, one node's bounded in-memory map from a command's
//!   time stamp to the span context of its proposal (leader) or of the AppendEntries that brought it
//!   (follower). The network sends the newest traced command's context with an AppendEntries
//!   (`raft.append_entries`), the service continues it (`raft.append`), the state machine applies a
//!   traced batch in `raft.apply`. The log format is untouched; everything is off (one atomic flag)
//!   unless `kungfud` enabled it.
//! - [`stats`]: counters of how the write path batches (log appends and their entries, AppendEntries
//!   sent and their entries, apply batches with their entries and commands, snapshot builds and their
//!   time), bumped by the log, the network and the state machine; `RaftNode::write_path` reads them
//!   with the log's fsyncs, the server publishes them as `kungfu_raft_*_total`, and
//!   `kungfu bench compare` turns them into entries per batch and fsyncs per second.
//! - [`backup`]: a replica's state backed up, and restored into a new one-node cluster, in raft's
//!   terms over `kungfu_storage::backup`: the archive's meta is openraft's snapshot meta read from the
//!   checkpoint (shared with snapshots); a restored directory is adopted as a one-node cluster
//!   (`node::adopt_restored_state`).

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
pub use node::{Lead, NodeConfig, Proposed, RaftNode, RaftTuning, StartError, WriteError};
pub use state_machine::ApplyGate;
pub use state_machine::Raft;
pub use types::{Node, NodeId, Request, Response, TypeConfig};
