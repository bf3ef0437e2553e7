//! `/metrics`: Prometheus text exposition (format 0.0.4) of per-tool state and self-metrics.
//!
//! Hand-written rather than through `prometheus-client`: the aggregator already owns every number
//! (HDR histograms, exact bucket counts, counters), so a registry would only duplicate state or
//! need a custom collector, and the text format is small. Its correctness is checked by the real
//! `promtool check metrics` in the tests. The aggregator only copies the numbers into a [`Frame`]
//! (and computes the windows' quantiles); the text is rendered by the admin handler, off the
//! aggregator task, so a scrape holds ingestion only for the copy.
//!
//! Names follow `toolsize_<name>_<unit>[_total]` in base units (the Prometheus naming conventions). Per-tool series carry
//! `service` and `tool` labels, bounded by the cardinality cap (overflow series
//! `tool="__overflow__"`). Classic histograms are cumulative since start (mergeable across
//! daemons with `histogram_quantile`); the daemon-computed quantile gauges are exact to 1 % per
//! window.

use std::fmt::Write;

use std::sync::Arc;

use super::aggregator::{Counts, SeriesKey, State, Stats, LATENCY_BUCKETS_US};
use super::alerts::rules::{MatchOutcome, REGISTRY};
use super::alerts::sink::SinkKind;
use super::{RefusedRequest, SelfStats};
use crate::layers::Stack;

/// Tool calls.
pub const TOOL_CALLS: &str = "toolsize_tool_calls_total";
/// Failed tool calls.
pub const TOOL_CALL_ERRORS: &str = "toolsize_tool_call_errors_total";
/// Results the tool reported truncated.
pub const TOOL_RESULTS_TRUNCATED: &str = "toolsize_tool_results_truncated_total";
/// Results whose content showed an upstream cut.
pub const TOOL_RESULTS_TRUNCATED_UPSTREAM: &str = "toolsize_tool_results_truncated_upstream_total";
/// Successful results of unknown size.
pub const TOOL_RESULTS_SIZE_UNKNOWN: &str = "toolsize_tool_results_size_unknown_total";
/// Results with a known size, by how it was obtained.
pub const TOOL_RESULTS_SIZED: &str = "toolsize_tool_results_sized_total";
/// Attribute value length limit a tool's results were seen cut at (configured or learned).
pub const TOOL_RESULT_UPSTREAM_LIMIT: &str = "toolsize_tool_result_upstream_limit_chars";
/// Results over a ceiling, by the weakest layer that cuts them (`layer` label).
pub const TOOL_RESULTS_OVER_CEILING: &str = "toolsize_tool_results_over_ceiling_total";
/// Each layer's effective limit in bytes (`layer` label); estimated for non-byte units.
pub const CEILING_BYTES: &str = "toolsize_ceiling_bytes";
/// Result size histogram.
pub const TOOL_RESULT_SIZE: &str = "toolsize_tool_result_size_bytes";
/// Call duration histogram.
pub const TOOL_CALL_DURATION: &str = "toolsize_tool_call_duration_seconds";
/// Daemon-computed result size median per window (a `quantile` label is reserved for summaries,
/// so each quantile has its own name).
pub const TOOL_RESULT_SIZE_P50: &str = "toolsize_tool_result_size_p50_bytes";
/// Daemon-computed result size 95th percentile per window.
pub const TOOL_RESULT_SIZE_P95: &str = "toolsize_tool_result_size_p95_bytes";
/// Daemon-computed result size 99th percentile per window.
pub const TOOL_RESULT_SIZE_P99: &str = "toolsize_tool_result_size_p99_bytes";
/// Largest result size per window (exact).
pub const TOOL_RESULT_SIZE_MAX: &str = "toolsize_tool_result_size_max_bytes";
/// Daemon-computed duration 95th percentile per window.
pub const TOOL_CALL_DURATION_P95: &str = "toolsize_tool_call_duration_p95_seconds";
/// OTLP requests received.
pub const OTLP_REQUESTS: &str = "toolsize_otlp_requests_total";
/// OTLP requests refused, by reason.
pub const OTLP_REQUESTS_REFUSED: &str = "toolsize_otlp_requests_refused_total";
/// Spans accepted, by kind (tool, other).
pub const SPANS_ACCEPTED: &str = "toolsize_spans_accepted_total";
/// Spans refused, by reason (invalid, overloaded).
pub const SPANS_REFUSED: &str = "toolsize_spans_refused_total";
/// Spans accepted then lost.
pub const SPANS_DROPPED: &str = "toolsize_spans_dropped_total";
/// Series held.
pub const SERIES: &str = "toolsize_series";
/// Cardinality cap.
pub const SERIES_LIMIT: &str = "toolsize_series_limit";
/// Records routed to the overflow series.
pub const SERIES_OVERFLOW: &str = "toolsize_series_overflow_total";
/// Values above a histogram ceiling, clamped to it, by histogram (size, latency).
pub const VALUES_CLAMPED: &str = "toolsize_values_clamped_total";
/// Span attributes past the first 255 of their span, not looked at by recognition.
pub const SPAN_ATTRIBUTES_IGNORED: &str = "toolsize_span_attributes_ignored_total";
/// Service and tool names cut or cleaned before use, by `label` and `reason`.
pub const LABEL_VALUES_SANITIZED: &str = "toolsize_label_values_sanitized_total";
/// Admin requests refused, by reason (`unauthenticated`).
pub const ADMIN_REQUESTS_REFUSED: &str = "toolsize_admin_requests_refused_total";
/// Connections open now, by `listener`.
pub const CONNECTIONS: &str = "toolsize_connections";
/// Connection cap in effect, by `listener`.
pub const CONNECTIONS_LIMIT: &str = "toolsize_connections_limit";
/// Connections the daemon closed or refused, by `listener` and `reason`.
pub const CONNECTIONS_CLOSED: &str = "toolsize_connections_closed_total";
/// Age of the last snapshot.
pub const SNAPSHOT_AGE: &str = "toolsize_snapshot_age_seconds";
/// Snapshots written.
pub const SNAPSHOTS_WRITTEN: &str = "toolsize_snapshots_written_total";
/// Snapshot writes failed.
pub const SNAPSHOT_FAILURES: &str = "toolsize_snapshot_failures_total";

