//! The built-in rules, run on the aggregator for every record: `ToolResultOverCeiling` (a result
//! over the ceiling of a layer of the stack) and `ToolArgsRepeatedlyOversize` (the same arguments
//! hash over the ceiling `count` times within `window`); and, every `alerts.evaluation_interval`
//! on the aggregated windows, `ToolResultSizeP95Jump`, `ToolResultSizeNearCeiling` and
//! `ToolResultTruncationRate` (see [`Rules::evaluate_windows`]).
//!
//! Cost on the hot path: one stack verdict per result of known size, and for results over the
//! ceiling a label map and a `try_send`. A full queue drops the match and counts it. The
//! repeated-arguments counts are bounded by [`MAX_TRACKED_ARGS`] (hashes, least recently seen
//! forgotten first).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::{
    duration_or, AlertStats, Event, Matched, NEAR_CEILING, OVER_CEILING, P95_JUMP,
    REPEATED_OVERSIZE, TRUNCATION_RATE,
};
use crate::collector::aggregator::{FxBuild, Limits, ResultObserver, Series, SeriesKey};
use crate::collector::config::Config;
use crate::collector::recognize::{Size, SizeSource, ToolRecord};
use crate::layers::Stack;

/// The hint every over-ceiling alert carries.
pub const HINT: &str =
    "paginate with a cursor, narrow the filter, or return a summary and a handle";
/// The hint of `ToolResultSizeP95Jump`.
pub const P95_JUMP_HINT: &str = "a deploy or a changed query made results larger; compare the \
     largest recent results with the arguments hashes of before";
/// The hint of `ToolResultSizeNearCeiling`.
pub const NEAR_CEILING_HINT: &str =
    "results are about to be cut: paginate, narrow the filter, or return a summary and a handle";
/// The hint of `ToolResultTruncationRate`.
pub const TRUNCATION_RATE_HINT: &str =
    "the model often sees partial results: make the tool return less, or raise the layer's limit";
/// Most (service, tool, arguments hash) triples counted by `ToolArgsRepeatedlyOversize`.
pub const MAX_TRACKED_ARGS: usize = 10_000;

#[derive(Debug, Clone)]
struct OverCeilingRule {
    severity: String,
    quiet_period: Duration,
}

#[derive(Debug, Clone)]
struct RepeatedRule {
    severity: String,
    count: u32,
    window: Duration,
}

#[derive(Debug, Clone)]
struct P95JumpRule {
    severity: String,
    factor: f64,
    min_recent: u64,
    min_baseline: u64,
}

#[derive(Debug, Clone)]
struct NearCeilingRule {
    severity: String,
    ratio: f64,
    min_count: u64,
}

#[derive(Debug, Clone)]
struct TruncationRateRule {
    severity: String,
    threshold: f64,
    min_count: u64,
}

/// The rules, as one [`ResultObserver`].
#[derive(Debug)]
pub struct Rules {
    stack: Arc<Stack>,
    over_ceiling: Option<OverCeilingRule>,
    repeated: Option<RepeatedRule>,
    p95_jump: Option<P95JumpRule>,
    near_ceiling: Option<NearCeilingRule>,
    truncation_rate: Option<TruncationRateRule>,
    /// Window rules resolve after this long without a match (3 × the evaluation interval).
    window_quiet_period: Duration,
    seen: HashMap<(SeriesKey, String), VecDeque<u64>>,
    tx: Option<mpsc::Sender<Event>>,
    stats: Arc<AlertStats>,
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

impl Rules {
    /// The alert name and severity of every enabled rule.
    pub fn enabled(&self) -> Vec<(&'static str, String)> {
        [
            (
                OVER_CEILING,
                self.over_ceiling.as_ref().map(|r| &r.severity),
            ),
            (
                REPEATED_OVERSIZE,
                self.repeated.as_ref().map(|r| &r.severity),
            ),
            (P95_JUMP, self.p95_jump.as_ref().map(|r| &r.severity)),
            (
                NEAR_CEILING,
                self.near_ceiling.as_ref().map(|r| &r.severity),
            ),
            (
                TRUNCATION_RATE,
                self.truncation_rate.as_ref().map(|r| &r.severity),
            ),
        ]
        .into_iter()
        .filter_map(|(n, s)| Some((n, s?.clone())))
        .collect()
    }

