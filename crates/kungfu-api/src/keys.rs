//! Idempotency keys a client makes for itself (L3): the SDK for a write the caller gave no key, the
//! MCP door for a tool call without one. Here, not in the SDK, so a door needs no client library.

/// A new idempotency key: `sdk-` and 128 random bits in the 8-4-4-4-12 hex form of a UUID.
pub fn new_idempotency_key() -> Result<String, getrandom::Error> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b)?;
    let h = hex::encode(b);
    Ok(format!("sdk-{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32]))
}

/// How often a barrier wait (the SDK's `wait_barrier`, the MCP door's `barrier_wait`) reads the
/// barrier again when no entry arrives. A reply is an entry and wakes the wait at once; handling
/// an entry, leaving, a demotion and a retraction end a response without posting one, so no thread
/// event tells of them, and only a read does.
pub const BARRIER_RECHECK: std::time::Duration = std::time::Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_fresh_and_in_the_uuid_form_behind_their_prefix() {
        let (a, b) = (new_idempotency_key().expect("randomness"), new_idempotency_key().expect("randomness"));
        assert_ne!(a, b);
        let body = a.strip_prefix("sdk-").expect("prefix");
        let parts: Vec<usize> = body.split('-').map(str::len).collect();
        assert_eq!(parts, [8, 4, 4, 4, 12], "{a}");
        assert!(body.chars().all(|c| c == '-' || c.is_ascii_hexdigit()), "{a}");
    }
}
