//! One call that exports tool-call spans over OTLP: tracing-subscriber + tracing-opentelemetry +
//! opentelemetry-otlp, configured from the standard `OTEL_*` variables.
//!
//! ```no_run
//! let _guard = toolsize::export::init()?; // keep it alive; dropping it flushes
//! # Ok::<(), toolsize::export::ExportError>(())
//! ```
//!
//! What is honoured (explicit builder values win over the environment):
//!
//! | variable | meaning |
//! |---|---|
//! | `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, `OTEL_EXPORTER_OTLP_PROTOCOL` | `grpc` or `http/protobuf` (default); `http/json` is refused with an error naming both (the JSON exporter would compile the OpenTelemetry metrics SDK and a serde layer for every OTLP message into every user's build; the daemon reads both encodings alike) |
//! | `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_ENDPOINT` | where to send (defaults `http://localhost:4317` for gRPC, `http://localhost:4318/v1/traces` for HTTP) |
//! | `OTEL_EXPORTER_OTLP_*HEADERS`, `*TIMEOUT`, `*COMPRESSION` | passed to the exporter as it reads them |
//! | `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES` | the resource of every span |
//! | `OTEL_BSP_*` | the batch processor's queue and schedule |
//! | `RUST_LOG` | what the log output on standard error shows (default `info`) |
//!
//! [`init`] also installs a log output: tracing-subscriber's `fmt` layer on standard error,
//! showing the application's `tracing` events and toolsize's own (filtered by `RUST_LOG`, or
//! [`ExportBuilder::log_filter`]), in colour only when standard error is a terminal.
//! [`ExportBuilder::logs`]`(false)` installs none, to keep the application's own.
//!
//! Spans leave through the SDK's batch processor, on its own thread: a tool call never waits for
//! the network. Nothing is lost silently: every span ended, exported, refused by the peer or dropped
//! on a full queue is counted, and readable from [`ExportGuard::stats`]; the first failed export is
//! logged at once, and spans lost by the time of a flush or shutdown are logged with their count.
//! The gRPC exporter runs on a small runtime owned by the guard, so it works from synchronous
//! programs and from any async runtime, and shutdown cannot deadlock on the caller's runtime.
//!
//! Only toolsize's tool-call spans and their events go to OpenTelemetry by default (and, with the
//! `rig` or `swiftide` feature, that framework's own tool spans, which `toolsize::rig` and
//! `toolsize::swiftide` measure): the application's own
//! spans (whose fields may hold arguments) and log lines stay in the process unless
//! [`ExportBuilder::all_spans`] asks for the spans too.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::Context;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchSpanProcessor, SdkTracerProvider, Span, SpanData, SpanExporter, SpanProcessor,
};
use opentelemetry_sdk::Resource;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Layer;

/// The export pipeline's layer: tracing-opentelemetry at INFO and above, passing only what
/// [`exported`] passes.
fn otel_layer<S>(
    tracer: opentelemetry_sdk::trace::Tracer,
    all_spans: bool,
) -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(tracing_subscriber::filter::filter_fn(move |meta| {
            exported(meta, all_spans)
        }))
        .with_filter(tracing_subscriber::filter::LevelFilter::INFO)
}

/// What the OpenTelemetry layer of [`ExportBuilder::install`] passes on (at INFO and above):
/// toolsize's spans and events, the frameworks' tool spans, and with `all_spans` every span;
/// no other event, whatever its level (swiftide's DEBUG "Completed tool call" event, which
/// carries the tool's output and arguments, among them).
fn exported(meta: &tracing::Metadata<'_>, all_spans: bool) -> bool {
    meta.target().starts_with("toolsize")
        || (all_spans && meta.is_span())
        || framework_tool_span(meta)
}

/// The log output's filter: `directives` (`RUST_LOG` syntax), else `RUST_LOG`, else `info`.
fn log_filter(directives: Option<&str>) -> tracing_subscriber::EnvFilter {
    match directives {
        Some(d) => tracing_subscriber::EnvFilter::new(d),
        None => tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
    }
}

