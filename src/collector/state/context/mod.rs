//! The context ledger: per session, the tool results in the conversation's context and the
//! model requests that carried them; per tool, what its results cost the context.
//!
//! A result that entered a session's context at time *t* rides in every later model request of
//! the session (a request starting at or after *t*) until a compaction removes it or the session
//! ends. Per (service, tool) the ledger counts:
//!
//! - the **result tokens** added (and how many of them were estimated from a size);
//! - the **cumulative context cost**: Σ over requests of the tokens of the tool's results that
//!   request carried (49k tokens carried by 100 later requests cost 4.9M);
//! - the **share of input tokens** per request: the tool's carried tokens over the request's
//!   input tokens (uncached, cache reads and cache writes together), as a classic histogram
//!   since start and p50/p95 over its last [`SHARE_RECENT`] requests.
//!
//! Events are applied in the order they arrive, each against what the session holds then: a
//! request carries the results that ended at or before its start; a result that arrives after a
//! request it preceded is carried from the next request on (the agents and SDKs export in the
//! order things end, so this only happens across a lost or late batch). An event that
//! [settles](ContextEvent::settles) (Codex's requests: its results come on another signal, on
//! another timer) waits the join window first, in arrival order, at most [`MAX_SETTLING`] of
//! them (past it the oldest is applied early); a shutdown applies every waiting one.
//!
//! **Bounded.** Sessions are never labels: they are shown by `/api/v1/sessions` only. At most
//! `context.max_sessions` sessions are followed; an event of a further session is counted in
//! [`LedgerStats::sessions_overflow`] and not followed (like the series cap, nothing is
//! evicted to make room). A session holds at most `context.max_results_per_session` results
//! (16 bytes each); further ones are counted in [`LedgerStats::results_dropped`] and not carried.
//! A session without events for `context.session_idle` has ended and is dropped, checked at
//! most once a second. Tools are bounded by `aggregation.max_series` (their results counted in
//! [`LedgerStats::tools_overflow`] beyond). Memory is therefore at most `max_sessions` ×
//! (`max_results_per_session` × 16 bytes + the session's id) plus `max_series` × the
//! [`ToolContext`] of a tool (about 1.2 KiB): filled to the default cap (5,000 sessions of 512
//! results) about 51,000 kB resident, 91,964 kB at 10,000 (`memory_at_the_default_cap`,
//! `memory_at_the_earlier_cap`, ignored tests run one per process).
//!
//! **Under load.** The ledger runs on the aggregator, after the spans' own work, so its cost
//! is per event: one lookup of the session by a borrowed key (nothing cloned for a session
//! already followed), the tool's index from a per-request cache of the names the request's
//! records share, and a session's first six tools' carried tokens in its own entry. A tool
//! span's result arrives as its record's index and is read from the record once, in place
//! (`apply.rs`); a model request read from a span arrives as the few numbers the ledger reads
//! of it, its service cloned once a request rather than once an event. A request of many
//! sessions (one per trace) has its events applied session by session, each session's entry
//! looked up once per run of its events rather than once per event among the others', and the
//! requests the aggregator holds together are applied together, a session's events of all of
//! them in one run ([`Ledger::record_batches`]). Per
//! model request, each tool it carries costs its sums and a share bucketed by integer
//! compares against the request's input scaled once (`tools.rs`). On the storm mix a request's 256 sessions are each a cache miss when the daemon is
//! otherwise idle between requests: the ledger's largest cost there (`docs/collector.md`).
//!
//! **Restarts.** A snapshot keeps the per-tool totals and the counts of what the ledger
//! dropped ([`Ledger::to_disk`], [`Ledger::restore`]); its open sessions are not kept (at the
//! cap, five million held results): after a restart a session carries only the results it gets
//! from then on. With the write-ahead log on, replay feeds the context events of every logged
//! request above the snapshot into the ledger as they first arrived, sessions included, so a
//! `kill -9` loses nothing of what the log holds.

//!
//! Its rooms: the session table's entries and the sums a request reads from them
//! (`session.rs`), the per-tool totals and shares and the per-request cache of tool indexes
//! (`tools.rs`), the queue of events waiting to settle (`settle.rs`), the form a snapshot keeps
//! (`disk.rs`), `/api/v1/sessions` (`view.rs`) and how a request's events are applied
//! (`apply.rs`); this file holds the ledger itself.

mod apply;
mod disk;
mod session;
mod settle;
#[cfg(test)]
mod storm;
mod tools;
mod view;

use std::sync::Arc;

use crate::collector::ingest::context::ContextEvent;
use crate::collector::state::MapHasher;

