//! `kungfu record` (COORDINATION §5): create, patch, show, events, watch and body of a shared
//! record, and the pure parsing of their arguments, kept here so it is tested without a server.
//!
//! A patch refused STALE_BASE prints the conflict as base / current / proposed with the next step
//! ([`crate::error::conflict_lines`]). Participant content is untrusted (L6): tables show it only
//! through [`escaped`]; `--json` carries it as JSON strings.

use crate::cli::{RecordCmd, RecordCreateArgs, RecordLabelArgs, RecordPatchArgs};
use crate::coordination::{DEFAULT_LABELS, body, labels_text, scope, taint};
use crate::ctx::{Ctx, status_error, written};
use crate::error::CliError;
use crate::output::{self, escaped, instant, pairs, table, to_json};
use kungfu_client::record::{body_pin, body_text, op_path};
use kungfu_client::{Labels, NewRecord, Patch, pb};
use serde_json::{Value, json};

/// How many characters of a title, state or decision a table shows.
const PREVIEW_CHARS: usize = 60;

// --- Parsing (pure) ---------------------------------------------------------------------------------

/// The labels of new inline text: `--taint` and `--content-scope`, defaulting to tainted, fleet.
pub fn content_labels(args: &RecordLabelArgs) -> Result<Labels, CliError> {
    Ok(Labels {
        taint: args.taint.as_deref().map(taint).transpose()?.unwrap_or(DEFAULT_LABELS.taint),
        scope: args
            .content_scope
            .as_deref()
            .map(|s| scope(s).map_err(|e| e.with_field("--content-scope")))
            .transpose()?
            .unwrap_or(DEFAULT_LABELS.scope),
    })
}

/// A scope flag as its wire value.
fn wire_scope(s: &str, flag: &str) -> Result<pb::Scope, CliError> {
    Ok(kungfu_client::build::scope_of(scope(s).map_err(|e| e.with_field(flag))?))
}

/// An audience flag: absent is fleet (everything).
fn audience(a: Option<&str>) -> Result<pb::Scope, CliError> {
    a.map(|a| wire_scope(a, "--audience")).transpose().map(|s| s.unwrap_or(pb::Scope::Fleet))
}

/// `ID=rest`, with the flag named on error.
fn id_value<'a>(v: &'a str, flag: &str, form: &str) -> Result<(&'a str, &'a str), CliError> {
    match v.split_once('=') {
        Some((id, rest)) if !id.trim().is_empty() => Ok((id.trim(), rest)),
        _ => Err(CliError::usage(format!("`{v}` is not {form}")).with_field(flag)),
    }
}

/// The patch of `kungfu record patch` (pure but for reading `@file` bodies): replaces first (title,
/// state, body, decision states), then appends (notes, progress notes, artifacts, decisions), each
/// group in the order given.
pub fn patch_request(args: &RecordPatchArgs) -> Result<pb::PatchRecordRequest, CliError> {
    let with = content_labels(&args.labels)?;
    // The message is written last, once the ops (and so the default text) are known.
    let mut p = Patch::new(&args.record, args.base_rev, pb::LabeledBody::default());
    if let Some(t) = &args.title {
        p = p.replace_title(t.as_bytes());
    }
    if let Some(s) = &args.state {
        p = p.replace_state(s.as_bytes());
    }
    if let Some(b) = &args.body {
        p = p.replace_body(body_text(body(b)?, with));
    }
    if let Some(pin) = &args.body_pin {
        let pin = crate::contract::pin(pin).map_err(|e| e.with_field("--body-pin"))?;
        p = p.replace_body(body_pin(&pin.memory, pin.version));
    }
    for v in &args.decide {
        let (id, state) = id_value(v, "--decide", "a decision state: write ID=STATE")?;
        p = p.replace_decision_state(id, state.as_bytes());
    }
    for (values, kind, flag) in
        [(&args.notes, pb::NoteKind::Comment, "--note"), (&args.progress, pb::NoteKind::Progress, "--progress")]
    {
        for v in values {
            let (id, text) = id_value(v, flag, "a note: write ID=text or ID=@path")?;
            p = p.append_note(id, kind, body_text(body(text)?, with));
        }
    }
    for v in &args.artifacts {
        let (id, pin) = id_value(v, "--artifact", "an artifact: write ID=mem_5@2")?;
        let pin = crate::contract::pin(pin).map_err(|e| e.with_field("--artifact"))?;
        let reference = pb::RecordBodyRef { kind: Some(pb::record_body_ref::Kind::Pin(pin)) };
        p = p.append_artifact(id, reference, &args.media_type);
    }
    for v in &args.decisions {
        let (id, rest) = id_value(v, "--decision", "a decision: write ID=STATE:REASON")?;
        let (state, reason) = rest.split_once(':').ok_or_else(|| {
            CliError::usage(format!("`{v}` has no reason: write ID=STATE:REASON")).with_field("--decision")
        })?;
        p = p.append_decision(id, state.trim().as_bytes(), reason.trim().as_bytes());
    }
    if p.ops().is_empty() {
        return Err(CliError::usage(
            "name at least one change: --title, --state, --body, --note, --progress, --artifact, --decision or --decide",
        ));
    }
    let mut req = pb::PatchRecordRequest::from(p);
    let text = match &args.message {
        Some(m) => body(m)?,
        None => {
            let paths: Vec<String> = req.ops.iter().map(op_path).collect();
            format!("patch {}: {}", args.record, paths.join(", ")).into_bytes()
        }
    };
    req.message = Some(kungfu_client::labeled(text, with));
    if !args.ask.is_empty() {
        req.ask = Some(pb::Ask { agents: args.ask.iter().map(|a| a.trim().to_string()).collect() });
    }
    Ok(req)
}

