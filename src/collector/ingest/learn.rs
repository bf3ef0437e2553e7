//! Attribute value length limits learned from the data: a service whose recorded results keep
//! ending at the same exact length has a limit, and its results at that length were cut.
//!
//! OpenTelemetry SDKs cut every string attribute at `OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT` /
//! `OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT` (Python counts code points, JavaScript UTF-16 units)
//! without a marker, in the agent's process, where the daemon cannot read the setting. Per
//! service, [`Learner`] tallies the lengths of recorded result content of at least
//! [`MIN_LIMIT`] characters. A length reached by [`HITS`] results with different endings, and
//! never exceeded by any result of the service, is taken as the limit; from then on every result
//! of that length is flagged. The earlier results at that length, counted as whole when they
//! arrived, are returned with the learning one ([`Observed::earlier`]) so the aggregator flags
//! them too. A longer result of the service later disproves the limit and it is forgotten.
//!
//! Memory is bounded: at most [`MAX_SERVICES`] services (later ones are not learned) and
//! [`CANDIDATES`] candidate lengths per service and unit, each holding at most `HITS - 1` earlier
//! results. The learner is owned by the aggregator's state, like every other tally: the
//! receivers only take a [`Sample`] of the content (its lengths, counted once per result from
//! the bytes without decoding by [`text::lengths`], and its ending), so nothing on the receive
//! path takes a lock. Limits survive a
//! restart through the snapshot: each series keeps the limit its results were cut at, and the
//! state seeds the learner with them when it is restored ([`Learner::seed`]).

use std::sync::Arc;

use crate::collector::ingest::record::{EarlierCut, Sample, SizeSource};
use crate::collector::ingest::text::{self, Lengths};

/// Shortest length taken as a limit: shorter repeated lengths are normal results.
pub(crate) const MIN_LIMIT: u64 = 256;
/// Results with different endings at one length that make it a limit.
pub(crate) const HITS: u32 = 3;
/// Services whose limits are learned.
pub(crate) const MAX_SERVICES: usize = 1024;
/// Candidate lengths kept per service and unit.
pub(crate) const CANDIDATES: usize = 8;

/// The unit an SDK counts its limit in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Chars,
    Utf16,
}

/// The sample of recorded content `s` the aggregator learns from ([`Sample`]), or `None` when
/// it is too short to be at a limit. `counted`: its lengths, when the caller has counted them
/// (content is counted once per result); `whole`: how its size is counted when whole, `None`
/// when it is flagged cut for another reason.
pub(crate) fn sample(
    s: &[u8],
    counted: Option<Lengths>,
    whole: Option<SizeSource>,
) -> Option<Sample> {
    if (s.len() as u64) < MIN_LIMIT {
        return None;
    }
    let Lengths { chars, utf16 } = counted.unwrap_or_else(|| text::lengths(s));
    Some(Sample {
        chars,
        utf16,
        tail: fingerprint(s),
        bytes: s.len() as u64,
        whole,
    })
}

/// The result being observed, when it was counted as whole (copied only if kept).
#[derive(Debug, Clone, Copy)]
struct Whole<'a> {
    tool: &'a str,
    span_id: [u8; 8],
    source: SizeSource,
    at_ms: u64,
}

impl Whole<'_> {
    fn keep(&self) -> EarlierCut {
        EarlierCut {
            tool: self.tool.into(),
            span_id: self.span_id,
            source: self.source,
            at_ms: self.at_ms,
        }
    }
}

/// What an observed result says.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Observed {
    /// The learned limit the result ends at, if any.
    pub(crate) limit: Option<u64>,
    /// When this result made the limit learned: the earlier results at that length, counted as
    /// whole then.
    pub(crate) earlier: Vec<EarlierCut>,
}

#[derive(Debug, Clone)]
struct Candidate {
    length: u64,
    /// Fingerprints of the distinct endings seen at this length (the first `seen`).
    tails: [u64; HITS as usize],
    seen: usize,
    /// The results behind them that were counted as whole.
    earlier: Vec<EarlierCut>,
}

#[derive(Debug, Default)]
struct Tally {
    candidates: Vec<Candidate>,
    /// Longest content seen.
    max: u64,
    /// The learned limit.
    limit: Option<u64>,
}

