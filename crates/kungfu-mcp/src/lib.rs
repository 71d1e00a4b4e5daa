//! The MCP door of Kungfu: every agent call of the public API (`proto/kungfu/v1`) as an MCP tool,
//! served over Streamable HTTP at `/mcp` by every node and over stdio by the CLI.
//!
//! A transport stays at its door: the door re-implements no protocol call. Each tool call is one
//! gRPC call to a node's public API carrying the MCP request's bearer key, so authentication, the
//! `kungfu-api` validating boundary, forwarding from followers, rate limits and rejection codes
//! are exactly gRPC's, and both doors give the same answer to the same request. Inside a node the
//! call goes to the node's own service stack in process, no socket between ([`Api::in_process`]);
//! the stdio door (`kungfu mcp`) calls over a channel ([`Api::network`]).
//!
//! Invariant: no protocol rule and no protocol state here (what it holds, sessions and tasks, is the
//! transport's, bounded and gone with its session); a tool call is exactly one call of the public
//! API, so MCP and gRPC give the same answer and code for the same request. Tool names are
//! noun_verb (`thread_post`, `assignment_take`, `turn_get`); every unary agent RPC of `kungfu.v1` is
//! one, plus the long waits `turn_wait` and `barrier_wait`.
//!
//! The server's web console uses this door too: it calls read tools through it
//! (`Door::call_read_tool`: the registry entry, caller and call path of `tools/call`, refusing any
//! tool without `readOnlyHint`), opens its live streams through it (`Door::open_watch`: WatchTurn,
//! WatchThread or WatchRecord as one gRPC streaming call, events in the door's JSON mapping), and
//! checks `Host` and `Origin` with `http::admits`, the door's rules.
//!
//! Table of contents (the files, and what each holds):
//! - [`registry`]: the one registry of tools, built once from the descriptor set: names, schemas,
//!   descriptions, annotations, toolsets; never written per RPC. Each write's output schema narrows
//!   the receipt to the case its action produces (`RECEIPTS`).
//! - [`toolsets`]: [`Toolsets`], which tools a connection is offered (the default set and the
//!   opt-in ones a host names): each tool belongs to a toolset by its service, `default` always,
//!   `coord` and `records` when a host names them in the URL's `toolsets` parameter, the
//!   `X-MCP-Toolsets` header or `kungfu mcp --toolsets`.
//! - [`budget`]: what `tools/list` costs a host per selection, and the limits a test holds it to (the
//!   table in `docs/mcp.md`).
//! - [`json`]: the JSON mapping of arguments and results (content as text, 64-bit integers as
//!   numbers, enums by name, proto field names): arguments to request messages, responses to
//!   `structuredContent`.
//! - [`schema`]: the JSON Schemas of that mapping, and proto comments as documentation (each thing
//!   said once per schema).
//! - [`call`]: the generic gRPC call over a dynamic message, carrying the caller's bearer key.
//! - [`result`]: success and rejection results: a `google.rpc.ErrorInfo` rejection becomes an
//!   `isError` result `{code, message, field, next_step, definite, retry_after_micros, fak_reason}`.
//! - [`door`]: [`Door`], the rmcp server handler, over one tonic channel, with each session's logging
//!   level.
//! - [`features`]: logging, resources and the prompt, besides the tools: logging events (a refusal,
//!   an unreachable node; structure only), resources (`kungfu://tools`, `kungfu://turn`,
//!   `kungfu://working-set/OBJECT`, each read a tool call) and the `kungfu_resume` prompt.
//! - [`waits`]: the long waits `turn_wait` and `barrier_wait`: a first read, then a bounded wait
//!   a watch feed wakes and a fresh read answers (`turn_wait` on `WatchTurn`, `barrier_wait` on
//!   `WatchThread` plus re-reads for the arrivals that post no entry).
//! - [`tasks`]: [`Tasks`], long waits as MCP Tasks (the `io.modelcontextprotocol/tasks`
//!   extension) for hosts that declare it: the store, its owners and limits. A long wait that would
//!   wait answers a task handle and waits in a keeper; each task is owned by its caller's key and
//!   session, bounded in number and time to live, stopped by `tasks/cancel` and by its session's end.
//! - [`http`]: [`http_router`] and [`HttpOptions`], the Streamable HTTP door that `kungfud` mounts:
//!   both protocol revisions on one path; allowed hosts and origins; a body bound; a session's
//!   DELETE answered 204.
//! - [`sessions`]: the bounded session manager of the 2025-11-25 revision.
//! - [`stdio`]: [`serve_stdio`], the stdio door that `kungfu mcp` runs.
//! - [`subscription`]: `resources/subscribe` of `kungfu://turn`: the session's turn watch, and
//!   `notifications/resources/updated` (the URI only) when the turn changes.
//! - [`error`]: [`Error`], what can stop a door.

pub mod budget;
pub mod call;
pub mod door;
pub mod error;
pub mod features;
pub mod http;
pub mod json;
pub mod registry;
pub mod result;
pub mod schema;
pub mod sessions;
pub mod stdio;
pub mod subscription;
pub mod tasks;
pub mod toolsets;
pub mod waits;

pub use call::Api;
pub use door::{Door, WatchEvents, WatchFeed};
pub use error::Error;
pub use http::{HttpOptions, http_router};
pub use stdio::serve_stdio;
pub use tasks::{TaskLimits, Tasks};
pub use toolsets::{Toolset, Toolsets};

/// Every tool name, in registry order.
pub fn tool_names() -> Vec<&'static str> {
    registry::registry().tools().iter().map(|t| t.name()).collect()
}

/// The tool list as a Markdown table, for `docs/mcp.md`: one row per tool with its toolset, its
/// RPC, whether it reads or writes, and its description.
pub fn tools_markdown() -> String {
    let mut out = String::from("| tool | set | RPC | kind | description |\n|---|---|---|---|---|\n");
    for spec in registry::registry().tools() {
        let tool = &spec.tool;
        let rpc = tool.title.clone().unwrap_or_default();
        let kind = match tool.annotations.as_ref() {
            Some(a) if a.read_only_hint == Some(true) => "read",
            Some(a) if a.destructive_hint == Some(true) => "write (destructive)",
            _ => "write",
        };
        let description = tool.description.as_deref().unwrap_or("").replace('|', "\\|");
        out.push_str(&format!("| `{}` | {} | `{rpc}` | {kind} | {description} |\n", tool.name, spec.toolset));
    }
    out
}
