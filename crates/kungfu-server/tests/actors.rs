//! The per-object actors on a real single-node replica: competing actions on one thread are
//! serialized (exactly one of many concurrent takes wins); a pre-checked rejection or a replay is
//! answered without a log write; the number of live actors stays within its bound and idle actors
//! stop.

mod common;

use common::post;
use kungfu_api::KeyedAction;
use kungfu_core::{Action, ActionResult, Limits, NewAssignment, Principal};
use kungfu_raft::{NodeConfig, RaftNode};
use kungfu_server::Config;
use kungfu_server::backend::Backend;
use kungfu_types::{AgentId, Content, IdempotencyKey, ThreadId};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Fixture {
    b: Arc<Backend>,
    _dir: tempfile::TempDir,
}

async fn fixture(max_live: usize, idle_ms: u64) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Arc::new(
        RaftNode::start(NodeConfig::new(1, "actors", dir.path(), "127.0.0.1:0".parse().expect("addr")))
            .await
            .expect("start"),
    );
    node.initialize([(1, node.node())].into_iter().collect()).await.expect("init");
    let start = Instant::now();
    while !node.is_leader() {
        assert!(start.elapsed() < Duration::from_secs(30), "no leader");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut config = Config::default();
    config.actors.max_live = max_live;
    config.actors.idle_ms = idle_ms;
    Fixture { b: Arc::new(Backend::new(node, Arc::new(config))), _dir: dir }
}

impl Fixture {
    fn key(&self) -> IdempotencyKey {
        common::key()
    }

    async fn ok(&self, p: Principal, action: Action) -> ActionResult {
        common::ok(&self.b, p, action).await.receipt.result
    }

    async fn agent(&self) -> AgentId {
        common::agent(&self.b).await
    }

