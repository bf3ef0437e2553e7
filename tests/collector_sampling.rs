//! Sampled traces counted as what the tracer saw: the real OpenTelemetry Python SDK, with its
//! `TraceIdRatioBased` sampler (which says nothing in the span: the daemon is told the rate in
//! `recognition.sampling_rates`) and with its consistent-probability sampler (which writes
//! `ot=th:…` in the span's `tracestate`), exports tool spans of 10 % of its calls to the real
//! `toolsize serve`. Calls, errors and over-ceiling counts are the spans weighted by their
//! adjusted counts; the size histograms hold each span once; the API and `/metrics` say the
//! counts are extrapolated; the truncation-rate alert counts the weighted calls. The ids are
//! seeded, so the sampler's decisions are the same on every run. In CI a missing python3 or SDK
//! fails the test.
#![cfg(feature = "collector")]

mod support;

use std::process::Command;

use support::collector::*;

const SDK_CHECK: &str = "import opentelemetry.sdk.trace._sampling_experimental, opentelemetry.exporter.otlp.proto.http.trace_exporter";

/// Runs `tests/sampling/sampled_agent.py`; its report.
fn agent(
    sampler: &str,
    rate: &str,
    calls: u32,
    endpoint: &str,
    service: &str,
    extra: &[&str],
) -> serde_json::Value {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/sampling/sampled_agent.py"
    );
    let calls = calls.to_string();
    let out = Command::new(support::cli::python3())
        .args([
            script,
            "--sampler",
            sampler,
            "--rate",
            rate,
            "--calls",
            &calls,
        ])
        .args(["--endpoint", endpoint, "--service", service])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sampled_agent.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The `/api/v1/tools` row of `service`.
async fn row(admin: std::net::SocketAddr, service: &str) -> serde_json::Value {
    let t = tools(admin, "").await;
    t["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["service"] == service)
        .unwrap_or_else(|| panic!("{service}: {t}"))
        .clone()
}

fn metric(text: &str, name: &str, service: &str, extra: &str) -> f64 {
    sample(
        text,
        &format!("{name}{{service=\"{service}\",tool=\"fetch\"{extra}}}"),
    )
    .unwrap_or_else(|| panic!("{name} of {service} missing"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampled_spans_count_with_their_adjusted_counts() {
    if !require(&support::cli::python3(), &["-c", SDK_CHECK]) {
        return;
    }
    let dir = temp_dir("sampling");
    let config = dir.join("toolsize.toml");
    std::fs::write(
        &config,
        "[recognition]\nsampling_rates = [\"ratio-agent=0.1\", \"trunc-agent=0.1\"]\n\
         [alerts]\nevaluation_interval = \"1s\"\n",
    )
    .unwrap();
    let b = Binary::start_quiet("default", &["--config", config.to_str().unwrap()], None);
    let endpoint = format!("http://{}", b.http);

    // 2,000 calls, every 4th over the 16 KiB ceiling, sampled at 10 % by each sampler.
    for (sampler, service) in [("ratio", "ratio-agent"), ("threshold", "threshold-agent")] {
        let got = agent(sampler, "0.1", 2000, &endpoint, service, &[]);
        let (exported, over) = (
            got["exported"].as_u64().unwrap(),
            got["over"].as_u64().unwrap(),
        );
        assert!((150..=250).contains(&exported), "{service}: {got}");
        if sampler == "threshold" {
            assert_eq!(
                got["tracestates"],
                serde_json::json!(["ot=th:e6666666666666"])
            );
        } else {
            assert_eq!(got["tracestates"], serde_json::json!([""]));
        }
        let r = row(b.admin, service).await;
        // Each exported span stands for 10 calls; the sizes are the exported spans', once.
        assert_eq!(r["count"], 10 * exported, "{service}: {r}");
        assert_eq!(r["spans"], exported, "{r}");
        assert_eq!(r["sized"], exported, "{r}");
        assert_eq!(r["extrapolated"], true, "{r}");
        assert_eq!(r["max"], 50_000, "{r}");
        let count = r["count"].as_f64().unwrap();
        println!("{service}: {exported} of 2000 calls exported ({over} over the ceiling), counted {count} calls");
        assert!(
            (count - 2000.0).abs() <= 500.0,
            "{service}: {count} calls for 2000"
        );
        let text = metrics(b.admin).await;
        assert_eq!(
            metric(&text, "toolsize_tool_calls_total", service, ""),
            10.0 * exported as f64
        );
        assert_eq!(
            metric(&text, "toolsize_tool_spans_total", service, ""),
            exported as f64
        );
        assert_eq!(
            metric(
                &text,
                "toolsize_tool_results_over_ceiling_total",
                service,
                ",layer=\"default\",action=\"warn\""
            ),
            10.0 * over as f64,
            "{service}: every over-ceiling span counts 10"
        );
        assert_eq!(
            metric(&text, "toolsize_tool_result_size_bytes_count", service, ""),
            exported as f64,
            "the histogram holds each span once"
        );
    }

    // Not sampled: counted as it is, nothing extrapolated.
    let got = agent("threshold", "1.0", 200, &endpoint, "full-agent", &[]);
    assert_eq!(got["exported"], 200);
    let r = row(b.admin, "full-agent").await;
    assert_eq!(
        (&r["count"], &r["spans"], &r["extrapolated"]),
        (&200.into(), &200.into(), &false.into())
    );

    // 100 calls, all truncated, 10 % exported: fewer spans than the truncation-rate rule's
    // minimum of 20 calls, but they stand for 100 calls: the rule fires on the weighted count.
    let got = agent(
        "ratio",
        "0.1",
        100,
        &endpoint,
        "trunc-agent",
        &["--truncated", "--over-every", "0"],
    );
    let exported = got["exported"].as_u64().unwrap();
    assert!((2..20).contains(&exported), "{got}");
    let alert = wait_for(
        "ToolResultTruncationRate",
        std::time::Duration::from_secs(30),
        || async {
            let a = get_json(b.admin, "/api/v1/alerts").await;
            a["firing"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| {
                    x["labels"]["alertname"] == "ToolResultTruncationRate"
                        && x["labels"]["service"] == "trunc-agent"
                })
                .cloned()
        },
    )
    .await;
    // The window rule fires at the first evaluation that sees the minimum, which may come
    // before the agent's last spans (each is its own export): the calls it states are the
    // sampled spans seen so far, each counting 10, at least the minimum of 20 that fewer than
    // 20 spans could never reach unweighted.
    let calls: u64 = alert["annotations"]["calls"]
        .as_str()
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("calls annotation: {alert}"));
    assert!(
        calls.is_multiple_of(10) && (20..=10 * exported).contains(&calls),
        "{calls} calls for {exported} spans sampled at 10 %: {alert}"
    );
    let description = alert["annotations"]["description"].as_str().unwrap();
    assert!(
        description.contains("extrapolated from sampled spans"),
        "{description}"
    );
    b.stop();
}
