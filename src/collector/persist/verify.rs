//! The invariants a snapshot's numbers keep, checked at restore before anything is restored.
//!
//! The checksum of version 3 catches a damaged file; these catch what it cannot: a file of an
//! earlier version (no checksum), or one edited by hand and written back with a matching
//! checksum. Every series keeps, for its total and for each window slot: results of known size
//! and latencies recorded at most the calls (spans) counted, errors, truncations and unknown
//! sizes at most the calls; its classic bucket counts sum to the calls its histograms hold; a
//! slot holds at most the calls since start; each tool's context ledger totals keep theirs
//! ([`context`]). A snapshot that breaks one is refused whole, with
//! the series and the numbers in the reason: restoring part of a damaged file would serve
//! quantiles nobody can trust. The check is linear in the file's buckets and allocates nothing.

use super::format::{Hist, Snapshot, Stats, ToolContext};
use crate::collector::state::context::{SHARE_BOUNDS, SHARE_RECENT};

/// An invariant a snapshot breaks, and where.
#[derive(Debug, thiserror::Error)]
#[error("series (service {service:?}, tool {tool:?}), {period}: {what}")]
pub(crate) struct Violation {
    /// The series' service.
    service: String,
    /// The series' tool.
    tool: String,
    /// `total`, or which window slot.
    period: String,
    /// The numbers that disagree.
    what: String,
}

/// Values a histogram holds (the sum of its buckets' counts).
fn held(h: &Hist) -> u64 {
    h.buckets
        .iter()
        .fold(0u64, |n, &(_, c)| n.saturating_add(c))
}

/// The invariants of one period's statistics, as "what" of a [`Violation`].
fn stats(st: &Stats) -> Result<(), String> {
    let c = &st.counts;
    let (sized, timed) = (held(&st.size), held(&st.latency));
    for (name, n) in [
        ("results of known size", sized),
        ("latencies", timed),
        ("errors", c.errors),
        ("truncated", c.truncated),
        ("truncated upstream", c.truncated_upstream),
        ("of unknown size", c.unknown_size),
    ] {
        if n > c.calls {
            return Err(format!("{n} {name} of {} calls", c.calls));
        }
    }
    Ok(())
}

/// The invariants of one tool's context totals (version 4), as "what" of a [`Violation`]:
/// estimated results at most the results, the share layout of this build, shares observed at
/// most the requests that carried the tool, recent shares at most those observed and the
/// ring's length, every share finite and not negative.
fn context(t: &ToolContext) -> Result<(), String> {
    let observed = t
        .share_buckets
        .iter()
        .fold(0u64, |n, &c| n.saturating_add(c));
    if t.estimated > t.results {
        return Err(format!(
            "{} estimated of {} results",
            t.estimated, t.results
        ));
    }
    if t.share_buckets.len() != SHARE_BOUNDS.len() + 1 {
        return Err(format!(
            "{} share buckets, not {}",
            t.share_buckets.len(),
            SHARE_BOUNDS.len() + 1
        ));
    }
    if observed > t.requests {
        return Err(format!("{observed} shares of {} requests", t.requests));
    }
    if t.recent.len() as u64 > observed || t.recent.len() > SHARE_RECENT {
        return Err(format!("{} recent shares of {observed}", t.recent.len()));
    }
    let bad = |x: f64| !x.is_finite() || x < 0.0;
    if bad(t.share_sum) || t.recent.iter().any(|&x| bad(f64::from(x))) {
        return Err("a share that is not a finite non-negative number".into());
    }
    Ok(())
}

