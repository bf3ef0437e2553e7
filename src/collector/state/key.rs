//! Series keys and the hasher of the series map: (service, tool) pairs looked up by borrowed
//! strings on the hot path (one hash, no allocation unless the series is new).

use serde::{Deserialize, Serialize};

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

impl FxBuild {
    /// A fixed seed, for tests that must place keys the same way on every run.
    #[cfg(test)]
    pub(crate) fn seeded(seed: u64) -> Self {
        Self(seed)
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
        // The last 1 to 7 bytes in two overlapping loads, or three bytes, with their count:
        // no copy into a stack buffer (a call to `memcpy` and a stalled load, a visible share
        // of the aggregator's time in a profile).
        let rest = chunks.remainder();
        let n = rest.len();
        if n >= 4 {
            let lo = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes"));
            let hi = u32::from_le_bytes(rest[n - 4..].try_into().expect("4 bytes"));
            self.add(u64::from(lo) | u64::from(hi) << 32);
            self.add(n as u64);
        } else if n > 0 {
            let (a, b, c) = (rest[0], rest[n / 2], rest[n - 1]);
            self.add(u64::from(a) | u64::from(b) << 8 | u64::from(c) << 16 | (n as u64) << 24);
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
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

/// Borrowed form of [`SeriesKey`] for allocation-free lookups.
pub(crate) struct SeriesKeyRef<'a> {
    pub(crate) service: &'a str,
    pub(crate) tool: &'a str,
}

pub(crate) trait KeyLike {
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
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn strings_that_differ_only_in_their_last_bytes_hash_apart() {
        // Every string of 0 to 11 letters of {a, b}: every tail length, and tails that the
        // overlapping loads read twice (without the count, "ab" and "abb" would hash alike).
        let build = FxBuild::seeded(0x0123_4567_89ab_cdef);
        let mut seen = std::collections::HashMap::new();
        for len in 0..=11u32 {
            for bits in 0..1u32 << len {
                let s: String = (0..len)
                    .map(|i| if bits >> i & 1 == 1 { 'b' } else { 'a' })
                    .collect();
                if let Some(other) = seen.insert(build.hash_one(s.as_str()), s.clone()) {
                    panic!("{s:?} and {other:?} hash alike");
                }
            }
        }
        assert_eq!(seen.len(), (1 << 12) - 1);
    }
}
