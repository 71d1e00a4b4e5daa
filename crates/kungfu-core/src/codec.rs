//! The one canonical binary encoding of the core's values (bincode 2, standard configuration,
//! through serde). Request digests and receipt bytes are computed with it, so it must never change
//! for a released value; storage wraps it in a versioned envelope of its own.

use serde::Serialize;
use serde::de::DeserializeOwned;

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

/// Encodes a value. Encoding our own types into a `Vec` cannot fail.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    match bincode::serde::encode_to_vec(value, config()) {
        Ok(bytes) => bytes,
        // Our types contain no maps with non-string keys or other shapes bincode refuses.
        Err(e) => panic!("bincode cannot encode a core value: {e}"),
    }
}

/// The length of a value's encoding, counted without building it (the raft network sizes its
/// batches by it).
pub fn encoded_len<T: Serialize>(value: &T) -> usize {
    let mut size = bincode::enc::write::SizeWriter::default();
    match bincode::serde::encode_into_writer(value, &mut size, config()) {
        Ok(()) => size.bytes_written,
        Err(e) => panic!("bincode cannot encode a core value: {e}"),
    }
}

/// The SHA-256 of a value's encoding, hashed as it is encoded: the same digest as hashing
/// [`encode`]'s bytes, without building them (a request's digest, L3, is taken on every write).
pub fn sha256<T: Serialize>(value: &T) -> [u8; 32] {
    use sha2::Digest;
    struct Hashing(sha2::Sha256);
    impl bincode::enc::write::Writer for Hashing {
        fn write(&mut self, bytes: &[u8]) -> Result<(), bincode::error::EncodeError> {
            self.0.update(bytes);
            Ok(())
        }
    }
    let mut w = Hashing(sha2::Sha256::new());
    match bincode::serde::encode_into_writer(value, &mut w, config()) {
        Ok(()) => w.0.finalize().into(),
        Err(e) => panic!("bincode cannot encode a core value: {e}"),
    }
}

/// Decodes a value, rejecting trailing bytes.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    let (value, read) = bincode::serde::decode_from_slice(bytes, config()).map_err(|e| e.to_string())?;
    if read != bytes.len() {
        return Err(format!("{} trailing bytes", bytes.len() - read));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::Digest;

    #[test]
    fn hashing_while_encoding_is_hashing_the_encoding() {
        let values = (42u64, "a string".to_string(), vec![0u8; 3000], Some(-7i32));
        assert_eq!(sha256(&values), <[u8; 32]>::from(sha2::Sha256::digest(encode(&values))));
        assert_eq!(sha256(&()), <[u8; 32]>::from(sha2::Sha256::digest(encode(&()))));
    }
}
