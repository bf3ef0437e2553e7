//! The context signals: what a tool result adds to a conversation, what each model request
//! carried, and when the conversation was compacted, read from the same spans and log records
//! as the tool calls and handed to the context ledger (`state::context`) beside them.
//!
//! Three kinds of event, each in a session: the emitter's session id (`session.id`), else the
//! trace id.
//!
//! - **A tool result** ([`ContextKind::Result`]): the tokens it adds. No pinned emitter reports
//!   the tokens of a result in the records read here, so they are estimated from its size as
//!   the library's `tool.result.tokens_estimate` is (`ceil(size / 4)`, the size in UTF-16 units
//!   for Claude Code and Gemini CLI, UTF-8 bytes for spans) and marked estimated. Sources: Claude
//!   Code's `tool_result` log record and Gemini CLI's `gemini_cli.tool_call` (their primary
//!   signal, with `session.id`), Codex's `codex.tool_result` span events (with
//!   `conversation.id`; its output up to Codex's cut, four bytes a token as Codex counts), and
//!   every tool span the generic rules recognise (by trace).
//! - **A model request** ([`ContextKind::Request`]): its input tokens, with the cache reads and
//!   cache writes apart where the emitter reports them. Claude Code's `api_request` record
//!   (`input_tokens` uncached, `cache_read_tokens`, `cache_creation_tokens`; 2.1.332; only the
//!   main conversation's, see [`MAIN_QUERY_SOURCES`]); Gemini CLI's `gemini_cli.api_response`
//!   (`input_token_count`, which includes `cached_content_token_count`; `role` `main` only,
//!   0.61.0); Codex's `codex.sse_event` of `event.kind` `response.completed` with
//!   `input_token_count` (which includes `cached_token_count` and `cache_write_token_count`,
//!   as the Responses API's `input_tokens` does; 0.171.0), at the record's time, the
//!   response's end: Codex runs a tool while the response streams, so a tool that ends before
//!   the response that asked for it does is counted in that request too; a GenAI model
//!   span's `gen_ai.usage.input_tokens` (which includes `gen_ai.usage.cache_read.input_tokens`
//!   and `gen_ai.usage.cache_creation.input_tokens`, pydantic-ai 2.68 and the Vercel AI SDK 6).
//!   A request starts at the span's start, or at the record's time less its `duration_ms`; a
//!   result enters at its record's time, or at its tool span's start.
//! - **A compaction** ([`ContextKind::Clear`]): Claude Code's `compaction` record with
//!   `success` = `"true"`, Gemini CLI's `gemini_cli.chat_compression`: the results carried so far
//!   leave the context.
//!
//! Reading costs nothing on a record that is none of these (one event name compared, or one
//! attribute looked up on a span that is no tool); ids are copied only for the records read,
//! bounded to [`MAX_SESSION_ID_BYTES`]. Nothing of a result's content is read or kept.

use std::sync::Arc;

use super::agents::{self, Attrs};
use super::record::{Role, Size, ToolRecord};
use super::wire::{LogView, SpanView};

/// Longest session id kept, in bytes (cut on a character boundary).
pub(crate) const MAX_SESSION_ID_BYTES: usize = 128;

/// The `query_source` values of Claude Code's `api_request` records that carry the main
/// conversation (2.1.332: `repl_main_thread…` interactive, `sdk` with `-p` and the Agent SDK).
/// Title generation, memory extraction, compaction itself and the other side queries carry no
/// tool result of the conversation and are not requests of its ledger; a record without
/// `query_source` is taken as the main conversation's.
pub(crate) const MAIN_QUERY_SOURCES: &[&str] = &["repl_main_thread*", "sdk"];

/// The `role` of Gemini CLI's `gemini_cli.api_response` records of the main conversation
/// (0.61.0: `main`; the router, the next-speaker check, the compressor and the other
/// `utility_*` roles carry no tool result of it). A record without `role` is taken as main.
pub(crate) const GEMINI_MAIN_ROLE: &str = "main";

/// Codex's session id, on its log records and its `codex.tool_result` span events (0.171.0).
pub(crate) const CODEX_SESSION_KEY: &str = "conversation.id";

/// The `event.kind` of the `codex.sse_event` record that carries a model request's token counts
/// (0.171.0: one per response, beside a first `response.completed` record without them).
pub(crate) const CODEX_USAGE_KIND: &str = "response.completed";

