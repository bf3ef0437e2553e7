//! The systemd unit in `dist/systemd/toolsize.service`: `systemd-analyze verify` accepts it (with
//! its `ExecStart` binary pointed at the one built here), and the command it runs, with the
//! configuration `toolsize gen-config` prints, starts the daemon in the state directory and
//! stops it on the unit's `KillSignal` with exit 0.
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