/// rig's or swiftide's own tool span (with the `rig` or `swiftide` feature), which the
/// framework's wrapper writes toolsize's attributes to: exported like toolsize's own, since it
/// stands for one tool call.
fn framework_tool_span(meta: &tracing::Metadata<'_>) -> bool {
    #[cfg(feature = "rig")]
    if crate::rig::is_rig_tool_span(meta) {
        return true;
    }
    #[cfg(feature = "swiftide")]
    if crate::swiftide::is_swiftide_tool_span(meta) {
        return true;
    }
    let _ = meta;
    false
}

/// The OTLP transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP/gRPC (default port 4317).
    Grpc,
    /// OTLP/HTTP with protobuf bodies (default port 4318, path `/v1/traces`).
    HttpProtobuf,
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Grpc => "grpc",
            Protocol::HttpProtobuf => "http/protobuf",
        })
    }
}

impl std::str::FromStr for Protocol {
    type Err = ExportError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "grpc" => Ok(Protocol::Grpc),
            "http/protobuf" => Ok(Protocol::HttpProtobuf),
            other => Err(ExportError::UnsupportedProtocol(other.to_owned())),
        }
    }
}

/// The default protocol, as the OTLP exporter specification sets it.
pub const DEFAULT_PROTOCOL: Protocol = Protocol::HttpProtobuf;

/// The protocol variables, most specific first.
pub const PROTOCOL_VARIABLES: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
];

/// Why export could not be set up or flushed. Its `Debug` is its message (with the variant's
/// name), so that `main() -> Result<(), Box<dyn Error>>` and `.unwrap()` print a sentence.
pub enum ExportError {
    /// The protocol named (by the builder or the environment) is not supported.
    UnsupportedProtocol(String),
    /// The OTLP exporter could not be built (bad endpoint, headers, …).
    Exporter(String),
    /// The runtime for the gRPC exporter could not be started.
    Runtime(std::io::Error),
    /// A global `tracing` subscriber was installed already.
    SubscriberAlreadySet,
    /// Flushing or shutting down the pipeline failed.
    Flush(String),
}

impl fmt::Display for ExportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExportError::UnsupportedProtocol(p) => write!(
                f,
                "unsupported OTLP protocol {p:?} (from the builder, or {} / {}): toolsize \
                 exports \"grpc\" or \"http/protobuf\"; the daemon reads both",
                PROTOCOL_VARIABLES[0], PROTOCOL_VARIABLES[1]
            ),
            ExportError::Exporter(e) => write!(f, "cannot build the OTLP exporter: {e}"),
            ExportError::Runtime(e) => write!(f, "cannot start the exporter's runtime: {e}"),
            ExportError::SubscriberAlreadySet => f.write_str(
                "a global tracing subscriber is already installed: add toolsize's spans to it with \
                 tracing-opentelemetry instead of calling export::init",
            ),
            ExportError::Flush(e) => write!(f, "cannot flush spans: {e}"),
        }
    }
}

impl fmt::Debug for ExportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            ExportError::UnsupportedProtocol(_) => "UnsupportedProtocol",
            ExportError::Exporter(_) => "Exporter",
            ExportError::Runtime(_) => "Runtime",
            ExportError::SubscriberAlreadySet => "SubscriberAlreadySet",
            ExportError::Flush(_) => "Flush",
        };
        write!(f, "{name}: {self}")
    }
}

impl std::error::Error for ExportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ExportError::Runtime(e) => Some(e),
            _ => None,
        }
    }
}

/// Sets up export with everything taken from the environment. See [`ExportBuilder`].
pub fn init() -> Result<ExportGuard, ExportError> {
    ExportBuilder::default().install()
}

/// Starts an [`ExportBuilder`].
pub fn builder() -> ExportBuilder {
    ExportBuilder::default()
}

/// Export settings; each left unset falls back to the environment, then to the default.
#[derive(Clone, Debug, Default)]
#[must_use = "an ExportBuilder does nothing until install is called"]
pub struct ExportBuilder {
    protocol: Option<Protocol>,
    endpoint: Option<String>,
    service_name: Option<String>,
    log_filter: Option<String>,
    logs: Option<bool>,
    scheduled_delay: Option<Duration>,
    max_queue_size: Option<usize>,
    all_spans: bool,
}

