//! `toolsize serve --forward`: every request the daemon accepts, of every signal, relayed to
//! each upstream: a real OTLP receiver that is not toolsize (`rotel-agent`, PyPI `rotel`, over
//! OTLP/HTTP and OTLP/gRPC), a slow one (a Python server answering after 200 ms) and one that is
//! down. Nothing the daemon measures waits on them: exports are answered at once and the
//! over-ceiling alert fires as fast as without forwarding; every request offered to an upstream
//! ends sent, dropped for a full queue or given up, counted per upstream.

mod support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::metrics::v1::{
    metric, number_data_point, Gauge, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics,
};
use prost::Message;
use support::collector::{
    free_port, get_json, metrics, missing_peers_allowed, own_span, request, require, sample,
    temp_dir, wait_for, Binary,
};

/// The `rotel-agent` binary of the `rotel` Python package, if installed.
fn rotel_agent() -> Option<PathBuf> {
    let out = Command::new(support::cli::python3())
        .args([
            "-c",
            "import os, rotel; print(os.path.join(os.path.dirname(rotel.__file__), 'rotel-agent'))",
        ])
        .output()
        .ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if out.status.success() && p.is_file() {
        return Some(p);
    }
    assert!(
        missing_peers_allowed(),
        "rotel-agent (pip install -r tests/requirements.txt) is missing"
    );
    None
}

