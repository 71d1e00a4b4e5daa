//! §6.4 Assignments (and the assignment rules of §6.2).

#[allow(unused_imports)]
use kungfu_client::{Code, pb};
#[allow(unused_imports)]
use kungfu_system_tests::conformance::*;
#[allow(unused_imports)]
use kungfu_system_tests::{cases, outcome};

cases! {}
