//! §5 Memory: versions, visibility, withdrawal, and what publishing does not grant.

use kungfu_client::{Code, pb};
use kungfu_system_tests::conformance::*;
use kungfu_system_tests::{cases, outcome};

cases! {
    create_makes_version_one_private_and_valid ["§5.1"],
    only_the_author_updates_publishes_unpublishes_or_withdraws ["§5.2"],
    withdrawal_is_terminal_and_the_memory_never_becomes_valid_again ["§5.3"],
    versions_are_immutable_and_a_reference_pins_exactly_one ["§5.4"],
    visibility_belongs_to_the_memory_and_others_read_its_current_version ["§5.5"],
    withdrawal_stops_new_references_and_direct_reading_by_others ["§5.6"],
    pinned_references_to_an_own_withdrawn_memory_stay_readable ["§5.7", "§5.9"],
    publishing_is_not_granting ["§5.8"],
    a_pin_of_another_agents_memory_is_readable_only_while_valid_and_public ["§5.10", "§5.7"],
}

/// §5.1: any active agent creates a Memory; version 1; private (another agent cannot read it).
async fn create_makes_version_one_private_and_valid(cx: Ctx) {
    let (a, b) = (cx.agent().await, cx.agent().await);
    let pin = a.memory("first").await;
    assert_eq!(pin.version, 1);
    let view =
        a.c.get_memory(pb::GetMemoryRequest { memory: pin.memory.clone(), version: None }).await.expect("read own");
    let m = view.memory.expect("memory");
    assert_eq!((m.current_version, m.public, m.withdrawn_at_unix_micros), (1, false, None));
    assert_eq!(view.content.expect("content").body, b"first");
    refused(b.c.get_memory(pb::GetMemoryRequest { memory: pin.memory, version: None }).await, Code::NotFound);
}

/// §5.2: only the author updates, publishes, unpublishes or withdraws; the others are refused with
/// no effect.
async fn only_the_author_updates_publishes_unpublishes_or_withdraws(cx: Ctx) {
    let (a, b) = (cx.agent().await, cx.agent().await);
    let pin = a.memory("mine").await;
    a.c.publish_memory(pb::PublishMemoryRequest { memory: pin.memory.clone(), ..Default::default() }, None)
        .await
        .expect("author publishes");
    let m = pin.memory.clone();
    let r =
        b.c.update_memory(
            pb::UpdateMemoryRequest { memory: m.clone(), content: text("theirs"), ..Default::default() },
            None,
        )
        .await;
    assert_eq!(rejection(r).code, Code::NotAuthor);
    let r = b.c.unpublish_memory(pb::UnpublishMemoryRequest { memory: m.clone(), ..Default::default() }, None).await;
    assert_eq!(rejection(r).code, Code::NotAuthor);
    let r = b.c.withdraw_memory(pb::WithdrawMemoryRequest { memory: m.clone(), ..Default::default() }, None).await;
    assert_eq!(rejection(r).code, Code::NotAuthor);
    let w = a
        .c
        .update_memory(pb::UpdateMemoryRequest { memory: m.clone(), content: text("v2"), ..Default::default() }, None)
        .await
        .expect("author updates");
    assert_eq!(outcome!(w.value.receipt, MemoryUpdated).version, 2);
    let view = b.c.get_memory(pb::GetMemoryRequest { memory: m, version: None }).await.expect("public");
    assert_eq!(view.content.expect("content").body, b"v2", "nothing of b's refused calls took effect");
}

// ---------------------------------------------------------------------------------------------
// Helpers of this section.

/// A direct read of a Memory (`version` None: the current one).
async fn read(a: &Agent, memory: &str, version: Option<u32>) -> Result<pb::MemoryView, kungfu_client::Error> {
    a.c.get_memory(pb::GetMemoryRequest { memory: memory.into(), version }).await
}

/// The content bytes of a Memory view.
fn body(v: &pb::MemoryView) -> Vec<u8> {
    v.content.as_ref().map(|c| c.body.clone()).unwrap_or_default()
}

/// An entry as a current member reads it: its structure and its content when readable.
async fn entry(a: &Agent, thread: &str, seq: u64) -> (pb::Entry, Option<Vec<u8>>) {
    let v =
        a.c.get_entry(pb::GetEntryRequest { thread: thread.into(), entry: seq })
            .await
            .expect("a member reads the entry");
    (v.entry.expect("entry structure"), v.content.map(|c| c.body))
}

