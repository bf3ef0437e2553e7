//! Reading result content and attribute values: truncation markers, envelopes removed,
//! JSON that no longer parses, the JSON length of structured values, tool names cleaned.

use std::sync::{Arc, LazyLock};

use aho_corasick::AhoCorasick;
use opentelemetry_proto::tonic::common::v1::{any_value::Value, AnyValue};

use super::emitters::Envelope;
use crate::collector::ingest::record::OVERFLOW;
use crate::collector::ingest::wire::AttrValue;
use crate::collector::stats::Cuts;

/// Truncation markers that agent runtimes (Codex, Gemini CLI, Claude Code, Cline, OpenHands
/// and the others named per entry) insert when they cut a tool result, digits left
/// out: any of these in a result means a layer already cut it.
pub(crate) const MARKERS: &[(&str, &str)] = &[
    ("codex", " tokens truncated\u{2026}"),
    ("codex", " chars truncated\u{2026}"),
    ("codex", "Warning: truncated output (original token count: "),
    ("codex", " text items ...]"),
    ("codex legacy", "[... omitted "),
    ("codex legacy", "[... output truncated to fit "),
    ("gemini cli", "Output too large. Showing first "),
    ("gemini cli", " characters omitted] ..."),
    ("gemini cli", "... [truncated]"),
    ("claude code", "Preview (first 2KB)"),
    ("claude code", "PARTIAL view"),
    ("cline", "...[truncated "),
    ("cline", "[... output truncated: "),
    ("inspect ai", " was too long to be displayed."),
    ("inspect ai", "<START_TOOL_OUTPUT>"),
    ("openhands", "[... Observation truncated due to length ...]"),
    ("openhands", "<response clipped><NOTE>"),
    ("swe-agent", "<elided_chars>"),
    (
        "smolagents",
        "_This content has been truncated to stay below ",
    ),
    (
        "deepagents",
        "Tool result too large, the result of this tool call",
    ),
    ("deepagents", " lines truncated] ..."),
    ("opencode", " lines truncated..."),
    ("opencode", " bytes truncated..."),
    (
        "opencode",
        "The tool call succeeded but the output was truncated.",
    ),
    (
        "goose",
        "The response returned from the tool call was larger (",
    ),
    ("continue cli", " lines truncated)"),
    ("continue cli", " characters truncated)"),
    ("langchain shell", "... Output truncated at "),
    ("langfuse codex", "\u{2026}[truncated "),
];

/// Marker that only counts at the very start of a result (Codex legacy).
const LEADING_MARKER: &str = "Total output lines: ";

/// Cheap pre-filter: every marker's text contains one of these (checked by a test). They start
/// with bytes rare in text, so one SIMD (Teddy) pass over a result finds none in almost every
/// result; the markers themselves mostly start with a space or a bracket, which a pass over
/// all of them finds everywhere (that pass alone was a third of the daemon's CPU).
pub(crate) const ANCHOR_TEXTS: [&str; 9] = [
    "runcat",
    "omitted",
    "too l",
    "Preview",
    "PARTIAL",
    "START_TOOL",
    "clipped",
    "elided",
    "larger (",
];

/// The anchors in one automaton: a result is scanned once, not once per anchor. Leftmost
/// semantics let the automaton use its SIMD (Teddy) searcher; with the standard semantics it
/// walks every byte, slower than the nine `memmem` passes it replaces.
static ANCHOR_SEARCH: LazyLock<AhoCorasick> = LazyLock::new(|| automaton(&ANCHOR_TEXTS));

/// Every marker in one automaton, run only on a result that holds an anchor.
static MARKER_SEARCH: LazyLock<AhoCorasick> =
    LazyLock::new(|| automaton(&MARKERS.iter().map(|(_, m)| *m).collect::<Vec<_>>()));

fn automaton(patterns: &[&str]) -> AhoCorasick {
    AhoCorasick::builder()
        .match_kind(aho_corasick::MatchKind::LeftmostFirst)
        .build(patterns)
        .expect("the patterns build an automaton")
}

