//! Declared topologies (design §4.7, fak `internal/agenttopo`): a directed acyclic graph of
//! handoffs over a group's members, as pure functions over member ids.
//!
//! Edges are declarative: they say whose outputs a member folds ([`Topology::combine_in`]), and the
//! runtime does not enforce them (design §4.7: enforcing them would be a restriction, allowed, but
//! not proposed). The neighbor lists keep declaration order, not rank order, so the caller chooses
//! the order a fold reads them in.

use crate::reduce::{CombineError, Combined, Reduction, Vote, combine};
use kungfu_types::AgentId;
use std::collections::{BTreeMap, BTreeSet};

/// Why a topology cannot be declared, or a member's inputs cannot be combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// A topology needs at least one member.
    #[error("a topology needs at least one member")]
    Empty,
    /// An edge endpoint, or the member asked about, is not a member.
    #[error("{0} is not a member of the topology")]
    UnknownMember(AgentId),
    /// An edge from a member to itself (fak reports it as a cycle).
    #[error("self-edge at {0}")]
    SelfEdge(AgentId),
    /// The same edge is declared twice.
    #[error("duplicate edge {0} -> {1}")]
    DuplicateEdge(AgentId, AgentId),
    /// The edges form a cycle; the member is where the search found the back edge.
    #[error("the edges form a cycle through {0}")]
    Cycle(AgentId),
    /// [`Topology::combine_in`] on a member that no edge leads to.
    #[error("{0} has no in-neighbors")]
    NoInNeighbors(AgentId),
    /// An in-neighbor of the member being combined has no vote.
    #[error("no output from {from} for {to}")]
    MissingOutput {
        /// The in-neighbor without a vote.
        from: AgentId,
        /// The member being combined.
        to: AgentId,
    },
    /// An in-neighbor of the member being combined has more than one vote.
    #[error("more than one output from {from} for {to}")]
    DuplicateOutput {
        /// The in-neighbor with several votes.
        from: AgentId,
        /// The member being combined.
        to: AgentId,
    },
    /// The in-neighbors' votes could not be folded.
    #[error(transparent)]
    Combine(#[from] CombineError),
}

/// A validated DAG over a set of members. Built only by [`Topology::declare`] and the constructors
/// over it, so every value is acyclic, with known endpoints and no repeated edge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    members: BTreeSet<AgentId>,
    /// The edges `(from, to)` in declaration order.
    edges: Vec<(AgentId, AgentId)>,
    /// Each member's in- and out-neighbors, in declaration order; members without edges are absent.
    incoming: BTreeMap<AgentId, Vec<AgentId>>,
    outgoing: BTreeMap<AgentId, Vec<AgentId>>,
}

/// One member's declared neighborhood (fak `Exchange`), in declaration order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exchange {
    /// The member.
    pub node: AgentId,
    /// Members with an edge to `node`, in the order those edges were declared.
    pub incoming: Vec<AgentId>,
    /// Members `node` has an edge to, in the order those edges were declared.
    pub outgoing: Vec<AgentId>,
}

impl Topology {
    /// Validates and builds a topology: each edge `(from, to)` in order must join two members, not
    /// a member to itself, and not repeat an earlier edge; then the whole must be acyclic (checked
    /// by depth-first search from the members in ascending id order, following edges in
    /// declaration order, so the member a cycle is reported at is deterministic).
    pub fn declare(members: &BTreeSet<AgentId>, edges: &[(AgentId, AgentId)]) -> Result<Topology, TopologyError> {
        if members.is_empty() {
            return Err(TopologyError::Empty);
        }
        let mut topology = Topology {
            members: members.clone(),
            edges: Vec::with_capacity(edges.len()),
            incoming: BTreeMap::new(),
            outgoing: BTreeMap::new(),
        };
        let mut seen = BTreeSet::new();
        for &(from, to) in edges {
            for end in [from, to] {
                if !members.contains(&end) {
                    return Err(TopologyError::UnknownMember(end));
                }
            }
            if from == to {
                return Err(TopologyError::SelfEdge(from));
            }
            if !seen.insert((from, to)) {
                return Err(TopologyError::DuplicateEdge(from, to));
            }
            topology.edges.push((from, to));
            topology.outgoing.entry(from).or_default().push(to);
            topology.incoming.entry(to).or_default().push(from);
        }
        topology.check_acyclic()?;
        Ok(topology)
    }

