//! `toolsize mcp [--policy reject|truncate|spill] [--max-output BYTES | --host NAME|auto]`
//! `-- CMD ARGS…` (a server on stdio) or `--listen ADDR --upstream URL` (a server over Streamable
//! HTTP): a proxy that measures, guards and traces every `tools/call` ([`crate::mcp`]).
//!
//! The output limit resolves `--max-output`, then the `--host` preset (a tool's declared
//! allowance first), then `$TOOLSIZE_CEILING_BYTES` (or the deprecated `$TOOLSIZE_MAX_TOOL_OUTPUT`), then 16 KiB, and must be at least [`MIN_MAX_OUTPUT`](super::MIN_MAX_OUTPUT); it applies to
//! each result's `result` object. Bad arguments, an unknown host (with a "did you mean"), an
//! upstream URL the proxy cannot use, an address it cannot listen on or a server that cannot be
//! started are structured errors on standard error, exit 2, before anything is relayed. The
//! stdio form exits with the server's exit code; the HTTP form runs until `SIGINT` or `SIGTERM`
//! and exits 0. Spans are exported when `OTEL_EXPORTER_OTLP_ENDPOINT` (or its `TRACES_` form) is
//! set, and flushed before exit.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::json;

use crate::cli::CliError;
use crate::guard::ceiling::{CeilingGuard, Policy};
use crate::mcp::{host, HostChoice};

/// Longest `--call-timeout` accepted, in seconds (a week).
const MAX_CALL_TIMEOUT_SECS: f64 = 7.0 * 24.0 * 3600.0;

/// Arguments of `toolsize mcp`.
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// What to do with a tool result over the limit.
    #[arg(long, value_name = "POLICY", default_value = "truncate", value_parser = ["reject", "truncate", "spill"])]
    pub policy: String,
    /// Limit of each tool result in bytes, at least 1024 (default: the --host preset, else
    /// $TOOLSIZE_CEILING_BYTES, else 16384).
    #[arg(long, value_name = "BYTES")]
    pub max_output: Option<u64>,
    /// Preset the limit from the layer catalog for the MCP client in front: claude-code, codex,
    /// gemini-cli, copilot-cli, qwen-code, goose or opencode; or auto, chosen per call from the
    /// name the client gives itself.
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
    /// Largest message read whole, either way, in bytes: a stdio line, an HTTP request body, a
    /// JSON response or SSE event acted on. A response over it is discarded unread and its call
    /// answered with a JSON-RPC error; a request over it is refused. At least 65536.
    #[arg(long, value_name = "BYTES", default_value_t = crate::mcp::DEFAULT_MAX_MESSAGE_BYTES)]
    pub max_message_bytes: usize,
    /// Seconds a request waits for the server's response before the proxy answers it with a
    /// JSON-RPC error (-32001) and, on stdio, sends the server notifications/cancelled; 0: no
    /// limit.
    #[arg(long, value_name = "SECONDS", default_value_t = crate::mcp::DEFAULT_CALL_TIMEOUT.as_secs_f64())]
    pub call_timeout: f64,
    /// Serve MCP over Streamable HTTP at http://ADDR/mcp, forwarding to --upstream (instead of
    /// running a server on stdio). Port 0 picks a free port, said on standard error.
    #[arg(long, value_name = "ADDR", requires = "upstream", value_parser = crate::addr::resolve_listen)]
    pub listen: Option<SocketAddr>,
    /// The URL of the MCP server the HTTP proxy forwards to (http:// or https://).
    #[arg(long, value_name = "URL", requires = "listen")]
    pub upstream: Option<String>,
    /// A PEM file of CA certificates trusted for an https --upstream, besides the public roots.
    #[arg(long, value_name = "FILE", requires = "upstream")]
    pub upstream_ca: Option<PathBuf>,
    /// The MCP server's command and its arguments, after `--` (the stdio form).
    #[arg(
        last = true,
        value_name = "CMD",
        required_unless_present = "upstream",
        conflicts_with = "upstream"
    )]
    pub command: Vec<OsString>,
}

/// The preset named by `--host`.
fn host_choice(name: Option<&str>) -> Result<HostChoice, CliError> {
    match name {
        None => Ok(HostChoice::None),
        Some("auto") => Ok(HostChoice::Auto),
        Some(n) => host::preset(n)
            .map(HostChoice::Preset)
            .map_err(|m| CliError::new("UNKNOWN_HOST", format!("{m} (or auto)"))),
    }
}

