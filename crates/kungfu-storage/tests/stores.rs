//! The RocksDB stores against their contracts: the log is durable and hole-free, the state store
//! behaves exactly like the in-memory state the core is tested on, snapshots round-trip, and a data
//! directory is never silently re-initialised.

use kungfu_core::testkit::World;
use kungfu_core::{Action, Command, Limits, MemState, Principal, StateExt, StateRead, Tx, apply, keys};
use kungfu_storage::{DataDir, Error, Identity, OpenMode, StateStore, Stores};
use kungfu_types::{Content, Micros, Role};
use std::path::Path;

fn identity() -> Identity {
    Identity { cluster_id: "c1".into(), node_id: 1 }
}

fn open(dir: &Path) -> Stores {
    DataDir::new(dir).open(&identity(), OpenMode::CreateIfEmpty, 2).expect("open data dir")
}

// --- log store --------------------------------------------------------------------------------

#[test]
fn appended_entries_survive_a_reopen_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let s = open(dir.path());
        s.log.append(&[(1, b"a".to_vec()), (2, b"b".to_vec()), (3, b"c".to_vec())]).expect("append");
        s.log.put_meta("vote", b"v1".to_vec()).expect("vote");
    }
    let s = open(dir.path());
    assert_eq!(s.log.entries(1, 10).expect("read"), vec![(1, b"a".to_vec()), (2, b"b".to_vec()), (3, b"c".to_vec())]);
    assert_eq!(s.log.entries(2, 3).expect("read"), vec![(2, b"b".to_vec())]);
    assert_eq!(s.log.last().expect("last"), Some((3, b"c".to_vec())));
    assert_eq!(s.log.get_meta("vote").expect("vote"), Some(b"v1".to_vec()));
}

#[test]
fn truncate_and_purge_leave_no_hole_and_keep_the_purge_mark() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = open(dir.path());
    let entries: Vec<(u64, Vec<u8>)> = (1..=10).map(|i| (i, vec![i as u8])).collect();
    s.log.append(&entries).expect("append");
    s.log.truncate_after(Some(7)).expect("truncate");
    assert_eq!(s.log.last().expect("last").map(|e| e.0), Some(7));
    s.log.purge_upto(3, "purged", b"3".to_vec()).expect("purge");
    let left: Vec<u64> = s.log.entries(0, u64::MAX).expect("read").into_iter().map(|e| e.0).collect();
    assert_eq!(left, vec![4, 5, 6, 7]);
    assert_eq!(s.log.get_meta("purged").expect("mark"), Some(b"3".to_vec()));
    s.log.truncate_after(None).expect("truncate all");
    assert_eq!(s.log.last().expect("last"), None);
}

// --- state store --------------------------------------------------------------------------------

/// Applies the same commands to the in-memory state and to RocksDB, committing each like the
/// state machine does, and returns both.
fn run_both(cmds: &[Command], store: &StateStore) -> MemState {
    let limits = Limits::default();
    let mut mem = MemState::new();
    for cmd in cmds {
        let a = apply(&mem, cmd, &limits).expect("mem apply");
        mem.commit(&a.changes);
        let live = store.live();
        let b = apply(&live, cmd, &limits).expect("rocks apply");
        assert_eq!(a.changes, b.changes, "RocksDB state diverged from the in-memory state at {:?}", cmd.action.kind());
        assert_eq!(a.receipt_bytes(), b.receipt_bytes());
        store.commit(&b.changes, &[("last_applied", Some(b"x".to_vec()))]).expect("commit");
    }
    mem
}

/// A realistic command sequence recorded from the core's test world.
fn scenario() -> Vec<Command> {
    let mut w = World::new();
    let mut cmds = Vec::new();
    let mut run = |w: &mut World, p: Principal, a: Action| {
        let key = w.fresh_key();
        w.advance(Micros::from_secs(1));
        let cmd = Command::new(p, a, Some(key), w.now);
        w.exec_cmd(&cmd);
        cmds.push(cmd);
    };
    let reg = |w: &mut World, n: u8| Action::RegisterAgent {
        key_hash: kungfu_core::secret::hash_secret(&format!("secret-{n}-{}", w.fresh_secret())),
        key_fingerprint: kungfu_core::secret::fingerprint("kf_xxxxxxxxxxxxxxxx"),
    };
    for n in 0..3 {
        let a = reg(&mut w, n);
        run(&mut w, Principal::Registrar, a);
    }
    let (a, b) = (kungfu_types::AgentId(1), kungfu_types::AgentId(2));
    run(&mut w, Principal::Agent(a), Action::CreateThread { subject: Content::from("s"), grant: None });
    let (grant, secret) = w.new_grant(Role::Speaker);
    let t = kungfu_types::ThreadId(1);
    run(&mut w, Principal::Agent(a), Action::IssueGrant { thread: t, grant });
    run(&mut w, Principal::Agent(b), Action::Join { grant_hash: kungfu_core::secret::hash_secret(&secret) });
    for i in 0..5 {
        run(
            &mut w,
            Principal::Agent(if i % 2 == 0 { a } else { b }),
            Action::Post {
                thread: t,
                body: kungfu_core::PostBody::Content(Content::from(format!("post {i}"))),
                reply_to: None,
                ask: None,
                task_ref: None,
                assignment: None,
            },
        );
    }
    cmds
}

