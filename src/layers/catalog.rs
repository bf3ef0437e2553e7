//! The built-in catalog of known truncation layers, embedded from `catalog.json`.
//!
//! The catalog is parsed once, on first use, and shared for the life of the process. Its content is
//! checked by this module's tests (every entry parses, ids are unique, limits are positive), so a
//! parse failure at run time means a broken build, not bad input.

use std::fmt;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The unit a layer counts its limit in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// UTF-8 bytes.
    Bytes,
    /// Unicode code points (Python `len`, Rust `chars()`).
    Chars,
    /// UTF-16 code units (JavaScript `String.length`).
    Utf16Units,
    /// Tokens, by a tokenizer or an estimate (most layers estimate `bytes / 4`).
    Tokens,
    /// Lines.
    Lines,
    /// JSON nesting depth.
    Depth,
    /// Items: attributes, entries, runs.
    Items,
}

impl Unit {
    /// Every unit, in declaration order.
    pub const ALL: [Unit; 7] = [
        Unit::Bytes,
        Unit::Chars,
        Unit::Utf16Units,
        Unit::Tokens,
        Unit::Lines,
        Unit::Depth,
        Unit::Items,
    ];

    /// The name used in the catalog, on the command line and in configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Bytes => "bytes",
            Unit::Chars => "chars",
            Unit::Utf16Units => "utf16_units",
            Unit::Tokens => "tokens",
            Unit::Lines => "lines",
            Unit::Depth => "depth",
            Unit::Items => "items",
        }
    }

    /// The unit named `name`, as [`Unit::as_str`] spells it.
    pub fn parse(name: &str) -> Option<Unit> {
        Unit::ALL.into_iter().find(|u| u.as_str() == name)
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a layer's limit is compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The whole result (or a message, request, record or document carrying it: the result alone
    /// is then a lower bound of what the layer counts).
    PerResult,
    /// Every string inside the result, separately (JSON strings, keys included).
    PerString,
    /// The result as one attribute or traced field of a tracer or backend: applies only when the
    /// result travels as an attribute value.
    PerAttribute,
    /// Every line of the result, separately.
    PerLine,
}

impl Scope {
    /// Every scope, in declaration order.
    pub const ALL: [Scope; 4] = [
        Scope::PerResult,
        Scope::PerString,
        Scope::PerAttribute,
        Scope::PerLine,
    ];

    /// The name used in the catalog and in configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::PerResult => "per_result",
            Scope::PerString => "per_string",
            Scope::PerAttribute => "per_attribute",
            Scope::PerLine => "per_line",
        }
    }

    /// The scope named `name`, as [`Scope::as_str`] spells it.
    pub fn parse(name: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a layer does to a result over its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Cut, with a marker the model (or reader) can see.
    TruncateMarked,
    /// Cut with no marker: the loss is silent.
    TruncateSilent,
    /// Full result written elsewhere; a preview and a pointer delivered.
    SpillPreview,
    /// Full result written elsewhere; only a pointer delivered.
    SpillPointer,
    /// The whole result (or message) refused with an error.
    Reject,
    /// The value dropped without an error.
    Drop,
    /// Delivered unchanged, with a warning.
    Warn,
    /// Stored but not indexed (not searchable).
    NotIndexed,
    /// Over-limit behaviour not documented.
    Unknown,
}

impl Action {
    /// Every action, in declaration order.
    pub const ALL: [Action; 9] = [
        Action::TruncateMarked,
        Action::TruncateSilent,
        Action::SpillPreview,
        Action::SpillPointer,
        Action::Reject,
        Action::Drop,
        Action::Warn,
        Action::NotIndexed,
        Action::Unknown,
    ];

