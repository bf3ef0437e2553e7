//! The `[layers]` keys: the library's [`StackConfig`] declared as a section, in one small list,
//! and the stack settings of the variables and flags, kept per source so that
//! [`Stack::resolve`] gives every limit its [`Origin`](crate::Origin) and an error names the
//! source that holds the bad value.

use crate::layers::{
    parse_limit, Stack, StackConfig, StackError, ENV_CEILING_BYTES, ENV_STACK, KEY_CEILING_BYTES,
};

use super::declare::{join, section, Scalar, Section, Text};
use super::keys::Key;
use super::merge::Provenance;
use super::ConfigError;

section! {
    /// The truncation layers between your tools and the model (`toolsize layers` lists the
    /// catalog). Each result is compared with every layer, in its unit; the weakest layer that
    /// cuts it is counted in toolsize_tool_results_over_ceiling_total{layer}. With no layer
    /// named, the stack is one `default` layer of 16384 bytes. Precedence: flag > environment >
    /// this file > default.
    pub(crate) struct LayersKeys {
        /// The layers in front of the model, by id, e.g. ["claude-code.mcp.max", "default"];
        /// in the environment and the flag "id[=limit],...", a limit in the layer's unit.
        #[key(env = ENV_STACK, flag = "--stack", value_name = "ID[=LIMIT],...")]
        pub(crate) stack: Vec<String> = Vec::new(),
        /// The `default` layer's byte ceiling (16384 unless set); setting it keeps `default` in
        /// the stack.
        #[key(env = ENV_CEILING_BYTES, flag = "--ceiling-bytes", value_name = "N", example = "16384")]
        pub(crate) ceiling_bytes: Option<Limit> = None,
    }
}

/// A layer's limit as a variable, a flag or the file gives it: parsed by the library's one
/// parser of limits ([`crate::layers::parse_limit`]), a whole number above 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub(crate) struct Limit(pub(crate) u64);

impl Scalar for Limit {
    fn parse_item(item: &str) -> Result<Self, String> {
        parse_limit(item).map(Limit)
    }
}

/// `[layers]`: the library's [`StackConfig`], whose value keys are declared once in
/// [`LayersKeys`] (a test holds the two to the same fields); its free tables follow.
impl Section for StackConfig {
    const DOC: &'static str = <LayersKeys as Section>::DOC;

    fn keys(path: &str, out: &mut Vec<Key>) {
        LayersKeys::keys(path, out);
        out.push(
            Key::table(
                join(path, "overrides"),
                "Limit overrides by layer id, in the layer's own unit:",
            )
            .free()
            .example("[layers.overrides]\n\"cline.message-builder\" = 6000"),
        );
        out.push(
            Key::table(
                join(path, "custom"),
                "Your own layers: the stack when `stack` is unset, else in it when `stack` names them\n\
                 (and in a service's stack when [layers.services] names them); unit: bytes, chars,\n\
                 utf16_units, tokens, lines, depth or items; scope: per_result (default),\n\
                 per_string, per_attribute or per_line.",
            )
            .free()
            .example(
                "[[layers.custom]]\nname = \"my-proxy\"\nlimit = 2000\nunit = \"chars\"\n\
                 scope = \"per_result\"\naction = \"truncate_silent\"",
            ),
        );
        out.push(
            Key::table(
                join(path, "services"),
                "The stacks of particular services, by service.name: each of its series is held\n\
                 to these layers instead of the stack above. Known coding agents are held to their\n\
                 own layers unless named here (claude-code, codex_*, gemini-cli, qwen-code; see\n\
                 /api/v1/layers). Limits come from [layers.overrides] and [[layers.custom]].",
            )
            .free()
            .example("[layers.services]\n\"my-agent\" = [\"codex.tool-output.tokens\", \"default\"]"),
        );
    }

    /// Checked when the stack is resolved ([`resolve`]).
    fn check(&self, _: &str) -> Result<(), (String, String)> {
        Ok(())
    }
}

/// The stack settings one source (the variables, or the flags) gives, and which setting gave
/// them.
#[derive(Debug, Default)]
pub(super) struct StackSource {
    config: StackConfig,
    /// The variable or flag that named the layers.
    list: Option<Provenance>,
    /// The variable or flag that set the ceiling.
    ceiling: Option<Provenance>,
}

impl StackSource {
    /// Whether `key` belongs to the stack, resolved by [`resolve`] rather than set.
    pub(super) fn takes(key: &Key) -> bool {
        key.path.starts_with("layers.")
    }

