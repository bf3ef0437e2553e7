//! The most called arguments hashes of a series ([`TopArgs`]): a space-saving top-k, each hash
//! with its count (an upper bound) and its largest result ([`ArgsStat`]). Bounded by
//! `aggregation.top_args_hashes`; a record costs one scan of a small contiguous array of
//! one-byte tags, eight at a time.

use serde::{Deserialize, Serialize};

use crate::collector::ingest::recognize::ArgsHash;

/// How often one arguments hash was seen (space-saving estimate: an upper bound).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ArgsStat {
    /// Calls with this hash.
    pub(crate) count: u64,
    /// Largest result with this hash.
    pub(crate) max_bytes: u64,
}

/// The most called arguments hashes of a series: a space-saving top-k (counts are upper
/// bounds), at most `aggregation.top_args_hashes` of them, held as flat arrays, the hashes
/// apart from their counts, so a record reads one small contiguous block: the matching hash, or
/// on a miss the smallest count, replaced. (A hash map here walked all its buckets for the
/// minimum on every miss, then removed and inserted: about a quarter of the aggregator's time
/// per record on the storm mix, where most hashes are new.)
///
/// The hash is looked for by its [`ArgsHash::tag`] first: `tags` holds the tag of each hash, in
/// the same order, then zeros up to a multiple of 8, and is read a word of eight tags at a
/// time; a whole hash is compared only where its tag matches. (Comparing each 13-byte hash in
/// turn, `State::apply_observed` took 1,108, 1,140 and 1,108 instructions per accepted span on
/// the storm mix in three runs; with the tags 1,034, 1,000 and 1,032,
/// `scripts/profile-instructions.sh`.)
/// `tags` follows from `hashes`, so the derived equality compares what is kept.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TopArgs {
    hashes: Vec<ArgsHash>,
    stats: Vec<ArgsStat>,
    tags: Vec<u8>,
}

/// The low seven bits of each byte of a word.
const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;

impl TopArgs {
    /// Counts one call of `h` whose result was `bytes`, keeping at most `cap` hashes.
    pub(crate) fn observe(&mut self, h: ArgsHash, bytes: u64, cap: usize) {
        let tag = h.tag();
        if let Some(i) = self.find(&h, tag) {
            let e = &mut self.stats[i];
            e.count += 1;
            e.max_bytes = e.max_bytes.max(bytes);
            return;
        }
        if self.hashes.len() < cap {
            self.push(
                h,
                tag,
                ArgsStat {
                    count: 1,
                    max_bytes: bytes,
                },
            );
            return;
        }
        // Full (or `cap` 0): the hash with the fewest calls gives its place to `h`, which
        // inherits that count plus one.
        let Some((i, min)) = self
            .stats
            .iter()
            .enumerate()
            .min_by_key(|(_, e)| e.count)
            .map(|(i, e)| (i, e.count))
        else {
            return;
        };
        self.hashes[i] = h;
        self.tags[i] = tag;
        self.stats[i] = ArgsStat {
            count: min + 1,
            max_bytes: bytes,
        };
    }

    /// Where `h`, whose tag is `tag`, is kept. Each word of eight tags is XORed with `tag` in
    /// every byte; the bytes that become zero are the candidates, compared whole in order.
    fn find(&self, h: &ArgsHash, tag: u8) -> Option<usize> {
        let every_byte = u64::from(tag) * 0x0101_0101_0101_0101;
        let (words, _) = self.tags.as_chunks::<8>();
        for (w, word) in words.iter().enumerate() {
            let x = u64::from_le_bytes(*word) ^ every_byte;
            // The high bit of each byte of `x` that is zero, and no other bit: adding 0x7f to
            // a byte's low seven bits sets its high bit unless they are all zero, and carries
            // into no other byte.
            let mut zero = !(((x & LOW7) + LOW7) | x | LOW7);
            while zero != 0 {
                let i = 8 * w + zero.trailing_zeros() as usize / 8;
                match self.hashes.get(i) {
                    Some(k) if k == h => return Some(i),
                    Some(_) => zero &= zero - 1,
                    // The zeros after the last tag.
                    None => return None,
                }
            }
        }
        None
    }

    /// Keeps `h` last.
    fn push(&mut self, h: ArgsHash, tag: u8, stat: ArgsStat) {
        let i = self.hashes.len();
        if self.tags.len() == i {
            self.tags.resize(i + 8, 0);
        }
        self.tags[i] = tag;
        self.hashes.push(h);
        self.stats.push(stat);
    }

