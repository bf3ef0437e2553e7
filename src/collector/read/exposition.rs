//! `/metrics`: Prometheus text exposition (format 0.0.4) of per-tool state and self-metrics.
//!
//! Hand-written rather than through `prometheus-client`: the aggregator already owns every number
//! (HDR histograms, exact bucket counts, counters), so a registry would only duplicate state or
//! need a custom collector, and the text format is small. Its correctness is checked by the real
//! `promtool check metrics` in the tests. The aggregator only copies the numbers into a [`Frame`]
//! (and computes the windows' quantiles); the exposition is rendered by the admin handler, off
//! the aggregator task, so a scrape holds ingestion only for the copy.
//!
//! The families are described once, in [`write_families`], to a [`Sink`]: [`Text`] writes the
//! text format (Prometheus 0.0.4, or OpenMetrics 1.0 when the scraper asks for it),
//! [`crate::collector::read::exposition_proto::Proto`] the protobuf one with native histograms.
//!
//! **Exemplars.** In OpenMetrics and in the protobuf exposition, each bucket of
//! `toolsize_tool_result_size_bytes` that holds one of the series' largest recent results
//! (`aggregation.largest_results`, within the longest window) carries the largest of them as an
//! exemplar: `{trace_id, span_id}`, its size and when the daemon received it. So at most one
//! exemplar per bucket and `aggregation.largest_results` per series; results without a trace
//! id carry none. The 0.0.4 text format has no exemplars and is unchanged.
//!
//! Names follow `toolsize_<name>_<unit>[_total]` in base units (the Prometheus naming conventions). Per-tool series carry
//! `service` and `tool` labels, bounded by the cardinality cap (overflow series
//! `tool="__overflow__"`). Classic histograms are cumulative since start (mergeable across
//! daemons with `histogram_quantile`); the daemon-computed quantile gauges are exact to 1 % per
//! window.

use std::borrow::Cow;
use std::fmt::Write;
use std::sync::Arc;

use crate::collector::alerts::rules::{MatchOutcome, RuleKind};
use crate::collector::alerts::sink::SinkKind;
use crate::collector::alerts::AlertStats;
use crate::collector::forward::UpstreamView;
use crate::collector::state::histogram::NativeBuckets;
use crate::collector::state::join::JoinStats;
use crate::collector::state::series::Largest;
use crate::collector::state::{calls_of, Counts, SeriesKey, State, Stats, LATENCY_BUCKETS_US};
use crate::collector::stats::{OtlpSignal, RefusedRequest, SelfStats};
use crate::layers::Stack;

use super::names::*;

/// Escapes a label value for the text format (borrowed when nothing needs escaping).
pub(crate) fn escape(v: &str) -> Cow<'_, str> {
    if !v.bytes().any(|b| matches!(b, b'\\' | b'"' | b'\n')) {
        return Cow::Borrowed(v);
    }
    let mut out = String::with_capacity(v.len() + 8);
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn f64_text(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

/// The type of a metric family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A counter.
    Counter,
    /// A gauge.
    Gauge,
    /// A histogram: classic buckets, sum and count (and, in the protobuf exposition, a native
    /// histogram).
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// A sample value: counts are written as integers in the text format, the rest as floats.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value {
    /// A count.
    Int(u64),
    /// Anything else.
    Float(f64),
}

impl Value {
    /// As a float (what the protobuf exposition carries).
    pub(crate) fn as_f64(self) -> f64 {
        match self {
            Value::Int(n) => n as f64,
            Value::Float(v) => v,
        }
    }
}

/// A classic histogram's upper bounds (+Inf implied), as numbers and as the text of their `le`
/// label (formatted once per scrape, not once per series).
#[derive(Debug, Clone)]
pub(crate) struct Bounds {
    /// Upper bounds.
    pub(crate) le: Vec<f64>,
    /// Their `le` label values.
    pub(crate) text: Vec<String>,
}

impl Bounds {
    fn new(le: Vec<f64>, text: impl Fn(&f64) -> String) -> Self {
        let text = le.iter().map(text).collect();
        Self { le, text }
    }
}

/// One classic histogram of a series: non-cumulative counts per bound with +Inf last, and the
/// sum; with the native buckets when the frame was captured with them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HistogramSample<'a> {
    /// Bucket bounds.
    pub(crate) bounds: &'a Bounds,
    /// Non-cumulative counts, one per bound then +Inf.
    pub(crate) counts: &'a [u64],
    /// Sum of the values.
    pub(crate) sum: Value,
    /// The native histogram.
    pub(crate) native: Option<&'a NativeBuckets>,
    /// Exemplars, at most one per bucket, by bucket index.
    pub(crate) exemplars: &'a [Exemplar],
}

/// The exemplar of one bucket of a size histogram: one of the series' largest recent results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Exemplar {
    /// Index of its bucket: into the bounds, or their length for +Inf.
    pub(crate) bucket: usize,
    /// The result's bytes.
    pub(crate) value: u64,
    /// Trace id, 32 hex digits.
    pub(crate) trace_id: String,
    /// Span id, 16 hex digits.
    pub(crate) span_id: String,
    /// When the daemon received it, Unix seconds.
    pub(crate) at_unix: u64,
}

