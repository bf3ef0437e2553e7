//! The aggregator: the one task that owns per-(service, tool) state.
//!
//! Receivers hand it batches of [`ToolRecord`]s over a bounded queue (`try_send`; a full queue is
//! refused upstream with 503 / UNAVAILABLE and counted, so nothing accepted is lost). Readers (the
//! admin API, `/metrics`) send it a [`Command`] and get a computed view back; nobody else touches
//! the state. Every `snapshot_interval` it serializes the state and hands the bytes to a blocking
//! writer; a slow disk delays only the next snapshot, never ingestion.
//!
//! Per series it keeps HDR histograms of result bytes and latency (see [`super::histogram`]),
//! calls, errors, truncated, truncated-upstream and unknown-size counts, since start and in
//! sliding windows made of [`SLOTS_PER_WINDOW`] time slots each (a 5m window covers between 4 and
//! 5 minutes of the most recent data), exact classic-histogram bucket counts for `/metrics`, the
//! largest recent results and a space-saving top-k of argument hashes.
//!
//! Cardinality: at most `max_series` series; records of further series go to one overflow series
//! (`tool="__overflow__"`, `service="__overflow__"`) and are counted. Memory is therefore bounded
//! by `max_series` × (histograms of one series): at most 11 size + latency pairs with the default
//! two windows, ≈ 281 KiB (see [`super::histogram`] for the computation).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use super::alerts::SavedAlert;
use super::config::Config;
use super::histogram::{Hist, HistSnapshot, MAX_BYTES, MAX_LATENCY_US};
use super::recognize::{ArgsHash, Size, SizeSource, ToolRecord};
use super::store::Store;
use super::SelfStats;
use crate::layers::Stack;

/// Time slots per sliding window.
pub const SLOTS_PER_WINDOW: u64 = 5;
/// Name of the overflow series' service and tool.
pub const OVERFLOW: &str = "__overflow__";
/// Upper bounds of the classic `toolsize_tool_result_size_bytes` buckets (bytes), before the
/// stack's ceilings are added ([`size_bounds`]).
///
/// Prometheus' `histogram_quantile` interpolates linearly inside a bucket, so its error grows
/// with the bucket's width. The grid is quarter-octave (×1.25, ×1.5, ×1.75 between powers of
/// two) from 4 KiB to 1 MiB, where layer ceilings live, and half-octave (×1.5) below and above.
/// `tests/fleet_p95.rs` measures the fleet p95 Prometheus computes from them against the exact
/// one (within 1.5 % on its workload; up to 80 % on the previous 15-bucket layout).
pub const SIZE_BUCKETS: &[u64] = &[
    256, 384, 512, 768, 1_024, 1_536, 2_048, 3_072, 4_096, 5_120, 6_144, 7_168, 8_192, 10_240,
    12_288, 14_336, 16_384, 20_480, 24_576, 28_672, 32_768, 40_960, 49_152, 57_344, 65_536, 81_920,
    98_304, 114_688, 131_072, 163_840, 196_608, 229_376, 262_144, 327_680, 393_216, 458_752,
    524_288, 655_360, 786_432, 917_504, 1_048_576, 1_572_864, 2_097_152, 3_145_728, 4_194_304,
    6_291_456, 8_388_608, 12_582_912, 16_777_216,
];
/// The bucket layout of snapshots written before they recorded theirs.
const LEGACY_SIZE_BUCKETS: &[u64] = &[
    256, 1024, 4096, 8000, 10_000, 16_384, 20_000, 25_000, 32_768, 65_536, 131_072, 262_144,
    1_048_576, 4_194_304, 16_777_216,
];
/// Fractions of each byte ceiling added as bucket bounds beside the ceiling itself, so the
/// size distribution just under a ceiling (where `ToolResultSizeNearCeiling` looks, at 0.8 by
/// default) is read without interpolating across a wide bucket.
pub const NEAR_CEILING_BOUNDS: &[(u64, u64)] = &[(4, 5), (9, 10)];
/// Over-ceiling results kept per series for `/api/v1/tools/{tool}`, most recent last.
pub const OVER_CEILING_RECENT: usize = 20;

/// [`SIZE_BUCKETS`] with every byte limit of `stack` added, and 80 % and 90 % of it
/// ([`NEAR_CEILING_BOUNDS`]), sorted and deduplicated: the classic histogram can then answer
/// "how many results were over this layer's limit" exactly.
pub fn size_bounds(stack: &Stack) -> Vec<u64> {
    let ceilings = stack
        .layers()
        .iter()
        .filter_map(|l| l.limit_bytes.map(|b| b.bytes));
    let mut b: Vec<u64> = SIZE_BUCKETS
        .iter()
        .copied()
        .chain(ceilings.flat_map(|c| {
            NEAR_CEILING_BOUNDS
                .iter()
                .map(move |(n, d)| c / d * n + c % d * n / d)
                .chain([c])
        }))
        .filter(|&b| b > 0 && b <= MAX_BYTES)
        .collect();
    b.sort_unstable();
    b.dedup();
    b
}

/// Upper bounds of the classic `toolsize_tool_call_duration_seconds` buckets, in microseconds.
pub const LATENCY_BUCKETS_US: &[u64] = &[
    1_000, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000,
    5_000_000, 10_000_000, 30_000_000, 60_000_000,
];

