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

pub mod histogram;
pub(crate) mod join;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::collector::config::Config;
use crate::collector::ingest::recognize::{ArgsHash, Size, SizeSource, ToolRecord};
use crate::collector::state::histogram::{Hist, MAX_BYTES, MAX_LATENCY_US};
use crate::layers::{Cut, Stack};

/// Time slots per sliding window.
pub(crate) const SLOTS_PER_WINDOW: u64 = 5;
pub(crate) use crate::collector::ingest::recognize::OVERFLOW;
/// Upper bounds of the classic `toolsize_tool_result_size_bytes` buckets (bytes), before the
/// stack's ceilings are added ([`size_bounds`]).
///
/// Prometheus' `histogram_quantile` interpolates linearly inside a bucket, so its error grows
/// with the bucket's width. The grid is quarter-octave (×1.25, ×1.5, ×1.75 between powers of
/// two) from 4 KiB to 1 MiB, where layer ceilings live, and half-octave (×1.5) below and above.
/// `tests/fleet_p95.rs` measures the fleet p95 Prometheus computes from them against the exact
/// one (within 1.5 % on its workload; up to 80 % on the previous 15-bucket layout).
pub(crate) const SIZE_BUCKETS: &[u64] = &[
    256, 384, 512, 768, 1_024, 1_536, 2_048, 3_072, 4_096, 5_120, 6_144, 7_168, 8_192, 10_240,
    12_288, 14_336, 16_384, 20_480, 24_576, 28_672, 32_768, 40_960, 49_152, 57_344, 65_536, 81_920,
    98_304, 114_688, 131_072, 163_840, 196_608, 229_376, 262_144, 327_680, 393_216, 458_752,
    524_288, 655_360, 786_432, 917_504, 1_048_576, 1_572_864, 2_097_152, 3_145_728, 4_194_304,
    6_291_456, 8_388_608, 12_582_912, 16_777_216,
];
/// Fractions of each byte ceiling added as bucket bounds beside the ceiling itself: 80 % and
/// 90 %, so the size distribution just under a ceiling (where `ToolResultSizeNearCeiling`
/// looks, at 0.8 by default) is read without interpolating across a wide bucket; 102.5 %, 105 %
/// and 110 %, so "over the ceiling by how much" is too. Without them, results bunched just over
/// a 16 KiB ceiling fall in (16384, 20480] and Prometheus puts their p95 up to 19 % too high
/// (`tests/fleet_native.rs` measures it).
pub(crate) const NEAR_CEILING_BOUNDS: &[(u64, u64)] =
    &[(4, 5), (9, 10), (41, 40), (21, 20), (11, 10)];
/// Over-ceiling results kept per series for `/api/v1/tools/{tool}`, most recent last.
pub(crate) const OVER_CEILING_RECENT: usize = 20;

/// [`SIZE_BUCKETS`] with every byte limit of `stack` added, and the bounds just under and over
/// it of [`NEAR_CEILING_BOUNDS`], sorted and deduplicated: the classic histogram can then answer
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
pub(crate) const LATENCY_BUCKETS_US: &[u64] = &[
    1_000, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000,
    5_000_000, 10_000_000, 30_000_000, 60_000_000,
];

/// A fast keyed hasher (the FxHash mix) for the aggregator's maps, seeded per process so tool
/// names cannot be chosen to collide. SipHash was a visible share of the per-span cost.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FxBuild(u64);

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
pub(crate) struct FxHasher(u64);

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
pub(crate) struct SeriesKey {
    /// `service.name`.
    pub(crate) service: String,
    /// Tool name.
    pub(crate) tool: String,
}

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
    fn periodic(
        &mut self,
        _series: &HashMap<SeriesKey, Series, FxBuild>,
        _limits: &Limits,
        _now_unix: u64,
        _now_ms: u64,
    ) {
    }

    /// Called after every batch.
    fn tick(&mut self) {}
}

