//! The daemon's configuration: one typed struct, read from a TOML file, `TOOLSIZE_*` environment
//! variables and command-line flags.
//!
//! Precedence: flags > environment > file > built-in defaults (the `DEFAULT_*` constants). An
//! unknown key in the file is an error that names the closest known key ("did you mean"); a bad
//! value (an address that does not parse, a zero interval) is an error, never a panic.
//! Each key is declared once: its type and default here, its documentation, variable and flag in
//! [`keys::KEYS`], from which the file `toolsize gen-config` prints, the keys a file may hold and
//! the variables read are derived.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::layers::{Stack, StackConfig, StackError};
use crate::suggest::did_you_mean;

pub mod keys;
pub(crate) use keys::generated_config;

/// Default OTLP/gRPC listen address.
pub(crate) const DEFAULT_OTLP_GRPC_ADDR: &str = "127.0.0.1:4317";
/// Default OTLP/HTTP listen address.
pub(crate) const DEFAULT_OTLP_HTTP_ADDR: &str = "127.0.0.1:4318";
/// Default admin HTTP listen address (`/metrics`, `/api/v1/*`).
pub(crate) const DEFAULT_ADMIN_ADDR: &str = "127.0.0.1:9464";
/// Default request body limit, measured after decompression (the OTLP spec's recommendation).
pub(crate) const DEFAULT_MAX_REQUEST_BYTES: u64 = 64 * 1024 * 1024;
/// Default capacity of the queue between the receivers and the aggregator, in requests.
pub(crate) const DEFAULT_QUEUE_CAPACITY: usize = 1024;
/// Default number of OTLP requests (HTTP and gRPC together) whose bodies may be read at once;
/// each may buffer up to `max_request_bytes` twice (compressed and inflated).
pub(crate) const DEFAULT_MAX_CONCURRENT_REQUESTS: usize = 16;
/// Default deadline for receiving a whole OTLP request body.
pub(crate) const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// Default time to receive a request head (HTTP/1.1; also the longest wait for the next request
/// on a keep-alive connection) or the HTTP/2 preface (gRPC).
pub(crate) const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Default longest silence on a connection before the daemon closes it.
pub(crate) const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// Default connection cap of each OTLP listener.
pub(crate) const DEFAULT_OTLP_MAX_CONNECTIONS: usize = 2048;
/// Default connection cap of the admin listener.
pub(crate) const DEFAULT_ADMIN_MAX_CONNECTIONS: usize = 128;
/// Default HTTP/2 streams one gRPC connection may have open at once.
pub(crate) const DEFAULT_GRPC_MAX_CONCURRENT_STREAMS: u32 = 64;
/// Default interval of HTTP/2 keepalive pings on gRPC connections.
pub(crate) const DEFAULT_GRPC_KEEPALIVE_INTERVAL: Duration = Duration::from_secs(60);
/// Default time to wait for a keepalive ping's answer before closing the connection.
pub(crate) const DEFAULT_GRPC_KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);
/// Default sliding windows.
pub(crate) const DEFAULT_WINDOWS: &[&str] = &["5m", "1h"];
/// Default cardinality cap: (service, tool) series beyond it go to one overflow series.
pub(crate) const DEFAULT_MAX_SERIES: usize = 2000;
/// Default longest tool name kept, in bytes; longer names are cut on a character boundary.
pub(crate) const DEFAULT_MAX_TOOL_NAME_BYTES: usize = 128;
/// Default longest `service.name` kept, in bytes; longer names are cut on a character boundary.
pub(crate) const DEFAULT_MAX_SERVICE_NAME_BYTES: usize = 128;
/// Default number of largest recent results kept per series.
pub(crate) const DEFAULT_LARGEST_RESULTS: usize = 10;
/// Default number of argument hashes tracked per series (space-saving top-k).
pub(crate) const DEFAULT_TOP_ARGS_HASHES: usize = 32;
/// Default snapshot interval.
pub(crate) const DEFAULT_SNAPSHOT_INTERVAL: &str = "10s";
/// Default interval between resends of every firing alert to Alertmanager and webhooks.
pub(crate) const DEFAULT_ALERT_RESEND_INTERVAL: &str = "1m";
/// Default severity of `ToolResultOverCeiling`.
pub(crate) const DEFAULT_OVER_CEILING_SEVERITY: &str = "page";
/// Default quiet period after which `ToolResultOverCeiling` resolves.
pub(crate) const DEFAULT_OVER_CEILING_QUIET_PERIOD: &str = "5m";
/// Default severity of `ToolArgsRepeatedlyOversize`.
pub(crate) const DEFAULT_REPEATED_OVERSIZE_SEVERITY: &str = "warning";
/// Default number of over-ceiling results with the same arguments hash that fire
/// `ToolArgsRepeatedlyOversize`.
pub(crate) const DEFAULT_REPEATED_OVERSIZE_COUNT: u32 = 3;
/// Default window in which those results are counted.
pub(crate) const DEFAULT_REPEATED_OVERSIZE_WINDOW: &str = "10m";
/// Default interval between evaluations of the window rules (`ToolResultSizeP95Jump`,
/// `ToolResultSizeNearCeiling`, `ToolResultTruncationRate`).
pub(crate) const DEFAULT_ALERT_EVALUATION_INTERVAL: &str = "10s";
/// Default ratio of the recent p95 to the baseline p95 that fires `ToolResultSizeP95Jump`.
pub(crate) const DEFAULT_P95_JUMP_FACTOR: f64 = 3.0;
/// Default minimum sized results in the recent window for `ToolResultSizeP95Jump`.
pub(crate) const DEFAULT_P95_JUMP_MIN_RECENT: u64 = 20;
/// Default minimum sized results in the baseline for `ToolResultSizeP95Jump`.
pub(crate) const DEFAULT_P95_JUMP_MIN_BASELINE: u64 = 50;
/// Default share of the ceiling the recent p95 reaches to fire `ToolResultSizeNearCeiling`.
pub(crate) const DEFAULT_NEAR_CEILING_RATIO: f64 = 0.8;
/// Default minimum count of the window rules `ToolResultSizeNearCeiling` and
/// `ToolResultTruncationRate`.
pub(crate) const DEFAULT_WINDOW_RULE_MIN_COUNT: u64 = 20;
/// Default truncated share of calls above which `ToolResultTruncationRate` fires.
pub(crate) const DEFAULT_TRUNCATION_RATE_THRESHOLD: f64 = 0.05;
/// Default placeholders that mean "content hidden", i.e. size unknown.
pub(crate) const DEFAULT_JOIN_WINDOW: &str = "10s";
pub(crate) const DEFAULT_PLACEHOLDERS: &[&str] = &["__REDACTED__", "<not specified>", "<redacted>"];

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// OTLP receivers.
    pub otlp: OtlpConfig,
    /// Admin HTTP listener.
    pub admin: AdminConfig,
    /// Per-tool aggregation.
    pub aggregation: AggregationConfig,
    /// Recognition of tool spans.
    pub recognition: RecognitionConfig,
    /// Snapshots on disk.
    pub(crate) store: StoreConfig,
    /// Alert rules and sinks.
    pub alerts: AlertsConfig,
    /// Time and connection budgets of the listeners.
    pub listeners: ListenersConfig,
    /// Token authentication of the OTLP receivers and the admin API.
    pub auth: AuthConfig,
    /// TLS on the listeners.
    pub tls: TlsConfig,
    /// `[layers]`: the truncation layers in front of the model, as the file declares them.
    pub(crate) layers: StackConfig,
    /// The effective stack, resolved from flags > environment > file > default by
    /// [`Config::load`] (from the file alone by [`Config::from_toml`]).
    #[serde(skip)]
    pub stack: Stack,
}

