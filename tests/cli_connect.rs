//! `toolsize connect <agent>` on real files in a temporary HOME: it merges the agent's settings
//! into what is there (keeping the user's keys, and Codex's comments), a second run changes
//! nothing (same bytes, same modification time), `--dry-run` prints the diff and writes nothing,
//! `--undo` gives the user's settings back, the file keeps its mode, and bad input (an unknown
//! agent, a file that does not parse, a token where the agent has no place for one) exits 2 with
//! the structured error and leaves the file untouched. And `toolsize doctor` against the real
//! daemon: what each agent sent, and the missing switch (exit 1) until it arrives (exit 0).
//!
//! The real agents read what `connect` writes in `tests/coding_agents.rs`.
#![cfg(feature = "collector")]

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::{json, Value};
use support::cli::{code, scratch, structured_error};
use support::collector::Binary;

/// `toolsize args…` with `HOME` (and nothing of the caller's agent settings) set to `home`.
fn toolsize(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolsize"))
        .args(args)
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("CODEX_HOME")
        .env("TOOLSIZE_ERROR_FORMAT", "json")
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn claude_code_is_merged_idempotent_and_undone_keeping_the_users_keys_and_mode() {
    let home = scratch("connect-claude");
    let home: &Path = &home;
    let file = home.join(".claude/settings.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let user = "{\n  \"model\": \"opus\",\n  \"env\": {\"MINE\": \"1\"},\n  \"hooks\": {\"PostToolUse\": [{\"matcher\": \"Bash\", \"hooks\": [{\"type\": \"command\", \"command\": \"my-hook\"}]}]}\n}\n";
    std::fs::write(&file, user).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();

    // --dry-run: the diff, nothing written.
    let out = toolsize(home, &["connect", "claude-code", "--dry-run"]);
    assert_eq!(code(&out), 0, "{out:?}");
    let diff = text(&out);
    assert!(
        diff.contains("+    \"OTEL_EXPORTER_OTLP_ENDPOINT\": \"http://127.0.0.1:4318\""),
        "{diff}"
    );
    assert!(
        diff.contains("http://127.0.0.1:4318/v1/hooks/claude-code"),
        "{diff}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), user);

    let out = toolsize(home, &["connect", "claude"]);
    assert_eq!(code(&out), 0, "{out:?}");
    assert!(
        text(&out).contains("claude-code: connected"),
        "{}",
        text(&out)
    );
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(written["model"], "opus");
    assert_eq!(written["env"]["MINE"], "1");
    assert_eq!(written["env"]["CLAUDE_CODE_ENABLE_TELEMETRY"], "1");
    assert_eq!(written["env"]["OTEL_LOGS_EXPORTER"], "otlp");
    let hooks = written["hooks"]["PostToolUse"].as_array().unwrap();
    assert_eq!(hooks.len(), 2, "the user's hook stays beside ours");
    assert_eq!(hooks[0]["hooks"][0]["command"], "my-hook");
    assert_eq!(
        hooks[1],
        json!({"matcher": "*", "hooks": [{"type": "http",
            "url": "http://127.0.0.1:4318/v1/hooks/claude-code", "timeout": 5}]})
    );
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&file), 0o640, "the file keeps its mode");

    // A second run changes nothing: same bytes, same modification time.
    let before = (
        std::fs::read(&file).unwrap(),
        std::fs::metadata(&file).unwrap().modified().unwrap(),
    );
    let out = toolsize(home, &["connect", "claude-code"]);
    assert_eq!(code(&out), 0);
    assert!(text(&out).contains("already connected"), "{}", text(&out));
    let after = (
        std::fs::read(&file).unwrap(),
        std::fs::metadata(&file).unwrap().modified().unwrap(),
    );
    assert_eq!(before, after);

    // --undo: the user's settings, as they were.
    let out = toolsize(home, &["connect", "claude-code", "--undo"]);
    assert_eq!(code(&out), 0, "{out:?}");
    let back: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(back, serde_json::from_str::<Value>(user).unwrap());
    assert_eq!(mode(&file), 0o640);
    assert!(!home
        .join(".claude/settings.json.toolsize-connect.json")
        .exists());
}

#[test]
fn codex_keeps_its_comments_and_every_agent_gets_its_own_file() {
    let home = scratch("connect-all");
    let home: &Path = &home;
    let codex = home.join(".codex/config.toml");
    std::fs::create_dir_all(codex.parent().unwrap()).unwrap();
    let user = "# my settings\nmodel = \"gpt-5.5\" # the model\n";
    std::fs::write(&codex, user).unwrap();
    let endpoint = "http://127.0.0.1:14318";
    for agent in ["codex", "gemini-cli", "qwen-code", "opencode", "copilot"] {
        let out = toolsize(home, &["connect", agent, "--endpoint", endpoint]);
        assert_eq!(code(&out), 0, "{agent}: {out:?}");
    }
    let toml = std::fs::read_to_string(&codex).unwrap();
    assert!(toml.starts_with(user), "{toml}");
    assert!(toml.contains(
        "trace_exporter = { otlp-http = { endpoint = \"http://127.0.0.1:14318/v1/traces\", protocol = \"binary\" } }"
    ), "{toml}");
    let json = |p: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(home.join(p)).unwrap()).unwrap()
    };
    let gemini = json(".gemini/settings.json");
    assert_eq!(gemini["telemetry"]["otlpEndpoint"], endpoint);
    assert_eq!(gemini["telemetry"]["otlpProtocol"], "http");
    let qwen = json(".qwen/settings.json");
    assert_eq!(
        qwen["hooks"]["PostToolUse"][0]["hooks"][0]["url"],
        "http://127.0.0.1:14318/v1/hooks/qwen-code"
    );
    assert_eq!(
        json(".config/opencode/opencode.json")["experimental"]["openTelemetry"],
        true
    );
    let env = std::fs::read_to_string(home.join(".config/toolsize/copilot.env")).unwrap();
    assert!(
        env.contains("export OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT='true'"),
        "{env}"
    );
    // Undone, Codex's file is the user's again, byte for byte.
    let out = toolsize(home, &["connect", "codex", "--undo"]);
    assert_eq!(code(&out), 0, "{out:?}");
    assert_eq!(std::fs::read_to_string(&codex).unwrap(), user);
}

