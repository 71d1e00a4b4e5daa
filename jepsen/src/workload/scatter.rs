//! `scatter` (COORDINATION §4.3–§4.5): a lead and [`WORKERS`] workers share [`THREADS`] threads
//! (set up before any fault). Every op is a `Scatter` by the lead, through the process's node, to a
//! random subset of 1..=[`WORKERS`] workers in shuffled order, under a client-chosen idempotency
//! key, with contents that name the op (`<id>/h` for the header, `<id>/g/<member>` per goal).
//! Some ops also name an agent who is not a member (they must be refused `INVALID_TARGET`, with no
//! effect anywhere), some resend an earlier request under its key, possibly through another node
//! (at most one collective per key; half of the resends pick a scatter whose outcome is unknown). When a thread nears the server's open-assignment limit the
//! lead voids its oldest acknowledged assignments (`void` ops; voiding keeps the collective's
//! shape). The final reads list, from every node's own state, each thread's entries through
//! `GetMailbox` and, for every header, the collective the node answers (`GetCollective`);
//! `crate::checker::scatter` judges them.

use super::common::{fleet, record_final_read};
use super::{Env, Proc, Workload, item_body, node_reader, register};
use crate::checker::Workload as Kind;
use crate::checker::scatter::{Part, SCATTER, VOID, goal_body, header_body, parse_body};
use crate::client;
use crate::history::{FINAL_READ, OpType};
use crate::recorder::Completion;
use anyhow::{Context, Result};
use futures::FutureExt;
use futures::future::BoxFuture;
use futures::{StreamExt, TryStreamExt};
use kungfu_client::{Client, Code, Error, pb};
use rand::Rng;
use rand::seq::SliceRandom;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::Mutex;

/// Threads the scatters are spread over (each has its own open-assignment limit).
pub const THREADS: usize = 3;
/// Workers in every thread besides the lead.
pub const WORKERS: usize = 4;
/// Percentage of fresh scatters that also name a non-member.
const INVALID_PERCENT: u32 = 12;
/// Percentage of ops that resend an earlier scatter under its key.
const RESEND_PERCENT: u32 = 12;
/// Above this many possibly open assignments in a thread, the lead voids before scattering more
/// (the server refuses past `max_open_assignments_per_thread`, 1000 by default).
const OPEN_SOFT_LIMIT: u64 = 700;
/// Entries per `GetMailbox` page of a final read (the server caps pages at 100).
const PAGE: u32 = 100;
/// `GetCollective` calls of a final read in flight at once.
const GATHER_CONCURRENCY: usize = 8;

/// One earlier scatter, to resend exactly (same key, same goals in the same order).
#[derive(Debug, Clone)]
struct Sent {
    id: String,
    key: String,
    group: usize,
    /// The goals' members in request order (the outsider included).
    goals: Vec<String>,
    members: Vec<String>,
    outsider: Option<String>,
    /// Its assignments were counted as possibly open.
    counted: bool,
    /// Its acknowledged assignments are queued for voiding.
    queued: bool,
}

/// Where one thread stands against its open-assignment limit.
#[derive(Debug, Default)]
struct Open {
    /// Assignments that may be open: acknowledged or indeterminate ranks, minus acknowledged voids.
    possibly: u64,
    /// Acknowledged assignments, oldest first, that the lead may void.
    voidable: VecDeque<String>,
}

#[derive(Debug)]
struct Group {
    thread: String,
    open: Mutex<Open>,
}

/// The lead, the workers, the outsider and the threads.
#[derive(Debug, Default)]
pub struct Scatter {
    lead_key: String,
    workers: Vec<String>,
    outsider: String,
    groups: Vec<Group>,
    sent: Mutex<Vec<Sent>>,
}

/// What one step does.
enum Choice {
    Fresh,
    Resend(usize),
    Void(usize, String),
}

impl Scatter {
    fn request(&self, s: &Sent) -> pb::ScatterRequest {
        pb::ScatterRequest {
            thread: self.groups[s.group].thread.clone(),
            header: fleet(&header_body(&s.id)),
            goals: s
                .goals
                .iter()
                .map(|m| pb::RankGoal { member: m.clone(), body: fleet(&goal_body(&s.id, m)) })
                .collect(),
            criteria: kungfu_client::text("one line"),
            ..Default::default()
        }
    }

    fn invocation(&self, s: &Sent, resend: bool) -> Value {
        json!({
            "id": s.id,
            "thread": self.groups[s.group].thread,
            "members": s.members,
            "outsider": s.outsider,
            "goals": s.goals,
            "resend": resend,
        })
    }

