//! `toolsize wrap`: the wrapped tool's output measured, guarded and reported as one complete
//! envelope, its exit code passed through, its own envelope audited.
#![cfg(all(feature = "cli", unix))]

#[path = "support/cli.rs"]
mod cli;
#[path = "support/sink.rs"]
#[allow(dead_code, unreachable_pub)]
mod sink;

use cli::{
    assert_envelope_shape, code, python_loads, run, scratch, structured_error, warning_codes, write,
};
use serde_json::{json, Value};

fn corpus() -> Vec<(&'static str, Vec<u8>)> {
    let mut deep = json!(["leaf ".repeat(2000)]);
    for _ in 0..100 {
        deep = json!({ "level": deep, "pad": "p".repeat(50) });
    }
    let mut noise = Vec::with_capacity(200_000);
    let mut x: u32 = 12345;
    for _ in 0..200_000 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        noise.push((x >> 16) as u8);
    }
    let rows: Vec<Value> = (0..8_000)
        .map(|i| json!({"id": i, "name": format!("row {i}"), "body": "lorem ipsum ".repeat(5)}))
        .collect();
    vec![
        ("small-text", b"hello\n".to_vec()),
        ("empty", Vec::new()),
        (
            "huge-text",
            "a log line with some words in it\n"
                .repeat(60_000)
                .into_bytes(),
        ),
        (
            "huge-json",
            json!({ "rows": rows }).to_string().into_bytes(),
        ),
        ("deep-json", deep.to_string().into_bytes()),
        (
            "too-deep-json",
            format!("{}1{}", "[".repeat(3000), "]".repeat(3000)).into_bytes(),
        ),
        (
            "non-ascii-text",
            "漢字と絵文字🙂 é ü\n".repeat(20_000).into_bytes(),
        ),
        (
            "non-ascii-json",
            json!({"title": "ünïcödé🙂".repeat(5000), "tags": vec!["漢"; 3000]})
                .to_string()
                .into_bytes(),
        ),
        (
            "escapes-json",
            json!({"ctl": "\u{0}\u{1}\u{1f}\"\\\n\t".repeat(5000)})
                .to_string()
                .into_bytes(),
        ),
        ("binary", noise),
        ("nul-bytes", vec![0u8; 50_000]),
        (
            "big-envelope",
            json!({"ok": true, "data": {"items": rows.iter().take(3000).collect::<Vec<_>>()},
                   "error": null, "warnings": [], "meta": {"duration_ms": 3, "truncated": false}})
            .to_string()
            .into_bytes(),
        ),
    ]
}

