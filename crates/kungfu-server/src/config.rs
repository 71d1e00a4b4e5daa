//! Node configuration: a TOML file, overridden by flags and environment variables (`KUNGFU_*`).
//! Run with nothing at all, a node is a single-node cluster with its data in `./data` (the embedded
//! default). Every setting is validated once here; an invalid one stops the start with a message
//! that names it.

use kungfu_core::Limits;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// A member of the cluster as the configuration names it.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Peer {
    pub id: u64,
    /// `host:port` of its internal raft service.
    pub raft: String,
    /// `host:port` of its public API.
    pub api: String,
}

/// Who may register agents.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Registration {
    /// Anyone may register (the default for a local node). When false, registration needs the
    /// operator token.
    pub open: bool,
}

impl Default for Registration {
    fn default() -> Registration {
        Registration { open: true }
    }
}

/// openraft timing and log retention.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct RaftSettings {
    pub heartbeat_ms: u64,
    pub election_timeout_min_ms: u64,
    pub election_timeout_max_ms: u64,
    /// Build a snapshot after this many applied entries; the log behind it is purged.
    pub snapshot_after_logs: u64,
    /// Entries kept behind a snapshot, for followers slightly behind.
    pub keep_logs_after_snapshot: u64,
    /// Largest AppendEntries request in bytes; a larger batch goes as several requests (a lagging
    /// follower catches up in parts that each fit one message and its deadline).
    pub max_append_bytes: usize,
    /// Peers this node dials at another raft address than the membership's, by node id
    /// (`[raft.dial]`, `"2" = "127.0.0.1:9102"`): a proxy per directed link in chaos tests.
    pub dial: std::collections::BTreeMap<String, String>,
}

impl Default for RaftSettings {
    fn default() -> RaftSettings {
        let d = kungfu_raft::RaftTuning::default();
        RaftSettings {
            heartbeat_ms: d.heartbeat_interval.as_millis() as u64,
            election_timeout_min_ms: d.election_timeout_min.as_millis() as u64,
            election_timeout_max_ms: d.election_timeout_max.as_millis() as u64,
            snapshot_after_logs: d.snapshot_after_logs,
            keep_logs_after_snapshot: d.keep_logs_after_snapshot,
            max_append_bytes: kungfu_raft::NetConfig::default().max_append_bytes,
            dial: std::collections::BTreeMap::new(),
        }
    }
}

/// Bounds of the public API edge.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ApiSettings {
    /// Largest request or response message, in bytes.
    pub max_message_bytes: usize,
    /// A write that has no outcome after this long is answered as indeterminate (retry with the
    /// same idempotency key).
    pub write_timeout_ms: u64,
    /// A node is ready (gRPC health SERVING, `/readyz` 200) only while it has applied within this
    /// many entries of what it knows is committed, besides knowing a leader.
    pub ready_max_lag_entries: u64,
    /// A connection must send the HTTP/2 preface within this long of connecting, or is closed.
    pub handshake_timeout_ms: u64,
    /// A connection that sends nothing for this long is closed. Live clients answer the node's
    /// HTTP/2 keep-alive pings (every `idle_timeout_ms / 5`), so only dead or silent sockets are.
    pub idle_timeout_ms: u64,
    /// Most connections open at once from one IP address; more are closed on accept.
    pub max_connections_per_peer: usize,
}

impl Default for ApiSettings {
    fn default() -> ApiSettings {
        ApiSettings {
            max_message_bytes: 4 * 1024 * 1024,
            write_timeout_ms: 10_000,
            ready_max_lag_entries: 1000,
            handshake_timeout_ms: 10_000,
            idle_timeout_ms: 300_000,
            max_connections_per_peer: 1024,
        }
    }
}

impl ApiSettings {
    /// The bounds of every connection to the API listener (issue #16).
    pub fn connection_bounds(&self) -> kungfu_raft::incoming::ConnectionBounds {
        kungfu_raft::incoming::ConnectionBounds {
            handshake_timeout: std::time::Duration::from_millis(self.handshake_timeout_ms),
            idle_timeout: std::time::Duration::from_millis(self.idle_timeout_ms),
            max_per_peer: self.max_connections_per_peer,
        }
    }

