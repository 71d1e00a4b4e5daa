//! Histories from a simulated system: a correct one must always check valid, whatever the
//! interleaving and timeouts; a buggy one must be caught. This exercises the WGL search and the
//! real-time rules on many more interleavings than the hand-written cases.

use kungfu_jepsen::checker::admission;
use kungfu_jepsen::checker::seq;
use kungfu_jepsen::checker::{Validity, Verdict};
use kungfu_jepsen::history::{History, HistoryBuilder};
use serde_json::{Value, json};

/// A small deterministic generator (no dependency needed).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// One simulated client operation.
struct SimOp {
    process: u64,
    invoke: u64,
    /// When it takes effect, if it does.
    effect: Option<u64>,
    complete: u64,
    /// The completion is `info` (a timeout): the client does not learn the result.
    timed_out: bool,
    kind: Kind,
    result: Value,
    failed: Option<&'static str>,
}

#[derive(Clone)]
enum Kind {
    Adopt(String),
    Read,
    Append(String),
}

/// Plans `n` ops over `procs` processes: sequential per process, overlapping across them.
/// `kinds` picks each op's kind.
fn plan(rng: &mut Lcg, n: usize, procs: u64, mut kinds: impl FnMut(&mut Lcg, usize) -> Kind) -> Vec<SimOp> {
    let mut free_at = vec![0u64; procs as usize];
    let mut next_process = procs;
    let mut ids: Vec<u64> = (0..procs).collect();
    let mut ops = Vec::new();
    for i in 0..n {
        let slot = rng.below(procs) as usize;
        let invoke = free_at[slot] + 1 + rng.below(5);
        let effect_at = invoke + 1 + rng.below(10);
        let complete = effect_at + 1 + rng.below(10);
        let timed_out = rng.chance(10);
        // A timed-out op takes effect half the time (maybe after the client gave up).
        let effect = if timed_out && rng.chance(50) { None } else { Some(effect_at + if timed_out { 15 } else { 0 }) };
        ops.push(SimOp {
            process: ids[slot],
            invoke,
            effect,
            complete,
            timed_out,
            kind: kinds(rng, i),
            result: Value::Null,
            failed: None,
        });
        free_at[slot] = complete;
        if timed_out {
            // Jepsen: a process that timed out is crashed; its thread continues as a new process.
            ids[slot] = next_process;
            next_process += 1;
        }
    }
    ops
}

/// Writes the ops' events in time order (invoke before complete on ties is avoided by +1s).
fn emit(ops: &[SimOp], f: impl Fn(&Kind) -> (&'static str, Value)) -> HistoryBuilder {
    let mut events: Vec<(u64, u8, usize)> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        events.push((op.invoke, 0, i));
        events.push((op.complete, 1, i));
    }
    events.sort_unstable();
    let mut b = HistoryBuilder::new();
    for (t, phase, i) in events {
        let op = &ops[i];
        let (name, request) = f(&op.kind);
        b.at(t * 1_000_000);
        if phase == 0 {
            b.invoke(op.process, name, request);
        } else if op.timed_out {
            b.info(op.process, "TIMEOUT");
        } else if let Some(code) = op.failed {
            b.fail(op.process, code);
        } else {
            b.ok(op.process, op.result.clone());
        }
    }
    b
}

fn simulate_admission(seed: u64, server_limit: usize) -> History {
    let limit = 3;
    let mut rng = Lcg(seed);
    let mut ops = plan(&mut rng, 60, 5, |rng, i| {
        if rng.chance(20) { Kind::Read } else { Kind::Adopt(format!("a{}", if rng.chance(10) { i / 2 } else { i })) }
    });
    // Apply effects in effect order against a set that admits `server_limit`.
    let mut order: Vec<usize> = (0..ops.len()).filter(|i| ops[*i].effect.is_some()).collect();
    order.sort_by_key(|i| ops[*i].effect);
    let mut set: Vec<String> = Vec::new();
    for i in order {
        match ops[i].kind.clone() {
            Kind::Adopt(agent) => {
                if set.contains(&agent) {
                } else if set.len() < server_limit {
                    set.push(agent.clone());
                } else {
                    ops[i].failed = Some("ADOPTION_LIMIT_REACHED");
                }
                ops[i].result = json!({"task": "t1", "agent": agent});
            }
            Kind::Read => {
                ops[i].result = json!({"task": "t1", "adopters": set.clone()});
            }
            Kind::Append(_) => unreachable!(),
        }
    }
    // Reads that never took effect return nothing: make them time out.
    for op in ops.iter_mut().filter(|op| op.effect.is_none()) {
        op.timed_out = true;
    }
    let mut b = emit(&ops, |k| match k {
        Kind::Adopt(agent) => ("adopt", json!({"task": "t1", "agent": agent})),
        _ => ("read", json!({"task": "t1"})),
    });
    let end = b.now() + 1_000_000_000;
    b.at(end);
    b.invoke(1000, "create", json!({"task": "t1", "max_adoptions": limit}));
    b.ok(1000, json!({"task": "t1", "max_adoptions": limit}));
    b.invoke(1001, "final-read", json!({"task": "t1"}));
    b.ok(1001, json!({"task": "t1", "adopters": set}));
    b.build().expect("well-formed")
}

