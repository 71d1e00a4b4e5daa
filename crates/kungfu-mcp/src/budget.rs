//! [`Budget`]: what `tools/list` costs a host, per toolset selection (issue #31). A host pays the
//! whole `tools/list` answer once per session (and holds it in memory); it puts the model-facing
//! part of every tool (name, description, input schema) in front of its model on every turn, so
//! that part is what a tool budget is about. [`MAX_DEFAULT_MODEL_BYTES`] and [`MAX_LIST_BYTES`]
//! are the limits the tests hold the door to: raise them on purpose, in review, never silently.
//!
//! Bytes are of compact JSON as the door serializes it (`serde_json`, the same bytes a host
//! receives in the result of `tools/list`, without the JSON-RPC envelope). Tokens are estimated at
//! [`BYTES_PER_TOKEN`] bytes each, the usual rule of thumb for English and JSON; a real tokenizer
//! may count schema punctuation denser.

use crate::registry::registry;
use crate::toolsets::{Toolset, Toolsets};
use rmcp::model::ListToolsResult;
use serde_json::json;

/// The most bytes the model-facing part of the default toolset may take.
pub const MAX_DEFAULT_MODEL_BYTES: usize = 40_000;
/// The most bytes the whole `tools/list` answer may take, with every toolset selected.
pub const MAX_LIST_BYTES: usize = 150_000;
/// The estimate of bytes per token.
pub const BYTES_PER_TOKEN: usize = 4;

/// The cost of one selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub toolsets: Toolsets,
    pub tools: usize,
    /// The `tools/list` result: every field of every tool, output schemas and annotations too.
    pub list_bytes: usize,
    /// Name, description and input schema of every tool: what a host shows its model.
    pub model_bytes: usize,
}

impl Budget {
    /// Measures the tools `toolsets` selects.
    pub fn measure(toolsets: Toolsets) -> Budget {
        let tools: Vec<_> = registry().tools_in(toolsets).map(|t| t.tool.clone()).collect();
        let model_bytes = tools
            .iter()
            .map(|t| {
                let facing =
                    json!({"name": t.name, "description": t.description, "inputSchema": t.input_schema.as_ref()});
                serde_json::to_vec(&facing).map_or(0, |v| v.len())
            })
            .sum();
        let count = tools.len();
        let list = ListToolsResult::with_all_items(tools);
        let list_bytes = serde_json::to_vec(&list).map_or(0, |v| v.len());
        Budget { toolsets, tools: count, list_bytes, model_bytes }
    }

    /// The estimated tokens of the model-facing part.
    pub fn model_tokens(&self) -> usize {
        self.model_bytes.div_ceil(BYTES_PER_TOKEN)
    }
}

/// The selections `docs/mcp.md` states: the default set, each opt-in set beside it, and all.
pub fn selections() -> Vec<Toolsets> {
    let mut out = vec![Toolsets::default()];
    out.extend(Toolset::ALL.into_iter().filter(|t| *t != Toolset::Default).map(|t| Toolsets::default().with(t)));
    out.push(Toolsets::all());
    out
}

/// The budget table of `docs/mcp.md`: one row per selection.
pub fn markdown() -> String {
    let mut out = String::from(
        "| toolsets | tools | `tools/list` bytes | model-facing bytes (name + description + input schema) | ≈ tokens |\n|---|---|---|---|---|\n",
    );
    for sets in selections() {
        let b = Budget::measure(sets);
        out.push_str(&format!(
            "| `{sets}` | {} | {} | {} | {} |\n",
            b.tools,
            thousands(b.list_bytes),
            thousands(b.model_bytes),
            thousands(b.model_tokens())
        ));
    }
    out
}

/// 101743 as `101,743`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(7), "7");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(1_087_536), "1,087,536");
    }
}