/// A fast keyed hasher (the FxHash mix) for the aggregator's maps, seeded per process so tool
/// names cannot be chosen to collide. SipHash was a visible share of the per-span cost.
#[derive(Debug, Clone, Copy)]
pub struct FxBuild(u64);

impl Default for FxBuild {
    fn default() -> Self {
        use std::hash::{BuildHasher, Hasher};
        Self(
            std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish(),
        )
    }
}

impl std::hash::BuildHasher for FxBuild {
    type Hasher = FxHasher;
    fn build_hasher(&self) -> FxHasher {
        FxHasher(self.0)
    }
}

/// The hasher of [`FxBuild`].
#[derive(Debug, Clone, Copy)]
pub struct FxHasher(u64);

impl FxHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl std::hash::Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut v = [0u8; 8];
            v[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(v));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A (service, tool) pair.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SeriesKey {
    /// `service.name`.
    pub service: String,
    /// Tool name.
    pub tool: String,
}

/// Something told about every recorded result; the seam where ceiling checks and alerts plug in.
pub trait ResultObserver: Send + 'static {
    /// Called once per tool record, after it was added to `key`'s series.
    fn observe(&mut self, key: &SeriesKey, record: &ToolRecord, now_unix: u64);

    /// Called every evaluation interval with the whole state (window rules go here).
    fn periodic(
        &mut self,
        _series: &HashMap<SeriesKey, Series, FxBuild>,
        _limits: &Limits,
        _now_unix: u64,
    ) {
    }
}

/// Counters and histograms of one series over one period.
#[derive(Debug, Clone)]
pub struct Stats {
    /// Tool calls.
    pub calls: u64,
    /// Failed calls.
    pub errors: u64,
    /// Results the tool reported truncated.
    pub truncated: u64,
    /// Results that show an upstream cut.
    pub truncated_upstream: u64,
    /// Successful calls whose size is unknown.
    pub unknown_size: u64,
    /// Sizes measured by the tool.
    pub measured: u64,
    /// Sizes derived from content.
    pub derived: u64,
    /// Result bytes.
    pub size: Hist,
    /// Latency, microseconds.
    pub latency: Hist,
}

impl Default for Stats {
    fn default() -> Self {
        Self {
            calls: 0,
            errors: 0,
            truncated: 0,
            truncated_upstream: 0,
            unknown_size: 0,
            measured: 0,
            derived: 0,
            size: Hist::new(MAX_BYTES),
            latency: Hist::new(MAX_LATENCY_US),
        }
    }
}

impl Stats {
    fn record(&mut self, r: &ToolRecord) {
        self.calls += 1;
        self.errors += u64::from(r.error);
        self.truncated += u64::from(r.truncated);
        self.truncated_upstream += u64::from(r.truncated_upstream);
        match r.size {
            Size::Known { bytes, source } => {
                self.size.record(bytes);
                match source {
                    SizeSource::Measured => self.measured += 1,
                    SizeSource::Derived => self.derived += 1,
                }
            }
            Size::Unknown(_) => self.unknown_size += 1,
            Size::Failed => {}
        }
        self.latency.record(r.latency_us);
    }

    fn add(&mut self, o: &Stats) {
        self.calls += o.calls;
        self.errors += o.errors;
        self.truncated += o.truncated;
        self.truncated_upstream += o.truncated_upstream;
        self.unknown_size += o.unknown_size;
        self.measured += o.measured;
        self.derived += o.derived;
        self.size.add(&o.size);
        self.latency.add(&o.latency);
    }
}

/// One sliding window: the most recent [`SLOTS_PER_WINDOW`] slots.
#[derive(Debug, Clone)]
struct Ring {
    slot_secs: u64,
    slots: VecDeque<(u64, Stats)>,
}

impl Ring {
    fn new(window: Duration) -> Self {
        Self {
            slot_secs: (window.as_secs() / SLOTS_PER_WINDOW).max(1),
            slots: VecDeque::new(),
        }
    }

    fn current(&mut self, now: u64) -> &mut Stats {
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

    /// The slots of the window that ended by `end` (Unix seconds).
    fn merged_ending_by(&self, now: u64, end: u64) -> Stats {
        let idx = now / self.slot_secs;
        let mut out = Stats::default();
        for (i, s) in &self.slots {
            if i + SLOTS_PER_WINDOW > idx && (i + 1) * self.slot_secs <= end {
                out.add(s);
            }
        }
        out
    }

    fn merged(&self, now: u64) -> Stats {
        let idx = now / self.slot_secs;
        let mut out = Stats::default();
        for (i, s) in &self.slots {
            if i + SLOTS_PER_WINDOW > idx {
                out.add(s);
            }
        }
        out
    }
}

/// One result among the largest recent ones.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Largest {
    /// Bytes.
    pub bytes: u64,
    /// Trace id, hex.
    pub trace_id: String,
    /// Span id, hex.
    pub span_id: String,
    /// Arguments hash, when known.
    pub args_hash: Option<String>,
    /// When the daemon received it, Unix seconds.
    pub at_unix: u64,
    /// The content showed an upstream cut: `bytes` is a lower bound.
    pub truncated_upstream: bool,
}

