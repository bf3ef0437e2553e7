//! `toolsize check --schema FILE [FILE|-]`: validates a JSON payload against declared field
//! limits before it is sent anywhere.
//!
//! The payload (a file, or standard input when absent or `-`) is checked against the schema file:
//! toolsize's own format ([`crate::guard::schema`]), a bare JSON Schema, an MCP tool, an OpenAI
//! function or tool, an Anthropic tool, or a parameter list ([`crate::guard::forms`]). The result is always one response envelope on standard
//! output: on success `ok: true` with the normalised payload as `data` (numeric strings parsed,
//! clamps applied and reported as `VALUE_CLAMPED`), exit 0; on refusal `ok: false` with a
//! `VALIDATION_ERROR` or `FIELD_TOO_LARGE` error listing every violation, exit 2. A payload that
//! is not JSON (or not UTF-8) is an `INVALID_JSON` envelope, exit 2; the message gives the
//! position, never the content. An unreadable or invalid schema file is a usage error on
//! standard error, exit 2. Nothing is written anywhere, so `toolsize check … && write` only
//! writes a payload that fits.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use serde_json::Value;

use crate::cli::{CliError, EXIT_USAGE};
use crate::guard::envelope::{Envelope, EnvelopeError, Phase};
use crate::guard::schema::Schema;

/// Arguments of `toolsize check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Schema file (JSON): toolsize's format, a JSON Schema, an MCP / OpenAI / Anthropic tool
    /// definition, or a list of parameters.
    #[arg(long, value_name = "FILE")]
    pub schema: PathBuf,
    /// The JSON payload to check; `-` or absent reads standard input.
    #[arg(value_name = "FILE|-")]
    pub payload: Option<PathBuf>,
}

/// Runs `toolsize check`.
pub fn run(args: CheckArgs) -> ExitCode {
    match check(&args) {
        Ok((envelope, ok)) => {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", envelope.to_json());
            let _ = out.flush();
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(EXIT_USAGE)
            }
        }
        Err(e) => e.report(),
    }
}

fn check(args: &CheckArgs) -> Result<(Envelope, bool), CliError> {
    let start = Instant::now();
    let schema_text = std::fs::read_to_string(&args.schema).map_err(|e| {
        CliError::new(
            "SCHEMA_UNREADABLE",
            format!("cannot read schema file {}: {e}", args.schema.display()),
        )
    })?;
    let schema = Schema::from_json(&schema_text)
        .map_err(|e| CliError::new("SCHEMA_INVALID", format!("{}: {e}", args.schema.display())))?;
    let payload = match &args.payload {
        Some(path) if path.as_os_str() != "-" => std::fs::read(path).map_err(|e| {
            CliError::new(
                "PAYLOAD_UNREADABLE",
                format!("cannot read payload file {}: {e}", path.display()),
            )
        })?,
        _ => {
            let mut buf = Vec::new();
            std::io::stdin().lock().read_to_end(&mut buf).map_err(|e| {
                CliError::new(
                    "PAYLOAD_UNREADABLE",
                    format!("cannot read standard input: {e}"),
                )
            })?;
            buf
        }
    };
    let value: Value = match serde_json::from_slice(&payload) {
        Ok(v) => v,
        Err(e) => {
            let err = EnvelopeError::new(
                "INVALID_JSON",
                format!(
                    "the payload ({} bytes) is not valid JSON: {e}",
                    payload.len()
                ),
                Phase::Validation,
            );
            return Ok((Envelope::err(err).with_duration(start.elapsed()), false));
        }
    };
    match schema.validate(&value) {
        Ok(validated) => Ok((
            Envelope::ok(Value::Object(validated.args))
                .with_warnings(validated.warnings)
                .with_duration(start.elapsed()),
            true,
        )),
        Err(e) => Ok((
            Envelope::err(e.to_envelope_error()).with_duration(start.elapsed()),
            false,
        )),
    }
}
