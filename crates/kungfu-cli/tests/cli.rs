//! The `kungfu` command line against real `kungfud` processes: every command at least once with
//! its `--json` output parsed, an error of each exit-status class, and the profile file that
//! `register` writes (mode 0600) and later commands read.

use kungfu_system_tests::{BOUND, Cluster};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The operator token of the test node.
const TOKEN: &str = "operator-token-for-cli-tests";

/// One node and a private home directory for the command line's profiles.
struct Env {
    cluster: Cluster,
    home: tempfile::TempDir,
    endpoint: String,
}

impl Env {
    /// Starts a one-node cluster with an operator token and waits until it leads.
    fn start() -> Env {
        let cluster = Cluster::start(1, &format!("operator_token = \"{TOKEN}\"\n"));
        let endpoint = cluster.nodes.values().map(|n| n.api.to_string()).next().expect("one node");
        let env = Env { cluster, home: tempfile::tempdir().expect("tempdir"), endpoint };
        let start = Instant::now();
        loop {
            let out = env.run(&[
                "cluster",
                "status",
                "--json",
                "--retries",
                "0",
                "--key",
                TOKEN,
                "--endpoint",
                &env.endpoint,
            ]);
            if out.status.success() {
                let v: Value = serde_json::from_slice(&out.stdout).expect("status JSON");
                if v["nodes"][0]["role"] == "leader" {
                    return env;
                }
            }
            assert!(start.elapsed() < BOUND, "the node never became leader: {}", env.cluster.logs());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn config_dir(&self) -> PathBuf {
        self.home.path().join("xdg")
    }

    /// Runs `kungfu` with `args` in a clean environment whose home is the test's directory.
    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_kungfu"))
            .args(args)
            .env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.config_dir())
            .env_remove("KUNGFU_KEY")
            .env_remove("KUNGFU_ENDPOINTS")
            .env_remove("KUNGFU_PROFILE")
            .output()
            .expect("run kungfu")
    }

    /// Runs `kungfu` with `args` and one environment variable set.
    fn run_env(&self, var: &str, value: &str, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_kungfu"))
            .args(args)
            .env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.config_dir())
            .env_remove("KUNGFU_KEY")
            .env_remove("KUNGFU_ENDPOINTS")
            .env_remove("KUNGFU_PROFILE")
            .env(var, value)
            .output()
            .expect("run kungfu")
    }

    /// Runs `kungfu --json` as the agent of `profile`, expects success and parses stdout.
    fn ok(&self, profile: &str, args: &[&str]) -> Value {
        let mut all = vec!["--json", "--profile", profile];
        all.extend_from_slice(args);
        let out = self.run(&all);
        assert!(
            out.status.success(),
            "kungfu {all:?} failed: {}\nstdout: {}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("kungfu {all:?} printed no JSON ({e}): {}", String::from_utf8_lossy(&out.stdout))
        })
    }

    /// Runs `kungfu --json` as the agent of `profile`, expects exit status `exit`, and returns the
    /// JSON error of stderr's last line and the whole stderr.
    fn fails(&self, profile: &str, args: &[&str], exit: i32) -> (Value, String) {
        let mut all = vec!["--json", "--profile", profile];
        all.extend_from_slice(args);
        let out = self.run(&all);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(exit), "kungfu {all:?}: {stderr}");
        let last = stderr.lines().last().unwrap_or_default();
        let v: Value = serde_json::from_str(last).unwrap_or_else(|e| panic!("no JSON error ({e}): {stderr}"));
        assert_eq!(v["error"]["exit_status"], exit, "{stderr}");
        (v["error"].clone(), stderr)
    }

    /// Runs `kungfu` for a person (no `--json`) as the agent of `profile`, expects success and
    /// returns stdout.
    fn human(&self, profile: &str, args: &[&str]) -> String {
        let mut all = vec!["--profile", profile];
        all.extend_from_slice(args);
        let out = self.run(&all);
        assert!(out.status.success(), "kungfu {all:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Registers an agent under `profile` and returns its id.
    fn register(&self, profile: &str) -> String {
        let v = self.ok(profile, &["register", "--endpoint", &self.endpoint]);
        let id = v["agent"].as_str().expect("agent id").to_string();
        assert!(id.starts_with("ag_"), "{v}");
        assert!(v["agent_key"].as_str().is_some_and(|k| !k.is_empty()), "{v}");
        assert_eq!(v["receipt"]["result"]["agent_registered"]["agent"], id.as_str(), "{v}");
        id
    }
}

/// Whether a word is a time as the tables show it: RFC 3339 in UTC to the millisecond.
fn rfc_3339(word: &str) -> bool {
    let b = word.as_bytes();
    let digits = |r: std::ops::Range<usize>| r.into_iter().all(|i| b[i].is_ascii_digit());
    b.len() == 24
        && digits(0..4)
        && b[4] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[19] == b'.'
        && digits(20..23)
        && b[23] == b'Z'
}

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("metadata").permissions().mode() & 0o777
}

