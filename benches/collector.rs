//! Collector hot path per span: decode + recognise + record, on a realistic 512-span request,
//! with the alert rules attached as the daemon runs them.
//!
//! The request mixes what a daemon sees from an agent fleet: 60 % toolsize-contract tool spans
//! (measured sizes), 20 % OTel GenAI tool spans carrying ~2 KiB of result content (size derived
//! from content, markers scanned, JSON checked), 20 % non-tool spans (LLM calls), over 40 tools.
//! Two mixes side by side: `storm` (half of the measured results over the 16 KiB ceiling, 4,099
//! argument hashes) and `quiet` (none over it); the ratio of the two is printed.
//!
//! Also `/metrics` rendering of 2,000 series with the current size buckets against the previous
//! 15-bucket layout, run side by side, with the ratio and the exposition sizes printed.
//!
//! And the coding agents' logs path against the spans path: 512 Claude Code `tool_result` log
//! records (12 string-typed attributes each) against 512 toolsize-contract tool spans of the
//! same sizes, read + recognised, then recorded (the log records through the join of agents'
//! signals, released as the aggregator does); per record, with the ratio printed.
//!
//! And the join at capacity (`join_at_capacity`): 65,536 calls waiting, each record looked up
//! among them, on the aggregator's path against the lent path, per record, with the ratio.
//!
//! And one coding agent's hook payload accepted, sized and joined with the agent's log record of
//! the same call, then counted (`hooks`): Claude Code's `PostToolUse` for `seq 1 20000` (its
//! `stdout` cut at 30,000 characters, `persistedOutputSize` 108,894) and Qwen Code's (the whole
//! 108,894-character `llmContent`), each with the one-record log request of its call.
//!
//! `cargo bench --features collector --bench collector`

use std::sync::Arc;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use toolsize::collector::alerts::rules::Rules;
use toolsize::collector::alerts::{AlertStats, EVENT_QUEUE_CAPACITY};
use toolsize::collector::ingest::decode::{
    decode_protobuf, recognize_logs_protobuf, recognize_protobuf,
};
use toolsize::collector::ingest::hooks::recognize_hook;
use toolsize::collector::ingest::recognize::Recognizer;
use toolsize::collector::read::exposition::{render, render_openmetrics, Frame};
use toolsize::collector::read::exposition_proto;
use toolsize::collector::state::{now_unix, now_unix_ms, size_bounds, Limits, State};
use toolsize::collector::Config;
use toolsize::collector::SelfStats;

#[path = "../examples/common/workload.rs"]
mod workload;

use workload::Mix;

/// A state with the default rules attached, their events drained by a thread as the alert
/// task would.
fn state_with_rules(config: &Config) -> State {
    let (tx, mut rx) = tokio::sync::mpsc::channel(EVENT_QUEUE_CAPACITY);
    std::thread::spawn(move || while rx.blocking_recv().is_some() {});
    let mut state = State::new(Limits::from_config(config));
    let rules = Rules::from_config(config)
        .expect("default rules")
        .with_sender(tx, Arc::new(AlertStats::default()));
    rules.attach_to(&mut state);
    state
}

