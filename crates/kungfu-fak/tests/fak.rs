//! The fak envelopes of the SDK (COORDINATION §5.10, §11.4, Appendix A.2), without a server: our
//! own vectors, hand-built wire values for every case of Appendix A.2, converted to fak's envelopes
//! and validated against our JSON Schemas of fak's (`tests/fak/schemas/`, written from fak's
//! published `tools/schemas/shared-*.v1.json`, not copied). Plus round trips of patches, the
//! refusals at the envelope boundary, and stable, chained digests.

use kungfu_client::{Code, ConflictValue, RecordConflict, Rejection, RejectionDetail, SharedReason, pb};
use kungfu_fak::{self as fak, FakError, Outcome, ResultContext, Revs};
use kungfu_types::{Content, RecordId};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Schemas

fn validator(name: &str) -> jsonschema::Validator {
    let path = format!(
        "{}/tests/fak/schemas/{name}.v1.json",
        std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let schema: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{path} is not a valid schema: {e}"))
}

#[track_caller]
fn assert_valid(name: &str, v: &Value) {
    let val = validator(name);
    let errors: Vec<String> = val.iter_errors(v).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "not a valid {name}: {errors:?}\n{v:#}");
}

#[track_caller]
fn assert_invalid(name: &str, v: &Value) {
    assert!(!validator(name).is_valid(v), "{name} should refuse {v:#}");
}

// ---------------------------------------------------------------------------------------------
// Hand-built wire values: rec_4 in th_7, created by ag_1.

const T0: i64 = 1_782_345_600_000_000; // 2026-06-25T00:00:00Z

fn labels(taint: pb::Taint, scope: pb::Scope) -> pb::Labels {
    pb::Labels { taint: taint as i32, scope: scope as i32 }
}

fn fleet() -> pb::Labels {
    labels(pb::Taint::Tainted, pb::Scope::Fleet)
}

fn content(s: &str) -> Option<pb::Content> {
    Some(pb::Content { body: s.as_bytes().to_vec() })
}

fn pin(memory: &str, version: u32) -> pb::MemoryPin {
    pb::MemoryPin { memory: memory.into(), version }
}

fn external(store: &str, digest: &str, bytes: u64, l: pb::Labels, cert: &str) -> pb::ExternalRef {
    pb::ExternalRef {
        store: store.into(),
        digest: digest.into(),
        bytes,
        labels: Some(l),
        deletion_certificate: cert.into(),
    }
}

fn pin_ref(p: pb::MemoryPin) -> pb::RecordBodyRef {
    pb::RecordBodyRef { kind: Some(pb::record_body_ref::Kind::Pin(p)) }
}

fn ext_ref(e: pb::ExternalRef) -> pb::RecordBodyRef {
    pb::RecordBodyRef { kind: Some(pb::record_body_ref::Kind::External(e)) }
}

/// The record at `rev`: rev 1 created, rev 2 retitled, rev 3 state `input_required`.
fn view(rev: u32) -> pb::RecordView {
    let title = if rev >= 2 { "Coordinate the scoped release checklist" } else { "Coordinate the release checklist" };
    let state = if rev >= 3 { "input_required" } else { "working" };
    pb::RecordView {
        id: "rec_4".into(),
        thread: "th_7".into(),
        creator: "ag_1".into(),
        created_at_unix_micros: T0,
        entry: 3,
        rev,
        current_rev: 3,
        scope: pb::Scope::Fleet as i32,
        editors: pb::RecordEditors::Speakers as i32,
        audience: pb::Scope::Fleet as i32,
        title: content(title),
        state: content(state),
        body: Some(pb::RecordBodyView {
            reference: Some(pin_ref(pin("mem_2", 1))),
            labels: Some(fleet()),
            redacted: false,
        }),
        notes: vec![],
        artifacts: vec![],
        decisions: vec![],
        redacted_notes: 0,
        redacted_artifacts: 0,
    }
}

fn ev(rev: u32, base_rev: u32, actor: &str, paths: &[&str]) -> pb::RecordEvent {
    pb::RecordEvent {
        rev,
        base_rev,
        entry: 2 + u64::from(rev),
        actor: actor.into(),
        at_unix_micros: T0 + i64::from(rev - 1) * 60_000_000,
        paths: paths.iter().map(|p| p.to_string()).collect(),
        scope: pb::Scope::Fleet as i32,
        taint: pb::Taint::Tainted as i32,
        redacted: false,
    }
}

fn events() -> Vec<pb::RecordEvent> {
    vec![
        ev(1, 0, "ag_1", &["/title", "/state", "/body_ref"]),
        ev(2, 1, "ag_2", &["/title"]),
        ev(3, 2, "ag_3", &["/state"]),
    ]
}

fn revs() -> Revs {
    let mut r = Revs::new();
    for n in 1..=3 {
        r.learn(&view(n));
    }
    r
}

fn rev(n: u32) -> String {
    fak::rev_digest(&view(n))
}

fn patched(base_rev: u32, rev: u32, merged: bool) -> pb::RecordPatched {
    pb::RecordPatched { record: "rec_4".into(), entry: 9, base_rev, rev, merged }
}

/// A fak patch envelope of our own: `ops` against rev `base` of rec_4.
fn fak_patch(base: &str, scope: &str, ops: Value) -> Value {
    json!({
        "schema": "fak.shared-patch.v1",
        "task_id": "task_rec_4",
        "base_rev": base,
        "actor": {"kind": "agent", "id": "ag_2"},
        "scope": scope,
        "durability": "session",
        "ops": ops,
        "message": "why this patch",
    })
}

