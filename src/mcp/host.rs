//! `--host NAME`: the output limit of `toolsize mcp` preset from the layer catalog, as the weakest
//! of the host's layers that apply to MCP tool results.
//!
//! Each preset names catalog layers ([`crate::layers::catalog()`]); the limit is the smallest of
//! their limits converted to bytes ([`crate::layers::convert::limit_in_bytes`]: exact for bytes,
//! chars and UTF-16 units, `4 bytes per token` estimated for tokens), and the warning threshold
//! (the span's `tool.large_result` event) the smallest of the host's warning layers. So
//! `--host claude-code` cuts where Claude Code would first act on the result: its 50,000-char
//! persistence threshold, below `MAX_MCP_OUTPUT_TOKENS` (25,000 tokens, about 100,000 bytes),
//! and warns past its 10,000-token warning (about 40,000 bytes). When the host's knob is set in
//! the environment the proxy runs in (`MAX_MCP_OUTPUT_TOKENS` for Claude Code, which passes its
//! environment on to the servers it starts), the knob's value replaces the catalog's default.
//! Nothing here does I/O beyond reading that variable, or fails but on an unknown host name.
//!
//! # `--host auto`
//!
//! The preset is then chosen per call from the name the client gives itself: `clientInfo.name`
//! of its `initialize` request on protocol revisions up to 2025-11-25, and
//! `_meta["io.modelcontextprotocol/clientInfo"].name` of each request on 2026-07-28 (which has no
//! handshake). Names are matched by [`from_client_name`]; a client the table does not know gets
//! no preset (the environment's limit, else 16 KiB). The specification says this name is
//! self-reported, for display and logging, and not for behaviour: `auto` only picks which of the
//! host's *own* limits to mirror, and a client lying about its name only changes where its own
//! results are cut.
//!
//! # Limits a tool declares
//!
//! Claude Code lets a server raise (or set) the point where one tool's result is persisted to a
//! file: `_meta["anthropic/maxResultSizeChars"]` on the tool in `tools/list`, honoured up to
//! [`CLAUDE_CODE_MAX_DECLARED_CHARS`] characters. With the `claude-code` preset, a tool
//! declaring it is held to that many bytes (at least as many as characters, so never over the
//! declared count) in place of the preset's limit; `--max-output` still wins over it.

use crate::layers::convert::{limit_in_bytes, measures_for};
use crate::layers::{find, Action, Unit};
use crate::measure::Measures;

/// One host preset: the catalog layers whose limits apply to an MCP tool result.
#[derive(Debug, Clone, Copy)]
pub struct HostPreset {
    /// The name given to `--host`.
    pub name: &'static str,
    /// Catalog ids of the layers applying to MCP results (warning layers included).
    pub layers: &'static [&'static str],
}

/// Every preset, by name.
pub const HOSTS: &[HostPreset] = &[
    HostPreset {
        name: "claude-code",
        layers: &[
            "claude-code.mcp.max",
            "claude-code.mcp.warn",
            "claude-code.tool-result.persist",
        ],
    },
    HostPreset {
        name: "codex",
        layers: &["codex.tool-output.tokens"],
    },
    HostPreset {
        name: "gemini-cli",
        layers: &["gemini-cli.tool-output"],
    },
    HostPreset {
        name: "copilot-cli",
        layers: &["copilot-cli.mcp"],
    },
    HostPreset {
        name: "qwen-code",
        layers: &["qwen-code.tool-output"],
    },
    HostPreset {
        name: "goose",
        layers: &["goose.large-response"],
    },
    HostPreset {
        name: "opencode",
        layers: &["opencode.tool-output.bytes"],
    },
];

/// The `_meta` key of a tool in `tools/list` by which a server declares how large a result of
/// that tool Claude Code should take inline, in characters.
pub const META_MAX_RESULT_SIZE_CHARS: &str = "anthropic/maxResultSizeChars";

/// The most `anthropic/maxResultSizeChars` Claude Code honours.
pub const CLAUDE_CODE_MAX_DECLARED_CHARS: u64 = 500_000;