/// The exemplars of a series' size buckets (`bounds`) from its largest recent results
/// (`largest`, largest first): the largest result of each bucket that has one, by bucket.
/// Results with no trace id (all zeros or not 32 hex digits) are skipped.
pub(crate) fn exemplars(largest: &[Largest], bounds: &[u64]) -> Vec<Exemplar> {
    let mut out: Vec<Exemplar> = Vec::new();
    for l in largest {
        let traced = l.trace_id.len() == 32
            && l.trace_id.bytes().all(|b| b.is_ascii_hexdigit())
            && l.trace_id.bytes().any(|b| b != b'0');
        if !traced {
            continue;
        }
        let bucket = bounds.partition_point(|&b| b < l.bytes);
        if out.iter().any(|e| e.bucket == bucket) {
            continue;
        }
        out.push(Exemplar {
            bucket,
            value: l.bytes,
            trace_id: l.trace_id.clone(),
            span_id: l.span_id.clone(),
            at_unix: l.at_unix,
        });
    }
    out.sort_by_key(|e| e.bucket);
    out
}

/// The text formats [`Text`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TextFormat {
    /// Prometheus text format 0.0.4.
    Prometheus,
    /// OpenMetrics 1.0: counters' families named without `_total`, exemplars, `# EOF`.
    OpenMetrics,
}

/// Where the families of an exposition are written: the text format ([`Text`]) or the
/// protobuf one ([`crate::collector::read::exposition_proto::Proto`]). One description of the families
/// ([`write_families`]) feeds both, so the formats cannot drift.
pub(crate) trait Sink {
    /// Starts a family; the samples that follow belong to it.
    fn family(&mut self, name: &str, kind: Kind, help: &str);
    /// One sample of the open counter or gauge family: the labels of frame series `series`
    /// (none for a self-metric), then `extra` labels.
    fn sample(&mut self, series: Option<usize>, extra: &[(&str, &str)], value: Value);
    /// One series of the open histogram family.
    fn histogram(&mut self, series: usize, h: HistogramSample<'_>);
}

/// The text format: `# HELP`, `# TYPE`, then `name{labels} value` lines.
pub(crate) struct Text {
    out: String,
    name: String,
    labels: Vec<String>,
    format: TextFormat,
}

impl Text {
    /// A text exposition of `frame`'s series in `format`.
    pub(crate) fn with_format(frame: &Frame, format: TextFormat) -> Self {
        Self {
            format,
            out: String::with_capacity(4096 + frame.series.len() * 4096),
            name: String::new(),
            labels: frame
                .series
                .iter()
                .map(|s| {
                    format!(
                        "service=\"{}\",tool=\"{}\"",
                        escape(&s.key.service),
                        escape(&s.key.tool)
                    )
                })
                .collect(),
        }
    }

    /// The text.
    pub(crate) fn finish(mut self) -> String {
        if self.format == TextFormat::OpenMetrics {
            self.out.push_str("# EOF\n");
        }
        self.out
    }

    fn line(&mut self, suffix: &str, series: Option<usize>, extra: &[(&str, &str)], v: Value) {
        self.sample_text(suffix, series, extra, v);
        self.out.push('\n');
    }

    /// A sample line without its newline.
    fn sample_text(
        &mut self,
        suffix: &str,
        series: Option<usize>,
        extra: &[(&str, &str)],
        v: Value,
    ) {
        let out = &mut self.out;
        out.push_str(&self.name);
        out.push_str(suffix);
        let mut sep = '{';
        if let Some(i) = series {
            out.push(sep);
            out.push_str(&self.labels[i]);
            sep = ',';
        }
        for (k, v) in extra {
            out.push(sep);
            out.push_str(k);
            out.push_str("=\"");
            out.push_str(&escape(v));
            out.push('"');
            sep = ',';
        }
        if sep == ',' {
            out.push('}');
        }
        let _ = match v {
            Value::Int(n) => write!(out, " {n}"),
            Value::Float(f) => write!(out, " {}", f64_text(f)),
        };
    }
}

impl Sink for Text {
    fn family(&mut self, name: &str, kind: Kind, help: &str) {
        self.name.clear();
        self.name.push_str(name);
        match self.format {
            TextFormat::Prometheus => {
                let _ = writeln!(self.out, "# HELP {name} {help}");
                let _ = writeln!(self.out, "# TYPE {name} {}", kind.as_str());
            }
            TextFormat::OpenMetrics => {
                // A counter's family is its name without `_total`, which its samples carry.
                let family = match kind {
                    Kind::Counter => name.strip_suffix("_total").unwrap_or(name),
                    _ => name,
                };
                let _ = writeln!(self.out, "# HELP {family} {}", escape(help));
                let _ = writeln!(self.out, "# TYPE {family} {}", kind.as_str());
            }
        }
    }

    fn sample(&mut self, series: Option<usize>, extra: &[(&str, &str)], value: Value) {
        self.line("", series, extra, value);
    }

    fn histogram(&mut self, series: usize, h: HistogramSample<'_>) {
        let open_metrics = self.format == TextFormat::OpenMetrics;
        let mut exemplars = h.exemplars.iter().peekable();
        let mut cum = 0;
        let n_bounds = h.bounds.le.len();
        for k in 0..=n_bounds {
            cum += h.counts.get(k).copied().unwrap_or(0);
            let le = h.bounds.text.get(k).map_or("+Inf", String::as_str);
            self.sample_text("_bucket", Some(series), &[("le", le)], Value::Int(cum));
            if let Some(e) = exemplars.next_if(|e| e.bucket == k) {
                if open_metrics {
                    let _ = write!(
                        self.out,
                        " # {{trace_id=\"{}\",span_id=\"{}\"}} {} {}",
                        e.trace_id, e.span_id, e.value, e.at_unix
                    );
                }
            }
            self.out.push('\n');
        }
        self.line("_sum", Some(series), &[], h.sum);
        self.line("_count", Some(series), &[], Value::Int(cum));
    }
}

/// The quantiles `/metrics` shows of one series over one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WindowQuantiles {
    /// Median result bytes.
    pub(crate) p50: u64,
    /// 95th percentile result bytes.
    pub(crate) p95: u64,
    /// 99th percentile result bytes.
    pub(crate) p99: u64,
    /// 95th percentile latency, microseconds.
    pub(crate) latency_p95_us: u64,
    /// Largest result bytes (exact).
    pub(crate) max: u64,
}

