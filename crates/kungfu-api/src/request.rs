//! Wire to domain: every request of `kungfu.v1` turned into the domain types the core takes. This is
//! the one place where wire input is checked for form (ids, keys, required fields, enum values);
//! whether the request is allowed is the core's decision, never this module's. Each function
//! reports the first malformed field it meets, in the order the fields are declared, as a
//! [`FieldError`] with the field's full path.
//!
//! Writes give a [`KeyedAction`]: the validated idempotency key and the [`Action`], which the server
//! wraps in a `kungfu_core::Command` with the authenticated principal and its own timestamp. Writes
//! that mint a secret (registration, grants) take the server-generated [`SecretMaterial`], because
//! the core has no randomness and the secret itself must never enter the log (§12). Reads give the
//! arguments of the matching function of `kungfu_core::read` (or `kungfu_core::coord::read`).

use crate::field_error::FieldError;
use crate::pb;
use kungfu_core::action::{Addressees, ArtifactInput, BodyInput, LabeledBody, PatchOp, RankGoal};
use kungfu_core::coord::read::{BodyItem, MailFilter};
use kungfu_core::model::{Audience, Editors, Eligibility, ItemId, Judge, MissingJudgment, NoteKind, Pin};
use kungfu_core::read::Cursor;
use kungfu_core::secret::{fingerprint, hash_secret};
use kungfu_core::{Action, ContractDraft, NewAssignment, NewGrant, PostBody};
use kungfu_types::ids::ParseIdError;
use kungfu_types::{
    AgentId, AssignmentId, Content, EngagementId, EntrySeq, ExternalRef, Fingerprint, IdempotencyKey, Labels, MemoryId,
    Micros, ObjectRef, RecordId, Role, Scope, SecretHash, Taint, TaskId, ThreadId, Timestamp, Version,
};
use std::collections::BTreeSet;
use std::fmt::Display;
use std::str::FromStr;

/// A write request in domain terms. L3: the principal, the action kind and this key identify one
/// logical request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyedAction {
    pub key: IdempotencyKey,
    pub action: Action,
}

/// What the core may know of a one-time secret the server generated: its hash and a non-secret
/// fingerprint (§12). The secret itself goes only into the first successful response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretMaterial {
    pub hash: SecretHash,
    pub fingerprint: Fingerprint,
}

impl SecretMaterial {
    /// The material of a freshly generated secret.
    pub fn of(secret: &str) -> SecretMaterial {
        SecretMaterial { hash: hash_secret(secret), fingerprint: fingerprint(secret) }
    }

    fn grant(&self, role: Role) -> NewGrant {
        NewGrant { role, hash: self.hash, fingerprint: self.fingerprint.clone() }
    }
}

// --- Field parsers ---------------------------------------------------------------------------------

fn idempotency_key(text: &str) -> Result<IdempotencyKey, FieldError> {
    IdempotencyKey::new(text).map_err(|why| FieldError::new("idempotency_key", why))
}

/// Validates the key first, then builds the action: a request with a bad key is refused for its
/// key whatever else is wrong with it.
fn keyed(key: &str, action: impl FnOnce() -> Result<Action, FieldError>) -> Result<KeyedAction, FieldError> {
    let key = idempotency_key(key)?;
    Ok(KeyedAction { key, action: action()? })
}

/// Parses an id in its canonical text form. `th_07` or `th_+7` would name `th_7` too; they are
/// refused so that every id has exactly one spelling on the wire.
fn id<T>(field: &str, text: &str) -> Result<T, FieldError>
where
    T: FromStr<Err = ParseIdError> + Display,
{
    if text.is_empty() {
        return Err(FieldError::missing(field));
    }
    let parsed: T = text.parse().map_err(|e: ParseIdError| FieldError::new(field, e.to_string()))?;
    let canonical = parsed.to_string();
    if canonical != text {
        return Err(FieldError::new(field, format!("is not in canonical form; write {canonical}")));
    }
    Ok(parsed)
}

/// An optional id: absent is None, present must be a valid id (an empty string is not absent).
fn opt_id<T>(field: &str, text: &Option<String>) -> Result<Option<T>, FieldError>
where
    T: FromStr<Err = ParseIdError> + Display,
{
    match text {
        None => Ok(None),
        Some(t) if t.is_empty() => Err(FieldError::new(field, "must be an id when present, not empty")),
        Some(t) => id(field, t).map(Some),
    }
}

/// A set of agents sent as a list. Duplicates are refused: the list is meant as a set, and a
/// repeated name is almost always a client bug worth hearing about.
fn agent_set(field: &str, texts: &[String]) -> Result<BTreeSet<AgentId>, FieldError> {
    let mut set = BTreeSet::new();
    for (i, text) in texts.iter().enumerate() {
        let path = format!("{field}[{i}]");
        let agent: AgentId = id(&path, text)?;
        if !set.insert(agent) {
            return Err(FieldError::new(path, "repeats an agent named earlier in the list"));
        }
    }
    Ok(set)
}

/// A required participant content field (L6). Absent is refused; present and empty is content.
fn content(field: &str, c: &Option<pb::Content>) -> Result<Content, FieldError> {
    c.as_ref().map(|c| Content::new(c.body.clone())).ok_or_else(|| FieldError::missing(field))
}

/// [`content`] of a request taken by value: the bytes move into the action, uncopied.
fn take_content(field: &str, c: Option<pb::Content>) -> Result<Content, FieldError> {
    c.map(|c| Content::new(c.body)).ok_or_else(|| FieldError::missing(field))
}

