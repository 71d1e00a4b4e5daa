//! §9 Visibility, §12 security considerations, §10.2 items 6–7 (references transfer nothing).

#[allow(unused_imports)]
use kungfu_client::{Code, pb};
#[allow(unused_imports)]
use kungfu_system_tests::conformance::*;
#[allow(unused_imports)]
use kungfu_system_tests::{cases, outcome};

cases! {}
