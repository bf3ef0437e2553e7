//! Recognition of tool spans from every common emitter: one entry per emitter
//! ([`emitters`]).
//!
//! Each entry says what makes a span the emitter's tool span (the OTel GenAI semantic
//! conventions, MCP, OpenInference, OpenLLMetry and the other instrumentations listed in
//! [`Emitter`]) and where it writes the tool name, a measured size, the result and the
//! arguments; the first entry that matches names the emitter, and each value is read from the
//! first attribute present in reading order. The entries are compiled once ([`Recognizer::new`])
//! into attribute-slot indices, so a span's attributes are scanned once.
//!
//! Sizes: a measured size (`tool.result.bytes`, `gen_ai.tool.call.result.size`) wins; otherwise
//! the size is derived from the content (UTF-8 bytes of a string, compact JSON of a structured
//! value), as the framework handed it to the model: a tracer's own wrapping ([`Envelope`]:
//! JSON-escaped strings, LangChain's `ToolMessage`, ADK's `{"result": …}`, Strands' text
//! blocks) is removed first ([`SizeSource::Unwrapped`]). Content that shows an upstream cut (a
//! truncation marker from [`MARKERS`], a length equal to a configured or environment attribute
//! limit or to one learned from the data ([`crate::collector::ingest::learn`]), JSON that no longer parses,
//! `logfire.truncated`) flags the record truncated upstream: its size is a lower bound, counted
//! as recorded. Placeholders and missing content make the size unknown — never 0. A failed call
//! (status ERROR, an error attribute, `gen_ai.tool.status=error`, rig's
//! `gen_ai.tool.call.outcome=error`) is never sized, whatever its recorded output; a call that
//! did not run (rig's `denied` and `skipped` outcomes) is not a tool result; spans summarising
//! several calls ([`emitters::Entry::summaries`]) are not tools. Alongside a measured size, the other measures the span carries as ints
//! ([`MEASURE_KEYS`]: chars, UTF-16 units, lines, …) are kept exactly; the layer
//! verdict estimates the missing ones from bytes.
//!
//! Under load this is pure CPU on the receiving task; it allocates only the record it returns.
//! It never fails: a span it cannot read is "not a tool span" or "size unknown"; a tool span
//! whose size attribute no result can have (negative, not finite, above 2^53) is refused
//! ([`INVALID_SIZE`]), never recorded.

pub(crate) mod content;
pub(crate) mod emitters;
mod sizing;

use std::sync::Arc;

use opentelemetry_proto::tonic::trace::v1::status::StatusCode;

pub(crate) use crate::collector::ingest::record::{
    ArgsHash, Emitter, Measurement, Size, SizeSource, ToolRecord, Unknown, Upstream, OVERFLOW,
    UNKNOWN_SERVICE,
};
pub(crate) use crate::collector::stats::{Cuts, LabelCuts};

use crate::collector::config::RecognitionConfig;
use crate::collector::ingest::sampling::Sampling;
use crate::collector::ingest::wire::{AttrValue, SpanView};

pub(crate) use content::*;
use emitters::{cond_keys, read_list, COMMON, EMITTERS, MEASURE_KEYS, NOT_RUN};
pub(crate) use emitters::{Cond, Encoding, Envelope};
use sizing::Content;

/// What recognition made of a span: `Tool(())` from [`Recognizer::recognize_counting`], which
/// pushed the record where it stays; `Tool(record)` from the tests' `Recognizer::recognize`.
// The record-holding form is built by the tests alone.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Outcome<T = ToolRecord> {
    /// A tool span.
    Tool(T),
    /// Not a tool span: ignored and counted.
    NotTool,
    /// A span that summarises several tool calls ([`emitters::Entry::summaries`]): not a tool,
    /// ignored and counted as not a tool.
    Summary,
    /// A tool call that did not run (rig's `denied` and `skipped` outcomes,
    /// [`emitters::NOT_RUN`]): no result, no failure of the tool; ignored and counted as not a
    /// tool.
    NotRun,
    /// A tool span that cannot be used (bad trace or span id): rejected and counted.
    Invalid(&'static str),
}

/// Why a tool span whose size is negative, not finite or above 2^53 is refused
/// (`toolsize_spans_refused_total{reason="invalid_size"}`).
pub(crate) const INVALID_SIZE: &str =
    "result size is not a count of bytes (negative, not finite, or above 2^53)";

/// Every attribute key read, sorted for binary search; a span's attributes are mapped onto
/// slots of this list once.
struct Keys {
    sorted: Vec<&'static str>,
}

impl Keys {
    fn new() -> Self {
        let mut all: Vec<&'static str> = cond_keys().chain(COMMON.keys()).collect();
        all.extend(MEASURE_KEYS);
        for e in EMITTERS {
            all.extend(e.name.iter().chain(e.size).chain(e.args));
            all.extend(e.result.iter().map(|c| c.key));
        }
        all.sort_unstable();
        all.dedup();
        assert!(all.len() <= MAX_SLOTS, "too many recognised keys");
        Self { sorted: all }
    }

    fn idx(&self, key: &str) -> usize {
        self.sorted
            .binary_search(&key)
            .expect("key is in the table")
    }
}

