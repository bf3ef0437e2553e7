//! Snapshots of the aggregated state on disk, written atomically and restored at start.
//!
//! A write goes to a temporary file in the same directory, is fsynced, renamed over
//! `toolsize-state.json`, and the directory is fsynced: a crash (even `kill -9` or power loss)
//! leaves either the previous snapshot or the new one, never a torn file. At start a snapshot of an
//! earlier format is migrated ([`crate::collector::persist::migrate`]); one that cannot be read,
//! whose checksum does not match or whose numbers break an invariant
//! ([`crate::collector::persist::verify`]) is moved aside (`toolsize-state.json.corrupt-<unix>`,
//! or `.v<N>-<unix>` when a newer build wrote it) with an error log line that says why, and the
//! daemon starts empty: a bad file never makes it crash-loop. When it cannot be moved aside
//! (a read-only data directory, an immutable file) the daemon still starts empty, and says so
//! loudly: an error log line with both reasons, `toolsize_snapshots_refused_total`, and
//! `/readyz` 503 until a snapshot is written over the bad file (what arrives meanwhile is in
//! memory only). Writes run on a blocking thread, never on the aggregator.
//!
//! The directory is probed when the store is opened, before the daemon listens: a file is
//! created, written, fsynced and removed in it, so a directory that is read-only, not ours or on
//! a full disk stops the start with the reason, instead of failing the first snapshot.
//!
//! A failed write (disk full, read-only directory) removes its temporary file, so a partial
//! snapshot never keeps a full volume full; the previous snapshot stays in place. Failures are
//! counted and logged; after [`FAILURES_NOT_READY`](crate::collector::SNAPSHOT_FAILURES_NOT_READY)
//! in a row `/readyz` answers 503, and when the final write at shutdown fails the daemon exits
//! non-zero.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::collector::ingest::wal::Segments;
use crate::collector::persist::format::Snapshot;
use crate::collector::persist::migrate::{self, ReadError};

/// File name of the write probe made and removed in the data directory when it is opened.
pub(crate) const PROBE_FILE: &str = ".toolsize-write-probe";

/// File name of the snapshot inside the data directory.
pub(crate) const SNAPSHOT_FILE: &str = "toolsize-state.json";

/// A failed store operation.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
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
}

/// What [`Store::load`] found.
#[derive(Debug)]
pub(crate) enum Found {
    /// No snapshot.
    Nothing,
    /// A snapshot, checked.
    Snapshot(Snapshot),
    /// A snapshot that cannot be restored, moved aside or left in place (`moved`).
    Refused {
        /// Whether it was moved aside.
        moved: bool,
    },
}

/// The snapshot file of a data directory.
#[derive(Debug)]
pub(crate) struct Store {
    dir: PathBuf,
    path: PathBuf,
    /// The write-ahead log's closed segments, compacted after each snapshot written.
    wal: Option<Arc<Segments>>,
}

impl Store {
    /// Opens (creates) the data directory and checks a file can be written in it
    /// ([`Store::probe`]).
    pub(crate) fn open(dir: &Path) -> Result<Self, StoreError> {
        fs::create_dir_all(dir).map_err(|source| StoreError::Io {
            op: "create directory",
            path: dir.to_owned(),
            source,
        })?;
        Self::probe(dir)?;
        Ok(Self {
            dir: dir.to_owned(),
            path: dir.join(SNAPSHOT_FILE),
            wal: None,
        })
    }

