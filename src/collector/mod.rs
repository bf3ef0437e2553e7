//! The collector daemon (`toolsize serve`): OTLP in, per-tool size histograms out.
//!
//! ```text
//!  OTLP/gRPC :4317 ─┐                                  ┌─▶ /metrics (Prometheus text)
//!                   ├─ decode → recognise → try_send ─▶ aggregator task ─┼─▶ /api/v1/tools[/{tool}]
//!  OTLP/HTTP :4318 ─┘   (receiver tasks)   (bounded)  (owns all state)  └─▶ snapshot → data dir
//! ```
//!
//! - **Receivers** ([`receiver`]) decode protobuf / JSON / gzip, classify spans with the
//!   recognition table ([`recognize`]) and `try_send` one batch of tool records per request to the
//!   aggregator. They never block on it: a full queue refuses the request as retryable (HTTP 503 +
//!   `Retry-After`, gRPC `UNAVAILABLE`), so everything acknowledged is recorded.
//! - **The aggregator** ([`aggregator`]) is the only owner of per-(service, tool) state: HDR
//!   histograms of bytes and latency ([`histogram`]), counters, sliding windows, largest results,
//!   repeated argument hashes, a cardinality cap with an overflow series. Readers ask it through a
//!   command channel and get computed views.
//! - **Admin HTTP** ([`api`]) serves the status page `/`, `/metrics` ([`exposition`]),
//!   `/api/v1/tools`, `/api/v1/tools/{tool}`, `/api/v1/layers`, `/api/v1/alerts`, `/runbook`,
//!   `/healthz`, `/readyz`.
//! - **Layers**: the effective stack ([`crate::layers::Stack`], resolved once in
//!   [`Config::load`]) is checked by the aggregator for every result of known size; the weakest
//!   layer that cuts it is counted per series and the result listed among the recent ones.
//! - **Alerts** ([`alerts`]): rules run on the aggregator for every result and `try_send` their
//!   matches to the alert task, which deduplicates, resolves after a quiet period and publishes
//!   the current set to the log, Alertmanager and a webhook (`/api/v1/alerts` lists it).
//! - **Store** ([`store`]): snapshots every `store.snapshot_interval` and at shutdown, atomic on
//!   disk, restored at start; a corrupt file is moved aside and the daemon starts empty.
//!
//! Behaviour under load: memory is bounded by the body limit × in-flight requests, the queue
//! capacity, and `max_series` × the per-series histograms. Every refusal and drop is counted in
//! the self-metrics ([`SelfStats`], exposed on `/metrics`).
//!
//! Shutdown ([`Daemon::shutdown`], on SIGTERM/SIGINT in `toolsize serve`): listeners stop
//! accepting, in-flight requests finish, the aggregator drains its queue and writes a final
//! snapshot.

pub mod aggregator;
pub mod alerts;
pub mod api;
pub mod config;
pub mod exposition;
pub mod exposition_proto;
pub mod histogram;
pub mod receiver;
pub mod recognize;
pub mod runbook;
pub mod store;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

pub use config::Config;

use aggregator::{Command, Limits, State};
use receiver::Ingest;
use recognize::Recognizer;
use store::Store;

/// Why a whole request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusedRequest {
    /// Not decodable (bad protobuf, JSON, gzip).
    Decode,
    /// Over the body limit.
    TooLarge,
    /// Unknown content type or encoding.
    UnsupportedMediaType,
    /// The aggregator queue was full.
    Overloaded,
}

impl RefusedRequest {
    /// Every reason, in exposition order.
    pub const ALL: [RefusedRequest; 4] = [
        RefusedRequest::Decode,
        RefusedRequest::TooLarge,
        RefusedRequest::UnsupportedMediaType,
        RefusedRequest::Overloaded,
    ];

    /// The `reason` label.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusedRequest::Decode => "decode",
            RefusedRequest::TooLarge => "too_large",
            RefusedRequest::UnsupportedMediaType => "unsupported_media_type",
            RefusedRequest::Overloaded => "overloaded",
        }
    }
}

