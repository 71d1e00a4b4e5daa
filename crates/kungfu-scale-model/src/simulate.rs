//! The measurement: draw a seeded stream of actions from a mix, charge each under every placement
//! and group count, and reduce the per-group load to the figures of the report.

use crate::cost::{CostModel, charge};
use crate::placement::{Obj, Placement};
use crate::rng::Rng;
use crate::workload::{Fresh, Instance, Mix, Shapes, draw};
use crate::world::{World, WorldShape};
use kungfu_core::action::ActionKind;

/// Everything a report depends on; [`Config::documented`] is the run `docs/scaling.md` quotes.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub seed: u64,
    /// Actions drawn from the headline mix; each part mix gets a quarter as many.
    pub actions: u32,
    pub groups: Vec<u32>,
    /// The group count of the per-mix, per-action and turn tables.
    pub detail_groups: u32,
    /// Agents whose turn is read, for the turn's fan-out.
    pub turn_reads: u32,
    pub world: WorldShape,
    pub shapes: Shapes,
    pub cost: CostModel,
}

impl Config {
    pub const DOCUMENTED_SEED: u64 = 19;
    pub const DOCUMENTED_ACTIONS: u32 = 100_000;

    pub fn documented() -> Config {
        Config {
            seed: Config::DOCUMENTED_SEED,
            actions: Config::DOCUMENTED_ACTIONS,
            groups: vec![1, 4, 16, 64],
            detail_groups: 16,
            turn_reads: 5_000,
            world: WorldShape::documented(),
            shapes: Shapes::documented(),
            cost: CostModel::documented(),
        }
    }
}

/// One placement at one group count, over the headline mix.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    pub placement: Placement,
    pub groups: u32,
    /// Share of actions touching more than one group (any mode).
    pub multi_group: f64,
    /// Share of actions writing more than one group (two-phase commit).
    pub two_phase: f64,
    /// Share of actions reading another group at their timestamp.
    pub remote_read: f64,
    /// Share of actions binding at a separate home group first.
    pub bind: f64,
    pub mean_groups: f64,
    pub mean_rounds: f64,
    /// Units of work per action, summed over groups (1.0 when nothing crosses a group).
    pub work_per_action: f64,
    /// The busiest group's share of all work.
    pub hottest_share: f64,
    /// Expected actions per second of the whole: capacity of a group / the busiest group's load.
    pub throughput: f64,
    /// Throughput over one group's.
    pub speedup: f64,
}

/// Per mix, at the detail group count.
#[derive(Clone, Debug, PartialEq)]
pub struct MixRow {
    pub mix: &'static str,
    pub placement: Placement,
    pub multi_group: f64,
    pub two_phase: f64,
    pub speedup: f64,
}

/// Per action kind of the headline mix, at the detail group count.
#[derive(Clone, Debug, PartialEq)]
pub struct KindRow {
    pub kind: ActionKind,
    pub share: f64,
    /// `(multi-group share, two-phase share)` per placement, in `Placement::ALL` order.
    pub by_placement: Vec<(f64, f64)>,
}

/// The groups one agent's turn reads (§8).
#[derive(Clone, Debug, PartialEq)]
pub struct TurnRow {
    pub placement: Placement,
    pub groups: u32,
    pub mean: f64,
    pub p99: u32,
    pub max: u32,
}

/// The speedup at the largest group count under a variant of the cost model.
#[derive(Clone, Debug, PartialEq)]
pub struct SensitivityRow {
    pub label: &'static str,
    pub cost: CostModel,
    /// Speedup per placement, in `Placement::ALL` order.
    pub speedups: Vec<f64>,
}

/// The cost-model variants the report checks the choice against: each makes one kind of
/// cross-group work dearer than the documented parameters assume.
pub fn cost_variants(base: &CostModel) -> Vec<(&'static str, CostModel)> {
    vec![
        ("documented", base.clone()),
        ("2PC twice as dear (alpha 1.0, gamma 0.5)", CostModel { alpha: 1.0, gamma: 0.5, ..base.clone() }),
        ("bind = half an action (rho 0.5)", CostModel { rho: 0.5, ..base.clone() }),
        ("bind = a whole action (rho 1.0)", CostModel { rho: 1.0, ..base.clone() }),
        ("remote read = half an action (beta 0.5)", CostModel { beta: 0.5, ..base.clone() }),
    ]
}

#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    pub config: Config,
    pub mean_thread_size: f64,
    pub largest_thread: usize,
    pub hottest_thread_share: f64,
    pub cells: Vec<Cell>,
    pub mixes: Vec<MixRow>,
    pub kinds: Vec<KindRow>,
    pub turns: Vec<TurnRow>,
    pub sensitivity: Vec<SensitivityRow>,
}

