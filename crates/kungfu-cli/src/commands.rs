//! Runs one parsed command: resolves endpoints and key (flag, then environment, then profile),
//! makes the SDK call and prints the result as a table or as JSON.

use crate::cli::{AssignmentCmd, Cli, ClusterCmd, Command, Content, MemoryCmd, TaskCmd, ThreadCmd};
use crate::contract;
use crate::ctx::{Ctx, KeySource, MAX_PAGES, command_key, endpoints, read_path, status_error, written};
use crate::error::CliError;
use crate::output::{self, cell, content_text, instant, pairs, table, to_json};
use crate::profile::{self, Profile};
use crate::turn_watch::obligation;
use kungfu_client::{Client, ClientOptions, Post, RetryCause, RetryHook, Retrying, Written, pb};
use serde_json::{Value, json};
use std::time::Duration;

/// `kungfu bench …`: replaces this process with the benchmark harness `kungfu-bench`, with the
/// arguments and `--json` passed on, so its output, exit status and signals are the harness's own.
/// Returns only when the harness cannot be run.
pub fn exec_bench(args: Vec<std::ffi::OsString>, json: bool) -> CliError {
    use std::os::unix::process::CommandExt;
    let binary = match crate::dev::find_kungfu_bench() {
        Ok(b) => b,
        Err(e) => return e,
    };
    let mut cmd = std::process::Command::new(&binary);
    if json {
        cmd.arg("--json");
    }
    let e = cmd.args(args).exec();
    CliError::other(format!("cannot run {}: {e}", binary.display()))
}

/// Runs the command.
pub async fn run(cli: Cli) -> Result<(), CliError> {
    // `mcp` serves the door over its own channel; stdout is the protocol stream from here on.
    if let Command::Mcp { list_tools, .. } = cli.command {
        return crate::mcp::run(&cli, list_tools).await;
    }
    // `dev` and `demo` manage their own connections (or none).
    if matches!(cli.command, Command::Dev(_) | Command::Demo { .. }) {
        let settings = crate::demo::Settings::from_cli(&cli);
        return match cli.command {
            Command::Dev(cmd) => crate::dev::run(cmd).await,
            Command::Demo { scenario: Some(crate::cli::DemoCmd::Coord) } => crate::demo_coord::run(settings).await,
            _ => crate::demo::run(settings).await,
        };
    }
    let profiles = profile::load()?;
    let saved = profiles.profiles.get(&cli.profile).cloned().unwrap_or_default();
    let endpoints = endpoints(&cli, &saved);
    // Every `cluster` command but `restore` (local work on this machine) sends the operator token.
    let operator = matches!(&cli.command, Command::Cluster(c) if !matches!(c, ClusterCmd::Restore { .. }));
    let (key, key_source) = command_key(cli.key.clone(), &saved, operator)?;
    let options = ClientOptions {
        call_timeout: Duration::from_secs(cli.timeout_secs.max(1)),
        connect_timeout: cli.connect_timeout,
        max_retries: cli.retries,
        on_retry: retry_progress(cli.json),
        ..ClientOptions::default()
    };
    let client = Client::connect(endpoints.clone(), key, options.clone()).await?;
    let ctx = Ctx { client, json: cli.json, key: cli.idempotency_key.clone(), options, key_source };
    match cli.command {
        Command::Register { no_save } => register(&ctx, &cli.profile, &saved, endpoints, no_save).await,
        Command::Turn => turn(&ctx).await,
        Command::Opportunities => opportunities(&ctx).await,
        Command::Ws { object } => working_set(&ctx, &object).await,
        Command::Memory(c) => memory(&ctx, c).await,
        Command::Thread(c) => thread(&ctx, c).await,
        Command::Assignment(c) => assignment(&ctx, c).await,
        Command::Task(c) => task(&ctx, c).await,
        Command::Send(args) => crate::coordination::send(&ctx, args).await,
        Command::Record(cmd) => crate::record::run(&ctx, cmd).await,
        Command::Mailbox { thread, after, asked_me, follow, page_size } => {
            crate::coordination::mailbox(&ctx, &thread, after, asked_me, follow, page_size).await
        }
        Command::Scatter(args) => crate::coordination::scatter(&ctx, args).await,
        Command::Gather { thread, header, reduce } => {
            crate::coordination::gather(&ctx, &thread, header, reduce.as_deref()).await
        }
        Command::Barrier(args) => crate::coordination::barrier(&ctx, args).await,
        // `bench` runs another program and never reaches here (main.rs).
        Command::Dev(_)
        | Command::Demo { .. }
        | Command::Bench { .. }
        | Command::Mcp { .. }
        | Command::Completions { .. } => {
            Err(CliError::other("dev, demo, bench, mcp and completions are handled before connecting"))
        }
        Command::Watch(c) => watch(&ctx, c).await,
        Command::Agent(crate::cli::AgentCmd::Serve(args)) => {
            crate::serve::run(&ctx, &cli.profile, saved.agent_id.clone(), &endpoints, args).await
        }
        Command::Agent(crate::cli::AgentCmd::Wake(cmd)) => wake(&ctx, cmd).await,
        Command::Cluster(c) => cluster(&ctx, c, &endpoints).await,
    }
}

/// A line on stderr before each retry of the SDK, shown only to a person (not with `--json`, not
/// when stderr is not a terminal), so a call that waits for a leader is not silent.
fn retry_progress(json: bool) -> Option<RetryHook> {
    use std::io::IsTerminal;
    if json || !std::io::stderr().is_terminal() {
        return None;
    }
    Some(RetryHook::new(|r| eprintln!("{}", retry_line(r))))
}

/// `waiting for a leader… (attempt 3, 2.1 s)`.
pub(crate) fn retry_line(r: &Retrying) -> String {
    let what = match r.cause {
        RetryCause::NoLeader => "waiting for a leader…".to_string(),
        RetryCause::RateLimited => "rate limited, waiting…".to_string(),
        RetryCause::Unknown => "the outcome is unknown, retrying with the same idempotency key…".to_string(),
        RetryCause::Transport(_) => format!("{}; retrying…", r.last),
    };
    format!("{what} (attempt {}, {:.1} s)", r.attempt, r.elapsed.as_secs_f64())
}

