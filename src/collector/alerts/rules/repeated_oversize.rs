//! `ToolArgsRepeatedlyOversize`: one arguments hash over the ceiling again and again (an agent
//! retrying the same huge call).
//!
//! One alert per (service, tool), not per hash, so thousands of hot hashes cannot flood the
//! alert table: it fires when any hash of the series reaches `count` over-ceiling results within
//! `window` of the first of them, and its annotations list the most repeated hashes with their
//! counts. Each series tracks the last [`TRACKED_PER_SERIES`] distinct hashes it saw over the
//! ceiling (the oldest is replaced first), allocated once per series: no allocation per record.
//! A record's tracker is found through an index of one byte a place in three arrays of 256
//! (a tag of the hash, where it leads, which tracker), open addressing at most half full, and
//! the trackers lie dense in the order they came, 32 bytes each: 4.8 KiB a series, against
//! 10 KiB for a table of the trackers themselves at most half full (a profile at 100,000 spans/s
//! put half of this rule's samples on the first look at such a tracker; a hash map of indices
//! beside a list of trackers made it three cache misses a record). A hash repeated with fewer than that many other hashes
//! of the same tool in between is always caught; under a churn of more, it can be forgotten
//! between two repeats and the alert fires later, never falsely. A result of a sampled tracer
//! counts as its adjusted count (one sampled retry of ten stands for ten).

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::time::Duration;

use super::{labels, series_labels, Decision, Firing, Hit, Over, RecordRule};
use crate::collector::alerts::Matched;
use crate::collector::config::RepeatedOversizeConfig;
use crate::collector::ingest::recognize::ArgsHash;
use crate::collector::state::{whole_calls, MapHasher};

use super::over_ceiling::HINT;

/// The alert name.
pub const NAME: &str = "ToolArgsRepeatedlyOversize";

/// Distinct arguments hashes tracked per series (128 trackers of 32 bytes and an index of 768
/// bytes, per series that has any).
pub(crate) const TRACKED_PER_SERIES: usize = 128;
/// Hashes listed in the alert's `args_hashes` annotation.
pub(crate) const LISTED: usize = 5;

#[derive(Debug, Clone, Copy)]
struct Tracker {
    start_ms: u64,
    count: u32,
    hash: ArgsHash,
    /// The place of the index that leads to it.
    place: u8,
}

const _: () = assert!(std::mem::size_of::<Tracker>() == 32);

const EMPTY: Tracker = Tracker {
    start_ms: 0,
    count: 0,
    hash: ArgsHash::EMPTY,
    place: 0,
};

/// [`Hashes::tags`] of an empty place.
const FREE: u8 = 0;

/// Places of a series' index: twice the hashes tracked, so a probe meets a free place soon.
const PLACES: usize = 2 * TRACKED_PER_SERIES;
const MASK: usize = PLACES - 1;
const _: () = assert!(PLACES.is_power_of_two() && PLACES <= 256 && TRACKED_PER_SERIES <= 256);

/// Where a hash leads in an index and its tag, from its 64-bit hash: the low bits and the top
/// byte (never [`FREE`]).
fn home_and_tag(h: u64) -> (usize, u8) {
    (h as usize & MASK, ((h >> 56) as u8).max(1))
}

/// The rule.
#[derive(Debug)]
pub(crate) struct Rule {
    severity: crate::collector::config::Severity,
    count: u32,
    window: Duration,
    window_ms: u64,
    trackers: HashMap<u32, Hashes, MapHasher>,
    /// Where a hash leads in an index (seeded per process).
    places: MapHasher,
    firing: Firing<u32>,
}

