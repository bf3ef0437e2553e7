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
//! of the turns: the timers cost a few clock reads when not due. (Timers behind data in a
//! `biased` select are reached only when the queue is empty: under sustained load, never; the
//! test below wrote no snapshot in a second that way.)
//!
//! **Snapshots are copied, not serialised, here.** At the tick the aggregator takes a
//! [`Capture`](crate::collector::persist::snapshot::Capture): a copy of the series (their
//! histograms' counts copied whole, a few allocations and memory copies per series) and a few
//! numbers. Building the file's types from it, encoding, writing and fsyncing run on a blocking
//! thread, so ingestion pauses only for the copy (`cargo bench --features collector --bench
//! snapshot` measures both at 1,500 tools). One write is in flight at a time; a tick that comes
//! while one is in flight is taken as soon as it ends, so what is on disk is at most one
//! interval plus one write old (two writes when writes take longer than the interval).
//! `toolsize_snapshot_age_seconds` is the age of the last capture on disk,
//! `toolsize_snapshot_write_seconds` the last write's duration, counted from when it was due
//! (so a capture that waited for a turn of this loop or for the previous write is counted in
//! it); `/readyz` answers 503 past two intervals + 5 s.
//!
//! **Batches close together are recorded together.** A batch that comes within [`HOLD_GAP`]
//! of the one before is held, and the batches held are recorded when [`HOLD_BATCHES`] are
//! held or the first has waited [`HOLD_FOR`] (before a command, a shutdown, or a batch that
//! comes after a longer gap), one a turn of the loop, so the timers keep their bound. At a
//! steady rate of requests the state a batch touches (the series, their histograms, the rules'
//! tables, the code itself) is then read from memory once for several requests, rather than
//! after every sleep between two. The context ledger applies the events of every batch held
//! together when the first is recorded (a session's entry read once for all of them), so a
//! snapshot tick records what is held before it captures: ledger and series stay in step.
//! Requests far apart are recorded as they come (no timer wakes the daemon for them), and
//! under a queue that never empties nothing waits. A held batch has been taken from the queue
//! (its request is offered to the upstreams then, when the daemon forwards); it counts as
//! queued in the loss bound below, and readers see it, as they see the queued ones. An alert
//! of a held batch leaves up to [`HOLD_FOR`] later.
//!
//! **The loss bound.** A `kill -9` or a power loss loses what was acknowledged since the
//! capture on disk, that age, plus the wait of the batches still queued (a request is
//! acknowledged when its batch is queued: at most `otlp.queue_capacity` requests, and the
//! [`HOLD_BATCHES`] held). Nothing else is held back: an orderly stop drains the queue and
//! writes a final snapshot. With the write-ahead log on (`store.durability = "wal"`) nothing
//! acknowledged is lost: a batch is queued only once its request is durable, carries its
//! sequence, and the capture records the highest sequence ingested, from which the log is
//! replayed at start ([`crate::collector::ingest::wal`]).

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

/// The most batches held before they are recorded together (see the module doc).
const HOLD_BATCHES: usize = 4;
/// A batch is held when the one before it came this close.
const HOLD_GAP: Duration = Duration::from_millis(10);
/// The longest a held batch waits.
const HOLD_FOR: Duration = Duration::from_millis(25);

/// The batches held to be recorded together, when the last one came, and whether they are
/// due: then they are recorded one a turn of the loop, so timers still run between two.
#[derive(Default)]
struct Held {
    batches: std::collections::VecDeque<Batch>,
    last: Option<tokio::time::Instant>,
    due: bool,
}

impl Held {
    /// Takes `b` from the queue and holds it; the batches held are due when it came after a
    /// longer gap or makes [`HOLD_BATCHES`]. Returns when they are due at the latest, when `b`
    /// is the first held.
    fn take(&mut self, mut b: Batch) -> Option<tokio::time::Instant> {
        let now = tokio::time::Instant::now();
        let close = self.last.is_some_and(|l| now.duration_since(l) < HOLD_GAP);
        self.last = Some(now);
        b.offer();
        self.batches.push_back(b);
        if !close || self.batches.len() >= HOLD_BATCHES {
            self.due = true;
            return None;
        }
        (self.batches.len() == 1).then(|| now + HOLD_FOR)
    }

    /// Records the oldest batch held.
    fn record_one(&mut self, state: &mut State, stats: &SelfStats) {
        self.apply_contexts(state);
        if let Some(b) = self.batches.pop_front() {
            ingest(state, stats, b);
        }
        self.due = !self.batches.is_empty();
    }