/// The daemon's own counters, shared lock-free between receivers and the aggregator.
#[derive(Debug, Default)]
pub struct SelfStats {
    requests_http: AtomicU64,
    requests_grpc: AtomicU64,
    refused_requests: [AtomicU64; 4],
    spans_tool: AtomicU64,
    spans_other: AtomicU64,
    spans_invalid: AtomicU64,
    spans_overloaded: AtomicU64,
    spans_dropped: AtomicU64,
    series: AtomicU64,
    overflow: AtomicU64,
    snapshot_last_unix: AtomicU64,
    snapshots_written: AtomicU64,
    snapshot_failures: AtomicU64,
    attributes_ignored: AtomicU64,
    /// Alert counters.
    pub alerts: Arc<alerts::AlertStats>,
}

/// A plain copy of [`SelfStats`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SelfStatsView {
    /// OTLP/HTTP requests received.
    pub requests_http: u64,
    /// OTLP/gRPC requests received.
    pub requests_grpc: u64,
    /// Requests refused, by [`RefusedRequest::ALL`] order.
    pub refused_requests: [u64; 4],
    /// Tool spans accepted and recorded.
    pub spans_tool: u64,
    /// Other spans accepted and ignored.
    pub spans_other: u64,
    /// Tool spans rejected as unusable (partial success).
    pub spans_invalid: u64,
    /// Spans refused because the queue was full.
    pub spans_overloaded: u64,
    /// Spans accepted and then lost (stays 0 unless the aggregator died).
    pub spans_dropped: u64,
    /// Series, overflow included.
    pub series: u64,
    /// Records routed to the overflow series.
    pub overflow: u64,
    /// Last successful snapshot, Unix seconds (0: none yet).
    pub snapshot_last_unix: u64,
    /// Snapshots written.
    pub snapshots_written: u64,
    /// Snapshot writes that failed.
    pub snapshot_failures: u64,
    /// Span attributes past the first 255 of their span, not looked at.
    pub attributes_ignored: u64,
}

impl SelfStats {
    pub(crate) fn request(&self, transport: &str) {
        match transport {
            "grpc" => &self.requests_grpc,
            _ => &self.requests_http,
        }
        .fetch_add(1, Relaxed);
    }
    pub(crate) fn refused_request(&self, r: RefusedRequest) {
        let i = RefusedRequest::ALL
            .iter()
            .position(|x| *x == r)
            .unwrap_or(0);
        self.refused_requests[i].fetch_add(1, Relaxed);
    }
    pub(crate) fn refused_spans_overloaded(&self, n: u64) {
        self.spans_overloaded.fetch_add(n, Relaxed);
    }
    pub(crate) fn accepted(&self, tools: u64, other: u64, invalid: u64) {
        self.spans_tool.fetch_add(tools, Relaxed);
        self.spans_other.fetch_add(other, Relaxed);
        self.spans_invalid.fetch_add(invalid, Relaxed);
    }
    pub(crate) fn set_series(&self, series: u64, overflow: u64) {
        self.series.store(series, Relaxed);
        self.overflow.store(overflow, Relaxed);
    }
    pub(crate) fn snapshot_written(&self, now: u64) {
        self.snapshot_last_unix.store(now, Relaxed);
        self.snapshots_written.fetch_add(1, Relaxed);
    }
    pub(crate) fn attributes_ignored(&self, n: u64) {
        if n > 0 {
            self.attributes_ignored.fetch_add(n, Relaxed);
        }
    }
    pub(crate) fn snapshot_failed(&self) {
        self.snapshot_failures.fetch_add(1, Relaxed);
    }

    /// A copy of every counter.
    pub fn view(&self) -> SelfStatsView {
        SelfStatsView {
            requests_http: self.requests_http.load(Relaxed),
            requests_grpc: self.requests_grpc.load(Relaxed),
            refused_requests: std::array::from_fn(|i| self.refused_requests[i].load(Relaxed)),
            spans_tool: self.spans_tool.load(Relaxed),
            spans_other: self.spans_other.load(Relaxed),
            spans_invalid: self.spans_invalid.load(Relaxed),
            spans_overloaded: self.spans_overloaded.load(Relaxed),
            spans_dropped: self.spans_dropped.load(Relaxed),
            series: self.series.load(Relaxed),
            overflow: self.overflow.load(Relaxed),
            snapshot_last_unix: self.snapshot_last_unix.load(Relaxed),
            snapshots_written: self.snapshots_written.load(Relaxed),
            snapshot_failures: self.snapshot_failures.load(Relaxed),
            attributes_ignored: self.attributes_ignored.load(Relaxed),
        }
    }
}

