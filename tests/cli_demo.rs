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
