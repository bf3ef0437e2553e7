//! Bounded HDR histograms for result sizes and latencies, with a stated precision.
//!
//! Precision: result sizes keep 2 significant decimal digits ([`SIGFIG`]). HDR then keeps 256
//! sub-buckets per power of two, so any size quantile read back is within 1/128 (< 0.8 %) of the
//! true value, inside the 1 % this project promises. Latencies keep 1 digit
//! ([`LATENCY_SIGFIG`]): 32 sub-buckets per power of two, and a quantile read back at its
//! bucket's middle is within 1/32 (3.1 %); latency is context here, size is the product, and
//! the coarser latency histograms are what keep a series under 64 KiB at steady state.
//!
//! Memory: each histogram has a fixed highest trackable value ([`MAX_BYTES`], 1 GiB;
//! [`MAX_LATENCY_US`], one hour). Every value is clamped to it before it is recorded, so the
//! counts grow with the largest value seen and never past the ceiling's size (growing on demand
//! keeps a series of small results small; a fixed allocation at the ceiling measured 3.5× the
//! memory of typical series). Counts are `u32` (saturating: a bucket stops at 4 294 967 295
//! values) and are allocated on the first recorded value, so an empty window slot costs nothing.
//! From hdrhistogram's sizing (`(buckets + 1) × sub-buckets / 2` counts), a size histogram holds
//! at most 2 944 counts (11.5 KiB) and a latency histogram at most 464 (1.8 KiB):
//! [`max_histogram_bytes`] is 13.3 KiB for one size + latency pair. A series keeps one pair
//! since start plus one per window slot (5 per window), so with the default two windows a series
//! costs at most 11 pairs ≈ 146 KiB of counts, whatever values it receives (sizes from 1 byte to
//! 1 GiB in every slot); at steady state with results up to 32 KiB the whole series is under
//! 64 KiB (see `docs/collector.md`). Values above the ceiling are recorded at the ceiling and counted
//! in [`Hist::clamped`], never dropped; [`Hist::max`] stays exact.

use hdrhistogram::Histogram;

/// Significant decimal digits kept by the result size histograms.
pub(crate) const SIGFIG: u8 = 2;
/// Significant decimal digits kept by the latency histograms.
pub(crate) const LATENCY_SIGFIG: u8 = 1;
/// Lowest discernible result size, bytes: sizes under 1 KiB are resolved to 4 bytes (1 % of
/// 400 bytes), which saves two power-of-two buckets (1 KiB) per size histogram. No layer cuts
/// under 200 units.
pub(crate) const SIZE_RESOLUTION: u64 = 4;
/// Largest result size tracked: 1 GiB. Larger values are clamped and counted.
pub(crate) const MAX_BYTES: u64 = 1 << 30;
/// Largest latency tracked: one hour, in microseconds. Larger values are clamped and counted.
pub(crate) const MAX_LATENCY_US: u64 = 3_600 * 1_000_000;

/// Bytes of counts of one size histogram plus one latency histogram, each grown to its ceiling.
pub fn max_histogram_bytes() -> usize {
    [(MAX_BYTES, SIGFIG), (MAX_LATENCY_US, LATENCY_SIGFIG)]
        .iter()
        .map(|&(c, sigfig)| {
            let mut h = empty(sigfig);
            let _ = h.record(c);
            h.distinct_values() * std::mem::size_of::<u32>()
        })
        .sum()
}

/// An empty histogram that grows on demand; callers clamp values to the ceiling first.
fn empty(sigfig: u8) -> Histogram<u32> {
    // Sizes (2 digits) resolve to SIZE_RESOLUTION bytes at the bottom; latencies to 1 µs.
    let low = if sigfig == SIGFIG { SIZE_RESOLUTION } else { 1 };
    let mut h = Histogram::new_with_bounds(low, 2 * low, sigfig).expect("valid bounds");
    h.auto(true);
    h
}

