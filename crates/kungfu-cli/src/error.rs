//! The errors of the command line and the one table that maps each to an exit status.
//!
//! Every error is printed as `error: <CODE>: <message>`, then `field: <field>` when one is at
//! fault, `fak reason: <name>` when the refusal carries one (the name fak gives the same refusal,
//! COORDINATION §2.8), `fak shared reason: <name>` for a shared record's refusals, the three values
//! of a record conflict (base, current, proposed: COORDINATION §5.6), `idempotency key: <key>` when
//! the outcome of a write is unknown, and `next step: <step>`. With `--json` the same error is printed on stderr as one JSON object on the
//! last line.

use kungfu_client::coord::Error as CoordError;
use kungfu_client::{Code, ConflictValue, Error as SdkError, NextStep, RecordConflict, TransportKind};
use kungfu_types::Class;

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
  2  usage or invalid argument (INVALID_ARGUMENT, INVALID_TARGET, IDEMPOTENCY_KEY_REUSED, bad flags;
     NOT_KUNGFU_API: the endpoint answers gRPC but is not a node's API address, e.g. its raft port)
  3  not found (NOT_FOUND)
  4  permission or authentication (UNAUTHENTICATED, AGENT_INACTIVE, NOT_GOVERNOR, CANNOT_SPEAK,
     NOT_AUTHOR, NOT_ADDRESSEE, NOT_TAKER, NOT_CREATOR, NOT_REQUESTER, JUDGMENT_FORFEITED, OWN_TASK,
     NOT_ELIGIBLE, NOT_ENTITLED, GRANT_INVALID)
  5  state or precondition (INVALID_STATE, THREAD_CLOSED, SOLE_GOVERNOR, MEMORY_WITHDRAWN, NO_EFFECT,
     NO_PENDING_RESPONSE, TASK_PAUSED, DEADLINE_PASSED, ADOPTION_LIMIT_REACHED, TRUST_VIOLATION,
     STALE_BASE, DUPLICATE_ID; and the command line's own verdicts GATHER_INCOMPLETE,
     BARRIER_BROKEN, BARRIER_WAITING, COMBINE_REFUSED)
  6  limits and rates (LIMIT_EXCEEDED, RATE_LIMITED)
  7  unavailable or indeterminate (UNAVAILABLE, NOT_LEADER; NOTHING_LISTENING: connection refused;
     NO_ANSWER: no connection or answer in time; TRANSPORT: another failure on the way; INDETERMINATE);
     for a write whose outcome is unknown, the idempotency key is printed: run the same command
     again with --idempotency-key <key>";

/// Why a command failed.
#[derive(Debug)]
pub struct CliError {
    /// The stable code: a server rejection code, or `USAGE`, `INDETERMINATE`, `LOCAL`, or a
    /// transport kind (`NOTHING_LISTENING`, `NO_ANSWER`, `NOT_KUNGFU_API`, `TRANSPORT`).
    pub code: String,
    /// A sentence for people.
    pub message: String,
    /// The field of the request at fault, when there is one.
    pub field: Option<String>,
    /// What to do next, as one of the protocol's next steps.
    pub next: String,
    /// The name fak gives the same refusal (COORDINATION §2.8), when the server sent one.
    pub fak_reason: Option<String>,
    /// fak's `sharedtask` reason of a shared record's refusal (COORDINATION §2.8).
    pub fak_shared_reason: Option<String>,
    /// The three-way conflict of a stale record edit (COORDINATION §5.6).
    pub conflict: Option<RecordConflict>,
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

    /// A verdict of the command line itself about what the server answered (a gather that is not
    /// fully delivered, a broken barrier): `code` is the command's own stable code, never a
    /// server's.
    pub fn verdict(code: &str, message: impl Into<String>, next: NextStep, exit: i32) -> CliError {
        CliError::local(code, message, next.as_str(), exit)
    }

    /// The same error, naming the argument at fault (`--goal`, `--scope`).
    pub fn with_field(mut self, field: impl Into<String>) -> CliError {
        self.field = Some(field.into());
        self
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
            fak_reason: None,
            fak_shared_reason: None,
            conflict: None,
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
        if let Some(f) = &self.fak_reason {
            eprintln!("fak reason: {f}");
        }
        if let Some(f) = &self.fak_shared_reason {
            eprintln!("fak shared reason: {f}");
        }
        if let Some(c) = &self.conflict {
            for line in conflict_lines(c) {
                eprintln!("{line}");
            }
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
                    "fak_reason": self.fak_reason,
                    "fak_shared_reason": self.fak_shared_reason,
                    "conflict": self.conflict.as_ref().map(kungfu_mcp::result::conflict_json),
                    "idempotency_key": self.idempotency_key,
                    "exit_status": self.exit,
                }
            });
            eprintln!("{value}");
        }
    }
}

