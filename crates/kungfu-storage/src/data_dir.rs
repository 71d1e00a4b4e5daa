//! Opening a node's data directory. A directory is created only when it is empty (or absent) and
//! creation is allowed; one that belongs to another cluster or node, or that is missing a store,
//! is refused with an error that says what to do — never silently re-initialised.

use crate::error::Error;
use crate::log_store::LogStore;
use crate::snapshot::SnapshotStore;
use crate::state_store::{StateStore, sync_dir};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The on-disk format this build writes and reads.
pub const FORMAT: u32 = 1;

/// Who a data directory belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub cluster_id: String,
    pub node_id: u64,
}

impl Identity {
    fn render(&self) -> String {
        format!("format = {FORMAT}\ncluster_id = {:?}\nnode_id = {}\n", self.cluster_id, self.node_id)
    }

    fn parse(path: &Path, text: &str) -> Result<(Identity, u32), Error> {
        let mut cluster = None;
        let mut node = None;
        let mut format = None;
        for line in text.lines() {
            let Some((k, v)) = line.split_once('=') else { continue };
            let v = v.trim();
            match k.trim() {
                "format" => format = v.parse::<u32>().ok(),
                "cluster_id" => cluster = Some(v.trim_matches('"').to_string()),
                "node_id" => node = v.parse::<u64>().ok(),
                _ => {}
            }
        }
        match (cluster, node, format) {
            (Some(cluster_id), Some(node_id), Some(format)) => Ok((Identity { cluster_id, node_id }, format)),
            _ => Err(Error::Corrupt { what: format!("{} is not a valid IDENTITY file", path.display()) }),
        }
    }
}

/// Whether opening may create a new data directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Create the directory if it is absent or empty; open it otherwise.
    CreateIfEmpty,
    /// The directory must already exist (a restart of an existing member).
    MustExist,
}

/// The stores of an opened data directory.
#[derive(Debug)]
pub struct Stores {
    pub identity: Identity,
    pub log: LogStore,
    pub state: StateStore,
    pub snapshots: SnapshotStore,
    /// True when this open created the directory.
    pub created: bool,
}

/// The bytes of each part of a data directory (issue #36: an operator sees which part grows).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// `log/`: the raft log's RocksDB (write-ahead log, table files, RocksDB's own small files).
    pub log: u64,
    /// `state/` (and a snapshot being installed beside it, `state.*`): the protocol state.
    pub state: u64,
    /// `snapshots/`: the snapshot archives kept, and one being built or received.
    pub snapshots: u64,
    /// Everything else (`IDENTITY`, files a person left there).
    pub other: u64,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.log + self.state + self.snapshots + self.other
    }
}

/// The bytes of every file under `path` (a file itself counts its own). Files that vanish during
/// the walk, as compaction and snapshot pruning remove them, are skipped; symbolic links are not
/// followed.
pub fn bytes_under(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if meta.is_file() {
        return meta.len();
    }
    if !meta.is_dir() {
        return 0;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries.flatten().map(|e| bytes_under(&e.path())).sum()
}

/// A node's data directory.
#[derive(Clone, Debug)]
pub struct DataDir {
    pub root: PathBuf,
}

impl DataDir {
    pub fn new(root: impl Into<PathBuf>) -> DataDir {
        DataDir { root: root.into() }
    }

    fn is_empty(&self) -> Result<bool, Error> {
        match std::fs::read_dir(&self.root) {
            Ok(mut it) => Ok(it.next().is_none()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
            Err(e) => Err(Error::Io { path: self.root.clone(), source: e }),
        }
    }

    /// The bytes of each part now (a walk of the directory: it reads metadata, no data). A
    /// missing directory is all zeros.
    pub fn usage(&self) -> Usage {
        let mut usage = Usage::default();
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return usage;
        };
        for entry in entries.flatten() {
            let bytes = bytes_under(&entry.path());
            let name = entry.file_name();
            let name = name.to_string_lossy();
            match name.as_ref() {
                "log" => usage.log += bytes,
                "snapshots" => usage.snapshots += bytes,
                n if n == "state" || n.starts_with("state.") => usage.state += bytes,
                _ => usage.other += bytes,
            }
        }
        usage
    }

    /// Opens (or, when allowed and empty, creates) the data directory for `identity`.
    pub fn open(&self, identity: &Identity, mode: OpenMode, keep_snapshots: usize) -> Result<Stores, Error> {
        let id_path = self.root.join("IDENTITY");
        let log_path = self.root.join("log");
        let state_path = self.root.join("state");
        let created = if id_path.exists() {
            let text = std::fs::read_to_string(&id_path).map_err(Error::io(&id_path))?;
            let (found, format) = Identity::parse(&id_path, &text)?;
            if format != FORMAT {
                return Err(Error::Format { path: id_path, found: format, supported: FORMAT });
            }
            if found.cluster_id != identity.cluster_id {
                return Err(Error::ClusterMismatch {
                    path: self.root.clone(),
                    found: found.cluster_id,
                    expected: identity.cluster_id.clone(),
                });
            }
            if found.node_id != identity.node_id {
                return Err(Error::NodeMismatch {
                    path: self.root.clone(),
                    found: found.node_id,
                    expected: identity.node_id,
                });
            }
            if !log_path.exists() {
                return Err(Error::Incomplete { path: self.root.clone(), missing: "the log store (log/)" });
            }
            let state_staged = self.root.join("state.incoming");
            if !state_path.exists() && !state_staged.exists() {
                return Err(Error::Incomplete { path: self.root.clone(), missing: "the state store (state/)" });
            }
            false
        } else {
            if !self.is_empty()? {
                return Err(Error::NotADataDir { path: self.root.clone() });
            }
            if mode == OpenMode::MustExist {
                return Err(Error::Missing { path: self.root.clone() });
            }
            std::fs::create_dir_all(&self.root).map_err(Error::io(&self.root))?;
            true
        };
        let log = LogStore::open(&log_path, created)?;
        let state = StateStore::open(&state_path, created)?;
        let snapshots = SnapshotStore::open(&self.root.join("snapshots"), keep_snapshots)?;
        if created {
            // The identity is written last: a directory without it was never complete.
            let tmp = self.root.join("IDENTITY.tmp");
            let mut f = std::fs::File::create(&tmp).map_err(Error::io(&tmp))?;
            f.write_all(identity.render().as_bytes()).map_err(Error::io(&tmp))?;
            f.sync_all().map_err(Error::io(&tmp))?;
            std::fs::rename(&tmp, &id_path).map_err(Error::io(&id_path))?;
            sync_dir(&self.root)?;
        }
        Ok(Stores { identity: identity.clone(), log, state, snapshots, created })
    }
}
