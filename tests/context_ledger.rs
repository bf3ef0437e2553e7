//! The context ledger, proven on real emitters: Claude Code, Codex and Gemini CLI at the releases
//! pinned in `tests/agents/npm`, driven through the scripted session of
//! `tests/agents/fake_model.py` (`tests/agents/run_agent.py`, loopback only), the fake model
//! reporting the token usage the test asks for (input tokens, cache reads, and for Claude Code
//! cache writes) as the Messages, Responses and Gemini APIs do; then two frameworks' GenAI spans.
//!
//! The test computes its own ledger from what the fake model sent and received: each tool
//! result the model got (first seen in request *k*, its tokens `ceil(UTF-16 units / 4)`, the
//! scripted failing call unsized; for Codex `ceil(UTF-8 bytes / 4)`, the failing call's error
//! text carried) rides in every main request from *k* on, and each of those
//! requests' input tokens are what the fake reported. The daemon's cumulative context cost per tool
//! must equal it exactly, its result tokens too, each session's input and cache counts too,
//! and its share p50 / p95 per tool must be within 1 % of the test's. In CI a missing agent
//! fails the test.
#![cfg(feature = "collector")]

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::collector::{missing_peers_allowed, require};

/// Cache tokens the fake model reports: read on every main request after the first, written on
/// every main request.
const CACHE_READ: u64 = 5000;
const CACHE_CREATION: u64 = 300;

