//! Golden bytes of what the raft layer persists, read back raw from the stores after the code wrote
//! them: log entries (`raft_log`), the vote and the committed and purged marks (`raft_meta`), the
//! state machine's metadata (`sm_meta`: last applied, membership, limits, last command time) and
//! the snapshot meta file. Each is the storage envelope (a version byte, then the canonical bincode
//! of `kungfu_core::codec`), around openraft's serde shapes where the value is openraft's (log ids,
//! votes, memberships, snapshot meta) — so an openraft upgrade that changes them fails here too.
//!
//! The bytes are in this file, next to the values they encode, for the reason given in
//! `kungfu-core/tests/golden.rs` (which pins the commands, records and keys inside): a change
//! shows value and bytes in one diff hunk. Every case is also decoded back from its golden bytes.
//! Update a case only together with a new envelope version that still reads the old bytes.

use futures::stream;
use kungfu_core::{Action, Command, Limits, Principal};
use kungfu_raft::log::RaftLog;
use kungfu_raft::state_machine::{LAST_APPLIED, LAST_TS, LIMITS, MEMBERSHIP, StateMachine};
use kungfu_raft::types::{Entry, LogId, Node, Payload, Request, SnapshotMeta, StoredMembership, TypeConfig, Vote};
use kungfu_storage::{DataDir, Identity, OpenMode, Stores, envelope};
use kungfu_types::{Fingerprint, GroupId, IdempotencyKey, Micros, SecretHash, Timestamp};
use openraft::storage::{EntryResponder, IOFlushed, RaftLogReader, RaftLogStorage, RaftStateMachine};
use openraft::{EntryPayload, Membership, RaftSnapshotBuilder};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::sync::Arc;
use tempfile::TempDir;

// Fixed inputs. --------------------------------------------------------------------------------

const TS: Timestamp = Timestamp(1_700_000_000_000_000);

fn log_id(term: u64, node: u64, index: u64) -> LogId {
    let leader =
        <openraft::alias::LeaderIdOf<TypeConfig> as openraft::vote::RaftLeaderIdExt>::new_committed(term, node);
    LogId::new(leader, index)
}

fn node(n: u64) -> Node {
    Node { raft: format!("10.0.0.{n}:7001"), api: format!("10.0.0.{n}:7000") }
}

/// Voters 1, 2, 3 and a learner 4.
fn membership() -> Membership<u64, Node> {
    let nodes: BTreeMap<u64, Node> = (1..=4).map(|n| (n, node(n))).collect();
    Membership::new(vec![BTreeSet::from([1, 2, 3])], nodes).expect("a valid membership")
}

/// Every field stated, none defaulted: a new field does not compile until it is pinned here, and a
/// change of the defaults does not move the golden bytes.
fn limits() -> Limits {
    Limits {
        max_content_bytes: 262_144,
        max_subject_bytes: 1024,
        max_note_bytes: 1000,
        max_reason_bytes: 4000,
        max_members_per_thread: 256,
        max_ask: 50,
        max_open_threads_per_agent: 1000,
        max_open_assignments_per_thread: 1000,
        max_memories_per_agent: 100_000,
        max_versions_per_memory: 10_000,
        max_tasks_per_agent: 10_000,
        max_audience: 100,
        max_contract_inputs: 16,
        max_excluded_agents: 100,
        max_open_engagements_per_task: 1000,
        max_adoptions_cap: 100_000,
        max_page_size: 100,
        default_page_size: 50,
        history_digest_len: 50,
        default_delivery_window: Micros(86_400_000_000),
        default_judgment_window: Micros(86_400_000_000),
        min_window: Micros(1_000_000),
        max_window: Micros(7_776_000_000_000),
    }
}

/// The same command as `Action::RegisterAgent` in `kungfu-core/tests/golden.rs`: its bytes are the
/// tail of the command entry below.
fn command() -> Command {
    Command::new(
        Principal::Registrar,
        Action::RegisterAgent { key_hash: SecretHash([0xab; 32]), key_fingerprint: Fingerprint("fp-a".into()) },
        Some(IdempotencyKey::new("reg-1").expect("a valid key")),
        TS,
    )
}

