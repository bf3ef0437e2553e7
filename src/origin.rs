//! Where a setting came from: one type for the whole crate.
//!
//! The span API's large-result threshold ([`crate::instrument`]), the ceiling guard's output limit
//! ([`crate::guard::ceiling`]), each limit of a layer stack ([`crate::layers::Stack`]) and each key
//! of the collector's configuration resolve from several sources; each reports the one that won
//! as an [`Origin`], logged and served by its [`Origin::as_str`] name (`/api/v1/layers` and the
//! dashboards show `flag`, `env`, `file`, `default` and `catalog`).

use std::fmt;

use serde::Serialize;

/// Where an effective setting came from. A component resolves from some of these, in its own
/// documented precedence (the collector's configuration: flag > env > file > default).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// Passed in code for one guard or call (a builder method), or a subcommand's own option.
    Explicit,
    /// A command-line flag.
    Flag,
    /// An environment variable.
    Env,
    /// The collector's configuration file.
    File,
    /// The application's own configuration (e.g. [`crate::instrument::set_defaults`]).
    Config,
    /// A built-in default.
    Default,
    /// The built-in catalog of truncation layers.
    Catalog,
}

impl Origin {
    /// The name used in logs, errors and JSON: `explicit`, `flag`, `env`, `file`, `config`,
    /// `default` or `catalog`.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Explicit => "explicit",
            Origin::Flag => "flag",
            Origin::Env => "env",
            Origin::File => "file",
            Origin::Config => "config",
            Origin::Default => "default",
            Origin::Catalog => "catalog",
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Origin;

    #[test]
    fn the_json_name_is_the_display_name() {
        for o in [
            Origin::Explicit,
            Origin::Flag,
            Origin::Env,
            Origin::File,
            Origin::Config,
            Origin::Default,
            Origin::Catalog,
        ] {
            let json = serde_json::to_value(o).unwrap();
            assert_eq!(json, o.as_str());
            assert_eq!(o.to_string(), o.as_str());
        }
    }
}
