//! `kungfu-jepsen`: the chaos harness of issue #7, in Jepsen's model.
//!
//! This crate holds the part that needs no cluster: the [`history`] of a run (operations that
//! are invoked, then complete `ok`, `fail` or `info`, written as JSON lines so a run re-checks
//! offline), and the [`checker`]s that judge a history against the protocol's rules (L3–L5,
//! §6.4, §7.3, §7.4 of `kungfu-protocol.md`).
//!
//! Typical use, e.g. by `kungfu-jepsen check history.jsonl --workload admission`:
//!
//! ```
//! use kungfu_jepsen::checker::{CheckOptions, Validity, Workload, check_workload};
//! use kungfu_jepsen::history::History;
//!
//! let jsonl = r#"
//! {"index":0,"time":0,"process":0,"type":"invoke","f":"add","value":{"id":"f1"}}
//! {"index":1,"time":5,"process":0,"type":"ok","f":"add","value":{"id":"f1"}}
//! {"index":2,"time":9,"process":1,"type":"invoke","f":"final-read","node":"n1"}
//! {"index":3,"time":12,"process":1,"type":"ok","f":"final-read","value":{"ids":["f1"]},"node":"n1"}
//! "#;
//! let history = History::from_jsonl_str(jsonl).expect("a well-formed history");
//! let report = check_workload(Workload::Facts, &history, &CheckOptions::default());
//! assert_eq!(report.valid, Validity::Valid, "{}", report.summary());
//! ```
//!
//! The rest runs tests against real clusters: [`cluster`] (kungfud processes in network
//! namespaces, or on loopback behind [`proxy`]), [`nemesis`] (partitions, kills, pauses, clock
//! skew, disk faults), [`workload`] (what the clients do; one module per checker), [`recorder`]
//! (the live history), [`run`] (one test), [`suite`] (the `ci` and `nightly` profiles) and
//! [`soak`] (an hour of steady load, judged for drift: issue #36).

pub mod checker;
pub mod client;
pub mod cluster;
pub mod history;
pub mod nemesis;
pub mod proxy;
pub mod recorder;
pub mod run;
pub mod soak;
pub mod suite;
pub mod workload;

pub use checker::{Anomaly, CheckOptions, Report, Validity, Verdict, Workload, check_workload};
pub use history::{History, HistoryBuilder, HistoryError, Op, OpType, Outcome, Pair, Process};
