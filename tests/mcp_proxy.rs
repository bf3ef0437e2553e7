//! `toolsize mcp` between real MCP peers: the official Python SDK's client and a server on it
//! (`tests/mcp/`), and `@modelcontextprotocol/server-everything` from npm. Every policy; a
//! misspelt argument answered with a "did you mean"; every message but the `tools/call` results
//! acted on identical, byte for byte; the spans checked at an OTLP receiver.
#![cfg(all(feature = "cli", unix))]

#[path = "support/cli.rs"]
mod cli;
#[path = "support/mcp.rs"]
mod mcp;
#[path = "support/sink.rs"]
#[allow(dead_code, unreachable_pub)]
mod sink;

use mcp::{
    envelope, everything_server, notice, proxied, python_client, python_client_at, python_server,
    require_python_mcp, RawPeer,
};
use serde_json::{json, Value};

fn calls() -> Value {
    json!([
        {"name": "echo", "arguments": {"text": "hello"}},
        {"name": "rows", "arguments": {"count": 2000}},
        {"name": "log_lines", "arguments": {"count": 5000}},
        {"name": "search", "arguments": {"query": "abc", "limit": 100}},
        {"name": "fail", "arguments": {"reason": "on purpose"}},
    ])
}

fn text(result: &Value, i: usize) -> &str {
    result["content"][i]["text"].as_str().unwrap()
}

#[test]
fn truncate_cuts_json_aware_marks_and_describes_and_leaves_small_results_alone() {
    if !require_python_mcp() {
        return;
    }
    let direct = python_client(&calls(), &python_server(), &[]);
    let through = python_client(
        &calls(),
        &proxied(&["--max-output", "8192"], &python_server()),
        &[],
    );
    let (d, t) = (&direct["results"], &through["results"]);
    // Small results and error results: untouched.
    assert_eq!(t[0], d[0]);
    assert_eq!(text(&t[0], 0), "hello");
    assert_eq!(t[4], d[4]);
    assert_eq!(t[4]["isError"], json!(true));
    // The same tools, same schemas.
    assert_eq!(through["tools"], direct["tools"]);

    // JSON text: still JSON, fewer rows, each cut marked, the notice last.
    let rows: Value = serde_json::from_str(text(&t[1], 0)).expect("the cut text is JSON");
    let kept = rows["rows"].as_array().unwrap();
    assert!(!kept.is_empty() && kept.len() < 2000, "{}", kept.len());
    let n = notice(&t[1]);
    assert_eq!(n["code"], json!("RESULT_TRUNCATED"));
    assert_eq!(n["limit_bytes"], json!(8192));
    assert!(n["original_bytes"].as_u64().unwrap() > 8192);
    let warnings = n["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w["code"] == json!("FIELD_TRUNCATED")
                && w["field"] == json!("content[0].text.rows")
                && w["original_length"] == json!(2000)),
        "{warnings:?}"
    );
    assert!(warnings.len() <= 4, "{warnings:?}");
    assert_eq!(t[1]["isError"], json!(false));

    // Plain text: head and tail kept around a marker.
    let log = text(&t[2], 0);
    assert!(log.starts_with("BUILD STARTED\n"), "{}", &log[..40]);
    assert!(log.ends_with("error: the last line says what failed\n"));
    assert!(log.contains("[... toolsize: omitted"));
    assert_eq!(notice(&t[2])["code"], json!("RESULT_TRUNCATED"));

    // Structured output: structuredContent cut JSON-aware too, and both still parse.
    let hits = t[3]["structuredContent"]["hits"].as_array().unwrap();
    assert!(!hits.is_empty() && hits.len() < 100, "{}", hits.len());
    let inner: Value = serde_json::from_str(text(&t[3], 0)).unwrap();
    assert!(inner["hits"].as_array().unwrap().len() < 100);
}

