//! `toolsize mcp` in front of a server that misbehaves (`tests/mcp/misbehave.py`, a real
//! process on stdio, and a real HTTP server for Streamable HTTP): a response over the maximum
//! message size, a server that dies mid-response or exits with calls in flight, a server that
//! never answers. Every call gets a JSON-RPC error under its id, a line goes to standard error,
//! and the proxy keeps serving; memory stays bounded while a 300 MB line passes.
#![cfg(all(feature = "cli", unix))]

#[path = "support/cli.rs"]
mod cli;
#[path = "support/mcp.rs"]
mod mcp;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The proxy in front of `misbehave.py ARGS…`, driven line by line; its standard error kept.
struct Proxied {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Vec<u8>>,
    stderr: Arc<Mutex<String>>,
}

impl Proxied {
    fn start(proxy_args: &[&str], server_args: &[&str]) -> Self {
        let mut child = Command::new(mcp::toolsize())
            .arg("mcp")
            .args(proxy_args)
            .arg("--")
            .arg("python3")
            .arg(mcp::mcp_dir().join("misbehave.py"))
            .args(server_args)
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start toolsize mcp");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                match r.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let err_pipe = child.stderr.take().unwrap();
        let kept = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in BufReader::new(err_pipe).lines().map_while(Result::ok) {
                let mut k = kept.lock().unwrap();
                k.push_str(&line);
                k.push('\n');
            }
        });
        Proxied {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            stderr,
        }
    }

    fn send(&mut self, msg: &Value) {
        let w = self.stdin.as_mut().unwrap();
        w.write_all(msg.to_string().as_bytes()).unwrap();
        w.write_all(b"\n").unwrap();
        w.flush().unwrap();
    }

    /// The next message the client receives, within `secs`.
    fn next(&mut self, secs: u64) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(secs))
            .expect("a message for the client");
        serde_json::from_slice(&line).unwrap_or_else(|e| {
            panic!(
                "the client got a line that is not JSON ({e}): {}",
                String::from_utf8_lossy(&line[..line.len().min(200)])
            )
        })
    }

    /// Whether nothing reaches the client for `ms`.
    fn quiet_for(&self, ms: u64) -> bool {
        self.lines.recv_timeout(Duration::from_millis(ms)).is_err()
    }

    /// Waits until standard error holds `needle`.
    fn stderr_has(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = self.stderr.lock().unwrap().clone();
            if text.contains(needle) || Instant::now() > deadline {
                assert!(text.contains(needle), "{needle:?} not on stderr: {text}");
                return text;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The proxy's peak resident memory so far, in KiB.
    fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM")
    }

    fn exit_code(mut self) -> Option<i32> {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.code();
            }
            assert!(Instant::now() < deadline, "the proxy did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proxied {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn call(id: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "big", "arguments": {}}})
}

fn ping(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
}

#[test]
fn a_response_over_the_cap_is_an_error_under_its_id_wherever_the_id_stands() {
    for mode in ["huge", "huge-id-last"] {
        let mut p = Proxied::start(&["--max-message-bytes", "1048576"], &[mode, "8000000"]);
        p.send(&call(json!("call-1")));
        let answer = p.next(30);
        assert_eq!(answer["id"], json!("call-1"), "{mode}: {answer}");
        assert_eq!(answer["error"]["code"], json!(-32603), "{answer}");
        assert_eq!(answer["error"]["data"]["bytes"], json!(8_000_000));
        assert_eq!(
            answer["error"]["data"]["max_message_bytes"],
            json!(1_048_576)
        );
        p.stderr_has("over the maximum message size");
        // The proxy keeps serving: the next request is relayed and answered.
        p.send(&ping(2));
        let next = p.next(30);
        assert_eq!(next["id"], json!(2), "{next}");
        assert_eq!(next["result"]["seen"], json!(["tools/call", "ping"]));
        // Memory held to a small multiple of the 1 MiB cap, not the 8 MB line.
        let peak = p.peak_rss_kib();
        assert!(peak < 64 * 1024, "{mode}: peak RSS {peak} KiB");
    }
}

#[test]
fn a_300_mb_line_at_the_defaults_keeps_the_proxy_under_512_mib() {
    let mut p = Proxied::start(&[], &["huge", "300000000"]);
    p.send(&call(json!(1)));
    let answer = p.next(300);
    assert_eq!(answer["id"], json!(1), "{answer}");
    assert_eq!(answer["error"]["code"], json!(-32603));
    let peak = p.peak_rss_kib();
    eprintln!("toolsize mcp peak RSS in front of a 300 MB line: {peak} KiB");
    assert!(peak <= 512 * 1024, "peak RSS {peak} KiB");
}

#[test]
fn a_request_over_the_cap_is_answered_and_never_reaches_the_server() {
    let mut p = Proxied::start(&["--max-message-bytes", "65536"], &["silent"]);
    let big = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                     "params": {"name": "x", "arguments": {"blob": "y".repeat(100_000)}}});
    p.send(&big);
    let answer = p.next(30);
    assert_eq!(answer["id"], json!(9), "{answer}");
    assert_eq!(answer["error"]["code"], json!(-32600));
    p.send(&ping(10));
    assert_eq!(p.next(30)["result"]["seen"], json!(["ping"]));
}

