//! Collector hot path per span: decode + recognise + record, on a realistic 512-span request.
//!
//! The request mixes what a daemon sees from an agent fleet: 60 % toolsize-contract tool spans
//! (measured sizes), 20 % OTel GenAI tool spans carrying ~2 KiB of result content (size derived
//! from content, markers scanned, JSON checked), 20 % non-tool spans (LLM calls), over 40 tools.
//!
//! `cargo bench --bench collector`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    any_value::Value, AnyValue, InstrumentationScope, KeyValue,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;
use toolsize::collector::aggregator::{now_unix, Limits, State};
use toolsize::collector::receiver::decode::{decode_protobuf, recognize_protobuf};
use toolsize::collector::recognize::Recognizer;
use toolsize::collector::Config;

fn kv(k: &str, v: Value) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue { value: Some(v) }),
        ..Default::default()
    }
}

/// A realistic 512-span request, protobuf-encoded.
pub fn request_512() -> Vec<u8> {
    let content: String = (0..2048).map(|i| (b'a' + (i % 26) as u8) as char).collect();
    let spans = (0..512u64)
        .map(|n| {
            let tool = format!("tool_{}", n % 40);
            let mut attrs = vec![
                kv(
                    "gen_ai.operation.name",
                    Value::StringValue("execute_tool".into()),
                ),
                kv("gen_ai.tool.name", Value::StringValue(tool.clone())),
                kv(
                    "gen_ai.tool.call.id",
                    Value::StringValue(format!("call_{n:08}")),
                ),
            ];
            let name = match n % 10 {
                0..=5 => {
                    attrs.extend([
                        kv("tool.name", Value::StringValue(tool.clone())),
                        kv(
                            "tool.args_hash",
                            Value::StringValue(format!("{:012x}", n % 97)),
                        ),
                        kv(
                            "tool.result.bytes",
                            Value::IntValue(((n * 7919) % 100_000) as i64),
                        ),
                        kv("tool.result.truncated", Value::BoolValue(false)),
                        kv("tool.latency_ms", Value::DoubleValue(12.5)),
                        kv(
                            "tool.result.chars",
                            Value::IntValue(((n * 7919) % 100_000) as i64),
                        ),
                    ]);
                    format!("execute_tool {tool}")
                }
                6 | 7 => {
                    attrs.push(kv(
                        "gen_ai.tool.call.result",
                        Value::StringValue(content.clone()),
                    ));
                    format!("execute_tool {tool}")
                }
                _ => {
                    attrs = vec![
                        kv("gen_ai.operation.name", Value::StringValue("chat".into())),
                        kv("gen_ai.request.model", Value::StringValue("gpt-4o".into())),
                        kv("gen_ai.usage.input_tokens", Value::IntValue(1234)),
                        kv("gen_ai.usage.output_tokens", Value::IntValue(321)),
                    ];
                    "chat gpt-4o".into()
                }
            };
            Span {
                trace_id: [(n as u8).wrapping_add(1); 16].to_vec(),
                span_id: (n + 1).to_be_bytes().to_vec(),
                name,
                kind: 1,
                start_time_unix_nano: 1_700_000_000_000_000_000 + n * 1000,
                end_time_unix_nano: 1_700_000_000_000_000_000 + n * 1000 + 12_500_000,
                attributes: attrs,
                ..Default::default()
            }
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![kv("service.name", Value::StringValue("agent".into()))],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "toolsize".into(),
                    ..Default::default()
                }),
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

fn bench(c: &mut Criterion) {
    let body = request_512();
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
