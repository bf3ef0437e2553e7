//! The first minutes with the real `toolsize` binary: help and usage errors as plain text on a
//! terminal (a pseudo-terminal made by `script`, a required peer) and as JSON for a program or
//! when asked; `--version` naming the commit and features; `localhost` accepted as an address; a
//! port in use naming its flag and key; `--log-format json`; and `export::init` refusing
//! `http/json` with a sentence naming what it accepts.
#![cfg(feature = "collector")]

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};

use support::cli::{structured_error, toolsize};
use support::collector::*;

/// `toolsize args…` run under a pseudo-terminal (stdin, stdout and stderr all on it), with
/// `env`; what the terminal showed, `\r\n` made `\n`, and the exit code.
fn on_a_terminal(args: &[&str], env: &[(&str, &str)]) -> Option<(String, i32)> {
    if !require("script", &["--version"]) {
        return None;
    }
    let mut line = String::from(env!("CARGO_BIN_EXE_toolsize"));
    for a in args {
        line.push_str(&format!(" '{a}'"));
    }
    let out = Command::new("script")
        .args(["-q", "-e", "-c", &line, "/dev/null"])
        .env_remove("TOOLSIZE_ERROR_FORMAT")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run script");
    let text = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    Some((text, out.status.code().expect("exited")))
}

fn piped(args: &[&str], env: &[(&str, &str)]) -> Output {
    toolsize()
        .args(args)
        .env_remove("TOOLSIZE_ERROR_FORMAT")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run toolsize")
}

#[test]
fn toolsize_alone_prints_its_help_as_text() {
    let Some((screen, code)) = on_a_terminal(&[], &[]) else {
        return;
    };
    assert_eq!(code, 2, "{screen}");
    assert!(screen.contains("Usage: toolsize <COMMAND>"), "{screen}");
    assert!(
        screen.contains("\n  serve "),
        "one command a line: {screen}"
    );
    assert!(
        !screen.contains("\\n") && !screen.contains("\"ok\""),
        "{screen}"
    );
    // Not on a terminal either: the help is for whoever typed `toolsize`.
    let out = piped(&[], &[]);
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8(out.stderr).unwrap();
    assert!(text.starts_with("Make tool-result size visible"), "{text}");
    assert!(text.contains("Usage: toolsize <COMMAND>"), "{text}");
}

#[test]
fn usage_errors_are_text_on_a_terminal_and_json_for_programs() {
    let Some((screen, code)) = on_a_terminal(&["serve", "--otlp-http-adr", "x"], &[]) else {
        return;
    };
    assert_eq!(code, 2, "{screen}");
    assert!(
        screen.starts_with("error: unexpected argument '--otlp-http-adr' found"),
        "{screen}"
    );
    assert!(
        screen.contains("tip: a similar argument exists: '--otlp-http-addr'"),
        "{screen}"
    );
    assert!(!screen.contains("\"ok\""), "{screen}");

    // A bad value found after parsing: its code in brackets.
    let (screen, code) = on_a_terminal(&["serve", "--max-series", "0"], &[]).unwrap();
    assert_eq!(code, 2, "{screen}");
    assert!(
        screen.starts_with("error[CONFIG]: invalid value for aggregation.max_series"),
        "{screen}"
    );

    // Asked for JSON on a terminal: one JSON object.
    let (screen, code) = on_a_terminal(
        &["serve", "--otlp-http-adr", "x"],
        &[("TOOLSIZE_ERROR_FORMAT", "json")],
    )
    .unwrap();
    assert_eq!(code, 2);
    let v: serde_json::Value = serde_json::from_str(screen.trim()).expect(&screen);
    assert_eq!(v["error"]["code"], "USAGE");

    // Standard error a pipe: JSON; asked for text: text.
    let error = structured_error(&piped(&["serve", "--otlp-http-adr", "x"], &[]));
    assert_eq!(error["code"], "USAGE");
    let out = piped(
        &["serve", "--otlp-http-adr", "x"],
        &[("TOOLSIZE_ERROR_FORMAT", "text")],
    );
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8(out.stderr).unwrap();
    assert!(text.starts_with("error: unexpected argument"), "{text}");

    // A format that does not exist: a usage error (in JSON) naming the two that do.
    let error = structured_error(&piped(&["layers"], &[("TOOLSIZE_ERROR_FORMAT", "yaml")]));
    assert_eq!(error["code"], "USAGE");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("TOOLSIZE_ERROR_FORMAT=\"yaml\""),
        "{message}"
    );
    assert!(message.contains("\"json\" or \"text\""), "{message}");
}

