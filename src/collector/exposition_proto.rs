//! `/metrics` in the Prometheus protobuf exposition, with native histograms beside the classic
//! buckets.
//!
//! Served when the scraper asks for [`CONTENT_TYPE`] (Prometheus does when started with
//! `--enable-feature=native-histograms`); every other scraper gets the text format unchanged.
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
//! The other families are the text renderer's own lines, encoded line by line as they are read
//! (no message is built), so the two formats cannot drift; the histograms, most of the body, are
//! encoded directly, a metric at a time, with each series' label pairs encoded once. The whole
//! render runs on the aggregator task (the text format's histograms are rendered off it).

use super::aggregator::{SeriesKey, State, LATENCY_BUCKETS_US};
use super::exposition::{render_parts, Frame, TOOL_CALL_DURATION, TOOL_RESULT_SIZE};
use super::histogram::Hist;
use super::SelfStats;

/// Content type of the protobuf exposition (delimited `MetricFamily` messages).
pub const CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

/// Native histogram schema: bucket bounds are powers of 2^(2^-6), 64 buckets per power of two,
/// each 1.09 % wide. Schema 5 (2.2 % wide) could miss the 2 % fleet p95 goal by up to its width.
pub const NATIVE_SCHEMA: i32 = 6;

/// Width of the native zero bucket: values at most this (0 bytes, 0 seconds) land there. Positive
/// so that a histogram with no observations yet is still read as native (client_golang's default).
pub const NATIVE_ZERO_THRESHOLD: f64 = 2.938_735_877_055_719e-39;

/// Whether an `Accept` header asks for the protobuf exposition.
pub fn wants_protobuf(accept: &str) -> bool {
    accept.split(',').any(|part| {
        let mut fields = part.split(';').map(str::trim);
        fields.next() == Some("application/vnd.google.protobuf")
            && fields.any(|f| f == "proto=io.prometheus.client.MetricFamily")
    })
}

/// `io.prometheus.client` messages (proto2: every scalar optional), only the fields used here.
pub mod pb {
    #![allow(missing_docs)]
    use prost::Message;

    #[derive(Clone, PartialEq, Message)]
    pub struct LabelPair {
        #[prost(string, optional, tag = "1")]
        pub name: Option<String>,
        #[prost(string, optional, tag = "2")]
        pub value: Option<String>,
    }
    #[derive(Clone, PartialEq, Message)]
    pub struct Gauge {
        #[prost(double, optional, tag = "1")]
        pub value: Option<f64>,
    }
    #[derive(Clone, PartialEq, Message)]
    pub struct Counter {
        #[prost(double, optional, tag = "1")]
        pub value: Option<f64>,
    }
    #[derive(Clone, PartialEq, Message)]
    pub struct Untyped {
        #[prost(double, optional, tag = "1")]
        pub value: Option<f64>,
    }
    #[derive(Clone, PartialEq, Message)]
    pub struct Bucket {
        #[prost(uint64, optional, tag = "1")]
        pub cumulative_count: Option<u64>,
        #[prost(double, optional, tag = "2")]
        pub upper_bound: Option<f64>,
    }
    #[derive(Clone, PartialEq, Message)]
    pub struct BucketSpan {
        #[prost(sint32, optional, tag = "1")]
        pub offset: Option<i32>,
        #[prost(uint32, optional, tag = "2")]
        pub length: Option<u32>,
    }
    #[derive(Clone, PartialEq, Message)]
    pub struct Histogram {
        #[prost(uint64, optional, tag = "1")]
        pub sample_count: Option<u64>,
        #[prost(double, optional, tag = "2")]
        pub sample_sum: Option<f64>,
        #[prost(message, repeated, tag = "3")]
        pub bucket: Vec<Bucket>,
        #[prost(sint32, optional, tag = "5")]
        pub schema: Option<i32>,
        #[prost(double, optional, tag = "6")]
        pub zero_threshold: Option<f64>,
        #[prost(uint64, optional, tag = "7")]
        pub zero_count: Option<u64>,
        #[prost(message, repeated, tag = "12")]
        pub positive_span: Vec<BucketSpan>,
        #[prost(sint64, repeated, packed = "true", tag = "13")]
        pub positive_delta: Vec<i64>,
    }
    #[derive(Clone, PartialEq, Message)]
    pub struct Metric {
        #[prost(message, repeated, tag = "1")]
        pub label: Vec<LabelPair>,
        #[prost(message, optional, tag = "2")]
        pub gauge: Option<Gauge>,
        #[prost(message, optional, tag = "3")]
        pub counter: Option<Counter>,
        #[prost(message, optional, tag = "5")]
        pub untyped: Option<Untyped>,
        #[prost(message, optional, tag = "7")]
        pub histogram: Option<Histogram>,
    }
    /// `MetricType`: COUNTER 0, GAUGE 1, SUMMARY 2, UNTYPED 3, HISTOGRAM 4.
    #[derive(Clone, PartialEq, Message)]
    pub struct MetricFamily {
        #[prost(string, optional, tag = "1")]
        pub name: Option<String>,
        #[prost(string, optional, tag = "2")]
        pub help: Option<String>,
        #[prost(int32, optional, tag = "3")]
        pub r#type: Option<i32>,
        #[prost(message, repeated, tag = "4")]
        pub metric: Vec<Metric>,
    }
}

