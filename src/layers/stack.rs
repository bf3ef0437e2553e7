//! The stack: the layers a deployment declares, their effective limits, and per-result verdicts.
//!
//! A [`Stack`] is resolved once, at start, from up to three [`StackConfig`]s (command-line flags,
//! environment, configuration file) over the built-in default; resolution fails on an unknown
//! layer id (with a "did you mean") or a zero limit, never at verdict time. Each layer's limit is
//! converted to bytes at resolution, and the layers are pre-sorted by that byte limit, so
//! [`Stack::verdict`] is a loop of integer comparisons that allocates only when a layer cuts.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde::{Deserialize, Serialize};

use super::catalog::{self, Action, Layer, Scope, Unit};
use super::convert::{limit_in_bytes, measures_for, value_for, ByteLimit, ResultMeasures};
use crate::measure::Measures;
use crate::origin::Origin;

/// The default ceiling when no layer is named: 16 KiB.
pub const DEFAULT_CEILING_BYTES: u64 = 16 * 1024;

/// The id of toolsize's own default layer (a byte ceiling on the whole result).
pub const DEFAULT_LAYER_ID: &str = "default";

/// Environment variable naming the stack: `id,id,…`, each optionally `id=limit`.
pub const ENV_STACK: &str = "TOOLSIZE_STACK";

/// Environment variable setting the default layer's byte ceiling.
pub const ENV_CEILING_BYTES: &str = "TOOLSIZE_CEILING_BYTES";

/// The `[layers]` key of the default layer's byte ceiling ([`StackConfig::ceiling_bytes`]), as
/// an error names it.
pub(crate) const KEY_CEILING_BYTES: &str = "ceiling_bytes";

/// A layer declared by the user.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomLayer {
    /// Its id; must not clash with a catalog id or `default`.
    pub name: String,
    /// The limit, in `unit`.
    pub limit: u64,
    /// The unit of `limit`.
    pub unit: Unit,
    /// What the limit is compared with (default `per_result`).
    #[serde(default = "default_scope")]
    pub scope: Scope,
    /// What happens over the limit (default `unknown`).
    #[serde(default = "default_action")]
    pub action: Action,
}

fn default_scope() -> Scope {
    Scope::PerResult
}

fn default_action() -> Action {
    Action::Unknown
}

/// One source's stack settings: the `[layers]` table of the configuration file, the environment,
/// or the command-line flags.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StackConfig {
    /// Layer ids making up the stack, in order (catalog ids, custom names or `default`). Empty:
    /// not set here. The highest-precedence source that names ids decides the whole list.
    #[serde(default, rename = "stack")]
    pub ids: Vec<String>,
    /// The default layer's byte ceiling; setting it keeps the default layer in the stack.
    #[serde(default)]
    pub ceiling_bytes: Option<u64>,
    /// Limit overrides by layer id, in the layer's own unit; merged key by key.
    #[serde(default)]
    pub overrides: BTreeMap<String, u64>,
    /// Layers declared by the user; merged by name. Always part of the stack.
    #[serde(default)]
    pub custom: Vec<CustomLayer>,
    /// The stacks of particular services, by `service.name`: layer ids (catalog ids, custom
    /// names or `default`) at the limits the rest of this configuration gives them. A service
    /// named here is held to its own stack instead of the stack above (the collector holds
    /// known coding agents to theirs unless named here).
    #[serde(default)]
    pub services: BTreeMap<String, Vec<String>>,
}

