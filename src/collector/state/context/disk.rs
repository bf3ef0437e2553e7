//! The ledger as a snapshot keeps it: per-tool totals and the counts of what it dropped; not
//! its open sessions.
//!
//! **On failure.** A restore into a ledger whose `max_tools` was lowered leaves the further
//! tools out and says how many; a share layout of another length starts that tool's recent
//! shares empty rather than failing the restore.

use std::sync::Arc;

use super::{Ledger, LedgerStats, SHARE_BOUNDS, SHARE_RECENT};

impl Ledger {
    /// Its totals as the snapshot keeps them: per tool, its recent shares oldest first.
    pub(crate) fn to_disk(&self) -> LedgerDisk {
        let mut tools: Vec<ToolDisk> = self
            .index
            .iter()
            .map(|((service, tool), &i)| {
                let t = &self.tools[i as usize];
                let (newer, older) = t.recent.split_at(t.next.min(t.recent.len()));
                let recent = if t.recent.len() < SHARE_RECENT {
                    t.recent.clone()
                } else {
                    older.iter().chain(newer).copied().collect()
                };
                ToolDisk {
                    service: service.to_string(),
                    tool: tool.to_string(),
                    results: t.results,
                    result_tokens: t.result_tokens,
                    estimated: t.estimated,
                    cost: t.cost,
                    requests: t.requests,
                    share_buckets: t.share_buckets.to_vec(),
                    share_sum: t.share_sum,
                    recent,
                }
            })
            .collect();
        tools.sort_by(|a, b| (&a.service, &a.tool).cmp(&(&b.service, &b.tool)));
        let st = self.stats;
        LedgerDisk {
            tools,
            sessions_overflow: st.sessions_overflow,
            results_dropped: st.results_dropped,
            tools_overflow: st.tools_overflow,
            sessions_expired: st.sessions_expired,
            results_late: st.results_late,
        }
    }

    /// Restores the totals of a snapshot into this (empty) ledger; tools past its
    /// `max_tools` (lowered since) are left out and their number returned. A share layout of
    /// another length (a file checked by `persist::verify` has the current one) starts empty.
    pub(crate) fn restore(&mut self, c: LedgerDisk) -> usize {
        self.stats = LedgerStats {
            sessions_overflow: c.sessions_overflow,
            results_dropped: c.results_dropped,
            tools_overflow: c.tools_overflow,
            sessions_expired: c.sessions_expired,
            results_late: c.results_late,
        };
        let mut left_out = 0;
        for t in c.tools {
            let (service, tool): (Arc<str>, Arc<str>) = (t.service.into(), t.tool.into());
            let Some(i) = self.tool_index(&service, &tool) else {
                left_out += 1;
                continue;
            };
            let ctx = &mut self.tools[i as usize];
            (ctx.results, ctx.result_tokens, ctx.estimated) =
                (t.results, t.result_tokens, t.estimated);
            (ctx.cost, ctx.requests, ctx.share_sum) = (t.cost, t.requests, t.share_sum);
            if let Ok(b) = <[u64; SHARE_BOUNDS.len() + 1]>::try_from(t.share_buckets.as_slice()) {
                ctx.share_buckets = b;
            }
            let keep = t.recent.len().saturating_sub(SHARE_RECENT);
            ctx.recent = t.recent[keep..].to_vec();
            ctx.next = ctx.recent.len() % SHARE_RECENT;
        }
        left_out
    }
}

/// The context ledger's totals: what each (service, tool)'s results cost the context and what
/// the ledger dropped, since the state started. Its open sessions are not kept (up to
/// `context.max_sessions` × `context.max_results_per_session` results): after a restart a
/// session carries the results it gets from then on; with the write-ahead log, replay rebuilds
/// the sessions of what it replays.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct LedgerDisk {
    /// Per (service, tool).
    pub(crate) tools: Vec<ToolDisk>,
    /// Events of sessions past `context.max_sessions`.
    pub(crate) sessions_overflow: u64,
    /// Results past a session's `context.max_results_per_session`.
    pub(crate) results_dropped: u64,
    /// Results of tools past `aggregation.max_series`.
    pub(crate) tools_overflow: u64,
    /// Sessions ended by `context.session_idle`.
    pub(crate) sessions_expired: u64,
    /// Results that arrived after a request they preceded.
    pub(crate) results_late: u64,
}

impl LedgerDisk {
    /// Nothing followed, nothing dropped.
    pub(crate) fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// What one (service, tool)'s results cost the context.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct ToolDisk {
    /// `service.name`.
    pub(crate) service: String,
    /// Tool name.
    pub(crate) tool: String,
    /// Results that entered a context.
    pub(crate) results: u64,
    /// Their tokens.
    pub(crate) result_tokens: u64,
    /// Of `results`, those whose tokens were estimated.
    pub(crate) estimated: u64,
    /// Cumulative context cost.
    pub(crate) cost: u64,
    /// Requests that carried at least one of its results.
    pub(crate) requests: u64,
    /// Non-cumulative counts of the share per [`SHARE_BOUNDS`], +Inf last.
    pub(crate) share_buckets: Vec<u64>,
    /// Sum of the shares.
    pub(crate) share_sum: f64,
    /// The shares of the last requests that carried it (at most [`SHARE_RECENT`]), oldest first.
    pub(crate) recent: Vec<f32>,
}

#[cfg(test)]
mod tests {
    use super::super::tests::{request, result};
    use super::super::*;

    /// The totals written to a snapshot and restored give the same rows, the recent shares in
    /// their order (the oldest is the next replaced); sessions are not kept.
    #[test]
    fn totals_survive_a_snapshot_and_the_share_ring_keeps_its_order() {
        let mut l = Ledger::new(LedgerLimits::default());
        let mut events = vec![result("s", 0, "Read", 100)];
        // More requests than the ring holds, each input a little larger: shares fall.
        for k in 1..=(SHARE_RECENT as u64 + 40) {
            events.push(request("s", k, 1000 + k));
        }
        events.push(result("s", 0, "late", 5));
        l.record(events, 0);
        let disk = l.to_disk();
        let json = serde_json::to_string(&disk).unwrap();
        let back: LedgerDisk = serde_json::from_str(&json).unwrap();
        assert_eq!(
            back, disk,
            "every number, f32 and f64 included, read back as written"
        );
        let mut r = Ledger::new(LedgerLimits::default());
        assert_eq!(r.restore(back), 0);
        assert_eq!(r.stats, l.stats);
        assert_eq!(r.stats.results_late, 1);
        for tool in ["Read", "late"] {
            let (a, b) = (
                l.tool("agent", tool).unwrap(),
                r.tool("agent", tool).unwrap(),
            );
            assert_eq!(a.row(), b.row(), "{tool}");
            assert_eq!(
                (a.share_buckets, a.share_sum),
                (b.share_buckets, b.share_sum)
            );
        }
        assert_eq!(r.sessions(), 0);
        // The same next request on both: the same share replaces the same oldest one.
        for x in [&mut l, &mut r] {
            x.record(vec![result("t", 0, "Read", 900), request("t", 1, 1000)], 0);
        }
        assert_eq!(l.to_disk(), r.to_disk());
        // Past a lowered tool cap, tools are left out and counted.
        let mut small = Ledger::new(LedgerLimits {
            max_tools: 1,
            ..LedgerLimits::default()
        });
        assert_eq!(small.restore(l.to_disk()), 1);
    }
}
