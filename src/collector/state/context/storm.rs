//! The ledger on requests of the load generator's storm mix, read as the daemon reads them:
//! results read from their records cost what whole events cost, and the ledger's own cost per
//! span (an ignored measurement).

use std::time::Instant;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;

use super::{Ledger, LedgerLimits};
use crate::collector::ingest::context::result_tokens;
use crate::collector::ingest::decode::recognize_protobuf;
use crate::collector::ingest::recognize::Recognizer;

fn kv(k: &str, v: Value) -> KeyValue {
    KeyValue {
        key: k.into(),
        key_strindex: 0,
        value: Some(AnyValue { value: Some(v) }),
    }
}

/// A request of the load generator's storm mix, as the ledger sees it: 512 spans over 256
/// traces and 40 tools, eight in ten tool spans with a size, two in ten model spans.
fn storm_request(seed: u64) -> Vec<u8> {
    let spans = (0..512u64)
        .map(|i| {
            let n = seed * 100_000 + i;
            let tool = format!("tool_{}", (seed * 512 + i) % 40);
            let (name, attributes) = if n % 10 < 8 {
                let attrs = vec![
                    kv(
                        "gen_ai.operation.name",
                        Value::StringValue("execute_tool".into()),
                    ),
                    kv("gen_ai.tool.name", Value::StringValue(tool.clone())),
                    kv(
                        "tool.result.bytes",
                        Value::IntValue(((n * 7919) % 8192) as i64),
                    ),
                ];
                (format!("execute_tool {tool}"), attrs)
            } else {
                let attrs = vec![
                    kv("gen_ai.operation.name", Value::StringValue("chat".into())),
                    kv("gen_ai.usage.input_tokens", Value::IntValue(1234)),
                ];
                ("chat gpt-4o".into(), attrs)
            };
            Span {
                trace_id: [(n as u8).wrapping_add(1); 16].to_vec(),
                span_id: (n + 1).to_be_bytes().to_vec(),
                name,
                start_time_unix_nano: 1_700_000_000_000_000_000,
                end_time_unix_nano: 1_700_000_000_012_500_000,
                attributes,
                ..Span::default()
            }
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![kv("service.name", Value::StringValue("loadgen".into()))],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

/// A tool span's result read from its record (as the daemon hands it over) costs what the
/// same result kept whole costs: same tools, sums, shares and sessions.
#[test]
fn results_read_from_their_records_cost_what_whole_events_cost() {
    use crate::collector::ingest::context::{ContextEvent, ContextKind, Entry, SessionId};
    let r = Recognizer::new(&Default::default(), 128).with_context_ledger(true);
    let (mut by_record, mut whole) = (
        Ledger::new(LedgerLimits::default()),
        Ledger::new(LedgerLimits::default()),
    );
    let mut from_records = 0;
    for seed in 0..3 {
        let read = recognize_protobuf(&r, &storm_request(seed)).unwrap();
        // Independently of the indexes: the results read from records are the request's
        // tool spans, in order, each with its own span id, tool and tokens.
        let expected: Vec<(u64, String, u64)> = (0..512u64)
            .map(|i| (seed * 100_000 + i, i))
            .filter(|(n, _)| n % 10 < 8)
            .map(|(n, i)| {
                let tool = format!("tool_{}", (seed * 512 + i) % 40);
                (n + 1, tool, ((n * 7919) % 8192).div_ceil(4))
            })
            .collect();
        let got: Vec<(u64, String, u64)> = read
            .context
            .order
            .iter()
            .filter_map(|e| match *e {
                Entry::Record { record, .. } => {
                    let rec = &read.records[record as usize];
                    let tokens = result_tokens(rec).unwrap();
                    Some((
                        u64::from_be_bytes(rec.span_id),
                        rec.tool.to_string(),
                        tokens,
                    ))
                }
                Entry::Whole(_) | Entry::Request(_) => None,
            })
            .collect();
        assert_eq!(got, expected, "seed {seed}");
        by_record.record_batch(&read.context, &read.records, 0);
        // The same events kept whole, results read from their records.
        let all = read.context.events(&read.records).into_iter();
        let events = all.zip(&read.context.order).map(|(e, entry)| match *entry {
            Entry::Whole(_) | Entry::Request(_) => e,
            Entry::Record { record, at_ns } => {
                from_records += 1;
                let rec = &read.records[record as usize];
                ContextEvent {
                    service: rec.service.clone(),
                    session: SessionId::Trace(rec.trace_id),
                    at_ns,
                    kind: ContextKind::Result {
                        tool: rec.tool.clone(),
                        tokens: result_tokens(rec).unwrap(),
                        estimated: true,
                    },
                    settles: false,
                }
            }
        });
        whole.record(events.collect(), 0);
    }
    assert!(from_records > 1000, "{from_records}");
    for t in 0..40 {
        let tool = format!("tool_{t}");
        let (a, b) = (
            by_record.tool("loadgen", &tool).unwrap(),
            whole.tool("loadgen", &tool).unwrap(),
        );
        assert_eq!(
            (
                a.results,
                a.result_tokens,
                a.cost,
                a.requests,
                a.share_buckets
            ),
            (
                b.results,
                b.result_tokens,
                b.cost,
                b.requests,
                b.share_buckets
            ),
            "{tool}"
        );
        assert!(a.cost > 0, "{tool}");
    }
    let view = |l: &Ledger| l.sessions_view(super::MAX_SESSIONS_SHOWN, None, 0);
    assert_eq!(view(&by_record).sessions, view(&whole).sessions);
    assert_eq!(by_record.stats, whole.stats);
}

/// The ledger's own cost per span on the storm mix, in one thread, without the rest of the
/// daemon: reading the requests with the ledger on and off, and applying their events to a
/// ledger whose sessions are full (as they are within seconds of a storm). A measurement,
/// run in a release build:
/// `cargo test --release --features collector --lib ledger_cost_on_the_storm -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement: prints the ledger's cost per span on the storm mix"]
fn ledger_cost_on_the_storm() {
    let bodies: Vec<Vec<u8>> = (0..16).map(storm_request).collect();
    let spans = (bodies.len() * 512) as f64;
    let on = Recognizer::new(&Default::default(), 128).with_context_ledger(true);
    let off = Recognizer::new(&Default::default(), 128).with_context_ledger(false);
    // Each figure the fastest of seven runs: the least disturbed by other work.
    let fastest = |run: &mut dyn FnMut()| {
        (0..7)
            .map(|_| {
                let t0 = Instant::now();
                run();
                t0.elapsed().as_nanos() as f64 / (10.0 * spans)
            })
            .fold(f64::INFINITY, f64::min)
    };
    let read = |r: &Recognizer| {
        fastest(&mut || {
            for _ in 0..10 {
                for b in &bodies {
                    std::hint::black_box(recognize_protobuf(r, b).unwrap());
                }
            }
        })
    };
    let (off_ns, on_ns) = (read(&off), read(&on));
    let read_events: Vec<_> = bodies
        .iter()
        .map(|b| recognize_protobuf(&on, b).unwrap())
        .collect();
    let mut l = Ledger::new(LedgerLimits::default());
    // Until the sessions are full, as within seconds of a storm.
    for _ in 0..40 {
        for r in &read_events {
            l.record_batch(&r.context, &r.records, 0);
        }
    }
    let apply = fastest(&mut || {
        for _ in 0..10 {
            for r in &read_events {
                l.record_batch(&r.context, &r.records, 0);
            }
        }
    });
    // The same with the caches emptied before each request, as in a daemon whose other
    // work and neighbours run between requests: the memory the ledger touches per request.
    let mut other = vec![1u64; 1 << 20];
    let cold = (0..7)
        .map(|_| {
            let mut took = std::time::Duration::ZERO;
            for _ in 0..10 {
                for r in &read_events {
                    for (i, x) in other.iter_mut().enumerate().step_by(8) {
                        *x = x.wrapping_add(i as u64);
                    }
                    let t0 = Instant::now();
                    l.record_batch(&r.context, &r.records, 0);
                    took += t0.elapsed();
                }
            }
            took.as_nanos() as f64 / (10.0 * spans)
        })
        .fold(f64::INFINITY, f64::min);
    println!(
        "storm, ns per span: read with the ledger off {off_ns:.1}, on {on_ns:.1}; \
         events applied {apply:.1}, from cold caches {cold:.1}"
    );
}

/// The ledger beside the series, as the aggregator records a request, each request from caches
/// emptied before it (at 100,000 spans/s the daemon idles between requests): a request recorded
/// into the series alone, into the ledger then the series, and into the series then the
/// ledger, the three taking turns. A measurement, run in a release build:
/// `cargo test --release --features collector --lib ledger_beside_the_series -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement: prints the ledger's cost per span beside the series on the storm mix"]
fn ledger_beside_the_series_on_the_storm() {
    use crate::collector::config::Config;
    use crate::collector::state::{Limits, State};
    use std::time::Duration;
    let on = Recognizer::new(&Default::default(), 128).with_context_ledger(true);
    let read: Vec<_> = (0..16)
        .map(|seed| recognize_protobuf(&on, &storm_request(seed)).unwrap())
        .collect();
    let spans = (read.len() * 512) as f64;
    let mut states: Vec<State> = (0..3)
        .map(|_| State::new(Limits::from_config(&Config::default())))
        .collect();
    let mut other = vec![1u64; 1 << 20];
    let mut best = [f64::INFINITY; 3];
    // Forty passes until the sessions are full (as within seconds of a storm), then seven
    // measured, each figure the fastest: the least disturbed by other work.
    for pass in 0..47 {
        let mut took = [Duration::ZERO; 3];
        for r in &read {
            for (k, st) in states.iter_mut().enumerate() {
                for (i, x) in other.iter_mut().enumerate().step_by(8) {
                    *x = x.wrapping_add(i as u64);
                }
                let t0 = Instant::now();
                match k {
                    0 => st.record_batch_ms(&r.records, 0),
                    1 => {
                        st.context.record_batch(&r.context, &r.records, 0);
                        st.record_batch_ms(&r.records, 0);
                    }
                    _ => {
                        st.record_batch_ms(&r.records, 0);
                        st.context.record_batch(&r.context, &r.records, 0);
                    }
                }
                took[k] += t0.elapsed();
            }
        }
        if pass >= 40 {
            for (b, t) in best.iter_mut().zip(took) {
                *b = b.min(t.as_nanos() as f64 / spans);
            }
        }
    }
    let [alone, before, after] = best;
    println!(
        "storm beside the series from cold caches, ns per span: series alone {alone:.1}, \
         the ledger before them +{:.1}, after them +{:.1}",
        before - alone,
        after - alone
    );
}
