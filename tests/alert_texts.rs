//! Alert texts say what happened: an over-ceiling alert says what the layer does over its limit
//! (its `action`), never "cut" for a layer that only warns, in the daemon's alert and in the
//! fleet rule alike.
//!
//! - the fleet rule (`alerts/toolsize.rules.yml`): for every action, the real `promtool` runs a
//!   unit test written here, a series of `toolsize_tool_results_over_ceiling_total` with that
//!   `action` label, and expects the description to end with [`Action::over_limit`];
//! - the daemon: the real binary with a service held to a custom layer of each action (the
//!   default layer's `warn` is checked in `over_ceiling.rs`); a result over it fires `ToolResultOverCeiling`, whose description on
//!   `/api/v1/alerts` ends with the layer's phrase, and `/metrics` labels the count with the
//!   action `toolsize layers` gives.
#![cfg(feature = "collector")]

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use support::collector::*;
use toolsize::layers::Action;

const RULES: &str = "alerts/toolsize.rules.yml";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A promtool unit test of the over-ceiling rule: one series per action, each expected to fire
/// with the action's phrase.
fn promtool_test(actions: &[Action], phrase: impl Fn(Action) -> String) -> String {
    let rules = root().join(RULES);
    let mut input = String::new();
    let mut expected = String::new();
    for (i, a) in actions.iter().enumerate() {
        let tool = format!("tool{i}");
        input.push_str(&format!(
            "      - series: 'toolsize_tool_results_over_ceiling_total{{job=\"toolsize\",instance=\"a:9464\",service=\"agent\",tool=\"{tool}\",layer=\"layer{i}\",action=\"{a}\"}}'\n        values: '0 0 1 1 1 1'\n"
        ));
        expected.push_str(&format!(
            "          - exp_labels:\n              severity: critical\n              service: agent\n              tool: {tool}\n              layer: layer{i}\n              action: {a}\n            exp_annotations:\n              summary: \"Tool {tool} returned results over the layer{i} ceiling.\"\n              description: {:?}\n              runbook_url: \"http://localhost:9464/runbook#toolsizeresultoverceiling\"\n              dashboard_url: \"http://localhost:3000/d/toolsize/toolsize?var-service=agent&var-tool={tool}\"\n",
            format!(
                "About 1 result(s) of tool {tool} (service agent) were over the ceiling of layer layer{i} in the last 5 minutes; {}.",
                phrase(*a)
            )
        ));
    }
    format!(
        "rule_files:\n  - {}\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n{input}    alert_rule_test:\n      - eval_time: 3m\n        alertname: ToolsizeResultOverCeiling\n        exp_alerts:\n{expected}",
        rules.display()
    )
}

/// Runs `promtool test rules` on `test`; its output on failure.
fn promtool(name: &str, test: &str) -> Result<(), String> {
    let dir = temp_dir(name);
    let file = dir.join("over_ceiling_actions.yml");
    std::fs::write(&file, test).unwrap();
    let out = Command::new("promtool")
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .expect("run promtool");
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

#[test]
fn the_fleet_rule_says_what_each_action_does() {
    if !require("promtool", &["--version"]) {
        return;
    }
    let test = promtool_test(&Action::ALL, |a| a.over_limit().to_string());
    if let Err(e) = promtool("alert-texts", &test) {
        panic!("the rule's text differs from the daemon's:\n{e}\n{test}");
    }
    // The check itself fails when the rule would say "cut" for a layer that only warns.
    let wrong = promtool_test(&[Action::Warn], |_| {
        Action::TruncateSilent.over_limit().into()
    });
    assert!(
        promtool("alert-texts-broken", &wrong).is_err(),
        "promtool accepted a wrong text"
    );
}

/// A daemon with one service per action, held to a custom layer of that action (1,000 bytes).
fn config(dir: &Path) -> std::path::PathBuf {
    let mut toml = String::new();
    for a in Action::ALL {
        toml.push_str(&format!(
            "[[layers.custom]]\nname = \"mine-{a}\"\nlimit = 1000\nunit = \"bytes\"\naction = \"{a}\"\n\n"
        ));
    }
    toml.push_str("[layers.services]\n");
    for a in Action::ALL {
        toml.push_str(&format!("\"svc-{a}\" = [\"mine-{a}\"]\n"));
    }
    let path = dir.join("toolsize.toml");
    std::fs::write(&path, toml).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemons_alert_says_what_each_action_does() {
    let dir = temp_dir("alert-texts-daemon");
    let file = config(&dir);
    let d = Binary::start_with_env(
        &["--config", file.to_str().unwrap()],
        None,
        &[("RUST_LOG", "error")],
    );
    // One result over each service's layer.
    let services: Vec<(String, Action)> = Action::ALL
        .into_iter()
        .map(|a| (format!("svc-{a}"), a))
        .collect();
    for (n, (service, _)) in services.iter().enumerate() {
        let r = post_proto(
            d.http,
            &request(service, vec![own_span(n as u64, "fetch", 20_000)]),
        )
        .await;
        assert!(r.status().is_success(), "{}", r.status());
    }
    let firing = wait_for(
        "an over-ceiling alert per service",
        Duration::from_secs(20),
        || async {
            let a = get_json(d.admin, "/api/v1/alerts").await;
            let f = a["firing"].as_array()?.clone();
            (f.len() >= services.len()).then_some(f)
        },
    )
    .await;
    let text = metrics(d.admin).await;
    for (service, action) in &services {
        let alert = firing
            .iter()
            .find(|a| a["labels"]["service"] == service.as_str())
            .unwrap_or_else(|| panic!("no alert for {service}: {firing:?}"));
        let description = alert["annotations"]["description"].as_str().unwrap();
        assert!(
            description.contains(&format!("; {}. Trace ", action.over_limit())),
            "{service} ({action}): {description}"
        );
        if *action == Action::Warn {
            assert!(!description.contains("model"), "{description}");
        }
        assert_eq!(alert["annotations"]["action"], action.as_str());
        let layer = alert["labels"]["layer"].as_str().unwrap();
        assert_eq!(
            sample(
                &text,
                &format!(
                    "toolsize_tool_results_over_ceiling_total{{service=\"{service}\",tool=\"fetch\",layer=\"{layer}\",action=\"{action}\"}}"
                )
            ),
            Some(1.0),
            "{service}"
        );
    }
    // The action each layer has in `toolsize layers --json`, the one the daemon used.
    let out = Command::new(env!("CARGO_BIN_EXE_toolsize"))
        .args(["layers", "--json"])
        .output()
        .unwrap();
    let layers: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for l in layers.as_array().unwrap() {
        let action = l["action"].as_str().unwrap();
        assert!(Action::parse(action).is_some(), "{l}");
    }
    d.stop();
}
