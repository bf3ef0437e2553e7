//! `toolsize hook <agent>`: a coding agent's command hook that tells the daemon what the hook
//! payload reveals of a tool call (sizes, ids and names only), for agents or set-ups where the
//! daemon cannot be posted to directly (Gemini CLI has command hooks only; Claude Code and Qwen
//! Code can instead post their payload to the daemon with an HTTP hook, see `docs/agents.md`).
//!
//! Run as Claude Code's or Qwen Code's `PostToolUse` hook, or Gemini CLI's `AfterTool` hook, it
//! reads the payload on standard input, measures it in the same pass as the daemon does
//! ([`crate::collector::ingest::hooks`]) and sends the daemon only what it measured:
//!
//! - to an `http://` or `https://` endpoint (default `http://127.0.0.1:4318`), a reduced payload
//!   (`tool_name`, the call's ids, `toolsize: {persisted_bytes, llm_content_utf16, failed}`) to
//!   `POST /v1/hooks/<agent>`;
//! - to a `grpc://` or `grpcs://` endpoint, one OTLP log record (`event.name =
//!   toolsize.hook.post_tool_use`, scope `toolsize.hook.claude_code`) with the same fields, over
//!   OTLP/gRPC.
//!
//! The endpoint and the token are flags (`--endpoint`, `--token` or `--token-file`), never
//! `OTEL_*` variables: Claude Code removes every `OTEL_*` variable from a hook's environment.
//! A payload that reveals nothing (Claude Code: a result that was not persisted) sends nothing.
//!
//! A hook must never get in the agent's way: the payload is read up to 64 MiB, the send takes
//! at most two seconds, and every failure, a usage error included, prints a structured error on
//! standard error and exits 1, which the agents show to the user without blocking the model
//! (exit 2 would feed the error to the model). Nothing of the output, the input or the paths is
//! sent.

use std::io::Read;
use std::process::ExitCode;
use std::time::Duration;

use axum::http::{HeaderName, HeaderValue};
use clap::{Args, ValueEnum};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    any_value::Value, AnyValue, InstrumentationScope, KeyValue,
};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;

use super::CliError;
use crate::collector::ingest::hooks::{self, log_attr, Call, HookAgent as Agent, Reduced};
use crate::collector::net::client::Target;
use crate::collector::stats::OtlpSignal;

/// Largest payload read.
const MAX_PAYLOAD: u64 = 64 << 20;

/// The longest a send may take.
const SEND_TIMEOUT: Duration = Duration::from_secs(2);

/// The endpoint when none is given: the daemon's OTLP/HTTP listener.
pub const DEFAULT_ENDPOINT: &str = "http://127.0.0.1:4318";

/// The exit code of every failure: shown to the user, never fed to the model.
pub const EXIT_HOOK_FAILED: u8 = 1;

/// Flags of `toolsize hook`.
#[derive(Debug, Clone, Args)]
pub struct HookArgs {
    /// The agent whose hook this is.
    #[arg(value_enum)]
    pub agent: HookAgent,
    /// The daemon: `http(s)://host:port` (its OTLP/HTTP listener) or `grpc(s)://host:port`
    /// (its OTLP/gRPC listener).
    #[arg(long, default_value = DEFAULT_ENDPOINT)]
    pub endpoint: String,
    /// The daemon's bearer token (`otlp.token`), if it requires one.
    #[arg(long, conflicts_with = "token_file")]
    pub token: Option<String>,
    /// A file holding the token (first line).
    #[arg(long)]
    pub token_file: Option<std::path::PathBuf>,
    /// The `service.name` the agent's telemetry uses, when not its default (`claude-code`,
    /// `qwen-code`, `gemini-cli`).
    #[arg(long)]
    pub service: Option<String>,
}

/// Agents with a hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HookAgent {
    /// Claude Code's `PostToolUse` hook.
    ClaudeCode,
    /// Qwen Code's `PostToolUse` hook.
    QwenCode,
    /// Gemini CLI's `AfterTool` hook.
    GeminiCli,
}

impl HookAgent {
    fn daemon(self) -> Agent {
        match self {
            HookAgent::ClaudeCode => Agent::ClaudeCode,
            HookAgent::QwenCode => Agent::QwenCode,
            HookAgent::GeminiCli => Agent::GeminiCli,
        }
    }
}

