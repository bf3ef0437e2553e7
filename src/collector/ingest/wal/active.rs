//! The segment being appended to, and how a group reaches the disk.
//!
//! The write goes past the page cache (`O_DIRECT`): the frames are copied into one block-aligned
//! buffer after the segment's partial last block, which is rewritten with the same bytes, and the
//! blocks written whole (zeros after the last frame end the log at replay); the kernel then
//! allocates no page-cache pages for bytes read again only at a restart, which under memory
//! pressure cost it page compaction per write. The buffer is kept from group to group and grows
//! to the largest group ([`MAX_GROUP_BYTES`](super::MAX_GROUP_BYTES), or one larger request).
//! Where the file system refuses `O_DIRECT`, the group is one buffered `writev` of the frames'
//! heads and the requests' own buffers. Either way one `fdatasync` follows. A failed write or
//! fsync cuts the segment back to where the group began, so nothing of the group is replayed.

use std::fs::{self, File, OpenOptions};
use std::io::{IoSlice, Write};
use std::path::{Path, PathBuf};

use super::frame::HEADER_BYTES;
use super::segments::{segment_path, sync_new_name};
use super::{io, WalError};

/// How a segment's data is made durable: `fdatasync` (a test puts a failing one in its place).
pub(super) type SyncData = fn(&File) -> std::io::Result<()>;

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
pub(super) const BLOCK: usize = 4096;

/// A block-aligned buffer for `O_DIRECT` writes: the segment's partial last block, then the
/// group being written. Its memory is kept from group to group; it grows to the largest group.
pub(super) struct Staging {
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
pub(super) struct Active {
    pub(super) file: File,
    pub(super) path: PathBuf,
    pub(super) len: u64,
    pub(super) sync: SyncData,
    /// Writes go past the page cache (`O_DIRECT`) from this buffer: whole blocks, the last one
    /// rewritten with what it held. `None`: buffered writes (the file system refused
    /// `O_DIRECT`).
    pub(super) direct: Option<Staging>,
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
    /// Creates the segment of `first`, written past the page cache where the file system
    /// allows it.
    pub(super) fn create(dir: &Path, first: u64) -> Result<Self, WalError> {
        Self::open(dir, first, true)
    }

    /// Creates (or opens) the segment of `first`, written past the page cache if `direct` and
    /// the file system allows it.
    pub(super) fn open(dir: &Path, first: u64, direct: bool) -> Result<Self, WalError> {
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
    pub(super) fn reuse(dir: &Path, first: u64, spare: &Path) -> Result<Self, WalError> {
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
    pub(super) fn write(&mut self, parts: &[(&[u8], &[u8])], bytes: u64) -> Result<(), WalError> {
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use prost::bytes::Bytes;
    use tokio::sync::mpsc;

    use super::*;
    use crate::collector::ingest::wal::segments::segment_path;
    use crate::collector::ingest::wal::tests::{batch, dir, replayed, spawn_on};
    use crate::collector::ingest::wal::WAL_DIR;
    use crate::collector::stats::OtlpSignal;
    use crate::collector::SelfStats;

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
}