    /// The name used in the catalog and in configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::TruncateMarked => "truncate_marked",
            Action::TruncateSilent => "truncate_silent",
            Action::SpillPreview => "spill_preview",
            Action::SpillPointer => "spill_pointer",
            Action::Reject => "reject",
            Action::Drop => "drop",
            Action::Warn => "warn",
            Action::NotIndexed => "not_indexed",
            Action::Unknown => "unknown",
        }
    }

    /// The action named `name`, as [`Action::as_str`] spells it.
    pub fn parse(name: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.as_str() == name)
    }

    /// What the layer does to results over its limit, as the clause the over-ceiling alerts end
    /// their description with: only a layer that cuts says so, and a layer that only warns
    /// says nothing is cut. The fleet rule in `alerts/toolsize.rules.yml` says the same per
    /// `action` label (`tests/alert_texts.rs` checks it against this).
    pub fn over_limit(self) -> &'static str {
        match self {
            Action::TruncateMarked => "this layer cuts, with a marker the model sees",
            Action::TruncateSilent => "this layer cuts without a marker: the loss is silent",
            Action::SpillPreview => {
                "this layer spills: the model gets a preview and a pointer to the whole"
            }
            Action::SpillPointer => "this layer spills: the model gets only a pointer to the whole",
            Action::Reject => "this layer refuses with an error",
            Action::Drop => "this layer drops without an error",
            Action::Warn => "this layer only warns: nothing is cut",
            Action::NotIndexed => "this layer stores without indexing: nothing is cut",
            Action::Unknown => "what this layer does over its limit is not documented",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a layer sits between the tool and the model, or between the agent and the daemon.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LayerKind {
    /// Agent harness (what the model sees).
    Harness,
    /// Agent framework.
    Framework,
    /// MCP or RPC transport.
    Transport,
    /// Model provider API.
    ModelApi,
    /// JSON parser.
    Parser,
    /// Tracing SDK (what the daemon receives).
    Tracer,
    /// Telemetry collector.
    Collector,
    /// Tracing or log backend.
    Backend,
    /// Declared by the user.
    User,
}

/// One truncation layer: a limit, its unit and scope, and what happens over it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Layer {
    /// Stable identifier, e.g. `codex.tool-output.tokens`.
    pub id: String,
    /// The product applying the limit.
    pub product: String,
    /// Where the layer sits.
    pub layer: LayerKind,
    /// What the limit applies to, in the product's terms.
    pub applies_to: String,
    /// The limit, in `unit`.
    pub limit: u64,
    /// The unit of `limit`.
    pub unit: Unit,
    /// How the product counts, in its own terms.
    #[serde(default)]
    pub counting: Option<String>,
    /// What the limit is compared with.
    pub scope: Scope,
    /// The product's own granularity (`per_request`, `per_record`…) when finer than `scope` says.
    #[serde(default)]
    pub counted_over: Option<String>,
    /// What happens over the limit.
    pub action: Action,
    /// What part of a cut result is kept (`head`, `tail`, `head_tail_50_50`, `preview`, `none`…).
    #[serde(default)]
    pub keeps: Option<String>,
    /// What the model or reader gets instead, when known.
    #[serde(default)]
    pub visible_after: Option<String>,
    /// In-band markers the product leaves in a cut result (`N` stands for digits).
    #[serde(default)]
    pub markers: Vec<String>,
    /// The setting that moves the limit, when there is one.
    #[serde(default)]
    pub knob: Option<String>,
    /// The version or date since which the limit holds, when known.
    #[serde(default)]
    pub since: Option<String>,
    /// Public source of the fact (documentation page or source file).
    #[serde(default)]
    pub source: Option<String>,
    /// How the fact was checked: `src`, `doc`, `issue` or `user`.
    #[serde(default)]
    pub verified: Option<String>,
}

impl Layer {
    /// A user-defined layer with no catalog facts.
    pub fn user(
        id: impl Into<String>,
        limit: u64,
        unit: Unit,
        scope: Scope,
        action: Action,
    ) -> Layer {
        Layer {
            id: id.into(),
            product: "user".to_owned(),
            layer: LayerKind::User,
            applies_to: "tool result".to_owned(),
            limit,
            unit,
            counting: None,
            scope,
            counted_over: None,
            action,
            keeps: None,
            visible_after: None,
            markers: Vec::new(),
            knob: None,
            since: None,
            source: None,
            verified: Some("user".to_owned()),
        }
    }
}

