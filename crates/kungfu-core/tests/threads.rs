//! Threads (spec §6.1, §6.2, §6.3, §6.5): creation and admission, members and roles, entries and
//! the four responder rules, closing, and the capacity limits that bound them. Every step also
//! runs the world's invariant and rebuild checks (L1); these tests assert the specific behaviour.

use kungfu_core::engine::Applied;
use kungfu_core::model::{
    Agent, Assignment, AssignmentOutcome, AssignmentState, Entry, Membership, MembershipEnd, MembershipState,
    ObligationId, ObligationKind, OpportunityId, Response, ResponseEnd, ResponseState, Thread, ThreadState,
};
use kungfu_core::read::{self, ReadError, ReadResult};
use kungfu_core::secret::{fingerprint, hash_secret};
use kungfu_core::state::StateExt;
use kungfu_core::testkit::World;
use kungfu_core::{Action, ActionResult, Fact, GrantReceipt, Limits, PostBody, Principal};
use kungfu_types::{AgentId, AssignmentId, Code, Content, EntrySeq, Micros, NextStep, ObjectRef, Role, ThreadId};
use std::collections::BTreeSet;

// --- helpers ----------------------------------------------------------------------------------------

fn create(w: &mut World, governor: AgentId) -> ThreadId {
    match w.ok(governor, Action::CreateThread { subject: Content::from("subject"), grant: None }) {
        ActionResult::ThreadCreated { thread, .. } => thread,
        other => panic!("unexpected {other:?}"),
    }
}

/// Issues a grant binding `role`; returns its bearer secret.
fn issue(w: &mut World, governor: AgentId, thread: ThreadId, role: Role) -> String {
    let (grant, secret) = w.new_grant(role);
    w.ok(governor, Action::IssueGrant { thread, grant });
    secret
}

fn join(secret: &str) -> Action {
    Action::Join { grant_hash: hash_secret(secret) }
}

fn admit(w: &mut World, governor: AgentId, thread: ThreadId, agent: AgentId, role: Role) {
    let secret = issue(w, governor, thread, role);
    w.ok(agent, join(&secret));
}

/// Runs an agent action with a fresh key and returns everything it applied (facts included).
fn exec_as(w: &mut World, agent: AgentId, action: Action) -> Applied {
    let key = w.fresh_key();
    w.exec(Principal::Agent(agent), action, Some(key))
}

fn deactivate(w: &mut World, agent: AgentId) {
    let key = w.fresh_key();
    let out = w.exec(Principal::Operator, Action::DeactivateAgent { agent }, Some(key));
    assert!(out.outcome.is_ok(), "deactivation failed: {:?}", out.outcome);
}

fn thread_rec(w: &World, thread: ThreadId) -> Thread {
    w.state.thread(thread).expect("state").expect("thread exists")
}

fn member(w: &World, thread: ThreadId, agent: AgentId) -> Membership {
    w.state.membership(thread, agent).expect("state").expect("membership exists")
}

fn entry(w: &World, thread: ThreadId, seq: EntrySeq) -> Entry {
    w.state.entry(thread, seq).expect("state").expect("entry exists")
}

fn response(w: &World, thread: ThreadId, seq: EntrySeq, responder: AgentId) -> Response {
    w.state.response(thread, seq, responder).expect("state").expect("response exists")
}

fn asg(w: &World, id: AssignmentId) -> Assignment {
    w.state.assignment(id).expect("state").expect("assignment exists")
}

fn agent_rec(w: &World, agent: AgentId) -> Agent {
    w.state.agent(agent).expect("state").expect("agent exists")
}

fn set(agents: &[AgentId]) -> BTreeSet<AgentId> {
    agents.iter().copied().collect()
}

fn post_action(thread: ThreadId, reply_to: Option<EntrySeq>, ask: Option<&[AgentId]>) -> Action {
    Action::Post {
        thread,
        body: PostBody::Content(Content::from("text")),
        reply_to,
        ask: ask.map(set),
        task_ref: None,
        assignment: None,
    }
}

/// Posts and returns (entry, responders, ended_own_response).
fn post_full(
    w: &mut World,
    author: AgentId,
    thread: ThreadId,
    reply_to: Option<EntrySeq>,
    ask: Option<&[AgentId]>,
) -> (EntrySeq, BTreeSet<AgentId>, bool) {
    match w.ok(author, post_action(thread, reply_to, ask)) {
        ActionResult::Posted { entry, responders, ended_own_response, .. } => (entry, responders, ended_own_response),
        other => panic!("unexpected {other:?}"),
    }
}

/// The response obligations in an agent's turn.
fn owed(w: &World, agent: AgentId) -> Vec<ObligationId> {
    w.full_turn(agent).into_iter().filter(|i| i.kind == ObligationKind::Response).map(|i| i.obligation).collect()
}

fn resp_id(thread: ThreadId, entry: EntrySeq, responder: AgentId) -> ObligationId {
    ObligationId::Response { thread, entry, responder }
}

fn read_code<T: std::fmt::Debug>(r: ReadResult<T>) -> Code {
    match r {
        Err(ReadError::Rejected(r)) => r.code,
        other => panic!("expected a rejected read, got {other:?}"),
    }
}

fn timeline(w: &World, agent: AgentId, thread: ThreadId) -> ReadResult<Vec<Entry>> {
    read::timeline(&w.state, agent, thread, None, 0, &w.limits)
}

fn deliver(w: &mut World, agent: AgentId, assignment: AssignmentId) {
    w.ok(agent, Action::DeliverAssignment { assignment, output: Content::from("output") });
}

fn ended_how(r: &Response) -> &ResponseEnd {
    match &r.state {
        ResponseState::Ended { how, .. } => how,
        ResponseState::Pending => panic!("response still pending: {r:?}"),
    }
}

