//! `kungfu agent serve`: the standby runner (issue #35). It follows the agent's turn
//! ([`TurnWatch`], reopened from its cursor across node failures and leader changes) and, whenever
//! the turn holds an obligation no run was started for, runs the given command with the turn as
//! JSON on stdin. This is how an LLM agent that keeps nothing between sessions is woken when it
//! owes something.
//!
//! - Which work is new is decided by obligation: the runner keeps the obligations it handed to a
//!   run (id and the time it arose). One that ends leaves that set, so an obligation that ends and
//!   arises again is new. Items whose next step is `wait` (a deadline passed, the ending pending)
//!   ask nothing of the agent and start no run.
//! - One run at a time. Changes during a run only update the copy of the turn; when the run ends,
//!   everything still un-run in the newest copy goes to one next run.
//! - A run that exits non-zero (or by a signal) gives its obligations back and the next run waits
//!   `--retry-backoff`, doubled per failure in a row up to `--max-retry-backoff`; a success resets
//!   it.
//! - SIGINT or SIGTERM: no new run; the run in progress gets SIGTERM and `--grace` to end, then
//!   SIGKILL; the runner exits 0. A second signal kills the run at once.
//!
//! §8: the runner only makes the agent act sooner. The command is told the cursor of the turn it
//! was given, and reads the turn itself for anything newer.

use crate::cli::ServeArgs;
use crate::ctx::{Ctx, KeySource};
use crate::error::CliError;
use crate::output::to_json;
use crate::turn_watch::{TurnReplica, TurnWatch, obligation, obligation_id};
use kungfu_client::pb;
use serde_json::json;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::signal::unix::{SignalKind, signal};

/// The prefix of every line the runner writes on stderr.
const LOG: &str = "kungfu agent serve";

/// A stream that says nothing for this long is reopened from its cursor (see [`TurnWatch`]).
const WATCH_IDLE: Duration = Duration::from_secs(60);

/// The most obligations a log line names; the rest are counted.
const LOGGED_OBLIGATIONS: usize = 5;

/// A complete copy of the turn: what a run is given.
#[derive(Debug, Clone)]
struct Snapshot {
    items: Vec<pb::TurnItem>,
    cursor: String,
    applied_index: u64,
}

/// The obligations handed to a run, by id, with the time each arose.
#[derive(Debug, Default)]
struct Ledger {
    handed: BTreeMap<String, i64>,
}

impl Ledger {
    /// Forgets the obligations that are no longer in the turn (or arose again since), so one that
    /// ends and arises again is new work.
    fn forget_ended(&mut self, items: &[pb::TurnItem]) {
        let now: BTreeMap<String, i64> =
            items.iter().map(|i| (obligation_id(&i.obligation), i.arose_at_unix_micros)).collect();
        self.handed.retain(|id, at| now.get(id) == Some(at));
    }

    /// The items of the turn that ask the agent to act and that no run was started for.
    fn pending<'a>(&self, items: &'a [pb::TurnItem]) -> Vec<&'a pb::TurnItem> {
        items
            .iter()
            .filter(|i| i.next != pb::NextStep::Wait as i32)
            .filter(|i| self.handed.get(&obligation_id(&i.obligation)) != Some(&i.arose_at_unix_micros))
            .collect()
    }

    fn hand(&mut self, items: &[&pb::TurnItem]) {
        for i in items {
            self.handed.insert(obligation_id(&i.obligation), i.arose_at_unix_micros);
        }
    }

    /// Gives a failed run's obligations back, so the next run has them again.
    fn give_back(&mut self, ids: &[(String, i64)]) {
        for (id, at) in ids {
            if self.handed.get(id) == Some(at) {
                self.handed.remove(id);
            }
        }
    }
}

/// The wait before the run after `failures` failed runs in a row.
fn retry_wait(failures: u32, first: Duration, max: Duration) -> Duration {
    let doublings = failures.saturating_sub(1).min(30);
    first.saturating_mul(1u32 << doublings).min(max)
}

/// The program of `command` as it will be run: a path as given, else the first executable of that
/// name on PATH. A missing program is bad input, found before any work arrives.
fn program(command: &[OsString]) -> Result<PathBuf, CliError> {
    use std::os::unix::fs::PermissionsExt;
    let bad = |m: String| CliError::usage(m).with_field("command");
    let Some(name) = command.first().filter(|c| !c.is_empty()) else {
        return Err(bad(
            "give the command to run after `--`, e.g. `kungfu agent serve -- claude -p \"Resume your Kungfu turn\"`"
                .into(),
        ));
    };
    let executable =
        |p: &std::path::Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    let path = PathBuf::from(name);
    if path.components().count() > 1 {
        return if executable(&path) {
            Ok(path)
        } else {
            Err(bad(format!("{} is not an executable file; give a program's path or a name on PATH", path.display())))
        };
    }
    let search = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&search)
        .map(|d| d.join(&path))
        .find(|p| executable(p))
        .ok_or_else(|| bad(format!("no program {} on PATH; give a program's path or a name on PATH", path.display())))
}

