//! The stdio transport of `toolsize mcp`: a child process's standard input and output, one
//! newline-delimited JSON-RPC message a line.
//!
//! ```text
//! MCP client ──stdin──▶ toolsize mcp ──stdin──▶ server (child process)
//! MCP client ◀─stdout── toolsize mcp ◀─stdout── server        (server's stderr: inherited)
//! ```
//!
//! Two threads, one per direction, read a line each and hand it to the shared
//! `Proxy` (module `proxy`); a line it does not act on is written on byte for byte. The
//! requests whose responses it acts on are kept by id, at most [`MAX_IN_FLIGHT`], ids of at most
//! [`MAX_ID_BYTES`]: a request past either bound is relayed unmeasured and counted in a warning
//! on standard error, never refused. `notifications/cancelled` ends the call it names as
//! cancelled.
//!
//! # Bounded and loud
//!
//! Every request the client sends (any method) is remembered with its id and the time it was
//! sent, within the same bounds, so that none is left without an answer:
//!
//! * **A line over `--max-message-bytes`** is never held whole (module `frame`: read in chunks,
//!   scanned for its top-level `id`, discarded). A response from the server gets the client a
//!   JSON-RPC error under the id found (`-32603`, with the size); when no id can be read from the
//!   line (none, longer than [`MAX_ID_BYTES`], or not JSON), the call it answered gets its error
//!   when `--call-timeout` passes. A request from the client over the cap is answered with
//!   `-32600` and never reaches the server; a server's own request over the cap is answered to
//!   the server the same way; notifications over the cap are dropped. Each says so on standard
//!   error.
//! * **A call that passes `--call-timeout`** is answered with `-32001`, the server is sent
//!   `notifications/cancelled` for it, and its late response, if one comes, is dropped.
//! * **When the server exits or closes its output**, every request still waiting is answered
//!   with `-32000` naming the exit code, and one line on standard error counts them. Half a
//!   line left at the end of its output (it died mid-response) is dropped, not relayed.
//!
//! Memory is held to the cap per direction plus the reader's 64 KiB buffer: a result acted on
//! is parsed (a tree of at most a few times its size) only when it is within the cap. When the
//! client closes standard input, the server's is closed; when the server exits, the proxy exits
//! with the server's exit code; when the client goes away while the server is still writing,
//! the server is killed.

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::io::{self, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::frame::{Line, LineReader, Scan};
use super::proxy::{key_of, lock, log_line, peek, Context, Inbound, Pending, Proxy, Session};
use super::{codes, error_types, Options, RunError, MAX_ID_BYTES, MAX_IN_FLIGHT};

/// Size of each read from either side.
const READ_CHUNK: usize = 64 * 1024;
/// How long the proxy waits for the server's exit code after its output ends, to name it in
/// the errors of the calls left waiting.
const EXIT_GRACE: Duration = Duration::from_secs(1);
/// Longest method name kept for a log line.
const MAX_METHOD_CHARS: usize = 64;

/// A client request waiting for its response.
struct Waiting {
    id: Value,
    method: String,
    since: Instant,
}

/// One client on standard input and output.
struct Stdio1 {
    proxy: Proxy,
    session: Session,
    pending: Mutex<HashMap<String, Pending>>,
    /// Every request in flight, by key.
    waiting: Mutex<Waiters>,
    untracked: AtomicU64,
    warned_untracked: AtomicBool,
    out: Mutex<io::Stdout>,
    server_in: Mutex<Option<ChildStdin>>,
    timeout: Option<Duration>,
}

/// The requests in flight and those the proxy answered itself (their late responses dropped).
#[derive(Default)]
struct Waiters {
    by_key: HashMap<String, Waiting>,
    answered: VecDeque<String>,
    /// The server is gone: a request sent now is answered at once.
    closed: bool,
}

/// What to do with a line.
enum Action {
    Forward,
    Replace(Vec<u8>),
    Drop,
}

fn cx(session: &Session) -> Context<'_> {
    Context {
        session,
        transport: "pipe",
        protocol_version: None,
    }
}

