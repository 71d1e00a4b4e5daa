//! The command line grammar: global flags and every subcommand, as clap derive types.

use clap::{Args, Parser, Subcommand};
use std::time::Duration;

/// The directory `kungfu dev` uses unless `--dir` names another.
pub const DEFAULT_DIR: &str = "./.kungfu-dev";

/// The longest `--connect-timeout`: an hour.
const MAX_CONNECT_TIMEOUT_SECS: f64 = 3600.0;

/// A positive number of seconds, at most [`MAX_CONNECT_TIMEOUT_SECS`].
fn seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s.trim().parse().map_err(|_| format!("not a number of seconds: {s}"))?;
    if !(secs > 0.0 && secs <= MAX_CONNECT_TIMEOUT_SECS) {
        return Err(format!("must be more than 0 and at most {MAX_CONNECT_TIMEOUT_SECS} seconds"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// The `kungfu` command line: every agent action and read of a Kungfu cluster, and the operator
/// calls.
/// `kungfu --version`: the package version, the commit and the build date (build.rs).
const VERSION: &str =
    concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("KUNGFU_COMMIT"), ", built ", env!("KUNGFU_BUILD_DATE"), ")");

#[derive(Debug, Parser)]
#[command(name = "kungfu", version = VERSION, about, after_long_help = crate::error::EXIT_TABLE, after_help = crate::error::EXIT_TABLE)]
pub struct Cli {
    /// A node's public API address, `host:port`; repeat for several nodes. Default: the profile's
    /// endpoints, else 127.0.0.1:7400.
    #[arg(long = "endpoint", global = true, env = "KUNGFU_ENDPOINTS", value_delimiter = ',')]
    pub endpoints: Vec<String>,
    /// The agent's bearer key (for `cluster` commands: the operator token). Default: the profile's
    /// agent key (for `cluster` commands: the operator token file the profile names, which
    /// `kungfu dev up` records in the profile `dev`).
    #[arg(long, global = true, env = "KUNGFU_KEY", hide_env_values = true)]
    pub key: Option<String>,
    /// The profile to read defaults from (and that `register` writes).
    #[arg(long, global = true, default_value = "default", env = "KUNGFU_PROFILE")]
    pub profile: String,
    /// Print results as JSON on stdout (and errors as JSON on stderr) for scripts.
    #[arg(long, global = true)]
    pub json: bool,
    /// The idempotency key of a write; a new one is generated when absent. Every write prints the
    /// key it used: repeat a write whose outcome is unknown with the same key.
    #[arg(long, global = true)]
    pub idempotency_key: Option<String>,
    /// The deadline of each call attempt, in seconds.
    #[arg(long, global = true, default_value_t = 10)]
    pub timeout_secs: u64,
    /// How many times a call is retried after a failed attempt (same idempotency key).
    #[arg(long, global = true, default_value_t = 12)]
    pub retries: u32,
    /// How long connecting to a node may take before the attempt fails, in seconds (fractions
    /// allowed). An address where nothing listens fails at once, after a few quick retries.
    #[arg(long, global = true, value_name = "SECS", default_value = "2", value_parser = seconds)]
    pub connect_timeout: Duration,
    #[command(subcommand)]
    pub command: Command,
}

/// Content written by a participant: inline text, or a file (`-` for stdin).
#[derive(Debug, Args, Clone)]
pub struct Content {
    /// The content as text.
    #[arg(long, conflicts_with = "file")]
    pub text: Option<String>,
    /// Read the content from this file; `-` reads stdin.
    #[arg(long)]
    pub file: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Register a new agent and save its key in the profile (file mode 0600).
    Register {
        /// Do not write the profile file; only print the key.
        #[arg(long)]
        no_save: bool,
    },
    /// Your open obligations: what you owe, across threads and Tasks.
    Turn,
    /// Assignments and restricted Tasks you could take now.
    Opportunities,
    /// The working set of one object: `ag_`, `mem_`, `th_` or `task_` id.
    Ws {
        /// The object id.
        object: String,
    },
    /// Memories: create, update, publish, unpublish, withdraw, show.
    #[command(subcommand)]
    Memory(MemoryCmd),
    /// Threads: create, grants, membership, posts and reads.
    #[command(subcommand)]
    Thread(ThreadCmd),
    /// Assignments: create (a post with an assignment), take, deliver, judge, show.
    #[command(subcommand)]
    Assignment(AssignmentCmd),
    /// Tasks: create from a contract file, revise, pause, resume, take, deliver, judge, show.
    #[command(subcommand)]
    Task(TaskCmd),
    /// Operator calls (`--key` is the operator token).
    #[command(subcommand)]
    Cluster(ClusterCmd),
    /// Follow a thread's entries or your turn as they change (until interrupted).
    #[command(subcommand)]
    Watch(WatchCmd),
    /// Act for an agent while nobody is at the keyboard: `agent serve` runs a command whenever
    /// the agent's turn holds work (docs/wake.md).
    #[command(subcommand)]
    Agent(AgentCmd),
    /// A local cluster for trying Kungfu: `dev up` starts it in the background, `dev down` stops it.
    #[command(subcommand)]
    Dev(DevCmd),
    /// Post a labeled message to a thread (COORDINATION §3.3): to nobody (a broadcast), to named
    /// members (`--to`), or to every member who may speak (`--all`). Inline text is labeled
    /// tainted, fleet-scoped unless `--taint`/`--scope` say otherwise: readable by the thread's
    /// members, never trusted by anyone for being there.
    Send(SendArgs),
    /// Read a thread as a mailbox: its entries after a cursor, with labels, a preview of the
    /// content and your own response to each (COORDINATION §3.5). Reading leaves no trace.
    Mailbox {
        /// The thread (`th_…`).
        thread: String,
        /// Entries after this sequence number (0: from the first); the cursor is yours to keep.
        #[arg(long, default_value_t = 0)]
        after: u64,
        /// Only the entries that ask you to respond.
        #[arg(long)]
        asked_me: bool,
        /// Keep waiting for new entries and print each as it arrives (until interrupted).
        #[arg(long)]
        follow: bool,
        /// Entries per read (0: the server's default).
        #[arg(long, default_value_t = 0)]
        page_size: u32,
    },
    /// Scatter work over members of a thread as one atomic action (COORDINATION §4.3): a header
    /// entry and, per `--goal`, a reply with an assignment to that member. Ranks follow ascending
    /// agent id. Inline text is labeled tainted, fleet-scoped unless `--taint`/`--scope` say
    /// otherwise.
    Scatter(ScatterArgs),
    /// Gather a scattered collective in rank order, with every delivered output (COORDINATION
    /// §4.5); `--reduce` folds the outputs, refused unless every rank delivered.
    Gather {
        /// The thread (`th_…`).
        thread: String,
        /// The header entry of the collective (its sequence number).
        header: u64,
        /// Fold the outputs in rank order: first, concat, vote, best_of or all_reduce.
        #[arg(long)]
        reduce: Option<String>,
    },
    /// Post a barrier to every member who may speak (or `--to` a subgroup), each then owing a
    /// response; `--wait` waits until it is released (COORDINATION §4.7). `barrier status` reads one.
    Barrier(BarrierArgs),
    /// Shared records (COORDINATION §5): a record many members of a thread co-edit by patch.
    /// Appends with new ids merge on a stale base; a replace on a stale base is refused STALE_BASE
    /// and the conflict is printed as base / current / proposed.
    #[command(subcommand)]
    Record(RecordCmd),
    /// Run a scripted session of four agents against a running node and tell what happens;
    /// `demo coord` runs the coordination scenario (scatter, gather, barrier, a refusal).
    Demo {
        #[command(subcommand)]
        scenario: Option<DemoCmd>,
    },
    /// Serve MCP over stdin/stdout as the profile's agent, for LLM hosts that launch stdio servers
    /// (Claude Desktop, Codex): every tool call goes to the profile's endpoints with its agent key.
    /// Stdout carries only the protocol. Nodes also serve MCP over HTTP at `/mcp` (docs/mcp.md).
    Mcp {
        /// Print the tools as a Markdown table (the list in docs/mcp.md) and exit.
        #[arg(long)]
        list_tools: bool,
        /// The opt-in toolsets to serve besides the default set (register, turn, threads,
        /// assignments, Tasks, Memories), comma-separated: `coord`, `records`, or `all`.
        #[arg(long, value_name = "SETS", default_value = "")]
        toolsets: String,
    },
    /// Print a completion script for a shell on stdout: `kungfu completions bash > ~/.local/share/bash-completion/completions/kungfu`
    /// (zsh: a file `_kungfu` in a directory of `$fpath`; fish: `~/.config/fish/completions/kungfu.fish`).
    Completions {
        /// The shell: bash, zsh or fish.
        #[arg(value_enum)]
        shell: CompletionShell,
    },
    /// End-to-end benchmarks (`deadlines`, `write`, `compare`, `instructions`) against a fresh
    /// local cluster of `kungfud` processes: runs the benchmark harness `kungfu-bench` (`$KUNGFU_BENCH`,
    /// else next to `kungfu`, else on PATH) with the arguments that follow; `kungfu bench --help`
    /// lists them. The harness is a program of its own, so `kungfu` carries no etcd client.
    /// Use release builds: `cargo build --release --bin kungfu-bench --bin kungfud`.
    #[command(disable_help_flag = true)]
    Bench {
        /// The benchmark and its flags, as `kungfu-bench` takes them.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0.., value_name = "ARGS")]
        args: Vec<std::ffi::OsString>,
    },
}

/// `kungfu agent …`.
#[derive(Debug, Subcommand)]
pub enum AgentCmd {
    /// A standby runner: holds the agent's turn watch (reopened from its cursor after a node
    /// failure or a leader change) and, whenever the turn holds an obligation no run was started
    /// for, runs COMMAND (no shell) with the turn as JSON on stdin and KUNGFU_TURN_CURSOR,
    /// KUNGFU_ENDPOINTS, KUNGFU_PROFILE, KUNGFU_AGENT and KUNGFU_RUN in its environment. One run at
    /// a time; what arrives during a run is one next run. A run that exits non-zero is retried
    /// after a backoff that doubles up to --max-retry-backoff. One line per run on stderr.
    /// SIGINT or SIGTERM: the run in progress gets SIGTERM, then SIGKILL after --grace; then exit 0.
    /// Example: `kungfu agent serve --profile alice -- claude -p "Resume your Kungfu turn"`.
    Serve(ServeArgs),
    /// Wake webhooks: where the agent's turn changes are POSTed, signed in the Standard Webhooks
    /// form (docs/wake.md).
    #[command(subcommand)]
    Wake(WakeCmd),
}

/// `kungfu agent wake …`.
#[derive(Debug, Subcommand)]
pub enum WakeCmd {
    /// Add a webhook. Prints its signing secret (`whsec_…`) once: keep it to verify deliveries.
    Set {
        /// Where deliveries are POSTed (https unless the operator allows http).
        url: String,
        /// Only changes among obligations of this kind: response, delivery or judgment (repeatable).
        #[arg(long = "kind", value_name = "KIND")]
        kinds: Vec<String>,
        /// Only changes among obligations on this object: `th_…` or `task_…` (repeatable).
        #[arg(long = "object", value_name = "ID")]
        objects: Vec<String>,
    },
    /// The agent's webhooks: queued and acknowledged deliveries, and any give-up with its error.
    List,
    /// Remove a webhook (`wt_…`).
    Remove { target: String },
}

#[derive(Debug, Args, Clone)]
pub struct ServeArgs {
    /// The wait before retrying after a run that failed, in seconds; it doubles with each failure
    /// in a row.
    #[arg(long, value_name = "SECS", default_value = "1", value_parser = seconds)]
    pub retry_backoff: Duration,
    /// The longest wait before retrying after failed runs, in seconds.
    #[arg(long, value_name = "SECS", default_value = "300", value_parser = seconds)]
    pub max_retry_backoff: Duration,
    /// On SIGINT or SIGTERM, how long the run in progress may take to stop after SIGTERM before it
    /// is killed, in seconds.
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = seconds)]
    pub grace: Duration,
    /// The program and its arguments, after `--`; run directly, without a shell.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "COMMAND")]
    pub command: Vec<std::ffi::OsString>,
}

