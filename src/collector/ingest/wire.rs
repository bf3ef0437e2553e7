//! A zero-copy reader of OTLP export requests in protobuf: spans (`ExportTraceServiceRequest`)
//! and log records (`ExportLogsServiceRequest`) are visited as views borrowing from the request
//! bytes, reading only the fields recognition needs. Both requests share one layout (resource →
//! scopes → items), walked once by [`for_each_item`].
//!
//! This is the hot path of the daemon: decoding into owned prost structs cost about 2 µs per
//! span (one allocation per attribute key and value); visiting views costs a fraction of that.
//! Every length, varint and UTF-8 string that is read is checked, and a truncated or malformed
//! message is an error (answered 400 / INVALID_ARGUMENT). Fields that are not read (links,
//! trace state, schema URLs, …) are skipped by wire type; unknown fields are ignored, as
//! protobuf requires.

use opentelemetry_proto::tonic::common::v1::{any_value::Value, ArrayValue, KeyValueList};
use prost::Message;

/// A malformed message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid protobuf export request: {0}")]
pub struct WireError(pub(crate) &'static str);

type R<T> = Result<T, WireError>;

/// A cursor over protobuf bytes.
#[derive(Debug, Clone, Copy)]
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

#[derive(Debug, Clone, Copy)]
enum Field<'a> {
    Varint(u64),
    Fixed64(u64),
    Len(&'a [u8]),
    Fixed32,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    #[inline(always)]
    fn varint(&mut self) -> R<u64> {
        if let Some(&b) = self.buf.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(u64::from(b));
            }
        }
        let mut v: u64 = 0;
        for i in 0..10 {
            let b = *self
                .buf
                .get(self.pos)
                .ok_or(WireError("truncated varint"))?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(WireError("varint too long"))
    }

    #[inline(always)]
    fn take(&mut self, n: usize) -> R<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.buf.len())
            .ok_or(WireError("length past the end of the message"))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    /// The next (field number, value), or `None` at the end.
    #[inline(always)]
    fn next(&mut self) -> R<Option<(u32, Field<'a>)>> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let num = u32::try_from(key >> 3).map_err(|_| WireError("field number too large"))?;
        if num == 0 {
            return Err(WireError("field number 0"));
        }
        let f = match key & 7 {
            0 => Field::Varint(self.varint()?),
            1 => Field::Fixed64(u64::from_le_bytes(
                self.take(8)?.try_into().expect("8 bytes"),
            )),
            2 => {
                let n =
                    usize::try_from(self.varint()?).map_err(|_| WireError("length too large"))?;
                Field::Len(self.take(n)?)
            }
            5 => {
                self.take(4)?;
                Field::Fixed32
            }
            _ => return Err(WireError("unsupported wire type")),
        };
        Ok(Some((num, f)))
    }
}

fn utf8(b: &[u8]) -> R<&str> {
    std::str::from_utf8(b).map_err(|_| WireError("string is not UTF-8"))
}

/// `b`, checked as UTF-8 and kept as bytes. Short names are ASCII: checked a word at a time,
/// where `str::from_utf8` walks a string shorter than its aligned blocks byte by byte (about
/// 120 instructions for a 20-byte span name, once a span).
fn utf8_bytes(b: &[u8]) -> R<&[u8]> {
    if b.is_ascii() || std::str::from_utf8(b).is_ok() {
        Ok(b)
    } else {
        Err(WireError("string is not UTF-8"))
    }
}

fn len(f: Field<'_>) -> R<&[u8]> {
    match f {
        Field::Len(b) => Ok(b),
        _ => Err(WireError("wrong wire type for a message or string field")),
    }
}

