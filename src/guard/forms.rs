//! Reading the schemas users already have: bare JSON Schema, MCP tool definitions, OpenAI
//! function and tool definitions, Anthropic tools, and parameter lists, as well as toolsize's own
//! format ([`crate::guard::schema`]).
//!
//! [`read`] looks at the document's shape and converts it to a [`Schema`]:
//!
//! | form | recognised by | arguments schema |
//! |---|---|---|
//! | toolsize | a `fields` object (keys `command`, `fields`, `allow_unknown`, `strict` only) | itself |
//! | MCP tool (`tools/list` entry) | `inputSchema` | `inputSchema` |
//! | Anthropic tool | `input_schema` | `input_schema` |
//! | OpenAI Chat Completions tool | `{"type": "function", "function": {…}}` | `function.parameters` |
//! | OpenAI function / Responses tool | a `parameters` object | `parameters` |
//! | parameter list | an array, or a `parameters` array, of `{"name": …, "type": …, "max_length": …}` | the list |
//! | bare JSON Schema | `properties`, `"type": "object"` or `$schema` | itself |
//!
//! # JSON Schema: what is enforced
//!
//! `type` (one type, or one type plus `"null"`), `properties`, `required`,
//! `additionalProperties`, `maxLength` (code points, as JSON Schema counts), `maxItems`,
//! `minimum` / `maximum`, `enum` and `const` of strings, `items` (one schema), nested objects and
//! arrays, local `$ref`s (`#/$defs/…`, `#/definitions/…`), and `anyOf` / `oneOf` / `allOf` with a
//! single non-null branch (what code generators emit for optional fields). The documented
//! extension keyword **`x-max-bytes`** limits a string's UTF-8 bytes (or another value's compact
//! JSON). Other keywords (`description`, `default`, `pattern`, `format`, `minLength`, …) are
//! accepted and not enforced; a union of several types is accepted as any value.
//!
//! Two readings are stricter than JSON Schema, on purpose:
//!
//! * **Unknown keys are refused** unless the object says `"additionalProperties": true` (or gives
//!   a schema for them): a misspelt argument that a server silently ignores is the loss toolsize
//!   exists to catch, and most generated schemas leave `additionalProperties` out. An object that
//!   declares no `properties` at all accepts any members.
//! * **Types are never coerced**: a schema read from JSON Schema is `strict`, so `"5"` for an
//!   integer is `WRONG_TYPE`, as JSON Schema says. (toolsize's own format and parameter lists keep
//!   accepting a string holding exactly a number or boolean, normalised.)
//!
//! Conversion is one walk of the schema, bounded in depth ([`MAX_DEPTH`]) so a cyclic `$ref`
//! cannot loop; it never panics, and a document it cannot read is a [`SchemaError`] naming the
//! forms it accepts.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::guard::json_truncate::key_path;
use crate::guard::schema::{FieldSpec, FieldType, Schema, SchemaError};

/// Deepest nesting of schemas (and `$ref` hops) followed before the schema is refused.
pub const MAX_DEPTH: usize = 64;

/// The documented extension keyword for a byte limit in JSON Schema.
pub const MAX_BYTES_KEYWORD: &str = "x-max-bytes";

/// Which form a schema document was read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// toolsize's own `{"fields": {…}}` format.
    Toolsize,
    /// A bare JSON Schema of the arguments object.
    JsonSchema,
    /// An MCP tool definition (`inputSchema`).
    McpTool,
    /// An Anthropic tool definition (`input_schema`).
    AnthropicTool,
    /// An OpenAI Chat Completions tool (`{"type": "function", "function": {…}}`).
    OpenAiTool,
    /// An OpenAI function definition, or a Responses API function tool (`parameters`).
    OpenAiFunction,
    /// A list of `{"name": …, "type": …, "max_length": …}` parameters.
    ParameterList,
}

impl Form {
    /// A short name for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Form::Toolsize => "toolsize",
            Form::JsonSchema => "json-schema",
            Form::McpTool => "mcp-tool",
            Form::AnthropicTool => "anthropic-tool",
            Form::OpenAiTool => "openai-tool",
            Form::OpenAiFunction => "openai-function",
            Form::ParameterList => "parameter-list",
        }
    }
}