    /// The enabled rules of `config` (`None` when all are off).
    pub fn from_config(config: &Config) -> Option<Self> {
        let a = &config.alerts;
        let over_ceiling = a.over_ceiling.enabled.then(|| OverCeilingRule {
            severity: a.over_ceiling.severity.clone(),
            quiet_period: duration_or(&a.over_ceiling.quiet_period, Duration::from_secs(300)),
        });
        let repeated = a.repeated_oversize.enabled.then(|| RepeatedRule {
            severity: a.repeated_oversize.severity.clone(),
            count: a.repeated_oversize.count.max(1),
            window: duration_or(&a.repeated_oversize.window, Duration::from_secs(600)),
        });
        let p95_jump = a.p95_jump.enabled.then(|| P95JumpRule {
            severity: a.p95_jump.severity.clone(),
            factor: a.p95_jump.factor,
            min_recent: a.p95_jump.min_recent.max(1),
            min_baseline: a.p95_jump.min_baseline.max(1),
        });
        let near_ceiling = a.near_ceiling.enabled.then(|| NearCeilingRule {
            severity: a.near_ceiling.severity.clone(),
            ratio: a.near_ceiling.ratio,
            min_count: a.near_ceiling.min_count.max(1),
        });
        let truncation_rate = a.truncation_rate.enabled.then(|| TruncationRateRule {
            severity: a.truncation_rate.severity.clone(),
            threshold: a.truncation_rate.threshold,
            min_count: a.truncation_rate.min_count.max(1),
        });
        let any = over_ceiling.is_some()
            || repeated.is_some()
            || p95_jump.is_some()
            || near_ceiling.is_some()
            || truncation_rate.is_some();
        any.then(|| Self {
            stack: Arc::new(config.stack.clone()),
            over_ceiling,
            repeated,
            p95_jump,
            near_ceiling,
            truncation_rate,
            window_quiet_period: config.alert_evaluation_interval() * 3,
            seen: HashMap::new(),
            tx: None,
            stats: Arc::default(),
        })
    }

    /// Where matches go.
    #[must_use]
    pub fn with_sender(mut self, tx: mpsc::Sender<Event>, stats: Arc<AlertStats>) -> Self {
        self.tx = Some(tx);
        self.stats = stats;
        self
    }

