//! `/metrics` passes the real `promtool check metrics`, carries the documented metric names, and its
//! self-metrics account for every span.
#![cfg(feature = "collector")]

mod support;

use support::collector::*;
use toolsize::collector::read::names::FAMILIES;
use toolsize::collector::Daemon;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_pass_promtool_and_account_for_every_span() {
    let d = Daemon::start(&loopback_config()).await.unwrap();
    let mut spans: Vec<_> = (0..50)
        .map(|n| own_span(n, "grep", 20_000 + n as i64))
        .collect();
    spans.push(span(
        99,
        "chat gpt",
        vec![s("gen_ai.operation.name", "chat")],
    ));
    // Label values that need escaping.
    spans.push(own_span(100, "we\"ird\\name", 5));
    assert!(post_proto(d.otlp_http_addr, &request("svc \"a\"", spans))
        .await
        .status()
        .is_success());
    let text = metrics(d.admin_addr).await;

    for n in [
        "toolsize_tool_calls_total",
        "toolsize_tool_results_truncated_total",
        "toolsize_spans_accepted_total",
        "toolsize_series_overflow_total",
    ] {
        assert!(FAMILIES.contains(&n), "{n}");
        assert!(text.contains(&format!("# TYPE {n} counter")), "{n}");
    }
    // Every family the daemon writes is in the list the drift tests read, and the other way
    // round: all but the snapshot's age, interval and write time, written with a data directory
    // (none here), and the write-ahead log's, written with the log on.
    let written: std::collections::BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.split(' ').next())
        .collect();
    let listed: std::collections::BTreeSet<&str> = FAMILIES.iter().copied().collect();
    assert!(
        written.is_subset(&listed),
        "{:?}",
        written.difference(&listed)
    );
    assert_eq!(
        listed.difference(&written).copied().collect::<Vec<_>>(),
        [
            "toolsize_snapshot_age_seconds",
            "toolsize_snapshot_interval_seconds",
            "toolsize_snapshot_write_seconds",
            "toolsize_wal_replay_seconds",
            "toolsize_wal_segments",
            "toolsize_wal_syncs_total"
        ]
    );
    assert!(text.contains("# TYPE toolsize_tool_result_size_bytes histogram"));
    assert!(text.contains("# TYPE toolsize_tool_call_duration_seconds histogram"));
    let l = r#"service="svc \"a\"",tool="grep""#;
    assert_eq!(
        sample(&text, &format!("toolsize_tool_calls_total{{{l}}}")),
        Some(50.0)
    );
    assert_eq!(
        sample(
            &text,
            &format!("toolsize_tool_result_size_bytes_bucket{{{l},le=\"16384\"}}")
        ),
        Some(0.0)
    );
    assert_eq!(
        sample(
            &text,
            &format!("toolsize_tool_result_size_bytes_bucket{{{l},le=\"20480\"}}")
        ),
        Some(50.0)
    );
    // 90 % of the default 16,384-byte ceiling is a bound too.
    assert_eq!(
        sample(
            &text,
            &format!("toolsize_tool_result_size_bytes_bucket{{{l},le=\"14745\"}}")
        ),
        Some(0.0)
    );
    assert_eq!(
        sample(
            &text,
            &format!("toolsize_tool_result_size_bytes_bucket{{{l},le=\"+Inf\"}}")
        ),
        Some(50.0)
    );
    assert_eq!(
        sample(
            &text,
            &format!("toolsize_tool_result_size_bytes_sum{{{l}}}")
        ),
        Some((0..50).map(|n| 20_000.0 + n as f64).sum())
    );
    assert_eq!(
        sample(&text, "toolsize_spans_accepted_total{kind=\"tool\"}"),
        Some(51.0)
    );
    assert_eq!(
        sample(&text, "toolsize_spans_accepted_total{kind=\"other\"}"),
        Some(1.0)
    );
    assert_eq!(sample(&text, "toolsize_series"), Some(2.0));
    assert!(sample(
        &text,
        &format!("toolsize_tool_result_size_p95_bytes{{{l},window=\"5m\"}}")
    )
    .is_some());

    if require("promtool", &["--version"]) {
        promtool_check(&text)
            .unwrap_or_else(|e| panic!("promtool check metrics failed:\n{e}\n{text}"));
    }
    d.shutdown().await;
}

#[test]
fn a_missing_peer_fails_the_test() {
    if missing_peers_allowed() {
        // The skip path is the one under test elsewhere; nothing to check here.
        assert!(!require("toolsize-test-no-such-peer", &[]));
        return;
    }
    let r = std::panic::catch_unwind(|| require("toolsize-test-no-such-peer", &[]));
    assert!(r.is_err(), "a missing peer must fail, not skip");
}
