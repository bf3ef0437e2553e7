//! `toolsize wrap [--tool NAME] [--max-output BYTES] [--policy reject|truncate|spill] -- CMD ARGS…`:
//! runs a command-line tool, measures its standard output, guards it, and reports it as one
//! response envelope.
//!
//! The command's standard input and standard error are passed through; its standard output is
//! read whole (memory grows with it), measured, and handed to the ceiling guard
//! ([`crate::guard::ceiling`]) under the chosen policy. What `wrap` prints on standard output is
//! always one complete JSON envelope:
//!
//! * output that is a JSON envelope itself (`ok` plus `meta`/`warnings`/`error`) is passed on,
//!   its `data` guarded; if its `meta.truncated` and its `FIELD_TRUNCATED` warnings disagree, a
//!   `TRUNCATION_UNREPORTED` warning is added, `meta.truncated` is set, and a line is logged on
//!   standard error;
//! * other JSON becomes `data` (cut JSON-aware when over the limit);
//! * anything else becomes `data` as a string (cut head+tail); bytes that are not UTF-8 are
//!   replaced and reported as `FIELD_CHANGED`.
//!
//! **The limit is the whole envelope**, warnings and meta included (the final newline aside):
//! `data` gets what the other members leave, and many cuts of one shape are one
//! `FIELD_TRUNCATED` warning with a `count` and the paths' pattern (`data.rows[*].body`), so the
//! next layer never has to cut what `wrap` printed. A limit below [`MIN_MAX_OUTPUT`](super::MIN_MAX_OUTPUT) is refused,
//! since the refusal itself must fit.
//!
//! The tool's exit code is passed through (128 + signal when it was killed); a failing tool gets
//! `ok: false` with a `TOOL_FAILED` error and its output kept in `data`. When the guard rejects
//! the output, the error is `RESULT_TOO_LARGE` and the exit code 2; when the command cannot be
//! started, `SPAWN_FAILED` and 2. The call is one tool-call span ([`crate::tool_call`]), exported
//! over OTLP ([`crate::export`]) when `OTEL_EXPORTER_OTLP_ENDPOINT` (or its `TRACES_` form) is
//! set, and flushed before exit; the span carries sizes and an argument hash, never the output.
//! A cut or refused output is recorded as truncated, with the original size.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use serde_json::{json, Value};

use crate::cli::{CliError, EXIT_USAGE};
use crate::guard::ceiling::{
    fit, Attempt, CeilingGuard, GuardError, Guarded, Outcome, Policy, ResultTooLarge,
};
use crate::guard::envelope::{
    audit_envelope, coalesce, looks_like_envelope, Envelope, EnvelopeError, Phase, Warning,
};

/// Arguments of `toolsize wrap`.
#[derive(Debug, clap::Args)]
pub struct WrapArgs {
    /// Tool name for the span and messages (default: the command's file name).
    #[arg(long, value_name = "NAME")]
    pub tool: Option<String>,
    /// Limit of the whole printed envelope in bytes, at least 1024 (default:
    /// $TOOLSIZE_CEILING_BYTES, else 16384).
    #[arg(long, value_name = "BYTES")]
    pub max_output: Option<u64>,
    /// What to do with output over the limit.
    #[arg(long, value_name = "POLICY", default_value = "truncate", value_parser = ["reject", "truncate", "spill"])]
    pub policy: String,
    /// Directory for spilled output (default: $TOOLSIZE_SPILL_DIR, else toolsize-spill in the
    /// system temporary directory).
    #[arg(long, value_name = "DIR")]
    pub spill_dir: Option<PathBuf>,
    /// Share of a cut text output kept from its start (the rest from its end), 0.0 to 1.0.
    #[arg(long, value_name = "RATIO", default_value_t = crate::guard::DEFAULT_HEAD_RATIO)]
    pub head_ratio: f64,
    /// Wrap a cut text output in `<START_TOOL_OUTPUT>` / `<END_TOOL_OUTPUT>`, as Inspect does.
    #[arg(long)]
    pub inspect_wrapper: bool,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// Whether an OTLP endpoint is configured in the environment.
fn otlp_configured() -> bool {
    [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()))
}