#[test]
fn version_names_the_commit_and_the_features() {
    let out = piped(&["--version"], &[]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let commit = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or("unknown".to_string(), |o| {
            String::from_utf8_lossy(&o.stdout).trim().to_string()
        });
    let expected = format!(
        "toolsize {} (commit {commit}; features: ",
        env!("CARGO_PKG_VERSION")
    );
    assert!(text.starts_with(&expected), "{text:?} vs {expected:?}");
    for feature in ["export", "cli", "collector"] {
        assert!(text.contains(feature), "{feature} missing: {text}");
    }
    assert_eq!(text.contains("tls"), cfg!(feature = "tls"), "{text}");
    assert_eq!(text.contains("rmcp"), cfg!(feature = "rmcp"), "{text}");
    assert_eq!(text.contains("rig"), cfg!(feature = "rig"), "{text}");
}

/// Starts `toolsize serve args…` and reads its ready line (`null` if it exited first).
fn serve(args: &[&str], env: &[(&str, &str)]) -> (std::process::Child, serde_json::Value) {
    let mut child = toolsize()
        .arg("serve")
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn toolsize serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ready = serde_json::from_str(&line).unwrap_or(serde_json::Value::Null);
    (child, ready)
}

fn stop(child: std::process::Child) -> String {
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stderr).unwrap()
}

#[tokio::test]
async fn localhost_is_accepted_in_flags_variables_and_the_file() {
    let dir = temp_dir("first-run-localhost");
    let file = dir.join("toolsize.toml");
    std::fs::write(&file, "[admin]\naddr = \"localhost:0\"\n").unwrap();
    let (child, ready) = serve(
        &[
            "--config",
            file.to_str().unwrap(),
            "--otlp-http-addr",
            "localhost:0",
        ],
        &[
            ("TOOLSIZE_OTLP_GRPC_ADDR", "localhost:0"),
            ("RUST_LOG", "warn"),
        ],
    );
    for k in ["otlp_grpc", "otlp_http", "admin"] {
        let addr = ready[k]
            .as_str()
            .unwrap_or_else(|| panic!("no {k}: {ready}"));
        assert!(addr.starts_with("127.0.0.1:"), "{k}: {addr}");
    }
    // The address it said answers, under the name it was given.
    let port = ready["otlp_http"]
        .as_str()
        .unwrap()
        .rsplit(':')
        .next()
        .unwrap();
    let admin: std::net::SocketAddr = ready["admin"].as_str().unwrap().parse().unwrap();
    use prost::Message;
    let r = reqwest::Client::new()
        .post(format!("http://localhost:{port}/v1/traces"))
        .header("content-type", "application/x-protobuf")
        .body(request("svc", vec![own_span(1, "read", 100)]).encode_to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    wait_for("the span", std::time::Duration::from_secs(30), || async {
        (tools(admin, "").await["tools"][0]["count"] == 1).then_some(())
    })
    .await;
    stop(child);
}

#[test]
fn a_port_in_use_names_the_flag_and_the_key() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = piped(
        &[
            "serve",
            "--otlp-grpc-addr",
            "127.0.0.1:0",
            "--otlp-http-addr",
            &addr,
            "--admin-addr",
            "127.0.0.1:0",
        ],
        &[("RUST_LOG", "off")],
    );
    let error = structured_error(&out);
    let message = error["message"].as_str().unwrap();
    let expected = format!(
        "{addr} (otlp http) is in use (another program, or another toolsize, listens on it): set \
         --otlp-http-addr, TOOLSIZE_OTLP_HTTP_ADDR or `otlp.http_addr` to another address"
    );
    assert_eq!(message, expected);
    // The admin listener too, by its own flag and key.
    let out = piped(
        &[
            "serve",
            "--otlp-grpc-addr",
            "127.0.0.1:0",
            "--otlp-http-addr",
            "127.0.0.1:0",
        ],
        &[("RUST_LOG", "off"), ("TOOLSIZE_ADMIN_ADDR", &addr)],
    );
    let message = structured_error(&out)["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("--admin-addr, TOOLSIZE_ADMIN_ADDR or `admin.addr`"),
        "{message}"
    );
}

