//! `kungfu demo`: a scripted session of four agents against a running node, told step by step.
//!
//! A lead and three workers register; the lead opens a thread with a grant and the workers join;
//! the lead asks a question and the workers answer; three assignments are delivered and judged (one
//! rejected and redone); a Task with `max_adoptions = 2` is raced by all three workers while the
//! lead adopts concurrently; a delivery deadline passes; and finally every agent recovers its turn
//! and opportunities from nothing but its key. Every call goes through the SDK. Any outcome other
//! than the expected one stops the demo with a non-zero exit status and says which step failed.

use crate::ctx::DEFAULT_ENDPOINT;
use crate::error::CliError;
use crate::profile;
use kungfu_client::{Client, ClientOptions, Code, Error as SdkError, Post, Written, pb};
use std::time::{Duration, Instant};

/// The longest the demo waits for the server to end a passed deadline.
const DEADLINE_BOUND: Duration = Duration::from_secs(30);

/// The delivery window of the assignment whose deadline passes.
const SHORT_WINDOW: Duration = Duration::from_secs(2);

/// What the demo needs from the global flags.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The endpoints given by `--endpoint` or `KUNGFU_ENDPOINTS` (empty: from a profile).
    endpoints: Vec<String>,
    /// The profile named by `--profile`.
    profile: String,
    /// The deadline of each call attempt.
    timeout: Duration,
    /// How many times a failed call attempt is retried.
    retries: u32,
    /// How long connecting to a node may take.
    connect_timeout: Duration,
}

impl Settings {
    /// The settings the global flags give (`--endpoint`, `--profile`, `--timeout-secs`, `--retries`).
    pub fn from_cli(cli: &crate::cli::Cli) -> Settings {
        Settings {
            endpoints: cli.endpoints.iter().map(|e| e.trim().to_string()).filter(|e| !e.is_empty()).collect(),
            profile: cli.profile.clone(),
            timeout: Duration::from_secs(cli.timeout_secs.max(1)),
            retries: cli.retries,
            connect_timeout: cli.connect_timeout,
        }
    }

    /// The endpoints: the flag, else the chosen profile's, else the `dev` profile's, else the
    /// default single node.
    pub(crate) fn resolve_endpoints(&self) -> Result<Vec<String>, CliError> {
        if !self.endpoints.is_empty() {
            return Ok(self.endpoints.clone());
        }
        let all = profile::load()?;
        for name in [self.profile.as_str(), crate::dev::PROFILE] {
            if let Some(p) = all.profiles.get(name).filter(|p| !p.endpoints.is_empty()) {
                return Ok(p.endpoints.clone());
            }
        }
        Ok(vec![DEFAULT_ENDPOINT.to_string()])
    }

    /// The client options the flags give.
    pub(crate) fn options(&self) -> ClientOptions {
        ClientOptions {
            call_timeout: self.timeout,
            connect_timeout: self.connect_timeout,
            max_retries: self.retries,
            ..Default::default()
        }
    }
}

/// One agent of the demo: its role in the story, its id, its key and a client acting as it.
pub(crate) struct Agent {
    pub(crate) name: &'static str,
    pub(crate) id: String,
    pub(crate) key: String,
    pub(crate) client: Client,
}

impl Agent {
    pub(crate) fn label(&self) -> String {
        format!("{} ({})", self.name, self.id)
    }
}

/// A failed step: the SDK's error with the step named in its message.
pub(crate) fn failed(step: &str, e: SdkError) -> CliError {
    let mut err = CliError::from(e);
    err.message = format!("demo step `{step}` failed: {}", err.message);
    // Each run of the demo makes new agents, so a write's key is of no use for a second run.
    err.idempotency_key = None;
    err
}

/// An outcome the script did not expect.
pub(crate) fn unexpected(message: impl Into<String>) -> CliError {
    CliError::other(format!("demo: unexpected outcome: {}", message.into()))
}

