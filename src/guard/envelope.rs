//! The response envelope: `{ok, data, error, warnings[], meta{duration_ms, truncated}}`.
//!
//! Every toolsize command and every guarded tool result is reported in this one shape, so a caller
//! (an agent, a script) can always `json.loads` the output and look at `ok`, `warnings` and
//! `meta.truncated` before trusting `data`. Serialization never fails: [`Envelope::to_json`] falls
//! back to a fixed, complete error envelope if the payload cannot be encoded, so the output is
//! complete JSON whatever the payload. `meta.truncated` is computed when the envelope is written:
//! it is true whenever a [`Warning::FieldTruncated`] is present or something marked the envelope as
//! cut, so the flag and the warnings cannot disagree.
//!
//! Warnings and errors carry field paths, sizes and limits, never field *content*.

use std::fmt;
use std::time::Duration;

use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Serialize, Serializer};
use serde_json::Value;

/// Which phase of a command an error belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Before anything ran or was written: the input was refused.
    Validation,
    /// While or after the command ran.
    Execution,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Validation => "validation",
            Phase::Execution => "execution",
        })
    }
}

/// The unit a length is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// UTF-8 bytes.
    Bytes,
    /// Unicode scalar values (what Python's `len(str)` counts).
    Chars,
    /// Array items.
    Items,
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Unit::Bytes => "bytes",
            Unit::Chars => "chars",
            Unit::Items => "items",
        })
    }
}

/// One violation of a declared field limit or argument rule, as listed in an error.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Violation {
    /// Stable code: `FIELD_TOO_LARGE`, `UNKNOWN_FIELD`, `INVALID_VALUE`, `WRONG_TYPE`,
    /// `MISSING_FIELD` or `OUT_OF_RANGE`.
    pub code: &'static str,
    /// Path of the offending field, e.g. `body` or `tags`.
    pub field: String,
    /// What is wrong and what to send instead.
    pub message: String,
    /// The limit that was passed, for size and range violations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<serde_json::Number>,
    /// The measured value, for size and range violations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actual: Option<serde_json::Number>,
    /// The unit of `limit` and `actual` for size violations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<Unit>,
    /// The known field the caller probably meant, for unknown keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub did_you_mean: Option<String>,
}

impl Violation {
    /// A violation without sizes.
    pub fn new(code: &'static str, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code,
            field: field.into(),
            message: message.into(),
            limit: None,
            actual: None,
            unit: None,
            did_you_mean: None,
        }
    }

    /// Whether this is a size violation (`FIELD_TOO_LARGE`).
    pub fn is_size(&self) -> bool {
        self.code == "FIELD_TOO_LARGE"
    }
}

/// The `error` member of an envelope.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnvelopeError {
    /// Stable machine-readable code, `SCREAMING_SNAKE_CASE`.
    pub code: String,
    /// What went wrong and what to do about it.
    pub message: String,
    /// Whether the input was refused before running, or the run failed.
    pub phase: Phase,
    /// For size errors: the field (or `result`) that was too large.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// For size errors: the limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// For size errors: the measured size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actual: Option<u64>,
    /// For size errors: the unit of `limit` and `actual`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<Unit>,
    /// For an oversized result: the tool that produced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// How to get a result that fits (paginate, narrow the filter, fix the key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// Every violation found, for validation errors (never just the first).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<Violation>,
}

impl EnvelopeError {
    /// An error with `code`, `message` and `phase`, no sizes.
    pub fn new(code: impl Into<String>, message: impl Into<String>, phase: Phase) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            phase,
            field: None,
            limit: None,
            actual: None,
            unit: None,
            tool: None,
            hint: None,
            violations: Vec::new(),
        }
    }

    /// Sets the size details of a size error.
    pub fn with_size(
        mut self,
        field: impl Into<String>,
        limit: u64,
        actual: u64,
        unit: Unit,
    ) -> Self {
        self.field = Some(field.into());
        self.limit = Some(limit);
        self.actual = Some(actual);
        self.unit = Some(unit);
        self
    }

    /// Sets the hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

