//! Three daemons scraped by two real Prometheus servers: one started with native histograms
//! (it negotiates the protobuf exposition and keeps the native histograms), one without (the
//! text exposition's classic buckets). Four size distributions, one per tool, 3,000 sizes per
//! tool per daemon, merged across the fleet: the fleet p95 of each query form is compared with
//! the exact p95 of every size sent.
#![cfg(feature = "collector")]

mod support;

use std::time::Duration;

use support::collector::*;
use support::prometheus::{sample_value, Prometheus, NATIVE_HISTOGRAMS};
use support::queries;

const PER_DAEMON: usize = 3_000;
const DAEMONS: usize = 3;

/// Draws one size.
type Draw = fn(&mut Rng) -> u64;

/// The distributions: a tool each, drawing one size from the generator.
const TOOLS: &[(&str, Draw)] = &[
    ("lognormal_3k", |r| r.lognormal(3_000.0, 1.57)),
    ("uniform_10k_20k", |r| {
        10_000 + (r.next_f64() * 10_000.0) as u64
    }),
    ("small_and_huge", |r| {
        if r.next_f64() < 0.9 {
            r.lognormal(500.0, 0.2)
        } else {
            r.lognormal(200_000.0, 0.05)
        }
    }),
    // Bunched at the default 16 KiB ceiling, the case operators watch.
    ("bunched_at_ceiling", |r| {
        16_000 + (r.next_f64() * 500.0) as u64
    }),
];

