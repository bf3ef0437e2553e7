//! Real agent frameworks, each traced by its own official OpenTelemetry instrumentation and
//! driven by its own fake model (`tests/frameworks/run_agent.py`, installed from
//! `tests/requirements-frameworks.txt` by `scripts/test.sh`), export OTLP/HTTP to a daemon.
//!
//! Per tool call, matched by span id in `/api/v1/tools/{tool}`, the daemon's size equals the
//! bytes the framework handed to the model (read from the messages the fake model received),
//! within 1 %; failed calls are not sized; every tool has one series and nothing else does.
//! Run again with `OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT=1000` in the agent, the cut results are
//! flagged truncated upstream with the limit, under the daemon's default settings.
//!
//! The test prints the framework table of `docs/collector.md` and checks the document holds it.
//! In CI a missing framework fails the test.
#![cfg(feature = "collector")]

mod support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use support::collector::*;
use toolsize::collector::Daemon;

/// Frameworks run: (runner, virtualenv, label, the size rule the daemon applies to their tool
/// spans). The second virtualenv holds the frameworks whose OpenTelemetry pins clash with the
/// first's (`tests/requirements-frameworks2.txt`).
const FRAMEWORKS: &[(&str, &str, &str, &str)] = &[
    (
        "pydantic_ai",
        VENV,
        "pydantic-ai 2.68.0 (own instrumentation, FunctionModel)",
        "`gen_ai.tool.call.result` as recorded",
    ),
    (
        "langchain",
        VENV,
        "LangChain core 1.7.2 + openinference-instrumentation-langchain 0.1.80 (GenericFakeChatModel)",
        "`output.value`: the ToolMessage's `content`",
    ),
    (
        "openai_agents",
        VENV,
        "OpenAI Agents SDK 0.24.0 + openinference-instrumentation-openai-agents 2.6.0 (scripted `Model`)",
        "`output.value` as recorded",
    ),
    (
        "vercel_ai",
        "",
        "Vercel AI SDK `ai` 6.0.326, `experimental_telemetry` (MockLanguageModelV3)",
        "`ai.toolCall.result`: the JSON string decoded",
    ),
    (
        "openllmetry",
        VENV2,
        "OpenLLMetry `traceloop-sdk` 0.62.4, its `@tool`/`@workflow` decorators (scripted model)",
        "`traceloop.entity.output`: the `json.dumps` string decoded (`\\uXXXX` escapes)",
    ),
    (
        "strands",
        VENV2,
        "Strands Agents 1.62.0, own tracing (scripted `Model`)",
        "`gen_ai.choice` event `message`: the texts of `[{\"text\": …}]`",
    ),
    (
        "google_adk",
        VENV2,
        "Google ADK 2.13.0, own tracing, content capture `SPAN_ONLY` (scripted `BaseLlm`)",
        "`gen_ai.tool.call.result`: the text of `{\"result\": …}`",
    ),
];

/// The virtualenvs `scripts/test.sh` makes under `target/`.
const VENV: &str = "frameworks-venv";
const VENV2: &str = "frameworks-venv2";

/// Agent calls per run: every 4th fails.
const CALLS: usize = 12;
/// The attribute value length limit set in the agent for the cut run.
const LIMIT: u64 = 1000;

/// The Python of virtualenv `venv`.
fn python(venv: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join(venv)
        .join("bin/python")
}

fn run_agent(
    framework: &str,
    venv: &str,
    endpoint: &str,
    service: &str,
    env: &[(&str, &str)],
) -> serde_json::Value {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/frameworks");
    // The TypeScript framework runs under node from its own directory (its node_modules).
    let (mut cmd, script) = if framework == "vercel_ai" {
        (Command::new("node"), format!("{dir}/run_agent.mjs"))
    } else {
        (Command::new(python(venv)), format!("{dir}/run_agent.py"))
    };
    let out = cmd
        .current_dir(dir)
        .args([
            script.as_str(),
            "--framework",
            framework,
            "--endpoint",
            endpoint,
            "--service",
            service,
            "--calls",
            &CALLS.to_string(),
        ])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "run_agent.py {framework} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The rows of `service` in `/api/v1/tools`, by tool.
async fn rows(admin: std::net::SocketAddr, service: &str) -> BTreeMap<String, serde_json::Value> {
    let table = tools(admin, "").await;
    table["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["service"] == service)
        .map(|r| (r["tool"].as_str().unwrap().to_string(), r.clone()))
        .collect()
}

/// The largest results of `tool` for `service`: span id → (bytes, truncated upstream).
async fn largest(
    admin: std::net::SocketAddr,
    service: &str,
    tool: &str,
) -> BTreeMap<String, (u64, bool)> {
    let v = get_json(admin, &format!("/api/v1/tools/{tool}?service={service}")).await;
    let series = v["series"].as_array().unwrap();
    assert_eq!(series.len(), 1, "{tool}: {v}");
    series[0]["largest"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["span_id"].as_str().unwrap().to_string(),
                (
                    l["bytes"].as_u64().unwrap(),
                    l["truncated_upstream"].as_bool().unwrap(),
                ),
            )
        })
        .collect()
}

