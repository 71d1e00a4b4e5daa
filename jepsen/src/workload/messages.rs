//! `messages` (COORDINATION §3.3, §3.5): processes `Send` unique messages (fleet-labeled content
//! naming the op) into one shared thread, to nobody or asking one or two named members, under
//! client-chosen idempotency keys; some ops resend an earlier request of the same agent under its
//! key (a replay, possibly through another node: agents are shared by processes bound to different
//! nodes). The rest are mailbox reads: a process pages through `GetMailbox` (all entries, or only
//! those asking its agent) from a cursor it keeps — its last `next_after` (or last seq seen), now
//! and then 0 — recording per page its cursor, the seqs and message ids it returned and
//! `next_after`. The final reads page through every node's whole mailbox from its own state.
//! `crate::checker::messages` judges them.

use super::common::{fleet, record_final_read};
use super::{Env, Proc, Workload, item_body, node_reader, register};
use crate::checker::Workload as Kind;
use crate::checker::messages::{ASKED_ME, MAILBOX, SEND};
use crate::client;
use crate::history::FINAL_READ;
use crate::recorder::Completion;
use anyhow::Result;
use futures::FutureExt;
use futures::future::BoxFuture;
use kungfu_client::{Client, Error, pb};
use rand::Rng;
use rand::seq::IndexedRandom;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Percentage of ops that are mailbox reads.
const READ_PERCENT: u32 = 25;
/// Percentage of ops that replay an earlier send of the process's agent.
const REPLAY_PERCENT: u32 = 12;
/// Percentage of mailbox reads that only keep the entries asking the reader.
const ASKED_ME_PERCENT: u32 = 30;
/// Percentage of mailbox reads that start over from 0 instead of the kept cursor.
const RESTART_PERCENT: u32 = 15;
/// Page sizes a mailbox read picks from (small ones cross page boundaries often).
const PAGE_SIZES: &[u32] = &[1, 2, 3, 5, 10, 50];
/// Pages one mailbox read takes at most.
const MAX_PAGES: usize = 4;
/// Entries per page of a final read (the server caps pages at 100).
const FINAL_PAGE: u32 = 100;

/// An earlier send, to replay exactly.
#[derive(Debug, Clone)]
struct Sent {
    id: String,
    key: String,
    agent: usize,
    to: Vec<String>,
    /// "Nobody" stated explicitly (`SendTo.nobody`) rather than by leaving `to` out.
    explicit_nobody: bool,
}

/// The shared thread, its lead (final reads), the sending agents and every process's cursor.
#[derive(Debug, Default)]
pub struct Messages {
    thread: String,
    lead: (String, String),
    /// `(id, key)` of each sending agent.
    agents: Vec<(String, String)>,
    sent: Mutex<Vec<Sent>>,
    /// The mailbox cursor of each process slot.
    cursors: Mutex<BTreeMap<u64, u64>>,
}

impl Messages {
    fn request(&self, s: &Sent) -> pb::SendRequest {
        let to = if !s.to.is_empty() {
            Some(pb::SendTo { kind: Some(pb::send_to::Kind::Agents(pb::Agents { agents: s.to.clone() })) })
        } else if s.explicit_nobody {
            Some(pb::SendTo { kind: Some(pb::send_to::Kind::Nobody(pb::Nobody {})) })
        } else {
            None
        };
        pb::SendRequest { thread: self.thread.clone(), body: fleet(&s.id), to, ..Default::default() }
    }

    async fn send(&self, env: &Env, p: &mut Proc, c: &Client, s: Sent, replay: bool) {
        let agent = &self.agents[s.agent].0;
        let value = json!({"id": s.id, "thread": self.thread, "agent": agent, "to": s.to, "replay": replay});
        env.rec.invoke(p.id, SEND, value, p.node, Some(&s.key));
        let r = c.send(self.request(&s), Some(s.key.clone())).await;
        p.finish_write(env, SEND, Some(&s.key), r, |w| {
            let (entry, responders) = match w.value.receipt.as_ref().and_then(|r| r.result.as_ref()) {
                Some(pb::receipt::Result::Sent(sent)) => (Some(sent.entry), sent.responders.clone()),
                _ => (None, Vec::new()),
            };
            Completion {
                value: json!({"id": s.id, "entry": entry, "responders": responders, "replayed": w.replayed}),
                ..Completion::default()
            }
        });
        if !replay {
            self.sent.lock().unwrap_or_else(|e| e.into_inner()).push(s);
        }
    }

