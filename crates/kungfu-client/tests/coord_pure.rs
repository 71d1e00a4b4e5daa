//! The SDK's pure coordination helpers: the gather reductions (design §4.6, the behaviour of fak's
//! `internal/modelroute/modelroute_test.go` for `Combine`) and declared topologies (design §4.7,
//! fak's `internal/agenttopo/agenttopo_test.go`), ported with our own values. Every number here
//! prints the same in Go's `'g'` format and Rust's shortest round-trip format.

use kungfu_client::reduce::{CombineError, Combined, Reduction, UnknownReduction, Vote, combine};
use kungfu_client::topology::{Exchange, Topology, TopologyError};
use kungfu_types::AgentId;
use std::collections::BTreeSet;

fn ag(n: u64) -> AgentId {
    AgentId(n)
}

fn set(ns: &[u64]) -> BTreeSet<AgentId> {
    ns.iter().copied().map(AgentId).collect()
}

/// A vote with no weight (counts as 1) and no score.
fn v(member: u64, output: &str) -> Vote<'_> {
    Vote { member: ag(member), weight: 0.0, score: 0.0, output: output.as_bytes() }
}

fn weighted(member: u64, weight: f64, output: &str) -> Vote<'_> {
    Vote { weight, ..v(member, output) }
}

fn scored(member: u64, score: f64, output: &str) -> Vote<'_> {
    Vote { score, ..v(member, output) }
}

