//! Per (service, tool): what its results cost the context (results, tokens, cumulative cost,
//! the share of each request's input), and the per-request cache that resolves a result's tool.
//!
//! **Under load.** A result's tool is found first by the addresses of its service's and tool's
//! names, which one request's records share ([`Ledger::tool_of`]): one lookup by name per tool
//! and request. A share costs a bucket and a slot of a ring of [`SHARE_RECENT`]; its quantiles
//! are computed when read. **Bounded** by `aggregation.max_series` tools: the results of a
//! further tool are counted in [`super::LedgerStats::tools_overflow`], nothing is evicted.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Ledger, SHARE_BOUNDS, SHARE_RECENT};

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

    pub(super) fn observe_share(&mut self, share: f64) {
        // The bounds below it, counted without a branch (the bounds are sorted: the same
        // index as a binary search's).
        let i = SHARE_BOUNDS.iter().filter(|&&b| b < share).count();
        self.share_buckets[i] += 1;
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
