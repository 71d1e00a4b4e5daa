//! The leader's pre-check (DESIGN §3, issue #15): `precheck` decides a command as far as its first
//! fact. Every command of every core test also checks that a refusal or replay it answers is
//! exactly apply's (`World::exec_cmd`); these tests pin that it answers at all, and where it stops.

use kungfu_core::testkit::World;
use kungfu_core::{Action, Command, PostBody, Precheck, Principal, precheck};
use kungfu_types::{Code, Content, Role};

fn post(thread: kungfu_types::ThreadId, text: &str) -> Action {
    Action::Post {
        thread,
        body: PostBody::Content(Content::from(text)),
        reply_to: None,
        ask: None,
        task_ref: None,
        assignment: None,
    }
}

#[test]
fn a_clear_refusal_a_replay_and_an_accepted_post_are_told_apart_without_applying() {
    let mut w = World::new();
    let author = w.register();
    let stranger = w.register();
    let observer = w.register();
    let thread = w.thread_with(author, &[(observer, Role::Observer)]);
    let limits = w.limits.clone();

    // Not a member: refused before anything is recorded, as apply refuses it.
    let ts = w.now.plus(kungfu_types::Micros(1));
    let key = w.fresh_key();
    let cmd = Command::new(Principal::Agent(stranger), post(thread, "hello"), Some(key), ts);
    match precheck(&w.state, &cmd, &limits).expect("state readable") {
        Precheck::Refused(r) => assert_eq!(r.code, Code::NotFound, "{r}"),
        other => panic!("a stranger's post was not refused: {other:?}"),
    }
    // An observer may not speak (§6.3): refused by the pre-check too.
    let key = w.fresh_key();
    let cmd = Command::new(Principal::Agent(observer), post(thread, "hello"), Some(key), ts);
    match precheck(&w.state, &cmd, &limits).expect("state readable") {
        Precheck::Refused(r) => assert_eq!(r.code, Code::CannotSpeak, "{r}"),
        other => panic!("an observer's post was not refused: {other:?}"),
    }

    // A post its author may make: the probe stops at its first fact and builds nothing.
    let key = w.fresh_key();
    let cmd = Command::new(Principal::Agent(author), post(thread, "hello"), Some(key), ts);
    assert_eq!(precheck(&w.state, &cmd, &limits).expect("state readable"), Precheck::Proceed);
    let before = w.state.clone();
    assert_eq!(precheck(&w.state, &cmd, &limits).expect("state readable"), Precheck::Proceed);
    assert!(w.state == before, "a pre-check changed the state");

    // Once applied, the same request is a replay: the pre-check answers with the stored receipt.
    let applied = w.exec_cmd(&cmd);
    let receipt = applied.outcome.expect("the author's post is accepted");
    let later = Command::new(
        Principal::Agent(author),
        post(thread, "hello"),
        cmd.key.clone(),
        w.now.plus(kungfu_types::Micros(5)),
    );
    assert_eq!(precheck(&w.state, &later, &limits).expect("state readable"), Precheck::Replayed(receipt));

    // The same key for a different request is refused (L3), by the pre-check as by apply.
    let reused = Command::new(
        Principal::Agent(author),
        post(thread, "other"),
        cmd.key.clone(),
        w.now.plus(kungfu_types::Micros(6)),
    );
    match precheck(&w.state, &reused, &limits).expect("state readable") {
        Precheck::Refused(r) => assert_eq!(r.code, Code::IdempotencyKeyReused, "{r}"),
        other => panic!("a reused key was not refused: {other:?}"),
    }
}
