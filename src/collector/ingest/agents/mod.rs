//! Recognition of the coding agents' own telemetry: Claude Code, Codex, Gemini CLI, Qwen Code,
//! opencode, GitHub Copilot CLI, and any emitter of Claude Code-style `tool_result` log records.
//!
//! A coding agent describes one tool call in several signals: Claude Code in a
//! `claude_code.tool_result` log record, a `claude_code.tool` span and its
//! `claude_code.tool.execution` child; Codex in a `codex.tool_result` span event and a log record
//! of the same name; Gemini CLI in a `gemini_cli.tool_call` log record, a
//! `gemini_cli.tool_output_truncated` record and a `tool_call` span. Each agent is one entry
//! ([`Agent`]) in its own module, owning the instrumentation scopes it emits under: the generic
//! span rules never see those scopes, so the agent's internal spans (Codex's 960 spans a session,
//! Claude Code's `.execution` children) make no series. The entry reads each record into
//! [`Signal`]s that carry the call's identity and their [`Role`]: the *primary* signal carries the
//! size, a *secondary* one counts the call when the primary's exporter is off, a *part* only adds
//! what it knows (a failure, the agent's own cut). The aggregator joins the signals of one call
//! into one record (`state::join`), so a call sent three ways is counted once.
//!
//! Values the agents send as strings (`"2329"`, `"true"`) are read as numbers and booleans. A
//! failed call is an error and unsized. What each agent's size means (UTF-16 code units of what
//! the model got for Claude Code and Gemini CLI, UTF-8 bytes of the output before the agent's own
//! cut for Codex) is recorded as [`SizeSource::Reported`] and documented in `docs/agents.md`.
//!
//! Adding an agent is adding a module with one [`Agent`] and its line in [`AGENTS`].

pub(crate) mod claude_code;
pub(crate) mod codex;
pub(crate) mod copilot;
pub(crate) mod gemini;
pub(crate) mod opencode;
pub(crate) mod tool_result_log;

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

use crate::collector::ingest::recognize::{hash_value, int_of, str_of, LabelCuts, ToolNames};
use crate::collector::ingest::record::{
    ArgsHash, Emitter, Join, Measurement, Role, Size, SizeSource, ToolRecord, Unknown, Upstream,
};
use crate::collector::ingest::sampling::Weight;
use crate::collector::ingest::wire::{AttrValue, EventView, LogView, SpanView};

/// The seed of the keys a call's signals are joined under ([`Join::key`]): fixed, a call's key
/// the same in every run.
const JOIN_SEED: u64 = 0x746f_6f6c_7369_7a65;

/// The attributes of a span, an event or a log record, read by key.
#[derive(Clone, Copy)]
pub(crate) struct Attrs<'v, 'a>(pub(crate) &'v [(&'a [u8], AttrValue<'a>)]);

impl<'v, 'a> Attrs<'v, 'a> {
    /// The value of `key`.
    pub(crate) fn get(&self, key: &str) -> Option<AttrValue<'a>> {
        self.0
            .iter()
            .find(|(k, _)| *k == key.as_bytes())
            .map(|(_, v)| *v)
    }

    /// The string value of `key`.
    pub(crate) fn str(&self, key: &str) -> Option<&'a str> {
        str_of(self.get(key))
    }

    /// The value of `key` as a non-negative integer, also when sent as a string or a double.
    pub(crate) fn int(&self, key: &str) -> Option<u64> {
        int_of(self.get(key))
    }

    /// The value of `key` as a size: `(None, true)` when it is a number no result can have
    /// ([`size_of`](crate::collector::ingest::recognize::size_of)).
    pub(crate) fn size(&self, key: &str) -> (Option<u64>, bool) {
        size_value(self.get(key))
    }

    /// The value of `key` as a boolean, also when sent as the string `"true"` / `"false"`.
    pub(crate) fn bool(&self, key: &str) -> Option<bool> {
        bool_value(self.get(key))
    }
}

/// A value as a size, as [`Attrs::size`] reads it.
pub(crate) fn size_value(v: Option<AttrValue<'_>>) -> (Option<u64>, bool) {
    match crate::collector::ingest::recognize::size_of(v) {
        Ok(n) => (n, false),
        Err(_) => (None, true),
    }
}

