//! The aggregator: the one task that owns per-(service, tool) state.
//!
//! Receivers hand it batches of [`ToolRecord`]s over a bounded queue (`try_send`; a full queue is
//! refused upstream with 503 / UNAVAILABLE and counted, so nothing accepted is lost). Readers (the
//! admin API, `/metrics`) send it a [`Command`](crate::collector::read::Command) and get a computed view back; nobody else touches
//! the state. Every `snapshot_interval` it serializes the state and hands the bytes to a blocking
//! writer; a slow disk delays only the next snapshot, never ingestion.
//!
//! Per series it keeps HDR histograms of result bytes and latency (see [`crate::collector::state::histogram`]),
//! calls, errors, truncated, truncated-upstream and unknown-size counts, since start and in
//! sliding windows made of [`SLOTS_PER_WINDOW`] time slots each (a 5m window covers between 4 and
//! 5 minutes of the most recent data), exact classic-histogram bucket counts for `/metrics`, the
//! largest recent results and a space-saving top-k of argument hashes.
//!
//! Cardinality: at most `max_series` series; records of further series go to one overflow series
//! (`tool="__overflow__"`, `service="__overflow__"`) and are counted. Memory is therefore bounded
//! by `max_series` × (histograms of one series): at most 11 size + latency pairs with the default
//! two windows, ≈ 281 KiB (see [`crate::collector::state::histogram`] for the computation).

pub(crate) mod context;
pub(crate) mod counts;
pub mod histogram;
pub(crate) mod join;
pub(crate) mod key;
pub(crate) mod limits;
pub(crate) mod restack;
pub(crate) mod results;
pub(crate) mod series;
pub(crate) mod stacks;
pub(crate) mod top_args;

pub(crate) use crate::collector::hash::MapHasher;
pub(crate) use key::{KeyLike, SeriesKey, SeriesKeyRef};
pub(crate) use limits::*;
pub use limits::{size_bounds, Limits};
pub use restack::Restacked;
pub(crate) use series::*;

use crate::collector::ingest::learn::Learner;
use crate::collector::ingest::recognize::{Size, SizeSource, ToolRecord};
use crate::collector::ingest::record::Role;
use crate::collector::state::histogram::{MAX_BYTES, MAX_LATENCY_US};
use crate::layers::Cut;
use stacks::Profile;
use std::sync::Arc;

pub(crate) use crate::collector::ingest::recognize::OVERFLOW;

/// Joined calls recorded at a time when their window ends ([`State::release_joined`]): 256
/// records of ~400 bytes, a buffer that stays in the processor's cache.
pub(crate) const RELEASED_AT_ONCE: usize = 256;

/// The series by key (hashbrown's map, for one lookup that gives a series and its key).
pub(crate) type SeriesMap = hashbrown::HashMap<SeriesKey, Series, MapHasher>;

/// One recorded result as an observer sees it: its series and the verdict the aggregator
/// computed once for it.
#[derive(Debug)]
pub(crate) struct Observed<'a> {
    /// The series it was added to.
    pub(crate) key: &'a SeriesKey,
    /// The series' id, stable for the life of the process (a cheap key for observers' maps).
    pub(crate) series: u32,
    /// The record.
    pub(crate) record: &'a ToolRecord,
    /// The weakest layer that cuts it, with its index in the stack, when one does.
    pub(crate) over: Option<(usize, Cut<'a>)>,
    /// When it was recorded, Unix milliseconds.
    pub(crate) now_ms: u64,
}

/// Something told about every recorded result; the seam where alert rules plug in.
pub(crate) trait ResultObserver: Send + 'static {
    /// Called once per tool record, after it was added to its series.
    fn observe(&mut self, seen: &Observed<'_>);

    /// Called every evaluation interval with the whole state (window rules go here).
    fn periodic(&mut self, _series: &SeriesMap, _limits: &Limits, _now_unix: u64, _now_ms: u64) {}

    /// Called after every batch.
    fn tick(&mut self) {}

    /// A reload: takes the settings of `new` that differ from `old` where it can, and says
    /// which it took and which wait for a restart.
    fn retune(
        &mut self,
        _old: &crate::collector::config::AlertsConfig,
        _new: &crate::collector::config::AlertsConfig,
        _out: &mut Retune,
    ) {
    }

    /// A reload renumbered the layers: `remap` gives each old index its new one (`None`: the
    /// layer was removed). Whatever the observer keeps by layer index follows it.
    fn restack(&mut self, _remap: &restack::Remap) {}
}

/// What a reload changed in the observers: the config sections taken, and those that wait for
/// a restart (a rule enabled or disabled).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Retune {
    /// Sections taken, e.g. `alerts.p95_jump`.
    pub applied: Vec<&'static str>,
    /// Sections that wait for a restart.
    pub restart: Vec<&'static str>,
}

/// The aggregated state, owned by the aggregator task.
pub struct State {
    /// Limits.
    pub(crate) limits: Limits,
    /// Series by key.
    pub(crate) series: SeriesMap,
    /// Records routed to the overflow series.
    pub(crate) overflow_records: u64,
    /// Unix seconds the state started (kept across restores).
    pub(crate) started_unix: u64,
    /// Values above the histogram ceilings, clamped.
    pub(crate) clamped: histogram::Clamped,
    observers: Vec<Box<dyn ResultObserver>>,
    next_id: u32,
    /// The signals of coding agents' calls waiting to be joined.
    pub(crate) joiner: join::Joiner,
    /// Attribute length limits learned from the results' content.
    learner: Learner,
    /// With the write-ahead log on: the highest sequence ingested (batches come in sequence
    /// order, so every entry at or below it is in the state).
    pub(crate) wal_seq: Option<u64>,
    /// The context ledger (`[context]`).
    pub(crate) context: context::Ledger,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("series", &self.series.len())
            .finish()
    }
}