    /// How often the node pings each client connection (HTTP/2 keep-alive): five pings fit in the
    /// idle timeout, so a live client is never closed as silent.
    pub fn keepalive_interval(&self) -> std::time::Duration {
        std::time::Duration::from_millis((self.idle_timeout_ms / 5).max(1))
    }
}

/// The MCP door on the HTTP listener (`http_listen`): which requests it admits and how large they
/// may be. An empty host or origin list is filled in at start from the listener and
/// `http_advertise` (see [`Config::mcp_allowed_hosts`]), so a loopback node is safe by default.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct McpSettings {
    /// `Host` header values the door answers (`host:port`); anything else is refused with 403,
    /// the defence against DNS rebinding. Empty: the loopback names at the listening port and the
    /// advertised address.
    pub allowed_hosts: Vec<String>,
    /// `Origin` header values the door answers (`http://host:port`); a request with another
    /// `Origin` is refused with 403, and one without (not a browser) is admitted. Empty: the
    /// origins of the allowed hosts over `http`.
    pub allowed_origins: Vec<String>,
    /// Largest request body the door reads, in bytes; a larger one is refused with 413 before it
    /// is parsed.
    pub max_body_bytes: usize,
}

impl Default for McpSettings {
    fn default() -> McpSettings {
        McpSettings { allowed_hosts: Vec::new(), allowed_origins: Vec::new(), max_body_bytes: 4 * 1024 * 1024 }
    }
}

/// Who may see the console's cluster view (`/ui/api/cluster`): the raft role, term, log positions
/// and membership of every member, which is operator information.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ClusterView {
    /// Open, without a token, to clients that connect from a loopback address (a browser on the
    /// node's own machine); refused to any other client.
    Loopback,
    /// Only with the operator token as `Authorization: Bearer <token>`, from any address.
    OperatorToken,
}

/// The web console on the HTTP listener (`/ui/`, docs/console.md): whether it is served and who
/// may see its cluster view. Its agent view is always guarded by the agent's own key, as the MCP
/// door is; it reads and never writes.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ConsoleSettings {
    /// Serve the console at `/ui/` (when the HTTP listener is on).
    pub enabled: bool,
    /// Who may see the cluster view: `"loopback"` (the default) or `"operator_token"`.
    pub cluster_view: ClusterView,
}

impl Default for ConsoleSettings {
    fn default() -> ConsoleSettings {
        ConsoleSettings { enabled: true, cluster_view: ClusterView::Loopback }
    }
}

/// OpenTelemetry (issue #18, docs/operations.md "Telemetry"): spans of every action, its raft
/// proposal, replication and apply, exported over OTLP/gRPC. Off unless `otlp_endpoint` is set;
/// off, the node builds no exporter and its spans stay disabled at the default log level.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetrySettings {
    /// The OTLP/gRPC collector, `http://host:port` (usually port 4317; no TLS). None exports
    /// nothing.
    pub otlp_endpoint: Option<String>,
    /// The `service.name` resource attribute of every span.
    pub service_name: String,
    /// The fraction of traces started here that are recorded, 0.0 to 1.0. A trace that arrives
    /// with a sampled `traceparent` is recorded whatever this says (parent-based sampling).
    pub sample_ratio: f64,
}

impl Default for TelemetrySettings {
    fn default() -> TelemetrySettings {
        TelemetrySettings { otlp_endpoint: None, service_name: "kungfud".into(), sample_ratio: 1.0 }
    }
}

