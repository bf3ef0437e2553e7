//! Canonical JSON of arguments already held as `serde_json` values (an MCP `tools/call`'s
//! `arguments` map), written by walking the values rather than through `serde::Serialize`.
//!
//! The output is byte for byte what [`super::canonical_json`] gives for the same value (the tests
//! hold the two equal): Python's separators and escapes, integers exact, floats as Python's
//! `repr`, keys in code point order. It is cheaper because a map's keys are all strings, so no key
//! is copied aside to be sorted: the entries of an object are written in key order straight away
//! (a `serde_json` map without `preserve_order` iterates in that order already; with it, the
//! entries are ordered on the stack by insertion on their bytes, up to [`STACK_ENTRIES`], before
//! being written). Nesting
//! deeper than [`super::MAX_DEPTH`] is the same error; nothing here panics.

use serde_json::{Map, Value};

use super::{
    sort_by_insertion, span_hash_of_canonical, with_kept_canon, write_escaped_str, write_int,
    write_py_float, write_u128, ArgsHashError, Result, MAX_DEPTH,
};

/// Entries of one object ordered on the stack when its map does not iterate in key order; a
/// larger object orders them in a `Vec`.
const STACK_ENTRIES: usize = 8;

/// [`super::span_args_hash`] of an object held as a `serde_json` map: the same hash, computed
/// without `serde::Serialize`. The output buffer is the one [`super::span_args_hash_json`] keeps
/// on the thread between calls: a call allocates only the hash it returns.
///
/// # Errors
///
/// [`ArgsHashError::TooDeep`] for nesting deeper than [`MAX_DEPTH`].
pub fn span_args_hash_of_map(map: &Map<String, Value>) -> Result<String> {
    with_kept_canon(|canon| {
        write_object(&mut canon.out, map, 0)?;
        Ok(span_hash_of_canonical(&canon.out))
    })
}

/// Canonical JSON of `value`, as [`super::canonical_json`] writes it.
///
/// # Errors
///
/// As [`span_args_hash_of_map`].
#[cfg(test)]
fn canonical_json_of_value(value: &Value) -> Result<String> {
    let mut out = Vec::new();
    write_value(&mut out, value, 0)?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Writes `value` at nesting `depth` (the arrays and objects it is inside).
fn write_value(out: &mut Vec<u8>, value: &Value, depth: usize) -> Result<()> {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        // As `Number`'s `Serialize` hands it on: a non-negative integer, a negative one, a float.
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => write_u128(out, u128::from(u)),
            (None, Some(i), _) => write_int(out, i < 0, u128::from(i.unsigned_abs())),
            (None, None, Some(f)) => write_py_float(out, f),
            (None, None, None) => out.extend_from_slice(b"null"),
        },
        Value::String(s) => write_escaped_str(out, s.as_bytes()),
        Value::Array(items) => {
            enter(depth)?;
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b", ");
                }
                write_value(out, item, depth + 1)?;
            }
            out.push(b']');
        }
        Value::Object(map) => write_object(out, map, depth)?,
    }
    Ok(())
}

/// Fails past [`MAX_DEPTH`], as `Canon` does when it opens an array or object.
fn enter(depth: usize) -> Result<()> {
    if depth >= MAX_DEPTH {
        return Err(ArgsHashError::TooDeep { limit: MAX_DEPTH });
    }
    Ok(())
}

/// Writes `map` with its entries in key order (code point order: the keys' UTF-8 byte order).
fn write_object(out: &mut Vec<u8>, map: &Map<String, Value>, depth: usize) -> Result<()> {
    enter(depth)?;
    out.push(b'{');
    let mut keys = map.keys();
    let in_order = match keys.next() {
        Some(first) => keys
            .try_fold(first, |prev, k| (prev < k).then_some(k))
            .is_some(),
        None => true,
    };
    if in_order {
        write_entries(out, map.iter(), depth)?;
    } else if map.len() <= STACK_ENTRIES {
        static NULL: Value = Value::Null;
        let mut stack: [(&String, &Value); STACK_ENTRIES] = [(&EMPTY, &NULL); STACK_ENTRIES];
        for (slot, entry) in stack.iter_mut().zip(map.iter()) {
            *slot = entry;
        }
        let entries = &mut stack[..map.len()];
        sort_by_insertion(entries, |(k, _)| k.as_bytes());
        write_entries(out, entries.iter().copied(), depth)?;
    } else {
        let mut entries: Vec<(&String, &Value)> = map.iter().collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        write_entries(out, entries.into_iter(), depth)?;
    }
    out.push(b'}');
    Ok(())
}

