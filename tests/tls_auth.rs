//! TLS and token authentication with the real Python OpenTelemetry SDK exporters (gRPC and
//! HTTP), configured by environment alone (`OTEL_EXPORTER_OTLP_CERTIFICATE`,
//! `OTEL_EXPORTER_OTLP_HEADERS`), against a CA and a server certificate made here with the
//! `openssl` command. The right token is accepted; a wrong one gets 401 / UNAUTHENTICATED and is
//! counted; the admin API wants the token but `/healthz` does not; a client speaking plain
//! text to a TLS port is counted as a failed handshake.
#![cfg(feature = "tls")]

mod support;

use std::path::Path;
use std::process::Command;

use support::collector::*;
use support::tls::make_certs;
use toolsize::collector::Daemon;

const TOKEN: &str = "t0k3n-for-tests";

/// Exports 5 tool spans with the SDK exporter of `protocol`, configured by `env` alone, and
/// reports each export's result; then GETs `paths` on the admin API with `requests` (the HTTP
/// exporter's own client), with and without the token.
const CLIENT: &str = r#"
import json, os, sys
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
protocol, service = sys.argv[1], sys.argv[2]
if protocol == "grpc":
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
else:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
results = []
class Recording:
    def __init__(self, e): self.e = e
    def export(self, spans):
        r = self.e.export(spans); results.append(r.name); return r
    def shutdown(self): self.e.shutdown()
    def force_flush(self, timeout_millis=30000): return True
provider = TracerProvider(resource=Resource.create({"service.name": service}))
provider.add_span_processor(SimpleSpanProcessor(Recording(OTLPSpanExporter())))
tracer = provider.get_tracer("tls-test")
for i in range(5):
    with tracer.start_as_current_span("execute_tool grep") as s:
        s.set_attribute("gen_ai.operation.name", "execute_tool")
        s.set_attribute("gen_ai.tool.name", "grep")
        s.set_attribute("tool.result.bytes", 100 + i)
provider.shutdown()
admin = {}
if len(sys.argv) > 3:
    import requests
    base, ca = sys.argv[3], os.environ["OTEL_EXPORTER_OTLP_CERTIFICATE"]
    for path in ["/healthz", "/readyz", "/api/v1/tools", "/metrics"]:
        plain = requests.get(base + path, verify=ca, timeout=5)
        auth = requests.get(base + path, verify=ca, timeout=5,
                            headers={"Authorization": "Bearer " + os.environ["TOKEN"]})
        admin[path] = [plain.status_code, auth.status_code,
                       auth.json() if path == "/api/v1/tools" else None]
print(json.dumps({"results": results, "admin": admin}))
"#;

