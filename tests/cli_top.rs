//! `toolsize top` in a real terminal: tmux runs it against a real daemon; the captured screen
//! shows the tools with their sparklines and the firing alert, `r` and `o` and `p` re-sort the
//! table, `/` filters by name, `q` quits. tmux is a required peer (`scripts/test.sh` installs it).
#![cfg(feature = "collector")]

mod support;

use std::process::Command;
use std::time::Duration;

use support::collector::*;

/// tmux with `args`, on the server of `session` alone: each session has a server of its own
/// (`-L`, a socket named after it). On one shared server, a test ending its last session stops
/// the server while another test's `new-session` is connecting to it ("server exited
/// unexpectedly").
fn tmux(session: &str, args: &[&str]) -> std::process::Output {
    Command::new("tmux")
        .args(["-L", session])
        .args(args)
        .output()
        .expect("run tmux")
}

/// The pane's text once `pred` holds on it, within 30 s.
async fn screen_when(session: &str, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let out = tmux(session, &["capture-pane", "-p", "-t", session]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if pred(&text) {
            return text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what} not on screen within 30 s:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The row order of `tools` on the screen.
fn order(screen: &str, tools: &[&str]) -> Vec<String> {
    let mut at: Vec<(usize, String)> = tools
        .iter()
        .filter_map(|t| screen.find(&format!(" {t} ")).map(|i| (i, t.to_string())))
        .collect();
    at.sort();
    at.into_iter().map(|(_, t)| t).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_in_tmux_shows_sorts_filters_and_quits() {
    if !require("tmux", &["-V"]) {
        return;
    }
    // Windows other than the defaults, the shortest not first: top reads the daemon's.
    let daemon = Binary::start_quiet(
        "codex.tool-output.bytes-fallback",
        &["--window", "10m", "--window", "90s"],
        None,
    );
    // big_fetch: one call over the 10,000-byte ceiling; chatty: many small calls; mid: between.
    let mut spans = vec![own_span(0, "big_fetch", 30_000)];
    for n in 1..9 {
        spans.push(own_span(n, "chatty", 100));
    }
    for n in 9..12 {
        spans.push(own_span(n, "mid_size", 5_000));
    }
    let r = post_proto(daemon.http, &request("agent", spans)).await;
    assert!(r.status().is_success());
    let admin = daemon.admin;
    wait_for("the alert", Duration::from_secs(30), || async move {
        let a = get_json(admin, "/api/v1/alerts").await;
        (!a["firing"].as_array()?.is_empty()).then_some(())
    })
    .await;

    let cmd = format!(
        "{} top --url http://{admin}",
        env!("CARGO_BIN_EXE_toolsize")
    );
    let top = Session::start("top", &cmd);
    let session = top.name();
    let tools = ["big_fetch", "chatty", "mid_size"];

    let s = screen_when(session, "the three tools", |s| {
        order(s, &tools).len() == 3 && s.contains("ToolResultOverCeiling")
    })
    .await;
    assert_eq!(
        order(&s, &tools),
        ["big_fetch", "mid_size", "chatty"],
        "by p95:\n{s}"
    );
    assert!(s.contains("window 90s · sorted by p95"), "{s}");
    assert!(s.contains("firing alerts (1)"), "{s}");
    assert!(s.contains('█'), "no sparkline:\n{s}");

    tmux(session, &["send-keys", "-t", session, "r"]);
    let s = screen_when(session, "sorted by call rate", |s| {
        s.contains("sorted by call rate")
    })
    .await;
    assert_eq!(
        order(&s, &tools),
        ["chatty", "mid_size", "big_fetch"],
        "by rate:\n{s}"
    );

    tmux(session, &["send-keys", "-t", session, "o"]);
    let s = screen_when(session, "sorted by over ceiling", |s| {
        s.contains("sorted by over ceiling")
    })
    .await;
    assert_eq!(
        order(&s, &tools)[0],
        "big_fetch",
        "by over-ceiling count:\n{s}"
    );

    tmux(
        session,
        &["send-keys", "-t", session, "p", "/", "h", "a", "t", "Enter"],
    );
    let s = screen_when(session, "the filter", |s| {
        s.contains("filter: hat") && !s.contains("filter: /")
    })
    .await;
    assert_eq!(order(&s, &tools), ["chatty"], "filtered:\n{s}");

    tmux(session, &["send-keys", "-t", session, "q"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while tmux(session, &["has-session", "-t", session])
        .status
        .success()
    {
        if std::time::Instant::now() > deadline {
            panic!("q did not quit toolsize top");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    daemon.stop();
}

/// A detached tmux session running one command, on a tmux server of its own, killed with its
/// server when dropped, so a test that fails midway leaves no `toolsize top` running behind it.
struct Session(String);

impl Session {
    /// Starts `cmd` in a detached 150×30 tmux session, on a server of its own.
    fn start(name: &str, cmd: &str) -> Self {
        let session = format!("toolsize-{name}-{}", std::process::id());
        let out = tmux(
            &session,
            &[
                "new-session",
                "-d",
                "-s",
                &session,
                "-x",
                "150",
                "-y",
                "30",
                cmd,
            ],
        );
        assert!(
            out.status.success(),
            "tmux: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self(session)
    }

    fn name(&self) -> &str {
        &self.0
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = tmux(&self.0, &["kill-server"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_sends_the_token_from_a_file_or_the_variable() {
    if !require("tmux", &["-V"]) {
        return;
    }
    const TOKEN: &str = "t0p-s3cret";
    let daemon = Binary::start_with_env(&[], None, &[("TOOLSIZE_AUTH_TOKEN", TOKEN)]);
    use prost::Message;
    let r = reqwest::Client::new()
        .post(format!("http://{}/v1/traces", daemon.http))
        .header("content-type", "application/x-protobuf")
        .bearer_auth(TOKEN)
        .body(request("agent", vec![own_span(1, "guarded_tool", 700)]).encode_to_vec())
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let dir = temp_dir("top-token");
    let file = dir.join("token");
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    let bin = env!("CARGO_BIN_EXE_toolsize");
    let admin = daemon.admin;

    // No token: the status line says which to set, and no tool is shown.
    let none = Session::start(
        "top-no-token",
        &format!(
            "env -u TOOLSIZE_AUTH_TOKEN -u TOOLSIZE_AUTH_TOKEN_FILE {bin} top --url http://{admin}"
        ),
    );
    let s = screen_when(none.name(), "the 401", |s| s.contains("HTTP 401")).await;
    assert!(s.contains("--token-file"), "{s}");
    assert!(!s.contains("guarded_tool"), "{s}");
    drop(none);

    let from_file = Session::start(
        "top-token-file",
        &format!(
            "env -u TOOLSIZE_AUTH_TOKEN {bin} top --url http://{admin} --token-file {}",
            file.display()
        ),
    );
    screen_when(from_file.name(), "the tool (--token-file)", |s| {
        s.contains(" guarded_tool ")
    })
    .await;
    drop(from_file);

    let from_env = Session::start(
        "top-token-env",
        &format!("env TOOLSIZE_AUTH_TOKEN={TOKEN} {bin} top --url http://{admin}"),
    );
    screen_when(from_env.name(), "the tool (TOOLSIZE_AUTH_TOKEN)", |s| {
        s.contains(" guarded_tool ")
    })
    .await;
    drop(from_env);

    // A wrong token is refused and said so.
    let wrong = Session::start(
        "top-wrong-token",
        &format!("env TOOLSIZE_AUTH_TOKEN=wrong {bin} top --url http://{admin}"),
    );
    screen_when(wrong.name(), "the refusal", |s| {
        s.contains("the token was refused")
    })
    .await;
    drop(wrong);
    daemon.stop();
}

/// Over TLS: top reads a daemon whose listeners speak TLS (`tls.cert_file`), checking it
/// against the CA `SSL_CERT_FILE` names; without that CA the handshake fails and the status
/// line says so.
#[cfg(feature = "tls")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_reads_a_tls_daemon_it_trusts() {
    if !require("tmux", &["-V"]) || !require("openssl", &["version"]) {
        return;
    }
    let dir = temp_dir("top-tls");
    support::tls::make_certs(&dir);
    let (cert, key) = (dir.join("server.pem"), dir.join("server.key"));
    let daemon = Binary::start(
        &[
            "--tls-cert-file",
            cert.to_str().unwrap(),
            "--tls-key-file",
            key.to_str().unwrap(),
        ],
        None,
    );
    let bin = env!("CARGO_BIN_EXE_toolsize");
    let url = format!("https://127.0.0.1:{}", daemon.admin.port());

    let trusted = Session::start(
        "top-tls",
        &format!(
            "env -u SSL_CERT_DIR SSL_CERT_FILE={} {bin} top --url {url}",
            dir.join("ca.pem").display()
        ),
    );
    let refreshed = format!("{url} · 0 tools · refreshed");
    screen_when(trusted.name(), "a refresh over TLS", |s| {
        s.contains(&refreshed)
    })
    .await;
    drop(trusted);

    let untrusted = Session::start(
        "top-tls-untrusted",
        &format!("env -u SSL_CERT_FILE -u SSL_CERT_DIR {bin} top --url {url}"),
    );
    let s = screen_when(untrusted.name(), "the refused certificate", |s| {
        s.contains("TLS handshake")
    })
    .await;
    assert!(!s.contains(&refreshed), "{s}");
    // The daemon runs: the error does not suggest otherwise.
    assert!(!s.contains("is toolsize serve running"), "{s}");
    drop(untrusted);
    daemon.stop();
}
