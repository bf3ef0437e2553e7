//! opencode (1.18.33): spans under the scope `opencode`, with `"experimental": {"openTelemetry":
//! true}` in its `opencode.json` (without it, only its own `Tool.execute` spans).
//!
//! - Span `ai.toolCall` (the AI SDK's): the primary signal. `ai.toolCall.result` is the JSON of
//!   the whole result object, `{"title", "metadata": {"output": <a preview of up to 30,005
//!   characters>, "exit", "truncated", "outputPath"}, "output"}`: the model got `output`, so the
//!   call is sized as the UTF-8 bytes of `output`, never as the JSON around it (49,318 bytes for
//!   `seq 1 20000`, where the model got 12,124). `metadata.exit` other than 0 is a failure.
//!   `metadata.truncated` (or the `...output truncated...` marker that starts `output`) is
//!   opencode's own cut: its 2,000-line limit (it keeps the last lines of a command's output),
//!   or its 51,200-byte limit when what is left is that large. The size before the cut is not
//!   exported (only the file it was saved to), so the size is a lower bound.
//! - Span `Tool.execute` (opencode's own, always): secondary; it counts the call when the AI SDK
//!   span is missing (opencode exits before exporting the last spans of a session).
//! - Its other spans (`ToolRegistry.*`, `ShellTool.*`, `SessionProcessor.*`, `sql.execute`, …)
//!   are not tools.
//!
//! Joined on the call id (`ai.toolCall.id` = `tool.call_id`). The result's JSON is parsed once,
//! lengths counted, nothing of it kept.

use std::borrow::Cow;

use serde::Deserialize;

use super::{Agent, AgentStack, Attrs, CallId, Signal, SpanVerdict, Tools};
use crate::collector::ingest::record::{Emitter, Role, Upstream};
use crate::collector::ingest::wire::{LogView, SpanView};

/// The entry.
pub(crate) const AGENT: Agent = Agent {
    owns: |scope| scope == "opencode",
    stack: AgentStack {
        name: "opencode",
        services: &["opencode"],
        layers: &[(BYTES_LAYER, Tools::All), (LINES_LAYER, Tools::All)],
    },
    span,
    log,
};

/// Its byte limit (51,200 bytes).
const BYTES_LAYER: &str = "opencode.tool-output.bytes";

/// Its line limit (2,000 lines).
const LINES_LAYER: &str = "opencode.tool-output.lines";

/// What is left of an output cut by bytes: at least this much (its byte limit, less the marker
/// and the saved file's path).
const CUT_BY_BYTES_AT: u64 = 50_000;

/// The marker that starts an output opencode cut.
pub(crate) const MARKER: &str = "...output truncated...";

/// The parts of `ai.toolCall.result` that are read.
#[derive(Debug, Default, Deserialize)]
struct ToolResult<'a> {
    #[serde(borrow, default)]
    output: Option<Cow<'a, str>>,
    #[serde(default)]
    metadata: Metadata,
}

#[derive(Debug, Default, Deserialize)]
struct Metadata {
    #[serde(default)]
    exit: Option<i64>,
    #[serde(default)]
    truncated: Option<bool>,
}

/// What an `ai.toolCall.result` says of the call: (UTF-8 bytes of what the model got, failed,
/// cut by opencode and by which layer).
pub(crate) fn read_result(json: &str) -> Option<(u64, bool, Option<&'static str>)> {
    let r: ToolResult<'_> = serde_json::from_str(json).ok()?;
    let output = r.output?;
    let bytes = output.len() as u64;
    let failed = r.metadata.exit.is_some_and(|c| c != 0);
    let cut = r.metadata.truncated == Some(true) || output.starts_with(MARKER);
    let layer = cut.then_some(if bytes >= CUT_BY_BYTES_AT {
        BYTES_LAYER
    } else {
        LINES_LAYER
    });
    Some((bytes, failed, layer))
}

