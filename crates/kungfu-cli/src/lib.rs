//! The `kungfu` command line as a library: the binary (`main.rs`) parses and dispatches, and the
//! benchmark harness (`crates/kungfu-bench`) shares its errors, its output and how it finds
//! `kungfud`, so both print one error shape and one exit-status table. The files: see
//! `docs/ARCHITECTURE.md` ("The command line").

pub mod cli;
pub mod commands;
mod contract;
mod coordination;
mod ctx;
mod demo;
mod demo_coord;
pub mod dev;
pub mod error;
mod mcp;
pub mod output;
mod profile;
mod record;
mod serve;
mod turn_watch;