    async fn thread_with(&self, gov: AgentId, member: AgentId) -> ThreadId {
        common::thread_with(&self.b, gov, member).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_many_concurrent_takes_through_the_actor_exactly_one_wins() {
    let f = Arc::new(fixture(100, 60_000).await);
    let (lead, worker) = (f.agent().await, f.agent().await);
    let thread = f.thread_with(lead, worker).await;
    let na = NewAssignment {
        addressee: worker,
        criteria: Content::from("c"),
        output_structure: None,
        delivery_window: None,
        judgment_window: None,
    };
    let ActionResult::Posted { assignment: Some(asg), .. } = f.ok(Principal::Agent(lead), post(thread, Some(na))).await
    else {
        panic!()
    };
    let mut tasks = Vec::new();
    for _ in 0..12 {
        let f = f.clone();
        tasks.push(tokio::spawn(async move {
            f.b.submit(
                Principal::Agent(worker),
                KeyedAction { key: f.key(), action: Action::TakeAssignment { assignment: asg } },
            )
            .await
        }));
    }
    let mut won = 0;
    let mut codes = BTreeSet::new();
    for t in tasks {
        match t.await.expect("join") {
            Ok(_) => won += 1,
            Err(s) => {
                codes.insert(s.code.as_str().to_string());
            }
        }
    }
    assert_eq!(won, 1, "L5: exactly one taking");
    assert_eq!(codes, BTreeSet::from(["INVALID_STATE".to_string()]));
    assert_eq!(f.b.actors.live(), 1, "one thread, one actor");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prechecked_rejection_and_a_replay_cost_no_log_write() {
    let f = fixture(100, 60_000).await;
    let (lead, worker) = (f.agent().await, f.agent().await);
    let thread = f.thread_with(lead, worker).await;
    // The applied index as the state store records it (committed with each apply, unlike metrics,
    // which trail it).
    let applied = |f: &Fixture| f.b.node.digest().expect("digest").1;
    let before = applied(&f);
    // A rejection decided by the actor's pre-check: nothing is proposed.
    let r =
        f.b.submit(Principal::Agent(worker), KeyedAction { key: f.key(), action: Action::CloseThread { thread } })
            .await;
    assert_eq!(Some(r.expect_err("a speaker cannot close").code.as_str()), Some("NOT_GOVERNOR"));
    // A replay of a stored receipt: answered from the receipt.
    let key = f.key();
    let first =
        f.b.submit(Principal::Agent(lead), KeyedAction { key: key.clone(), action: post(thread, None) })
            .await
            .expect("post");
    let after_post = applied(&f);
    let again =
        f.b.submit(Principal::Agent(lead), KeyedAction { key, action: post(thread, None) }).await.expect("replay");
    assert!(again.replayed);
    assert_eq!(again.receipt, first.receipt);
    assert_eq!(applied(&f), after_post, "the replay wrote nothing");
    assert_eq!(after_post.map(|i| i - 1), before, "only the post itself reached the log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_actors_stay_within_their_bound_and_idle_ones_stop() {
    let f = Arc::new(fixture(2, 150).await);
    let (lead, worker) = (f.agent().await, f.agent().await);
    let mut threads = Vec::new();
    for _ in 0..5 {
        threads.push(f.thread_with(lead, worker).await);
    }
    let mut tasks = Vec::new();
    for t in threads {
        let f = f.clone();
        tasks.push(tokio::spawn(async move { f.ok(Principal::Agent(lead), post(t, None)).await }));
    }
    for t in tasks {
        t.await.expect("every post succeeds, with or without an actor");
        assert!(f.b.actors.live() <= 2);
    }
    assert!(f.b.actors.live() <= 2, "the bound holds");
    let start = Instant::now();
    loop {
        f.b.actors.sweep();
        if f.b.actors.live() == 0 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "idle actors never stopped");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_object_keeps_several_actions_in_flight_and_each_is_decided_at_apply() {
    let f = Arc::new(fixture(100, 60_000).await);
    let (lead, worker) = (f.agent().await, f.agent().await);
    let thread = f.thread_with(lead, worker).await;
    let outsider = f.agent().await;
    let logged = |f: &Fixture| f.b.node.metrics().last_log_index.unwrap_or(0);
    let before = logged(&f);
    // With apply held, nothing proposed can be answered: an actor that proposed one action at a
    // time would leave a single one in the log.
    f.b.node.apply_gate.hold();
    const N: u64 = 10;
    let mut tasks = Vec::new();
    for _ in 0..N {
        let f = f.clone();
        tasks.push(tokio::spawn(async move {
            f.b.submit(Principal::Agent(lead), KeyedAction { key: f.key(), action: post(thread, None) }).await
        }));
    }
    let until_logged = |n: u64| {
        let f = f.clone();
        async move {
            let start = Instant::now();
            while logged(&f) < before + n {
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "only {} of {n} actions of one thread reached the log while none could apply",
                    logged(&f) - before
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    until_logged(N).await;
    // One more, from a non-member, while the posts are in flight: the actor cannot pre-check it
    // against a state that the posts ahead of it may change, so it is proposed and apply refuses it.
    let refused = {
        let f = f.clone();
        tokio::spawn(async move {
            f.b.submit(Principal::Agent(outsider), KeyedAction { key: f.key(), action: post(thread, None) }).await
        })
    };
    until_logged(N + 1).await;
    f.b.node.apply_gate.release();
    let mut entries = BTreeSet::new();
    for t in tasks {
        match t.await.expect("join").expect("every post is applied").receipt.result {
            ActionResult::Posted { entry, .. } => assert!(entries.insert(entry), "one entry each"),
            other => panic!("{other:?}"),
        }
    }
    let r = refused.await.expect("join").expect_err("a non-member cannot post");
    assert_eq!(Some(r.code.as_str()), Some("NOT_FOUND"), "{r}");
}

/// Issue #16, deliverable 5: a refusal the pre-check can decide never reaches the log, whether the
/// action goes through an object's actor or acts on no one object: an oversize Memory create, a
/// post by a non-member, a join with a secret that names no grant. The applied index stays put
/// (and moves by one for an accepted action, so the reading would see a log write).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_the_precheck_can_decide_cost_no_log_write() {
    let f = fixture(100, 60_000).await;
    let (lead, worker, outsider) = (f.agent().await, f.agent().await, f.agent().await);
    let thread = f.thread_with(lead, worker).await;
    let applied = |f: &Fixture| f.b.node.digest().expect("digest").1;
    let before = applied(&f);
    let refused = |r: Result<kungfu_server::backend::Written, kungfu_types::Rejection>| {
        r.expect_err("refused").code.as_str().to_string()
    };
    // Too large a Memory: no object, refused by the pre-check in `submit`.
    let oversize = Content::from("x".repeat(Limits::default().max_content_bytes + 1));
    let r =
        f.b.submit(
            Principal::Agent(lead),
            KeyedAction { key: f.key(), action: Action::CreateMemory { content: oversize } },
        )
        .await;
    assert_eq!(refused(r), "LIMIT_EXCEEDED");
    // A post by an agent who is not a member (the thread is not visible to it, §9): the thread's
    // actor pre-checks it.
    let r =
        f.b.submit(Principal::Agent(outsider), KeyedAction { key: f.key(), action: common::post(thread, None) }).await;
    assert_eq!(refused(r), "NOT_FOUND");
    // A join whose secret names no grant: no object either.
    let grant_hash = kungfu_core::secret::hash_secret("kf_gr_no_such_grant");
    let r =
        f.b.submit(Principal::Agent(outsider), KeyedAction { key: f.key(), action: Action::Join { grant_hash } }).await;
    assert!(!refused(r).is_empty());
    assert_eq!(applied(&f), before, "a refusal reached the log");
    // An accepted action on no object moves the index by one.
    f.ok(Principal::Agent(lead), Action::CreateMemory { content: Content::from("fits") }).await;
    assert_eq!(applied(&f).map(|i| i - 1), before, "an accepted create reached the log once");
}
