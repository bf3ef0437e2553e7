//! The views the admin API serves (`/api/v1/tools`, `/api/v1/tools/{tool}`), computed from the
//! aggregator's [`State`] on the aggregator task when a reader asks (the answer is small: one
//! row per series, or the detail of one tool).

use serde::{Deserialize, Serialize};

use crate::collector::state::counts::for_each_counter;
use crate::collector::state::{
    whole_calls, Counts, Largest, LargestView, OverCeiling, Point, Series, SeriesKey, State, Stats,
};

/// One row of `/api/v1/tools`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ToolRow {
    /// Service.
    pub(crate) service: String,
    /// Tool.
    pub(crate) tool: String,
    /// Calls: the spans received, each weighted by its adjusted count (see `spans`).
    pub(crate) count: u64,
    /// Calls with a known size.
    pub(crate) sized: u64,
    /// Result bytes, median.
    pub(crate) p50: u64,
    /// Result bytes, 95th percentile.
    pub(crate) p95: u64,
    /// Result bytes, 99th percentile.
    pub(crate) p99: u64,
    /// Largest result bytes.
    pub(crate) max: u64,
    /// The counters shown in the row, each under its own name ([`ApiCounters`]): `errors`,
    /// `truncated`, `truncated_upstream` (weighted as the calls), `unknown_size`, the sources
    /// of sizes, `upstream_limit` (absent when none).
    #[serde(flatten)]
    pub(crate) counters: ApiCounters,
    /// Latency, 95th percentile, milliseconds.
    pub(crate) latency_p95_ms: f64,
    /// Tool spans received: `count` and the other call counters are these spans weighted by
    /// their adjusted counts (1 / sampling probability), so they exceed it when the tracer
    /// sampled; the sizes and quantiles are of these spans.
    #[serde(default)]
    pub(crate) spans: u64,
    /// Some calls were counted from sampled spans: `count`, `errors`, `truncated`,
    /// `truncated_upstream` and the over-ceiling counts are extrapolated.
    #[serde(default)]
    pub(crate) extrapolated: bool,
    /// The stack the series is held to: `daemon`, a configured service's, or a coding agent's
    /// (`claude-code`, `codex`, `gemini-cli`, `qwen-code`).
    #[serde(default)]
    pub(crate) stack: String,
    /// Its ceiling: the weakest layer of that stack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ceiling: Option<RowCeiling>,
    /// What its results cost the context since start (the context ledger); absent until one
    /// of its results entered a session's context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) context: Option<crate::collector::state::context::ToolContextRow>,
}

/// The counters of a series as the API row shows them: those of the list
/// ([`for_each_counter`]) marked `api`, each under its name, a `weighted` one weighted as the
/// calls, a `largest` one absent when never seen.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ApiCounters(pub(crate) Counts);

/// Writes [`ApiCounters`] from the list of counters: a getter per column, and the row's JSON.
macro_rules! api_counters {
    ($($(#[doc = $doc:literal])+ #[shown($value:ident, $api:ident, $($metric:tt)*)] $name:ident: $ty:ty,)+) => {
        impl ApiCounters {
            $(api_counters!(@get $api $value, $name: $ty);)+
        }

        impl Serialize for ApiCounters {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                let mut m = s.serialize_map(None)?;
                $(api_counters!(@column $api $value, m, self, $name);)+
                m.end()
            }
        }
    };
    (@get hidden $value:ident, $name:ident: $ty:ty) => {};
    (@get api weighted, $name:ident: $ty:ty) => {
        /// The column, weighted as the calls.
        pub(crate) fn $name(&self) -> $ty {
            whole_calls(self.0.weighted(self.0.$name))
        }
    };
    (@get api $value:ident, $name:ident: $ty:ty) => {
        /// The column, as counted.
        pub(crate) fn $name(&self) -> $ty {
            self.0.$name
        }
    };
    (@column hidden $value:ident, $m:ident, $c:ident, $name:ident) => {};
    (@column api largest, $m:ident, $c:ident, $name:ident) => {
        if let Some(v) = $c.$name() {
            $m.serialize_entry(stringify!($name), &v)?;
        }
    };
    (@column api $value:ident, $m:ident, $c:ident, $name:ident) => {
        $m.serialize_entry(stringify!($name), &$c.$name())?
    };
}

for_each_counter!(api_counters);

/// The ceiling a series is held to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RowCeiling {
    /// The weakest layer's id.
    pub(crate) layer: String,
    /// Its limit in bytes.
    pub(crate) bytes: u64,
    /// Whether the bytes are estimated from another unit.
    pub(crate) estimated: bool,
}

/// `/api/v1/tools`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ToolsView {
    /// The window: a configured label or `all`.
    pub(crate) window: String,
    /// The configured windows' labels, shortest first (`all` is always accepted too).
    pub(crate) windows: Vec<String>,
    /// Rows sorted by service then tool.
    pub(crate) tools: Vec<ToolRow>,
    /// Seconds since the state began (kept across restarts with a data directory): a window
    /// longer than this holds only this much time, so a rate is the count over the shorter of
    /// the two.
    #[serde(default)]
    pub(crate) uptime_secs: u64,
}

