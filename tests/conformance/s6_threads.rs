//! §6.1–§6.3 and §6.5: admission, members and roles, entries and responses, closing.

use kungfu_client::{Code, Error, Written, pb};
use kungfu_system_tests::conformance::*;
use kungfu_system_tests::{cases, outcome};
use pb::response_ending::How;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

cases! {
    // §6.1 Creation and admission.
    any_active_agent_creates_an_open_thread_it_governs ["§6.1.1"],
    only_a_governor_issues_or_voids_grants ["§6.1.2", "§6.2.3"],
    a_grant_binds_the_role_the_joiner_receives_speaker_by_default ["§6.1.3", "§6.2.1"],
    joining_is_an_action_of_an_active_agent ["§6.1.4"],
    a_new_grant_voids_the_old_one_and_a_grant_can_be_voided_alone ["§6.1.5"],
    joins_racing_a_grant_reissue_succeed_only_through_the_old_grant ["§6.1.5", "§6.2.12"],
    a_grant_secret_appears_only_once ["§6.1.6"],
    // §6.2 Members and roles.
    may_speak_means_the_speaker_or_governor_role ["§6.2.1"],
    a_member_may_leave_at_any_time ["§6.2.2"],
    only_a_governor_removes_members_and_changes_roles ["§6.2.3"],
    a_sole_governor_cannot_leave_until_it_hands_over ["§6.2.4"],
    demotion_ends_pending_responses_but_not_assignments_in_progress ["§6.2.7"],
    an_ending_membership_ends_its_pending_responses_in_the_same_fact ["§6.2.8"],
    rejoining_is_a_new_membership_that_revives_nothing ["§6.2.11", "§6.2.12"],
    a_membership_records_its_admission_and_when ["§6.2.12"],
    // §6.3 Entries and responses.
    only_an_active_member_who_may_speak_posts_in_an_open_thread ["§6.3.1"],
    an_entry_has_a_sequence_number_an_author_and_one_pinned_version ["§6.3.2"],
    a_reply_names_an_existing_entry_of_the_same_thread ["§6.3.3"],
    an_ask_names_members_who_may_speak_and_never_the_author ["§6.3.4"],
    entries_are_never_edited_and_a_correction_is_a_new_entry ["§6.3.5"],
    rule1_a_stated_ask_decides_the_responders ["§6.3.r1", "§6.3.7"],
    rule2_a_reply_asks_the_replied_author_unless_it_can_no_longer_speak ["§6.3.r2"],
    rule3_exactly_two_speakers_the_other_responds ["§6.3.r3"],
    rule4_otherwise_a_broadcast_names_nobody ["§6.3.r4"],
    responders_are_fixed_at_post_time ["§6.3.6"],
    replying_ends_own_pending_response_in_the_same_action ["§6.3.8"],
    replying_without_a_pending_response_is_allowed ["§6.3.9"],
    handling_ends_a_pending_response_without_posting ["§6.3.10"],
    a_handle_note_is_readable_only_by_the_author_and_the_responder ["§6.3.11"],
    retracting_ends_pending_responses_but_not_given_ones ["§6.3.12"],
    reading_changes_no_obligation ["§6.3.13"],
    // §6.5 Closing.
    only_a_governor_may_close ["§6.5.1"],
    closing_is_terminal ["§6.5.2"],
    closing_ends_pending_responses_and_voids_undelivered_assignments ["§6.5.3", "§6.5.4"],
    closing_keeps_delivered_assignments_judgeable ["§6.5.5"],
    closing_voids_the_admission ["§6.5.6"],
    a_closed_thread_keeps_its_members_who_read_and_may_leave ["§6.5.7"],
    a_new_thread_pins_the_same_memories_but_cannot_reply_to_the_old_entries ["§6.5.8"],
}

// ---------------------------------------------------------------------------------------------
// Helpers (private to this section).

fn role(r: pb::Role) -> i32 {
    r as i32
}

/// The thread summary of `t` as `a` sees it in its working set, and `a`'s role there.
async fn summary(a: &Agent, t: &str) -> (pb::ThreadSummary, i32) {
    let ws = a.working_set(t).await.expect("a member reads the thread's working set");
    match ws.summary {
        Some(pb::working_set::Summary::Thread(s)) => (s, ws.role),
        other => panic!("expected a thread summary, got {other:?}"),
    }
}

/// The current members of `t` and their roles, as `a` reads them.
async fn members(a: &Agent, t: &str) -> BTreeMap<String, i32> {
    summary(a, t).await.0.members.into_iter().map(|m| (m.agent, m.role)).collect()
}

/// The live grant of `t` as its governor `g` sees it (role and fingerprint, never the secret).
async fn live_grant(g: &Agent, t: &str) -> Option<pb::LiveGrant> {
    summary(g, t).await.0.grant
}

/// Issues a grant binding `r`; returns its secret and the receipt's facts. A first answer that
/// comes back as a replay (the SDK retried across a leader change) shows no secret (L3); then a
/// new grant is issued, which voids that one.
async fn issue(g: &Agent, t: &str, r: pb::Role) -> (String, pb::GrantIssued) {
    for _ in 0..5 {
        let w =
            g.c.issue_grant(pb::IssueGrantRequest { thread: t.into(), role: r as i32, ..Default::default() }, None)
                .await
                .expect("a governor issues a grant");
        let issued = outcome!(w.value.receipt, GrantIssued);
        if !w.value.grant_secret.is_empty() {
            return (w.value.grant_secret, issued);
        }
        assert!(w.replayed, "only a replay may withhold the secret");
    }
    panic!("no grant secret in five first answers")
}

/// Admits `a` to `t` with role `r` through a new grant of `g`.
async fn admit(g: &Agent, t: &str, a: &Agent, r: pb::Role) -> pb::Joined {
    let (secret, _) = issue(g, t, r).await;
    a.join(&secret).await
}

async fn join_with(a: &Agent, secret: &str) -> Result<Written<pb::JoinResponse>, Error> {
    a.c.join(pb::JoinRequest { grant_secret: secret.into(), ..Default::default() }, None).await
}

async fn leave(a: &Agent, t: &str) -> Result<Written<pb::LeaveResponse>, Error> {
    a.c.leave(pb::LeaveRequest { thread: t.into(), ..Default::default() }, None).await
}

async fn change_role(g: &Agent, t: &str, m: &Agent, r: pb::Role) -> Result<Written<pb::ChangeRoleResponse>, Error> {
    g.c.change_role(
        pb::ChangeRoleRequest { thread: t.into(), member: m.id.clone(), role: r as i32, ..Default::default() },
        None,
    )
    .await
}

async fn remove(g: &Agent, t: &str, m: &Agent) -> Result<Written<pb::RemoveMemberResponse>, Error> {
    g.c.remove_member(pb::RemoveMemberRequest { thread: t.into(), member: m.id.clone(), ..Default::default() }, None)
        .await
}

async fn close(g: &Agent, t: &str) -> Result<Written<pb::CloseThreadResponse>, Error> {
    g.c.close_thread(pb::CloseThreadRequest { thread: t.into(), ..Default::default() }, None).await
}

async fn deactivate(a: &Agent) {
    a.c.deactivate(pb::DeactivateAgentRequest { agent: a.id.clone(), ..Default::default() }, None)
        .await
        .expect("an agent deactivates itself");
}

async fn void_grant(g: &Agent, t: &str) -> Result<Written<pb::VoidGrantResponse>, Error> {
    g.c.void_grant(pb::VoidGrantRequest { thread: t.into(), ..Default::default() }, None).await
}

async fn handle(a: &Agent, t: &str, entry: u64, note: Option<&str>) -> Result<Written<pb::HandleResponse>, Error> {
    a.c.handle(pb::HandleRequest { thread: t.into(), entry, note: note.and_then(text), ..Default::default() }, None)
        .await
}

async fn retract(a: &Agent, t: &str, entry: u64) -> Result<Written<pb::RetractResponse>, Error> {
    a.c.retract(pb::RetractRequest { thread: t.into(), entry, ..Default::default() }, None).await
}

async fn timeline(a: &Agent, t: &str) -> Result<Vec<pb::Entry>, Error> {
    a.c.timeline_all(t, 100).await
}

async fn entry(a: &Agent, t: &str, seq: u64) -> pb::EntryView {
    a.c.get_entry(pb::GetEntryRequest { thread: t.into(), entry: seq }).await.expect("a member reads an entry")
}

async fn response(a: &Agent, t: &str, seq: u64, responder: &Agent) -> Result<pb::OwedResponse, Error> {
    a.c.get_response(pb::GetResponseRequest { thread: t.into(), entry: seq, responder: responder.id.clone() }).await
}

/// How `responder`'s response to entry `seq` ended (None while pending), read by `reader`.
async fn ending(reader: &Agent, t: &str, seq: u64, responder: &Agent) -> Option<How> {
    let r = response(reader, t, seq, responder).await.expect("the response exists and is readable");
    r.ending.map(|e| e.how.expect("an ending says how"))
}

/// The responses `a` owes, as (thread, entry), from its turn.
async fn owed(a: &Agent) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for item in a.turn().await {
        if let Some(pb::obligation_ref::Kind::Response(r)) = item.obligation.and_then(|o| o.kind) {
            assert_eq!(item.kind, pb::ObligationKind::Response as i32);
            assert_eq!(item.next, pb::NextStep::Respond as i32);
            assert_eq!(r.responder, a.id, "a turn holds only its reader's obligations");
            out.push((r.thread, r.entry));
        }
    }
    out
}

/// The responses `a` owes in thread `t`, as entry numbers.
async fn owed_in(a: &Agent, t: &str) -> Vec<u64> {
    owed(a).await.into_iter().filter(|(th, _)| th == t).map(|(_, e)| e).collect()
}

fn ids(agents: &[&Agent]) -> BTreeSet<String> {
    agents.iter().map(|a| a.id.clone()).collect()
}

