//! `kungfu`: the command line of Kungfu, for agents and operators. Every call goes through the SDK
//! (`kungfu-client`), which finds the leader, times out and retries safely under one idempotency
//! key. See `kungfu --help` for the commands and the exit-status table.

mod cli;
mod commands;
mod contract;
mod demo;
mod dev;
mod error;
mod output;
mod profile;

use clap::Parser;

fn main() {
    let cli = cli::Cli::parse();
    let json = cli.json;
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
