//! The coordination commands (COORDINATION §2, §3, §4): `memory write` and `memory widen`,
//! `send`, `mailbox`, `scatter`, `gather` and `barrier`, and the pure parsing they share (labels,
//! bodies, goals, durations), kept here so it is tested without a server.
//!
//! Participant content is untrusted (L6): tables show it only through [`output::escaped`], so a
//! message cannot move the cursor, clear the screen or reorder a line. `--json` carries it as a JSON
//! string, which escapes every control character.

use crate::cli::{BarrierArgs, BarrierCmd, LabelArgs, ScatterArgs, SendArgs};
use crate::ctx::{Ctx, MAX_PAGES, read_path, written};
use crate::error::CliError;
use crate::output::{self, escaped, table, to_json};
use kungfu_client::coord::{self, Gathered};
use kungfu_client::reduce::{Combined, Reduction};
use kungfu_client::{AgentId, Labels, Message, Scatter, Scope, Taint, pb};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

/// How many characters of content a table shows.
const PREVIEW_CHARS: usize = 60;

/// The labels inline text gets on the coordination path when none are given: the least a thread
/// entry needs (fleet) and no claim of trust (tainted).
pub const DEFAULT_LABELS: Labels = Labels { taint: Taint::Tainted, scope: Scope::Fleet };

/// How long `mailbox --follow` waits in one receive before it waits again (nothing is lost between).
const FOLLOW_WAIT: Duration = Duration::from_secs(60);

// --- Parsing (pure) ---------------------------------------------------------------------------------

/// A taint named on the command line.
pub fn taint(s: &str) -> Result<Taint, CliError> {
    Taint::parse(&s.to_ascii_lowercase()).ok_or_else(|| {
        CliError::usage(format!("taint `{s}` is not one of: trusted, tainted, quarantined")).with_field("--taint")
    })
}

/// A scope named on the command line.
pub fn scope(s: &str) -> Result<Scope, CliError> {
    Scope::parse(&s.to_ascii_lowercase()).ok_or_else(|| {
        CliError::usage(format!("scope `{s}` is not one of: agent, fleet, tenant, public")).with_field("--scope")
    })
}

/// The labels of `--taint` and `--scope`, each defaulting to [`DEFAULT_LABELS`].
pub fn labels(args: &LabelArgs) -> Result<Labels, CliError> {
    Ok(Labels {
        taint: args.taint.as_deref().map(taint).transpose()?.unwrap_or(DEFAULT_LABELS.taint),
        scope: args.scope.as_deref().map(scope).transpose()?.unwrap_or(DEFAULT_LABELS.scope),
    })
}

/// Where a body argument's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The text itself.
    Text(String),
    /// A file (`-`: stdin).
    File(String),
}

/// A body argument: `@path` reads a file (`@-` stdin), `@@…` is text that starts with `@`, anything
/// else is the text itself.
pub fn source(arg: &str) -> Source {
    match arg.strip_prefix('@') {
        Some(rest) if rest.starts_with('@') => Source::Text(rest.to_string()),
        Some(path) => Source::File(path.to_string()),
        None => Source::Text(arg.to_string()),
    }
}

/// The bytes of a body argument.
pub(crate) fn body(arg: &str) -> Result<Vec<u8>, CliError> {
    match source(arg) {
        Source::Text(t) => Ok(t.into_bytes()),
        Source::File(path) if path.is_empty() => Err(CliError::usage("`@` needs a path (`@-` reads stdin)")),
        Source::File(path) => read_path(&path),
    }
}

/// The `--goal` values as (member, text), checked: `ag_N=text`, each member once.
pub fn goals(values: &[String]) -> Result<Vec<(AgentId, String)>, CliError> {
    let mut seen = BTreeSet::new();
    values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let field = format!("--goal[{i}]");
            let (member, text) = v
                .split_once('=')
                .ok_or_else(|| CliError::usage(format!("`{v}` is not a goal: write ag_1=text")).with_field(&field))?;
            let member: AgentId = member.trim().parse().map_err(|_| {
                CliError::usage(format!("`{member}` is not an agent id (ag_1) in goal `{v}`")).with_field(&field)
            })?;
            if !seen.insert(member) {
                return Err(CliError::usage(format!("{member} has more than one goal; give each member one"))
                    .with_field(&field));
            }
            Ok((member, text.to_string()))
        })
        .collect()
}

