//! The action mixes, and how one action instance is drawn from the world.
//!
//! The mixes are counted from the repository's own workloads, so the model measures what the
//! project already exercises:
//!
//! - `demo` — one run of `kungfu demo` (`crates/kungfu-cli/src/demo.rs`): 4 registrations, a thread,
//!   3 joins, a question and 3 answers, 5 assignments (one redone, one left to expire), their takes,
//!   deliveries and judgments, a Task with 3 take-and-deliver actions and 4 judgments, 1 expiry.
//! - `coord` — one run of `kungfu demo coord` (`demo_coord.rs`) plus the `messages` and `scatter`
//!   chaos workloads (`jepsen/src/workload/`): sends to nobody, to named members and to all speakers
//!   (a barrier), scatters with their takes and deliveries, labeled writes and a widening.
//! - `chaos` — the step mix of the other chaos workloads: `seq`, `facts` and `replay` (posts into
//!   shared threads), `turn` (posts that ask, replies, handles, assignments through judgment),
//!   `deadlines` (assign, take, deliver, drop, judge, void, expire), `admission` (adopt under a limit).
//! - `lifecycle` — what none of those exercise but a long-lived deployment does (an assumption, kept
//!   small): memory versions and visibility, grants, leaves, removals, role changes, closes, Task
//!   revisions and pauses, plain takes and drops, deactivations.
//!
//! The headline `blend` is 40 % demo, 20 % coord, 30 % chaos, 10 % lifecycle.

use crate::footprint::{Anchor, NewMemories, Pins, Presence, footprint};
use crate::placement::Obj;
use crate::rng::Rng;
use crate::world::World;
use kungfu_core::action::ActionKind;

/// A weighted set of action kinds.
#[derive(Clone, Debug)]
pub struct Mix {
    pub name: &'static str,
    /// `(kind, weight)`; weights need not sum to anything.
    pub weights: Vec<(ActionKind, f64)>,
}

impl Mix {
    pub fn demo() -> Mix {
        use ActionKind as K;
        Mix {
            name: "demo",
            weights: vec![
                (K::RegisterAgent, 4.0),
                (K::CreateThread, 1.0),
                (K::Join, 3.0),
                (K::Post, 9.0),
                (K::TakeAssignment, 5.0),
                (K::DeliverAssignment, 4.0),
                (K::AdoptAssignment, 3.0),
                (K::RejectAssignment, 1.0),
                (K::CreateTask, 1.0),
                (K::DeliverTask, 3.0),
                (K::AdoptEngagement, 3.0),
                (K::RejectEngagement, 1.0),
                (K::Expire, 1.0),
            ],
        }
    }

    pub fn coord() -> Mix {
        use ActionKind as K;
        Mix {
            name: "coord",
            weights: vec![
                (K::RegisterAgent, 4.0),
                (K::CreateThread, 1.0),
                (K::Join, 3.0),
                (K::Send, 24.0),
                (K::Scatter, 6.0),
                (K::TakeAssignment, 6.0),
                (K::DeliverAssignment, 6.0),
                (K::VoidAssignment, 1.0),
                (K::WriteLabeled, 2.0),
                (K::WidenScope, 1.0),
                // The shared record (COORDINATION §5): a few records, patched often.
                (K::CreateRecord, 1.0),
                (K::PatchRecord, 6.0),
            ],
        }
    }

    pub fn chaos() -> Mix {
        use ActionKind as K;
        Mix {
            name: "chaos",
            weights: vec![
                (K::Post, 40.0),
                (K::Handle, 3.0),
                (K::Retract, 0.5),
                (K::TakeAssignment, 8.0),
                (K::DeliverAssignment, 7.0),
                (K::DropAssignment, 1.0),
                (K::AdoptAssignment, 3.0),
                (K::RejectAssignment, 3.0),
                (K::VoidAssignment, 1.0),
                (K::Expire, 4.0),
                (K::AdoptEngagement, 6.0),
                (K::DeliverTask, 3.0),
                (K::CreateTask, 0.5),
                (K::Join, 0.5),
            ],
        }
    }

