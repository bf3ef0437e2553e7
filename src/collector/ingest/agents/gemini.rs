//! Gemini CLI, and Qwen Code (a fork emitting the same events under its own prefix): everything
//! under the scope `gemini-cli` (`qwen-code`).
//!
//! - Log `gemini_cli.tool_call`: the primary signal. `content_length` is the length of what the
//!   model got **in UTF-16 code units** (0.61.0: 3,000 for a file of 3,550 UTF-8 bytes).
//!   `success` is true for a shell command that exits non-zero; with `logPrompts` on, `metadata`
//!   says `"isError": true` and the call is counted failed.
//! - Log `gemini_cli.tool_output_truncated`: a part. Gemini CLI cut the result at `threshold`
//!   (min(40,000, 4 × the context tokens left)) and saved the whole output to a file; the call
//!   is counted as cut upstream by `gemini-cli.tool-output`, with `original_content_length`, and
//!   held to that `threshold` as the limit that applied.
//! - Span `tool_call` (`gen_ai.operation.name = tool_call`): secondary, it counts the call when
//!   logs are off. `schedule_tool_calls`, `llm_call` and the rest are not tools.
//!
//! The log records carry no call id. Gemini CLI starts one trace per batch of tool calls, and
//! every signal of a call is in that trace: they are joined on (trace id, tool name), or
//! (`prompt_id`, tool name) for a record outside a trace.
//!
//! Qwen Code (0.24.4) differs: its `qwen-code.tool_call` record and its `qwen-code.tool` span
//! carry `call_id`, which they are joined on (with its `PostToolUse` hook's `tool_call_id`);
//! its trace spans the whole session. Its truncation notice has no call id and `prompt_id: ""`:
//! it names its call by (trace, tool, `truncated_content_length`), which is the call's
//! `content_length`, the call's second join key. Its shell cuts at 30,000 characters less what it
//! appends (the notice's `threshold`), layer `qwen-code.shell`.

use super::{Agent, AgentStack, Attrs, CallId, Signal, SpanVerdict, Tools};
use crate::collector::ingest::record::{Emitter, Role, Upstream};
use crate::collector::ingest::wire::{LogView, SpanView};

/// Gemini CLI's entry.
pub(crate) const GEMINI: Agent = Agent {
    owns: |scope| scope == "gemini-cli",
    // Its output cut applies to shell output and MCP results; `read_file` cuts by lines.
    stack: AgentStack {
        name: "gemini-cli",
        services: &["gemini-cli"],
        layers: &[
            (
                "gemini-cli.tool-output",
                Tools::Except(&["read_file", "read_many_files"]),
            ),
            ("gemini-cli.read-file.lines", Tools::Only(&["read_file"])),
        ],
    },
    span: |s, out| span(&GEMINI_EVENTS, s, out),
    log: |l, out| log(&GEMINI_EVENTS, l, out),
};

/// Qwen Code's entry (its events follow Gemini CLI's, with a call id).
pub(crate) const QWEN: Agent = Agent {
    owns: |scope| scope == "qwen-code",
    // 0.24.4: the shell cuts its own output (30,000 characters, lines unlimited); tools without
    // a limit of their own are cut at 25,000 characters and 1,000 lines after the hooks ran;
    // a result still over 28,000 characters is replaced by a stub, except for the tools below.
    stack: AgentStack {
        name: "qwen-code",
        services: &["qwen-code"],
        layers: &[
            (QWEN_SHELL_LAYER, Tools::Only(&[QWEN_SHELL])),
            (QWEN_LAYER, Tools::Except(QWEN_OWN_LIMIT)),
            ("qwen-code.tool-output.lines", Tools::Except(QWEN_OWN_LIMIT)),
            ("qwen-code.persist", Tools::Except(QWEN_GATE_EXEMPT)),
        ],
    },
    span: |s, out| span(&QWEN_EVENTS, s, out),
    log: |l, out| log(&QWEN_EVENTS, l, out),
};

/// Qwen Code's shell tool.
const QWEN_SHELL: &str = "run_shell_command";

/// The layer of its shell's own cut.
const QWEN_SHELL_LAYER: &str = "qwen-code.shell";

/// The layer of its cut of other tools' output.
const QWEN_LAYER: &str = "qwen-code.tool-output";

/// Qwen Code's tools with an output limit of their own (`maxOutputChars`), or none.
const QWEN_OWN_LIMIT: &[&str] = &[QWEN_SHELL, "read_file", "agent", "exec"];

/// Qwen Code's tools its persist gate lets through (`GATE_EXEMPT_TOOLS`, and the shell, whose
/// output is bounded already).
const QWEN_GATE_EXEMPT: &[&str] = &[
    "exec",
    "read_file",
    "read_mcp_resource",
    "enter_plan_mode",
    QWEN_SHELL,
];

