//! The coordination checkers on histories from a simulated system: a correct one must always
//! check valid, whatever the interleaving and timeouts (no false alarm from concurrency); a buggy
//! one (a scatter applied in part on one node, a mailbox cursor that skips an entry) is caught.

use kungfu_jepsen::checker::scatter::{goal_body, header_body, rank_order};
use kungfu_jepsen::checker::{Validity, messages, scatter};
use kungfu_jepsen::history::{History, HistoryBuilder};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// A small deterministic generator.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// One simulated op: sequential per process, overlapping across processes.
struct SimOp {
    process: u64,
    invoke: u64,
    /// When it takes effect, if it does.
    effect: Option<u64>,
    complete: u64,
    timed_out: bool,
    request: Value,
    idem: Option<String>,
    f: &'static str,
    result: Value,
    failed: Option<&'static str>,
}

/// Plans `n` ops over `procs` processes; `make` gives each op's `(f, request, idem)`.
fn plan(
    rng: &mut Lcg,
    n: usize,
    procs: u64,
    mut make: impl FnMut(&mut Lcg, usize, u64) -> (&'static str, Value, Option<String>),
) -> Vec<SimOp> {
    let mut free_at = vec![0u64; procs as usize];
    let mut ids: Vec<u64> = (0..procs).collect();
    let mut next_process = procs;
    let mut ops = Vec::new();
    for i in 0..n {
        let slot = rng.below(procs) as usize;
        let invoke = free_at[slot] + 1 + rng.below(5);
        let effect_at = invoke + 1 + rng.below(10);
        let complete = effect_at + 1 + rng.below(10);
        let timed_out = rng.chance(12);
        let effect = if timed_out && rng.chance(50) { None } else { Some(effect_at + if timed_out { 15 } else { 0 }) };
        let (f, request, idem) = make(rng, i, ids[slot]);
        ops.push(SimOp {
            process: ids[slot],
            invoke,
            effect,
            complete,
            timed_out,
            request,
            idem,
            f,
            result: Value::Null,
            failed: None,
        });
        free_at[slot] = complete;
        if timed_out {
            ids[slot] = next_process;
            next_process += 1;
        }
    }
    ops
}

fn emit(ops: &[SimOp]) -> HistoryBuilder {
    let mut events: Vec<(u64, u8, usize)> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        events.push((op.invoke, 0, i));
        events.push((op.complete, 1, i));
    }
    events.sort_unstable();
    let mut b = HistoryBuilder::new();
    for (t, phase, i) in events {
        let op = &ops[i];
        b.at(t * 1_000_000);
        if phase == 0 {
            let o = b.invoke(op.process, op.f, op.request.clone());
            o.node("n1");
            if let Some(k) = &op.idem {
                o.idem(k.clone());
            }
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

/// Effects in effect order.
fn effect_order(ops: &[SimOp]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..ops.len()).filter(|i| ops[*i].effect.is_some()).collect();
    order.sort_by_key(|i| ops[*i].effect);
    order
}

// ---------------------------------------------------------------------------------------------
// Scatter.

const MEMBERS: [&str; 4] = ["ag_10", "ag_9", "ag_3", "ag_12"];
const T: &str = "th_1";

#[derive(Clone, Default)]
struct Node {
    entries: Vec<Value>,
    collectives: Vec<Value>,
}

impl Node {
    fn raw(&mut self, body: &str, reply_to: Option<u64>, assignment: Option<&str>) -> u64 {
        let seq = self.entries.len() as u64 + 1;
        self.entries.push(json!({"seq": seq, "body": body, "reply_to": reply_to, "assignment": assignment}));
        seq
    }

    /// Applies scatter `id` atomically, or only its header and first goal when `partial`.
    fn apply(&mut self, id: &str, members: &[String], partial: bool) -> Value {
        let header = self.raw(&header_body(id), None, None);
        let mut ranks = Vec::new();
        for (r, m) in rank_order(members).iter().enumerate() {
            if partial && r > 0 {
                break;
            }
            let asg = format!("asg_{id}_{r}");
            let entry = self.raw(&goal_body(id, m), Some(header), Some(&asg));
            ranks.push(json!({"rank": r, "member": m, "entry": entry, "assignment": asg}));
        }
        if !partial {
            self.collectives.push(json!({"header": header, "size": ranks.len(), "ranks": ranks.clone()}));
        }
        json!({"header": header, "ranks": ranks})
    }
}

/// A scatter system on three nodes; `partial_on_n3` applies timed-out multi-rank scatters only
/// in part on the third node.
fn simulate_scatter(seed: u64, partial_on_n3: bool) -> History {
    let mut rng = Lcg(seed);
    let mut earlier: Vec<Value> = Vec::new();
    let mut ops = plan(&mut rng, 60, 4, |rng, i, _| {
        if !earlier.is_empty() && rng.chance(15) {
            let req = earlier[rng.below(earlier.len() as u64) as usize].clone();
            let key = format!("k-{}", req["id"].as_str().unwrap_or_default());
            let mut req = req;
            req["resend"] = json!(true);
            return ("scatter", req, Some(key));
        }
        let mut pool: Vec<&str> = MEMBERS.to_vec();
        let k = 1 + rng.below(4) as usize;
        let mut members = Vec::new();
        for _ in 0..k {
            members.push(pool.remove(rng.below(pool.len() as u64) as usize));
        }
        let outsider = rng.chance(12).then_some("ag_99");
        let id = format!("sc-{i}");
        let req = json!({"id": id, "thread": T, "members": members, "outsider": outsider});
        earlier.push(req.clone());
        ("scatter", req, Some(format!("k-{id}")))
    });
    let mut nodes = [Node::default(), Node::default(), Node::default()];
    let mut receipts: BTreeMap<String, Value> = BTreeMap::new();
    for i in effect_order(&ops) {
        let req = ops[i].request.clone();
        let id = req["id"].as_str().unwrap_or_default().to_owned();
        if !req["outsider"].is_null() {
            ops[i].failed = Some("INVALID_TARGET");
            continue;
        }
        if let Some(r) = receipts.get(&id) {
            ops[i].result = r.clone();
            continue;
        }
        let members: Vec<String> =
            req["members"].as_array().into_iter().flatten().filter_map(|m| m.as_str().map(str::to_owned)).collect();
        let partial = partial_on_n3 && ops[i].timed_out && members.len() > 1;
        let r = nodes[0].apply(&id, &members, false);
        nodes[1].apply(&id, &members, false);
        nodes[2].apply(&id, &members, partial);
        receipts.insert(id, r.clone());
        ops[i].result = r;
    }
    // A refusal is definite: no timeout hides it.
    for op in ops.iter_mut().filter(|op| op.failed.is_some()) {
        op.timed_out = false;
    }
    let mut b = emit(&ops);
    let end = b.now() + 1_000_000_000;
    b.at(end);
    for (i, n) in nodes.iter().enumerate() {
        let p = 1000 + i as u64;
        let node = format!("n{}", i + 1);
        b.invoke(p, "final-read", json!({"thread": T})).node(node.clone());
        b.ok(p, json!({"thread": T, "entries": n.entries, "collectives": n.collectives})).node(node);
    }
    b.build().expect("well-formed")
}

#[test]
fn a_correct_scatter_system_always_checks_valid() {
    for seed in 0..200 {
        let h = simulate_scatter(seed, false);
        let v = scatter::check(&h, &scatter::Options::default());
        assert_eq!(v.valid, Validity::Valid, "seed {seed}: {}\n{:#?}", v.summary(), v.anomalies);
    }
}

#[test]
fn a_scatter_applied_in_part_on_one_node_is_caught() {
    let mut caught = 0;
    for seed in 0..100 {
        let v = scatter::check(&simulate_scatter(seed, true), &scatter::Options::default());
        assert_ne!(v.valid, Validity::Unknown, "seed {seed}: {}", v.summary());
        if v.anomalies_of("partial") > 0 {
            caught += 1;
        }
    }
    assert!(caught > 80, "caught {caught} of 100");
}

// ---------------------------------------------------------------------------------------------
// Messages.

/// A mailbox page as the server answers it: up to `size` entries after `after` (only those asking
/// `agent` with `asked_me`, scanning at most eight times the page size), and `next_after` when
/// more may follow. `skip` is a bug: the cursor jumps one entry past the page.
fn page(list: &[(String, bool)], after: u64, size: u64, asked_me: bool, skip: bool) -> Value {
    let len = list.len() as u64;
    let scan_end = if asked_me { (after + 8 * size).min(len) } else { len };
    let mut items: Vec<(u64, &str)> = Vec::new();
    let mut examined = after;
    for seq in after + 1..=scan_end {
        examined = seq;
        let (id, asks) = &list[seq as usize - 1];
        if !asked_me || *asks {
            items.push((seq, id));
            if items.len() as u64 == size {
                break;
            }
        }
    }
    let next = (examined < len).then_some(examined + u64::from(skip && !asked_me));
    json!({
        "after": after,
        "seqs": items.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        "ids": items.iter().map(|(_, i)| *i).collect::<Vec<_>>(),
        "next_after": next,
    })
}

fn simulate_messages(seed: u64, skipping_cursor: bool) -> History {
    let mut rng = Lcg(seed);
    let mut earlier: Vec<Value> = Vec::new();
    let mut ops = plan(&mut rng, 80, 4, |rng, i, _| {
        if rng.chance(30) {
            let asked_me = rng.chance(30);
            let filter = if asked_me { "asked_me" } else { "all" };
            return ("mailbox", json!({"thread": T, "agent": "ag_2", "filter": filter}), None);
        }
        if !earlier.is_empty() && rng.chance(15) {
            let mut req = earlier[rng.below(earlier.len() as u64) as usize].clone();
            let key = format!("k-{}", req["id"].as_str().unwrap_or_default());
            req["replay"] = json!(true);
            return ("send", req, Some(key));
        }
        let to: Vec<&str> = if rng.chance(50) { vec!["ag_2"] } else { vec![] };
        let id = format!("m-{i}");
        let req = json!({"id": id, "thread": T, "agent": "ag_1", "to": to, "replay": false});
        earlier.push(req.clone());
        ("send", req, Some(format!("k-{id}")))
    });
    let mut list: Vec<(String, bool)> = Vec::new();
    let mut entry_of: BTreeMap<String, u64> = BTreeMap::new();
    for i in effect_order(&ops) {
        let req = ops[i].request.clone();
        match ops[i].f {
            "send" => {
                let id = req["id"].as_str().unwrap_or_default().to_owned();
                let to = req["to"].clone();
                let entry = *entry_of.entry(id.clone()).or_insert_with(|| {
                    list.push((id.clone(), to.as_array().is_some_and(|a| !a.is_empty())));
                    list.len() as u64
                });
                ops[i].result = json!({"id": id, "entry": entry, "responders": to});
            }
            _ => {
                let asked_me = req["filter"] == "asked_me";
                let size = 1 + rng.below(3);
                let mut after = rng.below(list.len() as u64 + 1);
                ops[i].request["after"] = json!(after);
                let mut pages = Vec::new();
                for _ in 0..3 {
                    let p = page(&list, after, size, asked_me, skipping_cursor);
                    let next = p["next_after"].as_u64();
                    pages.push(p);
                    match next {
                        Some(n) if n > after => after = n,
                        _ => break,
                    }
                }
                ops[i].result = json!({"pages": pages});
            }
        }
    }
    for op in ops.iter_mut().filter(|op| op.effect.is_none() && op.f == "mailbox") {
        op.timed_out = true;
    }
    let mut b = emit(&ops);
    let end = b.now() + 1_000_000_000;
    b.at(end);
    let entries: Vec<Value> = list
        .iter()
        .enumerate()
        .map(|(i, (id, asks))| json!({"seq": i + 1, "id": id, "responders": if *asks { vec!["ag_2"] } else { vec![] }}))
        .collect();
    for (p, node) in [(1000, "n1"), (1001, "n2"), (1002, "n3")] {
        b.invoke(p, "final-read", json!({"thread": T})).node(node);
        b.ok(p, json!({"thread": T, "entries": entries})).node(node);
    }
    b.build().expect("well-formed")
}

#[test]
fn a_correct_mailbox_always_checks_valid() {
    for seed in 0..200 {
        let h = simulate_messages(seed, false);
        let v = messages::check(&h, &messages::Options::default());
        assert_eq!(v.valid, Validity::Valid, "seed {seed}: {}\n{:#?}", v.summary(), v.anomalies);
    }
}

#[test]
fn a_cursor_that_skips_an_entry_is_caught() {
    let caught = (0..100)
        .filter(|seed| {
            let v = messages::check(&simulate_messages(*seed, true), &messages::Options::default());
            v.anomalies_of("mailbox_gap") > 0
        })
        .count();
    assert!(caught > 80, "caught {caught} of 100");
}
