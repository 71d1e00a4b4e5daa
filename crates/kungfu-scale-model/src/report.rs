//! The report's text. `docs/scaling.md` quotes it verbatim for the documented seed and command, and
//! `tests/doc_matches_model.rs` fails when the two differ, so the doc cannot drift from the model.

use crate::placement::Placement;
use crate::simulate::Measurement;
use std::fmt::Write;

/// The command that prints a report for `seed` and `actions`.
pub fn command(seed: u64, actions: u32) -> String {
    format!("cargo run --release -p kungfu-scale-model -- --seed {seed} --actions {actions}")
}

pub fn render(m: &Measurement) -> String {
    let c = &m.config;
    let w = &c.world;
    let k = &c.cost;
    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    line(format!("kungfu-scale-model: {}", command(c.seed, c.actions)));
    line(format!(
        "world: {} agents (Zipf {}), {} threads (activity Zipf {}, size Zipf {} over 2..={}: mean {:.2}, largest {}), {} Tasks (Zipf {}), {} Memories",
        w.agents,
        w.agent_skew,
        w.threads,
        w.thread_skew,
        w.size_skew,
        w.max_thread_size,
        m.mean_thread_size,
        m.largest_thread,
        w.tasks,
        w.task_skew,
        w.memories + w.agents
    ));
    line(format!("hottest thread: {:.2} % of thread activity", 100.0 * m.hottest_thread_share));
    line(format!(
        "cost: group capacity {:.0} actions/s ({} ms CPU per action), 2PC participant 1+{} and coordinator +{}, remote read {}, bind {}",
        k.group_actions_per_sec, k.cpu_ms_per_action, k.alpha, k.gamma, k.beta, k.rho
    ));
    line(String::new());
    line(format!("headline mix (blend), {} actions:", c.actions));
    line(format!(
        "{:<13} {:>6} {:>7} {:>6} {:>6} {:>6} {:>7} {:>7} {:>7} {:>8} {:>10} {:>8}",
        "placement",
        "groups",
        "multi%",
        "2pc%",
        "read%",
        "bind%",
        "groups/a",
        "rounds",
        "work/a",
        "hottest%",
        "actions/s",
        "speedup"
    ));
    for cell in &m.cells {
        line(format!(
            "{:<13} {:>6} {:>7.2} {:>6.2} {:>6.2} {:>6.2} {:>7.3} {:>7.3} {:>7.3} {:>8.2} {:>10.0} {:>7.2}x",
            cell.placement.name(),
            cell.groups,
            100.0 * cell.multi_group,
            100.0 * cell.two_phase,
            100.0 * cell.remote_read,
            100.0 * cell.bind,
            cell.mean_groups,
            cell.mean_rounds,
            cell.work_per_action,
            100.0 * cell.hottest_share,
            cell.throughput,
            cell.speedup
        ));
    }
    line(String::new());
    line(format!("by mix at {} groups (multi% / 2pc% / speedup):", c.detail_groups));
    let mut header = format!("{:<10}", "mix");
    for p in Placement::ALL {
        let _ = write!(header, " {:>26}", p.name());
    }
    line(header);
    let mut names: Vec<&str> = Vec::new();
    for r in &m.mixes {
        if !names.contains(&r.mix) {
            names.push(r.mix);
        }
    }
    for name in names {
        let mut row = format!("{name:<10}");
        for p in Placement::ALL {
            if let Some(r) = m.mixes.iter().find(|r| r.mix == name && r.placement == p) {
                let cell = format!("{:.2} / {:.2} / {:.2}x", 100.0 * r.multi_group, 100.0 * r.two_phase, r.speedup);
                let _ = write!(row, " {cell:>26}");
            }
        }
        line(row);
    }
    line(String::new());
    line(format!("by action at {} groups, headline mix (share%, then multi% / 2pc% per placement):", c.detail_groups));
    let mut header = format!("{:<20} {:>7}", "action", "share%");
    for p in Placement::ALL {
        let _ = write!(header, " {:>15}", p.name());
    }
    line(header);
    for r in &m.kinds {
        let mut row = format!("{:<20} {:>7.3}", r.kind.as_str(), 100.0 * r.share);
        for &(multi, two) in &r.by_placement {
            let cell = format!("{:.1} / {:.1}", 100.0 * multi, 100.0 * two);
            let _ = write!(row, " {cell:>15}");
        }
        line(row);
    }
    line(String::new());
    line(format!("turn fan-out over {} agents' turns (groups read: mean / p99 / max):", c.turn_reads));
    let mut header = format!("{:<13}", "placement");
    for n in &c.groups {
        let _ = write!(header, " {:>18}", format!("{n} groups"));
    }
    line(header);
    for p in Placement::ALL {
        let mut row = format!("{:<13}", p.name());
        for t in m.turns.iter().filter(|t| t.placement == p) {
            let _ = write!(row, " {:>18}", format!("{:.2} / {} / {}", t.mean, t.p99, t.max));
        }
        line(row);
    }
    line(String::new());
    line(format!(
        "sensitivity: speedup at {} groups when cross-group work costs more:",
        c.groups.iter().copied().max().unwrap_or(1)
    ));
    let mut header = format!("{:<42}", "cost model");
    for p in Placement::ALL {
        let _ = write!(header, " {:>12}", p.name());
    }
    line(header);
    for r in &m.sensitivity {
        let mut row = format!("{:<42}", r.label);
        for s in &r.speedups {
            let _ = write!(row, " {:>11.2}x", s);
        }
        line(row);
    }
    line(String::new());
    let best = m.best();
    let top = c.groups.iter().copied().max().unwrap_or(1);
    if let Some(cell) = m.cell(best, top) {
        line(format!(
            "highest throughput at {top} groups: {} ({:.0} actions/s, {:.2}x one group, hottest group {:.2} %)",
            best.name(),
            cell.throughput,
            cell.speedup,
            100.0 * cell.hottest_share
        ));
    }
    out
}
