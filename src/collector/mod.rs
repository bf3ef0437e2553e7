//! The collector daemon (`toolsize serve`): OTLP in, per-tool size histograms out.
//!
//! ```text
//!  OTLP/gRPC :4317 ─┐                                  ┌─▶ /metrics (Prometheus text)
//!                   ├─ decode → recognise → try_send ─▶ aggregator task ─┼─▶ /api/v1/tools[/{tool}]
//!  OTLP/HTTP :4318 ─┘   (receiver tasks)   (bounded)  (owns all state)  └─▶ snapshot → data dir
//!  traces, logs, metrics
//! ```
//!
//! The folders are the stages, in pipeline order (held by `tests/module_dag.rs`): [`net`],
//! [`config`], [`stats`], `forward`, [`ingest`], [`state`], [`alerts`], [`persist`], [`read`],
//! and the `aggregator` task that wires the last five; below them all, `hash` (the keyed hasher
//! of the daemon's maps and the hot path's key compare) and `clock`.
//!
//! - **Receivers** ([`ingest`]) take the three OTLP signals, decode protobuf / JSON / gzip,
//!   classify spans with one entry per emitter ([`ingest::recognize`]), weigh each by its
//!   sampling (`ingest::sampling`: a sampled span counts as the calls it stands for), and the
//!   coding agents' log records and spans with one entry per agent, and `try_send` one batch of
//!   tool records per
//!   request to the aggregator. They never block on it: a full queue refuses the request as retryable (HTTP 503 +
//!   `Retry-After`, gRPC `UNAVAILABLE`), so everything acknowledged is recorded.
//! - **The aggregator** ([`state`]) is the only owner of per-(service, tool) state: HDR
//!   histograms of bytes and latency ([`state::histogram`]), counters, sliding windows, largest results,
//!   repeated argument hashes, a cardinality cap with an overflow series, and the join of a
//!   coding agent's signals into one record per call. Readers ask it through a command channel
//!   ([`read::Command`]) and get computed views.
//! - **Admin HTTP** ([`read::api`]) serves the status page `/`, `/metrics` ([`read::exposition`]),
//!   `/api/v1/tools`, `/api/v1/tools/{tool}`, `/api/v1/layers`, `/api/v1/alerts`,
//!   `/api/v1/unrecognised` (spans that are no tool call, [`ingest::unrecognised`]),
//!   `/api/v1/agents` (what each coding agent sent, [`ingest::heard`]), `/runbook`,
//!   `/healthz`, `/readyz`.
//! - **Layers**: the effective stack ([`crate::layers::Stack`], resolved once in
//!   [`Config::load`]) is checked by the aggregator for every result of known size; the weakest
//!   layer that cuts it is counted per series and the result listed among the recent ones.
//! - **Alerts** ([`alerts`]): rules run on the aggregator for every result and `try_send` their
//!   matches to the alert task, which deduplicates, resolves after a quiet period and publishes
//!   the current set to the log, Alertmanager and a webhook (`/api/v1/alerts` lists it).
//! - **Store** ([`persist::store`]): snapshots every `store.snapshot_interval` and at shutdown, atomic on
//!   disk, restored at start (earlier formats migrated); an unreadable file is moved aside with
//!   the reason logged and the daemon starts empty. With `store.durability = "wal"`, a
//!   write-ahead log ([`ingest::wal`]) makes each request durable before it is answered and is
//!   replayed above the snapshot at start.
//!
//! - **Listeners** ([`net::listener`]): every socket holds a slot of its listener's connection cap
//!   (at the cap, the connection idle longest without a request in flight makes room:
//!   `net::evict`) and lives under a header-read and an idle timeout; optional TLS ([`net::tls`], feature `tls`)
//!   and a shared token ([`net::auth`]) guard the OTLP receivers and the admin API.
//!
//! Behaviour under load: memory is bounded by the read budget (bodies being read) plus the
//! decoding slots × the body limit, the queue capacity, and `max_series` × the per-series
//! histograms; client-supplied names are cut and cleaned before they become keys. Every
//! refusal, drop and closed connection is counted in the self-metrics ([`SelfStats`], exposed
//! on `/metrics`).
//!
//! Start ([`Daemon::start`]): the data directory is probed (a file written and removed) before
//! any listener binds, so an unwritable one stops the start; a listener that cannot bind names
//! the flag, variable and key of its address.
//!
//! Reload ([`Daemon::reload`], on SIGHUP in `toolsize serve`): the alert sinks, the rules'
//! settings and the layer stacks are replaced in place (each series held to its new stack, its
//! counts kept by layer id); the state, the firing alerts and the listeners are kept; other
//! changed keys wait for a restart.
//!
//! Shutdown ([`Daemon::shutdown`], on SIGTERM/SIGINT in `toolsize serve`): listeners stop
//! accepting, in-flight requests finish, the aggregator drains its queue and writes a final
//! snapshot.

