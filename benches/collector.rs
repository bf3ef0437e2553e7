//! Collector hot path per span: decode + recognise + record, on a realistic 512-span request.
//!
//! The request mixes what a daemon sees from an agent fleet: 60 % toolsize-contract tool spans
//! (measured sizes), 20 % OTel GenAI tool spans carrying ~2 KiB of result content (size derived
//! from content, markers scanned, JSON checked), 20 % non-tool spans (LLM calls), over 40 tools.
//!
//! `cargo bench --bench collector`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use toolsize::collector::aggregator::{now_unix, Limits, State};
use toolsize::collector::receiver::decode::{decode_protobuf, recognize_protobuf};
use toolsize::collector::recognize::Recognizer;
use toolsize::collector::Config;

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

criterion_group!(benches, bench);
criterion_main!(benches);
