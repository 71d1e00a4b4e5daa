//! Issue #31: what `tools/list` costs a host, held to its limits and stated in `docs/mcp.md`.

use kungfu_mcp::Toolsets;
use kungfu_mcp::budget::{self, Budget, MAX_DEFAULT_MODEL_BYTES, MAX_LIST_BYTES};
use std::path::PathBuf;

/// The default set's model-facing part (name, description, input schema of every tool) fits the
/// budget a host can afford on every turn. Raising the limit is a reviewed change of
/// `budget::MAX_DEFAULT_MODEL_BYTES`, never a silent one.
#[test]
fn the_default_toolset_fits_the_model_facing_budget() {
    let b = Budget::measure(Toolsets::default());
    assert!(
        b.model_bytes <= MAX_DEFAULT_MODEL_BYTES,
        "the default toolset's model-facing part is {} bytes, over {MAX_DEFAULT_MODEL_BYTES}: shorten descriptions or schemas, or move tools to an opt-in set",
        b.model_bytes
    );
}

/// The whole `tools/list`, every toolset selected and output schemas included, fits its limit.
#[test]
fn the_whole_tool_list_fits_its_budget() {
    for sets in budget::selections() {
        let b = Budget::measure(sets);
        assert!(
            b.list_bytes <= MAX_LIST_BYTES,
            "tools/list of {sets} is {} bytes, over {MAX_LIST_BYTES}",
            b.list_bytes
        );
        assert!(b.model_bytes < b.list_bytes, "{sets}: the model-facing part is part of the list");
    }
    assert!(
        Budget::measure(Toolsets::default()).tools < Budget::measure(Toolsets::all()).tools,
        "the default set leaves tools out"
    );
}

/// The budget table in `docs/mcp.md` (between `budget:begin` and `budget:end`) is the measured
/// one, so the doc cannot drift from the door. `KUNGFU_BLESS=1` rewrites it instead of failing.
#[test]
fn mcp_budget_doc_matches_the_measurement() {
    let measured = budget::markdown();
    let doc_path = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .join("../../docs/mcp.md");
    let doc = std::fs::read_to_string(&doc_path).expect("docs/mcp.md");
    let (begin, end) = ("<!-- budget:begin -->\n", "<!-- budget:end -->");
    let start = doc.find(begin).expect("docs/mcp.md has the budget:begin marker") + begin.len();
    let stop = doc.find(end).expect("docs/mcp.md has the budget:end marker");
    if doc[start..stop] == measured {
        return;
    }
    if std::env::var_os("KUNGFU_BLESS").is_some() {
        let blessed = format!("{}{measured}{}", &doc[..start], &doc[stop..]);
        std::fs::write(&doc_path, blessed).expect("write docs/mcp.md");
        return;
    }
    panic!(
        "the budget table in docs/mcp.md differs from the measurement:\n{measured}\nregenerate it with \
         KUNGFU_BLESS=1 cargo nextest run --workspace -E 'test(mcp_budget_doc)'"
    );
}
