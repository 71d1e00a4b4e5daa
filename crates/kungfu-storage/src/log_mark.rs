//! The acknowledged mark: a small file beside the raft log's RocksDB (`log/ACKNOWLEDGED`) that
//! records how far that log was synced and the last vote saved, apart from the write-ahead log it
//! describes (issue #33).
//!
//! Raft's safety assumes a voter never forgets what it acknowledged: an entry counted towards a
//! commit, or a vote granted. RocksDB recovers a damaged write-ahead log silently to its last whole
//! record, so a disk that lost acknowledged writes yields a shorter log that looks healthy. The
//! mark is written by the log's own writer after each sync, once openraft has heard the entries are
//! durable and before the next sync, so a log that restarts behind its mark is known to have lost
//! what it acknowledged (all but, at most, what one mark write's time acknowledged last).
//!
//! Format: a file of two 4 KiB slots, written alternately in place (`pwrite` then `fdatasync`; the
//! file never changes size, so no metadata must be synced). Each slot holds a magic, a sequence
//! number, the length of its payload, the payload and the first 8 bytes of the SHA-256 of all of
//! them. A reader takes the valid slot with the higher sequence. A write torn by a crash leaves the
//! other slot whole, and that older slot claims less, never more, than was synced: the torn write's
//! mark had not been reported yet. One fsync per write and no rename: a write-to-temp, fsync,
//! rename and directory fsync would cost three syncs per batch of appends.
//!
//! The store knows bytes only: the payload is the encoded last synced log id and vote, opaque
//! here, read and compared by the raft crate.

use crate::envelope;
use crate::error::Error;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The mark file's name inside the log store's directory. Not a RocksDB name, so RocksDB leaves it.
pub const MARK_FILE: &str = "ACKNOWLEDGED";
const SLOT_BYTES: usize = 4096;
const MAGIC: &[u8; 4] = b"KFAK";
/// Magic, sequence number, payload length.
const HEADER_BYTES: usize = 4 + 8 + 4;
const CHECK_BYTES: usize = 8;
/// The largest payload a slot holds.
const MAX_PAYLOAD_BYTES: usize = SLOT_BYTES - HEADER_BYTES - CHECK_BYTES;

/// What the mark records: both encoded by the raft crate, opaque here.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marks {
    /// The last log id the log store synced (after any truncation, lowered to its new end).
    pub synced: Option<Vec<u8>>,
    /// The last vote saved.
    pub vote: Option<Vec<u8>>,
}

/// What [`MarkFile::open`] found.
#[derive(Debug)]
pub enum Found {
    /// No mark file: a new log, or one written by a release without marks.
    Missing,
    /// The newest whole slot.
    Marks(Marks),
    /// Neither slot is whole: the mark itself is damaged; what the log acknowledged is unknown.
    Unreadable(String),
}

/// The open mark file. One writer: the log's writer thread (and the start-up before it runs).
#[derive(Debug)]
pub struct MarkFile {
    file: File,
    path: PathBuf,
    /// The sequence number of the newest slot written; the next write goes to the other slot.
    seq: u64,
}

impl MarkFile {
    /// The mark file of the log store in `log_dir`.
    pub fn path_in(log_dir: &Path) -> PathBuf {
        log_dir.join(MARK_FILE)
    }

