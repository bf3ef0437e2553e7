//! The span contract: every attribute of a tool-call span, on success, error, panic and cancel.
#![cfg(feature = "export")]

mod support;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use opentelemetry::trace::{SpanKind, Status};
use serde::Serialize;
use support::{boolean, float, int, string, Capture};
use toolsize::semconv::*;
use toolsize::{measure, tool_call, Measures};

#[derive(Serialize)]
struct Hit {
    title: String,
    body: String,
    rank: u32,
}

fn search(query: &str, n: usize) -> Result<Vec<Hit>, std::io::Error> {
    Ok((0..n)
        .map(|i| Hit {
            title: format!("Result {i} for {query}"),
            body: "Ünïcödé body 😀\nsecond line".repeat(i + 1),
            rank: i as u32,
        })
        .collect())
}

#[derive(Serialize)]
struct SearchArgs<'a> {
    query: &'a str,
    limit: u32,
}

#[test]
fn success_records_every_attribute_of_the_contract() {
    let cap = Capture::new();
    let args = SearchArgs {
        query: "rust otel",
        limit: 5,
    };
    let hits = cap
        .run(|| {
            tool_call("search")
                .call_id("call_42")
                .args(&args)
                .measures(Measures::ALL)
                .run(|| search(args.query, 5))
        })
        .unwrap();
    assert_eq!(hits.len(), 5, "the caller gets its value back");

    let span = cap.one_span();
    let text = serde_json::to_string(&hits).unwrap();
    let expected = measure(text.as_bytes(), Measures::ALL);

    assert_eq!(span.name, "execute_tool search");
    assert_eq!(span.span_kind, SpanKind::Internal);
    assert_eq!(span.status, Status::Unset);
    assert_eq!(
        string(&span, GEN_AI_OPERATION_NAME).as_deref(),
        Some("execute_tool")
    );
    assert_eq!(string(&span, GEN_AI_TOOL_NAME).as_deref(), Some("search"));
    assert_eq!(string(&span, TOOL_NAME).as_deref(), Some("search"));
    assert_eq!(
        string(&span, GEN_AI_TOOL_CALL_ID).as_deref(),
        Some("call_42")
    );
    let hash = string(&span, TOOL_ARGS_HASH).expect("args hash");
    assert_eq!(hash, toolsize::args_hash::args_hash(&args).unwrap());
    assert_eq!(hash.len(), 12);
    assert!(hash
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));

    assert_eq!(int(&span, TOOL_RESULT_BYTES), Some(text.len() as i64));
    assert_eq!(boolean(&span, TOOL_RESULT_TRUNCATED), Some(false));
    assert_eq!(int(&span, TOOL_RESULT_ORIGINAL_BYTES), None);
    assert_eq!(
        int(&span, TOOL_RESULT_CHARS),
        Some(text.chars().count() as i64)
    );
    assert_eq!(
        int(&span, TOOL_RESULT_UTF16_UNITS),
        Some(text.encode_utf16().count() as i64)
    );
    assert_eq!(
        int(&span, TOOL_RESULT_LINES),
        Some(1),
        "serde_json escapes newlines"
    );
    assert_eq!(int(&span, TOOL_RESULT_JSON_DEPTH), Some(2));
    assert_eq!(
        int(&span, TOOL_RESULT_MAX_STRING_CHARS),
        expected.max_string_chars.map(|v| v as i64)
    );
    let longest_body = hits.iter().map(|h| h.body.chars().count()).max().unwrap();
    assert_eq!(
        int(&span, TOOL_RESULT_MAX_STRING_CHARS),
        Some(longest_body as i64)
    );
    assert_eq!(
        int(&span, TOOL_RESULT_TOKENS_ESTIMATE),
        Some(text.len().div_ceil(4) as i64)
    );
    let latency = float(&span, TOOL_LATENCY_MS).expect("latency");
    assert!((0.0..10_000.0).contains(&latency), "{latency}");
    assert_eq!(string(&span, TOOL_ERROR), None);
    assert_eq!(string(&span, ERROR_TYPE), None);
    assert!(
        span.events.is_empty(),
        "a 2 KiB result is below the threshold"
    );
}