use apply::Pending;
pub(crate) use disk::{LedgerDisk, ToolDisk};
use session::{Session, SessionKey};
use tools::ToolCache;
pub(crate) use tools::{ToolContext, ToolContextRow};
pub(crate) use view::{SessionsView, DEFAULT_SESSIONS_SHOWN, MAX_SESSIONS_SHOWN};

/// Requests whose share is kept per tool for its p50 and p95.
pub(crate) const SHARE_RECENT: usize = 256;

/// Upper bounds of the classic `toolsize_tool_context_share` buckets.
pub(crate) const SHARE_BOUNDS: &[f64] = &[0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 0.9, 1.0];

/// [`SHARE_BOUNDS`] in percent: a share's bucket is found by integer compares
/// ([`tools::Input`]).
const SHARE_BOUNDS_PERCENT: [u64; SHARE_BOUNDS.len()] = [1, 2, 5, 10, 20, 30, 40, 50, 70, 90, 100];

/// How often idle sessions are looked for, milliseconds.
const EXPIRY_EVERY_MS: u64 = 1000;

/// What bounds the ledger (`[context]`, and `aggregation.max_series` for its tools).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LedgerLimits {
    /// Sessions followed at once.
    pub(crate) max_sessions: usize,
    /// Results held per session.
    pub(crate) max_results: usize,
    /// Idle time after which a session has ended, milliseconds.
    pub(crate) idle_ms: u64,
    /// Tools followed.
    pub(crate) max_tools: usize,
    /// How long an event whose session's results travel on another signal waits before it
    /// is applied ([`ContextEvent::settles`]), milliseconds: the join window.
    pub(crate) settle_ms: u64,
}

impl Default for LedgerLimits {
    fn default() -> Self {
        Self {
            max_sessions: 5_000,
            max_results: 512,
            idle_ms: 1_800_000,
            max_tools: 2000,
            settle_ms: super::join::DEFAULT_JOIN_WINDOW_MS,
        }
    }
}

/// What the ledger dropped or ended, counted since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LedgerStats {
    /// Events of sessions past `context.max_sessions`, not followed.
    pub(crate) sessions_overflow: u64,
    /// Results past a session's `context.max_results_per_session`, not carried.
    pub(crate) results_dropped: u64,
    /// Results of tools past `aggregation.max_series`, not followed.
    pub(crate) tools_overflow: u64,
    /// Sessions ended by `context.session_idle`.
    pub(crate) sessions_expired: u64,
    /// Results that arrived after a request they preceded had been applied: not carried by
    /// it (an emitter that sends its results and its requests on separate signals, as Codex,
    /// can deliver them out of order).
    pub(crate) results_late: u64,
}

/// The ledger; owned by the aggregator's state.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    limits: LedgerLimits,
    /// Keyed by the daemon's seeded hasher ([`MapHasher`], foldhash): session and trace ids are
    /// chosen by clients, and ids that differ only in their last bytes (as trace ids may) must
    /// not share a bucket (under an unseeded multiplicative mix they did, turning every lookup
    /// into a walk of the map). Looked up by a borrowed key: nothing is cloned or dropped for
    /// an event of a session already followed.
    /// A table, not a map: each event's hash, taken once to group the request's events
    /// ([`Ledger::record`]), finds its entry.
    sessions: hashbrown::HashTable<(SessionKey, Session)>,
    hasher: MapHasher,
    index: hashbrown::HashMap<(Arc<str>, Arc<str>), u32, MapHasher>,
    tools: Vec<ToolContext>,
    /// What it dropped and ended.
    pub(crate) stats: LedgerStats,
    expired_at_ms: u64,
    scratch: Vec<(u32, u64)>,
    /// Per request: (service name's address, tool name's address, tool index), by
    /// [`Ledger::tool_of`]'s slot; zeros when empty.
    tool_cache: ToolCache,
    /// The events of the request being applied, in the order they are applied, and the
    /// buffer [`Ledger::group`] sorts them into (kept: no allocation per request).
    order: Vec<Pending>,
    sorted: Vec<Pending>,
    /// The services of the request's records being applied, by [`Pending`]'s index.
    services: Vec<Arc<str>>,
    /// Events waiting for results on another signal, with when they are due, in arrival order.
    settling: std::collections::VecDeque<(u64, ContextEvent)>,
}

impl Ledger {
    /// An empty ledger.
    pub(crate) fn new(limits: LedgerLimits) -> Self {
        Self {
            limits,
            ..Self::default()
        }
    }