/// The shells `kungfu completions` writes a script for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

/// Writes the completion script of `shell` for the whole grammar (every subcommand and flag), as
/// `clap_complete` generates it from [`Cli`].
pub fn completions(shell: CompletionShell, out: &mut dyn std::io::Write) {
    use clap::CommandFactory;
    let shell = match shell {
        CompletionShell::Bash => clap_complete::Shell::Bash,
        CompletionShell::Zsh => clap_complete::Shell::Zsh,
        CompletionShell::Fish => clap_complete::Shell::Fish,
    };
    clap_complete::generate(shell, &mut Cli::command(), "kungfu", out);
}

/// The scenarios of `kungfu demo` besides the default one.
#[derive(Debug, Subcommand, Clone, Copy, PartialEq, Eq)]
pub enum DemoCmd {
    /// A lead and three workers: scatter, take and deliver, gather and combine, a barrier, and a
    /// refusal by the labels floor, told step by step.
    Coord,
}

/// Labels for new inline content on the coordination path (COORDINATION §2.1). Default: tainted,
/// fleet-scoped, the least a thread entry needs.
#[derive(Debug, Args, Clone, Default)]
pub struct LabelArgs {
    /// The taint of the new content: trusted, tainted or quarantined (default tainted). Trusted is
    /// your own assertion and grants nothing; quarantined content never leaves your own Memory.
    #[arg(long)]
    pub taint: Option<String>,
    /// The scope of the new content: agent, fleet, tenant or public (default fleet). A thread
    /// entry needs at least fleet.
    #[arg(long)]
    pub scope: Option<String>,
}

