//! Compiles the public API from `proto/kungfu/v1` with protox (no system protoc needed) and writes
//! the descriptor set that server reflection serves.

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let dir = root.join("kungfu/v1");
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "proto"))
        .collect();
    files.sort();
    let fds = protox::compile(&files, [&root])?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("kungfu_descriptor.bin"), fds.encode_to_vec())?;
    // Participant content never prints as bytes in logs (L6): its Debug is written by hand.
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .skip_debug([".kungfu.v1.Content"])
        .compile_fds(fds)?;
    // A directory's mtime changes only when files come and go, so every file is named too.
    println!("cargo:rerun-if-changed={}", dir.display());
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    Ok(())
}
