//! The black-box conformance suite (issue #6, spec §10): every MUST, MUST NOT and SHALL of spec §3
//! to §12, observed over the public gRPC API of a real three-node cluster. The harness is
//! `kungfu_system_tests::conformance`; `docs/conformance.md` is the statement whose rows name
//! these cases, and the trial `statement::every_row_names_an_existing_case` keeps the two in step.

mod mechanisms_coord;
mod mechanisms_record;
mod s3_invariants;
mod s4_agent;
mod s5_memory;
mod s6_assignments;
mod s6_threads;
mod s7_tasks;
mod s8_turn;
mod s9_visibility;

fn main() {
    kungfu_system_tests::conformance::main(&[
        ("s3_invariants", s3_invariants::CASES),
        ("s4_agent", s4_agent::CASES),
        ("s5_memory", s5_memory::CASES),
        ("s6_threads", s6_threads::CASES),
        ("s6_assignments", s6_assignments::CASES),
        ("s7_tasks", s7_tasks::CASES),
        ("s8_turn", s8_turn::CASES),
        ("s9_visibility", s9_visibility::CASES),
        ("mechanisms_coord", mechanisms_coord::CASES),
        ("mechanisms_record", mechanisms_record::CASES),
    ]);
}
