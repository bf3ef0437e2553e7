//! One series' state: counters ([`Counts`], declared in [`super::counts`]), histograms over a period ([`Stats`]), the time
//! slots of the sliding windows ([`Ring`]), history points, the largest and the recent
//! over-ceiling results ([`super::results`]), the top argument hashes ([`super::top_args`]),
//! and how a record updates them ([`Series`]).

use std::collections::VecDeque;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub(crate) use super::counts::{calls_of, whole_calls, Counts};
use super::histogram::{Hist, MAX_BYTES, MAX_LATENCY_US};
use super::limits::{Limits, LATENCY_BUCKETS_US, OVER_CEILING_RECENT, SLOTS_PER_WINDOW};
pub(crate) use super::results::{
    Largest, LargestView, OverCeiling, OverRecent, ResultId, ResultRef,
};
use super::stacks::Profile;
pub(crate) use super::top_args::{ArgsStat, TopArgs};
use crate::collector::ingest::recognize::{Size, ToolRecord};

/// Counters and histograms of one series over one period. The counters read as fields
/// (`stats.calls`) through [`Counts`].
#[derive(Debug, Clone)]
pub(crate) struct Stats {
    /// The counters.
    pub(crate) counts: Counts,
    /// Result bytes.
    pub(crate) size: Hist,
    /// Latency, microseconds.
    pub(crate) latency: Hist,
}

impl Default for Stats {
    fn default() -> Self {
        Self {
            counts: Counts::default(),
            size: Hist::new(MAX_BYTES),
            latency: Hist::latency(MAX_LATENCY_US),
        }
    }
}

impl Stats {
    /// Records `r`'s size (when known) and latency in the histograms.
    fn record_values(&mut self, r: &ToolRecord) {
        if let Size::Known { bytes, .. } = r.size {
            self.size.record(bytes);
        }
        self.latency.record(r.latency_us);
    }

    fn add(&mut self, o: &Stats) {
        self.counts.add(&o.counts);
        self.add_values(o);
    }

    /// Adds `o`'s histograms (not its counters).
    fn add_values(&mut self, o: &Stats) {
        self.size.add(&o.size);
        self.latency.add(&o.latency);
    }

    /// Takes back `o`'s histograms, added earlier.
    fn subtract_values(&mut self, o: &Stats) {
        self.size.subtract(&o.size);
        self.latency.subtract(&o.latency);
    }
}

/// One point of a series' history: one slot of the shortest window, summarised when it closed.
/// Kept in 48 bytes: 32-bit counts and sizes (a size past 4 GiB reads as 4 GiB).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Point {
    /// Start of the slot, Unix seconds.
    pub(crate) at_unix: u64,
    /// Tool calls.
    pub(crate) count: u32,
    /// Results of known size.
    pub(crate) sized: u32,
    /// Median result bytes.
    pub(crate) p50: u32,
    /// 95th percentile result bytes.
    pub(crate) p95: u32,
    /// 99th percentile result bytes.
    pub(crate) p99: u32,
    /// Largest result bytes.
    pub(crate) max: u32,
    /// Failed calls.
    pub(crate) errors: u32,
    /// Results the tool reported truncated.
    pub(crate) truncated: u32,
    /// Results that showed an upstream cut.
    pub(crate) truncated_upstream: u32,
    /// Results over the ceiling of a layer.
    pub(crate) over_ceiling: u32,
}

impl Point {
    /// The point of a slot starting at `at_unix`.
    pub(crate) fn of(at_unix: u64, s: &Stats) -> Self {
        let n = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        Self {
            at_unix,
            count: n(whole_calls(s.counts.calls_milli)),
            sized: n(s.size.len()),
            p50: n(s.size.quantile(0.5)),
            p95: n(s.size.quantile(0.95)),
            p99: n(s.size.quantile(0.99)),
            max: n(s.size.max()),
            errors: n(whole_calls(s.counts.weighted(s.counts.errors))),
            truncated: n(whole_calls(s.counts.weighted(s.counts.truncated))),
            truncated_upstream: n(whole_calls(s.counts.weighted(s.counts.truncated_upstream))),
            over_ceiling: n(whole_calls(s.counts.weighted(s.counts.over_ceiling))),
        }
    }
}