/// An attribute value, borrowed from the request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum AttrValue<'a> {
    /// `string_value`, raw bytes: not yet checked as UTF-8 (sizes are byte counts, and most
    /// values are never read as text); see [`AttrValue::as_str`].
    Str(&'a [u8]),
    /// `bool_value`.
    Bool(bool),
    /// `int_value`.
    Int(i64),
    /// `double_value`.
    Double(f64),
    /// `bytes_value`.
    Bytes(&'a [u8]),
    /// `array_value`, still encoded.
    Array(&'a [u8]),
    /// `kvlist_value`, still encoded.
    Kvlist(&'a [u8]),
}

impl<'a> AttrValue<'a> {
    /// The string value, when this is a string and valid UTF-8.
    pub(crate) fn as_str(&self) -> Option<&'a str> {
        match *self {
            AttrValue::Str(b) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }

    /// The owned OTLP value (decodes nested arrays and maps); used off the hot path.
    pub(crate) fn to_owned_value(self) -> Option<Value> {
        Some(match self {
            AttrValue::Str(s) => Value::StringValue(String::from_utf8_lossy(s).into_owned()),
            AttrValue::Bool(b) => Value::BoolValue(b),
            AttrValue::Int(i) => Value::IntValue(i),
            AttrValue::Double(d) => Value::DoubleValue(d),
            AttrValue::Bytes(b) => Value::BytesValue(b.to_vec()),
            AttrValue::Array(b) => Value::ArrayValue(ArrayValue::decode(b).ok()?),
            AttrValue::Kvlist(b) => Value::KvlistValue(KeyValueList::decode(b).ok()?),
        })
    }
}

/// Reads one `KeyValue` (key as raw bytes); `None` value when the `AnyValue` is empty or unknown.
///
/// Always inlined: called, it returns its 40 bytes through memory, and the caller's copy of
/// the value (read back as 16 bytes over the words just stored) missed store forwarding on
/// every attribute: a quarter of the request walk's samples sat on that one load.
#[inline(always)]
fn key_value(b: &[u8]) -> R<(&[u8], Option<AttrValue<'_>>)> {
    // Fast path for the layout every SDK writes: key (field 1) then value (field 2), both with
    // one-byte lengths, the value holding exactly one field.
    if let [0x0a, kl, rest @ ..] = b {
        let kl = usize::from(*kl);
        if kl < 0x80 && rest.len() > kl {
            let (key, rest) = rest.split_at(kl);
            if let [0x12, vl, v @ ..] = rest {
                if usize::from(*vl) == v.len() && *vl < 0x80 {
                    if let Some(value) = any_value_fast(v) {
                        return Ok((key, value));
                    }
                }
            }
        }
    }
    let mut r = Reader::new(b);
    let mut key: &[u8] = &[];
    let mut value = None;
    while let Some((n, f)) = r.next()? {
        match n {
            1 => key = len(f)?,
            2 => value = any_value(len(f)?)?,
            _ => {}
        }
    }
    Ok((key, value))
}

/// One-field `AnyValue` with a one-byte length or tag; `None` to use the general path.
#[inline(always)]
fn any_value_fast(v: &[u8]) -> Option<Option<AttrValue<'_>>> {
    match v {
        [] => Some(None),
        [0x0a, l, s @ ..] if usize::from(*l) == s.len() && *l < 0x80 => {
            Some(Some(AttrValue::Str(s)))
        }
        [0x10, b] if *b < 0x80 => Some(Some(AttrValue::Bool(*b != 0))),
        [0x18, rest @ ..] => {
            let mut r = Reader::new(rest);
            let v = r.varint().ok()?;
            (r.pos == rest.len()).then_some(Some(AttrValue::Int(v as i64)))
        }
        [0x21, d @ ..] if d.len() == 8 => Some(Some(AttrValue::Double(f64::from_le_bytes(
            d.try_into().ok()?,
        )))),
        _ => None,
    }
}

#[inline]
fn any_value(b: &[u8]) -> R<Option<AttrValue<'_>>> {
    let mut r = Reader::new(b);
    let mut out = None;
    while let Some((n, f)) = r.next()? {
        out = match (n, f) {
            (1, Field::Len(s)) => Some(AttrValue::Str(s)),
            (2, Field::Varint(v)) => Some(AttrValue::Bool(v != 0)),
            (3, Field::Varint(v)) => Some(AttrValue::Int(v as i64)),
            (4, Field::Fixed64(v)) => Some(AttrValue::Double(f64::from_bits(v))),
            (5, Field::Len(s)) => Some(AttrValue::Array(s)),
            (6, Field::Len(s)) => Some(AttrValue::Kvlist(s)),
            (7, Field::Len(s)) => Some(AttrValue::Bytes(s)),
            (1..=7, _) => return Err(WireError("wrong wire type in AnyValue")),
            _ => out,
        };
    }
    Ok(out)
}

/// A span, borrowed from the request. `attrs` and `events` are reused between spans.
#[derive(Debug, Default)]
pub(crate) struct SpanView<'a> {
    /// Span name, as raw bytes: checked as UTF-8 when read (a name that is not is a malformed
    /// request), compared as bytes.
    pub(crate) name: &'a [u8],
    /// Trace id bytes.
    pub(crate) trace_id: &'a [u8],
    /// Span id bytes.
    pub(crate) span_id: &'a [u8],
    /// W3C `tracestate` (empty when none).
    pub(crate) trace_state: &'a str,
    /// Parent span id bytes (empty for a root span).
    pub(crate) parent_span_id: &'a [u8],
    /// Start, Unix nanoseconds.
    pub(crate) start: u64,
    /// End, Unix nanoseconds.
    pub(crate) end: u64,
    /// Status code (0 unset, 1 ok, 2 error).
    pub(crate) status_code: i32,
    /// Attributes with a value; keys as raw bytes.
    pub(crate) attrs: Vec<(&'a [u8], AttrValue<'a>)>,
    /// Encoded events, read lazily.
    pub(crate) events: Vec<&'a [u8]>,
}

