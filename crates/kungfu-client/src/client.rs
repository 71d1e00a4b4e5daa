//! The client, its options, and the one retry loop every call goes through.
//!
//! A [`Client`] holds one lazily connected tonic channel per endpoint. A call goes first to the
//! endpoint that answered last (usually any node works: followers forward to the leader). On
//! `NOT_LEADER` it goes next to the leader the answer names (the `leader` metadata), adding that
//! address to the endpoints when it is new; on an indeterminate failure it moves to the next
//! endpoint. Writes keep their idempotency key across every attempt, so a retry has at most the
//! effect of the first attempt (L3).
//!
//! An attempt that reaches no Kungfu API (the connection is refused, none is made within the
//! connect timeout, or the peer answers gRPC but not the Kungfu API, as a raft port does) sent
//! nothing to a node, so it is definite. At an endpoint where no Kungfu node ever answered this
//! client, such failures have a budget of their own ([`ClientOptions::connect_retries`] rounds
//! over the endpoints, a round tried without waiting), so a wrong endpoint fails in a fraction of a
//! second instead of running out every retry; a node that answered before and now refuses is
//! restarting, and is waited for with the full retries.

use crate::error::{Error, Transport, TransportKind};
use kungfu_types::{Code, Rejection};
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, Endpoint};

/// Bounded exponential backoff between attempts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    /// The wait after the first failed attempt.
    pub initial: Duration,
    /// The longest wait between two attempts; each wait doubles up to it.
    pub max: Duration,
    /// The longest wait a `RATE_LIMITED` answer's `retry_after` is honoured for; a longer one is
    /// cut to this.
    pub max_rate_limit_wait: Duration,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff {
            initial: Duration::from_millis(50),
            max: Duration::from_secs(2),
            max_rate_limit_wait: Duration::from_secs(5),
        }
    }
}

/// How reads are served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Consistency {
    /// The leader confirms its leadership with a quorum and answers (the default).
    #[default]
    Linearizable,
    /// Any node answers at once from its own state (`kungfu-consistency: stale`); the answer may
    /// lag behind writes. Never decide on something another agent just wrote from a stale read.
    Stale,
}

/// Deadlines, retries and backoff of a [`Client`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientOptions {
    /// The deadline of each attempt, sent as `grpc-timeout` and enforced locally.
    pub call_timeout: Duration,
    /// How long connecting to an endpoint may take before the attempt fails.
    pub connect_timeout: Duration,
    /// How many times a call is retried after its first attempt.
    pub max_retries: u32,
    /// How many more rounds over the endpoints a call makes while none of them takes it (refused,
    /// no connection in time, not the Kungfu API), within `max_retries`. The endpoints of a round
    /// are tried without waiting, the rounds with the backoff between them. An endpoint where a
    /// Kungfu node answered this client before is not counted: it is restarting, and waited for.
    pub connect_retries: u32,
    /// The waits between attempts.
    pub backoff: Backoff,
    /// How reads are served unless a client says otherwise ([`Client::with_consistency`]).
    pub consistency: Consistency,
    /// Called before each retry, for a caller that shows progress. None (the default): the SDK
    /// reports nothing while it retries.
    pub on_retry: Option<RetryHook>,
}

/// What the retry loop reports before each retry ([`ClientOptions::on_retry`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retrying {
    /// The attempt about to be made; the first attempt is 1.
    pub attempt: u32,
    /// The time since the call's first attempt.
    pub elapsed: Duration,
    /// The wait before the attempt.
    pub wait: Duration,
    /// Why the last attempt failed.
    pub cause: RetryCause,
    /// The last failure, naming its endpoint.
    pub last: String,
}

/// Why an attempt is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryCause {
    /// The node is not the leader, or knows none (`NOT_LEADER`, `UNAVAILABLE`): an election, or
    /// no quorum.
    NoLeader,
    /// The node asked to be asked again later (`RATE_LIMITED`).
    RateLimited,
    /// The attempt failed on the way, in the way the kind names.
    Transport(TransportKind),
    /// The node answered that the outcome is unknown.
    Unknown,
}