/// One series as `/metrics` shows it: its counters and bucket counts since start, and its
/// quantiles per window, copied out of the aggregator.
#[derive(Debug, Clone)]
pub(crate) struct FrameSeries {
    /// The series.
    pub(crate) key: SeriesKey,
    /// Counters since start.
    pub(crate) total: Counts,
    /// Over-ceiling results by weakest layer.
    pub(crate) over_ceiling: Vec<(String, u64)>,
    /// The stack the series is held to.
    pub(crate) held_to: HeldTo,
    /// Non-cumulative size bucket counts, +Inf last.
    pub(crate) size_buckets: Vec<u64>,
    /// Non-cumulative latency bucket counts, +Inf last.
    pub(crate) latency_buckets: Vec<u64>,
    /// Sum of result bytes.
    pub(crate) size_sum: u64,
    /// Sum of latencies, microseconds.
    pub(crate) latency_sum_us: u64,
    /// Per window (the configured ones, then `all`): p50, p95, p99 bytes, latency p95 µs, max
    /// bytes; `None` when the window saw no call.
    pub(crate) windows: Vec<Option<WindowQuantiles>>,
    /// Native buckets of the size (bytes) and latency (seconds) histograms since start, when
    /// captured for the protobuf exposition.
    pub(crate) native: Option<Box<[NativeBuckets; 2]>>,
    /// Exemplars of the size buckets (see the [module docs](self)).
    pub(crate) size_exemplars: Vec<Exemplar>,
}

/// The stack one series is held to, as `/metrics` shows it.
#[derive(Debug, Clone)]
pub(crate) struct HeldTo {
    /// The stack's name (`daemon`, a service's, an agent's).
    pub(crate) stack: Arc<str>,
    /// Its layers: indices into [`Frame::stack`], in stack order.
    pub(crate) layers: Vec<usize>,
    /// Its ceiling: the weakest layer's id and limit in bytes.
    pub(crate) ceiling: Option<(String, u64)>,
}

/// What `/metrics` needs of the aggregator's state, copied out at one instant so the exposition
/// is rendered off the aggregator task: a scrape holds ingestion only for [`Frame::capture`].
#[derive(Debug, Clone)]
pub struct Frame {
    /// Series, sorted by key.
    pub(crate) series: Vec<FrameSeries>,
    /// Every layer a series is held to (the daemon's stack, then the services' and agents').
    pub(crate) stack: Arc<Stack>,
    /// Upper bounds of the size buckets.
    pub(crate) size_bounds: Arc<[u64]>,
    /// Window labels, then `all`.
    pub(crate) windows: Vec<String>,
    /// The cardinality cap.
    pub(crate) max_series: usize,
    /// Records routed to the overflow series.
    pub(crate) overflow_records: u64,
    /// Values clamped: (sizes, latencies).
    pub(crate) clamped: [u64; 2],
    /// The joiner of coding agents' signals: counters, and calls waiting.
    pub(crate) joins: (JoinStats, usize),
    /// The upstreams requests are forwarded to (filled in by the reader, not the aggregator).
    pub(crate) forward: Vec<UpstreamView>,
    /// When it was captured, Unix seconds.
    pub(crate) now: u64,
}

impl Frame {
    /// The same frame at `now` without its series: what `/metrics` serves once the aggregator
    /// has stopped (its self-metrics and the stack, no tool series whose counts stopped).
    pub(crate) fn without_series(&self, now: u64) -> Self {
        Self {
            series: Vec::new(),
            stack: self.stack.clone(),
            size_bounds: self.size_bounds.clone(),
            windows: self.windows.clone(),
            max_series: self.max_series,
            overflow_records: self.overflow_records,
            clamped: self.clamped,
            joins: self.joins,
            forward: Vec::new(),
            now,
        }
    }

    /// How many series it holds.
    pub fn series_len(&self) -> usize {
        self.series.len()
    }

    /// How many exemplars its size histograms carry, over every series.
    pub fn exemplars_len(&self) -> usize {
        self.series.iter().map(|s| s.size_exemplars.len()).sum()
    }

    /// Copies what the text exposition shows of `state` at `now`.
    pub(crate) fn capture(state: &State, now: u64) -> Self {
        Self::capture_with(state, now, false)
    }

