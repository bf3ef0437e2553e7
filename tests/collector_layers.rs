//! The daemon knows the user's layer stack: it is resolved from flag > env > file > default and
//! served on `/api/v1/layers` with each limit's source; a result over a ceiling is counted under
//! the weakest layer that cuts it (`/metrics`) and listed in `/api/v1/tools/{tool}`; an unknown
//! layer id stops the start with a structured "did you mean" (exit 2).
#![cfg(feature = "collector")]

mod support;

use std::process::Command;

use support::cli::structured_error;
use support::collector::*;
use toolsize::collector::config::{Config, Flags};
use toolsize::collector::Daemon;
use toolsize::Origin;

/// (id, limit, source) of every layer served on `/api/v1/layers`.
fn layer_rows(v: &serde_json::Value) -> Vec<(String, u64, String)> {
    v["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["id"].as_str().unwrap().to_owned(),
                l["limit"].as_u64().unwrap(),
                l["source"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn rows(r: &[(&str, u64, &str)]) -> Vec<(String, u64, String)> {
    r.iter()
        .map(|(i, l, s)| (i.to_string(), *l, s.to_string()))
        .collect()
}

/// Starts the daemon of `config` on loopback ports.
async fn start_with(mut config: Config) -> Daemon {
    let ports = loopback_config();
    config.otlp = ports.otlp;
    config.admin = ports.admin;
    Daemon::start(&config).await.unwrap()
}

/// The configuration `flags` give.
fn with_flags(flags: &[&str]) -> Config {
    Config::load(None, Vec::new(), &Flags::parse_from(flags).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stack_named_by_flag_is_served_with_sources() {
    let b = Binary::start_with_env(
        &[
            "--stack",
            "cline.message-builder=6000,codex.tool-output.tokens",
            "--ceiling-bytes",
            "32768",
        ],
        None,
        &[],
    );
    let v = get_json(b.admin, "/api/v1/layers").await;
    assert_eq!(
        layer_rows(&v),
        rows(&[
            ("cline.message-builder", 6000, "flag"),
            ("codex.tool-output.tokens", 10_000, "catalog"),
            ("default", 32_768, "flag"),
        ])
    );
    let codex = &v["layers"][1];
    assert_eq!(codex["unit"], "tokens");
    assert_eq!(codex["estimated"], true);
    assert_eq!(codex["limit_bytes"], 40_000);
    assert!(codex["product"].as_str().is_some_and(|p| !p.is_empty()));
    for key in ["scope", "action"] {
        assert!(codex[key].is_string(), "{key}");
    }
    assert!(v["ceiling"]["layer"].is_string());
    b.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_results_are_counted_under_the_weakest_layer() {
    let d = start_with(with_flags(&[
        "--stack",
        "codex.tool-output.tokens,default",
        "--ceiling-bytes",
        "12345",
    ]))
    .await;
    // 50,000 bytes: over codex's 10,000 tokens (≈ 40,000 bytes) and over default's 12,345; the
    // weakest is default. 13,000: over default only. 100: under every limit.
    let spans = vec![
        own_span(1, "big", 50_000),
        own_span(2, "big", 13_000),
        own_span(3, "small", 100),
    ];
    assert!(post_proto(d.otlp_http_addr, &request("agent", spans))
        .await
        .status()
        .is_success());

    let text = metrics(d.admin_addr).await;
    // The action label: the catalog's, or `warn` for the default layer.
    let over = |tool: &str, layer: &str| {
        let action = toolsize::layers::find(layer).map_or("warn", |l| l.action.as_str());
        sample(
            &text,
            &format!(
                "toolsize_tool_results_over_ceiling_total{{service=\"agent\",tool=\"{tool}\",layer=\"{layer}\",action=\"{action}\"}}"
            ),
        )
    };
    assert_eq!(over("big", "default"), Some(2.0), "{text}");
    assert_eq!(over("big", "codex.tool-output.tokens"), Some(0.0));
    assert_eq!(over("small", "default"), Some(0.0));
    assert_eq!(
        sample(&text, "toolsize_ceiling_bytes{layer=\"default\"}"),
        Some(12_345.0)
    );
    assert_eq!(
        sample(
            &text,
            "toolsize_ceiling_bytes{layer=\"codex.tool-output.tokens\"}"
        ),
        Some(40_000.0)
    );
    // The ceilings are bucket bounds of the classic histogram.
    for le in ["12345", "40000"] {
        let series = format!(
            "toolsize_tool_result_size_bytes_bucket{{service=\"agent\",tool=\"big\",le=\"{le}\"}}"
        );
        assert!(sample(&text, &series).is_some(), "{series} missing");
    }
    if require("promtool", &["--version"]) {
        promtool_check(&text)
            .unwrap_or_else(|e| panic!("promtool check metrics failed:\n{e}\n{text}"));
    }

    let big = get_json(d.admin_addr, "/api/v1/tools/big").await;
    let s = &big["series"][0];
    assert_eq!(s["over_ceiling"][0]["layer"], "default");
    assert_eq!(s["over_ceiling"][0]["count"], 2);
    let recent = s["recent_over_ceiling"].as_array().unwrap();
    assert_eq!(recent.len(), 2);
    // Newest first; the one of 50,000 bytes was recorded first.
    let r = &recent[1];
    assert_eq!(r["bytes"], 50_000);
    assert_eq!(r["layer"], "default");
    assert_eq!(r["limit"], 12_345);
    assert_eq!(r["unit"], "bytes");
    assert_eq!(r["estimated"], false);
    assert_eq!(r["trace_id"].as_str().unwrap().len(), 32);
    assert_eq!(r["span_id"].as_str().unwrap().len(), 16);
    assert_eq!(r["args_hash"], "000000000001");

    let small = get_json(d.admin_addr, "/api/v1/tools/small").await;
    let s = &small["series"][0];
    assert_eq!(s["over_ceiling"], serde_json::json!([]));
    assert_eq!(s["recent_over_ceiling"], serde_json::json!([]));
    d.shutdown().await;
}

#[test]
fn unknown_stack_id_exits_2_with_a_suggestion() {
    let out = Command::new(env!("CARGO_BIN_EXE_toolsize"))
        .args(["serve", "--admin-addr", "127.0.0.1:0"])
        .args(["--stack", "cline.mesage-builder"])
        .env_remove("TOOLSIZE_STACK")
        .output()
        .unwrap();
    let err = structured_error(&out);
    assert_eq!(err["code"], "UNKNOWN_LAYER");
    let msg = err["message"].as_str().unwrap();
    assert!(
        msg.contains("did you mean \"cline.message-builder\""),
        "{msg}"
    );

    // In the file and the environment too.
    let dir = temp_dir("layers-unknown");
    let file = dir.join("c.toml");
    std::fs::write(&file, "[layers]\nstack = [\"defualt\"]\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_toolsize"))
        .arg("serve")
        .arg("--config")
        .arg(&file)
        .output()
        .unwrap();
    let err = structured_error(&out);
    assert_eq!(err["code"], "UNKNOWN_LAYER");
    assert!(err["message"]
        .as_str()
        .unwrap()
        .contains("did you mean \"default\""));
    let out = Command::new(env!("CARGO_BIN_EXE_toolsize"))
        .arg("serve")
        .env("TOOLSIZE_STACK", "codex.tool-output.tokenz")
        .output()
        .unwrap();
    assert_eq!(structured_error(&out)["code"], "UNKNOWN_LAYER");
}

#[test]
fn stack_precedence_is_flag_env_file() {
    let dir = temp_dir("layers-precedence");
    let file = dir.join("c.toml");
    std::fs::write(
        &file,
        "[layers]\nstack = [\"codex.tool-output.tokens\", \"cline.message-builder\", \"my-proxy\"]\n\
         ceiling_bytes = 4096\n[layers.overrides]\n\"cline.message-builder\" = 7000\n\
         [[layers.custom]]\nname = \"my-proxy\"\nlimit = 3000\nunit = \"chars\"\n",
    )
    .unwrap();
    let env = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let got = |c: &Config| -> Vec<(String, u64, Origin)> {
        c.stack
            .layers()
            .iter()
            .map(|l| (l.id().to_owned(), l.limit, l.source))
            .collect()
    };
    let own = |r: &[(&str, u64, Origin)]| -> Vec<(String, u64, Origin)> {
        r.iter().map(|(i, l, s)| (i.to_string(), *l, *s)).collect()
    };

    // File alone.
    let c = Config::load(Some(&file), env(&[]), &Flags::default()).unwrap();
    assert_eq!(
        got(&c),
        own(&[
            ("codex.tool-output.tokens", 10_000, Origin::Catalog),
            ("cline.message-builder", 7000, Origin::File),
            ("my-proxy", 3000, Origin::File),
            ("default", 4096, Origin::File),
        ])
    );
    // Env beats file: its list replaces the file's, its limits win; the file's custom layer is
    // in the stack where the list names it.
    let c = Config::load(
        Some(&file),
        env(&[
            ("TOOLSIZE_STACK", "cline.message-builder=5000,my-proxy"),
            ("TOOLSIZE_CEILING_BYTES", "8192"),
        ]),
        &Flags::default(),
    )
    .unwrap();
    assert_eq!(
        got(&c),
        own(&[
            ("cline.message-builder", 5000, Origin::Env),
            ("my-proxy", 3000, Origin::File),
            ("default", 8192, Origin::Env),
        ])
    );
    // Flag beats env; a custom layer its list leaves out is not in the stack.
    let flags = Flags::parse_from([
        "--stack",
        "cline.message-builder=4000",
        "--ceiling-bytes",
        "2048",
    ])
    .unwrap();
    let c = Config::load(
        Some(&file),
        env(&[
            ("TOOLSIZE_STACK", "cline.message-builder=5000,my-proxy"),
            ("TOOLSIZE_CEILING_BYTES", "8192"),
        ]),
        &flags,
    )
    .unwrap();
    assert_eq!(
        got(&c),
        own(&[
            ("cline.message-builder", 4000, Origin::Flag),
            ("default", 2048, Origin::Flag),
        ])
    );
    let ceiling = c.stack.ceiling_bytes().unwrap();
    assert_eq!(
        (ceiling.layer_id, ceiling.source),
        ("default", Origin::Flag)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_applies_env_over_file_and_flag_over_env() {
    let dir = temp_dir("layers-binary");
    let file = dir.join("c.toml");
    std::fs::write(
        &file,
        "[layers]\nstack = [\"codex.tool-output.tokens\"]\nceiling_bytes = 4096\n",
    )
    .unwrap();
    let config = file.to_str().unwrap();
    let b = Binary::start_with_env(
        &["--config", config, "--ceiling-bytes", "2048"],
        None,
        &[("TOOLSIZE_STACK", "cline.message-builder=5000")],
    );
    let v = get_json(b.admin, "/api/v1/layers").await;
    assert_eq!(
        layer_rows(&v),
        rows(&[
            ("cline.message-builder", 5000, "env"),
            ("default", 2048, "flag"),
        ])
    );
    b.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_chars_on_the_span_decide_a_chars_layer() {
    let config = Config::from_toml(
        "[[layers.custom]]\nname = \"my-chars\"\nlimit = 1000\nunit = \"chars\"\n\
         scope = \"per_result\"\naction = \"truncate_silent\"\n",
    )
    .unwrap();
    let d = start_with(config).await;
    // 3,000 bytes of non-ASCII text, 900 chars: under the 1,000-char limit when the span says
    // so; without `tool.result.chars`, chars are estimated from bytes (3,000) and over it.
    let mut exact = own_span(1, "exact", 3000);
    exact.attributes.push(i("tool.result.chars", 900));
    let spans = vec![exact, own_span(2, "estimated", 3000)];
    assert!(post_proto(d.otlp_http_addr, &request("agent", spans))
        .await
        .status()
        .is_success());

    let text = metrics(d.admin_addr).await;
    let over = |tool: &str| {
        sample(
            &text,
            &format!(
                "toolsize_tool_results_over_ceiling_total{{service=\"agent\",tool=\"{tool}\",layer=\"my-chars\",action=\"truncate_silent\"}}"
            ),
        )
    };
    assert_eq!(over("exact"), Some(0.0), "{text}");
    assert_eq!(over("estimated"), Some(1.0), "{text}");

    let exact = get_json(d.admin_addr, "/api/v1/tools/exact").await;
    assert_eq!(
        exact["series"][0]["recent_over_ceiling"],
        serde_json::json!([])
    );
    let est = get_json(d.admin_addr, "/api/v1/tools/estimated").await;
    let recent = est["series"][0]["recent_over_ceiling"].as_array().unwrap();
    assert_eq!(recent.len(), 1);
    assert_eq!(recent[0]["layer"], "my-chars");
    assert_eq!(recent[0]["unit"], "chars");
    assert_eq!(recent[0]["value"], 3000);
    assert_eq!(recent[0]["estimated"], true);
    d.shutdown().await;
}