fn opt_content(c: &Option<pb::Content>) -> Option<Content> {
    c.as_ref().map(|c| Content::new(c.body.clone()))
}

fn entry_seq(field: &str, seq: u64) -> Result<EntrySeq, FieldError> {
    if seq == 0 {
        return Err(FieldError::new(field, "entry numbers start at 1"));
    }
    Ok(EntrySeq(seq))
}

fn version(field: &str, v: u32) -> Result<Version, FieldError> {
    if v == 0 {
        return Err(FieldError::new(field, "versions start at 1"));
    }
    Ok(Version(v))
}

fn pin(field: &str, p: &pb::MemoryPin) -> Result<Pin, FieldError> {
    Ok(Pin {
        memory: id(&format!("{field}.memory"), &p.memory)?,
        version: version(&format!("{field}.version"), p.version)?,
    })
}

/// A wire role; `ROLE_UNSPECIFIED` is None so each caller applies its own default or refusal.
fn role(field: &str, value: i32) -> Result<Option<Role>, FieldError> {
    match pb::Role::try_from(value) {
        Ok(pb::Role::Unspecified) => Ok(None),
        Ok(pb::Role::Observer) => Ok(Some(Role::Observer)),
        Ok(pb::Role::Speaker) => Ok(Some(Role::Speaker)),
        Ok(pb::Role::Governor) => Ok(Some(Role::Governor)),
        Err(_) => Err(FieldError::new(field, format!("{value} is not a known role"))),
    }
}

/// §6.1: a grant binds a role, speaker by default.
fn grant_role(field: &str, value: i32) -> Result<Role, FieldError> {
    Ok(role(field, value)?.unwrap_or_default())
}

fn timestamp(field: &str, unix_micros: i64) -> Result<Timestamp, FieldError> {
    u64::try_from(unix_micros)
        .map(Timestamp::from_micros)
        .map_err(|_| FieldError::new(field, "must not be before the Unix epoch"))
}

fn page_size(n: u32) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

fn cursor(text: &str) -> Result<Option<Cursor>, FieldError> {
    if text.is_empty() {
        return Ok(None);
    }
    Cursor::from_hex(text).map(Some).map_err(|_| FieldError::new("cursor", "is not a cursor returned by this read"))
}

/// Any object with a working set, by the prefix of its id (`ag_`, `mem_`, `th_`, `task_`).
fn object_ref(field: &str, text: &str) -> Result<ObjectRef, FieldError> {
    fn canonical<T: FromStr + Display>(text: &str) -> Option<T> {
        text.parse::<T>().ok().filter(|id| id.to_string() == text)
    }
    if text.is_empty() {
        return Err(FieldError::missing(field));
    }
    if let Some(a) = canonical::<AgentId>(text) {
        return Ok(ObjectRef::Agent(a));
    }
    if let Some(m) = canonical::<MemoryId>(text) {
        return Ok(ObjectRef::Memory(m));
    }
    if let Some(t) = canonical::<ThreadId>(text) {
        return Ok(ObjectRef::Thread(t));
    }
    if let Some(t) = canonical::<TaskId>(text) {
        return Ok(ObjectRef::Task(t));
    }
    Err(FieldError::new(field, "expected an agent, Memory, thread or Task id (ag_<n>, mem_<n>, th_<n>, task_<n>)"))
}

// --- §4 Agent --------------------------------------------------------------------------------------

/// Registration. `agent_key` is the material of the bearer key the server generated for the new
/// agent; the key itself goes only into the first response.
pub fn register_action(req: pb::RegisterRequest, agent_key: &SecretMaterial) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || {
        Ok(Action::RegisterAgent { key_hash: agent_key.hash, key_fingerprint: agent_key.fingerprint.clone() })
    })
}

pub fn deactivate_agent_action(req: pb::DeactivateAgentRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || Ok(Action::DeactivateAgent { agent: id("agent", &req.agent)? }))
}

// --- Wake targets (issue #35) ---------------------------------------------------------------------

/// A wake target. `secret` is the 32 random bytes the door made for it (the core keeps them whole:
/// any leader signs with them). The operator's policy on where the URL may point is the node's,
/// checked before this; the core checks its form.
pub fn set_wake_target_action(
    req: pb::SetWakeTargetRequest,
    secret: kungfu_types::WakeSecret,
) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || {
        if req.url.is_empty() {
            return Err(FieldError::missing("url"));
        }
        let mut filter = kungfu_core::model::WakeFilter::default();
        for (i, k) in req.kinds.iter().enumerate() {
            let kind = match pb::ObligationKind::try_from(*k) {
                Ok(pb::ObligationKind::Response) => kungfu_core::model::ObligationKind::Response,
                Ok(pb::ObligationKind::Delivery) => kungfu_core::model::ObligationKind::Delivery,
                Ok(pb::ObligationKind::Judgment) => kungfu_core::model::ObligationKind::Judgment,
                _ => {
                    return Err(FieldError::new(
                        &format!("kinds[{i}]"),
                        "expected OBLIGATION_KIND_RESPONSE, OBLIGATION_KIND_DELIVERY or OBLIGATION_KIND_JUDGMENT",
                    ));
                }
            };
            filter.kinds.insert(kind);
        }
        for (i, o) in req.objects.iter().enumerate() {
            filter.objects.insert(object_ref(&format!("objects[{i}]"), o)?);
        }
        Ok(Action::SetWakeTarget { url: req.url, secret, filter })
    })
}