/// A callback of the retry loop ([`ClientOptions::on_retry`]). Two hooks are equal when they are
/// the same callback.
#[derive(Clone)]
pub struct RetryHook(Arc<dyn Fn(&Retrying) + Send + Sync>);

impl RetryHook {
    /// A hook calling `f` before each retry. It runs on the calling task: keep it short.
    pub fn new(f: impl Fn(&Retrying) + Send + Sync + 'static) -> RetryHook {
        RetryHook(Arc::new(f))
    }
}

impl fmt::Debug for RetryHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RetryHook")
    }
}

impl PartialEq for RetryHook {
    fn eq(&self, other: &RetryHook) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for RetryHook {}

impl Default for ClientOptions {
    fn default() -> ClientOptions {
        ClientOptions {
            call_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(2),
            // With the default backoff, 12 retries span about 15 s: long enough for an election.
            max_retries: 12,
            connect_retries: 2,
            backoff: Backoff::default(),
            consistency: Consistency::Linearizable,
            on_retry: None,
        }
    }
}

/// A new idempotency key: `sdk-` and 128 random bits in the 8-4-4-4-12 hex form of a UUID
/// ([`kungfu_api::new_idempotency_key`]).
pub fn new_idempotency_key() -> Result<String, Error> {
    kungfu_api::new_idempotency_key().map_err(|e| Error::NoRandomness(e.to_string()))
}

/// One endpoint: its address as `host:port` (how nodes name a leader) and its channel.
#[derive(Debug, Clone)]
struct Node {
    authority: String,
    channel: Channel,
    /// Whether a Kungfu node ever answered here, over the life of the client (shared by clones).
    /// One that did and now refuses is restarting or failing over: it gets the full retries, not
    /// the short budget of an address that never answered.
    reached: Arc<AtomicBool>,
}

#[derive(Debug)]
struct Inner {
    /// Read by every attempt, written only when a new leader address is learned.
    nodes: std::sync::RwLock<Vec<Node>>,
    /// The index of the endpoint that answered last: calls start there.
    preferred: std::sync::atomic::AtomicUsize,
    options: ClientOptions,
    /// Attempts made after a first attempt failed, over the life of the client.
    retries: AtomicU64,
}

/// A Kungfu client, optionally acting as one agent. Cheap to clone; clones share the channels.
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
    key: Option<String>,
    /// `Bearer <key>` as a header value, made once per key rather than once per call; None
    /// without a key, an error for a key that is no header value (reported by each call).
    authorization: Option<Result<MetadataValue<tonic::metadata::Ascii>, ()>>,
    consistency: Consistency,
}

fn authorization(key: Option<&str>) -> Option<Result<MetadataValue<tonic::metadata::Ascii>, ()>> {
    key.map(|k| format!("Bearer {k}").parse().map_err(|_| ()))
}

/// What kind of call an attempt belongs to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Call<'a> {
    /// A write under this idempotency key.
    Write(&'a str),
    /// A read, which has no effect.
    Read,
}

/// How one failed attempt is handled.
enum Outcome {
    /// A definite rejection: returned at once.
    Rejected(Rejection),
    /// Nothing happened, and another node should be asked: `NOT_LEADER` (with the leader's
    /// address when known) or a definite `UNAVAILABLE`.
    Elsewhere(Rejection, Option<String>),
    /// Nothing happened, and the same node asks to be asked again later.
    RateLimited(Rejection),
    /// The attempt reached no Kungfu API, so nothing was sent to a node: ask the next endpoint.
    Unreached(TransportKind, String),
    /// The outcome is unknown: retry with the same key, on the next endpoint.
    Indeterminate(RetryCause, String),
    /// A failure that retrying cannot help and that is not a Kungfu rejection.
    Fatal(String),
}

