//! `toolsize check` reads the schemas users have: bare JSON Schema, an MCP tool, an OpenAI
//! function and tool, an Anthropic tool, and the parameter list the seed documents write; each
//! refuses what the schema refuses, with every violation and a "did you mean".
#![cfg(feature = "cli")]

#[path = "support/cli.rs"]
mod cli;

use cli::{assert_envelope_shape, code, python_loads, run, scratch, structured_error, write};
use serde_json::{json, Value};

/// The arguments of an "issue update" tool in JSON Schema, with the byte limit as the
/// documented `x-max-bytes` extension.
fn arguments() -> Value {
    json!({
        "type": "object",
        "properties": {
            "title": {"type": "string", "maxLength": 64, "description": "One line."},
            "body": {"type": "string", "x-max-bytes": 255},
            "tags": {"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 32}},
            "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 600},
            "state": {"type": "string", "enum": ["open", "closed"]},
            "assignee": {"anyOf": [{"$ref": "#/$defs/User"}, {"type": "null"}]}
        },
        "required": ["title"],
        "$defs": {"User": {"type": "object", "properties": {"login": {"type": "string"}},
                           "required": ["login"]}}
    })
}

/// Every form the same arguments are written in.
fn forms() -> Vec<(&'static str, Value)> {
    let a = arguments();
    vec![
        ("json-schema", a.clone()),
        (
            "mcp-tool",
            json!({"name": "issue_update", "description": "Update an issue.", "inputSchema": a,
                   "annotations": {"destructiveHint": false}}),
        ),
        (
            "openai-function",
            json!({"name": "issue_update", "description": "Update an issue.", "parameters": a,
                   "strict": false}),
        ),
        (
            "openai-tool",
            json!({"type": "function", "function": {"name": "issue_update", "parameters": a}}),
        ),
        (
            "openai-responses-tool",
            json!({"type": "function", "name": "issue_update", "parameters": a}),
        ),
        (
            "anthropic-tool",
            json!({"name": "issue_update", "description": "Update an issue.", "input_schema": a}),
        ),
    ]
}

fn check(schema: &str, payload: &Value) -> (i32, Value) {
    let out = run(
        &["check", "--schema", schema],
        Some(payload.to_string().as_bytes()),
    );
    let env = python_loads(&out.stdout).envelope;
    assert_envelope_shape(&env);
    (code(&out), env)
}

fn violations(env: &Value) -> Vec<(String, String)> {
    cli::violations(&env["error"])
}

#[test]
fn every_form_accepts_a_good_payload_and_refuses_a_bad_one_the_same_way() {
    let dir = scratch("check-forms");
    for (name, doc) in forms() {
        let schema = write(&dir, &format!("{name}.json"), doc.to_string().as_bytes());
        let good = json!({"title": "Fix the parser", "tags": ["parser"], "timeout_seconds": 30,
                          "state": "open", "assignee": {"login": "octocat"}});
        let (c, env) = check(&schema, &good);
        assert_eq!(c, 0, "{name}: {env}");
        assert_eq!(
            env["data"], good,
            "{name}: a valid payload passes unchanged"
        );

        let bad = json!({
            "title": "t".repeat(65),
            "body": "é".repeat(200),
            "tags": ["x".repeat(33)],
            "TimeoutSeconds": 1200,
            "timeout_seconds": "30",
            "state": "opne",
            "assignee": {"name": "octocat"}
        });
        let (c, env) = check(&schema, &bad);
        assert_eq!(c, 2, "{name}");
        assert_eq!(env["error"]["code"], json!("VALIDATION_ERROR"), "{name}");
        assert_eq!(env["error"]["phase"], json!("validation"), "{name}");
        assert_eq!(
            violations(&env),
            [
                ("UNKNOWN_FIELD", "TimeoutSeconds"),
                ("UNKNOWN_FIELD", "assignee.name"),
                ("MISSING_FIELD", "assignee.login"),
                ("FIELD_TOO_LARGE", "body"),
                ("INVALID_VALUE", "state"),
                ("FIELD_TOO_LARGE", "tags[0]"),
                ("WRONG_TYPE", "timeout_seconds"),
                ("FIELD_TOO_LARGE", "title"),
            ]
            .map(|(a, b)| (a.to_owned(), b.to_owned())),
            "{name}"
        );
        let list = env["error"]["violations"].as_array().unwrap();
        assert_eq!(list[0]["did_you_mean"], json!("timeout_seconds"), "{name}");
        assert_eq!(list[4]["did_you_mean"], json!("open"), "{name}");
        // The byte limit is in bytes, the length limit in chars.
        assert_eq!(
            (list[3]["unit"].as_str(), list[3]["actual"].as_u64()),
            (Some("bytes"), Some(400))
        );
        assert_eq!(
            (list[7]["unit"].as_str(), list[7]["actual"].as_u64()),
            (Some("chars"), Some(65))
        );
    }
}

/// The seed documents' own examples: `{"name": "title", "type": "string", "max_length": 64}`
/// parameters, a 500-byte value for a 255-byte field, `TimeoutSeconds` for `timeout_seconds`.
#[test]
fn the_seeds_parameter_list_and_their_acceptance_cases() {
    let dir = scratch("check-forms-seeds");
    let params = json!([
        {"name": "title", "type": "string", "max_length": 64},
        {"name": "tags",  "type": "array",  "max_items": 10},
        {"name": "body",  "type": "string", "max_bytes": 255, "description": "Markdown."},
        {"name": "timeout_seconds", "type": "integer", "minimum": 1, "maximum": 600}
    ]);
    for (name, doc) in [
        ("bare-list", params.clone()),
        (
            "command",
            json!({"name": "issue update", "parameters": params}),
        ),
    ] {
        let schema = write(&dir, &format!("{name}.json"), doc.to_string().as_bytes());
        // Phase 1 rejects inputs exceeding the limits before execution.
        let (c, env) = check(
            &schema,
            &json!({"title": "t".repeat(65), "tags": (0..11).collect::<Vec<_>>()}),
        );
        assert_eq!(c, 2, "{name}");
        assert_eq!(env["error"]["code"], json!("FIELD_TOO_LARGE"));
        assert_eq!(
            violations(&env),
            [("FIELD_TOO_LARGE", "tags"), ("FIELD_TOO_LARGE", "title")]
                .map(|(a, b)| (a.to_owned(), b.to_owned()))
        );
        // A 500-byte value for a 255-byte field exits 2 before anything is written.
        let (c, env) = check(&schema, &json!({"title": "ok", "body": "x".repeat(500)}));
        assert_eq!(c, 2);
        assert_eq!(
            (
                &env["error"]["field"],
                &env["error"]["limit"],
                &env["error"]["actual"]
            ),
            (&json!("body"), &json!(255), &json!(500))
        );
        // The key an agent misspelt is refused with the one it meant, never dropped.
        let (c, env) = check(&schema, &json!({"title": "ok", "TimeoutSeconds": "1200"}));
        assert_eq!(c, 2);
        assert_eq!(
            env["error"]["violations"][0]["did_you_mean"],
            json!("timeout_seconds")
        );
        if name == "command" {
            assert!(env["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("issue update: "));
        }
    }
}

#[test]
fn a_document_in_no_known_form_names_the_forms_it_could_be() {
    let dir = scratch("check-forms-bad");
    for (name, doc, needle) in [
        ("unknown", json!({"hello": "world"}), "inputSchema"),
        ("not-object-args", json!({"type": "string"}), "object"),
        (
            "bad-type",
            json!({"properties": {"a": {"type": "strng"}}}),
            "strng",
        ),
        (
            "dangling-ref",
            json!({"properties": {"a": {"$ref": "#/$defs/X"}}}),
            "$ref",
        ),
        ("nameless-param", json!([{"type": "string"}]), "name"),
    ] {
        let schema = write(&dir, &format!("{name}.json"), doc.to_string().as_bytes());
        let out = run(&["check", "--schema", &schema], Some(b"{}"));
        let err = structured_error(&out);
        assert_eq!(err["code"], json!("SCHEMA_INVALID"), "{name}");
        let msg = err["message"].as_str().unwrap();
        assert!(msg.contains(needle), "{name}: {msg}");
    }
}