/// The exit status of a rejection code, derived from its class ([`Code::class`], the one
/// classification the gRPC status derives from too). The match is exhaustive, so a new class must
/// be placed here.
pub fn exit_status(code: Code) -> i32 {
    match code.class() {
        // A target named wrong or a reused idempotency key is fixed in the command, like a
        // malformed argument.
        Class::Malformed | Class::Misdirected | Class::KeyReused => EXIT_USAGE,
        Class::NotFound => EXIT_NOT_FOUND,
        Class::Unauthenticated | Class::Forbidden => EXIT_PERMISSION,
        // COORDINATION §2.8: a freshness race was lost (re-read and retry), an id is already used
        // (choose another): both are about the state the command met.
        Class::State | Class::Stale | Class::Duplicate => EXIT_STATE,
        Class::Limit => EXIT_LIMIT,
        Class::Unavailable => EXIT_UNAVAILABLE,
    }
}

impl From<SdkError> for CliError {
    fn from(e: SdkError) -> CliError {
        match e {
            SdkError::Rejected(r) => CliError {
                fak_reason: r.fak_reason().map(|f| f.as_str().to_string()),
                fak_shared_reason: r.fak_shared.map(|f| f.as_str().to_string()),
                conflict: r.detail.as_deref().map(|d| match d {
                    kungfu_client::RejectionDetail::RecordConflict(c) => c.clone(),
                }),
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
                fak_reason: None,
                fak_shared_reason: None,
                conflict: None,
                idempotency_key: Some(key),
                exit: EXIT_UNAVAILABLE,
            },
            SdkError::Transport(t) => {
                // A wrong address needs a person to fix it: retrying as it is cannot help.
                let (next, exit) = match t.kind {
                    TransportKind::NothingListening => (NextStep::Revise, EXIT_UNAVAILABLE),
                    TransportKind::NotKungfuApi => (NextStep::Revise, EXIT_USAGE),
                    TransportKind::NoAnswer | TransportKind::Other => (NextStep::Retry, EXIT_UNAVAILABLE),
                };
                CliError::local(t.kind.as_str(), t.message, next.as_str(), exit)
            }
            e @ (SdkError::InvalidEndpoint { .. } | SdkError::InvalidKey(_)) => CliError::usage(e.to_string()),
            e @ SdkError::SecretLost { .. } => CliError::other(e.to_string()),
            e @ SdkError::NoRandomness(_) => CliError::other(e.to_string()),
        }
    }
}

/// How many characters of a conflicting value the error shows.
const CONFLICT_PREVIEW_CHARS: usize = 200;

/// A value of a conflict for a terminal: text escaped (participant content, L6), a reference as its
/// pin or store and digest.
pub fn conflict_value(v: Option<&ConflictValue>) -> String {
    match v {
        None => "(none at that rev)".into(),
        Some(ConflictValue::Text(c)) => format!("\"{}\"", crate::output::escaped(c.as_bytes(), CONFLICT_PREVIEW_CHARS)),
        Some(ConflictValue::Pin { memory, version }) => format!("pin {memory}@{}", version.0),
        Some(ConflictValue::External(e)) => {
            format!("external {} {} ({} bytes, {}/{})", e.store, e.digest, e.bytes, e.labels.taint, e.labels.scope)
        }
    }
}

/// The conflict as lines: the path and revs, the three values, and what to do.
pub fn conflict_lines(c: &RecordConflict) -> Vec<String> {
    vec![
        format!("conflict: {} of {} (your base rev {}, now rev {})", c.path, c.record, c.base_rev, c.current_rev),
        format!("  base     (rev {}): {}", c.base_rev, conflict_value(c.base_value.as_ref())),
        format!("  current  (rev {}): {}", c.current_rev, conflict_value(c.current_value.as_ref())),
        format!("  proposed:          {}", conflict_value(Some(&c.proposed_value))),
        format!(
            "  resolution: {}: kungfu record show {} then patch again with --base-rev {}, or ask a person to decide",
            c.resolution, c.record, c.current_rev
        ),
    ]
}