fn run(
    protocol: &str,
    service: &str,
    endpoint: &str,
    ca: &Path,
    token: &str,
    admin: Option<&str>,
) -> serde_json::Value {
    let mut cmd = Command::new(support::cli::python3());
    cmd.args(["-c", CLIENT, protocol, service]);
    if let Some(a) = admin {
        cmd.arg(a);
    }
    let out = cmd
        .env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint)
        .env("OTEL_EXPORTER_OTLP_CERTIFICATE", ca)
        .env(
            "OTEL_EXPORTER_OTLP_HEADERS",
            format!("authorization=Bearer%20{token}"),
        )
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", "5")
        .env("TOKEN", token)
        // requests lets these override the exporter's CA file (its `session.verify`); some
        // machines set them globally.
        .env_remove("REQUESTS_CA_BUNDLE")
        .env_remove("CURL_CA_BUNDLE")
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "python client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_exporters_over_tls_with_a_token() {
    if !require(&support::cli::python3(), &["-c", "import opentelemetry.exporter.otlp.proto.grpc.trace_exporter, opentelemetry.exporter.otlp.proto.http.trace_exporter, requests"])
        || !require("openssl", &["version"])
    {
        return;
    }
    let dir = temp_dir("tls");
    make_certs(&dir);
    let mut cfg = loopback_config();
    cfg.tls.cert_file = Some(dir.join("server.pem"));
    cfg.tls.key_file = Some(dir.join("server.key"));
    std::fs::write(dir.join("token"), format!("{TOKEN}\n")).unwrap();
    cfg.auth.token_file = Some(dir.join("token"));
    cfg.auth.api_key_header = Some("x-api-key".into());
    let d = Daemon::start(&cfg).await.unwrap();
    let ca = dir.join("ca.pem");
    let grpc = format!("https://127.0.0.1:{}", d.otlp_grpc_addr.port());
    let http = format!("https://127.0.0.1:{}/v1/traces", d.otlp_http_addr.port());
    let admin = format!("https://127.0.0.1:{}", d.admin_addr.port());

    // One after the other: the HTTP client reads the admin API once both have exported (run
    // side by side, it could read it before the gRPC client's last span).
    let g = tokio::task::spawn_blocking({
        let (grpc, ca) = (grpc.clone(), ca.clone());
        move || run("grpc", "tls-grpc", &grpc, &ca, TOKEN, None)
    })
    .await;
    let h = tokio::task::spawn_blocking({
        let (http, ca, admin) = (http.clone(), ca.clone(), admin.clone());
        move || run("http", "tls-http", &http, &ca, TOKEN, Some(&admin))
    })
    .await;
    let (g, h) = (g.unwrap(), h.unwrap());
    assert_eq!(g["results"], serde_json::json!(vec!["SUCCESS"; 5]), "{g}");
    assert_eq!(h["results"], serde_json::json!(vec!["SUCCESS"; 5]), "{h}");
    // The admin API: probes open, the rest behind the token.
    let a = &h["admin"];
    assert_eq!(a["/healthz"][0], 200, "{a}");
    assert_eq!(a["/readyz"][0], 200, "{a}");
    assert_eq!(a["/api/v1/tools"][0], 401, "{a}");
    assert_eq!(a["/metrics"][0], 401, "{a}");
    assert_eq!(a["/api/v1/tools"][1], 200, "{a}");
    assert_eq!(a["/metrics"][1], 200, "{a}");
    let rows = a["/api/v1/tools"][2]["tools"].as_array().unwrap().clone();
    for service in ["tls-grpc", "tls-http"] {
        let row = rows
            .iter()
            .find(|r| r["service"] == service)
            .unwrap_or_else(|| panic!("{service}: {rows:?}"));
        assert_eq!(row["count"], 5, "{row}");
        assert_eq!(row["max"], 104, "{row}");
    }

    // A wrong token: every export refused (not retried), counted.
    let (g, h) = tokio::join!(
        tokio::task::spawn_blocking({
            let (grpc, ca) = (grpc.clone(), ca.clone());
            move || run("grpc", "intruder", &grpc, &ca, "wrong", None)
        }),
        tokio::task::spawn_blocking({
            let (http, ca) = (http.clone(), ca.clone());
            move || run("http", "intruder", &http, &ca, "wrong", None)
        }),
    );
    assert_eq!(g.unwrap()["results"], serde_json::json!(vec!["FAILURE"; 5]));
    assert_eq!(h.unwrap()["results"], serde_json::json!(vec!["FAILURE"; 5]));
    let v = d.stats().view();
    assert_eq!(v.refused_requests.unauthenticated, 10, "{v:?}");
    assert_eq!(v.admin_unauthenticated, 2, "{v:?}");
    assert_eq!(v.spans_tool, 10, "nothing of the intruder recorded");

    // Plain text to a TLS port: the handshake fails and is counted.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(d.otlp_http_addr)
        .await
        .unwrap();
    s.write_all(b"POST /v1/traces HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), s.read_to_end(&mut buf)).await;
    let closed = d.stats().listeners.closed(
        toolsize::collector::net::listener::Listener::OtlpHttp,
        toolsize::collector::net::listener::Closed::TlsHandshake,
    );
    assert_eq!(closed, 1);
    d.shutdown().await;
}

#[tokio::test]
async fn a_bad_certificate_file_stops_the_start() {
    let dir = temp_dir("tls-bad");
    std::fs::write(dir.join("cert.pem"), "not a certificate").unwrap();
    std::fs::write(dir.join("key.pem"), "not a key").unwrap();
    let mut cfg = loopback_config();
    cfg.tls.cert_file = Some(dir.join("cert.pem"));
    cfg.tls.key_file = Some(dir.join("key.pem"));
    let e = Daemon::start(&cfg).await.unwrap_err().to_string();
    assert!(e.contains("cert.pem"), "{e}");
}