impl Tally {
    /// Records a result of length `n` whose ending hashes to `tail` (`whole`: it was counted as
    /// whole); true when `n` is the (possibly just) learned limit, with the earlier whole results
    /// at `n` in `earlier` when it was just learned.
    fn observe(
        &mut self,
        n: u64,
        tail: u64,
        whole: Option<Whole<'_>>,
        earlier: &mut Vec<EarlierCut>,
    ) -> bool {
        if n > self.max {
            self.max = n;
            if self.limit.is_some_and(|l| n > l) {
                self.limit = None;
            }
            self.candidates.retain(|c| c.length >= n);
        }
        if self.limit == Some(n) {
            return true;
        }
        if n < self.max {
            return false;
        }
        match self.candidates.iter_mut().find(|c| c.length == n) {
            Some(c) => {
                if !c.tails[..c.seen].contains(&tail) && c.seen < HITS as usize {
                    c.tails[c.seen] = tail;
                    c.seen += 1;
                    if c.seen < HITS as usize {
                        c.earlier.extend(whole.map(|w| w.keep()));
                    }
                }
                if c.seen >= HITS as usize {
                    self.limit = Some(n);
                    earlier.append(&mut c.earlier);
                    return true;
                }
            }
            None => {
                if self.candidates.len() >= CANDIDATES {
                    self.candidates.remove(0);
                }
                let mut tails = [0; HITS as usize];
                tails[0] = tail;
                self.candidates.push(Candidate {
                    length: n,
                    tails,
                    seen: 1,
                    earlier: whole.map(|w| w.keep()).into_iter().collect(),
                });
            }
        }
        false
    }
}

/// Per-service learned limits, owned by the aggregator's state. Keyed by the daemon's seeded
/// hasher, looked up once per sample: with SipHash and a lookup before the entry, the two
/// hashes of the service's name cost about 420 instructions a sample (20 % of the storm's
/// spans carry one).
#[derive(Debug, Default)]
pub(crate) struct Learner {
    services: hashbrown::HashMap<Arc<str>, [Tally; 2], crate::collector::hash::MapHasher>,
}

impl Learner {
    /// A learner that knows no limit yet.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Records `sample`, the recorded content of a successful result of `service` (tool `tool`,
    /// span `span_id`, received at `at_ms`): the learned limit it ends at, if any, and the
    /// earlier results this one shows were cut.
    pub(crate) fn observe(
        &mut self,
        service: &Arc<str>,
        sample: &Sample,
        tool: &str,
        span_id: [u8; 8],
        at_ms: u64,
    ) -> Observed {
        let mut out = Observed::default();
        let Some(tallies) = self.tallies(service.clone()) else {
            return out;
        };
        let units = [(Unit::Chars, sample.chars), (Unit::Utf16, sample.utf16)];
        // A result at a limit already learned in either unit is cut: never kept as whole.
        let at_limit = units
            .iter()
            .any(|&(u, n)| tallies[u as usize].limit == Some(n));
        let whole = sample.whole.filter(|_| !at_limit).map(|source| Whole {
            tool,
            span_id,
            source,
            at_ms,
        });
        for (unit, n) in units {
            if n < MIN_LIMIT {
                continue;
            }
            if tallies[unit as usize].observe(n, sample.tail, whole, &mut out.earlier) {
                out.limit = out.limit.or(Some(n));
            }
        }
        // Both units may learn at once from the same results.
        out.earlier.sort_by_key(|e| e.span_id);
        out.earlier.dedup_by_key(|e| e.span_id);
        // What is returned (or this result, now cut) must not be returned again when the other
        // unit learns a limit later.
        if !out.earlier.is_empty() || (out.limit.is_some() && whole.is_some()) {
            let mut gone: Vec<[u8; 8]> = out.earlier.iter().map(|e| e.span_id).collect();
            gone.extend(whole.filter(|_| out.limit.is_some()).map(|w| w.span_id));
            for c in tallies.iter_mut().flat_map(|t| t.candidates.iter_mut()) {
                c.earlier.retain(|e| !gone.contains(&e.span_id));
            }
        }
        out
    }

    /// Takes `limit` as learned for `service`, in both units (a limit restored from a
    /// snapshot): a longer result still disproves it, and a lower limit shown by the data
    /// replaces it (the longest length seen is not raised).
    pub(crate) fn seed(&mut self, service: &str, limit: u64) {
        if limit < MIN_LIMIT {
            return;
        }
        let Some(tallies) = self.tallies(service.into()) else {
            return;
        };
        for t in tallies.iter_mut() {
            if t.limit.is_none() && t.max <= limit {
                t.limit = Some(limit);
            }
        }
    }