/// A duration such as `90s`, `500ms`, `30m`, `1h30m` or `2d`; a bare number is seconds.
pub fn duration(s: &str) -> Result<Duration, CliError> {
    let bad = || CliError::usage(format!("`{s}` is not a duration: write 90s, 500ms, 30m, 1h30m or 2d"));
    let t = s.trim();
    if t.is_empty() {
        return Err(bad());
    }
    if t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse::<u64>().map(Duration::from_secs).map_err(|_| bad());
    }
    let mut total = Duration::ZERO;
    let mut rest = t;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = match &rest[..unit_len] {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.checked_mul(60).ok_or_else(bad)?),
            "h" => Duration::from_secs(n.checked_mul(3600).ok_or_else(bad)?),
            "d" => Duration::from_secs(n.checked_mul(86_400).ok_or_else(bad)?),
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total = total.checked_add(unit).ok_or_else(bad)?;
    }
    Ok(total)
}

/// Labels as `taint/scope`, `unlabeled` when absent.
pub fn labels_text(l: Option<&pb::Labels>) -> String {
    match l.and_then(kungfu_client::build::labels_from) {
        Some(l) => format!("{}/{}", l.taint, l.scope),
        None => "unlabeled".into(),
    }
}

/// A preview of a mail item's content, safe for a terminal.
pub fn item_preview(item: &pb::MailItem) -> String {
    if item.held {
        return "(held: quarantined content is never shown)".into();
    }
    if item.content_omitted {
        let e = item.entry.clone().unwrap_or_default();
        return format!("(not inline: kungfu thread entry {} {})", e.thread, e.seq);
    }
    match &item.content {
        Some(c) => escaped(&c.body, PREVIEW_CHARS),
        None => "(unreadable: the pinned Memory is no longer shared)".into(),
    }
}

/// The caller's own response to an entry, in a word or two.
pub fn my_response(r: Option<&pb::OwedResponse>) -> String {
    use pb::response_ending::How;
    let Some(r) = r else { return "-".into() };
    match r.ending.as_ref().and_then(|e| e.how.as_ref()) {
        None => "owed".into(),
        Some(How::RepliedByEntry(e)) => format!("replied #{e}"),
        Some(How::Handled(_)) => "handled".into(),
        Some(How::Retracted(())) => "retracted".into(),
        Some(How::MembershipEnded(())) => "left".into(),
        Some(How::Demoted(())) => "demoted".into(),
        Some(How::ThreadClosed(())) => "closed".into(),
    }
}

/// The name of a barrier arrival (`membership_ended`).
fn arrival_name(a: i32) -> String {
    pb::BarrierArrival::try_from(a)
        .map(|a| a.as_str_name().trim_start_matches("BARRIER_ARRIVAL_").to_ascii_lowercase())
        .unwrap_or_else(|_| a.to_string())
}

fn barrier_state_name(b: &pb::Barrier) -> String {
    coord::barrier_state(b).as_str_name().trim_start_matches("BARRIER_STATE_").to_ascii_lowercase()
}

// --- Commands ---------------------------------------------------------------------------------------

/// `kungfu memory write`.
pub async fn memory_write(
    ctx: &Ctx,
    arg: &str,
    taint_arg: &str,
    scope_arg: &str,
    memory: Option<String>,
) -> Result<(), CliError> {
    let c = ctx.agent()?;
    let with = Labels { taint: taint(taint_arg)?, scope: scope(scope_arg)? };
    let req = kungfu_client::build::write_labeled(memory.as_deref(), body(arg)?, with);
    let w = c.write_labeled(req, ctx.idem()).await?;
    written(ctx, &w.value.receipt, w.replayed, &w.idempotency_key, vec![]);
    Ok(())
}