const OWN_KEYS: [&str; 4] = ["command", "fields", "allow_unknown", "strict"];

const ACCEPTED: &str = "expected toolsize's {\"fields\": …}, a JSON Schema of an object, an MCP tool (inputSchema), an OpenAI function or tool (parameters), an Anthropic tool (input_schema), or a list of {\"name\", \"type\", …} parameters";

/// Reads any supported schema document (see the [module docs](self)) and says which form it was.
pub fn read(doc: &Value) -> Result<(Schema, Form), SchemaError> {
    let name = |m: &Map<String, Value>| m.get("name").and_then(Value::as_str).map(str::to_owned);
    match doc {
        Value::Array(items) => Ok((parameter_list(None, items)?, Form::ParameterList)),
        Value::Object(m) => {
            let own = m.contains_key("fields") && m.keys().all(|k| OWN_KEYS.contains(&k.as_str()));
            if own {
                let schema: Schema =
                    serde_json::from_value(doc.clone()).map_err(|e| SchemaError(e.to_string()))?;
                return Ok((schema, Form::Toolsize));
            }
            if let Some(s) = m.get("inputSchema") {
                return Ok((json_schema(name(m).as_deref(), s)?, Form::McpTool));
            }
            if let Some(s) = m.get("input_schema") {
                return Ok((json_schema(name(m).as_deref(), s)?, Form::AnthropicTool));
            }
            if let Some(Value::Object(f)) = m.get("function") {
                let params = f.get("parameters").unwrap_or(&Value::Null);
                let schema = if params.is_null() {
                    no_arguments(name(f))
                } else {
                    json_schema(name(f).as_deref(), params)?
                };
                return Ok((schema, Form::OpenAiTool));
            }
            match m.get("parameters") {
                Some(Value::Array(items)) => {
                    let command = name(m)
                        .or_else(|| m.get("command").and_then(Value::as_str).map(str::to_owned));
                    return Ok((parameter_list(command, items)?, Form::ParameterList));
                }
                Some(params @ Value::Object(_)) => {
                    return Ok((
                        json_schema(name(m).as_deref(), params)?,
                        Form::OpenAiFunction,
                    ));
                }
                _ => {}
            }
            let object_schema = m.contains_key("properties")
                || m.get("type").and_then(Value::as_str) == Some("object")
                || m.contains_key("$schema");
            if object_schema {
                return Ok((json_schema(None, doc)?, Form::JsonSchema));
            }
            if m.contains_key("fields") {
                // The own format with a stray key: let serde name it.
                let schema: Schema =
                    serde_json::from_value(doc.clone()).map_err(|e| SchemaError(e.to_string()))?;
                return Ok((schema, Form::Toolsize));
            }
            Err(SchemaError(format!("not a schema this reads ({ACCEPTED})")))
        }
        _ => Err(SchemaError(format!(
            "a schema is a JSON object or array ({ACCEPTED})"
        ))),
    }
}

fn no_arguments(command: Option<String>) -> Schema {
    Schema {
        command,
        strict: true,
        ..Schema::default()
    }
}

/// Converts the JSON Schema of a tool's arguments object. `command` names the tool in messages.
pub fn json_schema(command: Option<&str>, schema: &Value) -> Result<Schema, SchemaError> {
    let root = schema;
    let spec = spec_of(schema, root, "", 0)?;
    if !matches!(spec.kind, FieldType::Object | FieldType::Any) {
        return Err(SchemaError(format!(
            "the arguments schema must describe an object, not {}",
            spec.kind
        )));
    }
    Ok(Schema {
        command: command.map(str::to_owned),
        allow_unknown: spec.fields.is_none() || spec.allow_unknown,
        fields: spec.fields.unwrap_or_default(),
        strict: true,
    })
}

fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    root.pointer(pointer)
}

fn kind_named(name: &str) -> Option<FieldType> {
    Some(match name {
        "string" => FieldType::String,
        "integer" => FieldType::Integer,
        "number" => FieldType::Number,
        "boolean" => FieldType::Boolean,
        "array" => FieldType::Array,
        "object" => FieldType::Object,
        "null" => FieldType::Any,
        _ => return None,
    })
}

