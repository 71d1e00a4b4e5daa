//! What the server's in-process tests share: fresh keys and secrets, a write that must succeed,
//! registering an agent, a thread with one speaking member, a plain post, and a bounded wait.
//! Each test file declares `mod common;` and uses what it needs.
#![allow(dead_code)]

use kungfu_api::KeyedAction;
use kungfu_core::{Action, ActionResult, NewAssignment, NewGrant, PostBody, Principal};
use kungfu_server::backend::{Backend, Written};
use kungfu_types::{AgentId, Content, IdempotencyKey, Role, ThreadId};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh idempotency key.
pub fn key() -> IdempotencyKey {
    IdempotencyKey::new(format!("k{}", COUNTER.fetch_add(1, Ordering::Relaxed))).expect("key")
}

/// A fresh secret (agent key or grant) with this prefix.
pub fn secret(prefix: &str) -> String {
    format!("{prefix}_{}", COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// Submits `action` through `b` and panics on any refusal.
pub async fn ok(b: &Arc<Backend>, p: Principal, action: Action) -> Written {
    match b.submit(p, KeyedAction { key: key(), action }).await {
        Ok(w) => w,
        Err(r) => panic!("node {} refused: {r:?}", b.node.id),
    }
}

/// Registers a new agent.
pub async fn agent(b: &Arc<Backend>) -> AgentId {
    let s = secret("kf_test");
    let action = Action::RegisterAgent {
        key_hash: kungfu_core::secret::hash_secret(&s),
        key_fingerprint: kungfu_core::secret::fingerprint(&s),
    };
    match ok(b, Principal::Registrar, action).await.receipt.result {
        ActionResult::AgentRegistered { agent, .. } => agent,
        other => panic!("{other:?}"),
    }
}

/// A thread governed by `gov` that `member` joined as a speaker.
pub async fn thread_with(b: &Arc<Backend>, gov: AgentId, member: AgentId) -> ThreadId {
    let created = ok(b, Principal::Agent(gov), Action::CreateThread { subject: Content::from("s"), grant: None }).await;
    let ActionResult::ThreadCreated { thread, .. } = created.receipt.result else { panic!("no thread") };
    let s = secret("kf_gr");
    let grant = NewGrant {
        role: Role::Speaker,
        hash: kungfu_core::secret::hash_secret(&s),
        fingerprint: kungfu_core::secret::fingerprint(&s),
    };
    ok(b, Principal::Agent(gov), Action::IssueGrant { thread, grant }).await;
    ok(b, Principal::Agent(member), Action::Join { grant_hash: kungfu_core::secret::hash_secret(&s) }).await;
    thread
}

/// A post of a short text that asks nobody, optionally carrying an assignment.
pub fn post(thread: ThreadId, assignment: Option<NewAssignment>) -> Action {
    Action::Post {
        thread,
        body: PostBody::Content(Content::from("x")),
        reply_to: None,
        ask: Some(BTreeSet::new()),
        task_ref: None,
        assignment,
    }
}

/// Polls `done` every 10 ms and fails the test if it is not true within `bound`.
pub async fn until(what: &str, bound: Duration, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < bound, "not within {bound:?}: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
