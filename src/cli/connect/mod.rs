//! `toolsize connect <agent>`: writes a coding agent's telemetry settings and hook into its own
//! configuration file, pointed at a daemon (`--endpoint`, its OTLP/HTTP listener), as
//! `docs/agents.md` lists them ([`agents`] holds what each agent gets).
//!
//! - **Merges**: the user's keys stay, in their order; a key this command sets is replaced, a
//!   hook is added beside the user's own ([`doc`] says what is kept of each format: TOML keeps
//!   its comments, JSON with comments is refused).
//! - **Idempotent**: a run that finds every setting in place writes nothing and says so.
//! - **Undoable**: what a run changed is recorded beside the file, in
//!   `<file>.toolsize-connect.json` (mode 0600: it may hold the token), with the value each key
//!   had before. `--undo` puts those values back (removes the keys that were absent) and takes
//!   the hooks out, leaving alone a key the user changed since (and saying so); then it deletes
//!   the record. A key that already held the value is not recorded, so never removed.
//! - `--dry-run` prints the change as a diff and writes nothing.
//! - **Safe writes**: the new text is written to a temporary file in the same directory, synced,
//!   given the old file's permissions (a new file: 0600 when it holds a token, else 0644) and
//!   renamed over the file (a symlink's target is replaced, the link kept).
//!
//! Bad input (an unknown agent, with clap's "a similar value exists"; a file that does not
//! parse; a key on the way that holds something else than an object; an endpoint that is not an
//! `http(s)://host:port`; a token for an agent whose file has no place for one) exits 2 with the
//! structured error of [`super::CliError`] and leaves every file untouched.

pub mod agents;
pub(crate) mod doc;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use serde::{Deserialize, Serialize};

use self::agents::{ConnectAgent, Plan};
use self::doc::{Doc, J};
use super::CliError;

/// The endpoint when none is given: the daemon's default OTLP/HTTP listener.
pub const DEFAULT_ENDPOINT: &str = super::hook::DEFAULT_ENDPOINT;

/// What is appended to a file's name for the record of what `connect` changed in it.
pub const RECORD_SUFFIX: &str = ".toolsize-connect.json";

/// Largest configuration file read.
const MAX_FILE: u64 = 16 << 20;

/// Flags of `toolsize connect`.
#[derive(Debug, Clone, Args)]
pub struct ConnectArgs {
    /// The agent to connect.
    #[arg(value_enum)]
    pub agent: ConnectAgent,
    /// The daemon's OTLP/HTTP listener, `http(s)://host:port`.
    #[arg(long, default_value = DEFAULT_ENDPOINT)]
    pub endpoint: String,
    /// A file whose first line is the daemon's token (`otlp.token`), written where the agent
    /// reads its headers (Claude Code, Codex, Copilot CLI).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// The file to edit, instead of the agent's own (see `toolsize connect --help`).
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Print the change as a diff; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Take out what earlier runs added (from the record beside the file).
    #[arg(long)]
    pub undo: bool,
}

/// One key set by a run: the value written, the one it replaced, and how many objects of its
/// path existed before (those are the user's and stay on undo).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SetRecord {
    path: Vec<String>,
    value: J,
    before: Option<J>,
    keep: usize,
}

/// One array entry added by a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct AddRecord {
    path: Vec<String>,
    value: J,
    keep: usize,
}

/// What runs of `connect` changed in one file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Record {
    agent: String,
    sets: Vec<SetRecord>,
    added: Vec<AddRecord>,
}

/// What a run does to the file.
#[derive(Debug)]
struct Outcome {
    doc: Doc,
    record: Option<Record>,
    changed: bool,
    notes: Vec<String>,
}

fn record_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_os_string();
    name.push(RECORD_SUFFIX);
    PathBuf::from(name)
}

