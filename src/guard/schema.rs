//! Field limits declared per command, and loud argument validation, checked before anything runs.
//!
//! A [`Schema`] declares, for each argument of one command, its type, whether it is required,
//! its size limits (`max_length` in chars, `max_bytes` in UTF-8 bytes, `max_items` for arrays),
//! its range and its allowed values. [`Schema::validate`] checks a payload against it *before*
//! execution and reports **every** violation, not just the first: a refused payload yields one
//! `VALIDATION_ERROR` (or `FIELD_TOO_LARGE` when every violation is a size) listing them all, in
//! the `validation` phase, so nothing was written. Validation is one pass over the payload; it
//! never panics and never logs argument values.
//!
//! The three ways an argument can be lost silently are each made loud:
//!
//! * **Unknown keys are rejected**, with a "did you mean": keys are compared normalised (case,
//!   `_`, `-` and spaces ignored, so `TimeoutSeconds` finds `timeout_seconds`), then by edit
//!   distance, a swap of neighbours counting as one edit (`timout_seconds`, `opne`). Set
//!   `allow_unknown` to let extra keys through. Values outside an `enum` get the same help.
//! * **Present but unparseable values are rejected**, never coerced to `0`, `false` or `null`:
//!   `"abc"` for an integer is an `INVALID_VALUE`. A string holding exactly a number (`"1200"`)
//!   or a boolean (`"true"`) is accepted and normalised, since that loses nothing.
//! * **Clamps are reported**: a field with `"clamp": true` brings an out-of-range number into
//!   range and says so with a `VALUE_CLAMPED` warning (requested and applied values); without
//!   `clamp` an out-of-range number is an `OUT_OF_RANGE` violation.
//!
//! # Schema file format (`toolsize check --schema FILE`)
//!
//! A JSON object:
//!
//! ```json
//! {
//!   "command": "issue update",
//!   "fields": {
//!     "title":           { "type": "string", "max_length": 80, "required": true },
//!     "body":            { "type": "string", "max_bytes": 255 },
//!     "tags":            { "type": "array", "max_items": 10 },
//!     "timeout_seconds": { "type": "integer", "minimum": 1, "maximum": 600, "clamp": true },
//!     "format":          { "type": "string", "enum": ["raw", "text"] },
//!     "labels":          { "type": "array", "max_items": 5,
//!                          "items": { "type": "string", "max_length": 32 } },
//!     "assignee":        { "type": "object",
//!                          "fields": { "login": { "type": "string", "required": true } } }
//!   },
//!   "allow_unknown": false
//! }
//! ```
//!
//! * `command` (optional): the command's name, used in messages.
//! * `fields`: argument name → spec. Every key of a spec is optional:
//!   * `type`: `string`, `integer`, `number`, `boolean`, `array`, `object` or `any` (default);
//!   * `required` (default `false`): absent or `null` is a `MISSING_FIELD`;
//!   * `max_length`: most chars (Unicode scalar values, Python's `len`) of a string;
//!   * `max_bytes`: most UTF-8 bytes of a string, or of the compact JSON of any other value;
//!   * `max_items`: most items of an array;
//!   * `minimum` / `maximum`: range of a number;
//!   * `clamp` (default `false`): bring an out-of-range number into range, with `VALUE_CLAMPED`;
//!   * `enum`: the allowed string values;
//!   * `items`: a spec every item of an array must meet (reported as `labels[2]`);
//!   * `fields` / `allow_unknown`: the members of an object, checked like the top-level fields
//!     (reported as `assignee.login`).
//! * `allow_unknown` (default `false`): accept keys that are not in `fields`.
//!
//! Unknown keys in the schema file itself are errors too.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde_json::{Map, Number, Value};

use crate::guard::envelope::{Envelope, EnvelopeError, Phase, Unit, Violation, Warning};
use crate::guard::json_truncate::{index_path, key_path};
use crate::suggest::did_you_mean;