/// `[otlp]`: the OTLP receivers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OtlpConfig {
    /// OTLP/gRPC listen address.
    pub grpc_addr: SocketAddr,
    /// OTLP/HTTP listen address.
    pub http_addr: SocketAddr,
    /// Largest request accepted, after decompression; larger ones get 413 / RESOURCE_EXHAUSTED.
    pub max_request_bytes: u64,
    /// Requests queued for the aggregator; when full, receivers answer 503 / UNAVAILABLE.
    pub(crate) queue_capacity: usize,
    /// Requests whose bodies are read at once; more get 503 / UNAVAILABLE (reason `overloaded`).
    pub(crate) max_concurrent_requests: usize,
}

/// A positive duration written as in the file (`"250ms"`, `"10s"`, `"5m"`, `"1h"`, `"1d"`),
/// parsed once when the configuration is read; a bad or zero value is an error there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval(pub Duration);

impl std::str::FromStr for Interval {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match parse_duration(s)? {
            d if d.is_zero() => Err(format!("{s:?} must be above 0")),
            d => Ok(Interval(d)),
        }
    }
}

impl<'de> Deserialize<'de> for Interval {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl Serialize for Interval {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl Interval {
    /// A default written in the file's grammar; a bad constant is a bug, caught by the tests.
    fn default_of(s: &str) -> Self {
        s.parse().expect("valid default")
    }
}

/// Written back in the file's grammar, with the largest unit that divides it.
impl std::fmt::Display for Interval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = self.0.as_millis();
        if !ms.is_multiple_of(1000) {
            return write!(f, "{ms}ms");
        }
        let s = ms / 1000;
        match [(86400, "d"), (3600, "h"), (60, "m")]
            .into_iter()
            .find(|(n, _)| s.is_multiple_of(*n))
        {
            Some((n, unit)) => write!(f, "{}{unit}", s / n),
            None => write!(f, "{s}s"),
        }
    }
}

/// One sliding window of `aggregation.windows`: its label as written (`"5m"`, used in metric
/// labels and the API) and its duration, parsed once when the configuration is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Window {
    /// The value as written, e.g. `"5m"`.
    pub(crate) label: String,
    /// Its length.
    pub(crate) duration: Duration,
}

impl std::str::FromStr for Window {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Ok(Window {
            label: s.to_string(),
            duration: parse_duration(s)?,
        })
    }
}

impl Serialize for Window {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.label)
    }
}

impl<'de> Deserialize<'de> for Window {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// `[listeners]`: time and connection budgets of the three listeners.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ListenersConfig {
    /// Time to receive a request head or the HTTP/2 preface.
    pub header_read_timeout: Interval,
    /// Deadline for receiving a whole OTLP request body.
    pub body_timeout: Interval,
    /// Longest silence on a connection.
    pub idle_timeout: Interval,
    /// Connection cap of each OTLP listener (gRPC and HTTP each).
    pub otlp_max_connections: usize,
    /// Connection cap of the admin listener.
    pub(crate) admin_max_connections: usize,
    /// HTTP/2 streams one gRPC connection may have open at once.
    pub(crate) grpc_max_concurrent_streams: u32,
    /// Interval of HTTP/2 keepalive pings on gRPC connections.
    pub(crate) grpc_keepalive_interval: Interval,
    /// Time to wait for a ping's answer before closing the connection.
    pub(crate) grpc_keepalive_timeout: Interval,
}

impl Default for ListenersConfig {
    fn default() -> Self {
        Self {
            header_read_timeout: Interval(DEFAULT_HEADER_READ_TIMEOUT),
            body_timeout: Interval(DEFAULT_BODY_TIMEOUT),
            idle_timeout: Interval(DEFAULT_IDLE_TIMEOUT),
            otlp_max_connections: DEFAULT_OTLP_MAX_CONNECTIONS,
            admin_max_connections: DEFAULT_ADMIN_MAX_CONNECTIONS,
            grpc_max_concurrent_streams: DEFAULT_GRPC_MAX_CONCURRENT_STREAMS,
            grpc_keepalive_interval: Interval(DEFAULT_GRPC_KEEPALIVE_INTERVAL),
            grpc_keepalive_timeout: Interval(DEFAULT_GRPC_KEEPALIVE_TIMEOUT),
        }
    }
}