/// The counters of one series over one period.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Counts {
    /// Tool calls.
    pub(crate) calls: u64,
    /// Failed calls.
    pub(crate) errors: u64,
    /// Results the tool reported truncated.
    pub(crate) truncated: u64,
    /// Results that show an upstream cut.
    pub(crate) truncated_upstream: u64,
    /// Successful calls whose size is unknown.
    pub(crate) unknown_size: u64,
    /// Sizes measured by the tool.
    pub(crate) measured: u64,
    /// Sizes derived from content, counted as recorded.
    pub(crate) derived: u64,
    /// Sizes derived from content with the tracer's envelope removed.
    #[serde(default)]
    pub(crate) unwrapped: u64,
    /// Sizes that are lower bounds (the content showed an upstream cut).
    #[serde(default)]
    pub(crate) lower_bound: u64,
    /// Of the unwrapped sizes, those of a JSON result re-serialised (approximate).
    #[serde(default)]
    pub(crate) unwrapped_approximate: u64,
    /// Sizes a coding agent reported in its own attribute (cut by the agent or not, when it
    /// said how large the result was before its cut).
    #[serde(default)]
    pub(crate) reported: u64,
    /// Results over the ceiling of a layer.
    #[serde(default)]
    pub(crate) over_ceiling: u64,
    /// The largest attribute value length limit results were seen cut at (configured or
    /// learned), characters or UTF-16 units.
    #[serde(default)]
    pub(crate) upstream_limit: Option<u64>,
}

impl Counts {
    fn record(&mut self, r: &ToolRecord, over: bool) {
        self.over_ceiling += u64::from(over);
        self.calls += 1;
        self.errors += u64::from(r.error);
        self.truncated += u64::from(r.truncated);
        self.truncated_upstream += u64::from(r.truncated_upstream);
        match r.size {
            // A cut whose original size the emitter revealed is not a lower bound.
            Size::Known { source, .. } => match (
                source,
                r.truncated_upstream && r.upstream.original.is_none(),
            ) {
                (_, true) => self.lower_bound += 1,
                (SizeSource::Reported, false) => self.reported += 1,
                (SizeSource::Measured, false) => self.measured += 1,
                (SizeSource::Derived, false) => self.derived += 1,
                (SizeSource::Unwrapped, false) => self.unwrapped += 1,
                (SizeSource::UnwrappedApproximate, false) => {
                    self.unwrapped += 1;
                    self.unwrapped_approximate += 1;
                }
            },
            Size::Unknown(_) => self.unknown_size += 1,
            Size::Failed => {}
        }
        self.upstream_limit = self.upstream_limit.max(r.upstream_limit);
    }

    /// Counts one result, sized from `source` as whole when it arrived, as cut upstream at
    /// `limit`. Only `truncated_upstream` moves, so every exported counter stays monotonic: the
    /// `source` counters keep how each result was sized when it arrived. False (nothing changed)
    /// when every content-sized result counted here is already counted cut.
    fn flag_cut(&mut self, source: SizeSource, limit: u64) -> bool {
        let from_content = self.derived + self.unwrapped + self.lower_bound;
        if source == SizeSource::Measured || self.truncated_upstream >= from_content {
            return false;
        }
        self.truncated_upstream += 1;
        self.upstream_limit = self.upstream_limit.max(Some(limit));
        true
    }

    fn add(&mut self, o: &Counts) {
        self.calls += o.calls;
        self.errors += o.errors;
        self.truncated += o.truncated;
        self.truncated_upstream += o.truncated_upstream;
        self.unknown_size += o.unknown_size;
        self.measured += o.measured;
        self.derived += o.derived;
        self.unwrapped += o.unwrapped;
        self.lower_bound += o.lower_bound;
        self.unwrapped_approximate += o.unwrapped_approximate;
        self.reported += o.reported;
        self.over_ceiling += o.over_ceiling;
        self.upstream_limit = self.upstream_limit.max(o.upstream_limit);
    }
}

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

impl std::ops::Deref for Stats {
    type Target = Counts;
    fn deref(&self) -> &Counts {
        &self.counts
    }
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
    fn record(&mut self, r: &ToolRecord, over: bool) {
        self.counts.record(r, over);
        if let Size::Known { bytes, .. } = r.size {
            self.size.record(bytes);
        }
        self.latency.record(r.latency_us);
    }