#[test]
fn bad_input_exits_2_and_leaves_the_file_untouched() {
    let home = scratch("connect-bad");
    let home: &Path = &home;
    // An unknown agent: clap's did-you-mean, structured.
    let e = structured_error(&toolsize(home, &["connect", "claude-cod"]));
    assert_eq!(e["code"], "USAGE");
    let m = e["message"].as_str().unwrap();
    assert!(m.contains("a similar value exists: 'claude-code'"), "{m}");
    // A file that does not parse.
    let file = home.join(".gemini/settings.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let broken = "{\"telemetry\": {\"enabled\": tru\n";
    std::fs::write(&file, broken).unwrap();
    let e = structured_error(&toolsize(home, &["connect", "gemini-cli"]));
    assert_eq!(e["code"], "CONNECT_FILE");
    assert!(
        e["message"].as_str().unwrap().contains("settings.json"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), broken);
    // Comments: refused, not dropped.
    let commented = "{\n  // mine\n  \"ui\": {}\n}\n";
    std::fs::write(&file, commented).unwrap();
    let e = structured_error(&toolsize(home, &["connect", "gemini-cli"]));
    assert!(e["message"].as_str().unwrap().contains("comments"), "{e}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), commented);
    // A user's key in the way: not replaced.
    let cfg = home.join("opencode.json");
    std::fs::write(&cfg, "{\"experimental\": true}\n").unwrap();
    let e = structured_error(&toolsize(
        home,
        &["connect", "opencode", "--config", cfg.to_str().unwrap()],
    ));
    assert_eq!(e["code"], "CONNECT_FILE");
    assert_eq!(
        std::fs::read_to_string(&cfg).unwrap(),
        "{\"experimental\": true}\n"
    );
    // A token where the agent's file has no place for one; an endpoint that is no listener.
    let token = home.join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let e = structured_error(&toolsize(
        home,
        &[
            "connect",
            "qwen-code",
            "--token-file",
            token.to_str().unwrap(),
        ],
    ));
    assert_eq!(e["code"], "CONNECT_TOKEN");
    assert!(
        !e.to_string().contains("s3cret"),
        "the token is never printed: {e}"
    );
    let e = structured_error(&toolsize(
        home,
        &["connect", "codex", "--endpoint", "127.0.0.1:4318"],
    ));
    assert_eq!(e["code"], "USAGE");
    assert!(!home.join(".qwen").exists() && !home.join(".codex").exists());
}

/// `toolsize doctor --url http://ADMIN`.
fn doctor(d: &Binary, json: bool) -> Output {
    let url = format!("http://{}", d.admin);
    let mut args = vec!["doctor", "--url", url.as_str()];
    if json {
        args.push("--json");
    }
    Command::new(env!("CARGO_BIN_EXE_toolsize"))
        .args(&args)
        .env_remove("TOOLSIZE_AUTH_TOKEN")
        .env_remove("TOOLSIZE_AUTH_TOKEN_FILE")
        .output()
        .unwrap()
}

async fn post(d: &Binary, path: &str, body: &Value) {
    let r = reqwest::Client::new()
        .post(format!("http://{}{path}", d.http))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{path}");
}

#[tokio::test]
async fn doctor_says_what_each_agent_sent_and_the_missing_switch() {
    let d = Binary::start_with_env(&[], None, &[("RUST_LOG", "error")]);
    let out = doctor(&d, false);
    assert_eq!(code(&out), 1, "nothing heard: {out:?}");
    assert!(
        text(&out).contains("no coding agent has sent anything"),
        "{}",
        text(&out)
    );
    // Claude Code's tool_result log record: its logs arrive, its hook does not.
    let log = json!({"resourceLogs": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "claude-code"}}]},
        "scopeLogs": [{"scope": {"name": "com.anthropic.claude_code.events"}, "logRecords": [{
            "timeUnixNano": "1700000000000000000", "attributes": [
                {"key": "event.name", "value": {"stringValue": "tool_result"}},
                {"key": "tool_name", "value": {"stringValue": "Bash"}},
                {"key": "tool_use_id", "value": {"stringValue": "toolu_1"}},
                {"key": "success", "value": {"stringValue": "true"}},
                {"key": "tool_result_size_bytes", "value": {"stringValue": "2281"}}]}]}]}]});
    post(&d, "/v1/logs", &log).await;
    let out = doctor(&d, false);
    assert_eq!(code(&out), 1, "{out:?}");
    let said = text(&out);
    assert!(said.contains("claude-code: incomplete"), "{said}");
    assert!(said.contains("logs: 1 (1 sized), last"), "{said}");
    assert!(
        said.contains("no hook payload arrived: its own cuts"),
        "{said}"
    );
    // Its hook: complete.
    let hook = json!({"hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_use_id": "toolu_1",
        "tool_response": {"stdout": "1\n2\n", "persistedOutputPath": "/x", "persistedOutputSize": 108_894}});
    post(&d, "/v1/hooks/claude-code", &hook).await;
    let out = doctor(&d, true);
    assert_eq!(code(&out), 0, "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["agents"][0]["agent"], "claude-code");
    assert!(
        !out.stdout.windows(2).any(|w| w == b"/x"),
        "no content, no path"
    );
    // A usage error, and a daemon that is not there.
    assert_eq!(
        structured_error(
            &Command::new(env!("CARGO_BIN_EXE_toolsize"))
                .args(["doctor", "--url", "ftp://x"])
                .output()
                .unwrap()
        )["code"],
        "USAGE"
    );
    let gone = format!("http://127.0.0.1:{}", support::collector::free_port());
    let e = structured_error(
        &Command::new(env!("CARGO_BIN_EXE_toolsize"))
            .args(["doctor", "--url", gone.as_str()])
            .output()
            .unwrap(),
    );
    assert_eq!(e["code"], "DOCTOR_DAEMON");
}

