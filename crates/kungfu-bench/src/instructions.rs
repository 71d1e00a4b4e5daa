//! `kungfu bench instructions`: a regression guard that is not a timed test. One `kungfud` node
//! runs under valgrind's callgrind with its instrumentation off; after an unmeasured setup (one
//! agent with a thread of its own whose entry 1 is a payload, as `bench compare` makes for its
//! `own` and `read` workloads) the run makes a fixed sequence of calls, one at a time, and reads
//! how many instructions the node's process executed in each phase (callgrind's `Ir`, every
//! thread of the process together: callgrind writes one file per thread only with
//! `--separate-threads=yes`, which the run does not pass):
//!
//! - `own`: `--ops` posts of a `--payload-bytes` entry to the writer's own thread, asking nobody;
//! - `read`: `--ops` linearizable reads of entry 1 of that thread (`GetEntry`);
//! - `mcp`: `--ops` of the same posts through the node's MCP door (`/mcp`, a stateless 2026-07-28
//!   `tools/call` of `thread_post` over HTTP/1.1, one connection per call): what the door adds to
//!   a post, the HTTP and JSON work included.
//!
//! Each phase makes [`WARMUP_OPS`] calls of its kind first, uncounted, then runs
//! `callgrind_control -z` (zero the counters), `-i on`, its calls, `-i off` and `--dump`, and reads
//! the `totals:` line of the dump. With one call at a time the count does not depend on how calls
//! interleave or how fast the machine is; what still varies is the node's own background work
//! (raft ticks, timers, storage threads) during the phase's wall time, which is counted too. The
//! figures are recorded in docs/benchmarks.md and compared in review; CI asserts only that the run
//! works.

use super::cluster::{Cluster, Runner};
use super::compare::KungfuSide;
use super::load::Op;
use super::{machine, machine_text, on_path, progress, server_text, version_of};
use crate::args::{BenchCluster, BenchInstructions};
use kungfu_cli::error::CliError;
use kungfu_cli::output;
use serde_json::{Value, json};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long the node may take to elect itself: under valgrind it starts many times slower.
const ELECT_BOUND_UNDER_VALGRIND: Duration = Duration::from_secs(120);

/// Uncounted calls of a phase's kind before it: the first calls on a connection and a thread pay
/// one-off costs (lazy initialisation, buffers growing) that are not the work of a call.
pub const WARMUP_OPS: u64 = 10;

/// How long one `callgrind_control` may take (it answers in a fraction of a second).
const CONTROL_BOUND: Duration = Duration::from_secs(30);

/// How long a requested dump may take to appear complete in the run's directory.
const DUMP_BOUND: Duration = Duration::from_secs(30);

/// The stem of the node's dumps, in the run's directory: `callgrind.out.PID.N` is dump N.
const OUT_STEM: &str = "callgrind.out";

/// The stem of the pipes through which `callgrind_control` (via vgdb) reaches the node, in the
/// run's directory rather than `/tmp`, so the SIGKILL at the end leaves none behind.
const VGDB_STEM: &str = "vgdb";

/// The programs the run needs.
#[derive(Debug, Clone)]
pub struct Tools {
    valgrind: PathBuf,
    control: PathBuf,
}

/// Finds `valgrind` and `callgrind_control` in `path_var` (the value of `PATH`), or an error
/// naming the one that is missing and how to get it.
pub fn tools(path_var: Option<OsString>) -> Result<Tools, CliError> {
    let find = |name: &str| {
        on_path(name, path_var.clone()).ok_or_else(|| {
            CliError::usage(format!(
                "no `{name}` on PATH: `kungfu bench instructions` runs the node under valgrind's callgrind; \
                 install Debian's valgrind (apt-get install valgrind), which brings valgrind and callgrind_control"
            ))
        })
    };
    Ok(Tools { valgrind: find("valgrind")?, control: find("callgrind_control")? })
}

