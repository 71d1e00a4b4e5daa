//! Compiles the subset of etcd's v3 API that `kungfu bench compare` speaks
//! (`proto/etcd/etcdserverpb.proto`) with protox, so no system `protoc` is needed; client code
//! only; and stamps `kungfu-bench --version` with the commit and the build date (`../build_info.rs`).

include!("../build_info.rs");

fn main() -> Result<(), Box<dyn std::error::Error>> {
    emit_build_info();
    let root = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("proto");
    let file = root.join("etcd/etcdserverpb.proto");
    let fds = protox::compile([&file], [&root])?;
    tonic_prost_build::configure().build_client(true).build_server(false).compile_fds(fds)?;
    println!("cargo:rerun-if-changed={}", file.display());
    Ok(())
}
