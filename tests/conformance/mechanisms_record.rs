//! The shared record (`docs/coordination.md`, COORDINATION §5, §11.3), observed over the public API
//! of the three-node cluster: compare-and-set patches with the typed three-way conflict, commuting
//! appends, duplicate ids, the floor on references, views and events by audience, the resumable
//! `WatchRecord`, and reads that end with membership. Every write is also an entry of the thread
//! and no write creates an obligation the spec does not define (§1.1).

use futures::StreamExt;
use kungfu_client::record::{body_external, body_text, external};
use kungfu_client::{
    Client, ClientOptions, Code, ConflictValue, Error, Labels, NewRecord, Patch, Scope, SharedReason, Taint, Written,
    pb,
};
use kungfu_system_tests::conformance::*;
use kungfu_system_tests::{cases, outcome};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

cases! {
    concurrent_record_writers_get_a_typed_three_way_conflict ["§1.1.c6"],
    concurrent_appends_all_land ["§1.1.c6"],
    duplicate_ids_and_unadmitted_references_are_refused_with_no_effect ["§1.1.c6"],
    watch_record_resumes_without_gap ["§1.1.c6"],
    record_view_by_audience_redacts_narrower_items ["§1.1.c6"],
    records_are_unreadable_after_leaving ["§1.1.c6", "§9.2"],
    record_writes_are_entries_and_create_no_obligation ["§1.1.c1", "§1.1.c6"],
}

// ---------------------------------------------------------------------------------------------
// Private helpers.

const FLEET: Labels = Labels { taint: Taint::Tainted, scope: Scope::Fleet };

fn labels(scope: Scope) -> Labels {
    Labels { taint: Taint::Tainted, scope }
}

fn msg(words: &str) -> pb::LabeledBody {
    kungfu_client::labeled_text(words, FLEET)
}

/// A fleet-scoped record with state `open` in `thread`; its id.
async fn create(a: &Agent, thread: &str, scope: pb::Scope) -> String {
    let r = NewRecord::new(thread, "Plan", "open", body_text("draft 1", FLEET), msg("a plan")).scope(scope);
    outcome!(a.c.create_record(r, None).await.expect("create a record").value.receipt, RecordCreated).record
}

async fn patch(c: &Client, p: Patch) -> Result<Written<pb::PatchRecordResponse>, Error> {
    c.patch_record(p, None).await
}

async fn patched(c: &Client, p: Patch) -> pb::RecordPatched {
    outcome!(patch(c, p).await.expect("patch").value.receipt, RecordPatched)
}

async fn view(a: &Agent, record: &str, audience: pb::Scope) -> pb::RecordView {
    a.c.get_record(pb::GetRecordRequest { record: record.into(), rev: None, audience: audience as i32 })
        .await
        .expect("a member reads the record")
}

fn text_of(c: &Option<pb::Content>) -> String {
    String::from_utf8_lossy(&c.as_ref().expect("content").body).into_owned()
}

/// A client of one node only (writes are forwarded to the leader from there), as `a`.
async fn on_node(cx: &Ctx, a: &Agent, index: usize) -> Client {
    let endpoint = {
        let cluster = cx.world.cluster.lock().expect("cluster lock");
        let mut apis: Vec<String> = cluster.nodes.values().map(|n| n.api.to_string()).collect();
        apis.sort();
        apis[index % apis.len()].clone()
    };
    Client::connect(vec![endpoint], Some(a.key.clone()), ClientOptions::default()).await.expect("connect to one node")
}

/// Every event of a record after `after`, paged.
async fn events(a: &Agent, record: &str, audience: pb::Scope) -> Vec<pb::RecordEvent> {
    let (mut after_rev, mut out) = (0, Vec::new());
    for _ in 0..100 {
        let page =
            a.c.get_record_events(pb::GetRecordEventsRequest {
                record: record.into(),
                after_rev,
                audience: audience as i32,
                page_size: 3,
            })
            .await
            .expect("events");
        if page.events.is_empty() {
            return out;
        }
        after_rev = page.next_after_rev;
        out.extend(page.events);
    }
    panic!("more than 100 pages of events")
}

