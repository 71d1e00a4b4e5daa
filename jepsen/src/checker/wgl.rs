//! A Wing–Gong–Lowe linearizability checker.
//!
//! **What it proves.** Given operations with real-time intervals and a sequential [`Model`], it
//! finds an order of the operations that (a) the model accepts, observed results included, and
//! (b) respects real time: if A completed before B was invoked, A comes first. Such an order is a
//! *linearization*; if none exists the history is not linearizable (L5: "the effect of competing
//! actions MUST equal some legal serial order").
//!
//! **Indeterminate operations** (Jepsen `info`, or never completed) have no return: they may be
//! linearized at any point after their invocation, or never. The search succeeds once every
//! *determinate* operation is placed; indeterminate ones left over simply did not happen.
//!
//! **Algorithm.** Lowe's refinement of Wing & Gong ("Testing for linearizability", 2017), as in
//! porcupine and Knossos's `wgl`: the call and return events sit in a doubly linked list in
//! history order. The search walks the list; a call whose operation the model accepts from the
//! current state is linearized (both its events are lifted out of the list) and the walk restarts
//! at the head; reaching a return event means that operation had to be linearized already, so the
//! search backtracks. Configurations `(set of linearized ops, model state)` already explored are
//! memoized, which turns the exponential search into one bounded by the number of distinct
//! configurations. A step bound (and an optional time budget) yields [`WglResult::Unknown`]
//! instead of hanging.
//!
//! Check objects independently (P-compositionality, Herlihy & Wing): a history is linearizable
//! iff each object's sub-history is, and the per-object searches are exponentially cheaper.

use std::collections::HashSet;
use std::fmt::Debug;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// A sequential specification.
///
/// `Op` carries both the input and the observed outcome (or the fact that the outcome is
/// unknown). [`Model::step`] answers whether the op, with that outcome, is legal in this state,
/// and the state after it. For an op whose outcome is unknown, `step` returns the state after the
/// op takes effect with whatever result the model would produce; the option of it never taking
/// effect is handled by the search.
pub trait Model: Clone + Eq + Hash + Debug {
    type Op: Debug;
    fn step(&self, op: &Self::Op) -> Option<Self>;
}

/// One operation for the search.
#[derive(Clone, Debug)]
pub struct Entry<O> {
    /// The caller's name for the op, reported back (normally the history index of the
    /// invocation).
    pub id: u64,
    pub op: O,
    /// Position of the invocation (a history index).
    pub call: u64,
    /// Position of the completion; `None` for an indeterminate op. Positions should be distinct;
    /// a return and a call at the same position count as concurrent.
    pub ret: Option<u64>,
}

/// Search bounds.
#[derive(Clone, Copy, Debug)]
pub struct WglOptions {
    /// Maximum search steps (call attempts plus backtracks) before giving up with `Unknown`.
    pub max_steps: u64,
    /// Optional wall-clock budget; `None` keeps results deterministic.
    pub time_budget: Option<Duration>,
}

impl Default for WglOptions {
    fn default() -> WglOptions {
        WglOptions { max_steps: 5_000_000, time_budget: None }
    }
}

/// The answer of a search.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WglResult<S> {
    /// A linearization, as entry ids in order (indeterminate ops that never happened omitted).
    Linearizable { order: Vec<u64> },
    /// No linearization exists. The witness is the deepest configuration reached: the ops
    /// linearized so far, the model state after them, and the op that could not be placed next
    /// (its return came before the model would accept it).
    NotLinearizable { prefix: Vec<u64>, state: S, stuck: Option<u64> },
    /// The bound was reached first.
    Unknown,
}

/// The answer plus the work it took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WglReport<S> {
    pub result: WglResult<S>,
    pub steps: u64,
}

const NIL: usize = usize::MAX;

/// A fixed-size bitset of linearized entries.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Bits {
        Bits(vec![0; n.div_ceil(64)])
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn clear(&mut self, i: usize) {
        self.0[i / 64] &= !(1 << (i % 64));
    }
}

