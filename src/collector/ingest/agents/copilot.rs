//! GitHub Copilot CLI (1.0.102): traces and metrics only, under the scope `github.copilot`
//! (`service.name = github-copilot`), OTLP/HTTP.
//!
//! - Span `execute_tool {tool}` (`gen_ai.operation.name = execute_tool`): the one signal of a
//!   call, joined on nothing. With `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`,
//!   `gen_ai.tool.call.result` is exactly the text the model got: the call is sized as its UTF-8
//!   bytes; without it the call is counted, unsized. A command that exits non-zero leaves the
//!   span's status unset but sets `process.exit.code`: any code other than 0 is a failure.
//! - Copilot's own cut: an output over its limit is saved to a file and the model gets `Output
//!   too large to read at once (106.3 KB). Saved to: …` and a 500-character preview. The call
//!   is counted as cut upstream by `copilot-cli.tool-output`, with the original size the notice
//!   gives (KB of 1,024 bytes, to a tenth: within 52 bytes).
//! - Its other spans (`chat`, `invoke_agent`, …) are not tools.

use super::{Agent, AgentStack, Attrs, CallId, Signal, SpanVerdict, Tools};
use crate::collector::ingest::record::{Emitter, Role, Upstream};
use crate::collector::ingest::wire::{LogView, SpanView};

/// The entry.
pub(crate) const AGENT: Agent = Agent {
    owns: |scope| scope == "github.copilot",
    stack: AgentStack {
        name: "copilot",
        services: &["github-copilot"],
        layers: &[(LAYER, Tools::All)],
    },
    span,
    log,
};

/// The layer of its cut.
const LAYER: &str = "copilot-cli.tool-output";

/// How the text the model gets of a cut output starts.
pub(crate) const MARKER: &str = "Output too large to read at once (";

/// The original size a cut output's notice gives, in bytes: `(106.3 KB)` is 108,851.
pub(crate) fn original_size(result: &str) -> Option<u64> {
    let rest = result.strip_prefix(MARKER)?;
    let (number, unit) = rest.split_once(')')?.0.trim().split_once(' ')?;
    let n: f64 = number.trim().parse().ok()?;
    let scale = match unit.trim() {
        "B" => 1.0,
        "KB" => 1024.0,
        "MB" => 1024.0 * 1024.0,
        "GB" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    (n.is_finite() && n >= 0.0).then(|| (n * scale).round() as u64)
}

fn span<'a>(s: &SpanView<'a>, out: &mut Vec<Signal<'a>>) -> SpanVerdict {
    let a = Attrs(&s.attrs);
    if a.str("gen_ai.operation.name") != Some("execute_tool") {
        return SpanVerdict::NotTool;
    }
    let call = match a.str("gen_ai.tool.call.id").filter(|id| !id.is_empty()) {
        Some(id) => CallId::Id(id),
        None => CallId::Alone,
    };
    let mut sig = Signal::new(Emitter::Copilot, Role::Primary, call);
    sig.tool = a.str("gen_ai.tool.name");
    sig.args = a.get("gen_ai.tool.call.arguments");
    let exit = a.get("process.exit.code").and_then(|v| match v {
        crate::collector::ingest::wire::AttrValue::Int(n) => Some(n),
        v => v.as_str()?.trim().parse().ok(),
    });
    sig.failed = s.status_code == 2 || exit.is_some_and(|c| c != 0);
    if let Some(result) = a.str("gen_ai.tool.call.result") {
        sig.size = Some(result.len() as u64);
        if result.starts_with(MARKER) {
            sig.upstream = Upstream {
                layer: Some(LAYER),
                original: original_size(result),
                ..Upstream::default()
            };
        }
    }
    out.push(sig);
    SpanVerdict::Signals
}

/// Copilot CLI exports no log records.
fn log(_: &LogView<'_>, _: &mut Vec<Signal<'_>>) {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::ingest::wire::AttrValue;

    fn tool_span(result: &'static str, exit: &'static str) -> SpanView<'static> {
        let mut s = SpanView {
            name: b"execute_tool bash",
            ..SpanView::default()
        };
        for (k, v) in [
            ("gen_ai.operation.name", "execute_tool"),
            ("gen_ai.tool.name", "bash"),
            ("gen_ai.tool.call.id", "call_00"),
            ("process.exit.code", exit),
            ("gen_ai.tool.call.result", result),
        ] {
            s.attrs.push((k.as_bytes(), AttrValue::Str(v.as_bytes())));
        }
        s
    }

    /// Copilot CLI 1.0.102's spans of the scripted session.
    #[test]
    fn exit_codes_fail_and_its_cut_is_flagged_with_the_original_size() {
        let mut out = Vec::new();
        let cut = "Output too large to read at once (106.3 KB). Saved to: /tmp/1-copilot-tool-output.txt\n\
                   Consider using tools like rg (for searching), head/tail\n\nPreview (first 500 chars):\n1\n2\n";
        span(&tool_span(cut, "0"), &mut out);
        span(
            &tool_span("cat: /nonexistent: No such file or directory\n<shellId: 2 completed with exit code 1>", "1"),
            &mut out,
        );
        span(
            &tool_span("small\n<shellId: 1 completed with exit code 0>", "0"),
            &mut out,
        );
        assert_eq!(out[0].size, Some(cut.len() as u64));
        assert_eq!(out[0].upstream.layer, Some(LAYER));
        // 108,894 bytes printed; the notice says 106.3 KB.
        let original = out[0].upstream.original.unwrap();
        assert!(original.abs_diff(108_894) <= 52, "{original}");
        assert!(out[1].failed && !out[0].failed && !out[2].failed);
        assert_eq!(out[2].size, Some(45));
        let mut other = SpanView {
            name: b"chat gpt-4o",
            ..SpanView::default()
        };
        other
            .attrs
            .push((b"gen_ai.operation.name", AttrValue::Str(b"chat")));
        assert_eq!(span(&other, &mut Vec::new()), SpanVerdict::NotTool);
        assert_eq!(
            original_size("Output too large to read at once (2 MB). x"),
            Some(2 << 20)
        );
        assert_eq!(
            original_size("Output too large to read at once (lots)"),
            None
        );
    }
}