/// Checks every invariant of `s`.
pub(crate) fn check(s: &Snapshot) -> Result<(), Violation> {
    for t in &s.context.tools {
        context(t).map_err(|what| Violation {
            service: t.service.clone(),
            tool: t.tool.clone(),
            period: "context ledger".into(),
            what,
        })?;
    }
    for series in &s.series {
        let at = |period: String, what: String| Violation {
            service: series.service.clone(),
            tool: series.tool.clone(),
            period,
            what,
        };
        let total = &series.total;
        stats(total).map_err(|w| at("total".into(), w))?;
        for ring in &series.windows {
            for (slot, st) in &ring.slots {
                let period = || format!("slot {slot} of the {} s slots", ring.slot_secs);
                stats(st).map_err(|w| at(period(), w))?;
                if st.counts.calls > total.counts.calls {
                    return Err(at(
                        period(),
                        format!(
                            "{} calls, more than the {} since start",
                            st.counts.calls, total.counts.calls
                        ),
                    ));
                }
            }
        }
        for (name, buckets, hist) in [
            ("size", &series.size_buckets, &total.size),
            ("latency", &series.latency_buckets, &total.latency),
        ] {
            let (counted, held) = (
                buckets.iter().fold(0u64, |n, &c| n.saturating_add(c)),
                held(hist),
            );
            if counted != held {
                return Err(at(
                    "total".into(),
                    format!(
                        "the {name} buckets count {counted} results, its histogram holds {held}"
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::persist::migrate;

    const V1: &str = include_str!("../../../tests/data/snapshots/v1.json");

    fn v1() -> Snapshot {
        migrate::read(V1.as_bytes()).unwrap()
    }

    #[test]
    fn a_consistent_snapshot_passes() {
        check(&v1()).unwrap();
    }

    #[test]
    fn context_totals_that_contradict_themselves_are_refused() {
        let tool = ToolContext {
            service: "agent".into(),
            tool: "Read".into(),
            results: 2,
            result_tokens: 10,
            estimated: 2,
            cost: 30,
            requests: 3,
            share_buckets: vec![0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0],
            share_sum: 1.5,
            recent: vec![0.4, 0.5, 0.6],
        };
        let mut s = v1();
        s.context.tools.push(tool.clone());
        check(&s).unwrap();
        for (broken, says) in [
            (
                ToolContext {
                    estimated: 3,
                    ..tool.clone()
                },
                "3 estimated of 2 results",
            ),
            (
                ToolContext {
                    requests: 2,
                    ..tool.clone()
                },
                "3 shares of 2 requests",
            ),
            (
                ToolContext {
                    share_buckets: vec![3],
                    ..tool.clone()
                },
                "1 share buckets",
            ),
            (
                ToolContext {
                    recent: vec![0.1; 4],
                    ..tool.clone()
                },
                "4 recent shares of 3",
            ),
            (
                ToolContext {
                    share_sum: f64::NAN,
                    ..tool.clone()
                },
                "not a finite",
            ),
        ] {
            s.context.tools[0] = broken;
            let e = check(&s).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains("context ledger"), "{e}");
        }
    }

    #[test]
    fn a_bucket_count_raised_is_refused_with_the_series_and_the_numbers() {
        let mut s = v1();
        let series = s.series.iter_mut().find(|s| s.tool == "search").unwrap();
        let calls = series.total.counts.calls;
        // One digit more in a size bucket's count: more sized results than calls.
        series.total.size.buckets[0].1 += 10;
        let e = check(&s).unwrap_err().to_string();
        assert!(e.contains("tool \"search\""), "{e}");
        assert!(e.contains("total"), "{e}");
        assert!(e.contains(&format!("of {calls} calls")), "{e}");
    }

    #[test]
    fn classic_buckets_that_disagree_with_the_histogram_are_refused() {
        let mut s = v1();
        let series = s.series.iter_mut().find(|s| s.tool == "search").unwrap();
        let last = series.latency_buckets.len() - 1;
        series.latency_buckets[last] += 1;
        let e = check(&s).unwrap_err().to_string();
        assert!(e.contains("the latency buckets count"), "{e}");
    }

    #[test]
    fn a_slot_with_more_calls_than_since_start_is_refused() {
        let mut s = v1();
        let series = s
            .series
            .iter_mut()
            .find(|s| s.windows.iter().any(|r| !r.slots.is_empty()))
            .unwrap();
        let total = series.total.counts.calls;
        let ring = series
            .windows
            .iter_mut()
            .find(|r| !r.slots.is_empty())
            .unwrap();
        ring.slots[0].1.counts.calls = total + 1;
        let e = check(&s).unwrap_err().to_string();
        assert!(e.contains("more than the"), "{e}");
    }
}
