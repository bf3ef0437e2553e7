//! The one declaration of the configuration's keys.
//!
//! The typed structs of [`super`] give each key its type and default; [`KEYS`] gives it its
//! documentation, its `TOOLSIZE_*` variable and its flag. Everything else is derived from the
//! two: the file `toolsize gen-config` prints ([`generated_config`], the defaults read from
//! `Config::default()`), the keys a file may hold ([`is_known`], with a "did you mean" over
//! [`KEYS`]), the environment variables [`Config::load`](super::Config::load) reads
//! ([`env_vars`]) and how a variable's text becomes its key's value ([`set`], by the key's
//! type in the defaults). A test checks that the structs and [`KEYS`] name the same keys, so a
//! new key is its field, its default and one entry here.

use serde_json::Value;

use super::Config;

/// One key of the file (a table or a value).
#[derive(Debug, Clone, Copy)]
pub struct Key {
    /// Dotted path: `otlp` (a table) or `otlp.grpc_addr`.
    pub(crate) path: &'static str,
    /// What it does, as comment lines of the generated file (lines separated by `\n`).
    pub(crate) doc: &'static str,
    /// The `TOOLSIZE_*` variable setting it, if any.
    pub(crate) env: Option<&'static str>,
    /// The `toolsize serve` flag setting it, if any (parsed by clap, applied by
    /// `Config::load`).
    pub flag: Option<&'static str>,
    /// A value shown commented out in the generated file, for a key unset by default; for a
    /// free table, the commented example lines.
    pub(crate) example: Option<&'static str>,
    /// Set by the environment or a flag, this key unsets that one (a token replaces a token
    /// file given by a lower source, and the other way round).
    pub(crate) replaces: Option<&'static str>,
    /// A table whose keys are the user's (layer ids) or a list of tables: not checked against
    /// [`KEYS`], shown in the generated file by its example only.
    pub(crate) free: bool,
}

const fn key(path: &'static str, doc: &'static str) -> Key {
    Key {
        path,
        doc,
        env: None,
        flag: None,
        example: None,
        replaces: None,
        free: false,
    }
}

impl Key {
    const fn env(self, name: &'static str) -> Self {
        Key {
            env: Some(name),
            ..self
        }
    }

    const fn flag(self, name: &'static str) -> Self {
        Key {
            flag: Some(name),
            ..self
        }
    }

    const fn example(self, value: &'static str) -> Self {
        Key {
            example: Some(value),
            ..self
        }
    }

    const fn replaces(self, other: &'static str) -> Self {
        Key {
            replaces: Some(other),
            ..self
        }
    }

    const fn free(self) -> Self {
        Key { free: true, ..self }
    }

    /// The last segment of the path.
    pub(crate) fn leaf(&self) -> &'static str {
        self.path.rsplit('.').next().unwrap_or(self.path)
    }

    /// The JSON pointer of the key in the serialised configuration.
    fn pointer(path: &str) -> String {
        format!("/{}", path.replace('.', "/"))
    }
}