fn set(v: &[String]) -> BTreeSet<String> {
    v.iter().cloned().collect()
}

/// The position of `who` in `agents` in ascending id order (how the rejection names an ask member).
fn id_order(agents: &[&Agent], who: &Agent) -> usize {
    let num = |id: &str| id.rsplit('_').next().and_then(|n| n.parse::<u64>().ok()).expect("an id ends in a number");
    let mut v: Vec<u64> = agents.iter().map(|a| num(&a.id)).collect();
    v.sort_unstable();
    v.iter().position(|n| *n == num(&who.id)).expect("who is in the set")
}

/// Posts text asking exactly `ask` (None: no ask stated).
fn say(t: &str, body: &str, ask: Option<&[&Agent]>) -> Post {
    let p = Post::text(t, body);
    match ask {
        Some(a) => p.ask(a.iter().map(|a| a.id.clone())),
        None => p,
    }
}

/// The last entry number of `t` as `a` sees it.
async fn last_entry(a: &Agent, t: &str) -> u64 {
    summary(a, t).await.0.last_entry
}

// ---------------------------------------------------------------------------------------------
// §6.1 Creation and admission.

/// §6.1 rule: any active agent may create a thread; the creator becomes its governor and the
/// thread is open. A deactivated agent creates nothing.
async fn any_active_agent_creates_an_open_thread_it_governs(cx: Ctx) {
    let (a, x) = (cx.agent().await, cx.agent().await);
    let w =
        a.c.create_thread(pb::CreateThreadRequest { subject: text("plan"), grant: None, ..Default::default() }, None)
            .await
            .expect("an active agent creates a thread");
    let created = outcome!(w.value.receipt, ThreadCreated);
    assert!(created.grant.is_none() && w.value.grant_secret.is_empty(), "no grant was asked for");
    let (s, my_role) = summary(&a, &created.thread).await;
    assert!(s.open, "a new thread is open");
    assert_eq!(my_role, role(pb::Role::Governor), "the creator governs");
    assert_eq!(members(&a, &created.thread).await, BTreeMap::from([(a.id.clone(), role(pb::Role::Governor))]));
    assert!(s.grant.is_none());
    // §4: only an active agent acts.
    deactivate(&x).await;
    let r = x.c.create_thread(pb::CreateThreadRequest { subject: text("late"), ..Default::default() }, None).await;
    refused(r, Code::AgentInactive);
    let me = x.working_set(&x.id).await.expect("reads need no activity");
    match me.summary {
        Some(pb::working_set::Summary::Agent(s)) => assert_eq!((s.active, s.open_threads), (false, 0)),
        other => panic!("expected an agent summary, got {other:?}"),
    }
}

/// §6.1 rule: membership comes only through an admission granted by a governor; a speaker or an
/// observer cannot issue or void a grant (NOT_GOVERNOR), a stranger learns only NOT_FOUND, and the
/// live grant is untouched by their attempts.
async fn only_a_governor_issues_or_voids_grants(cx: Ctx) {
    let v = cx.agents(5).await;
    let (g, s, o, x, late) = (&v[0], &v[1], &v[2], &v[3], &v[4]);
    let t = cx.team(g, &[s]).await;
    admit(g, &t.id, o, pb::Role::Observer).await;
    let (secret, _) = issue(g, &t.id, pb::Role::Speaker).await;
    let live = live_grant(g, &t.id).await.expect("a live grant");
    for who in [s, o] {
        let r = who
            .c
            .issue_grant(
                pb::IssueGrantRequest { thread: t.id.clone(), role: role(pb::Role::Governor), ..Default::default() },
                None,
            )
            .await;
        refused(r, Code::NotGovernor);
        refused(void_grant(who, &t.id).await, Code::NotGovernor);
    }
    let r = x.c.issue_grant(pb::IssueGrantRequest { thread: t.id.clone(), ..Default::default() }, None).await;
    refused(r, Code::NotFound);
    refused(void_grant(x, &t.id).await, Code::NotFound);
    assert_eq!(live_grant(g, &t.id).await, Some(live), "the live grant is untouched");
    // A speaker's summary never shows the grant.
    assert!(summary(s, &t.id).await.0.grant.is_none());
    // The governor's grant still admits.
    let j = late.join(&secret).await;
    assert_eq!(j.role, role(pb::Role::Speaker));
}

/// §6.1 rule: an admission grant binds a role (observer, speaker or governor; default speaker),
/// which the joining member receives, with what that role may do (§6.2: may speak).
async fn a_grant_binds_the_role_the_joiner_receives_speaker_by_default(cx: Ctx) {
    let v = cx.agents(4).await;
    let (g, d, o, h) = (&v[0], &v[1], &v[2], &v[3]);
    let t = g.thread(pb::Role::Speaker).await;
    let (secret, issued) = issue(g, &t.id, pb::Role::Unspecified).await;
    assert_eq!(issued.grant.expect("grant facts").role, role(pb::Role::Speaker), "unspecified means speaker");
    assert_eq!(d.join(&secret).await.role, role(pb::Role::Speaker));
    assert_eq!(admit(g, &t.id, o, pb::Role::Observer).await.role, role(pb::Role::Observer));
    assert_eq!(admit(g, &t.id, h, pb::Role::Governor).await.role, role(pb::Role::Governor));
    assert_eq!(
        members(g, &t.id).await,
        BTreeMap::from([
            (g.id.clone(), role(pb::Role::Governor)),
            (d.id.clone(), role(pb::Role::Speaker)),
            (o.id.clone(), role(pb::Role::Observer)),
            (h.id.clone(), role(pb::Role::Governor)),
        ])
    );
    // The roles act as bound: the speaker posts, the observer may not, the admitted governor governs.
    d.post(Post::text(&t.id, "a speaker speaks")).await;
    refused(o.c.post(Post::text(&t.id, "an observer"), None).await, Code::CannotSpeak);
    issue(h, &t.id, pb::Role::Speaker).await;
    assert_eq!(last_entry(g, &t.id).await, 1, "only the speaker's entry exists");
}

/// §6.1 rule: joining is an action and requires an active agent; a deactivated agent's join
/// changes nothing and the grant stays live for others.
async fn joining_is_an_action_of_an_active_agent(cx: Ctx) {
    let v = cx.agents(3).await;
    let (g, x, b) = (&v[0], &v[1], &v[2]);
    let t = g.thread(pb::Role::Speaker).await;
    deactivate(x).await;
    refused(join_with(x, &t.secret).await, Code::AgentInactive);
    assert!(!members(g, &t.id).await.contains_key(&x.id));
    let j = b.join(&t.secret).await;
    assert_eq!((j.thread.as_str(), j.agent.as_str(), j.existing), (t.id.as_str(), b.id.as_str(), false));
    // An action: joining is recorded as a fact of the thread's history, with b as its actor.
    let ws = g.working_set(&t.id).await.expect("working set");
    assert!(
        ws.history.iter().any(|h| h.fact == "joined" && h.actor.as_deref() == Some(b.id.as_str())),
        "the join is a fact: {:?}",
        ws.history
    );
    assert_eq!(members(g, &t.id).await.len(), 2);
}

/// §6.1 rule: a thread has at most one live admission grant: issuing a new one voids the old
/// (the old secret gets the same answer as one never issued), and a grant can be voided on its own.
async fn a_new_grant_voids_the_old_one_and_a_grant_can_be_voided_alone(cx: Ctx) {
    let v = cx.agents(4).await;
    let (g, b, c, d) = (&v[0], &v[1], &v[2], &v[3]);
    let t = g.thread(pb::Role::Speaker).await;
    let first = live_grant(g, &t.id).await.expect("the first grant is live");
    let (second, issued) = issue(g, &t.id, pb::Role::Observer).await;
    assert!(issued.voided_previous, "the new grant voided the old one");
    let now = live_grant(g, &t.id).await.expect("one live grant");
    assert_ne!(now.fingerprint, first.fingerprint);
    assert_eq!(now.role, role(pb::Role::Observer));
    let with_old = refused(join_with(b, &t.secret).await, Code::GrantInvalid);
    let with_never = refused(join_with(b, &format!("{}x", t.secret)).await, Code::GrantInvalid);
    assert_eq!(
        (with_old.message, with_old.field),
        (with_never.message, with_never.field),
        "a voided grant is indistinguishable from an unknown one"
    );
    assert!(!members(g, &t.id).await.contains_key(&b.id));
    assert_eq!(c.join(&second).await.role, role(pb::Role::Observer));
    // Voided on its own: nobody joins with it any more, and there is no live grant.
    let w = void_grant(g, &t.id).await.expect("a governor voids the grant");
    assert_eq!(outcome!(w.value.receipt, GrantVoided).thread, t.id);
    assert!(live_grant(g, &t.id).await.is_none());
    refused(join_with(d, &second).await, Code::GrantInvalid);
    refused(void_grant(g, &t.id).await, Code::NoEffect);
    assert_eq!(members(g, &t.id).await.keys().cloned().collect::<BTreeSet<_>>(), ids(&[g, c]));
}

