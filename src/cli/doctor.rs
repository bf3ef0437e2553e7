//! `toolsize doctor`: asks a running daemon what each coding agent has sent
//! (`GET /api/v1/agents`, [`crate::collector::ingest::heard`]) and says, per agent, which
//! signals arrived, when last, and which switch is missing for its calls to be counted, sized
//! and their cuts seen, as `docs/agents.md` lists them.
//!
//! What each agent needs (the rest is shown, never required):
//! - Claude Code: logs (the sizes) and its `PostToolUse` hook (its own cuts);
//! - Codex: traces (the sizes, in its span events) and logs (a failed command's exit code);
//! - Gemini CLI: logs;
//! - Qwen Code: logs and its `PostToolUse` hook (the cuts of tools other than its shell);
//! - Copilot CLI and opencode: traces that carry sizes (their content switch).
//!
//! A hook is counted when its payload reaches `POST /v1/hooks/{agent}`; `toolsize hook` sending
//! to a `grpc://` endpoint arrives as a log record and is counted with the logs.
//!
//! Exit 0 when every agent heard from has what it needs, 1 when one lacks something or no agent
//! was heard from, 2 on a usage error or when the daemon cannot be asked (structured error on
//! standard error). One request with the 2 s timeout of `toolsize top`'s client; the token from
//! `--token-file`, `TOOLSIZE_AUTH_TOKEN_FILE` or `TOOLSIZE_AUTH_TOKEN`.

use std::io::Write;
use std::process::ExitCode;

use serde_json::Value;

use super::top::Daemon;
use super::CliError;

/// Flags of `toolsize doctor`.
#[derive(Debug, Clone, clap::Args)]
pub struct DoctorArgs {
    /// The daemon's admin address.
    #[arg(
        long,
        visible_alias = "endpoint",
        default_value = "http://127.0.0.1:9464"
    )]
    pub url: String,
    /// A file whose first line is the daemon's token; without it, `TOOLSIZE_AUTH_TOKEN_FILE`,
    /// then `TOOLSIZE_AUTH_TOKEN`.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,
    /// Print the findings as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// The exit code when an agent lacks a switch, or none was heard from.
pub const EXIT_MISSING: u8 = 1;

/// What doctor says of one agent.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Finding {
    /// The agent's name.
    pub(crate) agent: String,
    /// Every signal it needs arrived.
    pub(crate) complete: bool,
    /// What arrived, one line per signal kind: `logs: 4 (4 sized), last 3 s ago`.
    pub(crate) signals: Vec<String>,
    /// What is missing, and the switch that turns it on.
    pub(crate) missing: Vec<String>,
}

const KINDS: [&str; 4] = ["traces", "logs", "metrics", "hooks"];

fn count(a: &Value, kind: &str, field: &str) -> u64 {
    a[kind][field].as_u64().unwrap_or(0)
}

/// What is missing for `agent`, given what arrived (`a`, one entry of `/api/v1/agents`).
fn missing(agent: &str, a: &Value) -> Vec<String> {
    let n = |kind: &str| count(a, kind, "count");
    let sized = |kind: &str| count(a, kind, "sized");
    let mut out = Vec::new();
    let mut need = |ok: bool, what: &str| {
        if !ok {
            out.push(what.to_string());
        }
    };
    match agent {
        "claude-code" => {
            need(
                n("logs") > 0,
                "Claude Code: no logs, so no sizes: set OTEL_LOGS_EXPORTER=otlp \
                 (toolsize connect claude-code)",
            );
            need(
                n("hooks") > 0,
                "Claude Code: no hook payload arrived: its own cuts (a persisted output) are \
                 invisible; add its PostToolUse hook (toolsize connect claude-code; a command \
                 hook posts only the calls Claude Code cut)",
            );
        }
        "codex" => {
            need(
                n("traces") > 0,
                "Codex: no traces, so no sizes (they are in its codex.tool_result span events): \
                 set [otel] trace_exporter (toolsize connect codex)",
            );
            need(
                n("logs") > 0,
                "Codex: no logs, so a failed command counts as a success: set [otel] exporter \
                 (toolsize connect codex)",
            );
        }
        "gemini-cli" => need(
            n("logs") > 0,
            "Gemini CLI: no logs, so no sizes: set telemetry.enabled and otlpEndpoint \
             (toolsize connect gemini-cli)",
        ),
        "qwen-code" => {
            need(
                n("logs") > 0,
                "Qwen Code: no logs, so no sizes: set telemetry.enabled and otlpEndpoint \
                 (toolsize connect qwen-code)",
            );
            need(
                n("hooks") > 0,
                "Qwen Code: no hook payload arrived: the cuts of its tools other than the shell \
                 are invisible; add its PostToolUse hook (toolsize connect qwen-code)",
            );
        }
        "copilot" => need(
            sized("traces") > 0,
            if n("traces") == 0 {
                "Copilot CLI: no traces: set COPILOT_OTEL_ENABLED=true and \
                 OTEL_EXPORTER_OTLP_ENDPOINT (toolsize connect copilot)"
            } else {
                "Copilot CLI: its calls arrive without sizes: set \
                 OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true (toolsize connect copilot)"
            },
        ),
        "opencode" => need(
            sized("traces") > 0,
            if n("traces") == 0 {
                "opencode: no traces: set \"experimental\": {\"openTelemetry\": true} and \
                 OTEL_EXPORTER_OTLP_ENDPOINT (toolsize connect opencode)"
            } else {
                "opencode: its calls arrive without sizes: set \"experimental\": \
                 {\"openTelemetry\": true} in opencode.json (toolsize connect opencode)"
            },
        ),
        _ => {}
    }
    out
}

