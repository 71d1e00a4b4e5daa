//! `record-append` (COORDINATION §5.4–§5.8): processes co-edit a few shared records of one thread.
//! An `append` patches one or two notes with globally unique ids onto the base the process last
//! read (often stale: appends with new ids are merged onto the current rev), under an idempotency
//! key; some appends resend an earlier key (the same request) through the process's node, which
//! may be another node than the first attempt's; a few reuse an acknowledged note id under a fresh
//! key (refused `DUPLICATE_ID`). A `replace` sets the title or the state on the base the process
//! last read (a stale base is refused `STALE_BASE`, and the conflict's current rev becomes the
//! process's base). A `read` takes the record (`GetRecord`: rev, title, state, note ids with their
//! `added_rev`) and one page of its events before that rev. The final reads take every record from
//! every node's own state: the record and all its events. `crate::checker::record` judges them.

use super::common::{fleet_labels, record_final_read};
use super::{Env, Proc, Workload, node_reader, register};
use crate::checker::Workload as Kind;
use crate::checker::record::{APPEND, READ, REPLACE};
use crate::client;
use crate::history::{FINAL_READ, OpType};
use crate::recorder::Completion;
use anyhow::{Context, Result};
use futures::FutureExt;
use futures::future::BoxFuture;
use kungfu_client::{Client, Error, Patch, pb};
use rand::Rng;
use rand::seq::IndexedRandom;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// How many records the thread holds (a record holds at most 1000 items).
const RECORDS: usize = 3;
/// Percentage of ops that are reads.
const READ_PERCENT: u32 = 20;
/// Percentage of ops that are replaces.
const REPLACE_PERCENT: u32 = 25;
/// Percentage of ops that resend an earlier append under its key.
const REPLAY_PERCENT: u32 = 8;
/// Percentage of ops that append an acknowledged note id again under a fresh key.
const DUP_PERCENT: u32 = 4;
/// Events a read asks for at most, ending at the rev it read.
const READ_EVENTS: u32 = 20;
/// Events per page of a final read.
const FINAL_PAGE: u32 = 100;

/// Labeled content every member may read.
fn message(words: &str) -> pb::LabeledBody {
    pb::LabeledBody {
        kind: Some(pb::labeled_body::Kind::Content(pb::LabeledContent {
            content: kungfu_client::text(words),
            labels: Some(fleet_labels()),
        })),
    }
}

fn note_body(id: &str) -> pb::RecordBodyInput {
    pb::RecordBodyInput {
        kind: Some(pb::record_body_input::Kind::Content(pb::LabeledContent {
            content: kungfu_client::text(id),
            labels: Some(fleet_labels()),
        })),
    }
}

/// An earlier append, to resend exactly.
#[derive(Debug, Clone)]
struct Sent {
    key: String,
    record: usize,
    base_rev: u32,
    ids: Vec<String>,
    agent: usize,
    acked: bool,
}

/// The thread, its records, the editing agents and every process slot's last-read rev per record.
#[derive(Debug, Default)]
pub struct RecordAppend {
    thread: String,
    lead: (String, String),
    records: Vec<String>,
    agents: Vec<(String, String)>,
    sent: Mutex<Vec<Sent>>,
    /// (process slot, record index) → the rev the slot last saw.
    bases: Mutex<BTreeMap<(u64, usize), u32>>,
}

fn patched(w: &kungfu_client::Written<pb::PatchRecordResponse>) -> Value {
    match w.value.receipt.as_ref().and_then(|r| r.result.as_ref()) {
        Some(pb::receipt::Result::RecordPatched(p)) => json!({
            "record": p.record,
            "entry": p.entry,
            "base_rev": p.base_rev,
            "rev": p.rev,
            "merged": p.merged,
            "replayed": w.replayed,
        }),
        _ => json!({"replayed": w.replayed}),
    }
}

fn view_json(v: &pb::RecordView) -> Value {
    let notes: Vec<Value> = v.notes.iter().map(|n| json!({"id": n.id, "added_rev": n.added_rev})).collect();
    let text = |c: &Option<pb::Content>| c.as_ref().map(|c| String::from_utf8_lossy(&c.body).into_owned());
    json!({
        "rev": v.rev,
        "current_rev": v.current_rev,
        "title": text(&v.title),
        "state": text(&v.state),
        "notes": notes,
    })
}

fn event_json(e: &pb::RecordEvent) -> Value {
    json!({"rev": e.rev, "base_rev": e.base_rev, "entry": e.entry, "actor": e.actor, "paths": e.paths})
}

impl RecordAppend {
    fn base(&self, slot: u64, record: usize) -> u32 {
        self.bases.lock().unwrap_or_else(|e| e.into_inner()).get(&(slot, record)).copied().unwrap_or(1)
    }

