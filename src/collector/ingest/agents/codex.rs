//! Codex CLI: spans and span events under `codex_exec` (or the originator's scope), logs under
//! `codex_otel.log_only`.
//!
//! - Span event `codex.tool_result` (the event's `event.name` attribute; its name is a source
//!   location), on a `dispatch_tool_call_with_state` span (`[otel] trace_exporter`): the primary
//!   signal. `output_length` is the UTF-8 bytes of the tool's whole output **before Codex's own
//!   cut**: the model gets at most 10,000 tokens of it (about 40,000 bytes, Codex counting four
//!   bytes a token; 10,000 bytes for a model missing from Codex's catalog). A result over that is
//!   counted as cut upstream by `codex.tool-output.tokens`, with the original size.
//! - Log `codex.tool_result` (`[otel] exporter`): secondary. Its `output` is a telemetry preview
//!   of at most 2 KiB and 64 lines and is never taken for a size (`output_truncated` is about
//!   that preview, not about what the model got).
//! - No span of Codex's is a tool (it names spans after tools: `exec_command`).
//!
//! Joined on `call_id`. Codex reports `success = "true"` for a command that exits non-zero; the
//! log record's preview starts with a header that says `Process exited with code 1`: with the
//! log exporter on, such a call is counted failed (and unsized). With the trace exporter alone
//! it counts as a success.

use super::{Agent, AgentStack, Attrs, CallId, Signal, SpanVerdict, Tools};
use crate::collector::ingest::record::{Emitter, Role, Upstream};
use crate::collector::ingest::wire::{EventView, LogView, SpanView};

/// The entry.
pub(crate) const AGENT: Agent = Agent {
    owns: |scope| scope.starts_with("codex"),
    // The originators: `codex_exec`, `codex_cli_rs`, `codex_vscode`, `codex-tui`.
    stack: AgentStack {
        name: "codex",
        services: &["codex_*", "codex-*"],
        layers: &[(LAYER, Tools::All)],
    },
    span,
    log,
};

/// The event and log record of one tool call.
const TOOL_RESULT: &str = "codex.tool_result";

/// Codex's cut of a tool's output as the model gets it, in bytes: 10,000 tokens at Codex's four
/// bytes a token (catalog layer [`LAYER`]).
pub(crate) const CUT_BYTES: u64 = 40_000;

/// The catalog layer of that cut.
pub(crate) const LAYER: &str = "codex.tool-output.tokens";

fn common<'a>(a: Attrs<'_, 'a>, role: Role) -> Option<Signal<'a>> {
    let id = a.str("call_id").filter(|s| !s.is_empty())?;
    let mut sig = Signal::new(Emitter::Codex, role, CallId::Id(id));
    sig.tool = a.str("tool_name");
    sig.failed = a.bool("success") == Some(false);
    sig.latency_ms = a.int("duration_ms");
    Some(sig)
}

fn span<'a>(s: &SpanView<'a>, out: &mut Vec<Signal<'a>>) -> SpanVerdict {
    let before = out.len();
    let mut ev = EventView::default();
    for raw in &s.events {
        if ev.read(raw).is_err() || super::span_event_name(&ev) != TOOL_RESULT {
            continue;
        }
        let a = Attrs(&ev.attrs);
        let Some(mut sig) = common(a, Role::Primary) else {
            continue;
        };
        (sig.size, sig.absurd_size) = a.size("output_length");
        if let Some(n) = sig.size.filter(|n| *n > CUT_BYTES) {
            sig.upstream = Upstream {
                layer: Some(LAYER),
                original: Some(n),
                ..Upstream::default()
            };
        }
        out.push(sig);
    }
    if out.len() > before {
        SpanVerdict::Signals
    } else {
        SpanVerdict::NotTool
    }
}

fn log<'a>(l: &LogView<'a>, out: &mut Vec<Signal<'a>>) {
    if super::event_name(l) != TOOL_RESULT {
        return;
    }
    let a = Attrs(&l.attrs);
    if let Some(mut sig) = common(a, Role::Secondary) {
        sig.args = a.get("arguments");
        // `success` is "true" for a command that exits non-zero; the preview's header says.
        sig.failed |= a.str("output").and_then(exit_code).is_some_and(|c| c != 0);
        out.push(sig);
    }
}

/// The exit code in the header of an output preview (`Process exited with code 1`), read
/// from its first lines only.
pub(crate) fn exit_code(output: &str) -> Option<i64> {
    output
        .lines()
        .take(EXIT_HEADER_LINES)
        .find_map(|l| l.strip_prefix(EXIT_PREFIX)?.trim().parse().ok())
}

/// How the header of an `exec_command` output names the exit code.
const EXIT_PREFIX: &str = "Process exited with code ";

/// The header's lines (chunk id, wall time, exit code, token count, `Output:`).
const EXIT_HEADER_LINES: usize = 6;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::ingest::wire::AttrValue;

    /// Codex's `codex.tool_result` log record of `cat /nonexistent`: `success` "true", the
    /// preview's header says exit code 1.
    #[test]
    fn an_exit_code_in_the_preview_header_is_a_failure() {
        let mut l = LogView::default();
        l.attrs
            .push((b"event.name", AttrValue::Str(b"codex.tool_result")));
        l.attrs.push((b"call_id", AttrValue::Str(b"call_02")));
        l.attrs.push((b"success", AttrValue::Str(b"true")));
        l.attrs.push((
            b"output",
            AttrValue::Str(
                b"Chunk ID: b10c13\nWall time: 0.0000 seconds\nProcess exited with code 1\n\
                  Original token count: 12\nOutput:\ncat: /nonexistent: No such file",
            ),
        ));
        let mut out = Vec::new();
        log(&l, &mut out);
        assert!(out[0].failed);
        assert_eq!(
            exit_code("Chunk ID: 5\nProcess exited with code 0\nOutput:\nsmall"),
            Some(0)
        );
        // Only the header counts: an output that prints the phrase is not its exit code.
        let body = format!("{}Process exited with code 3", "x\n".repeat(10));
        assert_eq!(exit_code(&body), None);
    }

    #[test]
    fn the_log_preview_is_never_a_size() {
        let mut l = LogView::default();
        l.attrs
            .push((b"event.name", AttrValue::Str(b"codex.tool_result")));
        l.attrs.push((b"call_id", AttrValue::Str(b"call_1")));
        l.attrs.push((b"output", AttrValue::Str(&[b'x'; 2086])));
        l.attrs.push((b"output_truncated", AttrValue::Bool(true)));
        l.attrs.push((b"success", AttrValue::Str(b"true")));
        let mut out = Vec::new();
        log(&l, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].role, Role::Secondary);
        assert_eq!(out[0].size, None);
        assert!(out[0].upstream.layer.is_none());
    }
}
