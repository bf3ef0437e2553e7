//! The daemon's sections but alerting (in [`super::alerts`]): listeners, aggregation,
//! recognition, snapshots, authentication and TLS. Each key is its field: its doc is the
//! reference `toolsize gen-config` prints and its flag's help ([`super::declare`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::declare::{above, at_least, between, section};
use super::values::{Interval, ListenAddr, ServiceRate, Window};

/// Default OTLP/gRPC listen address.
pub(crate) const DEFAULT_OTLP_GRPC_ADDR: &str = "127.0.0.1:4317";
/// Default OTLP/HTTP listen address.
pub(crate) const DEFAULT_OTLP_HTTP_ADDR: &str = "127.0.0.1:4318";
/// Default number of OTLP requests (HTTP and gRPC together) whose bodies may be read at once;
/// each may buffer up to `max_request_bytes` twice (compressed and inflated).
pub(crate) const DEFAULT_MAX_CONCURRENT_REQUESTS: usize = 16;
/// Default deadline for receiving a whole OTLP request body.
pub(crate) const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// Default longest `service.name` kept, in bytes; longer names are cut on a character boundary.
pub(crate) const DEFAULT_MAX_SERVICE_NAME_BYTES: usize = 128;

section! {
    /// The OTLP receivers.
    pub struct OtlpConfig {
        /// OTLP/gRPC listen address, IP:PORT or HOST:PORT (e.g. localhost:4317).
        #[key(env = "TOOLSIZE_OTLP_GRPC_ADDR", flag = "--otlp-grpc-addr", value_name = "ADDR")]
        pub grpc_addr: ListenAddr = DEFAULT_OTLP_GRPC_ADDR.parse().expect("valid default"),
        /// OTLP/HTTP listen address, POST /v1/traces.
        #[key(env = "TOOLSIZE_OTLP_HTTP_ADDR", flag = "--otlp-http-addr", value_name = "ADDR")]
        pub http_addr: ListenAddr = DEFAULT_OTLP_HTTP_ADDR.parse().expect("valid default"),
        /// Largest request accepted, in bytes, measured after gzip decompression. Larger requests
        /// are answered 413 (HTTP) or RESOURCE_EXHAUSTED (gRPC).
        #[key(env = "TOOLSIZE_MAX_REQUEST_BYTES", check = at_least(1024))]
        pub max_request_bytes: u64 = 64 * 1024 * 1024,
        /// Requests queued between the receivers and the aggregator. When the queue is full the
        /// receivers answer 503 + Retry-After (HTTP) or UNAVAILABLE (gRPC) and count the refusal.
        #[key(check = above(0))]
        pub(crate) queue_capacity: usize = 1024,
        /// OTLP requests (HTTP and gRPC together) whose bodies are read at the same time; each
        /// may hold up to max_request_bytes twice (compressed and inflated), so this bounds that
        /// memory. Further requests are answered 503 + Retry-After (HTTP) or UNAVAILABLE (gRPC),
        /// counted as refused with reason "overloaded".
        #[key(check = above(0))]
        pub(crate) max_concurrent_requests: usize = DEFAULT_MAX_CONCURRENT_REQUESTS,
    }
}

section! {
    /// The admin HTTP listener.
    pub struct AdminConfig {
        /// Admin HTTP listen address. It serves the status page /, /tools/{tool}, /metrics,
        /// /api/v1/tools, /api/v1/tools/{tool}, /api/v1/tools/{tool}/history, /api/v1/layers,
        /// /api/v1/alerts, /api/v1/forward, /api/v1/unrecognised, /api/v1/agents, /api/v1/sessions,
        /// /runbook, /healthz and /readyz.
        #[key(env = "TOOLSIZE_ADMIN_ADDR", flag = "--admin-addr", value_name = "ADDR")]
        pub addr: ListenAddr = ListenAddr(SocketAddr::from(([127, 0, 0, 1], 9464))),
        /// The URL under which others reach the admin HTTP, for the links alerts carry
        /// (generatorURL and runbook_url, e.g.
        /// `https://toolsize-1.internal/runbook#toolresultoverceiling`).
        /// Unset, the links use `http://<addr>`.
        #[key(
            env = "TOOLSIZE_EXTERNAL_URL",
            flag = "--external-url",
            value_name = "URL",
            example = "\"https://toolsize-1.internal\"",
            check = http_url,
        )]
        pub(crate) external_url: Option<String> = None,
    }
}

