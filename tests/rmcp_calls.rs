//! A real rmcp server called by a real rmcp client (in process, over a byte pipe), exported with
//! opentelemetry-otlp to a `toolsize serve` on loopback: with rmcp's own telemetry alone the
//! daemon hears no call; with toolsize's one line on the server, or on the client, it counts
//! every call once, sizes each exactly (the bytes of the `result` the client received), and
//! counts the tool error and the JSON-RPC error as errors; with a guard, the 40,000-byte result
//! reaches the client cut, refused or spilled (the whole text in the store) within the limit,
//! and the daemon sees it truncated.
#![cfg(all(feature = "rmcp", feature = "collector"))]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer, ServiceError};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use support::collector::*;
use toolsize::collector::Daemon;
use toolsize::guard::{CeilingGuard, Policy};
use toolsize::rmcp::CallToolExt;

/// The large result's text, in bytes.
const BIG: usize = 40_000;
/// The guard's limit.
const LIMIT: u64 = 16_384;

/// The server's tools: a large page, a small lookup, a structured result, a tool error; any
/// other name is a JSON-RPC error.
#[derive(Clone)]
struct Tools;

impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let result = match request.name.as_ref() {
            "fetch_page" => CallToolResult::success(vec![ContentBlock::text("x".repeat(BIG))]),
            "lookup" => CallToolResult::success(vec![ContentBlock::text("found")]),
            "stats" => CallToolResult::structured(json!({"rows": 3, "mean": 1.5})),
            "flaky" => CallToolResult::error(vec![ContentBlock::text("upstream said no")]),
            "slow" => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                CallToolResult::success(Vec::new())
            }
            "escaped" => CallToolResult::success(vec![
                ContentBlock::text("line \"one\"\n\ttwo \\ \u{1} é🦀 ".repeat(50)),
                ContentBlock::image("aGVsbG8=", "image/png"),
            ]),
            _ => return Err(ErrorData::invalid_params("no such tool", None)),
        };
        Ok(result.into())
    }
}

/// Where toolsize's line goes.
#[derive(Clone)]
enum Line {
    /// Nowhere: rmcp's own telemetry alone.
    None,
    /// On the server, with an optional guard.
    Server(Option<CeilingGuard>),
    /// On the client, with an optional guard.
    Client(Option<CeilingGuard>),
}

/// The six calls the client makes, in order.
fn script() -> Vec<(&'static str, Value)> {
    vec![
        ("fetch_page", json!({"url": "https://example.com/big"})),
        ("lookup", json!({"q": "a"})),
        ("lookup", json!({"q": "b"})),
        ("stats", json!({})),
        ("flaky", json!({"n": 1})),
        ("missing", json!({})),
    ]
}

type Answer = Result<CallToolResult, ServiceError>;

/// Serves `Tools` and runs the script from a client, exporting as `service` to the daemon.
fn run(grpc: std::net::SocketAddr, service: &str, line: Line) -> Vec<Answer> {
    support::exported(grpc, service, session(line))
}

async fn session(line: Line) -> Vec<Answer> {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let server_line = line.clone();
    let server = tokio::spawn(async move {
        match server_line {
            Line::Server(guard) => {
                let mut service = toolsize::rmcp::instrument(Tools);
                if let Some(g) = guard {
                    service = service.guard(g);
                }
                let running = service.serve(server_io).await.unwrap();
                let _ = running.waiting().await;
            }
            _ => {
                let running = Tools.serve(server_io).await.unwrap();
                let _ = running.waiting().await;
            }
        }
    });
    let client = ().serve(client_io).await.unwrap();
    let mut answers = Vec::new();
    for (tool, args) in script() {
        let Value::Object(args) = args else {
            unreachable!()
        };
        let params = CallToolRequestParams::new(tool).with_arguments(args);
        let answer = match &line {
            Line::Client(Some(g)) => client.call_tool_guarded(params, g).await,
            Line::Client(None) => client.call_tool_sized(params).await,
            _ => client.call_tool(params).await,
        };
        answers.push(answer);
    }
    client.cancel().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .unwrap()
        .unwrap();
    answers
}

/// The bytes of a result as the client holds it, as JSON.
fn bytes(r: &CallToolResult) -> u64 {
    serde_json::to_vec(r).unwrap().len() as u64
}

