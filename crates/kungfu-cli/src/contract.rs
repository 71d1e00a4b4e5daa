//! Task contract files: the fields of a contract in TOML or JSON, turned into a `ContractDraft`.
//!
//! ```toml
//! audience = ["ag_2", "ag_3"]        # optional; absent means open (create only)
//! requirements = "Summarise the incident."
//! output_structure = "markdown"      # optional
//! inputs = ["mem_4@1"]               # optional pinned Memory versions
//! references = "..."                 # optional
//! acceptance = "..."                 # optional
//! delivery_window_secs = 3600        # optional, default: the server's
//! judgment_window_secs = 3600        # optional
//! on_missing_judgment = "adopted"    # or "undecided"; optional
//! judge = "ag_5"                     # optional; default: the author
//! max_adoptions = 2                  # optional
//! [eligibility]                      # optional
//! registered_before_unix_micros = 1700000000000000
//! excluded = ["ag_9"]
//! ```

use crate::error::CliError;
use kungfu_client::pb;
use serde::Deserialize;

/// A contract as a file states it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContractFile {
    #[serde(default)]
    pub audience: Option<Vec<String>>,
    pub requirements: String,
    #[serde(default)]
    pub output_structure: Option<String>,
    #[serde(default)]
    pub inputs: Vec<String>,
    #[serde(default)]
    pub references: Option<String>,
    #[serde(default)]
    pub acceptance: Option<String>,
    #[serde(default)]
    pub delivery_window_secs: Option<u64>,
    #[serde(default)]
    pub judgment_window_secs: Option<u64>,
    #[serde(default)]
    pub on_missing_judgment: Option<String>,
    #[serde(default)]
    pub judge: Option<String>,
    #[serde(default)]
    pub max_adoptions: Option<u32>,
    #[serde(default)]
    pub eligibility: Option<EligibilityFile>,
}

/// The eligibility part of a contract file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EligibilityFile {
    #[serde(default)]
    pub registered_before_unix_micros: Option<i64>,
    #[serde(default)]
    pub excluded: Vec<String>,
}

/// Parses a contract from text; `json` chooses the format, otherwise JSON is recognised by a
/// leading `{`.
pub fn parse(text: &str, json: bool) -> Result<ContractFile, CliError> {
    if json || text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| CliError::usage(format!("the contract is not valid JSON: {e}")))
    } else {
        toml::from_str(text).map_err(|e| CliError::usage(format!("the contract is not valid TOML: {e}")))
    }
}

/// A pin written `mem_5@2` (or `mem_5:2`).
pub fn pin(s: &str) -> Result<pb::MemoryPin, CliError> {
    let (memory, version) = s
        .split_once('@')
        .or_else(|| s.split_once(':'))
        .ok_or_else(|| CliError::usage(format!("`{s}` is not a pin: write mem_5@2")))?;
    let version = version.parse().map_err(|_| CliError::usage(format!("`{s}` has no valid version after @")))?;
    Ok(pb::MemoryPin { memory: memory.to_string(), version })
}

fn micros(secs: Option<u64>) -> Option<u64> {
    secs.map(|s| s.saturating_mul(1_000_000))
}

impl ContractFile {
    /// The contract draft of the request.
    pub fn draft(&self) -> Result<pb::ContractDraft, CliError> {
        let on_missing_judgment = match self.on_missing_judgment.as_deref() {
            None => pb::MissingJudgment::Unspecified,
            Some("adopted") => pb::MissingJudgment::Adopted,
            Some("undecided") => pb::MissingJudgment::Undecided,
            Some(other) => {
                return Err(CliError::usage(format!(
                    "on_missing_judgment `{other}` is not one of: adopted, undecided"
                )));
            }
        };
        Ok(pb::ContractDraft {
            requirements: kungfu_client::text(&self.requirements),
            output_structure: self.output_structure.as_deref().and_then(kungfu_client::text),
            inputs: self.inputs.iter().map(|p| pin(p)).collect::<Result<_, _>>()?,
            references: self.references.as_deref().and_then(kungfu_client::text),
            delivery_window_micros: micros(self.delivery_window_secs),
            judgment_window_micros: micros(self.judgment_window_secs),
            on_missing_judgment: on_missing_judgment as i32,
            acceptance: self.acceptance.as_deref().and_then(kungfu_client::text),
            judge: self.judge.clone(),
            eligibility: self.eligibility.as_ref().map(|e| pb::Eligibility {
                registered_before_unix_micros: e.registered_before_unix_micros,
                excluded: e.excluded.clone(),
            }),
            max_adoptions: self.max_adoptions,
        })
    }

    /// The audience: restricted to the named agents when it names any, otherwise open.
    pub fn audience(&self, flag: &[String]) -> pb::Audience {
        let named: Vec<String> =
            if flag.is_empty() { self.audience.clone().unwrap_or_default() } else { flag.to_vec() };
        let kind = if named.is_empty() {
            pb::audience::Kind::Open(pb::OpenAudience {})
        } else {
            pb::audience::Kind::Restricted(pb::RestrictedAudience { agents: named })
        };
        pb::Audience { kind: Some(kind) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_and_json_contracts_parse() -> Result<(), String> {
        let t =
            parse("requirements = \"r\"\ninputs = [\"mem_1@2\"]\nmax_adoptions = 2\n", false).map_err(|e| e.message)?;
        let d = t.draft().map_err(|e| e.message)?;
        assert_eq!(d.inputs[0].version, 2);
        assert_eq!(d.max_adoptions, Some(2));
        let j = parse("{\"requirements\": \"r\", \"audience\": [\"ag_2\"]}", false).map_err(|e| e.message)?;
        assert!(matches!(j.audience(&[]).kind, Some(pb::audience::Kind::Restricted(_))));
        assert!(parse("requirement = \"typo\"", false).is_err());
        Ok(())
    }
}