pub use crate::collector::clock::{now_unix, now_unix_ms};

impl State {
    /// An empty state.
    pub fn new(limits: Limits) -> Self {
        let joiner = join::Joiner::new(limits.join_window_ms);
        let context = context::Ledger::new(limits.context);
        Self {
            limits,
            series: SeriesMap::default(),
            overflow_records: 0,
            started_unix: now_unix(),
            clamped: histogram::Clamped::default(),
            observers: Vec::new(),
            next_id: 0,
            joiner,
            learner: Learner::new(),
            wal_seq: None,
            context,
        }
    }

    pub(crate) fn new_series(&mut self) -> Series {
        Self::next_series(&self.limits, &mut self.next_id)
    }

    fn next_series(limits: &Limits, next_id: &mut u32) -> Series {
        *next_id = next_id.wrapping_add(1);
        Series::new(limits, *next_id)
    }

    /// Adds an observer told about every record (ceiling checks go here).
    pub(crate) fn add_observer(&mut self, o: Box<dyn ResultObserver>) {
        self.observers.push(o);
    }

    /// Hands a reload's alert settings to every observer.
    pub(crate) fn retune_observers(
        &mut self,
        old: &crate::collector::config::AlertsConfig,
        new: &crate::collector::config::AlertsConfig,
    ) -> Retune {
        let mut out = Retune::default();
        for o in &mut self.observers {
            o.retune(old, new, &mut out);
        }
        out
    }

    /// Lets the observers send what they queued.
    pub(crate) fn tick_observers(&mut self) {
        for o in &mut self.observers {
            o.tick();
        }
    }

    #[cfg(test)]
    /// Runs the observers' window evaluations at `now` (Unix seconds).
    pub(crate) fn evaluate_observers(&mut self, now: u64) {
        self.evaluate_observers_ms(now * 1000);
    }

    /// Runs the observers' window evaluations at `now_ms` (Unix milliseconds).
    pub(crate) fn evaluate_observers_ms(&mut self, now_ms: u64) {
        for o in &mut self.observers {
            o.periodic(&self.series, &self.limits, now_ms / 1000, now_ms);
        }
    }

    /// Number of series, the overflow series included.
    pub(crate) fn series_count(&self) -> usize {
        self.series.len()
    }

    /// Records a batch received at `now` (Unix seconds).
    pub fn record_batch(&mut self, records: &[ToolRecord], now: u64) {
        self.record_batch_ms(records, now * 1000);
    }

    /// Records a batch received at `now_ms` (Unix milliseconds), then lets the observers send
    /// what they queued. The records are lent: each signal of a coding agent's call is cloned
    /// into the joiner (the aggregator's own path is [`State::record_owned_batch_ms`]).
    pub fn record_batch_ms(&mut self, records: &[ToolRecord], now_ms: u64) {
        for r in records {
            match r.join {
                None => self.record_ms(r, now_ms),
                Some(_) => self.join(r.clone(), now_ms),
            }
        }
        self.tick_observers();
    }

    /// [`State::record_batch_ms`] of a batch the aggregator owns: each record is read where it
    /// lies; a coding agent's signal that waits for its call is moved into the joiner (cloned,
    /// they and their drops were 5 % of the daemon's time on Claude Code's log records), a
    /// [`ToolRecord::vacant`] left in its place, after the joiner's tables were read for the
    /// whole batch ([`join::Joiner::warm`]). A signal that does not wait is never moved: moving
    /// every record out of the batch was 3.4 % of the daemon's time on those records while
    /// [`join::MAX_PENDING`] calls waited.
    pub fn record_owned_batch_ms(&mut self, mut records: Vec<ToolRecord>, now_ms: u64) {
        if records.iter().any(|r| r.join.is_some()) {
            self.joiner.warm(records.iter().filter_map(|r| r.join));
            let mut empty: Option<Arc<str>> = None;
            for r in &mut records {
                match r.join.map(|j| (j, self.joiner.passing(j))) {
                    None => self.record_ms(r, now_ms),
                    Some((_, None)) => {
                        let empty = empty.get_or_insert_with(|| Arc::from(""));
                        let r = std::mem::replace(r, ToolRecord::vacant(empty));
                        self.join(r, now_ms);
                    }
                    Some((_, Some(join::Passing::Late))) => {}
                    Some((j, Some(join::Passing::Unjoined))) => {
                        if j.role != Role::Part {
                            r.join = None;
                            self.record_ms(r, now_ms);
                        }
                    }
                }
            }
        } else {
            // Moving each record (~400 bytes) out of the batch was 2 % of the daemon's time.
            for r in &records {
                self.record_ms(r, now_ms);
            }
        }
        self.tick_observers();
    }

    /// Hands a signal of a coding agent's call to the joiner; records it at once when it is
    /// the call's only signal awaited.
    fn join(&mut self, r: ToolRecord, now_ms: u64) {
        if let Some(alone) = self.joiner.add(r, now_ms) {
            self.record_ms(&alone, now_ms);
        }
    }

