//! Cross-checks `toolsize::args_hash` against the real CPython `json.dumps(..., sort_keys=True,
//! default=str)` + `hashlib.sha1`: every expected value is computed by `python3` at test time.

#[path = "support/cli.rs"]
mod cli;

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::process::{Command, Stdio};

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::Value;
use toolsize::args_hash::{
    args_hash_json, args_hash_of_canonical, canonical_json_from_text, MAX_DEPTH,
};
use toolsize::{args_hash, canonical_json};

const CORPUS: &str = include_str!("data/args_hash_corpus.jsonl");

/// Reads `{"texts": [...], "exprs": [...]}` on stdin; for each text `json.loads` it, for each
/// expression `eval` it, then canonicalises and hashes the result exactly as a Python agent does.
const PY_SCRIPT: &str = r#"
import hashlib, json, sys
req = json.loads(sys.stdin.read())
def canon(get):
    try:
        c = json.dumps(get(), sort_keys=True, default=str)
    except Exception as e:
        return {"ok": False, "error": type(e).__name__ + ": " + str(e)[:200]}
    return {"ok": True, "canonical": c, "hash": hashlib.sha1(c.encode()).hexdigest()[:12]}
out = {
    "texts": [canon(lambda t=t: json.loads(t)) for t in req["texts"]],
    "exprs": [canon(lambda e=e: eval(e)) for e in req["exprs"]],
}
sys.stdout.write(json.dumps(out))
"#;

#[derive(Debug)]
struct PyResult {
    ok: bool,
    canonical: String,
    hash: String,
    error: String,
}

fn run_python(texts: &[&str], exprs: &[&str]) -> (Vec<PyResult>, Vec<PyResult>) {
    let mut child = match Command::new(cli::python3())
        .arg("-c")
        .arg(PY_SCRIPT)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            let ci = std::env::var("CI").is_ok_and(|v| v == "true");
            panic!(
                "python3 is required to compute the expected args hashes (CI={ci}): cannot run it: {e}"
            );
        }
    };
    let request = serde_json::json!({ "texts": texts, "exprs": exprs }).to_string();
    let mut stdin = child.stdin.take().expect("python3 stdin");
    stdin
        .write_all(request.as_bytes())
        .expect("write to python3");
    drop(stdin);
    let output = child.wait_with_output().expect("python3 output");
    assert!(
        output.status.success(),
        "python3 failed: {:?}",
        output.status
    );
    let v: Value = serde_json::from_slice(&output.stdout).expect("python3 printed JSON");
    let parse = |key: &str| -> Vec<PyResult> {
        v[key]
            .as_array()
            .expect("result array")
            .iter()
            .map(|r| PyResult {
                ok: r["ok"].as_bool().expect("ok flag"),
                canonical: r["canonical"].as_str().unwrap_or_default().to_owned(),
                hash: r["hash"].as_str().unwrap_or_default().to_owned(),
                error: r["error"].as_str().unwrap_or_default().to_owned(),
            })
            .collect()
    };
    (parse("texts"), parse("exprs"))
}

fn corpus_lines() -> Vec<&'static str> {
    CORPUS
        .split('\n')
        .filter(|l| !l.trim().is_empty())
        .collect()
}

fn short(s: &str) -> String {
    s.chars().take(120).collect()
}