impl fmt::Display for EnvelopeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.phase, self.message)
    }
}

impl std::error::Error for EnvelopeError {}

/// One entry of `warnings[]`. Serialized with its `code` first.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Warning {
    /// `FIELD_TRUNCATED`: a value was cut. One warning per cut.
    FieldTruncated {
        /// Path of the cut value, e.g. `data.items[3].body`.
        field: String,
        /// Length before the cut, when known.
        original_length: Option<u64>,
        /// How much of the original is still there (a marker added by the cut is not counted).
        truncated_length: u64,
        /// Unit of both lengths.
        unit: Unit,
    },
    /// `FIELD_TRUNCATED` for many cuts of the same shape, reported once ([`coalesce`]): the
    /// paths' pattern (indices written `[*]`), how many values were cut, the longest original
    /// and the length each was cut to.
    FieldsTruncated {
        /// The paths' pattern, e.g. `data.rows[*].body`.
        pattern: String,
        /// How many values were cut.
        count: u64,
        /// The longest length before a cut, when known.
        original_length_max: Option<u64>,
        /// How much of each value is still there.
        truncated_length: u64,
        /// Unit of the lengths.
        unit: Unit,
    },
    /// `VALUE_CLAMPED`: a requested value was replaced by an allowed one.
    ValueClamped {
        /// Path of the argument.
        field: String,
        /// What the caller asked for.
        requested: Value,
        /// What was used instead.
        applied: Value,
        /// Why, e.g. `maximum is 600`.
        reason: String,
    },
    /// `FIELD_CHANGED`: a backend returned a value different from the one sent (not a shortening).
    FieldChanged {
        /// Path of the value.
        field: String,
        /// What differs, e.g. `type changed from string to number`.
        reason: String,
    },
    /// `TRUNCATION_UNREPORTED`: an envelope's `meta.truncated` and its `FIELD_TRUNCATED` warnings
    /// disagree, so some cut is not described.
    TruncationUnreported {
        /// What disagrees.
        message: String,
    },
    /// `RESULT_SPILLED`: the full result was stored and a summary returned in its place.
    ResultSpilled {
        /// Handle of the stored payload.
        full_payload_id: String,
        /// Size of the stored payload.
        original_bytes: u64,
        /// How to fetch it.
        fetch: String,
    },
}

impl Warning {
    /// The warning's code, e.g. `FIELD_TRUNCATED`.
    pub fn code(&self) -> &'static str {
        match self {
            Warning::FieldTruncated { .. } | Warning::FieldsTruncated { .. } => "FIELD_TRUNCATED",
            Warning::ValueClamped { .. } => "VALUE_CLAMPED",
            Warning::FieldChanged { .. } => "FIELD_CHANGED",
            Warning::TruncationUnreported { .. } => "TRUNCATION_UNREPORTED",
            Warning::ResultSpilled { .. } => "RESULT_SPILLED",
        }
    }

    /// Whether this warning means something was cut (sets `meta.truncated`).
    pub fn is_cut(&self) -> bool {
        matches!(
            self,
            Warning::FieldTruncated { .. }
                | Warning::FieldsTruncated { .. }
                | Warning::ResultSpilled { .. }
        )
    }

    /// A `FIELD_TRUNCATED` warning.
    pub fn truncated(
        field: impl Into<String>,
        original_length: Option<u64>,
        truncated_length: u64,
        unit: Unit,
    ) -> Self {
        Warning::FieldTruncated {
            field: field.into(),
            original_length,
            truncated_length,
            unit,
        }
    }
}