/// The content of `--text` or `--file`; None when neither is given.
fn content(c: &Content) -> Result<Option<Vec<u8>>, CliError> {
    match (&c.text, &c.file) {
        (Some(t), _) => Ok(Some(t.as_bytes().to_vec())),
        (None, Some(path)) => read_path(path).map(Some),
        (None, None) => Ok(None),
    }
}

/// The content of `--text` or `--file`, which must be given.
fn required(c: &Content, what: &str) -> Result<Vec<u8>, CliError> {
    content(c)?
        .ok_or_else(|| CliError::usage(format!("give the {what} with --text TEXT or --file PATH (`-` for stdin)")))
}

fn role(s: &str) -> Result<pb::Role, CliError> {
    match s.to_ascii_lowercase().as_str() {
        "observer" => Ok(pb::Role::Observer),
        "speaker" => Ok(pb::Role::Speaker),
        "governor" => Ok(pb::Role::Governor),
        other => Err(CliError::usage(format!("role `{other}` is not one of: observer, speaker, governor"))),
    }
}

/// Optional text for a table: the text, or `-`.
fn plain(v: &Value) -> String {
    cell("", v)
}

/// Prints a write whose response has only a receipt.
macro_rules! done {
    ($ctx:expr, $w:expr) => {{
        let w = $w;
        written($ctx, &w.value.receipt, w.replayed, &w.idempotency_key, vec![]);
        Ok(())
    }};
}

async fn register(
    ctx: &Ctx,
    name: &str,
    saved: &Profile,
    endpoints: Vec<String>,
    no_save: bool,
) -> Result<(), CliError> {
    let r = ctx.client.register(ctx.idem()).await?;
    let path = if no_save {
        None
    } else {
        // The profile keeps its operator token file: registering an agent in `dev` leaves the
        // operator commands working.
        let p = Profile {
            endpoints,
            agent_key: Some(r.agent_key.clone()),
            agent_id: Some(r.agent.clone()),
            operator_token_file: saved.operator_token_file.clone(),
        };
        Some(profile::save(name, p)?)
    };
    let w: &Written<pb::RegisterResponse> = &r.written;
    let saved = path.map(|p| Value::String(p.display().to_string())).unwrap_or(Value::Null);
    written(
        ctx,
        &w.value.receipt,
        w.replayed,
        &w.idempotency_key,
        vec![
            ("agent", Value::String(r.agent.clone())),
            ("agent_key", Value::String(r.agent_key.clone())),
            ("profile", Value::String(name.to_string())),
            ("profile_file", saved),
        ],
    );
    Ok(())
}

fn next_step(n: i32) -> String {
    pb::NextStep::try_from(n)
        .map(|s| s.as_str_name().trim_start_matches("NEXT_STEP_").to_ascii_lowercase())
        .unwrap_or_else(|_| n.to_string())
}

fn turn_rows(items: &[pb::TurnItem]) -> Vec<Vec<String>> {
    items
        .iter()
        .map(|i| {
            vec![
                obligation(&i.obligation),
                i.object.clone(),
                next_step(i.next),
                instant(i.arose_at_unix_micros),
                i.due_at_unix_micros.map(instant).unwrap_or_else(|| "-".into()),
            ]
        })
        .collect()
}

const TURN_HEADER: [&str; 5] = ["OBLIGATION", "OBJECT", "NEXT", "AROSE", "DUE"];

async fn turn(ctx: &Ctx) -> Result<(), CliError> {
    let turn = ctx.agent()?.turn_full(MAX_PAGES).await?;
    if ctx.json {
        output::print_json(&json!({
            "items": turn.items.iter().map(to_json).collect::<Vec<_>>(),
            "wake_failed": turn.wake_failed.iter().map(to_json).collect::<Vec<_>>(),
        }));
        return Ok(());
    }
    table(&TURN_HEADER, &turn_rows(&turn.items));
    // docs/wake.md: a webhook given up on is shown where the agent looks.
    for t in &turn.wake_failed {
        if let Some(f) = &t.failed {
            eprintln!(
                "wake target {} ({}) FAILED at #{} ({}): {}; nothing more is sent to it: set a new one (kungfu agent wake set) and remove this one",
                t.id,
                t.url,
                f.sequence,
                instant(f.at_unix_micros),
                f.error
            );
        }
    }
    Ok(())
}

async fn opportunities(ctx: &Ctx) -> Result<(), CliError> {
    let client = ctx.agent()?;
    let mut items = Vec::new();
    let mut cursor = String::new();
    for _ in 0..MAX_PAGES {
        let page =
            client.get_opportunities(pb::GetOpportunitiesRequest { cursor: cursor.clone(), page_size: 0 }).await?;
        items.extend(page.items);
        if page.next_cursor.is_empty() || page.next_cursor == cursor {
            break;
        }
        cursor = page.next_cursor;
    }
    if ctx.json {
        output::print_json(&json!({ "items": items.iter().map(to_json).collect::<Vec<_>>() }));
        return Ok(());
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|o| {
            let what = match &o.kind {
                Some(pb::opportunity::Kind::Assignment(a)) => format!("assignment {a}"),
                Some(pb::opportunity::Kind::Task(t)) => format!("task {t}"),
                None => "-".to_string(),
            };
            vec![what, o.object.clone(), instant(o.arose_at_unix_micros)]
        })
        .collect();
    table(&["OPPORTUNITY", "OBJECT", "AROSE"], &rows);
    Ok(())
}