/// The layer that cut a Qwen Code result longer than what the model got.
pub(crate) fn qwen_cut_layer(tool: &str) -> &'static str {
    if tool == QWEN_SHELL {
        QWEN_SHELL_LAYER
    } else {
        QWEN_LAYER
    }
}

/// The names one of the two agents uses.
struct Events {
    emitter: Emitter,
    tool_call: &'static str,
    truncated: &'static str,
    /// The layer a truncation notice names, by tool.
    layer: fn(&str) -> &'static str,
    /// The span of one call, beside `tool_call` spans (Qwen Code's `qwen-code.tool`).
    tool_span: Option<&'static str>,
    /// Its records carry a `call_id` (Qwen Code).
    by_call_id: bool,
}

const GEMINI_EVENTS: Events = Events {
    emitter: Emitter::GeminiCli,
    tool_call: "gemini_cli.tool_call",
    truncated: "gemini_cli.tool_output_truncated",
    layer: |_| "gemini-cli.tool-output",
    tool_span: None,
    by_call_id: false,
};

const QWEN_EVENTS: Events = Events {
    emitter: Emitter::QwenCode,
    tool_call: "qwen-code.tool_call",
    truncated: "qwen-code.tool_output_truncated",
    layer: qwen_cut_layer,
    tool_span: Some("qwen-code.tool"),
    by_call_id: true,
};

/// What groups a record with others: its trace, else its prompt id (`""` when neither).
fn group<'a>(trace_id: &'a [u8], a: Attrs<'_, 'a>) -> &'a [u8] {
    match trace_id {
        t if !t.is_empty() && t.iter().any(|b| *b != 0) => t,
        _ => a.str("prompt_id").unwrap_or_default().as_bytes(),
    }
}

/// The call of a record: its call id (Qwen Code), else its trace, else its prompt, with the
/// tool's name.
fn call<'a>(
    ev: &Events,
    trace_id: &'a [u8],
    a: Attrs<'_, 'a>,
    tool: &'a str,
) -> Option<CallId<'a>> {
    if let Some(id) = a
        .str("call_id")
        .filter(|id| ev.by_call_id && !id.is_empty())
    {
        return Some(CallId::Id(id));
    }
    let group = match trace_id {
        t if !t.is_empty() && t.iter().any(|b| *b != 0) => t,
        _ => a.str("prompt_id").filter(|p| !p.is_empty())?.as_bytes(),
    };
    Some(CallId::Grouped(group, tool))
}

fn span<'a>(ev: &Events, s: &SpanView<'a>, out: &mut Vec<Signal<'a>>) -> SpanVerdict {
    let a = Attrs(&s.attrs);
    let own = ev.tool_span.is_some_and(|n| n.as_bytes() == s.name);
    if !own && s.name != b"tool_call" && a.str("gen_ai.operation.name") != Some("tool_call") {
        return SpanVerdict::NotTool;
    }
    let Some(tool) = a
        .str("gen_ai.tool.name")
        .or_else(|| a.str("tool_name"))
        .filter(|t| !t.is_empty())
    else {
        return SpanVerdict::NotTool;
    };
    let Some(id) = call(ev, s.trace_id, a, tool) else {
        return SpanVerdict::NotTool;
    };
    let mut sig = Signal::new(ev.emitter, Role::Secondary, id);
    sig.tool = Some(tool);
    sig.failed = s.status_code == 2;
    out.push(sig);
    SpanVerdict::Signals
}

fn log<'a>(ev: &Events, l: &LogView<'a>, out: &mut Vec<Signal<'a>>) {
    let a = Attrs(&l.attrs);
    let name = super::event_name(l);
    if name == ev.tool_call {
        let Some(tool) = a.str("function_name").filter(|t| !t.is_empty()) else {
            return;
        };
        let Some(id) = call(ev, l.trace_id, a, tool) else {
            return;
        };
        let mut sig = Signal::new(ev.emitter, Role::Primary, id);
        sig.tool = Some(tool);
        (sig.size, sig.absurd_size) = a.size("content_length");
        sig.utf16 = true;
        sig.latency_ms = a.int("duration_ms");
        sig.failed = a.bool("success") == Some(false) || a.str("metadata").is_some_and(is_error);
        sig.args = a.get("function_args");
        if ev.by_call_id {
            // Qwen Code's truncation notice carries no call id: it names the call by the
            // length it cut the result to, the call's `content_length`.
            sig.alt = sig
                .size
                .map(|n| CallId::Sized(group(l.trace_id, a), tool, n));
        }
        out.push(sig);
    } else if name == ev.truncated {
        let Some(tool) = a.str("tool_name").filter(|t| !t.is_empty()) else {
            return;
        };
        let id = match a.int("truncated_content_length") {
            Some(n) if ev.by_call_id => CallId::Sized(group(l.trace_id, a), tool, n),
            _ => match call(ev, l.trace_id, a, tool) {
                Some(id) => id,
                None => return,
            },
        };
        let mut sig = Signal::new(ev.emitter, Role::Part, id);
        sig.tool = Some(tool);
        sig.upstream = Upstream {
            layer: Some((ev.layer)(tool)),
            original: a.int("original_content_length"),
            // The limit that applied to this call (Gemini CLI: min(40,000, 4 × the context
            // tokens left); Qwen Code: its shell's budget less the metadata).
            limit: a.int("threshold"),
            ..Upstream::default()
        };
        out.push(sig);
    }
}