/// What is sent of one call.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Report {
    /// The hook event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) hook_event_name: Option<String>,
    /// The tool.
    pub(crate) tool_name: String,
    /// `tool_use_id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tool_use_id: Option<String>,
    /// `tool_call_id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tool_call_id: Option<String>,
    /// The sizes.
    pub(crate) toolsize: Reduced,
}

/// What a payload of `agent` gives the daemon, if anything: only what the daemon would keep of
/// it, so a payload that gives nothing is not sent.
pub(crate) fn report_of(agent: Agent, payload: &[u8]) -> Result<Option<Report>, String> {
    let p = hooks::parse(payload).map_err(|e| e.to_string())?;
    let Some(call) = p.call() else {
        return Ok(None);
    };
    if hooks::signal(agent, call).is_none() {
        return Ok(None);
    }
    let own = |s: Option<&str>| s.map(str::to_string);
    Ok(Some(Report {
        hook_event_name: own(p.hook_event_name.as_deref()),
        tool_name: call.tool.to_string(),
        tool_use_id: own(call.tool_use_id),
        tool_call_id: own(call.tool_call_id),
        toolsize: call.sizes,
    }))
}

impl Report {
    fn call(&self) -> Call<'_> {
        Call {
            tool: &self.tool_name,
            tool_use_id: self.tool_use_id.as_deref(),
            tool_call_id: self.tool_call_id.as_deref(),
            sizes: self.toolsize,
        }
    }
}

