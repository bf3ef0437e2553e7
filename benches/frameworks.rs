//! The added cost per call of the Rust framework wrappers (`toolsize::rig`, `toolsize::rmcp`,
//! `toolsize::swiftide`) against the library's `run_text`, on the same 4 KiB result and the same
//! arguments.
//!
//! Every case is a pair: the call bare (the framework's own path, unwrapped) and the same call
//! measured. The cost a case adds is `measured − bare`. All pairs run interleaved in one process,
//! in rounds: each round times every pair in short alternating blocks of calls (bare, measured,
//! measured, bare, …, about 60 µs each) and takes each side's median block, so a load that comes
//! and goes on a shared machine hits both sides of a pair and the `run_text` pair of the same
//! round alike, and a block the scheduler interrupted is left out. Per round, each wrapper's
//! added cost is divided by `run_text`'s added cost of that round; the table prints the median
//! of those ratios over the rounds and their spread (lowest–highest), so one noisy round can
//! neither flatter nor wreck the figure. It also prints each case's added time itself (median
//! and spread over the rounds, in ns) and as a share of the bare call: the rmcp client's bare
//! call is a round trip of about 50 µs, whose noise is as large as the wrapper's own work, so
//! for it the added microseconds beside the round trip's say more than the ratio.
//!
//! - `run_text`: the bare call is the tool's closure; measured, `tool_call(..).args(..)
//!   .run_text(..)`.
//! - `rig tool`: a rig `ToolSet` with the tool, bare and wrapped by `toolsize::rig::sized`,
//!   called through rig's own dispatch (`ToolSet::execute`), outside a rig span: the wrapper
//!   opens toolsize's span itself.
//! - `rig tool (rig span)`: the same, inside a span shaped as rig's `execute_tool` span, opened
//!   on both sides: the wrapper writes its attributes to that span.
//! - `rig set`: the same set bare and through `toolsize::rig::sized_set`.
//! - `rmcp server`: one `tools/call` handed straight to the server service
//!   (`Service::handle_request`, no transport), bare and wrapped by `toolsize::rmcp::instrument`.
//! - `rmcp client`: one `tools/call` from an rmcp client to an rmcp server in process (over a
//!   byte pipe), rmcp's `call_tool` and `call_tool_sized`.
//! - `swiftide tool`: a swiftide tool invoked bare and wrapped by `toolsize::swiftide::sized`,
//!   outside a swiftide span.
//! - `run (MCP result)`: what the rmcp server wrapper records, written by hand with the library:
//!   the same `CallToolResult` made by a closure, bare and through `tool_call(..).args(..)
//!   .mcp(..).run(..)`, which sizes the result as the JSON `serde_json` makes of it.
//!
//! All go through one pipeline (tracing → tracing-opentelemetry, at INFO and above, the level
//! `toolsize::export` passes, without its choice of which spans it exports: the calls here open
//! no other span at INFO → SDK span → a processor that drops the finished span), on a
//! current-thread runtime.
//!
//! `cargo bench --features rig,rmcp,swiftide --bench frameworks` prints the table.
//! `-- --rounds N` sets the rounds (default 21); `-- --profile-time S --case NAME` runs only the
//! measured side of one case for S seconds (for `perf record` on the bench binary; with
//! `--bare`, its bare side; with `--calls N`, N calls instead, for counting instructions under
//! `valgrind --tool=callgrind`); `-- --sizes` prints the size of the rmcp server's future on each
//! side; `-- --result-bytes N` makes every case's result N bytes of text in place of 4,095.

#[path = "common/mod.rs"]
mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use rig_agent::tool::ToolSet;
use rig_core::tool::{PortableTool, ToolContext};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult, ClientRequest,
    ContentBlock, NumberOrString, ServerCapabilities, ServerConfig,
};
use rmcp::service::{Peer, RequestContext, RoleClient, RoleServer, RunningService};
use rmcp::{ErrorData, ServerHandler, Service, ServiceExt};
use serde::Deserialize;
use serde_json::{json, Value};
use swiftide_core::chat_completion::errors::ToolError;
use swiftide_core::chat_completion::{ToolCallBuilder, ToolOutput, ToolSpec};
use swiftide_core::AgentContext;
use toolsize::rmcp::CallToolExt as _;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Layer as _;