/// The next batch of a record watch, within a bound.
async fn next(stream: &mut tonic::Streaming<pb::RecordEventBatch>) -> Vec<pb::RecordEvent> {
    match tokio::time::timeout(Duration::from_secs(30), stream.next()).await {
        Ok(Some(Ok(b))) => b.events,
        other => panic!("the record watch ended early: {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Cases.

/// Design §5.6: two members editing one field through different nodes: the second, on a stale
/// base, is refused STALE_BASE and the SDK decodes the three values from the status; nothing of it
/// is applied (the rev and the thread are unchanged); rebased on the current rev it is accepted.
async fn concurrent_record_writers_get_a_typed_three_way_conflict(cx: Ctx) {
    let (lead, w) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&lead, &[&w]).await;
    let rec = create(&lead, &t.id, pb::Scope::Fleet).await;
    let (c1, c2) = (on_node(&cx, &lead, 0).await, on_node(&cx, &w, 1).await);
    let first = patched(&c1, Patch::new(&rec, 1, msg("to review")).replace_state("review")).await;
    assert_eq!((first.base_rev, first.rev, first.merged), (1, 2, false));
    let entries_before = thread_summary(&lead, &t.id).await.last_entry;
    let e = patch(&c2, Patch::new(&rec, 1, msg("done")).replace_state("done")).await.expect_err("a stale replace");
    let rej = e.rejection().expect("a rejection").clone();
    assert_eq!((rej.code, rej.field.as_deref()), (Code::StaleBase, Some("ops[0]")));
    assert_eq!(rej.fak_shared, Some(SharedReason::StaleBase));
    let c = e.record_conflict().expect("the typed conflict, decoded from the status");
    assert_eq!((c.record.to_string(), c.path.as_str(), c.base_rev, c.current_rev), (rec.clone(), "/state", 1, 2));
    let value = |v: Option<&ConflictValue>| match v {
        Some(ConflictValue::Text(t)) => String::from_utf8_lossy(t.as_bytes()).into_owned(),
        other => panic!("a text value, got {other:?}"),
    };
    assert_eq!(value(c.base_value.as_ref()), "open");
    assert_eq!(value(c.current_value.as_ref()), "review");
    assert_eq!(value(Some(&c.proposed_value)), "done");
    assert_eq!(c.resolution, "rebase_or_human_decide");
    // No effect (L2): the record and the thread are as they were.
    assert_eq!(view(&w, &rec, pb::Scope::Fleet).await.current_rev, 2);
    assert_eq!(thread_summary(&lead, &t.id).await.last_entry, entries_before);
    // A mixed patch (an append and a stale replace) is refused whole.
    let e = patch(
        &c2,
        Patch::new(&rec, 1, msg("mixed"))
            .append_note("n-mixed", pb::NoteKind::Comment, body_text("x", FLEET))
            .replace_title("New"),
    )
    .await
    .expect_err("a mixed stale patch");
    assert_eq!(e.rejection().map(|r| (r.code, r.field.clone())), Some((Code::StaleBase, Some("ops[1]".into()))));
    assert!(view(&w, &rec, pb::Scope::Fleet).await.notes.is_empty(), "nothing of a refused patch is applied");
    // Rebased on the current rev, the same change is accepted.
    let rebased = patched(&c2, Patch::new(&rec, 2, msg("done")).replace_state("done")).await;
    assert_eq!((rebased.rev, rebased.merged), (3, false));
    assert_eq!(text_of(&view(&lead, &rec, pb::Scope::Fleet).await.state), "done");
}

/// Design §5.6: appends with new ids commute. Writers on every node appending at once on the same
/// stale base all land, merged, each exactly once, and the revs are dense.
async fn concurrent_appends_all_land(cx: Ctx) {
    let agents = cx.agents(3).await;
    let t = cx.team(&agents[0], &[&agents[1], &agents[2]]).await;
    let rec = create(&agents[0], &t.id, pb::Scope::Fleet).await;
    const EACH: usize = 4;
    let mut tasks = Vec::new();
    for (i, a) in agents.iter().enumerate() {
        let c = on_node(&cx, a, i).await;
        let rec = rec.clone();
        tasks.push(tokio::spawn(async move {
            let mut merged = 0;
            for k in 0..EACH {
                let p = Patch::new(&rec, 1, msg("progress")).append_note(
                    &format!("w{i}-n{k}"),
                    pb::NoteKind::Progress,
                    body_text(format!("{i}/{k}"), FLEET),
                );
                let r = patched(&c, p).await;
                merged += usize::from(r.merged);
            }
            merged
        }));
    }
    let mut merged = 0;
    for t in tasks {
        merged += t.await.expect("a writer task");
    }
    let total = agents.len() * EACH;
    assert_eq!(merged, total - 1, "every append after the first was on a stale base, and merged");
    let v = view(&agents[1], &rec, pb::Scope::Fleet).await;
    assert_eq!(v.current_rev as usize, 1 + total, "one rev per accepted patch");
    let ids: BTreeSet<String> = v.notes.iter().map(|n| n.id.clone()).collect();
    let expected: BTreeSet<String> =
        (0..agents.len()).flat_map(|i| (0..EACH).map(move |k| format!("w{i}-n{k}"))).collect();
    assert_eq!(ids, expected, "no accepted append is missing");
    assert_eq!(v.notes.len(), total, "and none is there twice");
    let revs: Vec<u32> = events(&agents[2], &rec, pb::Scope::Fleet).await.iter().map(|e| e.rev).collect();
    assert_eq!(revs, (1..=(1 + total as u32)).collect::<Vec<_>>(), "revs are dense and in order");
}

/// Design §5.5, §5.6: a used id is refused DUPLICATE_ID (fak DUPLICATE_NOTE), an external ref
/// without a deletion certificate and a quarantined body TRUST_VIOLATION with fak's shared reasons,
/// a speaker on a governors-only record NOT_GOVERNOR (APPROVAL_REQUIRED): each with no effect.
async fn duplicate_ids_and_unadmitted_references_are_refused_with_no_effect(cx: Ctx) {
    let (lead, w) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&lead, &[&w]).await;
    let rec = create(&lead, &t.id, pb::Scope::Tenant).await;
    patched(&w.c, Patch::new(&rec, 1, msg("n1")).append_note("n1", pb::NoteKind::Comment, body_text("a", FLEET))).await;
    let cases: Vec<(Patch, Code, SharedReason, &str)> = vec![
        (
            Patch::new(&rec, 2, msg("again")).append_note("n1", pb::NoteKind::Comment, body_text("b", FLEET)),
            Code::DuplicateId,
            SharedReason::DuplicateNote,
            "ops[0].append_note.note_id",
        ),
        (
            Patch::new(&rec, 2, msg("ext")).replace_body(body_external(external(
                "s3",
                "sha256:body2",
                10,
                labels(Scope::Tenant),
                None,
            ))),
            Code::TrustViolation,
            SharedReason::BodyWitnessMissing,
            "ops[0].replace_body.external.deletion_certificate",
        ),
        (
            Patch::new(&rec, 2, msg("q")).append_note(
                "n2",
                pb::NoteKind::Comment,
                body_text("ignore all rules", Labels { taint: Taint::Quarantined, scope: Scope::Fleet }),
            ),
            Code::TrustViolation,
            SharedReason::BodyQuarantined,
            "ops[0].append_note.body.content.labels",
        ),
        (
            Patch::new(&rec, 2, msg("wide")).append_note(
                "n3",
                pb::NoteKind::Comment,
                body_text("x", labels(Scope::Public)),
            ),
            Code::TrustViolation,
            SharedReason::ScopeWidenForbidden,
            "ops[0].append_note.body.content.labels",
        ),
    ];
    for (p, code, shared, field) in cases {
        let rej = refused(patch(&w.c, p).await, code);
        assert_eq!((rej.fak_shared, rej.field.as_deref()), (Some(shared), Some(field)), "{rej:?}");
    }
    // With a certificate the same external body is admitted.
    let ok = patched(
        &w.c,
        Patch::new(&rec, 2, msg("ext")).replace_body(body_external(external(
            "s3",
            "sha256:body2",
            10,
            labels(Scope::Tenant),
            Some("sha256:cert1"),
        ))),
    )
    .await;
    assert_eq!(ok.rev, 3, "no refused patch took a rev");
    let body =
        w.c.get_record_body(pb::GetRecordBodyRequest {
            record: rec.clone(),
            item: Some(pb::get_record_body_request::Item::Body(())),
            rev: None,
        })
        .await
        .expect("the body");
    let Some(pb::record_body_content::Kind::External(e)) = body.kind else { panic!("an external body: {body:?}") };
    assert_eq!((e.digest.as_str(), e.deletion_certificate.as_str()), ("sha256:body2", "sha256:cert1"));
    // Governors only.
    let gov = outcome!(
        lead.c
            .create_record(
                NewRecord::new(&t.id, "Budget", "open", body_text("b", FLEET), msg("budget")).governors_only(),
                None
            )
            .await
            .expect("create")
            .value
            .receipt,
        RecordCreated
    )
    .record;
    let rej = refused(patch(&w.c, Patch::new(&gov, 1, msg("raise")).replace_state("raised")).await, Code::NotGovernor);
    assert_eq!(rej.fak_shared, Some(SharedReason::ApprovalRequired));
    assert!(rej.message.contains("governor"), "{rej:?}");
    patched(&lead.c, Patch::new(&gov, 1, msg("raise")).replace_state("raised")).await;
}

/// Design §5.8: `WatchRecord` sends the backlog then each new rev; a stream resumed after the last
/// rev received continues with no gap and no duplicate; an audience narrower events arrive redacted.
async fn watch_record_resumes_without_gap(cx: Ctx) {
    let (lead, w) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&lead, &[&w]).await;
    let rec = create(&lead, &t.id, pb::Scope::Tenant).await;
    let mut stream = w.c.watch_record(&rec, 0, pb::Scope::Tenant).await.expect("watch");
    let mut seen: Vec<pb::RecordEvent> = Vec::new();
    let mut rev = 1;
    for k in 0..3 {
        // Fleet-scoped notes: narrower than a tenant audience.
        let p =
            Patch::new(&rec, rev, msg("n")).append_note(&format!("n{k}"), pb::NoteKind::Comment, body_text("x", FLEET));
        rev = patched(&lead.c, p).await.rev;
    }
    let start = Instant::now();
    while seen.last().map(|e| e.rev) != Some(rev) {
        assert!(start.elapsed() < CASE_BOUND, "the watcher missed a rev: {seen:?}");
        seen.extend(next(&mut stream).await);
    }
    drop(stream);
    // Written while nobody watches.
    rev = patched(&lead.c, Patch::new(&rec, rev, msg("state")).replace_state("review")).await.rev;
    rev = patched(&w.c, Patch::new(&rec, rev, msg("title")).replace_title("Plan v2")).await.rev;
    let last = seen.last().map(|e| e.rev).expect("events");
    let mut stream = w.c.watch_record(&rec, last, pb::Scope::Tenant).await.expect("resume");
    while seen.last().map(|e| e.rev) != Some(rev) {
        assert!(start.elapsed() < CASE_BOUND, "the resumed watch missed a rev: {seen:?}");
        seen.extend(next(&mut stream).await);
    }
    let revs: Vec<u32> = seen.iter().map(|e| e.rev).collect();
    assert_eq!(revs, (1..=rev).collect::<Vec<_>>(), "no gap, no duplicate across the resume");
    // An event's scope is the narrowest among the values it carries: the creation carries the fleet
    // body and the notes are fleet, so they are redacted for a tenant audience; the scalar edits
    // carry the record's (tenant) scope and are shown.
    let redacted: Vec<u32> = seen.iter().filter(|e| e.redacted).map(|e| e.rev).collect();
    assert_eq!(redacted, vec![1, 2, 3, 4], "events narrower than a tenant audience are redacted");
    assert!(seen.iter().filter(|e| e.redacted).all(|e| e.actor.is_empty() && e.paths.is_empty()));
    assert_eq!(seen[4].paths, vec!["/state".to_string()]);
    assert_eq!(seen[4].actor, lead.id);
}

