//! What `toolsize connect` writes for each coding agent: the settings `docs/agents.md` lists
//! (and `tests/coding_agents.rs` runs the agents with), in the file the agent reads them from.
//!
//! Every agent is pointed at the daemon's OTLP/HTTP listener (`--endpoint`), which every one of
//! them speaks; the hooks post to `/v1/hooks/{agent}` on the same listener. A plan is plain
//! data: the keys to set and the array entries to add, so that applying it twice changes
//! nothing and undoing it removes exactly those.

#[cfg(test)]
use std::path::Path;
use std::path::PathBuf;

use clap::ValueEnum;

use super::doc::{Format, J};

/// The agents `toolsize connect` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConnectAgent {
    /// Claude Code: `~/.claude/settings.json` (its `env` and a `PostToolUse` HTTP hook).
    #[value(alias = "claude")]
    ClaudeCode,
    /// Codex CLI: `$CODEX_HOME/config.toml` (`~/.codex/config.toml`), its `[otel]` exporters.
    Codex,
    /// Gemini CLI: `~/.gemini/settings.json`, its `telemetry`.
    #[value(alias = "gemini")]
    GeminiCli,
    /// Qwen Code: `~/.qwen/settings.json`, its `telemetry` and a `PostToolUse` HTTP hook.
    #[value(alias = "qwen")]
    QwenCode,
    /// opencode: `$XDG_CONFIG_HOME/opencode/opencode.json` (`~/.config/opencode/`).
    Opencode,
    /// GitHub Copilot CLI: an environment file to source (it reads its telemetry settings from
    /// its environment only), `~/.config/toolsize/copilot.env`.
    #[value(alias = "github-copilot")]
    Copilot,
}

/// One key to set: its path of keys from the document's root, and its value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Set {
    pub(crate) path: Vec<String>,
    pub(crate) value: J,
}

/// What connecting one agent writes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    /// The file's format.
    pub(crate) format: Format,
    /// Keys set to a value.
    pub(crate) sets: Vec<Set>,
    /// Entries added to an array (a hook), unless an equal entry is there.
    pub(crate) appends: Vec<Set>,
    /// What the user must still do by hand, printed after the change.
    pub(crate) notes: Vec<String>,
}

/// Why an agent cannot be connected as asked.
pub(crate) type PlanError = String;

fn set(path: &[&str], value: J) -> Set {
    Set {
        path: path.iter().map(|s| (*s).to_string()).collect(),
        value,
    }
}

fn s(v: &str) -> J {
    J::Str(v.to_string())
}