    fn add(&mut self, o: &Stats) {
        self.counts.add(&o.counts);
        self.size.add(&o.size);
        self.latency.add(&o.latency);
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
            count: n(s.calls),
            sized: n(s.size.len()),
            p50: n(s.size.quantile(0.5)),
            p95: n(s.size.quantile(0.95)),
            p99: n(s.size.quantile(0.99)),
            max: n(s.size.max()),
            errors: n(s.errors),
            truncated: n(s.truncated),
            truncated_upstream: n(s.truncated_upstream),
            over_ceiling: n(s.over_ceiling),
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
    fn new(window: Duration) -> Self {
        Self {
            slot_secs: (window.as_secs() / SLOTS_PER_WINDOW).max(1),
            slots: VecDeque::new(),
        }
    }

    /// The point of the newest slot when `now` falls in a later one (it is about to close).
    fn closing(&self, now: u64) -> Option<Point> {
        let (idx, s) = self.slots.back()?;
        (*idx != now / self.slot_secs).then(|| Point::of(idx * self.slot_secs, s))
    }

    /// The point of the newest slot, still open or not yet closed by a later record.
    pub(crate) fn open_point(&self) -> Option<Point> {
        let (idx, s) = self.slots.back()?;
        Some(Point::of(idx * self.slot_secs, s))
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
pub(crate) struct Largest {
    /// Bytes.
    pub(crate) bytes: u64,
    /// Trace id, hex.
    pub(crate) trace_id: String,
    /// Span id, hex.
    pub(crate) span_id: String,
    /// Arguments hash, when known.
    pub(crate) args_hash: Option<String>,
    /// When the daemon received it, Unix seconds.
    pub(crate) at_unix: u64,
    /// The content showed an upstream cut: `bytes` is a lower bound, unless the emitter told
    /// the size before its cut (`original`).
    pub(crate) truncated_upstream: bool,
    /// The layer that cut it, when the emitter said (a coding agent's own limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cut_by: Option<String>,
    /// The size before that cut, when the emitter said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) original: Option<u64>,
}

/// One recent result over the ceiling of its weakest cutting layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct OverCeiling {
    /// Result bytes.
    pub(crate) bytes: u64,
    /// The weakest layer that cuts it.
    pub(crate) layer: String,
    /// That layer's effective limit, in `unit`.
    pub(crate) limit: u64,
    /// The layer's unit.
    pub(crate) unit: String,
    /// The result's size in `unit`.
    pub(crate) value: u64,
    /// Whether `value` was estimated from bytes.
    pub(crate) estimated: bool,
    /// Trace id, hex.
    pub(crate) trace_id: String,
    /// Span id, hex.
    pub(crate) span_id: String,
    /// Arguments hash, when known.
    pub(crate) args_hash: Option<String>,
    /// When the daemon received it, Unix seconds.
    pub(crate) at_unix: u64,
}

/// One recent result over the ceiling of its weakest cutting layer, as kept per series: plain
/// numbers and ids, nothing allocated per record. [`OverRecent::view`] gives the API's form.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct OverRecent {
    /// Result bytes.
    pub(crate) bytes: u64,
    /// Index of the weakest cutting layer in the stack's layers.
    pub(crate) layer: u16,
    /// That layer's effective limit, in its unit.
    pub(crate) limit: u64,
    /// The result's size in that unit.
    pub(crate) value: u64,
    /// Whether `value` was estimated from bytes.
    pub(crate) estimated: bool,
    /// Trace id.
    pub(crate) trace_id: [u8; 16],
    /// Span id.
    pub(crate) span_id: [u8; 8],
    /// Arguments hash, when known.
    pub(crate) args_hash: Option<ArgsHash>,
    /// When the daemon received it, Unix seconds.
    pub(crate) at_unix: u64,
}

impl OverRecent {
    /// The API's form, with the layer's id and unit from `stack` (`None` if the stack has no
    /// such layer).
    pub(crate) fn view(&self, stack: &Stack) -> Option<OverCeiling> {
        let l = stack.layers().get(usize::from(self.layer))?;
        Some(OverCeiling {
            bytes: self.bytes,
            layer: l.id().to_string(),
            limit: self.limit,
            unit: l.layer.unit.as_str().to_string(),
            value: self.value,
            estimated: self.estimated,
            trace_id: hex(&self.trace_id),
            span_id: hex(&self.span_id),
            args_hash: self.args_hash.map(|h| h.to_string()),
            at_unix: self.at_unix,
        })
    }