pub(crate) mod aggregator;
pub mod alerts;
pub(crate) mod clock;
pub mod config;
pub(crate) mod forward;
pub(crate) mod hash;
pub mod ingest;
pub mod net;
pub(crate) mod persist;
pub mod read;
pub mod state;
pub(crate) mod stats;

use std::net::SocketAddr;

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

pub use config::Config;
#[doc(hidden)]
pub use hash::MapHasher;
#[doc(hidden)]
pub use persist::snapshot::SnapshotCosts;
pub use stats::{RefusedRequest, RefusedRequests, SelfStats};

use ingest::recognize::Recognizer;
use ingest::Ingest;
use persist::store::{Found, Store};
use read::Command;
use state::{Limits, State};

/// Snapshot writes failing in a row after which `/readyz` answers 503.
pub(crate) const SNAPSHOT_FAILURES_NOT_READY: u64 = 3;

/// `/readyz` answers 503 when what is on disk is older than this many snapshot intervals plus
/// [`SNAPSHOT_STALE_GRACE`]: snapshots keep to one interval plus one write, so only a write
/// that hangs (a stalled disk) or takes longer than an interval gets there.
pub(crate) const SNAPSHOT_STALE_INTERVALS: u32 = 2;

/// See [`SNAPSHOT_STALE_INTERVALS`].
pub(crate) const SNAPSHOT_STALE_GRACE: Duration = Duration::from_secs(5);

/// A failure a test can cause in a running daemon, to check that what it loses is counted.
/// Not for production use.
#[doc(hidden)]
#[derive(Debug)]
pub enum Fault {
    /// The aggregator takes nothing more until the sender of this is used or dropped, then
    /// panics: what is queued meanwhile is acknowledged and lost.
    AggregatorPanicsAfter(oneshot::Receiver<()>),
    /// The alert task stops: every later match is lost.
    AlertTaskStops,
}

/// How the daemon stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped {
    /// A data directory is configured and the final snapshot could not be written: what was
    /// received since the last successful snapshot is lost.
    pub(crate) final_snapshot_failed: bool,
}

impl Stopped {
    /// Whether what was received since the last successful snapshot is lost: a data directory
    /// is configured and the final snapshot could not be written (a failed write, or an
    /// aggregator that had stopped).
    pub fn final_snapshot_failed(&self) -> bool {
        self.final_snapshot_failed
    }
}

/// A failure to start the daemon.
#[derive(Debug, thiserror::Error)]
pub enum CollectorError {
    /// A listener could not bind: the message names the address, why, and the flag, variable
    /// and key that set it ("127.0.0.1:4318 is in use: set --otlp-http-addr,
    /// TOOLSIZE_OTLP_HTTP_ADDR or `otlp.http_addr`").
    #[error("{}", bind_message(what, *addr, key, source))]
    Bind {
        /// Which listener.
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The configuration key holding it, e.g. `otlp.http_addr`.
        key: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// The data directory is unusable.
    #[error(transparent)]
    Store(#[from] persist::store::StoreError),
    /// The data directory cannot be written, found before listening: the message names why and
    /// the flag, variable and key that set it.
    #[error(
        "the data directory cannot be written ({source}): set {} to a writable directory",
        setters("store.data_dir")
    )]
    DataDir {
        /// Why.
        source: persist::store::StoreError,
    },
    /// The token or the TLS files cannot be used.
    #[error("{0}")]
    Security(String),
    /// An upstream of `forward` cannot be used.
    #[error("forward: {0}")]
    Forward(String),
    /// The write-ahead log cannot be read or started.
    #[error("write-ahead log: {0}")]
    Wal(String),
}

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
                    state.context.record(r.context, now_ms);
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
    control: mpsc::Sender<Command>,
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
            Fault::AlertTaskStops => self.api.alerts().stop_task(),
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

