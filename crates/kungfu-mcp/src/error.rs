//! [`Error`]: what can stop a door. Calls never fail this way: their failures are tool results.

/// A door that could not start or stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The session could not start (the host closed the stream or sent no valid handshake).
    #[error("the MCP session could not start: {0}")]
    Start(String),
    /// The session's task failed.
    #[error("the MCP session stopped abnormally: {0}")]
    Stopped(String),
}
