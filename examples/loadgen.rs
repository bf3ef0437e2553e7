//! Load generator for the collector: drives `toolsize serve` (or any OTLP/HTTP receiver) and
//! reports what was offered, accepted and refused, the accepted spans per second, and the
//! receiver's CPU time per *accepted* span (from `/proc/<pid>/stat`, in 10 ms clock ticks; and
//! exactly, its threads' run time from `/proc/<pid>/task/*/schedstat`), and its own (a sender of
//! pre-encoded requests: what sending these bytes once costs). A span answered 503 is not
//! throughput: only spans answered 200 count.
//!
//! ```text
//! cargo build --release --features collector --bin toolsize --example loadgen
//! target/release/examples/loadgen [--mix storm|quiet|storm-utf8|large|both] [--seconds 10] [--connections 4]
//!     [--spans-per-request 512] [--tools 40] [--rate SPANS_PER_S] [--arrivals spread|lockstep]
//!     [--scrape-ms MS]
//!     [--alertmanager URL] [--signal traces|logs] [--forward URL] [--bin target/release/toolsize]
//! target/release/examples/loadgen --target 127.0.0.1:4318 --pid PID   # another receiver
//! ```
//!
//! - `--mix storm`: half of the measured results over the 16 KiB ceiling with 4,099 argument
//!   hashes; `quiet`: none over it; `both` runs quiet, then storm, each on a fresh daemon, and
//!   prints the ratio of CPU per accepted span (the storm's cost). `storm-utf8`: the storm with
//!   1.5–2 KB of accented Latin text as the OTel GenAI spans' results; `large`: that, with one
//!   span in 64 an OpenInference `TOOL` span of 60 KB `output.value` (with `--signal logs`:
//!   one Claude Code `tool_result` record in 32 carrying 30,000 characters in `tool.output`).
//! - `--tools`: how many tools the spans spread over (one series each); 40 by default.
//! - `--rate`: paces the offered load (spans/s over all connections); unpaced by default.
//! - `--arrivals`: how paced requests arrive. `spread` (the default): the connections take
//!   turns, one request every interval ÷ connections, a steady stream at the rate, as from
//!   agents exporting on their own timers. `lockstep`: every connection sends at the same
//!   instant, a burst of one request per connection each interval (the same rate, arriving
//!   together; what this tool did before `--arrivals`).
//! - `--scrape-ms`: scrapes `/metrics` every MS milliseconds during the run (the cost of
//!   continuous scraping shows as a lower accepted rate).
//! - `--alertmanager URL`: the daemon sends its alerts there; every 250 ms during the run one
//!   oversized result of a tool never seen before is sent, and the time until its alert is in
//!   Alertmanager's `/api/v2/alerts` is printed (p50, p99, max).
//! - `--signal logs`: the requests carry Claude Code `tool_result` log records (`POST /v1/logs`,
//!   one record per "span" of the counts), sized as the spans of the mix.
//! - `--forward URL`: the daemon relays everything it accepts to `URL` (`toolsize serve
//!   --forward`); what it sent, dropped and gave up is printed after the run.
//! - `--target ADDR --pid PID`: no daemon is started; the load goes to `ADDR` (`POST /v1/traces`)
//!   and the CPU of process `PID` is measured. Accepted = spans of requests answered 2xx.
//!
//! The requests are the 512-span mixes of `examples/common/workload.rs` (60 % measured tool
//! spans, 20 % tool spans with 1.5–2 KiB of content, 20 % LLM spans), pre-encoded, on
//! keep-alive HTTP/1.1 connections. Load generator and receiver share the machine: compare runs made side by side.

use std::io::{BufRead, BufReader, IoSlice};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[path = "common/workload.rs"]
mod workload;

use workload::Mix;

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

/// The run time of each thread of a process, nanoseconds, by thread id
/// (`/proc/PID/task/*/schedstat`: exact, where `/proc/PID/stat` counts 10 ms clock ticks).
fn thread_run_ns(pid: u32) -> std::collections::HashMap<u64, u64> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Default::default();
    };
    tasks
        .filter_map(|t| {
            let t = t.ok()?;
            let tid = t.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
            Some((tid, stat.split_whitespace().next()?.parse().ok()?))
        })
        .collect()
}

