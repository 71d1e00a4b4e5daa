//! [`FieldError`]: the one error of the wire-to-domain boundary. A request that cannot be turned
//! into domain types (a malformed id, a missing required field, a bad idempotency key) is refused
//! here, before it reaches the core, with the full path of the field at fault so a client can fix
//! exactly that field.

use kungfu_types::{Code, Rejection};

/// A malformed field of a wire request.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// The full path of the field in the request, in proto field names: `thread`,
    /// `assignment.delivery_window_micros`, `contract.inputs[1].version`, `ask.agents[2]`.
    pub field: String,
    /// What is wrong with it, as a sentence fragment for people (`is required`).
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> FieldError {
        FieldError { field: field.into(), message: message.into() }
    }

    /// A required field that was not sent (an empty id, an absent message).
    pub fn missing(field: impl Into<String>) -> FieldError {
        FieldError::new(field, "is required")
    }

    /// The rejection this error is on the protocol's vocabulary: `INVALID_ARGUMENT` about the
    /// field, with the next step `revise` (fix the request and send it again).
    pub fn to_rejection(&self) -> Rejection {
        Rejection::field(Code::InvalidArgument, self.field.clone(), self.message.clone())
    }
}

impl From<FieldError> for Rejection {
    fn from(e: FieldError) -> Rejection {
        e.to_rejection()
    }
}