fn outcome(a: &Assignment) -> &AssignmentOutcome {
    match &a.state {
        AssignmentState::Ended { outcome, .. } => outcome,
        other => panic!("assignment not ended: {other:?}"),
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

// --- §6.1 Creation and admission ----------------------------------------------------------------------

/// §6.1 (§6.1.1): any active agent creates an open thread and becomes its governor.
#[test]
fn creator_becomes_governor_of_an_open_thread() {
    let mut w = World::new();
    let g = w.register();
    let out = w.ok(g, Action::CreateThread { subject: Content::from("plan"), grant: None });
    let ActionResult::ThreadCreated { thread, grant: None } = out else { panic!("unexpected {out:?}") };
    let t = thread_rec(&w, thread);
    assert_eq!(t.state, ThreadState::Open);
    assert_eq!(t.creator, g);
    assert_eq!((t.members, t.governors), (1, 1));
    assert!(t.grant.is_none());
    let m = member(&w, thread, g);
    assert_eq!(m.role, Role::Governor);
    assert_eq!(m.via_grant, 0);
    assert_eq!(m.state, MembershipState::Current);
    assert_eq!(agent_rec(&w, g).open_threads, 1);
}

/// §6.1 (§6.1.1, §4.1): a deactivated agent cannot create a thread.
#[test]
fn deactivated_agent_cannot_create_a_thread() {
    let mut w = World::new();
    let x = w.register();
    deactivate(&mut w, x);
    let before = w.state.counters().expect("state").unwrap_or_default().threads;
    let r = w.err(x, Action::CreateThread { subject: Content::from("s"), grant: None });
    assert_eq!(r.code, Code::AgentInactive);
    assert_eq!(w.state.counters().expect("state").unwrap_or_default().threads, before);
}

/// §6.1 (§6.1.3): a grant issued with the default role admits a speaker, who may post.
#[test]
fn default_grant_admits_a_speaker() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let t = create(&mut w, g);
    assert_eq!(Role::default(), Role::Speaker);
    let secret = issue(&mut w, g, t, Role::default());
    match w.ok(b, join(&secret)) {
        ActionResult::Joined { thread, agent, role, existing, .. } => {
            assert_eq!((thread, agent, role, existing), (t, b, Role::Speaker, false));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(member(&w, t, b).role, Role::Speaker);
    w.post(b, t, "hello", None, None);
}

/// §6.1 (§6.1.3): observer and governor grants bind those roles; the admitted governor governs.
#[test]
fn grant_binds_observer_and_governor_roles() {
    let mut w = World::new();
    let g = w.register();
    let o = w.register();
    let h = w.register();
    let t = create(&mut w, g);
    admit(&mut w, g, t, o, Role::Observer);
    admit(&mut w, g, t, h, Role::Governor);
    assert_eq!(member(&w, t, o).role, Role::Observer);
    assert_eq!(member(&w, t, h).role, Role::Governor);
    assert_eq!(thread_rec(&w, t).governors, 2);
    // The admitted governor may issue grants; the observer may not post.
    issue(&mut w, h, t, Role::Speaker);
    assert_eq!(w.err(o, post_action(t, None, None)).code, Code::CannotSpeak);
}

/// §6.1 (§6.1.5, §12.2): issuing a new grant voids the old one; the old secret gets the same
/// answer as a secret that was never issued.
#[test]
fn issuing_a_new_grant_voids_the_old_one() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let t = create(&mut w, g);
    let (first, old) = w.new_grant(Role::Speaker);
    match w.ok(g, Action::IssueGrant { thread: t, grant: first }) {
        ActionResult::GrantIssued { voided_previous, .. } => assert!(!voided_previous),
        other => panic!("unexpected {other:?}"),
    }
    let (second, new) = w.new_grant(Role::Speaker);
    match w.ok(g, Action::IssueGrant { thread: t, grant: second }) {
        ActionResult::GrantIssued { voided_previous, .. } => assert!(voided_previous),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(thread_rec(&w, t).grant.map(|g| g.number), Some(2));
    let with_old = w.err(b, join(&old));
    let never = w.fresh_secret();
    let with_never = w.err(b, join(&never));
    assert_eq!(with_old.code, Code::GrantInvalid);
    assert_eq!(with_old, with_never, "a voided grant must be indistinguishable from an unknown one");
    assert!(w.state.membership(t, b).expect("state").is_none());
    w.ok(b, join(&new));
}

/// §6.1 (§6.1.5): a grant can be voided on its own; afterwards nobody can join with it.
#[test]
fn voiding_a_grant_on_its_own_ends_admission() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let t = create(&mut w, g);
    let secret = issue(&mut w, g, t, Role::Speaker);
    assert_eq!(w.ok(g, Action::VoidGrant { thread: t }), ActionResult::GrantVoided { thread: t });
    assert!(thread_rec(&w, t).grant.is_none());
    assert_eq!(w.err(b, join(&secret)).code, Code::GrantInvalid);
}

/// §6.1 (§6.1.5, L2.7): voiding when no grant is live is rejected as NO_EFFECT and records nothing.
#[test]
fn voiding_without_a_live_grant_has_no_effect() {
    let mut w = World::new();
    let g = w.register();
    let t = create(&mut w, g);
    let out = exec_as(&mut w, g, Action::VoidGrant { thread: t });
    assert_eq!(out.outcome.expect_err("must be rejected").code, Code::NoEffect);
    assert!(out.facts.is_empty());
    issue(&mut w, g, t, Role::Speaker);
    w.ok(g, Action::VoidGrant { thread: t });
    assert_eq!(w.err(g, Action::VoidGrant { thread: t }).code, Code::NoEffect);
}

/// §6.1 (§6.1.2, §6.2.3): only a governor issues or voids grants; a speaker or observer is NOT_GOVERNOR.
#[test]
fn only_a_governor_issues_or_voids_grants() {
    let mut w = World::new();
    let g = w.register();
    let s = w.register();
    let o = w.register();
    let t = w.thread_with(g, &[(s, Role::Speaker), (o, Role::Observer)]);
    let live = thread_rec(&w, t).grant;
    for who in [s, o] {
        let (grant, _) = w.new_grant(Role::Governor);
        assert_eq!(w.err(who, Action::IssueGrant { thread: t, grant }).code, Code::NotGovernor);
        assert_eq!(w.err(who, Action::VoidGrant { thread: t }).code, Code::NotGovernor);
    }
    assert_eq!(thread_rec(&w, t).grant, live, "the live grant is untouched");
}

/// §6.1 (§6.1.2, §9.4): an agent outside the thread cannot issue a grant; it learns only NOT_FOUND.
#[test]
fn non_member_cannot_issue_a_grant() {
    let mut w = World::new();
    let g = w.register();
    let x = w.register();
    let t = create(&mut w, g);
    let (grant, _) = w.new_grant(Role::Governor);
    let known = w.err(x, Action::IssueGrant { thread: t, grant: grant.clone() });
    let unknown = w.err(x, Action::IssueGrant { thread: ThreadId(9_999), grant });
    assert_eq!(known.code, Code::NotFound);
    assert_eq!(known, unknown);
    assert!(thread_rec(&w, t).grant.is_none());
}

/// §6.1 (§6.1.4): joining requires an active agent; the grant stays live for others.
#[test]
fn joining_requires_an_active_agent() {
    let mut w = World::new();
    let g = w.register();
    let x = w.register();
    let b = w.register();
    let t = create(&mut w, g);
    let secret = issue(&mut w, g, t, Role::Speaker);
    deactivate(&mut w, x);
    assert_eq!(w.err(x, join(&secret)).code, Code::AgentInactive);
    assert!(w.state.membership(t, x).expect("state").is_none());
    w.ok(b, join(&secret));
}

/// §6.1 (L2.5): joining again returns the existing membership, records no fact and keeps the role.
#[test]
fn joining_again_returns_the_existing_membership() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let t = create(&mut w, g);
    let first = issue(&mut w, g, t, Role::Speaker);
    let joined_at = match w.ok(b, join(&first)) {
        ActionResult::Joined { joined_at, .. } => joined_at,
        other => panic!("unexpected {other:?}"),
    };
    let before = member(&w, t, b);
    let members_before = thread_rec(&w, t).members;
    // A later grant binds another role; joining with it changes nothing for a current member.
    let governor_grant = issue(&mut w, g, t, Role::Governor);
    let out = exec_as(&mut w, b, join(&governor_grant));
    let receipt = out.outcome.expect("joining again succeeds");
    assert_eq!(
        receipt.result,
        ActionResult::Joined { thread: t, agent: b, role: Role::Speaker, joined_at, existing: true }
    );
    assert_eq!(receipt.seq, None, "a no-effect success names no fact");
    assert!(out.facts.is_empty());
    assert_eq!(member(&w, t, b), before);
    assert_eq!(thread_rec(&w, t).members, members_before);
}

/// §6.2 (§6.2.12): a membership records the number of the grant it came through and when it joined.
#[test]
fn membership_records_its_grant_and_join_time() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let t = create(&mut w, g);
    issue(&mut w, g, t, Role::Speaker);
    let second = issue(&mut w, g, t, Role::Observer);
    let joined_at = match w.ok(b, join(&second)) {
        ActionResult::Joined { joined_at, .. } => joined_at,
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(joined_at, w.now);
    let m = member(&w, t, b);
    assert_eq!(m.via_grant, 2);
    assert_eq!(m.joined_at, joined_at);
    assert_eq!(m.role, Role::Observer);
    assert_eq!(m.generation, 1);
}

/// §6.1 (§6.1.5, L2.2): creating a thread with a grant issues it in the same action.
#[test]
fn create_thread_with_grant_issues_it_in_the_same_action() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let (grant, secret) = w.new_grant(Role::Observer);
    let out = exec_as(&mut w, g, Action::CreateThread { subject: Content::from("s"), grant: Some(grant) });
    let receipt = out.outcome.expect("created");
    let ActionResult::ThreadCreated { thread, grant: Some(gr) } = receipt.result else {
        panic!("unexpected {:?}", receipt.result)
    };
    assert_eq!(gr, GrantReceipt { role: Role::Observer, fingerprint: fingerprint(&secret) });
    let kinds: Vec<&str> = out.facts.iter().map(|f| f.fact.name()).collect();
    assert_eq!(kinds, ["thread_created", "grant_issued"]);
    assert!(out.facts.iter().all(|f| f.seq == out.facts[0].seq), "one command, one seq");
    assert_eq!(thread_rec(&w, thread).grant.map(|g| (g.number, g.role)), Some((1, Role::Observer)));
    match w.ok(b, join(&secret)) {
        ActionResult::Joined { role, .. } => assert_eq!(role, Role::Observer),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(member(&w, thread, b).via_grant, 1);
}

/// §6.1 (§6.1.6, L3.4, L3.5, §12.3): the grant secret never appears in a receipt (only its
/// fingerprint) nor in the state; a replay returns the same bytes and issues nothing new.
#[test]
fn grant_secret_never_appears_in_the_receipt() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let (grant, secret) = w.new_grant(Role::Speaker);
    let out = exec_as(&mut w, g, Action::CreateThread { subject: Content::from("s"), grant: Some(grant) });
    let bytes = out.receipt_bytes().expect("receipt");
    assert!(!contains(&bytes, secret.as_bytes()));
    let receipt = out.outcome.expect("created");
    assert!(!format!("{receipt:?}").contains(&secret));
    let ActionResult::ThreadCreated { thread, .. } = receipt.result else { panic!() };

    let (grant, secret2) = w.new_grant(Role::Speaker);
    let key = w.fresh_key();
    let action = Action::IssueGrant { thread, grant };
    let first = w.exec(Principal::Agent(g), action.clone(), Some(key.clone()));
    let first_bytes = first.receipt_bytes().expect("receipt");
    assert!(!contains(&first_bytes, secret2.as_bytes()));
    match first.outcome.expect("issued").result {
        ActionResult::GrantIssued { grant, .. } => assert_eq!(grant.fingerprint, fingerprint(&secret2)),
        other => panic!("unexpected {other:?}"),
    }
    assert!(!format!("{:?}", w.state.map).contains(&secret2), "only the hash is stored");
    // A retry mints a fresh secret but is the same logical request: the original receipt comes
    // back, and no second grant is issued.
    let (retry_grant, retry_secret) = w.new_grant(Role::Speaker);
    let issued = thread_rec(&w, thread).grants_issued;
    let replay = w.exec(Principal::Agent(g), Action::IssueGrant { thread, grant: retry_grant }, Some(key));
    assert!(replay.replayed);
    assert_eq!(replay.receipt_bytes().expect("receipt"), first_bytes);
    assert_eq!(thread_rec(&w, thread).grants_issued, issued);
    assert_eq!(w.err(b, join(&retry_secret)).code, Code::GrantInvalid);
    w.ok(b, join(&secret2));
}