#[test]
fn reject_answers_a_tool_error_with_the_size_the_limit_and_a_hint() {
    if !require_python_mcp() {
        return;
    }
    let through = python_client(
        &calls(),
        &proxied(
            &["--policy", "reject", "--max-output", "8192"],
            &python_server(),
        ),
        &[],
    );
    let t = &through["results"];
    assert_eq!(text(&t[0], 0), "hello");
    for i in [1, 2, 3] {
        assert_eq!(t[i]["isError"], json!(true), "{i}");
        let env = envelope(&t[i]);
        assert_eq!(env["ok"], json!(false));
        let err = &env["error"];
        assert_eq!(err["code"], json!("RESULT_TOO_LARGE"), "{i}");
        assert_eq!(err["limit"], json!(8192));
        assert!(err["actual"].as_u64().unwrap() > 8192);
        assert!(err["hint"].as_str().unwrap().contains("cursor"));
        assert_eq!(t[i]["structuredContent"], Value::Null);
    }
}

#[test]
fn spill_previews_and_the_model_reads_the_rest_in_slices() {
    if !require_python_mcp() {
        return;
    }
    let dir = cli::scratch("mcp-spill");
    let spill_dir = dir.to_string_lossy().into_owned();
    let args = [
        "--policy",
        "spill",
        "--max-output",
        "8192",
        "--spill-dir",
        spill_dir.as_str(),
    ];
    let direct = python_client(&calls(), &python_server(), &[]);
    let through = python_client(&calls(), &proxied(&args, &python_server()), &[]);
    let t = &through["results"];
    assert_eq!(text(&t[0], 0), "hello");
    // The reading tool is listed, after the server's own.
    let names: Vec<&str> = through["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.last(), Some(&"toolsize_read_spill"));
    assert_eq!(names.len(), direct["tools"].as_array().unwrap().len() + 1);

    let n = notice(&t[1]);
    assert_eq!(n["code"], json!("RESULT_SPILLED"));
    let id = n["full_payload_id"].as_str().unwrap().to_owned();
    assert!(n["message"]
        .as_str()
        .unwrap()
        .contains("toolsize_read_spill"));
    // The preview is a JSON-aware cut.
    let preview: Value = serde_json::from_str(text(&t[1], 0)).unwrap();
    assert!(!preview["rows"].as_array().unwrap().is_empty());

    // A later session reads the stored result whole, slice by slice.
    let read = python_client(
        &json!([{"read_spill_all": id}, {"name": "toolsize_read_spill", "arguments": {"id": "nope"}}]),
        &proxied(&args, &python_server()),
        &[],
    );
    let r = &read["results"];
    assert_eq!(
        r[0]["spilled_text"].as_str().unwrap(),
        text(&direct["results"][1], 0),
        "the slices put back together are the tool's result"
    );
    assert!(r[0]["slices"].as_u64().unwrap() > 10);
    assert_eq!(envelope(&r[1])["error"]["code"], json!("INVALID_ID"));
}

#[test]
fn arguments_are_checked_against_the_input_schema_with_a_did_you_mean() {
    if !require_python_mcp() {
        return;
    }
    let bad = json!([
        {"name": "search", "arguments": {"qurey": "abc"}},
        {"name": "search", "arguments": {"query": "abc", "limit": "5"}},
        {"name": "search", "arguments": {"query": "q".repeat(40), "limit": 500, "tags": ["a", "b", "c", "d"]}},
        {"name": "search", "arguments": {"query": "abc", "limit": 2}},
    ]);
    let through = python_client(&bad, &proxied(&[], &python_server()), &[]);
    let t = &through["results"];
    let err = |i: usize| envelope(&t[i])["error"].clone();
    let codes = |i: usize| cli::violations(&err(i));
    assert_eq!(t[0]["isError"], json!(true));
    assert_eq!(err(0)["code"], json!("VALIDATION_ERROR"));
    assert_eq!(err(0)["violations"][0]["did_you_mean"], json!("query"));
    assert!(err(0)["message"]
        .as_str()
        .unwrap()
        .contains("did you mean \"query\""));
    // A string for an integer is refused, never coerced.
    assert_eq!(codes(1), [("WRONG_TYPE".into(), "limit".into())]);
    assert_eq!(
        codes(2),
        [
            ("OUT_OF_RANGE".to_owned(), "limit".to_owned()),
            ("FIELD_TOO_LARGE".to_owned(), "query".to_owned()),
            ("FIELD_TOO_LARGE".to_owned(), "tags".to_owned()),
        ]
    );
    assert_eq!(t[3]["isError"], json!(false));
    assert_eq!(
        t[3]["structuredContent"]["hits"].as_array().unwrap().len(),
        2
    );

    // With checking off, the server's own validation answers: it coerces "5" silently.
    let unchecked = python_client(&bad, &proxied(&["--no-check-args"], &python_server()), &[]);
    let u = &unchecked["results"];
    assert_eq!(u[1]["isError"], json!(false), "{}", u[1]);
    assert_eq!(
        u[1]["structuredContent"]["hits"].as_array().unwrap().len(),
        5
    );
}

/// Every line a server sends, through the proxy and without it: the same bytes, for every
/// message but a `tools/call` result the proxy acts on.
fn same_bytes_through_the_proxy(server: &[String], requests: &[(u64, String)]) {
    let run = |command: &[String]| {
        let mut peer = RawPeer::start(command, &[]);
        let mut responses = Vec::new();
        for (i, (id, line)) in requests.iter().enumerate() {
            if *id == 0 {
                peer.send(line);
                continue;
            }
            responses.push((i, peer.call(line, *id)));
        }
        let mut all = peer.received.clone();
        assert_eq!(peer.finish(), Some(0));
        all.sort();
        (responses, all)
    };
    let (direct, direct_all) = run(server);
    let (through, through_all) = run(&proxied(&["--max-output", "65536"], server));
    for ((i, a), (_, b)) in direct.iter().zip(&through) {
        assert_eq!(
            String::from_utf8_lossy(a),
            String::from_utf8_lossy(b),
            "response to {}",
            requests[*i].1
        );
    }
    assert_eq!(direct_all, through_all, "notifications differ");
}

fn session(tool_call: &str) -> Vec<(u64, String)> {
    vec![
        (1, r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#.to_owned()),
        (0, r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned()),
        (2, r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#.to_owned()),
        (3, r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#.to_owned()),
        (4, r#"{"jsonrpc":"2.0","id":4,"method":"resources/list"}"#.to_owned()),
        (5, r#"{"jsonrpc":"2.0","id":5,"method":"prompts/list"}"#.to_owned()),
        (6, r#"{"jsonrpc":"2.0","id":6,"method":"no/such/method","params":{"x":[1,2.50,"é"]}}"#.to_owned()),
        (7, tool_call.to_owned()),
        (8, r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}"#.to_owned()),
    ]
}

#[test]
fn python_server_messages_pass_byte_for_byte() {
    if !require_python_mcp() {
        return;
    }
    same_bytes_through_the_proxy(
        &python_server(),
        &session(
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"héllo \"quoted\""}}}"#,
        ),
    );
}

#[test]
fn server_everything_messages_pass_byte_for_byte() {
    let Some(server) = everything_server() else {
        return;
    };
    same_bytes_through_the_proxy(
        &server,
        &session(
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"héllo \"quoted\""}}}"#,
        ),
    );
}

#[test]
fn the_result_object_is_never_over_the_limit() {
    if !require_python_mcp() {
        return;
    }
    let dir = cli::scratch("mcp-never-over");
    let spill_dir = dir.to_string_lossy().into_owned();
    for policy in ["truncate", "reject", "spill"] {
        for limit in [1024u64, 3000, 20_000] {
            let limit_s = limit.to_string();
            let mut peer = RawPeer::start(
                &proxied(
                    &[
                        "--policy",
                        policy,
                        "--max-output",
                        &limit_s,
                        "--spill-dir",
                        &spill_dir,
                    ],
                    &python_server(),
                ),
                &[],
            );
            for line in session("").iter().take(3).filter(|(id, _)| *id < 3) {
                if line.0 == 0 {
                    peer.send(&line.1);
                } else {
                    peer.call(&line.1, line.0);
                }
            }
            for (id, (tool, args)) in [
                ("rows", json!({"count": 3000, "width": 7})),
                ("log_lines", json!({"count": 4000})),
                ("search", json!({"query": "é\"\\", "limit": 100})),
            ]
            .into_iter()
            .enumerate()
            {
                let id = 100 + id as u64;
                let line = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                                  "params": {"name": tool, "arguments": args}});
                let response: Value =
                    serde_json::from_slice(&peer.call(&line.to_string(), id)).unwrap();
                let result = serde_json::to_string(&response["result"]).unwrap();
                assert!(
                    result.len() as u64 <= limit,
                    "{policy} {limit} {tool}: {} bytes",
                    result.len()
                );
            }
            assert_eq!(peer.finish(), Some(0));
        }
    }
}