/// The declared type of a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    /// A JSON string.
    String,
    /// A whole number (or a string holding exactly one).
    Integer,
    /// Any finite number (or a string holding exactly one).
    Number,
    /// `true` / `false` (or the strings `"true"` / `"false"`).
    Boolean,
    /// A JSON array.
    Array,
    /// A JSON object.
    Object,
    /// Any value.
    #[default]
    Any,
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FieldType::String => "a string",
            FieldType::Integer => "an integer",
            FieldType::Number => "a number",
            FieldType::Boolean => "a boolean",
            FieldType::Array => "an array",
            FieldType::Object => "an object",
            FieldType::Any => "any value",
        })
    }
}

/// The limits and rules of one field. Built by value: `FieldSpec::string().max_bytes(255)`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldSpec {
    /// The type.
    #[serde(default, rename = "type")]
    pub kind: FieldType,
    /// Whether the field must be present and not `null`.
    #[serde(default)]
    pub required: bool,
    /// Most chars of a string.
    #[serde(default)]
    pub max_length: Option<u64>,
    /// Most UTF-8 bytes of a string, or of the compact JSON of another value.
    #[serde(default)]
    pub max_bytes: Option<u64>,
    /// Most items of an array.
    #[serde(default)]
    pub max_items: Option<u64>,
    /// Smallest allowed number.
    #[serde(default)]
    pub minimum: Option<f64>,
    /// Largest allowed number.
    #[serde(default)]
    pub maximum: Option<f64>,
    /// Bring out-of-range numbers into range (reported), instead of refusing them.
    #[serde(default)]
    pub clamp: bool,
    /// Allowed string values.
    #[serde(default, rename = "enum")]
    pub allowed: Option<Vec<String>>,
    /// The spec of every item of an array (paths `field[3]`).
    #[serde(default)]
    pub items: Option<Box<FieldSpec>>,
    /// The members of an object (paths `field.member`), checked like the top-level fields.
    #[serde(default)]
    pub fields: Option<BTreeMap<String, FieldSpec>>,
    /// Accept members of an object not in `fields`.
    #[serde(default)]
    pub allow_unknown: bool,
}

impl FieldSpec {
    /// A field of type `kind` with no limits.
    pub fn of(kind: FieldType) -> Self {
        Self {
            kind,
            ..Self::default()
        }
    }
    /// A string field.
    pub fn string() -> Self {
        Self::of(FieldType::String)
    }
    /// An integer field.
    pub fn integer() -> Self {
        Self::of(FieldType::Integer)
    }
    /// A number field.
    pub fn number() -> Self {
        Self::of(FieldType::Number)
    }
    /// A boolean field.
    pub fn boolean() -> Self {
        Self::of(FieldType::Boolean)
    }
    /// An array field.
    pub fn array() -> Self {
        Self::of(FieldType::Array)
    }
    /// Marks the field required.
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }
    /// Most chars.
    pub fn max_length(mut self, chars: u64) -> Self {
        self.max_length = Some(chars);
        self
    }
    /// Most bytes.
    pub fn max_bytes(mut self, bytes: u64) -> Self {
        self.max_bytes = Some(bytes);
        self
    }
    /// Most items.
    pub fn max_items(mut self, items: u64) -> Self {
        self.max_items = Some(items);
        self
    }
    /// Allowed range.
    pub fn range(mut self, minimum: Option<f64>, maximum: Option<f64>) -> Self {
        self.minimum = minimum;
        self.maximum = maximum;
        self
    }
    /// Clamp out-of-range numbers, reported as `VALUE_CLAMPED`.
    pub fn clamp(mut self) -> Self {
        self.clamp = true;
        self
    }
    /// Allowed string values.
    pub fn one_of<I: IntoIterator<Item = S>, S: Into<String>>(mut self, values: I) -> Self {
        self.allowed = Some(values.into_iter().map(Into::into).collect());
        self
    }
    /// An object field.
    pub fn object() -> Self {
        Self::of(FieldType::Object)
    }
    /// The spec of every item of an array.
    pub fn items(mut self, spec: FieldSpec) -> Self {
        self.items = Some(Box::new(spec));
        self
    }
    /// Declares a member of an object.
    pub fn member(mut self, name: impl Into<String>, spec: FieldSpec) -> Self {
        self.fields
            .get_or_insert_with(BTreeMap::new)
            .insert(name.into(), spec);
        self
    }
}

