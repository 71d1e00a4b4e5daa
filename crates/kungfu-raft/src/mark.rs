//! What this node acknowledged, and whether its log still holds it (issue #33).
//!
//! Raft's safety rests on voter durability: a node that acknowledged an entry (so a leader counted
//! it towards a commit) or granted a vote never forgets it. A disk that loses acknowledged writes
//! breaks that silently: RocksDB recovers a cut write-ahead log to its last whole record, the node
//! restarts with a shorter log, and a majority without the lost entries could elect it, losing
//! acknowledged writes and reusing their entry numbers.
//!
//! [`AckMark`] keeps, in `log/ACKNOWLEDGED` ([`kungfu_storage::MarkFile`]), the last log id the
//! log synced and the last vote, written on the log's writer thread:
//!
//! - after each WAL sync of appends, once openraft has heard they are durable and before the next
//!   sync, raised to the last of them (never lowered by an append). After, not before: recorded
//!   before, its `fdatasync` sat on every acknowledged write's latency (a fifth of a lone writer's
//!   rate, docs/benchmarks.md). So a loss of only the entries acknowledged within one mark write
//!   before a crash goes unseen; a loss reaching any earlier entry is found;
//! - with every vote, after the vote's synced write and before `save_vote` returns;
//! - before a truncation, lowered to the truncation point, while the node is whole: the entries a
//!   leader removes were never committed (a leader holds every committed entry);
//! - purges leave it: a purge removes only what the state holds durably.
//!
//! At start the log's end (its last entry, or its purge mark when empty) is compared with the
//! mark. A log that ends before it has lost entries it acknowledged: the node is **damaged**. A
//! damaged node does not vote, does not campaign, and keeps the mark where it is (a truncation
//! does not lower it: the node cannot tell a truncated entry from a lost one), but accepts a
//! leader's entries; once its log again reaches the mark it is whole, says so once, and votes and
//! campaigns again. Raft's log order makes "reaches" exact: a log whose last id is at or past the
//! mark either holds the marked entry (same id, same prefix) or ends in a later term, whose leader
//! held every committed entry before it.
//!
//! A stored vote older than the marked one is restored from the mark at start: the vote is all
//! that must not be forgotten of it, and the mark holds it whole.

use crate::types::{LogId, Vote};
use kungfu_storage::log_mark::{Found, Marks};
use kungfu_storage::{MarkFile, envelope};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Why a node is damaged: what it reports until it is whole again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// The mark file.
    pub file: PathBuf,
    /// What the mark says was acknowledged; None when the mark itself is unreadable.
    pub mark: Option<LogId>,
    /// Where the log ended when the damage was found.
    pub log_end: Option<LogId>,
    /// Why, in words.
    pub why: String,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "repairing: {}; this node neither votes nor campaigns until a leader sends it the entries it lost \
             (start it with --accept-data-loss to accept the loss, or wipe its data directory and rejoin it: \
             docs/operations.md, \"Damaged data directory\")",
            self.why
        )
    }
}

/// Words for a log position.
pub fn position(l: &Option<LogId>) -> String {
    match l {
        Some(l) => format!("entry {} of term {}", l.index, l.leader_id.term),
        None => "no entry".into(),
    }
}

struct Inner {
    file: MarkFile,
    synced: Option<LogId>,
    vote: Option<Vote>,
    /// The mark file was unreadable: nothing is written to it (that would make a guess look like a
    /// record) and no log end heals the node; only the operator's override does.
    unknown: bool,
}

/// The acknowledged mark of one node's log. Shared by the log (its writer thread writes it), the
/// raft service (which refuses votes while damaged) and the node (status, elections).
pub struct AckMark {
    inner: Mutex<Inner>,
    path: PathBuf,
    /// Some while damaged; cleared once, when the log reaches the mark or the loss is accepted.
    damage: tokio::sync::watch::Sender<Option<Damage>>,
}

impl std::fmt::Debug for AckMark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AckMark({})", self.path.display())
    }
}

fn store_error(path: &Path, what: String) -> kungfu_storage::Error {
    kungfu_storage::Error::Corrupt { what: format!("{}: {what}", path.display()) }
}

/// Whether the log ending at `end` holds everything up to `mark`.
fn reaches(end: &Option<LogId>, mark: &Option<LogId>) -> bool {
    end >= mark
}