pub fn remove_wake_target_action(req: pb::RemoveWakeTargetRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || Ok(Action::RemoveWakeTarget { target: id("target", &req.target)? }))
}

// --- §5 Memory -------------------------------------------------------------------------------------

pub fn create_memory_action(req: pb::CreateMemoryRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || Ok(Action::CreateMemory { content: take_content("content", req.content)? }))
}

pub fn update_memory_action(req: pb::UpdateMemoryRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || {
        Ok(Action::UpdateMemory { memory: id("memory", &req.memory)?, content: take_content("content", req.content)? })
    })
}

pub fn publish_memory_action(req: pb::PublishMemoryRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || Ok(Action::PublishMemory { memory: id("memory", &req.memory)? }))
}

pub fn unpublish_memory_action(req: pb::UnpublishMemoryRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || Ok(Action::UnpublishMemory { memory: id("memory", &req.memory)? }))
}

pub fn withdraw_memory_action(req: pb::WithdrawMemoryRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || Ok(Action::WithdrawMemory { memory: id("memory", &req.memory)? }))
}

// --- §6.1, §6.2 Thread and membership --------------------------------------------------------------

/// Thread creation. `grant_secret` is used only when the request asks for a first grant; the
/// server generates it either way so this function alone decides whether it is needed.
pub fn create_thread_action(
    req: pb::CreateThreadRequest,
    grant_secret: &SecretMaterial,
) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || {
        let subject = content("subject", &req.subject)?;
        let grant = match &req.grant {
            Some(g) => Some(grant_secret.grant(grant_role("grant.role", g.role)?)),
            None => None,
        };
        Ok(Action::CreateThread { subject, grant })
    })
}

pub fn issue_grant_action(
    req: pb::IssueGrantRequest,
    grant_secret: &SecretMaterial,
) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || {
        let thread = id("thread", &req.thread)?;
        Ok(Action::IssueGrant { thread, grant: grant_secret.grant(grant_role("role", req.role)?) })
    })
}

pub fn void_grant_action(req: pb::VoidGrantRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || Ok(Action::VoidGrant { thread: id("thread", &req.thread)? }))
}

/// Joining presents the grant's bearer secret; only its hash enters the core.
pub fn join_action(req: pb::JoinRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || {
        if req.grant_secret.is_empty() {
            return Err(FieldError::missing("grant_secret"));
        }
        Ok(Action::Join { grant_hash: hash_secret(&req.grant_secret) })
    })
}

pub fn leave_action(req: pb::LeaveRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || Ok(Action::Leave { thread: id("thread", &req.thread)? }))
}

pub fn remove_member_action(req: pb::RemoveMemberRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || {
        Ok(Action::Remove { thread: id("thread", &req.thread)?, member: id("member", &req.member)? })
    })
}

pub fn change_role_action(req: pb::ChangeRoleRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || {
        let thread = id("thread", &req.thread)?;
        let member = id("member", &req.member)?;
        let role = role("role", req.role)?.ok_or_else(|| FieldError::missing("role"))?;
        Ok(Action::ChangeRole { thread, member, role })
    })
}

// --- §6.3 Entries and responses, §6.4 assignments created with an entry ----------------------------

pub fn post_action(req: pb::PostRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || {
        let thread = id("thread", &req.thread)?;
        let body = match req.body.and_then(|b| b.kind) {
            None => return Err(FieldError::new("body", "is required: a pin or new content")),
            Some(pb::post_body::Kind::Pin(p)) => PostBody::Pin(pin("body.pin", &p)?),
            Some(pb::post_body::Kind::Content(c)) => PostBody::Content(Content::new(c.body)),
        };
        let reply_to = req.reply_to.map(|seq| entry_seq("reply_to", seq)).transpose()?;
        // §6.3 rule 1: an absent ask is "not stated"; a present, empty one asks nobody.
        let ask = req.ask.as_ref().map(|a| agent_set("ask.agents", &a.agents)).transpose()?;
        let task_ref = opt_id("task_ref", &req.task_ref)?;
        let assignment = req.assignment.as_ref().map(new_assignment).transpose()?;
        Ok(Action::Post { thread, body, reply_to, ask, task_ref, assignment })
    })
}

/// Windows pass through unchecked: whether a window is within bounds is configuration the core
/// holds (`Limits::min_window`, `max_window`), and it refuses out-of-range ones naming the field.
fn new_assignment(a: &pb::NewAssignment) -> Result<NewAssignment, FieldError> {
    Ok(NewAssignment {
        addressee: id("assignment.addressee", &a.addressee)?,
        criteria: content("assignment.criteria", &a.criteria)?,
        output_structure: opt_content(&a.output_structure),
        delivery_window: a.delivery_window_micros.map(Micros),
        judgment_window: a.judgment_window_micros.map(Micros),
    })
}

pub fn handle_action(req: pb::HandleRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || {
        Ok(Action::Handle {
            thread: id("thread", &req.thread)?,
            entry: entry_seq("entry", req.entry)?,
            note: opt_content(&req.note),
        })
    })
}

pub fn retract_action(req: pb::RetractRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || {
        Ok(Action::Retract { thread: id("thread", &req.thread)?, entry: entry_seq("entry", req.entry)? })
    })
}

pub fn close_thread_action(req: pb::CloseThreadRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || Ok(Action::CloseThread { thread: id("thread", &req.thread)? }))
}