/// The field limits of one command. Built by value, or read from a schema file
/// ([`Schema::from_json`]).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schema {
    /// The command's name, for messages.
    #[serde(default)]
    pub command: Option<String>,
    /// Argument name → spec.
    #[serde(default)]
    pub fields: BTreeMap<String, FieldSpec>,
    /// Accept keys not in `fields`.
    #[serde(default)]
    pub allow_unknown: bool,
    /// Refuse a string holding a number or boolean where a number or boolean is declared
    /// (`WRONG_TYPE`), instead of accepting it normalised. Set for schemas read from JSON Schema,
    /// where `"5"` is not an integer.
    #[serde(default)]
    pub strict: bool,
}

/// A schema file that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaError(pub String);

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid schema: {}", self.0)
    }
}

impl std::error::Error for SchemaError {}

/// A payload that passed validation, normalised (numeric strings parsed, clamps applied).
#[derive(Debug, Clone, PartialEq)]
pub struct Validated {
    /// The arguments to use.
    pub args: Map<String, Value>,
    /// `VALUE_CLAMPED` warnings for every override.
    pub warnings: Vec<Warning>,
}

/// A payload refused by validation, with every violation.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidationError {
    /// The command, when the schema names it.
    pub command: Option<String>,
    /// Every violation, in field order.
    pub violations: Vec<Violation>,
}

impl ValidationError {
    /// Whether every violation is a size violation.
    pub fn only_sizes(&self) -> bool {
        self.violations.iter().all(Violation::is_size)
    }