fn is_null_schema(v: &Value) -> bool {
    v.get("type").and_then(Value::as_str) == Some("null")
}

fn limit(m: &Map<String, Value>, key: &str, path: &str) -> Result<Option<u64>, SchemaError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64().or_else(|| {
            v.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                .map(|f| f as u64)
        }) {
            Some(n) => Ok(Some(n)),
            None => Err(SchemaError(format!(
                "{}: {key} must be a non-negative integer",
                at(path)
            ))),
        },
    }
}

fn at(path: &str) -> String {
    if path.is_empty() {
        "the arguments schema".to_owned()
    } else {
        format!("property {path}")
    }
}

fn spec_of(node: &Value, root: &Value, path: &str, depth: usize) -> Result<FieldSpec, SchemaError> {
    if depth > MAX_DEPTH {
        return Err(SchemaError(format!(
            "{}: nested (or $ref chained) deeper than {MAX_DEPTH}",
            at(path)
        )));
    }
    let m = match node {
        Value::Object(m) => m,
        // `true` (anything) and `false` (nothing) carry no limits to enforce.
        Value::Bool(_) => return Ok(FieldSpec::default()),
        _ => {
            return Err(SchemaError(format!(
                "{}: a schema must be an object",
                at(path)
            )))
        }
    };
    if let Some(reference) = m.get("$ref").and_then(Value::as_str) {
        let target = resolve(root, reference).ok_or_else(|| {
            SchemaError(format!(
                "{}: $ref {reference:?} does not point into this document",
                at(path)
            ))
        })?;
        return spec_of(target, root, path, depth + 1);
    }
    for union in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = m.get(union) {
            let real: Vec<&Value> = branches.iter().filter(|b| !is_null_schema(b)).collect();
            if real.len() == 1 && !m.contains_key("type") {
                return spec_of(real[0], root, path, depth + 1);
            }
            if !m.contains_key("type") {
                return Ok(FieldSpec::default());
            }
        }
    }
    let kind = kind_of(m, path)?;
    let mut spec = FieldSpec::of(kind);
    if matches!(kind, FieldType::String | FieldType::Any) {
        spec.max_length = limit(m, "maxLength", path)?;
    }
    spec.max_bytes = limit(m, MAX_BYTES_KEYWORD, path)?;
    if matches!(kind, FieldType::Array | FieldType::Any) {
        spec.max_items = limit(m, "maxItems", path)?;
        if let Some(items @ (Value::Object(_) | Value::Bool(_))) = m.get("items") {
            let item = spec_of(items, root, &format!("{path}[]"), depth + 1)?;
            if item != FieldSpec::default() {
                spec.items = Some(Box::new(item));
            }
        }
    }
    if matches!(
        kind,
        FieldType::Integer | FieldType::Number | FieldType::Any
    ) {
        (spec.minimum, spec.maximum) = range_of(m, path)?;
    }
    if let Some(Value::Array(values)) = m.get("enum") {
        let strings: Option<Vec<String>> = values
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect();
        spec.allowed = strings;
    } else if let Some(Value::String(c)) = m.get("const") {
        spec.allowed = Some(vec![c.clone()]);
    }
    if matches!(kind, FieldType::Object | FieldType::Any) {
        if let Some(props) = m.get("properties") {
            spec.fields = Some(properties_of(props, m, root, path, depth)?);
            spec.allow_unknown = matches!(
                m.get("additionalProperties"),
                Some(Value::Bool(true) | Value::Object(_))
            );
        }
    }
    Ok(spec)
}