/// A child killed when dropped.
struct Peer(Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A receiver that answers every POST 200 after 200 ms, one line per request to `log`.
const SLOW: &str = r#"
import http.server, sys, time
log = open(sys.argv[2], "a", buffering=1)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        n = int(self.headers.get("content-length", 0))
        self.rfile.read(n)
        time.sleep(0.2)
        log.write(self.path + "\n")
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"#;

async fn listening(addr: SocketAddr) {
    wait_for(
        "the peer to listen",
        Duration::from_secs(20),
        || async move { tokio::net::TcpStream::connect(addr).await.ok().map(|_| ()) },
    )
    .await;
}

fn logs_request(n: usize) -> ExportLogsServiceRequest {
    let record = |i: usize| LogRecord {
        time_unix_nano: 1_700_000_000_000_000_000 + i as u64,
        body: Some(AnyValue {
            value: Some(Value::StringValue(format!("line {i}"))),
        }),
        ..Default::default()
    };
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            scope_logs: vec![ScopeLogs {
                log_records: (0..n).map(record).collect(),
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn metrics_request() -> ExportMetricsServiceRequest {
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            scope_metrics: vec![ScopeMetrics {
                metrics: vec![Metric {
                    name: "queue_depth".into(),
                    data: Some(metric::Data::Gauge(Gauge {
                        data_points: vec![NumberDataPoint {
                            time_unix_nano: 1_700_000_000_000_000_000,
                            value: Some(number_data_point::Value::AsInt(3)),
                            ..Default::default()
                        }],
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// One request of the mix.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Traces,
    Logs,
    Metrics,
    MetricsJson,
}

/// What the test sends, in order: 6 trace, 3 log and 3 metrics requests.
const MIX: [Kind; 12] = {
    use Kind::*;
    [
        Traces,
        Traces,
        Logs,
        Metrics,
        Traces,
        Traces,
        Logs,
        Metrics,
        Traces,
        Traces,
        Logs,
        MetricsJson,
    ]
};

/// A metrics request as OTLP/JSON.
const METRICS_JSON: &[u8] = br#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"name":"queue_depth","gauge":{"dataPoints":[{"timeUnixNano":"1700000000000000000","asInt":"3"}]}}]}]}]}"#;

/// The sum of `field=N` over the lines of `log` that contain `what`.
fn received(log: &str, what: &str, field: &str) -> u64 {
    log.lines()
        .filter(|l| l.contains(what))
        .filter_map(|l| {
            let at = l.find(&format!(" {field}="))? + field.len() + 2;
            let digits: String = l[at..]
                .chars()
                .skip_while(|c| !c.is_ascii_digit())
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse::<u64>().ok()
        })
        .sum()
}

/// The view of `upstream` on `/api/v1/forward`.
fn upstream<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["upstream"] == name)
        .unwrap_or_else(|| panic!("no upstream {name} in {v}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_accepted_request_reaches_a_real_receiver_while_one_upstream_is_slow_and_one_down() {
    if !require(&support::cli::python3(), &["--version"]) {
        return;
    }
    let Some(rotel) = rotel_agent() else { return };
    let dir = temp_dir("forward");
    let (rg, rh, slow, down) = (free_port(), free_port(), free_port(), free_port());
    let rotel_log = dir.join("rotel.log");
    let _rotel = Peer(
        Command::new(&rotel)
            .args([
                "start",
                "--otlp-grpc-endpoint",
                &format!("127.0.0.1:{rg}"),
                "--otlp-http-endpoint",
                &format!("127.0.0.1:{rh}"),
                "--exporter",
                "blackhole",
                "--debug-log",
                "traces",
                "--debug-log",
                "logs",
                "--debug-log",
                "metrics",
            ])
            .env("NO_COLOR", "1")
            .stdout(std::fs::File::create(&rotel_log).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .expect("start rotel-agent"),
    );
    let slow_log = dir.join("slow.log");
    let _slow = Peer(
        Command::new(support::cli::python3())
            .args(["-c", SLOW, &slow.to_string()])
            .arg(&slow_log)
            .spawn()
            .unwrap(),
    );
    listening(SocketAddr::from(([127, 0, 0, 1], rg))).await;
    listening(SocketAddr::from(([127, 0, 0, 1], rh))).await;
    listening(SocketAddr::from(([127, 0, 0, 1], slow))).await;

    let config = dir.join("toolsize.toml");
    std::fs::write(
        &config,
        "[forward]\nqueue_requests = 4\nconcurrency = 2\nretry_for = \"2s\"\ntimeout = \"1s\"\n\
         [alerts]\nevaluation_interval = \"1s\"\n",
    )
    .unwrap();
    let names = [
        format!("http://127.0.0.1:{rh}"),
        format!("grpc://127.0.0.1:{rg}"),
        format!("http://127.0.0.1:{slow}"),
        format!("grpc://127.0.0.1:{down}"),
    ];
    let mut args = vec!["--config", config.to_str().unwrap()];
    for n in &names {
        args.extend(["--forward", n.as_str()]);
    }
    let d = Binary::start_with_env(&args, None, &[("RUST_LOG", "error")]);

    // 6 trace requests of 5 spans (the first holds a result over the 16 KiB ceiling), 3 log
    // requests of 2 records, 3 metrics requests (the last as OTLP/JSON), 100 ms apart.
    let client = reqwest::Client::new();
    let mut slowest = Duration::ZERO;
    let mut alert_after = None;
    let started = Instant::now();
    for (i, kind) in MIX.iter().enumerate() {
        let i = i as u64;
        let (path, ctype, body) = match kind {
            Kind::Traces => {
                let bytes = |k: u64| if i == 0 && k == 0 { 40_000 } else { 900 };
                let spans = (0..5)
                    .map(|k| own_span(i * 10 + k, "fetch", bytes(k)))
                    .collect();
                let body = request("agent", spans).encode_to_vec();
                ("/v1/traces", "application/x-protobuf", body)
            }
            Kind::Logs => (
                "/v1/logs",
                "application/x-protobuf",
                logs_request(2).encode_to_vec(),
            ),
            Kind::Metrics => (
                "/v1/metrics",
                "application/x-protobuf",
                metrics_request().encode_to_vec(),
            ),
            Kind::MetricsJson => ("/v1/metrics", "application/json", METRICS_JSON.to_vec()),
        };
        let t = Instant::now();
        let r = client
            .post(format!("http://{}{path}", d.http))
            .header("content-type", ctype)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        slowest = slowest.max(t.elapsed());
        if alert_after.is_none() {
            let firing = get_json(d.admin, "/api/v1/alerts").await;
            if !firing["firing"].as_array().unwrap().is_empty() {
                alert_after = Some(started.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        slowest < Duration::from_millis(500),
        "an export waited on an upstream: {slowest:?}"
    );
    let alert_after = match alert_after {
        Some(t) => t,
        None => {
            wait_for(
                "the over-ceiling alert",
                Duration::from_secs(30),
                || async {
                    let v = get_json(d.admin, "/api/v1/alerts").await;
                    (!v["firing"].as_array().unwrap().is_empty()).then_some(())
                },
            )
            .await;
            started.elapsed()
        }
    };
    assert!(
        alert_after < Duration::from_secs(3),
        "the alert waited on an upstream: {alert_after:?}"
    );

    // Everything drains: the receivers got every request, the down upstream gave up on each.
    let v = wait_for("the queues to drain", Duration::from_secs(30), || async {
        let v = get_json(d.admin, "/api/v1/forward").await;
        let done = v["upstreams"]
            .as_array()
            .unwrap()
            .iter()
            .all(|u| u["queued"] == 0);
        done.then_some(v)
    })
    .await;
    for name in &names[..3] {
        let u = upstream(&v, name);
        assert_eq!(
            (
                u["sent"].as_u64(),
                u["queue_full"].as_u64(),
                u["gave_up"].as_u64()
            ),
            (Some(12), Some(0), Some(0)),
            "{name}: {u}"
        );
    }
    let u = upstream(&v, &names[3]);
    assert_eq!(u["sent"], 0, "{u}");
    assert_eq!(
        u["queue_full"].as_u64().unwrap() + u["gave_up"].as_u64().unwrap(),
        12,
        "every request offered to the down upstream is counted once: {u}"
    );
    assert!(u["queue_full"].as_u64().unwrap() > 0, "{u}");
    assert!(u["retries"].as_u64().unwrap() > 0, "{u}");
    assert!(u["last_error"].as_str().unwrap().contains("connect"), "{u}");

    // What rotel-agent received, over both protocols: every span, log record and data point.
    let traces = MIX.iter().filter(|k| matches!(k, Kind::Traces)).count() as u64;
    let want_spans = 2 * 5 * traces;
    let deadline = Instant::now() + Duration::from_secs(10);
    let log = loop {
        let log = std::fs::read_to_string(&rotel_log).unwrap_or_default();
        if received(&log, "Received traces", "spans") == want_spans || Instant::now() > deadline {
            break log;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        received(&log, "Received traces", "spans"),
        want_spans,
        "{log}"
    );
    let count = |k: Kind| {
        MIX.iter()
            .filter(|m| std::mem::discriminant(*m) == std::mem::discriminant(&k))
            .count() as u64
    };
    assert_eq!(
        received(&log, "Received logs", "logs"),
        2 * 2 * count(Kind::Logs),
        "{log}"
    );
    let metrics_sent = count(Kind::Metrics) + count(Kind::MetricsJson);
    assert_eq!(
        received(&log, "Received metrics", "metrics"),
        2 * metrics_sent,
        "{log}"
    );
    let slow_paths = std::fs::read_to_string(&slow_log).unwrap();
    assert_eq!(slow_paths.lines().count(), 12, "{slow_paths}");
    assert!(slow_paths.lines().any(|p| p == "/v1/metrics"));

    // The same counts on /metrics.
    let m = metrics(d.admin).await;
    let line = |up: &str, outcome: &str| {
        format!("toolsize_forward_requests_total{{upstream=\"{up}\",outcome=\"{outcome}\"}}")
    };
    assert_eq!(sample(&m, &line(&names[0], "sent")), Some(12.0));
    assert_eq!(
        sample(&m, &line(&names[3], "queue_full")).unwrap()
            + sample(&m, &line(&names[3], "gave_up")).unwrap(),
        12.0
    );
    assert!(m.contains("toolsize_forward_queue_requests{"));
    d.stop();
}

/// `https://` and `grpcs://` upstreams: the certificate is checked against the system's roots
/// plus `SSL_CERT_FILE`; a forwarder that does not trust the upstream's CA gives each request up
/// (counted, with the handshake's error) and never hangs. The upstream is a TLS `toolsize serve`
/// (its OTLP/HTTP and OTLP/gRPC listeners with a certificate of a test CA).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_upstreams_are_checked_against_the_trusted_roots() {
    if !require("openssl", &["version"]) {
        return;
    }
    let dir = temp_dir("forward-tls");
    support::tls::make_certs(&dir);
    let (cert, key, ca) = (
        dir.join("server.pem"),
        dir.join("server.key"),
        dir.join("ca.pem"),
    );
    let up = Binary::start_with_env(
        &[
            "--tls-cert-file",
            cert.to_str().unwrap(),
            "--tls-key-file",
            key.to_str().unwrap(),
        ],
        None,
        &[("RUST_LOG", "error")],
    );
    let config = dir.join("forward.toml");
    std::fs::write(
        &config,
        "[forward]\nretry_for = \"1s\"\ntimeout = \"1s\"\nconcurrency = 1\n",
    )
    .unwrap();
    let names = [
        format!("https://localhost:{}", up.http.port()),
        format!("grpcs://localhost:{}", up.grpc.port()),
    ];
    let args = [
        "--config",
        config.to_str().unwrap(),
        "--forward",
        names[0].as_str(),
        "--forward",
        names[1].as_str(),
    ];
    let trusting = Binary::start_with_env(
        &args,
        None,
        &[
            ("RUST_LOG", "error"),
            ("SSL_CERT_FILE", ca.to_str().unwrap()),
        ],
    );
    let wary = Binary::start_with_env(&args, None, &[("RUST_LOG", "error")]);
    let body = request("agent", vec![own_span(1, "fetch", 900)]).encode_to_vec();
    for d in [&trusting, &wary] {
        let r = reqwest::Client::new()
            .post(format!("http://{}/v1/traces", d.http))
            .header("content-type", "application/x-protobuf")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let drained = |admin: SocketAddr| async move {
        wait_for("the queues to drain", Duration::from_secs(30), || async {
            let v = get_json(admin, "/api/v1/forward").await;
            let done = v["upstreams"]
                .as_array()
                .unwrap()
                .iter()
                .all(|u| u["queued"] == 0);
            done.then_some(v)
        })
        .await
    };
    let v = drained(trusting.admin).await;
    for name in &names {
        let u = upstream(&v, name);
        assert_eq!(
            (u["sent"].as_u64(), u["gave_up"].as_u64()),
            (Some(1), Some(0)),
            "{u}"
        );
    }
    let v = drained(wary.admin).await;
    for name in &names {
        let u = upstream(&v, name);
        assert_eq!(
            (u["sent"].as_u64(), u["gave_up"].as_u64()),
            (Some(0), Some(1)),
            "{u}"
        );
        let e = u["last_error"].as_str().unwrap_or_default();
        assert!(e.contains("TLS") || e.contains("certificate"), "{u}");
    }
    // What the upstream received: both requests, counted on its own (TLS) admin listener.
    let out = Command::new("curl")
        .args(["-sf", "--cacert", ca.to_str().unwrap()])
        .arg(format!(
            "https://localhost:{}/api/v1/tools",
            up.admin.port()
        ))
        .output()
        .expect("curl");
    let tools: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(tools["tools"][0]["tool"], "fetch", "{tools}");
    assert_eq!(tools["tools"][0]["count"], 2, "{tools}");
}

/// The peers' ports (four above) come from below the kernel's ephemeral range, where no
/// outgoing connection of a test beside them can take one before its peer binds it.
#[test]
fn peer_ports_are_below_the_ephemeral_range_and_distinct() {
    use support::ports::{ephemeral_range, FLOOR};
    let (low, _) = ephemeral_range();
    let ports: Vec<u16> = (0..50).map(|_| free_port()).collect();
    let mut distinct = ports.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), ports.len(), "{ports:?}");
    assert!(low > FLOOR + 1_000, "ephemeral range starts at {low}");
    assert!(
        ports.iter().all(|&p| (FLOOR..low).contains(&p)),
        "{ports:?}"
    );
}