    /// A chain in rank order: rank r hands off to rank r + 1.
    pub fn linear(members: &BTreeSet<AgentId>) -> Result<Topology, TopologyError> {
        let ranked: Vec<AgentId> = members.iter().copied().collect();
        let edges: Vec<_> = ranked.windows(2).map(|pair| (pair[0], pair[1])).collect();
        Topology::declare(members, &edges)
    }

    /// A star: `center` hands off to every leaf, in ascending id order. The members are the center
    /// and the leaves; a center that is also listed as a leaf would be a self-edge and is refused.
    pub fn star(center: AgentId, leaves: &BTreeSet<AgentId>) -> Result<Topology, TopologyError> {
        let mut members = leaves.clone();
        members.insert(center);
        let edges: Vec<_> = leaves.iter().map(|&leaf| (center, leaf)).collect();
        Topology::declare(&members, &edges)
    }

    /// The members, in rank order.
    pub fn members(&self) -> &BTreeSet<AgentId> {
        &self.members
    }

    /// The edges `(from, to)`, in declaration order.
    pub fn edges(&self) -> &[(AgentId, AgentId)] {
        &self.edges
    }

    /// The members with an edge to `id`, in declaration order; `None` when `id` is not a member.
    pub fn neighbors_in(&self, id: AgentId) -> Option<&[AgentId]> {
        self.neighbors(&self.incoming, id)
    }

    /// The members `id` has an edge to, in declaration order; `None` when `id` is not a member.
    pub fn neighbors_out(&self, id: AgentId) -> Option<&[AgentId]> {
        self.neighbors(&self.outgoing, id)
    }

    fn neighbors<'a>(&self, lists: &'a BTreeMap<AgentId, Vec<AgentId>>, id: AgentId) -> Option<&'a [AgentId]> {
        self.members.contains(&id).then(|| lists.get(&id).map_or(&[][..], Vec::as_slice))
    }

    /// `node`'s in- and out-neighbors, in declaration order (fak `NeighborExchange`).
    pub fn neighbor_exchange(&self, node: AgentId) -> Result<Exchange, TopologyError> {
        let (Some(incoming), Some(outgoing)) = (self.neighbors_in(node), self.neighbors_out(node)) else {
            return Err(TopologyError::UnknownMember(node));
        };
        Ok(Exchange { node, incoming: incoming.to_vec(), outgoing: outgoing.to_vec() })
    }

    /// Folds the outputs of `node`'s in-neighbors with [`combine`], reading them in declaration
    /// order (fak `CombineIn`). `votes` may come in any order and may hold votes of other members,
    /// which are ignored; every in-neighbor must have exactly one vote, or the fold is refused
    /// rather than run over a partial or ambiguous set.
    pub fn combine_in(&self, node: AgentId, reduce: Reduction, votes: &[Vote<'_>]) -> Result<Combined, TopologyError> {
        let incoming = self.neighbors_in(node).ok_or(TopologyError::UnknownMember(node))?;
        if incoming.is_empty() {
            return Err(TopologyError::NoInNeighbors(node));
        }
        let mut ordered = Vec::with_capacity(incoming.len());
        for &from in incoming {
            let mut theirs = votes.iter().filter(|v| v.member == from);
            let vote = theirs.next().ok_or(TopologyError::MissingOutput { from, to: node })?;
            if theirs.next().is_some() {
                return Err(TopologyError::DuplicateOutput { from, to: node });
            }
            ordered.push(*vote);
        }
        Ok(combine(reduce, &ordered)?)
    }

    /// Depth-first search for a back edge, from every unvisited member in ascending id order. The
    /// search keeps its own stack rather than recursing, so a long chain cannot exhaust the thread's
    /// stack.
    fn check_acyclic(&self) -> Result<(), TopologyError> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            OnPath,
            Done,
        }
        let mut marks: BTreeMap<AgentId, Mark> = BTreeMap::new();
        for &root in &self.members {
            if marks.contains_key(&root) {
                continue;
            }
            // Each frame is a member on the current path and the index of its next out-edge.
            let mut stack = vec![(root, 0_usize)];
            marks.insert(root, Mark::OnPath);
            while let Some((id, next)) = stack.last_mut() {
                let out = self.outgoing.get(id).map_or(&[][..], Vec::as_slice);
                let Some(&to) = out.get(*next) else {
                    marks.insert(*id, Mark::Done);
                    stack.pop();
                    continue;
                };
                *next += 1;
                match marks.get(&to) {
                    Some(Mark::OnPath) => return Err(TopologyError::Cycle(to)),
                    Some(Mark::Done) => {}
                    None => {
                        marks.insert(to, Mark::OnPath);
                        stack.push((to, 0));
                    }
                }
            }
        }
        Ok(())
    }
}
