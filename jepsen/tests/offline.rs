//! Re-checking saved histories offline: fixtures on disk through `check_workload`, and the
//! report's JSON form.

use std::path::PathBuf;

use kungfu_jepsen::checker::{CheckOptions, Report, Validity, Workload, check_workload};
use kungfu_jepsen::history::History;

fn fixture(name: &str) -> History {
    let path = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    History::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn a_valid_admission_run_with_a_partition_and_a_timeout_rechecks_valid() {
    let h = fixture("admission-valid.jsonl");
    let report = check_workload(Workload::Admission, &h, &CheckOptions::default());
    assert_eq!(report.valid, Validity::Valid, "{}", report.summary());
    assert_eq!(report.verdicts.len(), 2, "the workload's checker plus no_success");
    assert!(report.summary().contains("admission: "));
    assert!(report.summary().contains("no_success: "));
}

#[test]
fn an_over_admitting_run_rechecks_invalid_with_witnesses() {
    let h = fixture("admission-over-limit.jsonl");
    let report = check_workload(Workload::Admission, &h, &CheckOptions::default());
    assert_eq!(report.valid, Validity::Invalid);
    let admission = &report.verdicts[0];
    assert_eq!(admission.anomalies_of("over_limit"), 1);
    assert_eq!(admission.anomalies_of("lost"), 1);
    let over = admission.anomalies_named("over_limit").next().expect("one");
    assert_eq!(over.ops, vec![2, 4, 5, 6]);
}

#[test]
fn a_lost_write_after_kill_all_rechecks_invalid() {
    let h = fixture("facts-lost.jsonl");
    let report = check_workload(Workload::Facts, &h, &CheckOptions::default());
    assert_eq!(report.valid, Validity::Invalid);
    assert_eq!(report.verdicts[0].anomalies_of("lost"), 1);
    assert_eq!(h.nemesis_ops().count(), 2);
}

#[test]
fn reports_serialize_with_jepsen_validity() {
    let h = fixture("admission-over-limit.jsonl");
    let report = check_workload(Workload::Admission, &h, &CheckOptions::default());
    let json = serde_json::to_value(&report).expect("serializes");
    assert_eq!(json["valid"], serde_json::json!(false));
    assert_eq!(json["verdicts"][1]["valid"], serde_json::json!(true));
    let back: Report = serde_json::from_value(json).expect("deserializes");
    assert_eq!(back, report);
    assert_eq!(serde_json::to_string(&Validity::Unknown).expect("ser"), "\"unknown\"");
    assert_eq!(serde_json::from_str::<Validity>("true").expect("de"), Validity::Valid);
    assert!(serde_json::from_str::<Validity>("\"maybe\"").is_err());
}

#[test]
fn validity_combines_invalid_over_unknown_over_valid() {
    use Validity::*;
    assert_eq!(Valid.and(Valid), Valid);
    assert_eq!(Valid.and(Unknown), Unknown);
    assert_eq!(Unknown.and(Invalid), Invalid);
    assert_eq!(Invalid.and(Valid), Invalid);
}

#[test]
fn workloads_parse_by_name() {
    for w in Workload::ALL {
        assert_eq!(w.name().parse::<Workload>(), Ok(w));
    }
    let err = "bank".parse::<Workload>().expect_err("no such workload");
    assert!(err.contains("admission") && err.contains("turn"), "the refusal lists the workloads: {err}");
}