/// Open-addressing table from attribute key bytes to slot: one probe and (usually) one compare
/// per attribute of a span, instead of a binary search of string compares.
struct KeyTable {
    entries: Vec<(&'static [u8], u8)>,
}

const KEY_TABLE_SIZE: usize = 256;

#[inline]
fn key_hash(k: &[u8]) -> usize {
    let n = k.len();
    if n == 0 {
        return 0;
    }
    let x = (n as u32).wrapping_mul(0x9E37_79B9)
        ^ (u32::from(k[0]) << 8)
        ^ (u32::from(k[n - 1]) << 16)
        ^ u32::from(k[n / 2])
        ^ (u32::from(k[n * 3 / 4]) << 24);
    (x.wrapping_mul(0x85EB_CA6B) >> 24) as usize % KEY_TABLE_SIZE
}

impl KeyTable {
    fn new(keys: &Keys) -> Self {
        let mut entries: Vec<(&'static [u8], u8)> = vec![(&[], NONE); KEY_TABLE_SIZE];
        for (slot, k) in keys.sorted.iter().enumerate() {
            let mut i = key_hash(k.as_bytes());
            while entries[i].1 != NONE {
                i = (i + 1) % KEY_TABLE_SIZE;
            }
            entries[i] = (k.as_bytes(), slot as u8);
        }
        Self { entries }
    }

    #[inline]
    fn get(&self, k: &[u8]) -> Option<u8> {
        let mut i = key_hash(k);
        loop {
            let (key, slot) = self.entries[i];
            if slot == NONE {
                return None;
            }
            if crate::collector::hash::bytes_eq(key, k) {
                return Some(slot);
            }
            i = (i + 1) % KEY_TABLE_SIZE;
        }
    }
}

const MAX_SLOTS: usize = 64;

#[derive(Debug, Clone, Copy)]
enum CCond {
    Present(usize),
    Eq(usize, &'static str),
    EqIgnoreCase(usize, &'static str),
    Prefix(usize, &'static str),
    NameEq(&'static str),
    NamePrefix(&'static str),
    Scope(&'static str),
}

/// The compiled recognition tables plus the configured limits. Cheap to share (`Arc`).
pub struct Recognizer {
    keys: Keys,
    table: KeyTable,
    rules: Vec<(Emitter, Vec<CCond>)>,
    name: Vec<usize>,
    size: Vec<usize>,
    measures: [usize; 6],
    content: Vec<(usize, Encoding, Envelope)>,
    /// Span events holding the result: (event name, attribute), in reading order.
    events: Vec<(&'static str, &'static str)>,
    /// Each emitter's wrapping on another's result attribute ([`emitters::Entry::wraps`]),
    /// keys as slot indices.
    emitter_envelopes: Vec<(Emitter, usize, Envelope)>,
    /// Span names and tool names of spans that summarise several calls.
    summaries: (Vec<&'static str>, Vec<&'static str>),
    args: Vec<usize>,
    args_hash: usize,
    truncated: usize,
    latency_ms: usize,
    errors: [usize; 4],
    tool_status: usize,
    outcome: usize,
    logfire_truncated: usize,
    mime: usize,
    limits: Vec<u64>,
    placeholders: Vec<String>,
    max_name: usize,
    max_service: usize,
    sampling: Sampling,
    keep_args_hashes: bool,
    /// Whether context events are read for the ledger (`context.enabled`).
    context_ledger: bool,
    /// Spans and log records that were no tool call, per service.
    unrecognised: Arc<crate::collector::ingest::unrecognised::Unrecognised>,
}

impl std::fmt::Debug for Recognizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recognizer")
            .field("keys", &self.keys.sorted.len())
            .finish()
    }
}

/// Index into a span's attributes per recognised key; `NONE` when absent.
type Slots = [u8; MAX_SLOTS];
const NONE: u8 = u8::MAX;

/// Attributes of one span that recognition looks at (slot indices are one byte); later ones
/// are ignored and counted in `toolsize_span_attributes_ignored_total`.
pub(crate) const MAX_ATTRIBUTES_READ: usize = NONE as usize;

impl Recognizer {
    /// Compiles the tables with the configured limits and placeholders.
    pub fn new(config: &RecognitionConfig, max_tool_name_bytes: usize) -> Self {
        let keys = Keys::new();
        let rules = EMITTERS
            .iter()
            .flat_map(|e| e.when.iter().map(move |all| (e.emitter, *all)))
            .map(|(emitter, all)| {
                let conds = all
                    .iter()
                    .map(|c| match *c {
                        Cond::Present(k) => CCond::Present(keys.idx(k)),
                        Cond::Eq(k, v) => CCond::Eq(keys.idx(k), v),
                        Cond::EqIgnoreCase(k, v) => CCond::EqIgnoreCase(keys.idx(k), v),
                        Cond::Prefix(k, v) => CCond::Prefix(keys.idx(k), v),
                        Cond::NameEq(v) => CCond::NameEq(v),
                        Cond::NamePrefix(v) => CCond::NamePrefix(v),
                        Cond::Scope(v) => CCond::Scope(v),
                    })
                    .collect();
                (emitter, conds)
            })
            .collect();
        let slots = |list: Vec<&'static str>| list.into_iter().map(|k| keys.idx(k)).collect();
        Self {
            rules,
            name: slots(read_list(|e| e.name, |k| k)),
            size: slots(read_list(|e| e.size, |k| k)),
            measures: MEASURE_KEYS.map(|k| keys.idx(k)),
            content: read_list(|e| e.result, |c| c.key)
                .into_iter()
                .map(|c| (keys.idx(c.key), c.encoding, c.envelope))
                .collect(),
            events: read_list(|e| e.events, |(e, _)| e),
            emitter_envelopes: EMITTERS
                .iter()
                .flat_map(|e| e.wraps.iter().map(move |&(k, env)| (e.emitter, k, env)))
                .map(|(e, k, env)| (e, keys.idx(k), env))
                .collect(),
            summaries: (
                EMITTERS
                    .iter()
                    .flat_map(|e| e.summaries.0)
                    .copied()
                    .collect(),
                EMITTERS
                    .iter()
                    .flat_map(|e| e.summaries.1)
                    .copied()
                    .collect(),
            ),
            args: slots(read_list(|e| e.args, |k| k)),
            args_hash: keys.idx(COMMON.args_hash),
            truncated: keys.idx(COMMON.truncated),
            latency_ms: keys.idx(COMMON.latency_ms),
            errors: COMMON.errors.map(|k| keys.idx(k)),
            tool_status: keys.idx(COMMON.tool_status),
            outcome: keys.idx(COMMON.outcome),
            logfire_truncated: keys.idx(COMMON.logfire_truncated),
            mime: keys.idx(COMMON.mime),
            limits: config.attribute_value_length_limits.clone(),
            placeholders: config.placeholders.clone(),
            keep_args_hashes: config.keep_args_hashes,
            context_ledger: true,
            max_name: max_tool_name_bytes,
            max_service: crate::collector::config::DEFAULT_MAX_SERVICE_NAME_BYTES,
            sampling: Sampling::new(&config.sampling_rates),
            unrecognised: Arc::default(),
            table: KeyTable::new(&keys),
            keys,
        }
    }

    fn slots(&self, attrs: &[(&[u8], AttrValue<'_>)]) -> Slots {
        let mut slots = [NONE; MAX_SLOTS];
        for (i, (k, _)) in attrs.iter().enumerate().take(usize::from(NONE)) {
            if let Some(s) = self.table.get(k) {
                slots[usize::from(s)] = i as u8;
            }
        }
        slots
    }

    #[cfg(test)]
    /// Classifies one span of `service`, instrumentation scope `scope`.
    pub(crate) fn recognize(
        &self,
        service: &Arc<str>,
        scope: &str,
        span: &SpanView<'_>,
    ) -> Outcome {
        let mut records = Vec::new();
        match self.recognize_counting(
            service,
            scope,
            span,
            &mut LabelCuts::default(),
            &mut ToolNames::default(),
            &mut records,
        ) {
            Outcome::Tool(()) => Outcome::Tool(records.pop().expect("pushed")),
            Outcome::NotTool => Outcome::NotTool,
            Outcome::Summary => Outcome::Summary,
            Outcome::NotRun => Outcome::NotRun,
            Outcome::Invalid(why) => Outcome::Invalid(why),
        }
    }

    /// Whether context events are read for the context ledger (`context.enabled`).
    pub(crate) fn context_ledger(&self) -> bool {
        self.context_ledger
    }

    /// Reads context events for the ledger, or not (`context.enabled`; on by default).
    #[must_use]
    pub(crate) fn with_context_ledger(mut self, on: bool) -> Self {
        self.context_ledger = on;
        self
    }

    /// Whether records keep their arguments' hash (`recognition.keep_args_hashes`).
    pub(crate) fn keeps_args_hashes(&self) -> bool {
        self.keep_args_hashes
    }

    /// Sets the longest `service.name` kept, in bytes (default
    /// [`DEFAULT_MAX_SERVICE_NAME_BYTES`](crate::collector::config::DEFAULT_MAX_SERVICE_NAME_BYTES)).
    #[must_use]
    pub(crate) fn with_max_service_name_bytes(mut self, max: usize) -> Self {
        self.max_service = max;
        self
    }

    /// The longest tool name kept, in bytes.
    /// The sampling weights of spans ([`crate::collector::ingest::sampling`]).
    pub(crate) fn sampling(&self) -> &Sampling {
        &self.sampling
    }

    /// Spans and log records seen that were no tool call
    /// ([`crate::collector::ingest::unrecognised`]).
    pub fn unrecognised(&self) -> &Arc<crate::collector::ingest::unrecognised::Unrecognised> {
        &self.unrecognised
    }

    pub(crate) fn max_tool_name_bytes(&self) -> usize {
        self.max_name
    }

    /// The `service.name` to key series by: cut to the limit, hidden characters replaced, empty
    /// becoming `unknown_service`; with what was done to it.
    pub(crate) fn service_name(&self, raw: &str) -> (Arc<str>, Cuts) {
        let s = crate::label::sanitize(raw, self.max_service);
        let value = if s.value.is_empty() {
            UNKNOWN_SERVICE
        } else {
            &s.value
        };
        (value.into(), Cuts::of(&s))
    }

    /// Classifies one span of `service`, instrumentation scope `scope`, counting in `cuts` a
    /// tool name that had to be cut or cleaned, and pushing a tool span's record, weighed by
    /// its sampling ([`Recognizer::sampling`]), onto `records`. `service` must already be
    /// sanitised ([`Recognizer::service_name`]).
    ///
    /// The record is written where it stays: returned, its ~400 bytes were copied twice on
    /// their way into the batch, the first copy reading back words just stored (a
    /// store-forwarding miss).
    pub(crate) fn recognize_counting<'a>(
        &self,
        service: &Arc<str>,
        scope: &str,
        span: &SpanView<'a>,
        cuts: &mut LabelCuts,
        names: &mut ToolNames<'a>,
        records: &mut Vec<ToolRecord>,
    ) -> Outcome<()> {
        let slots = self.slots(&span.attrs);
        let get = |i: usize| -> Option<AttrValue<'_>> {
            let at = slots[i];
            (at != NONE).then(|| span.attrs[usize::from(at)].1)
        };
        let Some(emitter) = self.classify(&get, span.name, scope) else {
            return Outcome::NotTool;
        };
        if self.is_summary(&get, span.name) {
            return Outcome::Summary;
        }
        let outcome = str_of(get(self.outcome));
        if outcome.is_some_and(|o| NOT_RUN.iter().any(|n| o.eq_ignore_ascii_case(n))) {
            return Outcome::NotRun;
        }
        let Some((trace_id, span_id)) = ids(span) else {
            return Outcome::Invalid("invalid trace_id or span_id length");
        };
        let tool = self.tool_name(&get, span.name, names, &mut cuts.tool);
        let error = self.is_error(&get, span.status_code, outcome);
        let truncated = matches!(get(self.truncated), Some(AttrValue::Bool(true)));
        let flagged = get(self.logfire_truncated).is_some();
        let latency_us = self.latency_us(&get, span);
        // Never recorded: a size no result can have would page as the largest ever.
        let Ok(measured) = self.measured_size(&get) else {
            return Outcome::Invalid(INVALID_SIZE);
        };
        let measures = self.measures(&get, measured.is_some());
        let content = if error {
            // A failed call has no result, whatever error text the tracer stored as output.
            Content::of(Size::Failed)
        } else if let Some(bytes) = measured {
            Content::of(Size::Known {
                bytes,
                source: SizeSource::Measured,
            })
        } else {
            self.recorded_content(&get, span, emitter, flagged)
        };
        let args_hash = self.args_hash_of(&get);
        records.push(ToolRecord {
            service: service.clone(),
            tool,
            emitter,
            size: content.size,
            truncated,
            truncated_upstream: flagged || content.cut,
            error,
            latency_us,
            trace_id,
            span_id,
            args_hash,
            measures,
            upstream_limit: content.limit,
            earlier_cuts: Vec::new(),
            sample: content.sample,
            upstream: Upstream::default(),
            join: None,
            weight: self.sampling.of_span(service, span.trace_state),
        });
        Outcome::Tool(())
    }

    /// Whether the span summarises several tool calls ([`emitters::Entry::summaries`]), by its
    /// span name or its tool name.
    #[inline]
    fn is_summary<'a>(&self, get: &impl Fn(usize) -> Option<AttrValue<'a>>, name: &[u8]) -> bool {
        let (summary_spans, summary_tools) = &self.summaries;
        summary_spans.iter().any(|s| s.as_bytes() == name)
            || self.name.iter().any(|&i| is_one_of(get(i), summary_tools))
    }

    /// The tool name as recorded, sanitised ([`ToolNames`]): the first non-empty name attribute
    /// in reading order that is UTF-8, else taken from the span name. A name the thread has seen
    /// is found by its bytes, before they are checked.
    #[inline]
    fn tool_name<'a>(
        &self,
        get: &impl Fn(usize) -> Option<AttrValue<'a>>,
        span_name: &'a [u8],
        names: &mut ToolNames<'a>,
        cuts: &mut Cuts,
    ) -> Arc<str> {
        for &i in &self.name {
            if let Some(AttrValue::Str(raw @ [_, ..])) = get(i) {
                if let Some(name) = names.of_bytes(raw, self.max_name, cuts) {
                    return name;
                }
            }
        }
        // Checked as UTF-8 when the span was read.
        let span_name = std::str::from_utf8(span_name).unwrap_or_default();
        names.of(name_from_span(span_name), self.max_name, cuts)
    }

    /// Whether the call failed: status ERROR, an error attribute, `gen_ai.tool.status=error`
    /// or an `error` outcome.
    #[inline]
    fn is_error<'a>(
        &self,
        get: &impl Fn(usize) -> Option<AttrValue<'a>>,
        status_code: i32,
        outcome: Option<&str>,
    ) -> bool {
        status_code == StatusCode::Error as i32
            || self.errors.iter().any(|&i| truthy(get(i)))
            || bytes_of(get(self.tool_status)).is_some_and(|s| s.eq_ignore_ascii_case(b"error"))
            || outcome.is_some_and(|o| o.eq_ignore_ascii_case("error"))
    }

    /// The call's latency: the recorded one in milliseconds when usable, else the span's.
    #[inline]
    fn latency_us<'a>(
        &self,
        get: &impl Fn(usize) -> Option<AttrValue<'a>>,
        span: &SpanView<'a>,
    ) -> u64 {
        match get(self.latency_ms) {
            Some(AttrValue::Double(ms)) if ms.is_finite() && ms >= 0.0 => (ms * 1000.0) as u64,
            Some(AttrValue::Int(ms)) if ms >= 0 => (ms as u64).saturating_mul(1000),
            _ => span.end.saturating_sub(span.start) / 1000,
        }
    }