/// One entry of every payload kind, at indexes 1..=5 of term 1, led by node 1.
fn entries() -> Vec<Entry> {
    vec![
        Entry { log_id: log_id(1, 1, 1), payload: EntryPayload::Blank },
        Entry { log_id: log_id(1, 1, 2), payload: EntryPayload::Membership(membership()) },
        Entry {
            log_id: log_id(1, 1, 3),
            payload: EntryPayload::Normal(Payload::group_zero(Request::SetLimits(limits()))),
        },
        Entry {
            log_id: log_id(1, 1, 4),
            payload: EntryPayload::Normal(Payload::group_zero(Request::Command(command()))),
        },
        Entry {
            log_id: log_id(1, 1, 5),
            payload: EntryPayload::Normal(Payload::group_zero(Request::Commands(vec![command(), command()]))),
        },
    ]
}

/// The golden bytes of each entry of [`entries`]. No wildcard arm over kinds: a new payload or
/// request kind does not compile until it has a golden entry here (and in [`entries`]). Entries of
/// group 0 are the bytes of before groups existed; another group's are pinned in
/// `a_log_entry_names_its_group_in_its_golden_bytes`.
fn entry_golden(entry: &Entry) -> (&'static str, &'static str) {
    match &entry.payload {
        EntryPayload::Normal(p @ Payload { group: GroupId(1..=u16::MAX), .. }) => {
            panic!("entries() holds group 0 only: {p}")
        }
        EntryPayload::Blank => ("blank", "0101010100"),
        EntryPayload::Membership(_) => (
            "membership",
            "\
            0101010202010301020304010d31302e302e302e313a373030310d31302e302e302e313a37303030020d31302e302e30\
            2e323a373030310d31302e302e302e323a37303030030d31302e302e302e333a373030310d31302e302e302e333a3730\
            3030040d31302e302e302e343a373030310d31302e302e302e343a37303030",
        ),
        EntryPayload::Normal(Payload { group: GroupId::ZERO, request: Request::SetLimits(_) }) => (
            "set_limits",
            "\
            010101030101fc00000400fb0004fbe803fba00ffb000132fbe803fbe803fca0860100fb1027fb1027641064fbe803fc\
            a0860100643232fd0060d71d14000000fd0060d71d14000000fc40420f00fd00c0b77d12070000",
        ),
        EntryPayload::Normal(Payload { group: GroupId::ZERO, request: Request::Command(_) }) => (
            "command",
            "\
            0101010401000100abababababababababababababababababababababababababababababababab0466702d61010572\
            65672d31eb142b0cae0baa72a767ebc0823d1be94e14c5bfc52d8e417fc4302fceb6240cfd00401e18240a0600",
        ),
        EntryPayload::Normal(Payload { group: GroupId::ZERO, request: Request::Commands(_) }) => (
            "commands",
            "\
            010101050102020100abababababababababababababababababababababababababababababababab0466702d610105\
            7265672d31eb142b0cae0baa72a767ebc0823d1be94e14c5bfc52d8e417fc4302fceb6240cfd00401e18240a06000100\
            abababababababababababababababababababababababababababababababab0466702d6101057265672d31eb142b0c\
            ae0baa72a767ebc0823d1be94e14c5bfc52d8e417fc4302fceb6240cfd00401e18240a0600",
        ),
    }
}

// The check. -----------------------------------------------------------------------------------

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if digits.len() % 2 != 0 {
        return Err("an odd number of hex digits".into());
    }
    let nibble = |d: u8| (d as char).to_digit(16).map(|v| v as u8).ok_or("not a hex digit");
    digits.chunks(2).map(|p| Ok((nibble(p[0])? << 4) | nibble(p[1])?)).collect()
}

/// Collects every mismatch of one test, reported together with the bytes the code writes now.
#[derive(Default)]
struct Goldens {
    failures: Vec<String>,
}