/// Writes `line` and a newline (unless it has one), and flushes.
fn send(out: &Mutex<impl Write>, line: &[u8]) -> io::Result<()> {
    let mut w = lock(out);
    w.write_all(line)?;
    if !line.ends_with(b"\n") {
        w.write_all(b"\n")?;
    }
    w.flush()
}

fn error_line(id: &Value, code: i64, message: &str, data: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code, "message": message, "data": data},
    }))
    .unwrap_or_default()
}

impl Stdio1 {
    fn warn_untracked(&self) {
        let n = self.untracked.fetch_add(1, Ordering::Relaxed) + 1;
        if !self.warned_untracked.swap(true, Ordering::Relaxed) {
            log_line(
                "WARN",
                "A request was relayed unmeasured: too many in flight, or its id is too long. Further ones are counted, not logged.",
                json!({"untracked": n, "max_in_flight": MAX_IN_FLIGHT, "max_id_bytes": MAX_ID_BYTES}),
            );
        }
    }

    fn track(&self, pending: Pending) {
        let mut map = lock(&self.pending);
        let key = &pending.key;
        if key.len() > MAX_ID_BYTES || (map.len() >= MAX_IN_FLIGHT && !map.contains_key(key)) {
            drop(map);
            self.warn_untracked();
            return;
        }
        map.insert(pending.key.clone(), pending);
    }

    /// Remembers a request until its response; `false` when the server is already gone.
    fn wait_for(&self, key: String, id: Value, method: &str) -> bool {
        let mut w = lock(&self.waiting);
        if w.closed {
            return false;
        }
        if key.len() > MAX_ID_BYTES || (w.by_key.len() >= MAX_IN_FLIGHT) {
            drop(w);
            self.warn_untracked();
            return true;
        }
        w.by_key.insert(
            key,
            Waiting {
                id,
                method: method.chars().take(MAX_METHOD_CHARS).collect(),
                since: Instant::now(),
            },
        );
        true
    }

    fn to_client(&self, line: &[u8]) -> io::Result<()> {
        send(&self.out, line)
    }

    fn to_server(&self, line: &[u8]) -> io::Result<()> {
        let mut server = lock(&self.server_in);
        let w = server
            .as_mut()
            .ok_or_else(|| io::Error::from(io::ErrorKind::BrokenPipe))?;
        w.write_all(line)?;
        if !line.ends_with(b"\n") {
            w.write_all(b"\n")?;
        }
        w.flush()
    }

    /// A whole message from the client.
    fn client_message(&self, line: &[u8]) -> io::Result<()> {
        let forward = match self.proxy.request(line, &cx(&self.session)) {
            Inbound::Answer(answer) => return self.to_client(&answer),
            Inbound::Forward(p) => p,
        };
        if let Some(head) = peek(line) {
            match (head.method.as_deref(), head.id) {
                (Some(method), Some(id)) if !self.wait_for(key_of(&id), id.clone(), method) => {
                    drop(forward);
                    let answer = error_line(
                        &id,
                        codes::CONNECTION_CLOSED,
                        "toolsize mcp: the server has exited",
                        json!({}),
                    );
                    return self.to_client(&answer);
                }
                (Some("notifications/cancelled"), None) => {
                    if let Some(id) = serde_json::from_slice::<Value>(line)
                        .ok()
                        .and_then(|m| m.pointer("/params/requestId").cloned())
                    {
                        let key = key_of(&id);
                        lock(&self.waiting).by_key.remove(&key);
                        // Dropping the call ends its span as cancelled.
                        let gone = lock(&self.pending).remove(&key);
                        drop(gone);
                    }
                }
                _ => {}
            }
        }
        if let Some(p) = forward {
            self.track(p);
        }
        self.to_server(line)
    }

