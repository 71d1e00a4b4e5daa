//! Signing and sending one wake delivery, as the Standard Webhooks specification describes it: a JSON POST carrying
//! `webhook-id`, `webhook-timestamp` and `webhook-signature` (HMAC-SHA256 over "{id}.{timestamp}.{body}").
//!
//! Every delivery re-checks its URL against the policy, and every name is resolved here, by the client's own
//! resolver, which refuses non-public answers: the connection goes to exactly the addresses that were checked, so a
//! name that changes its answer between a check and a connect (DNS rebinding) cannot slip through.

use std::error::Error as _;
use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use hmac::{Hmac, Mac};
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use sha2::Sha256;

use super::policy::{WakePolicy, check_url, forbidden_address};

/// The first retry's delay ceiling; each later retry doubles it, up to [`CAP`].
pub const BASE: Duration = Duration::from_secs(1);
/// The longest delay between two attempts.
pub const CAP: Duration = Duration::from_secs(300);
/// The most one attempt may take, from resolving the name to the response's status line.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// The most getting a connection may take (resolving, TCP, TLS), within [`TIMEOUT`].
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

const USER_AGENT: &str = concat!("kungfu-wake/", env!("CARGO_PKG_VERSION"));
const SECRET_PREFIX: &str = "whsec_";

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The HTTP/1.1 client under a sender: hyper's pooled client over rustls over a TCP connector whose resolver is
/// [`CheckedResolver`], with one deadline over the whole connect.
///
/// hyper directly rather than reqwest: reqwest's TLS without aws-lc-rs is its `rustls-no-provider` feature, and that
/// feature, unified across the workspace, makes every default `reqwest::Client` panic for want of a process-wide
/// provider (the MCP door's tests build one through rmcp). hyper also follows no redirects and uses no proxy, which
/// a webhook sender must not do anyway: both would reach addresses that were never checked.
type HttpClient = Client<ConnectTimeout<HttpsConnector<HttpConnector<CheckedResolver>>>, Full<Bytes>>;

/// Sends deliveries under one policy. Cheap to clone: clones share one HTTP client, and so its connection pool.
#[derive(Clone, Debug)]
pub struct Sender {
    policy: Arc<WakePolicy>,
    client: HttpClient,
    timeout: Duration,
    connect_timeout: Duration,
}

/// One attempt at delivering one event.
pub struct Delivery<'a> {
    pub url: &'a str,
    /// The event's id: the same on every attempt, so the receiver can drop duplicates. It must contain no '.', the
    /// separator of the signed content.
    pub id: &'a str,
    /// When this attempt was made, in unix seconds; receivers refuse stale ones (replay protection).
    pub timestamp: i64,
    pub body: &'a [u8],
    pub secret: &'a [u8],
}

impl fmt::Debug for Delivery<'_> {
    // The secret never goes into logs; the body is the receiver's business.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("url", &self.url)
            .field("id", &self.id)
            .field("timestamp", &self.timestamp)
            .field("body_bytes", &self.body.len())
            .finish_non_exhaustive()
    }
}

/// What one attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The receiver answered 2xx.
    Delivered { status: u16 },
    /// Anything else, with a one-line reason fit for the user to read.
    Failed { error: String },
}

impl Sender {
    /// Builds the one HTTP client the sender and its clones use; fails only if TLS cannot be set up.
    pub fn new(policy: Arc<WakePolicy>) -> Result<Sender, String> {
        Sender::with_timeouts(policy, TIMEOUT, CONNECT_TIMEOUT)
    }