impl AckMark {
    /// Opens the mark in `log_dir` and compares it with the log, which ends at `log_end` and holds
    /// `vote`. Returns the mark and the vote to restore into the log store, if the store's is older
    /// than the marked one. A missing mark (a new log, or one of a release without marks) is
    /// written from the log as it is.
    pub fn open(
        log_dir: &Path,
        log_end: Option<LogId>,
        vote: Option<Vote>,
    ) -> Result<(AckMark, Option<Vote>), kungfu_storage::Error> {
        let (mut file, found) = MarkFile::open(log_dir)?;
        let path = file.path().to_path_buf();
        let mut restore = None;
        let unknown = matches!(found, Found::Unreadable(_));
        let (synced, marked_vote, damage) = match found {
            Found::Missing => {
                let marks =
                    Marks { synced: log_end.as_ref().map(envelope::encode), vote: vote.as_ref().map(envelope::encode) };
                file.write(&marks)?;
                if log_end.is_some() {
                    tracing::info!(file = %path.display(), "no acknowledged mark: written from the raft log ({})", position(&log_end));
                }
                (log_end.clone(), vote.clone(), None)
            }
            Found::Marks(marks) => {
                let synced: Option<LogId> = match &marks.synced {
                    Some(b) => {
                        Some(envelope::decode(b, "acknowledged mark").map_err(|e| store_error(&path, e.to_string()))?)
                    }
                    None => None,
                };
                let marked_vote: Option<Vote> = match &marks.vote {
                    Some(b) => {
                        Some(envelope::decode(b, "acknowledged vote").map_err(|e| store_error(&path, e.to_string()))?)
                    }
                    None => None,
                };
                // Raft's voter durability (issue #33): a vote granted is never forgotten. The mark
                // holds it whole, so the log store gets it back before raft reads it.
                if let Some(marked) = &marked_vote
                    && vote.as_ref().is_none_or(|v| matches!(marked.partial_cmp(v), Some(std::cmp::Ordering::Greater)))
                {
                    tracing::error!(
                        file = %path.display(),
                        "the raft log's vote ({vote:?}) is older than the vote this node saved ({marked:?}): \
                         its write-ahead log lost acknowledged writes; the vote is restored from {}",
                        path.display()
                    );
                    restore = Some(marked.clone());
                }
                let damage = (!reaches(&log_end, &synced)).then(|| Damage {
                    file: path.clone(),
                    mark: synced.clone(),
                    log_end: log_end.clone(),
                    why: format!(
                        "the raft log ends at {} but {} records that this node acknowledged up to {}: \
                         its write-ahead log lost acknowledged writes",
                        position(&log_end),
                        path.display(),
                        position(&synced)
                    ),
                });
                (synced, marked_vote, damage)
            }
            Found::Unreadable(why) => {
                let damage = Damage {
                    file: path.clone(),
                    mark: None,
                    log_end: log_end.clone(),
                    why: format!(
                        "{} is unreadable ({why}), so what this node acknowledged is unknown (the raft log ends at {})",
                        path.display(),
                        position(&log_end)
                    ),
                };
                (None, vote.clone(), Some(damage))
            }
        };
        if let Some(d) = &damage {
            // Logged once here, where it is found; the status and the metric repeat it.
            tracing::error!(file = %path.display(), "the raft log is damaged, {d}");
        }
        let vote = restore.clone().or(marked_vote);
        let mark = AckMark {
            inner: Mutex::new(Inner { file, synced, vote, unknown }),
            path,
            damage: tokio::sync::watch::Sender::new(damage),
        };
        Ok((mark, restore))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn write(inner: &mut Inner) -> Result<(), kungfu_storage::Error> {
        if inner.unknown {
            return Ok(());
        }
        let marks = Marks {
            synced: inner.synced.as_ref().map(envelope::encode),
            vote: inner.vote.as_ref().map(envelope::encode),
        };
        inner.file.write(&marks)
    }

    /// The mark file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What is damaged, while the node is.
    pub fn damage(&self) -> Option<Damage> {
        self.damage.borrow().clone()
    }

    /// Watches the damage (cleared once, when the node is whole again).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<Option<Damage>> {
        self.damage.subscribe()
    }

    /// The last log id and vote recorded.
    pub fn marked(&self) -> (Option<LogId>, Option<Vote>) {
        let inner = self.lock();
        (inner.synced.clone(), inner.vote.clone())
    }

