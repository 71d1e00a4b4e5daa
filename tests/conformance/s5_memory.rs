//! §5 Memory: versions, visibility, withdrawal, and what publishing does not grant.

use kungfu_client::{Code, pb};
use kungfu_system_tests::conformance::*;
use kungfu_system_tests::{cases, outcome};

cases! {
    create_makes_version_one_private_and_valid ["§5.1"],
    only_the_author_updates_publishes_unpublishes_or_withdraws ["§5.2"],
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
