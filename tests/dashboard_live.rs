//! The dashboard and the fleet rules against the real daemon and a real Prometheus:
//!
//! - drift: every metric and label that a dashboard query, a variable query, a legend or a
//!   rule names is one the daemon exports (or one Prometheus adds: `up`, `ALERTS`, `job`,
//!   `instance`);
//! - live: Prometheus scrapes the daemon every second and evaluates `alerts/toolsize.rules.yml`
//!   while traffic flows; then every dashboard query, its variables filled in as Grafana would
//!   (everything selected, then one service and one tool), returns data through Prometheus'
//!   HTTP API, and the over-ceiling fleet alert fires.
#![cfg(feature = "collector")]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use support::collector::*;
use support::dashboard;
use support::prometheus::Prometheus;
use support::queries::{drift, exported, fill, refs};

const RULES: &str = "alerts/toolsize.rules.yml";
const SERVICES: &[&str] = &["agent-a", "agent-b"];
const TOOLS: &[(&str, i64)] = &[("search", 3_000), ("fetch_page", 40_000), ("lookup", 600)];

/// A failed tool span (no size).
fn failed_span(n: u64, tool: &str) -> opentelemetry_proto::tonic::trace::v1::Span {
    let mut sp = span(
        n,
        &format!("execute_tool {tool}"),
        vec![
            s("gen_ai.operation.name", "execute_tool"),
            s("gen_ai.tool.name", tool),
            s("error.type", "timeout"),
        ],
    );
    sp.status = Some(opentelemetry_proto::tonic::trace::v1::Status {
        code: 2,
        ..Default::default()
    });
    sp
}

/// One round of traffic: every service calls every tool a few times (fetch_page over the
/// 10,000-byte ceiling, some results truncated, one failure), plus a tool span with a bad
/// span id that the daemon refuses.
async fn round(http: SocketAddr, n: &mut u64) {
    for service in SERVICES {
        let mut spans = Vec::new();
        for (tool, bytes) in TOOLS {
            for k in 0..5 {
                *n += 1;
                let mut sp = own_span(*n, tool, bytes + k * 97);
                if k == 0 {
                    sp.attributes.retain(|a| a.key != "tool.result.truncated");
                    sp.attributes.push(kv(
                        "tool.result.truncated",
                        opentelemetry_proto::tonic::common::v1::any_value::Value::BoolValue(true),
                    ));
                }
                spans.push(sp);
            }
            *n += 1;
            spans.push(failed_span(*n, tool));
        }
        *n += 1;
        let mut bad = own_span(*n, "search", 10);
        bad.span_id = vec![1, 2, 3];
        spans.push(bad);
        // A partial success: the bad span is refused, the others recorded.
        let r = post_proto(http, &request(service, spans)).await;
        assert!(r.status().is_success(), "{}", r.status());
    }
}

/// The daemon with a two-layer stack, its ceiling 10,000 bytes, and a data directory (the
/// snapshot metrics exist only with one).
fn daemon(name: &str) -> (Binary, support::Scratch) {
    let data = temp_dir(name);
    let b = Binary::start_quiet(
        "codex.tool-output.bytes-fallback,claude-code.mcp.max",
        &["--snapshot-interval", "1s"],
        Some(&data),
    );
    (b, data)
}

/// Every query the dashboard and the rules hold, with where it comes from.
fn all_queries(d: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = dashboard::targets(d)
        .into_iter()
        .map(|(title, ref_id, expr, _)| (format!("panel {title:?} {ref_id}"), expr))
        .collect();
    for (name, q) in dashboard::variable_queries(d) {
        out.push((format!("variable {name}"), q));
    }
    out
}

/// Label names the dashboard's legends name (`{{label}}`), by panel title.
fn legend_labels(d: &Value) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for p in dashboard::panels(d) {
        for t in p["targets"].as_array().into_iter().flatten() {
            let legend = t["legendFormat"].as_str().unwrap_or("");
            for part in legend.split("{{").skip(1) {
                let label = part.split("}}").next().unwrap_or("").trim().to_string();
                out.push((
                    dashboard::title(p).to_string(),
                    t["expr"].as_str().unwrap_or("").to_string(),
                    label,
                ));
            }
        }
    }
    out
}

/// The rules as Prometheus parsed them: (alert name, query, annotations).
async fn loaded_rules(prom: &Prometheus) -> Vec<(String, String, Value)> {
    prom.rules()
        .await
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().clone())
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["query"].as_str().unwrap().to_string(),
                r["annotations"].clone(),
            )
        })
        .collect()
}

type Exported = BTreeMap<String, BTreeSet<String>>;