/// The field type a schema node declares: its `type` (a list with one non-null type is that
/// type, others any), else an object when it has properties, an array when it has items, else
/// any.
fn kind_of(m: &Map<String, Value>, path: &str) -> Result<FieldType, SchemaError> {
    Ok(match m.get("type") {
        Some(Value::String(t)) => {
            kind_named(t).ok_or_else(|| SchemaError(format!("{}: unknown type {t:?}", at(path))))?
        }
        Some(Value::Array(types)) => {
            let real: Vec<&str> = types
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null")
                .collect();
            match real.as_slice() {
                [one] => kind_named(one)
                    .ok_or_else(|| SchemaError(format!("{}: unknown type {one:?}", at(path))))?,
                _ => FieldType::Any,
            }
        }
        Some(_) => {
            return Err(SchemaError(format!(
                "{}: type must be a string or a list of strings",
                at(path)
            )))
        }
        None if m.contains_key("properties") => FieldType::Object,
        None if m.contains_key("items") => FieldType::Array,
        None => FieldType::Any,
    })
}

/// The node's `minimum` and `maximum`, refused when the minimum is above the maximum.
fn range_of(m: &Map<String, Value>, path: &str) -> Result<(Option<f64>, Option<f64>), SchemaError> {
    let minimum = m.get("minimum").and_then(Value::as_f64);
    let maximum = m.get("maximum").and_then(Value::as_f64);
    if let (Some(lo), Some(hi)) = (minimum, maximum) {
        if lo > hi {
            return Err(SchemaError(format!(
                "{}: minimum {lo} is above maximum {hi}",
                at(path)
            )));
        }
    }
    Ok((minimum, maximum))
}

/// The fields of an object node's `properties`, each at its own path, those its `required`
/// lists marked required.
fn properties_of(
    props: &Value,
    m: &Map<String, Value>,
    root: &Value,
    path: &str,
    depth: usize,
) -> Result<BTreeMap<String, FieldSpec>, SchemaError> {
    let Value::Object(props) = props else {
        return Err(SchemaError(format!(
            "{}: properties must be an object",
            at(path)
        )));
    };
    let mut fields = BTreeMap::new();
    for (name, sub) in props {
        let sub_path = key_path(path, name);
        fields.insert(name.clone(), spec_of(sub, root, &sub_path, depth + 1)?);
    }
    if let Some(Value::Array(required)) = m.get("required") {
        for name in required.iter().filter_map(Value::as_str) {
            fields
                .entry(name.to_owned())
                .or_insert_with(FieldSpec::default)
                .required = true;
        }
    }
    Ok(fields)
}

