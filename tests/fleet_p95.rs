//! Two daemons scraped by one real Prometheus: the fleet p95 that the dashboard's p95 panel
//! computes (`histogram_quantile(0.95, sum by (le, tool) (rate(..._bucket[…])))`) is compared
//! with the exact p95 of every size sent, per tool. The error is printed, with what the same
//! query gives on the previous 15-bucket layout (same sizes, Prometheus' interpolation
//! reproduced here and checked against Prometheus on the current layout).
#![cfg(feature = "collector")]

mod support;

use std::time::{Duration, Instant};

use support::collector::*;
use support::prometheus::{sample_value, Prometheus};
use support::queries;

/// The bucket layout before the quarter-octave grid, for the printed comparison.
const PREVIOUS_LAYOUT: &[u64] = &[
    256, 1024, 4096, 8000, 10_000, 16_384, 20_000, 25_000, 32_768, 65_536, 131_072, 262_144,
    1_048_576, 4_194_304, 16_777_216,
];

/// Per tool: (name, daemon A's median and shape, daemon B's), so the merged distribution
/// differs from either daemon's.
type Shape = (f64, f64);
const TOOLS: &[(&str, Shape, Shape)] = &[
    ("search", (2_500.0, 0.8), (4_000.0, 0.7)),
    ("fetch_page", (40_000.0, 0.7), (60_000.0, 0.9)),
    ("list_files", (900.0, 0.6), (700.0, 0.5)),
    ("read_file", (9_000.0, 0.3), (8_000.0, 0.4)),
];
const PER_DAEMON: usize = 3_000;

/// `histogram_quantile` as Prometheus computes it on exact bucket counts (linear inside the
/// bucket, lower bound 0 for the first; the highest finite bound when the rank is in +Inf).
fn histogram_quantile(q: f64, bounds: &[u64], values: &[u64]) -> f64 {
    let mut counts = vec![0u64; bounds.len() + 1];
    for &v in values {
        counts[bounds.partition_point(|&b| b < v)] += 1;
    }
    let total: u64 = counts.iter().sum();
    let rank = q * total as f64;
    let mut below = 0u64;
    for (i, &n) in counts.iter().enumerate() {
        if (below + n) as f64 >= rank && n > 0 {
            if i == bounds.len() {
                return *bounds.last().unwrap() as f64;
            }
            let lo = if i == 0 { 0.0 } else { bounds[i - 1] as f64 };
            let hi = bounds[i] as f64;
            return lo + (hi - lo) * (rank - below as f64) / n as f64;
        }
        below += n;
    }
    unreachable!("rank within the total")
}

