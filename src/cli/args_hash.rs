//! `toolsize args-hash`: the `tool.args_hash` of JSON arguments read on standard input.
//!
//! Prints the 12 hex digits Python prints for
//! `hashlib.sha1(json.dumps(args, sort_keys=True, default=str).encode()).hexdigest()[:12]`, so a
//! Python or shell user can check that their hashes agree with toolsize's. With a key
//! (`--key-file FILE`, else `$TOOLSIZE_ARGS_HASH_KEY`; `--unkeyed` ignores both) it prints the
//! keyed hash instead, `hmac.new(key, canonical, hashlib.sha1).hexdigest()[:12]`
//! ([`crate::args_hash::ArgsHashKey`]). Invalid JSON, and a key file that cannot be read or is
//! empty, exit 2 with a structured error (the JSON one naming the line and column); the key is
//! never printed.

use std::io::{Read, Write};
use std::process::ExitCode;

use super::CliError;
use crate::args_hash::ArgsHashKey;

/// Arguments of `toolsize args-hash`.
#[derive(Debug, clap::Args)]
pub struct ArgsHashArgs {
    /// Also print the canonical JSON that was hashed, on a second line.
    #[arg(long)]
    pub canonical: bool,
    /// A file whose first line is the key of a keyed hash (HMAC-SHA1); default:
    /// $TOOLSIZE_ARGS_HASH_KEY when set.
    #[arg(long, value_name = "FILE", conflicts_with = "unkeyed")]
    pub key_file: Option<std::path::PathBuf>,
    /// The unkeyed hash, even when $TOOLSIZE_ARGS_HASH_KEY is set.
    #[arg(long)]
    pub unkeyed: bool,
}

/// The key asked for, if any.
fn key(args: &ArgsHashArgs) -> Result<Option<ArgsHashKey>, CliError> {
    if args.unkeyed {
        return Ok(None);
    }
    let Some(path) = &args.key_file else {
        return Ok(ArgsHashKey::from_env());
    };
    let text = std::fs::read_to_string(path).map_err(|e| {
        CliError::new(
            "KEY_FILE_UNREADABLE",
            format!("--key-file {}: {e}", path.display()),
        )
    })?;
    let line = text.lines().next().unwrap_or("");
    ArgsHashKey::new(line.as_bytes()).map(Some).ok_or_else(|| {
        CliError::new(
            "EMPTY_KEY",
            format!("--key-file {}: its first line is empty", path.display()),
        )
    })
}

/// Runs `toolsize args-hash`.
pub fn run(args: &ArgsHashArgs) -> ExitCode {
    let key = match key(args) {
        Ok(k) => k,
        Err(e) => return e.report(),
    };
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
    let hash = match &key {
        Some(k) => crate::args_hash::keyed_args_hash_of_canonical(k, canonical.as_bytes()),
        None => crate::args_hash::args_hash_of_canonical(canonical.as_bytes()),
    };
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
