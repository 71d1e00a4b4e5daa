//! Snapshots. A snapshot is a RocksDB checkpoint of the state store kept as a directory of this
//! store (hard links to the state's table files, so building one copies nothing and costs a
//! flush), with openraft's snapshot meta beside it. Nothing is packed or hashed when a snapshot is
//! built (issue #30): only a transfer to a follower packs the directory, as a deterministic tar
//! stream with a running SHA-256 ([`pack`]), and the receiver checks that digest, unpacks the
//! stream into a directory of its own store ([`SnapshotStore::accept`]) and installs it atomically.
//! Backups are the one place a packed archive is kept on disk ([`write_archive`]). Metadata is
//! stored as opaque bytes in a grouped envelope ([`crate::envelope::encode_grouped`]): storage
//! reads only the group it names (issue #19, deliverable 3), so a snapshot of another raft group
//! is never installed into this state.

use crate::error::Error;
use crate::state_store::{StateStore, sync_dir};
use crate::{SHARD, envelope};
use kungfu_types::GroupId;
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// A complete snapshot in a node's snapshot directory: a RocksDB checkpoint of the state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredSnapshot {
    pub name: String,
    /// The checkpoint's directory.
    pub path: PathBuf,
    /// The raft group whose state the snapshot holds, as its meta names it (group 0 for a meta in
    /// the plain V1 envelope, which is every snapshot written before groups existed).
    pub group: GroupId,
}

/// The directory of snapshots of one node.
#[derive(Clone, Debug)]
pub struct SnapshotStore {
    dir: PathBuf,
    /// How many complete snapshots to keep (older ones are deleted after a new one is saved).
    keep: usize,
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 128 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The directory inside a packed snapshot that holds the checkpoint's files (the layout every
/// release has sent and backed up).
const PACKED_ROOT: &str = "state";

fn remove_any(p: &Path) -> Result<(), Error> {
    let removed = if p.is_dir() { std::fs::remove_dir_all(p) } else { std::fs::remove_file(p) };
    match removed {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::Io { path: p.to_path_buf(), source: e }),
    }
}

impl SnapshotStore {
    pub fn open(dir: &Path, keep: usize) -> Result<SnapshotStore, Error> {
        std::fs::create_dir_all(dir).map_err(Error::io(dir))?;
        // Leftovers of interrupted builds or transfers are never complete snapshots.
        for entry in std::fs::read_dir(dir).map_err(Error::io(dir))? {
            let entry = entry.map_err(Error::io(dir))?;
            if entry.file_name().to_string_lossy().starts_with("tmp-") {
                remove_any(&entry.path())?;
            }
        }
        let store = SnapshotStore { dir: dir.to_path_buf(), keep: keep.max(1) };
        store.unpack_archives()?;
        Ok(store)
    }

    /// Data directories written before issue #30 kept each snapshot as a packed archive
    /// (`<name>.snap`); each one with its meta becomes a checkpoint directory once, at open, so
    /// that a node upgraded with only such a snapshot can still send it to a follower.
    fn unpack_archives(&self) -> Result<(), Error> {
        for entry in std::fs::read_dir(&self.dir).map_err(Error::io(&self.dir))? {
            let entry = entry.map_err(Error::io(&self.dir))?;
            let file = entry.file_name().to_string_lossy().to_string();
            let Some(name) = file.strip_suffix(".snap") else { continue };
            if valid_name(name) && self.meta_path(name).exists() && !self.checkpoint_path(name).exists() {
                self.unpack_into_place(&entry.path(), name)?;
            }
            remove_any(&entry.path())?;
        }
        Ok(())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn checkpoint_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.ckpt"))
    }