/// An HDR histogram with a fixed ceiling and a count of clamped values.
#[derive(Debug, Clone)]
pub(crate) struct Hist {
    h: Option<Box<Histogram<u32>>>,
    sigfig: u8,
    ceiling: u64,
    clamped: u64,
    max_seen: u64,
}

impl Hist {
    /// An empty histogram of result sizes clamping at `ceiling` ([`SIGFIG`] digits; nothing
    /// allocated until the first value).
    pub(crate) fn new(ceiling: u64) -> Self {
        Self::with_sigfig(ceiling, SIGFIG)
    }

    /// An empty latency histogram clamping at `ceiling` ([`LATENCY_SIGFIG`] digit).
    pub(crate) fn latency(ceiling: u64) -> Self {
        Self::with_sigfig(ceiling, LATENCY_SIGFIG)
    }

    /// An empty histogram keeping `sigfig` significant digits.
    pub(crate) fn with_sigfig(ceiling: u64, sigfig: u8) -> Self {
        Self {
            h: None,
            sigfig,
            ceiling,
            clamped: 0,
            max_seen: 0,
        }
    }

    fn counts(&mut self) -> &mut Histogram<u32> {
        let sigfig = self.sigfig;
        self.h.get_or_insert_with(|| Box::new(empty(sigfig)))
    }

    /// Records one value, clamping it to the ceiling (and counting it); the exact value still
    /// counts for [`Hist::max`].
    pub(crate) fn record(&mut self, v: u64) {
        self.max_seen = self.max_seen.max(v);
        let v = if v > self.ceiling {
            self.clamped += 1;
            self.ceiling
        } else {
            v
        };
        // Counts saturate; the value is within the ceiling, so growing cannot fail in practice.
        let _ = self.counts().record(v);
    }

    /// Adds every value of `other`.
    pub(crate) fn add(&mut self, other: &Hist) {
        if let Some(o) = &other.h {
            if self.ceiling >= other.ceiling {
                // Every value of `other` is within our ceiling: a saturating sum (it grows the
                // counts at most to `other`'s size).
                let _ = self.counts().add(&**o);
            } else {
                let ceiling = self.ceiling;
                let h = self.counts();
                for v in o.iter_recorded() {
                    let _ = h.record_n(v.value_iterated_to().min(ceiling), v.count_at_value());
                }
            }
        }
        self.clamped += other.clamped;
        self.max_seen = self.max_seen.max(other.max_seen);
    }

    /// Takes back the values of `other`, added earlier with [`Hist::add`] (same ceiling);
    /// [`Hist::max`] keeps the largest value seen.
    pub(crate) fn subtract(&mut self, other: &Hist) {
        if let (Some(o), Some(h)) = (&other.h, &mut self.h) {
            let _ = h.subtract(&**o);
        }
        self.clamped = self.clamped.saturating_sub(other.clamped);
    }

    /// Values recorded.
    pub(crate) fn len(&self) -> u64 {
        self.h.as_ref().map_or(0, |h| h.len())
    }

    #[cfg(test)]
    /// Values clamped to the ceiling.
    pub(crate) fn clamped(&self) -> u64 {
        self.clamped
    }