/// §6.1 rule (issue #6): many agents join with the old secret while the governor issues a new
/// grant. Every join either succeeded through the old grant (the old grant's role) or was refused
/// GRANT_INVALID; after the reissue no join with the old secret succeeds; the members are exactly
/// the governor and the successful joiners (§6.2: a membership records the admission it came
/// through).
async fn joins_racing_a_grant_reissue_succeed_only_through_the_old_grant(cx: Ctx) {
    const N: usize = 16;
    let g = cx.agent().await;
    let joiners: Vec<Agent> = futures::future::join_all((0..N).map(|_| cx.agent())).await;
    let late: Vec<Agent> = futures::future::join_all((0..4).map(|_| cx.agent())).await;
    let t = g.thread(pb::Role::Speaker).await;
    assert!(!t.secret.is_empty(), "the creator received the first grant's secret");
    let old = t.secret.clone();
    let joins = futures::future::join_all(joiners.iter().enumerate().map(|(i, a)| {
        let old = old.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(4 * i as u64)).await;
            join_with(a, &old).await
        }
    }));
    let reissue = async {
        tokio::time::sleep(Duration::from_millis(4 * (N as u64) / 2)).await;
        issue(&g, &t.id, pb::Role::Observer).await
    };
    let (results, (new, issued)) = tokio::join!(joins, reissue);
    assert!(issued.voided_previous);
    let mut joined = BTreeSet::new();
    for (a, r) in joiners.iter().zip(results) {
        match r {
            Ok(w) => {
                let j = outcome!(w.value.receipt, Joined);
                assert_eq!((j.thread.as_str(), j.agent.as_str()), (t.id.as_str(), a.id.as_str()));
                assert_eq!(j.role, role(pb::Role::Speaker), "a success came through the old (speaker) grant");
                assert!(!j.existing);
                joined.insert(a.id.clone());
            }
            Err(e) => {
                refused(Err::<(), _>(e), Code::GrantInvalid);
            }
        }
    }
    // After the reissue, the old secret admits nobody; the new one admits with its own role.
    for a in &late[..3] {
        refused(join_with(a, &old).await, Code::GrantInvalid);
    }
    assert_eq!(late[3].join(&new).await.role, role(pb::Role::Observer));
    let m = members(&g, &t.id).await;
    assert_eq!(m.len(), 1 + joined.len() + 1, "members = governor + successes + the new grant's joiner: {m:?}");
    assert_eq!(m.get(&g.id), Some(&role(pb::Role::Governor)));
    assert_eq!(m.get(&late[3].id), Some(&role(pb::Role::Observer)));
    for a in &joiners {
        let expect = joined.contains(&a.id).then_some(role(pb::Role::Speaker));
        assert_eq!(m.get(&a.id).copied(), expect, "{} is a member exactly when its join succeeded", a.id);
    }
    for a in &late[..3] {
        assert!(!m.contains_key(&a.id));
    }
}

/// §6.1 rule (L3): the grant's bearer secret appears only once: the receipt carries only a
/// fingerprint, and a replay of the same request returns the stored receipt without the secret
/// and mints no new grant.
async fn a_grant_secret_appears_only_once(cx: Ctx) {
    let (g, b) = (cx.agent().await, cx.agent().await);
    let t = g.thread(pb::Role::Speaker).await;
    let (first, key) = loop {
        let key = unique("grant");
        let w =
            g.c.issue_grant(pb::IssueGrantRequest { thread: t.id.clone(), ..Default::default() }, Some(key.clone()))
                .await
                .expect("issue");
        if !w.replayed {
            break (w, key);
        }
    };
    let secret = first.value.grant_secret.clone();
    assert!(!secret.is_empty(), "the first answer shows the secret");
    let receipt = first.value.receipt.clone().expect("receipt");
    assert!(!format!("{receipt:?}").contains(&secret), "the receipt never carries the secret");
    let fp = match receipt.result.clone() {
        Some(pb::receipt::Result::GrantIssued(i)) => i.grant.expect("grant facts").fingerprint,
        other => panic!("unexpected {other:?}"),
    };
    assert!(!fp.is_empty() && fp != secret, "a fingerprint labels the secret and is not the secret");
    let again =
        g.c.issue_grant(pb::IssueGrantRequest { thread: t.id.clone(), ..Default::default() }, Some(key))
            .await
            .expect("replay");
    assert!(again.replayed);
    assert!(again.value.grant_secret.is_empty(), "a replay never shows the secret again");
    assert_eq!(again.value.receipt, Some(receipt), "the stored receipt comes back unchanged");
    assert_eq!(live_grant(&g, &t.id).await.expect("live").fingerprint, fp, "the replay minted no new grant");
    // The thread's first grant behaves the same: a replay of the creation shows no secret.
    let key = unique("create");
    let c1 =
        g.c.create_thread(
            pb::CreateThreadRequest {
                subject: text("s"),
                grant: Some(pb::GrantSpec { role: role(pb::Role::Speaker) }),
                ..Default::default()
            },
            Some(key.clone()),
        )
        .await
        .expect("create");
    let c2 =
        g.c.create_thread(
            pb::CreateThreadRequest {
                subject: text("s"),
                grant: Some(pb::GrantSpec { role: role(pb::Role::Speaker) }),
                ..Default::default()
            },
            Some(key),
        )
        .await
        .expect("create replay");
    assert!(c2.replayed && c2.value.grant_secret.is_empty());
    assert_eq!(c1.value.receipt, c2.value.receipt);
    assert_eq!(b.join(&secret).await.role, role(pb::Role::Speaker), "the secret shown once admits");
}

/// The names of the facts the command `seq` recorded on thread `t`, as `a` reads its history.
async fn facts_at(a: &Agent, t: &str, seq: Option<u64>) -> Vec<String> {
    let seq = seq.expect("a receipt that recorded a fact names its command");
    let ws = a.working_set(t).await.expect("working set");
    ws.history.into_iter().filter(|h| h.seq == seq).map(|h| h.fact).collect()
}

fn receipt_of(r: &Option<pb::Receipt>) -> (i64, Option<u64>) {
    let r = r.as_ref().expect("receipt");
    (r.at_unix_micros, r.seq)
}

/// The ending time of a response that ended.
async fn ended_at(reader: &Agent, t: &str, seq: u64, responder: &Agent) -> i64 {
    let r = response(reader, t, seq, responder).await.expect("readable response");
    r.ending.expect("the response ended").ended_at_unix_micros
}

// ---------------------------------------------------------------------------------------------
// §6.2 Members and roles.

/// §6.2 rule: "may speak" means holding the speaker or governor role: an observer may not post
/// nor create an assignment, nor be asked; a speaker and a governor do all three.
async fn may_speak_means_the_speaker_or_governor_role(cx: Ctx) {
    let v = cx.agents(3).await;
    let (g, s, o) = (&v[0], &v[1], &v[2]);
    let t = cx.team(g, &[s]).await;
    admit(g, &t.id, o, pb::Role::Observer).await;
    refused(o.c.post(Post::text(&t.id, "observer"), None).await, Code::CannotSpeak);
    let with_assignment = Post::text(&t.id, "observer work").assignment(new_assignment(&o.id, "criteria"));
    refused(o.c.post(with_assignment, None).await, Code::CannotSpeak);
    let r = refused(g.c.post(say(&t.id, "ask the observer", Some(&[o])), None).await, Code::InvalidTarget);
    assert_eq!(r.field.as_deref(), Some("ask.agents[0]"));
    let (s_summary, _) = summary(g, &t.id).await;
    assert_eq!(
        (s_summary.last_entry, s_summary.open_assignments),
        (0, 0),
        "nothing of the observer's calls took effect"
    );
    // The speaker and the governor speak: post, ask each other and create assignments.
    let p = s.post(say(&t.id, "speaker", Some(&[g]))).await;
    assert_eq!(set(&p.responders), ids(&[g]));
    let p = g.post(say(&t.id, "governor", Some(&[s]))).await;
    assert_eq!(set(&p.responders), ids(&[s]));
    s.assign(&t.id, &g.id, None, None).await;
    g.assign(&t.id, &s.id, None, None).await;
    // Observers do not count as speakers for rule 3: g and s are the two who may speak.
    assert_eq!(set(&s.post(Post::text(&t.id, "two speakers")).await.responders), ids(&[g]));
    // Promoted, the observer speaks.
    change_role(g, &t.id, o, pb::Role::Speaker).await.expect("promote");
    o.post(Post::text(&t.id, "now a speaker")).await;
}

/// §6.2 rule: a member may leave at any time: a speaker, an observer, a non-sole governor, and a
/// member with obligations; afterwards it reads nothing of the thread and leaving again is NOT_FOUND.
async fn a_member_may_leave_at_any_time(cx: Ctx) {
    let v = cx.agents(5).await;
    let (g, s, o, h, busy) = (&v[0], &v[1], &v[2], &v[3], &v[4]);
    let t = cx.team(g, &[s, busy]).await;
    admit(g, &t.id, o, pb::Role::Observer).await;
    admit(g, &t.id, h, pb::Role::Governor).await;
    let e = g.post(say(&t.id, "question", Some(&[busy]))).await.entry;
    let (_, asg) = g.assign(&t.id, &busy.id, None, None).await;
    busy.take(&asg).await;
    for who in [s, o, h, busy] {
        let w = leave(who, &t.id).await.expect("a member leaves");
        assert_eq!(outcome!(w.value.receipt, Left).thread, t.id);
        refused(timeline(who, &t.id).await, Code::NotFound);
        refused(leave(who, &t.id).await, Code::NotFound);
    }
    assert_eq!(members(g, &t.id).await.keys().cloned().collect::<BTreeSet<_>>(), ids(&[g]));
    assert_eq!(entry(g, &t.id, e).await.entry.expect("entry").author, g.id, "what was said stays");
}