// --- §6.2 Members and roles -----------------------------------------------------------------------------

/// §6.2 (§6.2.2, §9.2): a member leaves at any time; its membership ends and it can no longer read.
#[test]
fn member_leaves_and_can_no_longer_read() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker)]);
    assert_eq!(agent_rec(&w, b).open_threads, 1);
    assert_eq!(w.ok(b, Action::Leave { thread: t }), ActionResult::Left { thread: t });
    assert!(matches!(member(&w, t, b).state, MembershipState::Ended { reason: MembershipEnd::Left, .. }));
    assert_eq!(thread_rec(&w, t).members, 1);
    assert_eq!(agent_rec(&w, b).open_threads, 0);
    assert_eq!(read_code(timeline(&w, b, t)), Code::NotFound);
    assert_eq!(w.err(b, Action::Leave { thread: t }).code, Code::NotFound);
}

/// §6.2 (§6.2.4): the sole governor of an open thread cannot leave.
#[test]
fn sole_governor_cannot_leave_an_open_thread() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker)]);
    assert_eq!(w.err(g, Action::Leave { thread: t }).code, Code::SoleGovernor);
    assert_eq!(member(&w, t, g).state, MembershipState::Current);
    assert_eq!(thread_rec(&w, t).governors, 1);
}

/// §6.2 (§6.2.4): a sole governor hands over the role, then may leave.
#[test]
fn sole_governor_leaves_after_handing_over() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker)]);
    w.ok(g, Action::ChangeRole { thread: t, member: b, role: Role::Governor });
    assert_eq!(thread_rec(&w, t).governors, 2);
    w.ok(g, Action::Leave { thread: t });
    assert_eq!(thread_rec(&w, t).governors, 1);
    // Now b is the sole governor and is held to the same rule.
    assert_eq!(w.err(b, Action::Leave { thread: t }).code, Code::SoleGovernor);
}

/// §6.2 (§6.2.4): the sole governor cannot demote itself; with a second governor it may.
#[test]
fn sole_governor_cannot_demote_itself() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker)]);
    for role in [Role::Speaker, Role::Observer] {
        assert_eq!(w.err(g, Action::ChangeRole { thread: t, member: g, role }).code, Code::SoleGovernor);
    }
    assert_eq!(member(&w, t, g).role, Role::Governor);
    w.ok(g, Action::ChangeRole { thread: t, member: b, role: Role::Governor });
    w.ok(g, Action::ChangeRole { thread: t, member: g, role: Role::Speaker });
    assert_eq!(thread_rec(&w, t).governors, 1);
    // b is now sole and cannot be demoted by anyone.
    assert_eq!(w.err(b, Action::ChangeRole { thread: t, member: b, role: Role::Observer }).code, Code::SoleGovernor);
}

/// §6.2 (§6.2.3, §6.2.4): a governor may remove another governor; the remaining sole governor is
/// then held to the keep-a-governor rule.
#[test]
fn governor_removes_another_governor_and_becomes_sole() {
    let mut w = World::new();
    let g = w.register();
    let h = w.register();
    let t = w.thread_with(g, &[(h, Role::Governor)]);
    assert_eq!(w.ok(g, Action::Remove { thread: t, member: h }), ActionResult::Removed { thread: t, member: h });
    assert_eq!(thread_rec(&w, t).governors, 1);
    assert_eq!(w.err(g, Action::Leave { thread: t }).code, Code::SoleGovernor);
}

/// §6.2 (§6.2.3, §9.2): a governor removes a member, who can then read nothing of the thread.
#[test]
fn removed_member_can_no_longer_read_or_act() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker)]);
    let e1 = w.post(g, t, "before", None, None);
    let out = exec_as(&mut w, g, Action::Remove { thread: t, member: b });
    assert_eq!(out.outcome.expect("removed").result, ActionResult::Removed { thread: t, member: b });
    assert!(
        matches!(member(&w, t, b).state, MembershipState::Ended { reason: MembershipEnd::Removed { by }, .. } if by == g)
    );
    assert_eq!(read_code(timeline(&w, b, t)), Code::NotFound);
    assert_eq!(read_code(read::read_entry(&w.state, b, t, e1)), Code::NotFound);
    assert_eq!(read_code(read::working_set(&w.state, b, ObjectRef::Thread(t), w.now, &w.limits)), Code::NotFound);
    let on_thread = w.err(b, post_action(t, None, None));
    let on_unknown = w.err(b, post_action(ThreadId(9_999), None, None));
    assert_eq!(on_thread.code, Code::NotFound);
    assert_eq!(on_thread, on_unknown, "a former member learns nothing more than a stranger");
}