    /// The envelope error: `FIELD_TOO_LARGE` (with the first violation's field, limit and actual)
    /// when every violation is a size, else `VALIDATION_ERROR`; phase `validation`; all
    /// violations listed.
    pub fn to_envelope_error(&self) -> EnvelopeError {
        let code = if self.only_sizes() {
            "FIELD_TOO_LARGE"
        } else {
            "VALIDATION_ERROR"
        };
        let mut err = EnvelopeError::new(code, self.to_string(), Phase::Validation).with_hint(
            "Nothing was executed. Fix every listed field and call again; shorten or split values over a limit.",
        );
        if let Some(first) = self.violations.iter().find(|v| v.is_size()) {
            err.field = Some(first.field.clone());
            err.limit = first.limit.as_ref().and_then(Number::as_u64);
            err.actual = first.actual.as_ref().and_then(Number::as_u64);
            err.unit = first.unit;
        }
        err.violations = self.violations.clone();
        err
    }
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.violations.len();
        if let Some(c) = &self.command {
            write!(f, "{c}: ")?;
        }
        write!(f, "{n} invalid argument{}: ", if n == 1 { "" } else { "s" })?;
        for (i, v) in self.violations.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            f.write_str(&v.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for ValidationError {}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn size_violation(field: &str, limit: u64, actual: u64, unit: Unit) -> Violation {
    let mut v = Violation::new(
        "FIELD_TOO_LARGE",
        field,
        format!("{field} is {actual} {unit}, over its limit of {limit} {unit}"),
    );
    v.limit = Some(Number::from(limit));
    v.actual = Some(Number::from(actual));
    v.unit = Some(unit);
    v
}

/// Checks that every spec (nested ones too) is coherent.
fn check_specs(parent: &str, fields: &BTreeMap<String, FieldSpec>) -> Result<(), SchemaError> {
    for (name, spec) in fields {
        let path = key_path(parent, name);
        check_spec(&path, spec)?;
    }
    Ok(())
}

fn check_spec(path: &str, spec: &FieldSpec) -> Result<(), SchemaError> {
    if let (Some(lo), Some(hi)) = (spec.minimum, spec.maximum) {
        if lo > hi {
            return Err(SchemaError(format!(
                "field {path}: minimum {lo} is above maximum {hi}"
            )));
        }
    }
    if spec.clamp && spec.minimum.is_none() && spec.maximum.is_none() {
        return Err(SchemaError(format!(
            "field {path}: clamp needs a minimum or a maximum"
        )));
    }
    let numeric = matches!(
        spec.kind,
        FieldType::Integer | FieldType::Number | FieldType::Any
    );
    if !numeric && (spec.minimum.is_some() || spec.maximum.is_some()) {
        return Err(SchemaError(format!(
            "field {path}: minimum/maximum apply to numbers, not {}",
            spec.kind
        )));
    }
    if spec.items.is_some() && !matches!(spec.kind, FieldType::Array | FieldType::Any) {
        return Err(SchemaError(format!(
            "field {path}: items applies to arrays, not {}",
            spec.kind
        )));
    }
    if spec.fields.is_some() && !matches!(spec.kind, FieldType::Object | FieldType::Any) {
        return Err(SchemaError(format!(
            "field {path}: fields applies to objects, not {}",
            spec.kind
        )));
    }
    if let Some(items) = &spec.items {
        check_spec(&format!("{path}[]"), items)?;
    }
    if let Some(fields) = &spec.fields {
        check_specs(path, fields)?;
    }
    Ok(())
}

/// Checks the members of one object (the arguments, or a nested object) against `fields`;
/// returns the normalised object, recording every violation.
fn check_object(
    parent: &str,
    fields: &BTreeMap<String, FieldSpec>,
    allow_unknown: bool,
    args: &Map<String, Value>,
    strict: bool,
    violations: &mut Vec<Violation>,
    warnings: &mut Vec<Warning>,
) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, value) in args {
        if fields.contains_key(key) {
            continue;
        }
        if allow_unknown {
            out.insert(key.clone(), value.clone());
            continue;
        }
        let path = key_path(parent, key);
        let suggestion = did_you_mean(key, fields.keys().map(String::as_str));
        let message = match suggestion {
            Some(s) => format!(
                "unknown argument {path:?}; did you mean {:?}?",
                key_path(parent, s)
            ),
            None => format!(
                "unknown argument {path:?}; known arguments: {}",
                fields.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        };
        let mut v = Violation::new("UNKNOWN_FIELD", path, message);
        v.did_you_mean = suggestion.map(str::to_owned);
        violations.push(v);
    }
    for (name, spec) in fields {
        let path = key_path(parent, name);
        match args.get(name) {
            None | Some(Value::Null) => {
                if spec.required {
                    violations.push(Violation::new(
                        "MISSING_FIELD",
                        path.as_str(),
                        format!("{path} is required ({})", spec.kind),
                    ));
                }
            }
            Some(value) => {
                if let Some(v) = check_field(&path, spec, value, strict, violations, warnings) {
                    out.insert(name.clone(), v);
                }
            }
        }
    }
    out
}

/// Number of `f` as JSON: an integer when it has no fractional part and fits.
fn number_value(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 {
        Value::Number(Number::from(f as i64))
    } else {
        Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

impl Schema {
    /// An empty schema (no fields, unknown keys refused).
    pub fn new() -> Self {
        Self::default()
    }

    /// Names the command.
    pub fn command(mut self, name: impl Into<String>) -> Self {
        self.command = Some(name.into());
        self
    }

    /// Declares a field.
    pub fn field(mut self, name: impl Into<String>, spec: FieldSpec) -> Self {
        self.fields.insert(name.into(), spec);
        self
    }

    /// Accepts keys not declared.
    pub fn allow_unknown(mut self, allow: bool) -> Self {
        self.allow_unknown = allow;
        self
    }

    /// Reads a schema file's JSON and checks it is coherent: toolsize's own format (module
    /// docs), or any form [`crate::guard::forms`] reads (JSON Schema, MCP, OpenAI and Anthropic
    /// tool definitions, parameter lists).
    pub fn from_json(text: &str) -> Result<Self, SchemaError> {
        let doc: Value = serde_json::from_str(text).map_err(|e| SchemaError(e.to_string()))?;
        Self::from_value(&doc)
    }

    /// Like [`Schema::from_json`], from a parsed document.
    pub fn from_value(doc: &Value) -> Result<Self, SchemaError> {
        let (schema, _form) = crate::guard::forms::read(doc)?;
        check_specs("", &schema.fields)?;
        Ok(schema)
    }

    /// Checks `payload` (a JSON object of arguments) and returns the arguments to use, or every
    /// violation.
    pub fn validate(&self, payload: &Value) -> Result<Validated, ValidationError> {
        let fail = |violations| ValidationError {
            command: self.command.clone(),
            violations,
        };
        let Some(args) = payload.as_object() else {
            return Err(fail(vec![Violation::new(
                "WRONG_TYPE",
                "$",
                format!(
                    "the arguments must be a JSON object, not {}",
                    type_name(payload)
                ),
            )]));
        };
        let mut violations = Vec::new();
        let mut warnings = Vec::new();
        let out = check_object(
            "",
            &self.fields,
            self.allow_unknown,
            args,
            self.strict,
            &mut violations,
            &mut warnings,
        );
        if violations.is_empty() {
            Ok(Validated {
                args: out,
                warnings,
            })
        } else {
            Err(fail(violations))
        }
    }

    /// Validates `payload`, then runs `execute` with the arguments only if they passed. Returns
    /// a `validation` error envelope (nothing executed), or `execute`'s envelope with the
    /// validation warnings added and the duration set.
    pub fn run<F>(&self, payload: &Value, execute: F) -> Envelope
    where
        F: FnOnce(&Map<String, Value>) -> Envelope,
    {
        let start = std::time::Instant::now();
        let validated = match self.validate(payload) {
            Ok(v) => v,
            Err(e) => {
                return Envelope::err(e.to_envelope_error()).with_duration(start.elapsed());
            }
        };
        execute(&validated.args)
            .with_warnings(validated.warnings)
            .with_duration(start.elapsed())
    }
}

/// Checks one present field; returns its normalised value, or `None` after recording
/// violations that make the value unusable.
fn check_field(
    name: &str,
    spec: &FieldSpec,
    value: &Value,
    strict: bool,
    violations: &mut Vec<Violation>,
    warnings: &mut Vec<Warning>,
) -> Option<Value> {
    let value = match typed(name, spec, value, strict) {
        Ok(value) => value,
        Err(wrong) => {
            violations.push(*wrong);
            return None;
        }
    };
    let mut fits = check_sizes(name, spec, &value, violations);
    fits &= check_allowed(name, spec, &value, violations);
    match check_range(name, spec, &value, violations, warnings) {
        Range::Within => {}
        Range::Clamped(applied) => return fits.then_some(applied),
        Range::Refused => fits = false,
    }
    let before = violations.len();
    let value = check_nested(name, spec, value, strict, violations, warnings);
    fits &= violations.len() == before;
    fits.then_some(value)
}

/// The value as the field's type, parsing strictly: present but unparseable is an error, never
/// a default. In strict mode a string is not read as a number or a boolean.
fn typed(
    name: &str,
    spec: &FieldSpec,
    value: &Value,
    strict: bool,
) -> Result<Value, Box<Violation>> {
    let wrong = |code: &'static str, what: String| Err(Box::new(Violation::new(code, name, what)));
    let not_one = |kind: &str, s: &str| {
        wrong(
            "INVALID_VALUE",
            format!(
                "{name} must be {kind}; got a string that is not one ({} chars)",
                s.chars().count()
            ),
        )
    };
    if strict
        && value.is_string()
        && matches!(
            spec.kind,
            FieldType::Integer | FieldType::Number | FieldType::Boolean
        )
    {
        return wrong(
            "WRONG_TYPE",
            format!("{name} must be {}, not a string", spec.kind),
        );
    }
    Ok(match (spec.kind, value) {
        (FieldType::Any, v) => v.clone(),
        (FieldType::String, v @ Value::String(_)) => v.clone(),
        (FieldType::Array, v @ Value::Array(_)) => v.clone(),
        (FieldType::Object, v @ Value::Object(_)) => v.clone(),
        (FieldType::Boolean, v @ Value::Bool(_)) => v.clone(),
        (FieldType::Boolean, Value::String(s)) => match s.as_str() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => return not_one("a boolean (true or false)", s),
        },
        (FieldType::Integer, Value::Number(n)) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(_), _, _) | (_, Some(_), _) => Value::Number(n.clone()),
            (_, _, Some(f)) if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 => {
                number_value(f)
            }
            _ => {
                return wrong(
                    "INVALID_VALUE",
                    format!("{name} must be an integer; got a number with a fractional part"),
                )
            }
        },
        (FieldType::Integer, Value::String(s)) => match s.parse::<i64>() {
            Ok(i) => Value::Number(Number::from(i)),
            Err(_) => return not_one("an integer", s),
        },
        (FieldType::Number, v @ Value::Number(_)) => v.clone(),
        (FieldType::Number, Value::String(s)) => match s.parse::<f64>() {
            Ok(f) if f.is_finite() && !s.trim().is_empty() && s.trim() == s => number_value(f),
            _ => return not_one("a number", s),
        },
        (kind, v) => {
            return wrong(
                "WRONG_TYPE",
                format!("{name} must be {kind}, not {}", type_name(v)),
            )
        }
    })
}