    pub fn lifecycle() -> Mix {
        use ActionKind as K;
        Mix {
            name: "lifecycle",
            weights: vec![
                (K::CreateMemory, 6.0),
                (K::UpdateMemory, 6.0),
                (K::PublishMemory, 3.0),
                (K::UnpublishMemory, 1.0),
                (K::WithdrawMemory, 1.0),
                (K::IssueGrant, 2.0),
                (K::VoidGrant, 1.0),
                (K::Leave, 2.0),
                (K::Remove, 1.0),
                (K::ChangeRole, 1.0),
                (K::CloseThread, 1.0),
                (K::ReviseContract, 1.0),
                (K::PauseTask, 0.5),
                (K::ResumeTask, 0.5),
                (K::TakeTask, 3.0),
                (K::DropEngagement, 1.0),
                (K::DeactivateAgent, 0.2),
            ],
        }
    }

    /// Mixes combined with shares; each part is normalized first so the shares are of actions.
    pub fn blend(name: &'static str, parts: &[(Mix, f64)]) -> Mix {
        let mut weights: Vec<(ActionKind, f64)> = Vec::new();
        for (mix, share) in parts {
            let total: f64 = mix.weights.iter().map(|w| w.1).sum();
            for &(kind, w) in &mix.weights {
                match weights.iter_mut().find(|e| e.0 == kind) {
                    Some(e) => e.1 += share * w / total,
                    None => weights.push((kind, share * w / total)),
                }
            }
        }
        Mix { name, weights }
    }

    pub fn headline() -> Mix {
        Mix::blend("blend", &[(Mix::demo(), 0.4), (Mix::coord(), 0.2), (Mix::chaos(), 0.3), (Mix::lifecycle(), 0.1)])
    }

    /// The headline blend and its parts, in report order.
    pub fn all() -> Vec<Mix> {
        vec![Mix::headline(), Mix::demo(), Mix::coord(), Mix::chaos(), Mix::lifecycle()]
    }

    pub fn share(&self, kind: ActionKind) -> f64 {
        let total: f64 = self.weights.iter().map(|w| w.1).sum();
        // `+ 0.0`: an empty float sum is -0.0, which would print as a share of "-0.000".
        self.weights.iter().filter(|w| w.0 == kind).map(|w| w.1).sum::<f64>() / total + 0.0
    }

    pub fn sample(&self, rng: &mut Rng) -> ActionKind {
        let total: f64 = self.weights.iter().map(|w| w.1).sum();
        let mut u = rng.next_f64() * total;
        for &(kind, w) in &self.weights {
            if u < w {
                return kind;
            }
            u -= w;
        }
        self.weights[self.weights.len() - 1].0
    }
}

/// How an object is used by one action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// Written in the action's own fact (a participant of its commit).
    Write,
    /// Read on the action's consistent state (a §9 visibility check, a Task reference).
    Read,
    /// The caller's (or a named agent's) home learns of the action first: the L3 key binding and
    /// presence, one small write ordered before the action (`docs/scaling.md`, bind-then-apply).
    Bind,
}

/// One drawn action: its kind and the objects it touches.
#[derive(Clone, Debug)]
pub struct Instance {
    pub kind: ActionKind,
    /// The first `Write` is the anchor.
    pub touches: Vec<(Obj, Mode)>,
}

/// Probabilities of the parts of an action that the kind alone does not fix.
#[derive(Clone, Debug, PartialEq)]
pub struct Shapes {
    /// A post or send body given as new content (else a pin).
    pub body_content: f64,
    /// A pinned body that is the caller's own Memory (else another agent's public Memory).
    pub pin_own: f64,
    /// A post that references a Task.
    pub task_ref: f64,
    /// A labeled write that creates a Memory (else a new version of an own Memory).
    pub labeled_new: f64,
    /// A Task with a restricted audience (1–3 named agents).
    pub restricted: f64,
    /// A Task with a designated judge.
    pub designated_judge: f64,
    /// An expiry of a thread's assignment (else of a Task's engagement).
    pub expire_in_thread: f64,
    /// Ranks of a scatter: 1 to this many (bounded by the thread's other members).
    pub max_ranks: u32,
}

impl Shapes {
    pub fn documented() -> Shapes {
        Shapes {
            body_content: 0.7,
            pin_own: 0.7,
            task_ref: 0.05,
            labeled_new: 0.7,
            restricted: 0.2,
            designated_judge: 0.1,
            expire_in_thread: 0.7,
            max_ranks: 4,
        }
    }
}

/// Fresh ids for objects the run creates, numbered after the world's.
#[derive(Clone, Debug)]
pub struct Fresh {
    agent: u32,
    thread: u32,
    task: u32,
    memory: u32,
}