    /// The arguments' hash: a supplied `tool.args_hash` counts only when it starts with 12 hex
    /// digits; any other value (empty, non-hex, non-ASCII, megabytes long) is ignored as if
    /// absent, and the hash is computed from the recorded arguments, if any.
    #[inline]
    fn args_hash_of<'a>(&self, get: &impl Fn(usize) -> Option<AttrValue<'a>>) -> Option<ArgsHash> {
        match bytes_of(get(self.args_hash)).and_then(ArgsHash::from_hex) {
            Some(h) => Some(h),
            None => self
                .args
                .iter()
                .find_map(|&i| get(i))
                .map(|v| ArgsHash::new(&hash_value(v))),
        }
    }

    fn classify<'a>(
        &self,
        get: &impl Fn(usize) -> Option<AttrValue<'a>>,
        name: &[u8],
        scope: &str,
    ) -> Option<Emitter> {
        self.rules.iter().find_map(|(emitter, conds)| {
            conds
                .iter()
                .all(|c| match *c {
                    CCond::Present(i) => get(i).is_some(),
                    // Byte comparisons: no UTF-8 check needed to compare with a constant.
                    CCond::Eq(i, v) => bytes_of(get(i)) == Some(v.as_bytes()),
                    CCond::EqIgnoreCase(i, v) => {
                        bytes_of(get(i)).is_some_and(|s| s.eq_ignore_ascii_case(v.as_bytes()))
                    }
                    CCond::Prefix(i, v) => {
                        bytes_of(get(i)).is_some_and(|s| s.starts_with(v.as_bytes()))
                    }
                    CCond::NameEq(v) => name == v.as_bytes(),
                    CCond::NamePrefix(v) => name.starts_with(v.as_bytes()),
                    CCond::Scope(v) => scope == v,
                })
                .then_some(*emitter)
        })
    }
}

