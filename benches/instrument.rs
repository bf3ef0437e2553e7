//! The cost of one instrumented tool call against a bare tracing-opentelemetry span.
//!
//! Both go through the same pipeline (tracing → tracing-opentelemetry → SDK span → a processor
//! that drops the finished span), and the bare span declares the same fields as toolsize's span
//! (checked at start: the bench stops if the counts differ) and records the same values,
//! precomputed, so the ratio is what toolsize adds: hashing the arguments, measuring the 4 KiB
//! result in every unit, the latency and the bookkeeping.
//!
//! `cargo bench --features export --bench instrument` prints criterion's figures, then one line per case with its
//! ratio to the bare span, read back from criterion's estimates of this same run.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use criterion::Criterion;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::Context;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, Span, SpanData, SpanProcessor};
use serde::Serialize;
use tracing::field::Empty;
use tracing_subscriber::layer::SubscriberExt;

use toolsize::{measure, tool_call, Measures};

/// Drops every finished span: the export cost is the same for both sides and not measured.
#[derive(Debug)]
struct Discard;

impl SpanProcessor for Discard {
    fn on_start(&self, _: &mut Span, _: &Context) {}
    fn on_end(&self, span: SpanData) {
        black_box(span);
    }
    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }
    fn shutdown_with_timeout(&self, _: Duration) -> OTelSdkResult {
        Ok(())
    }
}

#[derive(Serialize, Clone)]
struct Hit {
    url: String,
    title: String,
    snippet: String,
    score: f64,
}

#[derive(Serialize)]
struct SearchArgs {
    query: &'static str,
    limit: u32,
    filters: Vec<&'static str>,
}

/// A realistic search page, serialized to about 4 KiB.
fn page() -> Vec<Hit> {
    let mut hits = Vec::new();
    let mut i = 0;
    loop {
        hits.push(Hit {
            url: format!("https://docs.example.com/guide/section-{i}"),
            title: format!("Section {i}: résumé of the configuration — naïve defaults"),
            snippet: "Tool results pass through several layers; each may cut by bytes, \
                      characters or tokens. 日本語も含む。 "
                .repeat(2),
            score: 1.0 / (i as f64 + 1.5),
        });
        if serde_json::to_vec(&hits).unwrap().len() >= 4096 {
            hits.pop();
            return hits;
        }
        i += 1;
    }
}

/// The bare span, declared with the fields of toolsize's span.
fn bare() -> tracing::Span {
    tracing::info_span!(
        target: "toolsize",
        "execute_tool",
        otel.name = "execute_tool search",
        otel.kind = "internal",
        otel.status_description = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = "search",
        tool.name = "search",
        gen_ai.tool.call.id = "call_1",
        tool.args_hash = "0123456789ab",
        tool.result.bytes = Empty,
        tool.result.truncated = Empty,
        tool.result.original_bytes = Empty,
        tool.result.chars = Empty,
        tool.result.utf16_units = Empty,
        tool.result.lines = Empty,
        tool.result.json_depth = Empty,
        tool.result.max_string_chars = Empty,
        tool.result.tokens_estimate = Empty,
        tool.latency_ms = Empty,
        tool.error = Empty,
        error.type = Empty,
        tool.cancelled = Empty,
        mcp.method.name = Empty,
        mcp.session.id = Empty,
        mcp.protocol.version = Empty,
        jsonrpc.request.id = Empty,
        rpc.response.status_code = Empty,
        network.transport = Empty,
        tool.result.limit_bytes = Empty,
        tool.result.limit_source = Empty,
    )
}

fn bare_span(result: &str) {
    let span = bare();
    let _ = span.in_scope(|| black_box(result));
    span.record("tool.result.bytes", 4000_i64);
    span.record("tool.result.truncated", false);
    span.record("tool.result.chars", 3900_i64);
    span.record("tool.result.utf16_units", 3900_i64);
    span.record("tool.result.lines", 1_i64);
    span.record("tool.result.json_depth", 2_i64);
    span.record("tool.result.max_string_chars", 200_i64);
    span.record("tool.result.tokens_estimate", 1000_i64);
    span.record("tool.latency_ms", 0.001_f64);
}

