//! JSON-aware truncation: a JSON value reduced to a byte budget while staying valid JSON.
//!
//! The reduction is deterministic and happens in two steps, each as light as the budget allows:
//!
//! 1. **Longest strings first.** A common cap `C` (in chars) is searched so that every string
//!    value longer than `C` is cut to its first `C` chars plus a marker
//!    `...[toolsize: omitted N of M chars]`; `C` is the largest cap that fits. A string is only cut
//!    when cutting makes it smaller.
//! 2. **Trailing array items.** If cutting every string is not enough, a common item cap `K` is
//!    searched: every array keeps its first `K` items, `K` as large as fits while strings keep
//!    at least [`DEFAULT_MIN_STRING_CHARS`] (or none, if even that does not fit), so the model
//!    gets fewer items with their text rather than many items emptied of it. Then the string cap
//!    is relaxed again to the largest that still fits. With [`JsonTruncator::array_markers`], a cut array also ends
//!    with a string item `...[toolsize: omitted N of M items]`.
//!
//! Object keys are never cut and members never dropped, so the shape a reader expects survives;
//! numbers, booleans and nulls are never touched. Every cut yields one `FIELD_TRUNCATED` warning
//! with its path (`data.items[3].body`): strings in `chars`, arrays in `items`. Sizes are computed
//! arithmetically on a tree of the value built once (each search step walks it, and walks the
//! kept prefix of each cut string), then the output is built once; the serialized output is
//! exactly what `serde_json::to_string` writes. When even the smallest reduction (every string
//! reduced to its marker, every array emptied) does not fit, the result is
//! [`JsonTruncateError::BudgetTooSmall`] with the minimum, never invalid or over-budget JSON.

use std::fmt;

use serde_json::{Map, Value};

use crate::guard::envelope::{Unit, Warning};

/// Path of the root value in warnings, unless [`JsonTruncator::root`] says otherwise.
pub const DEFAULT_ROOT_PATH: &str = "$";

/// When array items must be dropped, strings keep at least this many chars if the budget allows
/// (fewer whole-ish items rather than many items emptied of their text).
pub const DEFAULT_MIN_STRING_CHARS: usize = 64;

/// The marker appended to a cut string.
pub fn string_marker(omitted_chars: usize, total_chars: usize) -> String {
    format!("...[toolsize: omitted {omitted_chars} of {total_chars} chars]")
}

/// Decimal digits of `n`.
fn digits(n: usize) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// Length of [`string_marker`], computed without formatting it (the search for the cut asks
/// for it once per string and step).
fn string_marker_len(omitted_chars: usize, total_chars: usize) -> usize {
    "...[toolsize: omitted  of  chars]".len() + digits(omitted_chars) + digits(total_chars)
}

/// Length of [`array_marker`], computed without formatting it.
fn array_marker_len(omitted_items: usize, total_items: usize) -> usize {
    "...[toolsize: omitted  of  items]".len() + digits(omitted_items) + digits(total_items)
}

/// The string item appended to an array whose trailing items were dropped, with
/// [`JsonTruncator::array_markers`].
pub fn array_marker(omitted_items: usize, total_items: usize) -> String {
    format!("...[toolsize: omitted {omitted_items} of {total_items} items]")
}

/// Reduces a JSON value to a byte budget. Built by value.
#[derive(Debug, Clone)]
pub struct JsonTruncator {
    budget: usize,
    root: String,
    array_markers: bool,
    min_string_chars: usize,
}

/// The result of [`JsonTruncator::truncate`].
#[derive(Debug, Clone, PartialEq)]
pub struct JsonCut {
    /// The reduced value (the input itself when it fit).
    pub value: Value,
    /// One `FIELD_TRUNCATED` per cut, in document order.
    pub warnings: Vec<Warning>,
    /// Serialized bytes of the input.
    pub original_bytes: u64,
    /// Serialized bytes of the output, never above the budget.
    pub bytes: u64,
}

impl JsonCut {
    /// Whether anything was cut.
    pub fn truncated(&self) -> bool {
        !self.warnings.is_empty()
    }
}

/// Why a value could not be reduced to the budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonTruncateError {
    /// Even with every string reduced to its marker and every array emptied, the value needs
    /// `minimum` bytes (its keys and scalars alone are larger than the budget).
    BudgetTooSmall {
        /// The budget asked for.
        budget: usize,
        /// The smallest size reachable without dropping keys.
        minimum: usize,
    },
}

