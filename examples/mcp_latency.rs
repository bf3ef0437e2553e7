//! The latency `toolsize mcp` adds to a `tools/call`, on stdio and over Streamable HTTP: p50 and
//! p99 of the round trip through the proxy against the same server called directly, in the same
//! run, and their ratio.
//!
//! ```text
//! cargo run --release --features cli --example mcp_latency                  # both transports
//! cargo run --release --features cli --example mcp_latency -- --transport http --calls 5000
//! cargo run --release --features cli --example mcp_latency -- --server python3 tests/mcp/server.py
//! ```
//!
//! With no `--server`, the server is this program itself: on stdio (`--serve`) a minimal MCP
//! server answering `initialize`, `tools/list` and a `payload` tool returning `bytes` bytes of
//! JSON text at once; over HTTP the same tool on a loopback port, answering each `POST /mcp` with
//! `application/json` on a kept-alive connection, so the figures are the proxy's own cost rather
//! than a slow server's. Each size is measured directly and through `toolsize mcp --max-output
//! 16384` (the default limit; over HTTP `--listen 127.0.0.1:0 --upstream` the built-in server),
//! alternating direct and proxied halves, over `--calls` sequential calls after a warm-up; the
//! 100 KB result is cut by the proxy, so its row includes the cut. A last line compares the HTTP
//! proxy's time for that cut with the stdio proxy's. The `toolsize` binary is looked for next to
//! this example's directory (`target/release/toolsize`, built there with `cargo build` when it
//! is missing), or in `$TOOLSIZE_BIN`.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const SIZES: [usize; 3] = [100, 10_000, 100_000];

/// JSON text of about `bytes` bytes: rows of 40 bytes each.
fn payload(bytes: usize) -> String {
    let rows: Vec<Value> = (0..bytes / 40)
        .map(|i| json!({"id": i, "body": format!("{:0>22}", i)}))
        .collect();
    json!({ "rows": rows }).to_string()
}

fn serve() {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut cache: Option<(usize, String)> = None;
    for line in stdin.lock().lines() {
        let Ok(line) = line else { return };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(id) = msg.get("id").cloned() else {
            continue;
        };
        let result = match msg["method"].as_str() {
            Some("initialize") => json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "mcp-latency", "version": "1"}
            }),
            Some("tools/list") => json!({"tools": [{
                "name": "payload",
                "inputSchema": {"type": "object", "properties": {"bytes": {"type": "integer"}},
                                "required": ["bytes"]}
            }]}),
            Some("tools/call") => {
                let n = msg["params"]["arguments"]["bytes"].as_u64().unwrap_or(100) as usize;
                let text = match &cache {
                    Some((m, t)) if *m == n => t.clone(),
                    _ => {
                        let t = payload(n);
                        cache = Some((n, t.clone()));
                        t
                    }
                };
                json!({"content": [{"type": "text", "text": text}]})
            }
            _ => json!({}),
        };
        let reply = json!({"jsonrpc": "2.0", "id": id, "result": result});
        if writeln!(out, "{reply}").and_then(|()| out.flush()).is_err() {
            return;
        }
    }
}

struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Peer {
    fn start(command: &[String]) -> Peer {
        let mut child = Command::new(&command[0])
            .args(&command[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .env_remove("TOOLSIZE_MAX_TOOL_OUTPUT")
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut p = Peer {
            child,
            stdin,
            stdout,
            next_id: 1,
        };
        p.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "mcp-latency", "version": "1"}}),
        );
        writeln!(
            p.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )
        .unwrap();
        p.request("tools/list", json!({}));
        p
    }

    /// Sends a request and reads lines until its response; returns the response's length.
    fn request(&mut self, method: &str, params: Value) -> usize {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
        let mut buf = String::new();
        loop {
            buf.clear();
            if self.stdout.read_line(&mut buf).unwrap() == 0 {
                panic!("the server closed its output");
            }
            // Only responses carry our id at this position; notifications are skipped.
            if buf.contains(&format!("\"id\":{id},")) || buf.contains(&format!("\"id\":{id}}}")) {
                return buf.len();
            }
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn toolsize_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("TOOLSIZE_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().and_then(|p| p.parent()).expect("target dir");
    let bin = dir.join("toolsize");
    if !bin.is_file() {
        // A fresh clone: build the binary in this example's profile.
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--features", "cli", "--bin", "toolsize"]);
        if dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let ok = cmd.status().is_ok_and(|s| s.success());
        assert!(
            ok && bin.is_file(),
            "{} not found and could not be built: run `cargo build --release --features cli --bin toolsize`, or set TOOLSIZE_BIN",
            bin.display()
        );
    }
    bin
}

/// One row's figures.
struct Row {
    d50: Duration,
    p50: Duration,
    d99: Duration,
    p99: Duration,
}

fn us(t: Duration) -> String {
    format!("{:.1} µs", t.as_secs_f64() * 1e6)
}

fn header(title: &str) {
    println!("{title}");
    println!(
        "{:>9} {:>11} {:>11} {:>11} {:>11} {:>8} {:>8} {:>14}",
        "result",
        "direct p50",
        "proxy p50",
        "direct p99",
        "proxy p99",
        "p50 x",
        "p99 x",
        "p50 added"
    );
}

fn print_row(bytes: usize, r: &Row) {
    println!(
        "{:>9} {:>11} {:>11} {:>11} {:>11} {:>7.2}x {:>7.2}x {:>14}",
        format!("{} B", bytes),
        us(r.d50),
        us(r.p50),
        us(r.d99),
        us(r.p99),
        r.p50.as_secs_f64() / r.d50.as_secs_f64(),
        r.p99.as_secs_f64() / r.d99.as_secs_f64(),
        us(r.p50.saturating_sub(r.d50)),
    );
}

/// Direct and proxied halves, alternating, after a warm-up of each.
fn compare(
    calls: usize,
    mut direct: impl FnMut(usize) -> (Duration, usize),
    mut proxied: impl FnMut(usize) -> (Duration, usize),
) -> (Row, usize) {
    let run = |f: &mut dyn FnMut(usize) -> (Duration, usize), n: usize| {
        let mut times = Vec::with_capacity(n);
        let mut len = 0;
        for _ in 0..n {
            let (t, l) = f(0);
            times.push(t);
            len = l;
        }
        (times, len)
    };
    run(&mut direct, calls / 10);
    run(&mut proxied, calls / 10);
    let (mut d, _) = run(&mut direct, calls / 2);
    let (mut p, plen) = run(&mut proxied, calls / 2);
    let (d2, _) = run(&mut direct, calls / 2);
    let (p2, _) = run(&mut proxied, calls / 2);
    d.extend(d2);
    p.extend(p2);
    d.sort();
    p.sort();
    let row = Row {
        d50: percentile(&d, 0.5),
        p50: percentile(&p, 0.5),
        d99: percentile(&d, 0.99),
        p99: percentile(&p, 0.99),
    };
    (row, plen)
}

fn stdio_rows(bin: &std::path::Path, server: &[String], calls: usize) -> Vec<Row> {
    let mut proxied = vec![
        bin.to_string_lossy().into_owned(),
        "mcp".to_owned(),
        "--max-output".to_owned(),
        "16384".to_owned(),
        "--".to_owned(),
    ];
    proxied.extend(server.iter().cloned());
    let is_builtin = server.get(1).map(String::as_str) == Some("--serve");
    header(&format!(
        "stdio: tools/call round trip, {calls} sequential calls per row after {} warm-up, server: {}",
        calls / 10,
        if is_builtin {
            "built-in minimal".to_owned()
        } else {
            server.join(" ")
        }
    ));
    let mut direct = Peer::start(server);
    let mut through = Peer::start(&proxied);
    let mut rows = Vec::new();
    for bytes in SIZES {
        let call = |peer: &mut Peer| {
            let t = Instant::now();
            let len = peer.request(
                "tools/call",
                json!({"name": "payload", "arguments": {"bytes": bytes}}),
            );
            (t.elapsed(), len)
        };
        let (row, plen) = compare(calls, |_| call(&mut direct), |_| call(&mut through));
        print_row(bytes, &row);
        if plen > 17_000 {
            eprintln!("warning: a proxied response was {plen} bytes: the cut did not apply");
        }
        rows.push(row);
    }
    rows
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--serve") {
        serve();
        return;
    }
    let mut calls = 2000usize;
    let mut transport = "both".to_owned();
    let mut server: Option<Vec<String>> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--calls" => calls = it.next().and_then(|n| n.parse().ok()).expect("--calls N"),
            "--transport" => transport = it.next().cloned().expect("--transport stdio|http|both"),
            "--server" => {
                server = Some(it.by_ref().cloned().collect());
                break;
            }
            other => panic!("unknown argument {other}"),
        }
    }
    let bin = toolsize_bin();
    println!("(result: the tool's text; each row's response also carries the JSON-RPC framing)");
    let mut stdio = None;
    if transport == "stdio" || transport == "both" || server.is_some() {
        let server = server.clone().unwrap_or_else(|| {
            vec![
                std::env::current_exe()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned(),
                "--serve".to_owned(),
            ]
        });
        stdio = Some(stdio_rows(&bin, &server, calls));
    }
    if server.is_none() && (transport == "http" || transport == "both") {
        println!();
        let rows = http::rows(&bin, calls);
        if let (Some(s), Some(h)) = (stdio.as_ref().and_then(|r| r.last()), rows.last()) {
            println!();
            println!(
                "100 KB cut to 16 KiB, proxied p50: HTTP {} against stdio {}: {:.2}x",
                us(h.p50),
                us(s.p50),
                h.p50.as_secs_f64() / s.p50.as_secs_f64()
            );
        }
    }
}

