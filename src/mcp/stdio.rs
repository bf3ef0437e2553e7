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
//! cancelled. When the client closes standard input, the server's is closed; when the server
//! exits, calls still in flight end their spans as cancelled and the proxy exits with the
//! server's exit code; when the client goes away while the server is still writing, the server
//! is killed.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::proxy::{lock, log_line, peek, Context, Inbound, Pending, Proxy, Session};
use super::{Options, RunError, MAX_ID_BYTES, MAX_IN_FLIGHT};

/// One client on standard input and output.
struct Stdio1 {
    proxy: Proxy,
    session: Session,
    pending: Mutex<HashMap<String, Pending>>,
    untracked: AtomicU64,
    warned_untracked: AtomicBool,
}

fn cx(session: &Session) -> Context<'_> {
    Context {
        session,
        transport: "pipe",
        protocol_version: None,
    }
}

/// Writes `line` (without its newline) and a newline, and flushes.
fn send(out: &Mutex<impl Write>, line: &[u8]) -> io::Result<()> {
    let mut w = lock(out);
    w.write_all(line)?;
    if !line.ends_with(b"\n") {
        w.write_all(b"\n")?;
    }
    w.flush()
}

impl Stdio1 {
    fn track(&self, pending: Pending) {
        let mut map = lock(&self.pending);
        let key = &pending.key;
        if key.len() > MAX_ID_BYTES || (map.len() >= MAX_IN_FLIGHT && !map.contains_key(key)) {
            drop(map);
            let n = self.untracked.fetch_add(1, Ordering::Relaxed) + 1;
            if !self.warned_untracked.swap(true, Ordering::Relaxed) {
                log_line(
                    "WARN",
                    "A request was relayed unmeasured: too many in flight, or its id is too long. Further ones are counted, not logged.",
                    json!({"untracked": n, "max_in_flight": MAX_IN_FLIGHT, "max_id_bytes": MAX_ID_BYTES}),
                );
            }
            return;
        }
        map.insert(pending.key.clone(), pending);
    }

    /// Client → server. Returns `None` to forward the line unchanged, or the answer to send back
    /// to the client instead.
    fn client_line(&self, line: &[u8]) -> Option<Vec<u8>> {
        match self.proxy.request(line, &cx(&self.session)) {
            Inbound::Forward(Some(p)) => {
                self.track(p);
                None
            }
            Inbound::Answer(answer) => Some(answer),
            Inbound::Forward(None) => {
                let head = peek(line)?;
                if head.method.as_deref() == Some("notifications/cancelled") && head.id.is_none() {
                    let msg: Value = serde_json::from_slice(line).ok()?;
                    let id = msg.pointer("/params/requestId")?;
                    // Dropping the call ends its span as cancelled.
                    let gone = lock(&self.pending).remove(&super::proxy::key_of(id));
                    drop(gone);
                }
                None
            }
        }
    }

    /// Server → client. Returns `None` to forward the line unchanged, or its replacement.
    fn server_line(&self, line: &[u8]) -> Option<Vec<u8>> {
        let head = peek(line)?;
        if head.method.is_some() {
            return None;
        }
        let key = super::proxy::key_of(&head.id?);
        let pending = lock(&self.pending).remove(&key)?;
        self.proxy.response(line, pending, &cx(&self.session))
    }
}

/// Copies lines from `input` to `output`, each through `act` (`None`: unchanged).
fn pump(
    input: impl Read,
    mut act: impl FnMut(&[u8]) -> Option<Vec<u8>>,
    mut forward: impl FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<()> {
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        match act(&line) {
            None => forward(&line)?,
            Some(replacement) => forward(&replacement)?,
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
    let shared = Arc::new(Stdio1 {
        proxy: Proxy::new(opts),
        session: Session::default(),
        pending: Mutex::new(HashMap::new()),
        untracked: AtomicU64::new(0),
        warned_untracked: AtomicBool::new(false),
    });
    let out = Arc::new(Mutex::new(io::stdout()));
    let pipes = child.stdin.take().zip(child.stdout.take());
    let Some((server_in, server_out)) = pipes else {
        let _ = child.kill();
        return Err(RunError::Spawn(io::Error::other("no pipes to the server")));
    };
    let server_in: ChildStdin = server_in;

    // Client → server. Not joined: it may sit in a read of our stdin after the server is gone.
    {
        let shared = Arc::clone(&shared);
        let out = Arc::clone(&out);
        std::thread::Builder::new()
            .name("mcp-client-in".into())
            .spawn(move || {
                let server_in = Mutex::new(server_in);
                let _ = pump(
                    io::stdin().lock(),
                    |line| {
                        let answer = shared.client_line(line)?;
                        // Answered here: goes back to the client, not on to the server.
                        let _ = send(&out, &answer);
                        Some(Vec::new())
                    },
                    |line| {
                        if line.is_empty() {
                            return Ok(());
                        }
                        let mut w = lock(&server_in);
                        w.write_all(line)?;
                        w.flush()
                    },
                );
                // Closing the server's stdin tells it to exit.
            })
            .map_err(RunError::Relay)?;
    }

    // Server → client, on this thread.
    let relay = pump(
        server_out,
        |line| shared.server_line(line),
        |line| send(&out, line),
    );
    // Calls still in flight end as cancelled.
    let left: Vec<Pending> = lock(&shared.pending).drain().map(|(_, p)| p).collect();
    drop(left);
    shared.proxy.end_all();
    if relay.is_err() {
        // The client is gone: nobody will read the server's answers.
        let _ = child.kill();
    }
    let status = child.wait().map_err(RunError::Relay)?;
    relay.map_err(RunError::Relay)?;
    Ok(crate::guard::child_exit_code(status))
}