    /// The tallies of `service`, added empty the first time it is seen; `None` for a new
    /// service once [`MAX_SERVICES`] are kept.
    fn tallies(&mut self, service: Arc<str>) -> Option<&mut [Tally; 2]> {
        use hashbrown::hash_map::Entry;
        let full = self.services.len() >= MAX_SERVICES;
        match self.services.entry(service) {
            Entry::Occupied(e) => Some(e.into_mut()),
            Entry::Vacant(_) if full => None,
            Entry::Vacant(e) => Some(e.insert(Default::default())),
        }
    }

    #[cfg(test)]
    /// The learned limits of `service`, characters then UTF-16 units.
    pub(crate) fn limits(&self, service: &str) -> (Option<u64>, Option<u64>) {
        self.services
            .get(service)
            .map(|t| (t[0].limit, t[1].limit))
            .unwrap_or((None, None))
    }
}

/// FNV-1a of the last 32 bytes: results cut at one length from different content end
/// differently; the same result repeated does not.
fn fingerprint(b: &[u8]) -> u64 {
    let tail = &b[b.len().saturating_sub(32)..];
    tail.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &c| {
        (h ^ u64::from(c)).wrapping_mul(0x100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Observes `s` as result `k` of tool `fetch`, sized whole from content (`None`: flagged cut
    /// for another reason, or not counted as whole).
    fn see(l: &mut Learner, svc: &Arc<str>, s: &str, k: Option<u8>) -> Observed {
        match sample(s.as_bytes(), None, k.map(|_| SizeSource::Derived)) {
            Some(taken) => l.observe(svc, &taken, "fetch", [k.unwrap_or(0); 8], 1),
            None => Observed::default(),
        }
    }

    fn obs(l: &mut Learner, svc: &Arc<str>, s: &str) -> Option<u64> {
        see(l, svc, s, None).limit
    }

    fn text(n: usize, seed: usize) -> String {
        (0..n)
            .map(|i| (b'a' + ((i * 7 + seed) % 26) as u8) as char)
            .collect()
    }

    #[test]
    fn a_repeated_ceiling_is_learned_after_three_different_results() {
        let mut l = Learner::new();
        let svc: Arc<str> = "agent".into();
        assert_eq!(obs(&mut l, &svc, &text(400, 0)), None);
        assert_eq!(obs(&mut l, &svc, &text(1000, 1)), None);
        assert_eq!(obs(&mut l, &svc, &text(1000, 2)), None);
        assert_eq!(obs(&mut l, &svc, &text(1000, 3)), Some(1000));
        assert_eq!(obs(&mut l, &svc, &text(1000, 4)), Some(1000));
        assert_eq!(obs(&mut l, &svc, &text(999, 4)), None);
        assert_eq!(l.limits("agent"), (Some(1000), Some(1000)));
        // Another service has not shown it.
        assert_eq!(obs(&mut l, &"other".into(), &text(1000, 5)), None);
    }

    #[test]
    fn services_past_the_cap_are_not_learned_and_those_kept_still_are() {
        let mut l = Learner::new();
        for i in 0..MAX_SERVICES {
            l.seed(&format!("svc-{i}"), 500);
        }
        l.seed("late", 500);
        assert_eq!(l.limits("late"), (None, None));
        assert_eq!(l.limits("svc-0"), (Some(500), Some(500)));
        let late: Arc<str> = "late".into();
        for seed in 1..5 {
            assert_eq!(obs(&mut l, &late, &text(1000, seed)), None);
        }
        assert_eq!(l.limits("late"), (None, None));
        // A kept service still learns: a longer result disproves its seeded limit, and a new
        // one is learned.
        let kept: Arc<str> = format!("svc-{}", MAX_SERVICES - 1).into();
        for seed in 1..4 {
            obs(&mut l, &kept, &text(1000, seed));
        }
        assert_eq!(l.limits(&kept), (Some(1000), Some(1000)));
        assert_eq!(l.services.len(), MAX_SERVICES);
    }

    #[test]
    fn the_same_result_repeated_is_no_limit() {
        let mut l = Learner::new();
        let svc: Arc<str> = "agent".into();
        for _ in 0..10 {
            assert_eq!(obs(&mut l, &svc, &text(1000, 1)), None);
        }
    }

    #[test]
    fn a_longer_result_disproves_a_limit() {
        let mut l = Learner::new();
        let svc: Arc<str> = "agent".into();
        for seed in 0..3 {
            obs(&mut l, &svc, &text(1000, seed));
        }
        assert_eq!(l.limits("agent").0, Some(1000));
        assert_eq!(obs(&mut l, &svc, &text(1500, 9)), None);
        assert_eq!(l.limits("agent").0, None);
        assert_eq!(obs(&mut l, &svc, &text(1000, 7)), None);
    }

    #[test]
    fn the_results_before_the_limit_was_learned_are_returned_with_it() {
        let mut l = Learner::new();
        let svc: Arc<str> = "agent".into();
        assert_eq!(
            see(&mut l, &svc, &text(1000, 1), Some(1)),
            Observed::default()
        );
        // Flagged otherwise (a marker): a hit, but nothing to correct.
        assert_eq!(see(&mut l, &svc, &text(1000, 2), None), Observed::default());
        // The same ending again is not a new hit, and not a candidate for correction.
        assert_eq!(
            see(&mut l, &svc, &text(1000, 1), Some(9)),
            Observed::default()
        );
        let o = see(&mut l, &svc, &text(1000, 3), Some(3));
        assert_eq!(o.limit, Some(1000));
        assert_eq!(o.earlier.len(), 1);
        let e = &o.earlier[0];
        assert_eq!(
            (&*e.tool, e.span_id, e.source),
            ("fetch", [1; 8], SizeSource::Derived)
        );
        assert!(e.at_ms > 0);
        // Once learned, results are flagged as they come: nothing earlier to return.
        assert_eq!(
            see(&mut l, &svc, &text(1000, 4), Some(4)),
            Observed {
                limit: Some(1000),
                earlier: vec![]
            }
        );
    }

    #[test]
    fn a_result_is_returned_once_when_both_units_learn() {
        let mut l = Learner::new();
        let svc: Arc<str> = "agent".into();
        // 300 UTF-16 units each, 290 code points for the first three (ten emoji).
        let emoji =
            |n: usize, seed: char| format!("{}{}{seed}", "😀".repeat(n), "a".repeat(299 - 2 * n));
        assert!(see(&mut l, &svc, &emoji(10, 'a'), Some(1))
            .earlier
            .is_empty());
        assert!(see(&mut l, &svc, &emoji(10, 'b'), Some(2))
            .earlier
            .is_empty());
        // The UTF-16 limit (300) is learned: the first two are returned.
        let o = see(&mut l, &svc, &emoji(15, 'c'), Some(3));
        assert_eq!(o.limit, Some(300));
        assert_eq!(o.earlier.len(), 2);
        // Then 290 code points become a limit too: nothing is returned twice.
        let o = see(&mut l, &svc, &emoji(10, 'd'), Some(4));
        assert!(o.earlier.is_empty(), "{:?}", o.earlier);
    }

    #[test]
    fn a_seeded_limit_flags_at_once_and_is_still_disproved() {
        let mut l = Learner::new();
        let svc: Arc<str> = "agent".into();
        l.seed("agent", 1000);
        assert_eq!(obs(&mut l, &svc, &text(1000, 1)), Some(1000));
        assert_eq!(obs(&mut l, &svc, &text(999, 2)), None);
        assert_eq!(obs(&mut l, &svc, &text(1200, 3)), None);
        assert_eq!(l.limits("agent"), (None, None));
        // A lower limit shown after the restart replaces the seeded one.
        l.seed("lowered", 1000);
        let lowered: Arc<str> = "lowered".into();
        for seed in 0..2 {
            assert_eq!(obs(&mut l, &lowered, &text(800, seed)), None);
        }
        assert_eq!(obs(&mut l, &lowered, &text(800, 2)), Some(800));
        assert_eq!(l.limits("lowered"), (Some(800), Some(800)));
        // Too short to be a limit, and services past the cap, are not seeded.
        l.seed("short", 100);
        assert_eq!(l.limits("short"), (None, None));
    }

    #[test]
    fn non_ascii_counts_code_points_and_utf16_units() {
        let mut l = Learner::new();
        let svc: Arc<str> = "agent".into();
        // 300 code points, 600 UTF-16 units: emoji are two units each.
        let cut = |seed: char| format!("{}{seed}", "😀".repeat(299));
        assert_eq!(obs(&mut l, &svc, &cut('a')), None);
        assert_eq!(obs(&mut l, &svc, &cut('b')), None);
        assert_eq!(obs(&mut l, &svc, &cut('c')), Some(300));
        assert_eq!(l.limits("agent"), (Some(300), Some(599)));
    }

    #[test]
    fn short_results_are_never_limits() {
        let mut l = Learner::new();
        let svc: Arc<str> = "agent".into();
        for seed in 0..10 {
            assert_eq!(obs(&mut l, &svc, &text(100, seed)), None);
        }
    }
}