/// §6.2 rule: a governor may remove members and change roles; a speaker or an observer may not
/// (NOT_GOVERNOR), and their attempts change nothing.
async fn only_a_governor_removes_members_and_changes_roles(cx: Ctx) {
    let v = cx.agents(5).await;
    let (g, s, c, o, d) = (&v[0], &v[1], &v[2], &v[3], &v[4]);
    let t = cx.team(g, &[s, c, d]).await;
    admit(g, &t.id, o, pb::Role::Observer).await;
    let before = members(g, &t.id).await;
    for who in [s, o] {
        refused(remove(who, &t.id, c).await, Code::NotGovernor);
        refused(change_role(who, &t.id, c, pb::Role::Observer).await, Code::NotGovernor);
        refused(change_role(who, &t.id, who, pb::Role::Governor).await, Code::NotGovernor);
    }
    assert_eq!(members(g, &t.id).await, before, "nothing changed");
    let w = change_role(g, &t.id, c, pb::Role::Observer).await.expect("a governor changes a role");
    let rc = outcome!(w.value.receipt, RoleChanged);
    assert_eq!(
        (rc.member.as_str(), rc.from, rc.to),
        (c.id.as_str(), role(pb::Role::Speaker), role(pb::Role::Observer))
    );
    refused(c.c.post(Post::text(&t.id, "demoted"), None).await, Code::CannotSpeak);
    let w = change_role(g, &t.id, s, pb::Role::Governor).await.expect("promote to governor");
    assert_eq!(outcome!(w.value.receipt, RoleChanged).to, role(pb::Role::Governor));
    issue(s, &t.id, pb::Role::Speaker).await;
    let w = remove(g, &t.id, d).await.expect("a governor removes a member");
    let removed = outcome!(w.value.receipt, Removed);
    assert_eq!((removed.thread.as_str(), removed.member.as_str()), (t.id.as_str(), d.id.as_str()));
    refused(timeline(d, &t.id).await, Code::NotFound);
    refused(d.c.post(Post::text(&t.id, "removed"), None).await, Code::NotFound);
    assert_eq!(
        members(g, &t.id).await,
        BTreeMap::from([
            (g.id.clone(), role(pb::Role::Governor)),
            (s.id.clone(), role(pb::Role::Governor)),
            (c.id.clone(), role(pb::Role::Observer)),
            (o.id.clone(), role(pb::Role::Observer)),
        ])
    );
}

/// §6.2 rule: an open thread always has a governor: the sole governor cannot leave or demote
/// itself (SOLE_GOVERNOR); after handing over with ChangeRole it can leave, and the new sole
/// governor is held to the same rule.
async fn a_sole_governor_cannot_leave_until_it_hands_over(cx: Ctx) {
    let (g, b) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&g, &[&b]).await;
    let r = refused(leave(&g, &t.id).await, Code::SoleGovernor);
    assert_eq!(r.next, kungfu_client::NextStep::Retry, "hand over or close, then retry");
    for r in [pb::Role::Speaker, pb::Role::Observer] {
        refused(change_role(&g, &t.id, &g, r).await, Code::SoleGovernor);
    }
    assert_eq!(members(&g, &t.id).await.get(&g.id), Some(&role(pb::Role::Governor)), "still the governor");
    let ws = g.working_set(&t.id).await.expect("working set");
    assert!(!ws.available_actions.iter().any(|a| a == "leave"), "leave is not offered: {:?}", ws.available_actions);
    change_role(&g, &t.id, &b, pb::Role::Governor).await.expect("hand over");
    leave(&g, &t.id).await.expect("with another governor, it may leave");
    assert_eq!(members(&b, &t.id).await, BTreeMap::from([(b.id.clone(), role(pb::Role::Governor))]));
    refused(leave(&b, &t.id).await, Code::SoleGovernor);
    assert!(summary(&b, &t.id).await.0.open);
}

/// §6.2 rule: demotion to observer ends the member's pending responses (ended as demoted, in the
/// role-change fact) and does not affect its assignments in progress, which it still delivers.
async fn demotion_ends_pending_responses_but_not_assignments_in_progress(cx: Ctx) {
    let (g, b) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&g, &[&b]).await;
    let e1 = g.post(say(&t.id, "question", Some(&[&b]))).await.entry;
    let e2 = g.post(Post::text(&t.id, "rule 3 asks b")).await.entry;
    let (_, asg) = g.assign(&t.id, &b.id, None, None).await;
    let taken = b.take(&asg).await;
    assert_eq!(owed_in(&b, &t.id).await, vec![e1, e2]);
    let w = change_role(&g, &t.id, &b, pb::Role::Observer).await.expect("demote");
    let (at, seq) = receipt_of(&w.value.receipt);
    for e in [e1, e2] {
        assert_eq!(ending(&g, &t.id, e, &b).await, Some(How::Demoted(())));
        assert_eq!(ended_at(&g, &t.id, e, &b).await, at, "ended by the demotion itself");
    }
    assert_eq!(facts_at(&g, &t.id, seq).await, vec!["role_changed".to_string()], "one fact");
    assert!(owed_in(&b, &t.id).await.is_empty());
    let a = b.assignment(&asg).await;
    match a.state {
        Some(pb::assignment::State::Taken(s)) => assert_eq!(s.delivery_due_unix_micros, taken.delivery_due_unix_micros),
        other => panic!("the assignment in progress is untouched, got {other:?}"),
    }
    let turn = b.turn().await;
    assert_eq!(turn.len(), 1, "only the delivery is owed: {turn:?}");
    assert_eq!(
        turn[0].obligation.clone().and_then(|o| o.kind),
        Some(pb::obligation_ref::Kind::AssignmentDelivery(asg.clone()))
    );
    b.deliver(&asg, "done as an observer").await;
    assert!(matches!(b.assignment(&asg).await.state, Some(pb::assignment::State::Delivered(_))));
}

/// §6.2 rule: when a membership ends (leaving or removal), the member's pending responses end in
/// the same fact, and responses it is owed by others do not.
async fn an_ending_membership_ends_its_pending_responses_in_the_same_fact(cx: Ctx) {
    let v = cx.agents(4).await;
    let (g, l, r, c) = (&v[0], &v[1], &v[2], &v[3]);
    let t = cx.team(g, &[l, r, c]).await;
    let e1 = g.post(say(&t.id, "for l and r", Some(&[l, r]))).await.entry;
    let e2 = g.post(say(&t.id, "for l", Some(&[l]))).await.entry;
    let e3 = l.post(say(&t.id, "l asks c", Some(&[c]))).await.entry;
    assert_eq!(owed_in(l, &t.id).await, vec![e1, e2]);
    let w = leave(l, &t.id).await.expect("leave");
    let (at, seq) = receipt_of(&w.value.receipt);
    for e in [e1, e2] {
        assert_eq!(ending(g, &t.id, e, l).await, Some(How::MembershipEnded(())));
        assert_eq!(ended_at(g, &t.id, e, l).await, at);
    }
    assert_eq!(facts_at(g, &t.id, seq).await, vec!["membership_ended".to_string()], "one fact");
    assert!(owed(l).await.iter().all(|(th, _)| th != &t.id));
    assert_eq!(ending(g, &t.id, e3, c).await, None, "c still owes the former member's entry");
    assert_eq!(ending(g, &t.id, e1, r).await, None, "other responders are untouched");
    // Removal: the same, in the removal fact.
    let w = remove(g, &t.id, r).await.expect("remove");
    let (at, seq) = receipt_of(&w.value.receipt);
    assert_eq!(ending(g, &t.id, e1, r).await, Some(How::MembershipEnded(())));
    assert_eq!(ended_at(g, &t.id, e1, r).await, at);
    assert_eq!(facts_at(g, &t.id, seq).await, vec!["membership_ended".to_string()]);
    assert!(owed(r).await.iter().all(|(th, _)| th != &t.id));
}

/// §6.2 rule: rejoining is a new membership (a new join time, the new grant's role) and revives
/// nothing: not the ended responses, not the voided assignments, not the forfeited judgment.
async fn rejoining_is_a_new_membership_that_revives_nothing(cx: Ctx) {
    let (g, l) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&g, &[&l]).await;
    let first = members(&g, &t.id).await;
    assert_eq!(first.get(&l.id), Some(&role(pb::Role::Speaker)));
    let e1 = g.post(say(&t.id, "question", Some(&[&l]))).await.entry;
    let (_, addressed) = g.assign(&t.id, &l.id, None, None).await;
    let (_, created) = l.assign(&t.id, &g.id, None, Some(60 * SECOND)).await;
    g.take(&created).await;
    g.deliver(&created, "output").await;
    leave(&l, &t.id).await.expect("leave");
    let j = admit(&g, &t.id, &l, pb::Role::Governor).await;
    assert!(!j.existing, "a new membership");
    assert_eq!(j.role, role(pb::Role::Governor), "the new membership has the new grant's role");
    assert_eq!(ending(&l, &t.id, e1, &l).await, Some(How::MembershipEnded(())), "the response stays ended");
    assert_eq!(assignment_outcome(&l.assignment(&addressed).await), Some(pb::AssignmentOutcome::Voided));
    let a = l.assignment(&created).await;
    assert!(a.judge_forfeited && matches!(a.state, Some(pb::assignment::State::Delivered(_))));
    let r =
        l.c.adopt_assignment(pb::AdoptAssignmentRequest { assignment: created.clone(), ..Default::default() }, None)
            .await;
    refused(r, Code::JudgmentForfeited);
    assert!(matches!(l.assignment(&created).await.state, Some(pb::assignment::State::Delivered(_))));
    assert!(l.turn().await.is_empty(), "no obligation came back");
    assert!(l.opportunities().await.is_empty(), "no voided assignment came back");
}