#[test]
fn rocksdb_state_matches_the_in_memory_state_command_by_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = open(dir.path());
    let mem = run_both(&scenario(), &s.state);
    // Every record, index, journal entry and receipt is identical.
    for family in keys::Family::ALL {
        let prefix = [family as u8];
        let m = mem.scan_all(&prefix).expect("mem");
        let r = s.state.read(|v| v.scan_all(&prefix)).expect("rocks");
        assert_eq!(m, r, "family {} differs", family.name());
        assert!(!m.is_empty() || family == keys::Family::Receipts || family == keys::Family::Meta);
    }
}

/// The scenario's thread with an assignment taken (a delivery deadline 10 s out), then posts
/// before the deadline and one 30 s after it: the late post settles the deadline first (L4).
fn deadline_scenario() -> Vec<Command> {
    let mut w = World::new();
    let mut cmds = Vec::new();
    let mut run = |w: &mut World, p: Principal, a: Action, after: Micros| {
        let key = w.fresh_key();
        w.advance(after);
        let cmd = Command::new(p, a, Some(key), w.now);
        w.exec_cmd(&cmd);
        cmds.push(cmd);
    };
    let sec = Micros::from_secs(1);
    for n in 0..2 {
        let a = Action::RegisterAgent {
            key_hash: kungfu_core::secret::hash_secret(&format!("secret-{n}-{}", w.fresh_secret())),
            key_fingerprint: kungfu_core::secret::fingerprint("kf_xxxxxxxxxxxxxxxx"),
        };
        run(&mut w, Principal::Registrar, a, sec);
    }
    let (a, b) = (kungfu_types::AgentId(1), kungfu_types::AgentId(2));
    let t = kungfu_types::ThreadId(1);
    run(&mut w, Principal::Agent(a), Action::CreateThread { subject: Content::from("s"), grant: None }, sec);
    let (grant, secret) = w.new_grant(Role::Speaker);
    run(&mut w, Principal::Agent(a), Action::IssueGrant { thread: t, grant }, sec);
    run(&mut w, Principal::Agent(b), Action::Join { grant_hash: kungfu_core::secret::hash_secret(&secret) }, sec);
    let post = |assignment| Action::Post {
        thread: t,
        body: kungfu_core::PostBody::Content(Content::from("work")),
        reply_to: None,
        ask: None,
        task_ref: None,
        assignment,
    };
    let asg = kungfu_core::NewAssignment {
        addressee: b,
        criteria: Content::from("criteria"),
        output_structure: None,
        delivery_window: Some(Micros::from_secs(10)),
        judgment_window: None,
    };
    run(&mut w, Principal::Agent(a), post(Some(asg)), sec);
    let assignment = kungfu_types::AssignmentId(1);
    run(&mut w, Principal::Agent(b), Action::TakeAssignment { assignment }, sec);
    run(&mut w, Principal::Agent(a), post(None), sec);
    run(&mut w, Principal::Agent(a), post(None), Micros::from_secs(30));
    cmds
}