/// Checks the daemon heard every call once, each sized as the client received it.
fn check_unguarded(rows: &BTreeMap<String, Value>, answers: &[Answer]) {
    let ok = |i: usize| answers[i].as_ref().unwrap();
    assert!(ok(0).content[0].as_text().unwrap().text.len() == BIG);
    let expect = [
        ("fetch_page", 1, 0, Some(bytes(ok(0)))),
        ("lookup", 2, 0, Some(bytes(ok(1)).max(bytes(ok(2))))),
        ("stats", 1, 0, Some(bytes(ok(3)))),
        ("flaky", 1, 1, None),
        ("missing", 1, 1, None),
    ];
    assert!(bytes(ok(0)) > BIG as u64);
    assert_eq!(ok(4).is_error, Some(true));
    assert!(matches!(answers[5], Err(ServiceError::McpError(_))));
    assert_eq!(rows.len(), expect.len(), "{rows:?}");
    for (tool, count, errors, max) in expect {
        let row = &rows[tool];
        assert_eq!(row["count"], count, "{tool}: {row}");
        assert_eq!(row["errors"], errors, "{tool}: {row}");
        assert_eq!(row["truncated"], 0, "{tool}: {row}");
        match max {
            Some(max) => {
                assert_eq!(row["max"], max, "{tool}: {row}");
                assert_eq!(row["measured"], count, "{tool}: sized in process: {row}");
            }
            None => assert_eq!(row["sized"], 0, "{tool}: a failure is not sized: {row}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_calls_heard_with_one_line() {
    let d = Daemon::start(&loopback_config()).await.unwrap();
    let grpc = d.otlp_grpc_addr;

    // rmcp's own telemetry alone: no span per call, nothing heard.
    let plain = tokio::task::spawn_blocking(move || run(grpc, "rmcp-plain", Line::None))
        .await
        .unwrap();
    assert_eq!(plain.len(), 6);

    let server = tokio::task::spawn_blocking(move || run(grpc, "rmcp-server", Line::Server(None)))
        .await
        .unwrap();
    let client = tokio::task::spawn_blocking(move || run(grpc, "rmcp-client", Line::Client(None)))
        .await
        .unwrap();
    check_unguarded(&rows_by_tool(d.admin_addr, "rmcp-server", 5).await, &server);
    check_unguarded(&rows_by_tool(d.admin_addr, "rmcp-client", 5).await, &client);
    let table = tools(d.admin_addr, "?window=5m").await;
    let plain_rows = table["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["service"] == "rmcp-plain")
        .count();
    assert_eq!(plain_rows, 0, "rmcp alone emits no tool span: {table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_guard_shapes_the_result_before_it_leaves() {
    let d = Daemon::start(&loopback_config()).await.unwrap();
    let grpc = d.otlp_grpc_addr;
    let guard = |policy| {
        CeilingGuard::builder()
            .max_output(LIMIT)
            .policy(policy)
            .build()
            .unwrap()
    };
    let cut = guard(Policy::Truncate);
    let server = tokio::task::spawn_blocking(move || {
        run(grpc, "rmcp-server-guard", Line::Server(Some(cut)))
    })
    .await
    .unwrap();
    let refuse = guard(Policy::Reject);
    let client = tokio::task::spawn_blocking(move || {
        run(grpc, "rmcp-client-guard", Line::Client(Some(refuse)))
    })
    .await
    .unwrap();

    // Cut on the server: the client receives at most the limit, marked, with the notice.
    let page = server[0].as_ref().unwrap();
    assert!(bytes(page) <= LIMIT, "{} > {LIMIT}", bytes(page));
    assert_ne!(page.is_error, Some(true));
    let notice = page.content.last().unwrap().as_text().unwrap().text.clone();
    let notice: Value = serde_json::from_str(&notice).unwrap();
    assert_eq!(notice["toolsize"]["code"], "RESULT_TRUNCATED", "{notice}");
    let original = notice["toolsize"]["original_bytes"].as_u64().unwrap();
    assert!(original > BIG as u64, "{notice}");
    // Refused on the client: the model is handed a tool error within the limit.
    let refused = client[0].as_ref().unwrap();
    assert_eq!(refused.is_error, Some(true));
    assert!(bytes(refused) <= LIMIT);
    let text = &refused.content[0].as_text().unwrap().text;
    assert!(text.contains("RESULT_TOO_LARGE"), "{text}");

    for (service, answers) in [
        ("rmcp-server-guard", &server),
        ("rmcp-client-guard", &client),
    ] {
        let rows = rows_by_tool(d.admin_addr, service, 5).await;
        let page = &rows["fetch_page"];
        assert_eq!(page["count"], 1, "{page}");
        assert_eq!(page["truncated"], 1, "{page}");
        assert_eq!(page["max"], bytes(answers[0].as_ref().unwrap()), "{page}");
        assert_eq!(rows["lookup"]["truncated"], 0);
        assert_eq!(rows["flaky"]["errors"], 1);
    }
}

/// The server's span, captured in process: `mcp.method.name` and `jsonrpc.request.id` (a
/// numeric id, as text), the hash of the arguments (as `toolsize::args_hash` gives it through
/// `Serialize`), and the size of the result as the client received it, escapes included.
#[test]
fn the_server_span_carries_the_mcp_attributes_the_hash_and_the_wire_size() {
    let capture = support::Capture::new();
    let args = json!({"q": "a \"quoted\" é", "n": 3, "z": [1.5, null], "a": {"k": true}});
    let Value::Object(map) = args.clone() else {
        unreachable!()
    };
    let received = capture.block_on(async move {
        let (client_io, server_io) = tokio::io::duplex(1 << 20);
        let server = tokio::spawn(async move {
            let running = toolsize::rmcp::instrument(Tools)
                .serve(server_io)
                .await
                .unwrap();
            let _ = running.waiting().await;
        });
        let client = ().serve(client_io).await.unwrap();
        let params = CallToolRequestParams::new("escaped").with_arguments(map);
        let received = client.call_tool(params).await.unwrap();
        client.cancel().await.unwrap();
        server.await.unwrap();
        received
    });
    let spans = capture.spans();
    let span = spans
        .iter()
        .find(|s| s.name == "execute_tool escaped")
        .expect("the server's span");
    assert_eq!(
        support::string(span, "mcp.method.name").as_deref(),
        Some("tools/call")
    );
    let id = support::string(span, "jsonrpc.request.id").expect("a request id, as text");
    assert!(id.parse::<i64>().is_ok(), "{id}");
    assert_eq!(
        support::string(span, "tool.args_hash"),
        Some(toolsize::args_hash::span_args_hash(&args).unwrap())
    );
    assert!(
        bytes(&received) > 50 * 30,
        "the text is escaped on the wire"
    );
    assert_eq!(
        support::int(span, "tool.result.bytes"),
        Some(bytes(&received) as i64)
    );
}

/// A call dropped before its answer (as rmcp drops it when the client cancels it or goes away)
/// ends cancelled, its span still carrying the MCP attributes. A future dropped before its first
/// poll (the handler never ran; rmcp polls it as soon as it is made) opens no span.
#[test]
fn a_dropped_server_call_ends_cancelled_with_its_mcp_attributes() {
    use rmcp::model::{CallToolRequest, ClientRequest, NumberOrString};
    use rmcp::Service;
    let capture = support::Capture::new();
    let answered = capture.block_on(async {
        // A peer for the request's context, from a served pair kept open meanwhile.
        let (client_io, server_io) = tokio::io::duplex(1 << 16);
        let (peer_tx, peer_rx) = tokio::sync::oneshot::channel();
        let server = tokio::spawn(async move {
            let running = Tools.serve(server_io).await.unwrap();
            let _ = peer_tx.send(running.peer().clone());
            let _ = running.waiting().await;
        });
        let client = ().serve(client_io).await.unwrap();
        let peer = peer_rx.await.unwrap();
        let service = toolsize::rmcp::instrument(Tools);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new("slow"),
        ));
        let context = RequestContext::new(NumberOrString::Number(41), peer.clone());
        let answered = tokio::time::timeout(
            Duration::from_millis(50),
            service.handle_request(request, context),
        )
        .await
        .is_ok();
        let unpolled = ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new("unpolled"),
        ));
        let context = RequestContext::new(NumberOrString::Number(42), peer);
        drop(service.handle_request(unpolled, context));
        client.cancel().await.unwrap();
        server.await.unwrap();
        answered
    });
    assert!(!answered, "the slow tool was dropped before its answer");
    let spans = capture.spans();
    assert!(
        !spans.iter().any(|s| s.name == "execute_tool unpolled"),
        "a call never polled opens no span"
    );
    let span = spans
        .iter()
        .find(|s| s.name == "execute_tool slow")
        .expect("the dropped call's span");
    assert_eq!(
        support::string(span, "error.type").as_deref(),
        Some("cancelled")
    );
    assert_eq!(
        support::string(span, "mcp.method.name").as_deref(),
        Some("tools/call")
    );
    assert_eq!(
        support::string(span, "jsonrpc.request.id").as_deref(),
        Some("41")
    );
    assert_eq!(support::int(span, "tool.result.bytes"), None);
}
