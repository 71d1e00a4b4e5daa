//! A real cluster of `kungfud` processes for a chaos run.
//!
//! Two network modes:
//! - [`NetMode::Netns`] (root): one network namespace per node (`kfj<s>-n<i>`), each with a veth
//!   on the bridge `kfjbr<s>` in 10.88.`s`.0/24; node `i` is 10.88.`s`.`i`, the harness (clients
//!   and nemesis) is 10.88.`s`.254 in the root namespace. `s` is the run's slot: a run claims a
//!   free slot (a pid file under `/run/kungfu-jepsen`), so runs on one machine (a soak and a CI
//!   run) never share a namespace. Partitions are iptables rules inside the namespaces, so they
//!   cut exactly the links named and nothing on the host.
//! - [`NetMode::Loopback`] (no privileges): every node on 127.0.0.1; each node dials each peer's
//!   raft port through its own proxy link ([`crate::proxy`]), so partitions cut directed links.
//!
//! Each node may run under libfaketime (a per-node skew file the clock nemesis rewrites while the
//! node runs) and libfiu (`fiu-run -x`, so the disk nemesis can make fsync fail at run time), with
//! its data directory on a small loop-mounted ext4 (the ENOSPC nemesis fills it).
//!
//! Everything this module makes carries the `kfj` prefix, and [`cleanup`] removes all of it, also
//! after a crash of the harness.

use anyhow::{Context, Result, anyhow, bail};
use kungfu_client::{Client, ClientOptions, pb};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The operator token of harness clusters (status and digest calls).
pub const OPERATOR_TOKEN: &str = "kungfu-jepsen-operator";
/// Where runs claim their slots (one pid file per slot in use).
const SLOTS: &str = "/run/kungfu-jepsen";
const API_PORT: u16 = 7400;
const RAFT_PORT: u16 = 7500;
/// Where a node serves Prometheus metrics in netns mode (its own address; in loopback mode nodes
/// serve none, as they share one address), so an operator or the soak can watch a run.
const METRICS_PORT: u16 = 9400;

/// The config line that serves a node's metrics, or none (loopback).
fn metrics_line(net: NetMode, slot: u32, id: u64) -> String {
    match net {
        NetMode::Netns => format!("metrics_listen = \"{}:{METRICS_PORT}\"\n", node_ip(slot, id)),
        NetMode::Loopback => String::new(),
    }
}

/// How the nodes are networked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetMode {
    Netns,
    Loopback,
}

impl std::str::FromStr for NetMode {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<NetMode> {
        match s {
            "netns" => Ok(NetMode::Netns),
            "loopback" => Ok(NetMode::Loopback),
            other => bail!("--net must be netns or loopback, not {other:?}"),
        }
    }
}

/// What to start.
#[derive(Debug, Clone)]
pub struct ClusterOpts {
    pub nodes: u64,
    /// The `kungfud` binary.
    pub server: PathBuf,
    /// The run directory: configs, data, logs and skew files go under it.
    pub dir: PathBuf,
    pub net: NetMode,
    /// Run every node under libfaketime with a skew file (clock nemesis).
    pub faketime: bool,
    /// Run every node under `fiu-run -x` (fsync fault nemesis).
    pub fiu: bool,
    /// Put each data directory on a loop-mounted ext4 of this many MiB (ENOSPC nemesis).
    pub disk_mib: Option<u64>,
    /// Extra settings appended to every node's config (TOML; `[section]`s allowed).
    pub settings: String,
    /// Environment for the server processes (e.g. `KUNGFU_CANARY`).
    pub env: Vec<(String, String)>,
}

/// One node process.
#[derive(Debug)]
pub struct Node {
    pub id: u64,
    /// Its namespace in netns mode.
    pub ns: Option<String>,
    /// Where clients reach its public API.
    pub api: SocketAddr,
    pub raft: SocketAddr,
    pub config: PathBuf,
    pub data: PathBuf,
    pub log: PathBuf,
    /// libfaketime's timestamp file (`+0`, `+5s`, `-3s`).
    pub skew_file: PathBuf,
    child: Option<Child>,
    paused: bool,
    /// The loop device backing the data directory, if any.
    loop_dev: Option<String>,
}

impl Node {
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }
    pub fn running(&self) -> bool {
        self.child.is_some()
    }
    pub fn paused(&self) -> bool {
        self.paused
    }
}

/// A running cluster; dropping it stops every process and removes namespaces and mounts.
#[derive(Debug)]
pub struct Cluster {
    pub opts: ClusterOpts,
    pub nodes: BTreeMap<u64, Node>,
    /// Loopback mode: the proxy that carries raft traffic between nodes.
    pub proxy: Option<crate::proxy::Proxy>,
    /// Netns mode: this run's slot (names and subnet).
    pub slot: u32,
    /// Ids of nodes removed from the membership (never reused).
    pub retired: Vec<u64>,
    /// Stretches of node logs in which a corruption message is the expected, fail-closed answer
    /// to a fault the nemesis injected (`flip-table`): the crash check excuses those lines there.
    pub excused: Vec<LogWindow>,
}