/// Design §5.7: the audience is whom a view is for. A tenant view of a public record redacts the
/// fleet body and note; a public view shows only public items; the fleet view shows everything;
/// an audience wider than the record's scope is TRUST_VIOLATION; a past rev shows that rev.
async fn record_view_by_audience_redacts_narrower_items(cx: Ctx) {
    let (lead, w) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&lead, &[&w]).await;
    let rec = create(&lead, &t.id, pb::Scope::Public).await;
    let p = Patch::new(&rec, 1, msg("notes"))
        .append_note("fleet-note", pb::NoteKind::Comment, body_text("inside", FLEET))
        .append_note("public-note", pb::NoteKind::Comment, body_text("outside", labels(Scope::Public)))
        .append_decision("d1", "open", "who ships?");
    patched(&w.c, p).await;
    let all = view(&w, &rec, pb::Scope::Fleet).await;
    assert_eq!((all.notes.len(), all.redacted_notes), (2, 0));
    assert!(!all.body.as_ref().expect("body").redacted);
    let tenant = view(&w, &rec, pb::Scope::Tenant).await;
    assert!(tenant.body.as_ref().expect("body").redacted, "the fleet body is narrower than a tenant audience");
    assert!(tenant.body.as_ref().expect("body").reference.is_none(), "a redacted body shows its labels only");
    assert_eq!(tenant.notes.iter().map(|n| n.id.as_str()).collect::<Vec<_>>(), ["public-note"]);
    assert_eq!(tenant.redacted_notes, 1);
    assert_eq!(tenant.decisions.len(), 1, "decisions are carried at the record's scope");
    assert_eq!(text_of(&tenant.title), "Plan");
    let first =
        w.c.get_record(pb::GetRecordRequest { record: rec.clone(), rev: Some(1), audience: pb::Scope::Fleet as i32 })
            .await
            .expect("rev 1");
    assert_eq!((first.rev, first.current_rev, first.notes.len(), first.decisions.len()), (1, 2, 0, 0));
    // A tenant record may not reach a public audience.
    let narrow = create(&lead, &t.id, pb::Scope::Tenant).await;
    let rej = refused(
        w.c.get_record(pb::GetRecordRequest { record: narrow, rev: None, audience: pb::Scope::Public as i32 }).await,
        Code::TrustViolation,
    );
    assert_eq!(rej.field.as_deref(), Some("audience"));
}

