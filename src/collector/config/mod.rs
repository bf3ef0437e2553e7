//! The daemon's configuration: one typed struct, read from a TOML file, `TOOLSIZE_*` environment
//! variables and command-line flags.
//!
//! Precedence, for every key: flags > environment > file > built-in defaults. An unknown key in
//! the file is an error that names the closest known key ("did you mean"); a bad value (an
//! address that does not parse, a zero interval) is an error naming the key and where the value
//! came from (`flag --max-series`, `environment variable TOOLSIZE_MAX_SERIES`, `config file
//! /etc/toolsize.toml`), never a panic.
//!
//! A key is its field. Each section is declared once with the `section!` macro (`declare.rs`):
//! per field its documentation, type, default, and optionally its variable, flag and checks
//! (`sections.rs`, `alerts.rs`; the library's `[layers]` in `layers.rs`). Everything else is
//! derived from that declaration: the list of keys ([`keys::KEYS`]), the file
//! `toolsize gen-config` prints, the keys a file may hold, the variables read, the flags of
//! `toolsize serve` ([`Flags`]), the checks run after the merge, and the sources table of
//! `docs/collector.md`. Adding a key is adding a field to its section.
//!
//! Every source goes through one merge (`merge.rs`): the file, then each variable and flag as
//! text parsed by its key's type, each value remembered with where it came from
//! ([`crate::Origin`] and the flag, variable or file). The layer stack keeps each limit's source
//! by resolving the flag, variable and file settings together
//! ([`crate::layers::Stack::resolve`]).

use std::path::{Path, PathBuf};

use crate::layers::{Stack, StackConfig, StackError};
use crate::origin::Origin;
use crate::suggest::did_you_mean;

mod alerts;
pub(crate) mod declare;
mod flags;
pub mod keys;
mod layers;
mod merge;
mod sections;
mod values;

/// `[alerts]`, its rules' sections (one each, from the list of rules) and their values.
pub use alerts::*;
use declare::{section, Section};
pub use flags::Flags;
pub(crate) use keys::generated_config;
use merge::{Origins, Provenance, StackSources};
pub use sections::{
    AdminConfig, AggregationConfig, AuthConfig, ContextConfig, ListenersConfig, LogConfig,
    LogFormat, OtlpConfig, RecognitionConfig, TlsConfig,
};
pub(crate) use sections::{
    Durability, ForwardConfig, StoreConfig, DEFAULT_BODY_TIMEOUT, DEFAULT_MAX_CONCURRENT_REQUESTS,
    DEFAULT_MAX_SERVICE_NAME_BYTES, DEFAULT_OTLP_GRPC_ADDR, DEFAULT_OTLP_HTTP_ADDR,
};
pub(crate) use values::{header_pairs, otlp_upstream, parse_duration, ServiceRate};
pub use values::{Interval, ListenAddr};

section! {
    /// The whole configuration.
    pub struct Config {
        /// OTLP receivers.
        #[section]
        pub otlp: OtlpConfig,
        /// Admin HTTP listener.
        #[section]
        pub admin: AdminConfig,
        /// Per-tool aggregation.
        #[section]
        pub aggregation: AggregationConfig,
        /// Recognition of tool spans.
        #[section]
        pub recognition: RecognitionConfig,
        /// The context ledger.
        #[section]
        pub context: ContextConfig,
        /// Snapshots on disk.
        #[section]
        pub(crate) store: StoreConfig,
        /// Alert rules and sinks.
        #[section]
        pub alerts: AlertsConfig,
        /// Time and connection budgets of the listeners.
        #[section]
        pub listeners: ListenersConfig,
        /// Token authentication of the OTLP receivers and the admin API.
        #[section]
        pub auth: AuthConfig,
        /// TLS on the listeners.
        #[section]
        pub tls: TlsConfig,
        /// Relaying what the daemon accepts to other OTLP receivers.
        #[section]
        pub(crate) forward: ForwardConfig,
        /// `[layers]`: the truncation layers in front of the model, as the file declares them.
        #[section]
        pub(crate) layers: StackConfig,
        /// The daemon's own log.
        #[section]
        pub log: LogConfig,
        /// The effective stack, resolved from flags > environment > file > default by
        /// [`Config::load`] (from the file alone by [`Config::from_toml`]).
        #[skip]
        pub stack: Stack = Stack::default(),
    }
}