// --- §6.4 Assignments ------------------------------------------------------------------------------

pub fn take_assignment_action(req: pb::TakeAssignmentRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || Ok(Action::TakeAssignment { assignment: id("assignment", &req.assignment)? }))
}

pub fn deliver_assignment_action(req: pb::DeliverAssignmentRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || {
        Ok(Action::DeliverAssignment {
            assignment: id("assignment", &req.assignment)?,
            output: content("output", &req.output)?,
        })
    })
}

pub fn adopt_assignment_action(req: pb::AdoptAssignmentRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || Ok(Action::AdoptAssignment { assignment: id("assignment", &req.assignment)? }))
}

pub fn reject_assignment_action(req: pb::RejectAssignmentRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || {
        Ok(Action::RejectAssignment {
            assignment: id("assignment", &req.assignment)?,
            reason: content("reason", &req.reason)?,
        })
    })
}

pub fn drop_assignment_action(req: pb::DropAssignmentRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || Ok(Action::DropAssignment { assignment: id("assignment", &req.assignment)? }))
}

pub fn void_assignment_action(req: pb::VoidAssignmentRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || Ok(Action::VoidAssignment { assignment: id("assignment", &req.assignment)? }))
}

// --- §7 Task ---------------------------------------------------------------------------------------

pub fn create_task_action(req: pb::CreateTaskRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || {
        let audience = audience(&req.audience)?;
        Ok(Action::CreateTask { audience, contract: contract_draft(&req.contract)? })
    })
}

pub fn revise_contract_action(req: pb::ReviseContractRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || {
        let task = id("task", &req.task)?;
        Ok(Action::ReviseContract { task, contract: contract_draft(&req.contract)? })
    })
}

/// §7.2: the audience must be stated; an open Task by omission would offer work to everyone.
fn audience(a: &Option<pb::Audience>) -> Result<Audience, FieldError> {
    match a.as_ref().and_then(|a| a.kind.as_ref()) {
        None => Err(FieldError::new("audience", "is required: open or restricted")),
        Some(pb::audience::Kind::Open(_)) => Ok(Audience::Open),
        Some(pb::audience::Kind::Restricted(r)) => {
            Ok(Audience::Restricted(agent_set("audience.restricted.agents", &r.agents)?))
        }
    }
}

fn missing_judgment(value: i32) -> Result<MissingJudgment, FieldError> {
    match pb::MissingJudgment::try_from(value) {
        // §7.1: "undecided if not stated".
        Ok(pb::MissingJudgment::Unspecified | pb::MissingJudgment::Undecided) => Ok(MissingJudgment::Undecided),
        Ok(pb::MissingJudgment::Adopted) => Ok(MissingJudgment::Adopted),
        Err(_) => Err(FieldError::new("contract.on_missing_judgment", format!("{value} is not a known result"))),
    }
}

fn contract_draft(d: &Option<pb::ContractDraft>) -> Result<ContractDraft, FieldError> {
    let d = d.as_ref().ok_or_else(|| FieldError::missing("contract"))?;
    let requirements = content("contract.requirements", &d.requirements)?;
    let inputs = d
        .inputs
        .iter()
        .enumerate()
        .map(|(i, p)| pin(&format!("contract.inputs[{i}]"), p))
        .collect::<Result<Vec<Pin>, FieldError>>()?;
    let on_missing_judgment = missing_judgment(d.on_missing_judgment)?;
    let acceptance = content("contract.acceptance", &d.acceptance)?;
    let judge = opt_id("contract.judge", &d.judge)?.map_or(Judge::Author, Judge::Agent);
    let eligibility = match &d.eligibility {
        None => Eligibility::default(),
        Some(e) => Eligibility {
            registered_before: e
                .registered_before_unix_micros
                .map(|t| timestamp("contract.eligibility.registered_before_unix_micros", t))
                .transpose()?,
            excluded: agent_set("contract.eligibility.excluded", &e.excluded)?,
        },
    };
    Ok(ContractDraft {
        requirements,
        output_structure: opt_content(&d.output_structure),
        inputs,
        references: opt_content(&d.references),
        delivery_window: d.delivery_window_micros.map(Micros),
        judgment_window: d.judgment_window_micros.map(Micros),
        on_missing_judgment,
        acceptance,
        judge,
        eligibility,
        max_adoptions: d.max_adoptions,
    })
}

pub fn pause_task_action(req: pb::PauseTaskRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || Ok(Action::PauseTask { task: id("task", &req.task)? }))
}

pub fn resume_task_action(req: pb::ResumeTaskRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || Ok(Action::ResumeTask { task: id("task", &req.task)? }))
}

pub fn take_task_action(req: pb::TakeTaskRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || Ok(Action::TakeTask { task: id("task", &req.task)? }))
}

pub fn deliver_task_action(req: pb::DeliverTaskRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || {
        Ok(Action::DeliverTask {
            task: id("task", &req.task)?,
            output: content("output", &req.output)?,
            take: req.take,
        })
    })
}

pub fn drop_engagement_action(req: pb::DropEngagementRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || Ok(Action::DropEngagement { engagement: id("engagement", &req.engagement)? }))
}

pub fn adopt_engagement_action(req: pb::AdoptEngagementRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || Ok(Action::AdoptEngagement { engagement: id("engagement", &req.engagement)? }))
}