/// Every drift problem of the dashboard, its legends and the rules, against `exported`.
fn problems(d: &Value, exported: &Exported, rules: &[(String, String, Value)]) -> Vec<String> {
    let mut out = Vec::new();
    for (what, q) in all_queries(d) {
        for p in drift(&q, exported) {
            out.push(format!("{what}: {p} in {q}"));
        }
    }
    for (title, expr, label) in legend_labels(d) {
        let r = refs(&expr);
        let on_result = r.labels.contains(&label)
            || r.metrics
                .iter()
                .any(|m| exported.get(m).is_some_and(|l| l.contains(&label)));
        if !on_result {
            out.push(format!(
                "panel {title:?}: legend label {label:?} is not in {expr}"
            ));
        }
    }
    for (name, q, annotations) in rules {
        for p in drift(q, exported) {
            out.push(format!("rule {name}: {p} in {q}"));
        }
        // `{{ $labels.x }}` in an annotation must be a label the result keeps: those of `by`
        // clauses when the query aggregates, else the series' own; and what label_replace
        // writes.
        let r = refs(q);
        let mut kept: BTreeSet<String> = r.kept.iter().chain(&r.written).cloned().collect();
        if r.kept.is_empty() {
            kept.extend(
                support::queries::TARGET_LABELS
                    .iter()
                    .map(|l| l.to_string()),
            );
            for m in &r.metrics {
                kept.extend(exported.get(m).into_iter().flatten().cloned());
            }
        }
        for text in annotations.as_object().into_iter().flatten() {
            for part in text.1.as_str().unwrap_or("").split("$labels.").skip(1) {
                let label: String = part
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !kept.contains(&label) {
                    out.push(format!(
                        "rule {name}: annotation {} uses $labels.{label}, which {q} does not keep",
                        text.0
                    ));
                }
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_and_rules_name_only_what_the_daemon_exports() {
    if !support::prometheus::available() {
        return;
    }
    let (d, _data) = daemon("drift-data");
    let mut n = 0;
    round(d.http, &mut n).await;
    // The alert task publishes on its own tick: wait for the firing gauge to move.
    // The alert task publishes on its own tick, the first snapshot comes after a second: wait
    // for the firing gauge to move and the snapshot age to appear.
    let text = wait_for(
        "a firing alert, a snapshot",
        Duration::from_secs(10),
        || async {
            let text = metrics(d.admin).await;
            let firing = text
                .lines()
                .any(|l| l.starts_with("toolsize_alerts_firing{") && !l.ends_with(" 0"));
            (firing && text.contains("\ntoolsize_snapshot_age_seconds ")).then_some(text)
        },
    )
    .await;
    let exported = exported(&text);
    // Prometheus parses the rules (a syntax error fails here) and hands back each query.
    let dir = temp_dir("drift");
    let prom = Prometheus::start(&dir, &[d.admin], &[PathBuf::from(RULES)]).await;
    let rules = loaded_rules(&prom).await;
    assert!(rules.len() >= 5, "rules loaded: {rules:?}");

    let dash = dashboard::load();
    let found = problems(&dash, &exported, &rules);
    assert!(found.is_empty(), "drift:\n{}", found.join("\n"));

    // The check itself catches a renamed metric, label, legend and annotation label.
    let caught = |d: &Value, e: &Exported, r: &[(String, String, Value)], what: &str| {
        let found = problems(d, e, r);
        assert!(found.iter().any(|p| p.contains(what)), "{what}: {found:?}");
    };
    let mut broken = exported.clone();
    broken.remove("toolsize_tool_result_size_bytes_bucket");
    caught(
        &dash,
        &broken,
        &rules,
        "toolsize_tool_result_size_bytes_bucket\" is not exported",
    );
    let mut broken = exported.clone();
    for labels in broken.values_mut() {
        labels.remove("tool");
    }
    caught(&dash, &broken, &rules, "label \"tool\"");
    let mut bad = dash.clone();
    let target = bad["panels"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find_map(|p| p["targets"].as_array_mut()?.first_mut())
        .unwrap();
    target["legendFormat"] = "{{no_such_label}}".into();
    caught(&bad, &exported, &rules, "legend label \"no_such_label\"");
    let mut bad_rules = rules.clone();
    bad_rules[0].2 = serde_json::json!({"summary": "{{ $labels.no_such_label }}"});
    caught(&dash, &exported, &bad_rules, "$labels.no_such_label");
    d.stop();
}

#[test]
fn the_reference_finder_sees_selectors_matchers_and_groupings() {
    let r = refs(
        r#"histogram_quantile(0.95, sum by (le, tool) (rate(toolsize_tool_result_size_bytes_bucket{service=~"$service", tool=~"a|b"}[$__rate_interval] offset 1h))) > on (tool) group_left min(toolsize_ceiling_bytes)"#,
    );
    assert_eq!(
        r.metrics,
        [
            "toolsize_ceiling_bytes",
            "toolsize_tool_result_size_bytes_bucket"
        ]
    );
    assert_eq!(r.labels, ["le", "service", "tool"]);
    assert_eq!(r.kept, ["le", "tool"]);
    let r = refs(r#"label_replace(sum by (instance) (x{a="1", b="2"}) > 0, "what", "v", "", "")"#);
    assert_eq!(r.written, ["what"]);
    assert_eq!(r.labels, ["a", "b", "instance"]);
    let r = refs(r#"label_values(toolsize_tool_calls_total{service=~"$service"}, tool)"#);
    assert_eq!(r.metrics, ["toolsize_tool_calls_total"]);
    assert_eq!(r.labels, ["service", "tool"]);
    let r = refs(
        r#"ALERTS{alertstate="firing"} or absent(up{job="toolsize"}) unless sum without (instance) (x)"#,
    );
    assert_eq!(r.metrics, ["ALERTS", "up", "x"]);
    assert_eq!(r.labels, ["alertstate", "instance", "job"]);
}

/// Runs `expr` as the panel would: a range query over the last 20 s for time series, an instant
/// query for tables and stats. `Err` with what came back when there is no data.
async fn run(prom: &Prometheus, expr: &str, instant: bool) -> Result<usize, String> {
    let result = if instant {
        prom.query(expr).await
    } else {
        prom.query_range(expr, 20).await
    };
    let points: usize = result
        .iter()
        .map(|s| s["values"].as_array().map_or(1, Vec::len))
        .sum();
    if points > 0 {
        Ok(points)
    } else {
        Err(format!("{result:?}"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_query_returns_data_from_a_real_prometheus() {
    if !support::prometheus::available() {
        return;
    }
    let (d, _data) = daemon("live-data");
    let dir = temp_dir("live");
    let prom = Prometheus::start(&dir, &[d.admin], &[PathBuf::from(RULES)]).await;
    prom.wait_targets_up().await;

    // 12 s of traffic: rates need two scrapes inside their window.
    let mut n = 0;
    for _ in 0..12 {
        round(d.http, &mut n).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    // The variables list what was sent.
    let dash = dashboard::load();
    for (name, q) in dashboard::variable_queries(&dash) {
        let q = fill(&q, &[("$service", ".*")]);
        let (selector, label) = q
            .trim()
            .strip_prefix("label_values(")
            .and_then(|r| r.strip_suffix(')'))
            .and_then(|r| r.rsplit_once(','))
            .unwrap_or_else(|| panic!("variable {name}: not label_values(selector, label): {q}"));
        let values = prom.label_values(selector.trim(), label.trim()).await;
        let want: Vec<&str> = match name.as_str() {
            "service" => SERVICES.to_vec(),
            "tool" => TOOLS.iter().map(|t| t.0).collect(),
            _ => continue,
        };
        for w in want {
            assert!(
                values.iter().any(|v| v == w),
                "variable {name}: {values:?} lacks {w}"
            );
        }
    }

    // The fleet over-ceiling rule fires (no `for`): ALERTS has it.
    let alerts = r#"ALERTS{alertname="ToolsizeResultOverCeiling", alertstate="firing"}"#;
    wait_for(
        "ToolsizeResultOverCeiling firing",
        Duration::from_secs(20),
        || async { (!prom.query(alerts).await.is_empty()).then_some(()) },
    )
    .await;

    let selections: [&[(&str, &str)]; 2] = [
        &[("$service", ".*"), ("$tool", ".*")],
        &[("$service", "agent-a"), ("$tool", "fetch_page")],
    ];
    let mut empty = Vec::new();
    let mut ran = 0;
    for (title, ref_id, expr, instant) in dashboard::targets(&dash) {
        for sel in selections {
            let mut vars = sel.to_vec();
            vars.extend([
                ("$__rate_interval", "10s"),
                ("$__range", "1m"),
                ("$__interval", "1s"),
            ]);
            let q = fill(&expr, &vars);
            ran += 1;
            match run(&prom, &q, instant).await {
                Ok(points) => eprintln!("{points:>5} points  {title} {ref_id}  {sel:?}"),
                Err(got) => empty.push(format!("{title} {ref_id} {sel:?}: {q} -> {got}")),
            }
        }
    }
    assert!(ran >= 20, "only {ran} queries");
    assert!(
        empty.is_empty(),
        "{} of {ran} dashboard queries returned no data:\n{}",
        empty.len(),
        empty.join("\n")
    );
    d.stop();
}
