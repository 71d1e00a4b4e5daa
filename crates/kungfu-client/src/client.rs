//! The client, its options, and the one retry loop every call goes through.
//!
//! A [`Client`] holds one lazily connected tonic channel per endpoint. A call goes first to the
//! endpoint that answered last (usually any node works: followers forward to the leader). On
//! `NOT_LEADER` it goes next to the leader the answer names (the `leader` metadata), adding that
//! address to the endpoints when it is new; on an indeterminate failure it moves to the next
//! endpoint. Writes keep their idempotency key across every attempt, so a retry has at most the
//! effect of the first attempt (L3).

use crate::error::Error;
use kungfu_types::{Code, Rejection};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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
    /// The waits between attempts.
    pub backoff: Backoff,
    /// How reads are served unless a client says otherwise ([`Client::with_consistency`]).
    pub consistency: Consistency,
}

impl Default for ClientOptions {
    fn default() -> ClientOptions {
        ClientOptions {
            call_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(2),
            max_retries: 12,
            backoff: Backoff::default(),
            consistency: Consistency::Linearizable,
        }
    }
}

/// A new idempotency key: `sdk-` and 128 random bits in the 8-4-4-4-12 hex form of a UUID.
pub fn new_idempotency_key() -> Result<String, Error> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).map_err(|e| Error::NoRandomness(e.to_string()))?;
    let h = hex::encode(b);
    Ok(format!("sdk-{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32]))
}

/// One endpoint: its address as `host:port` (how nodes name a leader) and its channel.
#[derive(Debug, Clone)]
struct Node {
    authority: String,
    channel: Channel,
}

#[derive(Debug)]
struct Inner {
    nodes: Mutex<Vec<Node>>,
    /// The index of the endpoint that answered last: calls start there.
    preferred: Mutex<usize>,
    options: ClientOptions,
    /// Attempts made after a first attempt failed, over the life of the client.
    retries: AtomicU64,
}

/// A Kungfu client, optionally acting as one agent. Cheap to clone; clones share the channels.
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
    key: Option<String>,
    consistency: Consistency,
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
    /// The outcome is unknown: retry with the same key, on the next endpoint.
    Indeterminate(String),
    /// A failure that retrying cannot help and that is not a Kungfu rejection.
    Fatal(String),
}

