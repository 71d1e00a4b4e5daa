//! The coordination checkers (`scatter`, `messages`) on synthetic histories, no cluster needed:
//! a valid history with every outcome (ok, fail, info, replays, refused non-member ranks) passes,
//! and each violation is INVALID with a message that names it.

use kungfu_jepsen::checker::{CheckOptions, Validity, Verdict, Workload, check_workload};
use kungfu_jepsen::history::{History, HistoryBuilder};
use serde_json::{Value, json};

fn build(b: &HistoryBuilder) -> History {
    b.build().expect("a well-formed history")
}

#[track_caller]
fn assert_valid(v: &Verdict) {
    assert_eq!(v.valid, Validity::Valid, "expected VALID:\n{}\n{:#?}", v.summary(), v.anomalies);
}

/// Asserts the verdict is invalid, flags `kind`, and that some `kind` message contains `words`.
#[track_caller]
fn assert_flags(v: &Verdict, kind: &str, words: &str) {
    assert_eq!(v.valid, Validity::Invalid, "expected INVALID:\n{}", v.summary());
    assert!(v.anomalies_of(kind) > 0, "expected a `{kind}` anomaly:\n{}\n{:#?}", v.summary(), v.anomalies);
    assert!(
        v.anomalies_named(kind).any(|a| a.message.contains(words)),
        "no `{kind}` message names {words:?}:\n{:#?}",
        v.anomalies
    );
}

/// Asserts that only these kinds were found.
#[track_caller]
fn assert_only(v: &Verdict, kinds: &[&str]) {
    for (k, n) in &v.anomaly_counts {
        assert!(*n == 0 || kinds.contains(&k.as_str()), "unexpected `{k}` anomalies:\n{:#?}", v.anomalies);
    }
}

mod scatter {
    use super::*;
    use kungfu_jepsen::checker::scatter::{Options, check, goal_body, header_body, parse_body, rank_order};

    const T: &str = "th_1";
    const NODES: [&str; 3] = ["n1", "n2", "n3"];

    /// One node's view of the thread: its entries and collectives, built scatter by scatter.
    #[derive(Clone, Default)]
    struct Node {
        entries: Vec<Value>,
        collectives: Vec<Value>,
    }

    impl Node {
        fn next(&self) -> u64 {
            self.entries.len() as u64 + 1
        }

        fn raw(&mut self, body: &str, reply_to: Option<u64>, assignment: Option<&str>) -> u64 {
            let seq = self.next();
            self.entries.push(
                json!({"seq": seq, "body": body, "author": "ag_1", "reply_to": reply_to, "assignment": assignment}),
            );
            seq
        }

        /// Applies scatter `id` to `members` (any order) atomically; returns its receipt value.
        fn apply(&mut self, id: &str, members: &[&str]) -> Value {
            let ranked = rank_order(&members.iter().map(|m| m.to_string()).collect::<Vec<_>>());
            let header = self.raw(&header_body(id), None, None);
            let mut ranks = Vec::new();
            for (r, m) in ranked.iter().enumerate() {
                let asg = format!("asg_{id}_{r}");
                let entry = self.raw(&goal_body(id, m), Some(header), Some(&asg));
                ranks.push(json!({"rank": r, "member": m, "entry": entry, "assignment": asg}));
            }
            self.collectives.push(json!({"header": header, "size": ranks.len(), "ranks": ranks.clone()}));
            json!({"header": header, "ranks": ranks})
        }
    }

    fn invoke(b: &mut HistoryBuilder, p: u64, id: &str, key: &str, members: &[&str], outsider: Option<&str>) {
        let mut all: Vec<&str> = members.to_vec();
        all.extend(outsider);
        b.invoke(p, "scatter", json!({"id": id, "thread": T, "members": members, "outsider": outsider, "goals": all}))
            .idem(key)
            .node("n1");
    }

    fn finals(b: &mut HistoryBuilder, nodes: &[Node]) {
        for (i, n) in nodes.iter().enumerate() {
            let p = 900 + i as u64;
            b.invoke(p, "final-read", json!({"thread": T})).node(NODES[i]);
            b.ok(p, json!({"thread": T, "entries": n.entries, "collectives": n.collectives})).node(NODES[i]);
        }
    }

