//! One `tools/call` result shaped to the output limit: refused, cut or previewed, with the whole
//! `result` object (markers and toolsize's notice included) at most the limit.
//!
//! A result is measured as its `result` object's bytes, as the server wrote them, so `content`
//! and `structuredContent` both count (hosts forward both); what the proxy writes in its place is
//! compact JSON, measured again. Over the limit:
//!
//! * **refuse**: the result becomes a tool error (`isError: true`) whose one text item is an
//!   envelope carrying `RESULT_TOO_LARGE`, the size, the limit and a hint;
//! * **cut**: the parts that take room are cut in place, fairly (each gets an equal share of
//!   what the rest of the result leaves, small parts whole): a text item holding JSON is cut
//!   JSON-aware and stays valid JSON, with `[toolsize: …]` markers where strings and arrays lost
//!   something; other text is cut head + tail around a marker; `structuredContent` is cut
//!   JSON-aware; an image, audio or blob item that does not fit is replaced by a text item saying
//!   so. A last text item, `{"toolsize": {"code": "RESULT_TRUNCATED", …, "warnings": […]}}`,
//!   says what was cut, same-shape cuts coalesced into one warning with a count;
//! * **spill**: the same cut is a preview; the full text goes to the spill store and the notice
//!   (`RESULT_SPILLED`) gives its `full_payload_id` and how to read it in slices with the
//!   `toolsize_read_spill` tool ([`super::spill`]).
//!
//! The cut is fitted in rounds, each measuring the assembled result and taking what it was over
//! from the next; when nothing fits (a limit smaller than the result's fixed members), the result
//! is refused instead, so what leaves the proxy is never over the limit. Everything here is pure
//! and panic-free; the cost is a few passes over the result.

use serde_json::{json, Map, Value};

use crate::guard::ceiling::{cut_to_json_string, ResultTooLarge};
use crate::guard::envelope::{coalesce, Envelope, Unit, Warning};
use crate::guard::json_truncate::JsonTruncator;

/// Rounds of fitting before a cut gives up and refuses.
const MAX_ROUNDS: usize = 12;

/// Bytes kept free for the notice's warnings in the first round of a cut.
const WARNINGS_ROOM: u64 = 320;

pub(crate) use crate::measure::json_len;

/// Bytes of `s` as a JSON string, quotes excluded.
fn escaped_len(s: &str) -> u64 {
    serde_json::to_string(s).map_or(u64::MAX, |e| e.len() as u64 - 2)
}

/// A tool error result holding one text item.
pub(crate) fn error_result(text: String) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

/// The refusal of a result of `size` bytes: an `isError` result carrying a `RESULT_TOO_LARGE`
/// envelope, made to fit `limit` (without its hint, then with a bare message, if need be).
pub(crate) fn refuse(tool: &str, size: u64, limit: u64) -> Value {
    let e = ResultTooLarge {
        tool: tool.to_owned(),
        size,
        limit,
    };
    let mut err = e.to_envelope_error();
    err.hint = Some(format!(
        "{} toolsize refused this result before it reached you; nothing of it is shown.",
        e.hint()
    ));
    let full = error_result(Envelope::err(err.clone()).to_json());
    if json_len(&full) <= limit {
        return full;
    }
    err.hint = None;
    err.tool = None;
    let short = error_result(Envelope::err(err.clone()).to_json());
    if json_len(&short) <= limit {
        return short;
    }
    err.message = "over the output limit".to_owned();
    error_result(Envelope::err(err).to_json())
}

/// What the cut's notice says beyond the cut itself.
#[derive(Debug, Clone)]
pub(crate) enum Notice {
    /// The result was cut; the rest is gone.
    Truncated,
    /// The result was stored whole; read it with the spill tool.
    Spilled {
        /// The handle.
        id: String,
        /// How to read it.
        read_with: String,
    },
}

/// Where a part sits in the result.
#[derive(Debug, Clone, Copy)]
enum Place {
    /// `content[i].text`.
    Text(usize),
    /// `content[i].resource.text`.
    ResourceText(usize),
    /// `content[i]`, kept whole or replaced.
    Item(usize),
    /// `structuredContent`.
    Structured,
}

#[derive(Debug)]
enum Kind {
    Text(String),
    JsonText(Value),
    Json(Value),
    Opaque(Value),
}

