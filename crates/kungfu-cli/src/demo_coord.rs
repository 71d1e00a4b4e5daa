//! `kungfu demo coord`: the coordination layer (COORDINATION §2-§4) against a running node, told
//! step by step.
//!
//! A lead and three workers register; the lead opens a thread and admits them; it scatters three
//! goals as one atomic action; each worker reads its mailbox, takes its rank's assignment and
//! delivers; the lead gathers in rank order, folds the outputs (concat) and adopts each delivery;
//! the lead posts a barrier to every speaker, each worker receives it and replies, and the barrier
//! is released; the labels floor refuses a worker's private note and a quarantined one, and the
//! note goes through once its author widens it; last, two workers co-edit a shared record (their
//! appends merge, a stale replace is refused with the three values and rebased). Every call goes through the SDK; any outcome
//! other than the expected one stops the demo with a non-zero exit status naming the step.

use crate::demo::{Agent, Settings, adopt, failed, heading, take_and_deliver, unexpected};
use crate::error::CliError;
use crate::output::{self, escaped};
use kungfu_client::coord::{self, Marks};
use kungfu_client::reduce::Reduction;
use kungfu_client::{
    Client, Code, Error as SdkError, Labels, Message, Scatter, Scope, Taint, labeled_text, pb, pinned, to_all_speakers,
};
use std::time::Duration;

/// What every message of the demo is labeled: readable by the thread's members, trusted by nobody
/// for being there.
const FLEET: Labels = Labels { taint: Taint::Tainted, scope: Scope::Fleet };

/// How long the lead waits for the barrier, and each worker for the barrier entry.
const WAIT: Duration = Duration::from_secs(30);

/// The three goals, what each worker delivers, and how it replies to the barrier.
const WORK: [(&str, &str, &str); 3] = [
    (
        "Check that the migration guide covers rollback.",
        "Migration guide: rollback is covered in step 3; one command was misspelled, fixed.",
        "Ada here: my review is filed.",
    ),
    (
        "Check that every fix in the changelog links its issue.",
        "Changelog: 12 of 12 fixes link their issue.",
        "Bo here: filed.",
    ),
    (
        "Check the load test report for a p99 figure.",
        "Load tests: p99 = 42 ms at 500 requests/s, under the 50 ms budget.",
        "Cy here: done.",
    ),
];

/// A short, terminal-safe quote of participant content.
fn quote(body: &[u8]) -> String {
    format!("\"{}\"", escaped(body, 80))
}

