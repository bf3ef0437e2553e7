//! `toolsize args-hash`: the `tool.args_hash` of JSON arguments read on standard input.
//!
//! Prints the 12 hex digits Python prints for
//! `hashlib.sha1(json.dumps(args, sort_keys=True, default=str).encode()).hexdigest()[:12]`, so a
//! Python or shell user can check that their hashes agree with toolsize's. Invalid JSON exits 2
//! with a structured error naming the line and column.

use std::io::{Read, Write};
use std::process::ExitCode;

use super::CliError;

/// Arguments of `toolsize args-hash`.
#[derive(Debug, clap::Args)]
pub struct ArgsHashArgs {
    /// Also print the canonical JSON that was hashed, on a second line.
    #[arg(long)]
    pub canonical: bool,
}

/// Runs `toolsize args-hash`.
pub fn run(args: &ArgsHashArgs) -> ExitCode {
    let mut text = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut text) {
        return CliError::new(
            "STDIN_UNREADABLE",
            format!("cannot read standard input as UTF-8: {e}"),
        )
        .report();
    }
    let canonical = match crate::args_hash::canonical_json_from_text(&text) {
        Ok(c) => c,
        Err(e) => return CliError::new("INVALID_JSON", e.to_string()).report(),
    };
    let hash = crate::args_hash::args_hash_of_canonical(canonical.as_bytes());
    let mut out = std::io::stdout().lock();
    let written = if args.canonical {
        writeln!(out, "{hash}\n{canonical}")
    } else {
        writeln!(out, "{hash}")
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => CliError::new("STDOUT_UNWRITABLE", e.to_string()).report(),
    }
}
