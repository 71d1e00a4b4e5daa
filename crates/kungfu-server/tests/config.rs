//! Configuration: the shipped examples in `cluster-config/` parse and validate, the default is a
//! single-node cluster in ./data, and every invalid setting is refused naming the setting.

use kungfu_server::Config;
use std::path::{Path, PathBuf};

fn examples() -> Vec<std::path::PathBuf> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR (set by cargo)"))
        .join("../../cluster-config");
    let mut files = Vec::new();
    for dir in [root.clone(), root.join("three"), root.join("five")] {
        for e in std::fs::read_dir(&dir).expect("cluster-config exists") {
            let p = e.expect("entry").path();
            if p.extension().is_some_and(|x| x == "toml") {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn every_shipped_cluster_config_parses_and_validates() {
    let files = examples();
    assert_eq!(files.len(), 1 + 3 + 5, "single, three and five node examples: {files:?}");
    for f in &files {
        let c = Config::from_file(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        c.validate().unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    }
    // The members of each multi-node example agree on the peers and use distinct ports.
    for (dir, n) in [("three", 3), ("five", 5)] {
        let cs: Vec<Config> = files
            .iter()
            .filter(|f| f.to_string_lossy().contains(&format!("/{dir}/")))
            .map(|f| Config::from_file(f).expect("parse"))
            .collect();
        assert_eq!(cs.len(), n);
        assert!(cs.windows(2).all(|w| w[0].peers == w[1].peers && w[0].cluster_id == w[1].cluster_id));
        let mut ports: Vec<u16> = cs
            .iter()
            .flat_map(|c| [c.api_listen.port(), c.raft_listen.port(), c.http_listen.expect("http_listen").port()])
            .collect();
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 3 * n);
        // Each node's MCP port is its API port + 200 (docs/operations.md).
        assert!(cs.iter().all(|c| c.http_listen.map(|h| h.port()) == Some(c.api_listen.port() + 200)));
    }
}

#[test]
fn the_default_is_a_single_node_cluster_in_the_local_data_folder() {
    let c = Config::default();
    c.validate().expect("default is valid");
    assert_eq!(c.data_dir, Path::new("./data"));
    assert_eq!(c.voters().len(), 1);
    assert!(c.bootstrap);
    // MCP on loopback beside the API, and `single.toml` says the same.
    assert_eq!(c.http_listen, Some("127.0.0.1:7600".parse().expect("addr")));
    assert_eq!(c.mcp_url().as_deref(), Some("http://127.0.0.1:7600/mcp"));
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR (set by cargo)"));
    let single = Config::from_file(&root.join("../../cluster-config/single.toml")).expect("single.toml");
    assert_eq!(single.http_listen, c.http_listen);
}

#[test]
fn a_config_file_serves_mcp_only_when_it_sets_http_listen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("node.toml");
    std::fs::write(&f, "node_id = 1\napi_listen = \"127.0.0.1:9400\"\n").expect("write");
    let c = Config::from_file(&f).expect("parse");
    assert_eq!(c.http_listen, None, "a file that does not mention http_listen binds no HTTP port");
    assert_eq!(c.mcp_url(), None);
    std::fs::write(
        &f,
        "node_id = 1\nhttp_listen = \"0.0.0.0:9600\"\nhttp_advertise = \"node1.example:9600\"\n[mcp]\nmax_body_bytes = 100000\n",
    )
    .expect("write");
    let c = Config::from_file(&f).expect("parse");
    c.validate().expect("valid");
    assert_eq!(c.mcp_url().as_deref(), Some("http://node1.example:9600/mcp"));
    assert_eq!(c.mcp.max_body_bytes, 100_000);
    // Unset allowed hosts are the advertised address and the loopback names at the port.
    let hosts = c.mcp_allowed_hosts();
    assert_eq!(hosts[0], "node1.example:9600");
    assert!(hosts.contains(&"localhost:9600".to_string()) && hosts.contains(&"127.0.0.1:9600".to_string()));
    assert!(c.mcp_allowed_origins().contains(&"http://node1.example:9600".to_string()));
}

#[test]
fn invalid_settings_are_refused_naming_the_setting() {
    let cases: Vec<(&str, Box<dyn Fn(&mut Config)>)> = vec![
        ("node_id", Box::new(|c| c.node_id = 0)),
        ("cluster_id", Box::new(|c| c.cluster_id.clear())),
        (
            "peers",
            Box::new(|c| c.peers = vec![kungfu_server::config::Peer { id: 9, raft: "a:1".into(), api: "a:2".into() }]),
        ),
        ("raft", Box::new(|c| c.raft.election_timeout_min_ms = c.raft.heartbeat_ms)),
        ("operator_token", Box::new(|c| c.operator_token = Some("short".into()))),
        ("registration.open", Box::new(|c| c.registration.open = false)),
        ("api.max_message_bytes", Box::new(|c| c.api.max_message_bytes = 10)),
        ("raft.max_append_bytes", Box::new(|c| c.raft.max_append_bytes = 1024)),
        ("raft.max_append_bytes", Box::new(|c| c.raft.max_append_bytes = 64 * 1024 * 1024)),
        ("raft.dial", Box::new(|c| _ = c.raft.dial.insert("two".into(), "127.0.0.1:1".into()))),
        ("raft.dial", Box::new(|c| _ = c.raft.dial.insert("2".into(), String::new()))),
        ("http_listen", Box::new(|c| c.http_listen = Some(c.api_listen))),
        ("http_advertise", Box::new(|c| c.http_advertise = Some("http://h:1/mcp".into()))),
        ("mcp.max_body_bytes", Box::new(|c| c.mcp.max_body_bytes = 1024)),
        ("worker_threads", Box::new(|c| c.worker_threads = Some(0))),
        ("worker_threads", Box::new(|c| c.worker_threads = Some(kungfu_server::config::MAX_WORKER_THREADS + 1))),
        ("mcp.allowed_origins", Box::new(|c| c.mcp.allowed_origins = vec!["localhost:7600".into()])),
        ("mcp.allowed_hosts", Box::new(|c| c.mcp.allowed_hosts = vec![" ".into()])),
        (
            "console.cluster_view",
            Box::new(|c| c.console.cluster_view = kungfu_server::config::ClusterView::OperatorToken),
        ),
    ];
    for (setting, break_it) in cases {
        let mut c = Config::default();
        break_it(&mut c);
        let e = c.validate().expect_err(setting);
        assert_eq!(e.setting, setting, "{e}");
    }
}

#[test]
fn unknown_settings_in_a_file_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("bad.toml");
    std::fs::write(&f, "node_id = 1\nnode_idd = 2\n").expect("write");
    let e = Config::from_file(&f).expect_err("typo must be refused");
    assert!(e.message.contains("node_idd"), "{e}");
}

/// `[console]`: on by default with the cluster view open to loopback only; `cluster_view` is read
/// by name from a file, and an unknown value is refused naming it.
#[test]
fn the_console_is_on_by_default_and_its_cluster_view_is_read_by_name() {
    use kungfu_server::config::ClusterView;
    let c = Config::default();
    assert!(c.console.enabled);
    assert_eq!(c.console.cluster_view, ClusterView::Loopback);
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("node.toml");
    std::fs::write(
        &f,
        "node_id = 1\noperator_token = \"console-config-test-token\"\n[console]\ncluster_view = \"operator_token\"\n",
    )
    .expect("write");
    let c = Config::from_file(&f).expect("parse");
    c.validate().expect("valid with a token");
    assert_eq!(c.console.cluster_view, ClusterView::OperatorToken);
    std::fs::write(&f, "node_id = 1\n[console]\ncluster_view = \"anyone\"\n").expect("write");
    let e = Config::from_file(&f).expect_err("an unknown view");
    assert!(e.message.contains("anyone") || e.message.contains("cluster_view"), "{e}");
}

/// `[telemetry]` (issue #18): off by default (no endpoint, service `kungfud`, every trace kept);
/// read from a file; a malformed endpoint, an empty service name or a ratio outside 0..=1 is
/// refused naming the setting.
#[test]
fn telemetry_settings_are_off_by_default_and_validated_naming_the_setting() {
    let c = Config::default();
    assert_eq!(c.telemetry.otlp_endpoint, None);
    assert_eq!(c.telemetry.service_name, "kungfud");
    assert_eq!(c.telemetry.sample_ratio, 1.0);
    let dir = tempfile::tempdir().expect("tempdir");
    let f = dir.path().join("node.toml");
    std::fs::write(
        &f,
        "node_id = 1\n[telemetry]\notlp_endpoint = \"http://127.0.0.1:4317\"\nservice_name = \"kf\"\nsample_ratio = 0.25\n",
    )
    .expect("write");
    let c = Config::from_file(&f).expect("parse");
    c.validate().expect("valid");
    assert_eq!(c.telemetry.otlp_endpoint.as_deref(), Some("http://127.0.0.1:4317"));
    assert_eq!((c.telemetry.service_name.as_str(), c.telemetry.sample_ratio), ("kf", 0.25));
    let cases: Vec<(&str, Box<dyn Fn(&mut Config)>)> = vec![
        ("telemetry.otlp_endpoint", Box::new(|c| c.telemetry.otlp_endpoint = Some("127.0.0.1:4317".into()))),
        ("telemetry.otlp_endpoint", Box::new(|c| c.telemetry.otlp_endpoint = Some("ftp://collector:4317".into()))),
        ("telemetry.otlp_endpoint", Box::new(|c| c.telemetry.otlp_endpoint = Some(String::new()))),
        ("telemetry.otlp_endpoint", Box::new(|c| c.telemetry.otlp_endpoint = Some("https://collector:4317".into()))),
        ("telemetry.service_name", Box::new(|c| c.telemetry.service_name = " ".into())),
        ("telemetry.sample_ratio", Box::new(|c| c.telemetry.sample_ratio = 1.5)),
        ("telemetry.sample_ratio", Box::new(|c| c.telemetry.sample_ratio = -0.1)),
        ("telemetry.sample_ratio", Box::new(|c| c.telemetry.sample_ratio = f64::NAN)),
    ];
    for (setting, break_it) in cases {
        let mut c = Config::default();
        break_it(&mut c);
        let e = c.validate().expect_err(setting);
        assert_eq!(e.setting, setting, "{e}");
    }
}

/// The packaged config's commented `[wake]` block states the defaults: uncommented, it parses to
/// exactly `WakeSettings::default()`; a `deadline_warning_secs` past 30 days is refused.
#[test]
fn the_packaged_wake_block_states_the_defaults_and_bad_wake_settings_are_refused() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR (set by cargo)"));
    let text =
        std::fs::read_to_string(root.join("../../cluster-config/systemd/kungfud.toml")).expect("packaged config");
    let block: String = text
        .lines()
        .skip_while(|l| *l != "# [wake]")
        .take_while(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#').trim_start())
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(block.starts_with("[wake]\n"), "the packaged config has a commented [wake] block:\n{block}");
    let c: Config = toml::from_str(&format!("node_id = 1\n{block}")).expect("the block parses");
    assert_eq!(c.wake, Config::default().wake, "the block states the defaults:\n{block}");
    let mut c = Config::default();
    c.wake.deadline_warning_secs = 31 * 86_400;
    assert_eq!(c.validate().expect_err("too long").setting, "wake");
}