impl StackConfig {
    /// Whether this source sets nothing.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
            && self.ceiling_bytes.is_none()
            && self.overrides.is_empty()
            && self.custom.is_empty()
            && self.services.is_empty()
    }

    /// Parses a stack list as the `--stack` flag and [`ENV_STACK`] take it: ids separated by
    /// commas, each optionally `id=limit` to override its limit. Blank items are ignored.
    pub fn parse_list(text: &str) -> Result<StackConfig, StackError> {
        let mut config = StackConfig::default();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (id, limit) = match item.split_once('=') {
                Some((id, limit)) => (id.trim(), Some(limit.trim())),
                None => (item, None),
            };
            if let Some(limit) = limit {
                let n = parse_limit(limit).map_err(|_| StackError::InvalidLimit {
                    what: id.to_owned(),
                    value: limit.to_owned(),
                })?;
                config.overrides.insert(id.to_owned(), n);
            }
            config.ids.push(id.to_owned());
        }
        Ok(config)
    }

    /// The stack settings in an environment (a pure function of the map given, so it is testable):
    /// [`ENV_STACK`] and [`ENV_CEILING_BYTES`]. `None` when neither is set (or both are blank).
    pub fn from_env(env: &HashMap<String, String>) -> Result<Option<StackConfig>, StackError> {
        let mut config = match env.get(ENV_STACK) {
            Some(list) => StackConfig::parse_list(list)?,
            None => StackConfig::default(),
        };
        if let Some(value) = env.get(ENV_CEILING_BYTES).filter(|v| !v.trim().is_empty()) {
            let n = parse_limit(value).map_err(|_| StackError::InvalidLimit {
                what: ENV_CEILING_BYTES.to_owned(),
                value: value.clone(),
            })?;
            config.ceiling_bytes = Some(n);
        }
        Ok((!config.is_empty()).then_some(config))
    }
}

/// The one parser of a layer's limit given as text (an `id=limit` of a stack list, the default
/// layer's ceiling from [`ENV_CEILING_BYTES`], or the collector's variable and flag): a whole
/// number above 0.
pub(crate) fn parse_limit(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{text:?}: expected a whole number above 0")),
    }
}

/// Why a stack could not be resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StackError {
    /// A layer id that is neither in the catalog, nor a custom layer, nor `default`.
    UnknownId {
        /// The id as given.
        id: String,
        /// The closest known id, if one is close.
        suggestion: Option<String>,
    },
    /// A limit that is not a positive integer.
    InvalidLimit {
        /// The layer id or variable it was given for.
        what: String,
        /// The value as given.
        value: String,
    },
    /// A custom layer whose name is a catalog id, `default`, or declared twice in one source.
    DuplicateName(String),
    /// A custom layer name that is empty, longer than [`MAX_LAYER_NAME_BYTES`], or holds control
    /// or format characters (it becomes a `layer` label and is shown on the status page).
    InvalidName(String),
}

/// Longest custom layer name, in bytes.
pub const MAX_LAYER_NAME_BYTES: usize = 128;

impl fmt::Display for StackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StackError::UnknownId { id, suggestion } => {
                write!(f, "unknown layer id {id:?}")?;
                match suggestion {
                    Some(s) => write!(f, "; did you mean {s:?}?"),
                    None => write!(f, "; `toolsize layers` lists the known ids"),
                }
            }
            StackError::InvalidLimit { what, value } => {
                write!(
                    f,
                    "invalid limit {value:?} for {what}: expected a positive integer"
                )
            }
            StackError::DuplicateName(name) => write!(
                f,
                "custom layer name {name:?} is already a layer id; choose another name"
            ),
            StackError::InvalidName(name) => write!(
                f,
                "custom layer name {name:?} must be 1 to {MAX_LAYER_NAME_BYTES} bytes without \
                 control or format characters"
            ),
        }
    }
}

impl std::error::Error for StackError {}

/// One layer of a resolved stack, with its effective limit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StackLayer {
    /// The layer's facts (its `limit` is the catalog's or the declared one).
    pub layer: Layer,
    /// The effective limit, in `layer.unit`.
    pub limit: u64,
    /// Where the effective limit came from.
    pub source: Origin,
    /// The effective limit converted to bytes; `None` for depth and item limits.
    pub limit_bytes: Option<ByteLimit>,
}

impl StackLayer {
    /// `layer` at an effective `limit` (in `layer.unit`) from `source`.
    pub fn new(layer: Layer, limit: u64, source: Origin) -> StackLayer {
        StackLayer {
            limit_bytes: limit_in_bytes(limit, layer.unit),
            layer,
            limit,
            source,
        }
    }

    /// The layer's id.
    pub fn id(&self) -> &str {
        &self.layer.id
    }
}

/// The weakest layer's limit in bytes: the ceiling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Ceiling<'a> {
    /// The weakest layer's id.
    pub layer_id: &'a str,
    /// Its limit converted to bytes.
    pub bytes: u64,
    /// Whether the conversion is an estimate.
    pub estimated: bool,
    /// Where its limit came from.
    pub source: Origin,
}

