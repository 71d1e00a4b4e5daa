//! `kungfu`: the command line of Kungfu, for agents and operators. Every call goes through the SDK
//! (`kungfu-client`), which finds the leader, times out and retries safely under one idempotency
//! key. See `kungfu --help` for the commands and the exit-status table.

mod bench;
mod cli;
mod commands;
mod contract;
mod coordination;
mod ctx;
mod demo;
mod demo_coord;
mod dev;
mod error;
mod mcp;
mod output;
mod profile;
mod record;

use clap::Parser;

fn main() {
    let cli = cli::Cli::parse();
    // A completion script needs neither a runtime nor a node.
    if let cli::Command::Completions { shell } = cli.command {
        cli::completions(shell, &mut std::io::stdout());
        return;
    }
    let json = cli.json;
    // A benchmark drives thousands of concurrent calls: it gets a worker thread per core, as a
    // user's multi-threaded client would. Every other command makes a few calls in sequence.
    let bench = matches!(cli.command, cli::Command::Bench(_));
    let runtime = if bench {
        tokio::runtime::Builder::new_multi_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    };
    let runtime = match runtime {
        Ok(r) => r,
        Err(e) => {
            error::CliError::other(format!("cannot start the async runtime: {e}")).print(json);
            std::process::exit(error::EXIT_OTHER);
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            cli::Command::Bench(cmd) => bench::run(cmd, json).await,
            _ => commands::run(cli).await,
        }
    });
    if let Err(e) = result {
        e.print(json);
        std::process::exit(e.exit);
    }
}
