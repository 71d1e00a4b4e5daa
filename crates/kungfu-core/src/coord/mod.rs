//! The coordination layer's pure parts (design §2–§4), shared by `decide`, the reads and the SDK:
//! - [`floor`]: the one check every path that widens an audience calls (design §2.3);
//! - [`group`]: rank, split and spawn as pure functions of the member ids (design §4.1);
//! - [`read`]: the mailbox, the collective (gather) and the barrier (design §3.5, §4.5, §4.7).
//!
//! The decisions of the coordination actions live in `decide/coord.rs` and their folds in
//! `evolve/coord.rs`, beside the protocol's own, so that `decide` stays the one place rules are
//! checked and `evolve` the only code that changes records (L1).

pub mod floor;
pub mod group;
pub mod read;