fn bench(c: &mut Criterion) {
    let config = Config::default();
    let recognizer = Recognizer::new(&config.recognition, config.aggregation.max_tool_name_bytes);
    let mut g = c.benchmark_group("collector");
    g.throughput(Throughput::Elements(512));
    let storm = workload::request_mix("agent", 0, 512, Mix::Storm);
    // For comparison: decoding into owned prost structs (the daemon does not do this).
    g.bench_function("prost_decode_only", |b| {
        b.iter(|| decode_protobuf(&storm).unwrap())
    });
    g.bench_function("read_and_recognise", |b| {
        b.iter(|| recognize_protobuf(&recognizer, &storm).unwrap())
    });
    for (name, mix) in [("quiet", Mix::Quiet), ("storm", Mix::Storm)] {
        let bodies: Vec<Vec<u8>> = (0..16)
            .map(|s| workload::request_mix("agent", s, 512, mix))
            .collect();
        let recs: Vec<_> = bodies
            .iter()
            .map(|b| recognize_protobuf(&recognizer, b).unwrap().records)
            .collect();
        let mut state = state_with_rules(&config);
        let mut i = 0;
        g.bench_function(format!("record_with_rules_{name}"), |b| {
            b.iter(|| {
                i += 1;
                state.record_batch_ms(&recs[i % recs.len()], now_unix_ms())
            })
        });
        let mut state = state_with_rules(&config);
        g.bench_function(format!("decode_recognise_record_with_rules_{name}"), |b| {
            b.iter(|| {
                i += 1;
                let r = recognize_protobuf(&recognizer, &bodies[i % bodies.len()]).unwrap();
                state.record_batch_ms(&r.records, now_unix_ms());
            })
        });
    }
    g.finish();
    // Side by side, same process, interleaved (so the machine's other load hits both alike):
    // 10 rounds of 200 requests of each mix.
    let mut mixes: Vec<(Vec<Vec<u8>>, State)> = [Mix::Quiet, Mix::Storm]
        .into_iter()
        .map(|mix| {
            let bodies = (0..16)
                .map(|s| workload::request_mix("agent", s, 512, mix))
                .collect();
            (bodies, state_with_rules(&config))
        })
        .collect();
    let mut spent = [0.0f64; 2];
    for _round in 0..10 {
        for (m, (bodies, state)) in mixes.iter_mut().enumerate() {
            let t = Instant::now();
            for k in 0..200 {
                let r = recognize_protobuf(&recognizer, &bodies[k % bodies.len()]).unwrap();
                state.record_batch_ms(&r.records, now_unix_ms());
            }
            spent[m] += t.elapsed().as_secs_f64();
        }
    }
    let per_span: Vec<(&str, f64)> = ["quiet", "storm"]
        .into_iter()
        .zip(spent.map(|s| s / (2000.0 * 512.0)))
        .collect();
    let (quiet, storm) = (per_span[0].1, per_span[1].1);
    eprintln!(
        "decode + recognise + record with rules: quiet {:.3} µs/span, storm {:.3} µs/span: storm ×{:.2}",
        quiet * 1e6,
        storm * 1e6,
        storm / quiet
    );
}

/// The size bucket bounds before the quarter-octave grid (with the default 16 KiB ceiling).
const PREVIOUS_SIZE_BOUNDS: &[u64] = &[
    256, 1024, 4096, 8000, 10_000, 16_384, 20_000, 25_000, 32_768, 65_536, 131_072, 262_144,
    1_048_576, 4_194_304, 16_777_216,
];

fn exposition(c: &mut Criterion) {
    let config = Config::default();
    let recognizer = Recognizer::new(&config.recognition, config.aggregation.max_tool_name_bytes);
    let base = recognize_protobuf(
        &recognizer,
        &workload::request_mix("agent", 0, 512, Mix::Storm),
    )
    .unwrap()
    .records;
    let records: Vec<_> = (0..2000)
        .map(|i| {
            let mut r = base[i % base.len()].clone();
            r.tool = format!("tool_{i}").into();
            r
        })
        .collect();
    let now = now_unix();
    let stats = SelfStats::default();
    let alerts = AlertStats::default();
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
            b.iter(|| render(state, &stats, &alerts, now))
        });
    }
    g.bench_function("render_2000_series_protobuf", |b| {
        b.iter(|| exposition_proto::render(&states[0].1, &stats, &alerts, now))
    });
    g.finish();
    // Side by side, same process: time per render and bytes.
    let measure = |state: &State| {
        let t = Instant::now();
        let mut bytes = 0;
        for _ in 0..20 {
            bytes = render(state, &stats, &alerts, now).len();
        }
        (t.elapsed().as_secs_f64() / 20.0, bytes)
    };
    // What a scrape holds the aggregator for (the capture) against the whole render.
    let hold = |native: bool| {
        let t = Instant::now();
        for _ in 0..20 {
            std::hint::black_box(Frame::capture_with(&states[0].1, now, native));
        }
        t.elapsed().as_secs_f64() / 20.0
    };
    let (capture, capture_native) = (hold(false), hold(true));
    let (t_cur, b_cur) = measure(&states[0].1);
    // The protobuf exposition (classic buckets and native histograms) against the text, on the
    // same state: what a Prometheus with native histograms scrapes, against what others do.
    let t = Instant::now();
    let mut b_proto = 0;
    for _ in 0..20 {
        b_proto = exposition_proto::render(&states[0].1, &stats, &alerts, now).len();
    }
    let t_proto = t.elapsed().as_secs_f64() / 20.0;
    eprintln!(
        "exposition, 2000 series: the aggregator is held {:.1} ms for the capture, {:.0} % of the \
         {:.1} ms of capture + render (text); {:.1} ms, {:.0} % of {:.1} ms (protobuf)",
        capture * 1e3,
        100.0 * capture / t_cur,
        t_cur * 1e3,
        capture_native * 1e3,
        100.0 * capture_native / t_proto,
        t_proto * 1e3
    );
    eprintln!(
        "exposition, 2000 series: text {:.1} ms {:.1} MB ({:.1} µs, {:.0} bytes a series), \
         protobuf {:.1} ms {:.1} MB ({:.1} µs, {:.0} bytes a series): time ×{:.2}, bytes ×{:.2}",
        t_cur * 1e3,
        b_cur as f64 / 1e6,
        t_cur * 1e6 / 2000.0,
        b_cur as f64 / 2000.0,
        t_proto * 1e3,
        b_proto as f64 / 1e6,
        t_proto * 1e6 / 2000.0,
        b_proto as f64 / 2000.0,
        t_proto / t_cur,
        b_proto as f64 / b_cur as f64
    );
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

