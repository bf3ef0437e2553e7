//! Per (service, tool): what its results cost the context (results, tokens, cumulative cost,
//! the share of each request's input), and the per-request cache that resolves a result's tool.
//!
//! **Under load.** A result's tool is found first by the addresses of its service's and tool's
//! names, which one request's records share ([`Ledger::tool_of`]): one lookup by name per tool
//! and request. A share costs a bucket and a slot of a ring of [`SHARE_RECENT`]; its quantiles
//! are computed when read. A request's input tokens are scaled to the bucket bounds once
//! ([`Input`]), so that each of its tools finds its bucket by integer compares, without waiting
//! on the division that gives its share (about 40 tools a request on the storm mix). **Bounded** by `aggregation.max_series` tools: the results of a
//! further tool are counted in [`super::LedgerStats::tools_overflow`], nothing is evicted.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Ledger, SHARE_BOUNDS, SHARE_BOUNDS_PERCENT, SHARE_RECENT};

/// What one (service, tool)'s results cost the context.
#[derive(Debug, Clone)]
pub(crate) struct ToolContext {
    /// Results that entered a context.
    pub(crate) results: u64,
    /// Their tokens.
    pub(crate) result_tokens: u64,
    /// Of `results`, those whose tokens were estimated from their size.
    pub(crate) estimated: u64,
    /// Cumulative context cost: Σ over requests of the tool's tokens each carried.
    pub(crate) cost: u64,
    /// Requests that carried at least one of its results.
    pub(crate) requests: u64,
    /// Share of input tokens per request that carried it: non-cumulative counts per
    /// [`SHARE_BOUNDS`], +Inf last.
    pub(crate) share_buckets: [u64; SHARE_BOUNDS.len() + 1],
    /// Sum of the shares.
    pub(crate) share_sum: f64,
    pub(super) recent: Vec<f32>,
    pub(super) next: usize,
}

impl ToolContext {
    pub(super) fn new() -> Self {
        Self {
            results: 0,
            result_tokens: 0,
            estimated: 0,
            cost: 0,
            requests: 0,
            share_buckets: [0; SHARE_BOUNDS.len() + 1],
            share_sum: 0.0,
            recent: Vec::new(),
            next: 0,
        }
    }

    /// Observes the share of a request of `input` taken by `tokens`.
    #[inline]
    pub(super) fn observe_share(&mut self, input: &Input, tokens: u64) {
        let share = tokens as f64 * input.inverse;
        self.share_buckets[input.bucket(tokens, share)] += 1;
        self.share_sum += share;
        if self.recent.len() < SHARE_RECENT {
            self.recent.push(share as f32);
        } else {
            self.recent[self.next] = share as f32;
        }
        self.next = (self.next + 1) % SHARE_RECENT;
    }

    /// The share quantile `q` over the last [`SHARE_RECENT`] requests that carried the tool
    /// (nearest rank); `None` before the first.
    pub(crate) fn share_quantile(&self, q: f64) -> Option<f64> {
        let mut v = self.recent.clone();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f32::total_cmp);
        let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
        Some(f64::from(v[rank - 1]))
    }

    /// Its row in the API.
    pub(crate) fn row(&self) -> ToolContextRow {
        let round = |x: f64| (x * 10_000.0).round() / 10_000.0;
        ToolContextRow {
            results: self.results,
            result_tokens: self.result_tokens,
            estimated: self.estimated,
            context_tokens: self.cost,
            requests: self.requests,
            share_p50: self.share_quantile(0.5).map(round),
            share_p95: self.share_quantile(0.95).map(round),
        }
    }
}

/// A model request's input tokens, with the share bounds scaled to them: `bound × input`
/// against `tokens × 100` places a tool's share in its bucket exactly, with no division on the
/// way to the counter; the share itself (for the sum and the recent shares) is a multiply by
/// the inverse, within a few units in the last place of the division.
#[derive(Debug, Clone, Copy)]
pub(super) struct Input {
    tokens: u64,
    /// `1 / tokens`: a share is a multiply, not a division that each tool waited on.
    inverse: f64,
    /// `percent × tokens` per bound; `None` past `u64::MAX / 100` input tokens (the float
    /// share is compared then).
    scaled: Option<[u64; SHARE_BOUNDS.len()]>,
}

