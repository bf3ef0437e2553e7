//! The counters of a series over one period ([`Counts`]), declared once in [`counters!`]: the
//! live state, the sums of periods and the snapshot's disk format
//! ([`crate::collector::persist::format`]) are the one struct this list generates.
//!
//! Adding a counter is one entry in the list ([`for_each_counter`]: its doc, how it is shown in
//! the API row and `/metrics`, its name and type) and its update in [`Counts::record`]. The API
//! row and the `/metrics` families are generated from the list too. The disk format writes
//! and reads every field of the list, and a snapshot that lacks one is refused as damaged
//! rather than restored as 0 (the test below walks the list). A counter is a `u64` summed
//! across periods, or an `Option<u64>` kept as the largest seen; updates saturate, so a
//! counter never wraps, however long the daemon runs.

use serde::{Deserialize, Serialize};

use crate::collector::ingest::recognize::{Size, SizeSource, ToolRecord};

/// How one counter of [`Counts`] adds up across periods.
pub(crate) trait Counter: Copy {
    /// Adds `other` (a later or a parallel period) in.
    fn merge(&mut self, other: Self);
}

impl Counter for u64 {
    fn merge(&mut self, other: Self) {
        *self = self.saturating_add(other);
    }
}

impl Counter for Option<u64> {
    fn merge(&mut self, other: Self) {
        *self = (*self).max(other);
    }
}

/// The one list of counters, handed to `$then!`: [`Counts`] here, the API row's columns
/// ([`crate::collector::read::views`]) and the per-series families of `/metrics`
/// ([`crate::collector::read::families`]). Each entry is its doc, then `#[shown(value, api,
/// metric)]`, then `name: type`:
/// - `value`: how it reads outside the state: `weighted` (a count of records weighted by the
///   period's mean adjusted count, [`Counts::weighted`]), `raw` (as counted), `milli`
///   (thousandths of a call) or `largest` (an `Option<u64>`, absent when never seen);
/// - `api`: a column of the `/api/v1/tools` row under its own name, or `hidden` (shown in a form
///   of its own: `count`, `spans`, the per-layer over-ceiling counts);
/// - `metric`: `family(NAME, "help")` (a counter family of its own, in list order), `sized` (a
///   `source` of `toolsize_tool_results_sized_total`), `gauge(NAME, "help")`, or `none` (not
///   exported, or written by its own family).
///
/// The metric names are the constants of [`crate::collector::read::names`], resolved where the
/// list is expanded.
macro_rules! for_each_counter {
    ($then:ident) => {
        $then! {
            /// Calls weighted by each record's adjusted count (1 / its tracer's sampling
            /// probability, [`crate::collector::ingest::sampling`]), in thousandths of a call:
            /// 1000 × `calls` when nothing was sampled. The other counters are weighted by the
            /// period's mean weight ([`Counts::weighted`]), exact when its records share one
            /// sampling rate, as a series' records do (one service, one sampler); kept as one
            /// field so that a series' slots stay within their memory budget.
            #[shown(milli, hidden, family(TOOL_CALLS, "Tool calls seen, each span weighted by its adjusted count when its tracer sampled it (see toolsize_tool_spans_total)."))]
            calls_milli: u64,
            /// Failed calls.
            #[shown(weighted, api, family(TOOL_CALL_ERRORS, "Tool calls that failed (weighted as the calls)."))]
            errors: u64,
            /// Results the tool reported truncated.
            #[shown(weighted, api, family(TOOL_RESULTS_TRUNCATED, "Results the tool reported truncated before the model saw them (weighted as the calls)."))]
            truncated: u64,
            /// Results that show an upstream cut.
            #[shown(weighted, api, family(TOOL_RESULTS_TRUNCATED_UPSTREAM, "Results whose content shows a cut made before the daemon saw them; their size is a lower bound (weighted as the calls)."))]
            truncated_upstream: u64,
            /// Successful calls whose size is unknown.
            #[shown(raw, api, family(TOOL_RESULTS_SIZE_UNKNOWN, "Successful results whose size is unknown (content not captured or a placeholder)."))]
            unknown_size: u64,
            /// Tool calls (spans seen).
            #[shown(raw, hidden, family(TOOL_SPANS, "Tool spans received. Below toolsize_tool_calls_total when the tracer sampled (the probability from the span's tracestate or recognition.sampling_rates): the call, error, truncation and over-ceiling counters are then extrapolated, each span weighted by its adjusted count; the size histograms hold each span once."))]
            calls: u64,
            /// Sizes measured by the tool.
            #[shown(raw, api, sized)]
            measured: u64,
            /// Sizes derived from content, counted as recorded.
            #[shown(raw, api, sized)]
            derived: u64,
            /// Sizes derived from content with the tracer's envelope removed.
            #[shown(raw, api, sized)]
            unwrapped: u64,
            /// Sizes a coding agent reported in its own attribute (cut by the agent or not,
            /// when it said how large the result was before its cut).
            #[shown(raw, api, sized)]
            reported: u64,
            /// Sizes that are lower bounds (the content showed an upstream cut).
            #[shown(raw, api, sized)]
            lower_bound: u64,
            /// Of the unwrapped sizes, those of a JSON result re-serialised (approximate).
            #[shown(raw, api, none)]
            unwrapped_approximate: u64,
            /// Results over the ceiling of a layer.
            #[shown(weighted, hidden, none)]
            over_ceiling: u64,
            /// The largest attribute value length limit results were seen cut at (configured or
            /// learned), characters or UTF-16 units.
            #[shown(largest, api, gauge(TOOL_RESULT_UPSTREAM_LIMIT, "Attribute value length limit (characters or UTF-16 units) the tool's results were seen cut at upstream, configured or learned from the data."))]
            upstream_limit: Option<u64>,
        }
    };
}
pub(crate) use for_each_counter;