/// Runs `fw` with whole results and checks, per call, the daemon's size against what the model
/// got, failed calls unsized and one series per tool; returns the worst error and the failed
/// calls.
async fn check_whole(
    d: &Daemon,
    fw: &str,
    venv: &str,
    endpoint: &str,
    service: &str,
    env: &[(&str, &str)],
) -> (f64, usize) {
    let got = run_agent(fw, venv, endpoint, service, env);
    let calls = got["calls"].as_array().unwrap();
    assert_eq!(calls.len(), CALLS, "{fw}: one tool span per call: {got}");
    if fw == "google_adk" {
        // One turn made two calls: ADK's `execute_tool (merged)` span was exported too.
        assert!(got["summary_spans"].as_u64() >= Some(1), "{fw}: {got}");
    }
    let by_tool = rows(d.admin_addr, service).await;
    let mut expected_tools: Vec<&str> = calls.iter().map(|c| c["tool"].as_str().unwrap()).collect();
    expected_tools.sort_unstable();
    expected_tools.dedup();
    assert_eq!(
        by_tool.keys().map(String::as_str).collect::<Vec<_>>(),
        expected_tools,
        "{fw}: one series per tool, no phantom"
    );
    let mut worst = 0.0f64;
    let mut failed = 0;
    for (tool, row) in &by_tool {
        let big = largest(d.admin_addr, service, tool).await;
        let mine: Vec<_> = calls
            .iter()
            .filter(|c| c["tool"] == tool.as_str())
            .collect();
        let fails = mine.iter().filter(|c| c["failed"] == true).count();
        failed += fails;
        assert_eq!(row["count"], mine.len() as u64, "{fw}/{tool} calls");
        assert_eq!(row["errors"], fails as u64, "{fw}/{tool} errors");
        assert_eq!(
            row["sized"],
            (mine.len() - fails) as u64,
            "{fw}/{tool}: failed calls unsized"
        );
        assert_eq!(row["truncated_upstream"], 0, "{fw}/{tool}");
        for c in mine {
            let span = c["span_id"].as_str().unwrap();
            if c["failed"] == true {
                assert!(
                    !big.contains_key(span),
                    "{fw}/{tool}: failed call {span} sized"
                );
                continue;
            }
            let handed = c["bytes"].as_u64().unwrap();
            let (bytes, _) = big
                .get(span)
                .unwrap_or_else(|| panic!("{fw}/{tool}: span {span} not among {big:?}"));
            let err = (*bytes as f64 - handed as f64).abs() / handed as f64;
            assert!(
                err <= 0.01,
                "{fw}/{tool} span {span}: daemon {bytes} B, model got {handed} B"
            );
            worst = worst.max(err);
        }
    }
    (worst, failed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_frameworks_sizes_are_what_the_model_got() {
    for (venv, modules) in [
        (
            VENV,
            "import pydantic_ai, langchain_core, openinference.instrumentation.langchain, agents",
        ),
        (VENV2, "import traceloop.sdk, strands, google.adk"),
    ] {
        if !require(python(venv).to_str().unwrap(), &["-c", modules]) {
            return;
        }
    }
    let ai = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/frameworks/node_modules/ai/package.json"
    );
    if !require("node", &["-e", &format!("require({ai:?})")]) {
        return;
    }
    let mut config = loopback_config();
    config.aggregation.largest_results = 4 * CALLS;
    let d = Daemon::start(&config).await.unwrap();
    let endpoint = format!("http://{}", d.otlp_http_addr);
    let mut table = String::from(
        "| framework | recognised | size rule | exactness | failed calls | SDK cut at 1,000 chars |\n|---|---|---|---|---|---|\n",
    );
    for &(fw, venv, label, rule) in FRAMEWORKS {
        // Whole results.
        let (worst, failed) =
            check_whole(&d, fw, venv, &endpoint, &format!("{fw}-whole"), &[]).await;
        if fw == "strands" {
            // With the latest GenAI conventions opted in, Strands also records the result in
            // `gen_ai.tool.call.result`, in the same content blocks.
            check_whole(
                &d,
                fw,
                venv,
                &endpoint,
                &format!("{fw}-latest"),
                &[(
                    "OTEL_SEMCONV_STABILITY_OPT_IN",
                    "gen_ai_latest_experimental",
                )],
            )
            .await;
        }

        // Cut by the SDK in the agent; the daemon is not told.
        let service = format!("{fw}-cut");
        let limit = LIMIT.to_string();
        let got = run_agent(
            fw,
            venv,
            &endpoint,
            &service,
            &[("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", &limit)],
        );
        let calls = got["calls"].as_array().unwrap();
        let by_tool = rows(d.admin_addr, &service).await;
        let mut cut = 0;
        let mut flagged = 0;
        let mut limits = Vec::new();
        for (tool, row) in &by_tool {
            let big = largest(d.admin_addr, &service, tool).await;
            for c in calls
                .iter()
                .filter(|c| c["tool"] == tool.as_str() && c["failed"] == false)
            {
                let handed = c["bytes"].as_u64().unwrap();
                let (bytes, up) = big[c["span_id"].as_str().unwrap()];
                // A result of more than LIMIT bytes may still fit in LIMIT characters only
                // when it is non-ASCII; these payloads have more characters than LIMIT then.
                if handed > LIMIT + LIMIT / 5 {
                    cut += 1;
                    flagged += usize::from(up);
                    assert!(bytes < handed, "{fw}/{tool}: cut result larger than whole");
                } else if handed <= LIMIT {
                    assert!(!up, "{fw}/{tool}: a whole result of {handed} B flagged");
                }
            }
            if let Some(l) = row.get("upstream_limit").and_then(|v| v.as_u64()) {
                limits.push(l);
            }
        }
        assert!(cut >= 4, "{fw}: the cut run cut {cut} results");
        assert_eq!(
            flagged, cut,
            "{fw}: {flagged} of {cut} cut results flagged (those before the limit was learned too)"
        );
        assert!(
            limits.contains(&LIMIT),
            "{fw}: inferred limit {LIMIT} not shown: {limits:?}"
        );
        let text = metrics(d.admin_addr).await;
        assert!(
            text.lines().any(|l| l.starts_with(&format!(
                "toolsize_tool_result_upstream_limit_chars{{service=\"{service}\""
            )) && l.ends_with(&format!(" {LIMIT}"))),
            "{fw}: limit not in /metrics"
        );
        table.push_str(&format!(
            "| {label} | {} of {} tool calls, no other series | {rule} | exact (worst {:.2} %) | {failed} of {failed} unsized | {flagged} of {cut} flagged, limit {LIMIT} inferred |\n",
            CALLS, CALLS, worst * 100.0,
        ));
    }
    println!("{table}");
    let doc = include_str!("../docs/collector.md");
    assert!(
        doc.contains(&table),
        "docs/collector.md must hold the table this test measured:\n{table}"
    );
    d.shutdown().await;
}

/// OpenLLMetry records a tool's dict result with Python's `json.dumps` default (`ensure_ascii`):
/// every accented, Greek, CJK and emoji character becomes a `\uXXXX` escape (two for an emoji),
/// +50 % to +90 % over the text the agent hands the model (`json.dumps(…, ensure_ascii=False)`,
/// as LangChain does). The daemon sizes each result as the model got it, within 1 %.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openllmetry_dict_results_with_non_ascii_text_are_sized_as_the_model_got_them() {
    if !require(
        python(VENV2).to_str().unwrap(),
        &["-c", "import traceloop.sdk"],
    ) {
        return;
    }
    let mut config = loopback_config();
    config.aggregation.largest_results = 4 * CALLS;
    let d = Daemon::start(&config).await.unwrap();
    let endpoint = format!("http://{}", d.otlp_http_addr);
    let (worst, failed) = check_whole(
        &d,
        "openllmetry_dict",
        VENV2,
        &endpoint,
        "openllmetry-dict",
        &[],
    )
    .await;
    assert_eq!(failed, CALLS / 4);
    println!(
        "openllmetry dict results: worst error {:.3} %",
        worst * 100.0
    );
    // Sized from content with the tracer's escapes removed, said to be approximate.
    let rows = rows(d.admin_addr, "openllmetry-dict").await;
    for (tool, row) in &rows {
        assert_eq!(row["unwrapped_approximate"], row["sized"], "{tool}: {row}");
    }
    d.shutdown().await;
}