impl Input {
    /// A request's input tokens; `None` for none (a request without input has no share).
    pub(super) fn of(tokens: u64) -> Option<Self> {
        (tokens > 0).then(|| Self {
            tokens,
            inverse: 1.0 / tokens as f64,
            scaled: tokens
                .checked_mul(100)
                .map(|_| SHARE_BOUNDS_PERCENT.map(|p| p * tokens)),
        })
    }

    /// The bucket of `tokens` (whose share is `share`): the number of bounds below the share.
    #[inline]
    fn bucket(&self, tokens: u64, share: f64) -> usize {
        match self.scaled {
            // Above its input the share is above every bound (the last is 1.0); at or below
            // it, `tokens × 100` fits as `input × 100` does.
            Some(_) if tokens > self.tokens => SHARE_BOUNDS.len(),
            Some(scaled) => scaled.iter().filter(|&&b| b < tokens * 100).count(),
            None => SHARE_BOUNDS.iter().filter(|&&b| b < share).count(),
        }
    }
}

/// What a tool's results cost the context, on its row of `/api/v1/tools`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ToolContextRow {
    /// Results that entered a session's context.
    pub(crate) results: u64,
    /// Their tokens.
    pub(crate) result_tokens: u64,
    /// Of `results`, those whose tokens were estimated from their size (`ceil(size / 4)`).
    pub(crate) estimated: u64,
    /// Cumulative context cost: Σ over model requests of the tool's result tokens each carried.
    pub(crate) context_tokens: u64,
    /// Model requests that carried at least one of its results.
    pub(crate) requests: u64,
    /// Share of a request's input tokens taken by the tool's results, median over the last
    /// requests that carried them.
    pub(crate) share_p50: Option<f64>,
    /// The same, 95th percentile.
    pub(crate) share_p95: Option<f64>,
}

/// Slots of the per-request cache of tool indexes ([`Ledger::tool_of`]).
const TOOL_SLOTS: usize = 256;

/// Per request: (service name's address, tool name's address, tool index), by
/// [`Ledger::tool_of`]'s slot; zeros when empty.
#[derive(Debug)]
pub(super) struct ToolCache(pub(super) [(usize, usize, u32); TOOL_SLOTS]);

impl Default for ToolCache {
    fn default() -> Self {
        Self([(0, 0, 0); TOOL_SLOTS])
    }
}

/// A borrowed (service, tool) key: hashes as the owned tuple does (`str` and `Arc<str>` hash
/// alike).
#[derive(Hash)]
pub(super) struct ToolRef<'a>(&'a str, &'a str);

impl hashbrown::Equivalent<(Arc<str>, Arc<str>)> for ToolRef<'_> {
    fn equivalent(&self, key: &(Arc<str>, Arc<str>)) -> bool {
        self.0 == &*key.0 && self.1 == &*key.1
    }
}

impl Ledger {
    /// The context of (service, tool), if its results entered one (no allocation).
    pub(crate) fn tool(&self, service: &str, tool: &str) -> Option<&ToolContext> {
        self.index
            .get(&ToolRef(service, tool))
            .map(|&i| &self.tools[i as usize])
    }

