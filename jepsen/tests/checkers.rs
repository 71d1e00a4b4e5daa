//! The checkers' own tests: hand-written anomalous histories each checker must flag, and valid
//! ones (including indeterminate ops that did or did not happen) it must accept.

use kungfu_jepsen::checker::{Validity, Verdict};
use kungfu_jepsen::history::{History, HistoryBuilder};
use serde_json::{Value, json};

fn build(b: &HistoryBuilder) -> History {
    b.build().expect("a well-formed history")
}

#[track_caller]
fn assert_valid(v: &Verdict) {
    assert_eq!(v.valid, Validity::Valid, "expected VALID:\n{}\n{:#?}", v.summary(), v.anomalies);
}

/// Asserts the verdict is invalid and flags `kind` (at least once).
#[track_caller]
fn assert_flags(v: &Verdict, kind: &str) {
    assert_eq!(v.valid, Validity::Invalid, "expected INVALID:\n{}", v.summary());
    assert!(v.anomalies_of(kind) > 0, "expected a `{kind}` anomaly:\n{}\n{:#?}", v.summary(), v.anomalies);
    assert!(v.anomalies_named(kind).all(|a| !a.message.is_empty()));
}

#[track_caller]
fn assert_unknown(v: &Verdict, kind: &str) {
    assert_eq!(v.valid, Validity::Unknown, "expected UNKNOWN:\n{}", v.summary());
    assert!(v.anomalies_of(kind) > 0, "expected `{kind}`:\n{}", v.summary());
}

mod admission {
    use super::*;
    use kungfu_jepsen::checker::admission::{Options, check};
    use kungfu_jepsen::checker::wgl::WglOptions;

    fn create(b: &mut HistoryBuilder, task: &str, max: u32) {
        b.invoke(99, "create", json!({"task": task, "max_adoptions": max}));
        b.ok(99, json!({"task": task, "max_adoptions": max}));
    }

    fn adopt(b: &mut HistoryBuilder, p: u64, agent: &str) {
        b.invoke(p, "adopt", json!({"task": "t1", "agent": agent}));
    }

    fn adopted(b: &mut HistoryBuilder, p: u64, agent: &str) {
        b.ok(p, json!({"task": "t1", "agent": agent}));
    }

    fn read(b: &mut HistoryBuilder, p: u64, f: &str, adopters: &[&str]) {
        b.invoke(p, f, json!({"task": "t1"}));
        b.ok(p, json!({"task": "t1", "adopters": adopters}));
    }

    fn run(b: &HistoryBuilder) -> Verdict {
        check(&build(b), &Options::default())
    }

    #[test]
    fn limit_reached_then_refused_is_valid() {
        let mut b = HistoryBuilder::new();
        create(&mut b, "t1", 3);
        for (p, a) in [(1, "a1"), (2, "a2"), (3, "a3")] {
            adopt(&mut b, p, a);
        }
        for (p, a) in [(2, "a2"), (1, "a1"), (3, "a3")] {
            adopted(&mut b, p, a);
        }
        adopt(&mut b, 4, "a4");
        b.fail(4, "ADOPTION_LIMIT_REACHED");
        read(&mut b, 5, "final-read", &["a1", "a2", "a3"]);
        let v = run(&b);
        assert_valid(&v);
        assert_eq!(v.counts["ok"], 3);
        assert_eq!(v.counts["refused"], 1);
        assert_eq!(v.counts["objects"], 1);
    }

    #[test]
    fn four_acknowledged_adoptions_against_max_three_are_flagged() {
        let mut b = HistoryBuilder::new();
        create(&mut b, "t1", 3);
        for (p, a) in [(1, "a1"), (2, "a2"), (3, "a3"), (4, "a4")] {
            adopt(&mut b, p, a);
            adopted(&mut b, p, a);
        }
        let v = run(&b);
        assert_flags(&v, "over_limit");
        assert_flags(&v, "nonlinearizable");
    }

    #[test]
    fn a_read_showing_more_than_the_limit_is_flagged() {
        let mut b = HistoryBuilder::new();
        create(&mut b, "t1", 1);
        adopt(&mut b, 1, "a1");
        adopt(&mut b, 2, "a2");
        b.info(1, "TIMEOUT");
        b.info(2, "TIMEOUT");
        read(&mut b, 3, "final-read", &["a1", "a2"]);
        assert_flags(&run(&b), "over_limit");
    }

    #[test]
    fn refusal_for_the_limit_with_only_two_adopted_is_flagged() {
        let mut b = HistoryBuilder::new();
        create(&mut b, "t1", 3);
        for (p, a) in [(1, "a1"), (2, "a2")] {
            adopt(&mut b, p, a);
            adopted(&mut b, p, a);
        }
        adopt(&mut b, 3, "a3");
        b.fail(3, "ADOPTION_LIMIT_REACHED");
        let v = run(&b);
        assert_flags(&v, "fcfs_violation");
        assert_flags(&v, "nonlinearizable");
        let a = v.anomalies_named("fcfs_violation").next().expect("one");
        assert!(a.ops.contains(&7), "names the refusal's invocation: {a:?}");
    }

    #[test]
    fn a_refusal_justified_only_by_a_pending_adoption_is_valid() {
        // limit 2: a1 ok, a2 times out (it did happen), a3 refused: legal.
        let mut b = HistoryBuilder::new();
        create(&mut b, "t1", 2);
        adopt(&mut b, 1, "a1");
        adopted(&mut b, 1, "a1");
        adopt(&mut b, 2, "a2");
        b.info(2, "TIMEOUT");
        adopt(&mut b, 3, "a3");
        b.fail(3, "ADOPTION_LIMIT_REACHED");
        read(&mut b, 4, "final-read", &["a1", "a2"]);
        assert_valid(&run(&b));
    }

    #[test]
    fn an_indeterminate_adoption_that_never_happened_is_valid() {
        // limit 2: a2 timed out and never took effect; a3 got the second place.
        let mut b = HistoryBuilder::new();
        create(&mut b, "t1", 2);
        adopt(&mut b, 1, "a1");
        adopted(&mut b, 1, "a1");
        adopt(&mut b, 2, "a2");
        b.info(2, "TIMEOUT");
        adopt(&mut b, 3, "a3");
        adopted(&mut b, 3, "a3");
        adopt(&mut b, 4, "a4"); // never completes
        read(&mut b, 5, "final-read", &["a1", "a3"]);
        assert_valid(&run(&b));
    }

