//! The aggregator's [`State`] to and from the snapshot's format types ([`format`]): what a
//! snapshot holds of it and how it is restored.
//!
//! The file is JSON of [`format::Snapshot`]; older versions are migrated on reading
//! ([`crate::collector::persist::migrate`]), a file that cannot be read is moved aside by
//! [`crate::collector::persist::store`] with the reason. Restoring into a state
//! whose limits changed keeps what still fits: windows whose length changed start empty, bucket
//! layouts that changed are rebuilt from the HDR histograms, series past `max_series` are merged
//! into the overflow series. Firing alerts travel in the snapshot so a restart neither re-pages
//! nor forgets them.

use std::sync::Arc;

use crate::collector::alerts::SavedAlert;
use crate::collector::ingest::recognize::ArgsHash;
use crate::collector::persist::format;
use crate::collector::state::histogram::{
    Hist, HistSnapshot, LATENCY_SIGFIG, MAX_BYTES, MAX_LATENCY_US, SIGFIG,
};
use crate::collector::state::top_args::TopArgs;
use crate::collector::state::{
    ArgsStat, Largest, OverRecent, ResultId, Series, SeriesKey, SeriesMap, State, Stats,
    LATENCY_BUCKETS_US, OVERFLOW, OVER_CEILING_RECENT,
};
use crate::layers::Stack;

fn hist_out(h: &Hist) -> format::Hist {
    let s = h.to_snapshot();
    format::Hist {
        ceiling: s.ceiling,
        clamped: s.clamped,
        max_seen: s.max_seen,
        buckets: s.buckets,
    }
}

fn hist_in(h: format::Hist, ceiling: u64, sigfig: u8) -> Hist {
    let s = HistSnapshot {
        ceiling: h.ceiling,
        clamped: h.clamped,
        max_seen: h.max_seen,
        buckets: h.buckets,
    };
    Hist::from_snapshot(&s, ceiling, sigfig)
}

fn stats_out(s: &Stats) -> format::Stats {
    format::Stats {
        counts: s.counts,
        size: hist_out(&s.size),
        latency: hist_out(&s.latency),
    }
}

fn stats_in(s: format::Stats) -> Stats {
    Stats {
        counts: s.counts,
        size: hist_in(s.size, MAX_BYTES, SIGFIG),
        latency: hist_in(s.latency, MAX_LATENCY_US, LATENCY_SIGFIG),
    }
}

fn largest_out(l: &Largest) -> format::Largest {
    format::Largest {
        bytes: l.bytes,
        result: l.result.hex(),
        truncated_upstream: l.truncated_upstream,
        cut_by: l.cut_by.clone(),
        original: l.original,
    }
}

/// A series' top arguments as the snapshot writes them.
pub(crate) fn args_out(args: &TopArgs) -> Vec<format::Args> {
    args.iter()
        .map(|(h, a)| format::Args {
            hash: h.to_string(),
            count: a.count,
            max_bytes: a.max_bytes,
        })
        .collect()
}

/// A series' top arguments as the snapshot wrote them.
pub(crate) fn args_in(args: Vec<format::Args>) -> TopArgs {
    args.into_iter()
        .map(|a| {
            let stat = ArgsStat {
                count: a.count,
                max_bytes: a.max_bytes,
            };
            (ArgsHash::new(&a.hash), stat)
        })
        .collect()
}

/// Back into binary ids: `None` when the ids are not hex of the right length (as
/// [`over_in`]; every snapshot the daemon writes has them so).
fn largest_in(l: format::Largest) -> Option<Largest> {
    Some(Largest {
        bytes: l.bytes,
        result: ResultId::from_hex(&l.result)?,
        truncated_upstream: l.truncated_upstream,
        cut_by: l.cut_by,
        original: l.original,
    })
}

