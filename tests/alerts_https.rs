//! Alert sinks over `https`: a Slack-shaped and a PagerDuty-shaped webhook on a TLS receiver
//! whose certificate a test CA signed (made here with `openssl`), trusted through
//! `SSL_CERT_FILE`; a real Alertmanager serving `https`; a receiver the daemon must not trust is
//! a counted delivery failure (the daemon keeps serving), a peer that never finishes the
//! handshake a failure after the 5 s post timeout, and an unreadable `SSL_CERT_FILE` stops the
//! start with an error naming it.
#![cfg(feature = "tls")]

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use support::collector::*;
use support::tls::make_certs;
use tokio_rustls::rustls;

/// What the receiver got: (path, authorization header, JSON body), in order.
type Got = Arc<Mutex<Vec<(String, Option<String>, serde_json::Value)>>>;

/// An HTTP/1.1 receiver over TLS with `dir/server.pem`, answering `status` to every POST.
async fn tls_receiver(dir: &Path, status: u16) -> (SocketAddr, Got) {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(dir.join("server.pem"))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let got: Got = Arc::default();
    let sink = got.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, sink) = (acceptor.clone(), sink.clone());
            tokio::spawn(async move {
                // A client that refuses our certificate ends here.
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let sink = sink.clone();
                        async move {
                            let path = req.uri().path().to_string();
                            let auth = req
                                .headers()
                                .get("authorization")
                                .and_then(|v| v.to_str().ok())
                                .map(str::to_string);
                            let body = req.into_body().collect().await?.to_bytes();
                            let json = serde_json::from_slice(&body).unwrap();
                            sink.lock().unwrap().push((path, auth, json));
                            let mut resp = hyper::Response::new(http_body_util::Full::new(
                                hyper::body::Bytes::from_static(b"{}"),
                            ));
                            *resp.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
                            Ok::<_, hyper::Error>(resp)
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    (addr, got)
}

fn ca_env(dir: &Path) -> String {
    dir.join("ca.pem").to_string_lossy().into_owned()
}

/// Posts one over-ceiling result of `tool` to the daemon.
async fn oversize(d: &Binary, tool: &str) {
    let r = post_proto(d.http, &request("agent", vec![own_span(1, tool, 30_000)])).await;
    assert!(r.status().is_success());
}

async fn notifications(d: &Binary, sink: &str, outcome: &str) -> f64 {
    let series =
        format!(r#"toolsize_alert_notifications_total{{sink="{sink}",outcome="{outcome}"}}"#);
    sample(&metrics(d.admin).await, &series).unwrap_or(0.0)
}

/// Waits until the daemon counted one successful post (the receiver holds the body before the
/// daemon reads its answer).
async fn one_success(d: &Binary, sink: &str) {
    wait_for("the success counted", Duration::from_secs(30), || async {
        (notifications(d, sink, "success").await == 1.0).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_and_pagerduty_webhooks_over_https_trusting_ssl_cert_file() {
    if !require("openssl", &["version"]) {
        return;
    }
    let dir = temp_dir("alerts-https");
    make_certs(&dir);
    let (hook, got) = tls_receiver(&dir, 200).await;

    // Slack: the path is the key; the message is one line per alert.
    let url = format!("https://localhost:{}/services/T0/B0/k3y", hook.port());
    let ca = ca_env(&dir);
    let slack = Binary::start_with_env(
        &["--webhook-url", &url, "--webhook-format", "slack"],
        None,
        &[("SSL_CERT_FILE", ca.as_str())],
    );
    oversize(&slack, "fetch").await;
    let (path, auth, body) = wait_for("the Slack message", Duration::from_secs(30), || async {
        got.lock().unwrap().first().cloned()
    })
    .await;
    assert_eq!(path, "/services/T0/B0/k3y");
    assert_eq!(auth, None);
    let text = body["text"].as_str().unwrap();
    assert!(text.contains("*FIRING* `ToolResultOverCeiling`"), "{text}");
    assert!(
        text.contains("/runbook#toolresultoverceiling|runbook>"),
        "{text}"
    );
    assert_eq!(body.as_object().unwrap().len(), 1, "{body}");
    one_success(&slack, "webhook").await;
    // A change-only sink: no resend of the same alert.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(got.lock().unwrap().len(), 1);
    slack.stop();
    got.lock().unwrap().clear();

    // PagerDuty Events v2: the routing key in the body, never as a bearer token.
    let url = format!("https://127.0.0.1:{}/v2/enqueue", hook.port());
    let pd = Binary::start_with_env(
        &["--webhook-url", &url, "--webhook-format", "pagerduty"],
        None,
        &[
            ("SSL_CERT_FILE", ca.as_str()),
            ("TOOLSIZE_WEBHOOK_TOKEN", "r0uting-key"),
        ],
    );
    oversize(&pd, "search").await;
    let (path, auth, event) = wait_for("the PagerDuty event", Duration::from_secs(30), || async {
        got.lock().unwrap().first().cloned()
    })
    .await;
    assert_eq!(path, "/v2/enqueue");
    assert_eq!(auth, None, "the routing key is not a bearer token");
    assert_eq!(event["routing_key"], "r0uting-key");
    assert_eq!(event["event_action"], "trigger");
    assert_eq!(event["dedup_key"].as_str().unwrap().len(), 16);
    assert_eq!(event["payload"]["severity"], "critical", "severity=page");
    assert_eq!(event["payload"]["source"], "agent/search");
    assert_eq!(event["payload"]["class"], "ToolResultOverCeiling");
    assert_eq!(event["payload"]["custom_details"]["tool"], "search");
    assert!(event["payload"]["summary"].as_str().unwrap().len() <= 1024);
    assert_eq!(event["links"][0]["text"], "Runbook");
    one_success(&pd, "webhook").await;
    pd.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_signed_by_another_ca_is_a_counted_failure_not_a_hang() {
    if !require("openssl", &["version"]) {
        return;
    }
    let dir = temp_dir("alerts-https-wrong");
    make_certs(&dir);
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    make_certs(&other);
    let (hook, got) = tls_receiver(&dir, 200).await;
    let url = format!("https://127.0.0.1:{}/hook", hook.port());
    let wrong_ca = ca_env(&other);
    let d = Binary::start_with_env(
        &["--webhook-url", &url],
        None,
        &[("SSL_CERT_FILE", wrong_ca.as_str())],
    );
    oversize(&d, "fetch").await;
    let started = Instant::now();
    wait_for("a counted failure", Duration::from_secs(30), || async {
        (notifications(&d, "webhook", "failure").await >= 1.0).then_some(())
    })
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "bounded by the post timeout"
    );
    assert!(got.lock().unwrap().is_empty());
    assert_eq!(notifications(&d, "webhook", "success").await, 0.0);
    // Still serving, and retrying (the failures grow).
    let r = reqwest::get(format!("http://{}/healthz", d.admin))
        .await
        .unwrap();
    assert!(r.status().is_success());
    wait_for("a retry", Duration::from_secs(30), || async {
        (notifications(&d, "webhook", "failure").await >= 2.0).then_some(())
    })
    .await;
    d.stop();
}

#[test]
fn an_unreadable_ssl_cert_file_stops_the_start_naming_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_toolsize"))
        .args([
            "serve",
            "--admin-addr",
            "127.0.0.1:0",
            "--otlp-grpc-addr",
            "127.0.0.1:0",
            "--otlp-http-addr",
            "127.0.0.1:0",
            "--webhook-url",
            "https://hooks.example.com/services/T0/B0/s3cret-path",
        ])
        .env("SSL_CERT_FILE", "/nonexistent/ca.pem")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("alerts.webhook_url"), "{err}");
    assert!(err.contains("SSL_CERT_FILE=/nonexistent/ca.pem"), "{err}");
    assert!(err.contains("https://hooks.example.com"), "{err}");
    assert!(
        !err.contains("s3cret-path"),
        "the URL's path is its key: {err}"
    );

    let out = Command::new(env!("CARGO_BIN_EXE_toolsize"))
        .args([
            "serve",
            "--admin-addr",
            "127.0.0.1:0",
            "--webhook-url",
            "https://events.example.com/v2/enqueue",
            "--webhook-format",
            "pagerduty",
        ])
        .env_remove("TOOLSIZE_WEBHOOK_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("routing key"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_alertmanager_receives_the_alert() {
    if !require("prometheus-alertmanager", &["--version"]) || !require("curl", &["--version"]) {
        return;
    }
    let dir = temp_dir("alerts-https-am");
    make_certs(&dir);
    std::fs::write(
        dir.join("web.yml"),
        format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
            dir.join("server.pem").display(),
            dir.join("server.key").display()
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("alertmanager.yml"),
        "route:\n  receiver: blackhole\nreceivers:\n  - name: blackhole\n",
    )
    .unwrap();
    let port = free_port();
    let am = support::cli::Reaped(
        Command::new("prometheus-alertmanager")
            .arg(format!(
                "--config.file={}",
                dir.join("alertmanager.yml").display()
            ))
            .arg(format!(
                "--web.config.file={}",
                dir.join("web.yml").display()
            ))
            .arg(format!("--storage.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--cluster.listen-address=")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let ca = ca_env(&dir);
    let alerts = || {
        let out = Command::new("curl")
            .args(["-sf", "--cacert", &ca])
            .arg(format!("https://127.0.0.1:{port}/api/v2/alerts"))
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap())
    };
    wait_for(
        "alertmanager over https",
        Duration::from_secs(20),
        || async { alerts() },
    )
    .await;
    let url = format!("https://127.0.0.1:{port}");
    let d = Binary::start_with_env(
        &["--alertmanager-url", &url],
        None,
        &[("SSL_CERT_FILE", ca.as_str())],
    );
    oversize(&d, "fetch").await;
    let alert = wait_for(
        "the alert in alertmanager",
        Duration::from_secs(30),
        || async {
            alerts()?
                .as_array()?
                .iter()
                .find(|a| a["labels"]["tool"] == "fetch")
                .cloned()
        },
    )
    .await;
    assert_eq!(alert["labels"]["alertname"], "ToolResultOverCeiling");
    one_success(&d, "alertmanager").await;
    d.stop();
    drop(am);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_never_finishes_the_handshake_is_a_timed_out_failure() {
    // Accepts connections and never answers: the TLS handshake would wait forever.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = Arc::new(Mutex::new(Vec::new()));
    let keep = held.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            keep.lock().unwrap().push(s);
        }
    });
    let url = format!("https://127.0.0.1:{port}/hook");
    let d = Binary::start_with_env(&["--webhook-url", &url], None, &[]);
    oversize(&d, "fetch").await;
    let started = Instant::now();
    wait_for("a counted failure", Duration::from_secs(30), || async {
        (notifications(&d, "webhook", "failure").await >= 1.0).then_some(())
    })
    .await;
    let took = started.elapsed();
    // Bounded by the 5 s post timeout, handshake included.
    assert!(took >= Duration::from_secs(4), "{took:?}");
    assert!(took < Duration::from_secs(8), "{took:?}");
    assert!(!held.lock().unwrap().is_empty(), "the daemon connected");
    let r = reqwest::get(format!("http://{}/healthz", d.admin))
        .await
        .unwrap();
    assert!(r.status().is_success());
    d.stop();
}