    fn run(b: &HistoryBuilder) -> Verdict {
        check(&build(b), &Options::default())
    }

    /// Members whose text order differs from their id order: ag_9 ranks before ag_10.
    const W: [&str; 4] = ["ag_10", "ag_9", "ag_3", "ag_12"];
    const OUTSIDER: &str = "ag_99";

    /// A valid history: ok (with a replay), info that happened, info that did not, a definite
    /// failure, and a refused non-member rank; the same on three nodes.
    fn valid() -> (HistoryBuilder, Vec<Node>) {
        let mut b = HistoryBuilder::new();
        let mut node = Node::default();
        // A: acknowledged, then replayed under its key with the same receipt.
        invoke(&mut b, 1, "sc1-0", "k-sc1-0", &[W[0], W[1], W[2]], None);
        let ra = node.apply("sc1-0", &[W[0], W[1], W[2]]);
        b.ok(1, json!({"header": ra["header"], "ranks": ra["ranks"], "replayed": false}));
        invoke(&mut b, 2, "sc1-0", "k-sc1-0", &[W[0], W[1], W[2]], None);
        b.ok(2, json!({"header": ra["header"], "ranks": ra["ranks"], "replayed": true}));
        // B: a non-member rank, refused INVALID_TARGET: nothing anywhere.
        invoke(&mut b, 1, "sc1-1", "k-sc1-1", &[W[1]], Some(OUTSIDER));
        b.fail(1, "INVALID_TARGET");
        // C: timed out, but happened (on every node).
        invoke(&mut b, 3, "sc3-0", "k-sc3-0", &[W[3]], None);
        b.info(3, "TIMEOUT");
        node.apply("sc3-0", &[W[3]]);
        // D: timed out and never happened.
        invoke(&mut b, 4, "sc4-0", "k-sc4-0", &[W[2], W[3]], None);
        b.info(4, "TIMEOUT");
        // E: a definite failure (no leader): nothing anywhere.
        invoke(&mut b, 5, "sc5-0", "k-sc5-0", &[W[0], W[1]], None);
        b.fail(5, "UNAVAILABLE");
        // F: a non-member rank that timed out: must be absent.
        invoke(&mut b, 6, "sc6-0", "k-sc6-0", &[W[0]], Some(OUTSIDER));
        b.info(6, "TIMEOUT");
        // G: failed once (no leader), sent again under its key, acknowledged.
        invoke(&mut b, 7, "sc7-0", "k-sc7-0", &[W[1], W[3]], None);
        b.fail(7, "NOT_LEADER");
        invoke(&mut b, 7, "sc7-0", "k-sc7-0", &[W[1], W[3]], None);
        let rg = node.apply("sc7-0", &[W[1], W[3]]);
        b.ok(7, rg);
        b.invoke(8, "void", json!({"thread": T, "assignment": "asg_sc1-0_0"})).idem("k-void-0");
        b.ok(8, json!({}));
        (b, vec![node.clone(), node.clone(), node])
    }

    #[test]
    fn bodies_parse_and_ranks_follow_numeric_ids() {
        assert_eq!(
            parse_body(&header_body("sc1-2")),
            Some(("sc1-2".into(), kungfu_jepsen::checker::scatter::Part::Header))
        );
        assert_eq!(
            parse_body(&goal_body("sc1-2", "ag_7")),
            Some(("sc1-2".into(), kungfu_jepsen::checker::scatter::Part::Goal("ag_7".into())))
        );
        assert_eq!(parse_body("hello"), None);
        let members: Vec<String> = W.iter().map(|s| s.to_string()).collect();
        assert_eq!(rank_order(&members), vec!["ag_3", "ag_9", "ag_10", "ag_12"]);
    }

    #[test]
    fn a_valid_history_with_every_outcome_passes() {
        let (mut b, nodes) = valid();
        finals(&mut b, &nodes);
        let v = run(&b);
        assert_valid(&v);
        assert_eq!(v.counts["scatters"], 7);
        assert_eq!(v.counts["attempts"], 9);
        assert_eq!(v.counts["invalid_rank_ops"], 2);
        assert_eq!(v.counts["invalid_target_refusals"], 1);
        assert_eq!(v.counts["present"], 3);
        assert_eq!(v.counts["final_reads"], 3);
        assert_eq!(v.counts["voids"], 1);
        let report = check_workload(Workload::Scatter, &build(&b), &CheckOptions::default());
        assert_eq!(report.valid, Validity::Valid, "{}", report.summary());
    }

