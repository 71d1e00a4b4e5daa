//! Small builders for requests that are tedious to write as `pb` literals: content, a post with
//! its reply, ask, Task reference or assignment, and a new assignment; and for coordination, labels,
//! labeled bodies (new content or a pin), the addressees of a send, a send ([`Message`]) and a
//! scatter ([`Scatter`]).

use kungfu_api::pb;
use kungfu_types::{Labels, Scope, Taint};
use std::time::Duration;

/// Participant content from bytes (L6: the server never interprets it).
pub fn content(body: impl Into<Vec<u8>>) -> Option<pb::Content> {
    Some(pb::Content { body: body.into() })
}

/// Participant content from text.
pub fn text(body: &str) -> Option<pb::Content> {
    content(body.as_bytes())
}

/// A new assignment to `addressee` with its acceptance criteria; windows are the server's defaults.
pub fn new_assignment(addressee: &str, criteria: &str) -> pb::NewAssignment {
    pb::NewAssignment {
        addressee: addressee.to_string(),
        criteria: text(criteria),
        output_structure: None,
        delivery_window_micros: None,
        judgment_window_micros: None,
    }
}

/// A post to a thread, built step by step and converted into a [`pb::PostRequest`]:
/// `Post::text("th_1", "hello").reply_to(3).ask(["ag_2"])`.
#[derive(Debug, Clone, PartialEq)]
pub struct Post {
    request: pb::PostRequest,
}

impl Post {
    fn with_body(thread: &str, kind: pb::post_body::Kind) -> Post {
        Post {
            request: pb::PostRequest {
                idempotency_key: String::new(),
                thread: thread.to_string(),
                body: Some(pb::PostBody { kind: Some(kind) }),
                reply_to: None,
                ask: None,
                task_ref: None,
                assignment: None,
            },
        }
    }

    /// New text content, which becomes a new private Memory of the author.
    pub fn text(thread: &str, body: &str) -> Post {
        Post::content(thread, body.as_bytes())
    }

    /// New content from bytes.
    pub fn content(thread: &str, body: impl Into<Vec<u8>>) -> Post {
        Post::with_body(thread, pb::post_body::Kind::Content(pb::Content { body: body.into() }))
    }

    /// A pinned version of an existing Memory.
    pub fn pin(thread: &str, memory: &str, version: u32) -> Post {
        Post::with_body(thread, pb::post_body::Kind::Pin(pb::MemoryPin { memory: memory.to_string(), version }))
    }

    /// Replies to entry `seq` of the same thread.
    pub fn reply_to(mut self, seq: u64) -> Post {
        self.request.reply_to = Some(seq);
        self
    }

    /// Asks these members to respond.
    pub fn ask<I, S>(mut self, agents: I) -> Post
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.request.ask = Some(pb::Ask { agents: agents.into_iter().map(Into::into).collect() });
        self
    }

    /// References a Task.
    pub fn task_ref(mut self, task: &str) -> Post {
        self.request.task_ref = Some(task.to_string());
        self
    }

    /// Creates an assignment with the entry.
    pub fn assignment(mut self, assignment: pb::NewAssignment) -> Post {
        self.request.assignment = Some(assignment);
        self
    }
}

impl From<Post> for pb::PostRequest {
    fn from(p: Post) -> pb::PostRequest {
        p.request
    }
}

// Coordination (COORDINATION §2, §3, §4): labels, labeled bodies, addressees, a send and a scatter.

/// Labels for the wire: a taint and a scope, both specified (the coordination calls refuse an
/// unspecified one).
pub fn labels(taint: Taint, scope: Scope) -> pb::Labels {
    pb::Labels { taint: taint_of(taint) as i32, scope: scope_of(scope) as i32 }
}

/// The wire value of a taint.
pub fn taint_of(taint: Taint) -> pb::Taint {
    match taint {
        Taint::Trusted => pb::Taint::Trusted,
        Taint::Tainted => pb::Taint::Tainted,
        Taint::Quarantined => pb::Taint::Quarantined,
    }
}