    /// A client message over the cap: answered here when it is a request whose id is known.
    fn client_oversized(&self, bytes: u64, scan: &Scan, cap: usize) -> io::Result<()> {
        let id = scan.id().filter(|_| scan.has_method());
        log_line(
            "WARN",
            "A message from the client is over the maximum message size; it was discarded.",
            json!({"bytes": bytes, "max_message_bytes": cap, "answered": id.is_some()}),
        );
        match id {
            Some(id) => self.to_client(&error_line(
                &id,
                codes::REQUEST_TOO_LARGE,
                &format!("toolsize mcp: the request is over the proxy's maximum message size of {cap} bytes (--max-message-bytes); it was not sent to the server"),
                json!({"bytes": bytes, "max_message_bytes": cap}),
            )),
            None => Ok(()),
        }
    }

    /// A whole message from the server.
    fn server_message(&self, line: &[u8]) -> Action {
        let Some(head) = peek(line) else {
            return Action::Forward;
        };
        if head.method.is_some() {
            return Action::Forward;
        }
        let Some(id) = head.id else {
            return Action::Forward;
        };
        let key = key_of(&id);
        {
            let mut w = lock(&self.waiting);
            if w.by_key.remove(&key).is_none() {
                if let Some(at) = w.answered.iter().position(|k| *k == key) {
                    // Answered by the proxy already (the call passed its time).
                    w.answered.remove(at);
                    return Action::Drop;
                }
            }
        }
        let Some(pending) = lock(&self.pending).remove(&key) else {
            return Action::Forward;
        };
        match self.proxy.response(line, pending, &cx(&self.session)) {
            Some(replaced) => Action::Replace(replaced),
            None => Action::Forward,
        }
    }

    /// A server message over the cap: its call, when its id is known, gets an error.
    fn server_oversized(&self, bytes: u64, scan: &Scan, cap: usize) -> io::Result<()> {
        let id = scan.id();
        if scan.has_method() {
            log_line(
                "WARN",
                "A message from the server is over the maximum message size; it was discarded.",
                json!({"bytes": bytes, "max_message_bytes": cap, "request": id.is_some()}),
            );
            if let Some(id) = id {
                let answer = error_line(
                    &id,
                    codes::REQUEST_TOO_LARGE,
                    &format!("toolsize mcp: the request is over the proxy's maximum message size of {cap} bytes"),
                    json!({"bytes": bytes, "max_message_bytes": cap}),
                );
                let _ = self.to_server(&answer);
            }
            return Ok(());
        }
        let Some(id) = id else {
            log_line(
                "WARN",
                "A response from the server is over the maximum message size and its id cannot be read; it was discarded, and the call it answers gets its error at --call-timeout.",
                json!({"bytes": bytes, "max_message_bytes": cap}),
            );
            return Ok(());
        };
        let key = key_of(&id);
        let waiting = {
            let mut w = lock(&self.waiting);
            match w.by_key.remove(&key) {
                Some(waiting) => Some(waiting),
                None => {
                    if let Some(at) = w.answered.iter().position(|k| *k == key) {
                        w.answered.remove(at);
                        return Ok(());
                    }
                    None
                }
            }
        };
        let why = format!("the server's response is {bytes} bytes, over the proxy's maximum message size of {cap} bytes (--max-message-bytes)");
        if let Some(p) = lock(&self.pending).remove(&key) {
            self.proxy.abandon(p, &why, error_types::TOO_LARGE);
        }
        log_line(
            "WARN",
            "A response from the server is over the maximum message size; it was discarded and the client answered with an error.",
            json!({
                "jsonrpc_id": id,
                "method": waiting.as_ref().map(|w| w.method.as_str()),
                "bytes": bytes,
                "max_message_bytes": cap,
            }),
        );
        self.to_client(&error_line(
            &id,
            codes::MESSAGE_TOO_LARGE,
            &format!("toolsize mcp: {why}; it was discarded"),
            json!({"bytes": bytes, "max_message_bytes": cap}),
        ))
    }

