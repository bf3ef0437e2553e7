//! Decoding OTLP trace requests (protobuf, JSON, gzip) and turning them into tool records.
//!
//! Bodies are bounded before and after decompression: a gzip bomb stops at the limit plus one
//! byte and is refused as too large without inflating the rest. Decoding errors are returned,
//! never panics; the caller maps them to 400 / INVALID_ARGUMENT.

use std::io::Read;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

use std::sync::Arc;

use super::unrecognised::Item;
use super::{agents, context, wire};
use crate::collector::ingest::recognize::{
    Cuts, LabelCuts, Outcome, Recognizer, ToolNames, ToolRecord,
};
use crate::collector::stats::OtlpSignal;

/// A request body that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Larger than the limit after decompression.
    #[error("request body is larger than {limit} bytes after decompression")]
    TooLarge {
        /// The limit.
        limit: u64,
    },
    /// Not valid gzip.
    #[error("invalid gzip body: {0}")]
    Gzip(std::io::Error),
    /// Not a valid protobuf export request.
    #[error("invalid protobuf export request: {0}")]
    Protobuf(#[from] prost::DecodeError),
    /// Not a valid protobuf export request (zero-copy reader).
    #[error(transparent)]
    Wire(#[from] wire::WireError),
    /// Not a valid OTLP/JSON export request.
    #[error("invalid OTLP/JSON export request: {0}")]
    Json(#[from] serde_json::Error),
}

/// Inflates a gzip body, refusing to produce more than `limit` bytes.
pub(crate) fn gunzip(body: &[u8], limit: u64) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::with_capacity((body.len() * 4).min(limit as usize));
    flate2::read::MultiGzDecoder::new(body)
        .take(limit + 1)
        .read_to_end(&mut out)
        .map_err(DecodeError::Gzip)?;
    if out.len() as u64 > limit {
        return Err(DecodeError::TooLarge { limit });
    }
    Ok(out)
}

/// Decodes a binary protobuf request.
pub fn decode_protobuf(body: &[u8]) -> Result<ExportTraceServiceRequest, DecodeError> {
    Ok(ExportTraceServiceRequest::decode(body)?)
}

/// Decodes an OTLP/JSON request (hex ids, 64-bit integers as strings or numbers, unknown fields
/// ignored). Enums are accepted as numbers or, as the protobuf JSON mapping allows, by name
/// (`"kind": "SPAN_KIND_INTERNAL"`, `"code": "STATUS_CODE_ERROR"`); bodies that hold no enum
/// name take the direct path.
pub fn decode_json(body: &[u8]) -> Result<ExportTraceServiceRequest, DecodeError> {
    from_json(body)
}

/// Decodes OTLP/JSON, through [`named_enums_to_numbers`] only when the body names an enum, and
/// through [`nonfinite::Doubles`] only when an attribute's `doubleValue` is a string.
fn from_json<T>(body: &[u8]) -> Result<T, DecodeError>
where
    T: serde::de::DeserializeOwned + nonfinite::Restore,
{
    let doubles = nonfinite::Doubles::wanted(body);
    let named = named_enums_to_numbers(body)?;
    if !doubles {
        return match named {
            Some(v) => Ok(serde_json::from_value(v)?),
            None => Ok(serde_json::from_slice(body)?),
        };
    }
    let mut v = match named {
        Some(v) => v,
        None => serde_json::from_slice(body)?,
    };
    let marks = nonfinite::Doubles::mark(&mut v)?;
    let mut out: T = serde_json::from_value(v)?;
    out.restore(&marks);
    Ok(out)
}

/// `"doubleValue": "NaN"`, `"Infinity"`, `"-Infinity"` (and numbers written as strings), which
/// the proto3 JSON mapping allows and the OTLP types' own decoder refuses.
///
/// JSON numbers cannot hold the three non-finite values, so each is replaced in the parsed
/// document by a finite stand-in that no number of the document equals, decoded, and put back
/// in every attribute value of the decoded request (resource, scope, span, event, link, log
/// record and data point attributes, a log record's body, nested arrays and maps).
mod nonfinite {
    use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
    use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
    use opentelemetry_proto::tonic::metrics::v1::metric::Data;
    use serde_json::Value;

    use super::DecodeError;

    const KEY: &str = "doubleValue";

    /// The stand-ins of NaN, +∞ and −∞ in one document.
    pub(super) struct Doubles {
        nan: f64,
        inf: f64,
        neg_inf: f64,
    }

    impl Doubles {
        /// Whether `body` may hold a `doubleValue` given as a string.
        pub(super) fn wanted(body: &[u8]) -> bool {
            let mut at = 0;
            while let Some(i) = memchr::memmem::find(&body[at..], KEY.as_bytes()) {
                let rest = &body[at + i + KEY.len()..];
                let after = rest
                    .iter()
                    .position(|b| !matches!(b, b'"' | b':' | b' ' | b'\t' | b'\n' | b'\r'))
                    .map_or(rest, |p| &rest[..p]);
                if after.iter().filter(|b| **b == b'"').count() >= 2 {
                    return true;
                }
                at += i + KEY.len();
            }
            false
        }

        /// Replaces every string `doubleValue` in `v` by a number: its value, or the
        /// stand-in of a non-finite one. A string that is not a number is an error, as in the
        /// proto3 JSON mapping.
        pub(super) fn mark(v: &mut Value) -> Result<Self, DecodeError> {
            let mut numbers = Vec::new();
            collect(v, &mut numbers);
            // Finite values near the top of the range; the first three no number equals.
            let mut candidates = (0u64..).map(|k| f64::from_bits(0x7fef_ffff_ffff_f000 - k));
            let mut pick = || loop {
                let c = candidates.next().unwrap_or(f64::MAX);
                if !numbers.contains(&c) {
                    break c;
                }
            };
            let marks = Self {
                nan: pick(),
                inf: pick(),
                neg_inf: pick(),
            };
            marks.replace(v)?;
            Ok(marks)
        }

        fn replace(&self, v: &mut Value) -> Result<(), DecodeError> {
            match v {
                Value::Object(m) => {
                    for (k, x) in m.iter_mut() {
                        if k == KEY {
                            if let Value::String(text) = x {
                                let d = match text.trim() {
                                    "NaN" => self.nan,
                                    "Infinity" => self.inf,
                                    "-Infinity" => self.neg_inf,
                                    t => {
                                        t.parse::<f64>().ok().filter(|d| d.is_finite()).ok_or_else(
                                            || {
                                                DecodeError::Json(serde::de::Error::custom(
                                                    format!("doubleValue {text:?} is not a number"),
                                                ))
                                            },
                                        )?
                                    }
                                };
                                *x = serde_json::Number::from_f64(d)
                                    .map_or(Value::Null, Value::Number);
                                continue;
                            }
                        }
                        self.replace(x)?;
                    }
                }
                Value::Array(a) => a.iter_mut().try_for_each(|x| self.replace(x))?,
                _ => {}
            }
            Ok(())
        }

        fn back(&self, d: f64) -> f64 {
            if d == self.nan {
                f64::NAN
            } else if d == self.inf {
                f64::INFINITY
            } else if d == self.neg_inf {
                f64::NEG_INFINITY
            } else {
                d
            }
        }
    }

    fn collect(v: &Value, out: &mut Vec<f64>) {
        match v {
            Value::Number(n) => out.extend(n.as_f64()),
            Value::Object(m) => m.values().for_each(|x| collect(x, out)),
            Value::Array(a) => a.iter().for_each(|x| collect(x, out)),
            _ => {}
        }
    }

    fn any(v: &mut AnyValue, d: &Doubles) {
        match &mut v.value {
            Some(any_value::Value::DoubleValue(x)) => *x = d.back(*x),
            Some(any_value::Value::ArrayValue(a)) => a.values.iter_mut().for_each(|x| any(x, d)),
            Some(any_value::Value::KvlistValue(kv)) => attrs(&mut kv.values, d),
            _ => {}
        }
    }

    fn attrs(kvs: &mut [KeyValue], d: &Doubles) {
        for kv in kvs {
            if let Some(v) = &mut kv.value {
                any(v, d);
            }
        }
    }

    /// A request whose attribute values get their non-finite doubles back.
    pub(crate) trait Restore {
        /// Puts back the values `d` stood in for.
        fn restore(&mut self, d: &Doubles);
    }

    impl Restore for ExportTraceServiceRequest {
        fn restore(&mut self, d: &Doubles) {
            for rs in &mut self.resource_spans {
                if let Some(r) = &mut rs.resource {
                    attrs(&mut r.attributes, d);
                }
                for ss in &mut rs.scope_spans {
                    if let Some(s) = &mut ss.scope {
                        attrs(&mut s.attributes, d);
                    }
                    for span in &mut ss.spans {
                        attrs(&mut span.attributes, d);
                        for e in &mut span.events {
                            attrs(&mut e.attributes, d);
                        }
                        for l in &mut span.links {
                            attrs(&mut l.attributes, d);
                        }
                    }
                }
            }
        }
    }

    impl Restore for ExportLogsServiceRequest {
        fn restore(&mut self, d: &Doubles) {
            for rl in &mut self.resource_logs {
                if let Some(r) = &mut rl.resource {
                    attrs(&mut r.attributes, d);
                }
                for sl in &mut rl.scope_logs {
                    if let Some(s) = &mut sl.scope {
                        attrs(&mut s.attributes, d);
                    }
                    for log in &mut sl.log_records {
                        attrs(&mut log.attributes, d);
                        if let Some(b) = &mut log.body {
                            any(b, d);
                        }
                    }
                }
            }
        }
    }

    impl Restore for ExportMetricsServiceRequest {
        fn restore(&mut self, d: &Doubles) {
            for rm in &mut self.resource_metrics {
                if let Some(r) = &mut rm.resource {
                    attrs(&mut r.attributes, d);
                }
                for sm in &mut rm.scope_metrics {
                    if let Some(s) = &mut sm.scope {
                        attrs(&mut s.attributes, d);
                    }
                    for m in &mut sm.metrics {
                        attrs(&mut m.metadata, d);
                        match &mut m.data {
                            Some(Data::Gauge(g)) => g
                                .data_points
                                .iter_mut()
                                .for_each(|p| attrs(&mut p.attributes, d)),
                            Some(Data::Sum(s)) => s
                                .data_points
                                .iter_mut()
                                .for_each(|p| attrs(&mut p.attributes, d)),
                            Some(Data::Histogram(h)) => h
                                .data_points
                                .iter_mut()
                                .for_each(|p| attrs(&mut p.attributes, d)),
                            Some(Data::ExponentialHistogram(h)) => h
                                .data_points
                                .iter_mut()
                                .for_each(|p| attrs(&mut p.attributes, d)),
                            Some(Data::Summary(s)) => s
                                .data_points
                                .iter_mut()
                                .for_each(|p| attrs(&mut p.attributes, d)),
                            None => {}
                        }
                    }
                }
            }
        }
    }
}

/// The protobuf encoding of an OTLP/JSON request of `signal`, for the in-place readers. Traces
/// and logs are read for tool calls; metrics are not, but are converted too, to be forwarded as
/// they came. A request that does not decode is a 400.
pub(crate) fn json_to_protobuf(signal: OtlpSignal, body: &[u8]) -> Result<Vec<u8>, DecodeError> {
    match signal {
        OtlpSignal::Traces => Ok(decode_json(body)?.encode_to_vec()),
        OtlpSignal::Logs => Ok(from_json::<ExportLogsServiceRequest>(body)?.encode_to_vec()),
        OtlpSignal::Metrics => Ok(from_json::<ExportMetricsServiceRequest>(body)?.encode_to_vec()),
    }
}

/// Checks that a protobuf body is an `ExportMetricsServiceRequest` (nothing in it is kept).
pub(crate) fn check_metrics_protobuf(body: &[u8]) -> Result<(), DecodeError> {
    ExportMetricsServiceRequest::decode(body)?;
    Ok(())
}

/// The JSON of `body` with the enums that OTLP/JSON may name replaced by their numbers: a span's
/// `kind`, a status's `code`, a log record's `severityNumber`, a metric's
/// `aggregationTemporality`; `None` when the body names none. An unknown name is an error, as in
/// the protobuf JSON mapping.
fn named_enums_to_numbers(body: &[u8]) -> Result<Option<serde_json::Value>, DecodeError> {
    use opentelemetry_proto::tonic::logs::v1::SeverityNumber;
    use opentelemetry_proto::tonic::metrics::v1::AggregationTemporality;
    use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, status::StatusCode};
    use serde_json::Value;
    let named = |p: &[u8]| memchr::memmem::find(body, p).is_some();
    if ![
        "\"SPAN_KIND_",
        "\"STATUS_CODE_",
        "\"SEVERITY_NUMBER_",
        "\"AGGREGATION_TEMPORALITY_",
    ]
    .iter()
    .any(|p| named(p.as_bytes()))
    {
        return Ok(None);
    }
    let mut v: Value = serde_json::from_slice(body)?;
    fn number(key: &str, name: &str) -> Option<Result<i32, DecodeError>> {
        let n = match key {
            "kind" => SpanKind::from_str_name(name).map(|k| k as i32),
            "code" => StatusCode::from_str_name(name).map(|c| c as i32),
            "severityNumber" => SeverityNumber::from_str_name(name).map(|s| s as i32),
            "aggregationTemporality" => {
                AggregationTemporality::from_str_name(name).map(|a| a as i32)
            }
            _ => return None,
        };
        Some(n.ok_or_else(|| {
            DecodeError::Json(serde::de::Error::custom(format!("unknown {key} {name:?}")))
        }))
    }
    fn walk(v: &mut Value) -> Result<(), DecodeError> {
        match v {
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    if let Value::String(name) = x {
                        if let Some(n) = number(k, name) {
                            *x = Value::from(n?);
                            continue;
                        }
                    }
                    walk(x)?;
                }
            }
            Value::Array(a) => a.iter_mut().try_for_each(walk)?,
            _ => {}
        }
        Ok(())
    }
    walk(&mut v)?;
    Ok(Some(v))
}

