//! The etcd side of `kungfu bench compare`: a fresh local etcd cluster on loopback, started from
//! an `etcd` binary (etcd 3.4's flags, Debian's `etcd-server`), in a new directory of its own
//! beside the Kungfu cluster's, killed and removed when the [`EtcdCluster`] is dropped — at the
//! end of the run, on an error, and when the run is interrupted, like [`super::cluster::Cluster`].
//!
//! The client is generated from `proto/etcd/etcdserverpb.proto` (build.rs): the subset of etcd's
//! v3 API the bench calls, wire-compatible with etcd's own. The `etcd-client` crate speaks tonic
//! 0.14 too, but its build script runs a system `protoc`, which this project does not require.

use super::cluster::{ports, run_dir, spawn_logged, tail};
use super::progress;
use crate::args::BenchFiles;
use kungfu_cli::error::CliError;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use tonic::transport::{Channel, Endpoint};

/// The generated etcd v3 client and messages (`etcdserverpb`).
#[allow(clippy::all, clippy::pedantic, missing_debug_implementations, unreachable_pub)]
pub mod pb {
    tonic::include_proto!("etcdserverpb");
}

/// How long a fresh etcd cluster may take until every member knows one leader that serves.
pub const READY_BOUND: Duration = Duration::from_secs(30);

/// The deadline of each call the readiness poll makes.
const POLL_CALL_TIMEOUT: Duration = Duration::from_secs(1);

/// Where the `etcd` binary is, or why there is none to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// The binary to run.
    At(PathBuf),
    /// No binary, and none required: the sentence the output shows instead of etcd's figures.
    Missing(String),
}

/// Finds `etcd`: `--etcd PATH` when given (it must exist), else `etcd` in the directories of
/// `path_var` (the value of `PATH`). With `required` (`--against etcd`), a missing binary is an
/// error naming the flags that fix it.
pub fn find_etcd(flag: Option<&str>, required: bool, path_var: Option<OsString>) -> Result<Found, CliError> {
    if let Some(given) = flag.filter(|f| !f.is_empty()) {
        let path = PathBuf::from(given);
        if path.is_file() {
            return Ok(Found::At(path));
        }
        return Err(CliError::usage(format!("--etcd {given}: no such file")));
    }
    match super::on_path("etcd", path_var) {
        Some(path) => Ok(Found::At(path)),
        None if required => Err(CliError::usage(
            "--against etcd: no `etcd` binary on PATH; install etcd 3.4 (Debian: apt-get install etcd-server) \
             or pass --etcd PATH",
        )),
        None => Ok(Found::Missing(
            "no `etcd` binary on PATH (Debian: apt-get install etcd-server; or pass --etcd PATH, or \
             --against etcd to require it)"
                .to_string(),
        )),
    }
}

/// One member's name, data directory and URLs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSpec {
    pub name: String,
    pub data_dir: PathBuf,
    /// Where clients connect: `http://127.0.0.1:PORT`.
    pub client_url: String,
    /// Where the other members connect: `http://127.0.0.1:PORT`.
    pub peer_url: String,
}

/// The arguments that start `member` of the new cluster `all` (etcd 3.4's flags); every other
/// setting is etcd's default (heartbeat 100 ms, election 1 s, the WAL synced before an answer).
pub fn command_line(member: &MemberSpec, all: &[MemberSpec], token: &str) -> Vec<String> {
    let initial: Vec<String> = all.iter().map(|m| format!("{}={}", m.name, m.peer_url)).collect();
    vec![
        "--name".into(),
        member.name.clone(),
        "--data-dir".into(),
        member.data_dir.display().to_string(),
        "--listen-client-urls".into(),
        member.client_url.clone(),
        "--advertise-client-urls".into(),
        member.client_url.clone(),
        "--listen-peer-urls".into(),
        member.peer_url.clone(),
        "--initial-advertise-peer-urls".into(),
        member.peer_url.clone(),
        "--initial-cluster".into(),
        initial.join(","),
        "--initial-cluster-state".into(),
        "new".into(),
        "--initial-cluster-token".into(),
        token.to_string(),
    ]
}

/// One running member.
#[derive(Debug)]
struct Member {
    spec: MemberSpec,
    log: PathBuf,
    child: Option<Child>,
}

/// A running local etcd cluster. Dropping it kills every member and removes its directory
/// (unless kept).
#[derive(Debug)]
pub struct EtcdCluster {
    dir: PathBuf,
    members: Vec<Member>,
    keep: bool,
}

