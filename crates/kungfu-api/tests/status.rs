//! Rejections on gRPC (DESIGN §6): every code maps to its gRPC code, carries the whole rejection in
//! `google.rpc.ErrorInfo`, survives the trip through HTTP/2 headers, and comes back unchanged.

use kungfu_api::status::{ERROR_DOMAIN, wire_field_path};
use kungfu_api::{FieldError, field_error_status, grpc_code, read_error_status, rejection_status, status_rejection};
use kungfu_core::read::ReadError;
use kungfu_core::state::StateError;
use kungfu_types::{Code, FakReason, Micros, NextStep, Rejection};
use std::collections::HashMap;
use std::time::Duration;
use tonic_types::{ErrorDetails, StatusExt};

/// The expected table, written out independently of the code under test so that an accidental edit
/// of either shows up here.
fn expected_grpc(code: Code) -> tonic::Code {
    use tonic::Code as G;
    match code {
        Code::InvalidArgument => G::InvalidArgument,
        Code::Unauthenticated => G::Unauthenticated,
        Code::AgentInactive => G::PermissionDenied,
        Code::NotFound => G::NotFound,
        Code::NotGovernor => G::PermissionDenied,
        Code::CannotSpeak => G::PermissionDenied,
        Code::NotAuthor => G::PermissionDenied,
        Code::NotAddressee => G::PermissionDenied,
        Code::NotTaker => G::PermissionDenied,
        Code::NotCreator => G::PermissionDenied,
        Code::NotRequester => G::PermissionDenied,
        Code::JudgmentForfeited => G::PermissionDenied,
        Code::OwnTask => G::PermissionDenied,
        Code::NotEligible => G::PermissionDenied,
        Code::NotEntitled => G::PermissionDenied,
        Code::InvalidTarget => G::FailedPrecondition,
        Code::ThreadClosed => G::FailedPrecondition,
        Code::SoleGovernor => G::FailedPrecondition,
        Code::GrantInvalid => G::PermissionDenied,
        Code::MemoryWithdrawn => G::FailedPrecondition,
        Code::InvalidState => G::FailedPrecondition,
        Code::NoEffect => G::FailedPrecondition,
        Code::NoPendingResponse => G::FailedPrecondition,
        Code::TaskPaused => G::FailedPrecondition,
        Code::DeadlinePassed => G::FailedPrecondition,
        Code::AdoptionLimitReached => G::FailedPrecondition,
        Code::IdempotencyKeyReused => G::AlreadyExists,
        Code::LimitExceeded => G::ResourceExhausted,
        Code::RateLimited => G::ResourceExhausted,
        Code::NotLeader => G::Unavailable,
        Code::Unavailable => G::Unavailable,
        Code::TrustViolation => G::FailedPrecondition,
        Code::StaleBase => G::Aborted,
        Code::DuplicateId => G::AlreadyExists,
    }
}

/// A status as a client receives it: encoded into HTTP/2 trailers by the server and decoded again.
fn over_the_wire(status: tonic::Status) -> tonic::Status {
    let response: tonic::codegen::http::Response<()> = status.into_http();
    tonic::Status::from_header_map(response.headers()).expect("a status in the headers")
}

#[test]
fn every_code_maps_to_its_grpc_code() {
    assert_eq!(Code::ALL.len(), 34, "a new code needs a row in expected_grpc");
    for code in Code::ALL {
        assert_eq!(grpc_code(*code), expected_grpc(*code), "{code}");
        let status = rejection_status(&Rejection::new(*code, "why"));
        assert_eq!(status.code(), expected_grpc(*code), "{code}");
        // Never the RPC timeout code: DEADLINE_PASSED is a protocol deadline that won, not an
        // unknown outcome.
        assert_ne!(status.code(), tonic::Code::DeadlineExceeded, "{code}");
    }
}

#[test]
fn every_code_survives_the_round_trip() {
    for code in Code::ALL {
        let plain = Rejection::new(*code, format!("the {code} case"));
        assert_eq!(status_rejection(&over_the_wire(rejection_status(&plain))).as_ref(), Some(&plain), "{code}");

        let full = Rejection::field(*code, "ask.agents[2]", "is not a member who may speak")
            .with_retry_after(Micros(1_500_000))
            .with_next(NextStep::Wait);
        assert_eq!(status_rejection(&over_the_wire(rejection_status(&full))).as_ref(), Some(&full), "{code}");
    }
}

#[test]
fn definite_is_carried_not_recomputed() {
    let indefinite = Rejection::new(Code::Unavailable, "leader changed");
    assert!(!indefinite.definite);
    assert_eq!(status_rejection(&rejection_status(&indefinite)).map(|r| r.definite), Some(false));
    let mut odd = Rejection::new(Code::NotFound, "x");
    odd.definite = false;
    assert_eq!(status_rejection(&rejection_status(&odd)).map(|r| r.definite), Some(false));
}