    fn with_timeouts(policy: Arc<WakePolicy>, timeout: Duration, connect_timeout: Duration) -> Result<Sender, String> {
        let mut tcp = HttpConnector::new_with_resolver(CheckedResolver { policy: Arc::clone(&policy) });
        // https URLs pass through to the TLS layer; check_url has already limited the schemes.
        tcp.enforce_http(false);
        tcp.set_nodelay(true);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_config()?)
            .https_or_http()
            .enable_http1()
            .wrap_connector(tcp);
        let client = Client::builder(TokioExecutor::new())
            // Idle pooled connections expire on this timer (hyper's default: after 90 s).
            .pool_timer(TokioTimer::new())
            .build(ConnectTimeout { inner: https, limit: connect_timeout });
        Ok(Sender { policy, client, timeout, connect_timeout })
    }

    /// One attempt: re-checks the URL with check_url, resolves the host, checks every resolved address with
    /// forbidden_address (unless allow_private), and connects only to checked addresses. Any 2xx is Delivered;
    /// any other status, a timeout, a refused connection or a refused address is Failed with a one-line error.
    pub async fn send(&self, d: &Delivery<'_>) -> Outcome {
        let outcome = self.attempt(d).await;
        match &outcome {
            Outcome::Delivered { status } => tracing::debug!(id = d.id, status, "wake delivered"),
            Outcome::Failed { error } => tracing::debug!(id = d.id, error = %error, "wake delivery failed"),
        }
        outcome
    }

    async fn attempt(&self, d: &Delivery<'_>) -> Outcome {
        let url = match check_url(&self.policy, d.url) {
            Ok(url) => url,
            Err(why) => return failed(format!("refused: {why}")),
        };
        let request = match request(&url, d) {
            Ok(request) => request,
            Err(e) => return failed(format!("invalid request: {e}")),
        };
        match tokio::time::timeout(self.timeout, self.client.request(request)).await {
            // The response is dropped unread: only its status counts, and a receiver's body could be anything.
            // hyper follows no redirects, so a 3xx arrives here as it is.
            Ok(Ok(response)) => classify(response.status().as_u16()),
            Ok(Err(e)) => failed(self.describe(&e)),
            Err(_) => failed(format!("timed out after {}", seconds(self.timeout))),
        }
    }

    fn describe(&self, e: &hyper_util::client::legacy::Error) -> String {
        // A refusal by the resolver is the one thing the user must act on, wherever it sits in the chain.
        let mut cause = e.source();
        while let Some(c) = cause {
            if let Some(refused) = c.downcast_ref::<Refused>() {
                return format!("refused: {refused}");
            }
            if c.is::<ConnectTimedOut>() {
                return format!("connect timed out after {}", seconds(self.connect_timeout));
            }
            cause = c.source();
        }
        let what = if e.is_connect() { "cannot connect" } else { "request failed" };
        format!("{what}: {}", chain(e))
    }
}

/// The request of one attempt: a JSON POST with the Standard Webhooks headers. hyper adds `host` and
/// `content-length`.
fn request(url: &url::Url, d: &Delivery<'_>) -> Result<http::Request<Full<Bytes>>, String> {
    let uri: http::Uri = url.as_str().parse().map_err(|e| format!("{e}"))?;
    http::Request::post(uri)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::USER_AGENT, USER_AGENT)
        .header("webhook-id", d.id)
        .header("webhook-timestamp", d.timestamp.to_string())
        .header("webhook-signature", sign(d.secret, d.id, d.timestamp, d.body))
        .body(Full::new(Bytes::copy_from_slice(d.body)))
        .map_err(|e| format!("{e}"))
}

fn classify(status: u16) -> Outcome {
    match status {
        200..=299 => Outcome::Delivered { status },
        300..=399 => failed(format!("HTTP {status} (redirects are not followed)")),
        _ => failed(format!("HTTP {status}")),
    }
}

fn failed(error: String) -> Outcome {
    Outcome::Failed { error }
}

/// The causes under a client error, joined on one line. hyper wraps causes in stage names ("client error
/// (Connect)", "dns error") that add nothing to the deepest causes, which carry the reason (e.g. "tcp connect
/// error: Connection refused (os error 111)").
fn chain(e: &hyper_util::client::legacy::Error) -> String {
    const WRAPPERS: [&str; 2] = ["client error (", "dns error"];
    let mut parts: Vec<String> = Vec::new();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        let wrapper = WRAPPERS.iter().any(|w| text.starts_with(w));
        if !text.is_empty() && !wrapper && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cause = c.source();
    }
    let start = parts.len().saturating_sub(2);
    let text = if parts.is_empty() { e.to_string() } else { parts[start..].join(": ") };
    text.replace(['\r', '\n'], " ")
}

fn seconds(d: Duration) -> String {
    if d.subsec_millis() == 0 { format!("{} s", d.as_secs()) } else { format!("{} ms", d.as_millis()) }
}