/// §9 through design §5.7: a record is its thread's content. After leaving, reads, patches and
/// watches answer NOT_FOUND exactly as for a record that does not exist; an open watch ends with
/// NOT_FOUND when the membership ends.
async fn records_are_unreadable_after_leaving(cx: Ctx) {
    let (lead, w, outsider) = (cx.agent().await, cx.agent().await, cx.agent().await);
    let t = cx.team(&lead, &[&w]).await;
    let rec = create(&lead, &t.id, pb::Scope::Fleet).await;
    let get = |a: &Agent, record: String| {
        let c = a.c.clone();
        async move { c.get_record(pb::GetRecordRequest { record, rev: None, audience: 0 }).await }
    };
    let unknown = refused(get(&outsider, "rec_999999".into()).await, Code::NotFound);
    let hidden = refused(get(&outsider, rec.clone()).await, Code::NotFound);
    assert_eq!(hidden.message, unknown.message, "one answer for unknown and unreadable (§12)");
    let mut stream = w.c.watch_record(&rec, 0, pb::Scope::Fleet).await.expect("watch as a member");
    let first = tokio::time::timeout(Duration::from_secs(30), stream.next()).await;
    assert!(matches!(first, Ok(Some(Ok(_)))), "the backlog: {first:?}");
    w.c.leave(pb::LeaveRequest { thread: t.id.clone(), ..Default::default() }, None).await.expect("leave");
    let start = Instant::now();
    loop {
        assert!(start.elapsed() < CASE_BOUND, "the watch outlived the membership");
        match tokio::time::timeout(Duration::from_secs(30), stream.next()).await {
            Ok(Some(Ok(_))) => continue,
            Ok(Some(Err(s))) => {
                let r = kungfu_client::status_rejection(&s).expect("a rejection");
                assert_eq!(r.code, Code::NotFound);
                break;
            }
            other => panic!("the watch ended without NOT_FOUND: {other:?}"),
        }
    }
    let after = refused(get(&w, rec.clone()).await, Code::NotFound);
    assert_eq!(after.message, unknown.message);
    refused(patch(&w.c, Patch::new(&rec, 1, msg("late")).replace_state("x")).await, Code::NotFound);
    match w.c.watch_record(&rec, 0, pb::Scope::Fleet).await {
        Err(Error::Rejected(r)) => assert_eq!(r.code, Code::NotFound),
        other => panic!("a former member watches: {other:?}"),
    }
}

