//! Sent-vs-returned comparison: finds what a backend cut or changed in a value it stored.
//!
//! Backends often shorten a field to their column size and answer `ok`. Comparing what was sent
//! with what came back, through nested objects and arrays, turns that into warnings: a shorter
//! string (in chars) or fewer array items is `FIELD_TRUNCATED` with both lengths; any other
//! difference (another value, another type, a member that disappeared) is `FIELD_CHANGED`. Members
//! the backend added (ids, timestamps) are not differences. Numbers compare by value (`1` equals
//! `1.0`). Warnings carry paths and lengths, never the values. The walk is linear in the sent
//! value and deterministic (members in key order).

use serde_json::Value;

use crate::guard::envelope::{Unit, Warning};
use crate::guard::json_truncate::{index_path, key_path};

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Compares `sent` with `returned`; `root` is the path of both in warnings (e.g. `data`).
pub fn compare(sent: &Value, returned: &Value, root: &str) -> Vec<Warning> {
    let mut warnings = Vec::new();
    walk(sent, returned, root, &mut warnings);
    warnings
}

fn changed(path: &str, reason: String, warnings: &mut Vec<Warning>) {
    warnings.push(Warning::FieldChanged {
        field: path.to_owned(),
        reason,
    });
}

fn walk(sent: &Value, returned: &Value, path: &str, warnings: &mut Vec<Warning>) {
    match (sent, returned) {
        (Value::String(s), Value::String(r)) => {
            if s == r {
                return;
            }
            let (sc, rc) = (s.chars().count() as u64, r.chars().count() as u64);
            if rc < sc {
                warnings.push(Warning::truncated(path, Some(sc), rc, Unit::Chars));
            } else {
                changed(
                    path,
                    format!("value differs (sent {sc} chars, returned {rc} chars)"),
                    warnings,
                );
            }
        }
        (Value::Array(s), Value::Array(r)) => {
            if r.len() < s.len() {
                warnings.push(Warning::truncated(
                    path,
                    Some(s.len() as u64),
                    r.len() as u64,
                    Unit::Items,
                ));
            } else if r.len() > s.len() {
                changed(
                    path,
                    format!("sent {} items, returned {}", s.len(), r.len()),
                    warnings,
                );
            }
            for (i, (si, ri)) in s.iter().zip(r).enumerate() {
                walk(si, ri, &index_path(path, i), warnings);
            }
        }
        (Value::Object(s), Value::Object(r)) => {
            // Keys in sorted order, so the warnings come in one order whether serde_json's map
            // keeps keys sorted or as written (its `preserve_order` feature, which a dependency
            // may turn on).
            let mut keys: Vec<&String> = s.keys().collect();
            keys.sort_unstable();
            for key in keys {
                let sv = &s[key.as_str()];
                let child = key_path(path, key);
                match r.get(key) {
                    Some(rv) => walk(sv, rv, &child, warnings),
                    None => changed(
                        &child,
                        "missing from the returned value".to_owned(),
                        warnings,
                    ),
                }
            }
        }
        (Value::Number(s), Value::Number(r)) => {
            let same = s == r || matches!((s.as_f64(), r.as_f64()), (Some(a), Some(b)) if a == b);
            if !same {
                changed(path, "number differs".to_owned(), warnings);
            }
        }
        (s, r) if kind(s) != kind(r) => changed(
            path,
            format!("type changed from {} to {}", kind(s), kind(r)),
            warnings,
        ),
        (s, r) => {
            if s != r {
                changed(path, "value differs".to_owned(), warnings);
            }
        }
    }
}

/// A `FIELD_TRUNCATED` warning when `returned` at `field` is shorter than the `original_length`
/// the backend reported (in `unit`: bytes or chars of a string, items of an array; bytes of
/// another value's compact JSON). `None` when it is complete or cannot be measured in `unit`.
pub fn check_returned_length(
    field: &str,
    returned: &Value,
    original_length: u64,
    unit: Unit,
) -> Option<Warning> {
    let measured = match (unit, returned) {
        (Unit::Bytes, Value::String(s)) => s.len() as u64,
        (Unit::Chars, Value::String(s)) => s.chars().count() as u64,
        (Unit::Items, Value::Array(a)) => a.len() as u64,
        (Unit::Bytes, other) => serde_json::to_string(other).map_or(0, |s| s.len() as u64),
        _ => return None,
    };
    (measured < original_length)
        .then(|| Warning::truncated(field, Some(original_length), measured, unit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shorter_string_and_fewer_items_are_truncations() {
        let sent = json!({"title": "This is a very long title that definitely exceeds the limit",
                          "tags": ["a","b","c","d"], "n": 1});
        let returned = json!({"id": 123, "title": "This is a very long title", "tags": ["a","b","c"], "n": 1.0});
        let w = compare(&sent, &returned, "data");
        assert_eq!(
            w,
            vec![
                Warning::truncated("data.tags", Some(4), 3, Unit::Items),
                Warning::truncated("data.title", Some(59), 25, Unit::Chars),
            ]
        );
    }

    #[test]
    fn other_differences_are_changes() {
        let sent = json!({"a": {"b": [1, "x", true]}, "gone": 1, "same": null});
        let returned = json!({"a": {"b": [2, 5, false]}, "same": null});
        let w = compare(&sent, &returned, "data");
        let fields: Vec<_> = w
            .iter()
            .map(|w| match w {
                Warning::FieldChanged { field, .. } => field.as_str(),
                _ => panic!("{w:?}"),
            })
            .collect();
        assert_eq!(
            fields,
            vec!["data.a.b[0]", "data.a.b[1]", "data.a.b[2]", "data.gone"]
        );
    }

    #[test]
    fn identical_is_silent() {
        let v = json!({"x": ["é", {"y": 2}]});
        assert!(compare(&v, &v, "data").is_empty());
    }

    #[test]
    fn returned_length_check() {
        let body = json!("x".repeat(255));
        assert_eq!(
            check_returned_length("data.body", &body, 4200, Unit::Bytes),
            Some(Warning::truncated(
                "data.body",
                Some(4200),
                255,
                Unit::Bytes
            ))
        );
        assert_eq!(
            check_returned_length("data.body", &body, 255, Unit::Bytes),
            None
        );
    }
}