#[test]
fn the_details_are_standard_google_rpc_messages() {
    let r = Rejection::field(Code::RateLimited, "thread", "too many joins").with_retry_after(Micros(2_500_000));
    let status = over_the_wire(rejection_status(&r));
    assert_eq!(status.message(), "thread: too many joins");
    let details = status.check_error_details().expect("details decode");
    let info = details.error_info().expect("ErrorInfo");
    assert_eq!(info.reason, "RATE_LIMITED");
    assert_eq!(info.domain, ERROR_DOMAIN);
    let expected: HashMap<String, String> = [
        ("next_step", "wait"),
        ("definite", "true"),
        ("field", "thread"),
        ("retry_after_micros", "2500000"),
        ("fak_reason", "RATE_LIMITED"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(info.metadata, expected);
    let violations = &details.bad_request().expect("BadRequest").field_violations;
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].field, "thread");
    assert_eq!(violations[0].description, "thread: too many joins");
    assert_eq!(details.retry_info().and_then(|i| i.retry_delay), Some(Duration::from_micros(2_500_000)));

    // Without a field or a wait, neither detail is invented.
    let plain = over_the_wire(rejection_status(&Rejection::new(Code::NotFound, "no thread with that id")));
    let details = plain.check_error_details().expect("details decode");
    assert!(details.bad_request().is_none());
    assert!(details.retry_info().is_none());
    let info = details.error_info().expect("ErrorInfo");
    assert!(!info.metadata.contains_key("field"));
    assert!(!info.metadata.contains_key("retry_after_micros"));
}

#[test]
fn messages_with_non_ascii_text_survive_the_headers() {
    let r = Rejection::field(
        Code::InvalidArgument,
        "assignment.delivery_window_micros",
        "must be between 1s and 7776000s (µs precision)",
    );
    let back = status_rejection(&over_the_wire(rejection_status(&r)));
    assert_eq!(back, Some(r));
}

#[test]
fn core_field_names_leave_the_server_as_wire_paths() {
    for (core, wire) in [
        ("assignment.delivery_window", "assignment.delivery_window_micros"),
        ("assignment.judgment_window", "assignment.judgment_window_micros"),
        ("contract.delivery_window", "contract.delivery_window_micros"),
        ("contract.judgment_window", "contract.judgment_window_micros"),
        ("ask", "ask.agents"),
        ("ask[3]", "ask.agents[3]"),
    ] {
        assert_eq!(wire_field_path(core), wire);
        let r = Rejection::field(Code::InvalidTarget, core, "is not valid");
        let back = status_rejection(&rejection_status(&r)).expect("a rejection");
        assert_eq!(back.field.as_deref(), Some(wire), "{core}");
        assert_eq!(back.message, format!("{wire}: is not valid"), "{core}");
        assert_eq!((back.code, back.next, back.definite), (r.code, r.next, r.definite));
    }
    // Paths that already are wire paths, or merely share a prefix, are left alone.
    for same in [
        "ask.agents[2]",
        "audience.restricted.agents[1]",
        // A shared record's audience (a scope, COORDINATION §5.7) is its own wire field.
        "audience",
        "assignment.delivery_window_micros",
        "contract.inputs[0]",
        "body.pin",
        "idempotency_key",
        "asked",
    ] {
        assert_eq!(wire_field_path(same), same);
    }
}

#[test]
fn a_field_error_is_invalid_argument_naming_the_field_as_sent() {
    // `audience` here is the missing message, not the core's restricted list: it is not renamed.
    let e = FieldError::new("audience", "is required: open or restricted");
    let status = field_error_status(&e);
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    let back = status_rejection(&over_the_wire(status)).expect("a rejection");
    assert_eq!(back, e.to_rejection());
    assert_eq!(back.field.as_deref(), Some("audience"));
    assert_eq!(back.next, NextStep::Revise);
}

#[test]
fn statuses_that_are_not_kungfu_rejections_give_none() {
    assert_eq!(status_rejection(&tonic::Status::unavailable("connection refused")), None);
    let foreign = tonic::Status::with_error_details(
        tonic::Code::NotFound,
        "x",
        ErrorDetails::with_error_info("NOT_FOUND", "example.com", HashMap::new()),
    );
    assert_eq!(status_rejection(&foreign), None);
    let unknown = tonic::Status::with_error_details(
        tonic::Code::Internal,
        "x",
        ErrorDetails::with_error_info("NOT_A_CODE", ERROR_DOMAIN, HashMap::new()),
    );
    assert_eq!(status_rejection(&unknown), None);
}

#[test]
fn missing_metadata_falls_back_to_the_codes_defaults() {
    let bare = tonic::Status::with_error_details(
        tonic::Code::Unavailable,
        "no leader",
        ErrorDetails::with_error_info("UNAVAILABLE", ERROR_DOMAIN, HashMap::new()),
    );
    assert_eq!(status_rejection(&bare), Some(Rejection::new(Code::Unavailable, "no leader")));
}