/// One recent result over the ceiling of its weakest cutting layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverCeiling {
    /// Result bytes.
    pub bytes: u64,
    /// The weakest layer that cuts it.
    pub layer: String,
    /// That layer's effective limit, in `unit`.
    pub limit: u64,
    /// The layer's unit.
    pub unit: String,
    /// The result's size in `unit`.
    pub value: u64,
    /// Whether `value` was estimated from bytes.
    pub estimated: bool,
    /// Trace id, hex.
    pub trace_id: String,
    /// Span id, hex.
    pub span_id: String,
    /// Arguments hash, when known.
    pub args_hash: Option<String>,
    /// When the daemon received it, Unix seconds.
    pub at_unix: u64,
}

/// How often one arguments hash was seen (space-saving estimate: an upper bound).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ArgsStat {
    /// Calls with this hash.
    pub count: u64,
    /// Largest result with this hash.
    pub max_bytes: u64,
}

/// Everything kept for one series.
#[derive(Debug, Clone)]
pub struct Series {
    /// Since start (or since the restored snapshot's start).
    pub total: Stats,
    windows: Vec<Ring>,
    /// Non-cumulative counts per [`SIZE_BUCKETS`] bound, plus +Inf last.
    pub size_buckets: Vec<u64>,
    /// Non-cumulative counts per [`LATENCY_BUCKETS_US`] bound, plus +Inf last.
    pub latency_buckets: Vec<u64>,
    /// Sum of known result bytes.
    pub size_sum: u64,
    /// Sum of latencies, microseconds.
    pub latency_sum_us: u64,
    /// Largest recent results, largest first.
    pub largest: Vec<Largest>,
    /// Arguments hashes (space-saving top-k).
    pub args: HashMap<ArgsHash, ArgsStat, FxBuild>,
    /// Results over a ceiling since start, by the weakest layer that cut them (few layers: a
    /// vector).
    pub over_ceiling: Vec<(String, u64)>,
    /// The most recent over-ceiling results, oldest first, at most [`OVER_CEILING_RECENT`].
    pub over_recent: VecDeque<OverCeiling>,
}

impl Series {
    /// The stats of window `i` (an index into [`Limits::windows`]) at `now`.
    pub fn window_stats(&self, i: usize, now: u64) -> Stats {
        self.windows
            .get(i)
            .map(|w| w.merged(now))
            .unwrap_or_default()
    }

    /// The stats of the slots of window `i` that ended by `end`: with the 1h window and
    /// `end = now - 5 min`, between 36 and 48 minutes of data ending 5 to 17 minutes ago.
    pub fn window_stats_ending_by(&self, i: usize, now: u64, end: u64) -> Stats {
        self.windows
            .get(i)
            .map(|w| w.merged_ending_by(now, end))
            .unwrap_or_default()
    }

    /// Adds everything of `o` (a series merged into the overflow one on restore).
    fn merge(&mut self, o: Series, limits: &Limits) {
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
        for (h, a) in o.args {
            let e = self.args.entry(h).or_default();
            e.count += a.count;
            e.max_bytes = e.max_bytes.max(a.max_bytes);
        }
        if self.args.len() > limits.top_args_hashes {
            let mut v: Vec<_> = self.args.drain().collect();
            v.sort_by_key(|e| std::cmp::Reverse(e.1.count));
            v.truncate(limits.top_args_hashes);
            self.args.extend(v);
        }
        for (id, n) in o.over_ceiling {
            add_over(&mut self.over_ceiling, &id, n);
        }
        self.over_recent.extend(o.over_recent);
        self.over_recent
            .make_contiguous()
            .sort_by_key(|r| r.at_unix);
        while self.over_recent.len() > OVER_CEILING_RECENT {
            self.over_recent.pop_front();
        }
    }

    fn new(limits: &Limits) -> Self {
        Self {
            total: Stats::default(),
            windows: limits.windows.iter().map(|(_, d)| Ring::new(*d)).collect(),
            size_buckets: vec![0; limits.size_bounds.len() + 1],
            latency_buckets: vec![0; LATENCY_BUCKETS_US.len() + 1],
            size_sum: 0,
            latency_sum_us: 0,
            largest: Vec::new(),
            args: HashMap::default(),
            over_ceiling: Vec::new(),
            over_recent: VecDeque::new(),
        }
    }
}

fn add_over(counts: &mut Vec<(String, u64)>, id: &str, n: u64) {
    match counts.iter_mut().find(|(l, _)| l == id) {
        Some((_, c)) => *c += n,
        None => counts.push((id.to_string(), n)),
    }
}

/// Limits of the aggregation.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Windows: label and length.
    pub windows: Vec<(String, Duration)>,
    /// Cardinality cap.
    pub max_series: usize,
    /// Largest results kept per series.
    pub largest_results: usize,
    /// Argument hashes kept per series.
    pub top_args_hashes: usize,
    /// The effective layer stack; every result of known size is checked against it.
    pub stack: Arc<Stack>,
    /// Upper bounds of the classic size histogram: [`size_bounds`] of the stack.
    pub size_bounds: Arc<[u64]>,
}

impl Limits {
    /// The limits of a configuration.
    pub fn from_config(c: &Config) -> Self {
        Self {
            windows: c.windows(),
            max_series: c.aggregation.max_series,
            largest_results: c.aggregation.largest_results,
            top_args_hashes: c.aggregation.top_args_hashes,
            size_bounds: size_bounds(&c.stack).into(),
            stack: Arc::new(c.stack.clone()),
        }
    }
}