fn result(req: &pb::PatchRecordRequest, base: &str, current: &str, outcome: Outcome<'_>) -> Value {
    let v = fak::patch_result(
        &ResultContext { request: req, actor: "ag_2", base_rev: base, current_rev: current },
        outcome,
    );
    assert_valid("shared-patch-result", &v);
    v
}

fn only_op(req: &pb::PatchRecordRequest) -> &pb::patch_op::Op {
    assert_eq!(req.ops.len(), 1);
    req.ops[0].op.as_ref().expect("an op")
}

/// The verdict invariants of §11.4 on a refusal's result: it names its Kungfu code, and nothing
/// changed: the current rev is the base's unless it is a conflict, which carries the store's own.
#[track_caller]
fn assert_refusal_invariants(v: &Value, code: Code) {
    assert_eq!(v["kungfu"]["code"], code.as_str());
    assert_ne!(v["verdict"], "accepted");
    if v["verdict"] != "conflict" {
        assert_eq!(v["current_rev"], v["base_rev"], "a refused patch changes no rev");
    }
    assert!(v.get("event_id").is_none() && v.get("record_ref").is_none(), "no event for a refusal");
}

// ---------------------------------------------------------------------------------------------
// Appendix A.2, one test per case

#[test]
fn a2_accepted_title_patch() {
    let env = fak_patch(
        &rev(1),
        "fleet",
        json!([{"op": "replace", "path": "/title", "value": "Coordinate the scoped release checklist"}]),
    );
    assert_valid("shared-patch", &env);
    let req = fak::patch_from_fak(&env, &revs()).expect("converts");
    assert_eq!((req.record.as_str(), req.base_rev), ("rec_4", 1));
    assert_eq!(
        only_op(&req),
        &pb::patch_op::Op::ReplaceTitle(pb::Content { body: b"Coordinate the scoped release checklist".to_vec() })
    );
    let Some(pb::labeled_body::Kind::Content(m)) = req.message.as_ref().and_then(|m| m.kind.as_ref()) else {
        panic!("new message content")
    };
    assert_eq!(
        (m.content.as_ref().map(|c| c.body.as_slice()), m.labels),
        (Some(&b"why this patch"[..]), Some(fleet()))
    );

    let v = result(&req, &rev(1), &rev(2), Outcome::Accepted(&patched(1, 2, false)));
    assert_eq!(v["verdict"], "accepted");
    assert_eq!(v["reason"], "");
    assert_eq!(v["task_id"], "task_rec_4");
    assert_eq!(v["base_rev"], rev(1).as_str());
    assert_eq!(v["current_rev"], rev(2).as_str());
    assert_eq!(v["record_ref"], rev(2).as_str());
    assert_eq!(v["event_id"], "evt_rec_4_2");
    assert_eq!(v["kungfu"], json!({"record": "rec_4", "base_rev": 1, "rev": 2, "merged": false, "entry": 9}));
    assert_ne!(rev(1), rev(2), "a new rev has a new string");

    // The record at rev 2 as a task: the new title, updated by the event's actor.
    let t = fak::task(&view(2), Some(&events()[1]));
    assert_valid("shared-task", &t);
    assert_eq!(t["title"], "Coordinate the scoped release checklist");
    assert_eq!(t["rev"], rev(2).as_str());
    assert_eq!(t["updated_by"], json!({"kind": "agent", "id": "ag_2"}));
    assert_eq!(t["updated_at"], "2026-06-25T00:01:00Z");
}

#[test]
fn a2_stale_state_conflict_with_its_three_values() {
    let env = fak_patch(&rev(2), "fleet", json!([{"op": "replace", "path": "/state", "value": "completed"}]));
    assert_valid("shared-patch", &env);
    let req = fak::patch_from_fak(&env, &revs()).expect("converts");
    assert_eq!(req.base_rev, 2);
    assert_eq!(only_op(&req), &pb::patch_op::Op::ReplaceState(pb::Content { body: b"completed".to_vec() }));

    let conflict = RecordConflict {
        record: RecordId(4),
        path: "/state".into(),
        base_rev: 2,
        current_rev: 3,
        base_value: Some(ConflictValue::Text(Content::new("working"))),
        current_value: Some(ConflictValue::Text(Content::new("input_required"))),
        proposed_value: ConflictValue::Text(Content::new("completed")),
        resolution: "rebase_or_human_decide".into(),
    };
    let r = Rejection::field(Code::StaleBase, "ops[0]", "the record moved on")
        .with_fak_shared(SharedReason::StaleBase)
        .with_detail(RejectionDetail::RecordConflict(conflict));
    let v = result(&req, &rev(2), &rev(3), Outcome::Rejected(&r));
    assert_eq!(v["verdict"], "conflict");
    assert_eq!(v["reason"], "STALE_BASE");
    assert_eq!(
        v["conflict"],
        json!({
            "path": "/state",
            "base_value": "working",
            "current_value": "input_required",
            "proposed_value": "completed",
            "resolution": "rebase_or_human_decide",
        })
    );
    assert_eq!(v["current_rev"], rev(3).as_str(), "the store's actual current rev");
    assert_eq!(v["base_rev"], rev(2).as_str());
    assert_eq!(v["kungfu"]["next"], "retry");
    assert_refusal_invariants(&v, Code::StaleBase);
}

