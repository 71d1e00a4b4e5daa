//! Compiles the public API from `proto/kungfu/v1` with protox (no system protoc needed) and writes
//! the descriptor set that server reflection serves.

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
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
    let mut build =
        tonic_prost_build::configure().build_client(true).build_server(true).skip_debug([".kungfu.v1.Content"]);
    // Every message serializes (for the CLI's `--json`): fields by their proto names, a oneof as
    // `{"case": value}`, an enum by its variant name. Content's Serialize is written by hand (L6: its
    // size, never its bytes).
    for file in fds.file.iter().filter(|f| f.package() == "kungfu.v1") {
        for m in &file.message_type {
            build = serde_attributes(build, m, ".kungfu.v1", "crate::pb");
        }
    }
    build.compile_fds(fds)?;
    // A directory's mtime changes only when files come and go, so every file is named too.
    println!("cargo:rerun-if-changed={}", dir.display());
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    Ok(())
}

/// The serde attributes of message `m` (full name `parent.m`, Rust module `module`) and of the
/// messages nested in it.
fn serde_attributes(
    mut build: tonic_prost_build::Builder,
    m: &prost_types::DescriptorProto,
    parent: &str,
    module: &str,
) -> tonic_prost_build::Builder {
    let name = format!("{parent}.{}", m.name());
    // A type attribute on a top-level message also applies to everything nested in it (prost
    // matches by path prefix): its nested messages, enums and oneofs.
    if parent == ".kungfu.v1" && name != ".kungfu.v1.Content" {
        build = build.type_attribute(&name, "#[derive(serde::Serialize)]");
    }
    for (i, oneof) in m.oneof_decl.iter().enumerate() {
        let real = m.field.iter().any(|f| f.oneof_index == Some(i as i32) && !f.proto3_optional());
        if real {
            build = build.type_attribute(format!("{name}.{}", oneof.name()), "#[serde(rename_all = \"snake_case\")]");
        }
    }
    for f in &m.field {
        if f.r#type() != prost_types::field_descriptor_proto::Type::Enum {
            continue;
        }
        let helper = if f.label() == prost_types::field_descriptor_proto::Label::Repeated {
            "enum_names"
        } else if f.proto3_optional() {
            "optional_enum_name"
        } else {
            "enum_name"
        };
        let rust = rust_path(f.type_name());
        build = build.field_attribute(
            format!("{name}.{}", f.name()),
            format!("#[serde(serialize_with = \"crate::json::{helper}::<{rust}, _>\")]"),
        );
    }
    let nested = format!("{module}::{}", snake(m.name()));
    for n in &m.nested_type {
        build = serde_attributes(build, n, &name, &nested);
    }
    build
}

/// `.kungfu.v1.Role` as `crate::pb::Role`, `.kungfu.v1.Outer.Kind` as `crate::pb::outer::Kind`.
fn rust_path(type_name: &str) -> String {
    let parts: Vec<&str> = type_name.trim_start_matches(".kungfu.v1.").split('.').collect();
    let (last, outer) = parts.split_last().expect("a type name");
    let mut path = String::from("crate::pb");
    for o in outer {
        path.push_str("::");
        path.push_str(&snake(o));
    }
    path.push_str("::");
    path.push_str(last);
    path
}

/// `TurnItem` as `turn_item` (prost's module names).
fn snake(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}