    /// A sync made every entry up to `last` durable: raise the mark to it, durably, before any of
    /// them is reported flushed (called on the log's writer thread).
    pub fn synced(&self, last: LogId) -> Result<(), kungfu_storage::Error> {
        let mut inner = self.lock();
        let end = Some(last);
        if end > inner.synced {
            inner.synced = end.clone();
            AckMark::write(&mut inner)?;
        }
        drop(inner);
        self.reached(&end);
        Ok(())
    }

    /// A vote was saved in the log store: record it too, before `save_vote` returns.
    pub fn vote_saved(&self, vote: &Vote) -> Result<(), kungfu_storage::Error> {
        let mut inner = self.lock();
        if inner.vote.as_ref() != Some(vote) {
            inner.vote = Some(vote.clone());
            AckMark::write(&mut inner)?;
        }
        Ok(())
    }

    /// The log is about to lose every entry after `after`: while whole, lower the mark to it first,
    /// durably, so a crash between the two never leaves a mark past a legitimate end. While damaged
    /// the mark stays: the node cannot tell a removed entry from one it lost.
    pub fn before_truncate(&self, after: &Option<LogId>) -> Result<(), kungfu_storage::Error> {
        if self.damage.borrow().is_some() {
            return Ok(());
        }
        let mut inner = self.lock();
        if *after < inner.synced {
            inner.synced = after.clone();
            AckMark::write(&mut inner)?;
        }
        Ok(())
    }

    /// The log now ends at `end` (after a purge: a snapshot installed past it). Whole again if it
    /// reaches the mark.
    pub fn reached(&self, end: &Option<LogId>) {
        if self.damage.borrow().is_none() {
            return;
        }
        let (mark, unknown) = {
            let inner = self.lock();
            (inner.synced.clone(), inner.unknown)
        };
        if unknown || !reaches(end, &mark) {
            return;
        }
        let healed = self.damage.send_if_modified(|d| d.take().is_some());
        if healed {
            tracing::info!(
                file = %self.path.display(),
                "the raft log is whole again: it reaches {} ({}), which this node acknowledged; it votes and campaigns again",
                position(&mark),
                self.path.display()
            );
        }
    }