/// The wire value of a scope.
pub fn scope_of(scope: Scope) -> pb::Scope {
    match scope {
        Scope::Agent => pb::Scope::Agent,
        Scope::Fleet => pb::Scope::Fleet,
        Scope::Tenant => pb::Scope::Tenant,
        Scope::Public => pb::Scope::Public,
    }
}

/// The domain labels of wire labels; None when either part is unspecified or unknown (a response
/// never sends those; an absent `Labels` means the version is unlabeled).
pub fn labels_from(l: &pb::Labels) -> Option<Labels> {
    let taint = match pb::Taint::try_from(l.taint).ok()? {
        pb::Taint::Trusted => Taint::Trusted,
        pb::Taint::Tainted => Taint::Tainted,
        pb::Taint::Quarantined => Taint::Quarantined,
        pb::Taint::Unspecified => return None,
    };
    let scope = match pb::Scope::try_from(l.scope).ok()? {
        pb::Scope::Agent => Scope::Agent,
        pb::Scope::Fleet => Scope::Fleet,
        pb::Scope::Tenant => Scope::Tenant,
        pb::Scope::Public => Scope::Public,
        pb::Scope::Unspecified => return None,
    };
    Some(Labels { taint, scope })
}

/// New content with its labels, which becomes a new labeled private Memory of the sender in the
/// same action.
pub fn labeled(body: impl Into<Vec<u8>>, with: Labels) -> pb::LabeledBody {
    pb::LabeledBody {
        kind: Some(pb::labeled_body::Kind::Content(pb::LabeledContent {
            content: content(body),
            labels: Some(labels(with.taint, with.scope)),
        })),
    }
}

/// New text with its labels.
pub fn labeled_text(body: &str, with: Labels) -> pb::LabeledBody {
    labeled(body.as_bytes(), with)
}

/// An existing version by its pin: its own labels apply (an unlabeled version counts as tainted,
/// agent-scoped on the coordination path and is refused, COORDINATION §3.3 step 3).
pub fn pinned(memory: &str, version: u32) -> pb::LabeledBody {
    pb::LabeledBody { kind: Some(pb::labeled_body::Kind::Pin(pb::MemoryPin { memory: memory.to_string(), version })) }
}

/// A `WriteLabeled` request: a new labeled Memory (`memory` None) or a labeled new version of the
/// caller's own Memory.
pub fn write_labeled(memory: Option<&str>, body: impl Into<Vec<u8>>, with: Labels) -> pb::WriteLabeledRequest {
    pb::WriteLabeledRequest {
        idempotency_key: String::new(),
        memory: memory.map(str::to_string),
        content: content(body),
        labels: Some(labels(with.taint, with.scope)),
    }
}

/// A `WidenScope` request: a new version of `memory` with the bytes and taint of `version` and the
/// wider `scope`.
pub fn widen_scope(memory: &str, version: u32, scope: Scope) -> pb::WidenScopeRequest {
    pb::WidenScopeRequest {
        idempotency_key: String::new(),
        pin: Some(pb::MemoryPin { memory: memory.to_string(), version }),
        scope: scope_of(scope) as i32,
    }
}

/// Whom a sent entry asks to respond: nobody (a broadcast or a publication; no response is owed).
pub fn to_nobody() -> pb::SendTo {
    pb::SendTo { kind: Some(pb::send_to::Kind::Nobody(pb::Nobody {})) }
}

/// Ask exactly these members (each then owes a response). An empty list asks nobody.
pub fn to_agents<I, S>(agents: I) -> pb::SendTo
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    pb::SendTo {
        kind: Some(pb::send_to::Kind::Agents(pb::Agents { agents: agents.into_iter().map(Into::into).collect() })),
    }
}

/// Ask every current member who may speak except the author, fixed at posting (a barrier).
pub fn to_all_speakers() -> pb::SendTo {
    pb::SendTo { kind: Some(pb::send_to::Kind::AllSpeakers(pb::AllSpeakers {})) }
}

/// A send to a thread, built step by step and converted into a [`pb::SendRequest`]:
/// `Message::new("th_1", labeled_text("hi", l)).to(to_agents(["ag_2"])).reply_to(3)`. It asks
/// nobody unless told otherwise (the wire's default too).
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    request: pb::SendRequest,
}

