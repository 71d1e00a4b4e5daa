//! Issue #36, deliverable 4: the alert rules shipped in `cluster-config/prometheus/` are valid
//! (`promtool check rules`), fire on the series they are meant for and not on healthy ones
//! (`promtool test rules`), and name only metrics a node really exports: the families
//! `crates/kungfu-server/src/metrics.rs` describes, or that a live node's `/metrics` shows (the
//! process families), besides `up`, which Prometheus records itself.

use kungfu_system_tests::{BOUND, Client, Cluster, connect, free_port, http_get, register_when_serving};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const RULES: &str = "cluster-config/prometheus/kungfu-alerts.yml";
const RULE_TESTS: &str = "cluster-config/prometheus/kungfu-alerts.test.yml";

fn repo() -> PathBuf {
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository's root")
        .to_path_buf()
}

fn promtool(args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new("promtool")
        .args(args)
        .current_dir(repo())
        .output()
        .expect("promtool is installed (apt-get install prometheus)");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn the_alert_rules_are_valid_and_fire_on_the_series_they_are_for() {
    let (ok, out) = promtool(&["check", "rules", RULES]);
    assert!(ok, "promtool check rules {RULES}:\n{out}");
    let (ok, out) = promtool(&["test", "rules", RULE_TESTS]);
    assert!(ok, "promtool test rules {RULE_TESTS}:\n{out}");
}

/// Every metric name in the rules' expressions (identifiers before `{`, `[`, `)` or a space
/// that are not functions, keywords or label names).
fn metric_names(rules: &str) -> BTreeSet<String> {
    let doc = yaml_rust2::YamlLoader::load_from_str(rules).expect("the rules are YAML");
    let mut names = BTreeSet::new();
    for group in doc[0]["groups"].as_vec().expect("groups") {
        for rule in group["rules"].as_vec().expect("rules") {
            let expr = rule["expr"].as_str().expect("an expr");
            let mut rest = expr;
            // Drop label matchers and `by (...)` lists: their words are labels, not metrics.
            let mut cleaned = String::new();
            let mut depth_braces = 0;
            while let Some(c) = rest.chars().next() {
                rest = &rest[c.len_utf8()..];
                match c {
                    '{' => depth_braces += 1,
                    '}' => depth_braces -= 1,
                    _ if depth_braces > 0 => {}
                    _ => cleaned.push(c),
                }
            }
            let cleaned = cleaned.replace("by (instance, le)", "").replace("by (job)", "");
            for word in cleaned.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')) {
                if word.starts_with("kungfu_") || word.starts_with("process_") || word == "up" {
                    names.insert(word.to_string());
                }
            }
        }
    }
    names
}

/// The series of the families `metrics.rs` describes (`describe_gauge!(` and its kin, the name
/// their first string; a histogram's `_bucket`, `_sum` and `_count`).
fn described() -> BTreeSet<String> {
    let source = std::fs::read_to_string(repo().join("crates/kungfu-server/src/metrics.rs")).expect("metrics.rs");
    let mut names = BTreeSet::new();
    for part in source.split("describe_").skip(1) {
        if let Some(start) = part.find('"') {
            let name: String = part[start + 1..].chars().take_while(|c| *c != '"').collect();
            if !name.starts_with("kungfu_") {
                continue;
            }
            if part.starts_with("histogram!") {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
            names.insert(name);
        }
    }
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_alert_rules_name_only_metrics_a_node_exports() {
    let rules = std::fs::read_to_string(repo().join(RULES)).expect("the rules");
    let used = metric_names(&rules);
    for expected in
        ["kungfu_raft_log_sync_seconds_bucket", "kungfu_data_dir_free_bytes", "process_resident_memory_bytes"]
    {
        assert!(used.contains(expected), "the rules cover {expected}: {used:?}");
    }
    // A live node's exposition: its `# TYPE` lines, histograms with their series' suffixes.
    let http_port = free_port();
    let cluster = Cluster::start(1, &format!("http_listen = \"127.0.0.1:{http_port}\"\n"));
    let anon = Client { channel: connect(cluster.nodes[&1].api).await, key: None };
    register_when_serving(&anon, "alerts", || cluster.logs()).await;
    let addr: std::net::SocketAddr = format!("127.0.0.1:{http_port}").parse().expect("addr");
    let start = Instant::now();
    let body = loop {
        let body = http_get(addr, "/metrics").await;
        // The fsync histogram is published with the gauges, once a second.
        if body.contains("# TYPE kungfu_raft_log_sync_seconds histogram") {
            break body;
        }
        assert!(start.elapsed() < BOUND, "the node never exported its fsync histogram:\n{body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let mut exported = described();
    for line in body.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        let mut words = line.split_whitespace();
        let (Some(name), Some(kind)) = (words.next(), words.next()) else { continue };
        exported.insert(name.to_string());
        if kind == "histogram" || kind == "summary" {
            for suffix in ["_bucket", "_sum", "_count"] {
                exported.insert(format!("{name}{suffix}"));
            }
        }
    }
    exported.insert("up".to_string());
    let unknown: Vec<&String> = used.iter().filter(|n| !exported.contains(*n)).collect();
    assert!(unknown.is_empty(), "the rules name metrics no node exports: {unknown:?}\nexported: {exported:?}");
}