impl Fresh {
    pub fn after(world: &World) -> Fresh {
        Fresh {
            agent: world.shape.agents,
            thread: world.shape.threads,
            task: world.shape.tasks,
            memory: world.memories.len() as u32,
        }
    }

    fn take(n: &mut u32) -> u32 {
        *n += 1;
        *n - 1
    }
}

/// Draws one instance of `kind`: who acts, on what, and what its footprint pulls in.
pub fn draw(kind: ActionKind, world: &World, shapes: &Shapes, fresh: &mut Fresh, rng: &mut Rng) -> Instance {
    let f = footprint(kind);
    let mut touches: Vec<(Obj, Mode)> = Vec::new();
    let thread_obj = |t: u32| Obj::Thread { id: t, creator: world.threads[t as usize].creator };
    let task_obj = |k: u32| Obj::Task { id: k, author: world.tasks[k as usize].author };
    let memory_obj = |m: u32| {
        let r = world.memories[m as usize];
        Obj::Memory { id: m, author: r.author, born_in: r.born_in }
    };
    // Governor-only and judge-only actions are the creator's; the rest a member's or anyone's.
    let by_governor = matches!(
        kind,
        ActionKind::IssueGrant
            | ActionKind::VoidGrant
            | ActionKind::Remove
            | ActionKind::ChangeRole
            | ActionKind::CloseThread
            | ActionKind::AdoptAssignment
            | ActionKind::RejectAssignment
            | ActionKind::VoidAssignment
            | ActionKind::Scatter
    );
    let by_author = matches!(
        kind,
        ActionKind::ReviseContract
            | ActionKind::PauseTask
            | ActionKind::ResumeTask
            | ActionKind::AdoptEngagement
            | ActionKind::RejectEngagement
    );

    let actor: u32;
    let mut thread: Option<u32> = None;
    let mut task: Option<u32> = None;
    match f.anchor {
        Anchor::NewAgent => {
            actor = Fresh::take(&mut fresh.agent);
            touches.push((Obj::Agent { id: actor }, Mode::Write));
        }
        Anchor::Agent => {
            actor = world.agent(rng);
            touches.push((Obj::Agent { id: actor }, Mode::Write));
        }
        Anchor::Memory => {
            actor = world.agent(rng);
            let new = kind == ActionKind::WriteLabeled && rng.chance(shapes.labeled_new);
            let m = if new {
                Obj::Memory { id: Fresh::take(&mut fresh.memory), author: actor, born_in: None }
            } else {
                memory_obj(world.own_memory(actor, rng))
            };
            touches.push((m, Mode::Write));
        }
        Anchor::NewMemory => {
            actor = world.agent(rng);
            touches
                .push((Obj::Memory { id: Fresh::take(&mut fresh.memory), author: actor, born_in: None }, Mode::Write));
        }
        Anchor::Thread => {
            let t = world.thread(rng);
            thread = Some(t);
            actor = if by_governor {
                world.threads[t as usize].creator
            } else if kind == ActionKind::Join {
                world.agent(rng)
            } else {
                world.member(t, rng)
            };
            touches.push((thread_obj(t), Mode::Write));
        }
        Anchor::NewThread => {
            actor = world.agent(rng);
            touches.push((Obj::Thread { id: Fresh::take(&mut fresh.thread), creator: actor }, Mode::Write));
        }
        Anchor::Task => {
            let k = world.task(rng);
            task = Some(k);
            actor = if by_author { world.tasks[k as usize].author } else { world.agent(rng) };
            touches.push((task_obj(k), Mode::Write));
        }
        Anchor::NewTask => {
            actor = world.agent(rng);
            touches.push((Obj::Task { id: Fresh::take(&mut fresh.task), author: actor }, Mode::Write));
        }
        Anchor::Obligation => {
            actor = 0; // the system: no caller, no home
            if rng.chance(shapes.expire_in_thread) {
                touches.push((thread_obj(world.thread(rng)), Mode::Write));
            } else {
                touches.push((task_obj(world.task(rng)), Mode::Write));
            }
        }
    }

    // Bodies: new content becomes a Memory born in the thread; a pin is checked (§9).
    let bodies = match f.new_memories {
        NewMemories::None => 0,
        NewMemories::MaybeOne => 1,
        NewMemories::PerRank => {
            let others = thread.map_or(1, |t| world.threads[t as usize].members.len().saturating_sub(1)).max(1);
            1 + (1 + rng.below(shapes.max_ranks as u64) as usize).min(others)
        }
    };
    if f.pins == Pins::Body && f.anchor == Anchor::Thread {
        for _ in 0..bodies {
            if rng.chance(shapes.body_content) {
                let m = Obj::Memory { id: Fresh::take(&mut fresh.memory), author: actor, born_in: thread };
                touches.push((m, Mode::Write));
            } else if rng.chance(shapes.pin_own) {
                touches.push((memory_obj(world.own_memory(actor, rng)), Mode::Read));
            } else {
                touches.push((memory_obj(world.any_memory(rng)), Mode::Read));
            }
        }
    }
    if f.task_ref && rng.chance(shapes.task_ref) {
        touches.push((task_obj(world.task(rng)), Mode::Read));
    }
    if f.pins == Pins::ContractInputs {
        match task {
            Some(k) => {
                if let Some(m) = world.tasks[k as usize].input {
                    touches.push((memory_obj(m), Mode::Read));
                }
            }
            // A new contract pins one of the author's own Memories with the documented share.
            None => {
                if rng.chance(world.shape.tasks_with_input) {
                    touches.push((memory_obj(world.own_memory(actor, rng)), Mode::Read));
                }
            }
        }
    }
    if f.all_memberships {
        // §4: every membership ends; every other group where the agent is present (its Tasks'
        // groups here) turns its status copy to deactivated in the same transaction.
        for &t in &world.agent_threads[actor as usize] {
            touches.push((thread_obj(t), Mode::Write));
        }
        for &k in &world.agent_tasks[actor as usize] {
            touches.push((task_obj(k), Mode::Write));
        }
    }
    match f.presence {
        Presence::None => {}
        Presence::Caller => touches.push((Obj::Agent { id: actor }, Mode::Bind)),
        Presence::CallerAndNamed => {
            touches.push((Obj::Agent { id: actor }, Mode::Bind));
            if rng.chance(shapes.restricted) {
                for _ in 0..1 + rng.below(3) {
                    touches.push((Obj::Agent { id: world.agent(rng) }, Mode::Bind));
                }
            }
            if rng.chance(shapes.designated_judge) {
                touches.push((Obj::Agent { id: world.agent(rng) }, Mode::Bind));
            }
        }
    }
    Instance { kind, touches }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::WorldShape;

    #[test]
    fn mixes_sample_in_proportion() {
        let mix = Mix::demo();
        let mut rng = Rng::new(5);
        let n = 100_000;
        let posts = (0..n).filter(|_| mix.sample(&mut rng) == ActionKind::Post).count();
        let expected = mix.share(ActionKind::Post);
        assert!((posts as f64 / n as f64 - expected).abs() < 0.01, "{posts} vs {expected}");
    }

    #[test]
    fn blend_shares_add_up() {
        let b = Mix::headline();
        let total: f64 = ActionKind::ALL.iter().map(|&k| b.share(k)).sum();
        assert!((total - 1.0).abs() < 1e-9);
        // Every action kind of the protocol appears in some mix the report measures. The wake
        // targets (issue #35) are not protocol actions but the runtime's notification settings
        // and its deliverer's progress, writes of the agent's home only: their rows are measured
        // alone, not drawn in the mixes.
        let runtime = [ActionKind::SetWakeTarget, ActionKind::RemoveWakeTarget, ActionKind::RecordWake];
        for &k in ActionKind::ALL {
            assert_eq!(b.share(k) > 0.0, !runtime.contains(&k), "{k:?}: drawn exactly when a protocol action");
        }
    }

    #[test]
    fn drawn_instances_follow_their_footprint() {
        let mut rng = Rng::new(11);
        let shape = WorldShape { agents: 200, threads: 50, tasks: 20, memories: 300, ..WorldShape::documented() };
        let world = World::generate(&shape, &mut rng);
        let mut fresh = Fresh::after(&world);
        let shapes = Shapes::documented();
        for &kind in ActionKind::ALL {
            for _ in 0..50 {
                let i = draw(kind, &world, &shapes, &mut fresh, &mut rng);
                assert_eq!(i.touches[0].1, Mode::Write, "{kind:?}: the anchor is written");
                if footprint(kind).anchor_only() {
                    assert!(i.touches[1..].iter().all(|t| t.1 == Mode::Bind), "{kind:?}: {:?}", i.touches);
                }
            }
        }
    }
}