fn ok(reduce: Reduction, votes: &[Vote<'_>]) -> Combined {
    combine(reduce, votes).unwrap_or_else(|e| panic!("{reduce} over {votes:?}: {e}"))
}

fn text(c: &Combined) -> &str {
    std::str::from_utf8(&c.output).expect("UTF-8 output")
}

// --- reductions ----------------------------------------------------------------------------------

#[test]
fn reduction_names_parse_and_unknown_names_are_refused() {
    for (name, r) in [
        ("first", Reduction::First),
        ("concat", Reduction::Concat),
        ("vote", Reduction::Vote),
        ("best_of", Reduction::BestOf),
        ("best-of", Reduction::BestOf),
        ("all_reduce", Reduction::AllReduce),
        ("all-reduce", Reduction::AllReduce),
    ] {
        assert_eq!(name.parse::<Reduction>(), Ok(r), "{name}");
        // The canonical name reads back as the same reduction.
        assert_eq!(r.to_string().parse::<Reduction>(), Ok(r));
    }
    assert_eq!(Reduction::default(), Reduction::First);
    for bad in ["bogus", "", "First", "best of"] {
        assert_eq!(bad.parse::<Reduction>(), Err(UnknownReduction(bad.to_owned())));
    }
    let message = "bogus".parse::<Reduction>().expect_err("unknown").to_string();
    assert!(message.contains("\"bogus\""), "{message}");
}

#[test]
fn first_is_the_rank_0_output() {
    let votes = [v(4, "north"), v(7, "south")];
    let c = ok(Reduction::First, &votes);
    assert_eq!((text(&c), c.winner), ("north", Some(ag(4))));
    assert!(c.tally.is_empty());
    // The default reduction is `first`.
    assert_eq!(ok(Reduction::default(), &votes), c);
}

#[test]
fn concat_joins_outputs_in_rank_order() {
    let c = ok(Reduction::Concat, &[v(2, "one"), v(5, "two"), v(11, "three")]);
    assert_eq!(text(&c), "one\ntwo\nthree");
    assert_eq!(c.winner, None);
    assert!(c.tally.is_empty());
}

#[test]
fn vote_majority_wins_and_credits_its_smallest_voter() {
    // Given out of rank order (as a topology's declaration order may be): the winner is still the
    // smallest id that voted "yes", not the first.
    let c = ok(Reduction::Vote, &[v(8, "yes"), v(5, "no"), v(3, "yes")]);
    assert_eq!(text(&c), "yes");
    assert_eq!(c.winner, Some(ag(3)));
    assert_eq!(c.tally, vec![(b"no".to_vec(), 1.0), (b"yes".to_vec(), 2.0)]);
}

#[test]
fn weighted_vote_lets_one_heavy_vote_outweigh_two_light_ones() {
    let c = ok(Reduction::Vote, &[weighted(1, 5.0, "A"), weighted(2, 1.0, "B"), weighted(3, 1.0, "B")]);
    assert_eq!((text(&c), c.winner), ("A", Some(ag(1))));
    assert_eq!(c.tally, vec![(b"A".to_vec(), 5.0), (b"B".to_vec(), 2.0)]);

    // A weight that is zero, negative or not finite counts as 1, so it beats a weight of 0.5.
    for w in [0.0, -2.0, f64::NAN, f64::INFINITY] {
        let c = ok(Reduction::Vote, &[weighted(1, w, "A"), weighted(2, 0.5, "B")]);
        assert_eq!(text(&c), "A", "weight {w}");
        assert_eq!(c.tally, vec![(b"A".to_vec(), 1.0), (b"B".to_vec(), 0.5)], "weight {w}");
    }
}

#[test]
fn vote_tie_goes_to_the_bytewise_smaller_output_whatever_the_order() {
    for votes in [[v(1, "beta"), v(2, "alpha")], [v(2, "alpha"), v(1, "beta")]] {
        let c = ok(Reduction::Vote, &votes);
        assert_eq!((text(&c), c.winner), ("alpha", Some(ag(2))));
    }
    // Bytewise, not alphabetical: an upper-case letter sorts before every lower-case one.
    let c = ok(Reduction::Vote, &[v(1, "apple"), v(2, "Zebra")]);
    assert_eq!(text(&c), "Zebra");
}

#[test]
fn best_of_takes_the_highest_score() {
    let c = ok(Reduction::BestOf, &[scored(1, 0.25, "lo"), scored(2, 0.75, "hi"), scored(3, 0.5, "mid")]);
    assert_eq!((text(&c), c.winner), ("hi", Some(ag(2))));
    assert!(c.tally.is_empty());

    // A tie goes to the smallest member id, numerically: ag_9 before ag_10, in either order.
    for votes in [[scored(10, 0.5, "ten"), scored(9, 0.5, "nine")], [scored(9, 0.5, "nine"), scored(10, 0.5, "ten")]] {
        let c = ok(Reduction::BestOf, &votes);
        assert_eq!((text(&c), c.winner), ("nine", Some(ag(9))));
    }

    // NaN ranks below every score, wherever it stands.
    let c = ok(Reduction::BestOf, &[scored(1, f64::NAN, "x"), scored(2, -3.0, "y")]);
    assert_eq!(c.winner, Some(ag(2)));
}

#[test]
fn all_reduce_is_the_weighted_mean() {
    // (2 * 1 + 6 * 3) / (1 + 3) = 5; outputs are trimmed before they are read.
    let c = ok(Reduction::AllReduce, &[weighted(1, 1.0, " 2\n"), weighted(2, 3.0, "6")]);
    assert_eq!(text(&c), "5");
    assert_eq!(c.winner, None);
    assert!(c.tally.is_empty());

    // Unweighted, fractional and signed values.
    assert_eq!(text(&ok(Reduction::AllReduce, &[v(1, "1.5"), v(2, "3.5")])), "2.5");
    assert_eq!(text(&ok(Reduction::AllReduce, &[weighted(1, 1.0, "-4"), weighted(2, 4.0, "+1")])), "0");
}

#[test]
fn combine_refuses_what_it_cannot_fold() {
    for r in [Reduction::First, Reduction::Concat, Reduction::Vote, Reduction::BestOf, Reduction::AllReduce] {
        assert_eq!(combine(r, &[]), Err(CombineError::Empty), "{r}");
    }

    let not_numeric = [v(3, "12"), v(7, "not-a-number")];
    assert_eq!(combine(Reduction::AllReduce, &not_numeric), Err(CombineError::NotNumeric { member: ag(7) }));
    let message = CombineError::NotNumeric { member: ag(7) }.to_string();
    assert!(message.contains("ag_7"), "{message}");
    for bad in ["", "  ", "0x10", "1,5"] {
        let votes = [v(7, bad)];
        assert_eq!(combine(Reduction::AllReduce, &votes), Err(CombineError::NotNumeric { member: ag(7) }), "{bad:?}");
    }
    let invalid_utf8 = [Vote { output: &[0x31, 0xff], ..v(7, "") }];
    assert_eq!(combine(Reduction::AllReduce, &invalid_utf8), Err(CombineError::NotNumeric { member: ag(7) }));

    // Rust reads these as numbers; none is a finite value a mean can use.
    for bad in ["NaN", "+Inf", "-infinity", "1e400"] {
        let votes = [v(3, "10"), v(7, bad)];
        assert_eq!(combine(Reduction::AllReduce, &votes), Err(CombineError::NotFinite { member: ag(7) }), "{bad:?}");
    }

    // Finite outputs whose weighted sum leaves the f64 range.
    let votes = [v(1, "1e308"), v(2, "1e308")];
    assert_eq!(combine(Reduction::AllReduce, &votes), Err(CombineError::OutOfRange));
}

// --- topologies ----------------------------------------------------------------------------------

#[test]
fn declare_validates_endpoints() {
    let members = set(&[1, 2]);
    assert_eq!(Topology::declare(&members, &[(ag(1), ag(26))]), Err(TopologyError::UnknownMember(ag(26))));
    assert_eq!(Topology::declare(&members, &[(ag(26), ag(1))]), Err(TopologyError::UnknownMember(ag(26))));
    assert_eq!(Topology::declare(&members, &[(ag(2), ag(2))]), Err(TopologyError::SelfEdge(ag(2))));
    assert_eq!(
        Topology::declare(&members, &[(ag(1), ag(2)), (ag(1), ag(2))]),
        Err(TopologyError::DuplicateEdge(ag(1), ag(2)))
    );
    assert_eq!(Topology::declare(&set(&[]), &[]), Err(TopologyError::Empty));

    let t = Topology::declare(&members, &[(ag(2), ag(1))]).expect("a valid edge");
    assert_eq!(t.edges(), [(ag(2), ag(1))]);
    assert_eq!(t.members(), &members);
}

#[test]
fn declare_rejects_cycles() {
    // Declared starting from ag_30, but the search starts from the smallest id, ag_10, so the back
    // edge is found at ag_10.
    let members = set(&[10, 20, 30]);
    let cycle = [(ag(30), ag(20)), (ag(20), ag(10)), (ag(10), ag(30))];
    assert_eq!(Topology::declare(&members, &cycle), Err(TopologyError::Cycle(ag(10))));

    // A diamond reaches ag_4 twice along different paths: that is not a cycle.
    let diamond = [(ag(1), ag(2)), (ag(1), ag(3)), (ag(2), ag(4)), (ag(3), ag(4))];
    assert!(Topology::declare(&set(&[1, 2, 3, 4]), &diamond).is_ok());
}

#[test]
fn neighbor_exchange_preserves_declaration_order_into_combine() {
    let sink = ag(40);
    let t = Topology::declare(&set(&[1, 2, 3, 40]), &[(ag(2), sink), (ag(1), sink), (ag(3), sink)]).expect("a fan-in");
    assert_eq!(
        t.neighbor_exchange(sink),
        Ok(Exchange { node: sink, incoming: vec![ag(2), ag(1), ag(3)], outgoing: vec![] })
    );
    assert_eq!(t.neighbors_out(ag(2)), Some(&[sink][..]));
    assert_eq!(t.neighbors_in(ag(2)), Some(&[][..]));

    // The votes arrive in rank order, with one from a member that is no in-neighbor (ignored); the
    // fold reads them in declaration order.
    let votes = [v(1, "from-1"), v(2, "from-2"), v(3, "from-3"), v(40, "own")];
    let c = t.combine_in(sink, Reduction::Concat, &votes).expect("every in-neighbor has a vote");
    assert_eq!(text(&c), "from-2\nfrom-1\nfrom-3");
    let c = t.combine_in(sink, Reduction::First, &votes).expect("every in-neighbor has a vote");
    assert_eq!((text(&c), c.winner), ("from-2", Some(ag(2))));
}

#[test]
fn combine_in_refuses_a_partial_or_ambiguous_set_of_inputs() {
    let sink = ag(40);
    let t = Topology::declare(&set(&[1, 2, 40]), &[(ag(2), sink), (ag(1), sink)]).expect("a fan-in");
    let missing = [v(2, "from-2")];
    assert_eq!(
        t.combine_in(sink, Reduction::Concat, &missing),
        Err(TopologyError::MissingOutput { from: ag(1), to: sink })
    );
    let twice = [v(1, "a"), v(2, "b"), v(1, "c")];
    assert_eq!(
        t.combine_in(sink, Reduction::Concat, &twice),
        Err(TopologyError::DuplicateOutput { from: ag(1), to: sink })
    );
    let all = [v(1, "a"), v(2, "b")];
    assert_eq!(t.combine_in(ag(1), Reduction::Concat, &all), Err(TopologyError::NoInNeighbors(ag(1))));
    assert_eq!(t.combine_in(ag(99), Reduction::Concat, &all), Err(TopologyError::UnknownMember(ag(99))));
    assert_eq!(t.neighbor_exchange(ag(99)), Err(TopologyError::UnknownMember(ag(99))));
    assert_eq!(t.neighbors_in(ag(99)), None);
    // A fold error passes through.
    let words = [v(1, "a"), v(2, "b")];
    assert_eq!(
        t.combine_in(sink, Reduction::AllReduce, &words),
        Err(TopologyError::Combine(CombineError::NotNumeric { member: ag(2) }))
    );
}

#[test]
fn linear_and_star_constructors() {
    // Rank order is numeric: ag_9 hands off to ag_10.
    let line = Topology::linear(&set(&[10, 3, 9])).expect("a chain");
    assert_eq!(line.edges(), [(ag(3), ag(9)), (ag(9), ag(10))]);
    assert_eq!(Topology::linear(&set(&[5])).expect("one member").edges(), []);
    assert_eq!(Topology::linear(&set(&[])), Err(TopologyError::Empty));

    let star = Topology::star(ag(2), &set(&[3, 1])).expect("a star");
    assert_eq!(star.edges(), [(ag(2), ag(1)), (ag(2), ag(3))]);
    assert_eq!(star.members(), &set(&[1, 2, 3]));
    // A center listed among its own leaves would hand off to itself.
    assert_eq!(Topology::star(ag(2), &set(&[1, 2, 3])), Err(TopologyError::SelfEdge(ag(2))));
}
