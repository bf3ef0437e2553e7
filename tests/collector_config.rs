//! The configuration as a user meets it: `gen-config` output parses back, unknown keys fail with
//! a "did you mean", and the error is the structured JSON of the CLI (exit 2).
#![cfg(feature = "collector")]

mod support;

use std::process::Command;

use support::cli::structured_error;

use toolsize::collector::Config;

#[test]
fn gen_config_parses_back_to_the_defaults() {
    let out = Command::new(env!("CARGO_BIN_EXE_toolsize"))
        .arg("gen-config")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(Config::from_toml(&text).unwrap(), Config::default());
}

#[test]
fn unknown_key_is_a_structured_error_with_a_suggestion() {
    let dir = support::collector::temp_dir("cfg-cli");
    let file = dir.join("bad.toml");
    std::fs::write(&file, "[aggregation]\nmax_serie = 10\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_toolsize"))
        .arg("serve")
        .arg("--config")
        .arg(&file)
        .output()
        .unwrap();
    let err = structured_error(&out);
    assert_eq!(err["code"], "CONFIG");
    let msg = err["message"].as_str().unwrap();
    assert!(
        msg.contains("did you mean `aggregation.max_series`"),
        "{msg}"
    );
}

/// The flags `toolsize serve --help` lists and the flags the key declaration names are the same
/// (besides `--config` and `--help`), so the generated file never points at a flag that is gone.
#[test]
fn serve_flags_are_the_declared_ones() {
    let out = Command::new(env!("CARGO_BIN_EXE_toolsize"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let mut listed: Vec<&str> = help
        .split_whitespace()
        .filter(|w| w.starts_with("--"))
        .map(|w| w.trim_end_matches(|c: char| !c.is_ascii_alphanumeric()))
        .filter(|w| !["--config", "--help"].contains(w))
        .collect();
    listed.sort();
    listed.dedup();
    let mut declared: Vec<&str> = toolsize::collector::config::keys::KEYS
        .iter()
        .filter_map(|k| k.flag)
        .collect();
    declared.sort();
    assert_eq!(listed, declared);
}

/// `docs/collector.md` lists every variable and flag with its key and default, as the
/// declaration makes them.
#[test]
fn the_docs_list_every_variable_and_flag() {
    let table = toolsize::collector::config::keys::sources_table();
    let docs =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/collector.md")).unwrap();
    assert!(
        docs.contains(&table),
        "docs/collector.md must hold this table:\n{table}"
    );
}

/// A bad value stops `serve` with a structured error (exit 2) naming the key and the flag,
/// variable or file it came from.
#[test]
fn a_bad_value_names_its_source() {
    let dir = support::collector::temp_dir("cfg-origin");
    let file = dir.join("bad.toml");
    std::fs::write(&file, "[aggregation]\nmax_series = 0\n").unwrap();
    let serve = || {
        let mut c = Command::new(env!("CARGO_BIN_EXE_toolsize"));
        c.arg("serve").env_remove("TOOLSIZE_MAX_SERIES");
        c
    };
    let cases = [
        (
            serve().args(["--max-series", "0"]).output().unwrap(),
            "flag --max-series".to_string(),
        ),
        (
            serve().env("TOOLSIZE_MAX_SERIES", "0").output().unwrap(),
            "environment variable TOOLSIZE_MAX_SERIES".to_string(),
        ),
        (
            serve().arg("--config").arg(&file).output().unwrap(),
            format!("config file {}", file.display()),
        ),
    ];
    for (out, from) in cases {
        let err = structured_error(&out);
        assert_eq!(err["code"], "CONFIG");
        assert_eq!(
            err["message"],
            format!("invalid value for aggregation.max_series ({from}): must be above 0")
        );
    }
    // A duration past 100 years is refused, not wrapped around or left to overflow a timer.
    let out = serve()
        .args(["--snapshot-interval", "999999999999999d"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = structured_error(&out);
    let msg = err["message"].as_str().unwrap();
    assert!(
        msg.contains("--snapshot-interval") && msg.contains("longer than 100 years"),
        "{msg}"
    );
    // Text that is not the key's type is the same error, not a usage error.
    let err = structured_error(&serve().args(["--admin-addr", "nope"]).output().unwrap());
    assert_eq!(err["code"], "CONFIG");
    let msg = err["message"].as_str().unwrap();
    assert!(
        msg.starts_with("invalid value for admin.addr (flag --admin-addr): \"nope\""),
        "{msg}"
    );
}

/// `--help` gives each flag its key's first sentence and the default computed from the
/// defaults, and the flags of lists are repeatable.
#[test]
fn serve_help_shows_the_computed_defaults() {
    let out = Command::new(env!("CARGO_BIN_EXE_toolsize"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    for want in [
        "--max-series <N>",
        "[default: 2000]",
        "--window <DURATION>",
        "[default: 5m, 1h]",
        "--otlp-grpc-addr <ADDR>",
        "[default: 127.0.0.1:4317]",
        "--stack <ID[=LIMIT],...>",
    ] {
        assert!(help.contains(want), "{want:?} not in\n{help}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_toolsize"))
        .args([
            "serve",
            "--window",
            "1m",
            "--window",
            "2m",
            "--max-series",
            "0",
        ])
        .output()
        .unwrap();
    // Parsed (both windows accepted), then refused for max_series: not a usage error.
    assert_eq!(structured_error(&out)["code"], "CONFIG");
}

/// `--workers N` (listeners.workers) sets how many worker threads serve the listeners: the
/// running daemon has that many (Linux: counted in /proc by thread name), and it still serves.
#[cfg(target_os = "linux")]
#[test]
fn workers_sets_the_worker_threads() {
    let workers = |pid: u32| {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|name| name.starts_with("tokio-rt-worker"))
            .count()
    };
    for n in [1, 3] {
        let d = support::collector::Binary::start(&["--workers", &n.to_string()], None);
        // A worker thread names itself once it runs, which can trail the listening line on a
        // loaded machine: wait for the count to settle, and never accept more than asked.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut seen = workers(d.child.id());
        while seen < n && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
            seen = workers(d.child.id());
        }
        assert_eq!(seen, n, "--workers {n}");
        let health = std::net::TcpStream::connect(d.admin)
            .and_then(|mut s| {
                use std::io::{Read, Write};
                s.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")?;
                let mut out = String::new();
                s.read_to_string(&mut out)?;
                Ok(out)
            })
            .unwrap();
        assert!(health.starts_with("HTTP/1.1 200"), "{health}");
        d.stop();
    }
    let err = structured_error(
        &Command::new(env!("CARGO_BIN_EXE_toolsize"))
            .args(["serve", "--workers", "5000"])
            .output()
            .unwrap(),
    );
    assert_eq!(
        err["message"],
        "invalid value for listeners.workers (flag --workers): must be between 0 and 1024"
    );
}
