//! Compiles the internal raft service from `proto/` with protox (no system protoc needed).

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let file = root.join("kungfu/raft/v1/raft.proto");
    let fds = protox::compile([&file], [&root])?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("raft_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure().build_client(true).build_server(true).compile_fds(fds)?;
    println!("cargo:rerun-if-changed={}", file.display());
    Ok(())
}