impl Serialize for Warning {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("code", self.code())?;
        match self {
            Warning::FieldTruncated {
                field,
                original_length,
                truncated_length,
                unit,
            } => {
                map.serialize_entry("field", field)?;
                if let Some(original) = original_length {
                    map.serialize_entry("original_length", original)?;
                }
                map.serialize_entry("truncated_length", truncated_length)?;
                // The same number under the name some readers look for.
                map.serialize_entry("truncated_to", truncated_length)?;
                map.serialize_entry("unit", unit)?;
            }
            Warning::FieldsTruncated {
                pattern,
                count,
                original_length_max,
                truncated_length,
                unit,
            } => {
                map.serialize_entry("field", pattern)?;
                map.serialize_entry("count", count)?;
                if let Some(original) = original_length_max {
                    map.serialize_entry("original_length_max", original)?;
                }
                map.serialize_entry("truncated_length", truncated_length)?;
                map.serialize_entry("truncated_to", truncated_length)?;
                map.serialize_entry("unit", unit)?;
            }
            Warning::ValueClamped {
                field,
                requested,
                applied,
                reason,
            } => {
                map.serialize_entry("field", field)?;
                map.serialize_entry("requested", requested)?;
                map.serialize_entry("applied", applied)?;
                map.serialize_entry("reason", reason)?;
            }
            Warning::FieldChanged { field, reason } => {
                map.serialize_entry("field", field)?;
                map.serialize_entry("reason", reason)?;
            }
            Warning::TruncationUnreported { message } => {
                map.serialize_entry("message", message)?;
            }
            Warning::ResultSpilled {
                full_payload_id,
                original_bytes,
                fetch,
            } => {
                map.serialize_entry("full_payload_id", full_payload_id)?;
                map.serialize_entry("original_bytes", original_bytes)?;
                map.serialize_entry("fetch", fetch)?;
            }
        }
        map.end()
    }
}

/// The pattern of a path: every index written `[*]` (`data.rows[12].body` → `data.rows[*].body`).
pub fn path_pattern(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut rest = path;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..=open]);
        rest = &rest[open + 1..];
        match rest.find(']') {
            Some(close) if close > 0 && rest[..close].bytes().all(|b| b.is_ascii_digit()) => {
                out.push('*');
                rest = &rest[close..];
            }
            _ => {}
        }
    }
    out.push_str(rest);
    out
}

/// Reports many cuts of the same shape as one warning: `FIELD_TRUNCATED` warnings whose paths
/// share a [`path_pattern`], unit and cut length become one [`Warning::FieldsTruncated`] with
/// their count, at the place of the first. A shape cut once keeps its own warning; other
/// warnings are left as they are, in order. The result is at most as long as the input, so an
/// envelope's warnings stay small however many values were cut.
pub fn coalesce(warnings: Vec<Warning>) -> Vec<Warning> {
    use std::collections::HashMap;
    type Key = (String, u64, &'static str);
    let key = |w: &Warning| -> Option<Key> {
        match w {
            Warning::FieldTruncated {
                field,
                truncated_length,
                unit,
                ..
            } => Some((path_pattern(field), *truncated_length, unit_name(*unit))),
            _ => None,
        }
    };
    let mut counts: HashMap<Key, u64> = HashMap::new();
    for w in &warnings {
        if let Some(k) = key(w) {
            *counts.entry(k).or_insert(0) += 1;
        }
    }
    if counts.values().all(|n| *n < 2) {
        return warnings;
    }
    // Indices every path of a group shares stay written: `content[0].text.rows[*].body`.
    let mut shared_indices: HashMap<Key, Vec<Option<String>>> = HashMap::new();
    for w in &warnings {
        if let (Some(k), Warning::FieldTruncated { field, .. }) = (key(w), w) {
            if counts[&k] < 2 {
                continue;
            }
            let idx = indices(field);
            match shared_indices.get_mut(&k) {
                None => {
                    shared_indices.insert(k, idx.into_iter().map(Some).collect());
                }
                Some(seen) => {
                    for (s, i) in seen.iter_mut().zip(idx) {
                        if s.as_deref() != Some(i.as_str()) {
                            *s = None;
                        }
                    }
                }
            }
        }
    }
    let mut merged: HashMap<Key, usize> = HashMap::new();
    let mut out: Vec<Warning> = Vec::new();
    for w in warnings {
        let Some(k) = key(&w) else {
            out.push(w);
            continue;
        };
        let n = counts[&k];
        if n < 2 {
            out.push(w);
            continue;
        }
        let Warning::FieldTruncated {
            original_length,
            truncated_length,
            unit,
            ..
        } = w
        else {
            continue;
        };
        match merged.get(&k) {
            Some(&at) => {
                if let Warning::FieldsTruncated {
                    original_length_max,
                    ..
                } = &mut out[at]
                {
                    *original_length_max = match (*original_length_max, original_length) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        (a, b) => a.or(b),
                    };
                }
            }
            None => {
                merged.insert(k.clone(), out.len());
                let pattern = fill_indices(&k.0, shared_indices.get(&k).map_or(&[][..], |v| v));
                out.push(Warning::FieldsTruncated {
                    pattern,
                    count: n,
                    original_length_max: original_length,
                    truncated_length,
                    unit,
                });
            }
        }
    }
    out
}