    fn choose(&self, p: &mut Proc) -> Choice {
        let g = p.rng.random_range(0..self.groups.len());
        {
            let mut open = self.groups[g].open.lock().unwrap_or_else(|e| e.into_inner());
            if open.possibly >= OPEN_SOFT_LIMIT
                && let Some(a) = open.voidable.pop_front()
            {
                return Choice::Void(g, a);
            }
        }
        let sent = self.sent.lock().unwrap_or_else(|e| e.into_inner());
        if !sent.is_empty() && p.rng.random_range(0..100) < RESEND_PERCENT {
            // Half of the time a scatter whose outcome is still unknown: its resend tells whether
            // it happened, and its assignments become voidable.
            let unknown: Vec<usize> =
                sent.iter().enumerate().filter(|(_, s)| s.counted && !s.queued).map(|(i, _)| i).collect();
            if !unknown.is_empty() && p.rng.random_bool(0.5) {
                return Choice::Resend(unknown[p.rng.random_range(0..unknown.len())]);
            }
            return Choice::Resend(p.rng.random_range(0..sent.len()));
        }
        Choice::Fresh
    }

    fn fresh(&self, p: &mut Proc) -> Sent {
        let id = format!("sc{}-{}", p.id, p.done);
        let group = p.rng.random_range(0..self.groups.len());
        let mut pool = self.workers.clone();
        pool.shuffle(&mut p.rng);
        pool.truncate(p.rng.random_range(1..=self.workers.len()));
        let members = pool.clone();
        let mut goals = pool;
        let outsider = (p.rng.random_range(0..100) < INVALID_PERCENT).then(|| self.outsider.clone());
        if let Some(o) = &outsider {
            let at = p.rng.random_range(0..=goals.len());
            goals.insert(at, o.clone());
        }
        Sent { key: format!("k-{id}"), id, group, goals, members, outsider, counted: false, queued: false }
    }

    /// After an attempt of `s` ended `kind` with these assignments: count and queue them once.
    fn account(&self, s: &Sent, kind: OpType, assignments: &[String]) {
        if s.outsider.is_some() {
            return;
        }
        let mut sent = self.sent.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = sent.iter_mut().find(|x| x.key == s.key) else { return };
        let mut open = self.groups[s.group].open.lock().unwrap_or_else(|e| e.into_inner());
        if kind != OpType::Fail && !entry.counted {
            entry.counted = true;
            open.possibly += s.members.len() as u64;
        }
        if kind == OpType::Ok && !entry.queued {
            entry.queued = true;
            open.voidable.extend(assignments.iter().cloned());
        }
    }

    async fn scatter(&self, env: &Env, p: &mut Proc, c: &Client, s: Sent, resend: bool) {
        env.rec.invoke(p.id, SCATTER, self.invocation(&s, resend), p.node, Some(&s.key));
        let r = c.scatter(self.request(&s), Some(s.key.clone())).await;
        let mut assignments = Vec::new();
        let kind = p.finish_write(env, SCATTER, Some(&s.key), r, |w| {
            let (header, ranks) = match w.value.receipt.as_ref().and_then(|r| r.result.as_ref()) {
                Some(pb::receipt::Result::Scattered(sc)) => {
                    let ranks: Vec<Value> = sc
                        .ranks
                        .iter()
                        .map(|r| json!({"rank": r.rank, "member": r.member, "entry": r.entry, "assignment": r.assignment}))
                        .collect();
                    assignments = sc.ranks.iter().map(|r| r.assignment.clone()).collect();
                    (Some(sc.header), ranks)
                }
                _ => (None, Vec::new()),
            };
            Completion {
                value: json!({"id": s.id, "header": header, "ranks": ranks, "replayed": w.replayed}),
                ..Completion::default()
            }
        });
        if !resend {
            // Completed attempts only, as in `replay`: a resend never races its first attempt.
            self.sent.lock().unwrap_or_else(|e| e.into_inner()).push(s.clone());
        }
        self.account(&s, kind, &assignments);
    }

    async fn void(&self, env: &Env, p: &mut Proc, c: &Client, g: usize, assignment: String) {
        let key = format!("void-{assignment}");
        let thread = &self.groups[g].thread;
        env.rec.invoke(p.id, VOID, json!({"thread": thread, "assignment": assignment}), p.node, Some(&key));
        let r = c
            .void_assignment(
                pb::VoidAssignmentRequest { assignment: assignment.clone(), ..Default::default() },
                Some(key.clone()),
            )
            .await;
        let kind = p.finish_write(env, VOID, Some(&key), r, |_| Completion {
            value: json!({"thread": thread, "assignment": assignment}),
            ..Completion::default()
        });
        let mut open = self.groups[g].open.lock().unwrap_or_else(|e| e.into_inner());
        match kind {
            OpType::Ok => open.possibly = open.possibly.saturating_sub(1),
            // Not voided: it may still be open; try it again later.
            OpType::Fail => open.voidable.push_back(assignment),
            _ => {}
        }
    }
}