#[test]
fn server_everything_behind_the_proxy_with_the_python_client() {
    if !require_python_mcp() {
        return;
    }
    let Some(server) = everything_server() else {
        return;
    };
    let calls = json!([
        {"name": "echo", "arguments": {"message": "short"}},
        {"name": "echo", "arguments": {"message": "m".repeat(6000)}},
        {"name": "get-tiny-image"},
        {"name": "echo", "arguments": {"mesage": "typo"}},
        {"name": "get-sum", "arguments": {"a": "1", "b": 2}},
    ]);
    let t = python_client(&calls, &proxied(&["--max-output", "2048"], &server), &[]);
    let r = &t["results"];
    assert_eq!(text(&r[0], 0), "Echo: short");
    let cut = text(&r[1], 0);
    assert!(cut.starts_with("Echo: mmm") && cut.contains("[... toolsize: omitted"));
    assert_eq!(notice(&r[1])["code"], json!("RESULT_TRUNCATED"));
    // The image does not fit: it is replaced by a line saying so; the caption stays.
    let items = r[2]["content"].as_array().unwrap();
    assert_eq!(items[0]["type"], json!("text"));
    assert!(items
        .iter()
        .any(|i| i["text"].as_str().is_some_and(|s| s.contains("image item"))));
    assert_eq!(
        envelope(&r[3])["error"]["violations"][0]["did_you_mean"],
        json!("message")
    );
    assert_eq!(
        envelope(&r[4])["error"]["violations"][0]["code"],
        json!("WRONG_TYPE")
    );
}