section! {
    /// Per (service, tool) aggregation.
    pub struct AggregationConfig {
        /// Sliding windows for quantiles and counts (units: s, m, h, d); comma-separated in the
        /// environment, the flag repeatable.
        #[key(env = "TOOLSIZE_WINDOWS", flag = "--window", value_name = "DURATION", check = windows)]
        pub(crate) windows: Vec<Window> = ["5m", "1h"].map(|w| w.parse().expect("valid default")).to_vec(),
        /// Cardinality cap on (service, tool) series; results of further series are counted in
        /// one overflow series, tool="__overflow__".
        #[key(env = "TOOLSIZE_MAX_SERIES", flag = "--max-series", value_name = "N", check = above(0))]
        pub max_series: usize = 2000,
        /// Longest tool name kept, in bytes, cut on a character boundary; control, format (bidi,
        /// zero-width) and line separator characters are replaced with "_". Cuts are counted in
        /// toolsize_label_values_sanitized_total.
        #[key(check = at_least(8))]
        pub max_tool_name_bytes: usize = 128,
        /// Longest service.name kept, in bytes; cut and cleaned like tool names. With both limits
        /// and max_series, the size of /metrics and of the API is bounded (see docs/collector.md).
        #[key(check = between(8, 4096))]
        pub max_service_name_bytes: usize = DEFAULT_MAX_SERVICE_NAME_BYTES,
        /// Largest recent results kept per series, with trace id, span id and args hash.
        pub largest_results: usize = 10,
        /// Argument hashes tracked per series, to find the most repeated calls.
        pub(crate) top_args_hashes: usize = 32,
    }
}

section! {
    /// How tool spans and their sizes are read.
    pub struct RecognitionConfig {
        /// Attribute value length limits, in characters, of the tracing SDKs in front of the
        /// daemon (e.g. OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT). Result content of exactly that
        /// length is flagged "truncated upstream". Empty: the daemon's own
        /// OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT / OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT if set
        /// (a bad value is an error); limits are also learned from the data.
        #[key(env = "TOOLSIZE_ATTRIBUTE_VALUE_LENGTH_LIMITS")]
        pub(crate) attribute_value_length_limits: Vec<u64> = Vec::new(),
        /// Content values that mean "hidden": the result's size is unknown, never the
        /// placeholder's.
        #[key(env = "TOOLSIZE_PLACEHOLDERS")]
        pub(crate) placeholders: Vec<String> = ["__REDACTED__", "<not specified>", "<redacted>"]
            .map(String::from)
            .to_vec(),
        /// How long the signals of one coding agent's tool call (log record, span event, span)
        /// are waited for, from the first, before the call is counted once (see
        /// docs/agents.md). The agents' SDKs export every 5 s by default and flush at exit.
        #[key(env = "TOOLSIZE_JOIN_WINDOW")]
        pub(crate) join_window: Interval = Interval::secs(10),
        /// Sampling rates of tracers that sample without saying so in the span, as
        /// "service=rate" (e.g. "toolhive=0.1": ToolHive's default for MCP traces): each tool
        /// span of that service counts as 1/rate calls. A span whose W3C tracestate carries its
        /// probability (ot=th:…) counts by that instead.
        #[key(env = "TOOLSIZE_SAMPLING_RATES", example = "[\"toolhive=0.1\"]")]
        pub(crate) sampling_rates: Vec<ServiceRate> = Vec::new(),
        /// Whether the arguments' hash of each call (tool.args_hash, or the hash of recorded
        /// arguments) is kept. false: it is dropped as each call is received, so the API, the
        /// alerts and the snapshot carry none, and ToolArgsRepeatedlyOversize never fires. An
        /// unkeyed hash lets whoever reads it confirm a guessed argument offline (see
        /// docs/collector.md, "The arguments' hash").
        #[key(env = "TOOLSIZE_KEEP_ARGS_HASHES")]
        pub keep_args_hashes: bool = true,
    }
}

