//! The on-disk form of the aggregator's [`State`]: what a snapshot holds, how it is written and
//! how it is restored.
//!
//! The format is JSON with a version ([`SNAPSHOT_VERSION`]); a file of another version, or one
//! that does not parse, is refused and moved aside by [`crate::collector::persist::store`]. Restoring into a state
//! whose limits changed keeps what still fits: windows whose length changed start empty, bucket
//! layouts that changed are rebuilt from the HDR histograms, series past `max_series` are merged
//! into the overflow series. Firing alerts travel in the snapshot so a restart neither re-pages
//! nor forgets them.

use serde::{Deserialize, Serialize};

use crate::collector::alerts::SavedAlert;
use crate::collector::ingest::recognize::ArgsHash;
use crate::collector::state::histogram::{
    Hist, HistSnapshot, LATENCY_SIGFIG, MAX_BYTES, MAX_LATENCY_US, SIGFIG,
};
use crate::collector::state::{
    ArgsStat, Counts, Largest, OverCeiling, OverRecent, Point, SeriesKey, State, Stats,
    LATENCY_BUCKETS_US, OVERFLOW, OVER_CEILING_RECENT,
};

/// The bucket layout of snapshots written before they recorded theirs.
const LEGACY_SIZE_BUCKETS: &[u64] = &[
    256, 1024, 4096, 8000, 10_000, 16_384, 20_000, 25_000, 32_768, 65_536, 131_072, 262_144,
    1_048_576, 4_194_304, 16_777_216,
];

/// Serialized [`Stats`]: the counters inline (as the format always had them), the
/// histograms as their non-empty buckets.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StatsSnap {
    #[serde(flatten)]
    counts: Counts,
    size: HistSnapshot,
    latency: HistSnapshot,
}

impl From<&Stats> for StatsSnap {
    fn from(s: &Stats) -> Self {
        Self {
            counts: s.counts,
            size: s.size.to_snapshot(),
            latency: s.latency.to_snapshot(),
        }
    }
}