#[test]
fn agents_work_a_thread_assignments_and_a_task_through_the_cli() {
    let env = Env::start();
    let lead = env.register("lead");
    let worker = env.register("worker");
    let helper = env.register("helper");

    // The profile file is private, its directory too, and it names both agents.
    let file = env.config_dir().join("kungfu").join("profiles.toml");
    assert_eq!(mode(&file), 0o600);
    assert_eq!(mode(file.parent().expect("dir")), 0o700);
    let text = std::fs::read_to_string(&file).expect("profiles");
    assert!(text.contains(&lead) && text.contains(&worker), "{text}");

    // A thread with a grant, joined by the worker and the helper. From here on no command names a
    // key or an endpoint: the profiles give both.
    let created = env.ok("lead", &["thread", "create", "--text", "the incident", "--grant", "speaker"]);
    let th = s(&created["receipt"]["result"]["thread_created"]["thread"]);
    let secret = s(&created["grant_secret"]);
    assert!(th.starts_with("th_") && !secret.is_empty(), "{created}");
    assert!(created["idempotency_key"].as_str().is_some_and(|k| !k.is_empty()));
    let joined = env.ok("worker", &["thread", "join", &secret]);
    assert_eq!(joined["receipt"]["result"]["joined"]["thread"], th.as_str(), "{joined}");
    env.ok("helper", &["thread", "join", &secret, "--idempotency-key", "helper-join-1"]);
    // The same key again is a replay of the first success.
    let again = env.ok("helper", &["thread", "join", &secret, "--idempotency-key", "helper-join-1"]);
    assert_eq!(again["replayed"], true, "{again}");
    assert_eq!(again["idempotency_key"], "helper-join-1");

    // An ask, seen in the worker's turn, answered, and the turn is empty again.
    let asked = env.ok("lead", &["thread", "post", &th, "--text", "what broke?", "--ask", &worker]);
    let seq = s(&asked["receipt"]["result"]["posted"]["entry"]);
    let turn = env.ok("worker", &["turn"]);
    let items = turn["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{turn}");
    assert_eq!(items[0]["kind"], "Response", "{turn}");
    assert_eq!(s(&items[0]["obligation"]["kind"]["response"]["entry"]), seq, "{turn}");
    let stdin_file = env.home.path().join("answer.txt");
    std::fs::write(&stdin_file, "the disk filled up").expect("write answer");
    let path = stdin_file.display().to_string();
    env.ok("worker", &["thread", "post", &th, "--file", &path, "--reply-to", &seq, "--ask-nobody"]);
    let turn = env.ok("worker", &["turn"]);
    assert_eq!(turn["items"].as_array().map(Vec::len), Some(0), "{turn}");

    // Reads of the thread.
    let timeline = env.ok("worker", &["thread", "timeline", &th]);
    assert_eq!(timeline["entries"].as_array().map(Vec::len), Some(2), "{timeline}");
    let entry = env.ok("worker", &["thread", "entry", &th, "2"]);
    assert_eq!(entry["text"], "the disk filled up", "{entry}");
    let ws = env.ok("worker", &["ws", &th]);
    assert_eq!(ws["summary"]["thread"]["id"], th.as_str(), "{ws}");

    // The same reads for people: times in RFC 3339, members as `ag_1 governor`, no JSON in a cell.
    let shown = env.human("worker", &["thread", "timeline", &th]);
    assert_eq!(shown.split_whitespace().filter(|w| rfc_3339(w)).count(), 2, "one time per entry:\n{shown}");
    let ws = env.ok("lead", &["ws", &th]);
    let shown = env.human("lead", &["ws", &th]);
    assert!(!shown.contains(['{', '"']), "no JSON in the working set:\n{shown}");
    let members = ws["summary"]["thread"]["members"].as_array().expect("members");
    for m in members {
        let role = s(&m["role"]).to_ascii_lowercase();
        assert!(shown.contains(&format!("{} {role}", s(&m["agent"]))), "{m} in:\n{shown}");
    }
    assert!(shown.split_whitespace().any(rfc_3339), "the history's times:\n{shown}");

    // An assignment taken, delivered and adopted.
    let post =
        env.ok("lead", &["assignment", "create", &th, "--to", &worker, "--criteria", "a root cause", "--ask-nobody"]);
    let asg = s(&post["receipt"]["result"]["posted"]["assignment"]);
    assert!(asg.starts_with("asg_"), "{post}");
    let opp = env.ok("worker", &["opportunities"]);
    assert_eq!(opp["items"][0]["kind"]["assignment"], asg.as_str(), "{opp}");
    env.ok("worker", &["assignment", "take", &asg]);
    let turn = env.ok("worker", &["turn"]);
    assert_eq!(turn["items"][0]["obligation"]["kind"]["assignment_delivery"], asg.as_str(), "{turn}");
    env.ok("worker", &["assignment", "deliver", &asg, "--text", "a full disk"]);
    let shown = env.ok("lead", &["assignment", "show", &asg]);
    assert_eq!(shown["output_text"], "a full disk", "{shown}");
    let adopted = env.ok("lead", &["assignment", "adopt", &asg]);
    assert_eq!(adopted["receipt"]["result"]["assignment_adopted"]["assignment"], asg.as_str(), "{adopted}");
    let shown = env.ok("lead", &["assignment", "show", &asg]);
    assert_eq!(shown["state_name"], "ended: adopted", "{shown}");

    // One rejected, one dropped, one voided.
    let asg2 = s(&env
        .ok("lead", &["assignment", "create", &th, "--to", &worker, "--criteria", "more", "--ask-nobody"])["receipt"]
        ["result"]["posted"]["assignment"]);
    env.ok("worker", &["assignment", "take", &asg2]);
    env.ok("worker", &["assignment", "deliver", &asg2, "--text", "not enough"]);
    env.ok("lead", &["assignment", "reject", &asg2, "--reason", "too short"]);
    let asg3 = s(
        &env.ok("lead", &["assignment", "create", &th, "--to", &worker, "--criteria", "x", "--ask-nobody"])["receipt"]
            ["result"]["posted"]["assignment"],
    );
    env.ok("worker", &["assignment", "take", &asg3]);
    env.ok("worker", &["assignment", "drop", &asg3]);
    let asg4 = s(
        &env.ok("lead", &["assignment", "create", &th, "--to", &worker, "--criteria", "y", "--ask-nobody"])["receipt"]
            ["result"]["posted"]["assignment"],
    );
    env.ok("lead", &["assignment", "void", &asg4]);
    assert_eq!(env.ok("lead", &["assignment", "show", &asg4])["state_name"], "ended: voided");

    // Handle, retract, roles, grants, removal, leaving and closing.
    let q =
        s(&env.ok("lead", &["thread", "post", &th, "--text", "ack?", "--ask", &worker])["receipt"]["result"]["posted"]
            ["entry"]);
    env.ok("worker", &["thread", "handle", &th, &q, "--note", "seen"]);
    let r =
        s(&env.ok("lead", &["thread", "post", &th, "--text", "oops", "--ask", &helper])["receipt"]["result"]["posted"]
            ["entry"]);
    env.ok("lead", &["thread", "retract", &th, &r]);
    let granted = env.ok("lead", &["thread", "grant", &th, "--role", "observer"]);
    assert!(granted["grant_secret"].as_str().is_some_and(|x| !x.is_empty()), "{granted}");
    // For people, the receipt's grant is `<fingerprint> <role>`, as the working set shows it.
    let shown = env.human("lead", &["thread", "grant", &th, "--role", "observer"]);
    let grant = shown.lines().find_map(|l| l.strip_prefix("grant ")).map(str::trim).unwrap_or_default();
    assert!(grant.ends_with(" observer") && !grant.contains('{'), "{shown}");
    let fingerprint = grant.trim_end_matches(" observer");
    let ws = env.human("lead", &["ws", &th]);
    assert!(ws.contains(&format!("{fingerprint} observer")), "the live grant in the same form:\n{ws}");
    env.ok("lead", &["thread", "void-grant", &th]);
    let role = env.ok("lead", &["thread", "role", &th, &helper, "observer"]);
    assert_eq!(role["receipt"]["result"]["role_changed"]["to"], "Observer", "{role}");
    env.ok("helper", &["thread", "leave", &th]);
    env.ok("lead", &["thread", "remove", &th, &worker]);
    env.ok("lead", &["thread", "close", &th]);

    // Memories.
    let m = env.ok("lead", &["memory", "create", "--text", "v1"]);
    let mem = s(&m["receipt"]["result"]["memory_created"]["memory"]);
    env.ok("lead", &["memory", "update", &mem, "--text", "v2"]);
    env.ok("lead", &["memory", "publish", &mem]);
    let shown = env.ok("worker", &["memory", "show", &mem]);
    assert_eq!(shown["text"], "v2", "{shown}");
    assert_eq!(env.ok("lead", &["memory", "show", &mem, "--version", "1"])["text"], "v1");
    env.ok("lead", &["memory", "unpublish", &mem]);
    env.ok("lead", &["memory", "withdraw", &mem]);

    // A Task from a TOML contract: taken and delivered, adopted; revised from JSON, paused, resumed;
    // delivered with --take and rejected; taken and dropped.
    let toml = env.home.path().join("contract.toml");
    std::fs::write(
        &toml,
        "requirements = \"write the postmortem\"\nacceptance = \"it explains the cause\"\nmax_adoptions = 2\n",
    )
    .expect("contract");
    let created = env.ok("lead", &["task", "create", "--contract", &toml.display().to_string()]);
    let task = s(&created["receipt"]["result"]["task_created"]["task"]);
    assert!(task.starts_with("task_"), "{created}");
    let shown = env.ok("worker", &["task", "show", &task]);
    assert_eq!(shown["requirements_text"], "write the postmortem", "{shown}");
    let engaged = env.ok("worker", &["task", "take", &task]);
    let eng = s(&engaged["receipt"]["result"]["engaged"]["engagement"]);
    env.ok("worker", &["task", "deliver", &task, "--text", "the postmortem"]);
    let judged = env.ok("lead", &["turn"]);
    assert!(judged["items"].as_array().is_some_and(|i| i.iter().any(|x| x["kind"] == "Judgment")), "{judged}");
    env.ok("lead", &["task", "adopt", &eng]);
    assert_eq!(env.ok("worker", &["task", "engagement", &eng])["state_name"], "ended: adopted");
    let json = env.home.path().join("contract.json");
    std::fs::write(&json, "{\"requirements\": \"write it better\", \"acceptance\": \"clear\", \"max_adoptions\": 2}")
        .expect("contract");
    let revised = env.ok("lead", &["task", "revise", &task, "--contract", &json.display().to_string()]);
    assert_eq!(revised["receipt"]["result"]["contract_revised"]["version"], 2, "{revised}");
    env.ok("lead", &["task", "pause", &task]);
    env.ok("lead", &["task", "resume", &task]);
    let delivered = env.ok("helper", &["task", "deliver", &task, "--take", "--text", "mine"]);
    let eng2 = s(&delivered["receipt"]["result"]["engagement_delivered"]["engagement"]);
    env.ok("lead", &["task", "reject", &eng2, "--reason", "not it"]);
    env.register("third");
    let eng3 = s(&env.ok("third", &["task", "take", &task])["receipt"]["result"]["engaged"]["engagement"]);
    env.ok("third", &["task", "drop", &eng3]);
    assert_eq!(env.ok("third", &["task", "engagement", &eng3])["state_name"], "ended: dropped");

    // Human output is a table, not JSON.
    let out = env.run(&["--profile", "lead", "turn"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("OBLIGATION") || text.contains("(none)"), "{text}");
}

#[test]
fn each_error_class_has_its_exit_status_and_json() {
    let env = Env::start();
    env.register("a");
    env.register("b");
    let created = env.ok("a", &["thread", "create", "--text", "s", "--grant", "speaker"]);
    let th = s(&created["receipt"]["result"]["thread_created"]["thread"]);
    env.ok("b", &["thread", "join", &s(&created["grant_secret"])]);

    // 2: usage, locally and from the server.
    let (e, _) = env.fails("a", &["thread", "post", &th], 2);
    assert_eq!(e["code"], "USAGE");
    let bad = env.home.path().join("bad.toml");
    std::fs::write(&bad, "requirements = \"r\"\nacceptance = \"a\"\nmax_adoptions = 0\n").expect("contract");
    let (e, stderr) = env.fails("a", &["task", "create", "--contract", &bad.display().to_string()], 2);
    assert_eq!(e["code"], "INVALID_ARGUMENT", "{stderr}");
    assert_eq!(e["field"], "contract.max_adoptions", "{stderr}");
    assert!(stderr.contains("error: INVALID_ARGUMENT: ") && stderr.contains("next step: revise"), "{stderr}");
    let out = env.run(&["thread", "nonsense"]);
    assert_eq!(out.status.code(), Some(2));

    // 3: not found.
    let (e, stderr) = env.fails("a", &["thread", "timeline", "th_999"], 3);
    assert_eq!(e["code"], "NOT_FOUND");
    assert!(stderr.contains("error: NOT_FOUND: "), "{stderr}");

    // 4: permission and authentication.
    let (e, _) = env.fails("b", &["thread", "close", &th], 4);
    assert_eq!(e["code"], "NOT_GOVERNOR");
    let (e, _) = env.fails("a", &["turn", "--key", "kf_ag_not_a_real_key", "--retries", "0"], 4);
    assert_eq!(e["code"], "UNAUTHENTICATED");

    // 5: state.
    env.ok("a", &["thread", "close", &th]);
    let (e, _) = env.fails("a", &["thread", "post", &th, "--text", "late"], 5);
    assert_eq!(e["code"], "THREAD_CLOSED");

    // 6: limits.
    let big = "x".repeat(4096);
    let (e, _) = env.fails("a", &["thread", "create", "--text", &big], 6);
    assert_eq!(e["code"], "LIMIT_EXCEEDED");

    // 7: a write that may have arrived and was never answered: the key to retry with is printed.
    let silent = Silent::start();
    let (e, stderr) = env.fails(
        "a",
        &[
            "thread",
            "create",
            "--text",
            "s",
            "--endpoint",
            &silent.addr,
            "--retries",
            "1",
            "--timeout-secs",
            "1",
            "--idempotency-key",
            "k-7",
        ],
        7,
    );
    assert_eq!(e["code"], "INDETERMINATE", "{stderr}");
    assert_eq!(e["idempotency_key"], "k-7");
    assert!(stderr.contains("--idempotency-key k-7"), "{stderr}");
    assert!(s(&e["message"]).contains(&format!("{} did not answer within 1 s", silent.addr)), "{stderr}");
    // A write to an address where nothing listens was never sent: no key to retry with.
    let refused = refused_addr();
    let (e, stderr) = env.fails("a", &["thread", "create", "--text", "s", "--endpoint", &refused], 7);
    assert_eq!(e["code"], "NOTHING_LISTENING", "{stderr}");
    assert_eq!(e["idempotency_key"], Value::Null, "{stderr}");

    // The environment beats the profile, and a flag beats the environment.
    let out = env.run_env("KUNGFU_KEY", "kf_ag_wrong", &["--profile", "a", "turn", "--retries", "0"]);
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
    let out = env.run_env("KUNGFU_ENDPOINTS", &refused, &["--profile", "a", "turn", "--retries", "0"]);
    assert_eq!(out.status.code(), Some(7), "{}", String::from_utf8_lossy(&out.stderr));
    let flagged = ["--profile", "a", "turn", "--retries", "0", "--endpoint", env.endpoint.as_str()];
    let out = env.run_env("KUNGFU_ENDPOINTS", &refused, &flagged);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // Without a key anywhere, agent commands say how to get one.
    let (e, _) = env.fails("nobody", &["turn"], 2);
    assert!(s(&e["message"]).contains("kungfu register"), "{e}");

    // The help text documents the exit statuses.
    let help = env.run(&["--help"]);
    assert!(String::from_utf8_lossy(&help.stdout).contains("Exit status:"));
}

#[test]
fn operator_commands_show_and_manage_the_cluster() {
    let env = Env::start();
    let key = ["--key", TOKEN, "--endpoint", env.endpoint.as_str()];
    let mut args = vec!["cluster", "status"];
    args.extend_from_slice(&key);
    let status = env.ok("default", &args);
    assert_eq!(status["nodes"].as_array().map(Vec::len), Some(1), "{status}");
    assert_eq!(status["nodes"][0]["role"], "leader", "{status}");
    assert_eq!(status["nodes"][0]["node_id"], 1, "{status}");
    let out = env.run(&["cluster", "status", "--key", TOKEN, "--endpoint", &env.endpoint]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ROLE") && text.contains("leader"), "{text}");

    let mut args = vec!["cluster", "snapshot"];
    args.extend_from_slice(&key);
    let snap = env.ok("default", &args);
    assert!(snap["snapshot_index"].is_number(), "{snap}");

    let target = env.home.path().join("backup-1").display().to_string();
    let mut args = vec!["cluster", "backup", "--to", &target];
    args.extend_from_slice(&key);
    let backup = env.ok("default", &args);
    assert!(backup["manifest"]["sha256"].as_str().is_some_and(|h| h.len() == 64), "{backup}");
    assert!(Path::new(&target).join("manifest.toml").exists());

    // Restore the backup into a new node's data directory (through `kungfud restore`), and refuse
    // to restore over it a second time.
    let kungfud = Path::new(env!("CARGO_BIN_EXE_kungfu")).with_file_name("kungfud").display().to_string();
    let restored = env.home.path().join("restored");
    let config = env.home.path().join("restored.toml");
    std::fs::write(
        &config,
        format!(
            "node_id = 1\ncluster_id = \"restored\"\ndata_dir = \"{}\"\napi_listen = \"127.0.0.1:{}\"\nraft_listen = \"127.0.0.1:{}\"\n",
            restored.display(),
            kungfu_system_tests::free_port(),
            kungfu_system_tests::free_port()
        ),
    )
    .expect("write config");
    let config = config.display().to_string();
    let done =
        env.ok("default", &["cluster", "restore", "--from", &target, "--config", &config, "--kungfud", &kungfud]);
    assert_eq!(done["restored_from"], target.as_str(), "{done}");
    assert!(restored.join("IDENTITY").exists(), "the restored data directory exists");
    let (e, _) =
        env.fails("default", &["cluster", "restore", "--from", &target, "--config", &config, "--kungfud", &kungfud], 2);
    assert!(e["message"].as_str().is_some_and(|m| m.contains("restore refused")), "{e}");

    let mut args = vec!["cluster", "change-membership", "1"];
    args.extend_from_slice(&key);
    let m = env.ok("default", &args);
    assert_eq!(m["membership"]["voters"][0]["node_id"], 1, "{m}");

    // Transferring to the leader itself or to a non-voter is refused with a rejection and an exit
    // status of its class; adding an unreachable learner fails likewise. Both print the code.
    let mut args = vec!["cluster", "transfer-leader", "7", "--retries", "0"];
    args.extend_from_slice(&key);
    let out = env.run(&args);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: "), "{}", String::from_utf8_lossy(&out.stderr));
    let mut args = vec!["cluster", "add-learner", "9", "--raft", "127.0.0.1:1", "--api", "127.0.0.1:1"];
    args.extend_from_slice(&["--retries", "0", "--timeout-secs", "3"]);
    args.extend_from_slice(&key);
    let out = env.run(&args);
    assert!(!out.status.success());

    // A wrong operator token is an authentication failure, and says the token was refused (the
    // server answers "operator token required" to a missing and a wrong token alike).
    let (e, stderr) =
        env.fails("default", &["cluster", "status", "--key", "wrong-token", "--endpoint", &env.endpoint], 4);
    assert_eq!(e["code"], "UNAUTHENTICATED");
    assert!(s(&e["message"]).starts_with("the operator token was refused (wrong token?): "), "{stderr}");
    assert!(s(&e["message"]).contains("--key"), "{stderr}");
    let (e, _) = env.fails("default", &["cluster", "status", "--endpoint", &env.endpoint], 2);
    assert!(s(&e["message"]).contains("operator_token"), "{e}");

    // The raft port of a real node: named as a raft port with the node's API port (the raft
    // service answers any other call with it, issue #16), a usage error.
    let (raft, api) =
        env.cluster.nodes.values().map(|n| (n.raft.to_string(), n.api.to_string())).next().expect("one node");
    let (e, stderr) = env.fails("default", &["cluster", "status", "--key", TOKEN, "--endpoint", &raft], 2);
    assert_eq!(e["code"], "NOT_KUNGFU_API", "{stderr}");
    assert_eq!(s(&e["message"]), format!("{raft} is a raft port; use the API port: {api}"), "{stderr}");
}

/// An address where nothing listens: a port the system gave, then closed.
fn refused_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    drop(listener);
    addr
}

/// A listener that takes connections and never says a word; it stops with the test process.
struct Silent {
    addr: String,
}

impl Silent {
    fn start() -> Silent {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        std::thread::spawn(move || {
            let mut open = Vec::new();
            for socket in listener.incoming().map_while(Result::ok) {
                open.push(socket);
            }
        });
        Silent { addr }
    }
}

/// A wrong endpoint fails at once with the address and what to check, in text and in JSON, without
/// the ~15 s of retries a cluster electing a leader gets. No node is needed.
#[test]
fn a_refused_endpoint_says_nothing_listens_there_and_what_to_check() {
    let home = tempfile::tempdir().expect("tempdir");
    let addr = refused_addr();
    let run = |json: bool| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kungfu"));
        if json {
            cmd.arg("--json");
        }
        cmd.args(["turn", "--key", "kf_ag_any", "--endpoint", &addr])
            .env("HOME", home.path())
            .env("XDG_CONFIG_HOME", home.path().join("xdg"))
            .env_remove("KUNGFU_KEY")
            .env_remove("KUNGFU_ENDPOINTS")
            .env_remove("KUNGFU_PROFILE")
            .output()
            .expect("run kungfu")
    };
    let out = run(false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "error: NOTHING_LISTENING: nothing listening at {addr} (connection refused): is kungfud running there? \
             check the endpoint\n"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("next step: revise"), "{stderr}");
    // Not a terminal: no progress lines, only the error.
    assert_eq!(stderr.lines().count(), 2, "{stderr}");
    let out = run(true);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let v: Value = serde_json::from_str(stderr.lines().last().unwrap_or_default()).expect("JSON error");
    assert_eq!(v["error"]["code"], "NOTHING_LISTENING", "{stderr}");
    assert_eq!(v["error"]["exit_status"], 7, "{stderr}");

    // --connect-timeout takes seconds, and refuses what is not a positive number.
    let bad = Command::new(env!("CARGO_BIN_EXE_kungfu"))
        .args(["turn", "--connect-timeout", "0", "--endpoint", &addr])
        .output()
        .expect("run kungfu");
    assert_eq!(bad.status.code(), Some(2), "{}", String::from_utf8_lossy(&bad.stderr));
}

