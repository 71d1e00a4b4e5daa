//! Nemeses: the faults a run injects into its cluster, on a seeded schedule.
//!
//! A run enables a set of [`Kind`]s. During the chaos phase the scheduler alternates: pick one
//! enabled kind and its targets with the run's RNG, start the fault, keep it for `hold`, heal it,
//! let the cluster work for `rest`; at the end everything is healed (partitions dropped, paused
//! nodes resumed, killed nodes restarted, clocks reset, disks freed). Every start and stop is
//! recorded in the history as a `nemesis` op, so a checker (and a reader) sees the fault windows.

use crate::cluster::{Cluster, LogWindow, NetMode, in_ns, node_ip, ns_name};
use crate::recorder::Recorder;
use anyhow::{Context, Result, anyhow, bail};
use rand::Rng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand_chacha::ChaCha8Rng;
use serde_json::json;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The faults a run can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Cut one random node off from the others (both directions).
    PartitionNode,
    /// Cut the leader off from the others.
    PartitionLeader,
    /// Split the nodes into a minority and a majority.
    PartitionHalves,
    /// Drop traffic in one direction only, from one node to another.
    PartitionOneWay,
    /// SIGKILL one random node, restart it at heal.
    Kill,
    /// SIGKILL the leader, restart it at heal.
    KillLeader,
    /// SIGKILL every node, restart them all at heal.
    KillAll,
    /// SIGSTOP one random node (its sockets still accept: calls hang), SIGCONT at heal.
    Pause,
    /// Shift one random node's wall clock by up to ±`max_skew_secs` (libfaketime).
    Clock,
    /// Fill one node's data filesystem (ENOSPC), free it at heal.
    DiskFull,
    /// Make fsync and fdatasync fail on one node (libfiu), stop at heal.
    Fsync,
    /// Replace a voter (not the leader) by a fresh node: remove it, add a new node as a learner
    /// and promote it (netns mode; long profile).
    Membership,
    /// SIGKILL one random node and cut its raft log's live write-ahead log (`log/*.log`, the
    /// newest) to a seeded fraction of its length (a disk that lost synced data); restart it at
    /// heal. A cut reaching entries it acknowledged leaves it damaged: it repairs from the leader.
    TruncateLog,
    /// SIGKILL one random node and flip one seeded byte of its raft log's live write-ahead log;
    /// restart it at heal. Only the write-ahead log: RocksDB recovers it to its last whole record
    /// (the acknowledged mark then finds any acknowledged entry lost); table files and manifests
    /// are not flipped here (that is [`Kind::FlipTable`]).
    FlipByte,
    /// SIGKILL one random node and flip one seeded bit in one seeded file of its RocksDB stores'
    /// tables and manifests (`state/` and `log/`: `*.sst`, in the first data block, and
    /// `MANIFEST-*`); start it at heal. A node that cannot use its data (RocksDB refuses to open a
    /// store, or a read fails and the node fences itself and exits) is repaired the operator's way
    /// (docs/operations.md, "Damaged data directory"): removed from the voters through the leader,
    /// its data directory moved away, started empty with `bootstrap = false`, added back as a
    /// learner with its own id and promoted to voter. Every step is a nemesis op.
    FlipTable,
    /// Issue #33's amnesia sequence: with `n/2` nodes (A) killed, writes are acknowledged by the
    /// others for a while; then one of those (B) is killed and its live write-ahead log cut to half
    /// of what it grew since A stopped, the rest (C) are killed, and B and A are started: a
    /// majority in which B lost acknowledged writes and A never had them. B must not vote or lead
    /// (the acknowledged mark); at heal C is started.
    Amnesia,
}