/// Converts a list of `{"name": …, "type": …, "max_length": …}` parameters: each entry is a
/// field spec of toolsize's own format (see [`crate::guard::schema`]) plus its `name` and an
/// optional `description`.
fn parameter_list(command: Option<String>, items: &[Value]) -> Result<Schema, SchemaError> {
    let mut fields = BTreeMap::new();
    for (i, item) in items.iter().enumerate() {
        let Value::Object(m) = item else {
            return Err(SchemaError(format!("parameter {i} must be an object")));
        };
        let Some(name) = m.get("name").and_then(Value::as_str) else {
            return Err(SchemaError(format!("parameter {i} has no \"name\"")));
        };
        let mut rest = m.clone();
        rest.remove("name");
        rest.remove("description");
        let spec: FieldSpec = serde_json::from_value(Value::Object(rest))
            .map_err(|e| SchemaError(format!("parameter {name:?}: {e}")))?;
        if fields.insert(name.to_owned(), spec).is_some() {
            return Err(SchemaError(format!("parameter {name:?} is declared twice")));
        }
    }
    Ok(Schema {
        command,
        fields,
        allow_unknown: false,
        strict: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn codes(schema: &Schema, payload: Value) -> Vec<(&'static str, String)> {
        match schema.validate(&payload) {
            Ok(_) => Vec::new(),
            Err(e) => e
                .violations
                .into_iter()
                .map(|v| (v.code, v.field))
                .collect(),
        }
    }

    fn args_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "title": {"type": "string", "maxLength": 8},
                "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                "format": {"type": "string", "enum": ["raw", "text"]},
                "body": {"type": "string", "x-max-bytes": 4},
                "owner": {"$ref": "#/$defs/Owner"},
                "note": {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "null"}]}
            },
            "required": ["title"],
            "$defs": {"Owner": {"type": "object", "properties": {"login": {"type": "string"}},
                                "required": ["login"]}}
        })
    }

    #[test]
    fn every_form_reads_to_the_same_checks() {
        let s = args_schema();
        let docs = [
            (s.clone(), Form::JsonSchema),
            (json!({"name": "t", "inputSchema": s}), Form::McpTool),
            (json!({"name": "t", "input_schema": s}), Form::AnthropicTool),
            (
                json!({"type": "function", "function": {"name": "t", "parameters": s}}),
                Form::OpenAiTool,
            ),
            (json!({"name": "t", "parameters": s}), Form::OpenAiFunction),
            (
                json!({"type": "function", "name": "t", "parameters": s}),
                Form::OpenAiFunction,
            ),
        ];
        for (doc, form) in docs {
            let (schema, got) = read(&doc).unwrap();
            assert_eq!(got, form);
            assert!(schema.strict);
            assert!(codes(&schema, json!({"title": "ok"})).is_empty());
            let bad = json!({
                "titel": "x", "tags": ["a", "b", "c"], "limit": "5", "format": "txt",
                "body": "ééé", "owner": {}, "note": "long"
            });
            assert_eq!(
                codes(&schema, bad),
                vec![
                    ("UNKNOWN_FIELD", "titel".to_owned()),
                    ("FIELD_TOO_LARGE", "body".to_owned()),
                    ("INVALID_VALUE", "format".to_owned()),
                    ("WRONG_TYPE", "limit".to_owned()),
                    ("FIELD_TOO_LARGE", "note".to_owned()),
                    ("MISSING_FIELD", "owner.login".to_owned()),
                    ("FIELD_TOO_LARGE", "tags".to_owned()),
                    ("MISSING_FIELD", "title".to_owned()),
                ]
            );
        }
    }

    #[test]
    fn parameter_lists_as_the_seeds_write_them() {
        let list = json!([
            {"name": "title", "type": "string", "max_length": 64},
            {"name": "tags", "type": "array", "max_items": 10}
        ]);
        let (schema, form) = read(&list).unwrap();
        assert_eq!(form, Form::ParameterList);
        assert_eq!(
            codes(
                &schema,
                json!({"title": "t".repeat(65), "tags": vec![0; 11]})
            ),
            vec![
                ("FIELD_TOO_LARGE", "tags".to_owned()),
                ("FIELD_TOO_LARGE", "title".to_owned())
            ]
        );
        let (schema, _) = read(&json!({"name": "issue", "parameters": list})).unwrap();
        assert_eq!(schema.command.as_deref(), Some("issue"));
        assert!(read(&json!([{"type": "string"}])).is_err());
        assert!(read(&json!([{"name": "a", "max_len": 3}])).is_err());
    }

    #[test]
    fn additional_properties_and_empty_objects() {
        let open = read(&json!({"type": "object", "properties": {"a": {}},
                                 "additionalProperties": true}))
        .unwrap()
        .0;
        assert!(codes(&open, json!({"b": 1})).is_empty());
        let closed = read(&json!({"type": "object", "properties": {}}))
            .unwrap()
            .0;
        assert_eq!(codes(&closed, json!({"b": 1}))[0].0, "UNKNOWN_FIELD");
        let anything = read(&json!({"type": "object"})).unwrap().0;
        assert!(codes(&anything, json!({"b": 1})).is_empty());
    }

    #[test]
    fn unreadable_documents_say_what_is_accepted() {
        let e = read(&json!({"hello": 1})).unwrap_err();
        assert!(e.to_string().contains("inputSchema"), "{e}");
        assert!(read(&json!("x")).is_err());
        assert!(read(&json!({"type": "string"})).is_err());
        assert!(read(&json!({"properties": {"a": {"type": "strng"}}})).is_err());
        assert!(read(&json!({"properties": {"a": {"$ref": "#/nope"}}})).is_err());
        // A cyclic reference is refused, not followed forever.
        let cyclic = json!({"properties": {"a": {"$ref": "#/properties/a"}}});
        assert!(read(&cyclic).is_err());
        // The own format keeps its unknown-key errors.
        assert!(read(&json!({"fields": {"a": {"max_len": 3}}})).is_err());
        assert!(read(&json!({"fields": {}, "extra": 1})).is_err());
    }
}