    /// Records the joined calls whose window ended by `now_ms` (every waiting call with
    /// `u64::MAX`, at shutdown), [`RELEASED_AT_ONCE`] at a time through one buffer: a buffer
    /// grown to hold a whole flush (10,000 calls every 100 ms at 100,000 records/s) was
    /// reallocated, copied and its fresh pages zeroed by the kernel at every flush, 6 % of the
    /// daemon's time on Claude Code's log records.
    pub fn release_joined(&mut self, now_ms: u64) {
        let at = now_ms.min(now_unix_ms());
        let mut out = Vec::new();
        let mut any = false;
        loop {
            self.joiner
                .release_at_most(now_ms, &mut out, RELEASED_AT_ONCE);
            if out.is_empty() {
                break;
            }
            any = true;
            for r in &out {
                self.record_ms(r, at);
            }
            out.clear();
        }
        if any {
            self.tick_observers();
        }
    }

    #[cfg(test)]
    /// Records one result received at `now` (Unix seconds).
    pub(crate) fn record(&mut self, r: &ToolRecord, now: u64) {
        self.record_ms(r, now * 1000);
    }

    /// Seeds the learner with the limits the restored series' results were cut at: learned
    /// again at once after a restart.
    pub(crate) fn seed_learned_limits(&mut self) {
        let mut limits: Vec<(&str, u64)> = self
            .series
            .iter()
            .filter_map(|(k, s)| Some((k.service.as_str(), s.total.counts.upstream_limit?)))
            .collect();
        limits.sort_unstable();
        limits.dedup();
        for (service, limit) in limits {
            self.learner.seed(service, limit);
        }
    }

    /// Records one result received at `now_ms` (Unix milliseconds), once the learner has seen
    /// its content: a result at a limit it learned is recorded cut at that limit, with the
    /// earlier results the limit shows were cut.
    pub(crate) fn record_ms(&mut self, r: &ToolRecord, now_ms: u64) {
        if let Some(sample) = &r.sample {
            let o = self
                .learner
                .observe(&r.service, sample, &r.tool, r.span_id, now_ms);
            if let Some(limit) = o.limit {
                let mut cut = r.clone();
                cut.truncated_upstream = true;
                cut.upstream_limit = Some(limit);
                cut.earlier_cuts = o.earlier;
                cut.size = Size::Known {
                    bytes: sample.bytes,
                    source: SizeSource::Derived,
                };
                cut.sample = None;
                return self.record_learned(&cut, now_ms);
            }
        }
        self.record_learned(r, now_ms);
    }

    fn record_learned(&mut self, r: &ToolRecord, now_ms: u64) {
        if let Size::Known { bytes, .. } = r.size {
            self.clamped.size += u64::from(bytes > MAX_BYTES);
        }
        self.clamped.latency += u64::from(r.latency_us > MAX_LATENCY_US);
        // One borrowed lookup in the common case (two with observers); a key is allocated
        // only for a new series.
        let mut probe = SeriesKeyRef {
            service: &r.service,
            tool: &r.tool,
        };
        if let Some((key, s)) = self.series.get_key_value_mut(&probe as &dyn KeyLike) {
            Self::apply_observed(key, s, &self.limits, &mut self.observers, r, now_ms);
        } else {
            if self.series.len() >= self.limits.max_series {
                self.overflow_records += 1;
                probe = SeriesKeyRef {
                    service: OVERFLOW,
                    tool: OVERFLOW,
                };
            }
            if !self.series.contains_key(&probe as &dyn KeyLike) {
                let mut s = Self::next_series(&self.limits, &mut self.next_id);
                s.profile = self.limits.stacks.profile(probe.service, probe.tool);
                self.series.insert(
                    SeriesKey {
                        service: probe.service.to_string(),
                        tool: probe.tool.to_string(),
                    },
                    s,
                );
            }
            let (key, s) = self
                .series
                .get_key_value_mut(&probe as &dyn KeyLike)
                .expect("present or just inserted");
            Self::apply_observed(key, s, &self.limits, &mut self.observers, r, now_ms);
        }
        if !r.earlier_cuts.is_empty() {
            self.flag_earlier_cuts(r);
        }
    }

    /// Adds `r` to the series `s` of `key`, then tells the observers (the one lookup of the
    /// series gives both: a second, for the key, was 2 % of the aggregator's time).
    fn apply_observed(
        key: &SeriesKey,
        s: &mut Series,
        limits: &Limits,
        observers: &mut [Box<dyn ResultObserver>],
        r: &ToolRecord,
        now_ms: u64,
    ) {
        let over = Self::apply(s, limits, r, now_ms / 1000);
        if observers.is_empty() {
            return;
        }
        let seen = Observed {
            key,
            series: s.id,
            record: r,
            over,
            now_ms,
        };
        for o in observers {
            o.observe(&seen);
        }
    }

