//! The turn checker on histories built from real facts: `kungfu-core`'s test world runs the
//! actions, and the turn reads are what the server would have answered (or deliberately not).

use kungfu_client::pb;
use kungfu_core::Action;
use kungfu_core::rebuild::all_facts;
use kungfu_core::testkit::World;
use kungfu_jepsen::checker::turn::{Options, check};
use kungfu_jepsen::history::{FINAL_READ, History, HistoryBuilder};
use kungfu_types::{AgentId, Content, Role};
use serde_json::{Value, json};

/// A world where `a` asked `b` and `c` to respond, then `b` handled it: returns the world, the
/// agents, and the fact sequence numbers after the post and after the handle.
fn scenario() -> (World, AgentId, AgentId, AgentId, u64, u64) {
    let mut w = World::new();
    let (a, b, c) = (w.register(), w.register(), w.register());
    let t = w.thread_with(a, &[(b, Role::Speaker), (c, Role::Speaker)]);
    let entry = w.post(a, t, "please", None, Some(&[b, c]));
    let after_post = seq(&w);
    w.ok(b, Action::Handle { thread: t, entry, note: Some(Content::from("done")) });
    let after_handle = seq(&w);
    (w, a, b, c, after_post, after_handle)
}

fn seq(w: &World) -> u64 {
    all_facts(&w.state).expect("facts").last().map(|f| f.seq).unwrap_or(0)
}

/// The turn of `agent` as the API would show it from the world's state now.
fn turn_now(w: &World, agent: AgentId) -> Vec<Value> {
    w.full_turn(agent).iter().map(|i| serde_json::to_value(pb::TurnItem::from(i)).expect("json")).collect()
}

fn facts_hex(w: &World) -> Vec<String> {
    all_facts(&w.state).expect("facts").iter().map(|f| hex::encode(kungfu_core::codec::encode(f))).collect()
}

fn history(reads: &[(AgentId, u64, Vec<Value>)], facts: Vec<String>) -> History {
    let mut h = HistoryBuilder::new();
    for (i, (agent, as_of, items)) in reads.iter().enumerate() {
        let p = i as u64;
        h.invoke(p, "turn", json!({ "agent": agent.to_string() }));
        h.ok(p, json!({ "agent": agent.to_string(), "as_of_seq": as_of, "items": items }));
    }
    let p = reads.len() as u64;
    h.invoke(p, FINAL_READ, json!({}));
    h.ok(p, json!({ "facts": facts }));
    h.build().expect("a well-formed history")
}

#[test]
fn reads_that_match_the_facts_at_their_point_are_valid() {
    let (w, _a, b, c, after_post, after_handle) = scenario();
    // c's response, owed since the post, is still open; b handled its own.
    let facts = facts_hex(&w);
    let state_after = turn_now(&w, c);
    assert_eq!(state_after.len(), 1, "c still owes its response");
    assert!(turn_now(&w, b).is_empty(), "b handled its response");
    let h = history(
        &[(b, after_handle, vec![]), (c, after_handle, state_after.clone()), (c, after_post, state_after)],
        facts,
    );
    let v = check(&h, &Options::default());
    assert!(v.is_valid(), "{}", v.summary());
    assert_eq!(v.counts.get("compared"), Some(&3));
}

#[test]
fn a_read_missing_an_obligation_or_showing_an_ended_one_is_flagged() {
    let (w, _a, b, c, after_post, after_handle) = scenario();
    let facts = facts_hex(&w);
    let c_items = turn_now(&w, c);
    // Right after the post, b owed a response: a read then showing nothing lost an obligation.
    let lost = history(&[(b, after_post, vec![])], facts.clone());
    let v = check(&lost, &Options::default());
    assert_eq!(v.anomalies_of("turn_mismatch"), 1, "{}", v.summary());
    // After the handle, b owes nothing: a read showing c's item (or any) is not derived from facts.
    let phantom = history(&[(b, after_handle, c_items.clone())], facts.clone());
    let v = check(&phantom, &Options::default());
    assert_eq!(v.anomalies_of("turn_mismatch"), 1, "{}", v.summary());
    // A read with the right obligation but another arose time is flagged too.
    let mut moved = c_items.clone();
    moved[0]["arose_at_unix_micros"] = json!(1);
    let v = check(&history(&[(c, after_handle, moved)], facts), &Options::default());
    assert_eq!(v.anomalies_of("turn_mismatch"), 1, "{}", v.summary());
}

#[test]
fn the_next_step_is_not_compared_it_depends_on_the_time_of_the_read() {
    let (w, _a, _b, c, _, after_handle) = scenario();
    let mut items = turn_now(&w, c);
    items[0]["next"] = json!("NEXT_STEP_WAIT");
    let v = check(&history(&[(c, after_handle, items)], facts_hex(&w)), &Options::default());
    assert!(v.is_valid(), "{}", v.summary());
}

#[test]
fn a_read_beyond_the_exported_facts_or_without_facts_is_not_valid() {
    let (w, _a, _b, c, _, after_handle) = scenario();
    let items = turn_now(&w, c);
    let v = check(&history(&[(c, after_handle + 5, items.clone())], facts_hex(&w)), &Options::default());
    assert_eq!(v.anomalies_of("unreplayable"), 1, "{}", v.summary());
    let mut h = HistoryBuilder::new();
    h.invoke(0, "turn", json!({ "agent": c.to_string() }));
    h.ok(0, json!({ "agent": c.to_string(), "as_of_seq": after_handle, "items": items }));
    let v = check(&h.build().expect("history"), &Options::default());
    assert!(!v.is_valid(), "no facts, no verdict: {}", v.summary());
}

#[test]
fn an_obligation_that_ends_and_opens_again_is_flagged() {
    let (w, _a, _b, _c, _, _) = scenario();
    let mut facts = all_facts(&w.state).expect("facts");
    // Replay the post's facts once more as a later action: the ended response would be owed again.
    let last = facts.last().map(|f| f.seq).unwrap_or(0);
    let post_seq = facts.iter().find(|f| f.fact.name() == "posted").map(|f| f.seq).expect("a post");
    let again: Vec<_> = facts
        .iter()
        .filter(|f| f.seq == post_seq)
        .cloned()
        .map(|mut f| {
            f.seq = last + 1;
            f
        })
        .collect();
    facts.extend(again);
    let hex: Vec<String> = facts.iter().map(|f| hex::encode(kungfu_core::codec::encode(f))).collect();
    let v = check(&history(&[], hex), &Options::default());
    assert!(!v.is_valid(), "a reopened or unfoldable obligation must be flagged: {}", v.summary());
    assert!(v.anomalies_of("reopened") + v.anomalies_of("unreplayable") >= 1, "{}", v.summary());
}
