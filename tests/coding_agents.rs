//! The real coding agents, heard: Claude Code, Codex, Gemini CLI, Qwen Code, opencode and GitHub
//! Copilot CLI at the releases pinned in `tests/agents/npm` (installed by `scripts/test.sh`),
//! each driven through one scripted session by a fake model endpoint of the project's own
//! (`tests/agents/fake_model.py`: `seq 1 20000`, `echo small`, `cat /nonexistent`, a read of a
//! 3,550-byte file with non-ASCII text), with the agent's own telemetry switches (and hooks,
//! where it has them) pointed at a `toolsize serve` (`tests/agents/run_agent.py`, in a
//! loopback-only network namespace), every signal on.
//!
//! Per agent and variant: every tool call counted once (no phantom series, no duplicate from a
//! span, a span event, a log record and a hook of the same call), sized as the model got it (in
//! the agent's unit; Codex: the output before its own cut, as documented), the failed call
//! counted failed wherever the agent reveals it, the agent's own cut counted upstream with its
//! layer and the original size, each series held to its own agent's stack, and no OTLP request
//! refused. Six variants are set up by `toolsize connect <agent>` in the run's HOME instead of
//! hand-written settings, and after every run `toolsize doctor` against the daemon finds the
//! agent complete, or names the missing hook where the variant has none. The test prints the
//! table of `docs/agents.md` and checks the document holds it. In CI a missing agent fails the
//! test.
#![cfg(feature = "collector")]

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::collector::{missing_peers_allowed, require};

fn agents_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents")
}

/// Whether the pinned agents are installed; their absence fails the test unless missing peers
/// are allowed (then the test is skipped loudly).
fn agents_installed() -> bool {
    let bin = agents_dir().join("npm/node_modules/.bin");
    let ok = ["claude", "codex", "gemini", "qwen", "opencode", "copilot"]
        .iter()
        .all(|a| bin.join(a).exists());
    if !ok {
        assert!(
            missing_peers_allowed(),
            "the coding agents are not installed in tests/agents/npm (scripts/test.sh runs npm ci \
             there); set TOOLSIZE_ALLOW_MISSING_PEERS=1 to skip"
        );
        eprintln!("\n*** SKIPPED: coding agents not installed: this test checked NOTHING ***\n");
    }
    ok
}

/// One tool result as the model got it.
#[derive(Debug)]
struct Got {
    label: String,
    utf8: u64,
    utf16: u64,
}

/// What one run left in its directory.
struct Run {
    dir: PathBuf,
    model: Vec<Got>,
    tools: Value,
    metrics: String,
}

/// A passing run's directory is removed (an agent's home holds a few hundred
/// MB of its own files); a failing one is kept for reading, and its path is in
/// the failure message.
impl Drop for Run {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl Run {
    fn tool(&self, name: &str) -> Value {
        let p = self.dir.join(format!("tool-{name}.json"));
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap_or_else(|e| {
            panic!("{}: {e}", p.display());
        }))
        .unwrap()
    }

