//! The added cost per call of the Rust framework wrappers (`toolsize::rig`, `toolsize::rmcp`)
//! against the library's `run_text` on the same 4 KiB result and the same arguments.
//!
//! All cases go through one pipeline (tracing → tracing-opentelemetry → SDK span → a processor
//! that drops the finished span), on a current-thread runtime.
//!
//! - `run_text`: `tool_call(..).args(..).run_text(..)`, the library's own call.
//! - `rig_own_span`: a rig tool wrapped by `toolsize::rig::sized`, called outside a rig span:
//!   the wrapper opens toolsize's span itself.
//! - `rig_in_rig_span`: the same call inside a span shaped as rig's `execute_tool` span (opened
//!   in the case, as rig opens it): the wrapper writes its attributes to that span; the bare
//!   `rig_span_alone` case (the same span, the tool called unwrapped) is subtracted.
//! - `rmcp_plain` / `rmcp_wrapped`: one `tools/call` from an rmcp client to an rmcp server in
//!   process (over a byte pipe), without and with `toolsize::rmcp::instrument` on the server:
//!   their difference is the wrapper's added cost, within the noise of that round trip.
//! - `rmcp_handler_plain` / `rmcp_handler_wrapped`: the same `tools/call` handed straight to the
//!   server service (`Service::handle_request`, no transport), bare and wrapped: the wrapper's
//!   cost without the round trip's noise.
//!
//! `cargo bench --features rig,rmcp --bench frameworks` prints criterion's figures, then one
//! line per wrapper with its added cost per call and its ratio to `run_text`, read back from
//! criterion's estimates of this same run.

#[path = "common/mod.rs"]
mod common;

use std::hint::black_box;
use std::path::PathBuf;

use criterion::Criterion;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use rig_core::tool::{PortableTool, Tool, ToolContext};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult, ClientRequest,
    ContentBlock, NumberOrString, ServerCapabilities, ServerConfig,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, Service, ServiceExt};
use serde::Deserialize;
use serde_json::{json, Value};
use tracing_subscriber::layer::SubscriberExt;

/// The result every case hands back: 4 KiB of text.
fn result_text() -> String {
    "Tool results pass through several layers; each may cut by bytes. ".repeat(63)
}

fn args() -> Value {
    json!({"query": "ceilings of tool results", "limit": 10, "filters": ["docs", "guides"]})
}

#[derive(Deserialize)]
struct SearchArgs {
    #[allow(dead_code)]
    query: String,
}

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

fn bench(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let text = result_text();
    let args = args();
    let mut group = c.benchmark_group("frameworks");
    group.bench_function("run_text", |b| {
        b.iter(|| {
            let out = toolsize::tool_call("search")
                .args(black_box(&args))
                .run_text(|| Ok::<_, std::io::Error>(text.clone()));
            black_box(out.unwrap());
        })
    });
    let sized = toolsize::rig::sized(Search(text.clone()));
    group.bench_function("rig_own_span", |b| {
        b.iter(|| {
            let out = rt.block_on(sized.call(&mut ToolContext::default(), args.clone()));
            black_box(out.unwrap());
        })
    });
    let plain = Search(text.clone());
    group.bench_function("rig_span_alone", |b| {
        b.iter(|| {
            let span = rig_like_span();
            let _in = span.enter();
            let typed: SearchArgs = serde_json::from_value(args.clone()).unwrap();
            black_box(rt.block_on(PortableTool::call(&plain, typed)).unwrap());
        })
    });
    group.bench_function("rig_in_rig_span", |b| {
        b.iter(|| {
            let span = rig_like_span();
            let _in = span.enter();
            let out = rt.block_on(sized.call(&mut ToolContext::default(), args.clone()));
            black_box(out.unwrap());
        })
    });
    for (name, wrapped) in [("rmcp_plain", false), ("rmcp_wrapped", true)] {
        let client = rt.block_on(rmcp_pair(Server(text.clone()), wrapped));
        let Value::Object(a) = args.clone() else {
            unreachable!()
        };
        group.bench_function(name, |b| {
            b.iter(|| {
                let p = CallToolRequestParams::new("search").with_arguments(a.clone());
                black_box(rt.block_on(client.call_tool(p)).unwrap());
            })
        });
        rt.block_on(client.cancel()).unwrap();
    }
    let (peer, client) = rt.block_on(server_peer());
    let Value::Object(a) = args.clone() else {
        unreachable!()
    };
    let plain = Server(text.clone());
    let wrapped = toolsize::rmcp::instrument(Server(text.clone()));
    for (name, wrap) in [
        ("rmcp_handler_plain", false),
        ("rmcp_handler_wrapped", true),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let p = CallToolRequestParams::new("search").with_arguments(a.clone());
                let request = ClientRequest::CallToolRequest(CallToolRequest::new(p));
                let context = RequestContext::new(NumberOrString::Number(1), peer.clone());
                let answer = if wrap {
                    rt.block_on(wrapped.handle_request(request, context))
                } else {
                    rt.block_on(plain.handle_request(request, context))
                };
                black_box(answer.unwrap());
            })
        });
    }
    rt.block_on(client.cancel()).unwrap();
    group.finish();
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

async fn rmcp_pair(
    server: Server,
    wrapped: bool,
) -> rmcp::service::RunningService<rmcp::service::RoleClient, ()> {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    tokio::spawn(async move {
        if wrapped {
            let running = toolsize::rmcp::instrument(server).serve(server_io).await;
            let _ = running.unwrap().waiting().await;
        } else {
            let _ = server.serve(server_io).await.unwrap().waiting().await;
        }
    });
    ().serve(client_io).await.unwrap()
}

/// A server's peer (the handle a request context carries), from a served pair kept running.
async fn server_peer() -> (
    Peer<RoleServer>,
    rmcp::service::RunningService<rmcp::service::RoleClient, ()>,
) {
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

/// Criterion's mean estimate of `frameworks/{case}` in this run, in nanoseconds.
fn mean_ns(case: &str) -> Option<f64> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target/criterion/frameworks")
        .join(case)
        .join("new/estimates.json");
    let v: Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    v["mean"]["point_estimate"].as_f64()
}

fn main() {
    let provider = SdkTracerProvider::builder()
        .with_span_processor(common::Discard)
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("bench")));
    let _default = tracing::subscriber::set_default(subscriber);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c, &rt);
    c.final_summary();
    let Some(base) = mean_ns("run_text") else {
        return;
    };
    println!("run_text: {base:.0} ns per call");
    let added = [
        ("rig (own span)", mean_ns("rig_own_span"), Some(0.0)),
        (
            "rig (in rig's span)",
            mean_ns("rig_in_rig_span"),
            mean_ns("rig_span_alone"),
        ),
        (
            "rmcp (server)",
            mean_ns("rmcp_wrapped"),
            mean_ns("rmcp_plain"),
        ),
        (
            "rmcp (server, no transport)",
            mean_ns("rmcp_handler_wrapped"),
            mean_ns("rmcp_handler_plain"),
        ),
    ];
    for (name, with, without) in added {
        if let (Some(with), Some(without)) = (with, without) {
            let cost = with - without;
            println!(
                "{name}: {cost:.0} ns added per call, {:.2}x run_text",
                cost / base
            );
        }
    }
}
