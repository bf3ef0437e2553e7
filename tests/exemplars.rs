//! Exemplars end to end: a real Prometheus with exemplar storage scrapes the daemon (OpenMetrics,
//! which it asks for by default) and `query_exemplars` returns, on the size histogram's buckets,
//! the trace ids of the largest results: one per bucket, the largest of each, none for the
//! latency histogram. The OpenMetrics text also passes the Prometheus Python client's strict
//! parser, exemplars included.
#![cfg(feature = "collector")]

mod support;

use std::time::Duration;

use support::collector::*;
use support::prometheus::{self, Prometheus};

/// The hex trace id `support::collector::span(n, …)` gives.
fn trace_id(n: u64) -> String {
    format!("{:016x}{:016x}", 0, n + 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_stores_the_trace_ids_of_large_results_as_exemplars() {
    if !prometheus::available() {
        return;
    }
    let daemon = Binary::start_quiet("codex.tool-output.bytes-fallback", &[], None);
    // fetch: small results, then two large ones in one bucket (40,961 and 49,000 share
    // (40960, 49152]) and one far larger.
    let mut spans: Vec<_> = (0..20)
        .map(|n| own_span(n, "fetch", 800 + n as i64))
        .collect();
    spans.push(own_span(100, "fetch", 40_961));
    spans.push(own_span(101, "fetch", 49_000));
    spans.push(own_span(102, "fetch", 700_000));
    let r = post_proto(daemon.http, &request("agent", spans)).await;
    assert!(r.status().is_success());

    let dir = temp_dir("exemplars");
    let prom = Prometheus::start_with(
        &dir,
        &[daemon.admin],
        &[],
        &["--enable-feature=exemplar-storage"],
    )
    .await;
    let series = wait_for(
        "exemplars in prometheus",
        Duration::from_secs(20),
        || async {
            let r = prom
                .query_exemplars(
                    "toolsize_tool_result_size_bytes_bucket{tool=\"fetch\"}",
                    600,
                )
                .await;
            (r.len() >= 3).then_some(r)
        },
    )
    .await;
    // (le, value, trace_id) of every exemplar.
    let mut got: Vec<(String, f64, String)> = series
        .iter()
        .flat_map(|s| {
            let le = s["seriesLabels"]["le"].as_str().unwrap().to_string();
            s["exemplars"].as_array().unwrap().iter().map(move |e| {
                (
                    le.clone(),
                    e["value"].as_str().unwrap().parse().unwrap(),
                    e["labels"]["trace_id"].as_str().unwrap().to_string(),
                )
            })
        })
        .collect();
    got.sort_by(|a, b| a.1.total_cmp(&b.1));
    let top: Vec<_> = got.iter().rev().take(2).cloned().collect();
    assert_eq!(
        top,
        [
            ("786432".to_string(), 700_000.0, trace_id(102)),
            ("49152".to_string(), 49_000.0, trace_id(101)),
        ],
        "{got:?}"
    );
    // One exemplar per bucket: 40,961 shares its bucket with 49,000 and is not one.
    assert!(!got.iter().any(|(_, v, _)| *v == 40_961.0), "{got:?}");
    let mut les: Vec<&str> = got.iter().map(|(le, _, _)| le.as_str()).collect();
    les.dedup();
    assert_eq!(les.len(), got.len(), "{got:?}");
    // At most aggregation.largest_results (10) per series.
    assert!(got.len() <= 10, "{got:?}");
    for s in &series {
        for e in s["exemplars"].as_array().unwrap() {
            assert_eq!(e["labels"]["span_id"].as_str().unwrap().len(), 16);
        }
    }
    // The latency histogram carries none.
    let latency = prom
        .query_exemplars("toolsize_tool_call_duration_seconds_bucket", 600)
        .await;
    assert!(latency.is_empty(), "{latency:?}");
    // The classic histogram still answers as before (the OpenMetrics scrape kept the samples).
    let count = prom
        .query("toolsize_tool_result_size_bytes_count{tool=\"fetch\"}")
        .await;
    assert_eq!(count[0]["value"][1], "23");
    daemon.stop();
}

/// Reads an OpenMetrics exposition with the Prometheus Python client's strict parser and prints
/// `[families, [[sample name, exemplar trace_id, exemplar value], …]]`.
const STRICT: &str = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
fams = list(text_string_to_metric_families(sys.stdin.read()))
ex = [[s.name, s.exemplar.labels["trace_id"], s.exemplar.value]
      for f in fams for s in f.samples if s.exemplar]
print(json.dumps([len(fams), ex]))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openmetrics_exposition_passes_a_strict_parser() {
    if !require(
        &support::cli::python3(),
        &["-c", "import prometheus_client.openmetrics.parser"],
    ) {
        return;
    }
    let daemon = Binary::start_quiet("default", &[], None);
    let spans = vec![
        own_span(0, "fetch", 20_000),
        own_span(1, "fetch", 40_000),
        own_span(2, "grep", 300),
    ];
    let r = post_proto(daemon.http, &request("agent", spans)).await;
    assert!(r.status().is_success());
    let admin = daemon.admin;
    wait_for("the calls", Duration::from_secs(30), || async move {
        (tools(admin, "?window=all").await["tools"].as_array()?.len() == 2).then_some(())
    })
    .await;
    let resp = reqwest::Client::new()
        .get(format!("http://{admin}/metrics"))
        .header("accept", "application/openmetrics-text;version=1.0.0")
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.headers()["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let text = resp.text().await.unwrap();
    use std::io::Write;
    let mut child = std::process::Command::new(support::cli::python3())
        .args(["-c", STRICT])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the strict parser refused /metrics: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v[0].as_u64().unwrap() > 30, "{v}");
    let mut ex: Vec<(String, f64)> = v[1]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e[1].as_str().unwrap().to_string(), e[2].as_f64().unwrap()))
        .collect();
    ex.sort_by(|a, b| a.1.total_cmp(&b.1));
    assert_eq!(
        ex,
        [
            (trace_id(2), 300.0),
            (trace_id(0), 20_000.0),
            (trace_id(1), 40_000.0)
        ],
        "{v}"
    );
    assert!(v[1]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e[0] == "toolsize_tool_result_size_bytes_bucket"));
    daemon.stop();
}
