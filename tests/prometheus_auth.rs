//! A real Prometheus scrapes a daemon that requires a token, with the `authorization` block of
//! `dashboards/README.md` exactly as documented (only its target, file and interval replaced):
//! the job is up and the daemon's metrics are stored; the same job without the block is down and
//! its scrapes are counted as refused.
#![cfg(feature = "collector")]

mod support;

use std::time::Duration;

use support::collector::*;
use support::prometheus::{self, Prometheus};

const TOKEN: &str = "scr4pe-t0ken";

/// The YAML block under "### With a token" in dashboards/README.md.
fn documented_block() -> String {
    let readme = include_str!("../dashboards/README.md");
    let section = readme
        .split("### With a token")
        .nth(1)
        .expect("dashboards/README.md has a \"### With a token\" section");
    let block = section
        .split("```yaml\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a yaml block in it");
    block.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_a_token_protected_daemon_with_the_documented_block() {
    if !prometheus::available() {
        return;
    }
    let daemon = Binary::start_with_env(
        &[],
        None,
        &[("TOOLSIZE_AUTH_TOKEN", TOKEN), ("RUST_LOG", "error")],
    );
    let dir = temp_dir("prometheus-auth");
    let token_file = dir.join("toolsize.token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();

    let block = documented_block();
    for line in [
        "authorization:",
        "credentials_file: /etc/prometheus/toolsize.token",
        "job_name: toolsize",
    ] {
        assert!(
            block.contains(line),
            "the documented block lost {line:?}:\n{block}"
        );
    }
    let with_token = block
        .replace(
            "/etc/prometheus/toolsize.token",
            &token_file.display().to_string(),
        )
        .replace("scrape_interval: 15s", "scrape_interval: 1s")
        .replace(
            r#"["agents-1.internal:9464", "agents-2.internal:9464"]"#,
            &format!(r#"["{}"]"#, daemon.admin),
        );
    assert!(
        with_token.contains(&daemon.admin.to_string()),
        "{with_token}"
    );
    // The same job without the block: what a scrape config without credentials gets.
    let without: String = with_token
        .lines()
        .skip(1)
        .filter(|l| !l.contains("authorization:") && !l.contains("credentials_file:"))
        .map(|l| {
            format!(
                "{}\n",
                l.replace("job_name: toolsize", "job_name: no-token")
            )
        })
        .collect();
    let config = format!("global:\n  scrape_timeout: 900ms\n{with_token}{without}");
    let prom = Prometheus::start_config(&dir, &config, &[]).await;

    let up = |job: &'static str| {
        let prom = &prom;
        async move {
            let r = prom.query(&format!("up{{job=\"{job}\"}}")).await;
            r.first()
                .map(|s| s["value"][1].as_str().unwrap().to_string())
        }
    };
    wait_for("both jobs scraped", Duration::from_secs(20), || async {
        Some((up("toolsize").await?, up("no-token").await?))
    })
    .await;
    assert_eq!(up("toolsize").await.as_deref(), Some("1"));
    assert_eq!(up("no-token").await.as_deref(), Some("0"));
    // The daemon's own metrics are stored from the authorised job, the tokenless scrapes
    // among them.
    wait_for("the refused scrapes, stored", Duration::from_secs(30), || async {
        let stored = prom
            .query(
                "toolsize_admin_requests_refused_total{job=\"toolsize\",reason=\"unauthenticated\"} >= 1",
            )
            .await;
        (stored.len() == 1).then_some(())
    })
    .await;
    daemon.stop();
}
