//! `/metrics` in the Prometheus protobuf exposition, with native histograms beside the classic
//! buckets.
//!
//! Served when the scraper asks for [`CONTENT_TYPE`] (Prometheus does when started with
//! `--enable-feature=native-histograms`, or from 3.9 with `scrape_native_histograms: true`);
//! every other scraper gets a text format. The size histogram's classic buckets carry their
//! exemplars (`Bucket.exemplar`), and its native histogram all of them (`Histogram.exemplars`),
//! as [`crate::collector::read::exposition`] chooses them.
//! The body is a sequence of length-delimited `io.prometheus.client.MetricFamily` messages
//! (`metrics.proto` of prometheus/client_model), declared here with `prost` derives.
//!
//! `toolsize_tool_result_size_bytes` and `toolsize_tool_call_duration_seconds` carry, per series,
//! the same classic buckets, count and sum as the text format, plus a native (sparse,
//! exponential) histogram of schema [`NATIVE_SCHEMA`]: 64 buckets per power of two, each 1.09 %
//! wide, so `histogram_quantile` over the fleet's summed native histograms is within 1.09 % of
//! the exact value plus the 0.4 % of the daemon's HDR histograms it is built from, whatever the
//! bucket layout of the classic histogram and wherever the values bunch (the classic buckets can
//! be 25 % wide). Only non-empty buckets are sent: a series holds at most 64 per power of two
//! its values span, and never more than its HDR histogram has buckets (128 per power of two).
//!
//! Both formats are written from one description of the families
//! ([`crate::collector::read::exposition::write_families`]) to a [`Sink`], so they cannot drift: [`Proto`] encodes
//! each metric as it is written, with no message tree and each series' label pairs encoded once.
//! As for the text format, the aggregator only copies the numbers ([`Frame::capture_with`], which
//! here also reads each series' native buckets out of its HDR histograms); the encoding runs on
//! the admin handler's blocking thread.

use crate::collector::alerts::AlertStats;
use crate::collector::read::exposition::{
    write_families, Frame, HistogramSample, Kind, Sink, Value,
};
use crate::collector::state::histogram::{NATIVE_SCHEMA, NATIVE_ZERO_THRESHOLD};
use crate::collector::state::State;
use crate::collector::SelfStats;

/// Content type of the protobuf exposition (delimited `MetricFamily` messages).
pub(crate) const CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

/// Whether an `Accept` header asks for the protobuf exposition.
pub(crate) fn wants_protobuf(accept: &str) -> bool {
    accept.split(',').any(|part| {
        let mut fields = part.split(';').map(str::trim);
        if fields.next() != Some("application/vnd.google.protobuf") {
            return false;
        }
        let (mut proto, mut refused) = (false, false);
        for f in fields {
            proto |= f == "proto=io.prometheus.client.MetricFamily";
            // `q=0`: not acceptable.
            refused |= f
                .strip_prefix("q=")
                .and_then(|q| q.parse::<f64>().ok())
                .is_some_and(|q| q <= 0.0);
        }
        proto && !refused
    })
}

/// `io.prometheus.client` messages (proto2: every scalar optional), only the fields used here.
pub(crate) mod pb {
    #![allow(missing_docs)]
    use prost::Message;