impl EtcdCluster {
    /// Starts `count` members in a new directory under `--data-dir` (or the temporary directory)
    /// and waits (at most [`READY_BOUND`]) until every member knows one leader and it answers a
    /// linearizable read; returns the cluster and the index of the leading member.
    pub async fn start(binary: &Path, count: u16, files: &BenchFiles) -> Result<(EtcdCluster, usize), CliError> {
        progress(format!("starting {count} etcd member(s)"));
        let started = Instant::now();
        let (dir, tag) = run_dir(files, "etcd-bench")?;
        // From here on, dropping `cluster` removes the directory and kills what started.
        let mut cluster = EtcdCluster { dir, members: Vec::new(), keep: files.keep };
        let specs: Vec<MemberSpec> = ports(count, None)?
            .into_iter()
            .zip(1..)
            .map(|((client, peer), i)| MemberSpec {
                name: format!("etcd{i}"),
                data_dir: cluster.dir.join(format!("etcd{i}")),
                client_url: format!("http://127.0.0.1:{client}"),
                peer_url: format!("http://127.0.0.1:{peer}"),
            })
            .collect();
        let token = format!("kungfu-bench-{}", &tag[4..12]);
        for spec in &specs {
            let log = cluster.dir.join(format!("{}.log", spec.name));
            let mut command = Command::new(binary);
            command.args(command_line(spec, &specs, &token)).current_dir(&cluster.dir);
            let child = spawn_logged(command, &log)?;
            cluster.members.push(Member { spec: spec.clone(), log, child: Some(child) });
        }
        let leader = cluster.wait_ready(READY_BOUND).await?;
        progress(format!(
            "{count} etcd member(s) up in {:.1} s, {} leads; files in {}",
            started.elapsed().as_secs_f64(),
            cluster.members[leader].spec.name,
            cluster.dir.display()
        ));
        Ok((cluster, leader))
    }

    /// The client URL of member `i`.
    pub fn client_url(&self, i: usize) -> Option<&str> {
        self.members.get(i).map(|m| m.spec.client_url.as_str())
    }

    /// The process id of every running member, numbered from 1 like the Kungfu nodes.
    pub fn pids(&self) -> Vec<(u16, u32)> {
        self.members.iter().zip(1..).filter_map(|(m, n)| m.child.as_ref().map(|c| (n, c.id()))).collect()
    }

    /// An error when a member has exited, naming it and showing the end of its log.
    fn check_running(&mut self) -> Result<(), CliError> {
        for m in &mut self.members {
            let Some(child) = m.child.as_mut() else { continue };
            if let Ok(Some(status)) = child.try_wait() {
                m.child = None;
                return Err(CliError::other(format!(
                    "etcd member {} exited ({status}); its log ({}) ends:\n{}",
                    m.spec.name,
                    m.log.display(),
                    tail(&m.log, 15)
                )));
            }
        }
        Ok(())
    }

