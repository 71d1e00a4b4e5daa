//! `kungfud`: runs one Kungfu node. With no arguments it is a single-node cluster with its data in
//! `./data`, serving the public API on 127.0.0.1:7400. See `docs/operations.md`.

use clap::Parser;
use kungfu_server::Config;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Runs one Kungfu node. Settings come from the config file, then the environment, then flags.
#[derive(Parser, Debug)]
#[command(name = "kungfud", version, about)]
struct Args {
    /// A TOML configuration file (see cluster-config/ for examples).
    #[arg(long, env = "KUNGFU_CONFIG")]
    config: Option<PathBuf>,
    #[arg(long, env = "KUNGFU_NODE_ID")]
    node_id: Option<u64>,
    #[arg(long, env = "KUNGFU_CLUSTER_ID")]
    cluster_id: Option<String>,
    #[arg(long, env = "KUNGFU_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Address of the public API.
    #[arg(long, env = "KUNGFU_API_LISTEN")]
    api_listen: Option<SocketAddr>,
    /// Address of the internal raft service.
    #[arg(long, env = "KUNGFU_RAFT_LISTEN")]
    raft_listen: Option<SocketAddr>,
    /// Token for operator calls.
    #[arg(long, env = "KUNGFU_OPERATOR_TOKEN", hide_env_values = true)]
    operator_token: Option<String>,
    /// Log filter (tracing `EnvFilter` syntax).
    #[arg(long, env = "KUNGFU_LOG", default_value = "info,openraft=warn")]
    log: String,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::new(&args.log)).with_target(false).init();
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
    if let Some(v) = args.operator_token {
        config.operator_token = Some(v);
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(kungfu_server::server::run(config, shutdown_signal()))
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