impl fmt::Display for JsonTruncateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonTruncateError::BudgetTooSmall { budget, minimum } => write!(
                f,
                "JSON value cannot be reduced to {budget} bytes without dropping keys; the smallest reduction is {minimum} bytes"
            ),
        }
    }
}

impl std::error::Error for JsonTruncateError {}

/// The value annotated with what the size search needs.
enum Node<'a> {
    /// Number, bool or null: never cut; its serialized length.
    Fixed(&'a Value, usize),
    /// A string, its length in chars and its full serialized length (quotes included).
    Str(&'a str, usize, usize),
    Arr(Vec<Node<'a>>),
    /// Members with the serialized length of their key (quotes included).
    Obj(Vec<(&'a str, usize, Node<'a>)>),
}

/// Serialized length of one char inside a JSON string, as serde_json writes it.
fn esc_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

fn str_cost(s: &str) -> usize {
    2 + s.chars().map(esc_len).sum::<usize>()
}

fn build_tree(value: &Value) -> Node<'_> {
    match value {
        Value::String(s) => Node::Str(s, s.chars().count(), str_cost(s)),
        Value::Array(items) => Node::Arr(items.iter().map(build_tree).collect()),
        Value::Object(map) => Node::Obj(
            map.iter()
                .map(|(k, v)| (k.as_str(), str_cost(k), build_tree(v)))
                .collect(),
        ),
        other => {
            let len = serde_json::to_string(other).map(|s| s.len()).unwrap_or(4);
            Node::Fixed(other, len)
        }
    }
}

/// How a string of `chars` chars fares under cap `cap`: `Some(cost)` when cut.
fn cut_string_cost(s: &str, chars: usize, full: usize, cap: usize) -> Option<usize> {
    if chars <= cap {
        return None;
    }
    // ASCII without escapes (every char one byte, written as itself) costs one byte a char:
    // no walk, which the search for the cap would otherwise repeat for every string and step.
    let prefix: usize = if chars == s.len() && full == s.len() + 2 {
        cap
    } else {
        s.chars().take(cap).map(esc_len).sum()
    };
    let cost = 2 + prefix + string_marker_len(chars - cap, chars);
    (cost < full).then_some(cost)
}

/// The reduction applied: string cap in chars, item cap, and whether a dropped tail leaves a
/// marker item.
#[derive(Clone, Copy)]
struct Caps {
    chars: usize,
    items: usize,
    markers: bool,
}

/// Size of an array cut to `kept` of `len` items whose kept items take `items_cost` bytes.
fn array_cut_cost(len: usize, kept: usize, markers: bool, items_cost: usize) -> usize {
    let mut entries = kept;
    let mut marker = 0;
    if markers {
        entries += 1;
        marker = 2 + array_marker_len(len - kept, len);
    }
    2 + entries.saturating_sub(1) + marker + items_cost
}

/// How many items an array keeps under `caps`, given its items' sizes: `None` when it is not
/// cut. With markers, an array is only cut when that makes it smaller (the marker item costs
/// bytes too), which keeps the size monotone in the item cap.
fn kept_items(costs: &[usize], caps: Caps) -> Option<usize> {
    let len = costs.len();
    let kept = len.min(caps.items);
    if kept == len {
        return None;
    }
    if !caps.markers {
        return Some(kept);
    }
    let full = 2 + len.saturating_sub(1) + costs.iter().sum::<usize>();
    let cut = array_cut_cost(len, kept, true, costs[..kept].iter().sum());
    (cut < full).then_some(kept)
}

fn item_costs(children: &[Node<'_>], caps: Caps) -> Vec<usize> {
    children.iter().map(|c| cost(c, caps)).collect()
}

fn cost(node: &Node<'_>, caps: Caps) -> usize {
    match node {
        Node::Fixed(_, len) => *len,
        Node::Str(s, chars, full) => cut_string_cost(s, *chars, *full, caps.chars).unwrap_or(*full),
        Node::Arr(children) => {
            let kept = children.len().min(caps.items);
            if !caps.markers || kept == children.len() {
                // Only the kept items are walked: a search over the item cap stays cheap.
                let items: usize = children[..kept].iter().map(|c| cost(c, caps)).sum();
                return 2 + kept.saturating_sub(1) + items;
            }
            // As `kept_items` decides, without walking the dropped items when the cut is
            // smaller than any array holding them could be (each takes a byte and a comma).
            let len = children.len();
            let kept_cost: usize = children[..kept].iter().map(|c| cost(c, caps)).sum();
            let cut = array_cut_cost(len, kept, true, kept_cost);
            let whole_at_least = 2 + (len - 1) + kept_cost + (len - kept);
            if cut < whole_at_least {
                return cut;
            }
            let whole = whole_at_least - (len - kept)
                + children[kept..]
                    .iter()
                    .map(|c| cost(c, caps))
                    .sum::<usize>();
            cut.min(whole)
        }
        Node::Obj(members) => {
            2 + members.len().saturating_sub(1)
                + members
                    .iter()
                    .map(|(_, key, c)| key + 1 + cost(c, caps))
                    .sum::<usize>()
        }
    }
}

fn max_chars(node: &Node<'_>) -> usize {
    match node {
        Node::Fixed(..) => 0,
        Node::Str(_, chars, _) => *chars,
        Node::Arr(c) => c.iter().map(max_chars).max().unwrap_or(0),
        Node::Obj(m) => m.iter().map(|(_, _, c)| max_chars(c)).max().unwrap_or(0),
    }
}

fn max_items(node: &Node<'_>) -> usize {
    match node {
        Node::Fixed(..) | Node::Str(..) => 0,
        Node::Arr(c) => c.iter().map(max_items).max().unwrap_or(0).max(c.len()),
        Node::Obj(m) => m.iter().map(|(_, _, c)| max_items(c)).max().unwrap_or(0),
    }
}

/// Largest `x` in `0..=hi` with `fits(x)`, given `fits` is monotone (true up to some point).
fn largest_fitting(hi: usize, fits: impl Fn(usize) -> bool) -> Option<usize> {
    if !fits(0) {
        return None;
    }
    let (mut lo, mut hi) = (0usize, hi);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(lo)
}

/// Whether `key` can follow a `.` in a path unquoted.
fn is_plain_key(key: &str) -> bool {
    let mut chars = key.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The path of member `key` under `parent`: `parent.key`, or `parent["odd key"]`.
pub(crate) fn key_path(parent: &str, key: &str) -> String {
    if is_plain_key(key) {
        if parent.is_empty() {
            key.to_owned()
        } else {
            format!("{parent}.{key}")
        }
    } else {
        let quoted = serde_json::to_string(key).unwrap_or_else(|_| "\"?\"".to_owned());
        format!("{parent}[{quoted}]")
    }
}

/// The path of item `index` under `parent`: `parent[index]`.
pub(crate) fn index_path(parent: &str, index: usize) -> String {
    format!("{parent}[{index}]")
}

fn build(node: &Node<'_>, caps: Caps, path: &str, warnings: &mut Vec<Warning>) -> Value {
    let cap = caps.chars;
    match node {
        Node::Fixed(v, _) => (*v).clone(),
        Node::Str(s, chars, full) => {
            if cut_string_cost(s, *chars, *full, cap).is_some() {
                let mut out: String = s.chars().take(cap).collect();
                out.push_str(&string_marker(chars - cap, *chars));
                warnings.push(Warning::truncated(
                    path,
                    Some(*chars as u64),
                    cap as u64,
                    Unit::Chars,
                ));
                Value::String(out)
            } else {
                Value::String((*s).to_owned())
            }
        }
        Node::Arr(children) => {
            // Only with markers does the decision depend on the items' sizes.
            let cut = if caps.markers {
                kept_items(&item_costs(children, caps), caps)
            } else {
                (children.len() > caps.items).then_some(caps.items)
            };
            let kept = cut.unwrap_or(children.len());
            let mut out: Vec<Value> = children[..kept]
                .iter()
                .enumerate()
                .map(|(i, c)| build(c, caps, &index_path(path, i), warnings))
                .collect();
            if cut.is_some() {
                if caps.markers {
                    out.push(Value::String(array_marker(
                        children.len() - kept,
                        children.len(),
                    )));
                }
                warnings.push(Warning::truncated(
                    path,
                    Some(children.len() as u64),
                    kept as u64,
                    Unit::Items,
                ));
            }
            Value::Array(out)
        }
        Node::Obj(members) => {
            let mut map = Map::new();
            for (key, _, c) in members {
                let v = build(c, caps, &key_path(path, key), warnings);
                map.insert((*key).to_owned(), v);
            }
            Value::Object(map)
        }
    }
}

impl JsonTruncator {
    /// A truncator for `budget` bytes of compact JSON, paths rooted at [`DEFAULT_ROOT_PATH`].
    pub fn new(budget: usize) -> Self {
        Self {
            budget,
            root: DEFAULT_ROOT_PATH.to_owned(),
            array_markers: false,
            min_string_chars: DEFAULT_MIN_STRING_CHARS,
        }
    }

    /// When array items must be dropped, keep strings at least this many chars long if the budget
    /// allows ([`DEFAULT_MIN_STRING_CHARS`] by default; 0 keeps the most items).
    pub fn min_string_chars(mut self, chars: usize) -> Self {
        self.min_string_chars = chars;
        self
    }

    /// Also mark a cut array in the value itself: a last string item
    /// `...[toolsize: omitted N of M items]` (off by default, since it changes the array's item
    /// type; the `FIELD_TRUNCATED` warning is there either way).
    pub fn array_markers(mut self, on: bool) -> Self {
        self.array_markers = on;
        self
    }

    /// The path of the root value in warnings, e.g. `data`; member paths follow as
    /// `data.items[3].body`. An empty root is written `$`.
    pub fn root(mut self, root: impl Into<String>) -> Self {
        self.root = root.into();
        self
    }

    /// The budget in bytes.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Reduces `value` to the budget, or says why it cannot.
    pub fn truncate(&self, value: &Value) -> Result<JsonCut, JsonTruncateError> {
        let tree = build_tree(value);
        let markers = self.array_markers;
        let caps = |chars, items| Caps {
            chars,
            items,
            markers,
        };
        let original = cost(&tree, caps(usize::MAX, usize::MAX));
        if original <= self.budget {
            return Ok(JsonCut {
                value: value.clone(),
                warnings: Vec::new(),
                original_bytes: original as u64,
                bytes: original as u64,
            });
        }
        let budget = self.budget;
        let longest = max_chars(&tree);
        let widest = max_items(&tree);
        // `largest_fitting` only ever settles on sizes that fit, so the result is within the
        // budget even where the size is not monotone (an array's first dropped item adds its
        // marker).
        let fits = |chars, items| cost(&tree, caps(chars, items)) <= budget;
        let chosen = match largest_fitting(longest, |c| fits(c, usize::MAX)) {
            Some(chars) => caps(chars, usize::MAX),
            None => {
                let floor = self.min_string_chars.min(longest);
                let items = largest_fitting(widest, |k| fits(floor, k))
                    .or_else(|| largest_fitting(widest, |k| fits(0, k)))
                    .ok_or(JsonTruncateError::BudgetTooSmall {
                        budget,
                        minimum: cost(&tree, caps(0, 0)),
                    })?;
                let chars = largest_fitting(longest, |c| fits(c, items)).unwrap_or(0);
                caps(chars, items)
            }
        };
        let mut warnings = Vec::new();
        let root = if self.root.is_empty() {
            "$"
        } else {
            self.root.as_str()
        };
        let out = build(&tree, chosen, root, &mut warnings);
        let bytes = cost(&tree, chosen);
        Ok(JsonCut {
            value: out,
            warnings,
            original_bytes: original as u64,
            bytes: bytes as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn size(v: &Value) -> usize {
        serde_json::to_string(v).unwrap().len()
    }

    #[test]
    fn cost_matches_serde_json() {
        let v = json!({"a\"b": ["x\n\u{1}y", 1.5, -3, null, true, {"é": "漢字🙂\\"}], "n": 1e300});
        let all = Caps {
            chars: usize::MAX,
            items: usize::MAX,
            markers: false,
        };
        assert_eq!(cost(&build_tree(&v), all), size(&v));
        let cut = JsonTruncator::new(40).truncate(&v).unwrap();
        assert_eq!(cut.bytes as usize, size(&cut.value));
    }

    #[test]
    fn marker_lengths_match_the_markers() {
        for (a, b) in [
            (0, 0),
            (1, 9),
            (9, 10),
            (10, 99),
            (99, 100),
            (12345, 1000000),
        ] {
            assert_eq!(string_marker_len(a, b), string_marker(a, b).len());
            assert_eq!(array_marker_len(a, b), array_marker(a, b).len());
        }
    }

    #[test]
    fn fitting_value_is_untouched() {
        let v = json!({"a": "short"});
        let cut = JsonTruncator::new(100).truncate(&v).unwrap();
        assert_eq!(cut.value, v);
        assert!(!cut.truncated());
    }

    #[test]
    fn longest_string_is_cut_first_and_keys_kept() {
        let v = json!({"title": "short title", "body": "b".repeat(5000)});
        let cut = JsonTruncator::new(300).root("data").truncate(&v).unwrap();
        assert!(size(&cut.value) <= 300);
        assert_eq!(cut.value["title"], json!("short title"));
        assert_eq!(cut.warnings.len(), 1);
        match &cut.warnings[0] {
            Warning::FieldTruncated {
                field,
                original_length,
                unit,
                ..
            } => {
                assert_eq!(field, "data.body");
                assert_eq!(*original_length, Some(5000));
                assert_eq!(*unit, Unit::Chars);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn trailing_items_dropped_with_count() {
        let v = json!({"items": (0..1000).map(|i| json!({"id": i})).collect::<Vec<_>>()});
        let cut = JsonTruncator::new(200).root("data").truncate(&v).unwrap();
        assert!(size(&cut.value) <= 200);
        let kept = cut.value["items"].as_array().unwrap().len();
        assert!(kept > 0);
        assert_eq!(
            cut.warnings,
            vec![Warning::truncated(
                "data.items",
                Some(1000),
                kept as u64,
                Unit::Items
            )]
        );
    }

    #[test]
    fn array_markers_say_how_many_items_were_dropped() {
        let v = json!({"items": (0..1000).collect::<Vec<_>>()});
        let cut = JsonTruncator::new(200)
            .array_markers(true)
            .truncate(&v)
            .unwrap();
        assert!(size(&cut.value) <= 200);
        let items = cut.value["items"].as_array().unwrap();
        let kept = items.len() - 1;
        assert_eq!(
            items.last().unwrap(),
            &json!(array_marker(1000 - kept, 1000))
        );
        assert_eq!(
            cut.warnings,
            vec![Warning::truncated(
                "$.items",
                Some(1000),
                kept as u64,
                Unit::Items
            )]
        );
    }

    #[test]
    fn dropping_items_keeps_some_text_in_each() {
        let rows: Vec<Value> = (0..500)
            .map(|i| json!({"id": i, "body": "lorem ipsum ".repeat(30)}))
            .collect();
        let v = json!({ "rows": rows });
        let cut = JsonTruncator::new(2000).truncate(&v).unwrap();
        assert!(size(&cut.value) <= 2000);
        let kept = cut.value["rows"].as_array().unwrap();
        assert!(!kept.is_empty() && kept.len() < 500);
        for row in kept {
            let body = row["body"].as_str().unwrap();
            assert!(body.starts_with(&"lorem ipsum ".repeat(5)), "{body}");
        }
        // With no floor, more rows are kept, emptied of their text.
        let bare = JsonTruncator::new(2000)
            .min_string_chars(0)
            .truncate(&v)
            .unwrap();
        assert!(bare.value["rows"].as_array().unwrap().len() > kept.len());
    }

    #[test]
    fn odd_keys_are_quoted_in_paths() {
        let v = json!({"a b": {"c": ["z".repeat(500)]}});
        let cut = JsonTruncator::new(100).truncate(&v).unwrap();
        assert_eq!(
            cut.warnings[0],
            Warning::truncated(
                "$[\"a b\"].c[0]",
                Some(500),
                match &cut.warnings[0] {
                    Warning::FieldTruncated {
                        truncated_length, ..
                    } => *truncated_length,
                    _ => unreachable!(),
                },
                Unit::Chars
            )
        );
    }

    #[test]
    fn too_many_keys_is_an_error() {
        let mut map = Map::new();
        for i in 0..100 {
            map.insert(format!("key{i}"), Value::Null);
        }
        let err = JsonTruncator::new(50)
            .truncate(&Value::Object(map))
            .unwrap_err();
        assert!(matches!(
            err,
            JsonTruncateError::BudgetTooSmall { budget: 50, .. }
        ));
    }

    #[test]
    fn deterministic() {
        let v =
            json!({"a": "x".repeat(999), "b": ["y".repeat(500), "z".repeat(700)], "c": [1,2,3]});
        let one = JsonTruncator::new(256).truncate(&v).unwrap();
        let two = JsonTruncator::new(256).truncate(&v).unwrap();
        assert_eq!(one, two);
    }
}