/// Bytes `from..to` of node `node`'s `server.log`: what the node logged between a `flip-table`
/// fault and the end of its repair (or of the check that found it whole).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct LogWindow {
    pub node: u64,
    pub from: u64,
    pub to: u64,
}

/// Whether process `pid` is alive.
fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Claims the lowest free slot (1..=250) for this process.
fn claim_slot() -> Result<u32> {
    std::fs::create_dir_all(SLOTS)?;
    for slot in 1..=250u32 {
        let file = Path::new(SLOTS).join(slot.to_string());
        let taken = std::fs::read_to_string(&file).ok().and_then(|p| p.trim().parse::<u32>().ok()).is_some_and(alive);
        if !taken {
            std::fs::write(&file, std::process::id().to_string())?;
            return Ok(slot);
        }
    }
    bail!("no free network slot: 250 runs are active on this machine")
}

/// The namespace of node `id` in slot `slot`.
pub fn ns_name(slot: u32, id: u64) -> String {
    format!("kfj{slot}-n{id}")
}

/// The address of node `id` in slot `slot`.
pub fn node_ip(slot: u32, id: u64) -> String {
    format!("10.88.{slot}.{id}")
}

fn run(cmd: &mut Command) -> Result<()> {
    let out = cmd.stdin(Stdio::null()).output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

fn ip(args: &[&str]) -> Result<()> {
    run(Command::new("ip").args(args))
}

/// Runs `args` inside namespace `ns`.
pub fn in_ns(ns: &str, args: &[&str]) -> Result<()> {
    run(Command::new("ip").args(["netns", "exec", ns]).args(args))
}

/// Whether this process may create network namespaces (root with iproute2).
pub fn netns_available() -> bool {
    let probe = "kungfu-jepsen-probe";
    let ok = Command::new("ip").args(["netns", "add", probe]).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    if ok {
        let _ = Command::new("ip").args(["netns", "del", probe]).status();
    }
    ok
}

/// Removes everything runs of dead processes left: their namespaces (and the processes inside),
/// bridges, slot files, loop mounts and kungfud processes under `store`. With `all`, also those of
/// live runs. Safe to run at any time; never fails on what is already gone.
pub fn cleanup(store: &Path, all: bool) -> Vec<String> {
    let mut done = Vec::new();
    let live_slot = |slot: u32| -> bool {
        !all && std::fs::read_to_string(Path::new(SLOTS).join(slot.to_string()))
            .ok()
            .and_then(|p| p.trim().parse::<u32>().ok())
            .is_some_and(|pid| pid != std::process::id() && alive(pid))
    };
    let slot_of =
        |name: &str, prefix: &str| -> Option<u32> { name.strip_prefix(prefix)?.split('-').next()?.parse().ok() };
    if let Ok(out) = Command::new("ip").args(["netns", "list"]).output() {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            let Some(slot) = slot_of(name, "kfj") else { continue };
            if live_slot(slot) {
                continue;
            }
            if let Ok(pids) = Command::new("ip").args(["netns", "pids", name]).output() {
                for pid in String::from_utf8_lossy(&pids.stdout).split_whitespace() {
                    let _ = Command::new("kill").args(["-CONT", pid]).status();
                    let _ = Command::new("kill").args(["-KILL", pid]).status();
                    done.push(format!("killed pid {pid} in {name}"));
                }
            }
            let _ = Command::new("ip").args(["netns", "del", name]).status();
            done.push(format!("deleted namespace {name}"));
        }
    }
    if let Ok(out) = Command::new("ip").args(["-o", "link", "show"]).output() {
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let name = line.split(':').nth(1).map(str::trim).unwrap_or("");
            let name = name.split('@').next().unwrap_or(name);
            // A root-side veth `kfj<s>v<i>` whose namespace is gone.
            if let Some(slot) =
                name.strip_prefix("kfj").and_then(|r| r.split('v').next()).and_then(|d| d.parse::<u32>().ok())
            {
                if !live_slot(slot) {
                    let _ = Command::new("ip").args(["link", "del", name]).status();
                    done.push(format!("deleted link {name}"));
                }
                continue;
            }
            let Some(slot) = slot_of(name, "kfjbr") else { continue };
            if live_slot(slot) {
                continue;
            }
            let _ = Command::new("ip").args(["link", "del", name]).status();
            let _ = std::fs::remove_file(Path::new(SLOTS).join(slot.to_string()));
            done.push(format!("deleted bridge {name}"));
        }
    }
    // Leftover processes of loopback runs: kungfud whose config lies under the store.
    if all {
        if let Ok(out) = Command::new("pgrep").args(["-f", &format!("kungfud.*{}", store.display())]).output() {
            for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                let _ = Command::new("kill").args(["-CONT", pid]).status();
                let _ = Command::new("kill").args(["-KILL", pid]).status();
                done.push(format!("killed kungfud pid {pid}"));
            }
        }
    }
    // Loop mounts under the store.
    if let Ok(mounts) = std::fs::read_to_string("/proc/mounts") {
        for line in mounts.lines() {
            let mut f = line.split_whitespace();
            let (dev, at) = (f.next().unwrap_or(""), f.next().unwrap_or(""));
            let ours = at.starts_with(&store.display().to_string()) && dev.starts_with("/dev/loop");
            // A mount a live node still uses stays.
            if ours && (all || orphaned(at)) {
                let _ = Command::new("umount").args(["-l", at]).status();
                let _ = Command::new("losetup").args(["-d", dev]).status();
                done.push(format!("unmounted {at} ({dev})"));
            }
        }
    }
    done
}