/// One layer that would cut a result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Cut<'a> {
    /// The layer's id.
    pub layer_id: &'a str,
    /// The unit compared.
    pub unit: Unit,
    /// The scope compared.
    pub scope: Scope,
    /// What the layer does over its limit.
    pub action: Action,
    /// The effective limit, in `unit`.
    pub limit: u64,
    /// The result's size in `unit` and `scope`.
    pub value: u64,
    /// Whether `value` was estimated.
    pub estimated: bool,
    /// How far over: `value - limit` (always positive).
    pub margin: u64,
    /// The limit in bytes, when it has one.
    pub limit_bytes: Option<u64>,
}

/// Every layer of a stack that would cut one result.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Verdict<'a> {
    /// The cuts, weakest first: ascending limit in bytes, layers without one last, ties in stack
    /// order. Empty (and unallocated) when nothing cuts.
    pub cuts: Vec<Cut<'a>>,
    /// The layer that cuts first: the cut with the smallest limit in bytes.
    pub weakest: Option<Cut<'a>>,
}

/// The resolved stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stack {
    layers: Vec<StackLayer>,
    /// Indices into `layers`, weakest first (see [`Verdict::cuts`]).
    order: Vec<usize>,
}

impl Default for Stack {
    /// The default stack: one `default` layer of [`DEFAULT_CEILING_BYTES`].
    fn default() -> Stack {
        Stack::from_layers(vec![default_layer(DEFAULT_CEILING_BYTES, Origin::Default)])
    }
}

fn default_layer(limit: u64, source: Origin) -> StackLayer {
    let mut layer = Layer::user(
        DEFAULT_LAYER_ID,
        limit,
        Unit::Bytes,
        Scope::PerResult,
        Action::Warn,
    );
    layer.product = "toolsize".to_owned();
    layer.applies_to = "every tool result (toolsize's own ceiling)".to_owned();
    layer.verified = None;
    StackLayer::new(layer, limit, source)
}

impl Stack {
    /// A stack of exactly these layers, in this order (each `limit_bytes` is recomputed from its
    /// limit and unit).
    pub fn from_layers(mut layers: Vec<StackLayer>) -> Stack {
        for l in &mut layers {
            l.limit_bytes = limit_in_bytes(l.limit, l.layer.unit);
        }
        let mut order: Vec<usize> = (0..layers.len()).collect();
        // Stable sort: ties keep stack order.
        order.sort_by_key(|&i| layers[i].limit_bytes.map_or(u64::MAX, |b| b.bytes));
        order.sort_by_key(|&i| layers[i].limit_bytes.is_none());
        Stack { layers, order }
    }