/// The same measurement over Streamable HTTP.
mod http {
    use std::convert::Infallible;
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use http_body_util::{BodyExt, Full};
    use hyper::body::Bytes;
    use hyper::{Request, Response};
    use hyper_util::rt::TokioIo;
    use serde_json::{json, Value};

    use super::{compare, header, payload, print_row, Row, SIZES};

    /// The built-in server: `tools/call` of `payload` answered with JSON at once.
    async fn serve(listener: tokio::net::TcpListener) {
        let cache: Arc<Vec<(usize, String)>> =
            Arc::new(SIZES.iter().map(|n| (*n, payload(*n))).collect());
        loop {
            let Ok((conn, _)) = listener.accept().await else {
                return;
            };
            let _ = conn.set_nodelay(true);
            let cache = Arc::clone(&cache);
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    let cache = Arc::clone(&cache);
                    async move {
                        let body = req
                            .into_body()
                            .collect()
                            .await
                            .map(|b| b.to_bytes())
                            .unwrap_or_default();
                        let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        let n =
                            msg["params"]["arguments"]["bytes"].as_u64().unwrap_or(100) as usize;
                        let text = cache
                            .iter()
                            .find(|(m, _)| *m == n)
                            .map_or_else(|| payload(n), |(_, t)| t.clone());
                        let reply = json!({"jsonrpc": "2.0", "id": msg["id"],
                            "result": {"content": [{"type": "text", "text": text}], "resultType": "complete"}});
                        let mut resp = Response::new(Full::new(Bytes::from(reply.to_string())));
                        resp.headers_mut()
                            .insert("content-type", "application/json".parse().unwrap());
                        Ok::<_, Infallible>(resp)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(conn), svc)
                    .await;
            });
        }
    }

    /// A kept-alive connection to `addr`.
    struct Conn {
        sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
        addr: String,
        next_id: u64,
    }

    impl Conn {
        async fn open(addr: &str) -> Conn {
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let _ = tcp.set_nodelay(true);
            let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
                .await
                .unwrap();
            tokio::spawn(conn);
            Conn {
                sender,
                addr: addr.to_owned(),
                next_id: 1,
            }
        }

        async fn call(&mut self, bytes: usize) -> (Duration, usize) {
            let id = self.next_id;
            self.next_id += 1;
            let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "payload", "arguments": {"bytes": bytes},
                           "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                     "io.modelcontextprotocol/clientCapabilities": {}}}});
            let req = Request::post("/mcp")
                .header("host", &self.addr)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/call")
                .header("mcp-name", "payload")
                .body(Full::new(Bytes::from(body.to_string())))
                .unwrap();
            let t = Instant::now();
            self.sender.ready().await.unwrap();
            let resp = self.sender.send_request(req).await.unwrap();
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            (t.elapsed(), body.len())
        }
    }

    /// The proxy in front of `upstream`; its address, read from the line it logs.
    fn proxy(bin: &std::path::Path, upstream: &str) -> (std::process::Child, String) {
        let mut child = Command::new(bin)
            .args([
                "mcp",
                "--max-output",
                "16384",
                "--listen",
                "127.0.0.1:0",
                "--upstream",
                upstream,
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .env_remove("TOOLSIZE_MAX_TOOL_OUTPUT")
            .spawn()
            .expect("start toolsize mcp --listen");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let addr = loop {
            let line = lines
                .next()
                .expect("the proxy said where it listens")
                .unwrap();
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                if let Some(a) = v["listen"].as_str() {
                    break a.to_owned();
                }
            }
        };
        std::thread::spawn(move || for _ in lines {});
        (child, addr)
    }

    pub(super) fn rows(bin: &std::path::Path, calls: usize) -> Vec<Row> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let server = listener.local_addr().unwrap().to_string();
        rt.spawn(serve(listener));
        let (mut child, proxy_addr) = proxy(bin, &format!("http://{server}/mcp"));
        header(&format!(
            "Streamable HTTP (JSON responses, one kept-alive connection each): tools/call round trip, {calls} sequential calls per row after {} warm-up, server: built-in minimal",
            calls / 10
        ));
        let mut direct = rt.block_on(Conn::open(&server));
        let mut through = rt.block_on(Conn::open(&proxy_addr));
        let mut out = Vec::new();
        for bytes in SIZES {
            let (row, plen) = compare(
                calls,
                |_| rt.block_on(direct.call(bytes)),
                |_| rt.block_on(through.call(bytes)),
            );
            print_row(bytes, &row);
            if plen > 17_000 {
                eprintln!("warning: a proxied response was {plen} bytes: the cut did not apply");
            }
            out.push(row);
        }
        let _ = child.kill();
        let _ = child.wait();
        out
    }
}
