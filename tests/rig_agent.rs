//! A real rig agent (rig-agent 0.44, its OpenAI provider on the Chat Completions route) against a
//! fake OpenAI-compatible endpoint of the test's own on loopback, which scripts one turn of five
//! tool calls (a 40,000-byte result, a small one twice, a structured one, one that fails) and
//! records what the model was handed; spans go through tracing-opentelemetry and
//! opentelemetry-otlp to a `toolsize serve` on loopback.
//!
//! - rig's own telemetry alone, with `.record_content_telemetry(true)`: every call counted once,
//!   each size exactly what the model was handed, the failure an error (rig marks it only with
//!   `gen_ai.tool.call.outcome = error`), `chat` spans not counted.
//! - toolsize's line (`toolsize::rig::sized`), content recording off: the same counts and
//!   sizes, measured in process, latency from the tool's own work; the same with the whole tool
//!   set wrapped in one line (`toolsize::rig::sized_set`); with a guard, the model is
//!   handed the large result cut within the limit, and the daemon sees it truncated.
#![cfg(all(feature = "rig", feature = "collector"))]

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;

use rig_agent::tool::server::ToolServer;
use rig_agent::tool::ToolSet;
use rig_agent::AgentBuilder;
use rig_core::providers::openai::{OpenAIConfig, Route};
use rig_core::tool::PortableTool;
use serde::Deserialize;
use serde_json::{json, Value};
use support::collector::*;
use support::openai::{check, fake_openai, CALLS};
use toolsize::collector::Daemon;
use toolsize::guard::{CeilingGuard, Policy};

/// The large result, in bytes.
const BIG: usize = 40_000;
/// The guard's limit.
const LIMIT: u64 = 16_384;