#[test]
fn a2_stale_append_is_accepted_merged() {
    let env = fak_patch(
        &rev(1),
        "fleet",
        json!([{"op": "append", "path": "/open_decisions", "value": {
            "decision_id": "dec_release_owner", "state": "input_required", "reason": "the release owner approves"
        }}]),
    );
    assert_valid("shared-patch", &env);
    let req = fak::patch_from_fak(&env, &revs()).expect("converts");
    assert_eq!(req.base_rev, 1, "a stale base stays as cited: the server merges appends");
    assert_eq!(
        only_op(&req),
        &pb::patch_op::Op::AppendDecision(pb::DecisionInput {
            decision_id: "dec_release_owner".into(),
            state: content("input_required"),
            reason: content("the release owner approves"),
        })
    );
    let v = result(&req, &rev(1), &rev(3), Outcome::Accepted(&patched(1, 4, true)));
    assert_eq!(v["verdict"], "accepted");
    assert_eq!(v["event_id"], "evt_rec_4_4");
    assert_eq!(v["kungfu"]["merged"], true);
    assert_eq!(v["kungfu"]["base_rev"], 1);
}

#[test]
fn a2_needs_approval() {
    let env = fak_patch(&rev(1), "fleet", json!([{"op": "replace", "path": "/title", "value": "t"}]));
    let req = fak::patch_from_fak(&env, &revs()).expect("converts");
    let r = Rejection::new(Code::NotGovernor, "only a governor may write this record: post an entry asking a governor")
        .with_fak_shared(SharedReason::ApprovalRequired);
    let v = result(&req, &rev(1), &rev(1), Outcome::Rejected(&r));
    assert_eq!(v["verdict"], "needs_approval");
    assert_eq!(v["reason"], "APPROVAL_REQUIRED");
    assert_eq!(v["approval"]["decision_id"], fak::APPROVAL_DECISION);
    assert_eq!(v["approval"]["state"], "input_required");
    assert_eq!(v["kungfu"]["next"], "stop");
    assert_refusal_invariants(&v, Code::NotGovernor);
}

#[test]
fn a2_denied_scope_widening() {
    // A tenant-scoped note into a fleet record.
    let env = fak_patch(
        &rev(1),
        "tenant",
        json!([{"op": "append", "path": "/notes", "value": {
            "note_id": "note_tenant_history", "kind": "comment",
            "body_ref": {"kind": "external", "digest": "sha256:notebodytenant001", "bytes": 128, "taint": "tainted",
                         "scope": "tenant", "durability": "session", "store": "l3-kv",
                         "deletion_certificate": "sha256:deletenote001"},
            "author": {"kind": "human", "id": "tenant-editor"}, "created_at": "2026-06-25T00:04:00Z"
        }}]),
    );
    assert_valid("shared-patch", &env);
    let req = fak::patch_from_fak(&env, &revs()).expect("converts");
    let r = Rejection::field(Code::TrustViolation, "ops[0].append_note.body.external.labels", "is tenant-scoped")
        .with_fak_shared(SharedReason::ScopeWidenForbidden);
    let v = result(&req, &rev(1), &rev(1), Outcome::Rejected(&r));
    assert_eq!(v["verdict"], "denied");
    assert_eq!(v["reason"], "SCOPE_WIDEN_FORBIDDEN");
    assert_eq!(v["denial"]["required_scope"], "tenant");
    assert_eq!(v["denial"]["policy"], "kungfu:TRUST_VIOLATION");
    assert_eq!(v["denial"]["actor"], json!({"kind": "agent", "id": "ag_2"}));
    assert_eq!(v["kungfu"]["field"], "ops[0].append_note.body.external.labels");
    assert_refusal_invariants(&v, Code::TrustViolation);
}

#[test]
fn a2_quarantined_artifact_without_deletion_certificate() {
    let env = fak_patch(
        &rev(1),
        "fleet",
        json!([{"op": "append", "path": "/artifacts", "value": {
            "artifact_id": "art_remote_trace", "ref": "sha256:remoteartifact001", "media_type": "application/json",
            "taint": "tainted", "scope": "fleet", "store": "l3-kv"
        }}]),
    );
    assert_valid("shared-patch", &env);
    let req = fak::patch_from_fak(&env, &revs()).expect("converts");
    let pb::patch_op::Op::AppendArtifact(a) = only_op(&req) else { panic!("an artifact") };
    assert_eq!(a.reference, Some(ext_ref(external("l3-kv", "sha256:remoteartifact001", 0, fleet(), ""))));

    for (shared, field) in [
        (SharedReason::ArtifactWitnessMissing, "ops[0].append_artifact.reference.external.deletion_certificate"),
        (SharedReason::ArtifactQuarantined, "ops[0].append_artifact.reference.external.labels"),
    ] {
        let r = Rejection::field(Code::TrustViolation, field, "refused").with_fak_shared(shared);
        let v = result(&req, &rev(1), &rev(1), Outcome::Rejected(&r));
        assert_eq!(v["verdict"], "quarantined");
        assert_eq!(v["reason"], shared.as_str());
        assert_eq!(v["quarantine"]["quarantine_id"], "q_art_remote_trace");
        assert_eq!(v["quarantine"]["artifact_id"], "art_remote_trace");
        assert_eq!(v["quarantine"]["subject_kind"], "artifact");
        assert_eq!(v["quarantine"]["subject_id"], "art_remote_trace");
        assert_refusal_invariants(&v, Code::TrustViolation);
    }
}