/// `kungfu memory widen`.
pub async fn memory_widen(ctx: &Ctx, memory: &str, version: u32, scope_arg: &str) -> Result<(), CliError> {
    let c = ctx.agent()?;
    let req = kungfu_client::build::widen_scope(memory, version, scope(scope_arg)?);
    let w = c.widen_scope(req, ctx.idem()).await?;
    written(ctx, &w.value.receipt, w.replayed, &w.idempotency_key, vec![]);
    Ok(())
}

/// The send request of `kungfu send` (pure but for reading an `@file` body).
pub fn send_request(args: &SendArgs) -> Result<pb::SendRequest, CliError> {
    let content = match (&args.pin, &args.body) {
        (Some(p), _) => {
            let p = crate::contract::pin(p)?;
            kungfu_client::pinned(&p.memory, p.version)
        }
        (None, Some(b)) => kungfu_client::labeled(body(b)?, labels(&args.labels)?),
        (None, None) => return Err(CliError::usage("give the message as text, `@path`, or --pin mem_5:2")),
    };
    let to = if args.all {
        kungfu_client::to_all_speakers()
    } else if args.to.is_empty() {
        kungfu_client::to_nobody()
    } else {
        kungfu_client::to_agents(args.to.iter().map(|a| a.trim().to_string()))
    };
    let mut message = Message::new(&args.thread, content).to(to);
    message = match (args.reply_to, args.latest) {
        (Some(r), true) => message.reply_to_latest(r),
        (Some(r), false) => message.reply_to(r),
        (None, _) => message,
    };
    Ok(message.into())
}

/// `kungfu send`.
pub async fn send(ctx: &Ctx, args: SendArgs) -> Result<(), CliError> {
    let c = ctx.agent()?;
    let w = c.send(send_request(&args)?, ctx.idem()).await?;
    written(ctx, &w.value.receipt, w.replayed, &w.idempotency_key, vec![]);
    Ok(())
}

/// One mail item as JSON: its structure, labels, your response and the content as text.
fn item_json(item: &pb::MailItem) -> Value {
    let mut v = to_json(item);
    v["text"] = output::content_text(&item.content);
    v
}

fn item_row(item: &pb::MailItem) -> Vec<String> {
    let e = item.entry.clone().unwrap_or_default();
    vec![
        e.seq.to_string(),
        e.author,
        e.reply_to.map(|r| r.to_string()).unwrap_or_else(|| "-".into()),
        if e.responders.is_empty() { "-".into() } else { e.responders.join(",") },
        my_response(item.my_response.as_ref()),
        if item.held { "HELD".into() } else { labels_text(item.labels.as_ref()) },
        item_preview(item),
    ]
}

const MAIL_HEADER: [&str; 7] = ["SEQ", "AUTHOR", "REPLY_TO", "ASKED", "YOU", "LABELS", "CONTENT"];

/// `kungfu mailbox`.
pub async fn mailbox(
    ctx: &Ctx,
    thread: &str,
    after: u64,
    asked_me: bool,
    follow: bool,
    page_size: u32,
) -> Result<(), CliError> {
    let c = ctx.agent()?;
    let mut mb = c.mailbox(thread, after).page_size(page_size);
    if asked_me {
        mb = mb.asked_me();
    }
    if !follow {
        let items = mb.drain(MAX_PAGES).await?;
        let cursor = mb.cursor();
        if ctx.json {
            let items: Vec<Value> = items.iter().map(item_json).collect();
            output::print_json(&json!({ "thread": thread, "items": items, "after": cursor }));
        } else {
            table(&MAIL_HEADER, &items.iter().map(item_row).collect::<Vec<_>>());
            println!("cursor {cursor} (continue with --after {cursor})");
        }
        return Ok(());
    }
    if !ctx.json {
        println!("{}", MAIL_HEADER.join("  "));
    }
    loop {
        match mb.next(FOLLOW_WAIT).await? {
            Some(item) if ctx.json => println!("{}", json!({ "thread": thread, "item": item_json(&item) })),
            Some(item) => println!("{}", item_row(&item).join("  ")),
            None if mb.closed() => {
                if !ctx.json {
                    println!("thread {thread} is closed; cursor {}", mb.cursor());
                }
                return Ok(());
            }
            None => {}
        }
    }
}

