//! §4 Agent: activity and deactivation.

#[allow(unused_imports)]
use kungfu_client::{Code, pb};
#[allow(unused_imports)]
use kungfu_system_tests::conformance::*;
#[allow(unused_imports)]
use kungfu_system_tests::{cases, outcome};

cases! {}