    #[test]
    fn a_refusal_then_a_read_below_the_limit_is_flagged() {
        // The refusal is justified only if a2 happened; the later read shows it did not.
        let mut b = HistoryBuilder::new();
        create(&mut b, "t1", 2);
        adopt(&mut b, 1, "a1");
        adopted(&mut b, 1, "a1");
        adopt(&mut b, 2, "a2");
        b.info(2, "TIMEOUT");
        adopt(&mut b, 3, "a3");
        b.fail(3, "ADOPTION_LIMIT_REACHED");
        read(&mut b, 4, "final-read", &["a1"]);
        let v = run(&b);
        assert_flags(&v, "fcfs_violation");
        assert_flags(&v, "nonlinearizable");
    }

    #[test]
    fn only_the_search_sees_a_refusal_followed_by_an_acceptance() {
        // limit 2: a1 ok, a2 info, a3 refused (needs a2), then a4 ok (needs a2 absent).
        // No direct check fires; only the WGL search proves no serial order exists.
        let mut b = HistoryBuilder::new();
        create(&mut b, "t1", 2);
        adopt(&mut b, 1, "a1");
        adopted(&mut b, 1, "a1");
        adopt(&mut b, 2, "a2");
        b.info(2, "TIMEOUT");
        adopt(&mut b, 3, "a3");
        b.fail(3, "ADOPTION_LIMIT_REACHED");
        adopt(&mut b, 4, "a4");
        adopted(&mut b, 4, "a4");
        let v = run(&b);
        assert_flags(&v, "nonlinearizable");
        assert_eq!(v.anomalies_of("over_limit") + v.anomalies_of("fcfs_violation"), 0);
    }

    #[test]
    fn concurrent_competitors_first_come_first_served_is_valid() {
        // limit 1: a1 and a2 race; a2 wins, a1 is refused; a replay of a2 is ok.
        let mut b = HistoryBuilder::new();
        create(&mut b, "t1", 1);
        adopt(&mut b, 1, "a1");
        adopt(&mut b, 2, "a2");
        adopted(&mut b, 2, "a2");
        b.fail(1, "ADOPTION_LIMIT_REACHED");
        adopt(&mut b, 3, "a2");
        adopted(&mut b, 3, "a2");
        adopt(&mut b, 4, "a5");
        b.fail(4, "INVALID_STATE"); // another definite failure: no effect, not a refusal
        read(&mut b, 5, "read", &["a2"]);
        assert_valid(&run(&b));
    }

    #[test]
    fn phantom_and_lost_adopters_are_flagged() {
        let mut b = HistoryBuilder::new();
        create(&mut b, "t1", 3);
        adopt(&mut b, 1, "a1");
        adopted(&mut b, 1, "a1");
        read(&mut b, 2, "final-read", &["a9"]);
        let v = run(&b);
        assert_flags(&v, "phantom");
        assert_flags(&v, "lost");
    }

    #[test]
    fn a_definitely_failed_adoption_shown_by_a_read_is_a_phantom() {
        let mut b = HistoryBuilder::new();
        create(&mut b, "t1", 3);
        adopt(&mut b, 1, "a1");
        b.fail(1, "NOT_REQUESTER");
        read(&mut b, 2, "final-read", &["a1"]);
        assert_flags(&run(&b), "phantom");
    }

    #[test]
    fn tasks_are_checked_independently_and_limits_can_come_from_options() {
        let mut b = HistoryBuilder::new();
        for (p, task, agent) in [(1, "t1", "a1"), (2, "t2", "a1"), (3, "t2", "a2")] {
            b.invoke(p, "adopt", json!({"task": task, "agent": agent}));
            b.ok(p, json!({"task": task, "agent": agent}));
        }
        let h = build(&b);
        let mut opts = Options { default_limit: Some(2), ..Options::default() };
        assert_valid(&check(&h, &opts));
        opts.limits.insert("t2".to_owned(), 1);
        let v = check(&h, &opts);
        assert_flags(&v, "over_limit");
        assert!(v.anomalies.iter().all(|a| a.message.contains("t2")));
    }

    #[test]
    fn engagements_not_agents_count_against_the_limit() {
        // a1 engaged twice (after its first engagement ended) and both were adopted: two of two.
        let mut b = HistoryBuilder::new();
        create(&mut b, "t1", 2);
        for (p, e) in [(1, "e1"), (2, "e2")] {
            b.invoke(p, "adopt", json!({"task": "t1", "engagement": e, "agent": "a1"}));
            b.ok(p, json!({"task": "t1", "engagement": e, "agent": "a1"}));
        }
        b.invoke(3, "adopt", json!({"task": "t1", "engagement": "e3", "agent": "a2"}));
        b.fail(3, "ADOPTION_LIMIT_REACHED");
        read(&mut b, 4, "final-read", &["e1", "e2"]);
        assert_valid(&run(&b));
    }

    #[test]
    fn an_unknown_limit_is_unknown() {
        let mut b = HistoryBuilder::new();
        adopt(&mut b, 1, "a1");
        adopted(&mut b, 1, "a1");
        assert_unknown(&run(&b), "unknown_limit");
    }

    #[test]
    fn the_search_bound_yields_unknown() {
        let mut b = HistoryBuilder::new();
        create(&mut b, "t1", 2);
        for p in 1..=8 {
            adopt(&mut b, p, &format!("a{p}"));
        }
        for p in 1..=8 {
            b.info(p, "TIMEOUT");
        }
        read(&mut b, 20, "final-read", &["a1", "a2"]);
        let h = build(&b);
        let tight = Options { wgl: WglOptions { max_steps: 3, time_budget: None }, ..Options::default() };
        assert_unknown(&check(&h, &tight), "wgl_bound");
        assert_valid(&check(&h, &Options::default()));
    }
}

mod deadlines {
    use super::*;
    use kungfu_jepsen::checker::deadlines::{Options, check};

    const MS: u64 = 1_000_000;
    const DUE: u64 = 1_000 * MS;

    /// Creates obligation `id` with due `DUE` (a `take` that returns it).
    fn take(b: &mut HistoryBuilder, p: u64, id: &str) {
        b.invoke(p, "take", json!({"assignment": id}));
        b.ok(p, json!({"assignment": id, "created": [{"id": id, "due": DUE}]}));
    }

    fn ending(kind: &str, cause: &str, index: u64, at: u64) -> Value {
        json!({"kind": kind, "cause": cause, "index": index, "at": at})
    }

