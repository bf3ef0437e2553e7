//! The coding agents' hook payloads as a source: `POST /v1/hooks/{agent}` on the real daemon's
//! OTLP/HTTP listener, behind its token, joined with the agent's telemetry for the same call;
//! and `toolsize hook` (the command hook) over OTLP/HTTP and OTLP/gRPC, with its endpoint and
//! token as flags, in an environment without any `OTEL_*` variable, never exiting 2.
//!
//! Payloads are shaped as the pinned releases send them (Claude Code 2.1.332's `PostToolUse`,
//! Qwen Code 0.24.4's `PostToolUse`, Gemini CLI 0.61.0's `AfterTool`).
#![cfg(feature = "collector")]

mod support;

use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use support::collector::*;

const TOKEN: &str = "hook-test-token";

/// The join window: a call's hook arrives after its log record, from another request or from a
/// `toolsize hook` process started then, which a loaded machine can delay past a second.
/// Each joined call is counted one window after its first signal.
const JOIN_WINDOW: &str = "5s";

/// The daemon with a token and a join window of [`JOIN_WINDOW`].
fn daemon() -> Binary {
    Binary::start_with_env(
        &[],
        None,
        &[
            ("TOOLSIZE_AUTH_TOKEN", TOKEN),
            ("TOOLSIZE_JOIN_WINDOW", JOIN_WINDOW),
            ("TOOLSIZE_MAX_REQUEST_BYTES", "1048576"),
            ("RUST_LOG", "error"),
        ],
    )
}

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

/// One OTLP/JSON log record of `service`, scope `scope`, with string attributes.
fn log_request(service: &str, scope: &str, attrs: &[(&str, &str)]) -> Value {
    let attributes: Vec<Value> = attrs
        .iter()
        .map(|(k, v)| json!({"key": k, "value": {"stringValue": v}}))
        .collect();
    json!({"resourceLogs": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
        "scopeLogs": [{"scope": {"name": scope}, "logRecords": [{
            "timeUnixNano": "1700000000000000000", "attributes": attributes}]}]
    }]})
}