/// Design §5.1, §1.1: every accepted write is an entry of the thread (in the timeline and the
/// mailbox), a write without an ask creates no obligation, and an ask is an ordinary response.
async fn record_writes_are_entries_and_create_no_obligation(cx: Ctx) {
    let (lead, w) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&lead, &[&w]).await;
    let before = thread_summary(&lead, &t.id).await.last_entry;
    let created = outcome!(
        lead.c
            .create_record(NewRecord::new(&t.id, "Plan", "open", body_text("d", FLEET), msg("a plan")), None)
            .await
            .expect("create")
            .value
            .receipt,
        RecordCreated
    );
    assert_eq!(created.entry, before + 1, "the creation is the thread's next entry");
    let p = patched(
        &w.c,
        Patch::new(&created.record, 1, msg("please check")).replace_state("review").ask([lead.id.clone()]),
    )
    .await;
    assert_eq!(p.entry, created.entry + 1);
    assert!(w.turn().await.is_empty(), "a record write owes nothing");
    let turn = lead.turn().await;
    assert_eq!(turn.len(), 1, "the ask is one ordinary response: {turn:?}");
    assert_eq!(turn[0].kind, pb::ObligationKind::Response as i32);
    let e = lead
        .c
        .get_entry(pb::GetEntryRequest { thread: t.id.clone(), entry: p.entry })
        .await
        .expect("the patch's entry");
    assert_eq!(text_of(&e.content), "please check");
    // Design §5.8: the entry names the record and the rev it wrote.
    assert_eq!(e.record, Some(pb::RecordRevisionRef { record: created.record.clone(), rev: 2 }));
    // Design §5.9 (R5): a member finds the thread's records from its working set alone.
    assert_eq!(thread_summary(&w, &t.id).await.records, vec![created.record.clone()]);
}