/// Rounds timed (after one untimed warm-up round), unless `--rounds` says otherwise.
const ROUNDS: usize = 21;

/// Blocks of calls per side of a pair per round.
const BLOCKS: usize = 41;

/// How long one block of calls runs (the calls per block are set from it): short enough that most
/// blocks run without the scheduler taking the core away.
const BLOCK: Duration = Duration::from_micros(60);

/// The result every case hands back: 4,095 bytes of text, or `--result-bytes N` bytes (the same
/// sentence repeated and cut to N).
fn result_text() -> String {
    const SENTENCE: &str = "Tool results pass through several layers; each may cut by bytes. ";
    let Some(bytes) = flag("--result-bytes") else {
        return SENTENCE.repeat(63);
    };
    let bytes: usize = bytes
        .parse()
        .expect("--result-bytes takes a number of bytes");
    let mut text = SENTENCE.repeat(bytes.div_ceil(SENTENCE.len()));
    text.truncate(bytes);
    text
}

fn args() -> Value {
    json!({"query": "ceilings of tool results", "limit": 10, "filters": ["docs", "guides"]})
}

#[derive(Deserialize)]
struct SearchArgs {
    #[allow(dead_code)]
    query: String,
}

#[derive(Clone)]
struct Search(String);

impl PortableTool for Search {
    const NAME: &'static str = "search";
    type Args = SearchArgs;
    type Output = String;
    type Error = std::io::Error;
    fn description(&self) -> String {
        "Searches.".into()
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"query": {"type": "string"}}})
    }
    async fn call(&self, _: SearchArgs) -> Result<String, std::io::Error> {
        Ok(self.0.clone())
    }
}

#[async_trait]
impl swiftide_core::Tool for Search {
    async fn invoke(
        &self,
        _: &dyn AgentContext,
        _: &swiftide_core::chat_completion::ToolCall,
    ) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(self.0.clone()))
    }
    fn name(&self) -> std::borrow::Cow<'_, str> {
        "search".into()
    }
    fn tool_spec(&self) -> ToolSpec {
        ToolSpec::builder()
            .name("search")
            .description("Searches.")
            .build()
            .unwrap()
    }
}

#[derive(Clone)]
struct Server(String);

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
    async fn call_tool(
        &self,
        _: CallToolRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(CallToolResult::success(vec![ContentBlock::text(self.0.clone())]).into())
    }
}

/// One call, run once per invocation.
type Run<'a> = Box<dyn FnMut() + 'a>;

/// A call bare and measured.
struct Case<'a> {
    name: &'static str,
    bare: Run<'a>,
    measured: Run<'a>,
    /// Calls per side per round.
    calls: u32,
}

/// A span shaped as rig-agent's own `execute_tool` span (its name and outcome field).
fn rig_like_span() -> tracing::Span {
    tracing::info_span!(
        "execute_tool",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = "search",
        gen_ai.tool.call.outcome = tracing::field::Empty
    )
}

fn case<'a>(name: &'static str, bare: Run<'a>, measured: Run<'a>) -> Case<'a> {
    Case {
        name,
        bare,
        measured,
        calls: 1,
    }
}