/// The command put before `kungfud`: callgrind, counting nothing until told to. The paths are
/// relative: the node runs in the run's directory.
fn valgrind_prefix(valgrind: &Path) -> Vec<OsString> {
    vec![
        valgrind.into(),
        "--tool=callgrind".into(),
        "--instr-atstart=no".into(),
        format!("--callgrind-out-file={OUT_STEM}.%p").into(),
        "--vgdb=yes".into(),
        format!("--vgdb-prefix={VGDB_STEM}").into(),
    ]
}

/// The `Ir` of one callgrind dump, from its `totals:` line at the position of `Ir` on its
/// `events:` line. The `summary:` line is not read: callgrind 3.19 writes a wrong one in a dump
/// that follows an earlier dump of the same run (below zero, wrapped: 18446744073707200442 was
/// seen here), while `totals:` is the sum of the costs the dump holds. `totals:` is also the last
/// line callgrind writes, so a file without it is not complete yet.
pub fn total_ir(dump: &str) -> Result<u64, String> {
    let field = |name: &str| dump.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
    let events = field("events:").ok_or("no `events:` line")?;
    let at =
        events.split_whitespace().position(|e| e == "Ir").ok_or_else(|| format!("`events: {events}` has no Ir"))?;
    let totals = field("totals:").ok_or("no `totals:` line")?;
    let value = totals.split_whitespace().nth(at).ok_or_else(|| format!("`totals: {totals}` has no Ir"))?;
    value.parse().map_err(|e| format!("`totals: {totals}`: Ir `{value}`: {e}"))
}

/// The node's callgrind, driven through `callgrind_control`.
#[derive(Debug)]
struct Callgrind {
    control: PathBuf,
    /// The run's directory, where the dumps and the vgdb pipes are.
    dir: PathBuf,
    pid: u32,
    /// How many dumps have been requested: the next one is numbered one more.
    dumps: u32,
}