#[derive(Debug, Args, Clone)]
pub struct SendArgs {
    /// The thread (`th_…`): the mailbox, topic or group.
    pub thread: String,
    /// The message: text, or `@path` to read a file (`@-` reads stdin; `@@…` is text that starts
    /// with `@`). Omit it with `--pin`.
    #[arg(required_unless_present = "pin")]
    pub body: Option<String>,
    /// Ask exactly these members to respond: `ag_1,ag_2`.
    #[arg(long, value_delimiter = ',', conflicts_with = "all")]
    pub to: Vec<String>,
    /// Ask every member who may speak except you (a barrier).
    #[arg(long)]
    pub all: bool,
    /// Reply to this entry of the same thread.
    #[arg(long)]
    pub reply_to: Option<u64>,
    /// Only if the replied-to entry is still its author's newest in the thread, else STALE_BASE
    /// (a bounded correction, COORDINATION §3.6).
    #[arg(long, requires = "reply_to")]
    pub latest: bool,
    #[command(flatten)]
    pub labels: LabelArgs,
    /// Send an existing labeled version instead of new text: `mem_5:2` (or `mem_5@2`). Its own
    /// labels apply; an unlabeled version is refused (TRUST_VIOLATION).
    #[arg(long, conflicts_with_all = ["body", "taint", "scope"])]
    pub pin: Option<String>,
}