/// One sliding window: the most recent [`SLOTS_PER_WINDOW`] slots.
#[derive(Debug, Clone)]
pub(crate) struct Ring {
    pub(crate) slot_secs: u64,
    pub(crate) slots: VecDeque<(u64, Stats)>,
}

impl Ring {
    pub(crate) fn new(window: Duration) -> Self {
        Self {
            slot_secs: (window.as_secs() / SLOTS_PER_WINDOW).max(1),
            slots: VecDeque::new(),
        }
    }

    /// The point of the newest slot when `now` falls in a later one (it is about to close).
    pub(crate) fn closing(&self, now: u64) -> Option<Point> {
        let (idx, s) = self.slots.back()?;
        (*idx != now / self.slot_secs).then(|| Point::of(idx * self.slot_secs, s))
    }

    /// The point of the newest slot, still open or not yet closed by a later record.
    pub(crate) fn open_point(&self) -> Option<Point> {
        let (idx, s) = self.slots.back()?;
        Some(Point::of(idx * self.slot_secs, s))
    }

    pub(crate) fn current(&mut self, now: u64) -> &mut Stats {
        let idx = now / self.slot_secs;
        if self.slots.back().map(|(i, _)| *i) != Some(idx) {
            self.slots.push_back((idx, Stats::default()));
            self.expire(now);
        }
        &mut self.slots.back_mut().expect("just pushed").1
    }

    fn expire(&mut self, now: u64) {
        let idx = now / self.slot_secs;
        while self
            .slots
            .front()
            .is_some_and(|(i, _)| i + SLOTS_PER_WINDOW <= idx)
        {
            self.slots.pop_front();
        }
    }

    /// Whether slot `idx` is within the window at `now`.
    fn counted(&self, idx: u64, now: u64) -> bool {
        idx + SLOTS_PER_WINDOW > now / self.slot_secs
    }

    /// The slots of the window that ended by `end` (Unix seconds).
    fn merged_ending_by(&self, now: u64, end: u64) -> Stats {
        let mut out = Stats::default();
        for (i, s) in &self.slots {
            if self.counted(*i, now) && (i + 1) * self.slot_secs <= end {
                out.add(s);
            }
        }
        out
    }

    /// The slots of the window at `now`. For a window other than the shortest, the histograms
    /// lack the slot not yet folded: read through [`Series::window_stats`].
    pub(crate) fn merged(&self, now: u64) -> Stats {
        let mut out = Stats::default();
        for (i, s) in &self.slots {
            if self.counted(*i, now) {
                out.add(s);
            }
        }
        out
    }
}