async fn working_set(ctx: &Ctx, object: &str) -> Result<(), CliError> {
    let ws = ctx.agent()?.get_working_set(pb::GetWorkingSetRequest { object: object.to_string() }).await?;
    if ctx.json {
        output::print_json(&to_json(&ws));
        return Ok(());
    }
    let mut rows = vec![("object", ws.object.clone())];
    if let Some(Value::Object(cases)) = to_json(&ws).get("summary") {
        for (case, fields) in cases {
            rows.push(("kind", case.clone()));
            if let Value::Object(fields) = fields {
                for (k, v) in fields {
                    rows.push((k.as_str(), cell(k, v)));
                }
            }
        }
        let owned: Vec<(String, String)> = rows.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        let mut owned = owned;
        owned.push(("your role".into(), output::role(ws.role)));
        owned.push(("available actions".into(), ws.available_actions.join(", ")));
        let b: Vec<(&str, String)> = owned.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        pairs(&b);
    }
    println!("\nobligations:");
    table(&TURN_HEADER, &turn_rows(&ws.obligations));
    println!("\nhistory (newest first):");
    let history: Vec<Vec<String>> = ws
        .history
        .iter()
        .map(|h| {
            vec![
                format!("{}.{}", h.seq, h.idx),
                instant(h.at_unix_micros),
                h.actor.clone().unwrap_or_else(|| "-".into()),
                h.fact.clone(),
            ]
        })
        .collect();
    table(&["SEQ", "AT", "ACTOR", "FACT"], &history);
    Ok(())
}

async fn memory(ctx: &Ctx, cmd: MemoryCmd) -> Result<(), CliError> {
    let c = ctx.agent()?;
    let k = ctx.idem();
    match cmd {
        MemoryCmd::Create(body) => {
            let body = required(&body, "content")?;
            let req = pb::CreateMemoryRequest { content: kungfu_client::content(body), ..Default::default() };
            done!(ctx, c.create_memory(req, k).await?)
        }
        MemoryCmd::Update { memory, content: body } => {
            let body = required(&body, "content")?;
            let req = pb::UpdateMemoryRequest { memory, content: kungfu_client::content(body), ..Default::default() };
            done!(ctx, c.update_memory(req, k).await?)
        }
        MemoryCmd::Publish { memory } => {
            done!(ctx, c.publish_memory(pb::PublishMemoryRequest { memory, ..Default::default() }, k).await?)
        }
        MemoryCmd::Unpublish { memory } => {
            done!(ctx, c.unpublish_memory(pb::UnpublishMemoryRequest { memory, ..Default::default() }, k).await?)
        }
        MemoryCmd::Withdraw { memory } => {
            done!(ctx, c.withdraw_memory(pb::WithdrawMemoryRequest { memory, ..Default::default() }, k).await?)
        }
        MemoryCmd::Write { body, taint, scope, memory } => {
            crate::coordination::memory_write(ctx, &body, &taint, &scope, memory).await
        }
        MemoryCmd::Widen { memory, version, scope } => {
            crate::coordination::memory_widen(ctx, &memory, version, &scope).await
        }
        MemoryCmd::Show { memory, version } => {
            let v = c.get_memory(pb::GetMemoryRequest { memory, version }).await?;
            if ctx.json {
                let mut j = to_json(&v);
                j["text"] = content_text(&v.content);
                output::print_json(&j);
                return Ok(());
            }
            let m = v.memory.clone().unwrap_or_default();
            pairs(&[
                ("memory", m.id),
                ("author", m.author),
                ("version", format!("{} of {}", v.version, m.current_version)),
                ("public", m.public.to_string()),
                ("withdrawn", m.withdrawn_at_unix_micros.map(instant).unwrap_or_else(|| "no".into())),
                ("written", instant(v.version_created_at_unix_micros)),
                ("labels", crate::coordination::labels_text(v.labels.as_ref())),
            ]);
            println!("\n{}", plain(&content_text(&v.content)));
            Ok(())
        }
    }
}