impl ExportBuilder {
    /// The transport (default: the environment, then [`DEFAULT_PROTOCOL`]).
    pub fn protocol(mut self, protocol: Protocol) -> Self {
        self.protocol = Some(protocol);
        self
    }

    /// The collector's base URL, e.g. `http://127.0.0.1:4318`; for HTTP, `/v1/traces` is added
    /// unless the URL ends with it already.
    pub fn endpoint(mut self, url: impl Into<String>) -> Self {
        self.endpoint = Some(url.into());
        self
    }

    /// The `service.name` resource attribute (default: `OTEL_SERVICE_NAME`).
    pub fn service_name(mut self, name: impl Into<String>) -> Self {
        self.service_name = Some(name.into());
        self
    }

    /// Whether to also install a log output on standard error (default: yes).
    pub fn logs(mut self, on: bool) -> Self {
        self.logs = Some(on);
        self
    }

    /// The log output's filter, in `RUST_LOG` syntax (default: `RUST_LOG`, then `info`).
    pub fn log_filter(mut self, directives: impl Into<String>) -> Self {
        self.log_filter = Some(directives.into());
        self
    }

    /// How often the batch processor sends (default: `OTEL_BSP_SCHEDULE_DELAY`, then 5 s).
    pub fn scheduled_delay(mut self, delay: Duration) -> Self {
        self.scheduled_delay = Some(delay);
        self
    }

    /// How many ended spans may wait for export before new ones are dropped (and counted)
    /// (default: `OTEL_BSP_MAX_QUEUE_SIZE`, then 2048).
    pub fn max_queue_size(mut self, spans: usize) -> Self {
        self.max_queue_size = Some(spans);
        self
    }

    /// Export the application's other `tracing` spans too, not only toolsize's tool-call spans
    /// (default: no). Spans made with `#[tracing::instrument]` record function arguments by
    /// default, so turning this on can send content to the collector.
    pub fn all_spans(mut self, on: bool) -> Self {
        self.all_spans = on;
        self
    }

    /// The protocol these settings resolve to.
    pub fn resolved_protocol(&self) -> Result<Protocol, ExportError> {
        if let Some(p) = self.protocol {
            return Ok(p);
        }
        for var in PROTOCOL_VARIABLES {
            if let Ok(v) = std::env::var(var) {
                if !v.trim().is_empty() {
                    return v.parse();
                }
            }
        }
        Ok(DEFAULT_PROTOCOL)
    }

    /// Builds the pipeline without installing a subscriber: the guard, and the tracer provider
    /// for the caller's own `tracing-opentelemetry` layer ([`ExportGuard::provider`]).
    pub fn build(self) -> Result<ExportGuard, ExportError> {
        let protocol = self.resolved_protocol()?;
        let counters = Arc::new(Counters::default());
        let mut runtime = None;
        let exporter = match protocol {
            Protocol::HttpProtobuf => {
                let mut b = opentelemetry_otlp::SpanExporter::builder().with_http();
                if let Some(url) = &self.endpoint {
                    b = b.with_endpoint(http_traces_url(url));
                }
                Exporter::Http(
                    b.build()
                        .map_err(|e| ExportError::Exporter(e.to_string()))?,
                )
            }
            Protocol::Grpc => {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("toolsize-otlp")
                    .enable_all()
                    .build()
                    .map_err(ExportError::Runtime)?;
                let exporter = {
                    let _entered = rt.enter();
                    let mut b = opentelemetry_otlp::SpanExporter::builder().with_tonic();
                    if let Some(url) = &self.endpoint {
                        b = b.with_endpoint(url.clone());
                    }
                    b.build()
                        .map_err(|e| ExportError::Exporter(e.to_string()))?
                };
                runtime = Some(rt);
                Exporter::Grpc(exporter)
            }
        };
        let exporter = CountingExporter {
            inner: exporter,
            counters: Arc::clone(&counters),
        };
        let mut config = opentelemetry_sdk::trace::BatchConfigBuilder::default();
        if let Some(delay) = self.scheduled_delay {
            config = config.with_scheduled_delay(delay);
        }
        if let Some(size) = self.max_queue_size {
            config = config
                .with_max_queue_size(size.max(1))
                .with_max_export_batch_size(size.clamp(1, 512));
        }
        let batch = BatchSpanProcessor::builder(exporter)
            .with_batch_config(config.build())
            .build();
        let mut resource = Resource::builder();
        if let Some(name) = &self.service_name {
            resource = resource.with_service_name(name.clone());
        }
        let provider = SdkTracerProvider::builder()
            .with_resource(resource.build())
            .with_span_processor(CountingProcessor {
                inner: batch,
                counters: Arc::clone(&counters),
            })
            .build();
        Ok(ExportGuard {
            provider,
            counters,
            runtime,
            protocol,
            settings: self,
        })
    }

