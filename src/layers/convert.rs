//! Converting a result's measures into each layer's unit and scope, and limits into bytes.
//!
//! Every function here is a handful of integer operations on [`ResultMeasures`]: nothing
//! allocates, panics or fails, so the collector can run them for every result and every layer.
//!
//! # Values: exact where measured, estimated otherwise
//!
//! A measure the span carries is used as is (`estimated: false`). A missing one is estimated from
//! bytes, erring towards *more* (an estimate may report a cut that did not happen, never hide one
//! that did), except where no useful upper bound exists:
//!
//! | unit | estimate from `bytes` | why |
//! |---|---|---|
//! | `chars`, `utf16_units` | `bytes` | every code point, and every UTF-16 unit, takes at least one UTF-8 byte: an upper bound, exact for ASCII |
//! | `tokens` | `ceil(bytes / 4)` ([`BYTES_PER_TOKEN`]) | the rule most layers apply themselves; no tokenizer runs here, so tokens are always estimated |
//! | `lines` | `ceil(bytes / 40)` ([`BYTES_PER_LINE`]) | a typical source or log line; the only upper bound (`bytes`) would flag every result |
//! | `depth`, `items` | none | not derivable from size: a layer counting them is skipped unless the measure is present |
//!
//! # Scopes
//!
//! * `per_result`: the whole result.
//! * `per_string`: the longest string. Its code points (`max_string_chars`) are exact; its UTF-16
//!   units and bytes are estimated as `m + min(m, utf16_units - chars)` and
//!   `m + min(3m, bytes - chars)` (the result's surplus of units or bytes over code points,
//!   bounded by the widest encoding). Without `max_string_chars` the whole result stands in for
//!   its longest string, estimated.
//! * `per_attribute`: the whole result, but only when it travels as an attribute value
//!   (`via_attribute`); otherwise the layer does not apply.
//! * `per_line`: the longest line, bounded by the whole value minus one newline per other line;
//!   exact only for a one-line result whose value is exact.
//!
//! # Limits in bytes
//!
//! [`limit_in_bytes`] gives the byte size at or under which a result cannot exceed the limit,
//! i.e. one less than the smallest byte size that could: `L` for `bytes`, `chars` and
//! `utf16_units` (a result of `L` bytes has at most `L` of either; `L + 1` ASCII bytes exceed it),
//! exact. Tokens and lines have no such bound (one byte can be a token or a line), so they use the
//! estimation ratios above, `4 L` and `40 L`, marked estimated. Depth and item limits are not sizes
//! and have no byte equivalent.

use serde::Serialize;

use super::catalog::{Scope, Unit};
use crate::measure::Measures;

/// Bytes per token in estimates: `ceil(bytes / 4)`, the rule most layers apply.
pub const BYTES_PER_TOKEN: u64 = 4;

/// Bytes per line in estimates, when a result's lines were not counted.
pub const BYTES_PER_LINE: u64 = 40;

/// What is known of one result's size: the library's one measures type, under its layer name.
pub type ResultMeasures = crate::measure::Measurement;

/// A result's size in one unit, exact or estimated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Value {
    /// The size in the unit.
    pub value: u64,
    /// Whether it was estimated rather than measured.
    pub estimated: bool,
}

impl Value {
    const fn exact(value: u64) -> Value {
        Value {
            value,
            estimated: false,
        }
    }

    const fn estimated(value: u64) -> Value {
        Value {
            value,
            estimated: true,
        }
    }
}

/// A limit converted to bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct ByteLimit {
    /// The byte size at or under which a result cannot exceed the limit (see the module doc).
    pub bytes: u64,
    /// Whether the conversion is an estimate (tokens, lines).
    pub estimated: bool,
}

/// The whole result's size in `unit`; `None` when `unit` cannot be measured or estimated.
pub fn whole_value(m: &ResultMeasures, unit: Unit) -> Option<Value> {
    let or_bytes = |measured: Option<u64>| match measured {
        Some(v) => Value::exact(v),
        None => Value::estimated(m.bytes),
    };
    Some(match unit {
        Unit::Bytes => Value::exact(m.bytes),
        Unit::Chars => or_bytes(m.chars),
        Unit::Utf16Units => or_bytes(m.utf16_units),
        Unit::Tokens => Value::estimated(
            m.tokens_estimate
                .unwrap_or_else(|| m.bytes.div_ceil(BYTES_PER_TOKEN)),
        ),
        Unit::Lines => match m.lines {
            Some(v) => Value::exact(v),
            None => Value::estimated(m.bytes.div_ceil(BYTES_PER_LINE)),
        },
        Unit::Depth => Value::exact(m.json_depth?),
        Unit::Items => Value::exact(m.items?),
    })
}