async fn thread(ctx: &Ctx, cmd: ThreadCmd) -> Result<(), CliError> {
    let c = ctx.agent()?;
    let k = ctx.idem();
    match cmd {
        ThreadCmd::Create { subject, grant } => {
            let grant = grant.map(|g| role(&g)).transpose()?;
            let req = pb::CreateThreadRequest {
                subject: kungfu_client::content(content(&subject)?.unwrap_or_default()),
                grant: grant.map(|r| pb::GrantSpec { role: r as i32 }),
                ..Default::default()
            };
            let w = c.create_thread(req, k).await?;
            let secret = (!w.value.grant_secret.is_empty()).then(|| Value::String(w.value.grant_secret.clone()));
            let extra = secret.map(|s| vec![("grant_secret", s)]).unwrap_or_default();
            written(ctx, &w.value.receipt, w.replayed, &w.idempotency_key, extra);
            Ok(())
        }
        ThreadCmd::Grant { thread, role: r } => {
            let req = pb::IssueGrantRequest { thread, role: role(&r)? as i32, ..Default::default() };
            let w = c.issue_grant(req, k).await?;
            let secret = (!w.value.grant_secret.is_empty()).then(|| Value::String(w.value.grant_secret.clone()));
            let extra = secret.map(|s| vec![("grant_secret", s)]).unwrap_or_default();
            written(ctx, &w.value.receipt, w.replayed, &w.idempotency_key, extra);
            Ok(())
        }
        ThreadCmd::VoidGrant { thread } => {
            done!(ctx, c.void_grant(pb::VoidGrantRequest { thread, ..Default::default() }, k).await?)
        }
        ThreadCmd::Join { secret } => {
            done!(ctx, c.join(pb::JoinRequest { grant_secret: secret, ..Default::default() }, k).await?)
        }
        ThreadCmd::Leave { thread } => done!(ctx, c.leave(pb::LeaveRequest { thread, ..Default::default() }, k).await?),
        ThreadCmd::Remove { thread, member } => {
            done!(ctx, c.remove_member(pb::RemoveMemberRequest { thread, member, ..Default::default() }, k).await?)
        }
        ThreadCmd::Role { thread, member, role: r } => {
            let req = pb::ChangeRoleRequest { thread, member, role: role(&r)? as i32, ..Default::default() };
            done!(ctx, c.change_role(req, k).await?)
        }
        ThreadCmd::Post { thread, content: body, pin, reply_to, ask, ask_nobody, task_ref } => {
            let mut post = match pin {
                Some(p) => {
                    let p = contract::pin(&p)?;
                    Post::pin(&thread, &p.memory, p.version)
                }
                None => Post::content(&thread, required(&body, "entry's content (or --pin mem_5@2)")?),
            };
            if let Some(r) = reply_to {
                post = post.reply_to(r);
            }
            if ask_nobody {
                post = post.ask(Vec::<String>::new());
            } else if !ask.is_empty() {
                post = post.ask(ask);
            }
            if let Some(t) = task_ref {
                post = post.task_ref(&t);
            }
            done!(ctx, c.post(post, k).await?)
        }
        ThreadCmd::Handle { thread, entry, note } => {
            let req = pb::HandleRequest {
                thread,
                entry,
                note: note.as_deref().and_then(kungfu_client::text),
                ..Default::default()
            };
            done!(ctx, c.handle(req, k).await?)
        }
        ThreadCmd::Retract { thread, entry } => {
            done!(ctx, c.retract(pb::RetractRequest { thread, entry, ..Default::default() }, k).await?)
        }
        ThreadCmd::Close { thread } => {
            done!(ctx, c.close_thread(pb::CloseThreadRequest { thread, ..Default::default() }, k).await?)
        }
        ThreadCmd::Timeline { thread } => {
            let entries = c.timeline_all(&thread, MAX_PAGES).await?;
            if ctx.json {
                output::print_json(&json!({ "entries": entries.iter().map(to_json).collect::<Vec<_>>() }));
                return Ok(());
            }
            let rows: Vec<Vec<String>> = entries
                .iter()
                .map(|e| {
                    let pin =
                        e.pin.as_ref().map(|p| output::pin(&p.memory, p.version.into())).unwrap_or_else(|| "-".into());
                    vec![
                        e.seq.to_string(),
                        e.author.clone(),
                        instant(e.posted_at_unix_micros),
                        e.reply_to.map(|r| r.to_string()).unwrap_or_else(|| "-".into()),
                        if e.responders.is_empty() { "-".into() } else { e.responders.join(",") },
                        e.assignment.clone().or_else(|| e.task_ref.clone()).unwrap_or_else(|| "-".into()),
                        pin,
                    ]
                })
                .collect();
            table(&["SEQ", "AUTHOR", "POSTED", "REPLY_TO", "RESPONDERS", "ASSIGNMENT/TASK", "PIN"], &rows);
            Ok(())
        }
        ThreadCmd::Entry { thread, entry } => {
            let v = c.get_entry(pb::GetEntryRequest { thread, entry }).await?;
            if ctx.json {
                let mut j = to_json(&v);
                j["text"] = content_text(&v.content);
                output::print_json(&j);
                return Ok(());
            }
            let e = v.entry.clone().unwrap_or_default();
            pairs(&[
                ("entry", format!("{}#{}", e.thread, e.seq)),
                ("author", e.author),
                ("posted", instant(e.posted_at_unix_micros)),
                ("reply to", e.reply_to.map(|r| r.to_string()).unwrap_or_else(|| "-".into())),
                ("responders", e.responders.join(",")),
                ("assignment", e.assignment.unwrap_or_else(|| "-".into())),
                ("task", e.task_ref.unwrap_or_else(|| "-".into())),
                (
                    "labels",
                    if v.held {
                        "held: quarantined, content withheld".into()
                    } else {
                        crate::coordination::labels_text(v.labels.as_ref())
                    },
                ),
                (
                    "collective",
                    v.collective_size
                        .map(|n| format!("its header, {n} rank(s): kungfu gather {} {}", e.thread, e.seq))
                        .unwrap_or_else(|| "-".into()),
                ),
            ]);
            println!("\n{}", plain(&content_text(&v.content)));
            Ok(())
        }
    }
}

/// `ended: <outcome>` from an outcome enum's proto name (`ASSIGNMENT_OUTCOME_REJECTED` as
/// `rejected`), or its number when this build does not know it.
fn ended<E>(name: Result<&str, E>, number: i32) -> String {
    match name {
        Ok(n) => format!("ended: {}", n.split("_OUTCOME_").last().unwrap_or(n).to_ascii_lowercase()),
        Err(_) => format!("ended: {number}"),
    }
}

fn assignment_state(a: &pb::Assignment) -> String {
    use pb::assignment::State;
    match &a.state {
        Some(State::Open(())) => "open".into(),
        Some(State::Taken(t)) => format!("taken, delivery due {}", instant(t.delivery_due_unix_micros)),
        Some(State::Delivered(d)) => format!("delivered, judgment due {}", instant(d.judgment_due_unix_micros)),
        Some(State::Ended(e)) => ended(pb::AssignmentOutcome::try_from(e.outcome).map(|o| o.as_str_name()), e.outcome),
        None => "-".into(),
    }
}

