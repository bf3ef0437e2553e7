//! The most called arguments hashes of a series ([`TopArgs`]): a space-saving top-k, each hash
//! with its count (an upper bound) and its largest result ([`ArgsStat`]). Bounded by
//! `aggregation.top_args_hashes`; a record costs one scan of a small contiguous array.

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
/// bounds), at most `aggregation.top_args_hashes` of them, held as two flat arrays, the hashes
/// apart from their counts, so a record reads one small contiguous block: the matching hash, or
/// on a miss the smallest count, replaced. (A hash map here walked all its buckets for the
/// minimum on every miss, then removed and inserted: about a quarter of the aggregator's time
/// per record on the storm mix, where most hashes are new.)
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TopArgs {
    hashes: Vec<ArgsHash>,
    stats: Vec<ArgsStat>,
}

impl TopArgs {
    /// Counts one call of `h` whose result was `bytes`, keeping at most `cap` hashes.
    pub(crate) fn observe(&mut self, h: ArgsHash, bytes: u64, cap: usize) {
        if let Some(i) = self.hashes.iter().position(|k| *k == h) {
            let e = &mut self.stats[i];
            e.count += 1;
            e.max_bytes = e.max_bytes.max(bytes);
            return;
        }
        if self.hashes.len() < cap {
            self.hashes.push(h);
            self.stats.push(ArgsStat {
                count: 1,
                max_bytes: bytes,
            });
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
        self.stats[i] = ArgsStat {
            count: min + 1,
            max_bytes: bytes,
        };
    }

    /// Adds the counts of `o`, keeping the `cap` most called.
    pub(crate) fn merge(&mut self, o: TopArgs, cap: usize) {
        for (h, a) in o.hashes.into_iter().zip(o.stats) {
            match self.hashes.iter().position(|k| *k == h) {
                Some(i) => {
                    self.stats[i].count += a.count;
                    self.stats[i].max_bytes = self.stats[i].max_bytes.max(a.max_bytes);
                }
                None => {
                    self.hashes.push(h);
                    self.stats.push(a);
                }
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
    }
}

impl FromIterator<(ArgsHash, ArgsStat)> for TopArgs {
    fn from_iter<I: IntoIterator<Item = (ArgsHash, ArgsStat)>>(it: I) -> Self {
        let (hashes, stats) = it.into_iter().unzip();
        Self { hashes, stats }
    }
}

impl IntoIterator for TopArgs {
    type Item = (ArgsHash, ArgsStat);
    type IntoIter = std::iter::Zip<std::vec::IntoIter<ArgsHash>, std::vec::IntoIter<ArgsStat>>;
    fn into_iter(self) -> Self::IntoIter {
        self.hashes.into_iter().zip(self.stats)
    }
}