/// The span's trace and span ids, when both have their length.
#[inline]
fn ids(span: &SpanView<'_>) -> Option<([u8; 16], [u8; 8])> {
    let trace_id = <[u8; 16]>::try_from(span.trace_id).ok();
    let span_id = <[u8; 8]>::try_from(span.span_id).ok();
    trace_id.zip(span_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::semconv;

    const OP: &str = semconv::GEN_AI_OPERATION_NAME;
    const EXEC: &str = semconv::OPERATION_EXECUTE_TOOL;
    use opentelemetry_proto::tonic::common::v1::{
        any_value::Value, AnyValue, ArrayValue, KeyValue, KeyValueList,
    };
    use opentelemetry_proto::tonic::trace::v1::span::Event;
    use opentelemetry_proto::tonic::trace::v1::Span;
    use opentelemetry_proto::tonic::trace::v1::Status;

    fn s(k: &str, v: &str) -> KeyValue {
        KeyValue {
            key: k.into(),
            key_strindex: 0,
            value: Some(AnyValue {
                value: Some(Value::StringValue(v.into())),
            }),
        }
    }
    fn i(k: &str, v: i64) -> KeyValue {
        KeyValue {
            key: k.into(),
            key_strindex: 0,
            value: Some(AnyValue {
                value: Some(Value::IntValue(v)),
            }),
        }
    }
    fn span(name: &str, attrs: Vec<KeyValue>) -> Span {
        Span {
            name: name.into(),
            trace_id: vec![1; 16],
            span_id: vec![2; 8],
            start_time_unix_nano: 1_000_000,
            end_time_unix_nano: 3_000_000,
            attributes: attrs,
            ..Span::default()
        }
    }
    fn rec() -> Recognizer {
        Recognizer::new(
            &RecognitionConfig {
                attribute_value_length_limits: vec![100],
                ..Default::default()
            },
            128,
        )
    }
    fn outcome(r: &Recognizer, scope: &str, sp: &Span) -> Outcome {
        outcome_patched(r, scope, sp, |_| {})
    }
    /// [`outcome`] of the request encoded, then changed by `patch` (to send what a protobuf
    /// encoder would refuse, as bytes that are not UTF-8).
    fn outcome_patched(
        r: &Recognizer,
        scope: &str,
        sp: &Span,
        patch: impl Fn(&mut Vec<u8>),
    ) -> Outcome {
        use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
        use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
        use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans};
        use prost::Message;
        let mut body = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans {
                    scope: Some(InstrumentationScope {
                        name: scope.into(),
                        ..Default::default()
                    }),
                    spans: vec![sp.clone()],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
        .encode_to_vec();
        patch(&mut body);
        let mut out = None;
        let svc: Arc<str> = "svc".into();
        crate::collector::ingest::wire::for_each_span(&body, |_, scope, v| {
            out = Some(r.recognize(&svc, scope, v))
        })
        .unwrap();
        out.unwrap()
    }
    fn tool(r: &Recognizer, scope: &str, sp: &Span) -> ToolRecord {
        match outcome(r, scope, sp) {
            Outcome::Tool(t) => t,
            other => panic!("not a tool: {other:?}"),
        }
    }

    /// A recognised OTel GenAI `execute_tool a` span with `attrs` after its operation name.
    fn genai(r: &Recognizer, attrs: Vec<KeyValue>) -> ToolRecord {
        let mut all = vec![s(OP, EXEC)];
        all.extend(attrs);
        tool(r, "x", &span("execute_tool a", all))
    }

    #[test]
    fn table_keys_fit_and_compile() {
        let r = rec();
        assert!(r.keys.sorted.len() <= MAX_SLOTS);
        for (i, k) in r.keys.sorted.iter().enumerate() {
            assert_eq!(r.table.get(k.as_bytes()), Some(i as u8), "{k}");
        }
        for k in ["", "x", "gen_ai.tool", "gen_ai.tool.names", "service.name"] {
            assert_eq!(r.table.get(k.as_bytes()), None, "{k}");
        }
    }

    #[test]
    fn own_spans_are_measured() {
        let r = rec();
        let t = tool(
            &r,
            "toolsize",
            &span(
                "execute_tool grep",
                vec![
                    s(OP, EXEC),
                    s(semconv::GEN_AI_TOOL_NAME, "grep"),
                    s(semconv::TOOL_ARGS_HASH, "0123456789ab"),
                    i(semconv::TOOL_RESULT_BYTES, 4096),
                ],
            ),
        );
        assert_eq!(t.emitter, Emitter::Toolsize);
        assert_eq!(&*t.tool, "grep");
        assert_eq!(
            t.size,
            Size::Known {
                bytes: 4096,
                source: SizeSource::Measured
            }
        );
        assert_eq!(
            t.args_hash.map(|h| h.to_string()).as_deref(),
            Some("0123456789ab")
        );
        assert_eq!(t.latency_us, 2000);
    }

    #[test]
    fn own_spans_carry_exact_measures() {
        let r = rec();
        let t = tool(
            &r,
            "toolsize",
            &span(
                "execute_tool grep",
                vec![
                    s(OP, EXEC),
                    s(semconv::GEN_AI_TOOL_NAME, "grep"),
                    i(semconv::TOOL_RESULT_BYTES, 3000),
                    i(semconv::TOOL_RESULT_CHARS, 900),
                    i(semconv::TOOL_RESULT_UTF16_UNITS, 950),
                    i(semconv::TOOL_RESULT_LINES, 12),
                    i(semconv::TOOL_RESULT_JSON_DEPTH, 3),
                    i(semconv::TOOL_RESULT_MAX_STRING_CHARS, 400),
                    i(semconv::TOOL_RESULT_TOKENS_ESTIMATE, 750),
                ],
            ),
        );
        assert_eq!(
            t.measures,
            Measurement {
                chars: Some(900),
                utf16_units: Some(950),
                lines: Some(12),
                json_depth: Some(3),
                max_string_chars: Some(400),
                tokens_estimate: Some(750),
                ..Measurement::default()
            }
        );
        let m = t.measures.with_bytes(3000);
        assert_eq!((m.bytes, m.chars), (3000, Some(900)));

        // Absent, negative or non-int values are ignored.
        let t = tool(
            &r,
            "toolsize",
            &span(
                "execute_tool grep",
                vec![
                    s(OP, EXEC),
                    s(semconv::GEN_AI_TOOL_NAME, "grep"),
                    i(semconv::TOOL_RESULT_BYTES, 3000),
                    i(semconv::TOOL_RESULT_CHARS, -1),
                    s(semconv::TOOL_RESULT_LINES, "12"),
                ],
            ),
        );
        assert_eq!(t.measures, Measurement::default());

        // Derived sizes stay bytes-only.
        let t = genai(
            &r,
            vec![
                s("gen_ai.tool.name", "a"),
                s("gen_ai.tool.call.result", "héllo"),
                i(semconv::TOOL_RESULT_CHARS, 5),
            ],
        );
        assert!(matches!(
            t.size,
            Size::Known {
                source: SizeSource::Derived,
                ..
            }
        ));
        assert_eq!(t.measures, Measurement::default());
    }

    /// The tool's name is the first name attribute that is non-empty and UTF-8, else the span
    /// name's, as the names found by their bytes ([`ToolNames::of_bytes`]) are read.
    #[test]
    fn the_tool_name_is_the_first_name_attribute_that_is_text() {
        let r = rec();
        // `@@` becomes two bytes that are not UTF-8 once encoded.
        let not_utf8 = |body: &mut Vec<u8>| {
            if let Some(at) = body.windows(4).position(|w| w == b"x@@y") {
                body[at + 1..at + 3].copy_from_slice(&[0xff, 0xfe]);
            }
        };
        let name_of = |attrs: Vec<KeyValue>| {
            let mut all = vec![s(OP, EXEC)];
            all.extend(attrs);
            match outcome_patched(&r, "x", &span("execute_tool from_span", all), not_utf8) {
                Outcome::Tool(t) => t.tool.to_string(),
                other => panic!("not a tool: {other:?}"),
            }
        };
        let names = [semconv::GEN_AI_TOOL_NAME, "tool.name"];
        for _ in 0..2 {
            // Twice: the second time every name is one the thread has seen.
            assert_eq!(
                name_of(vec![s(names[0], "x@@y"), s(names[1], "second")]),
                "second"
            );
            assert_eq!(
                name_of(vec![s(names[0], ""), s(names[1], "second")]),
                "second"
            );
            assert_eq!(
                name_of(vec![s(names[0], "first"), s(names[1], "x@@y")]),
                "first"
            );
            assert_eq!(name_of(vec![s(names[0], "x@@y")]), "from_span");
        }
    }

    #[test]
    #[rustfmt::skip]
    fn every_emitter_is_recognised() {
        let r = rec();
        let cases: Vec<(&str, &str, Vec<KeyValue>, Emitter, &str)> = vec![
            ("execute_tool a", "x", vec![s(OP, EXEC), s("gen_ai.tool.name", "a"), s("gen_ai.tool.call.result", "hello")], Emitter::OtelGenAi, "a"),
            ("tools/call b", "x", vec![s("mcp.method.name", "tools/call"), s("gen_ai.tool.name", "b")], Emitter::Mcp, "b"),
            ("c", "x", vec![s("openinference.span.kind", "TOOL"), s("tool.name", "c"), s("output.value", "hello")], Emitter::OpenInference, "c"),
            ("d.tool", "x", vec![s("traceloop.span.kind", "tool"), s("traceloop.entity.name", "d"), s("traceloop.entity.output", "\"hello\"")], Emitter::OpenLlmetry, "d"),
            ("execute_tool e", "pydantic-ai", vec![s(OP, EXEC), s("gen_ai.tool.name", "e")], Emitter::PydanticAi, "e"),
            ("running tool", "pydantic-ai", vec![s("gen_ai.tool.name", "f"), s("tool_response", "hello")], Emitter::PydanticAiV1, "f"),
            ("g", "langfuse-sdk", vec![s("langfuse.observation.type", "tool"), s("langfuse.observation.output", "hello")], Emitter::Langfuse, "g"),
            ("ai.toolCall", "ai", vec![s("ai.toolCall.name", "h"), s("ai.toolCall.result", "\"hello\"")], Emitter::VercelAi, "h"),
            ("execute_tool i", "gcp.vertex.agent", vec![s(OP, EXEC), s("gen_ai.tool.name", "i")], Emitter::GoogleAdk, "i"),
            ("execute_tool j", "strands", vec![s(OP, EXEC), s("gen_ai.tool.name", "j"), s("gen_ai.tool.status", "success")], Emitter::Strands, "j"),
            ("Function: k", "logfire", vec![s("name", "k"), s("output", "hello")], Emitter::LogfireAgents, "k"),
            ("l", "mlflow", vec![s("mlflow.spanType", "\"TOOL\""), s("mlflow.spanOutputs", "\"hello\"")], Emitter::Mlflow, "l"),
            ("tool.m", "x", vec![s("code.module.name", "swiftide_agents::agent")], Emitter::Swiftide, "m"),
            ("tool.n", "x", vec![s("target", "swiftide_agents::agent")], Emitter::Swiftide, "n"),
            ("whatever", "x", vec![s("gen_ai.tool.call.id", "call_1")], Emitter::GenAiFallback, "whatever"),
            ("m", "x", vec![s(semconv::TOOL_NAME, "m"), i(semconv::TOOL_RESULT_BYTES, 5)], Emitter::Toolsize, "m"),
        ];
        for e in EMITTERS {
            assert!(cases.iter().any(|c| c.3 == e.emitter), "{:?}: no case here", e.emitter);
        }
        for (name, scope, attrs, emitter, tname) in cases {
            let t = tool(&r, scope, &span(name, attrs));
            assert_eq!(t.emitter, emitter, "{name}");
            assert_eq!(&*t.tool, tname, "{name}");
        }
        assert!(matches!(outcome(&r, "x", &span("chat gpt-4", vec![s(OP, "chat")])), Outcome::NotTool));
        // swiftide's other spans, and `tool.` spans of other modules, are not tools.
        assert!(matches!(outcome(&r, "x", &span("step-0", vec![s("code.module.name", "swiftide_agents::agent")])), Outcome::NotTool));
        assert!(matches!(outcome(&r, "x", &span("tool.x", vec![s("code.module.name", "app")])), Outcome::NotTool));
    }

    /// swiftide's own tool span carries no size and no failure: counted, unsized, not an error.
    #[test]
    fn a_swiftide_span_is_counted_unsized() {
        let t = tool(
            &rec(),
            "x",
            &span(
                "tool.fetch",
                vec![s("code.module.name", "swiftide_agents::agent")],
            ),
        );
        assert_eq!((t.emitter, &*t.tool), (Emitter::Swiftide, "fetch"));
        assert!(
            matches!(t.size, Size::Unknown(Unknown::Missing)),
            "{:?}",
            t.size
        );
        assert!(!t.error);
    }

    /// rig (rig-agent 0.44) marks a failure only with its outcome and error kind, span status
    /// UNSET, and records its placeholder text as the result: an error, unsized. A call a hook
    /// denied or skipped did not run: no record.
    #[test]
    fn rig_outcomes_are_read() {
        let r = rec();
        let rig = |said: &str, extra: Vec<KeyValue>| {
            let mut attrs = vec![
                s(OP, EXEC),
                s("gen_ai.tool.type", "function"),
                s("gen_ai.tool.name", "lookup"),
                s("gen_ai.tool.call.result", "Tool execution failed: boom"),
                s("gen_ai.tool.call.outcome", said),
            ];
            attrs.extend(extra);
            outcome(&r, "rig_agent", &span("execute_tool", attrs))
        };
        let Outcome::Tool(ok) = rig("success", vec![]) else {
            panic!("a successful call is a tool record")
        };
        assert!(!ok.error);
        assert_eq!(&*ok.tool, "lookup");
        assert!(
            matches!(ok.size, Size::Known { bytes: 27, .. }),
            "{:?}",
            ok.size
        );
        let Outcome::Tool(failed) = rig("error", vec![]) else {
            panic!("a failed call is a tool record")
        };
        assert!(failed.error);
        assert_eq!(failed.size, Size::Failed);
        let Outcome::Tool(kind) = rig("success", vec![s("gen_ai.tool.error.type", "timeout")])
        else {
            panic!("a failed call is a tool record")
        };
        assert!(kind.error);
        assert!(matches!(rig("denied", vec![]), Outcome::NotRun));
        assert!(matches!(rig("SKIPPED", vec![]), Outcome::NotRun));
    }

    #[test]
    fn the_genai_result_attribute_is_unwrapped_for_adk_and_strands_only() {
        let r = rec();
        let size = |scope: &str, status: Option<&str>, v: &str| {
            let mut attrs = vec![s(OP, EXEC), s("gen_ai.tool.call.result", v)];
            attrs.extend(status.map(|st| s("gen_ai.tool.status", st)));
            tool(&r, scope, &span("execute_tool a", attrs)).size
        };
        let known = |bytes, source| Size::Known { bytes, source };
        let adk = r#"{"result": "déjà"}"#;
        assert_eq!(
            size("gcp.vertex.agent", None, adk),
            known(6, SizeSource::Unwrapped)
        );
        let parts = r#"[{"text": "ab"}, {"text": "c"}]"#;
        assert_eq!(
            size("strands", Some("success"), parts),
            known(3, SizeSource::Unwrapped)
        );
        // Another emitter's result that happens to look the same is what the model got.
        assert_eq!(
            size("x", None, adk),
            known(adk.len() as u64, SizeSource::Derived)
        );
        assert_eq!(
            size("x", None, parts),
            known(parts.len() as u64, SizeSource::Derived)
        );
    }

    #[test]
    fn strands_event_content() {
        let r = rec();
        let mut sp = span(
            "execute_tool j",
            vec![s(OP, EXEC), s("gen_ai.tool.status", "success")],
        );
        sp.events.push(Event {
            name: "gen_ai.choice".into(),
            attributes: vec![s("message", "[{\"text\":\"hi\"}]")],
            ..Event::default()
        });
        let t = tool(&r, "strands", &sp);
        assert_eq!(
            t.size,
            Size::Known {
                bytes: 2,
                source: SizeSource::Unwrapped
            }
        );
        assert!(!t.truncated_upstream);
    }

    #[test]
    fn every_marker_contains_an_anchor() {
        for (layer, m) in MARKERS {
            // " text items ...]" is the tail of Codex's "[omitted N text items ...]".
            let text = if m.contains("text items") {
                format!("[omitted 3{m}")
            } else {
                m.to_string()
            };
            assert!(
                ANCHOR_TEXTS.iter().any(|a| text.contains(a)),
                "{layer}: {m}"
            );
            assert!(
                has_marker(format!("some output {text} more").as_bytes()),
                "{layer}: {m}"
            );
        }
    }

    #[test]
    fn upstream_cuts_are_flagged() {
        let r = rec();
        let cut = |v: &str| genai(&r, vec![s("gen_ai.tool.call.result", v)]).truncated_upstream;
        assert!(cut("lots of output ... [truncated]"));
        assert!(cut("head\n[... omitted 10 of 200 lines ...]\ntail"));
        assert!(cut("Total output lines: 400\nfoo"));
        assert!(cut("{\"a\": [1, 2, 3"), "JSON that no longer parses");
        assert!(cut(&"x".repeat(100)), "length equal to a configured limit");
        assert!(!cut(&"x".repeat(99)));
        assert!(!cut("{\"a\": 1}"));
        assert!(!cut("plain text"));
    }

    #[test]
    fn only_truthy_error_attributes_mark_a_failure() {
        let r = rec();
        let failed = |a: KeyValue| genai(&r, vec![s("gen_ai.tool.call.result", "ok"), a]).error;
        let b = |k: &str, v: bool| KeyValue {
            key: k.into(),
            key_strindex: 0,
            value: Some(AnyValue {
                value: Some(Value::BoolValue(v)),
            }),
        };
        assert!(!failed(b("error", false)));
        assert!(!failed(s(semconv::TOOL_ERROR, "")));
        assert!(!failed(s(semconv::TOOL_ERROR, "false")));
        assert!(!failed(s(semconv::ERROR_TYPE, " ")));
        assert!(!failed(i("error", 0)));
        assert!(failed(b("error", true)));
        assert!(failed(s(semconv::TOOL_ERROR, "file not found")));
        assert!(failed(s(semconv::ERROR_TYPE, "TimeoutError")));
    }

    #[test]
    fn text_in_brackets_and_deep_json_are_not_cut() {
        let r = rec();
        let cut = |v: &str| genai(&r, vec![s("gen_ai.tool.call.result", v)]).truncated_upstream;
        assert!(!cut("[INFO] started"), "a log line is not JSON");
        assert!(!cut("{name} was replaced"));
        assert!(!cut("[2024-01-01 10:00] job done\n[INFO] bye"));
        assert!(cut("{\"a\": [1, 2"), "a JSON document cut short");
        assert!(cut("[{\"path\": \"/etc/pass"), "cut inside a string");
        assert!(
            cut("{\"a\": 1,, \"b\": 2}"),
            "a whole document that does not parse"
        );
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(
            !cut(&deep),
            "valid JSON deeper than the parser's recursion limit"
        );
        // Declared JSON: any failure is a cut, text or not.
        assert!(json_cut(b"[INFO] started", true));
        assert!(!json_cut(deep.as_bytes(), true));
    }

    #[test]
    fn placeholders_and_missing_are_unknown_not_zero() {
        let r = rec();
        let t = tool(
            &r,
            "x",
            &span(
                "c",
                vec![
                    s("openinference.span.kind", "TOOL"),
                    s("output.value", "__REDACTED__"),
                ],
            ),
        );
        assert_eq!(t.size, Size::Unknown(Unknown::Placeholder));
        let t = genai(&r, vec![]);
        assert_eq!(t.size, Size::Unknown(Unknown::Missing));
        let t = tool(
            &r,
            "gcp.vertex.agent",
            &span(
                "execute_tool a",
                vec![s(OP, EXEC), s("gcp.vertex.agent.tool_response", "{}")],
            ),
        );
        assert_eq!(t.size, Size::Unknown(Unknown::Placeholder));
        let t = genai(&r, vec![s("error.type", "Timeout")]);
        assert_eq!(t.size, Size::Failed);
        assert!(t.error);
    }

    #[test]
    fn structured_content_is_measured_as_compact_json() {
        let r = rec();
        let kv = KeyValueList {
            values: vec![
                s("a", "x\"y"),
                KeyValue {
                    key: "b".into(),
                    key_strindex: 0,
                    value: Some(AnyValue {
                        value: Some(Value::ArrayValue(ArrayValue {
                            values: vec![
                                AnyValue {
                                    value: Some(Value::IntValue(12)),
                                },
                                AnyValue {
                                    value: Some(Value::BoolValue(true)),
                                },
                            ],
                        })),
                    }),
                },
            ],
        };
        let mut out = String::new();
        write_json(&Value::KvlistValue(kv.clone()), &mut out);
        assert_eq!(out, r#"{"a":"x\"y","b":[12,true]}"#);
        let t = genai(
            &r,
            vec![KeyValue {
                key: "gen_ai.tool.call.result".into(),
                key_strindex: 0,
                value: Some(AnyValue {
                    value: Some(Value::KvlistValue(kv)),
                }),
            }],
        );
        assert_eq!(
            t.size,
            Size::Known {
                bytes: out.len() as u64,
                source: SizeSource::Derived
            }
        );
    }

    #[test]
    fn foreign_arguments_hash_like_the_library() {
        let r = rec();
        let lib = crate::args_hash::args_hash(&serde_json::json!({"b": 1, "a": "x"})).unwrap();
        let a = genai(
            &r,
            vec![s("gen_ai.tool.call.arguments", r#"{"a":"x","b":1}"#)],
        );
        let b = tool(
            &r,
            "x",
            &span(
                "c",
                vec![
                    s("openinference.span.kind", "TOOL"),
                    s("input.value", r#"{"b": 1, "a": "x"}"#),
                ],
            ),
        );
        assert_eq!(a.args_hash.map(|h| h.to_string()), Some(lib.clone()));
        assert_eq!(b.args_hash.map(|h| h.to_string()), Some(lib));
        assert_eq!(ArgsHash::new("ééééééé").as_str(), "éééééé");
    }

    #[test]
    fn supplied_arguments_hash_must_be_hex() {
        let r = rec();
        let with = |h: &str| {
            tool(
                &r,
                "toolsize",
                &span(
                    "execute_tool grep",
                    vec![
                        s(OP, EXEC),
                        s(semconv::GEN_AI_TOOL_NAME, "grep"),
                        s(semconv::TOOL_ARGS_HASH, h),
                    ],
                ),
            )
            .args_hash
            .map(|h| h.to_string())
        };
        // A megabyte of non-hex, and of non-ASCII whose byte 12 is not a char boundary.
        assert_eq!(with(&"z".repeat(1 << 20)), None);
        assert_eq!(with(&format!("a{}", "é".repeat(1 << 19))), None);
        assert_eq!(with(""), None);
        assert_eq!(with("0123456789a"), None);
        assert_eq!(with("0123456789ABzz").as_deref(), Some("0123456789ab"));
        assert_eq!(
            with(&format!("0123456789ab{}", "x".repeat(1 << 20))).as_deref(),
            Some("0123456789ab")
        );
    }

    #[test]
    fn names_are_sanitised() {
        assert_eq!(sanitize_tool_name("a\u{0}b\nc", 128), "a_b_c");
        assert_eq!(sanitize_tool_name("", 128), "unknown");
        assert_eq!(sanitize_tool_name("ééééé", 5), "éé");
        assert_eq!(name_from_span("foo.tool"), "foo");
        assert_eq!(sanitize_tool_name("__overflow__", 128), "__overflow___tool");
    }

    #[test]
    fn bad_ids_are_invalid() {
        let r = rec();
        let mut sp = span("execute_tool a", vec![s(OP, EXEC)]);
        sp.trace_id = vec![1, 2];
        assert!(matches!(outcome(&r, "x", &sp), Outcome::Invalid(_)));
    }

    #[test]
    fn envelopes_are_removed() {
        let u = |env, s: &str| unwrap_content(env, s.as_bytes()).map(|(n, _)| n);
        let exact = |env, s: &str| unwrap_content(env, s.as_bytes()).map(|(_, e)| e);
        // Strings are exact; JSON results inside an envelope are re-serialised: approximate.
        assert_eq!(
            exact(Envelope::AdkResult, r#"{"result": "abc"}"#),
            Some(true)
        );
        assert_eq!(
            exact(Envelope::AdkResult, r#"{"result": [1, 2]}"#),
            Some(false)
        );
        assert_eq!(
            exact(
                Envelope::ToolMessage,
                r#"{"content": {"k": 1}, "tool_call_id": "c"}"#
            ),
            Some(false)
        );
        assert_eq!(exact(Envelope::JsonString, r#""abc""#), Some(true));
        // OpenLLMetry: json.dumps with \uXXXX escapes; the model got the decoded text.
        assert_eq!(u(Envelope::JsonString, r#""d\u00e9j\u00e0 vu""#), Some(9));
        assert_eq!(u(Envelope::JsonString, r#"{"a": 1}"#), None);
        // A dict result json.dumps'ed with escapes: its characters as UTF-8, the recorded
        // spacing and the ASCII escapes kept (what json.dumps(ensure_ascii=False) writes).
        let dict = serde_json::json!({"t": "déjà vu, Ωμέγα, 日本語, 😀", "q": "a\"b\n\u{1}"});
        let escaped = serde_json::to_string(&dict)
            .unwrap()
            .chars()
            .map(|c| match c as u32 {
                0x80..=0xFFFF => format!("\\u{:04x}", c as u32),
                cp @ 0x10000.. => {
                    let v = cp - 0x10000;
                    format!(
                        "\\u{:04x}\\u{:04x}",
                        0xD800 + (v >> 10),
                        0xDC00 + (v & 0x3FF)
                    )
                }
                _ => c.to_string(),
            })
            .collect::<String>();
        assert!(
            escaped.contains("\\ud83d\\ude00") && escaped.contains("\\u00e9"),
            "{escaped}"
        );
        let plain = serde_json::to_string(&dict).unwrap();
        assert_eq!(u(Envelope::JsonString, &escaped), Some(plain.len() as u64));
        assert_eq!(exact(Envelope::JsonString, &escaped), Some(false));
        assert_eq!(
            u(Envelope::JsonString, r#"[ "\u00e9" , "\\u00e9" ]"#),
            Some(20),
            "spacing kept; an escaped backslash is not an escape"
        );
        assert_eq!(u(Envelope::JsonString, "plain"), None);
        // LangChain + OpenInference: the ToolMessage's content, however it is wrapped.
        let msg = r#"{"content": "r\u00e9sultat", "type": "tool", "name": "t", "tool_call_id": "c1", "status": "success"}"#;
        assert_eq!(u(Envelope::ToolMessage, msg), Some(9));
        assert_eq!(
            u(Envelope::ToolMessage, &format!(r#"{{"output": {msg}}}"#)),
            Some(9)
        );
        let lc = r#"{"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "ToolMessage"], "kwargs": {"content": "abc", "tool_call_id": "c1"}}"#;
        assert_eq!(u(Envelope::ToolMessage, lc), Some(3));
        let data = r#"{"type": "tool", "data": {"content": "abcd", "type": "tool", "tool_call_id": "c1"}}"#;
        assert_eq!(u(Envelope::ToolMessage, data), Some(4));
        // A plain JSON result of an OpenInference tool is counted as recorded.
        assert_eq!(u(Envelope::ToolMessage, r#"{"content": "x"}"#), None);
        assert_eq!(u(Envelope::ToolMessage, "plain text"), None);
        // ADK: {"result": …} around a non-dict return value.
        assert_eq!(u(Envelope::AdkResult, r#"{"result": "abc"}"#), Some(3));
        assert_eq!(u(Envelope::AdkResult, r#"{"result": [1, 2]}"#), Some(5));
        assert_eq!(u(Envelope::AdkResult, r#"{"result": 1, "x": 2}"#), None);
        // Strands: content blocks.
        assert_eq!(
            u(Envelope::TextParts, r#"[{"text": "ab"}, {"text": "c"}]"#),
            Some(3)
        );
        assert_eq!(u(Envelope::TextParts, r#"[{"json": {}}]"#), None);
        assert_eq!(u(Envelope::None, r#""abc""#), None);
    }

    #[test]
    fn failed_calls_are_never_sized_whatever_their_output() {
        let r = rec();
        let mut sp = span(
            "execute_tool t",
            vec![
                s(OP, EXEC),
                s("output.value", "An error occurred while running the tool."),
            ],
        );
        sp.status = Some(Status {
            code: StatusCode::Error as i32,
            ..Status::default()
        });
        assert_eq!(tool(&r, "x", &sp).size, Size::Failed);
        let sp = span(
            "execute_tool t",
            vec![
                s(OP, EXEC),
                s("gen_ai.tool.status", "error"),
                s("gen_ai.tool.call.result", "Error: boom"),
            ],
        );
        assert_eq!(tool(&r, "x", &sp).size, Size::Failed);
    }

    #[test]
    fn summary_spans_are_not_tools() {
        let r = rec();
        let sp = span(
            "execute_tool (merged)",
            vec![s(OP, EXEC), s(semconv::GEN_AI_TOOL_NAME, "(merged tools)")],
        );
        assert!(matches!(
            outcome(&r, "gcp.vertex.agent", &sp),
            Outcome::Summary
        ));
        let sp = span(
            "execute_tool x",
            vec![s(OP, EXEC), s(semconv::GEN_AI_TOOL_NAME, "(merged tools)")],
        );
        assert!(matches!(outcome(&r, "x", &sp), Outcome::Summary));
    }

    #[test]
    fn learned_limits_flag_results_cut_at_one_length() {
        use crate::collector::state::{tests::limits, State};
        let r = rec();
        let text = |seed: u8| -> String {
            (0..1000)
                .map(|i| (b'a' + ((i as u8).wrapping_mul(7).wrapping_add(seed)) % 26) as char)
                .collect()
        };
        // Recognition takes the content's sample; the aggregator's state learns from it.
        let mut st = State::new(limits(10));
        let mut seen = Vec::new();
        for seed in 0..5 {
            let mut sp = span(
                "execute_tool t",
                vec![s(OP, EXEC), s("gen_ai.tool.call.result", &text(seed))],
            );
            sp.span_id = vec![seed + 1; 8];
            let t = tool(&r, "x", &sp);
            assert!(!t.truncated_upstream && t.sample.is_some());
            st.record(&t, 1_000_000);
            let v = st.tools_view(None, None, 1_000_000).unwrap();
            seen.push((
                v.tools[0].counters.truncated_upstream(),
                v.tools[0].counters.upstream_limit(),
            ));
        }
        // The third result teaches the limit: it and the two before it are counted cut.
        assert_eq!(
            seen,
            [
                (0, None),
                (0, None),
                (3, Some(1000)),
                (4, Some(1000)),
                (5, Some(1000))
            ]
        );
    }
}
