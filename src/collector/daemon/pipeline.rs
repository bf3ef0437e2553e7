//! The pipeline without sockets: the aggregator task and the ingest path, built from the
//! configuration, with the store opened, its snapshot restored and the write-ahead log replayed
//! above it first ([`Pipeline::spawn`]).
//!
//! Start: an unusable data directory, token, TLS set-up, forward upstream or write-ahead log
//! stops the spawn with a [`CollectorError`] naming it; a refused snapshot is moved aside and
//! counted, and the daemon starts empty. Under load the ingest path never waits on the
//! aggregator (its queue is bounded, `otlp.queue_capacity`); a panic of the aggregator is
//! logged, later requests are refused as `aggregator_stopped` and `/readyz` answers 503.
//! Shutdown drains the queue and writes the final snapshot; [`Stopped`] says whether it failed.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::collector::ingest::recognize::Recognizer;
use crate::collector::ingest::{self, Ingest};
use crate::collector::persist::store::{Found, Store};
use crate::collector::read::{self, Command};
use crate::collector::state::{self, Limits, State};
use crate::collector::{
    aggregator, alerts, config, forward, net, persist, stats, CollectorError, Config, Fault,
    SelfStats, Stopped,
};

/// After a replay that fed entries to the state: a snapshot of it at once, then the segments it
/// covers deleted, so that what a replay reads is bounded by what arrived since the last
/// snapshot, however often the daemon is restarted. A failed write is logged and counted; the
/// log then stays whole until a later snapshot.
fn compact_at_start(
    store: &Store,
    state: &State,
    alerts: &[alerts::SavedAlert],
    stats: &SelfStats,
) {
    let (Some(seq), Some(wal)) = (state.wal_seq, store.wal()) else {
        return;
    };
    if wal.count() == 0 {
        return;
    }
    let written = persist::format::encode(&state.snapshot(state::now_unix(), alerts.to_vec()))
        .map_err(|e| e.to_string())
        .and_then(|bytes| store.write(&bytes).map_err(|e| e.to_string()));
    match written {
        Ok(()) => {
            wal.compact(seq);
            stats.wal_segments(wal.count() as u64);
        }
        Err(e) => {
            stats.snapshot_failed();
            tracing::error!(error = %e, "Snapshot after the write-ahead log's replay failed; the log is kept whole.");
        }
    }
}

/// Feeds the write-ahead log of `dir` above the restored snapshot's sequence into `state`
/// through the receivers' decode path, then starts its writer. Logs and exposes how long it
/// took.
fn replay_wal(
    dir: &std::path::Path,
    commit_delay: std::time::Duration,
    state: &mut State,
    recognizer: &Recognizer,
    stats: &Arc<SelfStats>,
) -> Result<ingest::wal::Wal, CollectorError> {
    let after = state.wal_seq.unwrap_or(0);
    let now_ms = state::now_unix_ms();
    let (mut records, mut undecodable) = (0u64, 0u64);
    let recovered = ingest::wal::replay(dir, after, |signal, body| {
        let found = match signal {
            stats::OtlpSignal::Traces => ingest::decode::recognize_protobuf(recognizer, body),
            stats::OtlpSignal::Logs => ingest::decode::recognize_logs_protobuf(recognizer, body),
            stats::OtlpSignal::Metrics => return,
        };
        match found {
            Ok(r) => {
                records += r.records.len() as u64;
                // The context ledger's events, as the aggregator takes them: sessions too.
                if !r.context.is_empty() {
                    state.context.record_batch(&r.context, &r.records, now_ms);
                }
                state.record_owned_batch_ms(r.records, now_ms);
            }
            // Decoded once before it was logged: only a change of recognition could do this.
            Err(_) => undecodable += 1,
        }
    })
    .map_err(|e| CollectorError::Wal(e.to_string()))?;
    state.wal_seq = Some(recovered.last_seq);
    stats.wal_replayed(recovered.took);
    tracing::info!(
        after_seq = after,
        last_seq = recovered.last_seq,
        entries = recovered.replayed,
        records,
        undecodable,
        segments = recovered.segments_read,
        took_ms = recovered.took.as_secs_f64() * 1e3,
        "Replayed the write-ahead log."
    );
    ingest::wal::Wal::start(recovered, commit_delay, stats.clone())
        .map_err(|e| CollectorError::Wal(e.to_string()))
}