/// A configuration that could not be read or is invalid.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML or a value has the wrong type.
    #[error("invalid config file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A key the daemon does not know.
    #[error("unknown config key `{key}`{}", suggestion.as_ref().map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default())]
    UnknownKey {
        /// The dotted key, e.g. `otlp.grcp_addr`.
        key: String,
        /// The closest known key.
        suggestion: Option<String>,
    },
    /// A value that does not parse or makes no sense.
    #[error("invalid value for {key} ({from}): {message}")]
    Invalid {
        /// The dotted key, e.g. `aggregation.max_series`.
        key: String,
        /// Where the value came from: a flag, a variable, the file, the default, or code
        /// ([`Origin::Explicit`]).
        origin: Origin,
        /// Which: `flag --max-series`, `environment variable TOOLSIZE_MAX_SERIES`,
        /// `config file /etc/toolsize.toml`, `default`, `set in code`.
        from: String,
        /// What is wrong.
        message: String,
    },
    /// The layer stack does not resolve (an unknown id, with a "did you mean", or a zero limit).
    #[error("invalid layer stack{}: {error}", from.as_ref().map(|f| format!(" ({f})")).unwrap_or_default())]
    Stack {
        /// Why.
        error: StackError,
        /// The flag, variable or file holding the bad value, described as for
        /// [`ConfigError::Invalid`].
        from: Option<String>,
    },
}

impl ConfigError {
    fn invalid(key: &str, from: &Provenance, message: String) -> Self {
        ConfigError::Invalid {
            key: key.to_string(),
            origin: from.origin,
            from: from.to_string(),
            message,
        }
    }

    fn stack(error: StackError, from: Option<&Provenance>) -> Self {
        ConfigError::Stack {
            error,
            from: from.map(Provenance::to_string),
        }
    }
}

/// `TOOLSIZE_*` variables that other parts of toolsize read (the library, `wrap`, the tests);
/// `serve` ignores them without a warning.
pub(crate) const OTHER_ENV_VARS: &[&str] = &[
    "TOOLSIZE_LARGE_RESULT_BYTES",
    "TOOLSIZE_MAX_TOOL_OUTPUT",
    "TOOLSIZE_SPILL_DIR",
    "TOOLSIZE_ALLOW_MISSING_PEERS",
    "TOOLSIZE_ERROR_FORMAT",
];

/// One warning per `TOOLSIZE_*` name in `names` that no part of toolsize reads, with the
/// closest known variable when it looks like a typo. Warnings, not errors: the prefix may be
/// shared with other tools, and a stray variable must not stop the daemon from starting.
pub(crate) fn unknown_env_warnings<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let known: Vec<&str> = keys::env_vars()
        .map(|(n, _)| n)
        .chain(OTHER_ENV_VARS.iter().copied())
        .collect();
    names
        .into_iter()
        .filter(|n| n.starts_with("TOOLSIZE_") && !known.contains(n))
        .map(|n| match did_you_mean(n, known.iter().copied()) {
            Some(s) => format!("unknown environment variable `{n}` ignored (did you mean `{s}`?)"),
            None => format!("unknown environment variable `{n}` ignored"),
        })
        .collect()
}

/// The OpenTelemetry SDKs' attribute value length limit variables, the span-specific one first.
/// In the daemon's own environment (agents started beside it often share it) they give
/// `recognition.attribute_value_length_limits` when no file, `TOOLSIZE_*` variable or flag
/// does: the SDKs' setting ranks below toolsize's own.
pub(crate) const OTEL_ATTRIBUTE_LIMIT_VARS: [&str; 2] = [
    "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT",
    "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT",
];

/// Sets the attribute value length limit from the first of [`OTEL_ATTRIBUTE_LIMIT_VARS`] set
/// (not blank) in `env`, when no source set it; a value that is not a whole number above 0 is
/// an error naming the variable.
fn otel_attribute_limit(
    config: &mut Config,
    origins: &mut Origins,
    env: &[(String, String)],
) -> Result<(), ConfigError> {
    const KEY: &str = "recognition.attribute_value_length_limits";
    if origins.of(KEY).origin != Origin::Default {
        return Ok(());
    }
    let set = |name: &str| {
        env.iter()
            .find(|(k, v)| k == name && !v.trim().is_empty())
            .map(|(_, v)| v.trim())
    };
    let Some((name, text)) = OTEL_ATTRIBUTE_LIMIT_VARS
        .iter()
        .find_map(|n| Some((*n, set(n)?)))
    else {
        return Ok(());
    };
    let from = Provenance::env(name);
    let limit = text.parse::<u64>().ok().filter(|&l| l > 0).ok_or_else(|| {
        let shown: String = text.chars().take(64).collect();
        ConfigError::invalid(
            KEY,
            &from,
            format!("{shown:?}: expected a whole number above 0"),
        )
    })?;
    tracing::info!(
        limit,
        source = name,
        "Attribute value length limit from the environment."
    );
    config.recognition.attribute_value_length_limits = vec![limit];
    origins.record(KEY, &from);
    Ok(())
}