/// The scatter request of `kungfu scatter` (pure but for reading `@file` bodies).
pub fn scatter_request(args: &ScatterArgs) -> Result<pb::ScatterRequest, CliError> {
    let with = labels(&args.labels)?;
    let header = body(&args.header)?;
    let criteria = match &args.criteria {
        Some(c) => c.clone(),
        None => String::from_utf8(header.clone())
            .map_err(|_| CliError::usage("the header is not text: give --criteria").with_field("--criteria"))?,
    };
    let goals = goals(&args.goals)?
        .into_iter()
        .map(|(member, text)| Ok((member.to_string(), kungfu_client::labeled(body(&text)?, with))))
        .collect::<Result<Vec<_>, CliError>>()?;
    let mut s = Scatter::new(&args.thread, kungfu_client::labeled(header, with), goals, &criteria);
    if let Some(w) = &args.delivery_window {
        s = s.delivery_window(duration(w).map_err(|e| e.with_field("--delivery-window"))?);
    }
    if let Some(w) = &args.judgment_window {
        s = s.judgment_window(duration(w).map_err(|e| e.with_field("--judgment-window"))?);
    }
    Ok(s.into())
}

/// `kungfu scatter`.
pub async fn scatter(ctx: &Ctx, args: ScatterArgs) -> Result<(), CliError> {
    let c = ctx.agent()?;
    let w = c.scatter(scatter_request(&args)?, ctx.idem()).await?;
    if ctx.json {
        written(ctx, &w.value.receipt, w.replayed, &w.idempotency_key, vec![]);
        return Ok(());
    }
    let Some(s) = coord::scattered(&w.value) else {
        written(ctx, &w.value.receipt, w.replayed, &w.idempotency_key, vec![]);
        return Ok(());
    };
    println!(
        "ok: scatter{}: header {}#{}, {} rank(s)",
        if w.replayed { " (replayed: the stored result of this key)" } else { "" },
        s.thread,
        s.header,
        s.ranks.len()
    );
    let rows: Vec<Vec<String>> = s
        .ranks
        .iter()
        .map(|r| vec![r.rank.to_string(), r.member.clone(), r.entry.to_string(), r.assignment.clone()])
        .collect();
    table(&["RANK", "MEMBER", "ENTRY", "ASSIGNMENT"], &rows);
    println!("idempotency key  {}", w.idempotency_key);
    println!("gather with: kungfu gather {} {}", s.thread, s.header);
    Ok(())
}

/// The one place the command line folds gathered outputs: the reduction by name, in rank order,
/// refused unless every rank delivered. (The integration point with `reduce::combine`.)
pub fn combine_outputs(g: &Gathered, reduction: &str) -> Result<(Reduction, Combined), CliError> {
    let r: Reduction = reduction.parse().map_err(|e| CliError::usage(format!("{e}")).with_field("--reduce"))?;
    Ok((r, g.combine(r, &coord::Marks::default())?))
}

fn gathered_json(g: &Gathered) -> Value {
    let ranks: Vec<Value> = g
        .ranks
        .iter()
        .map(|r| {
            json!({
                "rank": r.rank,
                "member": r.member,
                "entry": r.entry,
                "assignment": r.assignment.id,
                "state": coord::assignment_state(&r.assignment),
                "output_text": r.output.as_deref().map(output::text),
            })
        })
        .collect();
    json!({
        "thread": g.thread,
        "header": g.header,
        "author": g.author,
        "complete": g.complete,
        "all_delivered": g.all_delivered,
        "ranks": ranks,
    })
}