/// Whether no running process has a file open under `dir` (its run is gone).
fn orphaned(dir: &str) -> bool {
    let Ok(procs) = std::fs::read_dir("/proc") else { return true };
    for p in procs.flatten() {
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else { continue };
        for fd in fds.flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|t| t.starts_with(dir)) {
                return false;
            }
        }
    }
    true
}

impl Cluster {
    /// Creates the network, writes the configs and starts every node; returns once a leader serves
    /// and every node applied the same index (bounded).
    pub async fn start(opts: ClusterOpts) -> Result<Cluster> {
        std::fs::create_dir_all(&opts.dir).with_context(|| format!("creating {}", opts.dir.display()))?;
        let n = opts.nodes;
        let slot = if opts.net == NetMode::Netns {
            let slot = claim_slot()?;
            setup_netns(slot, n)?;
            slot
        } else {
            0
        };
        let mut addrs = BTreeMap::new();
        for id in 1..=n {
            let (api, raft) = match opts.net {
                NetMode::Netns => (
                    format!("{}:{API_PORT}", node_ip(slot, id)).parse::<SocketAddr>()?,
                    format!("{}:{RAFT_PORT}", node_ip(slot, id)).parse::<SocketAddr>()?,
                ),
                NetMode::Loopback => (free_addr()?, free_addr()?),
            };
            addrs.insert(id, (api, raft));
        }
        let proxy = match opts.net {
            NetMode::Loopback => {
                Some(crate::proxy::Proxy::start(&addrs.iter().map(|(i, (_, r))| (*i, *r)).collect()).await?)
            }
            NetMode::Netns => None,
        };
        let mut nodes = BTreeMap::new();
        for id in 1..=n {
            let (api, raft) = addrs[&id];
            let dir = opts.dir.join(format!("n{id}"));
            // With a disk nemesis the data directory lives on its own small filesystem (inside
            // it: a fresh ext4's root holds `lost+found`, and a data directory must start empty).
            let (data, loop_dev) = match opts.disk_mib {
                Some(mib) => {
                    let mount = dir.join("disk");
                    std::fs::create_dir_all(&mount)?;
                    let dev = mount_loop(&dir.join("disk.img"), &mount, mib)?;
                    (mount.join("data"), Some(dev))
                }
                None => (dir.join("data"), None),
            };
            std::fs::create_dir_all(&data)?;
            let skew_file = dir.join("skew");
            std::fs::write(&skew_file, "+0\n")?;
            let mut peers = String::new();
            let mut dial = String::new();
            for (pid, (papi, praft)) in &addrs {
                peers.push_str(&format!("\n[[peers]]\nid = {pid}\nraft = \"{praft}\"\napi = \"{papi}\"\n"));
                // Loopback: node `id` reaches peer `pid` through its own proxy link.
                if let (Some(p), true) = (&proxy, *pid != id) {
                    dial.push_str(&format!("\"{pid}\" = \"{}\"\n", p.link_addr(id, *pid)));
                }
            }
            if !dial.is_empty() {
                dial = format!("\n[raft.dial]\n{dial}");
            }
            let config = dir.join("node.toml");
            let text = format!(
                "node_id = {id}\ncluster_id = \"jepsen\"\ndata_dir = \"{}\"\napi_listen = \"{api}\"\nraft_listen = \"{raft}\"\nbootstrap = true\noperator_token = \"{OPERATOR_TOKEN}\"\n{}{}\n{}\n{dial}{peers}",
                data.display(),
                metrics_line(opts.net, slot, id),
                RAFT_AND_LIMITS,
                opts.settings,
            );
            std::fs::write(&config, text)?;
            let ns = (opts.net == NetMode::Netns).then(|| ns_name(slot, id));
            let node = Node {
                id,
                ns,
                api,
                raft,
                config,
                data,
                log: dir.join("server.log"),
                skew_file,
                child: None,
                paused: false,
                loop_dev,
            };
            nodes.insert(id, node);
        }
        let mut cluster = Cluster { opts, nodes, proxy, slot, retired: Vec::new(), excused: Vec::new() };
        for id in 1..=n {
            cluster.start_node(id)?;
        }
        cluster.wait_healthy(Duration::from_secs(60)).await?;
        Ok(cluster)
    }

