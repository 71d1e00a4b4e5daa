//! A seeded, deterministic model of the scale-out design of `docs/scaling.md`.
//!
//! The runtime keeps every fact in one Raft group. This crate asks, without running a cluster, what
//! splitting the state across N groups would buy: for a synthetic deployment whose agents and
//! threads have skewed (Zipf) sizes and activity, and whose action mix is derived from the demos
//! and the chaos workloads, it classifies every sampled action by the groups it touches under a
//! candidate placement and turns the per-group work into an expected throughput. It depends on
//! `kungfu-core` only (for `ActionKind`), never on storage or raft, so it builds alone in seconds.
//!
//! Invariants: the same seed gives the same report on every machine; a new action does not compile
//! here without a footprint; `tests/doc_matches_model.rs` fails when `docs/scaling.md` differs from
//! what the model prints for its documented seed (the quoted report, the summary tables, a row per
//! action).
//!
//! Table of contents (the files, and what each holds):
//! - [`rng`]: a tiny seeded PRNG (SplitMix64), so a seed names one report on every machine.
//! - [`zipf`]: the skew of sizes and activity.
//! - [`footprint`]: what each protocol action reads and writes, one row per `ActionKind`
//!   (an exhaustive match, so a new action does not compile until it has a footprint): issuer,
//!   anchor, new Memories, pins, Task references, presence, fan-out to every membership.
//! - [`world`]: the synthetic deployment (agents, threads, memberships, Tasks, Memories).
//! - [`workload`]: the action mixes (counted from `kungfu demo`, `kungfu demo coord` and the chaos
//!   workloads) and how one action instance is drawn.
//! - [`placement`]: where each object lives under each candidate placement (`hash`, `agent-home`,
//!   `object-local`), over hash ranges.
//! - [`cost`]: the cost model of single-group and cross-group actions and its parameters (binds,
//!   remote reads, two-phase commits).
//! - [`simulate`]: the measurement, and [`report`]: its text, the one `docs/scaling.md` quotes.
//! - `main.rs`, the binary: `cargo run --release -p kungfu-scale-model -- --seed 19 --actions 100000`
//!   prints the documented run.

pub mod cost;
pub mod footprint;
pub mod placement;
pub mod report;
pub mod rng;
pub mod simulate;
pub mod workload;
pub mod world;
pub mod zipf;

pub use simulate::{Config, Measurement, run};