#[test]
fn by_default_only_the_cheap_measures_are_recorded() {
    // The default measures: bytes and the tokens estimate, unless TOOLSIZE_STACK names layers
    // counting by more (this test's environment names none).
    assert_eq!(std::env::var(toolsize::layers::ENV_STACK).ok(), None);
    assert_eq!(toolsize::instrument::defaults().measures, Measures::CHEAP);
    let cap = Capture::new();
    let page = "line one\nligne deux é\n三行目 😀\n";
    cap.run(|| {
        tool_call("fetch")
            .args(&["https://example.com"])
            .run_text(|| Ok::<_, String>(page.to_string()))
    })
    .unwrap();
    let span = cap.one_span();
    assert_eq!(int(&span, TOOL_RESULT_BYTES), Some(page.len() as i64));
    assert_eq!(boolean(&span, TOOL_RESULT_TRUNCATED), Some(false));
    assert_eq!(
        int(&span, TOOL_RESULT_TOKENS_ESTIMATE),
        Some(page.len().div_ceil(4) as i64)
    );
    assert!(float(&span, TOOL_LATENCY_MS).is_some());
    assert!(string(&span, TOOL_ARGS_HASH).is_some());
    for key in [
        TOOL_RESULT_CHARS,
        TOOL_RESULT_UTF16_UNITS,
        TOOL_RESULT_LINES,
        TOOL_RESULT_JSON_DEPTH,
        TOOL_RESULT_MAX_STRING_CHARS,
    ] {
        assert!(
            !span.attributes.iter().any(|kv| kv.key.as_str() == key),
            "{key} is not measured by default, so it is left off, not 0"
        );
    }
}

#[test]
fn arguments_and_result_content_are_never_recorded() {
    let cap = Capture::new();
    let secret_arg = "sk-ARG-SECRET-123";
    let secret_out = "RESULT-SECRET-456";
    cap.run(|| {
        tool_call("lookup")
            .args(&serde_json::json!({ "token": secret_arg }))
            .large_result_bytes(1)
            .run(|| Ok::<_, std::io::Error>(serde_json::json!({ "value": secret_out })))
    })
    .unwrap();
    let span = cap.one_span();
    let everything = format!("{:?} {:?}", span.attributes, span.events);
    assert!(!everything.contains(secret_arg), "{everything}");
    assert!(!everything.contains(secret_out), "{everything}");
}

#[test]
fn text_results_are_measured_as_they_are() {
    let cap = Capture::new();
    let page = "line one\nligne deux é\n三行目 😀\n";
    cap.run(|| {
        tool_call("fetch")
            .measures(Measures::ALL)
            .run_text(|| Ok::<_, String>(page.to_string()))
    })
    .unwrap();
    let span = cap.one_span();
    assert_eq!(int(&span, TOOL_RESULT_BYTES), Some(page.len() as i64));
    assert_eq!(
        int(&span, TOOL_RESULT_CHARS),
        Some(page.chars().count() as i64)
    );
    assert_eq!(
        int(&span, TOOL_RESULT_UTF16_UNITS),
        Some(page.encode_utf16().count() as i64)
    );
    assert_eq!(int(&span, TOOL_RESULT_LINES), Some(3));
    assert_eq!(int(&span, TOOL_RESULT_JSON_DEPTH), None, "not JSON");
    assert_eq!(
        int(&span, TOOL_RESULT_MAX_STRING_CHARS),
        Some(page.chars().count() as i64)
    );
}

