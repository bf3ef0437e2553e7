//! Docs that are executed: what README.md, CONTRIBUTING.md and docs/*.md tell a reader to type is
//! run here, and what they name exists.
//!
//! - **Command blocks.** Every fenced block tagged `sh`, `bash`, `shell` or `console` (and any
//!   untagged or `text` block that starts like a command, which must be tagged) carries a marker
//!   on the line before it:
//!   - `<!-- not run: REASON -->`: not run here, with the reason (it needs an agent, a network,
//!     a release build, root, minutes);
//!   - `<!-- run -->`, with options after a colon separated by `;`: `daemon` starts
//!     `toolsize demo` first and sends it calls of the tools the docs show (`web_fetch`,
//!     `search`), so there are tools and alerts to read; `exit=0,2` accepts those exit codes (0
//!     alone otherwise).
//!
//!   A block that is run goes to bash, line by line (a `\` continues a line), in a scratch
//!   directory holding the repository's `examples/`, with a `PATH` whose `toolsize` is the
//!   binary built here and whose `cargo` runs it for `cargo run … -- ARGS` (and refuses anything
//!   else). The addresses the docs use (127.0.0.1, 0.0.0.0 or localhost on 4317, 4318, 9464)
//!   are rewritten to free loopback ports. A `toolsize serve` or `toolsize demo` line starts the
//!   daemon in the background and waits for its listening line; the block's later lines run
//!   against it, and at the end it must stop on SIGTERM with exit 0. In a `console` block, `$ `
//!   starts a command and the lines after it are its expected output (standard output then
//!   error), `...` standing for anything.
//! - **Names.** Every `--flag` a `toolsize` command line or a code span names is a flag of the
//!   binary's `--help` (or of the other program the line runs, listed in [`OTHER_FLAGS`]); every
//!   configuration key in a code span is one `toolsize gen-config` prints; every `TOOLSIZE_*`
//!   variable is read somewhere in `src/`, `scripts/`, `dist/` or `tests/`; every `/api/v1/…`
//!   route answers a running daemon with something other than 404, and every field its
//!   `/api/v1/tools` answers is named in docs/collector.md; every `toolsize_*` metric is one of
//!   the families `/metrics` can show (`names::FAMILIES`, with `_bucket`, `_sum` and `_count`);
//!   README's command list has every subcommand of `toolsize --help`; each license of
//!   Cargo.toml's `license` has its file; `scripts/screenshots.sh` shoots pages the daemon serves
//!   and gives the demo flags it has.
//! - **Numbers.** The defaults and bounds the docs state (the MCP proxy's options and host
//!   presets, the guard's and the layers' constants), the benches CONTRIBUTING.md lists and the
//!   modules README.md's Layout names are compared with the crate's constants and files
//!   ([`docs_claims`]).
//! - **Figures.** In the performance sections, every table with figures names the command that
//!   measured them: in the paragraph that leads into it, or in each row (a code span, or a
//!   program of the command block right before the table).
//!
//! Each check is also run on a planted mistake (`the_checks_catch_*`), so a check that cannot
//! fail fails.
#![cfg(feature = "collector")]

mod docs_claims;
mod support;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::collector::{free_port, get_json, own_span, post_proto, request, Binary};
use support::Scratch;

/// Languages of blocks that hold commands.
const COMMAND_LANGS: &[&str] = &["sh", "bash", "shell", "console"];

/// How an untagged or `text` block that holds commands starts.
const COMMAND_STARTS: &[&str] = &["$ ", "toolsize ", "cargo ", "curl ", "export ", "sudo "];

/// The marker of a block that is not run, before its reason.
const NOT_RUN: &str = "<!-- not run:";

/// The marker of a block that is run.
const RUN: &str = "<!-- run";

