//! Nemeses: the faults a run injects into its cluster, on a seeded schedule.
//!
//! A run enables a set of [`Kind`]s. During the chaos phase the scheduler alternates: pick one
//! enabled kind and its targets with the run's RNG, start the fault, keep it for `hold`, heal it,
//! let the cluster work for `rest`; at the end everything is healed (partitions dropped, paused
//! nodes resumed, killed nodes restarted, clocks reset, disks freed). Every start and stop is
//! recorded in the history as a `nemesis` op, so a checker (and a reader) sees the fault windows.

use crate::cluster::{Cluster, NetMode, in_ns, node_ip, ns_name};
use anyhow::{Result, bail};
use rand::Rng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand_chacha::ChaCha8Rng;
use serde_json::json;
use std::collections::BTreeSet;

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
}

/// Starts a fault of `kind`; returns what to heal and a JSON description for the history.
pub async fn start(
    cluster: &mut Cluster,
    kind: Kind,
    rng: &mut ChaCha8Rng,
    max_skew_secs: i64,
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
    })
}

/// Heals one fault. After a disk fault, a node that fenced itself (it stops its raft rather than
/// acknowledge what it could not persist) is restarted, as its supervisor would.
pub async fn heal(cluster: &mut Cluster, active: &Active) -> Result<serde_json::Value> {
    let mut v = heal_now(cluster, active)?;
    if matches!(active, Active::DiskFull(_) | Active::Fsync(_)) {
        let restarted = cluster.restart_fenced().await?;
        if let Some(o) = v.as_object_mut() {
            o.insert("restarted_fenced".into(), json!(restarted));
        }
    }
    Ok(v)
}

fn heal_now(cluster: &mut Cluster, active: &Active) -> Result<serde_json::Value> {
    Ok(match active {
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