    /// Adds a fresh node (a new id, never one used before) to the cluster: its namespace, an empty
    /// data directory, `bootstrap = false`; then, through the leader, adds it as a learner (which
    /// waits until it caught up) and makes it a voter. Netns mode only. Returns its id.
    pub async fn add_voter(&mut self) -> Result<u64> {
        if self.opts.net != NetMode::Netns {
            bail!("adding nodes is supported in netns mode only");
        }
        let id = self.nodes.keys().max().copied().unwrap_or(0).max(self.retired.iter().copied().max().unwrap_or(0)) + 1;
        let slot = self.slot;
        let ns = ns_name(slot, id);
        let veth = format!("kfj{slot}v{id}");
        ip(&["netns", "add", &ns])?;
        ip(&["link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns])?;
        ip(&["link", "set", &veth, "master", &format!("kfjbr{slot}")])?;
        ip(&["link", "set", &veth, "up"])?;
        ip(&["-n", &ns, "addr", "add", &format!("{}/24", node_ip(slot, id)), "dev", "eth0"])?;
        ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
        ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        let api: SocketAddr = format!("{}:{API_PORT}", node_ip(slot, id)).parse()?;
        let raft: SocketAddr = format!("{}:{RAFT_PORT}", node_ip(slot, id)).parse()?;
        let dir = self.opts.dir.join(format!("n{id}"));
        let data = dir.join("data");
        std::fs::create_dir_all(&data)?;
        let skew_file = dir.join("skew");
        std::fs::write(&skew_file, "+0\n")?;
        let config = dir.join("node.toml");
        std::fs::write(
            &config,
            format!(
                "node_id = {id}\ncluster_id = \"jepsen\"\ndata_dir = \"{}\"\napi_listen = \"{api}\"\nraft_listen = \"{raft}\"\nbootstrap = false\noperator_token = \"{OPERATOR_TOKEN}\"\n{}{}\n{}\n",
                data.display(),
                metrics_line(NetMode::Netns, slot, id),
                RAFT_AND_LIMITS,
                self.opts.settings,
            ),
        )?;
        let node = Node {
            id,
            ns: Some(ns),
            api,
            raft,
            config,
            data,
            log: dir.join("server.log"),
            skew_file,
            child: None,
            paused: false,
            loop_dev: None,
        };
        self.nodes.insert(id, node);
        self.start_node(id)?;
        let admin = self.leader_admin().await?;
        admin
            .add_learner(pb::AddLearnerRequest { node_id: id, raft_addr: raft.to_string(), api_addr: api.to_string() })
            .await?;
        let mut voters: Vec<u64> = self.voters().await;
        voters.push(id);
        admin.change_membership(pb::ChangeMembershipRequest { voters, retain_learners: false }).await?;
        Ok(id)
    }

    /// Removes voter `id` from the membership through the leader, then stops it and forgets it (its
    /// id is retired for good).
    pub async fn remove_voter(&mut self, id: u64) -> Result<()> {
        let admin = self.leader_admin().await?;
        let voters: Vec<u64> = self.voters().await.into_iter().filter(|v| *v != id).collect();
        admin.change_membership(pb::ChangeMembershipRequest { voters, retain_learners: false }).await?;
        self.kill(id)?;
        if let Some(ns) = self.nodes.get(&id).and_then(|n| n.ns.clone()) {
            let _ = Command::new("ip").args(["netns", "del", &ns]).status();
        }
        self.nodes.remove(&id);
        self.retired.push(id);
        Ok(())
    }

    /// The length of node `id`'s log file now (where its next line will start).
    pub fn log_len(&self, id: u64) -> u64 {
        self.nodes.get(&id).and_then(|n| std::fs::metadata(&n.log).ok()).map(|m| m.len()).unwrap_or(0)
    }

    /// After node `id` was started on a data directory the nemesis damaged: waits (within `bound`)
    /// until it is caught up with the leader and computes its state digest (a read of its whole
    /// state, so a flipped table block there is found), or until it shows it cannot serve. `None`
    /// when it serves; else why not: it exited (RocksDB refused to open a store, or it fenced
    /// itself on a read error), it reports a fatal error, its digest read failed on corruption, or
    /// it did not catch up in time.
    pub async fn probe_started(&mut self, id: u64, bound: Duration) -> Result<Option<String>> {
        let start = Instant::now();
        let mut target: Option<u64> = None;
        loop {
            let exited = self.nodes.get_mut(&id).and_then(|n| n.child.as_mut()).map(|c| c.try_wait());
            match exited {
                Some(Ok(Some(status))) => {
                    if let Some(n) = self.nodes.get_mut(&id) {
                        n.child = None;
                        n.paused = false;
                    }
                    return Ok(Some(format!("it exited ({status})")));
                }
                None => return Ok(Some("it is not running".into())),
                _ => {}
            }
            let all = self.statuses().await;
            if target.is_none() {
                let leader = all.iter().find(|s| s.role == pb::RaftRole::Leader as i32 && s.node_id != id);
                target = leader.and_then(|s| s.applied_index);
            }
            if let Some(s) = all.iter().find(|s| s.node_id == id) {
                if !s.fatal_error.is_empty() {
                    return Ok(Some(format!("it reports a fatal error: {}", s.fatal_error)));
                }
                let caught_up = target.is_some() && s.applied_index >= target;
                if caught_up {
                    if let Ok(c) = self.operator(id).await {
                        match c.state_digest(pb::StateDigestRequest {}).await {
                            Ok(_) => return Ok(None),
                            Err(e) if e.to_string().to_lowercase().contains("corrupt") => {
                                return Ok(Some(format!("its state digest failed: {e}")));
                            }
                            Err(_) => {}
                        }
                    }
                }
            }
            if start.elapsed() > bound {
                return Ok(Some(format!("it did not catch up with the leader (applied {target:?}) within {bound:?}")));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// The first step of the operator's wipe and rejoin (docs/operations.md, "Damaged data
    /// directory"): through the leader, the voters without node `id` (it leaves the membership;
    /// its id is not retired: it comes back). Returns the new voters.
    pub async fn remove_member(&mut self, id: u64) -> Result<Vec<u64>> {
        let (admin, voters) = self.leader_without(id).await?;
        let voters: Vec<u64> = voters.into_iter().filter(|v| *v != id).collect();
        admin.change_membership(pb::ChangeMembershipRequest { voters: voters.clone(), retain_learners: false }).await?;
        Ok(voters)
    }

    /// An operator client of the leader as the nodes other than `id` see it (the leader with the
    /// highest term among them: `id` may be empty or damaged and know none), and its voters.
    async fn leader_without(&self, id: u64) -> Result<(Client, Vec<u64>)> {
        let all = self.statuses().await;
        let leader = all
            .iter()
            .filter(|s| s.node_id != id && s.role == pb::RaftRole::Leader as i32)
            .max_by_key(|s| s.term)
            .ok_or_else(|| anyhow!("no leader for a membership change"))?;
        let voters =
            leader.membership.as_ref().map(|m| m.voters.iter().map(|v| v.node_id).collect()).unwrap_or_default();
        let options =
            ClientOptions { max_retries: 3, call_timeout: Duration::from_secs(30), ..ClientOptions::default() };
        let client = Client::connect(vec![self.endpoint(leader.node_id)], Some(OPERATOR_TOKEN.into()), options).await?;
        Ok((client, voters))
    }

    /// Stops node `id`, moves its data directory away (to `data.damaged-<n>` beside its config),
    /// gives it an empty one and sets `bootstrap = false` in its config (an empty node must join,
    /// never initialise a cluster of its own). Returns where the old data went. On a node with a
    /// loop filesystem (the disk nemesis) the old data is deleted instead: it would fill the small
    /// filesystem and cannot be moved off it by a rename.
    pub fn wipe(&mut self, id: u64) -> Result<String> {
        self.kill(id)?;
        let node = self.nodes.get(&id).ok_or_else(|| anyhow!("no node {id}"))?;
        let moved = if node.loop_dev.is_some() {
            std::fs::remove_dir_all(&node.data).with_context(|| format!("removing {}", node.data.display()))?;
            format!("deleted {}", node.data.display())
        } else {
            let parent = node.config.parent().unwrap_or(&node.data).to_path_buf();
            let mut n = 1;
            let to = loop {
                let p = parent.join(format!("data.damaged-{n}"));
                if !p.exists() {
                    break p;
                }
                n += 1;
            };
            std::fs::rename(&node.data, &to)
                .with_context(|| format!("moving {} to {}", node.data.display(), to.display()))?;
            to.display().to_string()
        };
        std::fs::create_dir_all(&node.data)?;
        let config = std::fs::read_to_string(&node.config)?;
        std::fs::write(&node.config, config.replace("\nbootstrap = true\n", "\nbootstrap = false\n"))?;
        Ok(moved)
    }

    /// The last steps of the wipe and rejoin: through the leader, node `id` (running, empty) is
    /// added as a learner with its own id and addresses (the call waits until it caught up), then
    /// made a voter again. Returns the voters.
    pub async fn add_back(&mut self, id: u64) -> Result<Vec<u64>> {
        let node = self.nodes.get(&id).ok_or_else(|| anyhow!("no node {id}"))?;
        let (raft, api) = (node.raft.to_string(), node.api.to_string());
        let (admin, voters) = self.leader_without(id).await?;
        if voters.contains(&id) {
            // A retry after the promotion was committed but its answer lost.
            return Ok(voters);
        }
        admin.add_learner(pb::AddLearnerRequest { node_id: id, raft_addr: raft, api_addr: api }).await?;
        let mut voters = voters;
        voters.push(id);
        voters.sort_unstable();
        admin.change_membership(pb::ChangeMembershipRequest { voters: voters.clone(), retain_learners: false }).await?;
        Ok(voters)
    }

    /// An operator client of the current leader for membership calls (they wait on replication).
    async fn leader_admin(&self) -> Result<Client> {
        let leader = self.leader().await.ok_or_else(|| anyhow!("no leader for a membership change"))?;
        let options =
            ClientOptions { max_retries: 3, call_timeout: Duration::from_secs(30), ..ClientOptions::default() };
        Ok(Client::connect(vec![self.endpoint(leader)], Some(OPERATOR_TOKEN.into()), options).await?)
    }

    /// The voters in the leader's view of the membership.
    pub async fn voters(&self) -> Vec<u64> {
        let all = self.statuses().await;
        let leader = self.leader().await;
        all.iter()
            .find(|s| Some(s.node_id) == leader)
            .and_then(|s| s.membership.as_ref())
            .map(|m| m.voters.iter().map(|v| v.node_id).collect())
            .unwrap_or_else(|| self.ids())
    }

    /// Starts (or restarts) node `id`'s process.
    pub fn start_node(&mut self, id: u64) -> Result<()> {
        let opts = self.opts.clone();
        let node = self.nodes.get_mut(&id).ok_or_else(|| anyhow!("no node {id}"))?;
        if node.child.is_some() {
            return Ok(());
        }
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&node.log)?;
        let mut cmd = match &node.ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]);
                c
            }
            None => Command::new("env"),
        };
        // `ip netns exec` and `env` exec the next program, so the child's pid is kungfud's.
        if node.ns.is_some() {
            cmd.arg("env");
        }
        if opts.faketime {
            cmd.arg(format!("LD_PRELOAD={}", libfaketime()?.display()))
                .arg(format!("FAKETIME_TIMESTAMP_FILE={}", node.skew_file.display()))
                .arg("FAKETIME_NO_CACHE=1")
                .arg("DONT_FAKE_MONOTONIC=1");
        }
        for (k, v) in &opts.env {
            cmd.arg(format!("{k}={v}"));
        }
        cmd.arg("KUNGFU_LOG=info");
        if opts.fiu {
            cmd.args(["fiu-run", "-x"]);
        }
        cmd.arg(&opts.server).arg("--config").arg(&node.config);
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()
            .with_context(|| format!("starting node {id}"))?;
        node.child = Some(child);
        node.paused = false;
        Ok(())
    }