/// Everything kept for one series.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    /// Its id, given at creation, stable for the life of the process.
    pub(crate) id: u32,
    /// Since start (or since the restored snapshot's start). Its histograms lack the newest
    /// slot of the shortest window while [`Series::unfolded`]: read them with
    /// [`Series::total_stats`].
    pub(crate) total: Stats,
    pub(crate) windows: Vec<Ring>,
    /// The shortest window (an index into `windows`), the one ring whose slots record each
    /// result's size and latency; `None` without windows (then `total` records them).
    pub(crate) fine: Option<usize>,
    /// Whether the histograms of the shortest window's newest slot are still to be added to
    /// `total` and to the other windows' slots ([`Series::fold`]).
    pub(crate) unfolded: bool,
    /// Non-cumulative counts per [`SIZE_BUCKETS`] bound, plus +Inf last.
    pub(crate) size_buckets: Vec<u64>,
    /// Non-cumulative counts per [`LATENCY_BUCKETS_US`] bound, plus +Inf last.
    pub(crate) latency_buckets: Vec<u64>,
    /// Sum of known result bytes.
    pub(crate) size_sum: u64,
    /// Sum of latencies, microseconds.
    pub(crate) latency_sum_us: u64,
    /// Largest recent results, largest first.
    pub(crate) largest: Vec<Largest>,
    /// The second `largest` was last cleared of results past the longest window (once a second,
    /// not once a result: entries expire by the second); 0 when it may hold any.
    pub(crate) largest_pruned_at: u64,
    /// Arguments hashes (space-saving top-k).
    pub(crate) args: TopArgs,
    /// Results over a ceiling since start, by the weakest layer that cut them (few layers: a
    /// vector), weighted by each result's adjusted count: thousandths of a call.
    pub(crate) over_ceiling: Vec<(String, u64)>,
    /// The most recent over-ceiling results, oldest first, at most [`OVER_CEILING_RECENT`].
    pub(crate) over_recent: VecDeque<OverRecent>,
    /// Closed slots of the shortest window, oldest first, over the longest window
    /// ([`Limits::history`]).
    pub(crate) history: VecDeque<Point>,
    /// The layers it is held to (its agent's, its service's, or the daemon's).
    pub(crate) profile: Profile,
}

/// One histogram record per result and measure: a result's size and latency are recorded in
/// the shortest window's current slot only; its counters, a few additions, go everywhere. When
/// that slot closes (the next result lands in a later one) its histograms are folded into
/// `total` and into the slot of each longer window that holds its start, once per slot instead
/// of once per result. Readers add the slot not yet folded ([`Series::total_stats`],
/// [`Series::window_stats`]), so every view, `/metrics` and the snapshot see exactly what
/// recording everywhere gave. With the default windows (5m and 1h: 60 s and 720 s slots) each
/// short slot lies inside one long slot; with windows whose slots do not nest, a short slot
/// that straddles two long slots is folded into the one holding its start (its counters are
/// exact, its sizes move by at most one short slot).
impl Series {
    /// Records `r` (`over`: it passed its ceiling) received at `now`: its counters in every
    /// period, its size and latency in the shortest window's current slot.
    pub(crate) fn record_stats(&mut self, r: &ToolRecord, over: bool, now: u64) {
        self.total.counts.record(r, over);
        let Some(fine) = self.fine else {
            self.total.record_values(r);
            return;
        };
        if self.windows[fine].closing(now).is_some() {
            self.fold();
        }
        for (i, w) in self.windows.iter_mut().enumerate() {
            let st = w.current(now);
            st.counts.record(r, over);
            if i == fine {
                st.record_values(r);
            }
        }
        self.unfolded = true;
    }

    /// The shortest window's newest slot while its histograms are not folded: its start (Unix
    /// seconds) and its stats.
    fn pending(&self) -> Option<(u64, &Stats)> {
        let w = self.windows.get(self.fine?)?;
        let (idx, st) = w.slots.back().filter(|_| self.unfolded)?;
        Some((idx * w.slot_secs, st))
    }

    /// Adds the histograms of the shortest window's newest slot to `total` and to the slot of
    /// each longer window that holds its start.
    pub(crate) fn fold(&mut self) {
        if self.unfolded && self.apply_newest(Stats::add_values) {
            self.unfolded = false;
        }
    }

    /// After a restore, whose file holds every period whole: takes the shortest window's newest
    /// slot out of `total` and the other windows again, as it was before the snapshot was
    /// written (it is folded when it closes).
    pub(crate) fn unfold_restored(&mut self) {
        if !self.unfolded && self.apply_newest(Stats::subtract_values) {
            self.unfolded = true;
        }
    }