/// §6.2 (§6.2.3, §6.2.1): a governor changes roles; the receipt names both roles and the new role
/// takes effect at once.
#[test]
fn governor_changes_a_members_role() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker)]);
    assert_eq!(
        w.ok(g, Action::ChangeRole { thread: t, member: b, role: Role::Observer }),
        ActionResult::RoleChanged { thread: t, member: b, from: Role::Speaker, to: Role::Observer }
    );
    assert_eq!(w.err(b, post_action(t, None, None)).code, Code::CannotSpeak);
    assert_eq!(
        w.ok(g, Action::ChangeRole { thread: t, member: b, role: Role::Governor }),
        ActionResult::RoleChanged { thread: t, member: b, from: Role::Observer, to: Role::Governor }
    );
    assert_eq!(thread_rec(&w, t).governors, 2);
    issue(&mut w, b, t, Role::Speaker);
}

/// §6.2 (§6.2.3): members without the governor role cannot remove members or change roles.
#[test]
fn non_governor_cannot_remove_or_change_roles() {
    let mut w = World::new();
    let g = w.register();
    let s = w.register();
    let c = w.register();
    let o = w.register();
    let t = w.thread_with(g, &[(s, Role::Speaker), (c, Role::Speaker), (o, Role::Observer)]);
    for who in [s, o] {
        assert_eq!(w.err(who, Action::Remove { thread: t, member: c }).code, Code::NotGovernor);
        assert_eq!(
            w.err(who, Action::ChangeRole { thread: t, member: c, role: Role::Observer }).code,
            Code::NotGovernor
        );
        assert_eq!(
            w.err(who, Action::ChangeRole { thread: t, member: who, role: Role::Governor }).code,
            Code::NotGovernor
        );
    }
    assert_eq!(member(&w, t, c).role, Role::Speaker);
    assert_eq!(member(&w, t, c).state, MembershipState::Current);
    assert_eq!(thread_rec(&w, t).governors, 1);
}

/// §6.2 (L2.7): changing a member to the role it already holds is NO_EFFECT and records nothing.
#[test]
fn changing_to_the_same_role_has_no_effect() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker)]);
    let out = exec_as(&mut w, g, Action::ChangeRole { thread: t, member: b, role: Role::Speaker });
    assert_eq!(out.outcome.expect_err("must be rejected").code, Code::NoEffect);
    assert!(out.facts.is_empty());
}

/// §6.2 (§6.2.7, §6.2.5): demotion to observer ends the member's pending responses but leaves its
/// taken assignment as it was; the observer may still deliver it.
#[test]
fn demotion_ends_pending_responses_but_not_assignments_in_progress() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker)]);
    let e1 = w.post(g, t, "question", None, Some(&[b]));
    let a = w.assign(g, t, b, None, None);
    w.ok(b, Action::TakeAssignment { assignment: a });
    let taken = asg(&w, a).state;
    let out = exec_as(&mut w, g, Action::ChangeRole { thread: t, member: b, role: Role::Observer });
    assert!(out.outcome.is_ok());
    assert_eq!(out.facts.len(), 1, "the responses end in the role-change fact");
    assert_eq!(ended_how(&response(&w, t, e1, b)), &ResponseEnd::Demoted);
    assert_eq!(asg(&w, a).state, taken);
    let turn = w.full_turn(b);
    assert_eq!(turn.len(), 1);
    assert_eq!((turn[0].obligation, turn[0].next), (ObligationId::AssignmentDelivery(a), NextStep::Deliver));
    deliver(&mut w, b, a);
    assert!(matches!(asg(&w, a).state, AssignmentState::Delivered { .. }));
}

/// §6.2 (§6.2.8, §6.2.9): leaving ends the member's pending responses and voids every undelivered
/// assignment it took, was addressed or created, all in the one membership-ended fact.
#[test]
fn leaving_ends_responses_and_voids_undelivered_assignments_in_one_fact() {
    let mut w = World::new();
    let g = w.register();
    let l = w.register();
    let t = w.thread_with(g, &[(l, Role::Speaker)]);
    let e1 = w.post(g, t, "question", None, Some(&[l]));
    let took = w.assign(g, t, l, None, None);
    w.ok(l, Action::TakeAssignment { assignment: took });
    let addressed = w.assign(g, t, l, None, None);
    let created_open = w.assign(l, t, g, None, None);
    let created_taken = w.assign(l, t, g, None, None);
    w.ok(g, Action::TakeAssignment { assignment: created_taken });
    let unrelated = w.assign(g, t, g, None, None);

    let out = exec_as(&mut w, l, Action::Leave { thread: t });
    assert!(out.outcome.is_ok());
    assert_eq!(out.facts.len(), 1);
    assert!(
        matches!(out.facts[0].fact, Fact::MembershipEnded { agent, reason: MembershipEnd::Left, .. } if agent == l)
    );

    assert_eq!(ended_how(&response(&w, t, e1, l)), &ResponseEnd::MembershipEnded);
    for a in [took, addressed, created_open, created_taken] {
        assert_eq!(outcome(&asg(&w, a)), &AssignmentOutcome::Voided, "assignment {a:?}");
    }
    assert_eq!(asg(&w, unrelated).state, AssignmentState::Open);
    assert_eq!(thread_rec(&w, t).open_assignments, 1);
    assert!(w.full_turn(l).is_empty());
    assert!(w.full_turn(g).is_empty(), "g's delivery on l's assignment ended with it");
    assert_eq!(w.opportunity_ids(g), vec![OpportunityId::Assignment(unrelated)]);
}

/// §6.2 (§6.2.8, §6.2.9): removal has the same effects as leaving, in the removal fact.
#[test]
fn removal_ends_responses_and_voids_assignments_in_one_fact() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker)]);
    let e1 = w.post(g, t, "question", None, Some(&[b]));
    let a = w.assign(g, t, b, None, None);
    w.ok(b, Action::TakeAssignment { assignment: a });
    let out = exec_as(&mut w, g, Action::Remove { thread: t, member: b });
    assert!(out.outcome.is_ok());
    assert_eq!(out.facts.len(), 1);
    assert_eq!(ended_how(&response(&w, t, e1, b)), &ResponseEnd::MembershipEnded);
    assert_eq!(outcome(&asg(&w, a)), &AssignmentOutcome::Voided);
    assert!(w.full_turn(b).is_empty());
}

/// §6.2 (§6.2.10): a creator who leaves after delivery forfeits judgment; the assignment stays
/// delivered and settles as undecided at its judgment deadline.
#[test]
fn leaving_after_delivery_forfeits_judgment_and_settles_undecided() {
    let mut w = World::new();
    let g = w.register();
    let l = w.register();
    let t = w.thread_with(g, &[(l, Role::Speaker)]);
    let a = w.assign(l, t, g, None, Some(Micros::from_secs(60)));
    w.ok(g, Action::TakeAssignment { assignment: a });
    deliver(&mut w, g, a);
    let AssignmentState::Delivered { judgment_due, .. } = asg(&w, a).state else { panic!("not delivered") };
    assert_eq!(w.full_turn(l)[0].next, NextStep::Judge);

    w.ok(l, Action::Leave { thread: t });
    let after = asg(&w, a);
    assert!(after.judge_forfeited);
    assert!(matches!(after.state, AssignmentState::Delivered { judgment_due: d, .. } if d == judgment_due));
    assert!(w.full_turn(l).is_empty(), "the judgment obligation left with the creator");
    assert!(w.fire_due_timers().is_empty(), "nothing settles before the deadline");

    w.advance(Micros::from_secs(61));
    assert_eq!(w.fire_due_timers(), vec![ObligationId::AssignmentJudgment(a)]);
    assert_eq!(outcome(&asg(&w, a)), &AssignmentOutcome::Undecided);
}

