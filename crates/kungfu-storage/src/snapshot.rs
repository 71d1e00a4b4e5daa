//! Snapshot archives. A snapshot is a RocksDB checkpoint of the state store (hard links, so
//! building one is cheap and consistent), packed into one archive file so it can be streamed to a
//! follower in bounded chunks, checked against its SHA-256, unpacked and installed atomically.
//! Metadata (openraft's snapshot meta) is stored next to the archive as opaque bytes in a grouped
//! envelope ([`crate::envelope::encode_grouped`]): storage reads only the group it names (issue
//! #19, deliverable 3), so a snapshot of another raft group is never installed into this state.

use crate::error::Error;
use crate::state_store::{StateStore, sync_dir};
use crate::{SHARD, envelope};
use kungfu_types::GroupId;
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// A packed snapshot on local disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotArchive {
    pub name: String,
    pub path: PathBuf,
    pub len: u64,
    pub sha256: [u8; 32],
    /// The raft group whose state the archive holds, as its meta names it (group 0 for a meta in
    /// the plain V1 envelope, which is every snapshot written before groups existed).
    pub group: GroupId,
}

/// The directory of snapshot archives of one node.
#[derive(Clone, Debug)]
pub struct SnapshotStore {
    dir: PathBuf,
    /// How many complete snapshots to keep (older ones are deleted after a new one is saved).
    keep: usize,
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 128 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl SnapshotStore {
    pub fn open(dir: &Path, keep: usize) -> Result<SnapshotStore, Error> {
        std::fs::create_dir_all(dir).map_err(Error::io(dir))?;
        // Leftovers of interrupted builds or transfers are never complete snapshots.
        for entry in std::fs::read_dir(dir).map_err(Error::io(dir))? {
            let entry = entry.map_err(Error::io(dir))?;
            let name = entry.file_name().to_string_lossy().to_string();
            if name.starts_with("tmp-") {
                let p = entry.path();
                if p.is_dir() {
                    std::fs::remove_dir_all(&p).map_err(Error::io(&p))?;
                } else {
                    std::fs::remove_file(&p).map_err(Error::io(&p))?;
                }
            }
        }
        Ok(SnapshotStore { dir: dir.to_path_buf(), keep: keep.max(1) })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn archive_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.snap"))
    }

    fn meta_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.meta"))
    }

    /// Builds an archive of the current state named `name`, with `meta` saved beside it. Every
    /// `meta` given to this store is a grouped envelope ([`envelope::encode_grouped`]) whose group
    /// becomes the archive's; its value is the caller's business.
    pub fn build(&self, state: &StateStore, name: &str, meta: &[u8]) -> Result<SnapshotArchive, Error> {
        self.build_with(state, |_| Ok((name.to_string(), meta.to_vec(), ()))).map(|(a, ())| a)
    }

