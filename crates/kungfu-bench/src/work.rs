//! Where the work of one point went (issue #30, "measure first"): the CPU time of the servers and
//! of this bench client per call (from `/proc/PID/stat`, both systems alike), and for Kungfu how
//! its write path batched, from the counters of every node's `/metrics`
//! (`kungfu_raft_*_total`): entries per log append, per AppendEntries and per apply batch, the
//! log's fsyncs per second, and the snapshots built. CPU is sampled around the whole point,
//! warm-up included, and divided by the calls made at the measured rate in that time; the node's
//! counters are published once a second, so their rates are good to about a second of the point.

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// CPU time (user + system) of a process so far, in microseconds; None when it is gone.
pub fn cpu_micros(pid: u32) -> Option<u64> {
    parse_cpu_micros(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The CPU time in the text of a `/proc/PID/stat` file: fields 14 and 15 (utime, stime), in
/// clock ticks of 1/100 s (Linux's `USER_HZ` for `/proc`), counted after the command name, which
/// may hold spaces and is closed by the last `)`.
pub fn parse_cpu_micros(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3, so utime (14) and stime (15) are at 11 and 12 here.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) * 10_000)
}

/// The counters of a node's `/metrics` whose names start with `kungfu_raft_` and end with
/// `_total`, unlabelled; None when the node does not answer.
pub async fn scrape(addr: &str) -> Option<BTreeMap<String, f64>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let fetch = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        let req = format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n");
        stream.write_all(req.as_bytes()).await.ok()?;
        let mut body = String::new();
        stream.read_to_string(&mut body).await.ok()?;
        Some(body)
    };
    let body = tokio::time::timeout(Duration::from_secs(2), fetch).await.ok()??;
    Some(parse_counters(&body))
}

/// The unlabelled `kungfu_raft_…_total` samples of a Prometheus text page, and the snapshots'
/// build time (a gauge that only grows).
pub fn parse_counters(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| l.starts_with("kungfu_raft_") && !l.contains('{'))
        .filter_map(|l| {
            let (name, value) = l.split_once(' ')?;
            let wanted = name.ends_with("_total") || name == SNAPSHOT_SECONDS;
            wanted.then(|| Some((name.to_string(), value.trim().parse().ok()?)))?
        })
        .collect()
}

const SNAPSHOT_SECONDS: &str = "kungfu_raft_snapshot_build_seconds";

/// Samples taken before a point, for [`Sampler::finish`].
#[derive(Debug)]
pub struct Sampler {
    started: Instant,
    client_cpu: Option<u64>,
    servers_cpu: Vec<Option<u64>>,
    counters: Vec<Option<BTreeMap<String, f64>>>,
}

/// What [`Sampler::finish`] found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Work {
    /// CPU microseconds of all the system's server processes together, per successful call.
    pub server_cpu_us_per_op: Option<f64>,
    /// CPU microseconds of this bench process (the load generator) per successful call.
    pub client_cpu_us_per_op: Option<f64>,
    /// Kungfu only: how the write path batched, summed over the nodes.
    pub write_path: Option<WritePath>,
}

/// Kungfu's write path over one point, all nodes together.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WritePath {
    pub entries_per_append: Option<f64>,
    pub entries_per_append_rpc: Option<f64>,
    pub commands_per_apply_batch: Option<f64>,
    /// Raft log fsyncs per second, all nodes together.
    pub log_syncs_per_sec: f64,
    pub snapshots_built: f64,
    pub snapshot_build_ms: f64,
}

fn per(a: f64, b: f64) -> Option<f64> {
    (b > 0.0).then(|| a / b)
}

impl Sampler {
    /// Samples the processes `pids` and, for Kungfu, the `/metrics` of each node at `metrics`.
    pub async fn start(pids: &[(u16, u32)], metrics: &[String]) -> Sampler {
        let mut counters = Vec::new();
        for addr in metrics {
            counters.push(scrape(addr).await);
        }
        Sampler {
            started: Instant::now(),
            client_cpu: cpu_micros(std::process::id()),
            servers_cpu: pids.iter().map(|(_, pid)| cpu_micros(*pid)).collect(),
            counters,
        }
    }

