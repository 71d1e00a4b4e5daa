//! Labels and the capability floor (design §2): labeled versions, the explicit widening, and the
//! floor on the base paths (Post, Task inputs, publishing) for labeled content only. Every step
//! also runs the world's invariant and rebuild checks (L1, design §8.3); these tests assert the
//! specific behaviour, and that a refusal records nothing.

use kungfu_core::action::{Addressees, LabeledBody};
use kungfu_core::model::{Audience, Pin, VersionLabels};
use kungfu_core::read::{self, ReadError};
use kungfu_core::state::StateExt;
use kungfu_core::testkit::World;
use kungfu_core::{Action, ActionResult, ContractDraft, PostBody};
use kungfu_types::{
    AgentId, Code, Content, FakReason, Labels, MemoryId, NextStep, Rejection, Role, Scope, Taint, ThreadId, Version,
};

// --- helpers ----------------------------------------------------------------------------------------

fn labels(taint: Taint, scope: Scope) -> Labels {
    Labels::new(taint, scope)
}

fn labels_of(w: &World, pin: Pin) -> Option<Labels> {
    w.state.labels(pin).expect("state")
}

fn label_record(w: &World, pin: Pin) -> VersionLabels {
    w.state.version_labels(pin.memory, pin.version).expect("state").expect("the version is labeled")
}

fn content_of(w: &World, pin: Pin) -> Content {
    w.state.memory_version(pin.memory, pin.version).expect("state").expect("version exists").content
}

fn current(w: &World, memory: MemoryId) -> Version {
    w.state.memory(memory).expect("state").expect("memory exists").current
}

fn create_memory(w: &mut World, author: AgentId, text: &str) -> Pin {
    match w.ok(author, Action::CreateMemory { content: Content::from(text) }) {
        ActionResult::MemoryCreated { memory, version } => Pin { memory, version },
        other => panic!("unexpected {other:?}"),
    }
}

fn post_pin(thread: ThreadId, pin: Pin) -> Action {
    Action::Post { thread, body: PostBody::Pin(pin), reply_to: None, ask: None, task_ref: None, assignment: None }
}

fn task_with_input(pin: Pin) -> Action {
    let mut contract = ContractDraft::simple("requirements", "acceptance");
    contract.inputs = vec![pin];
    Action::CreateTask { audience: Audience::Open, contract }
}

/// Asserts a floor refusal: TRUST_VIOLATION naming the field, fak's TRUST_VIOLATION, next step
/// revise (design §2.3, §2.8).
#[track_caller]
fn assert_trust_violation(r: &Rejection, field: &str) {
    assert_eq!(r.code, Code::TrustViolation, "{r}");
    assert_eq!(r.field.as_deref(), Some(field), "{r}");
    assert_eq!(r.fak_reason(), Some(FakReason::TrustViolation), "{r}");
    assert_eq!(r.next, NextStep::Revise, "{r}");
}

/// Two speakers in one thread, governed by the first.
fn pair(w: &mut World) -> (AgentId, AgentId, ThreadId) {
    let x = w.register();
    let y = w.register();
    let t = w.thread_with(x, &[(y, Role::Speaker)]);
    (x, y, t)
}

// --- labeled versions and widening (design §2.2, §2.5) ----------------------------------------------

#[test]
fn labeled_version_keeps_its_labels_after_widening() {
    let mut w = World::new();
    let x = w.register();
    let v1 = w.write_labeled(x, None, "draft", labels(Taint::Trusted, Scope::Fleet));
    assert_eq!(v1.version, Version::FIRST);
    let v2 = w.widen(x, v1, Scope::Tenant);

    // The widened version carries the taint of its source and the new scope, and says where it
    // came from; the source version's labels are untouched.
    assert_eq!(labels_of(&w, v1), Some(labels(Taint::Trusted, Scope::Fleet)));
    assert_eq!(label_record(&w, v1).widened_from, None);
    assert_eq!(labels_of(&w, v2), Some(labels(Taint::Trusted, Scope::Tenant)));
    assert_eq!(label_record(&w, v2).widened_from, Some(Version::FIRST));
    // Widening again moves on from the newest labels; the first two versions stay as they were.
    let v3 = w.widen(x, v2, Scope::Public);
    assert_eq!(labels_of(&w, v3), Some(labels(Taint::Trusted, Scope::Public)));
    assert_eq!(labels_of(&w, v1), Some(labels(Taint::Trusted, Scope::Fleet)));
    assert_eq!(labels_of(&w, v2), Some(labels(Taint::Trusted, Scope::Tenant)));
    // The author reads each version with its own labels.
    let view = read::read_memory(&w.state, x, v1.memory, Some(v1.version)).expect("readable");
    assert_eq!(view.labels, Some(labels(Taint::Trusted, Scope::Fleet)));
}

