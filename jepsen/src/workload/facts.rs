//! `facts` (Jepsen's set-full; L1): every process posts unique facts into one shared thread; the
//! final reads list, on every node, the facts its own state holds. Every acknowledged fact must be
//! on every node after recovery, nothing may appear that nobody posted, and the nodes must agree
//! (`crate::checker::facts`).

use super::{Env, Proc, Workload, node_reader, register, thread_entries};
use crate::checker::Workload as Kind;
use crate::client;
use crate::history::OpType;
use crate::recorder::Completion;
use anyhow::{Context, Result};
use futures::FutureExt;
use futures::future::BoxFuture;
use kungfu_client::{Post, pb};
use serde_json::json;

/// The shared thread and the agents that post into it.
#[derive(Debug, Default)]
pub struct Facts {
    thread: String,
    /// Agent keys, one per process (by process index modulo their number).
    agents: Vec<String>,
    lead_key: String,
}

impl Workload for Facts {
    fn kind(&self) -> Kind {
        Kind::Facts
    }

    fn setup<'a>(&'a mut self, env: &'a Env, processes: usize) -> BoxFuture<'a, Result<()>> {
        async move {
            let (_, lead) = register(env).await?;
            let (thread_id, secret) = super::open_thread(env, &lead, "facts").await?;
            self.thread = thread_id;
            for _ in 0..processes.max(1) {
                let (_, key) = register(env).await?;
                env.setup
                    .with_key(key.clone())
                    .join(pb::JoinRequest { grant_secret: secret.clone(), ..Default::default() }, None)
                    .await
                    .context("joining the facts thread")?;
                self.agents.push(key);
            }
            self.lead_key = lead;
            Ok(())
        }
        .boxed()
    }

    fn step<'a>(&'a self, env: &'a Env, p: &'a mut Proc) -> BoxFuture<'a, ()> {
        async move {
            if p.client.is_none() {
                let key = self.agents[(p.id as usize) % self.agents.len()].clone();
                match client::connect(p.endpoint(env), Some(key)).await {
                    Ok(c) => p.client = Some(c),
                    Err(_) => return,
                }
            }
            let Some(c) = p.client.clone() else { return };
            // Unique per run: the process id changes after an `info`, `done` counts its ops.
            let id = format!("f{}-{}", p.id, p.done);
            env.rec.invoke(p.id, "add", json!({ "id": id }), p.node, Some(&id));
            let r = c.post(Post::text(&self.thread, &id).ask(Vec::<String>::new()), Some(id.clone())).await;
            p.finish_write(env, "add", Some(&id), r, |_| Completion {
                value: json!({ "id": id }),
                ..Completion::default()
            });
        }
        .boxed()
    }

    fn final_reads<'a>(&'a self, env: &'a Env, next_process: u64) -> BoxFuture<'a, Result<()>> {
        async move {
            for (i, (node, endpoint)) in env.endpoints.iter().enumerate() {
                let process = next_process + i as u64;
                env.rec.invoke(process, crate::history::FINAL_READ, json!({}), *node, None);
                let reader = node_reader(endpoint, Some(self.lead_key.clone())).await?;
                match thread_entries(&reader, &self.thread).await {
                    Ok(entries) => {
                        let ids: Vec<String> = entries.into_iter().map(|(_, body, _)| body).collect();
                        env.rec.complete(
                            process,
                            OpType::Ok,
                            crate::history::FINAL_READ,
                            *node,
                            None,
                            Completion { value: json!({ "ids": ids }), ..Completion::default() },
                        );
                    }
                    Err(e) => {
                        env.rec.complete(
                            process,
                            OpType::Fail,
                            crate::history::FINAL_READ,
                            *node,
                            None,
                            Completion {
                                error: Some("UNAVAILABLE".into()),
                                message: Some(e.to_string()),
                                ..Completion::default()
                            },
                        );
                    }
                }
            }
            Ok(())
        }
        .boxed()
    }
}