    #[derive(Clone, PartialEq, Message)]
    pub(crate) struct LabelPair {
        #[prost(string, optional, tag = "1")]
        pub(crate) name: Option<String>,
        #[prost(string, optional, tag = "2")]
        pub(crate) value: Option<String>,
    }
    #[derive(Clone, PartialEq, Message)]
    pub(crate) struct Gauge {
        #[prost(double, optional, tag = "1")]
        pub(crate) value: Option<f64>,
    }
    #[derive(Clone, PartialEq, Message)]
    pub(crate) struct Counter {
        #[prost(double, optional, tag = "1")]
        pub(crate) value: Option<f64>,
    }
    #[derive(Clone, PartialEq, Message)]
    pub(crate) struct Untyped {
        #[prost(double, optional, tag = "1")]
        pub(crate) value: Option<f64>,
    }
    #[derive(Clone, PartialEq, Message)]
    pub(crate) struct Bucket {
        #[prost(uint64, optional, tag = "1")]
        pub(crate) cumulative_count: Option<u64>,
        #[prost(double, optional, tag = "2")]
        pub(crate) upper_bound: Option<f64>,
        #[prost(message, optional, tag = "3")]
        pub(crate) exemplar: Option<Exemplar>,
    }
    /// `google.protobuf.Timestamp`.
    #[derive(Clone, PartialEq, Message)]
    pub(crate) struct Timestamp {
        #[prost(int64, tag = "1")]
        pub(crate) seconds: i64,
        #[prost(int32, tag = "2")]
        pub(crate) nanos: i32,
    }
    #[derive(Clone, PartialEq, Message)]
    pub(crate) struct Exemplar {
        #[prost(message, repeated, tag = "1")]
        pub(crate) label: Vec<LabelPair>,
        #[prost(double, optional, tag = "2")]
        pub(crate) value: Option<f64>,
        #[prost(message, optional, tag = "3")]
        pub(crate) timestamp: Option<Timestamp>,
    }
    #[derive(Clone, PartialEq, Message)]
    pub(crate) struct BucketSpan {
        #[prost(sint32, optional, tag = "1")]
        pub(crate) offset: Option<i32>,
        #[prost(uint32, optional, tag = "2")]
        pub(crate) length: Option<u32>,
    }
    #[derive(Clone, PartialEq, Message)]
    pub(crate) struct Histogram {
        #[prost(uint64, optional, tag = "1")]
        pub(crate) sample_count: Option<u64>,
        #[prost(double, optional, tag = "2")]
        pub(crate) sample_sum: Option<f64>,
        #[prost(message, repeated, tag = "3")]
        pub(crate) bucket: Vec<Bucket>,
        #[prost(sint32, optional, tag = "5")]
        pub(crate) schema: Option<i32>,
        #[prost(double, optional, tag = "6")]
        pub(crate) zero_threshold: Option<f64>,
        #[prost(uint64, optional, tag = "7")]
        pub(crate) zero_count: Option<u64>,
        #[prost(message, repeated, tag = "12")]
        pub(crate) positive_span: Vec<BucketSpan>,
        #[prost(sint64, repeated, packed = "true", tag = "13")]
        pub(crate) positive_delta: Vec<i64>,
        /// The native histogram's exemplars (client_model 0.6).
        #[prost(message, repeated, tag = "16")]
        pub(crate) exemplars: Vec<Exemplar>,
    }
    #[derive(Clone, PartialEq, Message)]
    pub(crate) struct Metric {
        #[prost(message, repeated, tag = "1")]
        pub(crate) label: Vec<LabelPair>,
        #[prost(message, optional, tag = "2")]
        pub(crate) gauge: Option<Gauge>,
        #[prost(message, optional, tag = "3")]
        pub(crate) counter: Option<Counter>,
        #[prost(message, optional, tag = "5")]
        pub(crate) untyped: Option<Untyped>,
        #[prost(message, optional, tag = "7")]
        pub(crate) histogram: Option<Histogram>,
    }
    /// `MetricType`: COUNTER 0, GAUGE 1, SUMMARY 2, UNTYPED 3, HISTOGRAM 4.
    #[derive(Clone, PartialEq, Message)]
    pub(crate) struct MetricFamily {
        #[prost(string, optional, tag = "1")]
        pub(crate) name: Option<String>,
        #[prost(string, optional, tag = "2")]
        pub(crate) help: Option<String>,
        #[prost(int32, optional, tag = "3")]
        pub r#type: Option<i32>,
        #[prost(message, repeated, tag = "4")]
        pub(crate) metric: Vec<Metric>,
    }
}

const COUNTER: i32 = 0;
const GAUGE: i32 = 1;
#[cfg(test)]
const UNTYPED: i32 = 3;
const HISTOGRAM: i32 = 4;

/// Renders the whole protobuf exposition of `state` at `now` (capture and render in one go).
pub fn render(state: &State, stats: &SelfStats, alerts: &AlertStats, now: u64) -> Vec<u8> {
    render_frame(&Frame::capture_with(state, now, true), stats, alerts)
}

/// Renders the whole protobuf exposition of a frame captured with its native buckets
/// ([`Frame::capture_with`]); without them the histograms carry only the classic buckets.
pub(crate) fn render_frame(frame: &Frame, stats: &SelfStats, alerts: &AlertStats) -> Vec<u8> {
    let mut proto = Proto::new(frame);
    write_families(frame, stats, alerts, &mut proto);
    proto.finish()
}

