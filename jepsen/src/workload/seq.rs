//! `seq` (§6.3, L1, L5; Elle's list-append for single-object appends): a few shared threads; every
//! process appends entries (posts whose content is a unique id) and reads a recent window of a
//! thread's timeline through its own node with linearizable reads. The final reads list, on every
//! node, each whole thread. Sequences must be gap-free, the same on every node and in every read,
//! and respect real time (`crate::checker::seq`).

use super::common::record_final_read;
use super::{Env, Proc, Workload, node_reader, register, thread_entries};
use crate::checker::Workload as Kind;
use crate::client;
use crate::history::{FINAL_READ, OpType, READ};
use crate::recorder::Completion;
use anyhow::{Context, Result};
use futures::FutureExt;
use futures::future::BoxFuture;
use kungfu_client::{Client, Error, Post, pb};
use rand::Rng;
use serde_json::{Value, json};
use std::sync::Mutex;

/// `f` of a post.
const APPEND: &str = crate::checker::seq::APPEND;
/// How many threads the processes share.
const THREADS: usize = 3;
/// Percentage of ops that are reads.
const READ_PERCENT: u32 = 20;
/// Entries per timeline page of a read.
const PAGE: u32 = 20;
/// A read that needs more pages than this (the thread ran far ahead of the window) gives up.
const MAX_PAGES: usize = 4;
/// How far behind the highest seq known to the harness a read starts, at most.
const WINDOW: u64 = 5;

/// The threads, their lead (final reads) and the posting agents.
#[derive(Debug, Default)]
pub struct Seq {
    threads: Vec<String>,
    /// Agents `(id, key)`, one per process slot.
    agents: Vec<(String, String)>,
    lead_key: String,
    /// The highest seq the harness has seen acknowledged or read, per thread: where reads start.
    known: Mutex<Vec<u64>>,
}

impl Seq {
    fn bump(&self, t: usize, seq: u64) {
        let mut k = self.known.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = k.get_mut(t) {
            *s = (*s).max(seq);
        }
    }

    fn known(&self, t: usize) -> u64 {
        self.known.lock().unwrap_or_else(|e| e.into_inner()).get(t).copied().unwrap_or(0)
    }
}