fn listed(items: &[&pb::TurnItem]) -> String {
    let mut shown: Vec<String> = items.iter().take(LOGGED_OBLIGATIONS).map(|i| obligation(&i.obligation)).collect();
    if items.len() > LOGGED_OBLIGATIONS {
        shown.push(format!("{} more", items.len() - LOGGED_OBLIGATIONS));
    }
    shown.join(", ")
}

fn log(line: String) {
    eprintln!("{} {LOG}: {line}", chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
}

/// What the runner tells each run.
struct RunEnv<'a> {
    profile: &'a str,
    agent: Option<String>,
    endpoints: String,
    /// The key, when it was given on the command line or in KUNGFU_KEY rather than in the profile,
    /// so that the command's own `kungfu` calls act as the same agent.
    key: Option<String>,
}

/// One run in progress.
struct Run {
    number: u64,
    child: tokio::process::Child,
    started: Instant,
    handed: Vec<(String, i64)>,
}

fn start(
    command: &[OsString],
    program: &std::path::Path,
    env: &RunEnv,
    number: u64,
    snapshot: &Snapshot,
    new: &[&pb::TurnItem],
) -> Result<Run, CliError> {
    let body = json!({
        "agent": env.agent,
        "profile": env.profile,
        "run": number,
        "cursor": snapshot.cursor,
        "applied_index": snapshot.applied_index,
        "new": new.iter().map(|i| to_json(&i.obligation)).collect::<Vec<_>>(),
        "items": snapshot.items.iter().map(to_json).collect::<Vec<_>>(),
    });
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(&command[1..])
        .stdin(std::process::Stdio::piped())
        .env("KUNGFU_TURN_CURSOR", &snapshot.cursor)
        .env("KUNGFU_ENDPOINTS", &env.endpoints)
        .env("KUNGFU_PROFILE", env.profile)
        .env("KUNGFU_RUN", number.to_string());
    match &env.agent {
        Some(a) => cmd.env("KUNGFU_AGENT", a),
        None => cmd.env_remove("KUNGFU_AGENT"),
    };
    if let Some(k) = &env.key {
        cmd.env("KUNGFU_KEY", k);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| CliError::usage(format!("cannot run {}: {e}", program.display())).with_field("command"))?;
    // Written on a task of its own, so a command that reads its stdin late, or never, holds up
    // nothing; one that closes it early only ends the write.
    if let Some(mut stdin) = child.stdin.take() {
        let bytes = body.to_string().into_bytes();
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            let _ = stdin.write_all(&bytes).await;
            let _ = stdin.write_all(b"\n").await;
        });
    }
    log(format!("run {number}: started (pid {}) for {} new: {}", child.id().unwrap_or(0), new.len(), listed(new)));
    let handed = new.iter().map(|i| (obligation_id(&i.obligation), i.arose_at_unix_micros)).collect();
    Ok(Run { number, child, started: Instant::now(), handed })
}

/// Stops a run at shutdown: SIGTERM, `grace` to end (cut short by another signal), then SIGKILL.
async fn stop(run: &mut Run, grace: Duration, again: &mut (impl Future<Output = ()> + Unpin)) {
    if let Some(pid) = run.child.id() {
        log(format!("run {}: stopping (SIGTERM, then SIGKILL after {} s)", run.number, grace.as_secs_f64()));
        crate::dev::signal(pid, "-TERM");
    }
    let ended = tokio::select! {
        status = run.child.wait() => status.ok(),
        _ = tokio::time::sleep(grace) => None,
        _ = again => None,
    };
    let status = match ended {
        Some(s) => Some(s),
        None => {
            let _ = run.child.kill().await;
            run.child.wait().await.ok()
        }
    };
    let how = status.map(describe).unwrap_or_else(|| "killed".into());
    log(format!("run {}: {how} after {:.1} s (shutdown)", run.number, run.started.elapsed().as_secs_f64()));
}

fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(s)) => format!("ended by signal {s}"),
        _ => format!("ended ({status})"),
    }
}