#[test]
fn a2_tenant_scoped_note_on_a_tenant_record() {
    let mut tenant = view(1);
    tenant.scope = pb::Scope::Tenant as i32;
    let mut revs = Revs::new();
    let base = revs.learn(&tenant);
    let env = fak_patch(
        &base,
        "tenant",
        json!([{"op": "append", "path": "/notes", "value": {
            "note_id": "note_tenant_history", "kind": "comment",
            "body_ref": {"kind": "external", "digest": "sha256:notebodytenant001", "bytes": 128, "taint": "tainted",
                         "scope": "tenant", "durability": "session", "store": "l3-kv",
                         "deletion_certificate": "sha256:deletenote001"},
            "author": {"kind": "human", "id": "tenant-editor"}, "created_at": "2026-06-25T00:04:00Z"
        }}]),
    );
    let req = fak::patch_from_fak(&env, &revs).expect("converts");
    let tenant_labels = labels(pb::Taint::Tainted, pb::Scope::Tenant);
    let note_ref = external("l3-kv", "sha256:notebodytenant001", 128, tenant_labels, "sha256:deletenote001");
    assert_eq!(
        only_op(&req),
        &pb::patch_op::Op::AppendNote(pb::NoteInput {
            note_id: "note_tenant_history".into(),
            kind: pb::NoteKind::Comment as i32,
            body: Some(pb::RecordBodyInput { kind: Some(pb::record_body_input::Kind::External(note_ref.clone())) }),
        })
    );
    let Some(pb::labeled_body::Kind::Content(m)) = req.message.as_ref().and_then(|m| m.kind.as_ref()) else {
        panic!("content")
    };
    assert_eq!(m.labels, Some(tenant_labels), "the message takes the patch's scope");

    // Accepted; the record at rev 2 shows the note, and a tenant audience still sees it.
    let mut after = tenant.clone();
    after.rev = 2;
    after.audience = pb::Scope::Tenant as i32;
    after.notes.push(pb::RecordNote {
        id: "note_tenant_history".into(),
        kind: pb::NoteKind::Comment as i32,
        body: Some(ext_ref(note_ref)),
        labels: Some(tenant_labels),
        author: "ag_2".into(),
        added_rev: 2,
        added_at_unix_micros: T0 + 240_000_000,
    });
    let current = revs.learn(&after);
    let v = result(&req, &base, &current, Outcome::Accepted(&patched(1, 2, false)));
    assert_eq!(v["verdict"], "accepted");
    let mut e = ev(2, 1, "ag_2", &["/notes"]);
    e.scope = pb::Scope::Tenant as i32;
    let t = fak::task(&after, Some(&e));
    assert_valid("shared-task", &t);
    assert_eq!(
        t["notes"][0],
        json!({
            "note_id": "note_tenant_history",
            "kind": "comment",
            "body_ref": {"kind": "external", "digest": "sha256:notebodytenant001", "bytes": 128, "taint": "tainted",
                         "scope": "tenant", "durability": "durable", "store": "l3-kv",
                         "deletion_certificate": "sha256:deletenote001"},
            "author": {"kind": "agent", "id": "ag_2"},
            "created_at": "2026-06-25T00:04:00Z",
        })
    );
    assert_eq!(t["kungfu"]["audience"], "tenant");
    let event = fak::event("rec_4", &e, &base, &current, "").expect("exports");
    assert_valid("shared-event", &event);
    assert_eq!(event["scope"], "tenant", "the event's derived scope");
}

#[test]
fn a2_external_body_with_a_certificate() {
    let env = fak_patch(
        &rev(3),
        "fleet",
        json!([{"op": "replace", "path": "/body_ref", "value": {
            "kind": "external", "digest": "sha256:bodyremote001", "bytes": 512, "taint": "tainted", "scope": "fleet",
            "durability": "session", "store": "l3-kv", "deletion_certificate": "sha256:deletebody001"
        }}]),
    );
    assert_valid("shared-patch", &env);
    let req = fak::patch_from_fak(&env, &revs()).expect("converts");
    let body = external("l3-kv", "sha256:bodyremote001", 512, fleet(), "sha256:deletebody001");
    assert_eq!(
        only_op(&req),
        &pb::patch_op::Op::ReplaceBody(pb::RecordBodyInput {
            kind: Some(pb::record_body_input::Kind::External(body.clone()))
        })
    );
    let mut after = view(3);
    after.rev = 4;
    after.current_rev = 4;
    after.body = Some(pb::RecordBodyView { reference: Some(ext_ref(body)), labels: Some(fleet()), redacted: false });
    let v = result(&req, &rev(3), &fak::rev_digest(&after), Outcome::Accepted(&patched(3, 4, false)));
    assert_eq!(v["verdict"], "accepted");
    let t = fak::task(&after, None);
    assert_valid("shared-task", &t);
    assert_eq!(t["body_ref"]["kind"], "external");
    assert_eq!(t["body_ref"]["store"], "l3-kv");
    assert_eq!(t["body_ref"]["deletion_certificate"], "sha256:deletebody001");
    assert_eq!(t["body_ref"]["durability"], "durable");
}

#[test]
fn a2_a_replayed_patch_keeps_its_key_and_its_result() {
    // fak re-applies a replayed patch and answers DUPLICATE_NOTE; we key it, so the server returns
    // the first receipt, and the same receipt gives the same result.
    let env = fak_patch(
        &rev(1),
        "fleet",
        json!([{"op": "append", "path": "/notes", "value": {
            "note_id": "n1", "kind": "comment",
            "body_ref": {"kind": "inline", "content": "hi", "bytes": 2, "taint": "tainted", "scope": "fleet", "durability": "turn"}
        }}]),
    );
    let reordered: Value = serde_json::from_str(&serde_json::to_string_pretty(&env).expect("text")).expect("json");
    let key = fak::idempotency_key(&env);
    assert_eq!(fak::idempotency_key(&reordered), key);
    assert!(key.starts_with("fak-") && key.len() == 68, "{key}");
    let mut other = env.clone();
    other["message"] = json!("another patch");
    assert_ne!(fak::idempotency_key(&other), key);
    let req = fak::patch_from_fak(&env, &revs()).expect("converts");
    assert_eq!(fak::patch_from_fak(&reordered, &revs()).expect("converts"), req);
    let first = result(&req, &rev(1), &rev(2), Outcome::Accepted(&patched(1, 2, false)));
    let replay = result(&req, &rev(1), &rev(2), Outcome::Accepted(&patched(1, 2, false)));
    assert_eq!(first, replay);
}