/// A key for the unused slots of the stack of entries.
static EMPTY: String = String::new();

/// Writes `"key": value` for each entry, separated by `, `.
fn write_entries<'a>(
    out: &mut Vec<u8>,
    entries: impl Iterator<Item = (&'a String, &'a Value)>,
    depth: usize,
) -> Result<()> {
    for (i, (k, v)) in entries.enumerate() {
        if i > 0 {
            out.extend_from_slice(b", ");
        }
        write_escaped_str(out, k.as_bytes());
        out.extend_from_slice(b": ");
        write_value(out, v, depth + 1)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The walk writes what `canonical_json` writes through `Serialize`, and hashes alike: every
    /// kind of value, keys out of order and in order, more keys than the stack holds, escapes
    /// and non-ASCII in keys and strings, integers at the ends of their ranges, floats Python
    /// prints in its own way.
    #[test]
    fn the_walk_writes_what_serialize_writes() {
        let many: Map<String, Value> = (0..20).rev().map(|i| (format!("k{i}"), json!(i))).collect();
        let values = [
            json!({}),
            json!({"query": "ceilings of tool results", "limit": 10, "filters": ["docs", "guides"]}),
            json!({"b": 1, "a": 2, "c": {"z": [], "y": {}, "x": [null, true, false]}}),
            json!({"é": "漢字 🦀", "e": "\"q\" \\ \n\t\u{1}\u{7f}", "E": "", "\u{10ffff}": 1, "\u{ffff}": 2}),
            json!({"max": u64::MAX, "min": i64::MIN, "neg": -1, "zero": 0, "big": i64::MAX}),
            json!({"f": [0.1, 1.0, -0.0, 1e-7, 1e16, 1.5e300, 123456789.125, -2.5e-308, 5e-324]}),
            json!([1, [2, [3, {"k": [4]}]], "s"]),
            json!("just a string"),
            Value::Object(many),
        ];
        for v in &values {
            assert_eq!(
                canonical_json_of_value(v).unwrap(),
                super::super::canonical_json(v).unwrap(),
                "{v}"
            );
            if let Value::Object(m) = v {
                assert_eq!(
                    span_args_hash_of_map(m).unwrap(),
                    super::super::span_args_hash(m).unwrap()
                );
            }
        }
    }

    /// The buffers kept on the thread between calls change no hash: maps in and out of order,
    /// one too large for the kept buffers, one too deep, and texts hashed in between, each
    /// hashed as `Serialize` hashes it, twice in a row.
    #[test]
    fn kept_buffers_change_no_hash() {
        let big: Map<String, Value> = (0..300)
            .rev()
            .map(|i| (format!("key{i}"), json!("x".repeat(40))))
            .collect();
        let mut deep = json!(1);
        for _ in 0..=MAX_DEPTH {
            deep = json!({ "k": deep });
        }
        let maps = [
            json!({"query": "q", "limit": 10, "filters": ["a", "b"]}),
            Value::Object(big),
            json!({"b": {"d": 1, "c": 2}, "a": []}),
            deep,
            json!({"query": "q", "limit": 10, "filters": ["a", "b"]}),
        ];
        for _ in 0..2 {
            for v in &maps {
                let Value::Object(m) = v else { unreachable!() };
                assert_eq!(
                    span_args_hash_of_map(m).ok(),
                    super::super::span_args_hash(m).ok()
                );
                let text = r#"{"z": 1, "a": {"y": 2, "b": 3}, "a": 4}"#;
                assert_eq!(
                    super::super::span_args_hash_json(text).unwrap(),
                    super::super::span_args_hash(&json!({"z": 1, "a": 4})).unwrap()
                );
            }
        }
    }

    /// Nesting up to [`MAX_DEPTH`] is written; one level more is the error `Serialize` gives.
    #[test]
    fn nesting_past_the_limit_is_the_same_error() {
        let nest = |levels: usize| {
            (0..levels).fold(json!(1), |inner, i| {
                if i % 2 == 0 {
                    json!([inner])
                } else {
                    json!({ "k": inner })
                }
            })
        };
        let deepest = nest(MAX_DEPTH);
        assert_eq!(
            canonical_json_of_value(&deepest).unwrap(),
            super::super::canonical_json(&deepest).unwrap()
        );
        let too_deep = nest(MAX_DEPTH + 1);
        assert_eq!(
            canonical_json_of_value(&too_deep).unwrap_err(),
            super::super::canonical_json(&too_deep).unwrap_err()
        );
    }
}