/// Alert notifications, by sink (log, alertmanager, webhook) and outcome (success, failure).
pub const ALERT_NOTIFICATIONS: &str = "toolsize_alert_notifications_total";
/// Alerts the daemon holds firing, by `alertname` and `severity` (every enabled rule, 0 when quiet).
pub const ALERTS_FIRING: &str = "toolsize_alerts_firing";
/// Alert rule matches dropped (alert queue full, or too many alerts held).
pub const ALERT_EVENTS_DROPPED: &str = "toolsize_alert_events_dropped_total";
/// Alert rule matches, by rule (`alertname`) and `outcome` (sent, merged, deferred, dropped).
pub const ALERT_MATCHES: &str = "toolsize_alert_matches_total";

/// Escapes a label value.
pub fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn head(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn f64_text(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

/// One series as `/metrics` shows it: its counters and bucket counts since start, and its
/// quantiles per window, copied out of the aggregator.
#[derive(Debug, Clone)]
pub struct FrameSeries {
    /// The series.
    pub key: SeriesKey,
    /// Counters since start.
    pub total: Counts,
    /// Over-ceiling results by weakest layer.
    pub over_ceiling: Vec<(String, u64)>,
    /// Non-cumulative size bucket counts, +Inf last.
    pub size_buckets: Vec<u64>,
    /// Non-cumulative latency bucket counts, +Inf last.
    pub latency_buckets: Vec<u64>,
    /// Sum of result bytes.
    pub size_sum: u64,
    /// Sum of latencies, microseconds.
    pub latency_sum_us: u64,
    /// Per window (the configured ones, then `all`): p50, p95, p99 bytes, latency p95 µs, max
    /// bytes; `None` when the window saw no call.
    pub windows: Vec<Option<[u64; 5]>>,
}

/// What `/metrics` needs of the aggregator's state, copied out at one instant so the text is
/// rendered off the aggregator task: a scrape holds ingestion only for [`Frame::capture`].
#[derive(Debug, Clone)]
pub struct Frame {
    /// Series, sorted by key.
    pub series: Vec<FrameSeries>,
    /// The effective stack.
    pub stack: Arc<Stack>,
    /// Upper bounds of the size buckets.
    pub size_bounds: Arc<[u64]>,
    /// Window labels, then `all`.
    pub windows: Vec<String>,
    /// The cardinality cap.
    pub max_series: usize,
    /// Records routed to the overflow series.
    pub overflow_records: u64,
    /// Values clamped: (sizes, latencies).
    pub clamped: [u64; 2],
    /// When it was captured, Unix seconds.
    pub now: u64,
}

impl Frame {
    /// Copies what `/metrics` shows of `state` at `now`.
    pub fn capture(state: &State, now: u64) -> Self {
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
                size_buckets: s.size_buckets.clone(),
                latency_buckets: s.latency_buckets.clone(),
                size_sum: s.size_sum,
                latency_sum_us: s.latency_sum_us,
                windows: windows
                    .iter()
                    .map(|w| {
                        let q = |st: &Stats| {
                            (st.calls > 0).then(|| {
                                [
                                    st.size.quantile(0.5),
                                    st.size.quantile(0.95),
                                    st.size.quantile(0.99),
                                    st.latency.quantile(0.95),
                                    st.size.max(),
                                ]
                            })
                        };
                        match w {
                            None => q(&s.total),
                            Some(i) => q(&s.window_stats(*i, now)),
                        }
                    })
                    .collect(),
            })
            .collect();
        series.sort_by(|a, b| a.key.cmp(&b.key));
        Self {
            series,
            stack: state.limits.stack.clone(),
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
            now,
        }
    }
}