impl Kind {
    pub const ALL: &'static [Kind] = &[
        Kind::PartitionNode,
        Kind::PartitionLeader,
        Kind::PartitionHalves,
        Kind::PartitionOneWay,
        Kind::Kill,
        Kind::KillLeader,
        Kind::KillAll,
        Kind::Pause,
        Kind::Clock,
        Kind::DiskFull,
        Kind::Fsync,
        Kind::Membership,
        Kind::TruncateLog,
        Kind::FlipByte,
        Kind::FlipTable,
        Kind::Amnesia,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::PartitionNode => "partition-node",
            Kind::PartitionLeader => "partition-leader",
            Kind::PartitionHalves => "partition-halves",
            Kind::PartitionOneWay => "partition-one-way",
            Kind::Kill => "kill",
            Kind::KillLeader => "kill-leader",
            Kind::KillAll => "kill-all",
            Kind::Pause => "pause",
            Kind::Clock => "clock",
            Kind::DiskFull => "disk-full",
            Kind::Fsync => "fsync",
            Kind::Membership => "membership",
            Kind::TruncateLog => "truncate-log",
            Kind::FlipByte => "flip-byte",
            Kind::FlipTable => "flip-table",
            Kind::Amnesia => "amnesia",
        }
    }

    pub fn parse(s: &str) -> Result<Kind> {
        match Kind::ALL.iter().find(|k| k.name() == s) {
            Some(k) => Ok(*k),
            None => bail!(
                "unknown nemesis {s:?}; known: {}",
                Kind::ALL.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
            ),
        }
    }

    /// Whether the cluster must be started with libfaketime, libfiu or loop filesystems.
    pub fn needs_faketime(self) -> bool {
        self == Kind::Clock
    }
    pub fn needs_fiu(self) -> bool {
        self == Kind::Fsync
    }
    pub fn needs_disk(self) -> bool {
        self == Kind::DiskFull
    }
}

/// A fault in force, remembered so it can be healed.
#[derive(Debug, Clone)]
pub enum Active {
    /// Directed links cut: `(from, to)` drops traffic from `from` to `to`.
    Partition(BTreeSet<(u64, u64)>),
    Killed(Vec<u64>),
    Paused(Vec<u64>),
    Skewed(Vec<u64>),
    DiskFull(u64),
    Fsync(u64),
    /// A voter was replaced by a fresh one; nothing to heal (the membership stays changed).
    Replaced,
    /// A stopped node whose table or manifest file has a flipped bit; `log_from` is where its log
    /// stood before it is started again (the start of the window in which it may report the
    /// corruption).
    Flipped {
        node: u64,
        log_from: u64,
    },
}

/// How long the amnesia nemesis lets the nodes other than A acknowledge writes before it stops B.
pub const AMNESIA_WRITES: std::time::Duration = std::time::Duration::from_millis(2500);