/// The aggregated state, owned by the aggregator task.
pub struct State {
    /// Limits.
    pub limits: Limits,
    /// Series by key.
    pub series: HashMap<SeriesKey, Series, FxBuild>,
    /// Records routed to the overflow series.
    pub overflow_records: u64,
    /// Unix seconds the state started (kept across restores).
    pub started_unix: u64,
    /// Values above the histogram ceilings, clamped: (sizes, latencies).
    pub clamped: [u64; 2],
    /// The firing alerts written into every snapshot (shared with the alert task).
    pub saved_alerts: Arc<std::sync::RwLock<Vec<SavedAlert>>>,
    /// The firing alerts of the restored snapshot, for the alert task to take.
    pub restored_alerts: Vec<SavedAlert>,
    observers: Vec<Box<dyn ResultObserver>>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("series", &self.series.len())
            .finish()
    }
}

/// Current time, Unix seconds.
pub fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn hex(b: &[u8]) -> String {
    use std::fmt::Write;
    b.iter()
        .fold(String::with_capacity(b.len() * 2), |mut s, x| {
            let _ = write!(s, "{x:02x}");
            s
        })
}

impl State {
    /// An empty state.
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            series: HashMap::default(),
            overflow_records: 0,
            started_unix: now_unix(),
            clamped: [0; 2],
            saved_alerts: Arc::default(),
            restored_alerts: Vec::new(),
            observers: Vec::new(),
        }
    }

    /// Adds an observer told about every record (ceiling checks go here).
    pub fn add_observer(&mut self, o: Box<dyn ResultObserver>) {
        self.observers.push(o);
    }

    /// Runs the observers' window evaluations at `now`.
    pub fn evaluate_observers(&mut self, now: u64) {
        for o in &mut self.observers {
            o.periodic(&self.series, &self.limits, now);
        }
    }

    /// Number of series, the overflow series included.
    pub fn series_count(&self) -> usize {
        self.series.len()
    }

    /// Records a batch received at `now` (Unix seconds).
    pub fn record_batch(&mut self, records: &[ToolRecord], now: u64) {
        for r in records {
            self.record(r, now);
        }
    }

    /// Records one result.
    pub fn record(&mut self, r: &ToolRecord, now: u64) {
        if let Size::Known { bytes, .. } = r.size {
            self.clamped[0] += u64::from(bytes > MAX_BYTES);
        }
        self.clamped[1] += u64::from(r.latency_us > MAX_LATENCY_US);
        // One borrowed lookup in the common case; a key is allocated only for a new series.
        let probe = SeriesKeyRef {
            service: &r.service,
            tool: &r.tool,
        };
        if let Some(s) = self.series.get_mut(&probe as &dyn KeyLike) {
            Self::apply(s, &self.limits, r, now);
            if !self.observers.is_empty() {
                self.notify(&r.service, &r.tool, r, now);
            }
            return;
        }
        let (service, tool): (&str, &str) = if self.series.len() >= self.limits.max_series {
            self.overflow_records += 1;
            (OVERFLOW, OVERFLOW)
        } else {
            (&r.service, &r.tool)
        };
        let probe = SeriesKeyRef { service, tool };
        if !self.series.contains_key(&probe as &dyn KeyLike) {
            self.series.insert(
                SeriesKey {
                    service: service.to_string(),
                    tool: tool.to_string(),
                },
                Series::new(&self.limits),
            );
        }
        let s = self
            .series
            .get_mut(&probe as &dyn KeyLike)
            .expect("present or just inserted");
        Self::apply(s, &self.limits, r, now);
        if !self.observers.is_empty() {
            self.notify(service, tool, r, now);
        }
    }

    fn notify(&mut self, service: &str, tool: &str, r: &ToolRecord, now: u64) {
        let key = SeriesKey {
            service: service.to_string(),
            tool: tool.to_string(),
        };
        for o in &mut self.observers {
            o.observe(&key, r, now);
        }
    }

    fn apply(s: &mut Series, limits: &Limits, r: &ToolRecord, now: u64) {
        let windows = &limits.windows;
        s.total.record(r);
        for w in &mut s.windows {
            w.current(now).record(r);
        }
        if let Size::Known { bytes, source } = r.size {
            // Exact where the span carries the measure (measured sizes only), estimated from
            // bytes otherwise. Content-derived sizes travel as an attribute value, so
            // per-attribute layers apply to them.
            let verdict = limits
                .stack
                .verdict(&r.measures.measures(bytes), source == SizeSource::Derived);
            if let Some(cut) = verdict.weakest {
                add_over(&mut s.over_ceiling, cut.layer_id, 1);
                if s.over_recent.len() >= OVER_CEILING_RECENT {
                    s.over_recent.pop_front();
                }
                s.over_recent.push_back(OverCeiling {
                    bytes,
                    layer: cut.layer_id.to_string(),
                    limit: cut.limit,
                    unit: cut.unit.as_str().to_string(),
                    value: cut.value,
                    estimated: cut.estimated,
                    trace_id: hex(&r.trace_id),
                    span_id: hex(&r.span_id),
                    args_hash: r.args_hash.map(|h| h.to_string()),
                    at_unix: now,
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
            s.largest.retain(|l| l.at_unix + horizon > now);
            if keep > 0
                && (s.largest.len() < keep || s.largest.last().is_some_and(|l| l.bytes < bytes))
            {
                let at = s.largest.partition_point(|l| l.bytes >= bytes);
                s.largest.insert(
                    at,
                    Largest {
                        bytes,
                        trace_id: hex(&r.trace_id),
                        span_id: hex(&r.span_id),
                        args_hash: r.args_hash.map(|h| h.to_string()),
                        at_unix: now,
                        truncated_upstream: r.truncated_upstream,
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
            space_saving(&mut s.args, h, bytes, limits.top_args_hashes);
        }
    }

    /// The stats of `series` over `window` (`None`: since start).
    pub fn stats(&self, series: &Series, window: Option<usize>, now: u64) -> Stats {
        match window {
            None => series.total.clone(),
            Some(i) => series.windows[i].merged(now),
        }
    }

    /// Index of a window label; `Ok(None)` for `all`.
    pub fn window_index(&self, label: Option<&str>) -> Result<Option<usize>, String> {
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

fn space_saving(
    map: &mut HashMap<ArgsHash, ArgsStat, FxBuild>,
    h: ArgsHash,
    bytes: u64,
    cap: usize,
) {
    if cap == 0 {
        return;
    }
    if let Some(e) = map.get_mut(&h) {
        e.count += 1;
        e.max_bytes = e.max_bytes.max(bytes);
        return;
    }
    let mut count = 1;
    if map.len() >= cap {
        if let Some(min) = map
            .iter()
            .min_by_key(|(_, v)| v.count)
            .map(|(k, v)| (*k, v.count))
        {
            map.remove(&min.0);
            count = min.1 + 1;
        }
    }
    map.insert(
        h,
        ArgsStat {
            count,
            max_bytes: bytes,
        },
    );
}

/// Borrowed form of [`SeriesKey`] for allocation-free lookups.
struct SeriesKeyRef<'a> {
    service: &'a str,
    tool: &'a str,
}

trait KeyLike {
    fn parts(&self) -> (&str, &str);
}
impl KeyLike for SeriesKey {
    fn parts(&self) -> (&str, &str) {
        (&self.service, &self.tool)
    }
}
impl KeyLike for SeriesKeyRef<'_> {
    fn parts(&self) -> (&str, &str) {
        (self.service, self.tool)
    }
}
impl<'a> std::borrow::Borrow<dyn KeyLike + 'a> for SeriesKey {
    fn borrow(&self) -> &(dyn KeyLike + 'a) {
        self
    }
}
impl PartialEq for dyn KeyLike + '_ {
    fn eq(&self, o: &Self) -> bool {
        self.parts() == o.parts()
    }
}
impl Eq for dyn KeyLike + '_ {}
impl std::hash::Hash for dyn KeyLike + '_ {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let (s, t) = self.parts();
        s.hash(h);
        t.hash(h);
    }
}
impl std::hash::Hash for SeriesKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.service.hash(h);
        self.tool.hash(h);
    }
}