/// `kungfu agent serve`: runs until a signal (exit 0) or a watch failure that reopening cannot
/// mend (its error).
pub(crate) async fn run(
    ctx: &Ctx,
    profile: &str,
    agent: Option<String>,
    endpoints: &[String],
    args: ServeArgs,
) -> Result<(), CliError> {
    let client = ctx.agent()?.clone();
    let program = program(&args.command)?;
    if args.max_retry_backoff < args.retry_backoff {
        return Err(
            CliError::usage("--max-retry-backoff must be at least --retry-backoff").with_field("max_retry_backoff")
        );
    }
    let env = RunEnv {
        profile,
        agent,
        endpoints: endpoints.join(","),
        key: match ctx.key_source {
            KeySource::Given => client.key().map(str::to_string),
            _ => None,
        },
    };
    let mut interrupt =
        signal(SignalKind::interrupt()).map_err(|e| CliError::other(format!("cannot catch SIGINT: {e}")))?;
    let mut terminate =
        signal(SignalKind::terminate()).map_err(|e| CliError::other(format!("cannot catch SIGTERM: {e}")))?;

    // The watch runs on a task of its own and publishes each complete copy of the turn; a watch
    // channel keeps only the newest, which is the coalescing of changes during a run.
    let (tx, mut rx) = tokio::sync::watch::channel::<Option<Arc<Snapshot>>>(None);
    let (fatal_tx, mut fatal_rx) = tokio::sync::oneshot::channel::<CliError>();
    let watcher = tokio::spawn(async move {
        let mut watch = TurnWatch::new(client, String::new(), Some(WATCH_IDLE), Some(LOG));
        let mut replica = TurnReplica::default();
        loop {
            match watch.next().await {
                Ok(event) => {
                    if replica.apply(&event) {
                        let snapshot = Snapshot {
                            items: replica.items(),
                            cursor: watch.cursor().to_string(),
                            applied_index: event.applied_index,
                        };
                        if tx.send(Some(Arc::new(snapshot))).is_err() {
                            return;
                        }
                    }
                }
                Err(e) => {
                    let _ = fatal_tx.send(e);
                    return;
                }
            }
        }
    });
    let _abort = AbortOnDrop(watcher);
    log(format!(
        "watching the turn of {} (profile {profile}) at {}; command: {}",
        env.agent.as_deref().unwrap_or("the agent"),
        env.endpoints,
        args.command.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ")
    ));

    let mut ledger = Ledger::default();
    let mut running: Option<Run> = None;
    let mut runs: u64 = 0;
    let mut failures: u32 = 0;
    let mut not_before: Option<tokio::time::Instant> = None;
    let mut snapshot: Option<Arc<Snapshot>> = None;
    // Whether copies of the turn still come; the watch task's fatal error is read apart from
    // them, so the end of the copies never hides it.
    let mut watching = true;
    loop {
        // Start a run when none is in progress, the backoff has passed and work is un-run.
        if running.is_none()
            && not_before.is_none_or(|t| t <= tokio::time::Instant::now())
            && let Some(s) = &snapshot
        {
            not_before = None;
            ledger.forget_ended(&s.items);
            let new = ledger.pending(&s.items);
            if !new.is_empty() {
                runs += 1;
                let run = start(&args.command, &program, &env, runs, s, &new)?;
                ledger.hand(&new);
                running = Some(run);
            }
        }
        let backoff_until = if running.is_none() { not_before } else { None };
        let wait_backoff = async {
            match backoff_until {
                Some(t) => tokio::time::sleep_until(t).await,
                _ => std::future::pending().await,
            }
        };
        let exited = async {
            match running.as_mut() {
                Some(r) => r.child.wait().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = rx.changed(), if watching => match changed {
                Ok(()) => {
                    snapshot = rx.borrow_and_update().clone();
                    // Said once per change, so a person (and a test) sees work queue behind a run.
                    if let (Some(run), Some(s)) = (&running, &snapshot) {
                        ledger.forget_ended(&s.items);
                        let waiting = ledger.pending(&s.items).len();
                        if waiting > 0 {
                            log(format!("run {} in progress: {waiting} obligation(s) wait for the next run", run.number));
                        }
                    }
                }
                Err(_) => watching = false,
            },
            status = exited => {
                let Some(run) = running.take() else { continue };
                let took = run.started.elapsed().as_secs_f64();
                match status {
                    Ok(s) if s.success() => {
                        failures = 0;
                        log(format!("run {}: exited with status 0 after {took:.1} s", run.number));
                    }
                    other => {
                        failures += 1;
                        ledger.give_back(&run.handed);
                        let wait = retry_wait(failures, args.retry_backoff, args.max_retry_backoff);
                        not_before = Some(tokio::time::Instant::now() + wait);
                        let how = match other {
                            Ok(s) => describe(s),
                            Err(e) => format!("could not be waited for ({e})"),
                        };
                        log(format!(
                            "run {}: {how} after {took:.1} s; failure {failures} in a row, next run no sooner than in {:.1} s",
                            run.number,
                            wait.as_secs_f64()
                        ));
                    }
                }
            }
            _ = wait_backoff => {}
            e = &mut fatal_rx => {
                // The task ends only with an error; without one it was lost (a panic).
                let e = e.unwrap_or_else(|_| CliError::other("the turn watch stopped"));
                log(format!("the turn watch failed: {}: {}", e.code, e.message));
                if let Some(mut run) = running.take() {
                    stop(&mut run, args.grace, &mut Box::pin(std::future::pending())).await;
                }
                return Err(e);
            }
            _ = interrupt.recv() => return shutdown(running.take(), args.grace, &mut interrupt, &mut terminate).await,
            _ = terminate.recv() => return shutdown(running.take(), args.grace, &mut interrupt, &mut terminate).await,
        }
    }
}

async fn shutdown(
    running: Option<Run>,
    grace: Duration,
    interrupt: &mut tokio::signal::unix::Signal,
    terminate: &mut tokio::signal::unix::Signal,
) -> Result<(), CliError> {
    log("stopping on a signal".into());
    if let Some(mut run) = running {
        let mut again = Box::pin(async {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
        });
        stop(&mut run, grace, &mut again).await;
    }
    Ok(())
}

/// Ends the watch task with the runner.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(entry: u64, at: i64, next: pb::NextStep) -> pb::TurnItem {
        pb::TurnItem {
            obligation: Some(pb::ObligationRef {
                kind: Some(pb::obligation_ref::Kind::Response(pb::ResponseObligation {
                    thread: "th_1".into(),
                    entry,
                    responder: "ag_2".into(),
                })),
            }),
            arose_at_unix_micros: at,
            next: next as i32,
            ..Default::default()
        }
    }

    #[test]
    fn work_is_handed_once_and_an_obligation_that_arises_again_is_new() {
        let mut ledger = Ledger::default();
        let turn = vec![item(1, 10, pb::NextStep::Respond), item(2, 11, pb::NextStep::Wait)];
        let new = ledger.pending(&turn);
        assert_eq!(new.len(), 1, "a wait asks nothing of the agent");
        ledger.hand(&new);
        assert!(ledger.pending(&turn).is_empty(), "handed once");
        // It ends, then the same obligation arises again (a new arose_at).
        ledger.forget_ended(&[]);
        let again = vec![item(1, 20, pb::NextStep::Respond)];
        assert_eq!(ledger.pending(&again).len(), 1);
        // Ended and back between two looks with the same time: also new once forgotten.
        let mut ledger = Ledger::default();
        ledger.hand(&[&turn[0]]);
        ledger.forget_ended(&[]);
        assert_eq!(ledger.pending(&turn[..1]).len(), 1);
    }

    #[test]
    fn a_failed_run_gives_its_work_back() {
        let mut ledger = Ledger::default();
        let turn = vec![item(1, 10, pb::NextStep::Respond)];
        let new = ledger.pending(&turn);
        ledger.hand(&new);
        ledger.give_back(&[("response:th_1:1:ag_2".into(), 10)]);
        assert_eq!(ledger.pending(&turn).len(), 1);
    }

    #[test]
    fn the_retry_wait_doubles_up_to_its_cap() {
        let (first, max) = (Duration::from_secs(1), Duration::from_secs(5));
        let waits: Vec<u64> = (1..=5).map(|f| retry_wait(f, first, max).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 5, 5]);
        assert_eq!(retry_wait(1000, first, max), max, "no overflow");
    }

    #[test]
    fn a_missing_program_is_a_usage_error_naming_the_command() {
        let e = program(&["no-such-program-kungfu-test".into()]).expect_err("not on PATH");
        assert_eq!((e.code.as_str(), e.field.as_deref(), e.exit), ("USAGE", Some("command"), crate::error::EXIT_USAGE));
        let e = program(&["/nonexistent/prog".into()]).expect_err("no such file");
        assert!(e.message.contains("not an executable file"), "{}", e.message);
        assert!(program(&["sh".into()]).is_ok());
    }
}