    /// Builds the pipeline and installs it as the global `tracing` subscriber (and the global
    /// OpenTelemetry tracer provider).
    pub fn install(self) -> Result<ExportGuard, ExportError> {
        let guard = self.build()?;
        let tracer = guard.provider.tracer("toolsize");
        let all_spans = guard.settings.all_spans;
        let otel = otel_layer(tracer, all_spans);
        let logs = if guard.settings.logs.unwrap_or(true) {
            let filter = log_filter(guard.settings.log_filter.as_deref());
            Some(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                    .with_filter(filter),
            )
        } else {
            None
        };
        let subscriber = tracing_subscriber::registry().with(otel).with(logs);
        tracing::subscriber::set_global_default(subscriber)
            .map_err(|_| ExportError::SubscriberAlreadySet)?;
        opentelemetry::global::set_tracer_provider(guard.provider.clone());
        tracing::info!(
            target: "toolsize",
            protocol = %guard.protocol,
            "OTLP span export set up."
        );
        Ok(guard)
    }
}

fn http_traces_url(base: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_owned()
    } else {
        format!("{base}/v1/traces")
    }
}

/// What the export pipeline did with the spans it was given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExportStats {
    /// Spans ended and handed to the pipeline.
    pub spans_ended: u64,
    /// Spans the peer accepted.
    pub spans_exported: u64,
    /// Spans in exports that failed (peer unreachable, refused, timed out).
    pub spans_failed: u64,
}

impl ExportStats {
    /// Spans neither exported nor failed: dropped on a full queue, or still queued. Exact after a
    /// flush ([`ExportGuard::flush`]).
    pub fn spans_dropped(&self) -> u64 {
        self.spans_ended
            .saturating_sub(self.spans_exported)
            .saturating_sub(self.spans_failed)
    }

    /// Spans that did not reach the peer: failed plus dropped.
    pub fn spans_lost(&self) -> u64 {
        self.spans_failed + self.spans_dropped()
    }
}

#[derive(Debug, Default)]
struct Counters {
    ended: AtomicU64,
    exported: AtomicU64,
    failed: AtomicU64,
    failure_logged: AtomicBool,
    loss_logged: AtomicBool,
}

impl Counters {
    fn stats(&self) -> ExportStats {
        ExportStats {
            spans_ended: self.ended.load(Ordering::Relaxed),
            spans_exported: self.exported.load(Ordering::Relaxed),
            spans_failed: self.failed.load(Ordering::Relaxed),
        }
    }
}

/// Keeps the export pipeline alive; dropping it flushes what is queued and shuts the pipeline
/// down, logging any spans that were lost.
#[must_use = "dropping the guard shuts span export down: keep it alive for the life of the program"]
pub struct ExportGuard {
    provider: SdkTracerProvider,
    counters: Arc<Counters>,
    runtime: Option<tokio::runtime::Runtime>,
    protocol: Protocol,
    settings: ExportBuilder,
}

