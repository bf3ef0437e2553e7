//! A new layer stack for a running state (SIGHUP): every series is held to its new stack at
//! once, and what it kept by layer is carried over by layer id, never by position.
//!
//! Layers are numbered in [`Stacks::all`](super::stacks::Stacks), and a reload numbers them
//! again: a layer that stays may move, one removed leaves a gap. So each series' profile is
//! chosen again (its service's, its agent's or the daemon's stack, as for a new series), its
//! over-ceiling counts (kept by id) stay for the layers it is still held to and are dropped for
//! the others (summed per layer, for the log), and its recent over-ceiling results are renumbered
//! by id. A layer the series is newly held to starts at zero. The observers (the over-ceiling
//! rule deduplicates by layer index) are handed the same renumbering.
//!
//! The classic size histogram's bounds follow the stack's ceilings. Where they change, each
//! series' bucket counts are rebuilt: a bound both layouts have keeps its exact cumulative
//! count, a new bound is placed from the series' HDR histogram and held between its exact
//! neighbours, so no cumulative count `/metrics` has served goes down. The work is one pass over
//! the series on the aggregator (ingestion waits for it, as for a snapshot capture).

use std::sync::Arc;

use super::stacks::Stacks;
use super::State;

/// What a restack did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Restacked {
    /// Over-ceiling counts dropped because the series is no longer held to the layer: layer
    /// id and the results counted (weighted, in thousandths of a call), ascending by id.
    pub dropped: Vec<(String, u64)>,
    /// Series whose stack changed (another layer set or ceiling).
    pub series_moved: usize,
}

/// For each index of the old numbering, the same layer's index in the new one (`None`: removed).
pub(crate) type Remap = [Option<usize>];

impl State {
    /// Holds every series to `stacks` from now on, the classic size histogram on `size_bounds`
    /// (see the module doc).
    pub(crate) fn restack(&mut self, stacks: Arc<Stacks>, size_bounds: Arc<[u64]>) -> Restacked {
        let remap: Vec<Option<usize>> = self
            .limits
            .stacks
            .all
            .layers()
            .iter()
            .map(|l| stacks.all.layers().iter().position(|n| n.id() == l.id()))
            .collect();
        let old_bounds = std::mem::replace(&mut self.limits.size_bounds, size_bounds);
        let old_stacks = std::mem::replace(&mut self.limits.stacks, stacks);
        let stacks = self.limits.stacks.clone();
        let bounds_changed = old_bounds[..] != self.limits.size_bounds[..];
        let mut out = Restacked::default();
        for (key, s) in &mut self.series {
            let profile = stacks.profile(&key.service, &key.tool);
            let held = |id: &str| {
                profile
                    .order
                    .iter()
                    .any(|&i| stacks.all.layers()[i].id() == id)
            };
            let before = old_stacks
                .ceiling(&s.profile)
                .map(|c| (c.layer_id.to_string(), c.bytes));
            let after = stacks
                .ceiling(&profile)
                .map(|c| (c.layer_id.to_string(), c.bytes));
            out.series_moved += usize::from(before != after || s.profile.name != profile.name);
            s.over_ceiling.retain(|(id, n)| {
                let keep = held(id);
                if !keep {
                    super::add_over(&mut out.dropped, id, *n);
                }
                keep
            });
            s.over_recent.retain_mut(|o| {
                let to = remap.get(usize::from(o.layer)).copied().flatten();
                match to.filter(|&i| profile.order.contains(&i)) {
                    Some(i) => {
                        o.layer = u16::try_from(i).unwrap_or(u16::MAX);
                        true
                    }
                    None => false,
                }
            });
            if bounds_changed {
                let estimate = s.total_stats().size.bucket_counts(&self.limits.size_bounds);
                s.size_buckets = rebucket(
                    &old_bounds,
                    &s.size_buckets,
                    &self.limits.size_bounds,
                    &estimate,
                );
            }
            s.profile = profile;
        }
        out.dropped.sort();
        for o in &mut self.observers {
            o.restack(&remap);
        }
        out
    }
}