#[test]
fn a_server_dying_mid_response_gets_every_call_in_flight_an_error() {
    let mut p = Proxied::start(&[], &["die"]);
    p.send(&call(json!(1)));
    p.send(&call(json!("two")));
    let mut ids = Vec::new();
    for _ in 0..2 {
        let answer = p.next(30);
        assert_eq!(answer["error"]["code"], json!(-32000), "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("exit code 3"),
            "{answer}"
        );
        ids.push(answer["id"].clone());
    }
    ids.sort_by_key(Value::to_string);
    assert_eq!(ids, vec![json!("two"), json!(1)]);
    let err = p.stderr_has("requests in flight");
    assert!(err.contains("ended in the middle of a message"), "{err}");
    // Half a line is never relayed: nothing else reaches the client.
    assert!(p.quiet_for(300));
    assert_eq!(p.exit_code(), Some(3));
}

#[test]
fn a_server_exiting_with_calls_in_flight_gets_each_an_error() {
    let mut p = Proxied::start(&[], &["exit"]);
    p.send(&call(json!(1)));
    p.send(&call(json!(2)));
    let a = p.next(30);
    let b = p.next(30);
    for answer in [&a, &b] {
        assert_eq!(answer["error"]["code"], json!(-32000), "{answer}");
        assert_eq!(answer["error"]["data"]["exit_code"], json!(5), "{answer}");
    }
    p.stderr_has("requests in flight");
    assert_eq!(p.exit_code(), Some(5));
}

#[test]
fn a_call_past_its_timeout_is_answered_cancelled_upstream_and_its_late_answer_dropped() {
    let mut p = Proxied::start(&["--call-timeout", "1"], &["late", "2.5"]);
    let start = Instant::now();
    p.send(&call(json!(1)));
    let answer = p.next(30);
    let waited = start.elapsed();
    assert_eq!(answer["id"], json!(1), "{answer}");
    assert_eq!(answer["error"]["code"], json!(-32001), "{answer}");
    // After the timeout, and before the server's own answer at 2.5 s.
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_millis(2500),
        "{waited:?}"
    );
    p.stderr_has("passed its time");
    // The late answer (at 2.5 s) never reaches the client; the server was told to cancel.
    assert!(p.quiet_for(2500));
    p.send(&ping(2));
    let seen = p.next(30);
    assert_eq!(
        seen["result"]["seen"],
        json!(["tools/call", "notifications/cancelled", "ping"]),
        "{seen}"
    );
}