/// Checks whether `entries`, starting from `init`, are linearizable.
pub fn check<M: Model>(init: &M, entries: &[Entry<M::Op>], opts: &WglOptions) -> WglReport<M> {
    let n = entries.len();
    // Nodes: 2i = call of entry i, 2i+1 = its return; `head` is the sentinel.
    let head = 2 * n;
    let mut next = vec![NIL; 2 * n + 1];
    let mut prev = vec![NIL; 2 * n + 1];
    let mut events: Vec<(u64, u8, usize)> = Vec::with_capacity(2 * n);
    for (i, e) in entries.iter().enumerate() {
        events.push((e.call, 1, 2 * i));
        if let Some(r) = e.ret {
            // On a tie the call sorts first: the two ops count as concurrent.
            events.push((r.max(e.call), 2, 2 * i + 1));
        }
    }
    events.sort_unstable();
    let mut last = head;
    for &(_, _, node) in &events {
        next[last] = node;
        prev[node] = last;
        last = node;
    }

    let has_ret = |i: usize| entries[i].ret.is_some();
    let lift = |next: &mut Vec<usize>, prev: &mut Vec<usize>, i: usize| {
        for node in [2 * i, 2 * i + 1] {
            if node == 2 * i + 1 && !has_ret(i) {
                continue;
            }
            let (p, q) = (prev[node], next[node]);
            next[p] = q;
            if q != NIL {
                prev[q] = p;
            }
        }
    };
    let unlift = |next: &mut Vec<usize>, prev: &mut Vec<usize>, i: usize| {
        for node in [2 * i + 1, 2 * i] {
            if node == 2 * i + 1 && !has_ret(i) {
                continue;
            }
            let (p, q) = (prev[node], next[node]);
            next[p] = node;
            if q != NIL {
                prev[q] = node;
            }
        }
    };

    let started = Instant::now();
    let mut remaining = entries.iter().filter(|e| e.ret.is_some()).count();
    let mut state = init.clone();
    let mut linearized = Bits::new(n);
    let mut cache: HashSet<(Bits, M)> = HashSet::new();
    let mut stack: Vec<(usize, M)> = Vec::new();
    let mut best: Option<(Vec<u64>, M, Option<u64>)> = None;
    let mut steps: u64 = 0;
    let mut node = next[head];

    loop {
        if remaining == 0 {
            let order = stack.iter().map(|(i, _)| entries[*i].id).collect();
            return WglReport { result: WglResult::Linearizable { order }, steps };
        }
        steps += 1;
        let out_of_time = steps.is_multiple_of(1024) && opts.time_budget.is_some_and(|b| started.elapsed() > b);
        if steps > opts.max_steps || out_of_time {
            return WglReport { result: WglResult::Unknown, steps };
        }
        if node != NIL && node.is_multiple_of(2) {
            // A call: try to linearize it here.
            let i = node / 2;
            if let Some(after) = state.step(&entries[i].op) {
                linearized.set(i);
                if cache.insert((linearized.clone(), after.clone())) {
                    let before = std::mem::replace(&mut state, after);
                    stack.push((i, before));
                    if has_ret(i) {
                        remaining -= 1;
                    }
                    lift(&mut next, &mut prev, i);
                    node = next[head];
                    continue;
                }
                linearized.clear(i);
            }
            node = next[node];
        } else {
            // A return (or the end of the list): the op it closes is not linearized yet, and
            // nothing left can be placed before it. Remember the deepest dead end, then backtrack.
            if best.as_ref().is_none_or(|(p, _, _)| stack.len() >= p.len()) {
                let prefix = stack.iter().map(|(i, _)| entries[*i].id).collect();
                let stuck = (node != NIL).then(|| entries[node / 2].id);
                best = Some((prefix, state.clone(), stuck));
            }
            let Some((i, before)) = stack.pop() else {
                let (prefix, state, stuck) = best.unwrap_or_else(|| (Vec::new(), init.clone(), None));
                return WglReport { result: WglResult::NotLinearizable { prefix, state, stuck }, steps };
            };
            state = before;
            linearized.clear(i);
            if has_ret(i) {
                remaining += 1;
            }
            unlift(&mut next, &mut prev, i);
            node = next[2 * i];
        }
    }
}

/// A read/write/compare-and-set register: the textbook model, used to test the search itself.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Register(pub Option<i64>);

/// An operation on a [`Register`]; `None` results mean the outcome is unknown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegisterOp {
    Write(i64),
    /// A read and the value it returned.
    Read(Option<i64>),
    /// `Cas(from, to, succeeded)`; `succeeded == None` when indeterminate.
    Cas(i64, i64, Option<bool>),
}

