//! The aggregator task: the one loop that owns the [`State`].
//!
//! It takes batches from the receivers (bounded queue), answers the readers' [`Command`]s, and
//! runs four timers: the window rules every evaluation interval, the release of the coding
//! agents' joined calls and the retry of deferred alert events every [`FLUSH_INTERVAL`], and a
//! snapshot every `snapshot_interval`. For `/metrics` it hands out a [`Frame`]: the numbers,
//! copied; the text is rendered by the reader, off this task, so a scrape holds ingestion only
//! for the copy.
//!
//! **Timers cannot starve.** Each turn of the loop does a bounded piece of work (one batch, one
//! command, or one timer) and looks at the timers first: a due timer runs before the next batch,
//! whatever the ingest rate, so under a queue that never empties a timer is late by at most one
//! batch's recording (a batch is one request, bounded by `otlp.max_request_bytes`) or one
//! command (which first drains at most the batches queued when it came). Ingest keeps the rest
//! of the turns: the timers cost a few clock reads when not due. (Timers behind data, as a
//! `biased` select would put them, are reached only when the queue is empty: under sustained
//! load, never.)
//!
//! **Snapshots are copied, not serialised, here.** At the tick the aggregator takes a
//! [`Capture`](crate::collector::persist::snapshot::Capture): a copy of the series (their
//! histograms' counts copied whole, a few allocations and memory copies per series) and a few
//! numbers. Building the file's types from it, encoding, writing and fsyncing run on a blocking
//! thread, so ingestion pauses only for the copy (`cargo bench --features collector --bench
//! snapshot` measures both at 1,500 tools). One write is in flight at a time; a tick that comes
//! while one is in flight is taken as soon as it ends, so what is on disk is never older than
//! one interval plus one write: that is what a `kill -9` or a power loss can lose of what was
//! acknowledged. `toolsize_snapshot_age_seconds` is the age of the last capture on disk,
//! `toolsize_snapshot_write_seconds` the last write's duration; `/readyz` answers 503 past two
//! intervals + 5 s.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::collector::alerts::SavedAlert;
use crate::collector::ingest::record::Batch;
use crate::collector::persist::format;
use crate::collector::persist::snapshot::Capture;
use crate::collector::persist::store::Store;
use crate::collector::read::exposition::Frame;
use crate::collector::read::Command;
use crate::collector::state::{now_unix, now_unix_ms, State};
use crate::collector::SelfStats;

/// How often the observers may send what waits when no batch comes.
pub(crate) const FLUSH_INTERVAL: Duration = Duration::from_millis(100);

/// Batches drained before answering a command.
const DRAIN_BEFORE_ANSWER: usize = 4096;

/// The snapshots of a data directory: the write in flight, and whether a tick came meanwhile.
struct Snapshots {
    store: Arc<Store>,
    stats: Arc<SelfStats>,
    writing: Option<JoinHandle<()>>,
    /// A tick came while a write was in flight: the next capture is due when it ends.
    due: bool,
}

impl Snapshots {
    /// At a tick: a capture now, or as soon as the write in flight ends.
    fn tick(&mut self, state: &State, alerts: Vec<SavedAlert>) {
        if self.writing.is_some() {
            self.due = true;
        } else {
            self.start(state, alerts);
        }
    }

    /// The write in flight ended: the capture that waited for it, if any.
    fn written(&mut self, state: &State, alerts: impl FnOnce() -> Vec<SavedAlert>) {
        self.writing = None;
        if std::mem::take(&mut self.due) {
            self.start(state, alerts());
        }
    }

    /// Captures the state (the only part on this task) and writes it on a blocking thread.
    fn start(&mut self, state: &State, alerts: Vec<SavedAlert>) {
        let (at, captured_ms) = (Instant::now(), now_unix_ms());
        let capture = state.capture();
        let (store, stats) = (self.store.clone(), self.stats.clone());
        self.writing = Some(tokio::task::spawn_blocking(move || {
            write(&capture, alerts, &store, &stats, at, captured_ms);
        }));
    }

    /// Waits for the write in flight (at shutdown, before the final one).
    async fn settle(&mut self) {
        if let Some(w) = self.writing.take() {
            let _ = w.await;
        }
    }
}

/// The end of the write in flight; pending forever when there is none.
async fn write_ended(writing: Option<&mut JoinHandle<()>>) {
    match writing {
        Some(w) => {
            let _ = w.await;
        }
        None => std::future::pending().await,
    }
}

