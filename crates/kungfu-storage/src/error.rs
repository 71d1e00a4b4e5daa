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
    /// A write of the raft log could not be made durable (a failed sync, or the log writer is
    /// gone). Nothing written after it is acknowledged; the node must restart, and its disk be
    /// checked.
    #[error("the raft log could not be made durable: {0}; check the disk and restart the node")]
    NotDurable(String),
}

impl Error {
    pub(crate) fn rocks(store: &'static str) -> impl FnOnce(rocksdb::Error) -> Error {
        move |source| Error::Rocks { store, source }
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