#[derive(Debug, Args, Clone)]
pub struct ScatterArgs {
    /// The thread whose members are the group (`th_…`).
    pub thread: String,
    /// The header entry's text (or `@path`).
    #[arg(long)]
    pub header: String,
    /// One rank's goal, `ag_1=text` (or `ag_1=@path`); repeat once per member.
    #[arg(long = "goal", required = true)]
    pub goals: Vec<String>,
    /// The acceptance criteria of every rank's assignment (default: the header's text).
    #[arg(long)]
    pub criteria: Option<String>,
    /// Every assignment's delivery window from taking, such as `90s`, `30m`, `1h30m`, `2d`
    /// (default: the server's).
    #[arg(long)]
    pub delivery_window: Option<String>,
    /// Every assignment's judgment window from delivery (default: the server's).
    #[arg(long)]
    pub judgment_window: Option<String>,
    #[command(flatten)]
    pub labels: LabelArgs,
}

/// `kungfu barrier <thread>` posts one; `kungfu barrier status <thread> <entry>` reads one.
#[derive(Debug, Args, Clone)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct BarrierArgs {
    #[command(subcommand)]
    pub status: Option<BarrierCmd>,
    /// The thread (`th_…`).
    #[arg(required = true)]
    pub thread: Option<String>,
    /// Ask only these members (`ag_1,ag_2`) instead of every member who may speak.
    #[arg(long, value_delimiter = ',')]
    pub to: Vec<String>,
    /// After posting, wait this long for the barrier to be released, such as `30s` or `5m`.
    #[arg(long)]
    pub wait: Option<String>,
    /// The barrier entry's text (labeled tainted, fleet-scoped).
    #[arg(long, default_value = "Barrier: reply to this entry when you reach it.")]
    pub text: String,
}

#[derive(Debug, Subcommand, Clone)]
pub enum BarrierCmd {
    /// Where a barrier stands: released, broken or waiting, and every rank's arrival.
    Status {
        /// The thread (`th_…`).
        thread: String,
        /// The barrier's entry (its sequence number).
        entry: u64,
    },
}

/// Where the local cluster of `kungfu dev` keeps its files.
#[derive(Debug, Args, Clone)]
pub struct DevDir {
    /// The directory for configs, data, logs and pid files.
    #[arg(long, default_value = DEFAULT_DIR)]
    pub dir: String,
}