/// The result case of a write's receipt.
pub(crate) fn result(receipt: &Option<pb::Receipt>) -> Option<pb::receipt::Result> {
    receipt.as_ref().and_then(|r| r.result.clone())
}

/// The entry and the assignment (if any) a post created.
fn posted(w: &Written<pb::PostResponse>) -> Result<(u64, Option<String>), CliError> {
    match result(&w.value.receipt) {
        Some(pb::receipt::Result::Posted(p)) => Ok((p.entry, p.assignment)),
        other => Err(unexpected(format!("a post answered {other:?}"))),
    }
}

/// A turn item told as a sentence.
fn describe(item: &pb::TurnItem) -> String {
    use pb::obligation_ref::Kind;
    let what = match item.obligation.as_ref().and_then(|o| o.kind.as_ref()) {
        Some(Kind::Response(r)) => format!("answer entry {}#{}", r.thread, r.entry),
        Some(Kind::AssignmentDelivery(a)) => format!("deliver assignment {a}"),
        Some(Kind::AssignmentJudgment(a)) => format!("judge the delivery of assignment {a}"),
        Some(Kind::EngagementDelivery(e)) => format!("deliver engagement {e}"),
        Some(Kind::EngagementJudgment(e)) => format!("judge engagement {e}"),
        None => "an obligation of an unknown kind".to_string(),
    };
    let due = match item.due_at_unix_micros {
        Some(due) => {
            let now = now_micros();
            let secs = (due - now) / 1_000_000;
            let span = |s: i64| if s >= 3600 { format!("{}h", s / 3600) } else { format!("{s}s") };
            if secs >= 0 { format!(", due in {}", span(secs)) } else { format!(", due {} ago", span(-secs)) }
        }
        None => String::new(),
    };
    format!("{what} (on {}{due})", item.object)
}

/// Prints an agent's turn, one obligation a line.
async fn show_turn(agent: &Agent, indent: &str) -> Result<usize, CliError> {
    let items = agent.client.turn_all(100).await.map_err(|e| failed("read a turn", e))?;
    if items.is_empty() {
        println!("{indent}{}'s turn is empty: it owes nothing.", agent.label());
    } else {
        println!("{indent}{}'s turn holds {} obligation(s):", agent.label(), items.len());
        for item in &items {
            println!("{indent}  - {}", describe(item));
        }
    }
    Ok(items.len())
}

/// Reads all of an agent's opportunities.
async fn opportunities(client: &Client) -> Result<Vec<pb::Opportunity>, CliError> {
    let mut items = Vec::new();
    let mut cursor = String::new();
    for _ in 0..100 {
        let page = client
            .get_opportunities(pb::GetOpportunitiesRequest { cursor: cursor.clone(), page_size: 0 })
            .await
            .map_err(|e| failed("read opportunities", e))?;
        items.extend(page.items);
        if page.next_cursor.is_empty() || page.next_cursor == cursor {
            break;
        }
        cursor = page.next_cursor;
    }
    Ok(items)
}

/// Now, in microseconds since the Unix epoch (the system clock; chrono's clock feature is not
/// enabled for this crate).
fn now_micros() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_micros()).unwrap_or(i64::MAX)
}

pub(crate) fn heading(n: u32, title: &str) {
    println!("\nStep {n}. {title}");
}

/// An assignment's state as words.
fn assignment_state(a: &pb::Assignment) -> String {
    use pb::assignment::State;
    match &a.state {
        Some(State::Open(())) => "open".into(),
        Some(State::Taken(_)) => "taken".into(),
        Some(State::Delivered(_)) => "delivered".into(),
        Some(State::Ended(e)) => pb::AssignmentOutcome::try_from(e.outcome)
            .map(|o| o.as_str_name().trim_start_matches("ASSIGNMENT_OUTCOME_").to_ascii_lowercase().replace('_', " "))
            .unwrap_or_else(|_| format!("ended ({})", e.outcome)),
        None => "unknown".into(),
    }
}

