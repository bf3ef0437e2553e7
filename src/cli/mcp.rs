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
    let Checked {
        policy,
        choice,
        guard,
        call_timeout,
        upstream,
    } = match check(&args) {
        Ok(checked) => checked,
        Err(e) => return e.report(),
    };
    // Kept to the end: dropping it flushes the spans.
    let export = crate::cli::wrap::init_export();
    log_limit(&args, choice, &guard, policy);
    let opts = crate::mcp::Options {
        guard,
        warn_bytes: None,
        host: choice,
        check_args: !args.no_check_args,
        annotate_tools: args.annotate_tools,
        max_message_bytes: args.max_message_bytes,
        call_timeout,
    };
    let served = match (upstream, args.listen) {
        (Some(upstream), Some(listen)) => serve_http(opts, listen, upstream),
        _ => serve_stdio(opts, &args.command),
    };
    drop(export);
    match served {
        Ok(code) => code,
        Err(e) => e.report(),
    }
}

/// What `toolsize mcp`'s arguments give, checked before anything runs.
struct Checked {
    policy: Policy,
    choice: HostChoice,
    guard: CeilingGuard,
    call_timeout: Option<std::time::Duration>,
    upstream: Option<crate::mcp::http::Upstream>,
}

/// Checks the arguments: the policy, the host, the limit, the message size, the call timeout
/// and the upstream URL, each a structured error naming its flag.
fn check(args: &McpArgs) -> Result<Checked, CliError> {
    let policy: Policy = args
        .policy
        .parse()
        .map_err(|e| CliError::new("INVALID_POLICY", format!("{e}")))?;
    let choice = host_choice(args.host.as_deref())?;
    let guard = CeilingGuard::builder()
        .max_output_opt(args.max_output)
        .policy(policy)
        .spill_dir(args.spill_dir.as_deref())
        .build_for_proxy()
        .map_err(|e| CliError::new("INVALID_LIMIT", e.to_string()))?;
    if args.max_message_bytes < crate::mcp::MIN_MAX_MESSAGE_BYTES {
        return Err(CliError::new(
            "INVALID_MAX_MESSAGE_BYTES",
            format!(
                "--max-message-bytes {} is below the minimum of {}",
                args.max_message_bytes,
                crate::mcp::MIN_MAX_MESSAGE_BYTES
            ),
        ));
    }
    let call_timeout = match args.call_timeout {
        0.0 => None,
        t if t.is_finite() && t > 0.0 && t <= MAX_CALL_TIMEOUT_SECS => {
            Some(std::time::Duration::from_secs_f64(t))
        }
        t => {
            return Err(CliError::new(
                "INVALID_CALL_TIMEOUT",
                format!(
                "--call-timeout {t}: give seconds between 0 (no limit) and {MAX_CALL_TIMEOUT_SECS}"
            ),
            ))
        }
    };
    let upstream = match (&args.upstream, args.listen) {
        (Some(url), Some(_)) => Some(
            crate::mcp::http::Upstream::parse(url, args.upstream_ca.as_deref())
                .map_err(|e| CliError::new("INVALID_UPSTREAM", e.to_string()))?,
        ),
        _ => None,
    };
    Ok(Checked {
        policy,
        choice,
        guard,
        call_timeout,
        upstream,
    })
}

/// Says on standard error the output limit in effect: the host preset's, or the one a
/// recognised client's preset replaces per call (`--host auto`).
fn log_limit(args: &McpArgs, choice: HostChoice, guard: &CeilingGuard, policy: Policy) {
    let explicit = args.max_output.is_some();
    let limit_line = match choice {
        HostChoice::Preset(p) => {
            let h = p.limits(&|k| std::env::var(k).ok());
            Some(json!({
                "host": args.host,
                "limit_bytes": if explicit { guard.limit().bytes } else { h.limit_bytes },
                "host_limit_layer": h.limit_layer,
                "host_limit_estimated": h.estimated,
                "warn_bytes": h.warn_bytes,
            }))
        }
        HostChoice::Auto => Some(json!({
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
}

/// Serves MCP over Streamable HTTP until `SIGINT` or `SIGTERM`.
fn serve_http(
    opts: crate::mcp::Options,
    listen: SocketAddr,
    upstream: crate::mcp::http::Upstream,
) -> Result<ExitCode, CliError> {
    match crate::mcp::http::run(opts, listen, upstream) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(crate::mcp::http::HttpError::Listen(e)) => Err(CliError::new(
            "LISTEN_FAILED",
            format!("cannot listen on {listen}: {e}: give --listen another address"),
        )),
        Err(e) => Err(CliError::new("INVALID_UPSTREAM", e.to_string())),
    }
}

/// Runs the server's command and relays its stdio; its exit code.
fn serve_stdio(opts: crate::mcp::Options, command: &[OsString]) -> Result<ExitCode, CliError> {
    let Some((program, rest)) = command.split_first() else {
        return Err(CliError::new(
            "MISSING_COMMAND",
            "give the server's command after `--`, or --listen and --upstream",
        ));
    };
    match crate::mcp::run(opts, program, rest) {
        Ok(code) => Ok(ExitCode::from(code)),
        Err(crate::mcp::RunError::Spawn(e)) => Err(CliError::new(
            "SPAWN_FAILED",
            format!("cannot run {}: {e}", program.to_string_lossy()),
        )),
        Err(crate::mcp::RunError::Relay(e)) => Err(CliError::new(
            "RELAY_FAILED",
            format!("relaying failed: {e}"),
        )),
    }
}