/// How one failed attempt at `addr` is handled, with the messages a person reads.
fn classify(s: &tonic::Status, addr: &str, options: &ClientOptions) -> Outcome {
    match kungfu_api::status_rejection(s) {
        Some(r) if r.code == Code::NotLeader => {
            let leader = s.metadata().get("leader").and_then(|v| v.to_str().ok()).map(authority);
            Outcome::Elsewhere(r, leader)
        }
        Some(r) if r.code == Code::RateLimited => Outcome::RateLimited(r),
        Some(r) if !r.definite => {
            Outcome::Indeterminate(RetryCause::Unknown, format!("{addr}: {}: {}", r.code.as_str(), r.message))
        }
        Some(r) if r.code == Code::Unavailable => Outcome::Elsewhere(r, None),
        Some(r) => Outcome::Rejected(r),
        None => {
            if let Some(outcome) = unreached(s, addr, options) {
                return outcome;
            }
            use tonic::Code as G;
            let text = format!("{addr}: {:?}: {}", s.code(), s.message());
            match s.code() {
                G::DeadlineExceeded | G::Cancelled if caused_by::<tonic::TimeoutExpired>(s).is_some() => {
                    Outcome::Indeterminate(RetryCause::Transport(TransportKind::NoAnswer), no_answer(addr, options))
                }
                G::Unavailable | G::DeadlineExceeded | G::Cancelled | G::Unknown | G::Internal | G::Aborted => {
                    Outcome::Indeterminate(RetryCause::Transport(TransportKind::Other), text)
                }
                _ => Outcome::Fatal(text),
            }
        }
    }
}

/// The attempt reached no Kungfu API: no connection was made (refused, timed out, or failed
/// otherwise, before anything was sent), or the peer answers gRPC `UNIMPLEMENTED` with no message
/// or an unknown service, as a raft port (or any gRPC server without the Kungfu services) does.
/// The Kungfu API serves every method the SDK calls, so that answer never comes from it.
fn unreached(s: &tonic::Status, addr: &str, options: &ClientOptions) -> Option<Outcome> {
    // A node's raft port names the node and its API address (issue #16).
    if s.code() == tonic::Code::Unimplemented && s.message().starts_with(kungfu_types::RAFT_PORT_ANSWER) {
        let api = s.message().split_once("the public API is at ").map(|(_, api)| api.trim());
        let next = match api {
            Some(api) => format!("use the API port: {api}"),
            None => "point the client at the node's api_listen address".to_string(),
        };
        return Some(Outcome::Unreached(TransportKind::NotKungfuApi, format!("{addr} is a raft port; {next}")));
    }
    if s.code() == tonic::Code::Unimplemented && (s.message().is_empty() || s.message().starts_with("unknown service"))
    {
        return Some(Outcome::Unreached(
            TransportKind::NotKungfuApi,
            format!(
                "{addr} answers gRPC but not the Kungfu API: is it a raft port? point the client at the node's \
                 api_listen address"
            ),
        ));
    }
    let connect = caused_by::<tonic::ConnectError>(s)?;
    let io = caused_by::<std::io::Error>(s).map(|e| e.kind());
    Some(match io {
        Some(std::io::ErrorKind::ConnectionRefused) => Outcome::Unreached(
            TransportKind::NothingListening,
            format!("nothing listening at {addr} (connection refused): is kungfud running there? check the endpoint"),
        ),
        Some(std::io::ErrorKind::TimedOut) => Outcome::Unreached(
            TransportKind::NoAnswer,
            format!(
                "{addr} did not answer within {} (no connection): is the address right and the node up?",
                seconds(options.connect_timeout)
            ),
        ),
        _ => Outcome::Unreached(TransportKind::Other, format!("cannot connect to {addr}: {}", chain(connect))),
    })
}

/// The first error of type `E` in the status's source chain.
fn caused_by<E: std::error::Error + 'static>(s: &tonic::Status) -> Option<&E> {
    let mut source = std::error::Error::source(s);
    while let Some(e) = source {
        if let Some(found) = e.downcast_ref::<E>() {
            return Some(found);
        }
        source = e.source();
    }
    None
}

/// An error and its causes, as one line (`tcp connect error: dns error: …`).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        source = cause.source();
    }
    text
}

/// `addr did not answer within 10 s`.
fn no_answer(addr: &str, options: &ClientOptions) -> String {
    format!("{addr} did not answer within {}", seconds(options.call_timeout))
}

/// A duration in seconds for people: `2 s`, `0.25 s`.
fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 { format!("{s:.0} s") } else { format!("{} s", (s * 1000.0).round() / 1000.0) }
}