const GROUP: &str = "tool_call_4KiB";
const BASELINE: &str = "bare_tracing_otel_span";

fn benches(c: &mut Criterion) {
    let provider = SdkTracerProvider::builder()
        .with_span_processor(Discard)
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("bench")));
    let _default = tracing::subscriber::set_default(subscriber);

    // The comparison holds only while both spans declare the same fields.
    let fields = |span: &tracing::Span| span.metadata().map(|m| m.fields().len());
    let ours = fields(tool_call("search").start().span());
    assert_eq!(
        fields(&bare()),
        ours,
        "the bare span must declare as many fields as toolsize's"
    );
    eprintln!("both spans declare {} fields", ours.unwrap_or(0));

    let hits = page();
    let text = serde_json::to_string(&hits).unwrap();
    let args = SearchArgs {
        query: "configuration defaults",
        limit: 10,
        filters: vec!["lang:en", "since:2025"],
    };
    eprintln!("result: {} bytes of JSON, {} hits", text.len(), hits.len());

    let mut g = c.benchmark_group(GROUP);
    g.bench_function(BASELINE, |b| b.iter(|| bare_span(black_box(&text))));
    g.bench_function("instrumented_text", |b| {
        b.iter(|| {
            tool_call("search")
                .call_id("call_1")
                .args(&args)
                .run_text(|| Ok::<_, std::io::Error>(black_box(text.as_str())))
        })
    });
    g.bench_function("instrumented_serialize", |b| {
        b.iter(|| {
            tool_call("search")
                .call_id("call_1")
                .args(&args)
                .run(|| Ok::<_, std::io::Error>(black_box(&hits)))
        })
    });
    g.finish();

    let mut g = c.benchmark_group("parts");
    g.bench_function("measure_4KiB_all", |b| {
        b.iter(|| measure(black_box(text.as_bytes()), Measures::ALL))
    });
    g.bench_function("measure_4KiB_counts_only", |b| {
        let m = Measures {
            chars: true,
            utf16_units: true,
            lines: true,
            ..Measures::BYTES_ONLY
        };
        b.iter(|| measure(black_box(text.as_bytes()), m))
    });
    g.bench_function("measure_4KiB_scan_only", |b| {
        let m = Measures {
            json_depth: true,
            ..Measures::BYTES_ONLY
        };
        b.iter(|| measure(black_box(text.as_bytes()), m))
    });
    g.bench_function("measure_4KiB_bytes_only", |b| {
        b.iter(|| measure(black_box(text.as_bytes()), Measures::BYTES_ONLY))
    });
    g.bench_function("args_hash", |b| {
        b.iter(|| toolsize::args_hash(black_box(&args)))
    });
    g.bench_function("serde_json_to_vec_4KiB", |b| {
        b.iter(|| serde_json::to_vec(black_box(&hits)))
    });
    g.finish();
}

fn out_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("criterion")
}

/// Criterion's mean estimate (ns) of `group/name` from this run.
fn mean_ns(group: &str, name: &str) -> Option<f64> {
    let path = out_dir().join(group).join(name).join("new/estimates.json");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    v["mean"]["point_estimate"].as_f64()
}

fn main() {
    let mut c = Criterion::default()
        .output_directory(&out_dir())
        .configure_from_args();
    benches(&mut c);
    c.final_summary();
    if let Some(base) = mean_ns(GROUP, BASELINE) {
        println!("\nratios against {BASELINE} ({base:.0} ns), target at most 1.15x:");
        for name in ["instrumented_text", "instrumented_serialize"] {
            if let Some(ns) = mean_ns(GROUP, name) {
                println!("  {name:<24} {ns:>8.0} ns  {:.3}x", ns / base);
            }
        }
    }
}
