//! `export::init()` configured only by the standard OTEL_* variables (its own test binary: it
//! installs the global subscriber and sets the process environment).
#![cfg(feature = "export")]

mod support;

use support::sink::{self, str_attr};
use toolsize::semconv::*;
use toolsize::tool_call;

#[test]
fn init_honours_the_otel_environment() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (addr, received) = rt.block_on(sink::grpc());
    // SAFETY of the environment: this binary has one test, so nothing reads it concurrently.
    std::env::set_var("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc");
    std::env::set_var("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}"));
    std::env::set_var("OTEL_SERVICE_NAME", "env-agent");
    std::env::set_var(
        "OTEL_RESOURCE_ATTRIBUTES",
        "deployment.environment=ci,team=agents",
    );
    std::env::set_var("TOOLSIZE_LARGE_RESULT_BYTES", "10");

    let guard = toolsize::export::init().expect("init");
    assert_eq!(guard.protocol(), toolsize::export::Protocol::Grpc);
    // An application span around the call, with a field holding content: not exported by default.
    tracing::info_span!(target: "app", "handler", user_query = "private words").in_scope(|| {
        tool_call("lookup")
            .run_text(|| Ok::<_, String>("eleven byte".to_string()))
            .unwrap();
    });
    assert!(matches!(
        toolsize::export::init(),
        Err(toolsize::export::ExportError::SubscriberAlreadySet)
    ));
    drop(guard); // flushes

    let spans = received.spans();
    assert_eq!(
        spans.len(),
        1,
        "only the tool-call span leaves the process: {spans:#?}"
    );
    assert!(!format!("{spans:?}").contains("private words"));
    let (resource, span) = &spans[0];
    assert_eq!(
        str_attr(resource, "service.name").as_deref(),
        Some("env-agent")
    );
    assert_eq!(
        str_attr(resource, "deployment.environment").as_deref(),
        Some("ci")
    );
    assert_eq!(str_attr(resource, "team").as_deref(), Some("agents"));
    assert_eq!(span.name, "execute_tool lookup");
    assert_eq!(
        span.events
            .iter()
            .map(|e| e.name.as_str())
            .collect::<Vec<_>>(),
        vec![EVENT_LARGE_RESULT],
        "threshold 10 from TOOLSIZE_LARGE_RESULT_BYTES"
    );
    assert!(str_attr(&span.attributes, TOOL_NAME).is_some());
}