/// Wake webhooks (issue #35, docs/wake.md): where a target may point, and how the leader delivers.
/// A node's own settings, not replicated: the door of the node that takes a `SetWakeTarget` checks
/// the URL against them, and whichever node leads checks every send again, so a tightened policy
/// stops deliveries at once (a target set before then is refused at its next send).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct WakeSettings {
    /// URL schemes a target may use.
    pub schemes: Vec<String>,
    /// Host patterns a target's host must match: `*`, `hooks.example.com`, `*.example.com`.
    pub hosts: Vec<String>,
    /// Allow loopback, private, link-local and other internal destinations (server-side request
    /// forgery is the risk; false by default).
    pub allow_private: bool,
    /// How long the leader retries one delivery before it records the target as failed.
    pub give_up_after_secs: u64,
    /// Turn changes of one agent within this window are delivered as one event (the newest).
    pub coalesce_ms: u64,
    /// Deliveries in flight at once on the leader, over all targets.
    pub max_in_flight: usize,
    /// An obligation whose deadline is this near wakes its agent once ("a deadline nears"); 0: no
    /// such event (a deadline passing still wakes it).
    pub deadline_warning_secs: u64,
}

impl Default for WakeSettings {
    fn default() -> WakeSettings {
        WakeSettings {
            schemes: vec!["https".into()],
            hosts: vec!["*".into()],
            allow_private: false,
            give_up_after_secs: 24 * 3600,
            coalesce_ms: 250,
            max_in_flight: 64,
            deadline_warning_secs: 300,
        }
    }
}

/// The port of the HTTP listener (MCP at `/mcp`) of the single-node default, beside the API's 7400
/// and raft's 7500: each node's HTTP port is its API port + 200 in every shipped configuration.
pub const DEFAULT_HTTP_PORT: u16 = 7600;

/// The whole configuration of a node.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub node_id: u64,
    pub cluster_id: String,
    pub data_dir: PathBuf,
    pub api_listen: SocketAddr,
    /// How clients reach this node's API (published to the cluster); defaults to `api_listen`.
    pub api_advertise: Option<String>,
    pub raft_listen: SocketAddr,
    /// How other nodes reach this node's raft service; defaults to `raft_listen`.
    pub raft_advertise: Option<String>,
    /// Initialize the cluster from `peers` when this node is pristine and has the lowest id among
    /// them. Never re-initializes an existing cluster.
    pub bootstrap: bool,
    /// The initial voters. Empty means a single-node cluster of this node.
    pub peers: Vec<Peer>,
    /// Token for operator calls (agent deactivation, closed registration). None disables them.
    pub operator_token: Option<String>,
    pub registration: Registration,
    pub limits: Limits,
    pub raft: RaftSettings,
    pub api: ApiSettings,
    /// Per-agent rate limits at the edge (L4).
    pub rate_limits: crate::ratelimit::RateSettings,
    /// Where Prometheus metrics are served (`/metrics`); None serves none.
    pub metrics_listen: Option<SocketAddr>,
    /// Where the HTTP listener serves MCP Streamable HTTP at `/mcp`. The single-node default (no
    /// config file) listens on 127.0.0.1:7600; a config file serves it only when it sets this (the
    /// field's serde default is None, so test and chaos clusters that never mention it bind no
    /// extra port).
    #[serde(default)]
    pub http_listen: Option<SocketAddr>,
    /// How clients reach this node's HTTP listener (`host:port`, in the logged MCP URL and the
    /// allowed hosts); defaults to `http_listen`.
    pub http_advertise: Option<String>,
    /// The MCP door: allowed hosts and origins, request size.
    pub mcp: McpSettings,
    /// The web console at `/ui/` on the HTTP listener.
    pub console: ConsoleSettings,
    /// Per-object actors: how many live at once, idle timeout, mailbox bound, actions in flight.
    pub actors: ActorSettings,
    /// OpenTelemetry export (`[telemetry]`); off by default.
    pub telemetry: TelemetrySettings,
    /// Wake webhooks (`[wake]`): where targets may point, retries, coalescing.
    pub wake: WakeSettings,
    /// Threads of the node's async runtime (issue #30: a runtime sized for the machine). None:
    /// one per CPU the process may use (tokio's default). RocksDB's background work and the raft
    /// log's sync thread are not among them.
    pub worker_threads: Option<usize>,
    /// `kungfud --accept-data-loss` (never in a file: it is for one start): the operator accepts
    /// that this node's raft log lost entries it acknowledged (issue #33; docs/operations.md,
    /// "Damaged data directory").
    #[serde(skip)]
    pub accept_data_loss: bool,
}

