//! `tool_result` log records of any other emitter: opencode's OpenTelemetry plugin, and others
//! that mirror Claude Code's events (`event.name = tool_result`, `tool_name`, `success`,
//! `duration_ms`, `tool_result_size_bytes`). The size is taken as bytes; the call is joined on
//! `tool_use_id` or `call_id` when there is one.

use super::{Attrs, CallId, Signal};
use crate::collector::ingest::record::{Emitter, Role};
use crate::collector::ingest::wire::LogView;

/// Reads a record of a scope no agent owns; pushes nothing unless it is a `tool_result` event
/// with a tool name.
pub(crate) fn log<'a>(l: &LogView<'a>, out: &mut Vec<Signal<'a>>) {
    if super::event_name(l) != "tool_result" {
        return;
    }
    let a = Attrs(&l.attrs);
    let Some(tool) = a.str("tool_name").filter(|t| !t.is_empty()) else {
        return;
    };
    let id = a
        .str("tool_use_id")
        .or_else(|| a.str("call_id"))
        .filter(|s| !s.is_empty());
    let call = id.map_or(CallId::Alone, CallId::Id);
    let mut sig = Signal::new(Emitter::ToolResultLog, Role::Primary, call);
    sig.tool = Some(tool);
    sig.failed = a.bool("success") == Some(false);
    (sig.size, sig.absurd_size) = a.size("tool_result_size_bytes");
    sig.latency_ms = a.int("duration_ms");
    out.push(sig);
}