#[derive(Debug)]
struct Part {
    place: Place,
    path: String,
    kind: Kind,
    /// Bytes the part takes in place (a string's escaped bytes without its quotes).
    cost: u64,
}

/// Takes every part that can be cut out of `result`, leaving placeholders in it.
fn split(result: &Value) -> (Value, Vec<Part>) {
    let mut skeleton = result.clone();
    let mut parts = Vec::new();
    if let Some(items) = skeleton.get_mut("content").and_then(Value::as_array_mut) {
        for (i, item) in items.iter_mut().enumerate() {
            let kind = item
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            let text_at = match kind.as_str() {
                "text" => item.get_mut("text"),
                "resource" => item.get_mut("resource").and_then(|r| r.get_mut("text")),
                _ => None,
            };
            if let Some(Value::String(text)) = text_at {
                let text = std::mem::take(text);
                let (place, path) = if kind == "text" {
                    (Place::Text(i), format!("content[{i}].text"))
                } else {
                    (
                        Place::ResourceText(i),
                        format!("content[{i}].resource.text"),
                    )
                };
                let cost = escaped_len(&text);
                let parsed = match text.trim_start().as_bytes().first() {
                    Some(b'{' | b'[') => serde_json::from_str::<Value>(&text).ok(),
                    _ => None,
                };
                let kind = match parsed {
                    Some(v) => Kind::JsonText(v),
                    None => Kind::Text(text),
                };
                parts.push(Part {
                    place,
                    path,
                    kind,
                    cost,
                });
            } else {
                let whole = std::mem::replace(item, Value::Null);
                parts.push(Part {
                    place: Place::Item(i),
                    path: format!("content[{i}]"),
                    cost: json_len(&whole),
                    kind: Kind::Opaque(whole),
                });
            }
        }
    }
    if let Some(obj) = skeleton.as_object_mut() {
        if let Some(structured) = obj.get_mut("structuredContent") {
            let whole = std::mem::replace(structured, Value::Null);
            if !whole.is_null() {
                parts.push(Part {
                    place: Place::Structured,
                    path: "structuredContent".to_owned(),
                    cost: json_len(&whole).saturating_sub(4),
                    kind: Kind::Json(whole),
                });
            }
        }
    }
    (skeleton, parts)
}

/// Equal shares of `budget`, small parts whole (max-min fair).
fn shares(costs: &[u64], budget: u64) -> Vec<u64> {
    let mut order: Vec<usize> = (0..costs.len()).collect();
    order.sort_by_key(|&i| costs[i]);
    let mut out = vec![0; costs.len()];
    let mut remaining = budget;
    let mut left = costs.len() as u64;
    for i in order {
        let share = remaining / left.max(1);
        let a = costs[i].min(share);
        out[i] = a;
        remaining -= a;
        left -= 1;
    }
    out
}

/// A JSON value cut so that its text, as a JSON string, takes at most `budget` bytes. `ratio` is
/// the whole text's escaped bytes per compact byte: the first cut aims at `budget / ratio`, so
/// one or two cuts usually suffice.
fn cut_json_text(
    value: &Value,
    budget: u64,
    ratio: f64,
    path: &str,
) -> Option<(String, Vec<Warning>)> {
    let mut inner = ((budget as f64) / ratio.max(1.0)) as u64;
    for _ in 0..8 {
        let cut = JsonTruncator::new(usize::try_from(inner).unwrap_or(usize::MAX))
            .array_markers(true)
            .root(path)
            .truncate(value)
            .ok()?;
        let text = serde_json::to_string(&cut.value).ok()?;
        let cost = escaped_len(&text);
        if cost <= budget {
            return Some((text, cut.warnings));
        }
        // Scale what the cut produced, not what it was allowed: cuts move in whole items.
        let produced = text.len() as u64;
        let aimed = u128::from(produced) * u128::from(budget) / u128::from(cost.max(1));
        inner = u64::try_from(aimed)
            .unwrap_or(0)
            .min(produced.saturating_sub(1))
            .min(inner.saturating_sub(1));
        if inner == 0 {
            return None;
        }
    }
    None
}

fn omitted_item(item: &Value, bytes: u64) -> Value {
    let kind = item
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("content");
    let kind: String = kind.chars().take(32).collect();
    json!({"type": "text", "text": format!("[toolsize: {kind} item of {bytes} bytes omitted]")})
}