/// The run time of a process's threads since `before` ([`thread_run_ns`]), nanoseconds; a
/// thread that ended meanwhile is not counted (the daemon's threads live as long as it does).
fn run_ns_since(pid: u32, before: &std::collections::HashMap<u64, u64>) -> u64 {
    thread_run_ns(pid)
        .iter()
        .map(|(tid, ns)| ns.saturating_sub(before.get(tid).copied().unwrap_or(0)))
        .sum()
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

/// Sends one HTTP/1.1 request on `stream` and reads the response: (status, body).
async fn exchange(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    head: &str,
    body: &[u8],
) -> (u16, Vec<u8>) {
    // Head and body leave in one `writev`, as an HTTP client with the body in hand sends them
    // (two writes would put the head in a segment of its own and wake the receiver for it).
    let mut parts = [IoSlice::new(head.as_bytes()), IoSlice::new(body)];
    let mut parts = &mut parts[..];
    while !parts.is_empty() {
        let n = stream.write_vectored(parts).await.expect("write");
        assert!(n > 0, "the receiver closed the connection");
        IoSlice::advance_slices(&mut parts, n);
    }
    let mut got = 0usize;
    let (status, header_end, content_len) = loop {
        if got == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        let n = stream.read(&mut buf[got..]).await.expect("read");
        assert!(n > 0, "the receiver closed the connection");
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
    if buf.len() < header_end + content_len {
        buf.resize(header_end + content_len, 0);
    }
    while got < header_end + content_len {
        let n = stream.read(&mut buf[got..]).await.expect("read");
        assert!(n > 0);
        got += n;
    }
    (status, buf[header_end..header_end + content_len].to_vec())
}

#[derive(Default)]
struct Counts {
    offered: AtomicU64,
    accepted: AtomicU64,
    refused: AtomicU64,
}

/// One keep-alive connection posting bodies until `deadline`; when paced, `(first, interval)`:
/// the first request at `first`, then one every `interval`.
async fn worker(
    addr: SocketAddr,
    path: &'static str,
    bodies: Arc<Vec<Vec<u8>>>,
    spans_per_request: u64,
    deadline: Instant,
    pace: Option<(Instant, Duration)>,
    counts: Arc<Counts>,
) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).ok();
    let mut buf = vec![0u8; 64 * 1024];
    let mut i = 0usize;
    let mut next = pace.map(|(first, _)| first);
    while Instant::now() < deadline {
        if let (Some(at), Some((_, iv))) = (next.as_mut(), pace) {
            tokio::time::sleep_until((*at).into()).await;
            *at += iv;
        }
        let body = &bodies[i % bodies.len()];
        i += 1;
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/x-protobuf\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        let (status, _) = exchange(&mut stream, &mut buf, &head, body).await;
        counts
            .offered
            .fetch_add(spans_per_request, Ordering::Relaxed);
        if (200..300).contains(&status) {
            counts
                .accepted
                .fetch_add(spans_per_request, Ordering::Relaxed);
        } else {
            counts
                .refused
                .fetch_add(spans_per_request, Ordering::Relaxed);
        }
    }
}

async fn get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .expect("write");
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.expect("read");
    String::from_utf8_lossy(&out).into_owned()
}

fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// The daemon under test, started on ephemeral loopback ports.
struct Daemon {
    child: Child,
    http: SocketAddr,
    admin: String,
}

fn start_daemon(bin: &str, alertmanager: Option<&str>, forward: Option<&str>) -> Daemon {
    let mut args = vec![
        "serve",
        "--otlp-grpc-addr",
        "127.0.0.1:0",
        "--otlp-http-addr",
        "127.0.0.1:0",
        "--admin-addr",
        "127.0.0.1:0",
    ];
    if let Some(url) = alertmanager {
        args.extend(["--alertmanager-url", url]);
    }
    if let Some(url) = forward {
        args.extend(["--forward", url]);
    }
    let mut child = Command::new(bin)
        .args(&args)
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("ready line");
    let ready: serde_json::Value = serde_json::from_str(&line).expect("ready line");
    Daemon {
        child,
        http: ready["otlp_http"]
            .as_str()
            .expect("otlp_http")
            .parse()
            .expect("addr"),
        admin: ready["admin"].as_str().expect("admin").to_string(),
    }
}

