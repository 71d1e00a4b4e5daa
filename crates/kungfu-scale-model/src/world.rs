//! The synthetic deployment the actions run against: agents, threads with members, Tasks and
//! Memories, with Zipf-skewed sizes and activity. Objects are numbered by activity rank (index 0 is
//! the busiest); placements hash the numbers, so rank says nothing about where an object lives.

use crate::rng::Rng;
use crate::zipf::Zipf;

/// The shape of the deployment. The documented run uses [`WorldShape::documented`].
#[derive(Clone, Debug, PartialEq)]
pub struct WorldShape {
    pub agents: u32,
    pub threads: u32,
    pub tasks: u32,
    /// Memories that exist before the run, besides one standalone Memory per agent.
    pub memories: u32,
    /// Zipf exponent of agent activity (who acts, who joins, who is a member).
    pub agent_skew: f64,
    /// Zipf exponent of thread activity (where the next thread action happens).
    pub thread_skew: f64,
    /// Zipf exponent of thread sizes over `2..=max_thread_size` members.
    pub size_skew: f64,
    pub max_thread_size: u32,
    /// Zipf exponent of Task activity.
    pub task_skew: f64,
    /// Share of the pre-existing Memories born in a thread (an entry's content), the rest standalone.
    pub born_in_thread: f64,
    /// Share of Tasks whose contract pins a required input (§7.1).
    pub tasks_with_input: f64,
}

impl WorldShape {
    pub fn documented() -> WorldShape {
        WorldShape {
            agents: 10_000,
            threads: 4_000,
            tasks: 1_500,
            memories: 40_000,
            agent_skew: 1.0,
            thread_skew: 0.9,
            size_skew: 1.3,
            max_thread_size: 64,
            task_skew: 0.9,
            born_in_thread: 0.7,
            tasks_with_input: 0.5,
        }
    }
}

#[derive(Clone, Debug)]
pub struct ThreadRec {
    /// The creator, its first governor.
    pub creator: u32,
    /// Members, creator first, distinct.
    pub members: Vec<u32>,
}

#[derive(Clone, Debug)]
pub struct TaskRec {
    pub author: u32,
    /// A required input: one of the author's own Memories.
    pub input: Option<u32>,
}

#[derive(Clone, Copy, Debug)]
pub struct MemoryRec {
    pub author: u32,
    /// The thread whose entry created it, if any.
    pub born_in: Option<u32>,
}

/// The deployment, and the distributions that pick its objects.
#[derive(Clone, Debug)]
pub struct World {
    pub shape: WorldShape,
    pub threads: Vec<ThreadRec>,
    pub tasks: Vec<TaskRec>,
    pub memories: Vec<MemoryRec>,
    /// Each agent's own Memories (never empty: every agent has one standalone Memory).
    pub agent_memories: Vec<Vec<u32>>,
    /// Each agent's memberships.
    pub agent_threads: Vec<Vec<u32>>,
    /// The Tasks each agent authored (it is present in their groups).
    pub agent_tasks: Vec<Vec<u32>>,
    pub agent_pick: Zipf,
    pub thread_pick: Zipf,
    pub task_pick: Zipf,
}

impl World {
    pub fn generate(shape: &WorldShape, rng: &mut Rng) -> World {
        let agent_pick = Zipf::new(shape.agents as usize, shape.agent_skew);
        let thread_pick = Zipf::new(shape.threads as usize, shape.thread_skew);
        let task_pick = Zipf::new(shape.tasks as usize, shape.task_skew);
        let sizes = Zipf::new(shape.max_thread_size as usize - 1, shape.size_skew);
        let n_agents = shape.agents as usize;

        let mut agent_threads = vec![Vec::new(); n_agents];
        let mut threads = Vec::with_capacity(shape.threads as usize);
        for t in 0..shape.threads {
            // Busier threads are not necessarily larger: sizes are drawn independently of rank.
            let size = sizes.sample(rng) + 1;
            let mut members: Vec<u32> = Vec::with_capacity(size);
            let mut tries = 0;
            while members.len() < size && tries < size * 20 {
                tries += 1;
                let a = agent_pick.index(rng) as u32;
                if !members.contains(&a) {
                    members.push(a);
                }
            }
            for &m in &members {
                agent_threads[m as usize].push(t);
            }
            threads.push(ThreadRec { creator: members[0], members });
        }

        let mut memories = Vec::with_capacity(n_agents + shape.memories as usize);
        let mut agent_memories = vec![Vec::new(); n_agents];
        for a in 0..shape.agents {
            agent_memories[a as usize].push(memories.len() as u32);
            memories.push(MemoryRec { author: a, born_in: None });
        }
        for _ in 0..shape.memories {
            let author = agent_pick.index(rng) as u32;
            let mine = &agent_threads[author as usize];
            let born_in = if !mine.is_empty() && rng.chance(shape.born_in_thread) {
                Some(mine[rng.below(mine.len() as u64) as usize])
            } else {
                None
            };
            agent_memories[author as usize].push(memories.len() as u32);
            memories.push(MemoryRec { author, born_in });
        }

        let mut tasks = Vec::with_capacity(shape.tasks as usize);
        let mut agent_tasks = vec![Vec::new(); n_agents];
        for k in 0..shape.tasks {
            let author = agent_pick.index(rng) as u32;
            let input = if rng.chance(shape.tasks_with_input) {
                let own = &agent_memories[author as usize];
                Some(own[rng.below(own.len() as u64) as usize])
            } else {
                None
            };
            agent_tasks[author as usize].push(k);
            tasks.push(TaskRec { author, input });
        }

        World {
            shape: shape.clone(),
            threads,
            tasks,
            memories,
            agent_memories,
            agent_threads,
            agent_tasks,
            agent_pick,
            thread_pick,
            task_pick,
        }
    }

    pub fn agent(&self, rng: &mut Rng) -> u32 {
        self.agent_pick.index(rng) as u32
    }

    pub fn thread(&self, rng: &mut Rng) -> u32 {
        self.thread_pick.index(rng) as u32
    }

    pub fn task(&self, rng: &mut Rng) -> u32 {
        self.task_pick.index(rng) as u32
    }

    /// A member of thread `t`, uniformly.
    pub fn member(&self, t: u32, rng: &mut Rng) -> u32 {
        let m = &self.threads[t as usize].members;
        m[rng.below(m.len() as u64) as usize]
    }

    /// One of the agent's own Memories, uniformly.
    pub fn own_memory(&self, a: u32, rng: &mut Rng) -> u32 {
        let own = &self.agent_memories[a as usize];
        own[rng.below(own.len() as u64) as usize]
    }

    /// Any Memory (pinning another agent's public Memory), uniformly.
    pub fn any_memory(&self, rng: &mut Rng) -> u32 {
        rng.below(self.memories.len() as u64) as u32
    }
}
