//! `toolsize demo`: the daemon plus a built-in synthetic agent, so the status page, the history,
//! the API and `/metrics` have something to show within seconds of the first command.
//!
//! The agent speaks plain OTLP/HTTP (protobuf) to the daemon's own OTLP/HTTP listener, every
//! 250 ms, with the span contract of `toolsize` itself, like the example agent
//! (`examples/agent_loop.rs`): four tools of the service `demo-agent`.
//! - `search_orders`: results around 3 KB, which grow about 13× one minute after start
//!   (`--deploy-after`; a deploy that made a query return everything): its p95 jumps in the history and the size
//!   alerts follow. Unless windows are set, the demo runs with windows of 10s and 2m
//!   ([`super::serve::DEMO_WINDOWS`]), so `ToolResultSizeP95Jump` fires within seconds of the
//!   deploy (`tests/cli_demo.rs` measures it); at the daemon's 5m/1h it would take over an
//!   hour. The baseline needs 50 results in complete 24 s slots of the 2m window before the
//!   deploy: a deploy earlier than about 41 s after start may never fire.
//! - `fetch_page`: pages of 2 to 24 KB, the largest over the default 16 KiB ceiling: a
//!   `ToolResultOverCeiling` alert fires within the first seconds.
//! - `read_file`: small results, one call in ten failing.
//! - `list_files`: directory listings of 1 to 9 KB, the same arguments again and again.
//!
//! Sizes come from a fixed-seed generator, so two demos show the same shapes. Nothing here is
//! real data: the spans carry sizes and hashes only. A failed post is logged once and retried
//! on the next tick; the agent stops with the daemon.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    any_value::Value, AnyValue, InstrumentationScope, KeyValue,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{status, ResourceSpans, ScopeSpans, Span, Status};
use prost::Message;

use crate::collector::net::client::Target;
use crate::semconv;

/// The demo agent's `service.name`.
pub const SERVICE: &str = "demo-agent";
/// Time between two batches of tool calls.
pub const TICK: Duration = Duration::from_millis(250);

fn kv(k: &str, v: Value) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue { value: Some(v) }),
        ..Default::default()
    }
}

/// A xorshift generator: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// exp(N(ln median, sigma)), the normal from 12 uniforms.
    fn lognormal(&mut self, median: f64, sigma: f64) -> u64 {
        let z: f64 = (0..12).map(|_| self.uniform()).sum::<f64>() - 6.0;
        (median.ln() + sigma * z).exp().round().max(1.0) as u64
    }
}

/// One tool call of the synthetic agent: (tool, arguments hash, result bytes or `None` when
/// the call failed, latency in ms).
fn call(rng: &mut Rng, n: u64, deployed: bool) -> (&'static str, String, Option<u64>, f64) {
    match n % 4 {
        0 => {
            let median = if deployed { 41_000.0 } else { 3_000.0 };
            let q = rng.next() % 50;
            (
                "search_orders",
                format!("{:012x}", 0x5ea0 + q),
                Some(rng.lognormal(median, 0.3)),
                40.0,
            )
        }
        1 => {
            let page = rng.next() % 200;
            let bytes = 2_000 + rng.next() % 22_000;
            (
                "fetch_page",
                format!("{:012x}", 0xfe70 + page),
                Some(bytes),
                120.0,
            )
        }
        2 => {
            let failed = rng.next().is_multiple_of(10);
            let bytes = rng.lognormal(600.0, 0.6);
            (
                "read_file",
                format!("{:012x}", rng.next() % 1000),
                (!failed).then_some(bytes),
                3.0,
            )
        }
        _ => (
            "list_files",
            format!("{:012x}", 0x1157),
            Some(1_000 + rng.next() % 8_000),
            8.0,
        ),
    }
}