    /// Sessions followed now.
    pub(crate) fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// Applies `events`, none of them a record's, as one request's (tests).
    #[cfg(test)]
    pub(crate) fn record(&mut self, events: Vec<ContextEvent>, now_ms: u64) {
        self.record_batch(&events.into(), &[], now_ms);
    }

    /// Drops the sessions idle for `context.session_idle`, at most once a second.
    pub(crate) fn expire(&mut self, now_ms: u64) {
        if now_ms < self.expired_at_ms.saturating_add(EXPIRY_EVERY_MS) {
            return;
        }
        self.expired_at_ms = now_ms;
        let idle = self.limits.idle_ms;
        let before = self.sessions.len();
        self.sessions
            .retain(|(_, s)| s.last_ms.saturating_add(idle) > now_ms);
        self.stats.sessions_expired += (before - self.sessions.len()) as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collector::ingest::context::{ContextEvents, ContextKind, SessionId};

    pub(super) fn ev(session: &str, at_ns: u64, kind: ContextKind) -> ContextEvent {
        ContextEvent {
            service: "agent".into(),
            session: SessionId::Named(session.into()),
            at_ns,
            kind,
            settles: false,
        }
    }

    pub(super) fn result(session: &str, at_ns: u64, tool: &str, tokens: u64) -> ContextEvent {
        ev(
            session,
            at_ns,
            ContextKind::Result {
                tool: tool.into(),
                tokens,
                estimated: true,
            },
        )
    }

    pub(super) fn request(session: &str, at_ns: u64, input: u64) -> ContextEvent {
        ev(
            session,
            at_ns,
            ContextKind::Request {
                input,
                cache_read: input / 2,
                cache_creation: 0,
            },
        )
    }

    /// A scripted session, its cost worked out by hand:
    ///
    /// | t | event | Read carried | Bash carried |
    /// |---|---|---|---|
    /// | 1 | request (1,000 input) | – | – |
    /// | 2 | Read → 4,000 tokens | | |
    /// | 3 | request (6,000) | 4,000 (share 0.667) | – |
    /// | 4 | Bash → 1,000 | | |
    /// | 5 | request (8,000) | 4,000 (0.5) | 1,000 (0.125) |
    /// | 6 | compaction | | |
    /// | 7 | Bash → 500 | | |
    /// | 8 | request (2,000) | – | 500 (0.25) |
    ///
    /// Read: 4,000 × 2 requests = 8,000; Bash: 1,000 + 500 = 1,500.
    #[test]
    fn a_scripted_session_costs_what_was_worked_out_by_hand() {
        let mut l = Ledger::new(LedgerLimits::default());
        l.record(
            vec![
                request("s", 1, 1000),
                result("s", 2, "Read", 4000),
                request("s", 3, 6000),
                result("s", 4, "Bash", 1000),
                request("s", 5, 8000),
                ev("s", 6, ContextKind::Clear),
                result("s", 7, "Bash", 500),
                request("s", 8, 2000),
            ],
            1000,
        );
        let read = l.tool("agent", "Read").unwrap();
        assert_eq!(
            (read.cost, read.requests, read.result_tokens),
            (8000, 2, 4000)
        );
        let bash = l.tool("agent", "Bash").unwrap();
        assert_eq!(
            (bash.cost, bash.requests, bash.result_tokens),
            (1500, 2, 1500)
        );
        assert_eq!(read.share_quantile(0.5), Some(0.5));
        assert_eq!(read.share_quantile(0.95), Some(f64::from(4000f32 / 6000.0)));
        assert_eq!(bash.share_quantile(0.95), Some(0.25));
        assert_eq!(bash.share_buckets.iter().sum::<u64>(), 2);
        // 0.125 is in (0.1, 0.2], 0.25 in (0.2, 0.3].
        assert_eq!((bash.share_buckets[4], bash.share_buckets[5]), (1, 1));
        let v = l.sessions_view(10, None, 3000);
        let s = &v.sessions[0];
        assert_eq!(
            (
                s.requests,
                s.results,
                s.context_tokens,
                s.input_tokens,
                s.held
            ),
            (4, 3, 9500, 17000, 1)
        );
        assert_eq!(
            (s.compactions, s.idle_secs, s.by.as_str()),
            (1, 2, "session")
        );
    }

    /// A result that ended after a request started is not in it; two sessions do not share
    /// results; the heaviest session is listed first.
    #[test]
    fn requests_carry_only_their_own_sessions_earlier_results() {
        let mut l = Ledger::new(LedgerLimits::default());
        l.record(
            vec![
                result("a", 10, "grep", 100),
                result("b", 10, "grep", 7),
                request("a", 5, 1000),
                request("a", 20, 1000),
                request("a", 30, 1000),
                request("b", 20, 0),
            ],
            0,
        );
        let g = l.tool("agent", "grep").unwrap();
        assert_eq!((g.cost, g.requests), (207, 3));
        // The request with no input tokens has no share.
        assert_eq!(g.share_buckets.iter().sum::<u64>(), 2);
        let v = l.sessions_view(1, None, 0);
        assert_eq!(v.sessions.len(), 1);
        assert_eq!((v.sessions[0].session.as_str(), v.followed), ("a", 2));
        assert!(l.sessions_view(5, Some("other"), 0).sessions.is_empty());
    }

    /// The caps: sessions past `max_sessions` are counted and not followed, results past a
    /// session's `max_results` are counted and not carried, tools past `max_tools` are counted;
    /// idle sessions end and make room.
    #[test]
    fn the_ledger_is_bounded_and_idle_sessions_end() {
        let mut l = Ledger::new(LedgerLimits {
            max_sessions: 2,
            max_results: 1,
            idle_ms: 60_000,
            max_tools: 2,
            settle_ms: 0,
        });
        l.record(
            vec![
                result("a", 1, "t1", 10),
                result("a", 2, "t1", 10),
                result("b", 1, "t2", 10),
                result("c", 1, "t1", 10),
                result("a", 3, "t3", 10),
                request("a", 9, 100),
            ],
            1_000,
        );
        assert_eq!(l.sessions(), 2);
        assert_eq!(
            l.stats,
            LedgerStats {
                sessions_overflow: 1,
                results_dropped: 1,
                tools_overflow: 1,
                sessions_expired: 0,
                results_late: 0,
            }
        );
        assert_eq!(l.tool("agent", "t1").unwrap().cost, 10);
        l.record(vec![request("b", 9, 100)], 30_000);
        l.record(vec![result("c", 1, "t1", 10)], 62_000);
        assert_eq!(l.stats.sessions_expired, 1, "a was idle for a minute");
        assert_eq!(l.sessions(), 2, "c took a's place");
    }

    /// A result that arrives after a request it preceded is carried from the next request on;
    /// a request that started before an earlier one carries what had ended by its start.
    #[test]
    fn late_results_and_requests_out_of_order_carry_what_had_ended() {
        let mut l = Ledger::new(LedgerLimits::default());
        l.record(
            vec![
                result("s", 10, "a", 100),
                request("s", 20, 1000),
                // Ended at 5, before the request at 20 that did not carry it.
                result("s", 5, "b", 10),
                request("s", 30, 1000),
                // Started at 15, before the one at 30: both had ended and arrived.
                request("s", 15, 1000),
                ev("s", 12, ContextKind::Clear),
                request("s", 40, 1000),
            ],
            0,
        );
        assert_eq!(l.stats.results_late, 1, "b arrived after the request at 20");
        // a: 100 × (20, 30, 15) = 300, b: 10 × (30, 15) = 20; then both cleared.
        assert_eq!(l.tool("agent", "a").unwrap().cost, 300);
        assert_eq!(l.tool("agent", "b").unwrap().cost, 20);
        assert_eq!(l.sessions_view(1, None, 0).sessions[0].held, 0);
    }

    /// Twenty thousand trace ids that differ only in their last four bytes (as a client may
    /// send them) are followed in well under two seconds: the session map does not degrade to a
    /// list (under the Fx mix they share one bucket: 3.7 s in a debug build).
    #[test]
    fn trace_ids_differing_in_their_last_bytes_do_not_collide() {
        let mut l = Ledger::new(LedgerLimits {
            max_sessions: 20_000,
            ..LedgerLimits::default()
        });
        let t0 = std::time::Instant::now();
        for n in 0u32..20_000 {
            let mut id = [0xEE; 16];
            id[12..].copy_from_slice(&n.to_be_bytes());
            let mut e = result("x", 1, "t", 1);
            e.session = SessionId::Trace(id);
            l.record(vec![e], 0);
        }
        assert_eq!(l.sessions(), 20_000);
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            t0.elapsed()
        );
    }