    #[cfg(test)]
    /// Bytes held by the counts (0 until the first value).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.h
            .as_ref()
            .map_or(0, |h| h.distinct_values() * std::mem::size_of::<u32>())
    }

    /// The value at quantile `q` (0..=1), within the stated precision; 0 when empty.
    pub(crate) fn quantile(&self, q: f64) -> u64 {
        match &self.h {
            Some(h) if !h.is_empty() => {
                // The middle of the bucket halves the worst-case error (≤ 1/256); no quantile
                // is above the largest value seen.
                h.median_equivalent(h.value_at_quantile(q))
                    .min(self.ceiling)
                    .min(self.max_seen)
            }
            _ => 0,
        }
    }

    /// The largest value recorded, exact (not clamped); 0 when empty.
    pub(crate) fn max(&self) -> u64 {
        self.max_seen
    }

    /// Non-cumulative counts of the recorded values per classic bucket with upper bounds
    /// `bounds` (sorted), plus the `+Inf` bucket last. A value lands by its HDR bucket's middle,
    /// so one within the stated precision of a bound may land on the other side of it.
    pub(crate) fn bucket_counts(&self, bounds: &[u64]) -> Vec<u64> {
        let mut counts = vec![0; bounds.len() + 1];
        if let Some(h) = &self.h {
            for v in h.iter_recorded() {
                let value = h.median_equivalent(v.value_iterated_to());
                counts[bounds.partition_point(|&b| b < value)] += u64::from(v.count_at_value());
            }
        }
        counts
    }

    /// Calls `f(value, count)` for every non-empty HDR bucket in increasing order, `value` being
    /// the bucket's middle (as [`Hist::bucket_counts`] places it): the input of the native
    /// histogram buckets of the protobuf exposition.
    /// The lowest bucket (`[0, SIZE_RESOLUTION)` for sizes) is reported as 0, so empty results
    /// land in a native histogram's zero bucket.
    pub(crate) fn for_each_bucket(&self, mut f: impl FnMut(u64, u64)) {
        if let Some(h) = &self.h {
            for v in h.iter_recorded() {
                let at = v.value_iterated_to();
                let value = if h.lowest_equivalent(at) == 0 {
                    0
                } else {
                    h.median_equivalent(at)
                };
                f(value, u64::from(v.count_at_value()));
            }
        }
    }

    /// A serializable form: (value, count) of every non-empty bucket.
    pub(crate) fn to_snapshot(&self) -> HistSnapshot {
        HistSnapshot {
            ceiling: self.ceiling,
            clamped: self.clamped,
            max_seen: self.max_seen,
            buckets: self
                .h
                .iter()
                .flat_map(|h| h.iter_recorded())
                .map(|v| (v.value_iterated_to(), u64::from(v.count_at_value())))
                .collect(),
        }
    }

    /// Rebuilds a histogram from [`Hist::to_snapshot`] with the current `ceiling` (a snapshot
    /// written with a higher one is clamped to it); each value lands in its own bucket.
    pub(crate) fn from_snapshot(s: &HistSnapshot, ceiling: u64, sigfig: u8) -> Self {
        let mut h = Self::with_sigfig(ceiling, sigfig);
        for &(v, n) in &s.buckets {
            let n = u32::try_from(n).unwrap_or(u32::MAX);
            let _ = h.counts().record_n(v.min(ceiling), n);
        }
        h.clamped = s.clamped;
        h.max_seen = s.max_seen;
        h
    }
}

/// A [`Hist`] as plain numbers (the snapshot's format holds them in its own type).
#[derive(Debug, Clone)]
pub(crate) struct HistSnapshot {
    /// The ceiling.
    pub(crate) ceiling: u64,
    /// Values clamped to it.
    pub(crate) clamped: u64,
    /// The largest value seen, exact.
    pub(crate) max_seen: u64,
    /// (value, count) of every non-empty bucket.
    pub(crate) buckets: Vec<(u64, u64)>,
}

/// Native histogram schema: bucket bounds are powers of 2^(2^-6), 64 buckets per power of two,
/// each 1.09 % wide. Schema 5 (2.2 % wide) could miss the 2 % fleet p95 goal by up to its width.
pub(crate) const NATIVE_SCHEMA: i32 = 6;

/// Width of the native zero bucket: values at most this (0 bytes, 0 seconds) land there. Positive
/// so that a histogram with no observations yet is still read as native (client_golang's default).
pub(crate) const NATIVE_ZERO_THRESHOLD: f64 = 2.938_735_877_055_719e-39;

/// A native (sparse, exponential) histogram's buckets, of schema [`NATIVE_SCHEMA`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NativeBuckets {
    /// Observations in the zero bucket.
    pub(crate) zero: u64,
    /// (bucket index, count) of every non-empty bucket, by index.
    pub(crate) buckets: Vec<(i32, u64)>,
}