/// The UTF-8 bytes of the result inside recorded content `s` wrapped by `env`, and whether they
/// are exact, or `None` when `s` is not in that envelope (then it is counted as recorded).
/// Strings are exact; a result that is itself JSON (a list or an object inside `{"result": …}`
/// or a ToolMessage's content) is measured re-serialised compactly, which approximates the text
/// the framework handed the model (its own serialiser may space or order it differently).
pub(crate) fn unwrap_content(env: Envelope, s: &[u8]) -> Option<(u64, bool)> {
    use serde_json::Value as J;
    if env == Envelope::None {
        return None;
    }
    let t = s.trim_ascii();
    if !matches!(t.first(), Some(b'"' | b'{' | b'[')) {
        return None;
    }
    let v: J = serde_json::from_slice(t).ok()?;
    let text_len = |v: &J| -> (u64, bool) {
        match v {
            J::String(s) => (s.len() as u64, true),
            other => (
                serde_json::to_string(other).map_or(0, |s| s.len() as u64),
                false,
            ),
        }
    };
    match (env, &v) {
        (_, J::String(s)) => Some((s.len() as u64, true)),
        // A JSON document written with `\uXXXX` escapes for every non-ASCII character (Python's
        // `json.dumps` default, `ensure_ascii`; OpenLLMetry records a tool's dict or list so):
        // its characters as UTF-8, the recorded spacing and every other escape kept. That is
        // exactly `json.dumps(…, ensure_ascii=False)`, the text frameworks hand the model
        // (LangChain's tool messages, an agent's own `json.dumps`); marked approximate, as the
        // framework's serialiser is not seen.
        (Envelope::JsonString, J::Object(_) | J::Array(_)) => unescaped_len(t).map(|n| (n, false)),
        (Envelope::ToolMessage, J::Object(o)) => {
            let msg = |o: &serde_json::Map<String, J>| -> Option<(u64, bool)> {
                let is_tool = o.get("type").and_then(J::as_str) == Some("tool");
                // `message_to_dict` form: {"type": "tool", "data": {"content": …}}.
                if let (true, Some(J::Object(d))) = (is_tool, o.get("data")) {
                    return d.get("content").map(text_len);
                }
                let content = o.get("content")?;
                (is_tool || o.contains_key("tool_call_id")).then(|| text_len(content))
            };
            let lc = |o: &serde_json::Map<String, J>| -> Option<(u64, bool)> {
                let id = o.get("id")?.as_array()?;
                (id.last()?.as_str()? == "ToolMessage")
                    .then(|| o.get("kwargs")?.get("content").map(text_len))?
            };
            let inner = |o: &serde_json::Map<String, J>| msg(o).or_else(|| lc(o));
            inner(o).or_else(|| match o.get("output") {
                Some(J::Object(x)) => inner(x),
                _ => None,
            })
        }
        (Envelope::AdkResult, J::Object(o)) if o.len() == 1 => o.get("result").map(text_len),
        (Envelope::TextParts, J::Array(a)) if !a.is_empty() => {
            let mut n = 0;
            for part in a {
                match part.get("text") {
                    Some(J::String(s)) => n += s.len() as u64,
                    _ => return None,
                }
            }
            Some((n, true))
        }
        _ => None,
    }
}

/// The length of JSON text `t` with each `\uXXXX` escape of a non-ASCII character (a surrogate
/// pair for characters past U+FFFF) counted as the UTF-8 of that character; `None` when it has
/// none. Escapes of ASCII characters (`\u0001`, `\"`, `\n`…) stay as written: JSON needs them
/// either way. `t` must be valid JSON (escapes well formed).
pub(crate) fn unescaped_len(t: &[u8]) -> Option<u64> {
    let hex = |at: usize| -> Option<u32> {
        let h = t.get(at..at + 4)?;
        u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()
    };
    let mut saved = 0u64;
    let mut i = 0;
    while let Some(off) = memchr::memchr(b'\\', &t[i..]) {
        let at = i + off;
        if t.get(at + 1) != Some(&b'u') {
            i = at + 2;
            continue;
        }
        let Some(cp) = hex(at + 2) else { break };
        let (written, utf8) = match cp {
            0xD800..=0xDBFF if t.get(at + 6..at + 8) == Some(b"\\u") => match hex(at + 8) {
                Some(0xDC00..=0xDFFF) => (12, 4),
                _ => (6, 6),
            },
            0x80..=0x7FF => (6, 2),
            0x800.. => (6, 3),
            _ => (6, 6),
        };
        saved += written - utf8;
        i = at + written as usize;
    }
    (saved > 0).then(|| t.len() as u64 - saved)
}