/// The cases, in the table's order; `run_text` first (every ratio divides by it).
fn cases<'a>(rt: &'a tokio::runtime::Runtime, fx: &'a Fixtures) -> Vec<Case<'a>> {
    let rig_call = |set: &'a ToolSet| -> Run<'a> {
        Box::new(move || {
            let args = fx.args_text.clone();
            let out = rt.block_on(set.execute("search", args, &mut ToolContext::default()));
            assert!(out.is_success());
            black_box(out);
        })
    };
    let rig_in_span = |set: &'a ToolSet| -> Run<'a> {
        Box::new(move || {
            let span = rig_like_span();
            let _in = span.enter();
            let args = fx.args_text.clone();
            let out = rt.block_on(set.execute("search", args, &mut ToolContext::default()));
            black_box(out);
        })
    };
    let handler = |wrapped: bool| -> Run<'a> {
        Box::new(move || {
            let p = CallToolRequestParams::new("search").with_arguments(fx.args_map.clone());
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(p));
            let context = RequestContext::new(NumberOrString::Number(1), fx.peer.clone());
            let answer = if wrapped {
                rt.block_on(fx.server_wrapped.handle_request(request, context))
            } else {
                rt.block_on(fx.server.handle_request(request, context))
            };
            black_box(answer.unwrap());
        })
    };
    let client = |sized: bool| -> Run<'a> {
        Box::new(move || {
            let p = CallToolRequestParams::new("search").with_arguments(fx.args_map.clone());
            let answer = if sized {
                rt.block_on(fx.client.call_tool_sized(p))
            } else {
                rt.block_on(fx.client.call_tool(p))
            };
            black_box(answer.unwrap());
        })
    };
    let swiftide = |tool: &'a dyn swiftide_core::Tool| -> Run<'a> {
        Box::new(move || {
            let out = rt.block_on(tool.invoke(&(), &fx.swiftide_call));
            black_box(out.unwrap());
        })
    };
    vec![
        case(
            "run_text",
            Box::new(|| {
                let text = &fx.text;
                black_box(black_box(|| Ok::<_, std::io::Error>(text.clone()))().unwrap());
            }),
            Box::new(|| {
                let text = &fx.text;
                let out = toolsize::tool_call("search")
                    .args(black_box(&fx.args))
                    .run_text(|| Ok::<_, std::io::Error>(text.clone()));
                black_box(out.unwrap());
            }),
        ),
        case("rig tool", rig_call(&fx.rig_plain), rig_call(&fx.rig_sized)),
        case(
            "rig tool (rig span)",
            rig_in_span(&fx.rig_plain),
            rig_in_span(&fx.rig_sized),
        ),
        case("rig set", rig_call(&fx.rig_plain), rig_call(&fx.rig_set)),
        case("rmcp server", handler(false), handler(true)),
        case("rmcp client", client(false), client(true)),
        case(
            "swiftide tool",
            swiftide(&fx.swiftide_plain),
            swiftide(&fx.swiftide_sized),
        ),
        case(
            "run (MCP result)",
            Box::new(|| {
                let result = || CallToolResult::success(vec![ContentBlock::text(fx.text.clone())]);
                black_box(black_box(|| Ok::<_, std::io::Error>(result()))().unwrap());
            }),
            Box::new(|| {
                let result = || CallToolResult::success(vec![ContentBlock::text(fx.text.clone())]);
                let mcp = toolsize::instrument::McpAttributes {
                    method: "tools/call",
                    request_id: "1",
                    ..Default::default()
                };
                let out = toolsize::tool_call("search")
                    .args(black_box(&fx.args))
                    .mcp(mcp)
                    .run(|| Ok::<_, std::io::Error>(result()));
                black_box(out.unwrap());
            }),
        ),
    ]
}

/// What the cases call: built once, outside every timing.
struct Fixtures {
    text: String,
    args: Value,
    args_text: String,
    args_map: serde_json::Map<String, Value>,
    rig_plain: ToolSet,
    rig_sized: ToolSet,
    rig_set: ToolSet,
    server: Server,
    server_wrapped: toolsize::rmcp::Instrumented<Server>,
    peer: Peer<RoleServer>,
    client: RunningService<RoleClient, ()>,
    /// Keeps the peer's connection open.
    peer_client: RunningService<RoleClient, ()>,
    swiftide_plain: Search,
    swiftide_sized: toolsize::swiftide::Sized<Search>,
    swiftide_call: swiftide_core::chat_completion::ToolCall,
}

