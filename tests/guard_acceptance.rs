//! The loud-truncation requirements end to end through the library: writes refused before they
//! happen, backend truncation surfaced, arguments never dropped, coerced or clamped silently.

use serde_json::{json, Value};
use toolsize::guard::compare::{check_returned_length, compare};
use toolsize::guard::paginate::{schema_fragment, Page, PageRequest};
use toolsize::guard::schema::{FieldSpec, Schema};
use toolsize::guard::{Envelope, Unit, Warning};

fn issue_schema() -> Schema {
    Schema::new()
        .command("issue update")
        .field("title", FieldSpec::string().max_length(64).required())
        .field("body", FieldSpec::string().max_bytes(255))
        .field("tags", FieldSpec::array().max_items(10))
}

#[test]
fn a_500_byte_value_for_a_255_byte_field_is_refused_before_the_write() {
    let mut writes = 0;
    let env = issue_schema().run(&json!({"title": "t", "body": "x".repeat(500)}), |_args| {
        writes += 1;
        Envelope::ok(json!({"id": 42}))
    });
    assert_eq!(writes, 0, "the write ran");
    let v: Value = serde_json::from_str(&env.to_json()).unwrap();
    assert_eq!(v["ok"], json!(false));
    assert_eq!(v["error"]["code"], json!("FIELD_TOO_LARGE"));
    assert_eq!(v["error"]["phase"], json!("validation"));
    assert_eq!(v["error"]["field"], json!("body"));
    assert_eq!(v["error"]["limit"], json!(255));
    assert_eq!(v["error"]["actual"], json!(500));
    assert_eq!(v["error"]["violations"].as_array().unwrap().len(), 1);
}

#[test]
fn a_pre_truncated_value_read_from_a_backend_is_flagged() {
    // The backend stores 255 bytes of a 4200-byte body and says how long it was.
    let backend = json!({"body": "b".repeat(255), "body_length": 4200});
    let warning = check_returned_length("data.body", &backend["body"], 4200, Unit::Bytes).unwrap();
    let env = Envelope::ok(json!({"body": backend["body"]})).with_warning(warning);
    let v: Value = serde_json::from_str(&env.to_json()).unwrap();
    assert_eq!(v["meta"]["truncated"], json!(true));
    assert_eq!(
        v["warnings"][0],
        json!({"code": "FIELD_TRUNCATED", "field": "data.body", "original_length": 4200,
               "truncated_length": 255, "truncated_to": 255, "unit": "bytes"})
    );
}

