//! Backup directories against their contract: a backup never overwrites anything, its manifest
//! names the archive by size and SHA-256 and the entry the checkpoint holds, a damaged one is
//! refused without leaving a data directory behind, and a restore gives a new data directory whose
//! state is the backed-up one, byte for byte.

use kungfu_core::{Action, Command, Limits, Principal, apply};
use kungfu_storage::backup::{self, BackupError, BackupManifest, Described, MANIFEST};
use kungfu_storage::snapshot::read_checkpoint_meta;
use kungfu_storage::{DataDir, Error, Identity, OpenMode, Stores};
use kungfu_types::Timestamp;
use std::path::Path;

fn identity(node_id: u64) -> Identity {
    Identity { cluster_id: "c1".into(), node_id }
}

/// A state with a few records and an applied mark (`index:term`, as the caller encodes it).
fn stores_with_state(dir: &Path) -> Stores {
    let s = DataDir::new(dir).open(&identity(1), OpenMode::CreateIfEmpty, 2).expect("open");
    for n in 0..20u64 {
        let action = Action::RegisterAgent {
            key_hash: kungfu_core::secret::hash_secret(&format!("kf_secret_{n}")),
            key_fingerprint: kungfu_core::secret::fingerprint(&format!("kf_secret_{n}")),
        };
        let cmd = Command::new(Principal::Registrar, action, None, Timestamp(1_000 + n));
        let applied = apply(&s.state.live(), &cmd, &Limits::default()).expect("apply");
        s.state.commit(&applied.changes, &[("last_applied", Some(b"12:3".to_vec()))]).expect("commit");
    }
    s
}

/// Describes a checkpoint from its own `last_applied` mark, as raft does with its log id.
fn describe(checkpoint: &Path) -> Result<Described, Error> {
    let mark = read_checkpoint_meta(checkpoint, "last_applied")?.expect("an applied mark");
    let text = String::from_utf8(mark).expect("utf-8");
    let (index, term) = text.split_once(':').expect("index:term");
    let (index, term): (u64, u64) = (index.parse().expect("index"), term.parse().expect("term"));
    Ok(Described {
        name: format!("state-{index:020}-{term}"),
        meta: b"\x01meta".to_vec(),
        applied_index: index,
        applied_term: term,
    })
}

#[tokio::test]
async fn a_backup_restores_into_a_new_data_directory_with_the_same_state() {
    let root = tempfile::tempdir().expect("tempdir");
    let source = stores_with_state(&root.path().join("source"));
    let target = root.path().join("backup");

    let manifest = backup::write(&source.state, "c1", 1, &target, describe).expect("backup");
    assert_eq!((manifest.last_applied_index, manifest.last_applied_term), (12, 3));
    assert_eq!(manifest.archive, "state-00000000000000000012-3.snap");
    let (len, sha) = kungfu_storage::snapshot::file_digest(&target.join(&manifest.archive)).expect("digest");
    assert_eq!((len, hex::encode(sha)), (manifest.archive_bytes, manifest.sha256.clone()));
    assert_eq!(BackupManifest::read(&target).expect("manifest"), manifest);

    // Never over an existing directory, nor under a missing parent.
    assert!(matches!(backup::write(&source.state, "c1", 1, &target, describe), Err(BackupError::Exists)));
    let orphan = root.path().join("missing").join("backup");
    assert!(matches!(backup::write(&source.state, "c1", 1, &orphan, describe), Err(BackupError::NoParent)));

    let data = root.path().join("restored");
    let restored = backup::restore(&target, &data, &identity(5), async |stores: &Stores| {
        assert_eq!(stores.identity, identity(5));
        Ok((12, 3))
    })
    .await
    .expect("restore");
    assert_eq!(restored, manifest);
    let opened = DataDir::new(&data).open(&identity(5), OpenMode::MustExist, 2).expect("reopen");
    assert_eq!(opened.state.digest().expect("digest"), source.state.digest().expect("digest"));
    assert_eq!(opened.log.last().expect("log"), None, "the restored log is empty");

    // Restore never overwrites a data directory.
    let again = backup::restore(&target, &data, &identity(5), async |_: &Stores| Ok((12, 3))).await;
    assert!(matches!(again, Err(Error::Backup(m)) if m.contains("is not empty")));
}

#[tokio::test]
async fn a_damaged_or_mismatched_backup_is_refused_and_leaves_no_data_directory() {
    let root = tempfile::tempdir().expect("tempdir");
    let source = stores_with_state(&root.path().join("source"));
    let target = root.path().join("backup");
    let manifest = backup::write(&source.state, "c1", 1, &target, describe).expect("backup");

    // The adopted state must hold the entry the manifest names.
    let data = root.path().join("restored");
    let r = backup::restore(&target, &data, &identity(5), async |_: &Stores| Ok((11, 3))).await;
    assert!(matches!(r, Err(Error::Backup(m)) if m.contains("the manifest says 12 of term 3")));
    assert!(!data.exists() && !root.path().join(".restored.restoring").exists(), "nothing left behind");

    // One flipped byte in the archive.
    let archive = target.join(&manifest.archive);
    let mut bytes = std::fs::read(&archive).expect("read");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&archive, bytes).expect("write");
    let r = backup::restore(&target, &data, &identity(5), async |_: &Stores| Ok((12, 3))).await;
    assert!(matches!(r, Err(Error::Backup(m)) if m.contains("the backup is damaged")));
    assert!(!data.exists());

    // A directory without its manifest is an incomplete backup.
    std::fs::remove_file(target.join(MANIFEST)).expect("remove");
    assert!(matches!(BackupManifest::read(&target), Err(Error::Backup(m)) if m.contains("is incomplete")));
}