    /// Answers every request that passed its time.
    fn expire(&self, timeout: Duration) {
        let now = Instant::now();
        let expired: Vec<(String, Waiting)> = {
            let mut w = lock(&self.waiting);
            if w.closed {
                return;
            }
            let keys: Vec<String> = w
                .by_key
                .iter()
                .filter(|(_, v)| now.duration_since(v.since) >= timeout)
                .map(|(k, _)| k.clone())
                .collect();
            let mut out = Vec::with_capacity(keys.len());
            for k in keys {
                if let Some(v) = w.by_key.remove(&k) {
                    if w.answered.len() >= MAX_IN_FLIGHT {
                        w.answered.pop_front();
                    }
                    w.answered.push_back(k.clone());
                    out.push((k, v));
                }
            }
            out
        };
        let secs = timeout.as_secs_f64();
        for (key, waiting) in expired {
            let why = format!("no response from the server within {secs} s (--call-timeout)");
            if let Some(p) = lock(&self.pending).remove(&key) {
                self.proxy.abandon(p, &why, error_types::TIMEOUT);
            }
            log_line(
                "WARN",
                "A request passed its time; the client was answered with an error and the server sent notifications/cancelled.",
                json!({"jsonrpc_id": waiting.id, "method": waiting.method, "call_timeout_seconds": secs}),
            );
            let _ = self.to_client(&error_line(
                &waiting.id,
                codes::REQUEST_TIMEOUT,
                &format!("toolsize mcp: {why}"),
                json!({"call_timeout_seconds": secs}),
            ));
            let cancel = json!({
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": waiting.id, "reason": "toolsize mcp: --call-timeout passed"},
            });
            let _ = self.to_server(cancel.to_string().as_bytes());
        }
    }

    /// The server is gone: every request still waiting is answered, and one line says so.
    fn server_gone(&self, status: Option<ExitStatus>, answer: bool) {
        let left: Vec<Waiting> = {
            let mut w = lock(&self.waiting);
            w.closed = true;
            w.by_key.drain().map(|(_, v)| v).collect()
        };
        let code = status.map(crate::guard::child_exit_code);
        let why = match code {
            Some(c) => format!("the server exited (exit code {c}) before answering"),
            None => "the server closed its output before answering".to_owned(),
        };
        let calls: Vec<Pending> = lock(&self.pending).drain().map(|(_, p)| p).collect();
        for p in calls {
            self.proxy.abandon(p, &why, error_types::SERVER_GONE);
        }
        if left.is_empty() || !answer {
            return;
        }
        log_line(
            "ERROR",
            "The server went away with requests in flight; each was answered with an error.",
            json!({"requests": left.len(), "exit_code": code}),
        );
        for w in left {
            let _ = self.to_client(&error_line(
                &w.id,
                codes::CONNECTION_CLOSED,
                &format!("toolsize mcp: {why}"),
                json!({"exit_code": code}),
            ));
        }
    }
}

/// Reads the client's messages and relays them to the server until either side goes away.
fn client_side(shared: &Stdio1, input: impl Read, cap: usize) -> io::Result<()> {
    let mut reader = LineReader::new(BufReader::with_capacity(READ_CHUNK, input), cap);
    while let Some(line) = reader.next_line()? {
        match line {
            Line::Whole(l) => shared.client_message(l)?,
            Line::Torn(l) if peek(l).is_some() => shared.client_message(l)?,
            Line::Torn(l) => log_line(
                "WARN",
                "The client's input ended in the middle of a message; it was discarded.",
                json!({"bytes": l.len()}),
            ),
            Line::Oversized { bytes, scan } => shared.client_oversized(bytes, &scan, cap)?,
        }
    }
    Ok(())
}