    /// One read of obligations on `node`: `(id, endings)`.
    fn read(b: &mut HistoryBuilder, p: u64, f: &str, node: &str, obligations: &[(&str, Vec<Value>)]) {
        let list: Vec<Value> =
            obligations.iter().map(|(id, endings)| json!({"id": id, "due": DUE, "endings": endings})).collect();
        b.invoke(p, f, json!({})).node(node);
        b.ok(p, json!({"obligations": list})).node(node);
    }

    fn finals(b: &mut HistoryBuilder, obligations: &[(&str, Vec<Value>)]) {
        for (i, node) in ["n1", "n2", "n3"].into_iter().enumerate() {
            read(b, 50 + i as u64, "final-read", node, obligations);
        }
    }

    fn opts(eps_ms: u64) -> Options {
        Options { allowed_skew_ns: eps_ms * MS, ..Options::default() }
    }

    #[test]
    fn every_obligation_ended_once_everywhere_is_valid() {
        let mut b = HistoryBuilder::new();
        take(&mut b, 1, "o1");
        take(&mut b, 2, "o2");
        take(&mut b, 3, "o3");
        b.at(500 * MS);
        b.invoke(1, "deliver", json!({"ends": "o1"})).idem("d1");
        b.ok(1, json!({"ends": "o1"}));
        // A delivery that timed out in flight: it may or may not have won.
        b.invoke(3, "deliver", json!({"ends": "o3"})).idem("d3");
        b.info(3, "TIMEOUT");
        b.at(DUE + 5 * MS);
        b.invoke(2, "deliver", json!({"ends": "o2"})).idem("d2");
        b.fail(2, "DEADLINE_PASSED");
        b.at(DUE + 2_000 * MS);
        let endings = [
            ("o1", vec![ending("delivered", "action", 10, 501 * MS)]),
            ("o2", vec![ending("timed_out", "deadline", 12, DUE + 30 * MS)]),
            ("o3", vec![ending("timed_out", "deadline", 11, DUE + 20 * MS)]),
        ];
        finals(&mut b, &endings);
        let v = check(&build(&b), &opts(0));
        assert_valid(&v);
        assert_eq!(v.counts["ended"], 3);
        assert_eq!(v.counts["ended_by_deadline"], 2);
        assert_eq!(v.counts["max_lateness_ns"], 30 * MS);
        assert_eq!(v.counts["final_reads"], 3);
    }

    #[test]
    fn an_indeterminate_action_that_won_is_valid() {
        let mut b = HistoryBuilder::new();
        take(&mut b, 1, "o1");
        b.invoke(1, "deliver", json!({"ends": "o1"}));
        b.info(1, "TIMEOUT");
        b.at(DUE + 10 * MS);
        finals(&mut b, &[("o1", vec![ending("delivered", "action", 7, 3 * MS)])]);
        assert_valid(&check(&build(&b), &opts(0)));
    }

    #[test]
    fn an_obligation_ended_twice_is_flagged() {
        let mut b = HistoryBuilder::new();
        take(&mut b, 1, "o1");
        b.at(DUE + 10 * MS);
        let twice =
            vec![ending("timed_out", "deadline", 10, DUE + MS), ending("timed_out", "deadline", 11, DUE + 2 * MS)];
        finals(&mut b, &[("o1", twice)]);
        assert_flags(&check(&build(&b), &opts(0)), "double_ended");
    }

    #[test]
    fn two_acknowledged_actions_with_different_keys_are_flagged() {
        let mut b = HistoryBuilder::new();
        take(&mut b, 1, "o1");
        b.invoke(1, "judge", json!({"ends": "o1"})).idem("j1");
        b.invoke(2, "judge", json!({"ends": "o1"})).idem("j2");
        b.ok(1, json!({"ends": "o1"}));
        b.ok(2, json!({"ends": "o1"}));
        // A replay under the same key is fine.
        b.invoke(3, "judge", json!({"ends": "o1"})).idem("j1");
        b.ok(3, json!({"ends": "o1"}));
        b.at(DUE + 10 * MS);
        finals(&mut b, &[("o1", vec![ending("adopted", "action", 10, 4 * MS)])]);
        let v = check(&build(&b), &opts(0));
        assert_flags(&v, "double_ended");
        assert_eq!(v.anomalies_of("double_ended"), 1, "{:#?}", v.anomalies);
    }

    #[test]
    fn an_early_deadline_ending_is_flagged_unless_within_the_skew() {
        let mut b = HistoryBuilder::new();
        take(&mut b, 1, "o1");
        b.at(DUE + 10 * MS);
        finals(&mut b, &[("o1", vec![ending("timed_out", "deadline", 10, DUE - 20 * MS)])]);
        let h = build(&b);
        assert_flags(&check(&h, &opts(10)), "early_fire");
        assert_valid(&check(&h, &opts(30)));
    }

    #[test]
    fn an_ending_observed_before_the_due_is_flagged_whatever_the_server_clock_says() {
        // The server reports fired_at = due (its clock was skewed), but a read that completed
        // 200 ms before the due already showed the ending.
        let mut b = HistoryBuilder::new();
        take(&mut b, 1, "o1");
        b.at(DUE - 200 * MS);
        read(&mut b, 4, "read", "n2", &[("o1", vec![ending("timed_out", "deadline", 10, DUE)])]);
        b.at(DUE + 10 * MS);
        finals(&mut b, &[("o1", vec![ending("timed_out", "deadline", 10, DUE)])]);
        let v = check(&build(&b), &opts(50));
        assert_flags(&v, "early_fire");
        assert!(v.anomalies_named("early_fire").any(|a| a.message.contains("n2")));
    }

    #[test]
    fn two_nodes_that_disagree_are_flagged() {
        let mut b = HistoryBuilder::new();
        take(&mut b, 1, "o1");
        b.at(DUE + 10 * MS);
        read(&mut b, 4, "final-read", "n1", &[("o1", vec![ending("timed_out", "deadline", 10, DUE)])]);
        read(&mut b, 5, "final-read", "n2", &[("o1", vec![ending("delivered", "action", 11, DUE - MS)])]);
        assert_flags(&check(&build(&b), &opts(0)), "disagreement");
    }

    #[test]
    fn a_final_read_still_open_on_one_node_is_flagged() {
        let mut b = HistoryBuilder::new();
        take(&mut b, 1, "o1");
        b.at(DUE + 10 * MS);
        b.invoke(4, "final-read", json!({})).node("n1");
        b.invoke(5, "final-read", json!({})).node("n2");
        b.ok(
            4,
            json!({"obligations": [{"id": "o1", "due": DUE, "endings": [ending("timed_out", "deadline", 9, DUE)]}]}),
        );
        b.ok(5, json!({"obligations": [{"id": "o1", "due": DUE, "endings": []}]}));
        let v = check(&build(&b), &Options { lateness_bound_ns: Some(100 * MS), ..opts(0) });
        assert_flags(&v, "disagreement");
    }

