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
//! the `aggregator` task that wires the last five, and the daemon (`daemon`: the listeners
//! over the [`Pipeline`], start, reload, shutdown); below them all, `hash` (the keyed hasher of
//! the daemon's maps and the hot path's key compare) and `clock`.
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
mod daemon;
pub(crate) mod forward;
pub(crate) mod hash;
pub mod ingest;
pub mod net;
pub(crate) mod persist;
pub mod read;
pub mod state;
pub(crate) mod stats;

use std::net::SocketAddr;
use std::time::Duration;

use tokio::sync::oneshot;

pub use config::Config;
pub use daemon::{Daemon, Pipeline, Reloaded};
#[doc(hidden)]
pub use hash::MapHasher;
#[doc(hidden)]
pub use persist::snapshot::SnapshotCosts;
pub use stats::{RefusedRequest, RefusedRequests, SelfStats};

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