/// Reads `path`, `None` when it does not exist.
fn read(path: &Path) -> Result<Option<String>, String> {
    use std::io::Read;
    match std::fs::File::open(path) {
        Ok(f) => {
            let mut text = String::new();
            f.take(MAX_FILE + 1)
                .read_to_string(&mut text)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            if text.len() as u64 > MAX_FILE {
                return Err(format!("{}: larger than {MAX_FILE} bytes", path.display()));
            }
            Ok(Some(text))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Applies `plan` to `doc`, recording what it changes on top of `record` (an earlier run's).
fn connect(
    mut doc: Doc,
    plan: &Plan,
    record: Option<Record>,
    agent: &str,
) -> Result<Outcome, String> {
    let mut rec = record.unwrap_or_else(|| Record {
        agent: agent.to_string(),
        ..Record::default()
    });
    let mut changed = false;
    for s in &plan.sets {
        let now = doc.get(&s.path);
        if now.as_ref() == Some(&s.value) {
            continue;
        }
        let keep = doc.existing_depth(&s.path[..s.path.len() - 1]);
        doc.set(&s.path, &s.value)?;
        changed = true;
        match rec.sets.iter_mut().find(|r| r.path == s.path) {
            // Set by an earlier run: what it had before that run stays the value to restore.
            Some(r) => r.value = s.value.clone(),
            None => rec.sets.push(SetRecord {
                path: s.path.clone(),
                value: s.value.clone(),
                before: now,
                keep,
            }),
        }
    }
    for a in &plan.appends {
        if doc.contains(&a.path, &a.value) {
            continue;
        }
        // An entry an earlier run added with other settings (another endpoint) is replaced;
        // the objects that run made stay the run's to take out.
        let mut keep = doc.existing_depth(&a.path[..a.path.len() - 1]);
        for old in rec.added.iter().filter(|r| r.path == a.path) {
            doc.pull(&old.path, &old.value, usize::MAX)?;
            keep = keep.min(old.keep);
        }
        rec.added.retain(|r| r.path != a.path);
        doc.push(&a.path, &a.value)?;
        changed = true;
        rec.added.push(AddRecord {
            path: a.path.clone(),
            value: a.value.clone(),
            keep,
        });
    }
    Ok(Outcome {
        doc,
        record: Some(rec),
        changed,
        notes: plan.notes.clone(),
    })
}

/// Takes out of `doc` what `record` says was added.
fn undo(mut doc: Doc, record: &Record) -> Result<Outcome, String> {
    let mut notes = Vec::new();
    let mut changed = false;
    for s in record.sets.iter().rev() {
        match doc.get(&s.path) {
            Some(v) if v == s.value => {
                match &s.before {
                    Some(b) => doc.set(&s.path, b)?,
                    None => doc.remove(&s.path, s.keep),
                }
                changed = true;
            }
            None => {}
            Some(_) => notes.push(format!(
                "{} was changed since it was connected: left as it is",
                s.path.join(".")
            )),
        }
    }
    for a in &record.added {
        if doc.contains(&a.path, &a.value) {
            doc.pull(&a.path, &a.value, a.keep)?;
            changed = true;
        }
    }
    Ok(Outcome {
        doc,
        record: None,
        changed,
        notes,
    })
}

/// The lines of `old` and `new` as a diff: `-` removed, `+` added, unchanged lines within three
/// of a change kept for context, `@@` between hunks.
pub(crate) fn diff(old: &str, new: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    if a.len().saturating_mul(b.len()) > 4_000_000 {
        let mut out = String::new();
        a.iter().for_each(|l| out.push_str(&format!("-{l}\n")));
        b.iter().for_each(|l| out.push_str(&format!("+{l}\n")));
        return out;
    }
    // Longest common subsequence, from the end.
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut ops: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            ops.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] > lcs[i + 1][j]) {
            ops.push(('+', b[j]));
            j += 1;
        } else {
            ops.push(('-', a[i]));
            i += 1;
        }
    }
    let near = |k: usize| {
        ops[k.saturating_sub(3)..(k + 4).min(ops.len())]
            .iter()
            .any(|(op, _)| *op != ' ')
    };
    let mut out = String::new();
    let mut skipped = false;
    for (k, (op, line)) in ops.iter().enumerate() {
        if near(k) {
            if skipped {
                out.push_str("@@\n");
                skipped = false;
            }
            out.push_str(&format!("{op}{line}\n"));
        } else {
            skipped = true;
        }
    }
    out
}

/// Writes `text` to `path` through a temporary file renamed over it, with `mode`.
fn write_atomic(path: &Path, text: &str, mode: u32) -> Result<(), String> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let shown = |e: std::io::Error| format!("{}: {e}", path.display());
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(shown)?;
    let name = path
        .file_name()
        .map_or_else(Default::default, |n| n.to_string_lossy());
    let tmp = dir.join(format!(".{name}.toolsize-{}.tmp", std::process::id()));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(shown(e));
    }
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// The file's permission bits, or `default` for a file that does not exist.
fn mode_of(path: &Path, default: u32) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).map_or(default, |m| m.permissions().mode() & 0o7777)
}