/// Starts a fault of `kind`; returns what to heal and a JSON description for the history. A fault
/// of several steps (amnesia) records each step as a nemesis op through `rec`.
pub async fn start(
    cluster: &mut Cluster,
    kind: Kind,
    rng: &mut ChaCha8Rng,
    max_skew_secs: i64,
    rec: Option<&Recorder>,
) -> Result<(Active, serde_json::Value)> {
    let ids = cluster.ids();
    let leader = cluster.leader().await;
    let random = *ids.choose(rng).unwrap_or(&1);
    Ok(match kind {
        Kind::PartitionNode | Kind::PartitionLeader => {
            let target = if kind == Kind::PartitionLeader { leader.unwrap_or(random) } else { random };
            let mut cut = BTreeSet::new();
            for other in ids.iter().filter(|o| **o != target) {
                cut.insert((target, *other));
                cut.insert((*other, target));
            }
            partition(cluster, &cut)?;
            (Active::Partition(cut), json!({"isolated": target}))
        }
        Kind::PartitionHalves => {
            let mut shuffled = ids.clone();
            shuffled.shuffle(rng);
            let minority: Vec<u64> = shuffled[..ids.len() / 2].to_vec();
            let majority: Vec<u64> = shuffled[ids.len() / 2..].to_vec();
            let mut cut = BTreeSet::new();
            for a in &minority {
                for b in &majority {
                    cut.insert((*a, *b));
                    cut.insert((*b, *a));
                }
            }
            partition(cluster, &cut)?;
            (Active::Partition(cut), json!({"minority": minority, "majority": majority}))
        }
        Kind::PartitionOneWay => {
            let from = random;
            let others: Vec<u64> = ids.iter().copied().filter(|o| *o != from).collect();
            let to = *others.choose(rng).unwrap_or(&from);
            let cut: BTreeSet<(u64, u64)> = [(from, to)].into();
            partition(cluster, &cut)?;
            (Active::Partition(cut), json!({"dropped": {"from": from, "to": to}}))
        }
        Kind::Kill | Kind::KillLeader => {
            let target = if kind == Kind::KillLeader { leader.unwrap_or(random) } else { random };
            cluster.kill(target)?;
            (Active::Killed(vec![target]), json!({"killed": [target]}))
        }
        Kind::KillAll => {
            for id in &ids {
                cluster.kill(*id)?;
            }
            (Active::Killed(ids.clone()), json!({"killed": ids}))
        }
        Kind::Pause => {
            cluster.pause(random)?;
            (Active::Paused(vec![random]), json!({"paused": [random]}))
        }
        Kind::Clock => {
            let mut offset = rng.random_range(-max_skew_secs..=max_skew_secs);
            if offset == 0 {
                offset = max_skew_secs.max(1);
            }
            cluster.set_skew(random, offset)?;
            (Active::Skewed(vec![random]), json!({"node": random, "offset_secs": offset}))
        }
        Kind::DiskFull => {
            cluster.fill_disk(random)?;
            (Active::DiskFull(random), json!({"full": random}))
        }
        Kind::Fsync => {
            cluster.fsync_faults(random, true)?;
            (Active::Fsync(random), json!({"fsync_failing": random}))
        }
        Kind::Membership => {
            // Replace a voter that is not the leader: remove it from the membership (its id is
            // retired), then add a fresh node as a learner and promote it (joint consensus).
            let candidates: Vec<u64> = ids.iter().copied().filter(|i| Some(*i) != leader).collect();
            let victim = *candidates.choose(rng).unwrap_or(&random);
            cluster.remove_voter(victim).await?;
            let added = cluster.add_voter().await?;
            (Active::Replaced, json!({"removed": victim, "added": added}))
        }
        Kind::TruncateLog => {
            cluster.kill(random)?;
            let fraction = rng.random_range(0.05..0.95);
            let wal = live_wal(&cluster.nodes[&random].data)?;
            let len = std::fs::metadata(&wal)?.len();
            let cut = (len as f64 * fraction) as u64;
            cut_file(&wal, cut)?;
            (Active::Killed(vec![random]), json!({"killed": [random], "wal": wal, "bytes": len, "cut_to": cut}))
        }
        Kind::FlipByte => {
            cluster.kill(random)?;
            let wal = live_wal(&cluster.nodes[&random].data)?;
            let len = std::fs::metadata(&wal)?.len();
            let at = if len == 0 { 0 } else { rng.random_range(0..len) };
            let bit = rng.random_range(0..8u8);
            if len > 0 {
                flip_bit(&wal, at, bit)?;
            }
            (
                Active::Killed(vec![random]),
                json!({"killed": [random], "file": wal, "bytes": len, "offset": at, "bit": bit}),
            )
        }
        Kind::FlipTable => {
            cluster.kill(random)?;
            let files = table_files(&cluster.nodes[&random].data)?;
            let file = files.choose(rng).ok_or_else(|| anyhow!("node {random} has no table or manifest file"))?.clone();
            let len = std::fs::metadata(&file)?.len();
            let (from, to) = flip_range(&file, len)?;
            let at = skip_padding(&file, rng.random_range(from..to));
            let bit = rng.random_range(0..8u8);
            flip_bit(&file, at, bit)?;
            let log_from = cluster.log_len(random);
            (
                Active::Flipped { node: random, log_from },
                json!({"killed": [random], "file": file, "bytes": len, "range": [from, to], "offset": at, "bit": bit}),
            )
        }
        Kind::Amnesia => amnesia(cluster, rng, rec).await?,
    })
}