/// Sets up span export when an OTLP endpoint is configured. The log output on standard error
/// shows warnings unless `RUST_LOG` says otherwise, so the wrapped tool's own standard error is
/// not drowned. A set-up failure is reported on standard error and the tool still runs.
pub(crate) fn init_export() -> Option<crate::export::ExportGuard> {
    if !otlp_configured() {
        return None;
    }
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".to_owned());
    match crate::export::builder().log_filter(filter).install() {
        Ok(guard) => Some(guard),
        Err(e) => {
            let line = json!({
                "level": "WARN",
                "error": e.to_string(),
                "message": "OTLP export could not be set up; the tool-call span will not be exported.",
            });
            let _ = writeln!(std::io::stderr().lock(), "{line}");
            None
        }
    }
}

/// Runs `toolsize wrap`.
pub fn run(args: WrapArgs) -> ExitCode {
    // Kept to the end: dropping it flushes the span.
    let _export = init_export();
    let policy: Policy = match args.policy.parse() {
        Ok(p) => p,
        Err(e) => return CliError::new("INVALID_POLICY", format!("{e}")).report(),
    };
    if !(0.0..=1.0).contains(&args.head_ratio) {
        return CliError::new(
            "INVALID_HEAD_RATIO",
            format!("--head-ratio is {}: expected 0.0 to 1.0", args.head_ratio),
        )
        .report();
    }
    let guard = match CeilingGuard::builder()
        .max_output_opt(args.max_output)
        .policy(policy)
        .head_ratio(args.head_ratio)
        .inspect_wrapper(args.inspect_wrapper)
        .spill_dir(args.spill_dir.as_deref())
        .build_for_proxy()
    {
        Ok(g) => g,
        Err(e) => return CliError::new("INVALID_LIMIT", e.to_string()).report(),
    };
    let Some((program, rest)) = args.command.split_first() else {
        return CliError::new("MISSING_COMMAND", "give the command to run after `--`").report();
    };
    let tool = args.tool.clone().unwrap_or_else(|| {
        std::path::Path::new(program)
            .file_name()
            .unwrap_or(program)
            .to_string_lossy()
            .into_owned()
    });
    let argv: Vec<String> = rest
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let call = crate::tool_call(&tool).args(&argv).start();
    let start = Instant::now();

    let output = Command::new(program)
        .args(rest)
        .stdin(Stdio::inherit())
        .stderr(Stdio::inherit())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            let mut stdout = Vec::new();
            if let Some(mut pipe) = child.stdout.take() {
                pipe.read_to_end(&mut stdout)?;
            }
            Ok((child.wait()?, stdout))
        });
    let (status, stdout) = match output {
        Ok(o) => o,
        Err(e) => {
            let message = format!("cannot run {}: {e}", program.to_string_lossy());
            call.fail(&message, "spawn_failed");
            let env = Envelope::err(EnvelopeError::new(
                "SPAWN_FAILED",
                message,
                Phase::Execution,
            ))
            .with_duration(start.elapsed());
            print_line(&env.to_json());
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let code = crate::guard::child_exit_code(status);
    let size = stdout.len() as u64;

    let result = shape(&guard, &tool, &stdout, code, start);
    let (printed, cut, exit) = match result {
        Ok(Shaped { json, cut, .. }) => (json, cut, code),
        Err(e) => {
            // Refused, not cut: the error carries the size. The span records the call as cut
            // from that size to the error envelope the model gets instead.
            let json = refusal_json(&e, start.elapsed(), guard.limit().bytes);
            (json, true, EXIT_USAGE)
        }
    };
    if code != 0 {
        call.fail(&format!("{tool} exited with status {code}"), "exit_status");
    } else if cut {
        call.finish_truncated(printed.as_bytes(), size);
    } else {
        call.finish(printed.as_bytes(), false);
    }
    print_line(&printed);
    ExitCode::from(exit)
}

struct Shaped {
    json: String,
    cut: bool,
    /// The bytes `data` was allowed (the next round of fitting starts below it).
    budget: u64,
    /// The bytes `data` takes in `json`.
    data_len: u64,
}

fn print_line(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Logs a warning: through `tracing` when a subscriber is installed, else as one JSON line on
/// standard error, so it is never lost.
fn warn_loudly(tool: &str, problem: &str) {
    if tracing::dispatcher::has_been_set() {
        tracing::warn!(
            tool,
            problem,
            "Wrapped tool's envelope misreports truncation."
        );
    } else {
        let line = json!({
            "level": "WARN",
            "tool": tool,
            "problem": problem,
            "message": "Wrapped tool's envelope misreports truncation.",
        });
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    }
}

/// Shapes the output so that the *whole* envelope (data, warnings, meta) is at most the limit:
/// `data` is first given the limit less the envelope's other members, then less again by what
/// the warnings and escaping added, until it fits. When nothing fits, the output is refused.
fn shape(
    guard: &CeilingGuard,
    tool: &str,
    stdout: &[u8],
    code: u8,
    start: Instant,
) -> Result<Shaped, GuardError> {
    let limit = guard.limit().bytes;
    let size = stdout.len() as u64;
    let parsed: Option<Value> = serde_json::from_slice(stdout).ok();
    let skeleton = Envelope::ok(Value::Null)
        .with_duration(start.elapsed())
        .to_json()
        .len() as u64;
    let fitted = fit(limit, limit.saturating_sub(skeleton), |budget| {
        let shaped = shape_within(guard, tool, stdout, parsed.as_ref(), code, start, budget)?;
        Ok(Attempt {
            len: shaped.json.len() as u64,
            data_len: shaped.data_len,
            budget: shaped.budget,
            out: shaped,
        })
    })?;
    if let Some(shaped) = fitted {
        return Ok(shaped);
    }
    Err(GuardError::TooLarge(ResultTooLarge {
        tool: tool.to_owned(),
        size,
        limit,
    }))
}

/// The refusal envelope, made to fit `limit`: without its hint, then without its message's
/// details, if the full one does not.
pub(crate) fn refusal_json(e: &GuardError, duration: std::time::Duration, limit: u64) -> String {
    let mut err = e.to_envelope_error();
    let full = Envelope::err(err.clone()).with_duration(duration).to_json();
    if full.len() as u64 <= limit {
        return full;
    }
    err.hint = None;
    err.tool = None;
    let short = Envelope::err(err.clone()).with_duration(duration).to_json();
    if short.len() as u64 <= limit {
        return short;
    }
    err.message = "over the output limit".to_owned();
    Envelope::err(err).with_duration(duration).to_json()
}

fn shape_within(
    guard: &CeilingGuard,
    tool: &str,
    stdout: &[u8],
    parsed: Option<&Value>,
    code: u8,
    start: Instant,
    budget: u64,
) -> Result<Shaped, GuardError> {
    let size = stdout.len() as u64;
    if let Some(value) = parsed.filter(|v| looks_like_envelope(v)) {
        return shape_envelope(guard, tool, value.clone(), size, budget);
    }
    let (guarded, mut warnings): (Guarded<Value>, Vec<Warning>) = match parsed {
        Some(value) => (guard.json_within(tool, "data", value, budget)?, Vec::new()),
        None => {
            // Refuse by the bytes the tool wrote (replacement characters would inflate them).
            if guard.policy() == Policy::Reject && size > budget {
                return Err(GuardError::TooLarge(ResultTooLarge {
                    tool: tool.to_owned(),
                    size,
                    limit: guard.limit().bytes,
                }));
            }
            let text = String::from_utf8_lossy(stdout);
            let mut extra = Vec::new();
            if let std::borrow::Cow::Owned(_) = text {
                extra.push(Warning::FieldChanged {
                    field: "data".to_owned(),
                    reason:
                        "the output is not valid UTF-8; invalid bytes were replaced with U+FFFD"
                            .to_owned(),
                });
            }
            let g = guard.text_within(tool, "data", &text, budget)?;
            (
                Guarded {
                    output: Value::String(g.output),
                    outcome: g.outcome,
                    original_bytes: g.original_bytes,
                    warnings: g.warnings,
                },
                extra,
            )
        }
    };
    let cut = guarded.truncated();
    warnings.extend(guarded.warnings);
    let warnings = coalesce(warnings);
    let mut env = if code == 0 {
        Envelope::ok(guarded.output)
    } else {
        Envelope::err(EnvelopeError::new(
            "TOOL_FAILED",
            format!("{tool} exited with status {code}; its output is in data"),
            Phase::Execution,
        ))
        .with_data(guarded.output)
    };
    env = env.with_warnings(warnings).with_duration(start.elapsed());
    if cut {
        env.mark_truncated(Some(size));
    }
    let data_len = crate::measure::json_len(env.data());
    Ok(Shaped {
        json: env.to_json(),
        cut,
        budget,
        data_len,
    })
}
/// Passes a tool's own envelope on: audits its truncation flags, guards its `data`.
fn shape_envelope(
    guard: &CeilingGuard,
    tool: &str,
    mut env: Value,
    size: u64,
    cap: u64,
) -> Result<Shaped, GuardError> {
    let mut added = Vec::new();
    let mut cut = false;
    if let Some(problem) = audit_envelope(&env) {
        let message = problem.to_string();
        warn_loudly(tool, &message);
        added.push(Warning::TruncationUnreported { message });
        cut = true;
    }
    let limit = guard.limit().bytes;
    push_warnings(&mut env, &added);
    let whole = serde_json::to_string(&env).map_or(u64::MAX, |s| s.len() as u64);
    let mut used = cap;
    if whole > limit {
        if guard.policy() == Policy::Reject {
            return Err(GuardError::TooLarge(
                crate::guard::ceiling::ResultTooLarge {
                    tool: tool.to_owned(),
                    size,
                    limit,
                },
            ));
        }
        let data = env.get("data").cloned().unwrap_or(Value::Null);
        let mut skeleton = env.clone();
        skeleton["data"] = Value::Null;
        let overhead = serde_json::to_string(&skeleton).map_or(0, |s| s.len() as u64);
        used = limit.saturating_sub(overhead).min(cap);
        let g = guard.json_within(tool, "data", &data, used)?;
        if g.outcome != Outcome::Fits {
            cut = true;
        }
        env["data"] = g.output;
        push_warnings(&mut env, &coalesce(g.warnings));
        if let Some(meta) = env.get_mut("meta").and_then(Value::as_object_mut) {
            meta.insert("original_bytes".to_owned(), json!(size));
        }
    }
    if cut {
        let obj = env
            .as_object_mut()
            .expect("checked to be an envelope object");
        let meta = obj.entry("meta").or_insert_with(|| json!({}));
        if !meta.is_object() {
            *meta = json!({});
        }
        meta["truncated"] = Value::Bool(true);
    }
    Ok(Shaped {
        json: serde_json::to_string(&env).unwrap_or_else(|_| {
            Envelope::err(EnvelopeError::new(
                "ENCODING_FAILED",
                "the output could not be re-encoded",
                Phase::Execution,
            ))
            .to_json()
        }),
        cut,
        budget: used,
        data_len: env.get("data").map_or(0, crate::measure::json_len),
    })
}

/// Appends `added` to an envelope's `warnings` (made an array if it is not one).
fn push_warnings(env: &mut Value, added: &[Warning]) {
    if added.is_empty() {
        return;
    }
    let Some(obj) = env.as_object_mut() else {
        return;
    };
    let warnings = obj
        .entry("warnings")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !warnings.is_array() {
        *warnings = Value::Array(Vec::new());
    }
    if let Value::Array(list) = warnings {
        list.extend(
            added
                .iter()
                .map(|w| serde_json::to_value(w).unwrap_or(Value::Null)),
        );
    }
}