    /// Polls every member's `Maintenance/Status` until all name the same leader, then reads once
    /// from that leader (linearizable); returns the leader's index.
    async fn wait_ready(&mut self, bound: Duration) -> Result<usize, CliError> {
        let start = Instant::now();
        let mut channels = Vec::new();
        for m in &self.members {
            channels.push(channel(&m.spec.client_url, POLL_CALL_TIMEOUT, false).await?);
        }
        loop {
            self.check_running()?;
            if let Some(leader) = agreed_leader(&channels).await {
                let mut kv = pb::kv_client::KvClient::new(channels[leader].clone());
                let read = pb::RangeRequest { key: b"kungfu-bench/ready".to_vec(), ..Default::default() };
                if kv.range(read).await.is_ok() {
                    return Ok(leader);
                }
            }
            if start.elapsed() > bound {
                let logs: Vec<String> = self.members.iter().map(|m| m.log.display().to_string()).collect();
                return Err(CliError::other(format!(
                    "the etcd cluster did not agree on a leader that serves within {}s; see the logs ({}){}",
                    bound.as_secs(),
                    logs.join(", "),
                    if self.keep { "" } else { " (pass --keep to keep them)" }
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The index of the member every member names as leader, if they all answer and agree.
async fn agreed_leader(channels: &[Channel]) -> Option<usize> {
    let mut ids = Vec::new();
    let mut leaders = Vec::new();
    for ch in channels {
        let mut m = pb::maintenance_client::MaintenanceClient::new(ch.clone());
        let s = m.status(pb::StatusRequest {}).await.ok()?.into_inner();
        ids.push(s.header.map(|h| h.member_id)?);
        leaders.push(s.leader);
    }
    let first = *leaders.first()?;
    if first == 0 || leaders.iter().any(|l| *l != first) {
        return None;
    }
    ids.iter().position(|id| *id == first)
}

/// A channel to `url` with a deadline of `timeout` on every call: one HTTP/2 connection, opened
/// now with `eager`, else on first use.
pub async fn channel(url: &str, timeout: Duration, eager: bool) -> Result<Channel, CliError> {
    let endpoint = Endpoint::from_shared(url.to_string())
        .map_err(|e| CliError::other(format!("bad etcd URL {url}: {e}")))?
        .connect_timeout(Duration::from_secs(2))
        .timeout(timeout);
    if eager {
        endpoint.connect().await.map_err(|e| CliError::other(format!("cannot connect to etcd at {url}: {e}")))
    } else {
        Ok(endpoint.connect_lazy())
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for m in &mut self.members {
            if let Some(mut child) = m.child.take() {
                // Gone already is fine: all that matters is that nothing is left running.
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if self.keep {
            progress(format!("kept etcd's data and logs in {}", self.dir.display()));
        } else if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            progress(format!("could not remove {}: {e}", self.dir.display()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(i: u16) -> MemberSpec {
        MemberSpec {
            name: format!("etcd{i}"),
            data_dir: PathBuf::from(format!("/run/b/etcd{i}")),
            client_url: format!("http://127.0.0.1:{}", 2000 + i),
            peer_url: format!("http://127.0.0.1:{}", 3000 + i),
        }
    }

    /// The value after `flag` in `args`.
    fn value<'a>(args: &'a [String], flag: &str) -> &'a str {
        let i = args.iter().position(|a| a == flag).unwrap_or_else(|| panic!("{flag} missing in {args:?}"));
        &args[i + 1]
    }

    #[test]
    fn the_etcd_command_line_names_every_member_of_a_new_cluster() {
        let all: Vec<MemberSpec> = (1..=3).map(spec).collect();
        let args = command_line(&all[1], &all, "tok-1");
        assert_eq!(value(&args, "--name"), "etcd2");
        assert_eq!(value(&args, "--data-dir"), "/run/b/etcd2");
        assert_eq!(value(&args, "--listen-client-urls"), "http://127.0.0.1:2002");
        assert_eq!(value(&args, "--advertise-client-urls"), "http://127.0.0.1:2002");
        assert_eq!(value(&args, "--listen-peer-urls"), "http://127.0.0.1:3002");
        assert_eq!(value(&args, "--initial-advertise-peer-urls"), "http://127.0.0.1:3002");
        assert_eq!(
            value(&args, "--initial-cluster"),
            "etcd1=http://127.0.0.1:3001,etcd2=http://127.0.0.1:3002,etcd3=http://127.0.0.1:3003"
        );
        assert_eq!(value(&args, "--initial-cluster-state"), "new");
        assert_eq!(value(&args, "--initial-cluster-token"), "tok-1");
        assert_eq!(args.len(), 18, "nine flags, each with its value: {args:?}");
    }

    #[test]
    fn a_single_member_cluster_names_only_itself() {
        let one = vec![spec(1)];
        assert_eq!(value(&command_line(&one[0], &one, "t"), "--initial-cluster"), "etcd1=http://127.0.0.1:3001");
    }

    #[test]
    fn etcd_is_found_by_flag_or_path_and_its_absence_is_explained() {
        let dir = tempfile::tempdir().expect("tempdir");
        let none = Some(OsString::from(dir.path()));
        match find_etcd(None, false, none.clone()).expect("not required") {
            Found::Missing(why) => assert!(why.contains("etcd-server") && why.contains("--etcd"), "{why}"),
            other => panic!("found {other:?}"),
        }
        let err = find_etcd(None, true, none.clone()).expect_err("required");
        assert!(err.message.starts_with("--against etcd:"), "{}", err.message);
        let err = find_etcd(Some("/no/such/etcd"), false, none.clone()).expect_err("a missing --etcd");
        assert_eq!(err.message, "--etcd /no/such/etcd: no such file");

        let bin = dir.path().join("etcd");
        std::fs::write(&bin, b"").expect("write");
        assert_eq!(find_etcd(None, true, none).expect("on PATH"), Found::At(bin.clone()));
        let flag = bin.display().to_string();
        assert_eq!(find_etcd(Some(&flag), true, None).expect("by flag"), Found::At(bin));
    }
}