/// The request of `kungfu record create` (pure but for reading `@file` bodies).
pub fn create_request(args: &RecordCreateArgs) -> Result<pb::CreateRecordRequest, CliError> {
    let with = content_labels(&args.labels)?;
    let record_body = match (&args.body, &args.body_pin) {
        (_, Some(pin)) => {
            let pin = crate::contract::pin(pin).map_err(|e| e.with_field("--body-pin"))?;
            body_pin(&pin.memory, pin.version)
        }
        (Some(b), None) => body_text(body(b)?, with),
        (None, None) => {
            return Err(CliError::usage("give the body as --body TEXT, --body @path or --body-pin mem_5@2"));
        }
    };
    let message = match &args.message {
        Some(m) => body(m)?,
        None => format!("record: {}", args.title).into_bytes(),
    };
    let mut r = NewRecord::new(
        &args.thread,
        args.title.as_bytes(),
        args.state.as_bytes(),
        record_body,
        kungfu_client::labeled(message, with),
    )
    .scope(wire_scope(&args.scope, "--scope")?);
    if args.governors_only {
        r = r.governors_only();
    }
    if !args.ask.is_empty() {
        r = r.ask(args.ask.iter().map(|a| a.trim().to_string()));
    }
    Ok(r.into())
}

// --- Output -----------------------------------------------------------------------------------------

fn scope_name(s: i32) -> String {
    pb::Scope::try_from(s)
        .map(|s| s.as_str_name().trim_start_matches("SCOPE_").to_ascii_lowercase())
        .unwrap_or_default()
}

fn reference_text(r: Option<&pb::RecordBodyRef>) -> String {
    match r.and_then(|r| r.kind.as_ref()) {
        None => "-".into(),
        Some(pb::record_body_ref::Kind::Pin(p)) => output::pin(&p.memory, u64::from(p.version)),
        Some(pb::record_body_ref::Kind::External(e)) => format!("{} {} ({} bytes)", e.store, e.digest, e.bytes),
    }
}

fn text_of(c: &Option<pb::Content>) -> String {
    c.as_ref().map(|c| escaped(&c.body, PREVIEW_CHARS)).unwrap_or_default()
}

/// The view as JSON: the message, with title, state and decisions as text.
fn view_json(v: &pb::RecordView) -> Value {
    let mut j = to_json(v);
    j["title_text"] = output::content_text(&v.title);
    j["state_text"] = output::content_text(&v.state);
    for (i, d) in v.decisions.iter().enumerate() {
        j["decisions"][i]["state_text"] = output::content_text(&d.state);
        j["decisions"][i]["reason_text"] = output::content_text(&d.reason);
    }
    j
}

