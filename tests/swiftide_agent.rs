//! A real swiftide agent (swiftide-agents 0.32, swiftide's own OpenAI client on the Chat
//! Completions route) against the fake OpenAI-compatible endpoint of `support::openai`, which
//! scripts one turn of five tool calls (a 40,000-byte result, a small one twice, a structured
//! one, one that fails) and records what the model was handed; spans go through
//! tracing-opentelemetry and opentelemetry-otlp to a `toolsize serve` on loopback.
//!
//! - swiftide's own telemetry, as it is exported (every level): its tool spans are
//!   `tool.<name>` with no tool attribute; the result is only the text of a DEBUG event, and a
//!   failed call leaves no trace on its span. The daemon counts each call once, unsized, and
//!   cannot tell the failure.
//! - toolsize's line (`toolsize::swiftide::sized`, or `sized_box` around a tool box): every call
//!   counted once, each size exactly what the model was handed (measured in process), the
//!   failure an error; with a guard, the model is handed the large result cut within the limit,
//!   and the daemon sees it truncated.
#![cfg(all(feature = "swiftide", feature = "collector"))]

mod support;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::net::SocketAddr;

use async_trait::async_trait;
use opentelemetry::Value as OtelValue;
use serde_json::{json, Value};
use support::collector::*;
use support::openai::{check, fake_openai, CALLS};
use swiftide_agents::Agent;
use swiftide_core::chat_completion::errors::ToolError;
use swiftide_core::chat_completion::{ToolCall, ToolOutput, ToolSpec};
use swiftide_core::{AgentContext, Tool};
use swiftide_integrations::openai::{OpenAI, OpenAIConfig};
use toolsize::collector::Daemon;
use toolsize::guard::{CeilingGuard, Policy};

/// The large result, in bytes.
const BIG: usize = 40_000;
/// The guard's limit.
const LIMIT: u64 = 16_384;

/// One of the four tools the endpoint calls, by name.
#[derive(Clone)]
struct Scripted(&'static str);

#[async_trait]
impl Tool for Scripted {
    async fn invoke(&self, _: &dyn AgentContext, call: &ToolCall) -> Result<ToolOutput, ToolError> {
        let args: Value = serde_json::from_str(call.args().unwrap_or("{}"))?;
        match self.0 {
            "fetch_page" => Ok(ToolOutput::text("x".repeat(BIG))),
            "lookup" => Ok(ToolOutput::text(format!("found {}", args["q"]))),
            "stats" => Ok(ToolOutput::text(
                json!({"rows": 3, "mean": 1.5, "tags": ["a", "b"]}).to_string(),
            )),
            _ => Err(ToolError::unknown(anyhow::anyhow!("upstream said no"))),
        }
    }

    fn name(&self) -> Cow<'_, str> {
        self.0.into()
    }

    fn tool_spec(&self) -> ToolSpec {
        ToolSpec::builder()
            .name(self.0)
            .description(format!("The {} tool.", self.0))
            .build()
            .unwrap()
    }
}

fn tools() -> Vec<Box<dyn Tool>> {
    ["fetch_page", "lookup", "stats", "flaky"]
        .into_iter()
        .map(|name| Box::new(Scripted(name)) as Box<dyn Tool>)
        .collect()
}

/// How the agent is instrumented.
#[derive(Clone, Copy, PartialEq)]
enum Line {
    /// swiftide's own telemetry.
    Own,
    /// toolsize's line around each tool.
    Toolsize,
    /// toolsize's line around the tools as one tool box, with a guard.
    GuardedBox,
}

/// A swiftide agent talking to the fake endpoint at `addr`, its tools instrumented by `line`.
fn agent(addr: SocketAddr, line: Line) -> Agent {
    let config = OpenAIConfig::new()
        .with_api_base(format!("http://{addr}/v1"))
        .with_api_key("test-key");
    let llm = OpenAI::builder()
        .client(async_openai::Client::with_config(config))
        .default_prompt_model("fake")
        .build()
        .unwrap();
    let mut builder = Agent::builder();
    builder.llm(&llm);
    match line {
        Line::Own => builder.tools(tools()),
        Line::Toolsize => builder.tools(tools().into_iter().map(toolsize::swiftide::sized)),
        Line::GuardedBox => {
            let cut = CeilingGuard::builder()
                .max_output(LIMIT)
                .policy(Policy::Truncate)
                .build()
                .unwrap();
            builder.add_toolbox(toolsize::swiftide::sized_box_guarded(tools(), cut))
        }
    };
    builder.build().unwrap()
}

/// Runs the agent once, exporting as `service`; returns what the model was handed.
fn run(grpc: SocketAddr, service: &str, line: Line) -> BTreeMap<String, String> {
    let handed = support::exported(grpc, service, async {
        let (addr, handed) = fake_openai().await;
        agent(addr, line).query("Go.").await.unwrap();
        let h = handed.lock().unwrap().clone();
        h
    });
    assert_eq!(handed.len(), CALLS.len(), "{handed:?}");
    handed
}