/// Cuts one part to `alloc` bytes; returns its new value and warnings.
fn cut_part(part: &Part, alloc: u64) -> (Option<Value>, Vec<Warning>) {
    let budget = usize::try_from(alloc).unwrap_or(usize::MAX);
    match &part.kind {
        Kind::Text(text) => {
            if part.cost <= alloc {
                return (Some(Value::String(text.clone())), Vec::new());
            }
            let (cut, warning) = cut_to_json_string(text, budget + 2, &part.path);
            (Some(Value::String(cut)), warning.into_iter().collect())
        }
        Kind::JsonText(value) => {
            if part.cost <= alloc {
                let text = serde_json::to_string(value).unwrap_or_default();
                // The original text, exactly: re-encoding could differ in spacing.
                return (Some(Value::String(text)), Vec::new());
            }
            let compact = json_len(value).max(1);
            let ratio = part.cost as f64 / compact as f64;
            match cut_json_text(value, alloc, ratio, &part.path) {
                Some((text, warnings)) => (Some(Value::String(text)), warnings),
                None => {
                    let text = serde_json::to_string(value).unwrap_or_default();
                    let (cut, warning) = cut_to_json_string(&text, budget + 2, &part.path);
                    (Some(Value::String(cut)), warning.into_iter().collect())
                }
            }
        }
        Kind::Json(value) => {
            if part.cost <= alloc {
                return (Some(value.clone()), Vec::new());
            }
            match JsonTruncator::new(budget + 4)
                .root(&part.path)
                .truncate(value)
            {
                Ok(cut) => (Some(cut.value), cut.warnings),
                Err(_) => (
                    None,
                    vec![Warning::truncated(
                        part.path.clone(),
                        Some(part.cost),
                        0,
                        Unit::Bytes,
                    )],
                ),
            }
        }
        Kind::Opaque(item) => {
            if part.cost <= alloc {
                return (Some(item.clone()), Vec::new());
            }
            (
                Some(omitted_item(item, part.cost)),
                vec![Warning::truncated(
                    part.path.clone(),
                    Some(part.cost),
                    0,
                    Unit::Bytes,
                )],
            )
        }
    }
}

fn put(result: &mut Value, part: &Part, value: Option<Value>, original_text: Option<&str>) {
    match part.place {
        Place::Text(i) => {
            if let Some(slot) = result.pointer_mut(&format!("/content/{i}/text")) {
                *slot = match (original_text, value) {
                    (Some(t), _) => Value::String(t.to_owned()),
                    (None, v) => v.unwrap_or(Value::Null),
                };
            }
        }
        Place::ResourceText(i) => {
            if let Some(slot) = result.pointer_mut(&format!("/content/{i}/resource/text")) {
                *slot = match (original_text, value) {
                    (Some(t), _) => Value::String(t.to_owned()),
                    (None, v) => v.unwrap_or(Value::Null),
                };
            }
        }
        Place::Item(i) => {
            if let Some(slot) = result.pointer_mut(&format!("/content/{i}")) {
                *slot = value.unwrap_or(Value::Null);
            }
        }
        Place::Structured => {
            if let Some(obj) = result.as_object_mut() {
                match value {
                    Some(v) => {
                        obj.insert("structuredContent".to_owned(), v);
                    }
                    None => {
                        obj.remove("structuredContent");
                    }
                }
            }
        }
    }
}

fn notice_item(notice: &Notice, original: u64, limit: u64, warnings: &[Warning]) -> Value {
    let mut body = Map::new();
    match notice {
        Notice::Truncated => {
            body.insert("code".into(), json!("RESULT_TRUNCATED"));
            body.insert(
                "message".into(),
                json!(format!(
                    "This result was cut by toolsize to fit the {limit}-byte limit; cut values end in a [toolsize: ...] marker and are listed in warnings. Ask the tool for less (one page, a narrower filter) to see the rest."
                )),
            );
        }
        Notice::Spilled { id, read_with } => {
            body.insert("code".into(), json!("RESULT_SPILLED"));
            body.insert(
                "message".into(),
                json!(format!(
                    "This result is over the {limit}-byte limit: above is a preview, cut where marked. The full result is stored; {read_with}"
                )),
            );
            body.insert("full_payload_id".into(), json!(id));
        }
    }
    body.insert("original_bytes".into(), json!(original));
    body.insert("limit_bytes".into(), json!(limit));
    body.insert("warnings".into(), json!(warnings));
    let text = serde_json::to_string(&json!({ "toolsize": body })).unwrap_or_default();
    json!({"type": "text", "text": text})
}