/// True when `s` contains one of the truncation markers of [`MARKERS`].
pub fn has_marker(s: &[u8]) -> bool {
    if s.starts_with(LEADING_MARKER.as_bytes()) {
        return true;
    }
    ANCHOR_SEARCH.is_match(s) && MARKER_SEARCH.is_match(s)
}

/// True when `s`, JSON or text that starts like a JSON document, shows a cut.
///
/// - `declared` (the emitter always writes JSON, or `output.mime_type` says JSON): any parse
///   failure is a cut.
/// - Otherwise only text starting with `{` or `[` is checked. It is cut when the parser ran out
///   of input mid-document (`{"a": [1, 2`), or when it looks like a whole document (ends with
///   the matching `}` / `]`) yet does not parse. Text such as `[INFO] started` fails with a
///   syntax error before its end and is plain text, not a cut JSON document.
///
/// Valid JSON nested deeper than the parser's recursion limit (128) is never flagged.
pub(crate) fn json_cut(s: &[u8], declared: bool) -> bool {
    let t = s.trim_ascii();
    let whole = match (t.first(), t.last()) {
        (Some(b'{'), Some(b'}')) | (Some(b'['), Some(b']')) => true,
        (Some(b'{' | b'['), _) => false,
        _ if declared => true,
        _ => return false,
    };
    let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(t) else {
        return false;
    };
    if e.to_string().starts_with("recursion limit exceeded") {
        return false;
    }
    declared || whole || e.is_eof()
}

/// An error attribute that says the call failed: `true`, a non-zero number, or a non-empty
/// string other than `false` / `0` (an error message or type). `error=false` and an empty
/// `tool.error` say it did not.
pub(crate) fn truthy(v: Option<AttrValue<'_>>) -> bool {
    match v {
        Some(AttrValue::Bool(b)) => b,
        Some(AttrValue::Int(i)) => i != 0,
        Some(AttrValue::Double(d)) => d != 0.0,
        Some(AttrValue::Str(s)) => {
            let s = s.trim_ascii();
            !s.is_empty() && !s.eq_ignore_ascii_case(b"false") && s != b"0"
        }
        Some(AttrValue::Bytes(b)) => !b.is_empty(),
        Some(_) => true,
        None => false,
    }
}

pub(crate) fn bytes_of(v: Option<AttrValue<'_>>) -> Option<&[u8]> {
    match v {
        Some(AttrValue::Str(b)) => Some(b),
        _ => None,
    }
}

/// Whether a string value is one of `names`, compared as bytes: no pass to check it as UTF-8
/// (a text equal to one of them is).
pub(crate) fn is_one_of(v: Option<AttrValue<'_>>, names: &[&str]) -> bool {
    bytes_of(v).is_some_and(|b| names.iter().any(|n| n.as_bytes() == b))
}

pub(crate) fn str_of(v: Option<AttrValue<'_>>) -> Option<&str> {
    v.and_then(|v| v.as_str())
}

/// The largest count read from an attribute: 2^53, the largest integer a double (a JSON number,
/// a JavaScript tracer's attribute) holds exactly. Larger sizes are not sizes of anything a
/// model was handed.
pub(crate) const MAX_COUNT: u64 = 1 << 53;

/// A non-negative integer of at most [`MAX_COUNT`], also when sent as a string or a double;
/// `None` for anything else (absent, negative, not finite, too large, not a number).
pub(crate) fn int_of(v: Option<AttrValue<'_>>) -> Option<u64> {
    size_of(v).ok().flatten()
}

/// A value that cannot be a count of bytes: negative, not finite, or above [`MAX_COUNT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AbsurdSize;

