//! `toolsize demo`: the real binary, its built-in agent feeding its own OTLP/HTTP listener; the
//! API has several tools, a firing alert and history within seconds.
#![cfg(feature = "collector")]

mod support;

use std::time::Duration;

use support::collector::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_fills_the_api_within_seconds() {
    let started = std::time::Instant::now();
    let demo = Binary::start_command("demo", &[], None, &[("RUST_LOG", "error")]);
    let tools = wait_for("three tools or more", Duration::from_secs(15), || async {
        let v = tools(demo.admin, "").await;
        let names: Vec<String> = v["tools"]
            .as_array()?
            .iter()
            .filter_map(|r| r["tool"].as_str().map(str::to_string))
            .collect();
        (names.len() >= 3).then_some(names)
    })
    .await;
    for t in ["search_orders", "fetch_page", "read_file", "list_files"] {
        assert!(tools.iter().any(|n| n == t), "{t} missing from {tools:?}");
    }
    let alert = wait_for("a firing alert", Duration::from_secs(15), || async {
        let a = get_json(demo.admin, "/api/v1/alerts").await;
        a["firing"].as_array()?.first().cloned()
    })
    .await;
    assert_eq!(
        alert["labels"]["alertname"], "ToolResultOverCeiling",
        "{alert}"
    );
    assert_eq!(alert["labels"]["tool"], "fetch_page");
    assert_eq!(alert["labels"]["service"], "demo-agent");
    eprintln!(
        "demo: {} tools and a firing alert {} ms after start",
        tools.len(),
        started.elapsed().as_millis()
    );
    let h = get_json(demo.admin, "/api/v1/tools/search_orders/history").await;
    let points = h["series"][0]["points"].as_array().unwrap();
    assert!(!points.is_empty(), "{h}");
    assert!(points[0]["count"].as_u64().unwrap() > 0);
    // Failed calls are counted, not sized.
    let row = tools_row(demo.admin, "read_file").await;
    assert!(row["count"].as_u64().unwrap() > row["sized"].as_u64().unwrap());
    // The windows its help names are those it runs with; the daemon's default is not one.
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_toolsize"))
        .args(["demo", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let line = help.lines().find(|l| l.contains("--window")).unwrap();
    let named = line
        .split("[default: ")
        .nth(1)
        .unwrap()
        .trim_end_matches(']');
    for w in named.split(", ") {
        let v = support::collector::tools(demo.admin, &format!("?window={w}")).await;
        assert_eq!(v["window"], w, "{line}: {v}");
    }
    let v = support::collector::tools(demo.admin, "?window=1h").await;
    assert!(v.get("error").is_some(), "1h is no window of the demo: {v}");
    demo.stop();
}

async fn tools_row(admin: std::net::SocketAddr, tool: &str) -> serde_json::Value {
    wait_for(
        "a failed read_file call",
        Duration::from_secs(15),
        || async {
            let v = tools(admin, "").await;
            let row = v["tools"]
                .as_array()?
                .iter()
                .find(|r| r["tool"] == tool)?
                .clone();
            (row["errors"].as_u64()? > 0).then_some(row)
        },
    )
    .await
}

/// The demo's own windows (10s, 2m) when none is set: the p95-jump alert it is built to show
/// fires within seconds of the synthetic deploy, not an hour later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_fires_the_p95_jump_alert_after_its_deploy() {
    // The alert compares the recent window (10s) with a baseline of at least 50 results
    // (`alerts.p95_jump.min_baseline`) in the 2m window's slots (24 s each: a fifth of it) that
    // ended before the recent window began. The demo sends 8 `search_orders` results a second,
    // so before the deploy it needs 10 s + one slot + 50 / 8 s ≈ 41 s, wherever the slots'
    // edges fall: 45 s.
    const DEPLOY_AFTER_SECS: u64 = 45;
    let started = std::time::Instant::now();
    let deploy_after = format!("{DEPLOY_AFTER_SECS}s");
    let demo = Binary::start_command(
        "demo",
        &["--deploy-after", &deploy_after],
        None,
        &[("RUST_LOG", "error")],
    );
    let v = tools(demo.admin, "").await;
    assert_eq!(v["windows"], serde_json::json!(["10s", "2m"]), "{v}");
    // The deploy, then the recent window filling with the new sizes: the alert is due within
    // one recent window (10 s) of the deploy; the wait allows six times that on a busy machine.
    let alert = wait_for(
        "ToolResultSizeP95Jump firing",
        Duration::from_secs(DEPLOY_AFTER_SECS + 60),
        || async {
            let a = get_json(demo.admin, "/api/v1/alerts").await;
            a["firing"]
                .as_array()?
                .iter()
                .find(|a| a["labels"]["alertname"] == "ToolResultSizeP95Jump")
                .cloned()
        },
    )
    .await;
    let at = started.elapsed();
    assert_eq!(alert["labels"]["tool"], "search_orders", "{alert}");
    assert!(
        at >= Duration::from_secs(DEPLOY_AFTER_SECS),
        "fired before the deploy: {at:?}"
    );
    eprintln!(
        "demo: ToolResultSizeP95Jump firing {} ms after start, {} ms after the deploy",
        at.as_millis(),
        at.as_millis() - u128::from(DEPLOY_AFTER_SECS) * 1000
    );
    demo.stop();

    // Windows set by a flag are kept.
    let demo = Binary::start_command(
        "demo",
        &["--window", "5m", "--window", "1h"],
        None,
        &[("RUST_LOG", "error")],
    );
    let v = tools(demo.admin, "").await;
    assert_eq!(v["windows"], serde_json::json!(["5m", "1h"]), "{v}");
    demo.stop();
}