#[test]
fn low_level_handle_mirrors_finish_serialized_truncated() {
    let cap = Capture::new();
    let m = cap.run(|| {
        let call = tool_call("grep").args(&["-r", "TODO"]).start();
        call.finish(r#"{"matches": ["a", "b"]}"#, true)
    });
    assert_eq!(m.bytes, 23);
    let span = cap.one_span();
    assert_eq!(int(&span, TOOL_RESULT_BYTES), Some(23));
    assert_eq!(boolean(&span, TOOL_RESULT_TRUNCATED), Some(true));
    assert_eq!(
        int(&span, TOOL_RESULT_ORIGINAL_BYTES),
        None,
        "full size unknown"
    );

    let cap = Capture::new();
    cap.run(|| tool_call("grep").start().finish_truncated("abc…", 90_000));
    let span = cap.one_span();
    assert_eq!(boolean(&span, TOOL_RESULT_TRUNCATED), Some(true));
    assert_eq!(int(&span, TOOL_RESULT_ORIGINAL_BYTES), Some(90_000));
}

#[test]
fn measures_can_be_switched_off() {
    let cap = Capture::new();
    cap.run(|| {
        tool_call("cheap")
            .measures(Measures {
                lines: true,
                ..Measures::BYTES_ONLY
            })
            .run_text(|| Ok::<_, String>("a\nb".to_string()))
    })
    .unwrap();
    let span = cap.one_span();
    assert_eq!(int(&span, TOOL_RESULT_BYTES), Some(3));
    assert_eq!(int(&span, TOOL_RESULT_LINES), Some(2));
    for key in [
        TOOL_RESULT_CHARS,
        TOOL_RESULT_UTF16_UNITS,
        TOOL_RESULT_JSON_DEPTH,
        TOOL_RESULT_MAX_STRING_CHARS,
        TOOL_RESULT_TOKENS_ESTIMATE,
    ] {
        assert_eq!(int(&span, key), None, "{key}");
    }
}

#[derive(Debug, PartialEq)]
struct Upstream503;

impl std::fmt::Display for Upstream503 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("upstream answered 503")
    }
}

fn assert_error_span(span: &opentelemetry_sdk::trace::SpanData, message: &str, error_type: &str) {
    assert_eq!(span.status, Status::error(message.to_string()));
    assert_eq!(string(span, TOOL_ERROR).as_deref(), Some(message));
    assert_eq!(string(span, ERROR_TYPE).as_deref(), Some(error_type));
    assert_eq!(int(span, TOOL_RESULT_BYTES), None, "bytes absent, not 0");
    assert_eq!(boolean(span, TOOL_RESULT_TRUNCATED), None);
    assert!(float(span, TOOL_LATENCY_MS).is_some(), "latency recorded");
}

#[test]
fn an_error_is_recorded_and_returned_unchanged() {
    let cap = Capture::new();
    let out: Result<Vec<Hit>, Upstream503> = cap.run(|| {
        tool_call("search")
            .args(&serde_json::json!({"q": "x"}))
            .run(|| Err(Upstream503))
    });
    assert_eq!(out.err(), Some(Upstream503));
    let span = cap.one_span();
    assert_error_span(
        &span,
        "upstream answered 503",
        std::any::type_name::<Upstream503>(),
    );
    assert!(
        string(&span, TOOL_ARGS_HASH).is_some(),
        "args hash kept on failure"
    );
}

#[test]
fn long_error_messages_are_bounded() {
    let cap = Capture::new();
    let body = format!("upstream said: {}", "<html>private page</html>".repeat(100));
    let out = cap.run(|| tool_call("fetch").run_text(|| Err::<String, _>(body.clone())));
    assert_eq!(out.unwrap_err(), body, "the caller's error is unchanged");
    let span = cap.one_span();
    let recorded = string(&span, TOOL_ERROR).unwrap();
    assert!(recorded.len() <= toolsize::instrument::MAX_ERROR_MESSAGE_BYTES);
    assert!(recorded.starts_with("upstream said: <html>"));
    assert!(recorded.ends_with('…'));
}

#[test]
fn a_panicking_tool_ends_its_span_before_the_panic_continues() {
    let cap = Capture::new();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        cap.run(|| {
            tool_call("explode").run(|| -> Result<u32, String> { panic!("index out of range") })
        })
    }));
    let payload = caught.expect_err("the panic continues to the caller");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"index out of range"));
    let span = cap.one_span();
    assert_error_span(&span, "tool panicked: index out of range", ERROR_TYPE_PANIC);
}

#[test]
fn a_low_level_handle_dropped_by_a_panic_records_the_panic() {
    let cap = Capture::new();
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        cap.run(|| {
            let _call = tool_call("explode").start();
            panic!("boom");
        })
    }));
    let span = cap.one_span();
    assert_error_span(&span, "tool panicked", ERROR_TYPE_PANIC);
}