/// The TLS setup: rustls over the `ring` provider with the Mozilla roots of `webpki-roots`. `ring` builds with a C
/// compiler alone (aws-lc-rs, rustls's default, needs cmake); naming the provider in the config keeps it out of
/// rustls's process-wide default, which other parts of the process may set; and compiled-in roots make a node
/// verify the same way on every host, including minimal containers with no CA bundle.
fn tls_config() -> Result<rustls::ClientConfig, String> {
    // rustls deprecates the ring provider because it lacks the post-quantum hybrid key exchange (X25519MLKEM768);
    // its classical suites stay sound, and a wake payload is a short-lived notification, not a long-term secret.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("wake: cannot set up TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// Resolves names for the TCP connector and refuses any answer that includes a forbidden address. The addresses it
/// returns are the ones connected to, so what is checked is what is used. A mixed answer is refused whole rather
/// than filtered: a name with a private address among public ones is either misconfigured or an attack, and
/// either way the user should hear of it instead of getting deliveries that work only sometimes. (An address
/// literal never reaches a resolver; check_url checks those.)
#[derive(Clone, Debug)]
struct CheckedResolver {
    policy: Arc<WakePolicy>,
}

impl tower::Service<Name> for CheckedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let allow_private = self.policy.allow_private;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await
                .map_err(|e| format!("cannot resolve {host}: {e}"))?
                .collect();
            if addrs.is_empty() {
                return Err(format!("{host} resolves to no address").into());
            }
            if !allow_private {
                for addr in &addrs {
                    if let Some(why) = forbidden_address(addr.ip()) {
                        return Err(Refused(format!("{host} resolves to {} ({why})", addr.ip())).into());
                    }
                }
            }
            Ok(addrs.into_iter())
        })
    }
}

/// A resolved address the policy forbids; found again in the error chain to tell the user.
#[derive(Debug)]
struct Refused(String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// A connector with one deadline over everything it does: resolving, TCP (each address tried in turn) and the TLS
/// handshake, so a receiver that accepts but never finishes a handshake cannot hold a connection attempt open.
#[derive(Clone, Debug)]
struct ConnectTimeout<C> {
    inner: C,
    limit: Duration,
}

impl<C> tower::Service<http::Uri> for ConnectTimeout<C>
where
    C: tower::Service<http::Uri>,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<C::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let connecting = self.inner.call(uri);
        let limit = self.limit;
        Box::pin(async move {
            match tokio::time::timeout(limit, connecting).await {
                Ok(connected) => connected.map_err(Into::into),
                Err(_) => Err(ConnectTimedOut.into()),
            }
        })
    }
}

/// The connect deadline passed; found again in the error chain to tell the user.
#[derive(Debug)]
struct ConnectTimedOut;

impl fmt::Display for ConnectTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("connect timed out")
    }
}

impl std::error::Error for ConnectTimedOut {}

/// Standard Webhooks signature header value: "v1," + base64(HMAC-SHA256(secret, "{id}.{timestamp}.{body}")).
pub fn sign(secret: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    // HMAC is defined for keys of any length (long ones are hashed first), so this cannot fail.
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC accepts keys of any length");
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", BASE64.encode(mac.finalize().into_bytes()))
}

/// The secret's text form shown to the user once: "whsec_" + base64(secret) (the Standard Webhooks form).
pub fn secret_text(secret: &[u8]) -> String {
    format!("{SECRET_PREFIX}{}", BASE64.encode(secret))
}

