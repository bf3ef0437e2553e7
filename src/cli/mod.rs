//! The `toolsize` command line: argument parsing and the subcommands' entry points.
//!
//! `src/bin/toolsize.rs` stays thin: it parses [`Cli`], calls [`run`] and exits with the code it
//! returns. Every subcommand reports a failure on standard error and exits 2 ([`EXIT_USAGE`]); a
//! wrapped tool's own exit code is passed through unchanged. The failure is one JSON object
//! (`{"ok":false,"error":{"code":..,"message":..}}`) when standard error is not a terminal (a
//! program reading it), and plain text on a terminal; `TOOLSIZE_ERROR_FORMAT=json` or `text`
//! chooses ([`ErrorFormat`]). `toolsize` alone prints its help as plain text and exits 2.
//!
//! `--version` prints the version, the commit it was built from (`git rev-parse --short HEAD`
//! at build time, `unknown` outside a git checkout) and the cargo features compiled in.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

pub mod args_hash;
pub mod assets;
pub mod check;
#[cfg(feature = "collector")]
pub mod connect;
#[cfg(feature = "collector")]
pub mod demo;
#[cfg(feature = "collector")]
pub mod doctor;
#[cfg(feature = "collector")]
pub mod hook;
pub mod layers;
#[cfg(feature = "collector")]
pub mod log;
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

/// The variable choosing how failures are written on standard error: `json` or `text`; unset,
/// JSON unless standard error is a terminal.
pub const ERROR_FORMAT_VAR: &str = "TOOLSIZE_ERROR_FORMAT";

/// The commit this binary was built from (`build.rs`), or `unknown`.
pub const COMMIT: &str = env!("TOOLSIZE_COMMIT");

/// The cargo features compiled in, as `--version` names them.
pub const FEATURES: &[(&str, bool)] = &[
    ("export", cfg!(feature = "export")),
    ("cli", cfg!(feature = "cli")),
    ("collector", cfg!(feature = "collector")),
    ("tls", cfg!(feature = "tls")),
    ("rmcp", cfg!(feature = "rmcp")),
    ("rig", cfg!(feature = "rig")),
    ("swiftide", cfg!(feature = "swiftide")),
];

/// What `--version` prints after the name: `0.2.0 (commit 1a2b3c4; features: cli, export)`.
pub fn version() -> String {
    let on: Vec<&str> = FEATURES
        .iter()
        .filter(|(_, on)| *on)
        .map(|(name, _)| *name)
        .collect();
    format!(
        "{} (commit {COMMIT}; features: {})",
        env!("CARGO_PKG_VERSION"),
        on.join(", ")
    )
}

/// [`version`], computed once (clap takes a `&'static str`).
static VERSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(version);

/// How a failure is written on standard error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorFormat {
    /// One JSON object, `{"ok":false,"error":{"code":..,"message":..}}`.
    Json,
    /// `error[CODE]: message`, for a person at a terminal.
    Text,
}

impl ErrorFormat {
    /// From [`ERROR_FORMAT_VAR`] (`json` or `text`), else text on a terminal and JSON
    /// otherwise. An unknown value is an error naming the accepted ones.
    pub fn from_env() -> Result<Self, String> {
        Self::choose(
            std::env::var(ERROR_FORMAT_VAR).ok().as_deref(),
            std::io::stderr().is_terminal(),
        )
    }

    /// The format `var` (the variable's value) asks for, or the default for a standard error
    /// that is (`terminal`) or is not a terminal.
    pub fn choose(var: Option<&str>, terminal: bool) -> Result<Self, String> {
        match var.map(str::trim) {
            Some("json") => Ok(ErrorFormat::Json),
            Some("text") => Ok(ErrorFormat::Text),
            None | Some("") if terminal => Ok(ErrorFormat::Text),
            None | Some("") => Ok(ErrorFormat::Json),
            Some(other) => Err(format!(
                "{ERROR_FORMAT_VAR}={other:?} is not a format: use \"json\" or \"text\""
            )),
        }
    }
}

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
    #[command(mut_arg(serve::WINDOWS_KEY, |a| a.help(serve::demo_window_help())))]
    Demo(Box<serve::DemoArgs>),
    /// A terminal UI on a running daemon: tools by p95, over-ceiling count or call rate, p95
    /// sparklines, firing alerts.
    #[cfg(feature = "collector")]
    Top(top::TopArgs),
    /// A coding agent's command hook (Claude Code's or Qwen Code's PostToolUse, Gemini CLI's
    /// AfterTool): reads the payload on standard input and tells the daemon what it reveals of
    /// the call (sizes, ids and names only). Never exits 2.
    #[cfg(feature = "collector")]
    Hook(hook::HookArgs),
    /// Write a coding agent's telemetry settings and hook into its own configuration file,
    /// pointed at the daemon (merged with what is there; `--dry-run` shows the diff, `--undo`
    /// takes it out).
    #[cfg(feature = "collector")]
    Connect(connect::ConnectArgs),
    /// Ask a running daemon what each coding agent has sent, and say which switch is missing
    /// (exit 1 when one is).
    #[cfg(feature = "collector")]
    Doctor(doctor::DoctorArgs),
}