    #[test]
    fn a_partial_scatter_on_one_node_is_invalid() {
        let (mut b, mut nodes) = valid();
        // Node 3 holds a header and one goal of a three-member scatter that timed out.
        invoke(&mut b, 10, "sc10-0", "k-sc10-0", &[W[0], W[1], W[2]], None);
        b.info(10, "TIMEOUT");
        for n in nodes.iter_mut().take(2) {
            n.apply("sc10-0", &[W[0], W[1], W[2]]);
        }
        let h = nodes[2].raw(&header_body("sc10-0"), None, None);
        nodes[2].raw(&goal_body("sc10-0", "ag_3"), Some(h), Some("asg_x"));
        nodes[2]
            .collectives
            .push(json!({"header": h, "size": 1, "ranks": [{"rank": 0, "member": "ag_3", "entry": h + 1}]}));
        finals(&mut b, &nodes);
        let v = run(&b);
        assert_flags(&v, "partial", "scatter sc10-0 (key k-sc10-0) on node n3");
        assert_flags(&v, "partial", "no goal entry for [\"ag_10\", \"ag_9\"]");
        assert_only(&v, &["partial"]);
    }

    #[test]
    fn a_header_without_its_collective_is_partial() {
        let (mut b, mut nodes) = valid();
        invoke(&mut b, 10, "sc10-0", "k-sc10-0", &[W[2]], None);
        let r = nodes[0].apply("sc10-0", &[W[2]]);
        nodes[1].apply("sc10-0", &[W[2]]);
        nodes[2].apply("sc10-0", &[W[2]]);
        nodes[1].collectives.pop();
        b.ok(10, r);
        finals(&mut b, &nodes);
        let v = run(&b);
        assert_flags(&v, "partial", "no collective at the header");
    }

    #[test]
    fn an_acknowledged_scatter_missing_on_a_node_is_lost() {
        let (mut b, mut nodes) = valid();
        invoke(&mut b, 10, "sc10-0", "k-sc10-0", &[W[0], W[2]], None);
        let r = nodes[0].apply("sc10-0", &[W[0], W[2]]);
        nodes[2].apply("sc10-0", &[W[0], W[2]]);
        b.ok(10, r);
        finals(&mut b, &nodes);
        let v = run(&b);
        assert_flags(&v, "lost", "scatter sc10-0 (key k-sc10-0): acknowledged, but node n2 holds none");
        assert_only(&v, &["lost"]);
    }

    #[test]
    fn a_failed_scatter_present_is_invalid() {
        let (mut b, mut nodes) = valid();
        invoke(&mut b, 10, "sc10-0", "k-sc10-0", &[W[1]], None);
        b.fail(10, "LIMIT_EXCEEDED");
        for n in &mut nodes {
            n.apply("sc10-0", &[W[1]]);
        }
        finals(&mut b, &nodes);
        let v = run(&b);
        assert_flags(&v, "failed_present", "scatter sc10-0 (key k-sc10-0): every attempt definitely failed");
        assert_only(&v, &["failed_present"]);
    }

    #[test]
    fn a_non_member_rank_must_be_refused_and_absent() {
        let (mut b, mut nodes) = valid();
        // Acknowledged, and present, although it names an outsider.
        invoke(&mut b, 10, "sc10-0", "k-sc10-0", &[W[1]], Some(OUTSIDER));
        let r = nodes[0].apply("sc10-0", &[W[1], OUTSIDER]);
        b.ok(10, r);
        // Timed out and present on one node only: still invalid, whatever the others say.
        invoke(&mut b, 11, "sc11-0", "k-sc11-0", &[W[2]], Some(OUTSIDER));
        b.info(11, "TIMEOUT");
        nodes[1].apply("sc11-0", &[W[2], OUTSIDER]);
        // Refused, but for another reason than the non-member.
        invoke(&mut b, 12, "sc12-0", "k-sc12-0", &[W[3]], Some(OUTSIDER));
        b.fail(12, "TRUST_VIOLATION");
        // A members-only scatter refused as if it named a non-member.
        invoke(&mut b, 13, "sc13-0", "k-sc13-0", &[W[3]], None);
        b.fail(13, "INVALID_TARGET");
        finals(&mut b, &nodes);
        let v = run(&b);
        assert_flags(&v, "invalid_accepted", "scatter sc10-0 (key k-sc10-0): acknowledged although it names ag_99");
        assert_flags(&v, "invalid_present", "node n1 holds its entries");
        assert_flags(&v, "invalid_present", "scatter sc11-0 (key k-sc11-0): names the non-member ag_99, yet node n2");
        assert_flags(&v, "wrong_refusal", "refused TRUST_VIOLATION instead of INVALID_TARGET");
        assert_flags(&v, "spurious_invalid_target", "scatter sc13-0");
    }