/// Runs the coordination demo.
pub async fn run(settings: Settings) -> Result<(), CliError> {
    let endpoints = settings.resolve_endpoints()?;
    let anonymous = Client::connect(endpoints.clone(), None, settings.options()).await?;
    println!(
        "Kungfu coordination demo against {}: a lead and three workers; scatter, gather, a barrier, and the labels floor.",
        endpoints.join(",")
    );

    heading(1, "Four agents register.");
    let mut agents = Vec::new();
    for name in ["the lead", "worker Ada", "worker Bo", "worker Cy"] {
        let r = anonymous.register(None).await.map_err(|e| failed("register an agent", e))?;
        println!("  {name} registered as {}.", r.agent);
        agents.push(Agent { name, id: r.agent, key: r.agent_key, client: r.client });
    }
    let (lead, workers) = agents.split_first().ok_or_else(|| unexpected("no agents"))?;
    let [_, bo, cy] = workers else { return Err(unexpected("not three workers")) };

    heading(2, "The lead opens a thread and admits the three workers as speakers.");
    let req = pb::CreateThreadRequest {
        subject: kungfu_client::text("Release 1.5 review"),
        grant: Some(pb::GrantSpec { role: pb::Role::Speaker as i32 }),
        ..Default::default()
    };
    let w = lead.client.create_thread(req, None).await.map_err(|e| failed("create a thread", e))?;
    let thread = match crate::demo::result(&w.value.receipt) {
        Some(pb::receipt::Result::ThreadCreated(t)) => t.thread,
        other => return Err(unexpected(format!("creating a thread answered {other:?}"))),
    };
    for worker in workers {
        let req = pb::JoinRequest { grant_secret: w.value.grant_secret.clone(), ..Default::default() };
        worker.client.join(req, None).await.map_err(|e| failed("join the thread", e))?;
    }
    println!("  {} created {thread}; the three workers joined it with its speaker grant.", lead.label());
    println!("  The thread is the group: its members who may speak are who a scatter or a barrier can address.");

    heading(
        3,
        "The lead scatters three goals as one atomic action: a header, and per rank a reply with an assignment.",
    );
    let goals = workers.iter().zip(WORK).map(|(w, (goal, _, _))| (w.id.clone(), labeled_text(goal, FLEET)));
    let req = Scatter::new(
        &thread,
        labeled_text("Review release 1.5: each of you checks one area.", FLEET),
        goals,
        "One line: what you checked and what you found.",
    )
    .delivery_window(Duration::from_secs(3600));
    let w = lead.client.scatter(req, None).await.map_err(|e| failed("scatter", e))?;
    let s = coord::scattered(&w.value).cloned().ok_or_else(|| unexpected("a scatter answered no Scattered"))?;
    println!(
        "  Header entry {thread}#{}; every body labeled tainted/fleet (readable by the thread's members).",
        s.header
    );
    for r in &s.ranks {
        let who = workers.iter().find(|w| w.id == r.member).map(Agent::label).unwrap_or_else(|| r.member.clone());
        println!("    rank {}: {who}, entry #{}, assignment {}", r.rank, r.entry, r.assignment);
    }
    if s.ranks.len() != 3 {
        return Err(unexpected(format!("{} ranks instead of 3", s.ranks.len())));
    }
    println!("  Ranks follow ascending agent id, whatever order the goals were given in. It was all or nothing:");
    println!("  had one goal been refused, no entry and no assignment would exist.");

    heading(4, "Each worker reads its mailbox, takes its rank's assignment and delivers.");
    for (worker, (_, output, _)) in workers.iter().zip(WORK) {
        let rank = s.ranks.iter().find(|r| r.member == worker.id).ok_or_else(|| unexpected("a worker has no rank"))?;
        let mut mailbox = worker.client.mailbox(&thread, 0);
        let items = mailbox.drain(10).await.map_err(|e| failed("read a mailbox", coord_call(e)))?;
        let goal = items
            .iter()
            .find(|i| i.entry.as_ref().and_then(|e| e.assignment.as_deref()) == Some(rank.assignment.as_str()))
            .ok_or_else(|| unexpected(format!("{}'s mailbox does not show its goal", worker.label())))?;
        let body = goal.content.as_ref().map(|c| c.body.as_slice()).unwrap_or_default();
        println!(
            "  {}'s mailbox holds {} entries (cursor now {}); #{} carries its assignment: {}",
            worker.label(),
            items.len(),
            mailbox.cursor(),
            rank.entry,
            quote(body)
        );
        take_and_deliver(worker, &rank.assignment, output).await?;
        println!("    it took {} and delivered {}", rank.assignment, quote(output.as_bytes()));
    }

    heading(5, "The lead gathers in rank order, combines the outputs (concat), and adopts each delivery.");
    let (gathered, combined) =
        lead.client.gather_and_combine(&thread, s.header, Reduction::Concat, &Marks::default()).await.map_err(|e| {
            match e {
                coord::Error::Call(e) => failed("gather", e),
                other => unexpected(format!("gather and combine: {other}")),
            }
        })?;
    for r in &gathered.ranks {
        let out = r.output.as_deref().map(quote).unwrap_or_else(|| "-".into());
        println!("    rank {} {}: {} {out}", r.rank, r.member, coord::assignment_state(&r.assignment));
    }
    println!("  Combined (concat, rank order):");
    for line in combined.output.split(|b| *b == b'\n') {
        println!("    | {}", escaped(line, 120));
    }
    println!("  The fold ran in the SDK: the runtime never reads content, so it never compares outputs.");
    for r in &gathered.ranks {
        adopt(lead, &r.assignment.id).await?;
    }
    println!("  {} adopted all three deliveries; nobody owes anything on them any more.", lead.label());

    heading(6, "The lead posts a barrier to all speakers; each worker receives it and replies; it is released.");
    let body = labeled_text("Barrier: reply when your review is filed.", FLEET);
    let w =
        lead.client.barrier(&thread, to_all_speakers(), body, None).await.map_err(|e| failed("post a barrier", e))?;
    let sent = coord::sent(&w.value).cloned().ok_or_else(|| unexpected("a barrier answered no Sent"))?;
    let entry = sent.entry;
    println!("  {} posted {thread}#{entry}, asking {}.", lead.label(), sent.responders.join(", "));
    let waiting = lead.client.wait_barrier(&thread, entry, WAIT);
    let arriving = async {
        for (worker, (_, _, reply)) in workers.iter().zip(WORK) {
            // A blocking receive of what asks this worker to respond; the scatter asked nobody, so
            // the barrier is the first such entry.
            let got = worker
                .client
                .recv(&thread, 0, pb::MailboxFilter::AskedMe, WAIT)
                .await
                .map_err(|e| failed("receive the barrier", coord_call(e)))?;
            let item = got.items.first().ok_or_else(|| unexpected(format!("{} received nothing", worker.label())))?;
            let seq = item.entry.as_ref().map(|e| e.seq).unwrap_or(0);
            if seq != entry {
                return Err(unexpected(format!("{} was asked by #{seq}, not the barrier #{entry}", worker.label())));
            }
            let msg = Message::new(&thread, labeled_text(reply, FLEET)).reply_to(entry);
            let w = worker.client.send(msg, None).await.map_err(|e| failed("reply to the barrier", e))?;
            let mine = coord::sent(&w.value).map(|s| s.entry).unwrap_or(0);
            println!("    {} received #{entry} (it asks them) and replied with #{mine}.", worker.label());
        }
        Ok::<(), CliError>(())
    };
    let (released, arrived) = tokio::join!(waiting, arriving);
    arrived?;
    let b = released.map_err(|e| match e {
        coord::Error::Call(e) => failed("wait for the barrier", e),
        other => unexpected(format!("the barrier: {other}")),
    })?;
    println!("  Barrier #{entry} is released: every asked member replied ({} of {} ranks pending).", b.pending, b.size);
    println!("  The lead's wait read the barrier again as each reply arrived (a new entry of the thread); a");
    println!("  one-second recheck covers responses that end without an entry (handled, left).");

    heading(7, "The labels floor refuses content that may not travel, and says what to do instead.");
    let note = "Private: I think the p99 budget is too generous.";
    let req = kungfu_client::build::write_labeled(None, note, Labels::new(Taint::Tainted, Scope::Agent));
    let w = cy.client.write_labeled(req, None).await.map_err(|e| failed("write a private note", e))?;
    let pin = coord::labeled_written(&w.value)
        .and_then(|l| l.pin.clone())
        .ok_or_else(|| unexpected("a labeled write answered no pin"))?;
    println!("  {} wrote a note labeled tainted/agent: {}.", cy.label(), output::pin(&pin.memory, pin.version.into()));
    let msg = Message::new(&thread, pinned(&pin.memory, pin.version));
    refused(cy, "sends that agent-scoped note to the thread", cy.client.send(msg, None).await)?;
    let msg = Message::new(&thread, kungfu_client::labeled(note, Labels::new(Taint::Quarantined, Scope::Fleet)));
    refused(bo, "sends a quarantined message to the thread", bo.client.send(msg, None).await)?;
    println!("  Nothing was posted either time. The runtime read only the labels, never the words.");
    let w = cy
        .client
        .widen_scope(kungfu_client::build::widen_scope(&pin.memory, pin.version, Scope::Fleet), None)
        .await
        .map_err(|e| failed("widen the note", e))?;
    let to = coord::scope_widened(&w.value).and_then(|s| s.to.clone()).ok_or_else(|| unexpected("no widened pin"))?;
    let w = cy
        .client
        .send(Message::new(&thread, pinned(&to.memory, to.version)), None)
        .await
        .map_err(|e| failed("send the widened note", e))?;
    let posted = coord::sent(&w.value).map(|s| s.entry).unwrap_or(0);
    println!(
        "  {} widened it on purpose (a new version {}, fleet-scoped; {} stays private) and sent it: #{posted}.",
        cy.label(),
        output::pin(&to.memory, to.version.into()),
        output::pin(&pin.memory, pin.version.into()),
    );
    record_scene(lead, &workers[0], bo, &thread).await?;
    println!("\nCoordination demo complete: every step ended as expected.");
    Ok(())
}