    /// The weakest layer of `profile` that cuts `r`. Exact where the span carries the measure
    /// (measured sizes only), estimated from bytes otherwise; content-derived sizes travel as an
    /// attribute value, so per-attribute layers apply. What the agent observed wins over the
    /// catalog: a result an agent says one of these layers cut is over that layer (even when its
    /// size is what the model got after the cut, and whichever layer the catalog's limits make
    /// the weakest), at the limit the agent says applied to that call when it says one.
    fn verdict<'l>(
        limits: &'l Limits,
        profile: &Profile,
        r: &ToolRecord,
    ) -> Option<(usize, Cut<'l>)> {
        let Size::Known { bytes, source } = r.size else {
            return None;
        };
        let stack = &limits.stacks.all;
        let bytes = r.upstream.original.unwrap_or(bytes);
        let measures = r.measures.with_bytes(bytes);
        let via_attribute = source != SizeSource::Measured;
        let observed = r.upstream.layer.and_then(|layer| {
            let i = *profile
                .order
                .iter()
                .find(|&&i| stack.layers()[i].id() == layer)?;
            let cut = match r.upstream.limit.filter(|l| *l > 0) {
                Some(limit) => stack.cut_known_at(i, &measures, via_attribute, limit)?,
                None => stack.cut_known(i, &measures, via_attribute)?,
            };
            Some((i, cut))
        });
        observed.or_else(|| stack.weakest_among(&profile.order, &measures, via_attribute))
    }

    /// Flags the results that the limit learned from `r` shows were cut, counted as whole when
    /// they arrived ([`crate::collector::ingest::learn`]): in the series' totals, the window slot each landed in
    /// (the history point it closed into, if it has), and the largest results.
    fn flag_earlier_cuts(&mut self, r: &ToolRecord) {
        let Some(limit) = r.upstream_limit else {
            return;
        };
        let (history, ..) = self.limits.history();
        for e in &r.earlier_cuts {
            let probe = SeriesKeyRef {
                service: &r.service,
                tool: &e.tool,
            };
            let Some(s) = self.series.get_mut(&probe as &dyn KeyLike) else {
                continue;
            };
            if !s.total.counts.flag_cut(e.source, limit) {
                continue;
            }
            let at = e.at_ms / 1000;
            for (i, w) in s.windows.iter_mut().enumerate() {
                // The aggregator stamps a record a little after the receiver: its slot, or the
                // next one.
                let first = at / w.slot_secs;
                let newest = w.slots.back().map(|(j, _)| *j);
                let Some(idx) = [first, first + 1].into_iter().find(|&j| {
                    w.slots
                        .iter_mut()
                        .find(|(k, _)| *k == j)
                        .is_some_and(|(_, st)| st.counts.flag_cut(e.source, limit))
                }) else {
                    continue;
                };
                if i == history && Some(idx) != newest {
                    let start = idx * w.slot_secs;
                    if let Some(p) = s.history.iter_mut().find(|p| p.at_unix == start) {
                        p.truncated_upstream = p.truncated_upstream.saturating_add(1);
                    }
                }
            }
            for l in s
                .largest
                .iter_mut()
                .filter(|l| l.result.span_id == e.span_id)
            {
                l.truncated_upstream = true;
            }
        }
    }

    /// Adds `r` to `s`; the weakest layer of the series' stack that cuts it, if one does (one
    /// verdict per record, shared by the counters and the observers).
    fn apply<'l>(
        s: &mut Series,
        limits: &'l Limits,
        r: &ToolRecord,
        now: u64,
    ) -> Option<(usize, Cut<'l>)> {
        let verdict = Self::verdict(limits, &s.profile, r);
        let over = verdict.as_ref();
        let windows = &limits.windows;
        let is_over = over.is_some();
        // A slot of the shortest window closes: it becomes a history point (once a slot).
        if let Some(p) = s.fine.and_then(|i| s.windows[i].closing(now)) {
            if s.history.len() >= limits.history_points() {
                s.history.pop_front();
            }
            s.history.push_back(p);
        }
        s.record_stats(r, is_over, now);
        if let Size::Known { bytes, .. } = r.size {
            if let Some((layer, cut)) = over {
                add_over(&mut s.over_ceiling, cut.layer_id, r.weight.milli());
                if s.over_recent.len() >= OVER_CEILING_RECENT {
                    s.over_recent.pop_front();
                }
                s.over_recent.push_back(OverRecent {
                    bytes,
                    layer: u16::try_from(*layer).unwrap_or(u16::MAX),
                    limit: cut.limit,
                    value: cut.value,
                    estimated: cut.estimated,
                    result: ResultId::of(r, now),
                });
            }
            let i = limits.size_bounds.partition_point(|&b| b < bytes);
            s.size_buckets[i] += 1;
            s.size_sum = s.size_sum.saturating_add(bytes);
            let keep = limits.largest_results;
            let horizon = windows
                .iter()
                .map(|(_, d)| d.as_secs())
                .max()
                .unwrap_or(3600);
            if s.largest_pruned_at != now {
                s.largest.retain(|l| l.result.at_unix + horizon > now);
                s.largest_pruned_at = now;
            }
            if keep > 0
                && (s.largest.len() < keep || s.largest.last().is_some_and(|l| l.bytes < bytes))
            {
                let at = s.largest.partition_point(|l| l.bytes >= bytes);
                s.largest.insert(
                    at,
                    Largest {
                        bytes,
                        result: ResultId::of(r, now),
                        truncated_upstream: r.truncated_upstream,
                        cut_by: r.upstream.layer.map(str::to_string),
                        original: r.upstream.original,
                    },
                );
                s.largest.truncate(keep);
            }
        }
        let i = LATENCY_BUCKETS_US.partition_point(|&b| b < r.latency_us);
        s.latency_buckets[i] += 1;
        s.latency_sum_us = s.latency_sum_us.saturating_add(r.latency_us);
        if let Some(h) = r.args_hash {
            let bytes = match r.size {
                Size::Known { bytes, .. } => bytes,
                _ => 0,
            };
            s.args.observe(h, bytes, limits.top_args_hashes);
        }
        verdict
    }

    /// The stats of `series` over `window` (`None`: since start).
    pub(crate) fn stats(&self, series: &Series, window: Option<usize>, now: u64) -> Stats {
        match window {
            None => series.total_stats().into_owned(),
            Some(i) => series.window_stats(i, now),
        }
    }

    /// Index of a window label; `Ok(None)` for `all`.
    pub(crate) fn window_index(&self, label: Option<&str>) -> Result<Option<usize>, String> {
        match label {
            None | Some("all") => Ok(None),
            Some(l) => self
                .limits
                .windows
                .iter()
                .position(|(w, _)| w == l)
                .map(Some)
                .ok_or_else(|| {
                    let mut valid: Vec<&str> = self
                        .limits
                        .windows
                        .iter()
                        .map(|(w, _)| w.as_str())
                        .collect();
                    valid.push("all");
                    format!("unknown window {l:?}; valid: {}", valid.join(", "))
                }),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::collector::config::Config;
    use crate::collector::ingest::recognize::{ArgsHash, Emitter, Measurement, Unknown};
    use crate::layers::Stack;

    pub(crate) fn limits(max_series: usize) -> Limits {
        Limits {
            windows: vec![
                ("5m".into(), Duration::from_secs(300)),
                ("1h".into(), Duration::from_secs(3600)),
            ],
            max_series,
            largest_results: 3,
            top_args_hashes: 2,
            stacks: Arc::new(stacks::Stacks::daemon_only(Stack::default())),
            size_bounds: SIZE_BUCKETS.into(),
            join_window_ms: join::DEFAULT_JOIN_WINDOW_MS,
            context: context::LedgerLimits::default(),
        }
    }

    pub(crate) fn rec(tool: &str, size: Size) -> ToolRecord {
        ToolRecord {
            service: "svc".into(),
            tool: tool.into(),
            emitter: Emitter::Toolsize,
            size,
            truncated: false,
            truncated_upstream: false,
            error: matches!(size, Size::Failed),
            latency_us: 1500,
            trace_id: [1; 16],
            span_id: [2; 8],
            args_hash: Some(ArgsHash::new(&format!("{tool}-args"))),
            measures: Measurement::default(),
            upstream_limit: None,
            earlier_cuts: Vec::new(),
            sample: None,
            upstream: Default::default(),
            join: None,
            weight: crate::collector::ingest::sampling::Weight::ONE,
        }
    }

    pub(crate) fn known(b: u64) -> Size {
        Size::Known {
            bytes: b,
            source: SizeSource::Measured,
        }
    }

    #[test]
    fn results_before_a_learned_limit_are_flagged_when_it_is_learned() {
        use crate::collector::ingest::record::EarlierCut;
        let mut st = State::new(limits(10));
        // 5m windows of 60 s slots: the first two land in an earlier slot than the others.
        let t0 = 1_000_020;
        let derived = |k: u8, bytes| {
            let mut r = rec("fetch", known(bytes));
            r.size = Size::Known {
                bytes,
                source: SizeSource::Derived,
            };
            r.span_id = [k; 8];
            r
        };
        st.record(&derived(1, 1000), t0);
        st.record(&derived(2, 1000), t0);
        st.record(&derived(3, 400), t0 + 100);
        let mut third = derived(4, 1000);
        third.truncated_upstream = true;
        third.upstream_limit = Some(1000);
        third.earlier_cuts = [1u8, 2]
            .iter()
            .map(|&k| EarlierCut {
                tool: "fetch".into(),
                span_id: [k; 8],
                source: SizeSource::Derived,
                at_ms: t0 * 1000 + 5,
            })
            .collect();
        st.record(&third, t0 + 105);
        // Flagged in `truncated_upstream`; the source counters keep how each was sized when it
        // arrived (they are exported as counters: they never go down).
        for w in [Some("5m"), None] {
            let v = st.tools_view(w, None, t0 + 110).unwrap();
            let r = &v.tools[0];
            assert_eq!(
                (
                    r.count,
                    r.counters.truncated_upstream(),
                    r.counters.lower_bound(),
                    r.counters.derived()
                ),
                (4, 3, 1, 3),
                "{w:?}"
            );
            assert_eq!(r.counters.upstream_limit(), Some(1000));
        }
        let s = st.series.values().next().unwrap();
        let flagged: Vec<_> = s
            .largest
            .iter()
            .map(|l| (l.result.hex().span_id, l.truncated_upstream))
            .collect();
        assert!(
            flagged.contains(&(crate::hex::encode(&[1; 8]), true)),
            "{flagged:?}"
        );
        assert!(
            flagged.contains(&(crate::hex::encode(&[2; 8]), true)),
            "{flagged:?}"
        );
        assert!(
            flagged.contains(&(crate::hex::encode(&[4; 8]), true)),
            "{flagged:?}"
        );
        // The earlier slot closed into a history point: it counts them too.
        let p = s.history.iter().find(|p| p.at_unix <= t0).unwrap();
        assert_eq!(p.truncated_upstream, 2);
    }

    #[test]
    fn an_owned_batch_of_signals_is_recorded_as_its_calls_whatever_their_number() {
        use crate::collector::ingest::record::Join;
        let mut st = State::new(limits(10));
        let t0_ms = 1_000_000_000;
        let signal = |key: u64, role: Role| {
            let mut r = rec("Bash", known(key + 1));
            r.join = Some(Join {
                key,
                role,
                alt: None,
            });
            r
        };
        // More calls than are released at once, each sent twice (the second a secondary
        // signal joined into the first), a part and a record that joins nothing between them.
        let calls = 2 * RELEASED_AT_ONCE as u64 + 3;
        let mut batch: Vec<ToolRecord> = (0..calls).map(|k| signal(k, Role::Primary)).collect();
        batch.push(rec("Read", known(7)));
        batch.push(signal(0, Role::Part));
        batch.extend((0..calls).map(|k| signal(k, Role::Secondary)));
        st.record_owned_batch_ms(batch, t0_ms);
        let count = |st: &State, tool: &str| {
            let v = st.tools_view(None, None, t0_ms / 1000 + 60).unwrap();
            v.tools
                .iter()
                .find(|t| t.tool == tool)
                .map_or(0, |t| t.count)
        };
        assert_eq!((count(&st, "Read"), count(&st, "Bash")), (1, 0));
        assert_eq!(st.joiner.waiting(), calls as usize);
        st.release_joined(t0_ms + st.limits.join_window_ms);
        assert_eq!(count(&st, "Bash"), calls);
        assert_eq!(st.joiner.waiting(), 0);
        assert_eq!(st.joiner.stats.merged, calls + 1);
        let v = st.tools_view(None, None, t0_ms / 1000 + 60).unwrap();
        let bash = v.tools.iter().find(|t| t.tool == "Bash").unwrap();
        // Each call sized by its primary signal, the secondary adding nothing.
        assert_eq!(bash.sized, calls);
    }

    #[test]
    fn counts_and_quantiles() {
        let mut st = State::new(limits(10));
        for b in 1..=100 {
            st.record(&rec("grep", known(b * 100)), 1000);
        }
        st.record(&rec("grep", Size::Unknown(Unknown::Missing)), 1000);
        st.record(&rec("grep", Size::Failed), 1000);
        let v = st.tools_view(Some("5m"), None, 1000).unwrap();
        let r = &v.tools[0];
        assert_eq!(
            (
                r.count,
                r.sized,
                r.counters.unknown_size(),
                r.counters.errors()
            ),
            (102, 100, 1, 1)
        );
        assert!((r.p95 as f64 - 9500.0).abs() / 9500.0 <= 0.01, "{}", r.p95);
        assert!(
            (r.latency_p95_ms - 1.5).abs() <= 0.015,
            "{}",
            r.latency_p95_ms
        );
        let d = st.tool_view("grep", None, None, 1000).unwrap().unwrap();
        assert_eq!(
            d.series[0]
                .largest
                .iter()
                .map(|l| l.bytes)
                .collect::<Vec<_>>(),
            vec![10000, 9900, 9800]
        );
    }

    #[test]
    fn largest_results_leave_once_past_the_longest_window() {
        // Cleared once a second: a result past the hour leaves at the first record of a later
        // second, one still inside it stays, and results merged in are cleared again.
        let mut st = State::new(limits(10));
        let t0 = 1_000_000;
        let largest = |st: &State| -> Vec<u64> {
            let s = st.series.values().next().unwrap();
            s.largest.iter().map(|l| l.bytes).collect()
        };
        st.record(&rec("grep", known(9000)), t0);
        st.record(&rec("grep", known(8000)), t0 + 1);
        st.record(&rec("grep", known(100)), t0 + 3599);
        assert_eq!(largest(&st), vec![9000, 8000, 100]);
        st.record(&rec("grep", known(200)), t0 + 3600);
        assert_eq!(largest(&st), vec![8000, 200, 100]);
        st.record(&rec("grep", known(300)), t0 + 3600);
        assert_eq!(largest(&st), vec![8000, 300, 200]);
        st.record(&rec("grep", known(50)), t0 + 3601);
        assert_eq!(largest(&st), vec![300, 200, 50]);
        // A merge brings an old result back (restored series of another key): the next record,
        // in the same second, clears it.
        let old = {
            let mut other = State::new(limits(10));
            other.record(&rec("grep", known(7000)), t0);
            other.series.into_values().next().unwrap()
        };
        let s = st.series.values_mut().next().unwrap();
        s.merge(old, &st.limits);
        assert_eq!(largest(&st), vec![7000, 300, 200]);
        st.record(&rec("grep", known(10)), t0 + 3601);
        assert_eq!(largest(&st), vec![300, 200, 10]);
    }

    #[test]
    fn sampled_records_count_their_adjusted_counts_and_sizes_once() {
        let mut st = State::new(stacked(1000));
        let tenth = crate::collector::ingest::sampling::Weight::of_probability(0.1).unwrap();
        for (n, b) in [100, 2000, 300, 5000].into_iter().enumerate() {
            let mut r = rec("a", known(b));
            r.weight = tenth;
            r.truncated = n == 0;
            st.record(&r, 1000);
        }
        st.record(&rec("a", known(200)), 1000);
        let row = &st.tools_view(None, None, 1001).unwrap().tools[0];
        assert_eq!((row.count, row.spans, row.sized), (41, 5, 5));
        assert!(row.extrapolated);
        // The period's mean weight (41 calls for 5 records) applied to its one truncated record.
        assert_eq!(row.counters.truncated(), 8);
        let key = SeriesKey {
            service: "svc".into(),
            tool: "a".into(),
        };
        // The two results over 1000 bytes, 10 calls each, exactly.
        assert_eq!(st.series[&key].over_ceiling, [("default".into(), 20_000)]);
        // The sizes are the records', once each.
        assert_eq!(row.max, 5000);
        let plain = {
            let mut p = State::new(stacked(1000));
            p.record(&rec("a", known(100)), 1000);
            p.tools_view(None, None, 1001).unwrap().tools[0].clone()
        };
        assert_eq!((plain.count, plain.spans), (1, 1));
        assert!(!plain.extrapolated);
    }

    #[test]
    fn windows_slide() {
        let mut st = State::new(limits(10));
        st.record(&rec("a", known(10)), 1000);
        st.record(&rec("a", known(10)), 1000 + 400);
        assert_eq!(
            st.tools_view(Some("5m"), None, 1400).unwrap().tools[0].count,
            1
        );
        assert_eq!(
            st.tools_view(Some("1h"), None, 1400).unwrap().tools[0].count,
            2
        );
        assert_eq!(
            st.tools_view(Some("all"), None, 9999).unwrap().tools[0].count,
            2
        );
        assert!(st.tools_view(Some("2h"), None, 1400).is_err());
    }

    /// Sizes and latencies recorded once, in the shortest window's slot, and folded when it
    /// closes read exactly as recording them in every period: since start, per window, in the
    /// snapshot, and after a restore in the middle of a slot (nothing counted twice).
    #[test]
    fn folded_histograms_read_as_recorded_everywhere() {
        use crate::collector::state::histogram::Hist;
        let t0 = 1_000_020; // 60 s slots of the 5m window, 720 s slots of the 1h window
        let at = [t0, t0 + 10, t0 + 61, t0 + 130, t0 + 131, t0 + 500, t0 + 700];
        let mut st = State::new(limits(10));
        let mut all = Hist::new(MAX_BYTES);
        let mut recent = Hist::new(MAX_BYTES);
        for (k, &t) in at.iter().enumerate() {
            let bytes = 1000 * (k as u64 + 1);
            let mut r = rec("a", known(bytes));
            r.latency_us = 100 * (k as u64 + 1);
            st.record(&r, t);
            all.record(bytes);
            if t + 300 > t0 + 700 {
                recent.record(bytes);
            }
        }
        let q = |h: &Hist| (h.len(), h.quantile(0.5), h.quantile(0.95), h.max());
        let s = st.series.values().next().unwrap();
        assert!(s.unfolded, "the newest slot is still open");
        let now = t0 + 700;
        assert_eq!(q(&s.total_stats().size), q(&all));
        assert_eq!(q(&s.window_stats(1, now).size), q(&all), "1h");
        assert_eq!(q(&s.window_stats(0, now).size), q(&recent), "5m");
        assert_eq!(s.total_stats().latency.len(), at.len() as u64);
        // The API and the exposition read the same.
        let v = st.tools_view(Some("1h"), None, now).unwrap();
        assert_eq!(v.tools[0].p95, all.quantile(0.95));
        let f = crate::collector::read::exposition::Frame::capture(&st, now);
        assert_eq!(
            f.series[0].windows[2].as_ref().unwrap().p95,
            all.quantile(0.95)
        );

        // The snapshot holds every period whole; restored, the open slot keeps recording and
        // is folded once.
        let snap = st.snapshot(now, Vec::new());
        let mut back = State::new(limits(10));
        back.restore(serde_json::from_slice(&serde_json::to_vec(&snap).unwrap()).unwrap());
        let s = back.series.values().next().unwrap();
        assert_eq!(q(&s.total_stats().size), q(&all));
        assert_eq!(q(&s.window_stats(1, now).size), q(&all), "1h restored");
        assert_eq!(q(&s.window_stats(0, now).size), q(&recent), "5m restored");
        back.record(&rec("a", known(9000)), now + 5);
        all.record(9000);
        back.record(&rec("a", known(8000)), now + 400);
        all.record(8000);
        let s = back.series.values().next().unwrap();
        assert_eq!(q(&s.total_stats().size), q(&all));
        // At now + 400 the 1h window still holds every result, the 5m window the last one.
        assert_eq!(q(&s.window_stats(1, now + 400).size), q(&all));
        assert_eq!(s.window_stats(0, now + 400).size.len(), 1);
    }

    #[test]
    fn cardinality_cap_routes_to_overflow() {
        let mut st = State::new(limits(3));
        for i in 0..10 {
            st.record(&rec(&format!("t{i}"), known(1)), 1000);
        }
        assert_eq!(st.series_count(), 4);
        assert_eq!(st.overflow_records, 7);
        // A known series keeps recording.
        st.record(&rec("t0", known(1)), 1000);
        assert_eq!(st.overflow_records, 7);
    }

    #[test]
    fn observers_see_every_record_with_its_series() {
        use std::sync::{Arc, Mutex};
        type Log = Arc<Mutex<Vec<(String, u32, u64, Option<String>)>>>;
        struct Seen(Log);
        impl ResultObserver for Seen {
            fn observe(&mut self, seen: &Observed<'_>) {
                self.0.lock().unwrap().push((
                    seen.key.tool.clone(),
                    seen.series,
                    seen.record.size.bytes().unwrap_or(0),
                    seen.over.as_ref().map(|(_, c)| c.layer_id.to_string()),
                ));
            }
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut st = State::new(limits(1));
        st.add_observer(Box::new(Seen(seen.clone())));
        st.record(&rec("a", known(5)), 1000);
        st.record(&rec("a", known(60_000)), 1000);
        st.record(&rec("b", known(7)), 1000);
        let got = seen.lock().unwrap().clone();
        assert_eq!(
            got,
            vec![
                ("a".into(), 1, 5, None),
                ("a".into(), 1, 60_000, Some("default".into())),
                (OVERFLOW.into(), 2, 7, None)
            ]
        );
    }

    /// What the agent observed wins over the catalog: the layer it names, at the limit it
    /// says applied (Gemini CLI's `threshold` is min(40,000, 4 × the context left)).
    #[test]
    fn the_agents_observed_layer_and_limit_win_over_the_catalog() {
        let stack = Stack::default();
        let limits = Limits {
            stacks: Arc::new(stacks::Stacks::new(&stack, &Default::default())),
            ..limits(10)
        };
        let verdict = |service: &str, tool: &str, r: &ToolRecord| {
            let p = limits.stacks.profile(service, tool);
            State::verdict(&limits, &p, r).map(|(_, c)| (c.layer_id.to_string(), c.limit, c.value))
        };
        let mut r = rec("run_shell_command", known(12_050));
        r.upstream = crate::collector::ingest::record::Upstream {
            layer: Some("gemini-cli.tool-output"),
            original: Some(20_000),
            limit: Some(12_000),
            ..Default::default()
        };
        assert_eq!(
            verdict("gemini-cli", "run_shell_command", &r),
            Some(("gemini-cli.tool-output".into(), 12_000, 20_000))
        );
        // Without the threshold: the catalog's 40,000, not shown over.
        r.upstream.limit = None;
        assert_eq!(
            verdict("gemini-cli", "run_shell_command", &r).map(|v| v.1),
            Some(40_000)
        );
        // Qwen Code's shell notice names its own layer, though the catalog's weakest layer for
        // other tools (25,000) is lower.
        let mut q = rec("run_shell_command", known(4_480));
        q.upstream = crate::collector::ingest::record::Upstream {
            layer: Some("qwen-code.shell"),
            original: Some(109_009),
            limit: Some(30_000),
            ..Default::default()
        };
        assert_eq!(
            verdict("qwen-code", "run_shell_command", &q).map(|v| (v.0, v.1)),
            Some(("qwen-code.shell".into(), 30_000))
        );
    }

    pub(crate) fn stacked(ceiling: u64) -> Limits {
        let flag = crate::layers::StackConfig {
            ceiling_bytes: Some(ceiling),
            ..crate::layers::StackConfig::parse_list("codex.tool-output.tokens,default").unwrap()
        };
        let stack = Stack::resolve(Some(&flag), None, None).unwrap();
        Limits {
            size_bounds: size_bounds(&stack).into(),
            stacks: Arc::new(stacks::Stacks::daemon_only(stack)),
            ..limits(10)
        }
    }

    #[test]
    fn ceilings_are_bucket_bounds() {
        let l = stacked(12_345);
        assert!(l.size_bounds.contains(&12_345));
        assert!(l.size_bounds.contains(&40_000));
        assert!(l.size_bounds.windows(2).all(|w| w[0] < w[1]));
        let d = size_bounds(&Stack::default());
        for b in [13_107, 14_745, 16_384, 16_793, 17_203, 18_022] {
            assert!(d.contains(&b), "{b} in {d:?}");
        }
        assert_eq!(d.len(), SIZE_BUCKETS.len() + 5);
    }

    #[test]
    fn space_saving_keeps_heavy_hitters() {
        let mut m = TopArgs::default();
        for _ in 0..30 {
            m.observe(ArgsHash::new("hot"), 10, 4);
        }
        for i in 0..20 {
            m.observe(ArgsHash::new(&format!("cold{i}")), i, 4);
        }
        assert_eq!(m.get(&ArgsHash::new("hot")).map(|a| a.count), Some(30));
        assert_eq!(m.len(), 4);
        // Each new hash took the place of the least called one and inherited its count + 1:
        // the counts are upper bounds, and they sum to the calls seen.
        assert_eq!(m.iter().map(|(_, a)| a.count).sum::<u64>(), 50);
        assert_eq!(
            m.get(&ArgsHash::new("cold19")).map(|a| a.max_bytes),
            Some(19)
        );
        // Merged with another, the most called are kept.
        let mut o = TopArgs::default();
        for _ in 0..40 {
            o.observe(ArgsHash::new("other"), 5, 4);
        }
        o.observe(ArgsHash::new("hot"), 99, 4);
        m.merge(o, 2);
        let mut kept: Vec<_> = m
            .iter()
            .map(|(h, a)| (h.to_string(), a.count, a.max_bytes))
            .collect();
        kept.sort();
        assert_eq!(kept, [("hot".into(), 31, 99), ("other".into(), 40, 5)]);
        let mut none = TopArgs::default();
        none.observe(ArgsHash::new("x"), 1, 0);
        assert_eq!(none.len(), 0);
    }

    #[test]
    fn memory_per_series_at_steady_state() {
        // Every slot of both default windows populated, as after an hour of the load
        // generator's storm mix: sizes uniform in 0..32 KiB (half over the ceiling), latencies
        // log-normal around 50 ms, 4,099 argument hashes, 12 calls a second.
        let config = Config::default();
        let mut st = State::new(Limits::from_config(&config));
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let t0 = 1_800_000_000;
        for i in 0..3600 * 12u64 {
            let mut r = rec("fetch", known(next() % 32_768));
            let z: f64 = (0..12)
                .map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64)
                .sum::<f64>()
                - 6.0;
            r.latency_us = (50_000.0 * (0.8 * z).exp()) as u64;
            r.args_hash = Some(ArgsHash::new(&format!("{:012x}", next() % 4099)));
            r.trace_id = [i as u8; 16];
            st.record(&r, t0 + i / 12);
        }
        let s = st.series.values().next().unwrap();
        assert!(s
            .windows
            .iter()
            .all(|w| w.slots.len() == SLOTS_PER_WINDOW as usize));
        let bytes = s.heap_bytes();
        eprintln!(
            "one series at steady state: {bytes} bytes ({:.1} KiB)",
            bytes as f64 / 1024.0
        );
        // The bound of `docs/collector.md`: 11 histogram pairs at their ceilings plus the rest.
        let bound = 11 * crate::collector::state::histogram::max_histogram_bytes() + 16 * 1024;
        assert!(bytes < bound, "{bytes} >= {bound}");
        // The steady-state figure of `docs/collector.md`.
        assert!(bytes <= 64 * 1024, "{bytes} bytes: over 64 KiB");
        assert!(bytes > 11 * 4096, "{bytes}: every pair holds counts");
    }
}