    /// The work since [`Sampler::start`], for a point that ran at `ops_per_sec`.
    pub async fn finish(self, pids: &[(u16, u32)], metrics: &[String], ops_per_sec: f64) -> Work {
        // Let every node publish its counters once more (they are published each second).
        if !metrics.is_empty() {
            tokio::time::sleep(Duration::from_millis(1_100)).await;
        }
        let elapsed = self.started.elapsed().as_secs_f64();
        let calls = ops_per_sec * elapsed;
        let client = cpu_micros(std::process::id()).zip(self.client_cpu).map(|(b, a)| b.saturating_sub(a) as f64);
        let servers: Option<f64> = pids
            .iter()
            .zip(&self.servers_cpu)
            .map(|((_, pid), before)| cpu_micros(*pid).zip(*before).map(|(b, a)| b.saturating_sub(a) as f64))
            .sum();
        let mut write_path = None;
        if !metrics.is_empty() {
            let mut delta: BTreeMap<String, f64> = BTreeMap::new();
            for (addr, before) in metrics.iter().zip(self.counters) {
                let (Some(after), Some(before)) = (scrape(addr).await, before) else { continue };
                for (name, value) in after {
                    *delta.entry(name.clone()).or_default() += value - before.get(&name).copied().unwrap_or(0.0);
                }
            }
            let d = |name: &str| delta.get(name).copied().unwrap_or(0.0);
            write_path = Some(WritePath {
                entries_per_append: per(
                    d("kungfu_raft_log_appended_entries_total"),
                    d("kungfu_raft_log_appends_total"),
                ),
                entries_per_append_rpc: per(
                    d("kungfu_raft_replicated_entries_total"),
                    d("kungfu_raft_append_rpcs_total"),
                ),
                commands_per_apply_batch: per(
                    d("kungfu_raft_applied_commands_total"),
                    d("kungfu_raft_apply_batches_total"),
                ),
                log_syncs_per_sec: d("kungfu_raft_log_syncs_total") / elapsed.max(1e-9),
                snapshots_built: d("kungfu_raft_snapshots_built_total"),
                snapshot_build_ms: d(SNAPSHOT_SECONDS) * 1000.0,
            });
        }
        Work {
            server_cpu_us_per_op: servers.and_then(|s| per(s, calls)),
            client_cpu_us_per_op: client.and_then(|c| per(c, calls)),
            write_path,
        }
    }
}

fn round(v: Option<f64>) -> Value {
    v.map_or(Value::Null, |v| json!((v * 10.0).round() / 10.0))
}

impl Work {
    /// `{server_cpu_us_per_op, client_cpu_us_per_op, write_path?}`.
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "server_cpu_us_per_op": round(self.server_cpu_us_per_op),
            "client_cpu_us_per_op": round(self.client_cpu_us_per_op),
        });
        if let (Some(w), Value::Object(map)) = (&self.write_path, &mut v) {
            map.insert(
                "write_path".into(),
                json!({
                    "entries_per_append": round(w.entries_per_append),
                    "entries_per_append_rpc": round(w.entries_per_append_rpc),
                    "commands_per_apply_batch": round(w.commands_per_apply_batch),
                    "log_syncs_per_sec": round(Some(w.log_syncs_per_sec)),
                    "snapshots_built": w.snapshots_built,
                    "snapshot_build_ms": w.snapshot_build_ms,
                }),
            );
        }
        v
    }

    /// `server/client` CPU µs per call, for tables.
    pub fn cpu_text(&self) -> String {
        let t = |v: Option<f64>| v.map_or_else(|| "?".to_string(), |v| format!("{v:.0}"));
        format!("{}/{}", t(self.server_cpu_us_per_op), t(self.client_cpu_us_per_op))
    }

    /// `append/rpc/apply` entries (commands for apply) per batch, fsyncs/s, snapshots and their ms.
    pub fn batch_text(&self) -> String {
        let Some(w) = &self.write_path else { return "n/a".to_string() };
        let t = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.1}"));
        format!(
            "{}/{}/{} · {:.0} fsync/s · {} snap {:.0} ms",
            t(w.entries_per_append),
            t(w.entries_per_append_rpc),
            t(w.commands_per_apply_batch),
            w.log_syncs_per_sec,
            w.snapshots_built,
            w.snapshot_build_ms
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_is_read_after_a_command_name_with_spaces_and_parentheses() {
        // utime 250 ticks, stime 50: 3 s.
        let stat = "4242 (kung fu) (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 100 0 0";
        assert_eq!(parse_cpu_micros(stat), Some(3_000_000));
        assert_eq!(parse_cpu_micros("4242 (short) S 1"), None);
        assert!(cpu_micros(std::process::id()).is_some(), "this process's own stat is readable");
    }

    #[test]
    fn only_unlabelled_raft_counters_are_read_from_a_metrics_page() {
        let page = "# HELP kungfu_raft_log_appends_total Appends.\n\
                    # TYPE kungfu_raft_log_appends_total counter\n\
                    kungfu_raft_log_appends_total 17\n\
                    kungfu_raft_rpc_failures_total{peer=\"2\"} 3\n\
                    kungfu_raft_term 4\n\
                    kungfu_actions_total 9\n\
                    kungfu_raft_log_syncs_total 2.5e3\n\
                    kungfu_raft_snapshot_build_seconds 0.25\n";
        let got = parse_counters(page);
        assert_eq!(
            got.into_iter().collect::<Vec<_>>(),
            vec![
                ("kungfu_raft_log_appends_total".to_string(), 17.0),
                ("kungfu_raft_log_syncs_total".to_string(), 2500.0),
                ("kungfu_raft_snapshot_build_seconds".to_string(), 0.25),
            ]
        );
    }
}
