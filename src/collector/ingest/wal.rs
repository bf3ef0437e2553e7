//! The write-ahead log (`store.durability = "wal"`): a request is acknowledged only once it is
//! on disk and fsynced, so `kill -9` or a power loss loses nothing acknowledged.
//!
//! **Write path.** A receiver that has decoded a request with tool records reserves its place
//! in the aggregator's queue (a full queue is refused as before, before anything is written),
//! then hands the request's protobuf bytes, its batch and the reserved place to the writer
//! ([`Wal::append`]) and waits. The writer, one thread, takes every request waiting (up to
//! [`MAX_GROUP`]), gives each the next sequence number, appends their frames to the active
//! segment in one write and calls `fdatasync` once for the group (group commit: under load one
//! fsync covers many requests). Only then does it queue each batch to the aggregator, in
//! sequence order, and release its receiver, which answers 200. Queueing on the writer rather
//! than in the receiver keeps the aggregator's queue in sequence order, so "the highest sequence
//! ingested" is a watermark below which everything is in the state, and a client that hangs up
//! while waiting cannot leave a durable request out of the state. A failed write or fsync
//! truncates the segment back to where the group began, refuses every request of the group
//! (503 + `Retry-After`, reason `wal_failed`) and logs why; nothing of them is kept.
//!
//! What is logged is the request as decoded: protobuf, decompressed, OTLP/JSON already converted.
//! Replay then takes the one protobuf decode path and needs neither gzip nor JSON; the cost is
//! disk bytes (a gzipped request is logged inflated). Metrics requests and requests without tool
//! records change no state and are not logged.
//!
//! **On disk.** Segments `<data_dir>/wal/<first sequence, 20 digits>.wal`, each a run of frames:
//! payload length (u32 LE), CRC-32 of sequence and payload (u32 LE), sequence (u64 LE), payload
//! (the signal, one byte, then the body). The active segment is rotated past
//! [`SEGMENT_BYTES`]; a new segment's directory entry is fsynced before anything in it is
//! acknowledged. At most [`MAX_SEGMENTS`] closed segments are kept: past them (snapshots failing
//! for long) requests are refused as `wal_failed` rather than letting replay grow without bound.
//!
//! **Compaction.** Each batch carries its sequence; a snapshot records the highest sequence the
//! state had ingested when captured (inside its checksummed body). Once that snapshot is on disk,
//! closed segments whose entries are all at or below it are deleted ([`Segments::compact`]).
//!
//! **Replay.** At start, after the snapshot is restored, every entry above its sequence is fed
//! through the receivers' decode path into the state ([`replay`]), in order, before the
//! receivers open. A torn tail (a short frame or a CRC mismatch: a write that never completed,
//! so never acknowledged) is cut there, the file truncated, and logged. Replay reads at most the
//! segments kept (one interval and one snapshot write of requests when snapshots succeed); its
//! duration is logged and exposed as `toolsize_wal_replay_seconds`. Replayed records are counted
//! in the window slot of the restart, not of their first arrival.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prost::bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use crate::collector::ingest::record::Batch;
use crate::collector::stats::OtlpSignal;
use crate::collector::SelfStats;

/// The log's directory inside the data directory.
pub(crate) const WAL_DIR: &str = "wal";
/// A segment's file name ends so.
const SEGMENT_SUFFIX: &str = ".wal";
/// The active segment is rotated once it holds this many bytes.
pub(crate) const SEGMENT_BYTES: u64 = 64 << 20;
/// Closed segments kept at most (with [`SEGMENT_BYTES`], 1 GiB): past them requests are refused.
pub(crate) const MAX_SEGMENTS: usize = 16;
/// Requests written and fsynced together at most.
pub(crate) const MAX_GROUP: usize = 1024;
/// Requests waiting for the writer at most; past them a request is refused as overloaded.
pub(crate) const QUEUE: usize = 4096;
/// Length, CRC-32 and sequence before each payload.
const HEADER_BYTES: usize = 16;

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

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> WalError {
    let path = path.to_owned();
    move |source| WalError::Io { op, path, source }
}

/// The signal's byte in a payload.
fn signal_code(s: OtlpSignal) -> u8 {
    match s {
        OtlpSignal::Traces => 1,
        OtlpSignal::Logs => 2,
        OtlpSignal::Metrics => 3,
    }
}

fn signal_of(code: u8) -> Option<OtlpSignal> {
    match code {
        1 => Some(OtlpSignal::Traces),
        2 => Some(OtlpSignal::Logs),
        3 => Some(OtlpSignal::Metrics),
        _ => None,
    }
}