fn span(n: u64, tool: &str, args_hash: String, bytes: Option<u64>, latency_ms: f64) -> Span {
    let end = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut attributes = vec![
        kv(
            semconv::GEN_AI_OPERATION_NAME,
            Value::StringValue(semconv::OPERATION_EXECUTE_TOOL.into()),
        ),
        kv(semconv::GEN_AI_TOOL_NAME, Value::StringValue(tool.into())),
        kv(semconv::TOOL_NAME, Value::StringValue(tool.into())),
        kv(semconv::TOOL_ARGS_HASH, Value::StringValue(args_hash)),
        kv(semconv::TOOL_LATENCY_MS, Value::DoubleValue(latency_ms)),
    ];
    let mut status = None;
    match bytes {
        Some(b) => {
            attributes.push(kv(semconv::TOOL_RESULT_BYTES, Value::IntValue(b as i64)));
            attributes.push(kv(semconv::TOOL_RESULT_TRUNCATED, Value::BoolValue(false)));
        }
        None => {
            attributes.push(kv(
                semconv::TOOL_ERROR,
                Value::StringValue("file not found".into()),
            ));
            attributes.push(kv(
                semconv::ERROR_TYPE,
                Value::StringValue("NotFound".into()),
            ));
            status = Some(Status {
                code: status::StatusCode::Error as i32,
                ..Default::default()
            });
        }
    }
    let mut trace_id = vec![0xd0; 16];
    trace_id[8..].copy_from_slice(&n.to_be_bytes());
    Span {
        trace_id,
        span_id: (n + 1).to_be_bytes().to_vec(),
        name: format!("execute_tool {tool}"),
        kind: 1,
        start_time_unix_nano: end.saturating_sub((latency_ms * 1e6) as u64),
        end_time_unix_nano: end,
        attributes,
        status,
        ..Default::default()
    }
}

/// The request of one tick: `per_tick` tool calls.
fn request(rng: &mut Rng, first: u64, per_tick: u64, deployed: bool) -> Vec<u8> {
    let spans = (first..first + per_tick)
        .map(|n| {
            let (tool, hash, bytes, latency) = call(rng, n, deployed);
            span(n, tool, hash, bytes, latency)
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![kv("service.name", Value::StringValue(SERVICE.into()))],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "toolsize-demo".into(),
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

/// Runs the synthetic agent against the OTLP/HTTP listener at `otlp_http` until the task is
/// dropped; `search_orders` grows `deploy_after` after start.
pub async fn agent(otlp_http: SocketAddr, token: Option<String>, deploy_after: Duration) {
    let target = Target::http(otlp_http, "/v1/traces");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let start = Instant::now();
    let mut tick = tokio::time::interval(TICK);
    let mut n = 0;
    let mut failing = false;
    loop {
        tick.tick().await;
        let body = request(&mut rng, n, 8, start.elapsed() >= deploy_after);
        n += 8;
        let post = target.post("application/x-protobuf", token.as_deref(), body);
        match tokio::time::timeout(Duration::from_secs(5), post).await {
            Ok(Ok(())) => failing = false,
            Ok(Err(e)) if !failing => {
                failing = true;
                tracing::warn!(error = %e, "Demo agent: the daemon refused a batch; retrying.");
            }
            Err(_) if !failing => {
                failing = true;
                tracing::warn!("Demo agent: the daemon did not answer within 5 s; retrying.");
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workload_has_its_shapes() {
        let mut rng = Rng(1);
        let calls: Vec<_> = (0..4000).map(|n| call(&mut rng, n, false)).collect();
        let tools: std::collections::BTreeSet<&str> = calls.iter().map(|c| c.0).collect();
        assert_eq!(tools.len(), 4);
        assert!(calls
            .iter()
            .any(|c| c.0 == "fetch_page" && c.2.unwrap() > 16_384));
        assert!(calls.iter().any(|c| c.0 == "read_file" && c.2.is_none()));
        let after: Vec<u64> = (0..400)
            .filter_map(|n| {
                let c = call(&mut rng, n * 4, true);
                c.2
            })
            .collect();
        assert!(
            after.iter().filter(|&&b| b > 20_000).count() > 300,
            "the jump"
        );
    }
}