/// The protobuf exposition: each family one length-delimited `MetricFamily`, each metric
/// encoded once as it is written (no message tree is built: encoding a whole family at once
/// sizes every nested message again at each level), each series' label pairs encoded once.
pub(crate) struct Proto {
    out: Vec<u8>,
    family: Vec<u8>,
    metric: Vec<u8>,
    pair: Vec<u8>,
    labels: Vec<Vec<u8>>,
    kind: Option<Kind>,
}

impl Proto {
    /// A protobuf exposition of `frame`'s series.
    pub(crate) fn new(frame: &Frame) -> Self {
        let mut pair = Vec::new();
        let labels = frame
            .series
            .iter()
            .map(|s| {
                let mut out = Vec::new();
                for (n, v) in [("service", &*s.key.service), ("tool", &*s.key.tool)] {
                    label_pair(n, v, &mut pair, &mut out);
                }
                out
            })
            .collect();
        Self {
            out: Vec::with_capacity(4096 + frame.series.len() * 2048),
            family: Vec::new(),
            metric: Vec::new(),
            pair,
            labels,
            kind: None,
        }
    }

    /// The delimited messages.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.flush();
        self.out
    }

    fn flush(&mut self) {
        if self.kind.take().is_some() {
            prost::encoding::encode_varint(self.family.len() as u64, &mut self.out);
            self.out.extend_from_slice(&self.family);
            self.family.clear();
        }
    }

    /// Starts a metric with the labels of `series` and `extra`.
    fn metric(&mut self, series: Option<usize>, extra: &[(&str, &str)]) {
        self.metric.clear();
        if let Some(i) = series {
            self.metric.extend_from_slice(&self.labels[i]);
        }
        for (n, v) in extra {
            label_pair(n, v, &mut self.pair, &mut self.metric);
        }
    }
}

impl Sink for Proto {
    fn family(&mut self, name: &str, kind: Kind, help: &str) {
        use prost::encoding::{encode_key, encode_varint, WireType};
        self.flush();
        bytes_field(1, name.as_bytes(), &mut self.family);
        bytes_field(2, help.as_bytes(), &mut self.family);
        encode_key(3, WireType::Varint, &mut self.family);
        let t = match kind {
            Kind::Counter => COUNTER,
            Kind::Gauge => GAUGE,
            Kind::Histogram => HISTOGRAM,
        };
        encode_varint(t as u64, &mut self.family);
        self.kind = Some(kind);
    }

    fn sample(&mut self, series: Option<usize>, extra: &[(&str, &str)], value: Value) {
        self.metric(series, extra);
        // Gauge 2, Counter 3, each `{ double value = 1; }`.
        let tag = match self.kind {
            Some(Kind::Counter) => 3,
            _ => 2,
        };
        let mut inner = [0u8; 9];
        inner[0] = (1 << 3) | 1;
        inner[1..].copy_from_slice(&value.as_f64().to_le_bytes());
        bytes_field(tag, &inner, &mut self.metric);
        bytes_field(4, &self.metric, &mut self.family);
    }

    fn histogram(&mut self, series: usize, h: HistogramSample<'_>) {
        self.metric(Some(series), &[]);
        prost::encoding::message::encode(7, &histogram(h), &mut self.metric);
        bytes_field(4, &self.metric, &mut self.family);
    }
}

/// Appends a `LabelPair` field (tag 1 of `Metric`), using `pair` as scratch.
fn label_pair(name: &str, value: &str, pair: &mut Vec<u8>, out: &mut Vec<u8>) {
    pair.clear();
    bytes_field(1, name.as_bytes(), pair);
    bytes_field(2, value.as_bytes(), pair);
    bytes_field(1, pair, out);
}

#[cfg(test)]
fn label(name: &str, value: &str) -> pb::LabelPair {
    pb::LabelPair {
        name: Some(name.into()),
        value: Some(value.into()),
    }
}

/// The message of an exemplar.
fn exemplar(e: &crate::collector::read::exposition::Exemplar) -> pb::Exemplar {
    pb::Exemplar {
        label: vec![
            pb::LabelPair {
                name: Some("trace_id".into()),
                value: Some(e.trace_id.clone()),
            },
            pb::LabelPair {
                name: Some("span_id".into()),
                value: Some(e.span_id.clone()),
            },
        ],
        value: Some(e.value as f64),
        timestamp: Some(pb::Timestamp {
            seconds: i64::try_from(e.at_unix).unwrap_or(i64::MAX),
            nanos: 0,
        }),
    }
}