pub fn reject_engagement_action(req: pb::RejectEngagementRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || {
        Ok(Action::RejectEngagement {
            engagement: id("engagement", &req.engagement)?,
            reason: content("reason", &req.reason)?,
        })
    })
}

// --- Coordination (COORDINATION §2.5, §3.3, §4.3) ---------------------------------------------------

/// A required taint. `TAINT_UNSPECIFIED` is refused: labels are the author's explicit statement, and
/// a default here would label content the author never looked at.
fn taint(field: &str, value: i32) -> Result<Taint, FieldError> {
    match pb::Taint::try_from(value) {
        Ok(pb::Taint::Unspecified) => Err(FieldError::new(field, "is required: trusted, tainted or quarantined")),
        Ok(pb::Taint::Trusted) => Ok(Taint::Trusted),
        Ok(pb::Taint::Tainted) => Ok(Taint::Tainted),
        Ok(pb::Taint::Quarantined) => Ok(Taint::Quarantined),
        Err(_) => Err(FieldError::new(field, format!("{value} is not a known taint"))),
    }
}

/// A required scope; `SCOPE_UNSPECIFIED` is refused, as for [`taint`].
fn scope(field: &str, value: i32) -> Result<Scope, FieldError> {
    match pb::Scope::try_from(value) {
        Ok(pb::Scope::Unspecified) => Err(FieldError::new(field, "is required: agent, fleet, tenant or public")),
        Ok(pb::Scope::Agent) => Ok(Scope::Agent),
        Ok(pb::Scope::Fleet) => Ok(Scope::Fleet),
        Ok(pb::Scope::Tenant) => Ok(Scope::Tenant),
        Ok(pb::Scope::Public) => Ok(Scope::Public),
        Err(_) => Err(FieldError::new(field, format!("{value} is not a known scope"))),
    }
}

/// Required labels (COORDINATION §7.1): present, with both fields specified.
fn labels(field: &str, l: &Option<pb::Labels>) -> Result<Labels, FieldError> {
    let l = l.as_ref().ok_or_else(|| FieldError::missing(field))?;
    Ok(Labels { taint: taint(&format!("{field}.taint"), l.taint)?, scope: scope(&format!("{field}.scope"), l.scope)? })
}

/// What a coordination entry pins: an existing version, or new content with its labels.
fn labeled_body(field: &str, b: &Option<pb::LabeledBody>) -> Result<LabeledBody, FieldError> {
    match b.as_ref().and_then(|b| b.kind.as_ref()) {
        None => Err(FieldError::new(field, "is required: a pin or new labeled content")),
        Some(pb::labeled_body::Kind::Pin(p)) => Ok(LabeledBody::Pin(pin(&format!("{field}.pin"), p)?)),
        Some(pb::labeled_body::Kind::Content(c)) => {
            let path = format!("{field}.content");
            Ok(LabeledBody::Content {
                content: content(&format!("{path}.content"), &c.content)?,
                labels: labels(&format!("{path}.labels"), &c.labels)?,
            })
        }
    }
}

/// COORDINATION §3.3: whom a `Send` asks. Absent asks nobody; a `SendTo` that names none of the
/// three (a client that forgot to choose, or one that chose an option this server does not know) is
/// refused rather than read as nobody. An empty `agents` list passes through: the core refuses it
/// (`to.agents`), so every door gives the same answer.
fn addressees(to: &Option<pb::SendTo>) -> Result<Addressees, FieldError> {
    let Some(to) = to else {
        return Ok(Addressees::Nobody);
    };
    match &to.kind {
        None => Err(FieldError::new("to", "names none of nobody, agents or all_speakers; leave it out to ask nobody")),
        Some(pb::send_to::Kind::Nobody(_)) => Ok(Addressees::Nobody),
        Some(pb::send_to::Kind::Agents(a)) => Ok(Addressees::Agents(agent_set("to.agents.agents", &a.agents)?)),
        Some(pb::send_to::Kind::AllSpeakers(_)) => Ok(Addressees::AllSpeakers),
    }
}

pub fn write_labeled_action(req: pb::WriteLabeledRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || {
        Ok(Action::WriteLabeled {
            memory: opt_id("memory", &req.memory)?,
            content: content("content", &req.content)?,
            labels: labels("labels", &req.labels)?,
        })
    })
}

/// Whether the scope is wider than the pinned version's is the core's decision (it knows the
/// version's labels); here the scope need only be a scope.
pub fn widen_scope_action(req: pb::WidenScopeRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || {
        let p = req.pin.as_ref().ok_or_else(|| FieldError::missing("pin"))?;
        Ok(Action::WidenScope { pin: pin("pin", p)?, scope: scope("scope", req.scope)? })
    })
}

/// `reply_to_latest` without `reply_to` is the core's refusal (field `reply_to_latest`), like every
/// other rule about how fields combine.
pub fn send_action(req: pb::SendRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || {
        Ok(Action::Send {
            thread: id("thread", &req.thread)?,
            body: labeled_body("body", &req.body)?,
            to: addressees(&req.to)?,
            reply_to: req.reply_to.map(|seq| entry_seq("reply_to", seq)).transpose()?,
            reply_to_latest: req.reply_to_latest,
        })
    })
}