/// A value as a boolean, as [`Attrs::bool`] reads it.
pub(crate) fn bool_value(v: Option<AttrValue<'_>>) -> Option<bool> {
    match v? {
        AttrValue::Bool(b) => Some(b),
        // Read from the bytes, with no pass to check them as UTF-8.
        AttrValue::Str(b) if b.trim_ascii().eq_ignore_ascii_case(b"true") => Some(true),
        AttrValue::Str(b) if b.trim_ascii().eq_ignore_ascii_case(b"false") => Some(false),
        v => match v.as_str()?.trim() {
            s if s.eq_ignore_ascii_case("true") => Some(true),
            s if s.eq_ignore_ascii_case("false") => Some(false),
            _ => None,
        },
    }
}

/// Who a call is, as the agent tells it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum CallId<'a> {
    /// The agent's call id (Claude Code's `tool_use_id`, Codex's `call_id`).
    Id(&'a str),
    /// No call id: the trace (or another grouping id the agent offers) and the tool name.
    Grouped(&'a [u8], &'a str),
    /// No call id: the trace, the tool name and the size the call's result was cut to (a
    /// truncation notice, matched to the call whose size it is).
    Sized(&'a [u8], &'a str, u64),
    /// Nothing to join on: the record stands alone.
    Alone,
}

/// One signal of one tool call, as an agent's entry reads it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Signal<'a> {
    /// The emitter.
    pub(crate) emitter: Emitter,
    /// What this signal is for the call.
    pub(crate) role: Role,
    /// The call.
    pub(crate) call: CallId<'a>,
    /// The tool's name (a part may not know it).
    pub(crate) tool: Option<&'a str>,
    /// The size the agent reported.
    pub(crate) size: Option<u64>,
    /// `size` counts UTF-16 code units (the length of a JavaScript string).
    pub(crate) utf16: bool,
    /// The agent reported a size no result can have (negative, not finite, above 2^53): the
    /// signal is refused and counted, never recorded.
    pub(crate) absurd_size: bool,
    /// The call failed.
    pub(crate) failed: bool,
    /// Its duration, milliseconds.
    pub(crate) latency_ms: Option<u64>,
    /// A cut the agent made itself.
    pub(crate) upstream: Upstream,
    /// The arguments as JSON text, hashed (never kept).
    pub(crate) args: Option<AttrValue<'a>>,
    /// Claude Code's `tool_parameters` (with `OTEL_LOG_TOOL_DETAILS=1`), naming the server and
    /// tool of a call it names `mcp_tool`.
    pub(crate) mcp_details: Option<&'a str>,
    /// A second identity parts of the call may carry instead of its id.
    pub(crate) alt: Option<CallId<'a>>,
}

impl<'a> Signal<'a> {
    /// A signal with nothing known but who emitted it, its role and its call.
    pub(crate) fn new(emitter: Emitter, role: Role, call: CallId<'a>) -> Self {
        Self {
            emitter,
            role,
            call,
            tool: None,
            size: None,
            utf16: false,
            absurd_size: false,
            failed: false,
            latency_ms: None,
            upstream: Upstream::default(),
            args: None,
            mcp_details: None,
            alt: None,
        }
    }
}

/// What an agent made of one of its spans.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SpanVerdict {
    /// Not a tool call, nor a part of one: ignored and counted as not a tool span.
    NotTool,
    /// The signals it carries were pushed.
    Signals,
}

/// Names matched exactly, or by prefix when a name ends in `*` (`mcp__*`).
pub(crate) fn matches(patterns: &[&str], name: &str) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => *p == name,
    })
}

/// The tools of an agent a layer of its stack applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tools {
    /// Every tool.
    All,
    /// Only these (a name ending in `*` is a prefix).
    Only(&'static [&'static str]),
    /// Every tool but these.
    Except(&'static [&'static str]),
}

impl Tools {
    /// Whether the layer applies to `tool`.
    pub(crate) fn applies(self, tool: &str) -> bool {
        match self {
            Tools::All => true,
            Tools::Only(names) => matches(names, tool),
            Tools::Except(names) => !matches(names, tool),
        }
    }
}

impl std::fmt::Display for Tools {
    /// `all`, `only A, B` or `all but A, B`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tools::All => f.write_str("all"),
            Tools::Only(names) => write!(f, "only {}", names.join(", ")),
            Tools::Except(names) => write!(f, "all but {}", names.join(", ")),
        }
    }
}

/// The layers between an agent's tools and its model: the stack its series are held to unless
/// `[layers.services]` names another for its service.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AgentStack {
    /// The agent's name, shown as the stack a series is held to.
    pub(crate) name: &'static str,
    /// The `service.name`s the agent exports under (a name ending in `*` is a prefix).
    pub(crate) services: &'static [&'static str],
    /// Catalog layer ids, each with the tools it applies to.
    pub(crate) layers: &'static [(&'static str, Tools)],
}