/// Delay before retry number `attempt` (1 = first retry): full jitter over min(cap, base * 2^(attempt-1)), base 1 s,
/// cap 5 min. `unit` in [0,1) is the random draw, so tests are deterministic.
pub fn backoff(attempt: u32, unit: f64) -> Duration {
    // From the tenth retry on (2^9 s) the cap applies anyway; clamping the exponent keeps the shift in range.
    let exponent = attempt.saturating_sub(1).min(30);
    let ceiling = (BASE.as_secs_f64() * f64::from(1u32 << exponent)).min(CAP.as_secs_f64());
    // A draw outside [0,1) (or NaN) would make a negative or over-cap delay, and Duration panics on those.
    let unit = if unit.is_finite() { unit.clamp(0.0, 1.0) } else { 0.0 };
    Duration::from_secs_f64(ceiling * unit).min(CAP)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Mutex;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// Decodes a secret in its "whsec_" text form.
    fn secret_bytes(text: &str) -> Vec<u8> {
        BASE64.decode(text.strip_prefix(SECRET_PREFIX).expect("the whsec_ prefix")).expect("base64")
    }

    /// The example of Svix's "verifying payloads manually" guide, which the Standard Webhooks libraries reproduce.
    #[test]
    fn signature_matches_the_published_standard_webhooks_vector() {
        let secret = secret_bytes("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
        let signature = sign(&secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, br#"{"test": 2432232314}"#);
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    /// The vector of the Standard Webhooks reference library for Rust (libraries/rust, test_sign).
    #[test]
    fn signature_matches_the_reference_library_vector() {
        let secret = secret_bytes("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD");
        let body = br#"{"email":"test@example.com","username":"test_user"}"#;
        let signature = sign(&secret, "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk", 1649367553, body);
        assert_eq!(signature, "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=");
    }

    #[test]
    fn signature_covers_id_timestamp_body_and_secret() {
        let base = sign(b"secret", "msg_1", 1, b"{}");
        assert_ne!(base, sign(b"secreT", "msg_1", 1, b"{}"));
        assert_ne!(base, sign(b"secret", "msg_2", 1, b"{}"));
        assert_ne!(base, sign(b"secret", "msg_1", 2, b"{}"));
        assert_ne!(base, sign(b"secret", "msg_1", 1, b"{ }"));
        // Keys longer than SHA-256's block are hashed first; any length works.
        assert!(sign(&[7; 200], "msg_1", 1, b"{}").starts_with("v1,"));
        assert!(sign(&[], "msg_1", 1, b"{}").starts_with("v1,"));
    }

    #[test]
    fn secret_text_round_trips() {
        let secret: Vec<u8> = (0u8..32).map(|i| i.wrapping_mul(37)).collect();
        let text = secret_text(&secret);
        assert!(text.starts_with("whsec_"));
        assert_eq!(secret_bytes(&text), secret);
        assert_eq!(
            secret_text(&secret_bytes("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")),
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
        );
    }

    #[test]
    fn backoff_is_full_jitter_under_a_doubling_ceiling() {
        let almost_one = 1.0 - f64::EPSILON;
        for attempt in [0, 1, 2, 5, 9, 10, 31, 32, 1000, u32::MAX] {
            assert_eq!(backoff(attempt, 0.0), Duration::ZERO, "attempt {attempt}");
            assert!(backoff(attempt, almost_one) <= CAP, "attempt {attempt}");
        }
        // The ceilings: 1, 2, 4, ... 256 s, then the 300 s cap.
        for (attempt, ceiling) in [(1u32, 1u64), (2, 2), (3, 4), (9, 256), (10, 300), (40, 300)] {
            let top = backoff(attempt, almost_one);
            assert!(
                top <= Duration::from_secs(ceiling) && top > Duration::from_secs(ceiling) - Duration::from_millis(1)
            );
            assert_eq!(backoff(attempt, 0.5), Duration::from_secs_f64(ceiling as f64 / 2.0), "attempt {attempt}");
        }
        assert!(backoff(3, 0.9) > backoff(2, 0.9) && backoff(2, 0.9) > backoff(1, 0.9));
        // Draws outside [0,1) are clamped rather than panicking.
        assert_eq!(backoff(3, -1.0), Duration::ZERO);
        assert_eq!(backoff(3, f64::NAN), Duration::ZERO);
        assert_eq!(backoff(3, 7.0), Duration::from_secs(4));
    }

    #[test]
    fn delivery_debug_hides_the_secret() {
        let d = Delivery { url: "https://x.example/", id: "msg_1", timestamp: 1, body: b"{}", secret: b"hunter2" };
        let text = format!("{d:?}");
        assert!(!text.contains("hunter2") && !text.contains("104"), "{text}");
    }

    /// What the test receiver saw of one request.
    #[derive(Debug, Clone)]
    struct Seen {
        request_line: String,
        headers: HashMap<String, String>,
        body: Vec<u8>,
    }

    /// A one-connection-at-a-time HTTP/1.1 receiver on loopback that records each request and answers with
    /// `response` (a full status line and headers). Good enough for reqwest's plain requests with a content-length.
    async fn receiver(response: &'static str) -> (u16, Arc<Mutex<Vec<Seen>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("bound").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else { return };
                let record = Arc::clone(&record);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n");
                        if let Some(end) = head_end {
                            let head = String::from_utf8_lossy(&buf[..end]).to_string();
                            let mut lines = head.split("\r\n");
                            let request_line = lines.next().unwrap_or_default().to_owned();
                            let headers: HashMap<String, String> = lines
                                .filter_map(|l| l.split_once(':'))
                                .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
                                .collect();
                            let length: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
                            if buf.len() >= end + 4 + length {
                                let body = buf[end + 4..end + 4 + length].to_vec();
                                record.lock().expect("lock").push(Seen { request_line, headers, body });
                                let _ = socket.write_all(response.as_bytes()).await;
                                let _ = socket.shutdown().await;
                                return;
                            }
                        }
                        match socket.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                });
            }
        });
        (port, seen)
    }

    const OK: &str = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";
    const NO_CONTENT: &str = "HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n";
    const ERROR: &str = "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 4\r\nconnection: close\r\n\r\noops";
    const REDIRECT: &str = "HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:1/elsewhere\r\ncontent-length: 0\r\n\
                            connection: close\r\n\r\n";

    fn private_http() -> Arc<WakePolicy> {
        Arc::new(WakePolicy { schemes: vec!["http".into()], hosts: vec!["*".into()], allow_private: true })
    }

    fn public_http() -> Arc<WakePolicy> {
        Arc::new(WakePolicy { allow_private: false, ..(*private_http()).clone() })
    }

    fn delivery(url: &str) -> Delivery<'_> {
        Delivery {
            url,
            id: "msg_2Lh9",
            timestamp: 1_714_000_000,
            body: br#"{"type":"wake","n":1}"#,
            secret: b"0123456789abcdef0123456789abcdef",
        }
    }

    #[tokio::test]
    async fn delivers_on_2xx_with_signed_standard_headers() {
        let (port, seen) = receiver(OK).await;
        let sender = Sender::new(private_http()).expect("sender");
        let url = format!("http://127.0.0.1:{port}/hooks/wake?agent=a1");
        let d = delivery(&url);
        assert_eq!(sender.send(&d).await, Outcome::Delivered { status: 200 });

        let seen = seen.lock().expect("lock").clone();
        assert_eq!(seen.len(), 1);
        let req = &seen[0];
        assert_eq!(req.request_line, "POST /hooks/wake?agent=a1 HTTP/1.1");
        assert_eq!(req.headers["host"], format!("127.0.0.1:{port}"));
        assert_eq!(req.headers["content-type"], "application/json");
        assert_eq!(req.headers["content-length"], d.body.len().to_string());
        assert_eq!(req.headers["webhook-id"], "msg_2Lh9");
        assert_eq!(req.headers["webhook-timestamp"], "1714000000");
        assert_eq!(req.headers["user-agent"], format!("kungfu-wake/{}", env!("CARGO_PKG_VERSION")));
        assert_eq!(req.body, d.body);
        let timestamp: i64 = req.headers["webhook-timestamp"].parse().expect("decimal seconds");
        assert_eq!(req.headers["webhook-signature"], sign(d.secret, &req.headers["webhook-id"], timestamp, &req.body));
    }

    #[tokio::test]
    async fn any_2xx_is_delivered() {
        let (port, _) = receiver(NO_CONTENT).await;
        let sender = Sender::new(private_http()).expect("sender");
        let url = format!("http://127.0.0.1:{port}/");
        assert_eq!(sender.send(&delivery(&url)).await, Outcome::Delivered { status: 204 });
    }

    #[tokio::test]
    async fn a_5xx_fails() {
        let (port, seen) = receiver(ERROR).await;
        let sender = Sender::new(private_http()).expect("sender");
        let url = format!("http://127.0.0.1:{port}/");
        assert_eq!(sender.send(&delivery(&url)).await, Outcome::Failed { error: "HTTP 500".into() });
        assert_eq!(seen.lock().expect("lock").len(), 1, "one call is one request");
    }

    #[tokio::test]
    async fn a_redirect_is_not_followed() {
        let (port, seen) = receiver(REDIRECT).await;
        let sender = Sender::new(private_http()).expect("sender");
        let url = format!("http://127.0.0.1:{port}/");
        assert_eq!(
            sender.send(&delivery(&url)).await,
            Outcome::Failed { error: "HTTP 302 (redirects are not followed)".into() }
        );
        assert_eq!(seen.lock().expect("lock").len(), 1);
    }

    #[tokio::test]
    async fn a_closed_port_fails() {
        // Bind then drop, so the port is very likely closed.
        let port = TcpListener::bind("127.0.0.1:0").await.expect("bind").local_addr().expect("bound").port();
        let sender = Sender::new(private_http()).expect("sender");
        let url = format!("http://127.0.0.1:{port}/");
        let Outcome::Failed { error } = sender.send(&delivery(&url)).await else {
            panic!("delivered to a closed port")
        };
        assert!(error.starts_with("cannot connect: "), "{error}");
        assert!(error.to_lowercase().contains("refused"), "{error}");
        assert!(!error.contains('\n'), "{error}");
    }

    #[tokio::test]
    async fn a_silent_receiver_times_out() {
        // Accepts and reads, never answers.
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("bound").port();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let sender =
            Sender::with_timeouts(private_http(), Duration::from_millis(300), CONNECT_TIMEOUT).expect("sender");
        let url = format!("http://127.0.0.1:{port}/");
        assert_eq!(sender.send(&delivery(&url)).await, Outcome::Failed { error: "timed out after 300 ms".into() });
        assert_eq!(seconds(TIMEOUT), "10 s");
    }

    #[tokio::test]
    async fn loopback_literals_are_refused_unless_private_is_allowed() {
        let (port, seen) = receiver(OK).await;
        let sender = Sender::new(public_http()).expect("sender");
        for url in [format!("http://127.0.0.1:{port}/"), format!("http://[::ffff:127.0.0.1]:{port}/")] {
            let Outcome::Failed { error } = sender.send(&delivery(&url)).await else { panic!("{url} delivered") };
            assert!(error.starts_with("refused: url: host "), "{error}");
            assert!(error.contains("loopback"), "{error}");
        }
        assert!(seen.lock().expect("lock").is_empty());
    }

    #[tokio::test]
    async fn names_resolving_to_loopback_are_refused_unless_private_is_allowed() {
        let (port, seen) = receiver(OK).await;
        let url = format!("http://localhost:{port}/");

        let sender = Sender::new(public_http()).expect("sender");
        let Outcome::Failed { error } = sender.send(&delivery(&url)).await else { panic!("localhost delivered") };
        assert!(error.starts_with("refused: localhost resolves to "), "{error}");
        assert!(error.ends_with("(loopback)"), "{error}");
        assert!(seen.lock().expect("lock").is_empty());

        // localhost may resolve to ::1 first, where nothing listens; the client then tries 127.0.0.1.
        let sender = Sender::new(private_http()).expect("sender");
        assert_eq!(sender.send(&delivery(&url)).await, Outcome::Delivered { status: 200 });
        assert_eq!(seen.lock().expect("lock").len(), 1);
    }

    #[tokio::test]
    async fn the_policy_is_checked_on_every_send() {
        let sender = Sender::new(Arc::new(WakePolicy::default())).expect("sender");
        let Outcome::Failed { error } = sender.send(&delivery("http://hooks.example.com/")).await else {
            panic!("http delivered under an https-only policy")
        };
        assert!(error.starts_with("refused: url: scheme \"http\" is not allowed"), "{error}");
    }

    #[tokio::test]
    async fn https_uses_the_ring_rustls_setup() {
        // A plain-HTTP answer behind an https URL: the TLS handshake is attempted (so the preconfigured rustls
        // setup was accepted by reqwest) and fails, without any network beyond loopback.
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("bound").port();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let _ = socket.write_all(OK.as_bytes()).await;
            }
        });
        let policy =
            Arc::new(WakePolicy { schemes: vec!["https".into()], hosts: vec!["*".into()], allow_private: true });
        let sender = Sender::new(policy).expect("sender");
        let url = format!("https://127.0.0.1:{port}/");
        let Outcome::Failed { error } = sender.send(&delivery(&url)).await else { panic!("TLS to a plain server") };
        assert!(error.starts_with("cannot connect: "), "{error}");
        assert!(!error.contains("timed out"), "{error}");
    }

    #[tokio::test]
    async fn a_stalled_connect_times_out() {
        // Accepts TCP but never answers the TLS ClientHello: the handshake is part of connecting.
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("bound").port();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let policy =
            Arc::new(WakePolicy { schemes: vec!["https".into()], hosts: vec!["*".into()], allow_private: true });
        let sender = Sender::with_timeouts(policy, TIMEOUT, Duration::from_millis(200)).expect("sender");
        let url = format!("https://127.0.0.1:{port}/");
        assert_eq!(
            sender.send(&delivery(&url)).await,
            Outcome::Failed { error: "connect timed out after 200 ms".into() }
        );
    }

    #[test]
    fn invalid_header_values_fail_without_panicking() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let sender = Sender::new(private_http()).expect("sender");
        let d = Delivery { id: "msg\n1", ..delivery("http://127.0.0.1:9/") };
        let Outcome::Failed { error } = rt.block_on(sender.send(&d)) else { panic!("sent a bad header") };
        assert!(error.starts_with("invalid request: "), "{error}");
    }

    #[test]
    fn sender_clones_share_the_client() {
        let sender = Sender::new(Arc::new(WakePolicy::default())).expect("sender");
        let clone = sender.clone();
        assert!(Arc::ptr_eq(&sender.policy, &clone.policy));
    }
}