    /// Adds the texts of `key`, a stack key, given by `from`.
    pub(super) fn add(
        &mut self,
        key: &Key,
        texts: &[String],
        from: &Provenance,
    ) -> Result<(), ConfigError> {
        match key.leaf() {
            "stack" => {
                let list = StackConfig::parse_list(&texts.join(","))
                    .map_err(|error| ConfigError::stack(error, Some(from)))?;
                self.config.ids = list.ids;
                self.config.overrides = list.overrides;
                self.list = Some(from.clone());
            }
            KEY_CEILING_BYTES => {
                self.config.ceiling_bytes = Option::<Limit>::from_texts(texts)
                    .map_err(|message| ConfigError::invalid(&key.path, from, message))?
                    .map(|l| l.0);
                self.ceiling = Some(from.clone());
            }
            other => unreachable!("[layers] has no key {other} a variable or flag sets"),
        }
        Ok(())
    }

    fn get(&self) -> Option<&StackConfig> {
        (!self.config.is_empty()).then_some(&self.config)
    }

    /// The setting holding what `error` is about, if this source holds it.
    fn blame(&self, error: &StackError) -> Option<&Provenance> {
        match culprit(&self.config, error)? {
            Part::Ceiling => self.ceiling.as_ref(),
            Part::List | Part::Custom => self.list.as_ref(),
        }
    }
}

/// The part of a source's stack settings an error is about.
enum Part {
    List,
    Ceiling,
    Custom,
}

fn culprit(c: &StackConfig, error: &StackError) -> Option<Part> {
    let custom = |name: &str| c.custom.iter().any(|l| l.name == name);
    match error {
        StackError::UnknownId { id, .. } => {
            (c.ids.contains(id) || c.overrides.contains_key(id)).then_some(Part::List)
        }
        StackError::InvalidLimit { what, .. } if what == KEY_CEILING_BYTES => {
            (c.ceiling_bytes == Some(0)).then_some(Part::Ceiling)
        }
        StackError::InvalidLimit { what, .. } => {
            if c.overrides.get(what) == Some(&0) {
                Some(Part::List)
            } else {
                custom(what).then_some(Part::Custom)
            }
        }
        StackError::DuplicateName(name) | StackError::InvalidName(name) => {
            custom(name).then_some(Part::Custom)
        }
    }
}

/// The stack from the flags, the variables and the file (`[layers]`, given by `file_from`),
/// in that precedence; an error names the source holding the bad value.
pub(super) fn resolve(
    flag: &StackSource,
    env: &StackSource,
    file: &StackConfig,
    file_from: &Provenance,
) -> Result<Stack, ConfigError> {
    let stack = Stack::resolve(flag.get(), env.get(), Some(file)).map_err(|error| {
        let from = flag
            .blame(&error)
            .or_else(|| env.blame(&error))
            .or_else(|| culprit(file, &error).map(|_| file_from));
        ConfigError::stack(error.clone(), from)
    })?;
    for (service, ids) in &file.services {
        let invalid = |message: String| ConfigError::invalid(SERVICES, file_from, message);
        if service.trim().is_empty() || service.chars().any(crate::label::is_hidden) {
            return Err(invalid(format!("{service:?} is not a service name")));
        }
        if let Some(id) = ids.iter().find(|id| id.contains('=')) {
            return Err(invalid(format!(
                "{service}: `{id}` sets a limit; a service's stack names layers, their limits \
                 are set in [layers.overrides]"
            )));
        }
        stack
            .extended(ids.iter().map(String::as_str), file)
            .map_err(|error| ConfigError::stack(error, Some(file_from)))?;
    }
    Ok(stack)
}

/// The key of the services' own stacks.
const SERVICES: &str = "layers.services";

#[cfg(test)]
mod tests {
    use super::*;

    /// The value keys declared in [`LayersKeys`] are the library's fields, and a variable or
    /// flag sets each of them through [`StackSource::add`], its one parser refusing a bad
    /// ceiling with the key's name.
    #[test]
    fn the_declared_keys_are_the_stack_config_fields() {
        let keys = LayersKeys {
            stack: vec!["default".into()],
            ceiling_bytes: Some(Limit(5)),
        };
        let c: StackConfig = serde_json::from_value(serde_json::to_value(&keys).unwrap()).unwrap();
        assert_eq!(
            (c.ids, c.ceiling_bytes),
            (vec!["default".to_owned()], Some(5))
        );

        let mut all = Vec::new();
        StackConfig::keys("layers", &mut all);
        let values: Vec<&Key> = all.iter().filter(|k| k.parse.is_some()).collect();
        let leaves: Vec<&str> = values.iter().map(|k| k.leaf()).collect();
        assert_eq!(leaves, ["stack", KEY_CEILING_BYTES]);
        let from = Provenance::DEFAULT;
        let mut source = StackSource::default();
        for key in &values {
            source.add(key, &["5".to_owned()], &from).unwrap();
        }
        assert_eq!(source.config.ceiling_bytes, Some(5));
        for bad in ["0", "-1", "12k"] {
            let e = source
                .add(values[1], &[bad.to_owned()], &from)
                .unwrap_err()
                .to_string();
            assert!(e.contains("layers.ceiling_bytes"), "{e}");
            assert!(e.contains("expected a whole number above 0"), "{e}");
        }
    }
}
