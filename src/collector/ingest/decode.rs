//! Decoding OTLP trace requests (protobuf, JSON, gzip) and turning them into tool records.
//!
//! Bodies are bounded before and after decompression: a gzip bomb stops at the limit plus one
//! byte and is refused as too large without inflating the rest. Decoding errors are returned,
//! never panics; the caller maps them to 400 / INVALID_ARGUMENT.

use std::io::Read;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

use std::sync::Arc;

use super::wire;
use crate::collector::ingest::recognize::{LabelCuts, Outcome, Recognizer, ToolRecord};

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
    /// Not a valid protobuf `ExportTraceServiceRequest`.
    #[error("invalid protobuf ExportTraceServiceRequest: {0}")]
    Protobuf(#[from] prost::DecodeError),
    /// Not a valid protobuf `ExportTraceServiceRequest` (zero-copy reader).
    #[error(transparent)]
    Wire(#[from] wire::WireError),
    /// Not a valid OTLP/JSON `ExportTraceServiceRequest`.
    #[error("invalid OTLP/JSON ExportTraceServiceRequest: {0}")]
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
    let named = |p: &[u8]| memchr::memmem::find(body, p).is_some();
    if !named(b"\"SPAN_KIND_") && !named(b"\"STATUS_CODE_") {
        return Ok(serde_json::from_slice(body)?);
    }
    let mut v: serde_json::Value = serde_json::from_slice(body)?;
    enum_names_to_numbers(&mut v)?;
    Ok(serde_json::from_value(v)?)
}

/// Replaces enum names by their numbers where OTLP/JSON has enums: `kind` of a span and `code`
/// of its status. An unknown name is an error, as in the protobuf JSON mapping.
fn enum_names_to_numbers(v: &mut serde_json::Value) -> Result<(), DecodeError> {
    use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, status::StatusCode};
    use serde_json::Value;
    fn number(
        field: &mut Value,
        what: &str,
        from_name: fn(&str) -> Option<i32>,
    ) -> Result<(), DecodeError> {
        if let Value::String(name) = field {
            let n = from_name(name).ok_or_else(|| {
                DecodeError::Json(serde::de::Error::custom(format!("unknown {what} {name:?}")))
            })?;
            *field = Value::from(n);
        }
        Ok(())
    }
    let spans = v
        .get_mut("resourceSpans")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(|rs| rs.get_mut("scopeSpans").and_then(Value::as_array_mut))
        .flatten()
        .filter_map(|ss| ss.get_mut("spans").and_then(Value::as_array_mut))
        .flatten();
    for span in spans {
        if let Some(k) = span.get_mut("kind") {
            number(k, "span kind", |n| {
                SpanKind::from_str_name(n).map(|k| k as i32)
            })?;
        }
        if let Some(c) = span.get_mut("status").and_then(|s| s.get_mut("code")) {
            number(c, "status code", |n| {
                StatusCode::from_str_name(n).map(|c| c as i32)
            })?;
        }
    }
    Ok(())
}

/// What a request held.
#[derive(Debug, Default)]
pub struct Recognized {
    /// Tool spans.
    pub records: Vec<ToolRecord>,
    /// Spans that are not tool spans (ignored, counted).
    pub not_tool: u64,
    /// Tool spans that could not be used (rejected, counted).
    pub invalid: u64,
    /// Why the first rejected span was rejected.
    pub(crate) invalid_reason: Option<&'static str>,
    /// Attributes past a span's first [`MAX_ATTRIBUTES_READ`], not looked at.
    pub(crate) attributes_ignored: u64,
    /// Service and tool names of tool spans that had to be cut or cleaned.
    pub(crate) label_cuts: LabelCuts,
}

/// Attributes of one span that recognition looks at; later ones are ignored and counted.
pub(crate) const MAX_ATTRIBUTES_READ: usize =
    crate::collector::ingest::recognize::MAX_ATTRIBUTES_READ;

impl Recognized {
    /// Every span of the request.
    pub fn spans(&self) -> u64 {
        self.records.len() as u64 + self.not_tool + self.invalid
    }
}

/// Classifies every span of a protobuf-encoded request, reading it in place (see
/// [`super::wire`]). A malformed request is an error and nothing of it is kept.
pub fn recognize_protobuf(r: &Recognizer, body: &[u8]) -> Result<Recognized, DecodeError> {
    let mut out = Recognized::default();
    // The sanitised name of the resource being read: the raw name is sanitised once per run of
    // spans from one resource, not once per span.
    let mut service: Option<(&str, Arc<str>, [bool; 2])> = None;
    wire::for_each_span(body, |svc, scope, span| {
        let (arc, cut) = match &service {
            Some((name, arc, cut)) if *name == svc => (arc.clone(), *cut),
            _ => {
                let (arc, cut) = r.service_name(svc);
                service = Some((svc, arc.clone(), cut));
                (arc, cut)
            }
        };
        out.attributes_ignored += span.attrs.len().saturating_sub(MAX_ATTRIBUTES_READ) as u64;
        match r.recognize_counting(&arc, scope, span, &mut out.label_cuts) {
            Outcome::Tool(t) => {
                out.label_cuts.service[0] += u64::from(cut[0]);
                out.label_cuts.service[1] += u64::from(cut[1]);
                out.records.push(t)
            }
            Outcome::NotTool | Outcome::Summary => out.not_tool += 1,
            Outcome::Invalid(why) => {
                out.invalid += 1;
                out.invalid_reason.get_or_insert(why);
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