    /// Creates, writes, fsyncs and removes [`PROBE_FILE`] in `dir`: what a snapshot write
    /// needs, tried once.
    pub(crate) fn probe(dir: &Path) -> Result<(), StoreError> {
        let path = dir.join(PROBE_FILE);
        let io = |op| {
            let path = path.clone();
            move |source| StoreError::Io { op, path, source }
        };
        let written = File::create(&path)
            .map_err(io("create file"))
            .and_then(|mut f| {
                f.write_all(b"toolsize")
                    .and_then(|()| f.sync_all())
                    .map_err(io("write"))
            });
        let removed = match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io("remove")(e)),
            _ => Ok(()),
        };
        written.and(removed)
    }

    /// Compacts `wal` after each snapshot written.
    #[must_use]
    pub(crate) fn with_wal(mut self, wal: Arc<Segments>) -> Self {
        self.wal = Some(wal);
        self
    }

    /// The write-ahead log's segments, when it is on.
    pub(crate) fn wal(&self) -> Option<&Segments> {
        self.wal.as_deref()
    }

    /// The snapshot file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the snapshot: [`Found::Snapshot`], [`Found::Nothing`], or [`Found::Refused`] when
    /// it cannot be restored (logged at error level, with the reason, and moved aside when it
    /// can be). An error only when the file exists and cannot be read at all.
    pub(crate) fn load(&self) -> Result<Found, StoreError> {
        let bytes = match fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Found::Nothing),
            Err(source) => {
                return Err(StoreError::Io {
                    op: "read",
                    path: self.path.clone(),
                    source,
                })
            }
        };
        match migrate::read(&bytes) {
            Ok(s) => Ok(Found::Snapshot(s)),
            Err(why) => match self.move_aside(&why) {
                Ok(_) => Ok(Found::Refused { moved: true }),
                Err(e) => {
                    tracing::error!(
                        error = %why,
                        move_error = %e,
                        path = %self.path.display(),
                        "Snapshot cannot be read and cannot be moved aside; starting with empty \
                         state, not ready until a snapshot is written over it (copy it elsewhere \
                         first to keep it)."
                    );
                    Ok(Found::Refused { moved: false })
                }
            },
        }
    }

    /// Moves the snapshot aside after it failed to load; logs why. A file of a newer format
    /// goes to `toolsize-state.json.v<N>-<unix>` (rename it back under the build that wrote
    /// it), any other to `toolsize-state.json.corrupt-<unix>`.
    pub(crate) fn move_aside(&self, why: &ReadError) -> Result<PathBuf, StoreError> {
        let now = crate::collector::state::now_unix();
        let aside = self.dir.join(match why.unsupported_version() {
            Some(v) => format!("{SNAPSHOT_FILE}.v{v}-{now}"),
            None => format!("{SNAPSHOT_FILE}.corrupt-{now}"),
        });
        fs::rename(&self.path, &aside).map_err(|source| StoreError::Io {
            op: "move aside",
            path: self.path.clone(),
            source,
        })?;
        tracing::error!(
            error = %why,
            path = %self.path.display(),
            moved_to = %aside.display(),
            "Snapshot cannot be read; moved aside, starting with empty state."
        );
        Ok(aside)
    }

    /// Writes `bytes` atomically: temp file, fsync, rename, fsync of the directory.
    pub(crate) fn write(&self, bytes: &[u8]) -> Result<(), StoreError> {
        let tmp = self.tmp_path();
        let io = |op, path: &Path| {
            let path = path.to_owned();
            move |source| StoreError::Io { op, path, source }
        };
        let written = (|| {
            let mut f = File::create(&tmp).map_err(io("create", &tmp))?;
            f.write_all(bytes).map_err(io("write", &tmp))?;
            f.sync_all().map_err(io("fsync", &tmp))?;
            drop(f);
            fs::rename(&tmp, &self.path).map_err(io("rename", &self.path))
        })();
        if written.is_err() {
            // A partial file must not keep a full disk full; the previous snapshot stays.
            let _ = fs::remove_file(&tmp);
        }
        written?;
        if let Ok(d) = File::open(&self.dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }

    /// The temporary file a write goes through.
    pub(crate) fn tmp_path(&self) -> PathBuf {
        self.dir.join(format!(".{SNAPSHOT_FILE}.tmp"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_leaves_no_temporary_file() {
        let dir = std::env::temp_dir().join(format!("toolsize-store-full-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let store = Store::open(&dir).unwrap();
        store.write(b"{}").unwrap();
        // Disk full: the temporary file is /dev/full.
        std::os::unix::fs::symlink("/dev/full", store.tmp_path()).unwrap();
        let e = store.write(b"{\"x\":1}").unwrap_err().to_string();
        assert!(e.contains("write"), "{e}");
        assert!(fs::symlink_metadata(store.tmp_path()).is_err(), "tmp left");
        assert_eq!(
            fs::read(store.path()).unwrap(),
            b"{}",
            "previous snapshot kept"
        );
        // A directory where the snapshot goes: the rename fails, the temporary file goes.
        fs::remove_file(store.path()).unwrap();
        fs::create_dir_all(store.path().join("x")).unwrap();
        assert!(store.write(b"{}").is_err());
        assert!(!store.tmp_path().exists(), "tmp left");
        fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn corrupt_snapshot_is_moved_aside() {
        let dir = std::env::temp_dir().join(format!("toolsize-store-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let store = Store::open(&dir).unwrap();
        assert!(matches!(store.load().unwrap(), Found::Nothing));
        store.write(b"{not json").unwrap();
        assert!(matches!(
            store.load().unwrap(),
            Found::Refused { moved: true }
        ));
        assert!(!store.path().exists());
        let aside: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains("corrupt"))
            .collect();
        assert_eq!(aside.len(), 1);
        fs::remove_dir_all(dir).ok();
    }
}