#[test]
fn a2_duplicate_ids_and_missing_decisions_are_manual_conflicts() {
    // A different request reusing a note id, an artifact id (accepted by fak: a gap), a decision id.
    let env = fak_patch(
        &rev(1),
        "fleet",
        json!([
            {"op": "append", "path": "/notes", "value": {"note_id": "n1", "kind": "comment", "body_ref": {
                "kind": "pin", "digest": "sha256:x", "bytes": 0, "taint": "tainted", "scope": "fleet",
                "durability": "durable", "pin": {"memory": "mem_3", "version": 1}}}},
            {"op": "append", "path": "/artifacts", "value": {"artifact_id": "a1", "ref": "sha256:a1", "media_type": "text/plain",
                "taint": "tainted", "scope": "fleet", "store": "s3", "deletion_certificate": "sha256:c"}}
        ]),
    );
    let req = fak::patch_from_fak(&env, &revs()).expect("converts");
    for (i, field, shared, path) in [
        (0, "ops[0].append_note.note_id", SharedReason::DuplicateNote, "/notes"),
        (1, "ops[1].append_artifact.artifact_id", SharedReason::DuplicateArtifact, "/artifacts"),
    ] {
        let dup = Rejection::field(Code::DuplicateId, field, "used").with_fak_shared(shared);
        let v = result(&req, &rev(1), &rev(1), Outcome::Rejected(&dup));
        assert_eq!((v["verdict"].as_str(), v["reason"].as_str()), (Some("conflict"), Some(shared.as_str())));
        assert_eq!(v["conflict"]["path"], path);
        assert_eq!(v["conflict"]["resolution"], "manual");
        let id_key = if i == 0 { "note_id" } else { "artifact_id" };
        assert_eq!(v["conflict"]["proposed_value"][id_key], env["ops"][i]["value"][id_key], "the op's value, proposed");
        assert_refusal_invariants(&v, Code::DuplicateId);
    }

    let env = fak_patch(
        &rev(1),
        "fleet",
        json!([{"op": "append", "path": "/open_decisions", "value": {"decision_id": "d1", "state": "open", "reason": "r"}},
               {"op": "replace", "path": "/open_decisions/d9/state", "value": "closed"}]),
    );
    let req = fak::patch_from_fak(&env, &revs()).expect("converts");
    let dup = Rejection::field(Code::DuplicateId, "ops[0].append_decision.decision_id", "used")
        .with_fak_shared(SharedReason::DuplicateDecision);
    let v = result(&req, &rev(1), &rev(1), Outcome::Rejected(&dup));
    assert_eq!((v["verdict"].as_str(), v["reason"].as_str()), (Some("conflict"), Some("DUPLICATE_DECISION")));
    assert_eq!(v["conflict"]["resolution"], "manual");
    assert_eq!(v["conflict"]["path"], "/open_decisions");
    assert_eq!(v["conflict"]["proposed_value"], json!({"decision_id": "d1", "state": "open", "reason": "r"}));
    assert_refusal_invariants(&v, Code::DuplicateId);

    let missing = Rejection::field(Code::InvalidTarget, "ops[1].replace_decision_state.decision_id", "names none")
        .with_fak_shared(SharedReason::MissingDecision);
    let v = result(&req, &rev(1), &rev(1), Outcome::Rejected(&missing));
    assert_eq!((v["verdict"].as_str(), v["reason"].as_str()), (Some("conflict"), Some("MISSING_DECISION")));
    assert_eq!(v["conflict"]["path"], "/open_decisions/d9/state");
    assert_eq!(v["conflict"]["proposed_value"], "closed");

    // A refusal with no sharedtask string carries its fak core reason.
    let plain = Rejection::new(Code::ThreadClosed, "the thread is closed");
    let v = result(&req, &rev(1), &rev(1), Outcome::Rejected(&plain));
    assert_eq!((v["verdict"].as_str(), v["reason"].as_str()), (Some("denied"), Some("POLICY_BLOCK")));
    assert_refusal_invariants(&v, Code::ThreadClosed);
}

// ---------------------------------------------------------------------------------------------
// Refusals at the envelope boundary

#[track_caller]
fn refused(env: &Value) -> FakError {
    let e = fak::patch_from_fak(env, &revs()).expect_err("refused");
    let v = e.patch_result(env);
    assert_valid("shared-patch-result", &v);
    assert_eq!(v["verdict"], "denied");
    assert_eq!(v["current_rev"], v["base_rev"]);
    assert_eq!(e.to_rejection().field.as_deref(), Some(e.pointer.as_str()));
    e
}