/// `gen_ai.operation.name` values of a model request span.
const MODEL_OPERATIONS: &[&str] = &["chat", "text_completion", "generate_content"];

/// Who a context event belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum SessionId {
    /// The trace of spans without a session id.
    Trace([u8; 16]),
    /// The emitter's session id.
    Named(Box<str>),
}

impl std::fmt::Display for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SessionId::Trace(t) => f.write_str(&crate::hex::encode(t)),
            SessionId::Named(s) => f.write_str(s),
        }
    }
}

/// What happened to a session's context.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ContextKind {
    /// A tool result entered the context.
    Result {
        /// The tool (its series' name).
        tool: Arc<str>,
        /// Tokens it adds.
        tokens: u64,
        /// `tokens` is estimated from the size.
        estimated: bool,
    },
    /// A model request.
    Request {
        /// Input tokens in all: uncached, cache reads and cache writes.
        input: u64,
        /// Of `input`, read from the prompt cache.
        cache_read: u64,
        /// Of `input`, written to the prompt cache.
        cache_creation: u64,
    },
    /// A compaction: every result carried so far leaves the context.
    Clear,
}

/// One context event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ContextEvent {
    /// The service (sanitised, as its series').
    pub(crate) service: Arc<str>,
    /// The session.
    pub(crate) session: SessionId,
    /// When: a result's record (a tool span's start), a request's start, a compaction's record;
    /// Unix nanoseconds.
    pub(crate) at_ns: u64,
    /// What.
    pub(crate) kind: ContextKind,
    /// The session's results travel on another signal than this event (Codex: results on its
    /// traces, requests on its logs, each on its own export timer): the ledger applies it once
    /// the join window has passed since it arrived, by when the results it carried are in.
    pub(crate) settles: bool,
}

/// The context events of one request, in arrival order. A tool span's result is kept as its
/// record's index and its start (16 bytes): its service, tool, trace and size are in the record
/// the batch carries anyway, so nothing is cloned or written twice for it. A model request read
/// from a span is kept as what the ledger reads of it ([`SpanRequest`]), its service cloned once
/// a request rather than once an event. Every other event is kept whole.
#[derive(Debug, Default)]
pub(crate) struct ContextEvents {
    /// The events in arrival order.
    pub(crate) order: Vec<Entry>,
    /// The events kept whole, by [`Entry::Whole`]'s index.
    pub(crate) whole: Vec<ContextEvent>,
    /// The model requests read from spans, by [`Entry::Request`]'s index.
    pub(crate) requests: Vec<SpanRequest>,
    /// Their services, by [`SpanRequest::service`].
    pub(crate) services: Vec<Arc<str>>,
}

/// A model request read from a span, in its trace's session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SpanRequest {
    /// Its service: index in [`ContextEvents::services`].
    pub(crate) service: u32,
    /// Its trace: the session.
    pub(crate) trace: [u8; 16],
    /// The span's start, Unix nanoseconds.
    pub(crate) at_ns: u64,
    /// Input tokens in all.
    pub(crate) input: u64,
    /// Of `input`, read from the prompt cache.
    pub(crate) cache_read: u64,
    /// Of `input`, written to the prompt cache.
    pub(crate) cache_creation: u64,
}

/// One event of [`ContextEvents`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Entry {
    /// The result of the tool span whose record is the request's `record`th, entering its
    /// trace's context at `at_ns` (the span's start); its tokens are the record's
    /// ([`result_of`]).
    Record {
        /// Index in the request's records.
        record: u32,
        /// The span's start, Unix nanoseconds.
        at_ns: u64,
    },
    /// The model request at this index of [`ContextEvents::requests`].
    Request(u32),
    /// The event at this index of [`ContextEvents::whole`].
    Whole(u32),
}

impl ContextEvents {
    /// Room for `n` events.
    pub(crate) fn reserve(&mut self, n: usize) {
        self.order.reserve(n);
    }

    /// No event.
    pub(crate) fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Adds an event kept whole.
    pub(crate) fn push(&mut self, e: ContextEvent) {
        self.order.push(Entry::Whole(self.whole.len() as u32));
        self.whole.push(e);
    }

