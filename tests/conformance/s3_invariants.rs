//! §3 invariants L1–L6 (and §1, §2): atomicity, replay, exits and limits, concurrency races, separation.

#[allow(unused_imports)]
use kungfu_client::{Code, pb};
#[allow(unused_imports)]
use kungfu_system_tests::conformance::*;
#[allow(unused_imports)]
use kungfu_system_tests::{cases, outcome};

cases! {}