impl fmt::Debug for ExportGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExportGuard")
            .field("protocol", &self.protocol)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl ExportGuard {
    /// Counts of what happened to the spans so far.
    pub fn stats(&self) -> ExportStats {
        self.counters.stats()
    }

    /// The protocol in use.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// The tracer provider, for a `tracing-opentelemetry` layer of the caller's own.
    pub fn provider(&self) -> &SdkTracerProvider {
        &self.provider
    }

    /// Sends everything queued now and waits for it; returns the counts after.
    pub fn flush(&self) -> Result<ExportStats, ExportError> {
        let result = self.provider.force_flush();
        let stats = self.stats();
        self.log_loss(stats);
        result.map_err(|e| ExportError::Flush(e.to_string()))?;
        Ok(stats)
    }

    fn log_loss(&self, stats: ExportStats) {
        if stats.spans_lost() > 0 && !self.counters.loss_logged.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                target: "toolsize",
                spans_ended = stats.spans_ended,
                spans_failed = stats.spans_failed,
                spans_dropped = stats.spans_dropped(),
                "Tool-call spans were lost on the way to the collector."
            );
        }
    }
}

impl Drop for ExportGuard {
    fn drop(&mut self) {
        let _ = self.provider.force_flush();
        let _ = self.provider.shutdown();
        self.log_loss(self.stats());
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// The two exporters behind one type.
#[derive(Debug)]
enum Exporter {
    Http(opentelemetry_otlp::SpanExporter),
    Grpc(opentelemetry_otlp::SpanExporter),
}

impl Exporter {
    fn inner(&self) -> &opentelemetry_otlp::SpanExporter {
        match self {
            Exporter::Http(e) | Exporter::Grpc(e) => e,
        }
    }

    fn inner_mut(&mut self) -> &mut opentelemetry_otlp::SpanExporter {
        match self {
            Exporter::Http(e) | Exporter::Grpc(e) => e,
        }
    }
}

/// Counts spans exported and spans in failed exports.
#[derive(Debug)]
struct CountingExporter {
    inner: Exporter,
    counters: Arc<Counters>,
}

impl SpanExporter for CountingExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len() as u64;
        let result = self.inner.inner().export(batch).await;
        match &result {
            Ok(()) => {
                self.counters.exported.fetch_add(n, Ordering::Relaxed);
            }
            Err(error) => {
                self.counters.failed.fetch_add(n, Ordering::Relaxed);
                if !self.counters.failure_logged.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        target: "toolsize",
                        spans = n,
                        error = %error,
                        "OTLP export failed; these spans are lost. Further failures are counted, not logged."
                    );
                }
            }
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.inner().shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.inner().force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.inner_mut().set_resource(resource);
    }
}

/// Counts spans as they end, before the batch processor may drop them.
#[derive(Debug)]
struct CountingProcessor {
    inner: BatchSpanProcessor,
    counters: Arc<Counters>,
}

impl SpanProcessor for CountingProcessor {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        self.counters.ended.fetch_add(1, Ordering::Relaxed);
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// Spans captured in memory, for the unit tests of the framework wrappers that write through
/// this module's OpenTelemetry layer.
#[cfg(all(test, any(feature = "rig", feature = "swiftide")))]
pub(crate) mod testing {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
    use tracing_subscriber::layer::SubscriberExt;