/// Checks the field's sizes (characters, bytes, items); whether the value fits them all.
fn check_sizes(
    name: &str,
    spec: &FieldSpec,
    value: &Value,
    violations: &mut Vec<Violation>,
) -> bool {
    let mut fits = true;
    if let Value::String(s) = value {
        if let Some(limit) = spec.max_length {
            let chars = s.chars().count() as u64;
            if chars > limit {
                violations.push(size_violation(name, limit, chars, Unit::Chars));
                fits = false;
            }
        }
    }
    if let Some(limit) = spec.max_bytes {
        let bytes = match value {
            Value::String(s) => s.len() as u64,
            other => serde_json::to_string(other).map_or(0, |s| s.len() as u64),
        };
        if bytes > limit {
            violations.push(size_violation(name, limit, bytes, Unit::Bytes));
            fits = false;
        }
    }
    if let (Some(limit), Value::Array(items)) = (spec.max_items, value) {
        if items.len() as u64 > limit {
            violations.push(size_violation(name, limit, items.len() as u64, Unit::Items));
            fits = false;
        }
    }
    fits
}

/// Checks a string against the field's allowed values, suggesting the closest; whether it is
/// one of them (or the field allows any).
fn check_allowed(
    name: &str,
    spec: &FieldSpec,
    value: &Value,
    violations: &mut Vec<Violation>,
) -> bool {
    let (Some(allowed), Value::String(s)) = (&spec.allowed, value) else {
        return true;
    };
    if allowed.iter().any(|a| a == s) {
        return true;
    }
    let suggestion = did_you_mean(s, allowed.iter().map(String::as_str));
    let mut v = Violation::new(
        "INVALID_VALUE",
        name,
        match suggestion {
            Some(m) => format!(
                "{name} must be one of {}; did you mean {m:?}?",
                allowed.join(", ")
            ),
            None => format!("{name} must be one of {}", allowed.join(", ")),
        },
    );
    v.did_you_mean = suggestion.map(str::to_owned);
    violations.push(v);
    false
}