// ---------------------------------------------------------------------------------------------
// Views served by the admin API.

/// One row of `/api/v1/tools`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolRow {
    /// Service.
    pub service: String,
    /// Tool.
    pub tool: String,
    /// Calls.
    pub count: u64,
    /// Calls with a known size.
    pub sized: u64,
    /// Result bytes, median.
    pub p50: u64,
    /// Result bytes, 95th percentile.
    pub p95: u64,
    /// Result bytes, 99th percentile.
    pub p99: u64,
    /// Largest result bytes.
    pub max: u64,
    /// Failed calls.
    pub errors: u64,
    /// Results the tool reported truncated.
    pub truncated: u64,
    /// Results cut upstream (size is a lower bound).
    pub truncated_upstream: u64,
    /// Successful calls of unknown size.
    pub unknown_size: u64,
    /// Sizes measured by the tool.
    pub measured: u64,
    /// Sizes derived from content.
    pub derived: u64,
    /// Latency, 95th percentile, milliseconds.
    pub latency_p95_ms: f64,
}

/// `/api/v1/tools`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolsView {
    /// The window: a configured label or `all`.
    pub window: String,
    /// Rows sorted by service then tool.
    pub tools: Vec<ToolRow>,
}

/// One series of `/api/v1/tools/{tool}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDetail {
    /// The summary row.
    #[serde(flatten)]
    pub row: ToolRow,
    /// Largest recent results.
    pub largest: Vec<Largest>,
    /// Most repeated argument hashes.
    pub top_args: Vec<TopArgs>,
    /// Results over a ceiling since start, by the weakest layer that cut them.
    pub over_ceiling: Vec<OverCeilingCount>,
    /// The most recent over-ceiling results (at most [`OVER_CEILING_RECENT`]), newest first.
    pub recent_over_ceiling: Vec<OverCeiling>,
}

/// Over-ceiling results of one layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverCeilingCount {
    /// The layer id.
    pub layer: String,
    /// Results whose weakest cutting layer it was.
    pub count: u64,
}

/// A repeated arguments hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopArgs {
    /// The hash.
    pub args_hash: String,
    /// Calls (upper bound).
    pub count: u64,
    /// Largest result with it.
    pub max_bytes: u64,
}

/// `/api/v1/tools/{tool}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolView {
    /// The window.
    pub window: String,
    /// The tool.
    pub tool: String,
    /// One entry per service that called it.
    pub series: Vec<ToolDetail>,
}

