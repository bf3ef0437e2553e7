//! The segment files of the log's directory: their names, the closed segments kept until a
//! snapshot covers them, compaction, and the spare segment reused in place.
//!
//! Segments are `<data_dir>/wal/<first sequence, 20 digits>.wal`. The active segment is rotated
//! past [`SEGMENT_BYTES`](super::SEGMENT_BYTES); a new segment's directory entry is fsynced before
//! anything in it is acknowledged. At most [`MAX_SEGMENTS`](super::MAX_SEGMENTS) closed segments
//! are kept: past them (snapshots failing for long) requests are refused as `wal_failed` rather
//! than letting replay grow without bound.
//!
//! **Compaction.** Each batch carries its sequence; a snapshot records the highest sequence the
//! state had ingested when captured (inside its checksummed body). Once that snapshot is on disk,
//! closed segments whose entries are all at or below it are deleted ([`Segments::compact`]); a
//! segment that cannot be deleted is logged and left, the next start deletes it. When writes go
//! past the page cache, one of them is kept instead as `wal/spare` and becomes the next segment,
//! written over in place: no block is allocated and the file's size does not change, so
//! `fdatasync` writes no metadata. Each write ends with at least a header of zeros (a zero length
//! ends the log) and replay stops at a sequence below the segment's first, so the spare's old
//! frames are never read again; a spare left at start is deleted. The closed segments are shared
//! by the writer and the snapshot writer under one lock, held for a list edit only.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{io, WalError, WAL_DIR};

/// A segment's file name ends so.
const SEGMENT_SUFFIX: &str = ".wal";
/// A compacted segment kept for reuse, in the log's directory (not read at replay).
pub(super) const SPARE: &str = "spare";

/// A closed segment: its file and the last sequence it holds.
#[derive(Debug, Clone)]
pub(super) struct Closed {
    pub(super) path: PathBuf,
    pub(super) last: u64,
}

/// The closed segments of a log, shared by the writer (which closes them) and the snapshot
/// writer (which deletes them once a snapshot covers them).
#[derive(Debug)]
pub(crate) struct Segments {
    pub(super) dir: PathBuf,
    closed: Mutex<Vec<Closed>>,
    /// Whether one compacted segment is kept as [`SPARE`] for the writer to reuse (it writes
    /// past the page cache).
    recycle: bool,
    /// The compacted segment kept, if any.
    spare: Mutex<Option<PathBuf>>,
}

impl Segments {
    /// The segments of `dir`, `closed` kept from replay; one compacted segment is kept as the
    /// spare when `recycle` (writes go past the page cache).
    pub(super) fn new(dir: PathBuf, closed: Vec<Closed>, recycle: bool) -> Self {
        Self {
            dir,
            closed: Mutex::new(closed),
            recycle,
            spare: Mutex::new(None),
        }
    }

    /// Deletes the closed segments whose entries are all at or below `upto` (a snapshot holding
    /// everything up to it is on disk); returns how many.
    pub(crate) fn compact(&self, upto: u64) -> usize {
        let gone: Vec<Closed> = match self.closed.lock() {
            Ok(mut c) => {
                let (gone, kept) = c.drain(..).partition(|s| s.last <= upto);
                *c = kept;
                gone
            }
            Err(_) => return 0,
        };
        for s in &gone {
            if self.keep_spare(&s.path) {
                continue;
            }
            if let Err(e) = fs::remove_file(&s.path) {
                tracing::warn!(error = %e, path = %s.path.display(), "Cannot delete a compacted write-ahead log segment.");
            }
        }
        if !gone.is_empty() {
            sync_dir(&self.dir);
        }
        gone.len()
    }

    /// Keeps the compacted segment `path` as the spare when recycling and none is kept;
    /// `false` when it is to be deleted.
    fn keep_spare(&self, path: &Path) -> bool {
        if !self.recycle {
            return false;
        }
        let Ok(mut spare) = self.spare.lock() else {
            return false;
        };
        if spare.is_some() {
            return false;
        }
        let to = self.dir.join(SPARE);
        match fs::rename(path, &to) {
            Ok(()) => {
                *spare = Some(to);
                true
            }
            Err(_) => false,
        }
    }

    /// The spare segment, taken.
    pub(super) fn take_spare(&self) -> Option<PathBuf> {
        self.spare.lock().ok().and_then(|mut s| s.take())
    }

    /// Closed segments kept.
    pub(crate) fn count(&self) -> usize {
        self.closed.lock().map(|c| c.len()).unwrap_or(0)
    }

    /// Keeps `path`, whose entries end at `last`, until a snapshot covers it.
    pub(super) fn close(&self, path: PathBuf, last: u64) {
        if let Ok(mut c) = self.closed.lock() {
            c.push(Closed { path, last });
        }
    }
}

/// Makes the directory `dir`'s entries durable, as far as it can (a failure is not a loss:
/// the entries it would make durable are deletions).
pub(super) fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Makes a segment's new name in `dir` durable: before anything in it is acknowledged.
pub(super) fn sync_new_name(dir: &Path) -> Result<(), WalError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("fsync", dir))
}