section! {
    /// The context ledger: per session (session id, else trace id), the tool results carried
    /// by each later model request until a compaction or the session's end (see
    /// docs/collector.md, "What tool results cost the context").
    pub struct ContextConfig {
        /// Whether the ledger runs: model requests, compactions and tool results are read for
        /// it and per tool context cost and share are shown.
        #[key(env = "TOOLSIZE_CONTEXT_LEDGER")]
        pub enabled: bool = true,
        /// Sessions followed at once; events of further sessions are counted in
        /// toolsize_context_sessions_overflow_total and not followed. About 10 KB each when
        /// full (about 51,000 kB resident at 5,000 sessions of 512 results).
        #[key(env = "TOOLSIZE_CONTEXT_MAX_SESSIONS", check = above(0))]
        pub max_sessions: usize = 5_000,
        /// Tool results held per session; a session's further results are counted and not
        /// carried.
        #[key(check = above(0))]
        pub max_results_per_session: usize = 512,
        /// A session without events for this long has ended: its results are dropped.
        pub(crate) session_idle: Interval = Interval::secs(1800),
    }
}

section! {
    /// Snapshots of the aggregated state on disk.
    pub(crate) struct StoreConfig {
        /// Directory for snapshots of the aggregated state, restored at start; unset, the state
        /// is kept in memory only.
        #[key(
            env = "TOOLSIZE_DATA_DIR",
            flag = "--data-dir",
            value_name = "DIR",
            example = "\"/var/lib/toolsize\"",
        )]
        pub(crate) data_dir: Option<PathBuf> = None,
        /// Interval between snapshots; one is also written on SIGTERM/SIGINT.
        #[key(
            env = "TOOLSIZE_SNAPSHOT_INTERVAL",
            flag = "--snapshot-interval",
            value_name = "DURATION",
        )]
        pub(crate) snapshot_interval: Interval = Interval::secs(10),
        /// When a span is acknowledged as kept: "snapshot" (at the next snapshot; a kill -9
        /// loses up to one interval and one write) or "wal" (once its request is in the
        /// write-ahead log under `<data_dir>/wal/` and fsynced; nothing acknowledged is lost).
        /// "wal" needs `data_dir`.
        #[key(
            env = "TOOLSIZE_DURABILITY",
            flag = "--durability",
            value_name = "snapshot|wal",
        )]
        pub(crate) durability: Durability = Durability::Snapshot,
        /// With "wal": how long the log's writer waits, once a request has come, for others
        /// to share its write and fsync (group commit). Each logged request is answered up to
        /// this much later; at most 100ms.
        #[key(check = commit_delay)]
        pub(crate) wal_commit_delay: Interval = Interval::ms(10),
    }
}

/// When an accepted span is kept on disk (`store.durability`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Durability {
    /// At the next snapshot.
    #[default]
    Snapshot,
    /// Before the request is answered: in the write-ahead log, fsynced.
    Wal,
}

impl std::str::FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "snapshot" => Ok(Self::Snapshot),
            "wal" => Ok(Self::Wal),
            _ => Err(format!("{s:?}: expected \"snapshot\" or \"wal\"")),
        }
    }
}

section! {
    /// Time and connection budgets of the three listeners (OTLP/gRPC, OTLP/HTTP, admin).
    /// Connections the daemon closes are counted in
    /// toolsize_connections_closed_total{listener,reason}.
    pub struct ListenersConfig {
        /// Time to receive a request's head (HTTP/1.1; also the longest wait for the next request
        /// on a keep-alive connection) or the HTTP/2 preface (gRPC); later, the connection is
        /// closed.
        pub header_read_timeout: Interval = Interval::secs(10),
        /// Deadline for receiving a whole OTLP request body; later, 408 (HTTP) or
        /// DEADLINE_EXCEEDED (gRPC), counted as refused with reason "timeout". Bodies are read
        /// before a decoding slot is taken, so slow clients never hold one.
        pub body_timeout: Interval = Interval(DEFAULT_BODY_TIMEOUT),
        /// A connection on which nothing is read or written for this long is closed.
        pub idle_timeout: Interval = Interval::secs(300),
        /// Connections open at once on each OTLP listener (gRPC and HTTP each). At the cap a new
        /// connection takes the place of the one idle longest with no request in flight
        /// (reason="evicted"); only when every one has a request in flight is the new one closed
        /// (reason="limit"). At start this cap and the admin one are checked against the
        /// open-file limit (ulimit -n) and lowered, with a warning, when they do not fit with 64
        /// descriptors to spare.
        #[key(check = above(0))]
        pub otlp_max_connections: usize = 2048,
        /// Connections open at once on the admin listener.
        #[key(check = above(0))]
        pub(crate) admin_max_connections: usize = 128,
        /// HTTP/2 streams one gRPC connection may have open at once.
        #[key(check = above(0))]
        pub(crate) grpc_max_concurrent_streams: u32 = 64,
        /// Interval of HTTP/2 keepalive pings on gRPC connections; a peer that does not answer
        /// within grpc_keepalive_timeout is disconnected.
        pub(crate) grpc_keepalive_interval: Interval = Interval::secs(60),
        /// Time to wait for a keepalive ping's answer.
        pub(crate) grpc_keepalive_timeout: Interval = Interval::secs(20),
        /// Worker threads serving the listeners, decoding requests and forwarding them; 0: one
        /// per CPU. Fewer cost less CPU per span at a steady rate (a request's work stays on
        /// one core) and cap the rate one daemon can take in a storm (see docs/collector.md,
        /// "Where the daemon's time goes").
        #[key(env = "TOOLSIZE_WORKERS", flag = "--workers", value_name = "N", check = between(0, 1024))]
        pub workers: usize = 0,
    }
}

