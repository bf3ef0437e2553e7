//! Shared helpers of the collector integration tests: OTLP request builders, a daemon on
//! ephemeral loopback ports (in process or as the real binary), and peers (promtool, python3)
//! that must exist: a missing peer fails the test unless `TOOLSIZE_ALLOW_MISSING_PEERS=1`.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value, KeyValue};
use opentelemetry_proto::tonic::trace::v1::Span;
use toolsize::collector::Config;

#[path = "../../examples/common/workload.rs"]
mod workload;

/// A configuration listening on ephemeral loopback ports, memory only.
pub fn loopback_config() -> Config {
    let mut c = Config::default();
    c.otlp.grpc_addr = "127.0.0.1:0".parse().unwrap();
    c.otlp.http_addr = "127.0.0.1:0".parse().unwrap();
    c.admin.addr = "127.0.0.1:0".parse().unwrap();
    c
}

pub(crate) use workload::kv;

pub fn s(k: &str, v: &str) -> KeyValue {
    kv(k, Value::StringValue(v.into()))
}
pub fn i(k: &str, v: i64) -> KeyValue {
    kv(k, Value::IntValue(v))
}

/// A span with distinct ids derived from `n`.
pub fn span(n: u64, name: &str, attrs: Vec<KeyValue>) -> Span {
    let mut trace_id = vec![0u8; 16];
    trace_id[8..].copy_from_slice(&(n + 1).to_be_bytes());
    Span {
        trace_id,
        span_id: (n + 1).to_be_bytes().to_vec(),
        name: name.into(),
        kind: 1,
        start_time_unix_nano: 1_700_000_000_000_000_000,
        end_time_unix_nano: 1_700_000_000_000_000_000 + 2_000_000,
        attributes: attrs,
        ..Default::default()
    }
}

/// A toolsize-contract tool span: `bytes` measured.
pub fn own_span(n: u64, tool: &str, bytes: i64) -> Span {
    span(
        n,
        &format!("execute_tool {tool}"),
        vec![
            s("gen_ai.operation.name", "execute_tool"),
            s("gen_ai.tool.name", tool),
            s("tool.name", tool),
            s("tool.args_hash", &format!("{:012x}", n % 7)),
            i("tool.result.bytes", bytes),
            kv("tool.result.truncated", Value::BoolValue(false)),
            kv("tool.latency_ms", Value::DoubleValue(2.0)),
        ],
    )
}

/// A request holding `spans` under `service`.
pub fn request(service: &str, spans: Vec<Span>) -> ExportTraceServiceRequest {
    workload::envelope(service, spans)
}

/// A fresh, empty directory for one test (`prefix` and the process id make it unique).
pub fn temp_dir(prefix: &str) -> super::Scratch {
    super::Scratch::new(prefix)
}

/// A loopback port free at the time of the call, for a peer to bind later: outside the
/// kernel's ephemeral range, so no outgoing connection takes it meanwhile ([`super::ports`]).
pub fn free_port() -> u16 {
    super::ports::free_port()
}

/// Polls `f` every 20 ms until it returns `Some`, failing the test after `timeout`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: std::time::Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The ready line `toolsize serve` prints on standard output once it listens (its addresses),
/// read from `child`'s piped stdout.
pub fn ready_line(child: &mut Child) -> serde_json::Value {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad ready line {line:?}: {e}"))
}

/// True when `TOOLSIZE_ALLOW_MISSING_PEERS=1` outside CI: a missing peer then skips its test
/// loudly instead of failing it. With `CI=true` a missing peer always fails.
pub fn missing_peers_allowed() -> bool {
    std::env::var("CI").map_or(true, |v| v != "true")
        && std::env::var("TOOLSIZE_ALLOW_MISSING_PEERS").is_ok_and(|v| v == "1")
}

/// Whether a peer program runs. Its absence fails the test, unless
/// `TOOLSIZE_ALLOW_MISSING_PEERS=1`, where the test is skipped loudly (returns `false`).
pub fn require(program: &str, args: &[&str]) -> bool {
    let ok = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        if !missing_peers_allowed() {
            panic!(
                "{program} is required by this test (scripts/test.sh installs it); set \
                 TOOLSIZE_ALLOW_MISSING_PEERS=1 to skip tests whose peer is missing"
            );
        }
        eprintln!(
            "\n*** SKIPPED: {program} not available and TOOLSIZE_ALLOW_MISSING_PEERS=1: this \
             test checked NOTHING (scripts/test.sh installs {program}) ***\n"
        );
    }
    ok
}