impl Config {
    /// Reads the configuration: defaults, then `file`, then `env` (`TOOLSIZE_*` pairs), then
    /// `flags`; checks the result and resolves the layer stack.
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
        flags: &Flags,
    ) -> Result<Self, ConfigError> {
        Self::load_with(file, env, flags, |_, _| {})
    }

    /// [`Config::load`], with `unset` given the merged configuration before it is checked, and
    /// a test telling which keys (by path) no source set: a command with defaults of its own
    /// (`toolsize demo`'s short windows) changes those keys only.
    pub(crate) fn load_with(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
        flags: &Flags,
        unset: impl FnOnce(&mut Config, &dyn Fn(&str) -> bool),
    ) -> Result<Self, ConfigError> {
        let (mut config, mut origins) = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.to_owned(),
                    source,
                })?;
                Self::parse(&text, Some(path))?
            }
            None => (Self::default(), Origins::default()),
        };
        let mut stacks = StackSources::default();
        let env: Vec<(String, String)> = env.into_iter().collect();
        let settings = merge::env_settings(env.iter().cloned())
            .into_iter()
            .chain(flags.settings());
        merge::apply(&mut config, &mut origins, &mut stacks, settings)?;
        otel_attribute_limit(&mut config, &mut origins, &env)?;
        unset(&mut config, &|path| {
            origins.of(path).origin == Origin::Default
        });
        config.check_all(&origins)?;
        config.stack = layers::resolve(
            &stacks.flag,
            &stacks.env,
            &config.layers,
            &Provenance::file(file),
        )?;
        Ok(config)
    }

    /// Parses a TOML document; unknown keys are rejected with a suggestion.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let (mut config, origins) = Self::parse(text, None)?;
        config.check_all(&origins)?;
        let none = StackSources::default();
        config.stack = layers::resolve(
            &none.flag,
            &none.env,
            &config.layers,
            &Provenance::file(None),
        )?;
        Ok(config)
    }

    /// The file's configuration, unchecked, and its keys' origins.
    fn parse(text: &str, path: Option<&Path>) -> Result<(Self, Origins), ConfigError> {
        let parse_error = |e: toml::de::Error| ConfigError::Parse {
            path: path.map(Path::to_owned).unwrap_or_default(),
            message: e.to_string(),
        };
        let table: toml::Table = toml::from_str(text).map_err(parse_error)?;
        let mut origins = Origins::default();
        check_keys(&table, "", &Provenance::file(path), &mut origins)?;
        let config = toml::from_str(text).map_err(parse_error)?;
        Ok((config, origins))
    }

    /// Checks the values of a configuration built or changed in code, as [`Config::load`]
    /// checks what it reads; an error's origin is [`Origin::Explicit`] (`set in code`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check_all(&Origins::set_in_code())
    }

    /// Checks values that parse but make no sense: each key's declared checks, then the keys
    /// that go in pairs. An error names where the value came from.
    fn check_all(&self, origins: &Origins) -> Result<(), ConfigError> {
        let invalid =
            |key: &str, message: String| ConfigError::invalid(key, origins.of(key), message);
        self.check("")
            .map_err(|(key, message)| invalid(&key, message))?;
        if self.auth.token.is_some() && self.auth.token_file.is_some() {
            return Err(invalid(
                "auth.token",
                "set auth.token or auth.token_file, not both".into(),
            ));
        }
        if self.alerts.webhook_format == WebhookFormat::Pagerduty
            && self.alerts.webhook_url.is_some()
            && self
                .alerts
                .webhook_token
                .as_deref()
                .unwrap_or("")
                .is_empty()
        {
            return Err(invalid(
                "alerts.webhook_format",
                "\"pagerduty\" needs the integration's routing key in alerts.webhook_token \
                 (TOOLSIZE_WEBHOOK_TOKEN)"
                    .into(),
            ));
        }
        if self.store.durability == Durability::Wal && self.store.data_dir.is_none() {
            return Err(invalid(
                "store.durability",
                "\"wal\" needs a data directory (store.data_dir, --data-dir)".into(),
            ));
        }
        match (&self.tls.cert_file, &self.tls.key_file) {
            (Some(_), None) => {
                return Err(invalid(
                    "tls.cert_file",
                    "set both tls.cert_file and tls.key_file, or neither".into(),
                ))
            }
            (None, Some(_)) => {
                return Err(invalid(
                    "tls.key_file",
                    "set both tls.cert_file and tls.key_file, or neither".into(),
                ))
            }
            (Some(_), Some(_)) if !cfg!(feature = "tls") => {
                return Err(invalid(
                    "tls.cert_file",
                    "this toolsize was built without the `tls` feature".into(),
                ))
            }
            _ => {}
        }
        Ok(())
    }

    /// The admin HTTP's base URL for links: `admin.external_url` without a trailing `/`, or
    /// `http://<admin.addr>`.
    pub(crate) fn admin_base_url(&self) -> String {
        match &self.admin.external_url {
            Some(u) => u.trim_end_matches('/').to_string(),
            None => format!("http://{}", self.admin.addr),
        }
    }
}