/// `12 s ago`, `3 min ago`, `2 h ago`.
fn ago(now_ms: u64, at_ms: u64) -> String {
    let s = now_ms.saturating_sub(at_ms) / 1000;
    match s {
        0..120 => format!("{s} s ago"),
        120..7200 => format!("{} min ago", s / 60),
        _ => format!("{} h ago", s / 3600),
    }
}

/// The findings for an `/api/v1/agents` answer.
pub(crate) fn diagnose(view: &Value) -> Vec<Finding> {
    let now = view["now_ms"].as_u64().unwrap_or(0);
    let agents = view["agents"].as_array().map_or(&[][..], Vec::as_slice);
    agents
        .iter()
        .map(|a| {
            let agent = a["agent"].as_str().unwrap_or("?").to_string();
            let signals = KINDS
                .iter()
                .map(|k| {
                    let n = count(a, k, "count");
                    if n == 0 {
                        return format!("{k}: none");
                    }
                    let sized = match *k {
                        "traces" | "logs" => format!(" ({} sized)", count(a, k, "sized")),
                        _ => String::new(),
                    };
                    format!(
                        "{k}: {n}{sized}, last {}",
                        ago(now, count(a, k, "last_seen_ms"))
                    )
                })
                .collect();
            let missing = missing(&agent, a);
            Finding {
                complete: missing.is_empty(),
                agent,
                signals,
                missing,
            }
        })
        .collect()
}

/// The findings as text.
fn render(findings: &[Finding]) -> String {
    if findings.is_empty() {
        return "no coding agent has sent anything to this daemon yet: connect one \
                (toolsize connect <agent>) and run it\n"
            .to_string();
    }
    let mut out = String::new();
    for f in findings {
        let state = if f.complete { "complete" } else { "incomplete" };
        out.push_str(&format!("{}: {state}\n", f.agent));
        for s in &f.signals {
            out.push_str(&format!("  {s}\n"));
        }
        for m in &f.missing {
            out.push_str(&format!("  missing: {m}\n"));
        }
    }
    out
}

/// Runs `toolsize doctor`.
pub fn run(args: &DoctorArgs) -> ExitCode {
    let daemon = match Daemon::from_flags(&args.url, args.token_file.as_deref()) {
        Ok(d) => d,
        Err(e) => return e.report(),
    };
    let view = match daemon.get(crate::collector::read::api::AGENTS_PATH) {
        Ok(v) => v,
        Err(e) => return CliError::new("DOCTOR_DAEMON", e).report(),
    };
    let findings = diagnose(&view);
    let ok = !findings.is_empty() && findings.iter().all(|f| f.complete);
    let text = if args.json {
        let mut s = serde_json::json!({ "ok": ok, "agents": findings }).to_string();
        s.push('\n');
        s
    } else {
        render(&findings)
    };
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_MISSING)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(agent: &str, counts: [(u64, u64); 4]) -> Value {
        let sig = |(count, sized): (u64, u64)| serde_json::json!({"count": count, "sized": sized, "last_seen_ms": 90_000});
        serde_json::json!({"now_ms": 100_000, "agents": [{
            "agent": agent, "traces": sig(counts[0]), "logs": sig(counts[1]),
            "metrics": sig(counts[2]), "hooks": sig(counts[3])}]})
    }

    #[test]
    fn claude_code_logs_without_its_hook_is_incomplete() {
        let f = &diagnose(&view("claude-code", [(0, 0), (4, 3), (2, 0), (0, 0)]))[0];
        assert!(!f.complete);
        assert_eq!(f.missing.len(), 1);
        assert!(
            f.missing[0].contains("no hook payload arrived"),
            "{:?}",
            f.missing
        );
        assert!(f
            .signals
            .contains(&"logs: 4 (3 sized), last 10 s ago".to_string()));
        assert!(f.signals.contains(&"traces: none".to_string()));
        let f = &diagnose(&view("claude-code", [(0, 0), (4, 3), (0, 0), (1, 0)]))[0];
        assert!(f.complete, "{f:?}");
    }

    #[test]
    fn each_agent_names_its_switch() {
        let codex = &diagnose(&view("codex", [(0, 0), (4, 0), (1, 0), (0, 0)]))[0];
        assert!(codex.missing[0].contains("trace_exporter"), "{codex:?}");
        let copilot = &diagnose(&view("copilot", [(4, 0), (0, 0), (1, 0), (0, 0)]))[0];
        assert!(
            copilot.missing[0].contains("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"),
            "{copilot:?}"
        );
        let opencode = &diagnose(&view("opencode", [(8, 3), (0, 0), (0, 0), (0, 0)]))[0];
        assert!(opencode.complete);
        let qwen = &diagnose(&view("qwen-code", [(4, 0), (4, 3), (0, 0), (0, 0)]))[0];
        assert!(qwen.missing[0].contains("PostToolUse"), "{qwen:?}");
        assert!(diagnose(&serde_json::json!({"agents": [], "now_ms": 1})).is_empty());
    }

    #[test]
    fn ages_are_readable() {
        assert_eq!(ago(10_000, 7_000), "3 s ago");
        assert_eq!(ago(1_000_000, 0), "16 min ago");
        assert_eq!(ago(10_000_000, 0), "2 h ago");
    }
}
