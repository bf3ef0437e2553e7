//! `toolsize hook claude-code`: a Claude Code `PostToolUse` hook that tells the daemon about the
//! cut Claude Code's own telemetry does not show.
//!
//! Claude Code replaces a large tool output with a `<persisted-output>` preview of about 2 KB
//! and saves the whole output to a file; its `tool_result` log record then reports the
//! preview's size, with nothing saying it was cut. The hook payload does say it
//! (`tool_response.persistedOutputSize`, the whole output's bytes). Run as the hook, this command
//! reads the payload on standard input and, when the result was persisted, exports one OTLP log
//! record (`event.name = toolsize.hook.post_tool_use`) to `OTEL_EXPORTER_OTLP_ENDPOINT`
//! (`http://`, default `http://127.0.0.1:4318`): the call's `tool_use_id`, its tool name, the
//! original size and the layer (`claude-code.bash` for Bash, else
//! `claude-code.tool-result.persist`). The daemon joins it to the call's `tool_result` record,
//! which is then counted as cut upstream with its original size. Nothing of the output, the
//! input or the paths is exported: sizes, ids and names only.
//!
//! A hook must never get in the agent's way: the payload is read up to 64 MiB, the export takes
//! at most two seconds, and a failure prints a structured error on standard error and exits 1,
//! which Claude Code shows to the user without blocking the model (exit 2 would feed the error
//! to the model). Results that were not cut export nothing.

use std::io::Read;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    any_value::Value, AnyValue, InstrumentationScope, KeyValue,
};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;

use super::CliError;
use crate::collector::ingest::agents::claude_code::{HOOK_EVENT, HOOK_SCOPE};
use crate::collector::net::client::Target;

/// Largest payload read.
const MAX_PAYLOAD: u64 = 64 << 20;

/// Flags of `toolsize hook`.
#[derive(Debug, Clone, Args)]
pub struct HookArgs {
    /// The agent whose hook this is.
    #[arg(value_enum)]
    pub agent: HookAgent,
}

/// Agents with a hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HookAgent {
    /// Claude Code's `PostToolUse` hook.
    ClaudeCode,
}

/// What a payload says of a cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cut {
    /// The call.
    pub(crate) tool_use_id: String,
    /// The tool.
    pub(crate) tool_name: String,
    /// Bytes of the whole output.
    pub(crate) original: u64,
    /// The catalog layer that cut it.
    pub(crate) layer: &'static str,
}

/// The cut a `PostToolUse` payload shows, if any.
pub(crate) fn cut_of(payload: &serde_json::Value) -> Option<Cut> {
    let response = payload.get("tool_response")?;
    let original = response.get("persistedOutputSize")?.as_u64()?;
    let tool_name = payload.get("tool_name")?.as_str()?.to_string();
    let layer = match tool_name.as_str() {
        "Bash" => "claude-code.bash",
        _ => "claude-code.tool-result.persist",
    };
    Some(Cut {
        tool_use_id: payload.get("tool_use_id")?.as_str()?.to_string(),
        tool_name,
        original,
        layer,
    })
}

/// The OTLP request carrying `cut`, as Claude Code's service.
pub(crate) fn request(cut: &Cut, service: &str) -> ExportLogsServiceRequest {
    let kv = |k: &str, v: Value| KeyValue {
        key: k.into(),
        value: Some(AnyValue { value: Some(v) }),
        ..Default::default()
    };
    let s = |v: &str| Value::StringValue(v.into());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(Resource {
                attributes: vec![kv("service.name", s(service))],
                ..Default::default()
            }),
            scope_logs: vec![ScopeLogs {
                scope: Some(InstrumentationScope {
                    name: HOOK_SCOPE.into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                log_records: vec![LogRecord {
                    time_unix_nano: now,
                    observed_time_unix_nano: now,
                    attributes: vec![
                        kv("event.name", s(HOOK_EVENT)),
                        kv("tool_use_id", s(&cut.tool_use_id)),
                        kv("tool_name", s(&cut.tool_name)),
                        kv(
                            "tool.result.original_bytes",
                            Value::IntValue(cut.original as i64),
                        ),
                        kv("toolsize.layer", s(cut.layer)),
                    ],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// Reads the payload, exports the cut it shows, if any.
pub fn run(args: &HookArgs) -> ExitCode {
    let HookAgent::ClaudeCode = args.agent;
    let fail = |code, m: String| CliError::new(code, m).report_with(ExitCode::from(1));
    let mut text = Vec::new();
    if let Err(e) = std::io::stdin().take(MAX_PAYLOAD).read_to_end(&mut text) {
        return fail("HOOK_INPUT", format!("cannot read the hook payload: {e}"));
    }
    let payload: serde_json::Value = match serde_json::from_slice(&text) {
        Ok(v) => v,
        Err(e) => return fail("HOOK_INPUT", format!("the hook payload is not JSON: {e}")),
    };
    let Some(cut) = cut_of(&payload) else {
        return ExitCode::SUCCESS;
    };
    let endpoint = std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT")
        .unwrap_or_else(|_| "http://127.0.0.1:4318".into());
    let target = match Target::parse(&endpoint) {
        Ok(t) => t.with_path("/v1/logs"),
        Err(e) => return fail("HOOK_ENDPOINT", format!("OTEL_EXPORTER_OTLP_ENDPOINT: {e}")),
    };
    let service = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| "claude-code".into());
    let body = request(&cut, &service).encode_to_vec();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail("RUNTIME", e.to_string()),
    };
    let sent = runtime.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(2),
            target.post("application/x-protobuf", None, body),
        )
        .await
    });
    match sent {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => fail("HOOK_EXPORT", format!("{endpoint}: {e}")),
        Err(_) => fail("HOOK_EXPORT", format!("{endpoint}: no answer within 2 s")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_persisted_output_is_a_cut_and_a_whole_one_is_not() {
        let persisted = serde_json::json!({
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_use_id": "toolu_1",
            "tool_response": {"stdout": "1\n2\n", "persistedOutputPath": "/x", "persistedOutputSize": 108894}
        });
        assert_eq!(
            cut_of(&persisted),
            Some(Cut {
                tool_use_id: "toolu_1".into(),
                tool_name: "Bash".into(),
                original: 108_894,
                layer: "claude-code.bash",
            })
        );
        let whole = serde_json::json!({
            "tool_name": "Bash", "tool_use_id": "toolu_2", "tool_response": {"stdout": "small\n"}
        });
        assert_eq!(cut_of(&whole), None);
        let req = request(&cut_of(&persisted).unwrap(), "claude-code");
        let text = format!("{req:?}");
        assert!(!text.contains("/x"), "the path is not exported");
    }
}