/// Issue #30: the store's due floor lets an action skip the scan of its object's due index when
/// nothing is due, and changes nothing it decides: the RocksDB state (which has the floor) and
/// the in-memory one (which scans every time) write the same bytes for every command, the late
/// post settles the deadline, and the floor follows the due index as it fills and empties.
#[test]
fn the_due_floor_skips_nothing_that_is_due() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = open(dir.path());
    let floor = |s: &Stores| s.state.read_latest(|v| v.due_floor());
    assert_eq!(floor(&s), kungfu_types::Timestamp(u64::MAX), "an empty due index bounds every time");
    let cmds = deadline_scenario();
    let limits = Limits::default();
    let mut mem = MemState::new();
    let mut step = |cmd: &Command| {
        let a = apply(&mem, cmd, &limits).expect("mem apply");
        mem.commit(&a.changes);
        let applier = s.state.applier();
        let b = apply(&applier, cmd, &limits).expect("rocks apply");
        assert_eq!(a.changes, b.changes, "the floor changed what {:?} writes", cmd.action.kind());
        assert_eq!(a.receipt_bytes(), b.receipt_bytes());
        s.state.commit(&b.changes, &[]).expect("commit");
        b
    };
    let (late, before) = cmds.split_last().expect("commands");
    for cmd in before {
        step(cmd);
    }
    let due = s.state.read_latest(|v| v.scan_all(&keys::due_all())).expect("due index");
    assert_eq!(due.len(), 1, "the taken assignment's delivery deadline: {due:?}");
    let due_at = keys::due_time_of(&due[0].0).expect("due time");
    assert_eq!(floor(&s), due_at, "the floor is the earliest due time");
    assert!(before.iter().all(|c| c.ts < due_at), "nothing was due before the late post");
    // A pending put lowers a transaction's floor; the store's stays until it is committed.
    let earlier = kungfu_types::Timestamp(due_at.0 - 1);
    let obligation = kungfu_core::model::ObligationId::AssignmentJudgment(kungfu_types::AssignmentId(9));
    let index = kungfu_core::Record::Ref(kungfu_core::state::IndexRef::Obligation(obligation));
    {
        let view = s.state.applier();
        let mut tx = Tx::new(&view);
        tx.put(keys::due(earlier, obligation), index.clone());
        assert_eq!(tx.due_floor(), earlier);
        drop(tx);
        assert_eq!(view.due_floor(), due_at);
    }
    // A read pinned to a snapshot keeps no floor (it bounds nothing).
    assert_eq!(s.state.read(|v| v.due_floor()), kungfu_types::Timestamp::ZERO);

    let applied = step(late);
    let passed = applied.facts.iter().filter(|f| matches!(f.fact, kungfu_core::Fact::DeadlinePassed { .. })).count();
    assert_eq!(passed, 1, "the late post settled the delivery deadline first (L4)");
    assert_eq!(floor(&s), kungfu_types::Timestamp(u64::MAX), "the ended deadline left the due index empty");

    // Reopened, the store reads its floor from the database.
    let empty = MemState::new();
    let mut tx = Tx::new(&empty);
    tx.put(
        keys::due(earlier, obligation),
        kungfu_core::Record::Ref(kungfu_core::state::IndexRef::Obligation(obligation)),
    );
    s.state.commit(&tx.into_changes(), &[]).expect("commit");
    assert_eq!(floor(&s), earlier);
    drop(s);
    let s = open(dir.path());
    assert_eq!(floor(&s), earlier, "the floor after a reopen");
}

#[test]
fn scans_agree_with_the_in_memory_state_in_both_directions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = open(dir.path());
    let mem = run_both(&scenario(), &s.state);
    let prefixes = [
        keys::journal_prefix(),
        keys::indexes_prefix(),
        keys::records_prefix(),
        keys::entries_of(kungfu_types::ThreadId(1)),
    ];
    for prefix in prefixes {
        let all = mem.scan_all(&prefix).expect("mem");
        for limit in [1usize, 2, 5, 1000] {
            for cursor in [None, all.get(1).map(|x| x.0.clone()), all.last().map(|x| x.0.clone())] {
                let m = mem.scan(&prefix, cursor.as_deref(), limit).expect("mem");
                let r = s.state.read(|v| v.scan(&prefix, cursor.as_deref(), limit)).expect("rocks");
                assert_eq!(m, r, "scan differs");
                let m = mem.scan_rev(&prefix, cursor.as_deref(), limit).expect("mem");
                let r = s.state.read(|v| v.scan_rev(&prefix, cursor.as_deref(), limit)).expect("rocks");
                assert_eq!(m, r, "reverse scan differs");
            }
        }
    }
}

#[test]
fn a_read_sees_one_state_even_while_a_commit_lands() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = open(dir.path());
    let cmds = scenario();
    run_both(&cmds[..3], &s.state);
    s.state.read(|view| {
        let before = view.agent(kungfu_types::AgentId(3)).expect("read");
        assert!(before.is_some());
        // A commit that lands during the read is not seen by it.
        let live = s.state.live();
        let mut tx = Tx::new(&live);
        tx.delete(keys::agent(kungfu_types::AgentId(3)));
        s.state.commit(&tx.into_changes(), &[]).expect("commit");
        assert_eq!(view.agent(kungfu_types::AgentId(3)).expect("read"), before);
    });
    assert!(s.state.read(|v| v.agent(kungfu_types::AgentId(3))).expect("read").is_none());
}

// --- the hot-record cache (issue #15) ------------------------------------------------------------

