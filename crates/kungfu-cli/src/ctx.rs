//! What every command shares: the context (client, output mode, key), where the endpoints and the
//! key come from, reading a path, and printing a write's outcome or a failed stream.

use crate::cli::Cli;
use crate::error::CliError;
use crate::output::{self, cell, pairs, to_json};
use crate::profile::{self, Profile};
use kungfu_client::{Client, ClientOptions, pb};
use serde_json::{Value, json};
use std::io::Read;

/// The endpoint used when no flag, environment variable or profile names one.
pub const DEFAULT_ENDPOINT: &str = "127.0.0.1:7400";

/// The most turn and timeline pages one command reads.
pub(crate) const MAX_PAGES: usize = 1000;

/// What every command needs: the client, the output mode and the idempotency key asked for.
pub(crate) struct Ctx {
    pub(crate) client: Client,
    pub(crate) json: bool,
    pub(crate) key: Option<String>,
    pub(crate) options: ClientOptions,
    /// Where the key sent came from, so a refused operator token is explained.
    pub(crate) key_source: KeySource,
}

/// Where a command's key came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeySource {
    /// `--key` or `KUNGFU_KEY`.
    Given,
    /// The profile's agent key.
    ProfileAgentKey,
    /// The operator token file the profile names (`kungfu dev up` records it in the profile `dev`).
    ProfileOperatorToken(String),
    /// No key at all.
    None,
}

/// The key of a command: `--key` or `KUNGFU_KEY`, else for an operator command the token in the
/// profile's operator token file, else the profile's agent key.
pub(crate) fn command_key(
    given: Option<String>,
    saved: &Profile,
    operator: bool,
) -> Result<(Option<String>, KeySource), CliError> {
    if let Some(k) = given.filter(|k| !k.is_empty()) {
        return Ok((Some(k), KeySource::Given));
    }
    if let (true, Some(file)) = (operator, saved.operator_token_file.as_ref()) {
        return Ok((Some(profile::read_operator_token(file)?), KeySource::ProfileOperatorToken(file.clone())));
    }
    Ok(match &saved.agent_key {
        Some(k) => (Some(k.clone()), KeySource::ProfileAgentKey),
        None => (None, KeySource::None),
    })
}

impl Ctx {
    /// The client acting as the agent, or a usage error when no key is known.
    pub(crate) fn agent(&self) -> Result<&Client, CliError> {
        match self.client.key() {
            Some(_) => Ok(&self.client),
            None => Err(CliError::usage(
                "no agent key: pass --key, set KUNGFU_KEY, or run `kungfu register` to save one in the profile",
            )),
        }
    }

    pub(crate) fn idem(&self) -> Option<String> {
        self.key.clone()
    }
}

/// The endpoints of a command: `--endpoint` (or `KUNGFU_ENDPOINTS`), else the profile's, else
/// [`DEFAULT_ENDPOINT`].
pub(crate) fn endpoints(cli: &Cli, saved: &Profile) -> Vec<String> {
    if !cli.endpoints.is_empty() {
        cli.endpoints.iter().map(|e| e.trim().to_string()).filter(|e| !e.is_empty()).collect()
    } else if !saved.endpoints.is_empty() {
        saved.endpoints.clone()
    } else {
        vec![DEFAULT_ENDPOINT.to_string()]
    }
}

/// Reads bytes from a path, or from stdin for `-`.
pub(crate) fn read_path(path: &str) -> Result<Vec<u8>, CliError> {
    if path == "-" {
        let mut buf = Vec::new();
        std::io::stdin().read_to_end(&mut buf).map_err(|e| CliError::usage(format!("cannot read stdin: {e}")))?;
        Ok(buf)
    } else {
        std::fs::read(path).map_err(|e| CliError::usage(format!("cannot read {path}: {e}")))
    }
}

/// Prints the outcome of a write: its receipt, whether it was replayed, the key it used, and
/// `extra` fields (such as a one-time secret).
pub(crate) fn written(ctx: &Ctx, receipt: &Option<pb::Receipt>, replayed: bool, key: &str, extra: Vec<(&str, Value)>) {
    let receipt_json = receipt.as_ref().map(to_json).unwrap_or(Value::Null);
    if ctx.json {
        let mut v = json!({ "receipt": receipt_json, "replayed": replayed, "idempotency_key": key });
        for (k, x) in extra {
            v[k] = x;
        }
        output::print_json(&v);
        return;
    }
    let kind = receipt.as_ref().map(|r| r.kind.clone()).unwrap_or_default();
    let seq = receipt.as_ref().and_then(|r| r.seq).map(|s| format!(" (seq {s})")).unwrap_or_default();
    println!("ok: {kind}{seq}{}", if replayed { " (replayed: the stored result of this key)" } else { "" });
    let mut rows = output::result_rows(&receipt_json);
    for (k, v) in extra {
        // A field the receipt already shows (such as the new agent's id) is shown once.
        if !rows.iter().any(|(shown, _)| shown == k) {
            rows.push((k.to_string(), cell(k, &v)));
        }
    }
    rows.push(("idempotency key".to_string(), key.to_string()));
    let borrowed: Vec<(&str, String)> = rows.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    pairs(&borrowed);
}

/// A failed stream as a CLI error with its stable code.
pub(crate) fn status_error(s: kungfu_client::GrpcStatus) -> CliError {
    match kungfu_client::status_rejection(&s) {
        Some(r) => CliError::from(kungfu_client::Error::Rejected(r)),
        None => CliError::other(format!("the stream failed: {s}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operator_commands_send_the_profiles_token_file_unless_a_key_is_given() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("operator-token");
        std::fs::write(&file, "dev-operator-token-1\n").expect("write");
        let file = file.display().to_string();
        let saved = Profile {
            agent_key: Some("kf_ag_1".into()),
            operator_token_file: Some(file.clone()),
            ..Profile::default()
        };
        let (key, source) = command_key(None, &saved, true).expect("the token file");
        assert_eq!((key.as_deref(), source), (Some("dev-operator-token-1"), KeySource::ProfileOperatorToken(file)));
        let (key, source) = command_key(Some("given".into()), &saved, true).expect("a given key");
        assert_eq!((key.as_deref(), source), (Some("given"), KeySource::Given), "--key beats the profile");
        let (key, source) = command_key(None, &saved, false).expect("an agent command");
        assert_eq!((key.as_deref(), source), (Some("kf_ag_1"), KeySource::ProfileAgentKey), "agents never send it");
        let gone = Profile { operator_token_file: Some(dir.path().join("gone").display().to_string()), ..saved };
        let e = command_key(None, &gone, true).expect_err("a missing token file");
        assert_eq!(e.field.as_deref(), Some("operator_token_file"));
        assert_eq!(command_key(None, &Profile::default(), true).expect("no key").1, KeySource::None);
    }
}
