//! The Kungfu node (`kungfud`): the public API over a replicated protocol core, as a service layer
//! in domain terms with one adapter per transport (gRPC; MCP over HTTP, mounted by [`http`]).
//!
//! Invariants: it never decides a protocol rule; every write goes through raft and the core. A
//! transport stays at its door: the service layer ([`backend`], [`reads`], [`actors`], [`admin`],
//! [`watch`]) names no tonic type and answers in domain types and `Rejection`, so every door gives
//! the same answer and code for the same request; the watch streams speak domain events
//! (`kungfu_core::watch`) that each door converts, and only the operator calls build the API's
//! generated messages (`kungfu_api::pb`, prost types) for their answers. Outside [`grpc`], tonic
//! appears only as a client: the console's channels to the other members ([`console`]) and the
//! OTLP exporter's transport ([`telemetry`]); the MCP door ([`http`]) calls the API's service stack
//! in process. It reads storage only through `kungfu-storage`'s and `kungfu-raft`'s own API.
//! As leader it stamps, pre-checks and serves writes only once it has applied its own term and
//! armed its deadline timers (L5, DESIGN §4). The console only reads (a tool that writes is refused
//! before it is sent) and puts participant content into its page as text only (`textContent`,
//! never an HTML sink; the CSP forbids inline script besides), L6.
//!
//! The actors call the service layer through the `actors::Proposer` trait (pre-check, propose),
//! which `Backend` implements, so [`actors`] does not import [`backend`]; their settings live in
//! [`config`], and `metrics::publish_gauges` takes the node, the actors and a readiness check, not
//! the service layer.
//!
//! Table of contents (the files, and what each holds):
//! - [`config`]: TOML, flags and environment; the single-node default (API 127.0.0.1:7400, MCP at
//!   127.0.0.1:7600); validation naming the setting; the MCP door's allowed hosts and origins derived
//!   from `http_listen` and `http_advertise` when not configured.
//! - [`credentials`]: what a door tells the service layer about a call (bearer credential,
//!   consistency, address), and the authenticated [`Caller`](credentials::Caller) and
//!   [`Operator`](credentials::Operator).
//! - [`backend`]: the service layer every door calls: authentication, the leader's clock,
//!   replicated writes answered from their applied result, reads on one snapshot, "not the leader"
//!   with its address; every refusal a `Rejection`. Authentication from `Credentials`: the agent key
//!   (a bounded in-memory map of key hashes to agents, since a key names one agent for good; a key
//!   it does not hold is one point read of the latest state without a snapshot, `StateStore::live`,
//!   and, unknown there, a read-index round and a second read), write and read rates, registration rate and principal, operator token. A provisional time for pre-checks,
//!   taken only once the leader has applied its own term, as are the pre-checks (L5; the proposal is
//!   stamped again by `RaftNode::propose_stamped`); a pre-check reads the latest state with commits
//!   held back (`StateStore::read_latest`), not a RocksDB snapshot. Writes replicated and answered
//!   from their receipts (`Written`); linearizable reads (read index) or stale reads, each on one
//!   RocksDB snapshot (`Read`, with how far behind); `NOT_LEADER` with the leader's API address in
//!   `Rejection::leader` when it is another node (never this node; else `retry_after`). Edge
//!   refusals are counted here, once, as they are made.
//! - [`reads`]: the protocol's reads as service-layer calls, one method per read, taking the
//!   `Caller` and the validated query of `kungfu_api::request`, answering the core's read result.
//! - [`admin`]: the operator calls (they take an `Operator`): cluster status from any node (with the
//!   bytes of each part of its data directory, and `fatal_error` also for a core that panicked); add
//!   learner (waits until caught up), change membership, leader transfer, trigger snapshot (leader
//!   only), each within a budget; backup to a new directory (`kungfu_raft::backup` over
//!   `kungfu_storage::backup`: checkpoint archive and SHA-256 manifest) and restore into a new data
//!   directory that starts as a one-node cluster (`kungfud restore --from`); `StateDigest` (SHA-256
//!   of the state and the applied index it is exact at, one snapshot) and `ExportFacts` (the
//!   recorded facts in global order, for audits and the chaos harness's turn checker).
//! - [`watch`]: watch streams of a thread's entries and of an agent's turn, resumable without gap:
//!   a thread's entries after a sequence number (backlog, then live; resume with the last seq, no
//!   gap, no duplicate), a shared record's events after a rev (the same, by rev; woken by its
//!   thread's facts, the audience applied to every batch) and an agent's turn as change events with
//!   a resumable cursor, each an `Events` channel ending, when refused, with a `Rejection`; woken from
//!   the fact feed only by commands that touched the watched turn or thread; bounded per stream and
//!   per agent; ended by shutdown, loss of leadership or loss of membership.
//! - [`actors`]: one actor per live Thread and Task: serializes, pre-checks, bounded, passivated.
//!   A ractor actor serializes competing actions on its object and proposes them in arrival order
//!   with up to `max_in_flight` in flight; it pre-checks one (a definite rejection or a replay is
//!   answered without a log write) only when none is in flight. Bounded live actors (over the bound
//!   an action goes straight to raft), bounded mailbox (admission control: `RATE_LIMITED`), idle
//!   actors stop; the registry replaces failed ones. The reply carries an `Answer`: the answer
//!   itself (a pre-check's, or a refusal before anything was proposed), or, for a proposed command,
//!   its `InFlight` wait, which the caller awaits in its own task (no task spawned per action) and
//!   which holds the object's in-flight slot until the command is decided, even if the caller goes
//!   away. The registry is a std mutex held for a lookup, never across an await; an actor is
//!   spawned outside it (of two racing spawns, the one registered first serves the object).
//! - [`deadlines`]: the leader's deadline scheduler (L4: exactly once, DESIGN §4): loads the due
//!   index when it leads with its term applied, follows the fact feed, one timer at the earliest
//!   due time, expiries due together proposed as one entry (exactly once by the core's expiry
//!   rule). It ends when raft stops (a closed metrics channel, a stopped core) and retries a failed
//!   proposal or read after a bounded exponential backoff (100 ms to 5 s), so a dead core's metrics
//!   do not make it spin.
//! - [`grpc`]: the gRPC door: the six protocol services and `CoordService`, the operator and watch
//!   services, request forwarding and oversize refusals, serving with health and reflection. Its
//!   files:
//!   - `grpc/mod.rs`: the transport facts of a request as `Credentials` (`authorization: Bearer …`,
//!     `kungfu-consistency: stale`, remote address), the one conversion of a `Rejection` to a
//!     `tonic::Status` (`kungfu_api::rejection_status`), a stale read's metadata
//!     (`kungfu-applied-index`, `kungfu-lag-entries`), the operator calls' budget from
//!     `grpc-timeout`, and `serve`: every service behind the tower layers, with reflection in its
//!     `v1` and `v1alpha` revisions and gRPC health set from `Backend::readiness` every 200 ms
//!     (SERVING only while a leader is known and reachable through a quorum and this node has
//!     applied within `api.ready_max_lag_entries`).
//!   - `grpc/api.rs`: the six protocol services, `CoordService` and `RecordService` (credentials,
//!     authenticate, convert once, call, convert the answer); `grpc/admin.rs`: `AdminService`;
//!     `grpc/watch.rs`: `WatchService` relaying `Events` as a stream.
//!   - `grpc/client_addr.rs`: the outermost tower layer but for `grpc/trace.rs`: the client's address
//!     for per-address limits (L4): the one an in-process door (MCP, the console) hands over as a
//!     request extension, else a claimed `kungfu-client-addr` only on a forwarded call from a
//!     member's address, else the connection's; it passes the settled address on.
//!   - `grpc/trace.rs`: the outermost tower layer with telemetry on: each call in a `grpc.request`
//!     span continuing the caller's `traceparent`.
//!   - `grpc/forward.rs`: a tower layer in front of the public services: on a follower, forwards
//!     each call once, unchanged but for its `traceparent` (the `grpc.forward` span's, with
//!     telemetry on), to the leader's API over a reused channel and relays the answer (streams
//!     included); never the operator service, stale reads, health or reflection; a failed forward
//!     logged once per 10 s per leader. It is also the fence of a node whose raft core stopped:
//!     every public call refused UNAVAILABLE with the reason.
//!   - `grpc/oversize.rs`: a tower layer in front of every service: tonic's bare refusal of a
//!     request over `api.max_message_bytes` becomes a `LIMIT_EXCEEDED` rejection naming `request`
//!     (L4), like every other limit.
//! - [`console`]: the read-only web console at `/ui/` (embedded page, read tools through the MCP
//!   door's call path, the cluster view); described in `docs/console.md`. `console/index.html`,
//!   `app.js` and `style.css` (plain files, no build step) are compiled in with `include_str!` and
//!   served from memory under a CSP that allows only this origin's script and style.
//!   `POST /ui/api/tools/TOOL` serves a read tool of the MCP registry through the MCP door's own call
//!   path (`Door::call_read_tool`, the request's `Authorization` forwarded as `/mcp` forwards it),
//!   not a handler of its own. `GET /ui/api/watch/turn`, `/ui/api/watch/thread/THREAD` and
//!   `/ui/api/watch/record/RECORD` are the live view: the node's own watch feeds opened through the
//!   MCP door's call path (`Door::open_watch`, one gRPC WatchTurn, WatchThread or WatchRecord call
//!   with the request's key, forwarded to the leader by a follower) and relayed as Server-Sent
//!   Events, each event the feed's message in the door's JSON mapping with its resume point as the
//!   SSE id (`Last-Event-ID` resumes with no gap and no duplicate), bounded in lifetime and ended by
//!   the node's shutdown. `GET /ui/api/cluster` is this node's `ClusterStatus` and every other
//!   member's (asked at its API with the operator token, 1.5 s each, unreachable shown as such),
//!   open to loopback clients or guarded by the operator token (`console.cluster_view`). All check
//!   `Host` and `Origin` with the MCP door's lists (`kungfu_mcp::http::admits`) and answer `no-store`.
//! - [`http`]: the HTTP listener (`http_listen`), where the MCP door (`kungfu-mcp`) is mounted at
//!   `/mcp` as a client of this node's own API, with axum (and the console at `/ui/`). The door
//!   calls the API's service stack (`grpc::ApiStack`) in process, no socket between, so MCP calls
//!   pass the gRPC door's layers, authentication, forwarding, limits and codes unchanged; it hands
//!   over each client's address (`ConnectInfo`) with the call, so per-address limits see the MCP
//!   client. Beside it the probes: `/healthz` (alive) and `/readyz` (200 or 503 with the reason,
//!   from `Backend::readiness`), and `/metrics`.
//! - [`metrics`]: Prometheus metrics, on by default (actions, refusals, raft, actors, process, disk, build):
//!   one process-wide recorder, every family described (`# HELP`, checked by `promtool` in
//!   `tests/node.rs`); `/metrics` on the HTTP listener (or alone on `metrics_listen`): actions by
//!   kind and outcome, latency, edge refusals, process (CPU, RSS, fds, via `metrics-process`),
//!   `kungfu_build_info` (version, commit, rustc, build date), the data directory's bytes, each
//!   part's (`kungfu_data_dir_part_bytes`) and its filesystem's free and total bytes (read at
//!   scrape), each store's memory by part (`kungfu_store_memory_bytes`: memtables, table readers,
//!   block cache), the raft log's fsync times (`kungfu_raft_log_sync_seconds`, drained from the log
//!   store every second), and every second the raft gauges (term, leader, indexes, commit and apply
//!   lag, voters, follower lag, RPC timeouts and failures per peer), readiness, live actors and
//!   queued actions, deadline lateness.
//! - [`ratelimit`]: per-agent rate limits at the edge (L4), refused with `retry_after`: write and
//!   read rates per agent and registrations per address (governor), refused with `RATE_LIMITED`.
//! - [`secrets`]: generation of agent keys and admission grants.
//! - [`server`]: start, bootstrap, serve, shut down. It runs the scheduler, the wake deliverer, sweeper and gauges,
//!   serves through `grpc::serve` and, when `http_listen` is set, `http::serve` (the MCP, metrics
//!   and probe URLs in the start-up line), and shuts down on SIGTERM (watch streams and MCP streams
//!   ended first; connections still open after a 5 s grace are dropped). It fences the node when
//!   its raft core stops (`kungfu_raft::fatal::core_stopped`): one ERROR line, not ready and calls
//!   refused for `FENCE_HOLD` (1 s), then the SIGTERM path and an error, so `kungfud` exits 1 for
//!   its supervisor to restart it. The test-only `KUNGFU_FAULT_RAFT_LOG` arms a fault of the log
//!   store.
//! - [`telemetry`]: OpenTelemetry spans over OTLP when `[telemetry] otlp_endpoint` is set: the
//!   OTLP/gRPC span exporter (tonic, on the node's runtime) with a batch processor, the resource
//!   (`service.name`, `service.instance.id` = node id), parent-based ratio sampling, and the
//!   `tracing-opentelemetry` layer with a filter of its own (the node's spans down to DEBUG), so the
//!   DEBUG spans cost nothing when it is off; flushed by `Telemetry::shutdown` after the node stops.
//! - [`wake`]: wake webhooks (issue #35, docs/wake.md). `wake/mod.rs`: the leader's deliverer,
//!   driven by the fact feed: dirty agents' turns read every `wake.coalesce_ms`, one event per
//!   target at a time queued, acknowledged and given up through one `RecordWake` system command per
//!   round (the replicated outbox a new leader resumes from), delivery ids and bodies derived from
//!   the replicated event alone. `wake/policy.rs`: where a target may point (`[wake]` schemes, host
//!   patterns, no private, loopback or link-local address unless `allow_private`). `wake/send.rs`:
//!   one signed Standard Webhooks POST, every resolved address checked and the connection pinned to
//!   a checked one, the full-jitter backoff.
//! - [`canary`]: deliberate bugs for the chaos harness (`skip-dedup`, `early-deadlines`,
//!   `record-lww`), compiled in only with the cargo feature `canary` and armed by `KUNGFU_CANARY`;
//!   without the feature, nothing of them is built.
//!
//! The binary, `src/bin/kungfud.rs`: `kungfud [--config FILE]` runs a node, `kungfud restore --from`
//! adopts a backup, `kungfud check-config FILE` validates a config and prints what it would run
//! (exit 2 on a bad setting, naming it); `--log-format text|json` (`KUNGFU_LOG_FORMAT`), ANSI colour
//! only on a terminal without `NO_COLOR`, default filter `info,openraft=error`; with `[telemetry]`
//! on, the OpenTelemetry layer beside the log lines, each with its own filter, and the exporter
//! flushed after the node stops; a failure prints `error: …` with its causes, never a backtrace, and
//! exits 2 for a configuration error, 1 otherwise; `--version` names the commit and build date
//! (`crates/build_info.rs`). mimalloc is its global allocator: glibc's malloc cost about an eighth of
//! a node's CPU per post.

pub mod actors;
pub mod admin;
pub mod backend;
pub mod canary;
pub mod config;
pub mod console;
pub mod credentials;
pub mod deadlines;
pub mod grpc;
pub mod http;
pub mod metrics;
pub mod ratelimit;
pub mod reads;
pub mod secrets;
pub mod server;
pub mod telemetry;
pub mod wake;
pub mod watch;

pub use config::Config;