    #[test]
    fn one_key_with_two_collectives_is_invalid() {
        let (mut b, mut nodes) = valid();
        invoke(&mut b, 10, "sc10-0", "k-sc10-0", &[W[0]], None);
        b.info(10, "TIMEOUT");
        invoke(&mut b, 11, "sc10-0", "k-sc10-0", &[W[0]], None);
        b.info(11, "TIMEOUT");
        for n in &mut nodes {
            n.apply("sc10-0", &[W[0]]);
            n.apply("sc10-0", &[W[0]]);
        }
        finals(&mut b, &nodes);
        let v = run(&b);
        assert_flags(&v, "double_collective", "one key produced 2 headers");
    }

    #[test]
    fn ranks_out_of_id_order_are_a_collective_mismatch() {
        let (mut b, mut nodes) = valid();
        invoke(&mut b, 10, "sc10-0", "k-sc10-0", &[W[0], W[1]], None);
        b.info(10, "TIMEOUT");
        for n in &mut nodes {
            // Text order: ag_10 before ag_9 (wrong: ranks follow numeric ids).
            let h = n.raw(&header_body("sc10-0"), None, None);
            n.raw(&goal_body("sc10-0", "ag_10"), Some(h), Some("asg_a"));
            n.raw(&goal_body("sc10-0", "ag_9"), Some(h), Some("asg_b"));
            n.collectives.push(json!({"header": h, "size": 2, "ranks": [
                {"rank": 0, "member": "ag_10", "entry": h + 1, "assignment": "asg_a"},
                {"rank": 1, "member": "ag_9", "entry": h + 2, "assignment": "asg_b"},
            ]}));
        }
        finals(&mut b, &nodes);
        let v = run(&b);
        assert_flags(&v, "collective_mismatch", "rank 0 is ag_10 (rank 0), expected ag_9");
        assert_only(&v, &["collective_mismatch"]);
    }

    #[test]
    fn an_unknown_outcome_must_be_the_same_on_every_node() {
        let (mut b, mut nodes) = valid();
        invoke(&mut b, 10, "sc10-0", "k-sc10-0", &[W[2], W[3]], None);
        b.info(10, "TIMEOUT");
        nodes[0].apply("sc10-0", &[W[2], W[3]]);
        finals(&mut b, &nodes);
        let v = run(&b);
        assert_flags(&v, "divergence", "node n1 holds it, node n2 does not");
    }

    #[test]
    fn an_acknowledgment_that_disagrees_with_the_nodes_is_a_receipt_mismatch() {
        let (mut b, mut nodes) = valid();
        invoke(&mut b, 10, "sc10-0", "k-sc10-0", &[W[2]], None);
        let mut r = Value::Null;
        for n in &mut nodes {
            r = n.apply("sc10-0", &[W[2]]);
        }
        r["header"] = json!(1);
        b.ok(10, r);
        finals(&mut b, &nodes);
        assert_flags(&run(&b), "receipt_mismatch", "acknowledged with header Some(1)");
    }

    #[test]
    fn an_entry_naming_no_scatter_is_unexpected() {
        let (mut b, mut nodes) = valid();
        for n in &mut nodes {
            n.raw("hello", None, None);
        }
        finals(&mut b, &nodes);
        assert_flags(&run(&b), "unexpected", "holds \"hello\", which names no scatter");
    }

    #[test]
    fn without_final_reads_the_verdict_is_unknown() {
        let (b, _) = valid();
        let v = run(&b);
        assert_eq!(v.valid, Validity::Unknown, "{}", v.summary());
        assert_eq!(v.anomalies_of("no_final_read"), 1);
    }
}