impl Model for Register {
    type Op = RegisterOp;
    fn step(&self, op: &RegisterOp) -> Option<Register> {
        match *op {
            RegisterOp::Write(v) => Some(Register(Some(v))),
            RegisterOp::Read(v) => (self.0 == v).then(|| self.clone()),
            RegisterOp::Cas(from, to, ok) => {
                let matches = self.0 == Some(from);
                match ok {
                    Some(true) => matches.then_some(Register(Some(to))),
                    Some(false) => (!matches).then(|| self.clone()),
                    None => Some(if matches { Register(Some(to)) } else { self.clone() }),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(id: u64, op: RegisterOp, call: u64, ret: Option<u64>) -> Entry<RegisterOp> {
        Entry { id, op, call, ret }
    }

    fn run(entries: &[Entry<RegisterOp>]) -> WglResult<Register> {
        check(&Register::default(), entries, &WglOptions::default()).result
    }

    #[test]
    fn empty_history_is_linearizable() {
        assert_eq!(run(&[]), WglResult::Linearizable { order: vec![] });
    }

    #[test]
    fn sequential_write_then_read() {
        let h = [e(0, RegisterOp::Write(1), 0, Some(1)), e(2, RegisterOp::Read(Some(1)), 2, Some(3))];
        assert_eq!(run(&h), WglResult::Linearizable { order: vec![0, 2] });
    }

    #[test]
    fn concurrent_read_may_see_old_or_new() {
        // write(1) [0..5] overlaps read [1..2] -> read may return None or Some(1).
        for seen in [None, Some(1)] {
            let h = [e(0, RegisterOp::Write(1), 0, Some(5)), e(1, RegisterOp::Read(seen), 1, Some(2))];
            assert!(matches!(run(&h), WglResult::Linearizable { .. }), "{seen:?}");
        }
    }

    #[test]
    fn stale_read_after_completed_write_is_flagged() {
        let h = [e(0, RegisterOp::Write(1), 0, Some(1)), e(2, RegisterOp::Read(None), 2, Some(3))];
        match run(&h) {
            WglResult::NotLinearizable { prefix, stuck, .. } => {
                assert_eq!(prefix, vec![0]);
                assert_eq!(stuck, Some(2));
            }
            other => panic!("expected not linearizable, got {other:?}"),
        }
    }

    #[test]
    fn reads_that_go_back_in_time_are_flagged() {
        // write 1, write 2 concurrent with two sequential reads that see 2 then 1.
        let h = [
            e(0, RegisterOp::Write(1), 0, Some(1)),
            e(2, RegisterOp::Write(2), 2, Some(9)),
            e(3, RegisterOp::Read(Some(2)), 3, Some(4)),
            e(5, RegisterOp::Read(Some(1)), 5, Some(6)),
        ];
        assert!(matches!(run(&h), WglResult::NotLinearizable { .. }));
    }

    #[test]
    fn indeterminate_write_may_happen_late_or_never() {
        // info write(1) invoked at 0; a later read sees 1, a still later read... sees 1 again.
        let happened = [
            e(0, RegisterOp::Write(1), 0, None),
            e(2, RegisterOp::Read(None), 2, Some(3)),
            e(4, RegisterOp::Read(Some(1)), 4, Some(5)),
        ];
        assert!(matches!(run(&happened), WglResult::Linearizable { .. }));
        let never = [e(0, RegisterOp::Write(1), 0, None), e(2, RegisterOp::Read(None), 2, Some(3))];
        assert_eq!(run(&never), WglResult::Linearizable { order: vec![2] });
        // But it cannot un-happen: seen, then gone.
        let flicker = [
            e(0, RegisterOp::Write(1), 0, None),
            e(2, RegisterOp::Read(Some(1)), 2, Some(3)),
            e(4, RegisterOp::Read(None), 4, Some(5)),
        ];
        assert!(matches!(run(&flicker), WglResult::NotLinearizable { .. }));
    }

    #[test]
    fn cas_outcomes_are_checked() {
        let ok = [e(0, RegisterOp::Write(1), 0, Some(1)), e(2, RegisterOp::Cas(1, 2, Some(true)), 2, Some(3))];
        assert!(matches!(run(&ok), WglResult::Linearizable { .. }));
        let bad = [e(0, RegisterOp::Write(1), 0, Some(1)), e(2, RegisterOp::Cas(1, 2, Some(false)), 2, Some(3))];
        assert!(matches!(run(&bad), WglResult::NotLinearizable { .. }));
    }

    #[test]
    fn the_step_bound_yields_unknown() {
        // Many concurrent writes and a final impossible read: the search must explore a lot.
        let mut h: Vec<Entry<RegisterOp>> = (0..10).map(|i| e(i, RegisterOp::Write(i as i64), i, Some(100))).collect();
        h.push(e(200, RegisterOp::Read(Some(99)), 200, Some(201)));
        let report = check(&Register::default(), &h, &WglOptions { max_steps: 50, time_budget: None });
        assert_eq!(report.result, WglResult::Unknown);
        // With the default bound the memoized search settles it quickly.
        let report = check(&Register::default(), &h, &WglOptions::default());
        assert!(matches!(report.result, WglResult::NotLinearizable { .. }), "{:?}", report.result);
    }
}