/// What the range check made of a number.
enum Range {
    /// Within the bounds, or not a number.
    Within,
    /// Out of range and clamped to this bound, with a warning.
    Clamped(Value),
    /// Out of range and refused, with a violation.
    Refused,
}

/// Checks a number against the field's bounds: clamps loudly (a warning), or refuses.
fn check_range(
    name: &str,
    spec: &FieldSpec,
    value: &Value,
    violations: &mut Vec<Violation>,
    warnings: &mut Vec<Warning>,
) -> Range {
    let Some(f) = value.as_f64() else {
        return Range::Within;
    };
    let below = spec.minimum.filter(|lo| f < *lo);
    let above = spec.maximum.filter(|hi| f > *hi);
    let Some(bound) = below.or(above) else {
        return Range::Within;
    };
    let reason = if below.is_some() {
        format!("minimum is {bound}")
    } else {
        format!("maximum is {bound}")
    };
    if spec.clamp {
        let applied = number_value(bound);
        warnings.push(Warning::ValueClamped {
            field: name.to_owned(),
            requested: value.clone(),
            applied: applied.clone(),
            reason,
        });
        return Range::Clamped(applied);
    }
    let mut v = Violation::new(
        "OUT_OF_RANGE",
        name,
        format!("{name} is {f}, out of range ({reason})"),
    );
    v.limit = number_value(bound).as_number().cloned();
    v.actual = value.as_number().cloned();
    violations.push(v);
    Range::Refused
}

