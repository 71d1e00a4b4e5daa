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

/// What kind of refusal a [`Code`] is: the one classification from which every door derives its
/// own coarse answer (the gRPC status code in `kungfu-api`, the exit status of the `kungfu` command
/// line), so a code is classified once, beside its wire string, and the doors cannot disagree about
/// it. Each class is as fine as the finest door needs: two codes share a class only when every door
/// answers them alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Class {
    /// The request is malformed or out of range whatever the state: fix it.
    Malformed,
    /// A named agent is not a valid target of the action: name another.
    Misdirected,
    /// L3: the idempotency key already names a different request: send this one under a new key.
    KeyReused,
    /// The caller could not be authenticated.
    Unauthenticated,
    /// The caller lacks the standing for the action (a role, authorship, eligibility, a grant).
    Forbidden,
    /// The object does not exist or the caller may not read it; the two are one answer (§12).
    NotFound,
    /// The state of the object does not allow the action: not until that state changes.
    State,
    /// A compare-and-set lost a race (design §2.8): re-read and retry on the current base.
    Stale,
    /// An id is already used (design §2.8): choose another.
    Duplicate,
    /// A capacity or rate limit (L4).
    Limit,
    /// Not decided here or not now: a routing answer or an indeterminate outcome, safe to send
    /// again with the same idempotency key.
    Unavailable,
}

impl Class {
    pub const ALL: [Class; 11] = [
        Class::Malformed,
        Class::Misdirected,
        Class::KeyReused,
        Class::Unauthenticated,
        Class::Forbidden,
        Class::NotFound,
        Class::State,
        Class::Stale,
        Class::Duplicate,
        Class::Limit,
        Class::Unavailable,
    ];
}