/// What a request held.
#[derive(Debug, Default)]
pub struct Recognized {
    /// Tool spans.
    pub records: Vec<ToolRecord>,
    /// Spans that are not tool spans (ignored, counted).
    pub not_tool: u64,
    /// Tool spans that could not be used (rejected, counted), those of `invalid_size` included.
    pub invalid: u64,
    /// Tool spans refused for a size no result can have ([`INVALID_SIZE`](crate::collector::ingest::recognize::INVALID_SIZE)).
    pub(crate) invalid_size: u64,
    /// Why the first rejected span was rejected.
    pub(crate) invalid_reason: Option<&'static str>,
    /// Attributes past a span's first [`MAX_ATTRIBUTES_READ`], not looked at.
    pub(crate) attributes_ignored: u64,
    /// Service and tool names of tool spans that had to be cut or cleaned.
    pub(crate) label_cuts: LabelCuts,
    /// Spans and log records that are no tool call, per service, outside the coding agents'
    /// scopes ([`super::unrecognised`]).
    pub(crate) unrecognised: super::unrecognised::Seen,
    /// What the request tells of its sessions' context ([`super::context`]).
    pub(crate) context: super::context::ContextEvents,
}

/// Request bytes per log record the records of a logs request are reserved for
/// ([`Recognized::for_items`]): a `tool_result` record with the attributes the agents send is
/// larger, so a request of them never outgrows its room.
const LOG_RECORD_BYTES: usize = 256;

