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
    let path = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .join("../../docs/scaling.md");
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

/// The cells of a markdown table row, trimmed, without the outer pipes.
fn cells(row: &str) -> Vec<String> {
    let inner = row.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split('|').map(|c| c.trim().to_string()).collect()
}

/// `value` printed with as many decimals as `shown` has.
fn like(shown: &str, value: f64) -> String {
    let decimals = shown.split('.').nth(1).map_or(0, str::len);
    format!("{value:.decimals$}")
}

#[test]
fn scaling_doc_summary_tables_round_the_documented_run() {
    let doc = doc();
    let m = run(&Config::documented());
    // §1: `| placement | groups | multi % | 2PC % | hottest % | actions/s | speedup× |`.
    let mut summary_rows = 0;
    for row in doc.lines().filter(|l| l.starts_with("| ") && l.contains(" % |") && l.ends_with("× |")) {
        let c = cells(row);
        let placement = c[0].trim_matches('*');
        let p = kungfu_scale_model::placement::Placement::ALL
            .into_iter()
            .find(|p| p.name() == placement)
            .unwrap_or_else(|| panic!("unknown placement in {row}"));
        let n: u32 = c[1].parse().expect("a group count");
        let cell = m.cell(p, n).unwrap_or_else(|| panic!("no cell for {row}"));
        let strip = |s: &str| s.trim_matches('*').trim_end_matches(" %").trim_end_matches('×').replace(',', "");
        let expect = [
            (strip(&c[2]), 100.0 * cell.multi_group),
            (strip(&c[3]), 100.0 * cell.two_phase),
            (strip(&c[4]), 100.0 * cell.hottest_share),
            (strip(&c[5]), cell.throughput),
            (strip(&c[6]), cell.speedup),
        ];
        for (shown, value) in expect {
            assert_eq!(shown, like(&shown, value), "docs/scaling.md §1 row `{row}`");
        }
        summary_rows += 1;
    }
    assert!(summary_rows >= 3, "the §1 summary table was not found");

    // §6: the last column, multi / 2PC under object-local at the detail group count, in whole percents.
    let d = m.config.detail_groups;
    let object_local = kungfu_scale_model::placement::Placement::ALL
        .iter()
        .position(|p| *p == kungfu_scale_model::placement::Placement::ObjectLocal)
        .expect("object-local is a placement");
    let mut wrong = Vec::new();
    for r in &m.kinds {
        let name = format!("| `{}` |", r.kind.as_str());
        let row = doc.lines().find(|l| l.starts_with(&name)).unwrap_or_else(|| panic!("no §6 row for {name}"));
        let last = cells(row).pop().unwrap_or_default();
        let (multi, two) = r.by_placement[object_local];
        let expected = format!("{:.0} / {:.0}", 100.0 * multi, 100.0 * two);
        if last != expected {
            wrong.push(format!("{name} shows {last}, the model {expected}"));
        }
    }
    assert!(wrong.is_empty(), "§6 rows at {d} groups under object-local: {wrong:#?}");
}