fn print_view(v: &pb::RecordView) {
    let body = v.body.clone().unwrap_or_default();
    let body_text = if body.redacted {
        format!("(redacted for a {} audience; labels {})", scope_name(v.audience), labels_text(body.labels.as_ref()))
    } else {
        format!("{} ({})", reference_text(body.reference.as_ref()), labels_text(body.labels.as_ref()))
    };
    let editors = pb::RecordEditors::try_from(v.editors)
        .map(|e| e.as_str_name().trim_start_matches("RECORD_EDITORS_").to_ascii_lowercase())
        .unwrap_or_default();
    pairs(&[
        ("record", v.id.clone()),
        ("thread", format!("{} (created by entry #{})", v.thread, v.entry)),
        ("rev", if v.rev == v.current_rev { v.rev.to_string() } else { format!("{} of {}", v.rev, v.current_rev) }),
        ("title", text_of(&v.title)),
        ("state", text_of(&v.state)),
        ("body", body_text),
        ("scope", scope_name(v.scope)),
        ("editors", editors),
        ("audience", scope_name(v.audience)),
        ("creator", format!("{} at {}", v.creator, instant(v.created_at_unix_micros))),
    ]);
    if !v.notes.is_empty() {
        println!();
        let rows: Vec<Vec<String>> = v
            .notes
            .iter()
            .map(|n| {
                let kind = pb::NoteKind::try_from(n.kind)
                    .map(|k| k.as_str_name().trim_start_matches("NOTE_KIND_").to_ascii_lowercase())
                    .unwrap_or_default();
                vec![
                    n.id.clone(),
                    kind,
                    n.author.clone(),
                    n.added_rev.to_string(),
                    reference_text(n.body.as_ref()),
                    labels_text(n.labels.as_ref()),
                ]
            })
            .collect();
        table(&["NOTE", "KIND", "AUTHOR", "REV", "BODY", "LABELS"], &rows);
    }
    if !v.artifacts.is_empty() {
        println!();
        let rows: Vec<Vec<String>> = v
            .artifacts
            .iter()
            .map(|a| {
                vec![
                    a.id.clone(),
                    a.media_type.clone(),
                    a.author.clone(),
                    a.added_rev.to_string(),
                    reference_text(a.reference.as_ref()),
                    labels_text(a.labels.as_ref()),
                ]
            })
            .collect();
        table(&["ARTIFACT", "MEDIA_TYPE", "AUTHOR", "REV", "REFERENCE", "LABELS"], &rows);
    }
    if !v.decisions.is_empty() {
        println!();
        let rows: Vec<Vec<String>> = v
            .decisions
            .iter()
            .map(|d| {
                vec![d.id.clone(), text_of(&d.state), d.author.clone(), d.added_rev.to_string(), text_of(&d.reason)]
            })
            .collect();
        table(&["DECISION", "STATE", "AUTHOR", "REV", "REASON"], &rows);
    }
    if v.redacted_notes + v.redacted_artifacts > 0 {
        println!(
            "\n{} notes and {} artifacts are narrower than a {} audience and are not shown",
            v.redacted_notes,
            v.redacted_artifacts,
            scope_name(v.audience)
        );
    }
}