    /// The matches of one record (without sending them).
    pub fn evaluate(&mut self, key: &SeriesKey, r: &ToolRecord, now_unix: u64) -> Vec<Matched> {
        let Size::Known { bytes, source } = r.size else {
            return Vec::new();
        };
        let verdict = self
            .stack
            .verdict(&r.measures.measures(bytes), source != SizeSource::Measured);
        let Some(cut) = verdict.weakest else {
            return Vec::new();
        };
        let trace_id: String = r.trace_id.iter().map(|b| format!("{b:02x}")).collect();
        let args_hash = r.args_hash.map(|h| h.to_string());
        let unit = cut.unit.as_str();
        let mut out = Vec::new();
        if let Some(rule) = &self.over_ceiling {
            let description = format!(
                "A {bytes}-byte result of tool {} (service {}) is over the {} {unit} limit of \
                 layer {} ({} {unit}); the model sees it cut. Trace {trace_id}.",
                key.tool, key.service, cut.limit, cut.layer_id, cut.value
            );
            let mut annotations = labels(&[
                ("bytes", &bytes.to_string()),
                ("ceiling", &cut.limit.to_string()),
                ("unit", unit),
                ("value", &cut.value.to_string()),
                ("trace_id", &trace_id),
                (
                    "summary",
                    &format!(
                        "Tool {} returned a result over the {} ceiling.",
                        key.tool, cut.layer_id
                    ),
                ),
                ("description", &description),
                ("hint", HINT),
            ]);
            if let Some(h) = &args_hash {
                annotations.insert("args_hash".into(), h.clone());
            }
            out.push(Matched {
                labels: labels(&[
                    ("alertname", OVER_CEILING),
                    ("service", &key.service),
                    ("tool", &key.tool),
                    ("layer", cut.layer_id),
                    ("severity", &rule.severity),
                ]),
                annotations,
                quiet_period: rule.quiet_period,
            });
        }
        if let (Some(rule), Some(h)) = (&self.repeated, &args_hash) {
            let horizon = now_unix.saturating_sub(rule.window.as_secs());
            if self.seen.len() >= MAX_TRACKED_ARGS {
                self.seen
                    .retain(|_, v| v.back().is_some_and(|&t| t > horizon));
                if self.seen.len() >= MAX_TRACKED_ARGS {
                    self.seen.clear();
                }
            }
            let times = self.seen.entry((key.clone(), h.clone())).or_default();
            times.push_back(now_unix);
            while times.front().is_some_and(|&t| t <= horizon) {
                times.pop_front();
            }
            while times.len() > rule.count as usize {
                times.pop_front();
            }
            if times.len() >= rule.count as usize {
                out.push(Matched {
                    labels: labels(&[
                        ("alertname", REPEATED_OVERSIZE),
                        ("service", &key.service),
                        ("tool", &key.tool),
                        ("args_hash", h),
                        ("severity", &rule.severity),
                    ]),
                    annotations: labels(&[
                        ("bytes", &bytes.to_string()),
                        ("ceiling", &cut.limit.to_string()),
                        ("unit", unit),
                        ("layer", cut.layer_id),
                        ("trace_id", &trace_id),
                        ("count", &times.len().to_string()),
                        (
                            "summary",
                            &format!(
                                "Tool {} was called {} times with the same arguments and an \
                                 over-ceiling result.",
                                key.tool,
                                times.len()
                            ),
                        ),
                        (
                            "description",
                            &format!(
                                "Arguments hash {h} of tool {} (service {}) returned over the {} \
                                 ceiling {} times within {} s: an agent retrying the same huge call.",
                                key.tool,
                                key.service,
                                cut.layer_id,
                                times.len(),
                                rule.window.as_secs()
                            ),
                        ),
                        ("hint", HINT),
                    ]),
                    quiet_period: rule.window,
                });
            }
        }
        out
    }
}

/// Formats a ratio with two decimals.
fn ratio(x: f64) -> String {
    format!("{x:.2}")
}

impl Rules {
    /// The matches of the window rules over every series at `now_unix`.
    ///
    /// "Recent" is the shortest configured window (5m by default). `ToolResultSizeP95Jump`
    /// compares its p95 with the p95 of the baseline: the slots of the longest window (1h) that
    /// ended before the recent window began (see [`Series::window_stats_ending_by`]).
    pub fn evaluate_windows(
        &self,
        series: &HashMap<SeriesKey, Series, FxBuild>,
        limits: &Limits,
        now_unix: u64,
    ) -> Vec<Matched> {
        let mut out = Vec::new();
        if self.p95_jump.is_none() && self.near_ceiling.is_none() && self.truncation_rate.is_none()
        {
            return out;
        }
        let by_len = |longest: bool| {
            let it = limits.windows.iter().enumerate();
            if longest {
                it.max_by_key(|(_, (_, d))| *d)
                    .map(|(i, (l, d))| (i, l, *d))
            } else {
                it.min_by_key(|(_, (_, d))| *d)
                    .map(|(i, (l, d))| (i, l, *d))
            }
        };
        let (Some((recent_i, recent_label, recent_len)), Some((base_i, base_label, _))) =
            (by_len(false), by_len(true))
        else {
            return out;
        };
        let ceiling = self.stack.ceiling_bytes();
        let mut keys: Vec<&SeriesKey> = series.keys().collect();
        keys.sort_by(|a, b| (&a.service, &a.tool).cmp(&(&b.service, &b.tool)));
        for key in keys {
            let s = &series[key];
            let recent = s.window_stats(recent_i, now_unix);
            if recent.calls == 0 {
                continue;
            }
            let n = recent.size.len();
            let p95 = recent.size.quantile(0.95);
            let base_labels = |name: &str, severity: &str| {
                labels(&[
                    ("alertname", name),
                    ("service", &key.service),
                    ("tool", &key.tool),
                    ("severity", severity),
                ])
            };
            if let Some(rule) = &self.p95_jump {
                let end = now_unix.saturating_sub(recent_len.as_secs());
                let base = s.window_stats_ending_by(base_i, now_unix, end);
                let bn = base.size.len();
                let before = base.size.quantile(0.95);
                if n >= rule.min_recent
                    && bn >= rule.min_baseline
                    && before > 0
                    && p95 as f64 >= rule.factor * before as f64
                {
                    let factor = p95 as f64 / before as f64;
                    out.push(Matched {
                        labels: base_labels(P95_JUMP, &rule.severity),
                        annotations: labels(&[
                            ("p95_bytes", &p95.to_string()),
                            ("p95_before_bytes", &before.to_string()),
                            ("factor", &ratio(factor)),
                            ("threshold_factor", &ratio(rule.factor)),
                            ("count", &n.to_string()),
                            ("count_before", &bn.to_string()),
                            (
                                "summary",
                                &format!(
                                    "The p95 result of tool {} grew {}x.",
                                    key.tool,
                                    ratio(factor)
                                ),
                            ),
                            (
                                "description",
                                &format!(
                                    "p95 of {n} results of tool {} (service {}) over the last \
                                     {recent_label} is {p95} bytes, {}x the p95 of {bn} results \
                                     of the {base_label} before it ({before} bytes).",
                                    key.tool,
                                    key.service,
                                    ratio(factor)
                                ),
                            ),
                            ("hint", P95_JUMP_HINT),
                        ]),
                        quiet_period: self.window_quiet_period,
                    });
                }
            }
            if let (Some(rule), Some(c)) = (&self.near_ceiling, &ceiling) {
                if n >= rule.min_count && c.bytes > 0 && p95 as f64 >= rule.ratio * c.bytes as f64 {
                    let share = p95 as f64 / c.bytes as f64;
                    let mut l = base_labels(NEAR_CEILING, &rule.severity);
                    l.insert("layer".into(), c.layer_id.to_string());
                    out.push(Matched {
                        labels: l,
                        annotations: labels(&[
                            ("p95_bytes", &p95.to_string()),
                            ("ceiling_bytes", &c.bytes.to_string()),
                            ("ratio", &ratio(share)),
                            ("threshold_ratio", &ratio(rule.ratio)),
                            ("count", &n.to_string()),
                            (
                                "summary",
                                &format!(
                                    "The p95 result of tool {} is {}% of the {} ceiling.",
                                    key.tool,
                                    (share * 100.0).round(),
                                    c.layer_id
                                ),
                            ),
                            (
                                "description",
                                &format!(
                                    "p95 of {n} results of tool {} (service {}) over the last \
                                     {recent_label} is {p95} bytes; the ceiling ({}) is {} bytes.",
                                    key.tool, key.service, c.layer_id, c.bytes
                                ),
                            ),
                            ("hint", NEAR_CEILING_HINT),
                        ]),
                        quiet_period: self.window_quiet_period,
                    });
                }
            }
            if let Some(rule) = &self.truncation_rate {
                let cut = recent.truncated + recent.truncated_upstream;
                let rate = cut as f64 / recent.calls as f64;
                if recent.calls >= rule.min_count && rate > rule.threshold {
                    out.push(Matched {
                        labels: base_labels(TRUNCATION_RATE, &rule.severity),
                        annotations: labels(&[
                            ("rate", &ratio(rate)),
                            ("threshold", &ratio(rule.threshold)),
                            ("truncated", &recent.truncated.to_string()),
                            ("truncated_upstream", &recent.truncated_upstream.to_string()),
                            ("calls", &recent.calls.to_string()),
                            (
                                "summary",
                                &format!(
                                    "{}% of the results of tool {} were truncated.",
                                    (rate * 100.0).round(),
                                    key.tool
                                ),
                            ),
                            (
                                "description",
                                &format!(
                                    "{cut} of {} calls of tool {} (service {}) over the last \
                                     {recent_label} returned a truncated result ({} by the tool, \
                                     {} upstream).",
                                    recent.calls,
                                    key.tool,
                                    key.service,
                                    recent.truncated,
                                    recent.truncated_upstream
                                ),
                            ),
                            ("hint", TRUNCATION_RATE_HINT),
                        ]),
                        quiet_period: self.window_quiet_period,
                    });
                }
            }
        }
        out
    }