/// The hashes of one series: their trackers in the order they came (the oldest replaced first
/// once [`TRACKED_PER_SERIES`] are tracked), and an open-addressing index of them (linear
/// probing, removal by shifting back, so no tombstones).
#[derive(Debug)]
struct Hashes {
    /// Per place: [`FREE`], or the tag of the hash there.
    tags: [u8; PLACES],
    /// Per taken place: the place its hash leads to.
    homes: [u8; PLACES],
    /// Per taken place: its tracker.
    rings: [u8; PLACES],
    /// `trackers[..len]` are in use.
    trackers: Box<[Tracker]>,
    len: usize,
    /// The tracker replaced next once all are in use.
    next: usize,
    /// When a hash of the series was last counted.
    last_ms: u64,
}

impl Hashes {
    fn new() -> Self {
        Self {
            tags: [FREE; PLACES],
            homes: [0; PLACES],
            rings: [0; PLACES],
            trackers: vec![EMPTY; TRACKED_PER_SERIES].into_boxed_slice(),
            len: 0,
            next: 0,
            last_ms: 0,
        }
    }

    /// The place of `hash` (`Ok`), or the free place where it belongs (`Err`).
    fn find(&self, hash: &ArgsHash, home: usize, tag: u8) -> Result<usize, usize> {
        let mut i = home;
        loop {
            let at = self.tags[i];
            if at == FREE {
                return Err(i);
            }
            if at == tag && self.trackers[usize::from(self.rings[i])].hash == *hash {
                return Ok(i);
            }
            i = (i + 1) & MASK;
        }
    }

    /// Empties place `at`, moving back the places after it that probed past it.
    fn remove(&mut self, at: usize) {
        let mut hole = at;
        let mut j = at;
        loop {
            j = (j + 1) & MASK;
            if self.tags[j] == FREE {
                break;
            }
            // Place `j` may fill the hole when the hole is on its way from its home to `j`.
            let home = usize::from(self.homes[j]);
            if (j.wrapping_sub(home) & MASK) >= (j.wrapping_sub(hole) & MASK) {
                self.tags[hole] = self.tags[j];
                self.homes[hole] = self.homes[j];
                self.rings[hole] = self.rings[j];
                self.trackers[usize::from(self.rings[j])].place = hole as u8;
                hole = j;
            }
        }
        self.tags[hole] = FREE;
    }

    /// The trackers in use.
    fn iter(&self) -> impl Iterator<Item = &Tracker> {
        self.trackers[..self.len].iter()
    }
}

impl Rule {
    /// The rule of `[alerts.repeated_oversize]`, when enabled.
    pub(crate) fn from_config(c: &RepeatedOversizeConfig) -> Option<Self> {
        let window = c.window.0;
        c.enabled.then(|| Self {
            severity: c.severity.clone(),
            count: c.count.max(1),
            window,
            window_ms: window.as_millis() as u64,
            trackers: HashMap::default(),
            places: MapHasher::default(),
            firing: Firing::new(window),
        })
    }

    /// Counts one over-ceiling result of `hash` standing for `calls` calls (its adjusted count
    /// when its tracer sampled); returns the count within the window.
    fn count(&mut self, series: u32, hash: ArgsHash, now_ms: u64, calls: u32) -> u32 {
        let window_ms = self.window_ms;
        let (home, tag) = home_and_tag(self.places.hash_one(hash));
        let h = self.trackers.entry(series).or_insert_with(Hashes::new);
        h.last_ms = now_ms;
        let mut free = match h.find(&hash, home, tag) {
            Ok(i) => {
                let t = &mut h.trackers[usize::from(h.rings[i])];
                if now_ms >= t.start_ms + window_ms {
                    t.start_ms = now_ms;
                    t.count = 0;
                }
                t.count = t.count.saturating_add(calls);
                return t.count;
            }
            Err(i) => i,
        };
        let ring = if h.len < TRACKED_PER_SERIES {
            h.len += 1;
            h.len - 1
        } else {
            // The oldest hash makes room; removing it may move the place this one takes.
            let ring = h.next;
            h.next = (ring + 1) % TRACKED_PER_SERIES;
            h.remove(usize::from(h.trackers[ring].place));
            free = h
                .find(&hash, home, tag)
                .expect_err("a hash not tracked stays untracked");
            ring
        };
        (h.tags[free], h.homes[free], h.rings[free]) = (tag, home as u8, ring as u8);
        h.trackers[ring] = Tracker {
            start_ms: now_ms,
            count: calls,
            hash,
            place: free as u8,
        };
        calls
    }

