//! The command line of `kungfu-bench` (run as `kungfu bench …` too): the benchmarks and their
//! flags, as clap derive types.

use clap::{Args, Parser, Subcommand};

/// `kungfu-bench --version`: the package version, the commit and the build date (build.rs).
const VERSION: &str =
    concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("KUNGFU_COMMIT"), ", built ", env!("KUNGFU_BUILD_DATE"), ")");

/// End-to-end benchmarks of Kungfu through its public API, against a fresh local cluster of
/// `kungfud` processes that each run starts, and kills and removes at the end. Use release builds:
/// `cargo build --release --bin kungfu-bench --bin kungfud`.
#[derive(Debug, Parser)]
#[command(name = "kungfu-bench", version = VERSION, about, after_help = kungfu_cli::error::EXIT_TABLE)]
pub struct Bench {
    /// Print the figures as one JSON object on stdout (and errors as JSON on stderr) for scripts.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: BenchCmd,
}

/// Where a benchmark finds `kungfud` and keeps the files of the clusters it starts.
#[derive(Debug, Args, Clone)]
pub struct BenchFiles {
    /// The `kungfud` binary; default: $KUNGFUD, else next to `kungfu`, else on PATH. Use a release
    /// build.
    #[arg(long)]
    pub kungfud: Option<String>,
    /// The directory under which the run makes its own new directory for configs, data and logs
    /// (removed at the end); default: the system's temporary directory.
    #[arg(long)]
    pub data_dir: Option<String>,
    /// Keep the run's directory (configs, data, logs) instead of removing it; its path is printed.
    #[arg(long)]
    pub keep: bool,
}

/// The local cluster a benchmark starts for itself.
#[derive(Debug, Args, Clone)]
pub struct BenchCluster {
    /// How many `kungfud` nodes to start.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=9))]
    pub nodes: u16,
    #[command(flatten)]
    pub files: BenchFiles,
    /// The API port of node 1 (node N listens on BASE+N-1, its raft service on BASE+100+N-1);
    /// default: free ports chosen by the system.
    #[arg(long)]
    pub base_port: Option<u16>,
}

#[derive(Debug, Subcommand)]
pub enum BenchCmd {
    /// `--count` delivery deadlines that all fall due within one second and are never delivered:
    /// how late the server's deadline scheduler ends each one, measured from the recorded facts.
    Deadlines {
        #[command(flatten)]
        cluster: BenchCluster,
        /// How many obligations (taken assignments) fall due.
        #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        count: u64,
        /// Seconds from the start to T, the start of the second in which every deadline falls due.
        /// The time until 1.2 s before T is halved: creating every assignment, then taking them at
        /// a steady pace. Default: 4 s plus 1 s per 200 obligations.
        #[arg(long, value_parser = clap::value_parser!(u64).range(2..=3600))]
        window_secs: Option<u64>,
        /// Concurrent client tasks creating and taking the assignments.
        #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=4096))]
        concurrency: u64,
        /// SIGKILL the leader's process 0.5 s before T and restart it once every deadline has
        /// passed: the lateness across a leader's death.
        #[arg(long)]
        kill_leader: bool,
    },
    /// Writers posting entries as fast as the cluster answers, each to its own thread or all to
    /// one shared thread: operations per second and the latency of each write.
    Write {
        #[command(flatten)]
        cluster: BenchCluster,
        /// How many writers (agents), each with one write in flight at a time.
        #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=10_000))]
        writers: u64,
        /// How many client connections the writers share.
        #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=1024))]
        connections: u64,
        /// How long the writers write, in seconds.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
        seconds: u64,
        /// All writers post to one shared thread (at most 256 writers: the members limit) instead
        /// of each to its own.
        #[arg(long)]
        shared_thread: bool,
        /// The size of each entry's content, in bytes.
        #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=262_144))]
        entry_bytes: u64,
    },
    /// Kungfu beside etcd in one run: the same client shape (writers over shared connections,
    /// one call in flight each) against fresh clusters of each size, per workload and writer
    /// count; operations per second, latency, errors and the memory of every server process, with
    /// kungfu/etcd ratios. etcd runs when an `etcd` binary is found (`--etcd`, else PATH).
    Compare(BenchCompare),
    /// Wake webhooks (issue #35, docs/wake.md): writers asking `--agents` agents to respond, first
    /// with no wake target set, then with one per agent pointing at a receiver on loopback;
    /// posts per second without and with the targets, and the fact-to-delivery latency of every
    /// delivery of the second window.
    Wake {
        #[command(flatten)]
        cluster: BenchCluster,
        /// Agents asked (each gets a wake target for the second window).
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=100_000))]
        agents: u64,
        /// Writers, each with one post in flight, each post asking one agent.
        #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=100))]
        writers: u64,
        /// Client connections the writers share.
        #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=1024))]
        connections: u64,
        /// Seconds of each window (without, then with the targets).
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
        seconds: u64,
        /// The load: `asks` (every post asks one of the agents to respond: every write wakes
        /// someone) or `mixed` (`bench compare`'s agent cycle, one pair per writer: post an
        /// assignment, take, deliver, adopt, read the turn; every pair agent and the idle rest of
        /// `--agents` subscribed).
        #[arg(long, default_value = "asks", value_parser = ["asks", "mixed"])]
        workload: String,
    },
    /// A regression guard, not a timed test: the instructions (callgrind's `Ir`) one `kungfud`
    /// node executes for a fixed sequence of calls, one at a time: `--ops` posts to the writer's
    /// own thread, then `--ops` linearizable reads. Needs valgrind (Debian's `valgrind`).
    Instructions(BenchInstructions),
}