async fn assignment(ctx: &Ctx, cmd: AssignmentCmd) -> Result<(), CliError> {
    let c = ctx.agent()?;
    let k = ctx.idem();
    match cmd {
        AssignmentCmd::Create {
            thread,
            to,
            criteria,
            criteria_file,
            content: body,
            delivery_window_secs,
            judgment_window_secs,
            reply_to,
            ask,
            ask_nobody,
        } => {
            let criteria = match (criteria, criteria_file) {
                (Some(t), _) => t.into_bytes(),
                (None, Some(p)) => read_path(&p)?,
                (None, None) => {
                    return Err(CliError::usage("give the criteria with --criteria TEXT or --criteria-file PATH"));
                }
            };
            let body = content(&body)?.unwrap_or_else(|| criteria.clone());
            let new = pb::NewAssignment {
                addressee: to,
                criteria: kungfu_client::content(criteria),
                output_structure: None,
                delivery_window_micros: delivery_window_secs.map(|s| s.saturating_mul(1_000_000)),
                judgment_window_micros: judgment_window_secs.map(|s| s.saturating_mul(1_000_000)),
            };
            let mut post = Post::content(&thread, body).assignment(new);
            if let Some(r) = reply_to {
                post = post.reply_to(r);
            }
            if ask_nobody {
                post = post.ask(Vec::<String>::new());
            } else if !ask.is_empty() {
                post = post.ask(ask);
            }
            done!(ctx, c.post(post, k).await?)
        }
        AssignmentCmd::Take { assignment } => {
            let req = pb::TakeAssignmentRequest { assignment, ..Default::default() };
            done!(ctx, c.take_assignment(req, k).await?)
        }
        AssignmentCmd::Deliver { assignment, output: out } => {
            let body = required(&out, "output")?;
            let req =
                pb::DeliverAssignmentRequest { assignment, output: kungfu_client::content(body), ..Default::default() };
            done!(ctx, c.deliver_assignment(req, k).await?)
        }
        AssignmentCmd::Adopt { assignment } => {
            let req = pb::AdoptAssignmentRequest { assignment, ..Default::default() };
            done!(ctx, c.adopt_assignment(req, k).await?)
        }
        AssignmentCmd::Reject { assignment, reason } => {
            let req =
                pb::RejectAssignmentRequest { assignment, reason: kungfu_client::text(&reason), ..Default::default() };
            done!(ctx, c.reject_assignment(req, k).await?)
        }
        AssignmentCmd::Drop { assignment } => {
            let req = pb::DropAssignmentRequest { assignment, ..Default::default() };
            done!(ctx, c.drop_assignment(req, k).await?)
        }
        AssignmentCmd::Void { assignment } => {
            let req = pb::VoidAssignmentRequest { assignment, ..Default::default() };
            done!(ctx, c.void_assignment(req, k).await?)
        }
        AssignmentCmd::Show { assignment } => {
            let a = c.get_assignment(pb::GetAssignmentRequest { assignment }).await?;
            let output_text = match &a.state {
                Some(pb::assignment::State::Delivered(d)) => content_text(&d.output),
                Some(pb::assignment::State::Ended(e)) => content_text(&e.delivered),
                _ => Value::Null,
            };
            if ctx.json {
                let mut j = to_json(&a);
                j["state_name"] = Value::String(assignment_state(&a));
                j["criteria_text"] = content_text(&a.criteria);
                j["output_text"] = output_text;
                output::print_json(&j);
                return Ok(());
            }
            pairs(&[
                ("assignment", a.id.clone()),
                ("thread", format!("{}#{}", a.thread, a.entry)),
                ("creator", a.creator.clone()),
                ("addressee", a.addressee.clone()),
                ("created", instant(a.created_at_unix_micros)),
                ("state", assignment_state(&a)),
                ("criteria", plain(&content_text(&a.criteria))),
                ("output", plain(&output_text)),
            ]);
            Ok(())
        }
    }
}

/// Reads and parses a contract file.
fn contract_file(path: &str) -> Result<contract::ContractFile, CliError> {
    let bytes = read_path(path)?;
    let text = String::from_utf8(bytes).map_err(|_| CliError::usage(format!("{path} is not UTF-8 text")))?;
    contract::parse(&text, path.ends_with(".json"))
}

fn engagement_state(e: &pb::Engagement) -> String {
    use pb::engagement::State;
    match &e.state {
        Some(State::Open(o)) => format!("open, delivery due {}", instant(o.delivery_due_unix_micros)),
        Some(State::Delivered(d)) => format!("delivered, judgment due {}", instant(d.judgment_due_unix_micros)),
        Some(State::Ended(x)) => ended(pb::EngagementOutcome::try_from(x.outcome).map(|o| o.as_str_name()), x.outcome),
        None => "-".into(),
    }
}

async fn task(ctx: &Ctx, cmd: TaskCmd) -> Result<(), CliError> {
    let c = ctx.agent()?;
    let k = ctx.idem();
    match cmd {
        TaskCmd::Create { contract, audience } => {
            let file = contract_file(&contract)?;
            let req = pb::CreateTaskRequest {
                audience: Some(file.audience(&audience)),
                contract: Some(file.draft()?),
                ..Default::default()
            };
            done!(ctx, c.create_task(req, k).await?)
        }
        TaskCmd::Revise { task, contract } => {
            let file = contract_file(&contract)?;
            let req = pb::ReviseContractRequest { task, contract: Some(file.draft()?), ..Default::default() };
            done!(ctx, c.revise_contract(req, k).await?)
        }
        TaskCmd::Pause { task } => {
            done!(ctx, c.pause_task(pb::PauseTaskRequest { task, ..Default::default() }, k).await?)
        }
        TaskCmd::Resume { task } => {
            done!(ctx, c.resume_task(pb::ResumeTaskRequest { task, ..Default::default() }, k).await?)
        }
        TaskCmd::Take { task } => done!(ctx, c.take_task(pb::TakeTaskRequest { task, ..Default::default() }, k).await?),
        TaskCmd::Deliver { task, output: out, take } => {
            let body = required(&out, "output")?;
            let req = pb::DeliverTaskRequest { task, output: kungfu_client::content(body), take, ..Default::default() };
            done!(ctx, c.deliver_task(req, k).await?)
        }
        TaskCmd::Drop { engagement } => {
            done!(ctx, c.drop_engagement(pb::DropEngagementRequest { engagement, ..Default::default() }, k).await?)
        }
        TaskCmd::Adopt { engagement } => {
            done!(ctx, c.adopt_engagement(pb::AdoptEngagementRequest { engagement, ..Default::default() }, k).await?)
        }
        TaskCmd::Reject { engagement, reason } => {
            let req =
                pb::RejectEngagementRequest { engagement, reason: kungfu_client::text(&reason), ..Default::default() };
            done!(ctx, c.reject_engagement(req, k).await?)
        }
        TaskCmd::Show { task, version } => {
            let v = c.get_task(pb::GetTaskRequest { task, version }).await?;
            let contract = v.contract.as_ref().and_then(|c| c.contract.clone()).unwrap_or_default();
            if ctx.json {
                let mut j = to_json(&v);
                j["requirements_text"] = content_text(&contract.requirements);
                output::print_json(&j);
                return Ok(());
            }
            let t = v.task.clone().unwrap_or_default();
            let audience = match t.audience.as_ref().and_then(|a| a.kind.as_ref()) {
                Some(pb::audience::Kind::Restricted(r)) => format!("restricted to {}", r.agents.join(",")),
                _ => "open".into(),
            };
            pairs(&[
                ("task", t.id),
                ("author", t.author),
                ("audience", audience),
                (
                    "version",
                    format!("{} (current {})", v.contract.as_ref().map(|c| c.version).unwrap_or(0), t.current_version),
                ),
                ("paused", t.paused.to_string()),
                ("adopted", t.adopted.to_string()),
                ("open engagements", t.open_engagements.to_string()),
                ("max adoptions", contract.max_adoptions.map(|m| m.to_string()).unwrap_or_else(|| "-".into())),
                ("judge", contract.judge.clone().unwrap_or_else(|| "the author".into())),
                ("requirements", plain(&content_text(&contract.requirements))),
            ]);
            Ok(())
        }
        TaskCmd::Engagement { engagement } => {
            let e = c.get_engagement(pb::GetEngagementRequest { engagement }).await?;
            if ctx.json {
                let mut j = to_json(&e);
                j["state_name"] = Value::String(engagement_state(&e));
                output::print_json(&j);
                return Ok(());
            }
            pairs(&[
                ("engagement", e.id.clone()),
                ("task", format!("{} (contract version {})", e.task, e.contract_version)),
                ("agent", e.agent.clone()),
                ("judge", e.judge.clone()),
                ("taken", instant(e.taken_at_unix_micros)),
                ("state", engagement_state(&e)),
            ]);
            Ok(())
        }
    }
}