/// Checks every key of the file's `table` under `prefix` is known, and records it as coming
/// from the file (`from`).
fn check_keys(
    table: &toml::Table,
    prefix: &str,
    from: &Provenance,
    origins: &mut Origins,
) -> Result<(), ConfigError> {
    for (k, v) in table {
        let key = declare::join(prefix, k);
        if !keys::is_known(&key) {
            return Err(ConfigError::UnknownKey {
                suggestion: did_you_mean(&key, keys::KEYS.iter().map(|k| k.path.as_str()))
                    .map(str::to_owned),
                key,
            });
        }
        origins.record(&key, from);
        if let toml::Value::Table(t) = v {
            if keys::is_free(&key) {
                continue;
            }
            check_keys(t, &key, from, origins)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn flags(args: &[&str]) -> Flags {
        Flags::parse_from(args).unwrap()
    }

    /// A file holding `text`, removed on drop.
    struct TempFile(PathBuf);

    impl TempFile {
        fn new(name: &str, text: &str) -> Self {
            let dir =
                std::env::temp_dir().join(format!("toolsize-cfg-{name}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join("c.toml");
            std::fs::write(&path, text).unwrap();
            TempFile(path)
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(self.0.parent().unwrap());
        }
    }

    #[test]
    fn generated_config_parses_back_to_the_defaults() {
        let parsed = Config::from_toml(&keys::generated_config()).unwrap();
        assert_eq!(parsed, Config::default());
    }

    #[test]
    fn unknown_key_suggests_the_closest() {
        let err = Config::from_toml("[otlp]\ngrcp_addr = \"127.0.0.1:1\"\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown config key `otlp.grcp_addr` (did you mean `otlp.grpc_addr`?)"
        );
        let err = Config::from_toml("[alerts.p95_jump]\nmin_recnt = 3\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown config key `alerts.p95_jump.min_recnt` \
             (did you mean `alerts.p95_jump.min_recent`?)"
        );
        let err = Config::from_toml("[agregation]\n").unwrap_err();
        assert!(
            err.to_string().contains("did you mean `aggregation`"),
            "{err}"
        );
    }

    #[test]
    fn precedence_is_flags_env_file_defaults() {
        let file = TempFile::new(
            "precedence",
            "[aggregation]\nmax_series = 10\n[admin]\naddr = \"127.0.0.1:1\"\n\
             [otlp]\nhttp_addr = \"127.0.0.1:7\"\n[recognition]\nplaceholders = [\"x\"]\n",
        );
        let env = env(&[
            ("TOOLSIZE_MAX_SERIES", "20"),
            ("TOOLSIZE_ADMIN_ADDR", "127.0.0.1:2"),
            ("TOOLSIZE_PLACEHOLDERS", "<hidden>, [omitted]"),
            ("TOOLSIZE_ATTRIBUTE_VALUE_LENGTH_LIMITS", "1000,2048"),
        ]);
        let c = Config::load(Some(&file.0), env, &flags(&["--admin-addr", "127.0.0.1:3"])).unwrap();
        assert_eq!(c.admin.addr.0.port(), 3, "flag beats env");
        assert_eq!(c.aggregation.max_series, 20, "env beats file");
        assert_eq!(
            c.recognition.placeholders,
            ["<hidden>", "[omitted]"],
            "env beats file"
        );
        assert_eq!(c.recognition.attribute_value_length_limits, [1000, 2048]);
        assert_eq!(c.otlp.http_addr.0.port(), 7, "file beats default");
        assert_eq!(c.otlp.grpc_addr.0.port(), 4317, "default");
    }

    /// A bad value from each source is an error naming the key and that source.
    #[test]
    fn errors_name_where_the_bad_value_came_from() {
        let file = TempFile::new("origin", "[aggregation]\nmax_series = 0\n");
        let cases = [
            (
                Config::load(Some(&file.0), vec![], &Flags::default()),
                Origin::File,
                format!("config file {}", file.0.display()),
            ),
            (
                Config::load(
                    None,
                    env(&[("TOOLSIZE_MAX_SERIES", "0")]),
                    &Flags::default(),
                ),
                Origin::Env,
                "environment variable TOOLSIZE_MAX_SERIES".to_string(),
            ),
            (
                Config::load(None, vec![], &flags(&["--max-series", "0"])),
                Origin::Flag,
                "flag --max-series".to_string(),
            ),
            (
                Config::from_toml("[aggregation]\nmax_series = 0\n"),
                Origin::File,
                "config file".to_string(),
            ),
        ];
        for (result, want_origin, want_from) in cases {
            let e = result.unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("invalid value for aggregation.max_series ({want_from}): must be above 0")
            );
            let ConfigError::Invalid {
                key, origin, from, ..
            } = e
            else {
                panic!("{e:?}")
            };
            assert_eq!(
                (key.as_str(), origin, from),
                ("aggregation.max_series", want_origin, want_from)
            );
        }
        // The file's bad value is overridden by a good one: no error.
        let c = Config::load(
            Some(&file.0),
            env(&[("TOOLSIZE_MAX_SERIES", "5")]),
            &Flags::default(),
        )
        .unwrap();
        assert_eq!(c.aggregation.max_series, 5);
        // Text that is not the key's type names its source too.
        let e = Config::load(
            None,
            env(&[("TOOLSIZE_MAX_SERIES", "many")]),
            &Flags::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("invalid value for aggregation.max_series (environment variable TOOLSIZE_MAX_SERIES): \"many\""),
            "{e}"
        );
        let e = Config::load(None, vec![], &flags(&["--otlp-grpc-addr", "nope"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("invalid value for otlp.grpc_addr (flag --otlp-grpc-addr): \"nope\""),
            "{e}"
        );
        // A pair's check names the one that was given.
        let e = Config::load(None, vec![], &flags(&["--tls-key-file", "/k.pem"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("invalid value for tls.key_file (flag --tls-key-file): set both"),
            "{e}"
        );
    }

    #[test]
    fn a_configuration_changed_in_code_is_checked_as_such() {
        let mut c = Config::default();
        assert!(c.validate().is_ok());
        c.aggregation.max_series = 0;
        let e = c.validate().unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid value for aggregation.max_series (set in code): must be above 0"
        );
        assert!(matches!(
            e,
            ConfigError::Invalid {
                origin: Origin::Explicit,
                ..
            }
        ));
    }

    #[test]
    fn stack_errors_name_their_source() {
        let file = TempFile::new("stack-origin", "[layers]\nstack = [\"defualt\"]\n");
        let from = |r: Result<Config, ConfigError>| match r.unwrap_err() {
            ConfigError::Stack { from, .. } => from.unwrap(),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            from(Config::load(Some(&file.0), vec![], &Flags::default())),
            format!("config file {}", file.0.display())
        );
        assert_eq!(
            from(Config::load(
                None,
                env(&[("TOOLSIZE_STACK", "defualt")]),
                &Flags::default()
            )),
            "environment variable TOOLSIZE_STACK"
        );
        assert_eq!(
            from(Config::load(
                None,
                vec![],
                &flags(&["--stack", "default,defualt"])
            )),
            "flag --stack"
        );
        // A limit of 0 is refused by the limits' one parser, naming the flag.
        let e = Config::load(None, vec![], &flags(&["--ceiling-bytes", "0"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("invalid value for layers.ceiling_bytes (flag --ceiling-bytes)"),
            "{e}"
        );
        assert_eq!(
            from(Config::load(
                None,
                vec![],
                &flags(&["--stack", "default=x"])
            )),
            "flag --stack"
        );
        let e = Config::load(
            None,
            env(&[("TOOLSIZE_CEILING_BYTES", "lots")]),
            &Flags::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("invalid value for layers.ceiling_bytes (environment variable TOOLSIZE_CEILING_BYTES)"),
            "{e}"
        );
    }

    #[test]
    fn the_sdks_attribute_limit_ranks_below_every_toolsize_source_and_a_bad_one_is_refused() {
        let limits = |file: Option<&str>, pairs: &[(&str, &str)]| {
            let config = match file {
                Some(text) => {
                    let dir = std::env::temp_dir().join(format!(
                        "toolsize-otel-limit-{}-{}",
                        std::process::id(),
                        text.len()
                    ));
                    std::fs::create_dir_all(&dir).unwrap();
                    let path = dir.join("toolsize.toml");
                    std::fs::write(&path, text).unwrap();
                    Config::load(Some(&path), env(pairs), &Flags::default())
                }
                None => Config::load(None, env(pairs), &Flags::default()),
            };
            config.map(|c| c.recognition.attribute_value_length_limits)
        };
        const BOTH: &[(&str, &str)] = &[
            ("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "1000"),
            ("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", " 500 "),
        ];
        assert_eq!(limits(None, &[]).unwrap(), Vec::<u64>::new());
        assert_eq!(
            limits(None, BOTH).unwrap(),
            [500],
            "the span-specific one first"
        );
        assert_eq!(
            limits(None, &[("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "1000")]).unwrap(),
            [1000]
        );
        let file = "[recognition]\nattribute_value_length_limits = [64]\n";
        assert_eq!(limits(Some(file), BOTH).unwrap(), [64], "the file wins");
        let ours = [("TOOLSIZE_ATTRIBUTE_VALUE_LENGTH_LIMITS", "70")];
        assert_eq!(limits(None, &[ours[0], BOTH[0]]).unwrap(), [70]);
        for bad in ["lots", "0", "-5"] {
            let e = limits(None, &[("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", bad)])
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with(
                    "invalid value for recognition.attribute_value_length_limits \
                     (environment variable OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT)"
                ),
                "{e}"
            );
            assert!(e.contains("expected a whole number above 0"), "{e}");
        }
        assert_eq!(
            limits(Some(file), &[("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "lots")]).unwrap(),
            [64],
            "an SDK variable no one reads is no error"
        );
    }

    #[test]
    fn a_token_replaces_a_token_file_of_a_lower_source_only() {
        let file = TempFile::new("token", "[auth]\ntoken_file = \"/tmp/t\"\n");
        let c = Config::load(
            Some(&file.0),
            env(&[("TOOLSIZE_AUTH_TOKEN", "s3cret")]),
            &Flags::default(),
        )
        .unwrap();
        assert_eq!(c.auth.token.as_deref(), Some("s3cret"));
        assert_eq!(c.auth.token_file, None);
        let c = Config::load(
            Some(&file.0),
            env(&[("TOOLSIZE_AUTH_TOKEN", "s3cret")]),
            &flags(&["--auth-token-file", "/tmp/u"]),
        )
        .unwrap();
        assert_eq!(c.auth.token, None);
        assert_eq!(c.auth.token_file.as_deref(), Some(Path::new("/tmp/u")));
        // Both from one source: refused, naming it.
        let e = Config::load(
            None,
            env(&[
                ("TOOLSIZE_AUTH_TOKEN", "s3cret"),
                ("TOOLSIZE_AUTH_TOKEN_FILE", "/tmp/t"),
            ]),
            &Flags::default(),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "invalid value for auth.token (environment variable TOOLSIZE_AUTH_TOKEN): \
             set auth.token or auth.token_file, not both"
        );
    }

    #[test]
    fn bad_values_are_errors() {
        assert!(Config::from_toml("[store]\nsnapshot_interval = \"0s\"\n").is_err());
        assert!(Config::from_toml("[aggregation]\nwindows = [\"5 minutes\"]\n").is_err());
        assert!(Config::from_toml("[admin]\naddr = \"nope\"\n").is_err());
        assert!(Config::from_toml("[alerts]\nalertmanager_urls = [\"ftp://am\"]\n").is_err());
        assert_eq!(
            Config::from_toml("[alerts]\nalertmanager_urls = [\"https://am\"]\n").is_ok(),
            cfg!(feature = "tls"),
            "https sinks come with the tls feature"
        );
        assert!(Config::from_toml("[alerts]\nwebhook_format = \"teams\"\n").is_err());
        assert!(Config::from_toml(
            "[alerts]\nwebhook_url = \"http://pd\"\nwebhook_format = \"pagerduty\"\n"
        )
        .is_err());
        assert!(Config::from_toml("[alerts.over_ceiling]\nquiet_period = \"0s\"\n").is_err());
        assert!(Config::from_toml("[alerts.over_ceiling]\nquiet_perod = \"1s\"\n").is_err());
        assert!(Config::from_toml("[alerts]\nevaluation_interval = \"0s\"\n").is_err());
        assert!(Config::from_toml("[alerts.p95_jump]\nfactor = 1.0\n").is_err());
        assert!(Config::from_toml("[alerts.p95_jump]\nfactr = 3.0\n").is_err());
        assert!(Config::from_toml("[alerts.near_ceiling]\nratio = 1.5\n").is_err());
        assert!(Config::from_toml("[alerts.truncation_rate]\nthreshold = 1.0\n").is_err());
        for (text, key) in [
            (
                "[aggregation]\nmax_tool_name_bytes = 7\n",
                "aggregation.max_tool_name_bytes",
            ),
            (
                "[aggregation]\nmax_service_name_bytes = 4097\n",
                "aggregation.max_service_name_bytes",
            ),
            (
                "[otlp]\nmax_request_bytes = 1023\n",
                "otlp.max_request_bytes",
            ),
            ("[otlp]\nqueue_capacity = 0\n", "otlp.queue_capacity"),
            (
                "[otlp]\nmax_concurrent_requests = 0\n",
                "otlp.max_concurrent_requests",
            ),
            (
                "[listeners]\nadmin_max_connections = 0\n",
                "listeners.admin_max_connections",
            ),
            (
                "[listeners]\ngrpc_max_concurrent_streams = 0\n",
                "listeners.grpc_max_concurrent_streams",
            ),
            (
                "[auth]\napi_key_header = \"bad header\"\n",
                "auth.api_key_header",
            ),
            (
                "[alerts]\nwebhook_url = \"ftp://x\"\n",
                "alerts.webhook_url",
            ),
            (
                "[alerts.repeated_oversize]\ncount = 0\n",
                "alerts.repeated_oversize.count",
            ),
            ("[aggregation]\nwindows = []\n", "aggregation.windows"),
        ] {
            let e = Config::from_toml(text).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("invalid value for {key} (config file): ")),
                "{e}"
            );
        }
        let c = Config::from_toml(
            "[alerts]\nevaluation_interval = \"2s\"\n[alerts.p95_jump]\nfactor = 4.5\n\
             min_recent = 5\n[alerts.near_ceiling]\nenabled = false\n\
             [alerts.truncation_rate]\nthreshold = 0.1\nmin_count = 7\n",
        )
        .unwrap();
        assert_eq!(c.alerts.evaluation_interval.0, Duration::from_secs(2));
        assert_eq!(c.alerts.p95_jump.factor, 4.5);
        assert_eq!(c.alerts.p95_jump.min_recent, 5);
        assert_eq!(c.alerts.p95_jump.min_baseline, 50);
        assert!(!c.alerts.near_ceiling.enabled);
        assert_eq!(c.alerts.truncation_rate.threshold, 0.1);
        assert_eq!(c.alerts.truncation_rate.min_count, 7);
    }

    #[test]
    fn external_url_precedence_and_validation() {
        let file = TempFile::new("url", "[admin]\nexternal_url = \"http://file:9464\"\n");
        let file = Some(file.0.as_path());
        let env = env(&[("TOOLSIZE_EXTERNAL_URL", "https://env.example/toolsize")]);
        let from_file = Config::load(file, vec![], &Flags::default()).unwrap();
        assert_eq!(
            from_file.admin.external_url.as_deref(),
            Some("http://file:9464")
        );
        let c = Config::load(file, env.clone(), &Flags::default()).unwrap();
        assert_eq!(
            c.admin.external_url.as_deref(),
            Some("https://env.example/toolsize"),
            "env beats file"
        );
        let c = Config::load(file, env, &flags(&["--external-url", "http://flag:1"])).unwrap();
        assert_eq!(
            c.admin.external_url.as_deref(),
            Some("http://flag:1"),
            "flag beats env"
        );
        for bad in [
            "toolsize.internal",
            "ftp://x",
            "http://",
            "https:///runbook",
        ] {
            let e = Config::load(None, vec![], &flags(&["--external-url", bad]))
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("invalid value for admin.external_url (flag --external-url)"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn alertmanager_urls_from_env_and_flags() {
        let env = env(&[("TOOLSIZE_ALERTMANAGER_URLS", "http://a:9093, http://b:9093")]);
        let c = Config::load(None, env.clone(), &Flags::default()).unwrap();
        assert_eq!(
            c.alerts.alertmanager_urls,
            ["http://a:9093", "http://b:9093"]
        );
        let c = Config::load(
            None,
            env,
            &flags(&[
                "--alertmanager-url",
                "http://c:9093",
                "--alertmanager-url",
                "http://d:9093",
            ]),
        )
        .unwrap();
        assert_eq!(
            c.alerts.alertmanager_urls,
            ["http://c:9093", "http://d:9093"],
            "flag beats env"
        );
    }

    #[test]
    fn listener_durations_are_typed_at_load() {
        let c = Config::from_toml(
            "[listeners]\nheader_read_timeout = \"250ms\"\nidle_timeout = \"2m\"\n",
        )
        .unwrap();
        assert_eq!(
            c.listeners.header_read_timeout.0,
            Duration::from_millis(250)
        );
        assert_eq!(c.listeners.idle_timeout.0, Duration::from_secs(120));
        assert_eq!(c.listeners.body_timeout.0, DEFAULT_BODY_TIMEOUT);
        for bad in ["\"0s\"", "\"10\"", "\"ten\"", "10"] {
            let e = Config::from_toml(&format!("[listeners]\nbody_timeout = {bad}\n"));
            assert!(e.is_err(), "{bad}");
        }
        assert!(Config::from_toml("[listeners]\notlp_max_connections = 0\n").is_err());
    }

    #[test]
    fn durability_is_read_from_every_source_and_needs_a_data_dir() {
        assert_eq!(Config::default().store.durability, Durability::Snapshot);
        let c =
            Config::from_toml("[store]\ndata_dir = \"/tmp/x\"\ndurability = \"wal\"\n").unwrap();
        assert_eq!(c.store.durability, Durability::Wal);
        let c = Config::load(
            None,
            env(&[
                ("TOOLSIZE_DURABILITY", "wal"),
                ("TOOLSIZE_DATA_DIR", "/tmp/x"),
            ]),
            &Flags::default(),
        )
        .unwrap();
        assert_eq!(c.store.durability, Durability::Wal);
        let c = Config::load(
            None,
            env(&[("TOOLSIZE_DURABILITY", "wal")]),
            &flags(&["--durability", "snapshot"]),
        )
        .unwrap();
        assert_eq!(c.store.durability, Durability::Snapshot, "flag beats env");
        let e = Config::load(None, Vec::new(), &flags(&["--durability", "fsync"])).unwrap_err();
        assert!(
            e.to_string().contains("expected \"snapshot\" or \"wal\""),
            "{e}"
        );
        let e = Config::from_toml("[store]\ndurability = \"wal\"\n").unwrap_err();
        assert!(e.to_string().contains("needs a data directory"), "{e}");
        assert!(generated_config().contains("durability = \"snapshot\""));
    }

    #[test]
    fn alert_and_store_durations_are_typed_at_load() {
        let c = Config::from_toml(
            "[store]\nsnapshot_interval = \"250ms\"\n[aggregation]\nwindows = [\"30s\", \"2h\"]\n\
             [alerts]\nresend_interval = \"2m\"\n[alerts.over_ceiling]\nquiet_period = \"1h\"\n\
             [alerts.repeated_oversize]\nwindow = \"1d\"\n",
        )
        .unwrap();
        assert_eq!(c.store.snapshot_interval.0, Duration::from_millis(250));
        assert_eq!(c.alerts.resend_interval.0, Duration::from_secs(120));
        assert_eq!(
            c.alerts.over_ceiling.quiet_period.0,
            Duration::from_secs(3600)
        );
        assert_eq!(
            c.alerts.repeated_oversize.window.0,
            Duration::from_secs(86400)
        );
        let w: Vec<_> = c
            .aggregation
            .windows
            .iter()
            .map(|w| (w.label.as_str(), w.duration))
            .collect();
        assert_eq!(
            w,
            [
                ("30s", Duration::from_secs(30)),
                ("2h", Duration::from_secs(7200))
            ]
        );
        let e = Config::from_toml("[alerts]\nresend_interval = \"1 minute\"\n").unwrap_err();
        assert!(e.to_string().contains("resend_interval"), "{e}");
        let e = Config::from_toml("[aggregation]\nwindows = [\"2s\"]\n").unwrap_err();
        assert!(e.to_string().contains("shorter than 5s"), "{e}");

        let c = Config::load(
            None,
            env(&[("TOOLSIZE_WINDOWS", " 1m, 10m ,")]),
            &Flags::default(),
        )
        .unwrap();
        let labels: Vec<_> = c.aggregation.windows.iter().map(|w| &w.label).collect();
        assert_eq!(labels, ["1m", "10m"]);
        let e = Config::load(
            None,
            env(&[("TOOLSIZE_SNAPSHOT_INTERVAL", "0s")]),
            &Flags::default(),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid value for store.snapshot_interval \
             (environment variable TOOLSIZE_SNAPSHOT_INTERVAL): \"0s\" must be above 0"
        );
        let e = Config::load(None, Vec::new(), &flags(&["--window", "5 minutes"])).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("invalid value for aggregation.windows (flag --window)"),
            "{e}"
        );
        let c = Config::load(
            None,
            env(&[("TOOLSIZE_SNAPSHOT_INTERVAL", "1s")]),
            &flags(&["--snapshot-interval", "90s"]),
        )
        .unwrap();
        assert_eq!(
            c.store.snapshot_interval.0,
            Duration::from_secs(90),
            "flag beats env"
        );
    }

    #[test]
    fn unknown_toolsize_variables_warn_with_a_suggestion() {
        let w = unknown_env_warnings([
            "TOOLSIZE_MAX_SERIE",
            "TOOLSIZE_SPILL_DIR",
            "TOOLSIZE_DATA_DIR",
            "TOOLSIZE_PLACEHOLDERS",
            "TOOLSIZE_ZZZZZZZZZZZZZZZZZZZZZZZZ",
            "PATH",
        ]);
        assert_eq!(
            w,
            [
                "unknown environment variable `TOOLSIZE_MAX_SERIE` ignored (did you mean `TOOLSIZE_MAX_SERIES`?)",
                "unknown environment variable `TOOLSIZE_ZZZZZZZZZZZZZZZZZZZZZZZZ` ignored",
            ]
        );
    }
}
