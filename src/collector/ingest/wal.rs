//! The write-ahead log (`store.durability = "wal"`): a request is acknowledged only once it is
//! on disk and fsynced, so `kill -9` or a power loss loses nothing acknowledged.
//!
//! **Write path.** A receiver that has decoded a request with tool records reserves its place
//! in the aggregator's queue (a full queue is refused as before, before anything is written),
//! then hands the request's protobuf bytes, its batch and the reserved place to the writer
//! ([`Wal::append`]) and waits. The writer, one thread, wakes at a request, sleeps the commit
//! delay (`store.wal_commit_delay`) so that the requests arriving meanwhile join it, takes every
//! request waiting (up to [`MAX_GROUP`] of them or [`MAX_GROUP_BYTES`]), gives each the next
//! sequence number, appends their frames to the active segment in one write and calls
//! `fdatasync` once for the group (group commit, counted in `toolsize_wal_syncs_total`). The
//! delay is added to each logged request's answer; what it saves is the fsync's fixed cost
//! (task switches, the journal, the disk's notification), paid per group instead of per request.
//! The write goes past the page cache (`O_DIRECT`): the frames are copied into one block-aligned
//! buffer after the segment's partial last block, which is rewritten with the same bytes, and
//! the blocks written whole (zeros after the last frame end the log at replay); the kernel then
//! allocates no page-cache pages for bytes read again only at a restart, which under memory
//! pressure cost it page compaction per write. Where the file system refuses `O_DIRECT`,
//! the group is one buffered `writev` of the frames' heads and the requests' own
//! buffers. Only then does it queue each batch to the aggregator, in
//! sequence order, and release its receiver, which answers 200. Queueing on the writer rather
//! than in the receiver keeps the aggregator's queue in sequence order, so "the highest sequence
//! ingested" is a watermark below which everything is in the state, and a client that hangs up
//! while waiting cannot leave a durable request out of the state. A failed write or fsync
//! truncates the segment back to where the group began, refuses every request of the group
//! (503 + `Retry-After`, reason `wal_failed`) and logs why; nothing of them is kept.
//!
//! What is logged is the request as decoded: protobuf, decompressed, OTLP/JSON already converted.
//! Replay then takes the one protobuf decode path and needs neither gzip nor JSON; the cost is
//! disk bytes (a gzipped request is logged inflated). Metrics requests and requests with neither
//! tool records nor context events (`ingest::context`) change no state and are not logged;
//! replay feeds both into the state, the context ledger's sessions included.
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
//! When writes go past the page cache, one of them is kept instead as `wal/spare` and becomes
//! the next segment, written over in place: no block is allocated and the file's size does not
//! change, so `fdatasync` writes no metadata. Each write ends with at least a header of zeros
//! (a zero length ends the log) and replay stops at a sequence below the segment's first, so
//! the spare's old frames are never read again; a spare left at start is deleted.
//!
//! **Replay.** At start, after the snapshot is restored, every entry above its sequence is fed
//! through the receivers' decode path into the state ([`replay`]), in order, before the
//! receivers open. A torn tail (a short frame or a CRC mismatch: a write that never completed,
//! so never acknowledged) is cut there, the file truncated, and logged. Replay reads at most the
//! segments kept (one interval and one snapshot write of requests when snapshots succeed); its
//! duration is logged and exposed as `toolsize_wal_replay_seconds`. Replayed records are counted
//! in the window slot of the restart, not of their first arrival.

use std::fs::{self, File, OpenOptions};
use std::io::{IoSlice, Write};
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
/// A compacted segment kept for reuse, in the log's directory (not read at replay).
const SPARE: &str = "spare";
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

