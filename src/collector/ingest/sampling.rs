//! How many calls one tool span stands for: its adjusted count, the inverse of the probability
//! with which its tracer sampled it.
//!
//! A tracer that samples 10 % of its traces (ToolHive's default for MCP traces, any SDK with a
//! ratio sampler) exports one tool span in ten; counted as one call each, the calls, the rates
//! and the over-ceiling counts would be a tenth of what happened, and count-based alert rules
//! would never fire. Each record carries a [`Weight`]: the span's own sampling probability when
//! it says it (the W3C `tracestate` entry `ot=th:<threshold>` of OpenTelemetry's consistent
//! probability sampling, which the SDKs' composite samplers write), else the rate configured
//! for its service (`recognition.sampling_rates`, for tracers that do not say), else 1. The
//! aggregator adds weights to the call counters; the size and latency histograms (quantiles)
//! take each sampled result once, unchanged.

use std::fmt;

use crate::collector::config::ServiceRate;

/// An adjusted count in thousandths of a call (1000 = one call, not sampled). At most
/// [`Weight::MAX`]: a probability below one in a million counts as one in a million.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Weight(u64);

impl Weight {
    /// One call: not sampled, or sampled with probability 1.
    pub(crate) const ONE: Weight = Weight(1000);
    /// The largest adjusted count kept (a million calls per span).
    pub(crate) const MAX: Weight = Weight(1_000_000_000);

    /// The adjusted count of a span sampled with probability `p` (0 < p ≤ 1); `None` otherwise.
    pub(crate) fn of_probability(p: f64) -> Option<Weight> {
        (p > 0.0 && p <= 1.0).then(|| {
            let milli = (1000.0 / p).round();
            Weight((milli as u64).clamp(Self::ONE.0, Self::MAX.0))
        })
    }

    /// Thousandths of a call.
    pub(crate) fn milli(self) -> u64 {
        self.0
    }
}

impl Default for Weight {
    fn default() -> Self {
        Self::ONE
    }
}

impl fmt::Display for Weight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0 as f64 / 1000.0)
    }
}

/// 2^56: the OpenTelemetry sampling threshold is a 56-bit number.
const THRESHOLD_SCALE: f64 = 72_057_594_037_927_936.0;

/// The sampling probability a W3C `tracestate` header value states, from its `ot` entry's
/// rejection threshold `th` (1 to 14 hex digits, trailing zeros omitted: `th:0` is probability
/// 1, `th:8` one half, `th:e666…` about 0.1). `None` when it says nothing usable.
pub(crate) fn tracestate_probability(tracestate: &str) -> Option<f64> {
    let ot = tracestate
        .split(',')
        .find_map(|m| m.trim().strip_prefix("ot="))?;
    let th = ot.split(';').find_map(|f| f.strip_prefix("th:"))?;
    if th.is_empty() || th.len() > 14 || !th.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let padded = format!("{th:0<14}");
    let t = u64::from_str_radix(&padded, 16).ok()?;
    let p = (THRESHOLD_SCALE - t as f64) / THRESHOLD_SCALE;
    (p > 0.0).then_some(p)
}

/// The weights of the configured services, and the rule that picks a span's.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sampling {
    rates: Vec<(String, Weight)>,
}

impl Sampling {
    pub(crate) fn new(rates: &[ServiceRate]) -> Self {
        Self {
            rates: rates
                .iter()
                .filter_map(|r| Some((r.service.clone(), Weight::of_probability(r.rate)?)))
                .collect(),
        }
    }

    /// The configured weight of `service` (1 when none is configured).
    pub(crate) fn of_service(&self, service: &str) -> Weight {
        self.rates
            .iter()
            .find(|(s, _)| s == service)
            .map_or(Weight::ONE, |(_, w)| *w)
    }

    /// The weight of a span of `service` with `tracestate`: the probability the span states,
    /// else the service's configured rate.
    pub(crate) fn of_span(&self, service: &str, tracestate: &str) -> Weight {
        if tracestate.is_empty() {
            return self.of_service(service);
        }
        tracestate_probability(tracestate)
            .and_then(Weight::of_probability)
            .unwrap_or_else(|| self.of_service(service))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_give_probabilities() {
        let p = |s| tracestate_probability(s);
        assert_eq!(p("ot=th:0"), Some(1.0));
        assert_eq!(p("ot=th:8"), Some(0.5));
        assert_eq!(p("ot=th:c"), Some(0.25));
        // What the Python SDK's composable_traceid_ratio_based(0.1) writes.
        let tenth = p("ot=th:e6666666666666;rv:0123456789abcd").unwrap();
        assert!((tenth - 0.1).abs() < 1e-12, "{tenth}");
        assert_eq!(p("vendor=x,ot=rv:abc;th:8"), Some(0.5));
        for bad in [
            "",
            "ot=rv:12",
            "ot=th:",
            "ot=th:xyz",
            "ot=th:123456789abcdef",
            "other=th:8",
        ] {
            assert_eq!(p(bad), None, "{bad:?}");
        }
        assert_eq!(Weight::of_probability(0.1), Some(Weight(10_000)));
        assert_eq!(Weight::of_probability(1.0), Some(Weight::ONE));
        assert_eq!(Weight::of_probability(1e-12), Some(Weight::MAX));
        assert_eq!(Weight::of_probability(0.0), None);
    }

    #[test]
    fn a_span_that_says_wins_over_the_configured_rate() {
        let s = Sampling::new(&["toolhive=0.1".parse().unwrap()]);
        assert_eq!(s.of_span("toolhive", ""), Weight(10_000));
        assert_eq!(s.of_span("toolhive", "ot=th:8"), Weight(2000));
        assert_eq!(s.of_span("toolhive", "ot=th:zz"), Weight(10_000));
        assert_eq!(s.of_span("other", ""), Weight::ONE);
        assert_eq!(s.of_span("other", "ot=th:0"), Weight::ONE);
        for bad in ["toolhive", "=0.1", "a=0", "a=1.5", "a=x"] {
            assert!(bad.parse::<ServiceRate>().is_err(), "{bad}");
        }
        let r: ServiceRate = "my=svc=0.5".parse().unwrap();
        assert_eq!((r.service.as_str(), r.rate), ("my=svc", 0.5));
    }
}
