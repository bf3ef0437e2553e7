//! `toolsize mcp [--policy reject|truncate|spill] [--max-output BYTES | --host NAME] -- CMD ARGS…`:
//! runs an MCP server on stdio behind a proxy that measures, guards and traces every
//! `tools/call` ([`crate::mcp`]).
//!
//! The output limit resolves `--max-output > --host preset > $TOOLSIZE_MAX_TOOL_OUTPUT > 16 KiB`
//! and must be at least [`MIN_MAX_OUTPUT`]; it applies to each result's `result` object. Bad
//! arguments, an unknown host (with a "did you mean") or a server that cannot be started are
//! structured errors on standard error, exit 2, before anything is relayed; otherwise the proxy
//! exits with the server's exit code. Spans are exported when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! its `TRACES_` form) is set, and flushed before exit.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::json;

use crate::cli::{CliError, MIN_MAX_OUTPUT};
use crate::guard::ceiling::{CeilingGuard, FsSpillStore, Policy};
use crate::mcp::host;

/// Arguments of `toolsize mcp`.
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// What to do with a tool result over the limit.
    #[arg(long, value_name = "POLICY", default_value = "truncate", value_parser = ["reject", "truncate", "spill"])]
    pub policy: String,
    /// Limit of each tool result in bytes, at least 1024 (default: the --host preset, else
    /// $TOOLSIZE_MAX_TOOL_OUTPUT, else 16384).
    #[arg(long, value_name = "BYTES")]
    pub max_output: Option<u64>,
    /// Preset the limit from the layer catalog for the MCP client in front: claude-code, codex,
    /// gemini-cli, copilot-cli, qwen-code, goose or opencode.
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
    /// Directory for spilled results (default: $TOOLSIZE_SPILL_DIR, else toolsize-spill in the
    /// system temporary directory).
    #[arg(long, value_name = "DIR")]
    pub spill_dir: Option<PathBuf>,
    /// Do not check tools/call arguments against the tools' input schemas.
    #[arg(long)]
    pub no_check_args: bool,
    /// Add the limit to every tool in tools/list (`_meta` and a sentence of the description).
    #[arg(long)]
    pub annotate_tools: bool,
    /// The MCP server's command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// Runs `toolsize mcp`.
pub fn run(args: McpArgs) -> ExitCode {
    let policy: Policy = match args.policy.parse() {
        Ok(p) => p,
        Err(e) => return CliError::new("INVALID_POLICY", format!("{e}")).report(),
    };
    let preset = match args.host.as_deref().map(host::preset).transpose() {
        Ok(p) => p,
        Err(message) => return CliError::new("UNKNOWN_HOST", message).report(),
    };
    let host_limits = preset.map(|p| p.limits(&|k| std::env::var(k).ok()));
    let mut builder = CeilingGuard::builder()
        .max_output_opt(args.max_output)
        .config_max_output(host_limits.as_ref().map(|h| h.limit_bytes))
        .policy(policy);
    if let Some(dir) = &args.spill_dir {
        builder = builder.store(Arc::new(FsSpillStore::new(dir)));
    }
    let guard = match builder.build() {
        Ok(g) if g.limit().bytes < MIN_MAX_OUTPUT => {
            return CliError::new(
                "INVALID_LIMIT",
                format!(
                    "the output limit is {} bytes: at least {MIN_MAX_OUTPUT} are needed for a refusal or a notice to fit",
                    g.limit().bytes
                ),
            )
            .report();
        }
        Ok(g) => g,
        Err(e) => return CliError::new("INVALID_LIMIT", e.to_string()).report(),
    };
    let Some((program, rest)) = args.command.split_first() else {
        return CliError::new("MISSING_COMMAND", "give the server's command after `--`").report();
    };
    // Kept to the end: dropping it flushes the spans.
    let export = crate::cli::wrap::init_export();
    if let Some(h) = &host_limits {
        {
            let line = json!({
                "level": "INFO",
                "target": "toolsize::mcp",
                "host": args.host,
                "limit_bytes": guard.limit().bytes,
                "host_limit_layer": h.limit_layer,
                "host_limit_estimated": h.estimated,
                "warn_bytes": h.warn_bytes,
                "policy": policy.to_string(),
                "message": "Output limit in effect.",
            });
            eprintln!("{line}");
        }
    }
    let opts = crate::mcp::Options {
        guard,
        warn_bytes: host_limits.as_ref().and_then(|h| h.warn_bytes),
        check_args: !args.no_check_args,
        annotate_tools: args.annotate_tools,
    };
    let code = match crate::mcp::run(opts, program, rest) {
        Ok(code) => code,
        Err(crate::mcp::RunError::Spawn(e)) => {
            drop(export);
            return CliError::new(
                "SPAWN_FAILED",
                format!("cannot run {}: {e}", program.to_string_lossy()),
            )
            .report();
        }
        Err(crate::mcp::RunError::Relay(e)) => {
            drop(export);
            return CliError::new("RELAY_FAILED", format!("relaying failed: {e}")).report();
        }
    };
    drop(export);
    ExitCode::from(code)
}
