//! Hashing and comparing short keys on the hot path: the keyed hasher of the daemon's maps and a
//! compare that does not call `memcmp`. Below every stage of the pipeline: the receivers and the
//! aggregator both use it.

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

/// `a == b` for the short strings compared on the hot path (attribute keys, series keys),
/// without a call to `memcmp`: the lengths, then 8-byte words read in place, the last one
/// overlapping (4-byte words, or three bytes, below 8). Past 64 bytes, `memcmp`.
///
/// Called, `memcmp` and its dispatch cost more than the compare of a key of a few dozen bytes:
/// 4.5 % of the daemon's samples, from a dozen compares a span.
#[inline(always)]
pub(crate) fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n > 64 {
        return a == b;
    }
    let w8 = |s: &[u8], i: usize| u64::from_ne_bytes(s[i..i + 8].try_into().expect("8 bytes"));
    let w4 = |s: &[u8], i: usize| u32::from_ne_bytes(s[i..i + 4].try_into().expect("4 bytes"));
    if n >= 8 {
        let mut i = 0;
        while i + 8 < n {
            if w8(a, i) != w8(b, i) {
                return false;
            }
            i += 8;
        }
        w8(a, n - 8) == w8(b, n - 8)
    } else if n >= 4 {
        w4(a, 0) == w4(b, 0) && w4(a, n - 4) == w4(b, n - 4)
    } else {
        // 0 to 3 bytes: the first, middle and last cover them all.
        n == 0 || (a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1])
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

    #[test]
    fn bytes_eq_agrees_with_slice_equality() {
        // Every pair of strings of 0 to 9 letters of {a, b} of the same length (every word and
        // tail length below 8, a word plus a tail above it), each against itself with a letter
        // more, and long strings (both sides of 64 bytes) differing at each position in turn.
        let strings: Vec<Vec<u8>> = (0..=9u32)
            .flat_map(|len| {
                (0..1u32 << len).map(move |bits| {
                    (0..len)
                        .map(|i| if bits >> i & 1 == 1 { b'b' } else { b'a' })
                        .collect()
                })
            })
            .collect();
        for a in &strings {
            for b in strings.iter().filter(|b| b.len() == a.len()) {
                assert_eq!(bytes_eq(a, b), a == b, "{a:?} {b:?}");
            }
            assert!(!bytes_eq(a, &[a.as_slice(), b"a"].concat()));
        }
        for len in [8, 9, 15, 16, 17, 31, 63, 64, 65, 200] {
            let a: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            assert!(bytes_eq(&a, &a.clone()));
            for i in 0..len {
                let mut b = a.clone();
                b[i] ^= 0x80;
                assert!(!bytes_eq(&a, &b), "len {len}, byte {i}");
            }
        }
    }
}