    /// Adds a model request (`kind`) of `service` read from a span of `trace`.
    fn push_request(&mut self, service: &Arc<str>, trace: [u8; 16], at_ns: u64, kind: ContextKind) {
        let ContextKind::Request {
            input,
            cache_read,
            cache_creation,
        } = kind
        else {
            return;
        };
        if !self
            .services
            .last()
            .is_some_and(|s| Arc::ptr_eq(s, service))
        {
            self.services.push(service.clone());
        }
        self.order.push(Entry::Request(self.requests.len() as u32));
        self.requests.push(SpanRequest {
            service: (self.services.len() - 1) as u32,
            trace,
            at_ns,
            input,
            cache_read,
            cache_creation,
        });
    }

    /// Every event whole, in arrival order (`records`: the request's).
    #[cfg(test)]
    pub(crate) fn events(&self, records: &[ToolRecord]) -> Vec<ContextEvent> {
        let event = |e: &Entry| match *e {
            Entry::Whole(i) => self.whole[i as usize].clone(),
            Entry::Record { record, at_ns } => {
                let rec = &records[record as usize];
                ContextEvent {
                    service: rec.service.clone(),
                    session: SessionId::Trace(rec.trace_id),
                    at_ns,
                    kind: result_of(rec).expect("a result"),
                    settles: false,
                }
            }
            Entry::Request(i) => {
                let r = &self.requests[i as usize];
                ContextEvent {
                    service: self.services[r.service as usize].clone(),
                    session: SessionId::Trace(r.trace),
                    at_ns: r.at_ns,
                    kind: ContextKind::Request {
                        input: r.input,
                        cache_read: r.cache_read,
                        cache_creation: r.cache_creation,
                    },
                    settles: false,
                }
            }
        };
        self.order.iter().map(event).collect()
    }
}

impl From<Vec<ContextEvent>> for ContextEvents {
    fn from(whole: Vec<ContextEvent>) -> Self {
        Self {
            order: (0..whole.len() as u32).map(Entry::Whole).collect(),
            whole,
            ..Self::default()
        }
    }
}

/// `ceil(size / 4)`: the tokens estimated from a size, as `tool.result.tokens_estimate`.
pub(crate) fn tokens_of(size: u64) -> u64 {
    size.div_ceil(4)
}

fn session_of(a: Attrs<'_, '_>, trace_id: &[u8]) -> Option<SessionId> {
    let named = a
        .str("session.id")
        .or_else(|| a.str(CODEX_SESSION_KEY))
        .filter(|s| !s.is_empty());
    if let Some(id) = named {
        let mut end = id.len().min(MAX_SESSION_ID_BYTES);
        while !id.is_char_boundary(end) {
            end -= 1;
        }
        return Some(SessionId::Named(id[..end].into()));
    }
    let t: [u8; 16] = trace_id.try_into().ok()?;
    (t != [0; 16]).then_some(SessionId::Trace(t))
}

/// The tokens a tool call's record adds to the context, estimated: its primary record with a
/// known size only.
pub(crate) fn result_tokens(rec: &ToolRecord) -> Option<u64> {
    if rec.join.is_some_and(|j| j.role != Role::Primary) {
        return None;
    }
    let Size::Known { bytes, .. } = rec.size else {
        return None;
    };
    Some(tokens_of(rec.measures.utf16_units.unwrap_or(bytes)))
}

/// The primary record of a tool call with a known size, as a result entering the context.
fn result_of(rec: &ToolRecord) -> Option<ContextKind> {
    result_tokens(rec).map(|tokens| ContextKind::Result {
        tool: rec.tool.clone(),
        tokens,
        estimated: true,
    })
}