    fn saw(&self, slot: u64, record: usize, rev: u32) {
        let mut b = self.bases.lock().unwrap_or_else(|e| e.into_inner());
        let r = b.entry((slot, record)).or_insert(1);
        *r = (*r).max(rev);
    }

    fn append_request(&self, s: &Sent) -> Patch {
        let mut p = Patch::new(&self.records[s.record], s.base_rev, message(&format!("append {}", s.ids.join(","))));
        for id in &s.ids {
            p = p.append_note(id, pb::NoteKind::Comment, note_body(id));
        }
        p
    }

    async fn append(&self, env: &Env, p: &mut Proc, c: &Client, s: Sent, replay: bool, dup: bool) {
        let slot = p.id % p.stride.max(1);
        let record = &self.records[s.record];
        let value = json!({
            "record": record,
            "base_rev": s.base_rev,
            "ids": s.ids,
            "agent": self.agents[s.agent].0,
            "replay": replay,
            "dup": dup,
        });
        env.rec.invoke(p.id, APPEND, value, p.node, Some(&s.key));
        let r = c.patch_record(self.append_request(&s), Some(s.key.clone())).await;
        let rev = r.as_ref().ok().map(|w| match w.value.receipt.as_ref().and_then(|r| r.result.as_ref()) {
            Some(pb::receipt::Result::RecordPatched(p)) => p.rev,
            _ => 0,
        });
        let kind = p
            .finish_write(env, APPEND, Some(&s.key), r, |w| Completion { value: patched(&w), ..Completion::default() });
        if let Some(rev) = rev {
            self.saw(slot, s.record, rev);
        }
        if !replay && !dup {
            let mut s = s;
            s.acked = kind == OpType::Ok;
            self.sent.lock().unwrap_or_else(|e| e.into_inner()).push(s);
        } else if replay && kind == OpType::Ok {
            let mut sent = self.sent.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(x) = sent.iter_mut().find(|x| x.key == s.key) {
                x.acked = true;
            }
        }
    }

    async fn replace(&self, env: &Env, p: &mut Proc, c: &Client, record: usize) {
        let slot = p.id % p.stride.max(1);
        let base_rev = self.base(slot, record);
        let title = p.rng.random_bool(0.5);
        let text = format!("{}-p{}-{}", if title { "t" } else { "s" }, p.id, p.done);
        let key = format!("kr-p{}-{}", p.id, p.done);
        let path = if title { "/title" } else { "/state" };
        let value = json!({"record": self.records[record], "base_rev": base_rev, "path": path, "value": text});
        env.rec.invoke(p.id, REPLACE, value, p.node, Some(&key));
        let patch = Patch::new(&self.records[record], base_rev, message(&format!("replace {path}")));
        let patch = if title { patch.replace_title(text.clone()) } else { patch.replace_state(text.clone()) };
        let r = c.patch_record(patch, Some(key.clone())).await;
        let seen = match &r {
            Ok(w) => match w.value.receipt.as_ref().and_then(|r| r.result.as_ref()) {
                Some(pb::receipt::Result::RecordPatched(p)) => Some(p.rev),
                _ => None,
            },
            Err(e) => e.record_conflict().map(|c| c.current_rev),
        };
        p.finish_write(env, REPLACE, Some(&key), r, |w| Completion { value: patched(&w), ..Completion::default() });
        if let Some(rev) = seen {
            self.saw(slot, record, rev);
        }
    }

    async fn read(&self, env: &Env, p: &mut Proc, c: &Client, record: usize) {
        let slot = p.id % p.stride.max(1);
        let id = self.records[record].clone();
        env.rec.invoke(p.id, READ, json!({"record": id}), p.node, None);
        let result: Result<(Value, u32), Error> = async {
            let view = c.get_record(pb::GetRecordRequest { record: id.clone(), ..Default::default() }).await?;
            let after = view.rev.saturating_sub(READ_EVENTS);
            let page = c
                .get_record_events(pb::GetRecordEventsRequest {
                    record: id.clone(),
                    after_rev: after,
                    page_size: READ_EVENTS,
                    ..Default::default()
                })
                .await?;
            let mut v = view_json(&view);
            v["events_after"] = json!(after);
            v["events"] = Value::Array(page.events.iter().map(event_json).collect());
            Ok((v, view.rev))
        }
        .await;
        let rev = result.as_ref().ok().map(|(_, r)| *r);
        p.finish_read(env, READ, result, |(v, _)| v);
        if let Some(rev) = rev {
            self.saw(slot, record, rev);
        }
    }
}

