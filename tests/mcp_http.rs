//! `toolsize mcp --listen … --upstream URL` between real peers over Streamable HTTP: the
//! official Python SDK's server (SSE and JSON responses, a bearer token, TLS) and client (the
//! 2025-11-25 handshake and the stateless 2026-07-28 revision), `@modelcontextprotocol/
//! server-everything` over HTTP, and the MCP Inspector's CLI as a client. Every message but the
//! results acted on is the same bytes through the proxy as without it; results are measured,
//! guarded and traced once per call, `input_required` interim answers included; a client that
//! goes away cancels the call upstream.
#![cfg(all(feature = "cli", unix))]

#[path = "support/cli.rs"]
mod cli;
#[path = "support/mcp.rs"]
mod mcp;
#[path = "support/sink.rs"]
#[allow(dead_code, unreachable_pub)]
mod sink;
#[path = "support/tls.rs"]
#[allow(unreachable_pub)]
mod tls;

use std::time::{Duration, Instant};

use mcp::{
    envelope, everything_http_server, inspect, inspector, notice, python_http_client,
    python_http_server, require_python_mcp, HttpProxy,
};
use serde_json::{json, Value};

const MODERN: &str = "2026-07-28";

fn text(result: &Value, i: usize) -> &str {
    result["content"][i]["text"].as_str().unwrap()
}

fn calls() -> Value {
    json!([
        {"name": "echo", "arguments": {"text": "héllo"}},
        {"name": "rows", "arguments": {"count": 2000}},
        {"name": "log_lines", "arguments": {"count": 5000}},
        {"name": "search", "arguments": {"query": "abc", "limit": 100}},
        {"name": "fail", "arguments": {"reason": "on purpose"}},
        {"name": "slow_rows", "arguments": {"count": 2000}},
        {"name": "search", "arguments": {"qurey": "abc"}},
    ])
}

/// The same calls, directly and through the proxy, on both revisions and both response kinds.
#[test]
fn python_sdk_client_and_server_through_the_proxy_on_every_revision() {
    if !require_python_mcp() {
        return;
    }
    for extra in [&[][..], &["--json"][..]] {
        let server = python_http_server(extra);
        let proxy = HttpProxy::start(&server.url, &["--max-output", "8192"], &[]);
        for mode in ["legacy", MODERN] {
            let direct = python_http_client(&calls(), &server.url, mode, &[]);
            let through = python_http_client(&calls(), &proxy.url, mode, &[]);
            let want = if mode == "legacy" {
                "2025-11-25"
            } else {
                MODERN
            };
            assert_eq!(through["protocol_version"], json!(want));
            let (d, t) = (&direct["results"], &through["results"]);
            assert_eq!(through["tools"], direct["tools"], "{mode} {extra:?}");
            // Small results and errors: untouched.
            assert_eq!(t[0], d[0]);
            assert_eq!(text(&t[0], 0), "héllo");
            assert_eq!(t[4], d[4]);
            // Large ones: cut JSON-aware, marked, described, under the limit.
            for i in [1, 3, 5] {
                let n = notice(&t[i]);
                assert_eq!(n["code"], json!("RESULT_TRUNCATED"), "{mode} {extra:?} {i}");
                assert_eq!(n["limit_bytes"], json!(8192));
                let inner: Value = serde_json::from_str(text(&t[i], 0)).expect("still JSON");
                assert!(inner.is_object());
            }
            let log = text(&t[2], 0);
            assert!(log.starts_with("BUILD STARTED\n") && log.contains("[... toolsize: omitted"));
            // The streamed result (progress first, on SSE) is the one measured.
            assert!(
                serde_json::to_string(&t[5]).unwrap().len() < 8192 + 2048,
                "{mode} {extra:?}"
            );
            // A misspelt argument never reaches the server.
            assert_eq!(
                envelope(&t[6])["error"]["violations"][0]["did_you_mean"],
                json!("query")
            );
        }
        drop(proxy);
    }
}

