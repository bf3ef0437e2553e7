//! One merge for every source: the file is read as the base (typed by TOML, so its errors have a
//! line and column), then every variable and every flag is a [`Setting`] (a key, its texts, where
//! it came from) applied by [`keys::set`] in that order, so the precedence is flag > variable >
//! file > default for every key. [`Origins`] remembers where each key's value came from, for the
//! errors of the checks run after the merge.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use crate::origin::Origin;

use super::keys::{self, Key};
use super::layers::StackSource;
use super::{Config, ConfigError};

/// Where a key's value came from: its [`Origin`] and the flag, variable or file that set it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Provenance {
    pub(crate) origin: Origin,
    /// The flag (`--max-series`), variable (`TOOLSIZE_MAX_SERIES`) or file path.
    pub(crate) name: Option<String>,
}

impl Provenance {
    /// A built-in default.
    pub(crate) const DEFAULT: Provenance = Provenance {
        origin: Origin::Default,
        name: None,
    };

    /// The configuration file at `path` (`None`: a text given without one).
    pub(crate) fn file(path: Option<&Path>) -> Self {
        Provenance {
            origin: Origin::File,
            name: path.map(|p| p.display().to_string()),
        }
    }

    /// Set by the environment variable `name`.
    pub(crate) fn env(name: &str) -> Self {
        Self::named(Origin::Env, name)
    }

    fn named(origin: Origin, name: &str) -> Self {
        Provenance {
            origin,
            name: Some(name.to_string()),
        }
    }

    /// Higher wins: flag > variable > file > default.
    fn rank(&self) -> u8 {
        match self.origin {
            Origin::Flag => 3,
            Origin::Env => 2,
            Origin::File => 1,
            _ => 0,
        }
    }
}

/// `flag --max-series`, `environment variable TOOLSIZE_MAX_SERIES`, `config file /etc/x.toml`,
/// `default`, `set in code`.
impl fmt::Display for Provenance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.origin {
            Origin::Flag => "flag",
            Origin::Env => "environment variable",
            Origin::File => "config file",
            Origin::Explicit => "set in code",
            other => other.as_str(),
        };
        match &self.name {
            Some(name) => write!(f, "{what} {name}"),
            None => f.write_str(what),
        }
    }
}

/// Where the value of each key came from; a key not named has the fallback's (a default).
#[derive(Debug, Clone)]
pub(crate) struct Origins {
    named: HashMap<String, Provenance>,
    fallback: Provenance,
}

impl Default for Origins {
    fn default() -> Self {
        Origins {
            named: HashMap::new(),
            fallback: Provenance::DEFAULT,
        }
    }
}

impl Origins {
    /// Every value set in code (a [`Config`] built or changed by its user).
    pub(crate) fn set_in_code() -> Self {
        Origins {
            named: HashMap::new(),
            fallback: Provenance {
                origin: Origin::Explicit,
                name: None,
            },
        }
    }

    /// Where the key at `path` got its value.
    pub(crate) fn of(&self, path: &str) -> &Provenance {
        self.named.get(path).unwrap_or(&self.fallback)
    }

    pub(crate) fn record(&mut self, path: &str, from: &Provenance) {
        self.named.insert(path.to_string(), from.clone());
    }
}

/// One value given by a variable or a flag: the key, its texts, where it came from.
#[derive(Debug, Clone)]
pub(crate) struct Setting {
    pub(crate) key: &'static Key,
    /// One text per occurrence of the flag, or the variable's.
    pub(crate) texts: Vec<String>,
    pub(crate) from: Provenance,
}

impl Setting {
    /// The setting of `key` by its flag.
    pub(crate) fn flag(key: &'static Key, texts: Vec<String>) -> Self {
        let flag = key.flag.expect("a key with a flag");
        Setting {
            key,
            texts,
            from: Provenance::named(Origin::Flag, flag),
        }
    }
}

/// The settings of the `TOOLSIZE_*` variables in `env` that set keys, in key order. Other
/// variables are ignored here (they belong to the library or other subcommands;
/// [`super::unknown_env_warnings`] warns about typos).
pub(crate) fn env_settings(env: impl IntoIterator<Item = (String, String)>) -> Vec<Setting> {
    let env: HashMap<String, String> = env.into_iter().collect();
    keys::env_vars()
        .filter_map(|(name, key)| {
            env.get(name).map(|value| Setting {
                key,
                texts: vec![value.clone()],
                from: Provenance::named(Origin::Env, name),
            })
        })
        .collect()
}

/// The stack settings the variables and the flags give.
#[derive(Debug, Default)]
pub(crate) struct StackSources {
    pub(crate) env: StackSource,
    pub(crate) flag: StackSource,
}

/// Applies `settings` to `config` in order, each over what came before: a later setting of a
/// key wins. A key that `replaces` another unsets it when that one came from a lower source
/// (both given by one source stay, for the checks to refuse). Stack keys go to `stacks`.
pub(crate) fn apply(
    config: &mut Config,
    origins: &mut Origins,
    stacks: &mut StackSources,
    settings: impl IntoIterator<Item = Setting>,
) -> Result<(), ConfigError> {
    for Setting { key, texts, from } in settings {
        if StackSource::takes(key) {
            let source = match from.origin {
                Origin::Flag => &mut stacks.flag,
                _ => &mut stacks.env,
            };
            source.add(key, &texts, &from)?;
            continue;
        }
        keys::set(config, key, &texts)
            .map_err(|message| ConfigError::invalid(&key.path, &from, message))?;
        if let Some(other) = key.replaces {
            if origins.of(other).rank() < from.rank() {
                keys::unset(config, other)
                    .map_err(|message| ConfigError::invalid(other, &from, message))?;
                origins.record(other, &from);
            }
        }
        origins.record(&key.path, &from);
    }
    Ok(())
}
