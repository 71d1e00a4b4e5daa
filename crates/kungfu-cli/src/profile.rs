//! Profiles: named sets of endpoints, agent key and agent id, kept in
//! `$XDG_CONFIG_HOME/kungfu/profiles.toml` (or `~/.config/kungfu/profiles.toml`) and written by
//! `kungfu register`. The file holds bearer keys, so it is created readable only by its owner
//! (mode 0600) in a directory only its owner may enter (mode 0700).
//!
//! A profile may also name an operator token file, which `cluster` commands read when no `--key`
//! is given: `kungfu dev up` records its cluster's `<dir>/operator-token` (mode 0600) in the
//! profile `dev`. The profile holds the path, not the token, so a new `dev up` with a new token
//! needs no profile change.

use crate::error::CliError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;

/// One profile.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    /// The node endpoints, `host:port`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<String>,
    /// The agent's bearer key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_key: Option<String>,
    /// The agent's id (`ag_3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// The file holding the operator token that `cluster` commands send when no `--key` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_token_file: Option<String>,
}

/// The operator token in `path` (surrounding whitespace removed). A missing, unreadable or empty
/// file is a usage error that names the profile field and what to do.
pub fn read_operator_token(path: &str) -> Result<String, CliError> {
    let fix = "start the local cluster again with `kungfu dev up`, or pass the node's operator_token with --key";
    let fault = |what: String| CliError::usage(format!("{what}; {fix}")).with_field("operator_token_file");
    match std::fs::read_to_string(path) {
        Ok(text) if !text.trim().is_empty() => Ok(text.trim().to_string()),
        Ok(_) => Err(fault(format!("the operator token file {path} named by the profile is empty"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(fault(format!("the operator token file {path} named by the profile is gone (`dev down --purge`?)")))
        }
        Err(e) => Err(fault(format!("cannot read the operator token file {path} named by the profile: {e}"))),
    }
}

/// The whole profile file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profiles {
    /// The profiles by name.
    #[serde(default)]
    pub profiles: BTreeMap<String, Profile>,
}

/// The path of the profile file: under `$XDG_CONFIG_HOME` when it is set, else under `~/.config`.
pub fn path() -> Result<PathBuf, CliError> {
    let base = match std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(home) => PathBuf::from(home).join(".config"),
            None => return Err(CliError::other("neither XDG_CONFIG_HOME nor HOME is set: no place for profiles")),
        },
    };
    Ok(base.join("kungfu").join("profiles.toml"))
}

/// Reads the profile file; a missing file is an empty one.
pub fn load() -> Result<Profiles, CliError> {
    let path = path()?;
    match std::fs::read_to_string(&path) {
        Ok(text) => toml::from_str(&text)
            .map_err(|e| CliError::usage(format!("the profile file {} is not valid: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Profiles::default()),
        Err(e) => Err(CliError::other(format!("cannot read {}: {e}", path.display()))),
    }
}

/// Stores `profile` under `name`, keeping the other profiles, and returns the file's path. The file
/// is written to a temporary sibling with mode 0600 and renamed over the old one, so it is never
/// readable by others, not even for a moment.
pub fn save(name: &str, profile: Profile) -> Result<PathBuf, CliError> {
    let path = path()?;
    let mut all = load()?;
    all.profiles.insert(name.to_string(), profile);
    let text = toml::to_string_pretty(&all).map_err(|e| CliError::other(format!("cannot encode profiles: {e}")))?;
    let dir = path.parent().ok_or_else(|| CliError::other("the profile path has no directory"))?;
    let io = |what: &str, e: std::io::Error| CliError::other(format!("cannot {what} {}: {e}", dir.display()));
    if !dir.exists() {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|e| io("create", e))?;
    }
    let tmp = dir.join(format!(".profiles.toml.{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| io("write in", e))?;
    // The mode given at creation is reduced by the umask and ignored for an existing file: set it.
    file.set_permissions(std::fs::Permissions::from_mode(0o600)).map_err(|e| io("protect a file in", e))?;
    file.write_all(text.as_bytes()).map_err(|e| io("write in", e))?;
    file.sync_all().map_err(|e| io("write in", e))?;
    std::fs::rename(&tmp, &path).map_err(|e| io("replace the profile file in", e))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_empty_token_file_names_the_field_and_the_fix() {
        let dir = tempfile::tempdir().expect("tempdir");
        let gone = dir.path().join("operator-token").display().to_string();
        let e = read_operator_token(&gone).expect_err("a missing file");
        assert_eq!(
            (e.code.as_str(), e.field.as_deref(), e.next.as_str()),
            ("USAGE", Some("operator_token_file"), "revise")
        );
        assert!(e.message.contains(&gone) && e.message.contains("kungfu dev up"), "{}", e.message);
        std::fs::write(&gone, "  \n").expect("write");
        assert!(read_operator_token(&gone).expect_err("empty").message.contains("is empty"));
        std::fs::write(&gone, "dev-token-1\n").expect("write");
        assert_eq!(read_operator_token(&gone).expect("a token"), "dev-token-1");
    }

    #[test]
    fn a_profile_without_a_token_file_reads_and_writes_as_before() {
        let old = "[profiles.a]\nendpoints = [\"127.0.0.1:7400\"]\nagent_key = \"kf\"\n";
        let all: Profiles = toml::from_str(old).expect("an older profile file");
        assert_eq!(all.profiles["a"].operator_token_file, None);
        let text = toml::to_string_pretty(&all).expect("encode");
        assert!(!text.contains("operator_token_file"), "{text}");
    }
}
