//! `docs/scaling.md` quotes the model's report for the documented seed and command, and names every
//! action of the protocol in its footprint table. These tests fail when either drifts: rerun
//! `cargo run --release -p kungfu-scale-model` and paste its output between the markers, or add the
//! new action's row (its footprint in `src/footprint.rs` is already forced by the compiler).

use kungfu_core::action::ActionKind;
use kungfu_scale_model::{Config, report, run};
use std::path::PathBuf;

const BEGIN: &str = "<!-- kungfu-scale-model:begin -->\n```text\n";
const END: &str = "```\n<!-- kungfu-scale-model:end -->";

fn doc() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/scaling.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

#[test]
fn scaling_doc_quotes_the_documented_run() {
    let doc = doc();
    let start = doc.find(BEGIN).expect("docs/scaling.md has the begin marker") + BEGIN.len();
    let end = start + doc[start..].find(END).expect("docs/scaling.md has the end marker");
    let quoted = &doc[start..end];
    let config = Config::documented();
    let printed = report::render(&run(&config));
    if quoted != printed {
        let first = quoted.lines().zip(printed.lines()).position(|(a, b)| a != b);
        panic!(
            "docs/scaling.md no longer matches `{}` (first differing line: {first:?}).\n--- model prints:\n{printed}",
            report::command(config.seed, config.actions)
        );
    }
    // The command the doc tells readers to run is the one that prints the quoted report.
    assert!(doc.contains(&report::command(config.seed, config.actions)));
}

#[test]
fn scaling_doc_has_a_row_for_every_action() {
    let doc = doc();
    let missing: Vec<&str> =
        ActionKind::ALL.iter().map(|k| k.as_str()).filter(|name| !doc.contains(&format!("| `{name}`"))).collect();
    assert!(missing.is_empty(), "docs/scaling.md has no footprint row for {missing:?}");
}