    /// Resolves the stack from the flag, environment and file settings (each optional), with
    /// precedence flag > env > file > default:
    ///
    /// * the layer list comes from the highest-precedence source naming ids; with none, the
    ///   stack is the custom layers, or, with none either, the `default` layer (a custom layer
    ///   is in the stack when no source names ids or when the list names it; one the list
    ///   leaves out can still be named by `[layers.services]`);
    /// * overrides, `ceiling_bytes` and custom layers merge key by key, the higher source winning;
    /// * setting `ceiling_bytes` anywhere keeps the `default` layer in the stack (appended last).
    ///
    /// Every id named in any source must be known, in every source, even one that loses.
    pub fn resolve(
        flag: Option<&StackConfig>,
        env: Option<&StackConfig>,
        file: Option<&StackConfig>,
    ) -> Result<Stack, StackError> {
        let sources: Vec<(Origin, &StackConfig)> = [
            (Origin::Flag, flag),
            (Origin::Env, env),
            (Origin::File, file),
        ]
        .into_iter()
        .filter_map(|(s, c)| c.map(|c| (s, c)))
        .collect();

        // Custom layers, first definition (highest precedence) winning.
        let mut custom: Vec<(&CustomLayer, Origin)> = Vec::new();
        for &(source, config) in &sources {
            for (i, c) in config.custom.iter().enumerate() {
                if c.name.trim().is_empty()
                    || c.name.len() > MAX_LAYER_NAME_BYTES
                    || c.name.chars().any(crate::label::is_hidden)
                {
                    return Err(StackError::InvalidName(c.name.clone()));
                }
                if c.name == DEFAULT_LAYER_ID
                    || catalog::find(&c.name).is_some()
                    || config.custom[..i].iter().any(|o| o.name == c.name)
                {
                    return Err(StackError::DuplicateName(c.name.clone()));
                }
                if c.limit == 0 {
                    return Err(StackError::InvalidLimit {
                        what: c.name.clone(),
                        value: "0".to_owned(),
                    });
                }
                if !custom.iter().any(|(o, _)| o.name == c.name) {
                    custom.push((c, source));
                }
            }
        }
        let known = |id: &str| {
            id == DEFAULT_LAYER_ID
                || catalog::find(id).is_some()
                || custom.iter().any(|(c, _)| c.name == id)
        };
        let check = |id: &str| -> Result<(), StackError> {
            if known(id) {
                Ok(())
            } else {
                let extra = custom.iter().map(|(c, _)| c.name.as_str());
                Err(StackError::UnknownId {
                    id: id.to_owned(),
                    suggestion: suggest(id, extra).map(str::to_owned),
                })
            }
        };

        let mut overrides: BTreeMap<&str, (u64, Origin)> = BTreeMap::new();
        let mut ceiling: Option<(u64, Origin)> = None;
        for &(source, config) in &sources {
            for id in &config.ids {
                check(id)?;
            }
            for (id, &limit) in &config.overrides {
                check(id)?;
                if limit == 0 {
                    return Err(StackError::InvalidLimit {
                        what: id.clone(),
                        value: "0".to_owned(),
                    });
                }
                overrides.entry(id.as_str()).or_insert((limit, source));
            }
            if let Some(limit) = config.ceiling_bytes {
                if limit == 0 {
                    return Err(StackError::InvalidLimit {
                        what: KEY_CEILING_BYTES.to_owned(),
                        value: "0".to_owned(),
                    });
                }
                ceiling.get_or_insert((limit, source));
                overrides.entry(DEFAULT_LAYER_ID).or_insert((limit, source));
            }
        }

        // A custom layer is in the stack when no source names the layers, or when the list
        // names it: otherwise it is declared for `[layers.services]` and the overrides.
        let mut ids: Vec<&str> = match sources.iter().find(|(_, c)| !c.ids.is_empty()) {
            Some((_, c)) => c.ids.iter().map(String::as_str).collect(),
            None => custom.iter().map(|(c, _)| c.name.as_str()).collect(),
        };
        if ids.is_empty() || ceiling.is_some() {
            ids.push(DEFAULT_LAYER_ID);
        }

        let mut layers: Vec<StackLayer> = Vec::with_capacity(ids.len());
        for id in ids {
            if layers.iter().any(|l| l.id() == id) {
                continue;
            }
            let over = overrides.get(id).copied();
            let layer = if id == DEFAULT_LAYER_ID {
                let (limit, source) = over.unwrap_or((DEFAULT_CEILING_BYTES, Origin::Default));
                default_layer(limit, source)
            } else if let Some((c, source)) = custom.iter().find(|(c, _)| c.name == id) {
                let layer = Layer::user(&c.name, c.limit, c.unit, c.scope, c.action);
                let (limit, source) = over.unwrap_or((c.limit, *source));
                StackLayer::new(layer, limit, source)
            } else {
                // Checked above: a catalog id.
                let Some(layer) = catalog::find(id) else {
                    continue;
                };
                let (limit, source) = over.unwrap_or((layer.limit, Origin::Catalog));
                StackLayer::new(layer.clone(), limit, source)
            };
            layers.push(layer);
        }
        Ok(Stack::from_layers(layers))
    }

