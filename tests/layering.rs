//! Issue #32, deliverable 3: no crate of the workspace has an import cycle between its modules.
//!
//! A module depends on another when its source names it: a `use` tree (`use crate::a::{b, c}`,
//! `use super::x`) or a path in the code (`crate::a::f()`). A module and its ancestors or
//! descendants are one room (a parent declares and dispatches to its children, a child uses its
//! parent's shared helpers), so only edges between modules where neither contains the other
//! count. Two modules that depend on each other through any chain of such edges are a cycle: one
//! of them cannot be read, tested or moved without the other. Test modules (`#[cfg(test)]` and
//! everything after it in a file) do not count.
//!
//! The scan reads source text, not a compiler's resolution: it sees the paths written, which is
//! what a reader follows too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

fn root() -> PathBuf {
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository's root")
        .to_path_buf()
}

/// Every source directory of a library or binary crate in the workspace.
fn crate_sources() -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let crates = root().join("crates");
    for e in std::fs::read_dir(&crates).expect("crates/") {
        let dir = e.expect("entry").path();
        if dir.join("src").is_dir() {
            out.push((dir.file_name().unwrap().to_string_lossy().into_owned(), dir.join("src")));
        }
    }
    out.push(("kungfu-jepsen".into(), root().join("jepsen/src")));
    out.sort();
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("source dir") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            // `src/bin/` holds separate binaries, each a crate root of its own.
            if p.file_name().is_some_and(|n| n != "bin") {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `src/a/b.rs` and `src/a/b/mod.rs` are `a::b`; `src/lib.rs` and `src/main.rs` the root.
fn module_of(src: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(src).expect("under src").with_extension("");
    let mut parts: Module = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("lib" | "main" | "mod")) {
        parts.pop();
    }
    parts
}

