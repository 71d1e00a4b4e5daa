//! Stamps `kungfu --version` with the commit and the build date (`../build_info.rs`).

include!("../build_info.rs");

fn main() {
    emit_build_info();
}