/// §6.2 rule: a membership records which admission it came through and when: the join receipt
/// states the time and the role of the grant joined through; a later grant binds a later joiner
/// and changes nothing for an existing member; joining again returns the recorded membership.
async fn a_membership_records_its_admission_and_when(cx: Ctx) {
    let v = cx.agents(3).await;
    let (g, b, c) = (&v[0], &v[1], &v[2]);
    let t = g.thread(pb::Role::Observer).await;
    let before = now_micros();
    let jb = b.join(&t.secret).await;
    let after = now_micros();
    assert!(
        jb.joined_at_unix_micros >= before - 1_000_000 && jb.joined_at_unix_micros <= after + 1_000_000,
        "joined_at is when the join took effect: {before} <= {} <= {after}",
        jb.joined_at_unix_micros
    );
    assert_eq!(jb.role, role(pb::Role::Observer), "the first grant's role");
    let (second, _) = issue(g, &t.id, pb::Role::Speaker).await;
    let jc = c.join(&second).await;
    assert_eq!(jc.role, role(pb::Role::Speaker), "the second grant's role");
    assert!(jc.joined_at_unix_micros > jb.joined_at_unix_micros);
    // Joining again (with the newer grant) returns b's recorded membership unchanged.
    let again = b.join(&second).await;
    assert!(again.existing);
    assert_eq!((again.role, again.joined_at_unix_micros), (jb.role, jb.joined_at_unix_micros));
    assert_eq!(members(g, &t.id).await.get(&b.id), Some(&role(pb::Role::Observer)));
    // The join facts are in the thread's history, at the recorded times.
    let ws = g.working_set(&t.id).await.expect("working set");
    for (who, j) in [(b, &jb), (c, &jc)] {
        assert!(
            ws.history.iter().any(|h| h.fact == "joined"
                && h.actor.as_deref() == Some(who.id.as_str())
                && h.at_unix_micros == j.joined_at_unix_micros),
            "a joined fact of {} at {}: {:?}",
            who.id,
            j.joined_at_unix_micros,
            ws.history
        );
    }
}

// ---------------------------------------------------------------------------------------------
// §6.3 Entries and responses.

/// §6.3 rule: only an active member who may speak, in an open thread, may post: an observer is
/// CANNOT_SPEAK, a stranger and a former member NOT_FOUND (as for an unknown thread), a
/// deactivated agent AGENT_INACTIVE, a closed thread THREAD_CLOSED; none of them adds an entry.
async fn only_an_active_member_who_may_speak_posts_in_an_open_thread(cx: Ctx) {
    let v = cx.agents(6).await;
    let (g, s, o, x, gone, off) = (&v[0], &v[1], &v[2], &v[3], &v[4], &v[5]);
    let t = cx.team(g, &[s, gone, off]).await;
    admit(g, &t.id, o, pb::Role::Observer).await;
    leave(gone, &t.id).await.expect("leave");
    deactivate(off).await;
    s.post(Post::text(&t.id, "a speaker posts")).await;
    refused(o.c.post(Post::text(&t.id, "observer"), None).await, Code::CannotSpeak);
    let stranger = refused(x.c.post(Post::text(&t.id, "stranger"), None).await, Code::NotFound);
    let unknown = refused(x.c.post(Post::text("th_999999999", "stranger"), None).await, Code::NotFound);
    assert_eq!(stranger.message, unknown.message, "a stranger learns nothing about the thread");
    refused(gone.c.post(Post::text(&t.id, "former"), None).await, Code::NotFound);
    refused(off.c.post(Post::text(&t.id, "inactive"), None).await, Code::AgentInactive);
    assert_eq!(last_entry(g, &t.id).await, 1);
    close(g, &t.id).await.expect("close");
    refused(s.c.post(Post::text(&t.id, "closed"), None).await, Code::ThreadClosed);
    refused(g.c.post(Post::text(&t.id, "closed"), None).await, Code::ThreadClosed);
    assert_eq!(timeline(g, &t.id).await.expect("timeline").len(), 1, "only the speaker's entry exists");
}

/// §6.3 rule: posting creates an entry with a sequence number within the thread, an author and one
/// pinned version of one valid Memory (new content becomes version 1 of a new private Memory of
/// the author; a stated pin keeps its version); a withdrawn Memory cannot be pinned.
async fn an_entry_has_a_sequence_number_an_author_and_one_pinned_version(cx: Ctx) {
    let (g, b) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&g, &[&b]).await;
    let other = cx.team(&g, &[&b]).await;
    let p1 = g.post(Post::text(&t.id, "first")).await;
    let p2 = b.post(Post::text(&t.id, "second")).await;
    g.post(Post::text(&other.id, "elsewhere")).await;
    let p3 = g.post(Post::text(&t.id, "third")).await;
    assert_eq!((p1.entry, p2.entry, p3.entry), (1, 2, 3), "numbered within the thread");
    let entries = timeline(&g, &t.id).await.expect("timeline");
    let got: Vec<(u64, &str)> = entries.iter().map(|e| (e.seq, e.author.as_str())).collect();
    assert_eq!(got, vec![(1, g.id.as_str()), (2, b.id.as_str()), (3, g.id.as_str())]);
    let pin = p2.pin.clone().expect("the receipt names the pinned version");
    assert_eq!(pin.version, 1);
    assert_eq!(entries[1].pin, Some(pin.clone()));
    let m = b.c.get_memory(pb::GetMemoryRequest { memory: pin.memory.clone(), version: None }).await.expect("own");
    let mm = m.memory.expect("memory");
    assert_eq!((mm.author.as_str(), mm.current_version, mm.public), (b.id.as_str(), 1, false));
    assert_eq!(entry(&g, &t.id, 2).await.content.expect("content").body, b"second");
    // A stated pin: an earlier version of one's own Memory stays that version.
    let mem = g.memory("v1").await;
    g.c.update_memory(
        pb::UpdateMemoryRequest { memory: mem.memory.clone(), content: text("v2"), ..Default::default() },
        None,
    )
    .await
    .expect("update");
    let p4 = g.post(Post::pin(&t.id, &mem.memory, 1)).await;
    assert_eq!(p4.pin, Some(mem.clone()));
    assert_eq!(entry(&b, &t.id, p4.entry).await.content.expect("content").body, b"v1");
    // A withdrawn Memory is not valid: no entry pins it.
    g.c.withdraw_memory(pb::WithdrawMemoryRequest { memory: mem.memory.clone(), ..Default::default() }, None)
        .await
        .expect("withdraw");
    refused(g.c.post(Post::pin(&t.id, &mem.memory, 2), None).await, Code::MemoryWithdrawn);
    assert_eq!(last_entry(&g, &t.id).await, 4);
}

/// §6.3 rule: an entry may reply to an existing entry of the same thread: a sequence number the
/// thread does not have is INVALID_ARGUMENT on `reply_to`, even if another thread has it.
async fn a_reply_names_an_existing_entry_of_the_same_thread(cx: Ctx) {
    let (g, b) = (cx.agent().await, cx.agent().await);
    let here = cx.team(&g, &[&b]).await;
    let other = cx.team(&g, &[&b]).await;
    g.post(Post::text(&here.id, "only entry here")).await;
    for s in ["1", "2", "3"] {
        g.post(Post::text(&other.id, s)).await;
    }
    let r = refused(b.c.post(Post::text(&here.id, "to 3").reply_to(3), None).await, Code::InvalidArgument);
    assert_eq!(r.field.as_deref(), Some("reply_to"));
    assert_eq!(last_entry(&g, &here.id).await, 1, "nothing was posted");
    let p = b.post(Post::text(&here.id, "to 1").reply_to(1)).await;
    assert_eq!(entry(&g, &here.id, p.entry).await.entry.expect("entry").reply_to, Some(1));
}

/// §6.3 rule: an entry may ask a set of members who may speak, possibly empty, never the author:
/// the author, an observer, a stranger and a former member are INVALID_TARGET at their position; an
/// ask over the configured limit is LIMIT_EXCEEDED; the stated ask is kept as stated.
async fn an_ask_names_members_who_may_speak_and_never_the_author(cx: Ctx) {
    let v = cx.agents(12).await;
    let (g, b, c, o, x, gone) = (&v[0], &v[1], &v[2], &v[3], &v[4], &v[5]);
    let many: Vec<&Agent> = v[6..12].iter().chain([b]).collect();
    let mut all: Vec<&Agent> = vec![b, c, gone];
    all.extend(&many[..6]);
    let t = cx.team(g, &all).await;
    admit(g, &t.id, o, pb::Role::Observer).await;
    leave(gone, &t.id).await.expect("leave");
    let r = refused(c.c.post(say(&t.id, "me", Some(&[b, c])), None).await, Code::InvalidTarget);
    assert_eq!(r.field, Some(format!("ask.agents[{}]", id_order(&[b, c], c))));
    for bad in [o, x, gone] {
        let r = refused(g.c.post(say(&t.id, "bad", Some(&[b, bad])), None).await, Code::InvalidTarget);
        assert_eq!(r.field, Some(format!("ask.agents[{}]", id_order(&[b, bad], bad))), "asking {}", bad.id);
    }
    assert_eq!(many.len(), 7);
    let r = refused(g.c.post(say(&t.id, "too many", Some(&many)), None).await, Code::LimitExceeded);
    assert_eq!(r.field.as_deref(), Some("ask.agents"));
    assert_eq!(last_entry(g, &t.id).await, 0, "no refused post left an entry");
    assert!(owed(b).await.is_empty());
    let p = g.post(say(&t.id, "six", Some(&many[..6]))).await;
    assert_eq!(set(&p.responders), ids(&many[..6]));
    let p = g.post(say(&t.id, "nobody", Some(&[]))).await;
    assert!(p.responders.is_empty());
    let e = entry(g, &t.id, p.entry).await.entry.expect("entry");
    assert_eq!(e.ask, Some(pb::Ask { agents: vec![] }), "an empty ask is kept as stated");
    let p = g.post(Post::text(&t.id, "no ask")).await;
    assert_eq!(entry(g, &t.id, p.entry).await.entry.expect("entry").ask, None, "no ask stated");
}

/// §6.3 rule: entries cannot be edited or deleted; a correction is a new entry, and updating the
/// pinned Memory changes neither the entry nor the version it pins.
async fn entries_are_never_edited_and_a_correction_is_a_new_entry(cx: Ctx) {
    let (g, b) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&g, &[&b]).await;
    let mem = g.memory("the plan: A").await;
    let p1 = g.post(Post::pin(&t.id, &mem.memory, 1)).await;
    let before = entry(&b, &t.id, p1.entry).await;
    g.c.update_memory(
        pb::UpdateMemoryRequest { memory: mem.memory.clone(), content: text("the plan: B"), ..Default::default() },
        None,
    )
    .await
    .expect("update");
    let p2 = g.post(Post::pin(&t.id, &mem.memory, 2).reply_to(p1.entry)).await;
    assert_eq!(p2.entry, p1.entry + 1, "the correction is a new entry");
    assert_eq!(entry(&b, &t.id, p1.entry).await, before, "the first entry is unchanged");
    assert_eq!(entry(&b, &t.id, p2.entry).await.content.expect("content").body, b"the plan: B");
    let seqs: Vec<u64> = timeline(&b, &t.id).await.expect("timeline").iter().map(|e| e.seq).collect();
    assert_eq!(seqs, vec![1, 2], "nothing was removed");
}

