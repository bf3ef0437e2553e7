//! What bounds the state: windows, the cardinality cap, the kept results, the stack and the
//! bucket bounds of the classic histograms derived from it.

use std::sync::Arc;
use std::time::Duration;

use super::histogram::MAX_BYTES;
use super::stacks::Stacks;
use crate::collector::config::Config;
use crate::layers::{Stack, StackConfig};

/// Time slots per sliding window.
pub(crate) const SLOTS_PER_WINDOW: u64 = 5;

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

/// The daemon's stack with the layers the configured services name: whose ceilings get
/// bucket bounds.
fn configured(stack: &Stack, file: &StackConfig) -> Stack {
    let ids = file.services.values().flatten().map(String::as_str);
    stack.extended(ids, file).unwrap_or_else(|_| stack.clone())
}

/// The classic size histogram's bounds for the daemon's `stack` and the services of `file`.
pub(crate) fn layer_bounds(stack: &Stack, file: &StackConfig) -> Arc<[u64]> {
    size_bounds(&configured(stack, file)).into()
}

/// Upper bounds of the classic `toolsize_tool_call_duration_seconds` buckets, in microseconds.
pub(crate) const LATENCY_BUCKETS_US: &[u64] = &[
    1_000, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000,
    5_000_000, 10_000_000, 30_000_000, 60_000_000,
];

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
    /// The stacks each series is held to: the daemon's, the configured services' and the known
    /// agents'; every result of known size is checked against its series' stack.
    pub(crate) stacks: Arc<Stacks>,
    /// Upper bounds of the classic size histogram: [`size_bounds`] of the daemon's stack and the
    /// configured services' layers (the agents' own layers add none, to keep each series' bucket
    /// count; the daemon counts results over them exactly).
    pub size_bounds: Arc<[u64]>,
    /// How long the signals of a coding agent's call are waited for, milliseconds.
    pub(crate) join_window_ms: u64,
    /// What bounds the context ledger.
    pub(crate) context: super::context::LedgerLimits,
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
            size_bounds: layer_bounds(&c.stack, &c.layers),
            stacks: Arc::new(Stacks::new(&c.stack, &c.layers)),
            join_window_ms: c.recognition.join_window.0.as_millis() as u64,
            context: super::context::LedgerLimits {
                max_sessions: c.context.max_sessions,
                max_results: c.context.max_results_per_session,
                idle_ms: c.context.session_idle.0.as_millis() as u64,
                max_tools: c.aggregation.max_series,
                settle_ms: c.recognition.join_window.0.as_millis() as u64,
            },
        }
    }
}
