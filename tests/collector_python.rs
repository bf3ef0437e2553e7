//! The real Python OpenTelemetry SDK (gRPC and HTTP exporters from PyPI) sends spans shaped like
//! every recognised emitter (`examples/python/emit_spans.py`); the daemon's `/api/v1/tools` shows
//! every tool with exact counts and sizes. In CI a missing python3 or SDK fails the test.
#![cfg(feature = "collector")]

mod support;

use std::process::Command;

use support::collector::*;
use toolsize::collector::Daemon;

const SDK_CHECK: &str = "import opentelemetry.sdk.trace, opentelemetry.exporter.otlp.proto.grpc.trace_exporter, opentelemetry.exporter.otlp.proto.http.trace_exporter";

fn run_python(protocol: &str, endpoint: &str, service: &str) -> serde_json::Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/python/emit_spans.py");
    let out = Command::new(support::cli::python3())
        .args([
            script,
            "--protocol",
            protocol,
            "--endpoint",
            endpoint,
            "--service",
            service,
            "--calls",
            "30",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "emit_spans.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn check(expected: &serde_json::Value, table: &serde_json::Value, text: &str) {
    let service = expected["service"].as_str().unwrap();
    let rows: Vec<&serde_json::Value> = table["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["service"] == service)
        .collect();
    let exp = expected["tools"].as_object().unwrap();
    assert_eq!(rows.len(), exp.len(), "one row per tool: {rows:?}");
    for (tool, e) in exp {
        let row = rows
            .iter()
            .find(|r| r["tool"] == tool.as_str())
            .unwrap_or_else(|| panic!("tool {tool} missing"));
        let sizes: Vec<u64> = e["sizes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(row["count"], e["count"], "{tool} count");
        assert_eq!(
            row["sized"].as_u64().unwrap(),
            sizes.len() as u64,
            "{tool} sized"
        );
        assert_eq!(row["unknown_size"], e["unknown"], "{tool} unknown");
        assert_eq!(row["truncated_upstream"], 0, "{tool}");
        if let Some(errors) = e.get("errors") {
            assert_eq!(&row["errors"], errors, "{tool} errors");
        }
        if sizes.is_empty() {
            assert_eq!(
                row["max"], 0,
                "{tool}: unknown sizes are never recorded as 0-byte results"
            );
            continue;
        }
        assert_eq!(
            row["max"].as_u64().unwrap(),
            *sizes.iter().max().unwrap(),
            "{tool} max"
        );
        for (q, key) in [(0.5, "p50"), (0.95, "p95"), (0.99, "p99")] {
            let exact = exact_quantile(&sizes, q) as f64;
            let got = row[key].as_f64().unwrap();
            assert!(
                (got - exact).abs() <= exact * 0.01,
                "{tool} {key}: {got} vs exact {exact}"
            );
        }
        let sum: u64 = sizes.iter().sum();
        let line =
            format!("toolsize_tool_result_size_bytes_sum{{service=\"{service}\",tool=\"{tool}\"}}");
        assert_eq!(
            sample(text, &line),
            Some(sum as f64),
            "{tool} exact byte sum"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_every_emitter_over_grpc_and_http() {
    if !require(&support::cli::python3(), &["-c", SDK_CHECK]) {
        return;
    }
    let d = Daemon::start(&loopback_config()).await.unwrap();
    let grpc = run_python("grpc", &d.otlp_grpc_addr.to_string(), "py-grpc");
    let http = run_python(
        "http",
        &format!("http://{}/v1/traces", d.otlp_http_addr),
        "py-http",
    );
    let table = tools(d.admin_addr, "?window=5m").await;
    let text = metrics(d.admin_addr).await;
    check(&grpc, &table, &text);
    check(&http, &table, &text);
    assert_eq!(
        sample(&text, "toolsize_spans_accepted_total{kind=\"other\"}"),
        Some(60.0)
    );
    d.shutdown().await;
}