#[test]
fn widening_makes_a_new_version_and_old_pins_keep_old_labels() {
    let mut w = World::new();
    let (x, y, t) = pair(&mut w);
    let fleet = labels(Taint::Tainted, Scope::Fleet);
    let v1 = w.write_labeled(x, None, "shared", fleet);
    let entry = match w.ok(x, post_pin(t, v1)) {
        ActionResult::Posted { entry, .. } => entry,
        other => panic!("unexpected {other:?}"),
    };

    let r = w.ok(x, Action::WidenScope { pin: v1, scope: Scope::Public });
    let v2 = Pin { memory: v1.memory, version: Version(2) };
    assert_eq!(r, ActionResult::ScopeWidened { from: v1, to: v2, scope: Scope::Public });
    // A new current version with the same bytes; the Memory's visibility is unchanged (§5).
    assert_eq!(current(&w, v1.memory), v2.version);
    assert_eq!(content_of(&w, v2), content_of(&w, v1));
    assert!(!w.state.memory(v1.memory).expect("state").expect("memory").is_public());
    // The entry still pins v1, read by the other member with v1's labels.
    let view = read::read_entry(&w.state, y, t, entry).expect("readable");
    assert_eq!(view.entry.pin, v1);
    assert_eq!(view.labels, Some(fleet));
    assert_eq!(view.content, Some(Content::from("shared")));
    assert!(!view.held);
}

#[test]
fn widening_quarantined_content_is_a_trust_violation() {
    let mut w = World::new();
    let x = w.register();
    let pin = w.write_labeled(x, None, "suspicious", labels(Taint::Quarantined, Scope::Agent));
    for scope in [Scope::Fleet, Scope::Tenant, Scope::Public] {
        let r = w.refused(x, Action::WidenScope { pin, scope });
        assert_trust_violation(&r, "pin");
        assert!(r.message.contains("quarantined"), "{r}");
    }
    assert_eq!(current(&w, pin.memory), Version::FIRST);
}

#[test]
fn widening_to_the_same_scope_has_no_effect() {
    let mut w = World::new();
    let x = w.register();
    let pin = w.write_labeled(x, None, "text", labels(Taint::Tainted, Scope::Tenant));
    let r = w.refused(x, Action::WidenScope { pin, scope: Scope::Tenant });
    assert_eq!(r.code, Code::NoEffect, "{r}");
    assert_eq!(r.field.as_deref(), Some("scope"));
    assert_eq!(r.fak_reason(), Some(FakReason::PolicyBlock));

    // An unlabeled version counts as (tainted, agent): widening it to agent is no effect, and
    // widening it to fleet labels the new version (tainted, fleet).
    let base = create_memory(&mut w, x, "unlabeled");
    let r = w.refused(x, Action::WidenScope { pin: base, scope: Scope::Agent });
    assert_eq!(r.code, Code::NoEffect, "{r}");
    let widened = w.widen(x, base, Scope::Fleet);
    assert_eq!(labels_of(&w, widened), Some(labels(Taint::Tainted, Scope::Fleet)));
    assert_eq!(labels_of(&w, base), None, "the unlabeled version stays unlabeled");
}

#[test]
fn narrowing_through_widen_is_refused() {
    let mut w = World::new();
    let x = w.register();
    let pin = w.write_labeled(x, None, "text", labels(Taint::Trusted, Scope::Tenant));
    for scope in [Scope::Agent, Scope::Fleet] {
        let r = w.refused(x, Action::WidenScope { pin, scope });
        assert_eq!(r.code, Code::InvalidArgument, "{r}");
        assert_eq!(r.field.as_deref(), Some("scope"));
        assert_eq!(r.fak_reason(), Some(FakReason::Malformed));
    }
    // Narrowing is a new labeled version, written by the author.
    let narrowed = w.write_labeled(x, Some(pin.memory), "text", labels(Taint::Trusted, Scope::Agent));
    assert_eq!(narrowed.version, Version(2));
    assert_eq!(labels_of(&w, narrowed), Some(labels(Taint::Trusted, Scope::Agent)));
}