    /// This stack with the layers `ids` it lacks appended, each at the limit `file` overrides
    /// it to, else its custom or catalog limit; the indices of the layers already in it do not
    /// change. The collector adds the layers of the services' own stacks this way, so one
    /// stack numbers every layer a series can be held to.
    pub fn extended<'a>(
        &self,
        ids: impl IntoIterator<Item = &'a str>,
        file: &StackConfig,
    ) -> Result<Stack, StackError> {
        let mut layers = self.layers.clone();
        for id in ids {
            if layers.iter().any(|l| l.id() == id) {
                continue;
            }
            let over = file.overrides.get(id).map(|&l| (l, Origin::File));
            let layer = if id == DEFAULT_LAYER_ID {
                let (limit, source) = over.unwrap_or((DEFAULT_CEILING_BYTES, Origin::Default));
                default_layer(limit, source)
            } else if let Some(c) = file.custom.iter().find(|c| c.name == id) {
                let layer = Layer::user(&c.name, c.limit, c.unit, c.scope, c.action);
                let (limit, source) = over.unwrap_or((c.limit, Origin::File));
                StackLayer::new(layer, limit, source)
            } else if let Some(layer) = catalog::find(id) {
                let (limit, source) = over.unwrap_or((layer.limit, Origin::Catalog));
                StackLayer::new(layer.clone(), limit, source)
            } else {
                let extra = file.custom.iter().map(|c| c.name.as_str());
                return Err(StackError::UnknownId {
                    id: id.to_owned(),
                    suggestion: suggest(id, extra).map(str::to_owned),
                });
            };
            layers.push(layer);
        }
        Ok(Stack::from_layers(layers))
    }

    /// The measures this stack's layers are compared with exactly (see
    /// [`convert::measures_for`](super::convert::measures_for)), on top of
    /// [`Measures::CHEAP`]: what a tool-call span should carry for the stack's verdicts to be
    /// exact. The library takes them by default when the stack is named in its environment
    /// ([`crate::instrument::defaults`]).
    pub fn measures(&self) -> Measures {
        self.layers.iter().fold(Measures::CHEAP, |m, l| {
            m.union(measures_for(l.layer.unit, l.layer.scope))
        })
    }

    /// The layers, in stack order.
    pub fn layers(&self) -> &[StackLayer] {
        &self.layers
    }

    /// The layers, weakest first (ascending limit in bytes; depth and item layers last).
    pub fn weakest_first(&self) -> impl Iterator<Item = &StackLayer> + '_ {
        self.order.iter().map(|&i| &self.layers[i])
    }

    /// The ceiling: the weakest layer's limit in bytes, with its id. Every layer counts, whatever
    /// its scope (a per-attribute layer is in the stack because results travel as attributes).
    /// `None` only for a stack of depth and item layers alone.
    pub fn ceiling_bytes(&self) -> Option<Ceiling<'_>> {
        self.ceiling_among(&self.order)
    }

    /// The indices of the layers `keep` selects, weakest first: a sub-stack that
    /// [`Stack::weakest_among`] and [`Stack::ceiling_among`] read without copying a layer (the
    /// collector holds each series to the layers of its own agent this way).
    pub fn select(&self, mut keep: impl FnMut(&StackLayer) -> bool) -> Vec<usize> {
        self.order
            .iter()
            .copied()
            .filter(|&i| keep(&self.layers[i]))
            .collect()
    }

    /// [`Stack::ceiling_bytes`] of the sub-stack `order` (indices weakest first, as
    /// [`Stack::select`] gives them).
    pub fn ceiling_among(&self, order: &[usize]) -> Option<Ceiling<'_>> {
        let l = &self.layers[*order.first()?];
        let b = l.limit_bytes?;
        Some(Ceiling {
            layer_id: l.id(),
            bytes: b.bytes,
            estimated: b.estimated,
            source: l.source,
        })
    }

    /// Every layer that would cut a result with these measures, weakest first. `via_attribute`:
    /// whether the result travels as an attribute value (per-attribute layers apply only then).
    /// Integer comparisons only; allocates only when a layer cuts.
    pub fn verdict(&self, measures: &ResultMeasures, via_attribute: bool) -> Verdict<'_> {
        let mut verdict = Verdict::default();
        verdict.cuts.extend(
            self.order
                .iter()
                .filter_map(|&i| self.cut_by(i, measures, via_attribute)),
        );
        verdict.weakest = verdict.cuts.first().copied();
        verdict
    }

    /// The layer that cuts first, with its index in [`Stack::layers`]: the first cut of
    /// [`Stack::verdict`], found without allocating and without looking at stronger layers. The
    /// collector asks this once per result.
    pub fn weakest(
        &self,
        measures: &ResultMeasures,
        via_attribute: bool,
    ) -> Option<(usize, Cut<'_>)> {
        self.weakest_among(&self.order, measures, via_attribute)
    }

    /// [`Stack::weakest`] within the sub-stack `order` (indices weakest first, as
    /// [`Stack::select`] gives them).
    pub fn weakest_among(
        &self,
        order: &[usize],
        measures: &ResultMeasures,
        via_attribute: bool,
    ) -> Option<(usize, Cut<'_>)> {
        order
            .iter()
            .find_map(|&i| Some((i, self.cut_by(i, measures, via_attribute)?)))
    }

    /// [`Stack::cut_known`] at the limit the agent says applied to this result (`limit`, in the
    /// layer's unit) instead of the layer's.
    pub fn cut_known_at(
        &self,
        i: usize,
        measures: &ResultMeasures,
        via_attribute: bool,
        limit: u64,
    ) -> Option<Cut<'_>> {
        let mut cut = self.cut_known(i, measures, via_attribute)?;
        let l = self.layers.get(i)?;
        let (value, estimated) =
            match value_for(measures, l.layer.unit, l.layer.scope, via_attribute) {
                Some(v) if v.value > limit => (v.value, v.estimated),
                _ => (limit, true),
            };
        cut.limit = limit;
        cut.value = value;
        cut.estimated = estimated;
        cut.margin = value - limit;
        Some(cut)
    }

    /// Layer `i` as the cut of a result that layer is known to have cut (the agent said so),
    /// whether or not the measures show it over: `margin` is 0 when they do not.
    pub fn cut_known(
        &self,
        i: usize,
        measures: &ResultMeasures,
        via_attribute: bool,
    ) -> Option<Cut<'_>> {
        let l = self.layers.get(i)?;
        let v = value_for(measures, l.layer.unit, l.layer.scope, via_attribute);
        // Not shown over (the measures are of what the model got): at least the limit.
        let (value, estimated) = match v {
            Some(v) if v.value > l.limit => (v.value, v.estimated),
            _ => (l.limit, true),
        };
        Some(Cut {
            layer_id: l.id(),
            unit: l.layer.unit,
            scope: l.layer.scope,
            action: l.layer.action,
            limit: l.limit,
            value,
            estimated,
            margin: value - l.limit,
            limit_bytes: l.limit_bytes.map(|b| b.bytes),
        })
    }

    /// The cut of layer `i`, if it cuts.
    fn cut_by(&self, i: usize, measures: &ResultMeasures, via_attribute: bool) -> Option<Cut<'_>> {
        let l = &self.layers[i];
        let v = value_for(measures, l.layer.unit, l.layer.scope, via_attribute)?;
        (v.value > l.limit).then(|| Cut {
            layer_id: l.id(),
            unit: l.layer.unit,
            scope: l.layer.scope,
            action: l.layer.action,
            limit: l.limit,
            value: v.value,
            estimated: v.estimated,
            margin: v.value - l.limit,
            limit_bytes: l.limit_bytes.map(|b| b.bytes),
        })
    }
}

