//! Faults of the disk: a node whose disk fills up stops acknowledging writes instead of
//! acknowledging one it did not persist, and after a restart every acknowledged write is there.
//!
//! The disk is a real tmpfs of a few MiB mounted for the test (the test runs as root, as CI does),
//! so RocksDB meets a real ENOSPC.

use kungfu_core::{Action, Command, PostBody, Principal};
use kungfu_raft::{NodeConfig, RaftNode, Response, WriteError};
use kungfu_storage::OpenMode;
use kungfu_types::{AgentId, Content, IdempotencyKey, Timestamp};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command as Proc;
use std::time::Duration;

/// A tmpfs mounted for the life of the guard.
struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    fn mount(size_mib: u64) -> Tmpfs {
        let path = std::env::temp_dir().join(format!("kungfu-enospc-{}", std::process::id()));
        std::fs::create_dir_all(&path).expect("mount point");
        let out = Proc::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mib}m"), "tmpfs"])
            .arg(&path)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "this test mounts a tmpfs and must run as root: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs { path }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Proc::new("umount").arg("-l").arg(&self.path).status();
        let _ = std::fs::remove_dir(&self.path);
    }
}

/// Fills the file system at `dir` until it has no space left.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).expect("filler");
    let block = vec![0u8; 64 * 1024];
    while f.write_all(&block).is_ok() {}
    let _ = f.sync_all();
    path
}

fn post(i: u64, thread: kungfu_types::ThreadId) -> Command {
    Command::new(
        Principal::Agent(AgentId(1)),
        Action::Post {
            thread,
            body: PostBody::Content(Content::from(format!("entry {i} {}", "x".repeat(2000)))),
            reply_to: None,
            ask: None,
            task_ref: None,
            assignment: None,
        },
        Some(IdempotencyKey::new(format!("post-{i}")).expect("key")),
        Timestamp(2_000_000 + i * 1000),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_stops_acknowledgements_and_loses_no_acknowledged_write() {
    let disk = Tmpfs::mount(48);
    let data = disk.path.join("node");
    let mut cfg = NodeConfig::new(1, "enospc", &data, "127.0.0.1:0".parse().expect("addr"));
    cfg.raft.election_timeout_min = Duration::from_millis(150);
    cfg.raft.election_timeout_max = Duration::from_millis(300);
    let node = RaftNode::start(cfg.clone()).await.expect("start");
    node.initialize([(1, node.node())].into_iter().collect()).await.expect("init");

    let register = Command::new(
        Principal::Registrar,
        Action::RegisterAgent {
            key_hash: kungfu_core::secret::hash_secret("kf_enospc_secret_0123456789"),
            key_fingerprint: kungfu_core::secret::fingerprint("kf_enospc_secret_0123456789"),
        },
        Some(IdempotencyKey::new("reg").expect("key")),
        Timestamp(1_000_000),
    );
    let create = Command::new(
        Principal::Agent(AgentId(1)),
        Action::CreateThread { subject: Content::from("t"), grant: None },
        Some(IdempotencyKey::new("thread").expect("key")),
        Timestamp(1_500_000),
    );
    let start = std::time::Instant::now();
    loop {
        match node.write(register.clone()).await {
            Ok(_) => break,
            Err(WriteError::NotLeader { .. }) if start.elapsed() < Duration::from_secs(30) => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Err(e) => panic!("register: {e}"),
        }
    }
    node.write(create).await.expect("create thread");
    let thread = kungfu_types::ThreadId(1);
    let mut acked = Vec::new();
    for i in 0..5 {
        let cmd = post(i, thread);
        let (resp, _) = node.write(cmd.clone()).await.expect("write before the disk fills");
        acked.push((cmd, resp));
    }

    // The disk fills. From now on no write may be acknowledged unless it was persisted; the node
    // must fence itself (stop) rather than carry on.
    let filler = fill(&disk.path);
    let mut failed = false;
    for i in 5..200 {
        let cmd = post(i, thread);
        match node.write_within(cmd.clone(), Duration::from_secs(10)).await {
            Ok((resp, _)) => acked.push((cmd, resp)), // persisted before the disk ran out
            Err(e) => {
                eprintln!("write {i} after the disk filled: {e}");
                assert!(!e.is_definite() || matches!(e, WriteError::NotLeader { .. }), "{e}");
                failed = true;
                break;
            }
        }
    }
    assert!(failed, "a full disk never stopped the node from acknowledging writes");
    // Fenced: later writes are refused too.
    let later = node.write_within(post(999, thread), Duration::from_secs(5)).await;
    assert!(later.is_err(), "a write was acknowledged after the node fenced itself");
    node.shutdown().await;

    // Free the space and restart: every acknowledged write is there with its original receipt.
    std::fs::remove_file(filler).expect("remove filler");
    cfg.open_mode = OpenMode::MustExist;
    let node = RaftNode::start(cfg).await.expect("restart");
    let start = std::time::Instant::now();
    for (cmd, resp) in &acked {
        loop {
            match node.write(cmd.clone()).await {
                Ok((Response::Applied { outcome, replayed: true }, _)) => {
                    let Response::Applied { outcome: original, .. } = resp else { panic!("{resp:?}") };
                    assert_eq!(&outcome, original);
                    break;
                }
                Ok(other) => panic!("acknowledged write {:?} was lost: {other:?}", cmd.action.kind()),
                Err(WriteError::NotLeader { .. }) if start.elapsed() < Duration::from_secs(30) => {
                    tokio::time::sleep(Duration::from_millis(20)).await
                }
                Err(e) => panic!("after restart: {e}"),
            }
        }
    }
    node.shutdown().await;
}
