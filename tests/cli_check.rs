//! `toolsize check`: field limits enforced before anything is written; every output is complete
//! JSON for Python's `json.loads`.
#![cfg(feature = "cli")]

#[path = "support/cli.rs"]
mod cli;

use cli::{assert_envelope_shape, code, python_loads, run, scratch, structured_error, write};
use serde_json::json;

const SCHEMA: &str = r#"{
  "command": "issue update",
  "fields": {
    "title": {"type": "string", "max_length": 64, "required": true},
    "body": {"type": "string", "max_bytes": 255},
    "tags": {"type": "array", "max_items": 10},
    "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 600, "clamp": true}
  },
  "allow_unknown": false
}"#;

#[test]
fn a_500_byte_value_for_a_255_byte_field_exits_2_before_anything_is_written() {
    let dir = scratch("check-acceptance");
    let schema = write(&dir, "schema.json", SCHEMA.as_bytes());
    let payload = json!({"title": "Fix the parser", "body": "x".repeat(500)}).to_string();
    let payload_path = write(&dir, "payload.json", payload.as_bytes());

    let out = run(&["check", "--schema", &schema, &payload_path], None);
    assert_eq!(code(&out), 2);
    let env = python_loads(&out.stdout).envelope;
    assert_envelope_shape(&env);
    assert_eq!(env["ok"], json!(false));
    assert_eq!(env["data"], json!(null));
    let err = &env["error"];
    assert_eq!(err["code"], json!("FIELD_TOO_LARGE"));
    assert_eq!(err["phase"], json!("validation"));
    assert_eq!(err["field"], json!("body"));
    assert_eq!(err["limit"], json!(255));
    assert_eq!(err["actual"], json!(500));

    // Gate a write on the check: the write never happens.
    let written = dir.join("written");
    let script = format!(
        "{} check --schema {schema} {payload_path} >/dev/null && touch {}",
        env!("CARGO_BIN_EXE_toolsize"),
        written.display()
    );
    let status = std::process::Command::new("sh")
        .args(["-c", &script])
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(2));
    assert!(!written.exists(), "the write ran despite the refusal");
}

#[test]
fn every_violation_is_listed_with_a_did_you_mean() {
    let dir = scratch("check-violations");
    let schema = write(&dir, "schema.json", SCHEMA.as_bytes());
    let payload = json!({
        "title": "t".repeat(71),
        "tags": ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"],
        "TimeoutSeconds": "1200",
    })
    .to_string();
    let out = run(
        &["check", "--schema", &schema, "-"],
        Some(payload.as_bytes()),
    );
    assert_eq!(code(&out), 2);
    let env = python_loads(&out.stdout).envelope;
    assert_eq!(env["error"]["code"], json!("VALIDATION_ERROR"));
    let violations = env["error"]["violations"].as_array().unwrap();
    let fields: Vec<_> = violations
        .iter()
        .map(|v| (v["code"].as_str().unwrap(), v["field"].as_str().unwrap()))
        .collect();
    assert_eq!(
        fields,
        vec![
            ("UNKNOWN_FIELD", "TimeoutSeconds"),
            ("FIELD_TOO_LARGE", "tags"),
            ("FIELD_TOO_LARGE", "title"),
        ]
    );
    assert_eq!(violations[0]["did_you_mean"], json!("timeout_seconds"));
    assert_eq!(violations[1]["unit"], json!("items"));
    assert_eq!(violations[1]["limit"], json!(10));
    assert_eq!(violations[1]["actual"], json!(11));
    assert_eq!(violations[2]["unit"], json!("chars"));
}

#[test]
fn a_valid_payload_passes_normalised_with_clamps_reported() {
    let dir = scratch("check-ok");
    let schema = write(&dir, "schema.json", SCHEMA.as_bytes());
    let payload = json!({"title": "ok", "timeout_seconds": 1200}).to_string();
    let out = run(&["check", "--schema", &schema], Some(payload.as_bytes()));
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stdout));
    let env = python_loads(&out.stdout).envelope;
    assert_envelope_shape(&env);
    assert_eq!(env["ok"], json!(true));
    assert_eq!(env["data"]["timeout_seconds"], json!(600));
    assert_eq!(env["warnings"][0]["code"], json!("VALUE_CLAMPED"));
    assert_eq!(env["warnings"][0]["requested"], json!(1200));
    assert_eq!(env["warnings"][0]["applied"], json!(600));
}

#[test]
fn a_bad_schema_is_a_usage_error_on_stderr() {
    let dir = scratch("check-bad-schema");
    let schema = write(&dir, "schema.json", br#"{"fields": {"a": {"max_len": 3}}}"#);
    let out = run(&["check", "--schema", &schema], Some(b"{}"));
    assert_eq!(structured_error(&out)["code"], json!("SCHEMA_INVALID"));
}

#[test]
fn the_shipped_example_schema_is_valid() {
    let schema = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/schemas/issue_update.json"
    );
    let good = json!({"title": "A title", "body": "short", "tags": ["parser"],
                      "assignee": {"login": "octocat"}, "state": "open"});
    let out = run(
        &["check", "--schema", schema],
        Some(good.to_string().as_bytes()),
    );
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));

    let bad = json!({"title": "A title", "tags": ["x".repeat(40)], "state": "opne"});
    let out = run(
        &["check", "--schema", schema],
        Some(bad.to_string().as_bytes()),
    );
    assert_eq!(code(&out), 2);
    let env = python_loads(&out.stdout).envelope;
    let fields: Vec<_> = env["error"]["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["field"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(fields, vec!["state", "tags[0]"]);
    assert_eq!(env["error"]["violations"][0]["did_you_mean"], json!("open"));
}

#[test]
fn python_parses_every_output_over_a_corpus() {
    let dir = scratch("check-corpus");
    let schema = write(
        &dir,
        "schema.json",
        br#"{"fields": {"title": {"type": "string", "max_length": 80}, "body": {"max_bytes": 255},
             "items": {"type": "array", "max_items": 1000}, "nested": {"type": "object"}},
             "allow_unknown": true}"#,
    );
    let mut deep = json!("leaf");
    for _ in 0..100 {
        deep = json!({ "n": deep });
    }
    let mut binary: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
    binary.extend_from_slice(b"\xff\xfe\x00{\"");
    let corpus: Vec<(&str, Vec<u8>)> = vec![
        ("huge", json!({"title": "t", "items": (0..50_000).map(|i| json!({"i": i, "s": "v".repeat(20)})).collect::<Vec<_>>()}).to_string().into_bytes()),
        ("deep", json!({"title": "deep", "nested": deep}).to_string().into_bytes()),
        ("too-deep", format!("{}1{}", "[".repeat(5000), "]".repeat(5000)).into_bytes()),
        ("non-ascii", json!({"title": "漢字🙂é".repeat(30), "body": "ünïcödé ".repeat(100), "x": "\u{0}\u{1f}\"\\"}).to_string().into_bytes()),
        ("binary", binary),
        ("empty", Vec::new()),
        ("not-an-object", b"[1, 2, 3]".to_vec()),
        ("lone-surrogate", br#"{"title": "\ud800"}"#.to_vec()),
    ];
    for (name, payload) in corpus {
        let out = run(&["check", "--schema", &schema], Some(&payload));
        let c = code(&out);
        assert!(c == 0 || c == 2, "{name}: exit {c}");
        let env = python_loads(&out.stdout).envelope;
        assert_envelope_shape(&env);
        assert_eq!(env["ok"] == json!(true), c == 0, "{name}");
    }
}
