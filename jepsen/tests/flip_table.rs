//! The `flip-table` nemesis's pure parts: which bytes of a table file or manifest it may flip, and
//! how the crash check excuses the damaged node's corruption report (and only that).

use kungfu_jepsen::cluster::LogWindow;
use kungfu_jepsen::nemesis::{Kind, flip_range, skip_padding, table_files};
use kungfu_jepsen::run::crash_lines;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kfj-flip-table-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[test]
fn the_nemesis_has_a_name() {
    assert_eq!(Kind::parse("flip-table").expect("known"), Kind::FlipTable);
    assert_eq!(Kind::FlipTable.name(), "flip-table");
}

#[test]
fn an_uncompressed_first_data_block_is_flipped_within_its_first_entry() {
    let dir = scratch("plain");
    let file = dir.join("000012.sst");
    // shared 0, key of 10 bytes, value of 300 bytes (varint 0xac 0x02), then the entry.
    let mut bytes = vec![0u8, 10, 0xac, 0x02];
    bytes.extend(vec![7u8; 310 + 500]);
    std::fs::write(&file, &bytes).expect("write");
    assert_eq!(flip_range(&file, bytes.len() as u64).expect("range"), (0, 4 + 10 + 300));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_compressed_first_data_block_is_flipped_in_its_size_or_the_byte_after() {
    let dir = scratch("compressed");
    let file = dir.join("000013.sst");
    // The varint of the uncompressed size (4100: 0x84 0x20), then compressed bytes.
    let mut bytes = vec![0x84u8, 0x20];
    bytes.extend(vec![9u8; 900]);
    std::fs::write(&file, &bytes).expect("write");
    assert_eq!(flip_range(&file, bytes.len() as u64).expect("range"), (0, 3));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_manifest_is_flipped_anywhere_but_in_block_padding() {
    let m = Path::new("/x/log/MANIFEST-000005");
    assert_eq!(flip_range(&scratch_manifest(), 1000).expect("range"), (0, 1000));
    assert_eq!(skip_padding(m, 100), 100);
    assert_eq!(skip_padding(m, 32 * 1024 - 7), 32 * 1024 - 7);
    assert_eq!(skip_padding(m, 32 * 1024 - 1), 32 * 1024 - 7);
    assert_eq!(skip_padding(m, 64 * 1024 - 3), 64 * 1024 - 9);
    // A table file has no such padding.
    assert_eq!(skip_padding(Path::new("/x/state/000012.sst"), 32 * 1024 - 1), 32 * 1024 - 1);
}

fn scratch_manifest() -> PathBuf {
    let dir = scratch("manifest");
    let file = dir.join("MANIFEST-000005");
    std::fs::write(&file, vec![1u8; 1000]).expect("write");
    file
}

#[test]
fn the_candidates_are_tables_and_manifests_of_both_stores() {
    let data = scratch("data");
    for part in ["state", "log"] {
        std::fs::create_dir_all(data.join(part)).expect("dir");
        for name in ["000009.sst", "MANIFEST-000005", "000010.log", "CURRENT", "OPTIONS-000007", "LOG", "empty.sst"] {
            let body: &[u8] = if name == "empty.sst" { b"" } else { b"x" };
            std::fs::write(data.join(part).join(name), body).expect("write");
        }
    }
    let names: Vec<String> = table_files(&data)
        .expect("files")
        .iter()
        .map(|p| p.strip_prefix(&data).expect("under data").display().to_string())
        .collect();
    assert_eq!(names, ["log/000009.sst", "log/MANIFEST-000005", "state/000009.sst", "state/MANIFEST-000005"]);
    let _ = std::fs::remove_dir_all(&data);
}

#[test]
fn the_damaged_nodes_corruption_report_is_excused_only_in_its_window() {
    let refused = "error: the state store at /r/n2/data/state is damaged: Corruption: checksum mismatch; wipe its data directory and rejoin it\n";
    let before = "2026-12-07T10:00:00Z INFO raft started\n";
    let text = format!("{before}{refused}");
    let window = LogWindow { node: 2, from: before.len() as u64, to: text.len() as u64 };
    let mut logs = BTreeMap::new();
    logs.insert(2, text.clone());
    assert!(crash_lines(&logs, &[window], "/nowhere").is_empty());
    // Not excused without the window, nor on another node, nor after the window.
    assert_eq!(crash_lines(&logs, &[], "/nowhere").len(), 1);
    assert_eq!(crash_lines(&logs, &[LogWindow { node: 1, ..window }], "/nowhere").len(), 1);
    let later = format!("{text}2026-12-07T10:01:00Z ERROR read failed: Corruption: block checksum mismatch\n");
    logs.insert(2, later);
    let found = crash_lines(&logs, &[window], "/nowhere");
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].1.contains("block checksum"), "{found:?}");
    // A panic is never excused.
    let panicked = format!("{before}thread 'tokio' panicked at src/x.rs:1:1: boom\n");
    logs.insert(2, panicked.clone());
    let w = LogWindow { node: 2, from: 0, to: panicked.len() as u64 };
    assert_eq!(crash_lines(&logs, &[w], "/nowhere").len(), 1);
    // A corruption report that does not name the repair is a finding of its own.
    let mute = format!("{before}error: RocksDB error in the state store: Corruption: bad block\n");
    logs.insert(2, mute.clone());
    let w = LogWindow { node: 2, from: 0, to: mute.len() as u64 };
    let found = crash_lines(&logs, &[w], "/nowhere");
    assert_eq!(found.iter().map(|f| f.0.as_str()).collect::<Vec<_>>(), ["unexplained_corruption"]);
}
