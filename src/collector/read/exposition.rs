//! `/metrics`: Prometheus text exposition (format 0.0.4) of per-tool state and self-metrics.
//!
//! Hand-written rather than through `prometheus-client`: the aggregator already owns every number
//! (HDR histograms, exact bucket counts, counters), so a registry would only duplicate state or
//! need a custom collector, and the text format is small. Its correctness is checked by the real
//! `promtool check metrics` in the tests. The aggregator only copies the numbers into a [`Frame`]
//! (and computes the windows' quantiles); the exposition is rendered by the admin handler, off
//! the aggregator task, so a scrape holds ingestion only for the copy.
//!
//! The families are described once, in [`write_families`] (each owner of numbers writing its
//! own: `read/families.rs`), to a [`Sink`]: [`Text`] writes the
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

use crate::collector::alerts::AlertStats;
use crate::collector::forward::UpstreamView;
use crate::collector::state::histogram::{Clamped, NativeBuckets};
use crate::collector::state::join::JoinStats;
use crate::collector::state::series::Largest;
use crate::collector::state::{Counts, SeriesKey, State, Stats};
use crate::collector::SelfStats;
use crate::layers::Stack;

pub(crate) use super::families::write_families;

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
    pub(crate) fn new(le: Vec<f64>, text: impl Fn(&f64) -> String) -> Self {
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
/// Results with no trace id (all zeros) are skipped.
pub(crate) fn exemplars(largest: &[Largest], bounds: &[u64]) -> Vec<Exemplar> {
    let mut out: Vec<Exemplar> = Vec::new();
    for l in largest {
        let r = &l.result;
        if r.trace_id == [0; 16] {
            continue;
        }
        let bucket = bounds.partition_point(|&b| b < l.bytes);
        if out.iter().any(|e| e.bucket == bucket) {
            continue;
        }
        out.push(Exemplar {
            bucket,
            value: l.bytes,
            trace_id: crate::hex::encode(&r.trace_id),
            span_id: crate::hex::encode(&r.span_id),
            at_unix: r.at_unix,
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
    /// What its results cost the context, when they entered one.
    pub(crate) context: Option<crate::collector::state::context::ToolContext>,
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
    /// Values clamped.
    pub(crate) clamped: Clamped,
    /// The joiner of coding agents' signals: counters, and calls waiting.
    pub(crate) joins: (JoinStats, usize),
    /// The context ledger: what it dropped and ended, the sessions it follows and its cap.
    pub(crate) context: (crate::collector::state::context::LedgerStats, usize, usize),
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
            context: self.context,
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
            .map(|(k, s)| (k, s, s.total_stats()))
            .map(|(k, s, total)| FrameSeries {
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
                            None => q(&total),
                            Some(i) => q(&s.window_stats(*i, now)),
                        }
                    })
                    .collect(),
                native: native.then(|| {
                    Box::new([
                        total.size.native_buckets(1.0),
                        total.latency.native_buckets(1e-6),
                    ])
                }),
                size_exemplars: exemplars(&s.largest, &state.limits.size_bounds),
                context: state.context.tool(&k.service, &k.tool).cloned(),
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
            context: (
                state.context.stats,
                state.context.sessions(),
                state.limits.context.max_sessions,
            ),
            forward: Vec::new(),
            now,
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::state::LATENCY_BUCKETS_US;

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
    /// sample line of a series whose results were seen cut upstream and entered a session's
    /// context (the most it can have).
    #[test]
    fn a_series_renders_at_most_the_documented_lines() {
        use crate::collector::ingest::context::{ContextEvent, ContextKind, SessionId};
        use crate::collector::state::context::SHARE_BOUNDS;
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
        // Its results entered a session's context: two counters and the share histogram.
        let event = |at_ns, kind| ContextEvent {
            service: "svc".into(),
            session: SessionId::Named("s".into()),
            at_ns,
            kind,
            settles: false,
        };
        let result = ContextKind::Result {
            tool: "t".into(),
            tokens: 1_250,
            estimated: true,
        };
        let request = ContextKind::Request {
            input: 5_000,
            cache_read: 0,
            cache_creation: 0,
        };
        state
            .context
            .record(vec![event(1, result), event(2, request)], 1_700_000_000_000);
        let text = render(
            &state,
            &SelfStats::default(),
            &AlertStats::default(),
            1_700_000_001,
        );
        let with_context = text.lines().filter(|l| l.contains("tool=\"t\"")).count();
        let context_lines = 2 + SHARE_BOUNDS.len() + 3;
        assert_eq!(with_context, bound + context_lines, "{text}");
        let docs = include_str!("../../../docs/collector.md");
        let stated = format!(
            "13 + L + (S + 3) + {} + 5 × (W + 1) sample lines",
            LATENCY_BUCKETS_US.len() + 3
        );
        assert!(
            docs.contains(&stated),
            "docs/collector.md must state {stated:?}"
        );
        let stated = format!("plus {context_lines} once its results entered a session's context");
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