impl Message {
    /// A message to `thread` that pins `body`.
    pub fn new(thread: &str, body: pb::LabeledBody) -> Message {
        Message {
            request: pb::SendRequest {
                idempotency_key: String::new(),
                thread: thread.to_string(),
                body: Some(body),
                to: Some(to_nobody()),
                reply_to: None,
                reply_to_latest: false,
            },
        }
    }

    /// Whom the entry asks to respond.
    pub fn to(mut self, to: pb::SendTo) -> Message {
        self.request.to = Some(to);
        self
    }

    /// Replies to entry `seq` of the same thread (ending the sender's own pending response to it).
    pub fn reply_to(mut self, seq: u64) -> Message {
        self.request.reply_to = Some(seq);
        self
    }

    /// Replies to entry `seq`, which must still be its author's newest entry in the thread, else
    /// the send is refused `STALE_BASE` (COORDINATION §3.6: a bounded correction).
    pub fn reply_to_latest(mut self, seq: u64) -> Message {
        self.request.reply_to = Some(seq);
        self.request.reply_to_latest = true;
        self
    }
}

impl From<Message> for pb::SendRequest {
    fn from(m: Message) -> pb::SendRequest {
        m.request
    }
}

/// A scatter (COORDINATION §4.3): a header and one goal per member, as one atomic action. Windows
/// and the output structure are the server's defaults unless set:
/// `Scatter::new("th_1", header, [("ag_2", goal)], "criteria").delivery_window(hour)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Scatter {
    request: pb::ScatterRequest,
}

impl Scatter {
    /// The header, the goals as (member, body) in any order (ranks follow ascending agent id), and
    /// the acceptance criteria every rank's assignment carries.
    pub fn new<I, S>(thread: &str, header: pb::LabeledBody, goals: I, criteria: &str) -> Scatter
    where
        I: IntoIterator<Item = (S, pb::LabeledBody)>,
        S: Into<String>,
    {
        Scatter {
            request: pb::ScatterRequest {
                idempotency_key: String::new(),
                thread: thread.to_string(),
                header: Some(header),
                goals: goals
                    .into_iter()
                    .map(|(member, body)| pb::RankGoal { member: member.into(), body: Some(body) })
                    .collect(),
                criteria: text(criteria),
                output_structure: None,
                delivery_window_micros: None,
                judgment_window_micros: None,
            },
        }
    }

    /// The structure every rank's output should follow.
    pub fn output_structure(mut self, structure: &str) -> Scatter {
        self.request.output_structure = text(structure);
        self
    }

    /// Every assignment's delivery window, from taking (saturating at `u64::MAX` microseconds).
    pub fn delivery_window(mut self, window: Duration) -> Scatter {
        self.request.delivery_window_micros = Some(micros(window));
        self
    }

    /// Every assignment's judgment window, from delivery.
    pub fn judgment_window(mut self, window: Duration) -> Scatter {
        self.request.judgment_window_micros = Some(micros(window));
        self
    }
}

impl From<Scatter> for pb::ScatterRequest {
    fn from(s: Scatter) -> pb::ScatterRequest {
        s.request
    }
}