const CATALOG_JSON: &str = include_str!("catalog.json");

/// Parses a catalog document and checks its invariants.
fn load(text: &str) -> Result<Vec<Layer>, String> {
    let layers: Vec<Layer> = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut ids = std::collections::HashSet::new();
    for layer in &layers {
        if layer.limit == 0 {
            return Err(format!("layer {} has a zero limit", layer.id));
        }
        if layer.id.is_empty() || !ids.insert(layer.id.as_str()) {
            return Err(format!("layer id {:?} is empty or duplicated", layer.id));
        }
    }
    Ok(layers)
}

/// The built-in catalog: every known layer, in catalog order.
///
/// # Panics
///
/// Never in a tested build: the embedded catalog is validated by this module's unit tests.
pub fn catalog() -> &'static [Layer] {
    static CATALOG: OnceLock<Vec<Layer>> = OnceLock::new();
    CATALOG.get_or_init(|| {
        load(CATALOG_JSON).expect("the embedded layer catalog is valid (checked by unit tests)")
    })
}

/// The catalog layer with id `id`.
pub fn find(id: &str) -> Option<&'static Layer> {
    catalog().iter().find(|l| l.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_catalog_loads_with_unique_ids_and_positive_limits() {
        let layers = load(CATALOG_JSON).unwrap();
        assert!(layers.len() >= 70, "{} layers", layers.len());
        assert_eq!(catalog().len(), layers.len());
        for l in &layers {
            assert!(l.limit > 0);
            assert!(Unit::parse(l.unit.as_str()).is_some());
            assert!(Scope::parse(l.scope.as_str()).is_some());
            assert!(l.source.as_deref().is_some_and(|s| !s.trim().is_empty()));
            assert!(matches!(
                l.verified.as_deref(),
                Some("src" | "doc" | "issue")
            ));
            assert_ne!(l.layer, LayerKind::User);
        }
        // Every unit the catalog counts in is known, and each one is used.
        for u in Unit::ALL {
            assert!(layers.iter().any(|l| l.unit == u), "no layer counts in {u}");
        }
    }

    /// docs/layers.md gives the size of the catalog ("holds N layers"): it is this one's.
    #[test]
    fn the_documented_layer_count_is_the_catalogs() {
        let docs = include_str!("../../docs/layers.md");
        let stated = format!("holds {} layers", catalog().len());
        assert!(docs.contains(&stated), "docs/layers.md must say {stated:?}");
    }

    #[test]
    fn unknown_units_scopes_and_duplicates_are_errors() {
        let entry = |id: &str, unit: &str, scope: &str, limit: u64| {
            format!(
                r#"{{"id":"{id}","product":"p","layer":"harness","applies_to":"a","limit":{limit},"unit":"{unit}","scope":"{scope}","action":"reject"}}"#
            )
        };
        assert!(load(&format!("[{}]", entry("a", "bytes", "per_result", 1))).is_ok());
        assert!(load(&format!("[{}]", entry("a", "words", "per_result", 1))).is_err());
        assert!(load(&format!("[{}]", entry("a", "bytes", "per_galaxy", 1))).is_err());
        assert!(load(&format!("[{}]", entry("a", "bytes", "per_result", 0))).is_err());
        let dup = format!(
            "[{},{}]",
            entry("a", "bytes", "per_result", 1),
            entry("a", "chars", "per_result", 2)
        );
        assert!(load(&dup).is_err());
    }

    #[test]
    fn javascript_lengths_count_utf16_units() {
        let cline = find("cline.message-builder").unwrap();
        assert_eq!(
            (cline.limit, cline.unit, cline.scope),
            (8000, Unit::Utf16Units, Scope::PerString)
        );
        let codex = find("codex.tool-output.tokens").unwrap();
        assert_eq!(codex.unit, Unit::Tokens);
    }
}