    #[test]
    fn an_ending_that_vanishes_is_flagged() {
        let mut b = HistoryBuilder::new();
        take(&mut b, 1, "o1");
        b.at(DUE + 10 * MS);
        read(&mut b, 4, "read", "n1", &[("o1", vec![ending("timed_out", "deadline", 10, DUE)])]);
        read(&mut b, 5, "read", "n2", &[("o1", vec![])]);
        finals(&mut b, &[("o1", vec![ending("timed_out", "deadline", 10, DUE)])]);
        assert_flags(&check(&build(&b), &opts(0)), "stale_read");
    }

    #[test]
    fn an_obligation_never_ended_is_flagged_only_after_its_due() {
        let mut b = HistoryBuilder::new();
        take(&mut b, 1, "o1");
        b.at(DUE + 2_000 * MS);
        finals(&mut b, &[("o1", vec![])]);
        let v = check(&build(&b), &opts(0));
        assert_flags(&v, "never_ended");
        assert_eq!(v.anomalies_of("never_ended"), 1, "one obligation, reported once for all nodes");
        assert!(v.anomalies[0].message.contains("n1, n2, n3"), "{}", v.anomalies[0].message);

        let mut b = HistoryBuilder::new();
        take(&mut b, 1, "o1");
        b.at(DUE - 500 * MS);
        finals(&mut b, &[("o1", vec![])]);
        let v = check(&build(&b), &opts(0));
        assert_valid(&v);
        assert_eq!(v.counts["open_not_due"], 1);
    }

    #[test]
    fn an_acknowledged_obligation_missing_after_recovery_is_flagged() {
        let mut b = HistoryBuilder::new();
        take(&mut b, 1, "o1");
        take(&mut b, 2, "o2");
        b.at(DUE + 10 * MS);
        finals(&mut b, &[("o2", vec![ending("timed_out", "deadline", 10, DUE)])]);
        assert_flags(&check(&build(&b), &opts(0)), "missing");
    }

    #[test]
    fn an_action_acknowledged_after_the_due_is_flagged() {
        let mut b = HistoryBuilder::new();
        take(&mut b, 1, "o1");
        b.at(DUE + 100 * MS);
        b.invoke(1, "deliver", json!({"ends": "o1"}));
        b.ok(1, json!({"ends": "o1"}));
        finals(&mut b, &[("o1", vec![ending("delivered", "action", 10, DUE + 101 * MS)])]);
        let h = build(&b);
        assert_flags(&check(&h, &opts(50)), "late_action");
        assert_valid(&check(&h, &opts(150)));
    }

    #[test]
    fn an_acknowledged_action_that_did_not_end_it_is_flagged() {
        let mut b = HistoryBuilder::new();
        take(&mut b, 1, "o1");
        b.invoke(1, "deliver", json!({"ends": "o1"}));
        b.ok(1, json!({"ends": "o1"}));
        b.at(DUE + 10 * MS);
        finals(&mut b, &[("o1", vec![ending("timed_out", "deadline", 10, DUE)])]);
        assert_flags(&check(&build(&b), &opts(0)), "action_not_applied");
    }

    #[test]
    fn a_deadline_passed_refusal_without_the_deadline_is_flagged() {
        // Ended by the action, yet another action was told the deadline had won.
        let mut b = HistoryBuilder::new();
        take(&mut b, 1, "o1");
        b.invoke(1, "deliver", json!({"ends": "o1"}));
        b.fail(1, "DEADLINE_PASSED");
        b.at(DUE + 10 * MS);
        finals(&mut b, &[("o1", vec![ending("delivered", "action", 10, 5 * MS)])]);
        assert_flags(&check(&build(&b), &opts(0)), "spurious_late_reject");

        // Refused long before the due.
        let mut b = HistoryBuilder::new();
        take(&mut b, 1, "o1");
        b.invoke(1, "deliver", json!({"ends": "o1"}));
        b.fail(1, "DEADLINE_PASSED");
        b.at(DUE + 10 * MS);
        finals(&mut b, &[("o1", vec![ending("timed_out", "deadline", 10, DUE)])]);
        assert_flags(&check(&build(&b), &opts(0)), "spurious_late_reject");
    }

    #[test]
    fn lateness_is_reported_and_judged_against_the_bound() {
        let mut b = HistoryBuilder::new();
        take(&mut b, 1, "o1");
        b.at(DUE + 9_000 * MS);
        finals(&mut b, &[("o1", vec![ending("undecided", "deadline", 10, DUE + 8_000 * MS)])]);
        let h = build(&b);
        let v = check(&h, &opts(0));
        assert_valid(&v);
        assert_eq!(v.counts["max_lateness_ns"], 8_000 * MS);
        assert_eq!(v.counts["p99_lateness_ns"], 8_000 * MS);
        let bounded = Options { lateness_bound_ns: Some(5_000 * MS), ..opts(0) };
        assert_flags(&check(&h, &bounded), "late");
    }

    #[test]
    fn no_final_read_is_unknown() {
        let mut b = HistoryBuilder::new();
        take(&mut b, 1, "o1");
        assert_unknown(&check(&build(&b), &opts(0)), "no_final_read");
    }
}

mod replay {
    use super::*;
    use kungfu_jepsen::checker::replay::{Options, check};

    fn post(b: &mut HistoryBuilder, p: u64, key: &str, body: &str) {
        b.invoke(p, "post", json!({"agent": "a1", "thread": "t1", "body": body})).idem(key);
    }

    fn posted(b: &mut HistoryBuilder, p: u64, body: &str, receipt: Value) {
        b.ok(p, json!({"agent": "a1", "thread": "t1", "body": body})).receipt(receipt);
    }

    fn final_read(b: &mut HistoryBuilder, effects: Value) {
        b.invoke(90, "final-read", json!({})).node("n1");
        b.ok(90, json!({"effects": effects}));
    }

    fn run(b: &HistoryBuilder) -> Verdict {
        check(&build(b), &Options::default())
    }

