//! The canonical encoding (`kungfu_core::codec`): content is one byte string whose bytes are the
//! same as the derived sequence of `u8` that earlier builds wrote, so stored values, request
//! digests and receipts keep their bytes; and `encoded_len` is the exact encoded length.

use kungfu_core::codec;
use kungfu_core::{Action, Command, Principal};
use kungfu_types::{AgentId, Content, Timestamp};

/// The derived serde shape of `Content` before it became a byte string: a newtype of `Vec<u8>`.
#[derive(serde::Serialize, serde::Deserialize)]
struct SeqContent(Vec<u8>);

#[test]
fn content_encodes_as_before_a_length_then_the_bytes() {
    let bytes: Vec<u8> = (0..=255u8).chain(0..=255u8).collect();
    let now = codec::encode(&Content::new(bytes.clone()));
    assert_eq!(now, codec::encode(&SeqContent(bytes.clone())), "same bytes as the sequence encoding");
    // Golden: varint length 512 (0xfb, then 512 as u16 little-endian), then the bytes themselves.
    assert_eq!(&now[..3], &[0xfb, 0x00, 0x02]);
    assert_eq!(&now[3..], bytes.as_slice());
    assert_eq!(codec::encode(&Content::from("abc")), vec![3, b'a', b'b', b'c']);
    // Values written by earlier builds decode.
    let old = codec::encode(&SeqContent(b"stored before".to_vec()));
    assert_eq!(codec::decode::<Content>(&old).expect("decode"), Content::from("stored before"));
}

#[test]
fn encoded_len_is_the_length_of_the_encoding() {
    for size in [0usize, 1, 250, 256 * 1024] {
        let cmd = Command::new(
            Principal::Agent(AgentId(9)),
            Action::CreateMemory { content: Content::new(vec![1u8; size]) },
            None,
            Timestamp(42),
        );
        assert_eq!(codec::encoded_len(&cmd), codec::encode(&cmd).len(), "content of {size} bytes");
    }
}