fn event_row(e: &pb::RecordEvent) -> Vec<String> {
    if e.redacted {
        return vec![
            e.rev.to_string(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "(redacted)".into(),
            "-".into(),
        ];
    }
    vec![
        e.rev.to_string(),
        e.base_rev.to_string(),
        format!("#{}", e.entry),
        e.actor.clone(),
        instant(e.at_unix_micros),
        e.paths.join(","),
        labels_text(Some(&pb::Labels { taint: e.taint, scope: e.scope })),
    ]
}

const EVENT_HEADER: [&str; 7] = ["REV", "BASE", "ENTRY", "ACTOR", "AT", "PATHS", "LABELS"];

// --- Commands ---------------------------------------------------------------------------------------

/// Runs `kungfu record …`.
pub async fn run(ctx: &Ctx, cmd: RecordCmd) -> Result<(), CliError> {
    let c = ctx.agent()?;
    match cmd {
        RecordCmd::Create(args) => {
            let w = c.create_record(create_request(&args)?, ctx.idem()).await?;
            written(ctx, &w.value.receipt, w.replayed, &w.idempotency_key, vec![]);
        }
        RecordCmd::Patch(args) => {
            let w = c.patch_record(patch_request(&args)?, ctx.idem()).await?;
            let merged = matches!(
                w.value.receipt.as_ref().and_then(|r| r.result.as_ref()),
                Some(pb::receipt::Result::RecordPatched(p)) if p.merged
            );
            written(ctx, &w.value.receipt, w.replayed, &w.idempotency_key, vec![]);
            if merged && !ctx.json {
                println!("the record had moved past rev {}: your appends were merged onto it", args.base_rev);
            }
        }
        RecordCmd::Show { record, rev, audience: a } => {
            let v =
                c.get_record(pb::GetRecordRequest { record, rev, audience: audience(a.as_deref())? as i32 }).await?;
            if ctx.json {
                output::print_json(&view_json(&v));
            } else {
                print_view(&v);
            }
        }
        RecordCmd::Events { record, after, audience: a } => {
            let audience = audience(a.as_deref())? as i32;
            let mut after_rev = after;
            let mut events = Vec::new();
            // Pages until one comes back empty: revs are dense, so the last rev is the cursor.
            for _ in 0..crate::ctx::MAX_PAGES {
                let page = c
                    .get_record_events(pb::GetRecordEventsRequest {
                        record: record.clone(),
                        after_rev,
                        audience,
                        page_size: 0,
                    })
                    .await?;
                if page.events.is_empty() {
                    break;
                }
                after_rev = page.next_after_rev;
                events.extend(page.events);
            }
            if ctx.json {
                output::print_json(
                    &json!({ "record": record, "events": to_json(&events), "next_after_rev": after_rev }),
                );
            } else {
                table(&EVENT_HEADER, &events.iter().map(event_row).collect::<Vec<_>>());
                println!("after rev {after_rev} (continue with --after {after_rev})");
            }
        }
        RecordCmd::Watch { record, after, audience: a } => {
            let mut stream = c.watch_record(&record, after, audience(a.as_deref())?).await?;
            if !ctx.json {
                println!("{}", EVENT_HEADER.join("  "));
            }
            while let Some(batch) = stream.message().await.map_err(status_error)? {
                for e in &batch.events {
                    if ctx.json {
                        println!(
                            "{}",
                            json!({ "record": record, "event": to_json(e), "applied_index": batch.applied_index })
                        );
                    } else {
                        println!("{}", event_row(e).join("  "));
                    }
                }
            }
            if !ctx.json {
                println!("the record's thread is closed: no more writes");
            }
        }
        RecordCmd::Body { record, note, artifact, rev } => {
            use pb::get_record_body_request::Item;
            let item = match (note, artifact) {
                (Some(n), _) => Item::NoteId(n),
                (None, Some(a)) => Item::ArtifactId(a),
                (None, None) => Item::Body(()),
            };
            let b = c.get_record_body(pb::GetRecordBodyRequest { record, item: Some(item), rev }).await?;
            if ctx.json {
                let mut j = to_json(&b);
                if let Some(pb::record_body_content::Kind::Pin(p)) = &b.kind {
                    j["text"] = output::content_text(&p.content);
                }
                output::print_json(&j);
                return Ok(());
            }
            match b.kind {
                Some(pb::record_body_content::Kind::Pin(p)) => {
                    let pin = p.pin.clone().unwrap_or_default();
                    pairs(&[
                        ("pin", output::pin(&pin.memory, u64::from(pin.version))),
                        ("labels", labels_text(p.labels.as_ref())),
                    ]);
                    match &p.content {
                        // Content shown with its escapes (L6): it cannot move the cursor or clear the screen.
                        Some(c) => println!("\n{}", escaped(&c.body, usize::MAX)),
                        None => println!("\n(unreadable: the pinned Memory is no longer shared)"),
                    }
                }
                Some(pb::record_body_content::Kind::External(e)) => pairs(&[
                    ("store", e.store),
                    ("digest", e.digest),
                    ("bytes", e.bytes.to_string()),
                    ("labels", labels_text(e.labels.as_ref())),
                    ("deletion certificate", e.deletion_certificate),
                ]),
                None => println!("(no body)"),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn parse(args: &[&str]) -> RecordCmd {
        let mut all = vec!["kungfu", "record"];
        all.extend_from_slice(args);
        match Cli::try_parse_from(all).expect("parses").command {
            Command::Record(c) => c,
            other => panic!("not a record command: {other:?}"),
        }
    }

    #[test]
    fn a_patch_orders_replaces_before_appends_and_names_its_paths_in_the_default_message() {
        let RecordCmd::Patch(args) = parse(&[
            "patch",
            "rec_4",
            "--base-rev",
            "3",
            "--note",
            "n1=first finding",
            "--state",
            "review",
            "--decision",
            "d1=open: who signs off? legal: or ops",
            "--decide",
            "d0=approved",
        ]) else {
            panic!("not patch")
        };
        let req = patch_request(&args).expect("a patch");
        let paths: Vec<String> = req.ops.iter().map(op_path).collect();
        assert_eq!(paths, ["/state", "/open_decisions/d0/state", "/notes", "/open_decisions"]);
        let Some(pb::patch_op::Op::AppendDecision(d)) = &req.ops[3].op else { panic!("decision") };
        assert_eq!(d.state.as_ref().map(|c| c.body.as_slice()), Some(&b"open"[..]));
        // The reason keeps every colon after the first.
        assert_eq!(d.reason.as_ref().map(|c| c.body.as_slice()), Some(&b"who signs off? legal: or ops"[..]));
        let Some(pb::labeled_body::Kind::Content(m)) = req.message.and_then(|m| m.kind) else { panic!("message") };
        let text = String::from_utf8(m.content.expect("content").body).expect("utf8");
        assert_eq!(text, "patch rec_4: /state, /open_decisions/d0/state, /notes, /open_decisions");
        assert_eq!(req.base_rev, 3);
    }

    #[test]
    fn a_patch_with_no_change_or_a_malformed_item_is_a_usage_error_naming_the_flag() {
        let RecordCmd::Patch(args) = parse(&["patch", "rec_4", "--base-rev", "1"]) else { panic!("not patch") };
        assert_eq!(patch_request(&args).expect_err("no ops").code, "USAGE");
        let RecordCmd::Patch(args) = parse(&["patch", "rec_4", "--base-rev", "1", "--decision", "d1=open"]) else {
            panic!("not patch")
        };
        assert_eq!(patch_request(&args).expect_err("no reason").field.as_deref(), Some("--decision"));
        let RecordCmd::Patch(args) = parse(&["patch", "rec_4", "--base-rev", "1", "--note", "=x"]) else {
            panic!("not patch")
        };
        assert_eq!(patch_request(&args).expect_err("no id").field.as_deref(), Some("--note"));
        let RecordCmd::Patch(args) =
            parse(&["patch", "rec_4", "--base-rev", "1", "--note", "n=x", "--content-scope", "galaxy"])
        else {
            panic!("not patch")
        };
        assert_eq!(patch_request(&args).expect_err("bad scope").field.as_deref(), Some("--content-scope"));
    }

    #[test]
    fn a_create_labels_inline_text_and_sets_scope_and_editors() {
        let RecordCmd::Create(args) = parse(&[
            "create",
            "th_2",
            "--title",
            "Plan",
            "--body",
            "draft",
            "--scope",
            "tenant",
            "--content-scope",
            "tenant",
            "--governors-only",
        ]) else {
            panic!("not create")
        };
        let req = create_request(&args).expect("a create");
        assert_eq!(req.scope, pb::Scope::Tenant as i32);
        assert_eq!(req.editors, pb::RecordEditors::Governors as i32);
        assert_eq!(req.state.map(|c| c.body), Some(b"open".to_vec()), "the default state");
        let Some(pb::record_body_input::Kind::Content(b)) = req.body.and_then(|b| b.kind) else { panic!("inline") };
        let labels = b.labels.expect("labels");
        assert_eq!((labels.scope, labels.taint), (pb::Scope::Tenant as i32, pb::Taint::Tainted as i32));
    }
}