const COUNTER: i32 = 0;
const GAUGE: i32 = 1;
const UNTYPED: i32 = 3;
const HISTOGRAM: i32 = 4;

/// Renders the whole exposition as delimited `MetricFamily` messages.
pub fn render(state: &State, stats: &SelfStats, now: u64) -> Vec<u8> {
    let text = render_parts(&Frame::capture(state, now), stats, false);
    let mut out = Vec::with_capacity(text.len() + state.series.len() * 1024);
    let mut keys: Vec<&SeriesKey> = state.series.keys().collect();
    keys.sort();
    // Each series' label pairs, encoded once for both histogram families.
    let labels: Vec<Vec<u8>> = keys
        .iter()
        .map(|k| {
            let (mut out, mut pair) = (Vec::new(), Vec::new());
            for (n, v) in [("service", &*k.service), ("tool", &*k.tool)] {
                pair.clear();
                bytes_field(1, n.as_bytes(), &mut pair);
                bytes_field(2, v.as_bytes(), &mut pair);
                bytes_field(1, &pair, &mut out);
            }
            out
        })
        .collect();

    encode_text(&text, &mut out);
    let mut body = Vec::new();
    let size_bounds: Vec<f64> = state.limits.size_bounds.iter().map(|&b| b as f64).collect();
    write_family(
        &mut out,
        &mut body,
        TOOL_RESULT_SIZE,
        "UTF-8 bytes of tool results as handed to the model.",
        keys.iter().zip(&labels).map(|(k, l)| {
            let s = &state.series[*k];
            let h = histogram(
                &size_bounds,
                &s.size_buckets,
                s.size_sum as f64,
                &s.total.size,
                1.0,
            );
            (l.as_slice(), h)
        }),
    );
    let latency_bounds: Vec<f64> = LATENCY_BUCKETS_US.iter().map(|&b| b as f64 / 1e6).collect();
    write_family(
        &mut out,
        &mut body,
        TOOL_CALL_DURATION,
        "Tool call duration.",
        keys.iter().zip(&labels).map(|(k, l)| {
            let s = &state.series[*k];
            let h = histogram(
                &latency_bounds,
                &s.latency_buckets,
                s.latency_sum_us as f64 / 1e6,
                &s.total.latency,
                1e-6,
            );
            (l.as_slice(), h)
        }),
    );
    out
}