async fn post_json(
    http: SocketAddr,
    path: &str,
    token: Option<&str>,
    body: &Value,
) -> (u16, Value) {
    let mut req = client()
        .post(format!("http://{http}{path}"))
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

async fn admin_json(admin: SocketAddr, path: &str) -> Value {
    let r = client()
        .get(format!("http://{admin}{path}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "GET {path}: {}", r.status());
    serde_json::from_slice(&r.bytes().await.unwrap()).unwrap()
}

async fn admin_metrics(admin: SocketAddr) -> String {
    client()
        .get(format!("http://{admin}/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The series `tool` of `service` once it has counted `n` calls: (count, errors, truncated
/// upstream, largest results as (bytes, cut_by, original)).
async fn series(admin: SocketAddr, service: &str, tool: &str, n: u64) -> Value {
    wait_for(
        &format!("{n} calls of {service}/{tool}"),
        Duration::from_secs(30),
        || async {
            let r = client()
                .get(format!("http://{admin}/api/v1/tools/{tool}"))
                .bearer_auth(TOKEN)
                .send()
                .await
                .ok()?;
            // 404 until the first call of the tool is counted.
            let v: Value = serde_json::from_slice(&r.bytes().await.ok()?).ok()?;
            let s = v["series"]
                .as_array()?
                .iter()
                .find(|s| s["service"] == service)?
                .clone();
            (s["count"].as_u64() == Some(n)).then_some(s)
        },
    )
    .await
}

/// Claude Code 2.1.332's `PostToolUse` payload for `seq 1 20000`, persisted.
fn claude_persisted(id: &str) -> Value {
    json!({
        "session_id": "3f0c", "transcript_path": "/home/u/.claude/projects/p/3f0c.jsonl",
        "cwd": "/p", "permission_mode": "default", "hook_event_name": "PostToolUse",
        "tool_name": "Bash", "tool_input": {"command": "seq 1 20000", "description": "Count"},
        "tool_response": {"stdout": "1\n2\n3\n", "stderr": "", "interrupted": false,
            "isImage": false, "noOutputExpected": false,
            "persistedOutputPath": "/home/u/.claude/projects/p/tool-results/b1.txt",
            "persistedOutputSize": 108_894},
        "tool_use_id": id, "duration_ms": 41
    })
}

/// Claude Code's `tool_result` log record of the same call: what the model got (the preview).
fn claude_tool_result(id: &str, tool: &str, size: &str) -> Value {
    log_request(
        "claude-code",
        "com.anthropic.claude_code.events",
        &[
            ("event.name", "tool_result"),
            ("tool_name", tool),
            ("tool_use_id", id),
            ("success", "true"),
            ("duration_ms", "41"),
            ("tool_result_size_bytes", size),
        ],
    )
}

#[tokio::test]
async fn http_hooks_are_joined_with_the_agents_telemetry_behind_the_token() {
    let d = daemon();
    // Claude Code: the log record says 2,281 (the preview); its HTTP hook says it persisted
    // 108,894 bytes.
    let (st, _) = post_json(
        d.http,
        "/v1/logs",
        Some(TOKEN),
        &claude_tool_result("toolu_1", "Bash", "2281"),
    )
    .await;
    assert_eq!(st, 200);
    let (st, body) = post_json(
        d.http,
        "/v1/hooks/claude-code",
        Some(TOKEN),
        &claude_persisted("toolu_1"),
    )
    .await;
    assert_eq!(
        (st, body),
        (200, json!({})),
        "Claude Code reads the answer as JSON"
    );
    // A whole result: the hook adds nothing, the call is counted once.
    post_json(
        d.http,
        "/v1/logs",
        Some(TOKEN),
        &claude_tool_result("toolu_2", "Bash", "6"),
    )
    .await;
    let whole = json!({"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_use_id": "toolu_2",
        "tool_response": {"stdout": "small", "stderr": "", "interrupted": false}});
    assert_eq!(
        post_json(d.http, "/v1/hooks/claude-code", Some(TOKEN), &whole)
            .await
            .0,
        200
    );

    let s = series(d.admin, "claude-code", "Bash", 2).await;
    assert_eq!(
        (s["errors"].as_u64(), s["truncated_upstream"].as_u64()),
        (Some(0), Some(1))
    );
    let largest = &s["largest"][0];
    assert_eq!(largest["bytes"], 2281, "sized as the model got it");
    assert_eq!(largest["cut_by"], "claude-code.bash");
    assert_eq!(largest["original"], 108_894);

    // Qwen Code: its tool_call log record (call_id) and its PostToolUse hook (tool_call_id),
    // the hook carrying the 40,000 characters the grep returned before Qwen cut them.
    let log = log_request(
        "qwen-code",
        "qwen-code",
        &[
            ("event.name", "qwen-code.tool_call"),
            ("function_name", "grep_search"),
            ("call_id", "call_7"),
            ("prompt_id", "p1"),
            ("success", "true"),
            ("duration_ms", "12"),
            ("content_length", "25190"),
        ],
    );
    assert_eq!(
        post_json(d.http, "/v1/logs", Some(TOKEN), &log).await.0,
        200
    );
    let big = "é".repeat(40_000);
    let hook = json!({"session_id": "s", "hook_event_name": "PostToolUse", "permission_mode": "yolo",
        "tool_name": "grep_search", "tool_input": {"pattern": "x"},
        "tool_response": {"llmContent": big, "returnDisplay": "Found 40000 matches"},
        "tool_use_id": "hook-uuid", "tool_call_id": "call_7", "duration_ms": 12});
    assert_eq!(
        post_json(d.http, "/v1/hooks/qwen-code", Some(TOKEN), &hook)
            .await
            .0,
        200
    );
    let s = series(d.admin, "qwen-code", "grep_search", 1).await;
    assert_eq!(s["truncated_upstream"], 1);
    assert_eq!(s["stack"], "qwen-code");
    let largest = &s["largest"][0];
    assert_eq!(
        (largest["bytes"].as_u64(), largest["original"].as_u64()),
        (Some(25_190), Some(40_000))
    );
    assert_eq!(largest["cut_by"], "qwen-code.tool-output");

    // Gemini CLI's AfterTool has no id its telemetry shares: acknowledged, no call of its own.
    let after = json!({"session_id": "s", "transcript_path": "", "cwd": "/p",
        "hook_event_name": "AfterTool", "timestamp": "2026-11-27T00:00:00Z",
        "tool_name": "run_shell_command", "tool_input": {"command": "echo small"},
        "tool_response": {"llmContent": "small\n", "returnDisplay": "small\n"}});
    assert_eq!(
        post_json(d.http, "/v1/hooks/gemini-cli", Some(TOKEN), &after)
            .await
            .0,
        200
    );

    // Every answer the OTLP routes give, and each refusal counted.
    let cases: [(&str, Option<&str>, &str, &str, u16); 5] = [
        ("/v1/hooks/claude-code", None, "application/json", "{}", 401),
        (
            "/v1/hooks/codex",
            Some(TOKEN),
            "application/json",
            "{}",
            404,
        ),
        (
            "/v1/hooks/claude-code",
            Some(TOKEN),
            "application/json",
            "{\"tool_name\":",
            400,
        ),
        (
            "/v1/hooks/claude-code",
            Some(TOKEN),
            "application/json",
            "[1]",
            400,
        ),
        (
            "/v1/hooks/claude-code",
            Some(TOKEN),
            "text/plain",
            "{}",
            415,
        ),
    ];
    for (path, token, ct, body, want) in cases {
        let mut req = client()
            .post(format!("http://{}{path}", d.http))
            .header("content-type", ct)
            .body(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), want, "{path} {ct} {body}");
        let v: Value = serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap();
        assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    }
    // Over `otlp.max_request_bytes`: 413, read by the client still sending (the daemon reads
    // and discards the body first, never a broken pipe).
    let huge = format!("{{\"tool_name\":\"{}\"}}", "x".repeat(2 << 20));
    for _ in 0..3 {
        let resp = client()
            .post(format!("http://{}/v1/hooks/claude-code", d.http))
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(huge.clone())
            .send()
            .await
            .expect("the client reads the answer");
        assert_eq!(resp.status().as_u16(), 413);
    }
    // Without the token, a body under the limit is read and discarded before the 401, which
    // the client still sending reads too.
    let large = format!("{{\"tool_name\":\"{}\"}}", "x".repeat(900_000));
    for _ in 0..3 {
        let resp = client()
            .post(format!("http://{}/v1/hooks/claude-code", d.http))
            .bearer_auth("wrong-token")
            .header("content-type", "application/json")
            .body(large.clone())
            .send()
            .await
            .expect("the client reads the answer");
        assert_eq!(resp.status().as_u16(), 401);
    }
    let m = admin_metrics(d.admin).await;
    for (reason, n) in [
        ("unauthenticated", 4.0),
        ("decode", 2.0),
        ("unsupported_media_type", 1.0),
        ("too_large", 3.0),
    ] {
        let line = format!("toolsize_otlp_requests_refused_total{{reason=\"{reason}\"}}");
        assert_eq!(sample(&m, &line), Some(n), "{line}");
    }
    for outcome in ["late", "orphan", "unjoined"] {
        let line = format!("toolsize_agent_signals_total{{outcome=\"{outcome}\"}}");
        assert_eq!(sample(&m, &line), Some(0.0), "{line}");
    }
    // Nothing of the payloads' content reached the daemon's answers.
    let all = admin_json(d.admin, "/api/v1/tools/Bash").await.to_string();
    for secret in ["seq 1 20000", "tool-results/b1.txt", "3f0c"] {
        assert!(!all.contains(secret), "{secret}");
    }
}

/// Runs `toolsize hook` with `args`, `payload` on standard input, in an environment with no
/// `OTEL_*` variable (as Claude Code runs its hooks).
fn run_hook(args: &[&str], payload: &Value) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolsize"))
        .arg("hook")
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(payload.to_string().as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[tokio::test]
async fn the_command_hook_takes_its_endpoint_and_token_as_flags_and_never_exits_2() {
    let d = daemon();
    let http = format!("http://{}", d.http);
    let grpc = format!("grpc://{}", d.grpc);
    for (id, endpoint) in [("toolu_h", &http), ("toolu_g", &grpc)] {
        post_json(
            d.http,
            "/v1/logs",
            Some(TOKEN),
            &claude_tool_result(id, "Bash", "2281"),
        )
        .await;
        let out = tokio::task::spawn_blocking({
            let endpoint = endpoint.clone();
            move || {
                run_hook(
                    &["claude-code", "--endpoint", &endpoint, "--token", TOKEN],
                    &claude_persisted(id),
                )
            }
        })
        .await
        .unwrap();
        assert!(
            out.status.success(),
            "{endpoint}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let s = series(d.admin, "claude-code", "Bash", 2).await;
    assert_eq!(s["truncated_upstream"], 2, "both transports joined: {s}");
    for l in s["largest"].as_array().unwrap() {
        assert_eq!(
            (l["cut_by"].as_str(), l["original"].as_u64()),
            (Some("claude-code.bash"), Some(108_894))
        );
    }

    // Failures exit 1 with a structured error, never 2: a wrong token, no daemon, a usage error.
    let dead = format!("http://127.0.0.1:{}", free_port());
    let cases: Vec<(Vec<String>, &str)> = [
        (
            vec!["claude-code", "--endpoint", &http, "--token", "wrong"],
            "HOOK_EXPORT",
        ),
        (vec!["claude-code", "--endpoint", &dead], "HOOK_EXPORT"),
        (
            vec!["claude-code", "--endpoint", "127.0.0.1:4318"],
            "HOOK_ENDPOINT",
        ),
        (vec!["claude-code", "--no-such-flag"], "USAGE"),
        (vec!["no-such-agent"], "USAGE"),
    ]
    .into_iter()
    .map(|(a, c)| (a.into_iter().map(String::from).collect(), c))
    .collect();
    for (args, code) in cases {
        let a = args.clone();
        let out = tokio::task::spawn_blocking(move || {
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            run_hook(&a, &claude_persisted("toolu_x"))
        })
        .await
        .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err: Value = serde_json::from_slice(&out.stderr)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(err["error"]["code"], code, "{args:?}");
    }
    // A payload that reveals nothing sends nothing and succeeds, daemon or not.
    let whole = json!({"tool_name": "Bash", "tool_use_id": "t", "tool_response": {"stdout": "x"}});
    let out = tokio::task::spawn_blocking(move || {
        run_hook(&["claude-code", "--endpoint", &dead], &whole)
    })
    .await
    .unwrap();
    assert!(out.status.success());
}