    /// Builds an archive of the current state. `describe` sees the checkpoint directory (so the
    /// metadata can be read from exactly the state the snapshot holds) and returns the snapshot's
    /// name, its meta bytes, and a value passed back to the caller. The meta file is written last:
    /// a snapshot without one is incomplete and ignored.
    pub fn build_with<M>(
        &self,
        state: &StateStore,
        describe: impl FnOnce(&Path) -> Result<(String, Vec<u8>, M), Error>,
    ) -> Result<(SnapshotArchive, M), Error> {
        let cp = self.dir.join(format!("tmp-{}.checkpoint", unique()));
        let _ = std::fs::remove_dir_all(&cp);
        state.checkpoint_to(&cp)?;
        let (name, meta, extra) = match describe(&cp) {
            Ok(d) => d,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&cp);
                return Err(e);
            }
        };
        if !valid_name(&name) {
            let _ = std::fs::remove_dir_all(&cp);
            return Err(Error::Corrupt { what: format!("invalid snapshot name {name:?}") });
        }
        let tmp = self.dir.join(format!("tmp-{name}.snap"));
        {
            let file = File::create(&tmp).map_err(Error::io(&tmp))?;
            let mut builder = tar::Builder::new(file);
            builder.append_dir_all("state", &cp).map_err(Error::io(&cp))?;
            let file = builder.into_inner().map_err(Error::io(&tmp))?;
            file.sync_all().map_err(Error::io(&tmp))?;
        }
        std::fs::remove_dir_all(&cp).map_err(Error::io(&cp))?;
        let archive = self.archive_path(&name);
        std::fs::rename(&tmp, &archive).map_err(Error::io(&archive))?;
        Ok((self.finish(&name, &meta)?, extra))
    }

    /// Copies an archive that lives elsewhere (another node's directory) into this store.
    pub fn adopt(&self, archive: &SnapshotArchive, name: &str, meta: &[u8]) -> Result<SnapshotArchive, Error> {
        let (path, _) = self.incoming(name)?;
        std::fs::copy(&archive.path, &path).map_err(Error::io(&path))?;
        self.accept(&path, name, &archive.sha256, meta)
    }

    /// A file to receive an incoming archive into, chunk by chunk.
    pub fn incoming(&self, name: &str) -> Result<(PathBuf, File), Error> {
        if !valid_name(name) {
            return Err(Error::Corrupt { what: format!("invalid snapshot name {name:?}") });
        }
        let path = self.dir.join(format!("tmp-{name}.incoming"));
        let file = File::create(&path).map_err(Error::io(&path))?;
        Ok((path, file))
    }

    /// Accepts a fully received archive: checks its digest, moves it into place, saves its meta.
    pub fn accept(
        &self,
        received: &Path,
        name: &str,
        sha256: &[u8; 32],
        meta: &[u8],
    ) -> Result<SnapshotArchive, Error> {
        let (_, actual) = file_digest(received)?;
        if &actual != sha256 {
            let _ = std::fs::remove_file(received);
            return Err(Error::Corrupt {
                what: format!(
                    "snapshot {name}: checksum {} does not match {}",
                    hex::encode(actual),
                    hex::encode(sha256)
                ),
            });
        }
        let archive = self.archive_path(name);
        std::fs::rename(received, &archive).map_err(Error::io(&archive))?;
        self.finish(name, meta)
    }

    fn finish(&self, name: &str, meta: &[u8]) -> Result<SnapshotArchive, Error> {
        let archive = self.archive_path(name);
        let meta_path = self.meta_path(name);
        let tmp = self.dir.join(format!("tmp-{name}.meta"));
        {
            let mut f = File::create(&tmp).map_err(Error::io(&tmp))?;
            f.write_all(meta).map_err(Error::io(&tmp))?;
            f.sync_all().map_err(Error::io(&tmp))?;
        }
        std::fs::rename(&tmp, &meta_path).map_err(Error::io(&meta_path))?;
        sync_dir(&self.dir)?;
        let (len, sha256) = file_digest(&archive)?;
        self.prune()?;
        let group = envelope::group_of(meta, "snapshot meta")?;
        Ok(SnapshotArchive { name: name.to_string(), path: archive, len, sha256, group })
    }

    /// Complete snapshots, oldest first (names sort by their leading log index).
    pub fn list(&self) -> Result<Vec<String>, Error> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&self.dir).map_err(Error::io(&self.dir))? {
            let entry = entry.map_err(Error::io(&self.dir))?;
            let file = entry.file_name().to_string_lossy().to_string();
            if let Some(name) = file.strip_suffix(".meta") {
                if !name.starts_with("tmp-") && self.archive_path(name).exists() {
                    names.push(name.to_string());
                }
            }
        }
        names.sort();
        Ok(names)
    }

    /// The newest complete snapshot: its archive and its meta bytes.
    pub fn latest(&self) -> Result<Option<(SnapshotArchive, Vec<u8>)>, Error> {
        let Some(name) = self.list()?.pop() else { return Ok(None) };
        let meta_path = self.meta_path(&name);
        let meta = std::fs::read(&meta_path).map_err(Error::io(&meta_path))?;
        let archive = self.archive_path(&name);
        let (len, sha256) = file_digest(&archive)?;
        let group = envelope::group_of(&meta, "snapshot meta")?;
        Ok(Some((SnapshotArchive { name, path: archive, len, sha256, group }, meta)))
    }

    fn prune(&self) -> Result<(), Error> {
        let names = self.list()?;
        if names.len() > self.keep {
            for name in &names[..names.len() - self.keep] {
                let _ = std::fs::remove_file(self.meta_path(name));
                let _ = std::fs::remove_file(self.archive_path(name));
            }
        }
        Ok(())
    }

    /// Unpacks an archive and installs it as the whole state, atomically.
    pub fn install(&self, archive: &SnapshotArchive, state: &StateStore) -> Result<(), Error> {
        // Issue #19, deliverable 3: the state store holds one group's state, [`SHARD`]'s; another
        // group's keys would land under the wrong prefix (or, checked later, the wrong counters).
        if archive.group != SHARD {
            return Err(Error::Corrupt {
                what: format!(
                    "snapshot {} holds the state of {}; this state store holds {SHARD}",
                    archive.name, archive.group
                ),
            });
        }
        let (_, actual) = file_digest(&archive.path)?;
        if actual != archive.sha256 {
            return Err(Error::Corrupt { what: format!("snapshot {} changed on disk", archive.name) });
        }
        let unpack = self.dir.join(format!("tmp-{}.unpack", archive.name));
        let _ = std::fs::remove_dir_all(&unpack);
        let file = File::open(&archive.path).map_err(Error::io(&archive.path))?;
        let mut ar = tar::Archive::new(file);
        ar.unpack(&unpack).map_err(Error::io(&unpack))?;
        state.replace_with(&unpack.join("state"))?;
        let _ = std::fs::remove_dir_all(&unpack);
        Ok(())
    }
}

/// A process-unique suffix for temporary names.
fn unique() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!("{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

/// Reads one `sm_meta` value from a checkpoint directory (opened read-only).
pub fn read_checkpoint_meta(dir: &Path, key: &str) -> Result<Option<Vec<u8>>, Error> {
    let opts = rocksdb::Options::default();
    let db = rocksdb::DB::open_cf_for_read_only(&opts, dir, crate::state_store::cf_names(), false)
        .map_err(Error::rocks("snapshot"))?;
    let cf = db.cf_handle("sm_meta").ok_or_else(|| Error::Corrupt { what: "sm_meta missing in checkpoint".into() })?;
    db.get_cf(cf, key).map_err(Error::rocks("snapshot"))
}

/// Reads at most `max` bytes of a file from `offset` (a chunk of a snapshot transfer).
pub fn read_chunk(path: &Path, offset: u64, max: usize) -> Result<Vec<u8>, Error> {
    let mut f = File::open(path).map_err(Error::io(path))?;
    f.seek(SeekFrom::Start(offset)).map_err(Error::io(path))?;
    let mut buf = Vec::with_capacity(max);
    f.take(max as u64).read_to_end(&mut buf).map_err(Error::io(path))?;
    Ok(buf)
}

/// Length and SHA-256 of a file.
pub fn file_digest(path: &Path) -> Result<(u64, [u8; 32]), Error> {
    let mut f = File::open(path).map_err(Error::io(path))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut len = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(Error::io(path))?;
        if n == 0 {
            break;
        }
        len += n as u64;
        h.update(&buf[..n]);
    }
    Ok((len, h.finalize().into()))
}