/// Writes one length-delimited histogram `MetricFamily` from each series' encoded label pairs
/// and histogram, encoding each metric once as it is made: no vector of thousands of messages,
/// and no second walk to size them (encoding a whole family at once sizes every nested message
/// again at each level).
fn write_family<'a>(
    out: &mut Vec<u8>,
    body: &mut Vec<u8>,
    name: &str,
    help: &str,
    metrics: impl Iterator<Item = (&'a [u8], pb::Histogram)>,
) {
    use prost::encoding::{encode_key, encode_varint, WireType};
    body.clear();
    bytes_field(1, name.as_bytes(), body);
    bytes_field(2, help.as_bytes(), body);
    encode_key(3, WireType::Varint, body);
    encode_varint(HISTOGRAM as u64, body);
    let mut metric = Vec::new();
    for (labels, h) in metrics {
        metric.clear();
        metric.extend_from_slice(labels);
        prost::encoding::message::encode(7, &h, &mut metric);
        bytes_field(4, &metric, body);
    }
    encode_varint(body.len() as u64, out);
    out.extend_from_slice(body);
}

#[cfg(test)]
fn label(name: &str, value: &str) -> pb::LabelPair {
    pb::LabelPair {
        name: Some(name.into()),
        value: Some(value.into()),
    }
}

/// One series' histogram: classic buckets from the exact non-cumulative `counts` per `bounds`
/// (+Inf last), native buckets from the HDR histogram `hist` (values × `scale`).
fn histogram(bounds: &[f64], counts: &[u64], sum: f64, hist: &Hist, scale: f64) -> pb::Histogram {
    let mut cum = 0;
    let bucket = bounds
        .iter()
        .zip(counts)
        .map(|(&b, &n)| {
            cum += n;
            pb::Bucket {
                cumulative_count: Some(cum),
                upper_bound: Some(b),
            }
        })
        .collect();
    let count = counts.iter().sum();
    let (zero_count, positive_span, positive_delta) = native(hist, scale);
    pb::Histogram {
        sample_count: Some(count),
        sample_sum: Some(sum),
        bucket,
        schema: Some(NATIVE_SCHEMA),
        zero_threshold: Some(NATIVE_ZERO_THRESHOLD),
        zero_count: Some(zero_count),
        positive_span,
        positive_delta,
    }
}

/// The native bucket index of `v` > 0: bucket `i` holds (2^((i-1)/64), 2^(i/64)].
pub fn native_index(v: f64) -> i32 {
    (v.log2() * f64::from(1u32 << NATIVE_SCHEMA)).ceil() as i32
}

/// Zero count, spans and deltas of the native histogram of `hist`'s values × `scale`.
fn native(hist: &Hist, scale: f64) -> (u64, Vec<pb::BucketSpan>, Vec<i64>) {
    let mut zero = 0;
    let mut buckets: Vec<(i32, u64)> = Vec::new();
    hist.for_each_bucket(|v, n| {
        let x = v as f64 * scale;
        if x <= NATIVE_ZERO_THRESHOLD {
            zero += n;
            return;
        }
        let i = native_index(x);
        match buckets.last_mut() {
            Some((last, c)) if *last == i => *c += n,
            _ => buckets.push((i, n)),
        }
    });
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
    (zero, spans, deltas)
}

/// The families of a text exposition (as [`render_parts`] writes it: `# HELP`, `# TYPE`, then
/// `name{labels} value` lines), as messages: what [`encode_text`] must encode.
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