/// Attributes of one span that recognition looks at; later ones are ignored and counted.
pub(crate) const MAX_ATTRIBUTES_READ: usize =
    crate::collector::ingest::recognize::MAX_ATTRIBUTES_READ;

impl Recognized {
    /// Room for the records of a request of `body_len` bytes, reserved at once: grown by
    /// doubling, the records of a 512-span request were moved eight times (about 200 KB) and
    /// landed in freshly touched memory each time. One record per 512 request bytes covers
    /// requests whose items average that size or more (tool spans with their attributes do);
    /// smaller ones grow from there.
    fn for_body(body_len: usize) -> Self {
        Self::for_items(body_len, 512)
    }

    /// Room for one record per `item_bytes` of a request of `body_len` bytes. A coding agent's
    /// `tool_result` log record is smaller than a tool span (Claude Code's, 12 attributes: about
    /// 460 bytes), so a logs request reserves one per [`LOG_RECORD_BYTES`]: at one per 512, the
    /// records of a 512-record request outgrew their room, were copied once (about 180 KB) into
    /// fresh memory, and that copy and its page faults were 9 % of the daemon's time unpaced.
    fn for_items(body_len: usize, item_bytes: usize) -> Self {
        Self {
            records: Vec::with_capacity((body_len / item_bytes).clamp(16, 4096)),
            ..Self::default()
        }
    }