    #[test]
    fn replays_conflicts_and_indeterminate_keys_are_valid() {
        let mut b = HistoryBuilder::new();
        // k1: ok with a one-time secret, replayed later without it (and with new hints).
        post(&mut b, 1, "k1", "x");
        posted(&mut b, 1, "x", json!({"seq": 1, "secret": "s3cr3t", "next": ["reply"]}));
        post(&mut b, 2, "k1", "x");
        posted(&mut b, 2, "x", json!({"seq": 1}));
        // k2: timed out, retried on another node, ok.
        post(&mut b, 3, "k2", "y");
        b.info(3, "TIMEOUT");
        post(&mut b, 4, "k2", "y");
        posted(&mut b, 4, "y", json!({"seq": 2}));
        // k3: timed out and never retried: zero or one effect (here: it happened).
        post(&mut b, 5, "k3", "z");
        b.info(5, "TIMEOUT");
        // k4: only ever timed out, and did not happen.
        post(&mut b, 6, "k4", "w");
        // k1 reused with another request: refused, no effect.
        post(&mut b, 7, "k1", "other");
        b.fail(7, "IDEMPOTENCY_KEY_REUSED");
        final_read(&mut b, json!(["k1", {"key": "k2", "request": {"agent": "a1", "thread": "t1", "body": "y"}}, "k3"]));
        let v = run(&b);
        assert_valid(&v);
        assert_eq!(v.counts["keys"], 4);
        assert_eq!(v.counts["retried_keys"], 2);
        assert_eq!(v.counts["key_reused_refusals"], 1);
    }

    #[test]
    fn two_different_receipts_for_one_key_are_flagged() {
        let mut b = HistoryBuilder::new();
        post(&mut b, 1, "k1", "x");
        posted(&mut b, 1, "x", json!({"seq": 1}));
        post(&mut b, 2, "k1", "x");
        posted(&mut b, 2, "x", json!({"seq": 2}));
        final_read(&mut b, json!(["k1"]));
        assert_flags(&run(&b), "receipt_mismatch");
    }

    #[test]
    fn a_secret_disclosed_twice_is_flagged() {
        let mut b = HistoryBuilder::new();
        post(&mut b, 1, "k1", "x");
        posted(&mut b, 1, "x", json!({"grant": "g1", "secret": "s"}));
        post(&mut b, 2, "k1", "x");
        posted(&mut b, 2, "x", json!({"grant": "g1", "secret": "s"}));
        final_read(&mut b, json!(["k1"]));
        assert_flags(&run(&b), "secret_replayed");
    }

    #[test]
    fn a_reused_key_with_another_request_taking_effect_is_flagged() {
        let mut b = HistoryBuilder::new();
        post(&mut b, 1, "k1", "x");
        posted(&mut b, 1, "x", json!({"seq": 1}));
        post(&mut b, 2, "k1", "other");
        posted(&mut b, 2, "other", json!({"seq": 2}));
        final_read(&mut b, json!(["k1", "k1"]));
        let v = run(&b);
        assert_flags(&v, "conflict_applied");
        assert_flags(&v, "double_effect");
    }

    #[test]
    fn an_effect_of_the_refused_request_is_flagged() {
        let mut b = HistoryBuilder::new();
        post(&mut b, 1, "k1", "x");
        posted(&mut b, 1, "x", json!({"seq": 1}));
        post(&mut b, 2, "k1", "other");
        b.fail(2, "IDEMPOTENCY_KEY_REUSED");
        final_read(&mut b, json!([{"key": "k1", "request": {"agent": "a1", "thread": "t1", "body": "other"}}]));
        assert_flags(&run(&b), "conflict_applied");
    }

    #[test]
    fn one_request_both_replayed_and_refused_is_flagged() {
        let mut b = HistoryBuilder::new();
        post(&mut b, 1, "k1", "x");
        posted(&mut b, 1, "x", json!({"seq": 1}));
        post(&mut b, 2, "k1", "x");
        b.fail(2, "IDEMPOTENCY_KEY_REUSED");
        final_read(&mut b, json!(["k1"]));
        assert_flags(&run(&b), "replay_rejected");
    }

    #[test]
    fn a_key_reused_refusal_without_a_rival_is_flagged() {
        let mut b = HistoryBuilder::new();
        post(&mut b, 1, "k1", "x");
        b.fail(1, "IDEMPOTENCY_KEY_REUSED");
        final_read(&mut b, json!([]));
        assert_flags(&run(&b), "spurious_key_reused");
    }

    #[test]
    fn a_double_effect_under_one_key_is_flagged_even_when_indeterminate() {
        let mut b = HistoryBuilder::new();
        post(&mut b, 1, "k1", "x");
        b.info(1, "TIMEOUT");
        post(&mut b, 2, "k1", "x");
        b.info(2, "UNAVAILABLE");
        final_read(&mut b, json!(["k1", "k1"]));
        assert_flags(&run(&b), "double_effect");
    }

    #[test]
    fn a_lost_acknowledged_effect_is_flagged() {
        let mut b = HistoryBuilder::new();
        post(&mut b, 1, "k1", "x");
        posted(&mut b, 1, "x", json!({"seq": 1}));
        final_read(&mut b, json!([]));
        assert_flags(&run(&b), "lost_effect");
    }

    #[test]
    fn effects_of_failed_or_unknown_keys_are_flagged() {
        let mut b = HistoryBuilder::new();
        post(&mut b, 1, "k1", "x");
        b.fail(1, "THREAD_CLOSED");
        final_read(&mut b, json!(["k1", "k9"]));
        let v = run(&b);
        assert_flags(&v, "failed_applied");
        assert_flags(&v, "unexpected_effect");
    }

    #[test]
    fn keys_are_scoped_by_agent_and_action() {
        // The same key string for two agents is two logical requests (L3), each acknowledged.
        let mut b = HistoryBuilder::new();
        b.invoke(1, "post", json!({"agent": "a1", "body": "x"})).idem("k");
        b.ok(1, json!({})).receipt(json!({"seq": 1}));
        b.invoke(2, "post", json!({"agent": "a2", "body": "y"})).idem("k");
        b.ok(2, json!({})).receipt(json!({"seq": 2}));
        let h = build(&b);
        let v = check(&h, &Options { require_final_read: false, ..Options::default() });
        assert_valid(&v);
        assert_eq!(v.counts["keys"], 2);
    }

    #[test]
    fn no_final_read_is_unknown() {
        let mut b = HistoryBuilder::new();
        post(&mut b, 1, "k1", "x");
        posted(&mut b, 1, "x", json!({"seq": 1}));
        assert_unknown(&run(&b), "no_final_read");
    }
}