fn raft_role(r: i32) -> String {
    pb::RaftRole::try_from(r)
        .map(|s| s.as_str_name().trim_start_matches("RAFT_ROLE_").to_ascii_lowercase())
        .unwrap_or_else(|_| r.to_string())
}

/// The operator client: the key is the operator token.
fn operator(ctx: &Ctx) -> Result<&Client, CliError> {
    match ctx.client.key() {
        Some(_) => Ok(&ctx.client),
        None => Err(CliError::usage(
            "cluster commands need the operator token (the node's operator_token setting): pass it with --key or set \
             KUNGFU_KEY (a cluster started by `kungfu dev up` keeps it for `--profile dev`)",
        )),
    }
}

/// `cluster restore`: local work on this machine (runs `kungfud restore`), so it needs no
/// operator token and no running node.
async fn restore(ctx: &Ctx, from: String, config: String, kungfud: Option<String>) -> Result<(), CliError> {
    let bin = crate::dev::find_kungfud(kungfud)?;
    let spinner = progress(ctx, format!("restoring {from} (verifying and installing the archive)"));
    let out = tokio::process::Command::new(&bin)
        .args(["restore", "--from", &from, "--config", &config])
        .output()
        .await
        .map_err(|e| CliError::other(format!("cannot run {}: {e}", bin.display())))?;
    spinner.finish_and_clear();
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if !out.status.success() {
        let last = stderr.lines().last().unwrap_or("restore failed").to_string();
        return Err(CliError::usage(format!("restore refused: {last}")));
    }
    if ctx.json {
        output::print_json(&json!({ "restored_from": from, "config": config }));
    } else {
        println!("restored {from} into the data directory of {config}; start kungfud with that config");
    }
    Ok(())
}

async fn cluster(ctx: &Ctx, cmd: ClusterCmd, endpoints: &[String]) -> Result<(), CliError> {
    // Restore is local work on this machine: no operator token, no running node.
    if let ClusterCmd::Restore { from, config, kungfud } = cmd {
        return restore(ctx, from, config, kungfud).await;
    }
    let c = operator(ctx)?;
    cluster_call(ctx, c, cmd, endpoints).await.map_err(|e| operator_refused(ctx, e))
}

/// The server answers `UNAUTHENTICATED` "operator token required" to a missing and to a wrong
/// token alike; the command line knows a token was sent, and where it came from.
fn operator_refused(ctx: &Ctx, mut e: CliError) -> CliError {
    if e.code != kungfu_client::Code::Unauthenticated.as_str() {
        return e;
    }
    e.message = match &ctx.key_source {
        KeySource::ProfileAgentKey => "the operator token was refused: the key sent is the profile's agent key; pass \
             the token from the node's operator_token setting with --key or KUNGFU_KEY"
            .to_string(),
        KeySource::ProfileOperatorToken(file) => format!(
            "the operator token was refused (wrong token?): the profile's token file {file} does not hold these \
             nodes' operator_token (were they started by another `kungfu dev up`?); pass the token with --key or \
             KUNGFU_KEY"
        ),
        KeySource::Given | KeySource::None => "the operator token was refused (wrong token?): pass the token from \
             the node's operator_token setting with --key or KUNGFU_KEY"
            .to_string(),
    };
    e.next = kungfu_client::NextStep::Revise.as_str().to_string();
    e
}

