//! A seeded, deterministic model of the scale-out design of `docs/scaling.md` (issue #19).
//!
//! The runtime keeps every fact in one Raft group. This crate asks, without running a cluster, what
//! splitting the state across N groups would buy: for a synthetic deployment whose agents and
//! threads have skewed (Zipf) sizes and activity, and whose action mix is derived from the demos
//! and the chaos workloads, it classifies every sampled action by the groups it touches under a
//! candidate placement and turns the per-group work into an expected throughput.
//!
//! - [`rng`]: a tiny seeded PRNG (SplitMix64), so a seed names one report on every machine.
//! - [`zipf`]: the skew of sizes and activity.
//! - [`footprint`]: what each protocol action reads and writes, one row per `ActionKind`
//!   (an exhaustive match, so a new action does not compile until it has a footprint).
//! - [`world`]: the synthetic deployment (agents, threads, memberships, Tasks, Memories).
//! - [`workload`]: the action mixes and how one action instance is drawn.
//! - [`placement`]: where each object lives under each candidate placement.
//! - [`cost`]: the cost model of single-group and cross-group actions and its parameters.
//! - [`simulate`]: the measurement, and [`report`]: its text, the one `docs/scaling.md` quotes.

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