/// The file of the segment whose first sequence is `first`.
pub(super) fn segment_path(dir: &Path, first: u64) -> PathBuf {
    dir.join(format!("{first:020}{SEGMENT_SUFFIX}"))
}

/// The segments of `dir`, by first sequence.
pub(super) fn list(dir: &Path) -> Result<Vec<(u64, PathBuf)>, WalError> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).map_err(io("read directory", dir))? {
        let e = e.map_err(io("read directory", dir))?;
        let name = e.file_name();
        let Some(first) = name
            .to_str()
            .and_then(|n| n.strip_suffix(SEGMENT_SUFFIX))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        out.push((first, e.path()));
    }
    out.sort();
    Ok(out)
}

/// Whether the data directory `data_dir` holds segments of a log.
pub(crate) fn has_segments(data_dir: &Path) -> bool {
    list(&data_dir.join(WAL_DIR)).is_ok_and(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::ingest::wal::active::{Active, BLOCK};
    use crate::collector::ingest::wal::frame::{encode_frame, frame_head, HEADER_BYTES};
    use crate::collector::ingest::wal::tests::{dir, frames, replayed};
    use crate::collector::stats::OtlpSignal;

    /// A compacted segment is kept as the spare (one; others are deleted) and reused by
    /// writes past the page cache over its old blocks: the file neither grows nor is cut, a
    /// write ending on a block boundary is followed by zeros, and neither its old frames nor
    /// its old bytes are replayed, even when nothing new reached it.
    #[test]
    fn a_reused_segment_is_overwritten_in_place_and_its_old_frames_never_replayed() {
        let d = dir("reuse");
        let w = d.join(WAL_DIR);
        let old = |first: u64| {
            let mut b = Vec::new();
            for s in first..first + 40 {
                encode_frame(&mut b, s, OtlpSignal::Traces, &[b'o'; 1000]);
            }
            b.resize(64 << 10, 0xff);
            b
        };
        let segs = Segments {
            dir: w.clone(),
            closed: Mutex::new(Vec::new()),
            recycle: true,
            spare: Mutex::new(None),
        };
        for first in [1, 41] {
            fs::write(segment_path(&w, first), old(first)).unwrap();
            segs.close(segment_path(&w, first), first + 39);
        }
        assert_eq!(segs.compact(80), 2);
        assert_eq!(list(&w).unwrap().len(), 0);
        let spare = segs.take_spare().expect("one kept as the spare");
        assert_eq!(fs::read_dir(&w).unwrap().count(), 1, "the other deleted");
        let mut a = Active::reuse(&w, 81, &spare).unwrap();
        if a.direct.is_none() {
            eprintln!("O_DIRECT refused in {}: no segment reused", w.display());
            return;
        }
        // The last frame ends exactly on a block boundary, old bytes after it.
        let frame = HEADER_BYTES + 1;
        let bodies = ["first".to_string(), "n".repeat(2 * BLOCK - 2 * frame - 5)];
        for (seq, body) in (81..).zip(&bodies) {
            let head = frame_head(seq, OtlpSignal::Traces, body.as_bytes());
            let bytes = (head.len() + body.len()) as u64;
            a.write(&[(&head[..], body.as_bytes())], bytes).unwrap();
        }
        drop(a);
        let seg = segment_path(&w, 81);
        assert_eq!(
            fs::metadata(&seg).unwrap().len(),
            64 << 10,
            "written in place"
        );
        fs::write(w.join(SPARE), b"left by a crash").unwrap();
        let (seen, r) = replayed(&d, 0);
        assert_eq!(seen, bodies);
        assert_eq!((r.last_seq, r.replayed), (82, 2));
        assert_eq!(fs::metadata(&seg).unwrap().len(), 64 << 10, "nothing cut");
        assert!(!w.join(SPARE).exists(), "a spare left is deleted at start");
        // A crash after the rename, before any write reached the reused file.
        fs::write(segment_path(&w, 83), old(1)).unwrap();
        let (seen, r) = replayed(&d, 0);
        assert_eq!(seen, bodies);
        assert_eq!(r.last_seq, 82);
        fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn compaction_deletes_segments_wholly_at_or_below_the_snapshot() {
        let d = dir("compact");
        let w = d.join(WAL_DIR);
        let segs = Segments {
            dir: w.clone(),
            closed: Mutex::new(Vec::new()),
            recycle: false,
            spare: Mutex::new(None),
        };
        for (first, last) in [(1, 10), (11, 20), (21, 30)] {
            fs::write(segment_path(&w, first), frames(first..=last)).unwrap();
            segs.close(segment_path(&w, first), last);
        }
        assert_eq!(segs.compact(15), 1);
        assert!(!segment_path(&w, 1).exists());
        assert!(segment_path(&w, 11).exists(), "holds 16..=20");
        assert_eq!(segs.compact(30), 2);
        assert_eq!(segs.count(), 0);
        assert_eq!(list(&w).unwrap().len(), 0);
        fs::remove_dir_all(&d).ok();
    }
}