#[test]
fn remove_is_unsupported_patch() {
    let env = fak_patch(
        &rev(1),
        "fleet",
        json!([{"op": "replace", "path": "/title", "value": "t"}, {"op": "remove", "path": "/notes/0"}]),
    );
    assert_valid("shared-patch", &env);
    let e = refused(&env);
    assert_eq!(
        (e.pointer.as_str(), e.code, e.reason),
        ("/ops/1/op", Code::InvalidArgument, Some(SharedReason::UnsupportedPatch))
    );
    assert_eq!(e.patch_result(&env)["reason"], "UNSUPPORTED_PATCH");
    assert_eq!(e.to_rejection().fak_shared, Some(SharedReason::UnsupportedPatch));
}

#[test]
fn an_empty_base_is_refused() {
    let env = fak_patch("", "fleet", json!([{"op": "replace", "path": "/title", "value": "t"}]));
    assert_invalid("shared-patch", &env);
    let e = refused(&env);
    assert_eq!((e.pointer.as_str(), e.code, e.reason), ("/base_rev", Code::InvalidArgument, None));
    assert_eq!(e.patch_result(&env)["reason"], "MALFORMED");
    assert_eq!(e.patch_result(&env)["base_rev"], fak::no_rev().as_str());
    // A rev never handed out, and another record's rev, are refused too.
    assert_eq!(
        refused(&fak_patch("sha256:taskrev001", "fleet", json!([{"op": "replace", "path": "/title", "value": "t"}])))
            .pointer,
        "/base_rev"
    );
    let mut other = Revs::new();
    let mut v5 = view(1);
    v5.id = "rec_5".into();
    let d = other.learn(&v5);
    let e = fak::patch_from_fak(
        &fak_patch(&d, "fleet", json!([{"op": "replace", "path": "/title", "value": "t"}])),
        &other,
    )
    .expect_err("another record's rev");
    assert_eq!(e.pointer, "/base_rev");
}

#[test]
fn errors_name_the_pointer_of_the_bad_field() {
    let note = |body: Value| json!([{"op": "append", "path": "/notes", "value": {"note_id": "n1", "kind": "comment", "body_ref": body}}]);
    let cases: Vec<(Value, &str)> = vec![
        (fak_patch(&rev(1), "fleet", json!([{"op": "append", "path": "/title", "value": "t"}])), "/ops/0/path"),
        (fak_patch(&rev(1), "fleet", json!([{"op": "move", "path": "/title"}])), "/ops/0/op"),
        (fak_patch(&rev(1), "fleet", json!([{"op": "replace", "path": "/state", "value": 7}])), "/ops/0/value"),
        (fak_patch(&rev(1), "fleet", json!([{"op": "replace", "path": "/state"}])), "/ops/0/value"),
        (fak_patch(&rev(1), "fleet", json!([])), "/ops"),
        (fak_patch(&rev(1), "galaxy", json!([{"op": "replace", "path": "/title", "value": "t"}])), "/scope"),
        (
            fak_patch(
                &rev(1),
                "fleet",
                note(
                    json!({"kind": "cas", "digest": "sha256:body001", "bytes": 1, "taint": "tainted", "scope": "fleet", "durability": "session"}),
                ),
            ),
            "/ops/0/value/body_ref/kind",
        ),
        (
            fak_patch(
                &rev(1),
                "fleet",
                note(
                    json!({"kind": "external", "digest": "sha256:b", "bytes": 1, "taint": "dirty", "scope": "fleet", "durability": "session", "store": "s3"}),
                ),
            ),
            "/ops/0/value/body_ref/taint",
        ),
        (
            fak_patch(
                &rev(1),
                "fleet",
                note(
                    json!({"kind": "inline", "content": "hi", "digest": "sha256:wrong", "bytes": 2, "taint": "tainted", "scope": "fleet", "durability": "durable"}),
                ),
            ),
            "/ops/0/value/body_ref/digest",
        ),
        (
            fak_patch(
                &rev(1),
                "fleet",
                json!([{"op": "append", "path": "/notes", "value": {"note_id": "n1", "kind": "todo"}}]),
            ),
            "/ops/0/value/kind",
        ),
    ];
    for (env, pointer) in cases {
        let e = refused(&env);
        assert_eq!(e.pointer, pointer, "{e}");
        assert_eq!(e.reason, Some(SharedReason::UnsupportedPatch), "{e}");
        assert!(e.to_string().contains(pointer), "{e}");
    }
    let mut wrong = fak_patch(&rev(1), "fleet", json!([{"op": "replace", "path": "/title", "value": "t"}]));
    wrong["task_id"] = json!("task_shared_demo");
    assert_eq!(refused(&wrong).pointer, "/task_id");
    wrong["schema"] = json!("fak.shared-task.v1");
    assert_eq!(refused(&wrong).pointer, "/schema");
}

// ---------------------------------------------------------------------------------------------
// Round trips

fn every_op_patch() -> pb::PatchRecordRequest {
    use kungfu_client::record::{self as rec, Patch, body_external, body_pin, body_text};
    use kungfu_types::{Labels, Scope, Taint};
    let msg = kungfu_client::labeled_text("all of it", Labels::new(Taint::Trusted, Scope::Tenant));
    let mut p: pb::PatchRecordRequest = Patch::new("rec_4", 2, msg)
        .replace_title("New title ✓")
        .replace_state("done")
        .replace_body(body_external(rec::external(
            "l3-kv",
            "sha256:b1",
            7,
            Labels::new(Taint::Tainted, Scope::Fleet),
            Some("sha256:c1"),
        )))
        .replace_body(body_pin("mem_9", 2))
        .replace_body(body_text("inline body", Labels::new(Taint::Trusted, Scope::Fleet)))
        .append_decision("d1", "open", "who decides?")
        .replace_decision_state("d1", "closed")
        .append_note("n1", pb::NoteKind::Progress, body_text("half way", Labels::new(Taint::Tainted, Scope::Fleet)))
        .append_note("n2", pb::NoteKind::Comment, body_pin("mem_3", 1))
        .append_artifact("a1", pin_ref(pin("mem_4", 5)), "text/markdown")
        .append_artifact("a2", ext_ref(external("s3", "sha256:a2", 99, fleet(), "")), "application/json")
        .ask(["ag_5".to_string(), "ag_6".to_string()])
        .into();
    p.idempotency_key = "adapter-key-1".into();
    p
}