impl Env {
    /// Starts `kungfu --json --profile <profile> <args>` in the background with stdout piped.
    fn spawn(&self, profile: &str, args: &[&str]) -> std::process::Child {
        Command::new(env!("CARGO_BIN_EXE_kungfu"))
            .args(["--json", "--profile", profile])
            .args(args)
            .env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.config_dir())
            .env_remove("KUNGFU_KEY")
            .env_remove("KUNGFU_ENDPOINTS")
            .env_remove("KUNGFU_PROFILE")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn kungfu")
    }
}

/// Reads JSON lines from a child's stdout on a thread, so the test can wait with a bound.
fn lines_of(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<Value> {
    use std::io::BufRead;
    let out = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                if tx.send(v).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// The entry sequence numbers of the next `n` watch lines (bounded wait).
fn next_seqs(rx: &std::sync::mpsc::Receiver<Value>, n: usize) -> Vec<u64> {
    (0..n)
        .map(|_| {
            let v = rx.recv_timeout(BOUND).expect("a watch line within the bound");
            v["entry"]["seq"].as_u64().unwrap_or_else(|| panic!("no entry seq in {v}"))
        })
        .collect()
}

/// `kungfu watch thread` prints the backlog, then entries as they are posted; reopened with
/// `--after`, it prints only what came after — no gap, no duplicate.
#[test]
fn watch_follows_a_thread_and_resumes_after_the_last_entry() {
    let env = Env::start();
    env.register("lead");
    let created = env.ok("lead", &["thread", "create", "--text", "watched"]);
    let th = s(&created["receipt"]["result"]["thread_created"]["thread"]);
    env.ok("lead", &["thread", "post", &th, "--text", "first", "--ask-nobody"]);
    let mut watcher = env.spawn("lead", &["watch", "thread", &th]);
    let rx = lines_of(&mut watcher);
    assert_eq!(next_seqs(&rx, 1), vec![1], "the backlog comes first");
    env.ok("lead", &["thread", "post", &th, "--text", "second", "--ask-nobody"]);
    env.ok("lead", &["thread", "post", &th, "--text", "third", "--ask-nobody"]);
    assert_eq!(next_seqs(&rx, 2), vec![2, 3], "new entries as they are applied");
    let _ = watcher.kill();
    let _ = watcher.wait();
    let mut resumed = env.spawn("lead", &["watch", "thread", &th, "--after", "2"]);
    let rx = lines_of(&mut resumed);
    assert_eq!(next_seqs(&rx, 1), vec![3], "resuming after 2 gives exactly 3");
    assert!(rx.recv_timeout(Duration::from_millis(500)).is_err(), "nothing else: no duplicate");
    let _ = resumed.kill();
    let _ = resumed.wait();
    // A thread the agent cannot read ends the command with NOT_FOUND's exit status.
    env.fails("lead", &["watch", "thread", "th_999"], 3);
}

/// The tool list in `docs/mcp.md` (between its `tools:begin` and `tools:end` markers) is what
/// `kungfu mcp --list-tools` prints from the door's registry, so the doc cannot drift from the
/// tools. `KUNGFU_BLESS=1` rewrites the section instead of failing.
#[test]
fn mcp_tools_doc_matches_the_registry() {
    let out = Command::new(env!("CARGO_BIN_EXE_kungfu")).args(["mcp", "--list-tools"]).output().expect("run kungfu");
    assert!(out.status.success(), "kungfu mcp --list-tools: {}", String::from_utf8_lossy(&out.stderr));
    let listed = String::from_utf8(out.stdout).expect("UTF-8");
    for tool in ["agent_register", "thread_post", "assignment_take", "turn_get", "turn_wait"] {
        assert!(listed.contains(&format!("`{tool}`")), "--list-tools lacks {tool}:\n{listed}");
    }
    let doc_path = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .join("../../docs/mcp.md");
    let doc = std::fs::read_to_string(&doc_path).expect("docs/mcp.md");
    let (begin, end) = ("<!-- tools:begin -->\n", "<!-- tools:end -->");
    let start = doc.find(begin).expect("docs/mcp.md has the tools:begin marker") + begin.len();
    let stop = doc.find(end).expect("docs/mcp.md has the tools:end marker");
    if doc[start..stop] == listed {
        return;
    }
    if std::env::var_os("KUNGFU_BLESS").is_some() {
        let blessed = format!("{}{listed}{}", &doc[..start], &doc[stop..]);
        std::fs::write(&doc_path, blessed).expect("write docs/mcp.md");
        return;
    }
    panic!(
        "the tool list in docs/mcp.md differs from the registry: regenerate it with \
         KUNGFU_BLESS=1 cargo nextest run --workspace -E 'test(mcp_tools_doc)'"
    );
}

/// `kungfu --version`, `kungfud --version` and `kungfu-bench --version` name the commit they were
/// built from (this checkout's HEAD) and the build date.
#[test]
fn every_binary_names_its_commit_and_build_date() {
    let head = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).output().expect("git");
    let head = String::from_utf8_lossy(&head.stdout).trim().to_string();
    assert_eq!(head.len(), 12, "the tests run in a git checkout");
    let kungfud = Path::new(env!("CARGO_BIN_EXE_kungfu")).with_file_name("kungfud");
    let bench = Path::new(env!("CARGO_BIN_EXE_kungfu")).with_file_name("kungfu-bench");
    for bin in [Path::new(env!("CARGO_BIN_EXE_kungfu")), kungfud.as_path(), bench.as_path()] {
        let out = Command::new(bin).arg("--version").output().expect("run --version");
        assert!(out.status.success(), "{} --version failed", bin.display());
        let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let (_, rest) = line.split_once(" (commit ").unwrap_or_else(|| panic!("no commit in {line:?}"));
        let (commit, date) = rest.split_once(", built ").unwrap_or_else(|| panic!("no date in {line:?}"));
        assert_eq!(commit, head, "{line}");
        let date = date.trim_end_matches(')');
        assert!(date.len() == 10 && date.starts_with("20") && date.as_bytes()[4] == b'-', "{line}");
    }
}

/// `kungfu bench …` is the benchmark harness, a program of its own: `kungfu` hands it every
/// argument after `bench` untouched (`--json` given to `kungfu` goes first) and its exit status is
/// the command's. Without a harness, the error names where it looked and how to build one.
#[test]
fn bench_hands_its_arguments_to_the_harness_and_a_missing_one_is_a_usage_error() {
    let home = tempfile::tempdir().expect("tempdir");
    // A stand-in harness that prints each argument on a line and exits 3.
    let harness = home.path().join("kungfu-bench");
    std::fs::write(&harness, "#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done\nexit 3\n").expect("write");
    std::fs::set_permissions(&harness, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let out = Command::new(env!("CARGO_BIN_EXE_kungfu"))
        .args(["--json", "bench", "compare", "--nodes", "1", "--writers", "1,4", "--help"])
        .env("KUNGFU_BENCH", &harness)
        .output()
        .expect("run kungfu");
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let args: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect();
    assert_eq!(args, ["--json", "compare", "--nodes", "1", "--writers", "1,4", "--help"]);

    let missing = home.path().join("no-such-harness");
    let out = Command::new(env!("CARGO_BIN_EXE_kungfu"))
        .args(["bench", "write", "--writers", "4"])
        .env("KUNGFU_BENCH", &missing)
        .output()
        .expect("run kungfu");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("KUNGFU_BENCH={}: no such file", missing.display())), "{stderr}");
}

