//! `kungfu-jepsen`: the chaos harness, in Jepsen's model: real `kungfud` clusters under faults,
//! histories of what clients saw, and checkers (`jepsen/README.md` tells how to run it).
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
//! Invariant: a checker reads only the history, so a saved `history.jsonl` re-checks offline to the
//! same verdict; the harness reaches nodes only through the public and operator APIs and the
//! processes.
//!
//! Table of contents (the files, and what each holds):
//! - [`history`]: operations (invoke, then ok, fail or info), JSON lines, pairing, real-time order.
//! - [`checker`]: pure functions from a history to a verdict: `wgl` (linearizability search),
//!   `admission`, `deadlines`, `replay`, `facts`, `seq`, `turn` (recomputes turns with `kungfu-core`
//!   from exported facts), `scatter`, `messages`, `record` (the `record-append` workload: shared-record
//!   appends and replaces, checked in phases), `wake` (webhook deliveries of turn changes: signed,
//!   at least once, in order, the last change of every turn delivered), `no_success`; `common` for
//!   what they share (outcome counts, the final-read option).
//! - [`cluster`], [`proxy`]: `kungfud` processes in per-run network namespaces (a claimed slot), or on
//!   loopback behind a per-link TCP proxy (`raft.dial`); libfaketime, libfiu and loop filesystems
//!   when a nemesis needs them; status, digests, cleanup.
//! - [`nemesis`]: partitions (iptables or proxy), kill, pause, clock skew, ENOSPC, fsync failure, and
//!   disk damage on a stopped node (`truncate-log` and `flip-byte` on the raft log's live
//!   write-ahead log, `flip-table` on a table file or manifest of either store, the damaged node then
//!   repaired by wipe and rejoin, and `amnesia`, the sequence in which a node that lost acknowledged
//!   entries could form a majority with one that never had them); a seeded schedule; heal.
//! - [`workload`]: what the clients do, one module per checker: setup, one-attempt operations, final
//!   reads per node (`big-entries` is `facts` with 250 KiB entries, judged by the facts checker and
//!   convergence after heal; `wake` runs a webhook receiver on the harness's address with seeded
//!   outages and gives the nodes its `[wake]` settings); `common` for what they share (setup
//!   helpers, readable content, how a final read is recorded).
//! - [`recorder`], [`client`]: the live history (streamed to disk) and the ok/fail/info table.
//! - [`run`], [`suite`], and `main.rs`: one test end to end (always-on checks: crash lines, digest
//!   convergence), the `ci` and `nightly` profiles, and the CLI (`test`, `check`, `suite`, `soak`,
//!   `cleanup`).
//! - [`soak`]: `kungfu-jepsen soak`, an hour of steady load judged for drift: keyed posts (each
//!   resent until definite) for a calm phase and then a phase of kills, a row every 10 s
//!   (throughput, p50 and p99, each node's RSS and data directory by part) in `soak.csv`, and a
//!   verdict over the calm phase (throughput and p99 drift, RSS growth, disk per acknowledged write,
//!   convergence, clean logs).

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
