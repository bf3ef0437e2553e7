//! Hostile input over real sockets: the daemon answers each correctly, keeps serving, keeps what
//! it accepted, and bounds cardinality when 10,000 distinct tool names arrive.
#![cfg(feature = "collector")]

mod support;

use std::io::Write;

use prost::Message;
use support::collector::*;
use toolsize::collector::Daemon;

/// What the daemon answered to a body the client managed to write whole.
async fn raw(http: std::net::SocketAddr, ct: &str, enc: Option<&str>, body: Vec<u8>) -> u16 {
    send(http, ct, enc, body).await.unwrap().status().as_u16()
}

async fn send(
    http: std::net::SocketAddr,
    ct: &str,
    enc: Option<&str>,
    body: Vec<u8>,
) -> reqwest::Result<reqwest::Response> {
    let mut r = reqwest::Client::new()
        .post(format!("http://{http}/v1/traces"))
        .header("content-type", ct);
    if let Some(e) = enc {
        r = r.header("content-encoding", e);
    }
    r.body(body).send().await
}

/// This process's resident set, KiB. Fails the test when /proc cannot be read.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_else(|e| panic!("cannot read /proc/self/status: {e}"));
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS line in /proc/self/status"))
}

/// `n` series, one span each, under `prefix`; sizes `bytes`, latency `ms`.
async fn flood(h: std::net::SocketAddr, prefix: &str, n: u64, bytes: i64, ms: i64) {
    let spans: Vec<_> = (0..n)
        .map(|k| {
            let mut sp = own_span(k + 1, &format!("{prefix}{k}"), bytes);
            sp.attributes.retain(|a| a.key != "tool.latency_ms");
            sp.attributes.push(i("tool.latency_ms", ms));
            sp
        })
        .collect();
    for chunk in spans.chunks(250) {
        let r = post_proto(h, &request("agent", chunk.to_vec())).await;
        assert_eq!(r.status().as_u16(), 200);
    }
}