#[test]
fn patches_round_trip() {
    let revs = revs();
    let base = revs.digest("rec_4", 2).expect("learned").to_string();
    let p = every_op_patch();
    let env = fak::patch_to_fak(&p, &base, "ag_2").expect("exports");
    assert_valid("shared-patch", &env);
    assert_eq!(env["ops"].as_array().map(Vec::len), Some(11));
    assert_eq!(env["ops"][2]["value"]["kind"], "external");
    assert_eq!(env["ops"][3]["value"]["pin"], json!({"memory": "mem_9", "version": 2}));
    assert_eq!(env["ops"][4]["value"]["kind"], "inline");
    assert_eq!(env["ops"][6]["path"], "/open_decisions/d1/state");
    assert_eq!(env["ops"][9]["value"]["store"], fak::PIN_STORE);
    assert_eq!(env["scope"], "tenant");
    assert_eq!(env["kungfu"]["message_taint"], "trusted");
    assert_eq!(fak::patch_from_fak(&env, &revs).expect("imports"), p);

    // A minimal patch carries no extension, and a pinned message rides in it.
    let minimal: pb::PatchRecordRequest =
        kungfu_client::record::Patch::new("rec_4", 1, kungfu_client::pinned("mem_1", 3)).replace_state("x").into();
    let env = fak::patch_to_fak(&minimal, &rev(1), "ag_2").expect("exports");
    assert_valid("shared-patch", &env);
    assert_eq!(env["kungfu"], json!({"message_pin": {"memory": "mem_1", "version": 3}}));
    assert_eq!(fak::patch_from_fak(&env, &revs).expect("imports"), minimal);

    let mut plain: pb::PatchRecordRequest = kungfu_client::record::Patch::new(
        "rec_4",
        1,
        kungfu_client::labeled_text(
            "m",
            kungfu_types::Labels::new(kungfu_types::Taint::Tainted, kungfu_types::Scope::Fleet),
        ),
    )
    .replace_title("t")
    .into();
    let env = fak::patch_to_fak(&plain, &rev(1), "ag_2").expect("exports");
    assert!(env.get("kungfu").is_none(), "{env}");
    assert_eq!(fak::patch_from_fak(&env, &revs).expect("imports"), plain);

    // What fak cannot carry is refused, naming the request field.
    plain.ops[0] = pb::PatchOp { op: Some(pb::patch_op::Op::ReplaceTitle(pb::Content { body: vec![0xff, 0xfe] })) };
    assert_eq!(fak::patch_to_fak(&plain, &rev(1), "ag_2").expect_err("not UTF-8").pointer, "ops[0].replace_title");
}

// ---------------------------------------------------------------------------------------------
// Tasks, artifacts, events, the journal, digests

fn rich_view() -> pb::RecordView {
    let mut v = view(3);
    v.notes.push(pb::RecordNote {
        id: "n1".into(),
        kind: pb::NoteKind::Progress as i32,
        body: Some(pin_ref(pin("mem_6", 1))),
        labels: Some(fleet()),
        author: "ag_2".into(),
        added_rev: 2,
        added_at_unix_micros: T0 + 1,
    });
    v.artifacts.push(pb::RecordArtifact {
        id: "art_remote_trace".into(),
        reference: Some(ext_ref(external("l3-kv", "sha256:remoteartifact001", 10, fleet(), "sha256:deletecert001"))),
        media_type: "application/json".into(),
        labels: Some(fleet()),
        author: "ag_3".into(),
        added_rev: 3,
        added_at_unix_micros: T0 + 2,
    });
    v.decisions.push(pb::RecordDecision {
        id: "d1".into(),
        state: content("open"),
        reason: content("who decides?"),
        author: "ag_1".into(),
        added_rev: 2,
        added_at_unix_micros: T0,
    });
    v
}

#[test]
fn tasks_and_artifact_refs_validate() {
    let v = rich_view();
    let t = fak::task(&v, Some(&events()[2]));
    assert_valid("shared-task", &t);
    assert_eq!(t["notes"][0]["kind"], "progress");
    assert_eq!(t["notes"][0]["body_ref"]["kind"], "pin");
    assert_eq!(t["notes"][0]["created_at"], "2026-06-25T00:00:00.000001Z");
    assert_eq!(t["open_decisions"], json!([{"decision_id": "d1", "state": "open", "reason": "who decides?"}]));
    let a = fak::artifact_ref(&v.artifacts[0]);
    assert_valid("shared-artifact-ref", &a);
    assert_eq!(a["ref"], "sha256:remoteartifact001");
    assert_eq!(a["deletion_certificate"], "sha256:deletecert001");
    assert_eq!(t["artifacts"][0]["ref"], a["ref"]);
    let mut pinned = v.artifacts[0].clone();
    pinned.reference = Some(pin_ref(pin("mem_8", 2)));
    let a = fak::artifact_ref(&pinned);
    assert_valid("shared-artifact-ref", &a);
    assert_eq!(a["store"], fak::PIN_STORE);
    let b = fak::body_ref(&pin_ref(pin("mem_8", 2)), Some(&fleet()));
    assert_eq!((b["kind"].as_str(), b["bytes"].as_u64()), (Some("pin"), Some(0)));

    // A view for a narrower audience redacts the body, and its rev string differs.
    let mut redacted = v.clone();
    redacted.audience = pb::Scope::Tenant as i32;
    redacted.body = Some(pb::RecordBodyView { reference: None, labels: Some(fleet()), redacted: true });
    redacted.notes.clear();
    redacted.redacted_notes = 1;
    let t = fak::task(&redacted, None);
    assert_valid("shared-task", &t);
    assert_eq!(t["body_ref"]["kind"], "redacted");
    assert_eq!(t["kungfu"]["redacted_notes"], 1);
    assert_ne!(fak::rev_digest(&redacted), fak::rev_digest(&v));

    // Our schemas are not vacuous.
    let mut bad = fak::task(&v, None);
    bad["task_id"] = json!("rec_4");
    assert_invalid("shared-task", &bad);
    let mut bad = fak::task(&v, None);
    bad["body_ref"]["scope"] = json!("galaxy");
    assert_invalid("shared-task", &bad);
}