/// Applies every command through the applier's cached view and checks, after each commit, that
/// every record and counter the cached views answer is the in-memory state's.
#[test]
fn the_cached_views_answer_exactly_the_committed_state_command_by_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = open(dir.path());
    let limits = Limits::default();
    let mut mem = MemState::new();
    for cmd in scenario() {
        let a = apply(&mem, &cmd, &limits).expect("mem apply");
        mem.commit(&a.changes);
        let applier = s.state.applier();
        let b = apply(&applier, &cmd, &limits).expect("rocks apply");
        assert_eq!(a.changes, b.changes, "the cached state diverged at {:?}", cmd.action.kind());
        s.state.commit(&b.changes, &[]).expect("commit");
        // Every key the command changed, deleted ones included, reads as committed through both
        // cached views (a stale cached copy would show here).
        for key in a.changes.keys() {
            let want = mem.get(key).expect("mem");
            assert_eq!(s.state.applier().get(key).expect("applier"), want, "applier view of {key:?}");
            assert_eq!(s.state.read_latest(|v| v.get(key)).expect("latest"), want, "latest view of {key:?}");
        }
    }
    for family in [keys::Family::Meta, keys::Family::Records] {
        for (key, record) in mem.scan_all(&[family as u8]).expect("mem") {
            assert_eq!(s.state.applier().get(&key).expect("applier"), Some(record));
        }
    }
}

#[test]
fn a_pre_check_read_holds_commits_back_so_the_cache_never_runs_ahead_of_its_snapshot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = std::sync::Arc::new(open(dir.path()));
    run_both(&scenario()[..3], &s.state);
    let agent = keys::agent(kungfu_types::AgentId(3));
    let before = s.state.applier().get(&agent).expect("read").expect("agent 3 exists");
    // A changed copy of agent 3, committed while a read holds the latest state.
    let empty = MemState::new();
    let mut tx = Tx::new(&empty);
    tx.put(agent.clone(), kungfu_core::Record::Counters(Default::default()));
    let changes = tx.into_changes();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let committer = s.state.read_latest(|view| {
        assert_eq!(view.get(&agent).expect("read"), Some(before.clone()));
        let (st, changes, d) = (s.clone(), changes.clone(), done.clone());
        let committer = std::thread::spawn(move || {
            st.state.commit(&changes, &[]).expect("commit");
            d.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        // However long the read lasts, the commit waits for it, and the read (cache included)
        // keeps answering the state it started on.
        for _ in 0..20 {
            std::thread::sleep(std::time::Duration::from_millis(5));
            assert!(!done.load(std::sync::atomic::Ordering::SeqCst), "a commit landed during a latest-state read");
            assert_eq!(view.get(&agent).expect("read"), Some(before.clone()));
        }
        committer
    });
    committer.join().expect("committer");
    assert!(done.load(std::sync::atomic::Ordering::SeqCst));
    assert_eq!(s.state.applier().get(&agent).expect("read"), changes.get(&agent).cloned().flatten());
    assert_eq!(s.state.read_latest(|v| v.get(&agent)).expect("read"), changes.get(&agent).cloned().flatten());
}

#[test]
fn state_and_metadata_survive_a_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let digest = {
        let s = open(dir.path());
        run_both(&scenario(), &s.state);
        s.state.digest().expect("digest")
    };
    let s = open(dir.path());
    assert_eq!(s.state.digest().expect("digest"), digest);
    assert_eq!(s.state.get_meta("last_applied").expect("meta"), Some(b"x".to_vec()));
}

// --- snapshots --------------------------------------------------------------------------------

#[test]
fn a_snapshot_installed_on_another_node_gives_the_same_digest() {
    let a = tempfile::tempdir().expect("tempdir");
    let b = tempfile::tempdir().expect("tempdir");
    let sa = open(a.path());
    run_both(&scenario(), &sa.state);
    let archive = sa.snapshots.build(&sa.state, "00000000000000000012-1", b"\x01meta").expect("build");
    assert_eq!(
        sa.snapshots.latest().expect("latest").map(|(x, m)| (x.name, m)),
        Some((archive.name.clone(), b"\x01meta".to_vec()))
    );

    let sb = DataDir::new(b.path())
        .open(&Identity { cluster_id: "c1".into(), node_id: 2 }, OpenMode::CreateIfEmpty, 2)
        .expect("open b");
    // Packed as it is sent, in small chunks, as the network does; the digest comes at the end.
    let (path, file) = sb.snapshots.incoming(&archive.name).expect("incoming");
    let mut writes = 0;
    let packed = kungfu_storage::snapshot::pack(&archive.path, Chunked { inner: file, max: 4096, writes: &mut writes })
        .expect("pack");
    assert_eq!(std::fs::metadata(&path).expect("received").len(), packed.len);
    assert!(writes > 1, "the stream went out in chunks, not whole");
    // The same snapshot packs to the same bytes every time (a retried transfer is the same stream).
    let again = kungfu_storage::snapshot::pack(&archive.path, std::io::sink()).expect("pack again");
    assert_eq!(again, packed);
    let received = sb.snapshots.accept(&path, &archive.name, &packed.sha256, b"\x01meta").expect("accept");
    assert!(!path.exists(), "the packed stream is unpacked and removed");
    // Node b read (and cached) a state of its own before the install: none of it may survive.
    run_both(&scenario()[..3], &sb.state);
    let agent = keys::agent(kungfu_types::AgentId(3));
    assert!(sb.state.applier().get(&agent).expect("read").is_some());
    sb.snapshots.install(&received, &sb.state).expect("install");
    assert_eq!(sb.state.digest().expect("digest"), sa.state.digest().expect("digest"));
    for key in [agent, keys::counters(kungfu_types::GroupId::ZERO)] {
        let want = sa.state.read(|v| v.get(&key)).expect("a");
        assert_eq!(sb.state.applier().get(&key).expect("applier"), want, "a cached record outlived the install");
        assert_eq!(sb.state.read_latest(|v| v.get(&key)).expect("latest"), want);
    }
    assert_eq!(sb.state.get_meta("last_applied").expect("meta"), Some(b"x".to_vec()));
    // The installed state is what later opens see.
    drop(sb);
    let sb = DataDir::new(b.path())
        .open(&Identity { cluster_id: "c1".into(), node_id: 2 }, OpenMode::MustExist, 2)
        .expect("reopen");
    assert_eq!(sb.state.digest().expect("digest"), sa.state.digest().expect("digest"));
}