impl<'a> SpanView<'a> {
    fn read(&mut self, b: &'a [u8]) -> R<()> {
        self.name = &[];
        self.trace_id = &[];
        self.span_id = &[];
        self.trace_state = "";
        self.parent_span_id = &[];
        self.start = 0;
        self.end = 0;
        self.status_code = 0;
        self.attrs.clear();
        self.events.clear();
        let mut r = Reader::new(b);
        while let Some((n, f)) = r.next()? {
            match n {
                1 => self.trace_id = len(f)?,
                2 => self.span_id = len(f)?,
                // Not UTF-8: read as absent, never a reason to refuse the span.
                3 => self.trace_state = std::str::from_utf8(len(f)?).unwrap_or(""),
                4 => self.parent_span_id = len(f)?,
                5 => self.name = utf8_bytes(len(f)?)?,
                7 | 8 => {
                    let Field::Fixed64(v) = f else {
                        return Err(WireError("wrong wire type for a timestamp"));
                    };
                    if n == 7 {
                        self.start = v;
                    } else {
                        self.end = v;
                    }
                }
                9 => {
                    if let (k, Some(v)) = key_value(len(f)?)? {
                        self.attrs.push((k, v));
                    }
                }
                11 => self.events.push(len(f)?),
                15 => {
                    let mut s = Reader::new(len(f)?);
                    while let Some((n, f)) = s.next()? {
                        if let (3, Field::Varint(c)) = (n, f) {
                            self.status_code = c as i32;
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The string value of attribute `key` of the first event named `event`.
    pub(crate) fn event_attr(&self, event: &str, key: &str) -> Option<AttrValue<'a>> {
        self.events.iter().find_map(|e| {
            let mut r = Reader::new(e);
            let mut name = "";
            let mut found = None;
            while let Ok(Some((n, f))) = r.next() {
                match (n, f) {
                    (2, Field::Len(s)) => name = utf8(s).ok()?,
                    (3, Field::Len(s)) if found.is_none() => {
                        if let Ok((k, v)) = key_value(s) {
                            if k == key.as_bytes() {
                                found = v;
                            }
                        }
                    }
                    _ => {}
                }
            }
            (name == event).then_some(found).flatten()
        })
    }
}

/// One span event, borrowed from the request.
#[derive(Debug, Default)]
pub(crate) struct EventView<'a> {
    /// Event name.
    pub(crate) name: &'a str,
    /// Time, Unix nanoseconds (0 when unset).
    pub(crate) time: u64,
    /// Attributes with a value; keys as raw bytes.
    pub(crate) attrs: Vec<(&'a [u8], AttrValue<'a>)>,
}

impl<'a> EventView<'a> {
    /// Reads an encoded `Span.Event` into this view (its buffers reused).
    pub(crate) fn read(&mut self, b: &'a [u8]) -> R<()> {
        self.name = "";
        self.time = 0;
        self.attrs.clear();
        let mut r = Reader::new(b);
        while let Some((n, f)) = r.next()? {
            match n {
                1 => {
                    if let Field::Fixed64(v) = f {
                        self.time = v;
                    }
                }
                2 => self.name = utf8(len(f)?)?,
                3 => {
                    if let (k, Some(v)) = key_value(len(f)?)? {
                        self.attrs.push((k, v));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// A log record, borrowed from the request. `attrs` is reused between records.
#[derive(Debug, Default)]
pub(crate) struct LogView<'a> {
    /// `event_name` (OTLP 1.5+; most SDKs put it in the `event.name` attribute instead).
    pub(crate) event_name: &'a str,
    /// The body, when it is a scalar.
    pub(crate) body: Option<AttrValue<'a>>,
    /// Trace id bytes (empty when the record was not emitted in a span).
    pub(crate) trace_id: &'a [u8],
    /// Span id bytes.
    pub(crate) span_id: &'a [u8],
    /// Time, Unix nanoseconds (0 when unset: then `observed`).
    pub(crate) time: u64,
    /// Observed time, Unix nanoseconds.
    pub(crate) observed: u64,
    /// Attributes with a value; keys as raw bytes.
    pub(crate) attrs: Vec<(&'a [u8], AttrValue<'a>)>,
}

impl<'a> LogView<'a> {
    fn read(&mut self, b: &'a [u8]) -> R<()> {
        self.event_name = "";
        self.body = None;
        self.trace_id = &[];
        self.span_id = &[];
        self.time = 0;
        self.observed = 0;
        self.attrs.clear();
        let mut r = Reader::new(b);
        while let Some((n, f)) = r.next()? {
            match (n, f) {
                (1, Field::Fixed64(v)) => self.time = v,
                (11, Field::Fixed64(v)) => self.observed = v,
                (1 | 11, _) => return Err(WireError("wrong wire type for a timestamp")),
                (5, f) => self.body = any_value(len(f)?)?,
                (6, f) => {
                    if let (k, Some(v)) = key_value(len(f)?)? {
                        self.attrs.push((k, v));
                    }
                }
                (9, f) => self.trace_id = len(f)?,
                (10, f) => self.span_id = len(f)?,
                (12, f) => self.event_name = utf8(len(f)?)?,
                _ => {}
            }
        }
        Ok(())
    }
}

/// Visits every item of an encoded export request as (service.name, scope name, item bytes):
/// the spans of an `ExportTraceServiceRequest`, the log records of an `ExportLogsServiceRequest`
/// (both nest resource (1) → scope containers (2) → scope (1) and items (2)). Stops at the first
/// malformed part and returns its error (items visited before it were already seen by `visit`,
/// so callers collect into a buffer and discard it on error).
pub(crate) fn for_each_item<'a>(
    body: &'a [u8],
    mut visit: impl FnMut(&'a str, &'a str, &'a [u8]) -> R<()>,
) -> R<()> {
    let mut req = Reader::new(body);
    while let Some((n, f)) = req.next()? {
        if n != 1 {
            continue;
        }
        let rs = len(f)?;
        // The resource may come after the scopes on the wire: find it first.
        let mut service = "";
        let mut r = Reader::new(rs);
        while let Some((n, f)) = r.next()? {
            if n == 1 {
                let mut res = Reader::new(len(f)?);
                while let Some((n, f)) = res.next()? {
                    if n == 1 {
                        if let (b"service.name", Some(AttrValue::Str(s))) = key_value(len(f)?)? {
                            service = utf8(s)?;
                        }
                    }
                }
            }
        }
        let mut r = Reader::new(rs);
        while let Some((n, f)) = r.next()? {
            if n != 2 {
                continue;
            }
            let ss = len(f)?;
            let mut scope = "";
            let mut s = Reader::new(ss);
            while let Some((n, f)) = s.next()? {
                if n == 1 {
                    let mut sc = Reader::new(len(f)?);
                    while let Some((n, f)) = sc.next()? {
                        if n == 1 {
                            scope = utf8(len(f)?)?;
                        }
                    }
                }
            }
            let mut s = Reader::new(ss);
            while let Some((n, f)) = s.next()? {
                if n == 2 {
                    visit(service, scope, len(f)?)?;
                }
            }
        }
    }
    Ok(())
}

/// Visits every span of an encoded `ExportTraceServiceRequest` as (service.name, scope name,
/// span); see [`for_each_item`].
pub(crate) fn for_each_span<'a>(
    body: &'a [u8],
    mut visit: impl FnMut(&'a str, &'a str, &SpanView<'a>),
) -> R<()> {
    let mut view = SpanView::default();
    for_each_item(body, |service, scope, b| {
        view.read(b)?;
        visit(service, scope, &view);
        Ok(())
    })
}

/// Visits every log record of an encoded `ExportLogsServiceRequest` as (service.name, scope
/// name, record); see [`for_each_item`].
pub(crate) fn for_each_log<'a>(
    body: &'a [u8],
    mut visit: impl FnMut(&'a str, &'a str, &LogView<'a>),
) -> R<()> {
    let mut view = LogView::default();
    for_each_item(body, |service, scope, b| {
        view.read(b)?;
        visit(service, scope, &view);
        Ok(())
    })
}

/// An encoded `ExportTraceServiceRequest` holding `spans` under one resource and one scope,
/// neither named (for tests).
#[cfg(test)]
pub(crate) fn encode_spans(spans: Vec<opentelemetry_proto::tonic::trace::v1::Span>) -> Vec<u8> {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans};
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue};
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{
        span::Event, ResourceSpans, ScopeSpans, Span, Status,
    };

    fn kv(k: &str, v: Value) -> KeyValue {
        KeyValue {
            key: k.into(),
            value: Some(AnyValue { value: Some(v) }),
            ..Default::default()
        }
    }

    #[test]
    fn a_span_name_is_read_when_utf8_and_refused_when_not() {
        let encoded = |name: &str| {
            encode_spans(vec![Span {
                trace_id: vec![1; 16],
                span_id: vec![2; 8],
                name: name.into(),
                ..Default::default()
            }])
        };
        let names = |body: &[u8]| {
            let mut seen = Vec::new();
            for_each_span(body, |_, _, v| seen.push(v.name.to_vec())).map(|()| seen)
        };
        for name in [
            "",
            "execute_tool search",
            "exécuter l’outil",
            "工具 🚀",
            &"a".repeat(200),
        ] {
            assert_eq!(
                names(&encoded(name)),
                Ok(vec![name.as_bytes().to_vec()]),
                "{name}"
            );
        }
        // The same lengths with one byte made invalid: a lone continuation byte, a lead byte
        // without its continuation, an overlong form; in short and long names, at every place.
        for name in ["abcdefgh", "execute_tool search", &"é".repeat(40)] {
            for at in 0..name.len() {
                for bad in [0x80u8, 0xc3, 0xff] {
                    let mut body = encoded(name);
                    let pos = body
                        .windows(name.len())
                        .rposition(|w| w == name.as_bytes())
                        .expect("the name is in the request");
                    body[pos + at] = bad;
                    let valid = std::str::from_utf8(&body[pos..pos + name.len()]).is_ok();
                    assert_eq!(names(&body).is_ok(), valid, "{name} with {bad:#x} at {at}");
                    if !valid {
                        assert_eq!(names(&body), Err(WireError("string is not UTF-8")));
                    }
                }
            }
        }
    }

    #[test]
    fn views_match_prost() {
        let span = Span {
            trace_id: vec![1; 16],
            span_id: vec![2; 8],
            name: "execute_tool x".into(),
            start_time_unix_nano: 5,
            end_time_unix_nano: 9,
            attributes: vec![
                kv("a", Value::StringValue("é".into())),
                kv("b", Value::IntValue(-3)),
                kv("c", Value::DoubleValue(1.5)),
                kv("d", Value::BoolValue(true)),
                kv("f", Value::IntValue(300_000)),
                kv("g", Value::IntValue(5)),
                kv(
                    "e",
                    Value::ArrayValue(ArrayValue {
                        values: vec![AnyValue {
                            value: Some(Value::IntValue(1)),
                        }],
                    }),
                ),
            ],
            events: vec![Event {
                name: "ev".into(),
                attributes: vec![kv("m", Value::StringValue("hi".into()))],
                ..Default::default()
            }],
            status: Some(Status {
                code: 2,
                ..Default::default()
            }),
            ..Default::default()
        };
        let req = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans {
                    scope: Some(InstrumentationScope {
                        name: "sc".into(),
                        ..Default::default()
                    }),
                    spans: vec![span],
                    ..Default::default()
                }],
                // After the scopes on purpose.
                resource: Some(Resource {
                    attributes: vec![kv("service.name", Value::StringValue("svc".into()))],
                    ..Default::default()
                }),
                ..Default::default()
            }],
        };
        let body = req.encode_to_vec();
        let mut seen = 0;
        for_each_span(&body, |service, scope, v| {
            seen += 1;
            assert_eq!((service, scope, v.name), ("svc", "sc", &b"execute_tool x"[..]));
            assert_eq!((v.trace_id.len(), v.span_id.len(), v.start, v.end, v.status_code), (16, 8, 5, 9, 2));
            assert_eq!(v.attrs[0], (&b"a"[..], AttrValue::Str("é".as_bytes())));
            assert_eq!(v.attrs[0].1.as_str(), Some("é"));
            assert_eq!(v.attrs[1], (&b"b"[..], AttrValue::Int(-3)));
            assert_eq!(v.attrs[2], (&b"c"[..], AttrValue::Double(1.5)));
            assert_eq!(v.attrs[3], (&b"d"[..], AttrValue::Bool(true)));
            assert_eq!(v.attrs[4], (&b"f"[..], AttrValue::Int(300_000)));
            assert_eq!(v.attrs[5], (&b"g"[..], AttrValue::Int(5)));
            assert!(matches!(v.attrs[6].1.to_owned_value(), Some(Value::ArrayValue(a)) if a.values.len() == 1));
            assert_eq!(v.event_attr("ev", "m"), Some(AttrValue::Str(b"hi")));
            assert_eq!(v.event_attr("other", "m"), None);
        })
        .unwrap();
        assert_eq!(seen, 1);
        for cut in 1..body.len() {
            let _ = for_each_span(&body[..cut], |_, _, _| {});
        }
        assert!(for_each_span(&body[..body.len() - 3], |_, _, _| {}).is_err());
        assert!(for_each_span(&[0xff; 20], |_, _, _| {}).is_err());
    }
}