/// What the client names itself as (`clientInfo.name`, lower-cased), mapped to presets: the
/// first entry whose text the name contains wins.
const CLIENT_NAMES: &[(&str, &str)] = &[
    ("claude-code", "claude-code"),
    ("claude code", "claude-code"),
    ("codex", "codex"),
    ("gemini", "gemini-cli"),
    ("copilot", "copilot-cli"),
    ("qwen", "qwen-code"),
    ("goose", "goose"),
    ("opencode", "opencode"),
];

/// The preset for a client calling itself `name` (`clientInfo.name`), if the table knows it.
pub fn from_client_name(name: &str) -> Option<&'static HostPreset> {
    let lower = name.to_ascii_lowercase();
    let (_, preset) = CLIENT_NAMES.iter().find(|(part, _)| lower.contains(part))?;
    HOSTS.iter().find(|h| h.name == *preset)
}

/// The limit a tool declares for `preset`, in bytes, when the preset's host honours one:
/// `anthropic/maxResultSizeChars` for Claude Code, clamped to what it honours.
/// `declared_chars` is the tool's `_meta["anthropic/maxResultSizeChars"]`, when it is a
/// positive integer ([`declared_chars`]).
pub fn declared_limit(preset: &HostPreset, declared_chars: Option<u64>) -> Option<u64> {
    if preset.name != "claude-code" {
        return None;
    }
    declared_chars
        .filter(|c| *c > 0)
        .map(|c| c.min(CLAUDE_CODE_MAX_DECLARED_CHARS))
}

/// A tool's `_meta["anthropic/maxResultSizeChars"]` as listed in `tools/list`, when it is a
/// positive integer.
pub fn declared_chars(tool: &serde_json::Value) -> Option<u64> {
    tool.get("_meta")?
        .get(META_MAX_RESULT_SIZE_CHARS)?
        .as_u64()
        .filter(|c| *c > 0)
}

/// A preset resolved to bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostLimits {
    /// The output limit: the weakest non-warning layer, in bytes.
    pub limit_bytes: u64,
    /// The layer that sets it.
    pub limit_layer: &'static str,
    /// Whether the conversion to bytes is an estimate (a token limit).
    pub estimated: bool,
    /// The weakest warning layer, in bytes, if the host has one.
    pub warn_bytes: Option<u64>,
}

/// The preset named `name`, or an error with a "did you mean".
pub fn preset(name: &str) -> Result<&'static HostPreset, String> {
    HOSTS.iter().find(|h| h.name == name).ok_or_else(|| {
        let names: Vec<&str> = HOSTS.iter().map(|h| h.name).collect();
        match crate::suggest::did_you_mean(name, names.iter().copied()) {
            Some(s) => format!("unknown host {name:?}; did you mean {s:?}?"),
            None => format!("unknown host {name:?}; known hosts: {}", names.join(", ")),
        }
    })
}