/// Length, CRC-32, sequence and signal byte of an entry whose body is `body`: the bytes written
/// before the body, which is written from the request's own buffer, not copied.
fn frame_head(seq: u64, signal: OtlpSignal, body: &[u8]) -> [u8; HEADER_BYTES + 1] {
    let len = u32::try_from(body.len() + 1).unwrap_or(u32::MAX);
    let mut h = crc32fast::Hasher::new();
    h.update(&seq.to_le_bytes());
    h.update(&[signal_code(signal)]);
    h.update(body);
    let mut head = [0u8; HEADER_BYTES + 1];
    head[..4].copy_from_slice(&len.to_le_bytes());
    head[4..8].copy_from_slice(&h.finalize().to_le_bytes());
    head[8..16].copy_from_slice(&seq.to_le_bytes());
    head[16] = signal_code(signal);
    head
}

/// Appends the frame of one entry to `out`.
#[cfg(test)]
pub(crate) fn encode_frame(out: &mut Vec<u8>, seq: u64, signal: OtlpSignal, body: &[u8]) {
    out.extend_from_slice(&frame_head(seq, signal, body));
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
        if rest.iter().take(4).all(|b| *b == 0) {
            // A length of zero is never written: zeros after the last frame (the rest of a
            // block written past the page cache, at least a header of them, then a reused
            // segment's old bytes), or a write that never reached the disk, so was never
            // acknowledged, nor was anything after it. The log ends here.
            return (out, None);
        }
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
    /// Whether one compacted segment is kept as [`SPARE`] for the writer to reuse (it writes
    /// past the page cache).
    recycle: bool,
    /// The compacted segment kept, if any.
    spare: Mutex<Option<PathBuf>>,
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
    fn take_spare(&self) -> Option<PathBuf> {
        self.spare.lock().ok().and_then(|mut s| s.take())
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

/// Makes a segment's new name in `dir` durable: before anything in it is acknowledged.
fn sync_new_name(dir: &Path) -> Result<(), WalError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("fsync", dir))
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
    pub(crate) fn start(
        recovered: Recovered,
        commit_delay: Duration,
        stats: Arc<SelfStats>,
    ) -> Result<Self, WalError> {
        let next = recovered.last_seq + 1;
        let active = Active::create(&recovered.dir, next)?;
        let segments = Arc::new(Segments {
            dir: recovered.dir.clone(),
            closed: Mutex::new(recovered.closed),
            recycle: active.direct.is_some(),
            spare: Mutex::new(None),
        });
        Self::spawn(active, next, commit_delay, segments, stats)
    }

    /// Starts the writer thread appending to `active` from sequence `next`, waiting
    /// `commit_delay` after a group's first request.
    fn spawn(
        active: Active,
        next: u64,
        commit_delay: Duration,
        segments: Arc<Segments>,
        stats: Arc<SelfStats>,
    ) -> Result<Self, WalError> {
        stats.wal_segments(segments.count() as u64);
        let (tx, rx) = mpsc::channel(QUEUE);
        let writer = Writer {
            rx,
            active,
            next,
            commit_delay,
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

/// How a segment's data is made durable: `fdatasync` (a test puts a failing one in its place).
type SyncData = fn(&File) -> std::io::Result<()>;

/// Slices one `writev` takes at most (Linux's `IOV_MAX`).
const IOV_MAX: usize = 1024;

/// Writes every byte of `bufs` to `file`, [`IOV_MAX`] slices per `writev` at most.
fn write_all_vectored(file: &mut File, mut bufs: &mut [IoSlice<'_>]) -> std::io::Result<()> {
    IoSlice::advance_slices(&mut bufs, 0);
    while !bufs.is_empty() {
        let n = bufs.len().min(IOV_MAX);
        match file.write_vectored(&bufs[..n]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(k) => IoSlice::advance_slices(&mut bufs, k),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The block size `O_DIRECT` writes are aligned to (offset, length and memory).
const BLOCK: usize = 4096;

/// A block-aligned buffer for `O_DIRECT` writes: the segment's partial last block, then the
/// group being written. Its memory is kept from group to group; it grows to the largest group.
struct Staging {
    buf: Vec<u8>,
    /// Where the first aligned byte of `buf` is.
    start: usize,
}

impl Staging {
    /// A buffer of `len` aligned bytes, or `None` if no aligned place can be found in memory.
    fn new(len: usize) -> Option<Self> {
        let buf = vec![0u8; len + BLOCK];
        let start = buf.as_ptr().align_offset(BLOCK);
        (start < BLOCK).then_some(Self { buf, start })
    }

    /// Once `bytes` were written after a segment of `len` bytes: moves its new partial last
    /// block to the start, for the next write to rewrite.
    fn keep_tail(&mut self, len: u64, bytes: u64) {
        let end = (len % BLOCK as u64 + bytes) as usize;
        let new_tail = end % BLOCK;
        self.buf[self.start..].copy_within(end - new_tail..end, 0);
    }

    /// The aligned bytes, `len` of them at least, keeping the first `keep`.
    fn take(&mut self, len: usize, keep: usize) -> Option<&mut [u8]> {
        if self.buf.len() - self.start < len {
            let mut grown = Self::new(len.next_power_of_two())?;
            grown.buf[grown.start..grown.start + keep]
                .copy_from_slice(&self.buf[self.start..self.start + keep]);
            *self = grown;
        }
        Some(&mut self.buf[self.start..self.start + len])
    }
}

/// The segment being appended to.
struct Active {
    file: File,
    path: PathBuf,
    len: u64,
    sync: SyncData,
    /// Writes go past the page cache (`O_DIRECT`) from this buffer: whole blocks, the last one
    /// rewritten with what it held. `None`: buffered writes (the file system refused
    /// `O_DIRECT`).
    direct: Option<Staging>,
}

/// Opens a new segment for `O_DIRECT` writes, or `None` where the file system refuses them.
#[cfg(target_os = "linux")]
fn open_direct(path: &Path) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .create(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .ok()
}

#[cfg(not(target_os = "linux"))]
fn open_direct(_: &Path) -> Option<File> {
    None
}

impl Active {
    fn create(dir: &Path, first: u64) -> Result<Self, WalError> {
        Self::open(dir, first, true)
    }

    /// Creates (or opens) the segment of `first`, written past the page cache if `direct` and
    /// the file system allows it.
    fn open(dir: &Path, first: u64, direct: bool) -> Result<Self, WalError> {
        let path = segment_path(dir, first);
        let staging = direct.then(|| Staging::new(0)).flatten();
        let direct_file = staging.is_some().then(|| open_direct(&path)).flatten();
        let (file, direct) = match direct_file {
            Some(f) => (f, staging),
            None => (
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .map_err(io("create", &path))?,
                None,
            ),
        };
        let len = file.metadata().map_err(io("stat", &path))?.len();
        sync_new_name(dir)?;
        Ok(Self {
            file,
            path,
            len,
            sync: File::sync_data,
            // A segment found with bytes in it (never, segments are new at each start) is
            // appended to with buffered writes: its partial last block is not in the buffer.
            direct: direct.filter(|_| len == 0),
        })
    }

    /// The segment of `first` made of the compacted segment `spare` (renamed), written past
    /// the page cache over its old blocks: a write then allocates no block and
    /// changes no file size, so `fdatasync` has no metadata to write. Its old frames are never
    /// read: each write ends with at least a header of zeros, and replay stops at a sequence
    /// below the segment's first. Where `O_DIRECT` is refused, the file is deleted and a new
    /// one made.
    fn reuse(dir: &Path, first: u64, spare: &Path) -> Result<Self, WalError> {
        let path = segment_path(dir, first);
        fs::rename(spare, &path).map_err(io("rename", spare))?;
        let (Some(file), Some(staging)) = (open_direct(&path), Staging::new(0)) else {
            fs::remove_file(&path).map_err(io("delete", &path))?;
            return Self::open(dir, first, true);
        };
        sync_new_name(dir)?;
        Ok(Self {
            file,
            path,
            len: 0,
            sync: File::sync_data,
            direct: Some(staging),
        })
    }

    /// Appends the frames `parts` (each a head and a body; `bytes` in all) in one write and
    /// fsyncs once; on failure cuts the file back to where it was.
    fn write(&mut self, parts: &[(&[u8], &[u8])], bytes: u64) -> Result<(), WalError> {
        let done = match self.direct.is_some() {
            true => self.write_direct(parts, bytes),
            false => {
                let mut bufs: Vec<_> = parts
                    .iter()
                    .flat_map(|(h, b)| [IoSlice::new(h), IoSlice::new(b)])
                    .collect();
                write_all_vectored(&mut self.file, &mut bufs)
            }
        }
        .map_err(io("write", &self.path))
        .and_then(|()| (self.sync)(&self.file).map_err(io("fsync", &self.path)));
        match done {
            Ok(()) => {
                if let Some(staging) = &mut self.direct {
                    staging.keep_tail(self.len, bytes);
                }
                self.len += bytes;
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

    /// Copies the frames after the partial last block into the aligned buffer and writes the
    /// blocks from that one on, zeros after the last frame (read back as the log's end).
    fn write_direct(&mut self, parts: &[(&[u8], &[u8])], bytes: u64) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        let tail = (self.len % BLOCK as u64) as usize;
        let end = tail + usize::try_from(bytes).map_err(std::io::Error::other)?;
        // At least a header of zeros after the last frame: in a reused segment, old bytes
        // follow the blocks written, and a zero length is what ends the log at replay.
        let whole = (end + HEADER_BYTES).div_ceil(BLOCK) * BLOCK;
        let buf = self
            .direct
            .as_mut()
            .and_then(|s| s.take(whole, tail))
            .ok_or_else(|| std::io::Error::other("no aligned memory for the write"))?;
        let mut at = tail;
        for part in parts.iter().flat_map(|(h, b)| [*h, *b]) {
            buf[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        buf[end..whole].fill(0);
        self.file
            .write_all_at(&buf[..whole], self.len - tail as u64)
    }
}

/// The writer thread.
struct Writer {
    rx: mpsc::Receiver<Append>,
    active: Active,
    /// The sequence of the next entry.
    next: u64,
    /// How long the writer waits, once a request has come, for others to share its fsync.
    commit_delay: Duration,
    segments: Arc<Segments>,
    stats: Arc<SelfStats>,
}

impl Writer {
    fn run(mut self) {
        let mut group = Vec::with_capacity(MAX_GROUP);
        while let Some(first) = self.rx.blocking_recv() {
            group.push(first);
            if !self.commit_delay.is_zero() {
                // Requests arriving meanwhile wait in the channel: none wakes the writer.
                std::thread::sleep(self.commit_delay);
            }
            let mut bytes = group[0].body.len();
            while group.len() < MAX_GROUP && bytes < MAX_GROUP_BYTES {
                match self.rx.try_recv() {
                    Ok(a) => {
                        bytes += a.body.len();
                        group.push(a);
                    }
                    Err(_) => break,
                }
            }
            self.commit(&mut group);
        }
    }

    /// Writes `group` with one `writev`, fsyncs once, then queues each batch in sequence order
    /// and answers each request; or refuses them all. Leaves `group` empty.
    fn commit(&mut self, group: &mut Vec<Append>) {
        let heads: Vec<_> = group
            .iter()
            .enumerate()
            .map(|(i, a)| frame_head(self.next + i as u64, a.signal, &a.body))
            .collect();
        let parts: Vec<(&[u8], &[u8])> = heads
            .iter()
            .zip(group.iter())
            .map(|(h, a)| (&h[..], &a.body[..]))
            .collect();
        let bytes = parts.iter().map(|(h, b)| (h.len() + b.len()) as u64).sum();
        let written = self.room().and_then(|()| self.active.write(&parts, bytes));
        drop(parts);
        match written {
            Ok(()) => {
                self.stats.wal_synced();
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

    /// The segment to rotate to: the spare reused when there is one and writes go past the
    /// page cache, else a new file.
    fn next_segment(&self) -> Result<Active, WalError> {
        let dir = &self.segments.dir;
        match self.segments.take_spare() {
            Some(spare) if self.active.direct.is_some() => {
                Active::reuse(dir, self.next, &spare).or_else(|e| {
                    tracing::warn!(error = %e, "Cannot reuse a write-ahead log segment; creating one.");
                    Active::create(dir, self.next)
                })
            }
            spare => {
                if let Some(spare) = spare {
                    let _ = fs::remove_file(spare);
                }
                Active::create(dir, self.next)
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
        let next = self.next_segment()?;
        let mut old = std::mem::replace(&mut self.active, next);
        if let (Some(new), Some(kept)) = (&mut self.active.direct, old.direct.take()) {
            // The aligned buffer has grown to the largest group: its memory is kept.
            *new = kept;
        }
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

    /// Starts the writer on `active` from sequence 1, its closed segments in `dir`.
    fn spawn_on(active: Active, dir: PathBuf, delay: Duration, stats: &Arc<SelfStats>) -> Wal {
        let segments = Arc::new(Segments {
            dir,
            closed: Mutex::new(Vec::new()),
            recycle: false,
            spare: Mutex::new(None),
        });
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
        let wal = Wal::start(recovered, Duration::ZERO, stats.clone()).unwrap();
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
        let wal = full_disk_wal(d.join(WAL_DIR), &stats);
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

    /// Appends `bodies` at once to `wal`, each with a place in `tx`'s queue.
    fn append_all(
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

    /// Requests arriving within the commit delay are written together and made durable by one
    /// fsync, then queued in sequence order.
    #[tokio::test]
    async fn requests_within_the_commit_delay_share_one_sync() {
        let d = dir("group");
        let stats = Arc::new(SelfStats::default());
        let recovered = replay(&d, 0, |_, _| panic!("empty log")).unwrap();
        let wal = Wal::start(recovered, Duration::from_millis(300), stats.clone()).unwrap();
        let (tx, mut rx) = mpsc::channel(8);
        let bodies = ["body 1", "body 2", "body 3", "body 4", "body 5"];
        for p in append_all(&wal, &tx, &stats, &bodies) {
            p.durable().await.unwrap();
        }
        assert_eq!(stats.view().wal_syncs, 1, "one fsync for the five");
        let seqs: Vec<_> = (0..5).map(|_| rx.try_recv().unwrap().seq()).collect();
        assert_eq!(seqs, [Some(1), Some(2), Some(3), Some(4), Some(5)]);
        drop(wal);
        let (seen, r) = replayed(&d, 0);
        assert_eq!(seen, bodies);
        assert_eq!(r.last_seq, 5);
        fs::remove_dir_all(&d).ok();
    }

    /// Zeros after the last frame (the rest of a block written past the page cache) end the
    /// log cleanly, and so they do with bytes after them (a reused segment's old frames, or a
    /// write that never completed, so never acknowledged); a header cut short is still torn.
    #[test]
    fn zeros_after_the_last_frame_end_the_log() {
        let mut bytes = frames(1..=2);
        bytes.resize(BLOCK, 0);
        let (e, torn) = read_frames(&bytes);
        assert_eq!((e.len(), torn), (2, None));
        bytes.extend(frames(3..=3));
        let (e, torn) = read_frames(&bytes);
        assert_eq!((e.len(), torn), (2, None));
        let mut short = frames(1..=2);
        let end = short.len();
        short.extend([7, 0, 0]);
        assert_eq!(
            read_frames(&short),
            (read_frames(&short).0, Some((end, Torn::Short)))
        );
    }

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

    /// Groups of every size, written past the page cache from block-aligned memory (each
    /// rewriting the partial block the last one ended in) or buffered, read back whole and in
    /// order; the segment ends with zeros only where written past the page cache.
    #[tokio::test]
    async fn unaligned_groups_read_back_whole_in_both_write_modes() {
        for direct in [true, false] {
            let d = dir(&format!("modes-{direct}"));
            let stats = Arc::new(SelfStats::default());
            let active = Active::open(&d.join(WAL_DIR), 1, direct).unwrap();
            if direct && active.direct.is_none() {
                // A file system may refuse O_DIRECT; the daemon then writes buffered, the mode
                // tested next.
                eprintln!("O_DIRECT refused in {}: buffered mode only", d.display());
                continue;
            }
            assert_eq!(active.direct.is_some(), direct);
            let wal = spawn_on(active, d.join(WAL_DIR), Duration::ZERO, &stats);
            let (tx, _rx) = mpsc::channel(64);
            let sizes = [1, 4079, 4080, 5000, 3 << 20, 7, 12_345];
            let bodies: Vec<String> = sizes
                .iter()
                .enumerate()
                .map(|(i, n)| format!("{i}").repeat(*n))
                .collect();
            for b in &bodies {
                let place = tx.clone().try_reserve_owned().unwrap();
                let body = Bytes::from(b.clone());
                wal.append(OtlpSignal::Traces, body, batch(&stats), place)
                    .unwrap()
                    .durable()
                    .await
                    .unwrap();
            }
            drop(wal);
            let logged: usize = sizes.iter().map(|n| n + HEADER_BYTES + 1).sum();
            let on_disk = fs::metadata(segment_path(&d.join(WAL_DIR), 1))
                .unwrap()
                .len();
            match direct {
                true => assert_eq!(
                    on_disk,
                    (logged + HEADER_BYTES).div_ceil(BLOCK) as u64 * BLOCK as u64
                ),
                false => assert_eq!(on_disk, logged as u64),
            }
            let (seen, r) = replayed(&d, 0);
            assert_eq!(seen, bodies, "direct: {direct}");
            assert_eq!(r.last_seq, sizes.len() as u64);
            fs::remove_dir_all(&d).ok();
        }
    }

    /// Whether [`failing_sync`] fails.
    static SYNC_FAILS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

    /// `fdatasync`, or an I/O error while [`SYNC_FAILS`] is set: a failing disk cannot be made
    /// here without root and a device mapper, so the sync itself is replaced.
    fn failing_sync(f: &File) -> std::io::Result<()> {
        match SYNC_FAILS.load(std::sync::atomic::Ordering::SeqCst) {
            true => Err(std::io::Error::other("injected fdatasync failure")),
            false => f.sync_data(),
        }
    }

    /// An fsync that fails refuses every request of its group (each answered with the error,
    /// nothing queued, every place given back) and keeps none of them on disk; what was
    /// acknowledged before and after it is replayed, in order.
    #[tokio::test]
    async fn a_failed_sync_refuses_its_whole_group_and_keeps_every_acknowledged_request() {
        let d = dir("sync");
        let stats = Arc::new(SelfStats::default());
        let mut active = Active::create(&d.join(WAL_DIR), 1).unwrap();
        active.sync = failing_sync;
        let wal = spawn_on(active, d.join(WAL_DIR), Duration::from_millis(300), &stats);
        let (tx, mut rx) = mpsc::channel(8);
        for p in append_all(&wal, &tx, &stats, &["before"]) {
            p.durable().await.unwrap();
        }
        SYNC_FAILS.store(true, std::sync::atomic::Ordering::SeqCst);
        for p in append_all(&wal, &tx, &stats, &["lost 1", "lost 2", "lost 3"]) {
            let e = p.durable().await.unwrap_err();
            assert!(e.contains("injected fdatasync failure"), "{e}");
        }
        SYNC_FAILS.store(false, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(
            tx.capacity(),
            7,
            "the refused requests' places were given back"
        );
        for p in append_all(&wal, &tx, &stats, &["after"]) {
            p.durable().await.unwrap();
        }
        let v = stats.view();
        assert_eq!((v.wal_syncs, v.spans_dropped), (2, 0));
        let seqs: Vec<_> = (0..2).map(|_| rx.try_recv().unwrap().seq()).collect();
        assert_eq!(seqs, [Some(1), Some(2)]);
        assert!(rx.try_recv().is_err(), "a refused request was queued");
        drop(wal);
        let (seen, r) = replayed(&d, 0);
        assert_eq!(seen, ["before", "after"]);
        assert_eq!(r.last_seq, 2);
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
        let wal = super::tests::full_disk_wal(std::env::temp_dir(), &stats);
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