fn classify(s: &tonic::Status) -> Outcome {
    match kungfu_api::status_rejection(s) {
        Some(r) if r.code == Code::NotLeader => {
            let leader = s.metadata().get("leader").and_then(|v| v.to_str().ok()).map(authority);
            Outcome::Elsewhere(r, leader)
        }
        Some(r) if r.code == Code::RateLimited => Outcome::RateLimited(r),
        Some(r) if !r.definite => Outcome::Indeterminate(format!("{}: {}", r.code.as_str(), r.message)),
        Some(r) if r.code == Code::Unavailable => Outcome::Elsewhere(r, None),
        Some(r) => Outcome::Rejected(r),
        None => {
            use tonic::Code as G;
            let text = format!("{:?}: {}", s.code(), s.message());
            match s.code() {
                G::Unavailable | G::DeadlineExceeded | G::Cancelled | G::Unknown | G::Internal | G::Aborted => {
                    Outcome::Indeterminate(text)
                }
                _ => Outcome::Fatal(text),
            }
        }
    }
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
    Ok(Node { authority: host, channel })
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
                nodes: Mutex::new(nodes),
                preferred: Mutex::new(0),
                options,
                retries: AtomicU64::new(0),
            }),
            key,
            consistency,
        })
    }

    /// The same client (same channels and options) acting as the agent whose key is `key`.
    pub fn with_key(&self, key: impl Into<String>) -> Client {
        Client { inner: self.inner.clone(), key: Some(key.into()), consistency: self.consistency }
    }

    /// The same client without an agent key (for registration).
    pub fn anonymous(&self) -> Client {
        Client { inner: self.inner.clone(), key: None, consistency: self.consistency }
    }

    /// The same client, reading with `consistency`.
    pub fn with_consistency(&self, consistency: Consistency) -> Client {
        Client { inner: self.inner.clone(), key: self.key.clone(), consistency }
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
        self.inner.nodes.lock().map(|n| n.clone()).unwrap_or_else(|p| p.into_inner().clone())
    }

    fn preferred(&self) -> usize {
        self.inner.preferred.lock().map(|p| *p).unwrap_or(0)
    }

    fn set_preferred(&self, i: usize) {
        if let Ok(mut p) = self.inner.preferred.lock() {
            *p = i;
        }
    }

    /// The index of the endpoint at `addr`, adding it when it is new.
    fn index_of(&self, addr: &str) -> Option<usize> {
        let mut nodes = self.inner.nodes.lock().ok()?;
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
        if let Some(k) = &self.key {
            let v: MetadataValue<_> =
                format!("Bearer {k}").parse().map_err(|_| Error::InvalidKey("not a valid header value".into()))?;
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
        let mut target = self.preferred();
        let mut delay = options.backoff.initial;
        // Whether some attempt may have taken effect: then giving up is indeterminate.
        let mut uncertain = false;
        let mut last = String::from("no attempt made");
        let mut last_rejection: Option<Rejection> = None;
        for attempt in 0..=options.max_retries {
            let nodes = self.nodes();
            let count = nodes.len().max(1);
            target %= count;
            let Some(node) = nodes.get(target) else {
                return Err(Error::InvalidEndpoint { endpoint: String::new(), reason: "no endpoints".into() });
            };
            let request = self.request(msg.clone(), call)?;
            let outcome = match tokio::time::timeout(options.call_timeout, rpc(node.channel.clone(), request)).await {
                Ok(Ok(response)) => {
                    self.set_preferred(target);
                    return Ok(response.into_inner());
                }
                Ok(Err(status)) => classify(&status),
                Err(_) => Outcome::Indeterminate(format!(
                    "no answer from {} within {:?}",
                    node.authority, options.call_timeout
                )),
            };
            let wait = match outcome {
                Outcome::Rejected(r) => return Err(Error::Rejected(r)),
                Outcome::Fatal(text) => return Err(Error::Transport(format!("{}: {text}", node.authority))),
                Outcome::Elsewhere(r, leader) => {
                    last = format!("{}: {}: {}", node.authority, r.code.as_str(), r.message);
                    last_rejection = Some(r);
                    match leader.and_then(|l| self.index_of(&l)) {
                        // A named leader other than this node is asked at once.
                        Some(i) if i != target => {
                            target = i;
                            Duration::ZERO
                        }
                        _ => {
                            target += 1;
                            delay
                        }
                    }
                }
                Outcome::RateLimited(r) => {
                    last = format!("{}: {}: {}", node.authority, r.code.as_str(), r.message);
                    let after = r.retry_after.map(|m| Duration::from_micros(m.0)).unwrap_or(delay);
                    last_rejection = Some(r);
                    after.min(options.backoff.max_rate_limit_wait)
                }
                Outcome::Indeterminate(text) => {
                    uncertain = true;
                    last = format!("{}: {text}", node.authority);
                    last_rejection = None;
                    target += 1;
                    delay
                }
            };
            if attempt == options.max_retries {
                break;
            }
            tokio::time::sleep(wait).await;
            self.inner.retries.fetch_add(1, Ordering::Relaxed);
            delay = (delay * 2).min(options.backoff.max);
        }
        match (call, uncertain, last_rejection) {
            (Call::Write(key), true, _) | (Call::Write(key), false, None) => {
                Err(Error::Indeterminate { key: key.to_string(), last })
            }
            (_, _, Some(r)) if !uncertain => Err(Error::Rejected(r)),
            _ => Err(Error::Transport(last)),
        }
    }
}