/// Appends the frame of one entry to `out`.
pub(crate) fn encode_frame(out: &mut Vec<u8>, seq: u64, signal: OtlpSignal, body: &[u8]) {
    let len = u32::try_from(body.len() + 1).unwrap_or(u32::MAX);
    let mut h = crc32fast::Hasher::new();
    h.update(&seq.to_le_bytes());
    h.update(&[signal_code(signal)]);
    h.update(body);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&h.finalize().to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.push(signal_code(signal));
    out.extend_from_slice(body);
}

/// One entry read back.
#[derive(Debug, PartialEq)]
pub(crate) struct Entry<'a> {
    pub(crate) seq: u64,
    pub(crate) signal: OtlpSignal,
    pub(crate) body: &'a [u8],
}

/// Why reading a segment stopped before its end.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Torn {
    /// Fewer bytes than a header, or than the header says.
    Short,
    /// The CRC-32 does not match.
    Checksum,
    /// An unknown signal byte, or a sequence not above the previous one.
    Invalid,
}

impl std::fmt::Display for Torn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Torn::Short => "short frame",
            Torn::Checksum => "CRC-32 mismatch",
            Torn::Invalid => "invalid frame",
        })
    }
}

/// The entries of a segment's bytes, in order, and where and why they stop early, if they do.
pub(crate) fn read_frames(bytes: &[u8]) -> (Vec<Entry<'_>>, Option<(usize, Torn)>) {
    let mut out: Vec<Entry<'_>> = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let rest = &bytes[at..];
        if rest.len() < HEADER_BYTES {
            return (out, Some((at, Torn::Short)));
        }
        let word = |i: usize| u32::from_le_bytes([rest[i], rest[i + 1], rest[i + 2], rest[i + 3]]);
        let (len, crc) = (word(0) as usize, word(4));
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&rest[8..16]);
        let seq = u64::from_le_bytes(seq);
        if len == 0 || rest.len() - HEADER_BYTES < len {
            return (out, Some((at, Torn::Short)));
        }
        let payload = &rest[HEADER_BYTES..HEADER_BYTES + len];
        let mut h = crc32fast::Hasher::new();
        h.update(&rest[8..16]);
        h.update(payload);
        if h.finalize() != crc {
            return (out, Some((at, Torn::Checksum)));
        }
        let Some(signal) = signal_of(payload[0]) else {
            return (out, Some((at, Torn::Invalid)));
        };
        if out.last().is_some_and(|e| e.seq >= seq) {
            return (out, Some((at, Torn::Invalid)));
        }
        out.push(Entry {
            seq,
            signal,
            body: &payload[1..],
        });
        at += HEADER_BYTES + len;
    }
    (out, None)
}

/// A closed segment: its file and the last sequence it holds.
#[derive(Debug, Clone)]
struct Closed {
    path: PathBuf,
    last: u64,
}

/// The closed segments of a log, shared by the writer (which closes them) and the snapshot
/// writer (which deletes them once a snapshot covers them).
#[derive(Debug)]
pub(crate) struct Segments {
    dir: PathBuf,
    closed: Mutex<Vec<Closed>>,
}

impl Segments {
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
            if let Err(e) = fs::remove_file(&s.path) {
                tracing::warn!(error = %e, path = %s.path.display(), "Cannot delete a compacted write-ahead log segment.");
            }
        }
        if !gone.is_empty() {
            sync_dir(&self.dir);
        }
        gone.len()
    }

    /// Closed segments kept.
    pub(crate) fn count(&self) -> usize {
        self.closed.lock().map(|c| c.len()).unwrap_or(0)
    }

    fn close(&self, path: PathBuf, last: u64) {
        if let Ok(mut c) = self.closed.lock() {
            c.push(Closed { path, last });
        }
    }
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

fn segment_path(dir: &Path, first: u64) -> PathBuf {
    dir.join(format!("{first:020}{SEGMENT_SUFFIX}"))
}