/// A writer that takes at most `max` bytes a call, as a transfer's chunks arrive.
struct Chunked<'a, W> {
    inner: W,
    max: usize,
    writes: &'a mut usize,
}

impl<W: std::io::Write> std::io::Write for Chunked<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        *self.writes += 1;
        self.inner.write(&buf[..buf.len().min(self.max)])
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[test]
fn a_corrupted_transfer_is_refused_and_the_state_is_untouched() {
    let a = tempfile::tempdir().expect("tempdir");
    let sa = open(a.path());
    run_both(&scenario(), &sa.state);
    let archive = sa.snapshots.build(&sa.state, "00000000000000000012-1", b"\x01meta").expect("build");
    let before = sa.state.digest().expect("digest");
    let mut bytes = Vec::new();
    let packed = kungfu_storage::snapshot::pack(&archive.path, &mut bytes).expect("pack");
    let (path, mut file) = sa.snapshots.incoming("00000000000000000013-1").expect("incoming");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::io::Write::write_all(&mut file, &bytes).expect("write");
    drop(file);
    let err =
        sa.snapshots.accept(&path, "00000000000000000013-1", &packed.sha256, b"\x01meta").expect_err("must refuse");
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    assert_eq!(sa.state.digest().expect("digest"), before);
    assert_eq!(sa.snapshots.list().expect("list"), vec![archive.name]);
}

#[test]
fn only_the_newest_snapshots_are_kept() {
    let a = tempfile::tempdir().expect("tempdir");
    let sa = open(a.path());
    for i in 1..=4 {
        sa.snapshots.build(&sa.state, &format!("{i:020}-1"), b"\x01m").expect("build");
    }
    assert_eq!(sa.snapshots.list().expect("list"), vec![format!("{:020}-1", 3), format!("{:020}-1", 4)]);
}

#[test]
fn an_interrupted_install_is_finished_at_the_next_open() {
    let a = tempfile::tempdir().expect("tempdir");
    let digest = {
        let sa = open(a.path());
        run_both(&scenario(), &sa.state);
        let d = sa.state.digest().expect("digest");
        // Simulate a crash after the live state moved aside and before the new one moved in.
        let staged = a.path().join("state.incoming");
        sa.state.checkpoint_to(&staged).expect("checkpoint");
        std::fs::write(staged.join("KUNGFU_COMPLETE"), b"complete").expect("marker");
        d
    };
    std::fs::rename(a.path().join("state"), a.path().join("state.old")).expect("move aside");
    let sa = DataDir::new(a.path()).open(&identity(), OpenMode::MustExist, 2).expect("reopen");
    assert_eq!(sa.state.digest().expect("digest"), digest);
    assert!(!a.path().join("state.old").exists() && !a.path().join("state.incoming").exists());
}

// --- data directory ---------------------------------------------------------------------------

#[test]
fn a_data_directory_of_another_cluster_or_node_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    drop(open(dir.path()));
    let other_cluster =
        DataDir::new(dir.path()).open(&Identity { cluster_id: "c2".into(), node_id: 1 }, OpenMode::CreateIfEmpty, 2);
    assert!(matches!(other_cluster, Err(Error::ClusterMismatch { .. })), "{other_cluster:?}");
    let other_node =
        DataDir::new(dir.path()).open(&Identity { cluster_id: "c1".into(), node_id: 9 }, OpenMode::CreateIfEmpty, 2);
    assert!(matches!(other_node, Err(Error::NodeMismatch { found: 1, expected: 9, .. })), "{other_node:?}");
}

