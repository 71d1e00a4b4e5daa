//! `turn` (§8, L1, L5): agents in shared threads create and discharge obligations — posts that ask
//! others to respond, replies and handles, assignments taken, delivered and judged, deadlines of
//! one to three seconds — and read their turns. The final read exports every recorded fact from a
//! node; the checker (`crate::checker::turn`) recomputes each turn read from the facts at its
//! `as_of_seq` with `kungfu-core` and follows every obligation's life.

use super::common::record_final_read;
use super::{Env, Proc, Workload, register};
use crate::checker::Workload as Kind;
use crate::client;
use crate::history::FINAL_READ;
use crate::recorder::Completion;
use anyhow::{Context, Result};
use futures::FutureExt;
use futures::future::BoxFuture;
use kungfu_client::{Client, Post, pb};
use rand::Rng;
use rand::seq::IndexedRandom;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Threads and their members.
#[derive(Debug, Default)]
pub struct Turn {
    threads: Vec<String>,
    /// (agent id, key), one per process slot.
    agents: Vec<(String, String)>,
    /// Each agent's last turn read (what it chooses its next action from).
    last_turn: Mutex<BTreeMap<String, Vec<pb::TurnItem>>>,
}

const THREADS: usize = 2;

impl Turn {
    fn agent_of(&self, p: &Proc) -> usize {
        (p.id % p.stride) as usize % self.agents.len()
    }
}

impl Workload for Turn {
    fn kind(&self) -> Kind {
        Kind::Turn
    }

    fn setup<'a>(&'a mut self, env: &'a Env, processes: usize) -> BoxFuture<'a, Result<()>> {
        async move {
            let (_, lead) = register(env).await?;
            for _ in 0..processes.max(2) {
                self.agents.push(register(env).await?);
            }
            for _ in 0..THREADS {
                let (thread_id, secret) = super::open_thread(env, &lead, "turn").await?;
                let thread = thread_id;
                for (_, key) in &self.agents {
                    env.setup
                        .with_key(key.clone())
                        .join(pb::JoinRequest { grant_secret: secret.clone(), ..Default::default() }, None)
                        .await
                        .context("joining a turn thread")?;
                }
                self.threads.push(thread);
            }
            Ok(())
        }
        .boxed()
    }

    fn step<'a>(&'a self, env: &'a Env, p: &'a mut Proc) -> BoxFuture<'a, ()> {
        async move {
            let slot = self.agent_of(p);
            let (me, key) = self.agents[slot].clone();
            if p.client.is_none() {
                match client::connect(p.endpoint(env), Some(key)).await {
                    Ok(c) => p.client = Some(c),
                    Err(_) => return,
                }
            }
            let Some(c) = p.client.clone() else { return };
            if p.rng.random_bool(0.3) {
                return read_turn(env, p, &c, &me, &self.last_turn).await;
            }
            let owed = self.last_turn.lock().map(|m| m.get(&me).cloned().unwrap_or_default()).unwrap_or_default();
            let others: Vec<String> = self.agents.iter().map(|(a, _)| a.clone()).filter(|a| *a != me).collect();
            let thread = self.threads.choose(&mut p.rng).cloned().unwrap_or_default();
            // Discharge something owed half of the time, else create new obligations.
            if let (true, Some(item)) = (p.rng.random_bool(0.5), owed.choose(&mut p.rng).cloned()) {
                discharge(env, p, &c, &others, item).await;
            } else {
                match p.rng.random_range(0..3) {
                    0 => {
                        let n = p.rng.random_range(1..=2).min(others.len());
                        let ask: Vec<String> = others.choose_multiple(&mut p.rng, n).cloned().collect();
                        let post = Post::text(&thread, "please respond").ask(ask.clone());
                        write(env, p, "post", json!({"thread": thread, "ask": ask}), c.post(post, None).await);
                    }
                    1 => {
                        let Some(to) = others.choose(&mut p.rng).cloned() else { return };
                        let mut a = kungfu_client::new_assignment(&to, "criteria");
                        a.delivery_window_micros = Some(p.rng.random_range(1..=3) * 1_000_000);
                        a.judgment_window_micros = Some(p.rng.random_range(1..=3) * 1_000_000);
                        let post = Post::text(&thread, "work").ask(Vec::<String>::new()).assignment(a);
                        write(env, p, "assign", json!({"thread": thread, "to": to}), c.post(post, None).await);
                    }
                    _ => {
                        // Take an assignment addressed to me, found through my opportunities (§8).
                        let Ok(opps) = c
                            .get_opportunities(pb::GetOpportunitiesRequest { cursor: String::new(), page_size: 20 })
                            .await
                        else {
                            return;
                        };
                        let Some(asg) = opps.items.iter().find_map(|o| match &o.kind {
                            Some(pb::opportunity::Kind::Assignment(a)) => Some(a.clone()),
                            _ => None,
                        }) else {
                            return;
                        };
                        let r = c
                            .take_assignment(
                                pb::TakeAssignmentRequest { assignment: asg.clone(), ..Default::default() },
                                None,
                            )
                            .await;
                        write(env, p, "take", json!({"assignment": asg}), r);
                    }
                }
            }
        }
        .boxed()
    }

    fn final_reads<'a>(&'a self, env: &'a Env, next_process: u64) -> BoxFuture<'a, Result<()>> {
        async move {
            let Some((node, endpoint)) = env.endpoints.iter().next() else { return Ok(()) };
            let op = client::connect(endpoint, Some(crate::cluster::OPERATOR_TOKEN.into())).await?;
            env.rec.invoke(next_process, FINAL_READ, json!({}), *node, None);
            let mut facts = Vec::new();
            let mut after = 0;
            let result: Result<()> = async {
                loop {
                    let page = op.export_facts(pb::ExportFactsRequest { after_seq: after, limit: 5000 }).await?;
                    facts.extend(page.facts.iter().map(hex::encode));
                    match page.next_after_seq {
                        Some(n) => after = n,
                        None => return Ok(()),
                    }
                }
            }
            .await;
            record_final_read(env, next_process, *node, result.map(|()| json!({ "facts": facts })));
            Ok(())
        }
        .boxed()
    }
}

