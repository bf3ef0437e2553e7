//! Spans and log records that arrive but are no tool call, with the real `toolsize serve`:
//! counted per service on `/api/v1/unrecognised` with the attribute keys they carried (never
//! their values) and the recipe, and logged once per service with its name and keys.
#![cfg(feature = "collector")]

mod support;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;
use support::collector::*;

/// A value no answer and no log line may hold.
const SECRET: &str = "private-value-7f3a";

/// A span that is no tool call: an HTTP client span of an agent, a value that must stay
/// private.
fn http_span(n: u64) -> opentelemetry_proto::tonic::trace::v1::Span {
    span(
        n,
        "GET",
        vec![
            s("http.request.method", "GET"),
            s("url.full", &format!("https://example.test/{SECRET}")),
            s("gen_ai.request.model", "m"),
        ],
    )
}

fn logs(service: &str) -> ExportLogsServiceRequest {
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(Resource {
                attributes: vec![s("service.name", service)],
                ..Default::default()
            }),
            scope_logs: vec![ScopeLogs {
                scope: Some(InstrumentationScope {
                    name: "my.logger".into(),
                    ..Default::default()
                }),
                log_records: vec![LogRecord {
                    time_unix_nano: 1_700_000_000_000_000_000,
                    attributes: vec![s("user.query", SECRET)],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_that_are_no_tool_call_are_reported_per_service_with_their_keys() {
    let d = Logged::start(&[], &[("RUST_LOG", "info")]);
    // Two requests of spans that are no tool call, one of log records; and a service whose
    // spans are tool calls, which is not reported.
    for first in [0, 3] {
        let spans = (first..first + 3).map(http_span).collect();
        assert_eq!(
            post_proto(d.http, &request("plain-agent", spans))
                .await
                .status(),
            200
        );
    }
    let r = reqwest::Client::new()
        .post(format!("http://{}/v1/logs", d.http))
        .header("content-type", "application/x-protobuf")
        .body(logs("plain-agent").encode_to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let tool = vec![own_span(9, "read", 100)];
    assert_eq!(
        post_proto(d.http, &request("tooled", tool)).await.status(),
        200
    );

    let body = reqwest::get(format!("http://{}/api/v1/unrecognised", d.admin))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!body.contains(SECRET), "a value leaked: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let services = v["unrecognised"].as_array().unwrap();
    assert_eq!(services.len(), 1, "{v}");
    let s = &services[0];
    assert_eq!(s["service"], "plain-agent");
    assert_eq!((&s["spans"], &s["log_records"]), (&6.into(), &1.into()));
    assert_eq!(
        s["keys"],
        serde_json::json!([
            "gen_ai.request.model",
            "http.request.method",
            "url.full",
            "user.query"
        ])
    );
    assert!(
        s["scopes"]
            .as_array()
            .unwrap()
            .contains(&"my.logger".into()),
        "{s}"
    );
    let recipe = s["recipe"].as_str().unwrap();
    assert!(
        recipe.starts_with("GenAI spans arrive but none has gen_ai.operation.name=execute_tool"),
        "{recipe}"
    );
    assert!(
        recipe.ends_with("(see docs/collector.md#the-recipe)"),
        "{recipe}"
    );
    assert!(s["first_seen_unix"].as_u64().unwrap() > 1_700_000_000);
    assert!(s["last_seen_unix"].as_u64() >= s["first_seen_unix"].as_u64());
    assert_eq!(v["overflow"]["services"], 0);

    // Logged once for the service (not once per request), with its keys, never a value.
    d.line_with("no tool call").await;
    let log = d.log();
    assert!(!log.contains(SECRET), "a value leaked into the log:\n{log}");
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("no tool call")).collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert!(lines[0].contains("service=plain-agent"), "{}", lines[0]);
    assert!(lines[0].contains("\"url.full\""), "{}", lines[0]);
    assert!(
        lines[0].contains("docs/collector.md#the-recipe"),
        "{}",
        lines[0]
    );
}