    /// Applies `op` with the shortest window's newest slot to `total` and to the slot of each
    /// longer window holding its start; false when there is no such slot.
    fn apply_newest(&mut self, op: fn(&mut Stats, &Stats)) -> bool {
        let Some((start, newest)) = self.fine.and_then(|f| {
            let w = self.windows.get(f)?;
            let (idx, st) = w.slots.back()?;
            Some((idx * w.slot_secs, st.clone()))
        }) else {
            return false;
        };
        op(&mut self.total, &newest);
        for (i, w) in self.windows.iter_mut().enumerate() {
            if Some(i) == self.fine {
                continue;
            }
            let idx = start / w.slot_secs;
            if let Some((_, st)) = w.slots.iter_mut().rev().find(|(j, _)| *j == idx) {
                op(st, &newest);
            }
        }
        true
    }

    /// The stats of slot `j` of window `i` as the file keeps them: with the histograms not yet
    /// folded into it.
    pub(crate) fn slot_whole<'s>(
        &'s self,
        i: usize,
        j: u64,
        st: &'s Stats,
    ) -> std::borrow::Cow<'s, Stats> {
        match (self.pending(), self.windows.get(i)) {
            (Some((start, p)), Some(w)) if Some(i) != self.fine && start / w.slot_secs == j => {
                let mut whole = st.clone();
                whole.add_values(p);
                std::borrow::Cow::Owned(whole)
            }
            _ => std::borrow::Cow::Borrowed(st),
        }
    }

    /// The stats since start, the slot not yet folded included.
    pub(crate) fn total_stats(&self) -> std::borrow::Cow<'_, Stats> {
        match self.pending() {
            None => std::borrow::Cow::Borrowed(&self.total),
            Some((_, p)) => {
                let mut t = self.total.clone();
                t.add_values(p);
                std::borrow::Cow::Owned(t)
            }
        }
    }

    /// Window `i`'s stats with the histograms of the slot not yet folded, when `keep` says its
    /// slot of window `i` (by index) is counted.
    fn with_pending(&self, i: usize, mut st: Stats, keep: impl Fn(&Ring, u64) -> bool) -> Stats {
        if Some(i) != self.fine {
            if let (Some((start, p)), Some(w)) = (self.pending(), self.windows.get(i)) {
                if keep(w, start / w.slot_secs) {
                    st.add_values(p);
                }
            }
        }
        st
    }

    /// The stats of window `i` (an index into [`Limits::windows`]) at `now`.
    pub(crate) fn window_stats(&self, i: usize, now: u64) -> Stats {
        let Some(w) = self.windows.get(i) else {
            return Stats::default();
        };
        self.with_pending(i, w.merged(now), |w, idx| w.counted(idx, now))
    }

    /// The stats of the slots of window `i` that ended by `end`: with the 1h window and
    /// `end = now - 5 min`, between 36 and 48 minutes of data ending 5 to 17 minutes ago.
    pub(crate) fn window_stats_ending_by(&self, i: usize, now: u64, end: u64) -> Stats {
        let Some(w) = self.windows.get(i) else {
            return Stats::default();
        };
        self.with_pending(i, w.merged_ending_by(now, end), |w, idx| {
            w.counted(idx, now) && (idx + 1) * w.slot_secs <= end
        })
    }

    #[cfg(test)]
    /// Heap bytes held by the series: histogram counts, bucket counts, largest and recent
    /// over-ceiling results with their strings, arguments hashes. (The key and the map entry
    /// are not counted; the rules keep up to 7 KiB more per series whose results repeat
    /// oversized arguments, see `alerts::rules::repeated_oversize`.)
    pub(crate) fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        let stats = |s: &Stats| s.size.heap_bytes() + s.latency.heap_bytes();
        let mut n = stats(&self.total);
        for w in &self.windows {
            n += w.slots.capacity() * size_of::<(u64, Stats)>();
            n += w.slots.iter().map(|(_, s)| stats(s)).sum::<usize>();
        }
        n += (self.size_buckets.capacity() + self.latency_buckets.capacity()) * size_of::<u64>();
        n += self.largest.capacity() * size_of::<Largest>();
        n += self
            .largest
            .iter()
            .map(|l| l.cut_by.as_ref().map_or(0, String::len))
            .sum::<usize>();
        n += self.over_recent.capacity() * size_of::<OverRecent>();
        n += self.history.capacity() * size_of::<Point>();
        n += self.args.heap_bytes();
        n += self.over_ceiling.capacity() * size_of::<(String, u64)>()
            + self
                .over_ceiling
                .iter()
                .map(|(l, _)| l.len())
                .sum::<usize>();
        n
    }

    /// Adds everything of `o` (a series merged into the overflow one on restore).
    pub(crate) fn merge(&mut self, mut o: Series, limits: &Limits) {
        self.fold();
        o.fold();
        self.total.add(&o.total);
        for (ring, or) in self.windows.iter_mut().zip(o.windows) {
            for (idx, st) in or.slots {
                match ring.slots.iter_mut().find(|(i, _)| *i == idx) {
                    Some((_, mine)) => mine.add(&st),
                    None => ring.slots.push_back((idx, st)),
                }
            }
            ring.slots.make_contiguous().sort_by_key(|(i, _)| *i);
        }
        for (a, b) in self.size_buckets.iter_mut().zip(&o.size_buckets) {
            *a += b;
        }
        for (a, b) in self.latency_buckets.iter_mut().zip(&o.latency_buckets) {
            *a += b;
        }
        self.size_sum += o.size_sum;
        self.latency_sum_us += o.latency_sum_us;
        self.largest.extend(o.largest);
        self.largest.sort_by_key(|l| std::cmp::Reverse(l.bytes));
        self.largest.truncate(limits.largest_results);
        self.largest_pruned_at = 0;
        self.args.merge(o.args, limits.top_args_hashes);
        for (id, n) in o.over_ceiling {
            add_over(&mut self.over_ceiling, &id, n);
        }
        self.over_recent.extend(o.over_recent);
        self.over_recent
            .make_contiguous()
            .sort_by_key(|r| r.result.at_unix);
        while self.over_recent.len() > OVER_CEILING_RECENT {
            self.over_recent.pop_front();
        }
    }

    pub(crate) fn new(limits: &Limits, id: u32) -> Self {
        Self {
            id,
            total: Stats::default(),
            windows: limits.windows.iter().map(|(_, d)| Ring::new(*d)).collect(),
            fine: (!limits.windows.is_empty()).then(|| limits.history().0),
            unfolded: false,
            size_buckets: vec![0; limits.size_bounds.len() + 1],
            latency_buckets: vec![0; LATENCY_BUCKETS_US.len() + 1],
            size_sum: 0,
            latency_sum_us: 0,
            largest: Vec::new(),
            largest_pruned_at: 0,
            args: TopArgs::default(),
            over_ceiling: Vec::new(),
            over_recent: VecDeque::new(),
            history: VecDeque::new(),
            profile: limits.stacks.daemon().clone(),
        }
    }

    /// The history at `now`: closed points within the retention, then the newest slot.
    pub(crate) fn history(&self, limits: &Limits, now: u64) -> Vec<Point> {
        let (w, _, retention) = limits.history();
        let from = now.saturating_sub(retention);
        let mut out: Vec<Point> = self
            .history
            .iter()
            .filter(|p| p.at_unix >= from)
            .copied()
            .collect();
        if let Some(p) = self.windows.get(w).and_then(Ring::open_point) {
            if p.at_unix >= from && out.last().is_none_or(|l| l.at_unix < p.at_unix) {
                out.push(p);
            }
        }
        out
    }
}

pub(crate) fn add_over(counts: &mut Vec<(String, u64)>, id: &str, n: u64) {
    match counts.iter_mut().find(|(l, _)| l == id) {
        Some((_, c)) => *c += n,
        None => counts.push((id.to_string(), n)),
    }
}
