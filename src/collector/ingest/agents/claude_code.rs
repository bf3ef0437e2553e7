//! Claude Code (and the Claude Agent SDK, which runs it): logs under
//! `com.anthropic.claude_code.events`, beta spans under `com.anthropic.claude_code.tracing`.
//!
//! - Log `tool_result` (always, with `CLAUDE_CODE_ENABLE_TELEMETRY=1` and
//!   `OTEL_LOGS_EXPORTER=otlp`): the primary signal. `tool_result_size_bytes` (a string) is the
//!   length of what the model got **in UTF-16 code units** (2.1.331: 3,144 for a Read result of
//!   3,694 UTF-8 bytes); absent when the call failed (`success` = `"false"`). User MCP tools are
//!   all named `mcp_tool` unless `OTEL_LOG_TOOL_DETAILS=1` adds `tool_parameters` with the server
//!   and tool names: then the series is `mcp__<server>__<tool>`, Claude Code's own name for it.
//! - Span `claude_code.tool` (`CLAUDE_CODE_ENHANCED_TELEMETRY_BETA=1`): secondary, it counts the
//!   call when logs are off; it carries no size.
//! - Span `claude_code.tool.execution`: a part; its `success = false` (or an error status) marks
//!   the call failed. `claude_code.tool.blocked_on_user`, `claude_code.interaction` and
//!   `claude_code.llm_request` are not tools.
//!
//! - Its `PostToolUse` hook payload, posted to `/v1/hooks/claude-code` (an HTTP hook, or
//!   `toolsize hook claude-code`; see [`crate::collector::ingest::hooks`]), or sent by
//!   `toolsize hook claude-code` over OTLP/gRPC as a log record `toolsize.hook.post_tool_use`
//!   (scope `toolsize.hook.claude_code`): a part; Claude Code persisted the output and gave the
//!   model a 2 KB preview, so the call is counted as cut upstream ([`persist_layer`]) with the
//!   original size.
//!
//! All are joined on `tool_use_id` (= `gen_ai.tool.call.id`).

use super::{bool_value, size_value, Agent, AgentStack, Attrs, CallId, Signal, SpanVerdict, Tools};
use crate::collector::ingest::recognize::{int_of, str_of};
use crate::collector::ingest::record::{Emitter, Role};
use crate::collector::ingest::wire::{AttrValue, LogView, SpanView};

/// The entry.
pub(crate) const AGENT: Agent = Agent {
    owns: |scope| scope.starts_with("com.anthropic.claude_code") || scope == HOOK_SCOPE,
    stack: AgentStack {
        name: "claude-code",
        services: &["claude-code"],
        layers: &[
            // Read manages its own size (tokens, lines): a Read is never persisted.
            ("claude-code.tool-result.persist", Tools::Except(&["Read"])),
            ("claude-code.bash", Tools::Only(&["Bash"])),
            ("claude-code.grep", Tools::Only(&["Grep"])),
            ("claude-code.read.tokens", Tools::Only(&["Read"])),
            ("claude-code.read.lines", Tools::Only(&["Read"])),
            ("claude-code.mcp.max", Tools::Only(&["mcp__*", MCP_TOOL])),
        ],
    },
    span,
    log,
};

/// The scope of the records `toolsize hook claude-code` exports.
pub(crate) const HOOK_SCOPE: &str = "toolsize.hook.claude_code";

/// The `event.name` of those records.
pub(crate) const HOOK_EVENT: &str = "toolsize.hook.post_tool_use";

/// The name Claude Code gives every user MCP tool in its telemetry without
/// `OTEL_LOG_TOOL_DETAILS=1`.
pub(crate) const MCP_TOOL: &str = "mcp_tool";

fn call_id<'a>(a: Attrs<'_, 'a>) -> Option<&'a str> {
    a.str("tool_use_id")
        .or_else(|| a.str("gen_ai.tool.call.id"))
        .filter(|s| !s.is_empty())
}

fn span<'a>(s: &SpanView<'a>, out: &mut Vec<Signal<'a>>) -> SpanVerdict {
    let a = Attrs(&s.attrs);
    let role = match s.name {
        b"claude_code.tool" => Role::Secondary,
        b"claude_code.tool.execution" => Role::Part,
        _ => return SpanVerdict::NotTool,
    };
    let Some(id) = call_id(a) else {
        return SpanVerdict::NotTool;
    };
    let mut sig = Signal::new(Emitter::ClaudeCode, role, CallId::Id(id));
    sig.tool = a.str("tool_name").or_else(|| a.str("gen_ai.tool.name"));
    sig.latency_ms = a.int("duration_ms");
    sig.failed = s.status_code == 2 || a.bool("success") == Some(false);
    out.push(sig);
    SpanVerdict::Signals
}