/// A tool span with no size: the series exists (its buckets at zero) before the sizes arrive,
/// so `rate` sees every sized result.
fn sizeless_span(n: u64, tool: &str) -> opentelemetry_proto::tonic::trace::v1::Span {
    let mut sp = own_span(n, tool, 0);
    sp.attributes.retain(|a| a.key != "tool.result.bytes");
    sp
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_p95_from_the_dashboard_query_is_close_to_the_exact_p95() {
    if !support::prometheus::available() {
        return;
    }
    let started = Instant::now();
    let stack = "codex.tool-output.bytes-fallback,claude-code.mcp.max";
    let daemons = [
        Binary::start_quiet(stack, &[], None),
        Binary::start_quiet(stack, &[], None),
    ];
    let dir = temp_dir("fleet-p95");
    let prom = Prometheus::start(&dir, &[daemons[0].admin, daemons[1].admin], &[]).await;
    prom.wait_targets_up().await;

    // Series at zero on both daemons, scraped before any size arrives.
    let mut n = 0;
    for (d, daemon) in daemons.iter().enumerate() {
        let spans = TOOLS
            .iter()
            .map(|(tool, ..)| {
                n += 1;
                sizeless_span(n, tool)
            })
            .collect();
        let r = post_proto(daemon.http, &request(&format!("agent-{d}"), spans)).await;
        assert!(r.status().is_success());
    }
    let series = (2 * TOOLS.len()) as f64;
    wait_for(
        "the empty series scraped",
        Duration::from_secs(20),
        || async {
            let c = prom
                .scalar("count(toolsize_tool_result_size_bytes_count == 0)")
                .await;
            (c == Some(series)).then_some(())
        },
    )
    .await;

    // The sizes, in batches of 500 spans.
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut sent: Vec<(&str, Vec<u64>)> = TOOLS.iter().map(|(t, ..)| (*t, Vec::new())).collect();
    for (d, daemon) in daemons.iter().enumerate() {
        let mut spans = Vec::new();
        for (i, (tool, a, b)) in TOOLS.iter().enumerate() {
            let (median, sigma) = if d == 0 { *a } else { *b };
            for _ in 0..PER_DAEMON {
                let bytes = rng.lognormal(median, sigma);
                sent[i].1.push(bytes);
                n += 1;
                spans.push(own_span(n, tool, bytes as i64));
            }
        }
        for chunk in spans.chunks(500) {
            let r = post_proto(daemon.http, &request(&format!("agent-{d}"), chunk.to_vec())).await;
            assert!(r.status().is_success());
        }
    }
    let total = (2 * PER_DAEMON * TOOLS.len()) as f64;
    wait_for("every size scraped", Duration::from_secs(30), || async {
        let c = prom
            .scalar("sum(toolsize_tool_result_size_bytes_count)")
            .await;
        (c == Some(total)).then_some(())
    })
    .await;
    // One more scrape of the final counts on both targets.
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // The dashboard's p95 panel query, over a window that holds the whole run.
    let window = format!("{}s", started.elapsed().as_secs() + 10);
    let expr = queries::p95_size_query(&support::dashboard::load());
    let expr = queries::fill(
        &expr,
        &[
            ("$__rate_interval", &window),
            ("$service", ".*"),
            ("$tool", ".*"),
        ],
    );
    let result = prom.query(&expr).await;
    // The same quantile over the raw cumulative counts (every size sent, no rate): Prometheus'
    // interpolation alone, which the reproduction must match.
    let raw = prom
        .query(
            "histogram_quantile(0.95, sum by (le, tool) (toolsize_tool_result_size_bytes_bucket))",
        )
        .await;
    let bounds: Vec<u64> = {
        let b = prom
            .query("count by (le) (toolsize_tool_result_size_bytes_bucket)")
            .await;
        let mut b: Vec<u64> = b
            .iter()
            .filter_map(|s| s["metric"]["le"].as_str()?.parse::<f64>().ok())
            .filter(|v| v.is_finite())
            .map(|v| v as u64)
            .collect();
        b.sort_unstable();
        b
    };

    eprintln!("\nfleet p95, two daemons, {PER_DAEMON} results per tool per daemon");
    eprintln!("dashboard: {expr}");
    eprintln!("counts:    the same quantile of the raw bucket counts (no rate)");
    eprintln!(
        "{:<12} {:>8} {:>10} {:>8} {:>10} {:>8} {:>12} {:>8}",
        "tool", "exact", "dashboard", "error", "counts", "error", "prev. layout", "error"
    );
    let mut worst = 0.0f64;
    for (tool, values) in &sent {
        let exact = exact_quantile(values, 0.95) as f64;
        let of = |r: &[serde_json::Value]| {
            r.iter()
                .find(|s| s["metric"]["tool"] == *tool)
                .and_then(sample_value)
                .unwrap_or_else(|| panic!("no fleet p95 for {tool}: {r:?}"))
        };
        let (got, got_raw) = (of(&result), of(&raw));
        let ours = histogram_quantile(0.95, &bounds, values);
        let previous = histogram_quantile(0.95, PREVIOUS_LAYOUT, values);
        let err = (got - exact) / exact;
        let prev_err = (previous - exact) / exact;
        worst = worst.max(err.abs());
        eprintln!(
            "{tool:<12} {exact:>8.0} {got:>10.0} {:>7.2}% {got_raw:>10.0} {:>7.2}% {previous:>12.0} {:>7.2}%",
            err * 100.0,
            (got_raw - exact) / exact * 100.0,
            prev_err * 100.0
        );
        // Prometheus interpolates like the reproduction above, which makes the previous
        // layout's figure credible. (The rate query weighs each daemon by its own
        // extrapolation to the window's edges, a few percent apart, so it is not compared.)
        assert!(
            (got_raw - ours).abs() / ours < 0.001,
            "{tool}: prometheus {got_raw} vs reproduced {ours}"
        );
        // The estimates stay inside the bucket that holds the exact value.
        let i = bounds.partition_point(|&b| (b as f64) < exact);
        let lo = if i == 0 { 0.0 } else { bounds[i - 1] as f64 };
        let hi = bounds.get(i).map_or(f64::INFINITY, |&b| b as f64);
        assert!(
            got_raw >= lo && got_raw <= hi,
            "{tool}: {got_raw} outside the bucket ({lo}, {hi}] of the exact p95 {exact}"
        );
        assert!(
            got >= lo * 0.95 && got <= hi * 1.05,
            "{tool}: the rate query's {got} is far from the bucket ({lo}, {hi}] of the exact p95 {exact}"
        );
    }
    eprintln!("worst fleet p95 error: {:.2}%", worst * 100.0);
    drop(prom);
    for d in daemons {
        d.stop();
    }
}