/// A failure to start the daemon.
#[derive(Debug, thiserror::Error)]
pub enum CollectorError {
    /// A listener could not bind.
    #[error("cannot listen on {addr} ({what}): {source}")]
    Bind {
        /// Which listener.
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The data directory is unusable.
    #[error(transparent)]
    Store(#[from] store::StoreError),
}

/// The aggregator and the ingest path, without sockets: what the routers need. Tests build one
/// and drive [`receiver::http::router`] and [`api::router`] with `oneshot`.
#[derive(Debug)]
pub struct Pipeline {
    /// The ingest path for receivers.
    pub ingest: Arc<Ingest>,
    /// State for the admin router.
    pub api: api::ApiState,
    /// Self-metrics.
    pub stats: Arc<SelfStats>,
    control: mpsc::Sender<Command>,
    aggregator: JoinHandle<()>,
}

impl Pipeline {
    /// Spawns the aggregator (restoring the snapshot of `config.store.data_dir` if any).
    pub fn spawn(config: &Config) -> Result<Self, CollectorError> {
        let stats = Arc::new(SelfStats::default());
        let mut state = State::new(Limits::from_config(config));
        let store = match &config.store.data_dir {
            Some(dir) => {
                let store = Store::open(dir)?;
                if let Some(snap) = store.load()? {
                    let written = snap.written_unix;
                    if let Err(e) = state.restore(snap) {
                        store.move_aside(&e)?;
                        state = State::new(Limits::from_config(config));
                    } else {
                        stats.snapshot_written(written);
                        tracing::info!(
                            series = state.series_count(),
                            path = %store.path().display(),
                            "Restored snapshot."
                        );
                    }
                }
                Some(Arc::new(store))
            }
            None => None,
        };
        stats.set_series(state.series_count() as u64, state.overflow_records);
        let (rules, alerts) = alerts::spawn(
            config,
            format!("{}/api/v1/alerts", config.admin_base_url()),
            stats.alerts.clone(),
            std::mem::take(&mut state.restored_alerts),
        );
        state.saved_alerts = alerts.saved.clone();
        if let Some(rules) = rules {
            state.add_observer(Box::new(rules));
        }
        let (data_tx, data_rx) = mpsc::channel(config.otlp.queue_capacity);
        let (control, control_rx) = mpsc::channel(64);
        let aggregator = tokio::spawn(aggregator::run(
            state,
            data_rx,
            control_rx,
            store,
            stats.clone(),
            config.snapshot_interval(),
            config.alert_evaluation_interval(),
        ));
        let recognizer = Arc::new(Recognizer::new(
            &config.recognition,
            config.aggregation.max_tool_name_bytes,
        ));
        let ingest = Arc::new(
            Ingest::new(
                recognizer,
                data_tx,
                stats.clone(),
                config.otlp.max_request_bytes,
            )
            .with_max_concurrent_requests(config.otlp.max_concurrent_requests),
        );
        Ok(Self {
            api: api::ApiState::new(control.clone(), stats.clone())
                .with_stack(Arc::new(config.stack.clone()))
                .with_alerts(alerts)
                .with_otlp_addrs(config.otlp.grpc_addr, config.otlp.http_addr),
            ingest,
            stats,
            control,
            aggregator,
        })
    }

    /// Drains the queue, writes the final snapshot and stops the aggregator.
    pub async fn shutdown(self) {
        let (tx, rx) = oneshot::channel();
        if self
            .control
            .send(Command::Shutdown { reply: tx })
            .await
            .is_ok()
        {
            let _ = rx.await;
        }
        let _ = self.aggregator.await;
    }
}

/// A running daemon: three listeners and the pipeline.
#[derive(Debug)]
pub struct Daemon {
    /// Bound OTLP/gRPC address.
    pub otlp_grpc_addr: SocketAddr,
    /// Bound OTLP/HTTP address.
    pub otlp_http_addr: SocketAddr,
    /// Bound admin address.
    pub admin_addr: SocketAddr,
    pipeline: Pipeline,
    stop: watch::Sender<bool>,
    servers: Vec<JoinHandle<()>>,
}

async fn bind(what: &'static str, addr: SocketAddr) -> Result<TcpListener, CollectorError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| CollectorError::Bind { what, addr, source })
}

impl Daemon {
    /// Binds the listeners (port 0 picks a free port) and starts serving.
    pub async fn start(config: &Config) -> Result<Self, CollectorError> {
        let grpc_l = bind("otlp grpc", config.otlp.grpc_addr).await?;
        let http_l = bind("otlp http", config.otlp.http_addr).await?;
        let admin_l = bind("admin", config.admin.addr).await?;
        let local = |l: &TcpListener, a| l.local_addr().unwrap_or(a);
        let (otlp_grpc_addr, otlp_http_addr, admin_addr) = (
            local(&grpc_l, config.otlp.grpc_addr),
            local(&http_l, config.otlp.http_addr),
            local(&admin_l, config.admin.addr),
        );
        // Alerts link back to the admin address actually bound; the status page names the OTLP
        // addresses actually bound.
        let mut bound = config.clone();
        bound.admin.addr = admin_addr;
        bound.otlp.grpc_addr = otlp_grpc_addr;
        bound.otlp.http_addr = otlp_http_addr;
        let pipeline = Pipeline::spawn(&bound)?;
        let (stop, stop_rx) = watch::channel(false);
        let signal = move || {
            let mut rx = stop_rx.clone();
            async move {
                let _ = rx.wait_for(|s| *s).await;
            }
        };
        let mut servers = Vec::new();
        let http = receiver::http::router(pipeline.ingest.clone());
        let sig = signal();
        servers.push(tokio::spawn(async move {
            if let Err(e) = axum::serve(http_l, http).with_graceful_shutdown(sig).await {
                tracing::error!(error = %e, "OTLP/HTTP server failed.");
            }
        }));
        let admin = api::router(pipeline.api.clone());
        let sig = signal();
        servers.push(tokio::spawn(async move {
            if let Err(e) = axum::serve(admin_l, admin)
                .with_graceful_shutdown(sig)
                .await
            {
                tracing::error!(error = %e, "Admin server failed.");
            }
        }));
        let grpc = receiver::grpc::service(pipeline.ingest.clone());
        let sig = signal();
        servers.push(tokio::spawn(async move {
            let incoming = tonic::transport::server::TcpIncoming::from(grpc_l);
            // Every path reaches the receiver, so calls to other services are answered and
            // counted there too (tonic's own fallback would answer without counting).
            let routes = tonic::service::Routes::from(axum::Router::new().fallback_service(grpc));
            if let Err(e) = tonic::transport::Server::builder()
                .add_routes(routes)
                .serve_with_incoming_shutdown(incoming, sig)
                .await
            {
                tracing::error!(error = %e, "OTLP/gRPC server failed.");
            }
        }));
        tracing::info!(
            otlp_grpc = %otlp_grpc_addr,
            otlp_http = %otlp_http_addr,
            admin = %admin_addr,
            "Collector listening."
        );
        Ok(Self {
            otlp_grpc_addr,
            otlp_http_addr,
            admin_addr,
            pipeline,
            stop,
            servers,
        })
    }

    /// Self-metrics.
    pub fn stats(&self) -> &SelfStats {
        &self.pipeline.stats
    }

    /// Stops accepting, lets in-flight requests finish (at most 5 s), drains the aggregator and
    /// writes the final snapshot.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for s in self.servers {
            let abort = s.abort_handle();
            if tokio::time::timeout(Duration::from_secs(5), s)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        self.pipeline.shutdown().await;
        tracing::info!("Collector stopped.");
    }
}