    fn payload(&self, o: &Over<'_>, new: bool) -> Matched {
        let key = o.seen.key;
        let now_ms = o.seen.now_ms;
        let mut hot: Vec<&Tracker> = self.trackers[&o.seen.series]
            .iter()
            .filter(|t| t.count >= self.count && now_ms < t.start_ms + self.window_ms)
            .collect();
        hot.sort_by(|a, b| b.count.cmp(&a.count).then(a.hash.cmp(&b.hash)));
        let top = hot.first().map_or(0, |t| t.count);
        let listed: Vec<String> = hot
            .iter()
            .take(LISTED)
            .map(|t| format!("{} ×{}", t.hash, t.count))
            .collect();
        let cut = o.cut;
        Matched {
            labels: series_labels(NAME, key, self.severity.as_str()),
            annotations: labels(&[
                ("bytes", &o.bytes.to_string()),
                ("ceiling", &cut.limit.to_string()),
                ("unit", cut.unit.as_str()),
                ("layer", cut.layer_id),
                ("count", &top.to_string()),
                ("hashes", &hot.len().to_string()),
                ("args_hashes", &listed.join(", ")),
                (
                    "summary",
                    &format!(
                        "Tool {} was called {top} times with the same arguments and an \
                         over-ceiling result.",
                        key.tool
                    ),
                ),
                (
                    "description",
                    &format!(
                        "{} arguments hash(es) of tool {} (service {}) returned over the {} \
                         ceiling {} times or more within {} s, the most {top} times: an agent \
                         retrying the same huge call. Most repeated: {}.",
                        hot.len(),
                        key.tool,
                        key.service,
                        cut.layer_id,
                        self.count,
                        self.window.as_secs(),
                        listed.join(", ")
                    ),
                ),
                ("hint", HINT),
            ]),
            quiet_period: self.window,
            new,
        }
    }
}

impl RecordRule for Rule {

    fn severity(&self) -> &str {
        self.severity.as_str()
    }

    fn over(&mut self, o: &Over<'_>) -> Decision {
        let Some(hash) = o.seen.record.args_hash else {
            return Decision::Quiet;
        };
        let calls = u32::try_from(whole_calls(o.seen.record.weight.milli())).unwrap_or(u32::MAX);
        if self.count(o.seen.series, hash, o.seen.now_ms, calls) < self.count {
            return Decision::Quiet;
        }
        match self.firing.hit(o.seen.series, o.seen.now_ms) {
            Hit::Merged => Decision::Merged,
            hit => Decision::Due(self.payload(o, hit == Hit::New)),
        }
    }