/// The arguments of `kungfu bench instructions`.
#[derive(Debug, Args, Clone)]
pub struct BenchInstructions {
    #[command(flatten)]
    pub files: BenchFiles,
    /// How many counted calls each phase makes (the posts, then the reads), after 10 uncounted ones.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub ops: u64,
    /// The size of each posted entry's content, in bytes.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=262_144))]
    pub payload_bytes: u64,
}

/// The arguments of `kungfu bench compare`.
#[derive(Debug, Args, Clone)]
pub struct BenchCompare {
    #[command(flatten)]
    pub files: BenchFiles,
    /// The cluster sizes, comma-separated: one Kungfu cluster (and one etcd cluster) of each.
    #[arg(long, default_value = "1,3")]
    pub nodes: String,
    /// The writer counts, comma-separated: one point per count, workload and cluster size.
    #[arg(long, default_value = "1,16,64,256")]
    pub writers: String,
    /// The workloads, comma-separated, of `own`, `shared`, `read`, `stale`, `mixed`.
    #[arg(long, default_value = "own,shared,read,stale,mixed")]
    pub workloads: String,
    /// How many client connections the writers of one system share.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub connections: u64,
    /// How long each point is measured, in seconds (after the warm-up).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub seconds: u64,
    /// Seconds of load before each point's measurement, not counted.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(0..=600))]
    pub warmup: u64,
    /// The size of each written value (an entry's content, an etcd value), in bytes.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=262_144))]
    pub payload_bytes: u64,
    /// The `etcd` binary; default: `etcd` on PATH (Debian's etcd-server). Without one, only
    /// Kungfu runs and the output says why.
    #[arg(long)]
    pub etcd: Option<String>,
    /// Require the named system beside Kungfu: `etcd` makes a missing etcd binary an error.
    #[arg(long, value_enum)]
    pub against: Option<BenchAgainst>,
    /// After every workload of a cluster size, run the `own` point at this many writers once more
    /// on the same clusters, which by then hold the whole run's state: whether the write rate
    /// holds as the state grows. 0 for none; needs the `own` workload.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub repeat: u64,
}

/// A system `kungfu bench compare` can be required to run beside Kungfu.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchAgainst {
    Etcd,
}