#[test]
fn a_backend_that_truncates_silently_is_caught_by_comparison() {
    let sent = json!({
        "title": "This is a very long title that definitely exceeds the 64 character limit",
        "tags": ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"],
        "meta": {"labels": [{"name": "bug"}, {"name": "p1"}]},
        "priority": 2,
    });
    let returned = json!({
        "id": 123,
        "title": "This is a very long title that definitely",
        "tags": ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"],
        "meta": {"labels": [{"name": "bug"}, {"name": "P1"}]},
        "priority": "2",
    });
    let warnings = compare(&sent, &returned, "data");
    let env = Envelope::ok(returned).with_warnings(warnings);
    let v = env.to_value();
    assert_eq!(v["meta"]["truncated"], json!(true));
    let got: Vec<(String, String)> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["code"].as_str().unwrap().to_owned(),
                w["field"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = [
        ("FIELD_CHANGED", "data.meta.labels[1].name"),
        ("FIELD_CHANGED", "data.priority"),
        ("FIELD_TRUNCATED", "data.tags"),
        ("FIELD_TRUNCATED", "data.title"),
    ]
    .iter()
    .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
    .collect();
    assert_eq!(got, want);
    assert_eq!(v["warnings"][2]["original_length"], json!(11));
    assert_eq!(v["warnings"][2]["truncated_length"], json!(10));
    assert_eq!(v["warnings"][3]["original_length"], json!(72));
    assert_eq!(v["warnings"][3]["truncated_length"], json!(41));
}

fn shell_schema() -> Schema {
    Schema::new()
        .command("shell")
        .field("command", FieldSpec::string().required())
        .field(
            "timeout_seconds",
            FieldSpec::integer().range(Some(1.0), Some(600.0)).clamp(),
        )
        .field("background", FieldSpec::boolean())
}

#[test]
fn timeout_seconds_spelled_timeoutseconds_is_rejected_with_did_you_mean() {
    let err = shell_schema()
        .validate(&json!({"command": "cargo build", "TimeoutSeconds": "1200"}))
        .unwrap_err();
    let env = Envelope::err(err.to_envelope_error()).to_value();
    assert_eq!(env["error"]["code"], json!("VALIDATION_ERROR"));
    let v = &env["error"]["violations"][0];
    assert_eq!(v["code"], json!("UNKNOWN_FIELD"));
    assert_eq!(v["field"], json!("TimeoutSeconds"));
    assert_eq!(v["did_you_mean"], json!("timeout_seconds"));
    assert!(v["message"].as_str().unwrap().contains("did you mean"));
    // The meta-key spellings are caught too.
    for key in [
        "_timeout_seconds",
        "timeout-seconds",
        "timeoutSeconds",
        "timout_seconds",
    ] {
        let err = shell_schema()
            .validate(&json!({"command": "ls", key: 5}))
            .unwrap_err();
        assert_eq!(
            err.violations[0].did_you_mean.as_deref(),
            Some("timeout_seconds"),
            "{key}"
        );
    }
}

#[test]
fn abc_for_an_integer_is_rejected_never_coerced_to_zero() {
    let err = shell_schema()
        .validate(&json!({"command": "ls", "timeout_seconds": "abc"}))
        .unwrap_err();
    assert_eq!(err.violations.len(), 1);
    assert_eq!(err.violations[0].code, "INVALID_VALUE");
    assert_eq!(err.violations[0].field, "timeout_seconds");
    for bad in [
        json!(12.5),
        json!("12s"),
        json!(""),
        json!([1]),
        json!(true),
    ] {
        assert!(
            shell_schema()
                .validate(&json!({"command": "ls", "timeout_seconds": bad}))
                .is_err(),
            "{bad} was accepted"
        );
    }
    for bad in [json!("yes"), json!(1), json!("TRUE")] {
        assert!(
            shell_schema()
                .validate(&json!({"command": "ls", "background": bad}))
                .is_err(),
            "{bad} was accepted"
        );
    }
}

#[test]
fn a_timeout_above_its_ceiling_is_clamped_and_says_so() {
    let ok = shell_schema()
        .validate(&json!({"command": "ls", "timeout_seconds": 1200}))
        .unwrap();
    assert_eq!(ok.args["timeout_seconds"], json!(600));
    let env = Envelope::ok(Value::Null)
        .with_warnings(ok.warnings)
        .to_value();
    assert_eq!(
        env["warnings"][0],
        json!({"code": "VALUE_CLAMPED", "field": "timeout_seconds", "requested": 1200,
               "applied": 600, "reason": "maximum is 600"})
    );
    // A clamp is not a cut.
    assert_eq!(env["meta"]["truncated"], json!(false));

    // Without `clamp`, the same value is refused.
    let strict = Schema::new().field(
        "timeout_seconds",
        FieldSpec::integer().range(Some(1.0), Some(600.0)),
    );
    let err = strict
        .validate(&json!({"timeout_seconds": 1200}))
        .unwrap_err();
    assert_eq!(err.violations[0].code, "OUT_OF_RANGE");
    let v = serde_json::to_value(&err.violations[0]).unwrap();
    assert_eq!(
        (v["limit"].clone(), v["actual"].clone()),
        (json!(600), json!(1200))
    );
}

#[test]
fn pages_say_how_to_get_the_next_one() {
    let all: Vec<u32> = (0..120).collect();
    let fetch = |req: &PageRequest| -> Vec<u32> {
        all.iter()
            .copied()
            .skip(req.offset() as usize)
            .take(req.fetch_limit())
            .collect()
    };
    let (mut req, warnings) = PageRequest::from_args(None, Some(5000), 50, "limit").unwrap();
    assert!(matches!(&warnings[0], Warning::ValueClamped { .. }));
    let mut seen = Vec::new();
    loop {
        let page = Page::from_offset(fetch(&req), &req).total_estimate(120);
        seen.extend(page.rows.iter().copied());
        let Some(cursor) = page.next_cursor else {
            assert!(!page.has_more);
            break;
        };
        req = PageRequest::from_args(Some(cursor.as_str()), Some(50), 50, "limit")
            .unwrap()
            .0;
    }
    assert_eq!(seen, all);
    assert!(
        schema_fragment(50, 50)["properties"]["cursor"]["description"]
            .as_str()
            .unwrap()
            .contains("next_cursor")
    );
}