#[test]
fn async_success_and_error() {
    let cap = Capture::new();
    let ok = cap.block_on(async {
        tool_call("fetch")
            .call_id("c1")
            .instrument(async {
                tokio::task::yield_now().await;
                Ok::<_, Upstream503>(vec!["a".to_string(), "bb".to_string()])
            })
            .await
    });
    assert_eq!(ok.unwrap(), vec!["a", "bb"]);
    let err = cap.block_on(async {
        tool_call("fetch")
            .instrument_text(async {
                tokio::task::yield_now().await;
                Err::<String, _>(Upstream503)
            })
            .await
    });
    assert_eq!(err, Err(Upstream503));

    let spans = cap.spans();
    assert_eq!(spans.len(), 2);
    assert_eq!(int(&spans[0], TOOL_RESULT_BYTES), Some(10), r#"["a","bb"]"#);
    assert_eq!(
        string(&spans[0], GEN_AI_TOOL_CALL_ID).as_deref(),
        Some("c1")
    );
    assert_error_span(
        &spans[1],
        "upstream answered 503",
        std::any::type_name::<Upstream503>(),
    );
}

#[test]
fn a_panicking_future_ends_its_span() {
    let cap = Capture::new();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        cap.block_on(async {
            tool_call("explode")
                .instrument(async {
                    tokio::task::yield_now().await;
                    if true {
                        panic!("async boom");
                    }
                    Ok::<u8, String>(1)
                })
                .await
        })
    }));
    assert!(caught.is_err());
    let span = cap.one_span();
    assert_error_span(&span, "tool panicked: async boom", ERROR_TYPE_PANIC);
}

/// A future that never completes.
struct Never;

impl Future for Never {
    type Output = Result<String, String>;
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Pending
    }
}

#[test]
fn a_dropped_future_ends_its_span_marked_cancelled() {
    let cap = Capture::new();
    cap.run(|| {
        let mut fut = Box::pin(tool_call("slow").instrument_text(Never));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        drop(fut);
    });
    let span = cap.one_span();
    assert_eq!(boolean(&span, TOOL_CANCELLED), Some(true));
    assert_error_span(
        &span,
        "tool call cancelled before it completed",
        ERROR_TYPE_CANCELLED,
    );
}

#[test]
fn a_timeout_cancels_the_call() {
    let cap = Capture::new();
    let out = cap.block_on(async {
        tokio::time::timeout(
            std::time::Duration::from_millis(20),
            tool_call("slow").instrument_text(async {
                tokio::time::sleep(std::time::Duration::from_secs(60)).await;
                Ok::<_, String>(String::new())
            }),
        )
        .await
    });
    assert!(out.is_err(), "timed out");
    let span = cap.one_span();
    assert_eq!(boolean(&span, TOOL_CANCELLED), Some(true));
    let latency = float(&span, TOOL_LATENCY_MS).unwrap();
    assert!(latency >= 15.0, "latency {latency} covers the wait");
}

#[test]
fn large_results_get_an_event_past_the_threshold() {
    let cap = Capture::new();
    cap.run(|| {
        let at = "x".repeat(100);
        let above = "x".repeat(101);
        tool_call("t")
            .large_result_bytes(100)
            .run_text(|| Ok::<_, String>(at))
            .unwrap();
        tool_call("t")
            .large_result_bytes(100)
            .run_text(|| Ok::<_, String>(above))
            .unwrap();
        // Default threshold: 16 KiB.
        tool_call("t")
            .run_text(|| Ok::<_, String>("y".repeat(16 * 1024 + 1)))
            .unwrap();
    });
    let spans = cap.spans();
    assert!(spans[0].events.is_empty(), "at the threshold: no event");
    for (span, threshold, bytes) in [(&spans[1], 100, 101), (&spans[2], 16 * 1024, 16 * 1024 + 1)] {
        assert_eq!(span.events.len(), 1);
        let event = &span.events[0];
        assert_eq!(event.name, EVENT_LARGE_RESULT);
        assert_eq!(
            support::attr(&event.attributes, TOOL_RESULT_BYTES),
            Some(&opentelemetry::Value::I64(bytes))
        );
        assert_eq!(
            support::attr(&event.attributes, LARGE_RESULT_THRESHOLD_BYTES),
            Some(&opentelemetry::Value::I64(threshold))
        );
    }
}

