//! The systemd unit in `dist/systemd/toolsize.service`: `systemd-analyze verify` accepts it (with
//! its `ExecStart` binary pointed at the one built here), and the command it runs, with the
//! configuration `toolsize gen-config` prints, starts the daemon in the state directory and
//! stops it on the unit's `KillSignal` with exit 0; the docs install the binary the unit runs, with
//! one install line; and `MemoryMax` is above the daemon's own memory bound.
#![cfg(feature = "collector")]

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use support::collector::{require, temp_dir};

const UNIT: &str = include_str!("../dist/systemd/toolsize.service");

/// The value of `key=` in the unit (the last one, as systemd reads a repeated key).
fn value(key: &str) -> String {
    UNIT.lines()
        .rev()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in the unit"))
        .to_string()
}

#[test]
fn systemd_analyze_verifies_the_unit() {
    if !require("systemd-analyze", &["--version"]) {
        return;
    }
    let dir = temp_dir("systemd-unit");
    let unit = UNIT.replace("/usr/local/bin/toolsize", env!("CARGO_BIN_EXE_toolsize"));
    assert_ne!(unit, UNIT, "ExecStart names /usr/local/bin/toolsize");
    let path = dir.join("toolsize.service");
    std::fs::write(&path, unit).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Warnings about the host (no such user here) are not about the unit; anything naming it is.
    assert!(out.status.success(), "systemd-analyze verify: {said}");
    assert!(
        !said.contains("toolsize.service:"),
        "systemd-analyze verify: {said}"
    );
}

#[test]
fn the_units_command_starts_and_stops_cleanly() {
    let dir = temp_dir("systemd-exec");
    let config = dir.join("toolsize.toml");
    let generated = Command::new(env!("CARGO_BIN_EXE_toolsize"))
        .arg("gen-config")
        .output()
        .unwrap();
    assert!(generated.status.success());
    std::fs::write(&config, &generated.stdout).unwrap();
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let exec = value("ExecStart")
        .replace("/usr/local/bin/toolsize", env!("CARGO_BIN_EXE_toolsize"))
        .replace("/etc/toolsize/toolsize.toml", config.to_str().unwrap())
        .replace("${STATE_DIRECTORY}", state.to_str().unwrap());
    let mut words = exec.split_whitespace();
    let mut child = Command::new(words.next().unwrap())
        .args(words)
        // The environment outranks the file: ephemeral ports, so tests may run side by side.
        .env("TOOLSIZE_OTLP_GRPC_ADDR", "127.0.0.1:0")
        .env("TOOLSIZE_OTLP_HTTP_ADDR", "127.0.0.1:0")
        .env("TOOLSIZE_ADMIN_ADDR", "127.0.0.1:0")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("\"event\":\"listening\""), "{line:?}");
    let signal = value("KillSignal");
    assert_eq!(signal, "SIGTERM");
    let st = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let status = child.wait().unwrap();
    assert!(status.success(), "exit {status}");
    // The final snapshot is in the state directory.
    let files: Vec<_> = std::fs::read_dir(&state).unwrap().collect();
    assert!(!files.is_empty(), "no snapshot in the state directory");
    // A configuration error exits 2, which the unit does not restart on.
    assert_eq!(value("RestartPreventExitStatus"), "2");
    let bad = Command::new(env!("CARGO_BIN_EXE_toolsize"))
        .args(["serve", "--config", "/nonexistent/toolsize.toml"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

/// The one line the docs install toolsize with (no crate is published: from a clone).
const INSTALL: &str = "cargo install --path . --locked --features collector,tls";

/// How the service's docs put that binary where the unit runs it.
const COPY: &str = "sudo install -m 0755 ~/.cargo/bin/toolsize /usr/local/bin/toolsize";

/// Each `cargo install` of toolsize in `text`, a code span wrapped over two lines joined.
fn install_lines(text: &str) -> Vec<String> {
    let mut joined = String::new();
    let mut open = false;
    for l in text.lines() {
        let l = l.trim_start_matches('#').trim();
        joined.push_str(l);
        open ^= l.matches('`').count() % 2 == 1;
        joined.push(if open { ' ' } else { '\n' });
    }
    let mut out = Vec::new();
    for (i, _) in joined.match_indices("cargo install") {
        let rest = &joined[i..];
        let end = rest.find(['`', '\n']).unwrap_or(rest.len());
        let line = rest[..end].split("  #").next().unwrap().trim().to_string();
        let next = line.split_whitespace().nth(2).unwrap_or("");
        if next.starts_with('-') || next == "toolsize" {
            out.push(line);
        }
    }
    out
}

/// The text of `path` in the repository.
fn doc(path: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Problems with the install lines of `docs` (path, text) and the unit `unit`.
fn install_problems(docs: &[(&str, String)], unit: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = 0;
    for (path, text) in docs {
        for line in install_lines(text) {
            seen += 1;
            if line != INSTALL {
                out.push(format!(
                    "{path}: `{line}` is not the install line `{INSTALL}`"
                ));
            }
        }
    }
    if seen < 4 {
        out.push(format!("only {seen} install lines found"));
    }
    let exec = unit
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .and_then(|v| v.split_whitespace().next())
        .unwrap_or("");
    if COPY.rsplit(' ').next() != Some(exec) {
        out.push(format!("the unit runs {exec}, the docs install {COPY}"));
    }
    let flat = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    for (path, text) in docs
        .iter()
        .filter(|(p, _)| ["docs/collector.md", "CHANGELOG.md"].contains(p))
        .chain(std::iter::once(&(
            "dist/systemd/toolsize.service",
            unit.to_string(),
        )))
    {
        let text = flat(&text.replace('#', " "));
        if !text.contains(COPY) {
            out.push(format!(
                "{path} does not copy the binary where the unit runs it: {COPY}"
            ));
        }
    }
    out
}

#[test]
fn the_docs_install_the_binary_the_unit_runs() {
    let docs: Vec<(&str, String)> = [
        "README.md",
        "docs/collector.md",
        "docs/agents.md",
        "CHANGELOG.md",
    ]
    .into_iter()
    .map(|p| (p, doc(p)))
    .collect();
    let mut all = docs.clone();
    all.push(("dist/systemd/toolsize.service", UNIT.to_string()));
    let found = install_problems(&all, UNIT);
    assert!(found.is_empty(), "{}", found.join("\n"));
    // The check catches a published-crate line, a missing feature, and a unit elsewhere.
    let mut bad = docs.clone();
    bad[0]
        .1
        .push_str("\n`cargo install toolsize --features collector`\n");
    assert!(install_problems(&bad, UNIT)
        .iter()
        .any(|p| p.contains("cargo install toolsize")));
    let moved = UNIT.replace("ExecStart=/usr/local/bin/", "ExecStart=/opt/bin/");
    assert!(install_problems(&all, &moved)
        .iter()
        .any(|p| p.contains("/opt/bin/toolsize")));
}

/// The most one series' histograms hold (docs/collector.md, "Memory": a size and latency pair
/// since start and one per window slot, every slot from 1 byte to 1 GiB).
const SERIES_WORST_BYTES: u64 = 146 * 1024;

/// A systemd size (`3G`, `512M`, bytes) in bytes.
fn systemd_bytes(v: &str) -> u64 {
    let (n, unit) = v.split_at(v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len()));
    let n: u64 = n.parse().unwrap_or_else(|_| panic!("size {v:?}"));
    n * match unit {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        other => panic!("unit {other:?} in {v:?}"),
    }
}

/// The value of `key = N` in `toolsize gen-config`.
fn generated(key: &str) -> u64 {
    let out = Command::new(env!("CARGO_BIN_EXE_toolsize"))
        .arg("gen-config")
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key} = "))?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key} in gen-config"))
}