    /// Copies what `/metrics` shows of `state` at `now`, with each series' native histogram
    /// buckets when `native` (for the protobuf exposition).
    pub fn capture_with(state: &State, now: u64, native: bool) -> Self {
        let windows: Vec<Option<usize>> = (0..state.limits.windows.len())
            .map(Some)
            .chain([None])
            .collect();
        let mut series: Vec<FrameSeries> = state
            .series
            .iter()
            .map(|(k, s)| FrameSeries {
                key: k.clone(),
                total: s.total.counts,
                over_ceiling: s.over_ceiling.clone(),
                held_to: {
                    let mut layers = s.profile.order.to_vec();
                    layers.sort_unstable();
                    let ceiling = state.limits.stacks.ceiling(&s.profile);
                    HeldTo {
                        stack: s.profile.name.clone(),
                        layers,
                        ceiling: ceiling.map(|c| (c.layer_id.to_string(), c.bytes)),
                    }
                },
                size_buckets: s.size_buckets.clone(),
                latency_buckets: s.latency_buckets.clone(),
                size_sum: s.size_sum,
                latency_sum_us: s.latency_sum_us,
                windows: windows
                    .iter()
                    .map(|w| {
                        let q = |st: &Stats| {
                            (st.counts.calls > 0).then(|| WindowQuantiles {
                                p50: st.size.quantile(0.5),
                                p95: st.size.quantile(0.95),
                                p99: st.size.quantile(0.99),
                                latency_p95_us: st.latency.quantile(0.95),
                                max: st.size.max(),
                            })
                        };
                        match w {
                            None => q(&s.total),
                            Some(i) => q(&s.window_stats(*i, now)),
                        }
                    })
                    .collect(),
                native: native.then(|| {
                    Box::new([
                        s.total.size.native_buckets(1.0),
                        s.total.latency.native_buckets(1e-6),
                    ])
                }),
                size_exemplars: exemplars(&s.largest, &state.limits.size_bounds),
            })
            .collect();
        series.sort_by(|a, b| a.key.cmp(&b.key));
        Self {
            series,
            stack: state.limits.stacks.all.clone(),
            size_bounds: state.limits.size_bounds.clone(),
            windows: state
                .limits
                .windows
                .iter()
                .map(|(l, _)| l.clone())
                .chain(["all".to_string()])
                .collect(),
            max_series: state.limits.max_series,
            overflow_records: state.overflow_records,
            clamped: state.clamped,
            joins: (state.joiner.stats, state.joiner.waiting()),
            forward: Vec::new(),
            now,
        }
    }
}

/// The families of forwarding: each upstream's requests by outcome, retries and queue.
fn write_forward(upstreams: &[UpstreamView], sink: &mut impl Sink) {
    let int = Value::Int;
    sink.family(
        FORWARD_REQUESTS,
        Kind::Counter,
        "Accepted OTLP requests relayed to an upstream, by outcome: sent, dropped for a full queue (queue_full), given up after retries or refused for good (gave_up).",
    );
    for u in upstreams {
        for (outcome, n) in [
            ("sent", u.sent),
            ("queue_full", u.queue_full),
            ("gave_up", u.gave_up),
        ] {
            sink.sample(
                None,
                &[("upstream", &u.upstream), ("outcome", outcome)],
                int(n),
            );
        }
    }
    sink.family(
        FORWARD_RETRIES,
        Kind::Counter,
        "Attempts to relay a request to an upstream that were retried.",
    );
    for u in upstreams {
        sink.sample(None, &[("upstream", &u.upstream)], int(u.retries));
    }
    sink.family(
        FORWARD_QUEUE,
        Kind::Gauge,
        "Requests waiting for or in flight to an upstream.",
    );
    for u in upstreams {
        sink.sample(None, &[("upstream", &u.upstream)], int(u.queued));
    }
}

/// Renders the whole text exposition of `state` at `now` (capture and render in one go).
pub fn render(state: &State, stats: &SelfStats, alerts: &AlertStats, now: u64) -> String {
    render_frame(&Frame::capture(state, now), stats, alerts)
}

/// Renders the whole OpenMetrics exposition of `state` at `now`, exemplars included.
pub fn render_openmetrics(
    state: &State,
    stats: &SelfStats,
    alerts: &AlertStats,
    now: u64,
) -> String {
    render_frame_as(
        &Frame::capture(state, now),
        stats,
        alerts,
        TextFormat::OpenMetrics,
    )
}

/// Renders the whole text exposition of a captured frame.
pub(crate) fn render_frame(frame: &Frame, stats: &SelfStats, alerts: &AlertStats) -> String {
    render_frame_as(frame, stats, alerts, TextFormat::Prometheus)
}

/// Renders the whole text exposition of a captured frame in `format`.
pub(crate) fn render_frame_as(
    frame: &Frame,
    stats: &SelfStats,
    alerts: &AlertStats,
    format: TextFormat,
) -> String {
    let mut text = Text::with_format(frame, format);
    write_families(frame, stats, alerts, &mut text);
    text.finish()
}

/// A weighted count (thousandths of a call) as a sample: an integer when it is one.
fn calls(milli: u64) -> Value {
    match milli % 1000 {
        0 => Value::Int(milli / 1000),
        _ => Value::Float(calls_of(milli)),
    }
}

/// Content type of the OpenMetrics exposition.
pub(crate) const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Whether an `Accept` header asks for OpenMetrics text (and does not refuse it with `q=0`).
pub(crate) fn wants_openmetrics(accept: &str) -> bool {
    accept.split(',').any(|part| {
        let mut fields = part.split(';').map(str::trim);
        fields.next() == Some("application/openmetrics-text")
            && !fields.any(|f| {
                f.strip_prefix("q=")
                    .and_then(|q| q.parse::<f64>().ok())
                    .is_some_and(|q| q <= 0.0)
            })
    })
}