/// Parses the process's arguments and runs them. `--help` and `--version` print as usual and exit
/// 0; `toolsize` alone prints its help as plain text and exits 2; any other argument error is a
/// `USAGE` error (exit 2) whose message is clap's, with its suggestions.
pub fn main() -> ExitCode {
    // `toolsize generate-assets DIR` (for packaging) is parsed apart from [`Cli`], so that the
    // completions and man pages it writes from [`Cli`] do not offer it.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == assets::SUBCOMMAND)
    {
        return assets::main(std::env::args_os().skip(1));
    }
    if let Err(e) = ErrorFormat::from_env() {
        // Reported as JSON: the variable that would say otherwise is the one in error.
        return CliError::new("USAGE", e).report_as(ErrorFormat::Json, EXIT_USAGE.into());
    }
    let parsed = Cli::command()
        .version(VERSION.as_str())
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m));
    match parsed {
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
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand if !hook_command() => {
            let _ = write!(std::io::stderr().lock(), "{}", e.render());
            ExitCode::from(EXIT_USAGE)
        }
        _ => {
            let usage = CliError::new("USAGE", e.render().to_string().trim_end());
            // A hook's exit 2 feeds its error to the model: `toolsize hook` never exits 2.
            #[cfg(feature = "collector")]
            if hook_command() {
                return usage.report_with(ExitCode::from(hook::EXIT_HOOK_FAILED));
            }
            usage.report()
        }
    }
}

/// Whether this process is `toolsize hook …`, whose failures never exit 2 (an agent feeds a
/// hook's exit-2 error to its model).
fn hook_command() -> bool {
    cfg!(feature = "collector") && std::env::args().nth(1).as_deref() == Some("hook")
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
        #[cfg(feature = "collector")]
        Command::Connect(args) => connect::run(&args),
        #[cfg(feature = "collector")]
        Command::Doctor(args) => doctor::run(&args),
    }
}

/// A failure reported by a subcommand: printed on standard error in the [`ErrorFormat`] of the
/// environment, exit 2.
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

    /// Writes the error to standard error (as `{"ok":false,"error":{"code":..,"message":..}}`, or
    /// as text, see [`ErrorFormat`]) and returns exit code 2.
    pub fn report(&self) -> ExitCode {
        self.report_with(ExitCode::from(EXIT_USAGE))
    }

    /// [`CliError::report`] with another exit code (a failure at run time, not of usage).
    pub fn report_with(&self, code: ExitCode) -> ExitCode {
        self.report_as(ErrorFormat::from_env().unwrap_or(ErrorFormat::Json), code)
    }

    /// Writes the error to standard error in `format` and returns `code`.
    pub fn report_as(&self, format: ErrorFormat, code: ExitCode) -> ExitCode {
        let _ = writeln!(std::io::stderr().lock(), "{}", self.render(format));
        code
    }

    /// The error as written in `format` (without the final newline).
    pub fn render(&self, format: ErrorFormat) -> String {
        match format {
            ErrorFormat::Json => serde_json::json!({
                "ok": false,
                "error": { "code": self.code, "message": self.message },
            })
            .to_string(),
            // clap's usage errors begin with "error: " already.
            ErrorFormat::Text if self.code == "USAGE" && self.message.starts_with("error:") => {
                self.message.clone()
            }
            ErrorFormat::Text => format!("error[{}]: {}", self.code, self.message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_format_follows_the_variable_then_the_terminal() {
        assert_eq!(ErrorFormat::choose(None, true), Ok(ErrorFormat::Text));
        assert_eq!(ErrorFormat::choose(None, false), Ok(ErrorFormat::Json));
        assert_eq!(ErrorFormat::choose(Some(""), true), Ok(ErrorFormat::Text));
        assert_eq!(
            ErrorFormat::choose(Some("json"), true),
            Ok(ErrorFormat::Json)
        );
        assert_eq!(
            ErrorFormat::choose(Some("text"), false),
            Ok(ErrorFormat::Text)
        );
        let e = ErrorFormat::choose(Some("yaml"), true).unwrap_err();
        assert!(e.contains("\"json\" or \"text\""), "{e}");
    }

    #[test]
    fn text_errors_name_their_code() {
        let e = CliError::new("CONFIG", "bad value");
        assert_eq!(e.render(ErrorFormat::Text), "error[CONFIG]: bad value");
        let v: serde_json::Value = serde_json::from_str(&e.render(ErrorFormat::Json)).unwrap();
        assert_eq!(v["error"]["code"], "CONFIG");
        let usage = CliError::new("USAGE", "error: unexpected argument '--x' found");
        assert_eq!(
            usage.render(ErrorFormat::Text),
            "error: unexpected argument '--x' found"
        );
    }

    #[test]
    fn version_names_the_commit_and_the_features() {
        let v = version();
        assert!(v.starts_with(env!("CARGO_PKG_VERSION")), "{v}");
        assert!(v.contains(&format!("commit {COMMIT}")), "{v}");
        assert!(v.contains("cli"), "{v}");
    }

    #[test]
    fn version_knows_every_feature_of_the_manifest() {
        let manifest = include_str!("../../Cargo.toml");
        let section = manifest
            .split("\n[features]\n")
            .nth(1)
            .and_then(|rest| rest.split("\n[").next())
            .expect("a [features] section");
        let declared: Vec<&str> = section
            .lines()
            .filter_map(|line| line.split_once(" = ").map(|(name, _)| name.trim()))
            .filter(|name| !name.starts_with('#') && !name.is_empty() && *name != "default")
            .collect();
        let named: Vec<&str> = FEATURES.iter().map(|(name, _)| *name).collect();
        assert_eq!(
            named, declared,
            "FEATURES lists the manifest's features in order"
        );
    }
}