/// What a reload ([`Daemon::reload`]) found and did. Keys are named, never their values (a
/// token may have changed).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reloaded {
    /// Keys whose value differs from the running configuration.
    pub changed: Vec<String>,
    /// Of those, the keys now in effect.
    pub applied: Vec<String>,
    /// Of those, the keys that wait for a restart.
    pub restart: Vec<String>,
    /// What holding the series to a new layer stack did, when the stack changed.
    pub restacked: Option<state::Restacked>,
}

/// The keys of the alert sinks, replaced together on a reload.
const SINK_KEYS: [&str; 5] = [
    "alerts.alertmanager_urls",
    "alerts.webhook_url",
    "alerts.webhook_token",
    "alerts.webhook_format",
    "alerts.resend_interval",
];

/// The dotted keys whose values differ between `a` and `b` (the resolved layer stack counts as
/// `layers.stack`), sorted.
fn changed_keys(a: &Config, b: &Config) -> Vec<String> {
    fn walk(path: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
        use serde_json::Value;
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                for k in keys {
                    let null = Value::Null;
                    walk(
                        &config::declare::join(path, k),
                        x.get(k).unwrap_or(&null),
                        y.get(k).unwrap_or(&null),
                        out,
                    );
                }
            }
            _ if a != b => out.push(path.to_string()),
            _ => {}
        }
    }
    let mut out = Vec::new();
    let (x, y) = (serde_json::to_value(a), serde_json::to_value(b));
    if let (Ok(x), Ok(y)) = (x, y) {
        walk("", &x, &y, &mut out);
    }
    if a.stack != b.stack && !out.iter().any(|k| k == "layers.stack") {
        out.push("layers.stack".into());
    }
    out.sort();
    out
}

/// Takes the section `section` (`alerts.p95_jump`, …) of `new` into `running`.
fn take_rule_section(
    running: &mut config::AlertsConfig,
    new: &config::AlertsConfig,
    section: &str,
) {
    match section {
        "alerts.over_ceiling" => running.over_ceiling = new.over_ceiling.clone(),
        "alerts.repeated_oversize" => running.repeated_oversize = new.repeated_oversize.clone(),
        "alerts.p95_jump" => running.p95_jump = new.p95_jump.clone(),
        "alerts.near_ceiling" => running.near_ceiling = new.near_ceiling.clone(),
        "alerts.truncation_rate" => running.truncation_rate = new.truncation_rate.clone(),
        _ => {}
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

async fn bind(
    what: &'static str,
    key: &'static str,
    addr: SocketAddr,
) -> Result<TcpListener, CollectorError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| CollectorError::Bind {
            what,
            addr,
            key,
            source,
        })
}

/// What [`CollectorError::Bind`] says: the address, why (in use, not an address of this host,
/// a privileged port), and where to set another (the key's flag and variable, from its
/// declaration).
fn bind_message(what: &str, addr: SocketAddr, key: &str, source: &std::io::Error) -> String {
    use std::io::ErrorKind;
    let why = match source.kind() {
        ErrorKind::AddrInUse => {
            "is in use (another program, or another toolsize, listens on it)".to_string()
        }
        ErrorKind::AddrNotAvailable => "is not an address of this host".to_string(),
        ErrorKind::PermissionDenied => {
            format!("cannot be listened on: {source} (ports below 1024 need privileges)")
        }
        _ => format!("cannot be listened on: {source}"),
    };
    format!(
        "{addr} ({what}) {why}: set {} to another address",
        setters(key)
    )
}

/// Where `key` is set: `--flag, TOOLSIZE_VAR or \`key\``, from its declaration.
fn setters(key: &str) -> String {
    let named: Vec<&str> = config::keys::find(key)
        .map(|k| k.flag.into_iter().chain(k.env).collect())
        .unwrap_or_default();
    match named.is_empty() {
        true => format!("`{key}`"),
        false => format!("{} or `{key}`", named.join(", ")),
    }
}