impl Goldens {
    /// `stored` (read back raw from a store) is exactly the golden bytes, and the golden bytes
    /// decode through the envelope to `value`.
    fn check<T: Serialize + DeserializeOwned + PartialEq + Debug>(
        &mut self,
        name: &str,
        value: &T,
        stored: &[u8],
        golden: &str,
    ) {
        match unhex(golden) {
            Ok(expected) => {
                if stored != expected.as_slice() {
                    self.failures.push(format!("GOLDEN {name} {}  (encoding changed)", hex(stored)));
                }
                match envelope::decode::<T>(&expected, name) {
                    Ok(decoded) if &decoded == value => {}
                    Ok(decoded) => self.failures.push(format!("{name}: the golden bytes decode to {decoded:?}")),
                    Err(e) => self.failures.push(format!("{name}: the golden bytes no longer decode: {e}")),
                }
            }
            Err(e) => self.failures.push(format!("GOLDEN {name} {}  ({e})", hex(stored))),
        }
        // What the code stored is what the one encoder writes for this value.
        if stored != envelope::encode(value).as_slice() {
            self.failures.push(format!("{name}: stored bytes are not envelope::encode of the value"));
        }
    }

    fn finish(self) {
        assert!(
            self.failures.is_empty(),
            "{} golden case(s) failed. A persisted encoding changed: bytes already written would be \
             misread. A changed format needs a new envelope version that still decodes the old one.\n{}",
            self.failures.len(),
            self.failures.join("\n")
        );
    }
}

fn open(dir: &TempDir) -> Stores {
    DataDir::new(dir.path())
        .open(&Identity { cluster_id: "golden".into(), node_id: 1 }, OpenMode::CreateIfEmpty, 2)
        .expect("a fresh data directory")
}

// The tests. -----------------------------------------------------------------------------------

#[tokio::test]
async fn log_entries_are_stored_as_their_golden_bytes() {
    let dir = TempDir::new().expect("tempdir");
    let stores = open(&dir);
    let mut log = RaftLog::new(stores.log.clone()).expect("log");
    let entries = entries();
    log.append(entries.clone(), IOFlushed::noop()).await.expect("append");

    let stored = stores.log.entries(0, u64::MAX).expect("raw entries");
    assert_eq!(stored.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![1, 2, 3, 4, 5], "keyed by log index");
    let mut g = Goldens::default();
    let mut kinds = BTreeSet::new();
    for (entry, (_, bytes)) in entries.iter().zip(&stored) {
        let (kind, golden) = entry_golden(entry);
        kinds.insert(kind);
        g.check(&format!("entry {kind}"), entry, bytes, golden);
    }
    g.finish();
    assert_eq!(kinds.len(), 5, "one entry of every payload kind");
    // And openraft reads them back through the log reader.
    let read = log.get_log_reader().await.try_get_log_entries(1..6).await.expect("read back");
    assert_eq!(read, entries);
}

#[tokio::test]
async fn vote_and_log_marks_are_stored_as_their_golden_bytes() {
    let dir = TempDir::new().expect("tempdir");
    let stores = open(&dir);
    let mut log = RaftLog::new(stores.log.clone()).expect("log");
    let mut g = Goldens::default();
    // The meta keys are part of the format too: they are read here by their literal names.
    let raw = |key: &str| stores.log.get_meta(key).expect("read raft_meta").expect("a stored value");

    let vote = Vote::new(2, 3);
    log.save_vote(&vote).await.expect("save vote");
    g.check("vote", &vote, &raw("vote"), "01020300");
    assert_eq!(log.read_vote().await.expect("read vote"), Some(vote));

    let vote = Vote::new_committed(2, 3);
    log.save_vote(&vote).await.expect("save vote");
    g.check("committed vote", &vote, &raw("vote"), "01020301");

    let committed = Some(log_id(2, 3, 40));
    log.save_committed(committed.clone()).await.expect("save committed");
    g.check("committed", &committed, &raw("committed"), "0101020328");
    assert_eq!(log.read_committed().await.expect("read committed"), committed);

    let purged = log_id(2, 3, 10);
    log.purge(purged.clone()).await.expect("purge");
    g.check("last_purged", &purged, &raw("last_purged"), "0102030a");
    g.finish();
}

