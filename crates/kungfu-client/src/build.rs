//! Small builders for requests that are tedious to write as `pb` literals: content, a post with
//! its reply, ask, Task reference or assignment, and a new assignment.

use kungfu_api::pb;

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