    /// SIGKILL (a crash: nothing flushed that was not synced).
    pub fn kill(&mut self, id: u64) -> Result<()> {
        let node = self.nodes.get_mut(&id).ok_or_else(|| anyhow!("no node {id}"))?;
        if let Some(mut c) = node.child.take() {
            if node.paused {
                let _ = signal(c.id(), "CONT");
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        node.paused = false;
        Ok(())
    }

    /// SIGSTOP: the node stops but its sockets still accept connections (calls hang: `info`).
    pub fn pause(&mut self, id: u64) -> Result<()> {
        let node = self.nodes.get_mut(&id).ok_or_else(|| anyhow!("no node {id}"))?;
        if let (Some(pid), false) = (node.pid(), node.paused) {
            signal(pid, "STOP")?;
            node.paused = true;
        }
        Ok(())
    }

    /// SIGCONT.
    pub fn resume(&mut self, id: u64) -> Result<()> {
        let node = self.nodes.get_mut(&id).ok_or_else(|| anyhow!("no node {id}"))?;
        if let (Some(pid), true) = (node.pid(), node.paused) {
            signal(pid, "CONT")?;
            node.paused = false;
        }
        Ok(())
    }

    /// Sets node `id`'s clock offset (libfaketime reads the file on every call).
    pub fn set_skew(&self, id: u64, offset_secs: i64) -> Result<()> {
        let node = self.nodes.get(&id).ok_or_else(|| anyhow!("no node {id}"))?;
        let text = if offset_secs >= 0 { format!("+{offset_secs}s\n") } else { format!("{offset_secs}s\n") };
        std::fs::write(&node.skew_file, text)?;
        Ok(())
    }

    pub fn ids(&self) -> Vec<u64> {
        self.nodes.keys().copied().collect()
    }

    /// The harness's own address as the nodes see it: the bridge's 10.88.`slot`.254 in netns mode
    /// (the root namespace, where the harness runs), 127.0.0.1 on loopback.
    pub fn harness_ip(&self) -> std::net::IpAddr {
        match self.opts.net {
            NetMode::Netns => std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 88, self.slot as u8, 254)),
            NetMode::Loopback => std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        }
    }