#[tokio::test]
async fn state_machine_meta_and_snapshot_meta_are_stored_as_their_golden_bytes() {
    let dir = TempDir::new().expect("tempdir");
    let stores = open(&dir);
    let state = Arc::new(stores.state);
    let snapshots = stores.snapshots.clone();
    let mut sm = StateMachine::new(state.clone(), stores.snapshots, limits()).expect("state machine");
    // The first four entries: the batch of commands repeats the registration (its receipt
    // replayed) and would only move the last applied id.
    let batch =
        entries().into_iter().take(4).map(|e| -> Result<EntryResponder<TypeConfig>, std::io::Error> { Ok((e, None)) });
    sm.apply(stream::iter(batch)).await.expect("apply");

    let mut g = Goldens::default();
    let raw = |key: &str| state.get_meta(key).expect("read sm_meta").expect("a stored value");
    // The keys are the public constants; their names are pinned with the bytes.
    assert_eq!([LAST_APPLIED, MEMBERSHIP, LIMITS, LAST_TS], ["last_applied", "membership", "limits", "last_ts"]);
    let applied = log_id(1, 1, 4);
    g.check("last_applied", &applied, &raw(LAST_APPLIED), "01010104");
    let stored_membership = StoredMembership::new(Some(log_id(1, 1, 2)), membership());
    g.check(
        "membership",
        &stored_membership,
        &raw(MEMBERSHIP),
        "\
        0101010102010301020304010d31302e302e302e313a373030310d31302e302e302e313a37303030020d31302e302e30\
        2e323a373030310d31302e302e302e323a37303030030d31302e302e302e333a373030310d31302e302e302e333a3730\
        3030040d31302e302e302e343a373030310d31302e302e302e343a37303030",
    );
    g.check(
        "limits",
        &limits(),
        &raw(LIMITS),
        "\
        01fc00000400fb0004fbe803fba00ffb000132fbe803fbe803fca0860100fb1027fb1027641064fbe803fca086010064\
        3232fd0060d71d14000000fd0060d71d14000000fc40420f00fd00c0b77d12070000",
    );
    g.check("last_ts", &TS, &raw(LAST_TS), "01fd00401e18240a0600");

    let snapshot = sm.get_snapshot_builder().await.build_snapshot().await.expect("build snapshot");
    let meta = SnapshotMeta { last_log_id: Some(applied), last_membership: stored_membership };
    assert_eq!(snapshot.meta, meta);
    // Archive and meta are named by the last log index (zero-padded), its term and leader node.
    let name = "00000000000000000004-1-1";
    assert_eq!(snapshot.snapshot.name, name);
    let meta_file = snapshots.dir().join(format!("{name}.meta"));
    let stored = std::fs::read(&meta_file).expect("the snapshot meta file");
    g.check(
        "snapshot meta",
        &meta,
        &stored,
        "\
        010101010401010102010301020304010d31302e302e302e313a373030310d31302e302e302e313a37303030020d3130\
        2e302e302e323a373030310d31302e302e302e323a37303030030d31302e302e302e333a373030310d31302e302e302e\
        333a37303030040d31302e302e302e343a373030310d31302e302e302e343a3730303000",
    );
    g.finish();
    let current = sm.get_current_snapshot().await.expect("current snapshot").expect("a snapshot");
    assert_eq!(current.meta, meta);
}