/// One node's final read of one thread: every entry through `GetMailbox`, and the collective of
/// every header.
async fn read_thread(reader: &Client, thread: &str) -> Result<Value, Error> {
    let mut entries: Vec<Value> = Vec::new();
    let mut headers: Vec<u64> = Vec::new();
    let mut after = 0;
    loop {
        let page = reader
            .get_mailbox(pb::GetMailboxRequest {
                thread: thread.to_string(),
                after,
                page_size: PAGE,
                ..Default::default()
            })
            .await?;
        for item in &page.items {
            let Some(e) = &item.entry else { continue };
            let body = item_body(reader, thread, item).await?;
            if matches!(parse_body(&body), Some((_, Part::Header))) {
                headers.push(e.seq);
            }
            entries.push(json!({
                "seq": e.seq,
                "body": body,
                "author": e.author,
                "reply_to": e.reply_to,
                "assignment": e.assignment,
            }));
        }
        match page.next_after {
            Some(n) if n > after => after = n,
            _ => break,
        }
    }
    // One call per header, a few at a time (a debug server takes tens of ms per gather).
    let gathered: Vec<Option<Value>> = futures::stream::iter(headers)
        .map(|header| async move {
            let request = pb::GetCollectiveRequest { thread: thread.to_string(), header, include_outputs: false };
            match reader.get_collective(request).await {
                Ok(c) => Ok(Some(json!({
                    "header": c.header,
                    "size": c.size,
                    "ranks": c.ranks.iter().map(|r| json!({
                        "rank": r.rank,
                        "member": r.member,
                        "entry": r.entry,
                        "assignment": r.assignment.as_ref().map(|a| a.id.clone()),
                    })).collect::<Vec<_>>(),
                }))),
                // The node answers no collective at this header: the checker judges the absence.
                Err(Error::Rejected(r)) if r.code == Code::NotFound => Ok(None),
                Err(e) => Err(e),
            }
        })
        .buffered(GATHER_CONCURRENCY)
        .try_collect()
        .await?;
    let collectives: Vec<Value> = gathered.into_iter().flatten().collect();
    Ok(json!({"thread": thread, "entries": entries, "collectives": collectives}))
}

impl Workload for Scatter {
    fn kind(&self) -> Kind {
        Kind::Scatter
    }

    fn setup<'a>(&'a mut self, env: &'a Env, _processes: usize) -> BoxFuture<'a, Result<()>> {
        async move {
            let (_, lead) = register(env).await?;
            let mut workers = Vec::new();
            for _ in 0..WORKERS {
                workers.push(register(env).await?);
            }
            // Registered but never admitted: a goal naming it must be refused INVALID_TARGET.
            let (outsider, _) = register(env).await?;
            for i in 0..THREADS {
                let (thread, secret) = super::open_thread(env, &lead, &format!("scatter {i}")).await?;
                for (_, key) in &workers {
                    env.setup
                        .with_key(key.clone())
                        .join(pb::JoinRequest { grant_secret: secret.clone(), ..Default::default() }, None)
                        .await
                        .context("joining a scatter thread")?;
                }
                self.groups.push(Group { thread, open: Mutex::new(Open::default()) });
            }
            self.workers = workers.into_iter().map(|(id, _)| id).collect();
            self.outsider = outsider;
            self.lead_key = lead;
            Ok(())
        }
        .boxed()
    }

    fn step<'a>(&'a self, env: &'a Env, p: &'a mut Proc) -> BoxFuture<'a, ()> {
        async move {
            if p.client.is_none() {
                match client::connect(p.endpoint(env), Some(self.lead_key.clone())).await {
                    Ok(c) => p.client = Some(c),
                    Err(_) => return,
                }
            }
            let Some(c) = p.client.clone() else { return };
            match self.choose(p) {
                Choice::Void(g, a) => self.void(env, p, &c, g, a).await,
                Choice::Resend(i) => {
                    let s = self.sent.lock().unwrap_or_else(|e| e.into_inner()).get(i).cloned();
                    if let Some(s) = s {
                        self.scatter(env, p, &c, s, true).await;
                    }
                }
                Choice::Fresh => {
                    let s = self.fresh(p);
                    self.scatter(env, p, &c, s, false).await;
                }
            }
        }
        .boxed()
    }

    fn final_reads<'a>(&'a self, env: &'a Env, next_process: u64) -> BoxFuture<'a, Result<()>> {
        async move {
            for (i, (node, endpoint)) in env.endpoints.iter().enumerate() {
                let process = next_process + i as u64;
                let reader = node_reader(endpoint, Some(self.lead_key.clone())).await;
                for g in &self.groups {
                    env.rec.invoke(process, FINAL_READ, json!({"thread": g.thread}), *node, None);
                    let read = match &reader {
                        Ok(r) => read_thread(r, &g.thread).await.map_err(anyhow::Error::from),
                        Err(e) => Err(anyhow::anyhow!("{e}")),
                    };
                    record_final_read(env, process, *node, read);
                }
            }
            Ok(())
        }
        .boxed()
    }
}