#[derive(Debug)]
struct Failure(&'static str);

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for Failure {}

#[derive(Deserialize)]
struct Url {
    #[allow(dead_code)]
    url: String,
}

#[derive(Deserialize)]
struct Query {
    q: String,
}

#[derive(Deserialize)]
struct NoArgs {}

fn schema(props: Value) -> Value {
    json!({"type": "object", "properties": props})
}

struct FetchPage;
impl PortableTool for FetchPage {
    const NAME: &'static str = "fetch_page";
    type Args = Url;
    type Output = String;
    type Error = Failure;
    fn description(&self) -> String {
        "Fetches a page.".into()
    }
    fn parameters(&self) -> Value {
        schema(json!({"url": {"type": "string"}}))
    }
    async fn call(&self, _: Url) -> Result<String, Failure> {
        Ok("x".repeat(BIG))
    }
}

struct Lookup;
impl PortableTool for Lookup {
    const NAME: &'static str = "lookup";
    type Args = Query;
    type Output = String;
    type Error = Failure;
    fn description(&self) -> String {
        "Looks a word up.".into()
    }
    fn parameters(&self) -> Value {
        schema(json!({"q": {"type": "string"}}))
    }
    async fn call(&self, args: Query) -> Result<String, Failure> {
        Ok(format!("found {}", args.q))
    }
}

struct Stats;
impl PortableTool for Stats {
    const NAME: &'static str = "stats";
    type Args = NoArgs;
    type Output = Value;
    type Error = Failure;
    fn description(&self) -> String {
        "Counts rows.".into()
    }
    fn parameters(&self) -> Value {
        schema(json!({}))
    }
    async fn call(&self, _: NoArgs) -> Result<Value, Failure> {
        Ok(json!({"rows": 3, "mean": 1.5, "tags": ["a", "b"]}))
    }
}

struct Flaky;
impl PortableTool for Flaky {
    const NAME: &'static str = "flaky";
    type Args = NoArgs;
    type Output = String;
    type Error = Failure;
    fn description(&self) -> String {
        "Fails.".into()
    }
    fn parameters(&self) -> Value {
        schema(json!({}))
    }
    async fn call(&self, _: NoArgs) -> Result<String, Failure> {
        Err(Failure("upstream said no"))
    }
}

/// How the agent is instrumented.
#[derive(Clone, Copy, PartialEq)]
enum Line {
    /// rig's own telemetry, content recorded.
    RigOwn,
    /// toolsize's line, content not recorded.
    Toolsize,
    /// toolsize's line with a guard on the large result.
    Guarded,
    /// toolsize's line around the whole tool set, content not recorded.
    Set,
}

/// Runs the agent once, exporting as `service`; returns what the model was handed.
fn run(grpc: SocketAddr, service: &str, line: Line) -> BTreeMap<String, String> {
    let handed = support::exported(grpc, service, async {
        let (addr, handed) = fake_openai().await;
        let model = OpenAIConfig::new("test-key")
            .with_base_url(format!("http://{addr}/v1"))
            .with_route(Route::Chat)
            .client()
            .completion("fake");
        let builder = AgentBuilder::new(model).default_max_turns(4);
        let agent = match line {
            Line::RigOwn => builder
                .record_content_telemetry(true)
                .tool(FetchPage)
                .tool(Lookup)
                .tool(Stats)
                .tool(Flaky)
                .build(),
            Line::Toolsize | Line::Guarded => {
                let mut fetch = toolsize::rig::sized(FetchPage);
                if line == Line::Guarded {
                    let cut = CeilingGuard::builder()
                        .max_output(LIMIT)
                        .policy(Policy::Truncate)
                        .build()
                        .unwrap();
                    fetch = fetch.guard(cut);
                }
                builder
                    .tool(fetch)
                    .tool(toolsize::rig::sized(Lookup))
                    .tool(toolsize::rig::sized(Stats))
                    .tool(toolsize::rig::sized(Flaky))
                    .build()
            }
            Line::Set => {
                let mut tools = ToolSet::default();
                tools.add_tool(FetchPage);
                tools.add_tool(Lookup);
                tools.add_tool(Stats);
                tools.add_tool(Flaky);
                let handle = ToolServer::new().run();
                handle.add_tools(toolsize::rig::sized_set(tools));
                builder.tool_server_handle(handle).build()
            }
        };
        let answer = agent.prompt("Go.").await.unwrap();
        assert_eq!(answer.output(), "done");
        let h = handed.lock().unwrap().clone();
        h
    });
    assert_eq!(handed.len(), CALLS.len(), "{handed:?}");
    handed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rig_agent_heard_alone_and_with_one_line() {
    let d = Daemon::start(&loopback_config()).await.unwrap();
    let grpc = d.otlp_grpc_addr;

    let own = tokio::task::spawn_blocking(move || run(grpc, "rig-own", Line::RigOwn))
        .await
        .unwrap();
    assert_eq!(own["call_1"].len(), BIG);
    check(&rows_by_tool(d.admin_addr, "rig-own", 4).await, &own, false);

    let line = tokio::task::spawn_blocking(move || run(grpc, "rig-toolsize", Line::Toolsize))
        .await
        .unwrap();
    assert_eq!(line, own, "the line changes nothing the model is handed");
    check(
        &rows_by_tool(d.admin_addr, "rig-toolsize", 4).await,
        &line,
        true,
    );

    let set = tokio::task::spawn_blocking(move || run(grpc, "rig-set", Line::Set))
        .await
        .unwrap();
    assert_eq!(
        set, own,
        "the set's line changes nothing the model is handed"
    );
    check(&rows_by_tool(d.admin_addr, "rig-set", 4).await, &set, true);

    let guarded = tokio::task::spawn_blocking(move || run(grpc, "rig-guarded", Line::Guarded))
        .await
        .unwrap();
    let page = &guarded["call_1"];
    assert!(page.len() as u64 <= LIMIT, "{} > {LIMIT}", page.len());
    assert!(page.contains("toolsize: omitted"), "the cut is marked");
    let rows = rows_by_tool(d.admin_addr, "rig-guarded", 4).await;
    let row = &rows["fetch_page"];
    assert_eq!(row["max"], page.len() as u64, "{row}");
    assert_eq!(row["truncated"], 1, "{row}");
    assert_eq!(rows["lookup"]["max"], guarded["call_3"].len() as u64);
}