/// `[auth]`: a shared token required by the OTLP receivers and the admin API.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// The token; unset (and no `token_file`): no authentication.
    pub(crate) token: Option<String>,
    /// A file holding the token (first line), instead of `token`.
    pub token_file: Option<PathBuf>,
    /// A header that may carry the token instead of `Authorization: Bearer`, e.g. `x-api-key`.
    pub api_key_header: Option<String>,
    /// Whether the admin API (all but `/healthz` and `/readyz`) requires the token too.
    pub(crate) admin: Option<bool>,
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

/// `[tls]`: one certificate for the three listeners (needs the `tls` feature).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// PEM certificate (chain).
    pub cert_file: Option<PathBuf>,
    /// PEM private key.
    pub key_file: Option<PathBuf>,
}

/// `[admin]`: the admin HTTP listener.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    /// Listen address.
    pub addr: SocketAddr,
    /// The URL under which others reach the admin HTTP (`http(s)://host[:port][/prefix]`), for
    /// the links in alerts (`generatorURL`, `runbook_url`); `None`: `http://<addr>`.
    pub(crate) external_url: Option<String>,
}

/// `[aggregation]`: per (service, tool) state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AggregationConfig {
    /// Sliding windows, e.g. `["5m", "1h"]`.
    pub(crate) windows: Vec<Window>,
    /// Cardinality cap on (service, tool) series.
    pub max_series: usize,
    /// Longest tool name kept, in bytes.
    pub max_tool_name_bytes: usize,
    /// Longest `service.name` kept, in bytes.
    pub max_service_name_bytes: usize,
    /// Largest recent results kept per series.
    pub largest_results: usize,
    /// Argument hashes tracked per series.
    pub(crate) top_args_hashes: usize,
}

/// `[recognition]`: how tool spans and their sizes are read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RecognitionConfig {
    /// Attribute value length limits (characters) of the SDKs in front of the daemon; content of
    /// exactly that length is flagged truncated upstream.
    pub(crate) attribute_value_length_limits: Vec<u64>,
    /// Content values meaning "hidden": the size is unknown, not the placeholder's length.
    pub(crate) placeholders: Vec<String>,
    /// How long the signals of one coding agent's tool call are waited for.
    pub(crate) join_window: Interval,
}

/// `[alerts]`: alert rules and where alerts go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AlertsConfig {
    /// Alertmanager base URLs (`http://host:port`); alerts are posted to every one.
    pub alertmanager_urls: Vec<String>,
    /// Interval between resends of every firing alert.
    pub(crate) resend_interval: Interval,
    /// A URL receiving the same JSON list as Alertmanager.
    pub webhook_url: Option<String>,
    /// Bearer token sent to the webhook.
    pub webhook_token: Option<String>,
    /// `ToolResultOverCeiling`.
    pub over_ceiling: OverCeilingConfig,
    /// `ToolArgsRepeatedlyOversize`.
    pub repeated_oversize: RepeatedOversizeConfig,
    /// Interval between evaluations of the window rules.
    pub(crate) evaluation_interval: Interval,
    /// `ToolResultSizeP95Jump`.
    pub(crate) p95_jump: P95JumpConfig,
    /// `ToolResultSizeNearCeiling`.
    pub(crate) near_ceiling: NearCeilingConfig,
    /// `ToolResultTruncationRate`.
    pub(crate) truncation_rate: TruncationRateConfig,
}

/// `[alerts.p95_jump]`: the recent p95 of result bytes jumped against the hour before.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct P95JumpConfig {
    /// Whether the rule runs.
    pub(crate) enabled: bool,
    /// The `severity` label.
    pub(crate) severity: String,
    /// Fires when the recent p95 is at least this many times the baseline p95.
    pub(crate) factor: f64,
    /// Minimum sized results in the recent (shortest) window.
    pub(crate) min_recent: u64,
    /// Minimum sized results in the baseline.
    pub(crate) min_baseline: u64,
}

/// `[alerts.near_ceiling]`: the recent p95 of result bytes close to the ceiling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct NearCeilingConfig {
    /// Whether the rule runs.
    pub(crate) enabled: bool,
    /// The `severity` label.
    pub(crate) severity: String,
    /// Fires when the recent p95 is at least this share of the ceiling in bytes.
    pub(crate) ratio: f64,
    /// Minimum sized results in the recent window.
    pub(crate) min_count: u64,
}

/// `[alerts.truncation_rate]`: too many truncated results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct TruncationRateConfig {
    /// Whether the rule runs.
    pub(crate) enabled: bool,
    /// The `severity` label.
    pub(crate) severity: String,
    /// Fires when (truncated + truncated upstream) / calls in the recent window is above this.
    pub(crate) threshold: f64,
    /// Minimum calls in the recent window.
    pub(crate) min_count: u64,
}

impl Default for P95JumpConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            severity: "warning".to_string(),
            factor: DEFAULT_P95_JUMP_FACTOR,
            min_recent: DEFAULT_P95_JUMP_MIN_RECENT,
            min_baseline: DEFAULT_P95_JUMP_MIN_BASELINE,
        }
    }
}

impl Default for NearCeilingConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            severity: "warning".to_string(),
            ratio: DEFAULT_NEAR_CEILING_RATIO,
            min_count: DEFAULT_WINDOW_RULE_MIN_COUNT,
        }
    }
}