/// One read: the timeline after `after` through `c` (one page of at most [`PAGE`] entries unless
/// the thread ran ahead), then each entry's content (the id its append posted). `Ok(None)` when
/// the pages did not reach the end.
async fn read_window(c: &Client, thread: &str, after: u64) -> Result<Option<Vec<Value>>, Error> {
    let mut list: Vec<pb::Entry> = Vec::new();
    let mut from = after;
    let mut complete = false;
    for _ in 0..MAX_PAGES {
        let page = c.timeline(pb::TimelineRequest { thread: thread.to_string(), after: from, page_size: PAGE }).await?;
        let last = page.entries.last().map(|e| e.seq);
        list.extend(page.entries);
        match (page.next_after, last) {
            (Some(n), Some(_)) if n > from => from = n,
            _ => {
                complete = true;
                break;
            }
        }
    }
    if !complete {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(list.len());
    for e in list {
        let view = c.get_entry(pb::GetEntryRequest { thread: thread.to_string(), entry: e.seq }).await?;
        let id = view.content.map(|c| String::from_utf8_lossy(&c.body).into_owned()).unwrap_or_default();
        out.push(json!({ "seq": e.seq, "id": id, "author": e.author }));
    }
    Ok(Some(out))
}

impl Workload for Seq {
    fn kind(&self) -> Kind {
        Kind::Seq
    }

    fn setup<'a>(&'a mut self, env: &'a Env, processes: usize) -> BoxFuture<'a, Result<()>> {
        async move {
            let (_, lead) = register(env).await?;
            let mut secrets = Vec::new();
            for i in 0..THREADS {
                let (thread, secret) = super::open_thread(env, &lead, &format!("seq {i}")).await?;
                secrets.push(secret);
                self.threads.push(thread);
            }
            for _ in 0..processes.max(1) {
                let (id, key) = register(env).await?;
                let c = env.setup.with_key(key.clone());
                for secret in &secrets {
                    c.join(pb::JoinRequest { grant_secret: secret.clone(), ..Default::default() }, None)
                        .await
                        .context("joining a seq thread")?;
                }
                self.agents.push((id, key));
            }
            self.lead_key = lead;
            self.known = Mutex::new(vec![0; THREADS]);
            Ok(())
        }
        .boxed()
    }

    fn step<'a>(&'a self, env: &'a Env, p: &'a mut Proc) -> BoxFuture<'a, ()> {
        async move {
            let (author, key) = &self.agents[(p.id as usize) % self.agents.len()];
            if p.client.is_none() {
                match client::connect(p.endpoint(env), Some(key.clone())).await {
                    Ok(c) => p.client = Some(c),
                    Err(_) => return,
                }
            }
            let Some(c) = p.client.clone() else { return };
            let t = p.rng.random_range(0..self.threads.len());
            let thread = &self.threads[t];

            if p.rng.random_range(0..100) < READ_PERCENT {
                let after = self.known(t).saturating_sub(p.rng.random_range(1..=WINDOW));
                env.rec.invoke(p.id, READ, json!({ "thread": thread, "after": after }), p.node, None);
                match read_window(&c, thread, after).await {
                    Ok(Some(entries)) => {
                        if let Some(s) = entries.last().and_then(|e| e["seq"].as_u64()) {
                            self.bump(t, s);
                        }
                        p.finish_read(
                            env,
                            READ,
                            Ok::<_, Error>(()),
                            |_| json!({ "thread": thread, "entries": entries }),
                        );
                    }
                    // The thread ran ahead of the pages: no observation (a read has no effect).
                    Ok(None) => {
                        env.rec.complete(
                            p.id,
                            OpType::Fail,
                            READ,
                            p.node,
                            None,
                            Completion {
                                error: Some("TRUNCATED".into()),
                                message: Some(format!("more than {MAX_PAGES} pages after seq {after}")),
                                ..Completion::default()
                            },
                        );
                        p.done += 1;
                    }
                    Err(e) => {
                        p.finish_read(env, READ, Err::<(), _>(e), |_| Value::Null);
                    }
                }
                return;
            }

            // Unique per run: the process id changes after an `info`, `done` counts its ops.
            let id = format!("s{}-{}", p.id, p.done);
            let request = json!({ "thread": thread, "id": id, "author": author });
            env.rec.invoke(p.id, APPEND, request, p.node, Some(&id));
            let r = c.post(Post::text(thread, &id).ask(Vec::<String>::new()), Some(id.clone())).await;
            p.finish_write(env, APPEND, Some(&id), r, |w| {
                let seq = match w.value.receipt.as_ref().and_then(|r| r.result.as_ref()) {
                    Some(pb::receipt::Result::Posted(posted)) => Some(posted.entry),
                    _ => None,
                };
                if let Some(s) = seq {
                    // Before the completion is recorded: a read invoked after it starts at most
                    // WINDOW below this seq.
                    self.bump(t, s);
                }
                Completion {
                    value: json!({ "thread": thread, "id": id, "author": author, "seq": seq }),
                    ..Completion::default()
                }
            });
        }
        .boxed()
    }

    fn final_reads<'a>(&'a self, env: &'a Env, next_process: u64) -> BoxFuture<'a, Result<()>> {
        async move {
            for (i, (node, endpoint)) in env.endpoints.iter().enumerate() {
                let process = next_process + i as u64;
                let reader = node_reader(endpoint, Some(self.lead_key.clone())).await;
                for thread in &self.threads {
                    env.rec.invoke(process, FINAL_READ, json!({ "thread": thread, "after": 0 }), *node, None);
                    let read = match &reader {
                        Ok(r) => thread_entries(r, thread).await,
                        Err(e) => Err(anyhow::anyhow!("{e}")),
                    };
                    let read = read.map(|entries| {
                        let entries: Vec<Value> = entries
                            .into_iter()
                            .map(|(seq, id, author)| json!({ "seq": seq, "id": id, "author": author }))
                            .collect();
                        json!({ "thread": thread, "entries": entries })
                    });
                    record_final_read(env, process, *node, read);
                }
            }
            Ok(())
        }
        .boxed()
    }
}