fn check_admission(h: &History) -> Verdict {
    admission::check(h, &admission::Options::default())
}

#[test]
fn a_correct_admission_system_always_checks_valid() {
    for seed in 0..200 {
        let h = simulate_admission(seed, 3);
        let v = check_admission(&h);
        assert_eq!(
            v.valid,
            Validity::Valid,
            "seed {seed}: {}\n{:#?}\n{}",
            v.summary(),
            v.anomalies,
            h.to_jsonl_string()
        );
    }
}

#[test]
fn an_over_admitting_system_is_caught() {
    let mut caught = 0;
    for seed in 0..200 {
        let h = simulate_admission(seed, 4);
        let v = check_admission(&h);
        assert_ne!(v.valid, Validity::Unknown, "seed {seed}: {}", v.summary());
        if v.valid == Validity::Invalid {
            caught += 1;
        }
    }
    // Nearly every run hands out a fourth adoption; each such run must be caught.
    assert!(caught > 150, "caught {caught} of 200");
}

fn simulate_seq(seed: u64, stale_reads: bool) -> History {
    let mut rng = Lcg(seed);
    let mut ops =
        plan(&mut rng, 80, 4, |rng, i| if rng.chance(25) { Kind::Read } else { Kind::Append(format!("e{i}")) });
    let mut order: Vec<usize> = (0..ops.len()).filter(|i| ops[*i].effect.is_some()).collect();
    order.sort_by_key(|i| ops[*i].effect);
    let mut list: Vec<String> = Vec::new();
    let entries = |list: &[String]| -> Value {
        list.iter().enumerate().map(|(i, id)| json!({"seq": i + 1, "id": id})).collect::<Vec<_>>().into()
    };
    for i in order {
        match ops[i].kind.clone() {
            Kind::Append(id) => {
                list.push(id.clone());
                ops[i].result = json!({"thread": "t1", "id": id, "seq": list.len()});
            }
            Kind::Read => {
                // A buggy follower serves reads two entries behind.
                let n = if stale_reads { list.len().saturating_sub(2) } else { list.len() };
                ops[i].result = json!({"thread": "t1", "entries": entries(&list[..n])});
            }
            Kind::Adopt(_) => unreachable!(),
        }
    }
    for op in ops.iter_mut().filter(|op| op.effect.is_none()) {
        op.timed_out = true;
    }
    let mut b = emit(&ops, |k| match k {
        Kind::Append(id) => ("append", json!({"thread": "t1", "id": id})),
        _ => ("read", json!({"thread": "t1"})),
    });
    let end = b.now() + 1_000_000_000;
    b.at(end);
    for (p, node) in [(1000, "n1"), (1001, "n2")] {
        b.invoke(p, "final-read", json!({"thread": "t1"})).node(node);
        b.ok(p, json!({"thread": "t1", "entries": entries(&list)}));
    }
    b.build().expect("well-formed")
}

#[test]
fn a_correct_sequencer_always_checks_valid() {
    for seed in 0..200 {
        let h = simulate_seq(seed, false);
        let v = seq::check(&h, &seq::Options::default());
        assert_eq!(v.valid, Validity::Valid, "seed {seed}: {}\n{:#?}", v.summary(), v.anomalies);
    }
}

#[test]
fn stale_reads_from_a_lagging_node_are_caught() {
    let caught = (0..100)
        .filter(|seed| {
            let v = seq::check(&simulate_seq(*seed, true), &seq::Options::default());
            v.anomalies_of("stale_read") > 0
        })
        .count();
    assert!(caught > 90, "caught {caught} of 100");
}