/// Declares [`Counts`] from the one list of counters.
macro_rules! counters {
    ($($(#[doc = $doc:literal])+ #[shown($($shown:tt)*)] $name:ident: $ty:ty,)+) => {
        /// The counters of one series over one period; also their disk format (every field is
        /// required there).
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub(crate) struct Counts {
            $($(#[doc = $doc])+ pub(crate) $name: $ty,)+
        }

        impl Counts {
            /// Every counter's name, as the disk format writes it.
            #[cfg(test)]
            pub(crate) const NAMES: &'static [&'static str] = &[$(stringify!($name)),+];

            /// Adds the counters of `o` in.
            pub(crate) fn add(&mut self, o: &Counts) {
                $(Counter::merge(&mut self.$name, o.$name);)+
            }
        }
    };
}

for_each_counter!(counters);

/// Thousandths of a call as calls.
pub(crate) fn calls_of(milli: u64) -> f64 {
    milli as f64 / 1000.0
}

/// Thousandths of a call as whole calls, rounded.
pub(crate) fn whole_calls(milli: u64) -> u64 {
    milli.saturating_add(500) / 1000
}

impl Counts {
    /// Whether some of the calls were counted from sampled spans (their counts extrapolated).
    pub(crate) fn extrapolated(&self) -> bool {
        self.calls_milli > self.calls.saturating_mul(1000)
    }

    /// `n` of this period's records (errors, cuts, results over the ceiling), weighted by the
    /// period's mean adjusted count: thousandths of a call.
    pub(crate) fn weighted(&self, n: u64) -> u64 {
        match self.calls {
            0 => n.saturating_mul(1000),
            calls => (u128::from(n) * u128::from(self.calls_milli) / u128::from(calls)) as u64,
        }
    }

    /// Counts one record; `over` when it is over the ceiling of a layer.
    pub(crate) fn record(&mut self, r: &ToolRecord, over: bool) {
        let one = |c: &mut u64, yes: bool| *c = c.saturating_add(u64::from(yes));
        self.calls_milli = self.calls_milli.saturating_add(r.weight.milli());
        one(&mut self.over_ceiling, over);
        one(&mut self.calls, true);
        one(&mut self.errors, r.error);
        one(&mut self.truncated, r.truncated);
        one(&mut self.truncated_upstream, r.truncated_upstream);
        match r.size {
            // A cut whose original size the emitter revealed is not a lower bound.
            Size::Known { source, .. } => match (
                source,
                r.truncated_upstream && r.upstream.original.is_none(),
            ) {
                (_, true) => one(&mut self.lower_bound, true),
                (SizeSource::Reported, false) => one(&mut self.reported, true),
                (SizeSource::Measured, false) => one(&mut self.measured, true),
                (SizeSource::Derived, false) => one(&mut self.derived, true),
                (SizeSource::Unwrapped, false) => one(&mut self.unwrapped, true),
                (SizeSource::UnwrappedApproximate, false) => {
                    one(&mut self.unwrapped, true);
                    one(&mut self.unwrapped_approximate, true);
                }
            },
            Size::Unknown(_) => one(&mut self.unknown_size, true),
            Size::Failed => {}
        }
        self.upstream_limit = self.upstream_limit.max(r.upstream_limit);
    }

    /// Counts one result, sized from `source` as whole when it arrived, as cut upstream at
    /// `limit`. Only `truncated_upstream` moves, so every exported counter stays monotonic: the
    /// `source` counters keep how each result was sized when it arrived. False (nothing changed)
    /// when every content-sized result counted here is already counted cut.
    pub(crate) fn flag_cut(&mut self, source: SizeSource, limit: u64) -> bool {
        let from_content = self.derived + self.unwrapped + self.lower_bound;
        if source == SizeSource::Measured || self.truncated_upstream >= from_content {
            return false;
        }
        self.truncated_upstream += 1;
        self.upstream_limit = self.upstream_limit.max(Some(limit));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts with every counter set, each to its own value (from the JSON of the list, so a
    /// new counter is set too).
    fn every_counter_set() -> Counts {
        let mut v = serde_json::to_value(Counts::default()).unwrap();
        for (i, name) in Counts::NAMES.iter().enumerate() {
            v[*name] = (i as u64 + 7).into();
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_disk_format_carries_every_counter_and_refuses_a_snapshot_without_one() {
        let c = every_counter_set();
        let disk = serde_json::to_value(c).unwrap();
        let fields = disk.as_object().unwrap();
        let mut names = Counts::NAMES.to_vec();
        names.sort_unstable();
        // Sorted: serde_json keeps insertion order when another crate turns on its
        // `preserve_order` feature.
        let mut keys: Vec<&str> = fields.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys, names,
            "the disk format writes every counter of the list"
        );
        for (i, name) in Counts::NAMES.iter().enumerate() {
            assert_eq!(
                disk[*name],
                i as u64 + 7,
                "{name} is written with its value"
            );
        }
        assert_eq!(serde_json::from_value::<Counts>(disk.clone()).unwrap(), c);
        for name in Counts::NAMES {
            let mut without = disk.clone();
            without.as_object_mut().unwrap().remove(*name);
            let back = serde_json::from_value::<Counts>(without);
            // An absent limit is a limit never seen; an absent count is a damaged file.
            match *name {
                "upstream_limit" => assert_eq!(back.unwrap().upstream_limit, None),
                _ => assert!(back.is_err(), "a snapshot without {name} restores it as 0"),
            }
        }
    }

    #[test]
    fn periods_add_every_counter() {
        let c = every_counter_set();
        let mut sum = c;
        sum.add(&c);
        let (once, twice) = (
            serde_json::to_value(c).unwrap(),
            serde_json::to_value(sum).unwrap(),
        );
        for name in Counts::NAMES {
            let (a, b) = (
                once[*name].as_u64().unwrap(),
                twice[*name].as_u64().unwrap(),
            );
            match *name {
                "upstream_limit" => assert_eq!(b, a, "the largest limit"),
                _ => assert_eq!(b, 2 * a, "{name} summed"),
            }
        }
        let mut full = Counts {
            calls: u64::MAX,
            ..Counts::default()
        };
        full.add(&c);
        assert_eq!(full.calls, u64::MAX, "saturates");
    }
}