mod messages {
    use super::*;
    use kungfu_jepsen::checker::messages::{Options, check};

    const T: &str = "th_1";

    fn send(b: &mut HistoryBuilder, p: u64, id: &str, to: &[&str], replay: bool) {
        b.invoke(p, "send", json!({"id": id, "thread": T, "agent": "ag_1", "to": to, "replay": replay}))
            .idem(format!("k-{id}"))
            .node("n1");
    }

    fn sent(b: &mut HistoryBuilder, p: u64, entry: u64, to: &[&str], replayed: bool) {
        b.ok(p, json!({"entry": entry, "responders": to, "replayed": replayed}));
    }

    /// A page: its cursor, the (seq, id) items, next_after.
    fn page(after: u64, items: &[(u64, &str)], next: Option<u64>) -> Value {
        json!({
            "after": after,
            "seqs": items.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
            "ids": items.iter().map(|(_, i)| *i).collect::<Vec<_>>(),
            "next_after": next,
        })
    }

    fn mailbox(b: &mut HistoryBuilder, p: u64, agent: &str, filter: &str, after: u64, pages: Vec<Value>) {
        b.invoke(p, "mailbox", json!({"thread": T, "agent": agent, "filter": filter, "after": after})).node("n2");
        b.ok(p, json!({"pages": pages}));
    }

    /// `(id, responders)` in seq order from 1.
    fn finals(b: &mut HistoryBuilder, nodes: &[Vec<(&str, &[&str])>]) {
        for (i, entries) in nodes.iter().enumerate() {
            let p = 900 + i as u64;
            let node = format!("n{}", i + 1);
            let list: Vec<Value> = entries
                .iter()
                .enumerate()
                .map(|(s, (id, r))| json!({"seq": s + 1, "id": id, "author": "ag_1", "responders": r}))
                .collect();
            b.invoke(p, "final-read", json!({"thread": T})).node(node.clone());
            b.ok(p, json!({"thread": T, "entries": list})).node(node);
        }
    }

    const NOBODY: &[&str] = &[];
    const ASK2: &[&str] = &["ag_2"];

