//! The Rust example agent (`examples/agent_loop.rs`, instrumented with toolsize) exports to a
//! running daemon over OTLP/HTTP and over OTLP/gRPC; the daemon's per-tool p95 matches the exact
//! p95 of the sizes the agent sent within 1 %, and its counts, errors, max and byte sums are exact.
#![cfg(feature = "collector")]

mod support;

use std::path::PathBuf;
use std::process::Command;

use support::collector::*;
use toolsize::collector::Daemon;

/// The example binary, built by `cargo test` next to the crate's binaries.
fn agent_loop() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_toolsize"));
    let path = bin.parent().unwrap().join("examples").join("agent_loop");
    if !path.exists() {
        let st = Command::new(env!("CARGO"))
            .args(["build", "--example", "agent_loop", "--all-features"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .unwrap();
        assert!(st.success(), "cannot build examples/agent_loop.rs");
    }
    path
}

fn run(protocol: &str, endpoint: &str, service: &str) -> serde_json::Value {
    let out = Command::new(agent_loop())
        .args(["--steps", "600", "--seed", "7"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
        .env("OTEL_SERVICE_NAME", service)
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "agent_loop failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn example_agent_p95_matches_exact_p95() {
    let d = Daemon::start(&loopback_config()).await.unwrap();
    let http = run(
        "http/protobuf",
        &format!("http://{}", d.otlp_http_addr),
        "agent-http",
    );
    let grpc = run(
        "grpc",
        &format!("http://{}", d.otlp_grpc_addr),
        "agent-grpc",
    );
    let table = tools(d.admin_addr, "?window=5m").await;
    let text = metrics(d.admin_addr).await;
    for (service, sent) in [("agent-http", &http), ("agent-grpc", &grpc)] {
        assert_eq!(sent["spans"]["lost"], 0);
        let tools_sent = sent["tools"].as_object().unwrap();
        assert_eq!(tools_sent.len(), 3);
        for (tool, s) in tools_sent {
            let row = table["tools"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["service"] == service && r["tool"] == tool.as_str())
                .unwrap_or_else(|| panic!("{service}/{tool} missing: {table}"));
            assert_eq!(row["count"], s["calls"], "{service}/{tool} calls");
            assert_eq!(row["errors"], s["errors"], "{service}/{tool} errors");
            assert_eq!(row["max"], s["max_bytes"], "{service}/{tool} max");
            assert_eq!(
                row["measured"], row["sized"],
                "{service}/{tool}: sizes measured"
            );
            for (key, exact) in [("p95", "p95_bytes"), ("p50", "p50_bytes")] {
                let exact = s[exact].as_f64().unwrap();
                let got = row[key].as_f64().unwrap();
                assert!(
                    (got - exact).abs() <= exact * 0.01,
                    "{service}/{tool} {key}: daemon {got}, exact {exact}"
                );
            }
            let sum = format!(
                "toolsize_tool_result_size_bytes_sum{{service=\"{service}\",tool=\"{tool}\"}}"
            );
            assert_eq!(
                sample(&text, &sum),
                s["total_bytes"].as_f64(),
                "{service}/{tool} byte sum"
            );
        }
    }
    d.shutdown().await;
}
