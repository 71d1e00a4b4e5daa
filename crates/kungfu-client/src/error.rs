//! The one error type of the SDK and the result of a successful write.

use kungfu_types::Rejection;

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
    /// A read, or a call the server answered with a status that is not a Kungfu rejection, failed
    /// on the way: no endpoint answered within the retries, or a proxy refused it.
    #[error("transport: {0}")]
    Transport(String),
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