    /// The API endpoint of node `id`, as a client dials it.
    pub fn endpoint(&self, id: u64) -> String {
        self.nodes.get(&id).map(|n| n.api.to_string()).unwrap_or_default()
    }

    /// An operator client of one node, failing fast (no retries).
    pub async fn operator(&self, id: u64) -> Result<Client> {
        let options =
            ClientOptions { max_retries: 0, call_timeout: Duration::from_secs(2), ..ClientOptions::default() };
        Ok(Client::connect(vec![self.endpoint(id)], Some(OPERATOR_TOKEN.into()), options).await?)
    }

    /// Every answering node's status.
    pub async fn statuses(&self) -> Vec<pb::ClusterStatusResponse> {
        let mut out = Vec::new();
        for id in self.ids() {
            if !self.nodes[&id].running() || self.nodes[&id].paused {
                continue;
            }
            if let Ok(c) = self.operator(id).await {
                if let Ok(s) = c.cluster_status(pb::ClusterStatusRequest {}).await {
                    out.push(s);
                }
            }
        }
        out
    }

    /// The leader all running nodes agree on, if any.
    pub async fn leader(&self) -> Option<u64> {
        let all = self.statuses().await;
        let l = all.first()?.leader_id?;
        let agree = all.iter().all(|s| s.leader_id == Some(l));
        let leads = all.iter().any(|s| s.node_id == l && s.role == pb::RaftRole::Leader as i32);
        (agree && leads).then_some(l)
    }