    async fn read(&self, env: &Env, p: &mut Proc, c: &Client, agent: &str) {
        let slot = p.id % p.stride.max(1);
        let kept = self.cursors.lock().unwrap_or_else(|e| e.into_inner()).get(&slot).copied().unwrap_or(0);
        let start = if p.rng.random_range(0..100) < RESTART_PERCENT { 0 } else { kept };
        let asked_me = p.rng.random_range(0..100) < ASKED_ME_PERCENT;
        let page_size = PAGE_SIZES.choose(&mut p.rng).copied().unwrap_or(5);
        let filter = if asked_me { pb::MailboxFilter::AskedMe } else { pb::MailboxFilter::All };
        let name = if asked_me { ASKED_ME } else { "all" };
        let request =
            json!({"thread": self.thread, "agent": agent, "filter": name, "after": start, "page_size": page_size});
        env.rec.invoke(p.id, MAILBOX, request, p.node, None);
        let mut pages: Vec<Value> = Vec::new();
        let mut after = start;
        let mut cursor = start;
        let result: Result<(), Error> = async {
            for _ in 0..MAX_PAGES {
                let page = c
                    .get_mailbox(pb::GetMailboxRequest {
                        thread: self.thread.clone(),
                        after,
                        filter: filter as i32,
                        page_size,
                    })
                    .await?;
                let mut seqs = Vec::new();
                let mut ids = Vec::new();
                for item in &page.items {
                    seqs.push(item.entry.as_ref().map(|e| e.seq).unwrap_or_default());
                    ids.push(item_body(c, &self.thread, item).await?);
                }
                pages.push(json!({"after": after, "seqs": seqs, "ids": ids, "next_after": page.next_after}));
                if let Some(last) = seqs.iter().max() {
                    cursor = cursor.max(*last);
                }
                match page.next_after {
                    Some(n) if n > after => {
                        cursor = cursor.max(n);
                        after = n;
                    }
                    _ => break,
                }
            }
            Ok(())
        }
        .await;
        let ok = result.is_ok();
        p.finish_read(env, MAILBOX, result, |_| json!({"pages": pages}));
        if ok {
            self.cursors.lock().unwrap_or_else(|e| e.into_inner()).insert(slot, cursor);
        }
    }
}

/// One node's whole mailbox of `thread`, from its own state.
async fn read_all(reader: &Client, thread: &str) -> Result<Vec<Value>, Error> {
    let mut entries = Vec::new();
    let mut after = 0;
    loop {
        let page = reader
            .get_mailbox(pb::GetMailboxRequest {
                thread: thread.to_string(),
                after,
                page_size: FINAL_PAGE,
                ..Default::default()
            })
            .await?;
        for item in &page.items {
            let Some(e) = &item.entry else { continue };
            let id = item_body(reader, thread, item).await?;
            entries.push(json!({"seq": e.seq, "id": id, "author": e.author, "responders": e.responders}));
        }
        match page.next_after {
            Some(n) if n > after => after = n,
            _ => break,
        }
    }
    Ok(entries)
}

impl Workload for Messages {
    fn kind(&self) -> Kind {
        Kind::Messages
    }

    fn setup<'a>(&'a mut self, env: &'a Env, processes: usize) -> BoxFuture<'a, Result<()>> {
        async move {
            let lead = register(env).await?;
            let (thread, secret) = super::open_thread(env, &lead.1, "messages").await?;
            self.thread = thread;
            // As in `replay`: process slot `s` acts as agent `s % agents`, so with more processes
            // than nodes every agent sends (and replays) through several nodes.
            self.agents = super::join_members(env, processes, &secret, "messages").await?;
            self.lead = lead;
            Ok(())
        }
        .boxed()
    }

    fn step<'a>(&'a self, env: &'a Env, p: &'a mut Proc) -> BoxFuture<'a, ()> {
        async move {
            let slot = (p.id % p.stride.max(1)) as usize;
            let a = slot % self.agents.len();
            let (agent, key) = &self.agents[a];
            if p.client.is_none() {
                match client::connect(p.endpoint(env), Some(key.clone())).await {
                    Ok(c) => p.client = Some(c),
                    Err(_) => return,
                }
            }
            let Some(c) = p.client.clone() else { return };
            let roll = p.rng.random_range(0..100);
            if roll < READ_PERCENT {
                self.read(env, p, &c, agent).await;
                return;
            }
            let earlier: Vec<Sent> =
                self.sent.lock().unwrap_or_else(|e| e.into_inner()).iter().filter(|s| s.agent == a).cloned().collect();
            if roll < READ_PERCENT + REPLAY_PERCENT
                && let Some(s) = earlier.choose(&mut p.rng).cloned()
            {
                self.send(env, p, &c, s, true).await;
                return;
            }
            // Whom to ask: nobody half of the time, else one or two other members.
            let mut others: Vec<String> =
                self.agents.iter().map(|(id, _)| id.clone()).filter(|id| id != agent).collect();
            others.push(self.lead.0.clone());
            let to: Vec<String> = if p.rng.random_bool(0.5) {
                Vec::new()
            } else {
                let k = p.rng.random_range(1..=2.min(others.len()));
                others.choose_multiple(&mut p.rng, k).cloned().collect()
            };
            let id = format!("m{}-{}", p.id, p.done);
            let s = Sent { key: format!("k-{id}"), id, agent: a, to, explicit_nobody: p.rng.random_bool(0.5) };
            self.send(env, p, &c, s, false).await;
        }
        .boxed()
    }

    fn final_reads<'a>(&'a self, env: &'a Env, next_process: u64) -> BoxFuture<'a, Result<()>> {
        async move {
            for (i, (node, endpoint)) in env.endpoints.iter().enumerate() {
                let process = next_process + i as u64;
                env.rec.invoke(process, FINAL_READ, json!({"thread": self.thread}), *node, None);
                let read = async {
                    let reader = node_reader(endpoint, Some(self.lead.1.clone())).await?;
                    Ok::<_, anyhow::Error>(read_all(&reader, &self.thread).await?)
                };
                record_final_read(
                    env,
                    process,
                    *node,
                    read.await.map(|entries| json!({"thread": self.thread, "entries": entries})),
                );
            }
            Ok(())
        }
        .boxed()
    }
}
