//! `/metrics`: Prometheus text exposition (format 0.0.4) of per-tool state and self-metrics.
//!
//! Hand-written rather than through `prometheus-client`: the aggregator already owns every number
//! (HDR histograms, exact bucket counts, counters), so a registry would only duplicate state or
//! need a custom collector, and the text format is small. Its correctness is checked by the real
//! `promtool check metrics` in the tests. Rendering runs on the aggregator task; with the default
//! 2,000-series cap it takes a few milliseconds.
//!
//! Names follow `toolsize_<name>_<unit>[_total]` in base units (the Prometheus naming conventions). Per-tool series carry
//! `service` and `tool` labels, bounded by the cardinality cap (overflow series
//! `tool="__overflow__"`). Classic histograms are cumulative since start (mergeable across
//! daemons with `histogram_quantile`); the daemon-computed quantile gauges are exact to 1 % per
//! window.

use std::fmt::Write;

use super::aggregator::{SeriesKey, State, LATENCY_BUCKETS_US};
use super::alerts::sink::SinkKind;
use super::{RefusedRequest, SelfStats};

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

/// Renders the whole exposition.
pub fn render(state: &State, stats: &SelfStats, now: u64) -> String {
    render_parts(state, stats, now, true)
}

/// Renders the exposition, without the two histogram families when `histograms` is false (the
/// protobuf exposition encodes those itself, see [`super::exposition_proto`]).
pub(crate) fn render_parts(state: &State, stats: &SelfStats, now: u64, histograms: bool) -> String {
    let mut out = String::with_capacity(4096 + state.series.len() * 4096);
    let mut keys: Vec<&SeriesKey> = state.series.keys().collect();
    keys.sort();
    let labels: Vec<String> = keys
        .iter()
        .map(|k| {
            format!(
                "service=\"{}\",tool=\"{}\"",
                escape(&k.service),
                escape(&k.tool)
            )
        })
        .collect();

    type Get = fn(&super::aggregator::Stats) -> u64;
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
        for (k, l) in keys.iter().zip(&labels) {
            let _ = writeln!(out, "{name}{{{l}}} {}", get(&state.series[*k].total));
        }
    }
    head(
        &mut out,
        TOOL_RESULTS_SIZED,
        "counter",
        "Results of known size, by source: measured by the tool or derived from content.",
    );
    for (k, l) in keys.iter().zip(&labels) {
        let t = &state.series[*k].total;
        let _ = writeln!(
            out,
            "{TOOL_RESULTS_SIZED}{{{l},source=\"measured\"}} {}",
            t.measured
        );
        let _ = writeln!(
            out,
            "{TOOL_RESULTS_SIZED}{{{l},source=\"derived\"}} {}",
            t.derived
        );
    }

    head(
        &mut out,
        TOOL_RESULTS_OVER_CEILING,
        "counter",
        "Results over a ceiling, counted once under the weakest layer of the stack that cuts them.",
    );
    let stack = &state.limits.stack;
    for (k, l) in keys.iter().zip(&labels) {
        let s = &state.series[*k];
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
        render_histograms(&mut out, state, &keys, &labels);
    }

    // Quantiles per window, computed by the daemon (exact to 1 %).
    let windows: Vec<(Option<usize>, &str)> = state
        .limits
        .windows
        .iter()
        .enumerate()
        .map(|(i, (w, _))| (Some(i), w.as_str()))
        .chain([(None, "all")])
        .collect();
    let mut sections: [(String, &str, &str); 5] = [
        (String::new(), TOOL_RESULT_SIZE_P50, "Median result size over a sliding window, computed by the daemon from HDR histograms (1% precision)."),
        (String::new(), TOOL_RESULT_SIZE_P95, "95th percentile result size over a sliding window, computed by the daemon (1% precision)."),
        (String::new(), TOOL_RESULT_SIZE_P99, "99th percentile result size over a sliding window, computed by the daemon (1% precision)."),
        (String::new(), TOOL_CALL_DURATION_P95, "95th percentile call duration over a sliding window, computed by the daemon."),
        (String::new(), TOOL_RESULT_SIZE_MAX, "Largest result size over a sliding window (exact)."),
    ];
    for (k, l) in keys.iter().zip(&labels) {
        let s = &state.series[*k];
        for (wi, wl) in &windows {
            let st = state.stats(s, *wi, now);
            if st.calls == 0 {
                continue;
            }
            for (i, q) in [0.5, 0.95, 0.99].into_iter().enumerate() {
                let (buf, name, _) = &mut sections[i];
                let _ = writeln!(buf, "{name}{{{l},window=\"{wl}\"}} {}", st.size.quantile(q));
            }
            let (buf, name, _) = &mut sections[3];
            let _ = writeln!(
                buf,
                "{name}{{{l},window=\"{wl}\"}} {}",
                f64_text(st.latency.quantile(0.95) as f64 / 1e6)
            );
            let (buf, name, _) = &mut sections[4];
            let _ = writeln!(buf, "{name}{{{l},window=\"{wl}\"}} {}", st.size.max());
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
    let _ = writeln!(out, "{SERIES} {}", state.series_count());
    head(
        &mut out,
        SERIES_LIMIT,
        "gauge",
        "Cardinality cap on (service, tool) series.",
    );
    let _ = writeln!(out, "{SERIES_LIMIT} {}", state.limits.max_series);
    head(
        &mut out,
        SERIES_OVERFLOW,
        "counter",
        "Tool results recorded in the overflow series because the cap was reached.",
    );
    let _ = writeln!(out, "{SERIES_OVERFLOW} {}", state.overflow_records);
    head(
        &mut out,
        VALUES_CLAMPED,
        "counter",
        "Values above a histogram's highest trackable value (1 GiB, one hour), recorded at it.",
    );
    for (h, n) in ["size", "latency"].iter().zip(state.clamped) {
        let _ = writeln!(out, "{VALUES_CLAMPED}{{histogram=\"{h}\"}} {n}");
    }
    head(
        &mut out,
        SPAN_ATTRIBUTES_IGNORED,
        "counter",
        "Span attributes past the first 255 of their span, not looked at by recognition.",
    );
    let _ = writeln!(out, "{SPAN_ATTRIBUTES_IGNORED} {}", v.attributes_ignored);
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
        "Alert rule matches dropped: alert queue full or too many alerts held.",
    );
    let _ = writeln!(
        out,
        "{ALERT_EVENTS_DROPPED} {}",
        stats.alerts.events_dropped()
    );
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

fn render_histograms(out: &mut String, state: &State, keys: &[&SeriesKey], labels: &[String]) {
    head(
        out,
        TOOL_RESULT_SIZE,
        "histogram",
        "UTF-8 bytes of tool results as handed to the model.",
    );
    for (k, l) in keys.iter().zip(labels) {
        let s = &state.series[*k];
        let mut cum = 0;
        for (b, n) in state.limits.size_bounds.iter().zip(&s.size_buckets) {
            cum += n;
            let _ = writeln!(out, "{TOOL_RESULT_SIZE}_bucket{{{l},le=\"{b}\"}} {cum}");
        }
        cum += s.size_buckets.last().copied().unwrap_or(0);
        let _ = writeln!(out, "{TOOL_RESULT_SIZE}_bucket{{{l},le=\"+Inf\"}} {cum}");
        let _ = writeln!(out, "{TOOL_RESULT_SIZE}_sum{{{l}}} {}", s.size_sum);
        let _ = writeln!(out, "{TOOL_RESULT_SIZE}_count{{{l}}} {cum}");
    }
    head(out, TOOL_CALL_DURATION, "histogram", "Tool call duration.");
    for (k, l) in keys.iter().zip(labels) {
        let s = &state.series[*k];
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
