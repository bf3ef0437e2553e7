//! The keys of the configuration, as its sections declare them.
//!
//! Each key is declared once, on its field (the `section!` macro of `declare.rs`); [`KEYS`]
//! lists them in file order. Everything else is derived from that list: the file
//! `toolsize gen-config` prints (`generated_config`, the defaults read from `Config::default()`),
//! the keys a file may hold (with a "did you mean" over [`KEYS`]), the variables
//! [`Config::load`](super::Config::load) reads, the flags of `toolsize serve`
//! ([`Flags`](super::Flags)), the table of `docs/collector.md` ([`sources_table`]) and how the
//! text of a variable or flag becomes its key's value (by the key's type).

use std::sync::LazyLock;

use serde_json::Value;

use super::declare::{join, json_from_texts, Section, Text};
use super::Config;

/// One key of the file (a table or a value).
#[derive(Debug, Clone)]
pub struct Key {
    /// Dotted path: `otlp` (a table) or `otlp.grpc_addr`.
    pub(crate) path: String,
    /// What it does: its field's (or table's) documentation, one line per line of the comment.
    pub(crate) doc: &'static str,
    /// The `TOOLSIZE_*` variable setting it, if any.
    pub(crate) env: Option<&'static str>,
    /// The `toolsize serve` flag setting it, if any.
    pub flag: Option<&'static str>,
    /// The flag's value placeholder in `--help` (`ADDR`, `N`, …).
    pub(crate) value_name: Option<&'static str>,
    /// A value shown commented out in the generated file, for a key unset by default; for a
    /// free table, the commented example lines.
    pub(crate) example: Option<&'static str>,
    /// Set by a higher source than this key's, this key unsets that one (a token replaces a
    /// token file given in the file, and the other way round).
    pub(crate) replaces: Option<&'static str>,
    /// A table whose keys are the user's (layer ids) or a list of tables: not checked against
    /// [`KEYS`], shown in the generated file by its example only.
    pub(crate) free: bool,
    /// A table (a section), not a value.
    pub(crate) table: bool,
    /// The key's value from the texts of a variable or flag, as JSON; `None` for tables.
    pub(crate) parse: Option<Parse>,
}

/// How a key's value is read from the texts of a variable or flag: as JSON, ready to be set.
pub(crate) type Parse = fn(&[String]) -> Result<Value, String>;

impl Key {
    /// The table at `path`, documented by `doc`.
    pub(crate) fn table(path: String, doc: &'static str) -> Key {
        Key {
            path,
            doc,
            env: None,
            flag: None,
            value_name: None,
            example: None,
            replaces: None,
            free: false,
            table: true,
            parse: None,
        }
    }

    /// The value `leaf` of the table at `path`, of type `T`.
    pub(crate) fn value<T: Text>(path: &str, leaf: &str, doc: &'static str) -> Key {
        Key {
            table: false,
            parse: Some(json_from_texts::<T>),
            ..Key::table(join(path, leaf), doc)
        }
    }

    pub(crate) fn env(self, name: &'static str) -> Self {
        Key {
            env: Some(name),
            ..self
        }
    }

    pub(crate) fn flag(self, name: &'static str) -> Self {
        Key {
            flag: Some(name),
            ..self
        }
    }

    pub(crate) fn value_name(self, name: &'static str) -> Self {
        Key {
            value_name: Some(name),
            ..self
        }
    }

    pub(crate) fn example(self, value: &'static str) -> Self {
        Key {
            example: Some(value),
            ..self
        }
    }

    pub(crate) fn replaces(self, other: &'static str) -> Self {
        Key {
            replaces: Some(other),
            ..self
        }
    }

    /// A table whose contents are the user's.
    pub(crate) fn free(self) -> Self {
        Key {
            free: true,
            table: false,
            parse: None,
            ..self
        }
    }

    /// The last segment of the path.
    pub(crate) fn leaf(&self) -> &str {
        self.path.rsplit('.').next().unwrap_or(&self.path)
    }

