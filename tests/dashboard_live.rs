//! The dashboard and the fleet rules against the real daemon and a real Prometheus:
//!
//! - drift: every metric and label that a dashboard query, a variable query, a legend or a
//!   rule names is one the daemon exports (or one Prometheus adds: `up`, `ALERTS`, `job`,
//!   `instance`);
//! - live: Prometheus scrapes the daemon every second and evaluates `alerts/toolsize.rules.yml`
//!   while traffic flows; then every dashboard query, its variables filled in as Grafana would
//!   (everything selected, then one service and one tool), returns data through Prometheus'
//!   HTTP API, and the over-ceiling fleet alert fires;
//! - meaning: with a daemon on a non-default stack and coding agents' series, each tool panel's
//!   value (ceiling line, quantiles, max, calls, errors, truncations, over-ceiling counts and
//!   layers) agrees with the API.
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
        // A model request in the trace of the round's first tool result, after it: the context
        // ledger's panels have a share and a cost to show.
        let first = spans[0].clone();
        *n += 1;
        let mut chat = span(
            *n,
            "chat model",
            vec![
                s("gen_ai.operation.name", "chat"),
                i("gen_ai.usage.input_tokens", 40_000),
            ],
        );
        chat.trace_id = first.trace_id;
        chat.start_time_unix_nano = first.end_time_unix_nano + 1_000_000;
        chat.end_time_unix_nano = chat.start_time_unix_nano + 2_000_000;
        spans.push(chat);
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
        Duration::from_secs(30),
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

/// The series of the meaning test: (service, tool, bytes of every result). `my-agent` is held
/// to the daemon's stack (`codex.tool-output.tokens`, not the default 16 KiB), `claude-code`
/// and `gemini-cli` to their coding agents' stacks; `fetch_page` is under the daemon's ceiling
/// but over the smallest limit of all the stacks the daemon knows, so a ceiling line drawn from
/// that smallest limit, or counts held to it, would differ from the API.
const MEANING: &[(&str, &str, i64)] = &[
    ("my-agent", "fetch_page", 30_000),
    ("my-agent", "dump", 60_000),
    ("my-agent", "lookup", 600),
    ("claude-code", "Bash", 45_000),
    ("claude-code", "Read", 3_000),
    ("gemini-cli", "fetch_page", 30_000),
];

/// The tool of [`MEANING`] that reports some results truncated.
const TRUNCATING: &str = "Read";

/// The tool of [`MEANING`] with failed calls.
const FAILING: &str = "lookup";

/// One panel target's query by panel title and refId.
fn target(d: &Value, title: &str, ref_id: &str) -> String {
    dashboard::targets(d)
        .into_iter()
        .find(|(t, r, _, _)| t == title && r == ref_id)
        .map(|(_, _, expr, _)| expr)
        .unwrap_or_else(|| panic!("no target {ref_id} on panel {title:?}"))
}

/// `expr` with one selection filled in, evaluated now: value by tool (or by `by` labels joined
/// with `/`).
async fn by_tool(
    prom: &Prometheus,
    expr: &str,
    service: &str,
    tool: &str,
) -> BTreeMap<String, f64> {
    let q = fill(
        expr,
        &[
            ("$service", service),
            ("$tool", tool),
            ("$__rate_interval", "10s"),
            ("$__range", "1m"),
            ("$__interval", "1s"),
        ],
    );
    prom.query(&q)
        .await
        .iter()
        .map(|s| {
            let m = s["metric"].as_object().unwrap();
            let key: Vec<&str> = ["tool", "layer"]
                .iter()
                .filter_map(|l| m.get(*l).and_then(Value::as_str))
                .collect();
            (key.join("/"), support::prometheus::sample_value(s).unwrap())
        })
        .collect()
}

/// The finite upper bounds of the histogram `family` in an exposition.
fn bucket_bounds(text: &str, family: &str) -> Vec<f64> {
    let prefix = format!("{family}_bucket{{");
    let mut b: Vec<f64> = text
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| l.split("le=\"").nth(1)?.split('"').next()?.parse().ok())
        .filter(|v: &f64| v.is_finite())
        .collect();
    b.sort_by(f64::total_cmp);
    b.dedup();
    b
}

