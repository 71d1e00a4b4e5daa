//! The errors of the command line and the one table that maps each to an exit status.
//!
//! Every error is printed as `error: <CODE>: <message>`, then `field: <field>` when one is at
//! fault, `idempotency key: <key>` when the outcome of a write is unknown, and `next step: <step>`.
//! With `--json` the same error is printed on stderr as one JSON object on the last line.

use kungfu_client::{Code, Error as SdkError, NextStep};

/// The exit status of each class of error; the `--help` text documents the same table.
pub const EXIT_OTHER: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_NOT_FOUND: i32 = 3;
pub const EXIT_PERMISSION: i32 = 4;
pub const EXIT_STATE: i32 = 5;
pub const EXIT_LIMIT: i32 = 6;
pub const EXIT_UNAVAILABLE: i32 = 7;

/// The exit-status table as shown in `--help`.
pub const EXIT_TABLE: &str = "\
Exit status:
  0  success
  1  other failure (a local file or profile could not be written, a lost one-time secret, ...)
  2  usage or invalid argument (INVALID_ARGUMENT, INVALID_TARGET, IDEMPOTENCY_KEY_REUSED, bad flags)
  3  not found (NOT_FOUND)
  4  permission or authentication (UNAUTHENTICATED, AGENT_INACTIVE, NOT_GOVERNOR, CANNOT_SPEAK,
     NOT_AUTHOR, NOT_ADDRESSEE, NOT_TAKER, NOT_CREATOR, NOT_REQUESTER, JUDGMENT_FORFEITED, OWN_TASK,
     NOT_ELIGIBLE, NOT_ENTITLED, GRANT_INVALID)
  5  state or precondition (INVALID_STATE, THREAD_CLOSED, SOLE_GOVERNOR, MEMORY_WITHDRAWN, NO_EFFECT,
     NO_PENDING_RESPONSE, TASK_PAUSED, DEADLINE_PASSED, ADOPTION_LIMIT_REACHED)
  6  limits and rates (LIMIT_EXCEEDED, RATE_LIMITED)
  7  unavailable or indeterminate (UNAVAILABLE, NOT_LEADER, no node answered); for a write, the
     idempotency key is printed: run the same command again with --idempotency-key <key>";

/// Why a command failed.
#[derive(Debug)]
pub struct CliError {
    /// The stable code: a server rejection code, or `USAGE`, `INDETERMINATE`, `TRANSPORT`, `LOCAL`.
    pub code: String,
    /// A sentence for people.
    pub message: String,
    /// The field of the request at fault, when there is one.
    pub field: Option<String>,
    /// What to do next, as one of the protocol's next steps.
    pub next: String,
    /// The idempotency key to retry a write with, when its outcome is unknown.
    pub idempotency_key: Option<String>,
    /// The exit status.
    pub exit: i32,
}

impl CliError {
    /// A local usage error: a missing or malformed argument, an unreadable input file.
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError::local("USAGE", message, NextStep::Revise.as_str(), EXIT_USAGE)
    }

    /// Any other local failure, such as a profile that cannot be written.
    pub fn other(message: impl Into<String>) -> CliError {
        CliError::local("LOCAL", message, NextStep::Stop.as_str(), EXIT_OTHER)
    }

    fn local(code: &str, message: impl Into<String>, next: &str, exit: i32) -> CliError {
        CliError {
            code: code.to_string(),
            message: message.into(),
            field: None,
            next: next.to_string(),
            idempotency_key: None,
            exit,
        }
    }

    /// Prints the error on stderr, as text and, with `json`, as one JSON object after it.
    pub fn print(&self, json: bool) {
        eprintln!("error: {}: {}", self.code, self.message);
        if let Some(f) = &self.field {
            eprintln!("field: {f}");
        }
        if let Some(k) = &self.idempotency_key {
            eprintln!("idempotency key: {k} (run the same command again with --idempotency-key {k})");
        }
        eprintln!("next step: {}", self.next);
        if json {
            let value = serde_json::json!({
                "error": {
                    "code": self.code,
                    "message": self.message,
                    "field": self.field,
                    "next_step": self.next,
                    "idempotency_key": self.idempotency_key,
                    "exit_status": self.exit,
                }
            });
            eprintln!("{value}");
        }
    }
}

/// The exit status of a rejection code. The match is exhaustive, so a new code must be placed here.
pub fn exit_status(code: Code) -> i32 {
    match code {
        Code::InvalidArgument | Code::InvalidTarget | Code::IdempotencyKeyReused => EXIT_USAGE,
        Code::NotFound => EXIT_NOT_FOUND,
        Code::Unauthenticated
        | Code::AgentInactive
        | Code::NotGovernor
        | Code::CannotSpeak
        | Code::NotAuthor
        | Code::NotAddressee
        | Code::NotTaker
        | Code::NotCreator
        | Code::NotRequester
        | Code::JudgmentForfeited
        | Code::OwnTask
        | Code::NotEligible
        | Code::NotEntitled
        | Code::GrantInvalid => EXIT_PERMISSION,
        Code::ThreadClosed
        | Code::SoleGovernor
        | Code::MemoryWithdrawn
        | Code::InvalidState
        | Code::NoEffect
        | Code::NoPendingResponse
        | Code::TaskPaused
        | Code::DeadlinePassed
        | Code::AdoptionLimitReached => EXIT_STATE,
        Code::LimitExceeded | Code::RateLimited => EXIT_LIMIT,
        Code::NotLeader | Code::Unavailable => EXIT_UNAVAILABLE,
    }
}

impl From<SdkError> for CliError {
    fn from(e: SdkError) -> CliError {
        match e {
            SdkError::Rejected(r) => CliError {
                code: r.code.as_str().to_string(),
                message: r.message,
                field: r.field,
                next: r.next.as_str().to_string(),
                idempotency_key: None,
                exit: exit_status(r.code),
            },
            SdkError::Indeterminate { key, last } => CliError {
                code: "INDETERMINATE".to_string(),
                message: format!("the outcome is unknown after retries: {last}"),
                field: None,
                next: NextStep::Retry.as_str().to_string(),
                idempotency_key: Some(key),
                exit: EXIT_UNAVAILABLE,
            },
            SdkError::Transport(m) => CliError::local("TRANSPORT", m, NextStep::Retry.as_str(), EXIT_UNAVAILABLE),
            e @ (SdkError::InvalidEndpoint { .. } | SdkError::InvalidKey(_)) => CliError::usage(e.to_string()),
            e @ SdkError::SecretLost { .. } => CliError::other(e.to_string()),
            e @ SdkError::NoRandomness(_) => CliError::other(e.to_string()),
        }
    }
}