/// What swiftide exports of a tool call, read from its real spans: a span named
/// `tool.<name>` with no tool attribute; the result only as the text of a DEBUG event
/// "Completed tool call" (`output`), which a failed call does not have.
#[test]
fn swiftide_tool_spans_carry_no_tool_attributes() {
    let capture = support::Capture::new();
    let handed = capture.block_on(async {
        let (addr, handed) = fake_openai().await;
        agent(addr, Line::Own).query("Go.").await.unwrap();
        let h = handed.lock().unwrap().clone();
        h
    });
    let spans = capture.spans();
    let tool_spans: Vec<_> = spans
        .iter()
        .filter(|s| s.name.starts_with("tool."))
        .collect();
    // What a reader of this test can compare with a newer swiftide (`--nocapture`): names and
    // keys only, never content.
    for s in &tool_spans {
        let keys: Vec<&str> = s.attributes.iter().map(|kv| kv.key.as_str()).collect();
        let events: Vec<&str> = s.events.iter().map(|e| e.name.as_ref()).collect();
        eprintln!("span {:?}: attributes {keys:?}, events {events:?}", s.name);
    }
    let mut names: Vec<&str> = tool_spans.iter().map(|s| s.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "tool.fetch_page",
            "tool.flaky",
            "tool.lookup",
            "tool.lookup",
            "tool.stats"
        ]
    );
    for s in &tool_spans {
        let gen_ai = s.attributes.iter().find(|kv| {
            kv.key.as_str().starts_with("gen_ai.") || kv.key.as_str().starts_with("tool.")
        });
        assert!(gen_ai.is_none(), "{}: {gen_ai:?}", s.name);
        let completed = s.events.iter().find(|e| e.name == "Completed tool call");
        let output = completed.and_then(|e| {
            e.attributes
                .iter()
                .find(|kv| kv.key.as_str() == "output")
                .map(|kv| kv.value.clone())
        });
        if s.name == "tool.flaky" {
            assert!(completed.is_none(), "a failure leaves no event");
            assert_eq!(
                s.status,
                opentelemetry::trace::Status::Unset,
                "nor a status"
            );
        } else if s.name == "tool.fetch_page" {
            let Some(OtelValue::String(text)) = output else {
                panic!("no output on {}", s.name)
            };
            assert_eq!(text.as_str(), handed["call_1"]);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swiftide_agent_heard_alone_and_with_one_line() {
    let d = Daemon::start(&loopback_config()).await.unwrap();
    let grpc = d.otlp_grpc_addr;

    let own = tokio::task::spawn_blocking(move || run(grpc, "swiftide-own", Line::Own))
        .await
        .unwrap();
    assert_eq!(own["call_1"].len(), BIG);
    let rows = rows_by_tool(d.admin_addr, "swiftide-own", 4).await;
    own_rows(&rows);

    let line = tokio::task::spawn_blocking(move || run(grpc, "swiftide-toolsize", Line::Toolsize))
        .await
        .unwrap();
    assert_eq!(line, own, "the line changes nothing the model is handed");
    check(
        &rows_by_tool(d.admin_addr, "swiftide-toolsize", 4).await,
        &line,
        true,
    );

    let guarded =
        tokio::task::spawn_blocking(move || run(grpc, "swiftide-guarded", Line::GuardedBox))
            .await
            .unwrap();
    let page = &guarded["call_1"];
    assert!(page.len() as u64 <= LIMIT, "{} > {LIMIT}", page.len());
    assert!(page.contains("toolsize: omitted"), "the cut is marked");
    let rows = rows_by_tool(d.admin_addr, "swiftide-guarded", 4).await;
    let row = &rows["fetch_page"];
    assert_eq!(row["max"], page.len() as u64, "{row}");
    assert_eq!(row["truncated"], 1, "{row}");
    assert_eq!(row["errors"], 0, "{row}");
    assert_eq!(rows["flaky"]["errors"], 1, "{rows:?}");
    assert_eq!(rows["lookup"]["max"], guarded["call_3"].len() as u64);
}

/// swiftide's own spans: every call counted once, none sized, the failure not told apart.
fn own_rows(rows: &BTreeMap<String, Value>) {
    assert_eq!(
        rows.keys().collect::<Vec<_>>(),
        ["fetch_page", "flaky", "lookup", "stats"],
        "{rows:?}"
    );
    for (tool, count) in [("fetch_page", 1), ("lookup", 2), ("stats", 1), ("flaky", 1)] {
        let row = &rows[tool];
        assert_eq!(row["count"], count, "{tool}: {row}");
        assert_eq!(row["sized"], 0, "{tool}: {row}");
        assert_eq!(row["errors"], 0, "{tool}: {row}");
    }
}