#[test]
fn widening_needs_an_existing_version_of_the_callers_own_valid_memory() {
    let mut w = World::new();
    let x = w.register();
    let y = w.register();
    let pin = w.write_labeled(x, None, "text", labels(Taint::Tainted, Scope::Fleet));
    // Another agent's private Memory is indistinguishable from an unknown one (§12).
    let r = w.refused(y, Action::WidenScope { pin, scope: Scope::Tenant });
    assert_eq!(r.code, Code::NotFound, "{r}");
    assert_eq!(r.fak_reason(), Some(FakReason::DefaultDeny));
    // A version that does not exist.
    let r = w.refused(x, Action::WidenScope { pin: Pin { version: Version(9), ..pin }, scope: Scope::Tenant });
    assert_eq!(r.code, Code::InvalidArgument, "{r}");
    assert_eq!(r.field.as_deref(), Some("pin.version"));
    // Another agent's public Memory: readable, but only its author changes it.
    let public = w.write_labeled(x, None, "open", labels(Taint::Tainted, Scope::Public));
    w.ok(x, Action::PublishMemory { memory: public.memory });
    let other = w.write_labeled(x, None, "f", labels(Taint::Tainted, Scope::Fleet));
    let r = w.refused(y, Action::WidenScope { pin: public, scope: Scope::Public });
    assert_eq!(r.code, Code::NotAuthor, "{r}");
    // A withdrawn Memory takes no new version.
    w.ok(x, Action::WithdrawMemory { memory: other.memory });
    let r = w.refused(x, Action::WidenScope { pin: other, scope: Scope::Tenant });
    assert_eq!(r.code, Code::MemoryWithdrawn, "{r}");
    assert_eq!(r.field.as_deref(), Some("pin.memory"));
}

// --- publishing (design §2.4) -----------------------------------------------------------------------

#[test]
fn publishing_a_version_below_public_is_refused() {
    let mut w = World::new();
    let x = w.register();
    let y = w.register();
    for scope in [Scope::Agent, Scope::Fleet, Scope::Tenant] {
        let pin = w.write_labeled(x, None, "text", labels(Taint::Trusted, scope));
        let r = w.refused(x, Action::PublishMemory { memory: pin.memory });
        assert_trust_violation(&r, "memory");
        assert!(r.message.contains("WidenScope"), "the refusal names the way out: {r}");
    }
    // Quarantined content is never published, whatever its scope.
    let q = w.write_labeled(x, None, "q", labels(Taint::Quarantined, Scope::Public));
    let r = w.refused(x, Action::PublishMemory { memory: q.memory });
    assert_trust_violation(&r, "memory");
    assert!(r.message.contains("quarantined"), "{r}");

    // Widened to public, the Memory publishes, and every agent reads its current version.
    let pin = w.write_labeled(x, None, "text", labels(Taint::Tainted, Scope::Tenant));
    let public = w.widen(x, pin, Scope::Public);
    w.ok(x, Action::PublishMemory { memory: pin.memory });
    let view = read::read_memory(&w.state, y, pin.memory, None).expect("public");
    assert_eq!(view.version, public.version);
    assert_eq!(view.labels, Some(labels(Taint::Tainted, Scope::Public)));
    // An unlabeled current version publishes as the spec says (R2).
    let base = create_memory(&mut w, x, "base");
    w.ok(x, Action::PublishMemory { memory: base.memory });
}

