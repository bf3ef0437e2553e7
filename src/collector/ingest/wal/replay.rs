//! Reading the log back at start, after the snapshot is restored.
//!
//! Every entry above the snapshot's sequence is fed through the receivers' decode path into the
//! state ([`replay`]), in order, before the receivers open. A torn tail (a short frame or a CRC
//! mismatch: a write that never completed, so never acknowledged) is cut there, the file
//! truncated, and logged. Replay reads at most the segments kept (one interval and one snapshot
//! write of requests when snapshots succeed), one segment in memory at a time; its duration is
//! logged and exposed as `toolsize_wal_replay_seconds`. Replayed records are counted in the
//! window slot of the restart, not of their first arrival. A segment that cannot be read, cut or
//! deleted stops the start with its path and the error: the log is never skipped.

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::frame::read_frames;
use super::segments::{list, sync_dir, Closed, SPARE};
use super::{io, WalError, WAL_DIR};
use crate::collector::stats::OtlpSignal;

/// What [`replay`] found.
#[derive(Debug)]
pub(crate) struct Recovered {
    pub(super) dir: PathBuf,
    /// The highest sequence in the log (or the snapshot's, when higher).
    pub(crate) last_seq: u64,
    /// Entries fed to the state.
    pub(crate) replayed: u64,
    /// Segments read.
    pub(crate) segments_read: usize,
    /// How long it took.
    pub(crate) took: Duration,
    pub(super) closed: Vec<Closed>,
}

/// Reads the log of `data_dir` (creating its directory), feeds every entry above `after` (the
/// restored snapshot's sequence) to `apply` in order, cuts torn tails, and deletes segments that
/// hold nothing above `after`.
pub(crate) fn replay(
    data_dir: &Path,
    after: u64,
    mut apply: impl FnMut(OtlpSignal, &[u8]),
) -> Result<Recovered, WalError> {
    let began = Instant::now();
    let dir = data_dir.join(WAL_DIR);
    fs::create_dir_all(&dir).map_err(io("create directory", &dir))?;
    // A spare left by the last run is not needed: segments are new at each start.
    match fs::remove_file(dir.join(SPARE)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(io("delete", &dir.join(SPARE))(e));
        }
        _ => {}
    }
    let segments = list(&dir)?;
    let (mut last_seq, mut replayed, mut closed) = (after, 0, Vec::new());
    for (first, path) in &segments {
        let bytes = fs::read(path).map_err(io("read", path))?;
        let (entries, torn) = read_frames(&bytes);
        let mut last_here = None;
        // A reused segment's old frames (below its first sequence, where no new write reached)
        // end it.
        for e in entries.into_iter().take_while(|e| e.seq >= *first) {
            // Sequences only grow across segments; one at or below what came before is stale.
            if e.seq > last_seq {
                apply(e.signal, e.body);
                replayed += 1;
                last_seq = e.seq;
            }
            last_here = Some(e.seq);
        }
        if let Some((at, why)) = torn {
            tracing::warn!(
                path = %path.display(),
                offset = at,
                cut_bytes = bytes.len() - at,
                reason = %why,
                "Write-ahead log segment cut at a torn frame (a write that never completed, never \
                 acknowledged)."
            );
            let f = OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(io("open", path))?;
            f.set_len(at as u64).map_err(io("truncate", path))?;
            f.sync_all().map_err(io("fsync", path))?;
        }
        match last_here {
            Some(last) if last > after => closed.push(Closed {
                path: path.clone(),
                last,
            }),
            _ => fs::remove_file(path).map_err(io("delete", path))?,
        }
    }
    sync_dir(&dir);
    Ok(Recovered {
        dir,
        last_seq,
        replayed,
        segments_read: segments.len(),
        took: began.elapsed(),
        closed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::ingest::wal::frame::HEADER_BYTES;
    use crate::collector::ingest::wal::segments::segment_path;
    use crate::collector::ingest::wal::tests::{dir, frames, replayed};

    /// A write cut anywhere in its last frame (a crash before fsync returned, so never
    /// acknowledged) is cut off at replay, the file truncated to the frames before it, and the
    /// log appends after it again.
    #[test]
    fn a_torn_tail_is_cut_at_replay() {
        let whole = frames(1..=4);
        let last = whole.len() - (HEADER_BYTES + 1 + "body 4".len());
        for cut in [
            last + 1,
            last + HEADER_BYTES - 1,
            last + HEADER_BYTES + 3,
            whole.len() - 1,
        ] {
            let d = dir("torn");
            let seg = segment_path(&d.join(WAL_DIR), 1);
            fs::write(&seg, &whole[..cut]).unwrap();
            let (seen, r) = replayed(&d, 0);
            assert_eq!(seen, ["body 1", "body 2", "body 3"], "cut at {cut}");
            assert_eq!((r.last_seq, r.replayed), (3, 3));
            assert_eq!(fs::metadata(&seg).unwrap().len(), last as u64, "file cut");
            // Read again: the same three, nothing torn.
            let (seen, _) = replayed(&d, 0);
            assert_eq!(seen.len(), 3);
            fs::remove_dir_all(&d).ok();
        }
        // A bad CRC in the tail (a sector written half): cut as well.
        let d = dir("torn-crc");
        let seg = segment_path(&d.join(WAL_DIR), 1);
        let mut bad = whole.clone();
        *bad.last_mut().unwrap() ^= 0x40;
        fs::write(&seg, &bad).unwrap();
        let (seen, _) = replayed(&d, 0);
        assert_eq!(seen.len(), 3);
        assert_eq!(fs::metadata(&seg).unwrap().len(), last as u64);
        fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn replay_skips_what_the_snapshot_holds_and_deletes_covered_segments() {
        let d = dir("after");
        let w = d.join(WAL_DIR);
        fs::write(segment_path(&w, 1), frames(1..=3)).unwrap();
        fs::write(segment_path(&w, 4), frames(4..=6)).unwrap();
        fs::write(segment_path(&w, 7), b"").unwrap();
        let (seen, r) = replayed(&d, 4);
        assert_eq!(seen, ["body 5", "body 6"]);
        assert_eq!((r.last_seq, r.replayed, r.segments_read), (6, 2, 3));
        assert!(!segment_path(&w, 1).exists(), "wholly below the snapshot");
        assert!(segment_path(&w, 4).exists(), "holds 5 and 6");
        assert!(!segment_path(&w, 7).exists(), "empty");
        fs::remove_dir_all(&d).ok();
    }
}
