//! Issue #36, deliverable 1: an operator sees each part of a node's data directory (the raft log,
//! the state, the snapshots) in `ClusterStatus`, in `kungfu cluster status` and in the metrics,
//! the same bytes as on disk, and the raft log's fsync times as a histogram (the alert rules of
//! `cluster-config/prometheus/` use both).

use kungfu_api::pb;
use kungfu_system_tests::{
    BOUND, Client, Cluster, connect, content, free_port, http_get, kungfud, register_when_serving,
};
use std::time::{Duration, Instant};

const TOKEN: &str = "disk-operator-token-0123";

fn value(body: &str, series: &str) -> Option<f64> {
    body.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

fn bytes_under(path: &std::path::Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return 0 };
    if meta.is_file() {
        return meta.len();
    }
    std::fs::read_dir(path).map(|d| d.flatten().map(|e| bytes_under(&e.path())).sum()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_cli_and_metrics_show_the_bytes_of_each_part_of_the_data_directory() {
    let http_port = free_port();
    let extra = format!("http_listen = \"127.0.0.1:{http_port}\"\noperator_token = \"{TOKEN}\"\n");
    // A snapshot every 20 entries, so `snapshots/` holds one.
    let raft = format!("{}\nsnapshot_after_logs = 20\nkeep_logs_after_snapshot = 5", kungfu_system_tests::TEST_RAFT);
    let cluster = Cluster::start_with_raft(1, &extra, &raft);
    let node = &cluster.nodes[&1];
    let anon = Client { channel: connect(node.api).await, key: None };
    let (_, agent) = register_when_serving(&anon, "disk", || cluster.logs()).await;
    for i in 0..40 {
        let req = agent
            .req(pb::CreateMemoryRequest { idempotency_key: format!("m{i}"), content: content(&"x".repeat(1000)) });
        agent.memories().create(req).await.expect("write");
    }
    let data = cluster.dir.path().join("data1");

    // ClusterStatus: each part, as on disk (files change as RocksDB works: within a margin).
    let admin = pb::admin_service_client::AdminServiceClient::new(connect(node.api).await);
    let start = Instant::now();
    let status = loop {
        let mut req = tonic::Request::new(pb::ClusterStatusRequest {});
        req.metadata_mut().insert("authorization", format!("Bearer {TOKEN}").parse().expect("header"));
        let s = admin.clone().cluster_status(req).await.expect("status").into_inner();
        if s.snapshots_bytes.unwrap_or(0) > 0 {
            break s;
        }
        assert!(start.elapsed() < BOUND, "no snapshot on disk: {s:?}\n{}", cluster.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let near = |reported: Option<u64>, part: &str| {
        let reported = reported.unwrap_or_else(|| panic!("{part} not reported"));
        let on_disk = bytes_under(&data.join(part));
        assert!(reported > 0 && on_disk > 0, "{part}: {reported} reported, {on_disk} on disk");
        let diff = reported.abs_diff(on_disk);
        assert!(diff <= on_disk / 2 + 64 * 1024, "{part}: {reported} reported, {on_disk} on disk");
    };
    near(status.log_bytes, "log");
    near(status.state_bytes, "state");
    near(status.snapshots_bytes, "snapshots");

    // The command line shows them in its table.
    let out = std::process::Command::new(kungfud().with_file_name("kungfu"))
        .args(["cluster", "status", "--endpoint", &node.api.to_string(), "--key", TOKEN])
        .output()
        .expect("run kungfu cluster status");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let header = text.lines().find(|l| l.contains("NODE")).unwrap_or_else(|| panic!("no table:\n{text}"));
    for column in ["LOG", "STATE", "SNAPSHOTS"] {
        assert!(header.split_whitespace().any(|w| w == column), "no {column} column:\n{text}");
    }
    let row = text.lines().find(|l| l.trim_start().starts_with('1')).unwrap_or_else(|| panic!("no row:\n{text}"));
    assert!(row.contains("KiB") || row.contains("MiB"), "sizes in binary units:\n{text}");

    // The metrics: each part, summing to the whole, and the fsync histogram.
    let addr: std::net::SocketAddr = format!("127.0.0.1:{http_port}").parse().expect("addr");
    let start = Instant::now();
    let body = loop {
        let answer = http_get(addr, "/metrics").await;
        let body = answer.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
        // Sync times are published with the gauges, once a second.
        if value(&body, "kungfu_raft_log_sync_seconds_count").is_some_and(|n| n >= 40.0) {
            break body;
        }
        assert!(start.elapsed() < BOUND, "no fsync histogram:\n{body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let part = |p: &str| value(&body, &format!("kungfu_data_dir_part_bytes{{part=\"{p}\"}}")).unwrap_or(-1.0);
    for p in ["log", "state", "snapshots"] {
        assert!(part(p) > 0.0, "part {p}:\n{body}");
    }
    let total = value(&body, "kungfu_data_dir_bytes").expect("total");
    let sum = part("log") + part("state") + part("snapshots") + part("other");
    assert!((total - sum).abs() < 1.0, "the parts sum to the whole: {sum} vs {total}");
    assert!(body.contains("# TYPE kungfu_raft_log_sync_seconds histogram"), "{body}");
    assert!(body.contains("kungfu_raft_log_sync_seconds_bucket{le=\"0.01\"}"), "{body}");
}