impl Callgrind {
    /// Runs `callgrind_control ARGS PID`. It exits 0 even when it found no such process, so
    /// success is its `OK.` with no `Error`.
    async fn send(&self, args: &[&str]) -> Result<(), CliError> {
        let mut command = tokio::process::Command::new(&self.control);
        command
            .arg(format!("--vgdb-prefix={}", self.dir.join(VGDB_STEM).display()))
            .args(args)
            .arg(self.pid.to_string())
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        let what = format!("callgrind_control {} {}", args.join(" "), self.pid);
        let out = match tokio::time::timeout(CONTROL_BOUND, command.output()).await {
            Ok(Ok(out)) => out,
            Ok(Err(e)) => return Err(CliError::other(format!("cannot run {what}: {e}"))),
            Err(_) => {
                return Err(CliError::other(format!(
                    "{what} did not answer within {}s; look at the node's log (rerun with --keep)",
                    CONTROL_BOUND.as_secs()
                )));
            }
        };
        let stdout = String::from_utf8_lossy(&out.stdout);
        if out.status.success() && stdout.contains("OK.") && !stdout.contains("Error") {
            return Ok(());
        }
        Err(CliError::other(format!(
            "{what} failed ({}): {} {}; is the node still running? Rerun with --keep and look at its log",
            out.status,
            stdout.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }

    /// Asks for a dump and returns its `Ir` once the file is complete.
    async fn dump(&mut self) -> Result<u64, CliError> {
        self.send(&["--dump"]).await?;
        self.dumps += 1;
        let file = self.dir.join(format!("{OUT_STEM}.{}.{}", self.pid, self.dumps));
        // callgrind writes the dump before it answers; the wait only covers a slow file system.
        let start = Instant::now();
        loop {
            let read = std::fs::read_to_string(&file).map_err(|e| e.to_string());
            match read.and_then(|text| total_ir(&text)) {
                Ok(ir) => return Ok(ir),
                Err(e) if start.elapsed() > DUMP_BOUND => {
                    return Err(CliError::other(format!(
                        "callgrind's dump {} is not readable after {}s: {e}; rerun with --keep and look at it",
                        file.display(),
                        DUMP_BOUND.as_secs()
                    )));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// Makes [`WARMUP_OPS`] uncounted calls of `op`, then `ops` counted ones, one at a time.
    async fn phase<O: Op>(
        &mut self,
        name: &'static str,
        call_text: String,
        op: &mut O,
        ops: u64,
    ) -> Result<Phase, CliError> {
        for i in 1..=WARMUP_OPS {
            call(name, op, i, WARMUP_OPS, "uncounted").await?;
        }
        progress(format!("{name}: {ops} counted call(s), one at a time"));
        self.send(&["-z"]).await?;
        self.send(&["-i", "on"]).await?;
        let started = Instant::now();
        for i in 1..=ops {
            call(name, op, i, ops, "counted").await?;
        }
        let seconds = started.elapsed().as_secs_f64();
        self.send(&["-i", "off"]).await?;
        let ir = self.dump().await?;
        Ok(Phase { name, call: call_text, ops, ir, seconds })
    }
}

/// One call of a phase; every call must succeed, or the count would be of other work.
async fn call<O: Op>(name: &str, op: &mut O, i: u64, of: u64, kind: &str) -> Result<(), CliError> {
    op.call().await.map_err(|code| {
        CliError::other(format!(
            "{name}: {kind} call {i} of {of} failed: {code}; every call must succeed for the count to mean \
             anything (rerun with --keep and look at the node's log)"
        ))
    })
}

/// Writer 0 posting to its own thread through the MCP door of node `leader`, as an MCP host
/// would: a stateless `tools/call` (protocol revision 2026-07-28, its headers and `_meta`) with
/// the agent's key, one HTTP/1.1 connection per call (`Connection: close`).
struct McpPoster {
    addr: String,
    key: String,
    thread: String,
    content: String,
    n: u64,
}

impl McpPoster {
    fn new(side: &KungfuSide, leader: u16) -> Result<McpPoster, CliError> {
        Ok(McpPoster {
            addr: side.cluster().http(leader)?,
            key: side.agent_key(0).to_string(),
            thread: side.own_thread(0).to_string(),
            content: String::from_utf8_lossy(side.body()).into_owned(),
            n: 0,
        })
    }

    /// The request's bytes: the head, then the JSON-RPC body.
    fn request(&mut self) -> Vec<u8> {
        self.n += 1;
        let body = json!({
            "jsonrpc": "2.0",
            "id": self.n,
            "method": "tools/call",
            "params": {
                "name": "thread_post",
                "arguments": {
                    "thread": self.thread,
                    "body": {"content": self.content},
                    "ask": {"agents": []},
                    "idempotency_key": format!("bench-mcp-{}-{}", std::process::id(), self.n),
                },
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        })
        .to_string();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nAuthorization: Bearer {key}\r\n\
             MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: thread_post\r\n\
             Content-Length: {len}\r\nConnection: close\r\n\r\n",
            addr = self.addr,
            key = self.key,
            len = body.len()
        );
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body.as_bytes());
        bytes
    }
}

impl Op for McpPoster {
    async fn call(&mut self) -> Result<(), String> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let request = self.request();
        let exchange = async {
            let mut s = tokio::net::TcpStream::connect(&self.addr).await.map_err(|e| format!("CONNECT: {e}"))?;
            s.write_all(&request).await.map_err(|e| format!("WRITE: {e}"))?;
            let mut answer = Vec::new();
            s.read_to_end(&mut answer).await.map_err(|e| format!("READ: {e}"))?;
            Ok::<Vec<u8>, String>(answer)
        };
        let answer = tokio::time::timeout(Duration::from_secs(60), exchange)
            .await
            .map_err(|_| "DEADLINE_EXCEEDED".to_string())??;
        let text = String::from_utf8_lossy(&answer);
        // A post's tool result names its receipt; a refusal is a tool result with isError.
        if !text.starts_with("HTTP/1.1 200") || !text.contains("\"posted\"") || text.contains("\"isError\":true") {
            let first: String = text.chars().take(300).collect();
            return Err(format!("MCP answered: {first}"));
        }
        Ok(())
    }
}

/// One phase's count.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    pub name: &'static str,
    /// What one call is.
    pub call: String,
    pub ops: u64,
    /// Instructions the node's process executed from the first counted call to the last answer.
    pub ir: u64,
    /// The phase's wall time: the node's background work in it is counted too.
    pub seconds: f64,
}

impl Phase {
    pub fn ir_per_op(&self) -> u64 {
        (self.ir + self.ops / 2) / self.ops.max(1)
    }

    fn to_json(&self) -> Value {
        json!({
            "phase": self.name,
            "call": self.call,
            "ops": self.ops,
            "ir": self.ir,
            "ir_per_op": self.ir_per_op(),
            "seconds": (self.seconds * 1000.0).round() / 1000.0,
        })
    }

    fn row(&self) -> Vec<String> {
        vec![
            self.name.to_string(),
            self.call.clone(),
            self.ops.to_string(),
            format!("{:.2}", self.seconds),
            self.ir.to_string(),
            self.ir_per_op().to_string(),
        ]
    }
}

/// Runs the guard and prints it.
pub async fn run(args: BenchInstructions, binary: PathBuf, server: Value, json: bool) -> Result<(), CliError> {
    let tools = tools(std::env::var_os("PATH"))?;
    let valgrind = json!({
        "path": tools.valgrind.display().to_string(),
        "version": version_of(&tools.valgrind, Duration::from_secs(5)),
    });
    let payload_bytes =
        usize::try_from(args.payload_bytes).map_err(|_| CliError::usage("--payload-bytes is too large"))?;
    let opts = BenchCluster { nodes: 1, files: args.files.clone(), base_port: None };
    let runner = Runner {
        prefix: valgrind_prefix(&tools.valgrind),
        elect_bound: ELECT_BOUND_UNDER_VALGRIND,
        ..Runner::default()
    };
    progress("the node runs under callgrind, counting nothing until the counted calls");
    let (cluster, leader) = Cluster::launch_with(&opts, binary, runner).await?;
    let pid = cluster.pids().first().map(|(_, pid)| *pid).ok_or_else(|| CliError::other("the node is not running"))?;
    let mut callgrind = Callgrind { control: tools.control, dir: cluster.dir().to_path_buf(), pid, dumps: 0 };
    // From here on `side` owns the cluster: dropping it kills the node and removes the directory.
    let mut side = KungfuSide::on(cluster, leader, 1, payload_bytes).await?;
    progress("setup, uncounted: one agent with a thread of its own, its entry 1 a payload");
    side.ensure_agents(1).await?;
    let mut poster = side.poster(0, side.own_thread(0));
    let posting = format!("post a {payload_bytes}-byte entry to the writer's own thread, asking nobody");
    let own = callgrind.phase("own", posting, &mut poster, args.ops).await?;
    let mut reader = side.reader(0, false);
    let reading = "linearizable GetEntry of entry 1 of that thread".to_string();
    let read = callgrind.phase("read", reading, &mut reader, args.ops).await?;
    let mut mcp = McpPoster::new(&side, leader)?;
    let posting = "the same post as an MCP tools/call of thread_post over HTTP/1.1, one connection each".to_string();
    let mcp = callgrind.phase("mcp", posting, &mut mcp, args.ops).await?;
    drop(side);
    let phases = [own, read, mcp];

    let machine = machine();
    let params = json!({ "nodes": 1, "ops": args.ops, "warmup_ops": WARMUP_OPS, "payload_bytes": args.payload_bytes });
    if json {
        output::print_json(&json!({
            "bench": "instructions",
            "machine": machine,
            "kungfud": server,
            "valgrind": valgrind,
            "params": params,
            "phases": phases.iter().map(Phase::to_json).collect::<Vec<_>>(),
        }));
        return Ok(());
    }
    println!("kungfu bench instructions: instructions (callgrind Ir) one kungfud node executes per call");
    let valgrind_text = format!(
        "{} {}",
        valgrind["version"].as_str().unwrap_or("version unknown"),
        valgrind["path"].as_str().unwrap_or("?")
    );
    output::pairs(&[
        ("machine", machine_text(&machine)),
        ("kungfud", server_text(&server)),
        ("valgrind", valgrind_text),
        (
            "parameters",
            format!(
                "1 node, {} counted call(s) per phase, one at a time, after {WARMUP_OPS} uncounted; payload {} bytes",
                args.ops, args.payload_bytes
            ),
        ),
    ]);
    println!();
    let header = ["phase", "call", "ops", "seconds", "total Ir", "Ir/op"];
    let rows: Vec<Vec<String>> = phases.iter().map(Phase::row).collect();
    output::table(&header, &rows);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The head and tail of a real dump of `kungfud` (valgrind 3.19), the cost lines cut.
    const DUMP: &str = "# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\npid: 11064\n\
        cmd:  /t/release/kungfud --config node1.toml\npart: 2\n\n\ndesc: I1 cache: \n\
        desc: Trigger: dump\n\npositions: line\nevents: Ir\nsummary: 18446744073707200442\n\n\n\
        ob=(2) /usr/lib/x86_64-linux-gnu/libc.so.6\nfl=(8) ./nptl/cancellation.c\n\
        fn=(56) __pthread_disable_asynccancel\n66 1146\n+5 1146\n\ntotals: 18342756\n";

    #[test]
    fn the_ir_is_read_from_the_totals_line_not_the_wrapped_summary() {
        assert_eq!(total_ir(DUMP), Ok(18_342_756));
    }

    #[test]
    fn the_ir_is_the_column_the_events_line_names() {
        let dump = "events: Dr Ir Dw\nsummary: 1 2 3\nfn=(1) main\n16 1 2 3\ntotals: 40 500 60\n";
        assert_eq!(total_ir(dump), Ok(500));
    }

    #[test]
    fn an_incomplete_or_foreign_dump_is_an_error_that_says_why() {
        let cut = DUMP.split("totals:").next().expect("a head");
        assert_eq!(total_ir(cut), Err("no `totals:` line".to_string()));
        assert_eq!(total_ir("totals: 5\n"), Err("no `events:` line".to_string()));
        assert_eq!(total_ir("events: Dr\ntotals: 5\n"), Err("`events: Dr` has no Ir".to_string()));
        assert!(total_ir("events: Ir\ntotals: x\n").expect_err("not a number").starts_with("`totals: x`: Ir `x`"));
    }

    #[test]
    fn a_missing_program_is_named_with_the_package_that_brings_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = tools(Some(dir.path().as_os_str().to_owned())).expect_err("an empty PATH");
        assert!(err.message.starts_with("no `valgrind` on PATH"), "{}", err.message);
        assert!(err.message.contains("apt-get install valgrind"), "{}", err.message);
        std::fs::write(dir.path().join("valgrind"), "").expect("write");
        let err = tools(Some(dir.path().as_os_str().to_owned())).expect_err("no callgrind_control");
        assert!(err.message.starts_with("no `callgrind_control` on PATH"), "{}", err.message);
        std::fs::write(dir.path().join("callgrind_control"), "").expect("write");
        assert!(tools(Some(dir.path().as_os_str().to_owned())).is_ok());
    }

    #[test]
    fn the_per_op_count_is_rounded_and_the_node_starts_under_callgrind_counting_nothing() {
        let p = Phase { name: "own", call: "post".to_string(), ops: 3, ir: 1_000, seconds: 1.0 };
        assert_eq!(p.ir_per_op(), 333);
        assert_eq!(Phase { ir: 1_001, ops: 2, ..p.clone() }.ir_per_op(), 501);
        assert_eq!((p.to_json()["ir_per_op"].as_u64(), p.to_json()["ops"].as_u64()), (Some(333), Some(3)));
        let prefix = valgrind_prefix(Path::new("/usr/bin/valgrind"));
        assert_eq!(prefix[0], "/usr/bin/valgrind");
        assert!(prefix.contains(&OsString::from("--instr-atstart=no")), "{prefix:?}");
        assert!(prefix.contains(&OsString::from("--callgrind-out-file=callgrind.out.%p")), "{prefix:?}");
    }
}