/// An `input_required` answer (2026-07-28) passes untouched, and the retry's result is cut.
#[test]
fn input_required_passes_untouched_and_the_retried_call_is_guarded() {
    if !require_python_mcp() {
        return;
    }
    let server = python_http_server(&[]);
    let proxy = HttpProxy::start(&server.url, &["--max-output", "4096"], &[]);
    let call = json!([{"name": "confirmed_rows", "arguments": {"count": 500}}]);
    let t = python_http_client(&call, &proxy.url, MODERN, &[]);
    let r = &t["results"][0];
    assert_eq!(notice(r)["code"], json!("RESULT_TRUNCATED"));
    assert!(serde_json::to_string(r).unwrap().len() <= 4096 + 512);

    // The interim answer itself, byte for byte.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "confirmed_rows", "arguments": {"count": 500}, "_meta": modern_meta()}});
    let direct = post(
        &server.url,
        &body,
        &modern_headers("tools/call", Some("confirmed_rows")),
    );
    let through = post(
        &proxy.url,
        &body,
        &modern_headers("tools/call", Some("confirmed_rows")),
    );
    let interim: Value = serde_json::from_slice(&through.2).unwrap();
    assert_eq!(interim["result"]["resultType"], json!("input_required"));
    // requestState is sealed with a fresh nonce each time: compare the rest.
    let strip = |b: &[u8]| {
        let mut v: Value = serde_json::from_slice(b).unwrap();
        v["result"]["requestState"] = json!("…");
        v
    };
    assert_eq!(strip(&through.2), strip(&direct.2));
    assert_eq!(through.0, direct.0);
}

fn modern_meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": MODERN,
           "io.modelcontextprotocol/clientCapabilities": {},
           "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "1"}})
}

fn modern_headers(method: &str, name: Option<&str>) -> Vec<(String, String)> {
    let mut h = vec![
        ("mcp-protocol-version".to_owned(), MODERN.to_owned()),
        ("mcp-method".to_owned(), method.to_owned()),
    ];
    if let Some(n) = name {
        h.push(("mcp-name".to_owned(), n.to_owned()));
    }
    h
}

/// POSTs `body` to `url` with the MCP accept header and `headers`; returns the status, the
/// response headers and the body as sent.
fn post(
    url: &str,
    body: &Value,
    headers: &[(String, String)],
) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let mut req = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string());
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let resp = req.send().unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, headers, resp.bytes().unwrap().to_vec())
}

/// A raw exchange: every request of `script` to `url`, in order, with the session the server
/// gives; the status, content type and body of each response, session ids and SSE event ids
/// masked (they differ from one run to the next, not from the proxy).
fn exchange(url: &str, script: &[(Value, Vec<(String, String)>)]) -> Vec<(u16, String, String)> {
    let mut session: Option<String> = None;
    let mut out = Vec::new();
    for (body, headers) in script {
        let mut h = headers.clone();
        if let Some(s) = &session {
            h.push(("mcp-session-id".to_owned(), s.clone()));
        }
        let (status, headers, bytes) = post(url, body, &h);
        if let Some(s) = headers.get("mcp-session-id") {
            session = Some(s.to_str().unwrap().to_owned());
        }
        let mut text = String::from_utf8(bytes).unwrap();
        if let Some(s) = &session {
            text = text.replace(s.as_str(), "<session>");
        }
        let text: String = text
            .split_inclusive('\n')
            .map(|l| {
                if l.starts_with("id: ") {
                    "id: <event>\n"
                } else {
                    l
                }
            })
            .collect();
        let ct = headers
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        out.push((status, ct, text));
    }
    out
}

fn legacy_script(version: &str, echo: Value) -> Vec<(Value, Vec<(String, String)>)> {
    let h = |v: &str| vec![("mcp-protocol-version".to_owned(), v.to_owned())];
    vec![
        (
            json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":version,"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}),
            vec![],
        ),
        (
            json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
            h(version),
        ),
        (
            json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}),
            h(version),
        ),
        (json!({"jsonrpc":"2.0","id":3,"method":"ping"}), h(version)),
        (
            json!({"jsonrpc":"2.0","id":4,"method":"resources/list"}),
            h(version),
        ),
        (
            json!({"jsonrpc":"2.0","id":5,"method":"prompts/list"}),
            h(version),
        ),
        (
            json!({"jsonrpc":"2.0","id":6,"method":"no/such/method","params":{"x":[1,2.5,"é"]}}),
            h(version),
        ),
        (
            json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":echo}),
            h(version),
        ),
        (
            json!({"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}),
            h(version),
        ),
    ]
}