/// Posts an assignment to `to` and returns its entry and id.
async fn assign(
    lead: &Agent,
    thread: &str,
    to: &Agent,
    criteria: &str,
    reply_to: Option<u64>,
    window: Option<Duration>,
) -> Result<(u64, String), CliError> {
    let mut new = kungfu_client::new_assignment(&to.id, criteria);
    new.delivery_window_micros = window.map(|w| u64::try_from(w.as_micros()).unwrap_or(u64::MAX));
    let mut post = Post::text(thread, criteria).assignment(new).ask(Vec::<String>::new());
    if let Some(r) = reply_to {
        post = post.reply_to(r);
    }
    let w = lead.client.post(post, None).await.map_err(|e| failed("create an assignment", e))?;
    match posted(&w)? {
        (entry, Some(a)) => Ok((entry, a)),
        (_, None) => Err(unexpected("a post with an assignment created none")),
    }
}

pub(crate) async fn take_and_deliver(worker: &Agent, assignment: &str, output: &str) -> Result<(), CliError> {
    let take = pb::TakeAssignmentRequest { assignment: assignment.to_string(), ..Default::default() };
    worker.client.take_assignment(take, None).await.map_err(|e| failed("take an assignment", e))?;
    let deliver = pb::DeliverAssignmentRequest {
        assignment: assignment.to_string(),
        output: kungfu_client::text(output),
        ..Default::default()
    };
    worker.client.deliver_assignment(deliver, None).await.map_err(|e| failed("deliver an assignment", e))?;
    Ok(())
}

pub(crate) async fn adopt(lead: &Agent, assignment: &str) -> Result<(), CliError> {
    let req = pb::AdoptAssignmentRequest { assignment: assignment.to_string(), ..Default::default() };
    lead.client.adopt_assignment(req, None).await.map_err(|e| failed("adopt an assignment", e))?;
    Ok(())
}

async fn state_of(agent: &Agent, assignment: &str) -> Result<pb::Assignment, CliError> {
    let req = pb::GetAssignmentRequest { assignment: assignment.to_string() };
    agent.client.get_assignment(req).await.map_err(|e| failed("read an assignment", e))
}

