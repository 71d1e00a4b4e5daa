//! The coordination commands of `kungfu` against a real `kungfud`: labeled writes and widening,
//! send, mailbox, scatter, gather with and without a fold, barrier and its status, the floor's
//! refusal with its fak reason, terminal-safe tables, and `kungfu demo coord` from start to end.

use kungfu_system_tests::{BOUND, Cluster};
use serde_json::Value;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// One node and a private home directory for the command line's profiles.
struct Env {
    _cluster: Cluster,
    home: tempfile::TempDir,
    endpoint: String,
}

impl Env {
    fn start() -> Env {
        Env::start_nodes(1)
    }

    /// `n` nodes; commands go to every node unless they name one (`--endpoint`).
    fn start_nodes(n: u64) -> Env {
        let cluster = Cluster::start(n, "");
        let endpoint = cluster.nodes.values().map(|n| n.api.to_string()).collect::<Vec<_>>().join(",");
        Env { _cluster: cluster, home: tempfile::tempdir().expect("tempdir"), endpoint }
    }

    /// The API address of the `i`th node.
    fn node(&self, i: usize) -> String {
        self.endpoint.split(',').nth(i).expect("a node").to_string()
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_kungfu"))
            .args(args)
            .env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path().join("xdg"))
            .env("KUNGFU_ENDPOINTS", &self.endpoint)
            .env_remove("KUNGFU_KEY")
            .env_remove("KUNGFU_PROFILE")
            .output()
            .expect("run kungfu")
    }

    /// `kungfu --json --profile P ARGS`, which must succeed; stdout parsed.
    fn ok(&self, profile: &str, args: &[&str]) -> Value {
        let mut all = vec!["--json", "--profile", profile];
        all.extend_from_slice(args);
        let out = self.run(&all);
        assert!(out.status.success(), "kungfu {all:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("kungfu {all:?}: no JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
    }

    /// `kungfu --json --profile P ARGS`, which must exit with `exit`; the JSON error of stderr.
    fn fails(&self, profile: &str, args: &[&str], exit: i32) -> Value {
        let mut all = vec!["--json", "--profile", profile];
        all.extend_from_slice(args);
        let out = self.run(&all);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(exit), "kungfu {all:?}: {stderr}");
        let last = stderr.lines().last().unwrap_or_default();
        serde_json::from_str::<Value>(last).unwrap_or_else(|e| panic!("no JSON error ({e}): {stderr}"))["error"].clone()
    }

    /// `kungfu --profile P ARGS` for people: stdout as text.
    fn human(&self, profile: &str, args: &[&str]) -> String {
        let mut all = vec!["--profile", profile];
        all.extend_from_slice(args);
        let out = self.run(&all);
        assert!(out.status.success(), "kungfu {all:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Registers an agent under `profile` once the node serves (bounded), and returns its id.
    fn register(&self, profile: &str) -> String {
        let start = Instant::now();
        loop {
            let out = self.run(&["--json", "--profile", profile, "register", "--retries", "0"]);
            if out.status.success() {
                let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
                return v["agent"].as_str().expect("agent id").to_string();
            }
            assert!(start.elapsed() < BOUND, "the node never served: {}", String::from_utf8_lossy(&out.stderr));
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[test]
fn coordination_commands_send_scatter_gather_and_barrier_through_the_cli() {
    let env = Env::start();
    env.register("lead");
    let w1 = env.register("w1");
    let w2 = env.register("w2");
    let created = env.ok("lead", &["thread", "create", "--text", "coord", "--grant", "speaker"]);
    let th = s(&created["receipt"]["result"]["thread_created"]["thread"]);
    for p in ["w1", "w2"] {
        env.ok(p, &["thread", "join", &s(&created["grant_secret"])]);
    }

    // A private labeled note is refused on the thread, with its fak reason; widened, it travels.
    let note = env.ok("w1", &["memory", "write", "my notes", "--taint", "tainted", "--scope", "agent"]);
    let mem = s(&note["receipt"]["result"]["labeled_written"]["pin"]["memory"]);
    let e = env.fails("w1", &["send", &th, "--pin", &format!("{mem}:1")], 5);
    assert_eq!(
        (s(&e["code"]), s(&e["fak_reason"]), s(&e["next_step"])),
        ("TRUST_VIOLATION".into(), "TRUST_VIOLATION".into(), "revise".into())
    );
    env.ok("w1", &["memory", "widen", &mem, "1", "--scope", "fleet"]);
    env.ok("w1", &["send", &th, "--pin", &format!("{mem}:2")]);

    // A send asking w2; its mailbox (asked-me) shows it once, with the default labels, escaped.
    let sent = env.ok("lead", &["send", &th, "look\u{1b}[2J here", "--to", &w2]);
    let entry = s(&sent["receipt"]["result"]["sent"]["entry"]);
    let mb = env.ok("w2", &["mailbox", &th, "--asked-me"]);
    let items = mb["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{mb}");
    assert_eq!(s(&items[0]["entry"]["seq"]), entry);
    assert_eq!(items[0]["labels"]["scope"], "Fleet", "{mb}");
    assert_eq!(items[0]["text"], "look\u{1b}[2J here", "JSON keeps the content exactly");
    let table = env.human("w2", &["mailbox", &th, "--asked-me"]);
    assert!(!table.contains('\u{1b}'), "a table never prints a raw control character: {table:?}");
    assert!(table.contains("look\\u{1b}[2J here"), "{table}");
    assert!(table.contains(&format!("continue with --after {entry}")), "{table}");

    // Scatter to both (goals in descending order), deliver one: a fold is refused naming the other.
    let sc = env.ok(
        "lead",
        &[
            "scatter",
            &th,
            "--header",
            "split",
            "--goal",
            &format!("{w2}=b"),
            "--goal",
            &format!("{w1}=a"),
            "--delivery-window",
            "1h",
        ],
    );
    let header = s(&sc["receipt"]["result"]["scattered"]["header"]);
    let ranks = sc["receipt"]["result"]["scattered"]["ranks"].as_array().expect("ranks").clone();
    assert_eq!(s(&ranks[0]["member"]), w1, "rank 0 is the smaller id");
    let (a1, a2) = (s(&ranks[0]["assignment"]), s(&ranks[1]["assignment"]));
    env.ok("w1", &["assignment", "take", &a1]);
    env.ok("w1", &["assignment", "deliver", &a1, "--text", "first"]);
    let e = env.fails("lead", &["gather", &th, &header, "--reduce", "concat"], 5);
    assert_eq!(s(&e["code"]), "GATHER_INCOMPLETE");
    assert!(s(&e["message"]).contains(&format!("rank 1 ({w2})")), "{e}");
    env.ok("w2", &["assignment", "take", &a2]);
    env.ok("w2", &["assignment", "deliver", &a2, "--text", "second"]);
    let g = env.ok("lead", &["gather", &th, &header, "--reduce", "concat"]);
    assert_eq!(g["all_delivered"], true, "{g}");
    assert_eq!(g["reduction"]["output_text"], "first\nsecond", "{g}");
    let e = env.fails("lead", &["gather", &th, &header, "--reduce", "median"], 2);
    assert_eq!(s(&e["field"]), "--reduce");

    // A barrier: waiting after a short wait, released once both reply.
    let e = env.fails("lead", &["barrier", &th, "--wait", "1s"], 5);
    assert_eq!(s(&e["code"]), "BARRIER_WAITING");
    let mb = env.ok("w1", &["mailbox", &th, "--asked-me", "--after", &entry]);
    let barrier = s(&mb["items"][0]["entry"]["seq"]);
    for p in ["w1", "w2"] {
        env.ok(p, &["send", &th, "here", "--reply-to", &barrier]);
    }
    let b = env.ok("lead", &["barrier", "status", &th, &barrier]);
    assert_eq!(b["state_name"], "released", "{b}");
    assert_eq!(b["pending"], 0, "{b}");
}

/// Issue #17's "done when": two agents on different nodes edit one record through the command line;
/// the second append, on a stale base, is merged; the second replace is refused with the three
/// values (base, current, proposed) and the next step, as JSON and as text, and changes nothing.
#[test]
fn two_agents_on_different_nodes_edit_one_record_through_the_cli() {
    let env = Env::start_nodes(3);
    env.register("a");
    env.register("b");
    let (n1, n2) = (env.node(0), env.node(1));
    let at = |node: &str, args: &[&str]| -> Vec<String> {
        let mut all = vec!["--endpoint".to_string(), node.to_string()];
        all.extend(args.iter().map(|a| a.to_string()));
        all
    };
    let ok = |profile: &str, node: &str, args: &[&str]| {
        let all = at(node, args);
        env.ok(profile, &all.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let created = ok("a", &n1, &["thread", "create", "--text", "release", "--grant", "speaker"]);
    let th = s(&created["receipt"]["result"]["thread_created"]["thread"]);
    ok("b", &n2, &["thread", "join", &s(&created["grant_secret"])]);
    let rec = ok("a", &n1, &["record", "create", &th, "--title", "Plan", "--body", "draft 1"]);
    let rec = s(&rec["receipt"]["result"]["record_created"]["record"]);
    // Both append on rev 1: the second is merged onto rev 2.
    let first = ok("a", &n1, &["record", "patch", &rec, "--base-rev", "1", "--note", "n1=alpha"]);
    assert_eq!(first["receipt"]["result"]["record_patched"]["rev"], 2, "{first}");
    let second = ok("b", &n2, &["record", "patch", &rec, "--base-rev", "1", "--progress", "n2=beta"]);
    let p = &second["receipt"]["result"]["record_patched"];
    assert_eq!((p["rev"].clone(), p["merged"].clone()), (Value::from(3), Value::from(true)), "{second}");
    // Both replace the state on rev 3: the second is refused with the three values.
    ok("a", &n1, &["record", "patch", &rec, "--base-rev", "3", "--state", "review"]);
    let stale = at(&n2, &["record", "patch", &rec, "--base-rev", "3", "--state", "done"]);
    let stale: Vec<&str> = stale.iter().map(String::as_str).collect();
    let e = env.fails("b", &stale, 5);
    assert_eq!(
        (s(&e["code"]), s(&e["next_step"]), s(&e["field"])),
        ("STALE_BASE".into(), "retry".into(), "ops[0]".into())
    );
    assert_eq!(s(&e["fak_shared_reason"]), "STALE_BASE");
    let c = &e["conflict"];
    assert_eq!((s(&c["path"]), c["base_rev"].clone(), c["current_rev"].clone()), ("/state".into(), 3.into(), 4.into()));
    assert_eq!((s(&c["base"]["text"]), s(&c["current"]["text"])), ("open".into(), "review".into()), "{e}");
    assert_eq!(s(&c["proposed"]["text"]), "done");
    let mut human = vec!["--profile", "b"];
    human.extend_from_slice(&stale);
    let out = env.run(&human);
    assert_eq!(out.status.code(), Some(5));
    let text = String::from_utf8_lossy(&out.stderr);
    for line in [
        "conflict: /state of",
        "base     (rev 3): \"open\"",
        "current  (rev 4): \"review\"",
        "proposed:          \"done\"",
        "patch again with --base-rev 4",
        "next step: retry",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    // Nothing of the refused patch was applied, on the node the other agent reads.
    let v = ok("b", &n1, &["record", "show", &rec]);
    assert_eq!((v["current_rev"].clone(), s(&v["state_text"])), (Value::from(4), "review".to_string()), "{v}");
    let notes: Vec<String> = v["notes"].as_array().expect("notes").iter().map(|n| s(&n["id"])).collect();
    assert_eq!(notes, ["n1", "n2"]);
    let events = ok("a", &n2, &["record", "events", &rec]);
    let revs: Vec<u64> =
        events["events"].as_array().expect("events").iter().map(|e| e["rev"].as_u64().unwrap_or(0)).collect();
    assert_eq!(revs, [1, 2, 3, 4]);
    assert_eq!(events["next_after_rev"], 4);
    // Once the thread is closed, a watch prints the revs after its cursor and ends by itself.
    ok("a", &n1, &["thread", "close", &th]);
    let watch = at(&n2, &["--json", "--profile", "b", "record", "watch", &rec, "--after", "2"]);
    let out = env.run(&watch.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "record watch: {}", String::from_utf8_lossy(&out.stderr));
    let watched: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("one JSON event per line")["event"]["rev"].as_u64().unwrap_or(0)
        })
        .collect();
    assert_eq!(watched, [3, 4], "the revs after the cursor, once each");
}

#[test]
fn the_coordination_demo_runs_to_its_end() {
    let env = Env::start();
    // The node serves once an agent can register.
    env.register("probe");
    let out = env.run(&["demo", "coord", "--endpoint", &env.endpoint]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the demo failed: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    for line in [
        "rank 2:",
        "Combined (concat, rank order)",
        "is released",
        "TRUST_VIOLATION",
        "merged onto the newer rev",
        "refused STALE_BASE",
        "base     (rev 3): \"open\"",
        "current  (rev 4): \"ready\"",
        "proposed:          \"blocked\"",
        "Coordination demo complete",
    ] {
        assert!(stdout.contains(line), "missing {line:?}:\n{stdout}");
    }
}