/// Writes every family of the exposition of `frame` to `sink`.
pub(crate) fn write_families(
    frame: &Frame,
    stats: &SelfStats,
    alerts: &AlertStats,
    sink: &mut impl Sink,
) {
    let now = frame.now;
    let all = || (0..frame.series.len()).zip(&frame.series);

    type Get = fn(&Counts) -> Value;
    #[rustfmt::skip]
    let counters: [(&str, &str, Get); 6] = [
        (TOOL_CALLS, "Tool calls seen, each span weighted by its adjusted count when its tracer sampled it (see toolsize_tool_spans_total).", |s| calls(s.calls_milli)),
        (TOOL_CALL_ERRORS, "Tool calls that failed (weighted as the calls).", |s| calls(s.weighted(s.errors))),
        (TOOL_RESULTS_TRUNCATED, "Results the tool reported truncated before the model saw them (weighted as the calls).", |s| calls(s.weighted(s.truncated))),
        (TOOL_RESULTS_TRUNCATED_UPSTREAM, "Results whose content shows a cut made before the daemon saw them; their size is a lower bound (weighted as the calls).", |s| calls(s.weighted(s.truncated_upstream))),
        (TOOL_RESULTS_SIZE_UNKNOWN, "Successful results whose size is unknown (content not captured or a placeholder).", |s| Value::Int(s.unknown_size)),
        (TOOL_SPANS, "Tool spans received. Below toolsize_tool_calls_total when the tracer sampled (the probability from the span's tracestate or recognition.sampling_rates): the call, error, truncation and over-ceiling counters are then extrapolated, each span weighted by its adjusted count; the size histograms hold each span once.", |s| Value::Int(s.calls)),
    ];
    for (name, help, get) in counters {
        sink.family(name, Kind::Counter, help);
        for (i, s) in all() {
            sink.sample(Some(i), &[], get(&s.total));
        }
    }
    sink.family(
        TOOL_RESULTS_SIZED,
        Kind::Counter,
        "Results of known size, by source: measured by the tool, derived from content as recorded, unwrapped from the tracer's envelope, reported by a coding agent, or a lower bound (cut upstream).",
    );
    for (i, s) in all() {
        let t = &s.total;
        for (source, n) in [
            ("measured", t.measured),
            ("derived", t.derived),
            ("unwrapped", t.unwrapped),
            ("reported", t.reported),
            ("lower_bound", t.lower_bound),
        ] {
            sink.sample(Some(i), &[("source", source)], Value::Int(n));
        }
    }
    sink.family(
        TOOL_RESULT_UPSTREAM_LIMIT,
        Kind::Gauge,
        "Attribute value length limit (characters or UTF-16 units) the tool's results were seen cut at upstream, configured or learned from the data.",
    );
    for (i, s) in all() {
        if let Some(n) = s.total.upstream_limit {
            sink.sample(Some(i), &[], Value::Int(n));
        }
    }

    sink.family(
        TOOL_RESULTS_OVER_CEILING,
        Kind::Counter,
        "Results over a ceiling, counted once under the weakest layer of the stack that cuts them (weighted as the calls).",
    );
    let stack = &frame.stack;
    for (i, s) in all() {
        let count = |id: &str| {
            s.over_ceiling
                .iter()
                .find(|(l, _)| l == id)
                .map_or(0, |(_, n)| *n)
        };
        let mine = || s.held_to.layers.iter().map(|&l| stack.layers()[l].id());
        for id in mine() {
            sink.sample(Some(i), &[("layer", id)], calls(count(id)));
        }
        // Counts restored from a snapshot for layers no longer in the series' stack.
        for (id, n) in &s.over_ceiling {
            if !mine().any(|x| x == id) {
                sink.sample(Some(i), &[("layer", id)], calls(*n));
            }
        }
    }
    sink.family(
        TOOL_RESULT_CEILING_BYTES,
        Kind::Gauge,
        "The ceiling each series is held to: the limit in bytes of the weakest layer of its stack (the daemon's, its service's or its coding agent's), with the stack and layer as labels.",
    );
    for (i, s) in all() {
        if let Some((layer, bytes)) = &s.held_to.ceiling {
            let labels = [("stack", &*s.held_to.stack), ("layer", layer.as_str())];
            sink.sample(Some(i), &labels, Value::Int(*bytes));
        }
    }
    sink.family(
        CEILING_BYTES,
        Kind::Gauge,
        "Effective limit of each layer of the stack, in bytes (estimated from tokens, characters or lines for layers counting in those units).",
    );
    for layer in stack.layers() {
        if let Some(b) = layer.limit_bytes {
            sink.sample(None, &[("layer", layer.id())], Value::Int(b.bytes));
        }
    }

    write_histograms(frame, sink);

    // Quantiles per window, computed by the daemon (exact to 1 %).
    type Pick = fn(&WindowQuantiles) -> Value;
    let quantiles: [(&str, &str, Pick); 5] = [
        (TOOL_RESULT_SIZE_P50, "Median result size over a sliding window, computed by the daemon from HDR histograms (1% precision).", |q| Value::Int(q.p50)),
        (TOOL_RESULT_SIZE_P95, "95th percentile result size over a sliding window, computed by the daemon (1% precision).", |q| Value::Int(q.p95)),
        (TOOL_RESULT_SIZE_P99, "99th percentile result size over a sliding window, computed by the daemon (1% precision).", |q| Value::Int(q.p99)),
        (TOOL_CALL_DURATION_P95, "95th percentile call duration over a sliding window, computed by the daemon.", |q| Value::Float(q.latency_p95_us as f64 / 1e6)),
        (TOOL_RESULT_SIZE_MAX, "Largest result size over a sliding window (exact).", |q| Value::Int(q.max)),
    ];
    for (name, help, pick) in quantiles {
        sink.family(name, Kind::Gauge, help);
        for (i, s) in all() {
            for (wl, q) in frame.windows.iter().zip(&s.windows) {
                if let Some(q) = q {
                    sink.sample(Some(i), &[("window", wl)], pick(q));
                }
            }
        }
    }

    // Self-metrics.
    let v = stats.view();
    let int = Value::Int;
    sink.family(
        OTLP_REQUESTS,
        Kind::Counter,
        "OTLP export requests received.",
    );
    sink.sample(None, &[("transport", "grpc")], int(v.requests_grpc));
    sink.sample(None, &[("transport", "http")], int(v.requests_http));
    sink.family(
        OTLP_REQUESTS_REFUSED,
        Kind::Counter,
        "OTLP export requests refused as a whole, by reason.",
    );
    for (r, n) in RefusedRequest::ALL.iter().zip(v.refused_requests) {
        sink.sample(None, &[("reason", r.as_str())], int(n));
    }
    sink.family(
        OTLP_REQUESTS_ACCEPTED,
        Kind::Counter,
        "OTLP export requests accepted, by signal: traces and logs are read for tool calls, metrics acknowledged.",
    );
    for (s, n) in OtlpSignal::ALL.iter().zip(v.accepted_requests) {
        sink.sample(None, &[("signal", s.as_str())], int(n));
    }
    sink.family(
        LOG_RECORDS_ACCEPTED,
        Kind::Counter,
        "Log records accepted: tool calls of coding agents recorded, other records ignored.",
    );
    sink.sample(None, &[("kind", "tool")], int(v.log_records.tool));
    sink.sample(None, &[("kind", "other")], int(v.log_records.other));
    sink.family(
        LOG_RECORDS_REFUSED,
        Kind::Counter,
        "Log records refused, by reason.",
    );
    sink.sample(
        None,
        &[("reason", "overloaded")],
        int(v.log_records.overloaded),
    );
    sink.sample(
        None,
        &[("reason", "aggregator_stopped")],
        int(v.log_records.stopped),
    );
    sink.family(
        LOG_RECORDS_DROPPED,
        Kind::Counter,
        "Tool-call log records accepted and then lost: queued when the aggregator stopped.",
    );
    sink.sample(None, &[], int(v.log_records.dropped));
    sink.family(
        SPANS_ACCEPTED,
        Kind::Counter,
        "Spans accepted: tool spans recorded, other spans ignored.",
    );
    sink.sample(None, &[("kind", "tool")], int(v.spans_tool));
    sink.sample(None, &[("kind", "other")], int(v.spans_other));
    sink.family(SPANS_REFUSED, Kind::Counter, "Spans refused, by reason.");
    sink.sample(None, &[("reason", "invalid")], int(v.spans_invalid));
    sink.sample(None, &[("reason", "overloaded")], int(v.spans_overloaded));
    sink.sample(
        None,
        &[("reason", "aggregator_stopped")],
        int(v.spans_stopped),
    );
    sink.family(
        SPANS_DROPPED,
        Kind::Counter,
        "Tool spans accepted and then lost: queued when the aggregator stopped.",
    );
    sink.sample(None, &[], int(v.spans_dropped));
    sink.family(
        SERIES,
        Kind::Gauge,
        "(service, tool) series held, overflow included.",
    );
    sink.sample(None, &[], int(frame.series.len() as u64));
    sink.family(
        SERIES_LIMIT,
        Kind::Gauge,
        "Cardinality cap on (service, tool) series.",
    );
    sink.sample(None, &[], int(frame.max_series as u64));
    sink.family(
        SERIES_OVERFLOW,
        Kind::Counter,
        "Tool results recorded in the overflow series because the cap was reached.",
    );
    sink.sample(None, &[], int(frame.overflow_records));
    sink.family(
        VALUES_CLAMPED,
        Kind::Counter,
        "Values above a histogram's highest trackable value (1 GiB, one hour), recorded at it.",
    );
    for (h, n) in ["size", "latency"].iter().zip(frame.clamped) {
        sink.sample(None, &[("histogram", h)], int(n));
    }
    let (joins, waiting) = frame.joins;
    sink.family(
        AGENT_SIGNALS,
        Kind::Counter,
        "Signals of coding agents' tool calls joined into one record per call: merged into a call another signal opened, late (after the call was counted), orphan calls (parts alone), unjoined (too many calls waiting).",
    );
    for (outcome, n) in [
        ("merged", joins.merged),
        ("late", joins.late),
        ("orphan", joins.orphans),
        ("unjoined", joins.unjoined),
    ] {
        sink.sample(None, &[("outcome", outcome)], int(n));
    }
    sink.family(
        AGENT_CALLS_WAITING,
        Kind::Gauge,
        "Coding agents' tool calls waiting for their other signals (at most one join window).",
    );
    sink.sample(None, &[], int(waiting as u64));
    write_forward(&frame.forward, sink);
    sink.family(
        SPAN_ATTRIBUTES_IGNORED,
        Kind::Counter,
        "Span attributes past the first 255 of their span, not looked at by recognition.",
    );
    sink.sample(None, &[], int(v.attributes_ignored));
    sink.family(
        ADMIN_REQUESTS_REFUSED,
        Kind::Counter,
        "Admin API requests refused for a missing or wrong token.",
    );
    sink.sample(
        None,
        &[("reason", "unauthenticated")],
        int(v.admin_unauthenticated),
    );
    {
        use crate::collector::net::listener::{Closed, Listener};
        let l = &stats.listeners;
        sink.family(CONNECTIONS, Kind::Gauge, "Connections open, by listener.");
        for x in Listener::ALL {
            sink.sample(None, &[("listener", x.as_str())], int(l.open(x)));
        }
        sink.family(
            CONNECTIONS_LIMIT,
            Kind::Gauge,
            "Connection cap of each listener, after fitting under the open-file limit.",
        );
        for x in Listener::ALL {
            sink.sample(None, &[("listener", x.as_str())], int(l.limit(x)));
        }
        sink.family(
            CONNECTIONS_CLOSED,
            Kind::Counter,
            "Connections the daemon closed: over the cap with every connection busy (limit), idle longest when a new one came at the cap (evicted), request head or HTTP/2 preface late (header_timeout), silent too long (idle_timeout), TLS handshake failed or late (tls_handshake).",
        );
        for x in Listener::ALL {
            for r in Closed::ALL {
                sink.sample(
                    None,
                    &[("listener", x.as_str()), ("reason", r.as_str())],
                    int(l.closed(x, r)),
                );
            }
        }
    }
    sink.family(
        LABEL_VALUES_SANITIZED,
        Kind::Counter,
        "Tool spans whose service or tool name was cut to its byte limit (too_long) or had control or format characters replaced (hidden_characters).",
    );
    let cuts = [v.label_cuts.service, v.label_cuts.tool];
    for (label, counts) in crate::collector::ingest::recognize::LabelCuts::LABELS
        .iter()
        .zip(cuts)
    {
        for (reason, n) in crate::collector::ingest::recognize::LabelCuts::REASONS
            .iter()
            .zip(counts)
        {
            sink.sample(None, &[("label", label), ("reason", reason)], int(n));
        }
    }
    if v.snapshot_last_unix > 0 {
        sink.family(
            SNAPSHOT_AGE,
            Kind::Gauge,
            "Seconds since the last snapshot written to disk.",
        );
        sink.sample(None, &[], int(now.saturating_sub(v.snapshot_last_unix)));
    }
    sink.family(
        SNAPSHOTS_WRITTEN,
        Kind::Counter,
        "Snapshots written to disk.",
    );
    sink.sample(None, &[], int(v.snapshots_written));
    sink.family(
        SNAPSHOT_FAILURES,
        Kind::Counter,
        "Snapshot writes that failed.",
    );
    sink.sample(None, &[], int(v.snapshot_failures));
    sink.family(
        ALERT_NOTIFICATIONS,
        Kind::Counter,
        "Alert notifications, by sink and outcome.",
    );
    for kind in SinkKind::ALL {
        for (ok, outcome) in [(true, "success"), (false, "failure")] {
            sink.sample(
                None,
                &[("sink", kind.as_str()), ("outcome", outcome)],
                int(alerts.notifications(kind, ok)),
            );
        }
    }
    sink.family(
        ALERT_EVENTS_DROPPED,
        Kind::Counter,
        "Alert rule matches dropped because the alert table was full.",
    );
    sink.sample(None, &[], int(alerts.events_dropped()));
    sink.family(
        ALERT_MATCHES,
        Kind::Counter,
        "Alert rule matches, by rule and outcome: sent (a new alert or a resend), merged into an alert already firing, deferred while the alert queue was full, dropped past the retry queue, engine_stopped when the alert task had stopped.",
    );
    for rule in RuleKind::ALL {
        for outcome in MatchOutcome::ALL {
            sink.sample(
                None,
                &[("alertname", rule.name()), ("outcome", outcome.as_str())],
                int(alerts.matches(rule, outcome)),
            );
        }
    }
    sink.family(
        ALERTS_FIRING,
        Kind::Gauge,
        "Alerts the daemon holds firing, by rule and severity.",
    );
    for ((name, severity), n) in alerts.firing() {
        sink.sample(
            None,
            &[("alertname", &name), ("severity", &severity)],
            int(n),
        );
    }
}