#[test]
fn log_format_json_writes_one_object_per_line() {
    for how in [("--log-format", "json"), ("", "")] {
        let flags: Vec<&str> = ["--otlp-grpc-addr", "127.0.0.1:0", "--otlp-http-addr"]
            .into_iter()
            .chain(["127.0.0.1:0", "--admin-addr", "127.0.0.1:0"])
            .chain([how.0, how.1].into_iter().filter(|s| !s.is_empty()))
            .collect();
        let env: &[(&str, &str)] = match how.0 {
            "" => &[("TOOLSIZE_LOG_FORMAT", "json"), ("RUST_LOG", "info")],
            _ => &[("RUST_LOG", "info")],
        };
        let (child, ready) = serve(&flags, env);
        assert!(ready.is_object(), "not ready: {ready}");
        let log = stop(child);
        let lines: Vec<serde_json::Value> = log
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
            .collect();
        let listening = lines
            .iter()
            .find(|l| l["message"] == "Collector listening.")
            .unwrap_or_else(|| panic!("{log}"));
        assert_eq!(listening["level"], "INFO");
        assert_eq!(listening["otlp_http"], ready["otlp_http"]);
        assert!(listening["timestamp"].is_string());
        assert!(
            lines.iter().any(|l| l["message"] == "Collector stopped."),
            "{log}"
        );
    }
}

#[test]
fn export_refuses_http_json_with_a_sentence_naming_what_it_accepts() {
    // `toolsize wrap` sets up export with `export::init`'s builder when an endpoint is set.
    let out = piped(
        &["wrap", "--", "true"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ],
    );
    let log = String::from_utf8(out.stderr).unwrap();
    let line: serde_json::Value = serde_json::from_str(log.lines().next().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {log}"));
    let error = line["error"].as_str().unwrap();
    assert_eq!(
        error,
        "unsupported OTLP protocol \"http/json\" (from the builder, or \
         OTEL_EXPORTER_OTLP_TRACES_PROTOCOL / OTEL_EXPORTER_OTLP_PROTOCOL): toolsize exports \
         \"grpc\" or \"http/protobuf\"; the daemon reads both"
    );
    // The tool still ran.
    assert_eq!(out.status.code(), Some(0), "{log}");
}

#[test]
fn mcp_listen_takes_localhost_and_a_taken_port_names_the_flag() {
    let mut child = toolsize()
        .args([
            "mcp",
            "--listen",
            "localhost:0",
            "--upstream",
            "http://127.0.0.1:9/mcp",
        ])
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn toolsize mcp");
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let line = stderr
        .lines()
        .map_while(Result::ok)
        .find(|l| l.contains("\"listen\""))
        .expect("a listen line");
    let _ = child.kill();
    let _ = child.wait();
    let v: serde_json::Value = serde_json::from_str(&line).expect(&line);
    assert!(
        v["listen"].as_str().unwrap().starts_with("127.0.0.1:"),
        "{line}"
    );

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = piped(
        &[
            "mcp",
            "--listen",
            &addr,
            "--upstream",
            "http://127.0.0.1:9/mcp",
        ],
        &[],
    );
    let error = structured_error(&out);
    assert_eq!(error["code"], "LISTEN_FAILED");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .ends_with("give --listen another address"),
        "{error}"
    );
}