    /// Back from the API's form (a snapshot), when `stack` still has its layer and the ids are
    /// hex of the right length.
    pub(crate) fn from_view(v: &OverCeiling, stack: &Stack) -> Option<Self> {
        let layer = stack.layers().iter().position(|l| l.id() == v.layer)?;
        Some(Self {
            bytes: v.bytes,
            layer: u16::try_from(layer).ok()?,
            limit: v.limit,
            value: v.value,
            estimated: v.estimated,
            trace_id: unhex(&v.trace_id)?,
            span_id: unhex(&v.span_id)?,
            args_hash: v.args_hash.as_deref().map(ArgsHash::new),
            at_unix: v.at_unix,
        })
    }
}

/// `N` bytes from `2 × N` hex digits.
fn unhex<const N: usize>(s: &str) -> Option<[u8; N]> {
    let b = s.as_bytes();
    if b.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// How often one arguments hash was seen (space-saving estimate: an upper bound).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ArgsStat {
    /// Calls with this hash.
    pub(crate) count: u64,
    /// Largest result with this hash.
    pub(crate) max_bytes: u64,
}

/// Everything kept for one series.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    /// Its id, given at creation, stable for the life of the process.
    pub(crate) id: u32,
    /// Since start (or since the restored snapshot's start).
    pub(crate) total: Stats,
    pub(crate) windows: Vec<Ring>,
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
    /// Arguments hashes (space-saving top-k).
    pub(crate) args: HashMap<ArgsHash, ArgsStat, FxBuild>,
    /// Results over a ceiling since start, by the weakest layer that cut them (few layers: a
    /// vector).
    pub(crate) over_ceiling: Vec<(String, u64)>,
    /// The most recent over-ceiling results, oldest first, at most [`OVER_CEILING_RECENT`].
    pub(crate) over_recent: VecDeque<OverRecent>,
    /// Closed slots of the shortest window, oldest first, over the longest window
    /// ([`Limits::history`]).
    pub(crate) history: VecDeque<Point>,
}

impl Series {
    /// The stats of window `i` (an index into [`Limits::windows`]) at `now`.
    pub(crate) fn window_stats(&self, i: usize, now: u64) -> Stats {
        self.windows
            .get(i)
            .map(|w| w.merged(now))
            .unwrap_or_default()
    }

    /// The stats of the slots of window `i` that ended by `end`: with the 1h window and
    /// `end = now - 5 min`, between 36 and 48 minutes of data ending 5 to 17 minutes ago.
    pub(crate) fn window_stats_ending_by(&self, i: usize, now: u64, end: u64) -> Stats {
        self.windows
            .get(i)
            .map(|w| w.merged_ending_by(now, end))
            .unwrap_or_default()
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
        let strings = |t: &str, sp: &str, a: &Option<String>| {
            t.len() + sp.len() + a.as_ref().map_or(0, String::len)
        };
        n += self.largest.capacity() * size_of::<Largest>();
        n += self
            .largest
            .iter()
            .map(|l| strings(&l.trace_id, &l.span_id, &l.args_hash))
            .sum::<usize>();
        n += self.over_recent.capacity() * size_of::<OverRecent>();
        n += self.history.capacity() * size_of::<Point>();
        // A hash map entry: key, value and one control byte.
        n += self.args.capacity() * (size_of::<ArgsHash>() + size_of::<ArgsStat>() + 1);
        n += self.over_ceiling.capacity() * size_of::<(String, u64)>()
            + self
                .over_ceiling
                .iter()
                .map(|(l, _)| l.len())
                .sum::<usize>();
        n
    }