/// Step 8 (COORDINATION §5): a shared record co-edited by two workers. Both read rev 1 and append a
/// note on it: the second append is merged onto the newer rev. Both then change the state on the
/// same rev: the second is refused `STALE_BASE` with base, current and proposed values, re-reads,
/// and rebases its change onto the current rev.
async fn record_scene(lead: &Agent, ada: &Agent, bo: &Agent, thread: &str) -> Result<(), CliError> {
    use kungfu_client::record::body_text;
    use kungfu_client::{NewRecord, Patch};
    heading(8, "Two workers co-edit a shared record: appends merge, a stale replace is refused and rebased.");
    let req = NewRecord::new(
        thread,
        "Release 1.5 checklist",
        "open",
        body_text("Ship when every check passes.", FLEET),
        labeled_text("The release checklist, for everyone to edit.", FLEET),
    );
    let w = lead.client.create_record(req, None).await.map_err(|e| failed("create a record", e))?;
    let record = match crate::demo::result(&w.value.receipt) {
        Some(pb::receipt::Result::RecordCreated(r)) => r.record,
        other => return Err(unexpected(format!("create a record answered {other:?}"))),
    };
    println!("  The lead created {record} (rev 1) with an entry of the thread; both workers read rev 1.");
    let mut base = 1;
    for (who, id, text) in [(ada, "rollback", "Rollback is covered."), (bo, "changelog", "Every fix links its issue.")]
    {
        let p = Patch::new(&record, 1, labeled_text("a finding", FLEET)).append_note(
            id,
            pb::NoteKind::Progress,
            body_text(text, FLEET),
        );
        let w = who.client.patch_record(p, None).await.map_err(|e| failed("append a note", e))?;
        let done = patched(&w.value.receipt)?;
        base = done.rev;
        let how = if done.merged { "merged onto the newer rev: appends commute" } else { "applied" };
        println!("  {} appended note `{id}` on base rev 1: rev {} ({how}).", who.label(), done.rev);
    }
    let p = Patch::new(&record, base, labeled_text("ready", FLEET)).replace_state("ready");
    let w = ada.client.patch_record(p, None).await.map_err(|e| failed("replace the state", e))?;
    let after = patched(&w.value.receipt)?.rev;
    println!("  {} set the state to \"ready\" on rev {base}: rev {after}.", ada.label());
    let p = Patch::new(&record, base, labeled_text("blocked", FLEET)).replace_state("blocked");
    match bo.client.patch_record(p, None).await {
        Err(e) if e.record_conflict().is_some() => {
            let c = e.record_conflict().ok_or_else(|| unexpected("no conflict"))?;
            println!("  {} set the state to \"blocked\" on rev {base} too: refused STALE_BASE.", bo.label());
            for line in crate::error::conflict_lines(c) {
                println!("    {line}");
            }
        }
        Err(e) => return Err(failed("replace the state on a stale base", e)),
        Ok(_) => return Err(unexpected("a replace on a stale base was accepted")),
    }
    let v = bo
        .client
        .get_record(pb::GetRecordRequest { record: record.clone(), rev: None, audience: 0 })
        .await
        .map_err(|e| failed("read the record", e))?;
    let p = Patch::new(&record, v.rev, labeled_text("blocked: the load test is pending", FLEET))
        .replace_state("blocked")
        .append_decision("ship", "open", "Ship with the load test pending?");
    let w = bo.client.patch_record(p, None).await.map_err(|e| failed("rebase the change", e))?;
    let rebased = patched(&w.value.receipt)?;
    println!(
        "  {} re-read rev {}, kept its change and opened a decision: rev {}. Nothing was lost and nothing overwritten silently.",
        bo.label(),
        v.rev,
        rebased.rev
    );
    Ok(())
}