section! {
    /// Forwarding: every OTLP request the daemon accepts (traces, logs, metrics) relayed as it
    /// came to each upstream receiver, so your tracing backend still gets everything. Nothing
    /// the daemon measures waits on an upstream: each has a bounded queue; requests it cannot
    /// take in time are dropped and counted (toolsize_forward_requests_total{outcome}).
    pub(crate) struct ForwardConfig {
        /// Upstream receivers: http://host:port[/prefix] (OTLP/HTTP protobuf, POST
        /// <prefix>/v1/traces, /v1/logs, /v1/metrics) or grpc://host:port (OTLP/gRPC), and
        /// https:// and grpcs:// with the `tls` feature (checked against Mozilla's roots and the
        /// system's, or SSL_CERT_FILE); comma-separated in the environment, the flag repeatable.
        #[key(
            env = "TOOLSIZE_FORWARD",
            flag = "--forward",
            value_name = "URL",
            example = "[\"http://127.0.0.1:4318\"]",
            check = upstreams,
        )]
        pub(crate) upstreams: Vec<String> = Vec::new(),
        /// Headers sent with every forwarded request, name=value (values percent-encoded, as
        /// in OTEL_EXPORTER_OTLP_HEADERS); comma-separated in the environment. Their values are
        /// never logged.
        #[key(
            env = "TOOLSIZE_FORWARD_HEADERS",
            flag = "--forward-header",
            value_name = "NAME=VALUE",
            example = "[\"authorization=Bearer%20<token>\"]",
            check = headers,
        )]
        pub(crate) headers: Vec<String> = Vec::new(),
        /// Requests waiting per upstream; when its queue is full a request is dropped for that
        /// upstream and counted (outcome queue_full).
        #[key(check = above(0))]
        pub(crate) queue_requests: usize = 1024,
        /// Requests in flight per upstream, each over a connection of its own.
        #[key(check = between(1, 64))]
        pub(crate) concurrency: usize = 4,
        /// How long a request is retried (retryable statuses and connection errors, with
        /// backoff, after Retry-After when the upstream says) before it is given up and counted
        /// (outcome gave_up).
        pub(crate) retry_for: Interval = Interval::secs(60),
        /// Deadline of one attempt.
        pub(crate) timeout: Interval = Interval::secs(10),
    }
}

fn upstreams(urls: &[String]) -> Result<(), String> {
    urls.iter()
        .try_for_each(|u| super::values::otlp_upstream(u).map(|_| ()))
}

fn headers(list: &[String]) -> Result<(), String> {
    super::values::header_pairs(list).map(|_| ())
}

section! {
    /// A shared token the OTLP receivers and the admin API require (all but /healthz, /readyz
    /// and the pages' HTML, whose script sends the token the user gives it): `Authorization:
    /// Bearer <token>`, e.g.
    /// `OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20<token>`. A missing or wrong token gets
    /// 401 / UNAUTHENTICATED and is counted. Unset: no authentication. Prefer token_file or the
    /// environment to a token in this file.
    pub struct AuthConfig {
        /// The token.
        #[key(env = "TOOLSIZE_AUTH_TOKEN", example = "\"\"", replaces = "auth.token_file")]
        pub(crate) token: Option<String> = None,
        /// A file whose first line is the token OTLP and admin requests must carry, instead of
        /// token.
        #[key(
            env = "TOOLSIZE_AUTH_TOKEN_FILE",
            flag = "--auth-token-file",
            value_name = "FILE",
            example = "\"/etc/toolsize/token\"",
            replaces = "auth.token",
        )]
        pub token_file: Option<PathBuf> = None,
        /// A header that may carry the token instead of `Authorization: Bearer`, e.g.
        /// "x-api-key".
        #[key(example = "\"x-api-key\"", check = header_name)]
        pub api_key_header: Option<String> = None,
        /// Whether the admin API requires the token too (default true when a token is set).
        #[key(example = "true")]
        pub(crate) admin: Option<bool> = None,
    }
}