/// Goals keep the order they were sent in, so the core's refusals (`goals[i].member`, a repeated
/// member, the floor on `goals[i].body`) name positions the client wrote; the core ranks them.
/// Windows pass through for the core to bound, as in [`post_action`].
pub fn scatter_action(req: pb::ScatterRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || {
        let thread = id("thread", &req.thread)?;
        let header = labeled_body("header", &req.header)?;
        let goals = req
            .goals
            .iter()
            .enumerate()
            .map(|(i, g)| {
                Ok(RankGoal {
                    member: id(&format!("goals[{i}].member"), &g.member)?,
                    body: labeled_body(&format!("goals[{i}].body"), &g.body)?,
                })
            })
            .collect::<Result<Vec<RankGoal>, FieldError>>()?;
        Ok(Action::Scatter {
            thread,
            header,
            goals,
            criteria: content("criteria", &req.criteria)?,
            output_structure: opt_content(&req.output_structure),
            delivery_window: req.delivery_window_micros.map(Micros),
            judgment_window: req.judgment_window_micros.map(Micros),
        })
    })
}

// --- The shared record (COORDINATION §5.3, §5.4) ----------------------------------------------------

/// An external reference. Its tokens (store, digests) are checked by the core, which names the field
/// (`….external.digest`), so every door gives the same answer; an empty certificate is none.
fn external_ref(field: &str, e: &pb::ExternalRef) -> Result<ExternalRef, FieldError> {
    Ok(ExternalRef {
        store: e.store.clone(),
        digest: e.digest.clone(),
        bytes: e.bytes,
        labels: labels(&format!("{field}.labels"), &e.labels)?,
        deletion_certificate: (!e.deletion_certificate.is_empty()).then(|| e.deletion_certificate.clone()),
    })
}

fn body_input(field: &str, b: Option<&pb::RecordBodyInput>) -> Result<BodyInput, FieldError> {
    match b.and_then(|b| b.kind.as_ref()) {
        None => Err(FieldError::new(field, "is required: a pin, new labeled content or an external reference")),
        Some(pb::record_body_input::Kind::Pin(p)) => Ok(BodyInput::Pin(pin(&format!("{field}.pin"), p)?)),
        Some(pb::record_body_input::Kind::Content(c)) => {
            let path = format!("{field}.content");
            Ok(BodyInput::Content {
                content: content(&format!("{path}.content"), &c.content)?,
                labels: labels(&format!("{path}.labels"), &c.labels)?,
            })
        }
        Some(pb::record_body_input::Kind::External(e)) => {
            Ok(BodyInput::External(external_ref(&format!("{field}.external"), e)?))
        }
    }
}

fn artifact_input(field: &str, r: &Option<pb::RecordBodyRef>) -> Result<ArtifactInput, FieldError> {
    match r.as_ref().and_then(|r| r.kind.as_ref()) {
        None => Err(FieldError::new(field, "is required: a pin or an external reference")),
        Some(pb::record_body_ref::Kind::Pin(p)) => Ok(ArtifactInput::Pin(pin(&format!("{field}.pin"), p)?)),
        Some(pb::record_body_ref::Kind::External(e)) => {
            Ok(ArtifactInput::External(external_ref(&format!("{field}.external"), e)?))
        }
    }
}

/// Item ids and media types are structure the core checks (their charsets), naming the field.
fn patch_op(field: &str, op: &pb::PatchOp) -> Result<PatchOp, FieldError> {
    use pb::patch_op::Op;
    Ok(match op.op.as_ref() {
        None => {
            return Err(FieldError::new(
                field,
                "names no op: one of replace_title, replace_state, replace_body, replace_decision_state, \
                 append_note, append_artifact, append_decision",
            ));
        }
        Some(Op::ReplaceTitle(c)) => PatchOp::ReplaceTitle(Content::new(c.body.clone())),
        Some(Op::ReplaceState(c)) => PatchOp::ReplaceState(Content::new(c.body.clone())),
        Some(Op::ReplaceBody(b)) => PatchOp::ReplaceBody(body_input(&format!("{field}.replace_body"), Some(b))?),
        Some(Op::ReplaceDecisionState(d)) => PatchOp::ReplaceDecisionState {
            decision: ItemId(d.decision_id.clone()),
            state: content(&format!("{field}.replace_decision_state.state"), &d.state)?,
        },
        Some(Op::AppendNote(n)) => {
            let f = format!("{field}.append_note");
            PatchOp::AppendNote {
                note_id: ItemId(n.note_id.clone()),
                kind: note_kind(&format!("{f}.kind"), n.kind)?,
                body: body_input(&format!("{f}.body"), n.body.as_ref())?,
            }
        }
        Some(Op::AppendArtifact(a)) => PatchOp::AppendArtifact {
            artifact_id: ItemId(a.artifact_id.clone()),
            reference: artifact_input(&format!("{field}.append_artifact.reference"), &a.reference)?,
            media_type: a.media_type.clone(),
        },
        Some(Op::AppendDecision(d)) => {
            let f = format!("{field}.append_decision");
            PatchOp::AppendDecision {
                decision_id: ItemId(d.decision_id.clone()),
                state: content(&format!("{f}.state"), &d.state)?,
                reason: content(&format!("{f}.reason"), &d.reason)?,
            }
        }
    })
}

fn note_kind(field: &str, value: i32) -> Result<NoteKind, FieldError> {
    match pb::NoteKind::try_from(value) {
        Ok(pb::NoteKind::Unspecified) => Err(FieldError::new(field, "is required: comment or progress")),
        Ok(pb::NoteKind::Comment) => Ok(NoteKind::Comment),
        Ok(pb::NoteKind::Progress) => Ok(NoteKind::Progress),
        Err(_) => Err(FieldError::new(field, format!("{value} is not a known note kind"))),
    }
}