/// The record patch a receipt reports.
fn patched(receipt: &Option<pb::Receipt>) -> Result<pb::RecordPatched, CliError> {
    match crate::demo::result(receipt) {
        Some(pb::receipt::Result::RecordPatched(p)) => Ok(p),
        other => Err(unexpected(format!("a patch answered {other:?}"))),
    }
}

/// The SDK error inside a coordination loop's error (the loops used here fail only by a call).
fn coord_call(e: coord::Error) -> SdkError {
    match e {
        coord::Error::Call(e) => e,
        other => SdkError::Transport(other.to_string().into()),
    }
}

/// Expects a `TRUST_VIOLATION` and tells it: code, fak reason, field, message and next step.
fn refused<T>(who: &Agent, what: &str, outcome: Result<T, SdkError>) -> Result<(), CliError> {
    match outcome {
        Err(SdkError::Rejected(r)) if r.code == Code::TrustViolation => {
            println!("  {} {what}: refused.", who.label());
            println!("    code        {}", r.code.as_str());
            println!("    fak_reason  {}", r.fak_reason().map(|f| f.as_str()).unwrap_or("-"));
            println!("    field       {}", r.field.as_deref().unwrap_or("-"));
            println!("    message     {}", escaped(r.message.as_bytes(), 160));
            println!("    next step   {}", r.next.as_str());
            Ok(())
        }
        Err(e) => Err(failed(what, e)),
        Ok(_) => Err(unexpected(format!("{} {what}: accepted, but the floor should refuse it", who.label()))),
    }
}