/// Issue #16, deliverable 9: `kungfu completions SHELL` prints a script naming the subcommands;
/// bash parses its script (`bash -n`). An unknown shell is a usage error.
#[test]
fn completions_name_the_subcommands_and_bash_parses_its_script() {
    let home = tempfile::tempdir().expect("tempdir");
    for shell in ["bash", "zsh", "fish"] {
        let out = Command::new(env!("CARGO_BIN_EXE_kungfu")).args(["completions", shell]).output().expect("run kungfu");
        assert!(out.status.success(), "completions {shell}: {}", String::from_utf8_lossy(&out.stderr));
        let script = String::from_utf8(out.stdout).expect("UTF-8");
        for word in ["register", "thread", "timeline", "cluster", "restart", "completions", "endpoint"] {
            assert!(script.contains(word), "the {shell} script does not name `{word}`");
        }
        if shell == "bash" {
            let path = home.path().join("kungfu.bash");
            std::fs::write(&path, &script).expect("write the script");
            let checked = Command::new("bash").arg("-n").arg(&path).output().expect("run bash");
            assert!(
                checked.status.success(),
                "bash -n refuses the script: {}",
                String::from_utf8_lossy(&checked.stderr)
            );
        }
    }
    let out = Command::new(env!("CARGO_BIN_EXE_kungfu")).args(["completions", "tcsh"]).output().expect("run kungfu");
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}