async fn cluster_call(ctx: &Ctx, c: &Client, cmd: ClusterCmd, endpoints: &[String]) -> Result<(), CliError> {
    // A membership is shown as rows of its own (voters, learners, ...), every other field as a cell.
    let answer = |v: Value, membership: Option<&pb::ClusterMembership>| {
        if ctx.json {
            output::print_json(&v);
        } else if let Value::Object(m) = &v {
            let mut rows: Vec<(String, String)> = Vec::new();
            for (k, x) in m {
                match (k.as_str(), membership) {
                    ("membership", Some(members)) => rows.extend(output::membership_rows(members)),
                    _ => rows.push((k.clone(), cell(k, x))),
                }
            }
            pairs(&rows.iter().map(|(k, x)| (k.as_str(), x.clone())).collect::<Vec<_>>());
        }
    };
    match cmd {
        ClusterCmd::Status => status(ctx, c, endpoints).await,
        ClusterCmd::Restore { from, config, kungfud } => restore(ctx, from, config, kungfud).await,
        ClusterCmd::AddLearner { node_id, raft, api } => {
            let r = c.add_learner(pb::AddLearnerRequest { node_id, raft_addr: raft, api_addr: api }).await?;
            answer(to_json(&r), r.membership.as_ref());
            Ok(())
        }
        ClusterCmd::ChangeMembership { voters, retain_learners } => {
            let r = c.change_membership(pb::ChangeMembershipRequest { voters, retain_learners }).await?;
            answer(to_json(&r), r.membership.as_ref());
            Ok(())
        }
        ClusterCmd::TransferLeader { to } => {
            let r = c.transfer_leader(pb::TransferLeaderRequest { to }).await?;
            answer(to_json(&r), None);
            Ok(())
        }
        ClusterCmd::Snapshot => {
            let r = c.trigger_snapshot(pb::TriggerSnapshotRequest {}).await?;
            answer(to_json(&r), None);
            Ok(())
        }
        ClusterCmd::Backup { to } => {
            let spinner = progress(ctx, format!("writing a backup to {to}"));
            let r = c.backup(pb::BackupRequest { target_dir: to }).await;
            spinner.finish_and_clear();
            let r = r?;
            if ctx.json {
                output::print_json(&to_json(&r));
            } else {
                println!("backup written to {}", r.target_dir);
                if let Some(Value::Object(m)) = to_json(&r).get("manifest") {
                    let rows: Vec<(&str, String)> = m.iter().map(|(k, x)| (k.as_str(), cell(k, x))).collect();
                    pairs(&rows);
                }
            }
            Ok(())
        }
    }
}

/// A spinner on stderr for long operator work, shown only to a person (not with `--json`, not
/// when stderr is not a terminal).
fn progress(ctx: &Ctx, message: String) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if ctx.json || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_message(message);
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

/// `cluster status`: asks the given endpoints, then every member at its own API address, and
/// prints one row per node from that node's own view, with its lag as the leader reports it.
async fn status(ctx: &Ctx, c: &Client, endpoints: &[String]) -> Result<(), CliError> {
    let first = c.cluster_status(pb::ClusterStatusRequest {}).await?;
    let membership = first.membership.clone().unwrap_or_default();
    let mut members: Vec<(pb::ClusterNode, bool)> = membership.voters.iter().map(|n| (n.clone(), true)).collect();
    members.extend(membership.learners.iter().map(|n| (n.clone(), false)));
    if members.is_empty() {
        let api = endpoints.first().cloned().unwrap_or_default();
        members.push((pb::ClusterNode { node_id: first.node_id, raft_addr: String::new(), api_addr: api }, true));
    }
    let mut views: Vec<(pb::ClusterNode, bool, Option<pb::ClusterStatusResponse>)> = Vec::new();
    for (node, voter) in members {
        let view = if node.node_id == first.node_id {
            Some(first.clone())
        } else if node.api_addr.is_empty() {
            None
        } else {
            let options = ClientOptions { max_retries: 0, call_timeout: Duration::from_secs(2), ..ctx.options.clone() };
            match Client::connect(vec![node.api_addr.clone()], c.key().map(str::to_string), options).await {
                Ok(one) => one.cluster_status(pb::ClusterStatusRequest {}).await.ok(),
                Err(_) => None,
            }
        };
        views.push((node, voter, view));
    }
    // The leader's replication progress gives each follower's lag.
    let leader_view = views.iter().filter_map(|(_, _, v)| v.as_ref()).find(|v| v.role == pb::RaftRole::Leader as i32);
    let lag = |id: u64| -> Option<u64> {
        let l = leader_view?;
        if l.node_id == id {
            return Some(0);
        }
        l.replication.iter().find(|p| p.node_id == id).map(|p| p.lag_entries)
    };
    let rows: Vec<Value> = views
        .iter()
        .map(|(node, voter, view)| match view {
            Some(v) => json!({
                "node_id": node.node_id,
                "api_addr": node.api_addr,
                "voter": voter,
                "reachable": true,
                "role": raft_role(v.role),
                "term": v.term,
                "leader_id": v.leader_id,
                "last_log_index": v.last_log_index,
                "committed_index": v.committed_index,
                "applied_index": v.applied_index,
                "lag_entries": lag(node.node_id),
                "fatal_error": if v.fatal_error.is_empty() { Value::Null } else { Value::String(v.fatal_error.clone()) },
                "damaged": if v.damaged.is_empty() { Value::Null } else { Value::String(v.damaged.clone()) },
                "log_bytes": v.log_bytes,
                "state_bytes": v.state_bytes,
                "snapshots_bytes": v.snapshots_bytes,
            }),
            None => json!({
                "node_id": node.node_id,
                "api_addr": node.api_addr,
                "voter": voter,
                "reachable": false,
                "role": "unreachable",
                "lag_entries": lag(node.node_id),
            }),
        })
        .collect();
    if ctx.json {
        output::print_json(&json!({ "cluster_id": first.cluster_id, "answered_by": first.node_id, "nodes": rows }));
        return Ok(());
    }
    println!("cluster {} (answered by node {})", first.cluster_id, first.node_id);
    let at = |v: &Value, k: &str| cell(k, v.get(k).unwrap_or(&Value::Null));
    let table_rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                at(r, "node_id"),
                at(r, "role"),
                at(r, "term"),
                at(r, "leader_id"),
                at(r, "last_log_index"),
                at(r, "applied_index"),
                at(r, "lag_entries"),
                size(r, "log_bytes"),
                size(r, "state_bytes"),
                size(r, "snapshots_bytes"),
                at(r, "api_addr"),
            ]
        })
        .collect();
    table(
        &["NODE", "ROLE", "TERM", "LEADER", "LAST LOG", "APPLIED", "LAG", "LOG", "STATE", "SNAPSHOTS", "API"],
        &table_rows,
    );
    for r in &rows {
        if let Some(fatal) = r.get("fatal_error").and_then(Value::as_str) {
            println!("node {}: raft stopped: {fatal}", at(r, "node_id"));
        }
        if let Some(damaged) = r.get("damaged").and_then(Value::as_str) {
            println!("node {}: {damaged}", at(r, "node_id"));
        }
    }
    Ok(())
}