fn editors(field: &str, value: i32) -> Result<Editors, FieldError> {
    match pb::RecordEditors::try_from(value) {
        Ok(pb::RecordEditors::Unspecified) => Err(FieldError::new(field, "is required: speakers or governors")),
        Ok(pb::RecordEditors::Speakers) => Ok(Editors::Speakers),
        Ok(pb::RecordEditors::Governors) => Ok(Editors::Governors),
        Err(_) => Err(FieldError::new(field, format!("{value} is not a known editors setting"))),
    }
}

/// Whether the scope may hold a record (at least fleet) is the core's decision, as is every limit.
pub fn create_record_action(req: pb::CreateRecordRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || {
        Ok(Action::CreateRecord {
            thread: id("thread", &req.thread)?,
            title: content("title", &req.title)?,
            state: content("state", &req.state)?,
            body: body_input("body", req.body.as_ref())?,
            scope: scope("scope", req.scope)?,
            editors: editors("editors", req.editors)?,
            message: labeled_body("message", &req.message)?,
            ask: req.ask.as_ref().map(|a| agent_set("ask.agents", &a.agents)).transpose()?,
        })
    })
}

/// Ops keep the order they were sent in, so the core's refusals (`ops[i]…`) name positions the
/// client wrote. `base_rev` 0 passes through for the core to refuse with the record's range.
pub fn patch_record_action(req: pb::PatchRecordRequest) -> Result<KeyedAction, FieldError> {
    keyed(&req.idempotency_key, || {
        let record = id("record", &req.record)?;
        let ops = req
            .ops
            .iter()
            .enumerate()
            .map(|(i, op)| patch_op(&format!("ops[{i}]"), op))
            .collect::<Result<Vec<PatchOp>, FieldError>>()?;
        Ok(Action::PatchRecord {
            record,
            base_rev: req.base_rev,
            ops,
            message: labeled_body("message", &req.message)?,
            ask: req.ask.as_ref().map(|a| agent_set("ask.agents", &a.agents)).transpose()?,
        })
    })
}

// --- Reads -----------------------------------------------------------------------------------------

/// The arguments of `read::read_memory`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryQuery {
    pub memory: MemoryId,
    /// None: the current version.
    pub version: Option<Version>,
}

pub fn get_memory_query(req: &pb::GetMemoryRequest) -> Result<MemoryQuery, FieldError> {
    Ok(MemoryQuery {
        memory: id("memory", &req.memory)?,
        version: req.version.map(|v| version("version", v)).transpose()?,
    })
}

/// The arguments of `read::timeline`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimelineQuery {
    pub thread: ThreadId,
    /// None: from the first entry.
    pub after: Option<EntrySeq>,
    /// 0: the configured default (`Limits::page_size` caps and defaults it).
    pub page_size: usize,
}

pub fn timeline_query(req: &pb::TimelineRequest) -> Result<TimelineQuery, FieldError> {
    Ok(TimelineQuery {
        thread: id("thread", &req.thread)?,
        after: (req.after > 0).then_some(EntrySeq(req.after)),
        page_size: page_size(req.page_size),
    })
}

/// One entry of one thread: the arguments of `read::read_entry` and `read::read_referenced_task`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryQuery {
    pub thread: ThreadId,
    pub entry: EntrySeq,
}

pub fn get_entry_query(req: &pb::GetEntryRequest) -> Result<EntryQuery, FieldError> {
    Ok(EntryQuery { thread: id("thread", &req.thread)?, entry: entry_seq("entry", req.entry)? })
}

pub fn get_referenced_task_query(req: &pb::GetReferencedTaskRequest) -> Result<EntryQuery, FieldError> {
    Ok(EntryQuery { thread: id("thread", &req.thread)?, entry: entry_seq("entry", req.entry)? })
}

/// The arguments of `read::read_response`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseQuery {
    pub thread: ThreadId,
    pub entry: EntrySeq,
    pub responder: AgentId,
}

pub fn get_response_query(req: &pb::GetResponseRequest) -> Result<ResponseQuery, FieldError> {
    Ok(ResponseQuery {
        thread: id("thread", &req.thread)?,
        entry: entry_seq("entry", req.entry)?,
        responder: id("responder", &req.responder)?,
    })
}

/// The argument of `read::read_assignment`.
pub fn get_assignment_query(req: &pb::GetAssignmentRequest) -> Result<AssignmentId, FieldError> {
    id("assignment", &req.assignment)
}

/// The arguments of `read::read_task`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskQuery {
    pub task: TaskId,
    /// None: the current contract version.
    pub version: Option<Version>,
}

pub fn get_task_query(req: &pb::GetTaskRequest) -> Result<TaskQuery, FieldError> {
    Ok(TaskQuery { task: id("task", &req.task)?, version: req.version.map(|v| version("version", v)).transpose()? })
}

/// The argument of `read::read_engagement`.
pub fn get_engagement_query(req: &pb::GetEngagementRequest) -> Result<EngagementId, FieldError> {
    id("engagement", &req.engagement)
}

/// The arguments of `read::read_engagement_input`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngagementInputQuery {
    pub engagement: EngagementId,
    /// The position in the bound contract's inputs, from 0.
    pub index: usize,
}

pub fn get_engagement_input_query(req: &pb::GetEngagementInputRequest) -> Result<EngagementInputQuery, FieldError> {
    Ok(EngagementInputQuery {
        engagement: id("engagement", &req.engagement)?,
        index: usize::try_from(req.index).unwrap_or(usize::MAX),
    })
}