/// The aggregator and the ingest path, without sockets: what the routers need. Tests build one
/// and drive [`ingest::http::router`] and [`read::api::router`] with `oneshot`.
#[derive(Debug)]
pub struct Pipeline {
    /// The ingest path for receivers.
    pub ingest: Arc<Ingest>,
    /// State for the admin router.
    pub api: read::api::ApiState,
    /// Self-metrics.
    pub stats: Arc<SelfStats>,
    pub(super) control: mpsc::Sender<Command>,
    aggregator: JoinHandle<()>,
    /// A data directory is configured: a final snapshot is due at shutdown.
    persistent: bool,
}

/// What [`open_store`] gives: the store, the alerts restored with the snapshot, and the log.
type Opened = (
    Option<Arc<Store>>,
    Vec<alerts::SavedAlert>,
    Option<ingest::wal::Wal>,
);

/// Opens the data directory of `config`, if any: restores its snapshot into `state` and replays
/// the write-ahead log above it when the log is on.
fn open_store(
    config: &Config,
    state: &mut State,
    recognizer: &Recognizer,
    stats: &Arc<SelfStats>,
) -> Result<Opened, CollectorError> {
    let mut restored = Vec::new();
    let mut wal = None;
    let store = match &config.store.data_dir {
        Some(dir) => {
            let mut store = Store::open(dir)?;
            match store.load()? {
                Found::Snapshot(snap) => {
                    restored = state.restore(snap);
                    tracing::info!(
                        series = state.series_count(),
                        path = %store.path().display(),
                        "Restored snapshot."
                    );
                }
                Found::Refused { moved } => stats.snapshot_refused(moved),
                Found::Nothing => {}
            }
            if config.store.durability == config::Durability::Wal {
                let w = replay_wal(
                    dir,
                    config.store.wal_commit_delay.0,
                    state,
                    recognizer,
                    stats,
                )?;
                store = store.with_wal(w.segments());
                compact_at_start(&store, state, &restored, stats);
                wal = Some(w);
            } else if ingest::wal::has_segments(dir) {
                tracing::warn!(
                    path = %dir.join(ingest::wal::WAL_DIR).display(),
                    "A write-ahead log is in the data directory but store.durability is \
                     \"snapshot\": it is not replayed (what it holds above the snapshot is \
                     not restored); start with --durability wal to replay it."
                );
            }
            // Everything the state holds now is on disk (restored, or nothing).
            stats.snapshots_every(config.store.snapshot_interval.0, state::now_unix_ms());
            Some(Arc::new(store))
        }
        None => None,
    };
    Ok((store, restored, wal))
}