fn token(args: &ConnectArgs) -> Result<Option<String>, String> {
    super::top::token(args.token_file.as_deref(), |_| None)
}

/// The file to edit: `--config`, else the agent's own; a symlink's target.
fn target(args: &ConnectArgs) -> Result<PathBuf, String> {
    let path = match &args.config {
        Some(p) => p.clone(),
        None => args.agent.default_path(|k| std::env::var(k).ok())?,
    };
    Ok(std::fs::canonicalize(&path).unwrap_or(path))
}

/// Runs `toolsize connect`.
pub fn run(args: &ConnectArgs) -> ExitCode {
    match run_inner(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => e.report(),
    }
}

fn run_inner(args: &ConnectArgs) -> Result<(), CliError> {
    let usage = |m: String| CliError::new("USAGE", m);
    let endpoint = agents::endpoint(&args.endpoint).map_err(usage)?;
    let token = token(args).map_err(|e| CliError::new("CONNECT_TOKEN", e))?;
    let plan = args
        .agent
        .plan(&endpoint, token.as_deref())
        .map_err(|e| CliError::new("CONNECT_TOKEN", e))?;
    let path = target(args).map_err(usage)?;
    let file_error = |e: String| CliError::new("CONNECT_FILE", format!("{}: {e}", path.display()));
    let old = read(&path).map_err(|e| CliError::new("CONNECT_FILE", e))?;
    let old_text = old.clone().unwrap_or_default();
    let doc = Doc::parse(plan.format, &old_text).map_err(file_error)?;
    let rec_path = record_path(&path);
    let record: Option<Record> =
        match read(&rec_path).map_err(|e| CliError::new("CONNECT_FILE", e))? {
            Some(t) => Some(serde_json::from_str(&t).map_err(|e| {
                CliError::new(
                    "CONNECT_FILE",
                    format!(
                        "{}: not a record of toolsize connect: {e}",
                        rec_path.display()
                    ),
                )
            })?),
            None => None,
        };
    let name = args.agent.name();
    let outcome = if args.undo {
        match &record {
            Some(r) => undo(doc, r).map_err(file_error)?,
            None => {
                println!(
                    "{name}: nothing to undo in {} (no {RECORD_SUFFIX} beside it)",
                    path.display()
                );
                return Ok(());
            }
        }
    } else {
        connect(doc, &plan, record, name).map_err(file_error)?
    };
    let new_text = if outcome.changed {
        outcome.doc.render()
    } else {
        old_text.clone()
    };
    let mut out = std::io::stdout().lock();
    if args.dry_run {
        let _ = write!(
            out,
            "--- {}\n+++ {}\n{}",
            path.display(),
            path.display(),
            diff(&old_text, &new_text)
        );
        return Ok(());
    }
    let write_error = |e: String| CliError::new("CONNECT_WRITE", e);
    let mut notes = outcome.notes.clone();
    if outcome.changed {
        let default = if token.is_some() { 0o600 } else { 0o644 };
        let mode = mode_of(&path, default);
        write_atomic(&path, &new_text, mode).map_err(write_error)?;
        if token.is_some() && !args.undo && mode & 0o077 != 0 {
            notes.push(format!(
                "{} holds the daemon's token now and others may read it (mode {mode:o}):                  chmod 600 it if they should not",
                path.display()
            ));
        }
    }
    match &outcome.record {
        Some(r) if outcome.changed => {
            let text = serde_json::to_string_pretty(r).unwrap_or_default();
            write_atomic(&rec_path, &text, 0o600).map_err(write_error)?;
        }
        Some(_) => {}
        None => {
            if let Err(e) = std::fs::remove_file(&rec_path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    return Err(write_error(format!("{}: {e}", rec_path.display())));
                }
            }
        }
    }
    let what = match (args.undo, outcome.changed) {
        (false, false) => "already connected: nothing changed",
        (false, true) => "connected",
        (true, false) => "nothing of toolsize connect left: nothing changed",
        (true, true) => "disconnected",
    };
    let _ = writeln!(out, "{name}: {what}: {}", path.display());
    for n in &notes {
        let _ = writeln!(out, "note: {n}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::connect::doc::Format;

    fn parse(format: Format, text: &str) -> Doc {
        Doc::parse(format, text).unwrap()
    }

    #[test]
    fn connect_merges_is_idempotent_and_undo_restores_the_users_file() {
        let user = r#"{"model": "opus", "env": {"OTEL_LOGS_EXPORTER": "otlp", "MINE": "1"},
            "hooks": {"PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "x"}]}]}}"#;
        let plan = ConnectAgent::ClaudeCode
            .plan(DEFAULT_ENDPOINT, None)
            .unwrap();
        let first = connect(parse(Format::Json, user), &plan, None, "claude-code").unwrap();
        assert!(first.changed);
        let text = first.doc.render();
        for kept in [
            "\"model\": \"opus\"",
            "\"MINE\": \"1\"",
            "\"command\": \"x\"",
        ] {
            assert!(text.contains(kept), "{kept} dropped: {text}");
        }
        assert!(
            text.contains("http://127.0.0.1:4318/v1/hooks/claude-code"),
            "{text}"
        );
        let rec = first.record.unwrap();
        // The key the user had with the same value is not the command's to take out.
        assert!(!rec
            .sets
            .iter()
            .any(|s| s.path == ["env", "OTEL_LOGS_EXPORTER"]));
        let second = connect(
            parse(Format::Json, &text),
            &plan,
            Some(rec.clone()),
            "claude-code",
        )
        .unwrap();
        assert!(!second.changed, "a second run changes nothing");
        let back = undo(parse(Format::Json, &text), &rec).unwrap();
        assert_eq!(back.doc.get(&[]), parse(Format::Json, user).get(&[]));
    }

    #[test]
    fn undo_leaves_what_the_user_changed_since() {
        let plan = ConnectAgent::GeminiCli.plan("http://h:1", None).unwrap();
        let first = connect(parse(Format::Json, ""), &plan, None, "gemini-cli").unwrap();
        let rec = first.record.unwrap();
        let mut doc = first.doc;
        let key = vec!["telemetry".to_string(), "logPrompts".to_string()];
        doc.set(&key, &J::Bool(false)).unwrap();
        let back = undo(doc, &rec).unwrap();
        assert_eq!(back.notes.len(), 1, "{:?}", back.notes);
        assert_eq!(
            back.doc.render(),
            "{\n  \"telemetry\": {\n    \"logPrompts\": false\n  }\n}\n"
        );
    }

    #[test]
    fn a_new_endpoint_replaces_the_hook_it_added() {
        let p1 = ConnectAgent::QwenCode.plan("http://a:1", None).unwrap();
        let p2 = ConnectAgent::QwenCode.plan("http://b:2", None).unwrap();
        let one = connect(parse(Format::Json, "{}"), &p1, None, "qwen-code").unwrap();
        let two = connect(one.doc, &p2, one.record, "qwen-code").unwrap();
        let text = two.doc.render();
        assert!(
            !text.contains("http://a:1") && text.contains("http://b:2"),
            "{text}"
        );
        let back = undo(two.doc, &two.record.unwrap()).unwrap();
        assert_eq!(back.doc.render(), "{}\n");
    }

    #[test]
    fn codex_keeps_comments_and_undo_gives_the_file_back() {
        let user = "# my codex\nmodel = \"gpt-5.5\"\n\n[otel]\nenvironment = \"dev\" # mine\n";
        let plan = ConnectAgent::Codex.plan(DEFAULT_ENDPOINT, None).unwrap();
        let out = connect(parse(Format::Toml, user), &plan, None, "codex").unwrap();
        let text = out.doc.render();
        assert!(text.starts_with("# my codex\n"), "{text}");
        assert!(text.contains("environment = \"dev\" # mine"), "{text}");
        assert!(text.contains(
            "trace_exporter = { otlp-http = { endpoint = \"http://127.0.0.1:4318/v1/traces\", protocol = \"binary\" } }"
        ), "{text}");
        let back = undo(parse(Format::Toml, &text), &out.record.unwrap()).unwrap();
        assert_eq!(back.doc.render(), user);
    }

    #[test]
    fn the_diff_shows_what_changes() {
        let d = diff("a\nb\nc\n", "a\nB\nc\nd\n");
        assert_eq!(d, " a\n-b\n+B\n c\n+d\n");
        assert_eq!(diff("same\n", "same\n"), "");
    }
}