/// The size a layer of `unit` and `scope` compares with its limit; `None` when the layer does not
/// apply to this result (an attribute layer for a result not sent as an attribute) or its unit
/// cannot be measured or estimated.
pub fn value_for(
    m: &ResultMeasures,
    unit: Unit,
    scope: Scope,
    via_attribute: bool,
) -> Option<Value> {
    match scope {
        Scope::PerResult => whole_value(m, unit),
        Scope::PerAttribute if via_attribute => whole_value(m, unit),
        Scope::PerAttribute => None,
        Scope::PerString => longest_string(m, unit),
        Scope::PerLine => longest_line(m, unit),
    }
}

fn longest_string(m: &ResultMeasures, unit: Unit) -> Option<Value> {
    let Some(longest) = m.max_string_chars else {
        // A string is at most the whole result.
        return whole_value(m, unit).map(|v| Value::estimated(v.value));
    };
    let surplus = |total: Option<u64>| -> Option<u64> { Some(total?.saturating_sub(m.chars?)) };
    let bytes = longest + surplus(Some(m.bytes)).map_or(3 * longest, |s| s.min(3 * longest));
    Some(match unit {
        Unit::Chars => Value::exact(longest),
        Unit::Utf16Units => {
            Value::estimated(longest + surplus(m.utf16_units).map_or(longest, |s| s.min(longest)))
        }
        Unit::Bytes => Value::estimated(bytes),
        Unit::Tokens => Value::estimated(bytes.div_ceil(BYTES_PER_TOKEN)),
        Unit::Lines | Unit::Depth | Unit::Items => {
            return whole_value(m, unit).map(|v| Value::estimated(v.value))
        }
    })
}

fn longest_line(m: &ResultMeasures, unit: Unit) -> Option<Value> {
    let whole = whole_value(m, unit)?;
    match unit {
        Unit::Bytes | Unit::Chars | Unit::Utf16Units | Unit::Tokens => {}
        Unit::Lines | Unit::Depth | Unit::Items => return Some(whole),
    }
    let (value, estimated) = match (unit, m.lines) {
        (Unit::Tokens, Some(lines)) => (
            m.bytes
                .saturating_sub(lines.saturating_sub(1))
                .div_ceil(BYTES_PER_TOKEN),
            true,
        ),
        (_, Some(lines)) => (
            whole.value.saturating_sub(lines.saturating_sub(1)),
            whole.estimated || lines > 1,
        ),
        (_, None) => (whole.value, true),
    };
    Some(Value { value, estimated })
}

/// The measures a layer of `unit` and `scope` is compared with exactly: what [`value_for`] reads
/// before it falls back to an estimate from bytes. A span carrying them lets such a layer's
/// verdict be exact; the library takes them when a configured layer needs them
/// ([`crate::layers::Stack::measures`]). Bytes are always measured and tokens are always
/// estimated, so a byte or token layer over the whole result needs nothing more.
pub const fn measures_for(unit: Unit, scope: Scope) -> Measures {
    let none = Measures::BYTES_ONLY;
    let whole = match unit {
        Unit::Bytes | Unit::Items => none,
        Unit::Chars => Measures {
            chars: true,
            ..none
        },
        Unit::Utf16Units => Measures {
            utf16_units: true,
            ..none
        },
        Unit::Tokens => Measures {
            tokens_estimate: true,
            ..none
        },
        Unit::Lines => Measures {
            lines: true,
            ..none
        },
        Unit::Depth => Measures {
            json_depth: true,
            ..none
        },
    };
    match (scope, unit) {
        (Scope::PerResult | Scope::PerAttribute, _) => whole,
        // The longest string's code points, and the result's surplus of units and bytes over
        // code points (see the module doc).
        (Scope::PerString, Unit::Bytes | Unit::Chars | Unit::Utf16Units | Unit::Tokens) => whole
            .union(Measures {
                max_string_chars: true,
                chars: true,
                ..none
            }),
        (Scope::PerString, _) => whole,
        // The longest line is bounded with the count of lines.
        (Scope::PerLine, Unit::Bytes | Unit::Chars | Unit::Utf16Units | Unit::Tokens) => whole
            .union(Measures {
                lines: true,
                ..none
            }),
        (Scope::PerLine, _) => whole,
    }
}