    /// The thread every node holds in the valid history.
    fn thread() -> Vec<(&'static str, &'static [&'static str])> {
        vec![("m1-0", NOBODY), ("m1-1", ASK2), ("m3-0", NOBODY), ("m6-0", ASK2)]
    }

    /// Sends with every outcome, a replay, and mailbox reads that continue from their cursors.
    fn valid() -> HistoryBuilder {
        let mut b = HistoryBuilder::new();
        send(&mut b, 1, "m1-0", NOBODY, false);
        sent(&mut b, 1, 1, NOBODY, false);
        send(&mut b, 1, "m1-1", ASK2, false);
        sent(&mut b, 1, 2, ASK2, false);
        // The replay of m1-1's key from another process returns the same entry.
        send(&mut b, 2, "m1-1", ASK2, true);
        sent(&mut b, 2, 2, ASK2, true);
        // Timed out, but happened; timed out and never happened; refused.
        send(&mut b, 3, "m3-0", NOBODY, false);
        b.info(3, "TIMEOUT");
        send(&mut b, 4, "m4-0", NOBODY, false);
        b.info(4, "TIMEOUT");
        send(&mut b, 5, "m5-0", ASK2, false);
        b.fail(5, "UNAVAILABLE");
        // Pages of 2 from 0, then a later read from the first one's last next_after.
        mailbox(
            &mut b,
            7,
            "ag_3",
            "all",
            0,
            vec![page(0, &[(1, "m1-0"), (2, "m1-1")], Some(2)), page(2, &[(3, "m3-0")], None)],
        );
        send(&mut b, 6, "m6-0", ASK2, false);
        sent(&mut b, 6, 4, ASK2, false);
        mailbox(&mut b, 7, "ag_3", "all", 3, vec![page(3, &[(4, "m6-0")], None)]);
        // asked_me: a bounded scan that stops at 3 with one item, then the rest.
        mailbox(
            &mut b,
            8,
            "ag_2",
            "asked_me",
            0,
            vec![page(0, &[(2, "m1-1")], Some(3)), page(3, &[(4, "m6-0")], None)],
        );
        // An empty page at the end of the thread.
        mailbox(&mut b, 8, "ag_2", "all", 4, vec![page(4, &[], None)]);
        b
    }

    fn run(b: &HistoryBuilder) -> Verdict {
        check(&build(b), &Options::default())
    }

    #[test]
    fn a_valid_history_with_replays_and_cursor_reads_passes() {
        let mut b = valid();
        finals(&mut b, &[thread(), thread(), thread()]);
        let v = run(&b);
        assert_valid(&v);
        assert_eq!(v.counts["sends"], 6);
        assert_eq!(v.counts["replays"], 1);
        assert_eq!(v.counts["asked"], 3);
        assert_eq!(v.counts["mailbox_reads"], 4);
        assert_eq!(v.counts["mailbox_pages"], 6);
        assert_eq!(v.counts["final_reads"], 3);
        let report = check_workload(Workload::Messages, &build(&b), &CheckOptions::default());
        assert_eq!(report.valid, Validity::Valid, "{}", report.summary());
    }

    #[test]
    fn a_lost_send_is_invalid() {
        let mut b = valid();
        let mut short = thread();
        short.pop();
        finals(&mut b, &[thread(), short, thread()]);
        let v = run(&b);
        assert_flags(
            &v,
            "lost",
            "thread th_1 on node n2: send m6-0 (key k-m6-0) was acknowledged but is not in the thread",
        );
    }

    #[test]
    fn a_duplicated_send_is_invalid() {
        let mut b = valid();
        let mut doubled = thread();
        doubled.push(("m1-1", ASK2));
        finals(&mut b, &[doubled.clone(), doubled.clone(), doubled]);
        let v = run(&b);
        assert_flags(&v, "duplicate", "send m1-1 (key k-m1-1) has 2 entries [2, 5]");
        assert_only(&v, &["duplicate"]);
    }

    #[test]
    fn a_message_nobody_sent_or_whose_send_failed_is_invalid() {
        let mut b = valid();
        let mut more = thread();
        more.push(("m5-0", ASK2));
        more.push(("ghost", NOBODY));
        finals(&mut b, &[more.clone(), more.clone(), more]);
        let v = run(&b);
        assert_flags(
            &v,
            "failed_present",
            "entry 5 holds send m5-0 (key k-m5-0), whose every attempt definitely failed",
        );
        assert_flags(&v, "unexpected", "entry 6 holds \"ghost\", which no send named");
    }

    #[test]
    fn a_replay_with_another_entry_is_invalid() {
        let mut b = valid();
        send(&mut b, 9, "m1-0", NOBODY, true);
        sent(&mut b, 9, 3, NOBODY, true);
        finals(&mut b, &[thread(), thread(), thread()]);
        let v = run(&b);
        assert_flags(
            &v,
            "replay_mismatch",
            "send m1-0 (key k-m1-0): acknowledged with entry Some(1) and, replayed, with entry Some(3)",
        );
        assert_flags(&v, "entry_mismatch", "acknowledged as entry 3, which holds Some(\"m3-0\")");
    }

    #[test]
    fn an_entry_asking_others_than_the_send_asked_is_invalid() {
        let mut b = valid();
        let mut wrong = thread();
        wrong[0] = ("m1-0", ASK2);
        finals(&mut b, &[wrong.clone(), wrong.clone(), wrong]);
        assert_flags(
            &run(&b),
            "ask_mismatch",
            "entry 1 (send m1-0 (key k-m1-0)) asks {\"ag_2\"}, but the send asked {}",
        );
    }

    #[test]
    fn nodes_that_disagree_are_invalid() {
        let mut b = valid();
        let mut swapped = thread();
        swapped.swap(2, 3);
        finals(&mut b, &[thread(), thread(), swapped]);
        let v = run(&b);
        assert_flags(&v, "divergence", "node n1 holds 4 entries and node n3 4");
    }

    #[test]
    fn a_mailbox_read_with_a_gap_is_invalid() {
        let mut b = valid();
        mailbox(&mut b, 10, "ag_3", "all", 0, vec![page(0, &[(1, "m1-0"), (3, "m3-0")], Some(3))]);
        finals(&mut b, &[thread(), thread(), thread()]);
        let v = run(&b);
        assert_flags(
            &v,
            "mailbox_gap",
            "page after 0: returned [1, 3] (next_after Some(3)) but the thread holds [2] there too",
        );
        assert_only(&v, &["mailbox_gap"]);
    }

    #[test]
    fn a_cursor_that_skips_entries_is_a_gap_in_the_read_that_continues_from_it() {
        let mut b = valid();
        // The page's next_after jumps past entry 3; the next page continues from there.
        mailbox(
            &mut b,
            10,
            "ag_3",
            "all",
            0,
            vec![page(0, &[(1, "m1-0"), (2, "m1-1")], Some(3)), page(3, &[(4, "m6-0")], None)],
        );
        // A later read from an earlier next_after that misses the entry right after it.
        mailbox(&mut b, 11, "ag_3", "all", 2, vec![page(2, &[(4, "m6-0")], None)]);
        finals(&mut b, &[thread(), thread(), thread()]);
        let v = run(&b);
        assert_flags(&v, "mailbox_gap", "returned [1, 2] (next_after Some(3)) but the thread holds [3] there too");
        assert_flags(
            &v,
            "mailbox_gap",
            "page after 2: returned [4] (next_after None) but the thread holds [3] there too",
        );
    }

    #[test]
    fn an_asked_me_scan_that_skips_an_entry_asking_me_is_a_gap() {
        let mut b = valid();
        mailbox(&mut b, 10, "ag_2", "asked_me", 0, vec![page(0, &[], Some(3)), page(3, &[(4, "m6-0")], None)]);
        finals(&mut b, &[thread(), thread(), thread()]);
        assert_flags(&run(&b), "mailbox_gap", "returned [] (next_after Some(3)) but the thread holds [2] there too");
    }

    #[test]
    fn a_mailbox_read_with_a_duplicate_is_invalid() {
        let mut b = valid();
        // The second page repeats entry 2, at its own cursor.
        mailbox(
            &mut b,
            10,
            "ag_3",
            "all",
            0,
            vec![page(0, &[(1, "m1-0"), (2, "m1-1")], Some(2)), page(2, &[(2, "m1-1"), (3, "m3-0")], Some(3))],
        );
        finals(&mut b, &[thread(), thread(), thread()]);
        let v = run(&b);
        assert_flags(&v, "mailbox_duplicate", "seq 2 twice (pages after 0 and 2)");
        assert_flags(&v, "mailbox_duplicate", "seq 2 at or before the page's cursor 2");
        assert_only(&v, &["mailbox_duplicate"]);
    }

    #[test]
    fn a_mailbox_page_showing_another_message_or_a_future_seq_is_invalid() {
        let mut b = valid();
        mailbox(&mut b, 10, "ag_3", "all", 2, vec![page(2, &[(3, "m1-0"), (4, "m6-0"), (5, "m9-9")], None)]);
        mailbox(&mut b, 11, "ag_3", "asked_me", 0, vec![page(0, &[(1, "m1-0"), (2, "m1-1")], None)]);
        finals(&mut b, &[thread(), thread(), thread()]);
        let v = run(&b);
        assert_flags(&v, "mailbox_mismatch", "seq 3 shows m1-0 but holds m3-0");
        assert_flags(&v, "mailbox_mismatch", "seq 5 (m9-9) is not in node n2's final read");
        assert_flags(&v, "mailbox_mismatch", "seq 1 (m1-0) does not ask ag_3");
    }

    #[test]
    fn a_cursor_that_does_not_advance_is_invalid() {
        let mut b = valid();
        mailbox(&mut b, 10, "ag_3", "all", 2, vec![page(2, &[(3, "m3-0")], Some(2))]);
        finals(&mut b, &[thread(), thread(), thread()]);
        assert_flags(&run(&b), "mailbox_cursor", "next_after 2 does not move past the cursor");
    }

    #[test]
    fn a_final_read_with_a_gap_is_invalid() {
        let mut b = valid();
        finals(&mut b, &[thread(), thread(), thread()]);
        let mut h = build(&b).ops().to_vec();
        let last = h.last_mut().expect("ops");
        if let Some(entries) = last.value["entries"].as_array_mut() {
            entries.remove(1);
        }
        let v = check(&History::new(h).expect("well-formed"), &Options::default());
        assert_flags(&v, "mailbox_gap", "the final read is not the entries 1..=3 in order; missing [2]");
    }
}