/// Renders the whole exposition of `state` at `now` (capture and render in one go).
pub fn render(state: &State, stats: &SelfStats, now: u64) -> String {
    render_frame(&Frame::capture(state, now), stats)
}

/// Renders the whole exposition of a captured frame.
pub fn render_frame(frame: &Frame, stats: &SelfStats) -> String {
    render_parts(frame, stats, true)
}

/// Renders the exposition of a frame, without the two histogram families when `histograms` is
/// false (the protobuf exposition encodes those itself, see [`super::exposition_proto`]).
pub(crate) fn render_parts(frame: &Frame, stats: &SelfStats, histograms: bool) -> String {
    let now = frame.now;
    let mut out = String::with_capacity(4096 + frame.series.len() * 4096);
    let labels: Vec<String> = frame
        .series
        .iter()
        .map(|s| {
            format!(
                "service=\"{}\",tool=\"{}\"",
                escape(&s.key.service),
                escape(&s.key.tool)
            )
        })
        .collect();

    type Get = fn(&Counts) -> u64;
    let counters: [(&str, &str, Get); 5] = [
        (TOOL_CALLS, "Tool calls seen.", |s| s.calls),
        (TOOL_CALL_ERRORS, "Tool calls that failed.", |s| s.errors),
        (
            TOOL_RESULTS_TRUNCATED,
            "Results the tool reported truncated before the model saw them.",
            |s| s.truncated,
        ),
        (
            TOOL_RESULTS_TRUNCATED_UPSTREAM,
            "Results whose content shows a cut made before the daemon saw them; their size is a lower bound.",
            |s| s.truncated_upstream,
        ),
        (
            TOOL_RESULTS_SIZE_UNKNOWN,
            "Successful results whose size is unknown (content not captured or a placeholder).",
            |s| s.unknown_size,
        ),
    ];
    for (name, help, get) in counters {
        head(&mut out, name, "counter", help);
        for (s, l) in frame.series.iter().zip(&labels) {
            let _ = writeln!(out, "{name}{{{l}}} {}", get(&s.total));
        }
    }
    head(
        &mut out,
        TOOL_RESULTS_SIZED,
        "counter",
        "Results of known size, by source: measured by the tool, derived from content as recorded, unwrapped from the tracer's envelope, or a lower bound (cut upstream).",
    );
    for (s, l) in frame.series.iter().zip(&labels) {
        let t = &s.total;
        for (source, n) in [
            ("measured", t.measured),
            ("derived", t.derived),
            ("unwrapped", t.unwrapped),
            ("lower_bound", t.lower_bound),
        ] {
            let _ = writeln!(out, "{TOOL_RESULTS_SIZED}{{{l},source=\"{source}\"}} {n}");
        }
    }
    head(
        &mut out,
        TOOL_RESULT_UPSTREAM_LIMIT,
        "gauge",
        "Attribute value length limit (characters or UTF-16 units) the tool's results were seen cut at upstream, configured or learned from the data.",
    );
    for (s, l) in frame.series.iter().zip(&labels) {
        if let Some(n) = s.total.upstream_limit {
            let _ = writeln!(out, "{TOOL_RESULT_UPSTREAM_LIMIT}{{{l}}} {n}");
        }
    }

    head(
        &mut out,
        TOOL_RESULTS_OVER_CEILING,
        "counter",
        "Results over a ceiling, counted once under the weakest layer of the stack that cuts them.",
    );
    let stack = &frame.stack;
    for (s, l) in frame.series.iter().zip(&labels) {
        let count = |id: &str| {
            s.over_ceiling
                .iter()
                .find(|(l, _)| l == id)
                .map_or(0, |(_, n)| *n)
        };
        for layer in stack.layers() {
            let _ = writeln!(
                out,
                "{TOOL_RESULTS_OVER_CEILING}{{{l},layer=\"{}\"}} {}",
                escape(layer.id()),
                count(layer.id())
            );
        }
        // Counts restored from a snapshot for layers no longer in the stack.
        for (id, n) in &s.over_ceiling {
            if !stack.layers().iter().any(|x| x.id() == id) {
                let _ = writeln!(
                    out,
                    "{TOOL_RESULTS_OVER_CEILING}{{{l},layer=\"{}\"}} {n}",
                    escape(id)
                );
            }
        }
    }
    head(
        &mut out,
        CEILING_BYTES,
        "gauge",
        "Effective limit of each layer of the stack, in bytes (estimated from tokens, characters or lines for layers counting in those units).",
    );
    for layer in stack.layers() {
        if let Some(b) = layer.limit_bytes {
            let _ = writeln!(
                out,
                "{CEILING_BYTES}{{layer=\"{}\"}} {}",
                escape(layer.id()),
                b.bytes
            );
        }
    }

    if histograms {
        render_histograms(&mut out, frame, &labels);
    }

    // Quantiles per window, computed by the daemon (exact to 1 %).
    let mut sections: [(String, &str, &str); 5] = [
        (String::new(), TOOL_RESULT_SIZE_P50, "Median result size over a sliding window, computed by the daemon from HDR histograms (1% precision)."),
        (String::new(), TOOL_RESULT_SIZE_P95, "95th percentile result size over a sliding window, computed by the daemon (1% precision)."),
        (String::new(), TOOL_RESULT_SIZE_P99, "99th percentile result size over a sliding window, computed by the daemon (1% precision)."),
        (String::new(), TOOL_CALL_DURATION_P95, "95th percentile call duration over a sliding window, computed by the daemon."),
        (String::new(), TOOL_RESULT_SIZE_MAX, "Largest result size over a sliding window (exact)."),
    ];
    for (s, l) in frame.series.iter().zip(&labels) {
        for (wl, q) in frame.windows.iter().zip(&s.windows) {
            let Some([p50, p95, p99, lat95, max]) = q else {
                continue;
            };
            for (i, v) in [p50, p95, p99].into_iter().enumerate() {
                let (buf, name, _) = &mut sections[i];
                let _ = writeln!(buf, "{name}{{{l},window=\"{wl}\"}} {v}");
            }
            let (buf, name, _) = &mut sections[3];
            let _ = writeln!(
                buf,
                "{name}{{{l},window=\"{wl}\"}} {}",
                f64_text(*lat95 as f64 / 1e6)
            );
            let (buf, name, _) = &mut sections[4];
            let _ = writeln!(buf, "{name}{{{l},window=\"{wl}\"}} {max}");
        }
    }
    for (buf, name, help) in &sections {
        head(&mut out, name, "gauge", help);
        out.push_str(buf);
    }

    // Self-metrics.
    let v = stats.view();
    head(
        &mut out,
        OTLP_REQUESTS,
        "counter",
        "OTLP export requests received.",
    );
    let _ = writeln!(
        out,
        "{OTLP_REQUESTS}{{transport=\"grpc\"}} {}",
        v.requests_grpc
    );
    let _ = writeln!(
        out,
        "{OTLP_REQUESTS}{{transport=\"http\"}} {}",
        v.requests_http
    );
    head(
        &mut out,
        OTLP_REQUESTS_REFUSED,
        "counter",
        "OTLP export requests refused as a whole, by reason.",
    );
    for (r, n) in RefusedRequest::ALL.iter().zip(v.refused_requests) {
        let _ = writeln!(
            out,
            "{OTLP_REQUESTS_REFUSED}{{reason=\"{}\"}} {n}",
            r.as_str()
        );
    }
    head(
        &mut out,
        SPANS_ACCEPTED,
        "counter",
        "Spans accepted: tool spans recorded, other spans ignored.",
    );
    let _ = writeln!(out, "{SPANS_ACCEPTED}{{kind=\"tool\"}} {}", v.spans_tool);
    let _ = writeln!(out, "{SPANS_ACCEPTED}{{kind=\"other\"}} {}", v.spans_other);
    head(
        &mut out,
        SPANS_REFUSED,
        "counter",
        "Spans refused, by reason.",
    );
    let _ = writeln!(
        out,
        "{SPANS_REFUSED}{{reason=\"invalid\"}} {}",
        v.spans_invalid
    );
    let _ = writeln!(
        out,
        "{SPANS_REFUSED}{{reason=\"overloaded\"}} {}",
        v.spans_overloaded
    );
    head(
        &mut out,
        SPANS_DROPPED,
        "counter",
        "Spans accepted and then lost.",
    );
    let _ = writeln!(out, "{SPANS_DROPPED} {}", v.spans_dropped);
    head(
        &mut out,
        SERIES,
        "gauge",
        "(service, tool) series held, overflow included.",
    );
    let _ = writeln!(out, "{SERIES} {}", frame.series.len());
    head(
        &mut out,
        SERIES_LIMIT,
        "gauge",
        "Cardinality cap on (service, tool) series.",
    );
    let _ = writeln!(out, "{SERIES_LIMIT} {}", frame.max_series);
    head(
        &mut out,
        SERIES_OVERFLOW,
        "counter",
        "Tool results recorded in the overflow series because the cap was reached.",
    );
    let _ = writeln!(out, "{SERIES_OVERFLOW} {}", frame.overflow_records);
    head(
        &mut out,
        VALUES_CLAMPED,
        "counter",
        "Values above a histogram's highest trackable value (1 GiB, one hour), recorded at it.",
    );
    for (h, n) in ["size", "latency"].iter().zip(frame.clamped) {
        let _ = writeln!(out, "{VALUES_CLAMPED}{{histogram=\"{h}\"}} {n}");
    }
    head(
        &mut out,
        SPAN_ATTRIBUTES_IGNORED,
        "counter",
        "Span attributes past the first 255 of their span, not looked at by recognition.",
    );
    let _ = writeln!(out, "{SPAN_ATTRIBUTES_IGNORED} {}", v.attributes_ignored);
    head(
        &mut out,
        ADMIN_REQUESTS_REFUSED,
        "counter",
        "Admin API requests refused for a missing or wrong token.",
    );
    let _ = writeln!(
        out,
        "{ADMIN_REQUESTS_REFUSED}{{reason=\"unauthenticated\"}} {}",
        v.admin_unauthenticated
    );
    {
        use super::listener::{Closed, Listener};
        let l = &stats.listeners;
        head(
            &mut out,
            CONNECTIONS,
            "gauge",
            "Connections open, by listener.",
        );
        for x in Listener::ALL {
            let _ = writeln!(
                out,
                "{CONNECTIONS}{{listener=\"{}\"}} {}",
                x.as_str(),
                l.open(x)
            );
        }
        head(
            &mut out,
            CONNECTIONS_LIMIT,
            "gauge",
            "Connection cap of each listener, after fitting under the open-file limit.",
        );
        for x in Listener::ALL {
            let _ = writeln!(
                out,
                "{CONNECTIONS_LIMIT}{{listener=\"{}\"}} {}",
                x.as_str(),
                l.limit(x)
            );
        }
        head(
            &mut out,
            CONNECTIONS_CLOSED,
            "counter",
            "Connections the daemon closed: over the cap (limit), request head or HTTP/2 preface late (header_timeout), silent too long (idle_timeout), TLS handshake failed or late (tls_handshake).",
        );
        for x in Listener::ALL {
            for r in Closed::ALL {
                let _ = writeln!(
                    out,
                    "{CONNECTIONS_CLOSED}{{listener=\"{}\",reason=\"{}\"}} {}",
                    x.as_str(),
                    r.as_str(),
                    l.closed(x, r)
                );
            }
        }
    }
    head(
        &mut out,
        LABEL_VALUES_SANITIZED,
        "counter",
        "Tool spans whose service or tool name was cut to its byte limit (too_long) or had control or format characters replaced (hidden_characters).",
    );
    let cuts = [v.label_cuts.service, v.label_cuts.tool];
    for (label, counts) in super::recognize::LabelCuts::LABELS.iter().zip(cuts) {
        for (reason, n) in super::recognize::LabelCuts::REASONS.iter().zip(counts) {
            let _ = writeln!(
                out,
                "{LABEL_VALUES_SANITIZED}{{label=\"{label}\",reason=\"{reason}\"}} {n}"
            );
        }
    }
    if v.snapshot_last_unix > 0 {
        head(
            &mut out,
            SNAPSHOT_AGE,
            "gauge",
            "Seconds since the last snapshot written to disk.",
        );
        let _ = writeln!(
            out,
            "{SNAPSHOT_AGE} {}",
            now.saturating_sub(v.snapshot_last_unix)
        );
    }
    head(
        &mut out,
        SNAPSHOTS_WRITTEN,
        "counter",
        "Snapshots written to disk.",
    );
    let _ = writeln!(out, "{SNAPSHOTS_WRITTEN} {}", v.snapshots_written);
    head(
        &mut out,
        SNAPSHOT_FAILURES,
        "counter",
        "Snapshot writes that failed.",
    );
    let _ = writeln!(out, "{SNAPSHOT_FAILURES} {}", v.snapshot_failures);
    head(
        &mut out,
        ALERT_NOTIFICATIONS,
        "counter",
        "Alert notifications, by sink and outcome.",
    );
    for sink in SinkKind::ALL {
        for (ok, outcome) in [(true, "success"), (false, "failure")] {
            let _ = writeln!(
                out,
                "{ALERT_NOTIFICATIONS}{{sink=\"{}\",outcome=\"{outcome}\"}} {}",
                sink.as_str(),
                stats.alerts.notifications(sink, ok)
            );
        }
    }
    head(
        &mut out,
        ALERT_EVENTS_DROPPED,
        "counter",
        "Alert rule matches dropped because the alert table was full.",
    );
    let _ = writeln!(
        out,
        "{ALERT_EVENTS_DROPPED} {}",
        stats.alerts.events_dropped()
    );
    head(
        &mut out,
        ALERT_MATCHES,
        "counter",
        "Alert rule matches, by rule and outcome: sent (a new alert or a resend), merged into an alert already firing, deferred while the alert queue was full, dropped past the retry queue.",
    );
    for (i, name) in REGISTRY.iter().enumerate() {
        for outcome in MatchOutcome::ALL {
            let _ = writeln!(
                out,
                "{ALERT_MATCHES}{{alertname=\"{name}\",outcome=\"{}\"}} {}",
                outcome.as_str(),
                stats.alerts.matches(i, outcome)
            );
        }
    }
    head(
        &mut out,
        ALERTS_FIRING,
        "gauge",
        "Alerts the daemon holds firing, by rule and severity.",
    );
    for ((name, severity), n) in stats.alerts.firing() {
        let _ = writeln!(
            out,
            "{ALERTS_FIRING}{{alertname=\"{}\",severity=\"{}\"}} {n}",
            escape(&name),
            escape(&severity)
        );
    }
    out
}

