//! The latency `toolsize mcp` adds to a `tools/call`: p50 and p99 of the round trip through the
//! proxy against the same server called directly, in the same run, and their ratio.
//!
//! ```text
//! cargo build --release --bin toolsize
//! cargo run --release --example mcp_latency                 # the built-in minimal server
//! cargo run --release --example mcp_latency -- --calls 5000
//! cargo run --release --example mcp_latency -- --server python3 tests/mcp/server.py
//! ```
//!
//! With no `--server`, the server is this program itself (`--serve`): a minimal stdio MCP server
//! answering `initialize`, `tools/list` and a `payload` tool returning `bytes` bytes of JSON text
//! at once, so the figures are the proxy's own cost rather than a slow server's. Each size is
//! measured directly and through `toolsize mcp --max-output 16384` (the default limit), in
//! alternating order, over `--calls` sequential calls after a warm-up; the 100 KB result is cut
//! by the proxy, so its row includes the cut. The `toolsize` binary is looked for next to this
//! example's directory (`target/release/toolsize`), or in `$TOOLSIZE_BIN`.

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

fn measure(peer: &mut Peer, bytes: usize, calls: usize) -> (Vec<Duration>, usize) {
    let mut times = Vec::with_capacity(calls);
    let mut len = 0;
    for _ in 0..calls {
        let t = Instant::now();
        len = peer.request(
            "tools/call",
            json!({"name": "payload", "arguments": {"bytes": bytes}}),
        );
        times.push(t.elapsed());
    }
    times.sort();
    (times, len)
}

fn toolsize_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("TOOLSIZE_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().and_then(|p| p.parent()).expect("target dir");
    let bin = dir.join("toolsize");
    assert!(
        bin.is_file(),
        "{} not found: run `cargo build --release --bin toolsize` first, or set TOOLSIZE_BIN",
        bin.display()
    );
    bin
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--serve") {
        serve();
        return;
    }
    let mut calls = 2000usize;
    let mut server: Vec<String> = vec![
        std::env::current_exe()
            .unwrap()
            .to_string_lossy()
            .into_owned(),
        "--serve".to_owned(),
    ];
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--calls" => calls = it.next().and_then(|n| n.parse().ok()).expect("--calls N"),
            "--server" => {
                server = it.by_ref().cloned().collect();
                break;
            }
            other => panic!("unknown argument {other}"),
        }
    }
    let bin = toolsize_bin();
    let mut proxied = vec![
        bin.to_string_lossy().into_owned(),
        "mcp".to_owned(),
        "--max-output".to_owned(),
        "16384".to_owned(),
        "--".to_owned(),
    ];
    proxied.extend(server.iter().cloned());
    let is_builtin = server.get(1).map(String::as_str) == Some("--serve");

    println!(
        "tools/call round trip, {calls} sequential calls per row after {} warm-up, server: {}",
        calls / 10,
        if is_builtin {
            "built-in minimal".to_owned()
        } else {
            server.join(" ")
        }
    );
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
    println!("(result: the tool's text; each row's response also carries the JSON-RPC framing)");
    let mut direct = Peer::start(&server);
    let mut through = Peer::start(&proxied);
    for bytes in SIZES {
        measure(&mut direct, bytes, calls / 10);
        measure(&mut through, bytes, calls / 10);
        // Alternate halves so drift (frequency, other load) hits both alike.
        let (mut d, _) = measure(&mut direct, bytes, calls / 2);
        let (mut p, plen) = measure(&mut through, bytes, calls / 2);
        let (d2, _) = measure(&mut direct, bytes, calls / 2);
        let (p2, _) = measure(&mut through, bytes, calls / 2);
        d.extend(d2);
        p.extend(p2);
        d.sort();
        p.sort();
        let (d50, p50) = (percentile(&d, 0.5), percentile(&p, 0.5));
        let (d99, p99) = (percentile(&d, 0.99), percentile(&p, 0.99));
        let us = |t: Duration| format!("{:.1} µs", t.as_secs_f64() * 1e6);
        println!(
            "{:>9} {:>11} {:>11} {:>11} {:>11} {:>7.2}x {:>7.2}x {:>14}",
            format!("{} B", bytes),
            us(d50),
            us(p50),
            us(d99),
            us(p99),
            p50.as_secs_f64() / d50.as_secs_f64(),
            p99.as_secs_f64() / d99.as_secs_f64(),
            us(p50.saturating_sub(d50)),
        );
        if plen > 17_000 {
            eprintln!("warning: a proxied response was {plen} bytes: the cut did not apply");
        }
    }
}