/// The documents checked.
fn documents() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = vec![root.join("README.md"), root.join("CONTRIBUTING.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .into_iter()
        .map(|p| {
            let name = p.strip_prefix(root).unwrap().display().to_string();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

/// One fenced block.
#[derive(Debug, Clone)]
struct Block {
    file: String,
    /// 1-based line of the opening fence.
    line: usize,
    lang: String,
    body: Vec<String>,
    /// The nearest non-blank line before the fence, when it is an HTML comment.
    marker: Option<String>,
}

impl Block {
    fn at(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// The fenced blocks of `text` (fences of three or more backticks, possibly indented).
fn blocks(file: &str, text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim_start();
        if let Some(rest) = t.strip_prefix("```") {
            let indent = lines[i].len() - t.len();
            let lang = rest.split([',', ' ']).next().unwrap_or("").to_string();
            let marker = lines[..i]
                .iter()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(|l| l.trim())
                .filter(|l| l.starts_with("<!--"))
                .map(str::to_string);
            let start = i;
            let mut body = Vec::new();
            i += 1;
            while i < lines.len() && lines[i].trim() != "```" {
                let l = lines[i];
                body.push(
                    l.get(indent.min(l.len() - l.trim_start().len())..)
                        .unwrap_or(l)
                        .to_string(),
                );
                i += 1;
            }
            out.push(Block {
                file: file.to_string(),
                line: start + 1,
                lang,
                body,
                marker,
            });
        }
        i += 1;
    }
    out
}

/// What to do with a command block.
#[derive(Debug, Clone, PartialEq)]
enum Plan {
    NotRun,
    Run { daemon: bool, exits: Vec<i32> },
}

/// Whether `b` holds commands.
fn is_command_block(b: &Block) -> bool {
    COMMAND_LANGS.contains(&b.lang.as_str())
}

/// The plan of a command block, or what is wrong with its marker.
fn plan(b: &Block) -> Result<Plan, String> {
    let Some(m) = &b.marker else {
        return Err(format!(
            "{}: a {} block without a marker (`<!-- run -->` or `<!-- not run: why -->`)",
            b.at(),
            b.lang
        ));
    };
    if let Some(reason) = m.strip_prefix(NOT_RUN) {
        let reason = reason.trim_end_matches("-->").trim();
        if reason.len() < 8 {
            return Err(format!("{}: `not run` without a reason: {m}", b.at()));
        }
        return Ok(Plan::NotRun);
    }
    let Some(opts) = m.strip_prefix(RUN) else {
        return Err(format!(
            "{}: the comment before the block is no marker: {m}",
            b.at()
        ));
    };
    let opts = opts.trim_end_matches("-->").trim();
    let opts = opts.strip_prefix(':').unwrap_or(opts);
    let mut daemon = false;
    let mut exits = vec![0];
    for o in opts.split(';').map(str::trim).filter(|o| !o.is_empty()) {
        if o == "daemon" {
            daemon = true;
        } else if let Some(codes) = o.strip_prefix("exit=") {
            exits = codes
                .split(',')
                .map(|c| {
                    c.trim()
                        .parse()
                        .map_err(|_| format!("{}: bad exit code in {m}", b.at()))
                })
                .collect::<Result<_, _>>()?;
        } else {
            return Err(format!("{}: unknown run option {o:?} in {m}", b.at()));
        }
    }
    Ok(Plan::Run { daemon, exits })
}

/// What is wrong with the blocks of `docs`: command blocks without a marker, blocks that hold
/// commands without a command tag.
fn block_problems(docs: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (file, text) in docs {
        for b in blocks(file, text) {
            if is_command_block(&b) {
                if let Err(e) = plan(&b) {
                    out.push(e);
                }
            } else if (b.lang.is_empty() || b.lang == "text")
                && b.body
                    .iter()
                    .find(|l| !l.trim().is_empty())
                    .is_some_and(|l| COMMAND_STARTS.iter().any(|s| l.trim_start().starts_with(s)))
            {
                out.push(format!(
                    "{}: a block of commands tagged {:?}: tag it sh or console",
                    b.at(),
                    b.lang
                ));
            }
        }
    }
    out
}

#[test]
fn every_command_block_is_run_or_says_why_not() {
    let found = block_problems(&documents());
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_checks_catch_an_unmarked_block() {
    let doc = |text: &str| vec![("new.md".to_string(), text.to_string())];
    let found = block_problems(&doc("Text.\n\n```sh\ntoolsize layers\n```\n"));
    assert!(
        found
            .iter()
            .any(|p| p.contains("new.md:3") && p.contains("without a marker")),
        "{found:?}"
    );
    let found = block_problems(&doc("```\ntoolsize layers\n```\n"));
    assert!(found.iter().any(|p| p.contains("tag it")), "{found:?}");
    let found = block_problems(&doc("<!-- not run: -->\n```console\n$ toolsize\n```\n"));
    assert!(
        found.iter().any(|p| p.contains("without a reason")),
        "{found:?}"
    );
    let found = block_problems(&doc("<!-- run: fast -->\n```sh\ntoolsize\n```\n"));
    assert!(
        found.iter().any(|p| p.contains("unknown run option")),
        "{found:?}"
    );
    assert!(block_problems(&doc("<!-- run: daemon; exit=0,2 -->\n```sh\nx\n```\n")).is_empty());
    assert!(block_problems(&doc(
        "<!-- not run: needs Claude Code -->\n```sh\nclaude\n```\n"
    ))
    .is_empty());
    // An indented fence inside a list is a block too.
    let found = block_problems(&doc("- step:\n\n   ```bash\n   toolsize layers\n   ```\n"));
    assert_eq!(found.len(), 1, "{found:?}");
}

// ---------------------------------------------------------------------------------------------
// Running blocks.

/// The addresses the docs use and the port each stands for: 0 gRPC, 1 HTTP, 2 admin.
const DOC_PORTS: [(u16, usize); 3] = [(4317, 0), (4318, 1), (9464, 2)];

/// The programs of a run: a directory whose `toolsize` is the built binary and whose `cargo`
/// runs it for `cargo run … -- ARGS`.
struct Sandbox {
    dir: Scratch,
    path: String,
    ports: [u16; 3],
}

const CARGO_SHIM: &str = r#"#!/usr/bin/env bash
# `cargo run [--release] [--features F] -- ARGS` runs the toolsize built for the tests.
if [ "$1" = run ]; then
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    case "$1" in --example|--bin|-p|--package) echo "docs test: cargo run $1 is not run" >&2; exit 97;; esac
    shift
  done
  [ "$1" = -- ] && shift
  exec toolsize "$@"
fi
echo "docs test: only cargo run is run" >&2
exit 97
"#;

impl Sandbox {
    fn new(name: &str) -> Self {
        let dir = Scratch::new(&format!("docs-{name}"));
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_toolsize"), bin.join("toolsize")).unwrap();
        let cargo = bin.join("cargo");
        std::fs::write(&cargo, CARGO_SHIM).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).unwrap();
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        std::os::unix::fs::symlink(root.join("examples"), dir.join("examples")).unwrap();
        // The tests' Python first (its virtualenv, when scripts/test.sh made one).
        let python = Path::new(&support::cli::python3())
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map(|p| format!("{}:", p.display()))
            .unwrap_or_default();
        let path = format!(
            "{}:{python}{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Self {
            dir,
            path,
            ports: [free_port(), free_port(), free_port()],
        }
    }

    /// `text` with the docs' addresses pointed at this sandbox's ports.
    fn rewrite(&self, text: &str) -> String {
        let mut t = text.to_string();
        for (port, i) in DOC_PORTS {
            for host in ["127.0.0.1", "0.0.0.0", "localhost"] {
                t = t.replace(
                    &format!("{host}:{port}"),
                    &format!("127.0.0.1:{}", self.ports[i]),
                );
            }
        }
        t
    }

    fn command(&self, line: &str) -> Command {
        let mut c = Command::new("bash");
        c.args(["-o", "pipefail", "-c", line])
            .current_dir(&*self.dir)
            .env("PATH", &self.path)
            .env("RUST_LOG", "error")
            .env("TOKEN", "docs-test-token")
            .env_remove("TOOLSIZE_MAX_TOOL_OUTPUT");
        for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("TOOLSIZE_")) {
            c.env_remove(k);
        }
        c
    }

    /// Starts `line` (a daemon) in the background; waits for its listening line.
    fn start(&self, line: &str) -> Result<Child, String> {
        let mut line = strip_comment(line).to_string();
        for (flag, i) in [
            ("--otlp-grpc-addr", 0),
            ("--otlp-http-addr", 1),
            ("--admin-addr", 2),
        ] {
            if !line.contains(flag) {
                line.push_str(&format!(" {flag} 127.0.0.1:{}", self.ports[i]));
            }
        }
        let mut child = self
            .command(&format!("exec {line}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut first = String::new();
            let _ = BufReader::new(stdout).read_line(&mut first);
            let _ = tx.send(first);
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(l) if l.contains("\"event\":\"listening\"") => Ok(child),
            other => {
                let _ = child.kill();
                let out = child.wait_with_output().map_err(|e| e.to_string())?;
                Err(format!(
                    "`{line}` did not start ({other:?}): {}",
                    String::from_utf8_lossy(&out.stderr)
                ))
            }
        }
    }
}

/// `line` without a trailing `# comment` (outside quotes).
fn strip_comment(line: &str) -> &str {
    let (mut single, mut double) = (false, false);
    let bytes = line.as_bytes();
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && (i == 0 || bytes[i - 1].is_ascii_whitespace()) => {
                return line[..i].trim_end();
            }
            _ => {}
        }
    }
    line.trim_end()
}

/// The logical lines of a shell block (continuations joined, blanks and comments dropped).
fn logical_lines(body: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for l in body {
        if let Some(head) = l.trim_end().strip_suffix('\\') {
            cur.push_str(head);
            cur.push(' ');
            continue;
        }
        cur.push_str(l);
        let line = std::mem::take(&mut cur);
        if !line.trim().is_empty() && !line.trim_start().starts_with('#') {
            out.push(line);
        }
    }
    out
}

/// Whether `line` starts a daemon: `toolsize serve|demo`, or `cargo run … -- serve|demo`.
fn is_daemon(line: &str) -> bool {
    let words: Vec<&str> = strip_comment(line).split_whitespace().collect();
    let after = |w: &str| {
        words
            .iter()
            .position(|x| *x == w)
            .and_then(|i| words.get(i + 1))
    };
    matches!(after("toolsize"), Some(&"serve" | &"demo"))
        || (words.first() == Some(&"cargo") && matches!(after("--"), Some(&"serve" | &"demo")))
}

/// `(command, expected output)` of a console block.
fn console_commands(body: &[String]) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for l in body {
        if let Some(cmd) = l.strip_prefix("$ ") {
            out.push((cmd.to_string(), Vec::new()));
        } else if let Some(last) = out.last_mut() {
            if !l.trim().is_empty() {
                last.1.push(l.to_string());
            }
        }
    }
    out
}

/// Whether `got` holds `want` in order, `...` in `want` standing for anything.
fn matches_output(want: &str, got: &str) -> bool {
    let mut rest = got;
    for part in want.split("...").map(str::trim).filter(|p| !p.is_empty()) {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

/// Runs one block; what went wrong.
async fn run_block(b: &Block, daemon: bool, exits: &[i32], n: usize) -> Result<(), String> {
    let sb = Sandbox::new(&format!("{n}"));
    let mut daemons: Vec<Child> = Vec::new();
    let result = async {
        if daemon {
            daemons.push(sb.start("toolsize demo")?);
            feed(sb.ports[1]).await;
        }
        let commands: Vec<(String, Vec<String>)> = if b.lang == "console" {
            console_commands(&b.body)
        } else {
            logical_lines(&b.body)
                .into_iter()
                .map(|l| (l, Vec::new()))
                .collect()
        };
        for (cmd, want) in commands {
            let cmd = sb.rewrite(&cmd);
            if is_daemon(&cmd) {
                daemons.push(sb.start(&cmd)?);
                continue;
            }
            let out = tokio::task::spawn_blocking({
                let mut c = sb.command(&cmd);
                move || c.stdin(Stdio::null()).output()
            })
            .await
            .unwrap()
            .map_err(|e| format!("`{cmd}`: {e}"))?;
            let code = out.status.code().unwrap_or(-1);
            let said = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            if !exits.contains(&code) {
                return Err(format!(
                    "`{cmd}` exited {code} (expected {exits:?}):\n{said}"
                ));
            }
            let want = want.join("\n");
            if !matches_output(&want, &said) {
                return Err(format!("`{cmd}` printed\n{said}\nnot\n{want}"));
            }
        }
        Ok(())
    }
    .await;
    for mut d in daemons {
        let _ = Command::new("kill")
            .args(["-TERM", &d.id().to_string()])
            .status();
        let st = d.wait().unwrap();
        if result.is_ok() && !st.success() {
            return Err(format!("the daemon exited {st} on SIGTERM"));
        }
    }
    result
}

/// A few tool calls of the tools the docs show (`web_fetch`, `search`), so the API has them.
async fn feed(http_port: u16) {
    let http = format!("127.0.0.1:{http_port}").parse().unwrap();
    let spans = (0..20)
        .map(|n| {
            own_span(
                n,
                if n % 2 == 0 { "web_fetch" } else { "search" },
                1_000 + 1_500 * n as i64,
            )
        })
        .collect();
    let r = post_proto(http, &request("my-agent", spans)).await;
    assert!(r.status().is_success(), "{}", r.status());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_block_marked_run_runs_as_written() {
    let mut failed = Vec::new();
    let mut ran = 0;
    for (file, text) in documents() {
        for b in blocks(&file, &text).into_iter().filter(is_command_block) {
            let Ok(Plan::Run { daemon, exits }) = plan(&b) else {
                continue;
            };
            ran += 1;
            if let Err(e) = run_block(&b, daemon, &exits, ran).await {
                failed.push(format!("{}: {e}", b.at()));
            }
        }
    }
    eprintln!("{ran} blocks run");
    assert!(ran >= 10, "only {ran} blocks run");
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checks_catch_a_block_that_fails() {
    let block = |lang: &str, body: &[&str]| Block {
        file: "new.md".into(),
        line: 1,
        lang: lang.into(),
        body: body.iter().map(|s| s.to_string()).collect(),
        marker: None,
    };
    // A flag that does not exist exits 2.
    let b = block("sh", &["toolsize layers --no-such-flag"]);
    assert!(run_block(&b, false, &[0], 9001).await.is_err());
    // Output other than the one shown.
    let b = block(
        "console",
        &["$ toolsize layers --json", "\"id\": \"no-such-layer\""],
    );
    assert!(run_block(&b, false, &[0], 9002).await.is_err());
    // The same, shown right, passes; a daemon line starts and stops, and the API answers on
    // the rewritten address.
    let b = block(
        "console",
        &[
            "$ toolsize layers --json",
            "[ ... \"id\": \"claude-code.mcp.warn\", ... ]",
        ],
    );
    run_block(&b, false, &[0], 9003).await.unwrap();
    let b = block(
        "sh",
        &[
            "toolsize serve --stack codex.tool-output.tokens   # a comment",
            "curl -sf 127.0.0.1:9464/api/v1/layers | jq -e '.ceiling.layer == \"codex.tool-output.tokens\"'",
        ],
    );
    run_block(&b, false, &[0], 9004).await.unwrap();
    // cargo other than `cargo run` is refused.
    let b = block("sh", &["cargo install --path ."]);
    assert!(run_block(&b, false, &[0], 9005).await.is_err());
}

// ---------------------------------------------------------------------------------------------
// Names.

/// Flags of programs other than toolsize that the docs' command lines and code spans name,
/// with the program.
const OTHER_FLAGS: &[(&str, &[&str])] = &[
    (
        "cargo",
        &[
            "--path",
            "--locked",
            "--features",
            "--release",
            "--example",
            "--bench",
            "--bin",
            "--root",
            "--all-features",
            "--all-targets",
            "--test",
            "--lib",
            "--no-run",
            "--warm-up-time",
            "--measurement-time",
            "--no-fail-fast",
            "--no-default-features",
            "--force",
        ],
    ),
    ("claude", &["--transport", "--header", "--scope"]),
    ("curl", &["--cacert", "--header", "--data-binary"]),
    ("prometheus", &["--enable-feature"]),
    (
        "python3 examples/python/emit_spans.py",
        &["--protocol", "--endpoint", "--steps"],
    ),
    (
        "examples/ (loadgen, agent_loop, mcp_latency)",
        &[
            "--arrivals",
            "--calls",
            "--server",
            "--steps",
            "--mix",
            "--seconds",
            "--connections",
            "--tools",
            "--scrape-ms",
            "--rate",
            "--signal",
            "--spans-per-request",
        ],
    ),
    (
        "benches/frameworks.rs",
        &["--calls", "--sizes", "--result-bytes"],
    ),
    ("clippy", &["-D"]),
    ("npx", &["-y"]),
    ("the wrapped command", &["--json"]),
];

/// What `toolsize ARGS` prints, standard output then error.
fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_toolsize"))
        .args(args)
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
    .replace("\\n", "\n")
}

/// The subcommands `toolsize --help` lists (`help` aside).
fn subcommands() -> Vec<String> {
    let mut out = Vec::new();
    let mut in_commands = false;
    for l in help(&["--help"]).lines() {
        if l.trim_start().starts_with("Commands:") {
            in_commands = true;
            continue;
        }
        if in_commands {
            match l
                .strip_prefix("  ")
                .and_then(|r| r.split_whitespace().next())
            {
                Some(w) if !l.starts_with("   ") && w != "help" => out.push(w.to_string()),
                _ if l.trim().is_empty() => in_commands = false,
                _ => {}
            }
        }
    }
    out
}

#[test]
fn the_readme_lists_every_command() {
    let readme = &documents()[0].1;
    let line = readme
        .split("src/cli/")
        .nth(1)
        .and_then(|t| t.split("\ndashboards/").next())
        .expect("the layout's src/cli/ line");
    let all = subcommands();
    assert!(all.len() >= 10, "{all:?}");
    let missing: Vec<&String> = all.iter().filter(|c| !line.contains(c.as_str())).collect();
    assert!(
        missing.is_empty(),
        "README's command list lacks {missing:?}: {line}"
    );
}

/// The subcommands `src/cli/mod.rs` builds only with the `collector` feature (a variant of
/// `Command` under `#[cfg(feature = "collector")]`), in their command-line spelling.
fn collector_only_commands() -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = std::fs::read_to_string(root.join("src/cli/mod.rs")).unwrap();
    let body = src
        .split("pub enum Command {")
        .nth(1)
        .and_then(|t| t.split("\n}").next())
        .expect("the Command enum");
    let mut out = BTreeSet::new();
    let mut gated = false;
    for l in body.lines().map(str::trim) {
        if l == "#[cfg(feature = \"collector\")]" {
            gated = true;
        } else if let Some(name) = l.split(['(', ',']).next().filter(|n| {
            n.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                && n.chars().all(|c| c.is_ascii_alphanumeric())
        }) {
            if gated {
                let mut kebab = String::new();
                for (i, c) in name.chars().enumerate() {
                    if c.is_ascii_uppercase() && i > 0 {
                        kebab.push('-');
                    }
                    kebab.push(c.to_ascii_lowercase());
                }
                out.insert(kebab);
            }
            gated = false;
        }
    }
    out
}

/// The README's feature table names each command under the feature that builds it: those of
/// `cli` in its row, the ones only `collector` builds in that row.
#[test]
fn the_feature_table_names_each_command_under_its_feature() {
    let readme = &documents()[0].1;
    let row = |feature: &str| -> String {
        let head = format!("| `{feature}` |");
        readme
            .lines()
            .find(|l| l.starts_with(&head))
            .unwrap_or_else(|| panic!("no {head} row"))
            .to_string()
    };
    let (cli, collector) = (row("cli"), row("collector"));
    let gated = collector_only_commands();
    assert!(
        gated.contains("serve") && gated.contains("top"),
        "{gated:?}"
    );
    for c in subcommands() {
        let (want, other) = if gated.contains(&c) {
            (&collector, &cli)
        } else {
            (&cli, &collector)
        };
        let named = |r: &str| r.contains(&format!("`{c}`"));
        assert!(
            named(want) && !named(other),
            "`{c}` belongs in the row {want:?}, not {other:?}"
        );
    }
}

/// Every flag the binary's help lists, over its subcommands.
fn toolsize_flags() -> BTreeSet<String> {
    let mut flags = flag_tokens(&help(&["--help"]));
    for s in subcommands() {
        flags.extend(flag_tokens(&help(&[&s, "--help"])));
    }
    flags
}

/// The `--flag` tokens of `text`.
fn flag_tokens(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i + 2 < b.len() {
        if b[i] == b'-'
            && b[i + 1] == b'-'
            && b[i + 2].is_ascii_lowercase()
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'-'))
        {
            let end = (i + 2..b.len())
                .find(|&j| !(b[j].is_ascii_alphanumeric() || b[j] == b'-'))
                .unwrap_or(b.len());
            out.insert(text[i..end].trim_end_matches('-').to_string());
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

/// The code spans of the prose of `text` (outside fenced blocks).
fn code_spans(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    for l in text.lines() {
        if l.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
        let parts: Vec<&str> = l.split('`').collect();
        for (i, p) in parts.iter().enumerate() {
            if i % 2 == 1 && i + 1 < parts.len() {
                out.push(p.to_string());
            }
        }
    }
    out
}

/// The `--flags` the docs give toolsize: those of every code span starting with `--` or
/// `toolsize `, and of every command block line that runs toolsize, up to a ` -- `, a pipe or
/// another program; each with where it is.
fn documented_flags(docs: &[(String, String)]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (file, text) in docs {
        let mut lines: Vec<String> = code_spans(text)
            .into_iter()
            .filter(|s| s.starts_with("--") || s.starts_with("toolsize "))
            .collect();
        for b in blocks(file, text).into_iter().filter(is_command_block) {
            let body: Vec<String> = b
                .body
                .iter()
                .map(|l| l.strip_prefix("$ ").unwrap_or(l).to_string())
                .collect();
            for l in logical_lines(&body) {
                let l = strip_comment(&l);
                for part in l.split(['|', ';']).flat_map(|p| p.split("&&")) {
                    let words: Vec<&str> = part.split_whitespace().collect();
                    if let Some(i) = words
                        .iter()
                        .position(|w| *w == "toolsize" || w.ends_with("/toolsize"))
                    {
                        let mine: Vec<&str> = words[i..]
                            .iter()
                            .take_while(|w| **w != "--")
                            .copied()
                            .collect();
                        lines.push(mine.join(" "));
                    } else if words.first() == Some(&"cargo") && words.contains(&"run") {
                        if let Some(j) = words.iter().position(|w| *w == "--") {
                            lines.push(words[j + 1..].join(" "));
                        }
                    }
                }
            }
        }
        for l in lines {
            // In a span naming toolsize, a ` -- ` ends its flags.
            let l = l.split(" -- ").next().unwrap_or("");
            for f in flag_tokens(l) {
                out.push((f, format!("{file}: {l}")));
            }
        }
    }
    out
}

/// Flags the docs name that neither toolsize nor [`OTHER_FLAGS`] has.
fn flag_problems(docs: &[(String, String)], known: &BTreeSet<String>) -> Vec<String> {
    let others: BTreeSet<&str> = OTHER_FLAGS
        .iter()
        .flat_map(|(_, f)| f.iter().copied())
        .collect();
    documented_flags(docs)
        .into_iter()
        .filter(|(f, _)| !known.contains(f) && !others.contains(f.as_str()))
        .map(|(f, at)| format!("{f} is no flag of toolsize: {at}"))
        .collect()
}

/// The keys of `toolsize gen-config`: `section.key` (and `section` for a table).
fn config_keys() -> BTreeSet<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_toolsize"))
        .arg("gen-config")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut keys = BTreeSet::new();
    let mut section = String::new();
    for l in text.lines() {
        let t = l.trim_start_matches('#').trim();
        if let Some(s) = t.strip_prefix("[[").and_then(|s| s.split("]]").next()) {
            section = s.to_string();
            keys.insert(section.clone());
        } else if let Some(s) = t.strip_prefix('[').and_then(|s| s.split(']').next()) {
            if !s.contains(' ') && !s.contains('"') && !s.is_empty() {
                section = s.to_string();
                keys.insert(section.clone());
            }
        } else if let Some((k, _)) = t.split_once(" = ") {
            let k = k.trim();
            if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                keys.insert(if section.is_empty() {
                    k.to_string()
                } else {
                    format!("{section}.{k}")
                });
            }
        }
    }
    keys
}

/// Code spans shaped like a configuration key (`section.key` of a section gen-config has)
/// that gen-config lacks.
fn key_problems(docs: &[(String, String)], keys: &BTreeSet<String>) -> Vec<String> {
    let sections: BTreeSet<&str> = keys.iter().filter_map(|k| k.split('.').next()).collect();
    let mut out = Vec::new();
    for (file, text) in docs {
        for s in code_spans(text) {
            let s = s.split([' ', '=']).next().unwrap_or("");
            let Some((first, _)) = s.split_once('.') else {
                continue;
            };
            if !sections.contains(first)
                || !s
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
            {
                continue;
            }
            if !keys.contains(s) && !keys.iter().any(|k| k.starts_with(&format!("{s}."))) {
                out.push(format!("{file}: `{s}` is no key of toolsize gen-config"));
            }
        }
    }
    out
}

/// The source text variables may be read in: src/, scripts/, the unit and the tests (this file
/// aside: it names variables that do not exist).
fn sources() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut text = String::new();
    let mut stack = vec![
        root.join("src"),
        root.join("scripts"),
        root.join("dist"),
        root.join("tests"),
    ];
    while let Some(p) = stack.pop() {
        let skip = [
            "docs_executed.rs",
            "data",
            "node_modules",
            "agents",
            "npm",
            "frameworks",
        ];
        if skip.iter().any(|s| p.ends_with(s)) {
            continue;
        }
        if p.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else if let Ok(t) = std::fs::read_to_string(&p) {
            text.push_str(&t);
        }
    }
    text
}

/// Words of `text` starting with `prefix`, made of `[A-Za-z0-9_]` (and what `extra` allows).
fn words_with(text: &str, prefix: &str, extra: &[char]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().next_back();
        let tail = &rest[i..];
        let end = tail
            .char_indices()
            .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_' || extra.contains(c)))
            .map_or(tail.len(), |(j, _)| j);
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            out.insert(tail[..end].trim_end_matches(['.', '/']).to_string());
        }
        rest = &tail[end.max(prefix.len())..];
    }
    out
}