/// Cuts `result` (of `original` bytes) to at most `limit` bytes, with a notice item at the end.
/// `None` when no cut fits: the caller refuses the result instead.
pub(crate) fn cut(
    result: &Value,
    original: u64,
    limit: u64,
    notice: &Notice,
) -> Option<(Value, Vec<Warning>)> {
    if !result.is_object() {
        return None;
    }
    let (skeleton, parts) = split(result);
    let costs: Vec<u64> = parts.iter().map(|p| p.cost).collect();
    let mut base = skeleton.clone();
    let notice0 = notice_item(notice, original, limit, &[]);
    push_item(&mut base, notice0);
    // Room for a few coalesced warnings, so the first round usually fits.
    let mut budget = limit.saturating_sub(json_len(&base) + WARNINGS_ROOM.min(limit / 8));
    for _ in 0..MAX_ROUNDS {
        let alloc = shares(&costs, budget);
        let mut out = skeleton.clone();
        let mut warnings = Vec::new();
        for (part, a) in parts.iter().zip(&alloc) {
            // A text part kept whole goes back exactly as it was sent.
            let whole_text = match (&part.kind, part.cost <= *a) {
                (Kind::JsonText(_), true) => original_text(result, part.place),
                _ => None,
            };
            let (value, w) = if whole_text.is_some() {
                (None, Vec::new())
            } else {
                cut_part(part, *a)
            };
            put(&mut out, part, value, whole_text.as_deref());
            warnings.extend(w);
        }
        let warnings = coalesce(warnings);
        push_item(&mut out, notice_item(notice, original, limit, &warnings));
        let len = json_len(&out);
        if len <= limit {
            return Some((out, warnings));
        }
        if budget == 0 {
            break;
        }
        budget = budget.saturating_sub(len - limit).min(budget - 1);
    }
    None
}

fn original_text(result: &Value, place: Place) -> Option<String> {
    let pointer = match place {
        Place::Text(i) => format!("/content/{i}/text"),
        Place::ResourceText(i) => format!("/content/{i}/resource/text"),
        _ => return None,
    };
    result.pointer(&pointer)?.as_str().map(str::to_owned)
}

fn push_item(result: &mut Value, item: Value) {
    let Some(obj) = result.as_object_mut() else {
        return;
    };
    let content = obj
        .entry("content")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !content.is_array() {
        *content = Value::Array(Vec::new());
    }
    if let Value::Array(items) = content {
        items.push(item);
    }
}