/// The known id closest to `id` (catalog ids, `default`, and `extra`), if close enough to be a
/// likely typo ([`crate::suggest::did_you_mean`]).
pub fn suggest<'a>(id: &str, extra: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let candidates = catalog::catalog()
        .iter()
        .map(|l| l.id.as_str())
        .chain(std::iter::once(DEFAULT_LAYER_ID))
        .chain(extra);
    crate::suggest::did_you_mean(id, candidates)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (id, limit, source) of every layer, in stack order.
    fn rows(s: &Stack) -> Vec<(&str, u64, Origin)> {
        s.layers()
            .iter()
            .map(|l| (l.id(), l.limit, l.source))
            .collect()
    }

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_stack_takes_the_measures_its_layers_count_by() {
        assert_eq!(Stack::default().measures(), Measures::CHEAP);
        let layer = |name: &str, unit, scope| {
            let l = Layer::user(name, 100, unit, scope, Action::Unknown);
            StackLayer::new(l, 100, Origin::Config)
        };
        let stack = Stack::from_layers(vec![
            layer("a", Unit::Bytes, Scope::PerResult),
            layer("b", Unit::Lines, Scope::PerResult),
            layer("c", Unit::Depth, Scope::PerResult),
        ]);
        assert_eq!(
            stack.measures(),
            Measures {
                lines: true,
                json_depth: true,
                ..Measures::CHEAP
            }
        );
        let stack = Stack::from_layers(vec![layer("s", Unit::Chars, Scope::PerString)]);
        assert_eq!(
            stack.measures(),
            Measures {
                chars: true,
                max_string_chars: true,
                ..Measures::CHEAP
            }
        );
    }

    #[test]
    fn no_stack_is_the_16_kib_default() {
        let stack = Stack::resolve(None, None, None).unwrap();
        assert_eq!(stack, Stack::default());
        let c = stack.ceiling_bytes().unwrap();
        assert_eq!(
            (c.layer_id, c.bytes, c.estimated, c.source),
            ("default", 16 * 1024, false, Origin::Default)
        );
        let v = stack.verdict(&ResultMeasures::from_bytes(16 * 1024), false);
        assert!(v.cuts.is_empty() && v.weakest.is_none());
        assert_eq!(v.cuts.capacity(), 0);
        let v = stack.verdict(&ResultMeasures::from_bytes(16 * 1024 + 1), false);
        assert_eq!(v.weakest.unwrap().margin, 1);
    }

    #[test]
    fn env_is_parsed_purely() {
        assert_eq!(StackConfig::from_env(&env(&[])).unwrap(), None);
        assert_eq!(
            StackConfig::from_env(&env(&[(ENV_STACK, " , ")])).unwrap(),
            None
        );
        let c = StackConfig::from_env(&env(&[
            (
                ENV_STACK,
                "codex.tool-output.tokens, cline.message-builder=6000",
            ),
            (ENV_CEILING_BYTES, "8192"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(c.ids, ["codex.tool-output.tokens", "cline.message-builder"]);
        assert_eq!(c.overrides["cline.message-builder"], 6000);
        assert_eq!(c.ceiling_bytes, Some(8192));
        for bad in ["0", "-1", "12k"] {
            let e = StackConfig::from_env(&env(&[(ENV_CEILING_BYTES, bad)])).unwrap_err();
            assert!(matches!(e, StackError::InvalidLimit { .. }), "{bad}");
        }
    }

    #[test]
    fn precedence_is_flag_then_env_then_file_then_default() {
        let file = StackConfig {
            ids: vec![
                "cline.message-builder".into(),
                "codex.tool-output.tokens".into(),
            ],
            ceiling_bytes: Some(4096),
            overrides: [("cline.message-builder".to_owned(), 7000)].into(),
            custom: vec![],
            services: Default::default(),
        };
        let env_cfg = StackConfig::parse_list("cline.message-builder=5000").unwrap();
        let flag = StackConfig {
            ceiling_bytes: Some(2048),
            ..StackConfig::default()
        };
        // File alone.
        let s = Stack::resolve(None, None, Some(&file)).unwrap();
        let got = rows(&s);
        assert_eq!(
            got,
            [
                ("cline.message-builder", 7000, Origin::File),
                ("codex.tool-output.tokens", 10_000, Origin::Catalog),
                ("default", 4096, Origin::File),
            ]
        );
        // Env names the list (replacing the file's) and overrides the limit; the flag's ceiling
        // wins over the file's.
        let s = Stack::resolve(Some(&flag), Some(&env_cfg), Some(&file)).unwrap();
        let got = rows(&s);
        assert_eq!(
            got,
            [
                ("cline.message-builder", 5000, Origin::Env),
                ("default", 2048, Origin::Flag),
            ]
        );
        let c = s.ceiling_bytes().unwrap();
        assert_eq!(
            (c.layer_id, c.bytes, c.source),
            ("default", 2048, Origin::Flag)
        );
    }

    #[test]
    fn a_mistyped_agent_id_suggests_that_agents_layer() {
        // Another agent's layer ends the same way; the suggestion stays with the agent typed.
        for (typed, meant) in [
            ("codx.tool-output.tokens", "codex.tool-output.tokens"),
            ("qwen-cod.tool-output", "qwen-code.tool-output"),
        ] {
            assert_eq!(suggest(typed, std::iter::empty()), Some(meant), "{typed}");
        }
    }

    #[test]
    fn unknown_ids_suggest_the_closest() {
        let cfg = StackConfig::parse_list("cline.mesage-builder").unwrap();
        let e = Stack::resolve(None, None, Some(&cfg)).unwrap_err();
        assert_eq!(
            e,
            StackError::UnknownId {
                id: "cline.mesage-builder".into(),
                suggestion: Some("cline.message-builder".into())
            }
        );
        assert!(e
            .to_string()
            .contains("did you mean \"cline.message-builder\""));
        let cfg = StackConfig::parse_list("zzzzzzzzzzzzzzzz").unwrap();
        let e = Stack::resolve(Some(&cfg), None, None).unwrap_err();
        assert!(matches!(
            e,
            StackError::UnknownId {
                suggestion: None,
                ..
            }
        ));
        // Overrides are checked too, even in a losing source.
        let bad = StackConfig {
            overrides: [("defualt".to_owned(), 1)].into(),
            ..StackConfig::default()
        };
        let e = Stack::resolve(None, None, Some(&bad)).unwrap_err();
        assert!(
            matches!(e, StackError::UnknownId { suggestion: Some(ref s), .. } if s == "default")
        );
    }

    #[test]
    fn custom_layers_join_the_stack() {
        let file = StackConfig {
            custom: vec![CustomLayer {
                name: "my-proxy".into(),
                limit: 2000,
                unit: Unit::Chars,
                scope: Scope::PerResult,
                action: Action::TruncateSilent,
            }],
            ..StackConfig::default()
        };
        let s = Stack::resolve(None, None, Some(&file)).unwrap();
        assert_eq!(s.layers().len(), 1);
        assert_eq!(s.layers()[0].source, Origin::File);
        assert_eq!(s.ceiling_bytes().unwrap().layer_id, "my-proxy");
        // Named in the list and overridden by the flag.
        let flag = StackConfig::parse_list("my-proxy=3000,default").unwrap();
        let s = Stack::resolve(Some(&flag), None, Some(&file)).unwrap();
        let got = rows(&s);
        assert_eq!(
            got,
            [
                ("my-proxy", 3000, Origin::Flag),
                ("default", 16384, Origin::Default)
            ]
        );
        // Declared but left out of a list that names layers: not in the stack (it is there for
        // a service's own stack); with no list, the custom layers are the stack.
        let flag = StackConfig::parse_list("default").unwrap();
        let s = Stack::resolve(Some(&flag), None, Some(&file)).unwrap();
        assert_eq!(rows(&s), [("default", 16384, Origin::Default)]);
        let named = StackConfig {
            ids: vec!["cline.message-builder".into()],
            ..file.clone()
        };
        let s = Stack::resolve(None, None, Some(&named)).unwrap();
        assert_eq!(rows(&s).len(), 1);
        assert_eq!(rows(&s)[0].0, "cline.message-builder");
        // A custom name becomes a label: bounded, no hidden characters.
        for bad in ["", "a\u{202E}b", "tab\there", &"x".repeat(129)] {
            let mut c = file.clone();
            c.custom[0].name = bad.into();
            assert!(
                matches!(
                    Stack::resolve(None, None, Some(&c)),
                    Err(StackError::InvalidName(_))
                ),
                "{bad:?}"
            );
        }
        // A custom name may not shadow a catalog id.
        let mut clash = file.clone();
        clash.custom[0].name = "cline.message-builder".into();
        assert!(matches!(
            Stack::resolve(None, None, Some(&clash)),
            Err(StackError::DuplicateName(_))
        ));
    }

    #[test]
    fn config_file_keys() {
        let cfg: StackConfig = serde_json::from_str(
            r#"{"stack":["default"],"ceiling_bytes":1,"overrides":{"default":2},
                "custom":[{"name":"x","limit":3,"unit":"lines"}]}"#,
        )
        .unwrap();
        assert_eq!(cfg.custom[0].scope, Scope::PerResult);
        assert!(serde_json::from_str::<StackConfig>(r#"{"stak":[]}"#).is_err());
    }
}