/// A size attribute: `Ok(None)` when absent or not a number (the size is then found
/// elsewhere or unknown), `Err` when it is a number that no result can have.
pub(crate) fn size_of(v: Option<AttrValue<'_>>) -> Result<Option<u64>, AbsurdSize> {
    let count = |d: f64| {
        if d.is_finite() && (0.0..=MAX_COUNT as f64).contains(&d) {
            Ok(Some(d as u64))
        } else {
            Err(AbsurdSize)
        }
    };
    match v {
        Some(AttrValue::Int(i)) if (0..=MAX_COUNT as i64).contains(&i) => Ok(Some(i as u64)),
        Some(AttrValue::Int(_)) => Err(AbsurdSize),
        Some(AttrValue::Double(d)) => count(d),
        // Digits alone, as every SDK writes a count: read from the bytes, with no pass to
        // check them as UTF-8 (a call per attribute, 1 % of the daemon's time on Claude Code's
        // log records). At most 19 digits fit a u64.
        Some(AttrValue::Str(b))
            if matches!(b.trim_ascii().len(), 1..=19)
                && b.trim_ascii().iter().all(u8::is_ascii_digit) =>
        {
            let n = b
                .trim_ascii()
                .iter()
                .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
            if n <= MAX_COUNT {
                Ok(Some(n))
            } else {
                Err(AbsurdSize)
            }
        }
        Some(v @ AttrValue::Str(_)) => {
            let Some(text) = v.as_str().map(str::trim) else {
                return Ok(None);
            };
            match text.parse::<u64>() {
                Ok(n) if n <= MAX_COUNT => Ok(Some(n)),
                Ok(_) => Err(AbsurdSize),
                Err(_) => match text.parse::<f64>() {
                    Ok(d) => count(d),
                    Err(_) => Ok(None),
                },
            }
        }
        _ => Ok(None),
    }
}

/// The tool name from a span name: after `execute_tool ` / `tools/call ` / `Function: ` /
/// `tool.` (swiftide), before `.tool`, else the whole name.
pub(crate) fn name_from_span(name: &str) -> &str {
    for p in ["execute_tool ", "tools/call ", "Function: ", "tool."] {
        if let Some(rest) = name.strip_prefix(p) {
            return rest;
        }
    }
    name.strip_suffix(".tool").unwrap_or(name)
}

#[cfg(test)]
/// Cuts a name to `max` bytes on a character boundary and replaces control, format (bidi,
/// zero-width) and separator characters with `_`; an empty name becomes `unknown`.
pub(crate) fn sanitize_tool_name(name: &str, max: usize) -> String {
    sanitize_tool_name_counted(name, max, &mut Cuts::default())
}

/// [`sanitize_tool_name`], counting in `cuts` what was done to the name.
pub(crate) fn sanitize_tool_name_counted(name: &str, max: usize, cuts: &mut Cuts) -> String {
    let s = crate::label::sanitize(name, max);
    *cuts += Cuts::of(&s);
    let mut out = s.value;
    if out.is_empty() {
        out.push_str("unknown");
    }
    // A real tool must not merge with the overflow series in dashboards.
    if out == OVERFLOW {
        out.push_str("_tool");
    }
    out
}

/// The tool names a receiving thread has seen, each sanitised once and shared by the records
/// that name it: no allocation per span, nor per request, once a name was seen (a request of
/// 512 spans names a few dozen tools, and the same ones request after request; built anew for
/// each request, the names and their map were 3.5 % of the daemon's samples at 100,000
/// spans/s). The names are kept per thread ([`KNOWN`]), so receivers share no lock. Memory is
/// bounded: at most [`ToolNames::CAPACITY`] names of at most [`ToolNames::KEPT_BYTES`] raw bytes
/// each (a longer name, which only a hostile or broken client sends, is sanitised for every
/// record and never kept); a thread that meets one name more starts over, so a client sending
/// ever new names costs a sanitising and an insertion per name.
/// A request's handle borrows nothing: `'a` is the request's lifetime, kept so callers read
/// as before.
#[derive(Debug, Default)]
pub(crate) struct ToolNames<'a>(std::marker::PhantomData<&'a str>);

/// One thread's sanitised tool names, for the `max` they were cut to.
#[derive(Default)]
struct Known {
    max: usize,
    /// Keyed by the raw name's bytes, so that a name seen before is found before its bytes
    /// are checked as UTF-8; only names that were valid UTF-8 are kept.
    names:
        std::collections::HashMap<Box<[u8]>, (Arc<str>, Cuts), crate::collector::hash::MapHasher>,
}