    fn meta_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.meta"))
    }

    /// Builds a snapshot of the current state named `name`, with `meta` saved beside it. Every
    /// `meta` given to this store is a grouped envelope ([`envelope::encode_grouped`]) whose group
    /// becomes the snapshot's; its value is the caller's business.
    pub fn build(&self, state: &StateStore, name: &str, meta: &[u8]) -> Result<StoredSnapshot, Error> {
        self.build_with(state, |_| Ok((name.to_string(), meta.to_vec(), ()))).map(|(a, ())| a)
    }

    /// Builds a snapshot of the current state: a checkpoint, which copies no table file. `describe`
    /// sees the checkpoint directory (so the metadata can be read from exactly the state the
    /// snapshot holds) and returns the snapshot's name, its meta bytes, and a value passed back to
    /// the caller. The meta file is written last: a snapshot without one is incomplete and ignored.
    pub fn build_with<M>(
        &self,
        state: &StateStore,
        describe: impl FnOnce(&Path) -> Result<(String, Vec<u8>, M), Error>,
    ) -> Result<(StoredSnapshot, M), Error> {
        let cp = self.dir.join(format!("tmp-{}.checkpoint", unique()));
        remove_any(&cp)?;
        state.checkpoint_to(&cp)?;
        let described = describe(&cp).and_then(|d| {
            if valid_name(&d.0) {
                Ok(d)
            } else {
                Err(Error::Corrupt { what: format!("invalid snapshot name {:?}", d.0) })
            }
        });
        let (name, meta, extra) = match described {
            Ok(d) => d,
            Err(e) => {
                let _ = remove_any(&cp);
                return Err(e);
            }
        };
        let target = self.checkpoint_path(&name);
        // A snapshot of the same entry has the same name and the same state: keep the older one.
        if target.exists() {
            remove_any(&cp)?;
        } else {
            std::fs::rename(&cp, &target).map_err(Error::io(&target))?;
        }
        Ok((self.finish(&name, &meta)?, extra))
    }

    /// Brings a snapshot that lives elsewhere (another store's directory) into this store: its
    /// table files are linked, never copied.
    pub fn adopt(&self, snapshot: &StoredSnapshot, name: &str, meta: &[u8]) -> Result<StoredSnapshot, Error> {
        if !valid_name(name) {
            return Err(Error::Corrupt { what: format!("invalid snapshot name {name:?}") });
        }
        let tmp = self.dir.join(format!("tmp-{name}.adopt"));
        remove_any(&tmp)?;
        link_checkpoint(&snapshot.path, &tmp)?;
        let target = self.checkpoint_path(name);
        remove_any(&target)?;
        std::fs::rename(&tmp, &target).map_err(Error::io(&target))?;
        self.finish(name, meta)
    }

    /// A file to receive a packed snapshot into, chunk by chunk.
    pub fn incoming(&self, name: &str) -> Result<(PathBuf, File), Error> {
        if !valid_name(name) {
            return Err(Error::Corrupt { what: format!("invalid snapshot name {name:?}") });
        }
        let path = self.dir.join(format!("tmp-{name}.incoming"));
        let file = File::create(&path).map_err(Error::io(&path))?;
        Ok((path, file))
    }

    /// Accepts a fully received packed snapshot: checks its digest, unpacks it into this store's
    /// snapshot `name`, saves its meta. The packed file is removed either way.
    pub fn accept(&self, received: &Path, name: &str, sha256: &[u8; 32], meta: &[u8]) -> Result<StoredSnapshot, Error> {
        let checked = check_digest(received, sha256, name).and_then(|()| self.unpack_into_place(received, name));
        let _ = std::fs::remove_file(received);
        checked?;
        self.finish(name, meta)
    }

    /// Unpacks a packed snapshot into `<name>.ckpt`, through a temporary directory.
    fn unpack_into_place(&self, packed: &Path, name: &str) -> Result<(), Error> {
        let unpack = self.dir.join(format!("tmp-{name}.unpack"));
        remove_any(&unpack)?;
        let result = unpack_to(packed, &unpack).and_then(|root| {
            let target = self.checkpoint_path(name);
            remove_any(&target)?;
            std::fs::rename(&root, &target).map_err(Error::io(&target))
        });
        let _ = remove_any(&unpack);
        result
    }

    fn finish(&self, name: &str, meta: &[u8]) -> Result<StoredSnapshot, Error> {
        let meta_path = self.meta_path(name);
        let tmp = self.dir.join(format!("tmp-{name}.meta"));
        {
            let mut f = File::create(&tmp).map_err(Error::io(&tmp))?;
            f.write_all(meta).map_err(Error::io(&tmp))?;
            f.sync_all().map_err(Error::io(&tmp))?;
        }
        std::fs::rename(&tmp, &meta_path).map_err(Error::io(&meta_path))?;
        sync_dir(&self.dir)?;
        self.prune()?;
        let group = envelope::group_of(meta, "snapshot meta")?;
        Ok(StoredSnapshot { name: name.to_string(), path: self.checkpoint_path(name), group })
    }

    /// Complete snapshots, oldest first (names sort by their leading log index).
    pub fn list(&self) -> Result<Vec<String>, Error> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&self.dir).map_err(Error::io(&self.dir))? {
            let entry = entry.map_err(Error::io(&self.dir))?;
            let file = entry.file_name().to_string_lossy().to_string();
            if let Some(name) = file.strip_suffix(".meta") {
                if !name.starts_with("tmp-") && self.checkpoint_path(name).is_dir() {
                    names.push(name.to_string());
                }
            }
        }
        names.sort();
        Ok(names)
    }

    /// The newest complete snapshot and its meta bytes.
    pub fn latest(&self) -> Result<Option<(StoredSnapshot, Vec<u8>)>, Error> {
        let Some(name) = self.list()?.pop() else { return Ok(None) };
        let meta_path = self.meta_path(&name);
        let meta = std::fs::read(&meta_path).map_err(Error::io(&meta_path))?;
        let group = envelope::group_of(&meta, "snapshot meta")?;
        Ok(Some((StoredSnapshot { path: self.checkpoint_path(&name), name, group }, meta)))
    }

    fn prune(&self) -> Result<(), Error> {
        let names = self.list()?;
        if names.len() > self.keep {
            for name in &names[..names.len() - self.keep] {
                // The meta first: a checkpoint without one is no snapshot, whatever is left of it.
                let _ = std::fs::remove_file(self.meta_path(name));
                let _ = remove_any(&self.checkpoint_path(name));
            }
        }
        Ok(())
    }

    /// Installs a snapshot as the whole state, atomically. The snapshot stays in this store (a
    /// follower may be sent it later): the state gets links to its table files and copies of the
    /// rest.
    pub fn install(&self, snapshot: &StoredSnapshot, state: &StateStore) -> Result<(), Error> {
        // Issue #19, deliverable 3: the state store holds one group's state, [`SHARD`]'s; another
        // group's keys would land under the wrong prefix (or, checked later, the wrong counters).
        if snapshot.group != SHARD {
            return Err(Error::Corrupt {
                what: format!(
                    "snapshot {} holds the state of {}; this state store holds {SHARD}",
                    snapshot.name, snapshot.group
                ),
            });
        }
        let staged = self.dir.join(format!("tmp-{}.install", snapshot.name));
        remove_any(&staged)?;
        let installed = link_checkpoint(&snapshot.path, &staged).and_then(|()| state.replace_with(&staged));
        let _ = remove_any(&staged);
        installed
    }

    /// Installs a packed archive (a backup's) as the whole state, after checking its digest.
    pub fn install_archive(&self, archive: &Path, sha256: &[u8; 32], state: &StateStore) -> Result<(), Error> {
        let name = format!("archive-{}", unique());
        check_digest(archive, sha256, &name)?;
        let unpack = self.dir.join(format!("tmp-{name}.unpack"));
        let installed = unpack_to(archive, &unpack).and_then(|root| state.replace_with(&root));
        let _ = remove_any(&unpack);
        installed
    }
}