fn render_histograms(out: &mut String, frame: &Frame, labels: &[String]) {
    head(
        out,
        TOOL_RESULT_SIZE,
        "histogram",
        "UTF-8 bytes of tool results as handed to the model.",
    );
    for (s, l) in frame.series.iter().zip(labels) {
        let mut cum = 0;
        for (b, n) in frame.size_bounds.iter().zip(&s.size_buckets) {
            cum += n;
            let _ = writeln!(out, "{TOOL_RESULT_SIZE}_bucket{{{l},le=\"{b}\"}} {cum}");
        }
        cum += s.size_buckets.last().copied().unwrap_or(0);
        let _ = writeln!(out, "{TOOL_RESULT_SIZE}_bucket{{{l},le=\"+Inf\"}} {cum}");
        let _ = writeln!(out, "{TOOL_RESULT_SIZE}_sum{{{l}}} {}", s.size_sum);
        let _ = writeln!(out, "{TOOL_RESULT_SIZE}_count{{{l}}} {cum}");
    }
    head(out, TOOL_CALL_DURATION, "histogram", "Tool call duration.");
    for (s, l) in frame.series.iter().zip(labels) {
        let mut cum = 0;
        for (b, n) in LATENCY_BUCKETS_US.iter().zip(&s.latency_buckets) {
            cum += n;
            let le = *b as f64 / 1e6;
            let _ = writeln!(out, "{TOOL_CALL_DURATION}_bucket{{{l},le=\"{le}\"}} {cum}");
        }
        cum += s.latency_buckets.last().copied().unwrap_or(0);
        let _ = writeln!(out, "{TOOL_CALL_DURATION}_bucket{{{l},le=\"+Inf\"}} {cum}");
        let _ = writeln!(
            out,
            "{TOOL_CALL_DURATION}_sum{{{l}}} {}",
            f64_text(s.latency_sum_us as f64 / 1e6)
        );
        let _ = writeln!(out, "{TOOL_CALL_DURATION}_count{{{l}}} {cum}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