/// Every key, in the order of the generated file.
pub const KEYS: &[Key] = &[
    key("otlp", ""),
    key("otlp.grpc_addr", "OTLP/gRPC listen address.")
        .env("TOOLSIZE_OTLP_GRPC_ADDR")
        .flag("--otlp-grpc-addr"),
    key("otlp.http_addr", "OTLP/HTTP listen address, POST /v1/traces.")
        .env("TOOLSIZE_OTLP_HTTP_ADDR")
        .flag("--otlp-http-addr"),
    key(
        "otlp.max_request_bytes",
        "Largest request accepted, in bytes, measured after gzip decompression. Larger requests are\n\
         answered 413 (HTTP) or RESOURCE_EXHAUSTED (gRPC).",
    )
    .env("TOOLSIZE_MAX_REQUEST_BYTES"),
    key(
        "otlp.queue_capacity",
        "Requests queued between the receivers and the aggregator. When the queue is full the\n\
         receivers answer 503 + Retry-After (HTTP) or UNAVAILABLE (gRPC) and count the refusal.",
    ),
    key(
        "otlp.max_concurrent_requests",
        "OTLP requests (HTTP and gRPC together) whose bodies are read at the same time; each may hold\n\
         up to max_request_bytes twice (compressed and inflated), so this bounds that memory. Further\n\
         requests are answered 503 + Retry-After (HTTP) or UNAVAILABLE (gRPC), counted as refused with\n\
         reason \"overloaded\".",
    ),
    key("admin", ""),
    key(
        "admin.addr",
        "Admin HTTP: the status page /, /tools/{tool}, /metrics, /api/v1/tools, /api/v1/tools/{tool},\n\
         /api/v1/tools/{tool}/history, /api/v1/layers, /api/v1/alerts, /runbook, /healthz, /readyz.",
    )
    .env("TOOLSIZE_ADMIN_ADDR")
    .flag("--admin-addr"),
    key(
        "admin.external_url",
        "The URL under which others reach the admin HTTP, for the links alerts carry (generatorURL and\n\
         runbook_url, e.g. https://toolsize-1.internal/runbook#toolresultoverceiling); unset, the links\n\
         use http://<addr>.",
    )
    .env("TOOLSIZE_EXTERNAL_URL")
    .flag("--external-url")
    .example("\"https://toolsize-1.internal\""),
    key("aggregation", ""),
    key(
        "aggregation.windows",
        "Sliding windows for quantiles and counts (units: s, m, h, d); comma-separated in the\n\
         environment, the flag repeatable.",
    )
    .env("TOOLSIZE_WINDOWS")
    .flag("--window"),
    key(
        "aggregation.max_series",
        "Cardinality cap on (service, tool) series; results of further series are counted in one\n\
         overflow series, tool=\"__overflow__\".",
    )
    .env("TOOLSIZE_MAX_SERIES")
    .flag("--max-series"),
    key(
        "aggregation.max_tool_name_bytes",
        "Longest tool name kept, in bytes, cut on a character boundary; control, format (bidi,\n\
         zero-width) and line separator characters are replaced with \"_\". Cuts are counted in\n\
         toolsize_label_values_sanitized_total.",
    ),
    key(
        "aggregation.max_service_name_bytes",
        "Longest service.name kept, in bytes; cut and cleaned like tool names. With both limits and\n\
         max_series, the size of /metrics and of the API is bounded (see docs/collector.md).",
    ),
    key(
        "aggregation.largest_results",
        "Largest recent results kept per series, with trace id, span id and args hash.",
    ),
    key(
        "aggregation.top_args_hashes",
        "Argument hashes tracked per series, to find the most repeated calls.",
    ),
    key("recognition", ""),
    key(
        "recognition.attribute_value_length_limits",
        "Attribute value length limits, in characters, of the tracing SDKs in front of the daemon\n\
         (e.g. OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT). Result content of exactly that length is\n\
         flagged \"truncated upstream\". Empty: the daemon's own OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT /\n\
         OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT if set; limits are also learned from the data.",
    ),
    key(
        "recognition.placeholders",
        "Content values that mean \"hidden\": the result's size is unknown, never the placeholder's.",
    ),
    key(
        "recognition.join_window",
        "How long the signals of one coding agent's tool call (log record, span event, span) are\n\
         waited for, from the first, before the call is counted once (see docs/agents.md). The\n\
         agents' SDKs export every 5 s by default and flush at exit.",
    )
    .env("TOOLSIZE_JOIN_WINDOW"),
    key("store", ""),
    key(
        "store.data_dir",
        "Directory for snapshots of the aggregated state, restored at start. Unset: memory only.",
    )
    .env("TOOLSIZE_DATA_DIR")
    .flag("--data-dir")
    .example("\"/var/lib/toolsize\""),
    key(
        "store.snapshot_interval",
        "Interval between snapshots; one is also written on SIGTERM/SIGINT.",
    )
    .env("TOOLSIZE_SNAPSHOT_INTERVAL")
    .flag("--snapshot-interval"),
    key("alerts", ""),
    key(
        "alerts.alertmanager_urls",
        "Alertmanager base URLs (http://host:port); every alert is posted to each one\n\
         (POST /api/v2/alerts). Comma-separated in the environment, the flag repeatable.",
    )
    .env("TOOLSIZE_ALERTMANAGER_URLS")
    .flag("--alertmanager-url"),
    key(
        "alerts.resend_interval",
        "Interval between resends of every firing alert; each send sets endsAt = now + 4 x this.",
    ),
    key(
        "alerts.webhook_url",
        "A URL receiving the same JSON list of alerts as Alertmanager.",
    )
    .example("\"http://127.0.0.1:8080/alerts\""),
    key("alerts.webhook_token", "Bearer token sent to the webhook.")
        .env("TOOLSIZE_WEBHOOK_TOKEN")
        .example("\"\""),
    key(
        "alerts.evaluation_interval",
        "Interval between evaluations of the window rules (p95_jump, near_ceiling, truncation_rate).\n\
         They read the aggregated windows (\"recent\" = the shortest of [aggregation] windows, 5m by\n\
         default) and resolve within 3 x this once their condition no longer holds.",
    ),
    key(
        "alerts.over_ceiling",
        "ToolResultOverCeiling: a result over the ceiling of a layer, per (service, tool, layer).",
    ),
    key("alerts.over_ceiling.enabled", ""),
    key("alerts.over_ceiling.severity", ""),
    key(
        "alerts.over_ceiling.quiet_period",
        "Resolves after this long without an over-ceiling result.",
    ),
    key(
        "alerts.repeated_oversize",
        "ToolArgsRepeatedlyOversize: `count` over-ceiling results with the same arguments hash within\n\
         `window` (an agent retrying the same huge call); resolves after a window without any.",
    ),
    key("alerts.repeated_oversize.enabled", ""),
    key("alerts.repeated_oversize.severity", ""),
    key("alerts.repeated_oversize.count", ""),
    key("alerts.repeated_oversize.window", ""),
    key(
        "alerts.p95_jump",
        "ToolResultSizeP95Jump: per (service, tool), the p95 of result bytes in the recent window is at\n\
         least `factor` x the p95 of the baseline: the slots of the longest window (1h) that ended\n\
         before the recent window began (a deploy or a changed query made results larger).",
    ),
    key("alerts.p95_jump.enabled", ""),
    key("alerts.p95_jump.severity", ""),
    key("alerts.p95_jump.factor", ""),
    key(
        "alerts.p95_jump.min_recent",
        "Minimum sized results in the recent window and in the baseline.",
    ),
    key("alerts.p95_jump.min_baseline", ""),
    key(
        "alerts.near_ceiling",
        "ToolResultSizeNearCeiling: the p95 of result bytes in the recent window is at least `ratio` of\n\
         the stack's ceiling in bytes (results about to be cut).",
    ),
    key("alerts.near_ceiling.enabled", ""),
    key("alerts.near_ceiling.severity", ""),
    key("alerts.near_ceiling.ratio", ""),
    key(
        "alerts.near_ceiling.min_count",
        "Minimum sized results in the recent window.",
    ),
    key(
        "alerts.truncation_rate",
        "ToolResultTruncationRate: (truncated + truncated upstream) / calls in the recent window is\n\
         above `threshold`.",
    ),
    key("alerts.truncation_rate.enabled", ""),
    key("alerts.truncation_rate.severity", ""),
    key("alerts.truncation_rate.threshold", ""),
    key(
        "alerts.truncation_rate.min_count",
        "Minimum calls in the recent window.",
    ),
    key(
        "listeners",
        "Time and connection budgets of the three listeners (OTLP/gRPC, OTLP/HTTP, admin). Connections\n\
         the daemon closes are counted in toolsize_connections_closed_total{listener,reason}.",
    ),
    key(
        "listeners.header_read_timeout",
        "Time to receive a request's head (HTTP/1.1; also the longest wait for the next request on a\n\
         keep-alive connection) or the HTTP/2 preface (gRPC); later, the connection is closed.",
    ),
    key(
        "listeners.body_timeout",
        "Deadline for receiving a whole OTLP request body; later, 408 (HTTP) or DEADLINE_EXCEEDED\n\
         (gRPC), counted as refused with reason \"timeout\". Bodies are read before a decoding slot is\n\
         taken, so slow clients never hold one.",
    ),
    key(
        "listeners.idle_timeout",
        "A connection on which nothing is read or written for this long is closed.",
    ),
    key(
        "listeners.otlp_max_connections",
        "Connections open at once on each OTLP listener, and on the admin listener; further ones are\n\
         closed at once. At start the caps are checked against the open-file limit (ulimit -n) and\n\
         lowered, with a warning, when they do not fit with 64 descriptors to spare.",
    ),
    key("listeners.admin_max_connections", ""),
    key(
        "listeners.grpc_max_concurrent_streams",
        "HTTP/2 streams one gRPC connection may have open at once.",
    ),
    key(
        "listeners.grpc_keepalive_interval",
        "HTTP/2 keepalive pings on gRPC connections; a peer that does not answer within the timeout is\n\
         disconnected.",
    ),
    key("listeners.grpc_keepalive_timeout", ""),
    key(
        "auth",
        "A shared token the OTLP receivers and the admin API require (all but /healthz and /readyz):\n\
         `Authorization: Bearer <token>`, e.g. OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20<token>.\n\
         A missing or wrong token gets 401 / UNAUTHENTICATED and is counted. Unset: no authentication.\n\
         Prefer token_file or the environment to a token in this file.",
    ),
    key("auth.token", "")
        .env("TOOLSIZE_AUTH_TOKEN")
        .example("\"\"")
        .replaces("auth.token_file"),
    key("auth.token_file", "")
        .env("TOOLSIZE_AUTH_TOKEN_FILE")
        .flag("--auth-token-file")
        .example("\"/etc/toolsize/token\"")
        .replaces("auth.token"),
    key(
        "auth.api_key_header",
        "A header that may carry the token instead, e.g. \"x-api-key\".",
    )
    .example("\"x-api-key\""),
    key(
        "auth.admin",
        "Whether the admin API requires the token too (default true when a token is set).",
    )
    .example("true"),
    key(
        "tls",
        "TLS on the three listeners (OTLP/gRPC, OTLP/HTTP, admin), PEM files; needs a toolsize built\n\
         with the `tls` feature. Exporters trust it with OTEL_EXPORTER_OTLP_CERTIFICATE=<CA file>.",
    ),
    key("tls.cert_file", "")
        .env("TOOLSIZE_TLS_CERT_FILE")
        .flag("--tls-cert-file")
        .example("\"/etc/toolsize/cert.pem\""),
    key("tls.key_file", "")
        .env("TOOLSIZE_TLS_KEY_FILE")
        .flag("--tls-key-file")
        .example("\"/etc/toolsize/key.pem\""),
    key(
        "layers",
        "The truncation layers between your tools and the model (`toolsize layers` lists the catalog).\n\
         Each result is compared with every layer, in its unit; the weakest layer that cuts it is\n\
         counted in toolsize_tool_results_over_ceiling_total{layer}. With no layer named, the stack is\n\
         one `default` layer of 16384 bytes. Precedence: flag > environment > this file > default.",
    ),
    key(
        "layers.stack",
        "Layer ids, e.g. [\"claude-code.mcp.max\", \"default\"]; in the environment and the flag\n\
         \"id[=limit],...\".",
    )
    .env(crate::layers::ENV_STACK)
    .flag("--stack"),
    key(
        "layers.ceiling_bytes",
        "The `default` layer's byte ceiling; setting it keeps `default` in the stack.",
    )
    .env(crate::layers::ENV_CEILING_BYTES)
    .flag("--ceiling-bytes")
    .example("16384"),
    key(
        "layers.overrides",
        "Limit overrides by layer id, in the layer's own unit:",
    )
    .free()
    .example("[layers.overrides]\n\"cline.message-builder\" = 6000"),
    key(
        "layers.custom",
        "Your own layers (always part of the stack); unit: bytes, chars, utf16_units, tokens, lines,\n\
         depth or items; scope: per_result (default), per_string, per_attribute or per_line.",
    )
    .free()
    .example(
        "[[layers.custom]]\nname = \"my-proxy\"\nlimit = 2000\nunit = \"chars\"\n\
         scope = \"per_result\"\naction = \"truncate_silent\"",
    ),
];

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

