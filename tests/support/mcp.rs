//! MCP peers for the proxy tests: the official Python SDK's client and a test server on it
//! (`tests/mcp/`), `@modelcontextprotocol/server-everything` from npm (`tests/npm/`), and a raw
//! line client that records every byte a server sends.
#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The built binary.
pub fn toolsize() -> &'static str {
    env!("CARGO_BIN_EXE_toolsize")
}

/// `tests/mcp/…`.
pub fn mcp_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp")
}

/// The Python test server's command line.
pub fn python_server() -> Vec<String> {
    vec![
        super::cli::python3(),
        mcp_dir().join("server.py").to_string_lossy().into_owned(),
    ]
}

fn missing(what: &str, how: &str) -> bool {
    if std::env::var("TOOLSIZE_ALLOW_MISSING_PEERS").is_ok_and(|v| v == "1") {
        eprintln!(
            "\n*** SKIPPED: {what} not available and TOOLSIZE_ALLOW_MISSING_PEERS=1: this test \
             checked NOTHING ({how}) ***\n"
        );
        return false;
    }
    panic!(
        "{what} is required by this test ({how}); set TOOLSIZE_ALLOW_MISSING_PEERS=1 to skip \
         tests whose peer is missing"
    );
}

/// Whether the Python `mcp` SDK is importable. Its absence fails the test unless
/// `TOOLSIZE_ALLOW_MISSING_PEERS=1` (never set in CI).
pub fn require_python_mcp() -> bool {
    let ok = Command::new(super::cli::python3())
        .args(["-c", "import mcp"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok || missing(
        "the Python MCP SDK (mcp)",
        "scripts/test.sh installs it from tests/requirements.txt",
    )
}

/// The command line of `@modelcontextprotocol/server-everything` on stdio, when installed.
/// Its absence fails the test unless `TOOLSIZE_ALLOW_MISSING_PEERS=1`.
pub fn everything_server() -> Option<Vec<String>> {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let node = Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if node && bin.is_file() {
        return Some(vec![
            "node".to_owned(),
            bin.to_string_lossy().into_owned(),
            "stdio".to_owned(),
        ]);
    }
    missing(
        "node and @modelcontextprotocol/server-everything",
        "scripts/test.sh runs npm ci in tests/npm",
    );
    None
}

/// Runs the Python SDK client (`tests/mcp/client.py`) against `command`, making `calls`; returns
/// what it printed. `env` is added to this process's environment.
pub fn python_client(calls: &Value, command: &[String], env: &[(&str, String)]) -> Value {
    python_client_at(None, calls, command, env)
}

/// [`python_client`] on protocol `mode` (`2026-07-28`: no handshake, `_meta` on each request).
pub fn python_client_at(
    mode: Option<&str>,
    calls: &Value,
    command: &[String],
    env: &[(&str, String)],
) -> Value {
    let mut cmd = Command::new(super::cli::python3());
    cmd.arg(mcp_dir().join("client.py")).arg(calls.to_string());
    if let Some(m) = mode {
        cmd.args(["--mode", m]);
    }
    cmd.arg("--")
        .args(command)
        .env_remove("TOOLSIZE_MAX_TOOL_OUTPUT")
        .env_remove("TOOLSIZE_CEILING_BYTES")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run the Python MCP client");
    assert!(
        out.status.success(),
        "the Python MCP client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "client output is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// `toolsize mcp ARGS… -- SERVER…` as one command line.
pub fn proxied(args: &[&str], server: &[String]) -> Vec<String> {
    let mut v = vec![toolsize().to_owned(), "mcp".to_owned()];
    v.extend(args.iter().map(|s| (*s).to_owned()));
    v.push("--".to_owned());
    v.extend(server.iter().cloned());
    v
}

/// A server driven line by line, every line it writes kept as bytes.
pub struct RawPeer {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Vec<u8>>,
    /// Every line received so far, in order.
    pub received: Vec<Vec<u8>>,
}

impl RawPeer {
    /// Starts `command` with `env` added.
    pub fn start(command: &[String], env: &[(&str, String)]) -> Self {
        let mut cmd = Command::new(&command[0]);
        cmd.args(&command[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .env_remove("TOOLSIZE_MAX_TOOL_OUTPUT")
            .env_remove("TOOLSIZE_CEILING_BYTES");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start the server");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        RawPeer {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            received: Vec::new(),
        }
    }

    /// Sends one line (a newline is added).
    pub fn send(&mut self, line: &str) {
        let w = self.stdin.as_mut().unwrap();
        w.write_all(line.as_bytes()).unwrap();
        w.write_all(b"\n").unwrap();
        w.flush().unwrap();
    }

    /// Waits for the response to request `id`; returns its line, as sent.
    pub fn response(&mut self, id: &Value) -> Vec<u8> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no response to request {id}"));
            self.received.push(line.clone());
            let v: Value = serde_json::from_slice(&line).unwrap_or(Value::Null);
            if v.get("method").is_none() && v.get("id") == Some(id) {
                return line;
            }
        }
    }

    /// Sends request `line` and waits for the response to `id`.
    pub fn call(&mut self, line: &str, id: u64) -> Vec<u8> {
        self.send(line);
        self.response(&Value::from(id))
    }

    /// Closes the server's stdin and waits for it to exit; returns its exit code.
    pub fn finish(mut self) -> Option<i32> {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the server did not exit after its stdin was closed");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RawPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The JSON of the last content item's `{"toolsize": …}` notice.
pub fn notice(result: &Value) -> Value {
    let items = result["content"].as_array().expect("content");
    let text = items.last().unwrap()["text"].as_str().expect("a text item");
    let v: Value = serde_json::from_str(text).expect("the notice is JSON");
    v["toolsize"].clone()
}

/// The envelope carried by an error result's first text item.
pub fn envelope(result: &Value) -> Value {
    let text = result["content"][0]["text"].as_str().expect("a text item");
    serde_json::from_str(text).expect("an envelope")
}

#[path = "ports.rs"]
mod ports;

/// A free loopback port (bound, then released for a peer to take), outside the kernel's
/// ephemeral range so that no outgoing connection takes it meanwhile (`ports.rs`).
pub fn free_port() -> u16 {
    ports::free_port()
}

fn wait_for_port(port: u16, child: &mut Child, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("{what} exited before listening: {status}");
        }
        assert!(Instant::now() < deadline, "{what} did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A server process on an HTTP port, stopped when dropped.
pub struct HttpPeer {
    child: Child,
    /// Its MCP endpoint.
    pub url: String,
    /// Its port.
    pub port: u16,
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Python test server over Streamable HTTP; `extra`: `--json`, `--token T`, `--tls C K`.
pub fn python_http_server(extra: &[&str]) -> HttpPeer {
    let port = free_port();
    let mut child = Command::new(super::cli::python3())
        .arg(mcp_dir().join("server.py"))
        .args(["--http", &port.to_string()])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the Python MCP server");
    wait_for_port(port, &mut child, "the Python MCP server");
    let scheme = if extra.contains(&"--tls") {
        "https"
    } else {
        "http"
    };
    HttpPeer {
        child,
        url: format!("{scheme}://127.0.0.1:{port}/mcp"),
        port,
    }
}

/// `@modelcontextprotocol/server-everything streamableHttp`, when installed (its absence fails
/// the test unless `TOOLSIZE_ALLOW_MISSING_PEERS=1`).
pub fn everything_http_server() -> Option<HttpPeer> {
    let stdio = everything_server()?;
    let port = free_port();
    let mut child = Command::new(&stdio[0])
        .arg(&stdio[1])
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start server-everything");
    wait_for_port(port, &mut child, "server-everything");
    Some(HttpPeer {
        child,
        url: format!("http://127.0.0.1:{port}/mcp"),
        port,
    })
}

/// `toolsize mcp --listen 127.0.0.1:0 --upstream URL ARGS…`, its address read from the line it
/// logs; stopped with SIGTERM (spans flushed) when dropped. What it wrote on standard error is
/// kept in `stderr` once it stopped.
pub struct HttpProxy {
    child: Child,
    /// `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl HttpProxy {
    pub fn start(upstream: &str, args: &[&str], env: &[(&str, String)]) -> HttpProxy {
        let mut cmd = Command::new(toolsize());
        cmd.args(["mcp", "--listen", "127.0.0.1:0", "--upstream", upstream])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .env_remove("TOOLSIZE_MAX_TOOL_OUTPUT")
            .env_remove("TOOLSIZE_CEILING_BYTES")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start toolsize mcp --listen");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = channel();
        let reader = std::thread::spawn(move || {
            let mut all = String::new();
            let mut sent = false;
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if !sent && line.contains("\"listen\"") {
                    let v: Value = serde_json::from_str(&line).unwrap();
                    let _ = tx.send(v["listen"].as_str().unwrap().to_owned());
                    sent = true;
                }
                all.push_str(&line);
                all.push('\n');
            }
            all
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the proxy said where it listens");
        HttpProxy {
            child,
            url: format!("http://{addr}/mcp"),
            stderr: Some(reader),
        }
    }

    /// Stops the proxy with SIGTERM; returns what it wrote on standard error.
    pub fn stop(mut self) -> String {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.child.try_wait().unwrap().is_none() {
            assert!(
                Instant::now() < deadline,
                "the proxy did not stop on SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stderr.take().unwrap().join().unwrap()
    }
}

impl Drop for HttpProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Python SDK client over Streamable HTTP (`mode`: `legacy` or `2026-07-28`), making
/// `calls`; `headers` are `"Name: value"`.
pub fn python_http_client(calls: &Value, url: &str, mode: &str, headers: &[&str]) -> Value {
    let mut cmd = Command::new(super::cli::python3());
    cmd.arg(mcp_dir().join("client.py"))
        .arg(calls.to_string())
        .args(["--url", url, "--mode", mode]);
    for h in headers {
        cmd.args(["--header", h]);
    }
    let out = cmd.output().expect("run the Python MCP client");
    assert!(
        out.status.success(),
        "the Python MCP client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The MCP Inspector's CLI (`tests/npm`), when installed (its absence fails the test unless
/// `TOOLSIZE_ALLOW_MISSING_PEERS=1`).
pub fn inspector() -> Option<Vec<String>> {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
        "tests/npm/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js",
    );
    if bin.is_file() && everything_server().is_some() {
        return Some(vec![
            "node".to_owned(),
            bin.to_string_lossy().into_owned(),
            "--cli".to_owned(),
        ]);
    }
    missing(
        "@modelcontextprotocol/inspector",
        "scripts/test.sh runs npm ci in tests/npm",
    );
    None
}

/// Runs the Inspector's CLI against `url` over HTTP with `args`, its home (catalog, settings) in
/// `home`; returns its JSON output.
pub fn inspect(cli: &[String], home: &std::path::Path, url: &str, args: &[&str]) -> Value {
    let out = Command::new(&cli[0])
        .args(&cli[1..])
        .arg(url)
        .args(["--transport", "http", "--format", "json", "--quiet"])
        .args(args)
        .env("HOME", home)
        .env("MCP_CATALOG_PATH", home.join("mcp.json"))
        .output()
        .expect("run the MCP Inspector CLI");
    assert!(
        out.status.success(),
        "the Inspector failed ({args:?}): {} {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "Inspector output is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}