/// `host:port` from an endpoint or a leader address, whatever its scheme.
fn authority(addr: &str) -> String {
    let a = addr.trim();
    let a = a.strip_prefix("http://").or_else(|| a.strip_prefix("https://")).unwrap_or(a);
    a.trim_end_matches('/').to_string()
}

fn channel(addr: &str, options: &ClientOptions) -> Result<Node, Error> {
    let invalid = |reason: String| Error::InvalidEndpoint { endpoint: addr.to_string(), reason };
    let host = authority(addr);
    if host.is_empty() {
        return Err(invalid("empty".into()));
    }
    let uri = if addr.trim().starts_with("https://") { format!("https://{host}") } else { format!("http://{host}") };
    let endpoint = Endpoint::from_shared(uri).map_err(|e| invalid(e.to_string()))?;
    let channel = endpoint.connect_timeout(options.connect_timeout).timeout(options.call_timeout).connect_lazy();
    Ok(Node { authority: host, channel, reached: Arc::new(AtomicBool::new(false)) })
}

impl Client {
    /// A client of the nodes at `endpoints` (`host:port` or `http://host:port`), acting as the agent
    /// whose bearer key is `key` (None for registration only). Channels connect lazily, on first use,
    /// so this succeeds even while nodes are down.
    pub async fn connect(endpoints: Vec<String>, key: Option<String>, options: ClientOptions) -> Result<Client, Error> {
        if endpoints.is_empty() {
            return Err(Error::InvalidEndpoint { endpoint: String::new(), reason: "no endpoints given".into() });
        }
        let nodes = endpoints.iter().map(|e| channel(e, &options)).collect::<Result<Vec<_>, _>>()?;
        let consistency = options.consistency;
        Ok(Client {
            inner: Arc::new(Inner {
                nodes: std::sync::RwLock::new(nodes),
                preferred: std::sync::atomic::AtomicUsize::new(0),
                options,
                retries: AtomicU64::new(0),
            }),
            authorization: authorization(key.as_deref()),
            key,
            consistency,
        })
    }

    /// The same client (same channels and options) acting as the agent whose key is `key`.
    pub fn with_key(&self, key: impl Into<String>) -> Client {
        let key = key.into();
        let authorization = authorization(Some(&key));
        Client { inner: self.inner.clone(), key: Some(key), authorization, consistency: self.consistency }
    }

    /// The same client without an agent key (for registration).
    pub fn anonymous(&self) -> Client {
        Client { inner: self.inner.clone(), key: None, authorization: None, consistency: self.consistency }
    }

    /// The same client, reading with `consistency`.
    pub fn with_consistency(&self, consistency: Consistency) -> Client {
        Client {
            inner: self.inner.clone(),
            key: self.key.clone(),
            authorization: self.authorization.clone(),
            consistency,
        }
    }

    /// The same client, reading stale (`kungfu-consistency: stale`): any node answers from its own
    /// state at once.
    pub fn stale(&self) -> Client {
        self.with_consistency(Consistency::Stale)
    }

    /// The agent key this client sends, if any.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// How this client's reads are served.
    pub fn consistency(&self) -> Consistency {
        self.consistency
    }

    /// The options this client was built with.
    pub fn options(&self) -> &ClientOptions {
        &self.inner.options
    }

    /// How many attempts this client (and its clones) made after a first attempt failed: each is a
    /// retry of the same request with the same idempotency key.
    pub fn retries(&self) -> u64 {
        self.inner.retries.load(Ordering::Relaxed)
    }

    /// The endpoints known now, as `host:port`: the ones given, then leaders learned from answers.
    pub fn endpoints(&self) -> Vec<String> {
        self.nodes().into_iter().map(|n| n.authority).collect()
    }

    fn nodes(&self) -> Vec<Node> {
        self.inner.nodes.read().map(|n| n.clone()).unwrap_or_else(|p| p.into_inner().clone())
    }

