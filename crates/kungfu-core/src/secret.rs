//! One-time secrets (L3, §6.1, §12): an agent's bearer key and an admission grant. The secret is
//! generated outside the core (the core has no randomness); the core sees only its SHA-256 hash
//! and a non-secret fingerprint, and the secret itself reaches the caller only in the first
//! response, never in a receipt or the log.

use kungfu_types::{Fingerprint, SecretHash};
use sha2::{Digest, Sha256};

/// SHA-256 of a secret. Secrets are 256-bit random values, so a plain hash is enough (no
/// password-style stretching is needed against guessing).
pub fn hash_secret(secret: &str) -> SecretHash {
    SecretHash(Sha256::digest(secret.as_bytes()).into())
}

/// A label that identifies a secret to people without revealing it: its first 6 and last 4
/// characters, joined by `...`. ASCII, so a client can send it in a gRPC header (issue #16: it
/// used to be joined by `…`; fingerprints recorded before keep theirs).
pub fn fingerprint(secret: &str) -> Fingerprint {
    let chars: Vec<char> = secret.chars().collect();
    if chars.len() <= 12 {
        return Fingerprint("...".to_string());
    }
    let head: String = chars[..6].iter().collect();
    let tail: String = chars[chars.len() - 4..].iter().collect();
    Fingerprint(format!("{head}...{tail}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_is_ascii_and_shows_only_both_ends() {
        let fp = fingerprint("kf_ag_0123456789abcdef");
        assert_eq!(fp.0, "kf_ag_...cdef");
        assert!(fp.0.is_ascii());
        assert_eq!(fingerprint("short").0, "...", "a short secret shows nothing of itself");
    }
}
