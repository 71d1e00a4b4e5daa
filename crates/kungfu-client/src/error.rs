//! The one error type of the SDK and the result of a successful write.

use kungfu_types::{RecordConflict, Rejection, RejectionDetail};

/// Why a call did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server refused the call with a definite rejection: it had no effect (L2). The rejection
    /// carries the stable code, the message, the field at fault and the next step.
    #[error("rejected: {0}")]
    Rejected(Rejection),
    /// The SDK gave up after its retries while the outcome of a write was unknown: the action may or
    /// may not have happened. Send the same request again with the same idempotency key (`key`) to
    /// learn its outcome; it can never take effect twice (L3).
    #[error("outcome unknown after retries (retry with idempotency key {key}): {last}")]
    Indeterminate {
        /// The idempotency key the write was sent with.
        key: String,
        /// The last failure seen.
        last: String,
    },
    /// The call failed on the way, for the reason [`Transport::kind`] names: nothing listens at
    /// the endpoints, none answered in time, what answers is not the Kungfu API (a raft port), or
    /// another failure (a proxy, a status that is not a Kungfu rejection). The message names the
    /// address and what to check. A write fails this way only when no attempt was sent to a node
    /// (else its outcome is unknown: [`Error::Indeterminate`]), so it had no effect.
    #[error("transport: {0}")]
    Transport(Transport),
    /// An endpoint is not a valid URI (`host:port` or `http://host:port`).
    #[error("invalid endpoint {endpoint}: {reason}")]
    InvalidEndpoint {
        /// The endpoint as given.
        endpoint: String,
        /// Why it is not valid.
        reason: String,
    },
    /// The agent key cannot be sent as an `authorization` header.
    #[error("invalid agent key: {0}")]
    InvalidKey(String),
    /// The operating system gave no randomness for a generated idempotency key.
    #[error("no randomness for an idempotency key: {0}")]
    NoRandomness(String),
    /// A one-time secret (an agent key) was issued by an earlier attempt of this same write, whose
    /// answer was lost, and a replay does not show it again (L3). The agent exists but its key is
    /// lost; register a new agent under a new idempotency key.
    #[error("the secret of {what} was shown only to a lost answer (idempotency key {key})")]
    SecretLost {
        /// The idempotency key of the write.
        key: String,
        /// What the secret belonged to, such as the agent id.
        what: String,
    },
}

impl Error {
    /// The rejection, when the server refused the call.
    pub fn rejection(&self) -> Option<&Rejection> {
        match self {
            Error::Rejected(r) => Some(r),
            _ => None,
        }
    }

    /// COORDINATION §5.6: the three-way conflict (the field's value at the patch's base, now, and
    /// as proposed) of a record patch refused `STALE_BASE`. Re-read the record, then re-apply the
    /// change on the current rev or ask a person to decide.
    pub fn record_conflict(&self) -> Option<&RecordConflict> {
        match self.rejection()?.detail.as_deref()? {
            RejectionDetail::RecordConflict(c) => Some(c),
        }
    }
}

/// A transport failure: its kind, stable for programs, and a sentence for people.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Transport {
    /// What went wrong on the way.
    pub kind: TransportKind,
    /// What happened, naming the address, and what to check.
    pub message: String,
}

/// Why a call failed on the way, before any Kungfu node answered it. Each kind has a stable name
/// ([`TransportKind::as_str`]), which the command line prints as the error's code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    /// The connection was refused: nothing listens at the address (`NOTHING_LISTENING`). Definite:
    /// nothing was sent.
    NothingListening,
    /// No connection within [`ClientOptions::connect_timeout`](crate::ClientOptions::connect_timeout),
    /// or no answer within [`ClientOptions::call_timeout`](crate::ClientOptions::call_timeout)
    /// (`NO_ANSWER`).
    NoAnswer,
    /// Something answers gRPC at the address, but not the Kungfu API: the method is unknown there,
    /// as on a node's raft port (`NOT_KUNGFU_API`). Definite: no Kungfu service took the call.
    NotKungfuApi,
    /// Any other failure on the way (`TRANSPORT`).
    Other,
}

impl TransportKind {
    /// The stable name of the kind.
    pub fn as_str(self) -> &'static str {
        match self {
            TransportKind::NothingListening => "NOTHING_LISTENING",
            TransportKind::NoAnswer => "NO_ANSWER",
            TransportKind::NotKungfuApi => "NOT_KUNGFU_API",
            TransportKind::Other => "TRANSPORT",
        }
    }
}

/// A failure of another kind, described by its text.
impl From<String> for Transport {
    fn from(message: String) -> Transport {
        Transport { kind: TransportKind::Other, message }
    }
}

impl From<&str> for Transport {
    fn from(message: &str) -> Transport {
        Transport::from(message.to_string())
    }
}

/// A successful write: the server's response, the idempotency key it was sent with, and whether
/// the response is the stored result of an earlier identical request (L3).
#[derive(Debug, Clone, PartialEq)]
pub struct Written<T> {
    /// The response message, with its receipt.
    pub value: T,
    /// The key the write was sent with: the caller's, or the one the SDK generated.
    pub idempotency_key: String,
    /// True when the server answered with the stored receipt of an earlier success of this key.
    pub replayed: bool,
}
