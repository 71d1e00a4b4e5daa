//! Errors of the storage layer. Each says what is wrong and what an operator can do about it.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("RocksDB error in the {store} store: {source}")]
    Rocks {
        store: &'static str,
        #[source]
        source: rocksdb::Error,
    },
    #[error("I/O error at {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "data directory {path} belongs to cluster {found:?}, not {expected:?}; point the node at its own data directory"
    )]
    ClusterMismatch { path: PathBuf, found: String, expected: String },
    #[error("data directory {path} belongs to node {found}, not node {expected}; node ids are never reused")]
    NodeMismatch { path: PathBuf, found: u64, expected: u64 },
    #[error(
        "data directory {path} is incomplete: {missing} is missing; restore it from a backup, or remove this node from the cluster and add it again with an empty directory"
    )]
    Incomplete { path: PathBuf, missing: &'static str },
    #[error(
        "{path} is not empty and has no IDENTITY file; refusing to initialise over existing files (use an empty directory)"
    )]
    NotADataDir { path: PathBuf },
    #[error("no data directory at {path}; start the node with initialisation allowed to create one")]
    Missing { path: PathBuf },
    #[error("stored value is corrupt ({what}); the store cannot be trusted: restore from a backup")]
    Corrupt { what: String },
    /// A backup that cannot be written or restored; the message says why and what to do.
    #[error("{0}")]
    Backup(String),
    #[error("unsupported on-disk format {found} in {path} (this build reads format {supported})")]
    Format { path: PathBuf, found: u32, supported: u32 },
    /// RocksDB found one of a store's files corrupt (a checksum that does not match in a table
    /// file or a manifest, a file it cannot parse): the store is not opened or read, and the node's
    /// data directory cannot be trusted. The repair is the operator's wipe and rejoin.
    #[error("the {store} store{} is damaged: {detail}; {}", at(.path), DAMAGED_NEXT_STEP)]
    Damaged { store: &'static str, path: Option<PathBuf>, detail: rocksdb::Error },
    /// A write of the raft log could not be made durable (a failed sync, or the log writer is
    /// gone). Nothing written after it is acknowledged; the node must restart, and its disk be
    /// checked.
    #[error("the raft log could not be made durable: {0}; check the disk and restart the node")]
    NotDurable(String),
}

/// What to do about a store RocksDB reports corrupt ([`Error::Damaged`]).
pub const DAMAGED_NEXT_STEP: &str = "this node's data directory cannot be trusted: wipe it and rejoin the node \
     (remove it from the voters, stop it, move its data directory away, start it with an empty one and \
     bootstrap = false, add it back as a learner and a voter: docs/operations.md, \"Damaged data directory\")";

fn at(path: &Option<PathBuf>) -> String {
    path.as_ref().map(|p| format!(" at {}", p.display())).unwrap_or_default()
}

impl Error {
    /// A RocksDB error of `store`: [`Error::Damaged`] when RocksDB reports corruption.
    pub(crate) fn rocks(store: &'static str) -> impl FnOnce(rocksdb::Error) -> Error {
        move |source| {
            if source.kind() == rocksdb::ErrorKind::Corruption {
                Error::Damaged { store, path: None, detail: source }
            } else {
                Error::Rocks { store, source }
            }
        }
    }

    /// [`Error::rocks`] for the opening of the store at `path` (the error names it).
    pub(crate) fn rocks_at(store: &'static str, path: &std::path::Path) -> impl FnOnce(rocksdb::Error) -> Error {
        let path = path.to_path_buf();
        move |source| {
            if source.kind() == rocksdb::ErrorKind::Corruption {
                Error::Damaged { store, path: Some(path), detail: source }
            } else {
                Error::Rocks { store, source }
            }
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { path, source }
    }
}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> std::io::Error {
        std::io::Error::other(e)
    }
}
