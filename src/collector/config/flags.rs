//! The flags of `toolsize serve` (and `demo`) that set configuration keys, derived from
//! [`KEYS`]: one per key declaring a `flag`, with its value name, its doc's first sentence and
//! its default (read from `Config::default()`) as help, repeatable for a list. Flags are kept as
//! text and merged like every other source ([`super::merge`]), so a bad value is a configuration
//! error naming the flag.

use std::ffi::OsString;

use clap::error::ErrorKind;
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use serde_json::Value;

use super::keys::{default_of, Key, KEYS};
use super::merge::Setting;

/// The configuration flags given on a command line, as text.
#[derive(Debug, Clone, Default)]
pub struct Flags {
    given: Vec<Setting>,
}

impl Flags {
    /// The flags in `args`, parsed as `toolsize serve` parses them, e.g.
    /// `Flags::parse_from(["--max-series", "10", "--window", "1m"])`.
    pub fn parse_from<I, T>(args: I) -> Result<Flags, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let command = Flags::augment_args(Command::new("serve").no_binary_name(true));
        Flags::from_arg_matches(&command.try_get_matches_from(args)?)
    }

    /// The settings the flags give, in key order.
    pub(crate) fn settings(&self) -> impl Iterator<Item = Setting> + '_ {
        self.given.iter().cloned()
    }
}

fn keys_with_flags() -> impl Iterator<Item = (&'static Key, &'static str)> {
    KEYS.iter().filter_map(|k| k.flag.map(|f| (k, f)))
}

/// The argument of `key`'s flag.
fn arg(key: &'static Key, flag: &'static str) -> Arg {
    let default = match default_of(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) if !items.is_empty() => items
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
            .collect::<Vec<_>>()
            .join(", "),
        Some(Value::Null | Value::Array(_)) | None => "none".to_string(),
        Some(other) => other.to_string(),
    };
    Arg::new(key.path.as_str())
        .long(flag.trim_start_matches('-'))
        .value_name(key.value_name.unwrap_or("VALUE"))
        .help(format!("{} [default: {default}]", key.summary()))
        .value_parser(clap::value_parser!(String))
        .action(match key.is_list() {
            true => ArgAction::Append,
            false => ArgAction::Set,
        })
}

impl Args for Flags {
    fn augment_args(command: Command) -> Command {
        command.args(keys_with_flags().map(|(key, flag)| arg(key, flag)))
    }

    fn augment_args_for_update(command: Command) -> Command {
        Flags::augment_args(command)
    }
}

impl FromArgMatches for Flags {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut given = Vec::new();
        for (key, _) in keys_with_flags() {
            let values = matches
                .try_get_many::<String>(key.path.as_str())
                .map_err(|e| clap::Error::raw(ErrorKind::InvalidValue, e))?;
            if let Some(values) = values {
                given.push(Setting::flag(key, values.cloned().collect()));
            }
        }
        Ok(Flags { given })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Flags::from_arg_matches(matches)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_declared_flag_parses_into_its_key() {
        let f =
            Flags::parse_from(["--max-series", "7", "--window", "1m", "--window", "2h"]).unwrap();
        let got: Vec<(&str, Vec<String>)> = f
            .settings()
            .map(|s| (s.key.path.as_str(), s.texts))
            .collect();
        assert_eq!(
            got,
            [
                ("aggregation.windows", vec!["1m".into(), "2h".into()]),
                ("aggregation.max_series", vec!["7".into()]),
            ]
        );
        let e = Flags::parse_from(["--max-serie", "7"]).unwrap_err();
        assert!(e.to_string().contains("--max-series"), "{e}");
    }

    #[test]
    fn the_flags_are_a_valid_command() {
        Flags::augment_args(Command::new("serve")).debug_assert();
    }

    #[test]
    fn help_is_the_first_sentence_and_the_computed_default() {
        let help = Flags::augment_args(Command::new("serve"))
            .render_help()
            .to_string();
        for line in [
            "--max-series <N>",
            "Cardinality cap on (service, tool) series; results of further series are counted in \
             one overflow series, tool=\"__overflow__\". [default: 2000]",
            "[default: 5m, 1h]",
            "--admin-addr <ADDR>",
            "Admin HTTP listen address. [default: 127.0.0.1:9464]",
            "--external-url <URL>",
        ] {
            assert!(help.contains(line), "{line:?} not in\n{help}");
        }
    }
}