macro_rules! codes {
    ($($(#[$doc:meta])* $variant:ident => $text:literal, $next:ident, $class:ident;)*) => {
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

            /// What kind of refusal this is; every door's status derives from it.
            pub fn class(self) -> Class {
                match self { $(Code::$variant => Class::$class,)* }
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
    InvalidArgument => "INVALID_ARGUMENT", Revise, Malformed;
    /// The caller could not be authenticated (server edge).
    Unauthenticated => "UNAUTHENTICATED", Stop, Unauthenticated;
    /// §4: only an active agent may act.
    AgentInactive => "AGENT_INACTIVE", Stop, Forbidden;
    /// The object does not exist or the caller may not read it; the two are indistinguishable (§12).
    NotFound => "NOT_FOUND", Stop, NotFound;
    /// The action needs the governor role (§6.2).
    NotGovernor => "NOT_GOVERNOR", Stop, Forbidden;
    /// The action needs a member who may speak (§6.3, §6.4).
    CannotSpeak => "CANNOT_SPEAK", Stop, Forbidden;
    /// Only the author may do this (a Memory's author, an entry's author, a Task's author).
    NotAuthor => "NOT_AUTHOR", Stop, Forbidden;
    /// Only the addressee of an assignment may take it (§6.4).
    NotAddressee => "NOT_ADDRESSEE", Stop, Forbidden;
    /// Only the taker of an assignment or the engaged agent may deliver or drop it.
    NotTaker => "NOT_TAKER", Stop, Forbidden;
    /// Only the creator of an assignment may judge or void it (§6.4).
    NotCreator => "NOT_CREATOR", Stop, Forbidden;
    /// Only the requester (the author or the designated judge) may judge a Task delivery (§7).
    NotRequester => "NOT_REQUESTER", Stop, Forbidden;
    /// The creator's membership ended after delivery: the right to judge is forfeited (§6.2).
    JudgmentForfeited => "JUDGMENT_FORFEITED", Stop, Forbidden;
    /// §7.2: the author must not take its own Task.
    OwnTask => "OWN_TASK", Stop, Forbidden;
    /// The agent is outside the Task's audience or fails its eligibility (§7.2).
    NotEligible => "NOT_ELIGIBLE", Stop, Forbidden;
    /// A required input must be a pinned version of the author's own valid Memory (§7.1).
    NotEntitled => "NOT_ENTITLED", Revise, Forbidden;
    /// A named agent (asked, addressee, judge, new role holder) is not a valid target.
    InvalidTarget => "INVALID_TARGET", Revise, Misdirected;
    /// The thread is closed and read-only (§6.5).
    ThreadClosed => "THREAD_CLOSED", Stop, State;
    /// §6.2: an open thread must keep a governor; hand over or close first.
    SoleGovernor => "SOLE_GOVERNOR", Retry, State;
    /// The admission grant presented is not the thread's live grant (§6.1). Uniform on purpose.
    GrantInvalid => "GRANT_INVALID", Stop, Forbidden;
    /// The Memory is withdrawn and takes no new versions or references (§5).
    MemoryWithdrawn => "MEMORY_WITHDRAWN", Stop, State;
    /// The object's state does not allow this action (already taken, delivered, terminal, ...).
    InvalidState => "INVALID_STATE", Stop, State;
    /// The action would change nothing; L2 allows no implicit successes beyond the two it names.
    NoEffect => "NO_EFFECT", Done, State;
    /// There is no pending response of the caller to that entry (§6.3).
    NoPendingResponse => "NO_PENDING_RESPONSE", Done, State;
    /// The Task accepts no new engagements while paused (§7).
    TaskPaused => "TASK_PAUSED", Wait, State;
    /// The deadline passed first; the deadline wins (L4).
    DeadlinePassed => "DEADLINE_PASSED", Stop, State;
    /// §7.4: the maximum number of adoptions is reached.
    AdoptionLimitReached => "ADOPTION_LIMIT_REACHED", Stop, State;
    /// L3: a different request was sent under an idempotency key already used.
    IdempotencyKeyReused => "IDEMPOTENCY_KEY_REUSED", Revise, KeyReused;
    /// L4: a capacity limit would be exceeded.
    LimitExceeded => "LIMIT_EXCEEDED", Revise, Limit;
    /// L4: a rate limit was exceeded; wait `retry_after` (server edge).
    RateLimited => "RATE_LIMITED", Wait, Limit;
    /// This node is not the leader; nothing happened. The rejection names the leader's API address
    /// when known: send the same request (same idempotency key) there.
    NotLeader => "NOT_LEADER", Retry, Unavailable;
    /// The node cannot decide now (no leader, leader changed); the action may or may not have
    /// taken effect. Retry with the same idempotency key.
    Unavailable => "UNAVAILABLE", Retry, Unavailable;
    /// Design §2.8: labeled content would reach an audience its labels forbid (quarantined, or a
    /// scope narrower than the path needs). Widen the scope explicitly, or keep it in your Memory.
    TrustViolation => "TRUST_VIOLATION", Revise, State;
    /// Design §2.8: the write cited a base that is no longer the latest (a stale status or rev);
    /// re-read and retry on the current one.
    StaleBase => "STALE_BASE", Retry, Stale;
    /// Design §2.8: an item id is already used by another request; choose a new id.
    DuplicateId => "DUPLICATE_ID", Revise, Duplicate;
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

macro_rules! fak_reasons {
    ($($(#[$doc:meta])* $variant:ident => $text:literal,)*) => {
        /// fak's closed core reason vocabulary (design §2.8), carried beside every Kungfu code so a
        /// fak adapter can audit our refusals with its own machinery. All 13 names are accepted
        /// (the RFC lists 12; fak's code has 13, design §12 item 1); some are never produced.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum FakReason {
            $($(#[$doc])* $variant,)*
        }

        impl FakReason {
            pub const ALL: &'static [FakReason] = &[$(FakReason::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self { $(FakReason::$variant => $text,)* }
            }

            pub fn parse(s: &str) -> Option<FakReason> {
                match s { $($text => Some(FakReason::$variant),)* _ => None }
            }
        }
    };
}

fak_reasons! {
    /// The caller lacks the right (membership, role, authorship).
    DefaultDeny => "DEFAULT_DENY",
    /// A state precondition of the object refuses the action.
    PolicyBlock => "POLICY_BLOCK",
    /// Never produced: nothing modifies the runtime through the protocol.
    SelfModify => "SELF_MODIFY",
    /// Never produced: there are no lane leases; exclusive work is an assignment.
    LeaseHeld => "LEASE_HELD",
    /// Labeled content would cross its floor.
    TrustViolation => "TRUST_VIOLATION",
    /// The request is malformed.
    Malformed => "MALFORMED",
    /// A named target is not a valid one.
    Misroute => "MISROUTE",
    /// A rate or count limit.
    RateLimited => "RATE_LIMITED",
    /// Never produced: the runtime never inspects content (design R1).
    SecretExfil => "SECRET_EXFIL",
    /// The write did not cite the current base.
    Unwitnessed => "UNWITNESSED",
    /// A size limit.
    Oversize => "OVERSIZE",
    /// An unknown call (at the edge).
    UnknownTool => "UNKNOWN_TOOL",
    /// Never produced, as `SECRET_EXFIL`.
    ResultSecretDiscovered => "RESULT_SECRET_DISCOVERED",
}

impl Code {
    /// The fak reason a refusal with this code carries (design §2.8), None for the routing and
    /// indeterminate answers (`NOT_LEADER`, `UNAVAILABLE`), which are not verdicts. A site may
    /// override it ([`Rejection::with_fak`]), as size limits do with `OVERSIZE`.
    pub fn fak_reason(self) -> Option<FakReason> {
        use Code::*;
        Some(match self {
            NotFound | Unauthenticated | AgentInactive | CannotSpeak | NotGovernor | NotAuthor | NotAddressee
            | NotTaker | NotCreator | NotRequester | JudgmentForfeited | OwnTask | NotEligible | NotEntitled
            | GrantInvalid => FakReason::DefaultDeny,
            ThreadClosed | SoleGovernor | MemoryWithdrawn | InvalidState | NoEffect | NoPendingResponse
            | TaskPaused | DeadlinePassed | AdoptionLimitReached | DuplicateId => FakReason::PolicyBlock,
            TrustViolation => FakReason::TrustViolation,
            InvalidArgument | IdempotencyKeyReused => FakReason::Malformed,
            InvalidTarget => FakReason::Misroute,
            RateLimited | LimitExceeded => FakReason::RateLimited,
            StaleBase => FakReason::Unwitnessed,
            NotLeader | Unavailable => return None,
        })
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
    /// A fak reason set at the site, overriding the code's own ([`Code::fak_reason`]); read it
    /// through [`Rejection::fak_reason`].
    pub fak: Option<FakReason>,
    /// Design §2.8: the `sharedtask` reason of a record refusal, for a fak adapter. Decided by the
    /// core but never persisted: serde skips it, so the bytes of a replicated rejection are
    /// unchanged (design R4); the API writes it into `ErrorInfo.metadata`.
    #[serde(skip)]
    pub fak_shared: Option<SharedReason>,
    /// Design §5.6: the typed detail of a refusal (the three-way conflict of a stale record edit).
    /// Skipped by serde for the same reason as `fak_shared`.
    #[serde(skip)]
    pub detail: Option<Box<RejectionDetail>>,
}

/// A typed detail carried by a rejection beside its message (design §2.8).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RejectionDetail {
    /// A stale scalar edit of a shared record (design §5.6).
    RecordConflict(crate::record::RecordConflict),
}

macro_rules! shared_reasons {
    ($($variant:ident => $text:literal,)*) => {
        /// fak's `sharedtask` refusal strings (design §2.8), carried beside the Kungfu code of a
        /// record refusal as `fak_shared_reason`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum SharedReason {
            $($variant,)*
        }

        impl SharedReason {
            pub const ALL: &'static [SharedReason] = &[$(SharedReason::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self { $(SharedReason::$variant => $text,)* }
            }

            pub fn parse(s: &str) -> Option<SharedReason> {
                match s { $($text => Some(SharedReason::$variant),)* _ => None }
            }
        }
    };
}

shared_reasons! {
    ApprovalRequired => "APPROVAL_REQUIRED",
    ScopeWidenForbidden => "SCOPE_WIDEN_FORBIDDEN",
    BodyQuarantined => "BODY_QUARANTINED",
    ArtifactQuarantined => "ARTIFACT_QUARANTINED",
    BodyWitnessMissing => "BODY_WITNESS_MISSING",
    ArtifactWitnessMissing => "ARTIFACT_WITNESS_MISSING",
    UnsupportedPatch => "UNSUPPORTED_PATCH",
    StaleBase => "STALE_BASE",
    MissingDecision => "MISSING_DECISION",
    DuplicateNote => "DUPLICATE_NOTE",
    DuplicateDecision => "DUPLICATE_DECISION",
    DuplicateArtifact => "DUPLICATE_ARTIFACT",
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
            fak: None,
            fak_shared: None,
            detail: None,
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

    /// Sets the fak reason of this refusal (design §2.8), e.g. `OVERSIZE` on a size limit.
    pub fn with_fak(mut self, fak: FakReason) -> Rejection {
        self.fak = Some(fak);
        self
    }

    /// Sets the `sharedtask` reason of a record refusal (design §2.8).
    pub fn with_fak_shared(mut self, reason: SharedReason) -> Rejection {
        self.fak_shared = Some(reason);
        self
    }

    /// Attaches a typed detail (design §5.6).
    pub fn with_detail(mut self, detail: RejectionDetail) -> Rejection {
        self.detail = Some(Box::new(detail));
        self
    }

    /// The fak reason this refusal carries: the site's, else the code's.
    pub fn fak_reason(&self) -> Option<FakReason> {
        self.fak.or_else(|| self.code.fak_reason())
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
    fn shared_reasons_round_trip_and_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for r in SharedReason::ALL {
            assert_eq!(SharedReason::parse(r.as_str()), Some(*r));
            assert!(seen.insert(r.as_str()), "duplicate string {}", r.as_str());
        }
        assert_eq!(SharedReason::ALL.len(), 12);
    }

    #[test]
    fn codes_round_trip_and_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for code in Code::ALL {
            assert_eq!(Code::parse(code.as_str()), Some(*code));
            assert!(seen.insert(code.as_str()), "duplicate wire string {code}");
        }
    }

    #[test]
    fn every_verdict_carries_a_fak_reason_and_routing_answers_none() {
        for code in Code::ALL {
            let routing = matches!(code, Code::NotLeader | Code::Unavailable);
            assert_eq!(code.fak_reason().is_none(), routing, "{code}");
        }
        assert_eq!(Code::TrustViolation.fak_reason(), Some(FakReason::TrustViolation));
        assert_eq!(Code::StaleBase.fak_reason(), Some(FakReason::Unwitnessed));
        let oversize = Rejection::new(Code::LimitExceeded, "x").with_fak(FakReason::Oversize);
        assert_eq!(oversize.fak_reason(), Some(FakReason::Oversize));
        for r in FakReason::ALL {
            assert_eq!(FakReason::parse(r.as_str()), Some(*r));
        }
        assert_eq!(FakReason::ALL.len(), 13);
    }

    #[test]
    fn every_class_has_a_code() {
        for class in Class::ALL {
            assert!(Code::ALL.iter().any(|c| c.class() == class), "{class:?} classifies no code");
        }
    }

    #[test]
    fn only_unavailable_is_indefinite() {
        for code in Code::ALL {
            assert_eq!(Rejection::new(*code, "x").definite, *code != Code::Unavailable);
        }
    }
}