#[test]
fn python_parses_every_output_and_the_limit_holds() {
    let dir = scratch("wrap-corpus");
    let spill = dir.join("spill");
    let spill = spill.to_string_lossy().into_owned();
    for (name, payload) in corpus() {
        let file = write(&dir, name, &payload);
        for policy in ["truncate", "spill", "reject"] {
            for limit in [1024u64, 16_384] {
                let limit_s = limit.to_string();
                let out = run(
                    &[
                        "wrap",
                        "--tool",
                        name,
                        "--max-output",
                        &limit_s,
                        "--policy",
                        policy,
                        "--spill-dir",
                        &spill,
                        "--",
                        "cat",
                        &file,
                    ],
                    None,
                );
                let what = format!("{name} {policy} {limit}");
                // The limit is the whole envelope, not only its data.
                let line = out.stdout.strip_suffix(b"\n").unwrap_or(&out.stdout);
                assert!(
                    line.len() as u64 <= limit,
                    "{what}: printed {} bytes",
                    line.len()
                );
                let loaded = python_loads(&out.stdout);
                let env = &loaded.envelope;
                assert_envelope_shape(env);
                let over = payload.len() as u64 > limit;
                if !over {
                    assert_eq!(code(&out), 0, "{what}");
                    assert_eq!(env["meta"]["truncated"], json!(false), "{what}");
                    continue;
                }
                match policy {
                    "reject" => {
                        assert_eq!(code(&out), 2, "{what}");
                        assert_eq!(env["error"]["code"], json!("RESULT_TOO_LARGE"), "{what}");
                        assert_eq!(env["error"]["limit"], json!(limit), "{what}");
                        assert_eq!(env["error"]["actual"], json!(payload.len()), "{what}");
                        assert!(env["error"]["hint"].as_str().unwrap().contains("cursor"));
                        assert_eq!(env["data"], json!(null), "{what}");
                    }
                    "truncate" => {
                        assert_eq!(code(&out), 0, "{what}");
                        assert_eq!(env["meta"]["truncated"], json!(true), "{what}");
                        assert!(
                            warning_codes(env).iter().any(|c| c == "FIELD_TRUNCATED"),
                            "{what}: {:?}",
                            env["warnings"]
                        );
                        assert!(
                            loaded.data_bytes <= limit,
                            "{what}: data is {} bytes",
                            loaded.data_bytes
                        );
                    }
                    _ => {
                        assert_eq!(code(&out), 0, "{what}");
                        assert_eq!(env["meta"]["truncated"], json!(true), "{what}");
                        let spilled = env["warnings"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .find(|w| w["code"] == json!("RESULT_SPILLED"))
                            .unwrap_or_else(|| panic!("{what}: no RESULT_SPILLED"));
                        let id = spilled["full_payload_id"].as_str().unwrap();
                        let stored = std::fs::read(format!("{spill}/{id}.out")).unwrap();
                        assert!(!stored.is_empty(), "{what}");
                        assert!(spilled["fetch"].as_str().unwrap().contains(id), "{what}");
                    }
                }
            }
        }
    }
}

#[test]
fn text_is_cut_head_and_tail_with_a_marker() {
    let dir = scratch("wrap-text");
    let mut text = String::from("FIRST LINE\n");
    text.push_str(&"middle\n".repeat(10_000));
    text.push_str("error: the last line says what failed\n");
    let file = write(&dir, "out.txt", text.as_bytes());
    let out = run(&["wrap", "--max-output", "1024", "--", "cat", &file], None);
    let env = python_loads(&out.stdout).envelope;
    let data = env["data"].as_str().unwrap();
    assert!(data.len() <= 1024);
    assert!(data.starts_with("FIRST LINE\n"));
    assert!(data.ends_with("error: the last line says what failed\n"));
    assert!(data.contains(&format!("of {} bytes", text.len())));
    let w = &env["warnings"][0];
    assert_eq!(w["code"], json!("FIELD_TRUNCATED"));
    assert_eq!(w["field"], json!("data"));
    assert_eq!(w["original_length"], json!(text.len()));
    assert_eq!(w["unit"], json!("bytes"));
    assert_eq!(env["meta"]["original_bytes"], json!(text.len()));
}

#[test]
fn head_ratio_and_inspect_wrapper() {
    let dir = scratch("wrap-inspect");
    let text = format!("HEAD{}TAIL", "-".repeat(20_000));
    let file = write(&dir, "out.txt", text.as_bytes());
    let out = run(
        &[
            "wrap",
            "--tool",
            "bash",
            "--max-output",
            "2000",
            "--head-ratio",
            "0.9",
            "--inspect-wrapper",
            "--",
            "cat",
            &file,
        ],
        None,
    );
    let env = python_loads(&out.stdout).envelope;
    let data = env["data"].as_str().unwrap();
    assert!(data.len() <= 2000);
    assert!(data.starts_with("The output of your call to bash was too long to be displayed."));
    assert!(data.contains("<START_TOOL_OUTPUT>\nHEAD"));
    assert!(data.ends_with("TAIL\n<END_TOOL_OUTPUT>"));
    let kept = env["warnings"][0]["truncated_length"].as_u64().unwrap();
    let head = data
        .split("<START_TOOL_OUTPUT>\n")
        .nth(1)
        .unwrap()
        .split("\n[...")
        .next()
        .unwrap();
    assert_eq!(head.len() as u64, kept * 9 / 10, "head share");

    let out = run(&["wrap", "--head-ratio", "1.5", "--", "true"], None);
    assert_eq!(code(&out), 2);
}

#[test]
fn the_exit_code_is_passed_through() {
    let out = run(&["wrap", "--", "sh", "-c", "echo partial; exit 7"], None);
    assert_eq!(code(&out), 7);
    let env = python_loads(&out.stdout).envelope;
    assert_eq!(env["ok"], json!(false));
    assert_eq!(env["error"]["code"], json!("TOOL_FAILED"));
    assert_eq!(env["data"], json!("partial\n"));

    let out = run(&["wrap", "--", "sh", "-c", "kill -TERM $$"], None);
    assert_eq!(code(&out), 128 + 15);
    python_loads(&out.stdout);

    let out = run(&["wrap", "--", "/nonexistent/tool"], None);
    assert_eq!(code(&out), 2);
    let env = python_loads(&out.stdout).envelope;
    assert_eq!(env["error"]["code"], json!("SPAWN_FAILED"));
}

#[test]
fn an_envelope_flagged_truncated_without_a_warning_is_reported_loudly() {
    let body = r#"{"ok":true,"data":{"body":"cut"},"error":null,"warnings":[],"meta":{"duration_ms":1,"truncated":true}}"#;
    let out = run(&["wrap", "--", "printf", "%s", body], None);
    assert_eq!(code(&out), 0);
    let env = python_loads(&out.stdout).envelope;
    assert_eq!(warning_codes(&env), vec!["TRUNCATION_UNREPORTED"]);
    assert_eq!(env["meta"]["truncated"], json!(true));
    assert_eq!(env["data"], json!({"body": "cut"}));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("misreports truncation"), "{stderr}");
}

