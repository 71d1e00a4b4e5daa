//! The MCP door of Kungfu (issue #14): every agent call of the public API (`proto/kungfu/v1`) as
//! an MCP tool, served over Streamable HTTP at `/mcp` by every node and over stdio by the CLI.
//!
//! A transport stays at its door: the door re-implements no protocol call. Each tool call is one
//! gRPC call to a node's public API carrying the MCP request's bearer key, so authentication, the
//! `kungfu-api` validating boundary, forwarding from followers, rate limits and rejection codes
//! are exactly gRPC's, and both doors give the same answer to the same request.
//!
//! Table of contents:
//! - [`registry`]: the one registry of tools, built once from the descriptor set: names, schemas,
//!   descriptions, annotations, toolsets.
//! - [`toolsets`]: [`Toolsets`], which tools a connection is offered (the default set and the
//!   opt-in ones a host names).
//! - [`budget`]: what `tools/list` costs a host per selection, and the limits a test holds it to.
//! - [`json`]: the JSON mapping of arguments and results (content as text, 64-bit integers as
//!   numbers, enums by name, proto field names).
//! - [`schema`]: the JSON Schemas of that mapping, and proto comments as documentation.
//! - [`call`]: the generic gRPC call over a dynamic message.
//! - [`result`]: success and rejection results.
//! - [`door`]: [`Door`], the rmcp server handler.
//! - [`features`]: logging, resources and the prompt, besides the tools.
//! - [`waits`]: the long waits `turn_wait` and `barrier_wait`: a first read, then a bounded wait
//!   a watch feed wakes and a fresh read answers.
//! - [`tasks`]: [`Tasks`], long waits as MCP Tasks (the `io.modelcontextprotocol/tasks`
//!   extension) for hosts that declare it: the store, its owners and limits.
//! - [`http`]: [`http_router`] and [`HttpOptions`], the Streamable HTTP door.
//! - [`sessions`]: the bounded session manager of the 2025-11-25 revision.
//! - [`stdio`]: [`serve_stdio`], the stdio door.
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
pub mod tasks;
pub mod toolsets;
pub mod waits;

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