impl Default for TruncationRateConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            severity: "warning".to_string(),
            threshold: DEFAULT_TRUNCATION_RATE_THRESHOLD,
            min_count: DEFAULT_WINDOW_RULE_MIN_COUNT,
        }
    }
}

/// `[alerts.over_ceiling]`: a result over the ceiling of a layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OverCeilingConfig {
    /// Whether the rule runs.
    pub(crate) enabled: bool,
    /// The `severity` label.
    pub severity: String,
    /// Resolves after this long without an over-ceiling result.
    pub(crate) quiet_period: Interval,
}

/// `[alerts.repeated_oversize]`: the same arguments over the ceiling again and again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RepeatedOversizeConfig {
    /// Whether the rule runs.
    pub enabled: bool,
    /// The `severity` label.
    pub(crate) severity: String,
    /// Over-ceiling results with one arguments hash that fire it.
    pub(crate) count: u32,
    /// Window in which they are counted; the alert resolves after a window without any.
    pub(crate) window: Interval,
}

impl Default for AlertsConfig {
    fn default() -> Self {
        Self {
            alertmanager_urls: Vec::new(),
            resend_interval: Interval::default_of(DEFAULT_ALERT_RESEND_INTERVAL),
            webhook_url: None,
            webhook_token: None,
            over_ceiling: OverCeilingConfig::default(),
            repeated_oversize: RepeatedOversizeConfig::default(),
            evaluation_interval: Interval::default_of(DEFAULT_ALERT_EVALUATION_INTERVAL),
            p95_jump: P95JumpConfig::default(),
            near_ceiling: NearCeilingConfig::default(),
            truncation_rate: TruncationRateConfig::default(),
        }
    }
}

impl Default for OverCeilingConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            severity: DEFAULT_OVER_CEILING_SEVERITY.to_string(),
            quiet_period: Interval::default_of(DEFAULT_OVER_CEILING_QUIET_PERIOD),
        }
    }
}

impl Default for RepeatedOversizeConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            severity: DEFAULT_REPEATED_OVERSIZE_SEVERITY.to_string(),
            count: DEFAULT_REPEATED_OVERSIZE_COUNT,
            window: Interval::default_of(DEFAULT_REPEATED_OVERSIZE_WINDOW),
        }
    }
}

/// `[store]`: snapshots.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct StoreConfig {
    /// Directory for snapshots; empty means state is kept in memory only.
    pub(crate) data_dir: Option<PathBuf>,
    /// Interval between snapshots, e.g. `"10s"`.
    pub(crate) snapshot_interval: Interval,
}

impl Default for OtlpConfig {
    fn default() -> Self {
        Self {
            grpc_addr: DEFAULT_OTLP_GRPC_ADDR.parse().expect("valid default"),
            http_addr: DEFAULT_OTLP_HTTP_ADDR.parse().expect("valid default"),
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            max_concurrent_requests: DEFAULT_MAX_CONCURRENT_REQUESTS,
        }
    }
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            addr: DEFAULT_ADMIN_ADDR.parse().expect("valid default"),
            external_url: None,
        }
    }
}

impl Default for AggregationConfig {
    fn default() -> Self {
        Self {
            windows: DEFAULT_WINDOWS
                .iter()
                .map(|s| s.parse().expect("valid default"))
                .collect(),
            max_series: DEFAULT_MAX_SERIES,
            max_tool_name_bytes: DEFAULT_MAX_TOOL_NAME_BYTES,
            max_service_name_bytes: DEFAULT_MAX_SERVICE_NAME_BYTES,
            largest_results: DEFAULT_LARGEST_RESULTS,
            top_args_hashes: DEFAULT_TOP_ARGS_HASHES,
        }
    }
}

impl Default for RecognitionConfig {
    fn default() -> Self {
        Self {
            attribute_value_length_limits: Vec::new(),
            placeholders: DEFAULT_PLACEHOLDERS.iter().map(|s| s.to_string()).collect(),
            join_window: Interval::default_of(DEFAULT_JOIN_WINDOW),
        }
    }
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            data_dir: None,
            snapshot_interval: Interval::default_of(DEFAULT_SNAPSHOT_INTERVAL),
        }
    }
}

#[allow(clippy::derivable_impls)]
impl Default for Config {
    fn default() -> Self {
        Self {
            otlp: OtlpConfig::default(),
            admin: AdminConfig::default(),
            aggregation: AggregationConfig::default(),
            recognition: RecognitionConfig::default(),
            store: StoreConfig::default(),
            alerts: AlertsConfig::default(),
            listeners: ListenersConfig::default(),
            auth: AuthConfig::default(),
            tls: TlsConfig::default(),
            layers: StackConfig::default(),
            stack: Stack::default(),
        }
    }
}

/// A configuration that could not be read or is invalid.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML or a value has the wrong type.
    #[error("invalid config file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A key the daemon does not know.
    #[error("unknown config key `{key}`{}", suggestion.as_ref().map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default())]
    UnknownKey {
        /// The dotted key, e.g. `otlp.grcp_addr`.
        key: String,
        /// The closest known key.
        suggestion: Option<String>,
    },
    /// A value that parses but makes no sense.
    #[error("invalid value for {key} ({origin}): {message}")]
    Invalid {
        /// The dotted key or variable name.
        key: String,
        /// Where the value came from: file, environment, flag.
        origin: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The layer stack does not resolve (an unknown id, with a "did you mean", or a zero limit).
    #[error("invalid layer stack: {0}")]
    Stack(StackError),
}