/// The Memory summary of a working set.
async fn memory_summary(a: &Agent, memory: &str) -> (pb::MemorySummary, Vec<String>) {
    let ws = a.working_set(memory).await.expect("working set of the memory");
    match ws.summary {
        Some(pb::working_set::Summary::Memory(m)) => (m, ws.available_actions),
        other => panic!("expected a memory summary, got {other:?}"),
    }
}

/// The newest entry of a thread as its member sees it in the working set.
async fn last_entry(a: &Agent, thread: &str) -> u64 {
    let ws = a.working_set(thread).await.expect("working set of the thread");
    match ws.summary {
        Some(pb::working_set::Summary::Thread(t)) => t.last_entry,
        other => panic!("expected a thread summary, got {other:?}"),
    }
}

async fn update(a: &Agent, memory: &str, body: &str) -> u32 {
    let w =
        a.c.update_memory(
            pb::UpdateMemoryRequest { memory: memory.into(), content: text(body), ..Default::default() },
            None,
        )
        .await
        .expect("author updates");
    outcome!(w.value.receipt, MemoryUpdated).version
}

async fn publish(a: &Agent, memory: &str) {
    a.c.publish_memory(pb::PublishMemoryRequest { memory: memory.into(), ..Default::default() }, None)
        .await
        .expect("author publishes");
}

async fn unpublish(a: &Agent, memory: &str) {
    a.c.unpublish_memory(pb::UnpublishMemoryRequest { memory: memory.into(), ..Default::default() }, None)
        .await
        .expect("author unpublishes");
}

async fn withdraw(a: &Agent, memory: &str) {
    let w =
        a.c.withdraw_memory(pb::WithdrawMemoryRequest { memory: memory.into(), ..Default::default() }, None)
            .await
            .expect("author withdraws");
    assert_eq!(outcome!(w.value.receipt, MemoryWithdrawn).memory, memory);
}

/// Creates a Task whose contract has these required inputs; the raw result.
async fn task_with_inputs(
    a: &Agent,
    inputs: Vec<pb::MemoryPin>,
) -> Result<kungfu_client::Written<pb::CreateTaskResponse>, kungfu_client::Error> {
    let mut c = contract(Some(60 * SECOND), Some(60 * SECOND));
    c.inputs = inputs;
    a.c.create_task(
        pb::CreateTaskRequest {
            audience: Some(pb::Audience { kind: Some(open()) }),
            contract: Some(c),
            ..Default::default()
        },
        None,
    )
    .await
}

fn pin(memory: &str, version: u32) -> pb::MemoryPin {
    pb::MemoryPin { memory: memory.into(), version }
}

// ---------------------------------------------------------------------------------------------
// Cases.

/// §5 rule: "Withdrawal is terminal: a withdrawn Memory receives no further versions" (§5.3); it
/// never becomes valid (or readable to others) again.
async fn withdrawal_is_terminal_and_the_memory_never_becomes_valid_again(cx: Ctx) {
    let (a, b) = (cx.agent().await, cx.agent().await);
    let m = a.memory("v1").await.memory;
    publish(&a, &m).await;
    assert_eq!(update(&a, &m, "v2").await, 2);
    withdraw(&a, &m).await;
    let before = read(&a, &m, None).await.expect("the author still reads its withdrawn Memory");
    let rec = before.memory.clone().expect("memory");
    assert_eq!(rec.current_version, 2);
    assert!(rec.withdrawn_at_unix_micros.is_some(), "the read shows the withdrawal: {rec:?}");

    // §5.3: no further versions, and nothing makes it valid again.
    let r = a
        .c
        .update_memory(pb::UpdateMemoryRequest { memory: m.clone(), content: text("v3"), ..Default::default() }, None)
        .await;
    refused(r, Code::MemoryWithdrawn);
    let r = a.c.publish_memory(pb::PublishMemoryRequest { memory: m.clone(), ..Default::default() }, None).await;
    refused(r, Code::MemoryWithdrawn);
    let r = a.c.unpublish_memory(pb::UnpublishMemoryRequest { memory: m.clone(), ..Default::default() }, None).await;
    refused(r, Code::MemoryWithdrawn);
    let r = a.c.withdraw_memory(pb::WithdrawMemoryRequest { memory: m.clone(), ..Default::default() }, None).await;
    refused(r, Code::MemoryWithdrawn);

    // Read back: nothing changed, there is no version 3, and others still cannot read it.
    let after = read(&a, &m, None).await.expect("author reads");
    assert_eq!(after, before, "a refused action changed the withdrawn Memory");
    assert_eq!(body(&after), b"v2");
    refused(read(&a, &m, Some(3)).await, Code::NotFound);
    refused(read(&b, &m, None).await, Code::NotFound);
    let (summary, actions) = memory_summary(&a, &m).await;
    assert!(summary.withdrawn && summary.current_version == 2, "{summary:?}");
    assert!(actions.is_empty(), "a withdrawn Memory offers no action: {actions:?}");
}