/// §6.2 (§6.2.11, §6.2.12): rejoining is a new membership (new generation, grant and time) and
/// revives nothing: no response, no voided assignment, no right to judge.
#[test]
fn rejoining_is_a_new_membership_that_revives_nothing() {
    let mut w = World::new();
    let g = w.register();
    let l = w.register();
    let t = w.thread_with(g, &[(l, Role::Speaker)]);
    let first = member(&w, t, l);
    let e1 = w.post(g, t, "question", None, Some(&[l]));
    let addressed = w.assign(g, t, l, None, None);
    let created = w.assign(l, t, g, None, None);
    w.ok(g, Action::TakeAssignment { assignment: created });
    deliver(&mut w, g, created);
    w.ok(l, Action::Leave { thread: t });

    let secret = issue(&mut w, g, t, Role::Speaker);
    match w.ok(l, join(&secret)) {
        ActionResult::Joined { existing, .. } => assert!(!existing),
        other => panic!("unexpected {other:?}"),
    }
    let second = member(&w, t, l);
    assert_eq!(second.generation, first.generation + 1);
    assert_eq!(second.via_grant, thread_rec(&w, t).grants_issued);
    assert_ne!(second.via_grant, first.via_grant);
    assert!(second.joined_at > first.joined_at);
    assert_eq!(second.state, MembershipState::Current);

    assert_eq!(w.err(l, Action::AdoptAssignment { assignment: created }).code, Code::JudgmentForfeited);
    assert_eq!(ended_how(&response(&w, t, e1, l)), &ResponseEnd::MembershipEnded);
    assert_eq!(outcome(&asg(&w, addressed)), &AssignmentOutcome::Voided);
    assert!(w.full_turn(l).is_empty());
    assert!(w.opportunity_ids(l).is_empty());
}

// --- §6.3 Entries and responses ---------------------------------------------------------------------

/// §6.3 (§6.3.1, §6.2.1): an observer may not post.
#[test]
fn observer_cannot_post() {
    let mut w = World::new();
    let g = w.register();
    let o = w.register();
    let t = w.thread_with(g, &[(o, Role::Observer)]);
    let r = w.err(o, post_action(t, None, None));
    assert_eq!(r.code, Code::CannotSpeak);
    assert_eq!(thread_rec(&w, t).last_entry, 0);
}

/// §6.3 (§6.3.1, §9.4): a non-member's post gets NOT_FOUND, the same answer as an unknown thread.
#[test]
fn non_member_post_is_not_found() {
    let mut w = World::new();
    let g = w.register();
    let x = w.register();
    let t = create(&mut w, g);
    let r = w.err(x, post_action(t, None, None));
    assert_eq!(r.code, Code::NotFound);
    assert_eq!(r, w.err(x, post_action(ThreadId(9_999), None, None)));
    assert_eq!(thread_rec(&w, t).last_entry, 0);
}

/// §6.3 (§6.3.2): entries get increasing sequence numbers, an author and one pinned version of a
/// new private Memory of the author.
#[test]
fn entries_get_increasing_sequence_numbers_and_pin_one_version() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker)]);
    let e1 = w.post(g, t, "first", None, None);
    let e2 = w.post(b, t, "second", None, None);
    let e3 = w.post(g, t, "third", None, None);
    assert_eq!((e1, e2, e3), (EntrySeq(1), EntrySeq(2), EntrySeq(3)));
    assert_eq!(thread_rec(&w, t).last_entry, 3);
    let e = entry(&w, t, e2);
    assert_eq!(e.author, b);
    assert_eq!(e.pin.version.0, 1);
    let m = w.state.memory(e.pin.memory).expect("state").expect("memory");
    assert_eq!(m.author, b);
    assert!(!m.is_public());
    let view = read::read_entry(&w.state, g, t, e2).expect("member reads");
    assert_eq!(view.content, Some(Content::from("second")));
    let seqs: Vec<EntrySeq> = timeline(&w, g, t).expect("timeline").into_iter().map(|e| e.seq).collect();
    assert_eq!(seqs, vec![e1, e2, e3]);
}

/// §6.3 (§6.3.3, §6.5.8): a reply must name an entry of the same thread, not one of another thread.
#[test]
fn reply_must_name_an_entry_of_the_same_thread() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let here = w.thread_with(g, &[(b, Role::Speaker)]);
    let other = w.thread_with(g, &[(b, Role::Speaker)]);
    w.post(g, here, "only entry here", None, None);
    for text in ["1", "2", "3"] {
        w.post(g, other, text, None, None);
    }
    let r = w.err(b, post_action(here, Some(EntrySeq(3)), None));
    assert_eq!(r.code, Code::InvalidArgument);
    assert_eq!(r.field.as_deref(), Some("reply_to"));
    assert_eq!(thread_rec(&w, here).last_entry, 1);
}

/// §6.3 (§6.3.4): an ask never names the author; the rejection names the offending position.
#[test]
fn ask_must_never_name_the_author() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let c = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker), (c, Role::Speaker)]);
    let ask = [b, c];
    let idx = set(&ask).iter().position(|a| *a == c).expect("in set");
    assert_eq!(idx, 1);
    let r = w.err(c, post_action(t, None, Some(&ask)));
    assert_eq!(r.code, Code::InvalidTarget);
    assert_eq!(r.field, Some(format!("ask[{idx}]")));
}

/// §6.3 (§6.3.4, §6.2.1): an ask names only current members who may speak: not an observer, a
/// stranger or a former member.
#[test]
fn ask_must_name_members_who_may_speak() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let gone = w.register();
    let o = w.register();
    let x = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker), (gone, Role::Speaker), (o, Role::Observer)]);
    w.ok(gone, Action::Leave { thread: t });
    for bad in [o, x, gone] {
        let ask = [b, bad];
        let idx = set(&ask).iter().position(|a| *a == bad).expect("in set");
        let r = w.err(g, post_action(t, None, Some(&ask)));
        assert_eq!(r.code, Code::InvalidTarget, "asking {bad:?}");
        assert_eq!(r.field, Some(format!("ask[{idx}]")));
    }
    assert_eq!(thread_rec(&w, t).last_entry, 0);
}

/// §6.3 (§6.3.4, L4.5, L4.6): an ask larger than the configured limit is LIMIT_EXCEEDED.
#[test]
fn ask_larger_than_the_limit_is_refused() {
    let mut w = World::with_limits(Limits { max_ask: 2, ..Limits::default() });
    let g = w.register();
    let b = w.register();
    let c = w.register();
    let d = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker), (c, Role::Speaker), (d, Role::Speaker)]);
    let r = w.err(g, post_action(t, None, Some(&[b, c, d])));
    assert_eq!(r.code, Code::LimitExceeded);
    assert_eq!(r.field.as_deref(), Some("ask"));
    assert!(owed(&w, b).is_empty());
    let (_, responders, _) = post_full(&mut w, g, t, None, Some(&[b, c]));
    assert_eq!(responders, set(&[b, c]));
}

/// §6.3 rule 1 (§6.3.r1, §6.3.7): a stated ask decides the responders, even in a reply; each owes a
/// response.
#[test]
fn rule1_explicit_ask_decides_responders() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let c = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker), (c, Role::Speaker)]);
    let (e1, _, _) = post_full(&mut w, b, t, None, None);
    // A reply to b's entry that asks c: rule 1 wins over rule 2.
    let (e2, responders, _) = post_full(&mut w, g, t, Some(e1), Some(&[c]));
    assert_eq!(responders, set(&[c]));
    assert_eq!(entry(&w, t, e2).responders, set(&[c]));
    assert_eq!(owed(&w, c), vec![resp_id(t, e2, c)]);
    assert!(owed(&w, b).is_empty());
}