/// Sends an oversized result of a new tool every 250 ms until `deadline`; returns the delays
/// until each alert was in Alertmanager.
async fn probe_alerts(http: SocketAddr, am: String, deadline: Instant) -> Vec<Duration> {
    use opentelemetry_proto::tonic::common::v1::any_value::Value;
    use opentelemetry_proto::tonic::trace::v1::Span;
    use prost::Message;
    let am = am
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let mut delays = Vec::new();
    let mut stream = TcpStream::connect(http).await.expect("connect");
    let mut buf = vec![0u8; 64 * 1024];
    for probe in 0u64.. {
        if Instant::now() + Duration::from_millis(500) > deadline {
            break;
        }
        let tool = format!("probe_{}_{probe}", std::process::id());
        let span = Span {
            trace_id: vec![7; 16],
            span_id: (probe + 1).to_be_bytes().to_vec(),
            name: format!("execute_tool {tool}"),
            kind: 1,
            start_time_unix_nano: 1,
            end_time_unix_nano: 2,
            attributes: vec![
                workload::kv(
                    "gen_ai.operation.name",
                    Value::StringValue("execute_tool".into()),
                ),
                workload::kv("gen_ai.tool.name", Value::StringValue(tool.clone())),
                workload::kv("tool.result.bytes", Value::IntValue(40_000)),
            ],
            ..Default::default()
        };
        let body = workload::envelope("loadgen-probe", vec![span]).encode_to_vec();
        let head = format!(
            "POST /v1/traces HTTP/1.1\r\nhost: {http}\r\ncontent-type: application/x-protobuf\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        let sent = Instant::now();
        let (status, _) = exchange(&mut stream, &mut buf, &head, &body).await;
        if status != 200 {
            continue;
        }
        let path = format!("/api/v2/alerts?filter=tool%3D%22{tool}%22");
        loop {
            let text = get(&am, &path).await;
            if text.contains(&tool) {
                delays.push(sent.elapsed());
                break;
            }
            if sent.elapsed() > Duration::from_secs(5) {
                println!("probe {tool}: not in Alertmanager after 5 s");
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    delays
}

struct Outcome {
    offered: u64,
    accepted: u64,
    refused: u64,
    elapsed: f64,
    cpu_us: f64,
}

impl Outcome {
    fn per_accepted(&self) -> f64 {
        self.cpu_us / self.accepted.max(1) as f64
    }
}

struct Run {
    seconds: u64,
    connections: usize,
    spans_per_request: u64,
    tools: u64,
    rate: u64,
    /// Paced connections send at the same instants instead of taking turns.
    lockstep: bool,
    scrape_ms: u64,
    alertmanager: Option<String>,
    /// Claude Code `tool_result` log records (`POST /v1/logs`) instead of spans.
    logs: bool,
}

async fn run(run: &Run, mix: Mix, target: SocketAddr, pid: u32, admin: Option<&str>) -> Outcome {
    let bodies: Arc<Vec<Vec<u8>>> = Arc::new(
        (0..16)
            .map(|s| {
                if run.logs {
                    workload::logs_request("loadgen", s, run.spans_per_request, mix)
                } else {
                    workload::request_tools("loadgen", s, run.spans_per_request, mix, run.tools)
                }
            })
            .collect(),
    );
    println!(
        "{mix:?}: {} connections, {} tools, {} spans/request ({} bytes), {}s, {}",
        run.connections,
        run.tools,
        run.spans_per_request,
        bodies[0].len(),
        run.seconds,
        if run.rate > 0 {
            format!(
                "paced at {} spans/s, arrivals {}",
                run.rate,
                if run.lockstep { "lockstep" } else { "spread" }
            )
        } else {
            "unpaced".into()
        }
    );
    let interval = (run.rate > 0).then(|| {
        Duration::from_secs_f64(
            run.spans_per_request as f64 * run.connections as f64 / run.rate as f64,
        )
    });
    let counts = Arc::new(Counts::default());
    let ticks0 = cpu_ticks(pid);
    let run0 = thread_run_ns(pid);
    let own0 = cpu_ticks(std::process::id());
    let start = Instant::now();
    let deadline = start + Duration::from_secs(run.seconds);
    let mut tasks = Vec::new();
    for k in 0..run.connections {
        // Spread: connection k starts k / connections of an interval late, so requests arrive
        // one at a time, evenly spaced; lockstep: all at once.
        let first = match interval {
            Some(iv) if !run.lockstep => start + iv.mul_f64(k as f64 / run.connections as f64),
            _ => start,
        };
        tasks.push(tokio::spawn(worker(
            target,
            if run.logs { "/v1/logs" } else { "/v1/traces" },
            bodies.clone(),
            run.spans_per_request,
            deadline,
            interval.map(|iv| (first, iv)),
            counts.clone(),
        )));
    }
    let scraper = (run.scrape_ms > 0).then(|| {
        let admin = admin.expect("scraping needs the daemon").to_string();
        let every = Duration::from_millis(run.scrape_ms);
        tokio::spawn(async move {
            let mut n = 0u64;
            let mut bytes = 0usize;
            while Instant::now() < deadline {
                bytes += get(&admin, "/metrics").await.len();
                n += 1;
                tokio::time::sleep(every).await;
            }
            (n, bytes)
        })
    });
    let probes = run
        .alertmanager
        .clone()
        .map(|am| tokio::spawn(probe_alerts(target, am, deadline)));
    for t in tasks {
        t.await.expect("worker");
    }
    let elapsed = start.elapsed().as_secs_f64();
    let ticks = cpu_ticks(pid) - ticks0;
    let run_ns = run_ns_since(pid, &run0);
    let own = cpu_ticks(std::process::id()) - own0;
    if let Some(s) = scraper {
        let (n, bytes) = s.await.expect("scraper");
        println!(
            "  scrapes:                {n} of {:.1} MB each",
            bytes as f64 / n.max(1) as f64 / 1e6
        );
    }
    if let Some(p) = probes {
        let mut d = p.await.expect("probes");
        d.sort();
        if d.is_empty() {
            println!("  new tool → Alertmanager: no probe arrived");
        } else {
            let q = |f: f64| d[((d.len() - 1) as f64 * f).round() as usize].as_secs_f64() * 1e3;
            println!(
                "  new tool → Alertmanager: {} probes, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
                d.len(),
                q(0.5),
                q(0.99),
                q(1.0)
            );
        }
    }
    let out = Outcome {
        offered: counts.offered.load(Ordering::Relaxed),
        accepted: counts.accepted.load(Ordering::Relaxed),
        refused: counts.refused.load(Ordering::Relaxed),
        elapsed,
        cpu_us: ticks as f64 * 1e6 / clock_ticks_per_sec() as f64,
    };
    let own_us = own as f64 * 1e6 / clock_ticks_per_sec() as f64;
    println!("  spans offered:          {}", out.offered);
    println!(
        "  spans accepted:         {} ({:.1} %)",
        out.accepted,
        100.0 * out.accepted as f64 / out.offered.max(1) as f64
    );
    println!("  spans refused:          {}", out.refused);
    println!(
        "  accepted spans/s:       {:.0}",
        out.accepted as f64 / out.elapsed
    );
    println!(
        "  receiver CPU:           {:.2} s, {:.3} µs per accepted span",
        out.cpu_us / 1e6,
        out.per_accepted()
    );
    println!(
        "  receiver run time:      {:.3} s, {:.4} µs per accepted span (its threads' run time in ns, not ticks)",
        run_ns as f64 / 1e9,
        run_ns as f64 / 1e3 / out.accepted.max(1) as f64
    );
    // The sender's own cost: the requests are pre-encoded, so this is writing them to the
    // socket and reading the answers (kernel time mostly), what any relay of these bytes pays.
    println!(
        "  load generator CPU:     {:.2} s, {:.3} µs per accepted span (its own: sending and reading answers)",
        own_us / 1e6,
        own_us / out.accepted.max(1) as f64
    );
    out
}

/// Checks the daemon's own counters against what the load generator saw.
async fn account(admin: &str, out: &Outcome, logs: bool) -> bool {
    let metrics = get(admin, "/metrics").await;
    let (accepted, refused) = if logs {
        let accepted = sample(
            &metrics,
            "toolsize_log_records_accepted_total{kind=\"tool\"}",
        ) + sample(
            &metrics,
            "toolsize_log_records_accepted_total{kind=\"other\"}",
        );
        let refused = sample(
            &metrics,
            "toolsize_log_records_refused_total{reason=\"overloaded\"}",
        );
        (accepted, refused)
    } else {
        let accepted = sample(&metrics, "toolsize_spans_accepted_total{kind=\"tool\"}")
            + sample(&metrics, "toolsize_spans_accepted_total{kind=\"other\"}");
        let refused = sample(
            &metrics,
            "toolsize_spans_refused_total{reason=\"overloaded\"}",
        ) + sample(&metrics, "toolsize_spans_refused_total{reason=\"invalid\"}");
        (accepted, refused)
    };
    let matches: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("toolsize_alert_matches_total{"))
        .filter(|l| l.contains("outcome=\"dropped\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    // Probe spans are accepted too.
    let ok = accepted as u64 >= out.accepted && (accepted + refused) as u64 >= out.offered;
    println!(
        "  daemon counters:        accepted {accepted}, refused {refused}, alert matches dropped {matches}; every span accounted for: {}",
        if ok { "yes" } else { "NO" }
    );
    ok
}

/// Prints what the daemon relayed to its upstream, once its queue has drained (at most 10 s).
async fn forwarded(admin: &str) {
    let mut last = serde_json::Value::Null;
    for _ in 0..100 {
        let resp = get(admin, "/api/v1/forward").await;
        let body = resp.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        last = serde_json::from_str(body).unwrap_or_default();
        let queued: u64 = last["upstreams"]
            .as_array()
            .map_or(0, |a| a.iter().filter_map(|u| u["queued"].as_u64()).sum());
        if queued == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    for u in last["upstreams"].as_array().into_iter().flatten() {
        println!(
            "  forwarded to {}:   sent {} requests, dropped (queue full) {}, given up {}, queued {}",
            u["upstream"].as_str().unwrap_or("?"),
            u["sent"],
            u["queue_full"],
            u["gave_up"],
            u["queued"]
        );
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mix: String = arg("--mix", "storm".to_string());
    let config = Run {
        seconds: arg("--seconds", 10),
        connections: arg("--connections", 4),
        spans_per_request: arg("--spans-per-request", 512),
        tools: arg("--tools", 40),
        rate: arg("--rate", 0),
        lockstep: match arg("--arrivals", "spread".to_string()).as_str() {
            "spread" => false,
            "lockstep" => true,
            other => {
                eprintln!("--arrivals must be spread or lockstep, not {other:?}");
                std::process::exit(2);
            }
        },
        scrape_ms: arg("--scrape-ms", 0),
        alertmanager: std::env::args()
            .position(|a| a == "--alertmanager")
            .and_then(|i| std::env::args().nth(i + 1)),
        logs: arg("--signal", "traces".to_string()) == "logs",
    };
    // Relay everything the daemon accepts to this upstream (`toolsize serve --forward`).
    let forward = std::env::args()
        .position(|a| a == "--forward")
        .and_then(|i| std::env::args().nth(i + 1));
    let mixes: Vec<Mix> = match mix.as_str() {
        "both" => vec![Mix::Quiet, Mix::Storm],
        name => match Mix::ALL.into_iter().find(|m| m.name() == name) {
            Some(m) => vec![m],
            None => {
                eprintln!(
                    "--mix: expected one of {} or both, got {name:?}",
                    Mix::ALL.map(Mix::name).join(", ")
                );
                std::process::exit(2);
            }
        },
    };
    let target: Option<SocketAddr> = arg::<String>("--target", String::new()).parse().ok();
    if let Some(target) = target {
        let pid: u32 = arg("--pid", 0);
        if pid == 0 {
            eprintln!("--target needs --pid (the receiver's process, for its CPU time)");
            std::process::exit(2);
        }
        for m in mixes {
            run(&config, m, target, pid, None).await;
        }
        return;
    }
    let default_bin = std::env::current_exe()
        .ok()
        .and_then(|p| Some(p.parent()?.parent()?.join("toolsize")))
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "toolsize".into());
    let bin: String = arg("--bin", default_bin);
    let mut outcomes = Vec::new();
    let mut accounted = true;
    for m in mixes {
        let mut d = start_daemon(&bin, config.alertmanager.as_deref(), forward.as_deref());
        let pid = d.child.id();
        let out = run(&config, m, d.http, pid, Some(&d.admin)).await;
        accounted &= account(&d.admin, &out, config.logs).await;
        if forward.is_some() {
            forwarded(&d.admin).await;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        let _ = d.child.wait();
        outcomes.push(out);
    }
    if let [quiet, storm] = &outcomes[..] {
        println!(
            "storm / quiet: CPU per accepted span ×{:.2}, accepted spans/s ×{:.2}",
            storm.per_accepted() / quiet.per_accepted(),
            (storm.accepted as f64 / storm.elapsed) / (quiet.accepted as f64 / quiet.elapsed)
        );
    }
    if !accounted {
        std::process::exit(1);
    }
}