#[test]
fn a_public_memory_takes_no_version_below_public() {
    let mut w = World::new();
    let x = w.register();
    let y = w.register();
    let v1 = w.write_labeled(x, None, "v1", labels(Taint::Tainted, Scope::Fleet));
    let v2 = w.widen(x, v1, Scope::Public);
    w.ok(x, Action::PublishMemory { memory: v1.memory });

    // A labeled write below public, or quarantined, would become readable by every agent.
    for l in [labels(Taint::Trusted, Scope::Tenant), labels(Taint::Quarantined, Scope::Public)] {
        let r = w.refused(x, Action::WriteLabeled { memory: Some(v1.memory), content: Content::from("x"), labels: l });
        assert_trust_violation(&r, "labels");
    }
    // Widening an older version to less than public would make it current: refused too.
    let r = w.refused(x, Action::WidenScope { pin: v1, scope: Scope::Tenant });
    assert_trust_violation(&r, "scope");
    assert_eq!(current(&w, v1.memory), v2.version);

    // A public labeled write is fine, and so is a base update (an unlabeled version, R2).
    let v3 = w.write_labeled(x, Some(v1.memory), "v3", labels(Taint::Trusted, Scope::Public));
    assert_eq!(v3.version, Version(3));
    w.ok(x, Action::UpdateMemory { memory: v1.memory, content: Content::from("v4") });
    let view = read::read_memory(&w.state, y, v1.memory, None).expect("public");
    assert_eq!((view.version, view.labels), (Version(4), None));

    // Unpublished, the Memory takes any labels again; publishing then checks the current one.
    w.ok(x, Action::UnpublishMemory { memory: v1.memory });
    let v5 = w.write_labeled(x, Some(v1.memory), "v5", labels(Taint::Tainted, Scope::Fleet));
    assert_eq!(v5.version, Version(5));
    let r = w.refused(x, Action::PublishMemory { memory: v1.memory });
    assert_trust_violation(&r, "memory");
}

// --- the floor on base actions (design §2.4) --------------------------------------------------------

#[test]
fn base_post_of_an_agent_scoped_pin_is_refused() {
    let mut w = World::new();
    let (x, y, t) = pair(&mut w);
    let private = w.write_labeled(x, None, "mine", labels(Taint::Trusted, Scope::Agent));
    let r = w.refused(x, post_pin(t, private));
    assert_trust_violation(&r, "body.pin");
    // With an assignment too: the entry is the same entry.
    let with_assignment = Action::Post {
        thread: t,
        body: PostBody::Pin(private),
        reply_to: None,
        ask: None,
        task_ref: None,
        assignment: Some(kungfu_core::NewAssignment {
            addressee: y,
            criteria: Content::from("c"),
            output_structure: None,
            delivery_window: None,
            judgment_window: None,
        }),
    };
    assert_trust_violation(&w.refused(x, with_assignment), "body.pin");
    // Quarantined is refused at any scope.
    let q = w.write_labeled(x, None, "q", labels(Taint::Quarantined, Scope::Public));
    let r = w.refused(x, post_pin(t, q));
    assert_trust_violation(&r, "body.pin");
    assert!(r.message.contains("quarantined"), "{r}");
    // Fleet or wider posts.
    for scope in [Scope::Fleet, Scope::Tenant, Scope::Public] {
        let pin = w.write_labeled(x, None, "ok", labels(Taint::Tainted, scope));
        w.ok(x, post_pin(t, pin));
    }
}

#[test]
fn base_post_of_unlabeled_content_behaves_as_the_spec_says() {
    let mut w = World::new();
    let (x, y, t) = pair(&mut w);
    let base = create_memory(&mut w, x, "unlabeled");
    // An unlabeled pin posts (R2), though the coordination path would count it as private.
    let (entry, responders) = match w.ok(x, post_pin(t, base)) {
        ActionResult::Posted { entry, responders, .. } => (entry, responders),
        other => panic!("unexpected {other:?}"),
    };
    // §6.3 rule 3: exactly two speakers, so the other one is asked.
    assert_eq!(responders, [y].into_iter().collect());
    let view = read::read_entry(&w.state, y, t, entry).expect("readable");
    assert_eq!((view.labels, view.held, view.content), (None, false, Some(Content::from("unlabeled"))));
    // New content in a post is unlabeled too, and posts as today.
    let e2 = w.post(y, t, "reply", Some(entry), None);
    let view = read::read_entry(&w.state, x, t, e2).expect("readable");
    assert_eq!((view.labels, view.held, view.content), (None, false, Some(Content::from("reply"))));
    assert_eq!(labels_of(&w, view.entry.pin), None);
    // The same unlabeled pin sent on the coordination path is refused (design §3.3 step 3).
    let r = w.refused(
        x,
        Action::Send {
            thread: t,
            body: LabeledBody::Pin(base),
            to: Addressees::Nobody,
            reply_to: None,
            reply_to_latest: false,
        },
    );
    assert_trust_violation(&r, "body.pin");
}