/// Runs the demo.
pub async fn run(settings: Settings) -> Result<(), CliError> {
    let endpoints = settings.resolve_endpoints()?;
    let options = settings.options();
    let anonymous = Client::connect(endpoints.clone(), None, options.clone()).await?;
    println!(
        "Kungfu demo against {}: four agents, one thread, assignments, a Task and a deadline.",
        endpoints.join(",")
    );

    heading(1, "Four agents register.");
    let mut agents = Vec::new();
    for name in ["the lead", "worker Ada", "worker Bo", "worker Cy"] {
        let r = anonymous.register(None).await.map_err(|e| failed("register an agent", e))?;
        agents.push(Agent { name, id: r.agent, key: r.agent_key, client: r.client });
    }
    for a in &agents {
        println!("  {} registered as {}; its key is all it needs from now on.", a.name, a.id);
    }
    let (lead, workers) = agents.split_first().ok_or_else(|| unexpected("no agents"))?;
    let [ada, bo, cy] = workers else { return Err(unexpected("not three workers")) };

    heading(2, "The lead opens a thread with a speaker grant; the workers join with its secret.");
    let req = pb::CreateThreadRequest {
        subject: kungfu_client::text("Release 1.4: who does what"),
        grant: Some(pb::GrantSpec { role: pb::Role::Speaker as i32 }),
        ..Default::default()
    };
    let w = lead.client.create_thread(req, None).await.map_err(|e| failed("create a thread", e))?;
    let thread = match result(&w.value.receipt) {
        Some(pb::receipt::Result::ThreadCreated(t)) => t.thread,
        other => return Err(unexpected(format!("creating a thread answered {other:?}"))),
    };
    let secret = w.value.grant_secret.clone();
    if secret.is_empty() {
        return Err(unexpected("the thread's grant secret was not returned"));
    }
    println!("  {} created thread {thread} and got a one-time grant secret for speakers.", lead.label());
    for worker in workers {
        let req = pb::JoinRequest { grant_secret: secret.clone(), ..Default::default() };
        worker.client.join(req, None).await.map_err(|e| failed("join the thread", e))?;
        println!("  {} joined {thread} as a speaker.", worker.label());
    }

    heading(3, "The lead asks a question; each worker owes an answer until it replies.");
    let ask: Vec<String> = workers.iter().map(|w| w.id.clone()).collect();
    let post = Post::text(&thread, "Which part of the release can each of you own by Friday?").ask(ask);
    let w = lead.client.post(post, None).await.map_err(|e| failed("ask a question", e))?;
    let (question, _) = posted(&w)?;
    println!("  {} posted entry {thread}#{question}, asking all three workers.", lead.label());
    println!("  Turns before the answers:");
    for worker in workers {
        if show_turn(worker, "    ").await? != 1 {
            return Err(unexpected(format!("{} should owe exactly one answer", worker.label())));
        }
    }
    let answers = ["I can own the migration guide.", "I will take the changelog.", "I can run the load tests."];
    for (worker, answer) in workers.iter().zip(answers) {
        let post = Post::text(&thread, answer).reply_to(question).ask(Vec::<String>::new());
        let w = worker.client.post(post, None).await.map_err(|e| failed("answer the question", e))?;
        let (entry, _) = posted(&w)?;
        println!("  {} replied with entry #{entry}: \"{answer}\"", worker.label());
    }
    println!("  Turns after the answers:");
    for worker in workers {
        if show_turn(worker, "    ").await? != 0 {
            return Err(unexpected(format!("{} still owes something after answering", worker.label())));
        }
    }

    heading(4, "Three assignments: created, taken, delivered; two adopted, one rejected and redone.");
    let jobs = [
        (ada, "Write the migration guide for 1.4.", "Migration guide: three steps, with rollback."),
        (bo, "Write the changelog for 1.4.", "Changelog: 12 fixes, 3 features."),
        (cy, "Run the load tests and report p99 latency.", "Load test: it ran."),
    ];
    let mut assigned = Vec::new();
    for (worker, criteria, output) in jobs {
        let (entry, id) = assign(lead, &thread, worker, criteria, None, None).await?;
        println!("  {} assigned {id} (entry #{entry}) to {}: \"{criteria}\"", lead.label(), worker.label());
        take_and_deliver(worker, &id, output).await?;
        println!("  {} took {id} and delivered: \"{output}\"", worker.label());
        assigned.push((worker, entry, id));
    }
    show_turn(lead, "  ").await?;
    for (worker, _, id) in &assigned[..2] {
        adopt(lead, id).await?;
        println!("  {} adopted {id}, the work of {}.", lead.label(), worker.label());
    }
    let (_, old_entry, old) = &assigned[2];
    let reason = "The report has no p99 figure; rerun and include it.";
    let req = pb::RejectAssignmentRequest {
        assignment: old.clone(),
        reason: kungfu_client::text(reason),
        ..Default::default()
    };
    lead.client.reject_assignment(req, None).await.map_err(|e| failed("reject an assignment", e))?;
    println!("  {} rejected {old} with the reason: \"{reason}\"", lead.label());
    let criteria = "Rerun the load tests; report p99 latency in milliseconds.";
    let (entry, redo) = assign(lead, &thread, cy, criteria, Some(*old_entry), None).await?;
    println!(
        "  {} assigned the redo {redo} (entry #{entry}, a reply to #{old_entry}) to {}.",
        lead.label(),
        cy.label()
    );
    take_and_deliver(cy, &redo, "Load test: p99 = 42 ms at 500 requests/s.").await?;
    println!("  {} took {redo} and delivered: \"Load test: p99 = 42 ms at 500 requests/s.\"", cy.label());
    adopt(lead, &redo).await?;
    println!("  {} adopted {redo}.", lead.label());
    let mut summary = Vec::new();
    for id in assigned.iter().map(|(_, _, id)| id).chain([&redo]) {
        summary.push(format!("{id}: {}", assignment_state(&state_of(lead, id).await?)));
    }
    println!("  Final states: {}.", summary.join(", "));

    heading(5, "A Task with max_adoptions = 2, raced by all three workers while the lead adopts.");
    let contract = pb::ContractDraft {
        requirements: kungfu_client::text("Propose a name for release 1.4."),
        acceptance: kungfu_client::text("One word, a bird, not used by an earlier release."),
        max_adoptions: Some(2),
        ..Default::default()
    };
    let req = pb::CreateTaskRequest {
        audience: Some(pb::Audience { kind: Some(pb::audience::Kind::Open(pb::OpenAudience {})) }),
        contract: Some(contract),
        ..Default::default()
    };
    let w = lead.client.create_task(req, None).await.map_err(|e| failed("create a Task", e))?;
    let task = match result(&w.value.receipt) {
        Some(pb::receipt::Result::TaskCreated(t)) => t.task,
        other => return Err(unexpected(format!("creating a Task answered {other:?}"))),
    };
    println!("  {} created {task}, open to everyone, at most 2 deliveries adopted.", lead.label());
    let deliver = |worker: &Agent, name: &str| {
        let req = pb::DeliverTaskRequest {
            task: task.clone(),
            output: kungfu_client::text(name),
            take: true,
            ..Default::default()
        };
        let client = worker.client.clone();
        async move { client.deliver_task(req, None).await }
    };
    // The three workers take and deliver at the same moment.
    let (a, b, c) = tokio::join!(deliver(ada, "Kestrel"), deliver(bo, "Heron"), deliver(cy, "Osprey"));
    let mut engagements = Vec::new();
    for ((worker, proposal), outcome) in [(ada, "Kestrel"), (bo, "Heron"), (cy, "Osprey")].into_iter().zip([a, b, c]) {
        let w = outcome.map_err(|e| failed("take and deliver the Task", e))?;
        let engagement = match result(&w.value.receipt) {
            Some(pb::receipt::Result::EngagementDelivered(d)) => d.engagement,
            other => return Err(unexpected(format!("delivering on the Task answered {other:?}"))),
        };
        println!("  {} took {task} and delivered \"{proposal}\" as engagement {engagement}.", worker.label());
        engagements.push(engagement);
    }
    // The lead adopts all three deliveries at once; the limit lets exactly two through.
    let adopt_one = |engagement: String| {
        let req = pb::AdoptEngagementRequest { engagement, ..Default::default() };
        let client = lead.client.clone();
        async move { client.adopt_engagement(req, None).await }
    };
    let (x, y, z) = tokio::join!(
        adopt_one(engagements[0].clone()),
        adopt_one(engagements[1].clone()),
        adopt_one(engagements[2].clone())
    );
    let mut adopted = 0;
    let mut refused = Vec::new();
    for (engagement, outcome) in engagements.iter().zip([x, y, z]) {
        match outcome {
            Ok(_) => {
                adopted += 1;
                println!("  {} adopted {engagement}.", lead.label());
            }
            Err(SdkError::Rejected(r)) if r.code == Code::AdoptionLimitReached => {
                println!(
                    "  {} tried to adopt {engagement}: refused with {} ({}).",
                    lead.label(),
                    r.code.as_str(),
                    r.message
                );
                refused.push(engagement.clone());
            }
            Err(e) => return Err(failed("adopt an engagement", e)),
        }
    }
    if adopted != 2 || refused.len() != 1 {
        return Err(unexpected(format!("{adopted} adoptions and {} refusals instead of 2 and 1", refused.len())));
    }
    println!("  The lead adopted 2 of 3 deliveries; the third got ADOPTION_LIMIT_REACHED, first come first served.");
    for engagement in &refused {
        let req = pb::RejectEngagementRequest {
            engagement: engagement.clone(),
            reason: kungfu_client::text("The Task already has the two names it needs."),
            ..Default::default()
        };
        lead.client.reject_engagement(req, None).await.map_err(|e| failed("reject an engagement", e))?;
        println!("  {} rejected {engagement} with a reason, so nobody waits on it.", lead.label());
    }

    heading(6, "A deadline passes: an assignment with a 2-second delivery window is taken and not delivered.");
    let criteria = "Tag the release within two seconds.";
    let (entry, late) = assign(lead, &thread, ada, criteria, None, Some(SHORT_WINDOW)).await?;
    let req = pb::TakeAssignmentRequest { assignment: late.clone(), ..Default::default() };
    let w = ada.client.take_assignment(req, None).await.map_err(|e| failed("take an assignment", e))?;
    if !matches!(result(&w.value.receipt), Some(pb::receipt::Result::AssignmentTaken(_))) {
        return Err(unexpected("taking the short assignment answered no AssignmentTaken"));
    }
    println!(
        "  {} assigned {late} (entry #{entry}) with a 2-second delivery window; {} took it.",
        lead.label(),
        ada.label()
    );
    show_turn(ada, "  ").await?;
    println!("  Nobody delivers. Waiting for the server's deadline scheduler...");
    let start = Instant::now();
    loop {
        let a = state_of(lead, &late).await?;
        if let Some(pb::assignment::State::Ended(e)) = &a.state {
            if e.outcome != pb::AssignmentOutcome::TimedOut as i32 {
                return Err(unexpected(format!("{late} ended as {} instead of timed out", assignment_state(&a))));
            }
            println!(
                "  After {:.1}s, {late} is ended: timed out. The server ended it; no one had to.",
                start.elapsed().as_secs_f64()
            );
            break;
        }
        if start.elapsed() > DEADLINE_BOUND {
            return Err(unexpected(format!(
                "{late} is still {} after {}s",
                assignment_state(&a),
                DEADLINE_BOUND.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    show_turn(ada, "  ").await?;

    heading(7, "Every agent recovers from nothing: a fresh client with only its key reads its turn.");
    let post =
        Post::text(&thread, "Last call: anything blocking the release?").ask(workers.iter().map(|w| w.id.clone()));
    let w = lead.client.post(post, None).await.map_err(|e| failed("ask a last question", e))?;
    let (last, _) = posted(&w)?;
    let (entry, notes) = assign(lead, &thread, bo, "Draft the release announcement.", None, None).await?;
    take_and_deliver(bo, &notes, "Announcement: Kungfu 1.4 is out.").await?;
    println!(
        "  The lead asked one last question (#{last}) and {} delivered {notes} (entry #{entry}), unjudged.",
        bo.label()
    );
    for agent in &agents {
        let fresh = Client::connect(endpoints.clone(), Some(agent.key.clone()), options.clone()).await?;
        let items = fresh.turn_all(100).await.map_err(|e| failed("recover a turn", e))?;
        let opps = opportunities(&fresh).await?;
        println!(
            "  recovered turn of {}: {} obligation(s), {} opportunity(ies)",
            agent.label(),
            items.len(),
            opps.len()
        );
        for item in &items {
            println!("    - owes: {}", describe(item));
        }
        for o in &opps {
            let what = match &o.kind {
                Some(pb::opportunity::Kind::Assignment(a)) => format!("assignment {a}"),
                Some(pb::opportunity::Kind::Task(t)) => format!("Task {t}"),
                None => "something".to_string(),
            };
            println!("    - could take: {what} (on {})", o.object);
        }
    }
    println!("\nDemo complete: every step ended as expected.");
    Ok(())
}