    /// Waits until every node runs, a leader is agreed and every node applied the same index.
    pub async fn wait_healthy(&self, bound: Duration) -> Result<()> {
        let start = Instant::now();
        loop {
            let all = self.statuses().await;
            let applied: Vec<Option<u64>> = all.iter().map(|s| s.applied_index).collect();
            if all.len() == self.nodes.len()
                && self.leader().await.is_some()
                && applied.iter().all(|a| a.is_some() && *a == applied[0])
            {
                return Ok(());
            }
            if start.elapsed() > bound {
                bail!("the cluster did not become healthy within {bound:?}: applied {applied:?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Every node's (applied index, digest), once they all report the same index, or what answered
    /// within `bound`. A digest hashes the whole state, which after an hour of writes takes longer
    /// than the operator's usual two-second calls: each call may take up to two minutes.
    pub async fn digests(&self, bound: Duration) -> Result<BTreeMap<u64, (Option<u64>, String)>> {
        let start = Instant::now();
        let options =
            ClientOptions { max_retries: 0, call_timeout: Duration::from_secs(120), ..ClientOptions::default() };
        loop {
            let mut seen = BTreeMap::new();
            for id in self.ids() {
                let operator = Client::connect(vec![self.endpoint(id)], Some(OPERATOR_TOKEN.into()), options.clone());
                if let Ok(c) = operator.await {
                    if let Ok(d) = c.state_digest(pb::StateDigestRequest {}).await {
                        seen.insert(id, (d.applied_index, d.sha256));
                    }
                }
            }
            let first = seen.values().next().map(|(i, _)| *i);
            if seen.len() == self.nodes.len() && seen.values().all(|(i, _)| Some(*i) == first) {
                return Ok(seen);
            }
            if start.elapsed() > bound {
                return Ok(seen);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Restarts every node that stopped its raft on a storage error (a full disk, a failed fsync:
    /// the node fences itself rather than acknowledge what it could not persist, and waits for an
    /// operator), as a supervisor would. Returns the restarted ids.
    pub async fn restart_fenced(&mut self) -> Result<Vec<u64>> {
        // A fenced node exits a second after it stopped its raft: those already gone first.
        let exited = self.reap_exited();
        for id in &exited {
            self.start_node(*id)?;
        }
        let mut fenced = Vec::new();
        for s in self.statuses().await {
            if !exited.contains(&s.node_id) && (!s.fatal_error.is_empty() || s.role == pb::RaftRole::Shutdown as i32) {
                fenced.push(s.node_id);
            }
        }
        for id in &fenced {
            self.kill(*id)?;
            self.start_node(*id)?;
        }
        fenced.extend(exited);
        fenced.sort_unstable();
        Ok(fenced)
    }

    /// Forgets the processes that exited by themselves (a node that stopped its raft exits for its
    /// supervisor to restart it), so that a heal starts them again; returns their ids.
    pub fn reap_exited(&mut self) -> Vec<u64> {
        let mut exited = Vec::new();
        for (id, node) in self.nodes.iter_mut() {
            if let Some(c) = node.child.as_mut() {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    node.child = None;
                    node.paused = false;
                    exited.push(*id);
                }
            }
        }
        exited
    }

    /// Every node's log text (for the always-on crash check).
    pub fn logs(&self) -> BTreeMap<u64, String> {
        self.nodes.iter().map(|(id, n)| (*id, std::fs::read_to_string(&n.log).unwrap_or_default())).collect()
    }

    /// Fills node `id`'s data filesystem (ENOSPC) with a balloon file.
    pub fn fill_disk(&self, id: u64) -> Result<()> {
        let node = self.nodes.get(&id).ok_or_else(|| anyhow!("no node {id}"))?;
        if node.loop_dev.is_none() {
            bail!("node {id} has no loop filesystem (start the cluster with disk_mib)");
        }
        let out = Command::new("df").args(["--output=avail", "-B1"]).arg(&node.data).output()?;
        let avail =
            String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or("0").trim().parse::<u64>().unwrap_or(0);
        run(Command::new("fallocate").args(["-l", &avail.max(4096).to_string()]).arg(balloon(&node.data)))
            .or_else(|_| Ok::<(), anyhow::Error>(()))?;
        Ok(())
    }

    /// Removes the balloon.
    pub fn free_disk(&self, id: u64) -> Result<()> {
        let node = self.nodes.get(&id).ok_or_else(|| anyhow!("no node {id}"))?;
        let _ = std::fs::remove_file(balloon(&node.data));
        Ok(())
    }

    /// Turns fsync/fdatasync failures on or off in node `id` (needs `fiu`).
    pub fn fsync_faults(&self, id: u64, on: bool) -> Result<()> {
        let node = self.nodes.get(&id).ok_or_else(|| anyhow!("no node {id}"))?;
        let pid = node.pid().ok_or_else(|| anyhow!("node {id} is not running"))?.to_string();
        for point in ["posix/io/sync/fsync", "posix/io/sync/fdatasync"] {
            let cmd = if on { format!("enable name={point}") } else { format!("disable name={point}") };
            run(Command::new("fiu-ctrl").args(["-c", &cmd, &pid]))?;
        }
        Ok(())
    }

    /// Stops every process and removes namespaces and mounts.
    pub fn stop(&mut self) {
        for id in self.ids() {
            let _ = self.kill(id);
        }
        for node in self.nodes.values_mut() {
            if let Some(dev) = node.loop_dev.take() {
                let _ = Command::new("umount").arg("-l").arg(node.data.parent().unwrap_or(&node.data)).status();
                let _ = Command::new("losetup").args(["-d", &dev]).status();
            }
        }
        if self.opts.net == NetMode::Netns {
            let highest = self.nodes.keys().chain(self.retired.iter()).copied().max().unwrap_or(self.opts.nodes);
            teardown_netns(self.slot, highest);
            let _ = std::fs::remove_file(Path::new(SLOTS).join(self.slot.to_string()));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The raft timings and limits of harness clusters: fast elections, no rate limits (the harness
/// measures safety, not admission control), one-second windows allowed.
const RAFT_AND_LIMITS: &str = "[raft]\nheartbeat_ms = 100\nelection_timeout_min_ms = 500\nelection_timeout_max_ms = 1000\n\n[rate_limits]\nwrites_per_second_per_agent = 0\nreads_per_second_per_agent = 0\nregistrations_per_minute_per_ip = 0\n\n[api]\nwrite_timeout_ms = 3000\n";

/// The file that fills a node's filesystem: beside its data directory, on the same mount.
fn balloon(data: &Path) -> PathBuf {
    data.parent().unwrap_or(data).join(".balloon")
}

fn signal(pid: u32, sig: &str) -> Result<()> {
    run(Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()))
}

fn free_addr() -> Result<SocketAddr> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

fn libfaketime() -> Result<PathBuf> {
    for p in [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1",
    ] {
        if Path::new(p).exists() {
            return Ok(PathBuf::from(p));
        }
    }
    bail!("libfaketime.so.1 not found: install the Debian packages faketime and libfaketime")
}

fn setup_netns(slot: u32, n: u64) -> Result<()> {
    teardown_netns(slot, n);
    let bridge = format!("kfjbr{slot}");
    ip(&["link", "add", &bridge, "type", "bridge"])?;
    ip(&["link", "set", &bridge, "up"])?;
    ip(&["addr", "add", &format!("10.88.{slot}.254/24"), "dev", &bridge])?;
    for i in 1..=n {
        let ns = ns_name(slot, i);
        let veth = format!("kfj{slot}v{i}");
        ip(&["netns", "add", &ns])?;
        ip(&["link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns])?;
        ip(&["link", "set", &veth, "master", &bridge])?;
        ip(&["link", "set", &veth, "up"])?;
        ip(&["-n", &ns, "addr", "add", &format!("{}/24", node_ip(slot, i)), "dev", "eth0"])?;
        ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
        ip(&["-n", &ns, "link", "set", "lo", "up"])?;
    }
    Ok(())
}

fn teardown_netns(slot: u32, n: u64) {
    // The root-side veths first: deleting a namespace removes its end of the pair, but the kernel
    // may take a moment to drop the other end, and the next run of this slot reuses its name.
    for i in 1..=n.max(9) {
        let _ = Command::new("ip").args(["link", "del", &format!("kfj{slot}v{i}")]).stderr(Stdio::null()).status();
    }
    for i in 1..=n.max(9) {
        let _ = Command::new("ip").args(["netns", "del", &ns_name(slot, i)]).stderr(Stdio::null()).status();
    }
    let _ = Command::new("ip").args(["link", "del", &format!("kfjbr{slot}")]).stderr(Stdio::null()).status();
}

fn mount_loop(img: &Path, at: &Path, mib: u64) -> Result<String> {
    run(Command::new("truncate").args(["-s", &format!("{mib}M")]).arg(img))?;
    run(Command::new("mkfs.ext4").args(["-q", "-F", "-m", "0"]).arg(img))?;
    let out = Command::new("losetup").args(["--find", "--show"]).arg(img).output()?;
    if !out.status.success() {
        bail!("losetup: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
    run(Command::new("mount").arg(&dev).arg(at))?;
    Ok(dev)
}