/// The logs path of the coding agents against the spans path, per record.
fn agents(c: &mut Criterion) {
    let config = Config::default();
    let recognizer = Recognizer::new(&config.recognition, config.aggregation.max_tool_name_bytes);
    let logs: Vec<Vec<u8>> = (0..16)
        .map(|s| workload::logs_request("claude-code", s, 512, Mix::Storm))
        .collect();
    // The spans baseline: every span a measured toolsize-contract tool span.
    let spans: Vec<Vec<u8>> = (0..16)
        .map(|s| workload::request_tools("agent", s * 10, 512, Mix::Storm, 40))
        .collect();
    let mut g = c.benchmark_group("agents");
    g.throughput(Throughput::Elements(512));
    let mut i = 0;
    g.bench_function("logs_read_and_recognise", |b| {
        b.iter(|| {
            i += 1;
            recognize_logs_protobuf(&recognizer, &logs[i % logs.len()]).unwrap()
        })
    });
    g.bench_function("spans_read_and_recognise", |b| {
        b.iter(|| {
            i += 1;
            recognize_protobuf(&recognizer, &spans[i % spans.len()]).unwrap()
        })
    });
    let mut state = state_with_rules(&config);
    g.bench_function("logs_decode_recognise_join_record", |b| {
        b.iter(|| {
            i += 1;
            let r = recognize_logs_protobuf(&recognizer, &logs[i % logs.len()]).unwrap();
            let now = now_unix_ms();
            state.record_owned_batch_ms(r.records, now);
            state.release_joined(u64::MAX);
        })
    });
    let mut state = state_with_rules(&config);
    g.bench_function("spans_decode_recognise_record", |b| {
        b.iter(|| {
            i += 1;
            let r = recognize_protobuf(&recognizer, &spans[i % spans.len()]).unwrap();
            state.record_batch_ms(&r.records, now_unix_ms());
        })
    });
    g.finish();
    // Side by side, interleaved, for the ratio.
    let per = |f: &mut dyn FnMut()| {
        let t = Instant::now();
        for _ in 0..200 {
            f();
        }
        t.elapsed().as_secs_f64() / (200.0 * 512.0) * 1e6
    };
    let (mut l, mut s) = (Vec::new(), Vec::new());
    let mut ls = state_with_rules(&config);
    let mut ss = state_with_rules(&config);
    for round in 0..5 {
        l.push(per(&mut || {
            let r = recognize_logs_protobuf(&recognizer, &logs[round % 16]).unwrap();
            ls.record_owned_batch_ms(r.records, now_unix_ms());
            ls.release_joined(u64::MAX);
        }));
        s.push(per(&mut || {
            let r = recognize_protobuf(&recognizer, &spans[round % 16]).unwrap();
            ss.record_batch_ms(&r.records, now_unix_ms());
        }));
    }
    l.sort_by(f64::total_cmp);
    s.sort_by(f64::total_cmp);
    println!(
        "agents: logs path {:.3} µs/record, spans path {:.3} µs/span (medians of 5 interleaved rounds): logs ÷ spans ×{:.2}",
        l[2],
        s[2],
        l[2] / s[2]
    );
}

