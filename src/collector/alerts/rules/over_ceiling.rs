//! `ToolResultOverCeiling`: a result over the ceiling of a layer of the stack.
//!
//! One alert per (service, tool, weakest layer), deduplicated by (series id, layer index) before
//! anything is built ([`Firing`]); it resolves after `alerts.over_ceiling.quiet_period` without
//! another such result. The annotations are those of the latest result sent (bytes, ceiling,
//! trace id, arguments hash); the description says what the layer does over its limit (its
//! `action`: cut, spilled, refused, or only warned), never a cut that did not happen.

use std::time::Duration;

use super::{labels, Decision, Firing, Hit, Over, RecordRule};
use crate::collector::alerts::Matched;
use crate::collector::config::OverCeilingConfig;
use crate::hex::encode as hex;

/// The alert name.
pub const NAME: &str = "ToolResultOverCeiling";

/// The hint every over-ceiling alert carries.
pub(crate) const HINT: &str =
    "paginate with a cursor, narrow the filter, or return a summary and a handle";

/// The rule.
#[derive(Debug)]
pub(crate) struct Rule {
    severity: crate::collector::config::Severity,
    quiet_period: Duration,
    firing: Firing<(u32, u32)>,
}

impl Rule {
    /// The rule of `[alerts.over_ceiling]`, when enabled.
    pub(crate) fn from_config(c: &OverCeilingConfig) -> Option<Self> {
        let quiet_period = c.quiet_period.0;
        c.enabled.then(|| Self {
            severity: c.severity.clone(),
            quiet_period,
            firing: Firing::new(quiet_period),
        })
    }

    fn payload(&self, o: &Over<'_>, new: bool) -> Matched {
        let key = o.seen.key;
        let r = o.seen.record;
        let cut = o.cut;
        let (bytes, unit) = (o.bytes, cut.unit.as_str());
        let trace_id = hex(&r.trace_id);
        let description = format!(
            "A {bytes}-byte result of tool {} (service {}) is over the {} {unit} limit of \
             layer {} ({} {unit}); {}. Trace {trace_id}.",
            key.tool,
            key.service,
            cut.limit,
            cut.layer_id,
            cut.value,
            cut.action.over_limit()
        );
        let mut annotations = labels(&[
            ("bytes", &bytes.to_string()),
            ("ceiling", &cut.limit.to_string()),
            ("unit", unit),
            ("action", cut.action.as_str()),
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
        if let Some(h) = r.args_hash {
            annotations.insert("args_hash".into(), h.to_string());
        }
        Matched {
            labels: labels(&[
                ("alertname", NAME),
                ("service", &key.service),
                ("tool", &key.tool),
                ("layer", cut.layer_id),
                ("severity", self.severity.as_str()),
            ]),
            annotations,
            quiet_period: self.quiet_period,
            new,
        }
    }
}

impl RecordRule for Rule {

    fn severity(&self) -> &str {
        self.severity.as_str()
    }

    fn over(&mut self, o: &Over<'_>) -> Decision {
        match self
            .firing
            .hit((o.seen.series, o.layer as u32), o.seen.now_ms)
        {
            Hit::Merged => Decision::Merged,
            hit => Decision::Due(self.payload(o, hit == Hit::New)),
        }
    }

    fn sweep(&mut self, now_ms: u64) {
        self.firing.sweep(now_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::collector::config::Config;
    use crate::collector::state::{Limits, Observed, SeriesKey};
    use crate::layers::Stack;

    fn over(rule: &mut Rule, stack: &Stack, bytes: u64, now_ms: u64) -> Decision {
        let r = rec(bytes);
        let key = SeriesKey {
            service: "svc".into(),
            tool: "fetch".into(),
        };
        let m = r.measures.with_bytes(bytes);
        let Some((layer, cut)) = stack.weakest(&m, false) else {
            return Decision::Quiet;
        };
        let seen = Observed {
            key: &key,
            series: 0,
            record: &r,
            over: Some((layer, cut)),
            now_ms,
        };
        rule.over(&Over {
            seen: &seen,
            bytes,
            layer,
            cut: &cut,
        })
    }

    #[test]
    fn names_the_layer_steers_and_deduplicates() {
        let config = Config::default();
        let limits = Limits::from_config(&config);
        let mut rule = Rule::from_config(&config.alerts.over_ceiling).unwrap();
        assert!(matches!(
            over(&mut rule, &limits.stacks.all, 100, 0),
            Decision::Quiet
        ));
        let Decision::Due(m) = over(&mut rule, &limits.stacks.all, 20_000, 1_000) else {
            panic!("fires")
        };
        assert!(m.new);
        assert_eq!(m.labels["alertname"], NAME);
        assert_eq!(m.labels["layer"], "default");
        assert_eq!(m.labels["severity"], "page");
        assert_eq!(m.annotations["bytes"], "20000");
        assert_eq!(m.annotations["ceiling"], "16384");
        assert_eq!(m.annotations["args_hash"], "0123456789ab");
        assert_eq!(m.annotations["trace_id"], "ab".repeat(16));
        assert_eq!(m.annotations["hint"], HINT);
        // The default layer only warns: the text says the result passed whole.
        assert_eq!(m.annotations["action"], "warn");
        let description = &m.annotations["description"];
        assert!(
            description.contains("; this layer only warns: nothing is cut. Trace "),
            "{description}"
        );
        assert!(!description.contains("model"), "{description}");
        assert_eq!(m.quiet_period, Duration::from_secs(300));
        assert!(matches!(
            over(&mut rule, &limits.stacks.all, 30_000, 2_000),
            Decision::Merged
        ));
        // A resend after a third of the 5-minute quiet period carries the latest result.
        let Decision::Due(m) = over(&mut rule, &limits.stacks.all, 30_000, 101_000) else {
            panic!("resent")
        };
        assert!(!m.new);
        assert_eq!(m.annotations["bytes"], "30000");
    }

    #[test]
    fn the_text_follows_the_layers_action() {
        for action in crate::layers::Action::ALL {
            let config = Config::from_toml(&format!(
                "[[layers.custom]]\nname = \"mine\"\nlimit = 1000\nunit = \"bytes\"\n\
                 action = \"{action}\"\n"
            ))
            .unwrap();
            let limits = Limits::from_config(&config);
            let mut rule = Rule::from_config(&config.alerts.over_ceiling).unwrap();
            let Decision::Due(m) = over(&mut rule, &limits.stacks.all, 5_000, 0) else {
                panic!("{action}: fires")
            };
            assert_eq!(m.labels["layer"], "mine");
            assert_eq!(m.annotations["action"], action.as_str());
            let description = &m.annotations["description"];
            assert!(
                description.contains(&format!("; {}. Trace ", action.over_limit())),
                "{action}: {description}"
            );
        }
    }

    #[test]
    fn many_results_through_the_aggregator_send_once_per_resend() {
        let mut config = Config::default();
        only(&mut config, "");
        config.alerts.repeated_oversize.enabled = false;
        let (mut st, mut rx) = wired(&config, 64);
        for i in 0..3 {
            st.record(&rec(2_000), T0 + 200 * i);
            st.record(&rec(20_000), T0 + 200 * i + 1);
        }
        // Fired at 1 s, resent at 201 s and 401 s (every 100 s while matching).
        assert_eq!(names(&mut rx), vec![NAME; 3]);
        for i in 0..1000 {
            st.record(&rec(20_000), T0 + 402 + i / 100);
        }
        assert!(names(&mut rx).is_empty(), "merged");
    }
}
