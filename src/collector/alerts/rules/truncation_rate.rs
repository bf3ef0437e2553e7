//! `ToolResultTruncationRate`: more than `threshold` of the recent results were truncated, by
//! the tool or upstream.

use super::{labels, ratio, series_labels, WindowInput, WindowRule};
use crate::collector::alerts::Matched;
use crate::collector::config::TruncationRateConfig;
use crate::collector::state::whole_calls;

/// The alert name.
pub const NAME: &str = "ToolResultTruncationRate";

/// The hint of `ToolResultTruncationRate`.
pub(crate) const TRUNCATION_RATE_HINT: &str =
    "the model often sees partial results: make the tool return less, or raise the layer's limit";

/// The rule.
#[derive(Debug)]
pub(crate) struct Rule {
    severity: crate::collector::config::Severity,
    threshold: f64,
    min_count: u64,
}

impl Rule {
    /// The rule of `[alerts.truncation_rate]`, when enabled.
    pub(crate) fn from_config(c: &TruncationRateConfig) -> Option<Self> {
        c.enabled.then(|| Self {
            severity: c.severity.clone(),
            threshold: c.threshold,
            min_count: c.min_count.max(1),
        })
    }
}

impl WindowRule for Rule {

    fn severity(&self) -> &str {
        self.severity.as_str()
    }

    fn evaluate(&self, w: &WindowInput<'_>) -> Option<Matched> {
        let (recent, key) = (w.recent, w.key);
        // Weighted counts: a sampled tracer's spans stand for the calls it saw.
        let c = &recent.counts;
        let (calls, truncated, upstream) = (
            whole_calls(c.calls_milli),
            whole_calls(c.weighted(c.truncated)),
            whole_calls(c.weighted(c.truncated_upstream)),
        );
        let cut = truncated + upstream;
        let rate = (c.truncated + c.truncated_upstream) as f64 / c.calls.max(1) as f64;
        if calls < self.min_count || rate <= self.threshold {
            return None;
        }
        let recent_label = w.recent_window.1;
        let extrapolated = if recent.counts.extrapolated() {
            " (extrapolated from sampled spans)"
        } else {
            ""
        };
        Some(Matched {
            labels: series_labels(NAME, key, self.severity.as_str()),
            annotations: labels(&[
                ("rate", &ratio(rate)),
                ("threshold", &ratio(self.threshold)),
                ("truncated", &truncated.to_string()),
                ("truncated_upstream", &upstream.to_string()),
                ("calls", &calls.to_string()),
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
                        "{cut} of {calls} calls{extrapolated} of tool {} (service {}) over the \
                         last {recent_label} returned a truncated result ({truncated} by the \
                         tool, {upstream} upstream).",
                        key.tool, key.service,
                    ),
                ),
                ("hint", TRUNCATION_RATE_HINT),
            ]),
            quiet_period: w.quiet_period,
            new: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::Rules;
    use super::*;
    use crate::collector::state::{Limits, State};

    #[test]
    fn fires_above_the_threshold() {
        let config = only_window(NAME);
        let rules = Rules::from_config(&config).unwrap();
        let run = |calls: u64, truncated: u64, upstream: u64| {
            let mut st = State::new(Limits::from_config(&config));
            for i in 0..calls {
                let mut r = rec(2000);
                r.truncated = i < truncated;
                r.truncated_upstream = i >= truncated && i < truncated + upstream;
                st.record(&r, T0 + i);
            }
            rules
                .evaluate_windows(&st.series, &st.limits, T0 + calls)
                .into_iter()
                .map(|(_, m)| m)
                .collect::<Vec<_>>()
        };
        let m = run(100, 4, 3);
        assert_eq!(m.len(), 1, "7 % > 5 %");
        assert_eq!(m[0].labels["alertname"], NAME);
        assert_eq!(m[0].annotations["rate"], "0.07");
        assert_eq!(m[0].annotations["truncated"], "4");
        assert_eq!(m[0].annotations["truncated_upstream"], "3");
        assert_eq!(m[0].annotations["calls"], "100");
        assert!(run(100, 3, 2).is_empty(), "5 % is not above 5 %");
        assert!(run(10, 5, 0).is_empty(), "too few calls");
    }
}
