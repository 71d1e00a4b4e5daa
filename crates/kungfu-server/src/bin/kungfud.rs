//! `kungfud`: runs one Kungfu node. With no arguments it is a single-node cluster with its data in
//! `./data`, serving the public API on 127.0.0.1:7400 and MCP at http://127.0.0.1:7600/mcp. See
//! `docs/operations.md` and `docs/mcp.md`.

use clap::Parser;
use kungfu_server::Config;
use kungfu_server::telemetry::Telemetry;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Issue #15: mimalloc instead of glibc's malloc, whose free lists cost a node about an eighth of its
/// CPU per post under load (docs/benchmarks.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Runs one Kungfu node. Settings come from the config file, then the environment, then flags.
/// `kungfud --version`: the package version, the commit and the build date (build.rs).
const VERSION: &str =
    concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("KUNGFU_COMMIT"), ", built ", env!("KUNGFU_BUILD_DATE"), ")");

#[derive(Parser, Debug)]
#[command(name = "kungfud", version = VERSION, about)]
struct Args {
    /// A TOML configuration file (see cluster-config/ for examples).
    #[arg(long, env = "KUNGFU_CONFIG", global = true)]
    config: Option<PathBuf>,
    #[arg(long, env = "KUNGFU_NODE_ID", global = true)]
    node_id: Option<u64>,
    #[arg(long, env = "KUNGFU_CLUSTER_ID", global = true)]
    cluster_id: Option<String>,
    #[arg(long, env = "KUNGFU_DATA_DIR", global = true)]
    data_dir: Option<PathBuf>,
    /// Address of the public API.
    #[arg(long, env = "KUNGFU_API_LISTEN", global = true)]
    api_listen: Option<SocketAddr>,
    /// Address of the internal raft service.
    #[arg(long, env = "KUNGFU_RAFT_LISTEN", global = true)]
    raft_listen: Option<SocketAddr>,
    /// Address of the HTTP listener that serves MCP at `/mcp`, or `off` for none.
    #[arg(long, env = "KUNGFU_HTTP_LISTEN", global = true, value_name = "ADDR|off")]
    http_listen: Option<String>,
    /// Token for operator calls.
    #[arg(long, env = "KUNGFU_OPERATOR_TOKEN", hide_env_values = true)]
    operator_token: Option<String>,
    /// Log filter (tracing `EnvFilter` syntax). The MCP door's protocol library (rmcp) logs every
    /// session at info: warnings only by default. openraft's own warnings repeat per heartbeat in
    /// its debug format: errors only by default; the raft network logs a failing peer itself, once
    /// per interval with a count.
    #[arg(long, env = "KUNGFU_LOG", default_value = "info,openraft=error,rmcp=warn", global = true)]
    log: String,
    /// Log lines as human text, or as one JSON object per line (for a log shipper).
    #[arg(long, env = "KUNGFU_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,
    /// Accept that this node's raft log lost entries it had acknowledged (a damaged disk, see
    /// docs/operations.md, "Damaged data directory"): its acknowledged mark is rewritten to the
    /// log's end and it votes and campaigns at once, instead of waiting for a leader to send it
    /// what it lost. Safe only while a majority of the voters still holds every acknowledged entry.
    #[arg(long, env = "KUNGFU_ACCEPT_DATA_LOSS")]
    accept_data_loss: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum LogFormat {
    Text,
    Json,
}

/// What to do instead of running the node.
#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Reads and checks a configuration file as `kungfud --config FILE` would, without starting a
    /// node: exits 0 and summarizes it when the node could start from it, else exits 2 naming the
    /// setting at fault.
    CheckConfig {
        /// The TOML configuration file.
        file: PathBuf,
    },
    /// Creates the node's data directory (which must be new or empty) from a backup written by
    /// `AdminService.Backup`, checked against its SHA-256, and exits. Give the same settings
    /// (`--config` or flags) the node will run with: the restored node is a one-node cluster at
    /// those addresses, serving the backed-up state. See docs/operations.md.
    Restore {
        /// The backup directory (the one holding `manifest.toml`).
        #[arg(long)]
        from: PathBuf,
    },
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    // The error itself, not a backtrace's last line (RUST_BACKTRACE set): `kungfu cluster restore`
    // shows the last line a failing `kungfud` wrote (issue #16).
    match run(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", chain(&e));
            std::process::ExitCode::from(if e.downcast_ref::<kungfu_server::config::ConfigError>().is_some() {
                2
            } else {
                1
            })
        }
    }
}

