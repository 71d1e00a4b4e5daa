//! The Kungfu node (`kungfud`): the public API over a replicated protocol core, as a service layer
//! in domain terms with one adapter per transport (gRPC; MCP over HTTP, mounted by [`http`]).
//!
//! Table of contents:
//! - [`config`]: TOML, flags and environment; the single-node default; validation naming the setting.
//! - [`credentials`]: what a door tells the service layer about a call (bearer credential,
//!   consistency, address), and the authenticated [`Caller`](credentials::Caller) and
//!   [`Operator`](credentials::Operator).
//! - [`backend`]: the service layer every door calls: authentication, the leader's clock,
//!   replicated writes answered from their applied result, reads on one snapshot, "not the leader"
//!   with its address; every refusal a `Rejection`.
//! - [`reads`]: the protocol's reads as service-layer calls, one method per read.
//! - [`admin`]: the operator calls: cluster status, learners, membership, leader transfer,
//!   snapshots, digests, fact export, backup; and restore into a new data directory.
//! - [`watch`]: watch streams of a thread's entries and of an agent's turn, resumable without gap.
//! - [`actors`]: one actor per live Thread and Task: serializes, pre-checks, bounded, passivated.
//! - [`deadlines`]: the leader's deadline scheduler (L4: exactly once, DESIGN §4).
//! - [`grpc`]: the gRPC door: the six protocol services and `CoordService`, the operator and watch
//!   services, request forwarding and oversize refusals, serving with health and reflection.
//! - [`console`]: the read-only web console at `/ui/` (embedded page, read tools through the MCP
//!   door's call path, the cluster view).
//! - [`http`]: the HTTP listener (`http_listen`), where the MCP door (`kungfu-mcp`) is mounted at
//!   `/mcp` as a client of this node's own API.
//! - [`metrics`]: Prometheus metrics, on by default (actions, refusals, raft, actors, process, disk, build).
//! - [`ratelimit`]: per-agent rate limits at the edge (L4), refused with `retry_after`.
//! - [`secrets`]: generation of agent keys and admission grants.
//! - [`server`]: start, bootstrap, serve, shut down.
//! - [`telemetry`]: OpenTelemetry spans over OTLP when `[telemetry] otlp_endpoint` is set (issue #18).

pub mod actors;
pub mod admin;
pub mod backend;
pub mod canary;
pub mod config;
pub mod console;
pub mod credentials;
pub mod deadlines;
pub mod grpc;
pub mod http;
pub mod metrics;
pub mod ratelimit;
pub mod reads;
pub mod secrets;
pub mod server;
pub mod telemetry;
pub mod watch;

pub use config::Config;