fn over_out(o: &OverRecent, stack: &Stack) -> Option<format::Over> {
    Some(format::Over {
        bytes: o.bytes,
        layer: stack.layers().get(usize::from(o.layer))?.id().to_string(),
        limit: o.limit,
        value: o.value,
        estimated: o.estimated,
        result: o.result.hex(),
    })
}

/// Back into the stack of this run: `None` when it no longer has the layer, or the ids are not
/// hex of the right length.
fn over_in(o: &format::Over, stack: &Stack) -> Option<OverRecent> {
    let layer = stack.layers().iter().position(|l| l.id() == o.layer)?;
    Some(OverRecent {
        bytes: o.bytes,
        layer: u16::try_from(layer).ok()?,
        limit: o.limit,
        value: o.value,
        estimated: o.estimated,
        result: ResultId::from_hex(&o.result)?,
    })
}

fn alert_out(a: SavedAlert) -> format::Alert {
    format::Alert {
        labels: a.labels,
        annotations: a.annotations,
        starts_at_unix_ms: a.starts_at_unix_ms,
        quiet_period_ms: a.quiet_period_ms,
    }
}

fn alert_in(a: format::Alert) -> SavedAlert {
    SavedAlert {
        labels: a.labels,
        annotations: a.annotations,
        starts_at_unix_ms: a.starts_at_unix_ms,
        quiet_period_ms: a.quiet_period_ms,
    }
}

/// What [`State::snapshot_costs`] measured. Not for use.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct SnapshotCosts {
    /// Build and encode on the state's own task (the aggregator's pause before captures).
    pub build_in_place: std::time::Duration,
    /// The capture (the aggregator's pause now).
    pub capture: std::time::Duration,
    /// Build and encode from the capture (on a blocking thread).
    pub build_from_capture: std::time::Duration,
    /// The file's size.
    pub bytes: usize,
}

/// What a snapshot is made of, borrowed from the state or from a [`Capture`] of it.
struct Parts<'a> {
    started_unix: u64,
    overflow_records: u64,
    size_bounds: &'a [u64],
    stack: &'a Stack,
    series: &'a SeriesMap,
    wal_seq: Option<u64>,
    context: format::Context,
}

/// The file's types of `p` at `now`, with `alerts`.
fn snapshot_of(p: Parts<'_>, now: u64, alerts: Vec<SavedAlert>) -> format::Snapshot {
    format::Snapshot {
        version: format::VERSION,
        wal_seq: p.wal_seq,
        context: p.context,
        written_unix: now,
        started_unix: p.started_unix,
        overflow_records: p.overflow_records,
        size_bounds: p.size_bounds.to_vec(),
        series: p
            .series
            .iter()
            .map(|(k, s)| format::Series {
                service: k.service.clone(),
                tool: k.tool.clone(),
                // Every period whole, the histograms not yet folded included.
                total: stats_out(&s.total_stats()),
                windows: s
                    .windows
                    .iter()
                    .enumerate()
                    .map(|(w, r)| format::Ring {
                        slot_secs: r.slot_secs,
                        slots: r
                            .slots
                            .iter()
                            .map(|(j, st)| (*j, stats_out(&s.slot_whole(w, *j, st))))
                            .collect(),
                    })
                    .collect(),
                size_buckets: s.size_buckets.clone(),
                latency_buckets: s.latency_buckets.clone(),
                size_sum: s.size_sum,
                latency_sum_us: s.latency_sum_us,
                largest: s.largest.iter().map(largest_out).collect(),
                args: args_out(&s.args),
                over_ceiling: s
                    .over_ceiling
                    .iter()
                    .map(|(layer, milli)| format::LayerCount {
                        layer: layer.clone(),
                        count_milli: *milli,
                    })
                    .collect(),
                over_recent: s
                    .over_recent
                    .iter()
                    .filter_map(|o| over_out(o, p.stack))
                    .collect(),
                history: s.history.iter().copied().collect(),
            })
            .collect(),
        alerts: alerts.into_iter().map(alert_out).collect(),
    }
}