    /// Every span of the request.
    pub fn spans(&self) -> u64 {
        self.records.len() as u64 + self.not_tool + self.invalid
    }
}

/// The agent owning the scope being read, looked up once per run of items from one scope (the
/// reader hands every item of a scope the same string).
#[derive(Default)]
struct Owners<'a>(Option<(&'a str, Option<&'static agents::Agent>)>);

impl<'a> Owners<'a> {
    fn of(&mut self, scope: &'a str) -> Option<&'static agents::Agent> {
        match self.0 {
            Some((s, owner)) if std::ptr::eq(s, scope) => owner,
            _ => {
                let owner = agents::owner(scope);
                self.0 = Some((scope, owner));
                owner
            }
        }
    }
}

/// The sanitised `service.name` of the resource being read: the raw name is sanitised once per
/// run of items from one resource, not once per item.
#[derive(Default)]
struct Services<'a>(Option<(&'a str, Arc<str>, Cuts)>);

impl<'a> Services<'a> {
    /// The name and what was done to it. The items of one resource share its name's bytes, so
    /// the same slice is recognised by address before its bytes are compared; the name is
    /// lent, and cloned only by the records that keep it.
    ///
    /// Always inlined: called once a span, its answer came back through memory and was read
    /// back over the words just stored (a store-forwarding miss).
    #[inline(always)]
    fn of(&mut self, r: &Recognizer, raw: &'a str) -> (&Arc<str>, Cuts) {
        let same = matches!(&self.0, Some((name, ..)) if std::ptr::eq(*name, raw) || *name == raw);
        if !same {
            self.learn(r, raw);
        }
        let (_, arc, cut) = self.0.as_ref().expect("set above");
        (arc, *cut)
    }