mod facts {
    use super::*;
    use kungfu_jepsen::checker::facts::{Options, check};

    fn add(b: &mut HistoryBuilder, p: u64, id: &str) {
        b.invoke(p, "add", json!({"id": id}));
    }

    fn read(b: &mut HistoryBuilder, p: u64, f: &str, node: &str, ids: &[&str]) {
        b.invoke(p, f, json!({})).node(node);
        b.ok(p, json!({"ids": ids})).node(node);
    }

    fn run(b: &HistoryBuilder) -> Verdict {
        check(&build(b), &Options::default())
    }

    #[test]
    fn acknowledged_facts_surviving_with_indeterminate_ones_either_way_is_valid() {
        let mut b = HistoryBuilder::new();
        add(&mut b, 1, "f1");
        b.ok(1, json!({"id": "f1"}));
        add(&mut b, 2, "f2");
        b.info(2, "TIMEOUT"); // happened
        add(&mut b, 3, "f3");
        b.info(3, "TIMEOUT"); // did not happen
        add(&mut b, 4, "f4");
        b.fail(4, "LIMIT_EXCEEDED");
        add(&mut b, 5, "f5"); // still in flight at the end; happened
        read(&mut b, 6, "read", "n2", &["f1"]);
        for (p, node) in [(7, "n1"), (8, "n2"), (9, "n3")] {
            read(&mut b, p, "final-read", node, &["f1", "f2", "f5"]);
        }
        let v = run(&b);
        assert_valid(&v);
        assert_eq!(v.counts["recovered"], 2);
        assert_eq!(v.counts["final_reads"], 3);
        assert_eq!(v.counts["info"], 3);
    }

    #[test]
    fn a_lost_acknowledged_write_is_flagged() {
        let mut b = HistoryBuilder::new();
        add(&mut b, 1, "f1");
        b.ok(1, json!({"id": "f1"}));
        add(&mut b, 2, "f2");
        b.ok(2, json!({"id": "f2"}));
        for (p, node) in [(7, "n1"), (8, "n2")] {
            read(&mut b, p, "final-read", node, &["f2"]);
        }
        let v = run(&b);
        assert_flags(&v, "lost");
        let a = v.anomalies_named("lost").next().expect("one");
        assert!(a.message.contains("f1"));
        assert!(a.ops.contains(&0) && a.ops.contains(&1), "names the add: {a:?}");
    }

    #[test]
    fn an_indeterminate_fact_seen_then_gone_is_lost() {
        let mut b = HistoryBuilder::new();
        add(&mut b, 1, "f1");
        b.info(1, "TIMEOUT");
        read(&mut b, 2, "read", "n1", &["f1"]);
        read(&mut b, 3, "final-read", "n1", &[]);
        assert_flags(&run(&b), "lost");
    }

    #[test]
    fn a_fact_nobody_added_is_flagged() {
        let mut b = HistoryBuilder::new();
        add(&mut b, 1, "f1");
        b.ok(1, json!({"id": "f1"}));
        read(&mut b, 2, "final-read", "n1", &["f1", "ghost"]);
        assert_flags(&run(&b), "unexpected");
    }

    #[test]
    fn a_fact_read_before_its_add_was_invoked_is_unexpected() {
        let mut b = HistoryBuilder::new();
        read(&mut b, 2, "read", "n1", &["f1"]);
        add(&mut b, 1, "f1");
        b.ok(1, json!({"id": "f1"}));
        read(&mut b, 3, "final-read", "n1", &["f1"]);
        assert_flags(&run(&b), "unexpected");
    }

    #[test]
    fn a_failed_fact_present_is_flagged() {
        let mut b = HistoryBuilder::new();
        add(&mut b, 1, "f1");
        b.fail(1, "LIMIT_EXCEEDED");
        read(&mut b, 2, "final-read", "n1", &["f1"]);
        assert_flags(&run(&b), "failed_present");
    }

    #[test]
    fn a_stale_read_is_flagged_unless_allowed() {
        let mut b = HistoryBuilder::new();
        add(&mut b, 1, "f1");
        b.ok(1, json!({"id": "f1"}));
        read(&mut b, 2, "read", "n3", &[]);
        read(&mut b, 3, "final-read", "n1", &["f1"]);
        let h = build(&b);
        assert_flags(&check(&h, &Options::default()), "stale");
        let v = check(&h, &Options { allow_stale: true, ..Options::default() });
        assert_valid(&v);
        assert_eq!(v.counts["stale_facts"], 1);
    }

    #[test]
    fn final_reads_that_diverge_are_flagged() {
        let mut b = HistoryBuilder::new();
        add(&mut b, 1, "f1");
        b.info(1, "TIMEOUT");
        b.invoke(7, "final-read", json!({})).node("n1");
        b.invoke(8, "final-read", json!({})).node("n2");
        b.ok(7, json!({"ids": ["f1"]}));
        b.ok(8, json!({"ids": []}));
        assert_flags(&run(&b), "divergence");
    }

    #[test]
    fn no_final_read_is_unknown() {
        let mut b = HistoryBuilder::new();
        add(&mut b, 1, "f1");
        b.ok(1, json!({"id": "f1"}));
        assert_unknown(&run(&b), "no_final_read");
    }

    /// A final read that names each fact's entry number.
    fn numbered_read(b: &mut HistoryBuilder, p: u64, node: &str, facts: &[(&str, u64)]) {
        let ids: Vec<&str> = facts.iter().map(|(id, _)| *id).collect();
        let seqs: Vec<u64> = facts.iter().map(|(_, seq)| *seq).collect();
        b.invoke(p, "final-read", json!({})).node(node);
        b.ok(p, json!({"ids": ids, "seqs": seqs})).node(node);
    }

    #[test]
    fn receipts_whose_entry_numbers_hold_their_facts_are_valid() {
        let mut b = HistoryBuilder::new();
        add(&mut b, 1, "f1");
        b.ok(1, json!({"id": "f1", "seq": 1}));
        add(&mut b, 2, "f2");
        b.info(2, "TIMEOUT"); // happened, at 2
        add(&mut b, 3, "f3");
        b.ok(3, json!({"id": "f3", "seq": 3}));
        for (p, node) in [(7, "n1"), (8, "n2"), (9, "n3")] {
            numbered_read(&mut b, p, node, &[("f1", 1), ("f2", 2), ("f3", 3)]);
        }
        let v = run(&b);
        assert_valid(&v);
        assert_eq!(v.counts["reused"], 0);
    }