impl Daemon {
    /// Binds the listeners (port 0 picks a free port) and starts serving.
    pub async fn start(config: &Config) -> Result<Self, CollectorError> {
        // The data directory first: a start that cannot snapshot stops before it listens.
        if let Some(dir) = &config.store.data_dir {
            Store::open(dir).map_err(|source| CollectorError::DataDir { source })?;
        }
        let grpc_l = bind("otlp grpc", "otlp.grpc_addr", config.otlp.grpc_addr.0).await?;
        let http_l = bind("otlp http", "otlp.http_addr", config.otlp.http_addr.0).await?;
        let admin_l = bind("admin", "admin.addr", config.admin.addr.0).await?;
        let local = |l: &TcpListener, a: config::ListenAddr| l.local_addr().unwrap_or(a.0);
        let (otlp_grpc_addr, otlp_http_addr, admin_addr) = (
            local(&grpc_l, config.otlp.grpc_addr),
            local(&http_l, config.otlp.http_addr),
            local(&admin_l, config.admin.addr),
        );
        // Alerts link back to the admin address actually bound; the status page names the OTLP
        // addresses actually bound.
        let mut bound = config.clone();
        bound.admin.addr = admin_addr.into();
        bound.otlp.grpc_addr = otlp_grpc_addr.into();
        bound.otlp.http_addr = otlp_http_addr.into();
        let pipeline = Pipeline::spawn(&bound)?;
        let (stop, stop_rx) = watch::channel(false);
        let signal = move || {
            let mut rx = stop_rx.clone();
            async move {
                let _ = rx.wait_for(|s| *s).await;
            }
        };
        let l = &config.listeners;
        let configured = [
            l.otlp_max_connections,
            l.otlp_max_connections,
            l.admin_max_connections,
        ];
        let nofile = net::listener::open_file_limit();
        let (caps, lowered) = net::listener::fit_caps(configured, nofile);
        if lowered {
            tracing::warn!(
                open_file_limit = nofile.unwrap_or(0),
                otlp_max_connections = caps[0],
                admin_max_connections = caps[2],
                configured_otlp = configured[0],
                configured_admin = configured[2],
                "Open-file limit too low for the connection caps; caps lowered (raise ulimit -n)."
            );
        }
        #[cfg(feature = "tls")]
        let tls = match (&config.tls.cert_file, &config.tls.key_file) {
            (Some(c), Some(k)) => Some(
                net::tls::acceptors(c, k)
                    .map_err(|e| CollectorError::Security(format!("tls: {e}")))?,
            ),
            _ => None,
        };
        let budget = |which: net::listener::Listener, max_connections| net::listener::Budget {
            listener: which,
            max_connections,
            header_read_timeout: l.header_read_timeout.0,
            idle_timeout: l.idle_timeout.0,
            #[cfg(feature = "tls")]
            tls: tls.as_ref().map(|t| match which {
                net::listener::Listener::OtlpGrpc => t.grpc.clone(),
                _ => t.http.clone(),
            }),
            #[cfg(not(feature = "tls"))]
            tls: None,
        };
        let conns = pipeline.stats.listeners.clone();
        let mut servers = Vec::new();
        servers.push(tokio::spawn(net::listener::serve_http(
            http_l,
            ingest::http::router(pipeline.ingest.clone()),
            budget(net::listener::Listener::OtlpHttp, caps[1]),
            conns.clone(),
            stop.subscribe(),
        )));
        servers.push(tokio::spawn(net::listener::serve_http(
            admin_l,
            read::api::router(pipeline.api.clone()),
            budget(net::listener::Listener::Admin, caps[2]),
            conns.clone(),
            stop.subscribe(),
        )));
        let grpc = ingest::grpc::service(pipeline.ingest.clone());
        let sig = signal();
        let incoming = net::listener::grpc_incoming(
            grpc_l,
            budget(net::listener::Listener::OtlpGrpc, caps[0]),
            conns,
            stop.subscribe(),
        );
        let server = tonic::transport::Server::builder()
            .max_concurrent_streams(l.grpc_max_concurrent_streams)
            .http2_keepalive_interval(Some(l.grpc_keepalive_interval.0))
            .http2_keepalive_timeout(Some(l.grpc_keepalive_timeout.0))
            .http2_max_header_list_size(64 * 1024)
            .http2_max_pending_accept_reset_streams(Some(64));
        servers.push(tokio::spawn(async move {
            // Every path reaches the receiver, so calls to other services are answered and
            // counted there too (tonic's own fallback would answer without counting).
            // Each call is in flight on its connection until answered (admission at the cap).
            let routes = tonic::service::Routes::from(
                axum::Router::new()
                    .fallback_service(grpc)
                    .layer(axum::middleware::from_fn(net::evict::in_flight)),
            );
            let mut server = server;
            if let Err(e) = server
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

    /// Takes what can change without a restart from `new`, a configuration read again (on
    /// SIGHUP): the alert sinks (`alerts.alertmanager_urls`, `alerts.webhook_*`,
    /// `alerts.resend_interval`; the new sinks are sent the firing alerts at once), each alert
    /// rule's settings (thresholds, severities, quiet periods) and the layer stacks (`[layers]`:
    /// every series is held to its new stack at once, its counts kept by layer id, see
    /// [`state::restack`]). The aggregated state, the firing alerts and the snapshots are
    /// otherwise untouched. Every other changed key (listeners, windows, enabling or disabling a
    /// rule) waits for a restart and is listed as such. Returns the configuration now in effect
    /// (`running` with what was taken) and what was done.
    pub async fn reload(&self, running: &Config, new: &Config) -> (Config, Reloaded) {
        let changed = changed_keys(running, new);
        let mut effective = running.clone();
        let mut applied: Vec<String> = Vec::new();
        let sinks: Vec<&String> = changed
            .iter()
            .filter(|k| SINK_KEYS.contains(&k.as_str()))
            .collect();
        if !sinks.is_empty() && self.pipeline.api.alerts().reload_sinks(new) {
            let (e, n) = (&mut effective.alerts, &new.alerts);
            e.alertmanager_urls.clone_from(&n.alertmanager_urls);
            e.webhook_url.clone_from(&n.webhook_url);
            e.webhook_token.clone_from(&n.webhook_token);
            e.webhook_format = n.webhook_format;
            e.resend_interval = n.resend_interval;
            applied.extend(sinks.into_iter().cloned());
        }
        let rules_changed = changed.iter().any(|k| {
            k.starts_with("alerts.")
                && k.matches('.').count() >= 2
                && !SINK_KEYS.contains(&k.as_str())
        });
        if rules_changed {
            let (tx, rx) = oneshot::channel();
            let asked = self
                .pipeline
                .control
                .send(Command::Retune {
                    old: Box::new(running.alerts.clone()),
                    new: Box::new(new.alerts.clone()),
                    reply: tx,
                })
                .await;
            if let (Ok(()), Ok(retune)) = (asked, rx.await) {
                for section in retune.applied {
                    take_rule_section(&mut effective.alerts, &new.alerts, section);
                    let prefix = format!("{section}.");
                    applied.extend(changed.iter().filter(|k| k.starts_with(&prefix)).cloned());
                }
            }
        }
        let layer_keys: Vec<&String> = changed
            .iter()
            .filter(|k| k.starts_with("layers."))
            .collect();
        let mut restacked = None;
        if !layer_keys.is_empty() {
            restacked = self.restack(new).await;
            if restacked.is_some() {
                effective.stack = new.stack.clone();
                effective.layers = new.layers.clone();
                applied.extend(layer_keys.into_iter().cloned());
            }
        }
        let restart = changed
            .iter()
            .filter(|k| !applied.contains(k))
            .cloned()
            .collect();
        applied.sort();
        (
            effective,
            Reloaded {
                changed,
                applied,
                restart,
                restacked,
            },
        )
    }

    /// Holds every series to the stacks of `new` (the aggregator renumbers what it keeps by
    /// layer id), then serves them on `/api/v1/layers`. `None` when the aggregator has stopped.
    async fn restack(&self, new: &Config) -> Option<state::Restacked> {
        let stacks = Arc::new(state::stacks::Stacks::new(&new.stack, &new.layers));
        let (tx, rx) = oneshot::channel();
        let command = Command::Restack {
            stacks: stacks.clone(),
            size_bounds: state::layer_bounds(&new.stack, &new.layers),
            reply: tx,
        };
        self.pipeline.control.send(command).await.ok()?;
        let done = rx.await.ok()?;
        self.pipeline
            .api
            .set_stack(Arc::new(new.stack.clone()), stacks.others());
        Some(done)
    }

    /// Injects `fault` (see [`Pipeline::inject`]).
    #[doc(hidden)]
    pub async fn inject(&self, fault: Fault) {
        self.pipeline.inject(fault).await;
    }

    /// Stops accepting, lets in-flight requests finish (at most 5 s), drains the aggregator and
    /// writes the final snapshot.
    pub async fn shutdown(self) -> Stopped {
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
        let stopped = self.pipeline.shutdown().await;
        if stopped.final_snapshot_failed {
            tracing::error!("Collector stopped; the final snapshot could not be written.");
        } else {
            tracing::info!("Collector stopped.");
        }
        stopped
    }
}