/// What a snapshot needs of the state, copied on the aggregator: the series as they are (their
/// histograms' counts copied whole, no walk over their buckets) and a few numbers. The file's
/// types are built from it and encoded on a blocking thread ([`Capture::snapshot`]), so the
/// aggregator pauses only for the copy.
#[derive(Debug)]
pub(crate) struct Capture {
    started_unix: u64,
    overflow_records: u64,
    size_bounds: Vec<u64>,
    stack: Arc<Stack>,
    series: SeriesMap,
    wal_seq: Option<u64>,
    /// The context ledger's totals (at most `aggregation.max_series` tools of about 1.2 KiB).
    context: format::Context,
}

impl Capture {
    /// The highest write-ahead log sequence the capture holds, if the log is on.
    pub(crate) fn wal_seq(&self) -> Option<u64> {
        self.wal_seq
    }

    /// The snapshot of the state as it was when captured, written at `now`.
    pub(crate) fn snapshot(&self, now: u64, alerts: Vec<SavedAlert>) -> format::Snapshot {
        snapshot_of(
            Parts {
                started_unix: self.started_unix,
                overflow_records: self.overflow_records,
                size_bounds: &self.size_bounds,
                stack: &self.stack,
                series: &self.series,
                wal_seq: self.wal_seq,
                context: self.context.clone(),
            },
            now,
            alerts,
        )
    }
}

