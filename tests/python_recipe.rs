//! The Python recipe of docs/collector.md ("The recipe") run as written: its `export` lines
//! (the endpoint pointed at a test daemon) and `opentelemetry-instrument python AGENT`, with
//! agents that hold no telemetry code but their framework's switch
//! (`tests/frameworks/recipes/`): LangChain (no switch: the OpenInference instrumentation is
//! loaded through its entry point) and pydantic-ai (`Agent.instrument_all()`). Every result is
//! sized exactly as the model was handed it, and the metrics exporter the recipe also starts is
//! acknowledged, not refused.
#![cfg(feature = "collector")]

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use support::collector::*;

const DOCS: &str = include_str!("../docs/collector.md");

/// The `export NAME=VALUE` lines of the recipe's block, and its command's last two words.
fn recipe() -> (Vec<(String, String)>, String) {
    let section = DOCS
        .split("### The recipe")
        .nth(1)
        .expect("docs/collector.md has \"### The recipe\"");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a sh block in it");
    let env = block
        .lines()
        .filter_map(|l| l.strip_prefix("export "))
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect();
    let run = block
        .lines()
        .find(|l| l.starts_with("opentelemetry-instrument "))
        .expect("the recipe runs opentelemetry-instrument")
        .to_string();
    (env, run)
}

fn venv_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/frameworks-venv/bin")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_recipe_traces_langchain_and_pydantic_ai() {
    let bin = venv_bin();
    let python = bin.join("python");
    let instrument = bin.join("opentelemetry-instrument");
    if !require(
        python.to_str().unwrap(),
        &[
            "-c",
            "import opentelemetry.distro, langchain_core, pydantic_ai",
        ],
    ) || !require(instrument.to_str().unwrap(), &["--version"])
    {
        return;
    }
    let (env, run) = recipe();
    assert_eq!(run, "opentelemetry-instrument python my_agent.py");
    for k in [
        "OTEL_SERVICE_NAME",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ] {
        assert!(env.iter().any(|(n, _)| n == k), "the recipe sets {k}");
    }
    let daemon = Binary::start_quiet("default", &[], None);
    let recipes = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/frameworks/recipes");
    for (agent, tool) in [("langchain", "fetch_page"), ("pydantic_ai", "search_docs")] {
        let mut cmd = Command::new(&instrument);
        for (k, v) in &env {
            let v = match k.as_str() {
                "OTEL_EXPORTER_OTLP_ENDPOINT" => format!("http://{}", daemon.http),
                "OTEL_SERVICE_NAME" => format!("{agent}-agent"),
                _ => v.clone(),
            };
            cmd.env(k, v);
        }
        // `python` as the recipe says, found on PATH in the virtualenv.
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = cmd
            .env("PATH", path)
            .arg("python")
            .arg(recipes.join(format!("{agent}_agent.py")))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{agent}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let handed: Vec<u64> = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(handed.len(), 3);
        let service = format!("{agent}-agent");
        let admin = daemon.admin;
        let row = wait_for(&format!("{agent}'s calls"), Duration::from_secs(30), || {
            let service = service.clone();
            async move {
                let v = tools(admin, &format!("?window=all&service={service}")).await;
                let row = v["tools"]
                    .as_array()?
                    .iter()
                    .find(|t| t["tool"] == tool)?
                    .clone();
                (row["count"] == 3).then_some(row)
            }
        })
        .await;
        assert_eq!(row["sized"], 3, "{agent}: {row}");
        assert_eq!(row["max"], *handed.iter().max().unwrap(), "{agent}: {row}");
        let detail = get_json(
            admin,
            &format!("/api/v1/tools/{tool}?window=all&service={service}"),
        )
        .await;
        let mut sizes: Vec<u64> = detail["series"][0]["largest"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["bytes"].as_u64().unwrap())
            .collect();
        sizes.sort_unstable();
        let mut want = handed.clone();
        want.sort_unstable();
        assert_eq!(sizes, want, "{agent}: every result sized as handed");
    }
    let text = metrics(daemon.admin).await;
    let metrics_accepted = sample(
        &text,
        r#"toolsize_otlp_requests_accepted_total{signal="metrics"}"#,
    )
    .unwrap_or(0.0);
    assert!(
        metrics_accepted >= 1.0,
        "the recipe's metrics exporter: {text}"
    );
    for reason in ["decode", "unsupported_media_type"] {
        let s = format!(r#"toolsize_otlp_requests_refused_total{{reason="{reason}"}}"#);
        assert_eq!(sample(&text, &s), Some(0.0), "{s}");
    }
    daemon.stop();
}
