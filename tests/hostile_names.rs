//! Long and odd names from a hostile client: 2,000 distinct 64 KiB `service.name`s carrying a
//! right-to-left override. Every name is cut and cleaned at the edge, the cuts are counted, and
//! `/metrics`, the API and the status page stay within the series cap times a fixed per-series
//! bound, with no bidi or control character left.
#![cfg(feature = "collector")]

mod support;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use support::collector::*;
use toolsize::collector::Daemon;

/// Bytes of a `/metrics` sample line apart from its label values: the longest metric name and
/// fixed labels, a 20-digit value (docs/collector.md, "Cardinality").
const LINE_OVERHEAD: usize = 128;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_and_hidden_names_keep_metrics_and_api_bounded() {
    let cfg = loopback_config();
    let (max_series, svc_max, tool_max) = (
        cfg.aggregation.max_series,
        cfg.aggregation.max_service_name_bytes,
        cfg.aggregation.max_tool_name_bytes,
    );
    let d = Daemon::start(&cfg).await.unwrap();
    let (h, admin) = (d.otlp_http_addr, d.admin_addr);

    // 2,000 distinct names of 64 KiB each (128 MiB) in three requests under the 64 MiB limit.
    // They differ in their first bytes, so each is a series of its own after the cut.
    let long_tail = "x".repeat(64 << 10);
    let mut sent = 0u64;
    for part in 0..3u64 {
        let resource_spans = (part * 667..((part + 1) * 667).min(2000))
            .flat_map(|n| {
                let service = format!("svc{n:04}\u{202E}gnp.exe\u{200B}{long_tail}");
                // The tool name is in three places of the span: 4 KiB keeps a part under 64 MiB.
                let tool = format!("read\u{2066}{n}\u{0}{}", &long_tail[..4096]);
                request(&service, vec![own_span(n, &tool, 100)]).resource_spans
            })
            .collect::<Vec<_>>();
        sent += resource_spans.len() as u64;
        let req = ExportTraceServiceRequest { resource_spans };
        let r = post_proto(h, &req).await;
        assert_eq!(r.status().as_u16(), 200, "part {part}");
    }
    assert_eq!(sent, 2000);
    let text = wait_for(
        "2,000 series",
        std::time::Duration::from_secs(30),
        || async {
            let t = metrics(admin).await;
            (sample(&t, "toolsize_series") == Some(2000.0)).then_some(t)
        },
    )
    .await;

    // Every cut counted, per tool span.
    for (label, reason) in [
        ("service", "too_long"),
        ("service", "hidden_characters"),
        ("tool", "too_long"),
        ("tool", "hidden_characters"),
    ] {
        assert_eq!(
            sample(
                &text,
                &format!(
                    "toolsize_label_values_sanitized_total{{label=\"{label}\",reason=\"{reason}\"}}"
                )
            ),
            Some(2000.0),
            "{label} {reason}"
        );
    }

    // The per-series bound: every sample line is at most the overhead plus its label values
    // escaped (each at most twice its limit; layer ids are at most 128 bytes).
    let line_max = LINE_OVERHEAD + 2 * (svc_max + tool_max + 128);
    let longest = text.lines().map(str::len).max().unwrap();
    assert!(longest <= line_max, "a line of {longest} bytes");
    let lines_per_series = text
        .lines()
        .filter(|l| l.contains("service=\"svc0000_gnp.exe_"))
        .count();
    let bound = (max_series + 1) * lines_per_series * line_max + (64 << 10);
    eprintln!(
        "/metrics with 2,000 64 KiB service names: {} bytes ({} lines per series, longest line \
         {longest} bytes; bound {bound} bytes)",
        text.len(),
        lines_per_series
    );
    assert!(text.len() <= bound, "/metrics is {} bytes", text.len());
    // ≈ 62 MB measured against ≈ 16 MB with short names (docs/collector.md).
    assert!(text.len() < 96 << 20, "/metrics is {} bytes", text.len());
    for bad in ['\u{202E}', '\u{200B}', '\u{2066}', '\u{0}'] {
        assert!(!text.contains(bad), "{bad:?} in /metrics");
    }

    // The API: bounded names, no hidden characters, size within the same cap.
    let body = reqwest::get(format!("http://{admin}/api/v1/tools"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let rows = v["tools"].as_array().unwrap();
    assert_eq!(rows.len(), 2000);
    for r in rows {
        let (s, t) = (r["service"].as_str().unwrap(), r["tool"].as_str().unwrap());
        assert!(s.len() <= svc_max && t.len() <= tool_max, "{s:?} {t:?}");
        assert!(s.starts_with("svc") && s.contains("_gnp.exe_"), "{s:?}");
        assert!(t.starts_with("read_") && t.contains('_'), "{t:?}");
    }
    eprintln!("/api/v1/tools: {} bytes", body.len());
    assert!(
        body.len() <= (max_series + 1) * 4096,
        "{} bytes",
        body.len()
    );
    for bad in ['\u{202E}', '\u{200B}', '\u{2066}'] {
        assert!(!body.contains(bad), "{bad:?} in the API");
    }
    let one = tools(admin, &format!("/{}", rows[0]["tool"].as_str().unwrap())).await;
    assert!(!one.to_string().contains('\u{202E}'));

    // The status page.
    let page = reqwest::get(format!("http://{admin}/"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!page.contains('\u{202E}'));

    // Memory: the daemon and this client in one process, after 128 MiB of names went through.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let rss_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    eprintln!("test process RSS: {} MiB", rss_kib / 1024);
    assert!(rss_kib < 1024 * 1024, "RSS {rss_kib} KiB");

    // Still serving a legitimate client.
    let r = post_proto(h, &request("agent", vec![own_span(9, "read", 1)])).await;
    assert_eq!(r.status().as_u16(), 200);
    d.shutdown().await;
}