    #[test]
    fn an_entry_number_reused_for_another_fact_is_flagged() {
        // Issue #33's loss: f2 was acknowledged as entry 2, a leader that lost it gave entry 2 to
        // f3, and every node converged on that (no divergence); f2 is lost too.
        let mut b = HistoryBuilder::new();
        add(&mut b, 1, "f1");
        b.ok(1, json!({"id": "f1", "seq": 1}));
        add(&mut b, 2, "f2");
        b.ok(2, json!({"id": "f2", "seq": 2}));
        add(&mut b, 3, "f3");
        b.info(3, "TIMEOUT");
        for (p, node) in [(7, "n1"), (8, "n2"), (9, "n3")] {
            numbered_read(&mut b, p, node, &[("f1", 1), ("f3", 2)]);
        }
        let v = run(&b);
        assert_flags(&v, "reused");
        assert_flags(&v, "lost");
        let a = v.anomalies_named("reused").next().expect("one");
        assert!(a.message.contains("f2") && a.message.contains("f3") && a.message.contains("entry 2"), "{a:?}");
        assert!(a.ops.contains(&2) && a.ops.contains(&3), "names the add: {a:?}");
    }

    #[test]
    fn a_reused_entry_number_is_flagged_even_when_the_fact_survives_elsewhere() {
        // f2 was re-posted at entry 3 (a retry taken as new), while entry 2 holds f3.
        let mut b = HistoryBuilder::new();
        add(&mut b, 2, "f2");
        b.ok(2, json!({"id": "f2", "seq": 2}));
        add(&mut b, 3, "f3");
        b.ok(3, json!({"id": "f3", "seq": 2}));
        numbered_read(&mut b, 7, "n1", &[("f3", 2), ("f2", 3)]);
        let v = run(&b);
        assert_flags(&v, "reused");
        assert!(v.anomalies_named("reused").count() >= 2, "both the receipts and the read: {:#?}", v.anomalies);
    }
}

mod seq {
    use super::*;
    use kungfu_jepsen::checker::seq::{Options, check};

    fn append(b: &mut HistoryBuilder, p: u64, thread: &str, id: &str) {
        b.invoke(p, "append", json!({"thread": thread, "id": id, "author": "a1"})).idem(format!("k-{id}"));
    }

    fn acked(b: &mut HistoryBuilder, p: u64, thread: &str, id: &str, seq: u64) {
        b.ok(p, json!({"thread": thread, "id": id, "author": "a1", "seq": seq}));
    }

    fn entries(ids: &[&str], after: u64) -> Vec<Value> {
        ids.iter()
            .enumerate()
            .map(|(i, id)| json!({"seq": after + 1 + i as u64, "id": id, "author": "a1", "idem": format!("k-{id}")}))
            .collect()
    }

    fn read_raw(b: &mut HistoryBuilder, p: u64, f: &str, node: &str, thread: &str, after: u64, list: Vec<Value>) {
        b.invoke(p, f, json!({"thread": thread, "after": after})).node(node);
        b.ok(p, json!({"thread": thread, "entries": list})).node(node);
    }

    fn read(b: &mut HistoryBuilder, p: u64, f: &str, node: &str, thread: &str, ids: &[&str]) {
        read_raw(b, p, f, node, thread, 0, entries(ids, 0));
    }

    fn run(b: &HistoryBuilder) -> Verdict {
        check(&build(b), &Options::default())
    }

    #[test]
    fn consistent_sequences_across_nodes_and_threads_are_valid() {
        let mut b = HistoryBuilder::new();
        append(&mut b, 1, "t1", "e1");
        append(&mut b, 2, "t1", "e2"); // concurrent with e1: either order is legal
        acked(&mut b, 2, "t1", "e2", 1);
        acked(&mut b, 1, "t1", "e1", 2);
        append(&mut b, 3, "t1", "e3");
        b.info(3, "TIMEOUT"); // happened, at seq 3
        append(&mut b, 4, "t1", "e4");
        b.info(4, "TIMEOUT"); // never happened
        append(&mut b, 5, "t2", "x1");
        acked(&mut b, 5, "t2", "x1", 1);
        append(&mut b, 6, "t1", "e5");
        b.fail(6, "THREAD_CLOSED");
        read(&mut b, 7, "read", "n2", "t1", &["e2", "e1"]);
        read_raw(&mut b, 8, "read", "n3", "t1", 1, entries(&["e1", "e3"], 1));
        for (p, node) in [(10, "n1"), (11, "n2"), (12, "n3")] {
            read(&mut b, p, "final-read", node, "t1", &["e2", "e1", "e3"]);
            read(&mut b, p + 10, "final-read", node, "t2", &["x1"]);
        }
        let v = run(&b);
        assert_valid(&v);
        assert_eq!(v.counts["threads"], 2);
        assert_eq!(v.counts["max_seq"], 3);
    }

    #[test]
    fn a_gap_is_flagged() {
        let mut b = HistoryBuilder::new();
        append(&mut b, 1, "t1", "e1");
        acked(&mut b, 1, "t1", "e1", 1);
        append(&mut b, 2, "t1", "e2");
        acked(&mut b, 2, "t1", "e2", 3);
        let list = vec![json!({"seq": 1, "id": "e1"}), json!({"seq": 3, "id": "e2"})];
        read_raw(&mut b, 3, "final-read", "n1", "t1", 0, list);
        let v = run(&b);
        assert_flags(&v, "gap");
        assert!(v.anomalies_named("gap").any(|a| a.message.contains("[2]")));
    }

    #[test]
    fn a_duplicate_seq_is_flagged() {
        let mut b = HistoryBuilder::new();
        append(&mut b, 1, "t1", "e1");
        acked(&mut b, 1, "t1", "e1", 1);
        append(&mut b, 2, "t1", "e2");
        acked(&mut b, 2, "t1", "e2", 1);
        let list = vec![json!({"seq": 1, "id": "e1"}), json!({"seq": 1, "id": "e2"})];
        read_raw(&mut b, 3, "final-read", "n1", "t1", 0, list);
        let v = run(&b);
        assert_flags(&v, "dup_seq");
        assert_flags(&v, "seq_mismatch");
    }

    #[test]
    fn one_entry_twice_in_a_read_is_flagged() {
        let mut b = HistoryBuilder::new();
        append(&mut b, 1, "t1", "e1");
        acked(&mut b, 1, "t1", "e1", 1);
        read(&mut b, 3, "final-read", "n1", "t1", &["e1", "e1"]);
        assert_flags(&run(&b), "dup_value");
    }