/// §6.3 rule 1 (§6.3.r1): an empty ask means nobody, even where rule 3 would name the other speaker.
#[test]
fn rule1_empty_ask_means_nobody() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker)]);
    let (e1, responders, _) = post_full(&mut w, g, t, None, Some(&[]));
    assert!(responders.is_empty());
    assert_eq!(entry(&w, t, e1).ask, Some(BTreeSet::new()));
    assert!(owed(&w, b).is_empty());
}

/// §6.3 rule 2 (§6.3.r2): a reply to another member's entry makes that entry's author the responder.
#[test]
fn rule2_reply_makes_the_replied_author_respond() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let c = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker), (c, Role::Speaker)]);
    let (e1, r1, _) = post_full(&mut w, b, t, None, None);
    assert!(r1.is_empty(), "three speakers: a broadcast");
    let (e2, responders, _) = post_full(&mut w, c, t, Some(e1), None);
    assert_eq!(responders, set(&[b]));
    assert_eq!(owed(&w, b), vec![resp_id(t, e2, b)]);
    assert!(owed(&w, g).is_empty());
}

/// §6.3 rule 2 (§6.3.r2, §6.2.7): a reply to an author who was demoted names nobody, and does not
/// fall through to rule 3 even though exactly two speakers remain.
#[test]
fn rule2_reply_to_a_demoted_author_names_nobody() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let c = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker), (c, Role::Speaker)]);
    let (e1, _, _) = post_full(&mut w, c, t, None, None);
    w.ok(g, Action::ChangeRole { thread: t, member: c, role: Role::Observer });
    let (_, responders, _) = post_full(&mut w, b, t, Some(e1), None);
    assert!(responders.is_empty(), "rule 2 applies and names nobody; rule 3 must not name g");
    assert!(owed(&w, g).is_empty());
    assert!(owed(&w, c).is_empty());
}

/// §6.3 rule 2 (§6.3.r2): a reply to an author who left names nobody.
#[test]
fn rule2_reply_to_an_author_who_left_names_nobody() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let c = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker), (c, Role::Speaker)]);
    let (e1, _, _) = post_full(&mut w, c, t, None, None);
    w.ok(c, Action::Leave { thread: t });
    let (_, responders, _) = post_full(&mut w, b, t, Some(e1), None);
    assert!(responders.is_empty());
    assert!(owed(&w, g).is_empty());
}

/// §6.3 rules 2–3 (§6.3.r2, §6.3.r3): rule 2 covers only replies to another member's entry; a
/// reply to one's own entry falls through to rule 3.
#[test]
fn reply_to_own_entry_falls_through_to_rule3() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker)]);
    let (e1, _, _) = post_full(&mut w, g, t, None, None);
    let (e2, responders, ended_own) = post_full(&mut w, g, t, Some(e1), None);
    assert_eq!(responders, set(&[b]));
    assert!(!ended_own);
    assert_eq!(owed(&w, b), vec![resp_id(t, e1, b), resp_id(t, e2, b)]);
}

/// §6.3 rule 3 (§6.3.r3, §6.2.1): with exactly two members who may speak, the other one responds;
/// observers do not count and a governor speaks.
#[test]
fn rule3_two_speakers_the_other_responds() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let o = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker), (o, Role::Observer)]);
    let (_, r1, _) = post_full(&mut w, g, t, None, None);
    assert_eq!(r1, set(&[b]));
    let (_, r2, _) = post_full(&mut w, b, t, None, None);
    assert_eq!(r2, set(&[g]));
    assert!(owed(&w, o).is_empty());
}

/// §6.3 rule 4 (§6.3.r4): with three or more speakers and no ask or reply, nobody responds.
#[test]
fn rule4_otherwise_a_broadcast_names_nobody() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let c = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker), (c, Role::Speaker)]);
    let (e1, responders, _) = post_full(&mut w, g, t, None, None);
    assert!(responders.is_empty());
    assert!(entry(&w, t, e1).responders.is_empty());
    assert!(owed(&w, b).is_empty() && owed(&w, c).is_empty());
}

/// §6.3 (§6.3.6): responders are fixed at post time; a member who joins later owes nothing.
#[test]
fn responders_are_not_widened_by_later_arrivals() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let c = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker)]);
    let (e1, responders, _) = post_full(&mut w, g, t, None, None);
    assert_eq!(responders, set(&[b]));
    admit(&mut w, g, t, c, Role::Speaker);
    assert_eq!(entry(&w, t, e1).responders, set(&[b]));
    assert!(w.state.response(t, e1, c).expect("state").is_none());
    assert!(owed(&w, c).is_empty());
    assert_eq!(owed(&w, b), vec![resp_id(t, e1, b)]);
}

/// §6.3 (§6.3.8): replying ends the replier's own pending response in the same action; whom the
/// new entry asks is decided separately.
#[test]
fn replying_ends_own_response_and_asks_separately() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let c = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker), (c, Role::Speaker)]);
    let (e1, _, _) = post_full(&mut w, g, t, None, Some(&[b]));
    let out = exec_as(&mut w, b, post_action(t, Some(e1), Some(&[c])));
    let ActionResult::Posted { entry: e2, responders, ended_own_response, .. } = out.outcome.expect("posted").result
    else {
        panic!("not a post")
    };
    assert!(ended_own_response);
    assert_eq!(responders, set(&[c]));
    assert_eq!(ended_how(&response(&w, t, e1, b)), &ResponseEnd::Replied { by_entry: e2 });
    assert!(owed(&w, b).is_empty());
    assert!(owed(&w, g).is_empty(), "the ask named c, so rule 2 does not apply");
    assert_eq!(owed(&w, c), vec![resp_id(t, e2, c)]);
}

/// §6.3 (§6.3.9): replying without a pending response is allowed and ends nothing.
#[test]
fn replying_without_a_pending_response_is_allowed() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let c = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker), (c, Role::Speaker)]);
    let (e1, _, _) = post_full(&mut w, g, t, None, Some(&[b]));
    let (e2, responders, ended_own) = post_full(&mut w, c, t, Some(e1), None);
    assert!(!ended_own);
    assert_eq!(responders, set(&[g]));
    assert_eq!(owed(&w, b), vec![resp_id(t, e1, b)], "b's response is untouched");
    assert_eq!(entry(&w, t, e2).reply_to, Some(e1));
}

/// §6.3 (§6.3.10): handling ends a pending response without posting, keeping the note with the ending.
#[test]
fn handle_ends_a_pending_response_without_posting() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker)]);
    let (e1, _, _) = post_full(&mut w, g, t, None, None);
    let out = exec_as(&mut w, b, Action::Handle { thread: t, entry: e1, note: Some(Content::from("seen, no action")) });
    assert_eq!(out.outcome.expect("handled").result, ActionResult::Handled { thread: t, entry: e1 });
    assert_eq!(out.facts.len(), 1);
    assert_eq!(thread_rec(&w, t).last_entry, 1, "no entry is posted");
    assert_eq!(
        ended_how(&response(&w, t, e1, b)),
        &ResponseEnd::Handled { note: Some(Content::from("seen, no action")) }
    );
    assert!(owed(&w, b).is_empty());
    // Without a note is fine too.
    let (e2, _, _) = post_full(&mut w, g, t, None, None);
    w.ok(b, Action::Handle { thread: t, entry: e2, note: None });
    assert_eq!(ended_how(&response(&w, t, e2, b)), &ResponseEnd::Handled { note: None });
}