impl AuthConfig {
    /// The token from `token` or `token_file`.
    pub(crate) fn token(&self) -> Result<Option<String>, String> {
        match (&self.token, &self.token_file) {
            (Some(_), Some(_)) => Err("set auth.token or auth.token_file, not both".into()),
            (Some(t), None) => Ok(Some(t.clone())),
            (None, Some(f)) => std::fs::read_to_string(f)
                .map(|t| t.lines().next().map(str::to_string))
                .map_err(|e| format!("cannot read auth.token_file {}: {e}", f.display())),
            (None, None) => Ok(None),
        }
    }
}

section! {
    /// TLS on the three listeners (OTLP/gRPC, OTLP/HTTP, admin), PEM files; needs a toolsize
    /// built with the `tls` feature. Exporters trust it with
    /// `OTEL_EXPORTER_OTLP_CERTIFICATE=<CA file>`.
    pub struct TlsConfig {
        /// PEM certificate (chain) for TLS on every listener.
        #[key(
            env = "TOOLSIZE_TLS_CERT_FILE",
            flag = "--tls-cert-file",
            value_name = "FILE",
            example = "\"/etc/toolsize/cert.pem\"",
        )]
        pub cert_file: Option<PathBuf> = None,
        /// PEM private key of the certificate.
        #[key(
            env = "TOOLSIZE_TLS_KEY_FILE",
            flag = "--tls-key-file",
            value_name = "FILE",
            example = "\"/etc/toolsize/key.pem\"",
        )]
        pub key_file: Option<PathBuf> = None,
    }
}

/// Check of `admin.external_url`: `http(s)://host[:port][/prefix]`.
fn http_url(url: &Option<String>) -> Result<(), String> {
    let Some(url) = url else { return Ok(()) };
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    match rest.is_some_and(|r| !r.is_empty() && !r.starts_with('/')) {
        true => Ok(()),
        false => Err(format!(
            "{url:?} is not an http:// or https:// URL with a host"
        )),
    }
}

/// Check of `aggregation.windows`: at least one, none shorter than 5s.
fn windows(windows: &[Window]) -> Result<(), String> {
    if windows.is_empty() {
        return Err("at least one window".into());
    }
    match windows.iter().find(|w| w.duration.as_secs() < 5) {
        Some(w) => Err(format!("window {:?} is shorter than 5s", w.label)),
        None => Ok(()),
    }
}

/// Check of `store.wal_commit_delay`: at most 100 ms, a bound on the latency it adds.
fn commit_delay(d: &Interval) -> Result<(), String> {
    match d.0 <= std::time::Duration::from_millis(100) {
        true => Ok(()),
        false => Err(format!("{d} is above 100ms")),
    }
}

/// Check of `auth.api_key_header`: a header name.
fn header_name(h: &Option<String>) -> Result<(), String> {
    match h {
        Some(h) if axum::http::HeaderName::from_bytes(h.trim().as_bytes()).is_err() => {
            Err(format!("{h:?} is not a header name"))
        }
        _ => Ok(()),
    }
}

section! {
    /// The daemon's own log, on standard error. Which events it shows: `RUST_LOG` (default
    /// `info`; e.g. `RUST_LOG=warn`, `RUST_LOG=toolsize=debug`).
    pub struct LogConfig {
        /// "text" (one line per event, for a person or journald) or "json" (one JSON object per
        /// line: timestamp, level, target, message and the event's fields, for a log pipeline).
        #[key(env = "TOOLSIZE_LOG_FORMAT", flag = "--log-format", value_name = "FORMAT")]
        pub format: LogFormat = LogFormat::Text,
    }
}

/// How the daemon writes its log lines (`log.format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One line of text per event.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(Self::Text),
            "json" => Ok(Self::Json),
            _ => Err(format!("{s:?}: expected \"text\" or \"json\"")),
        }
    }
}