impl AgentStack {
    /// Whether `service` is this agent's.
    pub(crate) fn serves(&self, service: &str) -> bool {
        matches(self.services, service)
    }
}

/// One coding agent: the scopes it emits under, how to read its spans and log records, and the
/// stack of layers its results pass.
pub(crate) struct Agent {
    /// Whether spans and log records of this instrumentation scope are the agent's.
    pub(crate) owns: fn(scope: &str) -> bool,
    /// Its own layers.
    pub(crate) stack: AgentStack,
    /// Reads one of its spans (and the span's events).
    pub(crate) span: for<'a> fn(&SpanView<'a>, &mut Vec<Signal<'a>>) -> SpanVerdict,
    /// Reads one of its log records.
    pub(crate) log: for<'a> fn(&LogView<'a>, &mut Vec<Signal<'a>>),
}

/// Every agent, tried in order by scope.
pub(crate) static AGENTS: &[Agent] = &[
    claude_code::AGENT,
    codex::AGENT,
    gemini::GEMINI,
    gemini::QWEN,
    opencode::AGENT,
    copilot::AGENT,
];

/// The agent that owns `scope`, if any.
pub(crate) fn owner(scope: &str) -> Option<&'static Agent> {
    AGENTS.iter().find(|a| (a.owns)(scope))
}

/// The `event.name` of a log record: the attribute most SDKs set, else OTLP's `event_name`.
pub(crate) fn event_name<'a>(log: &LogView<'a>) -> &'a str {
    Attrs(&log.attrs)
        .str("event.name")
        .unwrap_or(log.event_name)
}

/// The `event.name` of a span event: its attribute (Codex names the event after its source
/// line and puts the real name there), else the event's name.
pub(crate) fn span_event_name<'a>(ev: &EventView<'a>) -> &'a str {
    Attrs(&ev.attrs).str("event.name").unwrap_or(ev.name)
}

/// Where a signal was read: the identity of the span or record it came from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Origin<'a> {
    /// Trace id (may be empty for a log record outside a span).
    pub(crate) trace_id: &'a [u8],
    /// Span id.
    pub(crate) span_id: &'a [u8],
    /// The span's duration, microseconds, when it came from a span.
    pub(crate) span_us: Option<u64>,
}

