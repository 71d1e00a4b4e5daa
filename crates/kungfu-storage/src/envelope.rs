//! The one place persisted values are encoded. Every value on disk is a version byte followed by the
//! bincode encoding of the value (`kungfu_core::codec`): a later format adds a version and keeps
//! reading the old one, so the raft log — kept for as long as it is not purged — stays readable.

use crate::error::Error;
use kungfu_types::GroupId;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The current envelope version.
pub const V1: u8 = 1;

/// The envelope of a value that names the raft group it belongs to (issue #19, deliverable 3),
/// for the values whose format must say their group (snapshot meta): the byte 2, the group
/// (u16, big-endian, so it is read without decoding the value), then the value's bincode.
/// Written only for a group other than 0: a group-0 value is its plain [`V1`] envelope, the bytes
/// of before groups existed, so every release so far reads what group 0 writes (the upgrade rule
/// of `docs/ARCHITECTURE.md`). A V2 value naming group 0 is refused: one encoding per value.
pub const V2_GROUPED: u8 = 2;

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

/// `value` of `group`, enveloped: [`V1`] for group 0, [`V2_GROUPED`] for any other.
pub fn encode_grouped<T: Serialize>(group: GroupId, value: &T) -> Vec<u8> {
    if group == GroupId::ZERO {
        return encode(value);
    }
    let body = kungfu_core::codec::encode(value);
    let mut out = Vec::with_capacity(body.len() + 3);
    out.push(V2_GROUPED);
    out.extend_from_slice(&group.to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// The group a grouped envelope names, read without decoding its value: group 0 for [`V1`].
pub fn group_of(bytes: &[u8], what: &str) -> Result<GroupId, Error> {
    match bytes {
        [V1, ..] => Ok(GroupId::ZERO),
        [V2_GROUPED, hi, lo, ..] => match GroupId(u16::from_be_bytes([*hi, *lo])) {
            GroupId::ZERO => Err(Error::Corrupt { what: format!("{what}: group 0 in a grouped envelope") }),
            g => Ok(g),
        },
        [V2_GROUPED, ..] => Err(Error::Corrupt { what: format!("{what}: grouped envelope without its group") }),
        [v, ..] => Err(Error::Corrupt { what: format!("{what}: unknown envelope version {v}") }),
        [] => Err(Error::Corrupt { what: format!("{what}: empty value") }),
    }
}

/// Decodes what [`encode_grouped`] wrote: the value and its group.
pub fn decode_grouped<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<(GroupId, T), Error> {
    match group_of(bytes, what)? {
        GroupId::ZERO => Ok((GroupId::ZERO, decode(bytes, what)?)),
        g => kungfu_core::codec::decode(&bytes[3..])
            .map(|v| (g, v))
            .map_err(|e| Error::Corrupt { what: format!("{what}: {e}") }),
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

    #[test]
    fn grouped_values_are_v1_in_group_zero_and_name_any_other_group() {
        let v = (7u64, "x".to_string());
        assert_eq!(encode_grouped(GroupId::ZERO, &v), encode(&v), "group 0 writes the bytes of before groups");
        let g5 = encode_grouped(GroupId(5), &v);
        assert_eq!(g5[..3], [V2_GROUPED, 0, 5]);
        assert_eq!(group_of(&g5, "t").ok(), Some(GroupId(5)));
        assert_eq!(decode_grouped::<(u64, String)>(&g5, "t").ok(), Some((GroupId(5), v.clone())));
        assert_eq!(decode_grouped::<(u64, String)>(&encode(&v), "t").ok(), Some((GroupId::ZERO, v.clone())));
        // One encoding per value: V2 never names group 0; and a plain decoder refuses V2.
        let mut zero = g5.clone();
        zero[2] = 0;
        assert!(decode_grouped::<(u64, String)>(&zero, "t").is_err());
        assert!(decode::<(u64, String)>(&g5, "t").is_err());
        assert!(group_of(&g5[..2], "t").is_err());
    }
}
