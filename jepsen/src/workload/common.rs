//! What the workloads share: the clients and objects they set up, the content they post, and how
//! a final read is recorded.

use super::Env;
use crate::client;
use crate::history::{FINAL_READ, OpType};
use crate::recorder::Completion;
use anyhow::Result;
use kungfu_client::pb;
use kungfu_client::{Client, Error};
use serde_json::Value;

/// Labels every member may read (tainted, fleet scope).
pub fn fleet_labels() -> pb::Labels {
    pb::Labels { taint: pb::Taint::Tainted as i32, scope: pb::Scope::Fleet as i32 }
}

/// Labeled content every member may read.
pub fn fleet(words: &str) -> Option<pb::LabeledBody> {
    Some(pb::LabeledBody {
        kind: Some(pb::labeled_body::Kind::Content(pb::LabeledContent {
            content: kungfu_client::text(words),
            labels: Some(fleet_labels()),
        })),
    })
}

/// Records the final read of `process` on `node`: ok with the value read, or fail with the error
/// (a read changes nothing, so its failure is definite; the checkers then leave that node out).
pub fn record_final_read(env: &Env, process: u64, node: u64, read: Result<Value>) {
    let (kind, c) = match read {
        Ok(value) => (OpType::Ok, Completion { value, ..Completion::default() }),
        Err(e) => (
            OpType::Fail,
            Completion { error: Some("UNAVAILABLE".into()), message: Some(e.to_string()), ..Completion::default() },
        ),
    };
    env.rec.complete(process, kind, FINAL_READ, node, None, c);
}

/// A stale-read client of one node (answers from that node's own state: after convergence, what
/// the node itself holds).
pub async fn node_reader(endpoint: &str, key: Option<String>) -> Result<Client> {
    Ok(client::connect(endpoint, key).await?.stale())
}

/// Reads every entry of `thread` from one node's own state, with its content (the fact's id):
/// `[(seq, content, author)]`.
pub async fn thread_entries(reader: &Client, thread: &str) -> Result<Vec<(u64, String, String)>> {
    let entries = reader.timeline_all(thread, 100_000).await?;
    let mut out = Vec::with_capacity(entries.len());
    for e in entries {
        let view =
            reader.get_entry(kungfu_client::pb::GetEntryRequest { thread: thread.to_string(), entry: e.seq }).await?;
        let body = view.content.map(|c| String::from_utf8_lossy(&c.body).into_owned()).unwrap_or_default();
        out.push((e.seq, body, e.author));
    }
    Ok(out)
}

/// The content of one mailbox item: inline, else read with `GetEntry` (omitted past the page's
/// byte budget). Empty when the reader may not read it.
pub async fn item_body(reader: &Client, thread: &str, item: &kungfu_client::pb::MailItem) -> Result<String, Error> {
    if let (Some(c), false) = (&item.content, item.content_omitted) {
        return Ok(String::from_utf8_lossy(&c.body).into_owned());
    }
    let seq = item.entry.as_ref().map(|e| e.seq).unwrap_or_default();
    let view = reader.get_entry(kungfu_client::pb::GetEntryRequest { thread: thread.to_string(), entry: seq }).await?;
    Ok(view.content.map(|c| String::from_utf8_lossy(&c.body).into_owned()).unwrap_or_default())
}

/// Creates a thread as `lead` (setup client, with retries) whose live grant admits speakers;
/// returns (thread id, grant secret).
pub async fn open_thread(env: &Env, lead: &str, subject: &str) -> Result<(String, String)> {
    let t = env
        .setup
        .with_key(lead.to_string())
        .create_thread(
            kungfu_client::pb::CreateThreadRequest {
                subject: kungfu_client::text(subject),
                grant: Some(kungfu_client::pb::GrantSpec { role: kungfu_client::pb::Role::Speaker as i32 }),
                ..Default::default()
            },
            None,
        )
        .await?;
    let secret = t.value.grant_secret.clone();
    if secret.is_empty() {
        anyhow::bail!("the thread's grant secret was lost to a retried creation; run again");
    }
    match t.value.receipt.and_then(|r| r.result) {
        Some(kungfu_client::pb::receipt::Result::ThreadCreated(c)) => Ok((c.thread, secret)),
        other => anyhow::bail!("thread creation answered {other:?}"),
    }
}

/// Registers the members of a shared-thread workload and admits them with `secret`: enough that,
/// with `processes` processes over the nodes, every agent acts through several nodes (process slot
/// `s` acts as agent `s % agents`); at least two. Returns (id, key) per member.
pub async fn join_members(env: &Env, processes: usize, secret: &str, what: &str) -> Result<Vec<(String, String)>> {
    let nodes = env.endpoints.len().max(1);
    let mut members = Vec::new();
    for _ in 0..(processes / nodes).max(2) {
        let (id, key) = register(env).await?;
        env.setup
            .with_key(key.clone())
            .join(kungfu_client::pb::JoinRequest { grant_secret: secret.to_string(), ..Default::default() }, None)
            .await
            .map_err(|e| anyhow::anyhow!("joining the {what} thread: {e}"))?;
        members.push((id, key));
    }
    Ok(members)
}

/// Registers an agent through the setup client; returns (id, key).
pub async fn register(env: &Env) -> Result<(String, String)> {
    let r = env.setup.register(None).await?;
    Ok((r.agent, r.agent_key))
}
