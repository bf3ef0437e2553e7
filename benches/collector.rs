//! Collector hot path per span: decode + recognise + record, on a realistic 512-span request.
//!
//! The request mixes what a daemon sees from an agent fleet: 60 % toolsize-contract tool spans
//! (measured sizes), 20 % OTel GenAI tool spans carrying ~2 KiB of result content (size derived
//! from content, markers scanned, JSON checked), 20 % non-tool spans (LLM calls), over 40 tools.
//!
//! Also `/metrics` rendering of 2,000 series with the current size buckets against the previous
//! 15-bucket layout, run side by side, with the ratio and the exposition sizes printed.
//!
//! `cargo bench --features collector --bench collector`

use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use toolsize::collector::aggregator::{now_unix, size_bounds, Limits, State};
use toolsize::collector::exposition::render;
use toolsize::collector::receiver::decode::{decode_protobuf, recognize_protobuf};
use toolsize::collector::recognize::Recognizer;
use toolsize::collector::Config;
use toolsize::collector::SelfStats;

#[path = "../examples/common/workload.rs"]
mod workload;

fn bench(c: &mut Criterion) {
    let body = workload::request("agent", 0, 512);
    let config = Config::default();
    let recognizer = Recognizer::new(&config.recognition, config.aggregation.max_tool_name_bytes);
    let mut state = State::new(Limits::from_config(&config));
    let now = now_unix();
    let mut g = c.benchmark_group("collector");
    g.throughput(Throughput::Elements(512));
    // For comparison: decoding into owned prost structs (the daemon does not do this).
    g.bench_function("prost_decode_only", |b| {
        b.iter(|| decode_protobuf(&body).unwrap())
    });
    g.bench_function("read_and_recognise", |b| {
        b.iter(|| recognize_protobuf(&recognizer, &body).unwrap())
    });
    let recs = recognize_protobuf(&recognizer, &body).unwrap().records;
    g.bench_function("record", |b| b.iter(|| state.record_batch(&recs, now)));
    g.bench_function("decode_recognise_record_512_spans", |b| {
        b.iter(|| {
            let r = recognize_protobuf(&recognizer, &body).unwrap();
            state.record_batch(&r.records, now);
        })
    });
    g.finish();
}

/// The size bucket bounds before the quarter-octave grid (with the default 16 KiB ceiling).
const PREVIOUS_SIZE_BOUNDS: &[u64] = &[
    256, 1024, 4096, 8000, 10_000, 16_384, 20_000, 25_000, 32_768, 65_536, 131_072, 262_144,
    1_048_576, 4_194_304, 16_777_216,
];

fn exposition(c: &mut Criterion) {
    let config = Config::default();
    let recognizer = Recognizer::new(&config.recognition, config.aggregation.max_tool_name_bytes);
    let base = recognize_protobuf(&recognizer, &workload::request("agent", 0, 512))
        .unwrap()
        .records;
    let records: Vec<_> = (0..2000)
        .map(|i| {
            let mut r = base[i % base.len()].clone();
            r.tool = format!("tool_{i}");
            r
        })
        .collect();
    let now = now_unix();
    let stats = SelfStats::default();
    let layouts = [
        ("current", size_bounds(&config.stack)),
        ("previous", PREVIOUS_SIZE_BOUNDS.to_vec()),
    ];
    let states: Vec<(&str, State)> = layouts
        .into_iter()
        .map(|(name, bounds)| {
            let mut limits = Limits::from_config(&config);
            limits.size_bounds = bounds.into();
            let mut state = State::new(limits);
            state.record_batch(&records, now);
            (name, state)
        })
        .collect();
    let mut g = c.benchmark_group("exposition");
    for (name, state) in &states {
        g.bench_function(format!("render_2000_series_{name}_buckets"), |b| {
            b.iter(|| render(state, &stats, now))
        });
    }
    g.finish();
    // Side by side, same process: time per render and bytes.
    let measure = |state: &State| {
        let t = Instant::now();
        let mut bytes = 0;
        for _ in 0..20 {
            bytes = render(state, &stats, now).len();
        }
        (t.elapsed().as_secs_f64() / 20.0, bytes)
    };
    let (t_cur, b_cur) = measure(&states[0].1);
    let (t_prev, b_prev) = measure(&states[1].1);
    eprintln!(
        "exposition, 2000 series: current buckets {:.1} ms {:.1} MB, previous {:.1} ms {:.1} MB: \
         time ×{:.2}, bytes ×{:.2}",
        t_cur * 1e3,
        b_cur as f64 / 1e6,
        t_prev * 1e3,
        b_prev as f64 / 1e6,
        t_cur / t_prev,
        b_cur as f64 / b_prev as f64
    );
}

criterion_group!(benches, bench, exposition);
criterion_main!(benches);