fn write_histograms(frame: &Frame, sink: &mut impl Sink) {
    let size = Bounds::new(frame.size_bounds.iter().map(|&b| b as f64).collect(), |b| {
        (*b as u64).to_string()
    });
    let latency = Bounds::new(
        LATENCY_BUCKETS_US.iter().map(|&b| b as f64 / 1e6).collect(),
        |b| b.to_string(),
    );
    sink.family(
        TOOL_RESULT_SIZE,
        Kind::Histogram,
        "UTF-8 bytes of tool results as handed to the model.",
    );
    for (i, s) in frame.series.iter().enumerate() {
        sink.histogram(
            i,
            HistogramSample {
                bounds: &size,
                counts: &s.size_buckets,
                sum: Value::Int(s.size_sum),
                native: s.native.as_deref().map(|n| &n[0]),
                exemplars: &s.size_exemplars,
            },
        );
    }
    sink.family(TOOL_CALL_DURATION, Kind::Histogram, "Tool call duration.");
    for (i, s) in frame.series.iter().enumerate() {
        sink.histogram(
            i,
            HistogramSample {
                bounds: &latency,
                counts: &s.latency_buckets,
                sum: Value::Float(s.latency_sum_us as f64 / 1e6),
                native: s.native.as_deref().map(|n| &n[1]),
                exemplars: &[],
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state with two series: `big` with results in three buckets (two traced results in the
    /// top one), `untraced` whose results have no trace id.
    fn state() -> State {
        use crate::collector::state::tests::{known, limits, rec};
        let mut state = State::new(limits(100));
        let mut recs = Vec::new();
        for (i, b) in [100u64, 30_000, 31_000, 960_000, 1_000_000]
            .into_iter()
            .enumerate()
        {
            let mut r = rec("big", known(b));
            r.trace_id = [i as u8 + 0x10; 16];
            recs.push(r);
        }
        let mut r = rec("untraced", known(50_000));
        r.trace_id = [0; 16];
        recs.push(r);
        state.record_batch(&recs, 1_700_000_000);
        state
    }

    #[test]
    fn one_exemplar_per_bucket_the_largest_traced_result() {
        let state = state();
        let frame = Frame::capture(&state, 1_700_000_010);
        let big = frame.series.iter().find(|s| &*s.key.tool == "big").unwrap();
        let bounds = &frame.size_bounds;
        let values: Vec<u64> = big.size_exemplars.iter().map(|e| e.value).collect();
        // 960,000 and 1,000,000 share a bucket, as do 30,000 and 31,000: only the larger of
        // each is its exemplar.
        let bucket = |v: u64| bounds.partition_point(|&b| b < v);
        assert_eq!(bucket(960_000), bucket(1_000_000), "{bounds:?}");
        assert_eq!(bucket(30_000), bucket(31_000), "{bounds:?}");
        // The three largest (the test limits keep 3) make two exemplars; 100 bytes is not
        // among them.
        assert_eq!(state.limits.largest_results, 3);
        assert_eq!(values, [31_000, 1_000_000]);
        assert!(big.size_exemplars.len() <= state.limits.largest_results);
        let e = big
            .size_exemplars
            .iter()
            .find(|e| e.value == 1_000_000)
            .unwrap();
        assert_eq!(e.trace_id, "14".repeat(16));
        assert_eq!(e.span_id, "02".repeat(8));
        assert_eq!(e.at_unix, 1_700_000_000);
        assert!(big
            .size_exemplars
            .windows(2)
            .all(|w| w[0].bucket < w[1].bucket));
        let untraced = frame
            .series
            .iter()
            .find(|s| &*s.key.tool == "untraced")
            .unwrap();
        assert!(untraced.size_exemplars.is_empty());
    }

    #[test]
    fn openmetrics_names_counter_families_and_carries_exemplars() {
        let state = state();
        let frame = Frame::capture(&state, 1_700_000_010);
        let (stats, alerts) = (SelfStats::default(), AlertStats::default());
        let om = render_frame_as(&frame, &stats, &alerts, TextFormat::OpenMetrics);
        assert!(om.ends_with("\n# EOF\n"), "{om}");
        assert!(om.contains("# TYPE toolsize_tool_calls counter\n"));
        assert!(om.contains("toolsize_tool_calls_total{service=\"svc\",tool=\"big\"} 5\n"));
        let line = om
            .lines()
            .find(|l| {
                l.starts_with("toolsize_tool_result_size_bytes_bucket") && l.contains(" 1000000 ")
            })
            .unwrap_or_else(|| panic!("no exemplar line:\n{om}"));
        assert!(
            line.ends_with(&format!(
                " # {{trace_id=\"{}\",span_id=\"{}\"}} 1000000 1700000000",
                "14".repeat(16),
                "02".repeat(8)
            )),
            "{line}"
        );
        let with_exemplar = om.lines().filter(|l| l.contains(" # {")).count();
        assert_eq!(
            with_exemplar, 2,
            "one per bucket holding a traced large result:\n{om}"
        );
        // No exemplar, no EOF, and the counters' own names in the 0.0.4 text.
        let text = render_frame(&frame, &stats, &alerts);
        assert!(!text.contains(" # {") && !text.contains("# EOF"));
        assert!(text.contains("# TYPE toolsize_tool_calls_total counter\n"));
        // Apart from the family lines, the exemplars and EOF, the two formats are the same.
        let strip = |t: &str| -> Vec<String> {
            t.lines()
                .filter(|l| !l.starts_with('#'))
                .map(|l| l.split(" # {").next().unwrap().to_string())
                .collect()
        };
        assert_eq!(strip(&om), strip(&text));
    }

    /// The per-series bound docs/collector.md states ("Limits"), with the defaults: every
    /// sample line of a series whose results were seen cut upstream (the most it can have).
    #[test]
    fn a_series_renders_at_most_the_documented_lines() {
        use crate::collector::state::tests::{known, rec};
        use crate::collector::state::Limits;
        let limits = Limits::from_config(&crate::collector::Config::default());
        let (l, s, w) = (
            limits.stacks.daemon().order.len(),
            limits.size_bounds.len(),
            limits.windows.len(),
        );
        let mut state = State::new(limits);
        let mut r = rec("t", known(5_000));
        r.truncated_upstream = true;
        r.upstream_limit = Some(1000);
        state.record_batch(&[r], 1_700_000_000);
        let text = render(
            &state,
            &SelfStats::default(),
            &AlertStats::default(),
            1_700_000_001,
        );
        let lines = text.lines().filter(|l| l.contains("tool=\"t\"")).count();
        let bound = 13 + l + (s + 3) + (LATENCY_BUCKETS_US.len() + 3) + 5 * (w + 1);
        assert_eq!(lines, bound, "{text}");
        let docs = include_str!("../../../docs/collector.md");
        let stated = format!(
            "13 + L + (S + 3) + {} + 5 × (W + 1) sample lines",
            LATENCY_BUCKETS_US.len() + 3
        );
        assert!(
            docs.contains(&stated),
            "docs/collector.md must state {stated:?}"
        );
        let with_defaults = format!("{bound} with the defaults");
        assert!(
            docs.contains(&with_defaults),
            "docs/collector.md must state {with_defaults:?}"
        );
    }

    #[test]
    fn every_counter_is_named_total() {
        struct Names(Vec<(String, Kind)>);
        impl Sink for Names {
            fn family(&mut self, name: &str, kind: Kind, _: &str) {
                self.0.push((name.into(), kind));
            }
            fn sample(&mut self, _: Option<usize>, _: &[(&str, &str)], _: Value) {}
            fn histogram(&mut self, _: usize, _: HistogramSample<'_>) {}
        }
        let mut names = Names(Vec::new());
        let frame = Frame::capture(&state(), 1_700_000_010);
        write_families(
            &frame,
            &SelfStats::default(),
            &AlertStats::default(),
            &mut names,
        );
        for (name, kind) in names.0 {
            assert_eq!(kind == Kind::Counter, name.ends_with("_total"), "{name}");
        }
    }

    #[test]
    fn openmetrics_negotiation() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert!(wants_openmetrics(prometheus));
        assert!(!wants_openmetrics("text/plain;version=0.0.4"));
        assert!(!wants_openmetrics(
            "application/openmetrics-text;q=0,text/plain"
        ));
        assert!(!wants_openmetrics(""));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert!(matches!(escape("plain"), Cow::Borrowed("plain")));
    }
}