fn obj(pairs: Vec<(&str, J)>) -> J {
    J::Obj(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// The `PostToolUse` HTTP hook entry posting to the daemon.
fn http_hook(endpoint: &str, agent: &str, token: Option<&str>) -> J {
    let mut hook = vec![
        ("type", s("http")),
        ("url", s(&format!("{endpoint}/v1/hooks/{agent}"))),
        ("timeout", J::Num(5.into())),
    ];
    if let Some(t) = token {
        hook.push((
            "headers",
            obj(vec![("Authorization", s(&format!("Bearer {t}")))]),
        ));
    }
    obj(vec![
        ("matcher", s("*")),
        ("hooks", J::Arr(vec![obj(hook)])),
    ])
}

/// Claude Code: its telemetry variables in the settings' `env`, and its `PostToolUse` HTTP
/// hook.
fn claude_code(endpoint: &str, token: Option<&str>) -> (Vec<Set>, Vec<Set>) {
    let mut sets = vec![
        set(&["env", "CLAUDE_CODE_ENABLE_TELEMETRY"], s("1")),
        set(&["env", "OTEL_LOGS_EXPORTER"], s("otlp")),
        set(&["env", "OTEL_METRICS_EXPORTER"], s("otlp")),
        set(&["env", "OTEL_EXPORTER_OTLP_PROTOCOL"], s("http/protobuf")),
        set(&["env", "OTEL_EXPORTER_OTLP_ENDPOINT"], s(endpoint)),
    ];
    if let Some(t) = token {
        sets.push(set(
            &["env", "OTEL_EXPORTER_OTLP_HEADERS"],
            s(&format!("Authorization=Bearer {t}")),
        ));
    }
    let hook = set(
        &["hooks", "PostToolUse"],
        http_hook(endpoint, "claude-code", token),
    );
    (sets, vec![hook])
}

/// Codex: its three `[otel]` exporters, OTLP/HTTP protobuf.
fn codex(endpoint: &str, token: Option<&str>) -> Vec<Set> {
    let exporter = |signal: &str| {
        let mut http = vec![
            ("endpoint", s(&format!("{endpoint}/v1/{signal}"))),
            ("protocol", s("binary")),
        ];
        if let Some(t) = token {
            http.push((
                "headers",
                obj(vec![("Authorization", s(&format!("Bearer {t}")))]),
            ));
        }
        obj(vec![("otlp-http", obj(http))])
    };
    vec![
        set(&["otel", "exporter"], exporter("logs")),
        set(&["otel", "trace_exporter"], exporter("traces")),
        set(&["otel", "metrics_exporter"], exporter("metrics")),
    ]
}

impl ConnectAgent {
    /// The name the daemon knows the agent by.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ConnectAgent::ClaudeCode => "claude-code",
            ConnectAgent::Codex => "codex",
            ConnectAgent::GeminiCli => "gemini-cli",
            ConnectAgent::QwenCode => "qwen-code",
            ConnectAgent::Opencode => "opencode",
            ConnectAgent::Copilot => "copilot",
        }
    }

    /// The file the agent reads its settings from, given the environment (`env`).
    pub(crate) fn default_path(
        self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<PathBuf, String> {
        let var = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let home = || {
            var("HOME").ok_or_else(|| "HOME is not set: name the file with --config".to_string())
        };
        let config_home = || -> Result<PathBuf, String> {
            var("XDG_CONFIG_HOME").map_or_else(|| Ok(home()?.join(".config")), Ok)
        };
        Ok(match self {
            ConnectAgent::ClaudeCode => home()?.join(".claude/settings.json"),
            ConnectAgent::Codex => var("CODEX_HOME")
                .map_or_else(|| home().map(|h| h.join(".codex")), Ok)?
                .join("config.toml"),
            ConnectAgent::GeminiCli => home()?.join(".gemini/settings.json"),
            ConnectAgent::QwenCode => home()?.join(".qwen/settings.json"),
            ConnectAgent::Opencode => config_home()?.join("opencode/opencode.json"),
            ConnectAgent::Copilot => config_home()?.join("toolsize/copilot.env"),
        })
    }

    /// The format of `path` for this agent.
    fn format(self) -> Format {
        match self {
            ConnectAgent::Codex => Format::Toml,
            ConnectAgent::Copilot => Format::Env,
            _ => Format::Json,
        }
    }

    /// What connecting the agent to the daemon at `endpoint` (its OTLP/HTTP listener, no
    /// trailing slash) writes, with the daemon's `token` when it has one.
    pub(crate) fn plan(self, endpoint: &str, token: Option<&str>) -> Result<Plan, PlanError> {
        let mut notes = Vec::new();
        let no_token = |how: &str| -> Result<(), PlanError> {
            match token {
                Some(_) => Err(format!(
                    "{} has no setting for the daemon's token in its file; {how}",
                    self.name()
                )),
                None => Ok(()),
            }
        };
        let (sets, appends) = match self {
            ConnectAgent::ClaudeCode => claude_code(endpoint, token),
            ConnectAgent::Codex => (codex(endpoint, token), vec![]),
            ConnectAgent::GeminiCli | ConnectAgent::QwenCode => {
                no_token(
                    "set OTEL_EXPORTER_OTLP_HEADERS=\"Authorization=Bearer <token>\" in its \
                     environment, and connect without --token-file",
                )?;
                let sets = vec![
                    set(&["telemetry", "enabled"], J::Bool(true)),
                    set(&["telemetry", "target"], s("local")),
                    set(&["telemetry", "otlpEndpoint"], s(endpoint)),
                    set(&["telemetry", "otlpProtocol"], s("http")),
                    set(&["telemetry", "logPrompts"], J::Bool(true)),
                ];
                let appends = if self == ConnectAgent::QwenCode {
                    vec![set(
                        &["hooks", "PostToolUse"],
                        http_hook(endpoint, "qwen-code", None),
                    )]
                } else {
                    vec![]
                };
                (sets, appends)
            }
            ConnectAgent::Opencode => {
                no_token(
                    "set OTEL_EXPORTER_OTLP_HEADERS=\"Authorization=Bearer <token>\" in its \
                     environment, and connect without --token-file",
                )?;
                if endpoint != super::DEFAULT_ENDPOINT {
                    notes.push(format!(
                        "opencode reads the endpoint from its environment only: run it with \
                         OTEL_EXPORTER_OTLP_ENDPOINT={endpoint}"
                    ));
                }
                (
                    vec![set(&["experimental", "openTelemetry"], J::Bool(true))],
                    vec![],
                )
            }
            ConnectAgent::Copilot => {
                let mut sets = vec![
                    set(&["COPILOT_OTEL_ENABLED"], s("true")),
                    set(&["OTEL_EXPORTER_OTLP_ENDPOINT"], s(endpoint)),
                    set(
                        &["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"],
                        s("true"),
                    ),
                ];
                if let Some(t) = token {
                    sets.push(set(
                        &["OTEL_EXPORTER_OTLP_HEADERS"],
                        s(&format!("Authorization=Bearer {t}")),
                    ));
                }
                notes.push(
                    "Copilot CLI reads these from its environment: source this file in the shell \
                     that runs it (e.g. from ~/.bashrc)"
                        .to_string(),
                );
                (sets, vec![])
            }
        };
        Ok(Plan {
            format: self.format(),
            sets,
            appends,
            notes,
        })
    }
}

/// `endpoint` checked and without its trailing slash: `http(s)://host:port`, no path.
pub(crate) fn endpoint(endpoint: &str) -> Result<String, String> {
    let e = endpoint.trim().trim_end_matches('/');
    let rest = e
        .strip_prefix("http://")
        .or_else(|| e.strip_prefix("https://"))
        .ok_or_else(|| {
            format!(
                "--endpoint {e:?}: the daemon's OTLP/HTTP listener, e.g. {}",
                super::DEFAULT_ENDPOINT
            )
        })?;
    if rest.is_empty()
        || rest.contains('/')
        || rest.len() > 255
        || rest.contains(char::is_whitespace)
    {
        return Err(format!(
            "--endpoint {e:?}: a scheme, a host and a port only, e.g. {}",
            super::DEFAULT_ENDPOINT
        ));
    }
    Ok(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_agent_has_its_file() {
        let env = |k: &str| match k {
            "HOME" => Some("/h".to_string()),
            _ => None,
        };
        let p = |a: ConnectAgent| a.default_path(env).unwrap();
        assert_eq!(
            p(ConnectAgent::ClaudeCode),
            Path::new("/h/.claude/settings.json")
        );
        assert_eq!(p(ConnectAgent::Codex), Path::new("/h/.codex/config.toml"));
        assert_eq!(
            p(ConnectAgent::GeminiCli),
            Path::new("/h/.gemini/settings.json")
        );
        assert_eq!(
            p(ConnectAgent::QwenCode),
            Path::new("/h/.qwen/settings.json")
        );
        assert_eq!(
            p(ConnectAgent::Opencode),
            Path::new("/h/.config/opencode/opencode.json")
        );
        let codex_home = |k: &str| (k == "CODEX_HOME").then(|| "/c".to_string());
        assert_eq!(
            ConnectAgent::Codex.default_path(codex_home).unwrap(),
            Path::new("/c/config.toml")
        );
        assert!(ConnectAgent::ClaudeCode.default_path(|_| None).is_err());
    }

    #[test]
    fn a_token_goes_where_the_agent_reads_one_and_is_refused_elsewhere() {
        let p = ConnectAgent::ClaudeCode
            .plan("http://h:1", Some("t0k"))
            .unwrap();
        assert!(p
            .sets
            .iter()
            .any(|s| s.path == ["env", "OTEL_EXPORTER_OTLP_HEADERS"]
                && s.value == J::Str("Authorization=Bearer t0k".into())));
        let e = ConnectAgent::GeminiCli
            .plan("http://h:1", Some("t"))
            .unwrap_err();
        assert!(e.contains("OTEL_EXPORTER_OTLP_HEADERS"), "{e}");
        assert!(ConnectAgent::GeminiCli.plan("http://h:1", None).is_ok());
    }

    #[test]
    fn endpoints_are_http_listeners() {
        assert_eq!(
            endpoint("http://127.0.0.1:4318/").unwrap(),
            "http://127.0.0.1:4318"
        );
        assert!(endpoint("127.0.0.1:4318").is_err());
        assert!(endpoint("http://h:1/v1/traces").is_err());
        assert!(endpoint("grpc://h:4317").is_err());
    }
}