/// The code of a file without comments, string contents and test modules.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    };
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                i += 1;
            }
            i += 2;
        } else if b[i] == b'"' {
            // A string's contents could spell a path; skip them (escapes included).
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && b.get(i + 2) == Some(&b'\'') {
            // A char literal such as '{' must not open a brace group.
            i += 3;
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Expands a `use` tree (`crate::a::{b, c::{d, self}}`) into its paths.
fn expand(tree: &str, prefix: &[String], out: &mut Vec<Module>) {
    let tree = tree.trim();
    if tree.is_empty() {
        return;
    }
    if let Some(open) = tree.find('{') {
        let head: Vec<String> =
            tree[..open].split("::").map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
        let close = tree.rfind('}').unwrap_or(tree.len());
        let inner = &tree[open + 1..close];
        let mut base = prefix.to_vec();
        base.extend(head);
        let (mut depth, mut start) = (0, 0);
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&inner[start..i], &base, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand(&inner[start..], &base, out);
    } else {
        let path = tree.split(" as ").next().unwrap_or(tree).trim();
        let mut p = prefix.to_vec();
        // `{self, ..}` names the group's own path; a leading `self::` stays for `resolve`.
        if path != "self" || prefix.is_empty() {
            p.extend(path.split("::").map(str::trim).filter(|s| !s.is_empty()).map(String::from));
        }
        out.push(p);
    }
}

/// Every path the code names that starts at `crate`, `super` or `self`.
fn named_paths(code: &str) -> Vec<Module> {
    let mut out = Vec::new();
    // `use` trees, whose braces a plain path scan cannot see through.
    let mut rest = code;
    while let Some(i) = rest.find("use ") {
        let before_ok = i == 0 || !is_ident(rest[..i].chars().next_back().unwrap_or(' '));
        let after = &rest[i + 4..];
        if !before_ok {
            rest = after;
            continue;
        }
        let end = after.find(';').unwrap_or(after.len());
        expand(&after[..end], &[], &mut out);
        rest = &after[end..];
    }
    // Paths in the code: `crate::a::b`, `super::super::c`.
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let starts = (i == 0 || !is_ident(chars[i - 1]))
            && ["crate::", "super::"].iter().any(|p| chars[i..].iter().take(p.len()).copied().eq(p.chars()));
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < chars.len() && (is_ident(chars[j]) || chars[j] == ':') {
            j += 1;
        }
        let path: String = chars[i..j].iter().collect();
        out.push(path.split("::").filter(|s| !s.is_empty()).map(String::from).collect());
        i = j;
    }
    out
}

/// The module a path names, resolved against the module `from` (whose file is a `mod.rs`/root
/// or not), as the longest known module that prefixes it.
fn resolve(path: &Module, from: &Module, modules: &BTreeSet<Module>) -> Option<Module> {
    let mut abs: Module = Vec::new();
    let mut it = path.iter().peekable();
    match it.peek().map(|s| s.as_str()) {
        Some("crate") => {
            it.next();
        }
        Some("super") => {
            abs = from.clone();
            while it.peek().map(|s| s.as_str()) == Some("super") {
                it.next();
                abs.pop()?;
            }
        }
        Some("self") => {
            it.next();
            abs = from.clone();
        }
        _ => return None,
    }
    abs.extend(it.cloned());
    (0..=abs.len()).rev().map(|k| abs[..k].to_vec()).find(|m| modules.contains(m))
}

fn contains(outer: &Module, inner: &Module) -> bool {
    inner.len() >= outer.len() && inner[..outer.len()] == outer[..]
}

/// The edges of one crate: module to the modules it names, ancestors and descendants left out.
fn edges(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeMap<Module, PathBuf> = files.iter().map(|f| (module_of(src, f), f.clone())).collect();
    let known: BTreeSet<Module> = modules.keys().cloned().collect();
    let mut out: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (m, file) in &modules {
        let text = std::fs::read_to_string(file).expect("source file");
        for path in named_paths(&code(&text)) {
            let Some(to) = resolve(&path, m, &known) else { continue };
            if !contains(m, &to) && !contains(&to, m) {
                out.entry(m.clone()).or_default().insert(to);
            }
        }
    }
    out
}

/// The strongly connected components with more than one module (Tarjan).
fn cycles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct T<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        on: BTreeSet<Module>,
        next: usize,
        out: Vec<Vec<Module>>,
    }
    fn visit(t: &mut T<'_>, v: &Module) {
        t.index.insert(v.clone(), t.next);
        t.low.insert(v.clone(), t.next);
        t.next += 1;
        t.stack.push(v.clone());
        t.on.insert(v.clone());
        for w in t.edges.get(v).cloned().unwrap_or_default() {
            if !t.index.contains_key(&w) {
                visit(t, &w);
                let l = t.low[v].min(t.low[&w]);
                t.low.insert(v.clone(), l);
            } else if t.on.contains(&w) {
                let l = t.low[v].min(t.index[&w]);
                t.low.insert(v.clone(), l);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = t.stack.pop().expect("on the stack");
                t.on.remove(&w);
                let done = &w == v;
                comp.push(w);
                if done {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

fn show(m: &Module) -> String {
    if m.is_empty() { "crate".into() } else { m.join("::") }
}

#[test]
fn no_crate_has_an_import_cycle_between_its_modules() {
    let mut found = Vec::new();
    for (name, src) in crate_sources() {
        let edges = edges(&src);
        for comp in cycles(&edges) {
            let set: BTreeSet<&Module> = comp.iter().collect();
            let mut lines = Vec::new();
            for a in &comp {
                for b in edges.get(a).into_iter().flatten().filter(|b| set.contains(b)) {
                    lines.push(format!("    {} -> {}", show(a), show(b)));
                }
            }
            found.push(format!(
                "{name}: {}\n{}",
                comp.iter().map(show).collect::<Vec<_>>().join(", "),
                lines.join("\n")
            ));
        }
    }
    assert!(
        found.is_empty(),
        "import cycles between modules (move the shared item to a module both can depend on, or \
         invert the call with a trait; see docs/ARCHITECTURE.md, \"Layering\"):\n{}",
        found.join("\n")
    );
}

/// The scan itself: a cycle through a `use` tree with braces, through a path in the code, and
/// through a chain of three modules is found; a child using its parent, and one-way edges, are not.
#[test]
fn the_scan_finds_cycles_through_use_trees_and_paths_and_nothing_else() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path();
    std::fs::create_dir_all(src.join("d")).expect("dir");
    let files = [
        ("lib.rs", "mod a; mod b; mod c; mod d; mod e;\n"),
        ("a.rs", "use crate::{b::{self, x}, e};\n"),
        ("b.rs", "fn f() { crate::c::g(); } // crate::a::h()\n"),
        ("c.rs", "use super::a;\nconst S: &str = \"crate::e::nothing\";\n"),
        ("d/mod.rs", "mod k; use self::k::y; fn g() { crate::e::z(); }\n"),
        ("d/k.rs", "use super::super::d::helper;\n#[cfg(test)]\nmod tests { use crate::d::k; use crate::a; }\n"),
        ("e.rs", "use crate::d::k::y;\n"),
    ];
    for (f, text) in files {
        std::fs::write(src.join(f), text).expect("write");
    }
    let edges = edges(src);
    let m = |s: &str| -> Module { s.split("::").map(String::from).collect() };
    assert_eq!(cycles(&edges), vec![vec![m("a"), m("b"), m("c")]], "edges: {edges:?}");
    assert!(edges[&m("a")].contains(&m("e")), "a one-way edge is kept: {edges:?}");
    assert!(!edges.contains_key(&m("d::k")), "a child naming its parent, or only in its tests, is no edge: {edges:?}");
    assert!(!edges[&m("c")].contains(&m("e")), "a path inside a string is no edge: {edges:?}");
}

/// Issue #32: the node links no client library. `kungfud` (the `kungfu-server` package and what it
/// links, build scripts included, tests' dependencies aside) does not depend on `kungfu-client`:
/// what a door needs of the SDK (a new idempotency key, the barrier's re-read period) lives in
/// `kungfu-api`, which both share.
#[test]
fn the_node_does_not_link_the_client_sdk() {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--offline", "--locked"])
        .current_dir(root())
        .output()
        .expect("cargo metadata");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let name_of = |id: &str| -> String {
        meta["packages"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["id"] == id))
            .and_then(|p| p["name"].as_str())
            .unwrap_or_default()
            .to_string()
    };
    let nodes = meta["resolve"]["nodes"].as_array().expect("resolve nodes");
    let start =
        nodes.iter().find(|n| name_of(n["id"].as_str().unwrap_or_default()) == "kungfu-server").expect("server");
    let mut seen = BTreeSet::new();
    let mut todo = vec![start["id"].as_str().expect("id").to_string()];
    let mut names = BTreeSet::new();
    while let Some(id) = todo.pop() {
        if !seen.insert(id.clone()) {
            continue;
        }
        names.insert(name_of(&id));
        let node = nodes.iter().find(|n| n["id"] == id.as_str()).expect("a resolved package");
        for dep in node["deps"].as_array().into_iter().flatten() {
            // Normal and build dependencies; a dev dependency is linked only into tests.
            let linked = dep["dep_kinds"].as_array().into_iter().flatten().any(|k| k["kind"].as_str() != Some("dev"));
            if linked {
                todo.push(dep["pkg"].as_str().expect("pkg").to_string());
            }
        }
    }
    assert!(names.contains("kungfu-mcp") && names.contains("kungfu-api"), "the walk reaches the doors: {names:?}");
    assert!(!names.contains("kungfu-client"), "kungfud links the client SDK: {names:?}");
}