/// The segments of `dir`, by first sequence.
fn list(dir: &Path) -> Result<Vec<(u64, PathBuf)>, WalError> {
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

/// What [`replay`] found.
#[derive(Debug)]
pub(crate) struct Recovered {
    dir: PathBuf,
    /// The highest sequence in the log (or the snapshot's, when higher).
    pub(crate) last_seq: u64,
    /// Entries fed to the state.
    pub(crate) replayed: u64,
    /// Segments read.
    pub(crate) segments_read: usize,
    /// How long it took.
    pub(crate) took: Duration,
    closed: Vec<Closed>,
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
    let segments = list(&dir)?;
    let (mut last_seq, mut replayed, mut closed) = (after, 0, Vec::new());
    for (_, path) in &segments {
        let bytes = fs::read(path).map_err(io("read", path))?;
        let (entries, torn) = read_frames(&bytes);
        let mut last_here = None;
        for e in entries {
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

/// One request waiting for the writer.
struct Append {
    signal: OtlpSignal,
    body: Bytes,
    batch: Batch,
    place: mpsc::OwnedPermit<Batch>,
    done: oneshot::Sender<Result<(), String>>,
}

/// The handle receivers append through.
#[derive(Debug, Clone)]
pub(crate) struct Wal {
    tx: mpsc::Sender<Append>,
    segments: Arc<Segments>,
}

impl std::fmt::Debug for Append {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Append")
            .field("bytes", &self.body.len())
            .finish()
    }
}

/// A request handed to the writer: wait for it with [`Pending::durable`].
#[derive(Debug)]
pub(crate) struct Pending(oneshot::Receiver<Result<(), String>>);

impl Pending {
    /// Once the request is durable and its batch queued: `Ok`; else why not.
    pub(crate) async fn durable(self) -> Result<(), String> {
        self.0
            .await
            .unwrap_or_else(|_| Err(WalError::Stopped.to_string()))
    }
}

impl Wal {
    /// Starts the writer after [`replay`]: a new active segment after `recovered.last_seq`.
    pub(crate) fn start(recovered: Recovered, stats: Arc<SelfStats>) -> Result<Self, WalError> {
        let segments = Arc::new(Segments {
            dir: recovered.dir.clone(),
            closed: Mutex::new(recovered.closed),
        });
        let next = recovered.last_seq + 1;
        let active = Active::create(&recovered.dir, next)?;
        Self::spawn(active, next, segments, stats)
    }

    /// Starts the writer thread appending to `active` from sequence `next`.
    fn spawn(
        active: Active,
        next: u64,
        segments: Arc<Segments>,
        stats: Arc<SelfStats>,
    ) -> Result<Self, WalError> {
        stats.wal_segments(segments.count() as u64);
        let (tx, rx) = mpsc::channel(QUEUE);
        let writer = Writer {
            rx,
            active,
            next,
            segments: segments.clone(),
            stats,
        };
        std::thread::Builder::new()
            .name("toolsize-wal".into())
            .spawn(move || writer.run())
            .map_err(io("start the writer for", &segments.dir))?;
        Ok(Self { tx, segments })
    }

    /// The closed segments, for compaction.
    pub(crate) fn segments(&self) -> Arc<Segments> {
        self.segments.clone()
    }

    /// Hands a request to the writer; `place` is its reserved place in the aggregator's queue.
    /// `Err` when the writer's queue is full ([`WalError::Busy`]) or the writer has stopped;
    /// the batch is then refused (nothing of it is kept) and its place given back.
    pub(crate) fn append(
        &self,
        signal: OtlpSignal,
        body: Bytes,
        batch: Batch,
        place: mpsc::OwnedPermit<Batch>,
    ) -> Result<Pending, WalError> {
        let (done, wait) = oneshot::channel();
        let a = Append {
            signal,
            body,
            batch,
            place,
            done,
        };
        match self.tx.try_send(a) {
            Ok(()) => Ok(Pending(wait)),
            Err(mpsc::error::TrySendError::Full(a)) => {
                a.batch.refused();
                Err(WalError::Busy)
            }
            Err(mpsc::error::TrySendError::Closed(a)) => {
                a.batch.refused();
                Err(WalError::Stopped)
            }
        }
    }
}

/// The segment being appended to.
struct Active {
    file: File,
    path: PathBuf,
    len: u64,
}

impl Active {
    fn create(dir: &Path, first: u64) -> Result<Self, WalError> {
        let path = segment_path(dir, first);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(io("create", &path))?;
        let len = file.metadata().map_err(io("stat", &path))?.len();
        // The new file's name must be durable before anything in it is acknowledged.
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io("fsync", dir))?;
        Ok(Self { file, path, len })
    }

    /// Appends `bytes` and fsyncs; on failure cuts the file back to where it was.
    fn write(&mut self, bytes: &[u8]) -> Result<(), WalError> {
        let done = self
            .file
            .write_all(bytes)
            .map_err(io("write", &self.path))
            .and_then(|()| self.file.sync_data().map_err(io("fsync", &self.path)));
        match done {
            Ok(()) => {
                self.len += bytes.len() as u64;
                Ok(())
            }
            Err(e) => {
                if let Err(cut) = self.file.set_len(self.len) {
                    tracing::error!(error = %cut, path = %self.path.display(), "Cannot cut a failed write-ahead log write; its requests may be replayed though refused.");
                }
                Err(e)
            }
        }
    }
}

/// The writer thread.
struct Writer {
    rx: mpsc::Receiver<Append>,
    active: Active,
    /// The sequence of the next entry.
    next: u64,
    segments: Arc<Segments>,
    stats: Arc<SelfStats>,
}

impl Writer {
    fn run(mut self) {
        let mut group = Vec::with_capacity(MAX_GROUP);
        let mut buf = Vec::new();
        while let Some(first) = self.rx.blocking_recv() {
            group.push(first);
            while group.len() < MAX_GROUP {
                match self.rx.try_recv() {
                    Ok(a) => group.push(a),
                    Err(_) => break,
                }
            }
            buf.clear();
            for (i, a) in group.iter().enumerate() {
                encode_frame(&mut buf, self.next + i as u64, a.signal, &a.body);
            }
            match self.room().and_then(|()| self.active.write(&buf)) {
                Ok(()) => {
                    for a in group.drain(..) {
                        a.place.send(a.batch.with_seq(self.next));
                        let _ = a.done.send(Ok(()));
                        self.next += 1;
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, requests = group.len(), "Write-ahead log write failed; its requests are refused (503).");
                    let why = e.to_string();
                    for a in group.drain(..) {
                        // Nothing kept, the place given back, then the answer.
                        a.batch.refused();
                        drop(a.place);
                        let _ = a.done.send(Err(why.clone()));
                    }
                }
            }
        }
    }

    /// Rotates a full active segment; `Err` when it cannot be (then nothing is written).
    fn room(&mut self) -> Result<(), WalError> {
        if self.active.len < SEGMENT_BYTES {
            return Ok(());
        }
        if self.segments.count() >= MAX_SEGMENTS {
            return Err(WalError::Full);
        }
        let next = Active::create(&self.segments.dir, self.next)?;
        let old = std::mem::replace(&mut self.active, next);
        self.segments.close(old.path, self.next - 1);
        self.stats.wal_segments(self.segments.count() as u64);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("toolsize-wal-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(d.join(WAL_DIR)).unwrap();
        d
    }

    fn frames(seqs: std::ops::RangeInclusive<u64>) -> Vec<u8> {
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

    fn replayed(d: &Path, after: u64) -> (Vec<String>, Recovered) {
        let mut seen = Vec::new();
        let r = replay(d, after, |s, b| {
            assert_eq!(s, OtlpSignal::Traces);
            seen.push(String::from_utf8(b.to_vec()).unwrap());
        })
        .unwrap();
        (seen, r)
    }

    #[test]
    fn frames_read_back_and_a_flipped_bit_stops_them() {
        let mut bytes = frames(1..=3);
        let (e, torn) = read_frames(&bytes);
        assert_eq!(e.len(), 3);
        assert_eq!((e[2].seq, e[2].body), (3, &b"body 3"[..]));
        assert_eq!(torn, None);
        let second = HEADER_BYTES + 1 + "body 1".len();
        bytes[second + HEADER_BYTES + 2] ^= 1;
        let (e, torn) = read_frames(&bytes);
        assert_eq!(e.len(), 1);
        assert_eq!(torn, Some((second, Torn::Checksum)));
    }

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

    fn batch(stats: &Arc<SelfStats>) -> Batch {
        use crate::collector::state::tests::{known, rec};
        Batch::new(
            vec![rec("read", known(100))],
            OtlpSignal::Traces,
            stats.clone(),
            None,
        )
    }

    /// Requests appended together are written, fsynced, queued to the aggregator in sequence
    /// order and then released; replay reads them back.
    #[tokio::test]
    async fn appended_requests_are_queued_in_order_once_durable() {
        let d = dir("append");
        let stats = Arc::new(SelfStats::default());
        let recovered = replay(&d, 0, |_, _| panic!("empty log")).unwrap();
        let wal = Wal::start(recovered, stats.clone()).unwrap();
        let (tx, mut rx) = mpsc::channel(8);
        let pending: Vec<_> = (0..3)
            .map(|i| {
                let place = tx.clone().try_reserve_owned().unwrap();
                let body = Bytes::from(format!("body {}", i + 1));
                wal.append(OtlpSignal::Traces, body, batch(&stats), place)
                    .unwrap()
            })
            .collect();
        for p in pending {
            p.durable().await.unwrap();
        }
        let seqs: Vec<_> = (0..3).map(|_| rx.try_recv().unwrap().seq()).collect();
        assert_eq!(seqs, [Some(1), Some(2), Some(3)]);
        drop(wal);
        let (seen, r) = replayed(&d, 1);
        assert_eq!(seen, ["body 2", "body 3"]);
        assert_eq!(r.last_seq, 3);
        fs::remove_dir_all(&d).ok();
    }

    /// A write that fails (a full disk: the segment is `/dev/full`) refuses its request and
    /// queues nothing; nothing is counted as dropped.
    #[tokio::test]
    async fn a_failed_write_refuses_its_requests_and_queues_nothing() {
        let d = dir("full");
        let stats = Arc::new(SelfStats::default());
        let path = PathBuf::from("/dev/full");
        let active = Active {
            file: OpenOptions::new().append(true).open(&path).unwrap(),
            path,
            len: 0,
        };
        let segments = Arc::new(Segments {
            dir: d.join(WAL_DIR),
            closed: Mutex::new(Vec::new()),
        });
        let wal = Wal::spawn(active, 1, segments, stats.clone()).unwrap();
        let (tx, mut rx) = mpsc::channel(8);
        let place = tx.clone().try_reserve_owned().unwrap();
        let e = wal
            .append(
                OtlpSignal::Traces,
                Bytes::from_static(b"x"),
                batch(&stats),
                place,
            )
            .unwrap()
            .durable()
            .await
            .unwrap_err();
        assert!(e.contains("write /dev/full"), "{e}");
        assert!(rx.try_recv().is_err(), "a refused request was queued");
        assert_eq!(tx.capacity(), 8, "its place was given back");
        assert_eq!(stats.view().spans_dropped, 0);
        fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn compaction_deletes_segments_wholly_at_or_below_the_snapshot() {
        let d = dir("compact");
        let w = d.join(WAL_DIR);
        let segs = Segments {
            dir: w.clone(),
            closed: Mutex::new(Vec::new()),
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

/// The receivers' side: what a client is answered when the log fails.
#[cfg(test)]
mod receiver_tests {
    use super::*;
    use crate::collector::ingest::recognize::Recognizer;
    use crate::collector::ingest::Ingest;
    use crate::semconv;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
    use prost::Message;
    use tower::ServiceExt;

    fn kv(k: &str, v: &str) -> KeyValue {
        KeyValue {
            key: k.into(),
            key_strindex: 0,
            value: Some(AnyValue {
                value: Some(Value::StringValue(v.into())),
            }),
        }
    }

    /// A request of one tool span.
    fn tool_request() -> Vec<u8> {
        let span = Span {
            name: "execute_tool read".into(),
            trace_id: vec![1; 16],
            span_id: vec![2; 8],
            start_time_unix_nano: 1_000_000,
            end_time_unix_nano: 3_000_000,
            attributes: vec![
                kv(
                    semconv::GEN_AI_OPERATION_NAME,
                    semconv::OPERATION_EXECUTE_TOOL,
                ),
                kv(semconv::GEN_AI_TOOL_NAME, "read"),
            ],
            ..Span::default()
        };
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans {
                    spans: vec![span],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
        .encode_to_vec()
    }

    /// With the log's segment on a full disk, an OTLP/HTTP export is answered 503 with
    /// `Retry-After`, counted as `wal_failed`, and nothing reaches the aggregator.
    #[tokio::test]
    async fn a_failed_log_write_is_answered_503_and_counted() {
        let stats = Arc::new(SelfStats::default());
        let path = PathBuf::from("/dev/full");
        let active = Active {
            file: OpenOptions::new().append(true).open(&path).unwrap(),
            path,
            len: 0,
        };
        let segments = Arc::new(Segments {
            dir: std::env::temp_dir(),
            closed: Mutex::new(Vec::new()),
        });
        let wal = Wal::spawn(active, 1, segments, stats.clone()).unwrap();
        let (tx, mut rx) = mpsc::channel(8);
        let ingest = Arc::new(
            Ingest::new(
                Arc::new(Recognizer::new(&Default::default(), 128)),
                tx,
                stats.clone(),
                1 << 20,
            )
            .with_wal(Some(wal)),
        );
        let resp = crate::collector::ingest::http::router(ingest)
            .oneshot(
                Request::post("/v1/traces")
                    .header("content-type", "application/x-protobuf")
                    .body(Body::from(tool_request()))
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(resp.headers()["retry-after"], "1");
        let v = stats.view();
        assert_eq!(v.refused_requests.wal, 1);
        assert_eq!((v.spans_wal, v.spans_overloaded), (1, 0));
        assert_eq!((v.spans_tool, v.spans_dropped), (0, 0));
        assert!(rx.try_recv().is_err(), "a refused request was queued");
    }
}
