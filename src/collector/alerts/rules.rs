//! The built-in rules, run on the aggregator for every record: `ToolResultOverCeiling` (a result
//! over the ceiling of a layer of the stack) and `ToolArgsRepeatedlyOversize` (the same arguments
//! hash over the ceiling `count` times within `window`).
//!
//! Cost on the hot path: one stack verdict per result of known size, and for results over the
//! ceiling a label map and a `try_send`. A full queue drops the match and counts it. The
//! repeated-arguments counts are bounded by [`MAX_TRACKED_ARGS`] (hashes, least recently seen
//! forgotten first).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::{duration_or, AlertStats, Event, Matched, OVER_CEILING, REPEATED_OVERSIZE};
use crate::collector::aggregator::{ResultObserver, SeriesKey};
use crate::collector::config::Config;
use crate::collector::recognize::{Size, SizeSource, ToolRecord};
use crate::layers::{ResultMeasures, Stack};

/// The hint every over-ceiling alert carries.
pub const HINT: &str =
    "paginate with a cursor, narrow the filter, or return a summary and a handle";
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

/// The rules, as one [`ResultObserver`].
#[derive(Debug)]
pub struct Rules {
    stack: Arc<Stack>,
    over_ceiling: Option<OverCeilingRule>,
    repeated: Option<RepeatedRule>,
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
        (over_ceiling.is_some() || repeated.is_some()).then(|| Self {
            stack: Arc::new(config.stack.clone()),
            over_ceiling,
            repeated,
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
        let verdict = self.stack.verdict(
            &ResultMeasures::from_bytes(bytes),
            source == SizeSource::Derived,
        );
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

impl ResultObserver for Rules {
    fn observe(&mut self, key: &SeriesKey, record: &ToolRecord, now_unix: u64) {
        if self.tx.is_none() {
            return;
        }
        for m in self.evaluate(key, record, now_unix) {
            if let Some(tx) = &self.tx {
                if tx.try_send(m).is_err() {
                    self.stats.event_dropped();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::recognize::{ArgsHash, Emitter};

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
        assert!(Rules::from_config(&config).is_none(), "every rule off");
    }
}