    fn send(&self, m: Matched) {
        if let Some(tx) = &self.tx {
            if tx.try_send(m).is_err() {
                self.stats.event_dropped();
            }
        }
    }
}

impl ResultObserver for Rules {
    fn observe(&mut self, key: &SeriesKey, record: &ToolRecord, now_unix: u64) {
        if self.tx.is_none() {
            return;
        }
        for m in self.evaluate(key, record, now_unix) {
            self.send(m);
        }
    }

    fn periodic(
        &mut self,
        series: &HashMap<SeriesKey, Series, FxBuild>,
        limits: &Limits,
        now_unix: u64,
    ) {
        if self.tx.is_none() {
            return;
        }
        for m in self.evaluate_windows(series, limits, now_unix) {
            self.send(m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::recognize::{ArgsHash, Emitter, Extra};

    fn rec(bytes: u64) -> ToolRecord {
        ToolRecord {
            service: "svc".into(),
            tool: "fetch".into(),
            emitter: Emitter::Toolsize,
            size: Size::Known {
                bytes,
                source: SizeSource::Measured,
            },
            truncated: false,
            truncated_upstream: false,
            error: false,
            latency_us: 1500,
            trace_id: [0xab; 16],
            span_id: [2; 8],
            args_hash: Some(ArgsHash::new("0123456789ab")),
            measures: Extra::default(),
            upstream_limit: None,
        }
    }

    fn key() -> SeriesKey {
        SeriesKey {
            service: "svc".into(),
            tool: "fetch".into(),
        }
    }

    #[test]
    fn over_ceiling_names_the_layer_and_steers() {
        let mut rules = Rules::from_config(&Config::default()).unwrap();
        assert!(rules.evaluate(&key(), &rec(100), 1000).is_empty());
        let m = rules.evaluate(&key(), &rec(20_000), 1000);
        assert_eq!(m.len(), 1, "repeated oversize needs 3");
        let m = &m[0];
        assert_eq!(m.labels["alertname"], OVER_CEILING);
        assert_eq!(m.labels["layer"], "default");
        assert_eq!(m.labels["severity"], "page");
        assert_eq!(m.annotations["bytes"], "20000");
        assert_eq!(m.annotations["ceiling"], "16384");
        assert_eq!(m.annotations["args_hash"], "0123456789ab");
        assert_eq!(m.annotations["trace_id"], "ab".repeat(16));
        assert_eq!(m.annotations["hint"], HINT);
        assert_eq!(m.quiet_period, Duration::from_secs(300));
    }

    #[test]
    fn repeated_oversize_needs_count_within_the_window() {
        let mut config = Config::default();
        config.alerts.over_ceiling.enabled = false;
        let mut rules = Rules::from_config(&config).unwrap();
        assert!(rules.evaluate(&key(), &rec(20_000), 0).is_empty());
        assert!(rules.evaluate(&key(), &rec(20_000), 100).is_empty());
        // The first one is out of the 10-minute window by now.
        assert!(rules.evaluate(&key(), &rec(20_000), 650).is_empty());
        let m = rules.evaluate(&key(), &rec(20_000), 690);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].labels["alertname"], REPEATED_OVERSIZE);
        assert_eq!(m[0].labels["args_hash"], "0123456789ab");
        assert_eq!(m[0].annotations["count"], "3");
        config.alerts.repeated_oversize.enabled = false;
        assert!(
            Rules::from_config(&config).is_some(),
            "window rules still on"
        );
        config.alerts.p95_jump.enabled = false;
        config.alerts.near_ceiling.enabled = false;
        config.alerts.truncation_rate.enabled = false;
        assert!(Rules::from_config(&config).is_none(), "every rule off");
    }

    use crate::collector::aggregator::State;

    /// A deterministic log-normal-ish size: exp(N(ln median, sigma)) with the normal from the
    /// sum of 12 uniforms of a xorshift generator.
    struct Sizes(u64);

    impl Sizes {
        fn uniform(&mut self) -> f64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 >> 11) as f64 / (1u64 << 53) as f64
        }
        fn next(&mut self, median: f64, sigma: f64) -> u64 {
            let z: f64 = (0..12).map(|_| self.uniform()).sum::<f64>() - 6.0;
            (median.ln() + sigma * z).exp().round().max(1.0) as u64
        }
    }