    /// The documentation's lines (a `///` comment's leading space removed).
    pub(crate) fn doc_lines(&self) -> impl Iterator<Item = &'static str> {
        self.doc
            .lines()
            .map(|l| l.strip_prefix(' ').unwrap_or(l).trim_end())
    }

    /// The documentation's first sentence, on one line (a flag's help).
    pub(crate) fn summary(&self) -> String {
        let text = self.doc_lines().collect::<Vec<_>>().join(" ");
        let mut from = 0;
        while let Some(i) = text[from..].find(". ").map(|i| i + from) {
            if !(text[..i].ends_with("e.g") || text[..i].ends_with("i.e")) {
                return text[..=i].to_string();
            }
            from = i + 1;
        }
        text
    }

    /// Whether the key holds a list.
    pub(crate) fn is_list(&self) -> bool {
        matches!(default_of(self), Some(Value::Array(_)))
    }

    /// The JSON pointer of the key in the serialised configuration.
    fn pointer(path: &str) -> String {
        format!("/{}", path.replace('.', "/"))
    }
}

/// Every key, in the order of the generated file: each section's table, its values, then its
/// sub-sections.
pub static KEYS: LazyLock<Vec<Key>> = LazyLock::new(|| {
    let mut keys = Vec::new();
    Config::keys("", &mut keys);
    keys
});

/// The defaults, as the file would hold them.
static DEFAULTS: LazyLock<Value> =
    LazyLock::new(|| serde_json::to_value(Config::default()).expect("the defaults serialise"));

/// A key's default, as the file would hold it (`null`: unset).
pub(crate) fn default_of(key: &Key) -> Option<&'static Value> {
    DEFAULTS.pointer(&Key::pointer(&key.path))
}

/// The key at `path`, if the file may hold it.
pub(crate) fn find(path: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.path == path)
}

/// Whether a file may hold `path`.
pub(crate) fn is_known(path: &str) -> bool {
    find(path).is_some()
}

/// Whether `path` is a table whose contents are the user's.
pub(crate) fn is_free(path: &str) -> bool {
    find(path).is_some_and(|k| k.free)
}

/// Every `TOOLSIZE_*` variable that sets a key, with its key.
pub(crate) fn env_vars() -> impl Iterator<Item = (&'static str, &'static Key)> {
    KEYS.iter().filter_map(|k| k.env.map(|e| (e, k)))
}

/// Sets `key` of `config` from the texts of a variable or flag, parsed as the key's type
/// ([`Text`]); the value then goes through the same deserialisation as the file's. A failed set
/// changes nothing.
pub(crate) fn set(config: &mut Config, key: &Key, texts: &[String]) -> Result<(), String> {
    let parse = key
        .parse
        .ok_or_else(|| format!("{} is a table, not a value", key.path))?;
    let value = parse(texts)?;
    replace(config, &key.path, value)
}

/// Unsets the optional key at `path` of `config`.
pub(crate) fn unset(config: &mut Config, path: &str) -> Result<(), String> {
    replace(config, path, Value::Null)
}

fn replace(config: &mut Config, path: &str, value: Value) -> Result<(), String> {
    let mut doc = serde_json::to_value(&*config).map_err(|e| e.to_string())?;
    let slot = doc
        .pointer_mut(&Key::pointer(path))
        .ok_or_else(|| format!("{path} is not a key"))?;
    *slot = value;
    let mut updated: Config = serde_json::from_value(doc).map_err(|e| e.to_string())?;
    updated.stack = std::mem::take(&mut config.stack);
    *config = updated;
    Ok(())
}

/// The complete commented configuration file `toolsize gen-config` prints: every key of
/// [`KEYS`] with its documentation, its variable and flag, and its default (a key unset by
/// default is shown commented out with an example).
pub(crate) fn generated_config() -> String {
    let mut out = String::from(
        "# toolsize collector configuration (`toolsize serve --config FILE`).\n\
         # Precedence: command-line flags > TOOLSIZE_* environment variables > this file > defaults.\n\
         # Every value below is the default. Unknown keys are errors.\n",
    );
    let comment = |out: &mut String, lines: &mut dyn Iterator<Item = &str>| {
        for line in lines {
            out.push_str(if line.is_empty() { "#" } else { "# " });
            out.push_str(line);
            out.push('\n');
        }
    };
    for key in KEYS.iter() {
        let value = default_of(key);
        if key.free {
            comment(&mut out, &mut key.doc_lines());
            comment(&mut out, &mut key.example.unwrap_or_default().lines());
            continue;
        }
        if key.table {
            out.push_str(&format!("\n[{}]\n", key.path));
            comment(&mut out, &mut key.doc_lines());
            out.push('\n');
            continue;
        }
        comment(&mut out, &mut key.doc_lines());
        let sources: Vec<String> = key
            .env
            .map(|e| format!("env {e}"))
            .into_iter()
            .chain(key.flag.map(|f| format!("flag {f}")))
            .collect();
        if !sources.is_empty() {
            out.push_str(&format!("# ({})\n", sources.join("; ")));
        }
        match value {
            Some(Value::Null) | None => out.push_str(&format!(
                "# {} = {}\n",
                key.leaf(),
                key.example.unwrap_or("\"\"")
            )),
            Some(v) => out.push_str(&format!("{} = {}\n", key.leaf(), inline(v))),
        }
    }
    out
}

