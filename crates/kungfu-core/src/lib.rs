//! The Kungfu protocol (spec 1.0, Full profile) as a pure, deterministic state machine.
//!
//! `apply(state, command) -> facts, changed records, receipt | rejection`, with no IO, no async,
//! no clock and no randomness: the leader stamps `ts` on the command, storage supplies the state
//! through [`StateRead`] and commits the returned [`Changeset`] atomically.
//!
//! Invariants of the crate (checked by [`validate`] after every apply in tests, through
//! [`testkit`]):
//! - No IO, async, clock or randomness; the same state and command give the same bytes on every replica.
//! - State follows from facts: `rebuild(journals) == state` (receipts aside).
//! - A rejected action changes nothing but the deadline facts it found.
//! - Every open obligation is in exactly one turn, has a holder, and has an exit that needs no one
//!   else (a response's holder is a speaking member of an open thread; a delivery or judgment has
//!   an armed deadline).
//! - No undelivered assignment has a departed party; an open thread has a governor; a closed thread
//!   has no live grant; adoptions never exceed the limit the adopted engagements were bound by;
//!   every counter equals what it counts.
//!
//! Table of contents (the files, and what each holds):
//! - [`action`]: commands and the actions of §4–§7, plus the system's expiry (L4): `Command`,
//!   `Principal`, every `Action`, `ActionKind`, and the request digest (secret material excluded,
//!   so a retry is the same request), hashed as the action is encoded (`codec::sha256`), with no
//!   copy of the action unless a secret must be blanked.
//! - [`effects`]: what an applied command changed that timers and streams wake on (due, turns, journals),
//!   read from its changeset.
//! - [`engine`]: [`apply`], the one entry point for writes: replay (L3), deadlines first (L4),
//!   all-or-nothing decisions (L2). [`precheck`] is the same run as a probe that stops at the
//!   action's first fact (`Cx::probe`, `Fail::Probed`), so the leader's pre-check costs the action's
//!   checks, not its facts, records and receipt; a refusal or replay it answers is apply's on the
//!   same state, which `testkit::World::exec_cmd` checks for every command of every core test.
//! - `decide` (private): the preconditions of every action and the facts it records, one file per
//!   spec section (§4 agent, §5 memory, §6.1–§6.3 and §6.5 threads, §6.4 assignments, §7 tasks, L4
//!   expiry), with the spec rule cited at each check. `decide/mod.rs`: the context `Cx` (whose
//!   `emit` hands each fact to `evolve`), the reject helpers, which objects' deadlines an action
//!   settles first, and the dispatch; `decide/record.rs`: the shared record's create and patch (the
//!   patch algorithm of COORDINATION §5.6, every refusal before the first fact); `decide/coord.rs`:
//!   the coordination layer (`docs/coordination.md`: `WriteLabeled`, `WidenScope`, `Send`,
//!   `Scatter`, each an explicit sequence of base facts plus at most one label fact, every check
//!   before the first fact). `decide` writes nothing itself: every record it causes is written by
//!   `evolve` from a fact it emits.
//! - [`evolve`]: the fold of one fact into the state, the only code that changes records and indexes
//!   (L1; the engine adds only the receipt), one file per spec section like `decide`. `evolve/mod.rs`:
//!   the dispatch over `Fact`, deadlines passing, and the record and index helpers (among them the
//!   opening and closing of obligations); the cascades of §4 (deactivation, `evolve/agent.rs`),
//!   §6.2 (membership end) and §6.5 (close, both `evolve/threads.rs`); `evolve/coord.rs` folds
//!   `VersionLabeled` and `Scattered` (records only, no obligation).
//! - [`coord`]: the coordination layer's shared parts: the floor on labeled content, rank/split/spawn,
//!   and the mailbox, collective and barrier reads (design §2–§4; its decisions are in `decide`).
//!   `coord/floor.rs` is the one check on every path that widens the audience of labeled content
//!   (quarantine first, then the path's scope); `coord/group.rs` ranks, splits and spawns as pure
//!   functions of member ids; `coord/read.rs` reads the mailbox after a cursor, a collective's ranks
//!   (gather) and a barrier's arrivals.
//! - [`visibility`]: who may read what (§5, §9), the one home of the rules `decide` and `read` share:
//!   a thread's content, a Memory version, a pin and the content it shows, an entry's labels and
//!   whether it is held (design §2.4, §2.6), a Task's contract and its versions, an engagement and
//!   its delivery, a handle note. Pure functions over records and `&dyn StateRead`, used by
//!   `decide`, `read` and `coord::read`, which never import each other's visibility rules.
//! - [`fact`], [`receipt`], [`model`]: facts, receipts and records. Lifecycles are enums carrying
//!   their data; content is always a separate `Content` field (L6).
//! - [`read`]: the turn (keyset-paginated by `(arose_at, obligation)`), opportunities, working sets
//!   and content on demand (§8, §9), applying the rules of `visibility`; unknown and unreadable are
//!   the same `NOT_FOUND`. Each read is a pure function of a `&dyn StateRead` (and, where it needs
//!   them, the limits and the time the read decides at); the node runs it on one snapshot.
//! - [`watch`]: what the watch streams speak in domain terms: a turn's change sets and the cursor
//!   a watcher resumes from ([`watch::turn_digest`]), batches of a thread's entries and of a
//!   record's events; each door converts them for its wire.
//! - [`state`], [`keys`], [`codec`]: the state interface, its key layout and the canonical encoding;
//!   [`obligation_object`], the object an obligation belongs to. `state`: the `StateRead` trait
//!   (get, ordered prefix scans both ways), the in-memory `MemState`, and the `Tx` overlay whose
//!   writes are the `Changeset`; an overlay keeps the point reads of its base (which must not change
//!   while it lives), so a record read by several steps, or by several commands of one batch, is
//!   read from the store once, and an overlay over an overlay reads through the outer one's copy
//!   (`StateRead::caches_reads`); the due floor a state may keep (`StateRead::due_floor`). `keys`:
//!   a family byte, then big-endian fields, so lexical order is logical order (the families are
//!   listed below). `codec`: the canonical bincode encoding.
//! - [`limits`]: capacity limits and deadline defaults (L4), serde-loadable.
//! - [`validate`], [`rebuild`]: whole-state invariant checks and the rebuild of the state from the
//!   journals alone (L1).
//! - [`testkit`]: an in-memory world for tests (not used by production code), `World`, which
//!   validates and rebuilds after every apply.
//! - [`secret`]: hashes and fingerprints of one-time secrets (L3, §12); the secrets themselves never
//!   enter the core.
//!
//! Key families (`keys::Family`), each a column family in storage:
//! - `meta`: counters (tag 2 is the last record id).
//! - `records`: agents, memories and versions, threads, memberships, entries, responses,
//!   assignments, tasks, contract versions, engagements, open obligations, version labels (tag 13),
//!   collectives (tag 18), and the shared record of COORDINATION §5: the record (tag 14), its scalar
//!   values by field and rev (15: the value at rev R is one reverse scan), its items by kind and
//!   number (16) and its revisions (17).
//! - `indexes`: turn, object obligations, due, object due, opportunities, memberships by agent, live
//!   assignments, grants by hash, agents by key, a thread's records (14), a record's used item ids
//!   (15: the `DUPLICATE_ID` check), the record write an entry carries (16), and more.
//! - `journal`: facts per object, keyed `(object, seq, idx)`.
//! - `receipts`: one per keyed request, under `(principal, action kind, key)`.

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
pub mod watch;

pub use action::{Action, ActionKind, Command, ContractDraft, NewAssignment, NewGrant, PostBody, Principal};
pub use decide::actor_object;
pub use engine::{Applied, Precheck, apply, precheck};
pub use fact::{ExpiryResult, Fact, JournaledFact, Verdict};
pub use limits::{CoordLimits, Limits, WakeLimits};
pub use receipt::{ActionResult, GrantReceipt, Receipt, StoredReceipt};
pub use state::{Changeset, InGroup, MemState, Record, StateError, StateExt, StateRead, Tx, obligation_object};
