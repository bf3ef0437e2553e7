//! The cost of one instrumented tool call against a bare tracing-opentelemetry span.
//!
//! Both go through the same pipeline (tracing → tracing-opentelemetry → SDK span → a processor
//! that drops the finished span), and the bare span declares the same fields as toolsize's span
//! (checked at start: the bench stops if the counts differ) and records the values an
//! instrumented call records with the default measures (bytes, truncated, tokens estimate,
//! latency), precomputed, one `record` each as hand-written code does, so the ratio is what
//! toolsize adds: hashing the arguments, measuring the 4 KiB result, the latency and the
//! bookkeeping. A second bare span records the same values in one `record_all!`, as toolsize
//! does, for the ratio against the cheapest hand-written span.
//!
//! `instrumented_text_no_args` is the same call without `.args(…)`: the arguments' hash is the
//! largest part of what toolsize adds, and a call that has no arguments to hash skips it.
//!
//! Group `measure_unit` is the cost of each measure alone (`measure` with that one enabled) on a
//! 4 KiB JSON result and on 64 KiB of text; `instrumented_text_all_measures` is an instrumented
//! call with every measure asked for.
//!
//! `cargo bench --features export --bench instrument` prints criterion's figures, then one line
//! per case with its ratio to the bare span, read back from criterion's estimates of this same
//! run.

#[path = "common/mod.rs"]
mod common;

use std::hint::black_box;
use std::path::PathBuf;

use criterion::Criterion;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use serde::Serialize;
use tracing::field::Empty;
use tracing_subscriber::layer::SubscriberExt;

use toolsize::{measure, tool_call, Measures};

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

/// The bare span, declared with the fields of toolsize's span, in the same order.
fn bare() -> tracing::Span {
    tracing::info_span!(
        target: "toolsize",
        "execute_tool",
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
        otel.name = "execute_tool search",
        otel.kind = "internal",
        otel.status_description = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = "search",
        tool.name = "search",
        gen_ai.tool.call.id = "call_1",
        tool.args_hash = "0123456789ab",
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
    span.record("tool.result.tokens_estimate", 1000_i64);
    span.record("tool.latency_ms", 0.001_f64);
}

fn bare_span_record_all(result: &str) {
    let span = bare();
    let _ = span.in_scope(|| black_box(result));
    tracing::record_all!(
        span,
        tool.result.bytes = 4000_i64,
        tool.result.truncated = false,
        tool.result.tokens_estimate = 1000_i64,
        tool.latency_ms = 0.001_f64,
    );
}

const GROUP: &str = "tool_call_4KiB";
const BASELINE: &str = "bare_tracing_otel_span";
const BASELINE_RECORD_ALL: &str = "bare_tracing_otel_span_record_all";

/// About 64 KiB of text as a fetch or a log tool returns it: lines of mostly ASCII with some
/// accented, CJK and astral characters.
fn text_64k() -> String {
    let line =
        "2025-06-01T12:00:00Z INFO fetch: résumé of page 12 — naïve cache hit; 日本語 😀 ok\n";
    line.repeat(64 * 1024 / line.len())
}

/// Each measure alone, by name.
fn singles() -> [(&'static str, Measures); 7] {
    let one = |f: fn(&mut Measures)| {
        let mut m = Measures::BYTES_ONLY;
        f(&mut m);
        m
    };
    [
        ("bytes", Measures::BYTES_ONLY),
        ("tokens_estimate", one(|m| m.tokens_estimate = true)),
        ("chars", one(|m| m.chars = true)),
        ("utf16_units", one(|m| m.utf16_units = true)),
        ("lines", one(|m| m.lines = true)),
        ("json_depth", one(|m| m.json_depth = true)),
        ("max_string_chars", one(|m| m.max_string_chars = true)),
    ]
}

fn benches(c: &mut Criterion) {
    let provider = SdkTracerProvider::builder()
        .with_span_processor(common::Discard)
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
    g.bench_function(BASELINE_RECORD_ALL, |b| {
        b.iter(|| bare_span_record_all(black_box(&text)))
    });
    g.bench_function("instrumented_text", |b| {
        b.iter(|| {
            tool_call("search")
                .call_id("call_1")
                .args(&args)
                .run_text(|| Ok::<_, std::io::Error>(black_box(text.as_str())))
        })
    });
    g.bench_function("instrumented_text_no_args", |b| {
        b.iter(|| {
            tool_call("search")
                .call_id("call_1")
                .run_text(|| Ok::<_, std::io::Error>(black_box(text.as_str())))
        })
    });
    g.bench_function("instrumented_text_all_measures", |b| {
        b.iter(|| {
            tool_call("search")
                .call_id("call_1")
                .args(&args)
                .measures(Measures::ALL)
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

    let long = text_64k();
    eprintln!("text: {} bytes", long.len());
    let mut g = c.benchmark_group("measure_unit");
    for (input, bytes) in [
        ("4KiB_json", text.as_bytes()),
        ("64KiB_text", long.as_bytes()),
    ] {
        for (name, m) in singles() {
            g.bench_function(format!("{input}/{name}"), |b| {
                b.iter(|| measure(black_box(bytes), m))
            });
        }
        g.bench_function(format!("{input}/all"), |b| {
            b.iter(|| measure(black_box(bytes), Measures::ALL))
        });
    }
    g.finish();

    let mut g = c.benchmark_group("parts");
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
        println!("\nratios against {BASELINE} ({base:.0} ns), target for run_text at most 1.3x:");
        for name in [
            BASELINE_RECORD_ALL,
            "instrumented_text",
            "instrumented_text_no_args",
            "instrumented_text_all_measures",
            "instrumented_serialize",
        ] {
            if let Some(ns) = mean_ns(GROUP, name) {
                println!("  {name:<34} {ns:>8.0} ns  {:.3}x", ns / base);
            }
        }
        if let (Some(all), Some(text)) = (
            mean_ns(GROUP, BASELINE_RECORD_ALL),
            mean_ns(GROUP, "instrumented_text"),
        ) {
            println!(
                "  instrumented_text against {BASELINE_RECORD_ALL}: {:.3}x",
                text / all
            );
        }
    }
}
