//! Every loss is counted once, by its real reason, and what watches the counters fires: a
//! daemon whose aggregator panics with batches in its queue counts them in
//! `toolsize_spans_dropped_total` (and refuses what comes after as `aggregator_stopped`), a
//! real Prometheus loading `alerts/toolsize.rules.yml` fires `ToolsizeSpansRefused` on it and
//! the dashboard's panels on the counter show the loss; a daemon whose alert task stopped counts
//! every match it could not raise as `engine_stopped`.
//!
//! The failures are caused with [`toolsize::collector::Fault`]: the aggregator really panics
//! (its queue is dropped with the task), the alert task is really aborted.
#![cfg(feature = "collector")]

mod support;

use std::time::Duration;

use support::collector::*;
use support::prometheus::{self, Prometheus};
use toolsize::collector::{Daemon, Fault};

/// `alerts/toolsize.rules.yml` with `ToolsizeSpansRefused` pending for 0 s instead of 5 min:
/// the expression is the shipped one, and its `for` is held by its promtool unit test.
fn rules_firing_at_once(dir: &std::path::Path) -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("alerts/toolsize.rules.yml")).unwrap();
    let at = text.find("- alert: ToolsizeSpansRefused").unwrap();
    let pending = at + text[at..].find("for: 5m").unwrap();
    let text = format!("{}for: 0s{}", &text[..pending], &text[pending + 7..]);
    let file = dir.join("toolsize.rules.yml");
    std::fs::write(&file, text).unwrap();
    file
}