/// One series' histogram message: the classic buckets with their exemplars (the +Inf bucket
/// is implied, and its exemplar with it), and the native ones when captured, with every
/// exemplar.
fn histogram(h: HistogramSample<'_>) -> pb::Histogram {
    let mut cum = 0;
    let bucket = h
        .bounds
        .le
        .iter()
        .zip(h.counts)
        .enumerate()
        .map(|(k, (&b, &n))| {
            cum += n;
            pb::Bucket {
                cumulative_count: Some(cum),
                upper_bound: Some(b),
                exemplar: h.exemplars.iter().find(|e| e.bucket == k).map(exemplar),
            }
        })
        .collect();
    let mut out = pb::Histogram {
        sample_count: Some(h.counts.iter().sum()),
        sample_sum: Some(h.sum.as_f64()),
        bucket,
        ..Default::default()
    };
    if let Some(n) = h.native {
        let (positive_span, positive_delta) = spans(&n.buckets);
        out.schema = Some(NATIVE_SCHEMA);
        out.zero_threshold = Some(NATIVE_ZERO_THRESHOLD);
        out.zero_count = Some(n.zero);
        out.positive_span = positive_span;
        out.positive_delta = positive_delta;
        out.exemplars = h.exemplars.iter().map(exemplar).collect();
    }
    out
}

/// Spans and deltas of non-empty native buckets (by index).
fn spans(buckets: &[(i32, u64)]) -> (Vec<pb::BucketSpan>, Vec<i64>) {
    let mut spans: Vec<pb::BucketSpan> = Vec::new();
    let mut deltas = Vec::with_capacity(buckets.len());
    let (mut prev_i, mut prev_n) = (0i32, 0i64);
    for (k, &(i, n)) in buckets.iter().enumerate() {
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        match spans.last_mut() {
            Some(span) if i == prev_i + 1 => {
                span.length = Some(span.length.unwrap_or(0) + 1);
            }
            _ => spans.push(pb::BucketSpan {
                offset: Some(if k == 0 { i } else { i - prev_i - 1 }),
                length: Some(1),
            }),
        }
        deltas.push(n - prev_n);
        prev_i = i;
        prev_n = n;
    }
    (spans, deltas)
}

/// The families of a text exposition (`# HELP`, `# TYPE`, then `name{labels} value` lines), as
/// messages, histograms' lines as untyped samples: the tests' reading of the text format.
#[cfg(test)]
fn parse_text(text: &str) -> Vec<pb::MetricFamily> {
    let mut families: Vec<pb::MetricFamily> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            families.push(pb::MetricFamily {
                name: Some(name.into()),
                help: Some(help.into()),
                r#type: Some(UNTYPED),
                metric: Vec::new(),
            });
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let kind = match rest.rsplit(' ').next() {
                Some("counter") => COUNTER,
                Some("gauge") => GAUGE,
                _ => UNTYPED,
            };
            if let Some(f) = families.last_mut() {
                f.r#type = Some(kind);
            }
        } else if !line.is_empty() && !line.starts_with('#') {
            let Some(f) = families.last_mut() else {
                continue;
            };
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let value: f64 = match value {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v.parse().unwrap_or(f64::NAN),
            };
            let label = series
                .split_once('{')
                .map(|(_, l)| parse_labels(l.strip_suffix('}').unwrap_or(l)))
                .unwrap_or_default();
            let mut m = pb::Metric {
                label,
                ..Default::default()
            };
            match f.r#type {
                Some(COUNTER) => m.counter = Some(pb::Counter { value: Some(value) }),
                Some(GAUGE) => m.gauge = Some(pb::Gauge { value: Some(value) }),
                _ => m.untyped = Some(pb::Untyped { value: Some(value) }),
            }
            f.metric.push(m);
        }
    }
    families
}

/// Calls `f(name, value)` for each label of `a="x",b="y\"z"`, unescaping `\\`, `\"` and `\n`
/// into `value` (a buffer reused across labels).
#[cfg(test)]
fn for_each_label(s: &str, value: &mut String, mut f: impl FnMut(&str, &str)) {
    let mut rest = s;
    while let Some((name, after)) = rest.split_once("=\"") {
        value.clear();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => {}
                },
                '"' => {
                    end = i + 1;
                    break;
                }
                c => value.push(c),
            }
        }
        f(name.trim_start_matches(','), value);
        rest = &after[end..];
    }
}