/// §6.3 (§6.3.10): a handle note must be one line.
#[test]
fn handle_note_must_be_one_line() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker)]);
    let (e1, _, _) = post_full(&mut w, g, t, None, None);
    let r = w.err(b, Action::Handle { thread: t, entry: e1, note: Some(Content::from("line one\nline two")) });
    assert_eq!(r.code, Code::InvalidArgument);
    assert_eq!(r.field.as_deref(), Some("note"));
    assert_eq!(response(&w, t, e1, b).state, ResponseState::Pending);
}

/// §6.3 (§6.3.11): the handle note is readable only by the entry's author and the responder.
#[test]
fn handle_note_is_readable_only_by_author_and_responder() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let c = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker), (c, Role::Speaker)]);
    let (e1, _, _) = post_full(&mut w, g, t, None, Some(&[b]));
    let note = Content::from("private reason");
    w.ok(b, Action::Handle { thread: t, entry: e1, note: Some(note.clone()) });
    for reader in [g, b] {
        let r = read::read_response(&w.state, reader, t, e1, b).expect("readable");
        assert_eq!(ended_how(&r), &ResponseEnd::Handled { note: Some(note.clone()) }, "reader {reader:?}");
    }
    let third = read::read_response(&w.state, c, t, e1, b).expect("the structure is readable");
    assert_eq!(ended_how(&third), &ResponseEnd::Handled { note: None });
}

/// §6.3 (§6.3.10): handling needs a pending response: none owed, or already ended, is NO_PENDING_RESPONSE.
#[test]
fn handle_without_a_pending_response_is_refused() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let c = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker), (c, Role::Speaker)]);
    let (e1, _, _) = post_full(&mut w, g, t, None, Some(&[b]));
    assert_eq!(w.err(c, Action::Handle { thread: t, entry: e1, note: None }).code, Code::NoPendingResponse);
    w.ok(b, Action::Handle { thread: t, entry: e1, note: None });
    let again = exec_as(&mut w, b, Action::Handle { thread: t, entry: e1, note: None });
    assert_eq!(again.outcome.expect_err("must be rejected").code, Code::NoPendingResponse);
    assert!(again.facts.is_empty());
}

/// §6.3 (§6.3.12): retraction ends all pending responses of the entry and leaves given ones as they were.
#[test]
fn retract_ends_pending_responses_but_not_given_ones() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let c = w.register();
    let d = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker), (c, Role::Speaker), (d, Role::Speaker)]);
    let (e1, _, _) = post_full(&mut w, g, t, None, Some(&[b, c, d]));
    let (e2, _, _) = post_full(&mut w, b, t, Some(e1), Some(&[]));
    assert_eq!(
        w.ok(g, Action::Retract { thread: t, entry: e1 }),
        ActionResult::Retracted { thread: t, entry: e1, responses_ended: 2 }
    );
    assert_eq!(ended_how(&response(&w, t, e1, b)), &ResponseEnd::Replied { by_entry: e2 });
    assert_eq!(ended_how(&response(&w, t, e1, c)), &ResponseEnd::Retracted);
    assert_eq!(ended_how(&response(&w, t, e1, d)), &ResponseEnd::Retracted);
    assert!(owed(&w, c).is_empty() && owed(&w, d).is_empty());
}

/// §6.3 (§6.3.12): only the entry's author may retract; another member gets NOT_AUTHOR.
#[test]
fn only_the_author_may_retract() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let c = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker), (c, Role::Speaker)]);
    let (e1, _, _) = post_full(&mut w, b, t, None, Some(&[c]));
    assert_eq!(w.err(g, Action::Retract { thread: t, entry: e1 }).code, Code::NotAuthor);
    assert_eq!(w.err(c, Action::Retract { thread: t, entry: e1 }).code, Code::NotAuthor);
    assert_eq!(response(&w, t, e1, c).state, ResponseState::Pending);
}

/// §6.3 (§6.3.12): the author may retract only while still a member.
#[test]
fn former_author_cannot_retract() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let c = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker), (c, Role::Speaker)]);
    let (e1, _, _) = post_full(&mut w, b, t, None, Some(&[c]));
    w.ok(b, Action::Leave { thread: t });
    assert_eq!(w.err(b, Action::Retract { thread: t, entry: e1 }).code, Code::NotFound);
    assert_eq!(
        response(&w, t, e1, c).state,
        ResponseState::Pending,
        "others' responses do not end when the author leaves"
    );
}

/// §6.3 (§6.3.12, L2.7): retracting an entry with nothing pending is NO_EFFECT.
#[test]
fn retract_with_nothing_pending_has_no_effect() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let c = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker), (c, Role::Speaker)]);
    let (broadcast, _, _) = post_full(&mut w, g, t, None, None);
    let out = exec_as(&mut w, g, Action::Retract { thread: t, entry: broadcast });
    assert_eq!(out.outcome.expect_err("must be rejected").code, Code::NoEffect);
    assert!(out.facts.is_empty());
    let (asked, _, _) = post_full(&mut w, g, t, None, Some(&[b]));
    w.ok(b, Action::Handle { thread: t, entry: asked, note: None });
    assert_eq!(w.err(g, Action::Retract { thread: t, entry: asked }).code, Code::NoEffect);
}

/// §6.3 (§6.3.13): reading an entry, the timeline or the working set ends no response.
#[test]
fn reading_does_not_end_a_response() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker)]);
    let (e1, _, _) = post_full(&mut w, g, t, None, None);
    read::read_entry(&w.state, b, t, e1).expect("read");
    timeline(&w, b, t).expect("timeline");
    read::working_set(&w.state, b, ObjectRef::Thread(t), w.now, &w.limits).expect("working set");
    read::read_response(&w.state, b, t, e1, b).expect("response");
    assert_eq!(response(&w, t, e1, b).state, ResponseState::Pending);
    assert_eq!(owed(&w, b), vec![resp_id(t, e1, b)]);
}

// --- §6.5 Closing ------------------------------------------------------------------------------------

/// §6.5 (§6.5.1): only a governor may close; a speaker or observer is NOT_GOVERNOR, a stranger NOT_FOUND.
#[test]
fn only_a_governor_may_close() {
    let mut w = World::new();
    let g = w.register();
    let s = w.register();
    let o = w.register();
    let x = w.register();
    let t = w.thread_with(g, &[(s, Role::Speaker), (o, Role::Observer)]);
    assert_eq!(w.err(s, Action::CloseThread { thread: t }).code, Code::NotGovernor);
    assert_eq!(w.err(o, Action::CloseThread { thread: t }).code, Code::NotGovernor);
    assert_eq!(w.err(x, Action::CloseThread { thread: t }).code, Code::NotFound);
    assert_eq!(thread_rec(&w, t).state, ThreadState::Open);
    assert_eq!(w.ok(g, Action::CloseThread { thread: t }), ActionResult::ThreadClosed { thread: t });
    assert!(matches!(thread_rec(&w, t).state, ThreadState::Closed { .. }));
}

