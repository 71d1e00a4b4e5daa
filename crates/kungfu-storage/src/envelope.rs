//! The one place persisted values are encoded. Every value on disk is a version byte followed by the
//! bincode encoding of the value (`kungfu_core::codec`): a later format adds a version and keeps
//! reading the old one, so the raft log — kept for as long as it is not purged — stays readable.

use crate::error::Error;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The current envelope version.
pub const V1: u8 = 1;

pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let body = kungfu_core::codec::encode(value);
    let mut out = Vec::with_capacity(body.len() + 1);
    out.push(V1);
    out.extend_from_slice(&body);
    out
}

pub fn decode<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, Error> {
    match bytes.split_first() {
        Some((&V1, body)) => {
            kungfu_core::codec::decode(body).map_err(|e| Error::Corrupt { what: format!("{what}: {e}") })
        }
        Some((v, _)) => Err(Error::Corrupt { what: format!("{what}: unknown envelope version {v}") }),
        None => Err(Error::Corrupt { what: format!("{what}: empty value") }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_unknown_versions_are_refused() {
        let bytes = encode(&(7u64, "x".to_string()));
        assert_eq!(bytes[0], V1);
        assert_eq!(decode::<(u64, String)>(&bytes, "t").ok(), Some((7, "x".to_string())));
        let mut future = bytes.clone();
        future[0] = 9;
        assert!(matches!(decode::<(u64, String)>(&future, "t"), Err(Error::Corrupt { .. })));
        assert!(decode::<(u64, String)>(&[], "t").is_err());
        assert!(decode::<(u64, String)>(&bytes[..2], "t").is_err());
    }
}