/// Values given on the command line; `None` means "not given".
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--otlp-grpc-addr`.
    pub otlp_grpc_addr: Option<SocketAddr>,
    /// `--otlp-http-addr`.
    pub otlp_http_addr: Option<SocketAddr>,
    /// `--admin-addr`.
    pub admin_addr: Option<SocketAddr>,
    /// `--external-url`.
    pub external_url: Option<String>,
    /// `--data-dir`.
    pub data_dir: Option<PathBuf>,
    /// `--snapshot-interval`.
    pub snapshot_interval: Option<String>,
    /// `--max-series`.
    pub max_series: Option<usize>,
    /// `--window` (repeatable).
    pub windows: Option<Vec<String>>,
    /// `--stack` and `--ceiling-bytes`, as one source of stack settings.
    pub stack: Option<StackConfig>,
    /// `--alertmanager-url` (repeatable).
    pub alertmanager_urls: Option<Vec<String>>,
    /// `--auth-token-file`.
    pub auth_token_file: Option<PathBuf>,
    /// `--tls-cert-file`.
    pub tls_cert_file: Option<PathBuf>,
    /// `--tls-key-file`.
    pub tls_key_file: Option<PathBuf>,
}

/// `TOOLSIZE_*` variables that other parts of toolsize read (the library, `wrap`, the tests);
/// `serve` ignores them without a warning.
pub(crate) const OTHER_ENV_VARS: &[&str] = &[
    "TOOLSIZE_LARGE_RESULT_BYTES",
    "TOOLSIZE_MAX_TOOL_OUTPUT",
    "TOOLSIZE_SPILL_DIR",
    "TOOLSIZE_ALLOW_MISSING_PEERS",
];

/// One warning per `TOOLSIZE_*` name in `names` that no part of toolsize reads, with the
/// closest known variable when it looks like a typo. Warnings, not errors: the prefix may be
/// shared with other tools, and a stray variable must not stop the daemon from starting.
pub(crate) fn unknown_env_warnings<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let known: Vec<&str> = keys::env_vars()
        .map(|(n, _)| n)
        .chain(OTHER_ENV_VARS.iter().copied())
        .collect();
    names
        .into_iter()
        .filter(|n| n.starts_with("TOOLSIZE_") && !known.contains(n))
        .map(|n| match did_you_mean(n, known.iter().copied()) {
            Some(s) => format!("unknown environment variable `{n}` ignored (did you mean `{s}`?)"),
            None => format!("unknown environment variable `{n}` ignored"),
        })
        .collect()
}

impl Config {
    /// Reads the configuration: defaults, then `file`, then `env` (`TOOLSIZE_*` pairs), then
    /// `flags`; validates the result.
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
        flags: &Overrides,
    ) -> Result<Self, ConfigError> {
        let mut config = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.to_owned(),
                    source,
                })?;
                Self::from_toml(&text).map_err(|e| match e {
                    ConfigError::Parse { message, .. } => ConfigError::Parse {
                        path: path.to_owned(),
                        message,
                    },
                    other => other,
                })?
            }
            None => Self::default(),
        };
        let env: std::collections::HashMap<String, String> = env.into_iter().collect();
        let mut names: Vec<&String> = env.keys().collect();
        names.sort();
        for name in names {
            config.apply_env(name, &env[name])?;
        }
        config.apply_flags(flags)?;
        config.validate()?;
        let env_stack = StackConfig::from_env(&env).map_err(ConfigError::Stack)?;
        config.stack = Stack::resolve(
            flags.stack.as_ref(),
            env_stack.as_ref(),
            Some(&config.layers),
        )
        .map_err(ConfigError::Stack)?;
        Ok(config)
    }

    /// Parses a TOML document; unknown keys are rejected with a suggestion.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: PathBuf::new(),
            message: e.to_string(),
        })?;
        check_keys(&table, "")?;
        let mut config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: PathBuf::new(),
            message: e.to_string(),
        })?;
        config.validate()?;
        config.stack =
            Stack::resolve(None, None, Some(&config.layers)).map_err(ConfigError::Stack)?;
        Ok(config)
    }

    fn apply_env(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        // Other TOOLSIZE_* variables belong to the library or other subcommands; the stack's
        // are resolved with the stack (`StackConfig::from_env`).
        let Some((_, key)) = keys::env_vars().find(|(n, _)| *n == name) else {
            return Ok(());
        };
        if key.path.starts_with("layers.") {
            return Ok(());
        }
        keys::set(self, key, value).map_err(|message| ConfigError::Invalid {
            key: name.to_string(),
            origin: "environment",
            message,
        })
    }

    fn apply_flags(&mut self, f: &Overrides) -> Result<(), ConfigError> {
        let invalid = |key: &str| {
            let key = key.to_string();
            move |message: String| ConfigError::Invalid {
                key,
                origin: "flag",
                message,
            }
        };
        if let Some(a) = f.otlp_grpc_addr {
            self.otlp.grpc_addr = a;
        }
        if let Some(a) = f.otlp_http_addr {
            self.otlp.http_addr = a;
        }
        if let Some(a) = f.admin_addr {
            self.admin.addr = a;
        }
        if let Some(u) = &f.external_url {
            self.admin.external_url = Some(u.clone());
        }
        if let Some(d) = &f.data_dir {
            self.store.data_dir = Some(d.clone());
        }
        if let Some(i) = &f.snapshot_interval {
            self.store.snapshot_interval = i.parse().map_err(invalid("--snapshot-interval"))?;
        }
        if let Some(m) = f.max_series {
            self.aggregation.max_series = m;
        }
        if let Some(w) = &f.windows {
            self.aggregation.windows = w
                .iter()
                .map(|s| s.parse())
                .collect::<Result<_, _>>()
                .map_err(invalid("--window"))?;
        }
        if let Some(u) = &f.alertmanager_urls {
            self.alerts.alertmanager_urls = u.clone();
        }
        if let Some(t) = &f.auth_token_file {
            self.auth.token_file = Some(t.clone());
            self.auth.token = None;
        }
        if let Some(c) = &f.tls_cert_file {
            self.tls.cert_file = Some(c.clone());
        }
        if let Some(k) = &f.tls_key_file {
            self.tls.key_file = Some(k.clone());
        }
        Ok(())
    }

    /// Checks values that parse but make no sense.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key: &str, message: String| ConfigError::Invalid {
            key: key.to_string(),
            origin: "config",
            message,
        };
        if self.aggregation.windows.is_empty() {
            return Err(invalid("aggregation.windows", "at least one window".into()));
        }
        for w in &self.aggregation.windows {
            if w.duration.as_secs() < 5 {
                return Err(invalid(
                    "aggregation.windows",
                    format!("window {:?} is shorter than 5s", w.label),
                ));
            }
        }
        if self.aggregation.max_series == 0 {
            return Err(invalid("aggregation.max_series", "must be above 0".into()));
        }
        if self.aggregation.max_tool_name_bytes < 8 {
            return Err(invalid(
                "aggregation.max_tool_name_bytes",
                "must be at least 8".into(),
            ));
        }
        if !(8..=4096).contains(&self.aggregation.max_service_name_bytes) {
            return Err(invalid(
                "aggregation.max_service_name_bytes",
                "must be between 8 and 4096".into(),
            ));
        }
        if self.otlp.max_concurrent_requests == 0 {
            return Err(invalid(
                "otlp.max_concurrent_requests",
                "must be above 0".into(),
            ));
        }
        if self.otlp.queue_capacity == 0 {
            return Err(invalid("otlp.queue_capacity", "must be above 0".into()));
        }
        let l = &self.listeners;
        for (key, n) in [
            ("listeners.otlp_max_connections", l.otlp_max_connections),
            ("listeners.admin_max_connections", l.admin_max_connections),
            (
                "listeners.grpc_max_concurrent_streams",
                l.grpc_max_concurrent_streams as usize,
            ),
        ] {
            if n == 0 {
                return Err(invalid(key, "must be above 0".into()));
            }
        }
        if self.auth.token.is_some() && self.auth.token_file.is_some() {
            return Err(invalid(
                "auth.token",
                "set auth.token or auth.token_file, not both".into(),
            ));
        }
        if let Some(h) = &self.auth.api_key_header {
            if axum::http::HeaderName::from_bytes(h.trim().as_bytes()).is_err() {
                return Err(invalid(
                    "auth.api_key_header",
                    format!("{h:?} is not a header name"),
                ));
            }
        }
        if self.tls.cert_file.is_some() != self.tls.key_file.is_some() {
            return Err(invalid(
                "tls",
                "set both tls.cert_file and tls.key_file, or neither".into(),
            ));
        }
        if self.tls.cert_file.is_some() && !cfg!(feature = "tls") {
            return Err(invalid(
                "tls.cert_file",
                "this toolsize was built without the `tls` feature".into(),
            ));
        }
        let p = &self.alerts.p95_jump.factor;
        if !(p.is_finite() && *p > 1.0) {
            return Err(invalid(
                "alerts.p95_jump.factor",
                "must be a number above 1".into(),
            ));
        }
        let r = &self.alerts.near_ceiling.ratio;
        if !(r.is_finite() && *r > 0.0 && *r <= 1.0) {
            return Err(invalid(
                "alerts.near_ceiling.ratio",
                "must be above 0 and at most 1".into(),
            ));
        }
        let t = &self.alerts.truncation_rate.threshold;
        if !(t.is_finite() && (0.0..1.0).contains(t)) {
            return Err(invalid(
                "alerts.truncation_rate.threshold",
                "must be at least 0 and below 1".into(),
            ));
        }
        if self.alerts.repeated_oversize.count == 0 {
            return Err(invalid(
                "alerts.repeated_oversize.count",
                "must be above 0".into(),
            ));
        }
        if let Some(url) = &self.admin.external_url {
            let rest = url
                .strip_prefix("http://")
                .or_else(|| url.strip_prefix("https://"));
            if !rest.is_some_and(|r| !r.is_empty() && !r.starts_with('/')) {
                return Err(invalid(
                    "admin.external_url",
                    format!("{url:?} is not an http:// or https:// URL with a host"),
                ));
            }
        }
        for url in &self.alerts.alertmanager_urls {
            crate::collector::net::client::Target::parse(url)
                .map_err(|m| invalid("alerts.alertmanager_urls", m))?;
        }
        if let Some(url) = &self.alerts.webhook_url {
            crate::collector::net::client::Target::parse(url)
                .map_err(|m| invalid("alerts.webhook_url", m))?;
        }
        if self.otlp.max_request_bytes < 1024 {
            return Err(invalid(
                "otlp.max_request_bytes",
                "must be at least 1024".into(),
            ));
        }
        Ok(())
    }

    /// The admin HTTP's base URL for links: `admin.external_url` without a trailing `/`, or
    /// `http://<admin.addr>`.
    pub(crate) fn admin_base_url(&self) -> String {
        match &self.admin.external_url {
            Some(u) => u.trim_end_matches('/').to_string(),
            None => format!("http://{}", self.admin.addr),
        }
    }
}