/// State records are stored as the envelope around the core's bytes (pinned in
/// `kungfu-core/tests/golden.rs`), under the group (`SHARD`, u16 big-endian) then the core key.
#[test]
fn state_records_are_the_envelope_around_the_core_bytes() {
    assert_eq!(kungfu_storage::SHARD, GroupId::ZERO);
    assert_eq!(envelope::V1, 1);
    let record = kungfu_core::Record::Counters(kungfu_core::model::Counters {
        seq: 100,
        agents: 3,
        memories: 4,
        threads: 5,
        assignments: 6,
        tasks: 7,
        engagements: 8,
    });
    let mut g = Goldens::default();
    // The core's golden case `Record::Counters`, after the version byte.
    g.check("record", &record, &envelope::encode(&record), "010064030405060708");
    g.finish();
}

/// A value in a version this build does not know is refused, never guessed at: the node reports
/// the store corrupt (and openraft stops the node) rather than misread it.
#[test]
fn an_unknown_envelope_version_is_refused() {
    let mut bytes = envelope::encode(&TS);
    bytes[0] = envelope::V1 + 1;
    let err = envelope::decode::<Timestamp>(&bytes, "last_ts").expect_err("an unknown version");
    assert!(err.to_string().contains("unknown envelope version 2"), "{err}");
}

// Groups (issue #19, deliverable 3). ---------------------------------------------------------

/// A log entry's payload names its raft group. Group 0's entries are the bytes of before groups
/// (pinned above); another group's payload is the appended `Request` variant 3, `InGroup`: the
/// group (varint), then the bare request. The golden case is a group-5 command at index 6: its
/// tail after `03 05` is the group-0 command's payload.
#[tokio::test]
async fn a_log_entry_names_its_group_in_its_golden_bytes() {
    let dir = TempDir::new().expect("tempdir");
    let stores = open(&dir);
    let mut log = RaftLog::new(stores.log.clone()).expect("log");
    let entry = Entry {
        log_id: log_id(1, 1, 6),
        payload: EntryPayload::Normal(Payload { group: GroupId(5), request: Request::Command(command()) }),
    };
    log.append([entry.clone()], IOFlushed::noop()).await.expect("append");
    let stored = stores.log.entries(6, 7).expect("raw entries");
    let mut g = Goldens::default();
    g.check(
        "entry command in group 5",
        &entry,
        &stored[0].1,
        "\
        01010106010305000100abababababababababababababababababababababababababababababababab0466702d6101\
        057265672d31eb142b0cae0baa72a767ebc0823d1be94e14c5bfc52d8e417fc4302fceb6240cfd00401e18240a0600",
    );
    g.finish();

    // A payload of group 0 has one encoding, the bare request: `InGroup(0, ..)` is refused.
    let mut bytes = stored[0].1.clone();
    bytes[6] = 0;
    let err = envelope::decode::<Entry>(&bytes, "log entry").expect_err("InGroup naming group 0");
    assert!(err.to_string().contains("must be encoded as its bare request"), "{err}");
}

/// A replica applies only its own group's entries: an entry of another group in its log stops
/// the apply (a storage error, which stops the node's raft) and changes nothing.
#[tokio::test]
async fn the_state_machine_refuses_an_entry_of_another_group() {
    let dir = TempDir::new().expect("tempdir");
    let stores = open(&dir);
    let state = Arc::new(stores.state);
    let mut sm = StateMachine::new(state.clone(), stores.snapshots, limits()).expect("state machine");
    let entry = Entry {
        log_id: log_id(1, 1, 1),
        payload: EntryPayload::Normal(Payload { group: GroupId(5), request: Request::Command(command()) }),
    };
    let batch = [Ok::<EntryResponder<TypeConfig>, std::io::Error>((entry, None))];
    let err = sm.apply(stream::iter(batch)).await.expect_err("another group's entry");
    assert!(err.to_string().contains("is addressed to group 5; this replica applies group 0 only"), "{err}");
    assert_eq!(state.get_meta(LAST_APPLIED).expect("read sm_meta"), None, "nothing was applied");
}