/// `TOOLSIZE_*` variables the docs name that no source reads.
fn variable_problems(docs: &[(String, String)], sources: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (file, text) in docs {
        for v in words_with(text, "TOOLSIZE_", &[]) {
            if v == "TOOLSIZE_" {
                continue;
            }
            let used = words_with(sources, &v, &[]).contains(&v);
            if !used {
                out.push(format!(
                    "{file}: {v} is read nowhere in src/, scripts/, dist/ or tests/"
                ));
            }
        }
    }
    out
}

/// Names starting `toolsize_` that are not metrics, with what they are.
const NOT_METRICS: &[(&str, &str)] = &[("toolsize_read_spill", "the tool `toolsize mcp` adds")];

/// `toolsize_*` metric names the docs give that are no family (or a family's series).
fn metric_problems(docs: &[(String, String)], families: &[&str]) -> Vec<String> {
    let mut known: BTreeSet<String> = BTreeSet::new();
    for f in families {
        known.insert(f.to_string());
        for s in ["_bucket", "_sum", "_count", "_created"] {
            known.insert(format!("{f}{s}"));
        }
    }
    let mut out = Vec::new();
    for (file, text) in docs {
        for m in words_with(text, "toolsize_", &[]) {
            // A family named by its start (`toolsize_tool_result_size_*`) is fine when one is.
            let prefix_of_one = m.ends_with('_') && known.iter().any(|k| k.starts_with(&m));
            let other = NOT_METRICS.iter().any(|(n, _)| *n == m);
            if !known.contains(&m) && !prefix_of_one && !other {
                out.push(format!("{file}: {m} is no metric of /metrics"));
            }
        }
    }
    out
}