    /// Adds the counts of `o`, keeping the `cap` most called.
    pub(crate) fn merge(&mut self, o: TopArgs, cap: usize) {
        for (h, a) in o {
            let tag = h.tag();
            match self.find(&h, tag) {
                Some(i) => {
                    self.stats[i].count += a.count;
                    self.stats[i].max_bytes = self.stats[i].max_bytes.max(a.max_bytes);
                }
                None => self.push(h, tag, a),
            }
        }
        if self.hashes.len() > cap {
            let mut v: Vec<_> = std::mem::take(self).into_iter().collect();
            v.sort_by_key(|e| std::cmp::Reverse(e.1.count));
            v.truncate(cap);
            *self = v.into_iter().collect();
        }
    }

    /// The hashes and their counts, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&ArgsHash, &ArgsStat)> {
        self.hashes.iter().zip(&self.stats)
    }

    /// How many hashes are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.hashes.len()
    }

    /// The count of `h`, if it is kept.
    #[cfg(test)]
    pub(crate) fn get(&self, h: &ArgsHash) -> Option<&ArgsStat> {
        self.iter().find(|(k, _)| *k == h).map(|(_, a)| a)
    }

    /// Bytes held on the heap.
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        self.hashes.capacity() * size_of::<ArgsHash>()
            + self.stats.capacity() * size_of::<ArgsStat>()
            + self.tags.capacity()
    }
}

impl FromIterator<(ArgsHash, ArgsStat)> for TopArgs {
    fn from_iter<I: IntoIterator<Item = (ArgsHash, ArgsStat)>>(it: I) -> Self {
        let it = it.into_iter();
        let mut all = Self::default();
        all.hashes.reserve(it.size_hint().0);
        all.stats.reserve(it.size_hint().0);
        for (h, stat) in it {
            all.push(h, h.tag(), stat);
        }
        all
    }
}

