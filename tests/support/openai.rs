//! A fake OpenAI-compatible Chat Completions endpoint on loopback, scripting one turn of five
//! tool calls (a 40,000-byte result, a small one twice, a structured one, one that fails: see
//! [`CALLS`]) and recording what the model was handed; and the check of the daemon's rows
//! against it. Shared by the tests of the Rust agent frameworks.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

/// The five calls of the scripted turn: (call id, tool, arguments).
pub const CALLS: [(&str, &str, &str); 5] = [
    (
        "call_1",
        "fetch_page",
        r#"{"url":"https://example.com/big"}"#,
    ),
    ("call_2", "lookup", r#"{"q":"a"}"#),
    ("call_3", "lookup", r#"{"q":"bb"}"#),
    ("call_4", "stats", "{}"),
    ("call_5", "flaky", "{}"),
];

/// What the fake endpoint was handed: each tool message's content, by call id.
pub type Handed = Arc<Mutex<BTreeMap<String, String>>>;

/// The fake Chat Completions endpoint: a turn of five tool calls, then, once tool results
/// come back, a final answer.
async fn chat(State(handed): State<Handed>, Json(body): Json<Value>) -> Json<Value> {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let tools: Vec<&Value> = messages.iter().filter(|m| m["role"] == "tool").collect();
    let message = if tools.is_empty() {
        let calls: Vec<Value> = CALLS
            .iter()
            .map(|(id, name, args)| {
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
            })
            .collect();
        json!({"role": "assistant", "content": null, "tool_calls": calls})
    } else {
        let mut h = handed.lock().unwrap();
        for m in tools {
            let content = match &m["content"] {
                Value::String(s) => s.clone(),
                // Content parts: the texts, as the model reads them.
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<String>(),
                other => other.to_string(),
            };
            h.insert(m["tool_call_id"].as_str().unwrap().to_owned(), content);
        }
        json!({"role": "assistant", "content": "done"})
    };
    let finish = if message["tool_calls"].is_null() {
        "stop"
    } else {
        "tool_calls"
    };
    Json(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    }))
}

pub async fn fake_openai() -> (SocketAddr, Handed) {
    let handed = Handed::default();
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .with_state(handed.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, handed)
}

/// Every call counted once, each size what the model was handed, the failure an error.
pub fn check(rows: &BTreeMap<String, Value>, handed: &BTreeMap<String, String>, measured: bool) {
    let len = |id: &str| handed[id].len() as u64;
    assert_eq!(
        rows.keys().collect::<Vec<_>>(),
        ["fetch_page", "flaky", "lookup", "stats"],
        "only tools are counted, never chat spans: {rows:?}"
    );
    for (tool, count, max) in [
        ("fetch_page", 1, len("call_1")),
        ("lookup", 2, len("call_2").max(len("call_3"))),
        ("stats", 1, len("call_4")),
    ] {
        let row = &rows[tool];
        assert_eq!(row["count"], count, "{tool}: {row}");
        assert_eq!(row["errors"], 0, "{tool}: {row}");
        assert_eq!(row["sized"], count, "{tool}: {row}");
        assert_eq!(row["max"], max, "{tool}: {row}");
        let how = if measured { "measured" } else { "derived" };
        assert_eq!(row[how], count, "{tool}: sizes {how}: {row}");
    }
    let flaky = &rows["flaky"];
    assert_eq!(flaky["count"], 1, "{flaky}");
    assert_eq!(flaky["errors"], 1, "{flaky}");
    assert_eq!(flaky["sized"], 0, "a failure is never sized: {flaky}");
}