#[test]
fn task_input_below_tenant_is_refused() {
    let mut w = World::new();
    let x = w.register();
    for scope in [Scope::Agent, Scope::Fleet] {
        let pin = w.write_labeled(x, None, "input", labels(Taint::Trusted, scope));
        let r = w.refused(x, task_with_input(pin));
        assert_trust_violation(&r, "contract.inputs[0]");
    }
    let q = w.write_labeled(x, None, "q", labels(Taint::Quarantined, Scope::Public));
    assert_trust_violation(&w.refused(x, task_with_input(q)), "contract.inputs[0]");

    // Tenant, public and unlabeled inputs are fine; a revision is held to the same floor.
    let tenant = w.write_labeled(x, None, "input", labels(Taint::Tainted, Scope::Tenant));
    let base = create_memory(&mut w, x, "input");
    let task = match w.ok(x, task_with_input(tenant)) {
        ActionResult::TaskCreated { task, .. } => task,
        other => panic!("unexpected {other:?}"),
    };
    let fleet = w.write_labeled(x, None, "input", labels(Taint::Tainted, Scope::Fleet));
    let mut contract = ContractDraft::simple("r2", "a2");
    contract.inputs = vec![base, fleet];
    let r = w.refused(x, Action::ReviseContract { task, contract: contract.clone() });
    assert_trust_violation(&r, "contract.inputs[1]");
    contract.inputs = vec![base, tenant];
    w.ok(x, Action::ReviseContract { task, contract });
}

#[test]
fn an_unreadable_pin_answers_not_found_before_its_labels() {
    let mut w = World::new();
    let (x, y, t) = pair(&mut w);
    // y's private, quarantined version: x must learn nothing about it, labels included (§12).
    let hidden = w.write_labeled(y, None, "secret", labels(Taint::Quarantined, Scope::Agent));
    let send = |pin| Action::Send {
        thread: t,
        body: LabeledBody::Pin(pin),
        to: Addressees::Nobody,
        reply_to: None,
        reply_to_latest: false,
    };
    for (action, field) in [(post_pin(t, hidden), None), (send(hidden), None)] {
        let r = w.refused(x, action);
        assert_eq!(r.code, Code::NotFound, "{r}");
        assert_eq!(r.field, field);
        for word in ["quarantined", "agent", "scope", "label"] {
            assert!(!r.message.contains(word), "the refusal reveals {word}: {r}");
        }
    }
    let r = w.refused(x, task_with_input(hidden));
    assert_eq!(r.code, Code::NotFound, "{r}");
    assert!(!r.message.contains("quarantined"), "{r}");
    // An older version of y's public Memory is not readable by x: refused as unreadable, not by
    // its (fleet) labels.
    let v1 = w.write_labeled(y, None, "v1", labels(Taint::Tainted, Scope::Fleet));
    w.widen(y, v1, Scope::Public);
    w.ok(y, Action::PublishMemory { memory: v1.memory });
    for action in [post_pin(t, v1), send(v1)] {
        let r = w.refused(x, action);
        assert_eq!(r.code, Code::InvalidArgument, "{r}");
        assert_eq!(r.field.as_deref(), Some("body.pin"));
        assert!(!r.message.contains("fleet"), "{r}");
    }
}

#[test]
fn the_author_reads_its_own_quarantined_version_with_its_labels() {
    let mut w = World::new();
    let x = w.register();
    let y = w.register();
    let q = labels(Taint::Quarantined, Scope::Agent);
    let pin = w.write_labeled(x, None, "held back", q);
    let view = read::read_memory(&w.state, x, pin.memory, Some(pin.version)).expect("the author reads it");
    assert_eq!(view.content, Content::from("held back"));
    assert_eq!(view.labels, Some(q));
    // Nobody else can reach it.
    match read::read_memory(&w.state, y, pin.memory, None) {
        Err(ReadError::Rejected(r)) => assert_eq!(r.code, Code::NotFound),
        other => panic!("expected NOT_FOUND, got {other:?}"),
    }
}

// --- WriteLabeled (design §2.5) ---------------------------------------------------------------------