#[derive(Debug, Subcommand)]
pub enum DevCmd {
    /// Start a local cluster of `kungfud` processes in the background and save the profile `dev`.
    Up {
        #[command(flatten)]
        dir: DevDir,
        /// How many nodes to start.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=9))]
        nodes: u16,
        /// The API port of node 1; node N listens on BASE+N-1, its raft service on BASE+100+N-1 and
        /// its HTTP listener (MCP at `/mcp`) on BASE+200+N-1.
        #[arg(long, default_value_t = 7411)]
        base_port: u16,
        /// The `kungfud` binary; default: $KUNGFUD, else next to `kungfu`, else on PATH.
        #[arg(long)]
        kungfud: Option<String>,
        /// How long to wait for a leader, in seconds.
        #[arg(long, default_value_t = 60)]
        wait_secs: u64,
    },
    /// Stop the local cluster: SIGTERM, then SIGKILL after a bounded wait.
    Down {
        #[command(flatten)]
        dir: DevDir,
        /// Also delete the data, configs and logs.
        #[arg(long)]
        purge: bool,
    },
    /// Show which nodes of the local cluster are running.
    Status {
        #[command(flatten)]
        dir: DevDir,
    },
    /// Restart one node of the local cluster, stopped or running, with its config and data: a
    /// running node is stopped first (SIGTERM, then SIGKILL after a bounded wait).
    Restart {
        #[command(flatten)]
        dir: DevDir,
        /// The node's number, from 1 to the number of nodes `dev up` started.
        node: u16,
        /// The `kungfud` binary; default: the one `dev up` started, else $KUNGFUD, else next to
        /// `kungfu`, else on PATH.
        #[arg(long)]
        kungfud: Option<String>,
        /// How long to wait for the node to serve and know the leader, in seconds.
        #[arg(long, default_value_t = 60)]
        wait_secs: u64,
    },
}