/// Waits until the aggregator holds tool `tool` (accepted records are queued, not yet applied;
/// they are applied in order, so the last one of a flood means all of it). Asks for that tool
/// alone: a scrape of every series would allocate megabytes in this process and blur the RSS
/// being measured.
async fn wait_for_tool(admin: std::net::SocketAddr, tool: &str) {
    let url = format!("http://{admin}/api/v1/tools/{tool}");
    for _ in 0..200 {
        if reqwest::get(&url).await.unwrap().status().is_success() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the aggregator never recorded {tool}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_values_keep_histograms_bounded_and_are_counted() {
    let d = Daemon::start(&loopback_config()).await.unwrap();
    let h = d.otlp_http_addr;
    const N: u64 = 600;
    // Baseline: N series of ordinary values (1 KiB, 2 ms).
    let before = rss_kib();
    flood(h, "small", N, 1024, 2).await;
    wait_for_tool(d.admin_addr, &format!("small{}", N - 1)).await;
    let small = rss_kib().saturating_sub(before);
    // N more series claiming 1 TiB results and 115-day latencies.
    let before = rss_kib();
    flood(h, "huge", N, 1 << 40, 10_000_000_000).await;
    wait_for_tool(d.admin_addr, &format!("huge{}", N - 1)).await;
    let huge = rss_kib().saturating_sub(before);
    eprintln!("RSS growth for {N} series: ordinary {small} KiB, huge values {huge} KiB");
    // Histograms stop growing at their ceiling: each new series holds 3 size + latency pairs
    // (since start, one 5m slot, one 1h slot), each at most `max_histogram_bytes`; histograms
    // grown to 1 TiB / one day would cost 2.6 times that.
    let pairs = (N * 3) as usize * toolsize::collector::state::histogram::max_histogram_bytes();
    let bound = small + (pairs / 1024) as u64 + 16 * 1024;
    assert!(
        huge < bound,
        "huge values grew RSS by {huge} KiB (bound {bound} KiB), ordinary ones by {small} KiB"
    );
    let text = metrics(d.admin_addr).await;
    assert_eq!(sample(&text, "toolsize_series"), Some((2 * N) as f64));
    assert_eq!(
        sample(&text, "toolsize_values_clamped_total{histogram=\"size\"}"),
        Some(N as f64)
    );
    assert_eq!(
        sample(
            &text,
            "toolsize_values_clamped_total{histogram=\"latency\"}"
        ),
        Some(N as f64)
    );
    // The exact maximum survives the clamp.
    let t = tools(d.admin_addr, "").await;
    let row = t["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["tool"] == "huge0")
        .unwrap_or_else(|| panic!("no huge0 in {t}"));
    assert_eq!(row["max"], serde_json::json!(1u64 << 40), "{row}");
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_input_and_ten_thousand_tool_names() {
    let mut cfg = loopback_config();
    cfg.otlp.max_request_bytes = 8 << 20;
    let d = Daemon::start(&cfg).await.unwrap();
    let h = d.otlp_http_addr;
    let good = request("agent", vec![own_span(1, "read", 1234)]);
    assert_eq!(
        raw(h, "application/x-protobuf", None, good.encode_to_vec()).await,
        200
    );

    let random: Vec<u8> = (0..65536u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 11) as u8)
        .collect();
    assert_eq!(raw(h, "application/x-protobuf", None, random).await, 400);
    let bytes = good.encode_to_vec();
    assert_eq!(
        raw(
            h,
            "application/x-protobuf",
            None,
            bytes[..bytes.len() / 2].to_vec()
        )
        .await,
        400
    );
    assert_eq!(raw(h, "text/html", None, bytes.clone()).await, 415);
    assert_eq!(
        raw(
            h,
            "application/json",
            None,
            br#"{"resourceSpans":[{"scopeSpans":{"x":1}}]}"#.to_vec()
        )
        .await,
        400
    );
    assert_eq!(raw(h, "application/x-protobuf", None, vec![]).await, 200);
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    for _ in 0..64 {
        e.write_all(&vec![b'a'; 1 << 20]).unwrap();
    }
    assert_eq!(
        raw(
            h,
            "application/x-protobuf",
            Some("gzip"),
            e.finish().unwrap()
        )
        .await,
        413
    );
    // Not gzip-compressed but over the limit: 413 too, read by the client still sending (the
    // daemon reads and discards a body of up to 16 MiB first). Past 16 MiB it answers as soon as
    // the declared length is over the limit and closes the connection, so the client may see the
    // close (broken pipe) instead of the answer; the refusal is counted either way.
    let refused_before = sample(
        &metrics(d.admin_addr).await,
        "toolsize_otlp_requests_refused_total{reason=\"too_large\"}",
    )
    .unwrap_or(0.0);
    let resp = send(h, "application/x-protobuf", None, vec![0u8; 9 << 20])
        .await
        .expect("the client reads the answer");
    assert_eq!(resp.status().as_u16(), 413);
    match send(h, "application/x-protobuf", None, vec![0u8; 17 << 20]).await {
        Ok(resp) => assert_eq!(resp.status().as_u16(), 413),
        Err(e) => assert!(e.is_request(), "not a closed connection: {e}"),
    }
    let refused_after = sample(
        &metrics(d.admin_addr).await,
        "toolsize_otlp_requests_refused_total{reason=\"too_large\"}",
    )
    .unwrap_or(0.0);
    assert_eq!(refused_after, refused_before + 2.0, "refused as too large");

    // 10,000 distinct tool names (some with control characters and absurd lengths).
    for chunk in 0..10 {
        let spans = (0..1000)
            .map(|k| {
                let n = chunk * 1000 + k;
                let name = if n % 500 == 0 {
                    format!("t{n}\n\u{7}{}", "x".repeat(1000))
                } else {
                    format!("t{n}")
                };
                own_span(n as u64, &name, 10)
            })
            .collect();
        assert_eq!(
            raw(
                h,
                "application/x-protobuf",
                None,
                request("agent", spans).encode_to_vec()
            )
            .await,
            200
        );
    }
    let v = tools(d.admin_addr, "").await;
    let rows = v["tools"].as_array().unwrap();
    assert_eq!(rows.len(), 2001, "2000 series + overflow");
    assert!(rows
        .iter()
        .all(|r| r["tool"].as_str().unwrap().len() <= 128
            && !r["tool"].as_str().unwrap().contains('\n')));
    let overflow = rows.iter().find(|r| r["tool"] == "__overflow__").unwrap();
    let read = rows.iter().find(|r| r["tool"] == "read").unwrap();
    assert_eq!(read["count"], 1, "accepted before the flood, still there");
    assert_eq!(read["max"], 1234);
    let total: u64 = rows.iter().map(|r| r["count"].as_u64().unwrap()).sum();
    assert_eq!(total, 10_001);
    assert_eq!(overflow["count"].as_u64().unwrap(), 10_001 - 2000);
    let text = metrics(d.admin_addr).await;
    assert_eq!(
        sample(&text, "toolsize_series_overflow_total"),
        Some(8001.0)
    );
    assert_eq!(
        sample(
            &text,
            "toolsize_otlp_requests_refused_total{reason=\"too_large\"}"
        ),
        Some(3.0)
    );
    assert_eq!(
        sample(
            &text,
            "toolsize_otlp_requests_refused_total{reason=\"decode\"}"
        ),
        Some(3.0)
    );
    assert_eq!(
        sample(
            &text,
            "toolsize_otlp_requests_refused_total{reason=\"unsupported_media_type\"}"
        ),
        Some(1.0)
    );
    // Memory stays bounded: 10,000 names held as 2,000 series + overflow.
    let rss_kib = rss_kib();
    eprintln!("test process RSS after the flood: {} MiB", rss_kib / 1024);
    assert!(rss_kib < 512 * 1024, "RSS {rss_kib} KiB");
    // Still serving.
    assert_eq!(
        raw(h, "application/x-protobuf", None, good.encode_to_vec()).await,
        200
    );
    d.shutdown().await;
}