    /// Records every batch held, in the order they came.
    fn record(&mut self, state: &mut State, stats: &SelfStats) {
        self.apply_contexts(state);
        for b in self.batches.drain(..) {
            ingest(state, stats, b);
        }
        self.due = false;
    }

    /// Applies the context events of the batches held, those not applied yet, to the ledger
    /// together: a session's events of all of them in one run, its entry read from memory once
    /// for them all rather than once a batch.
    fn apply_contexts(&mut self, state: &mut State) {
        let contexts: Vec<_> = self.batches.iter_mut().map(Batch::take_context).collect();
        let batches: Vec<_> = (contexts.iter().zip(&self.batches))
            .filter(|(c, _)| !c.is_empty())
            .map(|(c, b)| (c, b.records()))
            .collect();
        if !batches.is_empty() {
            state.context.record_batches(&batches, now_unix_ms());
        }
    }
}

/// The snapshots of a data directory: the write in flight, and whether a tick came meanwhile.
struct Snapshots {
    store: Arc<Store>,
    stats: Arc<SelfStats>,
    writing: Option<JoinHandle<()>>,
    /// A tick came (when) while a write was in flight: the next capture is due when it ends.
    due: Option<Instant>,
}

impl Snapshots {
    /// At a tick due at `due`: a capture now, or as soon as the write in flight ends.
    fn tick(&mut self, state: &State, alerts: Vec<SavedAlert>, due: Instant) {
        if self.writing.is_some() {
            self.due = Some(self.due.unwrap_or(due));
        } else {
            self.start(state, alerts, due);
        }
    }

    /// The write in flight ended: the capture that waited for it, if any.
    fn written(&mut self, state: &State, alerts: impl FnOnce() -> Vec<SavedAlert>) {
        self.writing = None;
        if let Some(due) = self.due.take() {
            self.start(state, alerts(), due);
        }
    }