/// Parses `"250ms"`, `"10s"`, `"5m"`, `"1h"`, `"1d"`.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{s:?} has no unit (use ms, s, m, h or d)"))?;
    let (n, unit) = s.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{s:?} does not start with a number"))?;
    let secs = match unit {
        "ms" => return Ok(Duration::from_millis(n)),
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86400,
        _ => {
            return Err(format!(
                "{s:?}: unknown unit {unit:?} (use ms, s, m, h or d)"
            ))
        }
    };
    Ok(Duration::from_secs(secs))
}

fn check_keys(table: &toml::Table, prefix: &str) -> Result<(), ConfigError> {
    for (k, v) in table {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        if !keys::is_known(&key) {
            return Err(ConfigError::UnknownKey {
                suggestion: did_you_mean(&key, keys::KEYS.iter().map(|k| k.path))
                    .map(str::to_owned),
                key,
            });
        }
        if let toml::Value::Table(t) = v {
            if keys::is_free(&key) {
                continue;
            }
            check_keys(t, &key)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_config_parses_back_to_the_defaults() {
        let parsed = Config::from_toml(&keys::generated_config()).unwrap();
        assert_eq!(parsed, Config::default());
    }

    #[test]
    fn unknown_key_suggests_the_closest() {
        let err = Config::from_toml("[otlp]\ngrcp_addr = \"127.0.0.1:1\"\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown config key `otlp.grcp_addr` (did you mean `otlp.grpc_addr`?)"
        );
        let err = Config::from_toml("[alerts.p95_jump]\nmin_recnt = 3\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown config key `alerts.p95_jump.min_recnt` \
             (did you mean `alerts.p95_jump.min_recent`?)"
        );
        let err = Config::from_toml("[agregation]\n").unwrap_err();
        assert!(
            err.to_string().contains("did you mean `aggregation`"),
            "{err}"
        );
    }

    #[test]
    fn precedence_is_flags_env_file_defaults() {
        let dir = std::env::temp_dir().join(format!("toolsize-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("c.toml");
        std::fs::write(
            &file,
            "[aggregation]\nmax_series = 10\n[admin]\naddr = \"127.0.0.1:1\"\n[otlp]\nhttp_addr = \"127.0.0.1:7\"\n",
        )
        .unwrap();
        let env = vec![
            ("TOOLSIZE_MAX_SERIES".to_string(), "20".to_string()),
            ("TOOLSIZE_ADMIN_ADDR".to_string(), "127.0.0.1:2".to_string()),
        ];
        let flags = Overrides {
            admin_addr: Some("127.0.0.1:3".parse().unwrap()),
            ..Overrides::default()
        };
        let c = Config::load(Some(&file), env, &flags).unwrap();
        assert_eq!(c.admin.addr.port(), 3, "flag beats env");
        assert_eq!(c.aggregation.max_series, 20, "env beats file");
        assert_eq!(c.otlp.http_addr.port(), 7, "file beats default");
        assert_eq!(c.otlp.grpc_addr.port(), 4317, "default");
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn bad_values_are_errors() {
        assert!(Config::from_toml("[store]\nsnapshot_interval = \"0s\"\n").is_err());
        assert!(Config::from_toml("[aggregation]\nwindows = [\"5 minutes\"]\n").is_err());
        assert!(Config::from_toml("[admin]\naddr = \"nope\"\n").is_err());
        assert!(Config::from_toml("[alerts]\nalertmanager_urls = [\"https://am\"]\n").is_err());
        assert!(Config::from_toml("[alerts.over_ceiling]\nquiet_period = \"0s\"\n").is_err());
        assert!(Config::from_toml("[alerts.over_ceiling]\nquiet_perod = \"1s\"\n").is_err());
        assert!(Config::from_toml("[alerts]\nevaluation_interval = \"0s\"\n").is_err());
        assert!(Config::from_toml("[alerts.p95_jump]\nfactor = 1.0\n").is_err());
        assert!(Config::from_toml("[alerts.p95_jump]\nfactr = 3.0\n").is_err());
        assert!(Config::from_toml("[alerts.near_ceiling]\nratio = 1.5\n").is_err());
        assert!(Config::from_toml("[alerts.truncation_rate]\nthreshold = 1.0\n").is_err());
        let c = Config::from_toml(
            "[alerts]\nevaluation_interval = \"2s\"\n[alerts.p95_jump]\nfactor = 4.5\n\
             min_recent = 5\n[alerts.near_ceiling]\nenabled = false\n\
             [alerts.truncation_rate]\nthreshold = 0.1\nmin_count = 7\n",
        )
        .unwrap();
        assert_eq!(c.alerts.evaluation_interval.0, Duration::from_secs(2));
        assert_eq!(c.alerts.p95_jump.factor, 4.5);
        assert_eq!(c.alerts.p95_jump.min_recent, 5);
        assert_eq!(c.alerts.p95_jump.min_baseline, 50);
        assert!(!c.alerts.near_ceiling.enabled);
        assert_eq!(c.alerts.truncation_rate.threshold, 0.1);
        assert_eq!(c.alerts.truncation_rate.min_count, 7);
        let env = vec![("TOOLSIZE_MAX_SERIES".to_string(), "many".to_string())];
        assert!(Config::load(None, env, &Overrides::default()).is_err());
    }

    #[test]
    fn external_url_precedence_and_validation() {
        let dir = std::env::temp_dir().join(format!("toolsize-cfg-url-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.toml");
        std::fs::write(&path, "[admin]\nexternal_url = \"http://file:9464\"\n").unwrap();
        let file = Some(path.as_path());
        let env = vec![(
            "TOOLSIZE_EXTERNAL_URL".to_string(),
            "https://env.example/toolsize".to_string(),
        )];
        let from_file = Config::load(file, vec![], &Overrides::default()).unwrap();
        assert_eq!(
            from_file.admin.external_url.as_deref(),
            Some("http://file:9464")
        );
        let c = Config::load(file, env.clone(), &Overrides::default()).unwrap();
        assert_eq!(
            c.admin.external_url.as_deref(),
            Some("https://env.example/toolsize"),
            "env beats file"
        );
        let flags = Overrides {
            external_url: Some("http://flag:1".into()),
            ..Overrides::default()
        };
        let c = Config::load(file, env, &flags).unwrap();
        assert_eq!(
            c.admin.external_url.as_deref(),
            Some("http://flag:1"),
            "flag beats env"
        );
        let _ = std::fs::remove_dir_all(&dir);
        for bad in [
            "toolsize.internal",
            "ftp://x",
            "http://",
            "https:///runbook",
        ] {
            let f = Overrides {
                external_url: Some(bad.into()),
                ..Overrides::default()
            };
            let e = Config::load(None, vec![], &f).unwrap_err().to_string();
            assert!(e.contains("admin.external_url"), "{bad}: {e}");
        }
    }

    #[test]
    fn alertmanager_urls_from_env_and_flags() {
        let env = vec![(
            "TOOLSIZE_ALERTMANAGER_URLS".to_string(),
            "http://a:9093, http://b:9093".to_string(),
        )];
        let c = Config::load(None, env.clone(), &Overrides::default()).unwrap();
        assert_eq!(
            c.alerts.alertmanager_urls,
            ["http://a:9093", "http://b:9093"]
        );
        let flags = Overrides {
            alertmanager_urls: Some(vec!["http://c:9093".into()]),
            ..Overrides::default()
        };
        let c = Config::load(None, env, &flags).unwrap();
        assert_eq!(
            c.alerts.alertmanager_urls,
            ["http://c:9093"],
            "flag beats env"
        );
    }

    #[test]
    fn listener_durations_are_typed_at_load() {
        let c = Config::from_toml(
            "[listeners]\nheader_read_timeout = \"250ms\"\nidle_timeout = \"2m\"\n",
        )
        .unwrap();
        assert_eq!(
            c.listeners.header_read_timeout.0,
            Duration::from_millis(250)
        );
        assert_eq!(c.listeners.idle_timeout.0, Duration::from_secs(120));
        assert_eq!(c.listeners.body_timeout.0, DEFAULT_BODY_TIMEOUT);
        for bad in ["\"0s\"", "\"10\"", "\"ten\"", "10"] {
            let e = Config::from_toml(&format!("[listeners]\nbody_timeout = {bad}\n"));
            assert!(e.is_err(), "{bad}");
        }
        assert!(Config::from_toml("[listeners]\notlp_max_connections = 0\n").is_err());
    }

    #[test]
    fn alert_and_store_durations_are_typed_at_load() {
        let c = Config::from_toml(
            "[store]\nsnapshot_interval = \"250ms\"\n[aggregation]\nwindows = [\"30s\", \"2h\"]\n\
             [alerts]\nresend_interval = \"2m\"\n[alerts.over_ceiling]\nquiet_period = \"1h\"\n\
             [alerts.repeated_oversize]\nwindow = \"1d\"\n",
        )
        .unwrap();
        assert_eq!(c.store.snapshot_interval.0, Duration::from_millis(250));
        assert_eq!(c.alerts.resend_interval.0, Duration::from_secs(120));
        assert_eq!(
            c.alerts.over_ceiling.quiet_period.0,
            Duration::from_secs(3600)
        );
        assert_eq!(
            c.alerts.repeated_oversize.window.0,
            Duration::from_secs(86400)
        );
        let w: Vec<_> = c
            .aggregation
            .windows
            .iter()
            .map(|w| (w.label.as_str(), w.duration))
            .collect();
        assert_eq!(
            w,
            [
                ("30s", Duration::from_secs(30)),
                ("2h", Duration::from_secs(7200))
            ]
        );
        let e = Config::from_toml("[alerts]\nresend_interval = \"1 minute\"\n").unwrap_err();
        assert!(e.to_string().contains("resend_interval"), "{e}");
        let e = Config::from_toml("[aggregation]\nwindows = [\"2s\"]\n").unwrap_err();
        assert!(e.to_string().contains("shorter than 5s"), "{e}");

        let env = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        let c = Config::load(
            None,
            env("TOOLSIZE_WINDOWS", " 1m, 10m ,"),
            &Overrides::default(),
        )
        .unwrap();
        let labels: Vec<_> = c.aggregation.windows.iter().map(|w| &w.label).collect();
        assert_eq!(labels, ["1m", "10m"]);
        let e = Config::load(
            None,
            env("TOOLSIZE_SNAPSHOT_INTERVAL", "0s"),
            &Overrides::default(),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("invalid value for TOOLSIZE_SNAPSHOT_INTERVAL (environment)"),
            "{e}"
        );
        let flags = Overrides {
            windows: Some(vec!["5 minutes".into()]),
            ..Overrides::default()
        };
        let e = Config::load(None, Vec::new(), &flags).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("invalid value for --window (flag)"),
            "{e}"
        );
        let flags = Overrides {
            snapshot_interval: Some("90s".into()),
            ..Overrides::default()
        };
        let c = Config::load(None, env("TOOLSIZE_SNAPSHOT_INTERVAL", "1s"), &flags).unwrap();
        assert_eq!(
            c.store.snapshot_interval.0,
            Duration::from_secs(90),
            "flag beats env"
        );
    }

    #[test]
    fn intervals_display_in_the_file_grammar() {
        for s in ["250ms", "1500ms", "10s", "90s", "5m", "1h", "36h", "1d"] {
            let i: Interval = s.parse().unwrap();
            assert_eq!(i.to_string(), s);
        }
        assert_eq!("120s".parse::<Interval>().unwrap().to_string(), "2m");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("m").is_err());
    }

    #[test]
    fn unknown_toolsize_variables_warn_with_a_suggestion() {
        let w = unknown_env_warnings([
            "TOOLSIZE_MAX_SERIE",
            "TOOLSIZE_SPILL_DIR",
            "TOOLSIZE_DATA_DIR",
            "TOOLSIZE_ZZZZZZZZZZZZZZZZZZZZZZZZ",
            "PATH",
        ]);
        assert_eq!(
            w,
            [
                "unknown environment variable `TOOLSIZE_MAX_SERIE` ignored (did you mean `TOOLSIZE_MAX_SERIES`?)",
                "unknown environment variable `TOOLSIZE_ZZZZZZZZZZZZZZZZZZZZZZZZ` ignored",
            ]
        );
    }
}