#[test]
fn corpus_matches_python() {
    let lines = corpus_lines();
    assert!(lines.len() >= 60, "corpus has only {} cases", lines.len());
    let (expected, _) = run_python(&lines, &[]);
    assert_eq!(expected.len(), lines.len());

    let mut text_compared = 0;
    let mut serde_compared = 0;
    for (i, (line, py)) in lines.iter().zip(&expected).enumerate() {
        let n = i + 1;
        assert!(
            py.ok,
            "corpus line {n} must be valid for Python: {}",
            py.error
        );
        assert_eq!(
            args_hash_of_canonical(py.canonical.as_bytes()),
            py.hash,
            "line {n}: sha1 prefix"
        );
        let ours = canonical_json_from_text(line)
            .unwrap_or_else(|e| panic!("line {n} ({}): {e}", short(line)));
        assert_eq!(ours, py.canonical, "line {n}: canonical_json_from_text");
        assert_eq!(
            args_hash_json(line).unwrap(),
            py.hash,
            "line {n}: args_hash_json"
        );
        text_compared += 1;

        // The Serialize path, for lines serde_json represents exactly: big integers become
        // f64, `-0` becomes -0.0, NaN/Infinity and lone surrogates are rejected, depth is
        // limited to 128. Exactness is checked by round-tripping through serde_json's writer.
        let Ok(value) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let Ok(round_trip) = serde_json::to_string(&value) else {
            continue;
        };
        if canonical_json_from_text(&round_trip).ok().as_deref() != Some(&py.canonical) {
            continue;
        }
        assert_eq!(
            canonical_json(&value).unwrap(),
            py.canonical,
            "line {n}: canonical_json(&serde_json::Value)"
        );
        assert_eq!(args_hash(&value).unwrap(), py.hash, "line {n}: args_hash");
        serde_compared += 1;
    }
    println!(
        "args_hash corpus: {text_compared} cases compared with python3 via text, {serde_compared} also via serde_json::Value"
    );
    assert!(
        serde_compared >= 40,
        "only {serde_compared} Serialize-path cases"
    );
}

#[test]
fn invalid_texts_fail_like_python() {
    let too_many_digits = "9".repeat(4301);
    let too_deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
    let bad: Vec<&str> = vec![
        "",
        "   ",
        "01",
        "1.",
        ".5",
        "1e",
        "1e+",
        "-",
        "--1",
        "+1",
        "0x10",
        "1_000",
        "[1,]",
        "[1 2]",
        "[1]]",
        "[",
        "{\"a\":1,}",
        "{\"a\"}",
        "{\"a\":1}}",
        "{'a': 1}",
        "{a: 1}",
        "{1: 2}",
        "nul",
        "truee",
        "True",
        "None",
        "-NaN",
        "nan",
        "infinity",
        "Infinityx",
        "\"unterminated",
        "\"\\x\"",
        "\"\\u12\"",
        "\"\\u12G4\"",
        "\"\\ud800\\u12\"",
        "\"a\u{1}b\"",
        "\"tab\there\"",
        "\"nl\nhere\"",
        "\u{feff}1",
        "\u{a0}1",
        "\u{c}1",
        "1 2",
        &too_many_digits,
    ];
    let (expected, _) = run_python(&bad, &[]);
    for (text, py) in bad.iter().zip(&expected) {
        assert!(!py.ok, "Python accepted {:?}", short(text));
        let ours = canonical_json_from_text(text);
        assert!(
            ours.is_err(),
            "we accepted {:?} (Python: {}): {ours:?}",
            short(text),
            py.error
        );
    }
    // Deeper than MAX_DEPTH: Python (limit ~1000) accepts, we refuse rather than risk the stack.
    assert!(canonical_json_from_text(&too_deep).is_err());
    println!("{} invalid texts rejected like python3", bad.len());
}

// --- Rust-native values -----------------------------------------------------------------

#[derive(Serialize)]
struct Filters {
    units: &'static str,
    lang: &'static str,
}

#[derive(Serialize)]
struct SearchArgs {
    query: String,
    limit: u32,
    filters: Filters,
    tags: Vec<String>,
    cursor: Option<i32>,
    #[serde(rename = "zählung")]
    count: i8,
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<u8>,
}

#[derive(Serialize)]
enum Shape {
    Empty,
    Circle(f64),
    Rect(u8, u8),
    Pt { y: i32, x: i32 },
}