/// §6.5 (§6.5.3, §6.5.4): closing ends every pending response and voids every undelivered
/// assignment, all in the one closing fact.
#[test]
fn closing_ends_responses_and_voids_undelivered_assignments_in_one_fact() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let c = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker), (c, Role::Speaker)]);
    let (e1, _, _) = post_full(&mut w, g, t, None, Some(&[b, c]));
    let (e2, _, _) = post_full(&mut w, b, t, None, Some(&[g]));
    let untaken = w.assign(g, t, b, None, None);
    let taken = w.assign(g, t, c, None, None);
    w.ok(c, Action::TakeAssignment { assignment: taken });

    let out = exec_as(&mut w, g, Action::CloseThread { thread: t });
    assert!(out.outcome.is_ok());
    assert_eq!(out.facts.len(), 1);
    assert!(matches!(out.facts[0].fact, Fact::ThreadClosed { by: Some(by), .. } if by == g));
    for (seq, who) in [(e1, b), (e1, c), (e2, g)] {
        assert_eq!(ended_how(&response(&w, t, seq, who)), &ResponseEnd::ThreadClosed);
    }
    assert_eq!(outcome(&asg(&w, untaken)), &AssignmentOutcome::Voided);
    assert_eq!(outcome(&asg(&w, taken)), &AssignmentOutcome::Voided);
    assert_eq!(thread_rec(&w, t).open_assignments, 0);
    for who in [g, b, c] {
        assert!(w.full_turn(who).is_empty(), "{who:?} owes nothing after closing");
    }
    assert!(w.opportunity_ids(b).is_empty());
}

/// §6.5 (§6.5.5): delivered assignments keep their judgment deadlines and remain judgeable by
/// their creators after closing; unjudged ones settle as undecided at the deadline.
#[test]
fn closing_keeps_delivered_assignments_judgeable() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker)]);
    let judged = w.assign(b, t, g, None, Some(Micros::from_secs(60)));
    let left = w.assign(b, t, g, None, Some(Micros::from_secs(60)));
    for a in [judged, left] {
        w.ok(g, Action::TakeAssignment { assignment: a });
        deliver(&mut w, g, a);
    }
    let before = asg(&w, left).state;
    w.ok(g, Action::CloseThread { thread: t });
    assert_eq!(asg(&w, left).state, before, "the judgment deadline is kept");
    let turn = w.full_turn(b);
    assert_eq!(turn.len(), 2);
    assert!(turn.iter().all(|i| i.next == NextStep::Judge));
    assert_eq!(
        w.ok(b, Action::AdoptAssignment { assignment: judged }),
        ActionResult::AssignmentAdopted { assignment: judged }
    );
    assert_eq!(outcome(&asg(&w, judged)), &AssignmentOutcome::Adopted);
    w.advance(Micros::from_secs(61));
    assert_eq!(w.fire_due_timers(), vec![ObligationId::AssignmentJudgment(left)]);
    assert_eq!(outcome(&asg(&w, left)), &AssignmentOutcome::Undecided);
}

/// §6.5 (§6.5.6, §12.2): closing voids the admission grant; joining with it is GRANT_INVALID.
#[test]
fn closing_voids_admission() {
    let mut w = World::new();
    let g = w.register();
    let x = w.register();
    let t = create(&mut w, g);
    let secret = issue(&mut w, g, t, Role::Speaker);
    w.ok(g, Action::CloseThread { thread: t });
    assert!(thread_rec(&w, t).grant.is_none());
    let r = w.err(x, join(&secret));
    assert_eq!(r.code, Code::GrantInvalid);
    assert!(w.state.membership(t, x).expect("state").is_none());
}

/// §6.5 (§6.5.7, §9.1): after closing, memberships remain: members still read, nobody posts or
/// handles, and members (the sole governor included) may leave.
#[test]
fn closed_thread_is_readable_and_members_may_leave() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let o = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker), (o, Role::Observer)]);
    let (e1, _, _) = post_full(&mut w, g, t, None, None);
    w.ok(g, Action::CloseThread { thread: t });
    for who in [g, b, o] {
        assert_eq!(member(&w, t, who).state, MembershipState::Current);
        assert_eq!(timeline(&w, who, t).expect("members still read").len(), 1);
    }
    assert_eq!(read::read_entry(&w.state, o, t, e1).expect("entry").content, Some(Content::from("text")));
    assert_eq!(w.err(b, post_action(t, Some(e1), None)).code, Code::ThreadClosed);
    assert_eq!(w.err(b, Action::Handle { thread: t, entry: e1, note: None }).code, Code::ThreadClosed);
    w.ok(b, Action::Leave { thread: t });
    assert_eq!(read_code(timeline(&w, b, t)), Code::NotFound);
    w.ok(g, Action::Leave { thread: t });
    assert_eq!(thread_rec(&w, t).members, 1);
    assert_eq!(thread_rec(&w, t).last_entry, 1);
}

/// §6.5 (§6.5.2): closing is terminal: closing again is THREAD_CLOSED and nothing reopens or
/// re-admits it.
#[test]
fn closing_is_terminal() {
    let mut w = World::new();
    let g = w.register();
    let b = w.register();
    let t = w.thread_with(g, &[(b, Role::Speaker)]);
    w.ok(g, Action::CloseThread { thread: t });
    let closed = thread_rec(&w, t).state;
    assert_eq!(w.err(g, Action::CloseThread { thread: t }).code, Code::ThreadClosed);
    let (grant, _) = w.new_grant(Role::Speaker);
    assert_eq!(w.err(g, Action::IssueGrant { thread: t, grant }).code, Code::ThreadClosed);
    assert_eq!(w.err(g, Action::VoidGrant { thread: t }).code, Code::ThreadClosed);
    assert_eq!(w.err(g, Action::ChangeRole { thread: t, member: b, role: Role::Observer }).code, Code::ThreadClosed);
    assert_eq!(w.err(g, Action::Remove { thread: t, member: b }).code, Code::ThreadClosed);
    assert_eq!(thread_rec(&w, t).state, closed);
}

// --- Capacity (L4) -----------------------------------------------------------------------------------

/// L4 (L4.5, L4.6): a join past the members-per-thread limit is LIMIT_EXCEEDED with no effect; the
/// grant stays usable once there is room.
#[test]
fn join_past_the_members_limit_is_refused() {
    let mut w = World::with_limits(Limits { max_members_per_thread: 2, ..Limits::default() });
    let g = w.register();
    let b = w.register();
    let c = w.register();
    let t = create(&mut w, g);
    let secret = issue(&mut w, g, t, Role::Speaker);
    w.ok(b, join(&secret));
    let out = exec_as(&mut w, c, join(&secret));
    assert_eq!(out.outcome.expect_err("must be rejected").code, Code::LimitExceeded);
    assert!(out.facts.is_empty());
    assert!(w.state.membership(t, c).expect("state").is_none());
    assert_eq!(thread_rec(&w, t).members, 2);
    w.ok(b, Action::Leave { thread: t });
    w.ok(c, join(&secret));
    assert_eq!(thread_rec(&w, t).members, 2);
}

/// L4 (L4.5, L4.6): the open-threads-per-agent limit bounds creating and joining; a closed thread
/// no longer counts.
#[test]
fn open_threads_per_agent_limit_bounds_create_and_join() {
    let mut w = World::with_limits(Limits { max_open_threads_per_agent: 2, ..Limits::default() });
    let a = w.register();
    let b = w.register();
    let t1 = create(&mut w, a);
    create(&mut w, a);
    let r = w.err(a, Action::CreateThread { subject: Content::from("third"), grant: None });
    assert_eq!(r.code, Code::LimitExceeded);
    let other = create(&mut w, b);
    let secret = issue(&mut w, b, other, Role::Speaker);
    assert_eq!(w.err(a, join(&secret)).code, Code::LimitExceeded);
    assert!(w.state.membership(other, a).expect("state").is_none());
    assert_eq!(agent_rec(&w, a).open_threads, 2);
    w.ok(a, Action::CloseThread { thread: t1 });
    assert_eq!(agent_rec(&w, a).open_threads, 1);
    w.ok(a, join(&secret));
    assert_eq!(
        w.err(a, Action::CreateThread { subject: Content::from("fourth"), grant: None }).code,
        Code::LimitExceeded
    );
}
