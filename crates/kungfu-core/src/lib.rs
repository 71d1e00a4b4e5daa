//! The Kungfu protocol (spec 1.0, Full profile) as a pure, deterministic state machine.
//!
//! `apply(state, command) -> facts, changed records, receipt | rejection`, with no IO, no async,
//! no clock and no randomness: the leader stamps `ts` on the command, storage supplies the state
//! through [`StateRead`] and commits the returned [`Changeset`] atomically.
//!
//! Table of contents:
//! - [`action`]: commands and the actions of §4–§7, plus the system's expiry (L4).
//! - [`effects`]: what an applied command changed that timers and streams wake on (due, turns, journals).
//! - [`engine`]: [`apply`], the one entry point for writes: replay (L3), deadlines first (L4),
//!   all-or-nothing decisions (L2).
//! - `decide` (private): the preconditions of every action and the facts it records, one file per
//!   spec section (§4 agent, §5 memory, §6.1–§6.3 and §6.5 threads, §6.4 assignments, §7 tasks, L4
//!   expiry).
//! - [`evolve`]: the fold of one fact into the state, the only code that changes records (L1), one
//!   file per spec section like `decide`.
//! - [`coord`]: the coordination layer's shared parts: the floor on labeled content, rank/split/spawn,
//!   and the mailbox, collective and barrier reads (design §2–§4; its decisions are in `decide`).
//! - [`visibility`]: who may read what (§5, §9), the one home of the rules `decide` and `read` share.
//! - [`fact`], [`receipt`], [`model`]: facts, receipts and records.
//! - [`read`]: the turn, opportunities, working sets and content on demand (§8, §9).
//! - [`state`], [`keys`], [`codec`]: the state interface, its key layout and the canonical encoding;
//!   [`obligation_object`], the object an obligation belongs to.
//! - [`limits`]: capacity limits and deadline defaults (L4).
//! - [`validate`], [`rebuild`]: whole-state invariant checks and the rebuild from facts (L1).
//! - [`testkit`]: an in-memory world for tests (not used by production code).
//! - [`secret`]: hashes and fingerprints of one-time secrets (L3, §12).

pub mod action;
pub mod codec;
pub mod coord;
mod decide;
pub mod effects;
pub mod engine;
pub mod evolve;
pub mod fact;
pub mod keys;
pub mod limits;
pub mod model;
pub mod read;
pub mod rebuild;
pub mod receipt;
pub mod secret;
pub mod state;
pub mod testkit;
pub mod validate;
pub mod visibility;

pub use action::{Action, ActionKind, Command, ContractDraft, NewAssignment, NewGrant, PostBody, Principal};
pub use decide::actor_object;
pub use engine::{Applied, Precheck, apply, precheck};
pub use fact::{ExpiryResult, Fact, JournaledFact, Verdict};
pub use limits::{CoordLimits, Limits};
pub use receipt::{ActionResult, GrantReceipt, Receipt, StoredReceipt};
pub use state::{Changeset, InGroup, MemState, Record, StateError, StateExt, StateRead, Tx, obligation_object};