/// §6.3 rule 1: if the entry states ask, the responders are the asked members (an empty set means
/// nobody), even in a reply and where rule 3 would apply; each responder owes a response (§6.3:
/// it is in the responder's turn, next step respond).
async fn rule1_a_stated_ask_decides_the_responders(cx: Ctx) {
    let v = cx.agents(5).await;
    let (g, b, c, d, e) = (&v[0], &v[1], &v[2], &v[3], &v[4]);
    let t = cx.team(g, &[b, c, d]).await;
    let e1 = b.post(Post::text(&t.id, "b's entry")).await.entry;
    // A reply to b's entry that asks c: rule 1, not rule 2.
    let p = g.post(say(&t.id, "c?", Some(&[c])).reply_to(e1)).await;
    assert_eq!(set(&p.responders), ids(&[c]));
    assert_eq!(set(&entry(g, &t.id, p.entry).await.entry.expect("entry").responders), ids(&[c]));
    assert_eq!(owed_in(c, &t.id).await, vec![p.entry]);
    assert!(owed_in(b, &t.id).await.is_empty(), "b is not asked");
    // Every asked member owes; the others do not.
    let p = g.post(say(&t.id, "b and d?", Some(&[b, d]))).await;
    assert_eq!(set(&p.responders), ids(&[b, d]));
    assert_eq!(owed_in(b, &t.id).await, vec![p.entry]);
    assert_eq!(owed_in(d, &t.id).await, vec![p.entry]);
    assert_eq!(owed_in(c, &t.id).await.len(), 1);
    assert!(owed_in(g, &t.id).await.is_empty());
    let r = response(g, &t.id, p.entry, d).await.expect("the response exists");
    assert!(r.ending.is_none() && r.arose_at_unix_micros > 0);
    // Two speakers (rule 3 would name e), but an empty ask means nobody.
    let two = cx.team(g, &[e]).await;
    let p = g.post(say(&two.id, "nobody", Some(&[]))).await;
    assert!(p.responders.is_empty());
    assert!(owed_in(e, &two.id).await.is_empty());
    refused(response(g, &two.id, p.entry, e).await, Code::NotFound);
}

/// §6.3 rule 2: otherwise, a reply to another member's entry makes that entry's author the
/// responder, or nobody if that author can no longer speak (demoted to observer, or gone), without
/// falling through to rule 3; a reply to one's own entry is not rule 2.
async fn rule2_a_reply_asks_the_replied_author_unless_it_can_no_longer_speak(cx: Ctx) {
    let v = cx.agents(4).await;
    let (g, b, c, d) = (&v[0], &v[1], &v[2], &v[3]);
    let t = cx.team(g, &[b, c, d]).await;
    let e1 = b.post(Post::text(&t.id, "b says")).await;
    assert!(e1.responders.is_empty(), "four speakers: a broadcast");
    let p = c.post(Post::text(&t.id, "c replies to b").reply_to(e1.entry)).await;
    assert_eq!(set(&p.responders), ids(&[b]));
    assert_eq!(owed_in(b, &t.id).await, vec![p.entry]);
    for who in [g, c, d] {
        assert!(owed_in(who, &t.id).await.is_empty(), "{} owes nothing", who.id);
    }
    // The governor's entry: a governor may speak, so it is asked.
    let eg = g.post(Post::text(&t.id, "g says")).await.entry;
    let p = d.post(Post::text(&t.id, "d replies to g").reply_to(eg)).await;
    assert_eq!(set(&p.responders), ids(&[g]));
    // c's and d's entries; then c is demoted to observer and d leaves: g and b remain the only two
    // who may speak, where rule 3 would name the other one; rule 2 names nobody instead.
    let ec = c.post(Post::text(&t.id, "c says")).await.entry;
    let ed = d.post(Post::text(&t.id, "d says")).await.entry;
    change_role(g, &t.id, c, pb::Role::Observer).await.expect("demote c");
    leave(d, &t.id).await.expect("d leaves");
    let to_demoted = b.post(Post::text(&t.id, "to demoted c").reply_to(ec)).await;
    assert!(to_demoted.responders.is_empty(), "c can no longer speak: nobody, not g");
    let to_gone = b.post(Post::text(&t.id, "to departed d").reply_to(ed)).await;
    assert!(to_gone.responders.is_empty(), "d is gone: nobody, not g");
    for e in [to_demoted.entry, to_gone.entry] {
        assert!(entry(g, &t.id, e).await.entry.expect("entry").responders.is_empty());
        assert!(!owed_in(g, &t.id).await.contains(&e));
        assert!(!owed_in(c, &t.id).await.contains(&e));
    }
    // A reply to one's own entry is not a reply to another member's entry: rule 3 names g.
    let own = b.post(Post::text(&t.id, "b replies to itself").reply_to(to_gone.entry)).await;
    assert_eq!(set(&own.responders), ids(&[g]));
    assert!(owed_in(g, &t.id).await.contains(&own.entry));
}

/// §6.3 rule 3: otherwise, if the thread has exactly two members who may speak, the other one
/// responds; observers do not count, and a governor speaks. A third speaker makes it rule 4.
async fn rule3_exactly_two_speakers_the_other_responds(cx: Ctx) {
    let v = cx.agents(5).await;
    let (g, b, o1, o2, c) = (&v[0], &v[1], &v[2], &v[3], &v[4]);
    let t = cx.team(g, &[b]).await;
    admit(g, &t.id, o1, pb::Role::Observer).await;
    admit(g, &t.id, o2, pb::Role::Observer).await;
    let p1 = g.post(Post::text(&t.id, "from the governor")).await;
    assert_eq!(set(&p1.responders), ids(&[b]));
    let p2 = b.post(Post::text(&t.id, "from the speaker")).await;
    assert_eq!(set(&p2.responders), ids(&[g]));
    assert_eq!(owed_in(b, &t.id).await, vec![p1.entry]);
    assert_eq!(owed_in(g, &t.id).await, vec![p2.entry]);
    for o in [o1, o2] {
        assert!(owed_in(o, &t.id).await.is_empty(), "observers do not count");
    }
    // A third speaker: nobody.
    admit(g, &t.id, c, pb::Role::Speaker).await;
    assert!(g.post(Post::text(&t.id, "three speakers")).await.responders.is_empty());
    // Back to two who may speak.
    change_role(g, &t.id, c, pb::Role::Observer).await.expect("demote");
    let p3 = b.post(Post::text(&t.id, "two again")).await;
    assert_eq!(set(&p3.responders), ids(&[g]));
    assert!(owed_in(c, &t.id).await.is_empty());
}

/// §6.3 rule 4: otherwise nobody (a broadcast): three speakers with no ask and no reply, or a
/// sole speaker among observers.
async fn rule4_otherwise_a_broadcast_names_nobody(cx: Ctx) {
    let v = cx.agents(4).await;
    let (g, b, c, o) = (&v[0], &v[1], &v[2], &v[3]);
    let t = cx.team(g, &[b, c]).await;
    let p = g.post(Post::text(&t.id, "to all")).await;
    assert!(p.responders.is_empty());
    assert!(entry(c, &t.id, p.entry).await.entry.expect("entry").responders.is_empty());
    for who in [g, b, c] {
        assert!(owed_in(who, &t.id).await.is_empty());
    }
    let alone = g.thread(pb::Role::Observer).await;
    o.join(&alone.secret).await;
    let p = g.post(Post::text(&alone.id, "a sole speaker")).await;
    assert!(p.responders.is_empty());
    assert!(owed_in(o, &alone.id).await.is_empty());
}

/// §6.3 rule: responders are fixed when the entry is posted and never widened by later arrivals:
/// a member who joins later owes nothing for an earlier entry, and a broadcast stays a broadcast
/// when the thread later has exactly two speakers.
async fn responders_are_fixed_at_post_time(cx: Ctx) {
    let v = cx.agents(4).await;
    let (g, b, c, d) = (&v[0], &v[1], &v[2], &v[3]);
    let t = cx.team(g, &[b]).await;
    let e1 = g.post(Post::text(&t.id, "rule 3 names b")).await;
    assert_eq!(set(&e1.responders), ids(&[b]));
    admit(g, &t.id, c, pb::Role::Speaker).await;
    admit(g, &t.id, d, pb::Role::Governor).await;
    assert_eq!(set(&entry(c, &t.id, e1.entry).await.entry.expect("entry").responders), ids(&[b]));
    for late in [c, d] {
        assert!(owed_in(late, &t.id).await.is_empty(), "{} arrived later", late.id);
        refused(response(late, &t.id, e1.entry, late).await, Code::NotFound);
    }
    assert_eq!(owed_in(b, &t.id).await, vec![e1.entry]);
    // Four who may speak: a broadcast. When c and d are gone, it stays a broadcast.
    let e2 = g.post(Post::text(&t.id, "to all")).await;
    assert!(e2.responders.is_empty());
    leave(c, &t.id).await.expect("leave");
    leave(d, &t.id).await.expect("leave");
    assert!(entry(g, &t.id, e2.entry).await.entry.expect("entry").responders.is_empty());
    assert_eq!(owed_in(b, &t.id).await, vec![e1.entry]);
}