/// One series of `/api/v1/tools/{tool}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ToolDetail {
    /// The summary row.
    #[serde(flatten)]
    pub(crate) row: ToolRow,
    /// Largest recent results.
    pub(crate) largest: Vec<LargestView>,
    /// Most repeated argument hashes.
    pub(crate) top_args: Vec<TopArgs>,
    /// Results over a ceiling since start, by the weakest layer that cut them.
    pub(crate) over_ceiling: Vec<OverCeilingCount>,
    /// The most recent over-ceiling results (at most [`OVER_CEILING_RECENT`](crate::collector::state::OVER_CEILING_RECENT)), newest first.
    pub(crate) recent_over_ceiling: Vec<OverCeiling>,
    /// Results of known size in the window per classic size bucket (the bounds of
    /// `toolsize_tool_result_size_bytes`, counted from the window's histogram), empty buckets
    /// included; the last bucket has no upper bound.
    pub(crate) size_distribution: Vec<Bucket>,
}

/// One bucket of a size distribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Bucket {
    /// Upper bound, bytes (inclusive); `None` for the last, unbounded bucket.
    pub(crate) le: Option<u64>,
    /// Results in the bucket.
    pub(crate) count: u64,
}

/// Over-ceiling results of one layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct OverCeilingCount {
    /// The layer id.
    pub(crate) layer: String,
    /// Results whose weakest cutting layer it was.
    pub(crate) count: u64,
}

/// A repeated arguments hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TopArgs {
    /// The hash.
    pub(crate) args_hash: String,
    /// Calls (upper bound).
    pub(crate) count: u64,
    /// Largest result with it.
    pub(crate) max_bytes: u64,
}

/// `/api/v1/tools/{tool}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ToolView {
    /// The window.
    pub(crate) window: String,
    /// The tool.
    pub(crate) tool: String,
    /// One entry per service that called it.
    pub(crate) series: Vec<ToolDetail>,
}

fn row(key: &SeriesKey, st: &Stats, series: &Series, state: &State) -> ToolRow {
    let limits = &state.limits;
    let ceiling = limits.stacks.ceiling(&series.profile).map(|c| RowCeiling {
        layer: c.layer_id.to_string(),
        bytes: c.bytes,
        estimated: c.estimated,
    });
    ToolRow {
        stack: series.profile.name.to_string(),
        ceiling,
        service: key.service.clone(),
        tool: key.tool.clone(),
        count: whole_calls(st.counts.calls_milli),
        sized: st.size.len(),
        p50: st.size.quantile(0.5),
        p95: st.size.quantile(0.95),
        p99: st.size.quantile(0.99),
        max: st.size.max(),
        counters: ApiCounters(st.counts),
        latency_p95_ms: st.latency.quantile(0.95) as f64 / 1000.0,
        spans: st.counts.calls,
        extrapolated: st.counts.extrapolated(),
        context: state.context.tool(&key.service, &key.tool).map(|c| c.row()),
    }
}

impl State {
    /// The `/api/v1/tools` view.
    pub(crate) fn tools_view(
        &self,
        window: Option<&str>,
        service: Option<&str>,
        now: u64,
    ) -> Result<ToolsView, String> {
        let w = self.window_index(window)?;
        let mut keys: Vec<&SeriesKey> = self
            .series
            .keys()
            .filter(|k| service.is_none_or(|s| s == k.service))
            .collect();
        keys.sort();
        let tools = keys
            .into_iter()
            .map(|k| {
                let s = &self.series[k];
                row(k, &self.stats(s, w, now), s, self)
            })
            .collect();
        let mut windows = self.limits.windows.clone();
        windows.sort_by_key(|(_, d)| *d);
        Ok(ToolsView {
            window: window.unwrap_or("all").to_string(),
            windows: windows.into_iter().map(|(label, _)| label).collect(),
            tools,
            uptime_secs: now.saturating_sub(self.started_unix),
        })
    }

