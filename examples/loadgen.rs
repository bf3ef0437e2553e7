//! Load generator for the collector: drives `toolsize serve` over OTLP/HTTP (protobuf) and
//! reports spans/s, the daemon's CPU time per span (from `/proc/<pid>/stat`), and whether every
//! span sent is accounted for in the daemon's self-metrics.
//!
//! ```text
//! cargo build --release --features collector --bin toolsize --example loadgen
//! target/release/examples/loadgen [--seconds 10] [--connections 4] [--spans-per-request 512]
//!                                 [--bin target/release/toolsize]
//! ```
//!
//! It starts the daemon itself on ephemeral loopback ports, sends pre-encoded requests (the
//! 512-span mix of `examples/common/workload.rs`, as `benches/collector.rs` does: 60 % measured
//! tool spans, 20 % tool spans with ~2 KiB of content, 20 % LLM spans) on keep-alive HTTP/1.1
//! connections, then reads `/metrics`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[path = "common/workload.rs"]
mod workload;

fn arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the command name: state is field 3, utime 14, stime 15 (1-based).
    let get = |i: usize| {
        f.get(i - 3)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    get(14) + get(15)
}

fn clock_ticks_per_sec() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

/// One keep-alive connection posting bodies until `deadline`.
async fn worker(
    addr: std::net::SocketAddr,
    bodies: Arc<Vec<Vec<u8>>>,
    spans_per_request: u64,
    deadline: Instant,
    sent: Arc<AtomicU64>,
    refused: Arc<AtomicU64>,
) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).ok();
    let mut buf = vec![0u8; 64 * 1024];
    let mut i = 0usize;
    while Instant::now() < deadline {
        let body = &bodies[i % bodies.len()];
        i += 1;
        let head = format!(
            "POST /v1/traces HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/x-protobuf\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await.expect("write");
        stream.write_all(body).await.expect("write");
        // Read one response: headers, then content-length bytes.
        let mut got = 0usize;
        let (status, header_end, content_len) = loop {
            let n = stream.read(&mut buf[got..]).await.expect("read");
            assert!(n > 0, "daemon closed the connection");
            got += n;
            if let Some(end) = buf[..got].windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                let status: u16 = head[9..12].parse().unwrap_or(0);
                let len = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0usize);
                break (status, end + 4, len);
            }
        };
        while got < header_end + content_len {
            let n = stream.read(&mut buf[got..]).await.expect("read");
            assert!(n > 0);
            got += n;
        }
        sent.fetch_add(spans_per_request, Ordering::Relaxed);
        if status != 200 {
            refused.fetch_add(spans_per_request, Ordering::Relaxed);
        }
    }
}

fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let seconds: u64 = arg("--seconds", 10);
    let connections: usize = arg("--connections", 4);
    let spans_per_request: u64 = arg("--spans-per-request", 512);
    let default_bin = std::env::current_exe()
        .ok()
        .and_then(|p| Some(p.parent()?.parent()?.join("toolsize")))
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "toolsize".into());
    let bin: String = arg("--bin", default_bin);

    let mut child = Command::new(&bin)
        .args([
            "serve",
            "--otlp-grpc-addr",
            "127.0.0.1:0",
            "--otlp-http-addr",
            "127.0.0.1:0",
            "--admin-addr",
            "127.0.0.1:0",
        ])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ready: serde_json::Value = serde_json::from_str(&line).expect("ready line");
    let http: std::net::SocketAddr = ready["otlp_http"].as_str().unwrap().parse().unwrap();
    let admin = ready["admin"].as_str().unwrap().to_string();
    let pid = child.id();

    let bodies: Arc<Vec<Vec<u8>>> = Arc::new(
        (0..16)
            .map(|s| workload::request("loadgen", s, spans_per_request))
            .collect(),
    );
    println!(
        "daemon pid {pid}; {connections} connections, {spans_per_request} spans/request ({} bytes), {seconds}s",
        bodies[0].len()
    );

    let sent = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let ticks0 = cpu_ticks(pid);
    let start = Instant::now();
    let deadline = start + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for _ in 0..connections {
        tasks.push(tokio::spawn(worker(
            http,
            bodies.clone(),
            spans_per_request,
            deadline,
            sent.clone(),
            refused.clone(),
        )));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let elapsed = start.elapsed().as_secs_f64();
    let ticks = cpu_ticks(pid) - ticks0;
    let sent = sent.load(Ordering::Relaxed);
    let refused_seen = refused.load(Ordering::Relaxed);

    let metrics = {
        let mut s = TcpStream::connect(&admin).await.unwrap();
        s.write_all(
            format!("GET /metrics HTTP/1.1\r\nhost: {admin}\r\nconnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.unwrap();
        String::from_utf8_lossy(&out).into_owned()
    };
    let accepted = sample(&metrics, "toolsize_spans_accepted_total{kind=\"tool\"}")
        + sample(&metrics, "toolsize_spans_accepted_total{kind=\"other\"}");
    let refused = sample(
        &metrics,
        "toolsize_spans_refused_total{reason=\"overloaded\"}",
    ) + sample(&metrics, "toolsize_spans_refused_total{reason=\"invalid\"}");
    let calls: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("toolsize_tool_calls_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    let cpu_us = ticks as f64 * 1e6 / clock_ticks_per_sec() as f64;
    let accounted = (accepted + refused) as u64 == sent;

    println!("spans sent:            {sent}");
    println!("spans/s:               {:.0}", sent as f64 / elapsed);
    println!(
        "daemon CPU:            {:.2} s ({:.3} µs/span)",
        cpu_us / 1e6,
        cpu_us / sent.max(1) as f64
    );
    println!("accepted (self-metrics): {accepted}, refused: {refused} (client saw {refused_seen} refused)");
    println!("tool calls recorded:   {calls}");
    println!(
        "every span accounted for: {}",
        if accounted { "yes" } else { "NO" }
    );

    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let _ = child.wait();
    if !accounted {
        std::process::exit(1);
    }
}