/// Runs `promtool check metrics` on an exposition; returns promtool's output on failure.
pub fn promtool_check(text: &str) -> Result<(), String> {
    use std::io::Write;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The real `toolsize serve` binary on ephemeral ports.
pub struct Binary {
    pub child: Child,
    pub grpc: SocketAddr,
    pub http: SocketAddr,
    pub admin: SocketAddr,
}

impl Binary {
    pub fn start(extra: &[&str], data_dir: Option<&Path>) -> Self {
        Self::start_with_env(extra, data_dir, &[])
    }

    /// The binary with the layer stack `stack` and `extra` flags, logging errors only (an
    /// over-ceiling alert would log a line per result).
    pub fn start_quiet(stack: &str, extra: &[&str], data_dir: Option<&Path>) -> Self {
        let mut args = vec!["--stack", stack];
        args.extend_from_slice(extra);
        Self::start_with_env(&args, data_dir, &[("RUST_LOG", "error")])
    }

    /// [`Binary::start`] with extra environment variables.
    pub fn start_with_env(extra: &[&str], data_dir: Option<&Path>, env: &[(&str, &str)]) -> Self {
        Self::start_command("serve", extra, data_dir, env)
    }

    /// `toolsize <command>` (`serve` or `demo`) on ephemeral ports.
    pub fn start_command(
        command: &str,
        extra: &[&str],
        data_dir: Option<&Path>,
        env: &[(&str, &str)],
    ) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolsize"));
        cmd.envs(env.iter().copied());
        cmd.args([
            command,
            "--otlp-grpc-addr",
            "127.0.0.1:0",
            "--otlp-http-addr",
            "127.0.0.1:0",
            "--admin-addr",
            "127.0.0.1:0",
        ]);
        cmd.args(extra);
        if let Some(d) = data_dir {
            cmd.arg("--data-dir").arg(d);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn toolsize");
        let v = ready_line(&mut child);
        let addr = |k: &str| v[k].as_str().unwrap().parse().unwrap();
        Self {
            grpc: addr("otlp_grpc"),
            http: addr("otlp_http"),
            admin: addr("admin"),
            child,
        }
    }

    pub fn signal(&mut self, sig: &str) {
        let st = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
    }

    /// SIGTERM and wait for a clean exit.
    pub fn stop(mut self) {
        self.signal("-TERM");
        let st = self.child.wait().unwrap();
        assert!(st.success(), "toolsize serve exited with {st}");
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// POSTs a protobuf request to OTLP/HTTP.
pub async fn post_proto(http: SocketAddr, req: &ExportTraceServiceRequest) -> reqwest::Response {
    use prost::Message;
    reqwest::Client::new()
        .post(format!("http://{http}/v1/traces"))
        .header("content-type", "application/x-protobuf")
        .body(req.encode_to_vec())
        .send()
        .await
        .unwrap()
}

/// GETs `/api/v1/tools` (JSON).
pub async fn tools(admin: SocketAddr, query: &str) -> serde_json::Value {
    reqwest::Client::new()
        .get(format!("http://{admin}/api/v1/tools{query}"))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .map(|b| serde_json::from_slice(&b).unwrap())
        .unwrap()
}

/// The rows of `service` in `/api/v1/tools?window=5m`, by tool, once at least `expect` tools
/// are there (fails after 20 s).
pub async fn rows_by_tool(
    admin: SocketAddr,
    service: &str,
    expect: usize,
) -> std::collections::BTreeMap<String, serde_json::Value> {
    wait_for(
        "the daemon's rows",
        std::time::Duration::from_secs(20),
        || async {
            let table = tools(admin, "?window=5m").await;
            let rows: std::collections::BTreeMap<String, serde_json::Value> = table["tools"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["service"] == service)
                .map(|r| (r["tool"].as_str().unwrap().to_owned(), r.clone()))
                .collect();
            (rows.len() >= expect).then_some(rows)
        },
    )
    .await
}

/// GETs an admin path as JSON, e.g. `/api/v1/layers`.
pub async fn get_json(admin: SocketAddr, path: &str) -> serde_json::Value {
    let r = reqwest::get(format!("http://{admin}{path}")).await.unwrap();
    assert!(r.status().is_success(), "GET {path}: {}", r.status());
    serde_json::from_slice(&r.bytes().await.unwrap()).unwrap()
}

/// GETs `/metrics`.
pub async fn metrics(admin: SocketAddr) -> String {
    reqwest::Client::new()
        .get(format!("http://{admin}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The value of one sample line of an exposition (`name{labels}` exactly as written).
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// A small deterministic generator (xorshift64*), so the sizes are the same on every run.
pub struct Rng(pub u64);

impl Rng {
    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Log-normal with the given median and shape (Box-Muller).
    pub fn lognormal(&mut self, median: f64, sigma: f64) -> u64 {
        let (u1, u2) = (self.next_f64().max(1e-12), self.next_f64());
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        (median * (sigma * z).exp()).round().max(1.0) as u64
    }
}

/// Exact nearest-rank quantile.
pub fn exact_quantile(values: &[u64], q: f64) -> u64 {
    let mut v = values.to_vec();
    v.sort_unstable();
    v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1]
}

/// The real `toolsize serve` on ephemeral ports with its standard error collected (for tests of
/// what it logs).
pub struct Logged {
    pub child: Child,
    pub http: SocketAddr,
    pub admin: SocketAddr,
    log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Logged {
    /// `toolsize serve args…` with `env`, once its ready line is out.
    pub fn start(args: &[&str], env: &[(&str, &str)]) -> Self {
        use std::io::Read;
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolsize"))
            .args(["serve", "--otlp-grpc-addr", "127.0.0.1:0"])
            .args([
                "--otlp-http-addr",
                "127.0.0.1:0",
                "--admin-addr",
                "127.0.0.1:0",
            ])
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn toolsize");
        let ready = ready_line(&mut child);
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let mut stderr = child.stderr.take().unwrap();
        let sink = log.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let addr = |k: &str| ready[k].as_str().unwrap().parse().unwrap();
        Self {
            http: addr("otlp_http"),
            admin: addr("admin"),
            child,
            log,
        }
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits (30 s at most) for a log line holding `text`, and returns it.
    pub async fn line_with(&self, text: &str) -> String {
        wait_for(text, std::time::Duration::from_secs(30), || {
            let log = self.log();
            async move {
                log.lines()
                    .rev()
                    .find(|l| l.contains(text))
                    .map(str::to_string)
            }
        })
        .await
    }

    pub fn signal(&self, sig: &str) {
        let st = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