#[test]
fn a_token_goes_where_the_agent_reads_headers_and_new_files_are_private() {
    let home = scratch("connect-token");
    let home: &Path = &home;
    let token = home.join("token");
    std::fs::write(&token, "s3cret-token\n").unwrap();
    let t = token.to_str().unwrap();
    for agent in ["claude-code", "codex"] {
        let out = toolsize(home, &["connect", agent, "--token-file", t]);
        assert_eq!(code(&out), 0, "{agent}: {out:?}");
        assert!(!text(&out).contains("s3cret"), "the token is never printed");
    }
    let claude = home.join(".claude/settings.json");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&claude).unwrap()).unwrap();
    assert_eq!(
        v["env"]["OTEL_EXPORTER_OTLP_HEADERS"],
        "Authorization=Bearer s3cret-token"
    );
    assert_eq!(
        v["hooks"]["PostToolUse"][0]["hooks"][0]["headers"]["Authorization"],
        "Bearer s3cret-token"
    );
    let codex = std::fs::read_to_string(home.join(".codex/config.toml")).unwrap();
    assert!(
        codex.contains("headers = { Authorization = \"Bearer s3cret-token\" }"),
        "{codex}"
    );
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&claude), 0o600, "a new file holding the token");
    assert_eq!(
        mode(&home.join(".claude/settings.json.toolsize-connect.json")),
        0o600
    );
}