/// The files [`Kind::FlipTable`] may damage: the table files (`*.sst`) and manifests
/// (`MANIFEST-*`) of a node's state store and raft log, sorted (a seeded choice among them).
pub fn table_files(data: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for part in ["state", "log"] {
        let dir = data.join(part);
        for e in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            let table = p.extension().is_some_and(|x| x == "sst");
            let len = e.metadata().map(|m| m.len()).unwrap_or(0);
            if (table || name.starts_with("MANIFEST-")) && len > 0 {
                files.push(p);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// RocksDB writes a manifest as a log of records in 32 KiB blocks, each record behind a 7-byte
/// checksummed header; the last six bytes of a block may be zero padding (no header fitted), so an
/// offset there moves six bytes back, into the block's records.
pub fn skip_padding(file: &Path, at: u64) -> u64 {
    const BLOCK: u64 = 32 * 1024;
    let manifest = file.file_name().is_some_and(|n| n.to_string_lossy().starts_with("MANIFEST-"));
    if manifest && at % BLOCK >= BLOCK - 6 { at - 6 } else { at }
}

/// The byte range of `file` (of `len` bytes) a flip may hit: data RocksDB checks, never padding.
/// A manifest: all of it (see [`skip_padding`]). A table
/// file begins with its first data block: an uncompressed one starts with its first entry (shared
/// key bytes 0, then the lengths of key and value, then both), so the range is that entry; a
/// compressed one starts with the varint of its uncompressed size, so the range is that varint and
/// the byte after it. Either way the flip is inside the first data block, which RocksDB checksums
/// when it reads it.
pub fn flip_range(file: &Path, len: u64) -> Result<(u64, u64)> {
    if len == 0 {
        bail!("{} is empty", file.display());
    }
    let is_table = file.extension().is_some_and(|x| x == "sst");
    if !is_table {
        // Records: the whole file, but see [`skip_padding`].
        return Ok((0, len));
    }
    let head = {
        use std::io::Read;
        let mut buf = vec![0u8; len.min(64) as usize];
        std::fs::File::open(file)?.read_exact(&mut buf)?;
        buf
    };
    let varint = |at: usize| -> Option<(u64, usize)> {
        let mut v = 0u64;
        for (i, b) in head.get(at..)?.iter().enumerate().take(10) {
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Some((v, at + i + 1));
            }
        }
        None
    };
    let end = if head[0] == 0 {
        // Uncompressed: shared (0), non-shared key length, value length, key, value.
        match varint(1).and_then(|(k, at)| varint(at).map(|(v, at)| at as u64 + k + v)) {
            Some(end) => end,
            None => 1,
        }
    } else {
        match varint(0) {
            Some((_, at)) => at as u64 + 1,
            None => 1,
        }
    };
    Ok((0, end.clamp(1, len)))
}

/// The amnesia sequence ([`Kind::Amnesia`]); every step is recorded as a nemesis op.
async fn amnesia(
    cluster: &mut Cluster,
    rng: &mut ChaCha8Rng,
    rec: Option<&Recorder>,
) -> Result<(Active, serde_json::Value)> {
    let step = |f: &str, v: serde_json::Value| {
        if let Some(r) = rec {
            r.nemesis(f, v);
        }
    };
    let mut ids = cluster.ids();
    if ids.len() < 3 {
        bail!("amnesia needs at least three nodes");
    }
    ids.shuffle(rng);
    let n = ids.len();
    let a: Vec<u64> = ids[..n / 2].to_vec();
    let b = ids[n / 2];
    let c: Vec<u64> = ids[n / 2 + 1..].to_vec();
    for id in &a {
        cluster.kill(*id)?;
    }
    // Where B's write-ahead log stood when A stopped: what it gains from here on, A never had.
    let before = live_wal(&cluster.nodes[&b].data)?;
    let from = std::fs::metadata(&before)?.len();
    step("amnesia-kill-a", json!({"killed": a, "b": b, "c": c, "b_wal": before, "b_wal_bytes": from}));
    tokio::time::sleep(AMNESIA_WRITES).await;
    cluster.kill(b)?;
    let wal = live_wal(&cluster.nodes[&b].data)?;
    let len = std::fs::metadata(&wal)?.len();
    // Half of what it gained while A was down (half the file if RocksDB started a new one).
    let start = if wal == before { from.min(len) } else { 0 };
    let cut = start + (len - start) / 2;
    cut_file(&wal, cut)?;
    step("amnesia-cut-b", json!({"killed": [b], "wal": wal, "bytes": len, "grew": len - start, "cut_to": cut}));
    for id in &c {
        cluster.kill(*id)?;
    }
    step("amnesia-kill-c", json!({"killed": c}));
    cluster.start_node(b)?;
    for id in &a {
        cluster.start_node(*id)?;
    }
    let up: Vec<u64> = std::iter::once(b).chain(a.iter().copied()).collect();
    step("amnesia-start-b-a", json!({"started": up}));
    Ok((Active::Killed(c.clone()), json!({"a": a, "b": b, "c": c, "up": up, "wal": wal, "cut_to": cut})))
}

/// The newest write-ahead log file of a node's raft log (RocksDB numbers them rising).
pub fn live_wal(data: &Path) -> Result<PathBuf> {
    let dir = data.join("log");
    let mut wals: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    wals.sort();
    wals.pop().ok_or_else(|| anyhow!("no write-ahead log in {}", dir.display()))
}

/// Cuts `file` to `len` bytes and syncs it.
fn cut_file(file: &Path, len: u64) -> Result<()> {
    let f = std::fs::OpenOptions::new().write(true).open(file)?;
    f.set_len(len)?;
    f.sync_all()?;
    Ok(())
}

/// Flips bit `bit` of the byte at `offset` of `file` and syncs it.
fn flip_bit(file: &Path, offset: u64, bit: u8) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().read(true).write(true).open(file)?;
    let mut byte = [0u8; 1];
    f.read_exact_at(&mut byte, offset)?;
    byte[0] ^= 1 << bit;
    f.write_all_at(&byte, offset)?;
    f.sync_all()?;
    Ok(())
}

/// Heals one fault. After a disk fault, a node that fenced itself (it stops its raft rather than
/// acknowledge what it could not persist) is restarted, as its supervisor would.
pub async fn heal(cluster: &mut Cluster, active: &Active, rec: Option<&Recorder>) -> Result<serde_json::Value> {
    if let Active::Flipped { node, log_from } = active {
        return heal_flipped(cluster, *node, *log_from, rec).await;
    }
    let mut v = heal_now(cluster, active)?;
    if matches!(active, Active::DiskFull(_) | Active::Fsync(_)) {
        let restarted = cluster.restart_fenced().await?;
        if let Some(o) = v.as_object_mut() {
            o.insert("restarted_fenced".into(), json!(restarted));
        }
    }
    Ok(v)
}

/// How long a node started on a damaged data directory has to show it serves (caught up, its
/// state readable) before the harness repairs it; a whole node catches up in a few seconds.
const PROBE: std::time::Duration = std::time::Duration::from_secs(20);
/// How long one step of the wipe and rejoin is retried (no leader for a moment, a membership
/// change still settling).
const REJOIN_STEP: std::time::Duration = std::time::Duration::from_secs(30);

/// Heals [`Kind::FlipTable`]: starts the node; if it cannot use its data (see
/// [`Cluster::probe_started`]), repairs it as an operator would (docs/operations.md, "Damaged data
/// directory", wipe and rejoin): the voters without it (through the leader), its data directory
/// moved away, started empty with `bootstrap = false`, added back as a learner with the same id
/// and promoted. Each step is a nemesis op. What the node logged from its start to its wipe (or
/// until it proved whole) is a [`LogWindow`] in which a corruption message is expected.
async fn heal_flipped(
    cluster: &mut Cluster,
    id: u64,
    log_from: u64,
    rec: Option<&Recorder>,
) -> Result<serde_json::Value> {
    let step = |f: &str, v: serde_json::Value| {
        if let Some(r) = rec {
            r.nemesis(f, v);
        }
    };
    cluster.start_node(id)?;
    let found = cluster.probe_started(id, PROBE).await;
    let reason = match found {
        Ok(None) => {
            cluster.excused.push(LogWindow { node: id, from: log_from, to: cluster.log_len(id) });
            return Ok(json!({"restarted": [id], "whole": true}));
        }
        Ok(Some(reason)) => reason,
        Err(e) => format!("probing it failed: {e}"),
    };
    step("flip-table-damaged", json!({"node": id, "reason": reason}));
    // Whatever the repair reaches, the damaged node's own lines until its wipe (or until now, if
    // the repair stopped before) are excused; the lines of the node started empty are not.
    let mut wiped_at = None;
    let repaired = rejoin(cluster, id, &step, &mut wiped_at).await;
    let to = wiped_at.unwrap_or_else(|| cluster.log_len(id));
    cluster.excused.push(LogWindow { node: id, from: log_from, to });
    let (moved, voters) = repaired?;
    Ok(
        json!({"restarted": [id], "whole": false, "reason": reason, "rejoined": id, "data_moved_to": moved, "voters": voters}),
    )
}

/// The wipe and rejoin of node `id`; returns where its data went and the voters after. Sets
/// `wiped_at` to the length of its log when it was stopped for the wipe.
async fn rejoin(
    cluster: &mut Cluster,
    id: u64,
    step: &impl Fn(&str, serde_json::Value),
    wiped_at: &mut Option<u64>,
) -> Result<(String, Vec<u64>)> {
    let start = std::time::Instant::now();
    let voters = loop {
        match cluster.remove_member(id).await {
            Ok(v) => break v,
            Err(e) if start.elapsed() > REJOIN_STEP => return Err(e.context(format!("removing node {id}"))),
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(500)).await,
        }
    };
    step("rejoin-remove", json!({"node": id, "voters": voters}));
    cluster.kill(id)?;
    *wiped_at = Some(cluster.log_len(id));
    let moved = cluster.wipe(id)?;
    step("rejoin-wipe", json!({"node": id, "data": moved}));
    cluster.start_node(id)?;
    step("rejoin-start-empty", json!({"node": id, "bootstrap": false}));
    let start = std::time::Instant::now();
    let voters = loop {
        match cluster.add_back(id).await {
            Ok(v) => break v,
            Err(e) if start.elapsed() > REJOIN_STEP => return Err(e.context(format!("adding node {id} back"))),
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(500)).await,
        }
    };
    step("rejoin-add", json!({"node": id, "learner_then_voter": true, "voters": voters}));
    Ok((moved, voters))
}

