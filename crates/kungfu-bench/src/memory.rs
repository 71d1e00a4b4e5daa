//! The memory of a server process, read from `/proc/PID/status`: what it holds now (`VmRSS`) and
//! the most it has held since it started (`VmHWM`, its high-water mark).

use serde_json::{Value, json};

/// One process's resident memory, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rss {
    /// `VmRSS`: resident now.
    pub now_bytes: u64,
    /// `VmHWM`: the peak resident size since the process started.
    pub peak_bytes: u64,
}

impl Rss {
    /// Reads process `pid`'s memory; None when it is gone or `/proc` says nothing.
    pub fn of(pid: u32) -> Option<Rss> {
        Rss::parse(&std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
    }

    /// The memory in the text of a `/proc/PID/status` file.
    pub fn parse(status: &str) -> Option<Rss> {
        let kib = |field: &str| -> Option<u64> {
            let line = status.lines().find(|l| l.starts_with(field))?;
            line[field.len()..].split_whitespace().next()?.parse::<u64>().ok().map(|k| k * 1024)
        };
        Some(Rss { now_bytes: kib("VmRSS:")?, peak_bytes: kib("VmHWM:")? })
    }

    /// `now/peak` in MiB, rounded, for tables.
    pub fn text(&self) -> String {
        format!("{}/{}", mib(self.now_bytes), mib(self.peak_bytes))
    }
}

fn mib(bytes: u64) -> u64 {
    (bytes + (1 << 19)) >> 20
}

/// Every process of one system, sampled now: `(node, pid)` pairs as JSON
/// `[{node, pid, rss_bytes, peak_rss_bytes}]` (null figures for a process that is gone), and the
/// table's text, `now/peak` MiB per process in node order.
pub fn sample(pids: &[(u16, u32)]) -> (Value, String) {
    let mut all = Vec::new();
    let mut text = Vec::new();
    for (node, pid) in pids {
        let rss = Rss::of(*pid);
        all.push(json!({
            "node": node,
            "pid": pid,
            "rss_bytes": rss.map(|r| r.now_bytes),
            "peak_rss_bytes": rss.map(|r| r.peak_bytes),
        }));
        text.push(rss.map_or_else(|| "?".to_string(), |r| r.text()));
    }
    (Value::Array(all), text.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rss_and_its_peak_are_read_from_proc_status_in_kib() {
        let status = "Name:\tkungfud\nVmPeak:\t 2000000 kB\nVmHWM:\t   81920 kB\nVmRSS:\t   40960 kB\n";
        let rss = Rss::parse(status).expect("both fields");
        assert_eq!(rss, Rss { now_bytes: 40 << 20, peak_bytes: 80 << 20 });
        assert_eq!(rss.text(), "40/80");
        assert_eq!(Rss::parse("Name:\tx\nVmRSS:\t1 kB\n"), None, "no VmHWM");
    }

    #[test]
    fn this_process_has_memory_and_a_gone_one_has_none() {
        let me = Rss::of(std::process::id()).expect("our own /proc/PID/status");
        assert!(me.now_bytes > 0 && me.peak_bytes >= me.now_bytes, "{me:?}");
        let (json, text) = sample(&[(1, std::process::id()), (2, u32::MAX)]);
        assert!(json[0]["rss_bytes"].as_u64().is_some_and(|b| b > 0), "{json}");
        assert!(json[1]["rss_bytes"].is_null(), "{json}");
        assert!(text.ends_with(" ?"), "{text}");
    }
}