#[test]
fn a_missing_store_of_an_existing_member_is_an_error_not_a_fresh_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    drop(open(dir.path()));
    std::fs::remove_dir_all(dir.path().join("state")).expect("remove state");
    let r = DataDir::new(dir.path()).open(&identity(), OpenMode::CreateIfEmpty, 2);
    assert!(matches!(r, Err(Error::Incomplete { .. })), "{r:?}");
    assert!(!dir.path().join("state").exists(), "nothing was re-created");
    let dir2 = tempfile::tempdir().expect("tempdir");
    drop(open(dir2.path()));
    std::fs::remove_dir_all(dir2.path().join("log")).expect("remove log");
    let r = DataDir::new(dir2.path()).open(&identity(), OpenMode::CreateIfEmpty, 2);
    assert!(matches!(r, Err(Error::Incomplete { .. })), "{r:?}");
}

#[test]
fn a_non_empty_directory_without_identity_is_never_initialised() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("notes.txt"), b"mine").expect("write");
    let r = DataDir::new(dir.path()).open(&identity(), OpenMode::CreateIfEmpty, 2);
    assert!(matches!(r, Err(Error::NotADataDir { .. })), "{r:?}");
    assert!(!dir.path().join("IDENTITY").exists());
}

#[test]
fn an_absent_directory_is_created_only_when_allowed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("node");
    let r = DataDir::new(&root).open(&identity(), OpenMode::MustExist, 2);
    assert!(matches!(r, Err(Error::Missing { .. })), "{r:?}");
    let s = DataDir::new(&root).open(&identity(), OpenMode::CreateIfEmpty, 2).expect("create");
    assert!(s.created);
    drop(s);
    let s = DataDir::new(&root).open(&identity(), OpenMode::MustExist, 2).expect("reopen");
    assert!(!s.created);
}

#[test]
fn a_corrupt_store_fails_to_open_with_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    drop(open(dir.path()));
    // Destroy the state store's manifest pointer.
    std::fs::write(dir.path().join("state").join("CURRENT"), b"garbage\n").expect("corrupt");
    let r = DataDir::new(dir.path()).open(&identity(), OpenMode::MustExist, 2);
    let err = r.expect_err("must fail");
    assert!(matches!(err, Error::Rocks { store: "state", .. } | Error::Damaged { store: "state", .. }), "{err}");
}

/// The first file of `dir` (sorted) whose name `pick` accepts.
/// The files of `dir` with extension `ext`.
fn files_with(dir: &Path, ext: &str) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .expect("a directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect()
}

fn file_in(dir: &Path, pick: impl Fn(&str) -> bool) -> std::path::PathBuf {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| pick(&p.file_name().expect("name").to_string_lossy()))
        .collect();
    files.sort();
    files.into_iter().next().expect("a matching file")
}

fn flip(file: &Path, offset: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().read(true).write(true).open(file).expect("open");
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, offset).expect("read");
    b[0] ^= 0x10;
    f.write_all_at(&b, offset).expect("write");
}