/// The most runtime threads a node may be given: past the cores of any machine it would run on,
/// a setting this large is a typo.
pub const MAX_WORKER_THREADS: usize = 1024;

impl Default for Config {
    fn default() -> Config {
        Config {
            node_id: 1,
            cluster_id: "local".into(),
            data_dir: PathBuf::from("./data"),
            api_listen: SocketAddr::from(([127, 0, 0, 1], 7400)),
            api_advertise: None,
            raft_listen: SocketAddr::from(([127, 0, 0, 1], 7500)),
            raft_advertise: None,
            bootstrap: true,
            peers: Vec::new(),
            operator_token: None,
            registration: Registration::default(),
            limits: Limits::default(),
            raft: RaftSettings::default(),
            api: ApiSettings::default(),
            rate_limits: crate::ratelimit::RateSettings::default(),
            metrics_listen: None,
            http_listen: Some(SocketAddr::from(([127, 0, 0, 1], DEFAULT_HTTP_PORT))),
            http_advertise: None,
            mcp: McpSettings::default(),
            console: ConsoleSettings::default(),
            actors: ActorSettings::default(),
            telemetry: TelemetrySettings::default(),
            wake: WakeSettings::default(),
            worker_threads: None,
            accept_data_loss: false,
        }
    }
}

/// A configuration that cannot run, with the setting at fault.
#[derive(Debug, thiserror::Error)]
#[error("configuration: {setting}: {message}")]
pub struct ConfigError {
    pub setting: String,
    pub message: String,
}

fn bad(setting: &str, message: impl Into<String>) -> ConfigError {
    ConfigError { setting: setting.into(), message: message.into() }
}