/// The bucket `(lower, upper]` holding `v`.
fn bucket_of(bounds: &[f64], v: f64) -> (f64, f64) {
    let i = bounds.partition_point(|b| *b < v);
    (
        if i == 0 { 0.0 } else { bounds[i - 1] },
        bounds.get(i).copied().unwrap_or(f64::INFINITY),
    )
}

/// What the panels mean, not only that they return data: with a daemon on a non-default stack
/// and coding agents' series, each tool-level panel's value, run by a real Prometheus for one
/// service and one tool and for all services, agrees with the daemon's API: the ceiling line
/// is the ceiling the API holds each series to, p50/p95/p99 lie in the bucket of the API's,
/// the max is the API's max, calls, truncated and over-ceiling counts are the API's (within the
/// extrapolation of `increase`, and exactly none where the API has none), truncation and error
/// rates are non-zero exactly where the API counts some, and over-ceiling results are under the
/// API's layers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_panels_agree_with_the_api_on_a_non_default_stack() {
    if !support::prometheus::available() {
        return;
    }
    let d = Binary::start_quiet("codex.tool-output.tokens", &[], None);
    let dir = temp_dir("meaning");
    let prom = Prometheus::start(&dir, &[d.admin], &[]).await;
    prom.wait_targets_up().await;

    // One call per series first, scraped, then 12 s of traffic: `increase` then sees the
    // counters from their first values.
    let mut n = 0u64;
    let mut send = |per: u64| {
        let mut by_service: BTreeMap<&str, Vec<_>> = BTreeMap::new();
        for (service, tool, bytes) in MEANING {
            for k in 0..per {
                n += 1;
                let mut sp = own_span(n, tool, *bytes);
                // `Read` reports every fifth result truncated; `lookup` fails every fifth call.
                if *tool == TRUNCATING && k % 5 == 0 {
                    sp.attributes.retain(|a| a.key != "tool.result.truncated");
                    sp.attributes.push(kv(
                        "tool.result.truncated",
                        opentelemetry_proto::tonic::common::v1::any_value::Value::BoolValue(true),
                    ));
                }
                if *tool == FAILING && k % 5 == 4 {
                    sp = failed_span(n, tool);
                }
                by_service.entry(service).or_default().push(sp);
            }
        }
        by_service
    };
    for (service, spans) in send(1) {
        assert!(post_proto(d.http, &request(service, spans))
            .await
            .status()
            .is_success());
    }
    // Scraped: one call per series, however late a busy machine makes the scrape.
    let first = MEANING.len() as f64;
    wait_for(
        "Prometheus to scrape the first calls",
        Duration::from_secs(30),
        || async {
            let got = prom.scalar("sum(toolsize_tool_calls_total)").await?;
            (got == first).then_some(())
        },
    )
    .await;
    for _ in 0..12 {
        for (service, spans) in send(5) {
            assert!(post_proto(d.http, &request(service, spans))
                .await
                .status()
                .is_success());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let api = tools(d.admin, "?window=1h").await;
    // Until Prometheus has scraped the last call (however late a busy machine makes it).
    let total: u64 = api["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["count"].as_u64().unwrap())
        .sum();
    wait_for(
        "Prometheus to scrape the last call",
        Duration::from_secs(30),
        || async {
            let got = prom.scalar("sum(toolsize_tool_calls_total)").await?;
            (got == total as f64).then_some(())
        },
    )
    .await;
    let rows = api["tools"].as_array().unwrap().clone();
    let row = |service: &str, tool: &str| {
        rows.iter()
            .find(|r| r["service"] == service && r["tool"] == tool)
            .unwrap_or_else(|| panic!("no API row {service}/{tool}: {api}"))
            .clone()
    };
    let mut over: BTreeMap<(String, String), Vec<(String, f64)>> = BTreeMap::new();
    for (service, tool, _) in MEANING {
        let v = get_json(d.admin, &format!("/api/v1/tools/{tool}?service={service}")).await;
        let counts = v["series"][0]["over_ceiling"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["layer"].as_str().unwrap().to_string(),
                    c["count"].as_f64().unwrap(),
                )
            })
            .collect();
        over.insert((service.to_string(), tool.to_string()), counts);
    }
    let text = metrics(d.admin).await;
    let bounds = bucket_bounds(&text, "toolsize_tool_result_size_bytes");
    let seconds = bucket_bounds(&text, "toolsize_tool_call_duration_seconds");

    let dash = dashboard::load();
    const P95: &str = "p95 result size per tool, against the ceiling";
    const TABLE: &str = "Tools over the time range";
    const OVER: &str = "Results over the ceiling per tool and layer";
    const TRUNCATED: &str = "Truncated results per tool";
    const CALLS: &str = "Calls and errors per tool";
    const DURATION: &str = "p95 call duration per tool";
    let smallest = prom.scalar("min(toolsize_ceiling_bytes)").await.unwrap();
    let mut checked = 0;
    let mut differs_from_smallest = false;

    // Each selection: one service and one tool, then every service and one tool.
    let mut selections: Vec<(String, String)> = MEANING
        .iter()
        .map(|(s, t, _)| (s.to_string(), t.to_string()))
        .collect();
    let tools_sent: BTreeSet<&str> = MEANING.iter().map(|m| m.1).collect();
    selections.extend(tools_sent.iter().map(|t| (".*".to_string(), t.to_string())));
    for (service, tool) in &selections {
        let mine: Vec<&(&str, &str, i64)> = MEANING
            .iter()
            .filter(|m| m.1 == tool && (service == ".*" || m.0 == service))
            .collect();
        let rows: Vec<Value> = mine.iter().map(|m| row(m.0, m.1)).collect();
        let what = format!("service={service} tool={tool}");

        // The ceiling line: the lowest ceiling the API holds the selected series to.
        let want = rows
            .iter()
            .filter_map(|r| r["ceiling"]["bytes"].as_f64())
            .fold(f64::INFINITY, f64::min);
        let got = by_tool(&prom, &target(&dash, P95, "B"), service, tool).await;
        if want.is_finite() {
            assert_eq!(
                got.get(tool.as_str()),
                Some(&want),
                "{what}: ceiling line {got:?}"
            );
            differs_from_smallest |= want != smallest;
        } else {
            assert!(
                got.is_empty(),
                "{what}: a ceiling line the API lacks: {got:?}"
            );
        }
        // p95: the bucket of the API's p95 (histogram_quantile interpolates within a bucket).
        let api_p95 = rows
            .iter()
            .map(|r| r["p95"].as_f64().unwrap())
            .fold(0.0, f64::max);
        let got = by_tool(&prom, &target(&dash, P95, "A"), service, tool).await;
        let (lo, hi) = bucket_of(&bounds, api_p95);
        let v = got[tool.as_str()];
        assert!(
            v > lo && v <= hi,
            "{what}: p95 {v} not in ({lo}, {hi}] of the API's {api_p95}"
        );
        // The table's p50, p95 and p99: each in the bucket of the API's.
        for (ref_id, field) in [("B", "p50"), ("C", "p95"), ("D", "p99")] {
            let api_q = rows
                .iter()
                .map(|r| r[field].as_f64().unwrap())
                .fold(0.0, f64::max);
            let got = by_tool(&prom, &target(&dash, TABLE, ref_id), service, tool).await;
            let (lo, hi) = bucket_of(&bounds, api_q);
            let v = got[tool.as_str()];
            assert!(
                v > lo && v <= hi,
                "{what}: table {field} {v} not in ({lo}, {hi}] of the API's {api_q}"
            );
        }
        // Call duration: in the bucket of the API's p95 latency.
        let api_latency = rows
            .iter()
            .map(|r| r["latency_p95_ms"].as_f64().unwrap() / 1000.0)
            .fold(0.0, f64::max);
        let got = by_tool(&prom, &target(&dash, DURATION, "A"), service, tool).await;
        let (lo, hi) = bucket_of(&seconds, api_latency);
        let v = got[tool.as_str()];
        assert!(
            v > lo && v <= hi,
            "{what}: call duration {v} s not in ({lo}, {hi}] of the API's {api_latency} s"
        );
        // Max: the API's, exactly.
        let api_max = rows
            .iter()
            .map(|r| r["max"].as_f64().unwrap())
            .fold(0.0, f64::max);
        let got = by_tool(&prom, &target(&dash, TABLE, "E"), service, tool).await;
        assert_eq!(got.get(tool.as_str()), Some(&api_max), "{what}: max");
        // Calls and results over the ceiling: the API's counts, within what `increase`
        // extrapolates (the range starts between two scrapes).
        let close = |got: f64, want: f64| (got - want).abs() <= 0.15 * want + 0.5;
        let api_calls: f64 = rows.iter().map(|r| r["count"].as_f64().unwrap()).sum();
        let got = by_tool(&prom, &target(&dash, TABLE, "A"), service, tool).await;
        assert!(
            close(got[tool.as_str()], api_calls),
            "{what}: calls {got:?} against {api_calls}"
        );
        let api_over: BTreeMap<String, f64> = mine
            .iter()
            .flat_map(|m| over[&(m.0.to_string(), m.1.to_string())].clone())
            .fold(BTreeMap::new(), |mut acc, (layer, n)| {
                *acc.entry(layer).or_insert(0.0) += n;
                acc
            });
        let api_over_total: f64 = api_over.values().sum();
        let got = by_tool(&prom, &target(&dash, TABLE, "F"), service, tool).await;
        let v = got.get(tool.as_str()).copied().unwrap_or(0.0);
        if api_over_total == 0.0 {
            assert_eq!(v, 0.0, "{what}: over the ceiling, the API says none");
        } else {
            assert!(
                close(v, api_over_total),
                "{what}: over ceiling {v} against {api_over_total}"
            );
        }
        // Truncated results (the table's count; the panel's rate) and errors (the calls panel):
        // the API's, and none where the API has none.
        let api_truncated: f64 = rows.iter().map(|r| r["truncated"].as_f64().unwrap()).sum();
        let got = by_tool(&prom, &target(&dash, TABLE, "G"), service, tool).await;
        let v = got.get(tool.as_str()).copied().unwrap_or(0.0);
        if api_truncated == 0.0 {
            assert_eq!(v, 0.0, "{what}: truncated, the API says none");
        } else {
            assert!(
                close(v, api_truncated),
                "{what}: truncated {v} against {api_truncated}"
            );
        }
        let rate = by_tool(&prom, &target(&dash, TRUNCATED, "A"), service, tool).await;
        let v = rate.get(tool.as_str()).copied().unwrap_or(0.0);
        assert_eq!(v > 0.0, api_truncated > 0.0, "{what}: truncated rate {v}");
        let api_errors: f64 = rows.iter().map(|r| r["errors"].as_f64().unwrap()).sum();
        let rate = by_tool(&prom, &target(&dash, CALLS, "B"), service, tool).await;
        let v = rate.get(tool.as_str()).copied().unwrap_or(0.0);
        assert_eq!(
            v > 0.0,
            api_errors > 0.0,
            "{what}: error rate {v} against {api_errors}"
        );
        // The over-ceiling panel: results under the layers the API names.
        let got = by_tool(&prom, &target(&dash, OVER, "A"), service, tool).await;
        let layers: BTreeSet<String> = got
            .iter()
            .filter(|(_, v)| **v > 0.0)
            .map(|(k, _)| k.split_once('/').unwrap().1.to_string())
            .collect();
        let want: BTreeSet<String> = api_over
            .iter()
            .filter(|(_, n)| **n > 0.0)
            .map(|(l, _)| l.clone())
            .collect();
        assert_eq!(layers, want, "{what}: layers over the ceiling");
        checked += 1;
    }
    assert_eq!(checked, selections.len());
    // The selections reach a ceiling other than the smallest one: the old line
    // (min(toolsize_ceiling_bytes)) would have failed here.
    assert!(
        differs_from_smallest,
        "every ceiling equals the smallest {smallest}"
    );
    // Some series are over their ceiling, truncated or failing and some are not, so both
    // branches of each check ran.
    let any = |f: &str| rows.iter().any(|r| r[f].as_u64().unwrap() > 0);
    let all = |f: &str| rows.iter().all(|r| r[f].as_u64().unwrap() > 0);
    assert!(any("truncated") && !all("truncated") && any("errors") && !all("errors"));
    assert!(over.values().any(|c| c.iter().any(|(_, n)| *n > 0.0)));
    assert!(over.values().any(|c| c.iter().all(|(_, n)| *n == 0.0)));
    d.stop();
}