impl Fixtures {
    fn new(rt: &tokio::runtime::Runtime) -> Self {
        let text = result_text();
        let args = args();
        let Value::Object(args_map) = args.clone() else {
            unreachable!()
        };
        let (peer, peer_client) = rt.block_on(server_peer());
        Fixtures {
            args_text: args.to_string(),
            rig_plain: ToolSet::from_tools(vec![Search(text.clone())]),
            rig_sized: ToolSet::from_tools(vec![toolsize::rig::sized(Search(text.clone()))]),
            rig_set: toolsize::rig::sized_set(ToolSet::from_tools(vec![Search(text.clone())])),
            server: Server(text.clone()),
            server_wrapped: toolsize::rmcp::instrument(Server(text.clone())),
            peer,
            client: rt.block_on(rmcp_pair(Server(text.clone()))),
            peer_client,
            swiftide_plain: Search(text.clone()),
            swiftide_sized: toolsize::swiftide::sized(Search(text.clone())),
            swiftide_call: ToolCallBuilder::default()
                .id("c1")
                .name("search")
                .args(args.to_string())
                .build()
                .unwrap(),
            text,
            args,
            args_map,
        }
    }

    fn close(self, rt: &tokio::runtime::Runtime) {
        rt.block_on(self.client.cancel()).unwrap();
        rt.block_on(self.peer_client.cancel()).unwrap();
    }
}

/// An rmcp client connected to `server` over an in-process byte pipe.
async fn rmcp_pair(server: Server) -> RunningService<RoleClient, ()> {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        let _ = server.serve(server_io).await.unwrap().waiting().await;
    });
    ().serve(client_io).await.unwrap()
}

/// A server's peer (the handle a request context carries), from a served pair kept running.
async fn server_peer() -> (Peer<RoleServer>, RunningService<RoleClient, ()>) {
    let (client_io, server_io) = tokio::io::duplex(1 << 16);
    let (peer_tx, peer_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let running = Server(String::new()).serve(server_io).await.unwrap();
        let _ = peer_tx.send(running.peer().clone());
        let _ = running.waiting().await;
    });
    let client = ().serve(client_io).await.unwrap();
    (peer_rx.await.unwrap(), client)
}

/// Nanoseconds per call of `calls` runs of `f`.
fn time(f: &mut Run<'_>, calls: u32) -> f64 {
    let start = Instant::now();
    for _ in 0..calls {
        f();
    }
    start.elapsed().as_nanos() as f64 / f64::from(calls)
}