    /// Reads the mark file in `log_dir`, if any, and opens it for writing. A missing file is
    /// created (sized, synced, its directory synced) and holds nothing until the first write.
    pub fn open(log_dir: &Path) -> Result<(MarkFile, Found), Error> {
        let path = MarkFile::path_in(log_dir);
        let existed = path.exists();
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path);
        let file = file.map_err(Error::io(&path))?;
        if !existed {
            // Zeros written, not a sparse `set_len`: both slots' blocks are allocated now, so a
            // later overwrite in place needs no space (a full disk cannot fail the mark).
            file.write_all_at(&[0u8; 2 * SLOT_BYTES], 0).map_err(Error::io(&path))?;
            file.sync_all().map_err(Error::io(&path))?;
            File::open(log_dir).and_then(|d| d.sync_all()).map_err(Error::io(log_dir))?;
            return Ok((MarkFile { file, path, seq: 0 }, Found::Missing));
        }
        let mut slots = [vec![0u8; SLOT_BYTES], vec![0u8; SLOT_BYTES]];
        let mut errors = Vec::new();
        let mut best: Option<(u64, Marks)> = None;
        for (i, slot) in slots.iter_mut().enumerate() {
            let read = file.read_exact_at(slot, (i * SLOT_BYTES) as u64);
            match read.map_err(|e| e.to_string()).and_then(|()| parse(slot)) {
                Ok(Some((seq, marks))) if best.as_ref().is_none_or(|(s, _)| seq > *s) => best = Some((seq, marks)),
                Ok(_) => {}
                Err(e) => errors.push(format!("slot {i}: {e}")),
            }
        }
        match best {
            Some((seq, marks)) => Ok((MarkFile { file, path, seq }, Found::Marks(marks))),
            // Both slots zero: created, never written (a crash right after creation).
            None if errors.is_empty() => Ok((MarkFile { file, path, seq: 0 }, Found::Missing)),
            None => Ok((MarkFile { file, path, seq: 0 }, Found::Unreadable(errors.join("; ")))),
        }
    }

    /// Where the mark lives (named in every report of damage).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records `marks`, durable when this returns (one `fdatasync`).
    pub fn write(&mut self, marks: &Marks) -> Result<(), Error> {
        let payload = envelope::encode(marks);
        if payload.len() > MAX_PAYLOAD_BYTES {
            return Err(Error::Corrupt { what: format!("a mark of {} bytes does not fit its slot", payload.len()) });
        }
        let seq = self.seq + 1;
        let mut slot = Vec::with_capacity(SLOT_BYTES);
        slot.extend_from_slice(MAGIC);
        slot.extend_from_slice(&seq.to_le_bytes());
        slot.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        slot.extend_from_slice(&payload);
        let check = Sha256::digest(&slot);
        slot.extend_from_slice(&check[..CHECK_BYTES]);
        let offset = (seq % 2) * SLOT_BYTES as u64;
        self.file.write_all_at(&slot, offset).map_err(Error::io(&self.path))?;
        self.file.sync_data().map_err(Error::io(&self.path))?;
        self.seq = seq;
        Ok(())
    }
}

/// A slot's sequence number and marks; None for a slot never written (all zero).
fn parse(slot: &[u8]) -> Result<Option<(u64, Marks)>, String> {
    if slot.iter().all(|b| *b == 0) {
        return Ok(None);
    }
    if &slot[..4] != MAGIC {
        return Err("no mark here (wrong magic)".into());
    }
    let seq = u64::from_le_bytes(slot[4..12].try_into().map_err(|_| "short slot")?);
    let len = u32::from_le_bytes(slot[12..16].try_into().map_err(|_| "short slot")?) as usize;
    if len > MAX_PAYLOAD_BYTES {
        return Err(format!("a payload of {len} bytes"));
    }
    let end = HEADER_BYTES + len;
    let check = Sha256::digest(&slot[..end]);
    if check[..CHECK_BYTES] != slot[end..end + CHECK_BYTES] {
        return Err(format!("checksum mismatch (sequence {seq})"));
    }
    let marks = envelope::decode(&slot[HEADER_BYTES..end], "acknowledged mark").map_err(|e| e.to_string())?;
    Ok(Some((seq, marks)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marks(synced: u8, vote: u8) -> Marks {
        Marks { synced: Some(vec![synced; 3]), vote: Some(vec![vote; 2]) }
    }

    #[test]
    fn a_mark_written_is_read_back_after_a_reopen_and_the_newest_write_wins() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut file, found) = MarkFile::open(dir.path()).expect("open");
        assert!(matches!(found, Found::Missing));
        for i in 1..=5 {
            file.write(&marks(i, i + 10)).expect("write");
        }
        drop(file);
        let (mut file, found) = MarkFile::open(dir.path()).expect("reopen");
        assert!(matches!(&found, Found::Marks(m) if *m == marks(5, 15)), "{found:?}");
        file.write(&marks(6, 16)).expect("write after reopen");
        let (_, found) = MarkFile::open(dir.path()).expect("reopen");
        assert!(matches!(&found, Found::Marks(m) if *m == marks(6, 16)), "{found:?}");
    }

    #[test]
    fn a_torn_newest_slot_falls_back_to_the_older_mark_and_two_torn_slots_are_unreadable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut file, _) = MarkFile::open(dir.path()).expect("open");
        file.write(&marks(1, 1)).expect("write"); // seq 1: slot 1
        file.write(&marks(2, 2)).expect("write"); // seq 2: slot 0
        drop(file);
        let path = MarkFile::path_in(dir.path());
        let tear = |offset: u64| {
            let f = OpenOptions::new().write(true).open(&path).expect("open");
            f.write_all_at(&[0xff; 7], offset + HEADER_BYTES as u64 + 1).expect("tear");
        };
        tear(0);
        let (_, found) = MarkFile::open(dir.path()).expect("reopen");
        assert!(matches!(&found, Found::Marks(m) if *m == marks(1, 1)), "the older, smaller claim: {found:?}");
        tear(SLOT_BYTES as u64);
        let (_, found) = MarkFile::open(dir.path()).expect("reopen");
        assert!(matches!(&found, Found::Unreadable(why) if why.contains("checksum")), "{found:?}");
    }
}