/// The numeric indices of a path, in order (`a[1].b[22]` → `["1", "22"]`).
fn indices(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = path;
    while let Some(open) = rest.find('[') {
        rest = &rest[open + 1..];
        if let Some(close) = rest.find(']') {
            if close > 0 && rest[..close].bytes().all(|b| b.is_ascii_digit()) {
                out.push(rest[..close].to_owned());
            }
        }
    }
    out
}

/// Writes back into `pattern`'s `[*]`s the indices every path shares.
fn fill_indices(pattern: &str, shared: &[Option<String>]) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut parts = pattern.split("[*]");
    out.push_str(parts.next().unwrap_or(""));
    for (i, part) in parts.enumerate() {
        match shared.get(i).and_then(Option::as_deref) {
            Some(idx) => {
                out.push('[');
                out.push_str(idx);
                out.push(']');
            }
            None => out.push_str("[*]"),
        }
        out.push_str(part);
    }
    out
}

fn unit_name(unit: Unit) -> &'static str {
    match unit {
        Unit::Bytes => "bytes",
        Unit::Chars => "chars",
        Unit::Items => "items",
    }
}

/// The response envelope. Build with [`Envelope::ok`] or [`Envelope::err`], then add warnings.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    data: Value,
    error: Option<EnvelopeError>,
    warnings: Vec<Warning>,
    duration_ms: u64,
    cut: bool,
    original_bytes: Option<u64>,
}

impl Envelope {
    /// A successful envelope carrying `data`.
    pub fn ok(data: Value) -> Self {
        Self {
            data,
            error: None,
            warnings: Vec::new(),
            duration_ms: 0,
            cut: false,
            original_bytes: None,
        }
    }

    /// A failed envelope: `ok: false`, `data: null`.
    pub fn err(error: EnvelopeError) -> Self {
        Self {
            error: Some(error),
            ..Self::ok(Value::Null)
        }
    }

    /// Sets `data` (kept on a failed envelope too, e.g. the output of a command that failed).
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = data;
        self
    }

    /// Sets `meta.duration_ms`.
    pub fn with_duration(mut self, duration: Duration) -> Self {
        self.duration_ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// Adds a warning.
    pub fn with_warning(mut self, warning: Warning) -> Self {
        self.warnings.push(warning);
        self
    }

    /// Adds warnings.
    pub fn with_warnings(mut self, warnings: impl IntoIterator<Item = Warning>) -> Self {
        self.warnings.extend(warnings);
        self
    }

    /// Marks the envelope as cut even without a field warning, recording the full size if known
    /// (`meta.original_bytes`).
    pub fn mark_truncated(&mut self, original_bytes: Option<u64>) {
        self.cut = true;
        if original_bytes.is_some() {
            self.original_bytes = original_bytes;
        }
    }

    /// `ok`: true when there is no error.
    pub fn is_ok(&self) -> bool {
        self.error.is_none()
    }

    /// `meta.truncated`: true whenever anything was cut.
    pub fn is_truncated(&self) -> bool {
        self.cut || self.warnings.iter().any(Warning::is_cut)
    }

    /// The payload.
    pub fn data(&self) -> &Value {
        &self.data
    }

    /// The error, if any.
    pub fn error(&self) -> Option<&EnvelopeError> {
        self.error.as_ref()
    }

    /// The warnings.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// The envelope as one line of complete JSON. Never fails.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| FALLBACK_ENVELOPE.to_owned())
    }

    /// The envelope as a JSON value.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self)
            .unwrap_or_else(|_| serde_json::from_str(FALLBACK_ENVELOPE).unwrap_or(Value::Null))
    }
}

