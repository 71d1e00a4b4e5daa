//! §7 Tasks: contract, audience, engagement, adoption limit, tasks and threads.

#[allow(unused_imports)]
use kungfu_client::{Code, pb};
#[allow(unused_imports)]
use kungfu_system_tests::conformance::*;
#[allow(unused_imports)]
use kungfu_system_tests::{cases, outcome};

cases! {}