/// One node's whole record: the view and every event, from its own state.
async fn read_all(reader: &Client, record: &str) -> Result<Value, Error> {
    let view = reader.get_record(pb::GetRecordRequest { record: record.to_string(), ..Default::default() }).await?;
    let mut events = Vec::new();
    let mut after = 0;
    loop {
        let page = reader
            .get_record_events(pb::GetRecordEventsRequest {
                record: record.to_string(),
                after_rev: after,
                page_size: FINAL_PAGE,
                ..Default::default()
            })
            .await?;
        events.extend(page.events.iter().map(event_json));
        if page.events.is_empty() || page.next_after_rev <= after {
            break;
        }
        after = page.next_after_rev;
    }
    let mut v = view_json(&view);
    v["record"] = json!(record);
    v["events"] = Value::Array(events);
    Ok(v)
}

impl Workload for RecordAppend {
    fn kind(&self) -> Kind {
        Kind::Record
    }

    fn setup<'a>(&'a mut self, env: &'a Env, processes: usize) -> BoxFuture<'a, Result<()>> {
        async move {
            let lead = register(env).await?;
            let (thread, secret) = super::open_thread(env, &lead.1, "record-append").await?;
            self.thread = thread;
            let lead_client = env.setup.with_key(lead.1.clone());
            for i in 0..RECORDS {
                let new = kungfu_client::NewRecord::new(
                    &self.thread,
                    format!("title-{i}"),
                    format!("state-{i}"),
                    note_body(&format!("body-{i}")),
                    message(&format!("record {i}")),
                );
                let w = lead_client.create_record(new, None).await.context("creating a record")?;
                match w.value.receipt.and_then(|r| r.result) {
                    Some(pb::receipt::Result::RecordCreated(c)) => self.records.push(c.record),
                    other => anyhow::bail!("record creation answered {other:?}"),
                }
            }
            // As in `messages`: process slot `s` acts as agent `s % agents`.
            self.agents = super::join_members(env, processes, &secret, "record").await?;
            self.lead = lead;
            Ok(())
        }
        .boxed()
    }

    fn step<'a>(&'a self, env: &'a Env, p: &'a mut Proc) -> BoxFuture<'a, ()> {
        async move {
            let slot = p.id % p.stride.max(1);
            let a = slot as usize % self.agents.len();
            if p.client.is_none() {
                match client::connect(p.endpoint(env), Some(self.agents[a].1.clone())).await {
                    Ok(c) => p.client = Some(c),
                    Err(_) => return,
                }
            }
            let Some(c) = p.client.clone() else { return };
            let record = p.rng.random_range(0..self.records.len());
            let roll = p.rng.random_range(0..100);
            if roll < READ_PERCENT {
                self.read(env, p, &c, record).await;
                return;
            }
            if roll < READ_PERCENT + REPLACE_PERCENT {
                self.replace(env, p, &c, record).await;
                return;
            }
            let earlier: Vec<Sent> =
                self.sent.lock().unwrap_or_else(|e| e.into_inner()).iter().filter(|s| s.agent == a).cloned().collect();
            if roll < READ_PERCENT + REPLACE_PERCENT + REPLAY_PERCENT
                && let Some(s) = earlier.choose(&mut p.rng).cloned()
            {
                self.append(env, p, &c, s, true, false).await;
                return;
            }
            let base_rev = self.base(slot, record);
            if roll < READ_PERCENT + REPLACE_PERCENT + REPLAY_PERCENT + DUP_PERCENT {
                let acked: Vec<Sent> = earlier.into_iter().filter(|s| s.acked).collect();
                if let Some(s) = acked.choose(&mut p.rng) {
                    let id = s.ids[0].clone();
                    let s = Sent {
                        key: format!("kd-p{}-{}", p.id, p.done),
                        record: s.record,
                        base_rev: self.base(slot, s.record),
                        ids: vec![id],
                        agent: a,
                        acked: false,
                    };
                    self.append(env, p, &c, s, false, true).await;
                    return;
                }
            }
            let n = if p.rng.random_bool(0.3) { 2 } else { 1 };
            let ids: Vec<String> = (0..n).map(|i| format!("n{}-{}-{i}", p.id, p.done)).collect();
            let s = Sent { key: format!("ka-p{}-{}", p.id, p.done), record, base_rev, ids, agent: a, acked: false };
            self.append(env, p, &c, s, false, false).await;
        }
        .boxed()
    }

    fn final_reads<'a>(&'a self, env: &'a Env, next_process: u64) -> BoxFuture<'a, Result<()>> {
        async move {
            let mut process = next_process;
            for (node, endpoint) in env.endpoints.iter() {
                for record in &self.records {
                    env.rec.invoke(process, FINAL_READ, json!({"record": record}), *node, None);
                    let read = async {
                        let reader = node_reader(endpoint, Some(self.lead.1.clone())).await?;
                        Ok::<_, anyhow::Error>(read_all(&reader, record).await?)
                    };
                    record_final_read(env, process, *node, read.await);
                    process += 1;
                }
            }
            Ok(())
        }
        .boxed()
    }
}