    /// Runs `f` with spans going to memory; returns the finished spans.
    pub(crate) fn captured(f: impl FnOnce()) -> Vec<SpanData> {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("t")));
        tracing::subscriber::with_default(subscriber, f);
        provider.force_flush().unwrap();
        exporter.get_finished_spans().unwrap()
    }

    /// The value of `key` on `span`, if set.
    pub(crate) fn attr(span: &SpanData, key: &str) -> Option<opentelemetry::Value> {
        span.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// swiftide's tool span is exported (the wrapper writes to it); another `tool` span is not.
    #[cfg(feature = "swiftide")]
    #[test]
    fn swiftide_tool_spans_pass_the_filter() {
        let _default = tracing::subscriber::set_default(tracing_subscriber::registry());
        let swiftide = tracing::info_span!(target: "swiftide_agents::agent", "tool");
        assert!(swiftide.metadata().is_some_and(framework_tool_span));
        let other = tracing::info_span!(target: "app", "tool");
        assert!(!other.metadata().is_some_and(framework_tool_span));
    }

    /// swiftide's DEBUG event "Completed tool call" (the tool's output and arguments, emitted
    /// inside its tool span, as swiftide-agents 0.32 emits it) and rmcp's "received request"
    /// (the request whole, as rmcp 3.11 logs it) never leave through the export pipeline, with or
    /// without `all_spans`; the log output shows them only where its filter lets the framework's
    /// DEBUG events through. rmcp's "received notification" (INFO, whole) is not exported
    /// either, and leaves the log output at `rmcp=warn`.
    #[cfg(feature = "swiftide")]
    #[test]
    fn frameworks_debug_content_is_not_exported_and_filtered_out_of_the_logs() {
        use opentelemetry_sdk::trace::InMemorySpanExporter;
        let emit = || {
            let span = tracing::info_span!(target: "swiftide_agents::agent", "tool");
            let _in = span.enter();
            tracing::debug!(
                target: "swiftide_agents::agent",
                output = "SECRET-OUTPUT",
                args = "SECRET-ARGS",
                "Completed tool call"
            );
            tracing::debug!(
                target: "rmcp::service",
                request = "SECRET-REQUEST",
                "received request"
            );
            // rmcp 3.11 logs a received notification whole at INFO.
            tracing::info!(
                target: "rmcp::service",
                notification = "SECRET-NOTIFICATION",
                "received notification"
            );
        };
        for all_spans in [false, true] {
            let exporter = InMemorySpanExporter::default();
            let provider = SdkTracerProvider::builder()
                .with_simple_exporter(exporter.clone())
                .build();
            let otel = otel_layer(provider.tracer("t"), all_spans);
            let subscriber = tracing_subscriber::registry().with(otel);
            tracing::subscriber::with_default(subscriber, emit);
            provider.force_flush().unwrap();
            let spans = exporter.get_finished_spans().unwrap();
            assert_eq!(spans.len(), 1, "swiftide's tool span is exported");
            let text = format!("{:?}", spans[0]);
            assert!(spans[0].events.is_empty(), "{text}");
            assert!(!text.contains("SECRET"), "{text}");
        }
        use crate::test_support::SharedBuffer as Buffer;
        let logged = |directives: &str| {
            let buffer = Buffer::default();
            let writer = buffer.clone();
            let logs = tracing_subscriber::fmt::layer()
                .with_writer(move || writer.clone())
                .with_filter(log_filter(Some(directives)));
            let subscriber = tracing_subscriber::registry().with(logs);
            tracing::subscriber::with_default(subscriber, emit);
            let text = buffer.text();
            (
                text.contains("SECRET-OUTPUT"),
                text.contains("SECRET-REQUEST"),
                text.contains("SECRET-NOTIFICATION"),
            )
        };
        assert_eq!(
            logged("debug"),
            (true, true, true),
            "RUST_LOG=debug shows all"
        );
        assert_eq!(
            logged("info"),
            (false, false, true),
            "the default level shows only rmcp's notification"
        );
        assert_eq!(logged("debug,swiftide_agents=info"), (false, true, true));
        assert_eq!(logged("debug,rmcp=info"), (true, false, true));
        assert_eq!(logged("info,rmcp=warn"), (false, false, false));
    }

    #[test]
    fn protocol_names() {
        assert_eq!("grpc".parse::<Protocol>().unwrap(), Protocol::Grpc);
        assert_eq!(
            " http/protobuf ".parse::<Protocol>().unwrap(),
            Protocol::HttpProtobuf
        );
        let err = "http/json".parse::<Protocol>().unwrap_err();
        assert!(err.to_string().contains("http/json"), "{err}");
        assert!(
            err.to_string()
                .contains("toolsize exports \"grpc\" or \"http/protobuf\""),
            "{err}"
        );
        // `.unwrap()` and `main() -> Result<_, Box<dyn Error>>` print the sentence too.
        assert_eq!(format!("{err:?}"), format!("UnsupportedProtocol: {err}"));
    }

    #[test]
    fn http_url_gets_the_traces_path_once() {
        assert_eq!(
            http_traces_url("http://127.0.0.1:4318"),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            http_traces_url("http://h:1/v1/traces/"),
            "http://h:1/v1/traces"
        );
    }

    #[test]
    fn stats_arithmetic() {
        let s = ExportStats {
            spans_ended: 10,
            spans_exported: 6,
            spans_failed: 3,
        };
        assert_eq!(s.spans_dropped(), 1);
        assert_eq!(s.spans_lost(), 4);
    }
}