impl Measurement {
    pub fn cell(&self, placement: Placement, groups: u32) -> Option<&Cell> {
        self.cells.iter().find(|c| c.placement == placement && c.groups == groups)
    }

    /// The placement with the highest throughput at the largest group count.
    pub fn best(&self) -> Placement {
        let n = self.config.groups.iter().copied().max().unwrap_or(1);
        let mut best = Placement::ALL[0];
        let mut top = f64::MIN;
        for p in Placement::ALL {
            if let Some(c) = self.cell(p, n)
                && c.throughput > top
            {
                top = c.throughput;
                best = p;
            }
        }
        best
    }
}

/// Totals over a stream for one placement and group count.
#[derive(Clone, Debug, Default)]
struct Tally {
    actions: u64,
    multi: u64,
    two_phase: u64,
    remote_read: u64,
    bind: u64,
    groups: u64,
    rounds: f64,
    load: Vec<f64>,
}

fn tally(cost: &CostModel, stream: &[Instance], placement: Placement, n: u32) -> Tally {
    let mut t = Tally { load: vec![0.0; n as usize], ..Tally::default() };
    for inst in stream {
        let c = charge(cost, inst, placement, n);
        t.actions += 1;
        t.multi += u64::from(c.groups > 1);
        t.two_phase += u64::from(c.writers > 1);
        t.remote_read += u64::from(c.remote_read);
        t.bind += u64::from(c.bind);
        t.groups += c.groups as u64;
        t.rounds += c.rounds;
        for (g, u) in c.load {
            t.load[g as usize] += u;
        }
    }
    t
}

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 { 0.0 } else { part as f64 / whole as f64 }
}

fn stream(mix: &Mix, count: u32, world: &World, shapes: &Shapes, rng: &mut Rng) -> Vec<Instance> {
    let mut fresh = Fresh::after(world);
    (0..count)
        .map(|_| {
            let kind = mix.sample(rng);
            draw(kind, world, shapes, &mut fresh, rng)
        })
        .collect()
}