    /// A resource's name, sanitised once for its items.
    #[cold]
    fn learn(&mut self, r: &Recognizer, raw: &'a str) {
        let (arc, cut) = r.service_name(raw);
        self.0 = Some((raw, arc, cut));
    }
}

impl Recognized {
    /// Adds the records of a coding agent's signals, read at `at` (a span with `tracestate`, or
    /// a log record: `""`).
    pub(crate) fn push_signals(
        &mut self,
        r: &Recognizer,
        service: &Arc<str>,
        cut: Cuts,
        signals: &[agents::Signal<'_>],
        at: agents::Origin<'_>,
        tracestate: &str,
    ) {
        for s in signals {
            if s.absurd_size {
                let why = crate::collector::ingest::recognize::INVALID_SIZE;
                self.invalid += 1;
                self.invalid_size += 1;
                self.invalid_reason.get_or_insert(why);
                continue;
            }
            let weight = r.sampling().of_span(service, tracestate);
            let (max_name, cuts) = (r.max_tool_name_bytes(), &mut self.label_cuts);
            // Made where it lies in the batch: made apart and pushed, each record (~400 bytes)
            // was copied once more, 2 % of the daemon's time on Claude Code's log records.
            let len = self.records.len();
            self.records.resize_with(len + 1, || {
                agents::record(service, s, at, max_name, cuts, weight)
            });
            self.label_cuts.service += cut;
        }
    }
}

/// Classifies every span of a protobuf-encoded request, reading it in place (see
/// [`super::wire`]). A malformed request is an error and nothing of it is kept.
pub fn recognize_protobuf(r: &Recognizer, body: &[u8]) -> Result<Recognized, DecodeError> {
    let mut out = Recognized::for_body(body.len());
    let mut services = Services::default();
    let mut owners = Owners::default();
    let mut signals = Vec::new();
    let mut names = ToolNames::default();
    let ledger = r.context_ledger();
    if ledger {
        // At most one context event a span: room for them once, as for the records.
        out.context.reserve(out.records.capacity());
    }
    wire::for_each_span(body, |svc, scope, span| {
        let (arc, cut) = services.of(r, svc);
        out.attributes_ignored += span.attrs.len().saturating_sub(MAX_ATTRIBUTES_READ) as u64;
        if let Some(agent) = owners.of(scope) {
            signals.clear();
            if (agent.span)(span, &mut signals) == agents::SpanVerdict::NotTool {
                out.not_tool += 1;
                return;
            }
            let at = agents::Origin {
                trace_id: span.trace_id,
                span_id: span.span_id,
                span_us: Some(span.end.saturating_sub(span.start) / 1000),
            };
            let before = out.records.len();
            out.push_signals(r, arc, cut, &signals, at, span.trace_state);
            if ledger && agent.stack.name == agents::codex::AGENT.stack.name {
                let pushed = &out.records[before..];
                context::from_codex_span(arc, span, pushed, &mut out.context);
            }
            return;
        }
        match r.recognize_counting(
            arc,
            scope,
            span,
            &mut out.label_cuts,
            &mut names,
            &mut out.records,
        ) {
            Outcome::Tool(()) => {
                out.label_cuts.service += cut;
                if ledger {
                    let last = out.records.len().checked_sub(1);
                    let tool = last.map(|n| (n, &out.records[n]));
                    context::from_span(arc, span, tool, &mut out.context);
                }
            }
            Outcome::Summary => {
                // A model span listing the tool calls it asked for (the Vercel AI SDK's
                // `doGenerate`) is a summary of them, and a model request.
                out.not_tool += 1;
                if ledger {
                    context::from_span(arc, span, None, &mut out.context);
                }
            }
            Outcome::NotRun => out.not_tool += 1,
            Outcome::NotTool => {
                out.not_tool += 1;
                if ledger {
                    context::from_span(arc, span, None, &mut out.context);
                }
                out.unrecognised
                    .add(r.unrecognised(), arc, scope, Item::Span, || {
                        span.attrs.iter().map(|(k, _)| *k).collect()
                    });
            }
            Outcome::Invalid(why) => {
                out.invalid += 1;
                if why == crate::collector::ingest::recognize::INVALID_SIZE {
                    out.invalid_size += 1;
                }
                out.invalid_reason.get_or_insert(why);
            }
        }
    })?;
    Ok(out)
}

/// Reads every log record of a protobuf-encoded `ExportLogsServiceRequest` in place: the tool
/// calls of the coding agents ([`agents`]) and `tool_result` events of other emitters become
/// records; every other record is counted as not a tool call.
pub fn recognize_logs_protobuf(r: &Recognizer, body: &[u8]) -> Result<Recognized, DecodeError> {
    let mut out = Recognized::for_items(body.len(), LOG_RECORD_BYTES);
    let mut services = Services::default();
    let mut owners = Owners::default();
    let mut signals = Vec::new();
    let ledger = r.context_ledger();
    if ledger {
        out.context.reserve(out.records.capacity());
    }
    wire::for_each_log(body, |svc, scope, log| {
        let (arc, cut) = services.of(r, svc);
        signals.clear();
        let owner = owners.of(scope);
        match owner {
            Some(agent) => (agent.log)(log, &mut signals),
            None => agents::tool_result_log::log(log, &mut signals),
        }
        let before = out.records.len();
        if !signals.is_empty() {
            let at = agents::Origin {
                trace_id: log.trace_id,
                span_id: log.span_id,
                span_us: None,
            };
            out.push_signals(r, arc, cut, &signals, at, "");
        }
        if ledger {
            let agent = owner.map(|a| a.stack.name);
            let pushed = &out.records[before..];
            context::from_log(agent, arc, log, pushed, &mut out.context);
        }
        if signals.is_empty() {
            out.not_tool += 1;
            if owner.is_none() {
                out.unrecognised
                    .add(r.unrecognised(), arc, scope, Item::Log, || {
                        log.attrs.iter().map(|(k, _)| *k).collect()
                    });
            }
        }
    })?;
    Ok(out)
}

/// Classifies every span of a decoded request (re-encodes it; the JSON path).
pub fn recognize_request(r: &Recognizer, req: &ExportTraceServiceRequest) -> Recognized {
    recognize_protobuf(r, &req.encode_to_vec()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Metrics as OTLP/JSON exporters write them (gauges, sums, histograms, 64-bit integers as
    /// strings, named temporality) convert to the same protobuf, data points included.
    #[test]
    fn metrics_json_converts_in_full() {
        let body = br#"{"resourceMetrics":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"gemini-cli"}}]},"scopeMetrics":[{"scope":{"name":"gemini-cli","version":"0.61.0"},"metrics":[
            {"name":"g","unit":"1","gauge":{"dataPoints":[{"timeUnixNano":"1700000000000000000","asDouble":1.5,"attributes":[{"key":"k","value":{"boolValue":true}}]}]}},
            {"name":"s","sum":{"aggregationTemporality":"AGGREGATION_TEMPORALITY_CUMULATIVE","isMonotonic":true,"dataPoints":[{"startTimeUnixNano":"1","timeUnixNano":"2","asInt":"42"}]}},
            {"name":"h","histogram":{"aggregationTemporality":2,"dataPoints":[{"timeUnixNano":"2","count":"3","sum":6.5,"bucketCounts":["1","2"],"explicitBounds":[1.0],"min":0.5,"max":4}]}}
        ]}]}]}"#;
        let pb = json_to_protobuf(OtlpSignal::Metrics, body).unwrap();
        let req = ExportMetricsServiceRequest::decode(&pb[..]).unwrap();
        let metrics = &req.resource_metrics[0].scope_metrics[0].metrics;
        assert_eq!(metrics.len(), 3);
        use opentelemetry_proto::tonic::metrics::v1::metric::Data;
        let Some(Data::Sum(sum)) = &metrics[1].data else {
            panic!("{:?}", metrics[1]);
        };
        assert_eq!(sum.aggregation_temporality, 2);
        let Some(Data::Histogram(h)) = &metrics[2].data else {
            panic!("{:?}", metrics[2]);
        };
        assert_eq!(h.data_points[0].bucket_counts, [1, 2]);
    }
    use std::io::Write;

    #[test]
    fn gzip_bomb_stops_at_the_limit() {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        enc.write_all(&vec![0u8; 50 << 20]).unwrap();
        let bomb = enc.finish().unwrap();
        assert!(bomb.len() < 100_000);
        assert!(matches!(
            gunzip(&bomb, 1 << 20),
            Err(DecodeError::TooLarge { .. })
        ));
        assert!(matches!(
            gunzip(b"not gzip", 1 << 20),
            Err(DecodeError::Gzip(_))
        ));
    }

    /// The proto3 JSON mapping writes non-finite doubles as strings; they decode to themselves
    /// wherever an attribute value may stand, and a number equal to a stand-in is left alone.
    #[test]
    fn non_finite_doubles_as_strings_decode() {
        use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
        let stand_in = f64::from_bits(0x7fef_ffff_ffff_f000);
        let body = format!(
            r#"{{"resourceSpans":[{{"resource":{{"attributes":[{{"key":"r","value":{{"doubleValue":"-Infinity"}}}}]}},
              "scopeSpans":[{{"scope":{{"name":"x"}},"spans":[{{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708",
              "name":"s","attributes":[{{"key":"a","value":{{"doubleValue":"Infinity"}}}},{{"key":"b","value":{{"doubleValue": "NaN"}}}},
              {{"key":"c","value":{{"doubleValue":"2.5"}}}},{{"key":"d","value":{{"doubleValue":{stand_in:e}}}}},
              {{"key":"e","value":{{"arrayValue":{{"values":[{{"doubleValue":"Infinity"}}]}}}}}}],
              "events":[{{"name":"ev","attributes":[{{"key":"f","value":{{"doubleValue":"NaN"}}}}]}}]}}]}}]}}]}}"#
        );
        let req = decode_json(body.as_bytes()).unwrap();
        let rs = &req.resource_spans[0];
        let d = |v: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>| match v
            .as_ref()
            .and_then(|v| v.value.clone())
        {
            Some(V::DoubleValue(d)) => d,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            d(&rs.resource.as_ref().unwrap().attributes[0].value),
            f64::NEG_INFINITY
        );
        let span = &rs.scope_spans[0].spans[0];
        assert_eq!(d(&span.attributes[0].value), f64::INFINITY);
        assert!(d(&span.attributes[1].value).is_nan());
        assert_eq!(d(&span.attributes[2].value), 2.5);
        assert_eq!(d(&span.attributes[3].value), stand_in);
        let Some(V::ArrayValue(a)) = span.attributes[4]
            .value
            .as_ref()
            .and_then(|v| v.value.clone())
        else {
            panic!()
        };
        assert_eq!(a.values[0].value, Some(V::DoubleValue(f64::INFINITY)));
        assert!(d(&span.events[0].attributes[0].value).is_nan());
        // Logs too; a string that is no number is still refused.
        let logs = br#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"doubleValue":"Infinity"}}]}]}]}"#;
        let pb = json_to_protobuf(OtlpSignal::Logs, logs).unwrap();
        let req = ExportLogsServiceRequest::decode(&pb[..]).unwrap();
        let body = &req.resource_logs[0].scope_logs[0].log_records[0].body;
        assert_eq!(d(body), f64::INFINITY);
        let bad = br#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"doubleValue":"lots"}}]}]}]}"#;
        assert!(json_to_protobuf(OtlpSignal::Logs, bad).is_err());
    }

    #[test]
    fn json_mapping_hex_ids_and_string_ints() {
        let body = br#"{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]},
          "scopeSpans":[{"scope":{"name":"x"},"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708",
          "name":"execute_tool grep","kind":1,"startTimeUnixNano":"1000000","endTimeUnixNano":"3000000","unknownField":7,
          "attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"execute_tool"}},
                        {"key":"tool.result.bytes","value":{"intValue":"4096"}}]}]}]}]}"#;
        let req = decode_json(body).unwrap();
        let span = &req.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(span.trace_id, (1..=16).collect::<Vec<u8>>());
        assert_eq!(span.start_time_unix_nano, 1_000_000);
        let r = Recognizer::new(&Default::default(), 128);
        let rec = recognize_request(&r, &req);
        assert_eq!(rec.records.len(), 1);
        assert_eq!(&*rec.records[0].service, "svc");
        assert!(decode_json(br#"{"resourceSpans":"nope"}"#).is_err());
    }

    #[test]
    fn json_enum_names_are_accepted() {
        let body = |kind: &str, code: &str| {
            format!(
                r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{{"traceId":"0102030405060708090a0b0c0d0e0f10",
                "spanId":"0102030405060708","name":"execute_tool grep","kind":{kind},
                "status":{{"code":{code},"message":"boom"}},
                "attributes":[{{"key":"gen_ai.operation.name","value":{{"stringValue":"execute_tool"}}}}]}}]}}]}}]}}"#
            )
        };
        let req = decode_json(body(r#""SPAN_KIND_INTERNAL""#, r#""STATUS_CODE_ERROR""#).as_bytes())
            .unwrap();
        let span = &req.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!((span.kind, span.status.as_ref().unwrap().code), (1, 2));
        let req = decode_json(body("3", "1").as_bytes()).unwrap();
        let span = &req.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!((span.kind, span.status.as_ref().unwrap().code), (3, 1));
        let e = decode_json(body(r#""SPAN_KIND_NOPE""#, "0").as_bytes()).unwrap_err();
        assert!(e.to_string().contains("SPAN_KIND_NOPE"), "{e}");
        // A failed call reported by name is recognised as failed.
        let r = Recognizer::new(&Default::default(), 128);
        let req = decode_json(body(r#""SPAN_KIND_CLIENT""#, r#""STATUS_CODE_ERROR""#).as_bytes())
            .unwrap();
        assert!(recognize_request(&r, &req).records[0].error);
    }
}