fn agents_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents")
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Nearest-rank quantile, as the daemon takes it.
fn quantile(v: &[f64], q: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// What the test expects per tool: result tokens, cumulative cost, requests that carried it,
/// the shares of those requests.
#[derive(Debug, Default, PartialEq)]
struct Expected {
    result_tokens: u64,
    cost: u64,
    requests: u64,
    shares: Vec<f64>,
}

/// How an agent's results are counted: Claude Code and Gemini CLI report sizes in UTF-16 units
/// and say the scripted `cat /nonexistent` failed (a failed call is unsized); Codex reports
/// UTF-8 bytes and a success (the model got the error text, and it enters the context).
#[derive(Clone, Copy, PartialEq)]
enum Counting {
    Utf16FailedUnsized,
    Utf8FailedCarried,
}

/// The test's own ledger of one run: from the results the model got and the usage it reported.
fn ledger(dir: &Path, counting: Counting) -> (BTreeMap<String, Expected>, u64, u64, u64) {
    let usage: Vec<Value> = lines(&dir.join("model_usage.jsonl"))
        .into_iter()
        .filter(|u| !u["side"].as_bool().unwrap())
        .collect();
    let results: Vec<(String, u64, u64)> = lines(&dir.join("model_records.jsonl"))
        .into_iter()
        .filter(|r| counting == Counting::Utf8FailedCarried || r["label"] != "cat_fail")
        .map(|r| {
            let unit = match counting {
                Counting::Utf16FailedUnsized => "utf16_units",
                Counting::Utf8FailedCarried => "utf8_bytes",
            };
            (
                r["tool_name"].as_str().unwrap().to_string(),
                r[unit].as_u64().unwrap().div_ceil(4),
                r["request_seq"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut want: BTreeMap<String, Expected> = BTreeMap::new();
    for (tool, tokens, _) in &results {
        want.entry(tool.clone()).or_default().result_tokens += tokens;
    }
    let (mut input_all, mut read_all, mut creation_all) = (0, 0, 0);
    for u in &usage {
        let seq = u["request_seq"].as_u64().unwrap();
        let read = u["cache_read_input_tokens"].as_u64().unwrap();
        let creation = u["cache_creation_input_tokens"].as_u64().unwrap();
        let input = u["input_tokens"].as_u64().unwrap() + read + creation;
        (input_all, read_all, creation_all) =
            (input_all + input, read_all + read, creation_all + creation);
        let mut carried: BTreeMap<&str, u64> = BTreeMap::new();
        for (tool, tokens, first) in &results {
            if *first <= seq {
                *carried.entry(tool).or_default() += tokens;
            }
        }
        for (tool, tokens) in carried {
            let w = want.get_mut(tool).unwrap();
            w.cost += tokens;
            w.requests += 1;
            w.shares.push(tokens as f64 / input as f64);
        }
    }
    (want, input_all, read_all, creation_all)
}

/// Runs `agent` through the scripted session with the cache counts given, and checks the
/// daemon's ledger of its one session against the test's: `tools`, the sized tools (its shell,
/// then its file reader), and `service`, the agent's.
fn check_agent(
    (agent, variant): (&str, &str),
    service: &str,
    tools: &[&str],
    cache: (u64, u64),
    counting: Counting,
) {
    let dir = std::env::temp_dir().join(format!("toolsize-ledger-{agent}-{}", std::process::id()));
    let out = Command::new(support::cli::python3())
        .arg(agents_dir().join("run_agent.py"))
        .args(["--agent", agent, "--variant", variant, "--toolsize"])
        .arg(env!("CARGO_BIN_EXE_toolsize"))
        .args(["--cache-read", &cache.0.to_string()])
        .args(["--cache-creation", &cache.1.to_string()])
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{agent}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let (want, input, read, creation) = ledger(&dir, counting);
    let mut sorted = tools.to_vec();
    sorted.sort_unstable();
    assert_eq!(
        want.keys().collect::<Vec<_>>(),
        sorted,
        "{agent}: sized results"
    );
    // The shell's first result rides in every later request; the read only in the last.
    assert!(
        want[tools[0]].cost > want[tools[0]].result_tokens,
        "{want:?}"
    );
    if let Some(reader) = tools.get(1) {
        assert_eq!(want[*reader].requests, 1, "{want:?}");
    }
    assert!(read > 0, "{agent}: the fake reported cache reads");

    let sessions: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("sessions.json")).unwrap()).unwrap();
    // Claude Code and Gemini CLI send results and requests on one signal, in order. Codex sends
    // its results on its traces and its requests on its logs, each on its own timer: its
    // requests wait the join window in the daemon, so none of its results is late either.
    let late = sessions["late"].as_u64().unwrap();
    assert_eq!(late, 0, "{agent}: no result late: {sessions}");
    let rows: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("tools.json")).unwrap()).unwrap();
    for row in rows["tools"].as_array().unwrap() {
        let tool = row["tool"].as_str().unwrap();
        let (w, c) = (&want[tool], &row["context"]);
        assert_eq!(c["result_tokens"], w.result_tokens, "{agent} {tool}: {c}");
        assert_eq!(
            c["context_tokens"], w.cost,
            "{agent} {tool}: cumulative cost {c}"
        );
        assert_eq!(c["requests"], w.requests, "{agent} {tool}: {c}");
        assert_eq!(
            c["estimated"], c["results"],
            "{agent} {tool}: every size estimated {c}"
        );
        for (field, q) in [("share_p50", 0.5), ("share_p95", 0.95)] {
            let (got, exp) = (c[field].as_f64().unwrap(), quantile(&w.shares, q));
            assert!(
                (got - exp).abs() <= 0.01 * exp,
                "{agent} {tool}: {field} {got} against {exp}"
            );
        }
    }

    let s = &sessions["sessions"][0];
    assert_eq!(sessions["followed"], 1, "{agent}: {sessions}");
    assert_eq!(
        (&s["service"], &s["by"]),
        (&service.into(), &"session".into())
    );
    assert_eq!(s["input_tokens"], input, "{agent}: {s}");
    assert_eq!(s["cache_read_tokens"], read, "{agent}: {s}");
    assert_eq!(s["cache_creation_tokens"], creation, "{agent}: {s}");
    assert_eq!(s["compactions"], 0);
    let metrics = std::fs::read_to_string(dir.join("metrics.txt")).unwrap();
    let late_line = format!("toolsize_context_results_late_total {late}");
    assert!(
        metrics.lines().any(|l| l == late_line),
        "{late_line} in /metrics"
    );
    assert_eq!(
        s["context_tokens"],
        want.values().map(|w| w.cost).sum::<u64>(),
        "{agent}: {s}"
    );
    for (tool, w) in &want {
        let line = format!(
            "toolsize_tool_context_tokens_total{{service=\"{service}\",tool=\"{tool}\"}} {}",
            w.cost
        );
        assert!(metrics.lines().any(|l| l == line), "{line} in /metrics");
        let count = format!(
            "toolsize_tool_context_share_count{{service=\"{service}\",tool=\"{tool}\"}} {}",
            w.shares.len()
        );
        assert!(metrics.lines().any(|l| l == count), "{count} in /metrics");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_coding_agents_context_ledgers_match_what_the_model_sent_and_got() {
    if !require(&support::cli::python3(), &["--version"]) || !require("unshare", &["--version"]) {
        return;
    }
    let bin = agents_dir().join("npm/node_modules/.bin");
    if !(bin.join("claude").exists() && bin.join("gemini").exists()) {
        assert!(
            missing_peers_allowed(),
            "Claude Code or Gemini CLI is not installed in tests/agents/npm (scripts/test.sh runs \
             npm ci there); set TOOLSIZE_ALLOW_MISSING_PEERS=1 to skip"
        );
        eprintln!("\n*** SKIPPED: coding agents not installed: this test checked NOTHING ***\n");
        return;
    }
    check_agent(
        ("claude", "all-signals"),
        "claude-code",
        &["Bash", "Read"],
        (CACHE_READ, CACHE_CREATION),
        Counting::Utf16FailedUnsized,
    );
    // The Gemini API reports cache reads only.
    check_agent(
        ("gemini", "all-signals"),
        "gemini-cli",
        &["run_shell_command", "read_file"],
        (CACHE_READ, 0),
        Counting::Utf16FailedUnsized,
    );
}

/// Codex 0.171.0: its results from its `codex.tool_result` span events, its requests from its
/// `codex.sse_event` usage records (the Responses API's `input_tokens` with the cached ones in
/// them, as the fake reports them), one session by `conversation.id`. The first command's output
/// stays under Codex's cut (variant `ledger`), so what the model got is what Codex reports; every
/// result goes through `exec_command`, the failed `cat` too.
#[test]
fn codex_context_ledger_matches_what_the_model_sent_and_got() {
    if !require(&support::cli::python3(), &["--version"]) || !require("unshare", &["--version"]) {
        return;
    }
    if !agents_dir().join("npm/node_modules/.bin/codex").exists() {
        assert!(
            missing_peers_allowed(),
            "Codex is not installed in tests/agents/npm (scripts/test.sh runs npm ci there); set \
             TOOLSIZE_ALLOW_MISSING_PEERS=1 to skip"
        );
        eprintln!("\n*** SKIPPED: Codex not installed: this test checked NOTHING ***\n");
        return;
    }
    // The Responses API reports cache reads only.
    check_agent(
        ("codex", "ledger"),
        "codex_exec",
        &["exec_command"],
        (CACHE_READ, 0),
        Counting::Utf8FailedCarried,
    );
}

/// Framework calls per run: every 4th fails (`tests/frameworks/run_agent.py`).
const CALLS: u64 = 12;

/// The input tokens the frameworks' fake models report for request `k` (as
/// `tests/frameworks/run_agent.py`'s `input_tokens(k)`).
fn input_tokens(k: u64) -> u64 {
    2000 + 3000 * k
}

/// Runs `framework`'s agent against the daemon at `endpoint` as `service`.
fn run_framework(framework: &str, endpoint: &str, service: &str) -> Value {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/frameworks");
    let (mut cmd, script) = if framework == "vercel_ai" {
        (Command::new("node"), format!("{dir}/run_agent.mjs"))
    } else {
        let python =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("target/frameworks-venv/bin/python");
        (Command::new(python), format!("{dir}/run_agent.py"))
    };
    let out = cmd
        .current_dir(dir)
        .args([&script, "--framework", framework, "--endpoint", endpoint])
        .args(["--service", service, "--calls", &CALLS.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{framework}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The test's own ledger of one framework run: call `i` (one per model request, request 0
/// first) is handed to the model in request `i + 1` and rides in every request after it, up to
/// the final answer (request `CALLS`); a failed call is not sized.
fn framework_ledger(run: &Value) -> BTreeMap<String, Expected> {
    // The runners list their calls in the order their spans ended: the order they ran.
    let calls: Vec<&Value> = run["calls"].as_array().unwrap().iter().collect();
    assert_eq!(calls.len() as u64, CALLS, "{run}");
    let mut want: BTreeMap<String, Expected> = BTreeMap::new();
    for c in &calls {
        want.entry(c["tool"].as_str().unwrap().to_string())
            .or_default();
    }
    let sized: Vec<(usize, &str, u64)> = calls
        .iter()
        .enumerate()
        .filter(|(_, c)| c["failed"] == false)
        .map(|(i, c)| {
            (
                i,
                c["tool"].as_str().unwrap(),
                c["bytes"].as_u64().unwrap().div_ceil(4),
            )
        })
        .collect();
    for (_, tool, tokens) in &sized {
        want.get_mut(*tool).unwrap().result_tokens += tokens;
    }
    for k in 0..=CALLS {
        let mut carried: BTreeMap<&str, u64> = BTreeMap::new();
        for (i, tool, tokens) in &sized {
            if (*i as u64) < k {
                *carried.entry(tool).or_default() += tokens;
            }
        }
        for (tool, tokens) in carried {
            let w = want.get_mut(tool).unwrap();
            w.cost += tokens;
            w.requests += 1;
            w.shares.push(tokens as f64 / input_tokens(k) as f64);
        }
    }
    want
}

/// Two frameworks' GenAI spans (pydantic-ai's `chat` spans, the Vercel AI SDK's `doGenerate`
/// spans, each with `gen_ai.usage.input_tokens`) in the trace of their tool spans: the
/// daemon's ledger equals the test's, cost exactly, share within 1 %.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_frameworks_context_ledgers_match_what_their_fake_models_reported() {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/frameworks-venv/bin/python");
    if !require(python.to_str().unwrap(), &["-c", "import pydantic_ai"]) {
        return;
    }
    let ai = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/frameworks/node_modules/ai/package.json"
    );
    if !require("node", &["-e", &format!("require({ai:?})")]) {
        return;
    }
    let d = toolsize::collector::Daemon::start(&support::collector::loopback_config())
        .await
        .unwrap();
    let endpoint = format!("http://{}", d.otlp_http_addr);
    for fw in ["pydantic_ai", "vercel_ai"] {
        let service = format!("ledger-{fw}");
        let run = run_framework(fw, &endpoint, &service);
        let want = framework_ledger(&run);
        let tools = support::collector::tools(d.admin_addr, &format!("?service={service}")).await;
        let rows = tools["tools"].as_array().unwrap();
        assert_eq!(rows.len(), want.len(), "{fw}: {tools}");
        for row in rows {
            let tool = row["tool"].as_str().unwrap();
            let (w, c) = (&want[tool], &row["context"]);
            assert_eq!(
                c["context_tokens"], w.cost,
                "{fw} {tool}: {c} against {w:?}"
            );
            assert_eq!(c["result_tokens"], w.result_tokens, "{fw} {tool}: {c}");
            assert_eq!(c["requests"], w.requests, "{fw} {tool}: {c}");
            for (field, q) in [("share_p50", 0.5), ("share_p95", 0.95)] {
                let (got, exp) = (c[field].as_f64().unwrap(), quantile(&w.shares, q));
                assert!(
                    (got - exp).abs() <= 0.01 * exp,
                    "{fw} {tool}: {field} {got} against {exp}"
                );
            }
        }
        let s = support::collector::get_json(
            d.admin_addr,
            &format!("/api/v1/sessions?service={service}"),
        )
        .await;
        assert_eq!(
            s["sessions"].as_array().unwrap().len(),
            1,
            "{fw}: one trace {s}"
        );
        assert_eq!(s["sessions"][0]["by"], "trace", "{fw}: {s}");
        let inputs: u64 = (0..=CALLS).map(input_tokens).sum();
        assert_eq!(s["sessions"][0]["requests"], CALLS + 1, "{fw}: {s}");
        assert_eq!(s["sessions"][0]["input_tokens"], inputs, "{fw}: {s}");
    }
    d.shutdown().await;
}