/// Routes of Prometheus's own API the docs name (they are not the daemon's).
const PROMETHEUS_ROUTES: &[&str] = &["/api/v1/query_exemplars", "/api/v1/query", "/api/v1/rules"];

/// `/api/v1/…` paths of the daemon the docs give, with `{tool}` and the like filled in.
fn api_paths(docs: &[(String, String)]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (_, text) in docs {
        for p in words_with(text, "/api/v1/", &['/', '{', '}', '-']) {
            if p == "/api/v1" || PROMETHEUS_ROUTES.contains(&p.as_str()) {
                continue;
            }
            let p = p
                .replace("{tool}", "web_fetch")
                .replace("{name}", "web_fetch")
                .replace("{id}", "web_fetch");
            out.insert(p);
        }
    }
    out
}

#[test]
fn every_flag_key_variable_and_metric_the_docs_name_exists() {
    let docs = documents();
    let mut found = flag_problems(&docs, &toolsize_flags());
    found.extend(key_problems(&docs, &config_keys()));
    found.extend(variable_problems(&docs, &sources()));
    found.extend(metric_problems(
        &docs,
        toolsize::collector::read::names::FAMILIES,
    ));
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_checks_catch_a_name_that_does_not_exist() {
    let doc = |text: &str| vec![("new.md".to_string(), text.to_string())];
    let flags = toolsize_flags();
    assert!(
        flags.contains("--stack") && flags.contains("--window"),
        "{flags:?}"
    );
    let found = flag_problems(&doc("Run `toolsize serve --stak x`.\n"), &flags);
    assert!(found.iter().any(|p| p.starts_with("--stak")), "{found:?}");
    let found = flag_problems(
        &doc("<!-- run -->\n```sh\ntoolsize layers --jsn | jq\n```\n"),
        &flags,
    );
    assert!(found.iter().any(|p| p.starts_with("--jsn")), "{found:?}");
    // The wrapped command's flags are its own.
    assert!(flag_problems(&doc("`toolsize wrap --tool t -- grep --count x`\n"), &flags).is_empty());
    let keys = config_keys();
    assert!(keys.contains("aggregation.windows"), "{keys:?}");
    let found = key_problems(&doc("Set `aggregation.windowz`.\n"), &keys);
    assert_eq!(found.len(), 1, "{found:?}");
    let found = variable_problems(&doc("TOOLSIZE_NO_SUCH_VARIABLE=1\n"), &sources());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(variable_problems(&doc("TOOLSIZE_STACK=x\n"), &sources()).is_empty());
    let families = toolsize::collector::read::names::FAMILIES;
    let found = metric_problems(&doc("`toolsize_no_such_total`\n"), families);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        metric_problems(&doc("`toolsize_tool_result_size_bytes_bucket`\n"), families).is_empty()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_api_route_the_docs_name_answers() {
    let d = Binary::start_with_env(&[], None, &[("RUST_LOG", "error")]);
    let paths = api_paths(&documents());
    assert!(paths.len() >= 5, "{paths:?}");
    // The tools the paths name have series, so a 404 is a missing route, not a missing tool.
    let tools: BTreeSet<&str> = paths
        .iter()
        .filter_map(|p| p.strip_prefix("/api/v1/tools/"))
        .map(|t| t.split(['/', '?']).next().unwrap())
        .collect();
    let spans = tools
        .iter()
        .enumerate()
        .map(|(n, t)| own_span(n as u64, t, 2_000))
        .collect();
    assert!(post_proto(d.http, &request("my-agent", spans))
        .await
        .status()
        .is_success());
    let mut missing = Vec::new();
    for p in &paths {
        let r = reqwest::get(format!("http://{}{p}", d.admin))
            .await
            .unwrap();
        if r.status() == reqwest::StatusCode::NOT_FOUND
            || r.status() == reqwest::StatusCode::METHOD_NOT_ALLOWED
        {
            missing.push(format!("{p}: {}", r.status()));
        }
    }
    // Every field the API answers is named in docs/collector.md.
    let collector = documents()
        .into_iter()
        .find(|(f, _)| f == "docs/collector.md")
        .unwrap()
        .1;
    let tools = get_json(d.admin, "/api/v1/tools").await;
    let mut fields: BTreeSet<String> = tools.as_object().unwrap().keys().cloned().collect();
    fields.extend(tools["tools"][0].as_object().unwrap().keys().cloned());
    fields.extend(
        tools["tools"][0]["ceiling"]
            .as_object()
            .unwrap()
            .keys()
            .cloned(),
    );
    let undocumented = |fields: &BTreeSet<String>| -> Vec<String> {
        fields
            .iter()
            .filter(|f| {
                !collector.contains(&format!("`{f}`")) && !collector.contains(&format!("\"{f}\""))
            })
            .cloned()
            .collect()
    };
    assert!(fields.len() > 20, "{fields:?}");
    assert!(
        undocumented(&fields).is_empty(),
        "undocumented API fields: {:?}",
        undocumented(&fields)
    );
    let mut planted = fields.clone();
    planted.insert("no_such_field".into());
    assert_eq!(undocumented(&planted), ["no_such_field"]);
    // The check catches a route that does not exist.
    let r = reqwest::get(format!("http://{}/api/v1/no-such-route", d.admin))
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::NOT_FOUND);
    let _ = get_json(d.admin, "/api/v1/tools").await;
    assert!(missing.is_empty(), "{}", missing.join("\n"));
    d.stop();
}

// ---------------------------------------------------------------------------------------------
// Figures.

/// Headings of the sections whose tables hold measured figures.
const MEASURED_SECTIONS: &[(&str, &str)] = &[
    ("README.md", "## Performance"),
    ("docs/collector.md", "## Performance"),
    ("docs/performance-history.md", "# "),
];

/// Prefixes of a code span that names a command.
const COMMAND_PREFIXES: &[&str] = &[
    "cargo ",
    "scripts/",
    "target/",
    "toolsize ",
    "ARRIVALS=",
    "perf ",
];

fn names_command(text: &str) -> bool {
    text.split('`')
        .enumerate()
        .any(|(i, s)| i % 2 == 1 && COMMAND_PREFIXES.iter().any(|p| s.starts_with(p)))
}

/// Tables with figures in the measured sections of `docs` that name no command.
fn figure_problems(docs: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (file, heading) in MEASURED_SECTIONS {
        let Some((_, text)) = docs.iter().find(|(f, _)| f == file) else {
            out.push(format!("{file} is gone"));
            continue;
        };
        let lines: Vec<&str> = text.lines().collect();
        let level = heading.split(' ').next().unwrap().len();
        let mut inside = false;
        let mut lead = String::new();
        let mut programs: BTreeSet<String> = BTreeSet::new();
        let mut in_block = false;
        let mut in_table = false;
        let mut lead_names = false;
        for (i, l) in lines.iter().enumerate() {
            if l.starts_with('#') && !in_block {
                let this = l.split(' ').next().unwrap().len();
                if l.starts_with(heading) {
                    inside = true;
                } else if this <= level {
                    inside = false;
                }
                lead.clear();
                continue;
            }
            if !inside {
                continue;
            }
            if l.trim_start().starts_with("```") {
                if !in_block {
                    programs.clear();
                }
                in_block = !in_block;
                lead.clear();
                continue;
            }
            if in_block {
                for cmd in strip_comment(l).split_whitespace().take(2) {
                    let base = cmd.rsplit('/').next().unwrap_or(cmd);
                    programs.insert(base.to_string());
                }
                continue;
            }
            if l.starts_with('|') {
                if !in_table {
                    in_table = true;
                    lead_names = names_command(&lead);
                }
                let is_rule = l.chars().all(|c| "|-: ".contains(c));
                let is_header = lines
                    .get(i + 1)
                    .is_some_and(|n| n.starts_with('|') && n.chars().all(|c| "|-: ".contains(c)));
                if is_header {
                    continue;
                }
                let has_figure = l
                    .split('|')
                    .skip(2)
                    .any(|c| c.chars().any(|c| c.is_ascii_digit()));
                if is_rule || !has_figure || lead_names || names_command(l) {
                    continue;
                }
                let row_names = programs
                    .iter()
                    .any(|p| p.len() > 3 && l.contains(p.as_str()));
                if !row_names {
                    out.push(format!(
                        "{file}:{}: a row of figures that names no command: {l}",
                        i + 1
                    ));
                }
                continue;
            }
            in_table = false;
            if l.trim().is_empty() {
                if !lead.trim().is_empty() {
                    // A paragraph ends: the next one leads into what follows.
                    lead = std::mem::take(&mut lead);
                }
            } else {
                if lead.ends_with("\n\n") {
                    lead.clear();
                }
                lead.push_str(l);
                lead.push('\n');
                continue;
            }
            lead.push('\n');
        }
    }
    out
}

#[test]
fn every_measured_figure_names_its_command() {
    let found = figure_problems(&documents());
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_checks_catch_a_figure_without_a_command() {
    let doc = |text: &str| {
        vec![
            ("README.md".to_string(), text.to_string()),
            ("docs/collector.md".into(), "## Performance\n".into()),
            ("docs/performance-history.md".into(), "# F\n".into()),
        ]
    };
    let found = figure_problems(&doc(
        "## Performance\n\nFast.\n\n| case | time |\n|---|---|\n| one call | 1.5 µs |\n",
    ));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(figure_problems(&doc("## Performance\n\n`cargo bench --bench x` gives:\n\n| case | time |\n|---|---|\n| one call | 1.5 µs |\n")).is_empty());
    assert!(figure_problems(&doc("## Performance\n\nFast.\n\n| case | time |\n|---|---|\n| one call (`scripts/bench.sh 3`) | 1.5 µs |\n")).is_empty());
    // A row outside the section is not held to it.
    assert!(figure_problems(&doc(
        "## Other\n\n| case | time |\n|---|---|\n| one | 1 |\n"
    ))
    .is_empty());
}

/// The license files each license of Cargo.toml's expression needs, with how each begins.
const LICENSE_FILES: &[(&str, &str, &str)] = &[
    ("MIT", "LICENSE-MIT", "MIT License"),
    ("Apache-2.0", "LICENSE-APACHE", "Apache License"),
];

#[test]
fn every_declared_license_has_its_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let expr = manifest
        .lines()
        .find_map(|l| l.strip_prefix("license = "))
        .expect("a license in Cargo.toml")
        .trim_matches('"');
    let declared: Vec<&str> = expr.split(" OR ").collect();
    assert!(!declared.is_empty());
    let readme = &documents()[0].1;
    for id in declared {
        let (_, file, title) = LICENSE_FILES
            .iter()
            .find(|(l, _, _)| *l == id)
            .unwrap_or_else(|| panic!("no file known for license {id}"));
        let text = std::fs::read_to_string(root.join(file))
            .unwrap_or_else(|e| panic!("{file} (license {id}): {e}"));
        assert!(text.trim_start().starts_with(title), "{file}");
        assert!(
            text.contains("The toolsize developers"),
            "{file}: no copyright line"
        );
        assert!(
            readme.contains(&format!("]({file})")),
            "README does not link {file}"
        );
    }
}

/// `scripts/screenshots.sh` against the UI: the pages it shoots are routes the daemon serves (a
/// 200 with HTML from a running demo), and the flags it gives `toolsize demo` are the demo's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_screenshot_script_matches_the_ui() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = std::fs::read_to_string(root.join("scripts/screenshots.sh")).unwrap();
    let demo_line = logical_lines(&script.lines().map(str::to_string).collect::<Vec<_>>())
        .into_iter()
        .find(|l| l.contains("\" demo ") || l.contains(" demo --"))
        .expect("the script starts the demo");
    let demo_flags = flag_tokens(&help(&["demo", "--help"]));
    for f in flag_tokens(&demo_line) {
        assert!(
            demo_flags.contains(&f),
            "{f} is no flag of toolsize demo: {demo_line}"
        );
    }
    let pages: Vec<String> = script
        .split("\"http://$admin")
        .skip(1)
        .map(|p| p.split('"').next().unwrap().to_string())
        .collect();
    assert!(pages.len() >= 2, "{pages:?}");
    let d = Binary::start_command("demo", &[], None, &[("RUST_LOG", "error")]);
    for p in &pages {
        let r = reqwest::get(format!("http://{}{p}", d.admin))
            .await
            .unwrap();
        let ok = r.status().is_success();
        let html = r.text().await.unwrap();
        assert!(ok && html.contains("<html"), "{p}: not a page of the UI");
    }
    // The check catches a page that is not one.
    let r = reqwest::get(format!("http://{}/no-such-page", d.admin))
        .await
        .unwrap();
    assert!(!r.status().is_success());
    d.stop();
}