    fn window_config() -> Config {
        let mut c = Config::default();
        c.alerts.over_ceiling.enabled = false;
        c.alerts.repeated_oversize.enabled = false;
        c
    }

    fn only(c: &mut Config, name: &str) {
        c.alerts.p95_jump.enabled = name == P95_JUMP;
        c.alerts.near_ceiling.enabled = name == NEAR_CEILING;
        c.alerts.truncation_rate.enabled = name == TRUNCATION_RATE;
    }

    /// A whole hour (1_800_000_000 is one).
    const T0: u64 = 1_800_000_000;

    /// An hour of results around 3 KB (one every 10 s), then 5 minutes (one every 5 s) of
    /// results around `after_median` bytes; returns the state at the end.
    fn deploy_scenario(config: &Config, after_median: f64) -> (State, u64) {
        let mut st = State::new(Limits::from_config(config));
        let mut sizes = Sizes(0x9e37_79b9_7f4a_7c15);
        let mut t = T0;
        while t < T0 + 3600 {
            st.record(&rec(sizes.next(3000.0, 0.5)), t);
            t += 10;
        }
        let deploy = t;
        while t < deploy + 300 {
            st.record(&rec(sizes.next(after_median, 0.35)), t);
            t += 5;
        }
        (st, t)
    }