#[derive(Serialize)]
#[serde(untagged)]
enum Key {
    I(i64),
    U(u128),
    F(f64),
    B(bool),
    S(&'static str),
}

/// A map with arbitrary (possibly mixed-type) keys, in insertion order.
struct Pairs<K, V>(Vec<(K, V)>);

impl<K: Serialize, V: Serialize> Serialize for Pairs<K, V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

struct Bytes(&'static [u8]);

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

#[derive(Serialize)]
struct Meters(f64);

#[derive(Serialize)]
struct Marker;

#[derive(Serialize)]
struct Outer {
    z: u8,
    #[serde(flatten)]
    inner: Filters,
}

type Case = (
    &'static str,
    Result<String, toolsize::ArgsHashError>,
    &'static str,
);

fn native_cases() -> Vec<Case> {
    let search = SearchArgs {
        query: "weather in Paris".into(),
        limit: 10,
        filters: Filters {
            units: "metric",
            lang: "fr",
        },
        tags: vec!["a".into(), "é😀".into()],
        cursor: None,
        count: -5,
        skipped: None,
    };
    let unicode_keys: HashMap<String, i32> = [
        ("\u{ffff}".to_owned(), 1),
        ("\u{1F600}".to_owned(), 2),
        ("b".to_owned(), 3),
        ("é".to_owned(), 4),
        ("B".to_owned(), 5),
    ]
    .into();
    let int_keys: BTreeMap<i32, &str> = [(10, "a"), (9, "b"), (-1, "c")].into();
    let bool_keys: BTreeMap<bool, &str> = [(true, "y"), (false, "n")].into();
    let none_key: BTreeMap<Option<i32>, i32> = [(None, 1)].into();
    let none_and_int: BTreeMap<Option<i32>, i32> = [(None, 1), (Some(2), 2)].into();
    let tuple_key: BTreeMap<(i32, i32), i32> = [((1, 2), 3)].into();
    let char_keys: BTreeMap<char, u8> = [('b', 1), ('a', 2), ('é', 3)].into();
    vec![
        (
            "derive(Serialize) struct",
            canonical_json(&search),
            "{'query': 'weather in Paris', 'limit': 10, 'filters': {'units': 'metric', 'lang': 'fr'}, 'tags': ['a', 'é😀'], 'cursor': None, 'zählung': -5}",
        ),
        ("Option::None", canonical_json(&None::<i32>), "None"),
        ("Some(3)", canonical_json(&Some(3)), "3"),
        (
            "u128/i128 extremes",
            canonical_json(&(u128::MAX, i128::MIN, i128::MAX, u64::MAX, i64::MIN)),
            "(2**128-1, -2**127, 2**127-1, 2**64-1, -2**63)",
        ),
        (
            "f32 as shortest decimal",
            canonical_json(&(0.1f32, 16_777_216f32, 1e-7f32, -2.5f32, f32::MAX)),
            "(0.1, 16777216.0, 1e-07, -2.5, 3.4028235e38)",
        ),
        (
            "f64 specials",
            canonical_json(&[f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 1e16, 0.1 + 0.2]),
            "[float('nan'), float('inf'), float('-inf'), -0.0, 1e16, 0.1 + 0.2]",
        ),
        (
            "tuple with unit",
            canonical_json(&(1, "a", true, (), 2.5, 'é', '\n')),
            "(1, 'a', True, None, 2.5, 'é', '\\n')",
        ),
        (
            "enum variants",
            canonical_json(&[
                Shape::Empty,
                Shape::Circle(1.5),
                Shape::Rect(1, 2),
                Shape::Pt { y: 2, x: 1 },
            ]),
            "['Empty', {'Circle': 1.5}, {'Rect': [1, 2]}, {'Pt': {'y': 2, 'x': 1}}]",
        ),
        (
            "BTreeMap<i32, _> sorts numerically",
            canonical_json(&int_keys),
            "{10: 'a', 9: 'b', -1: 'c'}",
        ),
        (
            "HashMap<String, _> code point order",
            canonical_json(&unicode_keys),
            "{'\\uffff': 1, '\\U0001F600': 2, 'b': 3, 'é': 4, 'B': 5}",
        ),
        (
            "BTreeMap<bool, _>",
            canonical_json(&bool_keys),
            "{True: 'y', False: 'n'}",
        ),
        (
            "BTreeMap<char, _>",
            canonical_json(&char_keys),
            "{'b': 1, 'a': 2, 'é': 3}",
        ),
        (
            "float keys",
            canonical_json(&Pairs(vec![
                (1.5, "a"),
                (0.5, "b"),
                (1e16, "c"),
                (-0.0, "d"),
                (f64::INFINITY, "e"),
                (-1e-7, "f"),
            ])),
            "{1.5: 'a', 0.5: 'b', 1e16: 'c', -0.0: 'd', float('inf'): 'e', -1e-7: 'f'}",
        ),
        (
            "mixed int/float/bool keys",
            canonical_json(&Pairs(vec![
                (Key::I(2), "a"),
                (Key::F(0.5), "b"),
                (Key::B(true), "c"),
                (Key::I(-3), "d"),
                (Key::F(1.5), "e"),
                (Key::B(false), "f"),
            ])),
            "{2: 'a', 0.5: 'b', True: 'c', -3: 'd', 1.5: 'e', False: 'f'}",
        ),
        (
            "huge int keys vs float keys",
            canonical_json(&Pairs(vec![
                (Key::U(u128::MAX), "a"),
                (Key::F(3.4e38), "b"),
                (Key::I(-1), "c"),
                (Key::U(1 << 53), "d"),
                (Key::F(9_007_199_254_740_992.0 + 2.0), "e"),
                (Key::U((1 << 53) + 1), "f"),
            ])),
            "{2**128-1: 'a', 3.4e38: 'b', -1: 'c', 2**53: 'd', 9007199254740994.0: 'e', 2**53+1: 'f'}",
        ),
        (
            "None key alone",
            canonical_json(&none_key),
            "{None: 1}",
        ),
        (
            "unit, unit struct, newtype struct",
            canonical_json(&((), Marker, Meters(3.0))),
            "(None, None, 3.0)",
        ),
        (
            "flatten",
            canonical_json(&Outer {
                z: 1,
                inner: Filters {
                    units: "si",
                    lang: "de",
                },
            }),
            "{'z': 1, 'units': 'si', 'lang': 'de'}",
        ),
        (
            "serde_json::json!",
            canonical_json(&serde_json::json!({"b": [1, {"y": null, "x": 1.0}], "a": u64::MAX, "é": "</script>"})),
            "{'b': [1, {'y': None, 'x': 1.0}], 'a': 2**64-1, 'é': '</script>'}",
        ),
        (
            "bytes as list of ints (documented)",
            canonical_json(&Bytes(&[1, 2, 255])),
            "[1, 2, 255]",
        ),
        (
            "error: str and int keys",
            canonical_json(&Pairs(vec![(Key::S("a"), 1), (Key::I(1), 2)])),
            "{'a': 1, 1: 2}",
        ),
        (
            "error: None key beside int key",
            canonical_json(&none_and_int),
            "{None: 1, 2: 2}",
        ),
        (
            "error: tuple key",
            canonical_json(&tuple_key),
            "{(1, 2): 3}",
        ),
    ]
}

#[test]
fn native_values_match_python() {
    let cases = native_cases();
    let exprs: Vec<&str> = cases.iter().map(|c| c.2).collect();
    let (_, expected) = run_python(&[], &exprs);
    for ((name, ours, expr), py) in cases.iter().zip(&expected) {
        match ours {
            Ok(canonical) => {
                assert!(py.ok, "{name}: Python raised {} for {expr}", py.error);
                assert_eq!(canonical, &py.canonical, "{name}: {expr}");
                assert_eq!(
                    args_hash_of_canonical(canonical.as_bytes()),
                    py.hash,
                    "{name}"
                );
            }
            Err(e) => assert!(
                !py.ok,
                "{name}: we failed ({e}) but Python gave {}",
                py.canonical
            ),
        }
    }
    println!("{} Rust-native values compared with python3", cases.len());
}

/// Every prefix of the short corpus lines, and each with one byte replaced by a JSON
/// metacharacter: we must accept exactly what Python accepts, with the same result.
#[test]
fn mutations_agree_with_python() {
    let mut texts: Vec<String> = Vec::new();
    for line in corpus_lines().into_iter().filter(|l| l.len() <= 200) {
        for (i, _) in line.char_indices().skip(1) {
            texts.push(line[..i].to_owned());
            for rep in ["\"", ",", ":", "]", "}", "\\", " ", "0", "-", "e", "."] {
                let mut t = line[..i].to_owned();
                t.push_str(rep);
                let rest = &line[i..];
                let skip = rest.chars().next().map_or(0, char::len_utf8);
                t.push_str(&rest[skip..]);
                texts.push(t);
            }
        }
    }
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let (expected, _) = run_python(&refs, &[]);
    let mut accepted = 0;
    for (text, py) in refs.iter().zip(&expected) {
        let ours = canonical_json_from_text(text);
        match (&ours, py.ok) {
            (Ok(c), true) => {
                assert_eq!(c, &py.canonical, "{:?}", short(text));
                accepted += 1;
            }
            (Err(_), false) => {}
            _ => panic!(
                "disagreement on {:?}: ours {ours:?}, Python ok={} {}",
                short(text),
                py.ok,
                py.error
            ),
        }
    }
    println!(
        "{} mutated texts compared with python3 ({accepted} valid)",
        refs.len()
    );
}

/// The keyed hash equals Python's `hmac.new(key, canonical, hashlib.sha1).hexdigest()[:12]` over
/// the same canonical JSON, for keys shorter than, as long as, and longer than SHA-1's block,
/// and for every line of the corpus Python accepts; the unkeyed hash is unchanged beside it.
#[test]
fn keyed_hash_matches_python_hmac() {
    use toolsize::args_hash::{keyed_args_hash, keyed_args_hash_of_canonical, ArgsHashKey};
    const HMAC_SCRIPT: &str = r#"
import hashlib, hmac, json, sys
req = json.loads(sys.stdin.read())
out = []
for key in req["keys"]:
    k = key.encode()
    row = []
    for t in req["texts"]:
        try:
            c = json.dumps(json.loads(t), sort_keys=True, default=str)
        except Exception:
            row.append(None)
            continue
        row.append(hmac.new(k, c.encode(), hashlib.sha1).hexdigest()[:12])
    out.append(row)
sys.stdout.write(json.dumps(out))
"#;
    let keys = [
        "k",
        "a longer key é",
        &"x".repeat(64),
        &"long key ".repeat(20),
    ];
    let texts: Vec<&str> = corpus_lines();
    let input = serde_json::json!({"keys": keys, "texts": texts}).to_string();
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(HMAC_SCRIPT)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 is required to compute the expected keyed hashes");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let expected: Vec<Vec<Option<String>>> = serde_json::from_slice(&out.stdout).unwrap();
    let mut compared = 0;
    for (key, row) in keys.iter().zip(&expected) {
        let k = ArgsHashKey::new(key.as_bytes()).unwrap();
        for (text, want) in texts.iter().zip(row) {
            let Some(want) = want else { continue };
            let canonical = canonical_json_from_text(text).unwrap();
            let got = keyed_args_hash_of_canonical(&k, canonical.as_bytes());
            assert_eq!(&got, want, "key {key:?}, text {}", short(text));
            assert_ne!(got, args_hash_of_canonical(canonical.as_bytes()));
            compared += 1;
        }
    }
    assert!(compared > 100, "only {compared} hashes compared");
    // From a Rust value, the same as from its JSON text.
    let k = ArgsHashKey::new(b"k").unwrap();
    let v = serde_json::json!({"b": [1, 2.5, "é"], "a": null});
    let canonical = canonical_json(&v).unwrap();
    assert_eq!(
        keyed_args_hash(&k, &v).unwrap(),
        keyed_args_hash_of_canonical(&k, canonical.as_bytes())
    );
    assert!(ArgsHashKey::new(b"").is_none());
    assert_eq!(format!("{k:?}"), "ArgsHashKey(…)");
}

/// The process key, once set, keys what spans record; removed, the CPython-equal default
/// comes back.
#[test]
fn span_hash_follows_the_process_key() {
    let v = serde_json::json!({"q": "secret guess"});
    let plain = toolsize::args_hash(&v).unwrap();
    let key = toolsize::ArgsHashKey::new(b"team key").unwrap();
    toolsize::args_hash::set_process_key(Some(key.clone()));
    assert_eq!(
        toolsize::args_hash::span_args_hash(&v).unwrap(),
        toolsize::args_hash::keyed_args_hash(&key, &v).unwrap()
    );
    toolsize::args_hash::set_process_key(None);
    assert_eq!(toolsize::args_hash::span_args_hash(&v).unwrap(), plain);
}