/// Runs the model. Same config, same measurement, on every machine.
pub fn run(config: &Config) -> Measurement {
    let mut root = Rng::new(config.seed);
    let world = World::generate(&config.world, &mut root.fork(1));
    let cost = &config.cost;

    let headline = Mix::headline();
    let main = stream(&headline, config.actions, &world, &config.shapes, &mut root.fork(2));

    let mut cells = Vec::new();
    for p in Placement::ALL {
        let mut base = None;
        for &n in &config.groups {
            let t = tally(cost, &main, p, n);
            let total: f64 = t.load.iter().sum();
            let hottest = t.load.iter().copied().fold(0.0, f64::max);
            let per_action = hottest / t.actions as f64;
            let throughput = cost.group_actions_per_sec / per_action;
            let one = *base.get_or_insert(throughput);
            cells.push(Cell {
                placement: p,
                groups: n,
                multi_group: share(t.multi, t.actions),
                two_phase: share(t.two_phase, t.actions),
                remote_read: share(t.remote_read, t.actions),
                bind: share(t.bind, t.actions),
                mean_groups: t.groups as f64 / t.actions as f64,
                mean_rounds: t.rounds / t.actions as f64,
                work_per_action: total / t.actions as f64,
                hottest_share: hottest / total,
                throughput,
                speedup: throughput / one,
            });
        }
    }

    let d = config.detail_groups;
    let mut mixes = Vec::new();
    for (i, mix) in Mix::all().into_iter().enumerate() {
        let s = if i == 0 {
            main.clone()
        } else {
            stream(&mix, config.actions / 4, &world, &config.shapes, &mut root.fork(10 + i as u64))
        };
        for p in Placement::ALL {
            let t = tally(cost, &s, p, d);
            let one = tally(cost, &s, p, 1);
            let max = |l: &[f64]| l.iter().copied().fold(0.0, f64::max);
            mixes.push(MixRow {
                mix: mix.name,
                placement: p,
                multi_group: share(t.multi, t.actions),
                two_phase: share(t.two_phase, t.actions),
                speedup: max(&one.load) / max(&t.load),
            });
        }
    }

    let mut kinds = Vec::new();
    for &kind in ActionKind::ALL {
        let of_kind: Vec<Instance> = main.iter().filter(|i| i.kind == kind).cloned().collect();
        let by_placement = Placement::ALL
            .iter()
            .map(|&p| {
                let t = tally(cost, &of_kind, p, d);
                (share(t.multi, t.actions), share(t.two_phase, t.actions))
            })
            .collect();
        kinds.push(KindRow { kind, share: headline.share(kind), by_placement });
    }

    // §8: an agent's turn reads its home and every group where it holds a membership or authored a
    // Task (engagements it took are in Task groups its home's presence set lists, too).
    let mut readers = root.fork(3);
    let sample: Vec<u32> = (0..config.turn_reads).map(|_| world.agent(&mut readers)).collect();
    let mut turns = Vec::new();
    for p in Placement::ALL {
        for &n in &config.groups {
            let mut counts: Vec<u32> = sample
                .iter()
                .map(|&a| {
                    let mut gs = vec![p.group(Obj::Agent { id: a }, n)];
                    let threads = world.agent_threads[a as usize]
                        .iter()
                        .map(|&t| Obj::Thread { id: t, creator: world.threads[t as usize].creator });
                    let tasks = world.agent_tasks[a as usize].iter().map(|&k| Obj::Task { id: k, author: a });
                    for o in threads.chain(tasks) {
                        let g = p.group(o, n);
                        if !gs.contains(&g) {
                            gs.push(g);
                        }
                    }
                    gs.len() as u32
                })
                .collect();
            counts.sort_unstable();
            let mean = counts.iter().map(|&c| c as f64).sum::<f64>() / counts.len().max(1) as f64;
            let p99 = counts.get((counts.len() * 99).div_ceil(100).saturating_sub(1)).copied().unwrap_or(0);
            turns.push(TurnRow { placement: p, groups: n, mean, p99, max: counts.last().copied().unwrap_or(0) });
        }
    }

    let top = config.groups.iter().copied().max().unwrap_or(1);
    let max = |l: &[f64]| l.iter().copied().fold(0.0, f64::max);
    let sensitivity = cost_variants(cost)
        .into_iter()
        .map(|(label, variant)| {
            let speedups = Placement::ALL
                .iter()
                .map(|&p| max(&tally(&variant, &main, p, 1).load) / max(&tally(&variant, &main, p, top).load))
                .collect();
            SensitivityRow { label, cost: variant, speedups }
        })
        .collect();

    let sizes: Vec<usize> = world.threads.iter().map(|t| t.members.len()).collect();
    Measurement {
        config: config.clone(),
        mean_thread_size: sizes.iter().sum::<usize>() as f64 / sizes.len() as f64,
        largest_thread: sizes.iter().copied().max().unwrap_or(0),
        hottest_thread_share: world.thread_pick.p(1),
        cells,
        mixes,
        kinds,
        turns,
        sensitivity,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(seed: u64) -> Config {
        Config {
            seed,
            actions: 4_000,
            turn_reads: 200,
            world: WorldShape { agents: 500, threads: 200, tasks: 80, memories: 1_000, ..WorldShape::documented() },
            ..Config::documented()
        }
    }

    #[test]
    fn same_seed_gives_the_same_measurement() {
        assert_eq!(run(&small(3)), run(&small(3)));
        assert_ne!(run(&small(3)).cells, run(&small(4)).cells);
    }

    #[test]
    fn one_group_is_the_baseline() {
        let m = run(&small(1));
        for p in Placement::ALL {
            let c = m.cell(p, 1).expect("a one-group cell");
            assert_eq!((c.multi_group, c.two_phase, c.hottest_share, c.speedup), (0.0, 0.0, 1.0, 1.0));
            assert!((c.throughput - m.config.cost.group_actions_per_sec).abs() < 1e-9);
            assert!((c.work_per_action - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn object_local_writes_one_group_for_every_action_but_deactivation() {
        // The claim docs/scaling.md chooses the placement on: under object-local only §4's
        // deactivation needs a two-phase commit, at any group count.
        let config = small(7);
        let mut rng = Rng::new(config.seed);
        let world = World::generate(&config.world, &mut rng);
        let mut fresh = Fresh::after(&world);
        for &kind in ActionKind::ALL {
            for _ in 0..200 {
                let inst = draw(kind, &world, &config.shapes, &mut fresh, &mut rng);
                for n in [4, 64, 1024] {
                    let c = charge(&config.cost, &inst, Placement::ObjectLocal, n);
                    if kind != ActionKind::DeactivateAgent {
                        assert_eq!(c.writers, 1, "{kind:?} at {n} groups: {:?}", inst.touches);
                    }
                }
            }
        }
    }

    #[test]
    fn more_groups_never_lower_the_cross_group_share() {
        let m = run(&small(2));
        for p in Placement::ALL {
            let shares: Vec<f64> =
                m.config.groups.iter().map(|&n| m.cell(p, n).map_or(0.0, |c| c.multi_group)).collect();
            // Ranges split in halves: what is apart at n stays apart at 2n and 4n.
            assert!(shares.windows(2).all(|w| w[0] <= w[1] + 1e-12), "{p:?}: {shares:?}");
        }
    }
}