    #[test]
    fn p95_jump_fires_after_a_deploy_and_not_without_one() {
        let mut config = window_config();
        only(&mut config, P95_JUMP);
        let rules = Rules::from_config(&config).unwrap();
        let (st, now) = deploy_scenario(&config, 41_000.0);
        let m = rules.evaluate_windows(&st.series, &st.limits, now);
        assert_eq!(m.len(), 1, "{m:?}");
        let m = &m[0];
        assert_eq!(m.labels["alertname"], P95_JUMP);
        assert_eq!(m.labels["tool"], "fetch");
        assert_eq!(m.labels["severity"], "warning");
        let now_p95: u64 = m.annotations["p95_bytes"].parse().unwrap();
        let before: u64 = m.annotations["p95_before_bytes"].parse().unwrap();
        assert!(now_p95 > 41_000 && now_p95 < 100_000, "{now_p95}");
        assert!(before > 4_000 && before < 10_000, "{before}");
        assert!(m.annotations["factor"].parse::<f64>().unwrap() >= 3.0);
        assert!(m.annotations["count"].parse::<u64>().unwrap() >= 20);
        assert!(m.annotations["count_before"].parse::<u64>().unwrap() >= 50);
        assert_eq!(m.annotations["hint"], P95_JUMP_HINT);
        assert_eq!(m.quiet_period, Duration::from_secs(30), "3 x 10 s");

        // The same distribution throughout: no jump.
        let (st, now) = deploy_scenario(&config, 3000.0);
        assert!(rules
            .evaluate_windows(&st.series, &st.limits, now)
            .is_empty());

        // A higher factor, or too few results before, and it stays quiet.
        config.alerts.p95_jump.factor = 50.0;
        let rules = Rules::from_config(&config).unwrap();
        let (st, now) = deploy_scenario(&config, 41_000.0);
        assert!(rules
            .evaluate_windows(&st.series, &st.limits, now)
            .is_empty());
        config.alerts.p95_jump.factor = 3.0;
        config.alerts.p95_jump.min_baseline = 10_000;
        let rules = Rules::from_config(&config).unwrap();
        assert!(rules
            .evaluate_windows(&st.series, &st.limits, now)
            .is_empty());
        config.alerts.p95_jump.enabled = false;
        assert!(Rules::from_config(&config).is_none(), "switched off");
        assert!(
            Config::from_toml("[alerts.p95_jump]\nenabled = false\n")
                .unwrap()
                .alerts
                .p95_jump
                == crate::collector::config::P95JumpConfig {
                    enabled: false,
                    ..Default::default()
                }
        );
    }