impl Config {
    /// Reads a TOML file.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| bad("--config", format!("cannot read {}: {e}", path.display())))?;
        toml::from_str(&text).map_err(|e| bad(&path.display().to_string(), e.to_string()))
    }

    /// The initial voters: `peers`, or this node alone.
    pub fn voters(&self) -> Vec<Peer> {
        if self.peers.is_empty() {
            vec![Peer { id: self.node_id, raft: self.raft_advertise(), api: self.api_advertise() }]
        } else {
            self.peers.clone()
        }
    }

    pub fn api_advertise(&self) -> String {
        self.api_advertise.clone().unwrap_or_else(|| self.api_listen.to_string())
    }

    pub fn raft_advertise(&self) -> String {
        self.raft_advertise.clone().unwrap_or_else(|| self.raft_listen.to_string())
    }

    /// How clients reach the HTTP listener, `host:port`; None when there is none.
    pub fn http_advertise(&self) -> Option<String> {
        let listen = self.http_listen?;
        Some(self.http_advertise.clone().unwrap_or_else(|| listen.to_string()))
    }

    /// The MCP URL clients use: `http://<http_advertise>/mcp`.
    pub fn mcp_url(&self) -> Option<String> {
        self.http_advertise().map(|a| format!("http://{a}/mcp"))
    }

    /// The `Host` values the MCP door answers: `mcp.allowed_hosts`, or when that is empty the
    /// advertised address plus, on a loopback or unspecified listener, `localhost`, `127.0.0.1` and
    /// `[::1]` at the listening port.
    pub fn mcp_allowed_hosts(&self) -> Vec<String> {
        if !self.mcp.allowed_hosts.is_empty() {
            return self.mcp.allowed_hosts.clone();
        }
        let Some(listen) = self.http_listen else { return Vec::new() };
        let mut hosts = Vec::new();
        if let Some(advertised) = self.http_advertise() {
            hosts.push(advertised);
        }
        if listen.ip().is_loopback() || listen.ip().is_unspecified() {
            let port = listen.port();
            for h in [format!("localhost:{port}"), format!("127.0.0.1:{port}"), format!("[::1]:{port}")] {
                if !hosts.contains(&h) {
                    hosts.push(h);
                }
            }
        }
        hosts
    }

    /// The `Origin` values the MCP door answers: `mcp.allowed_origins`, or when that is empty
    /// `http://<host>` for each allowed host.
    pub fn mcp_allowed_origins(&self) -> Vec<String> {
        if !self.mcp.allowed_origins.is_empty() {
            return self.mcp.allowed_origins.clone();
        }
        self.mcp_allowed_hosts().iter().map(|h| format!("http://{h}")).collect()
    }

    /// Checks every setting; the first problem found is returned.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.node_id == 0 {
            return Err(bad("node_id", "must be at least 1"));
        }
        if self.cluster_id.is_empty() || self.cluster_id.len() > 64 {
            return Err(bad("cluster_id", "must be 1 to 64 characters"));
        }
        if !self.peers.is_empty() && !self.peers.iter().any(|p| p.id == self.node_id) {
            return Err(bad("peers", format!("must include this node (node_id = {})", self.node_id)));
        }
        let mut ids: Vec<u64> = self.peers.iter().map(|p| p.id).collect();
        ids.sort_unstable();
        if ids.windows(2).any(|w| w[0] == w[1]) {
            return Err(bad("peers", "node ids must be unique"));
        }
        if self.raft.election_timeout_min_ms <= self.raft.heartbeat_ms
            || self.raft.election_timeout_max_ms <= self.raft.election_timeout_min_ms
        {
            return Err(bad("raft", "need heartbeat_ms < election_timeout_min_ms < election_timeout_max_ms"));
        }
        if self.wake.schemes.is_empty() || self.wake.schemes.iter().any(|s| s != "https" && s != "http") {
            return Err(bad("wake.schemes", "must name \"https\", \"http\" or both"));
        }
        if self.wake.hosts.is_empty() || self.wake.hosts.iter().any(|h| h.is_empty()) {
            return Err(bad("wake.hosts", "must name at least one host pattern (\"*\" allows any host)"));
        }
        if self.wake.give_up_after_secs == 0
            || self.wake.coalesce_ms > 60_000
            || self.wake.max_in_flight == 0
            || self.wake.deadline_warning_secs > 30 * 86_400
        {
            return Err(bad(
                "wake",
                "need give_up_after_secs >= 1, coalesce_ms <= 60000, max_in_flight >= 1 and deadline_warning_secs <= 2592000",
            ));
        }
        if self.api.max_message_bytes < 64 * 1024 {
            return Err(bad("api.max_message_bytes", "must be at least 65536"));
        }
        if self.api.handshake_timeout_ms == 0 || self.api.idle_timeout_ms < 1_000 {
            return Err(bad(
                "api.handshake_timeout_ms",
                "handshake_timeout_ms must be at least 1 and idle_timeout_ms at least 1000",
            ));
        }
        if self.api.max_connections_per_peer == 0 {
            return Err(bad("api.max_connections_per_peer", "must be at least 1"));
        }
        if matches!(&self.operator_token, Some(t) if t.len() < 16) {
            return Err(bad("operator_token", "must be at least 16 characters"));
        }
        if !self.registration.open && self.operator_token.is_none() {
            return Err(bad("registration.open", "closed registration needs an operator_token"));
        }
        if matches!(self.worker_threads, Some(n) if n == 0 || n > MAX_WORKER_THREADS) {
            return Err(bad(
                "worker_threads",
                format!("must be 1 to {MAX_WORKER_THREADS}, or left out for one per CPU"),
            ));
        }
        if self.actors.max_live == 0 || self.actors.max_pending == 0 || self.actors.max_in_flight == 0 {
            return Err(bad("actors", "max_live, max_pending and max_in_flight must be at least 1"));
        }
        // The budget must leave room under the raft message limit for a part's header and one
        // entry larger than the budget (which goes alone).
        let max_append = kungfu_raft::NetConfig::default().max_message_bytes / 4;
        if self.raft.max_append_bytes < 64 * 1024 || self.raft.max_append_bytes > max_append {
            return Err(bad("raft.max_append_bytes", format!("must be between 65536 and {max_append}")));
        }
        for (id, addr) in &self.raft.dial {
            if id.parse::<u64>().is_err() {
                return Err(bad("raft.dial", format!("key {id:?} must be a node id")));
            }
            if addr.is_empty() {
                return Err(bad("raft.dial", format!("the address of node {id} is empty")));
            }
        }
        if let Some(http) = self.http_listen {
            let taken = [("api_listen", self.api_listen), ("raft_listen", self.raft_listen)]
                .into_iter()
                .chain(self.metrics_listen.map(|m| ("metrics_listen", m)));
            for (name, addr) in taken {
                if addr == http && http.port() != 0 {
                    return Err(bad("http_listen", format!("must differ from {name} ({addr})")));
                }
            }
        }
        if matches!(&self.http_advertise, Some(a) if a.is_empty() || a.contains('/')) {
            return Err(bad("http_advertise", "must be `host:port`, with no scheme or path"));
        }
        if self.mcp.max_body_bytes < 64 * 1024 {
            return Err(bad("mcp.max_body_bytes", "must be at least 65536"));
        }
        for (setting, values) in
            [("mcp.allowed_hosts", &self.mcp.allowed_hosts), ("mcp.allowed_origins", &self.mcp.allowed_origins)]
        {
            if values.iter().any(|v| v.trim().is_empty()) {
                return Err(bad(setting, "entries must not be empty"));
            }
        }
        if self.mcp.allowed_origins.iter().any(|o| !(o.starts_with("http://") || o.starts_with("https://"))) {
            return Err(bad("mcp.allowed_origins", "entries must be origins such as `http://host:port`"));
        }
        if self.console.enabled
            && self.console.cluster_view == ClusterView::OperatorToken
            && self.operator_token.is_none()
        {
            return Err(bad(
                "console.cluster_view",
                "\"operator_token\" needs an operator_token; set one, or use \"loopback\"",
            ));
        }
        if let Some(endpoint) = &self.telemetry.otlp_endpoint {
            let uri: Result<http::Uri, _> = endpoint.parse();
            match uri {
                Ok(u) if u.scheme_str() == Some("http") && u.host().is_some() => {}
                // The exporter is built without TLS: a collector behind TLS is reached through a
                // local agent or collector.
                Ok(u) if u.scheme_str() == Some("https") => {
                    return Err(bad(
                        "telemetry.otlp_endpoint",
                        format!("{endpoint:?}: TLS is not supported; send to a local collector over `http://`"),
                    ));
                }
                _ => {
                    return Err(bad(
                        "telemetry.otlp_endpoint",
                        format!("{endpoint:?} must be a URL such as `http://127.0.0.1:4317`"),
                    ));
                }
            }
        }
        if self.telemetry.service_name.trim().is_empty() {
            return Err(bad("telemetry.service_name", "must not be empty"));
        }
        if !(0.0..=1.0).contains(&self.telemetry.sample_ratio) {
            return Err(bad("telemetry.sample_ratio", "must be between 0.0 and 1.0"));
        }
        if self.limits.default_page_size == 0 || self.limits.default_page_size > self.limits.max_page_size {
            return Err(bad("limits.default_page_size", "must be between 1 and limits.max_page_size"));
        }
        Ok(())
    }
}

/// Actor settings.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ActorSettings {
    /// Most actors alive at once on this node.
    pub max_live: usize,
    /// An actor with nothing to do for this long stops.
    pub idle_ms: u64,
    /// Most actions waiting in one object's mailbox.
    pub max_pending: usize,
    /// Most actions of one object proposed to raft and not yet applied (at least 1).
    pub max_in_flight: usize,
}

impl Default for ActorSettings {
    fn default() -> ActorSettings {
        ActorSettings { max_live: 10_000, idle_ms: 30_000, max_pending: 1_000, max_in_flight: 64 }
    }
}