/// The knob's value for a layer, read from `env`, when the layer has an environment knob that
/// `toolsize` understands and it is set to a positive integer.
fn knob(layer: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<u64> {
    let var = match layer {
        "claude-code.mcp.max" => "MAX_MCP_OUTPUT_TOKENS",
        _ => return None,
    };
    env(var)?.trim().parse::<u64>().ok().filter(|n| *n > 0)
}

impl HostPreset {
    /// The measures the preset's layers count by, on top of [`Measures::CHEAP`] (see
    /// [`crate::layers::convert::measures_for`]): what `toolsize mcp` takes of each result of a
    /// call held to this host, so that the span carries, for example, the UTF-16 units Gemini
    /// CLI cuts by.
    pub fn measures(&self) -> Measures {
        self.layers
            .iter()
            .filter_map(|id| find(id))
            .fold(Measures::CHEAP, |m, l| {
                m.union(measures_for(l.unit, l.scope))
            })
    }

    /// Resolves the preset against the catalog, reading knobs through `env`.
    pub fn limits(&self, env: &dyn Fn(&str) -> Option<String>) -> HostLimits {
        let mut best: Option<(u64, &'static str, bool)> = None;
        let mut warn: Option<u64> = None;
        for id in self.layers {
            let Some(layer) = find(id) else { continue };
            let limit = knob(id, env).unwrap_or(layer.limit);
            let Some(bytes) = limit_in_bytes(limit, layer.unit) else {
                continue;
            };
            if layer.action == Action::Warn {
                warn = Some(warn.map_or(bytes.bytes, |w| w.min(bytes.bytes)));
            } else if best.is_none_or(|(b, _, _)| bytes.bytes < b) {
                best = Some((bytes.bytes, id, layer.unit == Unit::Tokens));
            }
        }
        let (limit_bytes, limit_layer, estimated) =
            best.unwrap_or((crate::guard::DEFAULT_MAX_TOOL_OUTPUT, "default", false));
        HostLimits {
            limit_bytes,
            limit_layer,
            estimated,
            warn_bytes: warn,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preset_takes_the_measures_its_layers_count_by() {
        let gemini = HOSTS.iter().find(|h| h.name == "gemini-cli").unwrap();
        assert_eq!(find(gemini.layers[0]).unwrap().unit, Unit::Utf16Units);
        assert!(gemini.measures().utf16_units);
        let opencode = HOSTS.iter().find(|h| h.name == "opencode").unwrap();
        assert_eq!(find(opencode.layers[0]).unwrap().unit, Unit::Bytes);
        assert_eq!(opencode.measures(), Measures::CHEAP);
    }

    #[test]
    fn every_preset_names_catalog_layers() {
        for h in HOSTS {
            for id in h.layers {
                assert!(find(id).is_some(), "{}: {id} is not in the catalog", h.name);
            }
            let l = h.limits(&|_| None);
            assert!(l.limit_bytes >= 1024, "{}", h.name);
        }
    }

    #[test]
    fn claude_code_cuts_at_its_weakest_layer_and_warns_at_10k_tokens() {
        let l = preset("claude-code").unwrap().limits(&|_| None);
        assert_eq!(l.limit_bytes, 50_000);
        assert_eq!(l.limit_layer, "claude-code.tool-result.persist");
        assert_eq!(l.warn_bytes, Some(40_000));
        // MAX_MCP_OUTPUT_TOKENS lowered below the persistence threshold sets the limit.
        let env = |k: &str| (k == "MAX_MCP_OUTPUT_TOKENS").then(|| "5000".to_owned());
        let l = preset("claude-code").unwrap().limits(&env);
        assert_eq!(
            (l.limit_bytes, l.limit_layer, l.estimated),
            (20_000, "claude-code.mcp.max", true)
        );
        let garbage = |_: &str| Some("lots".to_owned());
        assert_eq!(
            preset("claude-code").unwrap().limits(&garbage).limit_bytes,
            50_000
        );
    }

    #[test]
    fn clients_are_known_by_the_names_they_give() {
        let name = |n: &str| from_client_name(n).map(|p| p.name);
        assert_eq!(name("claude-code"), Some("claude-code"));
        assert_eq!(name("codex-mcp-client"), Some("codex"));
        assert_eq!(name("gemini-cli-mcp-client"), Some("gemini-cli"));
        assert_eq!(name("mcp-inspector"), None);
        let tool = serde_json::json!({"name": "t", "_meta": {META_MAX_RESULT_SIZE_CHARS: 900_000}});
        let cc = preset("claude-code").unwrap();
        assert_eq!(declared_limit(cc, declared_chars(&tool)), Some(500_000));
        assert_eq!(declared_limit(cc, Some(120_000)), Some(120_000));
        assert_eq!(
            declared_limit(preset("codex").unwrap(), Some(120_000)),
            None
        );
        assert_eq!(declared_limit(cc, None), None);
        assert_eq!(
            declared_chars(&serde_json::json!({"_meta": {META_MAX_RESULT_SIZE_CHARS: "x"}})),
            None
        );
    }

    #[test]
    fn unknown_hosts_get_a_suggestion() {
        assert!(preset("claude_code")
            .unwrap_err()
            .contains("did you mean \"claude-code\""));
        assert!(preset("zzzzzz").unwrap_err().contains("known hosts"));
    }
}