fn log<'a>(l: &LogView<'a>, out: &mut Vec<Signal<'a>>) {
    match super::event_name(l) {
        HOOK_EVENT => crate::collector::ingest::hooks::log_signal(l, out),
        "tool_result" => tool_result(l, out),
        _ => {}
    }
}

/// The attributes of a `tool_result` record that are read, each the first of its key (as
/// [`Attrs::get`] finds it).
#[derive(Default)]
struct ToolResult<'a> {
    tool_use_id: Option<AttrValue<'a>>,
    call_id: Option<AttrValue<'a>>,
    tool_name: Option<AttrValue<'a>>,
    success: Option<AttrValue<'a>>,
    size: Option<AttrValue<'a>>,
    duration_ms: Option<AttrValue<'a>>,
    tool_input: Option<AttrValue<'a>>,
    tool_parameters: Option<AttrValue<'a>>,
}

impl<'a> ToolResult<'a> {
    /// Reads the attributes once, each compared with the keys of its length: Claude Code sends
    /// a dozen per record, and looked up one key at a time they were read eight times over.
    fn read(a: Attrs<'_, 'a>) -> Self {
        let mut t = Self::default();
        for (k, v) in a.0 {
            let slot = match *k {
                b"tool_use_id" => &mut t.tool_use_id,
                b"gen_ai.tool.call.id" => &mut t.call_id,
                b"tool_name" => &mut t.tool_name,
                b"success" => &mut t.success,
                b"tool_result_size_bytes" => &mut t.size,
                b"duration_ms" => &mut t.duration_ms,
                b"tool_input" => &mut t.tool_input,
                b"tool_parameters" => &mut t.tool_parameters,
                _ => continue,
            };
            slot.get_or_insert(*v);
        }
        t
    }
}

/// The primary signal of a `tool_result` record.
fn tool_result<'a>(l: &LogView<'a>, out: &mut Vec<Signal<'a>>) {
    let t = ToolResult::read(Attrs(&l.attrs));
    let Some(id) = str_of(t.tool_use_id)
        .or_else(|| str_of(t.call_id))
        .filter(|s| !s.is_empty())
    else {
        return;
    };
    let mut sig = Signal::new(Emitter::ClaudeCode, Role::Primary, CallId::Id(id));
    sig.tool = str_of(t.tool_name);
    sig.failed = bool_value(t.success) == Some(false);
    (sig.size, sig.absurd_size) = size_value(t.size);
    sig.utf16 = true;
    sig.latency_ms = int_of(t.duration_ms);
    sig.args = t.tool_input;
    sig.mcp_details = str_of(t.tool_parameters);
    out.push(sig);
}

/// The layer that persisted `tool`'s output and gave the model a preview: Bash's own
/// (`bashOutputMaxChars`, default 30,000 characters), Grep's (20,000), else the 50,000-character
/// limit of every other tool.
pub(crate) fn persist_layer(tool: &str) -> &'static str {
    match tool {
        "Bash" => "claude-code.bash",
        "Grep" => "claude-code.grep",
        _ => "claude-code.tool-result.persist",
    }
}

/// The series name of a user MCP tool from `tool_parameters` (with `OTEL_LOG_TOOL_DETAILS=1`):
/// `mcp__<server>__<tool>`, or `None` when the details are not there.
pub(crate) fn mcp_name(tool_parameters: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(tool_parameters).ok()?;
    let server = v.get("mcp_server_name")?.as_str()?;
    let tool = v.get("mcp_tool_name")?.as_str()?;
    Some(format!("mcp__{server}__{tool}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::ingest::wire::AttrValue;

    #[test]
    fn mcp_tools_are_named_by_server_and_tool_when_the_details_are_on() {
        assert_eq!(
            mcp_name(r#"{"mcp_server_name":"github","mcp_tool_name":"search_code"}"#).as_deref(),
            Some("mcp__github__search_code")
        );
        assert_eq!(mcp_name(r#"{"bash_command":"seq"}"#), None);
        assert_eq!(mcp_name("not json"), None);
    }

    #[test]
    fn the_execution_child_is_a_part_and_other_spans_are_not_tools() {
        let mut s = SpanView {
            name: b"claude_code.tool.execution",
            ..SpanView::default()
        };
        s.attrs.push((b"tool_use_id", AttrValue::Str(b"toolu_1")));
        s.attrs.push((b"success", AttrValue::Bool(false)));
        let mut out = Vec::new();
        assert_eq!(span(&s, &mut out), SpanVerdict::Signals);
        assert_eq!(out[0].role, Role::Part);
        assert!(out[0].failed);
        for name in [
            "claude_code.tool.blocked_on_user",
            "claude_code.interaction",
            "claude_code.llm_request",
        ] {
            s.name = name.as_bytes();
            assert_eq!(span(&s, &mut Vec::new()), SpanVerdict::NotTool, "{name}");
        }
    }
}