    /// Resident memory of this process, kB (`/proc/self/status` `VmRSS`).
    fn rss_kb() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Fills a ledger of `limits` as its worst case: every session followed (distinct trace
    /// ids, as a client sends them), each holding its most results; prints the resident memory
    /// it added.
    fn fill_and_measure(limits: LedgerLimits) {
        let before = rss_kb();
        let mut l = Ledger::new(limits);
        for n in 0..limits.max_sessions as u32 {
            let mut id = [0x5A; 16];
            id[12..].copy_from_slice(&n.to_be_bytes());
            let events = (0..limits.max_results as u64)
                .map(|k| {
                    let mut e = result("x", k, ["Read", "Bash", "Grep"][k as usize % 3], 500);
                    e.session = SessionId::Trace(id);
                    e
                })
                .collect();
            l.record(events, 0);
        }
        assert_eq!(l.sessions(), limits.max_sessions);
        assert_eq!(l.stats.sessions_overflow, 0);
        let added = rss_kb() - before;
        println!(
            "ledger at its cap ({} sessions x {} results): {added} kB resident",
            limits.max_sessions, limits.max_results
        );
        std::hint::black_box(&l);
    }

    /// The memory at the default cap. A measurement, run alone (one process per figure):
    /// `cargo test --all-features --lib memory_at_the_default_cap -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement: prints the resident memory the ledger takes at its default cap"]
    fn memory_at_the_default_cap() {
        fill_and_measure(LedgerLimits::default());
    }

    /// The same at a cap of 10,000 sessions, for comparison:
    /// `cargo test --all-features --lib memory_at_the_earlier_cap -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement: prints the resident memory the ledger takes at 10,000 sessions"]
    fn memory_at_the_earlier_cap() {
        fill_and_measure(LedgerLimits {
            max_sessions: 10_000,
            ..LedgerLimits::default()
        });
    }

    /// A request of many sessions, applied session by session, costs what its events cost
    /// applied one request each in arrival order, and so do several requests applied together;
    /// a session of more tools than its entry holds carries them all.
    #[test]
    fn a_request_of_many_sessions_costs_what_its_events_cost_one_by_one() {
        let events = events_of_many_sessions();
        let mut grouped = Ledger::new(LedgerLimits::default());
        grouped.record(events.clone(), 0);
        let mut one_by_one = Ledger::new(LedgerLimits::default());
        for e in events {
            one_by_one.record(vec![e], 0);
        }
        for t in 0..9 {
            let tool = format!("t{t}");
            let (a, b) = (
                grouped.tool("agent", &tool).unwrap(),
                one_by_one.tool("agent", &tool).unwrap(),
            );
            assert_eq!(
                (a.cost, a.requests, a.result_tokens),
                (b.cost, b.requests, b.result_tokens)
            );
            assert_eq!(a.share_buckets, b.share_buckets, "{tool}");
        }
        // Session s0 at its last request carries t0..t8 (nine tools, six in its entry).
        let s0: u64 = (0..40u64).map(|k| 10 * (40 - k)).sum();
        assert_eq!(grouped.sessions_view(9, None, 0).sessions.len(), 9);
        let row = |l: &Ledger| {
            let v = l.sessions_view(MAX_SESSIONS_SHOWN, None, 0);
            v.sessions.into_iter().find(|r| r.session == "s0").unwrap()
        };
        assert_eq!(row(&grouped), row(&one_by_one));
        assert_eq!(row(&grouped).context_tokens, s0);

        // The same events as four requests applied together, as the aggregator applies the
        // batches it holds: the same costs, shares and sessions.
        let quarters: Vec<ContextEvents> = events_of_many_sessions()
            .chunks(180)
            .map(|c| c.to_vec().into())
            .collect();
        assert_eq!(quarters.len(), 4);
        let mut together = Ledger::new(LedgerLimits::default());
        let batches: Vec<_> = quarters.iter().map(|c| (c, &[][..])).collect();
        together.record_batches(&batches, 0);
        for t in 0..9 {
            let tool = format!("t{t}");
            let (a, b) = (
                together.tool("agent", &tool).unwrap(),
                one_by_one.tool("agent", &tool).unwrap(),
            );
            assert_eq!(
                (a.cost, a.requests, a.result_tokens, &a.share_buckets),
                (b.cost, b.requests, b.result_tokens, &b.share_buckets),
                "{tool}"
            );
        }
        assert_eq!(row(&together), row(&one_by_one));
    }

    /// Nine sessions' results and requests, interleaved: 720 events.
    fn events_of_many_sessions() -> Vec<ContextEvent> {
        let mut events = Vec::new();
        for k in 0..40u64 {
            for s in 0..9u64 {
                let session = format!("s{s}");
                let tool = format!("t{}", (k + s) % 9);
                events.push(result(&session, 2 * k, &tool, 10 + k * s));
                events.push(request(&session, 2 * k + 1, 5_000 + k));
            }
        }
        events
    }
}