/// Copies a checkpoint directory: table and blob files (immutable once written) as hard links, every
/// other file (CURRENT, MANIFEST, OPTIONS, which RocksDB rewrites when it opens the copy) as a copy.
fn link_checkpoint(from: &Path, to: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(to).map_err(Error::io(to))?;
    for entry in std::fs::read_dir(from).map_err(Error::io(from))? {
        let entry = entry.map_err(Error::io(from))?;
        let name = entry.file_name();
        let (src, dst) = (entry.path(), to.join(&name));
        let name_text = name.to_string_lossy();
        if name_text.ends_with(".sst") || name_text.ends_with(".blob") {
            std::fs::hard_link(&src, &dst).map_err(Error::io(&dst))?;
        } else {
            std::fs::copy(&src, &dst).map_err(Error::io(&dst))?;
        }
    }
    sync_dir(to)
}

fn check_digest(packed: &Path, sha256: &[u8; 32], name: &str) -> Result<(), Error> {
    let (_, actual) = file_digest(packed)?;
    if &actual != sha256 {
        return Err(Error::Corrupt {
            what: format!("snapshot {name}: checksum {} does not match {}", hex::encode(actual), hex::encode(sha256)),
        });
    }
    Ok(())
}

/// Unpacks a packed snapshot into `unpack` and returns the directory holding the checkpoint.
fn unpack_to(packed: &Path, unpack: &Path) -> Result<PathBuf, Error> {
    let file = File::open(packed).map_err(Error::io(packed))?;
    // `unpack` refuses entries that would land outside the directory.
    tar::Archive::new(file).unpack(unpack).map_err(Error::io(unpack))?;
    let root = unpack.join(PACKED_ROOT);
    if !root.is_dir() {
        return Err(Error::Corrupt {
            what: format!("{}: no {PACKED_ROOT}/ directory in the archive", packed.display()),
        });
    }
    sync_tree(&root)?;
    Ok(root)
}