#[test]
fn an_envelope_with_warnings_but_no_flag_is_reported_and_flagged() {
    let body = r#"{"ok":true,"data":{"body":"cut"},"error":null,"warnings":[{"code":"FIELD_TRUNCATED","field":"data.body","original_length":4200,"truncated_length":3}],"meta":{"duration_ms":1,"truncated":false}}"#;
    let out = run(&["wrap", "--", "printf", "%s", body], None);
    let env = python_loads(&out.stdout).envelope;
    assert_eq!(
        warning_codes(&env),
        vec!["FIELD_TRUNCATED", "TRUNCATION_UNREPORTED"]
    );
    assert_eq!(env["meta"]["truncated"], json!(true));
    assert!(!out.stderr.is_empty());
}

#[test]
fn a_consistent_envelope_passes_unchanged() {
    let body = json!({"ok": true, "data": {"id": 1}, "error": null, "warnings": [],
                      "meta": {"duration_ms": 1, "truncated": false}});
    let out = run(&["wrap", "--", "printf", "%s", &body.to_string()], None);
    let env = python_loads(&out.stdout).envelope;
    assert_eq!(env, body);
    assert!(out.stderr.is_empty());
}

#[test]
fn an_oversized_envelope_has_its_data_cut_and_described() {
    let items: Vec<Value> = (0..500)
        .map(|i| json!({"id": i, "text": "t".repeat(100)}))
        .collect();
    let body = json!({"ok": true, "data": {"items": items}, "error": null, "warnings": [],
                      "meta": {"duration_ms": 1, "truncated": false}});
    let dir = scratch("wrap-envelope");
    let file = write(&dir, "env.json", body.to_string().as_bytes());
    let out = run(&["wrap", "--max-output", "2000", "--", "cat", &file], None);
    let loaded = python_loads(&out.stdout);
    let env = loaded.envelope;
    assert!(loaded.data_bytes <= 2000);
    assert_eq!(env["meta"]["truncated"], json!(true));
    let w = env["warnings"].as_array().unwrap();
    assert!(w
        .iter()
        .any(|w| w["field"] == json!("data.items") && w["unit"] == json!("items")));
}

#[test]
fn the_limit_comes_from_the_environment_and_bad_values_are_refused() {
    let dir = scratch("wrap-env");
    let file = write(&dir, "out.txt", "z".repeat(5000).as_bytes());
    let out = cli::toolsize()
        .args(["wrap", "--", "cat", &file])
        .env("TOOLSIZE_MAX_TOOL_OUTPUT", "2000")
        .output()
        .unwrap();
    assert!(out.stdout.len() <= 2001);
    let loaded = python_loads(&out.stdout);
    assert!(loaded.data_bytes <= 2000);
    assert_eq!(loaded.envelope["meta"]["truncated"], json!(true));

    let out = cli::toolsize()
        .args(["wrap", "--", "cat", &file])
        .env("TOOLSIZE_MAX_TOOL_OUTPUT", "16k")
        .output()
        .unwrap();
    assert_eq!(cli::structured_error(&out)["code"], json!("INVALID_LIMIT"));

    // Explicit beats environment.
    let out = cli::toolsize()
        .args(["wrap", "--max-output", "10000", "--", "cat", &file])
        .env("TOOLSIZE_MAX_TOOL_OUTPUT", "2000")
        .output()
        .unwrap();
    assert_eq!(
        python_loads(&out.stdout).envelope["meta"]["truncated"],
        json!(false)
    );
}