    #[test]
    fn p95_jump_resolves_once_the_jump_left_the_recent_window() {
        let mut config = window_config();
        only(&mut config, P95_JUMP);
        let rules = Rules::from_config(&config).unwrap();
        let (mut st, mut now) = deploy_scenario(&config, 41_000.0);
        let mut engine = super::super::Engine::default();
        let at = |t: u64| std::time::UNIX_EPOCH + Duration::from_secs(t);
        for m in rules.evaluate_windows(&st.series, &st.limits, now) {
            assert!(engine.on_match(m, at(now)).is_some(), "fires");
        }
        // Rolled back: 3 KB results again for 10 minutes, evaluated every 10 s.
        let mut sizes = Sizes(7);
        let mut resolved = Vec::new();
        for _ in 0..60 {
            st.record(&rec(sizes.next(3000.0, 0.5)), now);
            now += 10;
            for m in rules.evaluate_windows(&st.series, &st.limits, now) {
                engine.on_match(m, at(now));
            }
            resolved.extend(engine.tick(at(now)));
        }
        assert_eq!(resolved.len(), 1);
        assert_eq!(resolved[0].name, P95_JUMP);
    }

    #[test]
    fn near_ceiling_fires_on_a_p95_close_to_the_ceiling() {
        let mut config = window_config();
        only(&mut config, NEAR_CEILING);
        let rules = Rules::from_config(&config).unwrap();
        let run = |median: f64, n: u64| {
            let mut st = State::new(Limits::from_config(&config));
            let mut sizes = Sizes(42);
            for i in 0..n {
                st.record(&rec(sizes.next(median, 0.1)), T0 + i);
            }
            rules.evaluate_windows(&st.series, &st.limits, T0 + n)
        };
        // Default stack: one 16384-byte layer; 80 % is 13107 bytes.
        let m = run(13_500.0, 30);
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(m[0].labels["alertname"], NEAR_CEILING);
        assert_eq!(m[0].labels["layer"], "default");
        assert_eq!(m[0].annotations["ceiling_bytes"], "16384");
        assert_eq!(m[0].annotations["hint"], NEAR_CEILING_HINT);
        assert!(run(8_000.0, 30).is_empty(), "p95 well under 80 %");
        assert!(run(13_500.0, 10).is_empty(), "too few results");
    }

    #[test]
    fn truncation_rate_fires_above_the_threshold() {
        let mut config = window_config();
        only(&mut config, TRUNCATION_RATE);
        let rules = Rules::from_config(&config).unwrap();
        let run = |calls: u64, truncated: u64, upstream: u64| {
            let mut st = State::new(Limits::from_config(&config));
            for i in 0..calls {
                let mut r = rec(2000);
                r.truncated = i < truncated;
                r.truncated_upstream = i >= truncated && i < truncated + upstream;
                st.record(&r, T0 + i);
            }
            rules.evaluate_windows(&st.series, &st.limits, T0 + calls)
        };
        let m = run(100, 4, 3);
        assert_eq!(m.len(), 1, "7 % > 5 %");
        assert_eq!(m[0].labels["alertname"], TRUNCATION_RATE);
        assert_eq!(m[0].annotations["rate"], "0.07");
        assert_eq!(m[0].annotations["truncated"], "4");
        assert_eq!(m[0].annotations["truncated_upstream"], "3");
        assert_eq!(m[0].annotations["calls"], "100");
        assert!(run(100, 3, 2).is_empty(), "5 % is not above 5 %");
        assert!(run(10, 5, 0).is_empty(), "too few calls");
    }