/// The fleet p95 of each tool in a query's result.
fn by_tool(result: &[serde_json::Value], tool: &str) -> f64 {
    result
        .iter()
        .find(|s| s["metric"]["tool"] == tool)
        .and_then(sample_value)
        .unwrap_or_else(|| panic!("no fleet p95 for {tool}: {result:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_p95_native_and_classic_against_the_exact_p95() {
    if !support::prometheus::available() {
        return;
    }
    let daemons: Vec<Binary> = (0..DAEMONS)
        .map(|_| Binary::start_quiet("default", &[], None))
        .collect();
    let targets: Vec<_> = daemons.iter().map(|d| d.admin).collect();
    let native_dir = temp_dir("fleet-native");
    let classic_dir = temp_dir("fleet-classic");
    let native = Prometheus::start_with(&native_dir, &targets, &[], &[NATIVE_HISTOGRAMS]).await;
    let classic = Prometheus::start(&classic_dir, &targets, &[]).await;
    native.wait_targets_up().await;
    classic.wait_targets_up().await;

    let started = std::time::Instant::now();
    // Series at zero on every daemon, scraped before any size arrives, so that `rate` sees
    // every sized result.
    let mut n = 0;
    for (d, daemon) in daemons.iter().enumerate() {
        let spans = TOOLS
            .iter()
            .map(|(tool, _)| {
                n += 1;
                let mut sp = own_span(n, tool, 0);
                sp.attributes.retain(|a| a.key != "tool.result.bytes");
                sp
            })
            .collect();
        let r = post_proto(daemon.http, &request(&format!("agent-{d}"), spans)).await;
        assert!(r.status().is_success());
    }
    let series = (DAEMONS * TOOLS.len()) as f64;
    for (prom, expr) in [
        (
            &native,
            "count(histogram_count(toolsize_tool_result_size_bytes) == 0)",
        ),
        (
            &classic,
            "count(toolsize_tool_result_size_bytes_count == 0)",
        ),
    ] {
        wait_for(
            "the empty series scraped",
            Duration::from_secs(20),
            || async { (prom.scalar(expr).await == Some(series)).then_some(()) },
        )
        .await;
    }
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut sent: Vec<Vec<u64>> = vec![Vec::new(); TOOLS.len()];
    for (d, daemon) in daemons.iter().enumerate() {
        let mut spans = Vec::new();
        for (i, (tool, draw)) in TOOLS.iter().enumerate() {
            for _ in 0..PER_DAEMON {
                let bytes = draw(&mut rng);
                sent[i].push(bytes);
                n += 1;
                spans.push(own_span(n, tool, bytes as i64));
            }
        }
        for chunk in spans.chunks(500) {
            let r = post_proto(daemon.http, &request(&format!("agent-{d}"), chunk.to_vec())).await;
            assert!(r.status().is_success());
        }
    }
    let total = (DAEMONS * PER_DAEMON * TOOLS.len()) as f64;
    for (prom, expr) in [
        (
            &native,
            "sum(histogram_count(toolsize_tool_result_size_bytes))",
        ),
        (&classic, "sum(toolsize_tool_result_size_bytes_count)"),
    ] {
        wait_for("every size scraped", Duration::from_secs(30), || async {
            (prom.scalar(expr).await == Some(total)).then_some(())
        })
        .await;
    }

    // What each Prometheus kept: the native one the native histograms (Prometheus 2.42 drops
    // the classic buckets of a metric that has one), the other the classic buckets.
    let native_buckets = native
        .scalar("count(toolsize_tool_result_size_bytes_bucket)")
        .await;
    let classic_buckets = classic
        .scalar("count(toolsize_tool_result_size_bytes_bucket)")
        .await
        .unwrap_or(0.0);
    assert!(classic_buckets > 0.0);

    // The fleet quantile over the cumulative counts (every size sent, no rate).
    let native_q = native
        .query("histogram_quantile(0.95, sum by (tool) (toolsize_tool_result_size_bytes))")
        .await;
    let classic_q = classic
        .query(
            "histogram_quantile(0.95, sum by (le, tool) (toolsize_tool_result_size_bytes_bucket))",
        )
        .await;
    eprintln!(
        "\nfleet p95, {DAEMONS} daemons, {PER_DAEMON} sizes per tool per daemon; classic bucket \
         series kept by the native Prometheus: {native_buckets:?}"
    );
    eprintln!(
        "{:<20} {:>8} {:>9} {:>8} {:>9} {:>8}",
        "sizes", "exact", "native", "error", "classic", "error"
    );
    for (i, (tool, _)) in TOOLS.iter().enumerate() {
        let exact = exact_quantile(&sent[i], 0.95) as f64;
        let (nat, cla) = (by_tool(&native_q, tool), by_tool(&classic_q, tool));
        let (nat_err, cla_err) = ((nat - exact) / exact, (cla - exact) / exact);
        eprintln!(
            "{tool:<20} {exact:>8.0} {nat:>9.0} {:>7.2}% {cla:>9.0} {:>7.2}%",
            nat_err * 100.0,
            cla_err * 100.0
        );
        assert!(
            nat_err.abs() <= 0.02,
            "{tool}: native fleet p95 {nat} is {:.2} % off the exact {exact}",
            nat_err * 100.0
        );
        if *tool == "bunched_at_ceiling" {
            assert!(
                cla_err.abs() <= 0.05,
                "{tool}: classic fleet p95 {cla} is {:.2} % off the exact {exact}",
                cla_err * 100.0
            );
        }
    }

    // The dashboard's p95 panel (classic buckets `or` the native histograms) answers on both,
    // over a window holding the whole run. (Its rate weighs each daemon by its own
    // extrapolation to the window's edges, so the bound is looser than the counts' above.)
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let window = format!("{}s", started.elapsed().as_secs() + 10);
    let panel = queries::fill(
        &queries::p95_size_query(&support::dashboard::load()),
        &[
            ("$__rate_interval", &window),
            ("$service", ".*"),
            ("$tool", ".*"),
        ],
    );
    for (name, prom) in [("native", &native), ("classic", &classic)] {
        let result = prom.query(&panel).await;
        for (i, (tool, _)) in TOOLS.iter().enumerate() {
            let exact = exact_quantile(&sent[i], 0.95) as f64;
            let got = by_tool(&result, tool);
            eprintln!(
                "dashboard p95 panel, {name:<7} {tool:<20} {got:>9.0} {:>7.2}%",
                (got - exact) / exact * 100.0
            );
            assert!(
                ((got - exact) / exact).abs() <= 0.10,
                "{name}: the dashboard's p95 of {tool} is {got}, the exact {exact}"
            );
        }
    }
    drop(native);
    drop(classic);
    for d in daemons {
        d.stop();
    }
    std::fs::remove_dir_all(native_dir).ok();
    std::fs::remove_dir_all(classic_dir).ok();
}