/// `kungfu gather`.
pub async fn gather(ctx: &Ctx, thread: &str, header: u64, reduce: Option<&str>) -> Result<(), CliError> {
    let c = ctx.agent()?;
    let g = c.gather(thread, header).await?;
    let folded = reduce.map(|r| combine_outputs(&g, r));
    if ctx.json {
        let mut v = gathered_json(&g);
        if let Some(Ok((r, combined))) = &folded {
            v["reduction"] = json!({
                "reduce": r.as_str(),
                "output_text": output::text(&combined.output),
                "winner": combined.winner.map(|w| w.to_string()),
            });
        }
        output::print_json(&v);
    } else {
        println!(
            "collective {thread}#{header} by {}: {} rank(s), {}, {}",
            g.author,
            g.ranks.len(),
            if g.complete { "complete" } else { "not complete" },
            if g.all_delivered { "every rank delivered" } else { "not every rank delivered" },
        );
        let rows: Vec<Vec<String>> = g
            .ranks
            .iter()
            .map(|r| {
                vec![
                    r.rank.to_string(),
                    r.member.clone(),
                    r.assignment.id.clone(),
                    coord::assignment_state(&r.assignment),
                    r.output.as_deref().map(|o| escaped(o, PREVIEW_CHARS)).unwrap_or_else(|| "-".into()),
                ]
            })
            .collect();
        table(&["RANK", "MEMBER", "ASSIGNMENT", "STATE", "OUTPUT"], &rows);
        if let Some(Ok((r, combined))) = &folded {
            let winner = combined.winner.map(|w| format!(" (credited to {w})")).unwrap_or_default();
            println!("\ncombined ({r}){winner}:\n{}", escaped(&combined.output, usize::MAX));
        }
    }
    match folded {
        Some(Err(e)) => Err(e),
        _ => Ok(()),
    }
}