/// The join of a coding agent's signals with the most calls waiting (65,536: 128 requests of
/// 512 Claude Code `tool_result` records, none released), then 16 requests of those calls again
/// for ever, as the load generator sends them: each record is looked up among the waiting
/// calls, found, and counted unjoined. The aggregator's path (`record_owned_batch_ms`: the
/// records moved, the joiner's entries read for the whole batch first) against the lent path
/// (`record_batch_ms`: each signal cloned into the joiner, its entries read when it is added),
/// per record, on the same state, rounds interleaved; the ratio is printed.
fn join_at_capacity(c: &mut Criterion) {
    let config = Config::default();
    let recognizer = Recognizer::new(&config.recognition, config.aggregation.max_tool_name_bytes);
    let records = |seed| {
        recognize_logs_protobuf(
            &recognizer,
            &workload::logs_request("claude-code", seed, 512, Mix::Storm),
        )
        .unwrap()
        .records
    };
    let mut state = state_with_rules(&config);
    for seed in 0..128 {
        state.record_owned_batch_ms(records(seed), now_unix_ms());
    }
    let again: Vec<_> = (0..16).map(records).collect();
    let mut g = c.benchmark_group("join_at_capacity");
    g.throughput(Throughput::Elements(512));
    let mut i = 0;
    g.bench_function("owned_warmed", |b| {
        b.iter_batched(
            || {
                i += 1;
                again[i % again.len()].clone()
            },
            |recs| state.record_owned_batch_ms(recs, now_unix_ms()),
            BatchSize::LargeInput,
        )
    });
    g.bench_function("lent_cloned", |b| {
        b.iter_batched(
            || {
                i += 1;
                again[i % again.len()].clone()
            },
            |recs| {
                state.record_batch_ms(&recs, now_unix_ms());
                drop(recs);
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
    let (mut owned, mut lent) = (Vec::new(), Vec::new());
    for _round in 0..9 {
        for (path, out) in [(true, &mut owned), (false, &mut lent)] {
            let batches: Vec<_> = (0..200).map(|k| again[k % again.len()].clone()).collect();
            let t = Instant::now();
            for recs in batches {
                if path {
                    state.record_owned_batch_ms(recs, now_unix_ms());
                } else {
                    state.record_batch_ms(&recs, now_unix_ms());
                    drop(recs);
                }
            }
            out.push(t.elapsed().as_secs_f64() / (200.0 * 512.0) * 1e6);
        }
    }
    owned.sort_by(f64::total_cmp);
    lent.sort_by(f64::total_cmp);
    println!(
        "join at capacity: owned and warmed {:.3} µs/record, lent and cloned {:.3} µs/record \
         (medians of 9 interleaved rounds): ×{:.2}",
        owned[4],
        lent[4],
        owned[4] / lent[4]
    );
}

/// One OTLP log request of one record of `service`, scope `scope`, string attributes.
fn one_log(service: &str, scope: &str, attrs: &[(&str, &str)]) -> Vec<u8> {
    use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{any_value::Value, InstrumentationScope};
    use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use prost::Message;
    let s = |v: &str| Value::StringValue(v.into());
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(Resource {
                attributes: vec![workload::kv("service.name", s(service))],
                ..Default::default()
            }),
            scope_logs: vec![ScopeLogs {
                scope: Some(InstrumentationScope {
                    name: scope.into(),
                    ..Default::default()
                }),
                log_records: vec![LogRecord {
                    time_unix_nano: 1_700_000_000_000_000_000,
                    attributes: attrs.iter().map(|(k, v)| workload::kv(k, s(v))).collect(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

/// One hook payload accepted, sized and joined with the log record of its call, then counted.
fn hooks(c: &mut Criterion) {
    let config = Config::default();
    let recognizer = Recognizer::new(&config.recognition, config.aggregation.max_tool_name_bytes);
    let seq: String = (1..=20_000).map(|n| format!("{n}\n")).collect();
    assert_eq!(seq.len(), 108_894);
    let claude = |n: u64| {
        let id = format!("toolu_{n:020}");
        let log = one_log(
            "claude-code",
            "com.anthropic.claude_code.events",
            &[
                ("event.name", "tool_result"),
                ("tool_name", "Bash"),
                ("tool_use_id", &id),
                ("success", "true"),
                ("duration_ms", "41"),
                ("tool_result_size_bytes", "2281"),
            ],
        );
        let hook = serde_json::json!({
            "session_id": "3f0c", "transcript_path": "/t", "cwd": "/p",
            "permission_mode": "default", "hook_event_name": "PostToolUse", "tool_name": "Bash",
            "tool_input": {"command": "seq 1 20000"},
            "tool_response": {"stdout": &seq[..30_000], "stderr": "", "interrupted": false,
                "isImage": false, "persistedOutputPath": "/t/r.txt", "persistedOutputSize": 108_894},
            "tool_use_id": id, "duration_ms": 41
        });
        (log, hook.to_string().into_bytes())
    };
    let qwen = |n: u64| {
        let id = format!("call_{n:020}");
        let log = one_log(
            "qwen-code",
            "qwen-code",
            &[
                ("event.name", "qwen-code.tool_call"),
                ("function_name", "grep_search"),
                ("call_id", &id),
                ("success", "true"),
                ("duration_ms", "12"),
                ("content_length", "25190"),
            ],
        );
        let hook = serde_json::json!({
            "session_id": "s", "hook_event_name": "PostToolUse", "permission_mode": "yolo",
            "tool_name": "grep_search", "tool_input": {"pattern": "x"},
            "tool_response": {"llmContent": seq, "returnDisplay": "Found 20000 matches"},
            "tool_use_id": "hook", "tool_call_id": id, "duration_ms": 12
        });
        (log, hook.to_string().into_bytes())
    };
    let mut g = c.benchmark_group("hooks");
    g.throughput(Throughput::Elements(1));
    for (name, agent, make) in [
        (
            "claude_code_post_tool_use",
            "claude-code",
            &claude as &dyn Fn(u64) -> _,
        ),
        ("qwen_code_post_tool_use", "qwen-code", &qwen),
    ] {
        let mut state = state_with_rules(&config);
        let mut n = 0;
        g.bench_function(format!("{name}_accept_size_join_record"), |b| {
            b.iter_batched(
                || {
                    n += 1;
                    make(n)
                },
                |(log, hook)| {
                    let l = recognize_logs_protobuf(&recognizer, &log).unwrap();
                    let h = recognize_hook(&recognizer, agent, None, &hook).unwrap();
                    assert_eq!(h.records.len(), 1);
                    let now = now_unix_ms();
                    state.record_batch_ms(&l.records, now);
                    state.record_batch_ms(&h.records, now);
                    state.release_joined(u64::MAX);
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

/// The cost of exemplars: 34,000 spans of the storm mix over 2,000 tool names (1,600 series of
/// about 17 results each, sizes spread over 0 to 32 KiB), so every series carries as many
/// exemplars as its largest results fill buckets (up to `aggregation.largest_results`, 10). The
/// 0.0.4 text (no exemplars) against OpenMetrics (with them) and the protobuf exposition, on the
/// same state.
fn exemplars(c: &mut Criterion) {
    let config = Config::default();
    let recognizer = Recognizer::new(&config.recognition, config.aggregation.max_tool_name_bytes);
    let now = now_unix();
    let mut state = State::new(Limits::from_config(&config));
    for seed in 0..10 {
        let body = workload::request_tools("agent", seed, 3_400, Mix::Storm, 2_000);
        let records = recognize_protobuf(&recognizer, &body).unwrap().records;
        state.record_batch(&records, now);
    }
    let stats = SelfStats::default();
    let alerts = AlertStats::default();
    let frame = Frame::capture_with(&state, now, false);
    let exemplars = frame.exemplars_len();
    let mut g = c.benchmark_group("exemplars");
    g.bench_function("render_2000_series_text", |b| {
        b.iter(|| render(&state, &stats, &alerts, now))
    });
    g.bench_function("render_2000_series_openmetrics", |b| {
        b.iter(|| render_openmetrics(&state, &stats, &alerts, now))
    });
    g.bench_function("render_2000_series_protobuf", |b| {
        b.iter(|| exposition_proto::render(&state, &stats, &alerts, now))
    });
    g.finish();
    let time = |f: &dyn Fn() -> usize| {
        let t = Instant::now();
        let mut bytes = 0;
        for _ in 0..20 {
            bytes = f();
        }
        (t.elapsed().as_secs_f64() / 20.0 * 1e3, bytes as f64 / 1e6)
    };
    let (t_text, b_text) = time(&|| render(&state, &stats, &alerts, now).len());
    let (t_om, b_om) = time(&|| render_openmetrics(&state, &stats, &alerts, now).len());
    let (t_pb, b_pb) = time(&|| exposition_proto::render(&state, &stats, &alerts, now).len());
    eprintln!(
        "exemplars, {} series, {exemplars} exemplars ({:.1} a series): text {t_text:.1} ms \
         {b_text:.1} MB, OpenMetrics {t_om:.1} ms {b_om:.1} MB (time ×{:.2}, bytes ×{:.2}), \
         protobuf {t_pb:.1} ms {b_pb:.1} MB",
        frame.series_len(),
        exemplars as f64 / frame.series_len() as f64,
        t_om / t_text,
        b_om / b_text,
    );
}

criterion_group!(
    benches,
    bench,
    exposition,
    exemplars,
    agents,
    join_at_capacity,
    hooks
);
criterion_main!(benches);
