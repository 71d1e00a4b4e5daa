//! Wake targets (issue #35): set, list and remove by their agent only; the deliverer's records
//! follow the one-outstanding-event rule; no read returns a secret; the state rebuilds from facts
//! (the world checks L1 after every apply).

use kungfu_core::model::*;
use kungfu_core::read;
use kungfu_core::testkit::World;
use kungfu_core::*;
use kungfu_types::*;

fn set(w: &mut World, agent: AgentId, url: &str) -> Result<WakeTargetId, Rejection> {
    let secret = WakeSecret([7; 32]);
    match w.act(agent, Action::SetWakeTarget { url: url.into(), secret, filter: WakeFilter::default() })? {
        ActionResult::WakeTargetSet { target } => Ok(target),
        other => panic!("unexpected result {other:?}"),
    }
}

fn system(w: &mut World, action: Action) -> Result<ActionResult, Rejection> {
    w.exec(Principal::System, action, None).outcome.map(|r| r.result)
}

fn event(seq: u64, index: u64) -> WakeEvent {
    WakeEvent { seq, applied_index: index, digest: [seq as u8; 32], queued_at: Timestamp::from_micros(5) }
}

fn record(queued: Vec<(AgentId, WakeTargetId, WakeEvent)>, delivered: Vec<(AgentId, WakeTargetId, u64)>) -> Action {
    Action::RecordWake { queued, delivered, gave_up: vec![] }
}

#[test]
fn an_agent_sets_lists_and_removes_its_own_targets_and_no_read_shows_the_secret() {
    let mut w = World::new();
    let (a, b) = (w.register(), w.register());
    let t = set(&mut w, a, "https://hooks.example.com/a").unwrap();
    let listed = read::wake_targets(&w.state, a).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].id, listed[0].url.as_str()), (t, "https://hooks.example.com/a"));
    assert!(!format!("{listed:?}").contains("WakeSecret"), "a read never carries the secret");
    assert!(read::wake_targets(&w.state, b).unwrap().is_empty(), "another agent sees none of a's");
    // Another agent cannot remove it, and cannot tell it exists (§12).
    let r = w.refused(b, Action::RemoveWakeTarget { target: t });
    assert_eq!(r.code, Code::NotFound);
    w.ok(a, Action::RemoveWakeTarget { target: t });
    assert!(read::wake_targets(&w.state, a).unwrap().is_empty());
    assert_eq!(w.refused(a, Action::RemoveWakeTarget { target: t }).code, Code::NotFound, "removed once");
}

#[test]
fn a_malformed_or_oversized_url_and_one_target_too_many_are_refused_naming_the_field() {
    let mut w = World::new();
    let a = w.register();
    for bad in ["ftp://x.example.com/", "hooks.example.com/a", "https://a.example.com/a b"] {
        let r = w.refused(
            a,
            Action::SetWakeTarget { url: bad.into(), secret: WakeSecret([1; 32]), filter: WakeFilter::default() },
        );
        assert_eq!((r.code, r.field.as_deref()), (Code::InvalidArgument, Some("url")), "{bad}");
    }
    let long = format!("https://a.example.com/{}", "x".repeat(WakeLimits::DEFAULT.max_url_bytes));
    let r =
        w.refused(a, Action::SetWakeTarget { url: long, secret: WakeSecret([1; 32]), filter: WakeFilter::default() });
    assert_eq!((r.code, r.field.as_deref()), (Code::InvalidArgument, Some("url")));
    for i in 0..WakeLimits::DEFAULT.max_targets_per_agent {
        set(&mut w, a, &format!("https://a.example.com/{i}")).unwrap();
    }
    let r = set(&mut w, a, "https://a.example.com/more").unwrap_err();
    assert_eq!(r.code, Code::LimitExceeded);
}

#[test]
fn a_retried_set_with_a_fresh_secret_is_the_same_request_and_replays_its_receipt() {
    let mut w = World::new();
    let a = w.register();
    let key = w.fresh_key();
    let first = w.exec(
        Principal::Agent(a),
        Action::SetWakeTarget {
            url: "https://h.example.com/".into(),
            secret: WakeSecret([1; 32]),
            filter: WakeFilter::default(),
        },
        Some(key.clone()),
    );
    let again = w.exec(
        Principal::Agent(a),
        Action::SetWakeTarget {
            url: "https://h.example.com/".into(),
            secret: WakeSecret([2; 32]),
            filter: WakeFilter::default(),
        },
        Some(key),
    );
    assert!(again.replayed, "L3: a retry mints a new secret but is the same logical request");
    assert_eq!(first.outcome.unwrap().result, again.outcome.unwrap().result);
    assert_eq!(read::wake_targets(&w.state, a).unwrap().len(), 1, "one target, not two");
}

#[test]
fn the_deliverer_queues_one_event_at_a_time_in_sequence_and_only_the_system_may_record() {
    let mut w = World::new();
    let a = w.register();
    let t = set(&mut w, a, "https://h.example.com/").unwrap();
    // An agent may not record deliveries.
    let r = w.refused(a, record(vec![(a, t, event(1, 10))], vec![]));
    assert_eq!(r.code, Code::InvalidArgument);
    // Out of sequence, or a second event while the first is outstanding: refused whole.
    assert_eq!(system(&mut w, record(vec![(a, t, event(2, 10))], vec![])).unwrap_err().code, Code::InvalidState);
    system(&mut w, record(vec![(a, t, event(1, 10))], vec![])).unwrap();
    assert_eq!(system(&mut w, record(vec![(a, t, event(2, 11))], vec![])).unwrap_err().code, Code::InvalidState);
    // Acknowledging a wrong sequence number is refused; the right one, with its successor queued
    // in the same record, is taken.
    assert_eq!(system(&mut w, record(vec![], vec![(a, t, 2)])).unwrap_err().code, Code::InvalidState);
    system(&mut w, record(vec![(a, t, event(2, 12))], vec![(a, t, 1)])).unwrap();
    let v = &read::wake_targets(&w.state, a).unwrap()[0];
    assert_eq!((v.queued.map(|e| e.seq), v.delivered), (Some(2), 1));
    // A give-up stops the target: nothing more is queued until the agent sets it again.
    let gave_up = Action::RecordWake {
        queued: vec![],
        delivered: vec![],
        gave_up: vec![(a, t, WakeFailure { seq: 2, at: w.now, error: "HTTP 500 ".repeat(200) })],
    };
    system(&mut w, gave_up).unwrap();
    let v = &read::wake_targets(&w.state, a).unwrap()[0];
    let failed = v.failed.clone().expect("failed");
    assert!(failed.error.len() <= WakeLimits::DEFAULT.max_error_bytes, "the error is bounded");
    assert_eq!(system(&mut w, record(vec![(a, t, event(3, 13))], vec![])).unwrap_err().code, Code::InvalidState);
    // A removed target's progress is refused (a stale deliverer reloads).
    w.ok(a, Action::RemoveWakeTarget { target: t });
    assert_eq!(system(&mut w, record(vec![], vec![(a, t, 2)])).unwrap_err().code, Code::NotFound);
}
