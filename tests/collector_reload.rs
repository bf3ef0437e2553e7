//! SIGHUP with the real `toolsize serve`: the configuration file is read again; an alert
//! rule's settings, the alert sinks and the layer stack take effect without a restart, the
//! aggregated state and the firing alerts stay (over-ceiling counts by layer id), a key that
//! needs a restart is named as such, a file that does not load (a bad stack too) is refused
//! with the daemon still serving, and SIGTERM still writes the final snapshot.
#![cfg(feature = "collector")]

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use support::collector::*;

/// An HTTP endpoint recording every JSON body posted to `/hook`.
async fn webhook() -> (std::net::SocketAddr, Arc<Mutex<Vec<serde_json::Value>>>) {
    let got: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
    let sink = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: String| {
            let sink = sink.clone();
            async move {
                sink.lock()
                    .unwrap()
                    .push(serde_json::from_str(&body).unwrap());
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, got)
}

/// The severity of the firing over-ceiling alert of `tool`, once it fires.
async fn severity_of(admin: std::net::SocketAddr, tool: &str) -> String {
    wait_for(
        &format!("{tool}'s alert"),
        Duration::from_secs(30),
        || async {
            let v = get_json(admin, "/api/v1/alerts").await;
            v["firing"].as_array().unwrap().iter().find_map(|a| {
                (a["labels"]["tool"] == tool)
                    .then(|| a["labels"]["severity"].as_str().unwrap().to_string())
            })
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_rules_and_sinks_and_keeps_the_state() {
    let dir = temp_dir("reload");
    let file = dir.join("toolsize.toml");
    let config = |extra: &str| format!("[alerts.over_ceiling]\nseverity = \"ticket\"\n{extra}");
    std::fs::write(&file, config("")).unwrap();
    let data = dir.join("data");
    let d = Logged::start(
        &[
            "--config",
            file.to_str().unwrap(),
            "--data-dir",
            data.to_str().unwrap(),
        ],
        &[("RUST_LOG", "info")],
    );
    let big = |n, tool| request("agent", vec![own_span(n, tool, 30_000)]);
    assert_eq!(post_proto(d.http, &big(1, "before")).await.status(), 200);
    assert_eq!(severity_of(d.admin, "before").await, "ticket");

    // A rule's setting and a sink changed: both in effect at once, the state kept.
    let (hook, got) = webhook().await;
    std::fs::write(
        &file,
        format!(
            "[alerts]\nwebhook_url = \"http://{hook}/hook\"\n[alerts.over_ceiling]\nseverity = \
             \"page\"\n[aggregation]\nmax_series = 50\n"
        ),
    )
    .unwrap();
    d.signal("-HUP");
    let line = d.line_with("Configuration reloaded (SIGHUP).").await;
    assert!(
        line.contains(r#"applied=["alerts.over_ceiling.severity", "alerts.webhook_url"]"#),
        "{line}"
    );
    assert!(
        line.contains(r#"restart_needed=["aggregation.max_series"]"#),
        "{line}"
    );
    let warn = d.line_with("take effect at the next restart").await;
    assert!(warn.contains("aggregation.max_series"), "{warn}");
    // The new webhook is sent what fires already, at once.
    let first = wait_for("the webhook", Duration::from_secs(30), || async {
        got.lock().unwrap().first().cloned()
    })
    .await;
    assert_eq!(first[0]["labels"]["tool"], "before", "{first}");
    // A new alert gets the new severity; the one firing before the reload still fires.
    assert_eq!(post_proto(d.http, &big(2, "after")).await.status(), 200);
    assert_eq!(severity_of(d.admin, "after").await, "page");
    assert_eq!(severity_of(d.admin, "before").await, "ticket");
    let tools = tools(d.admin, "").await;
    assert_eq!(
        tools["tools"].as_array().unwrap().len(),
        2,
        "state kept: {tools}"
    );

    // A file that does not load: refused, logged, the daemon serves on with what ran.
    std::fs::write(&file, "[alerts.over_ceiling\nseverity = ").unwrap();
    d.signal("-HUP");
    let refused = d.line_with("Configuration not reloaded").await;
    assert!(refused.contains("invalid config file"), "{refused}");
    let r = reqwest::get(format!("http://{}/healthz", d.admin))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(post_proto(d.http, &big(3, "later")).await.status(), 200);
    assert_eq!(severity_of(d.admin, "later").await, "page");

    // An unknown key: refused too, with its "did you mean".
    std::fs::write(&file, "[alerts.over_ceiling]\nseverty = \"x\"\n").unwrap();
    d.signal("-HUP");
    wait_for("the second refusal", Duration::from_secs(30), || async {
        let n = d
            .log()
            .lines()
            .filter(|l| l.contains("Configuration not reloaded"))
            .count();
        (n == 2).then_some(())
    })
    .await;
    assert!(
        d.log()
            .contains("did you mean `alerts.over_ceiling.severity`"),
        "{}",
        d.log()
    );

    // SIGTERM still stops it cleanly, with the final snapshot.
    let mut d = d;
    d.signal("-TERM");
    let st = d.child.wait().unwrap();
    assert!(st.success(), "exit {st}");
    assert!(data.join("toolsize-state.json").exists());
}

/// The value of the sample of `name` whose labels hold every one of `labels` (`k="v"`).
fn sample_with(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| labels.iter().all(|want| l.contains(want)))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// The over-ceiling counts and ceiling of `service`'s `tool` in `/metrics`.
async fn held(admin: std::net::SocketAddr, service: &str, tool: &str) -> (String, Option<f64>) {
    let text = metrics(admin).await;
    let (s, t) = (format!("service=\"{service}\""), format!("tool=\"{tool}\""));
    let mut over: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with("toolsize_tool_results_over_ceiling_total{"))
        .filter(|l| l.contains(&s) && l.contains(&t))
        .map(|l| {
            let layer = l
                .split("layer=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap();
            format!("{layer}={}", l.rsplit(' ').next().unwrap())
        })
        .collect();
    over.sort();
    let ceiling = sample_with(&text, "toolsize_tool_result_ceiling_bytes", &[&s, &t]);
    (over.join(","), ceiling)
}

/// The daemon's layer ids on `/api/v1/layers`.
async fn layer_ids(admin: std::net::SocketAddr) -> Vec<String> {
    let v = get_json(admin, "/api/v1/layers").await;
    v["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_layer_stack_and_keeps_counts_by_layer_id() {
    let dir = temp_dir("reload-stack");
    let file = dir.join("toolsize.toml");
    let custom = |name: &str, limit: u64| {
        format!("[[layers.custom]]\nname = \"{name}\"\nlimit = {limit}\nunit = \"bytes\"\n")
    };
    // `agent` is held to the daemon's stack (`old` weakest), `svc-b` to `default` alone.
    std::fs::write(
        &file,
        format!(
            "[layers]\nstack = [\"old\", \"default\"]\nceiling_bytes = 20000\n{}\
             [layers.services]\n\"svc-b\" = [\"default\"]\n",
            custom("old", 12_000)
        ),
    )
    .unwrap();
    let d = Logged::start(
        &["--config", file.to_str().unwrap()],
        &[("RUST_LOG", "info")],
    );
    let post = |service: &'static str, n, bytes| async move {
        let r = request(service, vec![own_span(n, "fetch", bytes)]);
        assert_eq!(post_proto(d.http, &r).await.status(), 200);
    };
    post("agent", 1, 15_000).await;
    post("svc-b", 2, 25_000).await;
    assert_eq!(
        held(d.admin, "agent", "fetch").await,
        ("default=0,old=1".to_string(), Some(12_000.0))
    );
    assert_eq!(
        held(d.admin, "svc-b", "fetch").await,
        ("default=1".to_string(), Some(20_000.0))
    );
    assert_eq!(layer_ids(d.admin).await, ["old", "default"]);

    // `old` removed, `default` moved to the front at 10,000 bytes, `mine` added.
    std::fs::write(
        &file,
        format!(
            "[layers]\nstack = [\"default\", \"mine\"]\nceiling_bytes = 10000\n{}\
             [layers.services]\n\"svc-b\" = [\"default\"]\n",
            custom("mine", 50_000)
        ),
    )
    .unwrap();
    d.signal("-HUP");
    let line = d.line_with("Configuration reloaded (SIGHUP).").await;
    assert!(line.contains(r#"restart_needed=[]"#), "{line}");
    assert!(line.contains("\"layers.stack\""), "{line}");
    let stack = d.line_with("Layer stack reloaded").await;
    assert!(stack.contains(r#"dropped=["old=1"]"#), "{stack}");
    assert!(stack.contains("series_moved=2"), "{stack}");
    assert_eq!(layer_ids(d.admin).await, ["default", "mine"]);
    // The ceilings changed at once; `default`'s count stayed, `old`'s went, `mine` starts at
    // zero.
    assert_eq!(
        held(d.admin, "agent", "fetch").await,
        ("default=0,mine=0".to_string(), Some(10_000.0))
    );
    assert_eq!(
        held(d.admin, "svc-b", "fetch").await,
        ("default=1".to_string(), Some(10_000.0))
    );
    let rows = tools(d.admin, "").await;
    let agent = rows["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["service"] == "agent")
        .unwrap()
        .clone();
    assert_eq!(agent["ceiling"]["bytes"], 10_000, "{agent}");
    assert_eq!(agent["count"], 1, "state kept: {agent}");
    // What arrives now is held to the new stack, and alerts name its layer.
    post("agent", 3, 15_000).await;
    assert_eq!(
        held(d.admin, "agent", "fetch").await,
        ("default=1,mine=0".to_string(), Some(10_000.0))
    );
    wait_for("the alert on default", Duration::from_secs(30), || async {
        let v = get_json(d.admin, "/api/v1/alerts").await;
        v["firing"].as_array().unwrap().iter().find_map(|a| {
            (a["labels"]["service"] == "agent" && a["labels"]["layer"] == "default").then_some(())
        })
    })
    .await;

    // A stack that does not resolve: the file is refused, the stack in effect kept.
    std::fs::write(&file, "[layers]\nstack = [\"defualt\"]\n").unwrap();
    d.signal("-HUP");
    let refused = d.line_with("Configuration not reloaded").await;
    assert!(refused.contains("unknown layer id"), "{refused}");
    assert_eq!(layer_ids(d.admin).await, ["default", "mine"]);
    assert_eq!(
        held(d.admin, "agent", "fetch").await,
        ("default=1,mine=0".to_string(), Some(10_000.0))
    );
}