/// One round: for every pair, [`BLOCKS`] short blocks of bare calls and of measured calls in
/// turn (which goes first flips every block); each side's time is the median of its blocks, so a
/// block the scheduler interrupted is left out. Returns (bare ns, measured ns) per case.
fn round(cases: &mut [Case<'_>]) -> Vec<(f64, f64)> {
    cases
        .iter_mut()
        .map(|c| {
            let (mut bare, mut measured) = (Vec::new(), Vec::new());
            for block in 0..BLOCKS {
                if block % 2 == 0 {
                    bare.push(time(&mut c.bare, c.calls));
                    measured.push(time(&mut c.measured, c.calls));
                } else {
                    measured.push(time(&mut c.measured, c.calls));
                    bare.push(time(&mut c.bare, c.calls));
                }
            }
            (median(bare), median(measured))
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// The value following `flag` on the command line.
fn flag(name: &str) -> Option<String> {
    let mut args = std::env::args().skip_while(|a| a != name);
    args.next()?;
    args.next()
}

/// Lowest and highest of `v`.
fn spread(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)))
}

/// The table: per case, the bare call, the added cost (median over the rounds and its
/// spread, in ns, and as a share of the bare call: for a call that is mostly a round trip, the
/// added time beside the round trip's), and the added cost divided by `run_text`'s added cost
/// of the same round (median and spread).
fn report(cases: &[Case<'_>], rounds: &[Vec<(f64, f64)>]) {
    let added = |r: &[(f64, f64)], i: usize| r[i].1 - r[i].0;
    println!(
        "{:<22}{:>10}{:>10}  {:<13}{:>8}{:>12}   {:<10}",
        "case", "bare ns", "added ns", "(spread)", "÷ bare", "÷ run_text", "spread"
    );
    for (i, c) in cases.iter().enumerate() {
        let bare = median(rounds.iter().map(|r| r[i].0).collect());
        let adds: Vec<f64> = rounds.iter().map(|r| added(r, i)).collect();
        let add = median(adds.clone());
        let (add_lo, add_hi) = spread(&adds);
        let ratios: Vec<f64> = rounds.iter().map(|r| added(r, i) / added(r, 0)).collect();
        let (lo, hi) = spread(&ratios);
        println!(
            "{:<22}{bare:>10.0}{add:>10.0}  {:<13}{:>7.0}%{:>11.2}×   {lo:.2}–{hi:.2}",
            c.name,
            format!("({add_lo:.0}–{add_hi:.0})"),
            100.0 * add / bare,
            median(ratios.clone()),
        );
    }
}

/// The size of the future each side of the rmcp server case makes (the bench moves it into
/// the runtime; rmcp moves it into the request's task).
fn print_sizes(fx: &Fixtures) {
    let request = || {
        let p = CallToolRequestParams::new("search").with_arguments(fx.args_map.clone());
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(p));
        let context = RequestContext::new(NumberOrString::Number(1), fx.peer.clone());
        (request, context)
    };
    let (r, c) = request();
    let bare = std::mem::size_of_val(&fx.server.handle_request(r, c));
    let (r, c) = request();
    let measured = std::mem::size_of_val(&fx.server_wrapped.handle_request(r, c));
    println!("rmcp server future: bare {bare} B, measured {measured} B");
}

fn main() {
    let provider = SdkTracerProvider::builder()
        .with_span_processor(common::Discard)
        .build();
    // At INFO and above, the level `toolsize::export` passes: rmcp logs every message it sends
    // and receives at DEBUG, whole, which no exporting pipeline of toolsize's formats.
    let subscriber = tracing_subscriber::registry().with(
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("bench"))
            .with_filter(tracing_subscriber::filter::LevelFilter::INFO),
    );
    let _default = tracing::subscriber::set_default(subscriber);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let fixtures = Fixtures::new(&rt);
    let mut cases = cases(&rt, &fixtures);
    if std::env::args().any(|a| a == "--sizes") {
        print_sizes(&fixtures);
        return;
    }
    if let Some(seconds) = flag("--profile-time") {
        let name = flag("--case").unwrap_or_else(|| "run_text".into());
        let case = cases
            .iter_mut()
            .find(|c| c.name == name)
            .expect("--case names a case of the table");
        let side = if std::env::args().any(|a| a == "--bare") {
            &mut case.bare
        } else {
            &mut case.measured
        };
        if let Some(calls) = flag("--calls") {
            // A fixed number of calls: the instructions a side adds per call are the difference
            // of two runs' counts (`valgrind --tool=callgrind`), the setup being the same.
            time(side, calls.parse().unwrap());
        } else {
            let until = Instant::now() + Duration::from_secs_f64(seconds.parse().unwrap());
            while Instant::now() < until {
                time(side, 100);
            }
        }
    } else {
        let rounds: usize = flag("--rounds").map_or(ROUNDS, |r| r.parse().unwrap());
        // Calibrate each case's calls per block, warming both sides.
        for c in &mut cases {
            let per_call = time(&mut c.bare, 50).max(time(&mut c.measured, 50));
            c.calls = (BLOCK.as_nanos() as f64 / per_call).clamp(1.0, 1e6) as u32;
        }
        round(&mut cases);
        let before = load();
        let timed: Vec<_> = (0..rounds).map(|_| round(&mut cases)).collect();
        println!(
            "{rounds} rounds; load average {before} before, {} after",
            load()
        );
        report(&cases, &timed);
    }
    drop(cases);
    fixtures.close(&rt);
}
