//! Property tests of both truncations: valid UTF-8 and JSON, budget respected, every cut
//! accounted for by exactly one warning.

use proptest::prelude::*;
use serde_json::{Map, Value};
use toolsize::guard::json_truncate::{
    array_marker, string_marker, JsonTruncateError, JsonTruncator,
};
use toolsize::guard::truncate::{marker, TextTruncator};
use toolsize::guard::{Unit, Warning};

fn tricky_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => proptest::char::range('a', 'z'),
        1 => Just('é'),
        1 => Just('漢'),
        1 => Just('🙂'),
        1 => Just('"'),
        1 => Just('\\'),
        1 => Just('\n'),
        1 => Just('\u{1}'),
        1 => any::<char>(),
    ]
}

fn tricky_string(max: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(tricky_char(), 0..max).prop_map(|c| c.into_iter().collect())
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        tricky_string(200).prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 200, 12, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..12).prop_map(Value::Array),
            proptest::collection::vec((tricky_string(8), inner), 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn is_plain_key(key: &str) -> bool {
    let mut chars = key.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn key_path(parent: &str, key: &str) -> String {
    if is_plain_key(key) {
        format!("{parent}.{key}")
    } else {
        format!("{parent}[{}]", serde_json::to_string(key).unwrap())
    }
}

/// Walks input and output together; every difference must be one of the two allowed cuts, and
/// yields the warning that must describe it.
fn expected_cuts(input: &Value, output: &Value, path: &str, markers: bool, out: &mut Vec<Warning>) {
    match (input, output) {
        (Value::String(a), Value::String(b)) if a != b => {
            let total = a.chars().count();
            // b = first `kept` chars of a + marker; read `kept` from the marker, then check.
            let omitted: usize = b
                .rsplit_once("...[toolsize: omitted ")
                .and_then(|(_, rest)| rest.split_once(' '))
                .and_then(|(n, _)| n.parse().ok())
                .unwrap_or_else(|| panic!("{path}: string changed without a marker"));
            let kept = total - omitted;
            let head: String = a.chars().take(kept).collect();
            assert_eq!(
                *b,
                format!("{head}{}", string_marker(omitted, total)),
                "{path}"
            );
            out.push(Warning::truncated(
                path,
                Some(total as u64),
                kept as u64,
                Unit::Chars,
            ));
        }
        (Value::Array(a), Value::Array(b)) => {
            // With markers, a cut array ends with a marker item naming the dropped count.
            let marked = markers
                && !b.is_empty()
                && b.len() - 1 < a.len()
                && b[b.len() - 1] == Value::String(array_marker(a.len() - (b.len() - 1), a.len()));
            let kept = if marked { b.len() - 1 } else { b.len() };
            assert!(kept <= a.len(), "{path}: array grew");
            assert!(
                !markers || marked || kept == a.len(),
                "{path}: unmarked cut"
            );
            for (i, (x, y)) in a.iter().zip(&b[..kept]).enumerate() {
                expected_cuts(x, y, &format!("{path}[{i}]"), markers, out);
            }
            if kept < a.len() {
                out.push(Warning::truncated(
                    path,
                    Some(a.len() as u64),
                    kept as u64,
                    Unit::Items,
                ));
            }
        }
        (Value::Object(a), Value::Object(b)) => {
            assert_eq!(
                a.keys().collect::<Vec<_>>(),
                b.keys().collect::<Vec<_>>(),
                "{path}: keys changed"
            );
            for (k, x) in a {
                expected_cuts(x, &b[k], &key_path(path, k), markers, out);
            }
        }
        (a, b) => assert_eq!(a, b, "{path}: scalar changed"),
    }
}

fn sorted(w: &[Warning]) -> Vec<String> {
    let mut v: Vec<String> = w
        .iter()
        .map(|w| serde_json::to_string(w).unwrap())
        .collect();
    v.sort();
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn text_cut_respects_budget_and_utf8(
        text in tricky_string(600),
        budget in 0usize..700,
        ratio in 0.0f64..=1.0,
        wrap in any::<bool>(),
    ) {
        let mut t = TextTruncator::new(budget).head_ratio(ratio);
        if wrap {
            t = t.inspect_wrapper("tool");
        }
        let cut = t.truncate(&text);
        // Valid UTF-8 is guaranteed by String; check the byte budget and the accounting.
        if !cut.truncated {
            prop_assert!(text.len() <= budget);
            prop_assert_eq!(&cut.text, &text);
            prop_assert!(cut.warning("result").is_none());
        } else {
            prop_assert!(text.len() > budget);
            prop_assert!(cut.text.len() <= budget, "{} > {}", cut.text.len(), budget);
            let head = &text[..cut.head_bytes as usize];
            let tail = &text[text.len() - cut.tail_bytes as usize..];
            prop_assert_eq!(cut.head_bytes + cut.tail_bytes + cut.omitted_bytes(), text.len() as u64);
            let mark = marker(cut.omitted_bytes(), text.len() as u64);
            if cut.text.contains(&mark) {
                let expected = format!("{head}{mark}{tail}");
                prop_assert!(cut.text.contains(&expected));
            }
            let w = cut.warning("result").unwrap();
            prop_assert_eq!(
                w,
                Warning::truncated("result", Some(text.len() as u64), cut.head_bytes + cut.tail_bytes, Unit::Bytes)
            );
        }
    }

    #[test]
    fn json_cut_stays_valid_and_accounts_for_every_cut(
        value in json_value(),
        budget in 0usize..3000,
        markers in any::<bool>(),
    ) {
        let original = serde_json::to_string(&value).unwrap();
        let truncator = JsonTruncator::new(budget).root("data").array_markers(markers);
        match truncator.truncate(&value) {
            Ok(cut) => {
                let text = serde_json::to_string(&cut.value).unwrap();
                prop_assert!(text.len() <= budget, "{} > {}", text.len(), budget);
                prop_assert_eq!(cut.bytes as usize, text.len());
                // Valid JSON (floats may not round-trip bit for bit through serde_json's parser,
                // so only the parse is checked here; Python checks the CLI output).
                prop_assert!(serde_json::from_str::<Value>(&text).is_ok());
                let mut expected = Vec::new();
                expected_cuts(&value, &cut.value, "data", markers, &mut expected);
                prop_assert_eq!(sorted(&expected), sorted(&cut.warnings));
                if original.len() <= budget {
                    prop_assert!(cut.warnings.is_empty());
                    prop_assert_eq!(&cut.value, &value);
                }
                // Deterministic.
                let again = truncator.truncate(&value).unwrap();
                prop_assert_eq!(again, cut);
            }
            Err(JsonTruncateError::BudgetTooSmall { minimum, .. }) => {
                prop_assert!(minimum > budget);
                prop_assert!(original.len() > budget);
            }
        }
    }
}