fn modern_script() -> Vec<(Value, Vec<(String, String)>)> {
    let meta = modern_meta();
    vec![
        (
            json!({"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":meta}}),
            modern_headers("server/discover", None),
        ),
        (
            json!({"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":meta}}),
            modern_headers("tools/list", None),
        ),
        (
            json!({"jsonrpc":"2.0","id":3,"method":"resources/list","params":{"_meta":meta}}),
            modern_headers("resources/list", None),
        ),
        (
            json!({"jsonrpc":"2.0","id":4,"method":"no/such/method","params":{"_meta":meta,"x":[1,2.5,"é"]}}),
            modern_headers("no/such/method", None),
        ),
        (
            json!({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"héllo \"q\""},"_meta":meta}}),
            modern_headers("tools/call", Some("echo")),
        ),
        (
            json!({"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"slow_rows","arguments":{"count":20},"_meta":{"progressToken":"p","io.modelcontextprotocol/protocolVersion":MODERN,"io.modelcontextprotocol/clientCapabilities":{}}}}),
            modern_headers("tools/call", Some("slow_rows")),
        ),
        (
            json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"no_such_tool","arguments":{},"_meta":meta}}),
            modern_headers("tools/call", Some("no_such_tool")),
        ),
        (
            json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}),
            vec![("mcp-protocol-version".to_owned(), MODERN.to_owned())],
        ),
    ]
}

#[test]
fn python_server_messages_pass_byte_for_byte_json_and_sse_every_revision() {
    if !require_python_mcp() {
        return;
    }
    let echo = json!({"name":"echo","arguments":{"text":"héllo \"q\""}});
    for extra in [&[][..], &["--json"][..]] {
        let server = python_http_server(extra);
        let proxy = HttpProxy::start(&server.url, &["--max-output", "65536"], &[]);
        let scripts = [
            legacy_script("2025-06-18", echo.clone()),
            legacy_script("2025-11-25", echo.clone()),
            modern_script(),
        ];
        let mut sse_seen = false;
        for script in &scripts {
            let direct = exchange(&server.url, script);
            let through = exchange(&proxy.url, script);
            for (i, (d, t)) in direct.iter().zip(&through).enumerate() {
                assert_eq!(d, t, "{extra:?} request {}: {}", i, script[i].0);
            }
            sse_seen |= through
                .iter()
                .any(|(_, ct, _)| ct.starts_with("text/event-stream"));
        }
        // Without --json the server streams (progress commits a stream on 2026-07-28 too).
        assert_eq!(sse_seen, extra.is_empty(), "{extra:?}");
    }
}