#[test]
fn write_labeled_writes_one_version_and_its_label_in_one_command() {
    let mut w = World::new();
    let x = w.register();
    let l = labels(Taint::Trusted, Scope::Fleet);
    let key = w.fresh_key();
    let applied = w.exec(
        kungfu_core::Principal::Agent(x),
        Action::WriteLabeled { memory: None, content: Content::from("c"), labels: l },
        Some(key),
    );
    let receipt = applied.outcome.expect("written");
    let pin = Pin { memory: MemoryId(1), version: Version::FIRST };
    assert_eq!(receipt.result, ActionResult::LabeledWritten { pin, labels: l });
    let names: Vec<&str> = applied.facts.iter().map(|f| f.fact.name()).collect();
    assert_eq!(names, ["memory_created", "version_labeled"]);
    assert!(applied.facts.iter().all(|f| f.seq == applied.facts[0].seq));
    // A labeled new version of the author's own Memory.
    let v2 = w.write_labeled(x, Some(pin.memory), "c2", labels(Taint::Tainted, Scope::Tenant));
    assert_eq!(v2, Pin { memory: pin.memory, version: Version(2) });
    assert_eq!(label_record(&w, v2).widened_from, None);
    // Not another agent's Memory, and not past the content limit (fak's OVERSIZE).
    let y = w.register();
    let r = w.refused(y, Action::WriteLabeled { memory: Some(pin.memory), content: Content::from("c"), labels: l });
    assert_eq!(r.code, Code::NotFound, "{r}");
    let big = Content::new(vec![b'x'; w.limits.max_content_bytes + 1]);
    let r = w.refused(x, Action::WriteLabeled { memory: None, content: big, labels: l });
    assert_eq!(r.code, Code::LimitExceeded, "{r}");
    assert_eq!(r.field.as_deref(), Some("content"));
    assert_eq!(r.fak_reason(), Some(FakReason::Oversize));
}

// --- the invariants (design §8.3) catch what the floor prevents ---------------------------------------

/// Overwrites a version's label record in place, as a bug or a store restored from elsewhere
/// could; `validate` must then fail with the named rule.
fn inject_labels(w: &mut World, pin: Pin, l: Labels) {
    let record = VersionLabels { memory: pin.memory, version: pin.version, labels: l, widened_from: None };
    w.state.map.insert(kungfu_core::keys::version_labels(pin.memory, pin.version), kungfu_core::Record::Labels(record));
}

#[track_caller]
fn assert_violation(w: &World, rule: &str) {
    match kungfu_core::validate::validate(&w.state) {
        Err(v) => assert!(v.rule.contains(rule), "expected {rule}, got {v}"),
        Ok(()) => panic!("validate accepted a state that breaks {rule}"),
    }
}

#[test]
fn validate_refuses_labeled_content_below_its_floor() {
    // An entry pinning agent-scoped content.
    let mut w = World::new();
    let (x, _, t) = pair(&mut w);
    let pin = w.write_labeled(x, None, "text", labels(Taint::Tainted, Scope::Fleet));
    w.ok(x, post_pin(t, pin));
    inject_labels(&mut w, pin, labels(Taint::Tainted, Scope::Agent));
    assert_violation(&w, "no entry pins content below its floor");

    // A Task input below tenant.
    let mut w = World::new();
    let x = w.register();
    let pin = w.write_labeled(x, None, "input", labels(Taint::Tainted, Scope::Tenant));
    w.ok(x, task_with_input(pin));
    inject_labels(&mut w, pin, labels(Taint::Quarantined, Scope::Tenant));
    assert_violation(&w, "no Task input below its floor");

    // A public Memory whose current version is below public.
    let mut w = World::new();
    let x = w.register();
    let pin = w.write_labeled(x, None, "open", labels(Taint::Tainted, Scope::Public));
    w.ok(x, Action::PublishMemory { memory: pin.memory });
    inject_labels(&mut w, pin, labels(Taint::Tainted, Scope::Tenant));
    assert_violation(&w, "a public Memory's current version is publishable");
}

#[test]
fn validate_refuses_labels_that_no_fact_wrote() {
    let mut w = World::new();
    let x = w.register();
    // A label record for an unlabeled version: no `VersionLabeled` fact wrote it.
    let base = create_memory(&mut w, x, "base");
    inject_labels(&mut w, base, labels(Taint::Tainted, Scope::Fleet));
    assert_violation(&w, "the label records are the label facts");
    // A label record for a version that does not exist.
    let mut w = World::new();
    let x = w.register();
    let pin = w.write_labeled(x, None, "text", labels(Taint::Tainted, Scope::Fleet));
    inject_labels(&mut w, Pin { version: Version(2), ..pin }, labels(Taint::Tainted, Scope::Fleet));
    assert_violation(&w, "labels name an existing version");
}