/// §6.3 rule: replying to entry p ends the replier's own pending response to p in the same action
/// (`Posted.ended_own_response`, the response ended as replied by the new entry at the post's
/// time); whom the new entry asks is decided separately by rules 1–4.
async fn replying_ends_own_pending_response_in_the_same_action(cx: Ctx) {
    let v = cx.agents(3).await;
    let (g, b, c) = (&v[0], &v[1], &v[2]);
    let t = cx.team(g, &[b, c]).await;
    let e1 = g.post(say(&t.id, "b and c?", Some(&[b, c]))).await.entry;
    assert_eq!(owed_in(b, &t.id).await, vec![e1]);
    // b replies and asks c: its own response ends; the new entry asks c (rule 1), not g.
    let w = b.c.post(say(&t.id, "b answers, asks c", Some(&[c])).reply_to(e1), None).await.expect("post");
    let (at, _) = receipt_of(&w.value.receipt);
    let p = outcome!(w.value.receipt, Posted);
    assert!(p.ended_own_response);
    assert_eq!(set(&p.responders), ids(&[c]));
    assert_eq!(ending(g, &t.id, e1, b).await, Some(How::RepliedByEntry(p.entry)));
    assert_eq!(ended_at(g, &t.id, e1, b).await, at, "ended in the same action");
    assert!(owed_in(b, &t.id).await.is_empty());
    assert!(owed_in(g, &t.id).await.is_empty(), "rule 1 named c, so g owes nothing");
    assert_eq!(owed_in(c, &t.id).await, vec![e1, p.entry]);
    // c replies without an ask: its response to e1 ends, and rule 2 names e1's author g.
    let p2 = c.post(Post::text(&t.id, "c answers").reply_to(e1)).await;
    assert!(p2.ended_own_response);
    assert_eq!(set(&p2.responders), ids(&[g]));
    assert_eq!(ending(g, &t.id, e1, c).await, Some(How::RepliedByEntry(p2.entry)));
    assert_eq!(owed_in(c, &t.id).await, vec![p.entry], "only the response to the entry replied to ended");
}

/// §6.3 rule: replying without a pending response is allowed and ends nothing.
async fn replying_without_a_pending_response_is_allowed(cx: Ctx) {
    let v = cx.agents(3).await;
    let (g, b, c) = (&v[0], &v[1], &v[2]);
    let t = cx.team(g, &[b, c]).await;
    let e1 = g.post(say(&t.id, "b?", Some(&[b]))).await.entry;
    let p = c.post(Post::text(&t.id, "c chimes in").reply_to(e1)).await;
    assert!(!p.ended_own_response);
    assert_eq!(set(&p.responders), ids(&[g]));
    assert_eq!(owed_in(b, &t.id).await, vec![e1], "b's response is untouched");
    assert_eq!(ending(g, &t.id, e1, b).await, None);
    // Replying twice: the second reply finds nothing pending.
    let first = b.post(Post::text(&t.id, "b answers").reply_to(e1)).await;
    assert!(first.ended_own_response);
    let second = b.post(Post::text(&t.id, "b again").reply_to(e1)).await;
    assert!(!second.ended_own_response);
    assert_eq!(ending(g, &t.id, e1, b).await, Some(How::RepliedByEntry(first.entry)), "the first reply ended it");
}

/// §6.3 rule: a responder may handle a pending response, ending it without posting, optionally
/// with a one-line note; a note of several lines, or over the size limit, is refused and the
/// response stays pending; without a pending response, handling is NO_PENDING_RESPONSE.
async fn handling_ends_a_pending_response_without_posting(cx: Ctx) {
    let v = cx.agents(3).await;
    let (g, b, c) = (&v[0], &v[1], &v[2]);
    let t = cx.team(g, &[b, c]).await;
    let e1 = g.post(say(&t.id, "b?", Some(&[b]))).await.entry;
    let e2 = g.post(say(&t.id, "b again?", Some(&[b]))).await.entry;
    let r = refused(handle(b, &t.id, e1, Some("line one\nline two")).await, Code::InvalidArgument);
    assert_eq!(r.field.as_deref(), Some("note"));
    let r = refused(handle(b, &t.id, e1, Some(&"x".repeat(201))).await, Code::LimitExceeded);
    assert_eq!(r.field.as_deref(), Some("note"));
    assert_eq!(ending(g, &t.id, e1, b).await, None, "still pending after the refusals");
    refused(handle(c, &t.id, e1, None).await, Code::NoPendingResponse);
    let w = handle(b, &t.id, e1, Some("seen, no action")).await.expect("handle");
    let h = outcome!(w.value.receipt, Handled);
    assert_eq!((h.thread.as_str(), h.entry), (t.id.as_str(), e1));
    assert_eq!(ending(g, &t.id, e1, b).await, Some(How::Handled(pb::HandledEnding { note: text("seen, no action") })));
    assert_eq!(last_entry(g, &t.id).await, 2, "handling posts nothing");
    assert_eq!(owed_in(b, &t.id).await, vec![e2]);
    refused(handle(b, &t.id, e1, None).await, Code::NoPendingResponse);
    handle(b, &t.id, e2, None).await.expect("handle without a note");
    assert_eq!(ending(g, &t.id, e2, b).await, Some(How::Handled(pb::HandledEnding { note: None })));
    assert!(owed_in(b, &t.id).await.is_empty());
}

/// §6.3 rule: the handle note is kept with the ending and readable only by the entry's author and
/// the responder; any other member sees that it was handled, without the note.
async fn a_handle_note_is_readable_only_by_the_author_and_the_responder(cx: Ctx) {
    let v = cx.agents(4).await;
    let (g, b, c, d) = (&v[0], &v[1], &v[2], &v[3]);
    let t = cx.team(g, &[b, c, d]).await;
    let e1 = c.post(say(&t.id, "b?", Some(&[b]))).await.entry;
    handle(b, &t.id, e1, Some("private reason")).await.expect("handle");
    for reader in [c, b] {
        assert_eq!(
            ending(reader, &t.id, e1, b).await,
            Some(How::Handled(pb::HandledEnding { note: text("private reason") })),
            "{} reads the note",
            reader.id
        );
    }
    for reader in [g, d] {
        assert_eq!(
            ending(reader, &t.id, e1, b).await,
            Some(How::Handled(pb::HandledEnding { note: None })),
            "{} (even a governor) does not read the note",
            reader.id
        );
    }
}

/// §6.3 rule: the entry's author, while still a member, may retract the request, ending all
/// pending responses the entry created; responses already given are not undone. Another member is
/// NOT_AUTHOR, a former author NOT_FOUND, nothing pending NO_EFFECT.
async fn retracting_ends_pending_responses_but_not_given_ones(cx: Ctx) {
    let v = cx.agents(4).await;
    let (g, b, c, d) = (&v[0], &v[1], &v[2], &v[3]);
    let t = cx.team(g, &[b, c, d]).await;
    let e1 = g.post(say(&t.id, "all of you?", Some(&[b, c, d]))).await.entry;
    let reply = b.post(say(&t.id, "b answers", Some(&[])).reply_to(e1)).await.entry;
    refused(retract(b, &t.id, e1).await, Code::NotAuthor);
    refused(retract(c, &t.id, e1).await, Code::NotAuthor);
    assert_eq!(owed_in(c, &t.id).await, vec![e1], "a refused retraction ends nothing");
    let w = retract(g, &t.id, e1).await.expect("retract");
    let (at, _) = receipt_of(&w.value.receipt);
    let r = outcome!(w.value.receipt, Retracted);
    assert_eq!((r.entry, r.responses_ended), (e1, 2));
    assert_eq!(ending(g, &t.id, e1, b).await, Some(How::RepliedByEntry(reply)), "the given response stays");
    for who in [c, d] {
        assert_eq!(ending(g, &t.id, e1, who).await, Some(How::Retracted(())));
        assert_eq!(ended_at(g, &t.id, e1, who).await, at);
        assert!(owed_in(who, &t.id).await.is_empty());
    }
    refused(retract(g, &t.id, e1).await, Code::NoEffect);
    // A former author may no longer retract; the responses stay owed.
    let e2 = d.post(say(&t.id, "c?", Some(&[c]))).await.entry;
    leave(d, &t.id).await.expect("leave");
    refused(retract(d, &t.id, e2).await, Code::NotFound);
    assert_eq!(owed_in(c, &t.id).await, vec![e2]);
}

/// §6.3 rule: no read receipt exists: reading the timeline, the entry, the response, the working
/// set or the turn changes no obligation.
async fn reading_changes_no_obligation(cx: Ctx) {
    let (g, b) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&g, &[&b]).await;
    let e1 = g.post(Post::text(&t.id, "b owes (rule 3)")).await.entry;
    let turn = b.turn().await;
    let before = response(&g, &t.id, e1, &b).await.expect("response");
    for _ in 0..2 {
        timeline(&b, &t.id).await.expect("timeline");
        entry(&b, &t.id, e1).await;
        response(&b, &t.id, e1, &b).await.expect("response");
        b.working_set(&t.id).await.expect("working set");
        b.turn().await;
        b.opportunities().await;
    }
    assert_eq!(response(&g, &t.id, e1, &b).await.expect("response"), before, "still pending, unchanged");
    assert!(before.ending.is_none());
    assert_eq!(b.turn().await, turn);
    assert_eq!(owed_in(&b, &t.id).await, vec![e1]);
}

// ---------------------------------------------------------------------------------------------
// §6.5 Closing.

/// §6.5 rule: a governor may close an open thread; a speaker or an observer is NOT_GOVERNOR, a
/// stranger NOT_FOUND, and their attempts leave it open.
async fn only_a_governor_may_close(cx: Ctx) {
    let v = cx.agents(4).await;
    let (g, s, o, x) = (&v[0], &v[1], &v[2], &v[3]);
    let t = cx.team(g, &[s]).await;
    admit(g, &t.id, o, pb::Role::Observer).await;
    refused(close(s, &t.id).await, Code::NotGovernor);
    refused(close(o, &t.id).await, Code::NotGovernor);
    refused(close(x, &t.id).await, Code::NotFound);
    assert!(summary(g, &t.id).await.0.open);
    let w = close(g, &t.id).await.expect("a governor closes");
    assert_eq!(outcome!(w.value.receipt, ThreadClosed).thread, t.id);
    assert!(!summary(g, &t.id).await.0.open);
}