fn row(key: &SeriesKey, st: &Stats) -> ToolRow {
    ToolRow {
        service: key.service.clone(),
        tool: key.tool.clone(),
        count: st.calls,
        sized: st.size.len(),
        p50: st.size.quantile(0.5),
        p95: st.size.quantile(0.95),
        p99: st.size.quantile(0.99),
        max: st.size.max(),
        errors: st.errors,
        truncated: st.truncated,
        truncated_upstream: st.truncated_upstream,
        unknown_size: st.unknown_size,
        measured: st.measured,
        derived: st.derived,
        latency_p95_ms: st.latency.quantile(0.95) as f64 / 1000.0,
    }
}

impl State {
    /// The `/api/v1/tools` view.
    pub fn tools_view(
        &self,
        window: Option<&str>,
        service: Option<&str>,
        now: u64,
    ) -> Result<ToolsView, String> {
        let w = self.window_index(window)?;
        let mut keys: Vec<&SeriesKey> = self
            .series
            .keys()
            .filter(|k| service.is_none_or(|s| s == k.service))
            .collect();
        keys.sort();
        let tools = keys
            .into_iter()
            .map(|k| row(k, &self.stats(&self.series[k], w, now)))
            .collect();
        Ok(ToolsView {
            window: window.unwrap_or("all").to_string(),
            tools,
        })
    }

    /// The `/api/v1/tools/{tool}` view; `Ok(None)` when no series has that tool.
    pub fn tool_view(
        &self,
        tool: &str,
        window: Option<&str>,
        service: Option<&str>,
        now: u64,
    ) -> Result<Option<ToolView>, String> {
        let w = self.window_index(window)?;
        let mut keys: Vec<&SeriesKey> = self
            .series
            .keys()
            .filter(|k| k.tool == tool && service.is_none_or(|s| s == k.service))
            .collect();
        if keys.is_empty() {
            return Ok(None);
        }
        keys.sort();
        let horizon = self
            .limits
            .windows
            .iter()
            .map(|(_, d)| d.as_secs())
            .max()
            .unwrap_or(3600);
        let series = keys
            .into_iter()
            .map(|k| {
                let s = &self.series[k];
                let mut top: Vec<TopArgs> = s
                    .args
                    .iter()
                    .map(|(h, a)| TopArgs {
                        args_hash: h.to_string(),
                        count: a.count,
                        max_bytes: a.max_bytes,
                    })
                    .collect();
                top.sort_by(|a, b| b.count.cmp(&a.count).then(a.args_hash.cmp(&b.args_hash)));
                top.truncate(10);
                ToolDetail {
                    row: row(k, &self.stats(s, w, now)),
                    largest: s
                        .largest
                        .iter()
                        .filter(|l| l.at_unix + horizon > now)
                        .cloned()
                        .collect(),
                    top_args: top,
                    over_ceiling: s
                        .over_ceiling
                        .iter()
                        .map(|(layer, count)| OverCeilingCount {
                            layer: layer.clone(),
                            count: *count,
                        })
                        .collect(),
                    recent_over_ceiling: s.over_recent.iter().rev().cloned().collect(),
                }
            })
            .collect();
        Ok(Some(ToolView {
            window: window.unwrap_or("all").to_string(),
            tool: tool.to_string(),
            series,
        }))
    }
}

// ---------------------------------------------------------------------------------------------
// Snapshots.

/// Serialized [`Stats`].
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StatsSnap {
    calls: u64,
    errors: u64,
    truncated: u64,
    truncated_upstream: u64,
    unknown_size: u64,
    measured: u64,
    derived: u64,
    size: HistSnapshot,
    latency: HistSnapshot,
}

impl From<&Stats> for StatsSnap {
    fn from(s: &Stats) -> Self {
        Self {
            calls: s.calls,
            errors: s.errors,
            truncated: s.truncated,
            truncated_upstream: s.truncated_upstream,
            unknown_size: s.unknown_size,
            measured: s.measured,
            derived: s.derived,
            size: s.size.to_snapshot(),
            latency: s.latency.to_snapshot(),
        }
    }
}