/// §5 rule: "Versions are immutable. A reference always pins one version." (§5.4): every version
/// keeps its content after later updates, and an entry pins exactly the version it named.
async fn versions_are_immutable_and_a_reference_pins_exactly_one(cx: Ctx) {
    let (a, b) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&a, &[&b]).await;
    let m = a.memory("one").await.memory;
    let v1 = read(&a, &m, Some(1)).await.expect("v1");
    let posted = a.post(Post::pin(&t.id, &m, 1)).await;
    assert_eq!(posted.pin, Some(pin(&m, 1)), "the receipt names the pinned version");
    assert_eq!(update(&a, &m, "two").await, 2);
    assert_eq!(update(&a, &m, "three").await, 3);

    // Every version keeps its content and its time; the current one is the newest.
    let again = read(&a, &m, Some(1)).await.expect("v1 again");
    assert_eq!(
        (again.version, again.version_created_at_unix_micros, body(&again)),
        (v1.version, v1.version_created_at_unix_micros, body(&v1)),
        "version 1 changed after updates"
    );
    for (v, want) in [(1u32, "one"), (2, "two"), (3, "three")] {
        let view = read(&a, &m, Some(v)).await.expect("author reads every version");
        assert_eq!((view.version, body(&view)), (v, want.as_bytes().to_vec()));
    }
    assert_eq!(body(&read(&a, &m, None).await.expect("current")), b"three");
    refused(read(&a, &m, Some(4)).await, Code::NotFound);

    // The entry pins version 1 and shows version 1's content, not the current one.
    let (e, content) = entry(&b, &t.id, posted.entry).await;
    assert_eq!(e.pin, Some(pin(&m, 1)));
    assert_eq!(content.as_deref(), Some(&b"one"[..]));

    // A reference names one existing version: version 0 or a version that does not exist is refused.
    let last = last_entry(&a, &t.id).await;
    for v in [0u32, 9] {
        let r = refused(a.c.post(Post::pin(&t.id, &m, v), None).await, Code::InvalidArgument);
        assert!(r.field.as_deref().is_some_and(|f| f.starts_with("body.pin")), "{r:?}");
    }
    assert_eq!(last_entry(&a, &t.id).await, last, "a refused pin posted an entry");
}

/// §5 rule: "Visibility belongs to the Memory as a whole. Updating does not change visibility; the
/// readable version of a public Memory follows its current version." (§5.5)
async fn visibility_belongs_to_the_memory_and_others_read_its_current_version(cx: Ctx) {
    let (a, b) = (cx.agent().await, cx.agent().await);
    let t = b.thread(pb::Role::Speaker).await;
    let public = a.memory("p1").await.memory;
    publish(&a, &public).await;
    let private = a.memory("q1").await.memory;
    assert_eq!(update(&a, &public, "p2").await, 2);
    assert_eq!(update(&a, &private, "q2").await, 2);

    // Updating changed visibility neither way.
    assert!(read(&a, &public, None).await.expect("own").memory.expect("memory").public);
    assert!(!read(&a, &private, None).await.expect("own").memory.expect("memory").public);
    refused(read(&b, &private, None).await, Code::NotFound);

    // Others read the current version of the public Memory, and only that one.
    let view = read(&b, &public, None).await.expect("public");
    assert_eq!((view.version, body(&view)), (2, b"p2".to_vec()));
    assert_eq!(body(&read(&b, &public, Some(2)).await.expect("the current version by number")), b"p2");
    refused(read(&b, &public, Some(1)).await, Code::NotFound);
    // ... and may pin only the current version.
    let r = refused(b.c.post(Post::pin(&t.id, &public, 1), None).await, Code::InvalidArgument);
    assert_eq!(r.field.as_deref(), Some("body.pin"));
    assert_eq!(last_entry(&b, &t.id).await, 0);
    let posted = b.post(Post::pin(&t.id, &public, 2)).await;
    assert_eq!(posted.pin, Some(pin(&public, 2)));

    // The readable version follows the current one.
    assert_eq!(update(&a, &public, "p3").await, 3);
    let view = read(&b, &public, None).await.expect("public");
    assert_eq!((view.version, body(&view)), (3, b"p3".to_vec()));
    refused(read(&b, &public, Some(2)).await, Code::NotFound);
}