/// The arguments of the paginated reads `read::turn` and `read::opportunities`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageQuery {
    /// None: the first page.
    pub cursor: Option<Cursor>,
    /// 0: the configured default.
    pub page_size: usize,
}

pub fn turn_query(req: &pb::GetTurnRequest) -> Result<PageQuery, FieldError> {
    Ok(PageQuery { cursor: cursor(&req.cursor)?, page_size: page_size(req.page_size) })
}

pub fn opportunities_query(req: &pb::GetOpportunitiesRequest) -> Result<PageQuery, FieldError> {
    Ok(PageQuery { cursor: cursor(&req.cursor)?, page_size: page_size(req.page_size) })
}

/// The object argument of `read::working_set`.
pub fn working_set_query(req: &pb::GetWorkingSetRequest) -> Result<ObjectRef, FieldError> {
    object_ref("object", &req.object)
}

/// The arguments of `coord::read::mailbox` (COORDINATION §3.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MailboxQuery {
    pub thread: ThreadId,
    /// None: from the first entry (the wire's 0).
    pub after: Option<EntrySeq>,
    pub filter: MailFilter,
    /// 0: the configured default (`Limits::page_size` caps and defaults it).
    pub page_size: usize,
}

pub fn mailbox_query(req: &pb::GetMailboxRequest) -> Result<MailboxQuery, FieldError> {
    let thread = id("thread", &req.thread)?;
    let filter = match pb::MailboxFilter::try_from(req.filter) {
        Ok(pb::MailboxFilter::Unspecified | pb::MailboxFilter::All) => MailFilter::All,
        Ok(pb::MailboxFilter::AskedMe) => MailFilter::AskedMe,
        Err(_) => return Err(FieldError::new("filter", format!("{} is not a known filter", req.filter))),
    };
    Ok(MailboxQuery {
        thread,
        after: (req.after > 0).then_some(EntrySeq(req.after)),
        filter,
        page_size: page_size(req.page_size),
    })
}

/// The arguments of `coord::read::collective` (COORDINATION §4.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CollectiveQuery {
    pub thread: ThreadId,
    pub header: EntrySeq,
    pub include_outputs: bool,
}

pub fn collective_query(req: &pb::GetCollectiveRequest) -> Result<CollectiveQuery, FieldError> {
    Ok(CollectiveQuery {
        thread: id("thread", &req.thread)?,
        header: entry_seq("header", req.header)?,
        include_outputs: req.include_outputs,
    })
}

/// The arguments of `coord::read::barrier` (COORDINATION §4.7): one entry of one thread.
pub fn barrier_query(req: &pb::GetBarrierRequest) -> Result<EntryQuery, FieldError> {
    Ok(EntryQuery { thread: id("thread", &req.thread)?, entry: entry_seq("entry", req.entry)? })
}

/// An audience: unspecified is fleet, the audience that shows everything (COORDINATION §5.7).
fn audience_scope(field: &str, value: i32) -> Result<Scope, FieldError> {
    if value == pb::Scope::Unspecified as i32 { Ok(Scope::Fleet) } else { scope(field, value) }
}

/// The arguments of `coord::read::record` (COORDINATION §5.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordQuery {
    pub record: RecordId,
    /// None: the current rev.
    pub rev: Option<u32>,
    pub audience: Scope,
}

pub fn record_query(req: &pb::GetRecordRequest) -> Result<RecordQuery, FieldError> {
    Ok(RecordQuery {
        record: id("record", &req.record)?,
        rev: req.rev,
        audience: audience_scope("audience", req.audience)?,
    })
}

/// The arguments of `coord::read::record_events` (COORDINATION §5.8), and of `WatchRecord`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordEventsQuery {
    pub record: RecordId,
    pub after_rev: u32,
    pub audience: Scope,
    /// 0: the configured default (`Limits::page_size` caps and defaults it).
    pub page_size: usize,
}

pub fn record_events_query(req: &pb::GetRecordEventsRequest) -> Result<RecordEventsQuery, FieldError> {
    Ok(RecordEventsQuery {
        record: id("record", &req.record)?,
        after_rev: req.after_rev,
        audience: audience_scope("audience", req.audience)?,
        page_size: page_size(req.page_size),
    })
}

pub fn watch_record_query(req: &pb::WatchRecordRequest) -> Result<RecordEventsQuery, FieldError> {
    Ok(RecordEventsQuery {
        record: id("record", &req.record)?,
        after_rev: req.after_rev,
        audience: audience_scope("audience", req.audience)?,
        page_size: page_size(req.page_size),
    })
}

/// The arguments of `coord::read::record_body` (COORDINATION §5.7).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordBodyQuery {
    pub record: RecordId,
    pub item: BodyItem,
    pub rev: Option<u32>,
}

pub fn record_body_query(req: &pb::GetRecordBodyRequest) -> Result<RecordBodyQuery, FieldError> {
    use pb::get_record_body_request::Item;
    let record = id("record", &req.record)?;
    let item = match &req.item {
        None => return Err(FieldError::new("item", "is required: body, note_id or artifact_id")),
        Some(Item::Body(_)) => BodyItem::Body,
        Some(Item::NoteId(n)) => BodyItem::Note(ItemId(n.clone())),
        Some(Item::ArtifactId(a)) => BodyItem::Artifact(ItemId(a.clone())),
    };
    Ok(RecordBodyQuery { record, item, rev: req.rev })
}