/// Reads the server's messages and relays them to the client until the server's output ends
/// (`Ok`) or the client goes away (`Err`).
fn server_side(shared: &Stdio1, output: impl Read, cap: usize) -> io::Result<()> {
    let mut reader = LineReader::new(BufReader::with_capacity(READ_CHUNK, output), cap);
    loop {
        let line = match reader.next_line() {
            Ok(Some(l)) => l,
            // A read error on the server's output: it is gone.
            Ok(None) | Err(_) => return Ok(()),
        };
        match line {
            Line::Whole(l) => match shared.server_message(l) {
                Action::Forward => shared.to_client(l)?,
                Action::Replace(r) => shared.to_client(&r)?,
                Action::Drop => {}
            },
            Line::Torn(l) if peek(l).is_some() => match shared.server_message(l) {
                Action::Forward => shared.to_client(l)?,
                Action::Replace(r) => shared.to_client(&r)?,
                Action::Drop => {}
            },
            Line::Torn(l) => log_line(
                "WARN",
                "The server's output ended in the middle of a message; it was discarded.",
                json!({"bytes": l.len()}),
            ),
            Line::Oversized { bytes, scan } => shared.server_oversized(bytes, &scan, cap)?,
        }
    }
}

/// The server's exit status, when it comes within [`EXIT_GRACE`].
fn exit_within_grace(child: &mut Child) -> Option<ExitStatus> {
    let deadline = Instant::now() + EXIT_GRACE;
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Some(s),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => return None,
        }
    }
}

/// Starts the server, relays until it exits, and returns its exit code (128 + signal when it was
/// killed). When the client goes away first, the server is killed.
pub fn run(opts: Options, program: &OsString, args: &[OsString]) -> Result<u8, RunError> {
    let mut child: Child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(RunError::Spawn)?;
    let pipes = child.stdin.take().zip(child.stdout.take());
    let Some((server_in, server_out)) = pipes else {
        let _ = child.kill();
        return Err(RunError::Spawn(io::Error::other("no pipes to the server")));
    };
    let cap = opts.max_message_bytes;
    let timeout = opts.call_timeout;
    let shared = Arc::new(Stdio1 {
        proxy: Proxy::new(opts),
        session: Session::default(),
        pending: Mutex::new(HashMap::new()),
        waiting: Mutex::new(Waiters::default()),
        untracked: AtomicU64::new(0),
        warned_untracked: AtomicBool::new(false),
        out: Mutex::new(io::stdout()),
        server_in: Mutex::new(Some(server_in)),
        timeout,
    });

    // Client → server. Not joined: it may sit in a read of our stdin after the server is gone.
    {
        let shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("mcp-client-in".into())
            .spawn(move || {
                let _ = client_side(&shared, io::stdin().lock(), cap);
                // Closing the server's stdin tells it to exit.
                lock(&shared.server_in).take();
            })
            .map_err(RunError::Relay)?;
    }
    // The calls' clock. Not joined: it ends with the process.
    if let Some(timeout) = shared.timeout {
        let shared = Arc::clone(&shared);
        let tick = (timeout / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
        std::thread::Builder::new()
            .name("mcp-call-timeout".into())
            .spawn(move || loop {
                std::thread::sleep(tick);
                if lock(&shared.waiting).closed {
                    return;
                }
                shared.expire(timeout);
            })
            .map_err(RunError::Relay)?;
    }

    // Server → client, on this thread.
    let relay = server_side(&shared, server_out, cap);
    let status = if relay.is_ok() {
        exit_within_grace(&mut child)
    } else {
        None
    };
    shared.server_gone(status, relay.is_ok());
    shared.proxy.end_all();
    if relay.is_err() {
        // The client is gone: nobody will read the server's answers.
        let _ = child.kill();
    }
    let status = match status {
        Some(s) => s,
        None => child.wait().map_err(RunError::Relay)?,
    };
    relay.map_err(RunError::Relay)?;
    Ok(crate::guard::child_exit_code(status))
}
