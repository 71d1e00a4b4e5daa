//! The cost model: what an action costs each group it touches, in units of one single-group action.
//!
//! A single-group action costs its group one unit: one decide-and-apply with its log append, what
//! `docs/benchmarks.md` measures end to end (0.52 ms of a node's CPU per post; 1,932 posts/s on a
//! three-node group at 64 writers, the session's final tree). A group's capacity is that figure; the
//! model assumes every group has nodes of its own, as TiKV stores and CockroachDB nodes each lead a
//! share of the groups, so `n` groups have `n` times the capacity of one and the throughput of the
//! whole is set by its busiest group.
//!
//! Cross-group work, in the same units (the parameters are printed with every report):
//!
//! - a transaction over `k > 1` written groups (two-phase commit over the groups' logs, with the
//!   parallel-commit shortcut): each participant pays `1 + alpha` (its part of the decide, the intent
//!   write, and then the resolution entry), and the coordinator (the anchor's group) `gamma` more for
//!   the transaction record;
//! - a consistent read of another group at the action's timestamp (a §9 visibility check): `beta`
//!   at the read group (a read-index round and a timestamp-cache entry, no log write);
//! - a bind (the L3 key binding and presence at the caller's home, written before the action): `rho`
//!   at the home group (one small key, no decide, batched with other binds).

use crate::placement::{Obj, Placement};
use crate::workload::{Instance, Mode};

#[derive(Clone, Debug, PartialEq)]
pub struct CostModel {
    /// Actions per second one group sustains (docs/benchmarks.md: 3 nodes, 64 writers, own thread).
    pub group_actions_per_sec: f64,
    /// A node's CPU per single-group action, ms (docs/benchmarks.md, issue #15).
    pub cpu_ms_per_action: f64,
    pub alpha: f64,
    pub gamma: f64,
    pub beta: f64,
    pub rho: f64,
}

impl CostModel {
    pub fn documented() -> CostModel {
        CostModel {
            group_actions_per_sec: 1932.0,
            cpu_ms_per_action: 0.52,
            alpha: 0.5,
            gamma: 0.25,
            beta: 0.2,
            rho: 0.15,
        }
    }
}

/// What one action costs, by group, and how it is classified.
#[derive(Clone, Debug, PartialEq)]
pub struct Charge {
    /// `(group, units)`, one entry per touched group.
    pub load: Vec<(u32, f64)>,
    /// Distinct groups touched in any mode.
    pub groups: usize,
    /// Distinct groups written in the action's own commit.
    pub writers: usize,
    /// Some other group is read at the action's timestamp.
    pub remote_read: bool,
    /// The caller's (or a named agent's) home is a separate group written first.
    pub bind: bool,
    /// Consensus rounds on the caller's critical path: 1, +1 for a bind before the action, +1 for
    /// the commit round of a two-phase commit (classic 2PC; parallel commits take it off the
    /// caller's path but not off the time its intents hold their locks), +0.5 for a remote read
    /// round (no log write).
    pub rounds: f64,
}

pub fn charge(model: &CostModel, inst: &Instance, placement: Placement, n: u32) -> Charge {
    let group = |o: Obj| placement.group(o, n);
    let mut writers: Vec<u32> = Vec::new();
    for &(o, m) in &inst.touches {
        let g = group(o);
        if m == Mode::Write && !writers.contains(&g) {
            writers.push(g);
        }
    }
    let mut reads: Vec<u32> = Vec::new();
    let mut binds: Vec<u32> = Vec::new();
    for &(o, m) in &inst.touches {
        let g = group(o);
        let list = match m {
            Mode::Write => continue,
            Mode::Read => &mut reads,
            Mode::Bind => &mut binds,
        };
        // A group written by the action reads and binds inside its own commit.
        if !writers.contains(&g) && !list.contains(&g) {
            list.push(g);
        }
    }
    let mut load: Vec<(u32, f64)> = Vec::new();
    let mut add = |g: u32, u: f64| match load.iter_mut().find(|e| e.0 == g) {
        Some(e) => e.1 += u,
        None => load.push((g, u)),
    };
    if writers.len() == 1 {
        add(writers[0], 1.0);
    } else {
        for (i, &g) in writers.iter().enumerate() {
            add(g, 1.0 + model.alpha + if i == 0 { model.gamma } else { 0.0 });
        }
    }
    for &g in &reads {
        add(g, model.beta);
    }
    for &g in &binds {
        add(g, model.rho);
    }
    let groups = load.len();
    let rounds = 1.0
        + if binds.is_empty() { 0.0 } else { 1.0 }
        + if writers.len() > 1 { 1.0 } else { 0.0 }
        + if reads.is_empty() { 0.0 } else { 0.5 };
    Charge { load, groups, writers: writers.len(), remote_read: !reads.is_empty(), bind: !binds.is_empty(), rounds }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kungfu_core::action::ActionKind;

    fn inst(touches: Vec<(Obj, Mode)>) -> Instance {
        Instance { kind: ActionKind::Post, touches }
    }

    #[test]
    fn one_group_costs_one_unit_whatever_the_action_touches() {
        let m = CostModel::documented();
        let i = inst(vec![
            (Obj::Thread { id: 1, creator: 2 }, Mode::Write),
            (Obj::Memory { id: 3, author: 4, born_in: None }, Mode::Write),
            (Obj::Agent { id: 4 }, Mode::Bind),
        ]);
        for p in Placement::ALL {
            let c = charge(&m, &i, p, 1);
            assert_eq!((c.load.clone(), c.groups, c.writers, c.bind), (vec![(0, 1.0)], 1, 1, false));
            assert_eq!(c.rounds, 1.0);
        }
    }

    #[test]
    fn cross_group_writes_are_two_phase_and_binds_are_cheap() {
        let m = CostModel::documented();
        // Under agent-home a member's new content lives at its home, the thread at its creator's.
        let (creator, poster) = (0..1000u32)
            .flat_map(|a| (0..1000u32).map(move |b| (a, b)))
            .find(|&(a, b)| {
                Placement::AgentHome.group(Obj::Agent { id: a }, 4)
                    != Placement::AgentHome.group(Obj::Agent { id: b }, 4)
            })
            .expect("two agents with different homes");
        let i = inst(vec![
            (Obj::Thread { id: 1, creator }, Mode::Write),
            (Obj::Memory { id: 3, author: poster, born_in: Some(1) }, Mode::Write),
            (Obj::Agent { id: poster }, Mode::Bind),
        ]);
        let c = charge(&m, &i, Placement::AgentHome, 4);
        assert_eq!((c.writers, c.groups, c.bind), (2, 2, false), "the bind rides in the poster's home write");
        let total: f64 = c.load.iter().map(|e| e.1).sum();
        assert!((total - (2.0 * (1.0 + m.alpha) + m.gamma)).abs() < 1e-12);
        // Object-local keeps the new Memory with its thread: one write group, plus the bind.
        let c = charge(&m, &i, Placement::ObjectLocal, 64);
        assert_eq!(c.writers, 1);
    }
}
