//! The closed rejection vocabulary (L2, DESIGN §6). A rejected action takes no effect; its
//! [`Rejection`] states the reason ([`Code`] and a message), an actionable next step from the closed
//! set of §8 ([`NextStep`]), an optional `retry_after`, and whether the action certainly had no
//! effect (`definite`).

use crate::time::Micros;
use serde::{Deserialize, Serialize};
use std::fmt;

/// §8: "Next steps form a closed set: respond, deliver, judge, revise, retry, wait, done, stop."
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum NextStep {
    Respond,
    Deliver,
    Judge,
    Revise,
    Retry,
    Wait,
    Done,
    Stop,
}

impl NextStep {
    pub const ALL: [NextStep; 8] = [
        NextStep::Respond,
        NextStep::Deliver,
        NextStep::Judge,
        NextStep::Revise,
        NextStep::Retry,
        NextStep::Wait,
        NextStep::Done,
        NextStep::Stop,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NextStep::Respond => "respond",
            NextStep::Deliver => "deliver",
            NextStep::Judge => "judge",
            NextStep::Revise => "revise",
            NextStep::Retry => "retry",
            NextStep::Wait => "wait",
            NextStep::Done => "done",
            NextStep::Stop => "stop",
        }
    }
}

impl fmt::Display for NextStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

macro_rules! codes {
    ($($(#[$doc:meta])* $variant:ident => $text:literal, $next:ident;)*) => {
        /// Every reason an action or read can be refused. The set is closed: the wire carries
        /// [`Code::as_str`], which never changes once released.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum Code {
            $($(#[$doc])* $variant,)*
        }

        impl Code {
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];

            /// The stable wire string (`NOT_FOUND`).
            pub fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $text,)* }
            }

            /// The next step a caller should take when it meets this code.
            pub fn next_step(self) -> NextStep {
                match self { $(Code::$variant => NextStep::$next,)* }
            }

            /// Parses the stable wire string.
            pub fn parse(s: &str) -> Option<Code> {
                match s { $($text => Some(Code::$variant),)* _ => None }
            }
        }
    };
}