/// The Markdown table of every key a variable or flag sets (flag, variable, key, default), as
/// `docs/collector.md` shows it; a test keeps the two equal.
pub fn sources_table() -> String {
    let mut out = String::from("| flag | environment | file key | default |\n|---|---|---|---|\n");
    for key in KEYS.iter().filter(|k| k.env.is_some() || k.flag.is_some()) {
        let code = |s: Option<&str>| s.map(|s| format!("`{s}`")).unwrap_or_default();
        let default = match default_of(key) {
            Some(Value::Null) | None => "unset".to_string(),
            Some(v) => format!("`{}`", inline(v)),
        };
        out.push_str(&format!(
            "| {} | {} | `{}` | {default} |\n",
            code(key.flag),
            code(key.env),
            key.path
        ));
    }
    out
}

/// A default as a TOML inline value. The defaults are strings, numbers, booleans and lists of
/// them, whose JSON spelling is also TOML's (serde_json writes floats with a fraction).
fn inline(v: &Value) -> String {
    match v {
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(inline).collect::<Vec<_>>().join(", ")
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path of a serialised configuration, tables included; free tables not entered.
    fn paths(v: &Value, prefix: &str, out: &mut Vec<String>) {
        let Value::Object(map) = v else { return };
        for (k, v) in map {
            let path = join(prefix, k);
            out.push(path.clone());
            if !is_free(&path) {
                paths(v, &path, out);
            }
        }
    }

    #[test]
    fn the_structs_and_the_declaration_name_the_same_keys() {
        let mut from_structs = Vec::new();
        paths(&DEFAULTS, "", &mut from_structs);
        from_structs.sort();
        let mut declared: Vec<String> = KEYS.iter().map(|k| k.path.clone()).collect();
        declared.sort();
        assert_eq!(from_structs, declared);
        let mut seen = std::collections::HashSet::new();
        for k in KEYS.iter() {
            assert!(seen.insert(&k.path), "{} declared twice", k.path);
            assert!(
                k.doc_lines().any(|l| !l.is_empty()),
                "{} has no doc",
                k.path
            );
            let object = matches!(default_of(k), Some(Value::Object(_)));
            assert_eq!(k.table, object && !k.free, "{}", k.path);
            if let Some(e) = k.env {
                assert!(e.starts_with("TOOLSIZE_"), "{e}");
            }
            if let Some(other) = k.replaces {
                assert!(
                    find(other).is_some_and(|o| o.replaces == Some(&*k.path)),
                    "{other}"
                );
            }
            if let Some(f) = k.flag {
                assert!(f.starts_with("--"), "{f}");
                assert!(k.value_name.is_some(), "{f} has no value name");
            }
        }
    }

    /// A value as the text of a variable: a list comma-separated, a string unquoted.
    fn as_text(v: &Value) -> String {
        match v {
            Value::Array(a) => a.iter().map(as_text).collect::<Vec<_>>().join(","),
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    }

    /// Every variable reads the text of its key's default back to the default, and that of its
    /// example (a key unset by default) to the example: no table to keep per variable.
    #[test]
    fn every_variable_reads_its_key_from_text() {
        for (name, key) in env_vars() {
            if key.path.starts_with("layers.") {
                continue; // resolved with the stack (`super::layers`)
            }
            let mut c = Config::default();
            let default = default_of(key).unwrap();
            let (text, want) = match (default, key.example) {
                (Value::Null, Some(example)) => {
                    let v: toml::Value = toml::from_str(&format!("v = {example}")).unwrap();
                    let v = serde_json::to_value(&v["v"]).unwrap();
                    (as_text(&v), v)
                }
                (default, _) => (as_text(default), default.clone()),
            };
            set(&mut c, key, std::slice::from_ref(&text))
                .unwrap_or_else(|e| panic!("{name} {text:?}: {e}"));
            let v = serde_json::to_value(&c).unwrap();
            let got = v.pointer(&Key::pointer(&key.path)).unwrap();
            let want = match want {
                Value::String(s) if s.is_empty() => Value::Null, // blank text: unset
                w => w,
            };
            assert_eq!(*got, want, "{name} {text:?}");
        }
    }

    #[test]
    fn variables_set_their_key_from_text() {
        for (name, raw) in [
            ("TOOLSIZE_OTLP_GRPC_ADDR", "127.0.0.1:1"),
            ("TOOLSIZE_MAX_REQUEST_BYTES", "2048"),
            ("TOOLSIZE_WINDOWS", "1m,10m"),
            ("TOOLSIZE_MAX_SERIES", "7"),
            ("TOOLSIZE_ATTRIBUTE_VALUE_LENGTH_LIMITS", "1000,2048"),
            ("TOOLSIZE_PLACEHOLDERS", "<hidden>,[omitted]"),
            ("TOOLSIZE_DATA_DIR", "/tmp/x"),
            ("TOOLSIZE_SNAPSHOT_INTERVAL", "250ms"),
            ("TOOLSIZE_AUTH_TOKEN", "t"),
        ] {
            let (_, key) = env_vars().find(|(n, _)| *n == name).unwrap();
            let mut c = Config::default();
            set(&mut c, key, &[raw.to_string()]).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_ne!(c, Config::default(), "{name} changed nothing");
            let v = serde_json::to_value(&c).unwrap();
            assert_eq!(
                as_text(v.pointer(&Key::pointer(&key.path)).unwrap()),
                raw,
                "{name}"
            );
        }
    }

    #[test]
    fn text_of_the_wrong_type_is_an_error_naming_the_value() {
        let mut c = Config::default();
        let e = set(
            &mut c,
            find("aggregation.max_series").unwrap(),
            &["many".into()],
        )
        .unwrap_err();
        assert!(e.starts_with("\"many\": "), "{e}");
        let e = set(
            &mut c,
            find("alerts.p95_jump.factor").unwrap(),
            &["x".into()],
        )
        .unwrap_err();
        assert!(e.starts_with("\"x\": "), "{e}");
        let key = find("recognition.attribute_value_length_limits").unwrap();
        let e = set(&mut c, key, &["100, ten".into()]).unwrap_err();
        assert!(e.starts_with("\"ten\": "), "{e}");
        let e = set(&mut c, find("otlp.grpc_addr").unwrap(), &["nope".into()]).unwrap_err();
        assert!(e.starts_with("\"nope\": "), "{e}");
        let e = set(
            &mut c,
            find("store.snapshot_interval").unwrap(),
            &["0s".into()],
        )
        .unwrap_err();
        assert_eq!(e, "\"0s\" must be above 0");
        assert_eq!(c, Config::default(), "a failed set changes nothing");
        set(&mut c, find("tls.cert_file").unwrap(), &["/c.pem".into()]).unwrap();
        set(&mut c, find("tls.cert_file").unwrap(), &["".into()]).unwrap();
        assert_eq!(c, Config::default(), "blank text unsets");
    }

    #[test]
    fn the_first_sentence_is_the_summary() {
        let k = find("layers.stack").unwrap();
        assert!(k
            .summary()
            .starts_with("The layers in front of the model, by id, e.g. ["));
        assert_eq!(
            find("store.snapshot_interval").unwrap().summary(),
            "Interval between snapshots; one is also written on SIGTERM/SIGINT."
        );
        assert_eq!(
            find("admin.addr").unwrap().summary(),
            "Admin HTTP listen address."
        );
    }

    #[test]
    fn every_value_key_shows_its_default_or_an_example() {
        let text = generated_config();
        for k in KEYS.iter() {
            if k.free {
                for line in k.example.unwrap().lines() {
                    assert!(text.contains(&format!("\n# {line}\n")), "{}", k.path);
                }
                continue;
            }
            let leaf = k.leaf();
            let shown = [
                format!("\n{leaf} = "),
                format!("\n# {leaf} = "),
                format!("\n[{}]\n", k.path),
            ];
            assert!(
                shown.iter().any(|s| text.contains(s.as_str())),
                "{} not in the generated file",
                k.path
            );
            for src in k.env.into_iter().chain(k.flag) {
                assert!(text.contains(src), "{src} not mentioned");
            }
        }
    }
}