/// §5 rule: "Withdrawal stops new references and listing." (§5.6): pinning a withdrawn Memory in an
/// entry or as a contract input is MEMORY_WITHDRAWN with no effect, and others no longer read or
/// see it (its working set is NOT_FOUND to them; the API lists Memories nowhere else).
async fn withdrawal_stops_new_references_and_direct_reading_by_others(cx: Ctx) {
    let (a, b) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&a, &[&b]).await;
    let own = a.memory("own").await.memory;
    let shared = a.memory("shared").await.memory;
    publish(&a, &shared).await;
    b.post(Post::pin(&t.id, &shared, 1).ask(Vec::<String>::new())).await;
    assert!(read(&b, &shared, None).await.is_ok());
    assert!(b.working_set(&shared).await.is_ok());
    withdraw(&a, &own).await;
    withdraw(&a, &shared).await;

    let last = last_entry(&a, &t.id).await;
    let r = refused(a.c.post(Post::pin(&t.id, &own, 1), None).await, Code::MemoryWithdrawn);
    assert_eq!(r.field.as_deref(), Some("body.pin"));
    refused(b.c.post(Post::pin(&t.id, &shared, 1), None).await, Code::MemoryWithdrawn);
    let r = refused(task_with_inputs(&a, vec![pin(&own, 1)]).await, Code::MemoryWithdrawn);
    assert_eq!(r.field.as_deref(), Some("contract.inputs[0]"));
    assert_eq!(last_entry(&a, &t.id).await, last, "a refused pin posted an entry");
    assert!(a.turn().await.is_empty() && b.turn().await.is_empty());

    // No longer read or seen by others, though it was public.
    refused(read(&b, &shared, None).await, Code::NotFound);
    refused(read(&b, &shared, Some(1)).await, Code::NotFound);
    refused(b.working_set(&shared).await, Code::NotFound);
}

/// §5 rules: "Pinned references continue under §9" (§5.7) and "A pinned reference to one's own
/// Memory stays readable to the context's readers after withdrawal" (§5.9): in a thread, and as a
/// Task's required input bound by an engagement.
async fn pinned_references_to_an_own_withdrawn_memory_stay_readable(cx: Ctx) {
    let (a, b, w) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&a, &[&b]).await;
    let m = a.memory("private v1").await.memory;
    let pinned = a.post(Post::pin(&t.id, &m, 1).ask(Vec::<String>::new())).await;
    let posted = a.post(Post::text(&t.id, "posted content").ask(Vec::<String>::new())).await;
    let posted_memory = posted.pin.clone().expect("pin").memory;
    assert_eq!(entry(&b, &t.id, pinned.entry).await.1.as_deref(), Some(&b"private v1"[..]));
    // The pin grants no direct read of the private Memory.
    refused(read(&b, &m, None).await, Code::NotFound);

    update(&a, &m, "private v2").await;
    withdraw(&a, &m).await;
    withdraw(&a, &posted_memory).await;
    for reader in [&a, &b] {
        let (e, content) = entry(reader, &t.id, pinned.entry).await;
        assert_eq!(e.pin, Some(pin(&m, 1)));
        assert_eq!(content.as_deref(), Some(&b"private v1"[..]), "§5.9: the own pin stays readable");
        assert_eq!(entry(reader, &t.id, posted.entry).await.1.as_deref(), Some(&b"posted content"[..]));
    }
    refused(read(&b, &m, None).await, Code::NotFound);

    // A required input bound by an engagement stays readable to the engaged agent.
    let input = a.memory("input v1").await.memory;
    let task = {
        let wr = task_with_inputs(&a, vec![pin(&input, 1)]).await.expect("create task");
        outcome!(wr.value.receipt, TaskCreated).task
    };
    let engaged = w.take_task(&task).await;
    update(&a, &input, "input v2").await;
    withdraw(&a, &input).await;
    let view =
        w.c.get_engagement_input(pb::GetEngagementInputRequest { engagement: engaged.engagement.clone(), index: 0 })
            .await
            .expect("the engaged agent reads its bound input after withdrawal");
    assert_eq!((view.version, body(&view)), (1, b"input v1".to_vec()));
    refused(read(&w, &input, None).await, Code::NotFound);
}