/// `a="x",b="y\"z"` → label pairs.
#[cfg(test)]
fn parse_labels(s: &str) -> Vec<pb::LabelPair> {
    let mut out = Vec::new();
    for_each_label(s, &mut String::new(), |n, v| out.push(label(n, v)));
    out
}

/// Appends a length-delimited field.
fn bytes_field(tag: u32, bytes: &[u8], buf: &mut Vec<u8>) {
    use prost::encoding::{encode_key, encode_varint, WireType};
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(bytes.len() as u64, buf);
    buf.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn accept_negotiation() {
        assert!(wants_protobuf(
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
        ));
        assert!(!wants_protobuf("text/plain;version=0.0.4;q=0.3,*/*;q=0.2"));
        assert!(!wants_protobuf(
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0,text/plain"
        ));
        assert!(!wants_protobuf(
            "application/openmetrics-text; version=1.0.0"
        ));
    }

    /// A state with escapes in its labels, failures, cuts and two windows.
    fn state() -> State {
        use crate::collector::state::tests::{known, limits, rec};
        let mut state = State::new(limits(100));
        let recs: Vec<_> = (0..60u64)
            .map(|i| {
                let tool = ["a\"b\\c\nd", "plain", "日本"][i as usize % 3];
                let mut r = rec(tool, known(i * 997));
                r.latency_us = i * 12_345;
                if i % 7 == 0 {
                    r.truncated_upstream = true;
                    r.upstream_limit = Some(1000);
                }
                if i % 11 == 0 {
                    r.error = true;
                    r.size = crate::collector::ingest::record::Size::Failed;
                }
                r
            })
            .collect();
        state.record_batch(&recs, 1_700_000_000);
        state
    }

    fn decode(mut bytes: &[u8]) -> Vec<pb::MetricFamily> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            out.push(pb::MetricFamily::decode_length_delimited(&mut bytes).unwrap());
        }
        out
    }

    #[test]
    fn size_buckets_carry_the_exemplars() {
        let (state, stats) = (state(), SelfStats::default());
        let frame = Frame::capture_with(&state, 1_700_000_100, true);
        let proto = decode(&render_frame(&frame, &stats, &AlertStats::default()));
        let size = proto
            .iter()
            .find(|f| f.name.as_deref() == Some("toolsize_tool_result_size_bytes"))
            .unwrap();
        let mut seen = 0;
        for (m, s) in size.metric.iter().zip(&frame.series) {
            let h = m.histogram.as_ref().unwrap();
            let on_buckets: Vec<f64> = h
                .bucket
                .iter()
                .filter_map(|b| b.exemplar.as_ref()?.value)
                .collect();
            let expected: Vec<f64> = s
                .size_exemplars
                .iter()
                .filter(|e| e.bucket < frame.size_bounds.len())
                .map(|e| e.value as f64)
                .collect();
            assert_eq!(on_buckets, expected);
            assert_eq!(h.exemplars.len(), s.size_exemplars.len());
            for e in &h.exemplars {
                assert_eq!(e.label[0].name.as_deref(), Some("trace_id"));
                assert_eq!(e.label[0].value.as_deref(), Some("01".repeat(16).as_str()));
                assert_eq!(e.timestamp.as_ref().unwrap().seconds, 1_700_000_000);
            }
            seen += h.exemplars.len();
        }
        assert!(seen > 0);
        let latency = proto
            .iter()
            .find(|f| f.name.as_deref() == Some("toolsize_tool_call_duration_seconds"))
            .unwrap();
        assert!(latency.metric.iter().all(|m| {
            let h = m.histogram.as_ref().unwrap();
            h.exemplars.is_empty() && h.bucket.iter().all(|b| b.exemplar.is_none())
        }));
    }

    #[test]
    fn both_formats_hold_the_same_samples() {
        let (state, stats) = (state(), SelfStats::default());
        let frame = Frame::capture_with(&state, 1_700_000_100, true);
        let text = super::super::exposition::render_frame(&frame, &stats, &AlertStats::default());
        let proto = decode(&render_frame(&frame, &stats, &AlertStats::default()));
        let parsed = parse_text(&text);
        assert_eq!(proto.len(), parsed.len());
        assert!(proto.len() > 30);
        for (p, t) in proto.iter().zip(&parsed) {
            assert_eq!((&p.name, &p.help), (&t.name, &t.help));
            if p.r#type != Some(HISTOGRAM) {
                assert_eq!(p, t, "{:?}", p.name);
                continue;
            }
            // Histograms: the text's `_bucket`, `_sum` and `_count` lines, series by series (a
            // family with no series, e.g. the context share before any request, has none).
            if p.metric.is_empty() {
                assert!(t.metric.is_empty(), "{:?}", p.name);
                continue;
            }
            let per = t.metric.len() / p.metric.len();
            for (m, lines) in p.metric.iter().zip(t.metric.chunks(per)) {
                let h = m.histogram.as_ref().unwrap();
                let value = |m: &pb::Metric| m.untyped.as_ref().unwrap().value.unwrap();
                let cum: Vec<f64> = lines[..h.bucket.len()].iter().map(value).collect();
                let want: Vec<f64> = h
                    .bucket
                    .iter()
                    .map(|b| b.cumulative_count.unwrap() as f64)
                    .collect();
                assert_eq!(cum, want);
                assert_eq!(m.label, lines[0].label[..2]);
                assert_eq!(value(&lines[per - 2]), h.sample_sum.unwrap());
                assert_eq!(value(&lines[per - 1]), h.sample_count.unwrap() as f64);
                // The native buckets hold every observation the classic ones do (histograms
                // with native buckets: not the context share, classic only).
                if h.schema.is_none() {
                    continue;
                }
                let native: i64 = h
                    .positive_delta
                    .iter()
                    .scan(0, |c, d| {
                        *c += d;
                        Some(*c)
                    })
                    .sum();
                assert_eq!(
                    native as u64 + h.zero_count.unwrap(),
                    h.sample_count.unwrap()
                );
                assert_eq!(h.schema, Some(NATIVE_SCHEMA));
            }
        }
        let calls = &proto[0];
        assert_eq!(calls.metric[0].label[1], label("tool", "a\"b\\c\nd"));
        assert_eq!(calls.metric[2].label[1], label("tool", "日本"));
    }

    #[test]
    fn without_native_buckets_histograms_are_classic() {
        let (state, stats) = (state(), SelfStats::default());
        let proto = decode(&render_frame(
            &Frame::capture(&state, 1_700_000_100),
            &stats,
            &AlertStats::default(),
        ));
        let size = proto
            .iter()
            .find(|f| f.name.as_deref() == Some(crate::collector::read::names::TOOL_RESULT_SIZE))
            .unwrap();
        let h = size.metric[0].histogram.as_ref().unwrap();
        assert!(h.schema.is_none() && h.positive_span.is_empty() && !h.bucket.is_empty());
    }

    #[test]
    fn labels_round_trip_escapes() {
        let l = parse_labels(r#"service="a\"b",tool="c\\d\ne,f""#);
        assert_eq!(l[0], label("service", "a\"b"));
        assert_eq!(l[1], label("tool", "c\\d\ne,f"));
    }

    #[test]
    fn native_index_matches_bucket_bounds() {
        use crate::collector::state::histogram::native_index;
        assert_eq!(native_index(1.0), 0);
        assert_eq!(native_index(2.0), 64);
        assert_eq!(native_index(16_384.0), 14 * 64);
        assert_eq!(native_index(16_385.0), 14 * 64 + 1);
        // Every bucket is 2^(1/64) wide: 1.09 %.
        let width = 2f64.powf(1.0 / 64.0) - 1.0;
        assert!((width - 0.0109).abs() < 0.0001);
    }

    #[test]
    fn spans_and_deltas() {
        use crate::collector::state::histogram::{native_index, Hist};
        let mut h = Hist::new(crate::collector::state::histogram::MAX_BYTES);
        for v in [0, 1000, 1000, 1010, 1_000_000] {
            h.record(v);
        }
        let n = h.native_buckets(1.0);
        assert_eq!(n.zero, 1);
        let (spans, deltas) = spans(&n.buckets);
        let total: i64 = deltas
            .iter()
            .scan(0, |c, d| {
                *c += d;
                Some(*c)
            })
            .sum();
        assert_eq!(total, 4);
        let lengths: u32 = spans.iter().map(|s| s.length.unwrap()).sum();
        assert_eq!(lengths as usize, deltas.len());
        assert_eq!(spans[0].offset, Some(native_index(1000.0)));
    }
}
