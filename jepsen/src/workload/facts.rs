//! `facts` (Jepsen's set-full; L1): every process posts unique facts into one shared thread; the
//! final reads list, on every node, the facts its own state holds. Every acknowledged fact must be
//! on every node after recovery, nothing may appear that nobody posted, the nodes must agree, and
//! the entry number each acknowledged fact's receipt names must hold that fact in the final reads
//! (no number reused for another write; `crate::checker::facts`).
//!
//! `big-entries` is the same with every entry padded to near the content limit (250 KiB of the
//! 256 KiB), so a node cut off by a fault falls behind by tens of megabytes and must catch up
//! after heal: the always-on convergence check of every run (one applied index, one digest on
//! every node within its bound) then fails a run whose follower never does (issue #11), and the
//! facts checker fails one whose lagging node lost or invented an entry.

use super::common::record_final_read;
use super::{Env, Proc, Workload, node_reader, register, thread_entries};
use crate::checker::Workload as Kind;
use crate::client;
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
    /// Entries are padded to this many bytes (0: the id alone).
    body_bytes: usize,
}

/// The padded size of a `big-entries` entry: near the default content limit (256 KiB).
pub const BIG_ENTRY_BYTES: usize = 250 * 1024;

/// Separates a fact's id from its padding.
const PAD: char = '|';

impl Facts {
    /// The `big-entries` workload.
    pub fn big_entries() -> Facts {
        Facts { body_bytes: BIG_ENTRY_BYTES, ..Facts::default() }
    }

    /// The body of fact `id`: the id, then padding up to `body_bytes`.
    fn body(&self, id: &str) -> String {
        if self.body_bytes <= id.len() {
            return id.to_string();
        }
        let mut body = String::with_capacity(self.body_bytes);
        body.push_str(id);
        body.push(PAD);
        while body.len() < self.body_bytes {
            body.push('.');
        }
        body
    }
}

/// The id of a fact from its body (padding dropped).
fn fact_id(body: &str) -> String {
    body.split(PAD).next().unwrap_or_default().to_string()
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
            let body = self.body(&id);
            let r = c.post(Post::text(&self.thread, &body).ask(Vec::<String>::new()), Some(id.clone())).await;
            p.finish_write(env, "add", Some(&id), r, |w| {
                // The receipt's entry number: the checker finds it reused for another fact.
                let seq = match w.value.receipt.as_ref().and_then(|r| r.result.as_ref()) {
                    Some(pb::receipt::Result::Posted(posted)) => Some(posted.entry),
                    _ => None,
                };
                Completion { value: json!({ "id": id, "seq": seq }), ..Completion::default() }
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
                let read = thread_entries(&reader, &self.thread).await.map(|entries| {
                    let seqs: Vec<u64> = entries.iter().map(|(seq, _, _)| *seq).collect();
                    let ids: Vec<String> = entries.into_iter().map(|(_, body, _)| fact_id(&body)).collect();
                    json!({ "ids": ids, "seqs": seqs })
                });
                record_final_read(env, process, *node, read);
            }
            Ok(())
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn big_entries_are_padded_near_the_content_limit_and_read_back_as_their_id() {
        let big = Facts::big_entries();
        let body = big.body("f3-17");
        assert_eq!(body.len(), BIG_ENTRY_BYTES);
        assert!(body.len() < 256 * 1024, "under the default content limit");
        assert_eq!(fact_id(&body), "f3-17");
        let plain = Facts::default();
        assert_eq!(plain.body("f1-2"), "f1-2");
        assert_eq!(fact_id("f1-2"), "f1-2");
    }
}