impl IntoIterator for TopArgs {
    type Item = (ArgsHash, ArgsStat);
    type IntoIter = std::iter::Zip<std::vec::IntoIter<ArgsHash>, std::vec::IntoIter<ArgsStat>>;
    fn into_iter(self) -> Self::IntoIter {
        self.hashes.into_iter().zip(self.stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::persist::{format, snapshot};

    /// The plain space-saving top-k [`TopArgs`] must compute: one scan for the hash, on a miss
    /// the first of the least called replaced.
    #[derive(Debug, Default)]
    struct Plain(Vec<(ArgsHash, ArgsStat)>);

    impl Plain {
        fn observe(&mut self, h: ArgsHash, bytes: u64, cap: usize) {
            if let Some((_, e)) = self.0.iter_mut().find(|(k, _)| *k == h) {
                e.count += 1;
                e.max_bytes = e.max_bytes.max(bytes);
            } else if self.0.len() < cap {
                self.0.push((
                    h,
                    ArgsStat {
                        count: 1,
                        max_bytes: bytes,
                    },
                ));
            } else if let Some(i) = (0..self.0.len()).min_by_key(|&i| self.0[i].1.count) {
                let count = self.0[i].1.count + 1;
                self.0[i] = (
                    h,
                    ArgsStat {
                        count,
                        max_bytes: bytes,
                    },
                );
            }
        }

        fn merge(&mut self, o: Vec<(ArgsHash, ArgsStat)>, cap: usize) {
            for (h, a) in o {
                match self.0.iter_mut().find(|(k, _)| *k == h) {
                    Some((_, e)) => {
                        e.count += a.count;
                        e.max_bytes = e.max_bytes.max(a.max_bytes);
                    }
                    None => self.0.push((h, a)),
                }
            }
            if self.0.len() > cap {
                self.0.sort_by_key(|(_, a)| std::cmp::Reverse(a.count));
                self.0.truncate(cap);
            }
        }
    }

    /// What `t` keeps, in its order, after checking its tags against its hashes.
    fn kept(t: &TopArgs) -> Vec<(ArgsHash, ArgsStat)> {
        assert_eq!(t.tags.len(), t.hashes.len().div_ceil(8) * 8);
        for (i, tag) in t.tags.iter().enumerate() {
            assert_eq!(*tag, t.hashes.get(i).map_or(0, ArgsHash::tag), "tag {i}");
        }
        t.iter().map(|(h, a)| (*h, a.clone())).collect()
    }

    struct Stream(u64);

    impl Stream {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        /// One of `distinct` hashes, the low ones more often; some share a tag.
        fn hash(&mut self, distinct: u64) -> ArgsHash {
            let n = self.next() % distinct;
            ArgsHash::new(&format!("{:012x}", n.min(self.next() % distinct)))
        }
    }

    const CAPS: [usize; 9] = [0, 1, 2, 7, 31, 32, 33, 64, 65];

    #[test]
    fn observe_keeps_what_the_plain_scan_keeps() {
        let mut s = Stream(0x9e37_79b9_7f4a_7c15);
        for cap in CAPS {
            for distinct in [3, 40, 4099] {
                let (mut t, mut plain) = (TopArgs::default(), Plain::default());
                for n in 0..3000 {
                    let (h, bytes) = (s.hash(distinct), s.next() % 100_000);
                    t.observe(h, bytes, cap);
                    plain.observe(h, bytes, cap);
                    if n % 97 == 0 {
                        assert_eq!(kept(&t), plain.0, "cap {cap}, {distinct} hashes, call {n}");
                    }
                }
                assert_eq!(kept(&t), plain.0, "cap {cap}, {distinct} hashes");
                let calls = t.iter().map(|(_, a)| a.count).sum::<u64>();
                assert_eq!(calls, if cap == 0 { 0 } else { 3000 });
            }
        }
    }

    /// Hashes that share a tag are told apart by the whole compare, wherever they lie.
    #[test]
    fn hashes_sharing_a_tag_are_told_apart() {
        let mut by_tag: Vec<Vec<ArgsHash>> = vec![Vec::new(); 256];
        for n in 0..20_000u64 {
            let h = ArgsHash::new(&format!("{n:012x}"));
            by_tag[usize::from(h.tag())].push(h);
        }
        let same = by_tag.iter().max_by_key(|v| v.len()).unwrap();
        assert!(same.len() >= 40);
        for cap in CAPS {
            let (mut t, mut plain) = (TopArgs::default(), Plain::default());
            for (n, h) in same.iter().cycle().take(500).enumerate() {
                t.observe(*h, n as u64, cap);
                plain.observe(*h, n as u64, cap);
            }
            assert_eq!(kept(&t), plain.0, "cap {cap}");
        }
    }

    #[test]
    fn merge_keeps_what_the_plain_merge_keeps() {
        let mut s = Stream(0x2545_f491_4f6c_dd1d);
        for cap in CAPS {
            for distinct in [3, 40, 4099] {
                let mut sides = [TopArgs::default(), TopArgs::default()];
                for (k, side) in sides.iter_mut().enumerate() {
                    for _ in 0..500 * (k + 1) {
                        side.observe(s.hash(distinct), s.next() % 1000, cap);
                    }
                }
                let [mut t, o] = sides;
                let mut plain = Plain(kept(&t));
                plain.merge(kept(&o), cap);
                t.merge(o, cap);
                assert_eq!(kept(&t), plain.0, "cap {cap}, {distinct} hashes");
                // And it goes on as the plain one does.
                for _ in 0..200 {
                    let (h, bytes) = (s.hash(distinct), s.next() % 1000);
                    t.observe(h, bytes, cap);
                    plain.observe(h, bytes, cap);
                }
                assert_eq!(kept(&t), plain.0, "cap {cap}, {distinct} hashes, after");
            }
        }
    }

    /// Written as a snapshot writes it and read back as a restore does: the same hashes in the
    /// same order, with their tags, and the same results afterwards.
    #[test]
    fn snapshot_round_trip_keeps_hashes_order_and_tags() {
        let mut s = Stream(0x1234_5678_9abc_def1);
        for cap in CAPS {
            let mut t = TopArgs::default();
            for _ in 0..1000 {
                t.observe(s.hash(4099), s.next() % 1000, cap);
            }
            let json = serde_json::to_string(&snapshot::args_out(&t)).unwrap();
            let read: Vec<format::Args> = serde_json::from_str(&json).unwrap();
            let mut back = snapshot::args_in(read);
            assert_eq!(kept(&back), kept(&t), "cap {cap}");
            assert_eq!(back, t);
            for _ in 0..300 {
                let (h, bytes) = (s.hash(4099), s.next() % 1000);
                t.observe(h, bytes, cap);
                back.observe(h, bytes, cap);
            }
            assert_eq!(kept(&back), kept(&t), "cap {cap}, after");
        }
    }
}