#[test]
fn events_validate_and_redacted_events_are_refused() {
    let e = fak::event("rec_4", &events()[0], &rev(1), &rev(1), "").expect("exports");
    assert_valid("shared-event", &e);
    assert_eq!(e["event_kind"], "record_created");
    assert_eq!(e["event_id"], "evt_rec_4_1");
    assert_eq!(e["durability"], "durable");
    let e2 = fak::event("rec_4", &events()[1], &rev(1), &rev(2), &fak::digest(&e)).expect("exports");
    assert_valid("shared-event", &e2);
    assert_eq!(e2["event_kind"], "patch_accepted");
    assert_eq!(e2["prev_event"], fak::digest(&e).as_str());
    let mut r = events()[1].clone();
    r.redacted = true;
    assert!(fak::event("rec_4", &r, &rev(1), &rev(2), "").is_err());
}

#[test]
fn the_journal_validates_and_chains() {
    let views: Vec<pb::RecordView> = (1..=3).map(view).collect();
    let j = fak::journal(&views, &events()).expect("exports");
    assert_valid("shared-task-journal", &j);
    assert_valid("shared-task", &j["initial"]);
    let entries = j["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 2);
    for (i, e) in entries.iter().enumerate() {
        assert_valid("shared-event", &e["event"]);
        assert_valid("shared-task", &e["record"]);
        assert_eq!(e["record_digest"], fak::digest(&e["record"]).as_str());
        assert_eq!(e["event"]["next_rev"], e["record"]["rev"]);
        let prev = if i == 0 { String::new() } else { fak::digest(&entries[i - 1]["event"]) };
        assert_eq!(e["event"]["prev_event"], prev.as_str(), "entry {i} chains to the previous event");
    }
    assert_eq!(j["initial"]["rev"], rev(1).as_str());
    assert_eq!(entries[0]["event"]["base_rev"], rev(1).as_str());
    assert_eq!(entries[1]["event"]["base_rev"], rev(2).as_str());
    fak::verify_journal(&j).expect("verifies");
    assert_eq!(fak::journal(&views, &events()).expect("again"), j, "deterministic");
    // Exported again after the record moved on: the same revs give the same journal.
    let later: Vec<pb::RecordView> = views
        .iter()
        .cloned()
        .map(|mut v| {
            v.current_rev = 9;
            v
        })
        .collect();
    assert_eq!(fak::journal(&later, &events()).expect("later"), j, "a later rev changes no digest");

    let mut tampered = j.clone();
    tampered["entries"][1]["record"]["title"] = json!("changed");
    assert_eq!(fak::verify_journal(&tampered).expect_err("tampered").pointer, "/entries/1/record_digest");
    let mut tampered = j.clone();
    tampered["entries"][0]["event"]["ts"] = json!("later");
    assert_eq!(fak::verify_journal(&tampered).expect_err("tampered").pointer, "/entries/1/event/prev_event");
    let mut tampered = j.clone();
    tampered["task_id"] = json!("task_rec_5");
    assert_eq!(fak::verify_journal(&tampered).expect_err("tampered").pointer, "/digest");

    // Missing an event, or views that skip a rev, are refused.
    assert!(fak::journal(&views, &events()[..2]).is_err());
    assert!(fak::journal(&[view(1), view(3)], &events()).is_err());
}

/// Golden digests: a change of the canonical encoding, of the rev encoding or of the journal's
/// shape changes these strings, which adapters may have stored.
#[test]
fn digests_are_stable() {
    assert_eq!(
        fak::canonical_json(&json!({"b": 1, "a": ["x", {"d": null, "c": true}]})),
        r#"{"a":["x",{"c":true,"d":null}],"b":1}"#
    );
    assert_eq!(
        fak::digest(&json!({"b": 1, "a": ["x", {"d": null, "c": true}]})),
        "sha256:a46132885a1b43f40baa746a84bc5202eb7d6caa4b5c78d51f56a2923b0741fa"
    );
    assert_eq!(fak::no_rev(), "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assert_eq!(rev(1), "sha256:f94fe8224ceb89cee1bca36a75ede2bc7e583a6c7a67a92f8eccb847fe820955");
    let views: Vec<pb::RecordView> = (1..=3).map(view).collect();
    let j = fak::journal(&views, &events()).expect("exports");
    assert_eq!(j["digest"], "sha256:759fd2f5cf0c0d20d0fb0ccbb4f57e24a8d2679176b5fcd434ea2fe6480bf159");
}
