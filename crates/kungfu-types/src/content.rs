//! Participant content (L6). Content is carried and stored, never interpreted: no field of it is
//! parsed, matched or executed by the runtime, so text that looks like an instruction or like a
//! structural field changes nothing.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Opaque bytes written by a participant. Only its length is ever looked at (for limits).
///
/// Serialized as one byte string (`serde_bytes`): with bincode that is the same bytes as the
/// derived sequence of `u8` (a length, then the bytes), so stored values and digests are
/// unchanged, but it is one copy instead of one serializer call per byte. A 250 KiB entry cost
/// milliseconds to encode byte by byte, on every append to every follower.
#[derive(Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Content(#[serde(with = "serde_bytes")] pub Vec<u8>);

impl Content {
    pub fn new(bytes: impl Into<Vec<u8>>) -> Content {
        Content(bytes.into())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl From<&str> for Content {
    fn from(s: &str) -> Content {
        Content(s.as_bytes().to_vec())
    }
}

impl From<String> for Content {
    fn from(s: String) -> Content {
        Content(s.into_bytes())
    }
}

/// Debug output shows the size only: content must not leak into logs as if it were structure.
impl fmt::Debug for Content {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Content({} bytes)", self.0.len())
    }
}
