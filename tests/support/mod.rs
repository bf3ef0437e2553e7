//! Shared test support: capture tool-call spans with an in-memory OpenTelemetry exporter.
#![allow(dead_code, unreachable_pub)]

pub mod sink;

/// Running the `toolsize` binary and reading its structured errors.
pub mod cli;

/// The Grafana dashboard: its panels, queries and template variables.
pub mod dashboard;

/// Loopback ports for peers told their port before they bind.
pub mod ports;

/// Collector helpers: OTLP request builders, daemons on ephemeral ports, peers.
#[cfg(feature = "collector")]
pub mod collector;

/// Dashboard queries with their variables filled in.
pub mod queries;

/// A fake OpenAI endpoint scripting five tool calls, for the Rust agent frameworks' tests.
#[cfg(feature = "collector")]
pub mod openai;

/// Load against a running daemon, acknowledgements counted, CPU hogs beside it.
#[cfg(feature = "collector")]
pub mod load;

/// A real Prometheus scraping daemons, and its query API.
#[cfg(feature = "collector")]
pub mod prometheus;

pub use cli::Scratch;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing::Dispatch;
use tracing_subscriber::layer::SubscriberExt;

/// A tracing dispatcher whose spans go through tracing-opentelemetry into memory.
pub struct Capture {
    exporter: InMemorySpanExporter,
    provider: SdkTracerProvider,
    dispatch: Dispatch,
}

/// A dispatcher sending spans through tracing-opentelemetry to `provider`.
pub fn dispatch_to(provider: &SdkTracerProvider) -> Dispatch {
    let tracer = provider.tracer("toolsize-tests");
    Dispatch::new(
        tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(tracer)),
    )
}

/// Runs `work` on a current-thread runtime with toolsize's exporter sending its spans over gRPC
/// to `grpc` as `service`, then flushes the exporter and asserts no span was lost; returns what
/// `work` returned.
#[cfg(feature = "export")]
pub fn exported<T>(
    grpc: std::net::SocketAddr,
    service: &str,
    work: impl std::future::Future<Output = T>,
) -> T {
    let guard = toolsize::export::builder()
        .protocol(toolsize::export::Protocol::Grpc)
        .endpoint(format!("http://{grpc}"))
        .service_name(service)
        .build()
        .unwrap();
    let dispatch = dispatch_to(guard.provider());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let out = tracing::dispatcher::with_default(&dispatch, || rt.block_on(work));
    drop(rt);
    let stats = guard.flush().unwrap();
    assert_eq!(stats.spans_lost(), 0, "{service}: spans lost");
    out
}

impl Capture {
    pub fn new() -> Self {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let dispatch = dispatch_to(&provider);
        Capture {
            exporter,
            provider,
            dispatch,
        }
    }

    /// Runs `f` with this capture as the thread's subscriber.
    pub fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        tracing::dispatcher::with_default(&self.dispatch, f)
    }

    /// Runs a future to completion on a current-thread runtime under this capture.
    pub fn block_on<F: std::future::Future>(&self, fut: F) -> F::Output {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        self.run(|| rt.block_on(fut))
    }

    /// Every span finished so far.
    pub fn spans(&self) -> Vec<SpanData> {
        self.provider.force_flush().unwrap();
        self.exporter.get_finished_spans().unwrap()
    }

    /// The one span finished so far.
    pub fn one_span(&self) -> SpanData {
        let mut spans = self.spans();
        assert_eq!(spans.len(), 1, "expected exactly one span, got {spans:#?}");
        spans.remove(0)
    }
}

pub fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a Value> {
    attrs
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

pub fn int(span: &SpanData, key: &str) -> Option<i64> {
    match attr(&span.attributes, key)? {
        Value::I64(v) => Some(*v),
        other => panic!("{key} is not an int: {other:?}"),
    }
}

pub fn string(span: &SpanData, key: &str) -> Option<String> {
    match attr(&span.attributes, key)? {
        Value::String(v) => Some(v.as_str().to_owned()),
        other => panic!("{key} is not a string: {other:?}"),
    }
}

pub fn boolean(span: &SpanData, key: &str) -> Option<bool> {
    match attr(&span.attributes, key)? {
        Value::Bool(v) => Some(*v),
        other => panic!("{key} is not a bool: {other:?}"),
    }
}

pub fn float(span: &SpanData, key: &str) -> Option<f64> {
    match attr(&span.attributes, key)? {
        Value::F64(v) => Some(*v),
        other => panic!("{key} is not a float: {other:?}"),
    }
}

/// A test CA and a server certificate signed by it.
pub mod tls;
