//! Hashing and comparing short keys on the hot path: the keyed hasher of the daemon's maps and a
//! compare that does not call `memcmp`. Below every stage of the pipeline: the receivers and the
//! aggregator both use it.

/// The keyed hasher of the daemon's maps: foldhash's fast hasher (hashbrown's own default),
/// seeded per process so tool names cannot be chosen to collide. SipHash was a visible share of
/// the per-span cost. Measured against the FxHash mix it replaced, on the daemon's keys
/// (`cargo bench --features collector --bench hasher`, this machine, shared, two runs): a
/// (service, tool) lookup among 2,000 series 28.4 / 16.2 ns vs 37.0 / 33.6 ns, a span-id lookup
/// among 10,000 5.9 / 3.8 ns vs 6.5 / 5.4 ns. Hashing a series key alone is a draw (15.1 / 13.5
/// ns vs 16.6 / 8.6 ns): the lookups, which the daemon makes, are where foldhash wins.
#[derive(Debug, Clone, Copy)]
pub struct MapHasher {
    per_hasher: u64,
    shared: &'static foldhash::SharedSeed,
}

impl Default for MapHasher {
    fn default() -> Self {
        use std::hash::{BuildHasher, Hasher};
        Self {
            per_hasher: std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish(),
            shared: foldhash::SharedSeed::global_random(),
        }
    }
}

impl MapHasher {
    /// A fixed seed, for tests that must place keys the same way on every run.
    #[cfg(test)]
    pub(crate) fn seeded(seed: u64) -> Self {
        Self {
            per_hasher: seed,
            shared: foldhash::SharedSeed::global_fixed(),
        }
    }
}

impl std::hash::BuildHasher for MapHasher {
    type Hasher = foldhash::fast::FoldHasher<'static>;
    #[inline]
    fn build_hasher(&self) -> Self::Hasher {
        foldhash::fast::FoldHasher::with_seed(self.per_hasher, self.shared)
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
        let build = MapHasher::seeded(0x0123_4567_89ab_cdef);
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
