//! `replay` (L3; §10.2 item 3): keyed posts with client-chosen idempotency keys, unique per run.
//! Every process posts under a fresh key `K` (content `K`), resends the same request under an
//! earlier key of its agent (possibly first sent through another node: the agents are shared by
//! processes bound to different nodes), and now and then sends a different request (content
//! `K#other`) under an earlier acknowledged key, which must be refused with
//! `IDEMPOTENCY_KEY_REUSED` and have no effect. The final reads list, on every node, every entry of
//! the thread as an effect tagged with the key its content names (`crate::checker::replay`).

use super::common::record_final_read;
use super::{Env, Proc, Workload, node_reader, register, thread_entries};
use crate::checker::Workload as Kind;
use crate::client;
use crate::history::{FINAL_READ, OpType};
use crate::recorder::Completion;
use anyhow::{Context, Result};
use futures::FutureExt;
use futures::future::BoxFuture;
use kungfu_client::{Post, pb};
use rand::Rng;
use serde_json::{Value, json};
use std::sync::Mutex;

/// `f` of every keyed op.
const POST: &str = "post";
/// Suffix of the content of a different request under a used key.
const OTHER: &str = "#other";

/// A key an agent has used, and whether some request under it was acknowledged.
#[derive(Debug, Clone)]
struct Sent {
    key: String,
    acked: bool,
}

/// One agent: its id, its key, and the keys its processes have used (completed attempts only).
#[derive(Debug)]
struct Agent {
    id: String,
    key: String,
    sent: Mutex<Vec<Sent>>,
}

/// The shared thread, its lead (reads) and the posting agents.
#[derive(Debug, Default)]
pub struct Replay {
    thread: String,
    lead_key: String,
    agents: Vec<Agent>,
}

/// What one step sends.
enum Choice {
    Fresh,
    Resend,
    Other,
}

impl Replay {
    /// The request a post under `body` is, as the history records it (compared structurally).
    fn request(&self, agent: &str, body: &str) -> Value {
        json!({ "agent": agent, "thread": self.thread, "body": body })
    }
}

impl Workload for Replay {
    fn kind(&self) -> Kind {
        Kind::Replay
    }

    fn setup<'a>(&'a mut self, env: &'a Env, processes: usize) -> BoxFuture<'a, Result<()>> {
        async move {
            let (_, lead) = register(env).await?;
            let (thread_id, secret) = super::open_thread(env, &lead, "replay").await?;
            self.thread = thread_id;
            // Processes are bound to nodes round-robin; process slot `s` acts as agent
            // `s % agents`, so with more processes than nodes each agent is used through several
            // nodes and its resends may reach another node than the first attempt.
            let nodes = env.endpoints.len().max(1);
            let n = (processes / nodes).max(1);
            for _ in 0..n {
                let (id, key) = register(env).await?;
                env.setup
                    .with_key(key.clone())
                    .join(pb::JoinRequest { grant_secret: secret.clone(), ..Default::default() }, None)
                    .await
                    .context("joining the replay thread")?;
                self.agents.push(Agent { id, key, sent: Mutex::new(Vec::new()) });
            }
            self.lead_key = lead;
            Ok(())
        }
        .boxed()
    }

    fn step<'a>(&'a self, env: &'a Env, p: &'a mut Proc) -> BoxFuture<'a, ()> {
        async move {
            let slot = (p.id % p.stride.max(1)) as usize;
            let agent = &self.agents[slot % self.agents.len()];
            if p.client.is_none() {
                match client::connect(p.endpoint(env), Some(agent.key.clone())).await {
                    Ok(c) => p.client = Some(c),
                    Err(_) => return,
                }
            }
            let Some(c) = p.client.clone() else { return };

            // Choose: a fresh key, the same request again under a used key, or a different request
            // under an acknowledged key.
            let roll = p.rng.random_range(0..100u32);
            let (what, key) = {
                let sent = agent.sent.lock().unwrap_or_else(|e| e.into_inner());
                let acked: Vec<&Sent> = sent.iter().filter(|s| s.acked).collect();
                let open: Vec<&Sent> = sent.iter().filter(|s| !s.acked).collect();
                if roll < 45 || sent.is_empty() {
                    (Choice::Fresh, format!("r{}-{}", p.id, p.done))
                } else if roll < 85 || acked.is_empty() {
                    // Prefer keys whose outcome is still unknown or failed half of the time.
                    let pick = if !open.is_empty() && p.rng.random_bool(0.5) {
                        open[p.rng.random_range(0..open.len())]
                    } else {
                        &sent[p.rng.random_range(0..sent.len())]
                    };
                    (Choice::Resend, pick.key.clone())
                } else {
                    (Choice::Other, acked[p.rng.random_range(0..acked.len())].key.clone())
                }
            };
            let body = match what {
                Choice::Other => format!("{key}{OTHER}"),
                _ => key.clone(),
            };

            env.rec.invoke(p.id, POST, self.request(&agent.id, &body), p.node, Some(&key));
            let r = c.post(Post::text(&self.thread, &body).ask(Vec::<String>::new()), Some(key.clone())).await;
            let kind = p.finish_write(env, POST, Some(&key), r, |w| {
                let entry = match w.value.receipt.as_ref().and_then(|r| r.result.as_ref()) {
                    Some(pb::receipt::Result::Posted(posted)) => Some(posted.entry),
                    _ => None,
                };
                Completion {
                    value: json!({ "entry": entry, "replayed": w.replayed }),
                    receipt: Some(
                        w.value.receipt.as_ref().and_then(|r| serde_json::to_value(r).ok()).unwrap_or(Value::Null),
                    ),
                    ..Completion::default()
                }
            });

            let mut sent = agent.sent.lock().unwrap_or_else(|e| e.into_inner());
            match what {
                Choice::Fresh => sent.push(Sent { key, acked: kind == OpType::Ok }),
                Choice::Resend if kind == OpType::Ok => {
                    if let Some(s) = sent.iter_mut().find(|s| s.key == key) {
                        s.acked = true;
                    }
                }
                _ => {}
            }
        }
        .boxed()
    }

    fn final_reads<'a>(&'a self, env: &'a Env, next_process: u64) -> BoxFuture<'a, Result<()>> {
        async move {
            for (i, (node, endpoint)) in env.endpoints.iter().enumerate() {
                let process = next_process + i as u64;
                env.rec.invoke(process, FINAL_READ, json!({}), *node, None);
                let read = async {
                    let reader = node_reader(endpoint, Some(self.lead_key.clone())).await?;
                    thread_entries(&reader, &self.thread).await
                };
                let read = read.await.map(|entries| {
                    let effects: Vec<Value> = entries
                        .into_iter()
                        .map(|(_, body, author)| {
                            let key = body.strip_suffix(OTHER).unwrap_or(&body).to_owned();
                            json!({ "key": key, "request": self.request(&author, &body) })
                        })
                        .collect();
                    json!({ "effects": effects })
                });
                record_final_read(env, process, *node, read);
            }
            Ok(())
        }
        .boxed()
    }
}
