//! `ToolResultSizeP95Jump`: the recent p95 of result bytes grew `factor` times over its
//! baseline (the "3 KB → 41 KB after a deploy" case).
//!
//! "Recent" is the shortest window (5m by default); the baseline is the slots of the longest
//! window (1h) that ended before the recent window began (see
//! [`Series::window_stats_ending_by`](crate::collector::state::Series::window_stats_ending_by)).

use super::{labels, ratio, series_labels, WindowInput, WindowRule};
use crate::collector::alerts::Matched;
use crate::collector::config::P95JumpConfig;

/// The alert name.
pub const NAME: &str = "ToolResultSizeP95Jump";

/// The hint of `ToolResultSizeP95Jump`.
pub(crate) const P95_JUMP_HINT: &str =
    "a deploy or a changed query made results larger; compare the \
     largest recent results with the arguments hashes of before";

/// The rule.
#[derive(Debug)]
pub(crate) struct Rule {
    severity: crate::collector::config::Severity,
    factor: f64,
    min_recent: u64,
    min_baseline: u64,
}

impl Rule {
    /// The rule of `[alerts.p95_jump]`, when enabled.
    pub(crate) fn from_config(c: &P95JumpConfig) -> Option<Self> {
        c.enabled.then(|| Self {
            severity: c.severity.clone(),
            factor: c.factor,
            min_recent: c.min_recent.max(1),
            min_baseline: c.min_baseline.max(1),
        })
    }
}

impl WindowRule for Rule {

    fn severity(&self) -> &str {
        self.severity.as_str()
    }

    fn evaluate(&self, w: &WindowInput<'_>) -> Option<Matched> {
        let (_, recent_label, recent_len) = w.recent_window;
        let (base_i, base_label) = w.base_window;
        let (n, p95, key) = (w.n, w.p95, w.key);
        if n < self.min_recent {
            return None;
        }
        let end = w.now_unix.saturating_sub(recent_len.as_secs());
        let base = w.series.window_stats_ending_by(base_i, w.now_unix, end);
        let bn = base.size.len();
        let before = base.size.quantile(0.95);
        if bn < self.min_baseline || before == 0 || (p95 as f64) < self.factor * before as f64 {
            return None;
        }
        let factor = p95 as f64 / before as f64;
        Some(Matched {
            labels: series_labels(NAME, key, self.severity.as_str()),
            annotations: labels(&[
                ("p95_bytes", &p95.to_string()),
                ("p95_before_bytes", &before.to_string()),
                ("factor", &ratio(factor)),
                ("threshold_factor", &ratio(self.factor)),
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
            quiet_period: w.quiet_period,
            new: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::testing::*;
    use super::super::Rules;
    use super::*;
    use crate::collector::config::Config;
    use crate::collector::state::{Limits, State};

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

    /// What the rules match on `st` at `now`.
    fn matches(rules: &Rules, st: &State, now: u64) -> Vec<Matched> {
        rules
            .evaluate_windows(&st.series, &st.limits, now)
            .into_iter()
            .map(|(_, m)| m)
            .collect()
    }

    #[test]
    fn fires_after_a_deploy_and_not_without_one() {
        let mut config = only_window(NAME);
        let rules = Rules::from_config(&config).unwrap();
        let (st, now) = deploy_scenario(&config, 41_000.0);
        let m = matches(&rules, &st, now);
        assert_eq!(m.len(), 1, "{m:?}");
        let m = &m[0];
        assert_eq!(m.labels["alertname"], NAME);
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
        assert!(matches(&rules, &st, now)
            .is_empty());

        // A higher factor, or too few results before, and it stays quiet.
        config.alerts.p95_jump.factor = 50.0;
        let rules = Rules::from_config(&config).unwrap();
        let (st, now) = deploy_scenario(&config, 41_000.0);
        assert!(matches(&rules, &st, now)
            .is_empty());
        config.alerts.p95_jump.factor = 3.0;
        config.alerts.p95_jump.min_baseline = 10_000;
        let rules = Rules::from_config(&config).unwrap();
        assert!(matches(&rules, &st, now)
            .is_empty());
        config.alerts.p95_jump.enabled = false;
        assert!(Rules::from_config(&config).is_none(), "switched off");
        assert!(
            Config::from_toml("[alerts.p95_jump]\nenabled = false\n")
                .unwrap()
                .alerts
                .p95_jump
                == P95JumpConfig {
                    enabled: false,
                    ..Default::default()
                }
        );
    }

    #[test]
    fn resolves_once_the_jump_left_the_recent_window() {
        let config = only_window(NAME);
        let rules = Rules::from_config(&config).unwrap();
        let (mut st, mut now) = deploy_scenario(&config, 41_000.0);
        let mut engine = crate::collector::alerts::Engine::default();
        let at = |t: u64| std::time::UNIX_EPOCH + Duration::from_secs(t);
        for m in matches(&rules, &st, now)
        {
            assert!(engine.on_match(m, at(now)).is_some(), "fires");
        }
        // Rolled back: 3 KB results again for 10 minutes, evaluated every 10 s.
        let mut sizes = Sizes(7);
        let mut resolved = Vec::new();
        for _ in 0..60 {
            st.record(&rec(sizes.next(3000.0, 0.5)), now);
            now += 10;
            for m in matches(&rules, &st, now)
            {
                engine.on_match(m, at(now));
            }
            resolved.extend(engine.tick(at(now)));
        }
        assert_eq!(resolved.len(), 1);
        assert_eq!(resolved[0].name, NAME);
    }
}
