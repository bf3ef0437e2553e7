//! The handle receivers append through ([`Wal`]) and the one writer thread behind it.
//!
//! A receiver that has decoded a request with tool records reserves its place in the
//! aggregator's queue (a full queue is refused as before, before anything is written), then
//! hands the request's protobuf bytes, its batch and the reserved place to the writer
//! ([`Wal::append`]) and waits. The writer, one thread, wakes at a request, sleeps the commit
//! delay (`store.wal_commit_delay`) so that the requests arriving meanwhile join it, takes every
//! request waiting (up to [`MAX_GROUP`] of them or [`MAX_GROUP_BYTES`]), gives each the next
//! sequence number, appends their frames to the active segment in one write and calls
//! `fdatasync` once for the group (group commit, counted in `toolsize_wal_syncs_total`). The
//! delay is added to each logged request's answer; what it saves is the fsync's fixed cost (task
//! switches, the journal, the disk's notification), paid per group instead of per request. Only
//! then does it queue each batch to the aggregator, in sequence order, and release its receiver,
//! which answers 200. Queueing on the writer rather than in the receiver keeps the aggregator's
//! queue in sequence order, so "the highest sequence ingested" is a watermark below which
//! everything is in the state, and a client that hangs up while waiting cannot leave a durable
//! request out of the state.
//!
//! Under load, at most [`QUEUE`] requests wait for the writer; past them a request is refused
//! at once as `overloaded` ([`WalError::Busy`]). A failed write or fsync refuses every request
//! of the group (503 + `Retry-After`, reason `wal_failed`) and logs why; nothing of them is
//! kept. A full active segment is rotated; past [`MAX_SEGMENTS`] closed segments every group is
//! refused ([`WalError::Full`]) until a snapshot lets compaction delete some.

use std::fs;
use std::sync::Arc;
use std::time::Duration;

use prost::bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use super::active::Active;
use super::frame::frame_head;
use super::replay::Recovered;
use super::segments::Segments;
use super::{io, WalError, MAX_GROUP, MAX_GROUP_BYTES, MAX_SEGMENTS, QUEUE, SEGMENT_BYTES};
use crate::collector::ingest::record::Batch;
use crate::collector::stats::OtlpSignal;
use crate::collector::SelfStats;

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
        let segments = Arc::new(Segments::new(
            recovered.dir,
            recovered.closed,
            active.direct.is_some(),
        ));
        Self::spawn(active, next, commit_delay, segments, stats)
    }

    /// Starts the writer thread appending to `active` from sequence `next`, waiting
    /// `commit_delay` after a group's first request.
    pub(super) fn spawn(
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
    use std::fs::{self, File};

    use super::*;
    use crate::collector::ingest::wal::tests::{
        append_all, batch, dir, full_disk_wal, replayed, spawn_on,
    };
    use crate::collector::ingest::wal::{replay, WAL_DIR};

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
    use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
    use opentelemetry_proto::tonic::trace::v1::Span;
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
        crate::collector::ingest::wire::encode_spans(vec![span])
    }

    /// With the log's segment on a full disk, an OTLP/HTTP export is answered 503 with
    /// `Retry-After`, counted as `wal_failed`, and nothing reaches the aggregator.
    #[tokio::test]
    async fn a_failed_log_write_is_answered_503_and_counted() {
        let stats = Arc::new(SelfStats::default());
        let wal = crate::collector::ingest::wal::tests::full_disk_wal(std::env::temp_dir(), &stats);
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