/// A duration in whole microseconds, saturating.
fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body_of(b: &pb::LabeledBody) -> (Vec<u8>, Option<Labels>) {
        match &b.kind {
            Some(pb::labeled_body::Kind::Content(c)) => (
                c.content.as_ref().map(|c| c.body.clone()).unwrap_or_default(),
                c.labels.as_ref().and_then(labels_from),
            ),
            other => panic!("not labeled content: {other:?}"),
        }
    }

    #[test]
    fn every_label_pair_round_trips_through_the_wire() {
        for taint in Taint::ALL {
            for scope in Scope::ALL {
                let wire = labels(taint, scope);
                assert_ne!(wire.taint, pb::Taint::Unspecified as i32);
                assert_ne!(wire.scope, pb::Scope::Unspecified as i32);
                assert_eq!(labels_from(&wire), Some(Labels::new(taint, scope)));
            }
        }
        let half = pb::Labels { taint: pb::Taint::Tainted as i32, scope: pb::Scope::Unspecified as i32 };
        assert_eq!(labels_from(&half), None, "an unspecified part is no labels, never a guess");
        assert_eq!(labels_from(&pb::Labels { taint: 99, scope: 2 }), None);
    }

    #[test]
    fn labeled_text_carries_its_bytes_and_labels() {
        let l = Labels::new(Taint::Quarantined, Scope::Tenant);
        let (bytes, got) = body_of(&labeled_text("a\nb", l));
        assert_eq!(bytes, b"a\nb");
        assert_eq!(got, Some(l));
        let pin = pinned("mem_4", 2);
        assert_eq!(pin.kind, Some(pb::labeled_body::Kind::Pin(pb::MemoryPin { memory: "mem_4".into(), version: 2 })));
    }

    #[test]
    fn write_and_widen_requests_name_what_they_change() {
        let l = Labels::new(Taint::Tainted, Scope::Agent);
        let new = write_labeled(None, "x", l);
        assert_eq!(new.memory, None, "no memory: a new private Memory");
        assert_eq!(new.labels.as_ref().and_then(labels_from), Some(l));
        assert_eq!(write_labeled(Some("mem_3"), "x", l).memory.as_deref(), Some("mem_3"));
        let w = widen_scope("mem_3", 4, Scope::Fleet);
        assert_eq!(w.pin, Some(pb::MemoryPin { memory: "mem_3".into(), version: 4 }));
        assert_eq!(w.scope, pb::Scope::Fleet as i32);
    }

    #[test]
    fn a_message_asks_nobody_unless_told_and_latest_implies_a_reply() {
        let l = Labels::new(Taint::Tainted, Scope::Fleet);
        let plain: pb::SendRequest = Message::new("th_1", labeled_text("hi", l)).into();
        assert_eq!(plain.to, Some(to_nobody()));
        assert_eq!((plain.reply_to, plain.reply_to_latest), (None, false));
        let reply: pb::SendRequest = Message::new("th_1", labeled_text("hi", l)).reply_to(3).into();
        assert_eq!((reply.reply_to, reply.reply_to_latest), (Some(3), false));
        let fresh: pb::SendRequest =
            Message::new("th_1", labeled_text("hi", l)).to(to_agents(["ag_2", "ag_1"])).reply_to_latest(7).into();
        assert_eq!((fresh.reply_to, fresh.reply_to_latest), (Some(7), true));
        match fresh.to.and_then(|t| t.kind) {
            Some(pb::send_to::Kind::Agents(a)) => assert_eq!(a.agents, ["ag_2", "ag_1"], "sent as given"),
            other => panic!("not agents: {other:?}"),
        }
        assert!(matches!(to_all_speakers().kind, Some(pb::send_to::Kind::AllSpeakers(_))));
    }

    #[test]
    fn a_scatter_keeps_every_goal_and_sets_windows_in_microseconds() {
        let l = Labels::new(Taint::Tainted, Scope::Fleet);
        let goals = [("ag_3", labeled_text("c", l)), ("ag_1", labeled_text("a", l))];
        let s: pb::ScatterRequest = Scatter::new("th_9", labeled_text("header", l), goals, "be brief")
            .delivery_window(Duration::from_secs(3600))
            .judgment_window(Duration::MAX)
            .into();
        assert_eq!(s.thread, "th_9");
        let members: Vec<&str> = s.goals.iter().map(|g| g.member.as_str()).collect();
        assert_eq!(members, ["ag_3", "ag_1"], "the server ranks them; the request keeps the caller's order");
        assert_eq!(body_of(s.goals[1].body.as_ref().expect("a body")).0, b"a");
        assert_eq!(s.criteria.map(|c| c.body), Some(b"be brief".to_vec()));
        assert_eq!(s.delivery_window_micros, Some(3_600_000_000));
        assert_eq!(s.judgment_window_micros, Some(u64::MAX), "a huge window saturates instead of wrapping");
        assert_eq!(s.output_structure, None);
    }
}