/// The snapshot meta file names its group in a grouped envelope: group 0's is the plain V1 meta
/// (pinned in `state_machine_meta_and_snapshot_meta_are_stored_as_their_golden_bytes`, unchanged),
/// another group's is `02`, the group (u16, big-endian), then the same meta. Storage reads the
/// group without the meta, and installing another group's snapshot is refused, by the state
/// store and by the state machine.
#[tokio::test]
async fn a_snapshot_meta_names_its_group_and_another_groups_snapshot_is_refused() {
    let meta = SnapshotMeta {
        last_log_id: Some(log_id(1, 1, 4)),
        last_membership: StoredMembership::new(Some(log_id(1, 1, 2)), membership()),
    };
    let v1 = "\
        010101010401010102010301020304010d31302e302e302e313a373030310d31302e302e302e313a37303030020d3130\
        2e302e302e323a373030310d31302e302e302e323a37303030030d31302e302e302e333a373030310d31302e302e302e\
        333a37303030040d31302e302e302e343a373030310d31302e302e302e343a3730303000";
    let v2 = format!("020005{}", &v1.replace(char::is_whitespace, "")[2..]);
    assert_eq!(hex(&envelope::encode_grouped(GroupId::ZERO, &meta)), v1.replace(char::is_whitespace, ""));
    let grouped = envelope::encode_grouped(GroupId(5), &meta);
    assert_eq!(hex(&grouped), v2, "the group-5 snapshot meta");
    let decoded: (GroupId, SnapshotMeta) =
        envelope::decode_grouped(&unhex(&v2).expect("hex"), "meta").expect("decodes");
    assert_eq!(decoded, (GroupId(5), meta.clone()));

    // A snapshot of group 5, built from this node's state as if it were group 5's.
    let dir = TempDir::new().expect("tempdir");
    let stores = open(&dir);
    let state = Arc::new(stores.state);
    let archive = stores.snapshots.build(&state, "00000000000000000004-1-1", &grouped).expect("build");
    assert_eq!(archive.group, GroupId(5), "the archive's group is read from its meta");
    let err = stores.snapshots.install(&archive, &state).expect_err("the state store refuses it");
    assert!(err.to_string().contains("holds the state of group 5; this state store holds group 0"), "{err}");
    let mut sm = StateMachine::new(state.clone(), stores.snapshots.clone(), limits()).expect("state machine");
    let err = sm.install_snapshot(&meta, archive).await.expect_err("the state machine refuses it");
    assert!(err.to_string().contains("holds the state of group 5; this replica holds group 0"), "{err}");
    assert_eq!(state.get_meta(LAST_APPLIED).expect("read sm_meta"), None, "the state is untouched");
}

/// The raft RPCs name their group in a field appended to their messages (`raft.proto`,
/// `RaftMessage.group = 3`, `SnapshotChunk.group = 9`). Group 0 is proto3's default and is not
/// written: its messages are the bytes of before groups. Pinned: both messages in group 0 and 5.
#[test]
fn raft_messages_name_their_group_in_their_golden_bytes() {
    use kungfu_raft::pb;
    use prost::Message;
    let msg = |group| pb::RaftMessage { cluster_id: "golden".into(), payload: vec![1, 2], group };
    assert_eq!(hex(&msg(0).encode_to_vec()), "0a06676f6c64656e12020102");
    assert_eq!(hex(&msg(5).encode_to_vec()), "0a06676f6c64656e120201021805");
    let chunk = |group| pb::SnapshotChunk {
        cluster_id: "golden".into(),
        header: vec![1],
        name: "s".into(),
        total_len: 3,
        sha256: vec![9],
        offset: 0,
        data: vec![7, 7, 7],
        done: true,
        group,
    };
    assert_eq!(
        hex(&chunk(0).encode_to_vec()),
        "0a06676f6c64656e1201011a017320032a01093a03070707 4001".replace(' ', "")
    );
    assert_eq!(
        hex(&chunk(5).encode_to_vec()),
        "0a06676f6c64656e1201011a017320032a01093a030707074001 4805".replace(' ', "")
    );
    assert_eq!(
        pb::RaftMessage::decode(unhex("0a06676f6c64656e12020102").expect("hex").as_slice()).expect("decodes"),
        msg(0)
    );
}