fn heal_now(cluster: &mut Cluster, active: &Active) -> Result<serde_json::Value> {
    Ok(match active {
        Active::Flipped { node, .. } => {
            cluster.start_node(*node)?;
            json!({"restarted": [node]})
        }
        Active::Partition(cut) => {
            heal_partitions(cluster)?;
            json!({"healed_links": cut.len()})
        }
        Active::Killed(ids) => {
            for id in ids {
                cluster.start_node(*id)?;
            }
            json!({"restarted": ids})
        }
        Active::Paused(ids) => {
            for id in ids {
                cluster.resume(*id)?;
            }
            json!({"resumed": ids})
        }
        Active::Skewed(ids) => {
            for id in ids {
                cluster.set_skew(*id, 0)?;
            }
            json!({"clock_reset": ids})
        }
        Active::DiskFull(id) => {
            cluster.free_disk(*id)?;
            json!({"freed": id})
        }
        Active::Replaced => json!({}),
        Active::Fsync(id) => {
            if cluster.fsync_faults(*id, false).is_err() {
                // The process is gone: start it again.
                cluster.kill(*id)?;
                cluster.start_node(*id)?;
            }
            json!({"fsync_ok": id})
        }
    })
}

/// Cuts the directed links `cut`: iptables inside the namespaces, or the proxy in loopback mode.
pub fn partition(cluster: &Cluster, cut: &BTreeSet<(u64, u64)>) -> Result<()> {
    match cluster.opts.net {
        NetMode::Netns => {
            for (from, to) in cut {
                // Drop at the receiver: `to` ignores packets from `from`.
                let ns = ns_name(cluster.slot, *to);
                in_ns(&ns, &["iptables", "-A", "INPUT", "-s", &node_ip(cluster.slot, *from), "-j", "DROP"])?;
            }
        }
        NetMode::Loopback => {
            if let Some(p) = &cluster.proxy {
                for (from, to) in cut {
                    p.set(*from, *to, false);
                }
            }
        }
    }
    Ok(())
}