impl From<&StatsSnap> for Stats {
    fn from(s: &StatsSnap) -> Self {
        Self {
            counts: s.counts,
            size: Hist::from_snapshot(&s.size, MAX_BYTES, SIGFIG),
            latency: Hist::from_snapshot(&s.latency, MAX_LATENCY_US, LATENCY_SIGFIG),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct RingSnap {
    slot_secs: u64,
    slots: Vec<(u64, StatsSnap)>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SeriesSnap {
    key: SeriesKey,
    total: StatsSnap,
    windows: Vec<RingSnap>,
    size_buckets: Vec<u64>,
    latency_buckets: Vec<u64>,
    size_sum: u64,
    latency_sum_us: u64,
    largest: Vec<Largest>,
    args: Vec<(String, ArgsStat)>,
    #[serde(default)]
    over_ceiling: Vec<(String, u64)>,
    #[serde(default)]
    over_recent: Vec<OverCeiling>,
    #[serde(default)]
    history: Vec<Point>,
}

/// The on-disk form of [`State`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Snapshot {
    /// Format version.
    pub(crate) version: u32,
    /// When it was written, Unix seconds.
    pub(crate) written_unix: u64,
    /// When the state started.
    pub(crate) started_unix: u64,
    /// Records routed to the overflow series.
    pub(crate) overflow_records: u64,
    /// Upper bounds of the size buckets (absent in older snapshots: [`SIZE_BUCKETS`]).
    #[serde(default)]
    size_bounds: Option<Vec<u64>>,
    series: Vec<SeriesSnap>,
    /// Firing alerts (absent in older snapshots: none).
    #[serde(default)]
    alerts: Vec<SavedAlert>,
}

/// The snapshot format version this build writes and reads.
pub(crate) const SNAPSHOT_VERSION: u32 = 1;

impl State {
    /// A snapshot of the whole state, with the alerts firing now.
    pub(crate) fn snapshot(&self, now: u64, alerts: Vec<SavedAlert>) -> Snapshot {
        Snapshot {
            version: SNAPSHOT_VERSION,
            written_unix: now,
            started_unix: self.started_unix,
            overflow_records: self.overflow_records,
            size_bounds: Some(self.limits.size_bounds.to_vec()),
            series: self
                .series
                .iter()
                .map(|(k, s)| SeriesSnap {
                    key: k.clone(),
                    total: (&s.total).into(),
                    windows: s
                        .windows
                        .iter()
                        .map(|r| RingSnap {
                            slot_secs: r.slot_secs,
                            slots: r.slots.iter().map(|(i, st)| (*i, st.into())).collect(),
                        })
                        .collect(),
                    size_buckets: s.size_buckets.clone(),
                    latency_buckets: s.latency_buckets.clone(),
                    size_sum: s.size_sum,
                    latency_sum_us: s.latency_sum_us,
                    largest: s.largest.clone(),
                    args: s
                        .args
                        .iter()
                        .map(|(h, a)| (h.to_string(), a.clone()))
                        .collect(),
                    over_ceiling: s.over_ceiling.clone(),
                    over_recent: s
                        .over_recent
                        .iter()
                        .filter_map(|o| o.view(&self.limits.stacks.all))
                        .collect(),
                    history: s.history.iter().copied().collect(),
                })
                .collect(),
            alerts,
        }
    }

    /// Restores a snapshot into an empty state and returns the alerts that were firing. Windows
    /// whose length changed since the snapshot start empty; bucket layouts that changed are
    /// rebuilt from the HDR histograms.
    pub(crate) fn restore(&mut self, snap: Snapshot) -> Result<Vec<SavedAlert>, String> {
        if snap.version != SNAPSHOT_VERSION {
            return Err(format!(
                "snapshot version {} (this build reads {SNAPSHOT_VERSION})",
                snap.version
            ));
        }
        let snap_alerts = snap.alerts;
        self.started_unix = snap.started_unix;
        self.overflow_records = snap.overflow_records;

        // `max_series` may have been lowered since the snapshot was written: the busiest series
        // are restored as they were, the rest merged into the overflow series (and logged).
        let mut series = snap.series;
        series.sort_by(|a, b| {
            let overflow = |k: &SeriesKey| k.service == OVERFLOW && k.tool == OVERFLOW;
            overflow(&b.key)
                .cmp(&overflow(&a.key))
                .then(b.total.counts.calls.cmp(&a.total.counts.calls))
        });
        let has_overflow = series
            .first()
            .is_some_and(|s| s.key.service == OVERFLOW && s.key.tool == OVERFLOW);
        // Room for the overflow series itself when anything must be merged into it.
        let keep = if series.len() > self.limits.max_series {
            self.limits
                .max_series
                .saturating_sub(usize::from(!has_overflow))
                .max(1)
        } else {
            series.len()
        };
        let same_bounds = match &snap.size_bounds {
            Some(b) => b[..] == self.limits.size_bounds[..],
            None => LEGACY_SIZE_BUCKETS == &self.limits.size_bounds[..],
        };
        let mut merged = 0usize;
        let mut merged_calls = 0u64;
        for (n, ss) in series.into_iter().enumerate() {
            let mut s = self.new_series();
            s.total = (&ss.total).into();
            for (ring, rs) in s.windows.iter_mut().zip(&ss.windows) {
                if ring.slot_secs == rs.slot_secs {
                    ring.slots = rs.slots.iter().map(|(i, st)| (*i, st.into())).collect();
                }
            }
            if same_bounds && ss.size_buckets.len() == s.size_buckets.len() {
                s.size_buckets = ss.size_buckets;
            } else {
                // The layout changed (another stack, or an older version): rebuild the counts
                // from the since-start HDR histogram rather than start them at zero.
                s.size_buckets = s.total.size.bucket_counts(&self.limits.size_bounds);
            }
            if ss.latency_buckets.len() == s.latency_buckets.len() {
                s.latency_buckets = ss.latency_buckets;
            } else {
                // As for sizes: counts that agree with the histogram (the protobuf exposition
                // sends both, and Prometheus refuses a native histogram holding more than its count).
                s.latency_buckets = s.total.latency.bucket_counts(LATENCY_BUCKETS_US);
            }
            s.size_sum = ss.size_sum;
            s.latency_sum_us = ss.latency_sum_us;
            s.largest = ss.largest;
            s.args = ss
                .args
                .into_iter()
                .map(|(h, a)| (ArgsHash::new(&h), a))
                .collect();
            s.over_ceiling = ss.over_ceiling;
            s.over_recent = ss
                .over_recent
                .iter()
                .filter_map(|o| OverRecent::from_view(o, &self.limits.stacks.all))
                .collect();
            let points = self.limits.history_points();
            s.history = ss.history.iter().copied().collect();
            while s.history.len() > points {
                s.history.pop_front();
            }
            while s.over_recent.len() > OVER_CEILING_RECENT {
                s.over_recent.pop_front();
            }
            if n < keep {
                s.profile = self.limits.stacks.profile(&ss.key.service, &ss.key.tool);
                self.series.insert(ss.key, s);
                continue;
            }
            merged += 1;
            merged_calls += s.total.counts.calls;
            self.overflow_records += s.total.counts.calls;
            let overflow = SeriesKey {
                service: OVERFLOW.to_string(),
                tool: OVERFLOW.to_string(),
            };
            if !self.series.contains_key(&overflow) {
                let o = self.new_series();
                self.series.insert(overflow.clone(), o);
            }
            let limits = &self.limits;
            if let Some(o) = self.series.get_mut(&overflow) {
                o.merge(s, limits);
            }
        }
        if merged > 0 {
            tracing::warn!(
                merged,
                calls = merged_calls,
                max_series = self.limits.max_series,
                "Snapshot holds more series than max_series; the least used were merged into the overflow series."
            );
        }
        Ok(snap_alerts)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::collector::alerts::tests::m;
    use crate::collector::alerts::{AlertState, Engine};
    use crate::collector::config::Config;
    use crate::collector::state::tests::{known, limits, rec, stacked};
    use crate::collector::state::Limits;

    #[test]
    fn restore_after_max_series_was_lowered_keeps_the_cap() {
        let mut st = State::new(limits(10));
        for (k, tool) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            for _ in 0..=k {
                st.record(&rec(tool, known(100)), 1000);
            }
        }
        let json = serde_json::to_vec(&st.snapshot(1000, Vec::new())).unwrap();
        let mut back = State::new(limits(3));
        back.restore(serde_json::from_slice(&json).unwrap())
            .unwrap();
        assert_eq!(back.series.len(), 3, "at most max_series series");
        let view = back.tools_view(None, None, 1001).unwrap().tools;
        let calls = |t: &str| view.iter().find(|r| r.tool == t).map(|r| r.count);
        // The two busiest kept as they were; a, b and c (1 + 2 + 3 calls) merged.
        assert_eq!(calls("e"), Some(5));
        assert_eq!(calls("d"), Some(4));
        assert_eq!(calls(OVERFLOW), Some(6));
        assert_eq!(back.overflow_records, 6);
        assert_eq!(
            view.iter().map(|r| r.count).sum::<u64>(),
            15,
            "no call lost"
        );
    }

    #[test]
    fn snapshot_round_trip() {
        let mut st = State::new(limits(10));
        for b in [5, 500, 50_000] {
            st.record(&rec("a", known(b)), 1000);
        }
        let json = serde_json::to_vec(&st.snapshot(1000, Vec::new())).unwrap();
        let mut back = State::new(limits(10));
        back.restore(serde_json::from_slice(&json).unwrap())
            .unwrap();
        assert_eq!(
            back.tools_view(None, None, 1001),
            st.tools_view(None, None, 1001)
        );
        assert_eq!(
            back.tools_view(Some("5m"), None, 1001),
            st.tools_view(Some("5m"), None, 1001)
        );
        assert_eq!(
            back.tool_view("a", None, None, 1001),
            st.tool_view("a", None, None, 1001)
        );
    }

    #[test]
    fn over_ceiling_counts_the_weakest_layer_and_survive_a_restore() {
        let mut st = State::new(stacked(1000));
        for b in [50_000, 2000, 10] {
            st.record(&rec("a", known(b)), 1000);
        }
        for n in 0..(OVER_CEILING_RECENT as u64 + 5) {
            st.record(&rec("b", known(5000 + n)), 1000 + n);
        }
        let key = |t: &str| SeriesKey {
            service: "svc".into(),
            tool: t.into(),
        };
        assert_eq!(st.series[&key("a")].over_ceiling, [("default".into(), 2)]);
        let b = &st.series[&key("b")];
        assert_eq!(b.over_recent.len(), OVER_CEILING_RECENT);
        assert_eq!(b.over_recent.back().unwrap().bytes, 5000 + 24);
        let json = serde_json::to_vec(&st.snapshot(2000, Vec::new())).unwrap();
        let mut back = State::new(stacked(1000));
        back.restore(serde_json::from_slice(&json).unwrap())
            .unwrap();
        for t in ["a", "b"] {
            assert_eq!(
                back.tool_view(t, None, None, 2001),
                st.tool_view(t, None, None, 2001)
            );
        }
        assert_eq!(
            back.series[&key("a")].size_buckets,
            st.series[&key("a")].size_buckets
        );
        // Other ceilings: the bucket counts are rebuilt for the new layout from the HDR
        // histogram, the over-ceiling counts kept.
        let mut other = State::new(stacked(3000));
        other
            .restore(serde_json::from_slice(&json).unwrap())
            .unwrap();
        let a = &other.series[&key("a")];
        assert_eq!(a.over_ceiling, [("default".into(), 2)]);
        assert_ne!(other.limits.size_bounds, st.limits.size_bounds);
        let bounds = &other.limits.size_bounds;
        let at = |v: u64| bounds.partition_point(|&b| b < v);
        let mut want = vec![0; bounds.len() + 1];
        for v in [50_000, 2000, 10] {
            want[at(v)] += 1;
        }
        assert_eq!(a.size_buckets, want);
    }

    #[test]
    fn firing_alerts_survive_a_restart_through_the_snapshot() {
        let t0 = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let s = Duration::from_secs;
        let mut e = Engine::default();
        e.on_match(m("a", 300), t0).unwrap();
        e.on_match(m("b", 10), t0 + s(1)).unwrap();
        e.tick(t0 + s(20)); // b resolved: not kept
        let st = State::new(Limits::from_config(&Config::default()));

        let bytes = serde_json::to_vec(&st.snapshot(1_800_000_030, e.saved())).unwrap();
        let mut back = State::new(Limits::from_config(&Config::default()));
        let restored = back
            .restore(serde_json::from_slice(&bytes).unwrap())
            .unwrap();
        assert_eq!(restored, e.saved());
        assert_eq!(restored.len(), 1);

        let mut after = Engine::default();
        let restart = t0 + s(60);
        after.restore(restored, restart);
        let cur = after.current();
        assert_eq!(cur.len(), 1);
        assert_eq!(cur[0].state, AlertState::Firing);
        assert_eq!(cur[0].starts_at, t0, "same episode: no re-page");
        assert_eq!(cur[0].labels["tool"], "a");
        assert!(
            after.on_match(m("a", 300), restart + s(1)).is_none(),
            "deduplicated"
        );
        assert!(after.tick(restart + s(300)).is_empty());
        assert_eq!(
            after.tick(restart + s(301)).len(),
            1,
            "resolves after its quiet period"
        );
    }

    #[test]
    fn older_snapshots_without_alerts_restore_none() {
        let st = State::new(Limits::from_config(&Config::default()));
        let mut v = serde_json::to_value(st.snapshot(1, Vec::new())).unwrap();
        v.as_object_mut().unwrap().remove("alerts");
        let mut back = State::new(Limits::from_config(&Config::default()));
        assert!(back
            .restore(serde_json::from_value(v).unwrap())
            .unwrap()
            .is_empty());
    }
}