    /// The endpoint at `i` (modulo their number) and how many there are: one attempt's target,
    /// without copying every endpoint (each attempt of every writer asks).
    fn node_at(&self, i: usize) -> (usize, Option<Node>) {
        let nodes = self.inner.nodes.read().unwrap_or_else(|p| p.into_inner());
        let count = nodes.len().max(1);
        (count, nodes.get(i % count).cloned())
    }

    fn preferred(&self) -> usize {
        self.inner.preferred.load(Ordering::Relaxed)
    }

    fn set_preferred(&self, i: usize) {
        self.inner.preferred.store(i, Ordering::Relaxed);
    }

    /// The index of the endpoint at `addr`, adding it when it is new.
    fn index_of(&self, addr: &str) -> Option<usize> {
        let mut nodes = self.inner.nodes.write().ok()?;
        if let Some(i) = nodes.iter().position(|n| n.authority == addr) {
            return Some(i);
        }
        let node = channel(addr, &self.inner.options).ok()?;
        nodes.push(node);
        Some(nodes.len() - 1)
    }

    fn request<T>(&self, msg: T, call: Call<'_>) -> Result<tonic::Request<T>, Error> {
        let mut r = tonic::Request::new(msg);
        r.set_timeout(self.inner.options.call_timeout);
        if let Some(v) = &self.authorization {
            let v = v.clone().map_err(|()| Error::InvalidKey("not a valid header value".into()))?;
            r.metadata_mut().insert("authorization", v);
        }
        if matches!(call, Call::Read) && self.consistency == Consistency::Stale {
            r.metadata_mut().insert("kungfu-consistency", MetadataValue::from_static("stale"));
        }
        Ok(r)
    }