/// Turns a signal into a record of `service` (sanitised): the tool name cleaned and counted in
/// `cuts`, the size typed, the join key hashed from the service, the emitter and the call.
pub(crate) fn record(
    service: &Arc<str>,
    s: &Signal<'_>,
    at: Origin<'_>,
    max_name: usize,
    cuts: &mut LabelCuts,
    weight: Weight,
) -> ToolRecord {
    let mcp = s
        .tool
        .filter(|t| *t == claude_code::MCP_TOOL)
        .and(s.mcp_details)
        .and_then(claude_code::mcp_name);
    // The receiving thread's sanitised names: no allocation per record once a name was seen.
    let tool: Arc<str> = match mcp.as_deref().or(s.tool).filter(|t| !t.is_empty()) {
        Some(t) => ToolNames::default().of(t, max_name, &mut cuts.tool),
        None => Arc::from(""),
    };
    let size = match (s.failed, s.size) {
        (true, _) => Size::Failed,
        (false, Some(n)) => Size::Known {
            bytes: n,
            source: SizeSource::Reported,
        },
        (false, None) => Size::Unknown(Unknown::Missing),
    };
    let measures = Measurement {
        utf16_units: s.size.filter(|_| s.utf16 && !s.failed),
        ..Measurement::default()
    };
    let key = |call: &CallId<'_>| {
        // foldhash's quality hasher: 64 bits, well mixed; SipHash here was 1.4 % of the
        // daemon's time on Claude Code's log records.
        let mut h = foldhash::quality::FixedState::with_seed(JOIN_SEED).build_hasher();
        service.hash(&mut h);
        (s.emitter as u8).hash(&mut h);
        match *call {
            CallId::Id(id) => (0u8, id).hash(&mut h),
            CallId::Grouped(group, name) => (1u8, group, name).hash(&mut h),
            CallId::Sized(group, name, n) => (2u8, group, name, n).hash(&mut h),
            CallId::Alone => return None,
        }
        Some(h.finish())
    };
    let join = key(&s.call).map(|k| Join {
        key: k,
        role: s.role,
        alt: s.alt.as_ref().and_then(key),
    });
    ToolRecord {
        service: service.clone(),
        tool,
        emitter: s.emitter,
        size,
        truncated: false,
        truncated_upstream: s.upstream.layer.is_some() && !s.failed,
        error: s.failed,
        latency_us: s
            .latency_ms
            .map(|ms| ms.saturating_mul(1000))
            .or(at.span_us)
            .unwrap_or(0),
        trace_id: at.trace_id.try_into().unwrap_or([0; 16]),
        span_id: at.span_id.try_into().unwrap_or([0; 8]),
        args_hash: s.args.map(|v| ArgsHash::new(&hash_value(v))),
        measures,
        upstream_limit: None,
        earlier_cuts: Vec::new(),
        sample: None,
        upstream: s.upstream,
        join,
        weight,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn strings_are_read_as_numbers_and_booleans() {
        let attrs = [
            (&b"n"[..], AttrValue::Str(b"2329")),
            (&b"b"[..], AttrValue::Str(b"false")),
            (&b"i"[..], AttrValue::Int(7)),
            (&b"t"[..], AttrValue::Bool(true)),
            (&b"x"[..], AttrValue::Str(b"many")),
            (&b"p"[..], AttrValue::Str(b" TRUE\n")),
            (&b"u"[..], AttrValue::Str(b"\xe2\x80\x83false")),
        ];
        let a = Attrs(&attrs);
        assert_eq!(a.bool("p"), Some(true));
        assert_eq!(a.bool("u"), Some(false));
        assert_eq!(a.int("n"), Some(2329));
        assert_eq!(a.int("i"), Some(7));
        assert_eq!(a.int("x"), None);
        assert_eq!(a.bool("b"), Some(false));
        assert_eq!(a.bool("t"), Some(true));
        assert_eq!(a.bool("x"), None);
        assert_eq!(a.get("missing"), None);
    }

    #[test]
    fn each_scope_has_at_most_one_owner() {
        for scope in [
            "com.anthropic.claude_code.events",
            "com.anthropic.claude_code.tracing",
            "codex_exec",
            "codex_otel.log_only",
            "gemini-cli",
            "qwen-code",
            "opencode",
            "github.copilot",
        ] {
            let owners = AGENTS.iter().filter(|a| (a.owns)(scope)).count();
            assert_eq!(owners, 1, "{scope}");
        }
        for scope in [
            "pydantic-ai",
            "openinference.instrumentation.langchain",
            "ai",
            "",
        ] {
            assert!(owner(scope).is_none(), "{scope}");
        }
    }

    #[test]
    fn signals_of_one_call_share_a_key_and_other_calls_do_not() {
        let svc: Arc<str> = "claude-code".into();
        let at = Origin {
            trace_id: &[],
            span_id: &[],
            span_us: None,
        };
        let key = |role, id| {
            let s = Signal::new(Emitter::ClaudeCode, role, CallId::Id(id));
            record(&svc, &s, at, 128, &mut LabelCuts::default(), Weight::ONE)
                .join
                .unwrap()
                .key
        };
        assert_eq!(key(Role::Primary, "toolu_1"), key(Role::Part, "toolu_1"));
        assert_ne!(key(Role::Primary, "toolu_1"), key(Role::Primary, "toolu_2"));
        let other: Arc<str> = "claude-code-2".into();
        let s = Signal::new(Emitter::ClaudeCode, Role::Primary, CallId::Id("toolu_1"));
        assert_ne!(
            record(&other, &s, at, 128, &mut LabelCuts::default(), Weight::ONE)
                .join
                .unwrap()
                .key,
            key(Role::Primary, "toolu_1")
        );
    }

    #[test]
    fn a_failed_call_is_unsized_and_never_cut() {
        let svc: Arc<str> = "a".into();
        let mut s = Signal::new(Emitter::Codex, Role::Primary, CallId::Id("c"));
        s.size = Some(148);
        s.failed = true;
        s.upstream.layer = Some("codex.tool-output.tokens");
        let at = Origin {
            trace_id: &[1; 16],
            span_id: &[2; 8],
            span_us: Some(5),
        };
        let r = record(&svc, &s, at, 128, &mut LabelCuts::default(), Weight::ONE);
        assert_eq!(r.size, Size::Failed);
        assert!(r.error && !r.truncated_upstream);
        assert_eq!((r.trace_id, r.span_id, r.latency_us), ([1; 16], [2; 8], 5));
    }
}