#[derive(Debug, Subcommand)]
pub enum MemoryCmd {
    /// Create a private Memory with its first version.
    Create(#[command(flatten)] Content),
    /// Add a version to a Memory.
    Update {
        memory: String,
        #[command(flatten)]
        content: Content,
    },
    /// Make a Memory public.
    Publish { memory: String },
    /// Make a Memory private again.
    Unpublish { memory: String },
    /// Withdraw a Memory (terminal).
    Withdraw { memory: String },
    /// Show a version of a Memory (the current one by default) with its content.
    Show {
        memory: String,
        #[arg(long)]
        version: Option<u32>,
    },
    /// Write labeled content (COORDINATION §2.5): a new private Memory, or with `--memory` a new
    /// version of one of yours. Labels belong to the version and never change.
    Write {
        /// The content: text, or `@path` to read a file (`@-` reads stdin; `@@…` is text that
        /// starts with `@`).
        body: String,
        /// trusted, tainted or quarantined.
        #[arg(long)]
        taint: String,
        /// agent, fleet, tenant or public.
        #[arg(long)]
        scope: String,
        /// Add the version to this Memory of yours (`mem_5`) instead of creating one.
        #[arg(long)]
        memory: Option<String>,
    },
    /// Widen the scope of one of your versions (COORDINATION §2.5): a new version with the same
    /// bytes and taint and the wider scope becomes current; the old version keeps its labels.
    Widen {
        /// Your Memory (`mem_5`).
        memory: String,
        /// The version to widen.
        version: u32,
        /// The new, wider scope: fleet, tenant or public.
        #[arg(long)]
        scope: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ThreadCmd {
    /// Create a thread; `--grant ROLE` issues its first admission grant and prints the secret.
    Create {
        /// The subject, as content (may be empty).
        #[command(flatten)]
        subject: Content,
        /// Issue a grant binding this role: observer, speaker or governor.
        #[arg(long)]
        grant: Option<String>,
    },
    /// Issue a new grant to a thread (a governor); prints its secret once.
    Grant {
        thread: String,
        /// The role the grant binds: observer, speaker (default) or governor.
        #[arg(long, default_value = "speaker")]
        role: String,
    },
    /// Void the thread's live grant (a governor).
    VoidGrant { thread: String },
    /// Join a thread with a grant secret.
    Join { secret: String },
    /// Leave a thread.
    Leave { thread: String },
    /// Remove a member (a governor).
    Remove { thread: String, member: String },
    /// Change a member's role (a governor): observer, speaker or governor.
    Role { thread: String, member: String, role: String },
    /// Post an entry: content, or `--pin mem_5@2`.
    Post {
        thread: String,
        #[command(flatten)]
        content: Content,
        /// Post a pinned version of an existing Memory instead of new content: `mem_5@2`.
        #[arg(long, conflicts_with_all = ["text", "file"])]
        pin: Option<String>,
        /// Reply to this entry of the same thread.
        #[arg(long)]
        reply_to: Option<u64>,
        /// Ask exactly these agents to respond: `ag_1,ag_2`.
        #[arg(long, value_delimiter = ',', conflicts_with = "ask_nobody")]
        ask: Vec<String>,
        /// Ask nobody to respond.
        #[arg(long)]
        ask_nobody: bool,
        /// Reference a Task.
        #[arg(long)]
        task_ref: Option<String>,
    },
    /// Handle an entry without replying, ending your owed response.
    Handle {
        thread: String,
        entry: u64,
        /// An optional note.
        #[arg(long)]
        note: Option<String>,
    },
    /// Retract your own entry.
    Retract { thread: String, entry: u64 },
    /// Close a thread (a governor).
    Close { thread: String },
    /// The thread's entries, oldest first.
    Timeline { thread: String },
    /// One entry with its content.
    Entry { thread: String, entry: u64 },
}

#[derive(Debug, Subcommand)]
pub enum AssignmentCmd {
    /// Post an entry to a thread that creates an assignment to `--to`.
    Create {
        thread: String,
        /// The addressee (`ag_2`).
        #[arg(long)]
        to: String,
        /// The acceptance criteria as text.
        #[arg(long, conflicts_with = "criteria_file")]
        criteria: Option<String>,
        /// Read the criteria from this file; `-` reads stdin.
        #[arg(long)]
        criteria_file: Option<String>,
        /// The entry's content (default: the criteria).
        #[command(flatten)]
        content: Content,
        /// The delivery window in seconds (default: the server's).
        #[arg(long)]
        delivery_window_secs: Option<u64>,
        /// The judgment window in seconds (default: the server's).
        #[arg(long)]
        judgment_window_secs: Option<u64>,
        /// Reply to this entry of the same thread.
        #[arg(long)]
        reply_to: Option<u64>,
        /// Ask exactly these agents to respond: `ag_1,ag_2`.
        #[arg(long, value_delimiter = ',', conflicts_with = "ask_nobody")]
        ask: Vec<String>,
        /// Ask nobody to respond to the entry.
        #[arg(long)]
        ask_nobody: bool,
    },
    /// Take an assignment addressed to you.
    Take { assignment: String },
    /// Deliver a taken assignment.
    Deliver {
        assignment: String,
        #[command(flatten)]
        output: Content,
    },
    /// Adopt a delivered assignment (its creator).
    Adopt { assignment: String },
    /// Reject a delivered assignment (its creator).
    Reject {
        assignment: String,
        #[arg(long)]
        reason: String,
    },
    /// Drop an assignment you took.
    Drop { assignment: String },
    /// Void an assignment (its creator).
    Void { assignment: String },
    /// Show an assignment and its state.
    Show { assignment: String },
}

#[derive(Debug, Subcommand)]
pub enum TaskCmd {
    /// Create a Task from a contract file (TOML, or JSON when it ends in `.json` or starts with `{`).
    Create {
        /// The contract file; `-` reads stdin.
        #[arg(long)]
        contract: String,
        /// Restrict the Task to these agents (`ag_1,ag_2`); default: the file's `audience`, else open.
        #[arg(long, value_delimiter = ',')]
        audience: Vec<String>,
    },
    /// Add a contract version (its author).
    Revise {
        task: String,
        #[arg(long)]
        contract: String,
    },
    /// Pause a Task: no new engagements.
    Pause { task: String },
    /// Resume a paused Task.
    Resume { task: String },
    /// Take a Task: a new engagement.
    Take { task: String },
    /// Deliver on your engagement of a Task.
    Deliver {
        task: String,
        #[command(flatten)]
        output: Content,
        /// Take the Task in the same action.
        #[arg(long)]
        take: bool,
    },
    /// Drop your engagement.
    Drop { engagement: String },
    /// Adopt a delivered engagement (the judge).
    Adopt { engagement: String },
    /// Reject a delivered engagement (the judge).
    Reject {
        engagement: String,
        #[arg(long)]
        reason: String,
    },
    /// Show a Task and a version of its contract.
    Show {
        task: String,
        #[arg(long)]
        version: Option<u32>,
    },
    /// Show one engagement and its state.
    Engagement { engagement: String },
}

/// Watch streams. They end with Ctrl-C; reopening with `--after` (threads) or `--cursor` (turn)
/// continues with no gap and no duplicate.
#[derive(Debug, Subcommand)]
pub enum WatchCmd {
    /// Print a thread's entries after a sequence number: the backlog, then new ones as they arrive.
    Thread {
        /// The thread id (`th_…`).
        thread: String,
        /// Print entries after this sequence number (0: from the start).
        #[arg(long, default_value_t = 0)]
        after: u64,
    },
    /// Print the changes of your turn: what was added or changed, what ended. The stream is
    /// reopened from the last cursor when a node fails or the leader changes.
    Turn {
        /// Resume from a cursor printed earlier (empty: the whole turn first).
        #[arg(long, default_value = "")]
        cursor: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ClusterCmd {
    /// One node's view of the cluster, as a table of the nodes.
    Status,
    /// Add a learner and wait until it has caught up (leader only).
    AddLearner {
        node_id: u64,
        /// The learner's raft address, `host:port`.
        #[arg(long)]
        raft: String,
        /// The learner's public API address, `host:port`.
        #[arg(long)]
        api: String,
    },
    /// Set the voters (leader only): `kungfu cluster change-membership 1 2 3`.
    ChangeMembership {
        #[arg(required = true)]
        voters: Vec<u64>,
        /// Keep learners that are not made voters.
        #[arg(long)]
        retain_learners: bool,
    },
    /// Hand leadership to another voter.
    TransferLeader { to: u64 },
    /// Build a snapshot on the leader now.
    Snapshot,
    /// Write a backup of the answering node's state into a new directory on its machine.
    Backup {
        #[arg(long)]
        to: String,
    },
    /// Restore a backup into a new data directory on this machine (runs `kungfud restore`); start
    /// `kungfud` on it afterwards: it comes up as a one-node cluster serving the backed-up state.
    Restore {
        /// The backup directory written by `cluster backup`.
        #[arg(long)]
        from: String,
        /// The config file of the node to restore (its `data_dir` must be new or empty).
        #[arg(long)]
        config: String,
        /// The `kungfud` binary (default: `$KUNGFUD`, next to `kungfu`, or on `PATH`).
        #[arg(long)]
        kungfud: Option<String>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shell_gets_a_script_naming_the_subcommands() {
        for shell in [CompletionShell::Bash, CompletionShell::Zsh, CompletionShell::Fish] {
            let mut out = Vec::new();
            completions(shell, &mut out);
            let script = String::from_utf8(out).expect("UTF-8");
            for word in ["kungfu", "register", "mailbox", "completions", "restart", "endpoint"] {
                assert!(script.contains(word), "{shell:?}: no `{word}` in the script");
            }
        }
    }
}

/// `kungfu record`: the shared record's writes and reads (COORDINATION §5).
#[derive(Debug, Subcommand)]
pub enum RecordCmd {
    /// Create a record in a thread, announced by an entry. Inline text (the body, the message) is
    /// labeled tainted, fleet-scoped unless `--taint`/`--content-scope` say otherwise.
    Create(RecordCreateArgs),
    /// Patch a record against the rev you read (`--base-rev`): ops apply in order, all or none.
    /// Notes, artifacts and decisions with new ids merge onto a newer rev; a title, state, body or
    /// decision-state change on a stale base is refused with the conflict.
    Patch(RecordPatchArgs),
    /// Show a record at a rev (default: now), for an audience (default: fleet, everything).
    Show {
        /// The record (`rec_…`).
        record: String,
        /// The rev to show.
        #[arg(long)]
        rev: Option<u32>,
        /// Whom the view is for: fleet, tenant or public. Narrower items are redacted.
        #[arg(long)]
        audience: Option<String>,
    },
    /// List a record's accepted writes after a rev.
    Events {
        /// The record (`rec_…`).
        record: String,
        /// Writes after this rev (0: from the creation).
        #[arg(long, default_value_t = 0)]
        after: u32,
        /// Whom the list is for: fleet, tenant or public. Narrower writes show their rev only.
        #[arg(long)]
        audience: Option<String>,
    },
    /// Print a record's writes after a rev: the backlog, then each new one as it is applied (until
    /// interrupted, or until the thread is closed).
    Watch {
        /// The record (`rec_…`).
        record: String,
        /// Writes after this rev (0: from the creation); resume with the last rev printed.
        #[arg(long, default_value_t = 0)]
        after: u32,
        /// Whom the stream is for: fleet, tenant or public.
        #[arg(long)]
        audience: Option<String>,
    },
    /// Print a record's body, or a note's or an artifact's, with its content while readable.
    Body {
        /// The record (`rec_…`).
        record: String,
        /// A note's body instead of the record's.
        #[arg(long, conflicts_with = "artifact")]
        note: Option<String>,
        /// An artifact instead of the record's body.
        #[arg(long)]
        artifact: Option<String>,
        /// The rev to read at.
        #[arg(long)]
        rev: Option<u32>,
    },
}

/// Labels of new inline text in a record's writes. The scope must be within the record's.
#[derive(Debug, Args, Clone, Default)]
pub struct RecordLabelArgs {
    /// The taint of new inline text: trusted, tainted or quarantined (default tainted).
    #[arg(long)]
    pub taint: Option<String>,
    /// The scope of new inline text: fleet, tenant or public (default fleet; at most the record's).
    #[arg(long)]
    pub content_scope: Option<String>,
}

#[derive(Debug, Args, Clone)]
pub struct RecordCreateArgs {
    /// The thread (`th_…`).
    pub thread: String,
    /// The title.
    #[arg(long)]
    pub title: String,
    /// The state (`open`, `working`, …).
    #[arg(long, default_value = "open")]
    pub state: String,
    /// The body: text, or `@path` (`@-` reads stdin).
    #[arg(long, required_unless_present = "body_pin")]
    pub body: Option<String>,
    /// The body as an existing labeled version: `mem_5@2`.
    #[arg(long, conflicts_with = "body")]
    pub body_pin: Option<String>,
    /// The widest audience the record may reach: fleet, tenant or public (default fleet).
    #[arg(long, default_value = "fleet")]
    pub scope: String,
    /// Only governors may patch it.
    #[arg(long)]
    pub governors_only: bool,
    /// The announcing entry's text (default: `record: <title>`).
    #[arg(long)]
    pub message: Option<String>,
    /// Members the announcing entry asks to respond: `ag_1,ag_2`.
    #[arg(long, value_delimiter = ',')]
    pub ask: Vec<String>,
    #[command(flatten)]
    pub labels: RecordLabelArgs,
}

#[derive(Debug, Args, Clone)]
pub struct RecordPatchArgs {
    /// The record (`rec_…`).
    pub record: String,
    /// The rev you read (`kungfu record show` prints it).
    #[arg(long)]
    pub base_rev: u32,
    /// Replace the title.
    #[arg(long)]
    pub title: Option<String>,
    /// Replace the state.
    #[arg(long)]
    pub state: Option<String>,
    /// Replace the body with text, or `@path`.
    #[arg(long, conflicts_with = "body_pin")]
    pub body: Option<String>,
    /// Replace the body with an existing labeled version: `mem_5@2`.
    #[arg(long)]
    pub body_pin: Option<String>,
    /// Append a comment note: `ID=text` (or `ID=@path`); repeat for more.
    #[arg(long = "note")]
    pub notes: Vec<String>,
    /// Append a progress note: `ID=text`; repeat for more.
    #[arg(long = "progress")]
    pub progress: Vec<String>,
    /// Append an artifact that pins a labeled version: `ID=mem_5@2`; repeat for more.
    #[arg(long = "artifact")]
    pub artifacts: Vec<String>,
    /// The media type of the appended artifacts.
    #[arg(long, default_value = "application/octet-stream")]
    pub media_type: String,
    /// Append an open decision: `ID=STATE:REASON`; repeat for more.
    #[arg(long = "decision")]
    pub decisions: Vec<String>,
    /// Set an existing decision's state: `ID=STATE`; repeat for more.
    #[arg(long = "decide")]
    pub decide: Vec<String>,
    /// The patch entry's text (default: `patch <record>: <paths>`).
    #[arg(long)]
    pub message: Option<String>,
    /// Members the patch entry asks to respond: `ag_1,ag_2`.
    #[arg(long, value_delimiter = ',')]
    pub ask: Vec<String>,
    #[command(flatten)]
    pub labels: RecordLabelArgs,
}