/// Checks an array's items and an object's members against their specs, each reported at its
/// own path; the value with what passed.
fn check_nested(
    name: &str,
    spec: &FieldSpec,
    value: Value,
    strict: bool,
    violations: &mut Vec<Violation>,
    warnings: &mut Vec<Warning>,
) -> Value {
    match value {
        Value::Array(items) if spec.items.is_some() => {
            let item_spec = spec.items.as_deref().unwrap_or(spec);
            let checked: Vec<Value> = items
                .iter()
                .enumerate()
                .filter_map(|(i, item)| {
                    check_field(
                        &index_path(name, i),
                        item_spec,
                        item,
                        strict,
                        violations,
                        warnings,
                    )
                })
                .collect();
            Value::Array(checked)
        }
        Value::Object(members) => match &spec.fields {
            Some(fields) => Value::Object(check_object(
                name,
                fields,
                spec.allow_unknown,
                &members,
                strict,
                violations,
                warnings,
            )),
            None => Value::Object(members),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
    fn near_miss_key_is_rejected_with_suggestion() {
        let err = shell_schema()
            .validate(&json!({"command": "ls", "TimeoutSeconds": "1200"}))
            .unwrap_err();
        assert_eq!(err.violations.len(), 1);
        assert_eq!(err.violations[0].code, "UNKNOWN_FIELD");
        assert_eq!(
            err.violations[0].did_you_mean.as_deref(),
            Some("timeout_seconds")
        );
        assert!(err.to_string().contains("did you mean \"timeout_seconds\""));
    }

    #[test]
    fn unparseable_value_is_rejected_not_zeroed() {
        let err = shell_schema()
            .validate(&json!({"command": "ls", "timeout_seconds": "abc", "background": "yes"}))
            .unwrap_err();
        let codes: Vec<_> = err
            .violations
            .iter()
            .map(|v| (v.code, v.field.as_str()))
            .collect();
        assert_eq!(
            codes,
            vec![
                ("INVALID_VALUE", "background"),
                ("INVALID_VALUE", "timeout_seconds")
            ]
        );
        assert_eq!(err.to_envelope_error().code, "VALIDATION_ERROR");
    }

    #[test]
    fn exact_numeric_strings_are_accepted() {
        let ok = shell_schema()
            .validate(&json!({"command": "ls", "timeout_seconds": "120", "background": "false"}))
            .unwrap();
        assert_eq!(ok.args["timeout_seconds"], json!(120));
        assert_eq!(ok.args["background"], json!(false));
        assert!(ok.warnings.is_empty());
    }

    #[test]
    fn clamp_is_reported() {
        let ok = shell_schema()
            .validate(&json!({"command": "ls", "timeout_seconds": 1200}))
            .unwrap();
        assert_eq!(ok.args["timeout_seconds"], json!(600));
        assert_eq!(
            ok.warnings,
            vec![Warning::ValueClamped {
                field: "timeout_seconds".into(),
                requested: json!(1200),
                applied: json!(600),
                reason: "maximum is 600".into(),
            }]
        );
    }

    #[test]
    fn every_violation_is_listed() {
        let schema = Schema::new()
            .field("title", FieldSpec::string().max_length(10).required())
            .field("body", FieldSpec::string().max_bytes(255))
            .field("tags", FieldSpec::array().max_items(2));
        let err = schema
            .validate(&json!({"title": "t".repeat(11), "body": "é".repeat(200), "tags": [1, 2, 3]}))
            .unwrap_err();
        assert_eq!(err.violations.len(), 3);
        let env = err.to_envelope_error();
        assert_eq!(env.code, "FIELD_TOO_LARGE");
        assert_eq!(env.phase, Phase::Validation);
        assert_eq!(env.field.as_deref(), Some("body"));
        assert_eq!((env.limit, env.actual), (Some(255), Some(400)));
    }

    #[test]
    fn missing_required_and_wrong_type() {
        let err = shell_schema()
            .validate(&json!({"background": 1}))
            .unwrap_err();
        let codes: Vec<_> = err.violations.iter().map(|v| v.code).collect();
        assert_eq!(codes, vec!["WRONG_TYPE", "MISSING_FIELD"]);
        assert!(shell_schema().validate(&json!([1])).is_err());
    }

    #[test]
    fn enum_with_suggestion() {
        let schema = Schema::new().field("format", FieldSpec::string().one_of(["raw", "text"]));
        let err = schema.validate(&json!({"format": "txt"})).unwrap_err();
        assert_eq!(err.violations[0].did_you_mean.as_deref(), Some("text"));
    }

    #[test]
    fn schema_file_round_trip_and_errors() {
        let s = Schema::from_json(
            r#"{"fields": {"title": {"type": "string", "max_length": 80, "required": true},
                "body": {"max_bytes": 255}}, "allow_unknown": false}"#,
        )
        .unwrap();
        assert_eq!(s.fields["body"].max_bytes, Some(255));
        assert!(Schema::from_json(r#"{"fields": {"a": {"max_len": 3}}}"#).is_err());
        assert!(Schema::from_json(
            r#"{"fields": {"a": {"type": "integer", "minimum": 5, "maximum": 1}}}"#
        )
        .is_err());
    }

    #[test]
    fn nested_items_and_members_are_checked_at_their_paths() {
        let schema = Schema::from_json(
            r#"{"fields": {
                "labels": {"type": "array", "max_items": 5,
                           "items": {"type": "string", "max_length": 4}},
                "assignee": {"type": "object",
                             "fields": {"login": {"type": "string", "required": true},
                                        "limit": {"type": "integer", "maximum": 10, "clamp": true}}}
            }}"#,
        )
        .unwrap();
        let err = schema
            .validate(&json!({"labels": ["ok", "too long", 3],
                              "assignee": {"Login": "x", "limit": 50}}))
            .unwrap_err();
        let got: Vec<_> = err
            .violations
            .iter()
            .map(|v| (v.code, v.field.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("UNKNOWN_FIELD", "assignee.Login"),
                ("MISSING_FIELD", "assignee.login"),
                ("FIELD_TOO_LARGE", "labels[1]"),
                ("WRONG_TYPE", "labels[2]"),
            ]
        );
        assert_eq!(err.violations[0].did_you_mean.as_deref(), Some("login"));
        let ok = schema
            .validate(&json!({"labels": ["a"], "assignee": {"login": "x", "limit": "50"}}))
            .unwrap();
        assert_eq!(ok.args["assignee"]["limit"], json!(10));
        assert!(
            matches!(&ok.warnings[0], Warning::ValueClamped { field, .. } if field == "assignee.limit")
        );
        assert!(
            Schema::from_json(r#"{"fields": {"a": {"type": "string", "items": {}}}}"#).is_err()
        );
    }

    #[test]
    fn run_does_not_execute_refused_payloads() {
        let schema = Schema::new().field("body", FieldSpec::string().max_bytes(255));
        let mut written = false;
        let env = schema.run(&json!({"body": "x".repeat(500)}), |_| {
            written = true;
            Envelope::ok(Value::Null)
        });
        assert!(!written);
        assert!(!env.is_ok());
        assert_eq!(env.error().unwrap().code, "FIELD_TOO_LARGE");
    }
}