    #[test]
    fn a_stale_prefix_divergence_between_nodes_is_flagged() {
        // n2 was a deposed leader: it assigned seq 2 to another entry.
        let mut b = HistoryBuilder::new();
        append(&mut b, 1, "t1", "e1");
        acked(&mut b, 1, "t1", "e1", 1);
        append(&mut b, 2, "t1", "e2");
        append(&mut b, 3, "t1", "e3");
        b.info(2, "TIMEOUT");
        b.info(3, "TIMEOUT");
        read(&mut b, 4, "final-read", "n1", "t1", &["e1", "e2"]);
        read(&mut b, 5, "final-read", "n2", "t1", &["e1", "e3"]);
        let v = run(&b);
        assert_flags(&v, "incompatible_order");
        assert!(v.anomalies_named("incompatible_order").any(|a| a.message.contains("n1") && a.message.contains("n2")));
    }

    #[test]
    fn same_seq_with_another_author_or_key_is_flagged() {
        let mut b = HistoryBuilder::new();
        append(&mut b, 1, "t1", "e1");
        acked(&mut b, 1, "t1", "e1", 1);
        read(&mut b, 2, "final-read", "n1", "t1", &["e1"]);
        let forged = vec![json!({"seq": 1, "id": "e1", "author": "mallory", "idem": "k-e1"})];
        read_raw(&mut b, 3, "final-read", "n2", "t1", 0, forged);
        let v = run(&b);
        assert_flags(&v, "incompatible_order");
        assert_flags(&v, "entry_mismatch");
    }

    #[test]
    fn a_real_time_inversion_is_flagged() {
        // e1 acknowledged with seq 2 before e2 was invoked; e2 got seq 1.
        let mut b = HistoryBuilder::new();
        append(&mut b, 1, "t1", "e1");
        acked(&mut b, 1, "t1", "e1", 2);
        append(&mut b, 2, "t1", "e2");
        acked(&mut b, 2, "t1", "e2", 1);
        read(&mut b, 3, "final-read", "n1", "t1", &["e2", "e1"]);
        let v = run(&b);
        assert_flags(&v, "realtime");
        assert_eq!(v.anomalies_of("realtime"), 1);
    }

    #[test]
    fn a_real_time_inversion_against_an_indeterminate_append_is_flagged() {
        // e2 timed out but shows up before e1, which was acknowledged before e2 was invoked.
        let mut b = HistoryBuilder::new();
        append(&mut b, 1, "t1", "e1");
        b.info(1, "TIMEOUT");
        append(&mut b, 3, "t1", "e0");
        acked(&mut b, 3, "t1", "e0", 2);
        append(&mut b, 2, "t1", "e2");
        b.info(2, "TIMEOUT");
        read(&mut b, 4, "final-read", "n1", "t1", &["e2", "e0", "e1"]);
        assert_flags(&run(&b), "realtime");
    }

    #[test]
    fn a_lost_acknowledged_entry_is_flagged() {
        let mut b = HistoryBuilder::new();
        append(&mut b, 1, "t1", "e1");
        acked(&mut b, 1, "t1", "e1", 1);
        append(&mut b, 2, "t1", "e2");
        acked(&mut b, 2, "t1", "e2", 2);
        read(&mut b, 3, "final-read", "n1", "t1", &["e1"]);
        assert_flags(&run(&b), "lost");
    }

    #[test]
    fn a_stale_read_is_flagged() {
        let mut b = HistoryBuilder::new();
        append(&mut b, 1, "t1", "e1");
        acked(&mut b, 1, "t1", "e1", 1);
        read(&mut b, 2, "read", "n3", "t1", &[]);
        read(&mut b, 3, "final-read", "n1", "t1", &["e1"]);
        assert_flags(&run(&b), "stale_read");
    }

    #[test]
    fn an_acknowledged_seq_that_reads_contradict_is_flagged() {
        let mut b = HistoryBuilder::new();
        append(&mut b, 1, "t1", "e1");
        b.info(1, "TIMEOUT");
        append(&mut b, 2, "t1", "e2");
        acked(&mut b, 2, "t1", "e2", 1);
        read(&mut b, 3, "final-read", "n1", "t1", &["e1", "e2"]);
        assert_flags(&run(&b), "seq_mismatch");
    }

    #[test]
    fn entries_from_nowhere_the_future_or_failures_are_flagged() {
        let mut b = HistoryBuilder::new();
        read(&mut b, 1, "read", "n1", "t1", &["e1"]);
        append(&mut b, 2, "t1", "e1");
        acked(&mut b, 2, "t1", "e1", 1);
        append(&mut b, 3, "t1", "e2");
        b.fail(3, "NOT_MEMBER");
        read(&mut b, 4, "final-read", "n1", "t1", &["e1", "e2", "e3"]);
        let v = run(&b);
        assert_flags(&v, "future_read");
        assert_flags(&v, "failed_present");
        assert_flags(&v, "unexpected");
    }

    #[test]
    fn no_final_read_is_unknown() {
        let mut b = HistoryBuilder::new();
        append(&mut b, 1, "t1", "e1");
        acked(&mut b, 1, "t1", "e1", 1);
        assert_unknown(&run(&b), "no_final_read");
    }
}

mod no_success {
    use super::*;
    use kungfu_jepsen::checker::no_success::{Options, check};

    #[test]
    fn a_run_without_any_success_is_invalid() {
        let mut b = HistoryBuilder::new();
        b.invoke(1, "adopt", json!({}));
        b.fail(1, "UNAVAILABLE");
        b.invoke(2, "adopt", json!({}));
        b.info(2, "TIMEOUT");
        b.nemesis("kill", json!({"node": "n1"}));
        assert_flags(&check(&build(&b), &Options::default()), "no_success");
        assert_flags(&check(&build(&HistoryBuilder::new()), &Options::default()), "no_success");
    }

    #[test]
    fn one_success_is_enough_unless_an_f_is_required() {
        let mut b = HistoryBuilder::new();
        b.invoke(1, "adopt", json!({}));
        b.fail(1, "ADOPTION_LIMIT_REACHED");
        b.invoke(2, "read", json!({}));
        b.ok(2, json!({}));
        let h = build(&b);
        let v = check(&h, &Options::default());
        assert_valid(&v);
        assert_eq!(v.counts["adopt.fail"], 1);
        assert_eq!(v.counts["read.ok"], 1);
        let strict = Options { require_ok: vec!["adopt".to_owned()] };
        assert_flags(&check(&h, &strict), "no_success");
    }
}