/// §5 rule: "Publishing is not granting. Referencing another agent's public Memory creates no
/// relationship and no right to pass it on." (§5.8)
async fn publishing_is_not_granting(cx: Ctx) {
    let (a, b, c) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&b, &[&c]).await;
    let m = a.memory("a's text").await.memory;
    publish(&a, &m).await;
    let before = read(&a, &m, None).await.expect("own");
    let posted = b.post(Post::pin(&t.id, &m, 1)).await;

    // The referencing agent gains no author right ...
    let r = b
        .c
        .update_memory(pb::UpdateMemoryRequest { memory: m.clone(), content: text("b's"), ..Default::default() }, None)
        .await;
    refused(r, Code::NotAuthor);
    let r = b.c.unpublish_memory(pb::UnpublishMemoryRequest { memory: m.clone(), ..Default::default() }, None).await;
    refused(r, Code::NotAuthor);
    let r = b.c.withdraw_memory(pb::WithdrawMemoryRequest { memory: m.clone(), ..Default::default() }, None).await;
    refused(r, Code::NotAuthor);
    let (_, actions) = memory_summary(&b, &m).await;
    assert!(actions.is_empty(), "a reader of a public Memory is offered author actions: {actions:?}");
    // ... no right to pass it on as a required input ...
    let r = refused(task_with_inputs(&b, vec![pin(&m, 1)]).await, Code::NotEntitled);
    assert_eq!(r.field.as_deref(), Some("contract.inputs[0]"));
    assert_eq!(read(&a, &m, None).await.expect("own"), before, "a refused action changed the Memory");

    // ... and the author gains no relationship: no membership, no obligation, no role.
    let (e, _) = entry(&c, &t.id, posted.entry).await;
    assert_eq!(e.author, b.id, "the entry's author is who posted it");
    assert!(!e.responders.contains(&a.id));
    refused(a.c.timeline(pb::TimelineRequest { thread: t.id.clone(), after: 0, page_size: 0 }).await, Code::NotFound);
    refused(a.working_set(&t.id).await, Code::NotFound);
    assert!(a.turn().await.is_empty(), "the author owes something because of a reference");

    // Once the author unpublishes, the referencing agent cannot pin it again either.
    unpublish(&a, &m).await;
    let last = last_entry(&b, &t.id).await;
    refused(b.c.post(Post::pin(&t.id, &m, 1), None).await, Code::NotFound);
    assert_eq!(last_entry(&b, &t.id).await, last);
}

/// §5 rule: "a pinned reference to another agent's Memory is readable only while that Memory is
/// valid and public" (§5.10), and it keeps pinning its one version (§5.7).
async fn a_pin_of_another_agents_memory_is_readable_only_while_valid_and_public(cx: Ctx) {
    let (a, b, c) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&b, &[&c]).await;
    let m = a.memory("a's v1").await.memory;
    publish(&a, &m).await;
    let posted = b.post(Post::pin(&t.id, &m, 1)).await;
    let (structure, content) = entry(&c, &t.id, posted.entry).await;
    assert_eq!(content.as_deref(), Some(&b"a's v1"[..]));

    unpublish(&a, &m).await;
    for reader in [&b, &c] {
        let (e, content) = entry(reader, &t.id, posted.entry).await;
        assert_eq!(content, None, "an unpublished Memory is readable through a pin (reader {})", reader.id);
        assert_eq!(e, structure, "the entry's structure stays");
        refused(read(reader, &m, None).await, Code::NotFound);
    }

    publish(&a, &m).await;
    assert_eq!(entry(&c, &t.id, posted.entry).await.1.as_deref(), Some(&b"a's v1"[..]));
    update(&a, &m, "a's v2").await;
    assert_eq!(entry(&c, &t.id, posted.entry).await.1.as_deref(), Some(&b"a's v1"[..]), "the pinned version");

    withdraw(&a, &m).await;
    for reader in [&b, &c] {
        assert_eq!(entry(reader, &t.id, posted.entry).await.1, None, "a withdrawn Memory is readable through a pin");
    }
}
