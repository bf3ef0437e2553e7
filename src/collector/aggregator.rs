//! The aggregator task: the one loop that owns the [`State`].
//!
//! It takes batches from the receivers (bounded queue), releases the coding agents' calls whose
//! signals were joined ([`crate::collector::state::join`]) on the flush timer, answers the
//! readers' [`Command`]s,
//! runs the window rules every evaluation interval and writes a snapshot every
//! `snapshot_interval` on a blocking thread (a slow disk delays only the next snapshot, never
//! ingestion). For `/metrics` it hands out a [`Frame`]: the numbers, copied; the text is
//! rendered by the reader, off this task, so a scrape holds ingestion only for the copy.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::collector::alerts::SavedAlert;
use crate::collector::ingest::record::Batch;
use crate::collector::persist::store::Store;
use crate::collector::read::exposition::Frame;
use crate::collector::read::Command;
use crate::collector::state::{now_unix, now_unix_ms, State};
use crate::collector::SelfStats;

/// How often the observers may send what waits when no batch comes.
pub(crate) const FLUSH_INTERVAL: Duration = Duration::from_millis(100);

/// Batches drained before answering a command.
const DRAIN_BEFORE_ANSWER: usize = 4096;

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
    let mut writing: Option<tokio::task::JoinHandle<()>> = None;
    loop {
        tokio::select! {
            biased;
            cmd = control.recv() => match cmd {
                Some(Command::Shutdown { reply }) => {
                    while let Ok(b) = data.try_recv() {
                        ingest(&mut state, &stats, b);
                    }
                    // Every call of a coding agent still waiting for its other signals.
                    state.release_joined(u64::MAX);
                    if let Some(w) = writing.take() {
                        let _ = w.await;
                    }
                    if let Some(store) = &store {
                        let bytes = serde_json::to_vec(&state.snapshot(now_unix(), saved()));
                        write_snapshot(bytes, store.clone(), &stats).await;
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
            _ = evaluate.tick() => state.evaluate_observers_ms(now_unix_ms()),
            _ = flush.tick() => {
                state.release_joined(now_unix_ms());
                state.tick_observers();
            }
            _ = tick.tick() => {
                if let Some(store) = &store {
                    if writing.as_ref().is_none_or(|w| w.is_finished()) {
                        let bytes = serde_json::to_vec(&state.snapshot(now_unix(), saved()));
                        let store = store.clone();
                        let stats = stats.clone();
                        writing = Some(tokio::task::spawn_blocking(move || match bytes {
                            Ok(b) => store_write(&store, &b, &stats),
                            Err(e) => tracing::error!(error = %e, "Snapshot serialization failed."),
                        }));
                    }
                }
            }
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
        Command::Shutdown { .. } | Command::Fail { .. } | Command::Retune { .. } => {}
    }
}

async fn write_snapshot(
    bytes: Result<Vec<u8>, serde_json::Error>,
    store: Arc<Store>,
    stats: &Arc<SelfStats>,
) {
    match bytes {
        Ok(b) => {
            let stats = stats.clone();
            let _ = tokio::task::spawn_blocking(move || store_write(&store, &b, &stats)).await;
        }
        Err(e) => tracing::error!(error = %e, "Snapshot serialization failed."),
    }
}

fn store_write(store: &Store, bytes: &[u8], stats: &SelfStats) {
    match store.write(bytes) {
        Ok(()) => stats.snapshot_written(now_unix()),
        Err(e) => {
            stats.snapshot_failed();
            tracing::error!(error = %e, path = %store.path().display(), "Snapshot write failed.");
        }
    }
}