/// Runs the aggregator until a [`Command::Shutdown`] or until every sender is gone.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run(
    mut state: State,
    mut data: mpsc::Receiver<Batch>,
    mut control: mpsc::Receiver<Command>,
    store: Option<Arc<Store>>,
    alerts: Arc<RwLock<Vec<SavedAlert>>>,
    stats: Arc<SelfStats>,
    snapshot_interval: Duration,
    evaluation_interval: Duration,
) {
    let saved = || alerts.read().map(|a| a.clone()).unwrap_or_default();
    let mut tick = tokio::time::interval(snapshot_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    let mut evaluate = tokio::time::interval(evaluation_interval.max(Duration::from_millis(10)));
    evaluate.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    evaluate.tick().await;
    // Alert events that found the channel full are retried after every batch, and on this
    // timer when no batch comes.
    let mut flush = tokio::time::interval(FLUSH_INTERVAL);
    flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut snapshots = store.map(|store| Snapshots {
        store,
        stats: stats.clone(),
        writing: None,
        due: false,
    });
    loop {
        // Timers first, then commands, then one batch: see the module doc.
        tokio::select! {
            biased;
            _ = tick.tick() => {
                if let Some(s) = &mut snapshots {
                    s.tick(&state, saved());
                }
            }
            _ = evaluate.tick() => state.evaluate_observers_ms(now_unix_ms()),
            _ = flush.tick() => {
                state.release_joined(now_unix_ms());
                state.tick_observers();
            }
            () = write_ended(snapshots.as_mut().and_then(|s| s.writing.as_mut())) => {
                if let Some(s) = &mut snapshots {
                    s.written(&state, saved);
                }
            }
            cmd = control.recv() => match cmd {
                Some(Command::Shutdown { reply }) => {
                    while let Ok(b) = data.try_recv() {
                        ingest(&mut state, &stats, b);
                    }
                    // Every call of a coding agent still waiting for its other signals.
                    state.release_joined(u64::MAX);
                    if let Some(s) = &mut snapshots {
                        s.settle().await;
                        let (at, captured_ms) = (Instant::now(), now_unix_ms());
                        let capture = state.capture();
                        let (store, stats) = (s.store.clone(), stats.clone());
                        let alerts = saved();
                        let _ = tokio::task::spawn_blocking(move || {
                            write(&capture, alerts, &store, &stats, at, captured_ms);
                        })
                        .await;
                    }
                    let _ = reply.send(());
                    return;
                }
                Some(Command::Fail { after }) => {
                    let _ = after.await;
                    panic!("injected fault: the aggregator stops");
                }
                Some(cmd) => {
                    // Read-your-writes: everything acknowledged before the question is counted
                    // in the answer: the batches queued when it came (at most the queue's
                    // capacity), not those that keep arriving, so a flood cannot starve readers.
                    for _ in 0..data.len().min(DRAIN_BEFORE_ANSWER) {
                        match data.try_recv() {
                            Ok(b) => ingest(&mut state, &stats, b),
                            Err(_) => break,
                        }
                    }
                    answer(&state, cmd)
                }
                None => {}
            },
            batch = data.recv() => match batch {
                Some(b) => ingest(&mut state, &stats, b),
                None => return,
            },
        }
    }
}

fn ingest(state: &mut State, stats: &SelfStats, b: Batch) {
    state.record_owned_batch_ms(b.take(), now_unix_ms());
    stats.set_series(state.series_count() as u64, state.overflow_records);
}

fn answer(state: &State, cmd: Command) {
    let now = now_unix();
    match cmd {
        Command::Tools {
            window,
            service,
            reply,
        } => {
            let _ = reply.send(state.tools_view(window.as_deref(), service.as_deref(), now));
        }
        Command::Tool {
            tool,
            window,
            service,
            reply,
        } => {
            let _ = reply.send(state.tool_view(&tool, window.as_deref(), service.as_deref(), now));
        }
        Command::History {
            tool,
            service,
            reply,
        } => {
            let _ = reply.send(state.history_view(&tool, service.as_deref(), now));
        }
        Command::Metrics { native, reply } => {
            let _ = reply.send(Frame::capture_with(state, now, native));
        }
        Command::Ping { reply } => {
            let _ = reply.send(());
        }
        Command::Shutdown { .. } | Command::Fail { .. } => {}
    }
}

/// Builds the file from `capture`, encodes it and writes it (on a blocking thread); counts the
/// outcome. `at` and `captured_ms`: when the capture was taken.
fn write(
    capture: &Capture,
    alerts: Vec<SavedAlert>,
    store: &Store,
    stats: &SelfStats,
    at: Instant,
    captured_ms: u64,
) {
    let bytes = match format::encode(&capture.snapshot(now_unix(), alerts)) {
        Ok(b) => b,
        Err(e) => {
            stats.snapshot_failed();
            tracing::error!(error = %e, "Snapshot serialization failed.");
            return;
        }
    };
    match store.write(&bytes) {
        Ok(()) => stats.snapshot_written(captured_ms, at.elapsed()),
        Err(e) => {
            stats.snapshot_failed();
            tracing::error!(error = %e, path = %store.path().display(), "Snapshot write failed.");
        }
    }
}