/// §6.5 rule: closing is terminal: no further posts (THREAD_CLOSED), it cannot be closed twice,
/// and nothing reopens or re-admits it (grants, roles, removal, handling are THREAD_CLOSED).
async fn closing_is_terminal(cx: Ctx) {
    let (g, b) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&g, &[&b]).await;
    let e1 = g.post(Post::text(&t.id, "before")).await.entry;
    close(&g, &t.id).await.expect("close");
    refused(g.c.post(Post::text(&t.id, "after"), None).await, Code::ThreadClosed);
    refused(b.c.post(Post::text(&t.id, "reply").reply_to(e1), None).await, Code::ThreadClosed);
    refused(close(&g, &t.id).await, Code::ThreadClosed);
    let r = g.c.issue_grant(pb::IssueGrantRequest { thread: t.id.clone(), ..Default::default() }, None).await;
    refused(r, Code::ThreadClosed);
    refused(void_grant(&g, &t.id).await, Code::ThreadClosed);
    refused(change_role(&g, &t.id, &b, pb::Role::Governor).await, Code::ThreadClosed);
    refused(remove(&g, &t.id, &b).await, Code::ThreadClosed);
    refused(handle(&b, &t.id, e1, None).await, Code::ThreadClosed);
    let (s, _) = summary(&g, &t.id).await;
    assert!(!s.open);
    assert_eq!(s.last_entry, 1);
    assert_eq!(members(&g, &t.id).await.get(&b.id), Some(&role(pb::Role::Speaker)));
}

/// §6.5 rule: on closing, in the same fact, all pending responses end and undelivered assignments
/// (untaken or taken) are voided; nobody owes anything there afterwards.
async fn closing_ends_pending_responses_and_voids_undelivered_assignments(cx: Ctx) {
    let v = cx.agents(3).await;
    let (g, b, c) = (&v[0], &v[1], &v[2]);
    let t = cx.team(g, &[b, c]).await;
    let e1 = g.post(say(&t.id, "b and c?", Some(&[b, c]))).await.entry;
    let e2 = b.post(say(&t.id, "g?", Some(&[g]))).await.entry;
    let (_, untaken) = g.assign(&t.id, &b.id, None, None).await;
    let (_, taken) = g.assign(&t.id, &c.id, None, None).await;
    c.take(&taken).await;
    let (_, own) = c.assign(&t.id, &g.id, None, None).await;
    let w = close(g, &t.id).await.expect("close");
    let (at, seq) = receipt_of(&w.value.receipt);
    for (e, who) in [(e1, b), (e1, c), (e2, g)] {
        assert_eq!(ending(g, &t.id, e, who).await, Some(How::ThreadClosed(())));
        assert_eq!(ended_at(g, &t.id, e, who).await, at, "ended by the closing itself");
    }
    for a in [&untaken, &taken, &own] {
        let a = g.assignment(a).await;
        assert_eq!(assignment_outcome(&a), Some(pb::AssignmentOutcome::Voided), "{}", a.id);
        match a.state {
            Some(pb::assignment::State::Ended(e)) => assert_eq!(e.ended_at_unix_micros, at),
            other => panic!("ended, got {other:?}"),
        }
    }
    assert_eq!(facts_at(g, &t.id, seq).await, vec!["thread_closed".to_string()], "one fact");
    assert_eq!(summary(g, &t.id).await.0.open_assignments, 0);
    for who in [g, b, c] {
        assert!(who.turn().await.is_empty(), "{} owes nothing after closing", who.id);
        assert!(who.opportunities().await.is_empty());
    }
}

/// §6.5 rule: on closing, delivered assignments keep their judgment deadlines and remain judgeable
/// by their creators; an unjudged one settles as undecided at its deadline.
async fn closing_keeps_delivered_assignments_judgeable(cx: Ctx) {
    let (g, b) = (cx.agent().await, cx.agent().await);
    let t = cx.team(&g, &[&b]).await;
    let (_, judged) = b.assign(&t.id, &g.id, None, Some(60 * SECOND)).await;
    let (_, settles) = b.assign(&t.id, &g.id, None, Some(2 * SECOND)).await;
    let mut due = 0;
    for a in [&judged, &settles] {
        g.take(a).await;
        due = g.deliver(a, "output").await.judgment_due_unix_micros;
    }
    let before = b.assignment(&settles).await.state;
    close(&g, &t.id).await.expect("close");
    assert_eq!(b.assignment(&settles).await.state, before, "the judgment deadline is kept");
    let judge: Vec<_> = b.turn().await.into_iter().filter(|i| i.next == pb::NextStep::Judge as i32).collect();
    assert_eq!(judge.len(), 2, "b still owes both judgments: {judge:?}");
    let w =
        b.c.adopt_assignment(pb::AdoptAssignmentRequest { assignment: judged.clone(), ..Default::default() }, None)
            .await
            .expect("the creator judges after closing");
    assert_eq!(outcome!(w.value.receipt, AssignmentAdopted).assignment, judged);
    assert_eq!(assignment_outcome(&b.assignment(&judged).await), Some(pb::AssignmentOutcome::Adopted));
    sleep_past(due, Duration::from_millis(300)).await;
    eventually("the unjudged assignment to settle as undecided", || async {
        (assignment_outcome(&b.assignment(&settles).await) == Some(pb::AssignmentOutcome::Undecided)).then_some(())
    })
    .await;
}

/// §6.5 rule: on closing, the admission is voided: the grant's secret admits nobody, and no grant
/// is live; the members stay as they were.
async fn closing_voids_the_admission(cx: Ctx) {
    let v = cx.agents(3).await;
    let (g, b, x) = (&v[0], &v[1], &v[2]);
    let t = cx.team(g, &[b]).await;
    let before = members(g, &t.id).await;
    assert!(live_grant(g, &t.id).await.is_some());
    close(g, &t.id).await.expect("close");
    assert!(live_grant(g, &t.id).await.is_none());
    refused(join_with(x, &t.secret).await, Code::GrantInvalid);
    assert_eq!(members(g, &t.id).await, before);
}

/// §6.5 rule: after closing, memberships remain and the thread is read-only: every member still
/// reads it, nobody posts, and members (the sole governor included) may leave.
async fn a_closed_thread_keeps_its_members_who_read_and_may_leave(cx: Ctx) {
    let v = cx.agents(3).await;
    let (g, b, o) = (&v[0], &v[1], &v[2]);
    let t = cx.team(g, &[b]).await;
    admit(g, &t.id, o, pb::Role::Observer).await;
    let e1 = b.post(Post::text(&t.id, "the record")).await.entry;
    let before = members(g, &t.id).await;
    close(g, &t.id).await.expect("close");
    assert_eq!(members(o, &t.id).await, before, "memberships remain");
    for who in [g, b, o] {
        assert_eq!(timeline(who, &t.id).await.expect("members still read").len(), 1);
        assert_eq!(entry(who, &t.id, e1).await.content.expect("content").body, b"the record");
    }
    refused(b.c.post(Post::text(&t.id, "read-only"), None).await, Code::ThreadClosed);
    leave(b, &t.id).await.expect("a speaker leaves a closed thread");
    refused(timeline(b, &t.id).await, Code::NotFound);
    leave(g, &t.id).await.expect("the sole governor leaves a closed thread");
    refused(timeline(g, &t.id).await, Code::NotFound);
    assert_eq!(members(o, &t.id).await.keys().cloned().collect::<BTreeSet<_>>(), ids(&[o]));
    assert_eq!(timeline(o, &t.id).await.expect("the remaining member reads").len(), 1);
}

/// §6.5 rule: unfinished work continues in a new thread, which may pin the same Memories, but
/// replies do not cross threads: `reply_to` names an entry of the new thread only (a number the
/// new thread does not have is refused), and the closed thread takes no replies.
async fn a_new_thread_pins_the_same_memories_but_cannot_reply_to_the_old_entries(cx: Ctx) {
    let v = cx.agents(3).await;
    let (g, b, c) = (&v[0], &v[1], &v[2]);
    let old = cx.team(g, &[b, c]).await;
    let o1 = c.post(Post::text(&old.id, "c's plan")).await;
    g.post(Post::text(&old.id, "two")).await;
    let o3 = g.post(Post::text(&old.id, "g's plan")).await;
    close(g, &old.id).await.expect("close");
    refused(b.c.post(Post::text(&old.id, "late").reply_to(o3.entry), None).await, Code::ThreadClosed);
    let new = cx.team(g, &[b, c]).await;
    // The same Memory, pinned again by its author in the new thread.
    let pin = o3.pin.expect("pin");
    let n1 = g.post(Post::pin(&new.id, &pin.memory, pin.version)).await;
    assert_eq!(n1.entry, 1);
    assert_eq!(entry(b, &new.id, 1).await.content.expect("content").body, b"g's plan");
    let r = refused(b.c.post(Post::text(&new.id, "to old 3").reply_to(o3.entry), None).await, Code::InvalidArgument);
    assert_eq!(r.field.as_deref(), Some("reply_to"));
    assert_eq!(last_entry(g, &new.id).await, 1, "nothing was posted");
    // reply_to 1 is the new thread's entry 1 (g's), not the old one (c's): rule 2 names g.
    assert_eq!(o1.entry, 1);
    let p = b.post(Post::text(&new.id, "to new 1").reply_to(1)).await;
    assert_eq!(set(&p.responders), ids(&[g]));
    assert_eq!(entry(c, &new.id, p.entry).await.entry.expect("entry").reply_to, Some(1));
}