/// Reads the context events of one log record of a coding agent (`agent`: its stack's name)
/// or another emitter; `pushed`: the tool records read from it.
pub(crate) fn from_log(
    agent: Option<&str>,
    service: &Arc<str>,
    log: &LogView<'_>,
    pushed: &[ToolRecord],
    out: &mut ContextEvents,
) {
    let (Some(agent), a) = (agent, Attrs(&log.attrs)) else {
        return;
    };
    let time = if log.time != 0 {
        log.time
    } else {
        log.observed
    };
    let kind = match (agent, agents::event_name(log)) {
        ("claude-code", "tool_result") | ("gemini-cli", "gemini_cli.tool_call") => {
            pushed.iter().find_map(result_of)
        }
        ("claude-code", "api_request") => {
            let main = a
                .str("query_source")
                .is_none_or(|s| agents::matches(MAIN_QUERY_SOURCES, s));
            main.then(|| {
                let (read, creation) = (
                    a.int("cache_read_tokens").unwrap_or(0),
                    a.int("cache_creation_tokens").unwrap_or(0),
                );
                a.int("input_tokens").map(|uncached| ContextKind::Request {
                    input: uncached.saturating_add(read).saturating_add(creation),
                    cache_read: read,
                    cache_creation: creation,
                })
            })
            .flatten()
        }
        ("gemini-cli", "gemini_cli.api_response") => a
            .str("role")
            .is_none_or(|r| r == GEMINI_MAIN_ROLE)
            .then(|| {
                a.int("input_token_count")
                    .map(|input| ContextKind::Request {
                        input,
                        cache_read: a.int("cached_content_token_count").unwrap_or(0).min(input),
                        cache_creation: 0,
                    })
            })
            .flatten(),
        ("codex", "codex.sse_event") if a.str("event.kind") == Some(CODEX_USAGE_KIND) => {
            a.int("input_token_count").map(|input| {
                let read = a.int("cached_token_count").unwrap_or(0).min(input);
                ContextKind::Request {
                    input,
                    cache_read: read,
                    cache_creation: a
                        .int("cache_write_token_count")
                        .unwrap_or(0)
                        .min(input - read),
                }
            })
        }
        ("claude-code", "compaction") => {
            (a.bool("success") == Some(true)).then_some(ContextKind::Clear)
        }
        ("gemini-cli", "gemini_cli.chat_compression") => Some(ContextKind::Clear),
        _ => None,
    };
    let Some(kind) = kind else { return };
    let Some(session) = session_of(a, log.trace_id) else {
        return;
    };
    let at_ns = match kind {
        ContextKind::Request { .. } => {
            let ms = a.int("duration_ms").unwrap_or(0);
            time.saturating_sub(ms.saturating_mul(1_000_000))
        }
        _ => time,
    };
    out.push(ContextEvent {
        service: service.clone(),
        session,
        at_ns,
        kind,
        settles: agent == "codex",
    });
}

/// Reads the results of a Codex tool span (`pushed`: the records read from its
/// `codex.tool_result` events): each enters the session its event names (`conversation.id`)
/// at the event's time (the tool's end, before its result goes back; the span itself may end
/// after the next request), else the span's end, with the tokens of what the model got: the output up to Codex's cut
/// ([`agents::codex::CUT_BYTES`]), estimated at four bytes a token as Codex counts them.
pub(crate) fn from_codex_span(
    service: &Arc<str>,
    span: &SpanView<'_>,
    pushed: &[ToolRecord],
    out: &mut ContextEvents,
) {
    let mut ev = super::wire::EventView::default();
    let found = span.events.iter().find_map(|raw| {
        ev.read(raw).ok()?;
        let at = if ev.time != 0 { ev.time } else { span.end };
        Some((session_of(Attrs(&ev.attrs), span.trace_id)?, at))
    });
    let Some((session, at_ns)) = found else {
        return;
    };
    for rec in pushed {
        let Some(ContextKind::Result {
            tool, estimated, ..
        }) = result_of(rec)
        else {
            continue;
        };
        let bytes = rec.size.bytes().unwrap_or(0);
        out.push(ContextEvent {
            service: service.clone(),
            session: session.clone(),
            at_ns,
            kind: ContextKind::Result {
                tool,
                tokens: tokens_of(bytes.min(agents::codex::CUT_BYTES)),
                estimated,
            },
            settles: false,
        });
    }
}

/// Reads the context event of a span the generic rules read: `tool`, the index and the record
/// they made of it when it is a tool span (kept as its index: the record has the trace id of a
/// span the rules read); else a model request when it is one.
pub(crate) fn from_span(
    service: &Arc<str>,
    span: &SpanView<'_>,
    tool: Option<(usize, &ToolRecord)>,
    out: &mut ContextEvents,
) {
    // A tool span's start, not its end: a framework may end the span after it handed the
    // result on and the next model request started (the Vercel AI SDK does, by a few
    // milliseconds under load); an agent waits for a result before its next request, so a
    // request that started after a tool did carries its result.
    let at_ns = span.start;
    if let Some((record, rec)) = tool {
        if result_tokens(rec).is_some() && span.trace_id.len() == 16 {
            out.order.push(Entry::Record {
                record: record as u32,
                at_ns,
            });
        }
        return;
    }
    let Some(kind) = request_of(span) else { return };
    let Ok(trace) = <[u8; 16]>::try_from(span.trace_id) else {
        return;
    };
    out.push_request(service, trace, at_ns, kind);
}

