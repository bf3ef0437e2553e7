//! `ToolResultSizeNearCeiling`: the recent p95 of result bytes is within `ratio` of the ceiling
//! (the weakest layer's limit in bytes): results are about to be cut.

use super::{labels, ratio, series_labels, WindowInput, WindowRule};
use crate::collector::alerts::Matched;
use crate::collector::config::NearCeilingConfig;

/// The alert name.
pub const NAME: &str = "ToolResultSizeNearCeiling";

/// The hint of `ToolResultSizeNearCeiling`.
pub(crate) const NEAR_CEILING_HINT: &str =
    "results are about to be cut: paginate, narrow the filter, or return a summary and a handle";

/// The rule.
#[derive(Debug)]
pub(crate) struct Rule {
    severity: crate::collector::config::Severity,
    ratio: f64,
    min_count: u64,
}

impl Rule {
    /// The rule of `[alerts.near_ceiling]`, when enabled.
    pub(crate) fn from_config(c: &NearCeilingConfig) -> Option<Self> {
        c.enabled.then(|| Self {
            severity: c.severity.clone(),
            ratio: c.ratio,
            min_count: c.min_count.max(1),
        })
    }
}

impl WindowRule for Rule {

    fn severity(&self) -> &str {
        self.severity.as_str()
    }

    fn evaluate(&self, w: &WindowInput<'_>) -> Option<Matched> {
        let c = w.ceiling.as_ref()?;
        let (n, p95, key) = (w.n, w.p95, w.key);
        if n < self.min_count || c.bytes == 0 || (p95 as f64) < self.ratio * c.bytes as f64 {
            return None;
        }
        let share = p95 as f64 / c.bytes as f64;
        let recent_label = w.recent_window.1;
        let mut l = series_labels(NAME, key, self.severity.as_str());
        l.insert("layer".into(), c.layer_id.to_string());
        Some(Matched {
            labels: l,
            annotations: labels(&[
                ("p95_bytes", &p95.to_string()),
                ("ceiling_bytes", &c.bytes.to_string()),
                ("ratio", &ratio(share)),
                ("threshold_ratio", &ratio(self.ratio)),
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
    fn fires_on_a_p95_close_to_the_ceiling() {
        let config = only_window(NAME);
        let rules = Rules::from_config(&config).unwrap();
        let run = |median: f64, n: u64| {
            let mut st = State::new(Limits::from_config(&config));
            let mut sizes = Sizes(42);
            for i in 0..n {
                st.record(&rec(sizes.next(median, 0.1)), T0 + i);
            }
            rules
                .evaluate_windows(&st.series, &st.limits, T0 + n)
                .into_iter()
                .map(|(_, m)| m)
                .collect::<Vec<_>>()
        };
        // Default stack: one 16384-byte layer; 80 % is 13107 bytes.
        let m = run(13_500.0, 30);
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(m[0].labels["alertname"], NAME);
        assert_eq!(m[0].labels["layer"], "default");
        assert_eq!(m[0].annotations["ceiling_bytes"], "16384");
        assert_eq!(m[0].annotations["hint"], NEAR_CEILING_HINT);
        assert!(run(8_000.0, 30).is_empty(), "p95 well under 80 %");
        assert!(run(13_500.0, 10).is_empty(), "too few results");
    }
}