/// The defaults, as the file would hold them.
fn defaults() -> Value {
    serde_json::to_value(Config::default()).expect("the defaults serialise")
}

/// Sets `key` of `config` from the text of a variable or flag, parsed by the key's type: a list
/// is comma-separated, a number or boolean parsed as such, anything else taken as a string
/// (empty: unset). The value then goes through the same deserialisation as the file's, so a
/// duration or an address is checked the same way.
pub(crate) fn set(config: &mut Config, key: &Key, raw: &str) -> Result<(), String> {
    let mut doc = serde_json::to_value(&*config).map_err(|e| e.to_string())?;
    let slot = doc
        .pointer_mut(&Key::pointer(key.path))
        .ok_or_else(|| format!("{} is not a value", key.path))?;
    *slot = typed(slot, raw)?;
    if let Some(other) = key.replaces {
        if let Some(slot) = doc.pointer_mut(&Key::pointer(other)) {
            *slot = Value::Null;
        }
    }
    let mut updated: Config = serde_json::from_value(doc).map_err(|e| e.to_string())?;
    updated.stack = std::mem::take(&mut config.stack);
    *config = updated;
    Ok(())
}

/// `raw` as a value of the type `current` has.
fn typed(current: &Value, raw: &str) -> Result<Value, String> {
    let raw_trimmed = raw.trim();
    Ok(match current {
        Value::Array(_) => Value::Array(
            raw.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| Value::String(s.to_string()))
                .collect(),
        ),
        Value::Bool(_) => Value::Bool(
            raw_trimmed
                .parse()
                .map_err(|_| format!("{raw:?} is not true or false"))?,
        ),
        Value::Number(n) if n.is_f64() => raw_trimmed
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| format!("{raw:?} is not a number"))?,
        Value::Number(_) => Value::from(
            raw_trimmed
                .parse::<u64>()
                .map_err(|e| format!("{raw:?}: {e}"))?,
        ),
        Value::String(_) | Value::Null | Value::Object(_) => match raw.is_empty() {
            true => Value::Null,
            false => Value::String(raw.to_string()),
        },
    })
}