    fn sweep(&mut self, now_ms: u64) {
        self.firing.sweep(now_ms);
        let window_ms = self.window_ms;
        self.trackers
            .retain(|_, h| now_ms < h.last_ms + window_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::{Rule, TRACKED_PER_SERIES};
    use std::hash::BuildHasher;

    /// The rule's counting, as the simplest code that could do it: the last
    /// `TRACKED_PER_SERIES` distinct hashes of a series in the order they came, the oldest
    /// forgotten first.
    #[derive(Default)]
    struct Model(std::collections::VecDeque<(ArgsHash, u64, u32)>);

    impl Model {
        fn count(&mut self, hash: ArgsHash, now_ms: u64, window_ms: u64, calls: u32) -> u32 {
            if let Some(t) = self.0.iter_mut().find(|t| t.0 == hash) {
                if now_ms >= t.1 + window_ms {
                    (t.1, t.2) = (now_ms, 0);
                }
                t.2 = t.2.saturating_add(calls);
                return t.2;
            }
            if self.0.len() == TRACKED_PER_SERIES {
                self.0.pop_front();
            }
            self.0.push_back((hash, now_ms, calls));
            calls
        }
    }

    #[test]
    fn the_table_counts_as_the_simplest_model_does() {
        // Hashes drawn from pools of several sizes (fewer than tracked, about as many, many
        // more), so places collide, probes run long, and the oldest is forgotten and moved
        // back over, again and again; two series share one rule.
        let window_ms = 50_000;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let c = super::RepeatedOversizeConfig {
            window: crate::collector::config::Interval::secs(50),
            ..super::RepeatedOversizeConfig::default()
        };
        let places = crate::collector::state::MapHasher::seeded(0x5eed);
        let home = |h: &ArgsHash| super::home_and_tag(places.hash_one(h)).0;
        let hash = |i: u64| ArgsHash::new(&format!("{i:012x}"));
        // Besides pools of any hashes, one of hashes that all lead to the few places around
        // the table's end: long clusters that wrap, and shifts back across the wrap.
        let wrapping: Vec<ArgsHash> = (0..)
            .map(hash)
            .filter(|h| !(4..=251).contains(&home(h)))
            .take(200)
            .collect();
        for pool in [40u64, 130, 300, 5000, 0] {
            let mut rule = Rule::from_config(&c).unwrap();
            rule.places = places;
            let mut models = [Model::default(), Model::default()];
            for step in 0..40_000u64 {
                let series = (next() % 2) as u32;
                let hash = match pool {
                    0 => wrapping[(next() % wrapping.len() as u64) as usize],
                    n => hash(next() % n),
                };
                let calls = 1 + (next() % 3) as u32;
                let now_ms = step * 7;
                let got = rule.count(series, hash, now_ms, calls);
                let want = models[series as usize].count(hash, now_ms, window_ms, calls);
                assert_eq!(
                    got, want,
                    "pool {pool}, step {step}, series {series}, {hash:?}"
                );
            }
            for (series, model) in models.iter().enumerate() {
                let table = &rule.trackers[&(series as u32)];
                let mut tracked: Vec<_> = table.iter().map(|t| (t.hash, t.count)).collect();
                let mut modelled: Vec<_> = model.0.iter().map(|t| (t.0, t.2)).collect();
                tracked.sort();
                modelled.sort();
                assert_eq!(
                    tracked, modelled,
                    "pool {pool}: the same hashes, the same counts"
                );
                // Each tracker's place in the index leads back to it and holds its tag and
                // home; no other place is taken.
                for (ring, t) in table.trackers[..table.len].iter().enumerate() {
                    let at = usize::from(t.place);
                    assert_eq!(usize::from(table.rings[at]), ring);
                    let (home, tag) = super::home_and_tag(places.hash_one(t.hash));
                    assert_eq!((usize::from(table.homes[at]), table.tags[at]), (home, tag));
                }
                let taken = table.tags.iter().filter(|&&t| t != super::FREE).count();
                assert_eq!(taken, table.len, "pool {pool}: a place for each tracker, no more");
            }
        }
    }

    #[test]
    fn a_series_tracks_its_hashes_in_under_five_kib() {
        // docs/collector.md states 4.8 KiB a series.
        let bytes = std::mem::size_of::<super::Hashes>()
            + TRACKED_PER_SERIES * std::mem::size_of::<super::Tracker>();
        assert!(bytes <= 4_915, "{bytes} bytes");
    }

    use super::NAME;
    use crate::collector::alerts::OVER_CEILING;
    use crate::collector::config::Config;
    use crate::collector::ingest::recognize::ArgsHash;

    fn config() -> Config {
        let mut config = Config::default();
        only(&mut config, "");
        config.alerts.over_ceiling.enabled = false;
        config
    }

    #[test]
    fn needs_count_within_the_window_of_the_first() {
        let (mut st, mut rx) = wired(&config(), 64);
        st.record(&rec(20_000), T0);
        st.record(&rec(20_000), T0 + 100);
        assert!(names(&mut rx).is_empty());
        // The first one is 10 minutes old by now: the count starts again.
        st.record(&rec(20_000), T0 + 600);
        st.record(&rec(20_000), T0 + 650);
        assert!(names(&mut rx).is_empty());
        st.record(&rec(20_000), T0 + 690);
        let got: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        assert_eq!(got.len(), 1);
        let m = &got[0];
        assert_eq!(m.labels["alertname"], NAME);
        assert!(!m.labels.contains_key("args_hash"), "one alert per tool");
        assert_eq!(m.annotations["count"], "3");
        assert_eq!(m.annotations["args_hashes"], "0123456789ab ×3");
        let c = only_window(super::super::p95_jump::NAME);
        assert!(
            super::super::Rules::from_config(&c).is_some(),
            "window rules still on"
        );
        let mut c = Config::default();
        for kind in super::super::RuleKind::ALL {
            kind.set_enabled(&mut c.alerts, false);
        }
        assert!(
            super::super::Rules::from_config(&c).is_none(),
            "every rule off"
        );
    }

    #[test]
    fn a_sampled_result_counts_as_the_calls_it_stands_for() {
        let (mut st, mut rx) = wired(&config(), 64);
        let mut r = rec(20_000);
        r.weight = crate::collector::ingest::sampling::Weight::of_probability(0.5).unwrap();
        st.record(&r, T0);
        assert!(names(&mut rx).is_empty(), "2 of 3");
        st.record(&r, T0 + 100);
        let got: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        assert_eq!(
            got.len(),
            1,
            "two sampled results at 50 % stand for 4 calls"
        );
        assert_eq!(got[0].annotations["count"], "4");
    }

    #[test]
    fn under_the_ceiling_or_other_arguments_do_not_count() {
        let mut config = Config::default();
        only(&mut config, "");
        let (mut st, mut rx) = wired(&config, 64);
        for (t, b) in [(0, 20_000), (200, 50_000), (400, 9_000)] {
            st.record(&rec(b), T0 + t);
        }
        let n = names(&mut rx);
        assert!(n.iter().all(|n| n == OVER_CEILING), "{n:?}");
        let (mut st, mut rx) = wired(&config, 64);
        for (i, h) in ["aaaaaaaaaaaa", "bbbbbbbbbbbb", "aaaaaaaaaaaa"]
            .iter()
            .enumerate()
        {
            let mut r = rec(20_000);
            r.args_hash = Some(ArgsHash::new(h));
            st.record(&r, T0 + i as u64);
        }
        assert!(!names(&mut rx).iter().any(|n| n == NAME));
    }

    #[test]
    fn thousands_of_hot_hashes_make_one_alert_per_tool_listing_the_top_ones() {
        let (mut st, mut rx) = wired(&config(), 1024);
        // 40 tools × 100 hashes, each hash over the ceiling 3 times (4 for the first five of
        // every tool), round robin: 12,000 results, 4,000 hot hashes.
        let mut batch = Vec::new();
        for round in 0..4u64 {
            for h in 0..100u64 {
                for t in 0..40u64 {
                    if round < 3 || h < 5 {
                        let mut r = rec(20_000);
                        r.tool = format!("tool_{t}").into();
                        r.args_hash = Some(ArgsHash::new(&format!("{t:04x}{h:08x}")));
                        batch.push(r);
                    }
                }
            }
        }
        st.record_batch_ms(&batch, T0 * 1000);
        let got: Vec<_> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        assert_eq!(got.len(), 40, "one alert per tool");
        let m = got.iter().find(|m| m.labels["tool"] == "tool_7").unwrap();
        assert_eq!(
            m.annotations["count"], "3",
            "sent when the first hash reached 3"
        );
        assert_eq!(m.annotations["hashes"], "1");
        assert_eq!(m.annotations["args_hashes"], "000700000000 ×3");
    }
}