codes! {
    /// A field of the request is malformed or out of range; the message names the field.
    InvalidArgument => "INVALID_ARGUMENT", Revise;
    /// The caller could not be authenticated (server edge).
    Unauthenticated => "UNAUTHENTICATED", Stop;
    /// §4: only an active agent may act.
    AgentInactive => "AGENT_INACTIVE", Stop;
    /// The object does not exist or the caller may not read it; the two are indistinguishable (§12).
    NotFound => "NOT_FOUND", Stop;
    /// The action needs the governor role (§6.2).
    NotGovernor => "NOT_GOVERNOR", Stop;
    /// The action needs a member who may speak (§6.3, §6.4).
    CannotSpeak => "CANNOT_SPEAK", Stop;
    /// Only the author may do this (a Memory's author, an entry's author, a Task's author).
    NotAuthor => "NOT_AUTHOR", Stop;
    /// Only the addressee of an assignment may take it (§6.4).
    NotAddressee => "NOT_ADDRESSEE", Stop;
    /// Only the taker of an assignment or the engaged agent may deliver or drop it.
    NotTaker => "NOT_TAKER", Stop;
    /// Only the creator of an assignment may judge or void it (§6.4).
    NotCreator => "NOT_CREATOR", Stop;
    /// Only the requester (the author or the designated judge) may judge a Task delivery (§7).
    NotRequester => "NOT_REQUESTER", Stop;
    /// The creator's membership ended after delivery: the right to judge is forfeited (§6.2).
    JudgmentForfeited => "JUDGMENT_FORFEITED", Stop;
    /// §7.2: the author must not take its own Task.
    OwnTask => "OWN_TASK", Stop;
    /// The agent is outside the Task's audience or fails its eligibility (§7.2).
    NotEligible => "NOT_ELIGIBLE", Stop;
    /// A required input must be a pinned version of the author's own valid Memory (§7.1).
    NotEntitled => "NOT_ENTITLED", Revise;
    /// A named agent (asked, addressee, judge, new role holder) is not a valid target.
    InvalidTarget => "INVALID_TARGET", Revise;
    /// The thread is closed and read-only (§6.5).
    ThreadClosed => "THREAD_CLOSED", Stop;
    /// §6.2: an open thread must keep a governor; hand over or close first.
    SoleGovernor => "SOLE_GOVERNOR", Retry;
    /// The admission grant presented is not the thread's live grant (§6.1). Uniform on purpose.
    GrantInvalid => "GRANT_INVALID", Stop;
    /// The Memory is withdrawn and takes no new versions or references (§5).
    MemoryWithdrawn => "MEMORY_WITHDRAWN", Stop;
    /// The object's state does not allow this action (already taken, delivered, terminal, ...).
    InvalidState => "INVALID_STATE", Stop;
    /// The action would change nothing; L2 allows no implicit successes beyond the two it names.
    NoEffect => "NO_EFFECT", Done;
    /// There is no pending response of the caller to that entry (§6.3).
    NoPendingResponse => "NO_PENDING_RESPONSE", Done;
    /// The Task accepts no new engagements while paused (§7).
    TaskPaused => "TASK_PAUSED", Wait;
    /// The deadline passed first; the deadline wins (L4).
    DeadlinePassed => "DEADLINE_PASSED", Stop;
    /// §7.4: the maximum number of adoptions is reached.
    AdoptionLimitReached => "ADOPTION_LIMIT_REACHED", Stop;
    /// L3: a different request was sent under an idempotency key already used.
    IdempotencyKeyReused => "IDEMPOTENCY_KEY_REUSED", Revise;
    /// L4: a capacity limit would be exceeded.
    LimitExceeded => "LIMIT_EXCEEDED", Revise;
    /// L4: a rate limit was exceeded; wait `retry_after` (server edge).
    RateLimited => "RATE_LIMITED", Wait;
    /// This node is not the leader; nothing happened. The rejection names the leader's API address
    /// when known: send the same request (same idempotency key) there.
    NotLeader => "NOT_LEADER", Retry;
    /// The node cannot decide now (no leader, leader changed); the action may or may not have
    /// taken effect. Retry with the same idempotency key.
    Unavailable => "UNAVAILABLE", Retry;
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refused action or read. Rejected actions take no effect (L2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    pub code: Code,
    /// A sentence for people; names the field when one is at fault. Never contains content the
    /// caller cannot read (§12).
    pub message: String,
    /// The field at fault, when there is one (`thread`, `ask[2]`, `contract.inputs[0]`).
    pub field: Option<String>,
    pub next: NextStep,
    pub retry_after: Option<Micros>,
    /// True when the action certainly had no effect; false only for indeterminate outcomes.
    pub definite: bool,
    /// For `NOT_LEADER`: the leader's API address (`host:port`) when it is known and another node,
    /// so the caller can send the same request there. A hint of the moment from the node that
    /// answered: never decided by the core, never persisted (serde skips it, so the bytes of a
    /// stored or replicated rejection are unchanged).
    #[serde(skip)]
    pub leader: Option<String>,
}

impl Rejection {
    pub fn new(code: Code, message: impl Into<String>) -> Rejection {
        Rejection {
            code,
            message: message.into(),
            field: None,
            next: code.next_step(),
            retry_after: None,
            definite: code != Code::Unavailable,
            leader: None,
        }
    }

    /// A rejection about one field of the request.
    pub fn field(code: Code, field: impl Into<String>, message: impl Into<String>) -> Rejection {
        let field = field.into();
        let mut r = Rejection::new(code, format!("{field}: {}", message.into()));
        r.field = Some(field);
        r
    }

    /// The uniform answer for an unknown or unreadable object (§12).
    pub fn not_found(what: &str) -> Rejection {
        Rejection::new(Code::NotFound, format!("no {what} with that id is visible to you"))
    }

    pub fn with_next(mut self, next: NextStep) -> Rejection {
        self.next = next;
        self
    }

    pub fn with_retry_after(mut self, after: Micros) -> Rejection {
        self.retry_after = Some(after);
        self
    }

    /// Names the leader's API address (for `NOT_LEADER`).
    pub fn with_leader(mut self, api: impl Into<String>) -> Rejection {
        self.leader = Some(api.into());
        self
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} (next: {})", self.code, self.message, self.next)
    }
}

impl std::error::Error for Rejection {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for code in Code::ALL {
            assert_eq!(Code::parse(code.as_str()), Some(*code));
            assert!(seen.insert(code.as_str()), "duplicate wire string {code}");
        }
    }

    #[test]
    fn only_unavailable_is_indefinite() {
        for code in Code::ALL {
            assert_eq!(Rejection::new(*code, "x").definite, *code != Code::Unavailable);
        }
    }
}
