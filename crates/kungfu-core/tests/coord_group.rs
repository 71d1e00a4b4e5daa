//! Groups and ranks (design §4.1): the behaviour of fak's `internal/comm/comm_test.go`, ported with
//! our own values, plus the one place our order differs from fak's (design §12 item 20).

use kungfu_core::coord::group::{CollectiveRef, GroupError, Spawned, group, rank_of, ranks, spawn, split};
use kungfu_types::{AgentId, EntrySeq, ThreadId};
use std::collections::{BTreeMap, BTreeSet};

fn ag(n: u64) -> AgentId {
    AgentId(n)
}

fn ags(ns: &[u64]) -> Vec<AgentId> {
    ns.iter().copied().map(AgentId).collect()
}

fn members(ns: &[u64]) -> BTreeSet<AgentId> {
    group(&ags(ns)).expect("a valid group")
}

#[test]
fn rank_is_deterministic_over_permutation() {
    let permutations: [[u64; 4]; 4] = [[3, 17, 40, 112], [112, 40, 17, 3], [40, 3, 112, 17], [17, 112, 3, 40]];
    let want = ags(&[3, 17, 40, 112]);
    for p in permutations {
        let g = members(&p);
        assert_eq!(ranks(&g), want, "permutation {p:?}");
        for (r, &id) in want.iter().enumerate() {
            assert_eq!(rank_of(&g, id), Some(r), "permutation {p:?}: rank of {id}");
            // ranks() inverts rank_of().
            assert_eq!(ranks(&g)[r], id);
        }
    }
}

#[test]
fn new_rejects_empty_and_duplicate() {
    assert_eq!(group(&[]), Err(GroupError::Empty));
    assert_eq!(group(&ags(&[6, 2, 6])), Err(GroupError::Duplicate(ag(6))));
    // The error names the repeated member in its text form.
    assert!(GroupError::Duplicate(ag(6)).to_string().contains("ag_6"), "{}", GroupError::Duplicate(ag(6)));
    // A single member is a group.
    assert_eq!(group(&[ag(6)]), Ok(BTreeSet::from([ag(6)])));
}

#[test]
fn rank_of_an_unknown_member_is_none() {
    let g = members(&[2, 4]);
    // Below, between and above the members: none of them is a member.
    assert_eq!(rank_of(&g, ag(1)), None);
    assert_eq!(rank_of(&g, ag(3)), None);
    assert_eq!(rank_of(&g, ag(99)), None);
    assert_eq!(rank_of(&g, ag(4)), Some(1));
}

/// A member's color in the split tests: a lane name, or none.
fn lane(id: AgentId) -> Option<String> {
    match id.0 {
        4 | 10 => Some("kernel".to_owned()),
        9 | 12 => Some("gateway".to_owned()),
        _ => None,
    }
}

#[test]
fn split_by_color_equals_lanes() {
    let g = members(&[30, 12, 10, 9, 4]);
    let parts = split(&g, lane);
    // Exactly the two colors, each re-ranked from 0 in ascending id order; ag_30 has no color and
    // joins neither.
    let want = BTreeMap::from([("gateway".to_owned(), ags(&[9, 12])), ("kernel".to_owned(), ags(&[4, 10]))]);
    assert_eq!(parts, want);
    for (color, sub) in &parts {
        // Every member of a sub-group has that sub-group's color (color = lane).
        assert!(sub.iter().all(|&id| lane(id).as_deref() == Some(color.as_str())), "{color}: {sub:?}");
        // The sub-group's ranks are those of a group built from its members alone.
        let own = group(sub).expect("a sub-group is a group");
        for (r, &id) in sub.iter().enumerate() {
            assert_eq!(rank_of(&own, id), Some(r));
        }
    }
    assert!(parts.values().all(|sub| !sub.contains(&ag(30))));
}

#[test]
fn split_is_order_independent() {
    let a = members(&[12, 4, 30, 9, 10]);
    let b = members(&[10, 30, 9, 12, 4]);
    let (sa, sb) = (split(&a, lane), split(&b, lane));
    assert_eq!(sa, sb);
    assert_eq!(sa["kernel"], ags(&[4, 10]));
}

#[test]
fn spawn_mints_one_membership_per_rank() {
    let wave = CollectiveRef { thread: ThreadId(7), header: EntrySeq(12) };
    let roster = spawn(wave, &members(&[8, 3]));
    assert_eq!(
        roster,
        vec![Spawned { wave, member: ag(3), rank: 0, size: 2 }, Spawned { wave, member: ag(8), rank: 1, size: 2 },]
    );
}

#[test]
fn numeric_rank_order_puts_ag_9_before_ag_10() {
    let g = members(&[10, 100, 9, 2]);
    assert_eq!(ranks(&g), ags(&[2, 9, 10, 100]));
    assert_eq!(rank_of(&g, ag(9)), Some(1));
    assert_eq!(rank_of(&g, ag(10)), Some(2));
    // fak's bytewise order of the text ids would rank them differently: ag_10 first, ag_9 last.
    let mut text: Vec<String> = g.iter().map(ToString::to_string).collect();
    text.sort();
    assert_eq!(text, ["ag_10", "ag_100", "ag_2", "ag_9"]);
}