impl Pipeline {
    /// Spawns the aggregator (restoring the snapshot of `config.store.data_dir` if any).
    pub fn spawn(config: &Config) -> Result<Self, CollectorError> {
        let stats = Arc::new(SelfStats::default());
        let mut state = State::new(Limits::from_config(config));
        let recognizer =
            Recognizer::new(&config.recognition, config.aggregation.max_tool_name_bytes)
                .with_max_service_name_bytes(config.aggregation.max_service_name_bytes)
                .with_context_ledger(config.context.enabled);
        let (store, restored, wal) = open_store(config, &mut state, &recognizer, &stats)?;
        stats.set_series(state.series_count() as u64, state.overflow_records);
        // Limits the results were seen cut at, restored: learned again at once.
        state.seed_learned_limits();
        let unrecognised = recognizer.unrecognised().clone();
        let heard = Arc::<ingest::heard::Heard>::default();
        let (rules, alerts) = alerts::spawn(
            config,
            format!("{}/api/v1/alerts", config.admin_base_url()),
            Arc::new(alerts::AlertStats::default()),
            restored,
        );
        if let Some(rules) = rules {
            rules.attach_to(&mut state);
        }
        let (data_tx, data_rx) = mpsc::channel(config.otlp.queue_capacity);
        let (control, control_rx) = mpsc::channel(64);
        let task = tokio::spawn(aggregator::run(
            state,
            data_rx,
            control_rx,
            store,
            alerts.saved.clone(),
            stats.clone(),
            config.store.snapshot_interval.0,
            config.alerts.evaluation_interval.0,
        ));
        // A panic ends the aggregator: its queue is dropped (each batch counts itself dropped),
        // later requests are refused as `aggregator_stopped`, `/readyz` answers 503.
        let aggregator = tokio::spawn(async move {
            if let Err(e) = task.await {
                if e.is_panic() {
                    tracing::error!(
                        "Aggregator stopped (panic); nothing is recorded until the daemon is \
                         restarted, and what was queued is lost (toolsize_spans_dropped_total)."
                    );
                }
            }
        });
        let token = config.auth.token().map_err(CollectorError::Security)?;
        let auth = Arc::new(
            net::auth::Auth::new(
                token.as_deref(),
                config.auth.api_key_header.as_deref(),
                config.auth.admin.unwrap_or(true),
            )
            .map_err(|e| CollectorError::Security(format!("auth: {e}")))?,
        );
        let forward =
            forward::Forwarder::start(&config.forward).map_err(CollectorError::Forward)?;
        let ingest = Arc::new(
            Ingest::new(
                Arc::new(recognizer),
                data_tx,
                stats.clone(),
                config.otlp.max_request_bytes,
            )
            .with_max_concurrent_requests(config.otlp.max_concurrent_requests)
            .with_body_timeout(config.listeners.body_timeout.0)
            .with_auth(auth.clone())
            .with_forwarder(forward.clone())
            .with_wal(wal)
            .with_heard(heard.clone()),
        );
        Ok(Self {
            api: read::api::ApiState::new(control.clone(), stats.clone())
                .with_stack(
                    Arc::new(config.stack.clone()),
                    state::stacks::Stacks::new(&config.stack, &config.layers).others(),
                )
                .with_alerts(alerts)
                .with_otlp_addrs(config.otlp.grpc_addr.0, config.otlp.http_addr.0)
                .with_forwarder(forward)
                .with_unrecognised(unrecognised)
                .with_heard(heard)
                .with_auth(auth),
            ingest,
            stats,
            control,
            aggregator,
            persistent: config.store.data_dir.is_some(),
        })
    }

    /// Injects `fault` (tests of what a failure loses and how it is counted).
    #[doc(hidden)]
    pub async fn inject(&self, fault: Fault) {
        match fault {
            Fault::AggregatorPanicsAfter(after) => {
                let _ = self.control.send(Command::Fail { after }).await;
            }
            Fault::AlertTaskStops => self.api.alerts().stop_task().await,
        }
    }

    /// Drains the queue, writes the final snapshot and stops the aggregator.
    pub async fn shutdown(self) -> Stopped {
        let failures = self.stats.view().snapshot_failures;
        let (tx, rx) = oneshot::channel();
        let answered = match self.control.send(Command::Shutdown { reply: tx }).await {
            Ok(()) => rx.await.is_ok(),
            Err(_) => false,
        };
        let _ = self.aggregator.await;
        let v = self.stats.view();
        // A stopped aggregator wrote no final snapshot: what it held since the last one is lost.
        Stopped {
            final_snapshot_failed: (v.snapshot_failures > failures && v.snapshot_failing > 0)
                || (self.persistent && !answered),
        }
    }
}