#[test]
fn read_errors_become_statuses_without_leaking_storage_details() {
    let refused = ReadError::Rejected(Rejection::not_found("thread"));
    let status = read_error_status(&refused);
    assert_eq!(status.code(), tonic::Code::NotFound);
    assert_eq!(status_rejection(&status), Some(Rejection::not_found("thread")));

    let broken = ReadError::State(StateError::corrupt(b"secret-key-bytes", "turn names a missing obligation"));
    let status = read_error_status(&broken);
    assert_eq!(status.code(), tonic::Code::Unavailable);
    let back = status_rejection(&status).expect("a rejection");
    assert_eq!((back.code, back.next), (Code::Unavailable, NextStep::Retry));
    assert!(!back.message.contains("missing obligation") && !back.message.contains(&hex_of(b"secret-key-bytes")));
}

#[test]
fn a_field_error_converts_into_a_status_for_handlers() {
    let status: tonic::Status = FieldError::new("thread", "is required").into();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(status_rejection(&status).and_then(|r| r.field), Some("thread".to_string()));
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn fak_reason_travels_with_every_verdict_and_a_site_override_survives() {
    for code in Code::ALL {
        let status = over_the_wire(rejection_status(&Rejection::new(*code, "why")));
        let details = status.check_error_details().expect("details decode");
        let info = details.error_info().expect("ErrorInfo");
        assert_eq!(
            info.metadata.get("fak_reason").map(String::as_str),
            code.fak_reason().map(FakReason::as_str),
            "{code}"
        );
    }
    let trust = over_the_wire(rejection_status(&Rejection::new(Code::TrustViolation, "quarantined")));
    let info = trust.check_error_details().expect("details").error_info().expect("ErrorInfo").clone();
    assert_eq!(info.metadata.get("fak_reason").map(String::as_str), Some("TRUST_VIOLATION"));
    let oversize = Rejection::field(Code::LimitExceeded, "body.content", "is too large").with_fak(FakReason::Oversize);
    let back = status_rejection(&over_the_wire(rejection_status(&oversize))).expect("a rejection");
    assert_eq!(back, oversize);
    assert_eq!(back.fak_reason(), Some(FakReason::Oversize));
}

/// COORDINATION §5.6, §7.4: a stale record edit reaches the client whole: `fak_shared_reason`,
/// the conflict's metadata, and the typed three-way conflict (base, current, proposed) decoded from
/// `google.rpc.Status.details`, beside the standard `ErrorInfo` and `BadRequest` that generic
/// clients read.
#[test]
fn a_record_conflict_survives_the_round_trip_with_its_three_values() {
    use kungfu_types::{
        ConflictValue, Content, ExternalRef, Labels, MemoryId, RecordConflict, RecordId, RejectionDetail, Scope,
        SharedReason, Taint, Version,
    };
    let conflict = RecordConflict {
        record: RecordId(4),
        path: "/body_ref".into(),
        base_rev: 2,
        current_rev: 3,
        base_value: Some(ConflictValue::Pin { memory: MemoryId(9), version: Version(1) }),
        current_value: Some(ConflictValue::External(ExternalRef {
            store: "s3".into(),
            digest: "sha256:abc".into(),
            bytes: 12,
            labels: Labels::new(Taint::Tainted, Scope::Tenant),
            deletion_certificate: Some("sha256:cert".into()),
        })),
        proposed_value: ConflictValue::Text(Content::new(b"<b>new</b>".to_vec())),
        resolution: "rebase_or_human_decide".into(),
    };
    let r = Rejection::field(Code::StaleBase, "ops[1]", "replaces /body_ref on rev 2, but the record is at rev 3")
        .with_fak_shared(SharedReason::StaleBase)
        .with_detail(RejectionDetail::RecordConflict(conflict.clone()));
    let status = over_the_wire(rejection_status(&r));
    assert_eq!(status.code(), tonic::Code::Aborted);
    let back = status_rejection(&status).expect("a rejection");
    assert_eq!(back, r);
    let Some(RejectionDetail::RecordConflict(c)) = back.detail.as_deref() else { panic!("no conflict: {back:?}") };
    assert_eq!(c, &conflict);
    // Generic clients still find the standard details and the conflict's metadata.
    let details = status.check_error_details().expect("details");
    let meta = &details.error_info().expect("error info").metadata;
    for (k, v) in [
        ("fak_shared_reason", "STALE_BASE"),
        ("path", "/body_ref"),
        ("base_rev", "2"),
        ("current_rev", "3"),
        ("resolution", "rebase_or_human_decide"),
        ("field", "ops[1]"),
    ] {
        assert_eq!(meta.get(k).map(String::as_str), Some(v), "{k}");
    }
    assert_eq!(details.bad_request().map(|b| b.field_violations.len()), Some(1));
    // A record refusal without a conflict carries its shared reason and no conflict.
    let dup = Rejection::field(Code::DuplicateId, "ops[0].append_note.note_id", "the record already has a note")
        .with_fak_shared(SharedReason::DuplicateNote);
    let back = status_rejection(&over_the_wire(rejection_status(&dup))).expect("a rejection");
    assert_eq!((back.fak_shared, back.detail), (Some(SharedReason::DuplicateNote), None));
}