    /// Adds everything of `o` (a series merged into the overflow one on restore).
    pub(crate) fn merge(&mut self, o: Series, limits: &Limits) {
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

    fn new(limits: &Limits, id: u32) -> Self {
        Self {
            id,
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
            history: VecDeque::new(),
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
    pub(crate) windows: Vec<(String, Duration)>,
    /// Cardinality cap.
    pub(crate) max_series: usize,
    /// Largest results kept per series.
    pub(crate) largest_results: usize,
    /// Argument hashes kept per series.
    pub(crate) top_args_hashes: usize,
    /// The effective layer stack; every result of known size is checked against it.
    pub(crate) stack: Arc<Stack>,
    /// Upper bounds of the classic size histogram: [`size_bounds`] of the stack.
    pub size_bounds: Arc<[u64]>,
    /// How long the signals of a coding agent's call are waited for, milliseconds.
    pub(crate) join_window_ms: u64,
}

impl Limits {
    /// The history: the index of the shortest window (whose slots are its points), its
    /// resolution (slot length) and its retention (the longest window), in seconds.
    pub(crate) fn history(&self) -> (usize, u64, u64) {
        let shortest = self
            .windows
            .iter()
            .enumerate()
            .min_by_key(|(_, (_, d))| *d)
            .map(|(i, (_, d))| (i, (d.as_secs() / SLOTS_PER_WINDOW).max(1)))
            .unwrap_or((0, 60));
        let longest = self
            .windows
            .iter()
            .map(|(_, d)| d.as_secs())
            .max()
            .unwrap_or(3600);
        (shortest.0, shortest.1, longest.max(shortest.1))
    }

    /// Points kept per series: the retention over the resolution.
    pub(crate) fn history_points(&self) -> usize {
        let (_, resolution, retention) = self.history();
        (retention / resolution).max(1) as usize
    }

    /// The limits of a configuration.
    pub fn from_config(c: &Config) -> Self {
        Self {
            windows: c
                .aggregation
                .windows
                .iter()
                .map(|w| (w.label.clone(), w.duration))
                .collect(),
            max_series: c.aggregation.max_series,
            largest_results: c.aggregation.largest_results,
            top_args_hashes: c.aggregation.top_args_hashes,
            size_bounds: size_bounds(&c.stack).into(),
            stack: Arc::new(c.stack.clone()),
            join_window_ms: c.recognition.join_window.0.as_millis() as u64,
        }
    }
}

/// The aggregated state, owned by the aggregator task.
pub struct State {
    /// Limits.
    pub(crate) limits: Limits,
    /// Series by key.
    pub(crate) series: HashMap<SeriesKey, Series, FxBuild>,
    /// Records routed to the overflow series.
    pub(crate) overflow_records: u64,
    /// Unix seconds the state started (kept across restores).
    pub(crate) started_unix: u64,
    /// Values above the histogram ceilings, clamped: (sizes, latencies).
    pub(crate) clamped: [u64; 2],
    observers: Vec<Box<dyn ResultObserver>>,
    next_id: u32,
    /// The signals of coding agents' calls waiting to be joined.
    pub(crate) joiner: join::Joiner,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("series", &self.series.len())
            .finish()
    }
}

/// Current time, Unix milliseconds.
pub fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
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
        let joiner = join::Joiner::new(limits.join_window_ms);
        Self {
            limits,
            series: HashMap::default(),
            overflow_records: 0,
            started_unix: now_unix(),
            clamped: [0; 2],
            observers: Vec::new(),
            next_id: 0,
            joiner,
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
    /// what they queued.
    pub fn record_batch_ms(&mut self, records: &[ToolRecord], now_ms: u64) {
        for r in records {
            if r.join.is_none() {
                self.record_ms(r, now_ms);
            } else if let Some(alone) = self.joiner.add(r, now_ms) {
                self.record_ms(&alone, now_ms);
            }
        }
        self.tick_observers();
    }

    /// Records the joined calls whose window ended by `now_ms` (every waiting call with
    /// `u64::MAX`, at shutdown).
    pub(crate) fn release_joined(&mut self, now_ms: u64) {
        let mut out = Vec::new();
        self.joiner.release(now_ms, &mut out);
        let at = now_ms.min(now_unix_ms());
        for r in &out {
            self.record_ms(r, at);
        }
        if !out.is_empty() {
            self.tick_observers();
        }
    }

    #[cfg(test)]
    /// Records one result received at `now` (Unix seconds).
    pub(crate) fn record(&mut self, r: &ToolRecord, now: u64) {
        self.record_ms(r, now * 1000);
    }

    /// Records one result received at `now_ms` (Unix milliseconds).
    pub(crate) fn record_ms(&mut self, r: &ToolRecord, now_ms: u64) {
        let now = now_ms / 1000;
        if let Size::Known { bytes, .. } = r.size {
            self.clamped[0] += u64::from(bytes > MAX_BYTES);
        }
        self.clamped[1] += u64::from(r.latency_us > MAX_LATENCY_US);
        // One verdict per record, shared by the counters and the observers. Exact where the
        // span carries the measure (measured sizes only), estimated from bytes otherwise.
        // Content-derived sizes travel as an attribute value, so per-attribute layers apply.
        let limits = &self.limits;
        let over = match r.size {
            Size::Known { bytes, source } => limits.stack.weakest(
                &r.measures.with_bytes(bytes),
                source != SizeSource::Measured,
            ),
            _ => None,
        };
        // One borrowed lookup in the common case (two with observers); a key is allocated
        // only for a new series.
        let mut probe = SeriesKeyRef {
            service: &r.service,
            tool: &r.tool,
        };
        let cut = over.as_ref();
        if let Some(s) = self.series.get_mut(&probe as &dyn KeyLike) {
            Self::apply(s, &self.limits, r, cut, now);
        } else {
            if self.series.len() >= self.limits.max_series {
                self.overflow_records += 1;
                probe = SeriesKeyRef {
                    service: OVERFLOW,
                    tool: OVERFLOW,
                };
            }
            if !self.series.contains_key(&probe as &dyn KeyLike) {
                let s = Self::next_series(&self.limits, &mut self.next_id);
                self.series.insert(
                    SeriesKey {
                        service: probe.service.to_string(),
                        tool: probe.tool.to_string(),
                    },
                    s,
                );
            }
            let s = self
                .series
                .get_mut(&probe as &dyn KeyLike)
                .expect("present or just inserted");
            Self::apply(s, &self.limits, r, cut, now);
        }
        if !self.observers.is_empty() {
            let (key, s) = self
                .series
                .get_key_value(&probe as &dyn KeyLike)
                .expect("present");
            let seen = Observed {
                key,
                series: s.id,
                record: r,
                over,
                now_ms,
            };
            for o in &mut self.observers {
                o.observe(&seen);
            }
        }
        if !r.earlier_cuts.is_empty() {
            self.flag_earlier_cuts(r);
        }
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
            let id = hex(&e.span_id);
            for l in s.largest.iter_mut().filter(|l| l.span_id == id) {
                l.truncated_upstream = true;
            }
        }
    }

    fn apply(
        s: &mut Series,
        limits: &Limits,
        r: &ToolRecord,
        over: Option<&(usize, Cut<'_>)>,
        now: u64,
    ) {
        let windows = &limits.windows;
        let is_over = over.is_some();
        s.total.record(r, is_over);
        for (i, w) in s.windows.iter_mut().enumerate() {
            // A slot of the shortest window closes: it becomes a history point (once a slot).
            if let Some(p) = w.closing(now) {
                if i == limits.history().0 {
                    if s.history.len() >= limits.history_points() {
                        s.history.pop_front();
                    }
                    s.history.push_back(p);
                }
            }
            w.current(now).record(r, is_over);
        }
        if let Size::Known { bytes, .. } = r.size {
            if let Some((layer, cut)) = over {
                add_over(&mut s.over_ceiling, cut.layer_id, 1);
                if s.over_recent.len() >= OVER_CEILING_RECENT {
                    s.over_recent.pop_front();
                }
                s.over_recent.push_back(OverRecent {
                    bytes,
                    layer: u16::try_from(*layer).unwrap_or(u16::MAX),
                    limit: cut.limit,
                    value: cut.value,
                    estimated: cut.estimated,
                    trace_id: r.trace_id,
                    span_id: r.span_id,
                    args_hash: r.args_hash,
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
            space_saving(&mut s.args, h, bytes, limits.top_args_hashes);
        }
    }

    /// The stats of `series` over `window` (`None`: since start).
    pub(crate) fn stats(&self, series: &Series, window: Option<usize>, now: u64) -> Stats {
        match window {
            None => series.total.clone(),
            Some(i) => series.windows[i].merged(now),
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::collector::ingest::recognize::{Emitter, Measurement, Unknown};

    pub(crate) fn limits(max_series: usize) -> Limits {
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
            join_window_ms: join::DEFAULT_JOIN_WINDOW_MS,
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
            upstream: Default::default(),
            join: None,
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
                (r.count, r.truncated_upstream, r.lower_bound, r.derived),
                (4, 3, 1, 3),
                "{w:?}"
            );
            assert_eq!(r.upstream_limit, Some(1000));
        }
        let s = st.series.values().next().unwrap();
        let flagged: Vec<_> = s
            .largest
            .iter()
            .map(|l| (l.span_id.clone(), l.truncated_upstream))
            .collect();
        assert!(flagged.contains(&(hex(&[1; 8]), true)), "{flagged:?}");
        assert!(flagged.contains(&(hex(&[2; 8]), true)), "{flagged:?}");
        assert!(flagged.contains(&(hex(&[4; 8]), true)), "{flagged:?}");
        // The earlier slot closed into a history point: it counts them too.
        let p = s.history.iter().find(|p| p.at_unix <= t0).unwrap();
        assert_eq!(p.truncated_upstream, 2);
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

    pub(crate) fn stacked(ceiling: u64) -> Limits {
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
        for b in [13_107, 14_745, 16_384, 16_793, 17_203, 18_022] {
            assert!(d.contains(&b), "{b} in {d:?}");
        }
        assert_eq!(d.len(), SIZE_BUCKETS.len() + 5);
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