/// Records a write's outcome (the checker only needs the turn reads; the writes show what ran).
fn write<T>(env: &Env, p: &mut Proc, f: &str, value: serde_json::Value, r: Result<T, kungfu_client::Error>) {
    env.rec.invoke(p.id, f, value.clone(), p.node, None);
    p.finish_write(env, f, None, r, |_| Completion { value, ..Completion::default() });
}

/// Reads the whole turn in one page (one snapshot); a turn longer than a page is not recorded as
/// an observation.
async fn read_turn(env: &Env, p: &mut Proc, c: &Client, me: &str, last: &Mutex<BTreeMap<String, Vec<pb::TurnItem>>>) {
    env.rec.invoke(p.id, "turn", json!({ "agent": me }), p.node, None);
    let r = c.get_turn(pb::GetTurnRequest { cursor: String::new(), page_size: 100 }).await;
    let r = match r {
        Ok(page) if !page.next_cursor.is_empty() => {
            Err(kungfu_client::Error::Transport("TRUNCATED: more than one page".into()))
        }
        other => other,
    };
    p.finish_read(env, "turn", r, |page| {
        if let Ok(mut m) = last.lock() {
            m.insert(me.to_string(), page.items.clone());
        }
        json!({
            "agent": me,
            "as_of_seq": page.as_of_seq,
            "items": page.items.iter().map(|i| serde_json::to_value(i).unwrap_or_default()).collect::<Vec<_>>(),
        })
    });
}

/// Acts on one obligation of the last turn read.
async fn discharge(env: &Env, p: &mut Proc, c: &Client, others: &[String], item: pb::TurnItem) {
    use pb::obligation_ref::Kind as O;
    match item.obligation.and_then(|o| o.kind) {
        Some(O::Response(r)) => {
            if p.rng.random_bool(0.6) {
                let ask: Vec<String> = others.choose(&mut p.rng).cloned().into_iter().collect();
                let post = Post::text(&r.thread, "reply").reply_to(r.entry).ask(ask);
                write(env, p, "reply", json!({"thread": r.thread, "entry": r.entry}), c.post(post, None).await);
            } else {
                let h = pb::HandleRequest {
                    thread: r.thread.clone(),
                    entry: r.entry,
                    note: kungfu_client::text("handled"),
                    ..Default::default()
                };
                write(env, p, "handle", json!({"thread": r.thread, "entry": r.entry}), c.handle(h, None).await);
            }
        }
        Some(O::AssignmentDelivery(a)) => {
            let d = pb::DeliverAssignmentRequest {
                assignment: a.clone(),
                output: kungfu_client::text("output"),
                ..Default::default()
            };
            write(env, p, "deliver", json!({"assignment": a}), c.deliver_assignment(d, None).await);
        }
        Some(O::AssignmentJudgment(a)) => {
            if p.rng.random_bool(0.5) {
                let r = c
                    .adopt_assignment(pb::AdoptAssignmentRequest { assignment: a.clone(), ..Default::default() }, None)
                    .await;
                write(env, p, "adopt", json!({"assignment": a}), r);
            } else {
                let req = pb::RejectAssignmentRequest {
                    assignment: a.clone(),
                    reason: kungfu_client::text("not this time"),
                    ..Default::default()
                };
                write(env, p, "reject", json!({"assignment": a}), c.reject_assignment(req, None).await);
            }
        }
        _ => {}
    }
}