impl From<&StatsSnap> for Stats {
    fn from(s: &StatsSnap) -> Self {
        Self {
            calls: s.calls,
            errors: s.errors,
            truncated: s.truncated,
            truncated_upstream: s.truncated_upstream,
            unknown_size: s.unknown_size,
            measured: s.measured,
            derived: s.derived,
            size: Hist::from_snapshot(&s.size, MAX_BYTES),
            latency: Hist::from_snapshot(&s.latency, MAX_LATENCY_US),
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
}

/// The on-disk form of [`State`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Snapshot {
    /// Format version.
    pub version: u32,
    /// When it was written, Unix seconds.
    pub written_unix: u64,
    /// When the state started.
    pub started_unix: u64,
    /// Records routed to the overflow series.
    pub overflow_records: u64,
    /// Upper bounds of the size buckets (absent in older snapshots: [`SIZE_BUCKETS`]).
    #[serde(default)]
    size_bounds: Option<Vec<u64>>,
    series: Vec<SeriesSnap>,
    /// Firing alerts (absent in older snapshots: none).
    #[serde(default)]
    alerts: Vec<SavedAlert>,
}

/// The snapshot format version this build writes and reads.
pub const SNAPSHOT_VERSION: u32 = 1;

impl State {
    /// A snapshot of the whole state.
    pub fn snapshot(&self, now: u64) -> Snapshot {
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
                    over_recent: s.over_recent.iter().cloned().collect(),
                })
                .collect(),
            alerts: self
                .saved_alerts
                .read()
                .map(|a| a.clone())
                .unwrap_or_default(),
        }
    }

    /// Restores a snapshot into an empty state. Windows whose length changed since the snapshot
    /// start empty; bucket layouts that changed are dropped (the HDR histograms are kept).
    pub fn restore(&mut self, snap: Snapshot) -> Result<(), String> {
        if snap.version != SNAPSHOT_VERSION {
            return Err(format!(
                "snapshot version {} (this build reads {SNAPSHOT_VERSION})",
                snap.version
            ));
        }
        self.started_unix = snap.started_unix;
        self.overflow_records = snap.overflow_records;
        self.restored_alerts = snap.alerts;
        // `max_series` may have been lowered since the snapshot was written: the busiest series
        // are restored as they were, the rest merged into the overflow series (and logged).
        let mut series = snap.series;
        series.sort_by(|a, b| {
            let overflow = |k: &SeriesKey| k.service == OVERFLOW && k.tool == OVERFLOW;
            overflow(&b.key)
                .cmp(&overflow(&a.key))
                .then(b.total.calls.cmp(&a.total.calls))
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
            let mut s = Series::new(&self.limits);
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
            s.over_recent = ss.over_recent.into_iter().collect();
            while s.over_recent.len() > OVER_CEILING_RECENT {
                s.over_recent.pop_front();
            }
            if n < keep {
                self.series.insert(ss.key, s);
                continue;
            }
            merged += 1;
            merged_calls += s.total.calls;
            self.overflow_records += s.total.calls;
            let limits = &self.limits;
            self.series
                .entry(SeriesKey {
                    service: OVERFLOW.to_string(),
                    tool: OVERFLOW.to_string(),
                })
                .or_insert_with(|| Series::new(limits))
                .merge(s, limits);
        }
        if merged > 0 {
            tracing::warn!(
                merged,
                calls = merged_calls,
                max_series = self.limits.max_series,
                "Snapshot holds more series than max_series; the least used were merged into the overflow series."
            );
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// The task.

/// A batch of records from one OTLP request.
#[derive(Debug)]
pub struct Batch {
    /// The tool records.
    pub records: Vec<ToolRecord>,
}

/// A question for the aggregator.
#[derive(Debug)]
pub enum Command {
    /// `/api/v1/tools`.
    Tools {
        /// Window label.
        window: Option<String>,
        /// Service filter.
        service: Option<String>,
        /// Answer.
        reply: oneshot::Sender<Result<ToolsView, String>>,
    },
    /// `/api/v1/tools/{tool}`.
    Tool {
        /// Tool name.
        tool: String,
        /// Window label.
        window: Option<String>,
        /// Service filter.
        service: Option<String>,
        /// Answer.
        reply: oneshot::Sender<Result<Option<ToolView>, String>>,
    },
    /// `/metrics` text.
    Metrics {
        /// Answer.
        reply: oneshot::Sender<String>,
    },
    /// `/metrics` in the protobuf exposition, native histograms included.
    MetricsProto {
        /// Answer.
        reply: oneshot::Sender<Vec<u8>>,
    },
    /// Answer when the aggregator is running (readiness).
    Ping {
        /// Answer.
        reply: oneshot::Sender<()>,
    },
    /// Drain the queue, write a final snapshot, stop.
    Shutdown {
        /// Answered once stopped.
        reply: oneshot::Sender<()>,
    },
}

/// Batches drained before answering a command.
const DRAIN_BEFORE_ANSWER: usize = 4096;

/// Runs the aggregator until a [`Command::Shutdown`] or until every sender is gone.
pub(crate) async fn run(
    mut state: State,
    mut data: mpsc::Receiver<Batch>,
    mut control: mpsc::Receiver<Command>,
    store: Option<Arc<Store>>,
    stats: Arc<SelfStats>,
    snapshot_interval: Duration,
    evaluation_interval: Duration,
) {
    let mut tick = tokio::time::interval(snapshot_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    let mut evaluate = tokio::time::interval(evaluation_interval.max(Duration::from_millis(10)));
    evaluate.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    evaluate.tick().await;
    let mut writing: Option<tokio::task::JoinHandle<()>> = None;
    loop {
        tokio::select! {
            biased;
            cmd = control.recv() => match cmd {
                Some(Command::Shutdown { reply }) => {
                    while let Ok(b) = data.try_recv() {
                        ingest(&mut state, &stats, b);
                    }
                    if let Some(w) = writing.take() {
                        let _ = w.await;
                    }
                    if let Some(store) = &store {
                        let bytes = serde_json::to_vec(&state.snapshot(now_unix()));
                        write_snapshot(bytes, store.clone(), &stats).await;
                    }
                    let _ = reply.send(());
                    return;
                }
                Some(cmd) => {
                    // Read-your-writes: everything acknowledged before the question is counted
                    // in the answer (bounded, so a flood cannot starve readers).
                    for _ in 0..DRAIN_BEFORE_ANSWER {
                        match data.try_recv() {
                            Ok(b) => ingest(&mut state, &stats, b),
                            Err(_) => break,
                        }
                    }
                    answer(&state, &stats, cmd)
                }
                None => {}
            },
            batch = data.recv() => match batch {
                Some(b) => ingest(&mut state, &stats, b),
                None => return,
            },
            _ = evaluate.tick() => state.evaluate_observers(now_unix()),
            _ = tick.tick() => {
                if let Some(store) = &store {
                    if writing.as_ref().is_none_or(|w| w.is_finished()) {
                        let bytes = serde_json::to_vec(&state.snapshot(now_unix()));
                        let store = store.clone();
                        let stats = stats.clone();
                        writing = Some(tokio::task::spawn_blocking(move || match bytes {
                            Ok(b) => store_write(&store, &b, &stats),
                            Err(e) => tracing::error!(error = %e, "Snapshot serialization failed."),
                        }));
                    }
                }
            }
        }
    }
}

fn ingest(state: &mut State, stats: &SelfStats, b: Batch) {
    state.record_batch(&b.records, now_unix());
    stats.set_series(state.series_count() as u64, state.overflow_records);
}

fn answer(state: &State, stats: &SelfStats, cmd: Command) {
    let now = now_unix();
    match cmd {
        Command::Tools {
            window,
            service,
            reply,
        } => {
            let _ = reply.send(state.tools_view(window.as_deref(), service.as_deref(), now));
        }
        Command::Tool {
            tool,
            window,
            service,
            reply,
        } => {
            let _ = reply.send(state.tool_view(&tool, window.as_deref(), service.as_deref(), now));
        }
        Command::Metrics { reply } => {
            let _ = reply.send(super::exposition::render(state, stats, now));
        }
        Command::MetricsProto { reply } => {
            let _ = reply.send(super::exposition_proto::render(state, stats, now));
        }
        Command::Ping { reply } => {
            let _ = reply.send(());
        }
        Command::Shutdown { .. } => {}
    }
}

async fn write_snapshot(
    bytes: Result<Vec<u8>, serde_json::Error>,
    store: Arc<Store>,
    stats: &Arc<SelfStats>,
) {
    match bytes {
        Ok(b) => {
            let stats = stats.clone();
            let _ = tokio::task::spawn_blocking(move || store_write(&store, &b, &stats)).await;
        }
        Err(e) => tracing::error!(error = %e, "Snapshot serialization failed."),
    }
}

fn store_write(store: &Store, bytes: &[u8], stats: &SelfStats) {
    match store.write(bytes) {
        Ok(()) => stats.snapshot_written(now_unix()),
        Err(e) => {
            stats.snapshot_failed();
            tracing::error!(error = %e, path = %store.path().display(), "Snapshot write failed.");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::recognize::{Emitter, Extra, Unknown};

    fn limits(max_series: usize) -> Limits {
        Limits {
            windows: vec![
                ("5m".into(), Duration::from_secs(300)),
                ("1h".into(), Duration::from_secs(3600)),
            ],
            max_series,
            largest_results: 3,
            top_args_hashes: 2,
            stack: Arc::new(Stack::default()),
            size_bounds: SIZE_BUCKETS.into(),
        }
    }

    fn rec(tool: &str, size: Size) -> ToolRecord {
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
            measures: Extra::default(),
        }
    }

    fn known(b: u64) -> Size {
        Size::Known {
            bytes: b,
            source: SizeSource::Measured,
        }
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
            (r.count, r.sized, r.unknown_size, r.errors),
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
        struct Seen(Arc<Mutex<Vec<(String, u64)>>>);
        impl ResultObserver for Seen {
            fn observe(&mut self, key: &SeriesKey, r: &ToolRecord, _now: u64) {
                let b = match r.size {
                    Size::Known { bytes, .. } => bytes,
                    _ => 0,
                };
                self.0.lock().unwrap().push((key.tool.clone(), b));
            }
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut st = State::new(limits(1));
        st.add_observer(Box::new(Seen(seen.clone())));
        st.record(&rec("a", known(5)), 1000);
        st.record(&rec("a", known(6)), 1000);
        st.record(&rec("b", known(7)), 1000);
        assert_eq!(
            *seen.lock().unwrap(),
            vec![("a".into(), 5), ("a".into(), 6), (OVERFLOW.into(), 7)]
        );
    }

    #[test]
    fn restore_after_max_series_was_lowered_keeps_the_cap() {
        let mut st = State::new(limits(10));
        for (k, tool) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            for _ in 0..=k {
                st.record(&rec(tool, known(100)), 1000);
            }
        }
        let json = serde_json::to_vec(&st.snapshot(1000)).unwrap();
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
        let json = serde_json::to_vec(&st.snapshot(1000)).unwrap();
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

    fn stacked(ceiling: u64) -> Limits {
        let flag = crate::layers::StackConfig {
            ceiling_bytes: Some(ceiling),
            ..crate::layers::StackConfig::parse_list("codex.tool-output.tokens,default").unwrap()
        };
        let stack = Stack::resolve(Some(&flag), None, None).unwrap();
        Limits {
            size_bounds: size_bounds(&stack).into(),
            stack: Arc::new(stack),
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
        for b in [16_384, 13_107, 14_745] {
            assert!(d.contains(&b), "{b} in {d:?}");
        }
        assert_eq!(d.len(), SIZE_BUCKETS.len() + 2);
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
        let json = serde_json::to_vec(&st.snapshot(2000)).unwrap();
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
    fn space_saving_keeps_heavy_hitters() {
        let mut m = HashMap::default();
        for _ in 0..30 {
            space_saving(&mut m, ArgsHash::new("hot"), 10, 4);
        }
        for i in 0..20 {
            space_saving(&mut m, ArgsHash::new(&format!("cold{i}")), 1, 4);
        }
        assert_eq!(m[&ArgsHash::new("hot")].count, 30);
        assert_eq!(m.len(), 4);
    }
}