fn spans(from: u64, n: u64) -> Vec<opentelemetry_proto::tonic::trace::v1::Span> {
    (from..from + n)
        .map(|i| own_span(i, "search", 900))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_aggregator_counts_what_it_lost_and_the_rule_and_panels_fire() {
    if !prometheus::available() {
        return;
    }
    let dir = temp_dir("losses");
    let d = Daemon::start(&loopback_config()).await.unwrap();
    let (http, admin) = (d.otlp_http_addr, d.admin_addr);
    let prom = Prometheus::start(&dir, &[admin], &[rules_firing_at_once(&dir)]).await;
    // Prometheus has the counter at 0 before the loss (increase() needs two samples).
    wait_for(
        "two scrapes of the counter",
        Duration::from_secs(30),
        || async {
            let r = prom
                .query("count_over_time(toolsize_spans_dropped_total[1m]) >= 2")
                .await;
            (!r.is_empty()).then_some(())
        },
    )
    .await;

    // The aggregator takes nothing more: three requests are acknowledged and queued.
    let (release, after) = tokio::sync::oneshot::channel();
    d.inject(Fault::AggregatorPanicsAfter(after)).await;
    for k in 0..3 {
        let r = post_proto(http, &request("svc", spans(k * 5, 5))).await;
        assert_eq!(r.status(), 200, "queued and acknowledged");
    }
    assert_eq!(d.stats().view().spans_dropped, 0);
    // It panics: the 15 tool spans queued are lost, and counted.
    drop(release);
    wait_for(
        "the queue counted as dropped",
        Duration::from_secs(30),
        || async { (d.stats().view().spans_dropped == 15).then_some(()) },
    )
    .await;

    // What comes after is refused for its real reason, not as overloaded.
    let r = post_proto(http, &request("svc", spans(100, 4))).await;
    assert_eq!(r.status(), 503);
    let v = d.stats().view();
    assert_eq!((v.spans_stopped, v.spans_overloaded), (4, 0), "{v:?}");
    assert_eq!(v.refused_requests.stopped, 1);
    assert_eq!(v.spans_dropped, 15, "counted once");
    let ready = reqwest::get(format!("http://{admin}/readyz"))
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    // /metrics still serves the self-metrics; no tool series, whose counts stopped.
    let text = metrics(admin).await;
    assert!(!text.contains("toolsize_tool_calls_total{"), "{text}");
    assert_eq!(sample(&text, "toolsize_spans_dropped_total"), Some(15.0));
    assert_eq!(
        sample(
            &text,
            "toolsize_spans_refused_total{reason=\"aggregator_stopped\"}"
        ),
        Some(4.0)
    );
    assert_eq!(
        sample(
            &text,
            "toolsize_otlp_requests_refused_total{reason=\"aggregator_stopped\"}"
        ),
        Some(1.0)
    );

    // The shipped rule fires on the dropped spans...
    wait_for(
        "ToolsizeSpansRefused firing on spans dropped",
        Duration::from_secs(60),
        || async {
            let r = prom
                .query(
                    "ALERTS{alertname=\"ToolsizeSpansRefused\",alertstate=\"firing\",\
                     what=\"spans dropped\"}",
                )
                .await;
            (!r.is_empty()).then_some(())
        },
    )
    .await;
    // ... and every dashboard panel on the counter shows them.
    let dashboard = support::dashboard::load();
    let on_dropped: Vec<_> = support::dashboard::targets(&dashboard)
        .into_iter()
        .filter(|(_, _, expr, _)| expr.contains("toolsize_spans_dropped_total"))
        .collect();
    assert!(on_dropped.len() >= 2, "{on_dropped:?}");
    for (title, _, expr, _) in on_dropped {
        let q = support::dashboard::interpolate(&expr, "1m", "5m");
        let r = prom.query(&q).await;
        let value: f64 = r
            .first()
            .and_then(|s| s["value"][1].as_str())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        assert!(value > 0.0, "panel {title:?}: {q} gave {r:?}");
    }
    drop(prom);
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_alert_task_counts_every_match_it_could_not_raise() {
    let d = Daemon::start(&loopback_config()).await.unwrap();
    let (http, admin) = (d.otlp_http_addr, d.admin_addr);
    let count = |text: &str, outcome: &str| -> f64 {
        text.lines()
            .filter(|l| {
                l.starts_with("toolsize_alert_matches_total{")
                    && l.contains(&format!("outcome=\"{outcome}\""))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    // Alive: an over-ceiling result (default ceiling 16 KiB) is sent.
    let r = post_proto(http, &request("svc", vec![own_span(1, "fetch", 50_000)])).await;
    assert_eq!(r.status(), 200);
    let text = metrics(admin).await;
    assert!(count(&text, "sent") >= 1.0, "{text}");
    assert_eq!(count(&text, "engine_stopped"), 0.0);

    // Returns once the task has ended.
    d.inject(Fault::AlertTaskStops).await;
    // Three new tools over the ceiling: three new alerts, none can be raised.
    for (n, tool) in [(2, "a"), (3, "b"), (4, "c")] {
        let r = post_proto(http, &request("svc", vec![own_span(n, tool, 50_000)])).await;
        assert_eq!(r.status(), 200);
    }
    let text = metrics(admin).await;
    let over = |outcome: &str| {
        sample(
            &text,
            &format!(
                "toolsize_alert_matches_total{{alertname=\"ToolResultOverCeiling\",outcome=\"{outcome}\"}}"
            ),
        )
    };
    assert_eq!(over("engine_stopped"), Some(3.0), "{text}");
    assert_eq!((over("sent"), over("dropped")), (Some(1.0), Some(0.0)));
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_aggregator_reports_its_lost_final_snapshot_at_shutdown() {
    let dir = temp_dir("losses-snapshot");
    let mut config = toolsize::collector::Config::from_toml(&format!(
        "[store]\ndata_dir = {:?}\n",
        dir.to_str().unwrap()
    ))
    .unwrap();
    let loopback = loopback_config();
    config.otlp = loopback.otlp;
    config.admin = loopback.admin;
    // Alive: a clean shutdown writes its final snapshot.
    let d = Daemon::start(&config).await.unwrap();
    assert!(!d.shutdown().await.final_snapshot_failed());
    let d = Daemon::start(&config).await.unwrap();
    let r = post_proto(d.otlp_http_addr, &request("svc", spans(0, 3))).await;
    assert_eq!(r.status(), 200);
    let (release, after) = tokio::sync::oneshot::channel::<()>();
    d.inject(Fault::AggregatorPanicsAfter(after)).await;
    drop(release);
    let admin = d.admin_addr;
    wait_for("/readyz 503", Duration::from_secs(30), || async move {
        let r = reqwest::get(format!("http://{admin}/readyz")).await.ok()?;
        (r.status() == 503).then_some(())
    })
    .await;
    assert!(
        d.shutdown().await.final_snapshot_failed(),
        "the calls since the last snapshot are lost, and said so"
    );
}
