//! One-time secrets: agent keys and admission grants. 256 random bits from the operating system,
//! hex-encoded behind a prefix that says what the secret is. Only their hashes reach the log (§12).

/// A new secret such as `kf_ag_<64 hex>` (agent key) or `kf_gr_<64 hex>` (grant).
pub fn generate(prefix: &str) -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(format!("{prefix}{}", hex::encode(bytes)))
}

pub const AGENT_KEY_PREFIX: &str = "kf_ag_";
pub const GRANT_PREFIX: &str = "kf_gr_";

/// A new secret, and what the core may know of it (its hash and fingerprint).
pub fn issue(prefix: &str) -> Result<(String, kungfu_api::SecretMaterial), kungfu_types::Rejection> {
    let s = generate(prefix).map_err(|e| {
        kungfu_types::Rejection::new(kungfu_types::Code::Unavailable, format!("no randomness available: {e}"))
    })?;
    let m = kungfu_api::SecretMaterial::of(&s);
    Ok((s, m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_prefixed_long_and_distinct() {
        let a = generate(AGENT_KEY_PREFIX).expect("random");
        let b = generate(AGENT_KEY_PREFIX).expect("random");
        assert!(a.starts_with("kf_ag_") && a.len() == 6 + 64);
        assert_ne!(a, b);
    }
}