/// Runs `toolsize mcp`.
pub fn run(args: McpArgs) -> ExitCode {
    let policy: Policy = match args.policy.parse() {
        Ok(p) => p,
        Err(e) => return CliError::new("INVALID_POLICY", format!("{e}")).report(),
    };
    let choice = match host_choice(args.host.as_deref()) {
        Ok(c) => c,
        Err(e) => return e.report(),
    };
    let fixed = match choice {
        HostChoice::Preset(p) => Some(p.limits(&|k| std::env::var(k).ok())),
        _ => None,
    };
    let guard = match CeilingGuard::builder()
        .max_output_opt(args.max_output)
        .policy(policy)
        .spill_dir(args.spill_dir.as_deref())
        .build_for_proxy()
    {
        Ok(g) => g,
        Err(e) => return CliError::new("INVALID_LIMIT", e.to_string()).report(),
    };
    if args.max_message_bytes < crate::mcp::MIN_MAX_MESSAGE_BYTES {
        return CliError::new(
            "INVALID_MAX_MESSAGE_BYTES",
            format!(
                "--max-message-bytes {} is below the minimum of {}",
                args.max_message_bytes,
                crate::mcp::MIN_MAX_MESSAGE_BYTES
            ),
        )
        .report();
    }
    let call_timeout = match args.call_timeout {
        0.0 => None,
        t if t.is_finite() && t > 0.0 && t <= MAX_CALL_TIMEOUT_SECS => {
            Some(std::time::Duration::from_secs_f64(t))
        }
        t => {
            return CliError::new(
                "INVALID_CALL_TIMEOUT",
                format!(
                "--call-timeout {t}: give seconds between 0 (no limit) and {MAX_CALL_TIMEOUT_SECS}"
            ),
            )
            .report()
        }
    };
    let upstream = match (&args.upstream, args.listen) {
        (Some(url), Some(_)) => {
            match crate::mcp::http::Upstream::parse(url, args.upstream_ca.as_deref()) {
                Ok(u) => Some(u),
                Err(e) => return CliError::new("INVALID_UPSTREAM", e.to_string()).report(),
            }
        }
        _ => None,
    };
    // Kept to the end: dropping it flushes the spans.
    let export = crate::cli::wrap::init_export();
    let explicit = args.max_output.is_some();
    let limit_line = match (&fixed, choice) {
        (Some(h), _) => Some(json!({
            "host": args.host,
            "limit_bytes": if explicit { guard.limit().bytes } else { h.limit_bytes },
            "host_limit_layer": h.limit_layer,
            "host_limit_estimated": h.estimated,
            "warn_bytes": h.warn_bytes,
        })),
        (None, HostChoice::Auto) => Some(json!({
            "host": "auto",
            "limit_bytes": guard.limit().bytes,
            "limit_source": if explicit { "--max-output".to_owned() } else { guard.limit().source.to_string() },
            "note": "a recognised client's preset replaces this limit, per call",
        })),
        _ => None,
    };
    if let Some(mut line) = limit_line {
        if let Some(obj) = line.as_object_mut() {
            obj.insert("level".into(), json!("INFO"));
            obj.insert("target".into(), json!("toolsize::mcp"));
            obj.insert("policy".into(), json!(policy.to_string()));
            obj.insert("message".into(), json!("Output limit in effect."));
        }
        eprintln!("{line}");
    }
    let opts = crate::mcp::Options {
        guard,
        warn_bytes: None,
        host: choice,
        check_args: !args.no_check_args,
        annotate_tools: args.annotate_tools,
        max_message_bytes: args.max_message_bytes,
        call_timeout,
    };
    if let (Some(upstream), Some(listen)) = (upstream, args.listen) {
        let served = crate::mcp::http::run(opts, listen, upstream);
        drop(export);
        return match served {
            Ok(()) => ExitCode::SUCCESS,
            Err(crate::mcp::http::HttpError::Listen(e)) => CliError::new(
                "LISTEN_FAILED",
                format!("cannot listen on {listen}: {e}: give --listen another address"),
            )
            .report(),
            Err(e) => CliError::new("INVALID_UPSTREAM", e.to_string()).report(),
        };
    }
    let Some((program, rest)) = args.command.split_first() else {
        drop(export);
        return CliError::new(
            "MISSING_COMMAND",
            "give the server's command after `--`, or --listen and --upstream",
        )
        .report();
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