    /// (count, errors, truncated upstream) by tool.
    fn rows(&self) -> BTreeMap<String, (u64, u64, u64)> {
        self.tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let n = |k: &str| t[k].as_u64().unwrap();
                (
                    t["tool"].as_str().unwrap().to_string(),
                    (n("count"), n("errors"), n("truncated_upstream")),
                )
            })
            .collect()
    }

    /// (bytes, cut_by, original) of every sized result, sorted.
    fn sized(&self) -> Vec<(u64, Option<String>, Option<u64>)> {
        let mut out: Vec<_> = self
            .rows()
            .keys()
            .flat_map(|t| {
                self.tool(t)["series"][0]["largest"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|l| {
                        (
                            l["bytes"].as_u64().unwrap(),
                            l["cut_by"].as_str().map(str::to_string),
                            l["original"].as_u64(),
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        out.sort();
        out
    }

    /// The stack `tool`'s series is held to, its ceiling's layer, and its results over a
    /// ceiling by layer (non-zero only).
    fn held(&self, tool: &str) -> (String, Option<String>, Vec<(String, u64)>) {
        let s = &self.tool(tool)["series"][0];
        let over = s["over_ceiling"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o["count"].as_u64() > Some(0))
            .map(|o| {
                let layer = o["layer"].as_str().unwrap().to_string();
                (layer, o["count"].as_u64().unwrap())
            })
            .collect();
        let ceiling = s["ceiling"]["layer"].as_str().map(str::to_string);
        (s["stack"].as_str().unwrap().to_string(), ceiling, over)
    }

    /// `toolsize doctor --json` after the run: (exit code, its findings).
    fn doctor(&self) -> (i64, Value) {
        let d: Value =
            serde_json::from_str(&std::fs::read_to_string(self.dir.join("doctor.json")).unwrap())
                .unwrap();
        let out = serde_json::from_str(d["stdout"].as_str().unwrap())
            .unwrap_or_else(|e| panic!("doctor said no JSON ({e}): {d}"));
        (d["exit_code"].as_i64().unwrap(), out)
    }

    /// `toolsize doctor` found `agent` complete (exit 0), or missing what `missing` says
    /// (exit 1).
    fn doctor_says(&self, agent: &str, missing: Option<&str>) {
        let (code, out) = self.doctor();
        let found = &out["agents"].as_array().unwrap()[..];
        assert_eq!(found.len(), 1, "one agent heard: {out}");
        assert_eq!(found[0]["agent"], agent, "{out}");
        match missing {
            None => assert_eq!(
                (code, &found[0]["complete"]),
                (0, &Value::Bool(true)),
                "{out}"
            ),
            Some(m) => {
                assert_eq!(code, 1, "{out}");
                let said = found[0]["missing"].to_string();
                assert!(said.contains(m), "doctor should say {m:?}: {out}");
            }
        }
    }

    /// The variant was set up by `toolsize connect` (its settings in the agent's own file).
    fn connected(&self, agent: &str) {
        let said = std::fs::read_to_string(self.dir.join("connect.txt")).unwrap();
        assert!(said.contains(&format!("{agent}: connected: ")), "{said}");
    }

    fn got(&self, label: &str) -> &Got {
        self.model.iter().find(|g| g.label == label).unwrap()
    }

    fn metric(&self, line: &str) -> f64 {
        self.metrics
            .lines()
            .find_map(|l| l.strip_prefix(line)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {line} in /metrics"))
    }
}

fn run(agent: &str, variant: &str) -> Run {
    let dir = std::env::temp_dir().join(format!(
        "toolsize-agents-{}-{agent}-{variant}",
        std::process::id()
    ));
    let out = Command::new(support::cli::python3())
        .arg(agents_dir().join("run_agent.py"))
        .args(["--agent", agent, "--variant", variant, "--toolsize"])
        .arg(env!("CARGO_BIN_EXE_toolsize"))
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{agent}/{variant} (kept in {}): {}\n{}\nagent stderr: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(dir.join("agent_stderr.txt")).unwrap_or_default()
    );
    let model = std::fs::read_to_string(dir.join("model_records.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            Got {
                label: v["label"].as_str().unwrap().into(),
                utf8: v["utf8_bytes"].as_u64().unwrap(),
                utf16: v["utf16_units"].as_u64().unwrap(),
            }
        })
        .collect();
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    let run = Run {
        model,
        tools: serde_json::from_str(&read("tools.json")).unwrap(),
        metrics: read("metrics.txt"),
        dir: dir.clone(),
    };
    // Nothing refused, nothing lost in the join.
    for reason in [
        "decode",
        "too_large",
        "unsupported_media_type",
        "overloaded",
        "timeout",
    ] {
        let line = format!("toolsize_otlp_requests_refused_total{{reason=\"{reason}\"}}");
        assert_eq!(run.metric(&line), 0.0, "{agent}/{variant}: {line}");
    }
    for outcome in ["late", "orphan", "unjoined"] {
        let line = format!("toolsize_agent_signals_total{{outcome=\"{outcome}\"}}");
        assert_eq!(run.metric(&line), 0.0, "{agent}/{variant}: {line}");
    }
    run
}

/// One row of the table in `docs/agents.md`; `of` is the number of calls the agent exported.
fn row(agent: &str, variant: &str, r: &Run, of: usize, note: &str) -> String {
    let rows = r.rows();
    let calls: u64 = rows.values().map(|x| x.0).sum();
    let errors: u64 = rows.values().map(|x| x.1).sum();
    let cut: u64 = rows.values().map(|x| x.2).sum();
    format!(
        "| {agent} | {variant} | {} | {calls} of {of} | {} | {errors} | {cut} | {note} |",
        rows.keys().cloned().collect::<Vec<_>>().join(", "),
        r.sized().len(),
    )
}

#[test]
fn every_call_of_the_six_agents_is_counted_once_and_sized_as_documented() {
    if !require(&support::cli::python3(), &["--version"]) || !require("unshare", &["--version"]) {
        return;
    }
    if !agents_installed() {
        return;
    }
    let mut table = vec![
        "| agent | variant | series | calls counted | sized | failed | cut by the agent | size unit |"
            .to_string(),
        "|---|---|---|---|---|---|---|---|".to_string(),
    ];

    // Claude Code: logs + beta traces (each call a log record, a span and its child), over
    // protobuf and JSON; then logs with its PostToolUse hook, as a command and over HTTP.
    for variant in [
        "all-signals",
        "all-signals-json",
        "logs-hook",
        "logs-http-hook",
    ] {
        let hooked = variant.ends_with("hook");
        let r = run("claude", variant);
        let rows = r.rows();
        assert_eq!(
            rows.keys().collect::<Vec<_>>(),
            ["Bash", "Read"],
            "{variant}: no other series (claude_code.tool.execution is a part of a call)"
        );
        assert_eq!((rows["Bash"].0, rows["Bash"].1), (3, 1), "{variant}: Bash");
        assert_eq!((rows["Read"].0, rows["Read"].1), (1, 0), "{variant}: Read");
        // Sized as the model got it, in UTF-16 code units (the read has non-ASCII text).
        let mut want: Vec<u64> = ["seq", "echo", "read"]
            .iter()
            .map(|l| r.got(l).utf16)
            .collect();
        want.sort();
        let sized = r.sized();
        assert_eq!(
            sized.iter().map(|s| s.0).collect::<Vec<_>>(),
            want,
            "{variant}"
        );
        assert_ne!(r.got("read").utf16, r.got("read").utf8);
        let seq = sized.iter().find(|s| s.0 == r.got("seq").utf16).unwrap();
        if hooked {
            // The hook shows the persisted output: cut by Claude Code's Bash layer, 108,894
            // bytes before the cut.
            assert_eq!(
                (seq.1.as_deref(), seq.2),
                (Some("claude-code.bash"), Some(108_894))
            );
            assert_eq!(rows["Bash"].2, 1);
        } else {
            assert_eq!(
                seq.1, None,
                "{variant}: without the hook the cut is invisible"
            );
        }
        // Held to Claude Code's own stack: Bash output is cut at 30,000 characters; the cut
        // call is over that ceiling once the hook shows it.
        let (stack, ceiling, over) = r.held("Bash");
        assert_eq!(
            (stack.as_str(), ceiling.as_deref()),
            ("claude-code", Some("claude-code.bash"))
        );
        let want: &[(String, u64)] = if hooked {
            &[("claude-code.bash".to_string(), 1)]
        } else {
            &[]
        };
        assert_eq!(over, want, "{variant}: Bash over its ceiling");
        let (stack, ceiling, over) = r.held("Read");
        assert_eq!(stack, "claude-code");
        assert!(ceiling.is_some_and(
            |c| c.starts_with("claude-code.read") || c == "claude-code.tool-result.persist"
        ));
        assert!(over.is_empty());
        assert!(
            r.metrics.contains(
                "toolsize_tool_result_ceiling_bytes{service=\"claude-code\",tool=\"Bash\",\
                 stack=\"claude-code\",layer=\"claude-code.bash\"}"
            ),
            "{variant}: the series' ceiling on /metrics"
        );
        if variant.starts_with("all-signals") {
            r.doctor_says("claude-code", Some("no hook payload arrived: its own cuts"));
        } else {
            r.doctor_says("claude-code", None);
        }
        if variant == "logs-http-hook" {
            r.connected("claude-code");
        }
        if variant == "logs-hook" {
            // Claude Code strips every OTEL_* variable from a hook's environment: the hook
            // found the daemon by its flag.
            let env = std::fs::read_to_string(r.dir.join("hook_env.txt")).unwrap();
            assert!(
                !env.lines().any(|l| l.starts_with("OTEL_")),
                "OTEL_* reached the hook"
            );
        }
        let note = if hooked {
            "UTF-16 units of what the model got; the hook adds the 108,894-byte original"
        } else {
            "UTF-16 units of what the model got"
        };
        table.push(row("Claude Code", variant, &r, 4, note));
    }

    // Claude Code's per-message budget (catalog `claude-code.message-budget`: 200,000 chars
    // over the tool results of one message) applies only while its remote feature flag is on,
    // and it is off here: ten results of 23,892 chars in one message (238,920 in all) reach the
    // model whole, none is persisted, each is counted once, sized, and not cut.
    {
        let r = run("claude", "budget");
        assert_eq!(r.model.len(), 10);
        assert!(r.model.iter().all(|g| g.utf16 == 23_892), "{:?}", r.model);
        let total: u64 = r.model.iter().map(|g| g.utf16).sum();
        let budget = toolsize::layers::find("claude-code.message-budget").unwrap();
        assert!(total > budget.limit, "{total} is over the budget");
        let hooks = std::fs::read_to_string(r.dir.join("hook_payloads.jsonl")).unwrap();
        assert_eq!(hooks.lines().count(), 10);
        assert!(!hooks.contains("persistedOutputSize"), "nothing persisted");
        assert_eq!(r.rows()["Bash"], (10, 0, 0), "counted once each, none cut");
        // Its command hook posts only the calls Claude Code cut: none here.
        r.doctor_says("claude-code", Some("no hook payload arrived"));
    }

    // Codex: span events + logs + metrics, protobuf and JSON.
    for variant in ["all-signals", "all-signals-json"] {
        let r = run("codex", variant);
        let rows = r.rows();
        assert_eq!(
            rows.keys().collect::<Vec<_>>(),
            ["exec_command"],
            "{variant}: Codex's own spans make no series"
        );
        // Codex says success for a command that exits 1; its log preview's header says
        // `Process exited with code 1`: failed, unsized.
        assert_eq!(rows["exec_command"], (4, 1, 1), "{variant}");
        let sized = r.sized();
        let mut whole: Vec<u64> = ["echo", "read"].iter().map(|l| r.got(l).utf8).collect();
        whole.sort();
        assert_eq!(
            sized
                .iter()
                .filter(|s| s.1.is_none())
                .map(|s| s.0)
                .collect::<Vec<_>>(),
            whole,
            "{variant}: UTF-8 bytes of what the model got"
        );
        let cut = sized.iter().find(|s| s.1.is_some()).unwrap();
        assert_eq!(cut.1.as_deref(), Some("codex.tool-output.tokens"));
        assert!(
            cut.0 > 108_894 && cut.2 == Some(cut.0),
            "{variant}: the output before the cut: {cut:?}"
        );
        assert!(r.got("seq").utf8 < cut.0, "the model got Codex's cut");
        // Held to Codex's stack (not the daemon's 16 KiB default): only the cut output is over.
        let (stack, ceiling, over) = r.held("exec_command");
        assert_eq!(
            (stack.as_str(), ceiling.as_deref()),
            ("codex", Some("codex.tool-output.tokens"))
        );
        assert_eq!(over, [("codex.tool-output.tokens".to_string(), 1)]);
        r.doctor_says("codex", None);
        if variant == "all-signals" {
            r.connected("codex");
        }
        table.push(row(
            "Codex",
            variant,
            &r,
            4,
            "UTF-8 bytes of the output before Codex's cut",
        ));
    }

    // Gemini CLI: logs + traces + metrics over OTLP/HTTP (JSON, chunked) and OTLP/gRPC.
    for variant in ["all-signals", "grpc"] {
        let r = run("gemini", variant);
        let rows = r.rows();
        assert_eq!(
            rows.keys().collect::<Vec<_>>(),
            ["read_file", "run_shell_command"],
            "{variant}"
        );
        // The failed command: success=true, but the metadata (logPrompts on) says isError.
        assert_eq!(rows["run_shell_command"], (3, 1, 1), "{variant}");
        assert_eq!(rows["read_file"], (1, 0, 0), "{variant}");
        let sized = r.sized();
        let mut want: Vec<u64> = ["seq", "echo", "read"]
            .iter()
            .map(|l| r.got(l).utf16)
            .collect();
        want.sort();
        assert_eq!(
            sized.iter().map(|s| s.0).collect::<Vec<_>>(),
            want,
            "{variant}: UTF-16 units of what the model got"
        );
        let cut = sized.iter().find(|s| s.1.is_some()).unwrap();
        assert_eq!(cut.1.as_deref(), Some("gemini-cli.tool-output"));
        assert!(cut.2.is_some_and(|o| o > 108_000), "{cut:?}");
        let (stack, ceiling, over) = r.held("run_shell_command");
        assert_eq!(
            (stack.as_str(), ceiling.as_deref()),
            ("gemini-cli", Some("gemini-cli.tool-output"))
        );
        assert_eq!(over, [("gemini-cli.tool-output".to_string(), 1)]);
        let (stack, _, over) = r.held("read_file");
        assert_eq!(stack, "gemini-cli");
        assert!(
            over.is_empty(),
            "{variant}: read_file is cut by lines, not by its output cap"
        );
        r.doctor_says("gemini-cli", None);
        if variant == "all-signals" {
            r.connected("gemini-cli");
        }
        table.push(row(
            "Gemini CLI",
            variant,
            &r,
            4,
            "UTF-16 units of what the model got; the original from its truncation record",
        ));
    }

    // Gemini CLI's AfterTool command hook beside its telemetry: its payload shares the session
    // id, the tool's name and its arguments (its telemetry's `function_args`, with logPrompts)
    // with the telemetry, and no call id, prompt id or trace; it is counted as no tool call and
    // changes no count.
    {
        let r = run("gemini", "all-signals-hook");
        let text = std::fs::read_to_string(r.dir.join("hook_payloads.jsonl")).unwrap();
        let payloads: Vec<Value> = serde_json::Deserializer::from_str(&text)
            .into_iter::<Value>()
            .map(Result::unwrap)
            .collect();
        assert_eq!(payloads.len(), 4);
        for p in &payloads {
            for shared in ["session_id", "tool_name", "tool_input", "timestamp"] {
                assert!(p.get(shared).is_some(), "{shared}");
            }
            for id in [
                "tool_use_id",
                "tool_call_id",
                "call_id",
                "prompt_id",
                "trace_id",
            ] {
                assert!(p.get(id).is_none(), "{id}");
            }
        }
        let rows = r.rows();
        assert_eq!(rows["run_shell_command"], (3, 1, 1));
        assert_eq!(rows["read_file"], (1, 0, 0));
        r.doctor_says("gemini-cli", None);
    }

    // Qwen Code: logs and traces (a log record, a span and its child per call), its truncation
    // notice (no call id), and its own HTTP hook; then over gRPC without the hook.
    for variant in ["all-signals-hook", "grpc"] {
        let r = run("qwen", variant);
        let rows = r.rows();
        assert_eq!(
            rows.keys().collect::<Vec<_>>(),
            ["read_file", "run_shell_command"],
            "{variant}"
        );
        assert_eq!(rows["run_shell_command"], (3, 1, 1), "{variant}");
        assert_eq!(rows["read_file"], (1, 0, 0), "{variant}");
        let sized = r.sized();
        let mut want: Vec<u64> = ["seq", "echo", "read"]
            .iter()
            .map(|l| r.got(l).utf16)
            .collect();
        want.sort();
        assert_eq!(
            sized.iter().map(|s| s.0).collect::<Vec<_>>(),
            want,
            "{variant}: UTF-16 units of what the model got"
        );
        let cut = sized.iter().find(|s| s.1.is_some()).unwrap();
        assert_eq!(cut.1.as_deref(), Some("qwen-code.shell"), "{variant}");
        // Its notice's original: the output and the lines Qwen Code appends to it.
        assert!(cut.2.is_some_and(|o| o > 108_894), "{variant}: {cut:?}");
        let (stack, ceiling, over) = r.held("run_shell_command");
        assert_eq!(
            (stack.as_str(), ceiling.as_deref()),
            ("qwen-code", Some("qwen-code.shell")),
            "its 30,000-character shell cut, not the 25,000 of other tools"
        );
        assert_eq!(over, [("qwen-code.shell".to_string(), 1)]);
        if variant == "grpc" {
            r.doctor_says("qwen-code", Some("no hook payload arrived"));
        } else {
            r.doctor_says("qwen-code", None);
            r.connected("qwen-code");
        }
        table.push(row(
            "Qwen Code",
            variant,
            &r,
            4,
            "UTF-16 units of what the model got; the original from its truncation record",
        ));
    }

    // GitHub Copilot CLI, offline with its own provider pointed at the fake endpoint: traces
    // with content capture.
    {
        let r = run("copilot", "all-signals");
        let rows = r.rows();
        assert_eq!(rows.keys().collect::<Vec<_>>(), ["bash"]);
        // The failed `cat`: span status unset, process.exit.code = 1.
        assert_eq!(rows["bash"], (4, 1, 1));
        let sized = r.sized();
        let mut want: Vec<u64> = ["seq", "echo", "read"]
            .iter()
            .map(|l| r.got(l).utf8)
            .collect();
        want.sort();
        assert_eq!(
            sized.iter().map(|s| s.0).collect::<Vec<_>>(),
            want,
            "UTF-8 bytes of what the model got"
        );
        let cut = sized.iter().find(|s| s.1.is_some()).unwrap();
        assert_eq!(cut.1.as_deref(), Some("copilot-cli.tool-output"));
        // "106.3 KB": within 1 % of the 108,894 bytes printed.
        assert!(
            cut.2.is_some_and(|o| o.abs_diff(108_894) * 100 <= 108_894),
            "{cut:?}"
        );
        let (stack, _, over) = r.held("bash");
        assert_eq!(stack, "copilot", "its own stack, not the daemon's 16 KiB");
        assert_eq!(over, [("copilot-cli.tool-output".to_string(), 1)]);
        r.doctor_says("copilot", None);
        r.connected("copilot");
        table.push(row(
            "Copilot CLI",
            "all-signals",
            &r,
            4,
            "UTF-8 bytes of what the model got; the original from its notice (to 0.1 KB)",
        ));
    }

    // opencode: its AI SDK spans (and its own Tool.execute spans). The fake model answers last
    // after 6 s, so that opencode has exported the spans of its last calls when it exits.
    {
        let r = run("opencode", "all-signals");
        let rows = r.rows();
        assert_eq!(rows.keys().collect::<Vec<_>>(), ["bash", "read"]);
        // The failed `cat`: metadata.exit = 1.
        assert_eq!(rows["bash"], (3, 1, 1));
        assert_eq!(rows["read"], (1, 0, 0));
        // Sized as the model got `output`, not as the JSON of the whole result object.
        let sized = r.sized();
        let mut want: Vec<u64> = ["seq", "echo", "read"]
            .iter()
            .map(|l| r.got(l).utf8)
            .collect();
        want.sort();
        assert_eq!(sized.iter().map(|s| s.0).collect::<Vec<_>>(), want);
        let cut = sized.iter().find(|s| s.1.is_some()).unwrap();
        assert_eq!(
            (cut.0, cut.1.as_deref()),
            (r.got("seq").utf8, Some("opencode.tool-output.lines"))
        );
        let (stack, _, over) = r.held("bash");
        assert_eq!(stack, "opencode", "its own stack, not the daemon's 16 KiB");
        assert_eq!(over, [("opencode.tool-output.lines".to_string(), 1)]);
        r.doctor_says("opencode", None);
        r.connected("opencode");
        table.push(row(
            "opencode",
            "all-signals",
            &r,
            4,
            "UTF-8 bytes of the output the model got",
        ));
    }

    let table = table.join("\n");
    println!("{table}");
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/agents.md"))
        .unwrap();
    assert!(
        doc.contains(&table),
        "docs/agents.md does not hold the table this test measured:\n{table}"
    );
}
