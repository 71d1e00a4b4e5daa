//! Backup directories, and restore from them into a new data directory.
//!
//! A backup is a packed snapshot ([`crate::snapshot::write_archive`]: a RocksDB checkpoint of the
//! state store, tar-packed, SHA-256) in a new directory, with a `manifest.toml` written last, so a
//! directory without one is an incomplete backup. [`restore`] checks the archive against the
//! manifest, builds a fresh data directory beside the target whose state is the archive's and
//! whose log is empty, lets the caller adopt it (raft rewrites the membership kept with the state),
//! and renames it into place last, so an interrupted restore leaves no directory a node would
//! start on.
//!
//! What the archive's meta holds (openraft's snapshot meta) is the caller's business, as for every
//! snapshot: [`write`] asks for it from the checkpoint itself, so it describes exactly what the
//! archive holds. Only its grouped envelope is read here: a restore refuses another raft group's
//! state (issue #19, deliverable 3).

use crate::data_dir::{DataDir, Identity, OpenMode, Stores};
use crate::error::Error;
use crate::snapshot::file_digest;
use crate::state_store::{StateStore, sync_dir};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The manifest file of a backup directory.
pub const MANIFEST: &str = "manifest.toml";
/// The manifest format this build writes and reads.
pub const MANIFEST_FORMAT: u32 = 1;

/// What `manifest.toml` of a backup directory holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackupManifest {
    pub format: u32,
    pub cluster_id: String,
    pub node_id: u64,
    pub last_applied_index: u64,
    pub last_applied_term: u64,
    /// The archive's file name inside the backup directory.
    pub archive: String,
    pub archive_bytes: u64,
    /// SHA-256 of the archive, hex.
    pub sha256: String,
    pub created_at_unix_micros: i64,
}

fn refused(message: String) -> Error {
    Error::Backup(message)
}

impl BackupManifest {
    /// Reads and checks the manifest of a backup directory.
    pub fn read(backup_dir: &Path) -> Result<BackupManifest, Error> {
        let path = backup_dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            refused(format!("{}: {e} (a backup directory without {MANIFEST} is incomplete)", path.display()))
        })?;
        let m: BackupManifest = toml::from_str(&text).map_err(|e| refused(format!("{}: {e}", path.display())))?;
        if m.format != MANIFEST_FORMAT {
            return Err(refused(format!(
                "{}: backup format {} is not supported (this build reads {MANIFEST_FORMAT})",
                path.display(),
                m.format
            )));
        }
        let plain = !m.archive.is_empty()
            && !m.archive.starts_with('.')
            && m.archive.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
        if !plain {
            return Err(refused(format!(
                "{}: archive {:?} is not a file name in the backup directory",
                path.display(),
                m.archive
            )));
        }
        Ok(m)
    }
}

/// Why a backup was not written.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("the target directory already exists")]
    Exists,
    #[error("the parent of the target directory does not exist")]
    NoParent,
    #[error("{0}")]
    Failed(String),
}

/// The snapshot a backup holds, as the caller describes its checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Described {
    /// The archive's name (a snapshot name: ASCII letters, digits, `-`, `_`).
    pub name: String,
    /// The meta bytes saved beside the archive.
    pub meta: Vec<u8>,
    /// The last applied log entry the checkpoint holds: index and term.
    pub applied_index: u64,
    pub applied_term: u64,
}

/// Writes a backup of `state` into the new directory `target` (which must not exist): the
/// snapshot archive, then `manifest.toml`. `describe` reads the checkpoint the archive is packed
/// from. On failure nothing is left behind.
pub fn write(
    state: &StateStore,
    cluster_id: &str,
    node_id: u64,
    target: &Path,
    describe: impl FnOnce(&Path) -> Result<Described, Error>,
) -> Result<BackupManifest, BackupError> {
    match std::fs::create_dir(target) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Err(BackupError::Exists),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(BackupError::NoParent),
        Err(e) => return Err(BackupError::Failed(format!("{}: {e}", target.display()))),
    }
    let written = fill(state, cluster_id, node_id, target, describe);
    if written.is_err() {
        let _ = std::fs::remove_dir_all(target);
    }
    written.map_err(|e| BackupError::Failed(e.to_string()))
}

fn fill(
    state: &StateStore,
    cluster_id: &str,
    node_id: u64,
    target: &Path,
    describe: impl FnOnce(&Path) -> Result<Described, Error>,
) -> Result<BackupManifest, Error> {
    let mut described = None;
    let (name, applied) = {
        // The archive's name is the snapshot's, known only once the checkpoint is read: pack into
        // a temporary name, then rename.
        let tmp = target.join(".archive.tmp");
        let (packed, ()) = crate::snapshot::write_archive(state, &tmp, |checkpoint| {
            let d = describe(checkpoint)?;
            let meta = d.meta.clone();
            described = Some(d);
            Ok((meta, ()))
        })?;
        let d = described.take().ok_or_else(|| refused("the checkpoint was not described".into()))?;
        if !d.name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') || d.name.is_empty() {
            return Err(Error::Corrupt { what: format!("invalid snapshot name {:?}", d.name) });
        }
        let archive_path = target.join(format!("{}.snap", d.name));
        std::fs::rename(&tmp, &archive_path).map_err(Error::io(&archive_path))?;
        let meta_path = archive_path.with_extension("meta");
        std::fs::rename(tmp.with_extension("meta"), &meta_path).map_err(Error::io(&meta_path))?;
        sync_dir(target)?;
        (d.name, (packed, d.applied_index, d.applied_term))
    };
    let (packed, applied_index, applied_term) = applied;
    let file = format!("{name}.snap");
    let manifest = BackupManifest {
        format: MANIFEST_FORMAT,
        cluster_id: cluster_id.to_string(),
        node_id,
        last_applied_index: applied_index,
        last_applied_term: applied_term,
        archive: file,
        archive_bytes: packed.len,
        sha256: hex::encode(packed.sha256),
        created_at_unix_micros: now_unix_micros(),
    };
    let text = toml::to_string(&manifest).map_err(|e| refused(format!("writing {MANIFEST}: {e}")))?;
    let path = target.join(MANIFEST);
    write_synced(&path, text.as_bytes()).map_err(Error::io(&path))?;
    sync_dir(target)?;
    Ok(manifest)
}