impl State {
    fn parts(&self) -> Parts<'_> {
        Parts {
            started_unix: self.started_unix,
            overflow_records: self.overflow_records,
            size_bounds: &self.limits.size_bounds,
            stack: &self.limits.stacks.all,
            series: &self.series,
            wal_seq: self.wal_seq,
            context: self.context.to_disk(),
        }
    }

    /// A snapshot of the whole state, with the alerts firing now.
    pub(crate) fn snapshot(&self, now: u64, alerts: Vec<SavedAlert>) -> format::Snapshot {
        snapshot_of(self.parts(), now, alerts)
    }

    /// What a snapshot of this state costs, for `benches/snapshot.rs`: the time to build and
    /// encode it in place (what the aggregator paused for when it did that itself), the time
    /// to [`State::capture`] it (what it pauses for now), the time to build and encode from the
    /// capture (now on a blocking thread), and the file's bytes. Not for use.
    #[doc(hidden)]
    pub fn snapshot_costs(&self) -> SnapshotCosts {
        let now = crate::collector::state::now_unix();
        let t = std::time::Instant::now();
        let in_place = format::encode(&self.snapshot(now, Vec::new())).map_or(0, |b| b.len());
        let build_in_place = t.elapsed();
        let t = std::time::Instant::now();
        let capture = self.capture();
        let capture_time = t.elapsed();
        let t = std::time::Instant::now();
        let bytes = format::encode(&capture.snapshot(now, Vec::new())).map_or(0, |b| b.len());
        let build_from_capture = t.elapsed();
        debug_assert_eq!(bytes, in_place);
        SnapshotCosts {
            build_in_place,
            capture: capture_time,
            build_from_capture,
            bytes,
        }
    }

    /// A copy of what a snapshot needs ([`Capture`]).
    pub(crate) fn capture(&self) -> Capture {
        Capture {
            started_unix: self.started_unix,
            overflow_records: self.overflow_records,
            size_bounds: self.limits.size_bounds.to_vec(),
            stack: self.limits.stacks.all.clone(),
            series: self.series.clone(),
            wal_seq: self.wal_seq,
            context: self.context.to_disk(),
        }
    }

    /// One series of a snapshot as the live state holds it (its key taken out): histograms and
    /// rings as they were, the bucket counts rebuilt when their layout changed since.
    fn series_in(&mut self, ss: format::Series, same_bounds: bool) -> Series {
        let mut s = self.new_series();
        s.total = stats_in(ss.total);
        for (ring, rs) in s.windows.iter_mut().zip(ss.windows) {
            if ring.slot_secs == rs.slot_secs {
                ring.slots = rs
                    .slots
                    .into_iter()
                    .map(|(i, st)| (i, stats_in(st)))
                    .collect();
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
        s.largest = ss.largest.into_iter().filter_map(largest_in).collect();
        s.largest_pruned_at = 0;
        s.args = args_in(ss.args);
        s.over_ceiling = ss
            .over_ceiling
            .into_iter()
            .map(|c| (c.layer, c.count_milli))
            .collect();
        s.over_recent = ss
            .over_recent
            .iter()
            .filter_map(|o| over_in(o, &self.limits.stacks.all))
            .collect();
        let points = self.limits.history_points();
        s.history = ss.history.iter().copied().collect();
        while s.history.len() > points {
            s.history.pop_front();
        }
        while s.over_recent.len() > OVER_CEILING_RECENT {
            s.over_recent.pop_front();
        }
        s
    }

    /// Restores a snapshot (of the current format: [`super::migrate::read`] brings older ones
    /// to it) into an empty state and returns the alerts that were firing. Windows whose length
    /// changed since the snapshot start empty; bucket layouts that changed are rebuilt from the
    /// HDR histograms.
    pub(crate) fn restore(&mut self, snap: format::Snapshot) -> Vec<SavedAlert> {
        let snap_alerts: Vec<SavedAlert> = snap.alerts.into_iter().map(alert_in).collect();
        self.started_unix = snap.started_unix;
        self.overflow_records = snap.overflow_records;
        self.wal_seq = snap.wal_seq;
        let left_out = self.context.restore(snap.context);
        if left_out > 0 {
            tracing::warn!(
                tools = left_out,
                "The snapshot's context ledger has more tools than aggregation.max_series \
                 allows now; their totals were not restored."
            );
        }

        // `max_series` may have been lowered since the snapshot was written: the busiest series
        // are restored as they were, the rest merged into the overflow series (and logged).
        let mut series = snap.series;
        let overflow = |s: &format::Series| s.service == OVERFLOW && s.tool == OVERFLOW;
        series.sort_by(|a, b| {
            overflow(b)
                .cmp(&overflow(a))
                .then(b.total.counts.calls.cmp(&a.total.counts.calls))
        });
        let has_overflow = series.first().is_some_and(overflow);
        // Room for the overflow series itself when anything must be merged into it.
        let keep = if series.len() > self.limits.max_series {
            self.limits
                .max_series
                .saturating_sub(usize::from(!has_overflow))
                .max(1)
        } else {
            series.len()
        };
        let same_bounds = snap.size_bounds[..] == self.limits.size_bounds[..];
        let mut merged = 0usize;
        let mut merged_calls = 0u64;
        for (n, mut ss) in series.into_iter().enumerate() {
            let key = SeriesKey {
                service: std::mem::take(&mut ss.service),
                tool: std::mem::take(&mut ss.tool),
            };
            let mut s = self.series_in(ss, same_bounds);
            if n < keep {
                s.profile = self.limits.stacks.profile(&key.service, &key.tool);
                self.series.insert(key, s);
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
        for s in self.series.values_mut() {
            s.unfold_restored();
        }
        snap_alerts
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
        back.restore(serde_json::from_slice(&json).unwrap());
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
        back.restore(serde_json::from_slice(&json).unwrap());
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

    /// The largest results are kept with binary ids; the API's JSON of them and the snapshot's
    /// are byte for byte those of the entries as they were kept before, with hex strings made
    /// by `ResultId::hex` on insertion, and a restore writes them back the same.
    #[test]
    fn largest_results_answer_and_persist_the_json_of_their_hex_form() {
        use crate::collector::state::ResultRef;

        /// An entry as the list kept it before: the ids in hex, the API's serde form.
        #[derive(serde::Serialize)]
        struct HexLargest {
            bytes: u64,
            #[serde(flatten)]
            result: ResultRef,
            truncated_upstream: bool,
            #[serde(skip_serializing_if = "Option::is_none")]
            cut_by: Option<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            original: Option<u64>,
        }

        let now = 1_700_000_000;
        let mut st = State::new(limits(10));
        let mut hex = Vec::new();
        for (i, b) in [300u64, 70_000, 5, 9_000].into_iter().enumerate() {
            let k = u8::try_from(i).unwrap();
            let mut r = rec("fetch", known(b));
            r.trace_id = std::array::from_fn(|j| 0x0f * k + u8::try_from(j).unwrap());
            r.span_id = [0xa0 + k; 8];
            if k == 1 {
                r.args_hash = None;
                r.truncated_upstream = true;
                r.upstream.layer = Some("claude-code-mcp-output");
                r.upstream.original = Some(90_000);
            }
            st.record(&r, now);
            hex.push(HexLargest {
                bytes: b,
                result: ResultId::of(&r, now).hex(),
                truncated_upstream: r.truncated_upstream,
                cut_by: r.upstream.layer.map(str::to_string),
                original: r.upstream.original,
            });
        }
        hex.sort_by_key(|l| std::cmp::Reverse(l.bytes));
        hex.truncate(st.limits.largest_results);
        let api = |st: &State| {
            let v = st.tool_view("fetch", None, None, now + 1).unwrap().unwrap();
            serde_json::to_string(&v.series[0].largest).unwrap()
        };
        assert_eq!(api(&st), serde_json::to_string(&hex).unwrap());
        assert!(api(&st).contains(r#""args_hash":null"#), "{}", api(&st));
        let persisted = |st: &State| {
            let snap = st.snapshot(now + 1, Vec::new());
            serde_json::to_string(&snap.series[0].largest).unwrap()
        };
        let hex_persisted: Vec<format::Largest> = hex
            .iter()
            .map(|l| format::Largest {
                bytes: l.bytes,
                result: l.result.clone(),
                truncated_upstream: l.truncated_upstream,
                cut_by: l.cut_by.clone(),
                original: l.original,
            })
            .collect();
        assert_eq!(
            persisted(&st),
            serde_json::to_string(&hex_persisted).unwrap()
        );
        let json = serde_json::to_vec(&st.snapshot(now + 1, Vec::new())).unwrap();
        let mut back = State::new(limits(10));
        back.restore(serde_json::from_slice(&json).unwrap());
        assert_eq!(api(&back), api(&st));
        assert_eq!(persisted(&back), persisted(&st));
        // An entry whose ids are not hex of their length is left out, as an over-ceiling one.
        let mut snap = st.snapshot(now + 1, Vec::new());
        snap.series[0].largest[0].result.trace_id = "not hex".into();
        let mut back = State::new(limits(10));
        back.restore(snap);
        let kept = &back.series.values().next().unwrap().largest;
        assert_eq!(
            kept.iter().map(|l| l.bytes).collect::<Vec<_>>(),
            [9_000, 300]
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
        assert_eq!(
            st.series[&key("a")].over_ceiling,
            [("default".into(), 2000)]
        );
        let b = &st.series[&key("b")];
        assert_eq!(b.over_recent.len(), OVER_CEILING_RECENT);
        assert_eq!(b.over_recent.back().unwrap().bytes, 5000 + 24);
        let json = serde_json::to_vec(&st.snapshot(2000, Vec::new())).unwrap();
        let mut back = State::new(stacked(1000));
        back.restore(serde_json::from_slice(&json).unwrap());
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
        other.restore(serde_json::from_slice(&json).unwrap());
        let a = &other.series[&key("a")];
        assert_eq!(a.over_ceiling, [("default".into(), 2000)]);
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
        let restored = back.restore(serde_json::from_slice(&bytes).unwrap());
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
}