#[test]
fn one_span_per_tools_call_at_an_otlp_receiver() {
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
    let calls = json!([
        {"name": "echo", "arguments": {"text": "a private argument"}},
        {"name": "rows", "arguments": {"count": 2000}},
        {"name": "search", "arguments": {"qurey": "secret-value", "limit": 123456}},
        {"name": "fail", "arguments": {"reason": "x"}},
    ]);
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}")),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf".to_owned()),
        ("OTEL_SERVICE_NAME", "mcp-proxy-test".to_owned()),
    ];
    let out = python_client(
        &calls,
        &proxied(
            &["--host", "claude-code", "--max-output", "4096"],
            &python_server(),
        ),
        &env,
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let spans = loop {
        let spans: Vec<_> = received
            .spans()
            .into_iter()
            .map(|(_, s)| s)
            .filter(|s| s.name.starts_with("execute_tool "))
            .collect();
        if spans.len() >= 4 || std::time::Instant::now() > deadline {
            break spans;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "execute_tool echo",
            "execute_tool rows",
            "execute_tool search",
            "execute_tool fail"
        ]
    );
    let s = |key: &str, i: usize| sink::str_attr(&spans[i].attributes, key);
    for (i, span) in spans.iter().enumerate() {
        assert_eq!(s(MCP_METHOD_NAME, i).as_deref(), Some("tools/call"));
        assert_eq!(s(GEN_AI_OPERATION_NAME, i).as_deref(), Some("execute_tool"));
        assert_eq!(s(NETWORK_TRANSPORT, i).as_deref(), Some("pipe"));
        assert_eq!(
            s(MCP_PROTOCOL_VERSION, i),
            out["protocol_version"].as_str().map(str::to_owned)
        );
        assert!(s(JSONRPC_REQUEST_ID, i).is_some());
        assert_eq!(s(TOOL_ARGS_HASH, i).map(|h| h.len()), Some(12));
        assert!(s(MCP_SESSION_ID, i).is_none(), "stdio has no session id");
        // Arguments and results are never exported.
        for kv in &span.attributes {
            let v = format!("{:?}", kv.value);
            assert!(
                !v.contains("private argument") && !v.contains("xxxx"),
                "{kv:?}"
            );
        }
    }
    // The small result: measured, not cut.
    assert!(sink::int_attr(&spans[0], TOOL_RESULT_BYTES).unwrap() > 0);
    assert_eq!(sink::int_attr(&spans[0], TOOL_RESULT_ORIGINAL_BYTES), None);
    // The large one: cut from its original size to at most the limit.
    assert!(sink::int_attr(&spans[1], TOOL_RESULT_ORIGINAL_BYTES).unwrap() > 4096);
    assert!(sink::int_attr(&spans[1], TOOL_RESULT_BYTES).unwrap() <= 4096);
    assert!(matches!(
        sink::find(&spans[1].attributes, TOOL_RESULT_TRUNCATED),
        Some(opentelemetry_proto::tonic::common::v1::any_value::Value::BoolValue(true))
    ));
    // A refused call and a failed tool: errors, no size.
    assert_eq!(s(ERROR_TYPE, 2).as_deref(), Some("validation_error"));
    assert_eq!(
        s(TOOL_ERROR, 2).as_deref(),
        Some("invalid arguments: UNKNOWN_FIELD qurey, OUT_OF_RANGE limit, MISSING_FIELD query")
    );
    assert_eq!(sink::int_attr(&spans[2], TOOL_RESULT_BYTES), None);
    assert_eq!(s(ERROR_TYPE, 3).as_deref(), Some("tool_error"));
    assert_eq!(sink::int_attr(&spans[3], TOOL_RESULT_BYTES), None);
    drop(rt);
}

