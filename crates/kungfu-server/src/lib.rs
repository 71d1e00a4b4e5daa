//! The Kungfu node (`kungfud`): the public gRPC API over a replicated protocol core.
//!
//! Table of contents:
//! - [`config`]: TOML, flags and environment; the single-node default; validation naming the setting.
//! - [`backend`]: authentication by bearer key, the leader's clock, replicated writes answered from
//!   their applied result, linearizable reads on one snapshot, "not the leader" with its address.
//! - [`api`]: the six public services of `proto/kungfu/v1`.
//! - [`actors`]: one actor per live Thread and Task: serializes, pre-checks, bounded, passivated.
//! - [`admin`]: the operator service: cluster status, learners, membership, leader transfer,
//!   snapshots, backup, and restore into a new data directory.
//! - [`watch`]: watch streams of a thread's entries and of an agent's turn, resumable without gap.
//! - [`forward`]: followers forward calls to the leader, once, streams included.
//! - [`deadlines`]: the leader's deadline scheduler (L4: exactly once, DESIGN §4).
//! - [`metrics`]: Prometheus metrics (actions, rejections, raft, deadline lateness).
//! - [`ratelimit`]: per-agent rate limits at the edge (L4), refused with `retry_after`.
//! - [`secrets`]: generation of agent keys and admission grants.
//! - [`server`]: start, bootstrap, serve (with health and reflection), shut down.

pub mod actors;
pub mod admin;
pub mod api;
pub mod backend;
pub mod canary;
pub mod config;
pub mod deadlines;
pub mod forward;
pub mod metrics;
pub mod oversize;
pub mod ratelimit;
pub mod secrets;
pub mod server;
pub mod watch;

pub use config::Config;