/// A GenAI model request span: `gen_ai.usage.input_tokens` on a span whose
/// `gen_ai.operation.name` names a model call (or is absent, as on the Vercel AI SDK's
/// `doGenerate` spans). An agent's span summing its run's usage is not one.
fn request_of(span: &SpanView<'_>) -> Option<ContextKind> {
    let a = Attrs(&span.attrs);
    let input = a.int("gen_ai.usage.input_tokens")?;
    if let Some(op) = a.str("gen_ai.operation.name") {
        if !MODEL_OPERATIONS.contains(&op) {
            return None;
        }
    } else if span.name.starts_with(b"agent run") || span.name.starts_with(b"invoke_agent") {
        return None;
    }
    let read = a.int("gen_ai.usage.cache_read.input_tokens").unwrap_or(0);
    let creation = a
        .int("gen_ai.usage.cache_creation.input_tokens")
        .unwrap_or(0);
    Some(ContextKind::Request {
        input,
        cache_read: read.min(input),
        cache_creation: creation.min(input.saturating_sub(read)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::ingest::wire::AttrValue;

    fn log<'a>(attrs: &[(&'a str, AttrValue<'a>)]) -> LogView<'a> {
        LogView {
            time: 10_000_000_000,
            attrs: attrs.iter().map(|(k, v)| (k.as_bytes(), *v)).collect(),
            ..LogView::default()
        }
    }

    fn read(agent: &str, l: &LogView<'_>) -> Vec<ContextEvent> {
        let mut out = ContextEvents::default();
        from_log(Some(agent), &"svc".into(), l, &[], &mut out);
        out.whole
    }

    /// Claude Code 2.1.332's `api_request` as it sends it: the request starts `duration_ms`
    /// before the record; the three input counts add up; side queries are not the
    /// conversation's.
    #[test]
    fn claude_code_requests_add_cache_reads_and_writes_and_skip_side_queries() {
        let attrs = [
            ("event.name", AttrValue::Str(b"api_request")),
            ("session.id", AttrValue::Str(b"s-1")),
            ("input_tokens", AttrValue::Str(b"120")),
            ("cache_read_tokens", AttrValue::Int(3000)),
            ("cache_creation_tokens", AttrValue::Str(b"500")),
            ("duration_ms", AttrValue::Str(b"2000")),
            ("query_source", AttrValue::Str(b"sdk")),
        ];
        let got = read("claude-code", &log(&attrs));
        assert_eq!(
            got,
            [ContextEvent {
                service: "svc".into(),
                session: SessionId::Named("s-1".into()),
                at_ns: 8_000_000_000,
                kind: ContextKind::Request {
                    input: 3620,
                    cache_read: 3000,
                    cache_creation: 500
                },
                settles: false,
            }]
        );
        let mut side = attrs;
        side[6].1 = AttrValue::Str(b"generate_session_title");
        assert!(read("claude-code", &log(&side)).is_empty());
        side[6].1 = AttrValue::Str(b"repl_main_thread:outputStyle:x");
        assert_eq!(read("claude-code", &log(&side)).len(), 1);
    }

    #[test]
    fn compactions_clear_only_when_they_succeeded() {
        let ok = [
            ("event.name", AttrValue::Str(b"compaction")),
            ("session.id", AttrValue::Str(b"s-1")),
            ("success", AttrValue::Str(b"true")),
        ];
        assert_eq!(read("claude-code", &log(&ok))[0].kind, ContextKind::Clear);
        let mut failed = ok;
        failed[2].1 = AttrValue::Str(b"false");
        assert!(read("claude-code", &log(&failed)).is_empty());
        let gemini = [
            ("event.name", AttrValue::Str(b"gemini_cli.chat_compression")),
            ("session.id", AttrValue::Str(b"g")),
        ];
        assert_eq!(
            read("gemini-cli", &log(&gemini))[0].kind,
            ContextKind::Clear
        );
    }

    /// Gemini CLI's `input_token_count` already holds the cached tokens; its utility requests
    /// (router, next speaker, ...) are not the conversation's.
    #[test]
    fn gemini_input_includes_its_cached_tokens_and_utility_requests_are_skipped() {
        let mut attrs = [
            ("event.name", AttrValue::Str(b"gemini_cli.api_response")),
            ("session.id", AttrValue::Str(b"g")),
            ("input_token_count", AttrValue::Int(900)),
            ("cached_content_token_count", AttrValue::Int(600)),
            ("role", AttrValue::Str(b"main")),
        ];
        assert_eq!(
            read("gemini-cli", &log(&attrs))[0].kind,
            ContextKind::Request {
                input: 900,
                cache_read: 600,
                cache_creation: 0
            }
        );
        attrs[4].1 = AttrValue::Str(b"utility_router");
        assert!(read("gemini-cli", &log(&attrs)).is_empty());
    }

    /// A record without a session id or trace, or of an emitter that is no coding agent, has
    /// no session and gives nothing; a long id is cut on a character boundary.
    #[test]
    fn sessions_are_bounded_and_required() {
        let attrs = [
            ("event.name", AttrValue::Str(b"compaction")),
            ("success", AttrValue::Bool(true)),
        ];
        assert!(read("claude-code", &log(&attrs)).is_empty());
        let mut out = ContextEvents::default();
        from_log(None, &"svc".into(), &log(&attrs), &[], &mut out);
        assert!(out.is_empty());
        let long = "é".repeat(100);
        let with = [
            ("event.name", AttrValue::Str(b"compaction")),
            ("success", AttrValue::Bool(true)),
            ("session.id", AttrValue::Str(long.as_bytes())),
        ];
        let SessionId::Named(id) = &read("claude-code", &log(&with))[0].session else {
            panic!("named");
        };
        assert_eq!(id.len(), 128);
    }

    /// Codex 0.171.0's usage record: the `response.completed` record with the counts (its
    /// twin without them and the other SSE events give nothing); the session is the
    /// conversation.
    #[test]
    fn codex_usage_records_are_requests_of_their_conversation() {
        let mut attrs = [
            ("event.name", AttrValue::Str(b"codex.sse_event")),
            ("event.kind", AttrValue::Str(b"response.completed")),
            ("input_token_count", AttrValue::Str(b"26527")),
            ("cached_token_count", AttrValue::Str(b"5000")),
            ("cache_write_token_count", AttrValue::Str(b"0")),
            ("conversation.id", AttrValue::Str(b"01a2-c")),
        ];
        let got = read("codex", &log(&attrs));
        assert_eq!(
            got,
            [ContextEvent {
                service: "svc".into(),
                session: SessionId::Named("01a2-c".into()),
                at_ns: 10_000_000_000,
                kind: ContextKind::Request {
                    input: 26527,
                    cache_read: 5000,
                    cache_creation: 0
                },
                settles: true,
            }]
        );
        attrs[2].0 = "output_token_count";
        assert!(read("codex", &log(&attrs)).is_empty(), "no input count");
        attrs[2].0 = "input_token_count";
        attrs[1].1 = AttrValue::Str(b"response.created");
        assert!(read("codex", &log(&attrs)).is_empty());
        attrs[1].1 = AttrValue::Str(b"response.completed");
        assert!(read("claude-code", &log(&attrs)).is_empty(), "Codex's only");
    }

    #[test]
    fn model_spans_are_requests_and_agent_runs_are_not() {
        let mut s = SpanView {
            name: b"chat model",
            trace_id: &[7; 16],
            start: 5,
            end: 9,
            ..SpanView::default()
        };
        s.attrs
            .push((b"gen_ai.operation.name", AttrValue::Str(b"chat")));
        s.attrs
            .push((b"gen_ai.usage.input_tokens", AttrValue::Int(1000)));
        s.attrs
            .push((b"gen_ai.usage.cache_read.input_tokens", AttrValue::Int(400)));
        let mut out = ContextEvents::default();
        from_span(&"svc".into(), &s, None, &mut out);
        let read = out.events(&[]);
        assert_eq!(read[0].at_ns, 5);
        assert_eq!(read[0].session, SessionId::Trace([7; 16]));
        assert_eq!(
            read[0].kind,
            ContextKind::Request {
                input: 1000,
                cache_read: 400,
                cache_creation: 0
            }
        );
        s.attrs[0].1 = AttrValue::Str(b"invoke_agent");
        out = ContextEvents::default();
        from_span(&"svc".into(), &s, None, &mut out);
        assert!(out.is_empty());
        s.attrs.remove(0);
        s.name = b"agent run";
        from_span(&"svc".into(), &s, None, &mut out);
        assert!(out.is_empty());
        s.name = b"ai.generateText.doGenerate";
        from_span(&"svc".into(), &s, None, &mut out);
        assert_eq!(out.events(&[]).len(), 1);
    }
}
