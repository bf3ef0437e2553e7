//! The families of `/metrics`, each described once (name, kind, help, samples) next to the
//! others of the same owner of numbers: here the per-series counters, ceilings, histograms,
//! window quantiles and context ledger; the daemon's own families (the receivers, the series
//! cap, the joiner, forwarding, recognition, the admin API, the listeners, the store and the
//! alerts) in [`super::self_families`]. [`write_families`] calls them in exposition order;
//! every format writes from it through a [`Sink`], so the text, OpenMetrics and protobuf
//! expositions cannot drift. A new per-series family is one function here, a new self-metric
//! one family in its owner's function of [`super::self_families`], each with one name in
//! [`super::names`].

use crate::collector::alerts::AlertStats;
use crate::collector::state::counts::for_each_counter;
use crate::collector::state::{calls_of, LATENCY_BUCKETS_US};
use crate::collector::stats::SelfStats;

use super::exposition::{
    Bounds, Frame, FrameSeries, HistogramSample, Kind, Sink, Value, WindowQuantiles,
};
use super::names::*;
use super::self_families::{
    admin, alert_stats, attributes_ignored, by, forward, joiner, label_cuts, listeners, requests,
    series_cap, single, snapshots,
};

/// A weighted count (thousandths of a call) as a sample: an integer when it is one.
fn calls(milli: u64) -> Value {
    match milli % 1000 {
        0 => Value::Int(milli / 1000),
        _ => Value::Float(calls_of(milli)),
    }
}

/// Writes every family of the exposition of `frame` to `sink`: each owner of numbers writes
/// its own, in exposition order (the order is the format: tests and scrapers see it).
pub(crate) fn write_families(
    frame: &Frame,
    stats: &SelfStats,
    alerts: &AlertStats,
    sink: &mut impl Sink,
) {
    tool_counters(frame, sink);
    ceilings(frame, sink);
    histograms(frame, sink);
    window_quantiles(frame, sink);
    context(frame, sink);
    let v = stats.view();
    requests(&v, sink);
    series_cap(frame, sink);
    joiner(frame.joins, sink);
    forward(&frame.forward, sink);
    attributes_ignored(&v, sink);
    admin(&v, sink);
    listeners(&stats.listeners, sink);
    label_cuts(v.label_cuts, sink);
    snapshots(&v, sink);
    alert_stats(alerts, sink);
}

/// The series of a frame with their index (what [`Sink::sample`] takes).
fn all(frame: &Frame) -> impl Iterator<Item = (usize, &FrameSeries)> {
    frame.series.iter().enumerate()
}

