//! Clients of a run: one SDK client per process, bound to one node, making one attempt per op
//! with a short deadline (no SDK retries: the history must show what each attempt did), and the
//! table that turns a call's result into `ok`, `fail` or `info`.
//!
//! | result | history |
//! |---|---|
//! | success | `ok` |
//! | a definite rejection (`definite = true`: the action certainly had no effect, L2) | `fail` with the code |
//! | an indeterminate rejection, a timeout, a transport error on a write | `info` (may have happened) |
//! | any failure of a read (reads have no effect) | `fail` |

use crate::history::OpType;
use crate::recorder::Completion;
use kungfu_client::{Client, ClientOptions, Error};
use std::time::Duration;

/// How long one attempt may take before it is `info`.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// Options of a harness client: one endpoint, one attempt, a short deadline.
pub fn options() -> ClientOptions {
    ClientOptions {
        call_timeout: CALL_TIMEOUT,
        connect_timeout: Duration::from_secs(1),
        max_retries: 0,
        ..ClientOptions::default()
    }
}

/// A client of one node, acting as `key`'s agent (or anonymous).
pub async fn connect(endpoint: &str, key: Option<String>) -> anyhow::Result<Client> {
    Ok(Client::connect(vec![endpoint.to_string()], key, options()).await?)
}

/// A client of every node with the SDK's own retries (setup and final reads, never the history's ops).
pub async fn connect_all(endpoints: Vec<String>, key: Option<String>) -> anyhow::Result<Client> {
    Ok(Client::connect(endpoints, key, ClientOptions::default()).await?)
}

/// The history type and details of a write's failure.
pub fn write_failure(e: &Error) -> (OpType, Completion) {
    match e {
        Error::Rejected(r) if r.definite => (
            OpType::Fail,
            Completion {
                error: Some(r.code.as_str().to_string()),
                message: Some(r.message.clone()),
                definite: Some(true),
                ..Completion::default()
            },
        ),
        Error::Rejected(r) => (
            OpType::Info,
            Completion {
                error: Some(r.code.as_str().to_string()),
                message: Some(r.message.clone()),
                definite: Some(false),
                ..Completion::default()
            },
        ),
        other => (
            OpType::Info,
            Completion {
                error: Some("INDETERMINATE".into()),
                message: Some(other.to_string()),
                definite: Some(false),
                ..Completion::default()
            },
        ),
    }
}

/// The history type and details of a read's failure: always `fail` (a read has no effect).
pub fn read_failure(e: &Error) -> (OpType, Completion) {
    let code = match e {
        Error::Rejected(r) => r.code.as_str().to_string(),
        _ => "UNAVAILABLE".into(),
    };
    (OpType::Fail, Completion { error: Some(code), message: Some(e.to_string()), ..Completion::default() })
}