#[test]
fn the_tool_call_span_is_exported_when_otlp_is_configured() {
    use toolsize::semconv::{
        TOOL_NAME, TOOL_RESULT_BYTES, TOOL_RESULT_ORIGINAL_BYTES, TOOL_RESULT_TRUNCATED,
    };

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (addr, received) = rt.block_on(sink::http());
    let dir = scratch("wrap-otlp");
    let file = write(&dir, "out.txt", "w".repeat(9000).as_bytes());
    let out = cli::toolsize()
        .args([
            "wrap",
            "--tool",
            "big_cat",
            "--max-output",
            "2000",
            "--",
            "cat",
            &file,
        ])
        .env_remove("TOOLSIZE_MAX_TOOL_OUTPUT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}"))
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spans = received.spans();
    assert_eq!(spans.len(), 1, "{spans:#?}");
    let span = &spans[0].1;
    assert_eq!(
        sink::str_attr(&span.attributes, TOOL_NAME).as_deref(),
        Some("big_cat")
    );
    assert_eq!(sink::int_attr(span, TOOL_RESULT_ORIGINAL_BYTES), Some(9000));
    // The result handed over is the printed envelope (plus its newline, not counted).
    assert_eq!(
        sink::int_attr(span, TOOL_RESULT_BYTES),
        Some(out.stdout.len() as i64 - 1)
    );
    match sink::find(&span.attributes, TOOL_RESULT_TRUNCATED) {
        Some(opentelemetry_proto::tonic::common::v1::any_value::Value::BoolValue(b)) => assert!(*b),
        other => panic!("{other:?}"),
    }
    drop(rt);
}

/// 730 KB of JSON rows under a 4 KiB limit: the data, the envelope and its warnings together fit,
/// and the 22-odd cuts of the same shape are one warning with their count and pattern.
#[test]
fn the_whole_envelope_fits_and_same_shape_cuts_are_one_warning() {
    let rows: Vec<Value> = (0..5000)
        .map(|i| json!({"id": i, "title": format!("row {i}"), "body": "lorem ipsum ".repeat(12)}))
        .collect();
    let body = serde_json::to_vec(&json!({ "rows": rows })).unwrap();
    assert!(body.len() > 700_000);
    let dir = scratch("wrap-whole");
    let file = write(&dir, "rows.json", &body);
    for policy in ["truncate", "spill", "reject"] {
        let spill = dir.join("spill");
        let out = run(
            &[
                "wrap",
                "--max-output",
                "4096",
                "--policy",
                policy,
                "--spill-dir",
                &spill.to_string_lossy(),
                "--",
                "cat",
                &file,
            ],
            None,
        );
        let line = out.stdout.strip_suffix(b"\n").unwrap();
        assert!(line.len() <= 4096, "{policy}: printed {} bytes", line.len());
        let env = python_loads(&out.stdout).envelope;
        assert_envelope_shape(&env);
        if policy != "truncate" {
            continue;
        }
        let warnings = env["warnings"].as_array().unwrap();
        let bodies: Vec<&Value> = warnings
            .iter()
            .filter(|w| w["field"] == json!("data.rows[*].body"))
            .collect();
        assert_eq!(bodies.len(), 1, "{warnings:?}");
        let kept = env["data"]["rows"].as_array().unwrap().len() as u64;
        assert_eq!(bodies[0]["count"], json!(kept), "{warnings:?}");
        assert_eq!(bodies[0]["code"], json!("FIELD_TRUNCATED"));
        assert!(warnings.len() <= 3, "{warnings:?}");
        assert!(warnings
            .iter()
            .any(|w| w["field"] == json!("data.rows") && w["original_length"] == json!(5000)));
    }
}

#[test]
fn a_limit_too_small_for_the_envelope_is_refused() {
    let out = run(&["wrap", "--max-output", "100", "--", "echo", "hi"], None);
    assert_eq!(structured_error(&out)["code"], json!("INVALID_LIMIT"));
}