#[test]
fn server_everything_over_http_behind_the_proxy() {
    let Some(server) = everything_http_server() else {
        return;
    };
    let proxy = HttpProxy::start(&server.url, &["--max-output", "2048"], &[]);
    // Byte for byte with a raw client (results under the limit).
    let echo = json!({"name":"echo","arguments":{"message":"héllo \"q\""}});
    let script = legacy_script("2025-06-18", echo);
    let direct = exchange(&server.url, &script);
    let through = exchange(&proxy.url, &script);
    for (i, (d, t)) in direct.iter().zip(&through).enumerate() {
        assert_eq!(d, t, "request {}: {}", i, script[i].0);
    }
    if !require_python_mcp() {
        return;
    }
    let calls = json!([
        {"name": "echo", "arguments": {"message": "short"}},
        {"name": "echo", "arguments": {"message": "m".repeat(6000)}},
        {"name": "get-tiny-image"},
        {"name": "echo", "arguments": {"mesage": "typo"}},
    ]);
    let t = python_http_client(&calls, &proxy.url, "legacy", &[]);
    let r = &t["results"];
    assert_eq!(text(&r[0], 0), "Echo: short");
    assert!(text(&r[1], 0).contains("[... toolsize: omitted"));
    assert_eq!(notice(&r[1])["code"], json!("RESULT_TRUNCATED"));
    assert!(r[2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .any(|i| i["text"].as_str().is_some_and(|s| s.contains("image item"))));
    assert_eq!(
        envelope(&r[3])["error"]["violations"][0]["did_you_mean"],
        json!("message")
    );
}

#[test]
fn the_inspector_cli_is_a_client_of_the_proxy_on_both_eras() {
    let Some(cli) = inspector() else {
        return;
    };
    if !require_python_mcp() {
        return;
    }
    let server = python_http_server(&[]);
    let proxy = HttpProxy::start(&server.url, &["--max-output", "4096"], &[]);
    let home = cli::scratch("mcp-inspector-home");
    for era in ["legacy", "modern"] {
        let call = |url: &str, tool: &str, arg: &str| {
            inspect(
                &cli,
                &home,
                url,
                &[
                    "--protocol-era",
                    era,
                    "--method",
                    "tools/call",
                    "--tool-name",
                    tool,
                    "--tool-arg",
                    arg,
                ],
            )
        };
        let small_d = call(&server.url, "echo", "text=hé");
        let small_t = call(&proxy.url, "echo", "text=hé");
        assert_eq!(small_t, small_d, "{era}");
        let big = call(&proxy.url, "rows", "count=2000");
        assert_eq!(
            notice(&big["result"])["code"],
            json!("RESULT_TRUNCATED"),
            "{era}"
        );
        assert!(serde_json::to_string(&big["result"]).unwrap().len() <= 4096 + 256);
        let listed_d = inspect(
            &cli,
            &home,
            &server.url,
            &["--protocol-era", era, "--method", "tools/list"],
        );
        let listed_t = inspect(
            &cli,
            &home,
            &proxy.url,
            &["--protocol-era", era, "--method", "tools/list"],
        );
        assert_eq!(listed_t, listed_d, "{era}");
    }
}

fn spans_named(
    received: &sink::Received,
    n: usize,
) -> Vec<opentelemetry_proto::tonic::trace::v1::Span> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let spans: Vec<_> = received
            .spans()
            .into_iter()
            .map(|(_, s)| s)
            .filter(|s| s.name.starts_with("execute_tool "))
            .collect();
        if spans.len() >= n || Instant::now() > deadline {
            return spans;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn one_span_per_call_parented_on_the_request_trace_context() {
    use toolsize::semconv::*;
    if !require_python_mcp() {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (addr, received) = rt.block_on(sink::http());
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}")),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf".to_owned()),
        ("OTEL_SERVICE_NAME", "mcp-http-test".to_owned()),
    ];
    let server = python_http_server(&[]);
    let proxy = HttpProxy::start(&server.url, &["--max-output", "4096"], &env);
    // A legacy session: echo, rows (cut), fail.
    let legacy = json!([
        {"name": "echo", "arguments": {"text": "a private argument"}},
        {"name": "rows", "arguments": {"count": 2000}},
        {"name": "fail", "arguments": {"reason": "x"}},
    ]);
    python_http_client(&legacy, &proxy.url, "legacy", &[]);
    // 2026-07-28: a call answered input_required first, then retried: one span.
    python_http_client(
        &json!([{"name": "confirmed_rows", "arguments": {"count": 300}}]),
        &proxy.url,
        MODERN,
        &[],
    );
    // A raw call carrying trace context in _meta.
    let mut meta = modern_meta();
    meta["traceparent"] = json!("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    let body = json!({"jsonrpc":"2.0","id":"t-1","method":"tools/call",
                      "params":{"name":"echo","arguments":{"text":"traced"},"_meta":meta}});
    let (status, _, _) = post(
        &proxy.url,
        &body,
        &modern_headers("tools/call", Some("echo")),
    );
    assert_eq!(status, 200);
    let stderr = proxy.stop();
    let spans = spans_named(&received, 5);
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "execute_tool echo",
            "execute_tool rows",
            "execute_tool fail",
            "execute_tool confirmed_rows",
            "execute_tool echo"
        ]
    );
    let s = |key: &str, i: usize| sink::str_attr(&spans[i].attributes, key);
    for (i, span) in spans.iter().enumerate() {
        assert_eq!(s(NETWORK_TRANSPORT, i).as_deref(), Some("tcp"));
        assert_eq!(s(MCP_METHOD_NAME, i).as_deref(), Some("tools/call"));
        assert_eq!(sink::int_attr(span, TOOL_RESULT_LIMIT_BYTES), Some(4096));
        assert_eq!(
            s(TOOL_RESULT_LIMIT_SOURCE, i).as_deref(),
            Some("--max-output")
        );
        for kv in &span.attributes {
            assert!(!format!("{:?}", kv.value).contains("private argument"));
        }
    }
    // The legacy session: its id and protocol version on each span.
    assert_eq!(s(MCP_PROTOCOL_VERSION, 0).as_deref(), Some("2025-11-25"));
    assert!(s(MCP_SESSION_ID, 0).is_some_and(|id| id.len() >= 8));
    assert_eq!(s(MCP_SESSION_ID, 0), s(MCP_SESSION_ID, 1));
    assert!(sink::int_attr(&spans[1], TOOL_RESULT_ORIGINAL_BYTES).unwrap() > 4096);
    assert_eq!(s(ERROR_TYPE, 2).as_deref(), Some("tool_error"));
    // input_required: measured once, on the retried call's final result, cut.
    assert_eq!(s(MCP_PROTOCOL_VERSION, 3).as_deref(), Some(MODERN));
    assert!(s(MCP_SESSION_ID, 3).is_none());
    assert!(sink::int_attr(&spans[3], TOOL_RESULT_ORIGINAL_BYTES).unwrap() > 4096);
    assert!(sink::int_attr(&spans[3], TOOL_RESULT_BYTES).unwrap() <= 4096);
    // Parented on the request's traceparent.
    assert_eq!(
        spans[4].trace_id,
        hex("0af7651916cd43dd8448eb211c80319c"),
        "trace id"
    );
    assert_eq!(spans[4].parent_span_id, hex("b7ad6b7169203331"));
    assert_eq!(s(JSONRPC_REQUEST_ID, 4).as_deref(), Some("t-1"));
    assert!(!stderr.contains("private argument"));
    drop(rt);
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// `--host claude-code`: a tool declaring `anthropic/maxResultSizeChars` is held to its own
/// allowance; `--host auto` finds the preset from the client's name; the proxy says which limit
/// applied and why.
#[test]
fn a_tools_declared_allowance_applies_under_the_claude_code_preset() {
    if !require_python_mcp() {
        return;
    }
    let server = python_http_server(&["--json"]);
    for host in ["claude-code", "auto"] {
        let proxy = HttpProxy::start(&server.url, &["--host", host], &[]);
        let mut meta = modern_meta();
        meta["io.modelcontextprotocol/clientInfo"] = json!({"name": "claude-code", "version": "2"});
        let list = json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":meta}});
        post(&proxy.url, &list, &modern_headers("tools/list", None));
        let call = |tool: &str| {
            let body = json!({"jsonrpc":"2.0","id":2,"method":"tools/call",
                              "params":{"name":tool,"arguments":{"count":1000},"_meta":meta}});
            let (_, _, bytes) = post(&proxy.url, &body, &modern_headers("tools/call", Some(tool)));
            let v: Value = serde_json::from_slice(&bytes).unwrap();
            serde_json::to_string(&v["result"]).unwrap()
        };
        // About 170 KB each (text and structuredContent): over Claude Code's 50,000-char persistence threshold, under the
        // 200,000 chars big_report declares.
        let declared = call("big_report");
        let plain = call("rows");
        assert!(declared.len() > 100_000, "{host}: {}", declared.len());
        assert!(!declared.contains("RESULT_TRUNCATED"), "{host}");
        assert!(plain.len() <= 50_000, "{host}: {}", plain.len());
        assert!(plain.contains("RESULT_TRUNCATED"));
        let stderr = proxy.stop();
        assert!(
            stderr.contains("A tool's declared allowance sets its limit.")
                && stderr.contains("anthropic/maxResultSizeChars of the tool (200000 chars"),
            "{stderr}"
        );
        if host == "auto" {
            assert!(
                stderr.contains("Host preset chosen from the client's name."),
                "{stderr}"
            );
        }
    }
}