/// The complete commented configuration file `toolsize gen-config` prints: every key of
/// [`KEYS`] with its documentation, its variable and flag, and its default (a key unset by
/// default is shown commented out with an example).
pub(crate) fn generated_config() -> String {
    let defaults = defaults();
    let mut out = String::from(
        "# toolsize collector configuration (`toolsize serve --config FILE`).\n\
         # Precedence: command-line flags > TOOLSIZE_* environment variables > this file > defaults.\n\
         # Every value below is the default. Unknown keys are errors.\n",
    );
    let comment = |out: &mut String, text: &str| {
        for line in text.lines() {
            out.push_str(if line.is_empty() { "#" } else { "# " });
            out.push_str(line);
            out.push('\n');
        }
    };
    for key in KEYS {
        let value = defaults.pointer(&Key::pointer(key.path));
        if key.free {
            comment(&mut out, key.doc);
            comment(&mut out, key.example.unwrap_or_default());
            continue;
        }
        if let Some(Value::Object(_)) = value {
            out.push_str(&format!("\n[{}]\n", key.path));
            comment(&mut out, key.doc);
            continue;
        }
        comment(&mut out, key.doc);
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
    let defaults = defaults();
    let mut out = String::from("| flag | environment | file key | default |\n|---|---|---|---|\n");
    for key in KEYS.iter().filter(|k| k.env.is_some() || k.flag.is_some()) {
        let code = |s: Option<&str>| s.map(|s| format!("`{s}`")).unwrap_or_default();
        let default = match defaults.pointer(&Key::pointer(key.path)) {
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
            let path = match prefix {
                "" => k.clone(),
                p => format!("{p}.{k}"),
            };
            out.push(path.clone());
            if !is_free(&path) {
                paths(v, &path, out);
            }
        }
    }

    #[test]
    fn the_structs_and_the_declaration_name_the_same_keys() {
        let mut from_structs = Vec::new();
        paths(&defaults(), "", &mut from_structs);
        from_structs.sort();
        let mut declared: Vec<String> = KEYS.iter().map(|k| k.path.to_string()).collect();
        declared.sort();
        assert_eq!(from_structs, declared);
        let mut seen = std::collections::HashSet::new();
        for k in KEYS {
            assert!(seen.insert(k.path), "{} declared twice", k.path);
            if let Some(e) = k.env {
                assert!(e.starts_with("TOOLSIZE_"), "{e}");
            }
        }
    }

    #[test]
    fn every_variable_sets_its_key_from_text() {
        let samples = [
            ("TOOLSIZE_OTLP_GRPC_ADDR", "127.0.0.1:1"),
            ("TOOLSIZE_OTLP_HTTP_ADDR", "127.0.0.1:2"),
            ("TOOLSIZE_MAX_REQUEST_BYTES", "2048"),
            ("TOOLSIZE_ADMIN_ADDR", "127.0.0.1:3"),
            ("TOOLSIZE_EXTERNAL_URL", "https://t.example"),
            ("TOOLSIZE_WINDOWS", "1m,10m"),
            ("TOOLSIZE_MAX_SERIES", "7"),
            ("TOOLSIZE_DATA_DIR", "/tmp/x"),
            ("TOOLSIZE_SNAPSHOT_INTERVAL", "250ms"),
            ("TOOLSIZE_ALERTMANAGER_URLS", "http://a:1"),
            ("TOOLSIZE_WEBHOOK_TOKEN", "w"),
            ("TOOLSIZE_AUTH_TOKEN", "t"),
            ("TOOLSIZE_AUTH_TOKEN_FILE", "/tmp/t"),
            ("TOOLSIZE_TLS_CERT_FILE", "/tmp/c.pem"),
            ("TOOLSIZE_TLS_KEY_FILE", "/tmp/k.pem"),
            ("TOOLSIZE_JOIN_WINDOW", "2s"),
        ];
        for (name, key) in env_vars() {
            if key.path.starts_with("layers.") {
                continue; // resolved with the stack (`StackConfig::from_env`)
            }
            let (_, raw) = samples
                .iter()
                .find(|(n, _)| *n == name)
                .unwrap_or_else(|| panic!("no sample for {name}"));
            let mut c = Config::default();
            set(&mut c, key, raw).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_ne!(c, Config::default(), "{name} changed nothing");
            let v = serde_json::to_value(&c).unwrap();
            let got = v.pointer(&Key::pointer(key.path)).unwrap();
            let text = match got {
                Value::String(s) => s.clone(),
                Value::Array(a) => a
                    .iter()
                    .map(|x| x.as_str().unwrap().to_string())
                    .collect::<Vec<_>>()
                    .join(","),
                other => other.to_string(),
            };
            assert_eq!(text, *raw, "{name}");
        }
    }

    #[test]
    fn text_of_the_wrong_type_is_an_error_naming_the_value() {
        let mut c = Config::default();
        let e = set(&mut c, find("aggregation.max_series").unwrap(), "many").unwrap_err();
        assert!(e.contains("\"many\""), "{e}");
        let e = set(&mut c, find("alerts.p95_jump.factor").unwrap(), "x").unwrap_err();
        assert!(e.contains("not a number"), "{e}");
        let e = set(&mut c, find("otlp.grpc_addr").unwrap(), "nope").unwrap_err();
        assert!(!e.is_empty());
        assert_eq!(c, Config::default(), "a failed set changes nothing");
    }

    #[test]
    fn a_token_replaces_a_token_file_and_back() {
        let mut c = Config::default();
        set(&mut c, find("auth.token_file").unwrap(), "/tmp/t").unwrap();
        set(&mut c, find("auth.token").unwrap(), "s3cret").unwrap();
        assert_eq!(c.auth.token.as_deref(), Some("s3cret"));
        assert_eq!(c.auth.token_file, None);
        set(&mut c, find("auth.token_file").unwrap(), "/tmp/u").unwrap();
        assert_eq!(c.auth.token, None);
    }

    #[test]
    fn every_value_key_shows_its_default_or_an_example() {
        let text = generated_config();
        for k in KEYS {
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
