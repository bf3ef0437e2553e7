//! Shared support for the command-line tests: run the built `toolsize` binary, and parse its
//! output with the real Python `json.loads`.
#![allow(dead_code, unreachable_pub)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// Where `scripts/test.sh` installs `tests/requirements.txt`: a virtualenv of the tests' own,
/// never the system Python.
pub const PYTHON_VENV: &str = "target/python-venv";

/// The Python the tests run: the virtualenv's `python3` ([`PYTHON_VENV`]) when it exists, else
/// `python3` on `PATH` (a machine whose Python has the packages already).
pub fn python3() -> String {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(PYTHON_VENV)
        .join("bin/python3");
    if venv.exists() {
        venv.to_string_lossy().into_owned()
    } else {
        "python3".to_owned()
    }
}

/// The built binary.
pub fn toolsize() -> Command {
    Command::new(env!("CARGO_BIN_EXE_toolsize"))
}

/// Runs `toolsize args…` with `stdin` and returns its output.
pub fn run(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut cmd = toolsize();
    cmd.args(args)
        .env_remove("TOOLSIZE_MAX_TOOL_OUTPUT")
        .env_remove("TOOLSIZE_CEILING_BYTES")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn toolsize");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        let input = input.to_vec();
        // Write from another thread so a large input cannot deadlock against the output pipe.
        std::thread::spawn(move || {
            let _ = pipe.write_all(&input);
        });
    }
    child.wait_with_output().expect("wait for toolsize")
}

/// The structured error of a command refused on bad input: exit code 2, nothing on standard
/// output, `{"ok": false, "error": {...}}` on standard error. Returns the `error` object.
pub fn structured_error(out: &Output) -> Value {
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let body: Value = serde_json::from_slice(&out.stderr)
        .unwrap_or_else(|e| panic!("standard error is not JSON ({e}): {out:?}"));
    assert_eq!(body["ok"], false, "{body}");
    body["error"].clone()
}

/// The exit code of `out`.
pub fn code(out: &Output) -> i32 {
    out.status.code().expect("exited normally")
}

const LOADS: &str = r#"
import json, sys
raw = sys.stdin.buffer.read()
env = json.loads(raw)
data = env.get("data") if isinstance(env, dict) else None
if isinstance(data, str):
    n = len(data.encode("utf-8"))
else:
    n = len(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
print(json.dumps({"data_bytes": n, "envelope": env}))
"#;

/// What Python's `json.loads` made of some output.
#[derive(Debug)]
pub struct Loaded {
    /// The parsed envelope.
    pub envelope: Value,
    /// UTF-8 bytes of `data`: the string itself, or its compact JSON.
    pub data_bytes: u64,
}

/// Parses `bytes` with the real Python `json.loads`; panics (with Python's message) when it
/// cannot.
pub fn python_loads(bytes: &[u8]) -> Loaded {
    let mut child = Command::new(python3())
        .args(["-c", LOADS])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 is needed by these tests");
    let mut pipe = child.stdin.take().unwrap();
    let input = bytes.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(
        out.status.success(),
        "json.loads failed: {}\non output starting {:?}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&bytes[..bytes.len().min(300)])
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    Loaded {
        data_bytes: v["data_bytes"].as_u64().unwrap(),
        envelope: v["envelope"].clone(),
    }
}

/// Asserts `env` has every member of the response envelope.
pub fn assert_envelope_shape(env: &Value) {
    for key in ["ok", "data", "error", "warnings", "meta"] {
        assert!(env.get(key).is_some(), "envelope lacks {key}: {env}");
    }
    assert!(env["ok"].is_boolean());
    assert!(env["warnings"].is_array());
    assert!(env["meta"]["truncated"].is_boolean());
    assert!(env["meta"]["duration_ms"].is_u64());
}

/// The codes of `env`'s warnings.
pub fn warning_codes(env: &Value) -> Vec<String> {
    env["warnings"]
        .as_array()
        .map(|w| {
            w.iter()
                .filter_map(|w| w["code"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A scratch directory of one test, `toolsize-{name}-{pid}` under the system temp directory,
/// made empty when created and removed when dropped; kept when the test panics, to look at.
pub struct Scratch(std::path::PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("toolsize-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl std::ops::Deref for Scratch {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::path::Path> for Scratch {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.0.as_os_str()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A fresh scratch directory for one test, removed when dropped.
pub fn scratch(name: &str) -> Scratch {
    Scratch::new(&format!("test-{name}"))
}

/// Writes `bytes` to `dir/name` and returns the path as a string.
pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.to_string_lossy().into_owned()
}

/// The `(code, field)` of each violation in a structured error (`{"violations": [...]}`).
pub fn violations(error: &Value) -> Vec<(String, String)> {
    error["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["code"].as_str().unwrap().to_owned(),
                v["field"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// A child process killed and reaped when dropped: a test that fails midway leaves no process
/// behind holding a port, a file or the test run's output.
pub struct Reaped(pub std::process::Child);

impl std::ops::Deref for Reaped {
    type Target = std::process::Child;
    fn deref(&self) -> &std::process::Child {
        &self.0
    }
}

impl std::ops::DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut std::process::Child {
        &mut self.0
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