#[test]
fn authorization_reaches_the_server_unchanged_and_is_never_logged() {
    if !require_python_mcp() {
        return;
    }
    let token = "s3cr3t-token-for-tests";
    let server = python_http_server(&["--token", token]);
    let proxy = HttpProxy::start(
        &server.url,
        &["--max-output", "4096"],
        &[("RUST_LOG", "debug".to_owned())],
    );
    let auth = format!("Authorization: Bearer {token}");
    let t = python_http_client(
        &json!([{"name": "echo", "arguments": {"text": "hi"}}, {"name": "rows", "arguments": {"count": 2000}}]),
        &proxy.url,
        "legacy",
        &[&auth],
    );
    assert_eq!(text(&t["results"][0], 0), "hi");
    assert_eq!(notice(&t["results"][1])["code"], json!("RESULT_TRUNCATED"));
    // Without it, the server's 401 comes back as it is.
    let body = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}});
    let (status, _, bytes) = post(&proxy.url, &body, &[]);
    assert_eq!((status, bytes.as_slice()), (401, &b"unauthorized"[..]));
    let stderr = proxy.stop();
    assert!(!stderr.contains(token), "{stderr}");
}

/// Closing the connection before the response is complete cancels the call upstream (the
/// 2026-07-28 cancellation), before and after the server committed an event stream.
#[test]
fn a_client_that_goes_away_cancels_the_call_upstream() {
    use std::io::Write;
    if !require_python_mcp() {
        return;
    }
    let server = python_http_server(&[]);
    let proxy = HttpProxy::start(&server.url, &[], &[]);
    let dir = cli::scratch("mcp-http-cancel");
    let addr = proxy
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    for progress in [false, true] {
        let marker = dir.join(format!("cancelled-{progress}"));
        let mut meta = modern_meta();
        meta["progressToken"] = json!("p");
        let body = json!({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"sleepy",
            "arguments":{"seconds":30,"marker":marker.to_string_lossy(),"progress":progress},"_meta":meta}})
        .to_string();
        let mut conn = std::net::TcpStream::connect(&addr).unwrap();
        write!(
            conn,
            "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: {MODERN}\r\nmcp-method: tools/call\r\nmcp-name: sleepy\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        // The client goes away once the server runs the call.
        let started = dir.join(format!("cancelled-{progress}.started"));
        let deadline = Instant::now() + Duration::from_secs(30);
        while !started.exists() {
            assert!(
                Instant::now() < deadline,
                "the server never started the call"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        if progress {
            // After the event stream is committed: its progress event read.
            use std::io::Read;
            conn.set_read_timeout(Some(Duration::from_secs(30)))
                .unwrap();
            let mut got = Vec::new();
            while !String::from_utf8_lossy(&got).contains("notifications/progress") {
                let mut buf = [0u8; 4096];
                let n = conn.read(&mut buf).expect("the progress event");
                assert!(n > 0, "the stream ended before the progress event");
                got.extend_from_slice(&buf[..n]);
            }
        }
        drop(conn);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !marker.exists() {
            assert!(
                Instant::now() < deadline,
                "the server's call was not cancelled (progress: {progress})"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[cfg(feature = "tls")]
#[test]
fn an_https_upstream_is_checked_against_the_given_ca() {
    if !require_python_mcp() {
        return;
    }
    let dir = cli::scratch("mcp-http-tls");
    tls::make_certs(&dir);
    let (cert, key) = (dir.join("server.pem"), dir.join("server.key"));
    let server = python_http_server(&["--tls", cert.to_str().unwrap(), key.to_str().unwrap()]);
    assert!(server.url.starts_with("https://"));
    let ca = dir.join("ca.pem");
    let proxy = HttpProxy::start(
        &server.url,
        &[
            "--max-output",
            "4096",
            "--upstream-ca",
            ca.to_str().unwrap(),
        ],
        &[],
    );
    let t = python_http_client(
        &json!([{"name": "echo", "arguments": {"text": "over tls"}}, {"name": "rows", "arguments": {"count": 2000}}]),
        &proxy.url,
        MODERN,
        &[],
    );
    assert_eq!(text(&t["results"][0], 0), "over tls");
    assert_eq!(notice(&t["results"][1])["code"], json!("RESULT_TRUNCATED"));
    drop(proxy);
    // Without the CA the server is not trusted: a 502 naming no secret.
    let untrusted = HttpProxy::start(&server.url, &[], &[]);
    let body = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"_meta":modern_meta()}});
    let (status, _, bytes) = post(
        &untrusted.url,
        &body,
        &modern_headers("tools/call", Some("echo")),
    );
    assert_eq!(status, 502);
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["id"], json!(1));
    assert_eq!(v["error"]["code"], json!(-32603));
}

#[test]
fn bad_command_lines_over_http_are_structured_errors() {
    let run = |args: &[&str]| {
        std::process::Command::new(mcp::toolsize())
            .arg("mcp")
            .args(args)
            .output()
            .unwrap()
    };
    let error = |out: std::process::Output| -> Value {
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let v: Value = serde_json::from_slice(&out.stderr).unwrap();
        v["error"].clone()
    };
    assert_eq!(
        error(run(&["--listen", "127.0.0.1:0"]))["code"],
        json!("USAGE")
    );
    assert_eq!(
        error(run(&[
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            "ftp://example/mcp"
        ]))["code"],
        json!("INVALID_UPSTREAM")
    );
    let e = error(run(&[
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        "http://user:pw@127.0.0.1/mcp",
    ]));
    assert_eq!(e["code"], json!("INVALID_UPSTREAM"));
    assert!(!e["message"].as_str().unwrap().contains("pw"));
    assert_eq!(
        error(run(&[
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            "http://127.0.0.1:1/mcp",
            "--",
            "true"
        ]))["code"],
        json!("USAGE")
    );
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    assert_eq!(
        error(run(&[
            "--listen",
            &addr,
            "--upstream",
            "http://127.0.0.1:1/mcp"
        ]))["code"],
        json!("LISTEN_FAILED")
    );
    let e = error(run(&[
        "--host",
        "claude_cod",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        "http://127.0.0.1:1/mcp",
    ]));
    assert_eq!(e["code"], json!("UNKNOWN_HOST"));
}

/// Up to 2025-11-25 a dropped `POST` stream is not a cancellation: the server finishes the call
/// and replays its response on a `GET` stream resumed with `Last-Event-ID`. The proxy keeps the
/// call with its session and guards the replayed result like any other.
#[test]
fn a_response_replayed_on_a_resumed_stream_is_guarded() {
    use std::io::{Read, Write};
    if !require_python_mcp() {
        return;
    }
    let server = python_http_server(&["--resumable"]);
    let proxy = HttpProxy::start(&server.url, &["--max-output", "4096"], &[]);
    let v = "2025-11-25";
    let h = vec![("mcp-protocol-version".to_owned(), v.to_owned())];
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":v,"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}});
    let (_, headers, _) = post(&proxy.url, &init, &h);
    let sid = headers["mcp-session-id"].to_str().unwrap().to_owned();
    let mut hs = h.clone();
    hs.push(("mcp-session-id".to_owned(), sid.clone()));
    post(
        &proxy.url,
        &json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        &hs,
    );

    // The call's stream: read up to its first event id, then dropped.
    let addr = proxy
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let body = json!({"jsonrpc":"2.0","id":2,"method":"tools/call",
                      "params":{"name":"sleepy_rows","arguments":{"seconds":1.5,"count":2000}}})
    .to_string();
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        conn,
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: {v}\r\nmcp-session-id: {sid}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut got = Vec::new();
    let last_id = loop {
        let mut buf = [0u8; 4096];
        let n = conn.read(&mut buf).expect("the priming event");
        assert!(n > 0, "the stream ended before an event id");
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got);
        if let Some(line) = text.lines().find(|l| l.starts_with("id: ")) {
            break line[4..].trim().to_owned();
        }
    };
    drop(conn);
    std::thread::sleep(Duration::from_millis(2500));

    // The resumed stream carries the response, cut by the proxy.
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut resp = client
        .get(&proxy.url)
        .header("accept", "text/event-stream")
        .header("mcp-protocol-version", v)
        .header("mcp-session-id", &sid)
        .header("last-event-id", &last_id)
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let mut replayed = String::new();
    let mut buf = [0u8; 65536];
    while !replayed.contains("RESULT_TRUNCATED") {
        let n = resp.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "the resumed stream ended without the response: {replayed}"
        );
        replayed.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let data = replayed
        .lines()
        .find(|l| l.starts_with("data: ") && l.contains("RESULT_TRUNCATED"))
        .unwrap();
    let msg: Value = serde_json::from_str(&data[6..]).unwrap();
    assert_eq!(msg["id"], json!(2));
    assert!(serde_json::to_string(&msg["result"]).unwrap().len() <= 4096);
}