/// The OTLP log request carrying `report`, as `service` (the gRPC path).
pub(crate) fn request(agent: Agent, report: &Report, service: &str) -> ExportLogsServiceRequest {
    let kv = |k: &str, v: Value| KeyValue {
        key: k.into(),
        value: Some(AnyValue { value: Some(v) }),
        ..Default::default()
    };
    let s = |v: &str| Value::StringValue(v.into());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let c = report.call();
    let mut attributes = vec![
        kv("event.name", s(hooks::LOG_EVENT)),
        kv(log_attr::AGENT, s(agent.name())),
        kv("tool_name", s(c.tool)),
    ];
    let ids = [
        ("tool_use_id", c.tool_use_id),
        ("tool_call_id", c.tool_call_id),
    ];
    attributes.extend(ids.into_iter().filter_map(|(k, v)| Some(kv(k, s(v?)))));
    let ints = [
        (log_attr::PERSISTED_BYTES, c.sizes.persisted_bytes),
        (log_attr::LLM_CONTENT_UTF16, c.sizes.llm_content_utf16),
    ];
    attributes.extend(
        ints.into_iter()
            .filter_map(|(k, v)| Some(kv(k, Value::IntValue(i64::try_from(v?).ok()?)))),
    );
    if c.sizes.failed {
        attributes.push(kv(log_attr::FAILED, Value::BoolValue(true)));
    }
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(Resource {
                attributes: vec![kv("service.name", s(service))],
                ..Default::default()
            }),
            scope_logs: vec![ScopeLogs {
                scope: Some(InstrumentationScope {
                    name: hooks::LOG_SCOPE.into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                log_records: vec![LogRecord {
                    time_unix_nano: now,
                    observed_time_unix_nano: now,
                    attributes,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// How the report travels.
#[derive(Debug)]
enum Transport {
    /// `POST /v1/hooks/<agent>` on the OTLP/HTTP listener.
    Http(Target),
    /// An OTLP log record over OTLP/gRPC.
    Grpc(String),
}

fn transport(endpoint: &str, agent: Agent, service: Option<&str>) -> Result<Transport, String> {
    let scheme = endpoint.split_once("://").map(|(s, _)| s);
    match scheme {
        Some("grpc" | "grpcs") => Ok(Transport::Grpc(endpoint.to_string())),
        Some("http" | "https") => {
            let mut path = hooks::HOOKS_PATH.replace("{agent}", agent.name());
            if let Some(s) = service {
                let mut q = url_encode(s);
                q.insert_str(0, "?service=");
                path.push_str(&q);
            }
            Ok(Transport::Http(Target::parse(endpoint)?.with_path(&path)))
        }
        _ => Err(format!(
            "{}: the endpoint must start with http://, https://, grpc:// or grpcs://",
            crate::collector::net::client::redacted(endpoint)
        )),
    }
}

/// `s` percent-encoded for a query value.
fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn token(args: &HookArgs) -> Result<Option<String>, String> {
    match (&args.token, &args.token_file) {
        (Some(t), _) => Ok(Some(t.trim().to_string())),
        (None, Some(f)) => std::fs::read_to_string(f)
            .map(|t| t.lines().next().map(|l| l.trim().to_string()))
            .map_err(|e| format!("--token-file {}: {e}", f.display())),
        (None, None) => Ok(None),
    }
}

/// Reads the payload and sends what it reveals, if anything.
pub fn run(args: &HookArgs) -> ExitCode {
    let agent = args.agent.daemon();
    let fail =
        |code, m: String| CliError::new(code, m).report_with(ExitCode::from(EXIT_HOOK_FAILED));
    let mut text = Vec::new();
    if let Err(e) = std::io::stdin().take(MAX_PAYLOAD).read_to_end(&mut text) {
        return fail("HOOK_INPUT", format!("cannot read the hook payload: {e}"));
    }
    let report = match report_of(agent, &text) {
        Ok(Some(r)) => r,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => return fail("HOOK_INPUT", e),
    };
    let token = match token(args) {
        Ok(t) => t,
        Err(e) => return fail("HOOK_TOKEN", e),
    };
    let transport = match transport(&args.endpoint, agent, args.service.as_deref()) {
        Ok(t) => t,
        Err(e) => return fail("HOOK_ENDPOINT", e),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail("RUNTIME", e.to_string()),
    };
    let service = args.service.as_deref().unwrap_or(agent.name());
    let sent = runtime.block_on(async {
        let send = async {
            match &transport {
                Transport::Http(target) => {
                    let body = serde_json::to_vec(&report).map_err(|e| e.to_string())?;
                    target
                        .post("application/json", token.as_deref(), body)
                        .await
                }
                Transport::Grpc(url) => {
                    let mut headers = Vec::new();
                    if let Some(t) = &token {
                        let v = HeaderValue::from_str(&format!("Bearer {t}"))
                            .map_err(|_| "the token is not a valid header value".to_string())?;
                        headers.push((HeaderName::from_static("authorization"), v));
                    }
                    let body = request(agent, &report, service).encode_to_vec();
                    crate::collector::forward::export_once(
                        url,
                        headers,
                        OtlpSignal::Logs,
                        body.into(),
                    )
                    .await
                }
            }
        };
        tokio::time::timeout(SEND_TIMEOUT, send).await
    });
    let shown = crate::collector::net::client::redacted(&args.endpoint);
    match sent {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => fail("HOOK_EXPORT", format!("{shown}: {e}")),
        Err(_) => fail(
            "HOOK_EXPORT",
            format!("{shown}: no answer within {SEND_TIMEOUT:?}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_persisted_output_is_reported_by_size_and_a_whole_one_is_not() {
        let persisted = br#"{"hook_event_name":"PostToolUse","tool_name":"Bash",
            "tool_use_id":"toolu_1","tool_input":{"command":"seq 1 20000"},
            "tool_response":{"stdout":"1\n2\n","persistedOutputPath":"/x/y.txt",
            "persistedOutputSize":108894}}"#;
        let r = report_of(Agent::ClaudeCode, persisted).unwrap().unwrap();
        assert_eq!(r.toolsize.persisted_bytes, Some(108_894));
        let sent = serde_json::to_string(&r).unwrap();
        for secret in ["/x/y.txt", "seq 1 20000", "1\\n2"] {
            assert!(!sent.contains(secret), "{secret} is sent: {sent}");
        }
        let req = format!("{:?}", request(Agent::ClaudeCode, &r, "claude-code"));
        assert!(!req.contains("/x/y.txt"), "the path is not exported");
        let whole =
            br#"{"tool_name":"Bash","tool_use_id":"toolu_2","tool_response":{"stdout":"small\n"}}"#;
        assert_eq!(report_of(Agent::ClaudeCode, whole).unwrap(), None);
        assert!(report_of(Agent::ClaudeCode, b"not json").is_err());
    }

    #[test]
    fn the_endpoint_names_the_transport() {
        let t = transport("http://127.0.0.1:4318", Agent::QwenCode, Some("my qwen")).unwrap();
        let Transport::Http(t) = t else {
            panic!("http expected")
        };
        assert_eq!(t.path, "/v1/hooks/qwen-code?service=my%20qwen");
        assert!(matches!(
            transport("grpc://127.0.0.1:4317", Agent::ClaudeCode, None).unwrap(),
            Transport::Grpc(_)
        ));
        assert!(transport("127.0.0.1:4318", Agent::ClaudeCode, None).is_err());
    }
}
