//! What identifies a logical request (L3): the idempotency key chosen by the client, the digest of
//! the request, and the hashes that stand in for one-time secrets.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A client-chosen idempotency key: 1 to 128 characters of `[A-Za-z0-9._~-]`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    pub const MAX_LEN: usize = 128;

    /// Validates the key's form. The error names what is wrong so the boundary can report it.
    pub fn new(key: impl Into<String>) -> Result<IdempotencyKey, &'static str> {
        let key = key.into();
        if key.is_empty() {
            return Err("must not be empty");
        }
        if key.len() > Self::MAX_LEN {
            return Err("must be at most 128 characters");
        }
        if !key.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'-')) {
            return Err("may contain only A-Z a-z 0-9 . _ ~ -");
        }
        Ok(IdempotencyKey(key))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// SHA-256 over the canonical encoding of a request's semantic inputs.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RequestDigest(pub [u8; 32]);

impl fmt::Debug for RequestDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RequestDigest({})", hex::encode(&self.0[..8]))
    }
}

/// SHA-256 of a secret (an agent key or an admission grant). Only this is stored (§12).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SecretHash(pub [u8; 32]);

impl fmt::Debug for SecretHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretHash({}…)", hex::encode(&self.0[..4]))
    }
}

/// A non-secret label of a secret (its first and last characters), safe to show on replay.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Fingerprint(pub String);

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The signing secret of a wake target (issue #35): 32 random bytes made by the door. Unlike an
/// agent key it is kept whole, because whichever node leads must sign deliveries with it; it is
/// returned in the first response only and never by a read (§12), and never printed.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WakeSecret(pub [u8; 32]);

impl fmt::Debug for WakeSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WakeSecret(…)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idempotency_key_form_is_checked() {
        assert!(IdempotencyKey::new("req-1.a_b~c").is_ok());
        assert!(IdempotencyKey::new("").is_err());
        assert!(IdempotencyKey::new("a b").is_err());
        assert!(IdempotencyKey::new("x".repeat(129)).is_err());
        assert!(IdempotencyKey::new("x".repeat(128)).is_ok());
    }
}