/// The coordination loops' verdicts (COORDINATION §4.5, §4.7) as the command line's own codes: a
/// failed call keeps its server code.
impl From<CoordError> for CliError {
    fn from(e: CoordError) -> CliError {
        match e {
            CoordError::Call(e) => e.into(),
            e @ CoordError::Undelivered { .. } => CliError::verdict(
                "GATHER_INCOMPLETE",
                format!("{e}; wait for the deliveries (or fold the ones in hand yourself)"),
                NextStep::Wait,
                EXIT_STATE,
            ),
            e @ CoordError::Broken { .. } => {
                CliError::verdict("BARRIER_BROKEN", format!("{e}; it will never release"), NextStep::Stop, EXIT_STATE)
            }
            CoordError::Waiting { barrier, waited } => CliError::verdict(
                "BARRIER_WAITING",
                format!(
                    "barrier {t}#{n} still waits for {p} of {s} after {w}s; nothing is lost: kungfu barrier status {t} {n}",
                    t = barrier.thread,
                    n = barrier.entry,
                    p = barrier.pending,
                    s = barrier.size,
                    w = waited.as_secs(),
                ),
                NextStep::Wait,
                EXIT_STATE,
            ),
            e @ (CoordError::Member(_) | CoordError::Combine(_)) => {
                CliError::verdict("COMBINE_REFUSED", e.to_string(), NextStep::Revise, EXIT_STATE)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kungfu_client::Rejection;
    use kungfu_types::FakReason;

    #[test]
    fn a_trust_violation_keeps_its_fak_reason_next_step_and_state_exit_status() {
        let r = Rejection::field(Code::TrustViolation, "body", "quarantined content never leaves its author's Memory");
        let e = CliError::from(SdkError::Rejected(r));
        assert_eq!(e.code, "TRUST_VIOLATION");
        assert_eq!(e.fak_reason.as_deref(), Some("TRUST_VIOLATION"));
        assert_eq!(e.next, "revise");
        assert_eq!(e.field.as_deref(), Some("body"));
        assert_eq!(e.exit, EXIT_STATE);
    }

    #[test]
    fn a_site_fak_reason_overrides_the_codes_own() {
        let r = Rejection::new(Code::LimitExceeded, "content too large").with_fak(FakReason::Oversize);
        let e = CliError::from(SdkError::Rejected(r));
        assert_eq!(e.fak_reason.as_deref(), Some("OVERSIZE"));
        assert_eq!(e.exit, EXIT_LIMIT);
        let routing = CliError::from(SdkError::Rejected(Rejection::new(Code::NotLeader, "elsewhere")));
        assert_eq!(routing.fak_reason, None, "routing answers are not verdicts and carry no fak reason");
    }

    #[test]
    fn transport_kinds_are_codes_and_a_wrong_address_is_revised_not_retried() {
        let t = |kind, message: &str| SdkError::Transport(kungfu_client::Transport { kind, message: message.into() });
        let refused = CliError::from(t(TransportKind::NothingListening, "nothing listening at 127.0.0.1:1"));
        assert_eq!((refused.code.as_str(), refused.next.as_str(), refused.exit), ("NOTHING_LISTENING", "revise", 7));
        let raft = CliError::from(t(TransportKind::NotKungfuApi, "127.0.0.1:2 answers gRPC but not the Kungfu API"));
        assert_eq!((raft.code.as_str(), raft.next.as_str(), raft.exit), ("NOT_KUNGFU_API", "revise", EXIT_USAGE));
        let slow = CliError::from(t(TransportKind::NoAnswer, "127.0.0.1:3 did not answer within 2 s"));
        assert_eq!((slow.code.as_str(), slow.next.as_str(), slow.exit), ("NO_ANSWER", "retry", 7));
        let other = CliError::from(SdkError::Transport("a proxy refused it".into()));
        assert_eq!((other.code.as_str(), other.exit), ("TRANSPORT", 7));
    }

    /// Every code's gRPC status and exit status, written out by hand: both derive from the code's
    /// class, and this table makes any change of either visible here.
    const TABLE: &[(&str, tonic::Code, i32)] = &[
        ("INVALID_ARGUMENT", tonic::Code::InvalidArgument, 2),
        ("UNAUTHENTICATED", tonic::Code::Unauthenticated, 4),
        ("AGENT_INACTIVE", tonic::Code::PermissionDenied, 4),
        ("NOT_FOUND", tonic::Code::NotFound, 3),
        ("NOT_GOVERNOR", tonic::Code::PermissionDenied, 4),
        ("CANNOT_SPEAK", tonic::Code::PermissionDenied, 4),
        ("NOT_AUTHOR", tonic::Code::PermissionDenied, 4),
        ("NOT_ADDRESSEE", tonic::Code::PermissionDenied, 4),
        ("NOT_TAKER", tonic::Code::PermissionDenied, 4),
        ("NOT_CREATOR", tonic::Code::PermissionDenied, 4),
        ("NOT_REQUESTER", tonic::Code::PermissionDenied, 4),
        ("JUDGMENT_FORFEITED", tonic::Code::PermissionDenied, 4),
        ("OWN_TASK", tonic::Code::PermissionDenied, 4),
        ("NOT_ELIGIBLE", tonic::Code::PermissionDenied, 4),
        ("NOT_ENTITLED", tonic::Code::PermissionDenied, 4),
        ("INVALID_TARGET", tonic::Code::FailedPrecondition, 2),
        ("THREAD_CLOSED", tonic::Code::FailedPrecondition, 5),
        ("SOLE_GOVERNOR", tonic::Code::FailedPrecondition, 5),
        ("GRANT_INVALID", tonic::Code::PermissionDenied, 4),
        ("MEMORY_WITHDRAWN", tonic::Code::FailedPrecondition, 5),
        ("INVALID_STATE", tonic::Code::FailedPrecondition, 5),
        ("NO_EFFECT", tonic::Code::FailedPrecondition, 5),
        ("NO_PENDING_RESPONSE", tonic::Code::FailedPrecondition, 5),
        ("TASK_PAUSED", tonic::Code::FailedPrecondition, 5),
        ("DEADLINE_PASSED", tonic::Code::FailedPrecondition, 5),
        ("ADOPTION_LIMIT_REACHED", tonic::Code::FailedPrecondition, 5),
        ("IDEMPOTENCY_KEY_REUSED", tonic::Code::AlreadyExists, 2),
        ("LIMIT_EXCEEDED", tonic::Code::ResourceExhausted, 6),
        ("RATE_LIMITED", tonic::Code::ResourceExhausted, 6),
        ("NOT_LEADER", tonic::Code::Unavailable, 7),
        ("UNAVAILABLE", tonic::Code::Unavailable, 7),
        ("TRUST_VIOLATION", tonic::Code::FailedPrecondition, 5),
        ("STALE_BASE", tonic::Code::Aborted, 5),
        ("DUPLICATE_ID", tonic::Code::AlreadyExists, 5),
    ];

    #[test]
    fn every_code_has_its_pinned_grpc_status_and_exit_status() {
        assert_eq!(TABLE.len(), Code::ALL.len(), "a new code needs a row in TABLE");
        for (text, grpc, exit) in TABLE {
            let code = Code::parse(text).unwrap_or_else(|| panic!("{text} is not a code"));
            assert_eq!((kungfu_api::grpc_code(code), exit_status(code)), (*grpc, *exit), "{text}");
            // The answer a client decodes from the server's status exits the same way.
            let e = CliError::from(SdkError::Rejected(Rejection::new(code, "why")));
            assert_eq!(e.exit, *exit, "{text}");
        }
    }

    #[test]
    fn one_class_gives_one_grpc_status_and_one_exit_status() {
        for class in Class::ALL {
            let codes: Vec<Code> = Code::ALL.iter().copied().filter(|c| c.class() == class).collect();
            let answers: std::collections::BTreeSet<(i32, i32)> =
                codes.iter().map(|c| (kungfu_api::grpc_code(*c) as i32, exit_status(*c))).collect();
            assert_eq!(answers.len(), 1, "{class:?} ({codes:?}) answers {answers:?}");
        }
    }

    #[test]
    fn the_help_table_lists_every_code_under_its_exit_status() {
        // The rows of EXIT_TABLE, each from its status digit to the next one.
        let mut rows: Vec<(i32, String)> = Vec::new();
        for line in EXIT_TABLE.lines().skip(1) {
            let t = line.trim_start();
            match t.split_once("  ").and_then(|(n, rest)| Some((n.parse::<i32>().ok()?, rest))) {
                Some((n, rest)) if line.starts_with("  ") && !line.starts_with("   ") => rows.push((n, rest.into())),
                _ => rows.last_mut().expect("a row").1.push_str(t),
            }
        }
        for code in Code::ALL {
            let listed: Vec<i32> = rows
                .iter()
                .filter(|(_, text)| {
                    text.split(|c: char| !(c.is_ascii_uppercase() || c == '_')).any(|w| w == code.as_str())
                })
                .map(|(n, _)| *n)
                .collect();
            assert_eq!(listed, [exit_status(*code)], "{code} in the --help exit table");
        }
    }

    #[test]
    fn stale_base_and_duplicate_id_are_state_errors() {
        assert_eq!(exit_status(Code::StaleBase), EXIT_STATE);
        assert_eq!(exit_status(Code::DuplicateId), EXIT_STATE);
    }
}