/// Removes every partition.
pub fn heal_partitions(cluster: &Cluster) -> Result<()> {
    match cluster.opts.net {
        NetMode::Netns => {
            for id in cluster.ids() {
                in_ns(&ns_name(cluster.slot, id), &["iptables", "-F", "INPUT"])?;
            }
        }
        NetMode::Loopback => {
            if let Some(p) = &cluster.proxy {
                p.heal_all();
            }
        }
    }
    Ok(())
}

/// Heals everything a run may have left in force (the final heal).
pub async fn heal_all(cluster: &mut Cluster) -> Result<()> {
    heal_partitions(cluster)?;
    // Nodes that exited by themselves (fenced after a disk fault) are started below with the rest.
    cluster.reap_exited();
    for id in cluster.ids() {
        cluster.resume(id)?;
        let _ = cluster.set_skew(id, 0);
        let _ = cluster.free_disk(id);
        if cluster.opts.fiu {
            let _ = cluster.fsync_faults(id, false);
        }
        if !cluster.nodes[&id].running() {
            cluster.start_node(id)?;
        }
    }
    if cluster.opts.fiu || cluster.opts.disk_mib.is_some() {
        // Give freed nodes a moment to report, then restart any that fenced itself.
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        cluster.restart_fenced().await?;
    }
    Ok(())
}

/// The hold and rest times of one fault cycle, jittered by the run's RNG.
pub fn cycle(rng: &mut ChaCha8Rng, hold_ms: u64, rest_ms: u64) -> (u64, u64) {
    let jitter = |rng: &mut ChaCha8Rng, base: u64| base / 2 + rng.random_range(0..=base);
    (jitter(rng, hold_ms), jitter(rng, rest_ms))
}