/// The non-cumulative counts over `new` bounds (plus +Inf) of what `old` counts over `old_bounds`:
/// exact at every bound both share, `estimate` (the same results over `new`, from the HDR
/// histogram) elsewhere, held between the exact cumulative counts around it.
fn rebucket(old_bounds: &[u64], old: &[u64], new: &[u64], estimate: &[u64]) -> Vec<u64> {
    // Cumulative counts at each old bound, +Inf last.
    let exact: Vec<u64> = old
        .iter()
        .scan(0u64, |acc, &c| {
            *acc += c;
            Some(*acc)
        })
        .collect();
    let total = exact.last().copied().unwrap_or(0);
    let mut guess = 0u64;
    let mut out = Vec::with_capacity(new.len() + 1);
    let mut previous = 0u64;
    for (i, &b) in new.iter().enumerate() {
        guess += estimate.get(i).copied().unwrap_or(0);
        let at = old_bounds.partition_point(|&o| o < b);
        let cumulative = if old_bounds.get(at) == Some(&b) {
            exact[at]
        } else {
            let below = at.checked_sub(1).map_or(0, |j| exact[j]);
            let above = exact.get(at).copied().unwrap_or(total);
            guess.clamp(below, above.max(below))
        };
        let cumulative = cumulative.max(previous);
        out.push(cumulative - previous);
        previous = cumulative;
    }
    out.push(total.saturating_sub(previous));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::state::tests::{known, rec};
    use crate::collector::state::Limits;
    use crate::collector::Config;

    fn config(toml: &str) -> Config {
        Config::from_toml(toml).unwrap()
    }

    fn layers(c: &Config) -> (Arc<Stacks>, Arc<[u64]>) {
        let l = Limits::from_config(c);
        (l.stacks, l.size_bounds)
    }

    #[test]
    fn counts_follow_layer_ids_not_positions() {
        let before = config(
            "[layers]\nstack = [\"old\", \"default\"]\nceiling_bytes = 20000\n\
             [[layers.custom]]\nname = \"old\"\nlimit = 100000\nunit = \"bytes\"\n",
        );
        let mut state = State::new(Limits::from_config(&before));
        // Over the 20,000-byte default layer only.
        state.record(&rec("search", known(25_000)), 1_000);
        // Over both; `default` (20,000 bytes) is the weakest cutting layer.
        state.record(&rec("fetch", known(300_000)), 1_000);
        let over = |s: &State, tool: &str| {
            let (_, series) = s.series.iter().find(|(k, _)| k.tool == tool).unwrap();
            (series.over_ceiling.clone(), series.over_recent.len())
        };
        assert_eq!(over(&state, "search"), (vec![("default".into(), 1000)], 1));
        assert_eq!(over(&state, "fetch"), (vec![("default".into(), 1000)], 1));
        // Over `old` alone once `default` allows more.
        let looser = config(
            "[layers]\nstack = [\"old\", \"default\"]\nceiling_bytes = 200000\n\
             [[layers.custom]]\nname = \"old\"\nlimit = 100000\nunit = \"bytes\"\n",
        );
        let (stacks, bounds) = layers(&looser);
        let done = state.restack(stacks, bounds);
        assert!(done.dropped.is_empty(), "{done:?}");
        state.record(&rec("fetch", known(150_000)), 1_000);
        assert_eq!(
            over(&state, "fetch"),
            (vec![("default".into(), 1000), ("old".into(), 1000)], 2)
        );

        // `default` stays (now first in the list: another position), `old` goes, a custom
        // layer comes.
        let after = config(
            "[layers]\nstack = [\"default\", \"mine\"]\nceiling_bytes = 10000\n\
             [[layers.custom]]\nname = \"mine\"\nlimit = 200000\nunit = \"bytes\"\n",
        );
        let (stacks, bounds) = layers(&after);
        let done = state.restack(stacks, bounds);
        assert_eq!(done.dropped, [("old".to_string(), 1000)]);
        assert_eq!(done.series_moved, 2);
        assert_eq!(over(&state, "search"), (vec![("default".into(), 1000)], 1));
        assert_eq!(over(&state, "fetch"), (vec![("default".into(), 1000)], 1));
        let (_, search) = state
            .series
            .iter()
            .find(|(k, _)| k.tool == "search")
            .unwrap();
        let recent = search.over_recent[0]
            .view(&state.limits.stacks.all)
            .unwrap();
        assert_eq!(recent.layer, "default");
        // The new ceiling holds at once; the new layer starts at zero and counts.
        let c = state.limits.stacks.ceiling(&search.profile).unwrap();
        assert_eq!((c.layer_id, c.bytes), ("default", 10_000));
        state.record(&rec("search", known(15_000)), 1_001);
        state.record(&rec("fetch", known(300_000)), 1_001);
        assert_eq!(over(&state, "search"), (vec![("default".into(), 2000)], 2));
        assert_eq!(
            over(&state, "fetch"),
            (vec![("default".into(), 2000)], 2),
            "the weakest cutting layer is default, whose 10,000 bytes are under mine's"
        );
    }

    #[test]
    fn bucket_counts_keep_every_shared_bound_exact_and_never_go_down() {
        let before = config("[layers]\nceiling_bytes = 20000\n");
        let mut state = State::new(Limits::from_config(&before));
        for (i, b) in [1_000, 9_000, 15_000, 19_000, 21_000, 40_000]
            .iter()
            .enumerate()
        {
            state.record(&rec("t", known(*b)), 1_000 + i as u64);
        }
        let cumulative = |bounds: &[u64], counts: &[u64], at: u64| -> u64 {
            let i = bounds.iter().position(|&b| b == at).unwrap();
            counts[..=i].iter().sum()
        };
        let old_bounds = state.limits.size_bounds.clone();
        let old = state.series.values().next().unwrap().size_buckets.clone();
        let (stacks, bounds) = layers(&config("[layers]\nceiling_bytes = 10000\n"));
        state.restack(stacks, bounds);
        let new_bounds = state.limits.size_bounds.clone();
        let new = state.series.values().next().unwrap().size_buckets.clone();
        assert_eq!(new.len(), new_bounds.len() + 1);
        assert_eq!(new.iter().sum::<u64>(), 6);
        for b in old_bounds.iter().filter(|b| new_bounds.contains(b)) {
            assert_eq!(
                cumulative(&new_bounds, &new, *b),
                cumulative(&old_bounds, &old, *b),
                "at {b}"
            );
        }
        // The new ceiling is a bound, with the results at or under it counted.
        assert_eq!(cumulative(&new_bounds, &new, 10_000), 2);
    }

    #[test]
    fn rebucket_holds_estimates_between_exact_neighbours() {
        // Old bounds 10 and 30 (+Inf): 2 results ≤ 10, 3 ≤ 30, 4 in all.
        let got = rebucket(&[10, 30], &[2, 1, 1], &[10, 20, 30, 40], &[2, 5, 0, 0, 0]);
        // At 20 the estimate says 7, more than the 3 known at 30: held to 3. At 40 (past the
        // last old bound) it is held to the 4 results in all.
        assert_eq!(got, [2, 1, 0, 1, 0]);
        let cum: Vec<u64> = got
            .iter()
            .scan(0, |a, c| {
                *a += c;
                Some(*a)
            })
            .collect();
        assert!(cum.windows(2).all(|w| w[0] <= w[1]));
    }
}