/// Protocol 2026-07-28 on stdio: no handshake, the version and client in each request's
/// `_meta`, an `input_required` answer relayed untouched and its retry measured once, results the
/// proxy makes carrying `resultType`, the span parented on `_meta` trace context.
#[test]
fn the_2026_07_28_revision_on_stdio() {
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
    ];
    let calls = json!([
        {"name": "confirmed_rows", "arguments": {"count": 300}},
        {"name": "search", "arguments": {"qurey": "abc"}},
        {"name": "echo", "arguments": {"text": "hi"}},
    ]);
    let server = proxied(
        &["--max-output", "4096", "--policy", "truncate"],
        &python_server(),
    );
    let out = python_client_at(Some("2026-07-28"), &calls, &server, &env);
    let r = &out["results"];
    assert_eq!(out["protocol_version"], json!("2026-07-28"));
    assert_eq!(notice(&r[0])["code"], json!("RESULT_TRUNCATED"));
    assert_eq!(r[0]["resultType"], json!("complete"));
    assert_eq!(r[1]["resultType"], json!("complete"));
    assert_eq!(envelope(&r[1])["error"]["code"], json!("VALIDATION_ERROR"));
    assert_eq!(text(&r[2], 0), "hi");

    // A raw line carrying trace context, and the interim answer as the server wrote it.
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {},
                      "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"});
    let line = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "echo", "arguments": {"text": "traced"}, "_meta": meta}});
    let mut peer = RawPeer::start(&server, &env);
    peer.call(&line.to_string(), 1);
    let ask = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                     "params": {"name": "confirmed_rows", "arguments": {"count": 3}, "_meta": meta}});
    let interim: Value = serde_json::from_slice(&peer.call(&ask.to_string(), 2)).unwrap();
    assert_eq!(interim["result"]["resultType"], json!("input_required"));
    assert_eq!(peer.finish(), Some(0));

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let spans = loop {
        let spans: Vec<_> = received
            .spans()
            .into_iter()
            .map(|(_, s)| s)
            .filter(|s| s.name.starts_with("execute_tool "))
            .collect();
        if spans.len() >= 5 || std::time::Instant::now() > deadline {
            break spans;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    // One span for the call answered input_required then retried; the raw session's parked
    // call ends as cancelled when the proxy stops.
    assert_eq!(
        names,
        [
            "execute_tool confirmed_rows",
            "execute_tool search",
            "execute_tool echo",
            "execute_tool echo",
            "execute_tool confirmed_rows"
        ]
    );
    let s = |key: &str, i: usize| sink::str_attr(&spans[i].attributes, key);
    assert_eq!(s(MCP_PROTOCOL_VERSION, 0).as_deref(), Some("2026-07-28"));
    assert!(sink::int_attr(&spans[0], TOOL_RESULT_ORIGINAL_BYTES).unwrap() > 4096);
    assert_eq!(s(ERROR_TYPE, 1).as_deref(), Some("validation_error"));
    assert_eq!(
        spans[3].parent_span_id,
        vec![0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31]
    );
    assert_eq!(s(ERROR_TYPE, 4).as_deref(), Some("cancelled"));
    drop(rt);
}

#[test]
fn annotated_tools_tell_the_client_the_limit() {
    if !require_python_mcp() {
        return;
    }
    let direct = python_client(&json!([]), &python_server(), &[]);
    let through = python_client(
        &json!([]),
        &proxied(
            &["--annotate-tools", "--max-output", "5000"],
            &python_server(),
        ),
        &[],
    );
    let (d, t) = (
        direct["tools"].as_array().unwrap(),
        through["tools"].as_array().unwrap(),
    );
    assert_eq!(d.len(), t.len());
    for (d, t) in d.iter().zip(t) {
        assert_eq!(t["_meta"]["toolsize/maxOutputBytes"], json!(5000), "{t}");
        let description = t["description"].as_str().unwrap();
        assert!(
            description.starts_with(d["description"].as_str().unwrap_or(""))
                && description.ends_with(
                    "Results over 5000 bytes are cut by toolsize, marked and described."
                ),
            "{description}"
        );
        assert_eq!(t["inputSchema"], d["inputSchema"]);
    }
}

#[test]
fn bad_command_lines_are_structured_errors() {
    let run = |args: &[&str]| {
        std::process::Command::new(mcp::toolsize())
            .arg("mcp")
            .args(args)
            .env_remove("TOOLSIZE_MAX_TOOL_OUTPUT")
            .output()
            .unwrap()
    };
    let error = |out: std::process::Output| -> Value {
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let v: Value = serde_json::from_slice(&out.stderr).unwrap();
        v["error"].clone()
    };
    let e = error(run(&["--host", "claude_cod", "--", "true"]));
    assert_eq!(e["code"], json!("UNKNOWN_HOST"));
    assert!(e["message"].as_str().unwrap().contains("claude-code"));
    assert_eq!(
        error(run(&["--max-output", "10", "--", "true"]))["code"],
        json!("INVALID_LIMIT")
    );
    assert_eq!(
        error(run(&["--", "/no/such/server"]))["code"],
        json!("SPAWN_FAILED")
    );
}
