//! End to end: the real OTLP exporter, set up by `toolsize::export`, sends tool-call spans to an
//! in-process OTLP receiver over gRPC and over HTTP/protobuf.
#![cfg(feature = "export")]

mod support;

use std::time::Duration;

use support::sink::{self, int_attr, str_attr, Received};
use toolsize::export::{self, Protocol};
use toolsize::semconv::*;
use toolsize::tool_call;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// Runs three tool calls (a result, a failure, a large result) through `guard`'s pipeline.
fn three_calls(guard: &export::ExportGuard) -> usize {
    let dispatch = support::dispatch_to(guard.provider());
    tracing::dispatcher::with_default(&dispatch, || {
        let hits = tool_call("search")
            .call_id("call_1")
            .args(&serde_json::json!({"q": "otel", "limit": 3}))
            .measures(toolsize::Measures::ALL)
            .run(|| Ok::<_, String>(vec!["a", "bb", "ccc"]))
            .unwrap();
        assert_eq!(hits.len(), 3);
        let err = tool_call("fetch").run_text(|| Err::<String, _>("connection reset".to_string()));
        assert!(err.is_err());
        tool_call("fetch")
            .run_text(|| Ok::<_, String>("é".repeat(10_000)))
            .unwrap();
    });
    3
}

fn check_received(received: &Received, service: &str) {
    let spans = received.spans();
    assert_eq!(spans.len(), 3, "{spans:#?}");
    let (resource, search) = &spans[0];
    assert_eq!(str_attr(resource, "service.name").as_deref(), Some(service));
    assert_eq!(search.name, "execute_tool search");
    assert_eq!(search.kind, 1, "SPAN_KIND_INTERNAL");
    assert_eq!(
        str_attr(&search.attributes, GEN_AI_OPERATION_NAME).as_deref(),
        Some("execute_tool")
    );
    assert_eq!(
        str_attr(&search.attributes, GEN_AI_TOOL_NAME).as_deref(),
        Some("search")
    );
    assert_eq!(
        str_attr(&search.attributes, TOOL_NAME).as_deref(),
        Some("search")
    );
    assert_eq!(
        str_attr(&search.attributes, GEN_AI_TOOL_CALL_ID).as_deref(),
        Some("call_1")
    );
    assert_eq!(
        str_attr(&search.attributes, TOOL_ARGS_HASH),
        Some(
            toolsize::args_hash::args_hash(&serde_json::json!({"limit": 3, "q": "otel"})).unwrap()
        )
    );
    assert_eq!(
        int_attr(search, TOOL_RESULT_BYTES),
        Some(r#"["a","bb","ccc"]"#.len() as i64)
    );
    assert_eq!(
        int_attr(search, TOOL_RESULT_JSON_DEPTH),
        Some(1),
        "asked for"
    );

    let (_, failed) = &spans[1];
    assert_eq!(failed.name, "execute_tool fetch");
    assert_eq!(int_attr(failed, TOOL_RESULT_BYTES), None);
    assert_eq!(
        str_attr(&failed.attributes, TOOL_ERROR).as_deref(),
        Some("connection reset")
    );
    let status = failed.status.as_ref().expect("status");
    assert_eq!(status.code, 2, "STATUS_CODE_ERROR");

    let (_, large) = &spans[2];
    assert_eq!(int_attr(large, TOOL_RESULT_BYTES), Some(20_000));
    assert_eq!(
        int_attr(large, TOOL_RESULT_CHARS),
        None,
        "not measured by default, so not sent"
    );
    assert_eq!(int_attr(large, TOOL_RESULT_TOKENS_ESTIMATE), Some(5_000));
    assert_eq!(large.events.len(), 1);
    assert_eq!(large.events[0].name, EVENT_LARGE_RESULT);
}

/// Sends three calls to `addr` over `protocol` and checks what arrived and what was counted.
fn round_trip(protocol: Protocol, addr: std::net::SocketAddr, received: &Received, service: &str) {
    let guard = export::builder()
        .protocol(protocol)
        .endpoint(format!("http://{addr}"))
        .service_name(service)
        .build()
        .unwrap();
    let n = three_calls(&guard) as u64;
    let stats = guard.flush().unwrap();
    assert_eq!(stats.spans_ended, n);
    assert_eq!(stats.spans_exported, n);
    assert_eq!(stats.spans_lost(), 0);
    check_received(received, service);
}

#[test]
fn grpc_export_reaches_the_receiver() {
    let rt = runtime();
    let (addr, received) = rt.block_on(sink::grpc());
    round_trip(Protocol::Grpc, addr, &received, "e2e-grpc");
}

#[test]
fn http_export_reaches_the_receiver() {
    let rt = runtime();
    let (addr, received) = rt.block_on(sink::http());
    round_trip(Protocol::HttpProtobuf, addr, &received, "e2e-http");
}

/// A loopback port that was free a moment ago: nothing listens there. Below the kernel's
/// ephemeral range, so no server of a test beside it binding port 0 is given it meanwhile.
fn closed_port() -> u16 {
    support::ports::free_port()
}

#[test]
fn spans_that_cannot_be_delivered_are_counted() {
    let port = closed_port();
    let guard = export::builder()
        .protocol(Protocol::HttpProtobuf)
        .endpoint(format!("http://127.0.0.1:{port}"))
        .scheduled_delay(Duration::from_millis(50))
        .build()
        .unwrap();
    let n = three_calls(&guard) as u64;
    let _ = guard.flush();
    let stats = guard.stats();
    assert_eq!(stats.spans_ended, n);
    assert_eq!(stats.spans_exported, 0);
    assert_eq!(stats.spans_lost(), n, "{stats:?}");
}

#[test]
fn spans_dropped_on_a_full_queue_are_counted() {
    let port = closed_port();
    let guard = export::builder()
        .protocol(Protocol::HttpProtobuf)
        .endpoint(format!("http://127.0.0.1:{port}"))
        .max_queue_size(4)
        .build()
        .unwrap();
    let dispatch = support::dispatch_to(guard.provider());
    tracing::dispatcher::with_default(&dispatch, || {
        for _ in 0..200 {
            tool_call("burst").start().finish("x", false);
        }
    });
    let _ = guard.flush();
    let stats = guard.stats();
    assert_eq!(stats.spans_ended, 200);
    assert!(stats.spans_dropped() > 0, "{stats:?}");
    assert_eq!(
        stats.spans_exported + stats.spans_failed + stats.spans_dropped(),
        200,
        "every span accounted for: {stats:?}"
    );
    assert_eq!(stats.spans_lost(), 200);
}