/// Prints a barrier as a table (or JSON).
fn show_barrier(ctx: &Ctx, b: &pb::Barrier) {
    if ctx.json {
        let mut v = to_json(b);
        v["state_name"] = Value::String(barrier_state_name(b));
        output::print_json(&v);
        return;
    }
    println!(
        "barrier {}#{} by {}: {} ({} of {} pending, {} absent)",
        b.thread,
        b.entry,
        b.author,
        barrier_state_name(b),
        b.pending,
        b.size,
        b.absent
    );
    let rows: Vec<Vec<String>> = b
        .ranks
        .iter()
        .map(|r| {
            vec![
                r.rank.to_string(),
                r.member.clone(),
                arrival_name(r.arrival),
                r.replied_by_entry.map(|e| format!("#{e}")).unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    table(&["RANK", "MEMBER", "ARRIVAL", "REPLY"], &rows);
    for a in coord::absent(b) {
        println!("absent: {a}");
    }
}

/// `kungfu barrier` and `kungfu barrier status`.
pub async fn barrier(ctx: &Ctx, args: BarrierArgs) -> Result<(), CliError> {
    let c = ctx.agent()?;
    if let Some(BarrierCmd::Status { thread, entry }) = args.status {
        let b = c.get_barrier(pb::GetBarrierRequest { thread, entry }).await?;
        // A read: it succeeds whatever the state is; the state is in the output (`state_name`).
        show_barrier(ctx, &b);
        return Ok(());
    }
    let thread = args.thread.clone().ok_or_else(|| CliError::usage("give the thread: kungfu barrier th_1"))?;
    let wait = args.wait.as_deref().map(duration).transpose().map_err(|e| e.with_field("--wait"))?;
    let to = if args.to.is_empty() {
        kungfu_client::to_all_speakers()
    } else {
        kungfu_client::to_agents(args.to.iter().map(|a| a.trim().to_string()))
    };
    let body = kungfu_client::labeled_text(&args.text, DEFAULT_LABELS);
    let w = c.barrier(&thread, to, body, ctx.idem()).await?;
    let Some(wait) = wait else {
        written(ctx, &w.value.receipt, w.replayed, &w.idempotency_key, vec![]);
        return Ok(());
    };
    let entry = coord::sent(&w.value).map(|s| s.entry).ok_or_else(|| CliError::other("the send answered no entry"))?;
    if !ctx.json {
        println!("barrier posted as {thread}#{entry} (idempotency key {}); waiting up to {wait:?}", w.idempotency_key);
    }
    let b = c.wait_barrier(&thread, entry, wait).await?;
    show_barrier(ctx, &b);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn parse(args: &[&str]) -> Command {
        let mut all = vec!["kungfu"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).map(|c| c.command).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    #[test]
    fn labels_parse_every_name_and_refuse_others_naming_the_flag() {
        for t in Taint::ALL {
            assert_eq!(taint(t.as_str()).ok(), Some(t));
        }
        for s in Scope::ALL {
            assert_eq!(scope(s.as_str()).ok(), Some(s));
        }
        assert_eq!(taint("QUARANTINED").ok(), Some(Taint::Quarantined));
        let e = scope("world").err().expect("not a scope");
        assert_eq!((e.code.as_str(), e.field.as_deref()), ("USAGE", Some("--scope")));
        assert!(taint("clean").is_err());
    }

    #[test]
    fn inline_text_defaults_to_tainted_fleet_and_each_flag_overrides_one_part() {
        assert_eq!(labels(&LabelArgs::default()).ok(), Some(DEFAULT_LABELS));
        let only_scope = LabelArgs { taint: None, scope: Some("public".into()) };
        assert_eq!(labels(&only_scope).ok(), Some(Labels::new(Taint::Tainted, Scope::Public)));
        let only_taint = LabelArgs { taint: Some("trusted".into()), scope: None };
        assert_eq!(labels(&only_taint).ok(), Some(Labels::new(Taint::Trusted, Scope::Fleet)));
    }

    #[test]
    fn body_arguments_read_files_only_with_a_single_at() {
        assert_eq!(source("hello"), Source::Text("hello".into()));
        assert_eq!(source("@notes.md"), Source::File("notes.md".into()));
        assert_eq!(source("@-"), Source::File("-".into()));
        assert_eq!(source("@@handle"), Source::Text("@handle".into()));
        assert_eq!(source("a@b"), Source::Text("a@b".into()));
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("goal.txt");
        std::fs::write(&path, b"from a file").expect("write");
        assert_eq!(body(&format!("@{}", path.display())).ok(), Some(b"from a file".to_vec()));
        assert!(body("@").is_err(), "a bare @ names no file");
    }

    #[test]
    fn goals_split_at_the_first_equals_and_refuse_bad_or_repeated_members() {
        let g = goals(&["ag_2=check the docs".into(), "ag_10= a=b ".into()]).expect("valid goals");
        assert_eq!(g, [(AgentId(2), "check the docs".into()), (AgentId(10), " a=b ".into())]);
        let e = goals(&["ag_2 check".into()]).err().expect("no =");
        assert_eq!(e.field.as_deref(), Some("--goal[0]"));
        let e = goals(&["ag_1=x".into(), "bob=y".into()]).err().expect("not an id");
        assert_eq!(e.field.as_deref(), Some("--goal[1]"));
        let e = goals(&["ag_1=x".into(), "ag_1=y".into()]).err().expect("a repeat");
        assert!(e.message.contains("more than one goal"), "{}", e.message);
    }

    #[test]
    fn durations_add_their_parts_and_refuse_anything_else() {
        assert_eq!(duration("90").ok(), Some(Duration::from_secs(90)));
        assert_eq!(duration("90s").ok(), Some(Duration::from_secs(90)));
        assert_eq!(duration("500ms").ok(), Some(Duration::from_millis(500)));
        assert_eq!(duration("30m").ok(), Some(Duration::from_secs(1800)));
        assert_eq!(duration("1h30m").ok(), Some(Duration::from_secs(5400)));
        assert_eq!(duration("2d").ok(), Some(Duration::from_secs(172_800)));
        assert_eq!(duration(" 1h ").ok(), Some(Duration::from_secs(3600)));
        for bad in ["", "h", "1x", "1.5h", "-1s", "1h 30m", "s1", "99999999999999999999999d", "1M"] {
            assert!(duration(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn send_builds_the_addressees_reply_and_labels_it_was_asked_for() {
        let Command::Send(args) =
            parse(&["send", "th_1", "hello", "--to", "ag_2, ag_3", "--reply-to", "4", "--latest"])
        else {
            panic!("not send")
        };
        let r = send_request(&args).expect("a request");
        assert_eq!((r.thread.as_str(), r.reply_to, r.reply_to_latest), ("th_1", Some(4), true));
        assert_eq!(r.to, Some(kungfu_client::to_agents(["ag_2", "ag_3"])));
        match r.body.and_then(|b| b.kind) {
            Some(pb::labeled_body::Kind::Content(c)) => {
                assert_eq!(c.content.map(|c| c.body), Some(b"hello".to_vec()));
                assert_eq!(c.labels.as_ref().and_then(kungfu_client::build::labels_from), Some(DEFAULT_LABELS));
            }
            other => panic!("not inline content: {other:?}"),
        }
        let Command::Send(all) = parse(&["send", "th_1", "x", "--all"]) else { panic!("not send") };
        assert_eq!(send_request(&all).expect("a request").to, Some(kungfu_client::to_all_speakers()));
        let Command::Send(nobody) = parse(&["send", "th_1", "x"]) else { panic!("not send") };
        assert_eq!(send_request(&nobody).expect("a request").to, Some(kungfu_client::to_nobody()));
        let Command::Send(pin) = parse(&["send", "th_1", "--pin", "mem_5:2"]) else { panic!("not send") };
        assert_eq!(send_request(&pin).expect("a request").body, Some(kungfu_client::pinned("mem_5", 2)));
    }

    #[test]
    fn send_flags_that_contradict_each_other_are_refused() {
        for bad in [
            &["send", "th_1", "x", "--to", "ag_2", "--all"][..],
            &["send", "th_1", "x", "--latest"],
            &["send", "th_1", "x", "--pin", "mem_1:1"],
            &["send", "th_1", "--pin", "mem_1:1", "--scope", "fleet"],
            &["send", "th_1"],
        ] {
            let mut all = vec!["kungfu"];
            all.extend_from_slice(bad);
            assert!(Cli::try_parse_from(all).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn scatter_keeps_each_goal_and_defaults_the_criteria_to_the_header() {
        let Command::Scatter(args) = parse(&[
            "scatter",
            "th_3",
            "--header",
            "Review 1.5",
            "--goal",
            "ag_7=docs",
            "--goal",
            "ag_2=tests",
            "--delivery-window",
            "1h",
            "--scope",
            "tenant",
        ]) else {
            panic!("not scatter")
        };
        let r = scatter_request(&args).expect("a request");
        assert_eq!(r.goals.iter().map(|g| g.member.as_str()).collect::<Vec<_>>(), ["ag_7", "ag_2"]);
        assert_eq!(r.criteria.map(|c| c.body), Some(b"Review 1.5".to_vec()));
        assert_eq!(r.delivery_window_micros, Some(3_600_000_000));
        assert_eq!(r.judgment_window_micros, None);
        match r.header.and_then(|h| h.kind) {
            Some(pb::labeled_body::Kind::Content(c)) => assert_eq!(
                c.labels.as_ref().and_then(kungfu_client::build::labels_from),
                Some(Labels::new(Taint::Tainted, Scope::Tenant))
            ),
            other => panic!("not inline content: {other:?}"),
        }
        let Command::Scatter(bad) =
            parse(&["scatter", "th_3", "--header", "h", "--goal", "ag_1=x", "--delivery-window", "soon"])
        else {
            panic!("not scatter")
        };
        assert_eq!(scatter_request(&bad).err().and_then(|e| e.field), Some("--delivery-window".into()));
    }

    #[test]
    fn barrier_posts_with_a_thread_and_reads_with_status() {
        let Command::Barrier(post) = parse(&["barrier", "th_1", "--to", "ag_2,ag_3", "--wait", "30s"]) else {
            panic!("not barrier")
        };
        assert_eq!((post.thread.as_deref(), post.to.len(), post.wait.as_deref()), (Some("th_1"), 2, Some("30s")));
        assert!(post.status.is_none());
        let Command::Barrier(status) = parse(&["barrier", "status", "th_1", "4"]) else { panic!("not barrier") };
        match status.status {
            Some(BarrierCmd::Status { thread, entry }) => assert_eq!((thread.as_str(), entry), ("th_1", 4)),
            None => panic!("status was read as a thread"),
        }
        assert!(Cli::try_parse_from(["kungfu", "barrier"]).is_err(), "a barrier needs a thread");
    }

    #[test]
    fn memory_write_needs_both_labels_and_widen_a_version() {
        match parse(&["memory", "write", "note", "--taint", "tainted", "--scope", "agent", "--memory", "mem_3"]) {
            Command::Memory(crate::cli::MemoryCmd::Write { body, taint, scope, memory }) => {
                assert_eq!((body.as_str(), taint.as_str(), scope.as_str()), ("note", "tainted", "agent"));
                assert_eq!(memory.as_deref(), Some("mem_3"));
            }
            other => panic!("not memory write: {other:?}"),
        }
        assert!(Cli::try_parse_from(["kungfu", "memory", "write", "note", "--taint", "tainted"]).is_err());
        match parse(&["memory", "widen", "mem_3", "2", "--scope", "fleet"]) {
            Command::Memory(crate::cli::MemoryCmd::Widen { memory, version, scope }) => {
                assert_eq!((memory.as_str(), version, scope.as_str()), ("mem_3", 2, "fleet"))
            }
            other => panic!("not memory widen: {other:?}"),
        }
    }

    #[test]
    fn demo_runs_the_default_scenario_or_coord() {
        assert!(matches!(parse(&["demo"]), Command::Demo { scenario: None }));
        assert!(matches!(parse(&["demo", "coord"]), Command::Demo { scenario: Some(crate::cli::DemoCmd::Coord) }));
    }

    #[test]
    fn a_mail_item_preview_never_shows_held_or_raw_control_content() {
        let mut item = pb::MailItem {
            entry: Some(pb::Entry { seq: 3, thread: "th_8".into(), ..Default::default() }),
            content: Some(pb::Content { body: b"hi\x1b[31m\nthere".to_vec() }),
            ..Default::default()
        };
        assert_eq!(item_preview(&item), "hi\\u{1b}[31m\\nthere");
        item.held = true;
        assert!(item_preview(&item).starts_with("(held"), "held content is never shown");
        item.held = false;
        item.content = None;
        item.content_omitted = true;
        assert_eq!(item_preview(&item), "(not inline: kungfu thread entry th_8 3)");
    }

    #[test]
    fn my_response_tells_owed_from_how_it_ended() {
        use pb::response_ending::How;
        assert_eq!(my_response(None), "-");
        let mut r = pb::OwedResponse::default();
        assert_eq!(my_response(Some(&r)), "owed");
        r.ending = Some(pb::ResponseEnding { ended_at_unix_micros: 1, how: Some(How::RepliedByEntry(9)) });
        assert_eq!(my_response(Some(&r)), "replied #9");
    }

    #[test]
    fn combine_outputs_refuses_a_partial_gather_with_its_own_code() {
        let g = Gathered {
            thread: "th_1".into(),
            header: 1,
            author: "ag_1".into(),
            complete: true,
            all_delivered: false,
            ranks: vec![coord::GatheredRank {
                rank: 0,
                member: "ag_2".into(),
                entry: 2,
                assignment: pb::Assignment::default(),
                output: None,
            }],
        };
        let e = combine_outputs(&g, "concat").err().expect("refused");
        assert_eq!((e.code.as_str(), e.next.as_str(), e.exit), ("GATHER_INCOMPLETE", "wait", crate::error::EXIT_STATE));
        assert!(e.message.contains("rank 0 (ag_2)"), "{}", e.message);
        let e = combine_outputs(&g, "median").err().expect("unknown");
        assert_eq!(e.field.as_deref(), Some("--reduce"));
    }
}
