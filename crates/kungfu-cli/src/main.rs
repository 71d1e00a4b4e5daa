//! `kungfu`: the command line of Kungfu, for agents and operators. Every call goes through the SDK
//! (`kungfu-client`), which finds the leader, times out and retries safely under one idempotency
//! key. See `kungfu --help` for the commands and the exit-status table.

use clap::Parser;
use kungfu_cli::{cli, commands, error};

fn main() {
    let cli = cli::Cli::parse();
    // A completion script needs neither a runtime nor a node.
    if let cli::Command::Completions { shell } = cli.command {
        cli::completions(shell, &mut std::io::stdout());
        return;
    }
    let json = cli.json;
    // `kungfu bench …` becomes the benchmark harness, which needs no runtime of ours.
    if let cli::Command::Bench { args } = cli.command {
        let e = commands::exec_bench(args, json);
        e.print(json);
        std::process::exit(e.exit);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            error::CliError::other(format!("cannot start the async runtime: {e}")).print(json);
            std::process::exit(error::EXIT_OTHER);
        }
    };
    if let Err(e) = runtime.block_on(commands::run(cli)) {
        e.print(json);
        std::process::exit(e.exit);
    }
}