/// What is wrong with a changelog's layout: the first section must be `## [Unreleased]`, every
/// other one a version `## [X.Y.Z]`, each version once, and no `### ` heading twice in one
/// section.
fn changelog_problems(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut versions: Vec<&str> = Vec::new();
    let mut headings: Vec<&str> = Vec::new();
    for l in text.lines() {
        if let Some(v) = l.strip_prefix("## ") {
            let ok = v == "[Unreleased]"
                || (v.starts_with('[')
                    && v.split(']').next().is_some_and(|n| {
                        n[1..].split('.').count() == 3
                            && n[1..].split('.').all(|d| d.parse::<u32>().is_ok())
                    }));
            if !ok {
                out.push(format!("`## {v}` is neither [Unreleased] nor a version"));
            }
            if versions.contains(&v) {
                out.push(format!("`## {v}` twice"));
            }
            versions.push(v);
            headings.clear();
        } else if let Some(h) = l.strip_prefix("### ") {
            if headings.contains(&h) {
                out.push(format!(
                    "`### {h}` twice in `## {}`",
                    versions.last().unwrap_or(&"")
                ));
            }
            headings.push(h);
        }
    }
    if versions.first() != Some(&"[Unreleased]") {
        out.push("the first section is not `## [Unreleased]`".into());
    }
    out
}

#[test]
fn the_changelog_has_one_section_per_version_and_each_heading_once() {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("CHANGELOG.md"))
        .unwrap();
    let found = changelog_problems(&text);
    assert!(found.is_empty(), "{}", found.join("\n"));
    // The check catches the layout it replaced: two "Added" in one unversioned section.
    let old =
        "# Changelog\n\n## Unreleased\n\n### Added\n- a\n\n### Changed\n- b\n\n### Added\n- c\n";
    let found = changelog_problems(old);
    assert!(
        found.iter().any(|p| p.contains("### Added` twice")),
        "{found:?}"
    );
    assert!(found.iter().any(|p| p.contains("neither")), "{found:?}");
}