/// Whether a tool call's `metadata` says it failed (`{"exitCode": 1, "isError": true}`).
fn is_error(metadata: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(metadata)
        .ok()
        .and_then(|v| v.get("isError")?.as_bool())
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::ingest::wire::AttrValue;

    #[test]
    fn a_shell_command_that_failed_is_read_from_the_metadata() {
        assert!(is_error(r#"{"exitCode": 1, "isError": true}"#));
        assert!(!is_error(r#"{"exitCode": 0}"#));
        assert!(!is_error("{"));
    }

    /// Qwen Code 0.24.4's records of `seq 1 20000`: the truncation notice (no call id,
    /// `prompt_id: ""`, the session's trace) first, then the call's record.
    #[test]
    fn qwen_codes_notice_names_its_call_by_the_length_it_cut_to() {
        let trace = [9u8; 16];
        let mut cut = LogView {
            trace_id: &trace,
            ..LogView::default()
        };
        for (k, v) in [
            ("event.name", "qwen-code.tool_output_truncated"),
            ("tool_name", "run_shell_command"),
            ("original_content_length", "109009"),
            ("truncated_content_length", "4483"),
            ("threshold", "30000"),
            ("prompt_id", ""),
        ] {
            cut.attrs.push((k.as_bytes(), AttrValue::Str(v.as_bytes())));
        }
        let mut call_log = LogView {
            trace_id: &trace,
            ..LogView::default()
        };
        for (k, v) in [
            ("event.name", "qwen-code.tool_call"),
            ("function_name", "run_shell_command"),
            ("call_id", "call_00d9db2b3cdd034508845c"),
            ("content_length", "4483"),
            ("status", "success"),
        ] {
            call_log
                .attrs
                .push((k.as_bytes(), AttrValue::Str(v.as_bytes())));
        }
        call_log.attrs.push((b"success", AttrValue::Bool(true)));
        let mut out = Vec::new();
        log(&QWEN_EVENTS, &cut, &mut out);
        log(&QWEN_EVENTS, &call_log, &mut out);
        assert_eq!(out.len(), 2);
        let (notice, call) = (&out[0], &out[1]);
        assert_eq!(notice.upstream.layer, Some("qwen-code.shell"));
        assert_eq!(notice.upstream.limit, Some(30_000));
        assert_eq!(notice.upstream.original, Some(109_009));
        assert!(matches!(
            call.call,
            CallId::Id("call_00d9db2b3cdd034508845c")
        ));
        let (CallId::Sized(g0, t0, n0), Some(CallId::Sized(g1, t1, n1))) = (notice.call, call.alt)
        else {
            panic!("sized keys expected");
        };
        assert_eq!((g0, t0, n0), (g1, t1, n1));
    }

    #[test]
    fn the_truncation_notice_joins_the_call_by_trace_and_tool() {
        let mut call_log = LogView {
            trace_id: &[7; 16],
            ..LogView::default()
        };
        call_log
            .attrs
            .push((b"event.name", AttrValue::Str(b"gemini_cli.tool_call")));
        call_log
            .attrs
            .push((b"function_name", AttrValue::Str(b"run_shell_command")));
        call_log
            .attrs
            .push((b"content_length", AttrValue::Int(40_302)));
        let mut cut = LogView {
            trace_id: &[7; 16],
            ..LogView::default()
        };
        cut.attrs.push((
            b"event.name",
            AttrValue::Str(b"gemini_cli.tool_output_truncated"),
        ));
        cut.attrs
            .push((b"tool_name", AttrValue::Str(b"run_shell_command")));
        cut.attrs
            .push((b"original_content_length", AttrValue::Int(108_967)));
        let mut out = Vec::new();
        log(&GEMINI_EVENTS, &call_log, &mut out);
        log(&GEMINI_EVENTS, &cut, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].role, out[0].size), (Role::Primary, Some(40_302)));
        assert_eq!(out[1].role, Role::Part);
        assert_eq!(out[1].upstream.original, Some(108_967));
        let (CallId::Grouped(g0, t0), CallId::Grouped(g1, t1)) = (out[0].call, out[1].call) else {
            panic!("grouped calls expected");
        };
        assert_eq!((g0, t0), (g1, t1));
    }
}