    /// The `/api/v1/tools/{tool}` view; `Ok(None)` when no series has that tool.
    pub(crate) fn tool_view(
        &self,
        tool: &str,
        window: Option<&str>,
        service: Option<&str>,
        now: u64,
    ) -> Result<Option<ToolView>, String> {
        let w = self.window_index(window)?;
        let keys = self.keys_of(tool, service);
        if keys.is_empty() {
            return Ok(None);
        }
        let horizon = self
            .limits
            .windows
            .iter()
            .map(|(_, d)| d.as_secs())
            .max()
            .unwrap_or(3600);
        let series = keys
            .into_iter()
            .map(|k| {
                let s = &self.series[k];
                let mut top: Vec<TopArgs> = s
                    .args
                    .iter()
                    .map(|(h, a)| TopArgs {
                        args_hash: h.to_string(),
                        count: a.count,
                        max_bytes: a.max_bytes,
                    })
                    .collect();
                top.sort_by(|a, b| b.count.cmp(&a.count).then(a.args_hash.cmp(&b.args_hash)));
                top.truncate(10);
                let stats = self.stats(s, w, now);
                let bounds = &self.limits.size_bounds;
                let size_distribution = stats
                    .size
                    .bucket_counts(bounds)
                    .into_iter()
                    .enumerate()
                    .map(|(i, count)| Bucket {
                        le: bounds.get(i).copied(),
                        count,
                    })
                    .collect();
                ToolDetail {
                    row: row(k, &stats, s, self),
                    size_distribution,
                    largest: s
                        .largest
                        .iter()
                        .filter(|l| l.result.at_unix + horizon > now)
                        .map(Largest::view)
                        .collect(),
                    top_args: top,
                    over_ceiling: s
                        .over_ceiling
                        .iter()
                        .map(|(layer, milli)| OverCeilingCount {
                            layer: layer.clone(),
                            count: whole_calls(*milli),
                        })
                        .collect(),
                    recent_over_ceiling: s
                        .over_recent
                        .iter()
                        .rev()
                        .filter_map(|o| o.view(&self.limits.stacks.all))
                        .collect(),
                }
            })
            .collect();
        Ok(Some(ToolView {
            window: window.unwrap_or("all").to_string(),
            tool: tool.to_string(),
            series,
        }))
    }
}

/// The history of one series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SeriesHistory {
    /// Service.
    pub(crate) service: String,
    /// Points, oldest first; the last one is the slot still open.
    pub(crate) points: Vec<Point>,
}

/// `/api/v1/tools/{tool}/history`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct HistoryView {
    /// Tool name.
    pub(crate) tool: String,
    /// Seconds between points: the slot length of the shortest window.
    pub(crate) resolution_secs: u64,
    /// How far back points go: the longest window.
    pub(crate) retention_secs: u64,
    /// One entry per matching series, sorted by service.
    pub(crate) series: Vec<SeriesHistory>,
}

impl State {
    /// The series of `tool` (of `service` only, when given), sorted.
    fn keys_of(&self, tool: &str, service: Option<&str>) -> Vec<&SeriesKey> {
        let mut keys: Vec<&SeriesKey> = self
            .series
            .keys()
            .filter(|k| k.tool == tool && service.is_none_or(|s| s == k.service))
            .collect();
        keys.sort();
        keys
    }

    /// The `/api/v1/tools/{tool}/history` view (`None` when the tool has no series).
    pub(crate) fn history_view(
        &self,
        tool: &str,
        service: Option<&str>,
        now: u64,
    ) -> Option<HistoryView> {
        let keys = self.keys_of(tool, service);
        if keys.is_empty() {
            return None;
        }
        let (_, resolution_secs, retention_secs) = self.limits.history();
        Some(HistoryView {
            tool: tool.to_string(),
            resolution_secs,
            retention_secs,
            series: keys
                .into_iter()
                .map(|k| SeriesHistory {
                    service: k.service.clone(),
                    points: self.series[k].history(&self.limits, now),
                })
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::collector::state::tests::{known, limits, rec};
    use crate::collector::state::State;

    #[test]
    fn history_has_one_point_per_minute_over_the_hour_and_survives_a_restore() {
        let mut st = State::new(limits(10));
        let t0 = 1_800_000_000; // a whole hour
                                // 90 minutes: 2 results a minute, the p95 jumping from 3 KB to 41 KB at minute 80.
        for m in 0..90u64 {
            let b = if m < 80 { 3_000 } else { 41_000 };
            st.record(&rec("search", known(b)), t0 + m * 60 + 1);
            st.record(&rec("search", known(b + 10)), t0 + m * 60 + 30);
        }
        let now = t0 + 89 * 60 + 31;
        let h = st.history_view("search", None, now).unwrap();
        assert_eq!((h.resolution_secs, h.retention_secs), (60, 3600));
        let p = &h.series[0].points;
        assert_eq!(
            p.len(),
            60,
            "the last hour: 59 closed slots and the open one"
        );
        assert!(p.windows(2).all(|w| w[1].at_unix == w[0].at_unix + 60));
        assert_eq!(p.last().unwrap().at_unix, t0 + 89 * 60);
        assert!(p.iter().all(|x| x.count == 2 && x.sized == 2));
        let jump = p.iter().position(|x| x.p95 > 40_000).unwrap();
        assert_eq!(p[jump].at_unix, t0 + 80 * 60);
        assert!(p[jump - 1].p95 < 3_100, "{:?}", p[jump - 1]);
        assert_eq!(p.last().unwrap().over_ceiling, 2);
        assert!(st.history_view("nope", None, now).is_none());
        assert!(st.history_view("search", Some("other"), now).is_none());

        let json = serde_json::to_vec(&st.snapshot(now, Vec::new())).unwrap();
        let mut back = State::new(limits(10));
        back.restore(serde_json::from_slice(&json).unwrap());
        assert_eq!(back.history_view("search", None, now), Some(h));
    }
}