/// A byte count of a `cluster status` row in binary units (`12.3 MiB`); `-` when the node did not
/// report it (unreachable, or older than issue #36).
fn size(row: &Value, key: &str) -> String {
    let Some(bytes) = row.get(key).and_then(Value::as_u64) else {
        return "-".to_string();
    };
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} B") } else { format!("{value:.1} {}", UNITS[unit]) }
}

/// `kungfu watch`: prints events as they arrive, one line each (one JSON object per line with
/// `--json`), until the stream ends or the process is interrupted.
async fn watch(ctx: &Ctx, cmd: crate::cli::WatchCmd) -> Result<(), CliError> {
    use crate::cli::WatchCmd;
    let c = ctx.agent()?;
    match cmd {
        WatchCmd::Thread { thread, after } => {
            let mut stream = c.watch_thread(&thread, after).await?;
            while let Some(event) = stream.message().await.map_err(status_error)? {
                for e in &event.entries {
                    if ctx.json {
                        println!(
                            "{}",
                            json!({ "thread": thread, "entry": to_json(e), "applied_index": event.applied_index })
                        );
                    } else {
                        println!(
                            "{} #{} by {} at {}",
                            thread,
                            e.seq,
                            e.author,
                            output::instant(e.posted_at_unix_micros)
                        );
                    }
                }
            }
        }
        WatchCmd::Turn { cursor } => {
            // Reopened from the last cursor when a node fails or the leader changes.
            let mut watch = crate::turn_watch::TurnWatch::new(c.clone(), cursor, None, Some("kungfu watch turn"));
            loop {
                let event = watch.next().await?;
                if ctx.json {
                    println!("{}", to_json(&event));
                    continue;
                }
                if event.reset {
                    println!("turn (reset):");
                }
                for row in turn_rows(&event.upserted) {
                    println!("  + {}", row.join("  "));
                }
                for r in &event.removed {
                    println!("  - {}", obligation(&Some(r.clone())));
                }
                if !event.cursor.is_empty() {
                    println!("cursor {}", event.cursor);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kungfu_client::TransportKind;

    #[test]
    fn cluster_status_shows_each_part_of_the_data_directory_in_binary_units() {
        let row =
            json!({ "log_bytes": 512, "state_bytes": 3 * 1024 * 1024 + 300 * 1024, "snapshots_bytes": 5u64 << 30 });
        assert_eq!(size(&row, "log_bytes"), "512 B");
        assert_eq!(size(&row, "state_bytes"), "3.3 MiB");
        assert_eq!(size(&row, "snapshots_bytes"), "5.0 GiB");
        assert_eq!(size(&json!({ "log_bytes": null }), "log_bytes"), "-", "a node that did not report it");
    }

    #[test]
    fn a_retry_line_says_what_it_waits_for_with_the_attempt_and_time() {
        let mut r = Retrying {
            attempt: 3,
            elapsed: Duration::from_millis(2140),
            wait: Duration::from_millis(200),
            cause: RetryCause::NoLeader,
            last: "127.0.0.1:7411: NOT_LEADER: knows no leader yet".into(),
        };
        assert_eq!(retry_line(&r), "waiting for a leader… (attempt 3, 2.1 s)");
        r.cause = RetryCause::Transport(TransportKind::NothingListening);
        r.last = "nothing listening at 127.0.0.1:7411 (connection refused)".into();
        assert_eq!(
            retry_line(&r),
            "nothing listening at 127.0.0.1:7411 (connection refused); retrying… (attempt 3, 2.1 s)"
        );
    }
}

/// `kungfu agent wake …` (docs/wake.md).
async fn wake(ctx: &Ctx, cmd: crate::cli::WakeCmd) -> Result<(), CliError> {
    use crate::cli::WakeCmd;
    let c = ctx.agent()?;
    let k = ctx.idem();
    match cmd {
        WakeCmd::Set { url, kinds, objects } => {
            let kinds = kinds
                .iter()
                .map(|k| match k.as_str() {
                    "response" => Ok(pb::ObligationKind::Response as i32),
                    "delivery" => Ok(pb::ObligationKind::Delivery as i32),
                    "judgment" => Ok(pb::ObligationKind::Judgment as i32),
                    other => Err(CliError::usage(format!("--kind {other}: expected response, delivery or judgment"))),
                })
                .collect::<Result<Vec<_>, _>>()?;
            let req = pb::SetWakeTargetRequest { url, kinds, objects, ..Default::default() };
            let w = c.set_wake_target(req, k).await?;
            let secret = (!w.value.secret.is_empty()).then(|| Value::String(w.value.secret.clone()));
            let extra = secret.map(|s| vec![("secret", s)]).unwrap_or_default();
            written(ctx, &w.value.receipt, w.replayed, &w.idempotency_key, extra);
            Ok(())
        }
        WakeCmd::List => {
            let list = c.list_wake_targets(pb::ListWakeTargetsRequest {}).await?;
            if ctx.json {
                output::print_json(&to_json(&list));
                return Ok(());
            }
            let rows: Vec<Vec<String>> = list
                .targets
                .iter()
                .map(|t| {
                    let status = match &t.failed {
                        Some(f) => format!("FAILED at #{} ({}): {}", f.sequence, instant(f.at_unix_micros), f.error),
                        None if t.queued > t.delivered => format!("delivering #{}", t.queued),
                        None => "up to date".to_string(),
                    };
                    vec![t.id.clone(), t.url.clone(), t.queued.to_string(), t.delivered.to_string(), status]
                })
                .collect();
            table(&["target", "url", "queued", "delivered", "status"], &rows);
            Ok(())
        }
        WakeCmd::Remove { target } => {
            done!(ctx, c.remove_wake_target(pb::RemoveWakeTargetRequest { target, ..Default::default() }, k).await?)
        }
    }
}