/// Issue #33, deliverable 3: a flipped bit in a store's manifest or table file (the `flip-table`
/// nemesis) is refused, and the error names the store's directory and the repair.
#[test]
fn a_flipped_bit_in_the_state_manifest_is_refused_naming_the_directory_and_the_repair() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let s = open(dir.path());
        run_both(&scenario(), &s.state);
        s.state.flush().expect("flush");
    }
    let state = dir.path().join("state");
    // Inside the manifest's first record (its 7-byte header, then the payload): its checksum fails.
    flip(&file_in(&state, |n| n.starts_with("MANIFEST-")), 12);
    let err = DataDir::new(dir.path()).open(&identity(), OpenMode::MustExist, 2).expect_err("must refuse");
    assert!(matches!(err, Error::Damaged { store: "state", path: Some(_), .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains(&state.display().to_string()), "names the directory: {text}");
    assert!(text.contains("Corruption"), "says what RocksDB found: {text}");
    assert!(text.contains("wipe it and rejoin") && text.contains("Damaged data directory"), "names the repair: {text}");
}

#[test]
fn a_flipped_bit_in_the_log_manifest_is_refused_naming_the_directory_and_the_repair() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let s = open(dir.path());
        s.log.append(&[(1, b"a".to_vec()), (2, b"b".to_vec())]).expect("append");
    }
    let log = dir.path().join("log");
    flip(&file_in(&log, |n| n.starts_with("MANIFEST-")), 12);
    let err = DataDir::new(dir.path()).open(&identity(), OpenMode::MustExist, 2).expect_err("must refuse");
    assert!(matches!(err, Error::Damaged { store: "log", path: Some(_), .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains(&log.display().to_string()), "names the directory: {text}");
    assert!(text.contains("wipe it and rejoin") && text.contains("Damaged data directory"), "names the repair: {text}");
    assert!(!text.contains("restore from a backup"), "one repair, not two: {text}");
}

#[test]
fn a_flipped_bit_in_a_state_table_is_refused_at_open_or_read_naming_the_repair() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let s = open(dir.path());
        run_both(&scenario(), &s.state);
        s.state.flush().expect("flush");
    }
    let state = dir.path().join("state");
    // The first byte of the first data block of every table file (one per family).
    let tables = files_with(&state, "sst");
    assert!(!tables.is_empty(), "the flush wrote table files");
    for t in &tables {
        flip(t, 0);
    }
    // Found at open (the due index is read then) or by a read of the whole state.
    let err = match DataDir::new(dir.path()).open(&identity(), OpenMode::MustExist, 2) {
        Err(e) => e,
        Ok(s) => s.state.digest().expect_err("a read of the whole state must find the flipped block"),
    };
    assert!(matches!(err, Error::Damaged { store: "state", .. } | Error::Corrupt { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("wipe it and rejoin") && text.contains("Damaged data directory"), "names the repair: {text}");
}

/// Issue #30: a snapshot is the checkpoint itself. Its table files are the state's own (hard
/// links), so building one writes no copy of the state, however large.
#[test]
fn building_a_snapshot_copies_no_table_file() {
    use std::os::unix::fs::MetadataExt;
    let a = tempfile::tempdir().expect("tempdir");
    let sa = open(a.path());
    run_both(&scenario(), &sa.state);
    let snap = sa.snapshots.build(&sa.state, "00000000000000000012-1", b"\x01meta").expect("build");
    let tables = files_with(&snap.path, "sst");
    assert!(!tables.is_empty(), "the checkpoint holds the flushed state");
    for t in &tables {
        let shared = std::fs::metadata(t).expect("meta").nlink();
        assert!(shared >= 2, "{} is a copy, not a link of the state's table file", t.display());
        assert!(a.path().join("state").join(t.file_name().expect("name")).exists());
    }
    assert!(
        !std::fs::read_dir(sa.snapshots.dir())
            .expect("dir")
            .any(|e| { e.expect("entry").path().extension().is_some_and(|x| x == "snap") })
    );
}

/// A data directory of an earlier release kept its snapshot as a packed archive (`<name>.snap`):
/// opened by this release, it becomes a checkpoint directory that installs the same state.
#[test]
fn a_packed_snapshot_of_an_earlier_release_is_unpacked_at_open() {
    let a = tempfile::tempdir().expect("tempdir");
    let b = tempfile::tempdir().expect("tempdir");
    let sa = open(a.path());
    run_both(&scenario(), &sa.state);
    let name = "00000000000000000012-1";
    let snap = sa.snapshots.build(&sa.state, name, b"\x01meta").expect("build");
    let archive = sa.snapshots.dir().join(format!("{name}.snap"));
    kungfu_storage::snapshot::pack(&snap.path, std::fs::File::create(&archive).expect("create")).expect("pack");
    std::fs::remove_dir_all(&snap.path).expect("remove the checkpoint");
    let dir = sa.snapshots.dir().to_path_buf();
    let reopened = kungfu_storage::SnapshotStore::open(&dir, 2).expect("reopen");
    let (latest, meta) = reopened.latest().expect("latest").expect("a snapshot");
    assert_eq!((latest.name.as_str(), meta.as_slice()), (name, b"\x01meta".as_slice()));
    assert!(latest.path.is_dir() && !archive.exists());

    let sb = open(b.path());
    reopened.install(&latest, &sb.state).expect("install");
    assert_eq!(sb.state.digest().expect("digest"), sa.state.digest().expect("digest"));
    // The snapshot stays in its store after an install, for the next follower that needs it.
    assert_eq!(reopened.list().expect("list"), vec![name.to_string()]);
}

/// Writes `files` table files of `per_file` point-read keys to a new state store (three, below
/// RocksDB's trigger of a level-0 compaction, so the files stay as written), reads a key of each
/// (so every file's reader is open and its filter consulted), and returns the store's memory.
fn memory_after_table_files(files: u64, per_file: u64) -> kungfu_storage::StoreMemory {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = open(dir.path());
    let key = |n: u64| keys::entry(kungfu_types::ThreadId(n), kungfu_types::EntrySeq(1));
    for f in 0..files {
        let mut changes = kungfu_core::Changeset::default();
        for i in 0..per_file {
            changes.insert(key(f * per_file + i), Some(kungfu_core::Record::Counters(Default::default())));
        }
        s.state.commit(&changes, &[("last_applied", Some(f.to_be_bytes().to_vec()))]).expect("commit");
        s.state.flush().expect("flush");
    }
    for f in 0..files {
        assert!(s.state.live().get(&key(f * per_file + 7)).expect("read").is_some(), "file {f}'s key");
    }
    let log = s.log.memory().expect("log memory");
    assert!(log.total() > 0, "the log store reports its memory too: {log:?}");
    s.state.memory().expect("memory")
}

/// Issue #36: the state's index and filter blocks live in its bounded block cache, not in each
/// table reader, so the memory a node holds outside the cache does not grow with its data. Three
/// table files of 4,000 keys against three of 60,000: the bigger files' whole-key filters alone
/// are about 225 KB (10 bits a key), all of it in the table readers with RocksDB's defaults.
#[test]
fn index_and_filter_blocks_are_held_in_the_block_cache_not_in_each_table_reader() {
    let small = memory_after_table_files(3, 4_000);
    let big = memory_after_table_files(3, 60_000);
    let big_filters = 3 * 60_000 * 10 / 8;
    assert!(
        big.table_readers < small.table_readers + big_filters / 10,
        "table readers grew from {} to {} bytes with 15 times the keys: index and filter blocks are held \
         outside the cache ({small:?}, {big:?})",
        small.table_readers,
        big.table_readers,
    );
    assert!(
        big.block_cache >= big_filters / 2 && big.block_cache_pinned > 0,
        "the cache holds the filters, level 0's pinned: {big:?}"
    );
    assert!(big.memtables < 1 << 20, "every write was flushed: {big:?}");
}

/// Issue #36: content (a value of 512 bytes or more in the records or the journal) is written once,
/// to a blob file, so compaction never rewrites it. A snapshot links the blob files like its table
/// files, and installs the same state, content included, on another node.
#[test]
fn content_lives_in_blob_files_that_a_snapshot_links_and_installs() {
    use kungfu_core::fact::{Fact, JournaledFact};
    use kungfu_types::{AgentId, MemoryId, ObjectRef, Timestamp};
    use std::os::unix::fs::MetadataExt;
    let a = tempfile::tempdir().expect("tempdir");
    let b = tempfile::tempdir().expect("tempdir");
    let sa = open(a.path());
    let key = |i: u64| keys::journal(ObjectRef::Memory(MemoryId(i)), i + 1, 0);
    let content = |i: u64| Content::new(format!("{i:08} ").repeat(256));
    let mut changes = kungfu_core::Changeset::default();
    for i in 0..200 {
        let fact = Fact::MemoryCreated { memory: MemoryId(i), author: AgentId(1), content: content(i) };
        let jf = JournaledFact { seq: i + 1, idx: 0, at: Timestamp(i + 1), actor: None, fact };
        changes.insert(key(i), Some(kungfu_core::Record::Fact(jf)));
    }
    sa.state.commit(&changes, &[("last_applied", Some(b"x".to_vec()))]).expect("commit");
    sa.state.flush().expect("flush");
    assert!(!files_with(&a.path().join("state"), "blob").is_empty(), "content of 2 KiB is kept in blob files");

    let snap = sa.snapshots.build(&sa.state, "00000000000000000012-1", b"\x01meta").expect("build");
    let linked = files_with(&snap.path, "blob");
    assert!(!linked.is_empty(), "the checkpoint holds the blob files");
    for f in &linked {
        assert!(std::fs::metadata(f).expect("meta").nlink() >= 2, "{} is a copy, not a link", f.display());
    }
    let sb = open(b.path());
    sa.snapshots.install(&snap, &sb.state).expect("install");
    assert_eq!(sb.state.digest().expect("digest"), sa.state.digest().expect("digest"));
    match sb.state.live().get(&key(7)).expect("read") {
        Some(kungfu_core::Record::Fact(JournaledFact { fact: Fact::MemoryCreated { content: c, .. }, .. })) => {
            assert_eq!(c, content(7), "the installed content reads back whole")
        }
        other => panic!("journal fact 7 after install: {other:?}"),
    }
    // Sent to a follower: packed into one stream, blob files included, and installed from it.
    let c = tempfile::tempdir().expect("tempdir");
    let sc = open(c.path());
    let archive = c.path().join("incoming.tar");
    let packed =
        kungfu_storage::snapshot::pack(&snap.path, std::fs::File::create(&archive).expect("create")).expect("pack");
    sc.snapshots.install_archive(&archive, &packed.sha256, &sc.state).expect("install the archive");
    assert_eq!(sc.state.digest().expect("digest"), sa.state.digest().expect("digest"));
}

/// A node restarted in the same process opens its stores while tasks of the node it replaced may
/// still hold them: the open waits (bounded) for the earlier handles to go, instead of failing on
/// RocksDB's lock (seen in `a_full_disk_stops_acknowledgements_and_loses_no_acknowledged_write`,
/// whose fenced node's raft tasks dropped the log store just after its shutdown returned).
#[test]
fn a_store_still_held_by_this_process_is_opened_once_the_holder_lets_go() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = open(dir.path());
    let log = first.log.clone();
    drop(first);
    let holder = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        drop(log);
    });
    let again = open(dir.path());
    again.log.append(&[(1, b"a".to_vec())]).expect("the reopened log writes");
    holder.join().expect("holder");
}
