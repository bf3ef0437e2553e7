//! `toolsize top` in a real terminal: tmux runs it against a real daemon; the captured screen
//! shows the tools with their sparklines and the firing alert, `r` and `o` and `p` re-sort the
//! table, `/` filters by name, `q` quits. tmux is a required peer (`scripts/test.sh` installs it).
#![cfg(feature = "collector")]

mod support;

use std::process::Command;
use std::time::Duration;

use support::collector::*;

fn tmux(args: &[&str]) -> std::process::Output {
    Command::new("tmux").args(args).output().expect("run tmux")
}

/// The pane's text once `pred` holds on it, within 10 s.
async fn screen_when(session: &str, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let out = tmux(&["capture-pane", "-p", "-t", session]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if pred(&text) {
            return text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what} not on screen within 10 s:\n{text}"
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
    wait_for("the alert", Duration::from_secs(10), || async move {
        let a = get_json(admin, "/api/v1/alerts").await;
        (!a["firing"].as_array()?.is_empty()).then_some(())
    })
    .await;

    let session = format!("toolsize-top-{}", std::process::id());
    let cmd = format!(
        "{} top --url http://{admin}",
        env!("CARGO_BIN_EXE_toolsize")
    );
    let out = tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "150",
        "-y",
        "30",
        &cmd,
    ]);
    assert!(
        out.status.success(),
        "tmux: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tools = ["big_fetch", "chatty", "mid_size"];

    let s = screen_when(&session, "the three tools", |s| {
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

    tmux(&["send-keys", "-t", &session, "r"]);
    let s = screen_when(&session, "sorted by call rate", |s| {
        s.contains("sorted by call rate")
    })
    .await;
    assert_eq!(
        order(&s, &tools),
        ["chatty", "mid_size", "big_fetch"],
        "by rate:\n{s}"
    );

    tmux(&["send-keys", "-t", &session, "o"]);
    let s = screen_when(&session, "sorted by over ceiling", |s| {
        s.contains("sorted by over ceiling")
    })
    .await;
    assert_eq!(
        order(&s, &tools)[0],
        "big_fetch",
        "by over-ceiling count:\n{s}"
    );

    tmux(&[
        "send-keys",
        "-t",
        &session,
        "p",
        "/",
        "h",
        "a",
        "t",
        "Enter",
    ]);
    let s = screen_when(&session, "the filter", |s| {
        s.contains("filter: hat") && !s.contains("filter: /")
    })
    .await;
    assert_eq!(order(&s, &tools), ["chatty"], "filtered:\n{s}");

    tmux(&["send-keys", "-t", &session, "q"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while tmux(&["has-session", "-t", &session]).status.success() {
        if std::time::Instant::now() > deadline {
            tmux(&["kill-session", "-t", &session]);
            panic!("q did not quit toolsize top");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    daemon.stop();
}
