//! The write-ahead log (`store.durability = "wal"`): a request is acknowledged only once it is
//! on disk and fsynced, so `kill -9` or a power loss loses nothing acknowledged.
//!
//! What is logged is the request as decoded: protobuf, decompressed, OTLP/JSON already converted.
//! Replay then takes the one protobuf decode path and needs neither gzip nor JSON; the cost is
//! disk bytes (a gzipped request is logged inflated). Metrics requests and requests with neither
//! tool records nor context events (`ingest::context`) change no state and are not logged;
//! replay feeds both into the state, the context ledger's sessions included.
//!
//! The log's rooms, each stating its own behaviour under load and failure:
//! - [`writer`]: the handle receivers append through ([`Wal::append`]) and the one writer thread,
//!   its group commit, and what a request is answered when a write fails;
//! - [`active`]: the segment being appended to, written past the page cache (`O_DIRECT`) or
//!   buffered, cut back on a failed write or fsync;
//! - [`frame`]: the frames a segment is made of, and their reader, which stops at a torn frame;
//! - [`segments`]: the segment files, their rotation bound ([`MAX_SEGMENTS`]), compaction once a
//!   snapshot covers them ([`Segments::compact`]) and the spare segment reused in place;
//! - [`replay`](mod@replay): reading the log back into the state at start, cutting torn tails.
//!
//! Under load, requests wait for the writer in a queue of [`QUEUE`]; past it a request is
//! refused as `overloaded`, and past [`MAX_SEGMENTS`] closed segments (snapshots failing for
//! long) as `wal_failed`, both 503 + `Retry-After`, nothing of the request kept. A failed write
//! or fsync refuses its whole group as `wal_failed`; what was acknowledged before and after it
//! stays in the log. A log that cannot be read back stops the start with the path and the error.

mod active;
mod frame;
mod replay;
mod segments;
mod writer;

use std::path::{Path, PathBuf};

pub(crate) use replay::replay;
pub(crate) use segments::{has_segments, Segments};
pub(crate) use writer::Wal;

/// The log's directory inside the data directory.
pub(crate) const WAL_DIR: &str = "wal";
/// The active segment is rotated once it holds this many bytes.
pub(crate) const SEGMENT_BYTES: u64 = 64 << 20;
/// Closed segments kept at most (with [`SEGMENT_BYTES`], 1 GiB): past them requests are refused.
pub(crate) const MAX_SEGMENTS: usize = 16;
/// Requests written and fsynced together at most.
pub(crate) const MAX_GROUP: usize = 1024;
/// A group takes no more requests once it holds this many bytes: the aligned buffer of
/// `O_DIRECT` writes, a copy of one group, grows to the largest (one request can be larger).
pub(crate) const MAX_GROUP_BYTES: usize = 32 << 20;
/// Requests waiting for the writer at most; past them a request is refused as overloaded.
pub(crate) const QUEUE: usize = 4096;

/// A failed operation on the log.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WalError {
    /// An I/O error on `path`.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Every segment the log may keep is full.
    #[error(
        "the write-ahead log holds its {MAX_SEGMENTS} segments (snapshots are not being written)"
    )]
    Full,
    /// The writer has stopped.
    #[error("the write-ahead log writer has stopped")]
    Stopped,
    /// [`QUEUE`] requests are waiting for the writer already.
    #[error("too many requests waiting for the write-ahead log")]
    Busy,
}

/// The error of `op` on `path`, for `map_err`.
fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> WalError {
    let path = path.to_owned();
    move |source| WalError::Io { op, path, source }
}

/// Helpers the rooms' tests share.
#[cfg(test)]
mod tests {
    use std::fs::{self, File, OpenOptions};
    use std::path::{Path, PathBuf};
    use std::sync::Arc;
    use std::time::Duration;

    use prost::bytes::Bytes;
    use tokio::sync::mpsc;

    use super::active::Active;
    use super::frame::encode_frame;
    use super::replay::Recovered;
    use super::segments::Segments;
    use super::writer::Pending;
    use super::{replay, Wal, WAL_DIR};
    use crate::collector::ingest::record::Batch;
    use crate::collector::stats::OtlpSignal;
    use crate::collector::SelfStats;

    pub(super) fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("toolsize-wal-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(d.join(WAL_DIR)).unwrap();
        d
    }

    pub(super) fn frames(seqs: std::ops::RangeInclusive<u64>) -> Vec<u8> {
        let mut out = Vec::new();
        for s in seqs {
            encode_frame(
                &mut out,
                s,
                OtlpSignal::Traces,
                format!("body {s}").as_bytes(),
            );
        }
        out
    }

    pub(super) fn replayed(d: &Path, after: u64) -> (Vec<String>, Recovered) {
        let mut seen = Vec::new();
        let r = replay(d, after, |s, b| {
            assert_eq!(s, OtlpSignal::Traces);
            seen.push(String::from_utf8(b.to_vec()).unwrap());
        })
        .unwrap();
        (seen, r)
    }

    /// Starts the writer on `active` from sequence 1, its closed segments in `dir`.
    pub(super) fn spawn_on(
        active: Active,
        dir: PathBuf,
        delay: Duration,
        stats: &Arc<SelfStats>,
    ) -> Wal {
        let segments = Arc::new(Segments::new(dir, Vec::new(), false));
        Wal::spawn(active, 1, delay, segments, stats.clone()).unwrap()
    }

    /// A log whose segment is `/dev/full`, where every write fails as on a full disk.
    pub(super) fn full_disk_wal(dir: PathBuf, stats: &Arc<SelfStats>) -> Wal {
        let path = PathBuf::from("/dev/full");
        let active = Active {
            file: OpenOptions::new().append(true).open(&path).unwrap(),
            path,
            len: 0,
            sync: File::sync_data,
            direct: None,
        };
        spawn_on(active, dir, Duration::ZERO, stats)
    }

    pub(super) fn batch(stats: &Arc<SelfStats>) -> Batch {
        use crate::collector::state::tests::{known, rec};
        Batch::new(
            vec![rec("read", known(100))],
            OtlpSignal::Traces,
            stats.clone(),
            None,
        )
    }

    /// Appends `bodies` at once to `wal`, each with a place in `tx`'s queue.
    pub(super) fn append_all(
        wal: &Wal,
        tx: &mpsc::Sender<Batch>,
        stats: &Arc<SelfStats>,
        bodies: &[&'static str],
    ) -> Vec<Pending> {
        bodies
            .iter()
            .map(|b| {
                let place = tx.clone().try_reserve_owned().unwrap();
                wal.append(
                    OtlpSignal::Traces,
                    Bytes::from_static(b.as_bytes()),
                    batch(stats),
                    place,
                )
                .unwrap()
            })
            .collect()
    }
}