fn span<'a>(s: &SpanView<'a>, out: &mut Vec<Signal<'a>>) -> SpanVerdict {
    let a = Attrs(&s.attrs);
    let (role, id, tool) = match s.name {
        b"ai.toolCall" => (
            Role::Primary,
            a.str("ai.toolCall.id"),
            a.str("ai.toolCall.name"),
        ),
        b"Tool.execute" => (Role::Secondary, a.str("tool.call_id"), a.str("tool.name")),
        _ => return SpanVerdict::NotTool,
    };
    let Some(id) = id.filter(|id| !id.is_empty()) else {
        return SpanVerdict::NotTool;
    };
    let mut sig = Signal::new(Emitter::Opencode, role, CallId::Id(id));
    sig.tool = tool;
    sig.failed = s.status_code == 2;
    if role == Role::Primary {
        sig.args = a.get("ai.toolCall.args");
        if let Some((bytes, failed, layer)) = a.str("ai.toolCall.result").and_then(read_result) {
            sig.size = Some(bytes);
            sig.failed |= failed;
            sig.upstream = Upstream {
                layer,
                ..Upstream::default()
            };
        }
    }
    out.push(sig);
    SpanVerdict::Signals
}

/// opencode exports no log records of its tool calls.
fn log(_: &LogView<'_>, _: &mut Vec<Signal<'_>>) {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::ingest::wire::AttrValue;

    #[test]
    fn the_model_got_output_not_the_json_around_it() {
        // opencode 1.18.33's result of `seq 1 20000` (shortened), of `echo small`, of a failed
        // `cat`.
        let cut = r#"{"title":"seq 1 20000","metadata":{"output":"...\n\n15001\n","exit":0,"truncated":true,"outputPath":"/h/tool_1"},"output":"...output truncated...\n\nFull output saved to: /h/tool_1\n\n18002\n"}"#;
        let (bytes, failed, layer) = read_result(cut).unwrap();
        assert_eq!(bytes, 63);
        assert!(!failed);
        assert_eq!(layer, Some(LINES_LAYER));
        let small = r#"{"title":"echo small","metadata":{"output":"small\n","exit":0,"truncated":false},"output":"small\n"}"#;
        assert_eq!(read_result(small), Some((6, false, None)));
        let fail = r#"{"title":"cat /nonexistent","metadata":{"output":"cat: x\n","exit":1,"truncated":false},"output":"cat: x\n"}"#;
        assert_eq!(read_result(fail), Some((7, true, None)));
        assert_eq!(read_result("not json"), None);
    }

    #[test]
    fn ai_tool_call_is_primary_tool_execute_secondary_and_the_rest_not_tools() {
        let mut s = SpanView {
            name: b"ai.toolCall",
            ..SpanView::default()
        };
        s.attrs.push((b"ai.toolCall.id", AttrValue::Str(b"call_0")));
        s.attrs.push((b"ai.toolCall.name", AttrValue::Str(b"bash")));
        s.attrs.push((
            b"ai.toolCall.result",
            AttrValue::Str(br#"{"title":"t","metadata":{"exit":1},"output":"no\n"}"#),
        ));
        let mut out = Vec::new();
        assert_eq!(span(&s, &mut out), SpanVerdict::Signals);
        assert_eq!(
            (out[0].role, out[0].size, out[0].failed),
            (Role::Primary, Some(3), true)
        );
        let mut t = SpanView {
            name: b"Tool.execute",
            ..SpanView::default()
        };
        t.attrs.push((b"tool.call_id", AttrValue::Str(b"call_0")));
        t.attrs.push((b"tool.name", AttrValue::Str(b"bash")));
        assert_eq!(span(&t, &mut out), SpanVerdict::Signals);
        assert_eq!(out[1].role, Role::Secondary);
        for name in [
            "ShellTool.run",
            "ToolRegistry.register",
            "sql.execute",
            "ai.streamText",
        ] {
            t.name = name.as_bytes();
            assert_eq!(span(&t, &mut Vec::new()), SpanVerdict::NotTool, "{name}");
        }
    }
}