fn sync_tree(dir: &Path) -> Result<(), Error> {
    for entry in std::fs::read_dir(dir).map_err(Error::io(dir))? {
        let path = entry.map_err(Error::io(dir))?.path();
        if path.is_file() {
            File::open(&path).and_then(|f| f.sync_all()).map_err(Error::io(&path))?;
        }
    }
    sync_dir(dir)
}

/// What [`pack`] wrote: its length and SHA-256.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packed {
    pub len: u64,
    pub sha256: [u8; 32],
}

/// Packs a checkpoint directory into `out` as a tar stream (`state/<file>` for each file, in name
/// order, with fixed times and owners, so the same snapshot always packs to the same bytes) and
/// returns its length and SHA-256, computed as the bytes go out: a transfer packs and hashes in
/// one pass, and nothing is written to the sender's disk.
pub fn pack(checkpoint: &Path, out: impl Write) -> Result<Packed, Error> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(checkpoint).map_err(Error::io(checkpoint))? {
        let entry = entry.map_err(Error::io(checkpoint))?;
        if entry.file_type().map_err(Error::io(entry.path()))?.is_file() {
            files.push(entry.file_name());
        }
    }
    files.sort();
    let mut builder = tar::Builder::new(Hashing { inner: out, hasher: Sha256::new(), len: 0 });
    builder.mode(tar::HeaderMode::Deterministic);
    let mut dir = tar::Header::new_gnu();
    dir.set_entry_type(tar::EntryType::Directory);
    dir.set_mode(0o755);
    dir.set_size(0);
    dir.set_mtime(0);
    builder.append_data(&mut dir, PACKED_ROOT, std::io::empty()).map_err(Error::io(checkpoint))?;
    for name in files {
        let path = checkpoint.join(&name);
        let inside = Path::new(PACKED_ROOT).join(&name);
        builder.append_path_with_name(&path, &inside).map_err(Error::io(&path))?;
    }
    let mut hashing = builder.into_inner().map_err(Error::io(checkpoint))?;
    hashing.inner.flush().map_err(Error::io(checkpoint))?;
    Ok(Packed { len: hashing.len, sha256: hashing.hasher.finalize().into() })
}

/// A writer that counts and hashes what passes through it.
struct Hashing<W> {
    inner: W,
    hasher: Sha256,
    len: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Writes a packed archive of the current state into the file `target` (synced), for a backup:
/// `describe` sees the checkpoint (as in [`SnapshotStore::build_with`]) and returns the meta bytes
/// saved beside the archive (`target` with the extension `meta`) and a value passed back.
pub fn write_archive<M>(
    state: &StateStore,
    target: &Path,
    describe: impl FnOnce(&Path) -> Result<(Vec<u8>, M), Error>,
) -> Result<(Packed, M), Error> {
    let dir = target.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let cp = dir.join(format!("tmp-{}.checkpoint", unique()));
    remove_any(&cp)?;
    state.checkpoint_to(&cp)?;
    let written = (|| {
        let (meta, extra) = describe(&cp)?;
        let file = File::create(target).map_err(Error::io(target))?;
        let mut out = std::io::BufWriter::new(file);
        let packed = pack(&cp, &mut out)?;
        let file = out.into_inner().map_err(|e| Error::io(target)(e.into_error()))?;
        file.sync_all().map_err(Error::io(target))?;
        let meta_path = target.with_extension("meta");
        let mut f = File::create(&meta_path).map_err(Error::io(&meta_path))?;
        f.write_all(&meta).and_then(|()| f.sync_all()).map_err(Error::io(&meta_path))?;
        sync_dir(dir)?;
        Ok((packed, extra))
    })();
    let _ = remove_any(&cp);
    written
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