#[test]
fn bad_limits_are_usage_errors() {
    for args in [
        &["--max-message-bytes", "10"][..],
        &["--call-timeout=-1"][..],
        &["--call-timeout", "NaN"][..],
    ] {
        let out = Command::new(mcp::toolsize())
            .arg("mcp")
            .args(args)
            .args(["--", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err: Value = serde_json::from_slice(&out.stderr)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
        assert!(
            err["error"]["code"]
                .as_str()
                .unwrap()
                .starts_with("INVALID_"),
            "{err}"
        );
    }
}

/// `misbehave_http.py` on a free port, killed when dropped.
struct HttpServer(Child, u16);

impl HttpServer {
    fn start() -> Self {
        let port = mcp::free_port();
        let child = Command::new("python3")
            .arg(mcp::mcp_dir().join("misbehave_http.py"))
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start misbehave_http.py");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the test server did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        HttpServer(child, port)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// POSTs `body` to the proxy; the status, content type and body.
fn post(url: &str, body: &Value) -> (u16, String, String) {
    let resp = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string())
        .send()
        .unwrap();
    let status = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, ct, resp.text().unwrap())
}

fn named_call(id: u64, name: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": {}}})
}

#[test]
fn over_http_every_failure_is_a_json_rpc_error_under_the_call_id() {
    let server = HttpServer::start();
    let upstream = format!("http://127.0.0.1:{}/mcp", server.1);
    let proxy = mcp::HttpProxy::start(
        &upstream,
        &["--max-message-bytes", "1048576", "--call-timeout", "1"],
        &[],
    );
    let error_of = |body: &str| -> Value {
        let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
        v
    };
    // Over the cap: -32603 under the id, the 8 MB never held.
    let (status, ct, body) = post(&proxy.url, &named_call(1, "huge"));
    assert_eq!((status, ct.as_str()), (200, "application/json"), "{body}");
    let v = error_of(&body);
    assert_eq!(
        (v["id"].clone(), v["error"]["code"].clone()),
        (json!(1), json!(-32603))
    );
    // Broken off mid-body: -32000.
    let (status, _, body) = post(&proxy.url, &named_call(2, "break"));
    assert_eq!(status, 200, "{body}");
    let v = error_of(&body);
    assert_eq!(
        (v["id"].clone(), v["error"]["code"].clone()),
        (json!(2), json!(-32000))
    );
    // Past the timeout: -32001, after about a second.
    let start = Instant::now();
    let (status, _, body) = post(&proxy.url, &named_call(3, "slow"));
    let waited = start.elapsed();
    assert_eq!(status, 200, "{body}");
    let v = error_of(&body);
    assert_eq!(
        (v["id"].clone(), v["error"]["code"].clone()),
        (json!(3), json!(-32001))
    );
    // Before the server's own answer at 3 s.
    assert!(waited < Duration::from_secs(3), "{waited:?}");
    // An event stream that breaks before the response: an error event for the call.
    let (status, ct, body) = post(&proxy.url, &named_call(4, "sse_break"));
    assert_eq!((status, ct.as_str()), (200, "text/event-stream"), "{body}");
    let data = body
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap_or_else(|| panic!("no event: {body:?}"));
    let v = error_of(data);
    assert_eq!(
        (v["id"].clone(), v["error"]["code"].clone()),
        (json!(4), json!(-32000))
    );
    assert!(body.starts_with(": working\n\n"), "{body:?}");
    // Still serving.
    let (status, _, body) = post(
        &proxy.url,
        &json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}),
    );
    assert_eq!(
        (status, error_of(&body)["result"].clone()),
        (200, json!({}))
    );
    let stderr = proxy.stop();
    for said in [
        "over the maximum message size",
        "broke off",
        "passed its time",
        "did not come",
    ] {
        assert!(stderr.contains(said), "{said:?} not on stderr: {stderr}");
    }
}