/// What one held result of the context ledger takes, and one entry of a session's per-tool
/// sums, of which there are at most as many as held results (`src/collector/state/context/`).
const LEDGER_RESULT_BYTES: u64 = 2 * 16;

/// The most a session of the context ledger holds beside its results: its key (an id of at
/// most 128 bytes, its service) and its own numbers (`src/collector/state/context/`).
const LEDGER_SESSION_BYTES: u64 = 512;

/// The daemon's bound at the default configuration: request buffers (the shared body budget
/// plus every decoding slot's inflated request), the series' worst-case histograms, and the
/// context ledger (on by default) full.
fn memory_bound() -> u64 {
    let requests = 2 * generated("max_concurrent_requests") * generated("max_request_bytes");
    let ledger = generated("max_sessions")
        * (generated("max_results_per_session") * LEDGER_RESULT_BYTES + LEDGER_SESSION_BYTES);
    requests + generated("max_series") * SERIES_WORST_BYTES + ledger
}

#[test]
fn memory_max_is_above_the_daemons_own_bound() {
    let max = systemd_bytes(&value("MemoryMax"));
    let bound = memory_bound();
    assert_eq!(
        2 * generated("max_concurrent_requests") * generated("max_request_bytes"),
        2 << 30,
        "the documented 1 GiB + 16 x 64 MiB"
    );
    assert!(
        max > bound,
        "MemoryMax={} ({max} bytes) is below the daemon's bound of {bound} bytes: the kernel \
         would kill it before its backpressure applies",
        value("MemoryMax")
    );
    // The check catches the unit's earlier 1G.
    assert!(systemd_bytes("1G") < bound);
}