    /// Sends `msg` with `rpc` until it succeeds, is definitely rejected, or the retries run out.
    /// Every attempt sends the same message, so a write keeps its idempotency key.
    pub(crate) async fn invoke<Req, Resp, F, Fut>(&self, call: Call<'_>, msg: Req, rpc: F) -> Result<Resp, Error>
    where
        Req: Clone,
        F: Fn(Channel, tonic::Request<Req>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
    {
        let options = &self.inner.options;
        let started = tokio::time::Instant::now();
        let mut target = self.preferred();
        let mut delay = options.backoff.initial;
        // Whether some attempt may have taken effect: then giving up is indeterminate.
        let mut uncertain = false;
        let mut last = String::from("no attempt made");
        let mut last_kind = TransportKind::Other;
        let mut last_rejection: Option<Rejection> = None;
        // What this call saw of each endpoint: true when a Kungfu node answered there.
        let mut answered: BTreeMap<String, bool> = BTreeMap::new();
        // The leader the last `NOT_LEADER` named, if any.
        let mut named_leader: Option<String> = None;
        // Attempts in a row that reached no Kungfu API, and why each endpoint was not reached.
        let mut unreached_streak = 0usize;
        let mut unreached_at: BTreeMap<String, (TransportKind, String)> = BTreeMap::new();
        let mut gave_up = false;
        for attempt in 0..=options.max_retries {
            let (count, node) = self.node_at(target);
            target %= count;
            let Some(node) = node else {
                return Err(Error::InvalidEndpoint { endpoint: String::new(), reason: "no endpoints".into() });
            };
            let request = self.request(msg.clone(), call)?;
            let outcome = match tokio::time::timeout(options.call_timeout, rpc(node.channel.clone(), request)).await {
                Ok(Ok(response)) => {
                    node.reached.store(true, Ordering::Relaxed);
                    self.set_preferred(target);
                    return Ok(response.into_inner());
                }
                Ok(Err(status)) => classify(&status, &node.authority, options),
                Err(_) => Outcome::Indeterminate(
                    RetryCause::Transport(TransportKind::NoAnswer),
                    no_answer(&node.authority, options),
                ),
            };
            // Whether a Kungfu node answered (a timeout or a broken connection is no answer).
            let node_answered = matches!(
                outcome,
                Outcome::Elsewhere(..) | Outcome::RateLimited(_) | Outcome::Indeterminate(RetryCause::Unknown, _)
            );
            *answered.entry(node.authority.clone()).or_insert(false) |= node_answered;
            if node_answered {
                node.reached.store(true, Ordering::Relaxed);
            }
            if !matches!(outcome, Outcome::Unreached(..)) {
                unreached_streak = 0;
            }
            let (wait, cause) = match outcome {
                Outcome::Rejected(r) => return Err(Error::Rejected(r)),
                Outcome::Fatal(text) => return Err(Error::Transport(text.into())),
                Outcome::Elsewhere(r, leader) => {
                    last = format!("{}: {}: {}", node.authority, r.code.as_str(), r.message);
                    last_rejection = Some(r);
                    named_leader = leader.clone();
                    let wait = match leader.and_then(|l| self.index_of(&l)) {
                        // A named leader other than this node is asked at once.
                        Some(i) if i != target => {
                            target = i;
                            Duration::ZERO
                        }
                        _ => {
                            target += 1;
                            delay
                        }
                    };
                    (wait, RetryCause::NoLeader)
                }
                Outcome::RateLimited(r) => {
                    last = format!("{}: {}: {}", node.authority, r.code.as_str(), r.message);
                    let after = r.retry_after.map(|m| Duration::from_micros(m.0)).unwrap_or(delay);
                    last_rejection = Some(r);
                    (after.min(options.backoff.max_rate_limit_wait), RetryCause::RateLimited)
                }
                Outcome::Unreached(kind, text) => {
                    // Nothing was sent: the last server answer and the uncertainty stand.
                    unreached_at.insert(node.authority.clone(), (kind, text.clone()));
                    last = text;
                    last_kind = kind;
                    target += 1;
                    if node.reached.load(Ordering::Relaxed) {
                        // A node this client talked to: it is restarting, wait for it as before.
                        unreached_streak = 0;
                        (delay, RetryCause::Transport(kind))
                    } else {
                        unreached_streak += 1;
                        if unreached_streak >= count * (options.connect_retries as usize + 1) {
                            gave_up = true;
                            break;
                        }
                        // The other endpoints of a round are asked at once; a round that reached
                        // nothing waits before the next.
                        let wait = if unreached_streak.is_multiple_of(count) { delay } else { Duration::ZERO };
                        (wait, RetryCause::Transport(kind))
                    }
                }
                Outcome::Indeterminate(cause, text) => {
                    uncertain = true;
                    last = text;
                    last_kind = match cause {
                        RetryCause::Transport(kind) => kind,
                        _ => TransportKind::Other,
                    };
                    last_rejection = None;
                    target += 1;
                    (delay, cause)
                }
            };
            if attempt == options.max_retries {
                break;
            }
            if let Some(hook) = &options.on_retry {
                let elapsed = started.elapsed();
                (hook.0)(&Retrying { attempt: attempt + 2, elapsed, wait, cause, last: last.clone() });
            }
            tokio::time::sleep(wait).await;
            self.inner.retries.fetch_add(1, Ordering::Relaxed);
            if !wait.is_zero() {
                delay = (delay * 2).min(options.backoff.max);
            }
        }
        // Nodes answered that they could not serve (no leader, or no quorum behind it): say how
        // many of the endpoints answered at all, rather than only the last failure.
        let total = self.nodes().len();
        let no_leader =
            !gave_up && last_rejection.as_ref().is_some_and(|r| matches!(r.code, Code::NotLeader | Code::Unavailable));
        if no_leader {
            let reachable = answered.values().filter(|a| **a).count();
            let leader = match &named_leader {
                Some(l) => format!("leader named: {l}"),
                None => "leader unknown".to_string(),
            };
            last =
                format!("no quorum or no leader: {reachable} of {total} endpoints reachable, {leader}; last: {last}");
        }
        if gave_up && unreached_at.len() > 1 {
            let each: Vec<&str> = unreached_at.values().map(|(_, text)| text.as_str()).collect();
            last = format!("no endpoint reachable: {}", each.join("; "));
        }
        match (call, uncertain, last_rejection) {
            (Call::Write(key), true, _) => Err(Error::Indeterminate { key: key.to_string(), last }),
            (_, false, Some(mut r)) if !gave_up => {
                if no_leader {
                    r.message = last;
                }
                Err(Error::Rejected(r))
            }
            _ => Err(Error::Transport(Transport { kind: last_kind, message: last })),
        }
    }
}

#[cfg(test)]
mod tests {
    //! The retry loop against scripted answers: the `rpc` closure answers by attempt number, so
    //! no socket and no node is needed.
    use super::*;
    use std::sync::atomic::AtomicU32;

    /// Options with one-millisecond backoff, so a test waits no real time worth counting.
    fn quick() -> ClientOptions {
        let tick = Duration::from_millis(1);
        ClientOptions {
            backoff: Backoff { initial: tick, max: tick, max_rate_limit_wait: tick },
            ..ClientOptions::default()
        }
    }

    fn refused() -> tonic::Status {
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        tonic::Status::from_error(Box::new(tonic::ConnectError(Box::new(io))))
    }

    fn no_leader() -> tonic::Status {
        let mut r = Rejection::new(Code::Unavailable, "knows no leader yet; retry shortly");
        r.definite = true;
        kungfu_api::rejection_status(&r)
    }

    /// Three endpoints tried in turn: the first refuses the connection, the other two answer that
    /// they know no leader.
    async fn one_dead_two_leaderless(call: Call<'_>) -> (Client, Error) {
        let endpoints = vec!["127.0.0.1:1".to_string(), "127.0.0.1:2".to_string(), "127.0.0.1:3".to_string()];
        let client = Client::connect(endpoints, None, quick()).await.expect("valid endpoints");
        let attempts = AtomicU32::new(0);
        let err = client
            .invoke(call, (), |_channel, _request: tonic::Request<()>| {
                let n = attempts.fetch_add(1, Ordering::Relaxed);
                async move {
                    let status = if n.is_multiple_of(3) { refused() } else { no_leader() };
                    Err::<tonic::Response<()>, _>(status)
                }
            })
            .await
            .expect_err("no attempt succeeds");
        (client, err)
    }

    #[tokio::test]
    async fn without_a_leader_the_error_says_no_quorum_and_how_many_endpoints_answered() {
        let (client, err) = one_dead_two_leaderless(Call::Read).await;
        let Error::Rejected(r) = err else { panic!("expected the last rejection, got {err:?}") };
        assert_eq!(r.code, Code::Unavailable);
        assert!(
            r.message.starts_with("no quorum or no leader: 2 of 3 endpoints reachable, leader unknown; last: "),
            "{}",
            r.message
        );
        // A dead node among answering ones does not cut the retries short: an election may end.
        assert_eq!(client.retries(), u64::from(quick().max_retries));
    }

    #[tokio::test]
    async fn a_write_that_only_met_refusals_and_definite_answers_is_not_indeterminate() {
        let (_, err) = one_dead_two_leaderless(Call::Write("k-1")).await;
        match err {
            Error::Rejected(r) => assert!(r.message.starts_with("no quorum or no leader: 2 of 3"), "{}", r.message),
            other => panic!("a refused connection sent nothing, so the write had no effect: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_node_that_answered_before_and_now_refuses_is_waited_for_with_every_retry() {
        let client = Client::connect(vec!["127.0.0.1:1".to_string()], None, quick()).await.expect("valid endpoint");
        let attempts = AtomicU32::new(0);
        let rpc = |_channel, _request: tonic::Request<()>| {
            let n = attempts.fetch_add(1, Ordering::Relaxed);
            async move { if n == 0 { Ok(tonic::Response::new(())) } else { Err(refused()) } }
        };
        client.invoke(Call::Read, (), &rpc).await.expect("the first call is answered");
        let err = client.invoke(Call::Read, (), &rpc).await.expect_err("then the node is down");
        let Error::Transport(t) = err else { panic!("expected a transport error, got {err:?}") };
        assert_eq!(t.kind, TransportKind::NothingListening);
        // A restart, not a wrong address: the whole budget, not the short one of connect_retries.
        assert_eq!(client.retries(), u64::from(quick().max_retries));
    }

    #[test]
    fn seconds_read_as_people_write_them() {
        assert_eq!(seconds(Duration::from_secs(10)), "10 s");
        assert_eq!(seconds(Duration::from_millis(250)), "0.25 s");
    }
}