#[test]
fn a_cut_reported_inside_the_call_marks_the_span() {
    let cap = Capture::new();
    let out = cap.run(|| {
        tool_call("fetch").run_text(|| {
            let full = "z".repeat(50_000);
            // A ceiling guard cut the result to 1 KiB and says so.
            assert!(toolsize::record_cut(full.len() as u64));
            Ok::<_, String>(full[..1024].to_string())
        })
    });
    assert_eq!(out.unwrap().len(), 1024);
    let span = cap.one_span();
    assert_eq!(int(&span, TOOL_RESULT_BYTES), Some(1024));
    assert_eq!(boolean(&span, TOOL_RESULT_TRUNCATED), Some(true));
    assert_eq!(int(&span, TOOL_RESULT_ORIGINAL_BYTES), Some(50_000));
    assert!(!toolsize::record_cut(1), "no call runs any more");
}

#[test]
fn a_cut_inside_an_async_call_marks_its_span() {
    let cap = Capture::new();
    cap.block_on(async {
        tool_call("fetch")
            .instrument_text(async {
                tokio::task::yield_now().await;
                toolsize::record_cut(7_000);
                Ok::<_, String>("short".to_string())
            })
            .await
    })
    .unwrap();
    let span = cap.one_span();
    assert_eq!(boolean(&span, TOOL_RESULT_TRUNCATED), Some(true));
    assert_eq!(int(&span, TOOL_RESULT_ORIGINAL_BYTES), Some(7_000));
}

#[test]
fn nested_calls_report_cuts_to_the_innermost() {
    let cap = Capture::new();
    cap.run(|| {
        tool_call("outer").run_text(|| {
            tool_call("inner").run_text(|| {
                toolsize::record_cut(999);
                Ok::<_, String>("i".to_string())
            })?;
            Ok::<_, String>("o".to_string())
        })
    })
    .unwrap();
    let spans = cap.spans();
    let inner = spans
        .iter()
        .find(|s| s.name == "execute_tool inner")
        .unwrap();
    let outer = spans
        .iter()
        .find(|s| s.name == "execute_tool outer")
        .unwrap();
    assert_eq!(boolean(inner, TOOL_RESULT_TRUNCATED), Some(true));
    assert_eq!(boolean(outer, TOOL_RESULT_TRUNCATED), Some(false));
    assert_eq!(outer.span_context.trace_id(), inner.span_context.trace_id());
    assert_eq!(inner.parent_span_id, outer.span_context.span_id());
}

#[test]
fn without_a_subscriber_calls_still_work() {
    let v = tool_call("quiet")
        .args(&1)
        .run(|| Ok::<_, String>(vec![1, 2, 3]))
        .unwrap();
    assert_eq!(v, vec![1, 2, 3]);
    let m = tool_call("quiet").start().finish("abc", false);
    assert_eq!(m.bytes, 3);
}

/// MCP attributes given as the call starts (`ToolCallBuilder::mcp`) are on its span; a call
/// without them carries none.
#[test]
fn mcp_attributes_given_at_start_are_on_the_span() {
    let capture = support::Capture::new();
    capture.run(|| {
        let mcp = toolsize::instrument::McpAttributes {
            method: "tools/call",
            request_id: "7",
            ..Default::default()
        };
        let _ = toolsize::tool_call("search")
            .mcp(mcp)
            .start()
            .finish("ok", false);
        let _ = toolsize::tool_call("plain").start().finish("ok", false);
    });
    let spans = capture.spans();
    let span = |name: &str| spans.iter().find(|s| s.name == name).unwrap();
    let with = span("execute_tool search");
    assert_eq!(
        support::string(with, "mcp.method.name").as_deref(),
        Some("tools/call")
    );
    assert_eq!(
        support::string(with, "jsonrpc.request.id").as_deref(),
        Some("7")
    );
    let without = span("execute_tool plain");
    assert_eq!(support::string(without, "mcp.method.name"), None);
    assert_eq!(support::string(without, "jsonrpc.request.id"), None);
}