    /// The index of a result's tool (`Some(None)` for another event: `tool` is `None`),
    /// `None` when the tools are full (counted). With `cached`, looked up first by the
    /// addresses of its service's and tool's names, which the records of one request share:
    /// one lookup by name per tool and request instead of one per result.
    pub(super) fn tool_of(
        &mut self,
        service: &Arc<str>,
        tool: Option<&Arc<str>>,
        cached: bool,
    ) -> Option<Option<u32>> {
        let Some(tool) = tool else {
            return Some(None);
        };
        let key = (
            Arc::as_ptr(service).cast::<u8>() as usize,
            Arc::as_ptr(tool).cast::<u8>() as usize,
        );
        // Allocations of one size class lie a fixed stride apart: a multiply spreads them.
        let mixed = (key.1 ^ key.0.rotate_left(29)) as u64;
        let slot = (mixed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize % TOOL_SLOTS;
        let (svc, t, i) = self.tool_cache.0[slot];
        if cached && (svc, t) == key {
            return Some(Some(i));
        }
        let Some(i) = self.tool_index(service, tool) else {
            self.stats.tools_overflow += 1;
            return None;
        };
        if cached {
            self.tool_cache.0[slot] = (key.0, key.1, i);
        }
        Some(Some(i))
    }

    /// The index of (service, tool), added while there is room.
    pub(super) fn tool_index(&mut self, service: &Arc<str>, tool: &Arc<str>) -> Option<u32> {
        if let Some(&i) = self.index.get(&ToolRef(service, tool)) {
            return Some(i);
        }
        if self.tools.len() >= self.limits.max_tools {
            return None;
        }
        let i = self.tools.len() as u32;
        self.tools.push(ToolContext::new());
        self.index.insert((service.clone(), tool.clone()), i);
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact bucket: the bounds below `tokens / input`, compared in 128 bits.
    fn exact_bucket(tokens: u64, input: u64) -> usize {
        let scaled = |p: u64| u128::from(p) * u128::from(input);
        let above = u128::from(tokens) * 100;
        SHARE_BOUNDS_PERCENT
            .iter()
            .filter(|&&p| scaled(p) < above)
            .count()
    }

    /// The percent bounds are the share bounds, and a share's bucket by integer compares is
    /// its exact bucket, which is the float share's bucket (how shares were bucketed before)
    /// wherever a double tells the share from the bound (inputs below 2^40 tokens here): on
    /// every bound exactly (a share equal to a bound is in its bucket), one token either side,
    /// above the input, and over a spread of inputs; past `u64::MAX / 100` input tokens the
    /// float share is compared.
    #[test]
    fn integer_buckets_are_the_exact_and_the_float_shares_buckets() {
        for (p, b) in SHARE_BOUNDS_PERCENT.iter().zip(SHARE_BOUNDS) {
            assert_eq!(*p as f64 / 100.0, *b);
        }
        let mut checked = 0;
        for input in (1..2_000u64).chain([1234, 99_999, 1 << 40, u64::MAX / 100]) {
            let i = Input::of(input).unwrap();
            let exact = SHARE_BOUNDS_PERCENT
                .iter()
                .filter(|&&p| (p * input) % 100 == 0);
            let on_bounds = exact.map(|&p| p * input / 100);
            let mut tokens: Vec<u64> = on_bounds
                .flat_map(|t| [t.saturating_sub(1), t, t + 1])
                .collect();
            tokens.extend([0, 1, input / 3, input - 1, input, input + 1, 3 * input]);
            for t in tokens {
                let share = t as f64 / input as f64;
                // The share observed, by the inverse, is the division's to a few units in the
                // last place (the 1 % the shares are held to is 10^13 times wider).
                let by_inverse = t as f64 * i.inverse;
                assert!(
                    (by_inverse - share).abs() <= 4.0 * f64::EPSILON * share,
                    "{t} of {input}"
                );
                let bucket = i.bucket(t, share);
                assert_eq!(bucket, exact_bucket(t, input), "{t} of {input}");
                if input <= 1 << 40 {
                    let float = SHARE_BOUNDS.iter().filter(|&&b| b < share).count();
                    assert_eq!(bucket, float, "{t} of {input}");
                }
                checked += 1;
            }
        }
        assert!(checked > 20_000, "{checked}");
        // A share exactly on a bound is in that bound's bucket: 20 of 100 is in (0.1, 0.2].
        assert_eq!(Input::of(100).unwrap().bucket(20, 0.2), 4);
        let huge = Input::of(u64::MAX / 10).unwrap();
        assert!(huge.scaled.is_none());
        assert_eq!(huge.bucket(u64::MAX / 20, 0.5), 7);
        assert!(Input::of(0).is_none());
    }
}