thread_local! {
    /// The names this thread has sanitised ([`ToolNames`]).
    static KNOWN: std::cell::RefCell<Known> = std::cell::RefCell::new(Known::default());
}

impl ToolNames<'_> {
    /// Names kept per thread.
    pub(crate) const CAPACITY: usize = 1024;
    /// The longest raw name kept, bytes: 1,024 of them hold at most 256 KiB a thread.
    pub(crate) const KEPT_BYTES: usize = 256;

    /// [`sanitize_tool_name`] of `raw`, counting in `cuts` what was done to it (for every
    /// record, as if it were sanitised each time).
    pub(crate) fn of(&mut self, raw: &str, max: usize, cuts: &mut Cuts) -> Arc<str> {
        KNOWN.with_borrow_mut(|known| {
            known
                .found(raw.as_bytes(), max, cuts)
                .unwrap_or_else(|| known.sanitise(raw, cuts))
        })
    }

    /// [`ToolNames::of`] the raw name `raw` as its bytes arrived: `None` when they are not
    /// UTF-8. A name this thread has seen is found by its bytes alone, before they are checked
    /// (the check of a short name costs about what the lookup does).
    pub(crate) fn of_bytes(&mut self, raw: &[u8], max: usize, cuts: &mut Cuts) -> Option<Arc<str>> {
        KNOWN.with_borrow_mut(|known| match known.found(raw, max, cuts) {
            Some(name) => Some(name),
            None => Some(known.sanitise(std::str::from_utf8(raw).ok()?, cuts)),
        })
    }
}

impl Known {
    /// The name kept for `raw`, its cuts added to `cuts`; the names kept are dropped first when
    /// they were cut to another `max`.
    fn found(&mut self, raw: &[u8], max: usize, cuts: &mut Cuts) -> Option<Arc<str>> {
        if self.max != max {
            self.names.clear();
            self.max = max;
        }
        let (name, cut) = self.names.get(raw)?;
        *cuts += *cut;
        Some(name.clone())
    }

    /// `raw` sanitised to the kept `max`, counted in `cuts`, and kept unless too long.
    fn sanitise(&mut self, raw: &str, cuts: &mut Cuts) -> Arc<str> {
        let mut cut = Cuts::default();
        let name: Arc<str> = sanitize_tool_name_counted(raw, self.max, &mut cut).into();
        *cuts += cut;
        if raw.len() > ToolNames::KEPT_BYTES {
            return name;
        }
        if self.names.len() >= ToolNames::CAPACITY {
            self.names.clear();
        }
        self.names
            .insert(raw.as_bytes().into(), (name.clone(), cut));
        name
    }
}

/// `tool.args_hash` of recorded arguments: when they are JSON, the same canonical hash the
/// library computes (Python's `json.dumps(args, sort_keys=True, default=str)`), so a tool called
/// with the same arguments from any emitter gets the same hash; otherwise SHA-1 of the raw bytes.
pub(crate) fn hash_value(v: AttrValue<'_>) -> String {
    let text = match v {
        AttrValue::Str(s) => match std::str::from_utf8(s) {
            Ok(t) => std::borrow::Cow::Borrowed(t),
            Err(_) => return crate::args_hash::args_hash_of_canonical(s),
        },
        other => {
            let mut buf = String::new();
            if let Some(v) = other.to_owned_value() {
                write_json(&v, &mut buf);
            }
            std::borrow::Cow::Owned(buf)
        }
    };
    crate::args_hash::args_hash_json(&text)
        .unwrap_or_else(|_| crate::args_hash::args_hash_of_canonical(text.as_bytes()))
}

/// Length of the compact JSON serialization of a structured value (no allocation).
pub(crate) fn json_len(v: &Value) -> u64 {
    match v {
        Value::StringValue(s) => json_str_len(s),
        Value::BoolValue(b) => {
            if *b {
                4
            } else {
                5
            }
        }
        Value::IntValue(i) => i.to_string().len() as u64,
        Value::DoubleValue(d) => serde_json::to_string(d)
            .map(|s| s.len() as u64)
            .unwrap_or(4),
        // Bytes are base64 in JSON.
        Value::BytesValue(b) => 2 + (b.len() as u64).div_ceil(3) * 4,
        // Profiles-only string table index: no content here.
        Value::StringValueStrindex(_) => 4,
        Value::ArrayValue(a) => {
            let items: u64 = a.values.iter().map(any_len).sum();
            2 + items + (a.values.len() as u64).saturating_sub(1)
        }
        Value::KvlistValue(kv) => {
            let items: u64 = kv
                .values
                .iter()
                .map(|e| json_str_len(&e.key) + 1 + e.value.as_ref().map(any_len).unwrap_or(4))
                .sum();
            2 + items + (kv.values.len() as u64).saturating_sub(1)
        }
    }
}