/// `limit` in `unit` converted to bytes (see the module doc); `None` for depth and item limits.
pub const fn limit_in_bytes(limit: u64, unit: Unit) -> Option<ByteLimit> {
    match unit {
        Unit::Bytes | Unit::Chars | Unit::Utf16Units => Some(ByteLimit {
            bytes: limit,
            estimated: false,
        }),
        Unit::Tokens => Some(ByteLimit {
            bytes: limit.saturating_mul(BYTES_PER_TOKEN),
            estimated: true,
        }),
        Unit::Lines => Some(ByteLimit {
            bytes: limit.saturating_mul(BYTES_PER_LINE),
            estimated: true,
        }),
        Unit::Depth | Unit::Items => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_measures_a_layer_needs_give_the_value_all_measures_give() {
        let texts = [
            r#"{"a": ["ü😀 long string here", {"b": "x"}], "d": [[1]]}"#,
            "line one\nligne deux é\n三行目 😀\n",
            "one line",
        ];
        for text in texts {
            let all = crate::measure::measure(text.as_bytes(), Measures::ALL);
            for unit in Unit::ALL {
                for scope in Scope::ALL {
                    let needed = measures_for(unit, scope);
                    let m = crate::measure::measure(text.as_bytes(), needed);
                    for via_attribute in [false, true] {
                        assert_eq!(
                            value_for(&m, unit, scope, via_attribute),
                            value_for(&all, unit, scope, via_attribute),
                            "{text:?} {unit:?} {scope:?} with {needed}"
                        );
                    }
                }
            }
        }
        // And no more than that: a byte ceiling on the whole result needs bytes alone.
        assert_eq!(
            measures_for(Unit::Bytes, Scope::PerResult),
            Measures::BYTES_ONLY
        );
        assert_eq!(
            measures_for(Unit::Depth, Scope::PerResult),
            Measures {
                json_depth: true,
                ..Measures::BYTES_ONLY
            }
        );
    }

    #[test]
    fn missing_measures_are_estimated_from_bytes() {
        let m = ResultMeasures::from_bytes(1000);
        assert_eq!(whole_value(&m, Unit::Bytes), Some(Value::exact(1000)));
        assert_eq!(whole_value(&m, Unit::Chars), Some(Value::estimated(1000)));
        assert_eq!(
            whole_value(&m, Unit::Utf16Units),
            Some(Value::estimated(1000))
        );
        assert_eq!(whole_value(&m, Unit::Tokens), Some(Value::estimated(250)));
        assert_eq!(whole_value(&m, Unit::Lines), Some(Value::estimated(25)));
        assert_eq!(whole_value(&m, Unit::Depth), None);
        assert_eq!(whole_value(&m, Unit::Items), None);
    }

    #[test]
    fn attribute_layers_apply_only_to_attributes() {
        let m = ResultMeasures::from_bytes(10);
        assert_eq!(value_for(&m, Unit::Bytes, Scope::PerAttribute, false), None);
        assert_eq!(
            value_for(&m, Unit::Bytes, Scope::PerAttribute, true),
            Some(Value::exact(10))
        );
    }

    #[test]
    fn limits_in_bytes() {
        assert_eq!(
            limit_in_bytes(8000, Unit::Utf16Units),
            Some(ByteLimit {
                bytes: 8000,
                estimated: false
            })
        );
        assert_eq!(limit_in_bytes(10_000, Unit::Tokens).unwrap().bytes, 40_000);
        assert_eq!(limit_in_bytes(100, Unit::Lines).unwrap().bytes, 4_000);
        assert_eq!(limit_in_bytes(64, Unit::Depth), None);
        assert_eq!(
            limit_in_bytes(u64::MAX, Unit::Tokens).unwrap().bytes,
            u64::MAX
        );
    }
}