/// The error and its causes, `: `-separated like `{:#}`, but without a cause whose text the line
/// already holds (a wrapper that prints its source, `data directory: {0}`, would repeat it).
fn chain(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// Logs to standard output, as text or JSON; colours only on a terminal and never with
/// `NO_COLOR` set (no escape codes in a log file, issue #16). With telemetry on, its layer is
/// added beside the log lines, each with a filter of its own (the log filter stays `--log`).
fn init_logs(log: &str, format: LogFormat, telemetry: Option<&Telemetry>) {
    use std::io::IsTerminal;
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    type Boxed = Box<dyn Layer<tracing_subscriber::Registry> + Send + Sync>;
    let filter = tracing_subscriber::EnvFilter::new(log);
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let ansi = std::io::stdout().is_terminal() && !no_color;
    // Telemetry off: the log subscriber alone, with its filter global, exactly as before telemetry
    // existed, so every disabled callsite (openraft's many DEBUG and TRACE ones) stays disabled.
    let Some(telemetry) = telemetry else {
        let logs = tracing_subscriber::fmt().with_env_filter(filter).with_target(false);
        match format {
            LogFormat::Text => logs.with_ansi(ansi).init(),
            LogFormat::Json => logs.json().with_ansi(false).with_current_span(true).init(),
        }
        return;
    };
    let logs = tracing_subscriber::fmt::layer().with_target(false);
    let logs: Boxed = match format {
        LogFormat::Text => logs.with_ansi(ansi).with_filter(filter).boxed(),
        LogFormat::Json => logs.json().with_ansi(false).with_current_span(true).with_filter(filter).boxed(),
    };
    // Both layers have filters of their own: the registry enables a callsite when either does.
    let layers: Vec<Boxed> = vec![telemetry.layer().boxed(), logs];
    tracing_subscriber::registry().with(layers).init();
}

fn run(args: Args) -> anyhow::Result<()> {
    let (log, log_format) = (args.log.clone(), args.log_format);
    if let Some(Command::CheckConfig { file }) = &args.command {
        init_logs(&args.log, args.log_format, None);
        let config = Config::from_file(file)?;
        config.validate()?;
        println!(
            "ok: {} is a valid configuration of node {} of cluster {:?}: data in {}, API at {}, raft at {}, HTTP {}, {} initial voter(s){}",
            file.display(),
            config.node_id,
            config.cluster_id,
            config.data_dir.display(),
            config.api_advertise(),
            config.raft_advertise(),
            config
                .http_listen
                .map(|h| {
                    let console = if config.console.enabled { ", console /ui/" } else { "" };
                    format!("at {h} (MCP, /metrics, /healthz, /readyz{console})")
                })
                .unwrap_or_else(|| "off".into()),
            config.voters().len(),
            if config.operator_token.is_some() { ", operator calls enabled" } else { "" },
        );
        match &config.telemetry.otlp_endpoint {
            Some(e) => println!(
                "telemetry: spans to {e} over OTLP/gRPC as service {:?}, {} of new traces sampled",
                config.telemetry.service_name, config.telemetry.sample_ratio
            ),
            None => println!("telemetry: off (no [telemetry] otlp_endpoint)"),
        }
        return Ok(());
    }
    let mut config = match &args.config {
        Some(p) => Config::from_file(p)?,
        None => Config::default(),
    };
    if let Some(v) = args.node_id {
        config.node_id = v;
    }
    if let Some(v) = args.cluster_id {
        config.cluster_id = v;
    }
    if let Some(v) = args.data_dir {
        config.data_dir = v;
    }
    if let Some(v) = args.api_listen {
        config.api_listen = v;
    }
    if let Some(v) = args.raft_listen {
        config.raft_listen = v;
    }
    if let Some(v) = args.http_listen {
        config.http_listen = match v.as_str() {
            "off" | "none" | "" => None,
            addr => Some(addr.parse().map_err(|e| anyhow::anyhow!("configuration: http_listen: {addr:?}: {e}"))?),
        };
    }
    if let Some(v) = args.operator_token {
        config.operator_token = Some(v);
    }
    // Validated before the runtime is built, since one of the settings sizes it.
    config.validate()?;
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = config.worker_threads {
        rt.worker_threads(n);
    }
    let rt = rt.enable_all().build()?;
    config.accept_data_loss = args.accept_data_loss;
    if let Some(Command::Restore { from }) = &args.command {
        init_logs(&args.log, args.log_format, None);
        let restored = rt.block_on(kungfu_server::admin::restore_for(from, &config))?;
        let m = &restored.manifest;
        println!(
            "restored {} (cluster {}, node {}, entry {} of term {}, sha256 {}) into {} as node {} of cluster {}",
            from.display(),
            m.cluster_id,
            m.node_id,
            m.last_applied_index,
            m.last_applied_term,
            m.sha256,
            restored.data_dir.display(),
            config.node_id,
            config.cluster_id
        );
        return Ok(());
    }
    // The exporter's gRPC client runs on the node's runtime; a setting it cannot use stops the
    // start like any other.
    let telemetry = {
        let _in_runtime = rt.enter();
        Telemetry::start(&config.telemetry, config.node_id, &config.cluster_id)?
    };
    init_logs(&log, log_format, telemetry.as_ref());
    if let Some(endpoint) = config.telemetry.otlp_endpoint.as_deref().filter(|_| telemetry.is_some()) {
        tracing::info!(
            otlp = endpoint,
            "telemetry: exporting spans to {endpoint} over OTLP/gRPC as {:?} (sample ratio {})",
            config.telemetry.service_name,
            config.telemetry.sample_ratio
        );
    }
    let served = rt.block_on(kungfu_server::server::run(config, shutdown_signal()));
    // Flushed after the node stopped (SIGTERM included), while the runtime still runs the client.
    if let Some(t) = telemetry {
        t.shutdown();
    }
    served
}

/// Resolves on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}