/// The per-series counters ([`Counts`](crate::collector::state::Counts)), from the one list of counters
/// ([`for_each_counter`]): each `family` in list order (calls, errors, cuts, spans), then the
/// `sized` ones as the sources of one family, then each `gauge` (the upstream limit).
macro_rules! tool_counter_families {
    ($($(#[doc = $doc:literal])+ #[shown($value:ident, $api:ident, $($metric:tt)*)] $name:ident: $ty:ty,)+) => {
        fn tool_counters(frame: &Frame, sink: &mut impl Sink) {
            $(tool_counter_families!(@family frame, sink, $value, $name, $($metric)*);)+
            sink.family(
                TOOL_RESULTS_SIZED,
                Kind::Counter,
                "Results of known size, by source: measured by the tool, derived from content as recorded, unwrapped from the tracer's envelope, reported by a coding agent, or a lower bound (cut upstream).",
            );
            for (i, s) in all(frame) {
                let t = &s.total;
                $(tool_counter_families!(@sized sink, i, t, $name, $($metric)*);)+
            }
            $(tool_counter_families!(@gauge frame, sink, $name, $($metric)*);)+
        }
    };
    (@family $frame:ident, $sink:ident, $value:ident, $name:ident, family($family:ident, $help:literal)) => {
        $sink.family($family, Kind::Counter, $help);
        for (i, s) in all($frame) {
            let c = &s.total;
            $sink.sample(Some(i), &[], tool_counter_families!(@value $value, c, $name));
        }
    };
    (@family $($other:tt)*) => {};
    (@sized $sink:ident, $i:ident, $t:ident, $name:ident, sized) => {
        $sink.sample(Some($i), &[("source", stringify!($name))], Value::Int($t.$name));
    };
    (@sized $($other:tt)*) => {};
    (@gauge $frame:ident, $sink:ident, $name:ident, gauge($family:ident, $help:literal)) => {
        $sink.family($family, Kind::Gauge, $help);
        for (i, s) in all($frame) {
            if let Some(n) = s.total.$name {
                $sink.sample(Some(i), &[], Value::Int(n));
            }
        }
    };
    (@gauge $($other:tt)*) => {};
    (@value milli, $c:ident, $name:ident) => { calls($c.$name) };
    (@value weighted, $c:ident, $name:ident) => { calls($c.weighted($c.$name)) };
    (@value raw, $c:ident, $name:ident) => { Value::Int($c.$name) };
}

for_each_counter!(tool_counter_families);

/// The ceilings: results over one per series, the ceiling each series is held to, each layer's
/// limit.
fn ceilings(frame: &Frame, sink: &mut impl Sink) {
    let all = || all(frame);
    sink.family(
        TOOL_RESULTS_OVER_CEILING,
        Kind::Counter,
        "Results over a ceiling, counted once under the weakest layer of the stack that cuts them (weighted as the calls), with what that layer does over its limit (action: truncate_marked, warn, ...).",
    );
    let stack = &frame.stack;
    // A layer's action: from the stack, else the catalog (a count restored for a layer that
    // left the stack), else unknown.
    let action_of = |id: &str| {
        stack
            .layers()
            .iter()
            .find(|l| l.id() == id)
            .map(|l| l.layer.action)
            .or_else(|| crate::layers::find(id).map(|l| l.action))
            .unwrap_or(crate::layers::Action::Unknown)
            .as_str()
    };
    for (i, s) in all() {
        let count = |id: &str| {
            s.over_ceiling
                .iter()
                .find(|(l, _)| l == id)
                .map_or(0, |(_, n)| *n)
        };
        let mine = || s.held_to.layers.iter().map(|&l| &stack.layers()[l]);
        for l in mine() {
            let (id, action) = (l.id(), l.layer.action.as_str());
            sink.sample(
                Some(i),
                &[("layer", id), ("action", action)],
                calls(count(id)),
            );
        }
        // Counts restored from a snapshot for layers no longer in the series' stack.
        for (id, n) in &s.over_ceiling {
            if !mine().any(|x| x.id() == id) {
                sink.sample(
                    Some(i),
                    &[("layer", id), ("action", action_of(id))],
                    calls(*n),
                );
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
}

/// Quantiles per window, computed by the daemon (exact to 1 %).
fn window_quantiles(frame: &Frame, sink: &mut impl Sink) {
    let all = || all(frame);
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
}

/// The context ledger ([`crate::collector::state::context`]): per series its result tokens,
/// cumulative context cost and share histogram, then the ledger's own bounds.
fn context(frame: &Frame, sink: &mut impl Sink) {
    use crate::collector::state::context::SHARE_BOUNDS;
    let with = || {
        frame
            .series
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.context.as_ref().map(|c| (i, c)))
    };
    sink.family(
        TOOL_RESULT_TOKENS,
        Kind::Counter,
        "Tokens of the tool's results that entered a session's context (estimated as ceil(size / 4) where the emitter does not report them).",
    );
    for (i, c) in with() {
        sink.sample(Some(i), &[], Value::Int(c.result_tokens));
    }
    sink.family(
        TOOL_CONTEXT_TOKENS,
        Kind::Counter,
        "Cumulative context cost: the sum over model requests of the tool's result tokens each request carried, until a compaction or the session's end.",
    );
    for (i, c) in with() {
        sink.sample(Some(i), &[], Value::Int(c.cost));
    }
    let bounds = Bounds::new(SHARE_BOUNDS.to_vec(), |b| b.to_string());
    sink.family(
        TOOL_CONTEXT_SHARE,
        Kind::Histogram,
        "Share of a model request's input tokens taken by the tool's carried results, one observation per request that carried any.",
    );
    for (i, c) in with() {
        sink.histogram(
            i,
            HistogramSample {
                bounds: &bounds,
                counts: &c.share_buckets,
                sum: Value::Float(c.share_sum),
                native: None,
                exemplars: &[],
            },
        );
    }
    let (stats, followed, cap) = frame.context;
    #[rustfmt::skip]
    let singles = [
        (CONTEXT_SESSIONS, Kind::Gauge, "Sessions the context ledger follows (sessions are never labels; see /api/v1/sessions).", followed as u64),
        (CONTEXT_SESSIONS_LIMIT, Kind::Gauge, "The most sessions the context ledger follows (context.max_sessions).", cap as u64),
        (CONTEXT_SESSIONS_OVERFLOW, Kind::Counter, "Context events of sessions past context.max_sessions, not followed.", stats.sessions_overflow),
        (CONTEXT_SESSIONS_EXPIRED, Kind::Counter, "Sessions ended after context.session_idle without events.", stats.sessions_expired),
        (CONTEXT_RESULTS_LATE, Kind::Counter, "Tool results that arrived after a model request they preceded, not carried by it.", stats.results_late),
    ];
    for (name, kind, help, n) in singles {
        single(sink, name, kind, help, n);
    }
    by(
        sink,
        (
            CONTEXT_RESULTS_DROPPED,
            Kind::Counter,
            "Tool results the context ledger did not carry: past a session's context.max_results_per_session (session_full) or of tools past aggregation.max_series (tools_full).",
        ),
        "reason",
        [
            ("session_full", stats.results_dropped),
            ("tools_full", stats.tools_overflow),
        ],
    );
}

/// The per-series histograms of result sizes and call durations, since start.
fn histograms(frame: &Frame, sink: &mut impl Sink) {
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
    use crate::collector::read::exposition::render;
    use crate::collector::state::histogram::{MAX_BYTES, MAX_LATENCY_US};
    use crate::collector::state::tests::{known, limits, rec};
    use crate::collector::state::State;
    use crate::collector::stats::{Cuts, LabelCuts};

    /// The list of counters as the test reads it: (name, in the API row, where `/metrics`
    /// writes it: a family's name, `sized`, or none).
    macro_rules! shown {
        ($($(#[doc = $doc:literal])+ #[shown($value:ident, $api:ident, $($metric:tt)*)] $name:ident: $ty:ty,)+) => {
            &[$((stringify!($name), shown!(@api $api), shown!(@metric $($metric)*))),+]
        };
        (@api api) => { true };
        (@api hidden) => { false };
        (@metric family($family:ident, $help:literal)) => { Some($family) };
        (@metric gauge($family:ident, $help:literal)) => { Some($family) };
        (@metric sized) => { Some("sized") };
        (@metric none) => { None };
    }

    /// Every counter of the list is in the API row (under its name, or `calls` as `spans` and
    /// `calls_milli` as `count`) and in `/metrics` (its family, or a source of the sized
    /// results), but the two the list keeps out: the approximate unwrapped count (API only)
    /// and the over-ceiling count (per layer, in its own family and the history points).
    #[test]
    fn every_counter_is_in_the_api_row_and_in_metrics() {
        const LIST: &[(&str, bool, Option<&str>)] = for_each_counter!(shown);
        let mut state = State::new(limits(10));
        state.record_batch(&[rec("t", known(100))], 1_700_000_000);
        // Each counter its own value; as many thousandths as calls, so nothing is weighted up.
        let mut v = serde_json::to_value(crate::collector::state::Counts::default()).unwrap();
        let value = |i: usize| 7 + i as u64;
        for (i, (name, _, _)) in LIST.iter().enumerate() {
            v[*name] = value(i).into();
        }
        let calls = LIST.iter().position(|(n, _, _)| *n == "calls").unwrap();
        v["calls_milli"] = (1000 * value(calls)).into();
        let counts = serde_json::from_value(v).unwrap();
        state.series.values_mut().next().unwrap().total.counts = counts;
        let now = 1_700_000_001;
        let view = state.tools_view(None, None, now).unwrap();
        let row = serde_json::to_value(&view.tools[0]).unwrap();
        let text = render(&state, &SelfStats::default(), &AlertStats::default(), now);
        let sample = |family: &str, label: &str, n: u64| {
            text.lines().any(|l| {
                l.starts_with(&format!("{family}{{"))
                    && l.contains("tool=\"t\"")
                    && l.contains(label)
                    && l.ends_with(&format!(" {n}"))
            })
        };
        for (i, (name, api, metric)) in LIST.iter().enumerate() {
            let n = value(i);
            match (*name, api) {
                (_, true) => assert_eq!(row[*name], n, "{name} in the API row"),
                ("calls", false) => assert_eq!(row["spans"], n, "calls as spans"),
                ("calls_milli", false) => assert_eq!(row["count"], value(calls), "as count"),
                ("over_ceiling", false) => {}
                _ => panic!("{name} is in neither the API row nor a place of its own"),
            }
            match (*name, metric) {
                (_, Some("sized")) => assert!(
                    sample(TOOL_RESULTS_SIZED, &format!("source=\"{name}\""), n),
                    "{name} as a source of {TOOL_RESULTS_SIZED}\n{text}"
                ),
                ("calls_milli", Some(family)) => {
                    assert!(sample(family, "", value(calls)), "{family}\n{text}")
                }
                (_, Some(family)) => assert!(sample(family, "", n), "{name}: {family}\n{text}"),
                ("unwrapped_approximate" | "over_ceiling", None) => {}
                (_, None) => panic!("{name} is not in /metrics"),
            }
        }
    }

    /// Counters kept by name are written under their own label values: distinct counts, so
    /// that a swap shows.
    #[test]
    fn named_counters_keep_their_labels() {
        let mut state = State::new(limits(10));
        let mut r = rec("t", known(MAX_BYTES + 1));
        state.record(&r, 1_700_000_000);
        r.latency_us = MAX_LATENCY_US + 1;
        state.record(&r, 1_700_000_000);
        state.record(&r, 1_700_000_000);
        let stats = SelfStats::default();
        stats.label_cuts(&LabelCuts {
            service: Cuts {
                too_long: 5,
                hidden_characters: 6,
            },
            tool: Cuts {
                too_long: 7,
                hidden_characters: 8,
            },
        });
        let text = render(&state, &stats, &AlertStats::default(), 1_700_000_001);
        for line in [
            "toolsize_values_clamped_total{histogram=\"size\"} 3",
            "toolsize_values_clamped_total{histogram=\"latency\"} 2",
            "toolsize_label_values_sanitized_total{label=\"service\",reason=\"too_long\"} 5",
            "toolsize_label_values_sanitized_total{label=\"service\",reason=\"hidden_characters\"} 6",
            "toolsize_label_values_sanitized_total{label=\"tool\",reason=\"too_long\"} 7",
            "toolsize_label_values_sanitized_total{label=\"tool\",reason=\"hidden_characters\"} 8",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
    }
}