/// The native bucket index of `v` > 0: bucket `i` holds (2^((i-1)/64), 2^(i/64)].
pub(crate) fn native_index(v: f64) -> i32 {
    (v.log2() * f64::from(1u32 << NATIVE_SCHEMA)).ceil() as i32
}

impl Hist {
    /// The native histogram buckets of the values × `scale`: what the protobuf exposition sends
    /// beside the classic buckets.
    pub(crate) fn native_buckets(&self, scale: f64) -> NativeBuckets {
        let mut out = NativeBuckets::default();
        self.for_each_bucket(|v, n| {
            let x = v as f64 * scale;
            if x <= NATIVE_ZERO_THRESHOLD {
                out.zero += n;
                return;
            }
            let i = native_index(x);
            match out.buckets.last_mut() {
                Some((last, c)) if *last == i => *c += n,
                _ => out.buckets.push((i, n)),
            }
        });
        out
    }
}

/// Values recorded at a histogram's highest trackable value because they were above it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Clamped {
    /// Result sizes above [`MAX_BYTES`].
    pub(crate) size: u64,
    /// Latencies above [`MAX_LATENCY_US`].
    pub(crate) latency: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_within_one_percent() {
        let mut h = Hist::new(MAX_BYTES);
        let mut values: Vec<u64> = (0..10_000u64).map(|i| (i * 7919) % 1_000_000 + 1).collect();
        for &v in &values {
            h.record(v);
        }
        values.sort_unstable();
        for q in [0.5, 0.95, 0.99] {
            let exact = values[((q * values.len() as f64).ceil() as usize).max(1) - 1] as f64;
            let got = h.quantile(q) as f64;
            assert!(
                (got - exact).abs() / exact <= 0.01,
                "q{q}: {got} vs {exact}"
            );
        }
    }

    #[test]
    fn no_quantile_above_the_largest_value() {
        let mut h = Hist::new(MAX_BYTES);
        for v in [2_040, 2_040, 100] {
            h.record(v);
        }
        // 2,040 sits in a bucket whose middle is above it.
        assert_eq!(h.quantile(0.99), 2_040);
        assert_eq!(h.quantile(1.0), h.max());
    }

    #[test]
    fn clamps_and_counts() {
        let mut h = Hist::new(1000);
        h.record(5000);
        assert_eq!(h.clamped(), 1);
        assert_eq!(h.max(), 5000);
        assert!(h.quantile(1.0) <= 1000);
    }

    #[test]
    fn memory_is_bounded_whatever_the_values() {
        let mut s = Hist::new(MAX_BYTES);
        let mut l = Hist::latency(MAX_LATENCY_US);
        assert_eq!(s.heap_bytes() + l.heap_bytes(), 0);
        s.record(1024);
        l.record(2000);
        assert!(s.heap_bytes() + l.heap_bytes() < max_histogram_bytes() / 2);
        for v in [0, 1, 1 << 40, u64::MAX] {
            s.record(v);
            l.record(v);
        }
        assert_eq!(s.clamped(), 2);
        assert_eq!(s.max(), u64::MAX);
        let pair = s.heap_bytes() + l.heap_bytes();
        assert_eq!(pair, max_histogram_bytes());
        // The figure stated in the module documentation: 2 944 + 464 u32 counts.
        assert_eq!(pair, (2_944 + 464) * 4);
    }

    #[test]
    fn snapshot_round_trip() {
        let mut h = Hist::new(MAX_BYTES);
        for v in [1, 10, 100, 1000, 123_456, 0] {
            h.record(v);
        }
        let back = Hist::from_snapshot(&h.to_snapshot(), MAX_BYTES, SIGFIG);
        assert_eq!(back.len(), h.len());
        for q in [0.1, 0.5, 0.9, 1.0] {
            assert_eq!(back.quantile(q), h.quantile(q));
        }
    }
}