    /// An observer collecting what the rules send.
    fn wired(config: &Config) -> (State, mpsc::Receiver<Event>) {
        let (tx, rx) = mpsc::channel(64);
        let mut st = State::new(Limits::from_config(config));
        st.add_observer(Box::new(
            Rules::from_config(config)
                .unwrap()
                .with_sender(tx, Arc::default()),
        ));
        (st, rx)
    }

    fn names(rx: &mut mpsc::Receiver<Event>) -> Vec<String> {
        std::iter::from_fn(|| rx.try_recv().ok())
            .map(|m| m.labels["alertname"].clone())
            .collect()
    }

    #[test]
    fn repeated_oversize_scenario_through_the_aggregator() {
        let mut config = Config::default();
        only(&mut config, "");
        let sizes = [20_000, 50_000, 31_000];
        // Three over-ceiling results with the same arguments within 10 minutes: fires.
        let (mut st, mut rx) = wired(&config);
        for (i, b) in sizes.iter().enumerate() {
            st.record(&rec(2_000), T0 + 200 * i as u64);
            st.record(&rec(*b), T0 + 200 * i as u64 + 1);
        }
        let n = names(&mut rx);
        assert_eq!(n.iter().filter(|n| *n == OVER_CEILING).count(), 3);
        assert_eq!(n.iter().filter(|n| *n == REPEATED_OVERSIZE).count(), 1);
        // Only two over the ceiling (the third call is under it): does not.
        let (mut st, mut rx) = wired(&config);
        for (t, b) in [(0, 20_000), (200, 50_000), (400, 9_000)] {
            st.record(&rec(b), T0 + t);
        }
        let n = names(&mut rx);
        assert_eq!(n.iter().filter(|n| *n == OVER_CEILING).count(), 2);
        assert!(!n.iter().any(|n| n == REPEATED_OVERSIZE), "{n:?}");
        // Two within 10 minutes, the third 11 minutes after the first: does not.
        let (mut st, mut rx) = wired(&config);
        for (t, b) in [(0, 20_000), (300, 50_000), (660, 31_000)] {
            st.record(&rec(b), T0 + t);
        }
        let n = names(&mut rx);
        assert_eq!(n.iter().filter(|n| *n == OVER_CEILING).count(), 3);
        assert!(!n.iter().any(|n| n == REPEATED_OVERSIZE), "{n:?}");
        // Other arguments do not count together.
        let (mut st, mut rx) = wired(&config);
        for (i, h) in ["aaaaaaaaaaaa", "bbbbbbbbbbbb", "aaaaaaaaaaaa"]
            .iter()
            .enumerate()
        {
            let mut r = rec(20_000);
            r.args_hash = Some(ArgsHash::new(h));
            st.record(&r, T0 + i as u64);
        }
        assert!(!names(&mut rx).iter().any(|n| n == REPEATED_OVERSIZE));
    }

    #[test]
    fn window_rules_run_through_the_aggregator_seam() {
        let mut config = window_config();
        only(&mut config, TRUNCATION_RATE);
        let (mut st, mut rx) = wired(&config);
        for i in 0..40 {
            let mut r = rec(2000);
            r.truncated = i % 2 == 0;
            st.record(&r, T0 + i);
        }
        assert!(
            names(&mut rx).is_empty(),
            "window rules wait for the evaluation"
        );
        st.evaluate_observers(T0 + 40);
        assert_eq!(names(&mut rx), vec![TRUNCATION_RATE.to_string()]);
    }
}