/// The text a model reads of `result`: its text items (and embedded resources' text) one after
/// another, an omitted-item line for the rest, or the `structuredContent` JSON when there is no
/// text. What the spill store keeps.
pub(crate) fn text_view(result: &Value) -> String {
    let mut out = String::new();
    let mut any_text = false;
    if let Some(items) = result.get("content").and_then(Value::as_array) {
        for item in items {
            let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
            let text = match kind {
                "text" => item.get("text").and_then(Value::as_str),
                "resource" => item.pointer("/resource/text").and_then(Value::as_str),
                _ => None,
            };
            if !out.is_empty() {
                out.push('\n');
            }
            match text {
                Some(t) => {
                    any_text = true;
                    out.push_str(t);
                }
                None => {
                    let omitted = omitted_item(item, json_len(item));
                    out.push_str(omitted["text"].as_str().unwrap_or_default());
                }
            }
        }
    }
    if !any_text {
        if let Some(s) = result.get("structuredContent") {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&serde_json::to_string(s).unwrap_or_default());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(n: usize) -> Value {
        Value::Array(
            (0..n)
                .map(|i| json!({"id": i, "name": format!("row {i}"), "body": "lorem ipsum ".repeat(10)}))
                .collect(),
        )
    }

    fn notice_of(result: &Value) -> Value {
        let items = result["content"].as_array().unwrap();
        let text = items.last().unwrap()["text"].as_str().unwrap();
        serde_json::from_str::<Value>(text).unwrap()["toolsize"].clone()
    }

    #[test]
    fn json_text_is_cut_json_aware_and_the_whole_fits() {
        let data = json!({"rows": rows(2000)});
        let result = json!({"content": [{"type": "text", "text": data.to_string()}],
                            "structuredContent": data, "isError": false});
        let size = json_len(&result);
        for limit in [1024u64, 4096, 50_000] {
            let (out, warnings) = cut(&result, size, limit, &Notice::Truncated).unwrap();
            assert!(json_len(&out) <= limit, "{limit}: {}", json_len(&out));
            let text = out["content"][0]["text"].as_str().unwrap();
            let inner: Value = serde_json::from_str(text).expect("still JSON");
            assert!(inner["rows"].as_array().unwrap().len() < 2000);
            assert!(out["structuredContent"]["rows"].is_array(), "{limit}");
            assert_eq!(out["isError"], json!(false));
            let notice = notice_of(&out);
            assert_eq!(notice["code"], json!("RESULT_TRUNCATED"));
            assert_eq!(notice["original_bytes"], json!(size));
            assert!(!warnings.is_empty());
            // Same-shape cuts are one warning each.
            assert!(warnings.len() <= 6, "{warnings:?}");
        }
    }

    #[test]
    fn plain_text_is_cut_head_and_tail_and_small_items_stay_whole() {
        let big = format!("FIRST\n{}LAST\n", "middle line\n".repeat(10_000));
        let result = json!({"content": [
            {"type": "text", "text": "short note"},
            {"type": "text", "text": big},
            {"type": "image", "data": "A".repeat(30_000), "mimeType": "image/png"}
        ]});
        let size = json_len(&result);
        let (out, warnings) = cut(&result, size, 8000, &Notice::Truncated).unwrap();
        assert!(json_len(&out) <= 8000);
        assert_eq!(out["content"][0]["text"], json!("short note"));
        let text = out["content"][1]["text"].as_str().unwrap();
        assert!(
            text.starts_with("FIRST") && text.ends_with("LAST\n"),
            "{text}"
        );
        assert!(text.contains("[... toolsize: omitted"));
        assert_eq!(out["content"][2]["type"], json!("text"));
        assert!(out["content"][2]["text"]
            .as_str()
            .unwrap()
            .contains("image item"));
        assert_eq!(warnings.len(), 2);
    }

    #[test]
    fn a_json_text_kept_whole_is_byte_identical() {
        let text = "{ \"a\" : 1 }".to_owned();
        let result = json!({"content": [
            {"type": "text", "text": text},
            {"type": "text", "text": "x".repeat(20_000)}
        ]});
        let (out, _) = cut(&result, json_len(&result), 4000, &Notice::Truncated).unwrap();
        assert_eq!(out["content"][0]["text"], json!(text));
    }

    #[test]
    fn refusals_fit_and_carry_the_sizes() {
        let r = refuse("search", 123_456, 1024);
        assert!(json_len(&r) <= 1024);
        assert_eq!(r["isError"], json!(true));
        let env: Value = serde_json::from_str(r["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(env["error"]["code"], json!("RESULT_TOO_LARGE"));
        assert_eq!(env["error"]["actual"], json!(123_456));
        assert_eq!(env["error"]["limit"], json!(1024));
        let tiny = refuse(&"t".repeat(2000), 5, 400);
        assert!(json_len(&tiny) <= 400, "{}", json_len(&tiny));
    }

    #[test]
    fn spill_notice_names_the_handle() {
        let result = json!({"content": [{"type": "text", "text": "y".repeat(50_000)}]});
        let notice = Notice::Spilled {
            id: "ab".repeat(20),
            read_with: "call toolsize_read_spill.".into(),
        };
        let (out, _) = cut(&result, json_len(&result), 2048, &notice).unwrap();
        assert!(json_len(&out) <= 2048);
        assert_eq!(notice_of(&out)["full_payload_id"], json!("ab".repeat(20)));
        assert_eq!(text_view(&result).len(), 50_000);
    }

    #[test]
    fn shares_are_fair() {
        assert_eq!(shares(&[10, 1000, 1000], 610), vec![10, 300, 300]);
        assert_eq!(shares(&[], 10), Vec::<u64>::new());
    }
}
