//! `kungfu bench write`: writers posting entries as fast as the cluster answers, through the public
//! API, over a fixed number of client connections.
//!
//! Each writer is one agent with one post in flight at a time: content of `--entry-bytes` bytes
//! (a new Memory version and an entry, with their facts, indexes and receipt), asking nobody to
//! respond. With `--shared-thread` every writer posts to one thread (all its writes are serialized
//! by that thread's actor and conflict on its state); otherwise each posts to a thread of its own.
//! Only successes count towards operations and latency; each failed write is counted by its code.
//! A write's latency is from sending it to its answer, on the client: what an agent waits. The
//! measured clients do not retry (a retry would hide a failure inside a long latency).

use super::cluster::Cluster;
use super::load::{Figures, Op, drive};
use super::{bounded, progress};
use crate::args::BenchCluster;
use kungfu_cli::error::CliError;
use kungfu_client::{Client, ClientOptions, Post, pb};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;

/// The most members a thread may have (`limits.max_members_per_thread`, 256 by default).
pub const MAX_SHARED_WRITERS: u64 = 256;

/// How long one measured write may take before it counts as failed.
pub(super) const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The parameters of a run.
#[derive(Debug, Clone)]
pub struct Params {
    pub writers: u64,
    pub connections: u64,
    pub seconds: u64,
    pub shared_thread: bool,
    pub entry_bytes: u64,
}

/// The figures of a run.
#[derive(Debug)]
pub struct Report {
    params: Params,
    nodes: u16,
    leader: u16,
    figures: Figures,
}

impl Report {
    pub fn to_json(&self) -> Value {
        let p = &self.params;
        let mut v = json!({
            "params": {
                "nodes": self.nodes,
                "writers": p.writers,
                "connections": p.connections,
                "seconds": p.seconds,
                "shared_thread": p.shared_thread,
                "entry_bytes": p.entry_bytes,
            },
            "leader": self.leader,
        });
        if let (Value::Object(map), Value::Object(figures)) = (&mut v, self.figures.to_json()) {
            map.extend(figures);
        }
        v
    }

    pub fn rows(&self) -> Vec<(&'static str, String)> {
        self.figures.rows()
    }
}

/// Registers an agent; returns its key and a client acting as it.
pub(super) async fn register(setup: Client) -> Result<(String, Client), CliError> {
    let r = setup.register(None).await?;
    Ok((r.agent_key, r.client))
}

/// Creates a thread as `creator`; with `grant`, also a speaker grant, whose secret is returned.
pub(super) async fn create_thread(creator: &Client, grant: bool) -> Result<(String, String), CliError> {
    let req = pb::CreateThreadRequest {
        subject: kungfu_client::text("bench write"),
        grant: grant.then_some(pb::GrantSpec { role: pb::Role::Speaker as i32 }),
        ..Default::default()
    };
    let w = creator.create_thread(req, None).await?;
    match w.value.receipt.as_ref().and_then(|r| r.result.as_ref()) {
        Some(pb::receipt::Result::ThreadCreated(t)) => Ok((t.thread.clone(), w.value.grant_secret.clone())),
        other => Err(CliError::other(format!("creating a thread answered {other:?}"))),
    }
}

/// One writer: posts `body` to `thread`, asking nobody to respond.
#[derive(Debug)]
pub(super) struct Poster {
    pub client: Client,
    pub thread: String,
    pub body: Vec<u8>,
}

impl Op for Poster {
    async fn call(&mut self) -> Result<(), String> {
        let post = Post::content(&self.thread, self.body.clone()).ask(Vec::<String>::new());
        self.client.post(post, None).await.map(|_| ()).map_err(|e| CliError::from(e).code)
    }
}

/// A thread of each writer's own (`writers` as [`register`] returned them).
pub(super) async fn own_threads(writers: &[(String, Client)]) -> Result<Vec<String>, CliError> {
    let clients: Vec<Client> = writers.iter().map(|(_, c)| c.clone()).collect();
    let n = clients.len() as u64;
    bounded(n, 32, |i| {
        let client = clients[i].clone();
        async move { Ok::<String, CliError>(create_thread(&client, false).await?.0) }
    })
    .await
}

/// One thread that the first writer creates and every other joins with a speaker grant.
pub(super) async fn shared_thread(writers: &[(String, Client)]) -> Result<String, CliError> {
    let first = writers.first().ok_or_else(|| CliError::other("a shared thread needs a writer"))?;
    let (thread, secret) = create_thread(&first.1, true).await?;
    let clients: Vec<Client> = writers.iter().skip(1).map(|(_, c)| c.clone()).collect();
    bounded(clients.len() as u64, 32, |i| {
        let client = clients[i].clone();
        let secret = secret.clone();
        async move {
            client.join(pb::JoinRequest { grant_secret: secret, ..Default::default() }, None).await?;
            Ok::<(), CliError>(())
        }
    })
    .await?;
    Ok(thread)
}

/// `n` client connections for measured calls, starting at `endpoints[0]`: no retries, a
/// deadline of [`CALL_TIMEOUT`].
pub(super) async fn measured_connections(endpoints: &[String], n: u64) -> Result<Vec<Client>, CliError> {
    let options = ClientOptions { call_timeout: CALL_TIMEOUT, max_retries: 0, ..ClientOptions::default() };
    let mut connections = Vec::new();
    for _ in 0..n {
        connections.push(Client::connect(endpoints.to_vec(), None, options.clone()).await?);
    }
    Ok(connections)
}

/// Runs the benchmark on a fresh cluster.
pub async fn run(opts: &BenchCluster, binary: PathBuf, p: Params) -> Result<Report, CliError> {
    let (cluster, leader) = Cluster::launch(opts, binary).await?;
    let endpoints = cluster.endpoints_from(leader);

    // Setup goes over its own connection, with the SDK's retries; it is not measured.
    let setup = Client::connect(endpoints.clone(), None, ClientOptions::default()).await?;
    progress(format!("registering {} writer(s)", p.writers));
    let writers = bounded(p.writers, 32, |_| register(setup.clone())).await?;
    let threads: Vec<String> = if p.shared_thread {
        vec![shared_thread(&writers).await?; writers.len()]
    } else {
        own_threads(&writers).await?
    };

    // The measured writers share `connections` connections and never retry.
    let connections = measured_connections(&endpoints, p.connections).await?;
    let body = vec![b'x'; usize::try_from(p.entry_bytes).unwrap_or(1024)];
    progress(format!(
        "{} writer(s) posting {}-byte entries to {} for {} s over {} connection(s)",
        p.writers,
        p.entry_bytes,
        if p.shared_thread { "one shared thread" } else { "their own threads" },
        p.seconds,
        p.connections
    ));
    let posters: Vec<Poster> = writers
        .iter()
        .zip(threads)
        .enumerate()
        .map(|(i, ((key, _), thread))| Poster {
            client: connections[i % connections.len()].with_key(key.clone()),
            thread,
            body: body.clone(),
        })
        .collect();
    let figures = drive(posters, Duration::ZERO, Duration::from_secs(p.seconds)).await?;
    // The cluster is dropped here: killed and removed.
    drop(cluster);
    Ok(Report { params: p, nodes: opts.nodes, leader, figures })
}