fn now_unix_micros() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}

fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

/// Syncs every file and directory under `dir` to disk.
fn sync_tree(dir: &Path) -> Result<(), Error> {
    for entry in std::fs::read_dir(dir).map_err(Error::io(dir))? {
        let path = entry.map_err(Error::io(dir))?.path();
        if path.is_dir() {
            sync_tree(&path)?;
        } else {
            std::fs::File::open(&path).and_then(|f| f.sync_all()).map_err(Error::io(&path))?;
        }
    }
    sync_dir(dir)
}

/// Creates the data directory `data_dir` (absent or empty) for `identity` from the backup in
/// `backup_dir`: the archive is checked against the manifest's SHA-256 and size, its state becomes
/// the new directory's state store, and the log is empty. `adopt` then prepares the opened stores
/// for the node (its membership, its vote) and returns the last applied entry (index, term), which
/// must be the manifest's. The directory is built beside `data_dir` and renamed into place last.
pub async fn restore<F>(
    backup_dir: &Path,
    data_dir: &Path,
    identity: &Identity,
    adopt: F,
) -> Result<BackupManifest, Error>
where
    F: AsyncFnOnce(&Stores) -> Result<(u64, u64), Error>,
{
    let manifest = BackupManifest::read(backup_dir)?;
    let archive_path = backup_dir.join(&manifest.archive);
    let (len, sha) = file_digest(&archive_path)?;
    if hex::encode(sha) != manifest.sha256 || len != manifest.archive_bytes {
        return Err(refused(format!(
            "{}: SHA-256 {} and size {len} do not match the manifest ({} and {}): the backup is damaged",
            archive_path.display(),
            hex::encode(sha),
            manifest.sha256,
            manifest.archive_bytes
        )));
    }
    match std::fs::read_dir(data_dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(refused(format!(
                    "{} is not empty: restore only into a new or empty directory",
                    data_dir.display()
                )));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(refused(format!("{}: {e}", data_dir.display()))),
    }
    let name = data_dir
        .file_name()
        .ok_or_else(|| refused(format!("{} does not name a directory", data_dir.display())))?
        .to_string_lossy()
        .to_string();
    let parent = data_dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(Error::io(parent))?;
    // The scratch directory of restores into `data_dir`; a leftover is an interrupted restore.
    let staging = parent.join(format!(".{name}.restoring"));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(Error::io(&staging))?;
    }
    if let Err(e) = build_restored(&staging, &archive_path, &manifest, identity, adopt).await {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    sync_tree(&staging)?;
    if data_dir.exists() {
        std::fs::remove_dir(data_dir).map_err(Error::io(data_dir))?;
    }
    std::fs::rename(&staging, data_dir).map_err(Error::io(data_dir))?;
    sync_dir(parent)?;
    Ok(manifest)
}

async fn build_restored<F>(
    staging: &Path,
    archive_path: &Path,
    manifest: &BackupManifest,
    identity: &Identity,
    adopt: F,
) -> Result<(), Error>
where
    F: AsyncFnOnce(&Stores) -> Result<(u64, u64), Error>,
{
    let stores = DataDir::new(staging).open(identity, OpenMode::CreateIfEmpty, 2)?;
    let mut sha256 = [0u8; 32];
    hex::decode_to_slice(&manifest.sha256, &mut sha256)
        .map_err(|e| refused(format!("the manifest's sha256 {:?}: {e}", manifest.sha256)))?;
    // The group the backed-up state belongs to is named by the meta saved beside the archive
    // (issue #19, deliverable 3); installing refuses another group's state.
    let meta_path = archive_path.with_extension("meta");
    let meta = std::fs::read(&meta_path).map_err(Error::io(&meta_path))?;
    let group = crate::envelope::group_of(&meta, "backup snapshot meta")?;
    if group != crate::SHARD {
        return Err(Error::Corrupt {
            what: format!(
                "backup {} holds the state of {group}; this state store holds {}",
                manifest.archive,
                crate::SHARD
            ),
        });
    }
    // Verifies the SHA-256 again before it unpacks, then swaps the state store for the backup's.
    stores.snapshots.install_archive(archive_path, &sha256, &stores.state)?;
    let (index, term) = adopt(&stores).await?;
    if index != manifest.last_applied_index || term != manifest.last_applied_term {
        return Err(refused(format!(
            "the archive holds entry {index} of term {term}, the manifest says {} of term {}",
            manifest.last_applied_index, manifest.last_applied_term
        )));
    }
    drop(stores);
    Ok(())
}