    /// Captures the state (the only part on this task) and writes it on a blocking thread;
    /// `due`: when the snapshot was due (its write time is counted from there).
    fn start(&mut self, state: &State, alerts: Vec<SavedAlert>, due: Instant) {
        let captured_ms = now_unix_ms();
        let capture = state.capture();
        let (store, stats) = (self.store.clone(), self.stats.clone());
        self.writing = Some(tokio::task::spawn_blocking(move || {
            write(&capture, alerts, &store, &stats, due, captured_ms);
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
        due: None,
    });
    let mut held = Held::default();
    let hold = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(hold);
    loop {
        // Timers first, then commands, then one batch: see the module doc.
        tokio::select! {
            biased;
            due = tick.tick() => {
                if let Some(s) = &mut snapshots {
                    // The ledger has applied the held batches' events: their records too.
                    held.record(&mut state, &stats);
                    s.tick(&state, saved(), due.into_std());
                }
            }
            _ = evaluate.tick() => state.evaluate_observers_ms(now_unix_ms()),
            _ = flush.tick() => {
                state.release_joined(now_unix_ms());
                state.context.settle(now_unix_ms());
                state.context.expire(now_unix_ms());
                state.tick_observers();
            }
            () = write_ended(snapshots.as_mut().and_then(|s| s.writing.as_mut())) => {
                if let Some(s) = &mut snapshots {
                    s.written(&state, saved);
                }
            }
            () = &mut hold, if !held.batches.is_empty() && !held.due => held.due = true,
            () = std::future::ready(()), if held.due => held.record_one(&mut state, &stats),
            cmd = control.recv() => {
                // What was acknowledged before the command is recorded first.
                held.record(&mut state, &stats);
                match cmd {
                Some(Command::Shutdown { reply }) => {
                    while let Ok(b) = data.try_recv() {
                        ingest(&mut state, &stats, b);
                    }
                    // Every call of a coding agent still waiting for its other signals.
                    state.release_joined(u64::MAX);
                    state.context.settle(u64::MAX);
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
                Some(Command::Retune { old, new, reply }) => {
                    let _ = reply.send(state.retune_observers(&old, &new));
                }
                Some(Command::Restack {
                    stacks,
                    size_bounds,
                    reply,
                }) => {
                    let _ = reply.send(state.restack(stacks, size_bounds));
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
                }
            },
            batch = data.recv() => match batch {
                Some(b) => {
                    if let Some(due) = held.take(b) {
                        hold.as_mut().reset(due);
                    }
                }
                None => return held.record(&mut state, &stats),
            },
        }
    }
}

fn ingest(state: &mut State, stats: &SelfStats, mut b: Batch) {
    if let Some(seq) = b.seq() {
        state.wal_seq = Some(state.wal_seq.map_or(seq, |s| s.max(seq)));
    }
    let now_ms = now_unix_ms();
    let context = b.take_context();
    let records = b.take();
    if !context.is_empty() {
        state.context.record_batch(&context, &records, now_ms);
    }
    state.record_owned_batch_ms(records, now_ms);
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
        Command::Sessions {
            limit,
            service,
            reply,
        } => {
            let view = state
                .context
                .sessions_view(limit, service.as_deref(), now_unix_ms());
            let _ = reply.send(view);
        }
        Command::Metrics { native, reply } => {
            let _ = reply.send(Frame::capture_with(state, now, native));
        }
        Command::Ping { reply } => {
            let _ = reply.send(());
        }
        Command::Shutdown { .. }
        | Command::Fail { .. }
        | Command::Retune { .. }
        | Command::Restack { .. } => {}
    }
}

/// Builds the file from `capture`, encodes it and writes it (on a blocking thread); counts the
/// outcome. `at`: when the snapshot was due; `captured_ms`: when the capture was taken.
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
        Ok(()) => {
            stats.snapshot_written(captured_ms, at.elapsed());
            // What the snapshot holds is on disk: the log entries it covers can go.
            if let (Some(seq), Some(wal)) = (capture.wal_seq(), store.wal()) {
                wal.compact(seq);
                stats.wal_segments(wal.count() as u64);
            }
        }
        Err(e) => {
            stats.snapshot_failed();
            tracing::error!(error = %e, path = %store.path().display(), "Snapshot write failed.");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    use super::*;
    use crate::collector::state::tests::{known, limits, rec};
    use crate::collector::state::{Limits, Observed, ResultObserver, SeriesMap};
    use crate::collector::stats::OtlpSignal;

    /// Counts the window rules' evaluations and the observers' ticks, and takes
    /// [`SLOW_PER_RECORD`] of the aggregator's time per record (an aggregator short of CPU), so
    /// that it is slower than the producers.
    struct Timers {
        periodic: Arc<AtomicU64>,
        ticks: Arc<AtomicU64>,
    }

    impl ResultObserver for Timers {
        fn observe(&mut self, _: &Observed<'_>) {
            let t = Instant::now();
            while t.elapsed() < SLOW_PER_RECORD {
                std::hint::spin_loop();
            }
        }
        fn periodic(&mut self, _: &SeriesMap, _: &Limits, _: u64, _: u64) {
            self.periodic.fetch_add(1, Relaxed);
        }
        fn tick(&mut self) {
            self.ticks.fetch_add(1, Relaxed);
        }
    }

    /// A batch that comes soon after the one before is held until [`HOLD_BATCHES`] are held
    /// or [`HOLD_FOR`] passes, and a command records what is held before it answers; a batch
    /// that comes after a longer gap is recorded at once.
    #[tokio::test(start_paused = true)]
    async fn batches_close_together_are_recorded_together() {
        let stats = Arc::new(SelfStats::default());
        let (data, data_rx) = mpsc::channel(16);
        let (control, control_rx) = mpsc::channel(4);
        let hour = Duration::from_secs(3600);
        let aggregator = tokio::spawn(run(
            State::new(limits(100)),
            data_rx,
            control_rx,
            None,
            Arc::default(),
            stats.clone(),
            hour,
            hour,
        ));
        let batch = |tool: &str| {
            Batch::new(
                vec![rec(tool, known(100))],
                OtlpSignal::Traces,
                stats.clone(),
                None,
            )
        };
        let series = || stats.view().series;
        let settle = || tokio::time::sleep(Duration::from_millis(1));
        data.send(batch("t0")).await.unwrap();
        settle().await;
        assert_eq!(series(), 1, "the first batch is recorded as it comes");
        for i in 1..HOLD_BATCHES {
            data.send(batch(&format!("t{i}"))).await.unwrap();
            settle().await;
            assert_eq!(series(), 1, "batch {i}, close to the one before, is held");
        }
        data.send(batch("t_last")).await.unwrap();
        settle().await;
        assert_eq!(
            series(),
            HOLD_BATCHES as u64 + 1,
            "{HOLD_BATCHES} held: recorded together"
        );
        data.send(batch("late")).await.unwrap();
        settle().await;
        assert_eq!(series(), HOLD_BATCHES as u64 + 1, "held");
        tokio::time::sleep(HOLD_FOR).await;
        assert_eq!(series(), HOLD_BATCHES as u64 + 2, "recorded once it waited");
        // A longer gap since the last: recorded as it comes; the next, close to it, held.
        data.send(batch("again")).await.unwrap();
        settle().await;
        assert_eq!(series(), HOLD_BATCHES as u64 + 3, "after a longer gap");
        data.send(batch("read")).await.unwrap();
        settle().await;
        assert_eq!(series(), HOLD_BATCHES as u64 + 3, "held");
        let (reply, answered) = tokio::sync::oneshot::channel();
        control.send(Command::Ping { reply }).await.unwrap();
        answered.await.unwrap();
        assert_eq!(
            series(),
            HOLD_BATCHES as u64 + 4,
            "recorded before the command's answer"
        );
        tokio::time::sleep(HOLD_GAP * 2).await;
        data.send(batch("alone")).await.unwrap();
        settle().await;
        assert_eq!(
            series(),
            HOLD_BATCHES as u64 + 5,
            "after a longer gap: recorded as it comes"
        );
        let (reply, done) = tokio::sync::oneshot::channel();
        control.send(Command::Shutdown { reply }).await.unwrap();
        done.await.unwrap();
        aggregator.await.unwrap();
    }

    /// The aggregator's time per record in [`timers_run_on_time_while_the_queue_never_empties`].
    const SLOW_PER_RECORD: Duration = Duration::from_micros(20);

    /// Producers keep the queue full (they wait only for room) and the aggregator takes 4 ms a
    /// batch, so it never finds the queue empty: the snapshot and the window rules still run
    /// every 50 ms interval. (With the batches ahead of the timers, as before, no snapshot was
    /// written in the second.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn timers_run_on_time_while_the_queue_never_empties() {
        let dir = std::env::temp_dir().join(format!("toolsize-agg-timers-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = Arc::new(Store::open(&dir).unwrap());
        let stats = Arc::new(SelfStats::default());
        let (periodic, ticks) = (Arc::default(), Arc::default());
        let mut state = State::new(limits(100));
        state.add_observer(Box::new(Timers {
            periodic: Arc::clone(&periodic),
            ticks: Arc::clone(&ticks),
        }));
        const CAPACITY: usize = 8;
        let (data, data_rx) = mpsc::channel(CAPACITY);
        let (control, control_rx) = mpsc::channel(4);
        let interval = Duration::from_millis(50);
        let aggregator = tokio::spawn(run(
            state,
            data_rx,
            control_rx,
            Some(store.clone()),
            Arc::default(),
            stats.clone(),
            interval,
            interval,
        ));
        // Three producers cloning ready records: faster than the aggregator records them.
        let records: Arc<Vec<_>> = Arc::new(
            (0..200u64)
                .map(|k| rec(&format!("tool{}", k % 50), known(100 + k)))
                .collect(),
        );
        let producers: Vec<_> = (0..3)
            .map(|_| {
                let (data, stats, records) = (data.clone(), stats.clone(), records.clone());
                tokio::spawn(async move {
                    loop {
                        let batch =
                            Batch::new(records.to_vec(), OtlpSignal::Traces, stats.clone(), None);
                        if data.send(batch).await.is_err() {
                            return;
                        }
                    }
                })
            })
            .collect();
        // Filled before the aggregator takes its first batch.
        while data.capacity() > 0 {
            tokio::task::yield_now().await;
        }
        let began = Instant::now();
        let mut empty_seen = 0;
        while began.elapsed() < Duration::from_secs(1) {
            empty_seen += usize::from(data.capacity() == CAPACITY);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let elapsed = began.elapsed();
        let (written, evaluated, ticked) = (
            stats.view().snapshots_written,
            periodic.load(Relaxed),
            ticks.load(Relaxed),
        );
        for p in producers {
            p.abort();
        }
        let (reply, done) = tokio::sync::oneshot::channel();
        control.send(Command::Shutdown { reply }).await.unwrap();
        done.await.unwrap();
        aggregator.await.unwrap();
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(empty_seen, 0, "the queue was seen empty");
        // 20 intervals in the second: at least half of the evaluations ran. A snapshot is
        // skipped while the previous write is on the disk, and on a loaded machine a write can
        // take most of the second, so only "more than one" is asked of them: with ingest ahead
        // of the timers none is written at all.
        let due = (elapsed.as_millis() / interval.as_millis()) as u64;
        assert!(written >= 2, "{written} snapshots written in {elapsed:?}");
        assert!(
            evaluated >= due / 2,
            "{evaluated} evaluations in {elapsed:?}"
        );
        assert!(ticked > 0, "no observer tick");
    }
}
