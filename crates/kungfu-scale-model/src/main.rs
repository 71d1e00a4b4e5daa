//! `kungfu-scale-model`: prints the scale-out model's report (see `docs/scaling.md`).
//!
//! Usage: `kungfu-scale-model [--seed N] [--actions N]`; with no flags, the documented run.

use kungfu_scale_model::{Config, report, run};
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut config = Config::documented();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next();
        let parsed = value.as_deref().map(str::parse::<u64>);
        match (flag.as_str(), parsed) {
            ("--seed", Some(Ok(v))) => config.seed = v,
            ("--actions", Some(Ok(v))) if v > 0 && v <= u64::from(u32::MAX) => config.actions = v as u32,
            _ => {
                eprintln!("usage: kungfu-scale-model [--seed N] [--actions N]  (bad or missing value for {flag})");
                return ExitCode::from(2);
            }
        }
    }
    print!("{}", report::render(&run(&config)));
    ExitCode::SUCCESS
}
