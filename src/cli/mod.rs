//! The `toolsize` command line: argument parsing and the subcommands' entry points.
//!
//! `src/bin/toolsize.rs` stays thin: it parses [`Cli`], calls [`run`] and exits with the code it
//! returns. Every subcommand reports a failure as a structured JSON error on standard error and
//! exits 2 ([`EXIT_USAGE`]); a wrapped tool's own exit code is passed through unchanged.

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub mod args_hash;
pub mod assets;
pub mod check;
#[cfg(feature = "collector")]
pub mod demo;
#[cfg(feature = "collector")]
pub mod hook;
pub mod layers;
pub mod mcp;
#[cfg(feature = "collector")]
pub mod serve;
#[cfg(feature = "collector")]
pub mod top;
pub mod wrap;

/// Exit code for bad input, a refused payload or any failure of toolsize itself.
pub const EXIT_USAGE: u8 = 2;

/// Smallest output limit `wrap` and `mcp` accept, in bytes: room for the refusal itself, so that
/// what they print is never over the limit, whatever happens.
pub const MIN_MAX_OUTPUT: u64 = crate::guard::ceiling::MIN_PROXY_LIMIT;

/// Make tool-result size visible in LLM agent loops, and make silent truncation loud.
#[derive(Debug, Parser)]
#[command(name = "toolsize", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the `tool.args_hash` of JSON arguments read on standard input (identical to Python's
    /// `sha1(json.dumps(args, sort_keys=True, default=str))[:12]`).
    ArgsHash(args_hash::ArgsHashArgs),
    /// Validate a JSON payload against declared field limits (exit 2 when refused).
    Check(check::CheckArgs),
    /// Run a command-line tool; measure, guard and report its output as an envelope.
    Wrap(wrap::WrapArgs),
    /// Put a proxy in front of an MCP server, on stdio (`-- CMD`) or over Streamable HTTP
    /// (`--listen ADDR --upstream URL`), that measures, guards and traces every tools/call and
    /// checks its arguments.
    Mcp(mcp::McpArgs),
    /// List the built-in catalog of truncation layers (limits, units, scopes, actions).
    Layers(layers::LayersArgs),
    /// Run the collector daemon: OTLP in, per-tool size histograms out.
    #[cfg(feature = "collector")]
    Serve(Box<serve::ServeArgs>),
    /// Print a complete, commented collector configuration file.
    #[cfg(feature = "collector")]
    GenConfig,
    /// The collector daemon plus a built-in synthetic agent feeding it, to see the status page,
    /// history and alerts within seconds (the flags of `serve`, plus `--deploy-after`).
    #[cfg(feature = "collector")]
    Demo(Box<serve::DemoArgs>),
    /// A terminal UI on a running daemon: tools by p95, over-ceiling count or call rate, p95
    /// sparklines, firing alerts.
    #[cfg(feature = "collector")]
    Top(top::TopArgs),
    /// A coding agent's hook (Claude Code's PostToolUse): reads the payload on standard input and
    /// tells the daemon about cuts the agent's own telemetry does not show (sizes only).
    #[cfg(feature = "collector")]
    Hook(hook::HookArgs),
}

/// Parses the process's arguments and runs them. `--help` and `--version` print as usual and exit
/// 0; any other argument error is a structured `USAGE` error (exit 2) whose message is clap's,
/// with its suggestions.
pub fn main() -> ExitCode {
    // `toolsize generate-assets DIR` (for packaging) is parsed apart from [`Cli`], so that the
    // completions and man pages it writes from [`Cli`] do not offer it.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == assets::SUBCOMMAND)
    {
        return assets::main(std::env::args_os().skip(1));
    }
    match Cli::try_parse() {
        Ok(cli) => run(cli),
        Err(e) => usage_error(e),
    }
}

fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        _ => CliError::new("USAGE", e.render().to_string().trim_end()).report(),
    }
}

/// Runs a parsed command line and returns the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::ArgsHash(args) => args_hash::run(&args),
        Command::Check(args) => check::run(args),
        Command::Wrap(args) => wrap::run(args),
        Command::Mcp(args) => mcp::run(args),
        Command::Layers(args) => layers::run(&args),
        #[cfg(feature = "collector")]
        Command::Serve(args) => serve::serve(*args),
        #[cfg(feature = "collector")]
        Command::Demo(args) => serve::demo(*args),
        #[cfg(feature = "collector")]
        Command::GenConfig => serve::gen_config(),
        #[cfg(feature = "collector")]
        Command::Top(args) => top::run(args),
        #[cfg(feature = "collector")]
        Command::Hook(args) => hook::run(&args),
    }
}

/// A failure reported by a subcommand: printed as one JSON object on standard error, exit 2.
#[derive(Debug)]
pub struct CliError {
    /// Stable machine-readable code, `SCREAMING_SNAKE_CASE`.
    pub code: &'static str,
    /// What went wrong and what to do about it.
    pub message: String,
}

impl CliError {
    /// A new error with `code` and `message`.
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// Writes the error to standard error as `{"ok":false,"error":{"code":..,"message":..}}` and
    /// returns exit code 2.
    pub fn report(&self) -> ExitCode {
        self.report_with(ExitCode::from(EXIT_USAGE))
    }

    /// [`CliError::report`] with another exit code (a failure at run time, not of usage).
    pub fn report_with(&self, code: ExitCode) -> ExitCode {
        let body = serde_json::json!({
            "ok": false,
            "error": { "code": self.code, "message": self.message },
        });
        let _ = writeln!(std::io::stderr().lock(), "{body}");
        code
    }
}