/// Written in place of an envelope that could not be encoded; complete JSON by construction.
const FALLBACK_ENVELOPE: &str = r#"{"ok":false,"data":null,"error":{"code":"ENCODING_FAILED","message":"The response could not be encoded as JSON.","phase":"execution"},"warnings":[],"meta":{"duration_ms":0,"truncated":false}}"#;

struct MetaWire<'a>(&'a Envelope);

impl Serialize for MetaWire<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("duration_ms", &self.0.duration_ms)?;
        map.serialize_entry("truncated", &self.0.is_truncated())?;
        if let Some(original) = self.0.original_bytes {
            map.serialize_entry("original_bytes", &original)?;
        }
        map.end()
    }
}

impl Serialize for Envelope {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Envelope", 5)?;
        s.serialize_field("ok", &self.is_ok())?;
        s.serialize_field("data", &self.data)?;
        s.serialize_field("error", &self.error)?;
        s.serialize_field("warnings", &self.warnings)?;
        s.serialize_field("meta", &MetaWire(self))?;
        s.end()
    }
}

/// What is wrong with an envelope's truncation reporting, found by [`audit_envelope`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TruncationMismatch {
    /// `meta.truncated` is true but no `FIELD_TRUNCATED` warning says what was cut.
    TruncatedWithoutWarning,
    /// `FIELD_TRUNCATED` warnings are present but `meta.truncated` is not true.
    WarningsWithoutFlag {
        /// How many `FIELD_TRUNCATED` warnings there are.
        warnings: usize,
    },
}

impl fmt::Display for TruncationMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TruncationMismatch::TruncatedWithoutWarning => f.write_str(
                "meta.truncated is true but no FIELD_TRUNCATED warning says which field was cut; treat every field as possibly incomplete",
            ),
            TruncationMismatch::WarningsWithoutFlag { warnings } => write!(
                f,
                "{warnings} FIELD_TRUNCATED warning(s) present but meta.truncated is not true; the data is incomplete",
            ),
        }
    }
}

/// Whether `value` looks like a response envelope: an object with a boolean `ok` and at least
/// one of `warnings`, `meta` or `error`.
pub fn looks_like_envelope(value: &Value) -> bool {
    let Some(obj) = value.as_object() else {
        return false;
    };
    obj.get("ok").is_some_and(Value::is_boolean)
        && (obj.contains_key("warnings") || obj.contains_key("meta") || obj.contains_key("error"))
}