/// Encodes the families of a text exposition (as [`render_parts`] writes it) as delimited
/// `MetricFamily` messages, a line at a time, without building messages: the same bytes as
/// encoding [`parse_text`]'s families, with no allocation per sample.
fn encode_text(text: &str, out: &mut Vec<u8>) {
    use prost::encoding::{encode_key, encode_varint, WireType};
    let (mut family, mut metric, mut pair) = (Vec::new(), Vec::new(), Vec::new());
    let mut value = String::new();
    // The open family's type, once written.
    let mut kind: Option<i32> = None;
    let mut open = false;
    let flush = |family: &mut Vec<u8>, kind: Option<i32>, out: &mut Vec<u8>| {
        if kind.is_none() {
            encode_key(3, WireType::Varint, family);
            encode_varint(UNTYPED as u64, family);
        }
        encode_varint(family.len() as u64, out);
        out.extend_from_slice(family);
        family.clear();
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            if open {
                flush(&mut family, kind, out);
            }
            open = true;
            kind = None;
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            bytes_field(1, name.as_bytes(), &mut family);
            bytes_field(2, help.as_bytes(), &mut family);
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            if !open || kind.is_some() {
                continue;
            }
            let k = match rest.rsplit(' ').next() {
                Some("counter") => COUNTER,
                Some("gauge") => GAUGE,
                _ => UNTYPED,
            };
            encode_key(3, WireType::Varint, &mut family);
            encode_varint(k as u64, &mut family);
            kind = Some(k);
        } else if open && !line.is_empty() && !line.starts_with('#') {
            let Some((series, v)) = line.rsplit_once(' ') else {
                continue;
            };
            let v: f64 = match v {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                v => v.parse().unwrap_or(f64::NAN),
            };
            let k = *kind.get_or_insert_with(|| {
                encode_key(3, WireType::Varint, &mut family);
                encode_varint(UNTYPED as u64, &mut family);
                UNTYPED
            });
            metric.clear();
            if let Some((_, labels)) = series.split_once('{') {
                let labels = labels.strip_suffix('}').unwrap_or(labels);
                for_each_label(labels, &mut value, |n, v| {
                    pair.clear();
                    bytes_field(1, n.as_bytes(), &mut pair);
                    bytes_field(2, v.as_bytes(), &mut pair);
                    bytes_field(1, &pair, &mut metric);
                });
            }
            // Gauge 2, Counter 3, Untyped 5, each `{ double value = 1; }`.
            let tag = match k {
                COUNTER => 3,
                GAUGE => 2,
                _ => 5,
            };
            let mut inner = [0u8; 9];
            inner[0] = (1 << 3) | 1;
            inner[1..].copy_from_slice(&v.to_le_bytes());
            bytes_field(tag, &inner, &mut metric);
            bytes_field(4, &metric, &mut family);
        }
    }
    if open {
        flush(&mut family, kind, out);
    }
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
            "application/openmetrics-text; version=1.0.0"
        ));
    }

    #[test]
    fn text_families_encode_as_their_messages() {
        let text = "# HELP a_total Calls.\n# TYPE a_total counter\n\
                    a_total{service=\"s\\\"1\",tool=\"t\\nx\"} 3\na_total{service=\"s\",tool=\"u\"} 0\n\
                    # HELP b Size.\n# TYPE b gauge\nb 1.5\nb{x=\"\"} +Inf\n\
                    # HELP c Other.\nc{y=\"z\"} 7\n# HELP d Empty.\n";
        let mut bytes = Vec::new();
        encode_text(text, &mut bytes);
        let mut slice = bytes.as_slice();
        let mut decoded = Vec::new();
        while !slice.is_empty() {
            decoded.push(pb::MetricFamily::decode_length_delimited(&mut slice).unwrap());
        }
        assert_eq!(decoded, parse_text(text));
        assert_eq!(decoded.len(), 4);
        assert_eq!(decoded[0].metric[0].label[0], label("service", "s\"1"));
        assert_eq!(
            decoded[1].metric[1].gauge.as_ref().unwrap().value,
            Some(f64::INFINITY)
        );
        assert_eq!(decoded[2].r#type, Some(UNTYPED));
    }

    #[test]
    fn labels_round_trip_escapes() {
        let l = parse_labels(r#"service="a\"b",tool="c\\d\ne,f""#);
        assert_eq!(l[0], label("service", "a\"b"));
        assert_eq!(l[1], label("tool", "c\\d\ne,f"));
    }

    #[test]
    fn native_index_matches_bucket_bounds() {
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
        let mut h = Hist::new(super::super::histogram::MAX_BYTES);
        for v in [0, 1000, 1000, 1010, 1_000_000] {
            h.record(v);
        }
        let (zero, spans, deltas) = native(&h, 1.0);
        assert_eq!(zero, 1);
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