fn any_len(v: &AnyValue) -> u64 {
    v.value.as_ref().map(json_len).unwrap_or(4)
}

/// A string's length as a JSON string, its quotes included.
fn json_str_len(s: &str) -> u64 {
    2 + crate::measure::json_str_len(s)
}

pub(crate) fn write_json(v: &Value, out: &mut String) {
    match v {
        Value::StringValue(s) => out.push_str(&serde_json::to_string(s).unwrap_or_default()),
        Value::BoolValue(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::IntValue(i) => out.push_str(&i.to_string()),
        Value::DoubleValue(d) => out.push_str(&serde_json::to_string(d).unwrap_or_default()),
        Value::BytesValue(b) => out.push_str(&format!("{b:?}")),
        Value::StringValueStrindex(_) => out.push_str("null"),
        Value::ArrayValue(a) => {
            out.push('[');
            for (i, x) in a.values.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                match &x.value {
                    Some(v) => write_json(v, out),
                    None => out.push_str("null"),
                }
            }
            out.push(']');
        }
        Value::KvlistValue(kv) => {
            out.push('{');
            for (i, e) in kv.values.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(&e.key).unwrap_or_default());
                out.push(':');
                match e.value.as_ref().and_then(|v| v.value.as_ref()) {
                    Some(v) => write_json(v, out),
                    None => out.push_str("null"),
                }
            }
            out.push('}');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts read from the bytes agree with reading the text: padded, zero-led, at and past
    /// the largest count, 19 and 20 digits, signs, decimals, non-ASCII blanks and bytes.
    #[test]
    fn counts_read_from_digits_are_those_read_from_the_text() {
        let text = |b: &[u8]| match std::str::from_utf8(b).map(str::trim) {
            Err(_) => Ok(None),
            Ok(t) => match t.parse::<u64>() {
                Ok(n) if n <= MAX_COUNT => Ok(Some(n)),
                Ok(_) => Err(AbsurdSize),
                Err(_) => match t.parse::<f64>() {
                    Ok(d) if (0.0..=MAX_COUNT as f64).contains(&d) => Ok(Some(d as u64)),
                    Ok(_) => Err(AbsurdSize),
                    Err(_) => Ok(None),
                },
            },
        };
        let max = MAX_COUNT.to_string();
        let past = (MAX_COUNT + 1).to_string();
        for b in [
            &b"0"[..],
            b"2329",
            b" 12\n",
            b"007",
            max.as_bytes(),
            past.as_bytes(),
            b"9999999999999999999",
            b"18446744073709551615",
            b"99999999999999999999",
            b"+5",
            b"",
            b" ",
            b"1 2",
            b"\x0b7",
            b"\xe2\x80\x8312",
            b"\xff1",
        ] {
            assert_eq!(size_of(Some(AttrValue::Str(b))), text(b), "{b:?}");
        }
    }

    /// A thread's names outlive the request that met them, are counted on every record as if
    /// sanitised each time, follow the configured length, and stay bounded.
    #[test]
    fn tool_names_are_kept_across_requests_counted_each_time_and_bounded() {
        let long = "lookup\u{200b}_".repeat(20);
        let (mut first, mut second) = (ToolNames::default(), ToolNames::default());
        let mut cuts = Cuts::default();
        let a = first.of(&long, 64, &mut cuts);
        let b = second.of(&long, 64, &mut cuts);
        assert!(
            Arc::ptr_eq(&a, &b),
            "the second request shares the first's name"
        );
        assert_eq!(&*a, sanitize_tool_name(&long, 64));
        assert_eq!(cuts.too_long, 2, "cut once per record");
        assert_eq!(cuts.hidden_characters, 2, "cleaned once per record");

        // Another length is another name, not the one kept for 64 bytes.
        let short = first.of(&long, 16, &mut Cuts::default());
        assert_eq!(&*short, sanitize_tool_name(&long, 16));
        assert!(short.len() <= 16);

        // Past the capacity the thread starts over: every name is still right.
        let mut names = ToolNames::default();
        for i in 0..ToolNames::CAPACITY * 2 + 7 {
            let raw = format!("tool_{i}");
            assert_eq!(&*names.of(&raw, 64, &mut Cuts::default()), raw);
        }
        KNOWN.with_borrow(|k| assert!(k.names.len() <= ToolNames::CAPACITY));
        assert_eq!(&*names.of("", 64, &mut Cuts::default()), "unknown");

        // A name longer than what is kept is right, counted, and not held by the thread.
        let huge = "x".repeat(ToolNames::KEPT_BYTES + 1);
        let mut cut = Cuts::default();
        assert_eq!(&*names.of(&huge, 64, &mut cut), "x".repeat(64));
        assert_eq!(cut.too_long, 1);
        KNOWN.with_borrow(|k| assert!(!k.names.contains_key(huge.as_bytes())));
    }

    /// A name read from its bytes is the name read from its text, with the same cuts, whether
    /// it was seen as text or as bytes first; bytes that are not UTF-8 give no name and are not
    /// kept.
    #[test]
    fn tool_names_read_from_bytes_are_those_read_from_text() {
        let mut names = ToolNames::default();
        let raw = "fetch\u{200b}_page";
        let (mut by_text, mut by_bytes) = (Cuts::default(), Cuts::default());
        let text = names.of(raw, 64, &mut by_text);
        let bytes = names.of_bytes(raw.as_bytes(), 64, &mut by_bytes).unwrap();
        assert!(Arc::ptr_eq(&text, &bytes), "found by its bytes");
        assert_eq!(by_text.hidden_characters, 1);
        assert_eq!(by_bytes.hidden_characters, 1, "its cuts counted again");
        let fresh = "read_\u{200b}file";
        let mut first = Cuts::default();
        let a = names.of_bytes(fresh.as_bytes(), 64, &mut first).unwrap();
        assert_eq!(&*a, sanitize_tool_name(fresh, 64));
        assert_eq!(first.hidden_characters, 1);
        assert!(Arc::ptr_eq(&a, &names.of(fresh, 64, &mut Cuts::default())));
        let invalid = b"tool_\xff";
        assert_eq!(names.of_bytes(invalid, 64, &mut Cuts::default()), None);
        KNOWN.with_borrow(|k| assert!(!k.names.contains_key(&invalid[..])));
    }

    /// A structured value's length is that of its compact JSON: every control, the quote, the
    /// backslash and non-ASCII text in strings and keys, nested lists and maps.
    #[test]
    fn json_len_is_the_compact_json_length() {
        use opentelemetry_proto::tonic::common::v1::{ArrayValue, KeyValue, KeyValueList};
        let text: String = (0u8..0x80)
            .map(char::from)
            .chain("é—中😀\\\"".chars())
            .collect();
        let s = |t: &str| AnyValue {
            value: Some(Value::StringValue(t.into())),
        };
        let nested = Value::KvlistValue(KeyValueList {
            values: vec![
                KeyValue {
                    key: text.clone(),
                    value: Some(s(&text)),
                    ..Default::default()
                },
                KeyValue {
                    key: "list".into(),
                    value: Some(AnyValue {
                        value: Some(Value::ArrayValue(ArrayValue {
                            values: vec![s(""), s("\n\u{1}"), AnyValue { value: None }],
                        })),
                    }),
                    ..Default::default()
                },
                KeyValue {
                    key: "n".into(),
                    value: Some(AnyValue {
                        value: Some(Value::IntValue(-42)),
                    }),
                    ..Default::default()
                },
            ],
        });
        for v in [
            Value::StringValue(text.clone()),
            Value::StringValue(String::new()),
            nested,
        ] {
            let mut out = String::new();
            write_json(&v, &mut out);
            assert_eq!(json_len(&v), out.len() as u64, "{out}");
        }
    }
}