/// Checks an envelope (as JSON) for truncation that is flagged but not described, or described
/// but not flagged. `None` when consistent or when `value` is not an envelope.
pub fn audit_envelope(value: &Value) -> Option<TruncationMismatch> {
    if !looks_like_envelope(value) {
        return None;
    }
    let flagged = value
        .pointer("/meta/truncated")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let warnings = value
        .get("warnings")
        .and_then(Value::as_array)
        .map(|w| {
            w.iter()
                .filter(|w| {
                    matches!(
                        w.get("code").and_then(Value::as_str),
                        Some("FIELD_TRUNCATED" | "TRUNCATION")
                    )
                })
                .count()
        })
        .unwrap_or(0);
    match (flagged, warnings) {
        (true, 0) => Some(TruncationMismatch::TruncatedWithoutWarning),
        (false, n) if n > 0 => Some(TruncationMismatch::WarningsWithoutFlag { warnings: n }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn same_shape_cuts_become_one_warning_with_a_count() {
        assert_eq!(
            path_pattern("data.rows[12].body[3]"),
            "data.rows[*].body[*]"
        );
        assert_eq!(path_pattern("data[\"a b\"][0]"), "data[\"a b\"][*]");
        assert_eq!(path_pattern("x[]"), "x[]");
        let mut warnings: Vec<Warning> = (0..22)
            .map(|i| {
                Warning::truncated(
                    format!("data.rows[{i}].body"),
                    Some(100 + i),
                    40,
                    Unit::Chars,
                )
            })
            .collect();
        warnings.insert(
            3,
            Warning::truncated("data.title", Some(500), 40, Unit::Chars),
        );
        warnings.push(Warning::truncated("data.rows", Some(900), 22, Unit::Items));
        let out = coalesce(warnings);
        assert_eq!(out.len(), 3);
        assert_eq!(
            out[0],
            Warning::FieldsTruncated {
                pattern: "data.rows[*].body".into(),
                count: 22,
                original_length_max: Some(121),
                truncated_length: 40,
                unit: Unit::Chars,
            }
        );
        assert!(matches!(&out[1], Warning::FieldTruncated { field, .. } if field == "data.title"));
        let v = serde_json::to_value(&out[0]).unwrap();
        assert_eq!(
            v,
            json!({"code": "FIELD_TRUNCATED", "field": "data.rows[*].body", "count": 22,
                   "original_length_max": 121, "truncated_length": 40, "truncated_to": 40,
                   "unit": "chars"})
        );
        assert!(Envelope::ok(Value::Null).with_warnings(out).is_truncated());
    }

    #[test]
    fn ok_envelope_has_every_member() {
        let env = Envelope::ok(json!({"id": 1})).with_duration(Duration::from_millis(34));
        let v: Value = serde_json::from_str(&env.to_json()).unwrap();
        assert_eq!(
            v,
            json!({"ok": true, "data": {"id": 1}, "error": null, "warnings": [],
                   "meta": {"duration_ms": 34, "truncated": false}})
        );
    }

    #[test]
    fn field_truncated_sets_meta_truncated() {
        let env = Envelope::ok(json!({"body": "x"})).with_warning(Warning::truncated(
            "data.body",
            Some(4200),
            255,
            Unit::Bytes,
        ));
        let v = env.to_value();
        assert_eq!(v["meta"]["truncated"], json!(true));
        assert_eq!(
            v["warnings"][0],
            json!({"code": "FIELD_TRUNCATED", "field": "data.body", "original_length": 4200,
                   "truncated_length": 255, "truncated_to": 255, "unit": "bytes"})
        );
    }

    #[test]
    fn error_envelope_carries_size_details() {
        let err = EnvelopeError::new("FIELD_TOO_LARGE", "body is too large", Phase::Validation)
            .with_size("body", 255, 500, Unit::Bytes);
        let v = Envelope::err(err).to_value();
        assert_eq!(v["ok"], json!(false));
        assert_eq!(v["data"], Value::Null);
        assert_eq!(v["error"]["phase"], json!("validation"));
        assert_eq!(v["error"]["limit"], json!(255));
        assert_eq!(v["error"]["actual"], json!(500));
    }

    #[test]
    fn audit_finds_both_mismatches() {
        let flagged = json!({"ok": true, "data": 1, "warnings": [], "meta": {"truncated": true}});
        assert_eq!(
            audit_envelope(&flagged),
            Some(TruncationMismatch::TruncatedWithoutWarning)
        );
        let unflagged = json!({"ok": true, "warnings": [{"code": "FIELD_TRUNCATED"}], "meta": {}});
        assert_eq!(
            audit_envelope(&unflagged),
            Some(TruncationMismatch::WarningsWithoutFlag { warnings: 1 })
        );
        let fine = json!({"ok": true, "warnings": [{"code": "FIELD_TRUNCATED"}], "meta": {"truncated": true}});
        assert_eq!(audit_envelope(&fine), None);
        assert_eq!(audit_envelope(&json!([1, 2])), None);
    }
}