    /// The operator accepts the damage (`--accept-data-loss`): the mark is rewritten to the log's
    /// end, and the node votes and campaigns again with what it has. Raft's guarantee for the
    /// entries it lost rests on the other nodes from now on.
    pub fn accept_data_loss(&self, log_end: Option<LogId>) -> Result<(), kungfu_storage::Error> {
        let Some(damage) = self.damage() else { return Ok(()) };
        let mut inner = self.lock();
        inner.synced = log_end.clone();
        inner.unknown = false;
        AckMark::write(&mut inner)?;
        drop(inner);
        tracing::warn!(
            file = %self.path.display(),
            "the operator accepted the loss of acknowledged entries (--accept-data-loss): {} now records {} \
             instead of {}; this node votes and campaigns again",
            self.path.display(),
            position(&log_end),
            position(&damage.mark)
        );
        self.damage.send_replace(None);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(term: u64, index: u64) -> Option<LogId> {
        Some(openraft::LogId::new(
            <openraft::alias::LeaderIdOf<crate::types::TypeConfig> as openraft::vote::RaftLeaderIdExt>::new_committed(
                term, 1,
            ),
            index,
        ))
    }

    fn open(dir: &Path, end: Option<LogId>, vote: Option<Vote>) -> (AckMark, Option<Vote>) {
        AckMark::open(dir, end, vote).expect("open")
    }

    #[test]
    fn a_mark_is_read_back_and_a_log_at_or_past_it_is_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mark, _) = open(dir.path(), None, None);
        assert!(mark.damage().is_none(), "a new log is whole");
        mark.synced(id(1, 5).expect("id")).expect("synced");
        mark.vote_saved(&Vote::new(2, 1)).expect("vote");
        mark.synced(id(1, 3).expect("id")).expect("an older sync never lowers it");
        drop(mark);
        let (mark, restore) = open(dir.path(), id(1, 5), Some(Vote::new(2, 1)));
        assert_eq!(mark.marked(), (id(1, 5), Some(Vote::new(2, 1))));
        assert!(mark.damage().is_none() && restore.is_none());
        drop(mark);
        let (mark, _) = open(dir.path(), id(1, 9), Some(Vote::new(2, 1)));
        assert!(mark.damage().is_none(), "unsynced entries that survived are more, not less");
        drop(mark);
        let (mark, _) = open(dir.path(), id(2, 4), Some(Vote::new(2, 1)));
        assert!(mark.damage().is_none(), "a log ending in a later term holds what the mark names");
    }

    #[test]
    fn a_log_behind_its_mark_is_damaged_until_it_reaches_the_mark_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mark, _) = open(dir.path(), None, None);
        mark.synced(id(3, 40).expect("id")).expect("synced");
        drop(mark);
        let (mark, _) = open(dir.path(), id(3, 20), None);
        let damage = mark.damage().expect("damaged");
        assert_eq!((damage.mark.clone(), damage.log_end.clone()), (id(3, 40), id(3, 20)));
        assert!(damage.to_string().contains(&mark.path().display().to_string()), "{damage}");
        let watch = mark.subscribe();
        // A truncation while damaged does not lower the mark; entries short of it do not heal.
        mark.before_truncate(&id(3, 10)).expect("truncate");
        mark.synced(id(3, 39).expect("id")).expect("synced");
        assert!(mark.damage().is_some());
        assert_eq!(mark.marked().0, id(3, 40));
        mark.synced(id(3, 40).expect("id")).expect("synced");
        assert!(mark.damage().is_none(), "whole once the log reaches the mark");
        assert!(watch.has_changed().expect("watch"), "the node hears of it");
        // Damaged across a restart too, until healed: a restart mid-repair still knows.
        drop(mark);
        let (mark, _) = open(dir.path(), id(3, 40), None);
        assert!(mark.damage().is_none());
    }

    #[test]
    fn a_truncation_lowers_the_mark_durably_before_it_so_the_shorter_log_is_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mark, _) = open(dir.path(), None, None);
        mark.synced(id(1, 10).expect("id")).expect("synced");
        mark.before_truncate(&id(1, 6)).expect("truncate");
        assert_eq!(mark.marked().0, id(1, 6));
        drop(mark);
        // As if the process died right after the truncation.
        let (mark, _) = open(dir.path(), id(1, 6), None);
        assert!(mark.damage().is_none(), "{:?}", mark.damage());
    }

    #[test]
    fn an_older_stored_vote_is_restored_from_the_mark() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mark, _) = open(dir.path(), None, None);
        mark.vote_saved(&Vote::new(7, 2)).expect("vote");
        drop(mark);
        let (_, restore) = open(dir.path(), None, Some(Vote::new(5, 1)));
        assert_eq!(restore, Some(Vote::new(7, 2)));
    }

    #[test]
    fn accepting_the_loss_rewrites_the_mark_to_the_log_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mark, _) = open(dir.path(), None, None);
        mark.synced(id(2, 30).expect("id")).expect("synced");
        drop(mark);
        let (mark, _) = open(dir.path(), id(2, 12), None);
        assert!(mark.damage().is_some());
        mark.accept_data_loss(id(2, 12)).expect("accept");
        assert!(mark.damage().is_none());
        drop(mark);
        let (mark, _) = open(dir.path(), id(2, 12), None);
        assert!(mark.damage().is_none(), "accepted for good");
        assert_eq!(mark.marked().0, id(2, 12));
    }

    #[test]
    fn an_unreadable_mark_is_damage_naming_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mark, _) = open(dir.path(), None, None);
        mark.synced(id(1, 3).expect("id")).expect("synced");
        drop(mark);
        std::fs::write(MarkFile::path_in(dir.path()), vec![0xab; 8192]).expect("scribble");
        let (mark, _) = open(dir.path(), id(1, 3), None);
        let damage = mark.damage().expect("damaged");
        assert!(damage.why.contains("ACKNOWLEDGED") && damage.why.contains("unreadable"), "{damage}");
        mark.synced(id(1, 9).expect("id")).expect("synced");
        assert!(mark.damage().is_some(), "no log end heals an unknown mark");
        mark.accept_data_loss(id(1, 9)).expect("accept");
        drop(mark);
        let (mark, _) = open(dir.path(), id(1, 9), None);
        assert!(mark.damage().is_none(), "the override rewrote the mark");
    }
}
